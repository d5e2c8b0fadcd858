/*
** fsamp_filter.cu: the draw of a call with filters (fs_options.min_p, top_k,
** top_p; runtime/filter.c launches it).  Compiled once per context into a
** module of its own, never into a variant: the generator's revision does not
** hash this file (generator/gen.c), so a change here retires no tuning result.
**
** The call's fused kernel ran first with p.zout set: every logit of the call
** (after the soft-cap, before the mask) is in zout[b * zout_stride + v].
** fsamp_filter then takes one row per CTA:
**  1. the candidates' largest logit and count (and, with logprobs, the raw
**     logits' log-sum-exp, as the fused kernels take it);
**  2. min-p's threshold from the largest logit;
**  3. top-k's: the k-th largest key by radix selection over the candidates
**     above min-p's threshold (three passes of 11, 11 and 10 bits, counts
**     in a shared histogram);
**  4. top-p's: the same selection by mass, each candidate's weight
**     2^((z - z_max) log2(e) / T) in 64-bit fixed point (2^32 for the
**     largest), so that the sums are integers whose value does not depend on
**     the order of the atomics: the draw is reproducible;
**  5. the draw: the max over kept tokens (z >= tau) of the fused kernels' key
**     fs_pack_key(fmaf(z, 1 / T, fs_gumbel_fast(word)), token), the same
**     score and noise as theirs, so that a row whose filters keep every
**     candidate draws what the fused kernel would have drawn, bit for bit.
** Rows that are greedy, have no candidate or whose filters are off draw as
** the fused kernels do over every token.
*/
/* fs_device.h's shared pieces (fs_col_load, fs_mask_bits_n) need its
** epilogue's tile macros: a dummy epilogue, which nothing here instantiates */
#define FS_BF16 1
#define TILE_V 16
#define TILE_B 1
#define TPC 1
#define RPT 16
#include "fs_device.h"

#define FT_THREADS 512
#define FT_WARPS (FT_THREADS / 32)
#define FT_BINS 2048 /* the widest digit: 11 bits */
#define FT_NINF (-__int_as_float(0x7f800000))

struct ft_shared {
  union {
    unsigned cnt[FT_BINS];
    unsigned long long mass[FT_BINS];
  } h;
  unsigned long long u[FT_WARPS]; /* the block reductions' partials */
  float f[FT_WARPS];
  unsigned long long sel_above;   /* ft_select's result of a pass */
  unsigned sel_digit;
};

/* The block's max / sum of x: every thread calls it and gets the result. */
__device__ __forceinline__ float ft_max(float x, ft_shared &sh) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  if ((threadIdx.x & 31) == 0) sh.f[threadIdx.x >> 5] = x;
  __syncthreads();
  float m = sh.f[0];
  for (int w = 1; w < FT_WARPS; w++) m = fmaxf(m, sh.f[w]);
  __syncthreads();
  return m;
}

__device__ __forceinline__ unsigned long long ft_sum(unsigned long long x, ft_shared &sh) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  if ((threadIdx.x & 31) == 0) sh.u[threadIdx.x >> 5] = x;
  __syncthreads();
  unsigned long long s = 0;
  for (int w = 0; w < FT_WARPS; w++) s += sh.u[w];
  __syncthreads();
  return s;
}

__device__ __forceinline__ unsigned long long ft_max64(unsigned long long x, ft_shared &sh) {
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  if ((threadIdx.x & 31) == 0) sh.u[threadIdx.x >> 5] = x;
  __syncthreads();
  unsigned long long m = 0;
  for (int w = 0; w < FT_WARPS; w++) m = sh.u[w] > m ? sh.u[w] : m;
  __syncthreads();
  return m;
}

/* An order-preserving key of a number z (-0 keyed as +0, as fs_pack_key
** keys them) and back. */
__device__ __forceinline__ unsigned ft_key(float z) {
  const unsigned b = __float_as_uint(z == 0.0f ? 0.0f : z);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float ft_unkey(unsigned k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* One row's view of the staged logits: token v's logit and whether the
** token mask allows it. */
struct ft_row {
  const float *z;
  int b;
};

__device__ __forceinline__ float ft_logit(const fs_params &p, const ft_row &r, int v,
                                          bool &allowed) {
  const float z = __ldcg(r.z + v);
  allowed = !p.mask || (fs_mask_bits_n(p, r.b, (unsigned)(p.vocab_offset + v), 1u) & 1u);
  return z;
}

/* The key of the candidates (above lo, a number: z >= lo) at which the
** count (MASS false) or the weight (MASS true: 2^((z - zmax) c2), c2 =
** log2(e) / T, times 2^32, rounded) summed from the largest key down first
** reaches target (1 <= target <= the set's total).  Three passes of a
** radix selection: each histograms the digit below the bits fixed so far,
** over the candidates whose key has them; the thread whose bins hold the
** crossing fixes the digit. */
template <bool MASS>
__device__ unsigned ft_select(const fs_params &p, const ft_row &r, float lo, float zmax, float c2,
                              unsigned long long target, ft_shared &sh) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  unsigned prefix = 0u, fixed = 0u;
  unsigned long long above = 0ull; /* what the keys above the current bucket hold */
#pragma unroll 1
  for (int pass = 0; pass < 3; pass++) {
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
    const unsigned nb = pass == 2 ? 1024u : 2048u;
    for (unsigned i = tid; i < nb; i += FT_THREADS) {
      if (MASS) sh.h.mass[i] = 0ull;
      else sh.h.cnt[i] = 0u;
    }
    __syncthreads();
    for (int v = tid; v < p.V; v += FT_THREADS) {
      bool ok;
      const float z = ft_logit(p, r, v, ok);
      if (!ok || !(z >= lo) || z == FT_NINF) continue;
      const unsigned k = ft_key(z);
      if ((k & fixed) != prefix) continue;
      const unsigned d = (k >> shift) & (nb - 1u);
      if (MASS)
        atomicAdd(&sh.h.mass[d], __float2ull_rn(exp2f((z - zmax) * c2) * 4294967296.0f));
      else
        atomicAdd(&sh.h.cnt[d], 1u);
    }
    __syncthreads();
    /* thread t holds bins [t bpt, (t + 1) bpt); the bins above it, summed */
    const unsigned bpt = nb / FT_THREADS;
    unsigned long long mine = 0ull;
    for (unsigned i = 0; i < bpt; i++)
      mine += MASS ? sh.h.mass[tid * bpt + i] : sh.h.cnt[tid * bpt + i];
    unsigned long long suf = mine; /* the warp's lanes >= lane */
    for (int o = 1; o < 32; o <<= 1) {
      const unsigned long long y = __shfl_down_sync(0xffffffffu, suf, o);
      if (lane + o < 32) suf += y;
    }
    if (lane == 0) sh.u[warp] = suf;
    __syncthreads();
    unsigned long long cum = above + suf - mine;
    for (int w = warp + 1; w < FT_WARPS; w++) cum += sh.u[w];
    for (int i = (int)bpt - 1; i >= 0; i--) {
      const unsigned d = tid * bpt + (unsigned)i;
      const unsigned long long h = MASS ? sh.h.mass[d] : sh.h.cnt[d];
      if (cum < target && cum + h >= target) {
        sh.sel_digit = d;
        sh.sel_above = cum;
      }
      cum += h;
    }
    __syncthreads();
    prefix |= sh.sel_digit << shift;
    fixed |= (nb - 1u) << shift;
    above = sh.sel_above;
    __syncthreads();
  }
  return prefix;
}

/* The row's draw of sample s over tokens with z >= tau (all tokens, masked
** ones at -inf and NaNs included, when all): the max key, as the fused
** kernels score them.  Thread 0 writes the outputs. */
__device__ void ft_draw(const fs_params &p, const ft_row &r, const fs_col &c, bool all,
                        float tau, int s, float lse, ft_shared &sh) {
  unsigned long long best = 0ull;
  for (int v = threadIdx.x; v < p.V; v += FT_THREADS) {
    bool ok;
    float z = ft_logit(p, r, v, ok);
    if (!ok) z = FS_MASKED_LOGIT;
    if (!all && !(ok && z >= tau && z != FT_NINF)) continue;
    const unsigned tok = (unsigned)(p.vocab_offset + v);
    float sc = z;
    if (!c.greedy) {
      const fs_philox_out q = fs_noise_quad(c.seed, c.off, tok >> 2, (unsigned)s, c.tag);
      const unsigned j = tok & 3u;
      const unsigned x = j == 0 ? q.v[0] : j == 1 ? q.v[1] : j == 2 ? q.v[2] : q.v[3];
      sc = fmaf(z, c.inv_t, fs_gumbel_fast(x));
    }
    const unsigned long long k = fs_pack_key(sc, tok);
    best = k > best ? k : best;
  }
  best = ft_max64(best, sh);
  if (threadIdx.x == 0) {
    const unsigned tok = fs_key_token(best);
    const int v = (int)(tok - (unsigned)p.vocab_offset);
    bool ok;
    float z = ft_logit(p, r, v, ok);
    if (!ok) z = FS_MASKED_LOGIT;
    const size_t item = (size_t)r.b * p.num_samples + s;
    p.tokens[item] = (int)tok;
    if (p.logits) p.logits[item] = z;
    if (p.keys) p.keys[item] = best;
    if (p.logprobs) p.logprobs[item] = z - lse;
  }
}

extern "C" __global__ void __launch_bounds__(FT_THREADS, 1)
    fsamp_filter(const fs_params p, const fs_filter f) {
  __shared__ ft_shared sh;
  const ft_row r = {p.zout + (long long)blockIdx.x * p.zout_stride, (int)blockIdx.x};
  const fs_col c = fs_col_load(p, r.b);
  const float T = p.temperatures ? p.temperatures[r.b] : p.temperature;

  /* 1. the candidates' max and count, the raw logits' max */
  float zmax = FT_NINF, rmax = FT_NINF;
  unsigned long long n = 0ull, ninf = 0ull;
  for (int v = threadIdx.x; v < p.V; v += FT_THREADS) {
    bool ok;
    const float z = ft_logit(p, r, v, ok);
    rmax = fmaxf(rmax, z);
    if (ok && z > FT_NINF) {
      zmax = fmaxf(zmax, z);
      n++;
      ninf += z == -FT_NINF;
    }
  }
  zmax = ft_max(zmax, sh);
  rmax = ft_max(rmax, sh);
  n = ft_sum(n, sh);
  ninf = ft_sum(ninf, sh);
  float lse = 0.0f;
  if (p.logprobs) { /* log-sum-exp of the raw logits: NaN with a NaN or +inf */
    float l = 0.0f;
    for (int v = threadIdx.x; v < p.V; v += FT_THREADS) {
      bool ok;
      const float z = ft_logit(p, r, v, ok);
      l += z == FT_NINF ? 0.0f : expf(z - rmax);
    }
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if ((threadIdx.x & 31) == 0) sh.f[threadIdx.x >> 5] = l;
    __syncthreads();
    l = 0.0f;
    for (int w = 0; w < FT_WARPS; w++) l += sh.f[w];
    __syncthreads();
    lse = rmax + logf(l);
  }

  /* the row's filters (flashsampling.h's per-row rules) */
  float mp = f.min_ps ? f.min_ps[r.b] : f.min_p;
  const int k = f.top_ks ? f.top_ks[r.b] : f.top_k;
  const float tp = f.top_ps ? f.top_ps[r.b] : f.top_p;
  const bool on_m = mp > 0.0f, on_p = tp > 0.0f && tp < 1.0f;
  bool all = c.greedy || n == 0 || (!on_m && !on_p && (k <= 0 || (unsigned long long)k >= n));
  float tau = FT_NINF;
  if (!all && ninf) {
    tau = -FT_NINF; /* the +inf candidates hold all the mass */
  } else if (!all) {
    /* 2. min-p: z >= z_max + T ln(min_p); T = +inf weighs all alike */
    if (on_m) {
      const float t = zmax + T * logf(fminf(mp, 1.0f));
      tau = t == t ? t : FT_NINF;
    }
    unsigned long long n1 = n; /* candidates above min-p's threshold */
    if (tau > FT_NINF) {
      unsigned long long m = 0ull;
      for (int v = threadIdx.x; v < p.V; v += FT_THREADS) {
        bool ok;
        const float z = ft_logit(p, r, v, ok);
        m += ok && z >= tau && z != FT_NINF;
      }
      n1 = ft_sum(m, sh);
    }
    /* 3. top-k among them */
    if (k > 0 && (unsigned long long)k < n1)
      tau = ft_unkey(ft_select<false>(p, r, tau, zmax, 0.0f, (unsigned long long)k, sh));
    /* 4. top-p among what is left, renormalised over it */
    if (on_p) {
      const float c2 = c.inv_t * 1.4426950408889634f;
      unsigned long long m = 0ull;
      for (int v = threadIdx.x; v < p.V; v += FT_THREADS) {
        bool ok;
        const float z = ft_logit(p, r, v, ok);
        if (ok && z >= tau && z != FT_NINF)
          m += __float2ull_rn(exp2f((z - zmax) * c2) * 4294967296.0f);
      }
      const unsigned long long total = ft_sum(m, sh);
      double want = ceil((double)tp * (double)total);
      const unsigned long long target = want < 1.0 ? 1ull : (unsigned long long)want;
      tau = ft_unkey(ft_select<true>(p, r, tau, zmax, c2, target, sh));
    }
    all = !(tau > FT_NINF);
  }
  /* 5. the draws (a greedy row's samples are all the same) */
  for (int s = 0; s < p.num_samples; s++) {
    if (c.greedy && s > 0) {
      if (threadIdx.x == 0) {
        const size_t i0 = (size_t)r.b * p.num_samples, item = i0 + s;
        p.tokens[item] = p.tokens[i0];
        if (p.logits) p.logits[item] = p.logits[i0];
        if (p.keys) p.keys[item] = p.keys[i0];
        if (p.logprobs) p.logprobs[item] = p.logprobs[i0];
      }
      continue;
    }
    ft_draw(p, r, c, all, tau, s, lse, sh);
  }
}
