/*
** sample.c: fs_prepare, fs_sample and the launch.  fs_prepare does all the
** slow work (choose a variant per batch bucket, generate, compile, load,
** allocate); fs_sample on a prepared shape only validates, finds its plan
** and enqueues one kernel (two with the two-pass reduction): no allocation,
** no synchronisation, so it can be captured in a CUDA graph.
*/
#include "fs_int.h"
#include "fs_params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Architectures the generator knows; a GPU runs the newest one of its major
** version not above it (sm_90 gets the sm_90a variants). */
int fs_target_arch(int arch) {
  static const int known[] = {120, 100, 90, 89, 86, 80};
  for (size_t i = 0; i < sizeof known / sizeof *known; i++)
    if (known[i] <= arch && known[i] / 10 == arch / 10) return known[i];
  return 0;
}

int fs_bucket(int batch) {
  int b = 1;
  while (b < batch && b < 256) b *= 2;
  if (batch > 256) b = (batch + 255) / 256 * 256;
  return b;
}

/* At most one chunk per unit of work: a 16-row group, or a tile where the
** chunks are whole tiles (v.whole_tiles: wg, wt), so a tiny vocabulary
** launches no CTAs that could only write empty candidates (beyond those a
** cluster rounds up to). */
int fs_num_chunks(const fs_context *ctx, const fs_kernel *k, int batch, int vocab) {
  const int units = k->v.whole_tiles ? (vocab + k->v.tile_v - 1) / k->v.tile_v : (vocab + 15) / 16;
  const int nb = (batch + k->v.tile_b - 1) / k->v.tile_b;
  int g;
  if (k->v.cluster > 1) {
    /* whole clusters, all co-resident; chunks may be empty when V is tiny */
    const int c = k->v.cluster;
    g = k->max_clusters / nb * c;
    if (g > units / c * c) g = units / c * c;
    return g > c ? g : c;
  }
  if (k->v.persistent) {
    g = k->blocks_per_sm * ctx->sm_count / nb;
    if (g < 1) g = 1;
  } else {
    g = (vocab + k->v.tile_v - 1) / k->v.tile_v;
  }
  return g < units ? g : units;
}

_Static_assert(FS_COUNTER_BYTES % 8 == 0 && FS_HEAD_BYTES % 8 == 0,
               "the bounds and the candidate keys after the counters are 8-byte aligned");

/* Layout: counters | the rows' bounds (fs_params.bound) | candidate keys
** [B*S*G] | candidate logits [B*S*G] | tensor-parallel keys (local, global)
** [2*(B*S+B)] and logits [B*S+B] (tp.c) | the log-sum-exp pairs [B*G]
** (fs_params.lse).  All reserved for every call, so that one with logprobs
** or tensor parallelism needs no more. */
#define FS_TP_BYTES(n, b) (((n) + (b)) * 20)
static size_t lse_at(size_t g, size_t n, size_t b) {
  return FS_HEAD_BYTES + (n * g * 12 + 7) / 8 * 8 + FS_TP_BYTES(n, b);
}

size_t fs_workspace_lse_at(const fs_context *ctx, const fs_kernel *k, int batch, int vocab,
                           int samples) {
  return lse_at((size_t)fs_num_chunks(ctx, k, batch, vocab), (size_t)batch * samples,
                (size_t)batch);
}

size_t fs_workspace_need(const fs_context *ctx, const fs_kernel *k, int batch,
                         int vocab, int samples) {
  return fs_workspace_lse_at(ctx, k, batch, vocab, samples) +
         (size_t)batch * (size_t)fs_num_chunks(ctx, k, batch, vocab) * 8;
}

size_t fs_workspace_tp_at(const fs_context *ctx, const fs_kernel *k, int batch, int vocab,
                          int samples) {
  return fs_workspace_lse_at(ctx, k, batch, vocab, samples) -
         FS_TP_BYTES((size_t)batch * samples, (size_t)batch);
}

/* The most any batch of the bucket ending at `bucket` needs: the chunk
** count depends on the number of batch tiles, so a smaller batch of the
** bucket can need more candidates than the bucket's size (clusters).  One
** batch per tile count: the largest with nb tiles, which lies in the bucket
** (nb * tile_b >= lo by the loop's start, and bucket >= lo). */
static size_t bucket_need(const fs_context *ctx, const fs_kernel *k, int bucket, int vocab,
                          int samples) {
  const int lo = bucket <= 256 ? bucket / 2 + 1 : bucket - 255, tb = k->v.tile_b;
  size_t need = 0;
  for (int nb = (lo + tb - 1) / tb; nb <= (bucket + tb - 1) / tb; nb++) {
    const int b = nb * tb < bucket ? nb * tb : bucket; /* the largest batch of nb tiles */
    const size_t n = fs_workspace_need(ctx, k, b, vocab, samples);
    need = n > need ? n : need;
  }
  return need;
}

/* A workspace that grows is replaced, not freed: CUDA graphs captured
** before keep pointing at the old one, which stays valid (and its head,
** counters and bounds, zeroed) until the context is destroyed.  It grows to
** at least twice its size, but by at most 1 GiB more than asked (so that a
** large workspace does not take twice the memory it needs), so that a
** sequence of ever larger shapes retires few buffers (FS_MAX_RETIRED at
** most); where that much is not available, to `bytes` exactly.  The new buffer is allocated and zeroed before the old
** one retires, so a failure leaves the context as it was.  The zeroing is
** complete when this returns: a memset on the legacy stream is not ordered
** before a later call on a non-blocking stream, and a dirty bound would
** prune a winner (perf-notes 22h).  Never called while a stream captures
** (fs_sample returns FS_NOT_PREPARED first). */
int fs_workspace_reserve(fs_context *ctx, size_t bytes) {
  const fs_cu_api *cu = ctx->cu;
  if (bytes <= ctx->workspace_bytes) return FS_OK;
  if (ctx->workspace && ctx->n_retired == FS_MAX_RETIRED)
    return fs_err(ctx, FS_OUT_OF_MEMORY, "the workspace grew %d times (now %zu bytes, %zu "
                  "needed): prepare the largest shape first", FS_MAX_RETIRED,
                  ctx->workspace_bytes, bytes);
  size_t want = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes; /* fewer regrowths */
  if (ctx->workspace && want / 2 < ctx->workspace_bytes) {
    const size_t gib = (size_t)1 << 30;
    want = 2 * ctx->workspace_bytes;
    if (want - bytes > gib) want = bytes + gib;
  }
  CUdeviceptr w = 0;
  CUresult r = cu->cuMemAlloc(&w, want);
  if (r != CUDA_SUCCESS && want > bytes) r = cu->cuMemAlloc(&w, want = bytes);
  char what[112]; /* the failing call, for fs_cu_fail's message */
  if (r != CUDA_SUCCESS) {
    snprintf(what, sizeof what, "cuMemAlloc of a %zu-byte workspace (it stays at %zu bytes)",
             want, ctx->workspace_bytes);
    return fs_cu_fail(ctx, r, what, __FILE__, __LINE__);
  }
  r = cu->cuMemsetD8(w, 0, want);
  if (r == CUDA_SUCCESS) r = cu->cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    cu->cuMemFree(w);
    snprintf(what, sizeof what, "zeroing a new %zu-byte workspace", want);
    return fs_cu_fail(ctx, r, what, __FILE__, __LINE__);
  }
  if (ctx->workspace) ctx->retired[ctx->n_retired++] = ctx->workspace;
  ctx->workspace = w;
  ctx->workspace_bytes = want;
  return FS_OK;
}

_Static_assert(sizeof(CUtensorMap) == sizeof(((fs_tmap_entry *)0)->map), "a CUtensorMap is 128 bytes");

/* A 2-D tensor map of `ptr` ([dim1 rows, dim0 elements], row stride `stride`
** bytes, boxes of box0 x box1, 128-byte swizzle, zero fill past the edges,
** L2 promotion `promo`) into out, from ctx's cache when it was encoded before. */
static int tensor_map(fs_context *ctx, const void *ptr, int dtype, const cuuint64_t dim[2],
                      cuuint64_t stride, const cuuint32_t box[2], CUtensorMapL2promotion promo,
                      CUtensorMap *out) {
  for (int i = 0; i < FS_TMAP_CACHE; i++) {
    const fs_tmap_entry *e = &ctx->tmaps[i];
    if (e->valid && e->ptr == ptr && e->dtype == dtype && e->promotion == (int)promo &&
        e->dim[0] == dim[0] && e->dim[1] == dim[1] && e->stride == stride &&
        e->box[0] == box[0] && e->box[1] == box[1]) {
      memcpy(out, e->map, sizeof e->map);
      return FS_OK;
    }
  }
  const CUtensorMapDataType dt = dtype == FS_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                        : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const cuuint32_t es[2] = {1, 1};
  FS_CHECK_CU(ctx, ctx->cu->cuTensorMapEncodeTiled(out, dt, 2, (void *)ptr, dim, &stride, box, es,
                                                   CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                   CU_TENSOR_MAP_SWIZZLE_128B,
                                                   promo,
                                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  fs_tmap_entry *e = &ctx->tmaps[ctx->tmap_next];
  ctx->tmap_next = (ctx->tmap_next + 1) % FS_TMAP_CACHE;
  e->ptr = ptr;
  e->dtype = dtype;
  e->promotion = (int)promo;
  e->dim[0] = dim[0];
  e->dim[1] = dim[1];
  e->stride = stride;
  e->box[0] = box[0];
  e->box[1] = box[1];
  memcpy(e->map, out, sizeof e->map);
  e->valid = 1;
  return FS_OK;
}

void fs_params_call(fs_params *prm, const fs_problem *p, const fs_sampling *s,
                    const fs_opts *m) {
  memset(prm, 0, sizeof *prm);
  prm->H = p->hidden_states;
  prm->W = p->weight;
  prm->h_stride = fs_h_stride(p);
  prm->w_stride = fs_w_stride(p);
  prm->B = p->batch;
  prm->D = p->hidden;
  prm->V = p->vocab;
  prm->vocab_offset = (int)p->vocab_offset;
  prm->num_samples = s->num_samples;
  prm->row_groups = (p->vocab + 15) / 16;
  prm->temperature = s->temperature;
  prm->temperatures = s->temperatures;
  if (m) prm->softcap = m->softcap;
  if (m && m->words) {
    prm->mask = m->words;
    prm->mask_stride = m->stride;
  }
  if (m && m->zout) {
    prm->zout = m->zout;
    prm->zout_stride = m->zout_stride;
    prm->zout_keep = m->zout_keep;
  }
  prm->seed = s->seed;
  prm->seeds = (const unsigned long long *)s->seeds;
  prm->offset = s->offset;
  prm->offsets = (const unsigned long long *)s->offsets;
}

int fs_launch(fs_context *ctx, const fs_kernel *k, const fs_problem *p,
              const fs_sampling *s, const fs_outputs *o, CUstream stream) {
  return fs_launch_masked(ctx, k, p, s, NULL, o, stream);
}

int fs_launch_masked(fs_context *ctx, const fs_kernel *k, const fs_problem *p,
                     const fs_sampling *s, const fs_opts *m, const fs_outputs *o,
                     CUstream stream) {
  const fs_cu_api *cu = ctx->cu;
  if (k->v.k_multiple > 0 && p->hidden % k->v.k_multiple)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "problem->hidden=%d: variant %s needs D to be a "
                  "multiple of %d", p->hidden, k->v.name, k->v.k_multiple);
  const int B = p->batch, S = s->num_samples;
  const int G = fs_num_chunks(ctx, k, B, p->vocab);
  const size_t ncand = (size_t)B * S * G;
  if (fs_workspace_need(ctx, k, B, p->vocab, S) > ctx->workspace_bytes)
    return fs_err(ctx, FS_NOT_PREPARED, "workspace of %zu bytes is too small for B=%d, "
                  "num_samples=%d: call fs_prepare with the largest shape",
                  ctx->workspace_bytes, B, S);
  fs_params prm;
  fs_params_call(&prm, p, s, m);
  prm.num_chunks = G;
  prm.noise = ctx->noise;
  prm.tokens = o->tokens;
  prm.logits = o->logits;
  prm.keys = (unsigned long long *)o->keys;
  prm.counters = (unsigned int *)(uintptr_t)ctx->workspace;
  prm.cand_keys = (unsigned long long *)(uintptr_t)(ctx->workspace + FS_HEAD_BYTES);
  prm.cand_logits = (float *)(uintptr_t)(ctx->workspace + FS_HEAD_BYTES + ncand * 8);
  if (m && (m->logprobs || m->lse_pairs)) {
    prm.logprobs = m->logprobs; /* NULL with lse_pairs: the reduction skips the pairs */
    prm.lse = (float *)(uintptr_t)(ctx->workspace + lse_at((size_t)G, (size_t)B * S, (size_t)B));
  }
  if (ctx->prune) /* zeroed with the workspace, and again by each launch's last CTAs */
    prm.bound = (unsigned long long *)(uintptr_t)(ctx->workspace + FS_COUNTER_BYTES);
  /* Variants with v.tma (the ws, wg and wt families) read W and H through
  ** TMA tensor maps. */
  CUtensorMap tw, th;
  void *args[] = {&prm, &tw, &th};
  if (k->v.tma) {
    const cuuint64_t wd[2] = {(cuuint64_t)p->hidden, (cuuint64_t)p->vocab};
    const cuuint32_t wb[2] = {64, (cuuint32_t)k->v.tile_v};
    const cuuint64_t hd[2] = {(cuuint64_t)p->hidden, (cuuint64_t)B};
    /* with a cluster, each CTA copies its share of the H box to all of them */
    const cuuint32_t hb[2] = {64, (cuuint32_t)(k->v.tile_b / (k->v.cluster > 1 ? k->v.cluster : 1))};
    /* W's boxes are 128 bytes wide, one row segment per k-step: an L2
    ** promotion to 256 bytes (the next k-step's segment too) made batch
    ** tiles of up to 64 columns (memory-bound) 1-3% slower than 128 bytes,
    ** and the compute-bound tiles of 128 and 256 columns faster (perf-notes 12b,
    ** the wg kernels; the ws family shares the rule, not measured under it) */
    const CUtensorMapL2promotion wp = k->v.tile_b >= 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                                         : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    FS_TRY(tensor_map(ctx, p->weight, p->dtype, wd, (cuuint64_t)prm.w_stride * 2, wb, wp, &tw));
    FS_TRY(tensor_map(ctx, p->hidden_states, p->dtype, hd, (cuuint64_t)prm.h_stride * 2, hb,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &th));
  }
  const unsigned nb = (unsigned)((B + k->v.tile_b - 1) / k->v.tile_b);
  if (k->v.cluster > 1) {
    CUlaunchAttribute at;
    memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = (unsigned)k->v.cluster;
    at.value.clusterDim.y = at.value.clusterDim.z = 1;
    CUlaunchConfig lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDimX = (unsigned)G;
    lc.gridDimY = nb;
    lc.gridDimZ = 1;
    lc.blockDimX = (unsigned)k->v.threads;
    lc.blockDimY = lc.blockDimZ = 1;
    lc.sharedMemBytes = (unsigned)k->v.smem;
    lc.hStream = stream;
    lc.attrs = &at;
    lc.numAttrs = 1;
    FS_CHECK_CU(ctx, cu->cuLaunchKernelEx(&lc, k->main_fn, args, NULL));
  } else {
    FS_CHECK_CU(ctx, cu->cuLaunchKernel(k->main_fn, (unsigned)G, nb, 1, (unsigned)k->v.threads,
                                        1, 1, (unsigned)k->v.smem, stream, args, NULL));
  }
  if (!k->v.lastcta) {
    const unsigned items = (unsigned)(B * S);
    FS_CHECK_CU(ctx, cu->cuLaunchKernel(ctx->reduce_fn, (items + 3) / 4, 1, 1, 128, 1, 1, 0,
                                        stream, args, NULL));
  }
  return FS_OK;
}

static fs_plan *find_plan(fs_context *ctx, const fs_problem *p) {
  const int bucket = fs_bucket(p->batch);
  for (fs_plan *pl = ctx->plans; pl; pl = pl->next)
    if (pl->bucket == bucket && pl->vocab == p->vocab && pl->hidden == p->hidden &&
        pl->dtype == p->dtype)
      return pl;
  return NULL;
}

int fs_call_mode(const fs_context *ctx, const fs_sampling *s) {
  if (!s->temperatures && s->temperature == 0.0f) return FS_CALL_GREEDY;
  return ctx->noise == FS_NOISE_GROUP16 ? FS_CALL_GROUP16 : FS_CALL_TOKEN;
}

/* Is a bias of n entries a row cheaper through the filters' path?  Fitted
** on the H200 from B = 16 on (perf-notes 41b; D = 1024, 4096 and 8192): the
** fused path's entries cost ~1.2 + 0.45 D / 1024 ns a (row, entry), the
** filters' path ~50 us plus ~0.6 us a row at V = 151,936, V scaling it. */
static int bias_long(const fs_context *ctx, const fs_problem *p, int n, int model) {
  if (ctx->noise == FS_NOISE_GROUP16) return 0; /* the fused path's groups (validate.c) */
  if (n > ctx->bias_short) return 1;
  if (!model || ctx->bias_short_env || p->batch < 16) return 0;
  const double fused_ns = (double)p->batch * n * (1.2 + 0.45 * p->hidden / 1024.0);
  const double long_ns = 50000.0 + 600.0 * p->batch * (double)p->vocab / 151936.0;
  return fused_ns > long_ns;
}

int fs_filter_path(const fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                   const fs_opts *m, int model) {
  return (m->filter && fs_call_mode(ctx, s) != FS_CALL_GREEDY) || m->top_n > 0 || m->ranks ||
         m->targets || (m->bias_count > 0 && bias_long(ctx, p, m->bias_count, model));
}

/* Chooses and loads the kernel for (shape, bucket) and call mode: FS_VARIANT
** if set, else the tuning databases (tuned.c), else the generator's built-in
** default.  For a mode other than FS_CALL_TOKEN *out stays NULL unless a
** database has a winner of that mode (the token kernel then serves). */
static int choose(fs_context *ctx, const fs_problem *p, int bucket, int mode, fs_kernel **out,
                  char *how, size_t howlen) {
  char err[768];
  fs_variant v;
  int arch = fs_target_arch(ctx->arch);
  if (!arch)
    return fs_err(ctx, FS_UNSUPPORTED, "sm_%d: no kernels are generated for this architecture",
                  ctx->arch);
  if (!ctx->gen) {
    int st = fs_gen_open(&ctx->gen, err, sizeof err);
    if (st) return fs_err(ctx, st, "%s", err);
  }
  const char *forced = getenv("FS_VARIANT");
  *out = NULL;
  if (forced && *forced && mode != FS_CALL_TOKEN) return FS_OK;
  if (forced && *forced) {
    int st = fs_gen_parse(ctx->gen, forced, &v, err, sizeof err);
    if (st) return fs_err(ctx, st, "FS_VARIANT=%s: %s", forced, err);
    if (v.dtype != p->dtype)
      return fs_err(ctx, FS_INVALID_ARGUMENT, "FS_VARIANT=%s: the variant is for dtype %d, the "
                    "problem's dtype is %d", forced, v.dtype, p->dtype);
    snprintf(how, howlen, "forced by FS_VARIANT");
    return fs_kernel_load(ctx, &v, out);
  }
  /* Greedy and group16 calls have no built-in default of their own (the token
  ** kernel serves them), so only the token chain needs the generator's pick. */
  if (mode != FS_CALL_TOKEN) return fs_tuned_choose(ctx, p, bucket, mode, NULL, out, how, howlen);
  int st = fs_gen_default(ctx->gen, arch, p->dtype, bucket, p->hidden, p->vocab, &v, err,
                          sizeof err);
  if (st) return fs_err(ctx, st, "%s", err);
  FS_TRY(fs_tuned_choose(ctx, p, bucket, mode, &v, out, how, howlen));
  if (*out) return FS_OK;
  snprintf(how, howlen, "built-in default");
  return fs_kernel_load(ctx, &v, out);
}

/* Prepares one bucket: choose and load its kernels, record a plan; *need:
** the workspace its calls of `samples` samples need (reserved by the caller). */
static int prepare_bucket(fs_context *ctx, const fs_problem *p, int bucket, int samples,
                          fs_plan **out, size_t *need) {
  fs_problem q = *p;
  q.batch = bucket < p->batch ? bucket : p->batch;
  fs_plan *pl = find_plan(ctx, &q);
  if (!pl) {
    fs_plan np;
    memset(&np, 0, sizeof np);
    for (int m = 0; m < FS_CALL_MODES; m++) {
      FS_TRY(choose(ctx, &q, bucket, m, &np.kernel[m], np.how[m], sizeof np.how[m]));
      if (m > 0 && np.kernel[m] == np.kernel[0]) np.kernel[m] = NULL; /* the same serves */
    }
    pl = malloc(sizeof *pl);
    if (!pl) return fs_err(ctx, FS_OUT_OF_MEMORY, "out of memory for a plan");
    *pl = np;
    pl->dtype = p->dtype;
    pl->hidden = p->hidden;
    pl->vocab = p->vocab;
    pl->bucket = bucket;
    pl->next = ctx->plans;
    ctx->plans = pl;
    const char *lg = getenv("FS_LOG");
    for (int m = 0; m < FS_CALL_MODES && lg && *lg && strcmp(lg, "0"); m++)
      if (pl->kernel[m])
        fprintf(stderr, "flashsampling: dtype=%d D=%d V=%d bucket=%d -> %s (%s)\n", p->dtype,
                p->hidden, p->vocab, bucket, pl->kernel[m]->v.name, pl->how[m]);
  }
  *need = 0;
  for (int m = 0; m < FS_CALL_MODES; m++)
    if (pl->kernel[m]) {
      const size_t n = bucket_need(ctx, pl->kernel[m], bucket, p->vocab, samples);
      *need = n > *need ? n : *need;
    }
  if (out) *out = pl;
  return FS_OK;
}

/* The index into pl->kernel and pl->how that serves a call of sampling s:
** the call's mode when the plan has a kernel of its own for it, else token. */
static int plan_mode(const fs_context *ctx, const fs_plan *pl, const fs_sampling *s) {
  const int m = fs_call_mode(ctx, s);
  return pl->kernel[m] ? m : FS_CALL_TOKEN;
}

/* Every bucket up to the batch's, then the workspace for the largest need
** of them, in one allocation. */
static int prepare_locked(fs_context *ctx, const fs_problem *p, int samples) {
  size_t need = 0;
  for (int b = 1;; b = b < 256 ? b * 2 : b + 256) {
    size_t n = 0;
    FS_TRY(prepare_bucket(ctx, p, b, samples, NULL, &n));
    need = n > need ? n : need;
    if (b >= fs_bucket(p->batch)) break;
  }
  return fs_workspace_reserve(ctx, need);
}

#define WITH_CONTEXT(ctx, body)                                             \
  do {                                                                      \
    CUcontext dummy_;                                                       \
    FS_CHECK_CU(ctx, ctx->cu->cuCtxPushCurrent(ctx->cu_ctx));               \
    int st_ = (body);                                                       \
    ctx->cu->cuCtxPopCurrent(&dummy_);                                      \
    return st_;                                                             \
  } while (0)

int fs_prepare(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling) {
  if (!ctx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ctx=NULL: a context is required");
  fs_clear_err(ctx);
  FS_TRY(fs_validate_problem(ctx, problem, 0));
  FS_TRY(fs_validate_sampling(ctx, sampling, problem->batch));
  WITH_CONTEXT(ctx, prepare_locked(ctx, problem, sampling->num_samples));
}

int fs_plan_kernel(fs_context *ctx, const fs_problem *p, const fs_sampling *s, CUstream stream,
                   fs_kernel **out) {
  fs_plan *pl = find_plan(ctx, p);
  if (!pl || fs_workspace_need(ctx, pl->kernel[plan_mode(ctx, pl, s)], p->batch, p->vocab,
                               s->num_samples) > ctx->workspace_bytes) {
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    FS_CHECK_CU(ctx, ctx->cu->cuStreamIsCapturing(stream, &cs));
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE)
      return fs_err(ctx, FS_NOT_PREPARED,
                    "stream is capturing and dtype=%d D=%d V=%d B=%d num_samples=%d is not "
                    "prepared: call fs_prepare before capture", p->dtype, p->hidden,
                    p->vocab, p->batch, s->num_samples);
    size_t need = 0;
    FS_TRY(prepare_bucket(ctx, p, fs_bucket(p->batch), s->num_samples, &pl, &need));
    FS_TRY(fs_workspace_reserve(ctx, need));
  }
  *out = pl->kernel[plan_mode(ctx, pl, s)];
  return FS_OK;
}

static int sample_locked(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                         const fs_opts *m, const fs_outputs *o, CUstream stream) {
  fs_kernel *k = NULL;
  FS_TRY(fs_plan_kernel(ctx, p, s, stream, &k));
  return fs_launch_masked(ctx, k, p, s, m, o, stream);
}

int fs_sample_ex(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                 const fs_options *options, const fs_outputs *outputs, void *stream) {
  if (!ctx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ctx=NULL: a context is required");
  fs_opts m;
  FS_TRY(fs_validate_problem(ctx, problem, 1));
  FS_TRY(fs_validate_sampling(ctx, sampling, problem->batch));
  FS_TRY(fs_validate_options(ctx, options, problem, &m));
  FS_TRY(fs_validate_outputs(ctx, outputs));
  FS_TRY(fs_validate_noise(ctx, ctx->noise, problem));
  FS_TRY(fs_validate_bias_noise(ctx, ctx->noise, &m)); /* before a long bias's path */
  FS_TRY(fs_validate_filter_use(ctx, ctx->noise, &m));
  /* filters (with any bias: filter.c) unless the call is greedy, which they
  ** leave as it is; top logprobs, ranks, targets and a long bias, greedy or
  ** not (the ranks' path, FS_FILTER_RANKS=1, lists no top logprobs and
  ** ranks no draws and no targets) */
  if (fs_filter_path(ctx, problem, sampling, &m, 1)) {
    if (ctx->filter_ranks && !m.top_n && !m.ranks && !m.targets)
      return fs_sample_ranks(ctx, problem, sampling, options, outputs, stream);
    WITH_CONTEXT(ctx, fs_sample_filtered(ctx, problem, sampling, &m, outputs, (CUstream)stream));
  }
  if (m.bias_count) return fs_sample_biased(ctx, problem, sampling, options, outputs, stream);
  WITH_CONTEXT(ctx, sample_locked(ctx, problem, sampling, &m, outputs, (CUstream)stream));
}

int fs_sample(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
              const fs_outputs *outputs, void *stream) {
  return fs_sample_ex(ctx, problem, sampling, NULL, outputs, stream);
}

int fs_variant_name(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                    char *buf, size_t bufsize) {
  if (!ctx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ctx=NULL: a context is required");
  if (!buf || !bufsize) return fs_err(ctx, FS_INVALID_ARGUMENT, "buf=NULL or bufsize=0");
  FS_TRY(fs_validate_problem(ctx, problem, 0));
  FS_TRY(fs_validate_sampling(ctx, sampling, problem->batch));
  fs_plan *pl = find_plan(ctx, problem);
  if (!pl) {
    CUcontext dummy;
    size_t need; /* the plan alone: a call reserves its workspace */
    FS_CHECK_CU(ctx, ctx->cu->cuCtxPushCurrent(ctx->cu_ctx));
    int st = prepare_bucket(ctx, problem, fs_bucket(problem->batch), sampling->num_samples, &pl,
                            &need);
    ctx->cu->cuCtxPopCurrent(&dummy);
    FS_TRY(st);
  }
  const int m = plan_mode(ctx, pl, sampling);
  snprintf(buf, bufsize, "%s (%s)", pl->kernel[m]->v.name, pl->how[m]);
  return FS_OK;
}
