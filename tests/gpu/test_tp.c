// fs-test-timeout: 600
/*
** test_tp: tensor-parallel sampling on one GPU.
**
** 1. R = 2, 3, 4 and 8 "ranks" as threads on GPU 0, each with its own
**    context and stream and an uneven shard of W (vocab_offset set), call
**    fs_sample_tp() with a host-staged all-reduce callback (a barrier, then
**    every rank reduces all ranks' buffers): tokens, keys and logits must be
**    bitwise those of one unsharded fs_sample() (each logit is one row-by-row
**    dot product whatever the shard, so no tolerance is needed).  Then the
**    same with logprobs (fs_sample_tp_ex, fs_options.logprobs; R = 3 and 8
**    without logits, the path where only the logprobs need the winners'
**    logits): tokens, keys and logits as before, and every logprob within
**    2e-5 + 1e-6 |lse| of the unsharded fs_sample_ex's (the shards' sums
**    are merged in another order) and no guard entry written; R = 3 with
**    one sample a row; R = 2 with a NaN in one W row of the second shard:
**    every logprob NaN, as the unsharded call's.  R = 3 and 4 (with
**    logprobs) with logit_softcap 0.5 on every rank: bitwise the unsharded
**    fs_sample_ex with it (the cap is elementwise, the same tanhf on every
**    shard), whose logits lie in [-0.5, 0.5].  R = 3 (with logprobs and the
**    cap) and 4 with a logit bias (fs_options.logit_bias_*, the same arrays
**    on every rank, ids of every shard, repeats, pads and a ban): bitwise the
**    unsharded fs_sample_ex with it (each rank scores its own biased ids);
**    the same two with per-row repetition penalties on the listed tokens
**    (0.3, 2.5 and none; since 0.3.9), bitwise the unsharded call's too;
**    the same two with a long list (1500 entries a row, since 0.3.11: the
**    filters' path on every rank, each making its own ids distinct); and
**    under FS_NOISE_GROUP16 (since 0.3.17; shards cut at multiples of 16)
**    R = 3 with logprobs, the cap, the bias and penalties, R = 4 with the
**    bias: bitwise the unsharded group call with it (each rank folds its
**    own biased ids' groups).
** 2. NCCL with a single rank (ncclCommInitAll on GPU 0) through
**    fs_sample_nccl(): the same tokens as fs_sample(); and through
**    fs_sample_nccl_ex() with a mask allowing the even ids: the same as
**    fs_sample_ex() with it (a stride of 0 refused); masked with a row that
**    allows no id, with logprobs: its logprobs -inf, the others as
**    fs_sample_ex's.  Skipped with a message if libnccl.so.2 cannot be
**    loaded.
** Multi-GPU runs need a machine with several GPUs (see issue 5).
*/
#include "tp_util.h"

#include <dlfcn.h>
#include <pthread.h>

#define MAXR TP_MAXR
enum { B = TP_B, D = TP_D, V = TP_V, NITEMS = TP_NITEMS };

/* The logit bias of the bias cases: BIAS_N entries a row, device arrays on
** GPU 0 (every rank's context is GPU 0's primary context). */
enum { BIAS_N = 12, BIAS_LONG = 1500 };
static CUdeviceptr g_bias_tok, g_bias_val, g_reps, g_long_tok, g_long_val;

static void bias_upload(fs_context *ctx) {
  int32_t tok[B * BIAS_N];
  float val[B * BIAS_N], reps[B];
  tp_bias_fill(tok, val, BIAS_N, 4242);
  for (int b = 0; b < B; b++) reps[b] = b % 3 == 0 ? 0.3f : b % 3 == 1 ? 2.5f : NAN;
  g_bias_tok = gu_upload_new(ctx, tok, sizeof tok);
  g_bias_val = gu_upload_new(ctx, val, sizeof val);
  g_reps = gu_upload_new(ctx, reps, sizeof reps);
  int32_t *lt = gu_malloc(sizeof(int32_t) * B * BIAS_LONG);
  float *lv = gu_malloc(sizeof(float) * B * BIAS_LONG);
  tp_bias_fill(lt, lv, BIAS_LONG, 777);
  g_long_tok = gu_upload_new(ctx, lt, sizeof(int32_t) * B * BIAS_LONG);
  g_long_val = gu_upload_new(ctx, lv, sizeof(float) * B * BIAS_LONG);
  free(lt);
  free(lv);
}

/* on: 1 the bias, 2 the bias and per-row repetition penalties (0.3, 2.5,
** none), 3 the long list and those penalties */
static void bias_set(fs_options *o, int on) {
  o->logit_bias_tokens = on ? (const int32_t *)gu_ptr(on == 3 ? g_long_tok : g_bias_tok) : NULL;
  o->logit_bias_values = on ? (const float *)gu_ptr(on == 3 ? g_long_val : g_bias_val) : NULL;
  o->logit_bias_count = on == 3 ? BIAS_LONG : on ? BIAS_N : 0;
  o->repetition_penalties = on >= 2 ? (const float *)gu_ptr(g_reps) : NULL;
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  tp_unsharded u; /* the unsharded draw, on GPU 0 */
  tp_unsharded_init(ctx, &u);
  /* The cases: R ranks, with logprobs, without logits, S samples a row (1:
  ** the kernels' one-sample paths, wg's held pairs), and a NaN planted in one
  ** W row of the second shard (every logit of that row NaN, so the shard's
  ** log-sum-exp is NaN, the largest key: every logprob NaN), and a logit
  ** soft-cap (fs_options.logit_softcap, every rank the same c). */
  static const struct {
    int R, with_lp, no_logits, S, nan;
    float cap;
    int bias;
    int group; /* FS_NOISE_GROUP16 (a bias since 0.3.17), shards cut at multiples of 16 */
  } cases[] = {{2, 0, 0, TP_S, 0, 0, 0, 0}, {3, 0, 0, TP_S, 0, 0, 0, 0},
               {4, 0, 0, TP_S, 0, 0, 0, 0}, {8, 0, 0, TP_S, 0, 0, 0, 0},
               {2, 1, 0, TP_S, 0, 0, 0, 0}, {3, 1, 1, TP_S, 0, 0, 0, 0},
               {4, 1, 0, TP_S, 0, 0, 0, 0}, {8, 1, 1, TP_S, 0, 0, 0, 0}, {3, 1, 0, 1, 0, 0, 0, 0},
               {2, 1, 0, TP_S, 1, 0, 0, 0}, {3, 0, 0, TP_S, 0, 0.5f, 0, 0},
               {4, 1, 0, TP_S, 0, 0.5f, 0, 0}, {3, 1, 0, TP_S, 0, 0.5f, 1, 0},
               {4, 0, 0, TP_S, 0, 0, 1, 0}, {3, 1, 0, TP_S, 0, 0.5f, 2, 0},
               {4, 0, 0, TP_S, 0, 0, 2, 0}, {3, 1, 0, TP_S, 0, 0.5f, 3, 0},
               {4, 0, 0, TP_S, 0, 0, 3, 0}, {3, 1, 0, TP_S, 0, 0.5f, 2, 1},
               {4, 0, 0, TP_S, 0, 0, 1, 1}};
  bias_upload(ctx);
  for (size_t rl = 0; rl < sizeof cases / sizeof *cases; rl++) {
    const int R = cases[rl].R, with_lp = cases[rl].with_lp, no_logits = cases[rl].no_logits;
    const int S = cases[rl].S, nan_row = cases[rl].nan ? (int)((long long)V / 2 + 7) : -1;
    const float cap = cases[rl].cap;
    const int bias = cases[rl].bias, group = cases[rl].group;
    int start[MAXR + 1];
    tp_shard_bounds(V, R, start);
    for (int k = 1; k < R && group; k++) start[k] &= ~15;
    const int noise = group ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
    REQUIRE(fs_context_set_noise(ctx, noise) == FS_OK);
    const size_t at = nan_row >= 0 ? (size_t)nan_row * D + 3 : 0; /* the planted element */
    const uint16_t kept = u.w[at];
    if (nan_row >= 0) { /* planted in the shared W, restored below */
      const uint16_t nan = 0x7FC0u; /* bf16 NaN */
      gu_upload(ctx, u.dw + at * 2, &nan, 2);
    }
    /* the unsharded draw of this case and its logprobs (fs_sample_ex) */
    gu_outputs cref;
    float ref_lp[NITEMS];
    const gu_outputs *ref = &u.ref;
    if ((cap > 0.0f || bias) && !with_lp) {
      fs_options o;
      memset(&o, 0, sizeof o);
      o.size = sizeof o;
      o.logit_softcap = cap;
      bias_set(&o, bias);
      tp_unsharded_draw_ex(ctx, &u, &o, &cref);
      ref = &cref;
      int over = 0; /* the capped logits: inside [-cap, cap] */
      for (int i = 0; i < NITEMS && cap > 0.0f; i++) over += !(fabsf(cref.h_logits[i]) <= cap);
      CHECK_MSG(over == 0, "fs_sample_ex with logit_softcap %g: %d logits outside it",
                (double)cap, over);
    }
    if (with_lp) {
      tp_unsharded cu = u;
      cu.s.num_samples = S;
      fs_options o;
      memset(&o, 0, sizeof o);
      o.size = sizeof o;
      o.logit_softcap = cap;
      bias_set(&o, bias);
      tp_unsharded_lp(ctx, &cu, &o, &cref, ref_lp);
      ref = &cref;
      if (S == TP_S && nan_row < 0 && cap == 0.0f && !bias) /* u.ref's own call, with logprobs */
        CHECK_MSG(tp_mismatches(ctx, &cref, &u.ref, "fs_sample_ex with logprobs") == 0,
                  "logprobs changed the unsharded draw");
      int nans = 0;
      for (int i = 0; i < B * S; i++) nans += isnan(ref_lp[i]) != 0;
      CHECK_MSG(nans == (nan_row >= 0 ? B * S : 0), "case %zu: %d unsharded logprobs NaN", rl,
                nans);
    }
    REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
    tp_shared sh = {R, {{0}}, {0}, 0};
    pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
    tp_rank rk_[MAXR];
    fs_options opt[MAXR];
    CUdeviceptr dlp[MAXR];
    for (int k = 0; k < R; k++) {
      tp_rank_open(&rk_[k], &sh, k, &u, start);
      REQUIRE(fs_context_set_noise(rk_[k].ctx, noise) == FS_OK);
      rk_[k].s.num_samples = S;
      if ((cap > 0.0f || bias) && !with_lp) {
        memset(&opt[k], 0, sizeof opt[k]);
        opt[k].size = sizeof opt[k];
        opt[k].logit_softcap = cap;
        bias_set(&opt[k], bias);
        rk_[k].opt = &opt[k];
      }
      if (!with_lp) continue;
      dlp[k] = tp_lp_alloc(rk_[k].ctx, &opt[k]);
      opt[k].logit_softcap = cap;
      bias_set(&opt[k], bias);
      rk_[k].opt = &opt[k];
      if (no_logits) {
        gu_outputs_free(rk_[k].ctx, &rk_[k].go);
        gu_outputs_alloc(rk_[k].ctx, &rk_[k].go, NITEMS, 0, 1);
        gu_outputs_poison(rk_[k].ctx, &rk_[k].go);
        rk_[k].o = gu_outputs_api(&rk_[k].go);
      }
    }
    tp_run_ranks(rk_, R);
    int mism = 0, lbad = 0;
    for (int k = 0; k < R; k++) {
      char who[48];
      snprintf(who, sizeof who, "R=%d%s rank %d", R, with_lp ? " logprobs" : "", k);
      if (with_lp) lbad += tp_lp_mismatches(rk_[k].ctx, dlp[k], ref_lp, ref->h_logits, who);
      mism += tp_rank_close(&rk_[k], ref, who);
    }
    if (ref != &u.ref) gu_outputs_free(ctx, &cref);
    if (nan_row >= 0) gu_upload(ctx, u.dw + at * 2, &kept, 2);
    CHECK_MSG(mism == 0, "R=%d: %d mismatches", R, mism);
    CHECK_MSG(lbad == 0, "R=%d: %d logprobs wrong", R, lbad);
    printf("R=%d ranks (shards starting at", R);
    for (int k = 0; k < R; k++) printf(" %d", start[k]);
    printf(")%s%s%s%s%s%s: %s\n", group ? ", FS_NOISE_GROUP16" : "",
           with_lp ? (no_logits ? ", logprobs without logits" : ", logprobs and logits") : "",
           S == 1 ? ", one sample a row" : "", nan_row >= 0 ? ", a NaN logit in every row" : "",
           cap > 0.0f ? ", logits soft-capped" : "",
           bias == 3 ? ", a logit bias of 1500 entries a row" : bias ? ", a logit bias" : "",
           mism || lbad ? "MISMATCH"
           : no_logits  ? "tokens, keys and logprobs as the unsharded call's"
           : with_lp    ? "tokens, keys, logits and logprobs as the unsharded call's"
                        : "tokens, keys and logits equal the unsharded call");
    pthread_barrier_destroy(&sh.bar);
  }

  /* NCCL with one rank. */
  void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!nccl) {
    printf("NCCL single-rank case skipped: libnccl.so.2 not loadable (%s)\n", dlerror());
  } else {
    int (*init_all)(void **, int, const int *) =
        (int (*)(void **, int, const int *))dlsym(nccl, "ncclCommInitAll");
    int (*destroy)(void *) = (int (*)(void *))dlsym(nccl, "ncclCommDestroy");
    REQUIRE(init_all && destroy);
    void *comm = NULL;
    int dev = 0;
    gu_push(ctx);
    int nr = init_all(&comm, 1, &dev);
    gu_pop(ctx);
    CHECK_MSG(nr == 0, "ncclCommInitAll: %d", nr);
    if (nr == 0) {
      gu_outputs go;
      tp_outputs(ctx, &go);
      const fs_outputs o = gu_outputs_api(&go);
      int st = fs_sample_nccl(ctx, &u.full, &u.s, &o, comm, NULL);
      CHECK_MSG(st == FS_OK, "fs_sample_nccl: %s", fs_last_error(ctx));
      const int bad = tp_mismatches(ctx, &go, &u.ref, "NCCL, 1 rank");
      CHECK_MSG(bad == 0, "NCCL single rank: %d mismatches", bad);
      printf("NCCL, 1 rank: %s\n", bad ? "MISMATCH" : "equal to fs_sample");
      /* masked: even ids only, the whole vocabulary's words per row; row 4
      ** none (with logprobs below) */
      uint32_t *hm = gu_malloc((size_t)B * TP_MW * 4);
      for (size_t i = 0; i < (size_t)B * TP_MW; i++) hm[i] = i / TP_MW == 4 ? 0u : 0x55555555u;
      CUdeviceptr dm = gu_upload_new(ctx, hm, (size_t)B * TP_MW * 4);
      fs_options opt = {.size = sizeof(fs_options), .token_mask = (const uint32_t *)gu_ptr(dm),
                        .token_mask_stride = TP_MW};
      gu_outputs mref;
      tp_unsharded_draw_ex(ctx, &u, &opt, &mref);
      int odd = 0;
      for (int i = 0; i < NITEMS; i++) odd += mref.h_tokens[i] & 1;
      CHECK_MSG(odd == 0, "fs_sample_ex with even ids allowed drew %d odd ids", odd);
      gu_outputs_poison(ctx, &go);
      st = fs_sample_nccl_ex(ctx, &u.full, &u.s, &opt, &o, comm, NULL);
      CHECK_MSG(st == FS_OK, "fs_sample_nccl_ex: %s", fs_last_error(ctx));
      const int mbad = tp_mismatches(ctx, &go, &mref, "NCCL masked, 1 rank");
      CHECK_MSG(mbad == 0, "NCCL single rank, masked: %d mismatches", mbad);
      printf("NCCL masked, 1 rank: %s\n", mbad ? "MISMATCH" : "equal to fs_sample_ex");
      /* the same with logprobs: row 4's -inf, the others the unsharded ones */
      float mlp[NITEMS];
      gu_outputs lref;
      tp_unsharded_lp(ctx, &u, &opt, &lref, mlp);
      for (int s = 0; s < TP_S; s++)
        CHECK_MSG(isinf(mlp[4 * TP_S + s]) && mlp[4 * TP_S + s] < 0,
                  "fs_sample_ex: a row that allows no id has logprob %g, want -inf",
                  mlp[4 * TP_S + s]);
      gu_outputs_poison(ctx, &go);
      const CUdeviceptr dl = tp_lp_alloc(ctx, &opt);
      opt.token_mask = (const uint32_t *)gu_ptr(dm);
      opt.token_mask_stride = TP_MW;
      st = fs_sample_nccl_ex(ctx, &u.full, &u.s, &opt, &o, comm, NULL);
      CHECK_MSG(st == FS_OK, "fs_sample_nccl_ex with logprobs: %s", fs_last_error(ctx));
      const int lbad = tp_mismatches(ctx, &go, &lref, "NCCL masked logprobs, 1 rank") +
                       tp_lp_mismatches(ctx, dl, mlp, lref.h_logits, "NCCL masked logprobs, 1 rank");
      CHECK_MSG(lbad == 0, "NCCL single rank, masked, logprobs: %d mismatches", lbad);
      printf("NCCL masked with logprobs, 1 rank: %s\n",
             lbad ? "MISMATCH" : "as fs_sample_ex's (the row with no id allowed: -inf)");
      gu_outputs_free(ctx, &lref);
      opt.logprobs = NULL;
      opt.token_mask_stride = 0; /* refused: a shard cannot know the whole vocabulary */
      CHECK(fs_sample_nccl_ex(ctx, &u.full, &u.s, &opt, &o, comm, NULL) == FS_INVALID_ARGUMENT &&
            strstr(fs_last_error(ctx), "token_mask_stride=0"));
      gu_outputs_free(ctx, &mref);
      gu_free(ctx, dm);
      free(hm);
      destroy(comm);
      gu_outputs_free(ctx, &go);
    }
  }
  /* Bad input. */
  const fs_outputs o0 = gu_outputs_api(&u.ref); /* not written: the calls are refused */
  CHECK(fs_sample_tp(ctx, &u.full, &u.s, &o0, NULL, NULL, NULL) == FS_INVALID_ARGUMENT &&
        strstr(fs_last_error(ctx), "allreduce"));
  CHECK(fs_sample_nccl(ctx, &u.full, &u.s, &o0, NULL, NULL) == FS_INVALID_ARGUMENT &&
        strstr(fs_last_error(ctx), "nccl_comm"));
  CHECK(fs_sample_nccl_ex(ctx, &u.full, &u.s, NULL, &o0, NULL, NULL) == FS_INVALID_ARGUMENT &&
        strstr(fs_last_error(ctx), "nccl_comm"));
  tp_unsharded_free(ctx, &u);
  gu_free(ctx, g_bias_tok);
  gu_free(ctx, g_reps);
  gu_free(ctx, g_bias_val);
  gu_free(ctx, g_long_tok);
  gu_free(ctx, g_long_val);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp");
}
