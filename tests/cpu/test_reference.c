// fs-test-timeout: 120
/*
** test_reference.c: the CPU reference draw (fs_reference_sample and
** fs_reference_row) against a brute-force oracle written here from the
** definition in flashsampling.h and fs_rng.h, and against the law it must
** sample: softmax(z / T).
**
**  - random small problems (bf16 and fp16, vocab_offset != 0, strides > D
**    with NaN in the padding, greedy and sampled rows mixed through per-row
**    temperatures, scalar and per-row seeds): tokens, logits and keys equal
**    the oracle's bit for bit, and fs_reference_row's runner-up is right;
**  - per-row seeds make a row's draw independent of its slot and of B;
**    scalar seeds make identical rows draw differently;
**  - sharding W in three uneven pieces and taking the max key gives the
**    unsharded draw, key for key;
**  - chi-square on 2 x 10^5 draws for T in {0.5, 1, 2}, which must also
**    reject the law of a temperature 5% off;
**  - the chunked paths (many rows of large D, many samples).
** Runs in about 3 s on one core.
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

/* ---- the oracle -------------------------------------------------------------- */

typedef struct draw {
  int32_t token, second;    /* global ids; second = -1 when V == 1 */
  double z, score, score2;
} draw;

/* The draw of (b, sample) given the row's logits; sc is scratch [V]. */
static draw oracle_draw(const fs_problem *p, const fs_sampling *s,
                        const double *z, int b, int sample, double *sc) {
  const float T = s->temperatures ? s->temperatures[b] : s->temperature;
  const int greedy = T == 0.0f || T < 0.0f || isnan(T);
  const uint64_t seed = s->seeds ? s->seeds[b] : s->seed;
  const uint64_t off = s->offsets ? s->offsets[b] : s->offset;
  const uint32_t tag = s->seeds ? 0u : (uint32_t)b + 1u;
  int best = 0, second = -1, v;
  for (v = 0; v < p->vocab; v++) {
    const uint32_t token = (uint32_t)(p->vocab_offset + v);
    sc[v] = greedy ? z[v]
                   : z[v] / (double)T +
                         (double)fs_noise(seed, off, token, (uint32_t)sample, tag);
  }
  for (v = 1; v < p->vocab; v++)
    if (sc[v] > sc[best]) best = v;
  for (v = 0; v < p->vocab; v++)
    if (v != best && (second < 0 || sc[v] > sc[second])) second = v;
  draw d;
  d.token = (int32_t)(p->vocab_offset + best);
  d.second = second < 0 ? -1 : (int32_t)(p->vocab_offset + second);
  d.z = z[best];
  d.score = sc[best];
  d.score2 = second < 0 ? -INFINITY : sc[second];
  return d;
}

/* ---- 1. random problems against the oracle ------------------------------------ */

/* Runs the reference on (p, s) and compares every output with the oracle;
** checks fs_reference_row on up to `row_checks` (b, sample) pairs. */
static void check_against_oracle(const fs_problem *p, const fs_sampling *s,
                                 int row_checks, const char *what) {
  const int B = p->batch, S = s->num_samples, V = p->vocab;
  ref_outs o = ref_outs_new((size_t)B * S);
  double *z = ref_xalloc(sizeof(double) * V), *sc = ref_xalloc(sizeof(double) * V);
  int st = fs_reference_sample(p, s, o.tokens, o.logits, o.keys);
  CHECK_MSG(st == FS_OK, "%s: %s", what, fs_last_error(NULL));
  int bad = 0, checked = 0;
  for (int b = 0; b < B; b++) {
    ref_oracle_logits(p, b, z);
    for (int t = 0; t < S; t++) {
      const draw d = oracle_draw(p, s, z, b, t, sc);
      const size_t i = (size_t)b * S + t;
      const uint64_t key = fs_pack_key((float)d.score, (uint32_t)d.token);
      if (o.tokens[i] != d.token || !ref_float_bits_equal(o.logits[i], (float)d.z) ||
          o.keys[i] != key) {
        if (bad++ < 5)
          fprintf(stderr, "%s: b=%d s=%d token %d want %d, logit %.9g want "
                  "%.9g, key %016llx want %016llx\n", what, b, t,
                  (int)o.tokens[i], (int)d.token, (double)o.logits[i], d.z,
                  (unsigned long long)o.keys[i], (unsigned long long)key);
      }
      if (checked < row_checks && (b * 7 + t * 3) % 5 == 0) {
        fs_ref_result r;
        checked++;
        CHECK(fs_reference_row(p, s, b, t, &r) == FS_OK);
        CHECK_MSG(r.token == d.token && r.logit == d.z && r.score == d.score &&
                      r.second_token == d.second && r.second_score == d.score2,
                  "%s: row b=%d s=%d: (%d, %d) want (%d, %d)", what, b, t,
                  (int)r.token, (int)r.second_token, (int)d.token,
                  (int)d.second);
        CHECK(r.second_token < 0 || r.second_score <= r.score);
      }
    }
  }
  CHECK_MSG(bad == 0, "%s: %d of %d outputs differ from the oracle", what, bad,
            B * S);
  /* Optional outputs are optional. */
  int32_t *t2 = ref_xalloc(sizeof(int32_t) * (size_t)B * S);
  CHECK(fs_reference_sample(p, s, t2, NULL, NULL) == FS_OK);
  CHECK(memcmp(t2, o.tokens, sizeof(int32_t) * (size_t)B * S) == 0);
  free(t2);
  free(z);
  free(sc);
  ref_outs_free(&o);
}

static void test_random_problems(void) {
  static const int Ds[] = {8, 16, 40, 64, 136};
  static const int Vs[] = {1, 2, 7, 100, 257};
  unsigned long long st = 0x7265666572ull;
  for (int it = 0; it < 40; it++) {
    const int dtype = it & 1 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const int B = 1 + (int)(fs_test_rand(&st) % 9);
    const int D = Ds[fs_test_rand(&st) % 5], V = Vs[fs_test_rand(&st) % 5];
    const long long hs = it % 4 == 0 ? 0 : D + 8 * (long long)(fs_test_rand(&st) % 3);
    const long long ws = it % 4 == 1 ? 0 : D + 8 * (long long)(fs_test_rand(&st) % 3 + 1);
    const long long voff = it % 3 == 0 ? 1000 + it
                         : it % 3 == 1 ? FS_MAX_VOCAB - V : 0;
    ref_prob pr;
    /* Logits of a few units, so sampled rows are neither flat nor one-hot. */
    ref_prob_make(&pr, dtype, B, D, V, hs, ws, voff, 2.0 / sqrt(sqrt(D)), &st);
    float temps[9];
    uint64_t seeds[9], offs[9];
    const fs_sampling s = ref_random_sampling(it, B, 5, temps, seeds, offs, &st);
    char what[128];
    snprintf(what, sizeof what, "problem %d (%s B=%d D=%d V=%d S=%d)", it,
             dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", B, D, V,
             (int)s.num_samples);
    check_against_oracle(&pr.p, &s, 8, what);
    ref_prob_free(&pr);
  }
}

/* ---- 2. greedy rows, ties ----------------------------------------------------- */

static void test_greedy_and_ties(void) {
  unsigned long long st = 0x67726565ull;
  enum { B = 5, D = 32, V = 50 };
  ref_prob pr;
  ref_prob_make(&pr, FS_DTYPE_BF16, B, D, V, 0, 0, 77, 1.0, &st);
  /* Rows 3 and 10 of W equal H's row 0, scaled up: an exact greedy tie
  ** for row 0 that the smaller id must win. */
  for (int k = 0; k < D; k++) {
    const double x = 4.0 * ref_decode(FS_DTYPE_BF16, pr.h[k]);
    pr.w[3 * D + k] = pr.w[10 * D + k] = ref_encode(FS_DTYPE_BF16, x);
  }
  const float temps[B] = {0.0f, 1.0f, -1.0f, NAN, 1.0f};
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperatures = temps;
  s.num_samples = 4;
  double z[V];
  int32_t tok[B * 4], distinct_ok = 0;
  int32_t seen[B][20];
  for (int o = 0; o < 20; o++) {
    s.offset = (uint64_t)o * 1000003u;
    s.seed = 99u + (uint64_t)o;
    REQUIRE(fs_reference_sample(&pr.p, &s, tok, NULL, NULL) == FS_OK);
    for (int b = 0; b < B; b++) {
      ref_oracle_logits(&pr.p, b, z);
      int arg = 0;
      for (int v = 1; v < V; v++)
        if (z[v] > z[arg]) arg = v;
      if (!(temps[b] > 0.0f))
        for (int t = 0; t < 4; t++)
          CHECK_MSG(tok[b * 4 + t] == 77 + arg, "greedy row %d: %d want %d",
                    b, (int)tok[b * 4 + t], 77 + arg);
      seen[b][o] = tok[b * 4];
    }
  }
  /* Row 0's tie: both rows give the same z, the smaller id wins. */
  fs_ref_result r;
  REQUIRE(fs_reference_row(&pr.p, &s, 0, 0, &r) == FS_OK);
  CHECK(r.token == 77 + 3 && r.second_token == 77 + 10);
  CHECK(r.score == r.second_score);
  /* Sampled rows move with the seed and offset. */
  for (int b = 1; b < B; b += 3) {
    int distinct = 0;
    for (int o = 1; o < 20; o++) distinct += seen[b][o] != seen[b][0];
    distinct_ok += distinct > 0;
  }
  CHECK(distinct_ok == 2);
  ref_prob_free(&pr);
}

/* ---- 3. slots, batch size and seeds --------------------------------------------- */

static void test_slots(void) {
  unsigned long long st = 0x736c6f74ull;
  enum { D = 64, V = 300, S = 4 };
  ref_prob one, eight, thirteen;
  for (int it = 0; it < 6; it++) {
    const int dtype = it & 1 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    ref_prob_make(&one, dtype, 1, D, V, D + 8, 0, 5000, 0.6, &st);
    ref_prob_make(&eight, dtype, 8, D, V, D + 8, 0, 5000, 0.6, &st);
    ref_prob_make(&thirteen, dtype, 13, D, V, 0, 0, 5000, 0.6, &st);
    memcpy(eight.w, one.w, sizeof(uint16_t) * V * D);
    memcpy(thirteen.w, one.w, sizeof(uint16_t) * V * D);
    memcpy(eight.h + 5 * (D + 8), one.h, sizeof(uint16_t) * D);
    memcpy(thirteen.h + 12 * D, one.h, sizeof(uint16_t) * D);
    float t1 = it == 5 ? 0.0f : 0.5f + 0.3f * (float)it, t8[13];
    uint64_t s1 = fs_test_rand(&st), o1 = fs_test_rand(&st), s8[13], o8[13];
    for (int b = 0; b < 13; b++) {
      t8[b] = 1.0f;
      s8[b] = fs_test_rand(&st);
      o8[b] = fs_test_rand(&st);
    }
    t8[5] = t8[12] = t1;
    s8[5] = s8[12] = s1;
    o8[5] = o8[12] = o1;
    fs_sampling a = {t1, NULL, S, s1, NULL, o1, NULL};
    fs_sampling b8 = {9.0f, t8, S, 12345u, s8, 0, o8};
    fs_sampling b8t = b8; /* the same arrays, one slot later */
    int32_t tok1[S], tok8[8 * S], tok13[13 * S];
    float lg1[S], lg8[8 * S], lg13[13 * S];
    uint64_t k1[S], k8[8 * S], k13[13 * S];
    a.temperatures = &t1;
    a.seeds = &s1;
    a.offsets = &o1;
    REQUIRE(fs_reference_sample(&one.p, &a, tok1, lg1, k1) == FS_OK);
    REQUIRE(fs_reference_sample(&eight.p, &b8, tok8, lg8, k8) == FS_OK);
    REQUIRE(fs_reference_sample(&thirteen.p, &b8t, tok13, lg13, k13) == FS_OK);
    for (int t = 0; t < S; t++) {
      CHECK_MSG(tok8[5 * S + t] == tok1[t] && k8[5 * S + t] == k1[t] &&
                    ref_float_bits_equal(lg8[5 * S + t], lg1[t]),
                "it %d sample %d: slot 5 of 8 drew %d, B=1 drew %d", it, t,
                (int)tok8[5 * S + t], (int)tok1[t]);
      CHECK_MSG(tok13[12 * S + t] == tok1[t] && k13[12 * S + t] == k1[t],
                "it %d sample %d: slot 12 of 13 drew %d, B=1 drew %d", it, t,
                (int)tok13[12 * S + t], (int)tok1[t]);
    }
    ref_prob_free(&one);
    ref_prob_free(&eight);
    ref_prob_free(&thirteen);
  }

  /* Eight identical rows: a scalar seed keys the noise by row, per-row
  ** seeds (all equal) do not. */
  ref_prob id;
  ref_prob_make(&id, FS_DTYPE_BF16, 8, D, V, 0, 0, 0, 0.3, &st);
  for (int b = 1; b < 8; b++) memcpy(id.h + b * D, id.h, sizeof(uint16_t) * D);
  uint64_t same_seed[8], same_off[8];
  for (int b = 0; b < 8; b++) { same_seed[b] = 4242u; same_off[b] = 7u; }
  fs_sampling sc = {1.0f, NULL, S, 4242u, NULL, 7u, NULL};
  fs_sampling pr = {1.0f, NULL, S, 0u, same_seed, 0u, same_off};
  int32_t ts[8 * S], tp[8 * S];
  REQUIRE(fs_reference_sample(&id.p, &sc, ts, NULL, NULL) == FS_OK);
  REQUIRE(fs_reference_sample(&id.p, &pr, tp, NULL, NULL) == FS_OK);
  int scalar_pairs_equal = 0, perrow_pairs_differ = 0;
  for (int b = 1; b < 8; b++)
    for (int t = 0; t < S; t++) {
      scalar_pairs_equal += ts[b * S + t] == ts[t];
      perrow_pairs_differ += tp[b * S + t] != tp[t];
    }
  /* With ~300 plausible tokens, a few coincidences among 28 pairs at most. */
  CHECK_MSG(scalar_pairs_equal <= 3, "scalar seed: %d of 28 equal",
            scalar_pairs_equal);
  CHECK(perrow_pairs_differ == 0);
  ref_prob_free(&id);
}

/* ---- 4. sharding ---------------------------------------------------------------- */

static void test_sharding(void) {
  unsigned long long st = 0x7368617264ull;
  enum { B = 6, D = 48, V = 1000, S = 3 };
  static const int cut[4] = {0, 137, 637, 1000};
  for (int it = 0; it < 4; it++) {
    const int dtype = it & 1 ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    const long long base = it * 100000LL, ws = D + 8 * it;
    ref_prob pr;
    ref_prob_make(&pr, dtype, B, D, V, 0, ws, base, 0.5, &st);
    const float temps[B] = {1.0f, 0.0f, 0.5f, 2.0f, 1.0f, -1.0f};
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
    REQUIRE(fs_reference_sample(&pr.p, &s, tok, lg, key) == FS_OK);
    for (int i = 0; i < B * S; i++) best[i] = 0;
    for (int sh = 0; sh < 3; sh++) {
      fs_problem q = pr.p;
      q.vocab = cut[sh + 1] - cut[sh];
      q.vocab_offset = base + cut[sh];
      q.weight = pr.w + (long long)cut[sh] * ws;
      REQUIRE(fs_reference_sample(&q, &s, stok, slg, skey) == FS_OK);
      for (int i = 0; i < B * S; i++) {
        CHECK(fs_key_token(skey[i]) == (uint32_t)stok[i]);
        CHECK(stok[i] >= q.vocab_offset && stok[i] < q.vocab_offset + q.vocab);
        if (skey[i] > best[i]) { best[i] = skey[i]; best_lg[i] = slg[i]; }
      }
    }
    for (int i = 0; i < B * S; i++)
      CHECK_MSG(best[i] == key[i] && fs_key_token(best[i]) == (uint32_t)tok[i] &&
                    ref_float_bits_equal(best_lg[i], lg[i]),
                "shard %d row %d sample %d: max key %016llx (token %u), "
                "unsharded %016llx (token %d)", it, i / S, i % S,
                (unsigned long long)best[i], (unsigned)fs_key_token(best[i]),
                (unsigned long long)key[i], (int)tok[i]);
    ref_prob_free(&pr);
  }
}

/* ---- 5. the law: chi-square ------------------------------------------------------ */

#define LAW_V 64
#define LAW_D 64
#define LAW_ROWS 4
#define LAW_S 50000 /* 4 rows x 50,000 samples = 2e5 draws */

static void test_law(void) {
  unsigned long long st = 0x6c6177ull;
  static const float Ts[] = {0.5f, 1.0f, 2.0f};
  ref_prob pr;
  /* bf16 entries uniform in (-0.9, 0.9): logits with sd ~2.4. */
  ref_prob_make(&pr, FS_DTYPE_BF16, LAW_ROWS, LAW_D, LAW_V, 0, 0, 3000, 0.9, &st);
  for (int b = 1; b < LAW_ROWS; b++)
    memcpy(pr.h + b * LAW_D, pr.h, sizeof(uint16_t) * LAW_D);
  double z[LAW_V], p[LAW_V], q[LAW_V];
  ref_oracle_logits(&pr.p, 0, z);
  int32_t *tok = ref_xalloc(sizeof(int32_t) * LAW_ROWS * LAW_S);
  /* The rows share H and the seed; their offsets make them independent. */
  uint64_t seeds[LAW_ROWS], offs[LAW_ROWS];
  for (int b = 0; b < LAW_ROWS; b++) {
    seeds[b] = 0xabcdef12345ull;
    offs[b] = 1000u + (uint64_t)b;
  }
  for (int i = 0; i < 3; i++) {
    fs_sampling s = {Ts[i], NULL, LAW_S, 0u, seeds, 0u, offs};
    REQUIRE(fs_reference_sample(&pr.p, &s, tok, NULL, NULL) == FS_OK);
    int64_t counts[LAW_V] = {0};
    for (int j = 0; j < LAW_ROWS * LAW_S; j++) {
      const int v = tok[j] - 3000;
      REQUIRE(v >= 0 && v < LAW_V);
      counts[v]++;
    }
    fs_stats_softmax(z, LAW_V, Ts[i], p);
    const fs_chi2 good = fs_stats_chi2_gof(counts, p, LAW_V);
    /* Power: drawing from softmax(z/T) while expecting softmax(z/1.05T)
    ** gives noncentrality lambda (printed: ~1.1e3 at T=2, more below), so
    ** the statistic sits near dof + lambda, some 15 sigma above the 1e-6
    ** critical value (~120 for ~60 dof): power > 0.999999 at every T. */
    fs_stats_softmax(z, LAW_V, 1.05 * Ts[i], q);
    const double lam = fs_stats_noncentrality(p, q, LAW_V, LAW_ROWS * LAW_S);
    const fs_chi2 bad = fs_stats_chi2_gof(counts, q, LAW_V);
    const double power = fs_stats_power(bad.dof, lam, 1e-6);
    printf("T=%.1f: chi2=%.1f dof=%d p=%.3g (pooled %d); T*1.05: chi2=%.1f "
           "p=%.3g lambda=%.0f power=%.9f\n", (double)Ts[i], good.stat,
           good.dof, good.p, good.pooled, bad.stat, bad.p, lam, power);
    CHECK(good.total == LAW_ROWS * LAW_S && good.dof >= 20);
    CHECK_MSG(good.p > 1e-3, "T=%g: p=%g", (double)Ts[i], good.p);
    CHECK_MSG(bad.p < 1e-6, "T=%g off by 5%%: p=%g", (double)Ts[i], bad.p);
    CHECK(power > 0.999999);
  }
  free(tok);
  ref_prob_free(&pr);
}

/* ---- 6. chunked passes ------------------------------------------------------------ */

static void test_chunks(void) {
  unsigned long long st = 0x6368756eull;
  ref_prob pr;
  /* D = 4096: the reference decodes H 64 rows at a time, so B = 70 takes two
  ** blocks. */
  ref_prob_make(&pr, FS_DTYPE_FP16, 70, 4096, 9, 0, 4104, 10, 0.05, &st);
  fs_sampling s = {1.0f, NULL, 2, 5u, NULL, 6u, NULL};
  check_against_oracle(&pr.p, &s, 30, "70 rows of D=4096");
  ref_prob_free(&pr);
  /* 20 rows x 60000 samples exceed one pass of results (2^20): two passes
  ** over the samples. */
  ref_prob_make(&pr, FS_DTYPE_BF16, 20, 8, 5, 0, 0, 0, 1.0, &st);
  fs_sampling m = {0.8f, NULL, 60000, 77u, NULL, 0u, NULL};
  int32_t *tok = ref_xalloc(sizeof(int32_t) * 20 * 60000);
  REQUIRE(fs_reference_sample(&pr.p, &m, tok, NULL, NULL) == FS_OK);
  double z[5], sc[5];
  int bad = 0;
  for (int b = 0; b < 20; b++) {
    ref_oracle_logits(&pr.p, b, z);
    for (int t = 0; t < 60000; t += 997) {
      bad += tok[b * 60000 + t] != oracle_draw(&pr.p, &m, z, b, t, sc).token;
      bad += tok[b * 60000 + 59999 - t] !=
             oracle_draw(&pr.p, &m, z, b, 59999 - t, sc).token;
    }
  }
  CHECK_MSG(bad == 0, "many samples: %d draws differ", bad);
  free(tok);
  ref_prob_free(&pr);
}

/* ---- 7. the statistics themselves --------------------------------------------------- */

static void test_stats(void) {
  CHECK(fabs(fs_stats_chi2_sf(2.0, 2.0) - exp(-1.0)) < 1e-15);
  CHECK(fabs(fs_stats_chi2_sf(180.79201532589993, 99.0) / 1e-6 - 1.0) < 1e-9);
  CHECK(fabs(fs_stats_chi2_critical(99.0, 1e-6) - 180.79201532589993) < 1e-6);
  /* Q(5e4, 5.2e4) = 5.270961229397467e-19 (mpmath): dof 1e5, tiny p. */
  CHECK(fabs(fs_stats_gamma_q(5e4, 5.2e4) / 5.270961229397467e-19 - 1.0) < 1e-12);
  /* Pooling: expected 50, 30, 10, 6, 4 -> the 4 joins the 6. */
  const double probs[5] = {0.5, 0.3, 0.1, 0.06, 0.04};
  const int64_t exact[5] = {50, 30, 10, 6, 4}, off[5] = {40, 30, 10, 10, 10};
  fs_chi2 r = fs_stats_chi2_gof(exact, probs, 5);
  CHECK(r.stat < 1e-20 && r.p == 1.0 && r.dof == 3 && r.pooled == 1);
  r = fs_stats_chi2_gof(off, probs, 5);
  /* (40-50)^2/50 + 0 + 0 + (20-10)^2/10 = 12 on 3 dof. */
  CHECK(fabs(r.stat - 12.0) < 1e-12 && r.dof == 3);
  CHECK(fabs(r.p - fs_stats_chi2_sf(12.0, 3.0)) < 1e-15);
  const double zero[3] = {0.5, 0.5, 0.0};
  const int64_t oops[3] = {50, 49, 1};
  r = fs_stats_chi2_gof(oops, zero, 3);
  CHECK(r.impossible == 1 && r.p == 0.0);
  double zz[3] = {1.0, 3.0, 3.0}, sm[3];
  fs_stats_softmax(zz, 3, 0.0, sm);
  CHECK(sm[0] == 0.0 && sm[1] == 1.0 && sm[2] == 0.0);
  fs_stats_softmax(zz, 3, 2.0, sm);
  CHECK(fabs(sm[1] - 1.0 / (2.0 + exp(-1.0))) < 1e-15 && sm[1] == sm[2]);
}

int main(void) {
  test_stats();
  test_random_problems();
  test_greedy_and_ties();
  test_slots();
  test_sharding();
  test_law();
  test_chunks();
  return fs_test_done("test_reference");
}
