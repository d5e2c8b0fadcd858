// fs-test-timeout: 900
/*
** test_group.c: FS_NOISE_GROUP16 on the GPU (fs_context_set_noise): one
** Gumbel variate per group of 16 global ids and an inverse-CDF pick inside
** the winning group (flashsampling.h).
**
** 1. Pathwise: the GPU draws the CPU reference's token
**    (fs_reference_sample_noise(..., FS_NOISE_GROUP16, ...)) over a table of
**    random problems (B in {1, 5, 64, 300}, D in {64, 4096}, V in {100,
**    40000, 151937}, bf16 and fp16, T in {0.05, 0.5, 1, 2, 0} and per-row
**    temperatures mixing greedy rows, scalar and per-row seeds, vocab_offset
**    0 and multiples of 16 up to the largest legal one, padded strides,
**    num_samples 1 to 1024).  At least 99.9% of the ~45,000 draws must agree,
**    and every draw is explained:
**     - the GPU's token lies in group k; the group's exact score
**       m / T + ln S + g_k (computed here in double from the bf16/fp16 bits)
**       has the tolerance of test_pathwise.c's bound applied to a group:
**       ln sum exp(z / T) moves by at most max_i dz_i / T when every z_i
**       moves by dz_i (dz as in test_pathwise.c), so
**         E = dzmax / T (1 + 2^-23) + 2^-23 (|m| / T + |score|) + 2^-16
**             + 2^-18
**       where 2^-16 is the noise tolerance (fs_gumbel_fast vs fs_gumbel)
**       and 2^-18 the log term: the fp32 sum of at most 16 weights (2^-20
**       relative of S), ex2.approx (2^-22), lg2.approx (2^-21), and the
**       roundings of c2 = log2(e) / T and m c2 (a common shift of the
**       exponents, < 2^-20 after the 2^-23 |m| / T term): the key's score
**       must be within E of the exact group score;
**     - the GPU's token is the exact inverse-CDF pick of its group, or that
**       pick is near a boundary: margin min_i |P_i - u S| / S below
**         2 (dzmax / T) (1 + 2^-20) + 2^-18
**       (the weights' exponents move by at most 2 dzmax / T; ex2 and the
**       fp32 running sums add ~2^-20);
**     - a token different from the reference's is either in another group
**       whose exact score is within E_r + E_g of the reference's winner
**       group (a near-tie of group scores), or in the same group with the
**       reference's pick_margin (fs_reference_row_noise) below the bound
**       above (a pick near the boundary);
**     - greedy rows are token mode's argmax (test_pathwise.c's rule), the
**       same for every sample; the returned logit is the token's exact
**       logit within dz.
**    Under FS_TEST_FAMILY (tests/gpu_family.h) the same cases run on one
**    forced kernel family: the wg family's cooperative and overlapped
**    epilogues fold groups each their own way (B = 64, 300).
** 2. Distribution: 2^20 GPU draws per case (V = 203 at vocab_offset 0 and
**    4096: a partial last group; D = 64; T = 0.5, 1, 2) against
**    softmax(z / T) by chi-square (p > 1e-3), which must reject the same
**    counts against softmax(z / (1.05 T)) and against the law of a sampler
**    that weighs groups by exp(m / T) alone (p < 1e-6 both); the power of
**    each rejection is printed and CHECKed > 0.999 (fs_stats_power).
** 3. Tensor parallelism on one GPU: R = 2 and 3 threads with their own
**    contexts in group mode call fs_sample_tp() on shards of tp_util.h's
**    problem cut at multiples of 16: tokens, keys and logits are bitwise the
**    unsharded group draw.  A shard with vocab_offset % 16 != 0 is refused
**    (FS_INVALID_ARGUMENT naming vocab_offset) by fs_sample and fs_sample_tp.
** 4. fs_context_set_noise: 5 and -1 are FS_INVALID_ARGUMENT and leave the
**    mode as it was; switching back to FS_NOISE_TOKEN gives the token draw
**    again.
** 5. Logits without finite mass (test_special): all-NaN rows and rows of
**    +-inf logits at a partial last group, both noises and T = 0: tokens
**    inside the shard and equal to the reference's.
** Parts 3 and 4 run only without FS_TEST_FAMILY.  Cost: the reference
** (~1.5e10 MACs and ~2e8 weights) and the test's own group evaluations, well
** under a minute of host time, plus a few NVRTC compiles.
*/
#include "fs_reference.h"
#include "fs_stats.h"
#include "gpu_family.h"
#include "gpu_util.h"
#include "pathwise_util.h"
#include "tp_util.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOISE_TOL (1.0 / 65536.0)  /* 2^-16, as in test_pathwise.c */
#define LOG_TOL (1.0 / 262144.0)   /* 2^-18: ex2, fp32 sums, lg2, 1/T and m*c2 roundings */
#define U23 (1.0 / 8388608.0)      /* 2^-23 */
#define U20 (1.0 / 1048576.0)      /* 2^-20 */
#define U18 (1.0 / 262144.0)       /* 2^-18 */
#define MAX_PRINTED 12
#define V_BIG 151937
#define MAXOFF16 ((FS_MAX_VOCAB - V_BIG) & ~15LL)

/* ---- 1. pathwise ------------------------------------------------------------ */

static float mix_temperature(int b) {
  static const float t[7] = {0.5f, 0.0f, 1.0f, -1.0f, 2.0f, NAN, 0.05f};
  return t[b % 7];
}

static const pw_case cases[] = {
    {"b1_d4096_vbig_bf16_t1", 1, 4096, V_BIG, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 1.0f, 0, 3, 2, 0},
    {"b5_d4096_vbig_fp16_t05_off", 5, 4096, V_BIG, FS_DTYPE_FP16, 100000, TEMPS_SCALAR, 0.5f, 1, 3, 1, 0},
    {"b5_d4096_vbig_bf16_mix", 5, 4096, V_BIG, FS_DTYPE_BF16, 0, TEMPS_MIX, 0.0f, 0, 3, 1, 0},
    {"b64_d64_vbig_bf16_t2_s1", 64, 64, V_BIG, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 2.0f, 0, 1, 1, 0},
    {"b300_d64_vbig_fp16_mix_maxoff", 300, 64, V_BIG, FS_DTYPE_FP16, MAXOFF16, TEMPS_MIX, 0.0f, 1, 1, 1, 0},
    {"b64_d64_vbig_fp16_greedy", 64, 64, V_BIG, FS_DTYPE_FP16, 16, TEMPS_SCALAR, 0.0f, 0, 1, 1, 0},
    {"b300_d64_v40000_bf16_t1_s3", 300, 64, 40000, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 1.0f, 0, 3, 2, 0},
    {"b64_d4096_v40000_fp16_t05_strided", 64, 4096, 40000, FS_DTYPE_FP16, 4096, TEMPS_SCALAR, 0.5f, 1, 3, 1, 1},
    {"b5_d4096_v40000_bf16_t005_s1", 5, 4096, 40000, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 0.05f, 0, 1, 2, 0},
    {"b64_d64_v40000_bf16_mix_s1_off", 64, 64, 40000, FS_DTYPE_BF16, 48, TEMPS_MIX, 0.0f, 1, 1, 2, 0},
    {"b300_d64_v40000_fp16_t005_s1", 300, 64, 40000, FS_DTYPE_FP16, 0, TEMPS_SCALAR, 0.05f, 0, 1, 1, 0},
    {"b300_d64_v100_bf16_t1_s32", 300, 64, 100, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 1.0f, 0, 32, 2, 0},
    {"b300_d4096_v100_fp16_t2_off", 300, 4096, 100, FS_DTYPE_FP16, 32, TEMPS_SCALAR, 2.0f, 1, 8, 1, 0},
    {"b64_d4096_v100_bf16_t05", 64, 4096, 100, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 0.5f, 0, 64, 1, 0},
    {"b64_d64_v100_fp16_mix_strided", 64, 64, 100, FS_DTYPE_FP16, 0, TEMPS_MIX, 0.0f, 1, 32, 2, 1},
    {"b5_d64_v100_bf16_t1_off", 5, 64, 100, FS_DTYPE_BF16, 16, TEMPS_SCALAR, 1.0f, 0, 1024, 1, 0},
    {"b1_d4096_v100_fp16_t005", 1, 4096, 100, FS_DTYPE_FP16, 0, TEMPS_SCALAR, 0.05f, 0, 1024, 1, 0},
    {"b300_d64_v100_fp16_greedy", 300, 64, 100, FS_DTYPE_FP16, 0, TEMPS_SCALAR, 0.0f, 0, 1, 1, 0},
    {"b64_d64_v100_bf16_t1_s1", 64, 64, 100, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 1.0f, 0, 1, 3, 0},
    {"b300_d64_v100_bf16_t2_s1", 300, 64, 100, FS_DTYPE_BF16, 64, TEMPS_SCALAR, 2.0f, 1, 1, 3, 0},
};

static long g_draws, g_mismatches, g_ties, g_boundary, g_printed;
static double g_ref_seconds;

/* One group of one (row, sample), exactly, with its tolerances. */
typedef struct grp {
  int64_t k;            /* group index: global ids [16k, 16k + 16) */
  int lo, hi;           /* its local tokens [lo, hi) */
  double z[16], dz[16]; /* logits and their bounds */
  double score, tol;    /* m / T + ln S + g and its tolerance E */
  int pick;             /* local index of the exact pick */
  double margin;        /* min over i < n - 1 of |P_i - u S| / S */
  double pick_tol;      /* 2 (dzmax / T)(1 + 2^-20) + 2^-18 */
} grp;

static void group_eval(const gu_lmhead *lm, const pw_row_params *rp, int b, int s,
                       int64_t k, grp *g) {
  const int64_t voff = lm->vocab_offset;
  g->k = k;
  g->lo = (int)(16 * k > voff ? 16 * k - voff : 0);
  g->hi = (int)(16 * k + 16 < voff + lm->V ? 16 * k + 16 - voff : lm->V);
  const int n = g->hi - g->lo;
  double m = -INFINITY, dzmax = 0.0;
  for (int i = 0; i < n; i++) {
    double a;
    g->z[i] = gu_logit(lm, b, g->lo + i, &a);
    g->dz[i] = pw_dz(lm->D, a);
    if (g->z[i] > m) m = g->z[i];
    if (g->dz[i] > dzmax) dzmax = g->dz[i];
  }
  const fs_philox_out r = fs_noise_group(rp->seed, rp->offset, (uint32_t)k, (uint32_t)s, rp->tag);
  const double gum = (double)fs_gumbel(r.v[0]), u = (double)fs_group_uniform(r.v[1]);
  double P[16], S = 0.0;
  for (int i = 0; i < n; i++) {
    S += exp((g->z[i] - m) / rp->T);
    P[i] = S;
  }
  g->pick = -1;
  g->margin = INFINITY;
  for (int i = 0; i < n; i++) {
    if (g->pick < 0 && P[i] > u * S) g->pick = g->lo + i;
    if (i < n - 1 && fabs(P[i] - u * S) / S < g->margin) g->margin = fabs(P[i] - u * S) / S;
  }
  if (g->pick < 0) g->pick = g->hi - 1;
  g->score = m / rp->T + log(S) + gum;
  g->tol = dzmax / rp->T * (1.0 + U23) + U23 * (fabs(m) / rp->T + fabs(g->score)) +
           NOISE_TOL + LOG_TOL;
  g->pick_tol = 2.0 * (dzmax / rp->T) * (1.0 + U20) + U18;
}

static int64_t group_of(int64_t token) { return token / 16; }

/* A greedy row's token score (z) and tolerance (dz). */
static double greedy_score(const gu_lmhead *lm, int b, int v, double *tol) {
  double a;
  const double z = gu_logit(lm, b, v, &a);
  *tol = pw_dz(lm->D, a);
  return z;
}

static void compare(const pw_case *c, const gu_lmhead *lm, const fs_sampling *hs,
                    const gu_outputs *o, const int32_t *ref, int call, long *draws,
                    long *mismatches) {
  const int B = c->B, S = c->S;
  const fs_problem hp = gu_problem(lm, 0);
  const int64_t voff = lm->vocab_offset;
  grp G, R;
  for (int b = 0; b < B; b++) {
    const pw_row_params rp = pw_row_of(hs, b);
    for (int s = 0; s < S; s++) {
      const size_t i = (size_t)b * S + (size_t)s;
      const int32_t gt = o->h_tokens[i], rt = ref[i];
      const float glogit = o->h_logits[i];
      const uint64_t gkey = o->h_keys[i];
      if (rp.greedy && s > 0) {
        const size_t i0 = (size_t)b * S;
        CHECK_MSG(gt == o->h_tokens[i0] && gkey == o->h_keys[i0],
                  "%s call %d row %d (greedy): sample %d token %d, sample 0 token %d",
                  c->name, call, b, s, (int)gt, (int)o->h_tokens[i0]);
        continue;
      }
      (*draws)++;
      if (gt < voff || gt >= voff + lm->V || rt < voff || rt >= voff + lm->V) {
        CHECK_MSG(0, "%s call %d row %d sample %d: token %d (reference %d) outside "
                  "[%lld, %lld)", c->name, call, b, s, (int)gt, (int)rt, (long long)voff,
                  (long long)(voff + lm->V));
        (*mismatches)++;
        continue;
      }
      const int gv = (int)(gt - voff), rv = (int)(rt - voff);
      CHECK_MSG(fs_key_token(gkey) == (uint32_t)gt, "%s call %d row %d sample %d: key "
                "%016llx decodes to %u, tokens[] has %d", c->name, call, b, s,
                (unsigned long long)gkey, (unsigned)fs_key_token(gkey), (int)gt);
      if (rp.greedy) {
        double eg, er;
        const double sg = greedy_score(lm, b, gv, &eg);
        CHECK_MSG(fabs((double)glogit - sg) <= eg && fabs((double)fs_key_score(gkey) - sg) <= eg,
                  "%s call %d row %d (greedy): logit %.9g key score %.9g, exact %.9g "
                  "(bound %.3g)", c->name, call, b, (double)glogit,
                  (double)fs_key_score(gkey), sg, eg);
        if (gt == rt) continue;
        (*mismatches)++;
        const double sr = greedy_score(lm, b, rv, &er);
        CHECK_MSG(sr - sg <= er + eg, "%s call %d row %d (greedy): GPU %d (z %.9g), "
                  "reference %d (z %.9g): NOT a near-tie (bound %.3g)", c->name, call, b,
                  (int)gt, sg, (int)rt, sr, er + eg);
        g_ties++;
        continue;
      }
      /* The GPU's token: its group's score (the key), its logit, its pick. */
      group_eval(lm, &rp, b, s, group_of(gt), &G);
      const double zg = G.z[gv - G.lo], dzg = G.dz[gv - G.lo];
      CHECK_MSG(fabs((double)glogit - zg) <= dzg, "%s call %d row %d sample %d token %d: "
                "logit %.9g, exact %.9g (bound %.3g)", c->name, call, b, s, (int)gt,
                (double)glogit, zg, dzg);
      const double kscore = (double)fs_key_score(gkey);
      CHECK_MSG(fabs(kscore - G.score) <= G.tol, "%s call %d row %d sample %d token %d: key "
                "score %.9g, exact group score %.9g: error %.3g > bound %.3g", c->name,
                call, b, s, (int)gt, kscore, G.score, fabs(kscore - G.score), G.tol);
      CHECK_MSG(gv == G.pick || G.margin < G.pick_tol, "%s call %d row %d sample %d: GPU "
                "token %d is not its group's inverse-CDF pick %lld (margin %.3g, bound "
                "%.3g)", c->name, call, b, s, (int)gt, (long long)(voff + G.pick),
                G.margin, G.pick_tol);
      if (gt == rt) continue;
      (*mismatches)++;
      const char *why;
      if (group_of(rt) != group_of(gt)) {
        group_eval(lm, &rp, b, s, group_of(rt), &R);
        const double gap = R.score - G.score;
        CHECK_MSG(gap <= R.tol + G.tol, "%s call %d row %d sample %d: GPU token %d (group "
                  "score %.9g), reference %d (%.9g): gap %.3g exceeds %.3g: NOT a near-tie",
                  c->name, call, b, s, (int)gt, G.score, (int)rt, R.score, gap,
                  R.tol + G.tol);
        CHECK_MSG(gap >= -1e-9 * (1.0 + fabs(R.score)), "%s call %d row %d sample %d: the "
                  "reference's group scores %.17g below the GPU's (%.17g): reference not "
                  "an argmax?", c->name, call, b, s, R.score, G.score);
        g_ties++;
        why = "near-tie of group scores";
      } else {
        fs_ref_result rr;
        const int st = fs_reference_row_noise(&hp, hs, FS_NOISE_GROUP16, b, s, &rr);
        CHECK_MSG(st == FS_OK, "fs_reference_row_noise: %s", fs_last_error(NULL));
        CHECK_MSG(st != FS_OK || (rr.token == rt && rr.pick_margin < G.pick_tol),
                  "%s call %d row %d sample %d: GPU token %d, reference %d in the same "
                  "group: pick margin %.3g is not below %.3g: NOT a boundary pick", c->name,
                  call, b, s, (int)gt, (int)rt, st == FS_OK ? rr.pick_margin : NAN,
                  G.pick_tol);
        g_boundary++;
        why = "pick near a boundary";
      }
      if (g_printed++ < MAX_PRINTED)
        printf("  mismatch %s call %d row %d sample %d: GPU %d, reference %d: %s\n", c->name,
               call, b, s, (int)gt, (int)rt, why);
    }
  }
}

static void run_case(fs_context *ctx, const pw_case *c, int index) {
  const int B = c->B, S = c->S;
  const size_t n = (size_t)B * S;
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_GROUP16) == FS_OK);
  gu_lmhead lm;
  pw_head_init(ctx, &lm, c, 0x67520000ull + (unsigned long long)index);
  const fs_problem dp = gu_problem(&lm, 1), hp = gu_problem(&lm, 0);
  pw_rows rows;
  pw_rows_init(ctx, &rows, B, mix_temperature);
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, n, 1, 1);
  int32_t *ref = gu_malloc(sizeof(int32_t) * n);
  long draws = 0, mismatches = 0;
  double t_ref = 0.0;
  unsigned long long rs = 0x67C0FFEEull * (unsigned long long)(index + 1);
  for (int call = 0; call < c->calls; call++) {
    fs_sampling hs, ds;
    pw_call_sampling(ctx, c, index, call, &rows, &rs, &hs, &ds);
    char what[160];
    snprintf(what, sizeof what, "%s call %d", c->name, call);
    if (gu_sample_fetch(ctx, &dp, &ds, &o, NULL, what) != FS_OK) break;
    const double r0 = gu_now();
    const int st = fs_reference_sample_noise(&hp, &hs, FS_NOISE_GROUP16, ref, NULL, NULL);
    t_ref += gu_now() - r0;
    CHECK_MSG(st == FS_OK, "%s: fs_reference_sample_noise: %s", what, fs_last_error(NULL));
    if (st != FS_OK) break;
    compare(c, &lm, &hs, &o, ref, call, &draws, &mismatches);
  }
  printf("%-34s B=%-3d D=%-4d V=%-6d %s S=%-4d calls=%d off=%-10lld: %6ld draws, %ld "
         "mismatches; ref %.1f s\n", c->name, B, c->D, c->V, gu_dtype_name(c->dtype), S,
         c->calls, (long long)c->vocab_offset, draws, mismatches, t_ref);
  fflush(stdout);
  g_draws += draws;
  g_mismatches += mismatches;
  g_ref_seconds += t_ref;
  free(ref);
  gu_outputs_free(ctx, &o);
  pw_rows_free(ctx, &rows);
  gu_lmhead_free(ctx, &lm);
}

static void test_pathwise(fs_context *ctx) {
  const double t0 = gu_now();
  pw_run_cases(ctx, cases, (int)(sizeof cases / sizeof cases[0]), run_case);
  const double agree = g_draws ? 1.0 - (double)g_mismatches / (double)g_draws : 0.0;
  printf("pathwise (group): %ld draws, %ld mismatches (%ld near-ties of group scores or "
         "greedy logits, %ld picks near a boundary), agreement %.5f%% (need >= 99.9%%); "
         "reference %.1f s, total %.1f s\n", g_draws, g_mismatches, g_ties, g_boundary,
         100.0 * agree, g_ref_seconds, gu_now() - t0);
  CHECK_MSG(g_draws >= 30000, "only %ld draws were compared", g_draws);
  CHECK_MSG(agree >= 0.999, "agreement %.5f%% is below 99.9%%", 100.0 * agree);
}

/* ---- 2. distribution ------------------------------------------------------------- */

#define DV 203
#define DD 64
#define DB 64
#define DS 1024
#define DCALLS 16

typedef struct dist_case {
  const char *name;
  int dtype;
  float T;
  int per_row_seeds;
  int64_t vocab_offset;
} dist_case;

static const dist_case dcases[] = {
    {"bf16 T=0.5", FS_DTYPE_BF16, 0.5f, 0, 0},
    {"bf16 T=1", FS_DTYPE_BF16, 1.0f, 0, 0},
    {"bf16 T=2", FS_DTYPE_BF16, 2.0f, 0, 0},
    {"fp16 T=1 per-row seeds", FS_DTYPE_FP16, 1.0f, 1, 4096},
};

static void dist_case_run(fs_context *ctx, const dist_case *c, int index) {
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_GROUP16) == FS_OK);
  gu_lmhead lm;
  gu_lmhead_init(&lm, DB, DD, DV, c->dtype, c->vocab_offset, 0, 0, gu_w_scale(DD, 1.0),
                 c->dtype == FS_DTYPE_BF16 ? 0x6700 : 0x6701);
  for (int b = 1; b < DB; b++) memcpy(lm.H + (size_t)b * DD, lm.H, sizeof(uint16_t) * DD);
  gu_lmhead_upload(ctx, &lm);
  const fs_problem dp = gu_problem(&lm, 1);
  double z[DV], p[DV], q[DV], q2[DV];
  for (int v = 0; v < DV; v++) z[v] = gu_logit(&lm, 0, v, NULL);
  fs_stats_softmax(z, DV, (double)c->T, p);
  fs_stats_softmax(z, DV, (double)c->T * 1.05, q);
  fs_stats_max_only_law(z, DV, c->vocab_offset, (double)c->T, q2);
  uint64_t seeds[DB];
  unsigned long long rs = 0x67ABCDEFull + (unsigned long long)index;
  for (int b = 0; b < DB; b++) seeds[b] = fs_test_rand(&rs);
  CUdeviceptr d_seeds = gu_upload_new(ctx, seeds, sizeof seeds);
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, (size_t)DB * DS, 0, 0);
  int64_t counts[DV] = {0};
  char name[64];
  snprintf(name, sizeof name, "distribution %s", c->name);
  const long out_of_range =
      gu_count_draws(ctx, &dp, &o, c->T, DS, 0x67EEDF00Dull + (unsigned long long)index,
                     c->per_row_seeds ? d_seeds : 0, DCALLS, name, lm.vocab_offset, DV, counts);
  CHECK_MSG(out_of_range == 0, "%s: %ld tokens out of range", c->name, out_of_range);
  int64_t N = 0;
  for (int v = 0; v < DV; v++) N += counts[v];
  if (N > 0) {
    const fs_chi2 ok = fs_stats_chi2_gof(counts, p, DV);
    const fs_chi2 bad = fs_stats_chi2_gof(counts, q, DV);
    const fs_chi2 bad2 = fs_stats_chi2_gof(counts, q2, DV);
    const double lam = fs_stats_noncentrality(p, q, DV, (double)N);
    const double lam2 = fs_stats_noncentrality(p, q2, DV, (double)N);
    const double pow1 = fs_stats_power((double)bad.dof, lam, 1e-6);
    const double pow2 = fs_stats_power((double)bad2.dof, lam2, 1e-6);
    printf("group %-24s N=%lld: chi2 %.1f dof %d p=%.4g (worst bin z %.2f); T*1.05: p=%.4g "
           "lambda %.0f power %.6f; max-only groups: p=%.4g lambda %.0f power %.6f\n",
           c->name, (long long)N, ok.stat, ok.dof, ok.p, ok.worst_z, bad.p, lam, pow1,
           bad2.p, lam2, pow2);
    CHECK_MSG(N >= 1000000, "%s: only %lld samples", c->name, (long long)N);
    CHECK_MSG(ok.impossible == 0, "%s: draws in zero-probability bins", c->name);
    CHECK_MSG(ok.p > 1e-3, "%s: chi-square rejects softmax(z/T): p=%.4g", c->name, ok.p);
    CHECK_MSG(bad.p < 1e-6, "%s: fails to reject T*1.05: p=%.4g", c->name, bad.p);
    CHECK_MSG(bad2.p < 1e-6, "%s: fails to reject the max-only law: p=%.4g", c->name, bad2.p);
    CHECK_MSG(pow1 > 0.999 && pow2 > 0.999, "%s: power %.4f / %.4f", c->name, pow1, pow2);
  }
  gu_outputs_free(ctx, &o);
  gu_free(ctx, d_seeds);
  gu_lmhead_free(ctx, &lm);
}

static void test_distribution(fs_context *ctx) {
  const int n = (int)(sizeof dcases / sizeof dcases[0]);
  for (int i = 0; i < n; i++) {
    fs_context *c = gu_family_context(ctx, dcases[i].dtype, DB);
    dist_case_run(c, &dcases[i], i);
    gu_family_release(ctx, c);
  }
}

/* ---- 3. tensor parallelism on one GPU (as test_tp.c) ------------------------------ */

static void *rank_main(void *arg) {
  tp_rank *r = arg;
  r->status = fs_context_set_noise(r->ctx, FS_NOISE_GROUP16);
  if (!r->status) r->status = fs_prepare(r->ctx, &r->p, &r->s);
  if (!r->status)
    r->status = fs_sample_tp(r->ctx, &r->p, &r->s, &r->o, tp_host_allreduce, r, (void *)r->stream);
  if (r->status) snprintf(r->err, sizeof r->err, "%s", fs_last_error(r->ctx));
  gu_sync(r->ctx);
  return NULL;
}

static void test_tp_group(fs_context *ctx) {
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_GROUP16) == FS_OK);
  tp_unsharded u; /* the unsharded group draw */
  tp_unsharded_init(ctx, &u);
  /* Cuts at multiples of 16 (TP_V = 30011: a partial last group). */
  static const int bounds[2][4] = {{0, 16 * 937, TP_V, 0}, {0, 16 * 564, 16 * 1250, TP_V}};
  for (int bi = 0; bi < 2; bi++) {
    const int R = bi + 2;
    const int *start = bounds[bi];
    tp_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.R = R;
    pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
    tp_rank rk[TP_MAXR];
    pthread_t th[TP_MAXR];
    for (int k = 0; k < R; k++) tp_rank_open(&rk[k], &sh, k, &u, start);
    for (int k = 0; k < R; k++) REQUIRE(pthread_create(&th[k], NULL, rank_main, &rk[k]) == 0);
    for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
    int mism = 0;
    for (int k = 0; k < R; k++) {
      char who[48];
      snprintf(who, sizeof who, "group R=%d rank %d", R, k);
      mism += tp_rank_close(&rk[k], &u.ref, who);
    }
    CHECK_MSG(mism == 0, "group R=%d: %d mismatches", R, mism);
    printf("group TP R=%d (shards at multiples of 16): %s\n", R,
           mism ? "MISMATCH" : "tokens, keys and logits equal the unsharded group draw");
    pthread_barrier_destroy(&sh.bar);
  }

  /* The unsharded group draw is the reference's, but for near-ties. */
  int32_t ref[TP_NITEMS];
  float h_temps[TP_B];
  memcpy(h_temps, tp_temps, sizeof h_temps);
  fs_problem hp = {TP_B, TP_D, TP_V, 0, FS_DTYPE_BF16, u.h, 0, u.w, 0};
  fs_sampling hs = u.s;
  hs.temperatures = h_temps;
  REQUIRE(fs_reference_sample_noise(&hp, &hs, FS_NOISE_GROUP16, ref, NULL, NULL) == FS_OK);
  int diff = 0;
  for (int i = 0; i < TP_NITEMS; i++) diff += ref[i] != u.ref.h_tokens[i];
  CHECK_MSG(diff <= 1, "group TP problem: %d of %d unsharded draws differ from the reference",
            diff, TP_NITEMS);

  /* A shard that starts inside a group of 16 is refused. */
  fs_problem bad = {TP_B, TP_D, TP_V - 8, 8, FS_DTYPE_BF16, gu_ptr(u.dh), 0,
                    gu_ptr(u.dw + (CUdeviceptr)8 * TP_D * 2), 0};
  gu_outputs go;
  tp_outputs(ctx, &go);
  const fs_outputs o = gu_outputs_api(&go);
  int st = fs_sample(ctx, &bad, &u.s, &o, NULL);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && strstr(fs_last_error(ctx), "vocab_offset"),
            "fs_sample, group mode, vocab_offset 8: %s: %s", fs_status_string(st),
            fs_last_error(ctx));
  tp_shared one;
  memset(&one, 0, sizeof one);
  one.R = 1;
  pthread_barrier_init(&one.bar, NULL, 1u);
  one.host[0] = gu_malloc(TP_MAXCOUNT * 8);
  tp_rank r0;
  memset(&r0, 0, sizeof r0);
  r0.sh = &one;
  r0.ctx = ctx;
  st = fs_sample_tp(ctx, &bad, &u.s, &o, tp_host_allreduce, &r0, NULL);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && strstr(fs_last_error(ctx), "vocab_offset"),
            "fs_sample_tp, group mode, vocab_offset 8: %s: %s", fs_status_string(st),
            fs_last_error(ctx));
  printf("vocab_offset 8 in group mode: \"%s\"\n", fs_last_error(ctx));
  /* The token mode has no such rule. */
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  st = fs_sample(ctx, &bad, &u.s, &o, NULL);
  CHECK_MSG(st == FS_OK, "fs_sample, token mode, vocab_offset 8: %s", fs_last_error(ctx));
  gu_sync(ctx);
  pthread_barrier_destroy(&one.bar);
  free(one.host[0]);
  gu_outputs_free(ctx, &go);
  tp_unsharded_free(ctx, &u);
}

/* ---- 4. fs_context_set_noise ---------------------------------------------------------- */

static void test_set_noise(fs_context *ctx) {
  gu_lmhead lm;
  gu_lmhead_init(&lm, 8, 64, 1000, FS_DTYPE_BF16, 0, 0, 0, gu_w_scale(64, 2.0), 0x6e6f6973ull);
  gu_lmhead_upload(ctx, &lm);
  const fs_problem dp = gu_problem(&lm, 1);
  fs_sampling s = {1.0f, NULL, 16, 777u, NULL, 3u, NULL};
  gu_outputs tok1, grp1, grp2, tok2;
  gu_outputs_alloc(ctx, &tok1, 8 * 16, 1, 1);
  gu_outputs_alloc(ctx, &grp1, 8 * 16, 1, 1);
  gu_outputs_alloc(ctx, &grp2, 8 * 16, 1, 1);
  gu_outputs_alloc(ctx, &tok2, 8 * 16, 1, 1);
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  gu_sample_fetch(ctx, &dp, &s, &tok1, NULL, "token mode");
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_GROUP16) == FS_OK);
  gu_sample_fetch(ctx, &dp, &s, &grp1, NULL, "group mode");
  static const int bad[] = {5, -1, 2};
  for (int i = 0; i < 3; i++) {
    const int st = fs_context_set_noise(ctx, bad[i]);
    CHECK_MSG(st == FS_INVALID_ARGUMENT && strstr(fs_last_error(ctx), "noise"),
              "fs_context_set_noise(ctx, %d): %s: \"%s\"", bad[i], fs_status_string(st),
              fs_last_error(ctx));
  }
  printf("fs_context_set_noise(ctx, 2): \"%s\"\n", fs_last_error(ctx));
  gu_sample_fetch(ctx, &dp, &s, &grp2, NULL, "group mode after refused values");
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  gu_sample_fetch(ctx, &dp, &s, &tok2, NULL, "token mode again");
  const size_t n = 8 * 16;
  int same = 0;
  for (size_t i = 0; i < n; i++) same += tok1.h_tokens[i] == grp1.h_tokens[i];
  CHECK_MSG(!memcmp(grp1.h_keys, grp2.h_keys, n * 8) && !memcmp(grp1.h_tokens, grp2.h_tokens, n * 4),
            "a refused fs_context_set_noise changed the draw");
  CHECK_MSG(!memcmp(tok1.h_keys, tok2.h_keys, n * 8) && !memcmp(tok1.h_tokens, tok2.h_tokens, n * 4),
            "switching back to FS_NOISE_TOKEN does not give the token draw");
  /* ~1000 tokens of spread mass: the two modes rarely coincide. */
  CHECK_MSG(same < (int)n / 4, "group and token modes agree on %d of %zu draws: is the mode "
            "switch taking effect?", same, n);
  printf("set_noise: token and group draws agree on %d of %zu (independent noise)\n", same, n);
  gu_outputs_free(ctx, &tok1);
  gu_outputs_free(ctx, &grp1);
  gu_outputs_free(ctx, &grp2);
  gu_outputs_free(ctx, &tok2);
  gu_lmhead_free(ctx, &lm);
}

/* ---- 5. logits without finite mass ---------------------------------------------------- */

/* Rows whose logits are all NaN (a NaN in H) and rows of +-inf logits (an
** inf in H; NaN where W's element is 0) beside normal rows, at V = 203 (a
** partial last group) and vocab_offset 0 and 4096, B = 4 and 64, bf16 and
** fp16, at T = 1 in both noises and T = 0: every token lies in
** [vocab_offset, vocab_offset + V) and is the CPU reference's.  (Group mode
** once returned vocab_offset + V for an all-NaN row: the partial group's
** offer past its end, at score -inf, outranked the full groups' NaN.) */
static void test_special(fs_context *base) {
  static const int Bs[2] = {4, 64};
  int ncalls = 0, bad = 0;
  for (int dt = 0; dt < 2; dt++)
    for (int bi = 0; bi < 2; bi++)
      for (int oi = 0; oi < 2; oi++) {
        const int dtype = dt ? FS_DTYPE_FP16 : FS_DTYPE_BF16, B = Bs[bi], D = 64, V = 203;
        const int64_t off = oi ? 4096 : 0;
        fs_context *ctx = gu_family_context(base, dtype, B);
        gu_lmhead lm;
        gu_lmhead_init(&lm, B, D, V, dtype, off, 0, 0, gu_w_scale(D, 1.0),
                       0x5bec1a10ull + (unsigned long long)(8 * dt + 4 * bi + 2 * oi));
        const uint16_t nan_bits = dt ? 0x7e00 : 0x7fc0, inf_bits = dt ? 0x7c00 : 0x7f80;
        for (int b = 0; b < B; b += 4) {
          lm.H[(int64_t)b * lm.hs + 3] = nan_bits;     /* row b: every logit NaN */
          lm.H[(int64_t)(b + 2) * lm.hs + 5] = inf_bits; /* row b + 2: +-inf logits */
        }
        gu_lmhead_upload(ctx, &lm);
        const fs_problem dp = gu_problem(&lm, 1), hp = gu_problem(&lm, 0);
        gu_outputs o;
        gu_outputs_alloc(ctx, &o, (size_t)B, 0, 0);
        int32_t *ref = gu_malloc(sizeof(int32_t) * (size_t)B);
        static const struct { float T; int noise; const char *name; } calls[3] = {
            {1.0f, FS_NOISE_TOKEN, "token T=1"},
            {1.0f, FS_NOISE_GROUP16, "group16 T=1"},
            {0.0f, FS_NOISE_GROUP16, "T=0"}};
        for (int k = 0; k < 3; k++) {
          fs_sampling s = {calls[k].T, NULL, 1, 0x1234, NULL, 77, NULL};
          char what[160];
          snprintf(what, sizeof what, "special %s B=%d off=%lld %s", gu_dtype_name(dtype), B,
                   (long long)off, calls[k].name);
          REQUIRE(fs_context_set_noise(ctx, calls[k].noise) == FS_OK);
          ncalls++;
          if (gu_sample_fetch(ctx, &dp, &s, &o, NULL, what) != FS_OK) {
            bad++;
            continue;
          }
          REQUIRE(fs_reference_sample_noise(&hp, &s, calls[k].noise, ref, NULL, NULL) == FS_OK);
          int wrong = 0;
          for (int b = 0; b < B; b++) {
            const int32_t t = o.h_tokens[b];
            const int in = t >= off && t < off + V;
            if (!in || t != ref[b]) {
              if (wrong++ < 4)
                printf("  %s row %d (%s): token %d, reference %d%s\n", what, b,
                       b % 4 == 0 ? "NaN" : b % 4 == 2 ? "inf" : "finite", t, ref[b],
                       in ? "" : " (outside the shard)");
            }
          }
          CHECK_MSG(wrong == 0, "%s: %d of %d rows differ from the reference or leave the shard",
                    what, wrong, B);
          bad += wrong != 0;
        }
        REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
        free(ref);
        gu_outputs_free(ctx, &o);
        gu_lmhead_free(ctx, &lm);
        gu_family_release(base, ctx);
      }
  printf("special logits: %d of %d calls as the reference\n", ncalls - bad, ncalls);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  if (!gu_test_family()) test_set_noise(ctx);
  test_special(ctx);
  test_pathwise(ctx);
  test_distribution(ctx);
  if (!gu_test_family()) test_tp_group(ctx);
  fs_context_destroy(ctx);
  return fs_test_done("test_group");
}
