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
#include "gpu_util.h"

#include <dlfcn.h>
#include <pthread.h>

#define MAXR 8
enum { B = 6, D = 512, V = 30011, S = 2, NITEMS = B * S };

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

/* Uneven shard boundaries: not multiples of 16 (or 4). */
static void shard_bounds(int nv, int R, int *start) {
  for (int k = 0; k <= R; k++) start[k] = (int)((long long)nv * k / R);
  for (int k = 1; k < R; k++) start[k] += (k % 2 ? 3 : -5);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  const size_t n = NITEMS;
  unsigned long long seed = 99;
  uint16_t *h = gu_malloc((size_t)B * D * 2), *w = gu_malloc((size_t)V * D * 2);
  for (size_t i = 0; i < (size_t)B * D; i++) h[i] = fs_test_f2bf((float)fs_test_uniform(&seed));
  for (size_t i = 0; i < (size_t)V * D; i++)
    w[i] = fs_test_f2bf((float)(fs_test_uniform(&seed) * 0.2));
  CUdeviceptr dh = gu_upload_new(ctx, h, (size_t)B * D * 2);
  CUdeviceptr dw = gu_upload_new(ctx, w, (size_t)V * D * 2);
  float temps[B] = {1.0f, 0.0f, 0.7f, 2.0f, 1.0f, 0.0f}; /* greedy rows mixed in */
  CUdeviceptr dtemps = gu_upload_new(ctx, temps, sizeof temps);
  fs_sampling s = {0, (const float *)gu_ptr(dtemps), S, 1234, NULL, 5, NULL};

  /* The unsharded draw. */
  CUdeviceptr rt = gu_alloc(ctx, n * 4), rl = gu_alloc(ctx, n * 4), rk = gu_alloc(ctx, n * 8);
  fs_problem full = {B, D, V, 0, FS_DTYPE_BF16, gu_ptr(dh), 0, gu_ptr(dw), 0};
  fs_outputs fo = {(int32_t *)gu_ptr(rt), (float *)gu_ptr(rl), (uint64_t *)gu_ptr(rk)};
  REQUIRE(fs_sample(ctx, &full, &s, &fo, NULL) == FS_OK);
  int32_t ref_t[NITEMS];
  float ref_l[NITEMS];
  uint64_t ref_k[NITEMS];
  gu_download(ctx, ref_t, rt, sizeof ref_t);
  gu_download(ctx, ref_l, rl, sizeof ref_l);
  gu_download(ctx, ref_k, rk, sizeof ref_k);

  static const int ranks[] = {2, 3, 4, 8};
  for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++) {
    const int R = ranks[ri];
    int start[MAXR + 1];
    shard_bounds(V, R, start);
    tp_shared sh = {R, {{0}}, {0}};
    pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
    tp_rank rk_[MAXR];
    pthread_t th[MAXR];
    for (int k = 0; k < R; k++) {
      tp_rank *r = &rk_[k];
      memset(r, 0, sizeof *r);
      r->sh = &sh;
      r->rank = k;
      sh.host[k] = gu_malloc(n * 8);
      REQUIRE(fs_context_create(0, &r->ctx) == FS_OK);
      gu_push(r->ctx);
      GU_CU(r->ctx, r->ctx->cu->cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING));
      gu_pop(r->ctx);
      r->p = (fs_problem){B, D, start[k + 1] - start[k], start[k], FS_DTYPE_BF16, gu_ptr(dh), 0,
                          gu_ptr(dw + (CUdeviceptr)start[k] * D * 2), 0};
      r->s = s;
      CUdeviceptr t = gu_alloc(r->ctx, n * 4), l = gu_alloc(r->ctx, n * 4),
                  kk = gu_alloc(r->ctx, n * 8);
      r->o = (fs_outputs){(int32_t *)gu_ptr(t), (float *)gu_ptr(l), (uint64_t *)gu_ptr(kk)};
    }
    for (int k = 0; k < R; k++) pthread_create(&th[k], NULL, rank_main, &rk_[k]);
    for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
    int mism = 0;
    for (int k = 0; k < R; k++) {
      tp_rank *r = &rk_[k];
      CHECK_MSG(r->status == FS_OK, "R=%d rank %d: %s", R, k, r->err);
      int32_t t[NITEMS];
      float l[NITEMS];
      uint64_t kk[NITEMS];
      gu_download(r->ctx, t, (CUdeviceptr)(uintptr_t)r->o.tokens, sizeof t);
      gu_download(r->ctx, l, (CUdeviceptr)(uintptr_t)r->o.logits, sizeof l);
      gu_download(r->ctx, kk, (CUdeviceptr)(uintptr_t)r->o.keys, sizeof kk);
      for (size_t i = 0; i < n; i++)
        if (t[i] != ref_t[i] || kk[i] != ref_k[i] || memcmp(&l[i], &ref_l[i], 4)) {
          if (mism++ < 5)
            fprintf(stderr, "R=%d rank %d item %zu: token %d key %016llx logit %g; unsharded "
                    "%d %016llx %g\n", R, k, i, t[i], (unsigned long long)kk[i], l[i],
                    ref_t[i], (unsigned long long)ref_k[i], ref_l[i]);
        }
      gu_free(r->ctx, (CUdeviceptr)(uintptr_t)r->o.tokens);
      gu_free(r->ctx, (CUdeviceptr)(uintptr_t)r->o.logits);
      gu_free(r->ctx, (CUdeviceptr)(uintptr_t)r->o.keys);
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
      CUdeviceptr t = gu_alloc(ctx, n * 4), l = gu_alloc(ctx, n * 4);
      fs_outputs o = {(int32_t *)gu_ptr(t), (float *)gu_ptr(l), NULL};
      int st = fs_sample_nccl(ctx, &full, &s, &o, comm, NULL);
      CHECK_MSG(st == FS_OK, "fs_sample_nccl: %s", fs_last_error(ctx));
      int32_t tt[NITEMS];
      float ll[NITEMS];
      gu_download(ctx, tt, t, sizeof tt);
      gu_download(ctx, ll, l, sizeof ll);
      int bad = 0;
      for (size_t i = 0; i < n; i++) bad += tt[i] != ref_t[i] || memcmp(&ll[i], &ref_l[i], 4);
      CHECK_MSG(bad == 0, "NCCL single rank: %d mismatches", bad);
      printf("NCCL, 1 rank: %s\n", bad ? "MISMATCH" : "equal to fs_sample");
      destroy(comm);
      gu_free(ctx, t);
      gu_free(ctx, l);
    }
  }
  /* Bad input. */
  fs_outputs o0 = fo;
  CHECK(fs_sample_tp(ctx, &full, &s, &o0, NULL, NULL, NULL) == FS_INVALID_ARGUMENT &&
        strstr(fs_last_error(ctx), "allreduce"));
  CHECK(fs_sample_nccl(ctx, &full, &s, &o0, NULL, NULL) == FS_INVALID_ARGUMENT &&
        strstr(fs_last_error(ctx), "nccl_comm"));
  gu_free(ctx, rt);
  gu_free(ctx, rl);
  gu_free(ctx, rk);
  gu_free(ctx, dh);
  gu_free(ctx, dw);
  gu_free(ctx, dtemps);
  free(h);
  free(w);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp");
}
