// fs-test-timeout: 600
/*
** test_tp_nccl: tensor-parallel sampling over several GPUs of one host,
** through NCCL (issue 5).
**
** For R = 2, 4 and 8 ranks (those the visible GPUs allow), rank k on GPU k
** holds an uneven shard of W (vocab_offset set) and its own copy of H and of
** the per-row temperatures; one NCCL communicator per rank from
** ncclCommInitAll, one thread per rank calling fs_prepare and
** fs_sample_nccl on its own stream.  Every rank's tokens, keys and logits
** must be bitwise those of one unsharded fs_sample on GPU 0 (each logit is
** one row-by-row dot product whatever the shard and the GPU, so no
** tolerance is needed), for sampled and greedy rows and two samples per row.
** Skipped, with the reason, where fewer than two GPUs are visible or
** libnccl.so.2 cannot be loaded (test_tp covers one GPU: concurrent ranks
** with a host all-reduce, and NCCL with one rank).
*/
#include "tp_util.h"

#include <dlfcn.h>
#include <pthread.h>

#define MAXR TP_MAXR
enum { B = TP_B, D = TP_D, V = TP_V };

typedef struct nccl_rank {
  int rank;
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
  r->status = fs_sample_nccl(r->ctx, &r->p, &r->s, &r->o, r->comm, r->stream);
  if (r->status) snprintf(r->err, sizeof r->err, "%s", fs_last_error(r->ctx));
  gu_sync(r->ctx);
  return NULL;
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

  static const int ranks[] = {2, 4, 8};
  int runs = 0;
  for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++) {
    const int R = ranks[ri];
    if (R > ndev) {
      printf("R=%d ranks: not run, %d GPUs visible\n", R, ndev);
      continue;
    }
    int start[MAXR + 1], devs[MAXR];
    void *comms[MAXR];
    tp_shard_bounds(V, R, start);
    for (int k = 0; k < R; k++) devs[k] = k;
    nccl_rank rk_[MAXR];
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
      r->dh = gu_upload_new(r->ctx, u.h, (size_t)B * D * 2);
      r->dw = gu_upload_new(r->ctx, u.w + (size_t)start[k] * D, (size_t)vk * D * 2);
      r->dtemps = gu_upload_new(r->ctx, tp_temps, sizeof tp_temps);
      r->p = (fs_problem){B, D, vk, start[k], FS_DTYPE_BF16, gu_ptr(r->dh), 0, gu_ptr(r->dw), 0};
      r->s = tp_sampling(r->dtemps); /* this GPU's copy of the temperatures */
      tp_outputs(r->ctx, &r->go);
      r->o = gu_outputs_api(&r->go);
    }
    for (int k = 0; k < R; k++) {
      const int st = fs_prepare(rk_[k].ctx, &rk_[k].p, &rk_[k].s);
      CHECK_MSG(st == FS_OK, "R=%d rank %d: fs_prepare: %s", R, k, fs_last_error(rk_[k].ctx));
      REQUIRE(st == FS_OK);
    }
    const int nr = init_all(comms, R, devs);
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
        char who[40];
        snprintf(who, sizeof who, "R=%d rank %d (GPU %d)", R, k, k);
        CHECK_MSG(r->status == FS_OK, "%s: %s", who, r->err);
        mism += tp_mismatches(r->ctx, &r->go, &u.ref, who);
        destroy(comms[k]);
      }
      gu_outputs_free(r->ctx, &r->go);
      gu_free(r->ctx, r->dh);
      gu_free(r->ctx, r->dw);
      gu_free(r->ctx, r->dtemps);
      gu_push(r->ctx);
      r->ctx->cu->cuStreamDestroy(r->stream);
      gu_pop(r->ctx);
      fs_context_destroy(r->ctx);
    }
    CHECK_MSG(mism == 0, "R=%d: %d mismatches", R, mism);
    printf("R=%d GPUs over NCCL (shards starting at", R);
    for (int k = 0; k < R; k++) printf(" %d", start[k]);
    printf("): %s\n", mism || nr ? "MISMATCH" : "tokens, keys and logits equal the unsharded call");
    runs++;
  }
  CHECK_MSG(runs > 0, "no rank count ran");

  tp_unsharded_free(ctx, &u);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp_nccl");
}
