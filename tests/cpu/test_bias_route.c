/*
** test_bias_route: which path a call with a logit bias takes
** (fs_filter_path, runtime/sample.c; since 0.3.11).  Needs no GPU.
**  - above FS_BIAS_SHORT (1,024) entries a row: the filters' path, at any B,
**    greedy or not, on one GPU and on a tensor-parallel rank;
**  - up to 1,024, below B = 16: the fused kernel's;
**  - from B = 16 on one GPU, the cost model (perf-notes 41b) at its fitted
**    shapes: Qwen3-8B (D 4096, V 151,936) B = 64 fused at 256 entries and
**    long at 512 (crossover ~460), B = 256 fused at 200 and long at 300
**    (~265); Llama 3 70B (8192, 128,256) B = 64 long at 300 (~268); Qwen3-0.6B
**    (1024, 151,936) B = 256 fused at 400, long at 600 (~482);
**  - a tensor-parallel rank (model 0) ignores the model: fused up to 1,024;
**  - FS_BIAS_SHORT from the environment (ctx->bias_short_env) turns the
**    model off and sets the threshold (0: every bias long);
**  - filters send sampled calls to the filters' path whatever the bias;
**    greedy calls with filters and a short bias stay fused;
**  - no bias, no filters: the fused kernel's.
** Teeth: each case states the path it must take, both ways are asserted.
*/
#include "fs_test.h"

#include "fs_int.h"

#include <stdlib.h>

static int route(fs_context *ctx, int D, int V, int B, int n, float T, int filter, int model) {
  fs_problem p = {0};
  p.hidden = D;
  p.vocab = V;
  p.batch = B;
  fs_sampling s = {0};
  s.temperature = T;
  s.num_samples = 1;
  fs_opts m = {0};
  m.bias_count = n;
  m.filter = filter;
  return fs_filter_path(ctx, &p, &s, &m, model);
}

int main(void) {
  fs_context *ctx = calloc(1, sizeof *ctx);
  REQUIRE(ctx);
  ctx->bias_short = FS_BIAS_SHORT;
  static const struct {
    int D, V, B, n;
    float T;
    int filter, model, want;
    const char *why;
  } cases[] = {
      {4096, 151936, 1, 1025, 1.0f, 0, 1, 1, "1025 entries at B = 1"},
      {4096, 151936, 1, 16384, 0.0f, 0, 1, 1, "16384 entries, greedy"},
      {4096, 151936, 3, 1025, 1.0f, 0, 0, 1, "1025 entries on a rank"},
      {4096, 151936, 1, 1024, 1.0f, 0, 1, 0, "1024 entries at B = 1"},
      {4096, 151936, 15, 1024, 1.0f, 0, 1, 0, "1024 entries at B = 15 (below the model)"},
      {4096, 151936, 64, 256, 1.0f, 0, 1, 0, "Qwen3-8B B = 64, 256 entries"},
      {4096, 151936, 64, 512, 1.0f, 0, 1, 1, "Qwen3-8B B = 64, 512 entries"},
      {4096, 151936, 256, 200, 1.0f, 0, 1, 0, "Qwen3-8B B = 256, 200 entries"},
      {4096, 151936, 256, 300, 0.0f, 0, 1, 1, "Qwen3-8B B = 256, 300 entries, greedy"},
      {8192, 128256, 64, 300, 1.0f, 0, 1, 1, "Llama 3 70B B = 64, 300 entries"},
      {8192, 128256, 64, 200, 1.0f, 0, 1, 0, "Llama 3 70B B = 64, 200 entries"},
      {1024, 151936, 256, 400, 1.0f, 0, 1, 0, "Qwen3-0.6B B = 256, 400 entries"},
      {1024, 151936, 256, 600, 1.0f, 0, 1, 1, "Qwen3-0.6B B = 256, 600 entries"},
      {4096, 151936, 256, 1024, 1.0f, 0, 0, 0, "a rank at B = 256, 1024 entries"},
      {4096, 151936, 8, 4, 1.0f, 1, 1, 1, "filters, a sampled call"},
      {4096, 151936, 8, 4, 0.0f, 1, 1, 0, "filters, a greedy call"},
      {4096, 151936, 256, 0, 1.0f, 0, 1, 0, "no bias at B = 256"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int got = route(ctx, cases[i].D, cases[i].V, cases[i].B, cases[i].n, cases[i].T,
                          cases[i].filter, cases[i].model);
    CHECK_MSG(got == cases[i].want, "%s: the %s path, want the %s", cases[i].why,
              got ? "filters'" : "fused", cases[i].want ? "filters'" : "fused");
  }
  /* FS_BIAS_SHORT from the environment: the model off, its threshold */
  ctx->bias_short_env = 1;
  CHECK_MSG(!route(ctx, 4096, 151936, 64, 512, 1.0f, 0, 1), "FS_BIAS_SHORT=1024 set: the "
            "model must be off (512 entries at B = 64 fused)");
  ctx->bias_short = 0;
  CHECK_MSG(route(ctx, 4096, 151936, 1, 1, 1.0f, 0, 1) && route(ctx, 4096, 151936, 3, 1, 1.0f, 0, 0),
            "FS_BIAS_SHORT=0: every bias takes the filters' path");
  ctx->bias_short = 16384;
  CHECK_MSG(!route(ctx, 4096, 151936, 256, 4096, 1.0f, 0, 1), "FS_BIAS_SHORT=16384: 4096 "
            "entries fused");
  free(ctx);
  return fs_test_done("test_bias_route");
}
