/*
** tune_worker.c: the watchdog child of fs-tune, the only process that
** touches CUDA (tune_worker_main).
**
** It creates its own fs_context, says HELLO, then serves the parent:
**  SETUP  a shape (dtype, D, V) and a bucket B, with the built-in default's
**         cubin.  Random H and W are generated on the host (kept there for
**         exact scores) and uploaded; the default runs on all B rows and is
**         checked against the CPU reference (fs_reference_sample) on the
**         first min(B, 2) rows; its tokens then serve as the oracle for B.
**         Replies READY with the read bandwidth and the floor.
**  JOB    a variant's cubin: load, verify against the oracle, time, verify
**         again, unload.  Replies RESULT.
** Data: H and W uniform in [-a, a) with a = 3 / D^(1/4), so logits have a
** standard deviation of about 3 (O(1..10), like a real LM head).
**
** Verification, per sampling configuration (T = 1 with a fixed seed; T = 0,
** greedy; T = 1 under FS_NOISE_GROUP16, where a key's score is its token's
** group's; T = 1 with a token mask that allows about half of each row's
** tokens, masked_out(), so that every winner's masked path is checked too),
** outputs poisoned with 0xFF bytes first and a poisoned guard tail
** after the B entries:
**  - every entry written, the guard untouched, token in [0, V), the key's
**    token equal to the token, and (with the mask) allowed;
**  - the logit and the key's score equal the exact ones (recomputed here in
**    double from the same bf16/fp16 bits) within tol(x) = 1e-3 (1 + |x|);
**  - a token that differs from the oracle's scores (exactly) no more than
**    tol below the oracle token's exact score: a near-tie may go either way
**    when logits are accumulated in fp32 in another order (at D <= 8192 and
**    logits of this size the difference is ~1e-4), a real error may not.
** Test hooks (they prove the tuner catches what they fake):
**   FS_TUNE_INJECT_WRONG=<variant>  adds 1 to that variant's tokens after each
**                                   run: it must be recorded as wrong;
**   FS_TUNE_INJECT_CRASH=<variant>  the child dies (SIGSEGV) on that job;
**   FS_TUNE_INJECT_HANG=<variant>   the child stops answering on that job;
**   FS_TUNE_INJECT_FAULT=<variant>  that variant runs with W at device address
**                                   256: a real GPU fault (illegal address)
**                                   that leaves the CUDA context unusable;
** the last three must be recorded as run-failed, and tuning goes on.
**
** Timing (CUDA events around one launch): 5 warm-up runs (with the job's
** warmup_ms, fs-tune's FS_TUNE_WARMUP_MS, an experiment of perf-notes 15c:
** back-to-back warm-up runs for at least that long, so that a candidate is
** timed in the clock and power state of sustained decoding rather than a
** burst; and in the job's mode, fs-tune's --mode: group16 timed with
** FS_NOISE_GROUP16 on the sampled configuration, greedy on the greedy one;
** verified on all four configurations whatever is timed), then runs with
** the L2 flushed before each (cuMemsetD8Async of a 256 MB scratch buffer,
** outside the timed region); median and spread (half the interquartile
** range); stop at 200 runs, or after >= 20 runs when spread is below the
** winner rule's tie margin (FS_STORE_TIE_FRACTION of the median, store.h),
** or at the parent's time cap.
** Any CUDA failure that leaves the context unusable is reported with
** fatal = 1 and the child exits; the parent starts a fresh one.
*/
#include "tune.h"

#include "fs_half.h"
#include "fs_rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NCFG 4
#define GUARD 32
#define WARMUPS 5
#define MIN_RUNS 20
#define MAX_RUNS 200
#define FLUSH_BYTES ((size_t)256 << 20)

typedef struct worker {
  fs_context *ctx;
  const fs_cu_api *cu;
  CUstream stream;
  CUevent e0, e1;
  int in_fd, out_fd;
  int dtype, D, V;            /* the shape W holds (0: none) */
  uint16_t *hW;
  CUdeviceptr dW;
  int B;                      /* the bucket H holds */
  uint16_t *hH;
  CUdeviceptr dH;
  int cap;                    /* rows the outputs hold (plus GUARD) */
  uint32_t *hmask;            /* CFG_MASKED's token mask, [B, mask_words] */
  CUdeviceptr dmask;
  int mask_B, mask_V;         /* the (B, V) it was made for (0: none) */
  CUdeviceptr tok, lgt, key;
  int32_t *htok;
  float *hlgt;
  uint64_t *hkey;
  CUdeviceptr scratch;
  double bandwidth, floor_us;
  int oracle_ok;
  int32_t *otok[NCFG];        /* the oracle's token and its exact score */
  double *oscore[NCFG];
  int nref;                   /* rows of the CPU reference kept for this shape */
  int32_t ref_tok[NCFG][2];   /* (H's first rows do not depend on the bucket) */
  double ref_score[NCFG][2];
  const char *inject, *inject_crash, *inject_hang, *inject_fault;
  int fatal;                  /* the context is unusable */
  char msg[1024];
} worker;

/* The configurations every candidate is verified on: sampled (T = 1),
** greedy (CFG_GREEDY), sampled with FS_NOISE_GROUP16 (CFG_GROUP16: the
** runtime runs a bucket's group16 winner for such calls, so every candidate
** must draw them right too) and sampled with a token mask (CFG_MASKED: the
** same kernels serve fs_sample_ex); timed on the first, or on the greedy one
** for a job with greedy set. */
#define CFG_GREEDY 1
#define CFG_GROUP16 2
#define CFG_MASKED 3
static const fs_sampling cfgs[NCFG] = {
    {1.0f, NULL, 1, 0x5eed2026ull, NULL, 7, NULL},
    {0.0f, NULL, 1, 0x5eed2026ull, NULL, 7, NULL},
    {1.0f, NULL, 1, 0x5eed2026ull, NULL, 7, NULL},
    {1.0f, NULL, 1, 0x5eed2026ull, NULL, 8, NULL},
};
static const char *const cfg_names[NCFG] = {"T=1", "greedy", "group16 T=1", "masked T=1"};

/* CFG_MASKED's mask: about half of each row's tokens out, by a hash of (row,
** token); token row % V always allowed, so that no row is all masked. */
static int masked_out(int row, int token, int V) {
  const uint32_t h = ((uint32_t)token * 0x9E3779B1u) ^ ((uint32_t)row * 0x85EBCA6Bu);
  return token != row % V && ((h ^ (h >> 15)) * 0x2C1B3C6Du) >> 31;
}
static long long mask_words(int V) { return (V + 31) / 32; }

static double tol(double x) { return 1e-3 * (1.0 + fabs(x)); }

/* ---- I/O with the parent ------------------------------------------------- */
static int read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t k = read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static int write_full(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static void reply_init(tune_msg *m, int type) {
  memset(m, 0, sizeof *m);
  m->magic = TUNE_MSG_MAGIC;
  m->type = (uint32_t)type;
  m->registers = m->local_bytes = m->samples = -1;
  m->median_us = m->spread_us = m->floor_us = -1;
}

/* ---- CUDA helpers -------------------------------------------------------- */
/* Records a failed driver call in w->msg; returns 1 if r failed. */
static int cu_failed(worker *w, CUresult r, const char *call) {
  if (r == CUDA_SUCCESS) return 0;
  const char *name = NULL;
  w->cu->cuGetErrorName(r, &name);
  if (strncmp(call, "w->cu->", 7) == 0) call += 7;
  const char *paren = strchr(call, '(');
  snprintf(w->msg, sizeof w->msg, "%.*s failed: %s (%d)", paren ? (int)(paren - call) : 64, call,
           name ? name : "?", (int)r);
  return 1;
}
#define CU(call) cu_failed(w, (call), #call)

/* After a failure: is the context still usable?  Sets w->fatal if not. */
static void check_health(worker *w) {
  if (w->cu->cuCtxSynchronize() != CUDA_SUCCESS) w->fatal = 1;
}

static void dfree(worker *w, CUdeviceptr *p) {
  if (*p) w->cu->cuMemFree(*p);
  *p = 0;
}

/* ---- data ---------------------------------------------------------------- */
static double decode(int dtype, uint16_t bits) {
  return dtype == FS_DTYPE_BF16 ? (double)fs_bf16_to_float(bits)
                                : (double)fs_half_to_float(bits);
}

static void fill(uint16_t *dst, size_t n, int dtype, double scale, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17; /* xorshift64 */
    float u = (float)((double)(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
    u *= (float)scale;
    dst[i] = dtype == FS_DTYPE_BF16 ? fs_float_to_bf16(u) : fs_float_to_half(u);
  }
}

static double logit(const worker *w, int row, int token) {
  const uint16_t *h = w->hH + (size_t)row * w->D, *x = w->hW + (size_t)token * w->D;
  double acc = 0;
  for (int i = 0; i < w->D; i++) acc += decode(w->dtype, h[i]) * decode(w->dtype, x[i]);
  return acc;
}

/* The exact perturbed score of (row, token) under cfg; *z gets the logit.
** Under CFG_GROUP16 the score is the token's group's (flashsampling.h): m / T
** + ln sum_i exp((z_i - m) / T) + g over its tokens inside [0, V), m their
** largest logit (this data's logits are finite).  Under CFG_MASKED a masked
** token's logit and score are -inf. */
static double exact_score(const worker *w, int cfg, int row, int token, double *z) {
  *z = cfg == CFG_MASKED && masked_out(row, token, w->V) ? -INFINITY : logit(w, row, token);
  const fs_sampling *s = &cfgs[cfg];
  if (!(s->temperature > 0)) return *z;
  if (cfg != CFG_GROUP16)
    return *z / s->temperature +
           (double)fs_noise(s->seed, s->offset, (uint32_t)token, 0, (uint32_t)row + 1);
  const int g0 = token / 16 * 16, n = w->V - g0 < 16 ? w->V - g0 : 16;
  double zg[16], m = -INFINITY, sum = 0;
  for (int i = 0; i < n; i++) {
    zg[i] = i == token - g0 ? *z : logit(w, row, g0 + i);
    m = zg[i] > m ? zg[i] : m;
  }
  for (int i = 0; i < n; i++) sum += exp((zg[i] - m) / s->temperature);
  const fs_philox_out r = fs_noise_group(s->seed, s->offset, (uint32_t)(g0 / 16), 0,
                                         (uint32_t)row + 1);
  return m / s->temperature + log(sum) + (double)fs_gumbel(r.v[0]);
}

/* Makes W hold (dtype, D, V). */
static int setup_shape(worker *w, int dtype, int D, int V) {
  if (w->dW && w->dtype == dtype && w->D == D && w->V == V) return 0;
  dfree(w, &w->dW);
  free(w->hW);
  w->D = w->V = 0;
  size_t n = (size_t)V * D;
  w->hW = malloc(n * 2);
  if (!w->hW) {
    snprintf(w->msg, sizeof w->msg, "out of host memory for W (%zu bytes)", n * 2);
    return -1;
  }
  fill(w->hW, n, dtype, 3.0 / pow((double)D, 0.25), 0x57ull + (uint64_t)D * 131 + (uint64_t)V);
  if (CU(w->cu->cuMemAlloc(&w->dW, n * 2)) || CU(w->cu->cuMemcpyHtoD(w->dW, w->hW, n * 2)))
    return -1;
  w->dtype = dtype;
  w->D = D;
  w->V = V;
  w->B = 0;    /* H must be regenerated for the new D */
  w->nref = 0; /* and the reference recomputed */
  return 0;
}

/* Makes H hold B rows and the outputs at least B (+ guard) entries. */
static int setup_batch(worker *w, int B) {
  if (w->B != B) {
    dfree(w, &w->dH);
    free(w->hH);
    size_t n = (size_t)B * w->D;
    w->hH = malloc(n * 2);
    if (!w->hH) {
      snprintf(w->msg, sizeof w->msg, "out of host memory for H");
      return -1;
    }
    fill(w->hH, n, w->dtype, 3.0 / pow((double)w->D, 0.25), 0x48ull + (uint64_t)w->D);
    if (CU(w->cu->cuMemAlloc(&w->dH, n * 2)) || CU(w->cu->cuMemcpyHtoD(w->dH, w->hH, n * 2)))
      return -1;
    w->B = B;
  }
  if (w->cap < B) {
    dfree(w, &w->tok);
    dfree(w, &w->lgt);
    dfree(w, &w->key);
    free(w->htok); free(w->hlgt); free(w->hkey);
    for (int c = 0; c < NCFG; c++) { free(w->otok[c]); free(w->oscore[c]); }
    const size_t e = (size_t)B + GUARD;
    w->cap = 0;
    w->htok = malloc(e * 4);
    w->hlgt = malloc(e * 4);
    w->hkey = malloc(e * 8);
    int oom = !w->htok || !w->hlgt || !w->hkey;
    for (int c = 0; c < NCFG; c++) {
      w->otok[c] = malloc(e * 4);
      w->oscore[c] = malloc(e * sizeof(double));
      oom |= !w->otok[c] || !w->oscore[c];
    }
    if (oom) {
      snprintf(w->msg, sizeof w->msg, "out of host memory for outputs");
      return -1;
    }
    if (CU(w->cu->cuMemAlloc(&w->tok, e * 4)) || CU(w->cu->cuMemAlloc(&w->lgt, e * 4)) ||
        CU(w->cu->cuMemAlloc(&w->key, e * 8)))
      return -1;
    w->cap = B;
  }
  if (w->mask_B != B || w->mask_V != w->V) {
    dfree(w, &w->dmask);
    free(w->hmask);
    w->mask_B = w->mask_V = 0;
    const long long nw = mask_words(w->V);
    w->hmask = calloc((size_t)B * (size_t)nw, 4);
    if (!w->hmask) {
      snprintf(w->msg, sizeof w->msg, "out of host memory for the token mask");
      return -1;
    }
    for (int b = 0; b < B; b++)
      for (int t = 0; t < w->V; t++)
        if (!masked_out(b, t, w->V)) w->hmask[(size_t)b * nw + t / 32] |= 1u << (t % 32);
    const size_t bytes = (size_t)B * (size_t)nw * 4;
    if (CU(w->cu->cuMemAlloc(&w->dmask, bytes)) ||
        CU(w->cu->cuMemcpyHtoD(w->dmask, w->hmask, bytes)))
      return -1;
    w->mask_B = B;
    w->mask_V = w->V;
  }
  return 0;
}

/* ---- one verified run ---------------------------------------------------------- */
static void make_call(const worker *w, int cfg, fs_problem *p, fs_sampling *s, fs_outputs *o) {
  memset(p, 0, sizeof *p);
  p->batch = w->B;
  p->hidden = w->D;
  p->vocab = w->V;
  p->dtype = w->dtype;
  p->hidden_states = (const void *)(uintptr_t)w->dH;
  p->weight = (const void *)(uintptr_t)w->dW;
  *s = cfgs[cfg];
  o->tokens = (int32_t *)(uintptr_t)w->tok;
  o->logits = (float *)(uintptr_t)w->lgt;
  o->keys = (uint64_t *)(uintptr_t)w->key;
}

/* Poisons the outputs, runs k once with cfg, downloads.  Returns 0, or -1
** with w->msg (and w->fatal when the context is gone). */
static int run_once(worker *w, const fs_kernel *k, int cfg) {
  const size_t e = (size_t)w->B + GUARD;
  fs_problem p;
  fs_sampling s;
  fs_outputs o;
  make_call(w, cfg, &p, &s, &o);
  if (w->inject_fault && strcmp(w->inject_fault, k->v.name) == 0)
    p.weight = (const void *)(uintptr_t)256;
  if (CU(w->cu->cuMemsetD8Async(w->tok, 0xFF, e * 4, w->stream)) ||
      CU(w->cu->cuMemsetD8Async(w->lgt, 0xFF, e * 4, w->stream)) ||
      CU(w->cu->cuMemsetD8Async(w->key, 0xFF, e * 8, w->stream))) {
    w->fatal = 1;
    return -1;
  }
  w->ctx->noise = cfg == CFG_GROUP16 ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
  const fs_opts mask = {.words = (const uint32_t *)(uintptr_t)w->dmask,
                       .stride = mask_words(w->V)};
  int st = fs_launch_masked(w->ctx, k, &p, &s, cfg == CFG_MASKED ? &mask : NULL, &o, w->stream);
  w->ctx->noise = FS_NOISE_TOKEN;
  if (st) {
    snprintf(w->msg, sizeof w->msg, "launch: %s: %s", fs_status_string(st),
             fs_last_error(w->ctx));
    check_health(w);
    return -1;
  }
  if (CU(w->cu->cuStreamSynchronize(w->stream)) || CU(w->cu->cuMemcpyDtoH(w->htok, w->tok, e * 4)) ||
      CU(w->cu->cuMemcpyDtoH(w->hlgt, w->lgt, e * 4)) ||
      CU(w->cu->cuMemcpyDtoH(w->hkey, w->key, e * 8))) {
    w->fatal = 1; /* a kernel fault is sticky */
    return -1;
  }
  if (w->inject && strcmp(w->inject, k->v.name) == 0)
    for (int b = 0; b < w->B; b++) w->htok[b] += 1;
  return 0;
}

/* Checks the downloaded outputs (header comment).  With ref_tok, rows below
** nref are compared with (ref_tok, ref_score).  Returns 0 or -1 with w->msg.
** On success, if otok/oscore are given, stores each row's token and exact
** score there. */
static int check(worker *w, int cfg, const int32_t *ref_tok, const double *ref_score, int nref,
                 int32_t *otok, double *oscore) {
  const char *what = cfg_names[cfg];
  for (int i = w->B; i < w->B + GUARD; i++) {
    uint32_t lb;
    memcpy(&lb, &w->hlgt[i], 4);
    if (w->htok[i] != -1 || lb != 0xFFFFFFFFu || w->hkey[i] != ~0ull) {
      snprintf(w->msg, sizeof w->msg, "%s: wrote past the %d outputs (entry %d)", what, w->B, i);
      return -1;
    }
  }
  for (int b = 0; b < w->B; b++) {
    const int32_t t = w->htok[b];
    uint32_t lb;
    memcpy(&lb, &w->hlgt[b], 4);
    if (t == -1 || lb == 0xFFFFFFFFu || w->hkey[b] == ~0ull) {
      snprintf(w->msg, sizeof w->msg, "%s row %d: output not written (still poisoned)", what, b);
      return -1;
    }
    if (t < 0 || t >= w->V) {
      snprintf(w->msg, sizeof w->msg, "%s row %d: token %d outside [0, %d)", what, b, t, w->V);
      return -1;
    }
    if (fs_key_token(w->hkey[b]) != (uint32_t)t) {
      snprintf(w->msg, sizeof w->msg, "%s row %d: token %d but its key names token %u", what, b,
               t, fs_key_token(w->hkey[b]));
      return -1;
    }
    if (cfg == CFG_MASKED && masked_out(b, t, w->V)) {
      snprintf(w->msg, sizeof w->msg, "%s row %d: token %d, which the mask excludes", what, b, t);
      return -1;
    }
    double z, sc = exact_score(w, cfg, b, t, &z);
    if (fabs((double)w->hlgt[b] - z) > tol(z)) {
      snprintf(w->msg, sizeof w->msg, "%s row %d token %d: logit %.6g, exact %.6g", what, b, t,
               (double)w->hlgt[b], z);
      return -1;
    }
    if (fabs((double)fs_key_score(w->hkey[b]) - sc) > tol(sc)) {
      snprintf(w->msg, sizeof w->msg, "%s row %d token %d: key score %.6g, exact %.6g", what, b,
               t, (double)fs_key_score(w->hkey[b]), sc);
      return -1;
    }
    if (ref_tok && b < nref && t != ref_tok[b] && ref_score[b] - sc > tol(ref_score[b])) {
      snprintf(w->msg, sizeof w->msg,
               "%s row %d: token %d (exact score %.6f) where the %s picks %d (%.6f)", what, b,
               t, sc, otok ? "CPU reference" : "oracle", ref_tok[b], ref_score[b]);
      return -1;
    }
    if (otok) {
      otok[b] = t;
      oscore[b] = sc;
    }
  }
  return 0;
}

/* ---- SETUP ----------------------------------------------------------------------- */
static int load(worker *w, const fs_variant *v, const void *cubin, fs_kernel **k) {
  int st = fs_kernel_load_cubin(w->ctx, v, cubin, k);
  if (st) {
    snprintf(w->msg, sizeof w->msg, "loading the cubin: %s: %s", fs_status_string(st),
             fs_last_error(w->ctx));
    check_health(w);
    return -1;
  }
  st = fs_workspace_reserve(w->ctx, fs_workspace_need(w->ctx, *k, w->B, w->V, 1));
  /* Fresh counters and bounds: a wrong variant before may have left them
  ** dirty, and a dirty bound would prune a winner.  (The
  ** stream is a blocking one, so it is ordered after this legacy-stream
  ** memset; the synchronisation makes that explicit.) */
  if (!st && w->ctx->workspace &&
      (CU(w->cu->cuMemsetD8(w->ctx->workspace, 0, FS_HEAD_BYTES)) ||
       CU(w->cu->cuCtxSynchronize())))
    st = FS_CUDA;
  else if (st)
    snprintf(w->msg, sizeof w->msg, "workspace: %s", fs_last_error(w->ctx));
  if (st) {
    check_health(w);
    fs_kernel_unload(w->ctx, *k);
    *k = NULL;
    return -1;
  }
  return 0;
}

static void do_setup(worker *w, const tune_msg *m, const void *cubin, tune_msg *r) {
  fs_kernel *k = NULL;
  reply_init(r, TUNE_MSG_READY);
  w->oracle_ok = 0;
  w->msg[0] = 0;
  r->status = FS_CUDA;
  if (setup_shape(w, m->dtype, m->hidden, m->vocab) || setup_batch(w, m->batch)) goto done;
  if (!w->bandwidth) {
    w->bandwidth = fs_tools_read_bandwidth(w->ctx, (size_t)1 << 30, 10);
    if (w->bandwidth <= 0) w->bandwidth = -1;
  }
  if (!w->scratch && w->cu->cuMemAlloc(&w->scratch, FLUSH_BYTES) != CUDA_SUCCESS) w->scratch = 0;
  r->bandwidth = w->bandwidth;
  r->floor_us = w->bandwidth > 0
                    ? ((double)w->V + w->B) * w->D * 2.0 / w->bandwidth * 1e6 : -1;
  w->floor_us = r->floor_us;
  if (load(w, &m->variant, cubin, &k)) goto done;
  /* The default against the CPU reference on its first rows, then it is the
  ** oracle on all B rows. */
  const int nref = w->B < 2 ? w->B : 2;
  for (int c = 0; c < NCFG && w->nref < nref; c++) {
    double z;
    fs_problem p = {nref, w->D, w->V, 0, w->dtype, w->hH, 0, w->hW, 0};
    /* its first rows */
    const fs_options opt = {.size = sizeof opt, .token_mask = w->hmask,
                            .token_mask_stride = mask_words(w->V)};
    int st = fs_reference_sample_ex(&p, &cfgs[c],
                                    c == CFG_GROUP16 ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN,
                                    c == CFG_MASKED ? &opt : NULL, w->ref_tok[c], NULL, NULL);
    if (st) {
      snprintf(w->msg, sizeof w->msg, "CPU reference: %s", fs_last_error(NULL));
      r->status = st;
      goto done;
    }
    for (int b = 0; b < nref; b++)
      w->ref_score[c][b] = exact_score(w, c, b, w->ref_tok[c][b], &z);
  }
  if (w->nref < nref) w->nref = nref;
  for (int c = 0; c < NCFG; c++) {
    if (run_once(w, k, c)) goto done;
    if (check(w, c, w->ref_tok[c], w->ref_score[c], nref, w->otok[c], w->oscore[c])) {
      r->status = FS_INTERNAL;
      r->outcome = FS_STORE_OUTCOME_WRONG;
      goto done;
    }
  }
  w->oracle_ok = 1;
  r->status = FS_OK;
done:
  if (k) fs_kernel_unload(w->ctx, k);
  r->fatal = w->fatal;
  snprintf(r->message, sizeof r->message, "%s", w->msg);
}

/* ---- JOB ------------------------------------------------------------------------- */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void stats(const double *t, int n, double *med, double *spread) {
  double *s = malloc((size_t)n * sizeof *s);
  if (!s) { *med = t[n / 2]; *spread = -1; return; }
  memcpy(s, t, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  *med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  *spread = 0.5 * (s[(3 * n) / 4] - s[n / 4]);
  free(s);
}

/* Times k with configuration cfg (header comment).  Returns 0 or -1 with
** w->msg. */
static int time_variant(worker *w, const fs_kernel *k, int cfg, double cap_s, double warmup_ms,
                        tune_msg *r) {
  fs_problem p;
  fs_sampling s;
  fs_outputs o;
  double t[MAX_RUNS];
  make_call(w, cfg, &p, &s, &o);
  const double t0 = fs_tools_now();
  int n = 0;
  do { /* WARMUPS runs, repeated until warmup_ms have passed */
    for (int i = 0; i < WARMUPS; i++) {
      int st = fs_launch(w->ctx, k, &p, &s, &o, w->stream);
      if (st) {
        snprintf(w->msg, sizeof w->msg, "launch: %s", fs_last_error(w->ctx));
        check_health(w);
        return -1;
      }
    }
    if (CU(w->cu->cuStreamSynchronize(w->stream))) { w->fatal = 1; return -1; }
  } while (fs_tools_now() - t0 < warmup_ms);
  const double t1 = fs_tools_now(); /* the time cap counts from here */
  double med = 0, spread = 0;
  while (n < MAX_RUNS) {
    float ms = 0;
    if (w->scratch &&
        CU(w->cu->cuMemsetD8Async(w->scratch, (unsigned char)n, FLUSH_BYTES, w->stream))) {
      w->fatal = 1;
      return -1;
    }
    if (CU(w->cu->cuEventRecord(w->e0, w->stream))) { w->fatal = 1; return -1; }
    int st = fs_launch(w->ctx, k, &p, &s, &o, w->stream);
    if (st) {
      snprintf(w->msg, sizeof w->msg, "launch: %s", fs_last_error(w->ctx));
      check_health(w);
      return -1;
    }
    if (CU(w->cu->cuEventRecord(w->e1, w->stream)) || CU(w->cu->cuEventSynchronize(w->e1)) ||
        CU(w->cu->cuEventElapsedTime(&ms, w->e0, w->e1))) {
      w->fatal = 1;
      return -1;
    }
    t[n++] = ms * 1e3;
    if (n >= MIN_RUNS && n % 5 == 0) {
      stats(t, n, &med, &spread);
      if (spread < FS_STORE_TIE_FRACTION * med) break;
    }
    if (n >= MIN_RUNS && fs_tools_now() - t1 > cap_s * 1e3) break;
  }
  stats(t, n, &med, &spread);
  r->median_us = med;
  r->spread_us = spread;
  r->samples = n;
  return 0;
}

static void do_job(worker *w, const tune_msg *m, const void *cubin, tune_msg *r) {
  fs_kernel *k = NULL;
  reply_init(r, TUNE_MSG_RESULT);
  w->msg[0] = 0;
  r->outcome = FS_STORE_OUTCOME_RUN_FAILED;
  r->floor_us = w->floor_us;
  if (!w->oracle_ok) {
    snprintf(w->msg, sizeof w->msg, "no oracle: SETUP failed");
    goto done;
  }
  if (w->inject_crash && strcmp(w->inject_crash, m->variant.name) == 0) raise(SIGSEGV);
  if (w->inject_hang && strcmp(w->inject_hang, m->variant.name) == 0)
    for (;;) pause();
  if (load(w, &m->variant, cubin, &k)) goto done;
  int lb = -1;
  r->registers = k->registers;
  if (w->cu->cuFuncGetAttribute(&lb, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->main_fn) == 0)
    r->local_bytes = lb;
  for (int c = 0; c < NCFG; c++) {
    if (run_once(w, k, c)) goto done;
    if (check(w, c, w->otok[c], w->oscore[c], w->B, NULL, NULL)) {
      r->outcome = FS_STORE_OUTCOME_WRONG;
      goto done;
    }
  }
  /* verified per token above and below; timed in the job's mode: greedy
  ** calls, or sampled ones with that mode's noise */
  w->ctx->noise = m->mode == FS_STORE_MODE_GROUP16 ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
  const int timing_failed = time_variant(w, k, m->mode == FS_STORE_MODE_GREEDY ? CFG_GREEDY : 0,
                                         m->cap_s, m->warmup_ms, r);
  w->ctx->noise = FS_NOISE_TOKEN;
  if (timing_failed) goto done;
  /* Again after timing: a race may show only sometimes. */
  if (run_once(w, k, 0)) goto done;
  if (check(w, 0, w->otok[0], w->oscore[0], w->B, NULL, NULL)) {
    r->outcome = FS_STORE_OUTCOME_WRONG;
    snprintf(r->message, sizeof r->message, "after timing: %s", w->msg);
    snprintf(w->msg, sizeof w->msg, "%s", r->message);
    goto done;
  }
  r->outcome = FS_STORE_OUTCOME_OK;
done:
  if (k) fs_kernel_unload(w->ctx, k);
  r->status = r->outcome == FS_STORE_OUTCOME_OK ? FS_OK : FS_CUDA;
  r->fatal = w->fatal;
  snprintf(r->message, sizeof r->message, "%s", w->msg);
}

/* ---- main ------------------------------------------------------------------------ */
static void worker_free(worker *w) {
  if (w->ctx) {
    dfree(w, &w->dW);
    dfree(w, &w->dH);
    dfree(w, &w->tok);
    dfree(w, &w->lgt);
    dfree(w, &w->key);
    dfree(w, &w->dmask);
    dfree(w, &w->scratch);
    if (w->e0) w->cu->cuEventDestroy(w->e0);
    if (w->e1) w->cu->cuEventDestroy(w->e1);
    if (w->stream) w->cu->cuStreamDestroy(w->stream);
    CUcontext dummy;
    w->cu->cuCtxPopCurrent(&dummy);
    fs_context_destroy(w->ctx);
  }
  free(w->hW); free(w->hH); free(w->htok); free(w->hlgt); free(w->hkey); free(w->hmask);
  for (int c = 0; c < NCFG; c++) { free(w->otok[c]); free(w->oscore[c]); }
}

int tune_worker_main(int in_fd, int out_fd, int device) {
  worker w0, *w = &w0;
  tune_msg m, r;
  void *cubin = NULL;
  memset(w, 0, sizeof *w);
  /* the parent decides what Ctrl-C and SIGTERM mean (a SIGTERM to the
  ** process group must not kill the variant in flight: the parent would
  ** see a death, not an interruption) */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  w->in_fd = in_fd;
  w->out_fd = out_fd;
  w->inject = getenv("FS_TUNE_INJECT_WRONG");
  w->inject_crash = getenv("FS_TUNE_INJECT_CRASH");
  w->inject_hang = getenv("FS_TUNE_INJECT_HANG");
  w->inject_fault = getenv("FS_TUNE_INJECT_FAULT");

  reply_init(&r, TUNE_MSG_HELLO);
  r.status = fs_context_create(device, &w->ctx);
  if (r.status) {
    snprintf(r.message, sizeof r.message, "%s", fs_last_error(NULL));
  } else {
    w->cu = w->ctx->cu;
    r.arch = w->ctx->arch;
    r.sm_count = w->ctx->sm_count;
    r.max_smem = w->ctx->max_smem_optin;
    snprintf(r.device_name, sizeof r.device_name, "%s", w->ctx->device_name);
    int dv = -1;
    if (w->cu->cuDriverGetVersion(&dv) == CUDA_SUCCESS) r.driver_version = dv;
    if (CU(w->cu->cuCtxPushCurrent(w->ctx->cu_ctx)) ||
        CU(w->cu->cuStreamCreate(&w->stream, CU_STREAM_DEFAULT)) ||
        CU(w->cu->cuEventCreate(&w->e0, CU_EVENT_DEFAULT)) ||
        CU(w->cu->cuEventCreate(&w->e1, CU_EVENT_DEFAULT))) {
      r.status = FS_CUDA;
      snprintf(r.message, sizeof r.message, "%.1000s", w->msg);
    }
  }
  if (write_full(out_fd, &r, sizeof r)) goto out;
  while (!w->fatal && read_full(in_fd, &m, sizeof m) == 0) {
    if (m.magic != TUNE_MSG_MAGIC || m.type == TUNE_MSG_QUIT) break;
    free(cubin);
    cubin = NULL;
    if (m.cubin_size) {
      cubin = malloc((size_t)m.cubin_size);
      if (!cubin || read_full(in_fd, cubin, (size_t)m.cubin_size)) break;
    }
    if (m.type == TUNE_MSG_SETUP && !w->cu) {
      reply_init(&r, TUNE_MSG_READY);
      r.status = FS_NO_DEVICE;
      snprintf(r.message, sizeof r.message, "no GPU in this process");
    } else if (m.type == TUNE_MSG_SETUP) {
      do_setup(w, &m, cubin, &r);
    } else if (m.type == TUNE_MSG_JOB && w->cu) {
      do_job(w, &m, cubin, &r);
    } else {
      break;
    }
    if (write_full(out_fd, &r, sizeof r)) break;
  }
out:
  free(cubin);
  if (!w->fatal) worker_free(w); /* a broken context is left to process exit */
  return w->fatal ? 3 : 0;
}
