// fs-test-timeout: 300
/*
** test_ranks.c: fs_options.ranks on the GPU (since 0.3.13).
** flashsampling.h: a draw's rank is the number of the call's ids whose raw
** logit (after the soft-cap; before the bias, the penalty, the mask and the
** temperature) is >= the draw's reported logit, in fp32; NaN never counts.
**
** Per case (below), fs_sample_ex with ranks against fs_reference_sample_ex
** with the same options (double logits rounded to float):
**  - the draws are the reference's (at least 99%: the call's logits' pass
**    may sum in another order than the reference near a tie);
**  - a draw whose token is the reference's has the reference's rank, or
**    (at most 1% of the draws, none where the logits are integers) a rank
**    within the band of the exact logits: at least the count of ids whose
**    exact logit is above d + tol and at most the count above d - tol (d
**    the draw's logit, tol = 1e-5 of the row's largest sum |h w| + 1e-6);
**    a draw that differs from the reference's, the same band;
**  - every rank in 0..V, none written past the [B, S] outputs;
**  - where the case asks for logprobs, a draw whose token is the
**    reference's has its logprob within 2e-5 + 1e-6 |lse| (samples: the fused
**    kernel computes them while it writes the logits, a pair no call made
**    before ranks; mixed: fsamp_filter).
** Cases (bf16 unless named):
**   plain   B = 5, V = 1000, D = 256, T = 1: the call's own fused kernel
**           draws while it writes the logits (filter.c's pass_draws);
**   one     B = 1, V = 151,936, D = 256: 37 slices of the row;
**   samples B = 3, V = 5011, D = 128, 6 samples (two rounds of FT_RS = 4),
**           no outputs->logits (the workspace keeps the draws' logits),
**           logprobs from the fused kernel;
**   mixed   B = 7, V = 5011, D = 512, vocab_offset 37, per-row
**           temperatures with greedy rows, 3 samples, logprobs, a mask, a
**           soft-cap 4, a bias with a penalty (a +50 and a -inf entry a
**           row, the -inf one on the row's largest raw logit), top-k 50:
**           fsamp_filter draws over the biased scores and fsamp_rank puts
**           the raw logits back first: a +50 entry drawn ranks by its raw
**           logit (the reference's), not its score, and every draw counts
**           the -inf entry's logit, the row's largest, not its -inf score;
**   toplp   plain's inputs with top_logprobs 20: a draw in its row's list
**           at place i (no tie) has rank i + 1;
**   fp16    B = 37, V = 5011, D = 256, vocab_offset 37;
**   ties    B = 16, V = 3000, D = 16, H and W in {-1, 0, 1}: integer
**           logits, exact in fp32, most of them tied: every rank the
**           reference's exactly, ties counted;
**   nan     B = 3, V = 10, D = 64: token 7's logit NaN in every row,
**           never counted; a masked-out row (no allowed id, logit -inf)
**           ranks V - 1;
**   big     B = 128, V = 151,936, D = 256, greedy;
** and with top logprobs, where fsamp_toplp counts the ranks in its read
** (the pass drew the call, at most FT_TRS = 4 samples a row; since 0.3.14):
**   toplp-ties    ties' inputs, 4 samples, top 5: every rank exact;
**   toplp-nan     nan's inputs, top 3 (V = 10: a row's last float4 half
**                 past V, the masked-out row's -inf draw counting every
**                 id but the NaN one);
**   toplp-fp16    fp16's inputs, no outputs->logits, top 8;
**   toplp-samples samples' inputs (6 samples: fsamp_rank counts), top 4,
**                 T = 0.25: logits of s.d. ~1 over 5011 ids put about 60%
**                 of a row's mass in its top 4, so some of the 18 draws are
**                 listed (at T = 1 none was, on the H200: the list check
**                 needs one; P(none) ~ 1e-5 at 0.25) and others are not;
**   toplp-big     big's inputs, top 8;
**   toplp-wide    B = 256, V = 5011, D = 128, top 8: one slice a row (G = 1
**                 from B = 133 on an H200), which writes the lists itself;
** and under FS_NOISE_GROUP16 with a token mask (since 0.3.17: the fused
** pass draws the groups; the reference's draws are its group draws):
**   group16       B = 6, V = 5011, D = 256, vocab_offset 32, 3 samples, no
**                 outputs->logits, logprobs (fsamp_rank counts);
**   group16-toplp plain's inputs, 2 samples, T = 0.5, top 20 (fsamp_toplp
**                 counts; listed draws ranked by place);
**   group16-big   big's inputs sampled at T = 0.3, top 8 (about a sixth
**                 of the draws listed).
** Then on plain's inputs: a CUDA graph captured after a first call replays
** its ranks, without and with top logprobs 5 (the memset and
** fsamp_toplp_ranks replayed); a fresh context's first such call inside a capture returns
** FS_NOT_PREPARED; under FS_NOISE_GROUP16 a call and its graph's replay
** give the same draws (some unlike the per-token noise's) and ranks
** (gpu_graph.h's gu_group16_replay; the tensor-parallel calls' ranks:
** test_tp_filter).
** Under tests/fakecuda (cpu/fake_ranks: no kernel runs) every call is made
** and nothing compared but the graph's and the refusals.
*/
#include "gpu_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RK_RANDOM, RK_TIES, RK_NAN };

typedef struct rk_case {
  const char *name;
  int B, D, V, S, dtype, offset, special;
  int mixed;   /* 1: mask, soft-cap, bias, penalty, top-k, per-row T, logprobs */
  int no_lg;   /* outputs->logits NULL */
  int top;     /* top_logprobs */
  float T;
  int group;   /* FS_NOISE_GROUP16 (since 0.3.17), with a mask */
} rk_case;

static const rk_case cases[] = {
    {"plain", 5, 256, 1000, 1, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 0, 0, 1.0f, 0},
    {"one", 1, 256, 151936, 1, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 0, 0, 1.0f, 0},
    {"samples", 3, 128, 5011, 6, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 1, 0, 1.0f, 0},
    {"mixed", 7, 512, 5011, 3, FS_DTYPE_BF16, 37, RK_RANDOM, 1, 0, 0, 1.0f, 0},
    {"toplp", 5, 256, 1000, 2, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 0, 20, 1.0f, 0},
    {"fp16", 37, 256, 5011, 1, FS_DTYPE_FP16, 37, RK_RANDOM, 0, 0, 0, 1.0f, 0},
    {"ties", 16, 16, 3000, 2, FS_DTYPE_BF16, 0, RK_TIES, 0, 0, 0, 1.0f, 0},
    {"nan", 3, 64, 10, 1, FS_DTYPE_BF16, 0, RK_NAN, 0, 0, 0, 1.0f, 0},
    {"big", 128, 256, 151936, 1, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 0, 0, 0.0f, 0},
    {"toplp-ties", 16, 16, 3000, 4, FS_DTYPE_BF16, 0, RK_TIES, 0, 0, 5, 1.0f, 0},
    {"toplp-nan", 3, 64, 10, 1, FS_DTYPE_BF16, 0, RK_NAN, 0, 0, 3, 1.0f, 0},
    {"toplp-fp16", 37, 256, 5011, 1, FS_DTYPE_FP16, 37, RK_RANDOM, 0, 1, 8, 1.0f, 0},
    {"toplp-samples", 3, 128, 5011, 6, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 1, 4, 0.25f, 0},
    {"toplp-big", 128, 256, 151936, 1, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 0, 8, 0.0f, 0},
    {"toplp-wide", 256, 128, 5011, 1, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 0, 8, 1.0f, 0},
    {"group16", 6, 256, 5011, 3, FS_DTYPE_BF16, 32, RK_RANDOM, 0, 1, 0, 1.0f, 1},
    {"group16-toplp", 5, 256, 1000, 2, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 0, 20, 0.5f, 1},
    {"group16-big", 128, 256, 151936, 1, FS_DTYPE_BF16, 0, RK_RANDOM, 0, 0, 8, 0.3f, 1},
};

static void make_head(gu_lmhead *lm, const rk_case *cs, unsigned long long seed) {
  gu_lmhead_init(lm, cs->B, cs->D, cs->V, cs->dtype, cs->offset, 0, 0, gu_w_scale(cs->D, 1.0),
                 seed);
  const int dt = cs->dtype, D = cs->D;
  unsigned long long st = seed ^ 0x77u;
  if (cs->special == RK_TIES) {
    gu_lmhead_ties(lm, &st);
  } else if (cs->special == RK_NAN) {
    for (int k = 0; k < D; k++) lm->W[(size_t)7 * lm->ws + k] = gu_encode(dt, NAN);
  }
}

static void run(fs_context *ctx, const rk_case *cs) {
  char what[160];
  snprintf(what, sizeof what, "%s %s B=%d V=%d S=%d", cs->name, gu_dtype_name(cs->dtype), cs->B,
           cs->V, cs->S);
  const int B = cs->B, S = cs->S, n = cs->top;
  gu_lmhead lm;
  make_head(&lm, cs, 0x7a4bull + (unsigned long long)B * 131u + (unsigned long long)cs->V);
  gu_lmhead_upload(ctx, &lm);
  const size_t nd = (size_t)B * S;
  float *temps = gu_malloc(sizeof(float) * (size_t)B);
  for (int b = 0; b < B; b++) temps[b] = b % 3 == 1 ? 0.0f : 0.6f + 0.2f * (float)(b % 5);
  const long long words = (cs->offset + cs->V + 31) / 32;
  uint32_t *mask = gu_malloc(sizeof(uint32_t) * (size_t)(B * words));
  unsigned long long ms = 0xfeedull;
  for (long long i = 0; i < B * words; i++) mask[i] = (uint32_t)fs_test_rand(&ms) | 0x10101010u;
  if (cs->special == RK_NAN) /* row 2: no allowed id */
    for (long long i = 2 * words; i < 3 * words; i++) mask[i] = 0u;
  int32_t *btok = gu_malloc(sizeof(int32_t) * 2 * (size_t)B);
  float *bval = gu_malloc(sizeof(float) * 2 * (size_t)B);
  for (int b = 0; b < B; b++) { /* the -inf entry on the row's largest raw logit */
    int top = 0;
    double zt = -INFINITY;
    for (int v = 0; cs->mixed && v < cs->V; v++) {
      const double z = gu_logit(&lm, b, v, NULL);
      if (z > zt) zt = z, top = v;
    }
    btok[2 * b] = cs->offset + (b * 97) % cs->V, bval[2 * b] = 50.0f;
    btok[2 * b + 1] = cs->offset + top, bval[2 * b + 1] = -INFINITY;
  }
  CUdeviceptr dtemps = gu_upload_new(ctx, temps, sizeof(float) * (size_t)B);
  CUdeviceptr dmask = gu_upload_new(ctx, mask, sizeof(uint32_t) * (size_t)(B * words));
  CUdeviceptr dbt = gu_upload_new(ctx, btok, sizeof(int32_t) * 2 * (size_t)B);
  CUdeviceptr dbv = gu_upload_new(ctx, bval, sizeof(float) * 2 * (size_t)B);
  CUdeviceptr dlp = gu_alloc(ctx, nd * 4);
  CUdeviceptr drk = gu_alloc(ctx, (nd + GU_GUARD) * 4);
  CUdeviceptr dlt = gu_alloc(ctx, (size_t)B * (n ? n : 1) * 4);
  CUdeviceptr dlv = gu_alloc(ctx, (size_t)B * (n ? n : 1) * 4);
  gu_poison(ctx, drk, (nd + GU_GUARD) * 4);

  fs_sampling s = {cs->T, NULL, S, 20261204ull, NULL, 9ull, NULL};
  if (cs->mixed) s.temperatures = (const float *)gu_ptr(dtemps);
  fs_options opt = {.size = sizeof opt, .ranks = (int32_t *)gu_ptr(drk)};
  if (cs->mixed || cs->no_lg) opt.logprobs = (float *)gu_ptr(dlp);
  if (cs->mixed || cs->special == RK_NAN || cs->group)
    opt.token_mask = (const uint32_t *)gu_ptr(dmask);
  if (cs->mixed) {
    opt.logit_softcap = 4.0f;
    opt.logit_bias_tokens = (const int32_t *)gu_ptr(dbt);
    opt.logit_bias_values = (const float *)gu_ptr(dbv);
    opt.logit_bias_count = 2;
    opt.repetition_penalty = 1.3f;
    opt.top_k = 50;
  }
  if (n) {
    opt.top_logprobs = n;
    opt.top_logprob_tokens = (int32_t *)gu_ptr(dlt);
    opt.top_logprob_values = (float *)gu_ptr(dlv);
  }
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, nd, !cs->no_lg, 0);
  gu_outputs_poison(ctx, &o);
  fs_problem dp = gu_problem(&lm, 1);
  fs_outputs out = gu_outputs_api(&o);
  CHECK(fs_context_set_noise(ctx, cs->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN) == FS_OK);
  CHECK_MSG(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK, "%s: %s", what,
            fs_last_error(ctx));
  CHECK(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  gu_outputs_fetch(ctx, &o);
  gu_outputs_check(&o, what);
  int32_t *rk = gu_malloc((nd + GU_GUARD) * 4);
  gu_download(ctx, rk, drk, (nd + GU_GUARD) * 4);
  long guard = 0;
  for (size_t i = nd; i < nd + GU_GUARD; i++) guard += rk[i] != -1;
  CHECK_MSG(guard == 0, "%s: %ld entries written past the ranks", what, guard);

  if (gu_fake_driver()) { /* every call was made; no kernel ran: nothing to compare */
    printf("ok %s: the call was made (the fake driver runs no kernel)\n", what);
  } else {
    fs_problem hp = gu_problem(&lm, 0);
    fs_sampling hs = s;
    if (cs->mixed) hs.temperatures = temps;
    int32_t *rtok = gu_malloc(nd * 4), *rrk = gu_malloc(nd * 4);
    int32_t *rlt = gu_malloc((size_t)B * (n ? n : 1) * 4);
    float *rlg = gu_malloc(nd * 4), *rlp = gu_malloc(nd * 4);
    float *rlv = gu_malloc((size_t)B * (n ? n : 1) * 4);
    fs_options ropt = opt;
    ropt.ranks = rrk;
    ropt.logprobs = rlp;
    ropt.token_mask = opt.token_mask ? mask : NULL;
    ropt.logit_bias_tokens = cs->mixed ? btok : NULL;
    ropt.logit_bias_values = cs->mixed ? bval : NULL;
    ropt.top_logprob_tokens = n ? rlt : NULL;
    ropt.top_logprob_values = n ? rlv : NULL;
    CHECK(fs_reference_sample_ex(&hp, &hs, cs->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN, &ropt,
                                 rtok, rlg, NULL) == FS_OK);
    long same_tok = 0, same_rank = 0, band = 0, bad = 0, sum = 0;
    for (size_t i = 0; i < nd; i++) {
      const int b = (int)(i / (size_t)S);
      const float d = cs->no_lg ? rlg[i] : o.h_logits[i];
      const int tok_same = o.h_tokens[i] == rtok[i];
      same_tok += tok_same;
      const char *why = NULL;
      if (rk[i] < 0 || rk[i] > cs->V) why = "out of 0..V";
      else if (tok_same && rk[i] == rrk[i]) same_rank++;
      else if (gu_rank_in_band(&lm, b, cs->mixed ? 4.0 : 0.0, d, rk[i])) band++;
      else why = "outside the band";
      sum += rk[i];
      if (why && bad++ < 8)
        fprintf(stderr, "%s: draw %zu (row %d): GPU token %d logit %.9g rank %d, reference %d "
                "%.9g %d (%s)\n", what, i, b, o.h_tokens[i], (double)d, rk[i], rtok[i],
                (double)rlg[i], rrk[i], why);
    }
    CHECK_MSG(bad == 0, "%s: %ld of %zu ranks wrong", what, bad, nd);
    if (opt.logprobs) { /* the draws' logprobs: the fused kernel's in draw mode, fsamp_filter's */
      float *lp = gu_malloc(nd * 4);
      gu_download(ctx, lp, dlp, nd * 4);
      long lp_bad = 0, lp_same = 0;
      for (size_t i = 0; i < nd; i++) {
        if (o.h_tokens[i] != rtok[i]) continue;
        lp_same++;
        const double lse = (double)rlg[i] - (double)rlp[i]; /* the reference row's */
        if (!(fabs((double)lp[i] - (double)rlp[i]) <= 2e-5 + 1e-6 * fabs(lse)) &&
            lp_bad++ < 5)
          fprintf(stderr, "%s: draw %zu (token %d): logprob %.8g, the reference's %.8g\n", what,
                  i, rtok[i], (double)lp[i], (double)rlp[i]);
      }
      CHECK_MSG(lp_same > 0 && lp_bad == 0, "%s: %ld of %ld draws' logprobs off the reference's",
                what, lp_bad, lp_same);
      printf("ok %s: %ld draws' logprobs the reference's\n", what, lp_same);
      free(lp);
    }
    CHECK_MSG(same_tok * 100 >= (long)nd * 99, "%s: only %ld of %zu draws the reference's", what,
              same_tok, nd);
    CHECK_MSG(band * 100 <= (long)nd, "%s: %ld of %zu ranks off the reference's", what, band, nd);
    if (cs->special != RK_RANDOM)
      CHECK_MSG(same_rank == (long)nd, "%s: integer logits: %ld of %zu ranks the reference's",
                what, same_rank, nd);
    if (cs->special == RK_NAN)
      CHECK_MSG(rk[2] == cs->V - 1, "%s: the masked-out row ranks %d, not V - 1", what, rk[2]);
    if (cs->mixed) { /* a +50 entry drawn: its rank is of its raw logit */
      long biased = 0;
      for (size_t i = 0; i < nd; i++)
        biased += o.h_tokens[i] == btok[2 * (i / (size_t)S)] && rk[i] > 1;
      CHECK_MSG(biased > 0, "%s: no draw of a +50 entry ranked below the top", what);
      printf("ok %s: %ld draws of +50 entries ranked by their raw logits\n", what, biased);
    }
    if (n) { /* a draw in its row's list at place j (no tie at j) has rank j + 1 */
      int32_t *lt = gu_malloc((size_t)B * n * 4);
      float *lv = gu_malloc((size_t)B * n * 4);
      gu_download(ctx, lt, dlt, (size_t)B * n * 4);
      gu_download(ctx, lv, dlv, (size_t)B * n * 4);
      long listed = 0, off = 0;
      for (size_t i = 0; i < nd; i++) {
        const int b = (int)(i / (size_t)S);
        for (int j = 0; j < n; j++) {
          const size_t k = (size_t)b * n + j;
          if (lt[k] != o.h_tokens[i] || (j + 1 < n && lv[k + 1] == lv[k])) continue;
          listed++;
          off += rk[i] != j + 1;
        }
      }
      CHECK_MSG(listed > 0 && off == 0, "%s: %ld of %ld listed draws not ranked by place", what,
                off, listed);
      printf("ok %s: %ld listed draws ranked by their place\n", what, listed);
      free(lt), free(lv);
    }
    printf("ok %s: %ld draws, %ld the reference's tokens, %ld its ranks, %ld in the band; mean "
           "rank %.1f\n", what, (long)nd, same_tok, same_rank, band, (double)sum / (double)nd);
    free(rtok), free(rrk), free(rlt), free(rlg), free(rlp), free(rlv);
  }
  free(rk), free(temps), free(mask), free(btok), free(bval);
  gu_free(ctx, dtemps), gu_free(ctx, dmask), gu_free(ctx, dbt), gu_free(ctx, dbv);
  gu_free(ctx, dlp), gu_free(ctx, drk), gu_free(ctx, dlt), gu_free(ctx, dlv);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

/* gu_group16_replay's check of the ranks: the replay's are the direct
** call's. */
typedef struct group_ranks {
  CUdeviceptr d;
  int32_t *direct, *replay;
  size_t n;
  const char *what;
} group_ranks;

static void group_ranks_check(fs_context *ctx, void *user, int replayed) {
  group_ranks *g = user;
  gu_download(ctx, replayed ? g->replay : g->direct, g->d, g->n * 4);
  if (!replayed) gu_poison(ctx, g->d, g->n * 4);
  else
    CHECK_MSG(!memcmp(g->direct, g->replay, g->n * 4),
              "%s group16: the replay's ranks differ from the direct call's", g->what);
}

/* Graph capture on plain's inputs, with `top` top logprobs (0: none; else
** fsamp_toplp_ranks counts them: the memset and the count replayed); with
** none also a first call inside a capture; then FS_NOISE_GROUP16's call and
** replay (gu_group16_replay). */
static void run_graph(fs_context *ctx, int top) {
  const rk_case *cs = &cases[0];
  const char *what = top ? "graph-toplp" : "graph";
  gu_lmhead lm;
  make_head(&lm, cs, 0x6a9full);
  gu_lmhead_upload(ctx, &lm);
  const size_t nd = (size_t)cs->B;
  CUdeviceptr drk = gu_alloc(ctx, nd * 4);
  CUdeviceptr dtt = gu_alloc(ctx, nd * (size_t)(top ? top : 1) * 4),
              dtv = gu_alloc(ctx, nd * (size_t)(top ? top : 1) * 4);
  fs_options opt = {.size = sizeof opt, .ranks = (int32_t *)gu_ptr(drk)};
  if (top) {
    opt.top_logprobs = top;
    opt.top_logprob_tokens = (int32_t *)gu_ptr(dtt);
    opt.top_logprob_values = (float *)gu_ptr(dtv);
  }
  fs_sampling s = {1.0f, NULL, 1, 3ull, NULL, 0ull, NULL};
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, nd, 1, 1);
  fs_problem dp = gu_problem(&lm, 1);
  fs_outputs out = gu_outputs_api(&o);
  CHECK(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK);
  int32_t *r0 = gu_malloc(nd * 4), *r1 = gu_malloc(nd * 4);
  gu_download(ctx, r0, drk, nd * 4);
  gu_poison(ctx, drk, nd * 4);

  const CUstream stream = gu_stream_new(ctx);
  CUgraph graph;
  CUgraphExec exec = gu_capture_exec(ctx, stream, &dp, &s, &opt, &out, &graph, what);
  snap g = gu_graph_replay(ctx, exec, stream, &o, what);
  gu_download(ctx, r1, drk, nd * 4);
  CHECK_MSG(!memcmp(r0, r1, nd * 4), "%s: the replay's ranks differ from the direct call's",
            what);
  group_ranks gr = {drk, r0, r1, nd, what};
  if (top) {
    printf("ok %s: the replay's ranks are the call's\n", what);
    gu_group16_replay(ctx, &dp, &s, &opt, &out, &o, &g, group_ranks_check, &gr, what);
    snap_free(&g);
    gu_graph_done(ctx, exec, graph, stream);
    free(r0), free(r1);
    gu_free(ctx, drk), gu_free(ctx, dtt), gu_free(ctx, dtv);
    gu_outputs_free(ctx, &o);
    gu_lmhead_free(ctx, &lm);
    return;
  }

  char msg[512];
  const int st2 = gu_capture_fresh(stream, &dp, &s, &opt, &out, msg, sizeof msg);
  CHECK_MSG(st2 == FS_NOT_PREPARED && (strstr(msg, "ranks") || strstr(msg, "before capture")),
            "%s: first call while capturing: status %d, %s", what, st2, msg);

  printf("ok %s: the replay's ranks are the call's; a first call in a capture refused\n",
         what);
  gu_group16_replay(ctx, &dp, &s, &opt, &out, &o, &g, group_ranks_check, &gr, what);
  snap_free(&g);
  gu_graph_done(ctx, exec, graph, stream);
  free(r0), free(r1);
  gu_free(ctx, drk), gu_free(ctx, dtt), gu_free(ctx, dtv);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run(ctx, &cases[i]);
  run_graph(ctx, 0);
  run_graph(ctx, 5);
  fs_context_destroy(ctx);
  return fs_test_done("test_ranks");
}
