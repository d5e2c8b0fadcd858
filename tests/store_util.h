/*
** store_util.h: scratch-directory helpers shared by the tuning-database
** tests (tests/cpu/test_store*.c), a measurement to start from, raw one-row
** SQL queries used to look at a file behind the store's back, and raw SQL
** scripts with the version-2 schema to build older files by hand.  Header-only: each test is one source.
*/
#ifndef FS_STORE_UTIL_H
#define FS_STORE_UTIL_H

#include "fs_test.h"
#include "store.h"

#include <dirent.h>
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

static char g_dir[256];

/* Creates /tmp/<prefix>_XXXXXX as the test's scratch directory. */
static void make_tmpdir_named(const char *prefix) {
  snprintf(g_dir, sizeof g_dir, "/tmp/%s_XXXXXX", prefix);
  REQUIRE(mkdtemp(g_dir) != NULL);
}

/* Removes the scratch directory and the files in it. */
static void remove_tmpdir(void) {
  DIR *d = opendir(g_dir);
  if (!d) return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(g_dir);
}

/* A path in the scratch directory.  The result lives until 16 later calls. */
static const char *tpath(const char *name) {
  static char buf[16][512];
  static int k;
  char *p = buf[k++ & 15];
  snprintf(p, 512, "%s/%s", g_dir, name);
  return p;
}

/* An ok bf16 measurement of the Qwen3-8B shape (D=4096, V=151936) at bucket
** B in mode token, its optional numbers unknown (-1); the caller names the
** variant and sets the time (and any other field it needs). */
static inline fs_store_measurement qwen_meas(int B) {
  fs_store_measurement m;
  memset(&m, 0, sizeof m);
  m.dtype = FS_DTYPE_BF16;
  m.hidden = 4096;
  m.vocab = 151936;
  m.bucket = B;
  m.outcome = FS_STORE_OUTCOME_OK;
  m.spread_us = m.floor_us = -1;
  m.samples = m.registers = m.spills = m.smem_bytes = -1;
  return m;
}

/* A one-row query on a raw read-only connection, as an integer (-999 when
** there is no row). */
static inline long long sql_int(const char *path, const char *sql) {
  sqlite3 *db;
  REQUIRE(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  sqlite3_stmt *st;
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
  long long v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -999;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

/* The same as text ("<none>" when there is no row or it is NULL); the result
** lives until the next call. */
static inline const char *sql_text(const char *path, const char *sql) {
  static char out[1024];
  sqlite3 *db;
  REQUIRE(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc) fprintf(stderr, "sql %s: %s\n", sql, sqlite3_errmsg(db));
  REQUIRE(rc == SQLITE_OK);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    snprintf(out, sizeof out, "%s", (const char *)sqlite3_column_text(st, 0));
  else
    snprintf(out, sizeof out, "<none>");
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

/* Runs SQL text on a raw read-write connection (building files by hand). */
static inline void sql_exec(const char *path, const char *sql) {
  sqlite3 *db;
  REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc) fprintf(stderr, "sql: %s\n", msg ? msg : "?");
  sqlite3_free(msg);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

/* The version-2 schema (fs-tune before modes), exactly as
** tuning-db/schema.c records it (RUNS_V2, MEASUREMENTS_V2,
** INDEXES_AND_CUBINS_V2), for building version-2 files by hand. */
#define STORE_V2_DDL                                                        \
  "PRAGMA application_id = 0x46536462;\n"                                   \
  "CREATE TABLE runs (\n"                                                   \
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
  ");\n"                                                                    \
  "CREATE TABLE measurements (\n"                                           \
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
  ");\n"                                                                    \
  "CREATE INDEX runs_context ON runs(device_name, arch, generator_rev);\n"  \
  "CREATE INDEX measurements_shape ON\n"                                    \
  "  measurements(dtype, hidden, vocab, bucket);\n"                         \
  "CREATE TABLE cubins (\n"                                                 \
  "  id INTEGER PRIMARY KEY,\n"                                             \
  "  variant TEXT NOT NULL,\n"                                              \
  "  arch TEXT NOT NULL,\n"                                                 \
  "  nvrtc_version TEXT NOT NULL,\n"                                        \
  "  source_hash TEXT NOT NULL,\n"                                          \
  "  cubin BLOB NOT NULL,\n"                                                \
  "  created_at TEXT NOT NULL,\n"                                           \
  "  UNIQUE (variant, arch, nvrtc_version, source_hash)\n"                  \
  ");\n"                                                                    \
  "PRAGMA user_version = 2;\n"

#endif
