// fs-test-timeout: 240
/*
** test_tune_cli: transcript tests of the fs-tune program (zstd's cli-tests
** style): each case runs the built binary ($FS_TEST_BINARY_DIR/fs-tune) in a
** fresh temporary directory, with HOME and XDG_CACHE_HOME pointing inside it,
** and checks the exit status, stdout and stderr.  Needs no GPU: on a machine
** with one the dry-run cases still only compile.
**
** Cases: --help; bad arguments and a bad FS_TUNE_WARMUP_MS (exit 2, the
** message names the argument, its value and the rule); --list-models; a dry
** run that compiles a filtered slice of the space and says timing needs a
** GPU, with --report; --filter with a list of names (just those, besides
** the oracle); list on a missing and on an empty database; export/import
** round trips (empty, and a database with a run written through the store
** API); the default database path under XDG_CACHE_HOME and HOME; corrupt and
** truncated databases (exit 1, a clear message, never a signal); export from
** a missing database and merge/import of a bad input (exit 1, no database
** created); --report naming the database or its .svg the database, by name,
** link or another spelling (exit 2, the database intact); --device past the
** GPUs there are (exit 2; under the fake driver, tests/fakecuda).
*/
#include "fs_test.h"

#include "store.h"

#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char bin[4096], tmp[4096];

typedef fs_test_proc result;

/* Runs fs-tune with the NULL-terminated arguments in tmp, with
** HOME=<tmp>/home, XDG_CACHE_HOME=<xdg> (unset when xdg is NULL) and the
** "NAME=value" `extra` if not NULL. */
static result run_env2(const char *xdg, const char *extra, const char *extra2,
                       const char *const *args) {
  char home[4200], xdg_kv[4200];
  snprintf(home, sizeof home, "HOME=%s/home", tmp);
  if (xdg) snprintf(xdg_kv, sizeof xdg_kv, "XDG_CACHE_HOME=%s", xdg);
  const char *env[] = {home, xdg ? xdg_kv : "XDG_CACHE_HOME", extra, extra ? extra2 : NULL, NULL};
  return fs_test_run(bin, tmp, env, args);
}
static result run_env(const char *xdg, const char *extra, const char *const *args) {
  return run_env2(xdg, extra, NULL, args);
}
static result run_in(const char *xdg, const char *const *args) { return run_env(xdg, NULL, args); }

#define RUN(...) run_in(NULL, (const char *const[]){__VA_ARGS__, NULL})

/* Checks the exit code and that each needle appears in stdout or stderr. */
static void expect(const char *what, result r, int code, ...) {
  va_list ap;
  CHECK_MSG(r.code == code, "%s: exit %d, expected %d\nstdout:\n%.3000s\nstderr:\n%.3000s", what,
            r.code, code, r.out, r.err);
  va_start(ap, code);
  for (const char *needle; (needle = va_arg(ap, const char *)) != NULL;)
    CHECK_MSG(strstr(r.out, needle) || strstr(r.err, needle),
              "%s: '%s' not in the output\nstdout:\n%.3000s\nstderr:\n%.3000s", what, needle,
              r.out, r.err);
  va_end(ap);
  fs_test_proc_free(&r);
}

static int exists(const char *rel) {
  char p[4600];
  snprintf(p, sizeof p, "%s/%s", tmp, rel);
  return access(p, F_OK) == 0;
}

static void path_in_tmp(char *buf, size_t n, const char *rel) { snprintf(buf, n, "%s/%s", tmp, rel); }

static void test_usage(void) {
  result r = RUN("--help");
  CHECK(strstr(r.out, "usage: fs-tune") != NULL);
  CHECK(strstr(r.out, "--dry-run") && strstr(r.out, "export OUT.db"));
  expect("--help", r, 0, NULL);

  expect("unknown option", RUN("--frobnicate"), 2, "--frobnicate", "unknown option", NULL);
  expect("--batch 0", RUN("--batch", "0"), 2, "--batch 0", "1..65535", NULL);
  expect("--batch x", RUN("--batch", "1,x"), 2, "--batch 1,x", "'x'", NULL);
  expect("--shape D=4095", RUN("--shape", "D=4095,V=10"), 2, "--shape D=4095,V=10", "D=4095",
         "multiple of 8", NULL);
  expect("--shape junk", RUN("--shape", "4096x10"), 2, "--shape 4096x10", "D=", NULL);
  expect("--dtype int8", RUN("--dtype", "int8"), 2, "--dtype int8", "bf16 or fp16", NULL);
  expect("--jobs 0", RUN("--jobs", "0"), 2, "--jobs 0", "1..256", NULL);
  expect("--max-variants 0", RUN("--max-variants", "0"), 2, "--max-variants 0", ">= 1", NULL);
  expect("--budget -1", RUN("--budget", "-1"), 2, "--budget -1", "seconds > 0", NULL);
  expect("--arch 75", RUN("--arch", "75"), 2, "--arch 75", "80, 86, 89, 90, 100, 120", NULL);
  expect("--model nope", RUN("--model", "nope"), 2, "--model nope", "--list-models", NULL);
  expect("--model and --shape", RUN("--model", "qwen3-8b", "--shape", "D=8,V=8"), 2,
         "give one of them", NULL);
  expect("--db without value", RUN("--db"), 2, "--db", "needs a value", NULL);
  expect("FS_TUNE_WARMUP_MS=150ms",
         run_env(NULL, "FS_TUNE_WARMUP_MS=150ms", (const char *const[]){"--dry-run", NULL}), 2,
         "FS_TUNE_WARMUP_MS=150ms", "0..10000", NULL);
  expect("FS_TUNE_NOISE=gumbel",
         run_env(NULL, "FS_TUNE_NOISE=gumbel", (const char *const[]){"--dry-run", NULL}), 2,
         "FS_TUNE_NOISE=gumbel", "token or group16", NULL);
  expect("FS_TUNE_GREEDY=2",
         run_env(NULL, "FS_TUNE_GREEDY=2", (const char *const[]){"--dry-run", NULL}), 2,
         "FS_TUNE_GREEDY=2", "0 (time sampled calls", "1 (time greedy calls)", NULL);
  expect("FS_TUNE_GREEDY=yes",
         run_env(NULL, "FS_TUNE_GREEDY=yes", (const char *const[]){"--dry-run", NULL}), 2,
         "FS_TUNE_GREEDY=yes", NULL);
  expect("--mode sampled", RUN("--mode", "sampled", "--dry-run"), 2, "--mode sampled",
         "token", "group16", "greedy", NULL);
  expect("--mode against FS_TUNE_GREEDY",
         run_env(NULL, "FS_TUNE_GREEDY=1",
                 (const char *const[]){"--mode", "group16", "--dry-run", NULL}),
         2, "--mode group16", "FS_TUNE_GREEDY=1", "disagree", NULL);
  expect("FS_TUNE_GREEDY=1 with FS_TUNE_NOISE=group16",
         run_env2(NULL, "FS_TUNE_GREEDY=1", "FS_TUNE_NOISE=group16",
                  (const char *const[]){"--dry-run", NULL}),
         2, "FS_TUNE_GREEDY=1 and FS_TUNE_NOISE=group16", "one kind of call", NULL);
  expect("--mode against FS_TUNE_NOISE",
         run_env(NULL, "FS_TUNE_NOISE=group16",
                 (const char *const[]){"--mode", "token", "--dry-run", NULL}),
         2, "--mode token", "FS_TUNE_NOISE=group16", "disagree", NULL);
  expect("show --mode Greedy", RUN("show", "--mode", "Greedy"), 2, "--mode Greedy",
         "token, group16 or greedy", NULL);
  expect("stray argument", RUN("tune"), 2, "'tune'", "unexpected argument", NULL);
  expect("show bad option", RUN("show", "--bogus"), 2, "--bogus", NULL);
  expect("export without file", RUN("export"), 2, "export", "one output file", NULL);
  expect("import without file", RUN("import"), 2, "import", "one input file", NULL);

  result m = RUN("--list-models");
  CHECK(strstr(m.out, "qwen3-8b") && strstr(m.out, "4096") && strstr(m.out, "151936"));
  expect("--list-models", m, 0, "llama3-70b", NULL);
}

static void test_dry_run(void) {
  result r = RUN("--dry-run", "--arch", "90", "--filter", "_v128_b16_", "--max-variants", "6",
                 "--jobs", "2", "--report", "dry.csv");
  int compiled = 0;
  for (const char *p = r.out; (p = strstr(p, "  compiled fsamp_")) != NULL; p++) compiled++;
  CHECK_MSG(compiled >= 1, "no compiled variant in:\n%.3000s", r.out);
  CHECK(strstr(r.out, "_v128_b16_") != NULL);
  /* on sm_90a the TMA and wgmma tiles come before mma.sync's (tune_plan.c) */
  CHECK_MSG(strstr(r.out, "  compiled fsamp_bf16_sm90a_mma_") == NULL,
            "an mma.sync variant among the first 6 of sm_90a:\n%.3000s", r.out);
  /* sm_80 has no TMA family: mma.sync is its space */
  result r80 = RUN("--dry-run", "--arch", "80", "--filter", "_v128_b16_", "--max-variants", "2",
                   "--jobs", "2");
  CHECK_MSG(strstr(r80.out, "  compiled fsamp_bf16_sm80_mma_") != NULL,
            "no mma.sync variant among the first of sm_80:\n%.3000s", r80.out);
  CHECK(strstr(r.out, "rejected (register spills)") != NULL);
  expect("--dry-run", r, 0, "timing needs a GPU: no variants were timed", NULL);
  CHECK(exists("dry.csv") && exists("dry.csv.svg"));
  char p[4600];
  path_in_tmp(p, sizeof p, "dry.csv");
  char *csv = fs_test_slurp(p);
  CHECK(strncmp(csv, "bucket,variant,tile_v", 21) == 0);
  CHECK(strstr(csv, ",compiled,") != NULL);
  CHECK_MSG(strstr(csv, ",spills,mode\n") && strstr(csv, ",token\n"),
            "the report has no mode column:\n%.400s", csv);
  free(csv);
  path_in_tmp(p, sizeof p, "dry.csv.svg");
  char *svg = fs_test_slurp(p);
  CHECK(strncmp(svg, "<?xml", 5) == 0 && strstr(svg, "</svg>\n") != NULL);
  free(svg);
  /* A dry run writes no database. */
  CHECK(!exists("home/.cache/flashsampling/tuning.db"));
  /* --mode is accepted alone and with an environment that agrees */
  expect("--mode greedy --dry-run",
         RUN("--mode", "greedy", "--dry-run", "--filter", "_v128_b16_", "--max-variants", "1"), 0,
         "timing needs a GPU", NULL);
  expect("--mode group16 with FS_TUNE_GREEDY=0",
         run_env(NULL, "FS_TUNE_GREEDY=0",
                 (const char *const[]){"--mode", "group16", "--dry-run", "--filter", "_v128_b16_",
                                       "--max-variants", "1", NULL}),
         0, "timing needs a GPU", NULL);
  expect("--mode group16 with FS_TUNE_NOISE=group16",
         run_env(NULL, "FS_TUNE_NOISE=group16",
                 (const char *const[]){"--mode", "group16", "--dry-run", "--filter", "_v128_b16_",
                                       "--max-variants", "1", NULL}),
         0, "timing needs a GPU", NULL);
}

/* --filter with a list: just the named variants (here two winners of the
** shipped defaults) are compiled for timing, besides the bucket's default,
** which is compiled as the oracle only. */
static void test_filter_list(void) {
  const char *a = "fsamp_bf16_sm90a_wg_v128_b16_k64_g1_s6_c1_co_e128";
  const char *b = "fsamp_bf16_sm90a_wg_v128_b16_k64_g1_s4_c1_co_e128";
  char list[256];
  snprintf(list, sizeof list, ",%s,,%s", a, b);
  result r = RUN("--dry-run", "--batch", "1", "--filter", list, "--jobs", "2");
  int compiled = 0, oracle = 0;
  for (const char *p = r.out; (p = strstr(p, "  compiled fsamp_")) != NULL; p++) {
    compiled++;
    const char *eol = strchr(p, '\n');
    const char *o = strstr(p, "(oracle only)");
    if (o && (!eol || o < eol)) oracle++;
  }
  CHECK_MSG(compiled == 3 && oracle == 1, "compiled %d (oracle %d) in:\n%.3000s", compiled,
            oracle, r.out);
  CHECK(strstr(r.out, a) != NULL && strstr(r.out, b) != NULL);
  expect("--filter list", r, 0, "timing needs a GPU", NULL);
  expect("--filter of commas only", RUN("--filter", ",,"), 2, "--filter ',,'",
         "one or more variant-name substrings", NULL);
  expect("--filter with a space", RUN("--filter", "_wg_, _fma_"), 2, "--filter '_wg_, _fma_'",
         "without spaces", NULL);
  expect("--filter matching nothing", RUN("--dry-run", "--filter", "nope,_zz_"), 2,
         "--filter nope,_zz_", "no variant", NULL);
}

static void test_empty_db(void) {
  expect("list, no database", RUN("list", "--db", "fresh.db"), 0, "nothing is tuned", NULL);
  expect("list, default path", RUN("list"), 0, "home/.cache/flashsampling/tuning.db", NULL);
  /* An empty database: export, import, list. */
  char ep[4600], err[512];
  fs_store *est = NULL;
  path_in_tmp(ep, sizeof ep, "empty.db");
  REQUIRE(fs_store_open(ep, FS_STORE_CREATE, &est, err, sizeof err) == FS_OK);
  fs_store_close(est);
  expect("export empty", RUN("export", "empty-export.db", "--db", "empty.db"), 0,
         "0 run(s)", NULL);
  CHECK(exists("empty.db") && exists("empty-export.db"));
  expect("export onto an existing file", RUN("export", "empty-export.db", "--db", "empty.db"), 2,
         "exists", NULL);
  expect("import empty", RUN("import", "empty-export.db", "--db", "imported.db"), 0,
         "merged empty-export.db", NULL);
  expect("list empty", RUN("list", "--db", "imported.db"), 0, "runs:", "(none)", "winners:",
         NULL);
  expect("show empty", RUN("show", "--db", "imported.db", "--model", "qwen3-8b"), 0,
         "measurements:", "(none)", NULL);
  expect("import missing", RUN("import", "missing.db", "--db", "imported.db"), 1, "missing.db",
         NULL);
  /* The default database: XDG_CACHE_HOME, else HOME/.cache (created). */
  char xdg[4600];
  path_in_tmp(xdg, sizeof xdg, "xdg");
  expect("import to XDG", run_in(xdg, (const char *const[]){"import", "empty-export.db", NULL}),
         0, NULL);
  CHECK(exists("xdg/flashsampling/tuning.db"));
  expect("import to HOME", RUN("import", "empty-export.db"), 0, NULL);
  CHECK(exists("home/.cache/flashsampling/tuning.db"));
}

/* A database with one run written through the store API. */
static void make_db(const char *path) {
  char err[512];
  fs_store *st = NULL;
  REQUIRE(fs_store_open(path, FS_STORE_CREATE, &st, err, sizeof err) == FS_OK);
  fs_store_run run;
  memset(&run, 0, sizeof run);
  run.device_name = "NVIDIA Test GPU";
  run.arch = "sm_90";
  run.sm_count = 132;
  run.driver_version = 13000;
  run.nvrtc_version = "13.0";
  run.generator_rev = "gen-test";
  int64_t id = 0;
  REQUIRE(fs_store_begin_run(st, &run, &id) == FS_OK);
  static const char *names[] = {"fsamp_bf16_sm90a_mma_v128_b8_k64_w4x1_s4_l16_rl_gp",
                                "fsamp_bf16_sm90a_mma_v128_b8_k64_w4x1_s4_l16_r2_gp",
                                "fsamp_bf16_sm90a_mma_v128_b8_k64_w4x1_s3_l16_rl_gp"};
  static const int outcomes[] = {FS_STORE_OUTCOME_OK, FS_STORE_OUTCOME_OK,
                                 FS_STORE_OUTCOME_WRONG};
  for (int i = 0; i < 3; i++) {
    fs_store_measurement m;
    memset(&m, 0, sizeof m);
    m.dtype = FS_DTYPE_BF16;
    m.hidden = 4096;
    m.vocab = 151936;
    m.bucket = 8;
    m.variant = names[i];
    m.source_hash = "00112233aabbccdd";
    m.outcome = outcomes[i];
    m.median_us = outcomes[i] == FS_STORE_OUTCOME_OK ? 300.0 + 50 * i : -1;
    m.spread_us = 1.0;
    m.samples = 40;
    m.floor_us = 260.0;
    m.registers = 96;
    m.spills = 0;
    m.smem_bytes = 82560;
    REQUIRE(fs_store_add_measurement(st, id, &m, NULL) == FS_OK);
  }
  static const char cubin[] = "not really a cubin";
  REQUIRE(fs_store_put_cubin(st, names[0], "sm_90", "13.0", "00112233aabbccdd", cubin,
                             sizeof cubin) == FS_OK);
  REQUIRE(fs_store_finish_run(st, id) == FS_OK);
  fs_store_close(st);
}

static void test_db_with_data(void) {
  char p[4600];
  path_in_tmp(p, sizeof p, "data.db");
  make_db(p);
  expect("list data", RUN("list", "--db", "data.db"), 0, "NVIDIA Test GPU",
         "fsamp_bf16_sm90a_mma_v128_b8_k64_w4x1_s4_l16_rl_gp", "finished", NULL);
  result s = RUN("show", "--db", "data.db", "--bucket", "8", "--dtype", "bf16");
  CHECK(strstr(s.out, "wrong") != NULL);
  CHECK(strstr(s.out, "_l16_r2_gp") != NULL);
  expect("show data", s, 0, "300.000", NULL);
  expect("show filtered out", RUN("show", "--db", "data.db", "--bucket", "16"), 0, "(none)",
         NULL);
  expect("export data", RUN("export", "ship.db", "--db", "data.db", "--model", "qwen3-8b"), 0,
         "1 winner(s)", NULL);
  expect("import data", RUN("import", "ship.db", "--db", "fleet.db"), 0, "1 run(s)", NULL);
  expect("list imported", RUN("list", "--db", "fleet.db"), 0,
         "fsamp_bf16_sm90a_mma_v128_b8_k64_w4x1_s4_l16_rl_gp", NULL);
  expect("merge twice adds nothing", RUN("merge", "ship.db", "data.db", "--db", "fleet.db"), 0,
         "merged ship.db: 0 run(s), 0 measurement(s), 0 cubin(s)", "merged data.db", NULL);

  /* Truncated to half: a clear error, exit 1, no crash. */
  struct stat sb;
  REQUIRE(stat(p, &sb) == 0);
  REQUIRE(truncate(p, sb.st_size / 2) == 0);
  result t = RUN("list", "--db", "data.db");
  CHECK_MSG(t.code == 1, "truncated list: exit %d\n%s%s", t.code, t.out, t.err);
  CHECK(strstr(t.err, "data.db") != NULL);
  fs_test_proc_free(&t);
  t = RUN("show", "--db", "data.db");
  CHECK_MSG(t.code == 1, "truncated show: exit %d\n%s%s", t.code, t.out, t.err);
  fs_test_proc_free(&t);
}

/* Random bytes: not a database. */
static void make_garbage(const char *rel) {
  char p[4600];
  path_in_tmp(p, sizeof p, rel);
  FILE *f = fopen(p, "wb");
  REQUIRE(f);
  unsigned long long s = 7;
  for (int i = 0; i < 16384; i++) fputc((int)(fs_test_rand(&s) & 0xff), f);
  fclose(f);
}

/* export reads a database that exists; merge and import check every input
** before they create the target: a failure leaves no empty database. */
static void test_transfer_inputs(void) {
  expect("export from a missing database", RUN("export", "e1.db", "--db", "missing.db"), 1,
         "no tuning database at", "missing.db", NULL);
  CHECK(!exists("missing.db") && !exists("e1.db"));
  make_garbage("garbage.db");
  expect("merge garbage", RUN("merge", "garbage.db", "--db", "m.db"), 1, "garbage.db", NULL);
  CHECK(!exists("m.db"));
  expect("import garbage", RUN("import", "garbage.db", "--db", "m.db"), 1, "garbage.db", NULL);
  CHECK(!exists("m.db"));
  char p[4600];
  path_in_tmp(p, sizeof p, "mgood.db");
  make_db(p);
  expect("merge good then garbage", RUN("merge", "mgood.db", "garbage.db", "--db", "m.db"), 1,
         "garbage.db", NULL);
  CHECK(!exists("m.db"));
  expect("merge a missing file", RUN("merge", "mgood.db", "nope.db", "--db", "m.db"), 1,
         "nope.db", NULL);
  CHECK(!exists("m.db"));
  expect("merge good", RUN("merge", "mgood.db", "--db", "m.db"), 0, "merged mgood.db", NULL);
}

/* --report FILE (and FILE.svg) must never be the database: refused before
** any work, the database intact. */
static void test_report_is_db(void) {
  char p[4600];
  path_in_tmp(p, sizeof p, "rep.db");
  make_db(p);
#define DRY(...) RUN("--dry-run", "--arch", "90", "--batch", "1", "--max-variants", "1", \
                     "--filter", "_v128_b16_", __VA_ARGS__)
  expect("--report the database", DRY("--db", "rep.db", "--report", "rep.db"), 2,
         "--report rep.db", "--db rep.db", NULL);
  expect("list after --report", RUN("list", "--db", "rep.db"), 0, "NVIDIA Test GPU", NULL);
  path_in_tmp(p, sizeof p, "rep.svg");
  make_db(p);
  expect("--report's svg the database", DRY("--db", "rep.svg", "--report", "rep"), 2,
         "--report rep", "rep.svg", "--db rep.svg", NULL);
  expect("list after --report's svg", RUN("list", "--db", "rep.svg"), 0, "NVIDIA Test GPU", NULL);
  char link[4600], target[4600];
  path_in_tmp(link, sizeof link, "link.db");
  path_in_tmp(target, sizeof target, "rep.db");
  REQUIRE(symlink(target, link) == 0);
  expect("--report a link to the database", DRY("--db", "rep.db", "--report", "link.db"), 2,
         "--report link.db", "--db rep.db", NULL);
  expect("list after --report link", RUN("list", "--db", "rep.db"), 0, "NVIDIA Test GPU", NULL);
  /* neither exists yet: the same path spelled two ways */
  expect("--report a new database", DRY("--db", "new.db", "--report", "./new.db"), 2,
         "--report ./new.db", "--db new.db", NULL);
  CHECK(!exists("new.db"));
#undef DRY
}

/* An invalid --device is an error (exit 2), not "no GPU": under the fake
** driver (tests/fakecuda: one GPU) device 5 does not exist. */
static void test_bad_device(void) {
  char lib[4200], ld[4300];
  snprintf(lib, sizeof lib, "%s/tests/fakecuda/libcuda.so.1", getenv("FS_TEST_BINARY_DIR"));
  if (access(lib, R_OK)) {
    printf("no %s: --device cases skipped\n", lib);
    return;
  }
  snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s/tests/fakecuda", getenv("FS_TEST_BINARY_DIR"));
  expect("--device 5, one GPU",
         run_env2(NULL, ld, "FS_FAKE_CUDA=1",
                  (const char *const[]){"--dry-run", "--device", "5", "--batch", "1",
                                        "--max-variants", "1", "--filter", "_v128_b16_", NULL}),
         2, "--device 5", "0..0", NULL);
  expect("--device 5, one GPU, tuning",
         run_env2(NULL, ld, "FS_FAKE_CUDA=1",
                  (const char *const[]){"--db", "dev.db", "--device", "5", "--batch", "1",
                                        "--max-variants", "1", "--filter", "_v128_b16_", NULL}),
         2, "--device 5", "0..0", NULL);
}

static void test_corrupt_db(void) {
  char p[4600];
  path_in_tmp(p, sizeof p, "corrupt.db");
  FILE *f = fopen(p, "wb");
  REQUIRE(f);
  unsigned long long s = 42;
  for (int i = 0; i < 16384; i++) fputc((int)(fs_test_rand(&s) & 0xff), f);
  fclose(f);
  expect("list corrupt", RUN("list", "--db", "corrupt.db"), 1, "corrupt.db", "not a database",
         NULL);
  expect("show corrupt", RUN("show", "--db", "corrupt.db"), 1, "corrupt.db", NULL);
  expect("export corrupt", RUN("export", "x.db", "--db", "corrupt.db"), 1, "corrupt.db", NULL);
  expect("import corrupt", RUN("import", "corrupt.db", "--db", "ok.db"), 1, "corrupt.db", NULL);
  expect("tune on corrupt", RUN("--db", "corrupt.db", "--batch", "1", "--max-variants", "1"), 1,
         "corrupt.db", NULL);
  CHECK(!exists("x.db"));
}

int main(void) {
  const char *bd = getenv("FS_TEST_BINARY_DIR");
  REQUIRE(bd != NULL);
  snprintf(bin, sizeof bin, "%s/fs-tune", bd);
  REQUIRE(access(bin, X_OK) == 0);
  const char *td = getenv("TMPDIR");
  snprintf(tmp, sizeof tmp, "%s/fs-tune-cli-XXXXXX", td && *td ? td : "/tmp");
  REQUIRE(mkdtemp(tmp) != NULL);
  printf("binary %s, scratch %s\n", bin, tmp);
  test_usage();
  test_dry_run(); /* first: it checks that no default database appears */
  test_filter_list();
  test_empty_db();
  test_db_with_data();
  test_corrupt_db();
  test_transfer_inputs();
  test_report_is_db();
  test_bad_device();
  if (!fs_test_failures) {
    char cmd[4700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
  }
  return fs_test_done("test_tune_cli");
}
