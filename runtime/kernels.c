/*
** kernels.c: turns a variant into a loaded kernel: generate the source
** (generator), compile it (NVRTC), load the cubin (driver), look up its
** functions and set their shared-memory limits.  Loaded kernels are kept on
** the context by name.  A compile failure keeps the whole story (name,
** target, NVRTC log, source) in the context's compile log.
*/
#include "fs_int.h"
#include "embedded.h"
#include "fs_nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void keep_compile_failure(fs_context *ctx, const fs_variant *v,
                                 const char *src, const fs_cubin *c) {
  const char *log = c->log ? c->log : "";
  size_t n = strlen(v->name) + strlen(log) + strlen(src) + 256;
  char *text = malloc(n);
  if (!text) return;
  snprintf(text, n, "variant: %s\ntarget: %s\noptions: -std=c++17 -Xptxas -v\n"
           "--- NVRTC log ---\n%s\n--- source ---\n%s", v->name, v->target, log, src);
  fs_set_compile_log(ctx, text);
  free(text);
}

/* The kernels that finish a call outside its variant (templates/
** fsamp_reduce.cu), compiled and loaded once per context with its first
** variant, so that whatever can launch a variant can launch them. */
static int reduce_load(fs_context *ctx) {
  static const char *const names[] = {"fsamp_reduce", "fsamp_finalize", "fsamp_tp_lse",
                                      "fsamp_tp_logprobs"};
  CUfunction fns[4];
  if (ctx->reduce_module) return FS_OK;
  FS_TRY(fs_own_module(ctx, FS_REDUCE_TEMPLATE, NULL, "the reductions' kernels", names, 4,
                       &ctx->reduce_module, fns));
  ctx->reduce_fn = fns[0];
  ctx->finalize_fn = fns[1];
  ctx->tp_lse_fn = fns[2];
  ctx->tp_logprobs_fn = fns[3];
  return FS_OK;
}

/* Loads a cubin into a new fs_kernel for v. */
static int load_cubin(fs_context *ctx, const fs_variant *v, const void *cubin,
                      fs_kernel **out) {
  const fs_cu_api *cu = ctx->cu;
  FS_TRY(reduce_load(ctx));
  fs_kernel *k = calloc(1, sizeof *k);
  if (!k) return fs_err(ctx, FS_OUT_OF_MEMORY, "out of memory for a kernel");
  k->v = *v;
  CUresult r = cu->cuModuleLoadData(&k->module, cubin);
  if (r != CUDA_SUCCESS) {
    free(k);
    return fs_cu_fail(ctx, r, "cuModuleLoadData", __FILE__, __LINE__);
  }
  int st = FS_OK;
  if ((r = cu->cuModuleGetFunction(&k->main_fn, k->module, "fsamp_main")) ||
      (r = cu->cuFuncSetAttribute(k->main_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  v->smem)) ||
      (r = cu->cuFuncGetAttribute(&k->registers, CU_FUNC_ATTRIBUTE_NUM_REGS, k->main_fn)) ||
      (r = cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&k->blocks_per_sm, k->main_fn,
                                                           v->threads, (size_t)v->smem)))
    st = fs_cu_fail(ctx, r, "loading kernel functions", __FILE__, __LINE__);
  if (!st && k->blocks_per_sm < 1)
    st = fs_err(ctx, FS_UNSUPPORTED, "variant %s: %d threads and %d bytes of shared memory "
                "do not fit on %s", v->name, v->threads, v->smem, ctx->device_name);
  if (!st && v->cluster > 1) {
    /* how many clusters of v->cluster CTAs are co-resident: the persistent
    ** grid is sized from it (fs_num_chunks) */
    CUlaunchAttribute at;
    memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = (unsigned)v->cluster;
    at.value.clusterDim.y = at.value.clusterDim.z = 1;
    CUlaunchConfig lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDimX = (unsigned)(v->cluster * ctx->sm_count);
    lc.gridDimY = lc.gridDimZ = 1;
    lc.blockDimX = (unsigned)v->threads;
    lc.blockDimY = lc.blockDimZ = 1;
    lc.sharedMemBytes = (unsigned)v->smem;
    lc.attrs = &at;
    lc.numAttrs = 1;
    if ((r = cu->cuOccupancyMaxActiveClusters(&k->max_clusters, k->main_fn, &lc)))
      st = fs_cu_fail(ctx, r, "cuOccupancyMaxActiveClusters", __FILE__, __LINE__);
    else if (k->max_clusters < 1)
      st = fs_err(ctx, FS_UNSUPPORTED, "variant %s: no cluster of %d CTAs fits on %s", v->name,
                  v->cluster, ctx->device_name);
  }
  if (st) {
    cu->cuModuleUnload(k->module);
    free(k);
    return st;
  }
  *out = k;
  return FS_OK;
}

fs_kernel *fs_kernel_find(fs_context *ctx, const char *name) {
  for (fs_kernel *k = ctx->kernels; k; k = k->next)
    if (strcmp(k->v.name, name) == 0) return k;
  return NULL;
}

/* Can this GPU run v at all? */
static int check_fits(fs_context *ctx, const fs_variant *v) {
  if (v->arch / 10 != ctx->arch / 10 || v->arch > ctx->arch)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "variant %s is for sm_%d, this GPU is sm_%d",
                  v->name, v->arch, ctx->arch);
  if (v->smem > ctx->max_smem_optin)
    return fs_err(ctx, FS_UNSUPPORTED, "variant %s needs %d bytes of shared memory, %s allows %d",
                  v->name, v->smem, ctx->device_name, ctx->max_smem_optin);
  return FS_OK;
}

int fs_kernel_load_cubin(fs_context *ctx, const fs_variant *v, const void *cubin,
                         fs_kernel **out) {
  fs_kernel *k = fs_kernel_find(ctx, v->name);
  if (!k) {
    FS_TRY(check_fits(ctx, v));
    FS_TRY(load_cubin(ctx, v, cubin, &k));
    k->next = ctx->kernels;
    ctx->kernels = k;
  }
  *out = k;
  return FS_OK;
}

int fs_kernel_load(fs_context *ctx, const fs_variant *v, fs_kernel **out) {
  char err[512];
  if ((*out = fs_kernel_find(ctx, v->name)) != NULL) return FS_OK;
  FS_TRY(check_fits(ctx, v));
  char *src = NULL;
  int st = fs_gen_source(ctx->gen, v, &src, err, sizeof err);
  if (st) return fs_err(ctx, st, "%s", err);
  /* Fault injection for tests: FS_INJECT_COMPILE_ERROR=1 breaks the source. */
  const char *inj = getenv("FS_INJECT_COMPILE_ERROR");
  if (inj && *inj && strcmp(inj, "0")) {
    static const char bad[] = "\n#error injected by FS_INJECT_COMPILE_ERROR\n";
    char *s2 = realloc(src, strlen(src) + sizeof bad);
    if (!s2) {
      free(src);
      return fs_err(ctx, FS_OUT_OF_MEMORY, "out of memory");
    }
    src = strcat(s2, bad);
  }
  fs_cubin c;
  st = fs_nvrtc_compile(v->name, src, v->target, &c, err, sizeof err);
  if (st) {
    keep_compile_failure(ctx, v, src, &c);
    fs_cubin_free(&c);
    free(src);
    return fs_err(ctx, st, "%s", err);
  }
  free(src);
  fs_kernel *k = NULL;
  st = load_cubin(ctx, v, c.data, &k);
  fs_cubin_free(&c);
  if (st) return st;
  k->next = ctx->kernels;
  ctx->kernels = k;
  *out = k;
  return FS_OK;
}

void fs_kernel_unload(fs_context *ctx, fs_kernel *k) {
  fs_kernel **pp;
  for (fs_plan **pl = &ctx->plans; *pl;) {
    int uses = 0;
    for (int m = 0; m < FS_CALL_MODES; m++) uses |= (*pl)->kernel[m] == k;
    if (uses) {
      fs_plan *dead = *pl;
      *pl = dead->next;
      free(dead);
    } else {
      pl = &(*pl)->next;
    }
  }
  for (pp = &ctx->kernels; *pp; pp = &(*pp)->next)
    if (*pp == k) {
      *pp = k->next;
      break;
    }
  CUcontext dummy;
  if (ctx->cu->cuCtxPushCurrent(ctx->cu_ctx) == CUDA_SUCCESS) {
    ctx->cu->cuModuleUnload(k->module);
    ctx->cu->cuCtxPopCurrent(&dummy);
  }
  free(k);
}

int fs_own_compile(const char *tmpl, const char *head, const char *target, fs_cubin *out,
                   char *err, size_t errlen) {
  const fs_embedded_file *f = fs_embedded_find(tmpl);
  memset(out, 0, sizeof *out);
  if (!f) {
    snprintf(err, errlen, "%s is not embedded", tmpl);
    return FS_INTERNAL;
  }
  const char *base = strrchr(tmpl, '/'); /* "templates/fsamp_x.cu": NVRTC's name fsamp_x */
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(base ? base + 1 : tmpl, "."),
           base ? base + 1 : tmpl);
  if (!head) return fs_nvrtc_compile(name, f->data, target, out, err, errlen);
  const size_t n = strlen(head);
  char *src = malloc(n + f->size + 1);
  if (!src) {
    snprintf(err, errlen, "out of memory for %s's source", tmpl);
    return FS_OUT_OF_MEMORY;
  }
  memcpy(src, head, n);
  memcpy(src + n, f->data, f->size);
  src[n + f->size] = 0;
  const int st = fs_nvrtc_compile(name, src, target, out, err, errlen);
  free(src);
  return st;
}

int fs_own_module(fs_context *ctx, const char *tmpl, const char *head, const char *what,
                  const char *const *names, int n, CUmodule *mod, CUfunction *fns) {
  const int a = fs_target_arch(ctx->arch);
  if (!a)
    return fs_err(ctx, FS_UNSUPPORTED, "sm_%d: no kernels are generated for this architecture",
                  ctx->arch);
  char target[16], err[512];
  snprintf(target, sizeof target, "sm_%d%s", a, a == 90 ? "a" : ""); /* generator/fsgen.lua's */
  fs_cubin c;
  int st = fs_own_compile(tmpl, head, target, &c, err, sizeof err);
  if (st) {
    if (c.log) fs_set_compile_log(ctx, c.log);
    fs_cubin_free(&c);
    return fs_err(ctx, st, "%s: %s", what, err);
  }
  CUmodule m = NULL;
  const fs_cu_api *cu = ctx->cu;
  CUresult r = cu->cuModuleLoadData(&m, c.data);
  fs_cubin_free(&c);
  for (int i = 0; r == CUDA_SUCCESS && i < n; i++) r = cu->cuModuleGetFunction(&fns[i], m, names[i]);
  if (r != CUDA_SUCCESS) {
    if (m) cu->cuModuleUnload(m);
    char call[96];
    snprintf(call, sizeof call, "loading %s", what);
    return fs_cu_fail(ctx, r, call, __FILE__, __LINE__);
  }
  *mod = m;
  return FS_OK;
}
