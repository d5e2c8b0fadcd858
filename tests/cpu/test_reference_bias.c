// fs-test-timeout: 120
/*
** test_reference_bias.c: the CPU reference's logit bias (fs_options.
** logit_bias_tokens / logit_bias_values / logit_bias_count of
** fs_reference_sample_ex and fs_reference_row_ex, since 0.3.3), against an
** oracle written here from flashsampling.h's contract: entry j of row b adds
** logit_bias_values[b * count + j] to the logit of token
** logit_bias_tokens[b * count + j] after the soft-cap and before the token
** mask, the temperature, the noise and greedy rows' argmax; ids outside
** [vocab_offset, vocab_offset + V) are ignored; a token listed several times
** gets the sum of its values (in fp32, in entry order); -inf bans, +inf draws
** (the smallest such id), an allowed biased token whose score is NaN ranks as
** -inf (below every number, above unbiased NaN scores);
** outputs->logits and logprobs stay those of the raw (capped, unbiased)
** logits, except that a masked winner (a row with nothing drawable) reports
** -inf as the mask's contract says.
**
**  1. Oracle, bit for bit: 150 random problems (bf16 and fp16; B 1..4, D 8..64,
**     V 20..400, vocab_offset 0, 37, 160, 4093 and 100000; 1..3 samples,
**     greedy (T = 0, -1, NaN) and sampled (0.25, 0.7, 1, 3) rows, scalar or
**     per-row temperatures, seeds and offsets; a random mask on a third, with
**     a row of one allowed token and a row of none; a soft-cap c = 2, 5 or 30
**     on three fifths; 0..16 entries a row (one problem with
**     FS_MAX_LOGIT_BIAS) with pads (-1), ids just outside the shard and far
**     outside (INT32_MIN, INT32_MAX), repeated ids, and -inf, +inf and NaN
**     values), plus one problem of D = 65536, B = 9 that the reference runs in
**     three blocks of rows.  The oracle forms z in double from the decoded
**     inputs (k = 0..D-1 in order), caps it, adds the fp32 entry-order sum of
**     a token's values, masks, and takes the argmax of z' / T + fs_noise()
**     (z' on greedy rows), ties to the smaller id, NaN last.  Tokens and keys
**     must equal it bit for bit; logits must be (float) of the raw capped
**     logit (-inf for a masked winner); logprobs the raw logit minus the
**     log-sum-exp of all V raw logits within 1e-6 + 1e-7 |want|;
**     fs_reference_row_ex (samples 0 and S-1 of every row) the same winner,
**     its double score bit for bit, its double raw logit and lse.  Each
**     problem also checks, bit for bit in all four outputs: count 0 with
**     garbage pointers, a 0.3.2-sized struct (size = offsetof(fs_options,
**     logit_bias_tokens)) with the real arrays, and arrays whose every id is
**     outside the shard all equal the unbiased call; the entries of each row
**     in reverse order equal the call itself.
**  2. Equivalences, bit for bit in tokens and keys: (a) a bias b_t on token t
**     equals the unbiased problem with eight more hidden columns, H's first
**     1 and W row t's first b_t (z' = z + b_t in the same double sum, b_t
**     and +-inf exact in bf16/fp16): the bias path against the plain one;
**     (b) two or three vocabulary shards with the same bias arrays: the
**     largest key over shards is the unsharded key, with its token and
**     logit; (c) a bias of -inf on some tokens equals clearing their mask
**     bits.
**  3. Explicit rows: +inf on two ids (listed larger first) draws the smaller
**     on greedy and sampled rows, and its raw logit; +inf on a masked id
**     loses to +inf on an allowed one; +inf with -inf on one token (NaN) and
**     NaN on the greedy argmax lose; every token NaN but one banned with
**     -inf draws the first id (every score -inf); ids just outside the shard
**     change nothing; the
**     fp32 entry-order sum: {8, 2^-22 x 4} sums to 8 exactly in fp32 (each
**     2^-22 is a quarter ulp of 8) but to 8 + 2^-20 in double, while
**     {2^-22 x 4, 8} is 8 + 2^-20 in both.
**  4. Rows with little or nothing to draw: a row whose mask allows only
**     biased tokens draws among those of finite bias, its law checked by
**     chi-square (4 x 10^4 draws); a row whose only allowed token has bias
**     -inf (or NaN, ranked as -inf) draws as a row of no allowed token: its first id, with
**     logit -inf and logprob -inf, key fs_pack_key(-inf, first id) (the
**     masked first id wins the tie of -infs), even
**     with +inf or NaN on that (masked) first id, since the mask comes after
**     the bias; a row
**     whose only allowed token is the first id, or whose every token has
**     bias -inf, draws the first id with its raw logit.
**  5. The law: chi-square of 2 x 10^5 draws (4 rows of one H, 50,000
**     samples each) against softmax((ref_cap(z) + b) / T) for two cases (bf16,
**     V = 48, vocab_offset 1000, T = 0.8, no cap; fp16, V = 40, vocab_offset
**     0, T = 1.5, c = 3), and both again under FS_NOISE_GROUP16 (vocab_offset
**     1008 for the first: a multiple of 16; since 0.3.17), 12 entries
**     with a ban, a repeated id, a pad and ids
**     just outside the shard (value +30: a shard test off by one would
**     draw them), p > 1e-3; the same counts must reject (p < 1e-6, power >
**     0.999999) the bias ignored, the bias added after the temperature
**     (z / T + b), halved, with its sign flipped, a repeated id's last entry
**     only, and (with the cap) the bias added before the cap.
**  6. Bad input: logit_bias_count -1, -1000, INT32_MIN, FS_MAX_LOGIT_BIAS + 1
**     and INT32_MAX are FS_INVALID_ARGUMENT naming options->logit_bias_count
**     with its value and the range (fs_reference_row_ex too);
**     FS_MAX_LOGIT_BIAS is accepted, and at V = 2^18 refused naming the
**     most that V takes (16383, accepted; since 0.3.11, the long lists'
**     sort words); NULL and misaligned arrays are named;
**     a 0.3.2-sized struct with garbage in the bias fields (counts out of
**     range, NULL or odd pointers, or arrays whose +inf would decide every
**     draw) is accepted and draws the unbiased tokens; sizes between 0.3.2's
**     and this one are refused naming options->size; FS_NOISE_GROUP16 with
**     a bias of 2 entries runs, with 1,025 (above FS_BIAS_SHORT) or with top
**     logprobs is FS_INVALID_ARGUMENT naming the argument and the rule,
**     without a bias (count 0, or a 0.3.2 struct) it runs.
** Runs in about a second on one core.
*/
#include "fs_int.h" /* FS_OPTIONS_SIZE_033 */
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

/* Row b's logits: zr raw (capped, unbiased), zb biased (zr + the fp32 sum,
** in double); returns the raw log-sum-exp.  hits may be NULL. */
static double oracle_row(const fs_problem *p, const fs_options *o, int b, double *zr,
                         double *zb, int *hits) {
  const int V = p->vocab;
  float *sum = ref_xalloc(sizeof(float) * (size_t)V);
  int *h = ref_xalloc(sizeof(int) * (size_t)V);
  ref_oracle_logits(p, b, zr);
  for (int v = 0; v < V; v++) zr[v] = ref_cap(zr[v], o->logit_softcap);
  ref_bias_sums(p, o->logit_bias_tokens, o->logit_bias_values, o->logit_bias_count, b, sum, h);
  for (int v = 0; v < V; v++) {
    zb[v] = h[v] ? zr[v] + (double)sum[v] : zr[v];
    if (h[v] && isnan(zb[v])) zb[v] = -INFINITY; /* a biased NaN ranks as -inf */
    if (hits) hits[v] = h[v];
  }
  free(sum);
  free(h);
  return ref_lse(zr, V);
}

/* The mask stride options o stand for (0 means the least). */
static long long mask_stride(const fs_problem *p, const fs_options *o) {
  return o->token_mask_stride ? o->token_mask_stride : (p->vocab_offset + p->vocab + 31) / 32;
}

static int same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* ---- random problems ----------------------------------------------------------------- */

static unsigned rnd(unsigned long long *st, unsigned n) {
  return (unsigned)(fs_test_rand(st) % n);
}

/* An id this call must ignore: just before or just past the shard, further
** out, or negative. */
static int32_t outside_id(const fs_problem *p, unsigned long long *st) {
  const long long lo = p->vocab_offset, hi = p->vocab_offset + p->vocab;
  switch (rnd(st, 6)) {
  case 0: return lo > 0 ? (int32_t)(lo - 1) : -2;
  case 1: return (int32_t)hi;
  case 2: return (int32_t)(hi + 1 + rnd(st, 100));
  case 3: return lo > 0 ? (int32_t)rnd(st, (unsigned)lo) : INT32_MAX;
  case 4: return INT32_MIN;
  default: return -7;
  }
}

/* Fills [B, count] entries: in-shard ids, repeats of an earlier entry (20%),
** pads -1 (10%) and outside ids (10%); values multiples of 1/32 in [-8, 8]
** (so that a repeated id's sum is exact in fp32 and in double alike: the
** order of summation is tested in section 3), any float in (-8, 8) for half
** the ids named once, and with `specials` -inf, +inf and NaN (2%, 2%, 1%). */
static void make_bias(const fs_problem *p, int count, int specials, int32_t *tok, float *val,
                      unsigned long long *st) {
  for (int b = 0; b < p->batch; b++) {
    int32_t *t = tok + (size_t)b * count;
    float *x = val + (size_t)b * count;
    for (int j = 0; j < count; j++) {
      const unsigned r = rnd(st, 100);
      if (j > 0 && r < 20) t[j] = t[rnd(st, (unsigned)j)];
      else if (r < 30) t[j] = -1;
      else if (r < 40) t[j] = outside_id(p, st);
      else t[j] = (int32_t)(p->vocab_offset + rnd(st, (unsigned)p->vocab));
      const unsigned r2 = rnd(st, 100);
      x[j] = specials && r2 < 2   ? -INFINITY
             : specials && r2 < 4 ? INFINITY
             : specials && r2 < 5 ? NAN
                                  : (float)((int)rnd(st, 513) - 256) / 32.0f;
    }
    for (int j = 0; j < count; j++) {
      int named = 0;
      for (int k = 0; k < count; k++) named += t[k] == t[j];
      if (named == 1 && isfinite(x[j]) && rnd(st, 2)) x[j] = (float)(8.0 * fs_test_uniform(st));
    }
  }
}

/* Totals over section 1 (printed; some CHECKed so that it is not vacuous). */
static long g_draws, g_sampled, g_moved, g_biased, g_pinf, g_nodraw, g_masked_first;
static long g_bad_draw, g_bad_logit, g_bad_lp, g_bad_row, g_bad_same;
static double g_worst_lp;

#define REPORT(counter, ...)                        \
  do {                                              \
    if ((counter)++ < 6) fprintf(stderr, __VA_ARGS__); \
  } while (0)

/* Checks the call with options `base` (its logprobs set here) and the calls
** that must equal it or the unbiased call (see the file's comment). */
static void check_problem(const fs_problem *p, const fs_sampling *s, const fs_options *base,
                          const char *what) {
  const int B = p->batch, V = p->vocab, S = s->num_samples, count = base->logit_bias_count;
  const long long voff = p->vocab_offset, stride = mask_stride(p, base);
  const uint32_t *m = base->token_mask;
  const size_t n = (size_t)B * S, ne = (size_t)B * (size_t)count + 1;
  ref_outs o = ref_outs_new(n), u = ref_outs_new(n), w = ref_outs_new(n);
  float *lp = ref_xalloc(sizeof(float) * n), *lpu = ref_xalloc(sizeof(float) * n);
  float *lpw = ref_xalloc(sizeof(float) * n);
  double *zr = ref_xalloc(sizeof(double) * (size_t)V), *zb = ref_xalloc(sizeof(double) * (size_t)V);
  double *z0 = ref_xalloc(sizeof(double) * (size_t)V);
  int *hits = ref_xalloc(sizeof(int) * (size_t)V);
  int32_t *tok2 = ref_xalloc(sizeof(int32_t) * ne);
  float *val2 = ref_xalloc(sizeof(float) * ne);

  fs_options opt = *base;
  opt.logprobs = lp;
  int rc = fs_reference_sample_ex(p, s, FS_NOISE_TOKEN, &opt, o.tokens, o.logits, o.keys);
  CHECK_MSG(rc == FS_OK, "%s: %s", what, fs_last_error(NULL));
  fs_options none = opt;
  none.logprobs = lpu;
  none.logit_bias_tokens = NULL;
  none.logit_bias_values = NULL;
  none.logit_bias_count = 0;
  REQUIRE(fs_reference_sample_ex(p, s, FS_NOISE_TOKEN, &none, u.tokens, u.logits, u.keys) ==
          FS_OK);
  if (rc != FS_OK) goto done;

  /* Calls that must be the unbiased one (k < 3) or this one (k == 3). */
  for (int k = 0; k < 4; k++) {
    fs_options x = opt;
    x.logprobs = lpw;
    if (k == 0) { /* count 0: the pointers unread (odd addresses: never valid arrays) */
      x.logit_bias_count = 0;
      x.logit_bias_tokens = (const int32_t *)(uintptr_t)0x3;
      x.logit_bias_values = (const float *)(uintptr_t)0x5;
    } else if (k == 1) { /* 0.3.2's struct ends before the bias fields */
      x.size = offsetof(fs_options, logit_bias_tokens);
    } else if (k == 2) { /* every id outside the shard */
      for (size_t j = 0; j + 1 < ne; j++) {
        const int32_t t = base->logit_bias_tokens[j];
        tok2[j] = t >= voff && t < voff + V ? (j % 3 ? -1 : (int32_t)(voff + V)) : t;
        val2[j] = base->logit_bias_values[j];
      }
      x.logit_bias_tokens = tok2;
      x.logit_bias_values = val2;
    } else { /* each row's entries reversed: the same sums (exact here) */
      for (int b = 0; b < B; b++)
        for (int j = 0; j < count; j++) {
          tok2[(size_t)b * count + j] = base->logit_bias_tokens[(size_t)b * count + count - 1 - j];
          val2[(size_t)b * count + j] = base->logit_bias_values[(size_t)b * count + count - 1 - j];
        }
      x.logit_bias_tokens = tok2;
      x.logit_bias_values = val2;
    }
    rc = fs_reference_sample_ex(p, s, FS_NOISE_TOKEN, &x, w.tokens, w.logits, w.keys);
    CHECK_MSG(rc == FS_OK, "%s: variant %d: %s", what, k, fs_last_error(NULL));
    if (rc != FS_OK) continue;
    const ref_outs *want = k < 3 ? &u : &o;
    const float *wlp = k < 3 ? lpu : lp;
    if (!(same_bits(w.tokens, want->tokens, n * 4) && same_bits(w.logits, want->logits, n * 4) &&
          same_bits(w.keys, want->keys, n * 8) && same_bits(lpw, wlp, n * 4)))
      REPORT(g_bad_same, "%s: %s differs from %s\n", what,
             k == 0   ? "count 0 with garbage pointers"
             : k == 1 ? "a 0.3.2-sized struct"
             : k == 2 ? "ids all outside the shard"
                      : "the entries reversed",
             k < 3 ? "the unbiased call" : "the call");
  }

  for (int b = 0; b < B; b++) {
    const double lse = oracle_row(p, &opt, b, zr, zb, hits);
    for (int v = 0; v < V; v++) z0[v] = zr[v];
    const float T = s->temperatures ? s->temperatures[b] : s->temperature;
    const int greedy = !(T > 0.0f);
    for (int t = 0; t < S; t++) {
      const size_t i = (size_t)b * S + t;
      const ref_odraw d = ref_oracle_draw(p, s, m, stride, zb, b, t);
      const ref_odraw d0 = ref_oracle_draw(p, s, m, stride, z0, b, t);
      const int v = (int)(d.token - voff), ok = ref_allowed(m, stride, b, d.token);
      const float wl = ok ? (float)zr[v] : -INFINITY;
      const double wlp = ok ? zr[v] - lse : -INFINITY;
      g_draws++;
      g_biased += hits[v] > 0;
      g_pinf += d.z == INFINITY;
      g_nodraw += !(d.z > -INFINITY);
      g_masked_first += !ok;
      if (!greedy) g_sampled++, g_moved += d.token != d0.token;
      if (o.tokens[i] != d.token || o.keys[i] != fs_pack_key((float)d.score, (uint32_t)d.token))
        REPORT(g_bad_draw, "%s: b=%d s=%d%s: token %d key %016llx, want %d key %016llx "
               "(biased logit %.9g)\n", what, b, t, greedy ? " (greedy)" : "",
               (int)o.tokens[i], (unsigned long long)o.keys[i], (int)d.token,
               (unsigned long long)fs_pack_key((float)d.score, (uint32_t)d.token), d.z);
      if (!ref_float_bits_equal(o.logits[i], wl))
        REPORT(g_bad_logit, "%s: b=%d s=%d: token %d reports logit %.9g, want the raw %.9g "
               "(biased %.9g)\n", what, b, t, (int)d.token, (double)o.logits[i],
               (double)wl, d.z);
      const double err = fabs((double)lp[i] - wlp);
      if (!(wlp == -INFINITY ? lp[i] == -INFINITY : err <= 1e-6 + 1e-7 * fabs(wlp)))
        REPORT(g_bad_lp, "%s: b=%d s=%d: token %d logprob %.9g, want %.9g\n", what, b, t,
               (int)d.token, (double)lp[i], wlp);
      else if (wlp != -INFINITY && err > g_worst_lp)
        g_worst_lp = err;
      /* the unbiased call against the oracle without a bias */
      if (u.tokens[i] != d0.token || u.keys[i] != fs_pack_key((float)d0.score, (uint32_t)d0.token))
        REPORT(g_bad_draw, "%s: b=%d s=%d: the unbiased call draws %d, the oracle %d\n", what,
               b, t, (int)u.tokens[i], (int)d0.token);
    }
    /* fs_reference_row_ex: the same winner, its double score, raw logit and lse */
    for (int t = 0; t < S; t += S > 1 ? S - 1 : 1) {
      fs_ref_result r;
      rc = fs_reference_row_ex(p, s, FS_NOISE_TOKEN, &opt, b, t, &r);
      CHECK_MSG(rc == FS_OK, "%s: fs_reference_row_ex: %s", what, fs_last_error(NULL));
      if (rc != FS_OK) continue;
      const ref_odraw d = ref_oracle_draw(p, s, m, stride, zb, b, t);
      const double zw = ref_allowed(m, stride, b, d.token) ? zr[d.token - voff] : -INFINITY;
      if (!(r.token == d.token && same_bits(&r.score, &d.score, sizeof(double)) &&
            r.logit == zw && fabs(r.lse - lse) <= 1e-12 * (1.0 + fabs(lse))))
        REPORT(g_bad_row, "%s: fs_reference_row_ex(row %d, sample %d): token %d score %.17g "
               "logit %.17g lse %.17g, want %d %.17g %.17g %.17g\n", what, b, t,
               (int)r.token, r.score, r.logit, r.lse, (int)d.token, d.score, zw, lse);
    }
  }
done:
  free(zr);
  free(zb);
  free(z0);
  free(hits);
  free(tok2);
  free(val2);
  free(lp);
  free(lpu);
  free(lpw);
  ref_outs_free(&o);
  ref_outs_free(&u);
  ref_outs_free(&w);
}

/* One random problem of section 1: number it, B rows, D, V, vocab_offset,
** count entries a row. */
static void oracle_problem(int it, int dtype, int B, int D, int V, long long voff, int count,
                           int specials, unsigned long long *st) {
  static const float caps[] = {0.0f, 2.0f, 0.0f, 5.0f, 30.0f};
  ref_prob pr;
  ref_prob_make(&pr, dtype, B, D, V, 0, 0, voff, ref_scale_for_sd(3.0, D), st);
  float temps[16];
  uint64_t seeds[16], offsets[16];
  REQUIRE(B <= 16);
  const fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offsets, st);
  const long long stride = (voff + V + 31) / 32 + it % 2;
  uint32_t *m = it % 3 == 1 ? ref_make_mask(&pr.p, stride, 0.6, st) : NULL;
  int32_t *tok = ref_xalloc(sizeof(int32_t) * ((size_t)B * count + 1));
  float *val = ref_xalloc(sizeof(float) * ((size_t)B * count + 1));
  make_bias(&pr.p, count, specials, tok, val, st);
  const float c = caps[it % 5];
  const fs_options o = {.size = sizeof o, .token_mask = m,
                        .token_mask_stride = m && it % 2 ? stride : 0, .logit_softcap = c,
                        .logit_bias_tokens = tok, .logit_bias_values = val,
                        .logit_bias_count = count};
  char what[192];
  snprintf(what, sizeof what, "problem %d (%s B=%d D=%d V=%d off=%lld S=%d T=%s c=%g n=%d%s%s)",
           it, dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, D, V, voff, (int)s.num_samples,
           s.temperatures ? "per-row" : s.temperature > 0.0f ? "0.7" : "0", (double)c, count,
           m ? " masked" : "", specials ? " specials" : "");
  check_problem(&pr.p, &s, &o, what);
  free(tok);
  free(val);
  free(m);
  ref_prob_free(&pr);
}

static void test_oracle(void) {
  static const int Ds[] = {8, 16, 24, 32, 40, 64};
  static const long long offs[] = {0, 37, 160, 4093, 100000};
  unsigned long long st = 0x626961736f72ull;
  const int N = 150;
  for (int it = 0; it < N; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)rnd(&st, 4), D = Ds[rnd(&st, 6)], V = 20 + (int)rnd(&st, 381);
    const int count = it == 7 ? FS_MAX_LOGIT_BIAS : it % 9 == 0 ? (int)rnd(&st, 3)
                                                                 : 1 + (int)rnd(&st, 16);
    oracle_problem(it, dtype, B, D, V, offs[it % 5], count, it % 3 != 0 && it != 7, &st);
  }
  /* D = 65536: the reference decodes 2^18 / D = 4 rows of H at a time, so
  ** B = 9 takes three blocks, each with its own rows' entries. */
  oracle_problem(N + 1, FS_DTYPE_BF16, 9, 65536, 40, 5, 8, 1, &st);
  printf("oracle: %ld draws of %d problems: %ld of a biased token, %ld decided by +inf, %ld "
         "with nothing drawable (%ld of a masked token); the bias moved %ld of %ld sampled "
         "draws; worst logprob error %.2g\n", g_draws, N + 1, g_biased, g_pinf, g_nodraw,
         g_masked_first, g_moved, g_sampled, g_worst_lp);
  CHECK_MSG(g_bad_draw == 0, "%ld draws' tokens or keys differ from the oracle", g_bad_draw);
  CHECK_MSG(g_bad_logit == 0, "%ld draws' logits are not the raw logits", g_bad_logit);
  CHECK_MSG(g_bad_lp == 0, "%ld draws' logprobs are not the raw logprobs", g_bad_lp);
  CHECK_MSG(g_bad_row == 0, "%ld fs_reference_row_ex results differ from the oracle", g_bad_row);
  CHECK_MSG(g_bad_same == 0, "%ld calls differ from the call they must equal", g_bad_same);
  /* not vacuous: the bias decides many draws, +inf some, and some rows have
  ** nothing to draw */
  CHECK_MSG(g_biased > g_draws / 5 && g_moved > g_sampled / 5 && g_pinf > 20 && g_nodraw > 5,
            "the bias mattered too little: %ld biased of %ld, %ld of %ld moved, %ld +inf, %ld "
            "with nothing drawable", g_biased, g_draws, g_moved, g_sampled, g_pinf, g_nodraw);
}

/* ---- 2. equivalences ------------------------------------------------------------------ */

/* (a) A bias b_t on token t against eight more hidden columns: H' = [H, 1,
** 0 x 7], W' row t = [W row t, b_t, 0 x 7].  The reference sums k in order,
** so z' = (z + 1 * b_t) + 0 ... is exactly z + b_t, the biased logit. */
static void test_augmented(void) {
  unsigned long long st = 0x6175676d656eull;
  static const int Ds[] = {8, 16, 32, 48};
  static const long long offs[] = {0, 37, 1024};
  long draws = 0, moved = 0;
  for (int it = 0; it < 30; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)rnd(&st, 4), D = Ds[rnd(&st, 4)], V = 20 + (int)rnd(&st, 181);
    const int D2 = D + 8, count = 1 + (int)rnd(&st, 12);
    const long long voff = offs[it % 3];
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, voff, ref_scale_for_sd(2.0, D), &st);
    float temps[4];
    uint64_t seeds[4], offsets[4];
    const fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offsets, &st);
    const int S = s.num_samples;
    const long long stride = (voff + V + 31) / 32;
    uint32_t *m = it % 3 == 2 ? ref_make_mask(&pr.p, stride, 0.7, &st) : NULL;
    int32_t *tok = ref_xalloc(sizeof(int32_t) * (size_t)(B * count));
    float *val = ref_xalloc(sizeof(float) * (size_t)(B * count));
    make_bias(&pr.p, count, 1, tok, val, &st);
    /* values k / 4, |k| <= 16: a row's sum (<= 12 entries) is a multiple of
    ** 1/4 below 48 in magnitude, 8 significant bits, exact in bf16 and fp16
    ** as +-inf and NaN are */
    for (int j = 0; j < B * count; j++)
      if (isfinite(val[j])) val[j] = (float)((int)rnd(&st, 33) - 16) / 4.0f;
    uint16_t *h2 = ref_xalloc(sizeof(uint16_t) * (size_t)(B * D2));
    uint16_t *w2 = ref_xalloc(sizeof(uint16_t) * (size_t)(V * D2));
    float *sum = ref_xalloc(sizeof(float) * (size_t)V);
    int *hits = ref_xalloc(sizeof(int) * (size_t)V);
    const fs_options ob = {.size = sizeof ob, .token_mask = m, .logit_bias_tokens = tok,
                           .logit_bias_values = val, .logit_bias_count = count};
    const fs_options om = {.size = sizeof om, .token_mask = m};
    ref_outs o = ref_outs_new((size_t)(B * S)), a = ref_outs_new((size_t)(B * S));
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &ob, o.tokens, o.logits, o.keys) ==
            FS_OK);
    /* one problem per row (each row has its own bias), row b of the draw:
    ** the sampling must see row b's tag and parameters, so it runs all B
    ** rows of H' and keeps row b */
    for (int r = 0; r < B; r++)
      for (int k = 0; k < D2; k++)
        h2[r * D2 + k] = k < D ? pr.h[r * D + k] : ref_encode(dtype, k == D ? 1.0 : 0.0);
    for (int b = 0; b < B; b++) {
      ref_bias_sums(&pr.p, tok, val, count, b, sum, hits);
      for (int v = 0; v < V; v++) {
        REQUIRE(!isfinite(sum[v]) || ref_decode(dtype, ref_encode(dtype, sum[v])) == sum[v]);
        for (int k = 0; k < D2; k++)
          w2[v * D2 + k] = k < D ? pr.w[v * D + k]
                                 : ref_encode(dtype, k == D && hits[v] ? (double)sum[v] : 0.0);
      }
      fs_problem p2 = pr.p;
      p2.hidden = D2;
      p2.hidden_states = h2;
      p2.weight = w2;
      REQUIRE(fs_reference_sample_ex(&p2, &s, FS_NOISE_TOKEN, &om, a.tokens, a.logits, a.keys) ==
              FS_OK);
      const size_t i0 = (size_t)b * S;
      CHECK_MSG(same_bits(o.tokens + i0, a.tokens + i0, (size_t)S * 4) &&
                    same_bits(o.keys + i0, a.keys + i0, (size_t)S * 8),
                "augmented %d (%s B=%d D=%d V=%d n=%d) row %d: the bias draws %d (key %016llx), "
                "the logits z + b %d (key %016llx)", it,
                dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, D, V, count, b, (int)o.tokens[i0],
                (unsigned long long)o.keys[i0], (int)a.tokens[i0],
                (unsigned long long)a.keys[i0]);
      draws += S;
    }
    ref_outs u = ref_outs_new((size_t)(B * S));
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &om, u.tokens, u.logits, u.keys) ==
            FS_OK);
    for (int i = 0; i < B * S; i++) moved += u.tokens[i] != o.tokens[i];
    ref_outs_free(&u);
    ref_outs_free(&o);
    ref_outs_free(&a);
    free(sum);
    free(hits);
    free(h2);
    free(w2);
    free(tok);
    free(val);
    free(m);
    ref_prob_free(&pr);
  }
  printf("augmented W: %ld draws equal the bias's bit for bit (%ld differ from the unbiased)\n",
         draws, moved);
  CHECK_MSG(moved > draws / 5, "the bias moved only %ld of %ld draws", moved, draws);
}

/* (b) Vocabulary shards: each shard's call with the same arrays applies the
** ids of its shard; the largest key is the unsharded draw. */
static void test_shards(void) {
  unsigned long long st = 0x7368617264ull;
  static const long long offs[] = {0, 50, 4096};
  long draws = 0;
  for (int it = 0; it < 24; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)rnd(&st, 4), D = 8 * (1 + (int)rnd(&st, 8));
    const int V = 30 + (int)rnd(&st, 271), count = 1 + (int)rnd(&st, 16);
    const int nsh = 2 + it % 2;
    const long long voff = offs[it % 3];
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, voff, ref_scale_for_sd(3.0, D), &st);
    float temps[4];
    uint64_t seeds[4], offsets[4];
    const fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offsets, &st);
    const size_t n = (size_t)B * s.num_samples;
    const long long stride = (voff + V + 31) / 32 + it % 2;
    uint32_t *m = it % 3 == 1 ? ref_make_mask(&pr.p, stride, 0.6, &st) : NULL;
    int32_t *tok = ref_xalloc(sizeof(int32_t) * (size_t)(B * count));
    float *val = ref_xalloc(sizeof(float) * (size_t)(B * count));
    make_bias(&pr.p, count, 1, tok, val, &st);
    /* a shard's mask needs the whole vocabulary's stride given */
    const fs_options o = {.size = sizeof o, .token_mask = m, .token_mask_stride = m ? stride : 0,
                          .logit_softcap = it % 4 == 3 ? 4.0f : 0.0f, .logit_bias_tokens = tok,
                          .logit_bias_values = val, .logit_bias_count = count};
    ref_outs full = ref_outs_new(n), sh = ref_outs_new(n), best = ref_outs_new(n);
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, full.tokens, full.logits,
                                   full.keys) == FS_OK);
    int cut[4] = {0, 0, 0, V};
    cut[1] = 1 + (int)rnd(&st, (unsigned)(V - 2));
    cut[2] = nsh == 3 ? cut[1] + (int)rnd(&st, (unsigned)(V - cut[1])) : V;
    if (cut[2] == cut[1]) cut[2]++;
    for (int k = 0; k < nsh; k++) {
      fs_problem p = pr.p;
      p.vocab = cut[k + 1] - cut[k];
      p.vocab_offset = voff + cut[k];
      p.weight = pr.w + (size_t)cut[k] * D;
      REQUIRE(fs_reference_sample_ex(&p, &s, FS_NOISE_TOKEN, &o, sh.tokens, sh.logits, sh.keys) ==
              FS_OK);
      for (size_t i = 0; i < n; i++)
        if (k == 0 || sh.keys[i] > best.keys[i])
          best.tokens[i] = sh.tokens[i], best.logits[i] = sh.logits[i], best.keys[i] = sh.keys[i];
    }
    CHECK_MSG(same_bits(best.tokens, full.tokens, n * 4) &&
                  same_bits(best.keys, full.keys, n * 8) &&
                  same_bits(best.logits, full.logits, n * 4),
              "shards %d (%s B=%d V=%d off=%lld cuts %d %d, n=%d%s): the best shard draws %d "
              "(key %016llx), the whole vocabulary %d (key %016llx)", it,
              dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, V, voff, cut[1], cut[2], count,
              m ? " masked" : "", (int)best.tokens[0], (unsigned long long)best.keys[0],
              (int)full.tokens[0], (unsigned long long)full.keys[0]);
    draws += (long)n;
    ref_outs_free(&full);
    ref_outs_free(&sh);
    ref_outs_free(&best);
    free(tok);
    free(val);
    free(m);
    ref_prob_free(&pr);
  }
  printf("shards: %ld draws: the best shard's key, token and logit are the unsharded ones\n",
         draws);
}

/* (c) A bias of -inf is the mask: banning ids with it equals clearing their
** bits (tokens, keys; logits and logprobs where the draw is allowed). */
static void test_ban_is_mask(void) {
  unsigned long long st = 0x62616e6d61736bull;
  long draws = 0;
  for (int it = 0; it < 16; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)rnd(&st, 4), D = 8 * (1 + (int)rnd(&st, 6));
    const int V = 20 + (int)rnd(&st, 200), count = 1 + (int)rnd(&st, 20);
    const long long voff = it % 2 ? 77 : 0, stride = (voff + V + 31) / 32;
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, voff, ref_scale_for_sd(2.0, D), &st);
    float temps[4];
    uint64_t seeds[4], offsets[4];
    const fs_sampling s = ref_random_sampling(it, B, 3, temps, seeds, offsets, &st);
    const size_t n = (size_t)B * s.num_samples;
    uint32_t *m = ref_make_mask(&pr.p, stride, 0.8, &st);
    uint32_t *m2 = ref_xalloc(sizeof(uint32_t) * (size_t)(B * stride));
    memcpy(m2, m, sizeof(uint32_t) * (size_t)(B * stride));
    int32_t *tok = ref_xalloc(sizeof(int32_t) * (size_t)(B * count));
    float *val = ref_xalloc(sizeof(float) * (size_t)(B * count));
    for (int b = 0; b < B; b++)
      for (int j = 0; j < count; j++) {
        const int32_t t = j % 5 == 4 ? outside_id(&pr.p, &st)
                                     : (int32_t)(voff + rnd(&st, (unsigned)V));
        tok[b * count + j] = t;
        val[b * count + j] = -INFINITY;
        if (t >= voff && t < voff + V) m2[b * stride + t / 32] &= ~(1u << (t % 32));
      }
    float *lp = ref_xalloc(sizeof(float) * n), *lp2 = ref_xalloc(sizeof(float) * n);
    const fs_options ob = {.size = sizeof ob, .token_mask = m, .logprobs = lp,
                           .logit_bias_tokens = tok, .logit_bias_values = val,
                           .logit_bias_count = count};
    const fs_options om = {.size = sizeof om, .token_mask = m2, .logprobs = lp2};
    ref_outs o = ref_outs_new(n), a = ref_outs_new(n);
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &ob, o.tokens, o.logits, o.keys) ==
            FS_OK);
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &om, a.tokens, a.logits, a.keys) ==
            FS_OK);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
      const int b = (int)(i / (size_t)s.num_samples);
      const int drawable = ref_allowed(m2, stride, b, a.tokens[i]);
      bad += o.tokens[i] != a.tokens[i] || o.keys[i] != a.keys[i] ||
             (drawable && !(ref_float_bits_equal(o.logits[i], a.logits[i]) &&
                            ref_float_bits_equal(lp[i], lp2[i])));
    }
    CHECK_MSG(bad == 0, "ban %d (%s B=%d V=%d n=%d): %d of %zu draws differ from the mask", it,
              dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, V, count, bad, n);
    draws += (long)n;
    ref_outs_free(&o);
    ref_outs_free(&a);
    free(lp);
    free(lp2);
    free(tok);
    free(val);
    free(m);
    free(m2);
    ref_prob_free(&pr);
  }
  printf("ban: %ld draws with -inf biases equal those of the mask without the ids\n", draws);
}

/* ---- 3. explicit rows ------------------------------------------------------------------ */

#define X_V 50
#define X_OFF 64
#define X_S 3

static void test_explicit(void) {
  unsigned long long st = 0x6578706cull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 6, 16, X_V, 0, 0, X_OFF, ref_scale_for_sd(2.0, 16), &st);
  const float temps[6] = {1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.5f};
  const fs_sampling s = {0.0f, temps, X_S, 0x5eedull, NULL, 41u, NULL};
  const long long stride = (X_OFF + X_V + 31) / 32;
  uint32_t m[6 * 4];
  REQUIRE(stride == 4);
  for (int i = 0; i < 6 * 4; i++) m[i] = 0xffffffffu;
  m[2 * stride + (X_OFF + 12) / 32] &= ~(1u << ((X_OFF + 12) % 32)); /* row 2: id 12 masked */
  enum { NB = X_V };
  int32_t tok[6 * NB];
  float val[6 * NB];
  for (int i = 0; i < 6 * NB; i++) tok[i] = -1, val[i] = 1000.0f; /* pads (their values unused) */
  double z[X_V];
  ref_oracle_logits(&pr.p, 3, z);
  int a = 0; /* row 3's argmax, and the best id other than a and 5 */
  for (int v = 1; v < X_V; v++) a = z[v] > z[a] ? v : a;
  const int five = a == 5 ? 6 : 5;
  int second = -1;
  for (int v = 0; v < X_V; v++)
    if (v != a && v != five && (second < 0 || z[v] > z[second])) second = v;
  /* rows 0, 1: +inf on 30 then 12; row 2: +inf on 12 (masked) and 30 */
  for (int b = 0; b < 3; b++) {
    tok[b * NB] = X_OFF + 30, val[b * NB] = INFINITY;
    tok[b * NB + 1] = X_OFF + 12, val[b * NB + 1] = INFINITY;
  }
  /* row 3 (greedy): NaN on the argmax, +inf and -inf on `five` */
  tok[3 * NB] = X_OFF + a, val[3 * NB] = NAN;
  tok[3 * NB + 1] = X_OFF + five, val[3 * NB + 1] = INFINITY;
  tok[3 * NB + 2] = X_OFF + five, val[3 * NB + 2] = -INFINITY;
  /* row 4: NaN on every id but 40, -inf on 40: every score -inf (a biased
  ** NaN ranks as -inf), so the first id */
  for (int v = 0; v < X_V; v++)
    tok[4 * NB + v] = X_OFF + v, val[4 * NB + v] = v == 40 ? -INFINITY : NAN;
  /* row 5: +inf on the ids just outside the shard only */
  tok[5 * NB] = X_OFF - 1, val[5 * NB] = INFINITY;
  tok[5 * NB + 1] = X_OFF + X_V, val[5 * NB + 1] = INFINITY;
  tok[5 * NB + 2] = -1, val[5 * NB + 2] = INFINITY;
  const fs_options o = {.size = sizeof o, .token_mask = m, .logit_bias_tokens = tok,
                        .logit_bias_values = val, .logit_bias_count = NB};
  const fs_options none = {.size = sizeof none, .token_mask = m};
  int32_t t[6 * X_S], tu[6 * X_S];
  float lg[6 * X_S];
  uint64_t k[6 * X_S], ku[6 * X_S];
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, t, lg, k) == FS_OK);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &none, tu, NULL, ku) == FS_OK);
  const int want[5] = {12, 12, 30, second, 0};
  for (int b = 0; b < 6; b++) {
    ref_oracle_logits(&pr.p, b, z);
    for (int j = 0; j < X_S; j++) {
      const int i = b * X_S + j;
      if (b == 5) {
        CHECK_MSG(t[i] == tu[i] && k[i] == ku[i], "row 5 sample %d: +inf on ids outside the "
                  "shard drew %d, unbiased %d", j, (int)t[i], (int)tu[i]);
        continue;
      }
      const int32_t wt = X_OFF + want[b];
      /* the score: +inf (rows 0-2), z (greedy row 3), -inf (row 4) */
      const float sc = b < 3 ? INFINITY : b == 3 ? (float)z[want[b]] : -INFINITY;
      CHECK_MSG(t[i] == wt && k[i] == fs_pack_key(sc, (uint32_t)wt),
                "explicit row %d sample %d: token %d key %016llx, want %d key %016llx", b, j,
                (int)t[i], (unsigned long long)k[i], (int)wt,
                (unsigned long long)fs_pack_key(sc, (uint32_t)wt));
      CHECK_MSG(ref_float_bits_equal(lg[i], (float)z[want[b]]),
                "explicit row %d sample %d: token %d reports logit %.9g, want the raw %.9g", b, j,
                (int)t[i], (double)lg[i], z[want[b]]);
    }
  }
  printf("explicit rows: +inf ties to the smaller id, a masked +inf loses, NaN loses to "
         "numbers, a biased NaN ranks as -inf, outside ids ignored\n");
  ref_prob_free(&pr);
}

/* The fp32 entry-order sum: row 0 names id 7 with {8, 2^-22 x 4} (8 in fp32,
** 8 + 2^-20 in double), row 1 with {2^-22 x 4, 8} (8 + 2^-20 in both).  Both
** rows greedy, so id 7 (logit ~1, +8) wins with score z + the sum, which
** fs_reference_row_ex returns in double and the key carries in fp32 (the
** 2^-20 is an fp32 ulp there or two: the keys may differ too). */
static void test_fp32_sum(void) {
  unsigned long long st = 0x66703332ull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 16, 30, 0, 0, 0, ref_scale_for_sd(1.0, 16), &st);
  const fs_sampling s = {0.0f, NULL, 1, 1u, NULL, 0u, NULL};
  const float q = 0x1p-22f;
  const int32_t tok[10] = {7, 7, 7, 7, 7, 7, 7, 7, 7, 7};
  const float val[10] = {8.0f, q, q, q, q, q, q, q, q, 8.0f};
  const fs_options o = {.size = sizeof o, .logit_bias_tokens = tok, .logit_bias_values = val,
                        .logit_bias_count = 5};
  int32_t t[2];
  uint64_t k[2];
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, t, NULL, k) == FS_OK);
  for (int b = 0; b < 2; b++) {
    double z[30];
    ref_oracle_logits(&pr.p, b, z);
    float sum = 0.0f;
    for (int j = 0; j < 5; j++) sum = j ? sum + val[b * 5 + j] : val[b * 5 + j];
    const double want = z[7] + (double)sum, dsum = z[7] + (8.0 + 0x1p-20);
    fs_ref_result r;
    REQUIRE(fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, b, 0, &r) == FS_OK);
    CHECK_MSG(t[b] == 7 && r.token == 7 && r.score == want &&
                  k[b] == fs_pack_key((float)want, 7u),
              "row %d: id 7 with {%s}: token %d score %.17g key %016llx, want the fp32 entry-order "
              "sum's score %.17g key %016llx (the double sum's: %.17g key %016llx)", b,
              b ? "2^-22 x 4, 8" : "8, 2^-22 x 4", (int)t[b], r.score, (unsigned long long)k[b],
              want, (unsigned long long)fs_pack_key((float)want, 7u), dsum,
              (unsigned long long)fs_pack_key((float)dsum, 7u));
  }
  ref_prob_free(&pr);
}

/* ---- 4. rows with little or nothing to draw --------------------------------------------- */

#define ND_V 60
#define ND_OFF 200 /* mask rows start inside a word */
#define ND_B 6
#define ND_S 40000

static void test_nothing_drawable(void) {
  unsigned long long st = 0x6e6f647261770aull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, ND_B, 32, ND_V, 0, 0, ND_OFF, ref_scale_for_sd(2.0, 32), &st);
  const long long stride = (ND_OFF + ND_V + 31) / 32;
  uint32_t *m = ref_xalloc(sizeof(uint32_t) * (size_t)(ND_B * stride));
  int32_t *tok = ref_xalloc(sizeof(int32_t) * ND_B * ND_V);
  float *val = ref_xalloc(sizeof(float) * ND_B * ND_V);
  for (int i = 0; i < ND_B * ND_V; i++) tok[i] = -1, val[i] = 0.0f;
  /* rows 0-3 and 5 allow only some ids; row 4 allows all */
  for (int b = 0; b < ND_B; b++)
    for (long long w = 0; w < stride; w++) m[b * stride + w] = b == 4 ? 0xffffffffu : 0u;
#define ALLOW(b, v) (m[(b) * stride + (ND_OFF + (v)) / 32] |= 1u << ((ND_OFF + (v)) % 32))
  /* row 0: allows only its biased ids; id 47 banned, id 52 named twice */
  static const int ids0[7] = {3, 11, 20, 33, 47, 52, 52};
  static const float vals0[7] = {1.0f, -0.5f, 2.0f, 0.0f, -INFINITY, 0.25f, 0.5f};
  for (int j = 0; j < 7; j++) {
    tok[j] = ND_OFF + ids0[j], val[j] = vals0[j];
    ALLOW(0, ids0[j]);
  }
  tok[7] = ND_OFF + ND_V; /* outside: ignored, and its bit is not a call's id */
  val[7] = 50.0f;
  /* rows 1 (sampled) and 2 (greedy): only id 25 allowed, and banned; the
  ** first id (masked) biased +inf, NaN: masked all the same, so it is -inf
  ** and wins the tie of -infs (a bias added after the mask would make it
  ** NaN, and id 1 would win) */
  for (int b = 1; b <= 2; b++) {
    ALLOW(b, 25);
    tok[b * ND_V] = ND_OFF + 25, val[b * ND_V] = -INFINITY;
    tok[b * ND_V + 1] = ND_OFF, val[b * ND_V + 1] = b == 1 ? INFINITY : NAN;
  }
  /* row 3: only the first id allowed, and banned */
  ALLOW(3, 0);
  tok[3 * ND_V] = ND_OFF, val[3 * ND_V] = -INFINITY;
  /* row 4: every id banned (no mask bits cleared) */
  for (int v = 0; v < ND_V; v++) tok[4 * ND_V + v] = ND_OFF + v, val[4 * ND_V + v] = -INFINITY;
  /* row 5: only id 9 allowed, its bias NaN; the first id (masked) +inf */
  ALLOW(5, 9);
  tok[5 * ND_V] = ND_OFF + 9, val[5 * ND_V] = NAN;
  tok[5 * ND_V + 1] = ND_OFF, val[5 * ND_V + 1] = INFINITY;
#undef ALLOW
  const float temps[ND_B] = {1.0f, 1.0f, 0.0f, 0.8f, 1.2f, 1.0f};
  const fs_sampling s = {0.0f, temps, ND_S, 0x6e64ull, NULL, 9u, NULL};
  const size_t n = (size_t)ND_B * ND_S;
  float *lp = ref_xalloc(sizeof(float) * n);
  ref_outs o = ref_outs_new(n);
  const fs_options opt = {.size = sizeof opt, .token_mask = m, .logprobs = lp,
                          .logit_bias_tokens = tok, .logit_bias_values = val,
                          .logit_bias_count = ND_V};
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &opt, o.tokens, o.logits, o.keys) ==
          FS_OK);
  double z[ND_V], zb[ND_V], zq[ND_V], p[ND_V], q[ND_V];
  /* row 0: the law over ids 3, 11, 20, 33 and 52 */
  ref_oracle_logits(&pr.p, 0, z);
  const double lse0 = ref_lse(z, ND_V);
  for (int v = 0; v < ND_V; v++) zb[v] = zq[v] = -INFINITY;
  for (int j = 0; j < 7; j++) zb[ids0[j]] = zq[ids0[j]] = z[ids0[j]];
  for (int j = 0; j < 7; j++) zb[ids0[j]] += (double)vals0[j];
  fs_stats_softmax(zb, ND_V, 1.0, p);
  fs_stats_softmax(zq, ND_V, 1.0, q); /* the bias ignored (the ban too) */
  int64_t counts[ND_V] = {0};
  int bad = 0, badlp = 0;
  for (int j = 0; j < ND_S; j++) {
    const long long v = o.tokens[j] - ND_OFF;
    REQUIRE(v >= 0 && v < ND_V);
    counts[v]++;
    bad += !ref_float_bits_equal(o.logits[j], (float)z[v]);
    badlp += !(fabs((double)lp[j] - (z[v] - lse0)) <= 1e-6 + 1e-7 * fabs(z[v] - lse0));
  }
  const fs_chi2 good = fs_stats_chi2_gof(counts, p, ND_V);
  const fs_chi2 wrong = fs_stats_chi2_gof(counts, q, ND_V);
  const double lam = fs_stats_noncentrality(p, q, ND_V, (double)ND_S);
  const double pw = fs_stats_power(wrong.dof, lam, 1e-6);
  /* Power: the ignored bias moves id 20 (+2) and id 3 (+1) by factors e^2
  ** and e: lambda = 3.7e3 (printed) against a 1e-6 critical value of ~31
  ** at 3 dof (one of the 5 bins pooled), the statistic's mean ~30 sd above
  ** it: power 1 to many digits. */
  printf("only biased ids allowed: %d draws in %d bins, chi2=%.1f dof=%d p=%.3g; bias ignored: "
         "p=%.3g lambda=%.0f power=%.9f\n", ND_S, good.bins, good.stat, good.dof, good.p, wrong.p,
         lam, pw);
  CHECK_MSG(good.impossible == 0 && good.dof >= 2 && counts[47] == 0,
            "row 0 drew outside its allowed, finitely biased ids (%lld impossible, id 47 %lld)",
            (long long)good.impossible, (long long)counts[47]);
  CHECK_MSG(good.p > 1e-3, "row 0: chi-square rejects softmax(z + b): p=%g", good.p);
  CHECK_MSG(wrong.p < 1e-6 && pw > 0.999999, "row 0: the bias ignored not rejected: p=%g, "
            "power %.9f", wrong.p, pw);
  CHECK_MSG(bad == 0 && badlp == 0, "row 0: %d logits and %d logprobs not the raw ones", bad,
            badlp);
  /* rows 1, 2, 5: nothing drawable and the first id masked: as a row with no
  ** allowed token, the first id with logit and logprob -inf; rows 3, 4: the
  ** first id drawable by the mask yet banned: the first id, its raw logit */
  int wrong_nd[ND_B] = {0};
  float seen_logit[ND_B] = {0};
  for (int b = 1; b < ND_B; b++) {
    ref_oracle_logits(&pr.p, b, z);
    const double lse = ref_lse(z, ND_V);
    const int masked = b != 3 && b != 4;
    const float wl = masked ? -INFINITY : (float)z[0];
    const double wlp = masked ? -INFINITY : z[0] - lse;
    seen_logit[b] = o.logits[(size_t)b * ND_S];
    for (int j = 0; j < ND_S; j++) {
      const size_t i = (size_t)b * ND_S + j;
      wrong_nd[b] += o.tokens[i] != ND_OFF || o.keys[i] != fs_pack_key(-INFINITY, ND_OFF) ||
                     !ref_float_bits_equal(o.logits[i], wl) ||
                     !(masked ? lp[i] == -INFINITY
                              : fabs((double)lp[i] - wlp) <= 1e-6 + 1e-7 * fabs(wlp));
    }
    CHECK_MSG(wrong_nd[b] == 0, "row %d (%s): %d of %d draws are not the first id %d with key "
              "fs_pack_key(-inf) and logit %g (first: token %d logit %g logprob %g)", b,
              b == 3   ? "only the first id allowed, banned"
              : b == 4 ? "every id banned"
              : b == 5 ? "the only allowed id's bias NaN"
                       : "the only allowed id banned", wrong_nd[b], ND_S, ND_OFF, (double)wl,
              (int)o.tokens[(size_t)b * ND_S], (double)o.logits[(size_t)b * ND_S],
              (double)lp[(size_t)b * ND_S]);
  }
  printf("nothing drawable: rows 1, 2, 5 draw id %d (logit %g, %g, %g); rows 3, 4 (the first id "
         "allowed, banned) report logits %g, %g\n", ND_OFF, (double)seen_logit[1],
         (double)seen_logit[2], (double)seen_logit[5], (double)seen_logit[3],
         (double)seen_logit[4]);
  ref_outs_free(&o);
  free(lp);
  free(m);
  free(tok);
  free(val);
  ref_prob_free(&pr);
}

/* ---- 5. the law: chi-square ------------------------------------------------------------ */

#define LAW_D 32
#define LAW_ROWS 4
#define LAW_S 50000 /* 4 rows x 50,000 samples = 2e5 draws per case */
#define LAW_N 12    /* entries a row */

/* Checks that the counts reject the wrong law q (the right one is p):
** p < 1e-6, and fs_stats_power() of its noncentrality > 0.999999. */
static void reject_law(const int64_t *counts, const double *p, const double *q, int V, double N,
                       const char *name, const char *what) {
  const fs_chi2 bad = fs_stats_chi2_gof(counts, q, V);
  const double lam = fs_stats_noncentrality(p, q, V, N);
  const double pw = fs_stats_power(bad.dof, lam, 1e-6);
  printf("\n  %s: p=%.3g lambda=%.3g power=%.9f", name, bad.p, lam, pw);
  CHECK_MSG(bad.p < 1e-6, "%s: fails to reject %s: p=%g", what, name, bad.p);
  CHECK_MSG(pw > 0.999999, "%s: power against %s only %.9f (lambda %g)", what, name, pw, lam);
}

/* Power (measured with the reference, printed per case): over 2e5 draws and
** 37-38 degrees of freedom (critical value at 1e-6: ~85), the closest wrong
** laws, z / T + b and a repeated id's last entry only, give lambda = 1.4e4
** to 3.9e4: the statistic's mean dof + lambda lies ~60 sd (sd = sqrt(2 (dof
** + 2 lambda)) ~ 240) above the critical value, power 1 to many digits; b / 2
** gives 4e4 to 1e5, ref_cap(z + b) 1.3e5, the bias ignored 2e5 to 7e6 and -b
** 2e6 to 9e7.  fs_stats_power() > 0.999999 is CHECKed for each. */
static void law_case(int dtype, int V, long long voff, float T, float c, double sd,
                     unsigned long long seed, int noise) {
  unsigned long long st = seed;
  ref_prob pr;
  ref_prob_make(&pr, dtype, LAW_ROWS, LAW_D, V, 0, 0, voff, ref_scale_for_sd(sd, LAW_D), &st);
  for (int b = 1; b < LAW_ROWS; b++) memcpy(pr.h + b * LAW_D, pr.h, sizeof(uint16_t) * LAW_D);
  double z[64], zr[64], zb[64], p[64], q[64], w[64];
  float sum[64];
  int hits[64], ord[64];
  REQUIRE(V <= 64 && V >= 24);
  ref_oracle_logits(&pr.p, 0, z);
  for (int v = 0; v < V; v++) zr[v] = ref_cap(z[v], c), ord[v] = v;
  for (int i = 1; i < V; i++) /* ids by raw logit, largest first */
    for (int j = i; j > 0 && zr[ord[j]] > zr[ord[j - 1]]; j--) {
      const int x = ord[j];
      ord[j] = ord[j - 1], ord[j - 1] = x;
    }
  /* the top id banned; ord[3] named twice (+1, then +1.25); a pad and the ids
  ** just outside the shard at +30 */
  const int32_t et[LAW_N] = {(int32_t)(voff + ord[0]), (int32_t)(voff + ord[1]),
                             (int32_t)(voff + ord[3]), -1,
                             (int32_t)(voff + ord[6]), (int32_t)(voff + V),
                             (int32_t)(voff + ord[3]), (int32_t)(voff + ord[10]),
                             voff > 0 ? (int32_t)(voff - 1) : INT32_MAX,
                             (int32_t)(voff + ord[V / 2]), (int32_t)(voff + ord[V - 3]),
                             (int32_t)(voff + ord[8])};
  const float ev[LAW_N] = {-INFINITY, -1.5f, 1.0f, 30.0f, 2.0f, 30.0f,
                           1.25f, 2.5f, 30.0f, 3.0f, 4.0f, -2.0f};
  int32_t tok[LAW_ROWS * LAW_N];
  float val[LAW_ROWS * LAW_N];
  for (int b = 0; b < LAW_ROWS; b++)
    for (int j = 0; j < LAW_N; j++) tok[b * LAW_N + j] = et[j], val[b * LAW_N + j] = ev[j];
  ref_bias_sums(&pr.p, tok, val, LAW_N, 0, sum, hits);
  for (int v = 0; v < V; v++) zb[v] = zr[v] + (hits[v] ? (double)sum[v] : 0.0);
  /* a scalar seed: the rows' tags make their noise independent */
  const fs_sampling s = {T, NULL, LAW_S, seed ^ 0x5eedull, NULL, 3u, NULL};
  const fs_options opt = {.size = sizeof opt, .logit_softcap = c, .logit_bias_tokens = tok,
                          .logit_bias_values = val, .logit_bias_count = LAW_N};
  const size_t N = (size_t)LAW_ROWS * LAW_S;
  int32_t *tk = ref_xalloc(sizeof(int32_t) * N);
  float *lg = ref_xalloc(sizeof(float) * N);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, noise, &opt, tk, lg, NULL) == FS_OK);
  int64_t counts[64] = {0};
  int badlogit = 0;
  for (size_t j = 0; j < N; j++) {
    const long long v = tk[j] - voff;
    REQUIRE(v >= 0 && v < V);
    counts[v]++;
    badlogit += !ref_float_bits_equal(lg[j], (float)zr[v]);
  }
  char what[96];
  snprintf(what, sizeof what, "law V=%d off=%lld %s T=%.1f c=%.1f%s", V, voff,
           dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", (double)T, (double)c,
           noise == FS_NOISE_GROUP16 ? " group16" : "");
  CHECK_MSG(badlogit == 0, "%s: %d draws' logits are not the raw logits", what, badlogit);
  CHECK_MSG(counts[ord[0]] == 0, "%s: the banned id drawn %lld times", what,
            (long long)counts[ord[0]]);
  fs_stats_softmax(zb, V, (double)T, p);
  const fs_chi2 good = fs_stats_chi2_gof(counts, p, V);
  printf("%s: chi2=%.1f dof=%d p=%.3g", what, good.stat, good.dof, good.p);
  CHECK(good.total == (int64_t)N && good.impossible == 0 && good.dof >= V / 2);
  CHECK_MSG(good.p > 1e-3, "%s: chi-square rejects softmax((ref_cap(z) + b) / T): p=%g", what,
            good.p);
  /* (a) the bias ignored */
  fs_stats_softmax(zr, V, (double)T, q);
  reject_law(counts, p, q, V, (double)N, "bias ignored", what);
  /* (b) added after the temperature: z / T + b */
  for (int v = 0; v < V; v++) w[v] = zr[v] / (double)T + (hits[v] ? (double)sum[v] : 0.0);
  fs_stats_softmax(w, V, 1.0, q);
  reject_law(counts, p, q, V, (double)N, "z / T + b", what);
  /* (c) halved, (d) its finite values' sign flipped (the ban kept) */
  for (int v = 0; v < V; v++) w[v] = zr[v] + (hits[v] ? 0.5 * (double)sum[v] : 0.0);
  fs_stats_softmax(w, V, (double)T, q);
  reject_law(counts, p, q, V, (double)N, "b / 2", what);
  for (int v = 0; v < V; v++)
    w[v] = hits[v] && isfinite(sum[v]) ? zr[v] - (double)sum[v] : zb[v];
  fs_stats_softmax(w, V, (double)T, q);
  reject_law(counts, p, q, V, (double)N, "-b", what);
  /* (e) a repeated id's last entry only */
  for (int v = 0; v < V; v++) w[v] = zb[v];
  w[ord[3]] = zr[ord[3]] + 1.25;
  fs_stats_softmax(w, V, (double)T, q);
  reject_law(counts, p, q, V, (double)N, "last entry only", what);
  if (c > 0.0f) { /* (f) added before the cap: ref_cap(z + b) */
    for (int v = 0; v < V; v++)
      w[v] = hits[v] && sum[v] == -INFINITY ? -INFINITY
                                            : ref_cap(z[v] + (hits[v] ? (double)sum[v] : 0.0), c);
    fs_stats_softmax(w, V, (double)T, q);
    reject_law(counts, p, q, V, (double)N, "ref_cap(z + b)", what);
  }
  printf("\n");
  free(tk);
  free(lg);
  ref_prob_free(&pr);
}

static void test_law(void) {
  law_case(FS_DTYPE_BF16, 48, 1000, 0.8f, 0.0f, 2.5, 0x6c61776231ull, FS_NOISE_TOKEN);
  law_case(FS_DTYPE_FP16, 40, 0, 1.5f, 3.0f, 4.0, 0x6c61776232ull, FS_NOISE_TOKEN);
  /* FS_NOISE_GROUP16 (since 0.3.17): the biased groups' masses; V = 40 ends in a
  ** partial group */
  law_case(FS_DTYPE_BF16, 48, 1008, 0.8f, 0.0f, 2.5, 0x6c61776233ull, FS_NOISE_GROUP16);
  law_case(FS_DTYPE_FP16, 40, 0, 1.5f, 3.0f, 4.0, 0x6c61776234ull, FS_NOISE_GROUP16);
}

/* ---- 6. bad input and sizes ------------------------------------------------------------ */

static void test_bad_input(void) {
  unsigned long long st = 0x6261646269617321ull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 16, 100, 0, 0, 32, 0.5, &st);
  const fs_sampling s = {1.0f, NULL, 1, 1u, NULL, 0u, NULL};
  const int nmax = 2 * FS_MAX_LOGIT_BIAS + 8;
  int32_t *tok = ref_xalloc(sizeof(int32_t) * (size_t)nmax);
  float *val = ref_xalloc(sizeof(float) * (size_t)nmax);
  for (int j = 0; j < nmax; j++) tok[j] = j % 7 ? -1 : 32 + j % 100, val[j] = 0.5f;
  int32_t t[2], tu[2];
  uint64_t k[2], ku[2];
  fs_ref_result r;
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, NULL, tu, NULL, ku) == FS_OK);

  /* counts out of range: named, with the value and the range */
  const int badc[5] = {-1, -1000, INT32_MIN, FS_MAX_LOGIT_BIAS + 1, INT32_MAX};
  for (int i = 0; i < 5; i++) {
    char name[64], what[64];
    snprintf(name, sizeof name, "options->logit_bias_count=%d", badc[i]);
    snprintf(what, sizeof what, "count %d", badc[i]);
    const fs_options o = {.size = sizeof o, .logit_bias_tokens = tok, .logit_bias_values = val,
                          .logit_bias_count = badc[i]};
    ref_expect_bad(&pr.p, &s, &o, name, what);
    CHECK_MSG(fs_test_has(fs_last_error(NULL), "0..16384"), "%s: no range in '%s'", what,
              fs_last_error(NULL));
    if (i == 3) printf("count %d -> \"%s\"\n", badc[i], fs_last_error(NULL));
    const int rc = fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, 0, 0, &r);
    CHECK_MSG(rc == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), name),
              "fs_reference_row_ex, %s: status %d, '%s'", what, rc, fs_last_error(NULL));
  }
  /* FS_MAX_LOGIT_BIAS is accepted, and read: its +inf decides */
  tok[2 * FS_MAX_LOGIT_BIAS - 1] = 32 + 50, val[2 * FS_MAX_LOGIT_BIAS - 1] = INFINITY;
  const fs_options omax = {.size = sizeof omax, .logit_bias_tokens = tok,
                           .logit_bias_values = val, .logit_bias_count = FS_MAX_LOGIT_BIAS};
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &omax, t, NULL, NULL) == FS_OK &&
                t[1] == 82,
            "count FS_MAX_LOGIT_BIAS: %s, row 1 drew %d (want 82, its last entry's +inf)",
            fs_last_error(NULL), (int)t[1]);
  tok[2 * FS_MAX_LOGIT_BIAS - 1] = -1;

  /* above 1024 entries the long lists' sort words must fit: at V = 2^18
  ** (Gemma 3) FS_MAX_LOGIT_BIAS is refused naming V and the most it takes,
  ** which is accepted; at V = 2^18 - 1 FS_MAX_LOGIT_BIAS is */
  {
    ref_prob big;
    ref_prob_make(&big, FS_DTYPE_BF16, 1, 8, 262144, 0, 0, 0, 0.5, &st);
    const fs_sampling s1 = {1.0f, NULL, 1, 1u, NULL, 0u, NULL};
    fs_options o = {.size = sizeof o, .logit_bias_tokens = tok, .logit_bias_values = val,
                    .logit_bias_count = FS_MAX_LOGIT_BIAS};
    ref_expect_bad(&big.p, &s1, &o, "options->logit_bias_count=16384 at V=262144",
                   "count 16384 at V = 2^18");
    CHECK_MSG(fs_test_has(fs_last_error(NULL), "at most 16383"), "no limit in '%s'",
              fs_last_error(NULL));
    printf("count 16384 at V=262144 -> \"%s\"\n", fs_last_error(NULL));
    o.logit_bias_count = FS_MAX_LOGIT_BIAS - 1;
    CHECK_MSG(fs_reference_sample_ex(&big.p, &s1, FS_NOISE_TOKEN, &o, t, NULL, NULL) == FS_OK,
              "count 16383 at V = 2^18: %s", fs_last_error(NULL));
    big.p.vocab = 262143;
    o.logit_bias_count = FS_MAX_LOGIT_BIAS;
    CHECK_MSG(fs_reference_sample_ex(&big.p, &s1, FS_NOISE_TOKEN, &o, t, NULL, NULL) == FS_OK,
              "count 16384 at V = 2^18 - 1: %s", fs_last_error(NULL));
    ref_prob_free(&big);
  }

  /* NULL and misaligned arrays, each named */
  const struct {
    const int32_t *tok;
    const float *val;
    const char *name;
  } ptrs[] = {
      {NULL, val, "options->logit_bias_tokens=NULL"},
      {tok, NULL, "options->logit_bias_values=NULL"},
      {NULL, NULL, "options->logit_bias_tokens=NULL"},
      {(const int32_t *)((const char *)tok + 2), val, "options->logit_bias_tokens="},
      {(const int32_t *)((const char *)tok + 1), val, "options->logit_bias_tokens="},
      {tok, (const float *)((const char *)val + 2), "options->logit_bias_values="},
  };
  for (int i = 0; i < 6; i++) {
    const fs_options o = {.size = sizeof o, .logit_bias_tokens = ptrs[i].tok,
                          .logit_bias_values = ptrs[i].val, .logit_bias_count = 3};
    ref_expect_bad(&pr.p, &s, &o, ptrs[i].name, ptrs[i].name);
    if (i >= 3)
      CHECK_MSG(fs_test_has(fs_last_error(NULL), "aligned"), "%s: no rule in '%s'",
                ptrs[i].name, fs_last_error(NULL));
    if (i == 1 || i == 5) printf("-> \"%s\"\n", fs_last_error(NULL));
  }

  /* a 0.3.2 struct: the bias fields are past its size, never read.  The
  ** arrays of the last case would draw id 32 + 50 in every row if read (the
  ** full-size struct shows it). */
  int32_t pin[4] = {82, -1, 82, -1};
  float pinv[4] = {INFINITY, 0.0f, INFINITY, 0.0f};
  const struct {
    const int32_t *tok;
    const float *val;
    int count;
  } junk[] = {{NULL, NULL, 7},
              {(const int32_t *)(uintptr_t)0x3, (const float *)(uintptr_t)0x5, 5},
              {NULL, NULL, -5},
              {tok, val, FS_MAX_LOGIT_BIAS + 1},
              {pin, pinv, 2}};
  for (int i = 0; i < 5; i++) {
    fs_options o = {.size = offsetof(fs_options, logit_bias_tokens),
                    .logit_bias_tokens = junk[i].tok, .logit_bias_values = junk[i].val,
                    .logit_bias_count = junk[i].count};
    const int rc = fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, t, NULL, k);
    CHECK_MSG(rc == FS_OK && t[0] == tu[0] && t[1] == tu[1] && k[0] == ku[0] && k[1] == ku[1],
              "0.3.2 struct with junk %d in the bias fields: status %d ('%s'), draws %d %d, "
              "unbiased %d %d", i, rc, fs_last_error(NULL), (int)t[0], (int)t[1], (int)tu[0],
              (int)tu[1]);
    CHECK_MSG(fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, 1, 0, &r) == FS_OK &&
                  r.token == tu[1],
              "fs_reference_row_ex, 0.3.2 struct with junk %d: %s", i, fs_last_error(NULL));
    if (i == 4) {
      o.size = sizeof o;
      REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, t, NULL, k) == FS_OK);
      CHECK_MSG(t[0] == 82 && t[1] == 82, "the full struct with +inf on 82 drew %d %d",
                (int)t[0], (int)t[1]);
    }
  }

  /* a 0.3.3 program's sizeof (its struct ends with logit_bias_count, padded
  ** to the struct's alignment: 64 bytes on LP64) is taken, and the filters'
  ** bytes in its padding are not read: a garbage min_p there filters nothing */
  const size_t size033p = FS_OPTIONS_SIZE_033;
  {
    fs_options o = {.size = size033p, .logit_bias_tokens = tok, .logit_bias_values = val,
                    .logit_bias_count = 1, .min_p = 2.0f};
    int32_t t33[2], t3[2];
    const int rc = fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, t33, NULL, NULL);
    CHECK_MSG(rc == FS_OK, "a 0.3.3 program's sizeof %zu: status %d ('%s')", size033p, rc,
              fs_last_error(NULL));
    o.size = offsetof(fs_options, min_p);
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, t3, NULL, NULL) == FS_OK);
    CHECK_MSG(t33[0] == t3[0] && t33[1] == t3[1], "size %zu read the padding as min_p",
              size033p);
  }
  /* sizes between 0.3.2's and 0.3.3's (which ends before min_p), inside
  ** the filters' fields, or past this one's */
  const size_t sizes[] = {offsetof(fs_options, logit_bias_tokens) + 4,
                          offsetof(fs_options, logit_bias_values),
                          offsetof(fs_options, logit_bias_count),
                          offsetof(fs_options, min_ps) + 8,
                          sizeof(fs_options) + 8};
  int tried = 0;
  for (int i = 0; i < 5; i++) {
    if (sizes[i] == sizeof(fs_options) || sizes[i] == offsetof(fs_options, logit_bias_tokens) ||
        sizes[i] == offsetof(fs_options, min_p))
      continue;
    char what[64];
    snprintf(what, sizeof what, "options->size=%zu", sizes[i]);
    const fs_options o = {.size = sizes[i], .logit_bias_tokens = tok, .logit_bias_values = val,
                          .logit_bias_count = 1};
    ref_expect_bad(&pr.p, &s, &o, "options->size", what);
    tried++;
  }

  /* FS_NOISE_GROUP16 (vocab_offset 32, a multiple of 16): a bias of up to
  ** FS_BIAS_SHORT entries runs (since 0.3.17); a longer one, or one with
  ** top logprobs, is FS_INVALID_ARGUMENT naming the rule */
  fs_options og = {.size = sizeof og, .logit_bias_tokens = tok, .logit_bias_values = val,
                   .logit_bias_count = 2};
  int rc = fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &og, t, NULL, NULL);
  CHECK_MSG(rc == FS_OK, "group16 with a bias: status %d, '%s'", rc, fs_last_error(NULL));
  og.logit_bias_count = FS_BIAS_SHORT + 1; /* refused before an entry is read */
  rc = fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &og, t, NULL, NULL);
  CHECK_MSG(rc == FS_INVALID_ARGUMENT &&
                fs_test_has(fs_last_error(NULL), "options->logit_bias_count=1025") &&
                fs_test_has(fs_last_error(NULL), "at most 1024"),
            "group16 with 1025 entries: status %d, '%s'", rc, fs_last_error(NULL));
  printf("group16 with 1025 entries -> %d \"%s\"\n", rc, fs_last_error(NULL));
  rc = fs_reference_row_ex(&pr.p, &s, FS_NOISE_GROUP16, &og, 0, 0, &r);
  CHECK_MSG(rc == FS_INVALID_ARGUMENT &&
                fs_test_has(fs_last_error(NULL), "options->logit_bias_count"),
            "fs_reference_row_ex, group16 with 1025 entries: status %d, '%s'", rc,
            fs_last_error(NULL));
  og.logit_bias_count = 2;
  int32_t lt[2 * 4];
  float lv[2 * 4];
  og.top_logprobs = 4, og.top_logprob_tokens = lt, og.top_logprob_values = lv;
  rc = fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &og, t, NULL, NULL);
  CHECK_MSG(rc == FS_INVALID_ARGUMENT &&
                fs_test_has(fs_last_error(NULL), "options->top_logprobs") &&
                fs_test_has(fs_last_error(NULL), "FS_NOISE_GROUP16"),
            "group16 with a bias and top logprobs: status %d, '%s'", rc, fs_last_error(NULL));
  og.top_logprobs = 0;
  fs_options og0 = og;
  og0.logit_bias_count = 0;
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &og0, t, NULL, NULL) == FS_OK,
            "group16 with count 0: %s", fs_last_error(NULL));
  og0 = og;
  og0.size = offsetof(fs_options, logit_bias_tokens);
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &og0, t, NULL, NULL) == FS_OK,
            "group16 with a 0.3.2 struct: %s", fs_last_error(NULL));
  printf("bad input: 5 counts, 6 arrays, %d sizes refused; 5 junk 0.3.2 structs accepted\n",
         tried);
  free(tok);
  free(val);
  ref_prob_free(&pr);
}

int main(void) {
  test_bad_input();
  test_oracle();
  test_augmented();
  test_shards();
  test_ban_is_mask();
  test_explicit();
  test_fp32_sum();
  test_nothing_drawable();
  test_law();
  return fs_test_done("test_reference_bias");
}
