// fs-test-timeout: 300
/*
** test_logprobs.c: fs_options.logprobs on the GPU.  flashsampling.h: each
** draw's logprob is its token's raw logit minus the log-sum-exp of the raw
** logits of all V tokens of the call (no temperature, no token mask), with
** the logits never in memory.
**
** Per case (below), fs_sample_ex with logprobs against
** fs_reference_sample_ex with logprobs (double logits) on the same inputs:
**  - every draw: |logprob - (z - lse)| <= 2e-5 + 1e-6 |lse|, where z is the
**    GPU's own logit of its own token (so a token that differs from the
**    reference's at a near-tie still checks) and lse the reference row's
**    log-sum-exp (its logit minus its logprob);
**  - every draw's logprob is finite and at most 1e-6;
**  - at least 99% of the tokens equal the reference's (the draw itself is
**    test_pathwise's; a kernel that only wrote logprobs would fail here);
**  - a call without logprobs gives the same tokens (the option changes no
**    draw).
** Sensitivity: the logits have sd ~1, so at V = 1000 one token holds ~1e-3
** of a row's mass (1e-4 for one 2 sd below the mean) and leaving out a
** single row of the vocabulary (or a tile, or a chunk's pair) moves the
** log-sum-exp by more than the tolerance; fp32 logits and the fast
** exponential are ~1e-6 from the reference (2.4e-6 the worst seen).
** Cases, bf16 and fp16, B = 5 and 37 (with FS_TEST_FAMILY, on that family's
** variant nearest each B):
**   plain   V = 1000, D = 256, T = 1, one sample;
**   mixed   V = 5011, D = 1024, vocab_offset 37, per-row temperatures with
**           greedy rows, 3 samples, a token mask of density 1/2 (logprobs
**           ignore it);
**   group16 FS_NOISE_GROUP16, V = 5011, D = 256, vocab_offset 48, T = 0.7;
**   tiles   V = 65537, D = 256: many tiles per chunk in every family (the
**           folds into the stored pair; at V ~ 5000 most chunks hold one
**           tile) and a last quad of one row;
**   again   plain's shape with other inputs, after the others in the same
**           context: a first tile that folded into the stored pair would
**           merge an earlier call's;
**   nan     V = 1001 whose last W row is NaN (every row holds a NaN logit, in
**           the last quad, alone): every logprob must be NaN (the tokens are
**           test_ties's subject, not checked here);
**   nanblk  V = 5011 whose rows 1024 .. 1279 are NaN: whole tiles, and in wt
**           whole lanes' shares, with no number (their pair is (-inf, NaN)):
**           every logprob NaN;
**   pinf    V = 1000 whose token 777 has the logit +inf in every row (H's
**           first column 1, W's row 777 (+inf, 0, ..., 0)): every logprob
**           NaN, as the reference's;
**   ninf    V = 5011 whose tokens 0 .. 2999 have the logit -inf (W's rows
**           (-inf, 0, ..., 0)): whole chunks store (-inf, 0) and the merges
**           take them; the logprobs as the reference's over the other 2011.
*/
#include "gpu_family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The non-finite logits a case plants (lp_case.special). */
enum { LP_FINITE, LP_NAN_ROW, LP_NAN_BLOCK, LP_PINF, LP_NINF };

typedef struct lp_case {
  const char *name;
  int V, D, offset, S, mixed, group16, special;
  unsigned long long seed;
} lp_case;

static const lp_case cases[] = {
    {"plain", 1000, 256, 0, 1, 0, 0, 0, 1},     {"mixed", 5011, 1024, 37, 3, 1, 0, 0, 2},
    {"group16", 5011, 256, 48, 1, 0, 1, 0, 3},  {"tiles", 65537, 256, 0, 1, 0, 0, 0, 4},
    {"again", 1000, 256, 0, 1, 0, 0, 0, 5},
    {"nan", 1001, 256, 0, 1, 0, 0, LP_NAN_ROW, 6},
    {"nanblk", 5011, 256, 0, 1, 0, 0, LP_NAN_BLOCK, 7},
    {"pinf", 1000, 256, 0, 1, 0, 0, LP_PINF, 8},
    {"ninf", 5011, 256, 0, 1, 0, 0, LP_NINF, 9},
};

/* Plants cs->special's logits in lm (host copies, before the upload). */
static void plant(gu_lmhead *lm, const lp_case *cs) {
  const int D = cs->D, dt = lm->dtype;
  const uint16_t nan = dt == FS_DTYPE_BF16 ? 0x7fc0 : 0x7e00,
                 pinf = dt == FS_DTYPE_BF16 ? 0x7f80 : 0x7c00, ninf = pinf | 0x8000u;
  int v0 = 0, v1 = 0;
  uint16_t first = nan;
  switch (cs->special) {
  case LP_NAN_ROW: v0 = cs->V - 1, v1 = cs->V; break;
  case LP_NAN_BLOCK: v0 = 1024, v1 = 1280; break;
  case LP_PINF: v0 = 777, v1 = 778, first = pinf; break;
  case LP_NINF: v0 = 0, v1 = 3000, first = ninf; break;
  default: return;
  }
  const int inf = cs->special == LP_PINF || cs->special == LP_NINF;
  for (int v = v0; v < v1; v++) /* NaN rows whole; an infinity times H's first column */
    for (int k = 0; k < D; k++) lm->W[(size_t)v * lm->ws + k] = inf ? (k ? 0 : first) : nan;
  for (int b = 0; inf && b < lm->B; b++) lm->H[(size_t)b * lm->hs] = gu_encode(dt, 1.0f);
}

static unsigned long long lp_rand(unsigned long long *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 17;
}

static void run(fs_context *ctx, const lp_case *cs, int B, int dtype) {
  char what[160];
  snprintf(what, sizeof what, "%s %s B=%d", cs->name, gu_dtype_name(dtype), B);
  gu_lmhead lm;
  gu_lmhead_init(&lm, B, cs->D, cs->V, dtype, cs->offset, 0, 0, gu_w_scale(cs->D, 1.0),
                 0x10cb0bull + (unsigned long long)B * 31u + cs->seed * 7919u);
  plant(&lm, cs);
  gu_lmhead_upload(ctx, &lm);
  const int S = cs->S;
  const size_t n = (size_t)B * S;
  /* per-row temperatures: a greedy row every third, the others 0.6 .. 1.4 */
  float *temps = gu_malloc(sizeof(float) * (size_t)B);
  for (int b = 0; b < B; b++) temps[b] = b % 3 == 1 ? 0.0f : 0.6f + 0.2f * (float)(b % 5);
  CUdeviceptr dtemps = cs->mixed ? gu_upload_new(ctx, temps, sizeof(float) * (size_t)B) : 0;
  /* the mask: random words over the whole id range */
  const long long words = (cs->offset + cs->V + 31) / 32;
  uint32_t *mask = gu_malloc(sizeof(uint32_t) * (size_t)(B * words));
  unsigned long long ms = 0xfeedull + (unsigned long long)B;
  for (long long i = 0; i < B * words; i++) mask[i] = (uint32_t)lp_rand(&ms);
  CUdeviceptr dmask =
      cs->mixed ? gu_upload_new(ctx, mask, sizeof(uint32_t) * (size_t)(B * words)) : 0;

  fs_sampling s = {cs->group16 ? 0.7f : 1.0f, NULL, S, 20261201ull, NULL, 5ull, NULL};
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, n, 1, 0);
  CUdeviceptr dlp = gu_alloc(ctx, (n + GU_GUARD) * sizeof(float));
  gu_poison(ctx, dlp, (n + GU_GUARD) * sizeof(float));
  gu_outputs_poison(ctx, &o);
  if (cs->group16) CHECK(fs_context_set_noise(ctx, FS_NOISE_GROUP16) == FS_OK);
  fs_problem dp = gu_problem(&lm, 1);
  s.temperatures = cs->mixed ? (const float *)gu_ptr(dtemps) : NULL;
  fs_options opt = {.size = sizeof opt,
                    .token_mask = cs->mixed ? (const uint32_t *)gu_ptr(dmask) : NULL,
                    .logprobs = (float *)gu_ptr(dlp)};
  fs_outputs out = gu_outputs_api(&o);
  int st = fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL);
  CHECK_MSG(st == FS_OK, "%s: fs_sample_ex: %s", what, fs_last_error(ctx));
  gu_outputs_fetch(ctx, &o);
  gu_outputs_check(&o, what);
  float *lp = gu_malloc((n + GU_GUARD) * sizeof(float));
  gu_download(ctx, lp, dlp, (n + GU_GUARD) * sizeof(float));
  /* the same call without logprobs: the same tokens */
  gu_outputs o2;
  gu_outputs_alloc(ctx, &o2, n, 0, 0);
  opt.logprobs = NULL;
  out = gu_outputs_api(&o2);
  CHECK(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK);
  gu_outputs_fetch(ctx, &o2);
  if (cs->group16) CHECK(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);

  /* the reference, host pointers */
  fs_problem hp = gu_problem(&lm, 0);
  fs_sampling hs = s;
  hs.temperatures = cs->mixed ? temps : NULL;
  int32_t *rtok = gu_malloc(sizeof(int32_t) * n);
  float *rlogit = gu_malloc(sizeof(float) * n), *rlp = gu_malloc(sizeof(float) * n);
  const fs_options ropt = {.size = sizeof ropt, .token_mask = cs->mixed ? mask : NULL,
                           .logprobs = rlp};
  CHECK(fs_reference_sample_ex(&hp, &hs, cs->group16 ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN, &ropt,
                               rtok, rlogit, NULL) == FS_OK);

  long same = 0, bad = 0, same_no_lp = 0;
  double worst = 0.0;
  /* a NaN or +inf logit in every row: every logprob NaN, the reference's too */
  const int want_nan = cs->special != LP_FINITE && cs->special != LP_NINF;
  for (size_t i = 0; want_nan && i < n; i++)
    if ((!isnan(lp[i]) || !isnan(rlp[i])) && bad++ < 5)
      fprintf(stderr, "%s: draw %zu: logprob %.7g (the reference's %.7g), want NaN\n", what, i,
              (double)lp[i], (double)rlp[i]);
  for (size_t i = 0; !want_nan && i < n; i++) {
    const double lse = (double)rlogit[i] - (double)rlp[i];
    const double want = (double)o.h_logits[i] - lse, err = fabs((double)lp[i] - want);
    same += o.h_tokens[i] == rtok[i];
    same_no_lp += o2.h_tokens[i] == o.h_tokens[i];
    if (err > worst) worst = err;
    if (!(err <= 2e-5 + 1e-6 * fabs(lse)) || !isfinite(lp[i]) || lp[i] > 1e-6f) {
      if (bad++ < 5)
        fprintf(stderr, "%s: draw %zu: logprob %.7g, want %.7g (token %d, logit %.7g, "
                "the reference's lse %.7g)\n", what, i, (double)lp[i], want, o.h_tokens[i],
                (double)o.h_logits[i], lse);
    }
  }
  for (size_t i = n; i < n + GU_GUARD; i++) bad += gu_float_bits(lp[i]) != 0xFFFFFFFFu;
  CHECK_MSG(bad == 0, "%s: %ld draws' logprobs wrong (or guard entries written)", what, bad);
  if (!want_nan) {
    CHECK_MSG(same * 100 >= (long)n * 99, "%s: only %ld of %zu tokens are the reference's", what,
              same, n);
    CHECK_MSG(same_no_lp == (long)n, "%s: %ld of %zu tokens changed without logprobs", what,
              (long)n - same_no_lp, n);
  }
  printf("ok %s: %zu draws, %ld the reference's tokens, worst logprob error %.2g\n", what, n,
         same, worst);

  free(lp);
  free(rtok);
  free(rlogit);
  free(rlp);
  free(temps);
  free(mask);
  gu_free(ctx, dlp);
  gu_free(ctx, dtemps);
  gu_free(ctx, dmask);
  gu_outputs_free(ctx, &o);
  gu_outputs_free(ctx, &o2);
  gu_lmhead_free(ctx, &lm);
}

/* Every case on the context of (B, dtype). */
static void run_cases(fs_context *c, int B, int dtype) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run(c, &cases[i], B, dtype);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  static const int batches[] = {5, 37};
  gu_family_each(ctx, batches, 2, run_cases);
  fs_context_destroy(ctx);
  return fs_test_done("test_logprobs");
}
