/*
** fs-bench: fused sampling against the materialised-logits pipelines, on the
** same tensors, in one run.  For each shape and batch size it times
**   fused    : fs_sample with the kernel the runtime picks (tuned or default)
**   mm       : cuBLAS's bf16/fp16 matmul alone, writing [B, V] logits
**   mm+gumbel: mm, then the best separate Gumbel-max sampler we can write
**   mm+multi : mm, then the classic softmax / prefix-sum / inverse-CDF sampler
** plus the HBM read floor (W bytes / bandwidth measured by an in-binary probe)
** and the host cost of one fs_sample call.  Each time is the median of
** --reps runs timed with CUDA events, each run after a 256 MiB L2 flush
** (W itself is larger than the 60 MB L2 for every preset).
**
**   fs-bench [--model NAME | --shape D=..,V=.. | --all-models] [--batch LIST]
**            [--dtype bf16|fp16] [--temperature T] [--reps N] [--csv FILE]
**            [--flush read|write] [--noise token|group16]
**
** --flush read (the default) flushes by reading 256 MiB: W and H are evicted
** and L2 holds only clean lines, as after a decode step's own kernels.
** --flush write flushes by a 256 MiB memset, as the tables before perf-notes
** 13a: L2 is then full of dirty lines, whose write-back shares HBM with the
** timed call: 3-13 us more for fused and mm alike where HBM is the limit
** (B <= 64 on the H200), no consistent effect where the SMs are.
**
** --temperature 0 times the fused kernel's greedy path (no noise), which
** measures what the Gumbel noise costs inside the fused kernel.  --noise
** group16 times fs_sample with FS_NOISE_GROUP16 (one Gumbel variate per
** group of 16 tokens, flashsampling.h); the baselines stay per token.
*/
#include "bench_kernels.h"
#include "fs_tools.h"
#include "fs_nvrtc.h"

#include <cublas_v2.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench {
  fs_context *ctx;
  const fs_cu_api *cu;
  cublasHandle_t blas;
  CUmodule mod;
  CUfunction fill, gumbel, multi, flush_read;
  CUdeviceptr flush;   /* flush_bytes, then 16 bytes for fsb_flush's out */
  size_t flush_bytes;
  int flush_write;     /* --flush write: memset instead of a read */
  CUevent e0, e1;
  double bw;  /* bytes/s */
  float temperature; /* of the fused runs */
  int dtype, reps;
  int noise;       /* fs_noise_mode of the fused calls */
  FILE *csv;
} bench;

#define CU(call)                                                               \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char *n_ = "?";                                                    \
      bn->cu->cuGetErrorName(r_, &n_);                                         \
      fprintf(stderr, "fs-bench: %s failed: %s (%s:%d)\n", #call, n_, __FILE__, __LINE__); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef void (*run_fn)(bench *bn, void *arg);

/* Median µs of reps runs of fn, each after an L2 flush, after at least
** 200 ms of warm-up (an idle H200 clocks down to ~400 MHz and needs a
** moment to come back; a few warm-up calls are not enough). */
static double time_it(bench *bn, run_fn fn, void *arg) {
  double *t = malloc(sizeof(double) * (size_t)bn->reps);
  for (double t0 = fs_tools_now(); fs_tools_now() - t0 < 200.0;) {
    fn(bn, arg);
    CU(bn->cu->cuCtxSynchronize());
  }
  for (int i = -3; i < bn->reps; i++) {
    if (bn->flush_write) {
      CU(bn->cu->cuMemsetD8Async(bn->flush, (unsigned char)i, bn->flush_bytes, NULL));
    } else {
      unsigned long long n = bn->flush_bytes / 16;
      CUdeviceptr out = bn->flush + bn->flush_bytes;
      void *args[] = {&bn->flush, &n, &out};
      CU(bn->cu->cuLaunchKernel(bn->flush_read, (unsigned)bn->ctx->sm_count * 4, 1, 1, 512, 1, 1,
                                0, NULL, args, NULL));
    }
    CU(bn->cu->cuEventRecord(bn->e0, NULL));
    fn(bn, arg);
    CU(bn->cu->cuEventRecord(bn->e1, NULL));
    CU(bn->cu->cuEventSynchronize(bn->e1));
    float ms = 0;
    CU(bn->cu->cuEventElapsedTime(&ms, bn->e0, bn->e1));
    if (i >= 0) t[i] = ms * 1e3;
  }
  qsort(t, (size_t)bn->reps, sizeof *t, cmp_d);
  double med = t[bn->reps / 2];
  free(t);
  return med;
}

typedef struct shape_run {
  int B, D, V;
  CUdeviceptr H, W, logits, tokens, keys;
  fs_problem p;
  fs_sampling s;
  fs_outputs o;
} shape_run;

static void run_fused(bench *bn, void *arg) {
  shape_run *r = arg;
  int st = fs_sample(bn->ctx, &r->p, &r->s, &r->o, NULL);
  if (st) {
    fprintf(stderr, "fs-bench: fs_sample: %s\n", fs_last_error(bn->ctx));
    exit(1);
  }
}

static void run_mm(bench *bn, void *arg) {
  shape_run *r = arg;
  const float one = 1.0f, zero = 0.0f;
  cudaDataType t = bn->dtype == FS_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  /* logits^T [V, B] (column-major) = W [V, D] . H^T: W row-major is D x V
  ** column-major, so op(A) = T. */
  cublasStatus_t s = cublasGemmEx(bn->blas, CUBLAS_OP_T, CUBLAS_OP_N, r->V, r->B, r->D, &one,
                                  (const void *)(uintptr_t)r->W, t, r->D,
                                  (const void *)(uintptr_t)r->H, t, r->D, &zero,
                                  (void *)(uintptr_t)r->logits, t, r->V, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "fs-bench: cublasGemmEx failed (%d)\n", (int)s);
    exit(1);
  }
}

static void run_gumbel(bench *bn, void *arg) {
  shape_run *r = arg;
  run_mm(bn, arg);
  float invT = 1.0f;
  unsigned long long seed = r->s.seed, off = r->s.offset;
  void *args[] = {&r->logits, &r->B, &r->V, &invT, &seed, &off, &r->keys};
  CU(bn->cu->cuMemsetD8Async(r->keys, 0, (size_t)r->B * 8, NULL));
  int ctas = (r->V / 4 + 255) / 256;
  if (ctas > 2 * 132 * 4 / (r->B < 8 ? 1 : r->B / 8)) ctas = 2 * 132 * 4 / (r->B < 8 ? 1 : r->B / 8);
  if (ctas < 1) ctas = 1;
  CU(bn->cu->cuLaunchKernel(bn->gumbel, (unsigned)ctas, (unsigned)r->B, 1, 256, 1, 1, 0, NULL,
                            args, NULL));
}

static void run_multi(bench *bn, void *arg) {
  shape_run *r = arg;
  run_mm(bn, arg);
  float invT = 1.0f;
  unsigned long long seed = r->s.seed, off = r->s.offset;
  void *args[] = {&r->logits, &r->V, &invT, &seed, &off, &r->tokens};
  CU(bn->cu->cuLaunchKernel(bn->multi, (unsigned)r->B, 1, 1, 1024, 1, 1, 0, NULL, args, NULL));
}

static void fill(bench *bn, CUdeviceptr p, size_t n, float scale, unsigned long long seed) {
  unsigned long long nn = n;
  void *args[] = {&p, &nn, &scale, &seed};
  CU(bn->cu->cuLaunchKernel(bn->fill, 132 * 8, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

/* Host cost of one fs_sample call: many calls enqueued without waiting. */
static double host_cost_us(bench *bn, shape_run *r) {
  const int n = 200;
  CU(bn->cu->cuCtxSynchronize());
  double t0 = fs_tools_now();
  for (int i = 0; i < n; i++) run_fused(bn, r);
  double us = (fs_tools_now() - t0) * 1e3 / n;
  CU(bn->cu->cuCtxSynchronize());
  return us;
}

static void bench_shape(bench *bn, const char *label, int D, int V, const int *batches, int nb,
                        int full) {
  shape_run r;
  memset(&r, 0, sizeof r);
  r.D = D;
  r.V = V;
  int Bmax = 0;
  for (int i = 0; i < nb; i++) Bmax = batches[i] > Bmax ? batches[i] : Bmax;
  size_t wbytes = (size_t)V * D * 2;
  CU(bn->cu->cuMemAlloc(&r.W, wbytes));
  CU(bn->cu->cuMemAlloc(&r.H, (size_t)Bmax * D * 2));
  CU(bn->cu->cuMemAlloc(&r.logits, (size_t)Bmax * V * 2));
  CU(bn->cu->cuMemAlloc(&r.tokens, (size_t)Bmax * 4));
  CU(bn->cu->cuMemAlloc(&r.keys, (size_t)Bmax * 8));
  fill(bn, r.W, (size_t)V * D, 0.05f, 1);
  fill(bn, r.H, (size_t)Bmax * D, 1.0f, 2);
  double floor_us = wbytes / bn->bw * 1e6;
  printf("\n%s: D=%d V=%d %s, T=%g, W %.2f GB, floor %.1f us (%.2f TB/s measured)\n", label, D, V,
         bn->dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", (double)bn->temperature, wbytes / 1e9,
         floor_us, bn->bw / 1e12);
  printf("%5s %9s %9s %9s %9s %7s %7s %7s %7s  %s\n", "B", "fused", "mm", "mm+gumb", "mm+multi",
         "f/floor", "f/mm", "gumb/f", "multi/f", "variant");
  for (int i = 0; i < nb; i++) {
    r.B = batches[i];
    r.p = (fs_problem){r.B, D, V, 0, bn->dtype, (void *)(uintptr_t)r.H, 0,
                       (void *)(uintptr_t)r.W, 0};
    r.s = (fs_sampling){bn->temperature, NULL, 1, 1234, NULL, 0, NULL};
    r.o = (fs_outputs){(int32_t *)(uintptr_t)r.tokens, NULL, NULL};
    char name[256] = "?";
    if (fs_prepare(bn->ctx, &r.p, &r.s) || fs_variant_name(bn->ctx, &r.p, &r.s, name, sizeof name)) {
      fprintf(stderr, "fs-bench: %s\n", fs_last_error(bn->ctx));
      exit(1);
    }
    double tf = time_it(bn, run_fused, &r), tm = time_it(bn, run_mm, &r);
    double tg = full ? time_it(bn, run_gumbel, &r) : 0, tc = full ? time_it(bn, run_multi, &r) : 0;
    double host = full ? host_cost_us(bn, &r) : 0;
    printf("%5d %9.1f %9.1f %9.1f %9.1f %7.3f %7.3f %7.2f %7.2f  %s\n", r.B, tf, tm, tg, tc,
           tf / floor_us, tf / tm, full ? tg / tf : 0, full ? tc / tf : 0, name);
    if (bn->csv)
      fprintf(bn->csv, "%s,%d,%d,%s,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.2f,\"%s\",%s,%s\n", label,
              D, V, bn->dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", r.B, tf, tm, tg, tc, floor_us,
              host, bn->bw / 1e12, name, bn->flush_write ? "write" : "read",
              fs_tools_noise_name(bn->noise));
    if (full && i == 0) printf("      host cost of one fs_sample call: %.2f us\n", host);
  }
  bn->cu->cuMemFree(r.W);
  bn->cu->cuMemFree(r.H);
  bn->cu->cuMemFree(r.logits);
  bn->cu->cuMemFree(r.tokens);
  bn->cu->cuMemFree(r.keys);
}

#define USAGE                                                                           \
  "usage: fs-bench [--model NAME | --shape D=..,V=.. | --all-models] [--batch LIST]\n" \
  "                [--dtype bf16|fp16] [--temperature T] [--reps N] [--csv FILE]\n" \
  "                [--flush read|write] [--noise token|group16]\n"

/* A bad argument: the message names the argument, its value and the rule. */
#define bad(...) fs_tools_bad_arg("fs-bench", USAGE, __VA_ARGS__)

int main(int argc, char **argv) {
  int D = 0, V = 0, all = 0, batches[64], nb = 0, dtype = FS_DTYPE_BF16, reps = 30;
  int flush_write = 0, noise = FS_NOISE_TOKEN;
  float temperature = 1.0f;
  const char *label = "custom", *csv = NULL;
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
      fputs(USAGE, stdout);
      return 0;
    }
    if (!strcmp(k, "--all-models")) { all = 1; continue; }
    static const char *const with_value[] = {"--model", "--shape", "--batch", "--dtype",
                                             "--temperature", "--reps", "--csv", "--flush",
                                             "--noise", NULL};
    if (!fs_tools_is_option(k, with_value)) return bad("%s: not an option", k);
    if (!v) return bad("%s: the option takes a value", k);
    i++;
    if (!strcmp(k, "--model")) {
      const fs_model *m = fs_model_find(v);
      if (!m) return bad("--model %s: not a preset (fs-tune --list-models lists them)", v);
      D = m->hidden; V = m->vocab; label = m->name;
    } else if (!strcmp(k, "--shape")) {
      char why[256];
      if (fs_tools_parse_shape(v, &D, &V, why, sizeof why))
        return bad("--shape %s: %s", *v ? v : "''", why);
    } else if (!strcmp(k, "--batch")) {
      if ((nb = fs_tools_parse_batches(v, batches, 64)) < 1)
        return bad("--batch %s: expected up to 64 comma-separated batch sizes in 1..%d", v,
                   FS_MAX_BATCH);
    } else if (!strcmp(k, "--dtype")) {
      if (!strcmp(v, "bf16")) dtype = FS_DTYPE_BF16;
      else if (!strcmp(v, "fp16")) dtype = FS_DTYPE_FP16;
      else return bad("--dtype %s: the element type is bf16 or fp16", v);
    } else if (!strcmp(k, "--reps")) {
      if (fs_tools_parse_int(v, 3, 100000, &reps))
        return bad("--reps %s: the repetitions per median must be an integer in 3..100000", v);
    } else if (!strcmp(k, "--temperature")) {
      /* an underflow to 0 (1e-50) is an error, not greedy */
      if (fs_tools_parse_float(v, &temperature) ||
          !(temperature == 0.0f || temperature >= FS_MIN_TEMPERATURE) ||
          !(temperature < INFINITY))
        return bad("--temperature %s: must be 0 (greedy) or a finite number >= %g", v,
                   (double)FS_MIN_TEMPERATURE);
    } else if (!strcmp(k, "--flush")) {
      if (!strcmp(v, "read")) flush_write = 0;
      else if (!strcmp(v, "write")) flush_write = 1;
      else return bad("--flush %s: the L2 flush is read (256 MiB read) or write (256 MiB memset)",
                      *v ? v : "''");
    } else if (!strcmp(k, "--noise")) {
      if (fs_tools_parse_noise(v, &noise))
        return bad("--noise %s: " FS_TOOLS_NOISE_RULE, *v ? v : "''");
    } else {
      if (!*v) return bad("--csv '': the path must not be empty");
      csv = v;
    }
  }
  if (!all && !D) { D = 4096; V = 151936; label = "qwen3-8b"; }
  if (!nb && !all) {
    for (int b = 1; b <= 256; b *= 2) batches[nb++] = b;
  }
  bench bnv, *bn = &bnv;
  memset(bn, 0, sizeof *bn);
  bn->dtype = dtype;
  bn->reps = reps;
  bn->temperature = temperature;
  bn->flush_write = flush_write;
  int st = fs_context_create(0, &bn->ctx);
  if (st) {
    fprintf(stderr, "fs-bench: needs a GPU: %s\n", fs_last_error(NULL));
    return 1;
  }
  bn->cu = bn->ctx->cu;
  bn->noise = noise;
  if (fs_context_set_noise(bn->ctx, noise))
    return fprintf(stderr, "fs-bench: %s\n", fs_last_error(bn->ctx)), 1;
  CU(bn->cu->cuCtxSetCurrent(bn->ctx->cu_ctx));
  if (cublasCreate(&bn->blas) != CUBLAS_STATUS_SUCCESS) return fprintf(stderr, "cublasCreate failed\n"), 1;
  char err[512], target[16];
  snprintf(target, sizeof target, "sm_%d", bn->ctx->arch);
  fs_cubin c;
  char *src = malloc(sizeof fsb_source + 64);
  snprintf(src, sizeof fsb_source + 64, "#define FSB_BF16 %d\n%s", dtype == FS_DTYPE_BF16, fsb_source);
  if (fs_nvrtc_compile("fs_bench_baselines", src, target, &c, err, sizeof err)) {
    fprintf(stderr, "fs-bench: %s\n%s\n", err, c.log ? c.log : "");
    return 1;
  }
  free(src);
  CU(bn->cu->cuModuleLoadData(&bn->mod, c.data));
  fs_cubin_free(&c);
  CU(bn->cu->cuModuleGetFunction(&bn->fill, bn->mod, "fsb_fill"));
  CU(bn->cu->cuModuleGetFunction(&bn->gumbel, bn->mod, "fsb_gumbel"));
  CU(bn->cu->cuModuleGetFunction(&bn->multi, bn->mod, "fsb_multinomial"));
  CU(bn->cu->cuModuleGetFunction(&bn->flush_read, bn->mod, "fsb_flush"));
  bn->flush_bytes = (size_t)256 << 20;
  CU(bn->cu->cuMemAlloc(&bn->flush, bn->flush_bytes + 16));
  CU(bn->cu->cuMemsetD8(bn->flush, 1, bn->flush_bytes + 16));
  CU(bn->cu->cuEventCreate(&bn->e0, 0));
  CU(bn->cu->cuEventCreate(&bn->e1, 0));
  bn->bw = fs_tools_read_bandwidth(bn->ctx, (size_t)4 << 30, 20);
  CU(bn->cu->cuCtxSetCurrent(bn->ctx->cu_ctx));
  if (bn->bw <= 0) return fprintf(stderr, "fs-bench: bandwidth probe failed\n"), 1;
  if (csv && !(bn->csv = fopen(csv, "w"))) return fprintf(stderr, "fs-bench: cannot write %s\n", csv), 1;
  if (bn->csv)
    fprintf(bn->csv, "model,D,V,dtype,B,fused_us,mm_us,mm_gumbel_us,mm_multinomial_us,floor_us,"
                     "host_us,read_TBps,variant,flush,noise\n");
  printf("device: %s (sm_%d, %d SMs); median of %d runs, L2 flushed before each (256 MiB %s); "
         "noise %s\n", bn->ctx->device_name, bn->ctx->arch, bn->ctx->sm_count, reps,
         flush_write ? "memset: dirty lines" : "read: clean lines", fs_tools_noise_name(noise));
  if (all) {
    static const int sweep[] = {1, 8, 64, 256};
    for (const fs_model *m = fs_models; m->name; m++)
      bench_shape(bn, m->name, m->hidden, m->vocab, nb ? batches : sweep, nb ? nb : 4, 0);
  } else {
    bench_shape(bn, label, D, V, batches, nb, 1);
  }
  if (bn->csv) fclose(bn->csv);
  cublasDestroy(bn->blas);
  fs_context_destroy(bn->ctx);
  return 0;
}
