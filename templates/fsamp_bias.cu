/*
** fsamp_bias.cu: the kernels of a call with a logit bias (fs_options.logit_bias_*;
** runtime/bias.c launches them).  Compiled once per context into a module of
** its own, never into a variant: the generator's revision does not hash this
** file (generator/gen.c), so a change here retires no tuning result.
**
** The fused kernel draws over every token but the biased ones, which the mask
** it is given (fsamp_bias_mask) clears; fsamp_bias_bf16 / fsamp_bias_f16 then
** score each row's biased tokens from their W rows, with the noise the fused
** kernels give those ids, and keep the larger key.  The argmax over a partition
** of the tokens is the argmax over the whole: exact, and pathwise the draw a
** fused kernel adding the bias itself would make (up to fp32 near-ties of the
** dot products, which here run in another order).
*/
#include "fs_params.h"
#include "fs_rng.h"

#define FS_BIAS_MAX 1024 /* FS_MAX_LOGIT_BIAS (flashsampling.h) */

/* Row blockIdx.x of the fused kernel's mask, at out + row * out_stride: its
** words [first, first + span) (those holding this call's ids), from the
** caller's mask (row stride `stride`) or all ones without one, with the bit
** of every biased id in [lo, hi) (this call's ids) cleared.  128 threads. */
extern "C" __global__ void __launch_bounds__(128)
fsamp_bias_mask(const unsigned *mask, long long stride, int first, int span,
                long long out_stride, const int *tokens, int count, int lo, int hi,
                unsigned *out) {
  const int b = blockIdx.x;
  unsigned *row = out + b * out_stride;
  const unsigned *src = mask ? mask + b * stride : nullptr;
  for (int w = first + threadIdx.x; w < first + span; w += blockDim.x)
    row[w] = src ? src[w] : 0xffffffffu;
  __syncthreads(); /* the block's copies before its clears */
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    const int t = tokens[(size_t)b * count + j];
    if (t >= lo && t < hi) atomicAnd(row + (t >> 5), ~(1u << (t & 31)));
  }
}

/* The two elements of a packed pair as fp32. */
template <bool BF16>
__device__ __forceinline__ float2 bias_pair(unsigned x) {
  if (BF16) return make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u));
  float lo, hi;
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi) : "r"(x));
  return make_float2(lo, hi);
}

/* Row b's logit of W row v, in fp32 (lanes over 16-byte pieces of D, then a
** butterfly), capped as the fused kernels cap it (fs_softcap1: c tanhf(z /
** c) with 1 / c from __fdividef).  Every lane of the warp calls it and gets
** the same value. */
template <bool BF16>
__device__ __forceinline__ float bias_logit(const fs_params &p, int b, int v, int lane) {
  const uint4 *h = (const uint4 *)((const unsigned short *)p.H + (long long)b * p.h_stride);
  const uint4 *w = (const uint4 *)((const unsigned short *)p.W + (long long)v * p.w_stride);
  float acc = 0.0f;
  for (int i = lane; i < p.D / 8; i += 32) {
    const uint4 x = __ldg(h + i), y = __ldg(w + i);
    const unsigned xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const float2 a = bias_pair<BF16>(xs[j]), c = bias_pair<BF16>(ys[j]);
      acc = fmaf(a.x, c.x, acc);
      acc = fmaf(a.y, c.y, acc);
    }
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (p.softcap > 0.0f) acc = p.softcap * tanhf(acc * __fdividef(1.0f, p.softcap));
  return acc;
}

/* Row blockIdx.x's biased tokens against the fused kernel's winners: for each
** sample s, the best key over the row's biased tokens (score z' / T + the
** token's noise, z' = z + the sum of its values; z' on greedy rows) replaces
** keys[row * S + s] when it is not smaller (an equal key is the same token,
** which the fused kernel saw as masked), and logits[] gets that token's raw
** logit z.  An entry is skipped when its token is outside [vocab_offset,
** vocab_offset + V), listed earlier in the row, or disallowed by the caller's
** mask (p.mask).  128 threads. */
template <bool BF16>
__device__ __forceinline__ void bias_row(const fs_params &p, const int *tokens,
                                         const float *values, int count,
                                         unsigned long long *keys, float *logits) {
  __shared__ int st[FS_BIAS_MAX];
  __shared__ float sz[FS_BIAS_MAX], sb[FS_BIAS_MAX];
  const int b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  /* the row's parameters as fs_col_load (fs_device.h) takes them: first, while
  ** little is live (the division is a called subroutine) */
  const float T = p.temperatures ? p.temperatures[b] : p.temperature;
  const bool greedy = !(T > 0.0f);
  const float inv_t = greedy ? 0.0f : 1.0f / T;
  const unsigned long long seed = p.seeds ? p.seeds[b] : p.seed;
  const unsigned long long off = p.offsets ? p.offsets[b] : p.offset;
  const unsigned tag = p.seeds ? 0u : (unsigned)(b + 1);
  const int *tk = tokens + (size_t)b * count;
  const float *vl = values + (size_t)b * count;
  for (int j = threadIdx.x; j < count; j += blockDim.x) st[j] = tk[j];
  __syncthreads();
  for (int j = warp; j < count; j += 4) {
    const int t = st[j];
    bool ok = t >= p.vocab_offset && t - p.vocab_offset < p.V;
    if (ok && p.mask) /* the caller's mask: a disallowed token stays -inf */
      ok = p.mask[(long long)b * p.mask_stride + (t >> 5)] >> (t & 31) & 1u;
    float sum = 0.0f; /* the token's values in entry order; none when listed before */
    for (int i0 = 0; ok && i0 < count; i0 += 32) {
      const unsigned same = __ballot_sync(0xffffffffu, i0 + lane < count && st[i0 + lane] == t);
      if (i0 < j && (same & (j - i0 < 32 ? (1u << (j - i0)) - 1u : 0xffffffffu))) ok = false;
      for (unsigned m = same & (i0 + 32 > j ? ~0u << (j > i0 ? j - i0 : 0) : 0u); ok && m;
           m &= m - 1u)
        sum += vl[i0 + __ffs(m) - 1];
    }
    const float z = ok ? bias_logit<BF16>(p, b, t - p.vocab_offset, lane) : 0.0f;
    if (lane == 0) {
      st[j] = ok ? t : -1;
      sz[j] = z;
      sb[j] = z + sum;
    }
  }
  __syncthreads();
  for (int s = warp; s < p.num_samples; s += 4) {
    unsigned long long best = 0ull;
    float bz = 0.0f;
    for (int j = lane; j < count; j += 32) {
      const int t = st[j];
      if (t < 0) continue;
      float sc = sb[j];
      if (!greedy) {
        const fs_philox_out q = fs_noise_quad(seed, off, (unsigned)t >> 2, (unsigned)s, tag);
        const unsigned k = (unsigned)t & 3u; /* selects: an indexed q.v went to the stack */
        const unsigned x = k == 0 ? q.v[0] : k == 1 ? q.v[1] : k == 2 ? q.v[2] : q.v[3];
        sc = fmaf(sc, inv_t, fs_gumbel_fast(x));
      }
      const unsigned long long k = fs_pack_key(sc, (unsigned)t);
      if (k > best) best = k, bz = sz[j];
    }
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned long long k2 = __shfl_xor_sync(0xffffffffu, best, o);
      const float z2 = __shfl_xor_sync(0xffffffffu, bz, o);
      if (k2 > best) best = k2, bz = z2;
    }
    const size_t item = (size_t)b * p.num_samples + s;
    if (lane == 0 && best && best >= keys[item]) {
      keys[item] = best;
      logits[item] = bz;
    }
  }
}

extern "C" __global__ void __launch_bounds__(128)
fsamp_bias_bf16(const fs_params p, const int *tokens, const float *values, int count,
                unsigned long long *keys, float *logits) {
  bias_row<true>(p, tokens, values, count, keys, logits);
}

extern "C" __global__ void __launch_bounds__(128)
fsamp_bias_f16(const fs_params p, const int *tokens, const float *values, int count,
               unsigned long long *keys, float *logits) {
  bias_row<false>(p, tokens, values, count, keys, logits);
}
