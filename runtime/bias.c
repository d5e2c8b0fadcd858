/*
** bias.c: calls with a logit bias (fs_options.logit_bias_*).
**
** Before the fused kernel, fsamp_bias_prep_* writes its token mask (a copy
** of the call's, or all ones, with every row's biased ids cleared, so that it
** draws over the other tokens) and each entry's logit from its W row (a warp
** an entry, into the workspace after the mask copy), with its score: the
** logit under the row's repetition penalty (fs_options.repetition_penalty,
** since 0.3.9) plus the token's values.  After it,
** fsamp_bias_merge (a block per row) scores the entries with the same noise
** and keeps the larger key per (row, sample): into the kernel's local
** outputs, which tp.c reduces over ranks, or on one GPU into the call's
** outputs.  The kernels come from templates/fsamp_bias.cu, compiled by NVRTC
** into a module of the context's own on its first call with a bias.
** Long lists take the filters' path (filter.c, fs_filter_path) instead,
** where fsamp_bias_dedup (fs_bias_dedup) makes each row's entries distinct.
** Under FS_NOISE_GROUP16 (since 0.3.17; ctx->noise at the call) the same
** steps take whole groups of 16 ids: fsamp_bias_gprep_* clears each biased
** id's group from the mask and writes the 16 logits of each group a row's
** entries touch, fsamp_bias_gmerge folds those groups as the fused kernels
** do (a list of up to FS_BIAS_SHORT entries: validate.c).
*/
#include "fs_int.h"
#include "embedded.h"
#include "fs_nvrtc.h"
#include "fs_params.h"

#include <stdio.h>
#include <string.h>

int fs_bias_compile(const char *target, fs_cubin *out, char *err, size_t errlen) {
  return fs_own_compile(FS_BIAS_TEMPLATE, NULL, target, out, err, errlen);
}

/* Compiles and loads the module once per context: ctx->bias_module is set
** only once every step has succeeded (a failed one is tried again by the
** next call). */
int fs_bias_load(fs_context *ctx) {
  static const char *const names[] = {"fsamp_bias_prep_bf16",  "fsamp_bias_prep_f16",
                                      "fsamp_bias_merge",      "fsamp_bias_dedup",
                                      "fsamp_bias_gprep_bf16", "fsamp_bias_gprep_f16",
                                      "fsamp_bias_gmerge"};
  CUfunction fns[7];
  CUmodule mod = NULL;
  if (ctx->bias_module) return FS_OK;
  FS_TRY(fs_own_module(ctx, FS_BIAS_TEMPLATE, NULL, "the logit bias's kernels", names, 7, &mod,
                       fns));
  /* its sort's words at FS_MAX_LOGIT_BIAS entries (64 KB: every target
  ** from sm_80 has that much a block) */
  const CUresult r = ctx->cu->cuFuncSetAttribute(
      fns[3], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 4 * FS_MAX_LOGIT_BIAS);
  if (r) {
    ctx->cu->cuModuleUnload(mod);
    return fs_cu_fail(ctx, r, "cuFuncSetAttribute(fsamp_bias_dedup)", __FILE__, __LINE__);
  }
  ctx->bias_fn[0] = fns[0];
  ctx->bias_fn[1] = fns[1];
  ctx->bias_fn[2] = fns[4];
  ctx->bias_fn[3] = fns[5];
  ctx->bias_merge_fn[0] = fns[2];
  ctx->bias_merge_fn[1] = fns[6];
  ctx->bias_dedup_fn = fns[3];
  ctx->bias_module = mod;
  return FS_OK;
}

int fs_bias_key_bits(long long V, int count) {
  int ib = 1;
  while ((1ll << ib) < count) ib++;
  return V > 0 && (((unsigned long long)(V - 1) << ib) | (unsigned)(count - 1)) < 0xffffffffull
             ? ib : 0;
}

int fs_bias_dedup(fs_context *ctx, const fs_problem *p, const fs_opts *m, CUdeviceptr tok_out,
                  CUdeviceptr val_out, CUstream stream) {
  /* fsamp_bias_dedup's words: a power of two, DD_E (16) a thread, at least
  ** a warp's */
  int count = m->bias_count, np = 512, off = (int)p->vocab_offset, V = p->vocab;
  int ibits = fs_bias_key_bits(V, count);
  if (!ibits) /* fs_validate_options checks it above FS_BIAS_SHORT; FS_BIAS_SHORT=0 here */
    return fs_err(ctx, FS_INVALID_ARGUMENT, "options->logit_bias_count=%d at V=%d: the long "
                  "lists' path needs (V - 1) x 2^ceil(log2 count) + count - 1 < 2^32 - 1",
                  count, V);
  while (np < count) np *= 2;
  const int32_t *tokens = m->bias_tokens;
  const float *values = m->bias_values;
  void *args[] = {(void *)&tokens, (void *)&values, &count, &off, &V, &np, &ibits,
                  &tok_out, &val_out};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->bias_dedup_fn, (unsigned)p->batch, 1, 1,
                                       (unsigned)(np / 16), 1, 1, (unsigned)(4 * np), stream,
                                       args, NULL);
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_bias_dedup)", __FILE__, __LINE__) : FS_OK;
}

/* The words of the call's ids, [first, first + span) of a row of the
** caller's mask: a row of the fused kernel's mask holds just these. */
static void mask_span(const fs_problem *p, int *first, int *span) {
  *first = (int)(p->vocab_offset / 32);
  *span = (int)((p->vocab_offset + p->vocab + 31) / 32) - *first;
}

/* The entries' logits (float2; under FS_NOISE_GROUP16 16 of them an entry,
** its group's) and tokens after the mask copy at mask_at. */
static CUdeviceptr entries_at(const fs_problem *p, CUdeviceptr mask_at) {
  int first, span;
  mask_span(p, &first, &span);
  return mask_at + ((size_t)p->batch * (size_t)span * 4 + 15) / 16 * 16;
}

/* The bytes of an entry's logits: one float2, or a group's 16. */
static size_t entry_bytes(const fs_context *ctx) {
  return ctx->noise == FS_NOISE_GROUP16 ? 16 * 8 : 8;
}

int fs_bias_ready(fs_context *ctx, const fs_problem *p, int count, size_t need,
                  CUstream stream, CUdeviceptr *mask_at) {
  const size_t at = (need + 15) / 16 * 16;
  const size_t bytes =
      (size_t)entries_at(p, at) + (size_t)p->batch * (size_t)count * (entry_bytes(ctx) + 4);
  if (!ctx->bias_module || bytes > ctx->workspace_bytes) {
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    FS_CHECK_CU(ctx, ctx->cu->cuStreamIsCapturing(stream, &cs));
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE)
      return fs_err(ctx, FS_NOT_PREPARED,
                    "stream is capturing and options->logit_bias_count=%d at B=%d, V=%d, "
                    "vocab_offset=%lld: the first call with a logit bias %s; make one such "
                    "call before capture", count, (int)p->batch, (int)p->vocab,
                    (long long)p->vocab_offset,
                    ctx->bias_module ? "at this size grows the workspace"
                                     : "on a context compiles its kernels");
    FS_TRY(fs_bias_load(ctx));
    FS_TRY(fs_workspace_reserve(ctx, bytes));
  }
  *mask_at = ctx->workspace + at;
  return FS_OK;
}

int fs_bias_prep(fs_context *ctx, const fs_problem *p, const fs_sampling *s, const fs_opts *m,
                 CUdeviceptr mask_at, fs_opts *fused, CUstream stream) {
  fs_params prm;
  fs_params_call(&prm, p, s, m);
  const int32_t *tokens = m->bias_tokens;
  const float *values = m->bias_values;
  int count = m->bias_count, first, span;
  mask_span(p, &first, &span);
  long long stride = span;
  /* a row's words [first, first + span) at mask_at + row * span: the base
  ** that global ids index lies first words before (an address never read) */
  CUdeviceptr base = mask_at - (CUdeviceptr)first * 4;
  CUdeviceptr zz = entries_at(p, mask_at),
              etok = zz + (size_t)p->batch * (size_t)count * entry_bytes(ctx);
  /* a warp an entry (under FS_NOISE_GROUP16 an id of its group: 16 an
  ** entry), FS_BIAS_SHARE (2048) words of the mask a block */
  const int warps = ctx->noise == FS_NOISE_GROUP16 ? 16 * count : count;
  const int bx = (warps + 3) / 4 > (span + 2047) / 2048 ? (warps + 3) / 4 : (span + 2047) / 2048;
  float rep = m->rep; /* the repetition penalty, applied to the entries' logits */
  const float *reps = m->reps;
  void *args[] = {&prm, (void *)&tokens, (void *)&values, &count, &first, &span,
                  &stride, &base, &zz, &etok, &rep, (void *)&reps};
  const int fn = (p->dtype == FS_DTYPE_FP16) + 2 * (ctx->noise == FS_NOISE_GROUP16);
  CUresult r = ctx->cu->cuLaunchKernel(ctx->bias_fn[fn], (unsigned)bx,
                                       (unsigned)p->batch, 1, 128, 1, 1, 0, stream, args, NULL);
  if (r) return fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_bias_prep)", __FILE__, __LINE__);
  *fused = *m;
  fused->words = (const uint32_t *)(uintptr_t)base;
  fused->stride = stride;
  return FS_OK;
}

/* fsamp_bias_merge's outputs (templates/fsamp_bias.cu): tokens NULL for a
** rank's local winners. */
typedef struct bias_out {
  int32_t *tokens;
  float *logits;
  uint64_t *keys;
  float *logprobs;
} bias_out;

int fs_bias_merge(fs_context *ctx, const fs_problem *p, const fs_sampling *s, const fs_opts *m,
                  CUdeviceptr mask_at, CUdeviceptr keys, CUdeviceptr logits,
                  const fs_outputs *final, CUstream stream) {
  fs_params prm;
  fs_params_call(&prm, p, s, m);
  int count = m->bias_count;
  CUdeviceptr zz = entries_at(p, mask_at),
              etok = zz + (size_t)p->batch * (size_t)count * entry_bytes(ctx);
  bias_out out = {NULL, NULL, NULL, NULL};
  if (final) out = (bias_out){final->tokens, final->logits, final->keys, m->logprobs};
  void *args[] = {&prm, &count, &zz, &etok, &keys, &logits, &out};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->bias_merge_fn[ctx->noise == FS_NOISE_GROUP16],
                                       (unsigned)p->batch, 1, 1, 128, 1, 1, 0, stream, args,
                                       NULL);
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_bias_merge)", __FILE__, __LINE__) : FS_OK;
}
