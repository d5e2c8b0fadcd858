// fs-test-timeout: 120
/*
** test_reference_toplp.c: the CPU reference's top logprobs
** (fs_options.top_logprobs, since 0.3.12) against an oracle written here
** from flashsampling.h's contract: row b's n largest raw logits (after the
** soft-cap; before the bias, the penalty, the mask and the temperature),
** equal ones by the smaller id, a NaN after every number, each with its
** logit minus the row's log-sum-exp; -1 and -inf past the call's ids.
**
**  1. Oracle: 150 random problems (bf16 and fp16; B 1..4, D 8..64, V
**     1..300, vocab_offset 0 or 37; n 1, 3, 20, 64 or 256, so that n > V
**     often; a soft-cap c = 3 on a third; random sampling), the oracle's
**     logits in double from the inputs (ref_util.h).  Tokens must equal the
**     oracle's sort exactly (the reference sums in the oracle's order), the
**     values within 1e-6 (relative, 1e-6 absolute near 0) of (float)(z -
**     lse).  Each problem is called again with a logit bias and penalty, a
**     mask, other temperatures and seeds: the lists must be the same bit for
**     bit, and the draws must equal a call without top_logprobs bit for bit;
**     at vocab_offset 0, once more with the mask under FS_NOISE_GROUP16: the
**     same lists, and the group draws of the call without them.
**  2. Ties and special values: logits z_v = W[v][0] (H = e_0), values from
**     {-1, 0, 0.5, 1, 2} with many repeats, some -inf and NaN: the order of
**     equal logits by id and the NaN after -inf; with a +inf logit every
**     value is NaN.  Not vacuous: the ties straddle the n-th place.
**  3. Bad input: top_logprobs -1 and 257, NULL tokens or values, a
**     misaligned array, FS_NOISE_GROUP16 with a bias: FS_INVALID_ARGUMENT
**     naming the argument and the rule; FS_NOISE_GROUP16 without one and
**     n = 256 at V = 262,145 are taken; a
**     0.3.9-sized struct ignores garbage in the new fields.
** Runs in about a second on one core.
*/
#include "fs_reference.h"
#include "fs_test.h"
#include "ref_util.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Does (za, a) come before (zb, b): the larger logit, then the smaller id,
** NaN last. */
static int before(double za, int a, double zb, int b) {
  if (isnan(za) || isnan(zb)) return !isnan(za) || (isnan(zb) && a < b);
  return za > zb || (za == zb && a < b);
}

/* The oracle's list of row b: ids[n], vals[n]. */
static void oracle_list(const fs_problem *p, float cap, int b, int n, int32_t *ids, float *vals) {
  const int V = p->vocab;
  double *z = ref_xalloc(sizeof(double) * (size_t)V);
  int *ord = ref_xalloc(sizeof(int) * (size_t)V);
  ref_oracle_logits(p, b, z);
  int has_inf = 0;
  for (int v = 0; v < V; v++) z[v] = ref_cap(z[v], cap), ord[v] = v, has_inf |= z[v] == INFINITY;
  for (int i = 1; i < V; i++) /* insertion sort: V <= 300 */
    for (int j = i; j > 0 && before(z[ord[j]], ord[j], z[ord[j - 1]], ord[j - 1]); j--) {
      const int t = ord[j];
      ord[j] = ord[j - 1];
      ord[j - 1] = t;
    }
  double mx = -INFINITY, sum = 0.0;
  int nan = has_inf;
  for (int v = 0; v < V; v++) nan |= isnan(z[v]), mx = z[v] > mx ? z[v] : mx;
  for (int v = 0; v < V; v++) sum += z[v] == -INFINITY ? 0.0 : exp(z[v] - mx);
  const double lse = nan ? NAN : mx + log(sum);
  for (int i = 0; i < n; i++) {
    ids[i] = i < V ? (int32_t)(p->vocab_offset + ord[i]) : -1;
    vals[i] = i < V ? (float)(z[ord[i]] - lse) : -INFINITY;
  }
  free(z);
  free(ord);
}

static int close_enough(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabsf(a - b) <= 1e-6f * fmaxf(1.0f, fabsf(b));
}

/* Calls the reference with options o (top_logprobs n into ids and vals);
** the draws into tok. */
static int run(const fs_problem *p, const fs_sampling *s, fs_options *o, int n, int32_t *ids,
               float *vals, int32_t *tok) {
  o->top_logprobs = n;
  o->top_logprob_tokens = ids;
  o->top_logprob_values = vals;
  return fs_reference_sample_ex(p, s, FS_NOISE_TOKEN, o, tok, NULL, NULL);
}

static void oracle_cases(void) {
  static const int ns[] = {1, 3, 20, 64, 256};
  unsigned long long st = 0x70b1u;
  int checked = 0, short_rows = 0, grouped = 0;
  for (int it = 0; it < 150; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)(fs_test_rand(&st) % 4), D = 8 * (1 + (int)(fs_test_rand(&st) % 8));
    const int V = 1 + (int)(fs_test_rand(&st) % 300), n = ns[fs_test_rand(&st) % 5];
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, it % 3 ? 0 : 37, 1.0, &st);
    float temps[4];
    uint64_t seeds[4], offs[4];
    fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offs, &st);
    const size_t bn = (size_t)B * n, draws = (size_t)B * s.num_samples;
    int32_t *ids = ref_xalloc(bn * 4), *ids2 = ref_xalloc(bn * 4), *want = ref_xalloc(bn * 4);
    float *vals = ref_xalloc(bn * 4), *vals2 = ref_xalloc(bn * 4), *wantv = ref_xalloc(bn * 4);
    int32_t *tok = ref_xalloc(draws * 4), *tok0 = ref_xalloc(draws * 4);
    fs_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.logit_softcap = it % 3 == 1 ? 3.0f : 0.0f;
    CHECK_MSG(run(&pr.p, &s, &o, n, ids, vals, tok) == FS_OK, "it %d: %s", it,
              fs_last_error(NULL));
    for (int b = 0; b < B; b++) {
      oracle_list(&pr.p, o.logit_softcap, b, n, want + (size_t)b * n, wantv + (size_t)b * n);
      for (int i = 0; i < n; i++) {
        const size_t k = (size_t)b * n + i;
        CHECK_MSG(ids[k] == want[k] && close_enough(vals[k], wantv[k]),
                  "it %d (B %d D %d V %d n %d) row %d place %d: (%d, %.9g), oracle (%d, %.9g)", it,
                  B, D, V, n, b, i, ids[k], (double)vals[k], want[k], (double)wantv[k]);
        checked++;
      }
      short_rows += n > V;
    }
    /* the draws are those of the call without top logprobs */
    fs_options o0 = o;
    o0.top_logprobs = 0;
    CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o0, tok0, NULL, NULL) == FS_OK);
    CHECK_MSG(!memcmp(tok, tok0, draws * 4), "it %d: top_logprobs changed the draws", it);
    /* a bias with a penalty, a mask, other temperatures and seeds: the same lists */
    int32_t btok[2 * 4];
    float bval[2 * 4];
    for (int b = 0; b < B; b++) {
      btok[2 * b] = (int32_t)(pr.p.vocab_offset + (b * 7) % V), bval[2 * b] = 50.0f;
      btok[2 * b + 1] = want[(size_t)b * n], bval[2 * b + 1] = -INFINITY;
    }
    const long long stride = (pr.p.vocab_offset + V + 31) / 32;
    uint32_t *mask = ref_make_mask(&pr.p, stride, 0.5, &st);
    fs_options o2 = o;
    o2.logit_bias_tokens = btok;
    o2.logit_bias_values = bval;
    o2.logit_bias_count = 2;
    o2.repetition_penalty = 1.5f;
    o2.token_mask = mask;
    fs_sampling s2 = s;
    s2.temperature = 2.5f;
    s2.temperatures = NULL;
    s2.seed ^= 0x5555u;
    CHECK(run(&pr.p, &s2, &o2, n, ids2, vals2, tok) == FS_OK);
    CHECK_MSG(!memcmp(ids, ids2, bn * 4) && !memcmp(vals, vals2, bn * 4),
              "it %d: the bias, mask or sampling changed the lists", it);
    if (pr.p.vocab_offset % 16 == 0) { /* FS_NOISE_GROUP16 with the mask: the same lists,
                                         the group draws of a call without them */
      fs_options o3 = o;
      o3.token_mask = mask;
      o3.top_logprob_tokens = ids2, o3.top_logprob_values = vals2;
      CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o3, tok, NULL, NULL) ==
                    FS_OK, "it %d group16: %s", it, fs_last_error(NULL));
      o3.top_logprobs = 0;
      CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o3, tok0, NULL, NULL) == FS_OK);
      CHECK_MSG(!memcmp(ids, ids2, bn * 4) && !memcmp(vals, vals2, bn * 4) &&
                    !memcmp(tok, tok0, draws * 4),
                "it %d group16: the lists or the draws differ", it);
      grouped++;
    }
    free(mask);
    free(ids), free(ids2), free(want), free(vals), free(vals2), free(wantv), free(tok), free(tok0);
    ref_prob_free(&pr);
  }
  CHECK(short_rows > 20 && grouped > 50);
  printf("oracle: %d places over 150 problems, %d rows with n > V, %d problems under "
         "FS_NOISE_GROUP16 too\n", checked, short_rows, grouped);
}

/* z_v = W[v][0]: H = e_0 and W's other columns 0; mode 0: some -inf, 1:
** and NaN, 2: and a +inf. */
static void tie_case(int mode) {
  const int with_inf = mode == 2;
  enum { V = 64, D = 8, N = 20 };
  static const float pick[] = {-1.0f, 0.0f, 0.5f, 1.0f, 2.0f};
  uint16_t h[D] = {0}, w[V * D];
  memset(w, 0, sizeof w);
  h[0] = fs_test_f2bf(1.0f);
  unsigned long long st = 0x7135u;
  for (int v = 0; v < V; v++) {
    const float z = v % 13 == 5               ? -INFINITY
                    : v % 17 == 3 && mode > 0 ? NAN
                                              : pick[fs_test_rand(&st) % 5];
    w[v * D] = fs_test_f2bf(z);
  }
  if (with_inf) w[40 * D] = fs_test_f2bf(INFINITY);
  fs_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 1, p.hidden = D, p.vocab = V, p.dtype = FS_DTYPE_BF16;
  p.hidden_states = h, p.weight = w;
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.num_samples = 1;
  s.temperature = 1.0f;
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  int32_t ids[V + 8], want[V + 8], tok;
  float vals[V + 8], wantv[V + 8];
  CHECK(run(&p, &s, &o, V + 8, ids, vals, &tok) == FS_OK);
  oracle_list(&p, 0.0f, 0, V + 8, want, wantv);
  int ties = 0;
  for (int i = 0; i < V + 8; i++) {
    CHECK_MSG(ids[i] == want[i] && close_enough(vals[i], wantv[i]),
              "ties mode %d place %d: (%d, %g), oracle (%d, %g)", mode, i, ids[i],
              (double)vals[i], want[i], (double)wantv[i]);
    if (i > 0 && i < V) ties += ids[i] > ids[i - 1] && fs_test_bf2f(w[ids[i] * D]) ==
                                                           fs_test_bf2f(w[ids[i - 1] * D]);
  }
  /* -inf (mode 0) or NaN last, then the pads; with NaN or +inf every value NaN */
  CHECK_MSG(ids[V - 1] == (mode ? 3 + 17 * 3 : 5 + 13 * 4) && ids[V] == -1 &&
                vals[V] == -INFINITY, "mode %d: last %d, pad %d %g", mode, ids[V - 1], ids[V],
            (double)vals[V]);
  CHECK(!with_inf || ids[0] == 40);
  CHECK(mode ? isnan(vals[0]) && isnan(vals[5]) : vals[0] <= 0.0f && vals[V - 1] == -INFINITY);
  /* the list's first N places hold a run of equal logits across place N */
  CHECK(fs_test_bf2f(w[ids[N - 1] * D]) == fs_test_bf2f(w[ids[N] * D]));
  CHECK(ties > 30);
}

static void bad_input(void) {
  ref_prob pr;
  unsigned long long st = 0xbadu;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 8, 50, 0, 0, 0, 1.0, &st);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.num_samples = 1;
  s.temperature = 1.0f;
  int32_t ids[2 * 256 + 1], tok[2];
  float vals[2 * 256 + 1];
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.top_logprob_tokens = ids;
  o.top_logprob_values = vals;
  o.top_logprobs = -1;
  ref_expect_bad(&pr.p, &s, &o, "options->top_logprobs=-1", NULL);
  o.top_logprobs = 257;
  ref_expect_bad(&pr.p, &s, &o, "options->top_logprobs=257", NULL);
  CHECK(fs_test_has(fs_last_error(NULL), "0..256"));
  o.top_logprobs = 4;
  o.top_logprob_tokens = NULL;
  ref_expect_bad(&pr.p, &s, &o, "options->top_logprob_tokens=NULL", NULL);
  o.top_logprob_tokens = ids;
  o.top_logprob_values = NULL;
  ref_expect_bad(&pr.p, &s, &o, "options->top_logprob_values=NULL", NULL);
  o.top_logprob_values = (float *)((char *)vals + 2);
  ref_expect_bad(&pr.p, &s, &o, "options->top_logprob_values=", "misaligned values");
  CHECK(fs_test_has(fs_last_error(NULL), "4-byte aligned"));
  o.top_logprob_values = vals;
  o.top_logprob_tokens = (int32_t *)((char *)ids + 1);
  ref_expect_bad(&pr.p, &s, &o, "options->top_logprob_tokens=", "misaligned tokens");
  o.top_logprob_tokens = ids;
  int32_t t1;
  /* FS_NOISE_GROUP16 takes lists (since 0.3.17), but not with a bias */
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, tok, NULL, NULL) == FS_OK,
            "group16: %s", fs_last_error(NULL));
  int32_t btok[2] = {3, 4};
  float bval[2] = {1.0f, 2.0f};
  o.logit_bias_tokens = btok, o.logit_bias_values = bval, o.logit_bias_count = 1;
  CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, tok, NULL, NULL) ==
            FS_INVALID_ARGUMENT &&
        fs_test_has(fs_last_error(NULL), "options->logit_bias_count=1") &&
        fs_test_has(fs_last_error(NULL), "options->top_logprobs") &&
        fs_test_has(fs_last_error(NULL), "FS_NOISE_GROUP16"));
  o.logit_bias_count = 0;
  /* no limit of V: n = 256 at V = 262,145 */
  ref_prob big;
  ref_prob_make(&big, FS_DTYPE_BF16, 1, 8, 262145, 0, 0, 0, 1.0, &st);
  o.top_logprobs = 256;
  CHECK_MSG(fs_reference_sample_ex(&big.p, &s, FS_NOISE_TOKEN, &o, &t1, NULL, NULL) == FS_OK,
            "V = 262145, n = 256: %s", fs_last_error(NULL));
  CHECK(ids[0] >= 0 && ids[255] >= 0 && vals[0] >= vals[255]);
  ref_prob_free(&big);
  /* a 0.3.9 struct: the new fields are not read */
  o.size = offsetof(fs_options, top_logprobs);
  o.top_logprobs = -7;
  o.top_logprob_tokens = (int32_t *)(uintptr_t)1;
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK,
            "0.3.9 size: %s", fs_last_error(NULL));
  ref_prob_free(&pr);
}

int main(void) {
  oracle_cases();
  tie_case(0);
  tie_case(1);
  tie_case(2);
  bad_input();
  return fs_test_done("test_reference_toplp");
}
