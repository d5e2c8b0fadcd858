/*
** store_util.h: scratch-directory helpers shared by the tuning-database
** tests (tests/cpu/test_store*.c) and raw one-row SQL queries used to look
** at a file behind the store's back.  Header-only: each test is one source.
*/
#ifndef FS_STORE_UTIL_H
#define FS_STORE_UTIL_H

#include "fs_test.h"

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

#endif
