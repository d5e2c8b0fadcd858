/*
** test_own_compile: the modules of the context's own, the reductions'
** (templates/fsamp_reduce.cu, runtime/kernels.c), the logit bias's
** (templates/fsamp_bias.cu, runtime/bias.c) and the filters'
** (templates/fsamp_filter.cu, runtime/filter.c), compile with NVRTC for
** every architecture the generator knows (sm_80, 86, 89, 90a, 100, 120),
** with their kernels in the cubin and at most 32 bytes of spills and stack
** (the correctly rounded 1 / T, as the fused kernels take it, is a called
** subroutine: ptxas saves a few registers around it on some targets; a spill
** of a dot product's, the noise's or a selection's loop would be far
** larger).  The filters' module also as FS_FILTER_GATHER=0 compiles it
** (FT_NO_GATHER, only its long way), for sm_90a alone (5-10 s a target: its
** scans are unrolled at every call site).  The variants' own cubins hold
** fsamp_main alone (test_compile_variants).  Was test_bias_compile.  Needs
** no GPU.
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

static const char *const all_targets[] = {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_100",
                                          "sm_120", NULL};

static void check_module(const char *what, const char *tmpl, const char *head,
                         const char *const *targets, const char *const *kernels, int nk) {
  for (size_t i = 0; targets[i]; i++) {
    char err[512];
    fs_cubin c;
    const int st = fs_own_compile(tmpl, head, targets[i], &c, err, sizeof err);
    CHECK_MSG(st == FS_OK, "%s, %s: %s\n%s", what, targets[i], err, c.log ? c.log : "");
    if (st == FS_OK) {
      CHECK_MSG(c.spill_bytes <= 32 && c.stack_bytes <= 32, "%s, %s: spills %d bytes, stack %d",
                what, targets[i], c.spill_bytes, c.stack_bytes);
      for (int k = 0; k < nk; k++)
        CHECK_MSG(has_symbol(&c, kernels[k]), "%s, %s: kernel %s is missing from the cubin",
                  what, targets[i], kernels[k]);
      printf("%-7s %-7s %zu bytes, %d registers, %d bytes spilled, %d of stack, %.2f s\n", what,
             targets[i], c.size, c.registers, c.spill_bytes, c.stack_bytes, c.seconds);
    }
    fs_cubin_free(&c);
  }
}

int main(void) {
  static const char *const reduce[] = {"fsamp_reduce", "fsamp_finalize", "fsamp_tp_lse",
                                       "fsamp_tp_logprobs"};
  static const char *const bias[] = {"fsamp_bias_prep_bf16", "fsamp_bias_prep_f16",
                                     "fsamp_bias_merge", "fsamp_bias_dedup"};
  static const char *const filter[] = {"fsamp_filter",    "fsamp_filter_bias",
                                       "fsamp_ftp_stats", "fsamp_ftp_round",
                                       "fsamp_ftp_draw",  "fsamp_toplp",
                                       "fsamp_toplp_merge", "fsamp_toplp_ranks",
                                       "fsamp_rank",        "fsamp_zout_drop",
                                       "fsamp_rank_int",    "fsamp_tp_place",
                                       "fsamp_target",      "fsamp_target_out",
                                       "fsamp_tp_target_key", "fsamp_tp_target_fin"};
  static const char *const sm90a[] = {"sm_90a", NULL};
  check_module("reduce", FS_REDUCE_TEMPLATE, NULL, all_targets, reduce, 4);
  check_module("bias", FS_BIAS_TEMPLATE, NULL, all_targets, bias, 4);
  check_module("filter", FS_FILTER_TEMPLATE, NULL, all_targets, filter, 16);
  check_module("filter/long", FS_FILTER_TEMPLATE, "#define FT_NO_GATHER 1\n", sm90a, filter, 16);
  /* the modules' own entry points compile the same sources */
  char err[512];
  fs_cubin c;
  CHECK_MSG(fs_bias_compile("sm_90a", &c, err, sizeof err) == FS_OK, "fs_bias_compile: %s", err);
  fs_cubin_free(&c);
  CHECK_MSG(fs_filter_compile("sm_80", &c, err, sizeof err) == FS_OK, "fs_filter_compile: %s",
            err);
  fs_cubin_free(&c);
  return fs_test_done("test_own_compile");
}
