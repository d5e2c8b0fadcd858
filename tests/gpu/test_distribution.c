// fs-test-timeout: 300
/*
** test_distribution.c: the GPU's tokens follow softmax(z / T) (issue 2, "How
** it is tested", distribution).
**
** A Pearson chi-square goodness-of-fit test (tests/fs_stats.h) of 2^20 =
** 1,048,576 GPU samples per case against the exact probabilities, at
** T = 0.5, 1 and 2 (bf16, scalar seed) and T = 1 in fp16 with per-row seeds
** and a non-zero vocab_offset.  V = 1000, D = 64.  The logits z are formed by
** this test in double from the same bf16/fp16 bits the GPU reads; the three
** bf16 cases share one head, so only T changes.  W is scaled so that
** sd(z) ~ 1: at T = 0.5 the top token has 3.8% of the mass and 965 bins keep
** an expected count >= 5 (the rest are pooled); at T = 2 the law is close to
** flat (top token 0.35%); no case is dominated by one token.
**
** The 2^20 samples come cheaply: the same H row in all B = 64 rows (with a
** scalar seed the row index enters the Philox counter; with per-row seeds
** every row gets its own seed, so rows are independent either way), 1024
** samples per row, 16 calls with different offsets.  Every seed is fixed, so
** the p-values are fixed numbers: the test is deterministic.  Running this
** exact procedure with the CPU reference in place of the GPU (which must
** agree with it draw for draw but for rare fp32 near-ties) gives p = 0.057,
** 0.51, 0.66 (bf16 T = 0.5, 1, 2) and 0.27 (fp16): the GPU should print the
** same or nearly the same values.
**
** Each case must pass at p > 1e-3 and the SAME counts must fail (p < 1e-6)
** against softmax(z / (1.05 T)), a temperature 5% off.  Power: the
** statistic then has noncentrality lambda = N sum (p - q)^2 / q, printed per
** case with the approximate probability of p < 1e-6 (fs_stats_power).  With
** these logits lambda = 5330, 2096, 581 and 2788; the weakest case, T = 2,
** has a statistic of mean dof + lambda ~ 1580 and sd ~ 66 against a 1e-6
** critical value of ~1226: 5.4 sd away, power 1 - O(1e-7).  (The reference
** stand-in gives p = 0, 5e-198, 2e-23 and 1e-321 for the wrong law.)  The
** test also CHECKs that the computed power is above 0.999.  A greedy call
** (T = 0) must give the argmax in every row and sample.
**
** Runtime on an H200: two NVRTC compiles plus 65 launches of ~65M noise
** draws each: a few seconds; the host work is counting 4M tokens.
*/
#include "fs_stats.h"
#include "gpu_family.h"
#include "gpu_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DV 1000
#define DD 64
#define DB 64
#define DS 1024
#define DCALLS 16
#define WRONG_FACTOR 1.05
#define SIGMA_Z 1.0

typedef struct dist_case {
  const char *name;
  int dtype;
  float T;
  int per_row_seeds;
  int64_t vocab_offset;
} dist_case;

static const dist_case cases[] = {
    {"bf16 T=0.5", FS_DTYPE_BF16, 0.5f, 0, 0},
    {"bf16 T=1", FS_DTYPE_BF16, 1.0f, 0, 0},
    {"bf16 T=2", FS_DTYPE_BF16, 2.0f, 0, 0},
    {"fp16 T=1 per-row seeds", FS_DTYPE_FP16, 1.0f, 1, 5000},
};

/* A head whose B rows all hold the same H row. */
static void make_head(fs_context *ctx, gu_lmhead *lm, const dist_case *c) {
  const unsigned long long seed = c->dtype == FS_DTYPE_BF16 ? 0x2000 : 0x2001;
  gu_lmhead_init(lm, DB, DD, DV, c->dtype, c->vocab_offset, 0, 0,
                 gu_w_scale(DD, SIGMA_Z), seed);
  for (int b = 1; b < DB; b++)
    memcpy(lm->H + (size_t)b * DD, lm->H, sizeof(uint16_t) * DD);
  gu_lmhead_upload(ctx, lm);
}

/* Greedy: every row and sample is the argmax of z (the tie bound of
** test_pathwise.c: a top-two gap below it would make the check moot). */
static void check_greedy(fs_context *ctx, const gu_lmhead *lm,
                         const double *z, const double *absz, gu_outputs *o) {
  const fs_problem dp = gu_problem(lm, 1);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = 0.0f;
  s.num_samples = 4;
  s.seed = 99;
  int best = 0, second = -1;
  for (int v = 1; v < DV; v++) {
    if (z[v] > z[best]) {
      second = best;
      best = v;
    } else if (second < 0 || z[v] > z[second]) {
      second = v;
    }
  }
  const double gd = 2.0 * DD / 16777216.0;
  const double tol = gd * (absz[best] + absz[second]) / (1.0 - gd);
  if (z[best] - z[second] <= tol) {
    printf("greedy: top-two gap %.3g within the fp32 bound %.3g, skipped\n",
           z[best] - z[second], tol);
    return;
  }
  gu_outputs_poison(ctx, o);
  if (gu_sample(ctx, &dp, &s, o, NULL, "greedy") != FS_OK) return;
  gu_outputs_fetch(ctx, o);
  long bad = 0;
  for (int i = 0; i < DB * 4; i++) {
    if (o->h_tokens[i] != (int32_t)(lm->vocab_offset + best)) bad++;
  }
  CHECK_MSG(bad == 0, "greedy: %ld of %d draws are not the argmax %lld", bad,
            DB * 4, (long long)(lm->vocab_offset + best));
  printf("greedy: all %d draws are the argmax (gap %.3g)\n", DB * 4,
         z[best] - z[second]);
}

static void run_case(fs_context *ctx, const dist_case *c, int index) {
  gu_lmhead lm;
  make_head(ctx, &lm, c);
  const fs_problem dp = gu_problem(&lm, 1);

  double z[DV], absz[DV], p[DV], q[DV];
  for (int v = 0; v < DV; v++) z[v] = gu_logit(&lm, 0, v, &absz[v]);
  fs_stats_softmax(z, DV, (double)c->T, p);
  fs_stats_softmax(z, DV, (double)c->T * WRONG_FACTOR, q);
  double pmax = 0.0;
  for (int v = 0; v < DV; v++) pmax = p[v] > pmax ? p[v] : pmax;

  uint64_t seeds[DB];
  unsigned long long rs = 0xABCDEFull + (unsigned long long)index;
  for (int b = 0; b < DB; b++) seeds[b] = fs_test_rand(&rs);
  CUdeviceptr d_seeds = gu_upload_new(ctx, seeds, sizeof seeds);

  gu_outputs o;
  gu_outputs_alloc(ctx, &o, (size_t)DB * DS, 0, 0);
  int64_t *counts = calloc(DV, sizeof *counts);
  REQUIRE(counts);
  const long out_of_range =
      gu_count_draws(ctx, &dp, &o, c->T, DS, 0x5EEDF00Dull + (unsigned long long)index,
                     c->per_row_seeds ? d_seeds : 0, DCALLS, c->name, lm.vocab_offset, DV,
                     counts);
  CHECK_MSG(out_of_range == 0, "%s: %ld tokens outside [%lld, %lld)", c->name,
            out_of_range, (long long)lm.vocab_offset,
            (long long)(lm.vocab_offset + DV));

  int64_t N = 0;
  for (int v = 0; v < DV; v++) N += counts[v];
  if (N > 0) {
    const fs_chi2 ok = fs_stats_chi2_gof(counts, p, DV);
    const fs_chi2 bad = fs_stats_chi2_gof(counts, q, DV);
    const double lambda = fs_stats_noncentrality(p, q, DV, (double)N);
    const double power = fs_stats_power((double)bad.dof, lambda, 1e-6);
    printf("%-24s N=%lld (max p %.4f): chi2 %.1f dof %d p=%.4g (worst bin z "
           "%.2f); wrong T*%.2f: chi2 %.1f dof %d p=%.4g; lambda %.0f, "
           "power at 1e-6 %.6f\n", c->name, (long long)N, pmax, ok.stat,
           ok.dof, ok.p, ok.worst_z, WRONG_FACTOR, bad.stat, bad.dof, bad.p,
           lambda, power);
    CHECK_MSG(N >= 1000000, "%s: only %lld samples", c->name, (long long)N);
    CHECK_MSG(ok.impossible == 0, "%s: %lld draws in zero-probability bins",
              c->name, (long long)ok.impossible);
    CHECK_MSG(ok.p > 1e-3, "%s: chi-square rejects softmax(z/T): p=%.4g",
              c->name, ok.p);
    CHECK_MSG(bad.p < 1e-6, "%s: chi-square fails to reject T*%.2f: p=%.4g",
              c->name, WRONG_FACTOR, bad.p);
    CHECK_MSG(power > 0.999, "%s: the test's power against T*%.2f is only %.4f",
              c->name, WRONG_FACTOR, power);
    CHECK_MSG(pmax < 0.2, "%s: the law is dominated by one token (p=%.3f)",
              c->name, pmax);
  }
  if (index == 0) check_greedy(ctx, &lm, z, absz, &o);

  free(counts);
  gu_outputs_free(ctx, &o);
  gu_free(ctx, d_seeds);
  gu_lmhead_free(ctx, &lm);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < ncases; i++) {
    fs_context *c = gu_family_context(ctx, cases[i].dtype, DB);
    run_case(c, &cases[i], i);
    gu_family_release(ctx, c);
  }
  fs_context_destroy(ctx);
  return fs_test_done("test_distribution");
}
