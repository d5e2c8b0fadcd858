// fs-test-timeout: 600
/*
** test_tp_nccl: tensor-parallel sampling over several GPUs of one host,
** through NCCL (issue 5).
**
** For R = 2, 4 and 8 ranks (those the visible GPUs allow), rank k on GPU k
** holds an uneven shard of W (vocab_offset set) and its own copy of H and of
** the per-row temperatures; fs_prepare on each rank first, then one NCCL
** communicator per rank from ncclCommInitAll and one thread per rank calling
** fs_sample_nccl_ex (NULL options: fs_sample_nccl's call) on its own stream.
** Every rank's tokens, keys and logits
** must be bitwise those of one unsharded fs_sample on GPU 0 (each logit is
** one row-by-row dot product whatever the shard and the GPU, so no
** tolerance is needed), for sampled and greedy rows and two samples per row;
** then the same with a token mask (fs_sample_nccl_ex, the same global-id
** bitmask on every rank: half the ids allowed, a row with none, a row whose
** only allowed id lies in the last shard, a greedy row whose allowed ids lie
** in the first) against one unsharded fs_sample_ex, whose masked tokens
** must all be allowed and must differ from the unmasked draw; the masked
** runs also ask for logprobs, which must be within 2e-5 + 1e-6 |lse| of the
** unsharded call's (row 1, no id allowed: -inf).
** Skipped, with the reason, where fewer than two GPUs are visible or
** libnccl.so.2 cannot be loaded (test_tp covers one GPU: concurrent ranks
** with a host all-reduce, and NCCL with one rank).
*/
#include "tp_util.h"

#include <dlfcn.h>
#include <math.h> /* isinf */
#include <pthread.h>

#define MAXR TP_MAXR
enum { B = TP_B, D = TP_D, V = TP_V };

enum { MW = TP_MW }; /* mask words per row, the whole vocabulary's */

typedef struct nccl_rank {
  int rank;
  const fs_options *opt; /* NULL: fs_sample_nccl */
  fs_context *ctx;
  CUstream stream;
  void *comm;
  fs_problem p;
  fs_sampling s;
  fs_outputs o;
  gu_outputs go; /* o's arrays */
  CUdeviceptr dh, dw, dtemps;
  int status;
  char err[512];
} nccl_rank;

/* One rank's call (prepared in main: a rank that fails before the
** collective would leave its peers waiting in it, so what can fail early
** fails there, before any rank starts). */
static void *rank_main(void *arg) {
  nccl_rank *r = arg;
  r->status = fs_sample_nccl_ex(r->ctx, &r->p, &r->s, r->opt, &r->o, r->comm, r->stream);
  if (r->status) snprintf(r->err, sizeof r->err, "%s", fs_last_error(r->ctx));
  gu_sync(r->ctx);
  return NULL;
}

/* The NCCL entry points the test needs (from dlopen). */
typedef struct nccl_fns {
  int (*init_all)(void **, int, const int *);
  int (*destroy)(void *);
} nccl_fns;

/* R ranks, rank k on GPU k with the uneven shard k of u's W, one call each
** (fs_sample_nccl_ex with the mask hmask [B, MW] words and logprobs, or
** neither when NULL), against ref (the unsharded draw, fetched) and its
** logprobs ref_lp (with hmask).  Returns the mismatches, or -1 when NCCL
** could not make the communicators. */
static int run_ranks(int R, const tp_unsharded *u, const uint32_t *hmask, const gu_outputs *ref,
                     const float *ref_lp, const nccl_fns *nf) {
  int start[MAXR + 1], devs[MAXR];
  void *comms[MAXR];
  tp_shard_bounds(V, R, start);
  for (int k = 0; k < R; k++) devs[k] = k;
  nccl_rank rk_[MAXR];
  CUdeviceptr dmask[MAXR], dlp[MAXR];
  fs_options opt[MAXR];
  pthread_t th[MAXR];
  for (int k = 0; k < R; k++) {
    nccl_rank *r = &rk_[k];
    memset(r, 0, sizeof *r);
    r->rank = k;
    REQUIRE(fs_context_create(k, &r->ctx) == FS_OK);
    gu_push(r->ctx);
    GU_CU(r->ctx, r->ctx->cu->cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING));
    gu_pop(r->ctx);
    const int vk = start[k + 1] - start[k];
    r->dh = gu_upload_new(r->ctx, u->h, (size_t)B * D * 2);
    r->dw = gu_upload_new(r->ctx, u->w + (size_t)start[k] * D, (size_t)vk * D * 2);
    r->dtemps = gu_upload_new(r->ctx, tp_temps, sizeof tp_temps);
    r->p = (fs_problem){B, D, vk, start[k], FS_DTYPE_BF16, gu_ptr(r->dh), 0, gu_ptr(r->dw), 0};
    r->s = tp_sampling(r->dtemps); /* this GPU's copy of the temperatures */
    dmask[k] = hmask ? gu_upload_new(r->ctx, hmask, (size_t)B * MW * 4) : 0;
    /* the whole vocabulary's stride, as every rank must give it */
    dlp[k] = tp_lp_alloc(r->ctx, &opt[k]);
    opt[k].token_mask = (const uint32_t *)gu_ptr(dmask[k]);
    opt[k].token_mask_stride = MW;
    r->opt = hmask ? &opt[k] : NULL;
    tp_outputs(r->ctx, &r->go);
    r->o = gu_outputs_api(&r->go);
  }
  for (int k = 0; k < R; k++) {
    const int st = fs_prepare(rk_[k].ctx, &rk_[k].p, &rk_[k].s);
    CHECK_MSG(st == FS_OK, "R=%d rank %d: fs_prepare: %s", R, k, fs_last_error(rk_[k].ctx));
    REQUIRE(st == FS_OK);
  }
  const int nr = nf->init_all(comms, R, devs);
  CHECK_MSG(nr == 0, "R=%d: ncclCommInitAll returned %d", R, nr);
  if (nr == 0) {
    for (int k = 0; k < R; k++) rk_[k].comm = comms[k];
    for (int k = 0; k < R; k++) REQUIRE(pthread_create(&th[k], NULL, rank_main, &rk_[k]) == 0);
    for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
  }
  int mism = 0;
  for (int k = 0; k < R; k++) {
    nccl_rank *r = &rk_[k];
    if (nr == 0) {
      char who[64];
      snprintf(who, sizeof who, "R=%d%s rank %d (GPU %d)", R, hmask ? " masked" : "", k, k);
      CHECK_MSG(r->status == FS_OK, "%s: %s", who, r->err);
      mism += tp_mismatches(r->ctx, &r->go, ref, who);
      if (hmask) mism += tp_lp_mismatches(r->ctx, dlp[k], ref_lp, ref->h_logits, who);
      nf->destroy(comms[k]);
    }
    if (nr || !hmask) gu_free(r->ctx, dlp[k]);
    gu_outputs_free(r->ctx, &r->go);
    gu_free(r->ctx, r->dh);
    gu_free(r->ctx, r->dw);
    gu_free(r->ctx, r->dtemps);
    if (dmask[k]) gu_free(r->ctx, dmask[k]);
    gu_push(r->ctx);
    r->ctx->cu->cuStreamDestroy(r->stream);
    gu_pop(r->ctx);
    fs_context_destroy(r->ctx);
  }
  CHECK_MSG(mism == 0, "R=%d%s: %d mismatches", R, hmask ? " masked" : "", mism);
  printf("R=%d GPUs over NCCL%s (shards starting at", R, hmask ? ", masked" : "");
  for (int k = 0; k < R; k++) printf(" %d", start[k]);
  printf("): %s\n", mism || nr ? "MISMATCH"
                    : hmask ? "tokens, keys, logits and logprobs as the unsharded fs_sample_ex's"
                            : "tokens, keys and logits equal the unsharded call");
  return nr ? -1 : mism;
}

/* The mask of the masked runs, [B, MW] words over global ids: each id
** allowed with probability 1/2 (a fixed hash), but row 1 allows none, row 3
** only id V - 7 (in the last shard at any rank count) and row 5 (greedy)
** only ids 0..99 (in the first). */
static void make_mask(uint32_t *m) {
  unsigned long long st = 0x7E5A11ull;
  for (size_t i = 0; i < (size_t)B * MW; i++)
    m[i] = (uint32_t)(fs_test_rand(&st) >> 32);
  memset(m + 1 * MW, 0, MW * 4);
  memset(m + 3 * MW, 0, MW * 4);
  m[3 * MW + (V - 7) / 32] = 1u << ((V - 7) % 32);
  memset(m + 5 * MW, 0, MW * 4);
  for (int t = 0; t < 100; t++) m[5 * MW + t / 32] |= 1u << (t % 32);
  for (int b = 0; b < B; b++) /* no bits past the last id (the kernel ignores them) */
    m[(size_t)b * MW + MW - 1] &= (uint32_t)((1ull << (V - 32 * (MW - 1))) - 1);
}

/* The unsharded masked draw on ctx's GPU into ref (fetched) and its
** logprobs into lp [TP_NITEMS], checked: every token allowed by its row
** (row 1, none allowed, gives id 0 with logit -inf), and the draw not the
** unmasked one (the mask took effect). */
static void masked_reference(fs_context *ctx, const tp_unsharded *u, const uint32_t *hmask,
                             gu_outputs *ref, float *lp) {
  CUdeviceptr dm = gu_upload_new(ctx, hmask, (size_t)B * MW * 4);
  fs_options opt = {.size = sizeof(fs_options), .token_mask = (const uint32_t *)gu_ptr(dm),
                    .token_mask_stride = MW};
  tp_unsharded_lp(ctx, u, &opt, ref, lp);
  gu_free(ctx, dm);
  int bad = 0, same = 0;
  for (int i = 0; i < TP_NITEMS; i++) {
    const int b = i / TP_S, t = ref->h_tokens[i];
    const int ok = b == 1 ? t == 0 && isinf(ref->h_logits[i]) && ref->h_logits[i] < 0
                          : t >= 0 && t < V && (hmask[(size_t)b * MW + t / 32] >> (t % 32) & 1);
    if (!ok && bad++ < 5)
      fprintf(stderr, "masked unsharded item %d (row %d): token %d logit %g not allowed\n", i, b,
              t, ref->h_logits[i]);
    same += t == u->ref.h_tokens[i];
  }
  CHECK_MSG(bad == 0, "the unsharded masked draw: %d tokens the mask does not allow", bad);
  CHECK_MSG(same < TP_NITEMS, "the unsharded masked draw equals the unmasked one");
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  int ndev = 0;
  GU_CU(ctx, ctx->cu->cuDeviceGetCount(&ndev));
  if (ndev < 2) {
    printf("SKIPPED: multi-GPU tensor parallelism needs 2+ GPUs, %d visible (test_tp covers "
           "one GPU)\n", ndev);
    fs_context_destroy(ctx);
    return 77;
  }
  /* no NVLink multicast, whatever the environment says: on shared hosts it
  ** can take every GPU out of service (fs-bench-tp does the same) */
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!nccl) {
    printf("SKIPPED: libnccl.so.2 not loadable (%s)\n", dlerror());
    fs_context_destroy(ctx);
    return 77;
  }
  int (*init_all)(void **, int, const int *) =
      (int (*)(void **, int, const int *))dlsym(nccl, "ncclCommInitAll");
  int (*destroy)(void *) = (int (*)(void *))dlsym(nccl, "ncclCommDestroy");
  REQUIRE(init_all && destroy);

  tp_unsharded u; /* the unsharded draw, on GPU 0 */
  tp_unsharded_init(ctx, &u);

  nccl_fns nf = {init_all, destroy};
  uint32_t *hmask = gu_malloc((size_t)B * MW * 4);
  make_mask(hmask);
  gu_outputs mref; /* the unsharded masked draw */
  float mlp[TP_NITEMS]; /* its logprobs */
  masked_reference(ctx, &u, hmask, &mref, mlp);

  static const int ranks[] = {2, 4, 8};
  int runs = 0;
  for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++) {
    const int R = ranks[ri];
    if (R > ndev) {
      printf("R=%d ranks: not run, %d GPUs visible\n", R, ndev);
      continue;
    }
    if (run_ranks(R, &u, NULL, &u.ref, NULL, &nf) >= 0) runs++;
    if (run_ranks(R, &u, hmask, &mref, mlp, &nf) >= 0) runs++;
  }
  CHECK_MSG(runs > 0, "no rank count ran");

  gu_outputs_free(ctx, &mref);
  free(hmask);
  tp_unsharded_free(ctx, &u);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp_nccl");
}
