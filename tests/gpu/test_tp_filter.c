// fs-test-timeout: 600
/*
** test_tp_filter: filters (fs_options.min_p, top_k, top_p) in the
** tensor-parallel calls, on one GPU.
**
** R = 2, 3, 4 and 8 "ranks" as threads on GPU 0 (tp_util.h: each its own
** context, stream and uneven shard of W, a host-staged all-reduce) call
** fs_sample_tp_ex with filters; every rank's tokens, keys and logits must
** be bitwise those of one unsharded fs_sample_ex with the same options
** (whose filters test_filter checks against the CPU reference): the ranks
** sum their histograms' counts and masses exactly (12-bit limbs in
** floats), so the thresholds are the unsharded call's.  With logprobs
** every logprob within 2e-5 + 1e-6 |lse| of the unsharded call's (the
** shards' log-sum-exps are merged in another order).  The cases: scalar
** min-p, top-k and top-p alone and together; per-row arrays of each (rows
** with the filter off, k = 1, k above the vocabulary, p near 0 and 1); a
** token mask (the even ids); a logit bias (ids of every shard, a repeat, a
** pad and a ban; and one with +inf and NaN entries: rows whose kept set is
** their +inf tokens, with top-k above V too, where k keeps every
** candidate); a soft-cap; one sample a row.  The problem's rows mix
** sampled and greedy temperatures (tp_util.h).
** Ranks (fs_options.ranks, since 0.3.14): with filters, a bias, logprobs,
** one sample (cases 7 and 8), with per-row filters, a mask and a bias
** without outputs->logits (16), and with no filter at all (15 with a
** bias: the call takes the filters' path; 14, 17 and 18 without one: the
** fused kernel draws and writes the shard's logits, since 0.3.15, or with
** FS_TP_RANKS_PASS=0, gpu/tp_filter_ranks_path, the filters' path
** again), with a mask, logprobs, no outputs->logits, a soft-cap, one
** sample; and greedy calls (19, 20: every row at T = 0, with top_k 50,
** which a greedy call ignores; the path each took is checked by its
** collectives: 3 through the pass, more through the filters' path; an
** unfiltered case's draws must be the plain draw's); every rank's ranks must be
** the unsharded call's exactly (each shard's counts summed as floats,
** exact below 2^24; test_ranks checks the unsharded call's against the CPU
** reference).  Under FS_NOISE_GROUP16 (since 0.3.17; 21, 22: every context
** in group mode, the shards cut at multiples of 16) ranks with a mask and
** logprobs, and without outputs->logits: always through the fused pass
** (3 collectives, with FS_TP_RANKS_PASS=0 too), and case 22's draws must
** differ from the per-token noise's somewhere.
** That the filters took effect: in the top_k 1 case every sampled row's
** draws are its greedy token, and over the cases at least a third of the
** sampled items differ from the unfiltered draw (else the comparison could
** pass with filters ignored on both sides).  Top-k's list (fsamp_filter.cu's
** ftp_list) is used where k <= 512 and a slice has k candidates; with k
** 500 and a row over 32 slices (a GPU of 96 SMs or more) none of these
** shards' slices has, so no list: the rounds read the rows.
** FS_TEST_CASES=i,j,... runs only those cases (compute-sanitizer).
** FS_FILTER_RANKS is unset first: the unsharded draws are fsamp_filter's.
*/
#include "tp_util.h"

#include <pthread.h>

#define MAXR TP_MAXR
enum { B = TP_B, D = TP_D, V = TP_V, NITEMS = TP_NITEMS };

/* An all-reduce of these calls: the histograms of B rows, 2048 bins of
** five limbs (top-p's masses). */
enum { MAXCOUNT = B * 2048 * 5 };

/* Per-row filter values (device arrays on GPU 0, read by every rank). */
static const float row_min_p[B] = {0.2f, 0.0f, 0.5f, -1.0f, 0.01f, 0.3f};
static const int32_t row_top_k[B] = {1, 40, 0, 100000, 7, 3};
static const float row_top_p[B] = {0.5f, 0.95f, 0.999f, 0.02f, 1.0f, 0.7f};

/* The logit bias: BIAS_N entries a row, as test_tp's. */
enum { BIAS_N = 12 };

typedef struct tpf_case {
  int R, S;
  float min_p;
  int top_k;
  float top_p;
  int rows;  /* 1: the per-row arrays (scalars ignored) */
  int mask;  /* the even ids allowed */
  int bias;  /* the logit bias: 1 test_tp's kind, 2 with +inf and NaN entries (bias_edges) */
  float cap; /* logit_softcap */
  int lp;    /* logprobs */
  const char *what;
  int ranks; /* fs_options.ranks: 1, or 2 with no outputs->logits */
  int greedy; /* every row at T = 0 (a greedy call: its plan's kernel may be wt) */
  int group;  /* FS_NOISE_GROUP16 (since 0.3.17), shards cut at multiples of 16 */
} tpf_case;

static const tpf_case cases[] = {
    {2, TP_S, 0.0f, 20, 1.0f, 0, 0, 0, 0.0f, 0, "top_k 20", 0, 0, 0},
    {3, TP_S, 0.0f, 0, 0.9f, 0, 0, 0, 0.0f, 0, "top_p 0.9", 0, 0, 0},
    {4, TP_S, 0.1f, 0, 1.0f, 0, 0, 0, 0.0f, 0, "min_p 0.1", 0, 0, 0},
    {3, TP_S, 0.05f, 50, 0.8f, 0, 0, 0, 0.0f, 1, "min_p 0.05, top_k 50, top_p 0.8, logprobs",
     0, 0, 0},
    {2, TP_S, 0.0f, 1, 1.0f, 0, 0, 0, 0.0f, 0, "top_k 1", 0, 0, 0},
    {8, TP_S, 0.0f, 0, 0.0f, 1, 0, 0, 0.0f, 1, "per-row min_ps, top_ks, top_ps, logprobs", 0, 0, 0},
    {2, TP_S, 0.0f, 30, 0.95f, 0, 1, 0, 0.0f, 0, "top_k 30, top_p 0.95, a mask", 0, 0, 0},
    {3, TP_S, 0.02f, 0, 0.9f, 0, 0, 1, 0.0f, 1, "min_p 0.02, top_p 0.9, bias, lp, ranks", 1, 0, 0},
    {4, 1, 0.0f, 10, 0.5f, 0, 0, 0, 0.5f, 0, "top_k 10, top_p 0.5, cap 0.5, 1 sample, ranks",
     1, 0, 0},
    {3, TP_S, 0.0f, 0, 0.0f, 1, 1, 1, 0.0f, 0, "per-row filters, a mask, a logit bias", 0, 0, 0},
    {2, TP_S, 0.0f, 500, 0.9f, 0, 0, 0, 0.0f, 0, "top_k 500, top_p 0.9 (no list)", 0, 0, 0},
    {3, TP_S, 0.0f, 0, 0.9f, 0, 0, 2, 0.0f, 1, "top_p 0.9, +inf/NaN bias entries, logprobs",
     0, 0, 0},
    {2, TP_S, 0.0f, 100000, 1.0f, 0, 0, 2, 0.0f, 0, "top_k above V, +inf/NaN bias entries",
     0, 0, 0},
    {4, TP_S, 0.1f, 20, 1.0f, 0, 1, 2, 0.0f, 0, "min_p 0.1, top_k 20, +inf/NaN, mask", 0, 0, 0},
    {8, TP_S, 0.0f, 0, 0.0f, 0, 1, 0, 0.0f, 1, "no filter: ranks, logprobs, a mask", 1, 0, 0},
    {2, TP_S, 0.0f, 0, 0.0f, 0, 1, 2, 0.0f, 0, "no filter: ranks, no logits, bias, mask", 2, 0, 0},
    {3, TP_S, 0.0f, 0, 0.0f, 1, 1, 1, 0.0f, 0, "row filters, mask, bias, ranks, no logits",
     2, 0, 0},
    {4, TP_S, 0.0f, 0, 0.0f, 0, 0, 0, 0.0f, 0, "no filter: ranks, no logits", 2, 0, 0},
    {2, 1, 0.0f, 0, 0.0f, 0, 0, 0, 0.5f, 1, "no filter: ranks, cap 0.5, logprobs, 1 sample",
     1, 0, 0},
    {3, TP_S, 0.0f, 0, 0.0f, 0, 1, 0, 0.0f, 0, "greedy: ranks, a mask, no logits", 2, 1, 0},
    {2, TP_S, 0.0f, 50, 0.0f, 0, 0, 0, 0.0f, 1, "greedy, top_k 50: ranks, logprobs", 1, 1, 0},
    {3, TP_S, 0.0f, 0, 0.0f, 0, 1, 0, 0.0f, 1, "group16: ranks, logprobs, a mask", 1, 0, 1},
    {2, TP_S, 0.0f, 0, 0.0f, 0, 0, 0, 0.0f, 0, "group16: ranks, no logits", 2, 0, 1},
};

static CUdeviceptr g_min_ps, g_top_ks, g_top_ps, g_mask, g_btok, g_bval, g_etok, g_eval;

/* The edge bias (cases with bias 2): test_tp's kind, then rows 0 and 2 a
** +inf entry on an id of the second shard and row 5 one on the last shard's
** (FTP_INF: the +inf candidates hold all the mass; rows 0's and 5's ids
** are odd, so the mask of the even ids bans them there), rows 1, 3 and 4 a
** NaN entry (that token's score -inf), row 4 a +inf entry on an even id. */
static void bias_edges(int32_t *tok, float *val) {
  tp_bias_fill(tok, val, BIAS_N, 31337);
  tok[0 * BIAS_N] = V / 2 + 10, val[0 * BIAS_N] = INFINITY;
  tok[2 * BIAS_N] = V / 2 + 11, val[2 * BIAS_N] = INFINITY;
  tok[5 * BIAS_N] = V - 20, val[5 * BIAS_N] = INFINITY;
  tok[1 * BIAS_N + 1] = 1000, val[1 * BIAS_N + 1] = NAN;
  tok[3 * BIAS_N + 1] = V / 3, val[3 * BIAS_N + 1] = NAN;
  tok[4 * BIAS_N + 1] = 17, val[4 * BIAS_N + 1] = NAN;
  tok[4 * BIAS_N + 2] = 2 * (V / 5), val[4 * BIAS_N + 2] = INFINITY;
}

static void upload_inputs(fs_context *ctx) {
  g_min_ps = gu_upload_new(ctx, row_min_p, sizeof row_min_p);
  g_top_ks = gu_upload_new(ctx, row_top_k, sizeof row_top_k);
  g_top_ps = gu_upload_new(ctx, row_top_p, sizeof row_top_p);
  uint32_t mask[B * TP_MW];
  for (int i = 0; i < B * TP_MW; i++) mask[i] = 0x55555555u; /* the even ids */
  g_mask = gu_upload_new(ctx, mask, sizeof mask);
  int32_t tok[B * BIAS_N];
  float val[B * BIAS_N];
  tp_bias_fill(tok, val, BIAS_N, 777);
  g_btok = gu_upload_new(ctx, tok, sizeof tok);
  g_bval = gu_upload_new(ctx, val, sizeof val);
  bias_edges(tok, val);
  g_etok = gu_upload_new(ctx, tok, sizeof tok);
  g_eval = gu_upload_new(ctx, val, sizeof val);
}

/* Does case c ask for a filter (min-p, top-k, top-p, scalar or per row). */
static int case_filtered(const tpf_case *c) {
  return c->rows || c->min_p > 0.0f || c->top_k > 0 || (c->top_p > 0.0f && c->top_p < 1.0f);
}

/* Are case c's ranks drawn in the ranks' fused pass (runtime/tp.c's
** logits_in_pass): ranks without a bias, and without filters or greedy. */
static int case_in_pass(const tpf_case *c) {
  return c->ranks && !c->bias && (c->greedy || !case_filtered(c));
}

/* The options of case c (logprobs not set). */
static fs_options case_options(const tpf_case *c) {
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.logit_softcap = c->cap;
  if (c->rows) {
    o.min_ps = (const float *)gu_ptr(g_min_ps);
    o.top_ks = (const int32_t *)gu_ptr(g_top_ks);
    o.top_ps = (const float *)gu_ptr(g_top_ps);
    o.top_p = 1.0f;
  } else {
    o.min_p = c->min_p;
    o.top_k = c->top_k;
    o.top_p = c->top_p;
  }
  if (c->mask) {
    o.token_mask = (const uint32_t *)gu_ptr(g_mask);
    o.token_mask_stride = TP_MW;
  }
  if (c->bias) {
    o.logit_bias_tokens = (const int32_t *)gu_ptr(c->bias == 2 ? g_etok : g_btok);
    o.logit_bias_values = (const float *)gu_ptr(c->bias == 2 ? g_eval : g_bval);
    o.logit_bias_count = BIAS_N;
  }
  return o;
}

/* Runs case c over its R ranks against the unsharded draw; returns how
** many sampled items differ from the unfiltered draw `plain` (its S). */
static int run_case(fs_context *ctx, tp_unsharded *u, const tpf_case *c, const gu_outputs *plain) {
  const int R = c->R, S = c->S, n = B * S;
  int start[MAXR + 1];
  tp_shard_bounds(V, R, start);
  for (int k = 1; k < R && c->group; k++) start[k] &= ~15; /* FS_NOISE_GROUP16's cuts */
  const int noise = c->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
  REQUIRE(fs_context_set_noise(ctx, noise) == FS_OK);
  /* the unsharded draw with these options (and its logprobs) */
  tp_unsharded cu = *u;
  tp_case_sampling(&cu.s, S, c->greedy);
  fs_options o = case_options(c);
  /* with ranks: the unsharded call's, and each rank's, poisoned (-1) */
  CUdeviceptr dref_rk = 0, drk[MAXR];
  int32_t ref_rk[NITEMS], got_rk[NITEMS];
  if (c->ranks) {
    dref_rk = gu_alloc(ctx, sizeof ref_rk);
    gu_poison(ctx, dref_rk, sizeof ref_rk);
    o.ranks = (int32_t *)gu_ptr(dref_rk);
  }
  gu_outputs ref;
  float ref_lp[NITEMS];
  if (c->lp) tp_unsharded_lp(ctx, &cu, &o, &ref, ref_lp);
  else tp_unsharded_draw_ex(ctx, &cu, &o, &ref);
  if (c->ranks) {
    gu_download(ctx, ref_rk, dref_rk, sizeof ref_rk);
    gu_free(ctx, dref_rk);
  }
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);

  tp_shared sh = {R, {{0}}, {0}, MAXCOUNT};
  pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
  tp_rank rk[MAXR];
  fs_options opt[MAXR];
  CUdeviceptr dlp[MAXR];
  for (int k = 0; k < R; k++) {
    tp_rank_open(&rk[k], &sh, k, u, start);
    REQUIRE(fs_context_set_noise(rk[k].ctx, noise) == FS_OK);
    tp_case_sampling(&rk[k].s, S, c->greedy);
    opt[k] = case_options(c);
    /* ranks 2: no logits */
    tp_rank_extras(&rk[k], &opt[k], c->lp, c->ranks, c->ranks == 2, &dlp[k], &drk[k]);
    rk[k].opt = &opt[k];
  }
  tp_run_ranks(rk, R);
  /* the path taken, by its collectives: the fused pass's three (the keys,
  ** the draws' logits, the counts), the filters' path at least one more
  ** (the shards' bounds); every rank the same */
  const char *pass_env = getenv("FS_TP_RANKS_PASS");
  const int by_path = pass_env && !strcmp(pass_env, "0") && !c->group; /* groups: the pass */
  for (int k = 0; k < R && case_in_pass(c); k++)
    CHECK_MSG(by_path ? rk[k].collectives > 3 : rk[k].collectives == 3,
              "%s, R=%d rank %d: %d collectives, %s", c->what, R, k, rk[k].collectives,
              by_path ? "the filters' path takes more than 3" : "the fused pass takes 3");
  int mism = 0, lbad = 0, rbad = 0;
  for (int k = 0; k < R; k++) {
    char who[96];
    snprintf(who, sizeof who, "%s, R=%d rank %d", c->what, R, k);
    if (c->lp) lbad += tp_lp_mismatches(rk[k].ctx, dlp[k], ref_lp, ref.h_logits, who);
    if (c->ranks) { /* every rank's ranks the unsharded call's (fake driver: no kernel ran) */
      gu_download(rk[k].ctx, got_rk, drk[k], sizeof got_rk);
      gu_free(rk[k].ctx, drk[k]);
      for (int i = 0; i < n && !gu_fake_driver(); i++)
        if (got_rk[i] != ref_rk[i] || got_rk[i] < 0) {
          if (rbad++ < 5)
            fprintf(stderr, "%s: item %d ranks %d, unsharded %d\n", who, i, got_rk[i],
                    ref_rk[i]);
        }
    }
    mism += tp_rank_close(&rk[k], &ref, who);
  }
  pthread_barrier_destroy(&sh.bar);
  CHECK_MSG(mism == 0, "%s, R=%d: %d items unlike the unsharded call's", c->what, R, mism);
  CHECK_MSG(lbad == 0, "%s, R=%d: %d logprobs wrong", c->what, R, lbad);
  CHECK_MSG(rbad == 0, "%s, R=%d: %d ranks unlike the unsharded call's", c->what, R, rbad);

  /* the filters' effect: sampled items unlike the unfiltered draw (same
  ** seed; a mask or bias changes draws too, so only cases without them
  ** count), and top_k 1's sampled rows at their greedy token */
  int moved = 0, off_greedy = 0;
  for (int i = 0; i < n && !c->greedy; i++) {
    const int b = i / S;
    if (tp_temps[b] == 0.0f) continue;
    if (S == TP_S && !c->mask && !c->bias && c->cap == 0.0f)
      moved += ref.h_tokens[i] != plain->h_tokens[i];
  }
  /* ranks change no draw: an unfiltered case's are the plain draw's, but
  ** under the grouped noise some must differ (else it was not set) */
  if (!case_filtered(c) && !c->greedy && S == TP_S && !c->mask && !c->bias && c->cap == 0.0f &&
      !gu_fake_driver())
    CHECK_MSG(c->group ? moved > 0 : moved == 0, "%s, R=%d: %d sampled items unlike the plain "
              "draw", c->what, R, moved);
  if (!c->rows && c->top_k == 1 && !gu_fake_driver()) {
    /* every row's greedy token: the problem's draw at T = 0 */
    tp_unsharded g = *u;
    tp_case_sampling(&g.s, u->s.num_samples, 1);
    gu_outputs greedy;
    tp_unsharded_draw_ex(ctx, &g, NULL, &greedy);
    for (int i = 0; i < n; i++) off_greedy += ref.h_tokens[i] != greedy.h_tokens[i];
    gu_outputs_free(ctx, &greedy);
    CHECK_MSG(off_greedy == 0, "top_k 1: %d draws are not their row's greedy token",
              off_greedy);
  }
  printf("%-52s R=%d: %s%s; %d sampled items unlike the unfiltered draw\n", c->what, R,
         mism || lbad || rbad ? "MISMATCH"
         : gu_fake_driver()   ? "ran (the fake driver: nothing compared)"
         : c->lp              ? "tokens, keys, logits and logprobs as the unsharded call's"
         : c->ranks == 2      ? "tokens and keys equal the unsharded call"
                              : "tokens, keys and logits equal the unsharded call",
         c->ranks && !(mism || lbad || rbad) && !gu_fake_driver() ? ", ranks too" : "", moved);
  gu_outputs_free(ctx, &ref);
  return c->group ? 0 : moved; /* the filters' effect is counted without the noise's */
}

int main(void) {
  unsetenv("FS_FILTER_RANKS"); /* read at context creation */
  fs_context *ctx = fs_test_gpu_or_skip();
  tp_unsharded u; /* the unsharded problem and its unfiltered draw, on GPU 0 */
  tp_unsharded_init(ctx, &u);
  upload_inputs(ctx);
  int moved = 0, counted = 0;
  const char *only = getenv("FS_TEST_CASES");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const tpf_case *c = &cases[i];
    if (!tp_case_wanted(only, i)) continue;
    moved += run_case(ctx, &u, c, &u.ref);
    if (case_filtered(c) && !c->greedy && c->S == TP_S && !c->mask && !c->bias && c->cap == 0.0f)
      for (int b = 0; b < B; b++) counted += tp_temps[b] != 0.0f ? TP_S : 0;
  }
  if (!gu_fake_driver() && counted) /* under the fake driver no kernel runs */
    CHECK_MSG(3 * moved >= counted,
            "only %d of %d sampled items moved by the filters: are they applied?", moved,
            counted);
  printf("filters moved %d of %d sampled items (filtered cases without mask, bias or cap)\n",
         moved, counted);
  gu_free(ctx, g_min_ps);
  gu_free(ctx, g_top_ks);
  gu_free(ctx, g_top_ps);
  gu_free(ctx, g_mask);
  gu_free(ctx, g_btok);
  gu_free(ctx, g_bval);
  gu_free(ctx, g_etok);
  gu_free(ctx, g_eval);
  tp_unsharded_free(ctx, &u);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp_filter");
}
