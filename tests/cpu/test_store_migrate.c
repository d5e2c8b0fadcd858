/*
** test_store_migrate.c: schema versions.  A version-1 file (the first
** fs-tune's schema) and a version-2 file (before modes), each built here by
** hand from the DDL recorded in tuning-db/schema.c, must be readable
** read-only without being modified (migrated in memory), migrate in place to
** the current version on a read-write open with every row preserved (version
** 2's as mode 'token') and the same winners, and give the same uuids both
** ways so merging stays idempotent.  A file from a newer schema is refused
** with a clear message.
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "fs_test.h"
#include "store.h"

#include <dirent.h>
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

#include "store_util.h"

static void make_tmpdir(void) { make_tmpdir_named("fs_test_store_migrate"); }

/* The version-1 schema, exactly as tuning-db/schema.c records it, and data
** that exercises the migration: ok rows with and without a time, every
** version-1 outcome and one it did not define. */
static const char k_v1[] =
    "PRAGMA application_id = 0x46536462;"
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, started_at TEXT NOT NULL,"
    "  device_name TEXT NOT NULL, arch TEXT NOT NULL, driver_version INTEGER,"
    "  nvrtc_version TEXT NOT NULL, generator_rev TEXT NOT NULL);"
    "CREATE TABLE measurements(id INTEGER PRIMARY KEY,"
    "  run_id INTEGER NOT NULL REFERENCES runs(id), dtype TEXT NOT NULL,"
    "  hidden INTEGER NOT NULL, vocab INTEGER NOT NULL,"
    "  bucket INTEGER NOT NULL, variant TEXT NOT NULL,"
    "  params TEXT NOT NULL DEFAULT '', outcome TEXT NOT NULL,"
    "  median_us REAL, measured_at TEXT NOT NULL,"
    "  UNIQUE(run_id, dtype, hidden, vocab, bucket, variant));"
    "PRAGMA user_version = 1;"
    "INSERT INTO runs VALUES"
    " (1, '2025-06-01T10:00:00.000Z', 'NVIDIA H200', 'sm_90', 12040, '12.4',"
    "  'g1'),"
    " (5, '2025-06-02T10:00:00.000Z', 'NVIDIA H100', 'sm_90', 12040, '12.4',"
    "  'g1');"
    "INSERT INTO measurements VALUES"
    " (10, 1, 'bf16', 4096, 151936, 8, 'fsamp_a', 'tile_v=128', 'ok', 21.5,"
    "  '2025-06-01T10:01:00.000Z'),"
    " (11, 1, 'bf16', 4096, 151936, 8, 'fsamp_b', 'tile_v=256', 'ok', 19.0,"
    "  '2025-06-01T10:02:00.000Z'),"
    " (12, 1, 'bf16', 4096, 151936, 8, 'fsamp_c', '', 'wrong', 5.0,"
    "  '2025-06-01T10:03:00.000Z'),"
    " (13, 1, 'bf16', 4096, 151936, 8, 'fsamp_d', '', 'ok', NULL,"
    "  '2025-06-01T10:04:00.000Z'),"
    " (14, 1, 'bf16', 4096, 151936, 8, 'fsamp_e', '', 'timeout', 1.0,"
    "  '2025-06-01T10:05:00.000Z'),"
    " (15, 1, 'bf16', 4096, 151936, 8, 'fsamp_f', '', 'compile-failed', NULL,"
    "  '2025-06-01T10:06:00.000Z'),"
    " (20, 5, 'bf16', 4096, 151936, 8, 'fsamp_a', 'tile_v=128', 'ok', 30.0,"
    "  '2025-06-02T10:01:00.000Z');";

typedef struct uuids {
  char text[8][40];
  int n;
} uuids;

static int grab_uuid(void *arg, const fs_store_run *r) {
  uuids *u = arg;
  if (u->n < 8) snprintf(u->text[u->n++], 40, "%s", r->uuid);
  return 0;
}

static const char *winner_of(fs_store *s, const char *device) {
  static char name[FS_STORE_NAME_MAX + 1];
  fs_store_key k = {device, "sm_90", FS_DTYPE_BF16, 4096, 151936, 8,
                    FS_STORE_MODE_TOKEN};
  fs_store_choice c;
  int st = fs_store_winner(s, &k, &c);
  if (st) fprintf(stderr, "winner: %s\n", fs_store_errmsg(s));
  REQUIRE(st == FS_OK);
  snprintf(name, sizeof name, "%s", c.match ? c.variant : "");
  fs_store_choice_clear(&c);
  return name;
}

static void test_v1_to_v3(void) {
  const char *p = tpath("v1.db");
  sql_exec(p, k_v1);
  char err[1024];
  fs_store *s = NULL;

  /* Read-only: migrated in a private copy, the file untouched. */
  REQUIRE(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_OK);
  CHECK(fs_store_file_version(s) == 1);
  CHECK(strcmp(winner_of(s, "NVIDIA H200"), "fsamp_b") == 0);
  uuids ro;
  memset(&ro, 0, sizeof ro);
  CHECK(fs_store_list_runs(s, grab_uuid, &ro) == FS_OK);
  CHECK(ro.n == 2 && strlen(ro.text[0]) == 32);
  CHECK(strcmp(ro.text[0], ro.text[1]) != 0);
  fs_store_close(s);
  CHECK(strcmp(sql_text(p, "PRAGMA user_version"), "1") == 0);

  /* Merging the version-1 file into a fresh store twice adds it once. */
  fs_store *m = NULL;
  REQUIRE(fs_store_open(tpath("merged.db"), FS_STORE_CREATE, &m, err,
                        sizeof err) == FS_OK);
  fs_store_transfer_stats st;
  CHECK(fs_store_merge_file(m, p, &st) == FS_OK);
  CHECK(st.runs == 2 && st.measurements == 7 && st.cubins == 0);
  CHECK(fs_store_merge_file(m, p, &st) == FS_OK);
  CHECK(st.runs == 0 && st.measurements == 0);
  CHECK(strcmp(winner_of(m, "NVIDIA H200"), "fsamp_b") == 0);
  fs_store_close(m);

  /* Read-write: migrated in place. */
  REQUIRE(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  CHECK(fs_store_file_version(s) == 1);
  uuids rw;
  memset(&rw, 0, sizeof rw);
  CHECK(fs_store_list_runs(s, grab_uuid, &rw) == FS_OK);
  CHECK(rw.n == 2);
  CHECK_MSG(!strcmp(rw.text[0], ro.text[0]) && !strcmp(rw.text[1], ro.text[1]),
            "uuids differ: %s/%s vs %s/%s", rw.text[0], rw.text[1], ro.text[0],
            ro.text[1]);
  CHECK(strcmp(winner_of(s, "NVIDIA H200"), "fsamp_b") == 0);
  CHECK(strcmp(winner_of(s, "NVIDIA H100"), "fsamp_a") == 0);
  /* New columns work on migrated runs. */
  fs_store_measurement meas = qwen_meas(8);
  meas.variant = "fsamp_g";
  meas.outcome = FS_STORE_OUTCOME_SPILLS;
  meas.median_us = -1;
  meas.spills = 24;
  meas.registers = 255;
  CHECK(fs_store_add_measurement(s, 1, &meas, NULL) == FS_OK);
  int outcome = -5;
  CHECK(fs_store_has_measurement(s, 1, FS_DTYPE_BF16, 4096, 151936, 8,
                                 FS_STORE_MODE_TOKEN, "fsamp_a",
                                 &outcome) == FS_OK);
  CHECK(outcome == FS_STORE_OUTCOME_OK);
  fs_store_close(s);

  /* Every row and value kept, ids included; rows the new CHECKs refuse
  ** became 'run-failed' with a message saying what they were. */
  CHECK(strcmp(sql_text(p, "PRAGMA user_version"), "3") == 0);
  CHECK(strcmp(sql_text(p, "PRAGMA quick_check"), "ok") == 0);
  CHECK(sql_int(p, "SELECT count(*) FROM measurements WHERE mode <> 'token'")
        == 0);
  CHECK(strcmp(sql_text(p, "SELECT group_concat(id) FROM (SELECT id FROM runs"
                           " ORDER BY id)"), "1,5") == 0);
  CHECK(strcmp(sql_text(p, "SELECT group_concat(id || ':' || variant || ':' ||"
                           " outcome || ':' || coalesce(median_us, '-'), ' ')"
                           " FROM (SELECT * FROM measurements WHERE id <= 20"
                           " ORDER BY id)"),
               "10:fsamp_a:ok:21.5 11:fsamp_b:ok:19.0 12:fsamp_c:wrong:5.0 "
               "13:fsamp_d:run-failed:- 14:fsamp_e:run-failed:1.0 "
               "15:fsamp_f:compile-failed:- 20:fsamp_a:ok:30.0") == 0);
  CHECK(strcmp(sql_text(p, "SELECT message FROM measurements WHERE id = 14"),
               "migrated from schema 1: outcome 'timeout', median_us 1.0") ==
        0);
  CHECK(strcmp(sql_text(p, "SELECT params || '|' || measured_at || '|' ||"
                           " driver_version FROM measurements m, runs r"
                           " WHERE m.id = 10 AND r.id = m.run_id"),
               "tile_v=128|2025-06-01T10:01:00.000Z|12040") == 0);
  CHECK(strcmp(sql_text(p, "SELECT count(*) FROM sqlite_schema WHERE name IN"
                           " ('cubins', 'runs_context', 'measurements_shape')"),
               "3") == 0);
  CHECK(strcmp(sql_text(p, "SELECT count(*) FROM sqlite_schema WHERE name LIKE"
                           " '%_v2' OR name LIKE '%_v3'"), "0") == 0);
  /* The rebuilt measurements table still references runs. */
  CHECK(strstr(sql_text(p, "SELECT sql FROM sqlite_schema WHERE name ="
                           " 'measurements'"),
               "REFERENCES runs(id)") != NULL);

  /* Reopening does not migrate again. */
  REQUIRE(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  CHECK(fs_store_file_version(s) == 3);
  fs_store_close(s);
}

/* A version-2 file as fs-tune left it (WAL mode): an older revision's run
** with a faster row that no longer counts, and the latest revision's run with
** two ok variants, a wrong one, a spilled one, another bucket and a cubin. */
static const char k_v2_rows[] =
    "PRAGMA journal_mode = WAL;"
    "INSERT INTO runs VALUES"
    " (1, '0123456789abcdef0123456789abcdef', '2026-01-01T00:00:00.000Z',"
    "  '2026-01-01T01:00:00.000Z', 'NVIDIA H200', 'sm_90', 132, 13000, '13.0',"
    "  'rev-a', 'tuner', 'fs-tune --model qwen3-8b'),"
    " (2, 'fedcba9876543210fedcba9876543210', '2026-02-01T00:00:00.000Z',"
    "  NULL, 'NVIDIA H200', 'sm_90', 132, 13000, '13.0', 'rev-b', NULL, NULL);"
    "INSERT INTO measurements(id, run_id, dtype, hidden, vocab, bucket,"
    "  variant, params, outcome, median_us, spread_us, samples, floor_us,"
    "  registers, spills, smem_bytes, message, source_hash, measured_at)"
    " VALUES"
    " (10, 1, 'bf16', 4096, 151936, 8, 'fsamp_old', 'tile_v=64', 'ok', 5.0,"
    "  0.01, 40, 9.0, 96, 0, 1024, NULL, 'h_old', '2026-01-01T00:10:00.000Z'),"
    " (20, 2, 'bf16', 4096, 151936, 8, 'fsamp_a', 'tile_v=128', 'ok', 12.0,"
    "  0.05, 40, 9.0, 128, 0, 49152, NULL, 'h_a', '2026-02-01T00:10:00.000Z'),"
    " (21, 2, 'bf16', 4096, 151936, 8, 'fsamp_b', 'tile_v=256', 'ok', 10.0,"
    "  0.05, 40, 9.0, 128, 0, 49152, NULL, 'h_b', '2026-02-01T00:11:00.000Z'),"
    " (22, 2, 'bf16', 4096, 151936, 8, 'fsamp_c', '', 'wrong', 3.0, NULL,"
    "  NULL, NULL, NULL, NULL, NULL, 'max abs diff 1.5', 'h_c',"
    "  '2026-02-01T00:12:00.000Z'),"
    " (23, 2, 'bf16', 4096, 151936, 8, 'fsamp_d', '', 'spills', NULL, NULL,"
    "  NULL, NULL, 255, 24, NULL, NULL, NULL, '2026-02-01T00:13:00.000Z'),"
    " (30, 2, 'bf16', 4096, 151936, 16, 'fsamp_a', 'tile_v=128', 'ok', 20.0,"
    "  0.05, 40, 18.0, 128, 0, 49152, NULL, 'h_a',"
    "  '2026-02-01T00:20:00.000Z');"
    "INSERT INTO cubins VALUES (1, 'fsamp_b', 'sm_90', '13.0', 'h_b',"
    "  x'00010203', '2026-02-01T00:11:00.000Z');";

/* The version-2 file's winners as list_winners formats them (token lines
** carry no mode, as before modes). */
static const char *const k_v2_winners[2] = {
    "NVIDIA H200 sm_90 bf16 D=4096 V=151936 B=8 -> fsamp_b 10.000 us +-0.050 "
    "(90% of floor) tied=1/2 cubin=4 B",
    "NVIDIA H200 sm_90 bf16 D=4096 V=151936 B=16 -> fsamp_a 20.000 us "
    "+-0.050 (90% of floor) tied=1/1 no-cubin",
};

typedef struct lines {
  char text[8][512];
  int n, modes[8];
} lines;

static int grab_choice(void *arg, const fs_store_choice *c) {
  lines *l = arg;
  if (l->n < 8) {
    l->modes[l->n] = c->mode;
    fs_store_format_choice(c, l->text[l->n++], sizeof l->text[0]);
  }
  return 0;
}

static int grab_meas(void *arg, const fs_store_run *r,
                     const fs_store_measurement *m) {
  lines *l = arg;
  (void)r;
  if (l->n < 8) {
    l->modes[l->n] = m->mode;
    fs_store_format_measurement(m, l->text[l->n++], sizeof l->text[0]);
  }
  return 0;
}

/* Checks that s holds the version-2 file's winners, all of mode token, and
** that no other mode has any (nearest included). */
static void check_v2_winners(fs_store *s, const char *label) {
  lines l;
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_winners(s, NULL, grab_choice, &l) == FS_OK);
  CHECK_MSG(l.n == 2, "%s: %d winners", label, l.n);
  for (int i = 0; i < l.n && i < 2; i++) {
    CHECK_MSG(strcmp(l.text[i], k_v2_winners[i]) == 0, "%s: '%s'", label,
              l.text[i]);
    CHECK(l.modes[i] == FS_STORE_MODE_TOKEN);
  }
  fs_store_key k = {"NVIDIA H200", "sm_90", FS_DTYPE_BF16, 4096, 151936, 8,
                    FS_STORE_MODE_GREEDY};
  fs_store_choice c;
  CHECK(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK_MSG(c.match == FS_STORE_MATCH_NONE, "%s: greedy %s", label,
            c.variant);
  fs_store_choice_clear(&c);
  /* Every row reads back as mode token. */
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_measurements(s, NULL, grab_meas, &l) == FS_OK);
  CHECK_MSG(l.n == 6, "%s: %d rows", label, l.n);
  for (int i = 0; i < l.n; i++)
    CHECK_MSG(l.modes[i] == FS_STORE_MODE_TOKEN && !strstr(l.text[i], "mode="),
              "%s: %s", label, l.text[i]);
}

static void test_v2_to_v3(void) {
  const char *p = tpath("v2.db");
  sql_exec(p, STORE_V2_DDL);
  sql_exec(p, k_v2_rows);
  REQUIRE(sql_int(p, "PRAGMA user_version") == 2);
  char err[1024];
  fs_store *s = NULL;

  /* Read-only: migrated in a private copy, the file untouched. */
  int st = fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err);
  if (st) fprintf(stderr, "open: %s\n", err);
  REQUIRE(st == FS_OK);
  CHECK(fs_store_file_version(s) == 2);
  check_v2_winners(s, "read-only");
  /* Writes are refused on the read-only copy like on any read-only store. */
  fs_store_measurement m = qwen_meas(8);
  m.mode = FS_STORE_MODE_GREEDY;
  m.variant = "fsamp_a";
  m.median_us = 8.0;
  m.spread_us = 0.05;
  m.floor_us = 7.0;
  CHECK(fs_store_add_measurement(s, 2, &m, NULL) == FS_INVALID_ARGUMENT);
  fs_store_close(s);
  CHECK(sql_int(p, "PRAGMA user_version") == 2);
  CHECK(sql_int(p, "SELECT count(*) FROM pragma_table_info('measurements')"
                   " WHERE name = 'mode'") == 0);
  CHECK(sql_int(p, "SELECT count(*) FROM measurements") == 6);

  /* Read-write: migrated in place, in one step from 2. */
  st = fs_store_open(p, 0, &s, err, sizeof err);
  if (st) fprintf(stderr, "open: %s\n", err);
  REQUIRE(st == FS_OK);
  CHECK(fs_store_file_version(s) == 2);
  check_v2_winners(s, "read-write");
  /* The UNIQUE key now has the mode: the same run may time fsamp_a on
  ** greedy calls, but not twice in one mode. */
  CHECK(fs_store_add_measurement(s, 2, &m, NULL) == FS_OK);
  CHECK(fs_store_add_measurement(s, 2, &m, NULL) == FS_INVALID_ARGUMENT);
  m.mode = FS_STORE_MODE_TOKEN;
  CHECK(fs_store_add_measurement(s, 2, &m, NULL) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "already has a measurement of fsamp_a"),
            "%s", fs_store_errmsg(s));
  fs_store_key k = {"NVIDIA H200", "sm_90", FS_DTYPE_BF16, 4096, 151936, 8,
                    FS_STORE_MODE_GREEDY};
  fs_store_choice c;
  REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
  CHECK_MSG(c.match == FS_STORE_MATCH_EXACT && !strcmp(c.variant, "fsamp_a") &&
                c.mode == FS_STORE_MODE_GREEDY, "%s", c.variant);
  fs_store_choice_clear(&c);
  CHECK(strcmp(winner_of(s, "NVIDIA H200"), "fsamp_b") == 0);
  int outcome = -5;
  CHECK(fs_store_has_measurement(s, 2, FS_DTYPE_BF16, 4096, 151936, 8,
                                 FS_STORE_MODE_TOKEN, "fsamp_b",
                                 &outcome) == FS_OK);
  CHECK(outcome == FS_STORE_OUTCOME_OK);
  CHECK(fs_store_has_measurement(s, 2, FS_DTYPE_BF16, 4096, 151936, 8,
                                 FS_STORE_MODE_GREEDY, "fsamp_b",
                                 &outcome) == FS_OK);
  CHECK(outcome == -1);
  fs_store_close(s);

  /* Every row and value kept, ids included, each of mode token; runs and
  ** cubins as they were; the new key and index in the schema. */
  CHECK(sql_int(p, "PRAGMA user_version") == 3);
  CHECK(strcmp(sql_text(p, "PRAGMA quick_check"), "ok") == 0);
  CHECK(strcmp(sql_text(p, "PRAGMA foreign_key_check"), "<none>") == 0);
  CHECK_MSG(strcmp(sql_text(p, "SELECT group_concat(id || ':' || run_id || ':'"
                               " || bucket || ':' || mode || ':' || variant ||"
                               " ':' || outcome, ' ') FROM (SELECT * FROM"
                               " measurements WHERE id <= 30 ORDER BY id)"),
                   "10:1:8:token:fsamp_old:ok 20:2:8:token:fsamp_a:ok "
                   "21:2:8:token:fsamp_b:ok 22:2:8:token:fsamp_c:wrong "
                   "23:2:8:token:fsamp_d:spills 30:2:16:token:fsamp_a:ok") == 0,
            "%s", sql_text(p, "SELECT group_concat(id) FROM measurements"));
  CHECK(strcmp(sql_text(p, "SELECT params || '|' || median_us || '|' ||"
                           " spread_us || '|' || samples || '|' || floor_us ||"
                           " '|' || registers || '|' || spills || '|' ||"
                           " smem_bytes || '|' || source_hash || '|' ||"
                           " measured_at FROM measurements WHERE id = 20"),
               "tile_v=128|12.0|0.05|40|9.0|128|0|49152|h_a|"
               "2026-02-01T00:10:00.000Z") == 0);
  CHECK(strcmp(sql_text(p, "SELECT coalesce(message, '-') || '|' ||"
                           " coalesce(median_us, '-') || '|' ||"
                           " coalesce(spread_us, '-') FROM measurements"
                           " WHERE id = 22"), "max abs diff 1.5|3.0|-") == 0);
  CHECK(sql_int(p, "SELECT count(*) FROM measurements WHERE mode = 'greedy'")
        == 1);
  CHECK(strcmp(sql_text(p, "SELECT group_concat(uuid || ':' ||"
                           " coalesce(finished_at, '-'), ' ') FROM (SELECT *"
                           " FROM runs ORDER BY id)"),
               "0123456789abcdef0123456789abcdef:2026-01-01T01:00:00.000Z "
               "fedcba9876543210fedcba9876543210:-") == 0);
  CHECK(strcmp(sql_text(p, "SELECT hex(cubin) FROM cubins"), "00010203") == 0);
  const char *ddl = sql_text(p, "SELECT sql FROM sqlite_schema WHERE name ="
                                " 'measurements'");
  CHECK_MSG(strstr(ddl, "mode TEXT NOT NULL DEFAULT 'token'") &&
                strstr(ddl, "(run_id, dtype, hidden, vocab, bucket, mode, "
                            "variant)") &&
                strstr(ddl, "REFERENCES runs(id)"), "%s", ddl);
  CHECK(strstr(sql_text(p, "SELECT sql FROM sqlite_schema WHERE name ="
                           " 'measurements_shape'"),
               "(dtype, hidden, vocab, bucket, mode)") != NULL);
  CHECK(sql_int(p, "SELECT count(*) FROM sqlite_schema WHERE name IN"
                   " ('runs_context', 'measurements_shape', 'cubins')") == 3);
  CHECK(sql_int(p, "SELECT count(*) FROM sqlite_schema WHERE name LIKE"
                   " '%_v3'") == 0);
  /* A row of a mode the schema does not know is refused by its CHECK. */
  sqlite3 *db;
  REQUIRE(sqlite3_open(p, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, "INSERT INTO measurements(run_id, dtype, hidden,"
                         " vocab, bucket, mode, variant, outcome, median_us,"
                         " measured_at) VALUES (2, 'bf16', 1, 1, 1, 'bogus',"
                         " 'v', 'ok', 1.0, 'now')", NULL, NULL, NULL) ==
        SQLITE_CONSTRAINT);
  sqlite3_close(db);

  /* Reopening does not migrate again. */
  REQUIRE(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  CHECK(fs_store_file_version(s) == 3);
  fs_store_close(s);
}

/* Schema-2 fs-tune kept greedy and grouped-noise runs apart only in
** runs.command_line: the migration gives their rows those modes, so their
** times never count as sampled ones.  Checked read-only (in memory) and
** read-write: the token winner stays the sampled run's although the greedy
** run timed the other variant faster. */
static const char k_v2_mode_rows[] =
    "INSERT INTO runs VALUES"
    " (1, '11111111111111111111111111111111', '2026-03-01T00:00:00.000Z', NULL,"
    "  'NVIDIA H200', 'sm_90', 132, 13000, '13.0', 'rev-m', NULL,"
    "  'fs-tune --model qwen3-8b'),"
    " (2, '22222222222222222222222222222222', '2026-03-01T01:00:00.000Z', NULL,"
    "  'NVIDIA H200', 'sm_90', 132, 13000, '13.0', 'rev-m', NULL,"
    "  'fs-tune --model qwen3-8b (FS_TUNE_GREEDY=1)'),"
    " (3, '33333333333333333333333333333333', '2026-03-01T02:00:00.000Z', NULL,"
    "  'NVIDIA H200', 'sm_90', 132, 13000, '13.0', 'rev-m', NULL,"
    "  'fs-tune --model qwen3-8b (FS_TUNE_WARMUP_MS=50) (FS_TUNE_NOISE=group16)');"
    "INSERT INTO measurements(id, run_id, dtype, hidden, vocab, bucket,"
    "  variant, outcome, median_us, measured_at) VALUES"
    " (1, 1, 'bf16', 4096, 151936, 256, 'fsamp_s', 'ok', 10.0, '2026-03-01T00:01:00.000Z'),"
    " (2, 1, 'bf16', 4096, 151936, 256, 'fsamp_g', 'ok', 11.0, '2026-03-01T00:02:00.000Z'),"
    " (3, 2, 'bf16', 4096, 151936, 256, 'fsamp_s', 'ok', 9.5, '2026-03-01T01:01:00.000Z'),"
    " (4, 2, 'bf16', 4096, 151936, 256, 'fsamp_g', 'ok', 9.0, '2026-03-01T01:02:00.000Z'),"
    " (5, 3, 'bf16', 4096, 151936, 256, 'fsamp_s', 'ok', 8.0, '2026-03-01T02:01:00.000Z'),"
    " (6, 3, 'bf16', 4096, 151936, 256, 'fsamp_q', 'ok', 7.0, '2026-03-01T02:02:00.000Z');";

static void check_mode_winners(fs_store *s, const char *label) {
  static const struct { int mode; const char *winner; } want[3] = {
      {FS_STORE_MODE_TOKEN, "fsamp_s"}, {FS_STORE_MODE_GROUP16, "fsamp_q"},
      {FS_STORE_MODE_GREEDY, "fsamp_g"}};
  for (int i = 0; i < 3; i++) {
    fs_store_key k = {"NVIDIA H200", "sm_90", FS_DTYPE_BF16, 4096, 151936, 256, want[i].mode};
    fs_store_choice c;
    REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
    CHECK_MSG(c.match == FS_STORE_MATCH_EXACT && !strcmp(c.variant, want[i].winner) &&
                  c.mode == want[i].mode,
              "%s: the %s winner is %s, expected %s", label, fs_store_mode_name(want[i].mode),
              c.match == FS_STORE_MATCH_EXACT ? c.variant : "(none)", want[i].winner);
    fs_store_choice_clear(&c);
  }
}

static void test_v2_modes_from_command_line(void) {
  const char *p = tpath("v2-modes.db");
  sql_exec(p, STORE_V2_DDL);
  sql_exec(p, k_v2_mode_rows);
  char err[1024];
  fs_store *s = NULL;
  REQUIRE(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_OK);
  check_mode_winners(s, "read-only");
  fs_store_close(s);
  REQUIRE(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  check_mode_winners(s, "read-write");
  fs_store_close(s);
  CHECK_MSG(strcmp(sql_text(p, "SELECT group_concat(id || ':' || mode, ' ') FROM"
                               " (SELECT * FROM measurements ORDER BY id)"),
                   "1:token 2:token 3:greedy 4:greedy 5:group16 6:group16") == 0,
            "%s", sql_text(p, "SELECT group_concat(id || ':' || mode, ' ') FROM measurements"));
}

static void test_newer_and_foreign(void) {
  char err[1024];
  fs_store *s = NULL;
  const char *p = tpath("v4.db");
  REQUIRE(fs_store_open(p, FS_STORE_CREATE, &s, err, sizeof err) == FS_OK);
  fs_store_close(s);
  sql_exec(p, "PRAGMA user_version = 4");
  CHECK(fs_store_open(p, 0, &s, err, sizeof err) == FS_DB && s == NULL);
  CHECK_MSG(strstr(err, p) && strstr(err, "schema version 4 is newer") &&
                strstr(err, "knows (3)"), "%s", err);
  CHECK(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_DB);
  CHECK_MSG(strstr(err, "newer"), "%s", err);
  /* Refused before anything was written. */
  CHECK(strcmp(sql_text(p, "PRAGMA user_version"), "4") == 0);

  p = tpath("foreign.db");
  sql_exec(p, "CREATE TABLE notes(x); INSERT INTO notes VALUES (1)");
  CHECK(fs_store_open(p, FS_STORE_CREATE, &s, err, sizeof err) == FS_DB);
  CHECK_MSG(strstr(err, "not a flashsampling tuning database"), "%s", err);
  CHECK(strcmp(sql_text(p, "SELECT count(*) FROM sqlite_schema"), "1") == 0);
  CHECK(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_DB);

  p = tpath("other_app.db");
  sql_exec(p, "PRAGMA application_id = 1234; PRAGMA user_version = 1;"
              "CREATE TABLE t(x)");
  CHECK(fs_store_open(p, 0, &s, err, sizeof err) == FS_DB);
  CHECK_MSG(strstr(err, "application_id 0x000004d2"), "%s", err);
}

int main(void) {
  make_tmpdir();
  test_v1_to_v3();
  test_v2_to_v3();
  test_v2_modes_from_command_line();
  test_newer_and_foreign();
  remove_tmpdir();
  return fs_test_done("test_store_migrate");
}
