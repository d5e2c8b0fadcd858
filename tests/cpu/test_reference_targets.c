// fs-test-timeout: 120
/*
** test_reference_targets.c: the CPU reference's targets (fs_options.
** target_tokens, target_logprobs, target_ranks; since 0.3.18) against an
** oracle written here from flashsampling.h's contract: row b's target t
** gets z_t - lse (raw logits: after the soft-cap; before the bias, the
** penalty, the mask and the temperature) and the count of the call's ids
** whose raw logit, in fp32, is >= z_t; NaN and 0 for a target outside the
** call's ids; the logprob NaN where the row holds a NaN or +inf logit.
**
**  1. Oracle: 100 random problems (bf16 and fp16; B 1..5, D 8..64, V
**     1..300, vocab_offset 0 or 37; up to 3 samples; random temperatures),
**     each called plain, with a soft-cap c = 3, with a bias, a penalty and
**     a mask, and with min-p and top-k; at vocab_offset 0 under
**     FS_NOISE_GROUP16 too.  Targets by row: an id of the call, -1, one
**     past the call's last id, the bias's +50 entry.  Every logprob within
**     1e-6 of the oracle's (double, two passes), every rank the oracle's,
**     and the draws those of the same call without targets.  The test can
**     fail: the oracle with the biased score in place of the raw logit
**     disagrees on the +50 entries' logprobs (counted, must be > 0).
**  2. Ties, NaN and -inf: logits z_v = W[v][0] from {-1, 0, 1, 2} with NaN
**     and -inf among them: a target at 2 ranks the count of the ids at 2
**     (ties counted), one at a NaN logit ranks 0, every logprob NaN (the
**     row holds a NaN); without the NaNs a -inf target ranks V with
**     logprob -inf, one at 2 the count of 2s with a finite logprob.
**  3. Bad input: outputs without target_tokens, target_tokens without
**     outputs, misaligned arrays: FS_INVALID_ARGUMENT naming the field;
**     FS_NOISE_GROUP16 refuses targets with a logit bias; a 0.3.13-sized
**     struct ignores garbage in the new fields.
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

/* The oracle's logprob and rank of row b's target t (biased: the +bias
** score in place of t's raw logit, the wrong rule for the test's own
** check). */
static void oracle(const fs_problem *p, float cap, int b, int32_t t, double bias, float *lp,
                   int *rank) {
  double *z = ref_xalloc(sizeof(double) * (size_t)p->vocab);
  ref_oracle_logits(p, b, z);
  for (int v = 0; v < p->vocab; v++) z[v] = ref_cap(z[v], cap);
  const long long v = (long long)t - p->vocab_offset;
  *lp = NAN, *rank = 0;
  if (v >= 0 && v < p->vocab) {
    int bad = 0;
    for (int j = 0; j < p->vocab; j++) bad |= isnan(z[j]) || z[j] == INFINITY;
    const double zt = z[v];
    *lp = bad ? NAN : (float)(zt + bias - ref_lse(z, p->vocab));
    for (int j = 0; j < p->vocab; j++) *rank += (float)z[j] >= (float)zt;
  }
  free(z);
}

/* Calls the reference with targets and without, checks the draws the same
** and every output the oracle's; returns the rows whose logprob the
** biased oracle (bias[b] added) gets wrong. */
static int check_call(const fs_problem *p, const fs_sampling *s, const fs_options *o0,
                      const int32_t *tgt, const double *bias, int noise, const char *what) {
  const int B = p->batch;
  const size_t n = (size_t)B * (size_t)s->num_samples;
  int32_t *tok = ref_xalloc(n * 4), *tok0 = ref_xalloc(n * 4), *rk = ref_xalloc((size_t)B * 4);
  float *lg = ref_xalloc(n * 4), *lg0 = ref_xalloc(n * 4), *lp = ref_xalloc((size_t)B * 4);
  fs_options o = *o0;
  o.target_tokens = tgt;
  o.target_logprobs = lp;
  o.target_ranks = rk;
  CHECK_MSG(fs_reference_sample_ex(p, s, noise, &o, tok, lg, NULL) == FS_OK, "%s: %s", what,
            fs_last_error(NULL));
  o.target_tokens = NULL, o.target_logprobs = NULL, o.target_ranks = NULL;
  CHECK(fs_reference_sample_ex(p, s, noise, &o, tok0, lg0, NULL) == FS_OK);
  CHECK_MSG(!memcmp(tok, tok0, n * 4) && !memcmp(lg, lg0, n * 4),
            "%s: targets changed the draws", what);
  int biased_differs = 0;
  for (int b = 0; b < B; b++) {
    float want;
    int wr;
    oracle(p, o.logit_softcap, b, tgt[b], 0.0, &want, &wr);
    const int ok = isnan(want) ? isnan(lp[b])
                               : lp[b] == want || fabsf(lp[b] - want) <= 1e-6f * (1.0f + fabsf(want));
    CHECK_MSG(ok && rk[b] == wr, "%s: row %d target %d: logprob %.9g rank %d, oracle %.9g %d",
              what, b, tgt[b], (double)lp[b], rk[b], (double)want, wr);
    if (bias && bias[b] != 0.0) {
      oracle(p, o.logit_softcap, b, tgt[b], bias[b], &want, &wr);
      biased_differs += !(fabsf(lp[b] - want) <= 1e-6f * (1.0f + fabsf(want)));
    }
  }
  free(tok), free(tok0), free(rk), free(lg), free(lg0), free(lp);
  return biased_differs;
}

static void oracle_cases(void) {
  unsigned long long st = 0x7a26u;
  int calls = 0, told = 0;
  for (int it = 0; it < 100; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)(fs_test_rand(&st) % 5), D = 8 * (1 + (int)(fs_test_rand(&st) % 8));
    const int V = 1 + (int)(fs_test_rand(&st) % 300);
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, it % 3 ? 0 : 37, 1.0, &st);
    float temps[5];
    uint64_t seeds[5], offs[5];
    const fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offs, &st);
    const int32_t off = (int32_t)pr.p.vocab_offset;
    int32_t btok[2 * 5], tgt[5];
    float bval[2 * 5];
    double plus[5];
    for (int b = 0; b < B; b++) {
      btok[2 * b] = off + (b * 7) % V, bval[2 * b] = 50.0f;
      btok[2 * b + 1] = off + (b * 5 + 3) % V, bval[2 * b + 1] = -3.0f;
      const int k = (b + it) % 4;
      tgt[b] = k == 0 ? off + (b * 11 + it) % V : k == 1 ? -1 : k == 2 ? off + V : btok[2 * b];
      /* the +50 entry as its score (no penalty below: the soft-cap off) */
      plus[b] = k == 3 && btok[2 * b + 1] != btok[2 * b] ? 50.0 : 0.0;
    }
    char what[96];
    fs_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    snprintf(what, sizeof what, "it %d (B %d D %d V %d) plain", it, B, D, V);
    check_call(&pr.p, &s, &o, tgt, NULL, FS_NOISE_TOKEN, what);
    o.logit_softcap = 3.0f;
    snprintf(what, sizeof what, "it %d soft-cap", it);
    check_call(&pr.p, &s, &o, tgt, NULL, FS_NOISE_TOKEN, what);
    o.logit_softcap = 0.0f;
    const long long stride = (pr.p.vocab_offset + V + 31) / 32;
    uint32_t *mask = ref_make_mask(&pr.p, stride, 0.5, &st);
    fs_options ob = o;
    ob.logit_bias_tokens = btok;
    ob.logit_bias_values = bval;
    ob.logit_bias_count = 2;
    ob.token_mask = mask;
    snprintf(what, sizeof what, "it %d bias, mask", it);
    told += check_call(&pr.p, &s, &ob, tgt, plus, FS_NOISE_TOKEN, what);
    ob.repetition_penalty = 1.5f;
    snprintf(what, sizeof what, "it %d bias, penalty, mask", it);
    check_call(&pr.p, &s, &ob, tgt, NULL, FS_NOISE_TOKEN, what);
    fs_options of = o;
    of.min_p = 0.05f;
    of.top_k = 1 + it % 20;
    snprintf(what, sizeof what, "it %d min-p, top-k", it);
    check_call(&pr.p, &s, &of, tgt, NULL, FS_NOISE_TOKEN, what);
    calls += 5;
    if (off % 16 == 0) {
      fs_options og = o;
      og.logit_softcap = 3.0f;
      og.token_mask = mask;
      snprintf(what, sizeof what, "it %d group16, soft-cap, mask", it);
      check_call(&pr.p, &s, &og, tgt, NULL, FS_NOISE_GROUP16, what);
      calls++;
    }
    free(mask);
    ref_prob_free(&pr);
  }
  CHECK_MSG(told > 0, "the biased oracle was never told apart");
  printf("oracle: %d calls over 100 problems; the biased oracle wrong on %d rows\n", calls,
         told);
}

/* z_v = W[v][0] (H = e_0, B = 1): values from {-1, 0, 1, 2}, -inf among
** them, and with nan some NaN too. */
static void tie_problem(int nan, int32_t *two, int32_t *nanv, int *twos, uint16_t *h,
                        uint16_t *w, int V, int D, fs_problem *p) {
  static const float pick[] = {-1.0f, 0.0f, 1.0f, 2.0f};
  memset(h, 0, sizeof(uint16_t) * (size_t)D);
  memset(w, 0, sizeof(uint16_t) * (size_t)V * (size_t)D);
  h[0] = fs_test_f2bf(1.0f);
  unsigned long long st = 0x71e6u;
  *twos = 0;
  for (int v = 0; v < V; v++) {
    const float z = v % 13 == 5      ? -INFINITY
                    : nan && v % 17 == 3 ? NAN
                                         : pick[fs_test_rand(&st) % 4];
    w[v * D] = fs_test_f2bf(z);
    *twos += z == 2.0f;
    if (z == 2.0f) *two = v;
    if (isnan(z)) *nanv = v;
  }
  memset(p, 0, sizeof *p);
  p->batch = 1, p->hidden = D, p->vocab = V, p->dtype = FS_DTYPE_BF16;
  p->hidden_states = h, p->weight = w;
}

static void tie_case(void) {
  enum { V = 64, D = 8 };
  uint16_t h[D], w[V * D];
  int32_t two = -1, nanv = -1, rk[1], tok[1], tgt[1];
  int twos = 0;
  float lp[1];
  fs_problem p;
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.num_samples = 1;
  s.temperature = 1.0f;
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.target_tokens = tgt, o.target_logprobs = lp, o.target_ranks = rk;
  tie_problem(1, &two, &nanv, &twos, h, w, V, D, &p); /* NaN in the row */
  tgt[0] = two;
  CHECK(fs_reference_sample_ex(&p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK);
  CHECK_MSG(rk[0] == twos && twos > 1 && isnan(lp[0]), "at 2: rank %d of %d twos, logprob %g",
            rk[0], twos, (double)lp[0]);
  check_call(&p, &s, &o, tgt, NULL, FS_NOISE_TOKEN, "ties at 2");
  tgt[0] = nanv;
  CHECK(fs_reference_sample_ex(&p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK);
  CHECK_MSG(nanv >= 0 && rk[0] == 0 && isnan(lp[0]), "at NaN: rank %d, logprob %g", rk[0],
            (double)lp[0]);
  check_call(&p, &s, &o, tgt, NULL, FS_NOISE_TOKEN, "ties at NaN");
  tie_problem(0, &two, &nanv, &twos, h, w, V, D, &p); /* no NaN: -inf ids */
  tgt[0] = 5;
  CHECK(fs_reference_sample_ex(&p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK);
  CHECK_MSG(rk[0] == V && lp[0] == -INFINITY, "at -inf: rank %d, logprob %g", rk[0],
            (double)lp[0]);
  check_call(&p, &s, &o, tgt, NULL, FS_NOISE_TOKEN, "ties at -inf");
  tgt[0] = two;
  check_call(&p, &s, &o, tgt, NULL, FS_NOISE_TOKEN, "ties at 2, no NaN");
  CHECK(fs_reference_sample_ex(&p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK);
  CHECK_MSG(rk[0] == twos && lp[0] < 0.0f && lp[0] > -5.0f, "at 2, no NaN: rank %d, logprob %g",
            rk[0], (double)lp[0]);
  printf("ties: rank %d at 2 (%d twos), 0 at NaN, %d at -inf\n", twos, twos, V);
}

static void bad_input(void) {
  ref_prob pr;
  unsigned long long st = 0xbadu;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 8, 50, 0, 0, 0, 1.0, &st);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.num_samples = 1;
  s.temperature = 1.0f;
  int32_t rk[4], tok[2], tgt[3] = {1, 2, 3};
  float lp[4];
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.target_logprobs = lp;
  ref_expect_bad(&pr.p, &s, &o, "options->target_tokens=NULL", "outputs without targets");
  o.target_logprobs = NULL;
  o.target_ranks = rk;
  ref_expect_bad(&pr.p, &s, &o, "options->target_tokens=NULL", "ranks without targets");
  o.target_ranks = NULL;
  o.target_tokens = tgt;
  ref_expect_bad(&pr.p, &s, &o, "options->target_tokens=", "targets without outputs");
  CHECK(fs_test_has(fs_last_error(NULL), "at least one output"));
  o.target_tokens = (const int32_t *)((const char *)tgt + 2);
  o.target_ranks = rk;
  ref_expect_bad(&pr.p, &s, &o, "options->target_tokens=", "misaligned targets");
  CHECK(fs_test_has(fs_last_error(NULL), "4-byte aligned"));
  o.target_tokens = tgt;
  o.target_logprobs = (float *)((char *)lp + 1);
  ref_expect_bad(&pr.p, &s, &o, "options->target_logprobs=", "misaligned logprobs");
  o.target_logprobs = lp;
  o.target_ranks = (int32_t *)((char *)rk + 2);
  ref_expect_bad(&pr.p, &s, &o, "options->target_ranks=", "misaligned ranks");
  o.target_ranks = rk;
  /* FS_NOISE_GROUP16 takes targets, but not with a logit bias */
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, tok, NULL, NULL) == FS_OK,
            "group16: %s", fs_last_error(NULL));
  int32_t bt[2] = {1, 2};
  float bv[2] = {1.0f, 1.0f};
  o.logit_bias_tokens = bt, o.logit_bias_values = bv, o.logit_bias_count = 1;
  CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, tok, NULL, NULL) ==
            FS_INVALID_ARGUMENT &&
        fs_test_has(fs_last_error(NULL), "target_tokens") &&
        fs_test_has(fs_last_error(NULL), "FS_NOISE_GROUP16"));
  o.logit_bias_count = 0;
  /* a 0.3.13 struct: the new fields are not read */
  o.size = offsetof(fs_options, target_tokens);
  o.target_tokens = (const int32_t *)(uintptr_t)1;
  o.target_logprobs = (float *)(uintptr_t)3;
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK,
            "0.3.13 size: %s", fs_last_error(NULL));
  ref_prob_free(&pr);
}

int main(void) {
  oracle_cases();
  tie_case();
  bad_input();
  return fs_test_done("test_reference_targets");
}
