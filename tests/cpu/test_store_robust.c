// fs-test-timeout: 120
/*
** test_store_robust.c: the tuning database under abuse.  Missing, empty,
** random, truncated and corrupted files give a clear FS_DB error (from open
** or the first query) and never crash; two tuner processes writing at once
** both succeed with no lost rows and an intact file, a writer waits for
** another that holds the lock, and SQLite failing at the seams (a write
** error from the file system, an allocation failure) surfaces as a status
** with a message and leaves the file consistent: a transaction lands whole
** or not at all, a schema migration included.
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "fs_test.h"
#include "store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store_util.h"

static void make_tmpdir(void) { make_tmpdir_named("fs_test_store_robust"); }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fs_store_run ctx(const char *device, const char *rev) {
  fs_store_run r;
  memset(&r, 0, sizeof r);
  r.device_name = device;
  r.arch = "sm_90";
  r.sm_count = 132;
  r.driver_version = 13000;
  r.nvrtc_version = "13.0";
  r.generator_rev = rev;
  return r;
}

static fs_store_measurement meas(int B, const char *variant, double median) {
  fs_store_measurement m = qwen_meas(B);
  m.variant = variant;
  m.params = "tile_v=128,tile_b=16,k=64,warps=4x1,stages=4";
  m.median_us = median;
  m.spread_us = 0.05;
  m.samples = 40;
  m.floor_us = 9.0;
  m.registers = 96;
  m.spills = 0;
  m.smem_bytes = 65536;
  m.message = "verified against the reference: 0 mismatches";
  return m;
}

static long long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static void copy_prefix(const char *from, const char *to, long long n) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  REQUIRE(in && out);
  char buf[65536];
  while (n > 0) {
    size_t want = n > (long long)sizeof buf ? sizeof buf : (size_t)n;
    size_t got = fread(buf, 1, want, in);
    if (got == 0) break;
    fwrite(buf, 1, got, out);
    n -= (long long)got;
  }
  fclose(in);
  fclose(out);
}

/* A database of a few hundred rows and ~40 cubins (about 1 MB, many pages),
** closed cleanly (WAL checkpointed into the file). */
static void build_db(const char *path) {
  fs_store *s = NULL;
  char err[1024];
  REQUIRE(fs_store_open(path, FS_STORE_CREATE, &s, err, sizeof err) == FS_OK);
  fs_store_run r = ctx("NVIDIA H200", "rev1");
  int64_t run;
  REQUIRE(fs_store_begin_run(s, &r, &run) == FS_OK);
  unsigned long long rng = 7;
  for (int B = 1; B <= 256; B *= 2)
    for (int v = 0; v < 40; v++) {
      char name[64];
      snprintf(name, sizeof name, "fsamp_bf16_sm90_mma_v%d", v);
      fs_store_measurement m =
          meas(B, name, 10.0 + (double)(fs_test_rand(&rng) % 1000) / 100);
      char hash[16];
      snprintf(hash, sizeof hash, "src%d", v);
      m.source_hash = hash;
      REQUIRE(fs_store_add_measurement(s, run, &m, NULL) == FS_OK);
    }
  for (int v = 0; v < 40; v++) {
    char name[64], hash[16];
    snprintf(name, sizeof name, "fsamp_bf16_sm90_mma_v%d", v);
    snprintf(hash, sizeof hash, "src%d", v);
    unsigned char cubin[20000];
    for (size_t i = 0; i < sizeof cubin; i++)
      cubin[i] = (unsigned char)fs_test_rand(&rng);
    REQUIRE(fs_store_put_cubin(s, name, "sm_90", "13.0", hash, cubin,
                               sizeof cubin) == FS_OK);
  }
  REQUIRE(fs_store_finish_run(s, run) == FS_OK);
  fs_store_close(s);
}

static int noop_run(void *arg, const fs_store_run *r) {
  (void)arg;
  (void)r;
  return 0;
}
static int noop_meas(void *arg, const fs_store_run *r,
                     const fs_store_measurement *m) {
  (void)arg;
  (void)r;
  (void)m;
  return 0;
}
static int noop_choice(void *arg, const fs_store_choice *c) {
  (void)arg;
  (void)c;
  return 0;
}

/* Everything a reader does, on a store that may be damaged: each call must
** return FS_OK or FS_DB (with a message naming the file), nothing else and
** no crash.  Returns the number of FS_DB results. */
static int read_everything(fs_store *s, const char *label) {
  int fails = 0, st;
  const char *path = fs_store_path(s);
#define READ_OK(call)                                                       \
  do {                                                                      \
    st = (call);                                                            \
    CHECK_MSG(st == FS_OK || st == FS_DB, "%s: %s -> %d", label, #call, st); \
    if (st == FS_DB) {                                                      \
      fails++;                                                              \
      CHECK_MSG(strstr(fs_store_errmsg(s), path), "%s: %s", label,          \
                fs_store_errmsg(s));                                        \
    }                                                                       \
  } while (0)
  fs_store_choice c;
  for (int B = 1; B <= 512; B *= 4) {
    fs_store_key k = {"NVIDIA H200", "sm_90", FS_DTYPE_BF16, 4096, 151936, B,
                      FS_STORE_MODE_TOKEN};
    READ_OK(fs_store_lookup(s, &k, NULL, NULL, &c));
    fs_store_choice_clear(&c);
  }
  READ_OK(fs_store_list_runs(s, noop_run, NULL));
  READ_OK(fs_store_list_measurements(s, NULL, noop_meas, NULL));
  READ_OK(fs_store_list_winners(s, NULL, noop_choice, NULL));
  void *data = NULL;
  size_t n = 0;
  READ_OK(fs_store_get_cubin(s, "fsamp_bf16_sm90_mma_v39", "sm_90", "13.0",
                             "src39", &data, &n));
  fs_store_free(data);
  READ_OK(fs_store_check(s));
#undef READ_OK
  return fails;
}

/* ---- bad files ---------------------------------------------------------- */

static void test_missing_and_odd(void) {
  char err[1024];
  fs_store *s = NULL;
  const char *p = tpath("missing.db");
  CHECK(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_DB);
  CHECK(s == NULL);
  CHECK_MSG(strstr(err, p) && strstr(err, "read-only") &&
                strstr(err, "No such file or directory"), "%s", err);
  /* The read-only open created nothing. */
  CHECK(file_size(p) == -1);
  /* A small err buffer is truncated, not overrun. */
  char small[16];
  memset(small, 'x', sizeof small);
  CHECK(fs_store_open(p, FS_STORE_READONLY, &s, small, 10) == FS_DB);
  CHECK(strlen(small) == 9 && small[10] == 'x');
  CHECK(fs_store_open(p, FS_STORE_READONLY, &s, NULL, 0) == FS_DB);

  CHECK(fs_store_open(g_dir, FS_STORE_CREATE, &s, err, sizeof err) == FS_DB);
  CHECK_MSG(strstr(err, "is a directory"), "%s", err);

  /* An empty file is an empty SQLite database: read-only it is "not a
  ** tuning database"; read-write it gets the schema. */
  p = tpath("empty.db");
  FILE *f = fopen(p, "wb");
  REQUIRE(f);
  fclose(f);
  CHECK(fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err) == FS_DB);
  CHECK_MSG(strstr(err, "empty file"), "%s", err);
  CHECK(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  fs_store_close(s);
}

static void test_random_bytes(void) {
  char err[1024];
  fs_store *s = NULL;
  unsigned long long rng = 3;
  for (int size = 16; size <= 65536; size *= 8) {
    char name[32];
    snprintf(name, sizeof name, "random%d.db", size);
    const char *p = tpath(name);
    FILE *f = fopen(p, "wb");
    REQUIRE(f);
    for (int i = 0; i < size; i++) fputc((int)(fs_test_rand(&rng) & 255), f);
    fclose(f);
    int flags[3] = {0, FS_STORE_READONLY,
                    FS_STORE_READONLY | FS_STORE_QUICK_CHECK};
    for (int i = 0; i < 3; i++) {
      CHECK_MSG(fs_store_open(p, flags[i], &s, err, sizeof err) == FS_DB,
                "%s flags %d", name, flags[i]);
      CHECK(s == NULL);
      CHECK_MSG(strstr(err, p) && strstr(err, "file is not a database") &&
                    strstr(err, "SQLITE_NOTADB") &&
                    strstr(err, "move it away and retune"),
                "%s", err);
    }
    /* Refused, not repaired: the bytes are still there. */
    CHECK(file_size(p) == size);
  }
}

static void test_truncated(void) {
  char good[512];
  snprintf(good, sizeof good, "%s", tpath("good.db"));
  build_db(good);
  long long size = file_size(good);
  REQUIRE(size > 200000);
  char err[1024];
  fs_store *s = NULL;
  /* Halves, quarters, just a header, one byte short, a page short. */
  long long cuts[] = {size / 2, size / 4, 3 * size / 4, size - 4096, size - 1,
                      100, 4096, 50};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    char name[32], label[64];
    snprintf(name, sizeof name, "cut%zu.db", i);
    snprintf(label, sizeof label, "truncated to %lld of %lld", cuts[i], size);
    const char *p = tpath(name);
    copy_prefix(good, p, cuts[i]);
    /* Read-write opens check the whole file first. */
    int st = fs_store_open(p, 0, &s, err, sizeof err);
    CHECK_MSG(st == FS_DB && !s, "%s: read-write open gave %d", label, st);
    CHECK_MSG(strstr(err, p) && (strstr(err, "malformed") ||
                                 strstr(err, "integrity") ||
                                 strstr(err, "not a tuning database") ||
                                 strstr(err, "not a database")),
              "%s: %s", label, err);
    /* So do read-only opens that ask for it. */
    st = fs_store_open(p, FS_STORE_READONLY | FS_STORE_QUICK_CHECK, &s, err,
                       sizeof err);
    CHECK_MSG(st == FS_DB && !s, "%s: checked read-only open gave %d", label,
              st);
    /* A plain read-only open fails at open or at the first query that
    ** meets the damage, and says so. */
    st = fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err);
    CHECK_MSG(st == FS_OK || st == FS_DB, "%s: read-only open gave %d", label,
              st);
    if (st == FS_OK) {
      int fails = read_everything(s, label);
      CHECK_MSG(fails > 0, "%s: no read noticed the damage", label);
      fs_store_close(s);
    }
    /* Importing it fails cleanly and leaves the destination as it was. */
    fs_store *dst = NULL;
    REQUIRE(fs_store_open(tpath("import_dst.db"), FS_STORE_CREATE, &dst, err,
                          sizeof err) == FS_OK);
    fs_store_transfer_stats ts;
    CHECK(fs_store_merge_file(dst, p, &ts) == FS_DB);
    CHECK_MSG(strstr(fs_store_errmsg(dst), "merging from") &&
                  strstr(fs_store_errmsg(dst), p),
              "%s", fs_store_errmsg(dst));
    CHECK(ts.runs == 0 && ts.measurements == 0);
    fs_store_close(dst);
  }
}

static void test_corrupted_pages(void) {
  char good[512];
  snprintf(good, sizeof good, "%s", tpath("good2.db"));
  build_db(good);
  long long size = file_size(good);
  unsigned long long rng = 11;
  char err[1024];
  for (int trial = 0; trial < 8; trial++) {
    char name[32], label[64];
    snprintf(name, sizeof name, "corrupt%d.db", trial);
    const char *p = tpath(name);
    copy_prefix(good, p, size);
    /* Garbage over a few pages past the header page (the schema page in
    ** trial 0, then anywhere). */
    long long off = trial == 0 ? 4096 + 8
                               : 4096 + (long long)(fs_test_rand(&rng) %
                                                    (unsigned long long)(size - 8192));
    int fd = open(p, O_WRONLY);
    REQUIRE(fd >= 0);
    unsigned char junk[3 * 4096];
    for (size_t i = 0; i < sizeof junk; i++)
      junk[i] = (unsigned char)fs_test_rand(&rng);
    REQUIRE(pwrite(fd, junk, sizeof junk, (off_t)off) == (ssize_t)sizeof junk);
    close(fd);
    snprintf(label, sizeof label, "garbage at %lld of %lld", off, size);

    fs_store *s = NULL;
    int st = fs_store_open(p, 0, &s, err, sizeof err);
    CHECK_MSG(st == FS_DB && !s, "%s: read-write open gave %d", label, st);
    CHECK_MSG(strstr(err, p), "%s: %s", label, err);
    st = fs_store_open(p, FS_STORE_READONLY | FS_STORE_QUICK_CHECK, &s, err,
                       sizeof err);
    CHECK_MSG(st == FS_DB && !s, "%s: checked read-only open gave %d", label,
              st);
    st = fs_store_open(p, FS_STORE_READONLY, &s, err, sizeof err);
    CHECK_MSG(st == FS_OK || st == FS_DB, "%s: read-only open gave %d", label,
              st);
    if (st == FS_OK) {
      /* Damage inside a cubin blob can go unnoticed by lookups (the bytes
      ** are just bytes: the runtime's cuModuleLoadData rejects them), so
      ** only require that no read crashed and the check caught it. */
      read_everything(s, label);
      CHECK_MSG(fs_store_check(s) == FS_DB, "%s: quick_check passed", label);
      fs_store_close(s);
    }
  }
}

/* ---- concurrency ------------------------------------------------------- */

#define N_ROWS 1000

/* One tuner process: opens (creating if needed), begins a run and commits
** N_ROWS measurements one by one, asking has_measurement before each like a
** resuming tuner.  Exit status 0 on success. */
static int writer(const char *path, const char *device) {
  fs_store *s = NULL;
  char err[1024];
  if (fs_store_open(path, FS_STORE_CREATE, &s, err, sizeof err)) {
    fprintf(stderr, "writer %s: %s\n", device, err);
    return 2;
  }
  fs_store_run r = ctx(device, "rev1");
  int64_t run;
  if (fs_store_begin_run(s, &r, &run)) {
    fprintf(stderr, "writer %s: %s\n", device, fs_store_errmsg(s));
    return 3;
  }
  for (int i = 0; i < N_ROWS; i++) {
    char name[64];
    snprintf(name, sizeof name, "fsamp_v%03d", i);
    int outcome = 0;
    if (fs_store_has_measurement(s, run, FS_DTYPE_BF16, 4096, 151936, 1 << (i % 8),
                                 FS_STORE_MODE_TOKEN, name, &outcome) ||
        outcome != -1) {
      fprintf(stderr, "writer %s: has_measurement %d: %s\n", device, outcome,
              fs_store_errmsg(s));
      return 4;
    }
    fs_store_measurement m = meas(1 << (i % 8), name, 10.0 + i % 17);
    if (fs_store_add_measurement(s, run, &m, NULL)) {
      fprintf(stderr, "writer %s: %s\n", device, fs_store_errmsg(s));
      return 5;
    }
  }
  int st = fs_store_finish_run(s, run);
  fs_store_close(s);
  return st ? 6 : 0;
}

static int count_finished(void *arg, const fs_store_run *r) {
  *(int *)arg += r->finished_at != NULL;
  return 0;
}

/* A reader (the runtime, `fs-tune list`) polling while the writers work,
** until both runs are finished (or `seconds` pass). */
static int reader(const char *path, double seconds) {
  double end = now_s() + seconds;
  int opened = 0, finished = 0, rounds = 0;
  while (now_s() < end && finished < 2) {
    fs_store *s = NULL;
    char err[1024];
    int st = fs_store_open(path, FS_STORE_READONLY, &s, err, sizeof err);
    if (st) {
      /* Before the first writer created the schema the file may be missing
      ** or empty; later it must always open. */
      if (opened) {
        fprintf(stderr, "reader: %s\n", err);
        return 2;
      }
      continue;
    }
    opened = 1;
    fs_store_choice c;
    fs_store_key k = {"NVIDIA H200", "sm_90", FS_DTYPE_BF16, 4096, 151936, 4,
                      FS_STORE_MODE_TOKEN};
    st = fs_store_lookup(s, &k, NULL, NULL, &c);
    fs_store_choice_clear(&c);
    finished = 0;
    if (!st) st = fs_store_list_runs(s, count_finished, &finished);
    rounds++;
    if (st) {
      fprintf(stderr, "reader: %s\n", fs_store_errmsg(s));
      fs_store_close(s);
      return 3;
    }
    fs_store_close(s);
  }
  printf("reader: %d rounds\n", rounds);
  return opened && finished == 2 ? 0 : 4;
}

static void test_two_writers(void) {
  /* Both writers start on a file that does not exist yet: they also race to
  ** create the schema. */
  const char *p = tpath("concurrent.db");
  double t0 = now_s();
  pid_t pids[3];
  fflush(stdout);
  for (int i = 0; i < 3; i++) {
    pids[i] = fork();
    REQUIRE(pids[i] >= 0);
    if (pids[i] == 0) {
      int rc = i == 2 ? reader(p, 30.0)
                      : writer(p, i == 0 ? "NVIDIA H200" : "NVIDIA H100");
      fflush(stdout);
      _exit(rc);
    }
  }
  for (int i = 0; i < 3; i++) {
    int status;
    REQUIRE(waitpid(pids[i], &status, 0) == pids[i]);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "%s %d: status 0x%x", i == 2 ? "reader" : "writer", i, status);
  }
  double dt = now_s() - t0;
  CHECK(sql_int(p, "SELECT count(*) FROM runs") == 2);
  CHECK(sql_int(p, "SELECT count(*) FROM runs WHERE finished_at IS NULL") == 0);
  CHECK(sql_int(p, "SELECT count(*) FROM measurements") == 2 * N_ROWS);
  CHECK(sql_int(p, "SELECT min(n) FROM (SELECT count(*) AS n FROM measurements"
                   " GROUP BY run_id)") == N_ROWS);
  CHECK(sql_int(p, "SELECT count(DISTINCT variant) FROM measurements") ==
        N_ROWS);
  fs_store *s = NULL;
  char err[1024];
  REQUIRE(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  CHECK(fs_store_check(s) == FS_OK);
  fs_store_close(s);
  sqlite3 *db;
  REQUIRE(sqlite3_open(p, &db) == SQLITE_OK);
  sqlite3_stmt *st;
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == 0);
  CHECK(sqlite3_step(st) == SQLITE_ROW &&
        strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  /* How much the two transactions streams interleaved (information only:
  ** it depends on the scheduler). */
  long long switches = sql_int(p, "SELECT count(*) FROM measurements a,"
                                  " measurements b WHERE b.id = a.id + 1"
                                  " AND b.run_id <> a.run_id");
  printf("two writers x %d rows + a reader: %.2f s, %lld interleavings\n",
         N_ROWS, dt, switches);
}

/* A writer waits for another process that holds the write lock. */
static void test_waits_for_lock(void) {
  const char *p = tpath("locked.db");
  fs_store *s = NULL;
  char err[1024];
  REQUIRE(fs_store_open(p, FS_STORE_CREATE, &s, err, sizeof err) == FS_OK);
  fs_store_run r = ctx("NVIDIA H200", "rev1");
  int64_t run;
  REQUIRE(fs_store_begin_run(s, &r, &run) == FS_OK);
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    sqlite3 *db;
    if (sqlite3_open(p, &db) != SQLITE_OK) _exit(2);
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
      _exit(3);
    if (write(pipefd[1], "L", 1) != 1) _exit(4);
    struct timespec ts = {1, 200000000}; /* hold the lock 1.2 s */
    nanosleep(&ts, NULL);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    _exit(0);
  }
  char c;
  REQUIRE(read(pipefd[0], &c, 1) == 1);
  double t0 = now_s();
  fs_store_measurement m = meas(1, "fsamp_waited", 12.0);
  CHECK(fs_store_add_measurement(s, run, &m, NULL) == FS_OK);
  double waited = now_s() - t0;
  CHECK_MSG(waited > 0.8 && waited < 9.0, "waited %.2f s", waited);
  int status;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(pipefd[0]);
  close(pipefd[1]);
  fs_store_close(s);
}

/* ---- fault injection: a VFS shim whose writes fail on command ------------ */

typedef struct shim_file {
  sqlite3_file base;
  sqlite3_file *real; /* follows this struct in the same allocation */
} shim_file;

static sqlite3_vfs *g_real_vfs;
static sqlite3_vfs g_shim_vfs;
static sqlite3_io_methods g_shim_io;
static int g_write_countdown = -1; /* fail the n-th write from now; -1 never */
static int g_write_failures;

static int shim_fail_now(void) {
  if (g_write_countdown < 0) return 0;
  if (g_write_countdown-- == 0) {
    g_write_failures++;
    g_write_countdown = 0; /* keep failing, like a full disk */
    return 1;
  }
  return 0;
}

#define REAL(f) (((shim_file *)(f))->real)
static int shim_close(sqlite3_file *f) {
  return REAL(f)->pMethods->xClose(REAL(f));
}
static int shim_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) {
  return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}
static int shim_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
  if (shim_fail_now()) return SQLITE_FULL;
  return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int shim_truncate(sqlite3_file *f, sqlite3_int64 n) {
  return REAL(f)->pMethods->xTruncate(REAL(f), n);
}
static int shim_sync(sqlite3_file *f, int flags) {
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int shim_size(sqlite3_file *f, sqlite3_int64 *n) {
  return REAL(f)->pMethods->xFileSize(REAL(f), n);
}
static int shim_lock(sqlite3_file *f, int l) {
  return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int shim_unlock(sqlite3_file *f, int l) {
  return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int shim_check(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int shim_fcntl(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int shim_sector(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int shim_devchar(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int shim_shmmap(sqlite3_file *f, int pg, int sz, int ext,
                       void volatile **pp) {
  return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, pp);
}
static int shim_shmlock(sqlite3_file *f, int off, int n, int flags) {
  return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void shim_shmbarrier(sqlite3_file *f) {
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int shim_shmunmap(sqlite3_file *f, int del) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int shim_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f,
                     int flags, int *out) {
  (void)vfs;
  shim_file *sf = (shim_file *)f;
  sf->real = (sqlite3_file *)(sf + 1);
  int rc = g_real_vfs->xOpen(g_real_vfs, name, sf->real, flags, out);
  /* pMethods NULL tells SQLite not to call xClose on a failed open. */
  sf->base.pMethods = sf->real->pMethods ? &g_shim_io : NULL;
  return rc;
}

/* Installs the shim as the default VFS (every fs_store_open uses it). */
static void shim_install(void) {
  g_real_vfs = sqlite3_vfs_find(NULL);
  REQUIRE(g_real_vfs);
  g_shim_vfs = *g_real_vfs;
  g_shim_vfs.zName = "fs_fault_shim";
  g_shim_vfs.szOsFile = (int)sizeof(shim_file) + g_real_vfs->szOsFile;
  g_shim_vfs.xOpen = shim_open;
  g_shim_vfs.pAppData = NULL;
  g_shim_io.iVersion = 2; /* no xFetch/xUnfetch: no memory-mapped I/O */
  g_shim_io.xClose = shim_close;
  g_shim_io.xRead = shim_read;
  g_shim_io.xWrite = shim_write;
  g_shim_io.xTruncate = shim_truncate;
  g_shim_io.xSync = shim_sync;
  g_shim_io.xFileSize = shim_size;
  g_shim_io.xLock = shim_lock;
  g_shim_io.xUnlock = shim_unlock;
  g_shim_io.xCheckReservedLock = shim_check;
  g_shim_io.xFileControl = shim_fcntl;
  g_shim_io.xSectorSize = shim_sector;
  g_shim_io.xDeviceCharacteristics = shim_devchar;
  g_shim_io.xShmMap = shim_shmmap;
  g_shim_io.xShmLock = shim_shmlock;
  g_shim_io.xShmBarrier = shim_shmbarrier;
  g_shim_io.xShmUnmap = shim_shmunmap;
  REQUIRE(sqlite3_vfs_register(&g_shim_vfs, 1) == SQLITE_OK);
}

static void shim_remove(void) {
  sqlite3_vfs_unregister(&g_shim_vfs);
  sqlite3_vfs_register(g_real_vfs, 1);
}

/* Every write-path call with the k-th write failing, for k = 0, 1, ...
** until the call succeeds: each failure is FS_DB with a message, and the
** file then passes quick_check and holds the transaction whole or not at
** all. */
static void test_write_faults(void) {
  const char *p = tpath("faults.db");
  const char *src = tpath("faults_src.db");
  build_db(src);
  shim_install();
  fs_store *s = NULL;
  char err[1024];
  REQUIRE(fs_store_open(p, FS_STORE_CREATE, &s, err, sizeof err) == FS_OK);
  fs_store_run r = ctx("NVIDIA H200", "rev1");
  int64_t run;
  REQUIRE(fs_store_begin_run(s, &r, &run) == FS_OK);
  long long rows_before = sql_int(src, "SELECT count(*) FROM measurements");
  int injected = 0;
  for (int op = 0; op < 3; op++) {
    int done = 0;
    /* Every write position for the small transactions; for the merge
    ** (hundreds of page writes) every position up to 64, then a sample. */
    for (int k = 0; k < 5000 && !done; k += (op == 2 && k >= 64) ? 11 : 1) {
      long long before = sql_int(p, "SELECT count(*) FROM measurements");
      g_write_countdown = k;
      g_write_failures = 0;
      int st;
      fs_store_transfer_stats ts;
      if (op == 0) {
        char name[32];
        snprintf(name, sizeof name, "fsamp_f%d", k);
        fs_store_measurement m = meas(1, name, 10.0 + k);
        st = fs_store_add_measurement(s, run, &m, NULL);
      } else if (op == 1) {
        unsigned char blob[50000];
        memset(blob, k, sizeof blob);
        st = fs_store_put_cubin(s, "fsamp_f0", "sm_90", "13.0", "h", blob,
                                sizeof blob);
      } else {
        st = fs_store_merge_file(s, src, &ts);
      }
      g_write_countdown = -1;
      long long after = sql_int(p, "SELECT count(*) FROM measurements");
      if (st == FS_OK) {
        done = 1;
        CHECK(g_write_failures == 0);
        long long want = op == 0 ? before + 1 : op == 2 ? before + rows_before
                                                        : before;
        CHECK_MSG(after == want, "op %d k %d: %lld rows, want %lld", op, k,
                  after, want);
      } else {
        injected++;
        CHECK_MSG(st == FS_DB, "op %d k %d: status %d", op, k, st);
        CHECK_MSG(strstr(fs_store_errmsg(s), "database or disk is full") ||
                      strstr(fs_store_errmsg(s), "disk I/O error"),
                  "op %d k %d: %s", op, k, fs_store_errmsg(s));
        CHECK_MSG(after == before, "op %d k %d: %lld rows after a failed "
                  "transaction, %lld before", op, k, after, before);
      }
      /* The same handle keeps working and the file stays intact. */
      CHECK_MSG(fs_store_check(s) == FS_OK, "op %d k %d: %s", op, k,
                fs_store_errmsg(s));
    }
    CHECK_MSG(done, "op %d never succeeded", op);
  }
  CHECK_MSG(injected >= 3, "only %d faults injected", injected);
  fs_store_close(s);
  shim_remove();
  REQUIRE(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  fs_store_close(s);
  printf("write faults injected: %d\n", injected);
}

/* The in-place migration of a version-2 file with the k-th write failing,
** for k = 0, 1, ... until the open succeeds: a failed open is FS_DB with a
** message and leaves a version-2 file with every row (the migration is one
** transaction), and a later open migrates it. */
static void test_migrate_faults(void) {
  char v2[512], p[512], leftover[3][530];
  snprintf(v2, sizeof v2, "%s", tpath("mig_v2.db"));
  snprintf(p, sizeof p, "%s", tpath("mig.db"));
  for (int i = 0; i < 3; i++)
    snprintf(leftover[i], sizeof leftover[i], "%s%s", p,
             i == 0 ? "-wal" : i == 1 ? "-shm" : "-journal");
  sql_exec(v2, STORE_V2_DDL
           "INSERT INTO runs VALUES (1, '0123456789abcdef0123456789abcdef',"
           " '2026-01-01T00:00:00.000Z', NULL, 'NVIDIA H200', 'sm_90', 132,"
           " 13000, '13.0', 'rev1', NULL, NULL);"
           "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i"
           " WHERE n < 599)"
           " INSERT INTO measurements(run_id, dtype, hidden, vocab, bucket,"
           " variant, params, outcome, median_us, message, measured_at)"
           " SELECT 1, 'bf16', 4096, 151936, 1 << (n % 8), 'fsamp_v' || n,"
           " 'tile_v=128,tile_b=16,k=64,warps=4x1,stages=4', 'ok',"
           " 10.0 + n % 13, 'verified against the reference: 0 mismatches',"
           " '2026-01-01T00:00:00.000Z' FROM i;");
  long long rows = sql_int(v2, "SELECT count(*) FROM measurements");
  REQUIRE(rows == 600);
  static const char k_schema[] =
      "SELECT group_concat(name) FROM (SELECT name FROM sqlite_schema"
      " ORDER BY name)";
  char v2_schema[1024];
  snprintf(v2_schema, sizeof v2_schema, "%s", sql_text(v2, k_schema));
  shim_install();
  int injected = 0, done = 0;
  for (int k = 0; k < 5000 && !done; k++) {
    for (int i = 0; i < 3; i++) unlink(leftover[i]);
    copy_prefix(v2, p, file_size(v2));
    fs_store *s = NULL;
    char err[1024] = "";
    g_write_countdown = k;
    g_write_failures = 0;
    int st = fs_store_open(p, 0, &s, err, sizeof err);
    g_write_countdown = -1;
    fs_store_close(s);
    /* A read-write connection first, to roll back a hot journal that a
    ** failed switch to WAL may leave. */
    sql_exec(p, "SELECT count(*) FROM runs");
    long long version = sql_int(p, "PRAGMA user_version");
    long long after = sql_int(p, "SELECT count(*) FROM measurements");
    CHECK_MSG(strcmp(sql_text(p, "PRAGMA quick_check"), "ok") == 0, "k %d",
              k);
    if (st == FS_OK) {
      done = 1;
      CHECK(g_write_failures == 0);
      CHECK_MSG(version == 3 && after == rows, "k %d: version %lld, %lld rows",
                k, version, after);
      CHECK(sql_int(p, "SELECT count(*) FROM measurements WHERE mode ="
                       " 'token'") == rows);
    } else {
      injected++;
      CHECK_MSG(st == FS_DB && strstr(err, p) &&
                    (strstr(err, "database or disk is full") ||
                     strstr(err, "disk I/O error")),
                "k %d: status %d: %s", k, st, err);
      CHECK_MSG(version == 2 && after == rows,
                "k %d: version %lld, %lld rows after a failed migration", k,
                version, after);
      CHECK_MSG(strcmp(sql_text(p, k_schema), v2_schema) == 0, "k %d: %s", k,
                sql_text(p, k_schema));
      /* Nothing half-done gets in the way of the next open. */
      st = fs_store_open(p, 0, &s, err, sizeof err);
      CHECK_MSG(st == FS_OK && fs_store_file_version(s) == 2, "k %d: %s", k,
                err);
      fs_store_close(s);
      CHECK(sql_int(p, "PRAGMA user_version") == 3);
      CHECK(sql_int(p, "SELECT count(*) FROM measurements WHERE mode ="
                       " 'token'") == rows);
    }
  }
  CHECK_MSG(done, "the migration never succeeded");
  CHECK_MSG(injected >= 3, "only %d faults injected", injected);
  shim_remove();
  printf("migration write faults injected: %d\n", injected);
}

/* ---- fault injection: allocation failures --------------------------------- */

static sqlite3_mem_methods g_real_mem;
static int g_malloc_countdown = -1;

static int fail_alloc(void) {
  if (g_malloc_countdown < 0) return 0;
  if (g_malloc_countdown == 0) return 1; /* keep failing once started */
  g_malloc_countdown--;
  return 0;
}
static void *mem_malloc(int n) {
  return fail_alloc() ? NULL : g_real_mem.xMalloc(n);
}
static void mem_free(void *p) { g_real_mem.xFree(p); }
static void *mem_realloc(void *p, int n) {
  return fail_alloc() ? NULL : g_real_mem.xRealloc(p, n);
}
static int mem_size(void *p) { return g_real_mem.xSize(p); }
static int mem_roundup(int n) { return g_real_mem.xRoundup(n); }
static int mem_init(void *a) { return g_real_mem.xInit(a); }
static void mem_shutdown(void *a) { g_real_mem.xShutdown(a); }

/* Runs in a child (SQLite's allocator is configured before first use):
** open, look up, add, for every k-th allocation failing, until all pass. */
static int malloc_child(const char *path) {
  /* The parent initialised SQLite before fork() (and holds no connection):
  ** shut it down here so its allocator can be replaced. */
  if (sqlite3_shutdown() != SQLITE_OK) return 1;
  if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &g_real_mem) != SQLITE_OK) return 2;
  static sqlite3_mem_methods m;
  m = g_real_mem;
  m.xMalloc = mem_malloc;
  m.xFree = mem_free;
  m.xRealloc = mem_realloc;
  m.xSize = mem_size;
  m.xRoundup = mem_roundup;
  m.xInit = mem_init;
  m.xShutdown = mem_shutdown;
  if (sqlite3_config(SQLITE_CONFIG_MALLOC, &m) != SQLITE_OK) return 3;
  /* Lookaside would hide allocations from the countdown. */
  sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0);
  int failures = 0, bad = 0;
  for (int k = 0; k < 20000; k++) {
    char err[1024] = "";
    fs_store *s = NULL;
    g_malloc_countdown = k;
    int st = fs_store_open(path, 0, &s, err, sizeof err);
    fs_store_choice c;
    memset(&c, 0, sizeof c);
    if (!st) {
      fs_store_key key = {"NVIDIA H200", "sm_90", FS_DTYPE_BF16, 4096, 151936,
                          3, FS_STORE_MODE_TOKEN};
      st = fs_store_lookup(s, &key, NULL, NULL, &c);
    }
    if (!st) {
      char name[32];
      snprintf(name, sizeof name, "fsamp_m%d", k);
      fs_store_measurement mm = meas(2, name, 11.0);
      st = fs_store_add_measurement(s, 1, &mm, NULL);
    }
    const char *msg = s ? fs_store_errmsg(s) : err;
    g_malloc_countdown = -1;
    if (st == FS_OK) {
      if (c.match == FS_STORE_MATCH_NONE) bad++;
      fs_store_choice_clear(&c);
      fs_store_close(s);
      printf("allocation failures survived: %d (all calls pass from "
             "allocation %d on)\n", failures, k);
      return bad ? 5 : 0;
    }
    fs_store_choice_clear(&c);
    failures++;
    if ((st != FS_OUT_OF_MEMORY && st != FS_DB) || !msg[0]) {
      fprintf(stderr, "k=%d: status %d, message '%s'\n", k, st, msg);
      bad++;
    }
    fs_store_close(s);
  }
  return 4;
}

static void test_malloc_faults(void) {
  const char *p = tpath("nomem.db");
  build_db(p);
  fflush(stdout);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = malloc_child(p);
    fflush(stdout);
    _exit(rc);
  }
  int status;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child 0x%x",
            status);
  /* Whatever failed, the file is intact. */
  fs_store *s = NULL;
  char err[1024];
  CHECK(fs_store_open(p, 0, &s, err, sizeof err) == FS_OK);
  fs_store_close(s);
}

int main(void) {
  make_tmpdir();
  double t0 = now_s(), t = t0;
#define TIMED(fn)                                                           \
  do {                                                                      \
    fn();                                                                   \
    printf("%-24s %.2f s\n", #fn, now_s() - t);                             \
    t = now_s();                                                            \
  } while (0)
  TIMED(test_missing_and_odd);
  TIMED(test_random_bytes);
  TIMED(test_truncated);
  TIMED(test_corrupted_pages);
  TIMED(test_two_writers);
  TIMED(test_waits_for_lock);
  TIMED(test_malloc_faults);
  TIMED(test_write_faults);
  TIMED(test_migrate_faults);
  printf("total %.2f s\n", now_s() - t0);
  remove_tmpdir();
  return fs_test_done("test_store_robust");
}
