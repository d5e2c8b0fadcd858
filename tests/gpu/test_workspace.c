/*
** test_workspace.c: the context's workspace grows without running out of
** growths, and a growth that fails leaves the prepared shapes as they were.
**
**  1. fs_prepare of one shape (bf16, D=1024, V=32000, B=64) with num_samples
**     1, 2, ..., 48: every call succeeds (each grows the workspace, which
**     retired a buffer per growth and failed at the 33rd, num_samples 35,
**     before it grew geometrically), with at most 8 buffers retired.
**  2. fs_prepare at B=24576 in a new context (every bucket up to it, one
**     allocation): succeeds (it walked ~100 buckets, one growth each, and
**     failed).
**  3. In a third context, B=64 prepared, then B=16384 (every plan loaded):
**     with the GPU's memory taken (4 GB allocations until one fails), the
**     same shape at 65535 samples, which needs tens of GB, fails with
**     FS_OUT_OF_MEMORY and a message naming the workspace, and the workspace
**     is unchanged: B=64 with one sample is still prepared, so (the memory
**     given back) it is captured in a CUDA graph, and the graph's replay
**     writes every token, in range.
** Also a `cpu` test, cpu/fake_workspace: under the fake driver of
** tests/fakecuda (FS_FAKE_CUDA set), which runs no kernel, all but the
** replay's outputs are checked.
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
  const int fake = gu_fake_driver(); /* cpu/fake_workspace: no kernel runs */
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

  /* 2. a large batch, in a context of its own (one that part 1 grew would
  ** need no more growths) */
  fs_context *c2 = NULL;
  int st = fs_context_create(0, &c2);
  REQUIRE(st == FS_OK);
  s.num_samples = 1;
  p = problem(dH, dW, BMAX);
  st = fs_prepare(c2, &p, &s);
  CHECK_MSG(st == FS_OK, "fs_prepare B=%d: %s (%d): %s", BMAX, fs_status_string(st), st,
            fs_last_error(c2));
  printf("2. B=%d prepared: %d buffers retired, workspace %zu bytes\n", BMAX, c2->n_retired,
         c2->workspace_bytes);
  fs_context_destroy(c2);

  /* 3. a growth that cannot succeed, in a context of its own (whose one
  ** growth so far leaves it far from the limit on growths) */
  fs_context *c3 = NULL;
  st = fs_context_create(0, &c3);
  REQUIRE(st == FS_OK);
  p = problem(dH, dW, 64);
  s.num_samples = 1;
  st = fs_prepare(c3, &p, &s);
  CHECK_MSG(st == FS_OK, "fs_prepare B=64 in a new context: %s", fs_last_error(c3));
  /* the plans of every bucket up to B=16384 loaded first (their modules take
  ** memory too), with the workspace for one sample */
  p = problem(dH, dW, 16384);
  st = fs_prepare(c3, &p, &s);
  CHECK_MSG(st == FS_OK, "fs_prepare B=16384 in the new context: %s", fs_last_error(c3));
  const CUdeviceptr ws = c3->workspace;
  const size_t wsb = c3->workspace_bytes;
  const int retired = c3->n_retired;
  enum { NHOG = 64 };
  CUdeviceptr hog[NHOG];
  int nhog = 0;
  gu_push(c3);
  while (nhog < NHOG && c3->cu->cuMemAlloc(&hog[nhog], (size_t)4 << 30) == CUDA_SUCCESS) nhog++;
  gu_pop(c3);
  p = problem(dH, dW, 16384);
  s.num_samples = 65535;
  st = fs_prepare(c3, &p, &s);
  gu_push(c3);
  for (int i = 0; i < nhog; i++) GU_CU(c3, c3->cu->cuMemFree(hog[i]));
  gu_pop(c3);
  const char *msg = fs_last_error(c3);
  CHECK_MSG(st == FS_OUT_OF_MEMORY && strstr(msg, "workspace"),
            "fs_prepare B=16384 num_samples=65535: %s (%d): %s", fs_status_string(st), st, msg);
  CHECK_MSG(c3->workspace == ws && c3->workspace_bytes == wsb && c3->n_retired == retired,
            "the failed growth changed the workspace (%zu -> %zu bytes, %d -> %d retired)", wsb,
            c3->workspace_bytes, retired, c3->n_retired);
  printf("3. with %d GB taken, B=16384 num_samples=65535: %s: %s\n", 4 * nhog,
         fs_status_string(st), msg);

  p = problem(dH, dW, 64);
  s.num_samples = 1;
  gu_outputs o;
  gu_outputs_alloc(c3, &o, 64, 0, 0);
  gu_outputs_poison(c3, &o);
  CUstream stream;
  gu_push(c3);
  GU_CU(c3, c3->cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  GU_CU(c3, c3->cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  gu_pop(c3);
  fs_outputs out = gu_outputs_api(&o);
  st = fs_sample(c3, &p, &s, &out, (void *)stream);
  CUgraph graph = NULL;
  gu_push(c3);
  const CUresult er = c3->cu->cuStreamEndCapture(stream, &graph);
  gu_pop(c3);
  CHECK_MSG(st == FS_OK && er == CUDA_SUCCESS && graph,
            "capturing B=64 after the failed growth: %s (%d): %s; end capture %d",
            fs_status_string(st), st, fs_last_error(c3), (int)er);
  if (st == FS_OK && er == CUDA_SUCCESS && graph) {
    CUgraphExec exec;
    gu_push(c3);
#if CUDA_VERSION >= 12000
    GU_CU(c3, c3->cu->cuGraphInstantiate(&exec, graph, 0));
#else
    GU_CU(c3, c3->cu->cuGraphInstantiate(&exec, graph, NULL, NULL, 0));
#endif
    GU_CU(c3, c3->cu->cuGraphLaunch(exec, stream));
    GU_CU(c3, c3->cu->cuStreamSynchronize(stream));
    GU_CU(c3, c3->cu->cuGraphExecDestroy(exec));
    GU_CU(c3, c3->cu->cuGraphDestroy(graph));
    gu_pop(c3);
    if (!fake) {
      gu_outputs_fetch(c3, &o);
      gu_outputs_check(&o, "the graph's replay");
      long out_of_range = 0;
      for (int i = 0; i < 64; i++) out_of_range += o.h_tokens[i] < 0 || o.h_tokens[i] >= TV;
      CHECK_MSG(out_of_range == 0, "%ld tokens out of [0, %d)", out_of_range, TV);
    }
    printf("3. B=64 captured and replayed after it%s\n",
           fake ? " (the fake driver runs no kernel: outputs not checked)" : ": 64 tokens written");
  }
  gu_push(c3);
  c3->cu->cuStreamDestroy(stream);
  gu_pop(c3);
  gu_outputs_free(c3, &o);
  fs_context_destroy(c3);
  gu_free(ctx, dH);
  gu_free(ctx, dW);
  fs_context_destroy(ctx);
  return fs_test_done("test_workspace");
}
