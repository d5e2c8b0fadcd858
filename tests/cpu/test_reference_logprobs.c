/*
** test_reference_logprobs.c: the CPU reference's logprobs (fs_options.logprobs
** of fs_reference_sample_ex, host pointers), from the definition: for every
** draw, its logit minus the log-sum-exp of the row's raw logits over all V
** tokens, computed here in double from ref_oracle_logits (two passes: the max,
** then the sum), with no temperature and no token mask.  Checked within 1e-6
** (the outputs are floats of values up to ~15), over random problems: bf16 and
** fp16, B up to 7, V 1 to 300 (one token: logprob 0), vocab_offset 0 and 37,
** random per-row sampling (greedy rows among them, several samples), both
** noises, with and without a random token mask (which changes the tokens, not
** the log-sum-exp: a masked-out draw of a row without allowed tokens has
** logit -inf and logprob -inf).  Non-finite logits: one W column of +inf
** (token 5 of V = 9) gives row 0 (h = -1 there) a -inf logit, which adds
** nothing (a finite logprob from the other eight), row 1 (h = 1) a +inf
** logit and row 2 (h = 0) a NaN one: NaN logprobs, as flashsampling.h says
** (the kernels' merges give NaN for +inf too), row 1's although a mask makes
** it draw a finite token.  Also: the tokens and logits equal those of
** a call without logprobs, 0.2's options size is accepted (and its logprobs
** pointer, past the size, never written), and a misaligned logprobs pointer
** is refused with a message naming it.
** Catches: a log-sum-exp over the allowed tokens only, or of z / T, or
** missing the last rows (each moves the logprob far beyond 1e-6).
*/
#include "ref_util.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  unsigned long long st = 0x109b5ull;
  long draws = 0;
  double worst = 0.0;
  for (int it = 0; it < 60; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)(fs_test_rand(&st) % 7);
    const int V = it % 10 == 0 ? 1 : 2 + (int)(fs_test_rand(&st) % 299);
    const int D = 8 * (1 + (int)(fs_test_rand(&st) % 8));
    const long long voff = it % 3 == 1 ? 37 : 0;
    const int noise = it % 4 == 3 && voff % 16 == 0 ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, voff, 1.0, &st);
    float temps[8];
    uint64_t seeds[8], offs[8];
    const fs_sampling s = ref_random_sampling(it, B, 4, temps, seeds, offs, &st);
    const int S = s.num_samples;
    const size_t n = (size_t)B * S;
    const long long words = (voff + V + 31) / 32;
    uint32_t *mask = NULL;
    if (it % 2) {
      mask = ref_xalloc(sizeof(uint32_t) * (size_t)(B * words));
      for (long long i = 0; i < B * words; i++) mask[i] = (uint32_t)fs_test_rand(&st);
    }
    ref_outs o = ref_outs_new(n), o2 = ref_outs_new(n);
    float *lp = ref_xalloc(sizeof(float) * n);
    const fs_options opt = {.size = sizeof opt, .token_mask = mask, .logprobs = lp};
    CHECK(fs_reference_sample_ex(&pr.p, &s, noise, &opt, o.tokens, o.logits, NULL) == FS_OK);
    const fs_options opt2 = {.size = sizeof opt2, .token_mask = mask};
    CHECK(fs_reference_sample_ex(&pr.p, &s, noise, &opt2, o2.tokens, o2.logits, NULL) == FS_OK);
    double *z = ref_xalloc(sizeof(double) * (size_t)V);
    for (int b = 0; b < B; b++) {
      ref_oracle_logits(&pr.p, b, z);
      const double lse = ref_lse(z, V);
      for (int t = 0; t < S; t++) {
        const size_t i = (size_t)b * S + t;
        CHECK_MSG(o.tokens[i] == o2.tokens[i] &&
                      ref_float_bits_equal(o.logits[i], o2.logits[i]),
                  "it %d draw %zu: logprobs changed the draw", it, i);
        const double want = (double)o.logits[i] - lse;
        const double err = isinf(want) && want == (double)lp[i] ? 0.0 : fabs(lp[i] - want);
        CHECK_MSG(err <= 1e-6 + 1e-7 * fabs(want), "it %d row %d sample %d: logprob %.9g, want %.9g",
                  it, b, t, (double)lp[i], want);
        if (V == 1 && !isinf(want))
          CHECK_MSG(lp[i] == 0.0f, "it %d: V = 1 gives logprob %g", it, (double)lp[i]);
        if (err > worst) worst = err;
        draws++;
      }
    }
    free(z);
    free(lp);
    free(mask);
    ref_outs_free(&o);
    ref_outs_free(&o2);
    ref_prob_free(&pr);
  }
  printf("test_reference_logprobs: %ld draws of 60 problems, worst error %.2g\n", draws, worst);

  /* non-finite logits: -inf adds nothing, +inf and NaN give NaN */
  {
    ref_prob q;
    ref_prob_make(&q, FS_DTYPE_BF16, 3, 8, 9, 0, 0, 0, 1.0, &st);
    q.w[5 * 8] = 0x7f80; /* +inf in column 0 of token 5 */
    q.h[0] = ref_encode(FS_DTYPE_BF16, -1.0), q.h[8] = ref_encode(FS_DTYPE_BF16, 1.0);
    q.h[16] = 0;
    const fs_sampling g = {0.0f, NULL, 1, 1, NULL, 0, NULL}; /* greedy */
    int32_t t3[3];
    float lg[3], l3[3];
    const uint32_t allow[3] = {0x1ff, 0x1ff & ~(1u << 5), 0x1ff}; /* row 1 draws a finite one */
    const fs_options o3 = {.size = sizeof o3, .token_mask = allow, .logprobs = l3};
    CHECK(fs_reference_sample_ex(&q.p, &g, FS_NOISE_TOKEN, &o3, t3, lg, NULL) == FS_OK);
    double z[9];
    ref_oracle_logits(&q.p, 0, z);
    CHECK_MSG(z[5] == -INFINITY, "row 0, token 5: logit %g, want -inf", z[5]);
    const double want = (double)lg[0] - ref_lse(z, 9);
    CHECK_MSG(fabs(l3[0] - want) <= 1e-6, "a -inf logit: logprob %.9g, want %.9g", (double)l3[0],
              want);
    CHECK_MSG(isnan(l3[1]) && isnan(l3[2]), "+inf and NaN logits: logprobs %g and %g, want NaN",
              (double)l3[1], (double)l3[2]);
    CHECK_MSG(t3[1] != 5 && isfinite(lg[1]), "row 1 drew token %d (logit %g): the mask allows a "
              "finite one", t3[1], (double)lg[1]);
    printf("non-finite logits: -inf -> %.6g (want %.6g), +inf -> %g, NaN -> %g\n", (double)l3[0],
           want, (double)l3[1], (double)l3[2]);
    ref_prob_free(&q);
  }

  /* the options' sizes and the pointer's alignment */
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 16, 50, 0, 0, 0, 1.0, &st);
  const fs_sampling s = {1.0f, NULL, 1, 3, NULL, 0, NULL};
  int32_t tok[2];
  float lp[3] = {7.0f, 7.0f, 7.0f};
  fs_options opt = {.size = offsetof(fs_options, logprobs), .logprobs = lp};
  CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &opt, tok, NULL, NULL) == FS_OK);
  CHECK_MSG(lp[0] == 7.0f && lp[1] == 7.0f, "0.2's options: logprobs written past the size");
  opt.size = sizeof opt;
  opt.logprobs = (float *)(void *)((char *)lp + 2);
  const int r = fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &opt, tok, NULL, NULL);
  CHECK_MSG(r == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), "options->logprobs"),
            "misaligned logprobs: %s: %s", fs_status_string(r), fs_last_error(NULL));
  printf("misaligned logprobs -> %s: %s\n", fs_status_string(r), fs_last_error(NULL));
  ref_prob_free(&pr);
  return fs_test_done("test_reference_logprobs");
}
