// fs-test-timeout: 300
/*
** test_toplp.c: fs_options.top_logprobs on the GPU (since 0.3.12).
** flashsampling.h: row b's n most likely tokens by raw logit (after the
** soft-cap; before the bias, the penalty, the mask and the temperature),
** equal logits by increasing id, NaN after every number, each with its raw
** logit minus the row's log-sum-exp; -1 and -inf past the call's ids.
**
** Per case (below), fs_sample_ex with top_logprobs against
** fs_reference_sample_ex with the same options (double logits):
**  - every list holds distinct ids of the call, -1 exactly where the
**    reference's has -1 (places >= V), and at least 99% of the places hold
**    the reference's id; a place that differs is a near-tie: the exact
**    logits (gu_logit) of the two ids within 1e-5 of sum |h w| + 1e-6;
**  - every value is z - lse of its own id within 2e-5 + 1e-6 |lse| (z the
**    exact logit, capped where the case caps, lse the reference row's), or
**    NaN where the reference's is;
**  - the draws are the reference's (at least 99%: the call takes the
**    filters' path, whose logits' pass may sum in another order than the
**    reference near a tie).
** Cases (bf16 unless named):
**   plain   B = 5, V = 1000, D = 256, n = 20, T = 1;
**   one     B = 1, V = 151,936, D = 256, n = 20: 25 slices a row;
**   chunks  B = 2, V = 151,936, D = 256, n = 20, ctx->toplp_slices = 1: a row
**           in one slice of 19 chunks (the running bound, the merges);
**   rising  B = 2, V = 50,000, D = 64, n = 64, logits rising with the id
**           (H = e_0, W[v][0] = v / 64 in bf16, so runs of equal logits):
**           every chunk's keys beat the list's bound (the gather's
**           overflow, the chunk's own bound), ctx->toplp_slices = 1;
**   fp16    B = 37, V = 5011, D = 256, vocab_offset 37, n = 64;
**   mixed   B = 7, V = 5011, D = 512, vocab_offset 37, n = 20, per-row
**           temperatures with greedy rows, 3 samples, logprobs, a mask, a
**           soft-cap 4, a bias with a penalty (a +50 and a -inf entry a
**           row), top-k 50: the lists must equal, bit for bit, those of the
**           same inputs with top-k 50 alone (they read the raw logits), and
**           a draw whose token is in its row's list must have the list's
**           value as its logprob, bit for bit (one log-sum-exp), and every
**           draw the reference's logprob within 2e-5 + 1e-6 |lse| where its
**           token is the reference's;
**   drawn   mixed without the bias and the filter: the call's own fused
**           kernel draws (filter.c's pass_draws) and fsamp_toplp_merge
**           writes the logprobs; the same checks;
**   n256    B = 4, V = 5011, D = 128, n = 256;
**   widest  B = 2, V = 262,144, D = 64, n = 256, ctx->toplp_slices = 4096:
**           FS_TOPLP_SLICES_MAX = 1,024 slices (fs_int.h) of 64 float4s,
**           whose lists the merge takes in 69 batches of 16 (ft_tmerge);
**   merge20 B = 2, V = 151,936, D = 64, n = 20, 64 slices: lists of 32
**           (padded from 20), folded through shared memory alone;
**   top1    B = 2, V = 151,936, D = 64, n = 1, 600 slices: lists of one key;
**   merge100 B = 3, V = 151,936, D = 64, n = 100, 13 slices: lists padded
**           from 100 to 128 keys, odd counts at the first two folds (13, 7);
**   long256 B = 2, V = 151,936, D = 64, n = 256, ctx->toplp_slices = 1: 19
**           chunks whose kept keys pass FT_TCUT = 512 and are cut;
**   ranked256 B = 2, V = 151,936, D = 64, n = 256, ctx->toplp_slices = 1:
**           integer logits 1024 (v / 8192) + (v / 4) % 512 (H = e_0 + e_1 +
**           e_2, three W columns exact in bf16), so each 8,192-logit chunk
**           lies above the last and a thread's 16 logits of a chunk share
**           one value, ranked by thread (FT_TU = 4): every chunk's gather
**           after the first loses keys (the lost path), and its first
**           half's own bound takes 255 x 8 + 1 keys, past FT_TCAP - 8 n, so
**           the kept keys are cut between the halves; as
**           ranked256_sliced in the library's slices (16 of 2,374
**           float4s, which start off a thread's rank: the merge of the
**           ranked lists);
**   short   B = 3, V = 100, D = 64, n = 256: 156 pads a row;
**   ties    B = 64, V = 3000, D = 16, H and W in {-1, 0, 1}: integer logits,
**           exact in fp32, most of them tied: the lists must equal the
**           reference's exactly (ids by increasing id within a tie); as
**           ties_sliced at B = 4 in 11 slices (550 keys: ft_tmerge);
**   nan     B = 3, V = 10, D = 64, n = 16: token 7's W row NaN: its logit is
**           NaN in every row, listed last, every value NaN;
**   pinf    B = 3, V = 1000, D = 64, n = 20: token 777's logit +inf
**           (listed first), every value NaN;
**   ninf    B = 2, V = 50,000, D = 64, n = 20: every logit from id 10 on
**           -inf, so the list's bound is -inf (the bounds-checked gather),
**           in one slice of 7 chunks (ctx->toplp_slices = 1) and, as
**           ninf_sliced, in the library's slices;
**   big     B = 128, V = 151,936, D = 256, n = 20, greedy;
** and under FS_NOISE_GROUP16 (since 0.3.17; the reference's draws are its
** group draws, the lists as ever):
**   group16 drawn's options at vocab_offset 32 (a mask, logprobs, a soft-cap
**           4, per-row temperatures with greedy rows, 3 samples);
**   group16-fp16 B = 37, V = 5011, D = 256, vocab_offset 48, n = 64, T = 0.8;
**   group16-big  B = 64, V = 151,936, D = 256, n = 20, T = 1.
** Then on plain's inputs: a CUDA graph captured after a first call replays
** its lists; a fresh context's first such call inside a capture returns
** FS_NOT_PREPARED naming top_logprobs; under FS_NOISE_GROUP16 a call and its
** graph's replay give the same draws (some unlike the per-token noise's)
** and the per-token call's lists (gpu_graph.h's gu_group16_replay).  Under
** tests/fakecuda (cpu/fake_toplp: no kernel runs) every call is made and
** nothing compared but the graph's: the host's routing, workspace and
** module loading without a GPU.
*/
#include "gpu_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TL_RANDOM, TL_TIES, TL_NAN, TL_PINF, TL_RISING, TL_NINF, TL_RANKED };

typedef struct tl_case {
  const char *name;
  int B, D, V, n, dtype, offset, special, mixed;
  float T;
  int slices; /* ctx->toplp_slices (0: the library's choice) */
  int group;  /* FS_NOISE_GROUP16 (since 0.3.17) */
} tl_case;

static const tl_case cases[] = {
    {"plain", 5, 256, 1000, 20, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 0, 0},
    {"one", 1, 256, 151936, 20, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 0, 0},
    {"chunks", 2, 256, 151936, 20, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 1, 0},
    {"rising", 2, 64, 50000, 64, FS_DTYPE_BF16, 0, TL_RISING, 0, 1.0f, 1, 0},
    {"fp16", 37, 256, 5011, 64, FS_DTYPE_FP16, 37, TL_RANDOM, 0, 1.0f, 0, 0},
    {"mixed", 7, 512, 5011, 20, FS_DTYPE_BF16, 37, TL_RANDOM, 1, 1.0f, 0, 0},
    {"drawn", 6, 512, 5011, 20, FS_DTYPE_BF16, 37, TL_RANDOM, 2, 1.0f, 0, 0},
    {"n256", 4, 128, 5011, 256, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 0.7f, 0, 0},
    {"widest", 2, 64, 262144, 256, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 4096, 0},
    {"merge20", 2, 64, 151936, 20, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 64, 0},
    {"top1", 2, 64, 151936, 1, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 600, 0},
    {"merge100", 3, 64, 151936, 100, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 13, 0},
    {"long256", 2, 64, 151936, 256, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 1, 0},
    {"ranked256", 2, 64, 151936, 256, FS_DTYPE_BF16, 0, TL_RANKED, 0, 1.0f, 1, 0},
    {"ranked256_sliced", 2, 64, 151936, 256, FS_DTYPE_BF16, 0, TL_RANKED, 0, 1.0f, 0, 0},
    {"short", 3, 64, 100, 256, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 0, 0},
    {"ties", 64, 16, 3000, 50, FS_DTYPE_BF16, 0, TL_TIES, 0, 1.0f, 0, 0},
    {"ties_sliced", 4, 16, 3000, 50, FS_DTYPE_BF16, 0, TL_TIES, 0, 1.0f, 11, 0},
    {"nan", 3, 64, 10, 16, FS_DTYPE_BF16, 0, TL_NAN, 0, 1.0f, 0, 0},
    {"pinf", 3, 64, 1000, 20, FS_DTYPE_BF16, 0, TL_PINF, 0, 1.0f, 0, 0},
    {"ninf", 2, 64, 50000, 20, FS_DTYPE_BF16, 0, TL_NINF, 0, 1.0f, 1, 0},
    {"ninf_sliced", 2, 64, 50000, 20, FS_DTYPE_BF16, 0, TL_NINF, 0, 1.0f, 0, 0},
    {"big", 128, 256, 151936, 20, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 0.0f, 0, 0},
    {"group16", 6, 512, 5011, 20, FS_DTYPE_BF16, 32, TL_RANDOM, 2, 1.0f, 0, 1},
    {"group16-fp16", 37, 256, 5011, 64, FS_DTYPE_FP16, 48, TL_RANDOM, 0, 0.8f, 0, 1},
    {"group16-big", 64, 256, 151936, 20, FS_DTYPE_BF16, 0, TL_RANDOM, 0, 1.0f, 0, 1},
};

/* The case's head on the host (not uploaded). */
static void make_head(gu_lmhead *lm, const tl_case *cs, unsigned long long seed) {
  gu_lmhead_init(lm, cs->B, cs->D, cs->V, cs->dtype, cs->offset, 0, 0, gu_w_scale(cs->D, 1.0),
                 seed);
  const int dt = cs->dtype, D = cs->D;
  unsigned long long st = seed ^ 0x55u;
  if (cs->special == TL_TIES) {
    gu_lmhead_ties(lm, &st);
  } else if (cs->special == TL_RISING) { /* z_v = bf16(v / 64): rising, in runs */
    memset(lm->H, 0, sizeof(uint16_t) * (size_t)cs->B * (size_t)lm->hs);
    memset(lm->W, 0, sizeof(uint16_t) * (size_t)cs->V * (size_t)lm->ws);
    for (int b = 0; b < cs->B; b++) lm->H[(size_t)b * lm->hs] = gu_encode(dt, 1.0f);
    for (int v = 0; v < cs->V; v++) lm->W[(size_t)v * lm->ws] = gu_encode(dt, (float)v / 64.0f);
  } else if (cs->special == TL_RANKED) { /* z_v = 1024 (v / 8192) + (v / 4) % 512 */
    memset(lm->H, 0, sizeof(uint16_t) * (size_t)cs->B * (size_t)lm->hs);
    memset(lm->W, 0, sizeof(uint16_t) * (size_t)cs->V * (size_t)lm->ws);
    for (int b = 0; b < cs->B; b++)
      for (int k = 0; k < 3; k++) lm->H[(size_t)b * lm->hs + k] = gu_encode(dt, 1.0f);
    for (int v = 0; v < cs->V; v++) {
      const int r = (v / 4) % 512;
      lm->W[(size_t)v * lm->ws] = gu_encode(dt, (float)(1024 * (v / 8192)));
      lm->W[(size_t)v * lm->ws + 1] = gu_encode(dt, (float)(r & ~15));
      lm->W[(size_t)v * lm->ws + 2] = gu_encode(dt, (float)(r & 15));
    }
  } else if (cs->special == TL_NAN) {
    for (int k = 0; k < D; k++) lm->W[(size_t)7 * lm->ws + k] = gu_encode(dt, NAN);
  } else if (cs->special == TL_PINF) {
    for (int k = 0; k < D; k++)
      lm->W[(size_t)777 * lm->ws + k] = k ? gu_encode(dt, 0.0f) : gu_encode(dt, INFINITY);
    for (int b = 0; b < cs->B; b++) lm->H[(size_t)b * lm->hs] = gu_encode(dt, 1.0f);
  } else if (cs->special == TL_NINF) { /* z_v = W[v][0]: -inf from v = 10 */
    memset(lm->H, 0, sizeof(uint16_t) * (size_t)cs->B * (size_t)lm->hs);
    for (int b = 0; b < cs->B; b++) lm->H[(size_t)b * lm->hs] = gu_encode(dt, 1.0f);
    for (int v = 10; v < cs->V; v++) lm->W[(size_t)v * lm->ws] = gu_encode(dt, -INFINITY);
  }
}

/* Device arrays of one call's lists ([B, n] and a guard) and their host copies. */
typedef struct lists {
  size_t len;
  CUdeviceptr dt, dv;
  int32_t *t;
  float *v;
} lists;

static lists lists_new(fs_context *ctx, size_t len) {
  lists l = {len, gu_alloc(ctx, (len + GU_GUARD) * 4), gu_alloc(ctx, (len + GU_GUARD) * 4),
             gu_malloc((len + GU_GUARD) * 4), gu_malloc((len + GU_GUARD) * 4)};
  return l;
}
static void lists_fetch(fs_context *ctx, lists *l, const char *what) {
  gu_download(ctx, l->t, l->dt, (l->len + GU_GUARD) * 4);
  gu_download(ctx, l->v, l->dv, (l->len + GU_GUARD) * 4);
  long bad = 0;
  for (size_t i = l->len; i < l->len + GU_GUARD; i++)
    bad += l->t[i] != -1 || gu_float_bits(l->v[i]) != 0xFFFFFFFFu;
  CHECK_MSG(bad == 0, "%s: %ld guard entries written", what, bad);
}
static void lists_free(fs_context *ctx, lists *l) {
  gu_free(ctx, l->dt);
  gu_free(ctx, l->dv);
  free(l->t);
  free(l->v);
}

static int same_float(float a, float b) { return !memcmp(&a, &b, 4); }

/* Row b's exact raw logit of id v (local), after the case's soft-cap (c
** tanh(z / c) in double, as the reference takes it), and sum |h w| in *as. */
static double raw_logit(const gu_lmhead *lm, const tl_case *cs, int b, int v, double *as) {
  return gu_logit_capped(lm, b, v, cs->mixed ? 4.0 : 0.0, as);
}

/* Checks the GPU's lists l against the reference's (rt, rv). */
static void check_lists(const gu_lmhead *lm, const tl_case *cs, const lists *l,
                        const int32_t *rt, const float *rv, const char *what) {
  const int n = cs->n;
  long same = 0, bad = 0, places = 0;
  double worst = 0.0;
  for (int b = 0; b < cs->B; b++) {
    const int32_t *t = l->t + (size_t)b * n, *r = rt + (size_t)b * n;
    const float *v = l->v + (size_t)b * n, *w = rv + (size_t)b * n;
    /* the reference row's log-sum-exp from its first place */
    const double lse = raw_logit(lm, cs, b, r[0] - cs->offset, NULL) - (double)w[0];
    for (int i = 0; i < n; i++) {
      places++;
      const char *why = NULL;
      if (r[i] < 0 || t[i] < 0) {
        if (t[i] != r[i] || v[i] != -INFINITY) why = "pad";
        same += !why;
      } else if (t[i] < cs->offset || t[i] >= cs->offset + cs->V) {
        why = "id out of the call";
      } else {
        for (int j = 0; j < i && !why; j++)
          if (t[j] == t[i]) why = "repeated id";
        double as, ar;
        const double zt = raw_logit(lm, cs, b, t[i] - cs->offset, &as);
        const double zr = raw_logit(lm, cs, b, r[i] - cs->offset, &ar);
        same += t[i] == r[i];
        if (!why && t[i] != r[i] && !(fabs(zt - zr) <= 1e-5 * (as > ar ? as : ar) + 1e-6))
          why = "not a near-tie";
        if (!why && isnan(w[i]) != isnan(v[i])) why = "NaN";
        if (!why && !isnan(w[i])) {
          const double err = (double)v[i] == zt - lse ? 0.0 : fabs((double)v[i] - (zt - lse));
          worst = err > worst ? err : worst;
          if (!(err <= 2e-5 + 1e-6 * fabs(lse))) why = "value";
        }
      }
      if (why && bad++ < 8)
        fprintf(stderr, "%s: row %d place %d (%s): GPU (%d, %.8g), reference (%d, %.8g)\n", what,
                b, i, why, t[i], (double)v[i], r[i], (double)w[i]);
    }
  }
  CHECK_MSG(bad == 0, "%s: %ld of %ld places wrong", what, bad, places);
  CHECK_MSG(same * 100 >= places * 99, "%s: only %ld of %ld places hold the reference's id",
            what, same, places);
  if (cs->special == TL_TIES || cs->special == TL_RISING || cs->special == TL_RANKED)
    CHECK_MSG(same == places, "%s: integer logits: %ld of %ld places differ", what,
              places - same, places);
  printf("ok %s: %ld places, %ld the reference's ids, worst value error %.2g\n", what, places,
         same, worst);
}

/* The call's lists and draws (o, l, and logprobs at dlp) against the CPU
** reference's on the host copies; mixed cases also against a call without
** the other options, and the draws' logprobs against the lists. */
static void compare(fs_context *ctx, const tl_case *cs, const gu_lmhead *lmp,
                    const fs_problem *dpp, const fs_sampling *sp, const float *temps,
                    const uint32_t *mask, const int32_t *btok, const float *bval,
                    const fs_options *optp, const gu_outputs *op, const lists *lp_,
                    CUdeviceptr dlp, const char *what) {
  const gu_lmhead lm = *lmp;
  const fs_problem dp = *dpp;
  const fs_sampling s = *sp;
  const fs_options opt = *optp;
  const gu_outputs o = *op;
  const lists l = *lp_;
  const int B = cs->B, n = cs->n, S = s.num_samples;
  const size_t nd = (size_t)B * S, nl = (size_t)B * n;
  fs_outputs out;
  /* the reference, host pointers */
  fs_problem hp = gu_problem(&lm, 0);
  fs_sampling hs = s;
  if (cs->mixed) hs.temperatures = temps;
  int32_t *rt = gu_malloc(nl * 4), *rtok = gu_malloc(nd * 4);
  float *rv = gu_malloc(nl * 4), *rlp = gu_malloc(nd * 4);
  fs_options ropt = opt;
  ropt.top_logprob_tokens = rt;
  ropt.top_logprob_values = rv;
  if (cs->mixed) {
    ropt.token_mask = mask;
    ropt.logprobs = rlp;
    ropt.logit_bias_tokens = cs->mixed == 1 ? btok : NULL;
    ropt.logit_bias_values = cs->mixed == 1 ? bval : NULL;
  }
  CHECK(fs_reference_sample_ex(&hp, &hs, cs->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN, &ropt,
                               rtok, NULL, NULL) == FS_OK);
  check_lists(&lm, cs, &l, rt, rv, what);
  long same = 0;
  for (size_t i = 0; i < nd; i++) same += o.h_tokens[i] == rtok[i];
  CHECK_MSG(same * 100 >= (long)nd * 99, "%s: only %ld of %zu draws are the reference's", what,
            same, nd);

  if (cs->mixed) {
    /* the lists read the raw logits: the same without the other options
    ** (mixed keeps its top-k, so that the logits' pass is the same kernel's) */
    lists l2 = lists_new(ctx, nl);
    fs_options plain = {.size = sizeof plain,
                        .logit_softcap = 4.0f,
                        .top_k = cs->mixed == 1 ? 50 : 0,
                        .top_logprobs = n,
                        .top_logprob_tokens = (int32_t *)gu_ptr(l2.dt),
                        .top_logprob_values = (float *)gu_ptr(l2.dv)};
    fs_sampling s1 = {1.0f, NULL, 1, 1ull, NULL, 0ull, NULL};
    gu_outputs o1;
    gu_outputs_alloc(ctx, &o1, (size_t)B, 0, 0);
    out = gu_outputs_api(&o1);
    CHECK(fs_sample_ex(ctx, &dp, &s1, &plain, &out, NULL) == FS_OK);
    lists_fetch(ctx, &l2, what);
    CHECK_MSG(!memcmp(l.t, l2.t, nl * 4) && !memcmp(l.v, l2.v, nl * 4),
              "%s: the options changed the lists", what);
    /* a draw in its row's list: the same value as its logprob */
    float *lp = gu_malloc(nd * 4);
    gu_download(ctx, lp, dlp, nd * 4);
    long in_list = 0, differ = 0, lp_bad = 0;
    for (size_t i = 0; i < nd; i++) {
      const int b = (int)(i / (size_t)S);
      const int32_t first = rt[(size_t)b * n]; /* the row's log-sum-exp from its first place */
      const double lse =
          first >= 0 ? raw_logit(&lm, cs, b, first - cs->offset, NULL) - (double)rv[(size_t)b * n]
                     : 0.0;
      if (o.h_tokens[i] == rtok[i] &&
          !(fabs((double)lp[i] - (double)rlp[i]) <= 2e-5 + 1e-6 * fabs(lse)) && lp_bad++ < 5)
        fprintf(stderr, "%s: draw %zu (token %d): logprob %.8g, the reference's %.8g\n", what, i,
                o.h_tokens[i], (double)lp[i], (double)rlp[i]);
      for (int j = 0; j < n; j++)
        if (l.t[(size_t)b * n + j] == o.h_tokens[i]) {
          in_list++;
          differ += !same_float(l.v[(size_t)b * n + j], lp[i]);
        }
    }
    CHECK_MSG(in_list > 0 && differ == 0, "%s: %ld of %ld listed draws' logprobs differ", what,
              differ, in_list);
    CHECK_MSG(lp_bad == 0, "%s: %ld draws' logprobs off the reference's", what, lp_bad);
    printf("ok %s: the lists as without options; %ld listed draws' logprobs the list's\n", what,
           in_list);
    free(lp);
    gu_outputs_free(ctx, &o1);
    lists_free(ctx, &l2);
  }
  free(rt), free(rtok), free(rv), free(rlp);
}

static void run(fs_context *ctx, const tl_case *cs) {
  char what[160];
  snprintf(what, sizeof what, "%s %s B=%d V=%d n=%d", cs->name, gu_dtype_name(cs->dtype), cs->B,
           cs->V, cs->n);
  const int B = cs->B, n = cs->n, S = cs->mixed ? 3 : 1;
  gu_lmhead lm;
  make_head(&lm, cs, 0x70b1ull + (unsigned long long)B * 131u + (unsigned long long)cs->V);
  gu_lmhead_upload(ctx, &lm);
  const size_t nd = (size_t)B * S, nl = (size_t)B * n;
  /* mixed: per-row temperatures (a greedy row every third), a mask, a bias */
  float *temps = gu_malloc(sizeof(float) * (size_t)B);
  for (int b = 0; b < B; b++) temps[b] = b % 3 == 1 ? 0.0f : 0.6f + 0.2f * (float)(b % 5);
  const long long words = (cs->offset + cs->V + 31) / 32;
  uint32_t *mask = gu_malloc(sizeof(uint32_t) * (size_t)(B * words));
  unsigned long long ms = 0xfeedull;
  for (long long i = 0; i < B * words; i++) mask[i] = (uint32_t)fs_test_rand(&ms) | 0x10101010u;
  int32_t *btok = gu_malloc(sizeof(int32_t) * 2 * (size_t)B);
  float *bval = gu_malloc(sizeof(float) * 2 * (size_t)B);
  for (int b = 0; b < B; b++) {
    btok[2 * b] = cs->offset + (b * 97) % cs->V, bval[2 * b] = 50.0f;
    btok[2 * b + 1] = cs->offset + (b * 13 + 5) % cs->V, bval[2 * b + 1] = -INFINITY;
  }
  CUdeviceptr dtemps = gu_upload_new(ctx, temps, sizeof(float) * (size_t)B);
  CUdeviceptr dmask = gu_upload_new(ctx, mask, sizeof(uint32_t) * (size_t)(B * words));
  CUdeviceptr dbt = gu_upload_new(ctx, btok, sizeof(int32_t) * 2 * (size_t)B);
  CUdeviceptr dbv = gu_upload_new(ctx, bval, sizeof(float) * 2 * (size_t)B);
  CUdeviceptr dlp = gu_alloc(ctx, nd * 4);

  fs_sampling s = {cs->T, NULL, S, 20261204ull, NULL, 9ull, NULL};
  if (cs->mixed) s.temperatures = (const float *)gu_ptr(dtemps);
  lists l = lists_new(ctx, nl);
  fs_options opt = {.size = sizeof opt,
                    .top_logprobs = n,
                    .top_logprob_tokens = (int32_t *)gu_ptr(l.dt),
                    .top_logprob_values = (float *)gu_ptr(l.dv)};
  if (cs->mixed) {
    opt.token_mask = (const uint32_t *)gu_ptr(dmask);
    opt.logprobs = (float *)gu_ptr(dlp);
    opt.logit_softcap = 4.0f;
  }
  if (cs->mixed == 1) {
    opt.logit_bias_tokens = (const int32_t *)gu_ptr(dbt);
    opt.logit_bias_values = (const float *)gu_ptr(dbv);
    opt.logit_bias_count = 2;
    opt.repetition_penalty = 1.3f;
    opt.top_k = 50;
  }
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, nd, 1, 0);
  gu_outputs_poison(ctx, &o);
  fs_problem dp = gu_problem(&lm, 1);
  fs_outputs out = gu_outputs_api(&o);
  const int slices = ctx->toplp_slices; /* FS_TOPLP_SLICES's field (context.c) */
  if (cs->slices) ctx->toplp_slices = cs->slices;
  CHECK(fs_context_set_noise(ctx, cs->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN) == FS_OK);
  CHECK_MSG(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK, "%s: %s", what,
            fs_last_error(ctx));
  ctx->toplp_slices = slices;
  gu_outputs_fetch(ctx, &o);
  gu_outputs_check(&o, what);
  lists_fetch(ctx, &l, what);

  if (gu_fake_driver()) /* every call was made; no kernel ran: nothing to compare */
    printf("ok %s: the call was made (the fake driver runs no kernel)\n", what);
  else
    compare(ctx, cs, &lm, &dp, &s, temps, mask, btok, bval, &opt, &o, &l, dlp, what);
  CHECK(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  free(temps), free(mask), free(btok), free(bval);
  gu_free(ctx, dtemps), gu_free(ctx, dmask), gu_free(ctx, dbt), gu_free(ctx, dbv);
  gu_free(ctx, dlp);
  lists_free(ctx, &l);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

/* gu_group16_replay's check of the lists: the direct group16 call's are
** the FS_NOISE_TOKEN call's (t0, v0: they read the raw logits alone), and
** the replay's the direct call's. */
typedef struct group_lists {
  lists *l;
  const int32_t *t0;
  const float *v0;
  const char *what;
} group_lists;

static void group_lists_check(fs_context *ctx, void *user, int replayed) {
  group_lists *g = user;
  const size_t nl = g->l->len;
  lists_fetch(ctx, g->l, g->what);
  CHECK_MSG(!memcmp(g->l->t, g->t0, nl * 4) && !memcmp(g->l->v, g->v0, nl * 4),
            "%s group16: the %s lists differ from the per-token noise's", g->what,
            replayed ? "replay's" : "direct call's");
  if (!replayed) {
    gu_poison(ctx, g->l->dt, nl * 4);
    gu_poison(ctx, g->l->dv, nl * 4);
  }
}

/* Graph capture, a first call inside a capture, and FS_NOISE_GROUP16's call
** and replay, on plain's inputs. */
static void run_graph(fs_context *ctx) {
  const tl_case *cs = &cases[0];
  const char *what = "graph";
  gu_lmhead lm;
  make_head(&lm, cs, 0x6a9full);
  gu_lmhead_upload(ctx, &lm);
  const size_t nl = (size_t)cs->B * cs->n;
  lists l = lists_new(ctx, nl);
  fs_options opt = {.size = sizeof opt,
                    .top_logprobs = cs->n,
                    .top_logprob_tokens = (int32_t *)gu_ptr(l.dt),
                    .top_logprob_values = (float *)gu_ptr(l.dv)};
  fs_sampling s = {1.0f, NULL, 1, 3ull, NULL, 0ull, NULL};
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, (size_t)cs->B, 1, 1);
  fs_problem dp = gu_problem(&lm, 1);
  fs_outputs out = gu_outputs_api(&o);
  CHECK(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK);
  lists_fetch(ctx, &l, what);
  int32_t *t0 = gu_malloc(nl * 4);
  float *v0 = gu_malloc(nl * 4);
  memcpy(t0, l.t, nl * 4), memcpy(v0, l.v, nl * 4);
  gu_poison(ctx, l.dt, nl * 4);
  gu_poison(ctx, l.dv, nl * 4);

  const CUstream stream = gu_stream_new(ctx);
  CUgraph graph;
  CUgraphExec exec = gu_capture_exec(ctx, stream, &dp, &s, &opt, &out, &graph, what);
  snap g = gu_graph_replay(ctx, exec, stream, &o, what);
  lists_fetch(ctx, &l, what);
  CHECK_MSG(!memcmp(l.t, t0, nl * 4) && !memcmp(l.v, v0, nl * 4),
            "%s: the replay's lists differ from the direct call's", what);

  char msg[512];
  const int st2 = gu_capture_fresh(stream, &dp, &s, &opt, &out, msg, sizeof msg);
  /* the refusal may be the logits' pass's, where its kernel is not loaded (filter.c) */
  CHECK_MSG(st2 == FS_NOT_PREPARED &&
                (strstr(msg, "top_logprobs") || strstr(msg, "before capture")),
            "%s: first call while capturing: status %d, %s", what, st2, msg);

  printf("ok %s: the replay's lists are the call's; a first call in a capture refused\n",
         what);
  group_lists gl = {&l, t0, v0, what};
  gu_group16_replay(ctx, &dp, &s, &opt, &out, &o, &g, group_lists_check, &gl, what);
  snap_free(&g);
  gu_graph_done(ctx, exec, graph, stream);
  free(t0), free(v0);
  lists_free(ctx, &l);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run(ctx, &cases[i]);
  run_graph(ctx);
  fs_context_destroy(ctx);
  return fs_test_done("test_toplp");
}
