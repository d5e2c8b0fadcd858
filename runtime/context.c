/*
** context.c: fs_context lifetime.  A context pins one GPU's CUDA context
** (the primary one, retained, or the caller's), remembers the device's
** architecture and limits, and owns the loaded kernels, prepared plans and
** the workspace.
*/
#include "fs_int.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

/* Reads the device's properties into ctx; rejects pre-sm_80 GPUs. */
static int read_device(fs_context *ctx) {
  const fs_cu_api *cu = ctx->cu;
  int major = 0, minor = 0;
  FS_CHECK_CU(ctx, cu->cuDeviceGetAttribute(
                       &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ctx->device));
  FS_CHECK_CU(ctx, cu->cuDeviceGetAttribute(
                       &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ctx->device));
  FS_CHECK_CU(ctx, cu->cuDeviceGetAttribute(
                       &ctx->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ctx->device));
  FS_CHECK_CU(ctx, cu->cuDeviceGetAttribute(
                       &ctx->max_smem_optin,
                       CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx->device));
  FS_CHECK_CU(ctx, cu->cuDeviceGetAttribute(&ctx->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
                                            ctx->device));
  FS_CHECK_CU(ctx, cu->cuDeviceGetName(ctx->device_name, sizeof ctx->device_name, ctx->device));
  ctx->arch = major * 10 + minor;
  if (ctx->arch < 80)
    return fs_err(ctx, FS_UNSUPPORTED,
                  "device %s is sm_%d: flashsampling needs sm_80 or newer "
                  "(bf16 mma.sync, cp.async)", ctx->device_name, ctx->arch);
  return FS_OK;
}

static int new_context(fs_context **out) {
  const char *why = NULL;
  const fs_cu_api *cu = fs_cu_load(&why);
  if (!cu) return fs_err(NULL, FS_NO_DEVICE, "%s", why);
  fs_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return fs_err(NULL, FS_OUT_OF_MEMORY, "out of memory for a context");
  ctx->cu = cu;
  const char *pr = getenv("FS_PRUNE");
  ctx->prune = !(pr && !strcmp(pr, "0"));
  const char *fr = getenv("FS_FILTER_RANKS");
  ctx->filter_ranks = fr && !strcmp(fr, "1");
  /* FS_TP_RANKS_PASS=0|1 (tests, measurements): 0 sends every
  ** tensor-parallel call with ranks to the filters' path (tp.c); the same
  ** on every rank, whose collectives differ by path */
  ctx->tp_ranks_pass = 1;
  fs_env_int("FS_TP_RANKS_PASS", 0, 1, &ctx->tp_ranks_pass);
  /* FS_TOPLP_SLICES=G (1..FS_TOPLP_SLICES_MAX; tests, measurements):
  ** fsamp_toplp's slices a row (filter.c's toplp_slices) */
  fs_env_int("FS_TOPLP_SLICES", 1, FS_TOPLP_SLICES_MAX, &ctx->toplp_slices);
  /* FS_TOPLP_RANKS=N (0..FS_TOPLP_RANKS; measurements): the most samples a
  ** row whose ranks fsamp_toplp counts (filter.c), 0: fsamp_rank always */
  ctx->toplp_ranks = FS_TOPLP_RANKS;
  fs_env_int("FS_TOPLP_RANKS", 0, FS_TOPLP_RANKS, &ctx->toplp_ranks);
  /* FS_ZOUT_KEEP=0|1 (measurements): the logits' L2 policy never or always
  ** (filter.c's zout_keep) */
  ctx->zout_keep = -1;
  fs_env_int("FS_ZOUT_KEEP", 0, 1, &ctx->zout_keep);
  /* FS_BIAS_SHORT=N (0..FS_MAX_LOGIT_BIAS; tests and measurements): longer
  ** lists take the filters' path (fs_filter_path), shorter ones the fused
  ** kernel's (with filters: the filters' path, made distinct above 1024),
  ** whatever the cost model of fs_filter_path says */
  ctx->bias_short = FS_BIAS_SHORT;
  ctx->bias_short_env = fs_env_int("FS_BIAS_SHORT", 0, FS_MAX_LOGIT_BIAS, &ctx->bias_short) > 0;
  *out = ctx;
  return FS_OK;
}

/* Moves ctx's message to the thread slot and frees ctx. */
static int fail_create(fs_context *ctx, int st) {
  fs_err(NULL, st, "%s", ctx->errmsg);
  fs_context_destroy(ctx);
  return st;
}

int fs_context_set_noise(fs_context *ctx, int noise) {
  if (!ctx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ctx=NULL: a context is required");
  fs_clear_err(ctx);
  FS_TRY(fs_validate_noise(ctx, noise, NULL));
  ctx->noise = noise;
  return FS_OK;
}

int fs_context_set_tp_rank(fs_context *ctx, int rank, int ranks) {
  if (!ctx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ctx=NULL: a context is required");
  fs_clear_err(ctx);
  if (ranks < 1 || ranks > FS_MAX_TP_RANKS)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "ranks=%d: must be in 1..%d", ranks,
                  FS_MAX_TP_RANKS);
  if (rank < 0 || rank >= ranks)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "rank=%d: must be in 0..%d (ranks=%d)", rank,
                  ranks - 1, ranks);
  ctx->tp_rank = rank;
  ctx->tp_ranks = ranks;
  return FS_OK;
}

int fs_context_create(int device_ordinal, fs_context **ppCtx) {
  fs_context *ctx = NULL;
  if (!ppCtx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ppCtx=NULL: an output pointer is required");
  *ppCtx = NULL;
  FS_TRY(new_context(&ctx));
  int n = 0;
  CUresult r = ctx->cu->cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) return fail_create(ctx, fs_cu_fail(ctx, r, "cuDeviceGetCount", __FILE__, __LINE__));
  if (device_ordinal < 0 || device_ordinal >= n) {
    fs_err(ctx, n == 0 ? FS_NO_DEVICE : FS_INVALID_ARGUMENT,
           "device_ordinal=%d: must be in 0..%d (%d GPU(s) visible)", device_ordinal, n - 1, n);
    return fail_create(ctx, n == 0 ? FS_NO_DEVICE : FS_INVALID_ARGUMENT);
  }
  int st = FS_OK;
  if ((r = ctx->cu->cuDeviceGet(&ctx->device, device_ordinal)) != CUDA_SUCCESS)
    st = fs_cu_fail(ctx, r, "cuDeviceGet", __FILE__, __LINE__);
  if (!st) st = read_device(ctx);
  if (!st && (r = ctx->cu->cuDevicePrimaryCtxRetain(&ctx->cu_ctx, ctx->device)) != CUDA_SUCCESS)
    st = fs_cu_fail(ctx, r, "cuDevicePrimaryCtxRetain", __FILE__, __LINE__);
  if (st) return fail_create(ctx, st);
  ctx->owns_primary = 1;
  *ppCtx = ctx;
  return FS_OK;
}

int fs_context_create_from_cucontext(void *cu_context, fs_context **ppCtx) {
  fs_context *ctx = NULL;
  if (!ppCtx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ppCtx=NULL: an output pointer is required");
  *ppCtx = NULL;
  if (!cu_context) return fs_err(NULL, FS_INVALID_ARGUMENT, "cu_context=NULL: a CUcontext is required");
  FS_TRY(new_context(&ctx));
  ctx->cu_ctx = (CUcontext)cu_context;
  CUresult r = ctx->cu->cuCtxPushCurrent(ctx->cu_ctx);
  if (r != CUDA_SUCCESS) return fail_create(ctx, fs_cu_fail(ctx, r, "cuCtxPushCurrent", __FILE__, __LINE__));
  r = ctx->cu->cuCtxGetDevice(&ctx->device);
  CUcontext dummy;
  ctx->cu->cuCtxPopCurrent(&dummy);
  int st = r != CUDA_SUCCESS ? fs_cu_fail(ctx, r, "cuCtxGetDevice", __FILE__, __LINE__) : read_device(ctx);
  if (st) {
    ctx->cu_ctx = NULL;
    return fail_create(ctx, st);
  }
  *ppCtx = ctx;
  return FS_OK;
}

void fs_context_destroy(fs_context *ctx) {
  if (!ctx) return;
  const fs_cu_api *cu = ctx->cu;
  CUcontext dummy;
  int pushed = ctx->cu_ctx && cu->cuCtxPushCurrent(ctx->cu_ctx) == CUDA_SUCCESS;
  for (fs_kernel *k = ctx->kernels, *nk; k; k = nk) {
    nk = k->next;
    if (pushed && k->module) cu->cuModuleUnload(k->module);
    free(k);
  }
  for (fs_plan *p = ctx->plans, *np; p; p = np) {
    np = p->next;
    free(p);
  }
  if (pushed && ctx->reduce_module) cu->cuModuleUnload(ctx->reduce_module);
  if (pushed && ctx->bias_module) cu->cuModuleUnload(ctx->bias_module);
  if (pushed && ctx->filter_module) cu->cuModuleUnload(ctx->filter_module);
  if (pushed && ctx->workspace) cu->cuMemFree(ctx->workspace);
  for (int i = 0; pushed && i < ctx->n_retired; i++) cu->cuMemFree(ctx->retired[i]);
  if (pushed) cu->cuCtxPopCurrent(&dummy);
  if (ctx->owns_primary) cu->cuDevicePrimaryCtxRelease(ctx->device);
  fs_gen_close(ctx->gen);
  fs_store_close(ctx->user_db);
  fs_store_close(ctx->defaults_db);
  free(ctx->compile_log);
  free(ctx);
}
