// fs-test-timeout: 600
/*
** test_tp_toplp: top logprobs (fs_options.top_logprobs) in the
** tensor-parallel calls (since 0.3.16), on one GPU.
**
** R = 1, 2, 3, 4 and 8 "ranks" as threads on GPU 0 (tp_util.h: each its own
** context, stream and uneven shard of W, a host-staged all-reduce, the rank
** declared by fs_context_set_tp_rank) call fs_sample_tp_ex with
** top_logprobs n = 5 to 256.  Every rank's lists must be the unsharded
** fs_sample_ex's with the same options (test_toplp checks those against
** the CPU reference): the tokens exactly, the values within 2e-5 + 1e-6
** |value| (the shards' log-sum-exps are merged in another order); the
** draws' tokens, keys and logits bitwise the unsharded call's, their
** logprobs within the same bound and a listed draw's logprob its list
** value bit for bit (one log-sum-exp serves both, as on one GPU); with
** ranks, the ranks exactly.  The cases add a token mask (the even ids), a
** soft-cap, one sample a row, ranks with and without outputs->logits,
** greedy calls, and (since the review of 0.3.16) a logit bias and a sampled
** call's filters (the filters' path, which lists the raw logits before it
** applies the bias); and (since 0.3.17) FS_NOISE_GROUP16 on every context,
** the shards cut at multiples of 16, with a mask, a soft-cap, logprobs and
** ranks (the fused pass draws the groups; some draws must differ from the
** per-token noise's).  Each call's collectives are counted: the keys, the draws'
** logits (where summed), the lists' gather, and with ranks the counts.
** That the comparison can fail: a control case declares both of its two
** ranks rank 0, so both write the same part of the gather and the merged
** lists are the elementwise max of two shards' lists; it must differ from
** the unsharded call's; NCCL's call also captured in a CUDA graph and
** replayed.  Bad input: top_logprobs without
** fs_context_set_tp_rank or above FS_MAX_TOP_LOGPROBS;
** fs_context_set_tp_rank's ranges.  NCCL with one rank (the rank
** from ncclCommUserRank), where libnccl.so.2 loads.
** FS_TEST_CASES=i,j,... runs only those cases (and the bad input; the NCCL
** case runs only without it).  Under
** the fake driver (cpu/fake_tp_toplp) the statuses, collectives and bad
** input are checked, no output.
*/
#include "gpu_graph.h"
#include "tp_util.h"

#include <math.h>
#include <pthread.h>

#define MAXR TP_MAXR
enum { B = TP_B, V = TP_V, NITEMS = TP_NITEMS, NMAX = 256 };

/* The gather's all-reduce is the largest: B x R x G x (n + 1) words, G at
** most 16 slices a row at B = 6 (filter.c's tp_toplp_slices; 1 with
** FS_TOPLP_SLICES=1, gpu/tp_toplp_one_slice). */
enum { MAXCOUNT = B * MAXR * 16 * (NMAX + 1) };

typedef struct tpl_case {
  int R, S, n;
  int mask;   /* the even ids allowed */
  float cap;  /* logit_softcap */
  int lp;     /* logprobs */
  int ranks;  /* fs_options.ranks */
  int nolog;  /* no outputs->logits */
  int greedy; /* every row at T = 0 */
  int control; /* every rank declared rank 0: the lists must differ */
  const char *what;
  int bias;    /* a logit bias (tp_bias_fill's, BIAS_N a row): the filters' path */
  int top_k;   /* and filters of the sampled rows */
  float top_p;
  int group;   /* FS_NOISE_GROUP16 (since 0.3.17), shards cut at multiples of 16 */
} tpl_case;

enum { BIAS_N = 12 };

static const tpl_case cases[] = {
    {2, TP_S, 5, 0, 0.0f, 0, 0, 0, 0, 0, "top 5", 0, 0, 0.0f, 0},
    {3, TP_S, 20, 0, 0.0f, 1, 0, 0, 0, 0, "top 20, logprobs", 0, 0, 0.0f, 0},
    {4, 1, 64, 1, 0.0f, 1, 0, 0, 0, 0, "top 64, a mask, logprobs, 1 sample", 0, 0, 0.0f, 0},
    {8, TP_S, 256, 0, 0.5f, 0, 0, 0, 0, 0, "top 256, cap 0.5", 0, 0, 0.0f, 0},
    {3, TP_S, 20, 0, 0.5f, 1, 0, 0, 0, 0, "top 20, cap 0.5, logprobs", 0, 0, 0.0f, 0},
    {3, TP_S, 20, 0, 0.0f, 1, 1, 0, 0, 0, "top 20, ranks, logprobs", 0, 0, 0.0f, 0},
    {2, TP_S, 10, 1, 0.0f, 1, 1, 1, 0, 0, "top 10, ranks, logprobs, mask, no logits",
     0, 0, 0.0f, 0},
    {4, TP_S, 20, 0, 0.0f, 1, 0, 0, 1, 0, "greedy, top 20, logprobs", 0, 0, 0.0f, 0},
    {1, TP_S, 20, 0, 0.0f, 1, 0, 0, 0, 0, "one rank, top 20, logprobs", 0, 0, 0.0f, 0},
    {2, TP_S, 20, 0, 0.0f, 0, 0, 1, 0, 0, "top 20, no logits", 0, 0, 0.0f, 0},
    {2, TP_S, 20, 0, 0.0f, 0, 0, 0, 0, 1, "control: both ranks rank 0", 0, 0, 0.0f, 0},
    {3, TP_S, 20, 0, 0.0f, 1, 0, 0, 0, 0, "top 20, a logit bias, logprobs", 1, 0, 0.0f, 0},
    {2, TP_S, 20, 1, 0.0f, 1, 1, 0, 0, 0, "top 20, top_k 50, top_p 0.9, mask, lp, ranks", 0,
     50, 0.9f, 0},
    {4, TP_S, 64, 0, 0.0f, 1, 0, 1, 0, 0, "top 64, bias, top_p 0.8, logprobs, no logits", 1, 0,
     0.8f, 0},
    {3, TP_S, 20, 1, 0.5f, 1, 1, 0, 0, 0, "group16: top 20, mask, cap, lp, ranks", 0, 0, 0.0f, 1},
    {4, TP_S, 64, 0, 0.0f, 1, 1, 1, 0, 0, "group16: top 64, lp, ranks, no logits", 0, 0, 0.0f,
     1},
};

static CUdeviceptr g_mask, g_btok, g_bval;

static fs_options case_options(const tpl_case *c) {
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.logit_softcap = c->cap;
  o.top_logprobs = c->n;
  o.top_k = c->top_k;
  o.top_p = c->top_p;
  if (c->bias) {
    o.logit_bias_tokens = (const int32_t *)gu_ptr(g_btok);
    o.logit_bias_values = (const float *)gu_ptr(g_bval);
    o.logit_bias_count = BIAS_N;
  }
  if (c->mask) {
    o.token_mask = (const uint32_t *)gu_ptr(g_mask);
    o.token_mask_stride = TP_MW;
  }
  return o;
}

/* Device lists for B rows of n (tokens poisoned to -7, values to NaN). */
static void lists_alloc(fs_context *ctx, int n, CUdeviceptr *t, CUdeviceptr *v) {
  int32_t ht[B * NMAX];
  float hv[B * NMAX];
  for (int i = 0; i < B * n; i++) ht[i] = -7, hv[i] = NAN;
  *t = gu_upload_new(ctx, ht, (size_t)B * n * 4);
  *v = gu_upload_new(ctx, hv, (size_t)B * n * 4);
}

/* Does |x - ref| stay within 2e-5 + 1e-6 |ref| (equal infinities pass). */
static int close_to(float x, float ref) {
  if (x == ref) return 1;
  return fabsf(x - ref) <= 2e-5f + 1e-6f * fabsf(ref);
}

/* The entries of lists (B rows of n) whose value is not the host's
** z - lse within 1e-3 + 1e-4 |value| (the GPU's fp32 sums against double),
** or whose token is not a valid id; the first few printed as `who`. */
static int host_bad(const tp_unsharded *u, float c, const int32_t *t, const float *val, int n,
                    const char *who) {
  static double z[V];
  int bad = 0;
  for (int b = 0; b < B; b++) {
    const double lse = tp_host_row(u, b, c, z, NULL);
    for (int j = 0; j < n; j++) {
      const int32_t tok = t[b * n + j];
      const double want = tok >= 0 && tok < V ? z[tok] - lse : NAN;
      if (!(fabs(val[b * n + j] - want) <= 1e-3 + 1e-4 * fabs(want)) && bad++ < 3)
        fprintf(stderr, "%s: row %d entry %d token %d value %.7g, host %.7g (lse %.7g)\n", who,
                b, j, tok, val[b * n + j], want, lse);
    }
  }
  return bad;
}

/* Runs case c over its R ranks; returns the mismatches found (the control
** case: its lists' mismatches, which must be > 0). */
static int run_case(fs_context *ctx, const tp_unsharded *u, const tpl_case *c) {
  const int R = c->R, S = c->S, n = c->n, items = B * S;
  int start[MAXR + 1];
  tp_shard_bounds(V, R, start);
  for (int k = 1; k < R && c->group; k++) start[k] &= ~15; /* FS_NOISE_GROUP16's cuts */
  const int noise = c->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
  REQUIRE(fs_context_set_noise(ctx, noise) == FS_OK);
  tp_unsharded cu = *u;
  tp_case_sampling(&cu.s, S, c->greedy);
  /* the unsharded call's draws, lists, logprobs and ranks */
  fs_options o = case_options(c);
  CUdeviceptr rt, rv, rrk = 0;
  lists_alloc(ctx, n, &rt, &rv);
  o.top_logprob_tokens = (int32_t *)gu_ptr(rt);
  o.top_logprob_values = (float *)gu_ptr(rv);
  int32_t ref_t[B * NMAX], got_t[B * NMAX], ref_rk[NITEMS], got_rk[NITEMS];
  float ref_v[B * NMAX], got_v[B * NMAX], ref_lp[NITEMS], got_lp[NITEMS];
  if (c->ranks) {
    rrk = gu_alloc(ctx, sizeof ref_rk);
    o.ranks = (int32_t *)gu_ptr(rrk);
  }
  gu_outputs ref;
  if (c->lp) tp_unsharded_lp(ctx, &cu, &o, &ref, ref_lp);
  else tp_unsharded_draw_ex(ctx, &cu, &o, &ref);
  gu_download(ctx, ref_t, rt, (size_t)B * n * 4);
  gu_download(ctx, ref_v, rv, (size_t)B * n * 4);
  /* the unsharded call's lists against the host's logits (which of the
  ** two calls a mismatch below is in) */
  const int hbad = gu_fake_driver() ? 0 : host_bad(u, c->cap, ref_t, ref_v, n, c->what);
  CHECK_MSG(hbad == 0, "%s: the unsharded call's lists: %d values unlike the host's", c->what,
            hbad);
  gu_free(ctx, rt);
  gu_free(ctx, rv);
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  /* the grouped noise took effect: some draws unlike the per-token noise's
  ** (where nothing else changes them: no mask, no cap) */
  const int plain = c->group && !c->greedy && !c->mask && c->cap == 0.0f && S == TP_S;
  int moved = 0;
  for (int i = 0; i < items && plain; i++) moved += ref.h_tokens[i] != u->ref.h_tokens[i];
  CHECK_MSG(moved > 0 || !plain || gu_fake_driver(),
            "%s: every token the per-token noise's: is the noise set?", c->what);
  if (c->ranks) {
    gu_download(ctx, ref_rk, rrk, sizeof ref_rk);
    gu_free(ctx, rrk);
  }

  tp_shared sh = {R, {{0}}, {0}, MAXCOUNT};
  pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
  tp_rank rk[MAXR];
  fs_options opt[MAXR];
  CUdeviceptr dlp[MAXR], dt[MAXR], dv[MAXR], drk[MAXR];
  for (int k = 0; k < R; k++) {
    tp_rank_open(&rk[k], &sh, k, u, start);
    REQUIRE(fs_context_set_tp_rank(rk[k].ctx, c->control ? 0 : k, R) == FS_OK);
    REQUIRE(fs_context_set_noise(rk[k].ctx, noise) == FS_OK);
    tp_case_sampling(&rk[k].s, S, c->greedy);
    opt[k] = case_options(c);
    lists_alloc(rk[k].ctx, n, &dt[k], &dv[k]);
    opt[k].top_logprob_tokens = (int32_t *)gu_ptr(dt[k]);
    opt[k].top_logprob_values = (float *)gu_ptr(dv[k]);
    tp_rank_extras(&rk[k], &opt[k], c->lp, c->ranks, c->nolog, &dlp[k], &drk[k]);
    rk[k].opt = &opt[k];
  }
  tp_run_ranks(rk, R);
  /* the keys; the draws' logits where summed (outputs->logits, or for
  ** logprobs or ranks the workspace); the gather; the counts */
  const int want = 2 + (!c->nolog || c->lp || c->ranks) + (c->ranks != 0);
  /* a bias or a sampled call's filters: the filters' path, at least the
  ** shards' bounds more */
  const int by_filters = c->bias || (!c->greedy && (c->top_k || (c->top_p > 0.0f &&
                                                                  c->top_p < 1.0f)));
  int bad = 0, lbad = 0, vbad = 0, rbad = 0, mism = 0;
  const int cmp = !gu_fake_driver(); /* the fake driver runs no kernel */
  for (int k = 0; k < R; k++) {
    char who[112];
    snprintf(who, sizeof who, "%s, R=%d rank %d", c->what, R, k);
    if (rk[k].status == FS_OK &&
        (by_filters ? rk[k].collectives <= want : rk[k].collectives != want)) {
      fprintf(stderr, "%s: %d collectives, expected %s%d\n", who, rk[k].collectives,
              by_filters ? "more than " : "", want);
      bad++;
    }
    gu_download(rk[k].ctx, got_t, dt[k], (size_t)B * n * 4);
    gu_download(rk[k].ctx, got_v, dv[k], (size_t)B * n * 4);
    gu_free(rk[k].ctx, dt[k]);
    gu_free(rk[k].ctx, dv[k]);
    if (cmp && k == 0 && !c->control) {
      const int hb = host_bad(u, c->cap, got_t, got_v, n, who);
      CHECK_MSG(hb == 0, "%s: %d list values unlike the host's", who, hb);
    }
    for (int i = 0; i < B * n && cmp; i++)
      if (got_t[i] != ref_t[i] || !close_to(got_v[i], ref_v[i])) {
        if (vbad++ < 5 && !c->control)
          fprintf(stderr, "%s: row %d entry %d: token %d value %.9g, unsharded %d %.9g\n", who,
                  i / n, i % n, got_t[i], got_v[i], ref_t[i], ref_v[i]);
      }
    if (c->lp) {
      gu_download(rk[k].ctx, got_lp, dlp[k], (size_t)items * 4);
      gu_free(rk[k].ctx, dlp[k]);
      for (int i = 0; i < items && cmp; i++) {
        const int b = i / S;
        int listed = -1;
        for (int j = 0; j < n; j++)
          if (got_t[b * n + j] == ref.h_tokens[i]) listed = j;
        const int same = listed < 0 || got_lp[i] == got_v[b * n + listed];
        if (!close_to(got_lp[i], ref_lp[i]) || !same) {
          if (lbad++ < 5 && !c->control)
            fprintf(stderr, "%s: item %d logprob %.9g, unsharded %.9g, listed value %.9g\n",
                    who, i, got_lp[i], ref_lp[i], listed < 0 ? NAN : got_v[b * n + listed]);
        }
      }
    }
    if (c->ranks) {
      gu_download(rk[k].ctx, got_rk, drk[k], (size_t)items * 4);
      gu_free(rk[k].ctx, drk[k]);
      for (int i = 0; i < items && cmp; i++)
        if (got_rk[i] != ref_rk[i] && rbad++ < 5)
          fprintf(stderr, "%s: item %d rank %d, unsharded %d\n", who, i, got_rk[i], ref_rk[i]);
    }
    mism += tp_rank_close(&rk[k], &ref, who);
  }
  pthread_barrier_destroy(&sh.bar);
  gu_outputs_free(ctx, &ref);
  if (c->control) {
    CHECK_MSG(vbad > 0 || !cmp, "%s: the lists equal the unsharded call's with both ranks at part 0: "
              "the comparison cannot fail", c->what);
    printf("%-46s R=%d: %d list entries unlike the unsharded call's (must be > 0)\n", c->what,
           R, vbad);
    return vbad;
  }
  CHECK_MSG(bad == 0, "%s, R=%d: collectives unlike the path's", c->what, R);
  CHECK_MSG(mism == 0, "%s, R=%d: %d draws unlike the unsharded call's", c->what, R, mism);
  CHECK_MSG(vbad == 0, "%s, R=%d: %d list entries unlike the unsharded call's", c->what, R, vbad);
  CHECK_MSG(lbad == 0, "%s, R=%d: %d logprobs wrong", c->what, R, lbad);
  CHECK_MSG(rbad == 0, "%s, R=%d: %d ranks unlike the unsharded call's", c->what, R, rbad);
  printf("%-46s R=%d: %s\n", c->what, R,
         bad || mism || vbad || lbad || rbad ? "MISMATCH"
         : cmp ? "lists, draws, logprobs and ranks as unsharded"
               : "ran (the fake driver: the collectives counted, nothing compared)");
  return bad + mism + vbad + lbad + rbad;
}

/* Bad input on one rank of one (the refusals come before any collective). */
static void bad_input(const tp_unsharded *u) {
  int start[2] = {0, V};
  tp_shared sh = {1, {{0}}, {0}, MAXCOUNT};
  pthread_barrier_init(&sh.bar, NULL, 1u);
  tp_rank r;
  tp_rank_open(&r, &sh, 0, u, start);
  fs_context *x = r.ctx;
  CHECK(fs_context_set_tp_rank(x, 0, 0) == FS_INVALID_ARGUMENT);
  CHECK(strstr(fs_last_error(x), "ranks=0") != NULL);
  CHECK(fs_context_set_tp_rank(x, 3, 3) == FS_INVALID_ARGUMENT);
  CHECK(strstr(fs_last_error(x), "rank=3") != NULL);
  CHECK(fs_context_set_tp_rank(x, -1, 2) == FS_INVALID_ARGUMENT);
  CHECK(fs_context_set_tp_rank(x, 0, FS_MAX_TP_RANKS + 1) == FS_INVALID_ARGUMENT);
  CHECK(fs_context_set_tp_rank(NULL, 0, 1) == FS_INVALID_ARGUMENT);
  CUdeviceptr t, v;
  lists_alloc(x, 8, &t, &v);
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.top_logprobs = 8;
  o.top_logprob_tokens = (int32_t *)gu_ptr(t);
  o.top_logprob_values = (float *)gu_ptr(v);
  REQUIRE(fs_prepare(x, &r.p, &r.s) == FS_OK);
  /* no rank declared */
  int st = fs_sample_tp_ex(x, &r.p, &r.s, &o, &r.o, tp_host_allreduce, &r, (void *)r.stream);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && strstr(fs_last_error(x), "fs_context_set_tp_rank"),
            "top_logprobs without a rank: status %d, %s", st, fs_last_error(x));
  REQUIRE(fs_context_set_tp_rank(x, 0, 1) == FS_OK);
  /* n above FS_MAX_TOP_LOGPROBS */
  fs_options on = o;
  on.top_logprobs = FS_MAX_TOP_LOGPROBS + 1;
  st = fs_sample_tp_ex(x, &r.p, &r.s, &on, &r.o, tp_host_allreduce, &r, (void *)r.stream);
  CHECK_MSG(st == FS_INVALID_ARGUMENT, "top_logprobs=%d: status %d, %s",
            FS_MAX_TOP_LOGPROBS + 1, st, fs_last_error(x));
  CHECK_MSG(r.collectives == 0, "a refused call ran %d collectives", r.collectives);
  gu_free(x, t);
  gu_free(x, v);
  gu_outputs_free(x, &r.go);
  gu_push(x);
  x->cu->cuStreamDestroy(r.stream);
  gu_pop(x);
  fs_context_destroy(x);
  free(sh.host[0]);
  pthread_barrier_destroy(&sh.bar);
  printf("bad input refused: no rank, n above the most, set_tp_rank's ranges\n");
}

/* NCCL with one rank (ncclCommInitAll on GPU 0): fs_sample_nccl_ex with
** top 20 and logprobs takes its rank from ncclCommUserRank; the lists must
** be the unsharded call's.  Skipped, said so, where libnccl.so.2 is not
** loadable. */
static void nccl_one_rank(fs_context *ctx, const tp_unsharded *u) {
  void *comm;
  int (*destroy)(void *) = tp_nccl_one(&comm, "NCCL single-rank case");
  if (!destroy) return;
  const int n = 20;
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.top_logprobs = n;
  CUdeviceptr rt, rv, gt, gv;
  lists_alloc(ctx, n, &rt, &rv);
  lists_alloc(ctx, n, &gt, &gv);
  int32_t ref_t[B * NMAX], got_t[B * NMAX];
  float ref_v[B * NMAX], got_v[B * NMAX], ref_lp[NITEMS], got_lp[NITEMS];
  o.top_logprob_tokens = (int32_t *)gu_ptr(rt);
  o.top_logprob_values = (float *)gu_ptr(rv);
  gu_outputs ref, go;
  tp_unsharded_lp(ctx, u, &o, &ref, ref_lp);
  o.top_logprob_tokens = (int32_t *)gu_ptr(gt);
  o.top_logprob_values = (float *)gu_ptr(gv);
  fs_options t; /* tp_lp_alloc's logprobs (it clears the options it is given) */
  const CUdeviceptr dl = tp_lp_alloc(ctx, &t);
  o.logprobs = t.logprobs;
  tp_outputs(ctx, &go);
  const fs_outputs out = gu_outputs_api(&go);
  const int st = fs_sample_nccl_ex(ctx, &u->full, &u->s, &o, &out, comm, NULL);
  CHECK_MSG(st == FS_OK, "fs_sample_nccl_ex with top 20: %s", fs_last_error(ctx));
  gu_sync(ctx);
  int bad = tp_mismatches(ctx, &go, &ref, "NCCL top 20, 1 rank");
  gu_download(ctx, ref_t, rt, (size_t)B * n * 4);
  gu_download(ctx, ref_v, rv, (size_t)B * n * 4);
  gu_download(ctx, got_t, gt, (size_t)B * n * 4);
  gu_download(ctx, got_v, gv, (size_t)B * n * 4);
  gu_download(ctx, got_lp, dl, sizeof got_lp);
  for (int i = 0; i < B * n && !gu_fake_driver(); i++)
    bad += got_t[i] != ref_t[i] || !close_to(got_v[i], ref_v[i]);
  for (int i = 0; i < NITEMS && !gu_fake_driver(); i++) bad += !close_to(got_lp[i], ref_lp[i]);
  CHECK_MSG(bad == 0, "NCCL single rank, top 20: %d mismatches", bad);
  printf("NCCL, 1 rank, top 20, logprobs: %s\n",
         bad ? "MISMATCH" : gu_fake_driver() ? "ran (the fake driver)" : "as unsharded");
  /* the same call captured in a CUDA graph (prepared by the call above),
  ** replayed over poisoned lists */
  const CUstream gs = gu_stream_new(ctx);
  CUgraph graph;
  CUgraphExec exec;
  const int cst =
      tp_nccl_capture(ctx, &u->full, &u->s, &o, &out, comm, gs, &graph, &exec, "top 20");
  int gbad = 0;
  if (cst == FS_OK) {
    int32_t pt[B * NMAX];
    float pv[B * NMAX];
    for (int i = 0; i < B * n; i++) pt[i] = -7, pv[i] = NAN;
    gu_upload(ctx, gt, pt, (size_t)B * n * 4);
    gu_upload(ctx, gv, pv, (size_t)B * n * 4);
    snap r = gu_graph_replay(ctx, exec, gs, &go, "NCCL top 20 replay");
    snap_free(&r);
    gbad = tp_mismatches(ctx, &go, &ref, "NCCL top 20 replay");
    gu_download(ctx, got_t, gt, (size_t)B * n * 4);
    gu_download(ctx, got_v, gv, (size_t)B * n * 4);
    for (int i = 0; i < B * n; i++)
      gbad += got_t[i] != ref_t[i] || !close_to(got_v[i], ref_v[i]);
    CHECK_MSG(gbad == 0, "NCCL single rank, top 20, graph replay: %d mismatches", gbad);
  }
  printf("NCCL, 1 rank, top 20, a CUDA graph's replay: %s\n", gbad || cst ? "MISMATCH"
                                                                       : "as unsharded");
  if (exec) gu_graph_done(ctx, exec, graph, gs);
  gu_outputs_free(ctx, &ref);
  gu_outputs_free(ctx, &go);
  gu_free(ctx, dl);
  gu_free(ctx, rt);
  gu_free(ctx, rv);
  gu_free(ctx, gt);
  gu_free(ctx, gv);
  destroy(comm);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  tp_unsharded u;
  tp_unsharded_init(ctx, &u);
  uint32_t mask[B * TP_MW];
  for (int i = 0; i < B * TP_MW; i++) mask[i] = 0x55555555u; /* the even ids */
  g_mask = gu_upload_new(ctx, mask, sizeof mask);
  int32_t btok[B * BIAS_N];
  float bval[B * BIAS_N];
  tp_bias_fill(btok, bval, BIAS_N, 4242);
  g_btok = gu_upload_new(ctx, btok, sizeof btok);
  g_bval = gu_upload_new(ctx, bval, sizeof bval);
  const char *only = getenv("FS_TEST_CASES");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (!tp_case_wanted(only, i)) continue;
    run_case(ctx, &u, &cases[i]);
  }
  bad_input(&u);
  if ((!only || !*only) && !gu_fake_driver()) nccl_one_rank(ctx, &u);
  gu_free(ctx, g_mask);
  gu_free(ctx, g_btok);
  gu_free(ctx, g_bval);
  tp_unsharded_free(ctx, &u);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp_toplp");
}
