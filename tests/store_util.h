/*
** store_util.h: scratch-directory helpers shared by the tuning-database
** tests (tests/cpu/test_store*.c).  Header-only: each test is one source.
*/
#ifndef FS_STORE_UTIL_H
#define FS_STORE_UTIL_H

#include "fs_test.h"

#include <dirent.h>
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

#endif
