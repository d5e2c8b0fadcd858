// fs-test-timeout: 300
/*
** test_targets.c: fs_options.target_tokens, target_logprobs and
** target_ranks on the GPU (since 0.3.18).  flashsampling.h: row b's target
** gets its raw logit z (after the soft-cap; before the bias, the penalty,
** the mask and the temperature) minus the row's log-sum-exp, and the count
** of the call's ids whose raw logit is >= z; NaN and 0 for a target not
** among the call's ids or with a NaN logit; the call draws as without them.
**
** Per case (below), fs_sample_ex with targets against fs_reference_sample_ex
** with the same options (double logits):
**  - each row's logprob is the reference's within 2e-5 + 1e-6 |lse|, or
**    both are NaN (NaN exactly where the reference's is);
**  - each rank is the reference's, or (at most one row in 50, none where
**    the logits are integers) within the band of the exact logits: at least
**    the count of ids whose exact logit is above z + tol and at most the
**    count above z - tol (tol = 1e-5 of the row's largest sum |h w| + 1e-6);
**  - nothing written past the [B] outputs;
**  - the draws are bitwise those of the same call asking for ranks instead
**    of targets (the same path, the pass that writes the logits: the
**    targets' kernels read them and change no draw).
** Row b's target, by b % 6: the row's largest raw logit's id (rank 1 but
** at ties), -1 (none: NaN, 0), an id of the call, an id outside the call's
** range (vocab_offset + V: NaN, 0), the bias's +50 entry (mixed: its raw
** logit's values, not its score), the row's smallest raw logit's id.
** Cases (bf16 unless named):
**   plain   B = 6, V = 1000, D = 256: one slice a row (slices of at least
**           1,024 float4s), fsamp_target writes the outputs itself;
**   one     B = 1, V = 151,936, D = 256: 37 slices, fsamp_target_out;
**   seven   B = 7, V = 151,936, D = 256: 37 slices (on 132 SMs), the
**           merge's second block of four rows a warp each half empty;
**   mixed   B = 7, V = 5011, D = 512, vocab_offset 37, 3 samples, per-row
**           temperatures with greedy rows, logprobs, a mask, soft-cap 4, a
**           bias with a penalty (+50 and -inf entries), top-k 50: the
**           filters' path, the targets taken before the bias;
**   fp16    B = 37, V = 5011, D = 256, vocab_offset 37;
**   ties    B = 16, V = 3000, D = 16, H and W in {-1, 0, 1}: integer
**           logits, every rank exact;
**   nan     B = 3, V = 10, D = 64: id 7's logit NaN in every row (every
**           logprob NaN, a target of 7 ranks 0, others count the non-NaN
**           logits);
**   big     B = 128, V = 151,936, D = 256, greedy (3 slices a row on an
**           H200: about two CTAs an SM in all);
**   wide    B = 300, V = 5011, D = 128 (one slice a row);
**   group16 B = 6, V = 5011, D = 256, vocab_offset 32, 3 samples, a mask,
**           under FS_NOISE_GROUP16.
** Then: top logprobs 20 and targets from the lists (a target at place j,
** no tie, ranks j + 1; its logprob the list's within 1e-6 relative);
** special values over 37 slices (V = 151,937, one row, integer logits:
** -inf ids rank V with logprob -inf, a NaN in one slice makes every logprob
** NaN and ranks 0 itself, a +inf id ranks 1 with logprob NaN, a row of -inf
** gives NaN and V; each against the reference, one output NULL on some
** calls and left unwritten); a CUDA graph over 37 slices a row (V =
** 151,936) captured after a first call replays the targets and reads new
** target ids written between replays; a fresh context's first such call
** inside a capture returns FS_NOT_PREPARED; the tensor-parallel call
** refuses targets with a sampled call's top_k (FS_INVALID_ARGUMENT naming
** target_tokens and top_k; test_tp_targets runs the ones it takes).
** Under tests/fakecuda (cpu/fake_targets: no kernel runs) every call is
** made and nothing compared but the refusals and the capture's status.
*/
#include "gpu_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TG_RANDOM, TG_TIES, TG_NAN };

typedef struct tg_case {
  const char *name;
  int B, D, V, S, dtype, offset, special;
  int mixed; /* 1: mask, soft-cap, bias, penalty, top-k, per-row T, logprobs */
  float T;
  int group; /* FS_NOISE_GROUP16, with a mask */
} tg_case;

static const tg_case cases[] = {
    {"plain", 6, 256, 1000, 1, FS_DTYPE_BF16, 0, TG_RANDOM, 0, 1.0f, 0},
    {"one", 1, 256, 151936, 1, FS_DTYPE_BF16, 0, TG_RANDOM, 0, 1.0f, 0},
    {"seven", 7, 256, 151936, 1, FS_DTYPE_BF16, 0, TG_RANDOM, 0, 1.0f, 0},
    {"mixed", 7, 512, 5011, 3, FS_DTYPE_BF16, 37, TG_RANDOM, 1, 1.0f, 0},
    {"fp16", 37, 256, 5011, 1, FS_DTYPE_FP16, 37, TG_RANDOM, 0, 1.0f, 0},
    {"ties", 16, 16, 3000, 1, FS_DTYPE_BF16, 0, TG_TIES, 0, 1.0f, 0},
    {"nan", 3, 64, 10, 1, FS_DTYPE_BF16, 0, TG_NAN, 0, 1.0f, 0},
    {"big", 128, 256, 151936, 1, FS_DTYPE_BF16, 0, TG_RANDOM, 0, 0.0f, 0},
    {"wide", 300, 128, 5011, 1, FS_DTYPE_BF16, 0, TG_RANDOM, 0, 1.0f, 0},
    {"group16", 6, 256, 5011, 3, FS_DTYPE_BF16, 32, TG_RANDOM, 0, 1.0f, 1},
};

static void make_head(gu_lmhead *lm, const tg_case *cs, unsigned long long seed) {
  gu_lmhead_init(lm, cs->B, cs->D, cs->V, cs->dtype, cs->offset, 0, 0, gu_w_scale(cs->D, 1.0),
                 seed);
  const int dt = cs->dtype, D = cs->D;
  unsigned long long st = seed ^ 0x99u;
  if (cs->special == TG_TIES) {
    gu_lmhead_ties(lm, &st);
  } else if (cs->special == TG_NAN) {
    for (int k = 0; k < D; k++) lm->W[(size_t)7 * lm->ws + k] = gu_encode(dt, NAN);
  }
}

/* Row b's exact raw logit of id v (local), capped where the case caps. */
static double raw_logit(const gu_lmhead *lm, const tg_case *cs, int b, int v, double *as) {
  return gu_logit_capped(lm, b, v, cs->mixed ? 4.0 : 0.0, as);
}

/* Row b's target by b % 6 (the file's comment); bias_plus: its +50 id. */
static int32_t pick_target(const gu_lmhead *lm, const tg_case *cs, int b, int32_t bias_plus) {
  int top = 0, low = 0;
  double zt = -INFINITY, zl = INFINITY;
  for (int v = 0; (b % 6 == 0 || b % 6 == 5) && v < cs->V; v++) {
    const double z = gu_logit(lm, b, v, NULL);
    if (z > zt) zt = z, top = v;
    if (z < zl) zl = z, low = v;
  }
  switch (b % 6) {
  case 0: return cs->offset + top;
  case 1: return -1;
  case 2: return cs->offset + (b * 131 + 5) % cs->V;
  case 3: return cs->offset + cs->V;
  case 4: return cs->mixed ? bias_plus : cs->offset + (b * 17) % cs->V;
  default: return cs->offset + low;
  }
}

/* The call's outputs beside its targets: tokens (and the ranks twin's). */
typedef struct tg_dev {
  CUdeviceptr temps, mask, bt, bv, lp, tt, tlp, trk, rk;
} tg_dev;

static void run(fs_context *ctx, const tg_case *cs) {
  char what[160];
  snprintf(what, sizeof what, "%s %s B=%d V=%d S=%d", cs->name, gu_dtype_name(cs->dtype), cs->B,
           cs->V, cs->S);
  const int B = cs->B, S = cs->S;
  gu_lmhead lm;
  make_head(&lm, cs, 0x5e1dull + (unsigned long long)B * 131u + (unsigned long long)cs->V);
  gu_lmhead_upload(ctx, &lm);
  const size_t nd = (size_t)B * S;
  float *temps = gu_malloc(sizeof(float) * (size_t)B);
  for (int b = 0; b < B; b++) temps[b] = b % 3 == 1 ? 0.0f : 0.6f + 0.2f * (float)(b % 5);
  const long long words = (cs->offset + cs->V + 31) / 32;
  uint32_t *mask = gu_malloc(sizeof(uint32_t) * (size_t)(B * words));
  unsigned long long ms = 0xbeefull;
  for (long long i = 0; i < B * words; i++) mask[i] = (uint32_t)fs_test_rand(&ms) | 0x10101010u;
  int32_t *btok = gu_malloc(sizeof(int32_t) * 2 * (size_t)B);
  float *bval = gu_malloc(sizeof(float) * 2 * (size_t)B);
  int32_t *tgt = gu_malloc(sizeof(int32_t) * (size_t)B);
  for (int b = 0; b < B; b++) {
    btok[2 * b] = cs->offset + (b * 97) % cs->V, bval[2 * b] = 50.0f;
    btok[2 * b + 1] = cs->offset + (b * 89 + 3) % cs->V, bval[2 * b + 1] = -INFINITY;
    tgt[b] = pick_target(&lm, cs, b, btok[2 * b]);
  }
  if (cs->special == TG_NAN) tgt[0] = 7, tgt[2] = 3;
  tg_dev d;
  d.temps = gu_upload_new(ctx, temps, sizeof(float) * (size_t)B);
  d.mask = gu_upload_new(ctx, mask, sizeof(uint32_t) * (size_t)(B * words));
  d.bt = gu_upload_new(ctx, btok, sizeof(int32_t) * 2 * (size_t)B);
  d.bv = gu_upload_new(ctx, bval, sizeof(float) * 2 * (size_t)B);
  d.lp = gu_alloc(ctx, nd * 4);
  d.tt = gu_upload_new(ctx, tgt, sizeof(int32_t) * (size_t)B);
  d.tlp = gu_alloc(ctx, ((size_t)B + GU_GUARD) * 4);
  d.trk = gu_alloc(ctx, ((size_t)B + GU_GUARD) * 4);
  d.rk = gu_alloc(ctx, nd * 4);
  gu_poison(ctx, d.tlp, ((size_t)B + GU_GUARD) * 4);
  gu_poison(ctx, d.trk, ((size_t)B + GU_GUARD) * 4);

  fs_sampling s = {cs->T, NULL, S, 20261205ull, NULL, 11ull, NULL};
  if (cs->mixed) s.temperatures = (const float *)gu_ptr(d.temps);
  fs_options opt = {.size = sizeof opt};
  if (cs->mixed) {
    opt.logprobs = (float *)gu_ptr(d.lp);
    opt.token_mask = (const uint32_t *)gu_ptr(d.mask);
    opt.logit_softcap = 4.0f;
    opt.logit_bias_tokens = (const int32_t *)gu_ptr(d.bt);
    opt.logit_bias_values = (const float *)gu_ptr(d.bv);
    opt.logit_bias_count = 2;
    opt.repetition_penalty = 1.3f;
    opt.top_k = 50;
  }
  if (cs->group) opt.token_mask = (const uint32_t *)gu_ptr(d.mask);
  fs_options twin = opt; /* ranks instead of targets: the same path's draws */
  twin.ranks = (int32_t *)gu_ptr(d.rk);
  opt.target_tokens = (const int32_t *)gu_ptr(d.tt);
  opt.target_logprobs = (float *)gu_ptr(d.tlp);
  opt.target_ranks = (int32_t *)gu_ptr(d.trk);
  gu_outputs o, ot;
  gu_outputs_alloc(ctx, &o, nd, 1, 0);
  gu_outputs_alloc(ctx, &ot, nd, 1, 0);
  gu_outputs_poison(ctx, &o);
  fs_problem dp = gu_problem(&lm, 1);
  fs_outputs out = gu_outputs_api(&o), outt = gu_outputs_api(&ot);
  CHECK(fs_context_set_noise(ctx, cs->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN) == FS_OK);
  CHECK_MSG(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK, "%s: %s", what,
            fs_last_error(ctx));
  CHECK_MSG(fs_sample_ex(ctx, &dp, &s, &twin, &outt, NULL) == FS_OK, "%s twin: %s", what,
            fs_last_error(ctx));
  CHECK(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  gu_outputs_fetch(ctx, &o);
  gu_outputs_fetch(ctx, &ot);
  gu_outputs_check(&o, what);
  float *lp = gu_malloc(((size_t)B + GU_GUARD) * 4);
  int32_t *rk = gu_malloc(((size_t)B + GU_GUARD) * 4);
  gu_download(ctx, lp, d.tlp, ((size_t)B + GU_GUARD) * 4);
  gu_download(ctx, rk, d.trk, ((size_t)B + GU_GUARD) * 4);
  long guard = 0;
  for (size_t i = (size_t)B; i < (size_t)B + GU_GUARD; i++)
    guard += rk[i] != -1 || gu_float_bits(lp[i]) != 0xffffffffu;
  CHECK_MSG(guard == 0, "%s: %ld entries written past the targets' outputs", what, guard);

  if (gu_fake_driver()) { /* every call was made; no kernel ran: nothing to compare */
    printf("ok %s: the calls were made (the fake driver runs no kernel)\n", what);
  } else {
    CHECK_MSG(!memcmp(o.h_tokens, ot.h_tokens, nd * 4),
              "%s: the draws differ from the same call's with ranks instead of targets", what);
    fs_problem hp = gu_problem(&lm, 0);
    fs_sampling hs = s;
    if (cs->mixed) hs.temperatures = temps;
    int32_t *rtok = gu_malloc(nd * 4), *rrk = gu_malloc((size_t)B * 4);
    float *rlp = gu_malloc((size_t)B * 4);
    fs_options ropt = opt;
    ropt.logprobs = NULL;
    ropt.token_mask = opt.token_mask ? mask : NULL;
    ropt.logit_bias_tokens = cs->mixed ? btok : NULL;
    ropt.logit_bias_values = cs->mixed ? bval : NULL;
    ropt.target_tokens = tgt;
    ropt.target_logprobs = rlp;
    ropt.target_ranks = rrk;
    CHECK(fs_reference_sample_ex(&hp, &hs, cs->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN, &ropt,
                                 rtok, NULL, NULL) == FS_OK);
    long same = 0, band = 0, bad = 0, nan = 0;
    for (int b = 0; b < B; b++) {
      const long long v = (long long)tgt[b] - cs->offset;
      const int valid = v >= 0 && v < cs->V;
      const double zt = valid ? raw_logit(&lm, cs, b, (int)v, NULL) : NAN;
      const char *why = NULL;
      if (isnan(rlp[b]) || isnan(lp[b])) {
        nan++;
        if (isnan(rlp[b]) != isnan(lp[b])) why = "NaN on one side";
      } else if (!(fabs((double)lp[b] - (double)rlp[b]) <= 2e-5 + 1e-6 * fabs(zt - rlp[b]))) {
        why = "logprob off";
      }
      if (!why && rk[b] == rrk[b]) same++;
      else if (!why && (rk[b] < 0 || rk[b] > cs->V)) why = "rank out of 0..V";
      else if (!why && valid && !isnan(zt) &&
               gu_rank_in_band(&lm, b, cs->mixed ? 4.0 : 0.0, zt, rk[b]))
        band++;
      else if (!why) why = "rank outside the band";
      if (why && bad++ < 8)
        fprintf(stderr, "%s: row %d target %d: logprob %.9g rank %d, the reference's %.9g %d "
                "(%s)\n", what, b, tgt[b], (double)lp[b], rk[b], (double)rlp[b], rrk[b], why);
    }
    CHECK_MSG(bad == 0, "%s: %ld of %d rows' targets wrong", what, bad, B);
    CHECK_MSG(band * 50 <= (long)B, "%s: %ld of %d ranks off the reference's", what, band, B);
    if (cs->special != TG_RANDOM)
      CHECK_MSG(same == (long)B, "%s: integer logits: %ld of %d ranks the reference's", what,
                same, B);
    for (int b = 0; b < B; b++) /* none and out of range: NaN and 0 */
      if (b % 6 == 1 || b % 6 == 3)
        CHECK_MSG(isnan(lp[b]) && rk[b] == 0, "%s: row %d (target %d): %g, rank %d", what, b,
                  tgt[b], (double)lp[b], rk[b]);
    if (cs->special == TG_NAN) {
      CHECK_MSG(nan == B && rk[0] == 0, "%s: %ld NaN logprobs, the NaN target ranks %d", what,
                nan, rk[0]);
      CHECK_MSG(rk[2] >= 1 && rk[2] <= cs->V - 1, "%s: row 2 ranks %d", what, rk[2]);
    }
    long ones = 0;
    for (int b = 0; b < B; b += 6) ones += rk[b] == 1;
    CHECK_MSG(cs->special != TG_RANDOM || ones == (B + 5) / 6,
              "%s: %ld of the rows' largest logits rank 1", what, ones);
    printf("ok %s: %d rows, %ld ranks the reference's, %ld in the band, %ld NaN logprobs; row "
           "0: %.6f rank %d\n", what, B, same, band, nan, (double)lp[0], rk[0]);
    free(rtok), free(rrk), free(rlp);
  }
  free(lp), free(rk), free(temps), free(mask), free(btok), free(bval), free(tgt);
  gu_free(ctx, d.temps), gu_free(ctx, d.mask), gu_free(ctx, d.bt), gu_free(ctx, d.bv);
  gu_free(ctx, d.lp), gu_free(ctx, d.tt), gu_free(ctx, d.tlp), gu_free(ctx, d.trk);
  gu_free(ctx, d.rk);
  gu_outputs_free(ctx, &o), gu_outputs_free(ctx, &ot);
  gu_lmhead_free(ctx, &lm);
}

/* plain's inputs with top logprobs 20: targets taken from the lists. */
static void run_toplp(fs_context *ctx) {
  const tg_case *cs = &cases[0];
  const char *what = "toplp";
  const int B = cs->B, n = 20;
  gu_lmhead lm;
  make_head(&lm, cs, 0x3377ull);
  gu_lmhead_upload(ctx, &lm);
  CUdeviceptr dlt = gu_alloc(ctx, (size_t)B * n * 4), dlv = gu_alloc(ctx, (size_t)B * n * 4);
  CUdeviceptr dtt = gu_alloc(ctx, (size_t)B * 4), dtl = gu_alloc(ctx, (size_t)B * 4),
              dtr = gu_alloc(ctx, (size_t)B * 4);
  fs_options opt = {.size = sizeof opt, .top_logprobs = n,
                    .top_logprob_tokens = (int32_t *)gu_ptr(dlt),
                    .top_logprob_values = (float *)gu_ptr(dlv)};
  fs_sampling s = {1.0f, NULL, 1, 5ull, NULL, 0ull, NULL};
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, (size_t)B, 1, 0);
  fs_problem dp = gu_problem(&lm, 1);
  fs_outputs out = gu_outputs_api(&o);
  CHECK(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK);
  int32_t *lt = gu_malloc((size_t)B * n * 4), *tgt = gu_malloc((size_t)B * 4);
  float *lv = gu_malloc((size_t)B * n * 4);
  gu_download(ctx, lt, dlt, (size_t)B * n * 4);
  gu_download(ctx, lv, dlv, (size_t)B * n * 4);
  for (int b = 0; b < B; b++) tgt[b] = gu_fake_driver() ? b : lt[(size_t)b * n + 3 * b];
  gu_upload(ctx, dtt, tgt, (size_t)B * 4);
  opt.target_tokens = (const int32_t *)gu_ptr(dtt);
  opt.target_logprobs = (float *)gu_ptr(dtl);
  opt.target_ranks = (int32_t *)gu_ptr(dtr);
  CHECK_MSG(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK, "%s: %s", what,
            fs_last_error(ctx));
  float *tl = gu_malloc((size_t)B * 4);
  int32_t *tr = gu_malloc((size_t)B * 4);
  gu_download(ctx, tl, dtl, (size_t)B * 4);
  gu_download(ctx, tr, dtr, (size_t)B * 4);
  long checked = 0;
  for (int b = 0; !gu_fake_driver() && b < B; b++) {
    const int j = 3 * b;
    const float v = lv[(size_t)b * n + j];
    if (lv[(size_t)b * n + j + 1] == v || (j > 0 && lv[(size_t)b * n + j - 1] == v)) continue;
    checked++;
    CHECK_MSG(tr[b] == j + 1 && fabsf(tl[b] - v) <= 1e-6f * fabsf(v) + 2e-6f,
              "%s: row %d: target %d at place %d: rank %d, logprob %.9g against the list's "
              "%.9g", what, b, tgt[b], j, tr[b], (double)tl[b], (double)v);
  }
  CHECK_MSG(checked > 0 || gu_fake_driver(), "%s: no untied place to check", what);
  printf("ok %s: %ld targets from the lists ranked by place, their logprobs the lists'\n", what,
         checked);
  free(lt), free(tgt), free(lv), free(tl), free(tr);
  gu_free(ctx, dlt), gu_free(ctx, dlv), gu_free(ctx, dtt), gu_free(ctx, dtl), gu_free(ctx, dtr);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

static int no_collective(void *user, void *buf, size_t count, int op, void *stream) {
  (void)user, (void)buf, (void)count, (void)op, (void)stream;
  return 0;
}

/* One row, V = 151,937 (37 slices, the last float4 a quarter in V), H =
** e_0 so that z_v = W[v][0] exactly, from {-1, 0, 1, 2} with the special
** values `kind` names: "-inf" (every 13th id), "nan" (id 100,000 alone: one
** slice's pair NaN), "+inf" (id 50,000 alone), "all -inf".  Each target of
** tg[] (row 0's, one call each; call i % 4 == 1 without the logprobs, 3
** without the ranks) gets
** the reference's logprob and rank exactly (integer logits: the lse within
** 1e-5), and want_lp / want_rk where given (NAN_LP: NaN, ANY: not checked). */
#define NAN_LP 1e30f
#define ANY (-2)
static void run_special(fs_context *ctx, const char *kind, const int32_t *tg, const float *lp,
                        const int *rk, int n) {
  const int V = 151937, D = 16;
  gu_lmhead lm;
  gu_lmhead_init(&lm, 1, D, V, FS_DTYPE_BF16, 0, 0, 0, 1.0, 0x51ull);
  static const float pick[] = {-1.0f, 0.0f, 1.0f, 2.0f};
  unsigned long long st = 0x5eedull;
  for (int k = 0; k < D; k++) lm.H[k] = gu_encode(FS_DTYPE_BF16, k ? 0.0f : 1.0f);
  for (int v = 0; v < V; v++) {
    float z = pick[fs_test_rand(&st) % 4];
    if (!strcmp(kind, "-inf") && v % 13 == 5) z = -INFINITY;
    if (!strcmp(kind, "nan") && v == 100000) z = NAN;
    if (!strcmp(kind, "+inf") && v == 50000) z = INFINITY;
    if (!strcmp(kind, "all -inf")) z = -INFINITY;
    for (int k = 0; k < D; k++) lm.W[(size_t)v * D + k] = gu_encode(FS_DTYPE_BF16, k ? 0.0f : z);
  }
  gu_lmhead_upload(ctx, &lm);
  CUdeviceptr dt = gu_alloc(ctx, 4), dl = gu_alloc(ctx, 4), dr = gu_alloc(ctx, 4);
  fs_problem dp = gu_problem(&lm, 1), hp = gu_problem(&lm, 0);
  fs_sampling s = {1.0f, NULL, 1, 9ull, NULL, 0ull, NULL};
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, 1, 1, 0);
  fs_outputs out = gu_outputs_api(&o);
  for (int i = 0; i < n; i++) {
    char what[96];
    snprintf(what, sizeof what, "special %s target %d", kind, tg[i]);
    gu_upload(ctx, dt, &tg[i], 4);
    gu_poison(ctx, dl, 4);
    gu_poison(ctx, dr, 4);
    fs_options opt = {.size = sizeof opt, .target_tokens = (const int32_t *)gu_ptr(dt),
                      .target_logprobs = i % 4 == 1 ? NULL : (float *)gu_ptr(dl),
                      .target_ranks = i % 4 == 3 ? NULL : (int32_t *)gu_ptr(dr)};
    CHECK_MSG(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK, "%s: %s", what,
              fs_last_error(ctx));
    float l;
    int32_t r, tok;
    gu_download(ctx, &l, dl, 4);
    gu_download(ctx, &r, dr, 4);
    if (gu_fake_driver()) continue;
    float rl;
    int32_t rr;
    fs_options ro = {.size = sizeof ro, .target_tokens = &tg[i], .target_logprobs = &rl,
                     .target_ranks = &rr};
    CHECK(fs_reference_sample_ex(&hp, &s, FS_NOISE_TOKEN, &ro, &tok, NULL, NULL) == FS_OK);
    if (opt.target_logprobs) {
      const int same = isnan(rl) ? isnan(l) : l == rl || fabsf(l - rl) <= 1e-5f;
      CHECK_MSG(same, "%s: logprob %.9g, the reference's %.9g", what, (double)l, (double)rl);
      if (lp[i] != (float)ANY)
        CHECK_MSG(lp[i] == NAN_LP ? isnan(l) : l == lp[i], "%s: logprob %.9g, not %.9g", what,
                  (double)l, (double)lp[i]);
    } else {
      CHECK_MSG(gu_float_bits(l) == 0xffffffffu, "%s: logprobs NULL but written", what);
    }
    if (opt.target_ranks) {
      CHECK_MSG(r == rr, "%s: rank %d, the reference's %d", what, r, rr);
      if (rk[i] != ANY) CHECK_MSG(r == rk[i], "%s: rank %d, not %d", what, r, rk[i]);
    } else {
      CHECK_MSG(r == -1, "%s: ranks NULL but written", what);
    }
    printf("ok %s: logprob %.6g, rank %d\n", what, (double)l, r);
  }
  gu_free(ctx, dt), gu_free(ctx, dl), gu_free(ctx, dr);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

static void run_specials(fs_context *ctx) {
  const int V = 151937;
  /* -inf: a -inf id ranks V with logprob -inf; an id at 2 ranks the 2s */
  const int32_t t1[] = {5, 7, 19, 151935};
  const float l1[] = {-INFINITY, ANY, ANY, ANY};
  const int r1[] = {V, ANY, ANY, ANY};
  run_special(ctx, "-inf", t1, l1, r1, 4);
  /* NaN in one slice: every logprob NaN; the NaN id ranks 0 */
  const int32_t t2[] = {100000, 3, 151936};
  const float l2[] = {NAN_LP, NAN_LP, NAN_LP};
  const int r2[] = {0, ANY, ANY};
  run_special(ctx, "nan", t2, l2, r2, 3);
  /* +inf: the +inf id ranks 1; every logprob NaN */
  const int32_t t3[] = {50000, 4};
  const float l3[] = {NAN_LP, NAN_LP};
  const int r3[] = {1, ANY};
  run_special(ctx, "+inf", t3, l3, r3, 2);
  /* every logit -inf: logprob NaN, rank V */
  const int32_t t4[] = {0, 151936};
  const float l4[] = {NAN_LP, NAN_LP};
  const int r4[] = {V, V};
  run_special(ctx, "all -inf", t4, l4, r4, 2);
}

/* Graph capture on plain's inputs: the replay gives the direct call's
** targets' outputs, and reads target ids written between replays; a fresh
** context's first such call in a capture is refused; the tensor-parallel
** call refuses targets with top_k in a sampled call. */
static void run_graph(fs_context *ctx) {
  tg_case wide = cases[0]; /* V = 151,936: 37 slices a row, fsamp_target_out captured too */
  wide.V = 151936;
  const tg_case *cs = &wide;
  const char *what = "graph";
  const int B = cs->B;
  gu_lmhead lm;
  make_head(&lm, cs, 0x6a9full);
  gu_lmhead_upload(ctx, &lm);
  int32_t t0[6] = {0, 1, 2, 3, 4, 5}, t1[6] = {999, 0, 500, -1, 7, 1000};
  CUdeviceptr dtt = gu_upload_new(ctx, t0, sizeof t0), dtl = gu_alloc(ctx, (size_t)B * 4),
              dtr = gu_alloc(ctx, (size_t)B * 4);
  fs_options opt = {.size = sizeof opt, .target_tokens = (const int32_t *)gu_ptr(dtt),
                    .target_logprobs = (float *)gu_ptr(dtl),
                    .target_ranks = (int32_t *)gu_ptr(dtr)};
  fs_sampling s = {1.0f, NULL, 1, 3ull, NULL, 0ull, NULL};
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, (size_t)B, 1, 1);
  fs_problem dp = gu_problem(&lm, 1);
  fs_outputs out = gu_outputs_api(&o);
  float l[2][6], lr[2][6];
  int32_t r[2][6], rr[2][6];
  for (int k = 0; k < 2; k++) { /* direct calls with each set of ids */
    gu_upload(ctx, dtt, k ? t1 : t0, sizeof t0);
    CHECK(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK);
    gu_download(ctx, l[k], dtl, sizeof l[k]);
    gu_download(ctx, r[k], dtr, sizeof r[k]);
  }
  gu_upload(ctx, dtt, t0, sizeof t0);
  const CUstream stream = gu_stream_new(ctx);
  CUgraph graph;
  CUgraphExec exec = gu_capture_exec(ctx, stream, &dp, &s, &opt, &out, &graph, what);
  for (int k = 0; k < 2; k++) {
    gu_upload(ctx, dtt, k ? t1 : t0, sizeof t0);
    gu_poison(ctx, dtl, (size_t)B * 4);
    gu_poison(ctx, dtr, (size_t)B * 4);
    snap g = gu_graph_replay(ctx, exec, stream, &o, what);
    snap_free(&g);
    gu_download(ctx, lr[k], dtl, sizeof lr[k]);
    gu_download(ctx, rr[k], dtr, sizeof rr[k]);
    CHECK_MSG(gu_fake_driver() ||
                  (!memcmp(l[k], lr[k], sizeof l[k]) && !memcmp(r[k], rr[k], sizeof r[k])),
              "%s: replay %d's targets' outputs differ from the direct call's", what, k);
  }
  CHECK_MSG(gu_fake_driver() || memcmp(r[0], r[1], sizeof r[0]),
            "%s: the second ids' ranks are the first's", what);
  char msg[512];
  const int st2 = gu_capture_fresh(stream, &dp, &s, &opt, &out, msg, sizeof msg);
  CHECK_MSG(st2 == FS_NOT_PREPARED && strstr(msg, "target_tokens"),
            "%s: first call while capturing: status %d, %s", what, st2, msg);
  gu_graph_done(ctx, exec, graph, stream);
  fs_options ok = opt; /* sampled, with top_k: the filters' path, which TP targets refuse */
  ok.top_k = 50;
  const int st3 = fs_sample_tp_ex(ctx, &dp, &s, &ok, &out, no_collective, NULL, NULL);
  CHECK_MSG(st3 == FS_INVALID_ARGUMENT && strstr(fs_last_error(ctx), "target_tokens") &&
                strstr(fs_last_error(ctx), "top_k"),
            "%s: fs_sample_tp_ex with targets and top_k: status %d, %s", what, st3,
            fs_last_error(ctx));
  printf("ok %s: replays read the targets; a first call in a capture refused (%s); the "
         "tensor-parallel call with top_k refused (%s)\n", what, msg, fs_last_error(ctx));
  gu_free(ctx, dtt), gu_free(ctx, dtl), gu_free(ctx, dtr);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run(ctx, &cases[i]);
  run_toplp(ctx);
  run_specials(ctx);
  run_graph(ctx);
  fs_context_destroy(ctx);
  return fs_test_done("test_targets");
}
