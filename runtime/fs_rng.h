/*
** fs_rng.h: the noise of flashsampling, shared word for word by the CUDA
** kernels (NVRTC includes this file) and the CPU reference (C11).
**
** Philox4x32-10 (Salmon et al., SC'11), checked against the Random123
** known-answer vectors in tests/cpu/test_rng.c.
**
** Counter layout for one (row, sample, token) draw:
**   key     = { seed_lo, seed_hi }                        (the seed, 64 bits)
**   counter = { token >> 2, sample | tag << 16, offset_lo, offset_hi }
** and the draw is word (token & 3) of the 128-bit output, so one Philox call
** serves four consecutive token ids.  token is the GLOBAL token id
** (vocab_offset + local row of W) and
** tag = row + 1 with a scalar seed (rows independent) or 0 with per-row seeds
** (a request's noise does not depend on its batch slot).  Nothing depends on
** tiles, CTAs, variants or shards.  Hence sample < 2^16 and row < 2^16 - 1.
**
** The CPU reference evaluates the noise with fs_gumbel (libm's logs), the
** kernels with fs_gumbel_fast (a series and the GPU's lg2 unit): within
** 2^-17 of the exact function of the same 32 bits, and 2^-16 of libm's
** (tests/gpu/test_noise.c).
**
** Gumbel noise, fp32: from the first Philox word x (32 bits),
**   v = fma(x, 2^-32, 2^-33) clamped to <= 1 - 2^-24   (v strictly in (0,1))
**   E = -log1p(-v)            (an Exp(1) variate; v small <=> E small)
**   g = -log(E)
** Because v is the *small* uniform, its full 32-bit resolution lands in the
** upper tail of g: the largest possible noise is g(x = 0) = 33 ln 2 =
** FS_GUMBEL_CAP (22.8739); the smallest is g(1 - 2^-24) = -log(16.6355) =
** FS_GUMBEL_FLOOR (-2.8115).  (-log(-log u) with u a float32 uniform caps
** near 16.6, which is what FlashInfer and the reference kernel do.)
*/
#ifndef FS_RNG_H
#define FS_RNG_H

#ifdef __CUDACC_RTC__
typedef unsigned int fs_u32;
typedef unsigned long long fs_u64;
#define FS_RNG_FN __device__ __forceinline__
#else
#include <math.h>
#include <stdint.h>
typedef uint32_t fs_u32;
typedef uint64_t fs_u64;
#ifdef __CUDACC__
#define FS_RNG_FN __host__ __device__ __forceinline__
#else
#define FS_RNG_FN static inline
#endif
#endif

#define FS_PHILOX_M0 0xD2511F53u
#define FS_PHILOX_M1 0xCD9E8D57u
#define FS_PHILOX_W0 0x9E3779B9u
#define FS_PHILOX_W1 0xBB67AE85u

/* The exact bounds of the noise (fp32, as computed by fs_gumbel below). */
#define FS_GUMBEL_CAP 22.873857f
#define FS_GUMBEL_FLOOR -2.8115408f

typedef struct fs_philox_out { fs_u32 v[4]; } fs_philox_out;

FS_RNG_FN fs_u32 fs_mulhilo(fs_u32 a, fs_u32 b, fs_u32 *hi) {
#ifdef __CUDA_ARCH__
  *hi = __umulhi(a, b);
  return a * b;
#else
  fs_u64 p = (fs_u64)a * (fs_u64)b;
  *hi = (fs_u32)(p >> 32);
  return (fs_u32)p;
#endif
}

/* Philox4x32 with 10 rounds: counter c, key k -> 128 random bits. */
FS_RNG_FN fs_philox_out fs_philox4x32_10(fs_u32 c0, fs_u32 c1, fs_u32 c2,
                                         fs_u32 c3, fs_u32 k0, fs_u32 k1) {
  fs_philox_out r;
  int i;
  for (i = 0; i < 10; i++) {
    fs_u32 hi0, hi1;
    fs_u32 lo0 = fs_mulhilo(FS_PHILOX_M0, c0, &hi0);
    fs_u32 lo1 = fs_mulhilo(FS_PHILOX_M1, c2, &hi1);
    fs_u32 n0 = hi1 ^ c1 ^ k0;
    fs_u32 n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += FS_PHILOX_W0; k1 += FS_PHILOX_W1;
  }
  r.v[0] = c0; r.v[1] = c1; r.v[2] = c2; r.v[3] = c3;
  return r;
}

/* Uniform strictly inside (0, 1) from 32 bits, fine near 0 (see above). */
FS_RNG_FN float fs_uniform_small(fs_u32 x) {
  float v = fmaf((float)x, 2.3283064365386963e-10f /* 2^-32 */,
                 1.1641532182693481e-10f /* 2^-33 */);
  return v < 0.99999994f ? v : 0.99999994f; /* 1 - 2^-24 */
}

/* Gumbel(0,1) noise in fp32 from 32 random bits, in
** [FS_GUMBEL_FLOOR, FS_GUMBEL_CAP]. */
FS_RNG_FN float fs_gumbel(fs_u32 x) {
  float v = fs_uniform_small(x);
  float e = -log1pf(-v);
  return -logf(e);
}

#ifdef __CUDA_ARCH__
/* log2(x) on the special-function unit (lg2.approx.ftz.f32): absolute error
** <= 2^-22 for x in [0.5, 2], 2 ulp elsewhere (CUDA C++ Programming Guide,
** __log2f); x must be a positive normal number. */
FS_RNG_FN float fs_lg2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* The kernels' noise: fs_gumbel's function of the same 32 bits, computed in
** ~15 instructions and two special-function-unit logs instead of ~85
** instructions of libdevice log1pf + logf (the epilogue's largest cost).
**   E = -log1p(-v): for v < 1/16 the series v (1 + v/2 + ... + v^5/6),
**       truncation < v^6/7 <= 2^-24 / 7 relative; else -ln2 lg2(1 - v), where
**       1 - v rounds by <= 2^-25 and lg2 errs by <= 2^-22 absolute, against
**       E >= -log(15/16) = 0.0645: <= 2^-18.4 relative;
**   g = -ln2 lg2(E): <= 2^-22.5 absolute for E in [0.5, 2], else 2 ulp of
**       |lg2 E| <= 33: <= 2^-17.5 absolute.
** In all |g_fast - g| <= 2^-17 (tests/gpu/test_noise.c measures it over
** every region); the CPU reference keeps libm's logs, and the pathwise
** test's noise tolerance (2^-16) covers both. */
FS_RNG_FN float fs_gumbel_fast(fs_u32 x) {
  const float v = fs_uniform_small(x);
  float p = 0.16666667f;
  p = fmaf(p, v, 0.2f);
  p = fmaf(p, v, 0.25f);
  p = fmaf(p, v, 0.33333334f);
  p = fmaf(p, v, 0.5f);
  p = fmaf(p, v, 1.0f);
  const float series = v * p;
  const float direct = -0.69314718f * fs_lg2_approx(1.0f - v);
  const float e = v < 0.0625f ? series : direct;
  return -0.69314718f * fs_lg2_approx(e);
}

/* The exact pruning of the per-token noise (perf-notes 22g).  For a bound s
** (a finite score some token of the row has reached: the lane's own best or
** another chunk's), a quad of tokens whose logits are at most zmax, and
** inverse temperature inv_t: fs_prune_need gives t, less than the noise
** such a token needs to beat s by a margin, and fs_prune_word(t) a word X such
** that every word x > X scores fmaf(z, inv_t, fs_gumbel_fast(x)) < s, strictly
** (so the token loses to the bound's token whatever their ids).  No word
** reaches t > FS_GUMBEL_CAP.
** Why it holds: x > X gives v = fs_uniform_small(x) > e^-t (X is e^-t 2^32
** rounded up, but for ex2.approx's error, which the margin covers), so
** E = -log1p(-v) >= v > e^-t and the exact noise -log E < t.
** The margin 2^-12 + (|a| + |s|) 2^-21 (a = s - zmax inv_t) covers
** fs_gumbel_fast's 2^-17, ex2.approx's and the uniform's roundings, the
** rounding of a, and a spacing of s, so that the fp32 score stays below s.
** NaNs: a NaN zmax (four NaN logits, which never win) gives X = 0; a zmax
** of +inf gives X = 0xffffffff (nothing skipped), one of -inf X = 0. */
FS_RNG_FN float fs_prune_need(float s, float zmax, float inv_t) {
  const float a = fmaf(-zmax, inv_t, s); /* the noise a token must beat */
  return a - fmaf(fabsf(a) + fabsf(s), 0x1p-21f, 0x1p-12f);
}
FS_RNG_FN fs_u32 fs_prune_word(float t) {
  float y; /* ~ e^-t 2^32 */
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(fmaf(-t, 1.44269504f, 32.0f)));
  return __float2uint_ru(y); /* saturates at 0xffffffff; NaN gives 0 */
}
#endif

/* The random words of tokens 4*quad .. 4*quad+3 (row tag, sample) under
** (seed, offset). */
FS_RNG_FN fs_philox_out fs_noise_quad(fs_u64 seed, fs_u64 offset, fs_u32 quad,
                                      fs_u32 sample, fs_u32 tag) {
  return fs_philox4x32_10(quad, sample | (tag << 16), (fs_u32)offset,
                          (fs_u32)(offset >> 32), (fs_u32)seed,
                          (fs_u32)(seed >> 32));
}

/* FS_NOISE_GROUP16 (flashsampling.h): the random words of the group of
** global ids [16 group, 16 group + 16); counters with bit 31 set (a token
** quad's counter, token >> 2 < 2^29, never has it). */
#define FS_GROUP_TOKENS 16
FS_RNG_FN fs_philox_out fs_noise_group(fs_u64 seed, fs_u64 offset, fs_u32 group,
                                       fs_u32 sample, fs_u32 tag) {
  return fs_noise_quad(seed, offset, 0x80000000u | group, sample, tag);
}

/* The group's inverse-CDF uniform from its word 1: in [0, 1 - 2^-24], a
** multiple of 2^-24 (exact in fp32 and double). */
FS_RNG_FN float fs_group_uniform(fs_u32 x) {
  return (float)(x >> 8) * 5.9604644775390625e-08f /* 2^-24 */;
}

/* The noise of (global token, row tag, sample) under (seed, offset). */
FS_RNG_FN float fs_noise(fs_u64 seed, fs_u64 offset, fs_u32 token,
                         fs_u32 sample, fs_u32 tag) {
  fs_philox_out r = fs_noise_quad(seed, offset, token >> 2, sample, tag);
  return fs_gumbel(r.v[token & 3]);
}

/* Order-preserving 64-bit key of (score, token): a larger score gives a
** larger key; at equal scores the smaller token id wins.  NaN scores sort
** below every number; -0 is keyed as +0 (they are equal scores, as in fp32
** compares and in the CPU reference, so the smaller token wins; a logit can
** be -0: an fp32 sum of products that underflow to -0). */
FS_RNG_FN fs_u64 fs_pack_key(float score, fs_u32 token) {
  union { float f; fs_u32 u; } s;
  fs_u32 b;
  s.f = score;
  b = s.u;
  if (score != score) b = 0u; /* NaN: lowest */
  else if (score == 0.0f) b = 0x80000000u; /* -0 and +0 */
  else b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((fs_u64)b << 32) | (fs_u64)(~token);
}

FS_RNG_FN fs_u32 fs_key_token(fs_u64 key) { return ~(fs_u32)key; }

FS_RNG_FN float fs_key_score(fs_u64 key) {
  union { float f; fs_u32 u; } s;
  fs_u32 b = (fs_u32)(key >> 32);
  s.u = (b & 0x80000000u) ? (b & 0x7fffffffu) : ~b;
  return s.f;
}

#endif /* FS_RNG_H */
