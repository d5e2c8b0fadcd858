// fs-test-timeout: 600
/*
** test_tp: tensor-parallel sampling on one GPU.
**
** 1. R = 2, 3, 4 and 8 "ranks" as threads on GPU 0, each with its own
**    context and stream and an uneven shard of W (vocab_offset set), call
**    fs_sample_tp() with a host-staged all-reduce callback (a barrier, then
**    every rank reduces all ranks' buffers): tokens, keys and logits must be
**    bitwise those of one unsharded fs_sample() (each logit is one row-by-row
**    dot product whatever the shard, so no tolerance is needed).
** 2. NCCL with a single rank (ncclCommInitAll on GPU 0) through
**    fs_sample_nccl(): the same tokens as fs_sample().  Skipped with a
**    message if libnccl.so.2 cannot be loaded.
** Multi-GPU runs need a machine with several GPUs (see issue 5).
*/
#include "tp_util.h"

#include <dlfcn.h>
#include <pthread.h>

#define MAXR TP_MAXR
enum { B = TP_B, D = TP_D, V = TP_V, NITEMS = TP_NITEMS };

typedef struct tp_shared {
  int R;
  pthread_barrier_t bar;
  void *host[MAXR];     /* each rank's staged buffer */
} tp_shared;

typedef struct tp_rank {
  tp_shared *sh;
  int rank;
  fs_context *ctx;
  CUstream stream;
  fs_problem p;
  fs_sampling s;
  fs_outputs o;
  gu_outputs go; /* o's arrays */
  int status;
  char err[512];
} tp_rank;

/* All-reduce through the host: correct, slow, and enough to exercise the
** library's TP logic with real concurrent ranks on one GPU. */
static int host_allreduce(void *user, void *buf, size_t count, int op, void *stream) {
  tp_rank *r = user;
  tp_shared *sh = r->sh;
  const fs_cu_api *cu = r->ctx->cu;
  size_t bytes = count * (op == FS_REDUCE_MAX_U64 ? 8 : 4);
  if (cu->cuStreamSynchronize((CUstream)stream)) return 1;
  if (cu->cuMemcpyDtoH(sh->host[r->rank], (CUdeviceptr)(uintptr_t)buf, bytes)) return 1;
  pthread_barrier_wait(&sh->bar);
  void *out = malloc(bytes);
  if (!out) return 1;
  for (size_t i = 0; i < count; i++) {
    if (op == FS_REDUCE_MAX_U64) {
      uint64_t m = 0;
      for (int k = 0; k < sh->R; k++) {
        uint64_t v = ((uint64_t *)sh->host[k])[i];
        if (v > m) m = v;
      }
      ((uint64_t *)out)[i] = m;
    } else {
      float sum = 0;
      for (int k = 0; k < sh->R; k++) sum += ((float *)sh->host[k])[i];
      ((float *)out)[i] = sum;
    }
  }
  pthread_barrier_wait(&sh->bar); /* everyone has read every buffer */
  int bad = cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, out, bytes) != CUDA_SUCCESS;
  free(out);
  return bad;
}

static void *rank_main(void *arg) {
  tp_rank *r = arg;
  r->status = fs_prepare(r->ctx, &r->p, &r->s);
  if (!r->status)
    r->status = fs_sample_tp(r->ctx, &r->p, &r->s, &r->o, host_allreduce, r, (void *)r->stream);
  if (r->status) snprintf(r->err, sizeof r->err, "%s", fs_last_error(r->ctx));
  gu_sync(r->ctx);
  return NULL;
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  tp_unsharded u; /* the unsharded draw, on GPU 0 */
  tp_unsharded_init(ctx, &u);

  static const int ranks[] = {2, 3, 4, 8};
  for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++) {
    const int R = ranks[ri];
    int start[MAXR + 1];
    tp_shard_bounds(V, R, start);
    tp_shared sh = {R, {{0}}, {0}};
    pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
    tp_rank rk_[MAXR];
    pthread_t th[MAXR];
    for (int k = 0; k < R; k++) {
      tp_rank *r = &rk_[k];
      memset(r, 0, sizeof *r);
      r->sh = &sh;
      r->rank = k;
      sh.host[k] = gu_malloc(NITEMS * 8);
      REQUIRE(fs_context_create(0, &r->ctx) == FS_OK);
      gu_push(r->ctx);
      GU_CU(r->ctx, r->ctx->cu->cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING));
      gu_pop(r->ctx);
      r->p = (fs_problem){B, D, start[k + 1] - start[k], start[k], FS_DTYPE_BF16, gu_ptr(u.dh), 0,
                          gu_ptr(u.dw + (CUdeviceptr)start[k] * D * 2), 0};
      r->s = u.s;
      tp_outputs(r->ctx, &r->go);
      r->o = gu_outputs_api(&r->go);
    }
    for (int k = 0; k < R; k++) REQUIRE(pthread_create(&th[k], NULL, rank_main, &rk_[k]) == 0);
    for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
    int mism = 0;
    for (int k = 0; k < R; k++) {
      tp_rank *r = &rk_[k];
      char who[32];
      snprintf(who, sizeof who, "R=%d rank %d", R, k);
      CHECK_MSG(r->status == FS_OK, "%s: %s", who, r->err);
      mism += tp_mismatches(r->ctx, &r->go, &u.ref, who);
      gu_outputs_free(r->ctx, &r->go);
      gu_push(r->ctx);
      r->ctx->cu->cuStreamDestroy(r->stream);
      gu_pop(r->ctx);
      fs_context_destroy(r->ctx);
      free(sh.host[k]);
    }
    CHECK_MSG(mism == 0, "R=%d: %d mismatches", R, mism);
    printf("R=%d ranks (shards starting at", R);
    for (int k = 0; k < R; k++) printf(" %d", start[k]);
    printf("): %s\n", mism ? "MISMATCH" : "tokens, keys and logits equal the unsharded call");
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
  tp_unsharded_free(ctx, &u);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp");
}
