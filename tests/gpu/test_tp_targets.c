// fs-test-timeout: 600
/*
** test_tp_targets: target logprobs and ranks (fs_options.target_tokens) in
** the tensor-parallel calls (since 0.3.19), on one GPU.
**
** R = 1, 2, 3, 4 and 8 "ranks" as threads on GPU 0 (tp_util.h: each its own
** context, stream and uneven shard of W, a host-staged all-reduce) call
** fs_sample_tp_ex with targets.  Every rank's target logprobs must be the
** unsharded fs_sample_ex's with the same options (test_targets checks those
** against the CPU reference; here the unsharded values also against the
** host's double logits) within 2e-5 + 1e-6 |lse| (the shards' log-sum-exps
** merge in another order), its target ranks exactly, its draws (tokens,
** keys, logits) bitwise.  Row b's target, by b: the id of the row's largest
** logit (from the host), -1 (NaN, 0), an id of the last shard, the first id
** of the middle rank's shard, the whole vocabulary's size (outside every
** shard: NaN, 0), an id of the first shard.  Cases add a mask (which the
** targets ignore), a soft-cap, logprobs and ranks of the draws, one output
** alone, no outputs->logits, greedy calls (with top_k: a greedy call's
** filters stay in the fused pass), top logprobs, FS_NOISE_GROUP16, a W
** with a NaN row (every logprob NaN) and a row of +inf and zeros (its id's
** logit +inf or -inf by the row's first hidden element) over two and three
** ranks with their ids as targets, and each call's collectives are counted
** (three for the targets).  That the
** comparison can fail: a control case whose sum all-reduce leaves each rank
** its own values; its ranks and its logprobs must differ from the unsharded
** call's.  Bad
** input: a logit bias and a sampled call's top_p are refused, naming
** target_tokens, before any collective.  NCCL with one rank, also captured
** in a CUDA graph and replayed with new target ids, where libnccl.so.2
** loads.  Under the fake driver (cpu/fake_tp_targets) the statuses,
** collectives and refusals are checked, no output.
*/
#include "gpu_graph.h"
#include "tp_util.h"

#include <math.h>
#include <pthread.h>

#define MAXR TP_MAXR
enum { B = TP_B, V = TP_V, NITEMS = TP_NITEMS, TOPN = 20 };

typedef struct tt_case {
  int R, S;
  int mask;    /* the even ids allowed */
  float cap;   /* logit_softcap */
  int lp;      /* logprobs of the draws */
  int ranks;   /* ranks of the draws */
  int nolog;   /* no outputs->logits */
  int greedy;  /* every row at T = 0, with top_k 50 */
  int top;     /* top logprobs TOPN */
  int group;   /* FS_NOISE_GROUP16, the shards cut at multiples of 16 */
  int outs;    /* 3: both target outputs, 1: logprobs alone, 2: ranks alone */
  int control; /* the sum all-reduce a no-op: the ranks must differ */
  const char *what;
  int special; /* W with a NaN row and a +-inf row (special_head), their ids as targets */
} tt_case;

static const tt_case cases[] = {
    {2, TP_S, 0, 0.0f, 0, 0, 0, 0, 0, 0, 3, 0, "targets", 0},
    {3, TP_S, 1, 0.5f, 1, 1, 0, 0, 0, 0, 3, 0, "mask, cap 0.5, logprobs, ranks", 0},
    {4, TP_S, 0, 0.0f, 1, 0, 0, 1, 1, 0, 3, 0, "greedy, top_k 50, top 20, logprobs", 0},
    {8, 1, 0, 0.0f, 0, 0, 1, 0, 0, 0, 1, 0, "logprobs alone, no logits, 1 sample", 0},
    {1, TP_S, 0, 0.0f, 0, 1, 0, 0, 0, 0, 2, 0, "one rank, ranks alone", 0},
    {3, TP_S, 1, 0.0f, 1, 1, 1, 0, 0, 1, 3, 0, "group16: mask, logprobs, ranks, no logits", 0},
    {2, TP_S, 0, 0.0f, 0, 0, 1, 0, 0, 0, 3, 1, "control: sums left as each rank's", 0},
    {2, TP_S, 0, 0.0f, 1, 1, 0, 0, 1, 0, 3, 0, "special: NaN and +-inf logits, top 20", 1},
    {3, TP_S, 0, 0.0f, 0, 0, 0, 0, 0, 0, 3, 0, "special: three ranks", 1},
};

/* special_head's rows: id NAN_ID's W row NaN (every row's logit NaN), id
** INF_ID's W row +inf in its first element and 0 elsewhere (a row's logit
** +inf or -inf by the sign of its first hidden element). */
enum { NAN_ID = TP_V - 100, INF_ID = 50 };

static CUdeviceptr g_mask;

static fs_options case_options(const tt_case *c, CUdeviceptr tt, CUdeviceptr tl,
                               CUdeviceptr tr) {
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.logit_softcap = c->cap;
  o.top_k = c->greedy ? 50 : 0;
  if (c->mask) {
    o.token_mask = (const uint32_t *)gu_ptr(g_mask);
    o.token_mask_stride = TP_MW;
  }
  o.target_tokens = (const int32_t *)gu_ptr(tt);
  o.target_logprobs = c->outs & 1 ? (float *)gu_ptr(tl) : NULL;
  o.target_ranks = c->outs & 2 ? (int32_t *)gu_ptr(tr) : NULL;
  return o;
}

/* The targets of the file's comment; start: the R ranks' shard bounds. */
static void make_targets(const int *top, const int *start, int R, int32_t *t) {
  const int32_t by_row[B] = {top[0], -1, V - 3, start[R / 2], V, 11};
  memcpy(t, by_row, sizeof by_row);
}

/* Does |x - ref| stay within 2e-5 + 1e-6 |lse| (NaN matches NaN). */
static int close_lp(float x, float ref, double lse) {
  if (isnan(ref)) return isnan(x);
  if (x == ref) return 1;
  return fabsf(x - ref) <= 2e-5f + 1e-6f * (float)fabs(lse);
}

/* A rank's collective for the control case: sums leave each rank its own
** values (a broken all-reduce), maxima go through the host. */
static int sum_own(void *user, void *buf, size_t count, int op, void *stream) {
  if (op == FS_REDUCE_SUM_F32) {
    ((tp_rank *)user)->collectives++;
    return 0;
  }
  return tp_host_allreduce(user, buf, count, op, stream);
}

static int g_control; /* tt_rank_main's collective: sum_own where set */

static void *tt_rank_main(void *arg) {
  tp_rank *r = arg;
  r->status = fs_prepare(r->ctx, &r->p, &r->s);
  if (!r->status)
    r->status = fs_sample_tp_ex(r->ctx, &r->p, &r->s, r->opt, &r->o,
                                g_control ? sum_own : tp_host_allreduce, r, (void *)r->stream);
  if (r->status) snprintf(r->err, sizeof r->err, "%s", fs_last_error(r->ctx));
  gu_sync(r->ctx);
  return NULL;
}

/* Runs case c over its R ranks; returns the mismatches (the control case:
** its ranks' mismatches, which must be > 0). */
static int run_case(fs_context *ctx, const tp_unsharded *u, const tt_case *c, const int *top,
                    const double *lse) {
  const int R = c->R, S = c->S;
  int start[MAXR + 1];
  tp_shard_bounds(V, R, start);
  for (int k = 1; k < R && c->group; k++) start[k] &= ~15; /* FS_NOISE_GROUP16's cuts */
  const int noise = c->group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
  REQUIRE(fs_context_set_noise(ctx, noise) == FS_OK);
  int32_t tg[B];
  make_targets(top, start, R, tg);
  if (c->special) tg[0] = INF_ID, tg[2] = NAN_ID, tg[5] = INF_ID + 1;
  /* the unsharded call's draws and targets */
  tp_unsharded cu = *u;
  tp_case_sampling(&cu.s, S, c->greedy);
  const CUdeviceptr tt = gu_upload_new(ctx, tg, sizeof tg);
  const CUdeviceptr tl = gu_alloc(ctx, (B + GU_GUARD) * 4), trk = gu_alloc(ctx, (B + GU_GUARD) * 4);
  gu_poison(ctx, tl, (B + GU_GUARD) * 4);
  gu_poison(ctx, trk, (B + GU_GUARD) * 4);
  fs_options o = case_options(c, tt, tl, trk);
  CUdeviceptr lt = 0, lv = 0;
  if (c->top) {
    lt = gu_alloc(ctx, (size_t)B * TOPN * 4), lv = gu_alloc(ctx, (size_t)B * TOPN * 4);
    o.top_logprobs = TOPN;
    o.top_logprob_tokens = (int32_t *)gu_ptr(lt);
    o.top_logprob_values = (float *)gu_ptr(lv);
  }
  gu_outputs ref;
  float ref_lp[B + GU_GUARD], got_lp[B + GU_GUARD];
  int32_t ref_rk[B + GU_GUARD], got_rk[B + GU_GUARD];
  tp_unsharded_draw_ex(ctx, &cu, &o, &ref);
  gu_download(ctx, ref_lp, tl, sizeof ref_lp);
  gu_download(ctx, ref_rk, trk, sizeof ref_rk);
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  const int cmp = !gu_fake_driver(); /* the fake driver runs no kernel */
  /* the unsharded logprobs against the host's (which call a mismatch is in) */
  static double z[V];
  int hbad = 0;
  for (int b = 0; b < B && cmp && (c->outs & 1); b++) {
    int t = 0;
    const double l = tp_host_row(u, b, c->cap, z, &t);
    const double want = tg[b] >= 0 && tg[b] < V ? z[tg[b]] - l : NAN;
    if (!(isnan(want) ? isnan(ref_lp[b]) : fabs(ref_lp[b] - want) <= 1e-3 + 1e-4 * fabs(want)) &&
        hbad++ < 3)
      fprintf(stderr, "%s: unsharded row %d target %d logprob %.7g, host %.7g\n", c->what, b,
              tg[b], ref_lp[b], want);
  }
  CHECK_MSG(hbad == 0, "%s: the unsharded call's target logprobs unlike the host's", c->what);

  tp_shared sh = {R, {{0}}, {0}, (size_t)B * MAXR * 16 * (TOPN + 1)};
  pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
  tp_rank rk[MAXR];
  fs_options opt[MAXR];
  CUdeviceptr dlp[MAXR], drk[MAXR], dtt[MAXR], dtl[MAXR], dtr[MAXR], dlt[MAXR], dlv[MAXR];
  for (int k = 0; k < R; k++) {
    tp_rank_open(&rk[k], &sh, k, u, start);
    REQUIRE(fs_context_set_tp_rank(rk[k].ctx, k, R) == FS_OK);
    REQUIRE(fs_context_set_noise(rk[k].ctx, noise) == FS_OK);
    tp_case_sampling(&rk[k].s, S, c->greedy);
    fs_context *x = rk[k].ctx;
    dtt[k] = gu_upload_new(x, tg, sizeof tg);
    dtl[k] = gu_alloc(x, (B + GU_GUARD) * 4), dtr[k] = gu_alloc(x, (B + GU_GUARD) * 4);
    gu_poison(x, dtl[k], (B + GU_GUARD) * 4);
    gu_poison(x, dtr[k], (B + GU_GUARD) * 4);
    opt[k] = case_options(c, dtt[k], dtl[k], dtr[k]);
    dlt[k] = dlv[k] = 0;
    if (c->top) {
      dlt[k] = gu_alloc(x, (size_t)B * TOPN * 4), dlv[k] = gu_alloc(x, (size_t)B * TOPN * 4);
      opt[k].top_logprobs = TOPN;
      opt[k].top_logprob_tokens = (int32_t *)gu_ptr(dlt[k]);
      opt[k].top_logprob_values = (float *)gu_ptr(dlv[k]);
    }
    tp_rank_extras(&rk[k], &opt[k], c->lp, c->ranks, c->nolog, &dlp[k], &drk[k]);
    rk[k].opt = &opt[k];
  }
  g_control = c->control;
  pthread_t th[MAXR];
  for (int k = 0; k < R; k++) REQUIRE(pthread_create(&th[k], NULL, tt_rank_main, &rk[k]) == 0);
  for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
  g_control = 0;
  /* the keys; the draws' logits where summed; the gather; the draws'
  ** counts; the targets' three */
  const int want = 1 + (!c->nolog || c->lp || c->ranks) + c->top + c->ranks + 3;
  int bad = 0, lbad = 0, rbad = 0, mism = 0;
  for (int k = 0; k < R; k++) {
    char who[112];
    snprintf(who, sizeof who, "%s, R=%d rank %d", c->what, R, k);
    if (rk[k].status == FS_OK && rk[k].collectives != want) {
      fprintf(stderr, "%s: %d collectives, expected %d\n", who, rk[k].collectives, want);
      bad++;
    }
    fs_context *x = rk[k].ctx;
    gu_download(x, got_lp, dtl[k], sizeof got_lp);
    gu_download(x, got_rk, dtr[k], sizeof got_rk);
    for (int b = 0; b < B + GU_GUARD && cmp; b++) {
      const int guard = b >= B;
      if ((c->outs & 1) && !(guard ? gu_float_bits(got_lp[b]) == 0xFFFFFFFFu
                                   : close_lp(got_lp[b], ref_lp[b], lse[b])) &&
          lbad++ < 5 && !c->control)
        fprintf(stderr, "%s: row %d target %d logprob %.9g, unsharded %.9g\n", who, b,
                guard ? 0 : tg[b], got_lp[b], ref_lp[b]);
      if ((c->outs & 2) && got_rk[b] != ref_rk[b] && rbad++ < 5 && !c->control)
        fprintf(stderr, "%s: row %d target %d rank %d, unsharded %d\n", who, b,
                guard ? 0 : tg[b], got_rk[b], ref_rk[b]);
    }
    if (!(c->outs & 1)) /* left unwritten */
      for (int b = 0; b < B && cmp; b++) lbad += gu_float_bits(got_lp[b]) != 0xFFFFFFFFu;
    if (!(c->outs & 2))
      for (int b = 0; b < B && cmp; b++) rbad += (uint32_t)got_rk[b] != 0xFFFFFFFFu;
    gu_free(x, dtt[k]), gu_free(x, dtl[k]), gu_free(x, dtr[k]);
    if (c->top) gu_free(x, dlt[k]), gu_free(x, dlv[k]);
    if (c->lp) gu_free(x, dlp[k]);
    if (c->ranks) gu_free(x, drk[k]);
    if (!c->control) mism += tp_rank_close(&rk[k], &ref, who);
    else (void)tp_rank_close(&rk[k], &ref, who); /* its draws' logits are not summed */
  }
  pthread_barrier_destroy(&sh.bar);
  gu_outputs_free(ctx, &ref);
  gu_free(ctx, tt), gu_free(ctx, tl), gu_free(ctx, trk);
  if (c->top) gu_free(ctx, lt), gu_free(ctx, lv);
  if (c->control) {
    CHECK_MSG((rbad > 0 && lbad > 0) || !cmp, "%s: the ranks (%d unlike) or the logprobs (%d) "
              "equal the unsharded call's with no sums: the comparison cannot fail", c->what,
              rbad, lbad);
    printf("%-46s R=%d: %d ranks and %d logprobs unlike the unsharded call's (must be > 0)\n",
           c->what, R, rbad, lbad);
    return rbad + lbad;
  }
  CHECK_MSG(bad == 0, "%s, R=%d: collectives unlike the path's", c->what, R);
  CHECK_MSG(mism == 0, "%s, R=%d: %d draws unlike the unsharded call's", c->what, R, mism);
  CHECK_MSG(lbad == 0, "%s, R=%d: %d target logprobs wrong", c->what, R, lbad);
  CHECK_MSG(rbad == 0, "%s, R=%d: %d target ranks unlike the unsharded call's", c->what, R, rbad);
  printf("%-46s R=%d: %s\n", c->what, R,
         bad || mism || lbad || rbad ? "MISMATCH"
         : cmp ? "targets and draws as unsharded"
               : "ran (the fake driver: the collectives counted, nothing compared)");
  return bad + mism + lbad + rbad;
}

/* Bad input on one rank of one: a logit bias, a sampled call's top_p. */
static void bad_input(const tp_unsharded *u) {
  int start[2] = {0, V};
  tp_shared sh = {1, {{0}}, {0}, 0};
  pthread_barrier_init(&sh.bar, NULL, 1u);
  tp_rank r;
  tp_rank_open(&r, &sh, 0, u, start);
  fs_context *x = r.ctx;
  const int32_t tg[B] = {1, 2, 3, 4, 5, 6};
  const int32_t bt[B] = {7, 7, 7, 7, 7, 7};
  const float bv[B] = {1, 1, 1, 1, 1, 1};
  const CUdeviceptr tt = gu_upload_new(x, tg, sizeof tg), tl = gu_alloc(x, B * 4),
                    btok = gu_upload_new(x, bt, sizeof bt), bval = gu_upload_new(x, bv, sizeof bv);
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.target_tokens = (const int32_t *)gu_ptr(tt);
  o.target_logprobs = (float *)gu_ptr(tl);
  REQUIRE(fs_prepare(x, &r.p, &r.s) == FS_OK);
  fs_options ob = o;
  ob.logit_bias_tokens = (const int32_t *)gu_ptr(btok);
  ob.logit_bias_values = (const float *)gu_ptr(bval);
  ob.logit_bias_count = 1;
  int st = fs_sample_tp_ex(x, &r.p, &r.s, &ob, &r.o, tp_host_allreduce, &r, (void *)r.stream);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && strstr(fs_last_error(x), "target_tokens") &&
                strstr(fs_last_error(x), "logit_bias_count=1"),
            "targets with a logit bias: status %d, %s", st, fs_last_error(x));
  fs_options op = o;
  op.top_p = 0.9f; /* tp_temps: sampled rows */
  st = fs_sample_tp_ex(x, &r.p, &r.s, &op, &r.o, tp_host_allreduce, &r, (void *)r.stream);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && strstr(fs_last_error(x), "target_tokens") &&
                strstr(fs_last_error(x), "top_p"),
            "targets with top_p: status %d, %s", st, fs_last_error(x));
  CHECK_MSG(r.collectives == 0, "a refused call ran %d collectives", r.collectives);
  gu_free(x, tt), gu_free(x, tl), gu_free(x, btok), gu_free(x, bval);
  gu_outputs_free(x, &r.go);
  gu_push(x);
  x->cu->cuStreamDestroy(r.stream);
  gu_pop(x);
  fs_context_destroy(x);
  free(sh.host[0]);
  pthread_barrier_destroy(&sh.bar);
  printf("bad input refused: targets with a logit bias, with a sampled call's top_p\n");
}

/* NCCL with one rank (ncclCommInitAll on GPU 0): fs_sample_nccl_ex with
** targets must give the unsharded call's values; then the call captured in
** a CUDA graph, replayed after new target ids are written, must give the
** unsharded call's for those.  Skipped, said so, where libnccl.so.2 is not
** loadable. */
static void nccl_one_rank(fs_context *ctx, const tp_unsharded *u, const int *top) {
  void *comm;
  int (*destroy)(void *) = tp_nccl_one(&comm, "NCCL single-rank case");
  if (!destroy) return;
  const int start[2] = {0, V};
  int32_t t0[B], t1[B];
  make_targets(top, start, 1, t0);
  for (int b = 0; b < B; b++) t1[b] = (t0[b] + 1000 + 37 * b) % V;
  const CUdeviceptr tt = gu_upload_new(ctx, t0, sizeof t0), tl = gu_alloc(ctx, B * 4),
                    trk = gu_alloc(ctx, B * 4);
  const tt_case plain = cases[0];
  const fs_options o = case_options(&plain, tt, tl, trk);
  float ref_l[2][B], got_l[B];
  int32_t ref_r[2][B], got_r[B];
  gu_outputs ref, ref1, go;
  tp_unsharded_draw_ex(ctx, u, &o, &ref); /* the unsharded values for both id sets */
  gu_download(ctx, ref_l[0], tl, sizeof ref_l[0]);
  gu_download(ctx, ref_r[0], trk, sizeof ref_r[0]);
  gu_upload(ctx, tt, t1, sizeof t1);
  tp_unsharded_draw_ex(ctx, u, &o, &ref1);
  gu_download(ctx, ref_l[1], tl, sizeof ref_l[1]);
  gu_download(ctx, ref_r[1], trk, sizeof ref_r[1]);
  gu_outputs_free(ctx, &ref1);
  tp_outputs(ctx, &go);
  const fs_outputs out = gu_outputs_api(&go);
  gu_upload(ctx, tt, t0, sizeof t0);
  const int st = fs_sample_nccl_ex(ctx, &u->full, &u->s, &o, &out, comm, NULL);
  CHECK_MSG(st == FS_OK, "fs_sample_nccl_ex with targets: %s", fs_last_error(ctx));
  gu_sync(ctx);
  int bad = tp_mismatches(ctx, &go, &ref, "NCCL targets, 1 rank");
  gu_download(ctx, got_l, tl, sizeof got_l);
  gu_download(ctx, got_r, trk, sizeof got_r);
  for (int b = 0; b < B && !gu_fake_driver(); b++)
    bad += !close_lp(got_l[b], ref_l[0][b], 100.0) || got_r[b] != ref_r[0][b];
  CHECK_MSG(bad == 0, "NCCL single rank, targets: %d mismatches", bad);
  printf("NCCL, 1 rank, targets: %s\n",
         bad ? "MISMATCH" : gu_fake_driver() ? "ran (the fake driver)" : "as unsharded");
  const CUstream gs = gu_stream_new(ctx);
  CUgraph graph;
  CUgraphExec exec;
  const int cst =
      tp_nccl_capture(ctx, &u->full, &u->s, &o, &out, comm, gs, &graph, &exec, "targets");
  int gbad = 0;
  if (cst == FS_OK) {
    for (int k = 0; k < 2; k++) {
      gu_upload(ctx, tt, k ? t1 : t0, sizeof t0);
      gu_poison(ctx, tl, B * 4);
      gu_poison(ctx, trk, B * 4);
      snap r = gu_graph_replay(ctx, exec, gs, &go, "NCCL targets replay");
      snap_free(&r);
      gu_download(ctx, got_l, tl, sizeof got_l);
      gu_download(ctx, got_r, trk, sizeof got_r);
      for (int b = 0; b < B && !gu_fake_driver(); b++)
        gbad += !close_lp(got_l[b], ref_l[k][b], 100.0) || got_r[b] != ref_r[k][b];
    }
    CHECK_MSG(gbad == 0, "NCCL single rank, targets, graph replays: %d mismatches", gbad);
  }
  printf("NCCL, 1 rank, targets, a CUDA graph's replays with new ids: %s\n",
         gbad || cst ? "MISMATCH" : "as unsharded");
  if (exec) gu_graph_done(ctx, exec, graph, gs);
  gu_outputs_free(ctx, &ref);
  gu_outputs_free(ctx, &go);
  gu_free(ctx, tt), gu_free(ctx, tl), gu_free(ctx, trk);
  destroy(comm);
}

/* u with special_head's W (host copy and device copy; free both), the rest shared. */
static tp_unsharded special_head(fs_context *ctx, const tp_unsharded *u) {
  tp_unsharded sp = *u;
  sp.w = gu_malloc((size_t)V * TP_D * 2);
  memcpy(sp.w, u->w, (size_t)V * TP_D * 2);
  for (int d = 0; d < TP_D; d++) {
    sp.w[(size_t)NAN_ID * TP_D + d] = 0x7fc0;              /* bf16 NaN */
    sp.w[(size_t)INF_ID * TP_D + d] = d ? 0x0000 : 0x7f80; /* +inf, then zeros */
  }
  sp.dw = gu_upload_new(ctx, sp.w, (size_t)V * TP_D * 2);
  sp.full.weight = gu_ptr(sp.dw);
  return sp;
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  tp_unsharded u;
  tp_unsharded_init(ctx, &u);
  uint32_t mask[B * TP_MW];
  for (int i = 0; i < B * TP_MW; i++) mask[i] = 0x55555555u; /* the even ids */
  g_mask = gu_upload_new(ctx, mask, sizeof mask);
  /* each row's argmax and log-sum-exp without a cap, from the host */
  static double z[V];
  int top[B];
  double lse[B];
  for (int b = 0; b < B; b++) lse[b] = tp_host_row(&u, b, 0.0f, z, &top[b]);
  const char *only = getenv("FS_TEST_CASES");
  tp_unsharded sp = special_head(ctx, &u);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (!tp_case_wanted(only, i)) continue;
    run_case(ctx, cases[i].special ? &sp : &u, &cases[i], top, lse);
  }
  gu_free(ctx, sp.dw);
  free(sp.w);
  bad_input(&u);
  if ((!only || !*only) && !gu_fake_driver()) nccl_one_rank(ctx, &u, top);
  gu_free(ctx, g_mask);
  tp_unsharded_free(ctx, &u);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp_targets");
}
