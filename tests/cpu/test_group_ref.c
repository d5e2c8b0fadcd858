// fs-test-timeout: 120
/*
** test_group_ref.c: the CPU reference's FS_NOISE_GROUP16 draw
** (fs_reference_sample_noise, fs_reference_row_noise) against an oracle
** written here from flashsampling.h's definition, and against the law it
** must sample: softmax(z / T).
**
**  - random small problems (bf16 and fp16, vocab_offset 0 or a multiple of
**    16, partial last groups, padded strides with NaN in the padding, greedy
**    and sampled rows mixed, scalar and per-row seeds): tokens, logits and
**    keys equal the oracle's (the key's score within 1 fp32 ulp of the
**    oracle's double group score), fs_reference_row_noise gives the same
**    winner, the second-best group's pick and a pick_margin consistent with
**    the oracle's; FS_NOISE_TOKEN through the new entry point is
**    fs_reference_sample bit for bit;
**  - greedy rows (T = 0, -1, NaN) are the FS_NOISE_TOKEN draw bit for bit;
**  - masking: a logit of -inf (a -inf in W, H > 0) or NaN is never drawn;
**    +inf logits are always drawn: the first +inf token of the first group
**    holding one, with score +inf;
**  - shards cut at multiples of 16: the max key over shards is the
**    unsharded key (token, score and logit);
**  - bad input: vocab_offset % 16 != 0 and noise values 2, -1;
**  - chi-square of 2 x 10^5 draws per case (V = 45 at vocab_offset 32 and
**    V = 50 at 0: partial last groups) at T = 0.5, 1, 2 against
**    softmax(z / T), which must also reject two wrong laws: softmax at
**    1.15 T, and the law of a sampler that weighs each group by exp(m / T)
**    alone (forgetting ln S) but picks inside it correctly.  Power: see
**    test_law().
** Runs in about 1-2 s on one core.
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

/* ---- the oracle: FS_NOISE_GROUP16 from its definition --------------------- */

typedef struct gdraw {
  int32_t token, second; /* global ids; second = -1 with one group */
  double z, score, score2;
  double margin_lo, margin_hi; /* the winner's pick margin, over i < n - 1
                                  (hi) and over all i < n (lo) */
} gdraw;

/* One group [lo, hi) (local indices) of row logits z: its score, pick and
** pick margins.  Returns the picked local index, or -1 for a group without
** mass (every logit -inf or NaN). */
static int oracle_group(const double *z, int lo, int hi, double T, double g,
                        double u, double *score, double *mlo, double *mhi) {
  double m = -INFINITY;
  for (int v = lo; v < hi; v++)
    if (!isnan(z[v]) && z[v] > m) m = z[v];
  *mlo = *mhi = INFINITY;
  if (m == INFINITY) {
    for (int v = lo; v < hi; v++)
      if (z[v] == INFINITY) {
        *score = INFINITY;
        return v;
      }
  }
  if (m == -INFINITY) {
    *score = -INFINITY;
    return -1;
  }
  double w[FS_GROUP_TOKENS], P[FS_GROUP_TOKENS], S = 0.0;
  for (int v = lo; v < hi; v++) {
    w[v - lo] = isnan(z[v]) || z[v] == -INFINITY ? 0.0 : exp((z[v] - m) / T);
    S += w[v - lo];
    P[v - lo] = S;
  }
  const double t = u * S;
  int pick = -1;
  for (int i = 0; i < hi - lo; i++) {
    const double d = fabs(P[i] - t) / S;
    if (d < *mlo) *mlo = d;
    if (i < hi - lo - 1 && d < *mhi) *mhi = d;
    if (pick < 0 && P[i] > t) pick = lo + i;
  }
  if (pick < 0) pick = hi - 1; /* u < 1: cannot happen */
  *score = m / T + log(S) + g;
  return pick;
}

/* The group draw (or, for a greedy row, the argmax) of (b, sample). */
static gdraw oracle_gdraw(const fs_problem *p, const fs_sampling *s,
                          const double *z, int b, int sample) {
  const float T = s->temperatures ? s->temperatures[b] : s->temperature;
  const int greedy = !(T > 0.0f);
  const uint64_t seed = s->seeds ? s->seeds[b] : s->seed;
  const uint64_t off = s->offsets ? s->offsets[b] : s->offset;
  const uint32_t tag = s->seeds ? 0u : (uint32_t)b + 1u;
  const long long voff = p->vocab_offset;
  gdraw d;
  memset(&d, 0, sizeof d);
  d.token = d.second = -1;
  d.score = d.score2 = -INFINITY;
  d.margin_lo = d.margin_hi = INFINITY;
  if (greedy) {
    int best = -1;
    for (int v = 0; v < p->vocab; v++)
      if (!isnan(z[v]) && (best < 0 || z[v] > z[best])) best = v;
    if (best < 0) best = 0;
    d.token = (int32_t)(voff + best);
    d.z = z[best];
    d.score = z[best];
    return d;
  }
  int best = -1;
  for (long long k = voff / 16; k * 16 < voff + p->vocab; k++) {
    const int lo = (int)(k * 16 > voff ? k * 16 - voff : 0);
    const int hi = (int)(k * 16 + 16 < voff + p->vocab ? k * 16 + 16 - voff : p->vocab);
    const fs_philox_out r = fs_noise_group(seed, off, (uint32_t)k, (uint32_t)sample, tag);
    double sc, mlo, mhi;
    const int pick = oracle_group(z, lo, hi, (double)T, (double)fs_gumbel(r.v[0]),
                                  (double)fs_group_uniform(r.v[1]), &sc, &mlo, &mhi);
    if (pick < 0) continue;
    if (best < 0 || sc > d.score) {
      if (best >= 0) {
        d.second = d.token;
        d.score2 = d.score;
      }
      best = pick;
      d.token = (int32_t)(voff + pick);
      d.z = z[pick];
      d.score = sc;
      d.margin_lo = mlo;
      d.margin_hi = mhi;
    } else if (d.second < 0 || sc > d.score2) {
      d.second = (int32_t)(voff + pick);
      d.score2 = sc;
    }
  }
  return d;
}

/* ---- outputs ---------------------------------------------------------------- */

/* The key's score equals the double score rounded to fp32, within 1 ulp (the
** reference may associate m / T + ln S + g differently). */
static int key_score_ok(uint64_t key, double score) {
  const float k = fs_key_score(key), want = (float)score;
  if (isinf(score)) return k == want;
  return fabsf(k - want) <= fmaxf(nextafterf(fabsf(want), INFINITY) - fabsf(want),
                                  1e-30f);
}

/* ---- 1. random problems against the oracle ----------------------------------- */

static long g_draws_checked;

static void check_against_oracle(const fs_problem *p, const fs_sampling *s,
                                 const char *what) {
  const int B = p->batch, S = s->num_samples, V = p->vocab;
  const size_t n = (size_t)B * S;
  ref_outs o = ref_outs_new(n), t = ref_outs_new(n), legacy = ref_outs_new(n);
  double *z = ref_xalloc(sizeof(double) * V);
  int st = fs_reference_sample_noise(p, s, FS_NOISE_GROUP16, o.tokens, o.logits, o.keys);
  CHECK_MSG(st == FS_OK, "%s: %s", what, fs_last_error(NULL));
  if (st != FS_OK) goto done;
  /* FS_NOISE_TOKEN through the new entry point is the old draw. */
  REQUIRE(fs_reference_sample_noise(p, s, FS_NOISE_TOKEN, t.tokens, t.logits, t.keys) == FS_OK);
  REQUIRE(fs_reference_sample(p, s, legacy.tokens, legacy.logits, legacy.keys) == FS_OK);
  CHECK_MSG(!memcmp(t.tokens, legacy.tokens, n * 4) && !memcmp(t.logits, legacy.logits, n * 4) &&
                !memcmp(t.keys, legacy.keys, n * 8),
            "%s: FS_NOISE_TOKEN differs from fs_reference_sample", what);
  int bad = 0, rows_checked = 0;
  for (int b = 0; b < B; b++) {
    ref_oracle_logits(p, b, z);
    const float T = s->temperatures ? s->temperatures[b] : s->temperature;
    const int greedy = !(T > 0.0f);
    for (int smp = 0; smp < S; smp++) {
      const size_t i = (size_t)b * S + smp;
      const gdraw d = oracle_gdraw(p, s, z, b, smp);
      g_draws_checked++;
      const int ok = o.tokens[i] == d.token && ref_float_bits_equal(o.logits[i], (float)d.z) &&
                     fs_key_token(o.keys[i]) == (uint32_t)d.token &&
                     key_score_ok(o.keys[i], d.score);
      if (!ok && bad++ < 5)
        fprintf(stderr, "%s: b=%d s=%d%s: token %d want %d, logit %.9g want %.9g, key "
                "%016llx (score %.9g) want score %.9g (margin %.3g)\n", what, b, smp,
                greedy ? " (greedy)" : "", (int)o.tokens[i], (int)d.token,
                (double)o.logits[i], d.z, (unsigned long long)o.keys[i],
                (double)fs_key_score(o.keys[i]), d.score, d.margin_lo);
      /* Greedy rows: the FS_NOISE_TOKEN draw, bit for bit. */
      if (greedy)
        CHECK_MSG(o.tokens[i] == t.tokens[i] && o.keys[i] == t.keys[i] &&
                      ref_float_bits_equal(o.logits[i], t.logits[i]),
                  "%s: greedy row %d sample %d: group mode %d %016llx, token mode %d "
                  "%016llx", what, b, smp, (int)o.tokens[i], (unsigned long long)o.keys[i],
                  (int)t.tokens[i], (unsigned long long)t.keys[i]);
      if (!greedy && rows_checked < 12 && (b * 5 + smp * 3) % 4 == 0) {
        fs_ref_result r;
        rows_checked++;
        st = fs_reference_row_noise(p, s, FS_NOISE_GROUP16, b, smp, &r);
        CHECK_MSG(st == FS_OK, "%s: fs_reference_row_noise: %s", what, fs_last_error(NULL));
        if (st != FS_OK) continue;
        CHECK_MSG(r.token == o.tokens[i] && r.logit == d.z &&
                      fabs(r.score - d.score) <= 1e-12 * (1.0 + fabs(d.score)),
                  "%s: row b=%d s=%d: token %d score %.17g, want %d %.17g", what, b, smp,
                  (int)r.token, r.score, (int)d.token, d.score);
        CHECK_MSG(r.second_token == d.second &&
                      (d.second < 0 ||
                       fabs(r.second_score - d.score2) <= 1e-12 * (1.0 + fabs(d.score2))),
                  "%s: row b=%d s=%d: runner-up %d (%.17g), want the second group's pick %d "
                  "(%.17g)", what, b, smp, (int)r.second_token, r.second_score,
                  (int)d.second, d.score2);
        CHECK(r.second_token < 0 || r.second_score <= r.score);
        /* min over i < 15 of |P_i - uS| / S: between the oracle's minima over
        ** the whole group and over all but its last running sum. */
        CHECK_MSG(r.pick_margin >= 0.0 && r.pick_margin >= d.margin_lo - 1e-12 &&
                      r.pick_margin <= d.margin_hi + 1e-12,
                  "%s: row b=%d s=%d: pick_margin %.17g, oracle %.17g .. %.17g", what, b,
                  smp, r.pick_margin, d.margin_lo, d.margin_hi);
        fs_ref_result tr;
        REQUIRE(fs_reference_row_noise(p, s, FS_NOISE_TOKEN, b, smp, &tr) == FS_OK);
        CHECK_MSG(isinf(tr.pick_margin) && tr.pick_margin > 0,
                  "%s: FS_NOISE_TOKEN pick_margin %g, want +inf", what, tr.pick_margin);
      }
    }
  }
  CHECK_MSG(bad == 0, "%s: %d of %d outputs differ from the oracle", what, bad, B * S);
  /* Optional outputs are optional. */
  REQUIRE(fs_reference_sample_noise(p, s, FS_NOISE_GROUP16, t.tokens, NULL, NULL) == FS_OK);
  CHECK(memcmp(t.tokens, o.tokens, n * 4) == 0);
done:
  free(z);
  ref_outs_free(&o);
  ref_outs_free(&t);
  ref_outs_free(&legacy);
}

static void test_random_problems(void) {
  static const int Ds[] = {8, 16, 40, 64};
  static const int Vs[] = {1, 7, 16, 45, 50, 257, 1000};
  unsigned long long st = 0x67726f7570ull;
  for (int it = 0; it < 60; it++) {
    const int dtype = it & 1 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)(fs_test_rand(&st) % 6);
    const int D = Ds[fs_test_rand(&st) % 4], V = Vs[fs_test_rand(&st) % 7];
    const long long hs = it % 4 == 0 ? 0 : D + 8 * (long long)(fs_test_rand(&st) % 3);
    const long long ws = it % 4 == 1 ? 0 : D + 8 * (long long)(fs_test_rand(&st) % 3 + 1);
    const long long voff = it % 3 == 0 ? 32 : it % 3 == 1 ? ((FS_MAX_VOCAB - V) & ~15LL) : 0;
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, hs, ws, voff, 2.0 / sqrt(sqrt(D)), &st);
    float temps[6];
    uint64_t seeds[6], offs[6];
    const fs_sampling s = ref_random_sampling(it, B, 24, temps, seeds, offs, &st);
    char what[128];
    snprintf(what, sizeof what, "problem %d (%s B=%d D=%d V=%d off=%lld S=%d)", it,
             dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, D, V, voff, (int)s.num_samples);
    check_against_oracle(&pr.p, &s, what);
    ref_prob_free(&pr);
  }
}

/* ---- 2. greedy rows ---------------------------------------------------------------- */

static void test_greedy(void) {
  unsigned long long st = 0x6772656479ull;
  enum { B = 6, D = 32, V = 90, S = 3 };
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, B, D, V, 0, 0, 160, 1.0, &st);
  const float temps[B] = {0.0f, 1.0f, -1.0f, NAN, 0.5f, -0.0f};
  int32_t tg[B * S], tt[B * S];
  float lg[B * S], lt[B * S];
  uint64_t kg[B * S], kt[B * S];
  double z[V];
  for (int it = 0; it < 10; it++) {
    fs_sampling s = {0.0f, temps, S, 1000u + (uint64_t)it, NULL, (uint64_t)it * 77u, NULL};
    REQUIRE(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tg, lg, kg) == FS_OK);
    REQUIRE(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_TOKEN, tt, lt, kt) == FS_OK);
    for (int b = 0; b < B; b++) {
      if (temps[b] > 0.0f) continue;
      ref_oracle_logits(&pr.p, b, z);
      int arg = 0;
      for (int v = 1; v < V; v++)
        if (z[v] > z[arg]) arg = v;
      for (int t = 0; t < S; t++) {
        const int i = b * S + t;
        CHECK_MSG(tg[i] == 160 + arg && tg[i] == tt[i] && kg[i] == kt[i] &&
                      ref_float_bits_equal(lg[i], lt[i]),
                  "greedy row %d (T=%g) sample %d: group %d, token mode %d, argmax %d",
                  b, (double)temps[b], t, (int)tg[i], (int)tt[i], 160 + arg);
        CHECK(fs_key_token(kg[i]) == (uint32_t)tg[i] &&
              ref_float_bits_equal(fs_key_score(kg[i]), (float)z[arg]));
      }
    }
  }
  ref_prob_free(&pr);
}

/* ---- 3. masking: -inf, NaN and +inf logits -------------------------------------------- */

static void test_masking(void) {
  unsigned long long st = 0x6d61736bull;
  enum { B = 3, D = 16, V = 60, S = 2000 };
  ref_prob pr;
  /* H > 0, so one infinite entry of a W row makes that logit infinite. */
  ref_prob_make(&pr, FS_DTYPE_BF16, B, D, V, 0, 0, 0, 0.5, &st);
  ref_fill(pr.h, FS_DTYPE_BF16, B, D, D, 0.1, 1.0, &st);
  /* Rows 20 and 21 would otherwise dominate their group and the row. */
  for (int k = 0; k < D; k++) pr.w[20 * D + k] = pr.w[21 * D + k] = ref_encode(FS_DTYPE_BF16, 1.0);
  pr.w[20 * D + 3] = 0xFF80; /* -inf: z = -inf */
  pr.w[21 * D + 7] = 0x7FC0; /* NaN: z = NaN */
  pr.w[5 * D + 0] = 0xFF80;  /* -inf in group 0 */
  for (int k = 0; k < D; k++) pr.w[47 * D + k] = 0xFF80; /* a whole -inf row, last of group 2 */
  const float temps[B] = {1.0f, 2.0f, 0.3f};
  fs_sampling s = {0.0f, temps, S, 4242u, NULL, 9u, NULL};
  int32_t *tok = ref_xalloc(sizeof(int32_t) * B * S);
  float *lg = ref_xalloc(sizeof(float) * B * S);
  uint64_t *key = ref_xalloc(sizeof(uint64_t) * B * S);
  REQUIRE(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tok, lg, key) == FS_OK);
  double z[V];
  ref_oracle_logits(&pr.p, 0, z);
  CHECK(z[20] == -INFINITY && isnan(z[21]) && z[5] == -INFINITY && z[47] == -INFINITY);
  int hits = 0, drawn16_31 = 0;
  for (int i = 0; i < B * S; i++) {
    hits += tok[i] == 20 || tok[i] == 21 || tok[i] == 5 || tok[i] == 47;
    drawn16_31 += tok[i] >= 16 && tok[i] < 32;
    CHECK(isfinite(fs_key_score(key[i])) && fs_key_token(key[i]) == (uint32_t)tok[i]);
  }
  CHECK_MSG(hits == 0, "-inf or NaN logits drawn %d times of %d", hits, B * S);
  CHECK_MSG(drawn16_31 > 100, "group 1 (with the -inf and NaN logits) drawn only %d times",
            drawn16_31); /* the rest of the group keeps its mass */

  /* +inf: rows 37 and 39 (group 2) and 50 (group 3): always 37, score +inf,
  ** sampled or greedy. */
  for (int k = 0; k < D; k++) pr.w[47 * D + k] = ref_encode(FS_DTYPE_BF16, 0.25);
  pr.w[37 * D + 2] = pr.w[39 * D + 0] = pr.w[50 * D + 5] = 0x7F80;
  const float temps2[B] = {1.0f, 0.0f, 0.05f};
  s.temperatures = temps2;
  REQUIRE(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tok, lg, key) == FS_OK);
  int bad = 0;
  for (int i = 0; i < B * S; i++)
    bad += tok[i] != 37 || key[i] != fs_pack_key(INFINITY, 37u) || lg[i] != INFINITY;
  CHECK_MSG(bad == 0, "+inf logits: %d of %d draws are not token 37 with key (+inf, 37) "
            "(first: token %d key %016llx)", bad, B * S, (int)tok[0],
            (unsigned long long)key[0]);
  fs_ref_result r;
  REQUIRE(fs_reference_row_noise(&pr.p, &s, FS_NOISE_GROUP16, 0, 0, &r) == FS_OK);
  CHECK(r.token == 37 && r.score == INFINITY && r.logit == INFINITY);
  /* Only group 3's +inf left: token 50. */
  pr.w[37 * D + 2] = pr.w[39 * D + 0] = ref_encode(FS_DTYPE_BF16, 0.25);
  REQUIRE(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tok, NULL, key) == FS_OK);
  bad = 0;
  for (int i = 0; i < B * S; i++) bad += tok[i] != 50 || key[i] != fs_pack_key(INFINITY, 50u);
  CHECK_MSG(bad == 0, "+inf logit 50: %d of %d draws differ", bad, B * S);
  free(tok);
  free(lg);
  free(key);
  ref_prob_free(&pr);
}

/* ---- 4. shards cut at multiples of 16 ------------------------------------------------- */

static void test_sharding(void) {
  unsigned long long st = 0x7368617264ull;
  enum { B = 5, D = 48, V = 203, S = 3 };
  static const int cuts[2][4] = {{0, 96, 203, -1}, {0, 32, 144, 203}};
  for (int it = 0; it < 4; it++) {
    const int dtype = it & 1 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const long long base = it * 4800LL, ws = D + 8 * it;
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, ws, base, 0.5, &st);
    const float temps[B] = {1.0f, 0.0f, 0.5f, 2.0f, 1.0f};
    uint64_t seeds[B], offs[B];
    for (int b = 0; b < B; b++) {
      seeds[b] = fs_test_rand(&st);
      offs[b] = fs_test_rand(&st);
    }
    fs_sampling s = {1.0f, temps, S, 31337u, it >= 2 ? seeds : NULL, 5u,
                     it >= 2 ? offs : NULL};
    int32_t tok[B * S], stok[B * S];
    float lg[B * S], slg[B * S], best_lg[B * S];
    uint64_t key[B * S], skey[B * S], best[B * S];
    REQUIRE(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tok, lg, key) == FS_OK);
    const int *cut = cuts[it & 1];
    for (int i = 0; i < B * S; i++) best[i] = 0;
    for (int sh = 0; sh < 3 && cut[sh + 1] > 0; sh++) {
      fs_problem q = pr.p;
      q.vocab = cut[sh + 1] - cut[sh];
      q.vocab_offset = base + cut[sh];
      q.weight = pr.w + (long long)cut[sh] * ws;
      const int rc = fs_reference_sample_noise(&q, &s, FS_NOISE_GROUP16, stok, slg, skey);
      CHECK_MSG(rc == FS_OK, "shard at %lld: %s", (long long)q.vocab_offset, fs_last_error(NULL));
      if (rc != FS_OK) continue;
      for (int i = 0; i < B * S; i++) {
        CHECK(fs_key_token(skey[i]) == (uint32_t)stok[i]);
        CHECK(stok[i] >= q.vocab_offset && stok[i] < q.vocab_offset + q.vocab);
        if (skey[i] > best[i]) {
          best[i] = skey[i];
          best_lg[i] = slg[i];
        }
      }
    }
    for (int i = 0; i < B * S; i++)
      CHECK_MSG(best[i] == key[i] && fs_key_token(best[i]) == (uint32_t)tok[i] &&
                    ref_float_bits_equal(best_lg[i], lg[i]),
                "shards %d row %d sample %d: max key %016llx (token %u), unsharded "
                "%016llx (token %d)", it, i / S, i % S, (unsigned long long)best[i],
                (unsigned)fs_key_token(best[i]), (unsigned long long)key[i], (int)tok[i]);
    ref_prob_free(&pr);
  }
}

/* ---- 5. bad input ------------------------------------------------------------------------ */

static void test_bad_input(void) {
  unsigned long long st = 0x626164ull;
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, 2, 16, 40, 0, 0, 8, 0.5, &st);
  fs_sampling s = {1.0f, NULL, 1, 1u, NULL, 0u, NULL};
  int32_t tok[2];
  fs_ref_result r;
  CHECK(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tok, NULL, NULL) ==
            FS_INVALID_ARGUMENT &&
        strstr(fs_last_error(NULL), "vocab_offset"));
  printf("vocab_offset=8: \"%s\"\n", fs_last_error(NULL));
  CHECK(fs_reference_row_noise(&pr.p, &s, FS_NOISE_GROUP16, 0, 0, &r) == FS_INVALID_ARGUMENT &&
        strstr(fs_last_error(NULL), "vocab_offset"));
  /* The token mode has no such rule. */
  CHECK(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_TOKEN, tok, NULL, NULL) == FS_OK);
  pr.p.vocab_offset = 16 * 1000 + 4;
  CHECK(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tok, NULL, NULL) ==
            FS_INVALID_ARGUMENT &&
        strstr(fs_last_error(NULL), "vocab_offset"));
  pr.p.vocab_offset = 16;
  CHECK(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tok, NULL, NULL) == FS_OK);
  static const int bad_noise[] = {2, -1, 1000};
  for (int i = 0; i < 3; i++) {
    CHECK_MSG(fs_reference_sample_noise(&pr.p, &s, bad_noise[i], tok, NULL, NULL) ==
                      FS_INVALID_ARGUMENT &&
                  strstr(fs_last_error(NULL), "noise"),
              "noise=%d: \"%s\"", bad_noise[i], fs_last_error(NULL));
    CHECK_MSG(fs_reference_row_noise(&pr.p, &s, bad_noise[i], 0, 0, &r) == FS_INVALID_ARGUMENT &&
                  strstr(fs_last_error(NULL), "noise"),
              "row, noise=%d: \"%s\"", bad_noise[i], fs_last_error(NULL));
  }
  printf("noise=1000: \"%s\"\n", fs_last_error(NULL));
  ref_prob_free(&pr);
}

/* ---- 6. the law: chi-square ------------------------------------------------------------- */

#define LAW_D 32
#define LAW_ROWS 8
#define LAW_S 50000 /* 8 rows x 50,000 samples = 4e5 draws per case */

/* The relative error of the most likely token's probability (mass moved
** from or to all others in proportion) that the test detects with
** probability 0.99 at p < 1e-3: lambda = N eps^2 p / (1 - p). */
static double detectable_eps(int dof, double N, double p) {
  double lo = 0.0, hi = 1e6;
  for (int i = 0; i < 100; i++) {
    const double mid = 0.5 * (lo + hi);
    if (fs_stats_power(dof, mid, 1e-3) >= 0.99) hi = mid;
    else lo = mid;
  }
  return sqrt(hi * (1.0 - p) / (N * p));
}

/* Power (printed per case; measured with the reference): over 4e5 draws
** and 44-49 degrees of freedom, softmax at 1.15 T gives lambda = 1400 to
** 20000 and the max-only law 5600 to 62000, against a 1e-6 critical value
** near 100: both rejected with power 1 - O(1e-100) (p printed as 0 or
** ~1e-270), and CHECKed > 0.999999 by fs_stats_power.  More finely, the
** test detects with probability 0.99 (at p < 1e-3) a relative error of
** 1.3-2.1% in the top token's probability at T = 0.5, 3-4% at T = 1 and
** 5-6% at T = 2 (mass moved from or to all other tokens in proportion). */
static void test_law(void) {
  static const float Ts[] = {0.5f, 1.0f, 2.0f};
  static const struct { int V; long long voff; int dtype; } shapes[2] = {
      {45, 32, FS_DTYPE_BF16}, {50, 0, FS_DTYPE_FP16}};
  int32_t *tok = ref_xalloc(sizeof(int32_t) * LAW_ROWS * LAW_S);
  for (int sh = 0; sh < 2; sh++) {
    const int V = shapes[sh].V;
    const long long voff = shapes[sh].voff;
    unsigned long long st = 0x6c617731ull + (unsigned long long)sh;
    ref_prob pr;
    /* entries uniform in (-0.7, 0.7): logits of sd ~0.9 */
    ref_prob_make(&pr, shapes[sh].dtype, LAW_ROWS, LAW_D, V, 0, 0, voff, 0.7, &st);
    for (int b = 1; b < LAW_ROWS; b++)
      memcpy(pr.h + b * LAW_D, pr.h, sizeof(uint16_t) * LAW_D);
    double z[64], p[64], q[64], q2[64];
    ref_oracle_logits(&pr.p, 0, z);
    /* The rows share H and the seed; their offsets make them independent. */
    uint64_t seeds[LAW_ROWS], offs[LAW_ROWS];
    for (int b = 0; b < LAW_ROWS; b++) {
      seeds[b] = 0x5eed0000abcdull + (uint64_t)sh;
      offs[b] = 1000u + (uint64_t)b;
    }
    for (int i = 0; i < 3; i++) {
      const double T = Ts[i];
      fs_sampling s = {Ts[i], NULL, LAW_S, 0u, seeds, 0u, offs};
      REQUIRE(fs_reference_sample_noise(&pr.p, &s, FS_NOISE_GROUP16, tok, NULL, NULL) == FS_OK);
      int64_t counts[64] = {0};
      for (int j = 0; j < LAW_ROWS * LAW_S; j++) {
        const long long v = tok[j] - voff;
        REQUIRE(v >= 0 && v < V);
        counts[v]++;
      }
      const double N = (double)LAW_ROWS * LAW_S;
      fs_stats_softmax(z, V, T, p);
      fs_stats_softmax(z, V, 1.15 * T, q);
      fs_stats_max_only_law(z, V, voff, T, q2);
      const fs_chi2 good = fs_stats_chi2_gof(counts, p, V);
      const fs_chi2 bad = fs_stats_chi2_gof(counts, q, V);
      const fs_chi2 bad2 = fs_stats_chi2_gof(counts, q2, V);
      const double lam = fs_stats_noncentrality(p, q, V, N);
      const double lam2 = fs_stats_noncentrality(p, q2, V, N);
      const double pow1 = fs_stats_power(bad.dof, lam, 1e-6);
      const double pow2 = fs_stats_power(bad2.dof, lam2, 1e-6);
      double pmax = 0.0;
      for (int v = 0; v < V; v++) pmax = p[v] > pmax ? p[v] : pmax;
      printf("V=%d off=%lld T=%.1f: chi2=%.1f dof=%d p=%.3g (pooled %d, top token %.3f); "
             "T*1.15: p=%.3g lambda=%.0f power=%.9f; max-only groups: p=%.3g lambda=%.0f "
             "power=%.9f; detects a %.1f%% error of the top token w.p. 0.99\n", V, voff, T,
             good.stat, good.dof, good.p, good.pooled, pmax, bad.p, lam, pow1, bad2.p, lam2,
             pow2, 100.0 * detectable_eps(good.dof, N, pmax));
      CHECK(good.total == LAW_ROWS * LAW_S && good.dof >= 25 && good.impossible == 0);
      CHECK_MSG(good.p > 1e-3, "V=%d T=%g: chi-square rejects softmax(z/T): p=%g", V, T, good.p);
      CHECK_MSG(bad.p < 1e-6, "V=%d T=%g: fails to reject T*1.15: p=%g", V, T, bad.p);
      CHECK_MSG(bad2.p < 1e-6, "V=%d T=%g: fails to reject the max-only law: p=%g", V, T, bad2.p);
      CHECK(pow1 > 0.999999 && pow2 > 0.999999);
    }
    ref_prob_free(&pr);
  }
  free(tok);
}

int main(void) {
  test_bad_input();
  test_random_problems();
  test_greedy();
  test_masking();
  test_sharding();
  test_law();
  printf("%ld draws checked against the oracle\n", g_draws_checked);
  return fs_test_done("test_group_ref");
}
