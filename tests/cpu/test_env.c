/*
** test_env.c: fs_env_int (runtime/env.c), how the library reads its numeric
** environment knobs (FS_TOPLP_SLICES, FS_BIAS_SHORT, FS_FILTER_CLUSTER, the
** filter module's measurement knobs):
**  - whole numbers in range are read, the range's ends included;
**  - unset and empty leave the value and return 0, silently;
**  - text, trailing or leading junk, blanks, a bare sign, out-of-range and
**    overflowing numbers leave the value, return -1 and write one line on
**    stderr that names the variable, its value and the range (read back
**    from a redirected stderr).
*/
#include "fs_int.h"
#include "fs_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* fs_env_int on FS_TEST_KNOB = val (NULL: unset) in [lo, hi]; *v starts at
** 4242; what it wrote on stderr into err. */
static int env_case(const char *val, int lo, int hi, int *v, char *err, size_t cap) {
  if (val)
    setenv("FS_TEST_KNOB", val, 1);
  else
    unsetenv("FS_TEST_KNOB");
  fflush(stderr);
  FILE *tmp = tmpfile();
  const int saved = dup(2);
  if (!tmp || saved < 0 || dup2(fileno(tmp), 2) < 0) {
    fprintf(stderr, "test_env: cannot redirect stderr\n");
    exit(1);
  }
  *v = 4242;
  const int r = fs_env_int("FS_TEST_KNOB", lo, hi, v);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  const size_t n = fread(err, 1, cap - 1, tmp);
  err[n] = '\0';
  fclose(tmp);
  return r;
}

int main(void) {
  char err[512];
  int v;
  static const struct { const char *val; int lo, hi, want; } good[] = {
      {"12", 1, 1024, 12}, {"1", 1, 1024, 1}, {"1024", 1, 1024, 1024},
      {"0", 0, 16384, 0},  {"007", 0, 16, 7}, {"-3", -5, 5, -3}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    const int r = env_case(good[i].val, good[i].lo, good[i].hi, &v, err, sizeof err);
    CHECK_MSG(r == 1 && v == good[i].want && !err[0], "\"%s\" in %d..%d: returned %d, v %d, "
              "stderr \"%s\"", good[i].val, good[i].lo, good[i].hi, r, v, err);
  }
  const char *quiet[] = {NULL, ""};
  for (size_t i = 0; i < 2; i++) {
    const int r = env_case(quiet[i], 1, 8, &v, err, sizeof err);
    CHECK_MSG(r == 0 && v == 4242 && !err[0], "%s: returned %d, v %d, stderr \"%s\"",
              quiet[i] ? "empty" : "unset", r, v, err);
  }
  static const struct { const char *val; int lo, hi; } bad[] = {
      {"abc", 1, 1024},  {"12x", 1, 1024}, {"x12", 1, 1024}, {" 12", 1, 1024},
      {"12 ", 1, 1024},  {"-", 1, 1024},   {"+5", 1, 1024},  {"0", 1, 1024},
      {"1025", 1, 1024}, {"-1", 0, 16},    {"99999999999999999999", 0, 16384},
      {"1.5", 1, 8},     {"0x10", 1, 64}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char range[40];
    snprintf(range, sizeof range, "%d..%d", bad[i].lo, bad[i].hi);
    const int r = env_case(bad[i].val, bad[i].lo, bad[i].hi, &v, err, sizeof err);
    CHECK_MSG(r == -1 && v == 4242, "\"%s\" in %s: returned %d, v %d", bad[i].val, range, r, v);
    CHECK_MSG(fs_test_has(err, "FS_TEST_KNOB") && fs_test_has(err, bad[i].val) &&
                  fs_test_has(err, range) && fs_test_has(err, "ignored"),
              "\"%s\": stderr \"%s\" does not name the variable, the value and the range",
              bad[i].val, err);
  }
  unsetenv("FS_TEST_KNOB");
  return fs_test_done("test_env");
}
