// fs-test-timeout: 600
/*
** test_prune.c: the exact pruning of the per-token noise (perf-notes 22g)
** never changes a draw.
**
**  1. The bound.  For a bound score s, the largest logit zmax of a quad and
**     1/T, every word x > X = fs_prune_word(fs_prune_need(s, zmax, 1/T)) must
**     score fmaf(zmax, 1/T, fs_gumbel_fast(x)) < s, strictly (the bound may
**     be another chunk's token, of a larger or a smaller id), on the GPU with
**     the kernels' own noise.  262,144 cases whose needed noise a = s - zmax/T
**     spans [-4, 26] (X from saturated to tiny): 1/T in {0.5, 1, 2, 20, 33.3}
**     and scores up to +-2000, an eighth at 1/T = 1000 and scores up to 1e6
**     (the margin's relative part); the 32 smallest words above X (where the
**     bound is tightest) and 32 random ones, and word 0 (the largest noise)
**     where the kernels skip a quad before its Philox call (t > CAP); special
**     cases: zmax NaN (X = 0), +inf (X = 0xffffffff), -inf (X = 0).  It
**     reports how much noise the bound gives away, and proves it can fail:
**     half the bound (X / 2) must let a winner be skipped.
**  2. The kernels.  wg variants (cooperative and overlapped epilogues, a
**     clustered ones, the 16-column tile) sample the same heads in
**     a context with pruning (the default) and one created under FS_PRUNE=0:
**     tokens, keys and logits must be equal bit for bit, over 250 rows (a
**     partial last batch tile), per-row temperatures from 0.05 to 2, greedy
**     rows and T = inf, logits of standard deviation 1 (the noise prunes by
**     its words) and 12 (whole quads skip before their Philox call), an
**     unaligned vocab_offset (two Philox quads per quad of rows), rows 3 (all
**     logits NaN), 4 and 6 (one +inf, one -inf logit) and a NaN logit at
**     token 7 of every other row (0 x inf), and calls back to back (the bounds
**     must reset).  That each variant's pruning ran is shown by the chunks'
**     candidates: some must differ between the two contexts (a chunk whose
**     tokens all lost to another chunk's bound keeps a lesser one); and the
**     bounds must read 0 after every call.
*/
#include "fs_test.h"
#include "gpu_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER 64 /* words checked per case (the kernel's literal 64) */

static const char prune_src[] =
    "#include \"fs_rng.h\"\n"
    "extern \"C\" __global__ void prune(const float *s, const float *zmax, const float *inv_t,\n"
    "    const unsigned *r, unsigned *X, float *sc, int n, int half) {\n"
    "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  const float t = fs_prune_need(s[i], zmax[i], inv_t[i]);\n"
    "  const bool all = t > FS_GUMBEL_CAP; /* the kernels skip every word, before Philox */\n"
    "  unsigned b = all ? 0u : fs_prune_word(t);\n"
    "  if (half) b >>= 1;\n"
    "  X[i] = b;\n"
    "  const unsigned room = 0xffffffffu - b; /* words above b */\n"
    "  for (int j = 0; j < 64; j++) {\n"
    "    if (room == 0u) { sc[i * 64 + j] = 0.0f; continue; } /* nothing skipped */\n"
    "    const unsigned up = j < 32 ? ((unsigned)j < room ? (unsigned)j : room - 1u)\n"
    "                               : r[i * 64 + j] % room;\n"
    "    const unsigned x = b + 1u + up; /* in (b, 0xffffffff] */\n"
    "    sc[i * 64 + j] = fmaf(zmax[i], inv_t[i], fs_gumbel_fast(x));\n"
    "  }\n"
    "  if (all && !half) sc[i * 64] = fmaf(zmax[i], inv_t[i], fs_gumbel_fast(0u)); /* word 0 */\n"
    "}\n";

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uni(void) { /* [0, 1) */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* Runs the kernel over the n cases; returns the number of (case, word)
** pairs that were skipped (x > X) yet do not score below s. */
static long violations(fs_context *ctx, CUfunction fn, int n, int half, const float *s,
                       const float *zmax, unsigned *X, float *sc, CUdeviceptr *d, long *checked) {
  const fs_cu_api *cu = ctx->cu;
  void *args[] = {&d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &n, &half};
  gu_poison(ctx, d[5], (size_t)n * PER * sizeof *sc);
  GU_CU(ctx, cu->cuLaunchKernel(fn, (unsigned)((n + 127) / 128), 1, 1, 128, 1, 1, 0, NULL, args,
                                NULL));
  gu_download(ctx, X, d[4], (size_t)n * sizeof *X);
  gu_download(ctx, sc, d[5], (size_t)n * PER * sizeof *sc);
  long bad = 0;
  *checked = 0;
  for (int i = 0; i < n; i++) {
    if (X[i] == 0xffffffffu || zmax[i] != zmax[i]) continue; /* nothing skipped / NaN logits */
    for (int j = 0; j < PER; j++) {
      (*checked)++;
      if (!(sc[(size_t)i * PER + j] < s[i])) {
        if (bad++ < 3 && !half)
          fprintf(stderr, "case %d: s=%.9g zmax=%.9g X=0x%08x word %d scores %.9g >= s\n", i,
                  (double)s[i], (double)zmax[i], X[i], j, (double)sc[(size_t)i * PER + j]);
      }
    }
  }
  return bad;
}

static void test_bound(fs_context *ctx) {
  const int n = 1 << 18;
  static const float inv_ts[] = {0.5f, 1.0f, 2.0f, 20.0f, 33.333332f, 1000.0f};
  float *s = gu_malloc((size_t)n * 4), *zmax = gu_malloc((size_t)n * 4),
        *inv_t = gu_malloc((size_t)n * 4), *sc = gu_malloc((size_t)n * PER * 4);
  unsigned *r = gu_malloc((size_t)n * PER * 4), *X = gu_malloc((size_t)n * 4);
  for (int i = 0; i < n; i++) {
    const int big = i % 8 == 7; /* large scores and 1/T: the margin's relative part */
    const float it = big ? inv_ts[5] : inv_ts[i % 5];
    const double a = -4.0 + 30.0 * uni(); /* the noise needed to win */
    const double sv = (big ? 1e6 : i & 1 ? 40.0 : 2000.0) * (2.0 * uni() - 1.0);
    s[i] = (float)sv;
    zmax[i] = (float)((sv - a) / it);
    inv_t[i] = it;
  }
  zmax[0] = NAN;
  zmax[1] = INFINITY;
  s[2] = 0.0f, zmax[2] = -INFINITY; /* e^-inf: everything above word 0 skipped */
  for (size_t i = 0; i < (size_t)n * PER; i++) r[i] = (unsigned)(uni() * 4294967296.0);

  CUmodule mod;
  const CUfunction fn = gu_test_kernel(ctx, "test_prune", prune_src, "prune", &mod);
  CUdeviceptr d[6] = {gu_upload_new(ctx, s, (size_t)n * 4), gu_upload_new(ctx, zmax, (size_t)n * 4),
                      gu_upload_new(ctx, inv_t, (size_t)n * 4),
                      gu_upload_new(ctx, r, (size_t)n * PER * 4), gu_alloc(ctx, (size_t)n * 4),
                      gu_alloc(ctx, (size_t)n * PER * 4)};

  long checked;
  const long bad = violations(ctx, fn, n, 0, s, zmax, X, sc, d, &checked);
  int saturated = 0;
  double slack = 0.0; /* how far below a the noise of word X + 1 stays, at most */
  for (int i = 3; i < n; i++) {
    if (X[i] == 0xffffffffu) {
      saturated++;
      continue;
    }
    const double a = (double)s[i] - (double)zmax[i] * (double)inv_t[i];
    const double g = -log(-log1p(-(double)fs_uniform_small(X[i] + 1u)));
    /* a in [8, 15]: where E >= v is tight (v <= e^-8) and X > 2^10 (a word's
    ** noise steps are fine); scores up to 2000 (the large ones' margin is
    ** larger by design) */
    if (i % 8 != 7 && a >= 8.0 && a <= 15.0 && a - g > slack) slack = a - g;
  }
  printf("1. bound: %ld skipped (case, word) pairs checked, %ld scored at or above the bound; "
         "%d of %d cases skip nothing; the bound gives away at most %.3g of noise "
         "(needs of 8 to 15)\n", checked, bad, saturated, n, slack);
  CHECK_MSG(bad == 0, "%ld skipped words could have won", bad);
  CHECK_MSG(checked > (long)n * PER / 2, "too few cases exercised the bound (%ld)", checked);
  CHECK_MSG(X[0] == 0u && X[1] == 0xffffffffu && X[2] == 0u,
            "special cases: NaN zmax X=0x%08x (want 0), +inf X=0x%08x (want 0xffffffff), "
            "-inf X=0x%08x (want 0)", X[0], X[1], X[2]);
  CHECK_MSG(slack < 4e-3, "the bound is loose: a word's noise up to %.3g below the need", slack);

  long checked_half;
  const long bad_half = violations(ctx, fn, n, 1, s, zmax, X, sc, d, &checked_half);
  printf("   half the bound (must fail): %ld of %ld skipped words score at or above it\n",
         bad_half, checked_half);
  CHECK_MSG(bad_half > 0, "half the bound skipped no winner: the test has no teeth");

  for (int i = 0; i < 6; i++) gu_free(ctx, d[i]);
  ctx->cu->cuModuleUnload(mod);
  gu_pop(ctx);
  free(s), free(zmax), free(inv_t), free(sc), free(r), free(X);
}

/* ---- 2. the kernels with and without pruning ------------------------------- */

#define KB 250        /* rows: the last batch tile of every variant below is partial */
#define KD 256        /* hidden size */
#define KV 60013      /* vocabulary (not a multiple of 4 or 16) */
#define KCALLS 3

/* The candidates' keys of ctx's last call (B * G of them, sample 0) and
** whether its bounds all read 0. */
static void workspace_state(fs_context *ctx, const fs_problem *p, uint64_t *cand, size_t ncand,
                            int *bounds_zero) {
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  gu_pop(ctx);
  gu_download(ctx, cand, ctx->workspace + FS_HEAD_BYTES, ncand * 8);
  uint64_t *bd = gu_malloc((size_t)p->batch * 8);
  gu_download(ctx, bd, ctx->workspace + FS_COUNTER_BYTES, (size_t)p->batch * 8);
  *bounds_zero = 1;
  for (int b = 0; b < p->batch; b++) *bounds_zero &= bd[b] == 0;
  free(bd);
}

/* One variant on one head, in cp (pruning) and cn (FS_PRUNE=0): returns the
** number of candidates that differ between the pruned and the unpruned calls
** (0 if any output differed). */
static long compare_head(fs_context *cp, fs_context *cn, const char *variant, double sigma,
                         int64_t off, const float *temps) {
  char what[256];
  snprintf(what, sizeof what, "%s sigma=%g vocab_offset=%lld", variant, sigma, (long long)off);
  gu_lmhead lm;
  gu_lmhead_init(&lm, KB, KD, KV, FS_DTYPE_BF16, off, 0, 0, gu_w_scale(KD, sigma),
                 0x5eed0000ull + (unsigned long long)(sigma * 10));
  /* special logits: W row 7 is +inf at k = 0 and 0 elsewhere, H's column 0 is 0
  ** but for rows 4 (+1: logit +inf) and 6 (-1: -inf), both sampled, so every
  ** other row has a NaN logit at token 7 (0 x inf); row 3 of H is NaN (all its
  ** logits NaN) */
  for (int k = 0; k < KD; k++) lm.W[7 * lm.ws + k] = gu_encode(FS_DTYPE_BF16, 0.0f);
  lm.W[7 * lm.ws] = gu_encode(FS_DTYPE_BF16, INFINITY);
  for (int b = 0; b < KB; b++)
    lm.H[b * lm.hs] = gu_encode(FS_DTYPE_BF16, b == 4 ? 1.0f : b == 6 ? -1.0f : 0.0f);
  for (int k = 0; k < KD; k++) lm.H[3 * lm.hs + k] = gu_encode(FS_DTYPE_BF16, NAN);
  gu_lmhead_upload(cp, &lm);
  const fs_problem p = gu_problem(&lm, 1);
  CUdeviceptr dT = gu_upload_new(cp, temps, KB * sizeof(float));
  gu_outputs op, on;
  gu_outputs_alloc(cp, &op, KB, 1, 1);
  gu_outputs_alloc(cp, &on, KB, 1, 1);
  long differ = 0, bad = 0;
  int zero_p = 1, zero_n = 1;
  for (int call = 0; call < KCALLS; call++) {
    fs_sampling s;
    memset(&s, 0, sizeof s);
    s.temperatures = (const float *)gu_ptr(dT);
    s.num_samples = 1;
    s.seed = 1234567ull + (unsigned long long)call;
    s.offset = 77ull * (unsigned long long)call;
    if (gu_sample_fetch(cp, &p, &s, &op, NULL, what) != FS_OK ||
        gu_sample_fetch(cn, &p, &s, &on, NULL, what) != FS_OK)
      break;
    for (int b = 0; b < KB; b++)
      if (op.h_tokens[b] != on.h_tokens[b] || op.h_keys[b] != on.h_keys[b] ||
          gu_float_bits(op.h_logits[b]) != gu_float_bits(on.h_logits[b])) {
        if (bad++ < 5)
          fprintf(stderr, "%s call %d row %d (T=%g): pruned token %d key %016llx, unpruned "
                  "token %d key %016llx\n", what, call, b, (double)temps[b], op.h_tokens[b],
                  (unsigned long long)op.h_keys[b], on.h_tokens[b],
                  (unsigned long long)on.h_keys[b]);
      }
    const size_t ncand = (size_t)KB * fs_num_chunks(cp, cp->plans->kernel[0], KB, KV);
    uint64_t *c1 = gu_malloc(ncand * 8), *c2 = gu_malloc(ncand * 8);
    int z1, z2;
    workspace_state(cp, &p, c1, ncand, &z1);
    workspace_state(cn, &p, c2, ncand, &z2);
    for (size_t i = 0; i < ncand; i++) differ += c1[i] != c2[i];
    zero_p &= z1;
    zero_n &= z2;
    free(c1);
    free(c2);
  }
  printf("2. %s: %d rows x %d calls equal%s; %ld chunk candidates differ (pruned chunks)\n",
         what, KB, KCALLS, bad ? " NOT" : "", differ);
  CHECK_MSG(bad == 0, "%s: %ld rows differ with and without pruning", what, bad);
  CHECK_MSG(zero_p && zero_n, "%s: the bounds are not 0 after a call (pruned %d, unpruned %d)",
            what, zero_p, zero_n);
  gu_free(cp, dT);
  gu_outputs_free(cp, &op);
  gu_outputs_free(cp, &on);
  gu_lmhead_free(cp, &lm);
  return bad ? 0 : differ;
}

/* Both heads on one variant (forced by FS_VARIANT), in a context with
** pruning and one created under FS_PRUNE=0. */
static void compare_variant(const char *variant, const float *temps) {
  setenv("FS_VARIANT", variant, 1);
  unsetenv("FS_PRUNE");
  fs_context *cp = NULL, *cn = NULL;
  REQUIRE(fs_context_create(0, &cp) == FS_OK);
  setenv("FS_PRUNE", "0", 1);
  REQUIRE(fs_context_create(0, &cn) == FS_OK);
  unsetenv("FS_PRUNE");
  const long differ = compare_head(cp, cn, variant, 1.0, 0, temps) +
                      compare_head(cp, cn, variant, 12.0, 1000002, temps);
  CHECK_MSG(differ > 0, "%s: no chunk candidate differed: its pruning never ran", variant);
  fs_context_destroy(cp);
  fs_context_destroy(cn);
  unsetenv("FS_VARIANT");
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  setenv("FS_TUNING_DB", "off", 1);
  test_bound(ctx);
  if (fs_target_arch(ctx->arch) != 90) {
    printf("2. skipped: the wg family (wgmma) needs sm_90a, this GPU is sm_%d\n", ctx->arch);
    fs_context_destroy(ctx);
    return fs_test_done("test_prune");
  }
  float temps[KB];
  static const float tv[] = {1.0f, 0.05f, 0.3f, 2.0f, 0.7f, 0.0f, 1.0f, INFINITY};
  for (int b = 0; b < KB; b++) temps[b] = tv[b % 8];
  static const char *const variants[] = {
      "fsamp_bf16_sm90a_wg_v128_b256_k64_g2_s4_c1_co_e64",
      "fsamp_bf16_sm90a_wg_v128_b128_k64_g2_s4_c1_ov_e128",
      "fsamp_bf16_sm90a_wg_v128_b128_k64_g2_s4_c2_co_e64",
      "fsamp_bf16_sm90a_wg_v128_b16_k128_g1_s4_c1_co_e128",
      "fsamp_bf16_sm90a_wg_v128_b128_k64_g2_s4_c2_ov_e128",
  };
  for (size_t i = 0; i < sizeof variants / sizeof *variants; i++)
    compare_variant(variants[i], temps);
  fs_context_destroy(ctx);
  return fs_test_done("test_prune");
}
