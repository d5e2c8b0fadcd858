/*
** test_workspace.c: the context's workspace grows without running out of
** growths, and a growth that fails leaves the prepared shapes as they were.
**
**  1. fs_prepare of one shape (bf16, D=1024, V=32000, B=64) with num_samples
**     1, 2, ..., 48: every call succeeds (each grows the workspace, which
**     retired a buffer per growth and failed at the 33rd, num_samples 35,
**     before it grew geometrically), with at most 8 buffers retired.
**  2. fs_prepare at B=24576 (every bucket up to it, one allocation): succeeds
**     (it walked ~100 buckets, one growth each, and failed).
**  3. With the GPU's memory taken (4 GB allocations until one fails), a
**     shape that needs tens of GB (B=16384, num_samples=65535) fails with
**     FS_OUT_OF_MEMORY and a message naming the workspace, and the workspace
**     is unchanged: B=64 with one sample is still prepared, so (the memory
**     given back) it is captured in a CUDA graph, and the graph's replay
**     writes every token, in range.
*/
#include "gpu_util.h"

#include <stdio.h>
#include <string.h>

#define TD 1024
#define TV 32000

static fs_problem problem(CUdeviceptr dH, CUdeviceptr dW, int B) {
  fs_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B;
  p.hidden = TD;
  p.vocab = TV;
  p.dtype = FS_DTYPE_BF16;
  p.hidden_states = gu_ptr(dH);
  p.weight = gu_ptr(dW);
  return p;
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  setenv("FS_TUNING_DB", "off", 1);
  const int BMAX = 24576;
  CUdeviceptr dH = gu_alloc(ctx, (size_t)BMAX * TD * 2), dW = gu_alloc(ctx, (size_t)TV * TD * 2);
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuMemsetD8(dH, 0x3c, (size_t)BMAX * TD * 2)); /* bf16 0x3c3c ~ 0.0115 */
  GU_CU(ctx, ctx->cu->cuMemsetD8(dW, 0x3c, (size_t)TV * TD * 2));
  gu_pop(ctx);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = 1.0f;
  s.seed = 5;

  /* 1. growing num_samples */
  fs_problem p = problem(dH, dW, 64);
  int failed_at = 0;
  for (int S = 1; S <= 48 && !failed_at; S++) {
    s.num_samples = S;
    const int st = fs_prepare(ctx, &p, &s);
    if (st != FS_OK) {
      failed_at = S;
      CHECK_MSG(0, "fs_prepare B=64 num_samples=%d: %s (%d): %s", S, fs_status_string(st), st,
                fs_last_error(ctx));
    }
  }
  CHECK_MSG(ctx->n_retired <= 8, "%d workspaces retired for 48 growths (%zu bytes now)",
            ctx->n_retired, ctx->workspace_bytes);
  printf("1. num_samples 1..48 prepared: %d buffers retired, workspace %zu bytes\n",
         ctx->n_retired, ctx->workspace_bytes);

  /* 2. a large batch */
  s.num_samples = 1;
  p = problem(dH, dW, BMAX);
  int st = fs_prepare(ctx, &p, &s);
  CHECK_MSG(st == FS_OK, "fs_prepare B=%d: %s (%d): %s", BMAX, fs_status_string(st), st,
            fs_last_error(ctx));
  printf("2. B=%d prepared: %d buffers retired, workspace %zu bytes\n", BMAX, ctx->n_retired,
         ctx->workspace_bytes);

  /* 3. a growth that cannot succeed */
  const CUdeviceptr ws = ctx->workspace;
  const size_t wsb = ctx->workspace_bytes;
  const int retired = ctx->n_retired;
  enum { NHOG = 64 };
  CUdeviceptr hog[NHOG];
  int nhog = 0;
  gu_push(ctx);
  while (nhog < NHOG && ctx->cu->cuMemAlloc(&hog[nhog], (size_t)4 << 30) == CUDA_SUCCESS) nhog++;
  gu_pop(ctx);
  p = problem(dH, dW, 16384);
  s.num_samples = 65535;
  st = fs_prepare(ctx, &p, &s);
  gu_push(ctx);
  for (int i = 0; i < nhog; i++) GU_CU(ctx, ctx->cu->cuMemFree(hog[i]));
  gu_pop(ctx);
  const char *msg = fs_last_error(ctx);
  CHECK_MSG(st == FS_OUT_OF_MEMORY && strstr(msg, "workspace"),
            "fs_prepare B=16384 num_samples=65535: %s (%d): %s", fs_status_string(st), st, msg);
  CHECK_MSG(ctx->workspace == ws && ctx->workspace_bytes == wsb && ctx->n_retired == retired,
            "the failed growth changed the workspace (%zu -> %zu bytes, %d -> %d retired)", wsb,
            ctx->workspace_bytes, retired, ctx->n_retired);
  printf("3. with %d GB taken, B=16384 num_samples=65535: %s: %s\n", 4 * nhog,
         fs_status_string(st), msg);

  p = problem(dH, dW, 64);
  s.num_samples = 1;
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, 64, 0, 0);
  gu_outputs_poison(ctx, &o);
  CUstream stream;
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  GU_CU(ctx, ctx->cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  gu_pop(ctx);
  fs_outputs out = gu_outputs_api(&o);
  st = fs_sample(ctx, &p, &s, &out, (void *)stream);
  CUgraph graph = NULL;
  gu_push(ctx);
  const CUresult er = ctx->cu->cuStreamEndCapture(stream, &graph);
  gu_pop(ctx);
  CHECK_MSG(st == FS_OK && er == CUDA_SUCCESS && graph,
            "capturing B=64 after the failed growth: %s (%d): %s; end capture %d",
            fs_status_string(st), st, fs_last_error(ctx), (int)er);
  if (st == FS_OK && er == CUDA_SUCCESS && graph) {
    CUgraphExec exec;
    gu_push(ctx);
#if CUDA_VERSION >= 12000
    GU_CU(ctx, ctx->cu->cuGraphInstantiate(&exec, graph, 0));
#else
    GU_CU(ctx, ctx->cu->cuGraphInstantiate(&exec, graph, NULL, NULL, 0));
#endif
    GU_CU(ctx, ctx->cu->cuGraphLaunch(exec, stream));
    GU_CU(ctx, ctx->cu->cuStreamSynchronize(stream));
    GU_CU(ctx, ctx->cu->cuGraphExecDestroy(exec));
    GU_CU(ctx, ctx->cu->cuGraphDestroy(graph));
    gu_pop(ctx);
    gu_outputs_fetch(ctx, &o);
    gu_outputs_check(&o, "the graph's replay");
    long out_of_range = 0;
    for (int i = 0; i < 64; i++) out_of_range += o.h_tokens[i] < 0 || o.h_tokens[i] >= TV;
    CHECK_MSG(out_of_range == 0, "%ld tokens out of [0, %d)", out_of_range, TV);
    printf("3. B=64 captured and replayed after it: 64 tokens written, first %d\n",
           (int)o.h_tokens[0]);
  }
  gu_push(ctx);
  ctx->cu->cuStreamDestroy(stream);
  gu_pop(ctx);
  gu_outputs_free(ctx, &o);
  gu_free(ctx, dH);
  gu_free(ctx, dW);
  fs_context_destroy(ctx);
  return fs_test_done("test_workspace");
}
