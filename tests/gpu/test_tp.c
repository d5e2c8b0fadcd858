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
**    fs_sample_nccl(): the same tokens as fs_sample(); and through
**    fs_sample_nccl_ex() with a mask allowing the even ids: the same as
**    fs_sample_ex() with it (a stride of 0 refused).  Skipped with a
**    message if libnccl.so.2 cannot be loaded.
** Multi-GPU runs need a machine with several GPUs (see issue 5).
*/
#include "tp_util.h"

#include <dlfcn.h>
#include <pthread.h>

#define MAXR TP_MAXR
enum { B = TP_B, D = TP_D, V = TP_V, NITEMS = TP_NITEMS };

static void *rank_main(void *arg) {
  tp_rank *r = arg;
  r->status = fs_prepare(r->ctx, &r->p, &r->s);
  if (!r->status)
    r->status = fs_sample_tp(r->ctx, &r->p, &r->s, &r->o, tp_host_allreduce, r, (void *)r->stream);
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
    for (int k = 0; k < R; k++) tp_rank_open(&rk_[k], &sh, k, &u, start);
    for (int k = 0; k < R; k++) REQUIRE(pthread_create(&th[k], NULL, rank_main, &rk_[k]) == 0);
    for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
    int mism = 0;
    for (int k = 0; k < R; k++) {
      char who[32];
      snprintf(who, sizeof who, "R=%d rank %d", R, k);
      mism += tp_rank_close(&rk_[k], &u.ref, who);
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
      /* masked: even ids only, the whole vocabulary's words per row */
      uint32_t *hm = gu_malloc((size_t)B * TP_MW * 4);
      for (size_t i = 0; i < (size_t)B * TP_MW; i++) hm[i] = 0x55555555u;
      CUdeviceptr dm = gu_upload_new(ctx, hm, (size_t)B * TP_MW * 4);
      fs_options opt = {sizeof(fs_options), (const uint32_t *)gu_ptr(dm), TP_MW, NULL};
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
  fs_context_destroy(ctx);
  return fs_test_done("test_tp");
}
