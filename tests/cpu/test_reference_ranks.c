// fs-test-timeout: 120
/*
** test_reference_ranks.c: the CPU reference's ranks (fs_options.ranks,
** since 0.3.13) against an oracle written here from flashsampling.h's
** contract: a draw's rank is the number of the call's ids whose raw logit
** (after the soft-cap; before the bias, the penalty, the mask and the
** temperature), in fp32, is >= the draw's reported logit; NaN is never
** counted.
**
**  1. Oracle: 120 random problems (bf16 and fp16; B 1..4, D 8..64, V
**     1..300, vocab_offset 0 or 37; up to 3 samples; random per-row or
**     scalar temperatures, greedy rows among them), each called four ways:
**     plain, with a soft-cap c = 3, with a logit bias, a penalty and a mask
**     (a row with one allowed id, one with none), and with min-p and top-k;
**     at vocab_offset 0 a fifth way under FS_NOISE_GROUP16, with the soft-cap
**     and the mask.  The oracle counts the row's (float) capped logits >= the reported
**     logit: every rank must equal it, and the draws and logits must be
**     those of the same call without ranks.
**  2. Ties, NaN and -inf: logits z_v = W[v][0] from {-1, 0, 1, 2} with
**     NaN and -inf among them, greedy and sampled rows: ranks count the
**     ties with the draw (a greedy draw of a logit shared by m ids has
**     rank m) and never a NaN; a row with no allowed id (logit -inf) has
**     the count of its ids that are not NaN.  The oracle with > in place
**     of >= disagrees there: the test tells the two rules apart.
**  3. Bad input: a misaligned ranks array: FS_INVALID_ARGUMENT naming
**     options->ranks; FS_NOISE_GROUP16 takes ranks, but not with top_k
**     (FS_INVALID_ARGUMENT naming the filters); a 0.3.12-sized struct
**     ignores garbage in the new field.
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

/* The oracle's rank of logit d in row b: its (float) capped logits >= d,
** or > d where strict (the wrong rule, for the test's own check). */
static int oracle_rank(const fs_problem *p, float cap, int b, float d, int strict) {
  double *z = ref_xalloc(sizeof(double) * (size_t)p->vocab);
  ref_oracle_logits(p, b, z);
  int n = 0;
  for (int v = 0; v < p->vocab; v++) {
    const float f = (float)ref_cap(z[v], cap);
    n += strict ? f > d : f >= d;
  }
  free(z);
  return n;
}

/* Calls the reference with ranks into rk and without, checks the draws and
** logits the same and every rank the oracle's; returns the draws that the
** strict oracle ranks otherwise. */
static int check_call(const fs_problem *p, const fs_sampling *s, const fs_options *o0,
                      int noise, const char *what) {
  const size_t n = (size_t)p->batch * (size_t)s->num_samples;
  int32_t *tok = ref_xalloc(n * 4), *tok0 = ref_xalloc(n * 4), *rk = ref_xalloc(n * 4);
  float *lg = ref_xalloc(n * 4), *lg0 = ref_xalloc(n * 4);
  fs_options o = *o0;
  o.ranks = rk;
  CHECK_MSG(fs_reference_sample_ex(p, s, noise, &o, tok, lg, NULL) == FS_OK, "%s: %s", what,
            fs_last_error(NULL));
  o.ranks = NULL;
  CHECK(fs_reference_sample_ex(p, s, noise, &o, tok0, lg0, NULL) == FS_OK);
  CHECK_MSG(!memcmp(tok, tok0, n * 4) && !memcmp(lg, lg0, n * 4), "%s: ranks changed the draws",
            what);
  int strict_differs = 0;
  for (size_t i = 0; i < n; i++) {
    const int b = (int)(i / (size_t)s->num_samples);
    const int want = oracle_rank(p, o.logit_softcap, b, lg[i], 0);
    CHECK_MSG(rk[i] == want, "%s: draw %zu (row %d, token %d, logit %.9g): rank %d, oracle %d",
              what, i, b, tok[i], (double)lg[i], rk[i], want);
    strict_differs += oracle_rank(p, o.logit_softcap, b, lg[i], 1) != want;
  }
  free(tok), free(tok0), free(rk), free(lg), free(lg0);
  return strict_differs;
}

static void oracle_cases(void) {
  unsigned long long st = 0x4a4bu;
  int calls = 0;
  for (int it = 0; it < 120; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)(fs_test_rand(&st) % 4), D = 8 * (1 + (int)(fs_test_rand(&st) % 8));
    const int V = 1 + (int)(fs_test_rand(&st) % 300);
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, it % 3 ? 0 : 37, 1.0, &st);
    float temps[4];
    uint64_t seeds[4], offs[4];
    const fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offs, &st);
    char what[96];
    fs_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    snprintf(what, sizeof what, "it %d (B %d D %d V %d) plain", it, B, D, V);
    check_call(&pr.p, &s, &o, FS_NOISE_TOKEN, what);
    o.logit_softcap = 3.0f;
    snprintf(what, sizeof what, "it %d soft-cap", it);
    check_call(&pr.p, &s, &o, FS_NOISE_TOKEN, what);
    o.logit_softcap = 0.0f;
    int32_t btok[2 * 4];
    float bval[2 * 4];
    for (int b = 0; b < B; b++) {
      btok[2 * b] = (int32_t)(pr.p.vocab_offset + (b * 7) % V), bval[2 * b] = 50.0f;
      btok[2 * b + 1] = (int32_t)(pr.p.vocab_offset + (b * 5 + 3) % V), bval[2 * b + 1] = -3.0f;
    }
    const long long stride = (pr.p.vocab_offset + V + 31) / 32;
    uint32_t *mask = ref_make_mask(&pr.p, stride, 0.5, &st);
    fs_options ob = o;
    ob.logit_bias_tokens = btok;
    ob.logit_bias_values = bval;
    ob.logit_bias_count = 2;
    ob.repetition_penalty = 1.5f;
    ob.token_mask = mask;
    snprintf(what, sizeof what, "it %d bias, penalty, mask", it);
    check_call(&pr.p, &s, &ob, FS_NOISE_TOKEN, what);
    fs_options of = o;
    of.min_p = 0.05f;
    of.top_k = 1 + it % 20;
    snprintf(what, sizeof what, "it %d min-p, top-k", it);
    check_call(&pr.p, &s, &of, FS_NOISE_TOKEN, what);
    calls += 4;
    if (pr.p.vocab_offset % 16 == 0) { /* FS_NOISE_GROUP16 with a soft-cap and the mask */
      fs_options og = o;
      og.logit_softcap = 3.0f;
      og.token_mask = mask;
      snprintf(what, sizeof what, "it %d group16, soft-cap, mask", it);
      check_call(&pr.p, &s, &og, FS_NOISE_GROUP16, what);
      calls++;
    }
    free(mask);
    ref_prob_free(&pr);
  }
  printf("oracle: %d calls over 120 problems\n", calls);
}

/* z_v = W[v][0] (H = e_0): values from {-1, 0, 1, 2}, some NaN and -inf;
** row 0 greedy, row 1 sampled, row 2 with every id masked. */
static void tie_case(void) {
  enum { B = 3, V = 64, D = 8, S = 4 };
  static const float pick[] = {-1.0f, 0.0f, 1.0f, 2.0f};
  uint16_t h[B * D], w[V * D];
  memset(h, 0, sizeof h);
  memset(w, 0, sizeof w);
  for (int b = 0; b < B; b++) h[b * D] = fs_test_f2bf(1.0f);
  unsigned long long st = 0x71e5u;
  int nan = 0, twos = 0;
  for (int v = 0; v < V; v++) {
    const float z = v % 13 == 5 ? -INFINITY : v % 17 == 3 ? NAN : pick[fs_test_rand(&st) % 4];
    w[v * D] = fs_test_f2bf(z);
    nan += isnan(z), twos += z == 2.0f;
  }
  fs_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B, p.hidden = D, p.vocab = V, p.dtype = FS_DTYPE_BF16;
  p.hidden_states = h, p.weight = w;
  const float temps[B] = {0.0f, 1.0f, 1.0f};
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.num_samples = S;
  s.temperatures = temps;
  s.seed = 7;
  uint32_t mask[B * 2] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0u, 0u};
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.token_mask = mask;
  CHECK(check_call(&p, &s, &o, FS_NOISE_TOKEN, "ties") > 0); /* the strict rule is told apart */
  int32_t tok[B * S], rk[B * S];
  float lg[B * S];
  o.ranks = rk;
  CHECK(fs_reference_sample_ex(&p, &s, FS_NOISE_TOKEN, &o, tok, lg, NULL) == FS_OK);
  CHECK_MSG(lg[0] == 2.0f && rk[0] == twos && twos > 1, "greedy row: logit %g rank %d, %d twos",
            (double)lg[0], rk[0], twos);
  CHECK_MSG(lg[2 * S] == -INFINITY && rk[2 * S] == V - nan,
            "no allowed id: logit %g rank %d, %d ids not NaN", (double)lg[2 * S], rk[2 * S],
            V - nan);
  printf("ties: greedy rank %d (the ids at 2), no allowed id %d (%d NaN)\n", rk[0], rk[2 * S],
         nan);
}

static void bad_input(void) {
  ref_prob pr;
  unsigned long long st = 0xbadu;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 8, 50, 0, 0, 0, 1.0, &st);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.num_samples = 1;
  s.temperature = 1.0f;
  int32_t rk[4], tok[2];
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.ranks = (int32_t *)((char *)rk + 2);
  ref_expect_bad(&pr.p, &s, &o, "options->ranks=", "misaligned ranks");
  CHECK(fs_test_has(fs_last_error(NULL), "4-byte aligned"));
  o.ranks = rk;
  /* FS_NOISE_GROUP16 takes ranks (since 0.3.17), but not with filters */
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, tok, NULL, NULL) == FS_OK,
            "group16: %s", fs_last_error(NULL));
  o.top_k = 5;
  CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, tok, NULL, NULL) ==
            FS_INVALID_ARGUMENT &&
        fs_test_has(fs_last_error(NULL), "options->min_p/top_k/top_p") &&
        fs_test_has(fs_last_error(NULL), "FS_NOISE_TOKEN"));
  o.top_k = 0;
  /* a 0.3.12 struct: the new field is not read */
  o.size = offsetof(fs_options, ranks);
  o.ranks = (int32_t *)(uintptr_t)1;
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK,
            "0.3.12 size: %s", fs_last_error(NULL));
  ref_prob_free(&pr);
}

int main(void) {
  oracle_cases();
  tie_case();
  bad_input();
  return fs_test_done("test_reference_ranks");
}
