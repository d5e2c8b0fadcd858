/*
** test_module_retry.c: a module of the context's own whose set-up fails
** after it loaded is not kept half set up: the call fails with FS_CUDA
** naming the driver call, the context holds no module, and the next call
** loads it again and succeeds.  Needs tests/fakecuda's injected failure
** (FS_FAKE_CUDA_FAIL_ONCE, set by cpu/fake_retry_filter and
** cpu/fake_retry_bias in tests/CMakeLists.txt); skips elsewhere.
**  - cuOccupancyMaxActiveClusters:fsamp_filter: a top-k call (the filters'
**    module, filter.c), ctx->filter_module;
**  - cuFuncSetAttribute:fsamp_bias_dedup: a bias of FS_BIAS_SHORT + 1
**    entries a row (the bias module, bias.c), ctx->bias_module.
** Without the fix the module stayed set after the failure (and a bias
** dedup launched without its shared-memory attribute ever after).
*/
#include "gpu_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  const char *inject = getenv("FS_FAKE_CUDA_FAIL_ONCE");
  if (!inject || !gu_fake_driver()) {
    printf("SKIP test_module_retry: needs tests/fakecuda's FS_FAKE_CUDA_FAIL_ONCE (run as "
           "cpu/fake_retry_filter, cpu/fake_retry_bias)\n");
    return 77;
  }
  fs_context *ctx = fs_test_gpu_or_skip();
  const int bias = strstr(inject, "fsamp_bias_dedup") != NULL;
  enum { B = 2, D = 64, V = 1000 };
  gu_lmhead lm;
  gu_lmhead_init(&lm, B, D, V, FS_DTYPE_BF16, 0, 0, 0, gu_w_scale(D, 1.0), 0x5e7ull);
  gu_lmhead_upload(ctx, &lm);
  const int nb = bias ? FS_BIAS_SHORT + 1 : 0;
  int32_t *tok = gu_malloc(sizeof(int32_t) * B * (nb ? nb : 1));
  for (int i = 0; i < B * nb; i++) tok[i] = i % V;
  const CUdeviceptr dtok = gu_upload_new(ctx, tok, sizeof(int32_t) * B * (nb ? nb : 1));
  const CUdeviceptr dval = gu_alloc(ctx, sizeof(float) * B * (nb ? nb : 1));
  fs_options opt = {.size = sizeof opt};
  if (bias) {
    opt.logit_bias_tokens = (const int32_t *)gu_ptr(dtok);
    opt.logit_bias_values = (const float *)gu_ptr(dval);
    opt.logit_bias_count = nb;
  } else {
    opt.top_k = 5;
  }
  fs_sampling s = {1.0f, NULL, 1, 7ull, NULL, 0ull, NULL};
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, B, 1, 0);
  const fs_problem dp = gu_problem(&lm, 1);
  const fs_outputs out = gu_outputs_api(&o);
  const char *call = bias ? "cuFuncSetAttribute(fsamp_bias_dedup)"
                          : "cuOccupancyMaxActiveClusters(fsamp_filter)";
  const int st = fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL);
  printf("%s injected -> %s: %s\n", inject, fs_status_string(st), fs_last_error(ctx));
  CHECK_MSG(st == FS_CUDA && fs_test_has(fs_last_error(ctx), call), "first call: %s: %s",
            fs_status_string(st), fs_last_error(ctx));
  CHECK_MSG((bias ? ctx->bias_module : ctx->filter_module) == NULL,
            "the module is kept after its set-up failed");
  CHECK_MSG(fs_sample_ex(ctx, &dp, &s, &opt, &out, NULL) == FS_OK, "second call: %s",
            fs_last_error(ctx));
  CHECK_MSG((bias ? ctx->bias_module : ctx->filter_module) != NULL,
            "the second call did not load the module");
  printf("ok: the module loaded again on the next call\n");
  free(tok);
  gu_free(ctx, dtok);
  gu_free(ctx, dval);
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
  fs_context_destroy(ctx);
  return fs_test_done("test_module_retry");
}
