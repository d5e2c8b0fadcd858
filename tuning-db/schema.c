/*
** schema.c: the tuning database's schema and its migrations.
**
** The schema version is PRAGMA user_version.  fs_store_open() calls
** fs_store__create_schema() for an empty file and fs_store__migrate() for an
** older version, both inside one transaction, so a crash or a second process
** never sees half a schema.  To change the schema: add version N+1's DDL
** here, add a migrate_N_to_N1() step that rebuilds what changed (SQLite's
** "create new table, copy, drop old, rename new" procedure, since ALTER TABLE
** cannot add constraints), bump FS_STORE_SCHEMA_VERSION, and add a test that
** builds a version-N file by hand and opens it.
**
** Version 1 (the first fs-tune; kept here for reference, the migration test
** builds it by hand):
**   PRAGMA application_id = 0x46536462;
**   CREATE TABLE runs(id INTEGER PRIMARY KEY, started_at TEXT NOT NULL,
**     device_name TEXT NOT NULL, arch TEXT NOT NULL, driver_version INTEGER,
**     nvrtc_version TEXT NOT NULL, generator_rev TEXT NOT NULL);
**   CREATE TABLE measurements(id INTEGER PRIMARY KEY,
**     run_id INTEGER NOT NULL REFERENCES runs(id), dtype TEXT NOT NULL,
**     hidden INTEGER NOT NULL, vocab INTEGER NOT NULL,
**     bucket INTEGER NOT NULL, variant TEXT NOT NULL,
**     params TEXT NOT NULL DEFAULT '', outcome TEXT NOT NULL,
**     median_us REAL, measured_at TEXT NOT NULL,
**     UNIQUE(run_id, dtype, hidden, vocab, bucket, variant));
**   PRAGMA user_version = 1;
**
** Version 2 (fs-tune before modes): RUNS_V2, MEASUREMENTS_V2 and
** INDEXES_AND_CUBINS_V2 below, which migrate_1_to_2() still builds (the
** tests build it by hand from the same text, tests/store_util.h):
**   CREATE TABLE measurements (id INTEGER PRIMARY KEY,
**     run_id INTEGER NOT NULL REFERENCES runs(id), dtype TEXT NOT NULL,
**     hidden INTEGER NOT NULL CHECK (hidden > 0),
**     vocab INTEGER NOT NULL CHECK (vocab > 0),
**     bucket INTEGER NOT NULL CHECK (bucket > 0), variant TEXT NOT NULL,
**     params TEXT NOT NULL DEFAULT '', outcome TEXT NOT NULL CHECK (outcome
**     IN ('ok', 'compile-failed', 'run-failed', 'wrong', 'spills')),
**     median_us REAL CHECK (outcome <> 'ok' OR median_us > 0),
**     spread_us REAL, samples INTEGER, floor_us REAL, registers INTEGER,
**     spills INTEGER, smem_bytes INTEGER, message TEXT, source_hash TEXT,
**     measured_at TEXT NOT NULL,
**     UNIQUE (run_id, dtype, hidden, vocab, bucket, variant));
**   CREATE INDEX measurements_shape ON
**     measurements(dtype, hidden, vocab, bucket);
**   PRAGMA user_version = 2;
** (runs, runs_context and cubins are as in version 3.)
**
** Version 3 (current) adds measurements.mode, what a time is of ('token',
** 'group16' or 'greedy'), to the row and its UNIQUE key, and to the end of
** measurements_shape; migrate_2_to_3() gives an older row the mode its run
** timed: schema-2 fs-tune marked greedy and grouped-noise runs only in
** runs.command_line (" (FS_TUNE_GREEDY=1)", " (FS_TUNE_NOISE=group16)"), the
** rest are 'token'.
*/
#include "store_int.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Version 2's tables (runs is unchanged in version 3).  The CHECKs keep a
** foreign writer from storing what the winner rule cannot interpret: an 'ok'
** row always has a time. */
#define RUNS_V2(name)                                                       \
  "CREATE TABLE " name " (\n"                                               \
  "  id INTEGER PRIMARY KEY,\n"                                             \
  "  uuid TEXT NOT NULL UNIQUE,\n"                                          \
  "  started_at TEXT NOT NULL,\n"                                           \
  "  finished_at TEXT,\n"                                                   \
  "  device_name TEXT NOT NULL,\n"                                          \
  "  arch TEXT NOT NULL,\n"                                                 \
  "  sm_count INTEGER,\n"                                                   \
  "  driver_version INTEGER,\n"                                             \
  "  nvrtc_version TEXT NOT NULL,\n"                                        \
  "  generator_rev TEXT NOT NULL,\n"                                        \
  "  host TEXT,\n"                                                          \
  "  command_line TEXT\n"                                                   \
  ");\n"

#define MEASUREMENTS_V2(name)                                               \
  "CREATE TABLE " name " (\n"                                               \
  "  id INTEGER PRIMARY KEY,\n"                                             \
  "  run_id INTEGER NOT NULL REFERENCES runs(id),\n"                        \
  "  dtype TEXT NOT NULL,\n"                                                \
  "  hidden INTEGER NOT NULL CHECK (hidden > 0),\n"                         \
  "  vocab INTEGER NOT NULL CHECK (vocab > 0),\n"                           \
  "  bucket INTEGER NOT NULL CHECK (bucket > 0),\n"                         \
  "  variant TEXT NOT NULL,\n"                                              \
  "  params TEXT NOT NULL DEFAULT '',\n"                                    \
  "  outcome TEXT NOT NULL CHECK (outcome IN\n"                             \
  "    ('ok', 'compile-failed', 'run-failed', 'wrong', 'spills')),\n"       \
  "  median_us REAL CHECK (outcome <> 'ok' OR median_us > 0),\n"            \
  "  spread_us REAL,\n"                                                     \
  "  samples INTEGER,\n"                                                    \
  "  floor_us REAL,\n"                                                      \
  "  registers INTEGER,\n"                                                  \
  "  spills INTEGER,\n"                                                     \
  "  smem_bytes INTEGER,\n"                                                 \
  "  message TEXT,\n"                                                       \
  "  source_hash TEXT,\n"                                                   \
  "  measured_at TEXT NOT NULL,\n"                                          \
  "  UNIQUE (run_id, dtype, hidden, vocab, bucket, variant)\n"              \
  ");\n"

/* Version 3's measurements: version 2's with `mode` after `bucket` and in
** the UNIQUE key, so that one run can time a variant once per mode. */
#define MEASUREMENTS_V3(name)                                               \
  "CREATE TABLE " name " (\n"                                               \
  "  id INTEGER PRIMARY KEY,\n"                                             \
  "  run_id INTEGER NOT NULL REFERENCES runs(id),\n"                        \
  "  dtype TEXT NOT NULL,\n"                                                \
  "  hidden INTEGER NOT NULL CHECK (hidden > 0),\n"                         \
  "  vocab INTEGER NOT NULL CHECK (vocab > 0),\n"                           \
  "  bucket INTEGER NOT NULL CHECK (bucket > 0),\n"                         \
  "  mode TEXT NOT NULL DEFAULT 'token'\n"                                  \
  "    CHECK (mode IN ('token', 'group16', 'greedy')),\n"                   \
  "  variant TEXT NOT NULL,\n"                                              \
  "  params TEXT NOT NULL DEFAULT '',\n"                                    \
  "  outcome TEXT NOT NULL CHECK (outcome IN\n"                             \
  "    ('ok', 'compile-failed', 'run-failed', 'wrong', 'spills')),\n"       \
  "  median_us REAL CHECK (outcome <> 'ok' OR median_us > 0),\n"            \
  "  spread_us REAL,\n"                                                     \
  "  samples INTEGER,\n"                                                    \
  "  floor_us REAL,\n"                                                      \
  "  registers INTEGER,\n"                                                  \
  "  spills INTEGER,\n"                                                     \
  "  smem_bytes INTEGER,\n"                                                 \
  "  message TEXT,\n"                                                       \
  "  source_hash TEXT,\n"                                                   \
  "  measured_at TEXT NOT NULL,\n"                                          \
  "  UNIQUE (run_id, dtype, hidden, vocab, bucket, mode, variant)\n"        \
  ");\n"

/* measurements_shape serves the winner rule, which reads a shape's 'ok' rows
** in one mode and its failures in every mode (a failure in one mode
** disqualifies a variant in all).  The resume query uses the UNIQUE index. */
#define RUNS_INDEX                                                          \
  "CREATE INDEX runs_context ON runs(device_name, arch, generator_rev);\n"
#define MEASUREMENTS_INDEX_V2                                               \
  "CREATE INDEX measurements_shape ON\n"                                    \
  "  measurements(dtype, hidden, vocab, bucket);\n"
#define MEASUREMENTS_INDEX_V3                                               \
  "CREATE INDEX measurements_shape ON\n"                                    \
  "  measurements(dtype, hidden, vocab, bucket, mode);\n"
#define CUBINS_V2                                                           \
  "CREATE TABLE cubins (\n"                                                 \
  "  id INTEGER PRIMARY KEY,\n"                                             \
  "  variant TEXT NOT NULL,\n"                                              \
  "  arch TEXT NOT NULL,\n"                                                 \
  "  nvrtc_version TEXT NOT NULL,\n"                                        \
  "  source_hash TEXT NOT NULL,\n"                                          \
  "  cubin BLOB NOT NULL,\n"                                                \
  "  created_at TEXT NOT NULL,\n"                                           \
  "  UNIQUE (variant, arch, nvrtc_version, source_hash)\n"                  \
  ");\n"
#define INDEXES_AND_CUBINS_V2 RUNS_INDEX MEASUREMENTS_INDEX_V2 CUBINS_V2

#define STR_(x) #x
#define STR(x) STR_(x)

int fs_store__create_schema(fs_store *s) {
  static const char ddl[] =
      "PRAGMA application_id = " STR(FS_STORE_APPLICATION_ID) ";\n"
      RUNS_V2("runs") MEASUREMENTS_V3("measurements") RUNS_INDEX
      MEASUREMENTS_INDEX_V3 CUBINS_V2
      "PRAGMA user_version = 3;\n";
  return fs_store__exec(s, ddl, "creating the schema");
}

/* fs_uuid(text): 32 hex digits from two 64-bit FNV-1a hashes, finished with
** splitmix64.  Migrated version-1 runs get uuid = fs_uuid(their content), so
** migrating the same file twice (in place, or in memory for a read-only
** merge) gives the same uuids and merging it stays idempotent. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void fs_uuid_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const unsigned char *p = sqlite3_value_text(argv[0]);
  int n = sqlite3_value_bytes(argv[0]);
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  for (int i = 0; p && i < n; i++) {
    a = (a ^ p[i]) * 0x100000001b3ull;
    b = (b ^ p[i]) * 0x100000001b3ull;
  }
  char out[33];
  snprintf(out, sizeof out, "%016llx%016llx", (unsigned long long)mix64(a),
           (unsigned long long)mix64(b ^ a));
  sqlite3_result_text(ctx, out, 32, SQLITE_TRANSIENT);
}

/* After a rebuild (foreign keys are off during a migration): every
** measurement must still find its run.  `what` names the migration. */
static int check_foreign_keys(fs_store *s, const char *what) {
  sqlite3_stmt *st;
  FS_STORE_TRY(FS_STORE_PREPARE(s, "PRAGMA foreign_key_check", &st,
                                "checking migrated foreign keys"));
  int rc = sqlite3_step(st);
  int status = FS_OK;
  if (rc == SQLITE_ROW)
    status = fs_store__err(s, FS_DB, "%s: table %s row %lld refers to a "
                           "missing run", what, fs_store__col_text(st, 0),
                           (long long)sqlite3_column_int64(st, 1));
  else if (rc != SQLITE_DONE)
    status = fs_store__sqlfail(s, rc, "checking migrated foreign keys",
                               __FILE__, __LINE__);
  sqlite3_finalize(st);
  return status;
}

/* Version 1 -> 2: rebuild runs and measurements with the new columns and
** constraints, add the cubins table and the indexes.  Version-1 rows that
** version 2's CHECKs would refuse (an 'ok' without a time, an unknown outcome)
** become 'run-failed' with a message saying what they were, so they can never
** win and nothing is silently dropped. */
static int migrate_1_to_2(fs_store *s) {
  static const char sql[] =
      RUNS_V2("runs_v2")
      "INSERT INTO runs_v2(id, uuid, started_at, finished_at, device_name,\n"
      "  arch, sm_count, driver_version, nvrtc_version, generator_rev, host,\n"
      "  command_line)\n"
      " SELECT id, fs_uuid('v1|' || id || '|' || started_at || '|' ||\n"
      "  device_name || '|' || arch || '|' || nvrtc_version || '|' ||\n"
      "  generator_rev), started_at, NULL, device_name, arch, NULL,\n"
      "  driver_version, nvrtc_version, generator_rev, NULL, NULL FROM runs;\n"
      MEASUREMENTS_V2("measurements_v2")
      "INSERT INTO measurements_v2(id, run_id, dtype, hidden, vocab, bucket,\n"
      "  variant, params, outcome, median_us, message, measured_at)\n"
      " SELECT id, run_id, dtype, hidden, vocab, bucket, variant,\n"
      "  coalesce(params, ''),\n"
      "  CASE WHEN outcome = 'ok' AND median_us > 0 THEN 'ok'\n"
      "       WHEN outcome IN ('compile-failed', 'run-failed', 'wrong')\n"
      "         THEN outcome\n"
      "       ELSE 'run-failed' END,\n"
      "  median_us,\n"
      "  CASE WHEN (outcome = 'ok' AND median_us > 0) OR outcome IN\n"
      "         ('compile-failed', 'run-failed', 'wrong') THEN NULL\n"
      "       ELSE 'migrated from schema 1: outcome ' || quote(outcome) ||\n"
      "         ', median_us ' || quote(median_us) END,\n"
      "  measured_at FROM measurements;\n"
      "DROP TABLE measurements;\n"
      "DROP TABLE runs;\n"
      "ALTER TABLE runs_v2 RENAME TO runs;\n"
      "ALTER TABLE measurements_v2 RENAME TO measurements;\n"
      INDEXES_AND_CUBINS_V2
      "PRAGMA application_id = " STR(FS_STORE_APPLICATION_ID) ";\n"
      "PRAGMA user_version = 2;\n";
  int rc = sqlite3_create_function(s->db, "fs_uuid", 1,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                   fs_uuid_fn, NULL, NULL);
  if (rc != SQLITE_OK)
    return fs_store__sqlfail(s, rc, "migrating schema 1 to 2", __FILE__,
                             __LINE__);
  FS_STORE_TRY(fs_store__exec(s, sql, "migrating schema 1 to 2"));
  /* The copy kept run ids, so every measurement must still find its run. */
  return check_foreign_keys(s, "migrating schema 1 to 2");
}

/* Version 2 -> 3: rebuild measurements with the mode column in the row and
** its UNIQUE key (ALTER TABLE ADD COLUMN cannot change a UNIQUE constraint).
** Version 2 timed sampled calls with per-token noise only, so every row
** becomes mode 'token' (ids kept).  Dropping the old table drops its
** indexes; measurements_shape is recreated with mode.  runs and cubins are
** unchanged. */
static int migrate_2_to_3(fs_store *s) {
  static const char sql[] =
      MEASUREMENTS_V3("measurements_v3")
      "INSERT INTO measurements_v3(id, run_id, dtype, hidden, vocab, bucket,\n"
      "  mode, variant, params, outcome, median_us, spread_us, samples,\n"
      "  floor_us, registers, spills, smem_bytes, message, source_hash,\n"
      "  measured_at)\n"
      " SELECT m.id, m.run_id, m.dtype, m.hidden, m.vocab, m.bucket,\n"
      "  CASE WHEN r.command_line LIKE '%(FS_TUNE_GREEDY=1)%' THEN 'greedy'\n"
      "       WHEN r.command_line LIKE '%(FS_TUNE_NOISE=group16)%' THEN 'group16'\n"
      "       ELSE 'token' END,\n"
      "  m.variant, m.params, m.outcome, m.median_us, m.spread_us, m.samples,\n"
      "  m.floor_us, m.registers, m.spills, m.smem_bytes, m.message,\n"
      "  m.source_hash, m.measured_at\n"
      " FROM measurements m LEFT JOIN runs r ON r.id = m.run_id;\n"
      "DROP TABLE measurements;\n"
      "ALTER TABLE measurements_v3 RENAME TO measurements;\n"
      MEASUREMENTS_INDEX_V3
      "PRAGMA user_version = 3;\n";
  FS_STORE_TRY(fs_store__exec(s, sql, "migrating schema 2 to 3"));
  return check_foreign_keys(s, "migrating schema 2 to 3");
}

int fs_store__migrate(fs_store *s, int from_version) {
  if (from_version < 1 || from_version > FS_STORE_SCHEMA_VERSION)
    return fs_store__err(s, FS_DB, "no migration from schema version %d",
                         from_version);
  /* One step per version, applied in order. */
  if (from_version <= 1) FS_STORE_TRY(migrate_1_to_2(s));
  if (from_version <= 2) FS_STORE_TRY(migrate_2_to_3(s));
  return FS_OK;
}
