/*
** test_store_migrate.c: schema versions.  A version-1 file (the first
** fs-tune's schema, built here by hand from the DDL recorded in
** tuning-db/schema.c) must be readable read-only without being modified
** (migrated in memory), migrate in place on a read-write open with every row
** preserved, and give the same uuids both ways so merging it stays
** idempotent.  A file from a newer schema is refused with a clear message.
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

static void sql_exec(const char *path, const char *sql) {
  sqlite3 *db;
  REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc) fprintf(stderr, "sql: %s\n", msg ? msg : "?");
  sqlite3_free(msg);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

/* One-row query on a raw connection; text result copied to a static. */
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
  fs_store_key k = {device, "sm_90", FS_DTYPE_BF16, 4096, 151936, 8};
  fs_store_choice c;
  int st = fs_store_winner(s, &k, &c);
  if (st) fprintf(stderr, "winner: %s\n", fs_store_errmsg(s));
  REQUIRE(st == FS_OK);
  snprintf(name, sizeof name, "%s", c.match ? c.variant : "");
  fs_store_choice_clear(&c);
  return name;
}

static void test_v1_to_v2(void) {
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
  fs_store_measurement meas;
  memset(&meas, 0, sizeof meas);
  meas.dtype = FS_DTYPE_BF16;
  meas.hidden = 4096;
  meas.vocab = 151936;
  meas.bucket = 8;
  meas.variant = "fsamp_g";
  meas.outcome = FS_STORE_OUTCOME_SPILLS;
  meas.median_us = -1;
  meas.spread_us = -1;
  meas.floor_us = -1;
  meas.spills = 24;
  meas.registers = 255;
  meas.samples = meas.smem_bytes = -1;
  CHECK(fs_store_add_measurement(s, 1, &meas, NULL) == FS_OK);
  int outcome = -5;
  CHECK(fs_store_has_measurement(s, 1, FS_DTYPE_BF16, 4096, 151936, 8,
                                 "fsamp_a", &outcome) == FS_OK);
  CHECK(outcome == FS_STORE_OUTCOME_OK);
  fs_store_close(s);

  /* Every row and value kept, ids included; rows the new CHECKs refuse
  ** became 'run-failed' with a message saying what they were. */
  CHECK(strcmp(sql_text(p, "PRAGMA user_version"), "2") == 0);
  CHECK(strcmp(sql_text(p, "PRAGMA quick_check"), "ok") == 0);
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
                           " '%_v2'"), "0") == 0);
  /* The rebuilt measurements table still references runs. */
  CHECK(strstr(sql_text(p, "SELECT sql FROM sqlite_schema WHERE name ="
                           " 'measurements'"),
               "REFERENCES runs(id)") != NULL);

  /* Reopening does not migrate again. */
  REQUIRE(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  CHECK(fs_store_file_version(s) == 2);
  fs_store_close(s);
}

static void test_newer_and_foreign(void) {
  char err[1024];
  fs_store *s = NULL;
  const char *p = tpath("v3.db");
  REQUIRE(fs_store_open(p, FS_STORE_CREATE, &s, err, sizeof err) == FS_OK);
  fs_store_close(s);
  sql_exec(p, "PRAGMA user_version = 3");
  CHECK(fs_store_open(p, 0, &s, err, sizeof err) == FS_DB && s == NULL);
  CHECK_MSG(strstr(err, p) && strstr(err, "schema version 3 is newer") &&
                strstr(err, "knows (2)"), "%s", err);
  CHECK(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_DB);
  CHECK_MSG(strstr(err, "newer"), "%s", err);
  /* Refused before anything was written. */
  CHECK(strcmp(sql_text(p, "PRAGMA user_version"), "3") == 0);

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
  test_v1_to_v2();
  test_newer_and_foreign();
  remove_tmpdir();
  return fs_test_done("test_store_migrate");
}
