// fs-test-timeout: 300
/*
** test_bias.c: fs_options.logit_bias_* on the GPU.  flashsampling.h: entry j
** of row b adds logit_bias_values[b * count + j] to the logit of token
** logit_bias_tokens[b * count + j] after the soft-cap and before the mask,
** the temperature, the noise and greedy rows; ids outside the call's shard are
** ignored (-1 pads), a token listed twice gets the sum, and the returned
** logits and logprobs stay those of the raw logits.
**
** Per case (below), fs_sample_ex with the bias against fs_reference_sample_ex
** with the same options (host copies) on the same inputs:
**  - at least 99% of the tokens equal the reference's, and every token that
**    differs is a near-tie: the reference's score of its own winner and the
**    GPU's score of its token (outputs->keys) are within 1e-4 (1 + |s|);
**  - where the token is the reference's, the returned logit is within 2e-5
**    (1 + |z|) of the reference's (raw, unbiased) logit;
**  - every logprob is z - lse within 2e-5 + 1e-6 |lse| (lse: the reference
**    row's log-sum-exp of the raw logits);
**  - no token is one the row bans (a -inf value, or the mask);
**  - the bias bites: the same call without it gives other tokens for at least
**    a tenth of the draws, and at least a tenth of the draws are biased ids
**    (so that the biased tokens' own kernel is what chose them).
** Then, once per dtype and B on the default kernels: a CUDA graph captured
** after a first call replays it ("mixed", "long", "group16-mixed"), and a
** first call with a bias inside a
** capture returns FS_NOT_PREPARED (the tensor-parallel calls: test_tp).
** Cases, bf16 and fp16, B = 5 and 37 (with FS_TEST_FAMILY, on that family's
** variant nearest each B):
**   plain   V = 1000, D = 256, T = 1, one sample, 8 entries a row, logprobs;
**   mixed   V = 5011, D = 1024, vocab_offset 37, per-row temperatures with
**           greedy rows, 3 samples, a token mask of density 1/2, soft-cap 2,
**           40 entries a row with repeats, pads, other shards' ids and -inf;
**   tiles   V = 65537, D = 256, 300 entries a row, logprobs;
**   seeds   V = 3001, D = 256, vocab_offset 96, per-row seeds and offsets,
**           6 samples (the merge's warps take two each), 40 entries a row
**           with a repeat 33 entries apart, logprobs;
**   greedy  V = 3001, D = 256, scalar T = 0 (the greedy call mode's kernel);
**   nan     V = 1000, D = 256: row 0's mask allows only its first id, whose
**           bias is NaN (an allowed biased NaN ranks as -inf, so it is drawn
**           as the first of the row's -inf ids), and row 1's logits are all
**           NaN (a NaN in its H: its biased ids score NaN, ranked as -inf, and
**           its smallest biased id beats the unbiased NaNs);
**   penalty V = 3001, D = 256, 2 samples, 64 entries a row, most of value 0
**           (a prompt's tokens), a repetition penalty of 0.25 (since 0.3.9:
**           the listed tokens' positive logits x 4, negative ones / 4);
**   penalties the mixed case's options with 40 entries a row (most of value
**           0) and per-row repetition penalties (0.05 on half the rows, 4,
**           NaN, -1 and +inf on the rest, past a decoy scalar of 5);
** and the long lists (since 0.3.11: more than 1024 entries a row take the
** filters' path, after fsamp_bias_dedup's sort has made them distinct):
**   long    the mixed case's options with 3000 entries a row (repeats 2 and
**           1500 entries apart among them);
**   longest V = 40000, FS_MAX_LOGIT_BIAS (16384) entries a row (a token
**           listed up to ~6 times), 2 samples, logprobs, the penalty case's
**           values and repetition penalty (a long prompt's list);
**   longgreedy V = 5011, 2000 entries a row, scalar T = 0;
**   model   V = 3001, D = 4096, 1000 entries a row, logprobs: at B = 37 the
**           cost model sends it to the filters' path (not made distinct), at
**           B = 5 to the fused kernel's (runtime/sample.c, fs_filter_path).
** and under FS_NOISE_GROUP16 (since 0.3.17: the biased ids' groups of 16
** drawn by fsamp_bias_gmerge; the reference draws its groups):
**   group16, group16-mixed, group16-seeds, group16-penalties and
**   group16-greedy: plain (with 40 entries a row: at 8 no B = 5 draw moved
**   without the bias on the H200), mixed (vocab_offset 32), seeds, penalties
**   (vocab_offset 32) and greedy's inputs; in group16-greedy (40 entries)
**   entries 0 and 32 (the same merge lane's) tie at +inf, the larger id
**   first: every draw must be the smaller id, as the reference's (a lane
**   keeping its first equal score drew the larger; the review of 0.3.17;
**   +1e9 ties in fp32 but not in the reference's double sums).
** gpu/bias_long runs every case but the group16 ones (which take the fused
** path whatever FS_BIAS_SHORT says) through the long lists' path
** (FS_BIAS_SHORT=0 in the environment).
** In the three penalty cases the draws compared with are those of the same
** call without the penalty (the bias kept): at least a tenth must differ.
*/
#include "gpu_family.h"
#include "gpu_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a case adds (bias_case.extra). */
enum { ROW_SEEDS = 1, GREEDY = 2, NAN_ROWS = 4, PENALTY = 8, ROW_PENALTIES = 16, FAR = 32,
       GROUP = 64 /* FS_NOISE_GROUP16 */, TIE = 128 };

/* The repetition penalty of the PENALTY cases: the scalar, and row b's
** (ROW_PENALTIES): 0.05 on half the rows (the listed tokens' capped logits,
** within +-2, x 20: they win most draws; 0.2 won none of B = 5's 6 draws on
** the H200), 4 on an eighth, none (NaN, -1, +inf) on the rest. */
#define CASE_REP 0.25f
static float row_rep(int b) {
  static const float r[] = {0.05f, 4.0f, NAN, 0.05f, -1.0f, 0.05f, INFINITY, 0.05f};
  return r[b % 8];
}

typedef struct bias_case {
  const char *name;
  int V, D, offset, S, mixed, logprobs, count;
  float c;
  unsigned long long seed;
  int extra;
} bias_case;

static const bias_case cases[] = {
    {"plain", 1000, 256, 0, 1, 0, 1, 8, 0.0f, 1, 0},
    {"mixed", 5011, 1024, 37, 3, 1, 1, 40, 2.0f, 2, 0},
    {"tiles", 65537, 256, 0, 1, 0, 1, 300, 0.0f, 3, 0},
    {"seeds", 3001, 256, 96, 6, 0, 1, 40, 0.0f, 4, ROW_SEEDS},
    {"greedy", 3001, 256, 0, 1, 0, 0, 8, 0.0f, 5, GREEDY},
    {"nan", 1000, 256, 0, 1, 0, 0, 8, 0.0f, 6, NAN_ROWS},
    {"penalty", 3001, 256, 0, 2, 0, 1, 64, 0.0f, 7, PENALTY},
    {"penalties", 5011, 1024, 37, 3, 1, 1, 40, 2.0f, 8, PENALTY | ROW_PENALTIES},
    {"long", 5011, 1024, 37, 3, 1, 1, 3000, 2.0f, 9, FAR},
    {"longest", 40000, 256, 0, 2, 0, 1, FS_MAX_LOGIT_BIAS, 0.0f, 10, PENALTY},
    {"longgreedy", 5011, 256, 0, 1, 0, 0, 2000, 0.0f, 11, GREEDY},
    {"model", 3001, 4096, 0, 1, 0, 1, 1000, 0.0f, 12, 0},
    {"group16", 1000, 256, 0, 1, 0, 1, 40, 0.0f, 13, GROUP},
    {"group16-mixed", 5011, 1024, 32, 3, 1, 1, 40, 2.0f, 14, GROUP},
    {"group16-seeds", 3001, 256, 96, 6, 0, 1, 40, 0.0f, 15, GROUP | ROW_SEEDS},
    {"group16-penalties", 5011, 1024, 32, 3, 1, 1, 40, 2.0f, 16, GROUP | PENALTY | ROW_PENALTIES},
    {"group16-greedy", 3001, 256, 0, 1, 0, 0, 40, 0.0f, 17, GROUP | GREEDY | TIE},
};

static unsigned long long bias_rand(unsigned long long *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 17;
}

/* A row's entries: ids of the shard mostly (positive values up to +6 so that
** the biased tokens win often), and in "mixed" repeats, pads, ids of other
** shards and a -inf. */
static void make_bias(const bias_case *cs, int B, int32_t *tok, float *val) {
  unsigned long long r = 0xb1a5ull + cs->seed * 977u + (unsigned long long)B;
  for (int b = 0; b < B; b++)
    for (int j = 0; j < cs->count; j++) {
      const size_t i = (size_t)b * cs->count + j;
      tok[i] = cs->offset + (int32_t)(bias_rand(&r) % (unsigned long long)cs->V);
      val[i] = (float)((double)(bias_rand(&r) % 1201) / 100.0 - 4.0); /* [-4, 8] */
      if (cs->extra & PENALTY) /* most entries a prompt's: the penalty alone */
        val[i] = j % 4 ? 0.0f : val[i] / 8.0f;
      if ((cs->extra & ROW_SEEDS) && j == 35) tok[i] = tok[i - 33]; /* across 32 entries */
      if ((cs->extra & FAR) && j >= 1500 && j % 10 == 1) tok[i] = tok[i - 1500];
      if ((cs->extra & NAN_ROWS) && b == 0 && j == 0) /* the only id row 0's mask allows */
        tok[i] = cs->offset, val[i] = NAN;
      /* entries 0 and 32 (one merge lane's, the larger id first) tie at +inf
      ** (in fp32 and in the reference's double): the smaller id must win */
      if ((cs->extra & TIE) && (j == 0 || j == 32))
        tok[i] = cs->offset + (j ? 100 : 900), val[i] = INFINITY;
      if (!cs->mixed) continue;
      if (j % 10 == 3) tok[i] = -1;                              /* a pad */
      if (j % 10 == 5) tok[i] = cs->offset + cs->V + (int32_t)j; /* another shard's */
      if (j % 10 == 6 && cs->offset) tok[i] = (int32_t)j % cs->offset;
      if (j % 10 == 7) tok[i] = tok[i - 2];                      /* a repeat */
      if (j % 10 == 8) val[i] = -INFINITY;                       /* a ban */
    }
}

/* Draws with opt on the device into o. */
static void draw(fs_context *ctx, const fs_problem *dp, const fs_sampling *s,
                 const fs_options *opt, gu_outputs *o, const char *what) {
  gu_outputs_poison(ctx, o);
  fs_outputs out = gu_outputs_api(o);
  const int st = fs_sample_ex(ctx, dp, s, opt, &out, NULL);
  CHECK_MSG(st == FS_OK, "%s: fs_sample_ex: %s", what, fs_last_error(ctx));
  gu_outputs_fetch(ctx, o);
}

/* Is token t banned in row b: a -inf entry (TIE's +inf ones are not bans), or
** the mask. */
static int banned(const bias_case *cs, const int32_t *tok, const float *val,
                  const uint32_t *mask, long long words, int b, int t) {
  for (int j = 0; j < cs->count; j++)
    if (tok[(size_t)b * cs->count + j] == t && val[(size_t)b * cs->count + j] == -INFINITY)
      return 1;
  return mask && !(mask[(size_t)b * words + (t >> 5)] >> (t & 31) & 1u);
}

static void run(fs_context *ctx, const bias_case *cs, int B, int dtype) {
  char what[160];
  snprintf(what, sizeof what, "%s %s B=%d", cs->name, gu_dtype_name(dtype), B);
  gu_lmhead lm; /* logits of sd ~1 */
  gu_lmhead_init(&lm, B, cs->D, cs->V, dtype, cs->offset, 0, 0, gu_w_scale(cs->D, 1.0),
                 0xb1a5ull + (unsigned long long)B * 31u + cs->seed * 7919u);
  if (cs->extra & NAN_ROWS) /* row 1's logits all NaN */
    lm.H[1 * lm.hs] = dtype == FS_DTYPE_BF16 ? 0x7FC0u : 0x7E00u;
  gu_lmhead_upload(ctx, &lm);
  const int S = cs->S;
  const size_t n = (size_t)B * S, ne = (size_t)B * cs->count;
  float *temps = gu_malloc(sizeof(float) * (size_t)B);
  for (int b = 0; b < B; b++) temps[b] = b % 3 == 1 ? 0.0f : 0.6f + 0.2f * (float)(b % 5);
  CUdeviceptr dtemps = cs->mixed ? gu_upload_new(ctx, temps, sizeof(float) * (size_t)B) : 0;
  const long long words = (cs->offset + cs->V + 31) / 32;
  uint32_t *mask = gu_malloc(sizeof(uint32_t) * (size_t)(B * words));
  unsigned long long ms = 0x50f7ull + (unsigned long long)B;
  for (long long i = 0; i < B * words; i++) mask[i] = (uint32_t)bias_rand(&ms);
  if (cs->extra & NAN_ROWS) { /* every id allowed, but row 0 only its first */
    for (long long i = 0; i < B * words; i++) mask[i] = i < words ? 0u : 0xffffffffu;
    mask[cs->offset / 32] = 1u << (cs->offset % 32);
  }
  const int masked = cs->mixed || (cs->extra & NAN_ROWS);
  CUdeviceptr dmask =
      masked ? gu_upload_new(ctx, mask, sizeof(uint32_t) * (size_t)(B * words)) : 0;
  uint64_t *seeds = gu_malloc(sizeof(uint64_t) * (size_t)B);
  uint64_t *offs = gu_malloc(sizeof(uint64_t) * (size_t)B);
  for (int b = 0; b < B; b++) seeds[b] = 0x5eed0000ull + (uint64_t)b * 977u, offs[b] = 3u * b;
  const int rs = cs->extra & ROW_SEEDS;
  CUdeviceptr dseeds = rs ? gu_upload_new(ctx, seeds, sizeof(uint64_t) * (size_t)B) : 0;
  CUdeviceptr doffs = rs ? gu_upload_new(ctx, offs, sizeof(uint64_t) * (size_t)B) : 0;
  int32_t *tok = gu_malloc(sizeof(int32_t) * ne);
  float *val = gu_malloc(sizeof(float) * ne);
  make_bias(cs, B, tok, val);
  CUdeviceptr dtok = gu_upload_new(ctx, tok, sizeof(int32_t) * ne);
  CUdeviceptr dval = gu_upload_new(ctx, val, sizeof(float) * ne);
  const int pen = cs->extra & PENALTY, rowpen = cs->extra & ROW_PENALTIES;
  float *reps = gu_malloc(sizeof(float) * (size_t)B);
  for (int b = 0; b < B; b++) reps[b] = row_rep(b);
  CUdeviceptr dreps = rowpen ? gu_upload_new(ctx, reps, sizeof(float) * (size_t)B) : 0;

  fs_sampling s = {cs->extra & GREEDY ? 0.0f : 1.0f, NULL, S, 20261202ull + cs->seed, NULL, 11ull,
                   NULL};
  s.temperatures = cs->mixed ? (const float *)gu_ptr(dtemps) : NULL;
  s.seeds = rs ? (const uint64_t *)gu_ptr(dseeds) : NULL;
  s.offsets = rs ? (const uint64_t *)gu_ptr(doffs) : NULL;
  gu_outputs o, o2;
  gu_outputs_alloc(ctx, &o, n, 1, 1);
  gu_outputs_alloc(ctx, &o2, n, 0, 0);
  CUdeviceptr dlp = cs->logprobs ? gu_alloc(ctx, n * sizeof(float)) : 0;
  fs_problem dp = gu_problem(&lm, 1);
  const int noise = cs->extra & GROUP ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
  CHECK(fs_context_set_noise(ctx, noise) == FS_OK);
  fs_options opt = {.size = sizeof opt,
                    .token_mask = masked ? (const uint32_t *)gu_ptr(dmask) : NULL,
                    .logprobs = cs->logprobs ? (float *)gu_ptr(dlp) : NULL,
                    .logit_softcap = cs->c, .logit_bias_tokens = (const int32_t *)gu_ptr(dtok),
                    .logit_bias_values = (const float *)gu_ptr(dval),
                    .logit_bias_count = cs->count,
                    .repetition_penalty = pen ? (rowpen ? 5.0f /* a decoy */ : CASE_REP) : 0.0f,
                    .repetition_penalties = rowpen ? (const float *)gu_ptr(dreps) : NULL};
  draw(ctx, &dp, &s, &opt, &o, what);
  gu_outputs_check(&o, what);
  float *lp = gu_malloc(n * sizeof(float));
  if (dlp) gu_download(ctx, lp, dlp, n * sizeof(float));
  /* the same call without the bias (with a penalty: without the penalty, the
  ** bias kept): other tokens */
  if (pen) opt.repetition_penalty = 0.0f, opt.repetition_penalties = NULL;
  else opt.logit_bias_count = 0;
  opt.logprobs = NULL;
  draw(ctx, &dp, &s, &opt, &o2, what);

  /* the reference, host pointers */
  fs_problem hp = gu_problem(&lm, 0);
  fs_sampling hs = s;
  hs.temperatures = cs->mixed ? temps : NULL;
  hs.seeds = rs ? seeds : NULL;
  hs.offsets = rs ? offs : NULL;
  int32_t *rtok = gu_malloc(sizeof(int32_t) * n);
  float *rlogit = gu_malloc(sizeof(float) * n), *rlp = gu_malloc(sizeof(float) * n);
  uint64_t *rkey = gu_malloc(sizeof(uint64_t) * n);
  const fs_options ropt = {.size = sizeof ropt, .token_mask = masked ? mask : NULL,
                           .logprobs = rlp, .logit_softcap = cs->c, .logit_bias_tokens = tok,
                           .logit_bias_values = val, .logit_bias_count = cs->count,
                           .repetition_penalty = pen && !rowpen ? CASE_REP : 0.0f,
                           .repetition_penalties = rowpen ? reps : NULL};
  CHECK(fs_reference_sample_ex(&hp, &hs, noise, &ropt, rtok, rlogit, rkey) == FS_OK);
  CHECK(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);

  long same = 0, bad = 0, differ = 0, biased = 0;
  double worst_lp = 0.0;
  for (size_t i = 0; i < n; i++) {
    const int b = (int)(i / (size_t)S), t = o.h_tokens[i];
    differ += o2.h_tokens[i] != t;
    for (int j = 0; j < cs->count; j++)
      if (tok[(size_t)b * cs->count + j] == t) {
        biased++;
        break;
      }
    if (banned(cs, tok, val, masked ? mask : NULL, words, b, t) && bad++ < 5)
      fprintf(stderr, "%s: draw %zu: token %d is banned in row %d\n", what, i, t, b);
    same += gu_vs_reference(what, i, &o, cs->logprobs ? lp : NULL, rtok, rlogit, rkey, rlp,
                            &bad, &worst_lp);
  }
  CHECK_MSG(bad == 0, "%s: %ld draws wrong", what, bad);
  long tie_off = 0; /* TIE: every draw the smaller of the two tied ids */
  for (size_t i = 0; i < n && (cs->extra & TIE); i++) tie_off += o.h_tokens[i] != cs->offset + 100;
  CHECK_MSG(tie_off == 0, "%s: %ld draws not the smaller of two tied ids", what, tie_off);
  CHECK_MSG(same * 100 >= (long)n * 99, "%s: only %ld of %zu tokens are the reference's", what,
            same, n);
  CHECK_MSG(differ * 10 >= (long)n, "%s: only %ld of %zu tokens change without the %s: the "
            "case does not test it", what, differ, n, pen ? "penalty" : "bias");
  CHECK_MSG(biased * 10 >= (long)n, "%s: only %ld of %zu draws are biased tokens", what,
            biased, n);
  printf("ok %s: %zu draws, %ld the reference's tokens, %ld biased ids, %ld other without the "
         "%s, worst logprob error %.2g\n", what, n, same, biased, differ,
         pen ? "penalty" : "bias", worst_lp);

  free(lp);
  free(rtok);
  free(rlogit);
  free(rlp);
  free(rkey);
  free(temps);
  free(mask);
  free(tok);
  free(val);
  free(seeds);
  free(offs);
  free(reps);
  gu_free(ctx, dreps);
  gu_free(ctx, dseeds);
  gu_free(ctx, doffs);
  gu_free(ctx, dlp);
  gu_free(ctx, dtemps);
  gu_free(ctx, dmask);
  gu_free(ctx, dtok);
  gu_free(ctx, dval);
  gu_outputs_free(ctx, &o);
  gu_outputs_free(ctx, &o2);
  gu_lmhead_free(ctx, &lm);
}

/* A CUDA graph captured after a first call with case cs's bias ("mixed" and
** "long": logprobs, soft-cap, per-row repetition penalties) replays it (tokens and keys bitwise); a fresh context's first call
** with a bias inside a capture is refused with FS_NOT_PREPARED naming the
** option.  (The tensor-parallel calls with a bias: test_tp.) */
static void run_graph(fs_context *ctx, const bias_case *cs, int B, int dtype) {
  char what[160];
  snprintf(what, sizeof what, "graph %s %s B=%d", cs->name, gu_dtype_name(dtype), B);
  const char *bs = getenv("FS_BIAS_SHORT"); /* gpu/bias_long: 0 */
  const int long_list = cs->count > (bs ? atoi(bs) : 1024); /* the filters' path */
  const int S = cs->S;
  const size_t n = (size_t)B * S, ne = (size_t)B * cs->count;
  gu_lmhead lm;
  gu_lmhead_init(&lm, B, cs->D, cs->V, dtype, 0, 0, 0, gu_w_scale(cs->D, 1.0),
                 0x7e5ull + (unsigned long long)B);
  gu_lmhead_upload(ctx, &lm);
  int32_t *tok = gu_malloc(sizeof(int32_t) * ne);
  float *val = gu_malloc(sizeof(float) * ne);
  bias_case c0 = *cs;
  c0.offset = 0;
  make_bias(&c0, B, tok, val);
  CUdeviceptr dtok = gu_upload_new(ctx, tok, sizeof(int32_t) * ne);
  CUdeviceptr dval = gu_upload_new(ctx, val, sizeof(float) * ne);
  float *reps = gu_malloc(sizeof(float) * (size_t)B);
  for (int b = 0; b < B; b++) reps[b] = row_rep(b);
  CUdeviceptr dreps = gu_upload_new(ctx, reps, sizeof(float) * (size_t)B);
  CUdeviceptr dlp = gu_alloc(ctx, n * sizeof(float));
  fs_sampling s = {0.8f, NULL, S, 77ull, NULL, 5ull, NULL};
  fs_options opt = {.size = sizeof opt, .logprobs = (float *)gu_ptr(dlp), .logit_softcap = 2.0f,
                    .logit_bias_tokens = (const int32_t *)gu_ptr(dtok),
                    .logit_bias_values = (const float *)gu_ptr(dval),
                    .logit_bias_count = cs->count,
                    .repetition_penalties = (const float *)gu_ptr(dreps)};
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, n, 1, 1);
  fs_problem dp = gu_problem(&lm, 1);
  CHECK(fs_context_set_noise(ctx, cs->extra & GROUP ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN) ==
        FS_OK);
  draw(ctx, &dp, &s, &opt, &o, what);
  snap whole = snap_take(&o);

/* a CUDA graph of the (already made) call replays it */
  CUstream stream;
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  gu_pop(ctx);
  fs_outputs out = gu_outputs_api(&o);
  CUgraph graph;
  CUgraphExec exec = gu_capture_exec(ctx, stream, &dp, &s, &opt, &out, &graph, what);
  snap g = gu_graph_replay(ctx, exec, stream, &o, what);
  CHECK_MSG(!memcmp(g.tok, whole.tok, n * sizeof *g.tok) &&
                !memcmp(g.key, whole.key, n * sizeof *g.key),
            "%s: the replay differs from the direct call", what);
  snap_free(&g);
  CHECK(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);

  /* a fresh context's first call with a bias, inside a capture: refused */
  char msg[512];
  const int st2 = gu_capture_fresh(stream, &dp, &s, &opt, &out, msg, sizeof msg);
  /* the long list's first refusal may be its logits' pass's (filter.c) */
  CHECK_MSG(st2 == FS_NOT_PREPARED &&
                strstr(msg, long_list ? "before capture" : "logit_bias_count"),
            "%s: first biased call while capturing: status %d, %s", what, st2, msg);
  gu_push(ctx);
  ctx->cu->cuGraphExecDestroy(exec);
  ctx->cu->cuGraphDestroy(graph);
  ctx->cu->cuStreamDestroy(stream);
  gu_pop(ctx);
  printf("ok %s: the graph replays the call, a first call in a capture is refused\n", what);
  snap_free(&whole);
  free(tok);
  free(val);
  free(reps);
  gu_free(ctx, dreps);
  gu_free(ctx, dtok);
  gu_free(ctx, dval);
  gu_free(ctx, dlp);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

/* Every case on the context of (B, dtype). */
static void run_cases(fs_context *c, int B, int dtype) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run(c, &cases[i], B, dtype);
  if (!gu_test_family()) { /* c is the base context */
    run_graph(c, &cases[1], B, dtype);
    run_graph(c, &cases[8], B, dtype);  /* "long" */
    run_graph(c, &cases[13], B, dtype); /* "group16-mixed" */
  }
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  static const int batches[] = {5, 37};
  gu_family_each(ctx, batches, 2, run_cases);
  fs_context_destroy(ctx);
  return fs_test_done("test_bias");
}
