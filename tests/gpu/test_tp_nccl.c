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
#include "gpu_util.h"

#include <dlfcn.h>
#include <pthread.h>

#define MAXR 8
enum { B = 6, D = 512, V = 30011, S = 2, NITEMS = B * S };

typedef struct nccl_rank {
  int rank;
  fs_context *ctx;
  CUstream stream;
  void *comm;
  fs_problem p;
  fs_sampling s;
  fs_outputs o;
  CUdeviceptr dh, dw, dtemps;
  int status;
  char err[512];
} nccl_rank;

static void *rank_main(void *arg) {
  nccl_rank *r = arg;
  r->status = fs_prepare(r->ctx, &r->p, &r->s);
  if (!r->status) r->status = fs_sample_nccl(r->ctx, &r->p, &r->s, &r->o, r->comm, r->stream);
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
  int ndev = 0;
  GU_CU(ctx, ctx->cu->cuDeviceGetCount(&ndev));
  if (ndev < 2) {
    printf("SKIPPED: multi-GPU tensor parallelism needs 2+ GPUs, %d visible (test_tp covers "
           "one GPU)\n", ndev);
    fs_context_destroy(ctx);
    return 77;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1); /* no NVLink multicast (the lent hosts' rule) */
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

  const size_t n = NITEMS;
  unsigned long long seed = 99;
  uint16_t *h = gu_malloc((size_t)B * D * 2), *w = gu_malloc((size_t)V * D * 2);
  for (size_t i = 0; i < (size_t)B * D; i++) h[i] = fs_test_f2bf((float)fs_test_uniform(&seed));
  for (size_t i = 0; i < (size_t)V * D; i++)
    w[i] = fs_test_f2bf((float)(fs_test_uniform(&seed) * 0.2));
  float temps[B] = {1.0f, 0.0f, 0.7f, 2.0f, 1.0f, 0.0f}; /* greedy rows mixed in */

  /* The unsharded draw, on GPU 0. */
  CUdeviceptr dh = gu_upload_new(ctx, h, (size_t)B * D * 2);
  CUdeviceptr dw = gu_upload_new(ctx, w, (size_t)V * D * 2);
  CUdeviceptr dtemps = gu_upload_new(ctx, temps, sizeof temps);
  fs_sampling s = {0, (const float *)gu_ptr(dtemps), S, 1234, NULL, 5, NULL};
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
    shard_bounds(V, R, start);
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
      r->dh = gu_upload_new(r->ctx, h, (size_t)B * D * 2);
      r->dw = gu_upload_new(r->ctx, w + (size_t)start[k] * D, (size_t)vk * D * 2);
      r->dtemps = gu_upload_new(r->ctx, temps, sizeof temps);
      r->p = (fs_problem){B, D, vk, start[k], FS_DTYPE_BF16, gu_ptr(r->dh), 0, gu_ptr(r->dw), 0};
      r->s = s;
      r->s.temperatures = (const float *)gu_ptr(r->dtemps);
      CUdeviceptr t = gu_alloc(r->ctx, n * 4), l = gu_alloc(r->ctx, n * 4),
                  kk = gu_alloc(r->ctx, n * 8);
      r->o = (fs_outputs){(int32_t *)gu_ptr(t), (float *)gu_ptr(l), (uint64_t *)gu_ptr(kk)};
    }
    const int nr = init_all(comms, R, devs);
    CHECK_MSG(nr == 0, "R=%d: ncclCommInitAll returned %d", R, nr);
    if (nr == 0) {
      for (int k = 0; k < R; k++) rk_[k].comm = comms[k];
      for (int k = 0; k < R; k++) pthread_create(&th[k], NULL, rank_main, &rk_[k]);
      for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
    }
    int mism = 0;
    for (int k = 0; k < R; k++) {
      nccl_rank *r = &rk_[k];
      if (nr == 0) {
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
              fprintf(stderr, "R=%d rank %d (GPU %d) item %zu: token %d key %016llx logit %g; "
                      "unsharded %d %016llx %g\n", R, k, k, i, t[i], (unsigned long long)kk[i],
                      l[i], ref_t[i], (unsigned long long)ref_k[i], ref_l[i]);
          }
        destroy(comms[k]);
      }
      gu_free(r->ctx, (CUdeviceptr)(uintptr_t)r->o.tokens);
      gu_free(r->ctx, (CUdeviceptr)(uintptr_t)r->o.logits);
      gu_free(r->ctx, (CUdeviceptr)(uintptr_t)r->o.keys);
      gu_free(r->ctx, r->dh);
      gu_free(r->ctx, r->dw);
      gu_free(r->ctx, r->dtemps);
      fs_context_destroy(r->ctx);
    }
    CHECK_MSG(mism == 0, "R=%d: %d mismatches", R, mism);
    printf("R=%d GPUs over NCCL (shards starting at", R);
    for (int k = 0; k < R; k++) printf(" %d", start[k]);
    printf("): %s\n", mism || nr ? "MISMATCH" : "tokens, keys and logits equal the unsharded call");
    runs++;
  }
  CHECK_MSG(runs > 0, "no rank count ran");

  gu_free(ctx, rt);
  gu_free(ctx, rl);
  gu_free(ctx, rk);
  gu_free(ctx, dh);
  gu_free(ctx, dw);
  gu_free(ctx, dtemps);
  free(h);
  free(w);
  fs_context_destroy(ctx);
  return fs_test_done("test_tp_nccl");
}
