// fs-test-timeout: 300
/*
** test_softcap.c: fs_options.logit_softcap on the GPU.  flashsampling.h:
** with c > 0 every logit z of the call becomes c tanh(z / c) before anything
** reads it (the mask, the temperature, either noise, greedy rows, logprobs
** and the returned logits).
**
** Per case (below), fs_sample_ex with the cap against fs_reference_sample_ex
** with the same options (double logits, capped in double) on the same inputs:
**  - at least 99% of the tokens equal the reference's, and every token that
**    differs is a near-tie: the reference's score of its own winner and the
**    GPU's score of its token (from outputs->keys) are within 1e-4 (1 + |s|);
**  - every returned logit is in [-c, c], and where the token is the
**    reference's, within 2e-5 (1 + |z|) of the reference's logit;
**  - every logprob is z - lse within 2e-5 + 1e-6 |lse| (z the GPU's logit of
**    its token, lse the reference row's log-sum-exp of the capped logits),
**    as test_logprobs checks it;
**  - the cap bites: the same call without it gives other tokens for at least
**    a tenth of the draws (the logits have sd ~2 c, so a kernel that skipped
**    the cap, or capped only some tiles, would fail the 99%).
** Not further out: past |z| ~ 9 c, tanh rounds to 1 in fp32, so such
** logits all cap to c exactly and a greedy row takes the first of them where
** the double reference tells them apart (sd 4 c put ~90 of 5011 tokens
** there: every greedy draw of "mixed" differed, each a near-tie).
** Cases, bf16 and fp16, B = 5 and 37 (with FS_TEST_FAMILY, on that family's
** variant nearest each B; the families' staged tiles are capped in shared
** memory, wt's in registers):
**   plain   V = 1000, D = 256, c = 1, T = 1, one sample, logprobs;
**   mixed   V = 5011, D = 1024, vocab_offset 37, c = 2, per-row temperatures
**           with greedy rows, 3 samples, a token mask of density 1/2;
**   group16 FS_NOISE_GROUP16, V = 5011, D = 256, vocab_offset 48, c = 1.5,
**           T = 0.7, logprobs;
**   tiles   V = 65537, D = 256, c = 3: many tiles per chunk, logprobs.
*/
#include "gpu_family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sc_case {
  const char *name;
  int V, D, offset, S, mixed, group16, logprobs;
  float c, T;
  unsigned long long seed;
} sc_case;

static const sc_case cases[] = {
    {"plain", 1000, 256, 0, 1, 0, 0, 1, 1.0f, 1.0f, 1},
    {"mixed", 5011, 1024, 37, 3, 1, 0, 0, 2.0f, 1.0f, 2},
    {"group16", 5011, 256, 48, 1, 0, 1, 1, 1.5f, 0.7f, 3},
    {"tiles", 65537, 256, 0, 1, 0, 0, 1, 3.0f, 1.0f, 4},
};

static unsigned long long sc_rand(unsigned long long *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 17;
}

/* Draws with opt on the device into o (and dlp when opt->logprobs is set). */
static void draw(fs_context *ctx, const fs_problem *dp, const fs_sampling *s,
                 const fs_options *opt, gu_outputs *o, const char *what) {
  gu_outputs_poison(ctx, o);
  fs_outputs out = gu_outputs_api(o);
  const int st = fs_sample_ex(ctx, dp, s, opt, &out, NULL);
  CHECK_MSG(st == FS_OK, "%s: fs_sample_ex: %s", what, fs_last_error(ctx));
  gu_outputs_fetch(ctx, o);
}

static void run(fs_context *ctx, const sc_case *cs, int B, int dtype) {
  char what[160];
  snprintf(what, sizeof what, "%s %s B=%d", cs->name, gu_dtype_name(dtype), B);
  const double c = cs->c;
  gu_lmhead lm; /* logits of sd ~2 c: the cap changes most draws' odds */
  gu_lmhead_init(&lm, B, cs->D, cs->V, dtype, cs->offset, 0, 0, gu_w_scale(cs->D, 2.0 * c),
                 0x5cab5ull + (unsigned long long)B * 31u + cs->seed * 7919u);
  gu_lmhead_upload(ctx, &lm);
  const int S = cs->S;
  const size_t n = (size_t)B * S;
  float *temps = gu_malloc(sizeof(float) * (size_t)B);
  for (int b = 0; b < B; b++) temps[b] = b % 3 == 1 ? 0.0f : 0.6f + 0.2f * (float)(b % 5);
  CUdeviceptr dtemps = cs->mixed ? gu_upload_new(ctx, temps, sizeof(float) * (size_t)B) : 0;
  const long long words = (cs->offset + cs->V + 31) / 32;
  uint32_t *mask = gu_malloc(sizeof(uint32_t) * (size_t)(B * words));
  unsigned long long ms = 0x50f7ull + (unsigned long long)B;
  for (long long i = 0; i < B * words; i++) mask[i] = (uint32_t)sc_rand(&ms);
  CUdeviceptr dmask =
      cs->mixed ? gu_upload_new(ctx, mask, sizeof(uint32_t) * (size_t)(B * words)) : 0;

  fs_sampling s = {cs->T, NULL, S, 20261201ull + cs->seed, NULL, 9ull, NULL};
  s.temperatures = cs->mixed ? (const float *)gu_ptr(dtemps) : NULL;
  gu_outputs o, o2;
  gu_outputs_alloc(ctx, &o, n, 1, 1);
  gu_outputs_alloc(ctx, &o2, n, 0, 0);
  CUdeviceptr dlp = cs->logprobs ? gu_alloc(ctx, n * sizeof(float)) : 0;
  if (cs->group16) CHECK(fs_context_set_noise(ctx, FS_NOISE_GROUP16) == FS_OK);
  fs_problem dp = gu_problem(&lm, 1);
  fs_options opt = {.size = sizeof opt,
                    .token_mask = cs->mixed ? (const uint32_t *)gu_ptr(dmask) : NULL,
                    .logprobs = cs->logprobs ? (float *)gu_ptr(dlp) : NULL,
                    .logit_softcap = cs->c};
  draw(ctx, &dp, &s, &opt, &o, what);
  gu_outputs_check(&o, what);
  float *lp = gu_malloc(n * sizeof(float));
  if (dlp) gu_download(ctx, lp, dlp, n * sizeof(float));
  opt.logit_softcap = 0.0f; /* the same call uncapped: other tokens */
  opt.logprobs = NULL;
  draw(ctx, &dp, &s, &opt, &o2, what);
  if (cs->group16) CHECK(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);

  /* the reference, host pointers */
  fs_problem hp = gu_problem(&lm, 0);
  fs_sampling hs = s;
  hs.temperatures = cs->mixed ? temps : NULL;
  int32_t *rtok = gu_malloc(sizeof(int32_t) * n);
  float *rlogit = gu_malloc(sizeof(float) * n), *rlp = gu_malloc(sizeof(float) * n);
  uint64_t *rkey = gu_malloc(sizeof(uint64_t) * n);
  const fs_options ropt = {.size = sizeof ropt, .token_mask = cs->mixed ? mask : NULL,
                           .logprobs = rlp, .logit_softcap = cs->c};
  CHECK(fs_reference_sample_ex(&hp, &hs, cs->group16 ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN, &ropt,
                               rtok, rlogit, rkey) == FS_OK);

  long same = 0, bad = 0, differ = 0;
  double worst_lp = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double z = o.h_logits[i];
    differ += o2.h_tokens[i] != o.h_tokens[i];
    if (!(fabs(z) <= c)) {
      if (bad++ < 5) fprintf(stderr, "%s: draw %zu: logit %.7g outside [-c, c]\n", what, i, z);
    }
    same += gu_vs_reference(what, i, &o, cs->logprobs ? lp : NULL, rtok, rlogit, rkey, rlp,
                            &bad, &worst_lp);
  }
  CHECK_MSG(bad == 0, "%s: %ld draws wrong", what, bad);
  CHECK_MSG(same * 100 >= (long)n * 99, "%s: only %ld of %zu tokens are the reference's", what,
            same, n);
  CHECK_MSG(differ * 10 >= (long)n, "%s: only %ld of %zu tokens change without the cap: the "
            "case does not test it", what, differ, n);
  printf("ok %s: %zu draws, %ld the reference's tokens, %ld other without the cap, worst "
         "logprob error %.2g\n", what, n, same, differ, worst_lp);

  free(lp);
  free(rtok);
  free(rlogit);
  free(rlp);
  free(rkey);
  free(temps);
  free(mask);
  gu_free(ctx, dlp);
  gu_free(ctx, dtemps);
  gu_free(ctx, dmask);
  gu_outputs_free(ctx, &o);
  gu_outputs_free(ctx, &o2);
  gu_lmhead_free(ctx, &lm);
}

/* Every case on the context of (B, dtype). */
static void run_cases(fs_context *c, int B, int dtype) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run(c, &cases[i], B, dtype);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  static const int batches[] = {5, 37};
  gu_family_each(ctx, batches, 2, run_cases);
  fs_context_destroy(ctx);
  return fs_test_done("test_softcap");
}
