// fs-test-timeout: 120
/*
** test_reference_penalty.c: the CPU reference's repetition penalty
** (fs_options.repetition_penalty / repetition_penalties, since 0.3.9)
** against an oracle written here from flashsampling.h's contract: each
** distinct token listed in row b's logit bias (in the call's ids) has its
** logit z (after the soft-cap) replaced by z / r where z > 0 and by z r
** where z <= 0, and then its values' fp32 sum added; r is
** repetition_penalties[b] when that is given (NaN, <= 0 and +inf penalise
** nothing), else the scalar; r = 1 changes nothing; logits stay raw.
**
**  1. Oracle, bit for bit: 120 random problems (bf16 and fp16; B 1..4, D
**     8..64, V 20..300, vocab_offset 0, 37 and 4093; greedy and sampled
**     rows, scalar or per-row temperatures, seeds and offsets; a mask on a
**     third; a soft-cap c = 3 on a quarter; 1..24 entries a row with repeats,
**     pads and values multiples of 1/32 in [-2, 2]); r a scalar of 0.05,
**     0.5, 1.5 or 4, or a per-row array of such values mixed with NaN, -2,
**     +inf, 0 and 1.  The oracle forms z in double from the inputs (ref_util.h),
**     caps it, penalises the listed tokens, adds their sums, masks and draws.
**     Tokens and keys must equal it bit for bit, logits be (float) of the raw
**     capped logit.  Each problem also checks that these equal the
**     unpenalised call bit for bit: r = 1; a per-row array of {1, NaN, -2,
**     +inf, 0}; a 0.3.4-sized struct (size = offsetof(fs_options,
**     repetition_penalty)) with garbage in the penalty's fields; count 0.
**     Not vacuous: the penalty must move a fifth of the sampled draws.
**  2. The law: chi-square of 2 x 10^5 draws (4 rows of one H, 50,000
**     samples each, V = 40, T = 1) against softmax((pen_r(z) + b) / T), with
**     listed tokens of positive and negative logits and a repeated id, for r
**     = 2 (scalar) and r = 0.5 (a per-row array), p > 1e-3; the same counts
**     must reject (fs_stats_must_reject: p < 1e-6, power > 0.999) the
**     penalty ignored, z / r for every sign, the penalty after the sum
**     (pen_r(z + b)), and 1 / r for r.
**  3. Bad input: a scalar of -1, -1e-30, NaN, +inf and -inf is
**     FS_INVALID_ARGUMENT naming options->repetition_penalty and its value;
**     a misaligned array names options->repetition_penalties; 0, 1, 1e-30 and
**     FLT_MAX are accepted.
** Runs in about a second on one core.
*/
#include "fs_reference.h"
#include "fs_rng.h"
#include "fs_stats.h"
#include "fs_test.h"
#include "ref_util.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the oracle ---------------------------------------------------------------------- */

/* Row b's r under options o (0: no penalty). */
static double oracle_r(const fs_options *o, int b) {
  const float r = o->repetition_penalties ? o->repetition_penalties[b] : o->repetition_penalty;
  return r > 0.0f && r < INFINITY && r != 1.0f ? (double)r : 0.0;
}

/* z under the penalty r (0: none). */
static double oracle_pen(double z, double r) {
  if (r == 0.0) return z;
  return z > 0.0 ? z / r : z * r;
}

/* Row b's raw (capped) logits zr and scores zb (listed tokens penalised,
** then their sums added; a NaN score -inf); pen 0 leaves the penalty out. */
static void oracle_row(const fs_problem *p, const fs_options *o, int b, int pen, double *zr,
                       double *zb) {
  const int V = p->vocab;
  float *sum = ref_xalloc(sizeof(float) * (size_t)V);
  int *hits = ref_xalloc(sizeof(int) * (size_t)V);
  ref_oracle_logits(p, b, zr);
  ref_bias_sums(p, o->logit_bias_tokens, o->logit_bias_values, o->logit_bias_count, b, sum,
                hits);
  const double r = pen ? oracle_r(o, b) : 0.0;
  for (int v = 0; v < V; v++) {
    zr[v] = ref_cap(zr[v], o->logit_softcap);
    zb[v] = hits[v] ? oracle_pen(zr[v], r) + (double)sum[v] : zr[v];
    if (hits[v] && isnan(zb[v])) zb[v] = -INFINITY;
  }
  free(sum);
  free(hits);
}

static unsigned rnd(unsigned long long *st, unsigned n) {
  return (unsigned)(fs_test_rand(st) % n);
}

/* ---- 1. random problems ---------------------------------------------------------------- */

static long g_draws, g_sampled, g_moved, g_bad_draw, g_bad_logit, g_bad_same;

#define REPORT(counter, ...)                           \
  do {                                                 \
    if ((counter)++ < 6) fprintf(stderr, __VA_ARGS__); \
  } while (0)

/* Tokens, logits and keys of a reference call (logprobs not asked). */
static int call(const fs_problem *p, const fs_sampling *s, const fs_options *o, ref_outs *out) {
  return fs_reference_sample_ex(p, s, FS_NOISE_TOKEN, o, out->tokens, out->logits, out->keys);
}

static int same_outs(const ref_outs *a, const ref_outs *b, size_t n) {
  return !memcmp(a->tokens, b->tokens, n * 4) && !memcmp(a->logits, b->logits, n * 4) &&
         !memcmp(a->keys, b->keys, n * 8);
}

static void problem(int it, unsigned long long *st) {
  static const int Ds[] = {8, 16, 24, 32, 64};
  static const long long offs[] = {0, 37, 4093};
  static const float rs[] = {0.05f, 0.5f, 1.5f, 4.0f};
  const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
  const int B = 1 + (int)rnd(st, 4), D = Ds[rnd(st, 5)], V = 20 + (int)rnd(st, 281);
  const long long voff = offs[it % 3];
  const int count = 1 + (int)rnd(st, 24);
  ref_prob pr;
  ref_prob_make(&pr, dtype, B, D, V, 0, 0, voff, ref_scale_for_sd(3.0, D), st);
  float temps[4], reps[4], none[4];
  uint64_t seeds[4], offsets[4];
  const fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offsets, st);
  const long long stride = (voff + V + 31) / 32;
  uint32_t *m = it % 3 == 1 ? ref_make_mask(&pr.p, stride, 0.6, st) : NULL;
  int32_t *tok = ref_xalloc(sizeof(int32_t) * (size_t)B * (size_t)count);
  float *val = ref_xalloc(sizeof(float) * (size_t)B * (size_t)count);
  for (int i = 0; i < B * count; i++) {
    const unsigned r = rnd(st, 100), j = (unsigned)(i % count);
    tok[i] = j > 0 && r < 20 ? tok[i - 1 - (int)rnd(st, j)]
             : r < 30        ? -1
                             : (int32_t)(voff + rnd(st, (unsigned)V));
    val[i] = (float)((int)rnd(st, 129) - 64) / 32.0f;
  }
  static const float odd[] = {1.0f, NAN, -2.0f, INFINITY, 0.0f};
  for (int b = 0; b < B; b++) {
    reps[b] = b % 2 ? odd[rnd(st, 5)] : rs[rnd(st, 4)];
    none[b] = odd[(b + it) % 5];
  }
  fs_options o = {.size = sizeof o, .token_mask = m, .logit_softcap = it % 4 == 3 ? 3.0f : 0.0f,
                  .logit_bias_tokens = tok, .logit_bias_values = val,
                  .logit_bias_count = count};
  if (it % 2) o.repetition_penalties = reps;
  else o.repetition_penalty = rs[it / 2 % 4];
  char what[160];
  snprintf(what, sizeof what, "problem %d (%s B=%d D=%d V=%d off=%lld n=%d r=%s%s)", it,
           dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, D, V, voff, count,
           o.repetition_penalties ? "per-row" : "scalar", m ? " masked" : "");
  const size_t n = (size_t)B * (size_t)s.num_samples;
  ref_outs got = ref_outs_new(n), plain = ref_outs_new(n), x = ref_outs_new(n);
  CHECK_MSG(call(&pr.p, &s, &o, &got) == FS_OK, "%s: %s", what, fs_last_error(NULL));
  fs_options off = o;
  off.repetition_penalty = 0.0f;
  off.repetition_penalties = NULL;
  CHECK_MSG(call(&pr.p, &s, &off, &plain) == FS_OK, "%s: %s", what, fs_last_error(NULL));

  /* the calls that must be the unpenalised one */
  for (int k = 0; k < 4; k++) {
    fs_options y = off;
    const char *name = "r = 1";
    if (k == 0) y.repetition_penalty = 1.0f;
    if (k == 1) y.repetition_penalties = none, name = "a per-row array of 1, NaN, -2, +inf, 0";
    if (k == 2) {
      y.size = offsetof(fs_options, repetition_penalty), name = "a 0.3.4-sized struct";
      y.repetition_penalty = -5.0f; /* garbage past the struct the caller knew */
      y.repetition_penalties = (const float *)(uintptr_t)0x3;
    }
    fs_options z = o; /* count 0: nothing is listed, so nothing penalised */
    if (k == 3) {
      z.logit_bias_count = 0, name = "count 0";
      off.logit_bias_count = 0;
      CHECK(call(&pr.p, &s, &off, &plain) == FS_OK);
      off.logit_bias_count = count;
      y = z;
    }
    CHECK_MSG(call(&pr.p, &s, &y, &x) == FS_OK, "%s: %s: %s", what, name, fs_last_error(NULL));
    if (!same_outs(&x, &plain, n))
      REPORT(g_bad_same, "%s: %s differs from the unpenalised call\n", what, name);
  }
  CHECK(call(&pr.p, &s, &off, &plain) == FS_OK); /* with the list again */

  double *zr = ref_xalloc(sizeof(double) * (size_t)V), *zb = ref_xalloc(sizeof(double) * (size_t)V);
  double *zu = ref_xalloc(sizeof(double) * (size_t)V);
  for (int b = 0; b < B; b++) {
    oracle_row(&pr.p, &o, b, 0, zr, zu);
    oracle_row(&pr.p, &o, b, 1, zr, zb);
    const float T = s.temperatures ? s.temperatures[b] : s.temperature;
    for (int t = 0; t < s.num_samples; t++) {
      const size_t i = (size_t)b * (size_t)s.num_samples + (size_t)t;
      const ref_odraw d = ref_oracle_draw(&pr.p, &s, m, stride, zb, b, t);
      const ref_odraw du = ref_oracle_draw(&pr.p, &s, m, stride, zu, b, t);
      const int ok = ref_allowed(m, stride, b, d.token);
      const float wl = ok ? (float)zr[d.token - voff] : -INFINITY;
      g_draws++;
      if (T > 0.0f) g_sampled++, g_moved += d.token != du.token;
      if (got.tokens[i] != d.token ||
          got.keys[i] != fs_pack_key((float)d.score, (uint32_t)d.token))
        REPORT(g_bad_draw, "%s: b=%d s=%d: token %d key %016llx, want %d key %016llx\n", what, b,
               t, (int)got.tokens[i], (unsigned long long)got.keys[i], (int)d.token,
               (unsigned long long)fs_pack_key((float)d.score, (uint32_t)d.token));
      if (!ref_float_bits_equal(got.logits[i], wl))
        REPORT(g_bad_logit, "%s: b=%d s=%d: logit %.9g, want the raw %.9g\n", what, b, t,
               (double)got.logits[i], (double)wl);
      if (plain.tokens[i] != du.token)
        REPORT(g_bad_draw, "%s: b=%d s=%d: the unpenalised call draws %d, the oracle %d\n", what,
               b, t, (int)plain.tokens[i], (int)du.token);
    }
  }
  free(zr);
  free(zb);
  free(zu);
  ref_outs_free(&got);
  ref_outs_free(&plain);
  ref_outs_free(&x);
  free(tok);
  free(val);
  free(m);
  ref_prob_free(&pr);
}

static void test_oracle(void) {
  unsigned long long st = 0x70656e616c7479ull;
  const int N = 120;
  for (int it = 0; it < N; it++) problem(it, &st);
  printf("oracle: %ld draws of %d problems; the penalty moved %ld of %ld sampled draws\n",
         g_draws, N, g_moved, g_sampled);
  CHECK_MSG(g_bad_draw == 0, "%ld draws' tokens or keys differ from the oracle", g_bad_draw);
  CHECK_MSG(g_bad_logit == 0, "%ld draws' logits are not the raw logits", g_bad_logit);
  CHECK_MSG(g_bad_same == 0, "%ld calls differ from the unpenalised call", g_bad_same);
  CHECK_MSG(g_moved * 5 > g_sampled, "the penalty moved only %ld of %ld sampled draws", g_moved,
            g_sampled);
}

/* ---- 2. the law ------------------------------------------------------------------------ */

#define LAW_ROWS 4
#define LAW_D 32
#define LAW_S 50000
#define LAW_V 40
#define LAW_N 9

/* Power (printed per case): over 2e5 draws and ~39 degrees of freedom, each
** wrong law below has a noncentrality in the thousands or more, its
** statistic's mean far above the 1e-6 critical value (~85). */
static void law_case(float r, int per_row, unsigned long long seed) {
  unsigned long long st = seed;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, LAW_ROWS, LAW_D, LAW_V, 0, 0, 0,
                ref_scale_for_sd(2.0, LAW_D), &st);
  for (int b = 1; b < LAW_ROWS; b++) memcpy(pr.h + b * LAW_D, pr.h, sizeof(uint16_t) * LAW_D);
  double z[LAW_V], p[LAW_V], q[LAW_V], w[LAW_V];
  float sum[LAW_V];
  int hits[LAW_V], ord[LAW_V];
  ref_oracle_logits(&pr.p, 0, z);
  for (int v = 0; v < LAW_V; v++) ord[v] = v;
  for (int i = 1; i < LAW_V; i++) /* ids by logit, largest first */
    for (int j = i; j > 0 && z[ord[j]] > z[ord[j - 1]]; j--) {
      const int x = ord[j];
      ord[j] = ord[j - 1], ord[j - 1] = x;
    }
  /* the top three and two of the lowest listed, one twice; a middle one with
  ** a value; a pad */
  const int32_t et[LAW_N] = {ord[0], ord[1], ord[2], ord[LAW_V - 1], ord[LAW_V - 3], ord[1],
                             ord[LAW_V / 2], -1, ord[LAW_V - 8]};
  const float ev[LAW_N] = {0.0f, -0.25f, 0.5f, 0.0f, 1.0f, -0.25f, 0.75f, 9.0f, 0.0f};
  int32_t tok[LAW_ROWS * LAW_N];
  float val[LAW_ROWS * LAW_N], reps[LAW_ROWS];
  for (int b = 0; b < LAW_ROWS; b++) {
    reps[b] = r;
    for (int j = 0; j < LAW_N; j++) tok[b * LAW_N + j] = et[j], val[b * LAW_N + j] = ev[j];
  }
  ref_bias_sums(&pr.p, tok, val, LAW_N, 0, sum, hits);
  const fs_sampling s = {1.0f, NULL, LAW_S, seed ^ 0x5eedull, NULL, 9u, NULL};
  fs_options opt = {.size = sizeof opt, .logit_bias_tokens = tok, .logit_bias_values = val,
                    .logit_bias_count = LAW_N};
  if (per_row) opt.repetition_penalties = reps;
  else opt.repetition_penalty = r;
  const size_t N = (size_t)LAW_ROWS * LAW_S;
  int32_t *tk = ref_xalloc(sizeof(int32_t) * N);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &opt, tk, NULL, NULL) == FS_OK);
  int64_t counts[LAW_V] = {0};
  for (size_t j = 0; j < N; j++) {
    REQUIRE(tk[j] >= 0 && tk[j] < LAW_V);
    counts[tk[j]]++;
  }
  char what[64];
  snprintf(what, sizeof what, "law r=%g %s", (double)r, per_row ? "per-row" : "scalar");
  const double rd = (double)r;
  for (int v = 0; v < LAW_V; v++) w[v] = hits[v] ? oracle_pen(z[v], rd) + sum[v] : z[v];
  fs_stats_softmax(w, LAW_V, 1.0, p);
  const fs_chi2 good = fs_stats_chi2_gof(counts, p, LAW_V);
  printf("%s: chi2=%.1f dof=%d p=%.3g\n", what, good.stat, good.dof, good.p);
  CHECK(good.total == (int64_t)N && good.impossible == 0);
  CHECK_MSG(good.p > 1e-3, "%s: chi-square rejects softmax(pen_r(z) + b): p=%g", what, good.p);
  for (int v = 0; v < LAW_V; v++) w[v] = z[v] + (hits[v] ? sum[v] : 0.0);
  fs_stats_softmax(w, LAW_V, 1.0, q);
  fs_stats_must_reject(what, counts, p, q, LAW_V, (int64_t)N, "the penalty ignored");
  for (int v = 0; v < LAW_V; v++) w[v] = hits[v] ? z[v] / rd + sum[v] : z[v];
  fs_stats_softmax(w, LAW_V, 1.0, q);
  fs_stats_must_reject(what, counts, p, q, LAW_V, (int64_t)N, "z / r for every sign");
  for (int v = 0; v < LAW_V; v++) w[v] = hits[v] ? oracle_pen(z[v] + sum[v], rd) : z[v];
  fs_stats_softmax(w, LAW_V, 1.0, q);
  fs_stats_must_reject(what, counts, p, q, LAW_V, (int64_t)N, "pen_r(z + b)");
  for (int v = 0; v < LAW_V; v++) w[v] = hits[v] ? oracle_pen(z[v], 1.0 / rd) + sum[v] : z[v];
  fs_stats_softmax(w, LAW_V, 1.0, q);
  fs_stats_must_reject(what, counts, p, q, LAW_V, (int64_t)N, "1 / r");
  free(tk);
  ref_prob_free(&pr);
}

/* ---- 3. bad input ------------------------------------------------------------------------ */

static void test_bad_input(void) {
  unsigned long long st = 0xbadull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 16, 50, 0, 0, 0, ref_scale_for_sd(1.0, 16), &st);
  const int32_t tok[2] = {3, 7};
  const float val[2] = {0.0f, 0.0f};
  const fs_sampling s = {1.0f, NULL, 1, 5u, NULL, 0u, NULL};
  fs_options o = {.size = sizeof o, .logit_bias_tokens = tok, .logit_bias_values = val,
                  .logit_bias_count = 1};
  static const float bad[] = {-1.0f, -1e-30f, NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o.repetition_penalty = bad[i];
    ref_expect_bad(&pr.p, &s, &o, "options->repetition_penalty=", NULL);
  }
  o.repetition_penalty = -1.0f;
  ref_expect_bad(&pr.p, &s, &o, "-1: must be 0 (none) or a finite r > 0", NULL);
  static const float good[] = {0.0f, 1.0f, 1e-30f, FLT_MAX};
  int32_t t[2];
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    o.repetition_penalty = good[i];
    CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, t, NULL, NULL) == FS_OK,
              "repetition_penalty %g refused: %s", (double)good[i], fs_last_error(NULL));
  }
  o.repetition_penalty = 0.0f;
  o.repetition_penalties = (const float *)(uintptr_t)0x6;
  ref_expect_bad(&pr.p, &s, &o, "options->repetition_penalties=", NULL);
  ref_prob_free(&pr);
  printf("bad input: refused and named\n");
}

int main(void) {
  test_oracle();
  law_case(2.0f, 0, 0x6c617770656e31ull);
  law_case(0.5f, 1, 0x6c617770656e32ull);
  test_bad_input();
  return fs_test_done("test_reference_penalty");
}
