/*
** gpu_family.h: FS_TEST_FAMILY=<family> runs a GPU test's cases on one
** kernel family instead of the built-in defaults (tests/CMakeLists.txt
** registers pathwise and distribution once more for each family that the
** defaults do not cover).  Per case the family's variant for the case's
** dtype whose batch tile is nearest the case's B (ties: the first in the
** generator's order) is forced through FS_VARIANT (read when a shape is
** prepared, so it stays set until gu_family_release) in a fresh context.
** FS_TEST_MATCH=<substring> narrows the family to names containing it (for
** example "_c2": the clustered wgmma variants).  A family with no such
** variant for this GPU's architecture skips the test (exit 77) with the
** reason.
*/
#ifndef FS_GPU_FAMILY_H
#define FS_GPU_FAMILY_H

#include "gen.h"
#include "gpu_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The family under test, or NULL (the defaults). */
static inline const char *gu_test_family(void) {
  const char *f = getenv("FS_TEST_FAMILY");
  return f && *f ? f : NULL;
}

/* A context that runs (dtype, B) on the family under test, or `base` when
** no family is set.  Destroy it with gu_family_release. */
static inline fs_context *gu_family_context(fs_context *base, int dtype, int B) {
  const char *fam = gu_test_family();
  if (!fam) return base;
  char err[768];
  fs_gen *g = NULL;
  fs_variant *list = NULL;
  int n = 0;
  const int arch = fs_target_arch(base->arch);
  if (fs_gen_open(&g, err, sizeof err) ||
      fs_gen_enumerate(g, arch, dtype, &list, &n, err, sizeof err)) {
    fprintf(stderr, "FS_TEST_FAMILY=%s: the generator failed: %s\n", fam, err);
    exit(1);
  }
  const char *match = getenv("FS_TEST_MATCH");
  int best = -1;
  double bd = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(list[i].family, fam) || (match && !strstr(list[i].name, match))) continue;
    const double d = fabs(log2((double)list[i].tile_b) - log2((double)B));
    if (best < 0 || d < bd) best = i, bd = d;
  }
  if (best < 0) {
    printf("SKIP: FS_TEST_FAMILY=%s%s%s: no %s variant for sm_%d\n", fam,
           match ? " FS_TEST_MATCH=" : "", match ? match : "", gu_dtype_name(dtype), arch);
    exit(77);
  }
  setenv("FS_VARIANT", list[best].name, 1);
  printf("family %s: B=%d %s -> %s\n", fam, B, gu_dtype_name(dtype), list[best].name);
  free(list);
  fs_gen_close(g);
  fs_context *c = NULL;
  int st = fs_context_create(0, &c);
  if (st != FS_OK) {
    fprintf(stderr, "fs_context_create: %s\n", fs_last_error(NULL));
    exit(1);
  }
  return c;
}

static inline void gu_family_release(fs_context *base, fs_context *c) {
  if (c == base) return;
  fs_context_destroy(c);
  unsetenv("FS_VARIANT");
}

/* The main loop of the options' tests (test_logprobs, test_softcap,
** test_bias): each(c, B, dtype) for bf16 and fp16 and every B of
** batches[0 .. n), c the family's context for (dtype, B), or base itself
** when no family is set. */
static inline void gu_family_each(fs_context *base, const int *batches, int n,
                                  void (*each)(fs_context *c, int B, int dtype)) {
  for (int dt = 0; dt < 2; dt++) {
    const int dtype = dt ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    for (int bi = 0; bi < n; bi++) {
      fs_context *c = gu_family_context(base, dtype, batches[bi]);
      each(c, batches[bi], dtype);
      gu_family_release(base, c);
    }
  }
}

#endif
