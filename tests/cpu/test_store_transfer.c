/*
** test_store_transfer.c: export, import and merge.  A tuned database is
** exported to a compact defaults file (winners, their runs and cubins only,
** rollback-journal mode), imported into a fresh database (same winners, same
** cubin bytes), and merges are idempotent and keep what the destination has.
** With modes: every mode's winners are exported and stay the same, rows are
** matched with their mode, and a version-2 file (before modes) merges.
*/
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "fs_test.h"
#include "store.h"

#include <dirent.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_util.h"

static void make_tmpdir(void) { make_tmpdir_named("fs_test_store_transfer"); }

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

static fs_store *open_flags(const char *path, int flags) {
  fs_store *s = NULL;
  char err[1024];
  int st = fs_store_open(path, flags, &s, err, sizeof err);
  if (st) fprintf(stderr, "open %s: %s\n", path, err);
  REQUIRE(st == FS_OK && s);
  return s;
}

/* Deterministic fake cubin bytes for a variant. */
static void fake_cubin(const char *variant, unsigned char *buf, size_t n) {
  unsigned long long h = 1469598103934665603ull;
  for (const char *p = variant; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)fs_test_rand(&h);
}

/* A run on the H200 under generator revision rev, its optional facts unknown. */
static fs_store_run h200_run(const char *rev) {
  fs_store_run r;
  memset(&r, 0, sizeof r);
  r.device_name = "NVIDIA H200";
  r.arch = "sm_90";
  r.nvrtc_version = "13.0";
  r.generator_rev = rev;
  r.sm_count = r.driver_version = -1;
  return r;
}

/* A tuned database: two devices, three shapes x buckets, ~12 variants per
** key with some failures, cubins for every ok variant except one key's
** winner. */
static void build_source(const char *path, int *pKeys) {
  fs_store *s = open_flags(path, FS_STORE_CREATE);
  const char *devs[2] = {"NVIDIA H200", "NVIDIA H100"};
  unsigned long long rng = 99;
  int keys = 0;
  for (int d = 0; d < 2; d++) {
    fs_store_run r;
    memset(&r, 0, sizeof r);
    r.device_name = devs[d];
    r.arch = "sm_90";
    r.sm_count = 132;
    r.driver_version = 13000;
    r.nvrtc_version = "13.0";
    r.generator_rev = "rev3";
    r.host = "tuner";
    int64_t run;
    REQUIRE(fs_store_begin_run(s, &r, &run) == FS_OK);
    static const int Ds[3] = {1024, 4096, 8192}, Vs[3] = {151936, 151936,
                                                           128256};
    for (int shape = 0; shape < 3; shape++)
      for (int B = 1; B <= 64; B *= 4) {
        keys++;
        for (int v = 0; v < 12; v++) {
          char name[64], params[64], hash[32];
          snprintf(name, sizeof name, "fsamp_bf16_sm90_v%d_t%d", 64 << (v % 3),
                   v);
          snprintf(params, sizeof params, "tile_v=%d,tile_b=%d", 64 << (v % 3),
                   v);
          snprintf(hash, sizeof hash, "h%02d", v);
          fs_store_measurement m;
          memset(&m, 0, sizeof m);
          m.dtype = FS_DTYPE_BF16;
          m.hidden = Ds[shape];
          m.vocab = Vs[shape];
          m.bucket = B;
          m.variant = name;
          m.params = params;
          m.source_hash = hash;
          m.outcome = v == 5 ? FS_STORE_OUTCOME_WRONG
                      : v == 7 ? FS_STORE_OUTCOME_COMPILE_FAILED
                               : FS_STORE_OUTCOME_OK;
          m.median_us = 10.0 + 5.0 * (double)(fs_test_rand(&rng) % 1000) / 1000;
          m.spread_us = 0.01;
          m.samples = 30;
          m.floor_us = 9.0;
          m.registers = 100 + v;
          m.spills = 0;
          m.smem_bytes = 1024 * v;
          REQUIRE(fs_store_add_measurement(s, run, &m, NULL) == FS_OK);
        }
      }
    /* Cubins: one per ok variant (compiled once per device arch). */
    if (d == 0)
      for (int v = 0; v < 12; v++) {
        if (v == 7) continue;
        char name[64], hash[32];
        snprintf(name, sizeof name, "fsamp_bf16_sm90_v%d_t%d", 64 << (v % 3),
                 v);
        snprintf(hash, sizeof hash, "h%02d", v);
        unsigned char cubin[4096 + 64];
        size_t n = 4096 + (size_t)v;
        fake_cubin(name, cubin, n);
        /* leave one variant without a cubin */
        if (v == 11) continue;
        REQUIRE(fs_store_put_cubin(s, name, "sm_90", "13.0", hash, cubin, n) ==
                FS_OK);
      }
    REQUIRE(fs_store_finish_run(s, run) == FS_OK);
  }
  fs_store_close(s);
  *pKeys = keys;
}

/* The winners of a store as "key -> variant median" lines plus a checksum of
** the cubins, for comparing stores. */
typedef struct summary {
  char text[64][1024];
  int n, with_cubin;
} summary;

static int add_line(void *arg, const fs_store_choice *c) {
  summary *s = arg;
  if (s->n < 64)
    snprintf(s->text[s->n++], sizeof s->text[0],
             "%s %s %d %d %d %d %d -> %s %.6f %zu", c->device_name, c->arch,
             c->dtype, c->hidden, c->vocab, c->bucket, c->mode, c->variant,
             c->median_us, c->cubin_size);
  s->with_cubin += c->has_cubin;
  return 0;
}

static void summarize(fs_store *s, summary *out) {
  memset(out, 0, sizeof *out);
  REQUIRE(fs_store_list_winners(s, NULL, add_line, out) == FS_OK);
}

static int same(const summary *a, const summary *b) {
  if (a->n != b->n || a->with_cubin != b->with_cubin) return 0;
  for (int i = 0; i < a->n; i++)
    if (strcmp(a->text[i], b->text[i]) != 0) {
      fprintf(stderr, "differ: '%s' vs '%s'\n", a->text[i], b->text[i]);
      return 0;
    }
  return 1;
}

/* Every winner's cubin in `b` equals the one in `a`, byte for byte. */
static int cubins_match(fs_store *a, fs_store *b, const summary *sum) {
  (void)sum;
  const char *devs[2] = {"NVIDIA H200", "NVIDIA H100"};
  int compared = 0;
  for (int d = 0; d < 2; d++)
    for (int D = 1024; D <= 8192; D *= 2)
      for (int B = 1; B <= 64; B *= 4) {
        fs_store_key k = {devs[d], "sm_90", FS_DTYPE_BF16, D,
                          D == 8192 ? 128256 : 151936, B, FS_STORE_MODE_TOKEN};
        fs_store_choice ca, cb;
        REQUIRE(fs_store_winner(a, &k, &ca) == FS_OK);
        REQUIRE(fs_store_winner(b, &k, &cb) == FS_OK);
        int ok = ca.match == cb.match && ca.cubin_size == cb.cubin_size &&
                 !strcmp(ca.variant, cb.variant) &&
                 (!ca.cubin || memcmp(ca.cubin, cb.cubin, ca.cubin_size) == 0);
        if (ca.cubin) {
          unsigned char expect[4096 + 64];
          fake_cubin(ca.variant, expect, ca.cubin_size);
          ok = ok && memcmp(expect, ca.cubin, ca.cubin_size) == 0;
          compared++;
        }
        fs_store_choice_clear(&ca);
        fs_store_choice_clear(&cb);
        if (!ok) return 0;
      }
  return compared > 0;
}

static void test_export_import(void) {
  const char *src_path = tpath("tuned.db");
  int keys = 0;
  build_source(src_path, &keys);
  fs_store *src = open_flags(src_path, FS_STORE_READONLY);
  summary want;
  summarize(src, &want);
  CHECK_MSG(want.n == keys && keys == 24, "%d winners for %d keys", want.n,
            keys);

  /* Export. */
  const char *def = tpath("defaults.db");
  fs_store_transfer_stats st;
  CHECK(fs_store_export(src, def, NULL, &st) == FS_OK);
  CHECK(st.winners == keys && st.measurements == keys && st.runs == 2);
  { /* written under a temporary name and renamed: none of it is left */
    char tmp[4200];
    struct stat sb;
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", def, (long)getpid());
    CHECK_MSG(stat(tmp, &sb) != 0, "%s is left after the export", tmp);
  }
  /* Winners without a cubin are counted; shared cubins are written once. */
  CHECK_MSG(st.missing_cubins == want.n - want.with_cubin &&
                st.missing_cubins > 0 && st.missing_cubins < keys,
            "missing %lld", (long long)st.missing_cubins);
  CHECK_MSG(st.cubins > 0 && st.cubins <= 10, "cubins %lld",
            (long long)st.cubins);
  CHECK(sql_int(def, "SELECT count(*) FROM cubins") == st.cubins);
  /* Compact, one file, rollback journal. */
  CHECK(!exists(tpath("defaults.db-wal")) && !exists(tpath("defaults.db-shm")));
  CHECK(strcmp(sql_text(def, "PRAGMA journal_mode"), "delete") == 0);
  CHECK(sql_int(def, "SELECT count(*) FROM measurements") == keys);
  CHECK(sql_int(def, "SELECT count(*) FROM measurements WHERE outcome <> 'ok'")
        == 0);
  CHECK(sql_int(def, "SELECT count(*) FROM runs WHERE finished_at IS NULL")
        == 0);
  CHECK(sql_int(def, "PRAGMA user_version") == FS_STORE_SCHEMA_VERSION);
  /* Same run identity as the source. */
  CHECK(sql_int(def, "SELECT count(*) FROM runs") == 2);
  CHECK(strcmp(sql_text(def, "SELECT group_concat(uuid) FROM (SELECT uuid"
                             " FROM runs ORDER BY uuid)"),
               sql_text(src_path, "SELECT group_concat(uuid) FROM (SELECT uuid"
                                  " FROM runs ORDER BY uuid)")) == 0);

  /* The defaults file's winners are the source's, read-only, even from a
  ** directory-less view of the file (no -wal/-shm needed). */
  fs_store *d = open_flags(def, FS_STORE_READONLY | FS_STORE_QUICK_CHECK);
  summary got;
  summarize(d, &got);
  CHECK(same(&want, &got));
  CHECK(cubins_match(src, d, &want));
  fs_store_close(d);

  /* Import into a fresh database: same winners, same bytes. */
  const char *fresh = tpath("fresh.db");
  fs_store *f = open_flags(fresh, FS_STORE_CREATE);
  CHECK(fs_store_merge_file(f, def, &st) == FS_OK);
  CHECK(st.runs == 2 && st.measurements == keys && st.cubins > 0);
  summarize(f, &got);
  CHECK(same(&want, &got));
  CHECK(cubins_match(src, f, &want));
  /* Importing again adds nothing. */
  CHECK(fs_store_merge_file(f, def, &st) == FS_OK);
  CHECK(st.runs == 0 && st.measurements == 0 && st.cubins == 0);
  /* Merging the full source afterwards completes the runs: nothing is
  ** duplicated, the failures arrive, the winners stay. */
  CHECK(fs_store_merge(f, src, &st) == FS_OK);
  CHECK_MSG(st.runs == 0 && st.measurements == 12 * keys - keys,
            "runs %lld measurements %lld", (long long)st.runs,
            (long long)st.measurements);
  summarize(f, &got);
  CHECK(same(&want, &got));
  CHECK(fs_store_merge(f, src, &st) == FS_OK);
  CHECK(st.runs == 0 && st.measurements == 0 && st.cubins == 0);
  CHECK(sql_int(fresh, "SELECT count(*) FROM measurements") == 12 * keys);
  CHECK(sql_int(fresh, "SELECT count(*) FROM cubins") ==
        sql_int(src_path, "SELECT count(*) FROM cubins"));
  fs_store_close(f);

  /* Export refuses to overwrite, and leaves the file alone. */
  long long before = sql_int(def, "SELECT count(*) FROM measurements");
  CHECK(fs_store_export(src, def, NULL, &st) == FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(src), "already exists"), "%s",
            fs_store_errmsg(src));
  CHECK(sql_int(def, "SELECT count(*) FROM measurements") == before);
  /* Into a missing directory: a clear error and no file. */
  CHECK(fs_store_export(src, tpath("nodir/x.db"), NULL, &st) == FS_DB);
  CHECK_MSG(strstr(fs_store_errmsg(src), "nodir/x.db"), "%s",
            fs_store_errmsg(src));
  /* A filtered export: one device. */
  fs_store_filter filt;
  memset(&filt, 0, sizeof filt);
  filt.device_name = "NVIDIA H100";
  CHECK(fs_store_export(src, tpath("h100.db"), &filt, &st) == FS_OK);
  CHECK(st.winners == keys / 2 && st.runs == 1);
  CHECK(sql_int(tpath("h100.db"), "SELECT count(*) FROM runs WHERE"
                                  " device_name <> 'NVIDIA H100'") == 0);
  /* An empty filter result is a valid, empty defaults file. */
  filt.device_name = "NVIDIA B200";
  CHECK(fs_store_export(src, tpath("empty.db"), &filt, &st) == FS_OK);
  CHECK(st.winners == 0);
  fs_store_close(src);

  /* Merge errors. */
  f = open_flags(fresh, 0);
  CHECK(fs_store_merge(f, f, &st) == FS_INVALID_ARGUMENT);
  CHECK(fs_store_merge(f, NULL, &st) == FS_INVALID_ARGUMENT);
  CHECK(fs_store_merge_file(f, tpath("missing.db"), &st) == FS_DB);
  CHECK_MSG(strstr(fs_store_errmsg(f), "merging from") &&
                strstr(fs_store_errmsg(f), "missing.db") &&
                strstr(fs_store_errmsg(f), "No such file"),
            "%s", fs_store_errmsg(f));
  /* Merging a database into itself (another handle on the same file) adds
  ** nothing. */
  CHECK(fs_store_merge_file(f, fresh, &st) == FS_OK);
  CHECK(st.runs == 0 && st.measurements == 0 && st.cubins == 0);
  fs_store_close(f);
}

/* Two independently tuned databases merged both ways give the same rows and
** winners: the union. */
static void test_merge_union(void) {
  const char *a_path = tpath("a.db"), *b_path = tpath("b.db");
  fs_store *a = open_flags(a_path, FS_STORE_CREATE);
  fs_store *b = open_flags(b_path, FS_STORE_CREATE);
  const fs_store_run r = h200_run("rev3");
  int64_t ra, rb;
  REQUIRE(fs_store_begin_run(a, &r, &ra) == FS_OK);
  REQUIRE(fs_store_begin_run(b, &r, &rb) == FS_OK);
  fs_store_measurement m = qwen_meas(1);
  m.variant = "va";
  m.median_us = 10.0;
  REQUIRE(fs_store_add_measurement(a, ra, &m, NULL) == FS_OK);
  m.variant = "vb";
  m.median_us = 12.0;
  REQUIRE(fs_store_add_measurement(a, ra, &m, NULL) == FS_OK);
  /* b measured vb faster (the same revision, so both runs count) and found
  ** va wrong: after the merge va is out and vb wins. */
  m.variant = "vb";
  m.median_us = 9.0;
  REQUIRE(fs_store_add_measurement(b, rb, &m, NULL) == FS_OK);
  m.variant = "va";
  m.outcome = FS_STORE_OUTCOME_WRONG;
  REQUIRE(fs_store_add_measurement(b, rb, &m, NULL) == FS_OK);
  fs_store_key k = {"NVIDIA H200", "sm_90", FS_DTYPE_BF16, 4096, 151936, 1,
                    FS_STORE_MODE_TOKEN};
  fs_store_choice c;
  REQUIRE(fs_store_winner(a, &k, &c) == FS_OK);
  CHECK(strcmp(c.variant, "va") == 0);
  fs_store_transfer_stats st;
  CHECK(fs_store_merge(a, b, &st) == FS_OK);
  CHECK(st.runs == 1 && st.measurements == 2);
  CHECK(fs_store_merge(b, a, &st) == FS_OK);
  CHECK(st.runs == 1 && st.measurements == 2);
  REQUIRE(fs_store_winner(a, &k, &c) == FS_OK);
  CHECK_MSG(strcmp(c.variant, "vb") == 0, "%s", c.variant);
  REQUIRE(fs_store_winner(b, &k, &c) == FS_OK);
  CHECK_MSG(strcmp(c.variant, "vb") == 0, "%s", c.variant);
  for (int i = 0; i < 2; i++) {
    CHECK(fs_store_merge(a, b, &st) == FS_OK);
    CHECK(st.runs == 0 && st.measurements == 0);
  }
  CHECK(sql_int(a_path, "SELECT count(*) FROM measurements") == 4);
  CHECK(sql_int(b_path, "SELECT count(*) FROM measurements") == 4);
  /* A run unfinished in one file and finished in the other ends finished. */
  REQUIRE(fs_store_finish_run(b, rb) == FS_OK);
  CHECK(fs_store_merge(a, b, &st) == FS_OK);
  CHECK(sql_int(a_path, "SELECT count(*) FROM runs WHERE finished_at IS NULL")
        == 1);
  fs_store_close(a);
  fs_store_close(b);
}

/* ---- modes ------------------------------------------------------------------ */

/* A database tuned in three modes: for each of three buckets, variants
** fsamp_0..5 timed sampled (token), on greedy calls and (B=4 only) with
** group16 noise, with different orders per mode, a failure on greedy calls
** that disqualifies the fastest sampled variant, and a cubin per variant. */
static void build_modes(const char *path) {
  fs_store *s = open_flags(path, FS_STORE_CREATE);
  const fs_store_run r = h200_run("rev5");
  int64_t run;
  REQUIRE(fs_store_begin_run(s, &r, &run) == FS_OK);
  for (int B = 1; B <= 16; B *= 4)
    for (int mode = 0; mode < FS_STORE_MODES; mode++) {
      if (mode == FS_STORE_MODE_GROUP16 && B != 4) continue;
      for (int v = 0; v < 6; v++) {
        char name[32], hash[32];
        snprintf(name, sizeof name, "fsamp_%d", v);
        snprintf(hash, sizeof hash, "h%d", v);
        fs_store_measurement m = qwen_meas(B);
        m.mode = mode;
        m.variant = name;
        m.source_hash = hash;
        /* token: fsamp_0 fastest; greedy: fsamp_5 fastest; group16: 3 */
        m.median_us = mode == FS_STORE_MODE_TOKEN    ? 10.0 + v
                      : mode == FS_STORE_MODE_GREEDY ? 20.0 - v
                                                     : 10.0 + (v + 3) % 6;
        /* fsamp_1 (second in token at B=16) ran wrong on greedy calls */
        if (B == 16 && v == 1 && mode == FS_STORE_MODE_GREEDY)
          m.outcome = FS_STORE_OUTCOME_WRONG;
        /* ...and at B=16 fsamp_0 too: token's winner becomes fsamp_2 */
        if (B == 16 && v == 0 && mode == FS_STORE_MODE_GREEDY)
          m.outcome = FS_STORE_OUTCOME_RUN_FAILED;
        m.spread_us = 0.01;
        REQUIRE(fs_store_add_measurement(s, run, &m, NULL) == FS_OK);
      }
    }
  for (int v = 0; v < 6; v++) {
    char name[32], hash[32];
    snprintf(name, sizeof name, "fsamp_%d", v);
    snprintf(hash, sizeof hash, "h%d", v);
    unsigned char cubin[512];
    fake_cubin(name, cubin, sizeof cubin);
    REQUIRE(fs_store_put_cubin(s, name, "sm_90", "13.0", hash, cubin,
                               sizeof cubin) == FS_OK);
  }
  REQUIRE(fs_store_finish_run(s, run) == FS_OK);
  fs_store_close(s);
}

static void test_export_modes(void) {
  const char *src_path = tpath("modes.db");
  build_modes(src_path);
  fs_store *src = open_flags(src_path, FS_STORE_READONLY);
  summary want;
  summarize(src, &want);
  /* (B, mode) in list order: token, group16, greedy within a bucket. */
  static const char *const k_want[] = {
      " 151936 1 0 -> fsamp_0 ",  " 151936 1 2 -> fsamp_5 ",
      " 151936 4 0 -> fsamp_0 ",  " 151936 4 1 -> fsamp_3 ",
      " 151936 4 2 -> fsamp_5 ",  " 151936 16 0 -> fsamp_2 ",
      " 151936 16 2 -> fsamp_5 "};
  int n_want = (int)(sizeof k_want / sizeof *k_want);
  CHECK_MSG(want.n == n_want, "%d winners", want.n);
  for (int i = 0; i < want.n && i < n_want; i++)
    CHECK_MSG(strstr(want.text[i], k_want[i]), "%s / %s", want.text[i],
              k_want[i]);

  /* Every mode's winners are exported, each its own row. */
  const char *def = tpath("modes_defaults.db");
  fs_store_transfer_stats st;
  CHECK(fs_store_export(src, def, NULL, &st) == FS_OK);
  CHECK_MSG(st.winners == n_want && st.measurements == n_want && st.runs == 1 &&
                st.missing_cubins == 0 && st.cubins == 4,
            "winners %lld measurements %lld cubins %lld", (long long)st.winners,
            (long long)st.measurements, (long long)st.cubins);
  CHECK(sql_int(def, "PRAGMA user_version") == 3);
  CHECK(sql_int(def, "SELECT count(*) FROM measurements WHERE mode = 'greedy'")
        == 3);
  CHECK(sql_int(def, "SELECT count(*) FROM measurements WHERE mode ="
                     " 'group16'") == 1);
  fs_store *d = open_flags(def, FS_STORE_READONLY);
  summary got;
  summarize(d, &got);
  CHECK(same(&want, &got));
  fs_store_close(d);

  /* A mode filter exports that mode's winners; a bad one creates no file. */
  fs_store_filter filt;
  memset(&filt, 0, sizeof filt);
  filt.mode = "greedy";
  CHECK(fs_store_export(src, tpath("greedy.db"), &filt, &st) == FS_OK);
  CHECK(st.winners == 3);
  CHECK(sql_int(tpath("greedy.db"), "SELECT count(*) FROM measurements WHERE"
                                    " mode <> 'greedy'") == 0);
  filt.mode = "argmax";
  CHECK(fs_store_export(src, tpath("bad.db"), &filt, &st) ==
        FS_INVALID_ARGUMENT);
  CHECK_MSG(strstr(fs_store_errmsg(src), "'argmax'"), "%s",
            fs_store_errmsg(src));
  CHECK(!exists(tpath("bad.db")));

  /* Importing the defaults, then the full source, twice each: rows are
  ** matched with their mode, so the same (run, shape, variant) in two modes
  ** is two rows, added once. */
  const char *fresh = tpath("modes_fresh.db");
  fs_store *f = open_flags(fresh, FS_STORE_CREATE);
  CHECK(fs_store_merge_file(f, def, &st) == FS_OK);
  CHECK(st.runs == 1 && st.measurements == n_want);
  summarize(f, &got);
  CHECK(same(&want, &got));
  CHECK(fs_store_merge_file(f, def, &st) == FS_OK);
  CHECK(st.runs == 0 && st.measurements == 0 && st.cubins == 0);
  long long total = sql_int(src_path, "SELECT count(*) FROM measurements");
  CHECK(fs_store_merge(f, src, &st) == FS_OK);
  CHECK_MSG(st.measurements == total - n_want, "%lld of %lld",
            (long long)st.measurements, total);
  CHECK(fs_store_merge(f, src, &st) == FS_OK);
  CHECK(st.runs == 0 && st.measurements == 0 && st.cubins == 0);
  CHECK(sql_int(fresh, "SELECT count(*) FROM measurements") == total);
  CHECK(sql_int(fresh, "SELECT count(*) FROM (SELECT mode, count(*) FROM"
                       " measurements GROUP BY mode)") == 3);
  summarize(f, &got);
  CHECK(same(&want, &got));
  fs_store_close(f);
  fs_store_close(src);
}

/* A version-2 file (before modes) merges as mode-token rows, from a
** read-only in-memory migration, idempotently, and is left as it was. */
static void test_merge_v2(void) {
  const char *v2 = tpath("old_v2.db");
  sql_exec(v2, STORE_V2_DDL
               "INSERT INTO runs VALUES (7, 'aaaabbbbccccddddaaaabbbbccccdddd',"
               " '2026-01-01T00:00:00.000Z', '2026-01-01T01:00:00.000Z',"
               " 'NVIDIA H200', 'sm_90', 132, 13000, '13.0', 'rev5', NULL,"
               " NULL);"
               "INSERT INTO measurements(id, run_id, dtype, hidden, vocab,"
               " bucket, variant, outcome, median_us, source_hash, measured_at)"
               " VALUES"
               " (1, 7, 'bf16', 4096, 151936, 1, 'fsamp_0', 'ok', 30.0, 'h0',"
               "  '2026-01-01T00:01:00.000Z'),"
               " (2, 7, 'bf16', 4096, 151936, 1, 'fsamp_9', 'ok', 25.0, 'h9',"
               "  '2026-01-01T00:02:00.000Z'),"
               " (3, 7, 'bf16', 4096, 151936, 1, 'fsamp_8', 'wrong', 1.0, NULL,"
               "  '2026-01-01T00:03:00.000Z');"
               "INSERT INTO cubins VALUES (1, 'fsamp_9', 'sm_90', '13.0', 'h9',"
               " x'0909', '2026-01-01T00:02:00.000Z');");
  const char *dst_path = tpath("v2_into.db");
  fs_store *dst = open_flags(dst_path, FS_STORE_CREATE);
  fs_store_transfer_stats st;
  int rc = fs_store_merge_file(dst, v2, &st);
  CHECK_MSG(rc == FS_OK, "%s", fs_store_errmsg(dst));
  CHECK(st.runs == 1 && st.measurements == 3 && st.cubins == 1);
  CHECK(fs_store_merge_file(dst, v2, &st) == FS_OK);
  CHECK(st.runs == 0 && st.measurements == 0 && st.cubins == 0);
  CHECK(sql_int(dst_path, "SELECT count(*) FROM measurements WHERE mode ="
                          " 'token'") == 3);
  CHECK(strcmp(sql_text(dst_path, "SELECT uuid FROM runs"),
               "aaaabbbbccccddddaaaabbbbccccdddd") == 0);
  fs_store_key k = {"NVIDIA H200", "sm_90", FS_DTYPE_BF16, 4096, 151936, 1,
                    FS_STORE_MODE_TOKEN};
  fs_store_choice c;
  REQUIRE(fs_store_winner(dst, &k, &c) == FS_OK);
  CHECK(!strcmp(c.variant, "fsamp_9") && c.has_cubin && c.cubin_size == 2);
  fs_store_choice_clear(&c);
  k.mode = FS_STORE_MODE_GREEDY;
  REQUIRE(fs_store_winner(dst, &k, &c) == FS_OK);
  CHECK(c.match == FS_STORE_MATCH_NONE);
  fs_store_close(dst);
  CHECK(sql_int(v2, "PRAGMA user_version") == 2);
}

int main(void) {
  make_tmpdir();
  test_export_import();
  test_merge_union();
  test_export_modes();
  test_merge_v2();
  remove_tmpdir();
  return fs_test_done("test_store_transfer");
}
