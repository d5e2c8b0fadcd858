/*
** fs-bench-tp: tensor-parallel sampling over R GPUs of one host (one thread
** per GPU, one NCCL communicator each from ncclCommInitAll), W sharded along
** the vocabulary (uneven shards).  Per rank count and batch size it times
**   fused : fs_sample_nccl() on each rank's shard (O(B) bytes exchanged);
**           with --logprobs 1, fs_sample_nccl_ex() writing each draw's
**           logprob too (O(B) more); with --top-k / --top-p, the filters
**           (the shard's logits written, eight more all-reduces at most: a
**           max of 3 B keys, then sums of up to B x 2048 x 5 floats;
**           runtime/filter.c), the baselines staying unfiltered; with
**           --draw-ranks 1 each draw's rank too (fs_options.ranks: the
**           shard's logits written, by the fused pass since 0.3.15 with no
**           filters, two more all-reduces: the draws' logits, the counts;
**           with filters a third, the shards' bounds); with
**           --top-logprobs N each row's N most likely tokens too
**           (fs_options.top_logprobs, since 0.3.16: the shard's logits
**           written by the fused pass, the shard's lists, one more max
**           all-reduce that gathers every rank's lists, their merge);
**           with --targets 1 each row's target's logprob and rank too
**           (fs_options.target_tokens, since 0.3.19: the shard's logits
**           written by the fused pass, one read of them, three more
**           all-reduces of B or 2 B elements; ids spread over the shards);
**           with --noise group16 every call under FS_NOISE_GROUP16
**           (fs_context_set_noise; the shards then cut at multiples of 16)
**   gather: cuBLAS mm on the shard, ncclAllGather of the [B, V/R] logits,
**           then one Gumbel-max pass over the gathered [R, B, V/R] logits
**           (what engines do today)
**   mm    : cuBLAS mm on the shard alone
**   one   : with --ranks 1 only, fs_sample_ex() with the same options (the
**           one-GPU call: with filters, runtime/filter.c's one-GPU path)
** Each time is rank 0's median of --reps runs (CUDA events on its stream; the
** ranks start each run together; the methods take turns run by run, since
** 0.3.15).  --fused-only 1 times the fused call alone (the other columns
** print 0; scripts/gpu-tp-filter-prof.sh's ncu counts its launches).  NVLink multicast stays off
** (NCCL_NVLS_ENABLE=0).
**
**   fs-bench-tp [--ranks R] [--model NAME | --shape D=..,V=..] [--batch LIST] [--reps N]
**               [--logprobs 0|1] [--top-k K] [--top-p P] [--draw-ranks 0|1]
**               [--top-logprobs N] [--targets 0|1] [--fused-only 0|1]
**               [--noise token|group16] [--csv FILE]
**
** --csv appends one row per batch size (a header first when FILE is new or
** empty): D, V, ranks, B, fused_us, gather_us, mm_us, device, logprobs, top_k,
** top_p, draw_ranks (logprobs since 0.3.1, top_k and top_p since 0.3.7,
** draw_ranks since 0.3.14, top_logprobs since 0.3.16, noise since 0.3.17,
** targets since 0.3.19:
** rows appended to an older file have more fields).
*/
#include "bench_kernels.h"
#include "fs_nvrtc.h"
#include "fs_tools.h"

#include <cublas_v2.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h's f() declarations */
#include <nccl.h>
#pragma GCC diagnostic pop

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 8

typedef struct rank_t {
  int r, R, D, V, v0, vr, vpad, B, reps, logprobs, top_k, draw_ranks, fused_only, top_n;
  int targets;
  float top_p;
  fs_context *ctx;
  ncclComm_t comm;
  CUstream stream;
  cublasHandle_t blas;
  CUmodule mod;
  CUfunction fill, gumbel;
  CUdeviceptr H, W, logits, gathered, keys, tokens, lp, ranks, top_t, top_v, tgt, tlp, trk;
  CUevent e0, e1;
  pthread_barrier_t *bar;
  double us[4];
  int failed;
} rank_t;

#define DIE(rk, ...) do { fprintf(stderr, "fs-bench-tp: rank %d: ", (rk)->r); \
  fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CU(rk, call) do { CUresult e_ = (call); if (e_) DIE(rk, "%s failed (%d)", #call, (int)e_); } while (0)
#define NC(rk, call) do { ncclResult_t e_ = (call); if (e_) DIE(rk, "%s: %s", #call, ncclGetErrorString(e_)); } while (0)

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void mm(rank_t *k) {
  const float one = 1.0f, zero = 0.0f;
  if (cublasGemmEx(k->blas, CUBLAS_OP_T, CUBLAS_OP_N, k->vr, k->B, k->D, &one,
                   (void *)(uintptr_t)k->W, CUDA_R_16BF, k->D, (void *)(uintptr_t)k->H,
                   CUDA_R_16BF, k->D, &zero, (void *)(uintptr_t)k->logits, CUDA_R_16BF, k->vpad,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))
    DIE(k, "cublasGemmEx failed");
}

static void run_method(rank_t *k, int m) {
  if (m == 0 || m == 3) {
    fs_problem p = {k->B, k->D, k->vr, k->v0, FS_DTYPE_BF16, (void *)(uintptr_t)k->H, 0,
                    (void *)(uintptr_t)k->W, 0};
    fs_sampling s = {1.0f, NULL, 1, 7, NULL, 0, NULL};
    fs_outputs o = {(int32_t *)(uintptr_t)k->tokens, NULL, NULL};
    fs_options opt = {.size = sizeof opt,
                      .logprobs = k->logprobs ? (float *)(uintptr_t)k->lp : NULL,
                      .top_k = k->top_k,
                      .top_p = k->top_p,
                      .ranks = k->draw_ranks ? (int32_t *)(uintptr_t)k->ranks : NULL,
                      .top_logprobs = k->top_n,
                      .top_logprob_tokens = (int32_t *)(uintptr_t)k->top_t,
                      .top_logprob_values = (float *)(uintptr_t)k->top_v,
                      .target_tokens = k->targets ? (int32_t *)(uintptr_t)k->tgt : NULL,
                      .target_logprobs = k->targets ? (float *)(uintptr_t)k->tlp : NULL,
                      .target_ranks = k->targets ? (int32_t *)(uintptr_t)k->trk : NULL};
    if (m == 3 ? fs_sample_ex(k->ctx, &p, &s, &opt, &o, (void *)k->stream)
               : fs_sample_nccl_ex(k->ctx, &p, &s, &opt, &o, k->comm, (void *)k->stream))
      DIE(k, "%s: %s", m == 3 ? "fs_sample_ex" : "fs_sample_nccl_ex", fs_last_error(k->ctx));
    return;
  }
  mm(k);
  if (m == 2) return;
  NC(k, ncclAllGather((void *)(uintptr_t)k->logits, (void *)(uintptr_t)k->gathered,
                      (size_t)k->B * k->vpad, ncclBfloat16, k->comm, (cudaStream_t)k->stream));
  int rows = k->R * k->B, V = k->vpad;
  float invT = 1.0f;
  unsigned long long seed = 7, off = 0;
  void *args[] = {&k->gathered, &rows, &V, &invT, &seed, &off, &k->keys};
  CU(k, k->ctx->cu->cuMemsetD8Async(k->keys, 0, (size_t)rows * 8, k->stream));
  CU(k, k->ctx->cu->cuLaunchKernel(k->gumbel, (unsigned)((V / 4 + 255) / 256 < 8 ? (V / 4 + 255) / 256 : 8),
                                   (unsigned)rows, 1, 256, 1, 1, 0, k->stream, args, NULL));
}

static void *rank_main(void *arg) {
  rank_t *k = arg;
  const fs_cu_api *cu = k->ctx->cu;
  CU(k, cu->cuCtxSetCurrent(k->ctx->cu_ctx));
  CU(k, cu->cuStreamCreate(&k->stream, CU_STREAM_NON_BLOCKING));
  if (cublasCreate(&k->blas) || cublasSetStream(k->blas, (cudaStream_t)k->stream))
    DIE(k, "cuBLAS setup failed");
  CU(k, cu->cuEventCreate(&k->e0, 0));
  CU(k, cu->cuEventCreate(&k->e1, 0));
  /* the methods interleaved run by run, so that each sees the same power
  ** and clock states (timed one after another, the last one ran on a card
  ** the others had heated: perf-notes 50b) */
  const int nm = k->R == 1 ? 4 : 3;
  double *t = malloc(sizeof(double) * (size_t)k->reps * (size_t)nm);
  if (!t) DIE(k, "out of host memory");
  for (int i = -3; i < k->reps; i++)
    for (int m = 0; m < nm; m++) {
      if (k->fused_only && m) continue;
      pthread_barrier_wait(k->bar);
      CU(k, cu->cuEventRecord(k->e0, k->stream));
      run_method(k, m);
      CU(k, cu->cuEventRecord(k->e1, k->stream));
      CU(k, cu->cuEventSynchronize(k->e1));
      float ms = 0;
      CU(k, cu->cuEventElapsedTime(&ms, k->e0, k->e1));
      if (i >= 0) t[(size_t)m * k->reps + i] = ms * 1e3;
    }
  for (int m = 0; m < (k->fused_only ? 1 : nm); m++) {
    qsort(t + (size_t)m * k->reps, (size_t)k->reps, sizeof *t, cmp_d);
    k->us[m] = t[(size_t)m * k->reps + k->reps / 2];
  }
  free(t);
  cublasDestroy(k->blas);
  return NULL;
}

#define USAGE                                                                                  \
  "usage: fs-bench-tp [--ranks R] [--model NAME | --shape D=..,V=..] [--batch LIST] [--reps N]\n" \
  "                   [--logprobs 0|1] [--top-k K] [--top-p P] [--draw-ranks 0|1]\n" \
  "                   [--top-logprobs N] [--targets 0|1] [--fused-only 0|1]\n" \
  "                   [--noise token|group16] [--csv FILE]\n"

/* A bad argument: the message names the argument, its value and the rule. */
#define bad(...) fs_tools_bad_arg("fs-bench-tp", USAGE, __VA_ARGS__)

typedef struct tp_args {
  int R; /* 0: every visible GPU (up to MAXR) */
  int D, V, reps, batches[16], nb, logprobs, top_k, draw_ranks, fused_only, top_n;
  float top_p;
  const char *csv_path;
  int noise; /* fs_noise_mode */
  int targets;
} tp_args;

/* Parses the command line into *a: 0, or the exit status (0 after --help is
** -1: the caller exits 0; 2 for a bad argument, message printed). */
static int parse(int argc, char **argv, tp_args *a) {
  *a = (tp_args){0, 8192, 128256, 20, {16, 64, 256}, 3, 0, 0, 0, 0, 0, 1.0f, NULL,
                 FS_NOISE_TOKEN, 0};
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
      fputs(USAGE, stdout);
      return -1;
    }
    static const char *const with_value[] = {"--ranks", "--reps", "--logprobs", "--top-k",
                                             "--top-p", "--csv", "--model", "--shape",
                                             "--batch", "--draw-ranks", "--fused-only",
                                             "--top-logprobs", "--noise", "--targets",
                                             NULL};
    if (!fs_tools_is_option(k, with_value)) return bad("%s: not an option", k);
    if (!v) return bad("%s: the option takes a value", k);
    i++;
    if (!strcmp(k, "--ranks")) {
      if (fs_tools_parse_int(v, 1, MAXR, &a->R))
        return bad("--ranks %s: the number of GPUs must be an integer in 1..%d", v, MAXR);
    } else if (!strcmp(k, "--reps")) {
      /* 1 times one call after the warm-up (scripts/gpu-tp-filter-prof.sh's ncu) */
      if (fs_tools_parse_int(v, 1, 100000, &a->reps))
        return bad("--reps %s: the repetitions per median must be an integer in 1..100000", v);
    } else if (!strcmp(k, "--logprobs")) {
      if (fs_tools_parse_int(v, 0, 1, &a->logprobs)) return bad("--logprobs %s: must be 0 or 1", v);
    } else if (!strcmp(k, "--top-logprobs")) {
      if (fs_tools_parse_int(v, 0, FS_MAX_TOP_LOGPROBS, &a->top_n))
        return bad("--top-logprobs %s: must be an integer in 0..%d", v, FS_MAX_TOP_LOGPROBS);
    } else if (!strcmp(k, "--noise")) {
      if (strcmp(v, "token") && strcmp(v, "group16"))
        return bad("--noise %s: must be token or group16", *v ? v : "''");
      a->noise = strcmp(v, "token") ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
    } else if (!strcmp(k, "--targets")) {
      if (fs_tools_parse_int(v, 0, 1, &a->targets)) return bad("--targets %s: must be 0 or 1", v);
    } else if (!strcmp(k, "--draw-ranks")) {
      if (fs_tools_parse_int(v, 0, 1, &a->draw_ranks))
        return bad("--draw-ranks %s: must be 0 or 1", v);
    } else if (!strcmp(k, "--fused-only")) {
      /* 1: the fused call alone, its launches in order (ncu's --launch-skip) */
      if (fs_tools_parse_int(v, 0, 1, &a->fused_only))
        return bad("--fused-only %s: must be 0 or 1", v);
    } else if (!strcmp(k, "--top-k")) {
      if (fs_tools_parse_int(v, 0, INT_MAX, &a->top_k))
        return bad("--top-k %s: must be an integer in 0..%d", v, INT_MAX);
    } else if (!strcmp(k, "--top-p")) {
      if (fs_tools_parse_float(v, &a->top_p) || !(a->top_p >= 0.0f && a->top_p <= 1.0f))
        return bad("--top-p %s: must be a number in [0, 1]", v);
    } else if (!strcmp(k, "--csv")) {
      if (!*v) return bad("--csv '': the path must not be empty");
      a->csv_path = v;
    } else if (!strcmp(k, "--model")) {
      const fs_model *m = fs_model_find(v);
      if (!m) return bad("--model %s: not a preset (fs-tune --list-models lists them)", v);
      a->D = m->hidden;
      a->V = m->vocab;
    } else if (!strcmp(k, "--shape")) {
      char why[256];
      if (fs_tools_parse_shape(v, &a->D, &a->V, why, sizeof why))
        return bad("--shape %s: %s", *v ? v : "''", why);
    } else {
      if ((a->nb = fs_tools_parse_batches(v, a->batches, 16)) < 1)
        return bad("--batch %s: expected up to 16 comma-separated batch sizes in 1..%d",
                   *v ? v : "''", FS_MAX_BATCH);
    }
  }
  if (a->targets && (a->top_k > 0 || (a->top_p > 0.0f && a->top_p < 1.0f)))
    return bad("--targets 1: not with --top-k or --top-p (the tensor-parallel calls take "
               "targets only without a sampled call's filters)");
  return 0;
}

int main(int argc, char **argv) {
  tp_args a;
  const int pst = parse(argc, argv, &a);
  if (pst) return pst < 0 ? 0 : pst;
  int R = a.R, D = a.D, V = a.V, reps = a.reps, nb = a.nb, logprobs = a.logprobs;
  const int top_k = a.top_k, *batches = a.batches;
  const float top_p = a.top_p;
  const char *csv_path = a.csv_path;
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  fs_context *c0 = NULL;
  if (fs_context_create(0, &c0)) return fprintf(stderr, "fs-bench-tp: %s\n", fs_last_error(NULL)), 1;
  int ngpu = 0;
  c0->cu->cuDeviceGetCount(&ngpu);
  fs_context_destroy(c0);
  if (R <= 0) R = ngpu;
  if (R < 1 || R > MAXR || R > ngpu)
    return fprintf(stderr, "fs-bench-tp: --ranks %d: needs 1..%d GPUs, %d visible\n", R, MAXR, ngpu), 1;
  FILE *csv = NULL;
  if (csv_path) {
    if (!(csv = fopen(csv_path, "a")))
      return fprintf(stderr, "fs-bench-tp: --csv %s: cannot open for appending\n", csv_path), 2;
    /* where an append stream starts is the C library's choice: ask for the end */
    if (fseek(csv, 0, SEEK_END) == 0 && ftell(csv) == 0)
      fprintf(csv, "D,V,ranks,B,fused_us,gather_us,mm_us,device,logprobs,top_k,top_p,"
                   "draw_ranks,top_logprobs,noise,targets\n");
  }
  int devs[MAXR];
  ncclComm_t comms[MAXR];
  for (int r = 0; r < R; r++) devs[r] = r;
  if (ncclCommInitAll(comms, R, devs) != ncclSuccess) return fprintf(stderr, "fs-bench-tp: ncclCommInitAll failed\n"), 1;
  printf("tensor-parallel sampling, %d GPU(s), D=%d V=%d bf16, median of %d%s", R, D, V, reps,
         logprobs ? ", fused with logprobs" : "");
  if (top_k > 0 || (top_p > 0.0f && top_p < 1.0f))
    printf(", fused with top_k %d, top_p %g", top_k, (double)top_p);
  if (a.draw_ranks) printf(", fused with ranks");
  if (a.top_n) printf(", fused with top %d logprobs", a.top_n);
  if (a.targets) printf(", fused with targets");
  if (a.noise) printf(", FS_NOISE_GROUP16");
  printf("\n");
  printf("%5s %5s %10s %12s %10s %9s%s\n", "ranks", "B", "fused_us", "gather_us", "mm_us", "speedup",
         R == 1 ? "     one_us" : "");
  for (int bi = 0; bi < nb; bi++) {
    rank_t rk[MAXR];
    pthread_t th[MAXR];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)R);
    const int vpad = (V + R - 1) / R + (a.noise ? 16 : 0); /* cuts rounded down to 16s */
    for (int r = 0; r < R; r++) {
      rank_t *k = &rk[r];
      memset(k, 0, sizeof *k);
      k->r = r; k->R = R; k->D = D; k->V = V; k->B = batches[bi]; k->reps = reps; k->bar = &bar;
      k->logprobs = logprobs;
      k->top_k = top_k;
      k->top_p = top_p;
      k->draw_ranks = a.draw_ranks;
      k->top_n = a.top_n;
      k->targets = a.targets;
      k->fused_only = a.fused_only;
      /* FS_NOISE_GROUP16: shards at multiples of 16 */
      const int cut = a.noise ? ~15 : ~0;
      k->v0 = (int)((long long)V * r / R) & cut;
      k->vr = (r + 1 == R ? V : (int)((long long)V * (r + 1) / R) & cut) - k->v0;
      k->vpad = vpad;
      k->comm = comms[r];
      if (fs_context_create(r, &k->ctx)) DIE(k, "%s", fs_last_error(NULL));
      if (fs_context_set_noise(k->ctx, a.noise)) DIE(k, "%s", fs_last_error(k->ctx));
      const fs_cu_api *cu = k->ctx->cu;
      CU(k, cu->cuCtxSetCurrent(k->ctx->cu_ctx));
      char err[256], target[16], src[sizeof fsb_source + 32];
      fs_cubin cb;
      snprintf(target, sizeof target, "sm_%d", k->ctx->arch);
      snprintf(src, sizeof src, "#define FSB_BF16 1\n%s", fsb_source);
      if (fs_nvrtc_compile("fs_bench_baselines", src, target, &cb, err, sizeof err)) DIE(k, "%s", err);
      CU(k, cu->cuModuleLoadData(&k->mod, cb.data));
      fs_cubin_free(&cb);
      CU(k, cu->cuModuleGetFunction(&k->fill, k->mod, "fsb_fill"));
      CU(k, cu->cuModuleGetFunction(&k->gumbel, k->mod, "fsb_gumbel"));
      CU(k, cu->cuMemAlloc(&k->W, (size_t)vpad * D * 2));
      CU(k, cu->cuMemAlloc(&k->H, (size_t)k->B * D * 2));
      CU(k, cu->cuMemAlloc(&k->logits, (size_t)k->B * vpad * 2));
      CU(k, cu->cuMemAlloc(&k->gathered, (size_t)R * k->B * vpad * 2));
      CU(k, cu->cuMemAlloc(&k->keys, (size_t)R * k->B * 8));
      CU(k, cu->cuMemAlloc(&k->tokens, (size_t)k->B * 4));
      CU(k, cu->cuMemAlloc(&k->lp, (size_t)k->B * 4));
      CU(k, cu->cuMemAlloc(&k->ranks, (size_t)k->B * 4));
      CU(k, cu->cuMemAlloc(&k->top_t, (size_t)k->B * (a.top_n ? a.top_n : 1) * 4));
      CU(k, cu->cuMemAlloc(&k->top_v, (size_t)k->B * (a.top_n ? a.top_n : 1) * 4));
      CU(k, cu->cuMemAlloc(&k->tgt, (size_t)k->B * 4));
      CU(k, cu->cuMemAlloc(&k->tlp, (size_t)k->B * 4));
      CU(k, cu->cuMemAlloc(&k->trk, (size_t)k->B * 4));
      int32_t *ids = malloc((size_t)k->B * 4); /* row b's target: b 7919 mod V, every shard's */
      if (!ids) DIE(k, "out of host memory");
      for (int b = 0; b < k->B; b++) ids[b] = (int32_t)((long long)b * 7919 % V);
      CU(k, cu->cuMemcpyHtoD(k->tgt, ids, (size_t)k->B * 4));
      free(ids);
      CU(k, cu->cuMemsetD8(k->logits, 0, (size_t)k->B * vpad * 2));
      unsigned long long nw = (unsigned long long)k->vr * D, nh = (unsigned long long)k->B * D;
      unsigned long long sw = 1000 + (unsigned long long)k->v0 * D, sh = 2;
      float scw = 0.05f, sch = 1.0f;
      void *aw[] = {&k->W, &nw, &scw, &sw}, *ah[] = {&k->H, &nh, &sch, &sh};
      CU(k, cu->cuLaunchKernel(k->fill, 528, 1, 1, 256, 1, 1, 0, NULL, aw, NULL));
      CU(k, cu->cuLaunchKernel(k->fill, 528, 1, 1, 256, 1, 1, 0, NULL, ah, NULL));
      CU(k, cu->cuCtxSynchronize());
      fs_problem p = {k->B, D, k->vr, k->v0, FS_DTYPE_BF16, (void *)(uintptr_t)k->H, 0,
                      (void *)(uintptr_t)k->W, 0};
      fs_sampling s = {1.0f, NULL, 1, 7, NULL, 0, NULL};
      if (fs_prepare(k->ctx, &p, &s)) DIE(k, "fs_prepare: %s", fs_last_error(k->ctx));
    }
    for (int r = 0; r < R; r++) pthread_create(&th[r], NULL, rank_main, &rk[r]);
    for (int r = 0; r < R; r++) pthread_join(th[r], NULL);
    printf("%5d %5d %10.1f %12.1f %10.1f %8.2fx", R, batches[bi], rk[0].us[0], rk[0].us[1],
           rk[0].us[2], rk[0].us[1] / rk[0].us[0]);
    if (R == 1) printf(" %10.1f", rk[0].us[3]);
    printf("\n");
    if (csv) {
      fprintf(csv, "%d,%d,%d,%d,%.2f,%.2f,%.2f,\"%s\",%d,%d,%g,%d,%d,%s,%d\n", D, V, R,
              batches[bi], rk[0].us[0], rk[0].us[1], rk[0].us[2], rk[0].ctx->device_name,
              logprobs, top_k, (double)top_p, a.draw_ranks, a.top_n,
              a.noise ? "group16" : "token", a.targets);
      fflush(csv);
    }
    for (int r = 0; r < R; r++) {
      rank_t *k = &rk[r];
      const fs_cu_api *cu = k->ctx->cu;
      cu->cuCtxSetCurrent(k->ctx->cu_ctx);
      cu->cuMemFree(k->W); cu->cuMemFree(k->H); cu->cuMemFree(k->logits);
      cu->cuMemFree(k->gathered); cu->cuMemFree(k->keys); cu->cuMemFree(k->tokens);
      cu->cuMemFree(k->lp);
      cu->cuMemFree(k->ranks);
      cu->cuMemFree(k->top_t);
      cu->cuMemFree(k->top_v);
      cu->cuMemFree(k->tgt), cu->cuMemFree(k->tlp), cu->cuMemFree(k->trk);
      cu->cuModuleUnload(k->mod);
      fs_context_destroy(k->ctx);
    }
    pthread_barrier_destroy(&bar);
  }
  for (int r = 0; r < R; r++) ncclCommDestroy(comms[r]);
  if (csv) fclose(csv);
  return 0;
}
