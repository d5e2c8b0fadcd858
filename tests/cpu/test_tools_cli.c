/*
** test_tools_cli: transcript tests of fs-bench's and fs-demo's argument
** handling (the built binaries in $FS_TEST_BINARY_DIR, run in a scratch
** directory; fs-tune has its own, test_tune_cli).  Every bad argument exits 2
** before any GPU work, with a message that names the argument, its value and
** the rule, then the usage; --help exits 0.  Needs no GPU (no case gets past
** the arguments).
*/
#include "fs_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char bench[4096], demo[4096], tmp[4096];

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

int main(void) {
  const char *bd = getenv("FS_TEST_BINARY_DIR");
  REQUIRE(bd != NULL);
  snprintf(bench, sizeof bench, "%s/fs-bench", bd);
  snprintf(demo, sizeof demo, "%s/fs-demo", bd);
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
  expect(demo, ARGS("--seed", "-3"), 2, "--seed -3: must be an unsigned 64-bit integer", NULL);
  expect(demo, ARGS("--seed", "99999999999999999999999"), 2, "--seed 9999", NULL);
  expect(demo, ARGS("--temperature", "warm"), 2, "--temperature warm: not a number", NULL);
  expect(demo, ARGS("--model", "gpt-5"), 2, "--model gpt-5: not a preset", NULL);
  expect(demo, ARGS("--dtype", "fp8"), 2, "--dtype fp8: the element type is bf16 or fp16", NULL);
  expect(demo, ARGS("--shape", "D=64,V=9x"), 2, "--shape D=64,V=9x", NULL);
  expect(demo, ARGS("--help"), 0, "--noise token|group16", NULL);
  expect(demo, ARGS("--noise", "Group16"), 2, "--noise Group16: the noise is token", NULL);

  if (!fs_test_failures) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
  }
  return fs_test_done("test_tools_cli");
}
