/* fs_test.c: the harness of fs_test.h. */
#include "fs_test.h"
#include "fs_half.h"

#include <stdint.h>

int fs_test_failures;

fs_context *fs_test_gpu_or_skip(void) {
  fs_context *ctx = NULL;
  int st = fs_context_create(0, &ctx);
  if (st == FS_NO_DEVICE || st == FS_UNSUPPORTED) {
    printf("SKIPPED: this test needs an sm_80+ GPU: %s\n", fs_last_error(NULL));
    fflush(stdout);
    exit(77);
  }
  if (st != FS_OK) {
    fprintf(stderr, "fs_context_create failed: %s: %s\n", fs_status_string(st),
            fs_last_error(NULL));
    exit(1);
  }
  return ctx;
}

int fs_test_done(const char *name) {
  if (fs_test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, fs_test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

unsigned long long fs_test_rand(unsigned long long *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double fs_test_uniform(unsigned long long *state) {
  return (double)(fs_test_rand(state) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

unsigned short fs_test_f2bf(float f) { return fs_float_to_bf16(f); }
unsigned short fs_test_f2h(float f) { return fs_float_to_half(f); }
float fs_test_bf2f(unsigned short h) { return fs_bf16_to_float(h); }
float fs_test_h2f(unsigned short h) { return fs_half_to_float(h); }
