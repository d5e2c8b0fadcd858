// fs-test-timeout: 120
/*
** test_reference_softcap.c: the CPU reference's logit soft-capping
** (fs_options.logit_softcap of fs_reference_sample_ex, since 0.3.2), against
** an oracle written here from flashsampling.h's definition: every logit z of
** the call becomes ref_cap(z) = c tanh(z / c), in double, before the token mask,
** the temperature, the noise, greedy rows' argmax, the logprobs' log-sum-exp
** and the returned logits.
**
**  1. Random problems (bf16 and fp16; B 1..6, D 8..64, V 1..258 with V not a
**     multiple of 4 or 8, vocab_offset 0, 37, 4093 and 160; c = 0.5, 1, 2, 3
**     and 30 with logits of sd 2c..4c, so that most |z| exceed c; random
**     per-row sampling: greedy rows (T = 0, -1, NaN) and T = 0.25, 1, 3 mixed,
**     up to 8 samples; a random token mask on a third of them with a row of one
**     allowed token and a row of none; logprobs always on):
**      - FS_NOISE_TOKEN: tokens, logits and keys equal the oracle's bit for bit
**        (argmax over tokens of ref_cap(z) / T + the Philox Gumbel noise; greedy
**        rows the argmax of ref_cap(z), ties to the smaller id, so the logits
**        written are (float)ref_cap(z));
**      - FS_NOISE_GROUP16 (vocab_offset 160): greedy rows as above; sampled
**        rows draw an allowed token with logit (float)ref_cap(z) bit for bit;
**      - every drawn logit of an allowed token has |logit| <= c; masked tokens
**        are never drawn; a row with no allowed token gives its first id with
**        logit -inf and logprob -inf;
**      - logprobs equal ref_cap(z_tok) - logsumexp(ref_cap(z)) over all V tokens (no
**        mask, no temperature) within 1e-6 + 1e-7 |want| (half an fp32 ulp of
**        values up to ~66 is below that); fs_reference_row_ex gives the same
**        winner, its double logit ref_cap(z) exactly and the double lse;
**      - softcap = 0 is the oracle without a cap (bit for bit), and equals,
**        bit for bit (tokens, logits, keys, logprobs): softcap = -0.0; a
**        0.3.0-sized struct (size = offsetof(fs_options, logit_softcap))
**        whose logit_softcap holds garbage (NaN, -5, -inf, 1e-31: never read);
**        a 0.2-sized one (garbage too; its logprobs pointer, past the size,
**        never written); options == NULL and fs_reference_sample_noise (no
**        mask).
**     Then the extreme caps c = FS_MIN_SOFTCAP (every logit becomes +-c:
**     greedy rows draw the first positive logit, a tie of many) and
**     c = FS_MAX_SOFTCAP (the identity up to rounding: the uncapped tokens).
**  2. The law: chi-square of 2 x 10^5 draws (4 rows of one H, 50,000 samples
**     each, independent through the rows' noise tags) of V = 37, 29 and 40
**     tokens against softmax(ref_cap(z) / T) computed in double from the same
**     bf16/fp16 inputs (p > 1e-3), for FS_NOISE_TOKEN at T = 1 (c = 1.5,
**     logits of sd ~4) and T = 1.3 (c = 3), and FS_NOISE_GROUP16 at T = 0.7
**     (c = 2).  The same counts must reject (p < 1e-6) the uncapped law
**     softmax(z / T), a cap of 1.1 c and, where T != 1, the law of a sampler
**     that divides by T before capping, softmax(ref_cap(z / T)).  Power: see
**     law_case().
**  3. Bad input: logit_softcap -1, NaN, +inf, -inf, 1e-31, the float below
**     FS_MIN_SOFTCAP, -FS_MIN_SOFTCAP, -FLT_MAX, the least subnormal, the
**     float above FS_MAX_SOFTCAP and FLT_MAX (the kernels' fast 1 / c would
**     be 0 past 2^126) are
**     FS_INVALID_ARGUMENT with a message naming options->logit_softcap (for
**     fs_reference_row_ex too), yet accepted (ignored) in 0.3.0- and
**     0.2-sized structs; 0, -0.0, FS_MIN_SOFTCAP, 30 and FS_MAX_SOFTCAP are
**     accepted;
**     sizes no version of fs_options has had (0, 1, and 4 or 8 before or
**     past each valid one) are rejected naming options->size.
** Runs in about half a second on one core.
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

/* ---- 1. random problems against the oracle -------------------------------------- */

static long g_draws, g_beyond, g_sampled, g_moved;
static double g_worst_lp;

/* Checks one call with logit_softcap = c (and the calls that must equal the
** uncapped one) against the oracle.  m (stride words a row) is the mask or
** NULL; stride_opt is what options->token_mask_stride says (0 or stride).
** `it` picks the garbage left in the softcap field of the older structs. */
static void check_problem(const fs_problem *p, const fs_sampling *s, int noise,
                          const uint32_t *m, long long stride, long long stride_opt, float c,
                          int it, const char *what) {
  static const float garbage[] = {NAN, -5.0f, -INFINITY, 1e-31f};
  const int B = p->batch, V = p->vocab, S = s->num_samples;
  const long long voff = p->vocab_offset;
  const size_t n = (size_t)B * S;
  ref_outs o = ref_outs_new(n), u = ref_outs_new(n), w = ref_outs_new(n);
  float *lp = ref_xalloc(sizeof(float) * n), *lpu = ref_xalloc(sizeof(float) * n);
  float *lpw = ref_xalloc(sizeof(float) * n);
  double *z = ref_xalloc(sizeof(double) * (size_t)V), *cz = ref_xalloc(sizeof(double) * (size_t)V);

  const fs_options opt = {.size = sizeof opt, .token_mask = m, .token_mask_stride = stride_opt,
                          .logprobs = lp, .logit_softcap = c};
  int rc = fs_reference_sample_ex(p, s, noise, &opt, o.tokens, o.logits, o.keys);
  CHECK_MSG(rc == FS_OK, "%s: %s", what, fs_last_error(NULL));
  const fs_options none = {.size = sizeof none, .token_mask = m, .token_mask_stride = stride_opt,
                           .logprobs = lpu};
  REQUIRE(fs_reference_sample_ex(p, s, noise, &none, u.tokens, u.logits, u.keys) == FS_OK);
  if (rc != FS_OK) goto done;

  /* What must be the uncapped draw, bit for bit.  0.2's struct comes first:
  ** lpw holds 7s that it must leave alone. */
  const float junk = garbage[it % 4];
  const fs_options same[4] = {
      {.size = offsetof(fs_options, logprobs), .token_mask = m, .token_mask_stride = stride_opt,
       .logprobs = lpw, .logit_softcap = junk},
      {.size = offsetof(fs_options, logit_softcap), .token_mask = m,
       .token_mask_stride = stride_opt, .logprobs = lpw, .logit_softcap = junk},
      {.size = sizeof(fs_options), .token_mask = m, .token_mask_stride = stride_opt,
       .logprobs = lpw, .logit_softcap = -0.0f},
      {.size = sizeof(fs_options)}, /* only without a mask: NULL options */
  };
  for (size_t i = 0; i < n; i++) lpw[i] = 7.0f;
  for (int k = 0; k < 5; k++) {
    if (k >= 3 && m) break;
    if (k == 4)
      rc = fs_reference_sample_noise(p, s, noise, w.tokens, w.logits, w.keys);
    else
      rc = fs_reference_sample_ex(p, s, noise, k == 3 ? NULL : &same[k], w.tokens, w.logits,
                                  w.keys);
    CHECK_MSG(rc == FS_OK, "%s: uncapped call %d: %s", what, k, fs_last_error(NULL));
    if (rc != FS_OK) continue;
    CHECK_MSG(!memcmp(w.tokens, u.tokens, n * 4) && !memcmp(w.logits, u.logits, n * 4) &&
                  !memcmp(w.keys, u.keys, n * 8),
              "%s: call %d (%s) differs from logit_softcap = 0", what, k,
              k == 0 ? "0.2 size" : k == 1 ? "0.3.0 size, garbage softcap"
                                   : k == 2 ? "softcap -0.0" : "no options");
    if (k == 0) {
      int written = 0;
      for (size_t i = 0; i < n; i++) written += lpw[i] != 7.0f;
      CHECK_MSG(written == 0, "%s: a 0.2 struct's logprobs written (%d)", what, written);
    }
    if (k == 1 || k == 2)
      CHECK_MSG(!memcmp(lpw, lpu, n * 4), "%s: call %d: logprobs differ from softcap = 0",
                what, k);
  }

  int bad = 0;
  for (int b = 0; b < B; b++) {
    ref_oracle_logits(p, b, z);
    for (int v = 0; v < V; v++) cz[v] = ref_cap(z[v], c);
    const double lse = ref_lse(cz, V);
    const float T = s->temperatures ? s->temperatures[b] : s->temperature;
    const int greedy = !(T > 0.0f);
    int none_allowed = 1;
    for (int v = 0; v < V && none_allowed; v++) none_allowed = !ref_allowed(m, stride, b, voff + v);
    for (int t = 0; t < S; t++) {
      const size_t i = (size_t)b * S + t;
      const int32_t tok = o.tokens[i];
      g_draws++;
      if (noise == FS_NOISE_TOKEN || greedy) {
        const ref_odraw d = ref_oracle_draw(p, s, m, stride, cz, b, t);
        const int ok = tok == d.token && ref_float_bits_equal(o.logits[i], (float)d.z) &&
                       (noise != FS_NOISE_TOKEN ||
                        o.keys[i] == fs_pack_key((float)d.score, (uint32_t)d.token));
        if (!ok && bad++ < 5)
          fprintf(stderr, "%s: b=%d s=%d%s: token %d logit %.9g key %016llx, want %d %.9g "
                  "%016llx\n", what, b, t, greedy ? " (greedy)" : "", (int)tok,
                  (double)o.logits[i], (unsigned long long)o.keys[i], (int)d.token, d.z,
                  (unsigned long long)fs_pack_key((float)d.score, (uint32_t)d.token));
      }
      if (noise == FS_NOISE_TOKEN) { /* the oracle without a cap: the uncapped call */
        const ref_odraw d = ref_oracle_draw(p, s, m, stride, z, b, t);
        CHECK_MSG(u.tokens[i] == d.token && ref_float_bits_equal(u.logits[i], (float)d.z) &&
                      u.keys[i] == fs_pack_key((float)d.score, (uint32_t)d.token),
                  "%s: b=%d s=%d: softcap = 0 draws %d, the uncapped oracle %d", what, b, t,
                  (int)u.tokens[i], (int)d.token);
      }
      if (none_allowed) {
        CHECK_MSG(tok == voff && o.logits[i] == -INFINITY && lp[i] == -INFINITY,
                  "%s: b=%d (nothing allowed) s=%d: token %d logit %g logprob %g", what, b, t,
                  (int)tok, (double)o.logits[i], (double)lp[i]);
        continue;
      }
      CHECK_MSG(tok >= voff && tok < voff + V && ref_allowed(m, stride, b, tok),
                "%s: b=%d s=%d: token %d not allowed or out of range", what, b, t, (int)tok);
      if (!(tok >= voff && tok < voff + V)) continue;
      const int v = (int)(tok - voff);
      g_beyond += fabs(z[v]) > (double)c;
      if (!greedy) g_sampled++, g_moved += tok != u.tokens[i];
      CHECK_MSG(ref_float_bits_equal(o.logits[i], (float)cz[v]) &&
                    (c == 0.0f || fabsf(o.logits[i]) <= c),
                "%s: b=%d s=%d: token %d logit %.9g, want ref_cap(%.9g) = %.9g (c = %g)", what, b,
                t, (int)tok, (double)o.logits[i], z[v], cz[v], (double)c);
      const double want = cz[v] - lse, err = fabs((double)lp[i] - want);
      CHECK_MSG(err <= 1e-6 + 1e-7 * fabs(want),
                "%s: b=%d s=%d: logprob %.9g, want %.9g (uncapped %.9g)", what, b, t,
                (double)lp[i], want, z[v] - ref_lse(z, V));
      if (err > g_worst_lp) g_worst_lp = err;
    }
    /* fs_reference_row_ex: the same winner, its double logit and lse */
    fs_ref_result r;
    rc = fs_reference_row_ex(p, s, noise, &opt, b, S - 1, &r);
    CHECK_MSG(rc == FS_OK, "%s: fs_reference_row_ex: %s", what, fs_last_error(NULL));
    if (rc == FS_OK) {
      const double zw = none_allowed ? -INFINITY : cz[r.token - voff];
      CHECK_MSG(r.token == o.tokens[(size_t)b * S + S - 1] && r.logit == zw &&
                    fabs(r.lse - lse) <= 1e-12 * (1.0 + fabs(lse)),
                "%s: row %d: fs_reference_row_ex token %d logit %.17g lse %.17g, want %d "
                "%.17g %.17g", what, b, (int)r.token, r.logit, r.lse,
                (int)o.tokens[(size_t)b * S + S - 1], zw, lse);
    }
  }
  CHECK_MSG(bad == 0, "%s: %d of %zu draws differ from the oracle", what, bad, n);
done:
  free(z);
  free(cz);
  free(lp);
  free(lpu);
  free(lpw);
  ref_outs_free(&o);
  ref_outs_free(&u);
  ref_outs_free(&w);
}

static void test_oracle(void) {
  static const int Ds[] = {8, 16, 24, 40, 64};
  static const int Vs[] = {1, 5, 13, 31, 50, 101, 258};
  static const long long offs[] = {0, 37, 4093, 160}; /* 160: FS_NOISE_GROUP16 */
  static const float caps[] = {0.5f, 1.0f, 2.0f, 3.0f, 30.0f};
  unsigned long long st = 0x736f6674636170ull;
  for (int it = 0; it < 60; it++) {
    const int dtype = it % 2 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)(fs_test_rand(&st) % 6);
    const int D = Ds[fs_test_rand(&st) % 5], V = Vs[fs_test_rand(&st) % 7];
    const long long voff = offs[it % 4];
    const int noise = it % 4 == 3 ? FS_NOISE_GROUP16 : FS_NOISE_TOKEN;
    const float c = caps[it % 5];
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, 0, voff, ref_scale_for_sd((2 + it % 3) * (double)c, D),
                  &st);
    float temps[6];
    uint64_t seeds[6], offsets[6];
    const fs_sampling s = ref_random_sampling(it, B, 8, temps, seeds, offsets, &st);
    const long long stride = (voff + V + 31) / 32 + it % 2;
    uint32_t *m = it % 3 == 1 ? ref_make_mask(&pr.p, stride, 0.5, &st) : NULL;
    char what[160];
    snprintf(what, sizeof what, "problem %d (%s B=%d D=%d V=%d off=%lld S=%d c=%g%s%s)", it,
             dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, D, V, voff, (int)s.num_samples,
             (double)c, m ? " masked" : "", noise == FS_NOISE_GROUP16 ? " group16" : "");
    check_problem(&pr.p, &s, noise, m, stride, m && it % 2 ? stride : 0, c, it, what);
    free(m);
    ref_prob_free(&pr);
  }
  printf("oracle: %ld draws of 60 problems; %ld drawn tokens had |z| > c; the cap moved %ld "
         "of %ld sampled draws; worst logprob error %.2g\n", g_draws, g_beyond, g_moved,
         g_sampled, g_worst_lp);
  /* the cap is monotone: it moves no greedy argmax, but most sampled draws */
  CHECK_MSG(g_beyond > g_draws / 2 && g_moved > g_sampled / 3,
            "the cap mattered too little: %ld of %ld beyond c, %ld of %ld sampled moved",
            g_beyond, g_draws, g_moved, g_sampled);

  /* The extreme caps. */
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 6, 32, 77, 0, 0, 5, 1.0, &st);
  const float temps[6] = {0.0f, 1.0f, 0.25f, -1.0f, 3.0f, 0.0f};
  const fs_sampling s = {0.0f, temps, 3, 99u, NULL, 12u, NULL};
  check_problem(&pr.p, &s, FS_NOISE_TOKEN, NULL, 0, 0, FS_MIN_SOFTCAP, 0,
                "c = FS_MIN_SOFTCAP");
  int32_t tok[18], tu[18];
  float lg[18];
  const fs_options tiny = {.size = sizeof tiny, .logit_softcap = FS_MIN_SOFTCAP};
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &tiny, tok, lg, NULL) == FS_OK);
  double z[77];
  ref_oracle_logits(&pr.p, 0, z);
  int first_pos = 0;
  while (first_pos < 77 && !(z[first_pos] > 0.0)) first_pos++;
  CHECK_MSG(first_pos < 77 && tok[0] == 5 + first_pos && lg[0] == FS_MIN_SOFTCAP,
            "c = FS_MIN_SOFTCAP: greedy row 0 drew %d (logit %g), want the first positive "
            "logit's id %d with logit %g", (int)tok[0], (double)lg[0], 5 + first_pos,
            (double)FS_MIN_SOFTCAP);
  check_problem(&pr.p, &s, FS_NOISE_TOKEN, NULL, 0, 0, FS_MAX_SOFTCAP, 1, "c = FS_MAX_SOFTCAP");
  const fs_options huge = {.size = sizeof huge, .logit_softcap = FS_MAX_SOFTCAP};
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &huge, tok, NULL, NULL) == FS_OK);
  REQUIRE(fs_reference_sample(&pr.p, &s, tu, NULL, NULL) == FS_OK);
  CHECK_MSG(!memcmp(tok, tu, sizeof tok), "c = FS_MAX_SOFTCAP: not the uncapped tokens");
  ref_prob_free(&pr);
}

/* ---- 2. the law: chi-square ------------------------------------------------------- */

#define LAW_D 32
#define LAW_ROWS 4
#define LAW_S 50000 /* 4 rows x 50,000 samples = 2e5 draws per case */

/* Checks that the counts reject the wrong law q (the right one is p):
** p < 1e-6, and fs_stats_power() of its noncentrality > 0.999999; prints
** both. */
static void reject_law(const int64_t *counts, const double *p, const double *q, int V, double N,
                       const char *name, const char *what) {
  const fs_chi2 bad = fs_stats_chi2_gof(counts, q, V);
  const double lam = fs_stats_noncentrality(p, q, V, N);
  const double pw = fs_stats_power(bad.dof, lam, 1e-6);
  printf("; %s: p=%.3g lambda=%.3g power=%.9f", name, bad.p, lam, pw);
  CHECK_MSG(bad.p < 1e-6, "%s: fails to reject %s: p=%g", what, name, bad.p);
  CHECK_MSG(pw > 0.999999, "%s: power against %s only %.9f (lambda %g)", what, name, pw, lam);
}

/* Power (printed per case; measured with the reference): over 2e5 draws and
** 28-39 degrees of freedom (critical value at 1e-6: 70-85), the uncapped law
** gives lambda = 5e6 to 1e8 (its top token takes 0.3-0.6 of the mass, the
** capped law's 0.05-0.1) and capping after the temperature (softmax(ref_cap(z /
** T)), where T != 1) lambda = 1e4: p printed as 0, power 1 - O(1e-100); a
** cap of 1.1 c gives lambda = 670 to 1400 (p = 1e-142 to 1e-316), the
** statistic's mean some 12 to 18 sd above the critical value: power
** 1 - O(1e-30).  fs_stats_power() > 0.999999 is CHECKed for each. */
static void law_case(int dtype, int noise, int V, long long voff, float T, float c, double sd,
                     unsigned long long seed) {
  unsigned long long st = seed;
  ref_prob pr;
  ref_prob_make(&pr, dtype, LAW_ROWS, LAW_D, V, 0, 0, voff, ref_scale_for_sd(sd, LAW_D), &st);
  for (int b = 1; b < LAW_ROWS; b++) memcpy(pr.h + b * LAW_D, pr.h, sizeof(uint16_t) * LAW_D);
  double z[64], cz[64], p[64], q[64], w[64];
  REQUIRE(V <= 64);
  ref_oracle_logits(&pr.p, 0, z);
  for (int v = 0; v < V; v++) cz[v] = ref_cap(z[v], c);
  /* a scalar seed: the rows' tags make their noise independent */
  const fs_sampling s = {T, NULL, LAW_S, seed ^ 0x5eedull, NULL, 3u, NULL};
  const fs_options opt = {.size = sizeof opt, .logit_softcap = c};
  const size_t N = (size_t)LAW_ROWS * LAW_S;
  int32_t *tok = ref_xalloc(sizeof(int32_t) * N);
  float *lg = ref_xalloc(sizeof(float) * N);
  REQUIRE(fs_reference_sample_ex(&pr.p, &s, noise, &opt, tok, lg, NULL) == FS_OK);
  int64_t counts[64] = {0};
  int badlogit = 0;
  for (size_t j = 0; j < N; j++) {
    const long long v = tok[j] - voff;
    REQUIRE(v >= 0 && v < V);
    counts[v]++;
    badlogit += !ref_float_bits_equal(lg[j], (float)cz[v]) || !(fabsf(lg[j]) <= c);
  }
  char what[96];
  snprintf(what, sizeof what, "law V=%d off=%lld %s %s T=%.1f c=%.1f", V, voff,
           dtype == FS_DTYPE_BF16 ? "bf16" : "fp16",
           noise == FS_NOISE_TOKEN ? "token" : "group16", (double)T, (double)c);
  CHECK_MSG(badlogit == 0, "%s: %d draws' logits are not ref_cap(z)", what, badlogit);
  fs_stats_softmax(cz, V, (double)T, p);
  const fs_chi2 good = fs_stats_chi2_gof(counts, p, V);
  double pmax = 0.0, qmax = 0.0, zrms = 0.0;
  fs_stats_softmax(z, V, (double)T, q);
  for (int v = 0; v < V; v++) {
    pmax = p[v] > pmax ? p[v] : pmax;
    qmax = q[v] > qmax ? q[v] : qmax;
    zrms += z[v] * z[v] / V;
  }
  printf("%s (logit rms %.1f): chi2=%.1f dof=%d p=%.3g (top token %.3f, uncapped %.3f)", what,
         sqrt(zrms), good.stat, good.dof, good.p, pmax, qmax);
  CHECK(good.total == (int64_t)N && good.impossible == 0 && good.dof >= V / 2);
  CHECK_MSG(good.p > 1e-3, "%s: chi-square rejects softmax(ref_cap(z) / T): p=%g", what, good.p);
  reject_law(counts, p, q, V, (double)N, "uncapped", what);
  for (int v = 0; v < V; v++) w[v] = ref_cap(z[v], 1.1f * c);
  fs_stats_softmax(w, V, (double)T, q);
  reject_law(counts, p, q, V, (double)N, "cap 1.1c", what);
  if (T != 1.0f) { /* the wrong order: temperature, then cap */
    for (int v = 0; v < V; v++) w[v] = ref_cap(z[v] / (double)T, c);
    fs_stats_softmax(w, V, 1.0, q);
    reject_law(counts, p, q, V, (double)N, "ref_cap(z / T)", what);
  }
  printf("\n");
  free(tok);
  free(lg);
  ref_prob_free(&pr);
}

static void test_law(void) {
  law_case(FS_DTYPE_BF16, FS_NOISE_TOKEN, 37, 0, 1.0f, 1.5f, 4.0, 0x6c61773161ull);
  law_case(FS_DTYPE_FP16, FS_NOISE_GROUP16, 29, 160, 0.7f, 2.0f, 5.0, 0x6c61773162ull);
  law_case(FS_DTYPE_BF16, FS_NOISE_TOKEN, 40, 4093, 1.3f, 3.0f, 4.0, 0x6c61773163ull);
}

/* ---- 3. bad input -------------------------------------------------------------------- */

static void test_bad_input(void) {
  unsigned long long st = 0x62616463617073ull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 16, 100, 0, 0, 37, 0.5, &st);
  const fs_sampling s = {1.0f, NULL, 1, 1u, NULL, 0u, NULL};
  int32_t tok[2];
  float lp[2];
  const float rejected[] = {-1.0f, NAN, INFINITY, -INFINITY, 1e-31f,
                            nextafterf(FS_MIN_SOFTCAP, 0.0f), -FS_MIN_SOFTCAP, -FLT_MAX,
                            1e-45f /* the least subnormal */,
                            nextafterf(FS_MAX_SOFTCAP, INFINITY), FLT_MAX};
  const int nrej = (int)(sizeof rejected / sizeof rejected[0]);
  for (int i = 0; i < nrej; i++) {
    char what[64];
    snprintf(what, sizeof what, "logit_softcap=%g", (double)rejected[i]);
    fs_options o = {.size = sizeof o, .logprobs = lp, .logit_softcap = rejected[i]};
    ref_expect_bad(&pr.p, &s, &o, "options->logit_softcap", what);
    if (i == 1) printf("logit_softcap=NaN -> \"%s\"\n", fs_last_error(NULL));
    fs_ref_result r;
    const int rc = fs_reference_row_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, 0, 0, &r);
    CHECK_MSG(rc == FS_INVALID_ARGUMENT &&
                  fs_test_has(fs_last_error(NULL), "options->logit_softcap"),
              "fs_reference_row_ex, %s: status %d, message '%s'", what, rc,
              fs_last_error(NULL));
    /* the older structs end before the field: it is not read */
    o.size = offsetof(fs_options, logit_softcap);
    CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK,
              "0.3.0 struct, %s: %s", what, fs_last_error(NULL));
    o.size = offsetof(fs_options, logprobs);
    CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK,
              "0.2 struct, %s: %s", what, fs_last_error(NULL));
  }
  const float accepted[] = {0.0f, -0.0f, FS_MIN_SOFTCAP, 30.0f, FS_MAX_SOFTCAP};
  for (int i = 0; i < 5; i++) {
    const fs_options o = {.size = sizeof o, .logprobs = lp, .logit_softcap = accepted[i]};
    CHECK_MSG(fs_reference_sample_ex(&pr.p, &s, FS_NOISE_TOKEN, &o, tok, NULL, NULL) == FS_OK,
              "logit_softcap=%g refused: %s", (double)accepted[i], fs_last_error(NULL));
  }
  /* sizes no fs_options has had */
  const size_t valid[4] = {sizeof(fs_options), offsetof(fs_options, logit_softcap),
                           offsetof(fs_options, logprobs), offsetof(fs_options, logit_bias_tokens)};
  size_t sizes[2 + 4 * 4];
  int ns = 0;
  sizes[ns++] = 0;
  sizes[ns++] = 1;
  for (int k = 0; k < 4; k++) {
    sizes[ns++] = valid[k] + 4;
    sizes[ns++] = valid[k] + 8;
    sizes[ns++] = valid[k] - 4;
    sizes[ns++] = valid[k] - 8;
  }
  int tried = 0;
  for (int i = 0; i < ns; i++) {
    if (sizes[i] == valid[0] || sizes[i] == valid[1] || sizes[i] == valid[2] ||
        sizes[i] == valid[3] || sizes[i] == offsetof(fs_options, ranks)) /* 0.3.12's */
      continue;
    char what[64];
    snprintf(what, sizeof what, "options->size=%zu", sizes[i]);
    const fs_options o = {.size = sizes[i]};
    ref_expect_bad(&pr.p, &s, &o, "options->size", what);
    tried++;
  }
  const fs_options big = {.size = sizeof(fs_options) + 8};
  ref_expect_bad(&pr.p, &s, &big, "options->size", "sizeof + 8");
  printf("%d bad softcaps and %d bad sizes refused; size %zu -> \"%s\"\n", nrej, tried,
         big.size, fs_last_error(NULL));
  ref_prob_free(&pr);
}

int main(void) {
  test_bad_input();
  test_oracle();
  test_law();
  return fs_test_done("test_reference_softcap");
}
