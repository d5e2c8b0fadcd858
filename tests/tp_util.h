/*
** tp_util.h: the problem the tensor-parallel tests share (test_tp on one
** GPU, test_tp_nccl over several): B rows of H and a V-row W (bf16, fixed
** seed), per-row temperatures with greedy rows mixed in, two samples per
** row, uneven shard boundaries, and the unsharded draw every rank must
** reproduce bitwise; and ranks as threads on one GPU (test_tp, test_group),
** each with its own context and stream, reducing through the host.
** Header-only (static), like gpu_util.h.
*/
#ifndef FS_TP_UTIL_H
#define FS_TP_UTIL_H

#include "gpu_graph.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>

#define TP_MAXR 8
enum { TP_B = 6, TP_D = 512, TP_V = 30011, TP_S = 2, TP_NITEMS = TP_B * TP_S };

/* Per-row temperatures: sampled rows and greedy ones (T = 0). */
static const float tp_temps[TP_B] = {1.0f, 0.0f, 0.7f, 2.0f, 1.0f, 0.0f};

/* Uneven shard boundaries of nv rows over R ranks: start[0 .. R], not
** multiples of 16 (or 4) inside. */
static inline void tp_shard_bounds(int nv, int R, int *start) {
  for (int k = 0; k <= R; k++) start[k] = (int)((long long)nv * k / R);
  for (int k = 1; k < R; k++) start[k] += (k % 2 ? 3 : -5);
}

/* The host data (malloc'ed; free both): H [TP_B, TP_D] uniform in [-1, 1),
** W [TP_V, TP_D] in [-0.2, 0.2) (fs_test_uniform). */
static inline void tp_host_data(uint16_t **h, uint16_t **w) {
  unsigned long long seed = 99;
  *h = gu_malloc((size_t)TP_B * TP_D * 2);
  *w = gu_malloc((size_t)TP_V * TP_D * 2);
  for (size_t i = 0; i < (size_t)TP_B * TP_D; i++)
    (*h)[i] = fs_test_f2bf((float)fs_test_uniform(&seed));
  for (size_t i = 0; i < (size_t)TP_V * TP_D; i++)
    (*w)[i] = fs_test_f2bf((float)(fs_test_uniform(&seed) * 0.2));
}

/* The sampling parameters, with the temperatures at device pointer temps. */
static inline fs_sampling tp_sampling(CUdeviceptr temps) {
  fs_sampling s = {0, (const float *)gu_ptr(temps), TP_S, 1234, NULL, 5, NULL};
  return s;
}

/* Outputs of every item (tokens, logits, keys), poisoned, on ctx's GPU. */
static inline void tp_outputs(fs_context *ctx, gu_outputs *o) {
  gu_outputs_alloc(ctx, o, TP_NITEMS, 1, 1);
  gu_outputs_poison(ctx, o);
}

/* The unsharded problem on ctx's GPU (H, W and temperatures uploaded) and
** its draw: what every test of a sharded call compares against. */
typedef struct tp_unsharded {
  uint16_t *h, *w; /* host data (tp_host_data) */
  CUdeviceptr dh, dw, dtemps;
  fs_problem full;
  fs_sampling s;
  gu_outputs ref; /* its draw, fetched to the host copies */
} tp_unsharded;

/* u's unsharded problem drawn into ref (allocated here, fetched): through
** fs_sample_ex with options opt, or fs_sample when opt is NULL. */
static inline void tp_unsharded_draw_ex(fs_context *ctx, const tp_unsharded *u,
                                        const fs_options *opt, gu_outputs *ref) {
  tp_outputs(ctx, ref);
  const fs_outputs o = gu_outputs_api(ref);
  REQUIRE((opt ? fs_sample_ex(ctx, &u->full, &u->s, opt, &o, NULL)
               : fs_sample(ctx, &u->full, &u->s, &o, NULL)) == FS_OK);
  gu_outputs_fetch(ctx, ref);
}

static inline void tp_unsharded_init(fs_context *ctx, tp_unsharded *u) {
  tp_host_data(&u->h, &u->w);
  u->dh = gu_upload_new(ctx, u->h, (size_t)TP_B * TP_D * 2);
  u->dw = gu_upload_new(ctx, u->w, (size_t)TP_V * TP_D * 2);
  u->dtemps = gu_upload_new(ctx, tp_temps, sizeof tp_temps);
  u->s = tp_sampling(u->dtemps);
  u->full = (fs_problem){TP_B, TP_D, TP_V, 0, FS_DTYPE_BF16, gu_ptr(u->dh), 0, gu_ptr(u->dw), 0};
  tp_unsharded_draw_ex(ctx, u, NULL, &u->ref);
}

/* A logit bias of n entries a row for TP_B rows (host arrays tok and val,
** TP_B * n each) from seed: ids of every shard, values in [-4, 8], and in
** each row a pad (entry 3), a repeat (entry 7 names entry 5's id) and a ban
** (entry 9: -inf); n >= 10. */
static inline void tp_bias_fill(int32_t *tok, float *val, int n, unsigned long long seed) {
  for (int i = 0; i < TP_B * n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    tok[i] = (int32_t)((seed >> 20) % (unsigned long long)TP_V);
    val[i] = (float)((double)((seed >> 40) % 1201) / 100.0 - 4.0);
    if (i % n == 3) tok[i] = -1;
    if (i % n == 7) tok[i] = tok[i - 2];
    if (i % n == 9) val[i] = -INFINITY;
  }
}

/* Row b's raw logits in double from u's host data (after the soft-cap c, 0
** none) into z[TP_V]; returns their log-sum-exp, the argmax into *top
** where top is not NULL. */
static inline double tp_host_row(const tp_unsharded *u, int b, float c, double *z, int *top) {
  double m = -INFINITY, l = 0.0;
  for (int v = 0; v < TP_V; v++) {
    double acc = 0.0;
    for (int d = 0; d < TP_D; d++) {
      const uint32_t hb = (uint32_t)u->h[(size_t)b * TP_D + d] << 16,
                     wb = (uint32_t)u->w[(size_t)v * TP_D + d] << 16;
      float hf, wf;
      memcpy(&hf, &hb, 4);
      memcpy(&wf, &wb, 4);
      acc += (double)hf * (double)wf;
    }
    z[v] = c > 0.0f ? c * tanh(acc / c) : acc;
    if (z[v] > m) {
      l = l * exp(m - z[v]) + 1.0, m = z[v];
      if (top) *top = v;
    } else {
      l += exp(z[v] - m);
    }
  }
  return m + log(l);
}

/* Token-mask words per row over the whole vocabulary: the stride every rank
** of a masked call gives (a shard cannot know it). */
enum { TP_MW = (TP_V + 31) / 32 };

static inline void tp_unsharded_free(fs_context *ctx, tp_unsharded *u) {
  gu_outputs_free(ctx, &u->ref);
  gu_free(ctx, u->dh);
  gu_free(ctx, u->dw);
  gu_free(ctx, u->dtemps);
  free(u->h);
  free(u->w);
}

/* Counts the items of one rank's outputs o (on ctx's GPU; poisoned before
** the call) that differ from the unsharded draw ref (fetched) in token, key
** or logit bits (logits where o has them), printing the first few. */
static inline int tp_mismatches(fs_context *ctx, gu_outputs *o, const gu_outputs *ref,
                                const char *who) {
  gu_outputs_fetch(ctx, o);
  int mism = 0;
  for (int i = 0; i < TP_NITEMS; i++)
    if (o->h_tokens[i] != ref->h_tokens[i] || o->h_keys[i] != ref->h_keys[i] ||
        (o->with_logits && memcmp(&o->h_logits[i], &ref->h_logits[i], 4))) {
      if (mism++ < 5)
        fprintf(stderr, "%s item %d: token %d key %016llx logit %g; unsharded %d %016llx %g\n",
                who, i, o->h_tokens[i], (unsigned long long)o->h_keys[i],
                o->with_logits ? o->h_logits[i] : 0.0f,
                ref->h_tokens[i], (unsigned long long)ref->h_keys[i], ref->h_logits[i]);
    }
  return mism;
}

/* ---- logprobs (fs_options.logprobs) ---------------------------------------- */

/* Logprobs: TP_NITEMS + GU_GUARD floats, poisoned, on ctx's GPU, and the
** options that ask for them (opt->logprobs). */
static inline CUdeviceptr tp_lp_alloc(fs_context *ctx, fs_options *opt) {
  const CUdeviceptr d = gu_alloc(ctx, (TP_NITEMS + GU_GUARD) * sizeof(float));
  gu_poison(ctx, d, (TP_NITEMS + GU_GUARD) * sizeof(float));
  memset(opt, 0, sizeof *opt);
  opt->size = sizeof *opt;
  opt->logprobs = (float *)gu_ptr(d);
  return d;
}

/* Counts the logprobs at d (from tp_lp_alloc) that differ from the unsharded
** ones ref (host) by more than 2e-5 + 1e-6 |lse|, lse = the unsharded
** logit ref_logits[i] minus ref[i] (-inf: must be -inf; NaN, also the
** poison of entries a call with fewer items leaves: must be NaN), and the
** guard entries written; frees d. */
static inline int tp_lp_mismatches(fs_context *ctx, CUdeviceptr d, const float *ref,
                                   const float *ref_logits, const char *who) {
  float h[TP_NITEMS + GU_GUARD];
  gu_download(ctx, h, d, sizeof h);
  gu_free(ctx, d);
  if (gu_fake_driver()) return 0; /* no kernel ran */
  int bad = 0;
  for (int i = 0; i < TP_NITEMS + GU_GUARD; i++) {
    int ok;
    if (i >= TP_NITEMS) ok = gu_float_bits(h[i]) == 0xFFFFFFFFu;
    else if (isnan(ref[i])) ok = isnan(h[i]);
    else if (isinf(ref[i])) ok = h[i] == ref[i];
    else ok = fabsf(h[i] - ref[i]) <= 2e-5f + 1e-6f * fabsf(ref_logits[i] - ref[i]);
    if (!ok && bad++ < 5)
      fprintf(stderr, "%s: logprob %d %.8g, unsharded %.8g\n", who, i, h[i],
              i < TP_NITEMS ? ref[i] : 0.0f);
  }
  return bad;
}

/* The unsharded draw with opt (fs_sample_ex) into ref, its logprobs into
** lp [TP_NITEMS] (poison, NaN, past B x u->s.num_samples). */
static inline void tp_unsharded_lp(fs_context *ctx, const tp_unsharded *u, fs_options *opt,
                                   gu_outputs *ref, float *lp) {
  const CUdeviceptr d = gu_alloc(ctx, TP_NITEMS * sizeof(float));
  gu_poison(ctx, d, TP_NITEMS * sizeof(float));
  opt->logprobs = (float *)gu_ptr(d);
  tp_unsharded_draw_ex(ctx, u, opt, ref);
  gu_download(ctx, lp, d, TP_NITEMS * sizeof(float));
  gu_free(ctx, d);
  opt->logprobs = NULL;
}

/* A case's sampling: s with S samples a row, and with greedy every row at
** T = 0 (a greedy call: no per-row temperatures). */
static inline void tp_case_sampling(fs_sampling *s, int S, int greedy) {
  s->num_samples = S;
  if (greedy) {
    s->temperatures = NULL;
    s->temperature = 0.0f;
  }
}

/* Is case i among `only` (FS_TEST_CASES: comma-separated case indices; NULL
** or empty: every case). */
static inline int tp_case_wanted(const char *only, size_t i) {
  if (!only || !*only) return 1;
  for (const char *q = only; *q; q += *q == ',') {
    char *e;
    if (strtol(q, &e, 10) == (long)i) return 1;
    if (e == q) break;
    q = e;
  }
  return 0;
}

/* ---- ranks as threads on one GPU ------------------------------------------ */

/* What the R ranks of one sharded call share.  A collective of a call
** reduces at most TP_NITEMS + TP_B elements (keys and, with logprobs, a
** log-sum-exp per row). */
enum { TP_MAXCOUNT = TP_NITEMS + TP_B };
typedef struct tp_shared {
  int R;
  pthread_barrier_t bar;
  void *host[TP_MAXR]; /* each rank's staged buffer */
  size_t maxcount;     /* elements an all-reduce may have (0: TP_MAXCOUNT) */
} tp_shared;

static inline size_t tp_maxcount(const tp_shared *sh) {
  return sh->maxcount ? sh->maxcount : (size_t)TP_MAXCOUNT;
}

/* One rank: its own context and stream on GPU 0, its shard and outputs. */
typedef struct tp_rank {
  tp_shared *sh;
  int rank;
  fs_context *ctx;
  CUstream stream;
  fs_problem p;
  fs_sampling s;
  fs_outputs o;
  gu_outputs go; /* o's arrays */
  const fs_options *opt; /* set: fs_sample_tp_ex with it (test_tp's logprobs) */
  int collectives;       /* tp_host_allreduce's calls by this rank */
  int status;
  char err[512];
} tp_rank;

/* All-reduce through the host (user is the calling tp_rank): correct, slow,
** and enough to exercise the library's TP logic with real concurrent ranks
** on one GPU.  Returns 0, or 1 if count is larger than a call of these tests
** needs (tp_maxcount: the staging buffers' size; every rank then fails
** alike, before the barrier) or a driver call or malloc failed. */
static inline int tp_host_allreduce(void *user, void *buf, size_t count, int op, void *stream) {
  tp_rank *r = user;
  tp_shared *sh = r->sh;
  const fs_cu_api *cu = r->ctx->cu;
  r->collectives++;
  if (count > tp_maxcount(sh)) {
    fprintf(stderr, "rank %d: an all-reduce of %zu elements, more than the %zu a call needs\n",
            r->rank, count, tp_maxcount(sh));
    return 1;
  }
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
  /* from pageable memory cuMemcpyHtoD may return before its DMA lands, and
  ** the rank's non-blocking stream does not wait for it: the context's
  ** synchronisation does (without it a kernel after the collective read
  ** the buffer's tail stale, one run in twelve: perf-notes 51b) */
  int bad = cu->cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, out, bytes) != CUDA_SUCCESS ||
            cu->cuCtxSynchronize() != CUDA_SUCCESS;
  free(out);
  return bad;
}

/* Rank k of sh: its staging buffer, a new context on GPU 0 with a
** non-blocking stream, the shard [start[k], start[k + 1]) of u's W (bf16,
** vocab_offset start[k]) with u's sampling, and poisoned outputs. */
static inline void tp_rank_open(tp_rank *r, tp_shared *sh, int k, const tp_unsharded *u,
                                const int *start) {
  memset(r, 0, sizeof *r);
  r->sh = sh;
  r->rank = k;
  sh->host[k] = gu_malloc(tp_maxcount(sh) * 8);
  REQUIRE(fs_context_create(0, &r->ctx) == FS_OK);
  gu_push(r->ctx);
  GU_CU(r->ctx, r->ctx->cu->cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING));
  gu_pop(r->ctx);
  r->p = (fs_problem){TP_B, TP_D, start[k + 1] - start[k], start[k], FS_DTYPE_BF16,
                      gu_ptr(u->dh), 0, gu_ptr(u->dw + (CUdeviceptr)start[k] * TP_D * 2), 0};
  r->s = u->s;
  tp_outputs(r->ctx, &r->go);
  r->o = gu_outputs_api(&r->go);
}

/* Rank r's further outputs into opt: with lp its logprobs (*dlp,
** tp_lp_alloc's), with ranks its ranks (*drk, TP_NITEMS int32 poisoned),
** with no_logits no outputs->logits (the draws' logits then reduced in the
** library's workspace). */
static inline void tp_rank_extras(tp_rank *r, fs_options *opt, int lp, int ranks,
                                  int no_logits, CUdeviceptr *dlp, CUdeviceptr *drk) {
  if (lp) {
    fs_options t; /* tp_lp_alloc clears the options it is given */
    *dlp = tp_lp_alloc(r->ctx, &t);
    opt->logprobs = t.logprobs;
  }
  if (ranks) {
    *drk = gu_alloc(r->ctx, TP_NITEMS * sizeof(int32_t));
    gu_poison(r->ctx, *drk, TP_NITEMS * sizeof(int32_t));
    opt->ranks = (int32_t *)gu_ptr(*drk);
  }
  if (no_logits) {
    r->o.logits = NULL;
    r->go.with_logits = 0;
  }
}

/* A rank's thread: fs_prepare, then fs_sample_tp_ex with r->opt (or
** fs_sample_tp where it is NULL) through tp_host_allreduce; the status and
** message into r, the stream synchronised. */
static inline void *tp_rank_main(void *arg) {
  tp_rank *r = arg;
  r->status = fs_prepare(r->ctx, &r->p, &r->s);
  if (!r->status)
    r->status = r->opt ? fs_sample_tp_ex(r->ctx, &r->p, &r->s, r->opt, &r->o, tp_host_allreduce, r,
                                         (void *)r->stream)
                       : fs_sample_tp(r->ctx, &r->p, &r->s, &r->o, tp_host_allreduce, r,
                                      (void *)r->stream);
  if (r->status) snprintf(r->err, sizeof r->err, "%s", fs_last_error(r->ctx));
  gu_sync(r->ctx);
  return NULL;
}

/* The R ranks' threads (tp_rank_main), started and joined. */
static inline void tp_run_ranks(tp_rank *rk, int R) {
  pthread_t th[TP_MAXR];
  for (int k = 0; k < R; k++) REQUIRE(pthread_create(&th[k], NULL, tp_rank_main, &rk[k]) == 0);
  for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
}

/* After the rank's thread has joined: CHECKs its status, counts its
** mismatches against ref (tp_mismatches, reported as `who`), and frees
** what tp_rank_open made.  Returns the mismatches. */
static inline int tp_rank_close(tp_rank *r, const gu_outputs *ref, const char *who) {
  CHECK_MSG(r->status == FS_OK, "%s: %s", who, r->err);
  const int mism = tp_mismatches(r->ctx, &r->go, ref, who);
  gu_outputs_free(r->ctx, &r->go);
  gu_push(r->ctx);
  r->ctx->cu->cuStreamDestroy(r->stream);
  gu_pop(r->ctx);
  fs_context_destroy(r->ctx);
  free(r->sh->host[r->rank]);
  return mism;
}

/* ---- NCCL with one rank on GPU 0 ------------------------------------------ */

/* A one-rank communicator on GPU 0 (ncclCommInitAll) into *comm; returns
** ncclCommDestroy, or NULL where libnccl.so.2 does not load (said so:
** `what` skipped) or the init failed (a CHECK). */
static inline int (*tp_nccl_one(void **comm, const char *what))(void *) {
  void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!nccl) {
    printf("%s skipped: libnccl.so.2 not loadable (%s)\n", what, dlerror());
    return NULL;
  }
  int (*init_all)(void **, int, const int *) =
      (int (*)(void **, int, const int *))dlsym(nccl, "ncclCommInitAll");
  int (*destroy)(void *) = (int (*)(void *))dlsym(nccl, "ncclCommDestroy");
  REQUIRE(init_all && destroy);
  *comm = NULL;
  const int dev = 0, nr = init_all(comm, 1, &dev);
  CHECK_MSG(nr == 0, "ncclCommInitAll: %d", nr);
  return nr ? NULL : destroy;
}

/* fs_sample_nccl_ex(p, s, o, out, comm) captured on stream gs into *graph
** and, where the call succeeded (a CHECK naming `what`), instantiated into
** *exec (else NULL); the call's status. */
static inline int tp_nccl_capture(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                                  const fs_options *o, const fs_outputs *out, void *comm,
                                  CUstream gs, CUgraph *graph, CUgraphExec *exec,
                                  const char *what) {
  *graph = NULL;
  *exec = NULL;
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const int st = fs_sample_nccl_ex(ctx, p, s, o, out, comm, (void *)gs);
  GU_CU(ctx, ctx->cu->cuStreamEndCapture(gs, graph));
  gu_pop(ctx);
  CHECK_MSG(st == FS_OK, "fs_sample_nccl_ex with %s while capturing: %s", what,
            fs_last_error(ctx));
  if (st == FS_OK) GU_CU(ctx, gu_graph_instantiate(ctx, exec, *graph));
  return st;
}

#endif
