// fs-test-timeout: 120
/*
** test_reference_filter.c: the CPU reference's filters (fs_options.min_p /
** min_ps, top_k / top_ks, top_p / top_ps of fs_reference_sample_ex and
** fs_reference_row_ex, since 0.3.4), against an oracle written here from
** flashsampling.h's definition: a sampled row's candidates (scores, the
** logits after the soft-cap and the mask, that are numbers above -inf) are
** filtered by min-p (z >= z_max + T ln min_p), then top-k (ties with the
** k-th kept), then top-p over the survivors' renormalised masses (a value is
** kept while the mass strictly above it is below p, ties kept); the draw is
** argmax over the kept set K of z / T + fs_noise(token), the unfiltered
** draw's noise; a +inf score takes all the mass.  The oracle states top-k
** and top-p as per-token predicates (how many survivors lie above a token,
** how much mass lies above it), not as the reference's walk down a sorted
** list.
**
**  1. 160 random problems (bf16 and fp16, B 1..6, D 8..64, V 1..3001 with V
**     not a multiple of 4, vocab_offset 0, 37, 4093, 1000003, padded strides,
**     an eighth of W's rows copies of others so that logits tie, soft-caps,
**     random masks with a row of one allowed token and one of none, greedy
**     rows (T = 0, -1, NaN), T = 0.25, 1, 3 and per-row +inf, 1-4 samples,
**     scalar and per-row filters with "off" values, NaN, negatives and
**     min_p > 1 among the per-row ones; on two in five a logit bias of 1-6
**     entries a row: ids in and out of the shard, repeats, -1 pads, values
**     from -3 to +12, +-inf and NaN, which the oracle adds before the
**     filters while the draws report raw logits): tokens, logits, keys and logprobs
**     bit for bit, and fs_reference_row_ex's winner, score, runner-up (the
**     best other kept token), tau, kept, filter_margin and mass_margin
**     exactly; at least 50 draws must be of a biased token.  The oracle with
**     the filters ignored, and one that
**     renormalises top-p over min-p's survivors instead of top-k's (a bug of
**     order), must disagree with the reference on many draws / rows.
**  2. Filters that keep every candidate (min_p 0 and 1e-30, top_k V, V + 1
**     and INT32_MAX, top_p 0 and 1, per-row arrays of 0, -1, NaN, 1.5, ...)
**     are the unfiltered draw bit for bit (tokens, logits, keys, logprobs),
**     with kept = the row's candidates and tau = -inf.
**  3. Edge cases on logits set directly (H = e_0, W[v] = (z_v, 0, ...)): ties
**     at the k-th value, ties at top-p's last value, top-p's mass exactly p
**     (kept: "reaches"), +inf logits (K = the +inf candidates, the first
**     drawn, also at T = +inf), NaN and -inf logits, a row with every token
**     masked and one without candidates (the unfiltered draw), T = +inf
**     (min-p keeps all; top-k and top-p by z over equal weights), per-row
**     min_p 1.5 (as 1), many samples; a row block boundary (B = 230 at
**     V = 151936: two blocks of logits) and a sample chunk boundary (B = 300,
**     S = 4000), each against fs_reference_row_ex; V = 151936 with D = 512.
**  4. The law: chi-square of 2 x 10^5 draws per case at V = 40 against the
**     filtered softmax computed in double (p > 1e-3), which must also reject
**     (p < 1e-6) the unfiltered softmax and the law of K plus the largest
**     dropped token (top-(k+1) where top-k cuts); one case with a logit bias
**     must also reject the law of the raw logits filtered and drawn (the
**     bias ignored).  Power: see law_case().
**  5. Bad input: min_p -0.1, 1.5, NaN; top_k -1; top_p 1.5, -0.5, NaN;
**     misaligned per-row arrays; filters with FS_NOISE_GROUP16:
**     FS_INVALID_ARGUMENT naming the argument (both entry points); filters
**     with a logit bias are accepted (0.3.4 and 0.3.5 refused them); the
**     0.3.3 struct (size offsetof(fs_options, min_p)) ignores the filter
**     fields.
** Runs in a few seconds on one core.
*/
#include "fs_int.h" /* FS_OPTIONS_SIZE_033 */
#include "fs_reference.h"
#include "fs_rng.h"
#include "fs_stats.h"
#include "fs_test.h"
#include "ref_util.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the oracle -------------------------------------------------------------- */

/* A candidate: a score that is a number above -inf. */
static int is_cand(double z) { return !isnan(z) && z != -INFINITY; }

/* A row's filter values as the call gives them. */
typedef struct fvals {
  float min_p;
  int32_t top_k;
  float top_p;
} fvals;

static fvals row_fvals(const fs_options *o, int b) {
  fvals f = {0.0f, 0, 0.0f};
  if (!o || o->size <= FS_OPTIONS_SIZE_033) return f; /* 0.3.3's struct: no filters */
  f.min_p = o->min_ps ? o->min_ps[b] : o->min_p;
  f.top_k = o->top_ks ? o->top_ks[b] : o->top_k;
  f.top_p = o->top_ps ? o->top_ps[b] : o->top_p;
  return f;
}

/* What the filters keep of a row. */
typedef struct okeep {
  int draw_k;         /* 0: the unfiltered draw over all tokens */
  long long n, kept;  /* candidates, kept ones */
  double tau, fmargin, mmargin;
  int dropped;        /* bits: 1 min-p, 2 top-k, 4 top-p dropped a candidate */
  int ties_k;         /* top-k kept more than k (ties with the k-th) */
} okeep;

static int desc(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

/* How many of s[0 .. m) (descending) exceed x. */
static long long above(const double *s, long long m, double x) {
  long long lo = 0, hi = m;
  while (lo < hi) {
    const long long mid = (lo + hi) / 2;
    if (s[mid] > x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The header's filters over the scores z[0 .. V) of a row at temperature
** T with values f.  broken: top-p's masses renormalised over min-p's
** survivors, not top-k's (a bug the comparison must catch).  buf: scratch
** of 3 V + 1 doubles. */
static okeep oracle_keep(const double *z, int V, float T, fvals f, int broken, double *buf) {
  okeep o = {0, 0, 0, -INFINITY, INFINITY, INFINITY, 0, 0};
  double zmax = -INFINITY;
  long long ninf = 0;
  for (int v = 0; v < V; v++)
    if (is_cand(z[v])) {
      o.n++;
      ninf += z[v] == INFINITY;
      if (z[v] > zmax) zmax = z[v];
    }
  o.kept = o.n;
  const int mp_on = f.min_p > 0.0f, k_on = f.top_k > 0 && f.top_k < o.n;
  const int p_on = f.top_p > 0.0f && f.top_p < 1.0f;
  if (!(T > 0.0f) || o.n == 0 || !(mp_on || k_on || p_on)) return o;
  o.draw_k = 1;
  if (zmax == INFINITY) { /* all the mass */
    o.kept = ninf;
    if (ninf < o.n) o.tau = INFINITY;
    return o;
  }
  const double Td = (double)T, pp = (double)f.top_p;
  /* 1. min-p: p_i >= min_p p_max, i.e. z >= z_max + T ln min_p; equal
  ** weights at T = +inf */
  double thr = -INFINITY;
  if (mp_on && !isinf(Td)) thr = zmax + Td * log(f.min_p > 1.0f ? 1.0 : (double)f.min_p);
  double *s1 = buf, *s2 = buf + V, *P = buf + 2 * V, near = INFINITY;
  long long m1 = 0, m2 = 0, m3 = 0;
  for (int v = 0; v < V; v++) {
    if (!is_cand(z[v])) continue;
    if (fabs(z[v] - thr) < near) near = fabs(z[v] - thr);
    if (z[v] >= thr) s1[m1++] = z[v];
  }
  if (m1 < o.n) o.fmargin = near, o.dropped |= 1;
  qsort(s1, (size_t)m1, sizeof *s1, desc);
  /* 2. top-k: a survivor stays when fewer than k survivors exceed it */
  for (long long i = 0; i < m1; i++)
    if (f.top_k <= 0 || above(s1, m1, s1[i]) < f.top_k) s2[m2++] = s1[i];
  if (m2 < m1) {
    o.dropped |= 2;
    if (s2[m2 - 1] - s1[m2] < o.fmargin) o.fmargin = s2[m2 - 1] - s1[m2];
  }
  o.ties_k = f.top_k > 0 && m2 > f.top_k;
  /* 3. top-p: a value stays while the mass strictly above it is below p */
  const double *base = broken ? s1 : s2;
  const long long mb = broken ? m1 : m2;
  P[0] = 0.0;
  for (long long i = 0; i < mb; i++)
    P[i + 1] = P[i] + (isinf(Td) ? 1.0 : exp((base[i] - zmax) / Td));
  const double W = P[mb];
  for (long long i = 0; i < m2; i++)
    if (!p_on || P[above(base, mb, s2[i])] / W < pp) m3 = i + 1;
  if (m3 < m2) {
    const double x = s2[m3 - 1];
    const long long g = above(base, mb, x), ge = above(base, mb, nextafter(x, -INFINITY));
    const double a = fabs(P[g] / W - pp), w = fabs(P[ge] / W - pp);
    o.dropped |= 4;
    o.mmargin = a < w ? a : w;
    if (x - s2[m3] < o.fmargin) o.fmargin = x - s2[m3];
  }
  o.kept = m3;
  if (m3 < o.n) o.tau = s2[m3 - 1];
  return o;
}

/* A draw of the oracle, with the runner-up. */
typedef struct odraw {
  int32_t token, second;
  double z, score, score2;
} odraw;

/* Row b's draw of `sample` from its scores z: over K (k->draw_k) or every
** token; z / T + fs_noise, or z on a greedy row; ties to the smaller id,
** NaN scores last, except that with hit (a call without filters) a biased
** token's NaN score (+inf at T = +inf) ranks as -inf; d.z the winner's rep
** (the logit it reports).  A filtered call keeps the rule at the score z
** only (oracle_scores: -inf), so its +inf at T = +inf stays NaN. */
static odraw oracle_draw(const fs_problem *p, const fs_sampling *s, const double *z,
                         const double *rep, const int *hit, int b, int sample,
                         const okeep *k) {
  const float T = s->temperatures ? s->temperatures[b] : s->temperature;
  const uint64_t seed = s->seeds ? s->seeds[b] : s->seed;
  const uint64_t off = s->offsets ? s->offsets[b] : s->offset;
  const uint32_t tag = s->seeds ? 0u : (uint32_t)b + 1u;
  odraw d = {-1, -1, 0.0, -INFINITY, -INFINITY};
  for (int v = 0; v < p->vocab; v++) {
    if (k->draw_k && !(is_cand(z[v]) && z[v] >= k->tau)) continue;
    const uint32_t t = (uint32_t)(p->vocab_offset + v);
    double sc = !(T > 0.0f) ? z[v]
                                  : z[v] / (double)T +
                                        (double)fs_noise(seed, off, t, (uint32_t)sample, tag);
    if (hit && hit[v] && isnan(sc)) sc = -INFINITY;
    if (d.token < 0 || ref_beats(sc, d.score)) {
      d.second = d.token, d.score2 = d.score;
      d.token = (int32_t)t, d.z = rep[v], d.score = sc;
    } else if (d.second < 0 || ref_beats(sc, d.score2)) {
      d.second = (int32_t)t, d.score2 = sc;
    }
  }
  return d;
}

/* Row b's scores into cz: the capped logits plus each biased token's values
** (summed in fp32 in entry order, as the reference sums them; a NaN score
** of a biased token is -inf), -inf where masked; the raw capped logits into
** rz; with rep, the logits a draw reports: rz, -inf where masked; with
** hit, 1 for the biased tokens that the mask allows, else 0. */
static void oracle_scores(const fs_problem *p, const fs_options *o, int b, double *rz,
                          double *cz, double *rep, int *hit) {
  const long long stride = o && o->token_mask ? (o->token_mask_stride
                                                     ? o->token_mask_stride
                                                     : (p->vocab_offset + p->vocab + 31) / 32)
                                              : 0;
  ref_oracle_logits(p, b, rz);
  for (int v = 0; v < p->vocab; v++) {
    rz[v] = ref_cap(rz[v], o ? o->logit_softcap : 0.0f);
    cz[v] = ref_allowed(o ? o->token_mask : NULL, stride, b, p->vocab_offset + v) ? rz[v]
                                                                               : -INFINITY;
    if (rep) rep[v] = cz[v]; /* before the bias */
    if (hit) hit[v] = 0;
  }
  const int n = o && o->size > offsetof(fs_options, logit_bias_count) ? o->logit_bias_count : 0;
  const int32_t *bt = n ? o->logit_bias_tokens + (size_t)b * n : NULL;
  const float *bv = n ? o->logit_bias_values + (size_t)b * n : NULL;
  for (int j = 0; j < n; j++) {
    const long long v = (long long)bt[j] - p->vocab_offset;
    int first = v >= 0 && v < p->vocab;
    for (int i = 0; i < j && first; i++) first = bt[i] != bt[j];
    if (!first) continue;
    double sum = (double)bv[j];
    for (int i = j + 1; i < n; i++)
      if (bt[i] == bt[j]) sum = (double)((float)sum + bv[i]);
    const int allowed =
        ref_allowed(o->token_mask, stride, b, p->vocab_offset + v); /* else -inf stays */
    if (allowed) cz[v] = isnan(rz[v] + sum) ? -INFINITY : rz[v] + sum;
    if (allowed && hit) hit[v] = 1;
  }
}

static int same_double(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* ---- 1. random problems against the oracle --------------------------------------- */

static long g_draws, g_sampled, g_moved, g_rows, g_rows_cut, g_broken_rows, g_ties_k;
static long g_biased_draws; /* draws of a token that a bias entry names (its raw logit reported) */
static long g_dropped[3];

/* Checks fs_reference_sample_ex and fs_reference_row_ex with options o (its
** logprobs set) against the oracle. */
static void check_problem(const fs_problem *p, const fs_sampling *s, const fs_options *o,
                          const char *what) {
  const int B = p->batch, V = p->vocab, S = s->num_samples;
  const size_t n = (size_t)B * S;
  ref_outs out = ref_outs_new(n), un = ref_outs_new(n);
  float *lpu = ref_xalloc(sizeof(float) * n);
  double *rz = ref_xalloc(sizeof(double) * (size_t)V), *cz = ref_xalloc(sizeof(double) * (size_t)V);
  double *rp = ref_xalloc(sizeof(double) * (size_t)V);
  int *hit = ref_xalloc(sizeof(int) * (size_t)V);
  double *buf = ref_xalloc(sizeof(double) * (3 * (size_t)V + 1));
  int rc = fs_reference_sample_ex(p, s, FS_NOISE_TOKEN, o, out.tokens, out.logits, out.keys);
  CHECK_MSG(rc == FS_OK, "%s: %s", what, fs_last_error(NULL));
  /* the same call without filters: the 0.3.3 struct */
  fs_options u = *o;
  u.size = offsetof(fs_options, min_p);
  u.logprobs = lpu;
  REQUIRE(fs_reference_sample_ex(p, s, FS_NOISE_TOKEN, &u, un.tokens, un.logits, un.keys) ==
          FS_OK);
  if (rc != FS_OK) goto done;
  int bad = 0;
  for (int b = 0; b < B; b++) {
    const float T = s->temperatures ? s->temperatures[b] : s->temperature;
    oracle_scores(p, o, b, rz, cz, rp, hit);
    const okeep k = oracle_keep(cz, V, T, row_fvals(o, b), 0, buf);
    const okeep kb = oracle_keep(cz, V, T, row_fvals(o, b), 1, buf);
    const okeep none = {0, k.n, k.n, -INFINITY, INFINITY, INFINITY, 0, 0};
    g_rows++;
    g_rows_cut += k.kept < k.n;
    g_broken_rows += kb.kept != k.kept;
    g_ties_k += k.ties_k;
    for (int f = 0; f < 3; f++) g_dropped[f] += k.dropped >> f & 1;
    fs_ref_result r0;
    rc = fs_reference_row_ex(p, s, FS_NOISE_TOKEN, o, b, 0, &r0);
    CHECK_MSG(rc == FS_OK, "%s: fs_reference_row_ex: %s", what, fs_last_error(NULL));
    if (rc != FS_OK) continue;
    CHECK_MSG(fabs(r0.lse - ref_lse(rz, V)) <= 1e-12 * (1.0 + fabs(r0.lse)),
              "%s: row %d: lse %.17g, the oracle's %.17g", what, b, r0.lse, ref_lse(rz, V));
    for (int t = 0; t < S; t++) {
      const size_t i = (size_t)b * S + t;
      const odraw d = oracle_draw(p, s, cz, rp, NULL, b, t, &k);
      const odraw du = oracle_draw(p, s, cz, rp, hit, b, t, &none);
      g_draws++;
      if (T > 0.0f) g_sampled++, g_moved += d.token != du.token;
      g_biased_draws += cz[d.token - p->vocab_offset] != rp[d.token - p->vocab_offset];
      const int ok = out.tokens[i] == d.token && ref_float_bits_equal(out.logits[i], (float)d.z) &&
                     out.keys[i] == fs_pack_key((float)d.score, (uint32_t)d.token) &&
                     ref_float_bits_equal(o->logprobs[i], (float)(d.z - r0.lse));
      if (!ok && bad++ < 5)
        fprintf(stderr, "%s: b=%d s=%d (T=%g, kept %lld of %lld, tau %.9g): token %d logit "
                "%.9g key %016llx logprob %.9g, want %d %.9g %016llx %.9g\n", what, b, t,
                (double)T, k.kept, k.n, k.tau, (int)out.tokens[i], (double)out.logits[i],
                (unsigned long long)out.keys[i], (double)o->logprobs[i], (int)d.token, d.z,
                (unsigned long long)fs_pack_key((float)d.score, (uint32_t)d.token),
                d.z - r0.lse);
      /* the unfiltered call is the oracle without filters */
      CHECK_MSG(un.tokens[i] == du.token &&
                    un.keys[i] == fs_pack_key((float)du.score, (uint32_t)du.token),
                "%s: b=%d s=%d: unfiltered %d, oracle %d", what, b, t, (int)un.tokens[i],
                (int)du.token);
      if (t != 0 && t != S - 1) continue;
      fs_ref_result r = r0;
      if (t) REQUIRE(fs_reference_row_ex(p, s, FS_NOISE_TOKEN, o, b, t, &r) == FS_OK);
      CHECK_MSG(r.token == d.token && same_double(r.logit, d.z) &&
                    same_double(r.score, d.score) && r.second_token == d.second &&
                    same_double(r.second_score, d.score2) && r.tau == k.tau &&
                    r.kept == k.kept && r.filter_margin == k.fmargin &&
                    r.mass_margin == k.mmargin,
                "%s: row_ex b=%d s=%d: token %d score %.17g second %d %.17g tau %.17g kept "
                "%lld margins %.17g %.17g; want %d %.17g %d %.17g %.17g %lld %.17g %.17g",
                what, b, t, (int)r.token, r.score, (int)r.second_token, r.second_score, r.tau,
                r.kept, r.filter_margin, r.mass_margin, (int)d.token, d.score, (int)d.second,
                d.score2, k.tau, k.kept, k.fmargin, k.mmargin);
    }
  }
  CHECK_MSG(bad == 0, "%s: %d of %zu draws differ from the oracle", what, bad, n);
done:
  free(rz);
  free(cz);
  free(rp);
  free(hit);
  free(buf);
  free(lpu);
  ref_outs_free(&out);
  ref_outs_free(&un);
}

static void test_oracle(void) {
  static const int Ds[] = {8, 16, 32, 64};
  static const int Vs[] = {1, 2, 3, 5, 13, 37, 64, 101, 258, 1000, 2053, 3001};
  static const long long offs[] = {0, 37, 4093, 1000003};
  static const float caps[] = {0.0f, 0.0f, 2.0f, 6.0f};
  static const float mps[] = {0.0f, 0.02f, 0.1f, 0.5f, 1.0f};
  static const float pps[] = {0.0f, 1.0f, 0.5f, 0.9f};
  static const float row_mps[] = {0.0f, -0.5f, NAN, 0.01f, 0.1f, 0.3f, 0.7f, 1.0f, 1.5f, 1e-30f};
  static const float row_pps[] = {0.0f, 1.0f, NAN, -0.5f, 1.5f, 0.2f, 0.5f, 0.8f, 0.95f, 0.99f};
  unsigned long long st = 0x66696c746572ull;
  for (int it = 0; it < 160; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)(fs_test_rand(&st) % 6);
    const int D = Ds[fs_test_rand(&st) % 4], V = Vs[fs_test_rand(&st) % 12];
    const long long voff = offs[it % 4];
    const long long hs = it % 5 == 1 ? D + 8 : 0, ws = it % 7 == 2 ? D + 16 : 0;
    const float c = caps[(it / 4) % 4];
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, hs, ws, voff,
                  ref_scale_for_sd(1.0 + (double)(fs_test_rand(&st) % 3), D), &st);
    const long long wse = ws ? ws : D;
    for (int v = 0; v < V && V > 1; v++) /* ties: an eighth of the rows repeat another */
      if (fs_test_rand(&st) % 8 == 0)
        memcpy(pr.w + v * wse, pr.w + (long long)(fs_test_rand(&st) % (unsigned)V) * wse,
               sizeof(uint16_t) * (size_t)D);
    float temps[6];
    uint64_t seeds[6], offsets[6];
    fs_sampling s = ref_random_sampling(it, B, 4, temps, seeds, offsets, &st);
    for (int b = 0; b < B; b++)
      if (fs_test_rand(&st) % 6 == 0) temps[b] = INFINITY; /* per-row only */
    const long long stride = (voff + V + 31) / 32 + it % 2;
    uint32_t *m = it % 3 == 1 ? ref_make_mask(&pr.p, stride, 0.6, &st) : NULL;
    float min_ps[6], top_ps[6], lp[6 * 4];
    int32_t top_ks[6];
    const int32_t ks[] = {0, -1, 1, 2, 3, 10, 50, V - 1, V, V + 7};
    for (int b = 0; b < B; b++) {
      min_ps[b] = row_mps[fs_test_rand(&st) % 10];
      top_ks[b] = ks[fs_test_rand(&st) % 10];
      top_ps[b] = row_pps[fs_test_rand(&st) % 10];
    }
    const unsigned pick = (unsigned)fs_test_rand(&st);
    fs_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.token_mask = m;
    o.token_mask_stride = m && it % 2 ? stride : 0;
    o.logprobs = lp;
    o.logit_softcap = c;
    o.min_p = mps[pick % 5];
    o.top_k = (int32_t[]){0, 1, 3, 20, V}[pick / 5 % 5];
    o.top_p = pps[pick / 25 % 4];
    o.min_ps = pick / 100 % 3 == 0 ? min_ps : NULL;
    o.top_ks = pick / 300 % 3 == 0 ? top_ks : NULL;
    o.top_ps = pick / 900 % 3 == 0 ? top_ps : NULL;
    /* a logit bias on two problems in five (its own random stream): ids in
    ** the shard, repeats, ids outside it, -1 pads; values that move a token
    ** a little or a lot, +-inf and NaN */
    static const float bvals[] = {-3.0f, -1.0f, 0.5f, 2.0f, 6.0f, 12.0f, INFINITY, -INFINITY, NAN};
    int32_t btok[6 * 6];
    float bval[6 * 6];
    unsigned long long bs = 0xB1A5ull + (unsigned long long)it;
    const int nb = it % 5 >= 3 ? 1 + (int)(fs_test_rand(&bs) % 6) : 0;
    for (int b = 0; b < B; b++)
      for (int j = 0; j < nb; j++) {
        const unsigned r = (unsigned)(fs_test_rand(&bs) % 20);
        int32_t *t = &btok[b * nb + j];
        *t = (int32_t)(voff + (long long)(fs_test_rand(&bs) % (unsigned)V));
        if (r == 0) *t = -1;
        else if (r == 1) *t = (int32_t)(voff + V + 2);
        else if (r <= 3 && j > 0) *t = btok[b * nb + (int)(fs_test_rand(&bs) % (unsigned)j)];
        const unsigned k = (unsigned)(fs_test_rand(&bs) % 24);
        bval[b * nb + j] = bvals[k < 6 ? k : k < 21 ? k % 6 : k - 15];
      }
    o.logit_bias_tokens = nb ? btok : NULL;
    o.logit_bias_values = nb ? bval : NULL;
    o.logit_bias_count = nb;
    char what[200];
    snprintf(what, sizeof what,
             "problem %d (%s B=%d D=%d V=%d off=%lld S=%d c=%g%s, bias %d; min_p %g%s top_k %d%s "
             "top_p %g%s)", it, dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, D, V, voff,
             (int)s.num_samples, (double)c, m ? " masked" : "", nb, (double)o.min_p,
             o.min_ps ? "/rows" : "", (int)o.top_k, o.top_ks ? "/rows" : "", (double)o.top_p,
             o.top_ps ? "/rows" : "");
    check_problem(&pr.p, &s, &o, what);
    free(m);
    ref_prob_free(&pr);
  }
  printf("oracle: %ld draws of 160 problems (%ld sampled; the filters moved %ld; %ld of a "
         "biased token); %ld of %ld rows cut (min-p %ld, top-k %ld, top-p %ld; %ld with ties at "
         "the k-th); top-p over min-p's survivors keeps another count in %ld rows\n", g_draws,
         g_sampled, g_moved, g_biased_draws, g_rows_cut, g_rows, g_dropped[0], g_dropped[1],
         g_dropped[2], g_ties_k, g_broken_rows);
  CHECK_MSG(g_biased_draws >= 50, "only %ld draws of a biased token: the raw logits they "
            "report are not tested", g_biased_draws);
  /* the broken oracles: filters ignored, and top-p over the wrong set */
  CHECK_MSG(g_moved > g_sampled / 5, "the filters moved only %ld of %ld sampled draws",
            g_moved, g_sampled);
  CHECK_MSG(g_broken_rows >= 5, "top-p over min-p's survivors differs in %ld rows only",
            g_broken_rows);
  CHECK_MSG(g_dropped[0] >= 20 && g_dropped[1] >= 20 && g_dropped[2] >= 20 && g_ties_k >= 5,
            "coverage: min-p cut %ld rows, top-k %ld, top-p %ld, ties at the k-th %ld",
            g_dropped[0], g_dropped[1], g_dropped[2], g_ties_k);
}

/* ---- 2. filters that keep everything -------------------------------------------- */

static void test_keep_all(void) {
  enum { B = 6, D = 32, V = 301, S = 3 };
  unsigned long long st = 0x6b656570616c6cull;
  const float NaN = NAN;
  for (int it = 0; it < 4; it++) {
    ref_prob pr;
    ref_prob_make(&pr, it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16, B, D, V, 0, 0, 123,
                  ref_scale_for_sd(1.0, D), &st);
    const float temps[B] = {1.0f, 0.25f, 3.0f, 0.0f, INFINITY, 0.7f};
    const fs_sampling s = {0.0f, temps, S, 77u + (uint64_t)it, NULL, 5u, NULL};
    const long long stride = (123 + V + 31) / 32;
    uint32_t *m = it >= 2 ? ref_make_mask(&pr.p, stride, 0.5, &st) : NULL;
    const float c = it % 2 ? 3.0f : 0.0f;
    const float mp_off[B] = {0.0f, -1.0f, NaN, -0.0f, 0.0f, -INFINITY};
    const float mp_tiny[B] = {1e-30f, 1e-30f, 1e-30f, 1e-30f, 1e-30f, 1e-30f};
    const int32_t k_off[B] = {0, -3, V, V + 1, INT32_MIN, INT32_MAX};
    const float p_off[B] = {1.0f, 0.0f, NaN, 1.5f, -0.5f, INFINITY};
    ref_outs want = ref_outs_new(B * S), got = ref_outs_new(B * S);
    float lpw[B * S], lpg[B * S];
    fs_options base;
    memset(&base, 0, sizeof base);
    base.size = sizeof base;
    base.token_mask = m;
    base.logit_softcap = c;
    base.logprobs = lpw;
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &base, want.tokens, want.logits,
                                   want.keys) == FS_OK);
    for (int k = 0; k < 11; k++) {
      fs_options o = base;
      o.logprobs = lpg;
      switch (k) {
      case 0: o.top_p = 1.0f; break;
      case 1: o.top_k = V; break;
      case 2: o.top_k = V + 1; break;
      case 3: o.top_k = INT32_MAX; o.top_p = 1.0f; break;
      case 4: o.min_p = 1e-30f; break; /* on, and keeps all: z_max - z < 69 T */
      case 5: o.min_ps = mp_off; break;
      case 6: o.top_ks = k_off; break;
      case 7: o.top_ps = p_off; break;
      case 8: o.min_ps = mp_off; o.top_ks = k_off; o.top_ps = p_off; o.top_k = 5; break;
      case 9: o.min_ps = mp_tiny; o.top_ks = k_off; o.top_p = 1.0f; break;
      default: o.min_p = 1e-30f; o.top_k = V; o.top_ps = p_off; break;
      }
      char what[64];
      snprintf(what, sizeof what, "keep all %d.%d", it, k);
      const int rc = fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, got.tokens,
                                            got.logits, got.keys);
      CHECK_MSG(rc == FS_OK, "%s: %s", what, fs_last_error(NULL));
      if (rc != FS_OK) continue;
      CHECK_MSG(!memcmp(got.tokens, want.tokens, sizeof lpw) &&
                    !memcmp(got.logits, want.logits, sizeof lpw) &&
                    !memcmp(got.keys, want.keys, sizeof(uint64_t) * B * S) &&
                    !memcmp(lpg, lpw, sizeof lpw),
                "%s: not the unfiltered draw", what);
      for (int b = 0; b < B; b++) {
        fs_ref_result r, ru;
        REQUIRE(fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, b, S - 1, &r) == FS_OK);
        REQUIRE(fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &base, b, S - 1, &ru) == FS_OK);
        long long cands = 0;
        for (long long t = 123; t < 123 + V; t++) cands += ref_allowed(m, stride, b, t);
        CHECK_MSG(r.token == ru.token && same_double(r.score, ru.score) &&
                      same_double(r.logit, ru.logit) && r.lse == ru.lse &&
                      r.tau == -INFINITY && r.kept == cands && ru.kept == cands &&
                      ru.tau == -INFINITY && r.filter_margin == INFINITY &&
                      r.mass_margin == INFINITY && ru.filter_margin == INFINITY,
                  "%s: row %d: token %d / %d, tau %g, kept %lld / %lld of %lld", what, b,
                  (int)r.token, (int)ru.token, r.tau, r.kept, ru.kept, cands);
      }
    }
    ref_outs_free(&want);
    ref_outs_free(&got);
    free(m);
    ref_prob_free(&pr);
  }
}

/* ---- 3. edge cases on logits set directly ---------------------------------------- */

#define DZ_D 8

/* B rows whose logits are exactly zv[0 .. V) (bf16 values, +-inf and NaN
** too): H rows e_0, W rows (zv[v], 0, ..., 0). */
static void direct_make(ref_prob *pr, int B, int V, long long voff, const float *zv) {
  memset(pr, 0, sizeof *pr);
  pr->p.batch = B;
  pr->p.hidden = DZ_D;
  pr->p.vocab = V;
  pr->p.vocab_offset = voff;
  pr->p.dtype = FS_DTYPE_BF16;
  pr->h = ref_xalloc(sizeof(uint16_t) * DZ_D * (size_t)B);
  pr->w = ref_xalloc(sizeof(uint16_t) * DZ_D * (size_t)V);
  memset(pr->h, 0, sizeof(uint16_t) * DZ_D * (size_t)B);
  memset(pr->w, 0, sizeof(uint16_t) * DZ_D * (size_t)V);
  for (int b = 0; b < B; b++) pr->h[b * DZ_D] = fs_test_f2bf(1.0f);
  for (int v = 0; v < V; v++) {
    pr->w[v * DZ_D] = fs_test_f2bf(zv[v]);
    REQUIRE(isnan(zv[v]) || fs_test_bf2f(pr->w[v * DZ_D]) == zv[v]);
  }
  pr->p.hidden_states = pr->h;
  pr->p.weight = pr->w;
}

/* Row `row` of (p, s, o) through fs_reference_row_ex, sample 0. */
static fs_ref_result row_of(const fs_problem *p, const fs_sampling *s, const fs_options *o,
                            int row) {
  fs_ref_result r;
  const int rc = fs_reference_row_ex(p, s, FS_NOISE_TOKEN, o, row, 0, &r);
  CHECK_MSG(rc == FS_OK, "fs_reference_row_ex: %s", fs_last_error(NULL));
  if (rc != FS_OK) memset(&r, 0, sizeof r);
  return r;
}

static fs_options filt(float min_p, int32_t top_k, float top_p) {
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.min_p = min_p;
  o.top_k = top_k;
  o.top_p = top_p;
  return o;
}

/* Draws n samples of row 0 and counts them per local id into cnt[V]. */
static void count_draws(const fs_problem *p, float T, const fs_options *o, int n, long long *cnt) {
  const fs_sampling s = {T, NULL, n, 0xabcdefull, NULL, 99u, NULL};
  int32_t *tok = ref_xalloc(sizeof(int32_t) * (size_t)n);
  REQUIRE(fs_reference_sample_ex(p, &s, FS_NOISE_TOKEN, o, tok, NULL, NULL) == FS_OK);
  memset(cnt, 0, sizeof(long long) * (size_t)p->vocab);
  for (int i = 0; i < n; i++) {
    REQUIRE(tok[i] >= p->vocab_offset && tok[i] < p->vocab_offset + p->vocab);
    cnt[tok[i] - p->vocab_offset]++;
  }
  free(tok);
}

static void test_ties(void) {
  /* top-k: the sorted values 5, 4, 4, 4, 3, 2, 1, -1 */
  const float zk[8] = {1, 4, 5, 4, 3, 4, 2, -1};
  ref_prob pr;
  direct_make(&pr, 1, 8, 10, zk);
  const fs_sampling s1 = {1.0f, NULL, 1, 3u, NULL, 0u, NULL};
  static const struct { int k; long long kept; double tau, margin; } kc[] = {
      {1, 1, 5, 1}, {2, 4, 4, 1}, {3, 4, 4, 1}, {4, 4, 4, 1}, {5, 5, 3, 1}, {7, 7, 1, 2},
      {8, 8, -INFINITY, INFINITY}};
  for (int i = 0; i < 7; i++) {
    const fs_options o = filt(0.0f, kc[i].k, 0.0f);
    const fs_ref_result r = row_of(&pr.p, &s1, &o, 0);
    CHECK_MSG(r.kept == kc[i].kept && r.tau == kc[i].tau && r.filter_margin == kc[i].margin &&
                  r.mass_margin == INFINITY,
              "top_k=%d over 5,4,4,4,3,2,1,-1: kept %lld tau %g margin %g, want %lld %g %g",
              kc[i].k, r.kept, r.tau, r.filter_margin, kc[i].kept, kc[i].tau, kc[i].margin);
  }
  long long cnt[8];
  const fs_options k2 = filt(0.0f, 2, 0.0f);
  count_draws(&pr.p, 1.0f, &k2, 4000, cnt);
  CHECK_MSG(cnt[0] + cnt[4] + cnt[6] + cnt[7] == 0 && cnt[1] > 400 && cnt[3] > 400 &&
                cnt[5] > 400 && cnt[2] > 1500,
            "top_k=2 with ties: counts %lld %lld %lld %lld %lld %lld %lld %lld", cnt[0], cnt[1],
            cnt[2], cnt[3], cnt[4], cnt[5], cnt[6], cnt[7]);
  printf("ties at the k-th: top_k=2 of 5,4,4,4,3,..: 4000 draws %lld (z=5), %lld, %lld, %lld "
         "(z=4)\n", cnt[2], cnt[1], cnt[3], cnt[5]);
  ref_prob_free(&pr);

  /* top-p: 1, 0, 0, 0, -1, -2 at T = 1, p = 0.5: the mass above 0 is
  ** 1 / W < 0.5, with the 0s (1 + 3/e) / W > 0.5: all three 0s kept */
  const float zp[6] = {0, 1, 0, -1, 0, -2};
  direct_make(&pr, 1, 6, 0, zp);
  const fs_options p5 = filt(0.0f, 0, 0.5f);
  fs_ref_result r = row_of(&pr.p, &s1, &p5, 0);
  const double e1 = exp(-1.0), W = 1.0 + e1 + e1 + e1 + exp(-2.0) + exp(-3.0);
  const double lo = fabs(1.0 / W - 0.5), hi = fabs((1.0 + e1 + e1 + e1) / W - 0.5);
  CHECK_MSG(r.kept == 4 && r.tau == 0.0 && r.filter_margin == 1.0 &&
                r.mass_margin == (lo < hi ? lo : hi),
            "top_p=0.5 with ties at 0: kept %lld tau %g margins %.17g %.17g, want 4 0 1 %.17g",
            r.kept, r.tau, r.filter_margin, r.mass_margin, lo < hi ? lo : hi);
  count_draws(&pr.p, 1.0f, &p5, 4000, cnt);
  CHECK_MSG(cnt[3] + cnt[5] == 0 && cnt[0] > 400 && cnt[2] > 400 && cnt[4] > 400,
            "top_p=0.5 with ties: counts %lld %lld %lld %lld %lld %lld", cnt[0], cnt[1], cnt[2],
            cnt[3], cnt[4], cnt[5]);
  ref_prob_free(&pr);

  /* a mass of exactly p reaches it: T = +inf weighs 3, 2, 1, 0 alike */
  const float zf[4] = {1, 3, 0, 2};
  direct_make(&pr, 1, 4, 0, zf);
  const float tinf[1] = {INFINITY};
  const fs_sampling si = {0.0f, tinf, 1, 3u, NULL, 0u, NULL};
  static const struct { float p; long long kept; double tau, mass; } pc[] = {
      {0.25f, 1, 3, 0.0}, {0.5f, 2, 2, 0.0}, {0.75f, 3, 1, 0.0}, {0.3f, 2, 2, 0.05}};
  for (int i = 0; i < 4; i++) {
    const fs_options o = filt(0.0f, 0, pc[i].p);
    r = row_of(&pr.p, &si, &o, 0);
    CHECK_MSG(r.kept == pc[i].kept && r.tau == pc[i].tau &&
                  fabs(r.mass_margin - pc[i].mass) < 1e-7 && r.filter_margin == 1.0,
              "T=inf top_p=%g over 3,2,1,0: kept %lld tau %g mass margin %g, want %lld %g %g",
              (double)pc[i].p, r.kept, r.tau, r.mass_margin, pc[i].kept, pc[i].tau, pc[i].mass);
  }
  const fs_options above_half = filt(0.0f, 0, nextafterf(0.5f, 1.0f));
  r = row_of(&pr.p, &si, &above_half, 0);
  CHECK_MSG(r.kept == 3, "T=inf top_p=0.5+ulp: kept %lld, want 3", r.kept);
  ref_prob_free(&pr);
}

static void test_infinities(void) {
  /* +inf at 1 and 3 (3 masked in row 1), NaN at 4, -inf at 5 */
  const float z[8] = {1, INFINITY, 2, INFINITY, NAN, -INFINITY, INFINITY, 0};
  ref_prob pr;
  direct_make(&pr, 3, 8, 0, z);
  const uint32_t mask[3] = {0xffu, 0xffu & ~2u, 0xffu};
  const float temps[3] = {1.0f, 0.5f, INFINITY};
  const fs_sampling s = {0.0f, temps, 50, 11u, NULL, 1u, NULL};
  fs_options o = filt(0.0f, 4, 0.0f); /* active: each row has 5 or 6 candidates */
  o.token_mask = mask;
  float lp[150];
  o.logprobs = lp;
  int32_t tok[150];
  float lg[150];
  uint64_t key[150];
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, lg, key) == FS_OK);
  int bad = 0;
  for (int b = 0; b < 3; b++)
    for (int t = 0; t < 50; t++) {
      const int i = b * 50 + t, want = b == 1 ? 3 : 1;
      bad += tok[i] != want || lg[i] != INFINITY || !isnan(lp[i]) ||
             (b < 2 && key[i] != fs_pack_key(INFINITY, (uint32_t)want)) ||
             (b == 2 && key[i] != fs_pack_key(NAN, (uint32_t)want)); /* inf / inf */
    }
  CHECK_MSG(bad == 0, "+inf logits with top_k=4: %d draws not the first +inf token "
            "(row 0: %d, row 1: %d, row 2: %d)", bad, (int)tok[0], (int)tok[50], (int)tok[100]);
  for (int b = 0; b < 3; b++) {
    const fs_ref_result r = row_of(&pr.p, &s, &o, b);
    const long long want = b == 1 ? 2 : 3; /* +inf candidates; NaN and -inf are none */
    CHECK_MSG(r.kept == want && r.tau == INFINITY && r.filter_margin == INFINITY &&
                  r.second_token == (b == 1 ? 6 : 3),
              "+inf row %d: kept %lld tau %g margin %g runner-up %d", b, r.kept, r.tau,
              r.filter_margin, (int)r.second_token);
  }
  ref_prob_free(&pr);

  /* every candidate +inf (top_k 1 cuts none of them): all kept, tau -inf */
  const float zi[4] = {-INFINITY, INFINITY, NAN, INFINITY};
  direct_make(&pr, 1, 4, 0, zi);
  const fs_sampling s1 = {1.0f, NULL, 1, 3u, NULL, 0u, NULL};
  const fs_options k1 = filt(0.0f, 1, 0.0f);
  const fs_ref_result r = row_of(&pr.p, &s1, &k1, 0);
  CHECK_MSG(r.token == 1 && r.kept == 2 && r.tau == -INFINITY && r.second_token == 3 &&
                r.score == INFINITY,
            "only +inf candidates: token %d kept %lld tau %g runner-up %d", (int)r.token,
            r.kept, r.tau, (int)r.second_token);
  ref_prob_free(&pr);
}

/* Rows without candidates draw as without filters. */
static void test_no_candidates(void) {
  const float z[5] = {NAN, -INFINITY, NAN, 2, 1};
  ref_prob pr;
  direct_make(&pr, 3, 5, 64, z);
  /* row 0: NaN, -inf, NaN and two numbers masked; row 1: all masked; row 2
  ** as is */
  const uint32_t mask[3 * 3] = {0, 0, 0x7u, 0, 0, 0, 0, 0, 0x1fu};
  const float temps[3] = {1.0f, 2.0f, 1.0f};
  const fs_sampling s = {0.0f, temps, 4, 5u, NULL, 6u, NULL};
  fs_options o = filt(0.3f, 1, 0.5f), u;
  o.token_mask = mask;
  o.token_mask_stride = 3;
  u = o;
  u.min_p = 0.0f, u.top_k = 0, u.top_p = 0.0f;
  float lp[12], lpu[12];
  o.logprobs = lp;
  u.logprobs = lpu;
  ref_outs a = ref_outs_new(12), w = ref_outs_new(12);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, a.tokens, a.logits, a.keys) ==
          FS_OK);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &u, w.tokens, w.logits, w.keys) ==
          FS_OK);
  CHECK_MSG(!memcmp(a.tokens, w.tokens, 8 * 4) && !memcmp(a.logits, w.logits, 8 * 4) &&
                !memcmp(a.keys, w.keys, 8 * 8) && !memcmp(lp, lpu, 8 * 4),
            "rows without candidates: not the unfiltered draw");
  CHECK_MSG(a.tokens[4] == 64 && a.logits[4] == -INFINITY && isnan(lp[4]), /* NaN logits */
            "all masked: token %d logit %g logprob %g", (int)a.tokens[4], (double)a.logits[4],
            (double)lp[4]);
  CHECK_MSG(a.tokens[0] == 65 && a.logits[0] == -INFINITY,
            "NaN and -inf only: token %d (want 65: -inf beats NaN) logit %g", (int)a.tokens[0],
            (double)a.logits[0]);
  for (int b = 0; b < 2; b++) {
    const fs_ref_result r = row_of(&pr.p, &s, &o, b);
    CHECK(r.kept == 0 && r.tau == -INFINITY && r.filter_margin == INFINITY);
  }
  /* row 2: min-p 0.3 keeps z >= 2 + ln 0.3 = 0.796: both numbers; top_k 1: 2 */
  const fs_ref_result r = row_of(&pr.p, &s, &o, 2);
  CHECK_MSG(r.kept == 1 && r.tau == 2.0 && r.token == 67 && r.second_token == -1 &&
                r.filter_margin == 1.0,
            "row 2: kept %lld tau %g token %d runner-up %d margin %g", r.kept, r.tau,
            (int)r.token, (int)r.second_token, r.filter_margin);
  ref_outs_free(&a);
  ref_outs_free(&w);
  ref_prob_free(&pr);
}

static void test_temperature_inf_and_min_p(void) {
  const float z[10] = {0, 9, 1, 8, 2, 7, 3, 6, 4, 5};
  ref_prob pr;
  direct_make(&pr, 4, 10, 7, z);
  const float temps[4] = {INFINITY, INFINITY, INFINITY, 1.0f};
  const fs_sampling s = {0.0f, temps, 2000, 21u, NULL, 4u, NULL};
  const float min_ps[4] = {0.5f, 1.0f, 1.5f, 1.5f};
  const int32_t top_ks[4] = {0, 3, 0, 0};
  fs_options o = filt(0.0f, 0, 0.0f);
  o.min_ps = min_ps;
  o.top_ks = top_ks;
  int32_t *tok = ref_xalloc(sizeof(int32_t) * 8000);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK);
  long long cnt[4][10];
  memset(cnt, 0, sizeof cnt);
  for (int i = 0; i < 8000; i++) cnt[i / 2000][tok[i] - 7]++;
  /* T = +inf: min-p keeps all (equal weights), uniform over the 10 */
  int lo = 2000;
  for (int v = 0; v < 10; v++) lo = cnt[0][v] < lo ? (int)cnt[0][v] : lo;
  CHECK_MSG(lo > 140, "T=inf min_p=0.5: least count %d of 2000 over 10 tokens", lo);
  /* top-k at T = +inf: by z (9, 8, 7 at 1, 3, 5), uniform */
  CHECK_MSG(cnt[1][1] + cnt[1][3] + cnt[1][5] == 2000 && cnt[1][1] > 500 && cnt[1][3] > 500 &&
                cnt[1][5] > 500,
            "T=inf top_k=3: %lld %lld %lld of 2000 on z = 9, 8, 7", cnt[1][1], cnt[1][3],
            cnt[1][5]);
  CHECK_MSG(cnt[2][0] > 140, "T=inf min_p=1.5 must keep all: %lld", cnt[2][0]);
  CHECK_MSG(cnt[3][1] == 2000, "T=1 min_p=1.5 (as 1): %lld of 2000 on the top token",
            cnt[3][1]);
  const fs_ref_result r0 = row_of(&pr.p, &s, &o, 0), r1 = row_of(&pr.p, &s, &o, 1);
  const fs_ref_result r3 = row_of(&pr.p, &s, &o, 3);
  CHECK_MSG(r0.kept == 10 && r0.tau == -INFINITY && r0.filter_margin == INFINITY,
            "T=inf min-p: kept %lld tau %g", r0.kept, r0.tau);
  CHECK_MSG(r1.kept == 3 && r1.tau == 7.0 && r1.filter_margin == 1.0, "T=inf top-3: kept %lld "
            "tau %g", r1.kept, r1.tau);
  CHECK_MSG(r3.kept == 1 && r3.tau == 9.0 && r3.filter_margin == 0.0 && r3.token == 8,
            "min_p 1.5 as 1: kept %lld tau %g margin %g token %d", r3.kept, r3.tau,
            r3.filter_margin, (int)r3.token);
  /* min_p 0.5 at T = 1: threshold 9 - ln 2, nearest z 8 */
  const float mp5[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  o.min_ps = mp5;
  o.top_ks = NULL;
  const fs_ref_result r = row_of(&pr.p, &s, &o, 3);
  CHECK_MSG(r.kept == 1 && r.tau == 9.0 && r.filter_margin == fabs(8.0 - (9.0 + log(0.5))),
            "min_p 0.5: kept %lld tau %g margin %.17g", r.kept, r.tau, r.filter_margin);
  free(tok);
  ref_prob_free(&pr);
}

/* fs_reference_sample_ex's draws (b, t) against fs_reference_row_ex's. */
static void check_rows(const fs_problem *p, const fs_sampling *s, const fs_options *o,
                       const int32_t *tok, const uint64_t *key, const int *rows, int nrows,
                       const int *samples, int nsamples, const char *what) {
  for (int i = 0; i < nrows; i++)
    for (int j = 0; j < nsamples; j++) {
      fs_ref_result r;
      REQUIRE(fs_reference_row_ex(p, s, FS_NOISE_TOKEN, o, rows[i], samples[j], &r) == FS_OK);
      const size_t at = (size_t)rows[i] * s->num_samples + samples[j];
      CHECK_MSG(tok[at] == r.token && key[at] == fs_pack_key((float)r.score, (uint32_t)r.token),
                "%s: row %d sample %d: %d, fs_reference_row_ex %d (kept %lld)", what, rows[i],
                samples[j], (int)tok[at], (int)r.token, r.kept);
    }
}

static void test_blocks(void) {
  unsigned long long st = 0x626c6f636b73ull;
  /* 230 rows of 151936 logits: blocks of 220 rows (256 MiB of doubles) */
  {
    enum { B = 230, V = 151936 };
    ref_prob pr;
    ref_prob_make(&pr, FS_DTYPE_BF16, B, 8, V, 0, 0, 0, ref_scale_for_sd(3.0, 8), &st);
    const fs_sampling s = {1.0f, NULL, 1, 8u, NULL, 9u, NULL};
    const fs_options o = filt(0.2f, 0, 0.0f);
    int32_t *tok = ref_xalloc(sizeof(int32_t) * B);
    uint64_t *key = ref_xalloc(sizeof(uint64_t) * B);
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, key) == FS_OK);
    const int rows[] = {0, 1, 219, 220, 221, 229}, smp[] = {0};
    check_rows(&pr.p, &s, &o, tok, key, rows, 6, smp, 1, "B=230 V=151936 min_p");
    free(tok);
    free(key);
    ref_prob_free(&pr);
  }
  /* 300 rows x 4000 samples: chunks of 3495 samples of one block */
  {
    enum { B = 300, V = 16, S = 4000 };
    ref_prob pr;
    ref_prob_make(&pr, FS_DTYPE_FP16, B, 8, V, 0, 0, 40, ref_scale_for_sd(2.0, 8), &st);
    const fs_sampling s = {0.8f, NULL, S, 8u, NULL, 9u, NULL};
    const fs_options o = filt(0.0f, 4, 0.9f);
    int32_t *tok = ref_xalloc(sizeof(int32_t) * B * S);
    uint64_t *key = ref_xalloc(sizeof(uint64_t) * B * S);
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, key) == FS_OK);
    const int rows[] = {0, 299}, smp[] = {0, 3494, 3495, 3999};
    check_rows(&pr.p, &s, &o, tok, key, rows, 2, smp, 4, "B=300 S=4000 top_k/top_p");
    free(tok);
    free(key);
    ref_prob_free(&pr);
  }
  /* an LM head's vocabulary with a wider D */
  {
    enum { B = 4, D = 512, V = 151936 };
    ref_prob pr;
    ref_prob_make(&pr, FS_DTYPE_BF16, B, D, V, 0, 0, 0, ref_scale_for_sd(2.0, D), &st);
    const float temps[B] = {1.0f, 0.6f, 0.0f, 1.3f};
    const fs_sampling s = {0.0f, temps, 2, 8u, NULL, 9u, NULL};
    const int32_t top_ks[B] = {50, 0, 50, 1000};
    fs_options o = filt(0.0f, 0, 0.9f);
    o.top_ks = top_ks;
    int32_t tok[B * 2];
    uint64_t key[B * 2];
    REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, key) == FS_OK);
    const int rows[] = {0, 1, 2, 3}, smp[] = {0, 1};
    check_rows(&pr.p, &s, &o, tok, key, rows, 4, smp, 2, "V=151936 D=512");
    const fs_ref_result r = row_of(&pr.p, &s, &o, 0);
    printf("V=151936 D=512 top_k=50 top_p=0.9: row 0 keeps %lld (tau %.4f, margins %.3g "
           "%.3g)\n", r.kept, r.tau, r.filter_margin, r.mass_margin);
    CHECK(r.kept >= 1 && r.kept <= 50);
    ref_prob_free(&pr);
  }
}

/* ---- 4. the law: chi-square ------------------------------------------------------ */

#define LAW_V 40
#define LAW_ROWS 4
#define LAW_S 50000 /* 2e5 draws a case */

static void reject_law(const int64_t *counts, const double *p, const double *q, double N,
                       const char *name, const char *what) {
  const fs_chi2 bad = fs_stats_chi2_gof(counts, q, LAW_V);
  const double lam = fs_stats_noncentrality(p, q, LAW_V, N);
  const double pw = fs_stats_power(bad.dof, lam, 1e-6);
  const double crit = fs_stats_chi2_critical(bad.dof, 1e-6);
  printf("; %s: p=%.3g lambda=%.3g (%.0f sd past the critical %.1f) power=%.9f", name, bad.p,
         lam, (bad.dof + lam - crit) / sqrt(2.0 * (bad.dof + 2.0 * lam)), crit, pw);
  CHECK_MSG(bad.p < 1e-6, "%s: fails to reject %s: p=%g", what, name, bad.p);
  CHECK_MSG(pw > 0.999999, "%s: power against %s only %.9f (lambda %g)", what, name, pw, lam);
}

/* softmax(z / T) over {z >= tau} (all where tau is -inf). */
static void law(const double *z, double T, double tau, double *p) {
  double mx = -INFINITY, sum = 0.0;
  for (int v = 0; v < LAW_V; v++)
    if (z[v] >= tau && z[v] > mx) mx = z[v];
  for (int v = 0; v < LAW_V; v++) sum += p[v] = z[v] >= tau ? exp((z[v] - mx) / T) : 0.0;
  for (int v = 0; v < LAW_V; v++) p[v] /= sum;
}

/* Power (printed per case; measured with the reference): 2e5 draws.  The
** unfiltered softmax (39 degrees of freedom, a 1e-6 critical value of 96)
** expects the dropped tokens' 9-47% of the mass where no draw fell: lambda
** = 1.9e4 to 1.8e5, the statistic's mean 69 to 211 sd past the critical
** value.  K plus the largest dropped token (top-(k+1) where top-k cuts, the
** next value where top-p or min-p cuts; 7-14 degrees of freedom, critical
** values 43-57) expects that token's 1.3-5.2% of the draws: lambda = N q =
** 2600 to 11000, 25 to 52 sd past.  Both print p = 0 (power 1 - O(1e-100));
** fs_stats_power() > 0.999999 is CHECKed for each. */
static void law_case(int dtype, float T, const fs_options *o, double sd, unsigned long long seed,
                     const char *name) {
  unsigned long long st = seed;
  ref_prob pr;
  ref_prob_make(&pr, dtype, LAW_ROWS, 32, LAW_V, 0, 0, 5000, ref_scale_for_sd(sd, 32), &st);
  for (int b = 1; b < LAW_ROWS; b++) memcpy(pr.h + b * 32, pr.h, sizeof(uint16_t) * 32);
  double z[LAW_V], rz[LAW_V], p[LAW_V], q[LAW_V], buf[3 * LAW_V + 1];
  oracle_scores(&pr.p, o, 0, rz, z, NULL, NULL);
  const okeep k = oracle_keep(z, LAW_V, T, row_fvals(o, 0), 0, buf);
  const fs_sampling s = {T, NULL, LAW_S, seed ^ 0x5eedull, NULL, 3u, NULL};
  const size_t N = (size_t)LAW_ROWS * LAW_S;
  int32_t *tok = ref_xalloc(sizeof(int32_t) * N);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, o, tok, NULL, NULL) == FS_OK);
  int64_t counts[LAW_V] = {0};
  for (size_t j = 0; j < N; j++) {
    const long long v = tok[j] - 5000;
    REQUIRE(v >= 0 && v < LAW_V);
    counts[v]++;
  }
  law(z, (double)T, k.tau, p);
  const fs_chi2 good = fs_stats_chi2_gof(counts, p, LAW_V);
  char what[96];
  snprintf(what, sizeof what, "law %s T=%.1f", name, (double)T);
  printf("%s: keeps %lld of %d (tau %.3f; cut by%s%s%s): chi2=%.1f dof=%d p=%.3g", what,
         k.kept, LAW_V, k.tau, k.dropped & 1 ? " min-p" : "", k.dropped & 2 ? " top-k" : "",
         k.dropped & 4 ? " top-p" : "", good.stat, good.dof, good.p);
  CHECK(k.kept < LAW_V && k.kept >= 4);
  CHECK(good.total == (int64_t)N && good.impossible == 0 && good.dof >= (int)k.kept - 3);
  CHECK_MSG(good.p > 1e-3, "%s: chi-square rejects the filtered softmax: p=%g", what, good.p);
  law(z, (double)T, -INFINITY, q);
  double drop = 0.0;
  for (int v = 0; v < LAW_V; v++) drop += p[v] > 0.0 ? 0.0 : q[v];
  printf(" (unfiltered, the dropped tokens hold %.3f)", drop);
  reject_law(counts, p, q, (double)N, "unfiltered", what);
  double next = -INFINITY; /* the largest dropped z */
  for (int v = 0; v < LAW_V; v++)
    if (z[v] < k.tau && z[v] > next) next = z[v];
  law(z, (double)T, next, q);
  double extra = 0.0;
  for (int v = 0; v < LAW_V; v++) extra += p[v] > 0.0 ? 0.0 : q[v];
  printf(" (K + 1: the extra token %.4f)", extra);
  reject_law(counts, p, q, (double)N, "K + 1", what);
  if (o->logit_bias_count) { /* the filters and the draw of the raw logits: the bias ignored */
    const okeep kr = oracle_keep(rz, LAW_V, T, row_fvals(o, 0), 0, buf);
    law(rz, (double)T, kr.tau, q);
    reject_law(counts, p, q, (double)N, "the bias ignored", what);
  }
  printf("\n");
  free(tok);
  ref_prob_free(&pr);
}

static void test_law(void) {
  const fs_options k8 = filt(0.0f, 8, 0.0f);
  law_case(FS_DTYPE_BF16, 1.0f, &k8, 2.0, 0x6c617731ull, "top_k=8");
  const fs_options mpp = filt(0.05f, 0, 0.9f);
  law_case(FS_DTYPE_FP16, 1.0f, &mpp, 1.2, 0x6c617732ull, "min_p=0.05 top_p=0.9");
  /* per-row arrays, the same in every row */
  const int32_t ks[LAW_ROWS] = {12, 12, 12, 12};
  const float ps[LAW_ROWS] = {0.85f, 0.85f, 0.85f, 0.85f};
  fs_options rows = filt(0.0f, 0, 0.0f);
  rows.top_ks = ks;
  rows.top_ps = ps;
  law_case(FS_DTYPE_BF16, 1.5f, &rows, 1.5, 0x6c617733ull, "top_ks=12 top_ps=0.85");
  /* with a logit bias (since 0.3.6): the filters see the biased scores;
  ** each row: id 3 +2.5, id 0 -inf, id 7 listed twice (+1, +0.5), an id
  ** past the shard, a -1 pad; ids from vocab_offset 5000 */
  enum { NB = 6 };
  int32_t bt[LAW_ROWS * NB];
  float bv[LAW_ROWS * NB];
  for (int b = 0; b < LAW_ROWS; b++) {
    const int32_t t[NB] = {5003, 5000, 5007, 5000 + LAW_V + 3, 5007, -1};
    const float v[NB] = {2.5f, -INFINITY, 1.0f, 9.0f, 0.5f, 4.0f};
    memcpy(bt + b * NB, t, sizeof t);
    memcpy(bv + b * NB, v, sizeof v);
  }
  fs_options kb = filt(0.0f, 8, 0.9f);
  kb.logit_bias_tokens = bt, kb.logit_bias_values = bv, kb.logit_bias_count = NB;
  law_case(FS_DTYPE_BF16, 1.0f, &kb, 1.5, 0x6c617741ull, "top_k=8 top_p=0.9 with a bias");
}

/* ---- 5. bad input ------------------------------------------------------------------- */

static void test_bad_input(void) {
  unsigned long long st = 0x626164ull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 16, 100, 0, 0, 32, 0.5, &st);
  const fs_sampling s = {1.0f, NULL, 1, 1u, NULL, 0u, NULL};
  static const struct { float min_p; int32_t top_k; float top_p; const char *name; } bad[] = {
      {-0.1f, 0, 0.0f, "options->min_p"}, {1.5f, 0, 0.0f, "options->min_p"},
      {NAN, 0, 0.0f, "options->min_p"},   {0.0f, -1, 0.0f, "options->top_k"},
      {0.0f, 0, 1.5f, "options->top_p"},  {0.0f, 0, -0.5f, "options->top_p"},
      {0.0f, 0, NAN, "options->top_p"}};
  int32_t tok[2];
  for (int i = 0; i < 7; i++) {
    fs_options o = filt(bad[i].min_p, bad[i].top_k, bad[i].top_p);
    char what[64];
    snprintf(what, sizeof what, "min_p=%g top_k=%d top_p=%g", (double)bad[i].min_p,
             (int)bad[i].top_k, (double)bad[i].top_p);
    ref_expect_bad(&pr.p, &s, &o, bad[i].name, what);
    if (i == 2) printf("min_p=NaN -> \"%s\"\n", fs_last_error(NULL));
    fs_ref_result r;
    const int rc = fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, 0, 0, &r);
    CHECK_MSG(rc == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), bad[i].name),
              "fs_reference_row_ex, %s: status %d, message '%s'", what, rc, fs_last_error(NULL));
    /* the 0.3.3 struct ends before the filters: not read */
    o.size = offsetof(fs_options, min_p);
    CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK,
              "0.3.3 struct, %s: %s", what, fs_last_error(NULL));
  }
  /* misaligned per-row arrays */
  static float fa[8];
  static int32_t ia[8];
  const float *mfa = (const float *)(const void *)((const char *)fa + 2);
  const int32_t *mia = (const int32_t *)(const void *)((const char *)ia + 1);
  fs_options o = filt(0.0f, 0, 0.0f);
  o.min_ps = mfa;
  ref_expect_bad(&pr.p, &s, &o, "options->min_ps", NULL);
  o.min_ps = NULL, o.top_ks = mia;
  ref_expect_bad(&pr.p, &s, &o, "options->top_ks", NULL);
  o.top_ks = NULL, o.top_ps = mfa;
  ref_expect_bad(&pr.p, &s, &o, "options->top_ps", NULL);
  printf("misaligned top_ps -> \"%s\"\n", fs_last_error(NULL));
  /* filters with a logit bias (since 0.3.6: accepted), and under FS_NOISE_GROUP16 */
  const int32_t bt[2] = {40, 41};
  const float bv[2] = {1.0f, 2.0f};
  o = filt(0.0f, 3, 0.0f);
  o.logit_bias_tokens = bt, o.logit_bias_values = bv, o.logit_bias_count = 1;
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK,
            "top_k with a bias: %s", fs_last_error(NULL));
  fs_ref_result r;
  CHECK_MSG(fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, 0, 0, &r) == FS_OK,
            "top_k with a bias, row_ex: %s", fs_last_error(NULL));
  const float mps[2] = {0.0f, 0.0f};
  o = filt(0.0f, 0, 0.0f);
  o.min_ps = mps; /* an array is a filter, whatever it holds */
  int rc = fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, tok, NULL, NULL);
  CHECK_MSG(rc == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), "min_p") &&
                fs_test_has(fs_last_error(NULL), "FS_NOISE_TOKEN"),
            "min_ps under FS_NOISE_GROUP16: status %d, \"%s\"", rc, fs_last_error(NULL));
  printf("min_ps under FS_NOISE_GROUP16 -> \"%s\"\n", fs_last_error(NULL));
  rc = fs_reference_row_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, 0, 0, &r);
  CHECK(rc == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), "FS_NOISE_TOKEN"));
  o = filt(0.0f, 0, 1.0f); /* top_p 1: no filter */
  CHECK(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, tok, NULL, NULL) == FS_OK);
  /* the 0.3.3 struct: garbage in the filter fields is never read */
  o = filt(NAN, -7, -3.0f);
  o.min_ps = mfa, o.top_ks = mia, o.top_ps = mfa;
  o.size = offsetof(fs_options, min_p);
  int32_t t33[2], tn[2];
  uint64_t k33[2], kn[2];
  CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_GROUP16, &o, t33, NULL, k33) == FS_OK,
            "0.3.3 struct with garbage filters: %s", fs_last_error(NULL));
  REQUIRE(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tn, NULL, kn) == FS_OK);
  CHECK(!memcmp(t33, tn, sizeof tn) && !memcmp(k33, kn, sizeof kn));
  ref_prob_free(&pr);
}

int main(void) {
  test_bad_input();
  test_oracle();
  test_keep_all();
  test_ties();
  test_infinities();
  test_no_candidates();
  test_temperature_inf_and_min_p();
  test_blocks();
  test_law();
  return fs_test_done("test_reference_filter");
}
