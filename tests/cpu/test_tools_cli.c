/*
** test_tools_cli: transcript tests of fs-bench's, fs-demo's and
** fs-bench-tp's argument handling (the built binaries in $FS_TEST_BINARY_DIR,
** run in a scratch directory; fs-tune has its own, test_tune_cli).  Every bad
** argument exits 2 before any GPU work, with a message that names the
** argument, its value and the rule, then the usage; --help exits 0.  Among
** them the values once read loosely: sscanf's %d wrapping --shape
** D=4294967304 to 8, a negative D reaching malloc, strtof's underflow of
** --temperature 1e-50 to 0 read as greedy, fs-bench-tp's trailing option
** without its value ignored and atoi's "-1" and "abc".  Needs no GPU: no case
** but fs-demo's small valid shape gets past the arguments (and that one runs
** on the CPU reference when there is no GPU).
*/
#include "fs_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char bench[4096], demo[4096], tp[4096], tmp[4096];

/* Runs the tool `bin` with the NULL-terminated arguments and checks the exit
** code and that every needle appears in its stderr (stdout for code 0). */
static void expect(const char *bin, const char *const *args, int code, ...) {
  fs_test_proc r = fs_test_run(bin, tmp, NULL, args);
  char what[512];
  snprintf(what, sizeof what, "%s", strrchr(bin, '/') + 1);
  for (const char *const *a = args; *a; a++)
    snprintf(what + strlen(what), sizeof what - strlen(what), " %s", *a);
  CHECK_MSG(r.code == code, "%s: exit %d, expected %d\nstdout:\n%.2000s\nstderr:\n%.2000s", what,
            r.code, code, r.out, r.err);
  va_list ap;
  va_start(ap, code);
  for (const char *needle; (needle = va_arg(ap, const char *)) != NULL;)
    CHECK_MSG(strstr(code ? r.err : r.out, needle), "%s: '%s' not in its %s:\n%.2000s", what,
              needle, code ? "stderr" : "stdout", code ? r.err : r.out);
  va_end(ap);
  fs_test_proc_free(&r);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* fs-bench-tp: every option checked as fs-bench checks its own. */
static void test_bench_tp(void) {
  expect(tp, ARGS("--help"), 0, "usage: fs-bench-tp", "--ranks R", NULL);
  expect(tp, ARGS("--reps", "5", "--help"), 0, "usage: fs-bench-tp", NULL);
  expect(tp, ARGS("--bogus"), 2, "--bogus: not an option", "usage:", NULL);
  expect(tp, ARGS("--bogus", "1"), 2, "--bogus: not an option", NULL);
  expect(tp, ARGS("--reps"), 2, "--reps: the option takes a value", NULL);
  expect(tp, ARGS("--ranks", "1", "--reps"), 2, "--reps: the option takes a value", NULL);
  expect(tp, ARGS("--reps", "-1"), 2, "--reps -1", "1..100000", NULL);
  expect(tp, ARGS("--reps", "0"), 2, "--reps 0", "1..100000", NULL);
  expect(tp, ARGS("--reps", "100001"), 2, "--reps 100001", NULL);
  expect(tp, ARGS("--reps", "10x"), 2, "--reps 10x", NULL);
  expect(tp, ARGS("--ranks", "-3"), 2, "--ranks -3", "1..8", NULL);
  expect(tp, ARGS("--ranks", "abc"), 2, "--ranks abc", "1..8", NULL);
  expect(tp, ARGS("--ranks", "0"), 2, "--ranks 0", NULL);
  expect(tp, ARGS("--ranks", "9"), 2, "--ranks 9", NULL);
  expect(tp, ARGS("--draw-ranks", "2"), 2, "--draw-ranks 2", "0 or 1", NULL);
  expect(tp, ARGS("--help"), 0, "--draw-ranks 0|1", NULL);
  expect(tp, ARGS("--targets", "2"), 2, "--targets 2", "0 or 1", NULL);
  expect(tp, ARGS("--targets", "1", "--top-k", "50"), 2, "--targets 1: not with --top-k", NULL);
  expect(tp, ARGS("--help"), 0, "--targets 0|1", NULL);
  expect(tp, ARGS("--batch", "abc"), 2, "--batch abc", "1..65535", NULL);
  expect(tp, ARGS("--batch", "16,0"), 2, "--batch 16,0", NULL);
  expect(tp, ARGS("--batch", "65536"), 2, "--batch 65536", NULL);
  expect(tp, ARGS("--batch", "1,,2"), 2, "--batch 1,,2", NULL);
  expect(tp, ARGS("--batch", ""), 2, "--batch ''", NULL);
  char many[100] = "1";
  for (int i = 0; i < 16; i++) strcat(many, ",1"); /* 17: one more than a run takes */
  expect(tp, ARGS("--batch", many), 2, "up to 16", NULL);
  expect(tp, ARGS("--model", "gpt-5"), 2, "--model gpt-5: not a preset", NULL);
  expect(tp, ARGS("--logprobs", "2"), 2, "--logprobs 2", "0 or 1", NULL);
  expect(tp, ARGS("--top-k", "-1"), 2, "--top-k -1", NULL);
  expect(tp, ARGS("--top-k", "99999999999"), 2, "--top-k 99999999999", NULL);
  expect(tp, ARGS("--top-p", "1.5"), 2, "--top-p 1.5", "[0, 1]", NULL);
  expect(tp, ARGS("--top-p", "1e-50"), 2, "--top-p 1e-50", NULL);
  expect(tp, ARGS("--csv", ""), 2, "--csv '': the path must not be empty", NULL);
  expect(tp, ARGS("--noise", "group"), 2, "--noise group", "token or group16", NULL);
  expect(tp, ARGS("--noise", ""), 2, "--noise ''", NULL);
  expect(tp, ARGS("--help"), 0, "--noise token|group16", NULL);
}

/* --shape: one strict parser in every tool. */
static void test_shape(void) {
  const char *const tools[] = {bench, demo, tp};
  for (int t = 0; t < 3; t++) {
    const char *b = tools[t];
    expect(b, ARGS("--shape", "D=4294967304,V=100"), 2, "--shape D=4294967304,V=100",
           "D=4294967304", "multiple of 8 in 8..65536", NULL);
    expect(b, ARGS("--shape", "D=-8,V=100"), 2, "--shape D=-8,V=100", "D=-8", NULL);
    expect(b, ARGS("--shape", "D=64,V=-1"), 2, "--shape D=64,V=-1", "V=-1", "vocabulary in 1..",
           NULL);
    expect(b, ARGS("--shape", "D=64,V=4294967397"), 2, "--shape D=64,V=4294967397",
           "V=4294967397", NULL);
    expect(b, ARGS("--shape", "D=64,V=99999999999999999999999"), 2, "V=99999999999999999999999",
           NULL);
    expect(b, ARGS("--shape", "D=12,V=100"), 2, "--shape D=12,V=100", "multiple of 8", NULL);
    expect(b, ARGS("--shape", "D=64,V=100x"), 2, "--shape D=64,V=100x", "D=<hidden size>", NULL);
    expect(b, ARGS("--shape", "D=64, V=100"), 2, "--shape D=64, V=100", NULL);
    expect(b, ARGS("--shape", "D=+64,V=100"), 2, "--shape D=+64,V=100", NULL);
    expect(b, ARGS("--shape", "D=64"), 2, "--shape D=64", "both", NULL);
    expect(b, ARGS("--shape", "D=64,V=100,D=8"), 2, "--shape D=64,V=100,D=8", "twice", NULL);
    expect(b, ARGS("--shape", ""), 2, "--shape ''", NULL);
  }
  /* either order, and a valid shape gets through (the CPU reference without a GPU) */
  expect(demo, ARGS("--shape", "V=100,D=8", "--batch", "1", "--iters", "1"), 0, "V=100", NULL);
}

/* --temperature: strtof's underflow and overflow are errors, not 0 or inf. */
static void test_temperature(void) {
  expect(bench, ARGS("--temperature", "1e-50"), 2, "--temperature 1e-50", "0 (greedy) or", NULL);
  expect(bench, ARGS("--temperature", "1e50"), 2, "--temperature 1e50", NULL);
  expect(demo, ARGS("--temperature", "1e-50"), 2, "--temperature 1e-50", "range", NULL);
  expect(demo, ARGS("--temperature", "-1e-50"), 2, "--temperature -1e-50", "range", NULL);
  expect(demo, ARGS("--temperature", "1e50"), 2, "--temperature 1e50", "range", NULL);
  /* fs-demo's other float options read the same way */
  expect(demo, ARGS("--top-p", "1e-50"), 2, "--top-p 1e-50", "range", NULL);
  expect(demo, ARGS("--mask-density", "1e-400"), 2, "--mask-density 1e-400", NULL);
}

int main(void) {
  const char *bd = getenv("FS_TEST_BINARY_DIR");
  REQUIRE(bd != NULL);
  snprintf(bench, sizeof bench, "%s/fs-bench", bd);
  snprintf(demo, sizeof demo, "%s/fs-demo", bd);
  snprintf(tp, sizeof tp, "%s/fs-bench-tp", bd);
  REQUIRE(access(bench, X_OK) == 0 && access(demo, X_OK) == 0);
  const char *td = getenv("TMPDIR");
  snprintf(tmp, sizeof tmp, "%s/fs-tools-cli-XXXXXX", td && *td ? td : "/tmp");
  REQUIRE(mkdtemp(tmp) != NULL);

  expect(bench, ARGS("--help"), 0, "usage: fs-bench", "--temperature T", "--flush read|write", NULL);
  expect(bench, ARGS("--bogus"), 2, "--bogus: not an option", "usage:", NULL);
  expect(bench, ARGS("--model"), 2, "--model: the option takes a value", NULL);
  expect(bench, ARGS("--model", "gpt-5"), 2, "--model gpt-5: not a preset", NULL);
  expect(bench, ARGS("--shape", "D=4095,V=10"), 2, "--shape D=4095,V=10", "multiple of 8", NULL);
  expect(bench, ARGS("--shape", "D=64,V=0"), 2, "--shape D=64,V=0", "vocabulary in 1..", NULL);
  expect(bench, ARGS("--shape", "D=64,V=10junk"), 2, "--shape D=64,V=10junk", NULL);
  expect(bench, ARGS("--batch", "1,,2"), 2, "--batch 1,,2", "batch sizes in 1..65535", NULL);
  expect(bench, ARGS("--batch", "0"), 2, "--batch 0", NULL);
  expect(bench, ARGS("--batch", "65536"), 2, "--batch 65536", NULL);
  expect(bench, ARGS("--dtype", "fp8"), 2, "--dtype fp8: the element type is bf16 or fp16", NULL);
  expect(bench, ARGS("--reps", "2"), 2, "--reps 2", "3..100000", NULL);
  expect(bench, ARGS("--reps", "ten"), 2, "--reps ten", NULL);
  expect(bench, ARGS("--reps", "1000000000"), 2, "--reps 1000000000", NULL);
  expect(bench, ARGS("--temperature", "-1"), 2, "--temperature -1", "0 (greedy) or", NULL);
  expect(bench, ARGS("--temperature", "1e-35"), 2, "--temperature 1e-35", ">= 1e-30", NULL);
  expect(bench, ARGS("--temperature", "nan"), 2, "--temperature nan", NULL);
  expect(bench, ARGS("--temperature", "inf"), 2, "--temperature inf", NULL);
  expect(bench, ARGS("--temperature", "1x"), 2, "--temperature 1x", NULL);
  expect(bench, ARGS("--csv", ""), 2, "--csv '': the path must not be empty", NULL);
  expect(bench, ARGS("--flush", "evict"), 2, "--flush evict: the L2 flush is read", "or write", NULL);
  expect(bench, ARGS("--flush"), 2, "--flush: the option takes a value", NULL);
  expect(bench, ARGS("--flush", ""), 2, "--flush '': the L2 flush is read", NULL);
  expect(bench, ARGS("--help"), 0, "--noise token|group16", NULL);
  expect(bench, ARGS("--noise", "group8"), 2, "--noise group8: the noise is token", "or group16",
         NULL);
  expect(bench, ARGS("--noise", ""), 2, "--noise '': the noise is token", NULL);
  expect(bench, ARGS("--noise"), 2, "--noise: the option takes a value", NULL);
  /* 65 batch sizes: one more than a run takes */
  char many[400] = "1";
  for (int i = 0; i < 64; i++) strcat(many, ",1");
  expect(bench, ARGS("--batch", many), 2, "up to 64 comma-separated", NULL);

  expect(demo, ARGS("--help"), 0, "usage: fs-demo", "--check 0|1", NULL);
  expect(demo, ARGS("--bogus", "1"), 2, "--bogus: not an option", "usage:", NULL);
  expect(demo, ARGS("--batch"), 2, "--batch: the option takes a value", NULL);
  expect(demo, ARGS("--batch", "0"), 2, "--batch 0: must be an integer in 1..65535", NULL);
  expect(demo, ARGS("--batch", "x"), 2, "--batch x", NULL);
  expect(demo, ARGS("--iters", "0"), 2, "--iters 0: must be an integer in 1..100000", NULL);
  expect(demo, ARGS("--check", "2"), 2, "--check 2: must be an integer in 0..1", NULL);
  expect(demo, ARGS("--targets", "2"), 2, "--targets 2: must be an integer in 0..1", NULL);
  expect(demo, ARGS("--help"), 0, "--targets 0|1", NULL);
  expect(demo, ARGS("--seed", "-3"), 2, "--seed -3: must be an unsigned 64-bit integer", NULL);
  expect(demo, ARGS("--seed", "99999999999999999999999"), 2, "--seed 9999", NULL);
  expect(demo, ARGS("--temperature", "warm"), 2, "--temperature warm: not a number", NULL);
  expect(demo, ARGS("--model", "gpt-5"), 2, "--model gpt-5: not a preset", NULL);
  expect(demo, ARGS("--dtype", "fp8"), 2, "--dtype fp8: the element type is bf16 or fp16", NULL);
  expect(demo, ARGS("--shape", "D=64,V=9x"), 2, "--shape D=64,V=9x", NULL);
  expect(demo, ARGS("--help"), 0, "--noise token|group16", NULL);
  expect(demo, ARGS("--noise", "Group16"), 2, "--noise Group16: the noise is token", NULL);
  test_shape();
  test_temperature();
  /* fs-bench-tp is built only where NCCL is found */
  if (access(tp, X_OK) == 0) test_bench_tp();
  else printf("no %s: its cases skipped\n", tp);

  if (!fs_test_failures) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
  }
  return fs_test_done("test_tools_cli");
}
