/*
** test_store.c: the tuning database's core behaviour: schema creation,
** inserting and reading back, the winner rule (ties inside the noise, fixed
** tie-break, insertion order irrelevant, failed variants never win, latest
** revision), resume after a crashed run, the nearest-shape lookup chain,
** modes (separate winners and nearest keys per mode, a failure in one mode
** disqualifying a variant in all), listings and argument checks.
** Migration, transfer and robustness have their own test_store_*.c files.
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "fs_test.h"
#include "store.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------------- */

#include "store_util.h"

static void make_tmpdir(void) { make_tmpdir_named("fs_test_store"); }

static fs_store *open_rw(const char *path) {
  fs_store *s = NULL;
  char err[1024];
  int st = fs_store_open(path, FS_STORE_CREATE, &s, err, sizeof err);
  if (st) fprintf(stderr, "open %s: %s\n", path, err);
  REQUIRE(st == FS_OK && s);
  return s;
}

static fs_store_run ctx(const char *device, const char *arch, const char *rev,
                        const char *started_at) {
  fs_store_run r;
  memset(&r, 0, sizeof r);
  r.device_name = device;
  r.arch = arch;
  r.sm_count = 132;
  r.driver_version = 13000;
  r.nvrtc_version = "13.0";
  r.generator_rev = rev;
  r.host = "testhost";
  r.command_line = "fs-tune --model qwen3-8b";
  r.started_at = started_at;
  return r;
}

static int64_t begin(fs_store *s, fs_store_run r) {
  int64_t id = 0;
  int st = fs_store_begin_run(s, &r, &id);
  if (st) fprintf(stderr, "begin_run: %s\n", fs_store_errmsg(s));
  REQUIRE(st == FS_OK && id > 0);
  return id;
}

static fs_store_measurement meas(int D, int V, int B, const char *variant,
                                 int outcome, double median, double spread) {
  fs_store_measurement m;
  memset(&m, 0, sizeof m);
  m.dtype = FS_DTYPE_BF16;
  m.hidden = D;
  m.vocab = V;
  m.bucket = B;
  m.variant = variant;
  m.params = "tile_v=128,tile_b=16";
  m.outcome = outcome;
  m.median_us = median;
  m.spread_us = spread;
  m.samples = 50;
  m.floor_us = 10.0;
  m.registers = 128;
  m.spills = 0;
  m.smem_bytes = 49152;
  return m;
}

static void add(fs_store *s, int64_t run, fs_store_measurement m) {
  int st = fs_store_add_measurement(s, run, &m, NULL);
  if (st) fprintf(stderr, "add_measurement: %s\n", fs_store_errmsg(s));
  REQUIRE(st == FS_OK);
}

static fs_store_key key(const char *device, const char *arch, int D, int V,
                        int B) {
  fs_store_key k = {device, arch, FS_DTYPE_BF16, D, V, B, FS_STORE_MODE_TOKEN};
  return k;
}

/* The same key in another mode. */
static fs_store_key in_mode(fs_store_key k, int mode) {
  k.mode = mode;
  return k;
}

/* The winner's name for a key ("" when none). */
static const char *winner_of(fs_store *s, fs_store_key k) {
  static char name[FS_STORE_NAME_MAX + 1];
  fs_store_choice c;
  int st = fs_store_winner(s, &k, &c);
  if (st) fprintf(stderr, "winner: %s\n", fs_store_errmsg(s));
  REQUIRE(st == FS_OK);
  snprintf(name, sizeof name, "%s",
           c.match == FS_STORE_MATCH_EXACT ? c.variant : "");
  fs_store_choice_clear(&c);
  return name;
}

static const char *DEV = "NVIDIA H200";

/* ---- schema ---------------------------------------------------------------- */

static void test_create(void) {
  const char *p = tpath("create.db");
  fs_store *s = NULL;
  char err[1024];

  /* Without FS_STORE_CREATE a missing file is an error naming the path. */
  CHECK(fs_store_open(p, 0, &s, err, sizeof err) == FS_DB);
  CHECK(s == NULL);
  CHECK_MSG(strstr(err, p) && strstr(err, "No such file"), "%s", err);
  CHECK(fs_store_open(p, FS_STORE_READONLY | FS_STORE_CREATE, &s, err,
                      sizeof err) == FS_INVALID_ARGUMENT);
  CHECK(fs_store_open(NULL, FS_STORE_CREATE, &s, err, sizeof err) ==
        FS_INVALID_ARGUMENT);
  CHECK(fs_store_open(p, 0x100, &s, err, sizeof err) == FS_INVALID_ARGUMENT);

  s = open_rw(p);
  CHECK(fs_store_file_version(s) == 0); /* it was empty */
  CHECK(strcmp(fs_store_path(s), p) == 0);
  CHECK(fs_store_check(s) == FS_OK);
  fs_store_close(s);
  fs_store_close(NULL);

  CHECK(sql_int(p, "PRAGMA user_version") == FS_STORE_SCHEMA_VERSION);
  CHECK(sql_int(p, "PRAGMA application_id") == FS_STORE_APPLICATION_ID);
  CHECK(sql_int(p, "SELECT count(*) FROM sqlite_schema WHERE type='table' AND"
                   " name IN ('runs','measurements','cubins')") == 3);
  CHECK(sql_int(p, "SELECT count(*) FROM sqlite_schema WHERE type='index' AND"
                   " name IN ('runs_context','measurements_shape')") == 2);
  /* WAL is a property of the file. */
  sqlite3 *db;
  REQUIRE(sqlite3_open(p, &db) == SQLITE_OK);
  sqlite3_stmt *st;
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) == 0);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0);
  sqlite3_finalize(st);
  sqlite3_close(db);

  /* Reopening finds the current version and changes nothing. */
  s = open_rw(p);
  CHECK(fs_store_file_version(s) == 3);
  fs_store_close(s);
  REQUIRE(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_OK);
  CHECK(fs_store_file_version(s) == 3);
  fs_store_close(s);
  CHECK(sql_int(p, "SELECT count(*) FROM pragma_table_info('measurements')"
                   " WHERE name = 'mode' AND dflt_value = '''token'''") == 1);
}

/* ---- insert and read back ---------------------------------------------------- */

static int count_runs(void *arg, const fs_store_run *r) {
  (void)r;
  (*(int *)arg)++;
  return 0;
}

typedef struct lines {
  char text[16][512];
  int n;
} lines;

static int grab_measurement(void *arg, const fs_store_run *r,
                            const fs_store_measurement *m) {
  lines *l = arg;
  (void)r;
  if (l->n < 16) fs_store_format_measurement(m, l->text[l->n++], 512);
  return 0;
}

static int grab_run(void *arg, const fs_store_run *r) {
  lines *l = arg;
  if (l->n < 16) fs_store_format_run(r, l->text[l->n++], 512);
  return 0;
}

static int grab_choice(void *arg, const fs_store_choice *c) {
  lines *l = arg;
  if (l->n < 16) fs_store_format_choice(c, l->text[l->n++], 512);
  return 0;
}

static int stop_at_first(void *arg, const fs_store_run *r,
                         const fs_store_measurement *m) {
  (void)r;
  (void)m;
  (*(int *)arg)++;
  return 1;
}

static void test_insert_lookup(void) {
  const char *p = tpath("insert.db");
  fs_store *s = open_rw(p);
  int64_t run = begin(s, ctx(DEV, "sm_90", "rev1", NULL));

  fs_store_measurement m = meas(4096, 151936, 8, "fsamp_a", 0, 20.0, 0.1);
  m.source_hash = "hash_a";
  m.message = "first line\nsecond line";
  int64_t mid = 0;
  CHECK(fs_store_add_measurement(s, run, &m, &mid) == FS_OK);
  CHECK(mid > 0);
  add(s, run, meas(4096, 151936, 8, "fsamp_b", 0, 30.0, 0.1));
  add(s, run, meas(4096, 151936, 8, "fsamp_c", FS_STORE_OUTCOME_COMPILE_FAILED,
                   -1, -1));
  unsigned char cubin[3000];
  for (size_t i = 0; i < sizeof cubin; i++) cubin[i] = (unsigned char)(i * 7);
  CHECK(fs_store_put_cubin(s, "fsamp_a", "sm_90", "13.0", "hash_a", cubin,
                           sizeof cubin) == FS_OK);
  /* Replacing a cubin under the same key is allowed. */
  CHECK(fs_store_put_cubin(s, "fsamp_a", "sm_90", "13.0", "hash_a", cubin,
                           sizeof cubin) == FS_OK);

  fs_store_key k = key(DEV, "sm_90", 4096, 151936, 8);
  fs_store_choice c;
  REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_EXACT);
  CHECK(strcmp(c.variant, "fsamp_a") == 0);
  CHECK(strcmp(c.params, "tile_v=128,tile_b=16") == 0);
  CHECK(c.median_us == 20.0 && c.spread_us == 0.1 && c.floor_us == 10.0);
  CHECK(c.n_candidates == 2 && c.n_tied == 1);
  CHECK(strcmp(c.generator_rev, "rev1") == 0);
  CHECK(strcmp(c.nvrtc_version, "13.0") == 0);
  CHECK(strcmp(c.source_hash, "hash_a") == 0);
  CHECK(c.measurement_id == mid);
  CHECK(c.has_cubin && c.cubin_size == sizeof cubin && c.cubin &&
        memcmp(c.cubin, cubin, sizeof cubin) == 0);
  char line[512];
  fs_store_format_choice(&c, line, sizeof line);
  CHECK_MSG(strcmp(line, "NVIDIA H200 sm_90 bf16 D=4096 V=151936 B=8 -> "
                         "fsamp_a 20.000 us +-0.100 (50% of floor) tied=1/2 "
                         "cubin=3000 B") == 0, "%s", line);
  fs_store_choice_clear(&c);
  CHECK(c.cubin == NULL && c.match == FS_STORE_MATCH_NONE);

  void *data = NULL;
  size_t size = 0;
  CHECK(fs_store_get_cubin(s, "fsamp_a", "sm_90", "13.0", "hash_a", &data,
                           &size) == FS_OK);
  CHECK(size == sizeof cubin && data && memcmp(data, cubin, size) == 0);
  fs_store_free(data);
  CHECK(fs_store_get_cubin(s, "fsamp_a", "sm_90", "12.4", "hash_a", &data,
                           &size) == FS_OK);
  CHECK(data == NULL && size == 0);

  /* Another key: nothing. */
  k = key(DEV, "sm_90", 4096, 151936, 16);
  REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NONE && c.variant[0] == 0);

  /* Argument checks name the field and the rule. */
  m = meas(4096, 151936, 8, "fsamp_a", 0, 20.0, 0.1);
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "already has a measurement of fsamp_a"),
            "%s", fs_store_errmsg(s));
  m = meas(4096, 151936, 8, "fsamp_z", 0, 0.0, 0.1);
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "median_us=0"), "%s",
            fs_store_errmsg(s));
  m.median_us = 1.0 / 0.0;
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  m = meas(4096, 151936, 8, NULL, 0, 1.0, 0.1);
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "variant is NULL"), "%s",
            fs_store_errmsg(s));
  m = meas(4096, 151936, 8, "fsamp_z", 0, 1.0, 0.1);
  m.dtype = 9;
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  m.dtype = FS_DTYPE_BF16;
  m.bucket = 0;
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  m.bucket = 8;
  m.outcome = 17;
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  m.outcome = 0;
  CHECK(fs_store_add_measurement(s, run + 100, &m, NULL) ==
        FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "no run"), "%s", fs_store_errmsg(s));
  char longname[300];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  m.variant = longname;
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "limit is 159"), "%s",
            fs_store_errmsg(s));
  fs_store_run bad = ctx(DEV, "", "rev1", NULL);
  int64_t bad_id = 7;
  CHECK(fs_store_begin_run(s, &bad, &bad_id) == FS_INVALID_ARGUMENT);
  CHECK(bad_id == 0);
  CHECK_MSG(strstr(fs_store_errmsg(s), "arch is empty"), "%s",
            fs_store_errmsg(s));
  CHECK(fs_store_put_cubin(s, "v", "sm_90", "13.0", "h", NULL, 0) ==
        FS_INVALID_ARGUMENT);
  CHECK(fs_store_finish_run(s, 12345) == FS_INVALID_ARGUMENT);
  k = key(DEV, "sm_90", 4096, 151936, 8);
  k.dtype = 0;
  CHECK(fs_store_winner(s, &k, &c) == FS_INVALID_ARGUMENT);
  CHECK(fs_store_winner(s, NULL, &c) == FS_INVALID_ARGUMENT);
  /* Everything the checks refused left no row. */
  lines l;
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_measurements(s, NULL, grab_measurement, &l) == FS_OK);
  CHECK(l.n == 3);
  CHECK_MSG(strcmp(l.text[0], "bf16 D=4096 V=151936 B=8 fsamp_a ok 20.000 us "
                              "+-0.100 floor=10.000 regs=128 spills=0 "
                              "smem=49152 n=50 [first line...]") == 0,
            "%s", l.text[0]);
  CHECK(strstr(l.text[1], "fsamp_b ok 30.000 us") != NULL);
  CHECK_MSG(strstr(l.text[2], "fsamp_c compile-failed") != NULL &&
                !strstr(l.text[2], " us"), "%s", l.text[2]);
  int n = 0;
  CHECK(fs_store_list_measurements(s, NULL, stop_at_first, &n) == FS_OK);
  CHECK(n == 1);
  fs_store_filter f;
  memset(&f, 0, sizeof f);
  f.variant = "fsamp_b";
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_measurements(s, &f, grab_measurement, &l) == FS_OK);
  CHECK(l.n == 1);

  CHECK(fs_store_finish_run(s, run) == FS_OK);
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_runs(s, grab_run, &l) == FS_OK);
  CHECK(l.n == 1);
  CHECK_MSG(strstr(l.text[0], "NVIDIA H200 sm_90 sms=132 driver=13000 "
                              "nvrtc=13.0 rev=rev1 host=testhost "
                              "measurements=3 ok=2 finished"), "%s",
            l.text[0]);
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_winners(s, NULL, grab_choice, &l) == FS_OK);
  CHECK(l.n == 1 && strstr(l.text[0], "-> fsamp_a 20.000 us"));
  fs_store_close(s);

  /* A read-only store refuses writes with a clear message. */
  char err[1024];
  REQUIRE(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_OK);
  m = meas(4096, 151936, 8, "fsamp_q", 0, 20.0, 0.1);
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "read-only"), "%s", fs_store_errmsg(s));
  n = 0;
  CHECK(fs_store_list_runs(s, count_runs, &n) == FS_OK && n == 1);
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 4096, 151936, 8)), "fsamp_a") ==
        0);
  fs_store_close(s);
}

/* ---- the winner rule ------------------------------------------------------- */

typedef struct row {
  const char *variant;
  int outcome;
  double median, spread;
  int run; /* 0 or 1: which of two runs of the same revision */
} row;

/* Ties: best fsamp_c 10.00 +-0.03.  fsamp_b 10.04 +-0.02 is within 0.5% of
** the best (and outside both spreads); fsamp_a 10.30 +-0.40 is within its own
** spread but not the best's: not tied (its noise alone cannot tie it, and by
** name it would win); fsamp_d 10.20 +-0.05 is outside (0.20 > max(min(0.05,
** 0.03), 0.05)); fsamp_e 10.06 is just outside 0.5%.  (Both noisy: below.)
** Faster rows that failed never win: fsamp_0 was wrong, fsamp_1 ran once ok
** (fastest of all) and once wrong, fsamp_2 spilled, fsamp_3 crashed. */
static const row k_rows[] = {
    {"fsamp_c", 0, 10.00, 0.03, 0},
    {"fsamp_b", 0, 10.04, 0.02, 1},
    {"fsamp_a", 0, 10.30, 0.40, 0},
    {"fsamp_d", 0, 10.20, 0.05, 1},
    {"fsamp_e", 0, 10.06, 0.00, 0},
    {"fsamp_0", FS_STORE_OUTCOME_WRONG, 5.0, 0.01, 0},
    {"fsamp_1", 0, 4.0, 0.01, 0},
    {"fsamp_1", FS_STORE_OUTCOME_WRONG, 4.0, 0.01, 1},
    {"fsamp_2", FS_STORE_OUTCOME_SPILLS, 3.0, 0.01, 1},
    {"fsamp_3", FS_STORE_OUTCOME_RUN_FAILED, -1, -1, 0},
    {"fsamp_4", FS_STORE_OUTCOME_COMPILE_FAILED, -1, -1, 1},
};
#define N_ROWS ((int)(sizeof k_rows / sizeof *k_rows))

static void test_winner_rule(void) {
  unsigned long long rng = 12345;
  for (int trial = 0; trial < 12; trial++) {
    char name[64];
    snprintf(name, sizeof name, "rule%d.db", trial);
    const char *p = tpath(name);
    fs_store *s = open_rw(p);
    int64_t runs[2];
    /* Two runs of the same revision; the second starts later or earlier
    ** depending on the trial, which must not matter. */
    runs[0] = begin(s, ctx(DEV, "sm_90", "rev7", trial & 1
                                                     ? "2026-01-01T00:00:00.000Z"
                                                     : "2026-01-02T00:00:00.000Z"));
    runs[1] = begin(s, ctx(DEV, "sm_90", "rev7", "2026-01-01T12:00:00.000Z"));
    int order[N_ROWS];
    for (int i = 0; i < N_ROWS; i++) order[i] = i;
    if (trial == 1)
      for (int i = 0; i < N_ROWS; i++) order[i] = N_ROWS - 1 - i;
    if (trial >= 2)
      for (int i = N_ROWS - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(fs_test_rand(&rng) % (unsigned long long)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
    for (int i = 0; i < N_ROWS; i++) {
      const row *r = &k_rows[order[i]];
      fs_store_measurement m =
          meas(4096, 151936, 8, r->variant, r->outcome, r->median, r->spread);
      add(s, runs[r->run], m);
    }
    fs_store_choice c;
    fs_store_key k = key(DEV, "sm_90", 4096, 151936, 8);
    REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
    CHECK_MSG(strcmp(c.variant, "fsamp_b") == 0, "trial %d: winner %s", trial,
              c.variant);
    CHECK_MSG(c.n_tied == 2 && c.n_candidates == 5, "trial %d: tied %d/%d",
              trial, c.n_tied, c.n_candidates);
    CHECK(c.median_us == 10.04);
    fs_store_choice_clear(&c);
    fs_store_close(s);
  }

  /* Equal medians: the smaller name is the best, and wins. */
  fs_store *s = open_rw(tpath("equal.db"));
  int64_t run = begin(s, ctx(DEV, "sm_90", "r", NULL));
  add(s, run, meas(1024, 1000, 1, "zz", 0, 50.0, 0.0));
  add(s, run, meas(1024, 1000, 1, "mm", 0, 50.0, 0.0));
  add(s, run, meas(1024, 1000, 1, "yy", 0, 80.0, 0.0));
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 1024, 1000, 1)), "mm") == 0);

  /* Both noisy: a lead inside both spreads is a tie, settled by name. */
  add(s, run, meas(1024, 1000, 8, "pp", 0, 50.0, 3.0));
  add(s, run, meas(1024, 1000, 8, "aa", 0, 52.0, 4.0));
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 1024, 1000, 8)), "aa") == 0);
  /* The rewin of perf-notes 49e: a variant stopped at the run cap with a
  ** wide spread does not tie a precisely measured faster one (by name it
  ** would win). */
  add(s, run, meas(1024, 1000, 16, "zb", 0, 552.56, 1.04));
  add(s, run, meas(1024, 1000, 16, "za", 0, 584.26, 45.31));
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 1024, 1000, 16)), "zb") == 0);

  /* Only failures: no winner at all. */
  add(s, run, meas(1024, 1000, 2, "w", FS_STORE_OUTCOME_WRONG, 1.0, 0.0));
  add(s, run, meas(1024, 1000, 2, "x", FS_STORE_OUTCOME_RUN_FAILED, -1, -1));
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 1024, 1000, 2)), "") == 0);
  /* The only ok variant was also wrong once at that revision: no winner. */
  int64_t run2 = begin(s, ctx(DEV, "sm_90", "r", NULL));
  add(s, run, meas(1024, 1000, 4, "v", 0, 1.0, 0.0));
  add(s, run2, meas(1024, 1000, 4, "v", FS_STORE_OUTCOME_WRONG, 1.0, 0.0));
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 1024, 1000, 4)), "") == 0);
  fs_store_close(s);

  /* The latest revision decides, even when an older one had faster rows;
  ** a variant's latest ok measurement gives its time. */
  s = open_rw(tpath("revision.db"));
  int64_t old_run = begin(s, ctx(DEV, "sm_90", "rev-old",
                                 "2026-01-01T00:00:00.000Z"));
  int64_t new_run = begin(s, ctx(DEV, "sm_90", "rev-new",
                                 "2026-02-01T00:00:00.000Z"));
  int64_t new_run2 = begin(s, ctx(DEV, "sm_90", "rev-new",
                                  "2026-02-02T00:00:00.000Z"));
  add(s, old_run, meas(2048, 5000, 1, "fast_old", 0, 1.0, 0.0));
  add(s, new_run, meas(2048, 5000, 1, "slow_new", 0, 20.0, 0.0));
  fs_store_measurement m = meas(2048, 5000, 1, "mid_new", 0, 15.0, 0.0);
  m.measured_at = "2026-02-01T01:00:00.000Z";
  add(s, new_run, m);
  m = meas(2048, 5000, 1, "mid_new", 0, 25.0, 0.0);
  m.measured_at = "2026-02-02T01:00:00.000Z"; /* remeasured later: slower */
  add(s, new_run2, m);
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 2048, 5000, 1)), "slow_new") ==
        0);
  /* A newer run whose variants all failed does not hide the last good
  ** revision. */
  int64_t broken = begin(s, ctx(DEV, "sm_90", "rev-broken",
                                "2026-03-01T00:00:00.000Z"));
  add(s, broken, meas(2048, 5000, 1, "slow_new", FS_STORE_OUTCOME_WRONG, 1, 0));
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 2048, 5000, 1)), "slow_new") ==
        0);
  /* Other devices' and archs' rows are separate keys. */
  int64_t other = begin(s, ctx("NVIDIA H100", "sm_90", "rev-new", NULL));
  add(s, other, meas(2048, 5000, 1, "h100_best", 0, 0.5, 0.0));
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 2048, 5000, 1)), "slow_new") ==
        0);
  CHECK(strcmp(winner_of(s, key("NVIDIA H100", "sm_90", 2048, 5000, 1)),
               "h100_best") == 0);
  fs_store_close(s);
}

/* ---- resume after a crash ------------------------------------------------ */

static void test_resume(void) {
  const char *p = tpath("resume.db");
  fs_store_close(open_rw(p));
  /* The child tunes a few variants and dies without closing or finishing
  ** the run, as fs-tune would on SIGKILL. */
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    fs_store *s = NULL;
    if (fs_store_open(p, 0, &s, NULL, 0)) _exit(3);
    fs_store_run r = ctx(DEV, "sm_90", "rev9", NULL);
    int64_t run;
    if (fs_store_begin_run(s, &r, &run)) _exit(4);
    for (int i = 0; i < 5; i++) {
      char v[32];
      snprintf(v, sizeof v, "fsamp_v%d", i);
      fs_store_measurement m =
          meas(4096, 128256, 16, v, i == 3 ? FS_STORE_OUTCOME_WRONG : 0,
               10.0 + i, 0.1);
      if (fs_store_add_measurement(s, run, &m, NULL)) _exit(5);
    }
    raise(SIGKILL);
    _exit(6);
  }
  int status;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
            "child status %d", status);

  fs_store *s = open_rw(p); /* quick_check runs here */
  lines l;
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_runs(s, grab_run, &l) == FS_OK);
  CHECK(l.n == 1 && strstr(l.text[0], "measurements=5 ok=4 unfinished"));
  int64_t run = begin(s, ctx(DEV, "sm_90", "rev9", NULL));
  for (int i = 0; i < 5; i++) {
    char v[32];
    snprintf(v, sizeof v, "fsamp_v%d", i);
    int outcome = 99;
    CHECK(fs_store_has_measurement(s, run, FS_DTYPE_BF16, 4096, 128256, 16,
                                   FS_STORE_MODE_TOKEN, v, &outcome) == FS_OK);
    CHECK_MSG(outcome == (i == 3 ? FS_STORE_OUTCOME_WRONG : 0), "%s: %d", v,
              outcome);
  }
  int outcome = 99;
  CHECK(fs_store_has_measurement(s, run, FS_DTYPE_BF16, 4096, 128256, 16,
                                 FS_STORE_MODE_TOKEN, "fsamp_v5",
                                 &outcome) == FS_OK);
  CHECK(outcome == -1);
  CHECK(fs_store_has_measurement(s, run, FS_DTYPE_BF16, 4096, 128256, 32,
                                 FS_STORE_MODE_TOKEN, "fsamp_v0",
                                 &outcome) == FS_OK);
  CHECK(outcome == -1);
  CHECK(fs_store_has_measurement(s, run, FS_DTYPE_FP16, 4096, 128256, 16,
                                 FS_STORE_MODE_TOKEN, "fsamp_v0",
                                 &outcome) == FS_OK);
  CHECK(outcome == -1);
  /* A new generator revision or another device measures again. */
  int64_t rev10 = begin(s, ctx(DEV, "sm_90", "rev10", NULL));
  CHECK(fs_store_has_measurement(s, rev10, FS_DTYPE_BF16, 4096, 128256, 16,
                                 FS_STORE_MODE_TOKEN, "fsamp_v0",
                                 &outcome) == FS_OK);
  CHECK(outcome == -1);
  int64_t h100 = begin(s, ctx("NVIDIA H100", "sm_90", "rev9", NULL));
  CHECK(fs_store_has_measurement(s, h100, FS_DTYPE_BF16, 4096, 128256, 16,
                                 FS_STORE_MODE_TOKEN, "fsamp_v0",
                                 &outcome) == FS_OK);
  CHECK(outcome == -1);
  CHECK(fs_store_has_measurement(s, 9999, FS_DTYPE_BF16, 4096, 128256, 16,
                                 FS_STORE_MODE_TOKEN, "fsamp_v0",
                                 &outcome) == FS_INVALID_ARGUMENT);
  /* The resumed run finishes the job; the winner uses both runs' rows. */
  add(s, run, meas(4096, 128256, 16, "fsamp_v5", 0, 9.0, 0.05));
  CHECK(strcmp(winner_of(s, key(DEV, "sm_90", 4096, 128256, 16)),
               "fsamp_v5") == 0);
  fs_store_close(s);
}

/* ---- nearest and the lookup chain -------------------------------------------- */

static int refuse_variant(void *arg, const fs_store_choice *c) {
  return strcmp(c->variant, (const char *)arg) != 0;
}

static void test_nearest(void) {
  fs_store *s = open_rw(tpath("nearest.db"));
  int64_t h200 = begin(s, ctx(DEV, "sm_90", "r1", NULL));
  int64_t h100 = begin(s, ctx("NVIDIA H100", "sm_90", "r1", NULL));
  int64_t a100 = begin(s, ctx("NVIDIA A100", "sm_80", "r1", NULL));
  add(s, h200, meas(4096, 151936, 8, "h200_D4096_B8", 0, 10, 0));
  add(s, h200, meas(4096, 151936, 4, "h200_D4096_B4", 0, 10, 0));
  add(s, h200, meas(2048, 128256, 1, "h200_D2048_B1", 0, 10, 0));
  add(s, h200, meas(1024, 151936, 64, "h200_failed", FS_STORE_OUTCOME_WRONG, 1,
                    0));
  add(s, h100, meas(4096, 151936, 16, "h100_D4096_B16", 0, 10, 0));
  add(s, h100, meas(8192, 128256, 256, "h100_D8192_B256", 0, 10, 0));
  add(s, a100, meas(4096, 151936, 32, "a100_D4096_B32", 0, 10, 0));

  fs_store_choice c;
  /* Exact. */
  fs_store_key k = key(DEV, "sm_90", 4096, 151936, 8);
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_EXACT && c.distance == 0.0);
  CHECK(strcmp(c.variant, "h200_D4096_B8") == 0);

  /* B=16 on the H200: B=8 (own device, ln 2) and the H100's B=16 (other
  ** device, distance 0): the H100's exact shape is nearer. */
  k = key(DEV, "sm_90", 4096, 151936, 16);
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NEAREST && c.distance == 0.0);
  CHECK_MSG(strcmp(c.variant, "h100_D4096_B16") == 0, "%s", c.variant);
  CHECK(strcmp(c.device_name, "NVIDIA H100") == 0 && c.bucket == 16);

  /* B=6: B=4 and B=8 are ln(1.5) and ln(4/3) away: B=8 is nearer. */
  k = key(DEV, "sm_90", 4096, 151936, 6);
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NEAREST);
  CHECK_MSG(strcmp(c.variant, "h200_D4096_B8") == 0, "%s", c.variant);
  double want = log(8.0 / 6.0);
  CHECK(fabs(c.distance - want) < 1e-12);
  char line[512];
  fs_store_format_choice(&c, line, sizeof line);
  CHECK_MSG(strstr(line, "[nearest d=0.288]"), "%s", line);

  /* B=2 on a device never tuned: the H200's B=4 (ln 2) beats its B=8
  ** (ln 4), the H100's B=16 (ln 8) and D=2048's B=1 (ln 2 + ln 2 + a V
  ** term). */
  k = key("NVIDIA GH200", "sm_90", 4096, 151936, 2);
  REQUIRE(fs_store_nearest(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NEAREST);
  CHECK_MSG(strcmp(c.variant, "h200_D4096_B4") == 0, "%s", c.variant);
  CHECK(fabs(c.distance - log(2.0)) < 1e-12);

  /* The tie-breaks at equal distance: the requested device, then the
  ** smaller D, V, bucket, then the device name. */
  fs_store *t = open_rw(tpath("nearest_tie.db"));
  int64_t ra = begin(t, ctx("dev_b", "sm_90", "r", NULL));
  int64_t rb = begin(t, ctx("dev_a", "sm_90", "r", NULL));
  add(t, ra, meas(8192, 1000, 1, "b_8192", 0, 1, 0));
  add(t, ra, meas(2048, 1000, 1, "b_2048", 0, 1, 0));
  add(t, rb, meas(2048, 1000, 1, "a_2048", 0, 1, 0));
  add(t, rb, meas(4096, 5000, 4, "a_B4", 0, 1, 0));
  add(t, rb, meas(4096, 5000, 1, "a_B1", 0, 1, 0));
  /* D=2048 and D=8192 are both ln 2 from 4096. */
  k = key("dev_b", "sm_90", 4096, 1000, 1);
  REQUIRE(fs_store_nearest(t, &k, NULL, NULL, &c) == FS_OK);
  CHECK_MSG(strcmp(c.variant, "b_2048") == 0, "own device, smaller D: %s",
            c.variant);
  k = key("dev_c", "sm_90", 4096, 1000, 1);
  REQUIRE(fs_store_nearest(t, &k, NULL, NULL, &c) == FS_OK);
  CHECK_MSG(strcmp(c.variant, "a_2048") == 0, "smaller D, then name: %s",
            c.variant);
  /* B=1 and B=4 are both ln 2 from B=2. */
  k = key("dev_a", "sm_90", 4096, 5000, 2);
  REQUIRE(fs_store_nearest(t, &k, NULL, NULL, &c) == FS_OK);
  CHECK_MSG(strcmp(c.variant, "a_B1") == 0, "smaller bucket: %s", c.variant);
  fs_store_close(t);

  /* The accept callback moves on to the next nearest key. */
  k = key(DEV, "sm_90", 4096, 151936, 8);
  REQUIRE(fs_store_lookup(s, &k, refuse_variant, (void *)"h200_D4096_B8", &c) ==
          FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NEAREST);
  CHECK_MSG(strcmp(c.variant, "h200_D4096_B4") == 0, "%s", c.variant);

  /* Other arch, other dtype, a key with only failures: none. */
  k = key(DEV, "sm_100", 4096, 151936, 8);
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NONE);
  k = key(DEV, "sm_90", 4096, 151936, 8);
  k.dtype = FS_DTYPE_FP16;
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NONE);
  fs_store_format_choice(&c, line, sizeof line);
  CHECK(strcmp(line, "no tuned variant") == 0);
  /* sm_80: only the A100's row, whatever the shape. */
  k = key(DEV, "sm_80", 128, 1000, 1);
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NEAREST &&
        strcmp(c.variant, "a100_D4096_B32") == 0);
  fs_store_choice_clear(&c);
  CHECK(strcmp(fs_store_match_name(FS_STORE_MATCH_NEAREST), "nearest") == 0);

  /* The winners listing with a filter. */
  lines l;
  memset(&l, 0, sizeof l);
  fs_store_filter f;
  memset(&f, 0, sizeof f);
  f.arch = "sm_90";
  CHECK(fs_store_list_winners(s, &f, grab_choice, &l) == FS_OK);
  CHECK_MSG(l.n == 5, "%d winners", l.n);
  f.device_name = "NVIDIA H100";
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_winners(s, &f, grab_choice, &l) == FS_OK);
  CHECK(l.n == 2);
  CHECK(strncmp(l.text[0], "NVIDIA H100 sm_90 bf16 D=4096 V=151936 B=16 -> "
                           "h100_D4096_B16 10.000 us +-0.000 (100% of floor) "
                           "tied=1/1 no-cubin", 200) == 0);
  fs_store_close(s);
}

/* ---- modes ------------------------------------------------------------------ */

/* A bf16 D=4096 V=151936 measurement in `mode`. */
static fs_store_measurement meas_in(int mode, int B, const char *variant,
                                    int outcome, double median) {
  fs_store_measurement m =
      meas(4096, 151936, B, variant, outcome, median, 0.01);
  m.mode = mode;
  return m;
}

static int grab_choice_mode(void *arg, const fs_store_choice *c) {
  int *modes = arg; /* modes[0]: count, then (bucket, mode) pairs */
  if (modes[0] < 16) {
    modes[1 + 2 * modes[0]] = c->bucket;
    modes[2 + 2 * modes[0]] = c->mode;
    modes[0]++;
  }
  return 0;
}

static void test_modes(void) {
  const int T = FS_STORE_MODE_TOKEN, G16 = FS_STORE_MODE_GROUP16,
            GR = FS_STORE_MODE_GREEDY;
  fs_store *s = open_rw(tpath("modes.db"));
  int64_t run = begin(s, ctx(DEV, "sm_90", "rev1", "2026-01-01T00:00:00.000Z"));

  /* B=8: fsamp_a is the faster sampled kernel, fsamp_b the faster greedy
  ** one.  Each (key, variant) is measured once per mode in the same run. */
  add(s, run, meas_in(T, 8, "fsamp_a", 0, 10.0));
  add(s, run, meas_in(T, 8, "fsamp_b", 0, 12.0));
  add(s, run, meas_in(GR, 8, "fsamp_a", 0, 9.0));
  add(s, run, meas_in(GR, 8, "fsamp_b", 0, 7.0));
  fs_store_key k8 = key(DEV, "sm_90", 4096, 151936, 8);
  CHECK(strcmp(winner_of(s, k8), "fsamp_a") == 0);
  CHECK(strcmp(winner_of(s, in_mode(k8, GR)), "fsamp_b") == 0);
  CHECK(strcmp(winner_of(s, in_mode(k8, G16)), "") == 0); /* never timed */
  fs_store_choice c;
  fs_store_key k = in_mode(k8, GR);
  REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_EXACT && c.mode == GR && c.bucket == 8);
  CHECK(c.median_us == 7.0 && c.n_candidates == 2 && c.n_tied == 1);
  char line[512];
  fs_store_format_choice(&c, line, sizeof line);
  CHECK_MSG(strcmp(line, "NVIDIA H200 sm_90 bf16 D=4096 V=151936 B=8 "
                         "mode=greedy -> fsamp_b 7.000 us +-0.010 (143% of "
                         "floor) tied=1/2 no-cubin") == 0, "%s", line);
  fs_store_choice_clear(&c);
  k = k8;
  REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
  CHECK(c.mode == T);
  fs_store_format_choice(&c, line, sizeof line);
  CHECK_MSG(strcmp(line, "NVIDIA H200 sm_90 bf16 D=4096 V=151936 B=8 -> "
                         "fsamp_a 10.000 us +-0.010 (100% of floor) tied=1/2 "
                         "no-cubin") == 0, "%s", line);
  c.mode = G16;
  fs_store_format_choice(&c, line, sizeof line);
  CHECK_MSG(strstr(line, " B=8 mode=group16 -> fsamp_a 10.000 us"), "%s",
            line);
  fs_store_choice_clear(&c);

  /* A second measurement in the same mode of the same run is refused. */
  fs_store_measurement m = meas_in(GR, 8, "fsamp_a", 0, 9.5);
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  const char *msg = fs_store_errmsg(s);
  CHECK_MSG(strstr(msg, "already has a measurement of fsamp_a") &&
                strstr(msg, "bucket=8 mode=greedy"), "%s", msg);

  /* B=16: fsamp_c is the fastest in every mode it was timed in, until it
  ** is found wrong on greedy calls: then it wins in no mode.  fsamp_d spilled
  ** when compiled for token timing: it cannot win greedy either. */
  add(s, run, meas_in(T, 16, "fsamp_a", 0, 10.0));
  add(s, run, meas_in(T, 16, "fsamp_c", 0, 5.0));
  add(s, run, meas_in(G16, 16, "fsamp_a", 0, 8.0));
  add(s, run, meas_in(G16, 16, "fsamp_c", 0, 4.0));
  add(s, run, meas_in(GR, 16, "fsamp_a", 0, 9.0));
  add(s, run, meas_in(GR, 16, "fsamp_d", 0, 3.0));
  fs_store_key k16 = key(DEV, "sm_90", 4096, 151936, 16);
  CHECK(strcmp(winner_of(s, k16), "fsamp_c") == 0);
  CHECK(strcmp(winner_of(s, in_mode(k16, G16)), "fsamp_c") == 0);
  CHECK(strcmp(winner_of(s, in_mode(k16, GR)), "fsamp_d") == 0);
  add(s, run, meas_in(GR, 16, "fsamp_c", FS_STORE_OUTCOME_WRONG, 2.0));
  add(s, run, meas_in(T, 16, "fsamp_d", FS_STORE_OUTCOME_SPILLS, -1));
  CHECK(strcmp(winner_of(s, k16), "fsamp_a") == 0);
  CHECK(strcmp(winner_of(s, in_mode(k16, G16)), "fsamp_a") == 0);
  CHECK(strcmp(winner_of(s, in_mode(k16, GR)), "fsamp_a") == 0);
  k = k16;
  REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
  CHECK_MSG(c.n_candidates == 1, "%d candidates", c.n_candidates);
  fs_store_choice_clear(&c);

  /* B=64: the revision is chosen per mode.  rev2 timed only token (its one
  ** greedy row failed): token takes rev2's rows, greedy keeps rev1's. */
  int64_t run2 =
      begin(s, ctx(DEV, "sm_90", "rev2", "2026-02-01T00:00:00.000Z"));
  add(s, run, meas_in(T, 64, "fsamp_a", 0, 10.0));
  add(s, run, meas_in(GR, 64, "fsamp_b", 0, 8.0));
  add(s, run2, meas_in(T, 64, "fsamp_b", 0, 11.0));
  add(s, run2, meas_in(GR, 64, "fsamp_e", FS_STORE_OUTCOME_RUN_FAILED, -1));
  fs_store_key k64 = key(DEV, "sm_90", 4096, 151936, 64);
  k = k64;
  REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
  CHECK(!strcmp(c.variant, "fsamp_b") && !strcmp(c.generator_rev, "rev2"));
  fs_store_choice_clear(&c);
  k = in_mode(k64, GR);
  REQUIRE(fs_store_winner(s, &k, &c) == FS_OK);
  CHECK_MSG(!strcmp(c.variant, "fsamp_b") && !strcmp(c.generator_rev, "rev1"),
            "%s %s", c.variant, c.generator_rev);
  fs_store_choice_clear(&c);

  /* Nearest never crosses modes: B=12 is tuned in token only.  Greedy and
  ** group16 calls at B=12 take their own mode's nearest (B=16, ln 4/3),
  ** not the token winner at distance 0. */
  add(s, run, meas_in(T, 12, "token_only", 0, 1.0));
  fs_store_key k12 = key(DEV, "sm_90", 4096, 151936, 12);
  k = k12;
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_EXACT && !strcmp(c.variant, "token_only"));
  fs_store_choice_clear(&c);
  for (int mode = G16; mode <= GR; mode++) {
    k = in_mode(k12, mode);
    REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
    CHECK_MSG(c.match == FS_STORE_MATCH_NEAREST && c.mode == mode &&
                  c.bucket == 16 && !strcmp(c.variant, "fsamp_a") &&
                  fabs(c.distance - log(16.0 / 12.0)) < 1e-12,
              "mode %d: %s B=%d mode %d", mode, c.variant, c.bucket, c.mode);
    fs_store_choice_clear(&c);
  }
  /* Another device: the nearest of the same mode, at distance 0. */
  k = in_mode(key("NVIDIA H100", "sm_90", 4096, 151936, 8), GR);
  REQUIRE(fs_store_nearest(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NEAREST && c.mode == GR &&
        !strcmp(c.variant, "fsamp_b"));
  fs_store_choice_clear(&c);
  /* Only token rows on sm_80: a greedy lookup there finds nothing. */
  int64_t a100 = begin(s, ctx("NVIDIA A100", "sm_80", "rev1", NULL));
  add(s, a100, meas_in(T, 8, "a100_token", 0, 10.0));
  k = in_mode(key("NVIDIA A100", "sm_80", 4096, 151936, 8), GR);
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NONE);
  k.mode = T;
  REQUIRE(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_EXACT && !strcmp(c.variant, "a100_token"));
  fs_store_choice_clear(&c);

  /* Resume is per mode. */
  int outcome = 99;
  CHECK(fs_store_has_measurement(s, run, FS_DTYPE_BF16, 4096, 151936, 16, T,
                                 "fsamp_d", &outcome) == FS_OK);
  CHECK(outcome == FS_STORE_OUTCOME_SPILLS);
  CHECK(fs_store_has_measurement(s, run, FS_DTYPE_BF16, 4096, 151936, 16, GR,
                                 "fsamp_d", &outcome) == FS_OK);
  CHECK(outcome == FS_STORE_OUTCOME_OK);
  CHECK(fs_store_has_measurement(s, run, FS_DTYPE_BF16, 4096, 151936, 16, G16,
                                 "fsamp_d", &outcome) == FS_OK);
  CHECK(outcome == -1);
  CHECK(fs_store_has_measurement(s, run, FS_DTYPE_BF16, 4096, 151936, 16, 3,
                                 "fsamp_d", &outcome) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "mode=3: must be an fs_store_mode (0 "
                                       "token, 1 group16, 2 greedy)"),
            "%s", fs_store_errmsg(s));

  /* Winners: one per tuned (key, mode), modes in enum order (token,
  ** group16, greedy), not by name. */
  int got[33];
  memset(got, 0, sizeof got);
  fs_store_filter f;
  memset(&f, 0, sizeof f);
  f.arch = "sm_90";
  f.device_name = DEV;
  CHECK(fs_store_list_winners(s, &f, grab_choice_mode, got) == FS_OK);
  static const int want[] = {8, T, 8, GR, 12, T, 16, T, 16, G16, 16, GR,
                             64, T, 64, GR};
  int n_want = (int)(sizeof want / sizeof *want) / 2;
  CHECK_MSG(got[0] == n_want, "%d winners", got[0]);
  for (int i = 0; i < n_want && i < got[0]; i++)
    CHECK_MSG(got[1 + 2 * i] == want[2 * i] &&
                  got[2 + 2 * i] == want[2 * i + 1],
              "winner %d: B=%d mode %d", i, got[1 + 2 * i], got[2 + 2 * i]);
  lines l;
  memset(&l, 0, sizeof l);
  f.mode = "greedy";
  CHECK(fs_store_list_winners(s, &f, grab_choice, &l) == FS_OK);
  CHECK_MSG(l.n == 3, "%d greedy winners", l.n);
  for (int i = 0; i < l.n; i++)
    CHECK_MSG(strstr(l.text[i], " mode=greedy -> "), "%s", l.text[i]);
  memset(&l, 0, sizeof l);
  f.mode = "token";
  CHECK(fs_store_list_winners(s, &f, grab_choice, &l) == FS_OK);
  CHECK_MSG(l.n == 4, "%d token winners", l.n);
  for (int i = 0; i < l.n; i++)
    CHECK_MSG(!strstr(l.text[i], "mode="), "%s", l.text[i]);

  /* Measurements: filtered by mode, with the mode filled in and printed. */
  memset(&l, 0, sizeof l);
  f.mode = "group16";
  CHECK(fs_store_list_measurements(s, &f, grab_measurement, &l) == FS_OK);
  CHECK_MSG(l.n == 2, "%d group16 rows", l.n);
  CHECK_MSG(l.n == 2 &&
                !strcmp(l.text[0], "bf16 D=4096 V=151936 B=16 mode=group16 "
                                   "fsamp_c ok 4.000 us +-0.010 floor=10.000 "
                                   "regs=128 spills=0 smem=49152 n=50") &&
                strstr(l.text[1], "B=16 mode=group16 fsamp_a ok 8.000 us"),
            "%s | %s", l.text[0], l.text[1]);
  memset(&l, 0, sizeof l);
  f.mode = NULL;
  f.bucket = 8;
  f.variant = "fsamp_b";
  CHECK(fs_store_list_measurements(s, &f, grab_measurement, &l) == FS_OK);
  CHECK_MSG(l.n == 2 &&
                !strcmp(l.text[0], "bf16 D=4096 V=151936 B=8 mode=greedy "
                                   "fsamp_b ok 7.000 us +-0.010 floor=10.000 "
                                   "regs=128 spills=0 smem=49152 n=50") &&
                !strcmp(l.text[1], "bf16 D=4096 V=151936 B=8 fsamp_b ok "
                                   "12.000 us +-0.010 floor=10.000 regs=128 "
                                   "spills=0 smem=49152 n=50"),
            "%d: %s | %s", l.n, l.text[0], l.text[1]);
  /* A filter mode that is no mode's name is refused, naming it. */
  memset(&f, 0, sizeof f);
  f.mode = "sampled";
  memset(&l, 0, sizeof l);
  CHECK(fs_store_list_winners(s, &f, grab_choice, &l) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "'sampled'") &&
                strstr(fs_store_errmsg(s), "token, group16 or greedy"), "%s",
            fs_store_errmsg(s));
  f.mode = "Greedy";
  CHECK(fs_store_list_measurements(s, &f, grab_measurement, &l) ==
        FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "'Greedy'"), "%s", fs_store_errmsg(s));
  CHECK(l.n == 0);

  /* Mode numbers that are no fs_store_mode are refused, naming the field. */
  long long rows = sql_int(tpath("modes.db"),
                           "SELECT count(*) FROM measurements");
  m = meas_in(7, 8, "fsamp_z", 0, 1.0);
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "mode=7: must be an fs_store_mode (0 "
                                       "token, 1 group16, 2 greedy)"),
            "%s", fs_store_errmsg(s));
  m.mode = -1;
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_INVALID_ARGUMENT);
  CHECK(sql_int(tpath("modes.db"), "SELECT count(*) FROM measurements") ==
        rows);
  k = in_mode(k8, 3);
  CHECK(fs_store_winner(s, &k, &c) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "key.mode=3: must be an fs_store_mode"),
            "%s", fs_store_errmsg(s));
  CHECK(fs_store_nearest(s, &k, NULL, NULL, &c) == FS_INVALID_ARGUMENT);
  k.mode = -2;
  CHECK(fs_store_lookup(s, &k, NULL, NULL, &c) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(s), "key.mode=-2"), "%s",
            fs_store_errmsg(s));
  CHECK(c.match == FS_STORE_MATCH_NONE);
  /* A mode number a newer caller might pass prints as unknown. */
  m = meas_in(9, 8, "v", 0, 1.0);
  fs_store_format_measurement(&m, line, sizeof line);
  CHECK_MSG(strncmp(line, "bf16 D=4096 V=151936 B=8 mode=? v ok", 36) == 0,
            "%s", line);
  fs_store_close(s);
}

static void test_names(void) {
  for (int i = 0; i <= FS_STORE_OUTCOME_SPILLS; i++)
    CHECK(fs_store_outcome_parse(fs_store_outcome_name(i)) == i);
  CHECK(fs_store_outcome_name(5) == NULL);
  CHECK(fs_store_outcome_parse("bogus") == -1);
  CHECK(fs_store_dtype_parse(fs_store_dtype_name(FS_DTYPE_BF16)) ==
        FS_DTYPE_BF16);
  CHECK(fs_store_dtype_parse(fs_store_dtype_name(FS_DTYPE_FP16)) ==
        FS_DTYPE_FP16);
  CHECK(fs_store_dtype_name(0) == NULL);
  CHECK(FS_STORE_MODES == 3);
  for (int i = 0; i < FS_STORE_MODES; i++)
    CHECK(fs_store_mode_parse(fs_store_mode_name(i)) == i);
  CHECK(strcmp(fs_store_mode_name(FS_STORE_MODE_TOKEN), "token") == 0);
  CHECK(strcmp(fs_store_mode_name(FS_STORE_MODE_GROUP16), "group16") == 0);
  CHECK(strcmp(fs_store_mode_name(FS_STORE_MODE_GREEDY), "greedy") == 0);
  CHECK(fs_store_mode_name(3) == NULL && fs_store_mode_name(-1) == NULL);
  CHECK(fs_store_mode_parse("sampled") == -1);
  CHECK(fs_store_mode_parse(NULL) == -1);
  CHECK(strcmp(fs_store_errmsg(NULL), "") == 0);
  /* Formatting into a short buffer truncates and reports the full length. */
  fs_store_measurement m = meas(1, 2, 3, "v", 0, 1.5, -1);
  m.registers = m.spills = m.smem_bytes = m.samples = -1;
  m.floor_us = -1;
  char small[8];
  int need = fs_store_format_measurement(&m, small, sizeof small);
  CHECK(need == (int)strlen("bf16 D=1 V=2 B=3 v ok 1.500 us"));
  CHECK(strcmp(small, "bf16 D=") == 0);
  CHECK(fs_store_format_measurement(&m, NULL, 0) == need);
}

int main(void) {
  make_tmpdir();
  test_create();
  test_insert_lookup();
  test_winner_rule();
  test_resume();
  test_nearest();
  test_modes();
  test_names();
  remove_tmpdir();
  return fs_test_done("test_store");
}
