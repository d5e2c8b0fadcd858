/*
** test_noise.c: the kernels' Gumbel noise (fs_gumbel_fast, fs_rng.h) is the
** reference's function of the same 32 random bits within 2^-17.
**
** The kernels evaluate g = -log(-log1p(-v)) with a series for small v and the
** special-function unit's lg2 elsewhere; fs_rng.h derives |error| <= 2^-17.
** This test measures it on the GPU against the exact value (double
** precision, from the same fp32 v) over every region where the error could
** hide: the 65,536 smallest words (the upper tail of g, v near 2^-32, where
** the series alone is used), 65,536 words each side of the switch to the
** direct formula (v = 1/16), the 65,536 largest words (v near 1, the lower
** tail), and 4,194,304 words spread over the whole 32-bit range.  It also
** checks the budget the pathwise test relies on: the kernels' noise within
** 2^-16 of the CPU reference's (fs_gumbel with glibc's logs), and reports
** libdevice's precise version; and it proves it can fail: a naive variant
** (-lg2(1 - v) everywhere, which loses the upper tail) must break the bound.
*/
#include "fs_test.h"
#include "gpu_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define BOUND (1.0 / 131072.0) /* 2^-17 */

static const char noise_src[] =
    "#include \"fs_rng.h\"\n"
    "__device__ __forceinline__ float naive(unsigned x) {\n"
    "  const float v = fs_uniform_small(x);\n"
    "  return -0.69314718f * fs_lg2_approx(-0.69314718f * fs_lg2_approx(1.0f - v));\n"
    "}\n"
    "extern \"C\" __global__ void noise(const unsigned *x, float *g, int n, int mode) {\n"
    "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  g[i] = mode == 0 ? fs_gumbel_fast(x[i]) : mode == 1 ? fs_gumbel(x[i]) : naive(x[i]);\n"
    "}\n";

/* The exact noise of word x: the same fp32 v, then double-precision logs. */
static double exact_gumbel(uint32_t x) {
  const double v = (double)fs_uniform_small(x);
  return -log(-log1p(-v));
}

/* The CPU reference's noise of word x (fs_gumbel, libm's logs), as max_diff's ref. */
static double cpu_gumbel(uint32_t x) {
  return (double)fs_gumbel(x);
}

/* Max |g[i] - ref(x[i])| over the n words; *worst is the word where it occurs. */
static double max_diff(const float *g, const uint32_t *x, int n, double (*ref)(uint32_t),
                       uint32_t *worst) {
  double m = 0.0;
  *worst = 0;
  for (int i = 0; i < n; i++) {
    const double e = fabs((double)g[i] - ref(x[i]));
    if (!(e <= m)) { /* NaN and inf count as the largest difference */
      m = isfinite(e) ? e : INFINITY;
      *worst = x[i];
    }
  }
  return m;
}

/* Max |g(x) - exact| over the words, for one mode of the kernel (its
** results left in g); *worst is the word where it occurs. */
static double max_error(fs_context *ctx, CUfunction fn, CUdeviceptr dx, CUdeviceptr dg,
                        const uint32_t *x, float *g, int n, int mode, uint32_t *worst) {
  const fs_cu_api *cu = ctx->cu;
  void *args[] = {&dx, &dg, &n, &mode};
  gu_poison(ctx, dg, (size_t)n * sizeof *g); /* a launch that writes nothing must not pass */
  GU_CU(ctx, cu->cuLaunchKernel(fn, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, args,
                                NULL));
  gu_download(ctx, g, dg, (size_t)n * sizeof *g);
  return max_diff(g, x, n, exact_gumbel, worst);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  const int regions = 4, per = 65536, spread = 1 << 22, n = regions * per + spread;
  uint32_t *x = gu_malloc((size_t)n * sizeof *x);
  float *g = gu_malloc((size_t)n * sizeof *g);
  int k = 0;
  for (int i = 0; i < per; i++) x[k++] = (uint32_t)i;                           /* v ~ 2^-32 */
  for (int i = 0; i < 2 * per; i++) x[k++] = (1u << 28) - (uint32_t)per + (uint32_t)i; /* 1/16 */
  for (int i = 0; i < per; i++) x[k++] = 0xffffffffu - (uint32_t)i;             /* v ~ 1 */
  for (int i = 0; i < spread; i++) x[k++] = (uint32_t)i * 1024u + ((uint32_t)i * 7u & 1023u);

  CUmodule mod;
  const CUfunction fn = gu_test_kernel(ctx, "test_noise", noise_src, "noise", &mod);
  CUdeviceptr dx = gu_upload_new(ctx, x, (size_t)n * sizeof *x), dg = gu_alloc(ctx, (size_t)n * 4);

  uint32_t w;
  const double fast = max_error(ctx, fn, dx, dg, x, g, n, 0, &w);
  printf("fs_gumbel_fast: max |error| %.3g (2^%.2f) at x=0x%08x over %d words; bound 2^-17\n",
         fast, log2(fast), w, n);
  CHECK_MSG(fast <= BOUND, "fs_gumbel_fast errs by %.3g at x=0x%08x (bound %.3g)", fast, w, BOUND);
  const double vs_ref = max_diff(g, x, n, cpu_gumbel, &w); /* g: fs_gumbel_fast's results */
  printf("fs_gumbel_fast against the CPU reference's fs_gumbel: max |difference| %.3g (2^%.2f) "
         "at x=0x%08x; the pathwise tolerance is 2^-16\n", vs_ref, log2(vs_ref), w);
  CHECK_MSG(vs_ref <= 2.0 * BOUND, "the kernels' noise differs from the reference's by %.3g at "
            "x=0x%08x, beyond the pathwise test's noise tolerance 2^-16", vs_ref, w);
  const double precise = max_error(ctx, fn, dx, dg, x, g, n, 1, &w);
  printf("fs_gumbel (libdevice, for comparison): max |error| %.3g (2^%.2f) at x=0x%08x\n",
         precise, log2(precise), w);
  const double naive = max_error(ctx, fn, dx, dg, x, g, n, 2, &w);
  printf("naive -lg2(1 - v) everywhere (must fail): max |error| %.3g at x=0x%08x\n", naive, w);
  CHECK_MSG(naive > BOUND, "the naive noise passed the bound (%.3g): the test has no teeth",
            naive);

  gu_free(ctx, dx);
  gu_free(ctx, dg);
  ctx->cu->cuModuleUnload(mod);
  gu_pop(ctx);
  free(x);
  free(g);
  fs_context_destroy(ctx);
  return fs_test_done("test_noise");
}
