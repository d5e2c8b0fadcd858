// fs-test-timeout: 120
/*
** test_rng.c: the noise of fs_rng.h, which the CUDA kernels and the CPU
** reference share word for word.
**
**  - Philox4x32-10 against the Random123 known-answer vectors;
**  - the Gumbel transform: its exact bounds, (0,1) uniforms, monotonicity,
**    exact tail counts over all 2^32 inputs, a chi-square test of 10^6 draws
**    that must also reject a 0.05 shift, and the g > 8 tail from 10^7 draws;
**  - the order-preserving (score, token) keys;
**  - the counter layout (four tokens per Philox call): every input field
**    reaches the output.
** Runs in about a second on one core.
*/
#include "fs_rng.h"
#include "fs_stats.h"
#include "fs_test.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Gumbel CDF and the upper tail P(g > t) = 1 - exp(-exp(-t)), in double. */
static double gumbel_cdf(double g) { return exp(-exp(-g)); }
static double gumbel_tail(double t) { return -expm1(-exp(-t)); }

/* ---- Philox4x32-10 known answers ---------------------------------------- */

/* The "philox4x32 10" rows of Random123's tests/kat_vectors (counter[4],
** key[2], expected[4]); compared against the copy of those rows in
** DEShawResearch/Random123-Boost libs/random/test/test_philox.cpp, which
** says it cut-and-pasted them from kat_vectors. */
static const uint32_t kat[3][10] = {
    {0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u,
     0x00000000u, 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
    {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu,
     0xffffffffu, 0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
    {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u,
     0x299f31d0u, 0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u},
};

static void test_philox_kat(void) {
  for (int i = 0; i < 3; i++) {
    const uint32_t *r = kat[i];
    fs_philox_out o = fs_philox4x32_10(r[0], r[1], r[2], r[3], r[4], r[5]);
    for (int w = 0; w < 4; w++)
      CHECK_MSG(o.v[w] == r[6 + w], "kat %d word %d: got %08x want %08x", i,
                w, (unsigned)o.v[w], (unsigned)r[6 + w]);
  }
  /* mulhilo is the 64-bit product split in halves. */
  uint32_t hi, lo = fs_mulhilo(0xffffffffu, 0xffffffffu, &hi);
  CHECK(hi == 0xfffffffeu && lo == 0x00000001u);
}

/* ---- the Gumbel transform -------------------------------------------------- */

static void test_gumbel_bounds(void) {
  CHECK(fs_gumbel(0u) == FS_GUMBEL_CAP);
  CHECK(FS_GUMBEL_CAP >= 22.0f);
  CHECK(fabs((double)FS_GUMBEL_CAP - 33.0 * log(2.0)) < 1e-5);
  CHECK(fs_gumbel(0xffffffffu) == FS_GUMBEL_FLOOR);
  /* The floor is -log(-log1p(-(1 - 2^-24))) = -log(24 ln 2). */
  CHECK(fabs((double)FS_GUMBEL_FLOOR + log(24.0 * log(2.0))) < 1e-5);
  CHECK(fs_uniform_small(0u) == 0x1p-33f);
  CHECK(fs_uniform_small(0xffffffffu) == 1.0f - 0x1p-24f);
}

/* fs_uniform_small(x) in (0, 1) and fs_gumbel(x) in [FLOOR, CAP] for x. */
static int check_point(uint32_t x) {
  const float u = fs_uniform_small(x), g = fs_gumbel(x);
  const int ok = u > 0.0f && u < 1.0f && g >= FS_GUMBEL_FLOOR &&
                 g <= FS_GUMBEL_CAP;
  if (!ok)
    fprintf(stderr, "x=%08x: u=%.9g g=%.9g out of range\n", (unsigned)x,
            (double)u, (double)g);
  return ok;
}

static void test_uniform_range(void) {
  unsigned long long st = 0x5eed0001ull;
  int bad = 0;
  uint32_t x;
  /* Both ends in full: the top 2^24 inputs are where (float)x rounds up to
  ** 2^32 and only the clamp keeps v below 1. */
  for (x = 0; x < (1u << 20); x++) bad += !check_point(x);
  for (x = 0xff000000u;; x++) {
    bad += !check_point(x);
    if (x == 0xffffffffu) break;
  }
  for (int i = 0; i < 1000000; i++) bad += !check_point((uint32_t)fs_test_rand(&st));
  CHECK(bad == 0);
}

static void test_gumbel_monotone(void) {
  int bad = 0;
  uint64_t x;
  float prev = fs_gumbel(0u);
  /* A sweep over all of [0, 2^32) in odd steps, plus each end in full. */
  for (x = 1; x < (1ull << 32); x += (x < 65536 || x > 0xffff0000ull) ? 1 : 4099) {
    const float g = fs_gumbel((uint32_t)x);
    if (g > prev) {
      if (bad++ < 5)
        fprintf(stderr, "fs_gumbel increases at x=%llx: %.9g > %.9g\n",
                (unsigned long long)x, (double)g, (double)prev);
    }
    prev = g;
  }
  CHECK(bad == 0);
}

/* Number of inputs x in [0, 2^32) with fs_gumbel(x) > t (by monotonicity,
** a binary search for the first x with g <= t). */
static uint64_t count_above(float t) {
  uint64_t lo = 0, hi = 1ull << 32; /* first index with g <= t is in [lo, hi] */
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (fs_gumbel((uint32_t)mid) <= t) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/* The exact law of the noise over all 2^32 inputs, in the tail where
** sampling cannot reach: x is uniform on 2^32 values and v = (x + 1/2) 2^-32,
** so #{x : g > t} = ceil(2^32 P(g > t) - 1/2) up to float rounding of the
** logs (relative 1e-6 allows ~10 ulps). */
static void test_gumbel_tail_exact(void) {
  static const float ts[] = {-2.0f, 0.0f, 2.0f, 4.0f, 8.0f, 12.0f,
                             16.0f, 20.0f, 22.0f};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
    const double want = ceil(4294967296.0 * gumbel_tail(ts[i]) - 0.5);
    const double got = (double)count_above(ts[i]);
    CHECK_MSG(fabs(got - want) <= 1.0 + 1e-6 * want,
              "t=%g: %.0f inputs above, want %.0f", (double)ts[i], got, want);
  }
  CHECK(count_above(FS_GUMBEL_CAP) == 0);
}

/* 10^6 draws of fs_noise over consecutive token ids, in 100 equiprobable
** bins of the Gumbel law.  Returns the chi-square result; `shift` is added
** to every draw (0 for the real test). */
#define NOISE_BINS 100
#define NOISE_DRAWS 1000000
static fs_chi2 noise_chi2(double shift, int64_t *counts) {
  double probs[NOISE_BINS];
  memset(counts, 0, sizeof(int64_t) * NOISE_BINS);
  for (uint32_t t = 0; t < NOISE_DRAWS; t++) {
    const double g = (double)fs_noise(0x0123456789abcdefull, 42u, t, 3u, 7u);
    int bin = (int)(gumbel_cdf(g + shift) * NOISE_BINS);
    counts[bin < NOISE_BINS ? bin : NOISE_BINS - 1]++;
  }
  for (int i = 0; i < NOISE_BINS; i++) probs[i] = 1.0 / NOISE_BINS;
  return fs_stats_chi2_gof(counts, probs, NOISE_BINS);
}

static void test_noise_distribution(void) {
  int64_t counts[NOISE_BINS];
  fs_chi2 ok = noise_chi2(0.0, counts);
  printf("noise chi2: stat=%.1f dof=%d p=%.3g (want p > 1e-3)\n", ok.stat,
         ok.dof, ok.p);
  CHECK(ok.dof == NOISE_BINS - 1);
  CHECK(ok.p > 1e-3);

  /* Power against a +0.05 shift: the shifted draws fall in bin j with
  ** probability F(e_{j+1} - 0.05) - F(e_j - 0.05) instead of 1/100, giving
  ** lambda = N sum (p_j - 1/100)^2 / (1/100) = 2.4e3 (printed); the
  ** statistic is then about 99 + 2.4e3 +- 1e2 against a 1e-6 critical value
  ** of 181: the test rejects with probability 1 - 1e-100 or so. */
  double p[NOISE_BINS], q[NOISE_BINS];
  for (int j = 0; j < NOISE_BINS; j++) {
    const double lo = j ? -log(-log((double)j / NOISE_BINS)) : -INFINITY;
    const double hi = j + 1 < NOISE_BINS
                          ? -log(-log((double)(j + 1) / NOISE_BINS)) : INFINITY;
    p[j] = gumbel_cdf(hi - 0.05) - gumbel_cdf(lo - 0.05);
    q[j] = 1.0 / NOISE_BINS;
  }
  const double lam = fs_stats_noncentrality(p, q, NOISE_BINS, NOISE_DRAWS);
  const double power = fs_stats_power(NOISE_BINS - 1, lam, 1e-6);
  fs_chi2 bad = noise_chi2(0.05, counts);
  printf("noise + 0.05: stat=%.1f p=%.3g (want p < 1e-6; lambda=%.0f, "
         "power=%.6f)\n", bad.stat, bad.p, lam, power);
  CHECK(lam > 1000.0);
  CHECK(bad.p < 1e-6);
}

/* P(g > 8) from 10^7 draws (0.3 s here) against 1 - exp(-exp(-8)) =
** 3.354e-4, within 5 binomial sigma (58 of 3354 expected): it catches a tail
** mass off by more than ~9% (e.g. a noise that caps near 8); caps further out
** are test_gumbel_tail_exact's job.  Also the mean against Euler's gamma
** (sd pi / sqrt(6N)). */
static void test_upper_tail(void) {
  const long n = 10000000;
  long above = 0;
  double sum = 0.0;
  for (long i = 0; i < n; i++) {
    const uint32_t tok = (uint32_t)i;
    const float g = fs_noise(0xfeedfacecafebeefull, 0x100000000ull + 9u, tok,
                             0u, 0u);
    above += g > 8.0f;
    sum += (double)g;
  }
  const double pt = gumbel_tail(8.0), mu = n * pt;
  const double sd = sqrt(n * pt * (1.0 - pt));
  printf("g > 8: %ld of %ld, expected %.1f +- %.1f (%.2f sigma)\n", above, n,
         mu, sd, ((double)above - mu) / sd);
  CHECK(fabs((double)above - mu) < 5.0 * sd);
  const double mean = sum / (double)n, euler = 0.57721566490153286;
  const double msd = 3.14159265358979 / sqrt(6.0 * (double)n);
  printf("mean %.6f, expected %.6f +- %.6f\n", mean, euler, msd);
  CHECK(fabs(mean - euler) < 5.0 * msd);
}

/* ---- keys ------------------------------------------------------------------ */

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t float_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* Checks the key contract on one pair; returns 1 if it holds. */
static int key_pair_ok(float a, uint32_t ta, float b, uint32_t tb) {
  const uint64_t ka = fs_pack_key(a, ta), kb = fs_pack_key(b, tb);
  int ok = fs_key_token(ka) == ta && fs_key_token(kb) == tb;
  if (a == 0.0f) a = 0.0f; /* -0 is keyed as +0: equal scores */
  if (b == 0.0f) b = 0.0f;
  if (isnan(a)) ok &= isnan(fs_key_score(ka));
  else ok &= float_to_bits(fs_key_score(ka)) == float_to_bits(a);
  if (isnan(a) && isnan(b)) ok &= (ka < kb) == (ta > tb) || ta == tb;
  else if (isnan(a)) ok &= ka < kb; /* NaN below every number */
  else if (isnan(b)) ok &= ka > kb;
  else if (a < b) ok &= ka < kb;
  else if (a > b) ok &= ka > kb;
  else /* equal scores (-0 and +0 among them) */
    ok &= ta == tb ? ka == kb : (ka > kb) == (ta < tb); /* smaller id wins */
  if (!ok)
    fprintf(stderr, "key pair (%a, %u) (%a, %u): %016llx %016llx\n",
            (double)a, (unsigned)ta, (double)b, (unsigned)tb,
            (unsigned long long)ka, (unsigned long long)kb);
  return ok;
}

static void test_keys(void) {
  const float sp[] = {-INFINITY, -FLT_MAX, -1.0f, -FLT_MIN, -0x1p-149f,
                      -0.0f, 0.0f, 0x1p-149f, FLT_MIN, 1.0f, FLT_MAX,
                      INFINITY, NAN, 22.873857f, -2.8115408f};
  const uint32_t toks[] = {0u, 1u, 2u, 151935u, 0x7ffffffeu, 0x7fffffffu};
  const size_t nsp = sizeof sp / sizeof sp[0], nt = sizeof toks / sizeof toks[0];
  unsigned long long st = 0x6b657973ull;
  int bad = 0;
  for (size_t i = 0; i < nsp; i++)
    for (size_t j = 0; j < nsp; j++)
      for (size_t k = 0; k < nt; k++)
        for (size_t l = 0; l < nt; l++)
          bad += !key_pair_ok(sp[i], toks[k], sp[j], toks[l]);
  for (int i = 0; i < 1000000; i++) {
    const uint64_t r = fs_test_rand(&st);
    float a, b;
    if (i & 1) { /* any bit patterns: every exponent, subnormals, NaNs */
      a = bits_to_float((uint32_t)r);
      b = bits_to_float((uint32_t)(r >> 32));
    } else { /* few distinct values, so equal scores are common */
      a = (float)((int)(r % 7) - 3) * 0.5f;
      b = (float)((int)((r >> 8) % 7) - 3) * 0.5f;
    }
    const uint32_t ta = (uint32_t)(r >> 16) & 0x7fffffffu;
    const uint32_t tb = (i % 3) ? (uint32_t)(r >> 40) : ta + 1u;
    bad += !key_pair_ok(a, ta, b, tb & 0x7fffffffu);
  }
  CHECK(bad == 0);
  /* The reduction's view: the max key over shards is the best candidate. */
  CHECK(fs_pack_key(1.5f, 10u) > fs_pack_key(1.5f, 11u));
  CHECK(fs_pack_key(1.5f, 0x7fffffffu) > fs_pack_key(1.4999999f, 0u));
}

/* ---- counter layout ----------------------------------------------------------- */

typedef struct ctr { uint64_t seed, offset; uint32_t token, sample, tag; } ctr;

/* The 32 random bits behind one draw, spelled out from fs_rng.h's layout:
** counter {token >> 2, sample | tag << 16, offset_lo, offset_hi}, key
** {seed_lo, seed_hi}, word token & 3. */
static uint32_t ctr_word(ctr c) {
  return fs_philox4x32_10(c.token >> 2, c.sample | (c.tag << 16),
                          (uint32_t)c.offset, (uint32_t)(c.offset >> 32),
                          (uint32_t)c.seed, (uint32_t)(c.seed >> 32))
      .v[c.token & 3];
}
static float ctr_noise(ctr c) {
  return fs_noise(c.seed, c.offset, c.token, c.sample, c.tag);
}

/* Flipping any one bit of any field (within its range: token 32 bits,
** sample and tag 16 each, offset and seed 64 each) changes the random word
** and the noise.  A word collision has probability 2^-32 per pair; two
** different words give the same float noise with probability ~1e-7, so a
** couple of noise collisions over the 38,400 pairs would be chance, and a
** field that the counter ignored would give 200 per bit. */
static void test_counter_independence(void) {
  unsigned long long st = 0xc0ffeeull;
  int word_same = 0, noise_same = 0, layout_bad = 0;
  for (int it = 0; it < 200; it++) {
    ctr c;
    c.seed = fs_test_rand(&st);
    c.offset = fs_test_rand(&st);
    c.token = (uint32_t)fs_test_rand(&st);
    c.sample = (uint32_t)fs_test_rand(&st) & 0xffffu;
    c.tag = (uint32_t)fs_test_rand(&st) & 0xffffu;
    const uint32_t w0 = ctr_word(c);
    const float n0 = ctr_noise(c);
    layout_bad += fs_gumbel(w0) != n0;
    {
      const fs_philox_out q = fs_noise_quad(c.seed, c.offset, c.token >> 2,
                                            c.sample, c.tag);
      layout_bad += q.v[c.token & 3] != w0;
    }
    for (int f = 0; f < 5; f++) {
      const int nbits = f < 2 ? 64 : f == 2 ? 32 : 16;
      for (int bit = 0; bit < nbits; bit++) {
        ctr d = c;
        switch (f) {
          case 0: d.seed ^= 1ull << bit; break;
          case 1: d.offset ^= 1ull << bit; break;
          case 2: d.token ^= 1u << bit; break;
          case 3: d.sample ^= 1u << bit; break;
          default: d.tag ^= 1u << bit; break;
        }
        word_same += ctr_word(d) == w0;
        noise_same += ctr_noise(d) == n0;
      }
    }
  }
  printf("counter bit flips: %d equal words, %d equal noise values of 38400\n",
         word_same, noise_same);
  CHECK(layout_bad == 0);
  CHECK(word_same == 0);
  CHECK(noise_same <= 2);
  /* Fields do not alias one another. */
  CHECK(fs_noise(1, 2, 3, 4, 5) != fs_noise(1, 2, 4, 3, 5));
  CHECK(fs_noise(1, 2, 3, 4, 5) != fs_noise(1, 2, 3, 5, 4));
  CHECK(fs_noise(1, 2, 3, 4, 5) != fs_noise(2, 1, 3, 4, 5));
  CHECK(fs_noise(1ull << 32, 0, 3, 4, 5) != fs_noise(1, 0, 3, 4, 5));
  CHECK(fs_noise(0, 1ull << 32, 3, 4, 5) != fs_noise(0, 1, 3, 4, 5));
  CHECK(fs_noise(7, 7, 3, 0x8000u, 0) != fs_noise(7, 7, 3, 0, 1));
  CHECK(fs_noise(7, 7, 3, 0xffffu, 0) != fs_noise(7, 7, 3, 0, 0xffffu));
  /* The four tokens of a quad draw four different words. */
  for (uint32_t t = 0; t < 4; t++)
    for (uint32_t u = 0; u < t; u++)
      CHECK(fs_noise(9, 9, 400 + t, 0, 1) != fs_noise(9, 9, 400 + u, 0, 1));
}

int main(void) {
  test_philox_kat();
  test_gumbel_bounds();
  test_uniform_range();
  test_gumbel_monotone();
  test_gumbel_tail_exact();
  test_noise_distribution();
  test_upper_tail();
  test_keys();
  test_counter_independence();
  return fs_test_done("test_rng");
}
