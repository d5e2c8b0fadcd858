// fs-test-timeout: 120
/*
** test_reference_mask.c: the CPU reference's token mask (fs_options,
** fs_reference_sample_ex), against the tests' oracle (ref_util.h) from the
** definition in flashsampling.h: a token whose bit is 0 is drawn as if its
** logit were -inf.
**
**  - random problems (bf16 and fp16, vocab_offset 0, 37 and 4096 - 3 so that
**    rows of the mask start inside a word, greedy and sampled rows mixed,
**    several samples, masks of density 0.3, a row with one allowed token and
**    one with none): tokens, logits and keys equal the oracle's bit for bit
**    (per-token noise), and fs_reference_row_ex's winner too;
**  - a stride beyond the minimum, its padding words all ones, draws as the
**    minimal stride; a mask of all ones as no mask;
**  - FS_NOISE_GROUP16: never a masked token while the row allows one, and
**    chi-square on 2 x 10^5 draws of a 64-token vocabulary against the
**    masked softmax, which must also reject the unmasked one;
**  - the options' rules: size, alignment, stride (each message names the
**    argument).
** Runs in about a second on one core.
*/
#include "fs_reference.h"
#include "fs_rng.h"
#include "fs_stats.h"
#include "fs_test.h"
#include "ref_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_oracle(void) {
  unsigned long long st = 0x6d61736bull;
  static const long long offs[] = {0, 37, 4096 - 3};
  int draws = 0;
  for (int it = 0; it < 36; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16, B = 5, D = 24 + 8 * (it % 3);
    const int V = 50 + 67 * (it % 12);
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, offs[it % 3], 0.8, &st);
    float temps[5];
    uint64_t seeds[5], offsets[5];
    fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offsets, &st);
    const long long need = (pr.p.vocab_offset + V + 31) / 32, stride = need + it % 2;
    uint32_t *m = ref_make_mask(&pr.p, stride, 0.3, &st);
    const fs_options opt = {.size = sizeof opt, .token_mask = m,
                            .token_mask_stride = it % 2 ? stride : 0};
    const int S = s.num_samples;
    ref_outs o = ref_outs_new((size_t)B * S);
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &opt, o.tokens, o.logits,
                                   o.keys) == FS_OK);
    double *z = ref_xalloc(sizeof(double) * (size_t)V);
    for (int b = 0; b < B; b++) {
      ref_oracle_logits(&pr.p, b, z);
      for (int t = 0; t < S; t++, draws++) {
        const ref_odraw d = ref_oracle_draw(&pr.p, &s, m, stride, z, b, t);
        const size_t i = (size_t)b * S + t;
        CHECK_MSG(o.tokens[i] == d.token && ref_float_bits_equal(o.logits[i], (float)d.z) &&
                      o.keys[i] == fs_pack_key((float)d.score, (uint32_t)d.token),
                  "it %d b %d s %d: token %d logit %g, want %d %g", it, b, t, (int)o.tokens[i],
                  (double)o.logits[i], (int)d.token, d.z);
        /* the rows of one allowed token and of none (catches a mask read
        ** from the wrong row or word) */
        if (b == 1) CHECK(o.tokens[i] == pr.p.vocab_offset + V / 2);
        if (b == 2) CHECK(o.tokens[i] == pr.p.vocab_offset && o.logits[i] == -INFINITY);
        if (b != 2) CHECK(ref_allowed(m, stride, b, o.tokens[i]));
      }
      fs_ref_result r;
      REQUIRE(fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &opt, b, 0, &r) == FS_OK);
      CHECK(r.token == o.tokens[(size_t)b * S]);
    }
    /* all ones: the unmasked draw */
    for (long long w = 0; w < B * stride; w++) m[w] = 0xffffffffu;
    ref_outs u = ref_outs_new((size_t)B * S);
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &opt, o.tokens, o.logits,
                                   o.keys) == FS_OK);
    REQUIRE(fs_reference_sample(&pr.p, &s, u.tokens, u.logits, u.keys) == FS_OK);
    CHECK(memcmp(o.keys, u.keys, sizeof(uint64_t) * (size_t)B * S) == 0);
    ref_outs_free(&u);
    ref_outs_free(&o);
    free(z);
    free(m);
    ref_prob_free(&pr);
  }
  printf("oracle: %d masked draws equal bit for bit\n", draws);
}

/* ---- 2. FS_NOISE_GROUP16: the masked law ------------------------------------- */

#define LAW_V 64
#define LAW_ROWS 4
#define LAW_S 50000

static void test_group_law(void) {
  unsigned long long st = 0x67726d6bull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, LAW_ROWS, 64, LAW_V, 0, 0, 3008, 0.9, &st);
  for (int b = 1; b < LAW_ROWS; b++) memcpy(pr.h + b * 64, pr.h, sizeof(uint16_t) * 64);
  /* one mask for every row: ids 3008.. in words 94 and 95; about half the
  ** tokens, every group of 16 cut */
  const long long stride = (3008 + LAW_V + 31) / 32;
  uint32_t *m = ref_xalloc(sizeof(uint32_t) * LAW_ROWS * stride);
  for (int b = 0; b < LAW_ROWS; b++)
    for (long long w = 0; w < stride; w++) m[b * stride + w] = 0x5a3cc3a5u ^ (uint32_t)w;
  double z[LAW_V], p[LAW_V], q[LAW_V];
  ref_oracle_logits(&pr.p, 0, z);
  for (int v = 0; v < LAW_V; v++) q[v] = z[v];
  for (int v = 0; v < LAW_V; v++)
    if (!ref_allowed(m, stride, 0, 3008 + v)) z[v] = -INFINITY;
  uint64_t seeds[LAW_ROWS], offs[LAW_ROWS];
  for (int b = 0; b < LAW_ROWS; b++) seeds[b] = 0x5eedull, offs[b] = 77u + (uint64_t)b;
  fs_sampling s = {1.0f, NULL, LAW_S, 0u, seeds, 0u, offs};
  const fs_options opt = {.size = sizeof opt, .token_mask = m};
  int32_t *tok = ref_xalloc(sizeof(int32_t) * LAW_ROWS * LAW_S);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &opt, tok, NULL, NULL) == FS_OK);
  int64_t counts[LAW_V] = {0};
  int masked = 0;
  for (int j = 0; j < LAW_ROWS * LAW_S; j++) {
    const int v = tok[j] - 3008;
    REQUIRE(v >= 0 && v < LAW_V);
    counts[v]++;
    masked += !ref_allowed(m, stride, 0, tok[j]);
  }
  CHECK_MSG(masked == 0, "%d group16 draws of masked tokens", masked);
  fs_stats_softmax(z, LAW_V, 1.0, p);
  const fs_chi2 good = fs_stats_chi2_gof(counts, p, LAW_V);
  /* Power: the unmasked softmax as the expectation puts about half its mass
  ** on the masked tokens, which get no draw (lambda, printed, is of the order
  ** of N = 2 x 10^5, against a 1e-6 critical value near 90): power 1 to
  ** many digits. */
  double qs[LAW_V];
  fs_stats_softmax(q, LAW_V, 1.0, qs);
  const fs_chi2 bad = fs_stats_chi2_gof(counts, qs, LAW_V);
  const double lam = fs_stats_noncentrality(p, qs, LAW_V, LAW_ROWS * LAW_S);
  printf("group16 with a mask: chi2=%.1f dof=%d p=%.3g; unmasked law: chi2=%.1f p=%.3g "
         "lambda=%.0f\n", good.stat, good.dof, good.p, bad.stat, bad.p, lam);
  CHECK(good.total == LAW_ROWS * LAW_S && good.dof >= 10);
  CHECK_MSG(good.p > 1e-3, "masked law: p=%g", good.p);
  CHECK_MSG(bad.p < 1e-6, "unmasked law not rejected: p=%g", bad.p);
  free(tok);
  free(m);
  ref_prob_free(&pr);
}

/* ---- 3. the options' rules ---------------------------------------------------- */

static void test_rules(void) {
  unsigned long long st = 0x72756c65ull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 16, 100, 0, 0, 37, 0.5, &st);
  fs_sampling s = {1.0f, NULL, 1, 1u, NULL, 0u, NULL};
  uint32_t m[16];
  for (int i = 0; i < 16; i++) m[i] = 0xffffffffu;
  int32_t tok[2];
  fs_options o = {.size = sizeof o, .token_mask = m};
  CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK);
  CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, NULL, tok, NULL, NULL) == FS_OK);
  o.size = 0;
  ref_expect_bad(&pr.p, &s, &o, "options->size", NULL);
  o.size = sizeof o + 8;
  ref_expect_bad(&pr.p, &s, &o, "options->size", NULL);
  o.size = sizeof o;
  o.token_mask = (const uint32_t *)((const char *)m + 2);
  ref_expect_bad(&pr.p, &s, &o, "options->token_mask", NULL);
  o.token_mask = m;
  o.token_mask_stride = 4; /* ceil((37 + 100) / 32) = 5 */
  ref_expect_bad(&pr.p, &s, &o, "options->token_mask_stride", NULL);
  o.token_mask_stride = -1;
  ref_expect_bad(&pr.p, &s, &o, "options->token_mask_stride", NULL);
  o.token_mask_stride = 5;
  CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK);
  /* a layout no version of fs_options had */
  o.size = offsetof(fs_options, token_mask_stride);
  ref_expect_bad(&pr.p, &s, &o, "options->size", NULL);
  ref_prob_free(&pr);
}

int main(void) {
  test_oracle();
  test_group_law();
  test_rules();
  return fs_test_done("test_reference_mask");
}
