/*
** test_bias_compile: the logit bias's own module (templates/fsamp_bias.cu,
** runtime/bias.c) compiles with NVRTC for every architecture the generator
** knows (sm_80, 86, 89, 90a, 100, 120), with its three kernels in the
** cubin and at most 32 bytes of spills and stack (the correctly rounded 1 / T,
** as the fused kernels take it, is a called subroutine: ptxas saves a few
** registers around it on some targets; a spill of the dot product's or the
** noise's loop would be far larger).  Needs no GPU.
*/
#include "fs_test.h"

#include "fs_int.h"
#include "fs_nvrtc.h"

#include <string.h>

/* Is name's symbol in the cubin's bytes (its string table)? */
static int has_symbol(const fs_cubin *c, const char *name) {
  const size_t n = strlen(name);
  for (size_t i = 0; i + n < c->size; i++)
    if (!memcmp(c->data + i, name, n) && c->data[i + n] == 0) return 1;
  return 0;
}

int main(void) {
  static const char *targets[] = {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120"};
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
    char err[512];
    fs_cubin c;
    const int st = fs_bias_compile(targets[i], &c, err, sizeof err);
    CHECK_MSG(st == FS_OK, "%s: %s\n%s", targets[i], err, c.log ? c.log : "");
    if (st == FS_OK) {
      CHECK_MSG(c.spill_bytes <= 32 && c.stack_bytes <= 32, "%s: spills %d bytes, stack %d",
                targets[i], c.spill_bytes, c.stack_bytes);
      CHECK_MSG(has_symbol(&c, "fsamp_bias_prep_bf16") && has_symbol(&c, "fsamp_bias_prep_f16") &&
                    has_symbol(&c, "fsamp_bias_merge"),
                "%s: a kernel is missing from the cubin", targets[i]);
      printf("%-7s %zu bytes, %d registers, %d bytes spilled, %d of stack, %.2f s\n", targets[i],
             c.size, c.registers, c.spill_bytes, c.stack_bytes, c.seconds);
    }
    fs_cubin_free(&c);
  }
  return fs_test_done("test_bias_compile");
}
