/*
** gpu_util.h: helpers shared by the GPU tests (tests/gpu/test_*.c).
**
** Header-only (every function is static inline) because tests/CMakeLists.txt
** builds each test from one source plus the harness.  The library loads
** libcuda with dlopen and the tests must not link it, so every driver call
** goes through the context's table (ctx->cu) with the context's CUcontext
** pushed.  A failing driver call is a broken test machine, not a finding:
** GU_CU prints the call, file:line and the driver's error name and exits 1.
**
** Conventions the tests rely on:
**  - Test data is generated on the host with fs_test_rand() and encoded with
**    fs_test_f2bf()/fs_test_f2h(), then uploaded: the CPU reference and the
**    GPU see the same bits.  Row padding (stride > D) holds NaN bits, so a
**    kernel that reads past D in a row produces NaN logits and fails.
**  - Outputs are poisoned with 0xFF bytes before every call (token -1, a NaN
**    logit, the key ~0 which no (score, token) pair can produce: its score
**    bits would be a NaN) and have a poisoned guard tail; after the call
**    gu_outputs_check() insists that every entry was written and the guard
**    was not.
**  - Downloads synchronise the whole context first (cuCtxSynchronize), so a
**    result is never read before the kernels that write it have finished.
*/
#ifndef FS_GPU_UTIL_H
#define FS_GPU_UTIL_H

#include "fs_int.h" /* fs_context's driver table (cu), CUcontext (cu_ctx), fs_target_arch */
#include "fs_nvrtc.h"
#include "fs_rng.h"
#include "fs_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- driver calls ---------------------------------------------------------- */

static inline void gu_cu_die(fs_context *ctx, CUresult r, const char *call,
                             const char *file, int line) {
  const char *name = NULL, *text = NULL;
  ctx->cu->cuGetErrorName(r, &name);
  ctx->cu->cuGetErrorString(r, &text);
  fprintf(stderr, "%s:%d: driver call failed: %s -> %s (%d): %s\n", file,
          line, call, name ? name : "?", (int)r, text ? text : "");
  exit(1);
}

/* Runs a driver call through the table; exits the test if it fails. */
#define GU_CU(ctx, call)                                                    \
  do {                                                                      \
    CUresult gu_r_ = (call);                                                \
    if (gu_r_ != CUDA_SUCCESS)                                              \
      gu_cu_die((ctx), gu_r_, #call, __FILE__, __LINE__);                   \
  } while (0)

/* Makes ctx's CUDA context current for raw driver calls (pair with pop). */
static inline void gu_push(fs_context *ctx) {
  GU_CU(ctx, ctx->cu->cuCtxPushCurrent(ctx->cu_ctx));
}
static inline void gu_pop(fs_context *ctx) {
  CUcontext popped;
  GU_CU(ctx, ctx->cu->cuCtxPopCurrent(&popped));
}

/* A device address as the pointer type the public structs want. */
static inline void *gu_ptr(CUdeviceptr p) { return (void *)(uintptr_t)p; }

/* Waits for all work on ctx's CUDA context. */
static inline void gu_sync(fs_context *ctx) {
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  gu_pop(ctx);
}

/* Allocates `bytes` (> 0) of device memory filled with 0xFF bytes. */
static inline CUdeviceptr gu_alloc(fs_context *ctx, size_t bytes) {
  CUdeviceptr p = 0;
  REQUIRE(bytes > 0);
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuMemAlloc(&p, bytes));
  GU_CU(ctx, ctx->cu->cuMemsetD8(p, 0xFF, bytes));
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  gu_pop(ctx);
  return p;
}

/* Frees p (0 is allowed) after all work that may use it has finished. */
static inline void gu_free(fs_context *ctx, CUdeviceptr p) {
  if (!p) return;
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  GU_CU(ctx, ctx->cu->cuMemFree(p));
  gu_pop(ctx);
}

/* Copies host -> device after all pending work (no kernel still reads the
** old contents) and waits for the copy: from pageable memory cuMemcpyHtoD
** may return before the DMA lands, ordered only on the legacy stream, and a
** kernel on a non-blocking stream could then read stale bytes. */
static inline void gu_upload(fs_context *ctx, CUdeviceptr dst, const void *src,
                             size_t bytes) {
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  GU_CU(ctx, ctx->cu->cuMemcpyHtoD(dst, src, bytes));
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  gu_pop(ctx);
}

/* Allocates and uploads. */
static inline CUdeviceptr gu_upload_new(fs_context *ctx, const void *src,
                                        size_t bytes) {
  CUdeviceptr p = gu_alloc(ctx, bytes);
  gu_upload(ctx, p, src, bytes);
  return p;
}

/* Copies device -> host after synchronising the whole context. */
static inline void gu_download(fs_context *ctx, void *dst, CUdeviceptr src,
                               size_t bytes) {
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  GU_CU(ctx, ctx->cu->cuMemcpyDtoH(dst, src, bytes));
  gu_pop(ctx);
}

/* Fills `bytes` at p with 0xFF after all pending work has finished. */
static inline void gu_poison(fs_context *ctx, CUdeviceptr p, size_t bytes) {
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  GU_CU(ctx, ctx->cu->cuMemsetD8(p, 0xFF, bytes));
  GU_CU(ctx, ctx->cu->cuCtxSynchronize());
  gu_pop(ctx);
}

static inline void *gu_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "out of host memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

static inline double gu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline const char *gu_dtype_name(int dtype) {
  return dtype == FS_DTYPE_BF16 ? "bf16" : dtype == FS_DTYPE_FP16 ? "fp16" : "?";
}

/* The variant (and how it was chosen) that ctx runs for a bf16/fp16 shape,
** into buf: fs_variant_name with a pointer-less problem and one sample. */
static inline int gu_variant_name(fs_context *ctx, int B, int D, int V, int dtype, char *buf,
                                  size_t n) {
  fs_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B;
  p.hidden = D;
  p.vocab = V;
  p.dtype = dtype;
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = 1.0f;
  s.num_samples = 1;
  return fs_variant_name(ctx, &p, &s, buf, n);
}

/* A test's own kernel: `src` (which may include the runtime's headers,
** fs_rng.h among them) compiled by NVRTC for ctx's GPU and loaded into *mod;
** returns its function `entry`.  Leaves ctx's CUDA context current (gu_pop
** once the module is unloaded). */
static inline CUfunction gu_test_kernel(fs_context *ctx, const char *name, const char *src,
                                        const char *entry, CUmodule *mod) {
  char target[16], err[512];
  snprintf(target, sizeof target, "sm_%d", fs_target_arch(ctx->arch));
  fs_cubin c;
  if (fs_nvrtc_compile(name, src, target, &c, err, sizeof err) != FS_OK)
    fprintf(stderr, "NVRTC: %s\n%s\n", err, c.log ? c.log : "");
  REQUIRE(c.data != NULL);
  gu_push(ctx);
  CUfunction fn;
  GU_CU(ctx, ctx->cu->cuModuleLoadData(mod, c.data));
  GU_CU(ctx, ctx->cu->cuModuleGetFunction(&fn, *mod, entry));
  fs_cubin_free(&c);
  return fn;
}

/* ---- random LM heads ------------------------------------------------------- */

/* One LM-head problem held twice: host bits (for the CPU reference and the
** test's own double-precision logits) and their device copy. */
typedef struct gu_lmhead {
  int B, D, V, dtype;
  int64_t vocab_offset;
  int64_t hs, ws;     /* row strides in elements (>= D, multiples of 8) */
  uint16_t *H, *W;    /* host [B, hs] and [V, ws] */
  CUdeviceptr dH, dW; /* device copies (0 until uploaded) */
} gu_lmhead;

/* A float encoded in dtype, exactly as the CPU reference decodes it back. */
static inline uint16_t gu_encode(int dtype, float f) {
  return dtype == FS_DTYPE_BF16 ? fs_test_f2bf(f) : fs_test_f2h(f);
}
static inline double gu_decode(int dtype, uint16_t bits) {
  return dtype == FS_DTYPE_BF16 ? (double)fs_test_bf2f(bits)
                                : (double)fs_test_h2f(bits);
}

/* Fills rows x cols values uniform in [-scale, scale) with row stride
** `stride`; the padding of each row gets NaN bits.  Each value is one of
** 65536 evenly spaced levels (finer than bf16 or fp16 can tell apart near
** the top of the range) picked by 16 bits of fs_test_rand(), encoded through
** a table: a 151937 x 4096 head takes about a second, not ten. */
static inline void gu_fill(uint16_t *dst, int64_t rows, int cols,
                           int64_t stride, int dtype, double scale,
                           unsigned long long *state) {
  const uint16_t nan_bits = dtype == FS_DTYPE_BF16 ? 0x7FC0u : 0x7E00u;
  uint16_t *level = gu_malloc(sizeof(uint16_t) * 65536);
  for (int i = 0; i < 65536; i++)
    level[i] = gu_encode(dtype, (float)(((i + 0.5) / 32768.0 - 1.0) * scale));
  unsigned long long bits = 0;
  int left = 0;
  for (int64_t r = 0; r < rows; r++) {
    uint16_t *row = dst + r * stride;
    for (int c = 0; c < cols; c++) {
      if (!left) {
        bits = fs_test_rand(state);
        left = 4;
      }
      row[c] = level[bits & 0xFFFFu];
      bits >>= 16;
      left--;
    }
    for (int64_t c = cols; c < stride; c++) row[c] = nan_bits;
  }
  free(level);
}

/* The scale of W that gives logits of standard deviation about `sigma` when
** H is uniform in [-1, 1) and W uniform in [-s, s): Var(h w) = s^2 / 9, so
** sd(z) = s sqrt(D) / 3. */
static inline double gu_w_scale(int D, double sigma) {
  return 3.0 * sigma / sqrt((double)D);
}

/* Generates a random head on the host: H uniform in [-1, 1), W uniform in
** [-w_scale, w_scale).  hs/ws of 0 mean D.  Does not upload. */
static inline void gu_lmhead_init(gu_lmhead *lm, int B, int D, int V,
                                  int dtype, int64_t vocab_offset, int64_t hs,
                                  int64_t ws, double w_scale,
                                  unsigned long long seed) {
  memset(lm, 0, sizeof *lm);
  lm->B = B;
  lm->D = D;
  lm->V = V;
  lm->dtype = dtype;
  lm->vocab_offset = vocab_offset;
  lm->hs = hs ? hs : D;
  lm->ws = ws ? ws : D;
  lm->H = gu_malloc(sizeof(uint16_t) * (size_t)B * (size_t)lm->hs);
  lm->W = gu_malloc(sizeof(uint16_t) * (size_t)V * (size_t)lm->ws);
  unsigned long long st = seed;
  gu_fill(lm->H, B, D, lm->hs, dtype, 1.0, &st);
  gu_fill(lm->W, V, D, lm->ws, dtype, w_scale, &st);
}

static inline void gu_lmhead_upload(fs_context *ctx, gu_lmhead *lm) {
  lm->dH = gu_upload_new(ctx, lm->H, sizeof(uint16_t) * (size_t)lm->B * (size_t)lm->hs);
  lm->dW = gu_upload_new(ctx, lm->W, sizeof(uint16_t) * (size_t)lm->V * (size_t)lm->ws);
}

/* Re-uploads H after the test changed lm->H on the host. */
static inline void gu_lmhead_upload_h(fs_context *ctx, gu_lmhead *lm) {
  gu_upload(ctx, lm->dH, lm->H, sizeof(uint16_t) * (size_t)lm->B * (size_t)lm->hs);
}

static inline void gu_lmhead_free(fs_context *ctx, gu_lmhead *lm) {
  if (ctx) {
    gu_free(ctx, lm->dH);
    gu_free(ctx, lm->dW);
  }
  free(lm->H);
  free(lm->W);
  memset(lm, 0, sizeof *lm);
}

/* The problem with device pointers (device=1) or host pointers (device=0,
** for fs_reference_sample and fs_reference_row). */
static inline fs_problem gu_problem(const gu_lmhead *lm, int device) {
  fs_problem p;
  memset(&p, 0, sizeof p);
  p.batch = lm->B;
  p.hidden = lm->D;
  p.vocab = lm->V;
  p.vocab_offset = lm->vocab_offset;
  p.dtype = lm->dtype;
  p.hidden_states = device ? gu_ptr(lm->dH) : (const void *)lm->H;
  p.hidden_stride = lm->hs;
  p.weight = device ? gu_ptr(lm->dW) : (const void *)lm->W;
  p.weight_stride = lm->ws;
  return p;
}

/* The exact logit z[b, v] (v local to W) in double, summed over k in
** increasing order like the reference (each product is exact in double), and
** *abs_sum = sum_k |h_k w_k|, the scale of fp32 accumulation error. */
static inline double gu_logit(const gu_lmhead *lm, int b, int v,
                              double *abs_sum) {
  const uint16_t *h = lm->H + (int64_t)b * lm->hs;
  const uint16_t *w = lm->W + (int64_t)v * lm->ws;
  double z = 0.0, a = 0.0;
  for (int k = 0; k < lm->D; k++) {
    const double p = gu_decode(lm->dtype, h[k]) * gu_decode(lm->dtype, w[k]);
    z += p;
    a += fabs(p);
  }
  if (abs_sum) *abs_sum = a;
  return z;
}

/* z[b, v] after a soft-cap c (c tanh(z / c) in double, as the reference
** takes it; c <= 0: none), and sum |h w| in *abs_sum as gu_logit. */
static inline double gu_logit_capped(const gu_lmhead *lm, int b, int v, double c,
                                     double *abs_sum) {
  const double z = gu_logit(lm, b, v, abs_sum);
  return c > 0.0 ? c * tanh(z / c) : z;
}

/* Does rank r lie in the band of row b's exact (capped) logits around
** logit z: at least the count of ids whose logit is above z + tol and at
** most the count above z - tol, tol = 1e-5 of the row's largest sum |h w|
** + 1e-6 (the fp32 sums' error). */
static inline int gu_rank_in_band(const gu_lmhead *lm, int b, double c, double z, int r) {
  double *zv = (double *)gu_malloc(sizeof(double) * (size_t)lm->V), amax = 0.0;
  for (int v = 0; v < lm->V; v++) {
    double as;
    zv[v] = gu_logit_capped(lm, b, v, c, &as);
    amax = as > amax ? as : amax;
  }
  const double tol = 1e-5 * amax + 1e-6;
  int lo = 0, hi = 0;
  for (int v = 0; v < lm->V; v++) lo += zv[v] > z + tol, hi += zv[v] >= z - tol;
  free(zv);
  return lo <= r && r <= hi;
}

/* H and W (their first D columns) drawn from {-1, 0, 1} by *st, H's rows
** first: integer logits, exact in fp32, most of them tied. */
static inline void gu_lmhead_ties(gu_lmhead *lm, unsigned long long *st) {
  const uint16_t lv[3] = {gu_encode(lm->dtype, -1.0f), gu_encode(lm->dtype, 0.0f),
                          gu_encode(lm->dtype, 1.0f)};
  for (int b = 0; b < lm->B; b++)
    for (int k = 0; k < lm->D; k++) lm->H[(size_t)b * lm->hs + k] = lv[fs_test_rand(st) % 3];
  for (int v = 0; v < lm->V; v++)
    for (int k = 0; k < lm->D; k++) lm->W[(size_t)v * lm->ws + k] = lv[fs_test_rand(st) % 3];
}

/* ---- outputs ----------------------------------------------------------------- */

#define GU_GUARD 64 /* poisoned entries after the [B, S] outputs */

typedef struct gu_outputs {
  size_t n;                       /* entries a call must write (B * S) */
  size_t cap;                     /* allocated: n + GU_GUARD */
  int with_logits, with_keys;
  CUdeviceptr tokens, logits, keys; /* device [cap] (logits/keys may be 0) */
  int32_t *h_tokens;              /* host copies [cap] after gu_outputs_fetch */
  float *h_logits;
  uint64_t *h_keys;
} gu_outputs;

static inline void gu_outputs_alloc(fs_context *ctx, gu_outputs *o, size_t n,
                                    int with_logits, int with_keys) {
  memset(o, 0, sizeof *o);
  o->n = n;
  o->cap = n + GU_GUARD;
  o->with_logits = with_logits;
  o->with_keys = with_keys;
  o->tokens = gu_alloc(ctx, o->cap * sizeof(int32_t));
  o->h_tokens = gu_malloc(o->cap * sizeof(int32_t));
  if (with_logits) {
    o->logits = gu_alloc(ctx, o->cap * sizeof(float));
    o->h_logits = gu_malloc(o->cap * sizeof(float));
  }
  if (with_keys) {
    o->keys = gu_alloc(ctx, o->cap * sizeof(uint64_t));
    o->h_keys = gu_malloc(o->cap * sizeof(uint64_t));
  }
}

static inline void gu_outputs_free(fs_context *ctx, gu_outputs *o) {
  gu_free(ctx, o->tokens);
  gu_free(ctx, o->logits);
  gu_free(ctx, o->keys);
  free(o->h_tokens);
  free(o->h_logits);
  free(o->h_keys);
  memset(o, 0, sizeof *o);
}

/* The public struct pointing at o's device arrays. */
static inline fs_outputs gu_outputs_api(const gu_outputs *o) {
  fs_outputs r;
  r.tokens = (int32_t *)gu_ptr(o->tokens);
  r.logits = o->with_logits ? (float *)gu_ptr(o->logits) : NULL;
  r.keys = o->with_keys ? (uint64_t *)gu_ptr(o->keys) : NULL;
  return r;
}

static inline void gu_outputs_poison(fs_context *ctx, const gu_outputs *o) {
  gu_poison(ctx, o->tokens, o->cap * sizeof(int32_t));
  if (o->with_logits) gu_poison(ctx, o->logits, o->cap * sizeof(float));
  if (o->with_keys) gu_poison(ctx, o->keys, o->cap * sizeof(uint64_t));
}

/* Synchronises and downloads all cap entries of every output. */
static inline void gu_outputs_fetch(fs_context *ctx, gu_outputs *o) {
  gu_download(ctx, o->h_tokens, o->tokens, o->cap * sizeof(int32_t));
  if (o->with_logits)
    gu_download(ctx, o->h_logits, o->logits, o->cap * sizeof(float));
  if (o->with_keys)
    gu_download(ctx, o->h_keys, o->keys, o->cap * sizeof(uint64_t));
}

static inline uint32_t gu_float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Nonzero under the fake driver of tests/fakecuda (FS_FAKE_CUDA set by the
** cpu/fake_* tests), which runs no kernel: checks of kernel outputs skip. */
static inline int gu_fake_driver(void) { return getenv("FS_FAKE_CUDA") != NULL; }

/* Draw i of a GPU call (o's host copies; lp its logprobs or NULL) against
** the CPU reference's (rtok, rlogit, rkey, rlp): the same token with its
** logit within 2e-5 (1 + |z|) (or both NaN), or else a near-tie (the two keys' scores
** within 1e-4 (1 + |s|)); with lp, the logprob z - lse within 2e-5 + 1e-6 |lse|
** (lse from the reference's logit and logprob).  Adds what is wrong to *bad
** (printing the first five) and keeps the worst logprob error in *worst;
** returns 1 when the token is the reference's. */
static inline int gu_vs_reference(const char *what, size_t i, const gu_outputs *o,
                                  const float *lp, const int32_t *rtok, const float *rlogit,
                                  const uint64_t *rkey, const float *rlp, long *bad,
                                  double *worst) {
  const double z = o->h_logits[i], rz = rlogit[i];
  const int same = o->h_tokens[i] == rtok[i];
  if (same) { /* equal (+-inf) and both NaN are the same logit too */
    if (!(z == rz || (isnan(z) && isnan(rz)) || fabs(z - rz) <= 2e-5 * (1.0 + fabs(rz))) &&
        (*bad)++ < 5)
      fprintf(stderr, "%s: draw %zu: logit %.7g, the reference's %.7g\n", what, i, z, rz);
  } else {
    const double gs = fs_key_score(o->h_keys[i]), rs = fs_key_score(rkey[i]);
    if (!(fabs(gs - rs) <= 1e-4 * (1.0 + fabs(rs))) && (*bad)++ < 5)
      fprintf(stderr, "%s: draw %zu: token %d (score %.7g), the reference's %d (%.7g): "
              "not a near-tie\n", what, i, o->h_tokens[i], gs, rtok[i], rs);
  }
  if (lp) {
    const double lse = rz - (double)rlp[i], err = fabs((double)lp[i] - (z - lse));
    if (err > *worst) *worst = err;
    if (!(err <= 2e-5 + 1e-6 * fabs(lse)) && (*bad)++ < 5)
      fprintf(stderr, "%s: draw %zu: logprob %.7g, want %.7g\n", what, i, (double)lp[i],
              z - lse);
  }
  return same;
}

/* After gu_outputs_fetch: every one of the n entries was written (differs
** from the poison) and the guard tail was not (not checked under the fake
** driver, gu_fake_driver).  Reports at most a few
** entries; returns the number of bad entries (each also a CHECK failure). */
static inline long gu_outputs_check(const gu_outputs *o, const char *what) {
  if (gu_fake_driver()) return 0;
  long bad = 0;
  for (size_t i = 0; i < o->cap; i++) {
    const int in = i < o->n;
    const int tok_poison = o->h_tokens[i] == -1;
    const int log_poison =
        !o->with_logits || gu_float_bits(o->h_logits[i]) == 0xFFFFFFFFu;
    const int key_poison = !o->with_keys || o->h_keys[i] == ~0ull;
    const int ok = in ? (!tok_poison && (!o->with_logits || !log_poison) &&
                         (!o->with_keys || !key_poison))
                      : (tok_poison && log_poison && key_poison);
    if (!ok) {
      if (bad < 5)
        fprintf(stderr, "%s: output entry %zu of %zu %s (token %d)\n", what,
                i, o->n, in ? "was not written" : "(guard) was overwritten",
                (int)o->h_tokens[i]);
      bad++;
    }
  }
  CHECK_MSG(bad == 0, "%s: %ld output entries unwritten or out of bounds", what,
            bad);
  return bad;
}

/* Token entries of o's host copy (fetched) that are no longer poisoned (-1),
** guard included: what a call that should have run nothing wrote. */
static inline long gu_outputs_written(const gu_outputs *o) {
  long written = 0;
  for (size_t i = 0; i < o->cap; i++) written += o->h_tokens[i] != -1;
  return written;
}

/* Runs fs_sample and reports a failure with the context's message. */
static inline int gu_sample(fs_context *ctx, const fs_problem *p,
                            const fs_sampling *s, const gu_outputs *o,
                            void *stream, const char *what) {
  fs_outputs out = gu_outputs_api(o);
  int st = fs_sample(ctx, p, s, &out, stream);
  CHECK_MSG(st == FS_OK, "%s: fs_sample returned %s (%d): %s", what,
            fs_status_string(st), st, fs_last_error(ctx));
  return st;
}

/* Poisons o, samples, fetches and checks that everything was written.
** Returns the fs_sample status (FS_OK or a CHECK failure was recorded). */
static inline int gu_sample_fetch(fs_context *ctx, const fs_problem *p,
                                  const fs_sampling *s, gu_outputs *o,
                                  void *stream, const char *what) {
  gu_outputs_poison(ctx, o);
  int st = gu_sample(ctx, p, s, o, stream, what);
  if (st != FS_OK) return st;
  gu_outputs_fetch(ctx, o);
  gu_outputs_check(o, what);
  return st;
}

/* ---- counting draws ------------------------------------------------------------ */

/* The draws of a distribution test: `calls` fs_sample calls on the device
** problem dp (o holds its B * S entries) at temperature T with num_samples
** S, seed `seed`, per-row seeds at d_seeds when d_seeds != 0, and offset
** 1000003 * call, each checked by gu_sample_fetch as "<name> call <call>"
** (a failing call ends the loop).  Adds every token's count, by its local id
** token - vocab_offset, to counts[0 .. V) and returns the number of tokens
** outside [vocab_offset, vocab_offset + V). */
static inline long gu_count_draws(fs_context *ctx, const fs_problem *dp, gu_outputs *o,
                                  float T, int S, unsigned long long seed,
                                  CUdeviceptr d_seeds, int calls, const char *name,
                                  int64_t vocab_offset, int V, int64_t *counts) {
  long out_of_range = 0;
  for (int call = 0; call < calls; call++) {
    fs_sampling s;
    memset(&s, 0, sizeof s);
    s.temperature = T;
    s.num_samples = S;
    s.seed = seed;
    s.offset = 1000003ull * (unsigned long long)call;
    if (d_seeds) s.seeds = (const uint64_t *)gu_ptr(d_seeds);
    char what[160];
    snprintf(what, sizeof what, "%s call %d", name, call);
    if (gu_sample_fetch(ctx, dp, &s, o, NULL, what) != FS_OK) break;
    for (size_t i = 0; i < o->n; i++) {
      const int64_t v = (int64_t)o->h_tokens[i] - vocab_offset;
      if (v < 0 || v >= V) out_of_range++;
      else counts[v]++;
    }
  }
  return out_of_range;
}

#endif /* FS_GPU_UTIL_H */
