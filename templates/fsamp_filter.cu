/*
** fsamp_filter.cu: the draw of a call with filters (fs_options.min_p, top_k,
** top_p; runtime/filter.c launches it).  Compiled once per context into a
** module of its own, never into a variant: the generator's revision does not
** hash this file (generator/gen.c), so a change here retires no tuning result.
**
** The call's fused kernel ran first with p.zout set: every logit of the call
** (after the soft-cap, before the mask) is in zout[b * zout_stride + v].
** fsamp_filter then takes one row per cluster of CTAs (sm_90, at small B;
** runtime/filter.c picks the size; elsewhere one CTA), each CTA a slice:
**  1. one pass over the slice: the candidates' largest logit, count and
**     (with top-p) mass, each thread's largest candidate, and with logprobs
**     the raw logits' log-sum-exp, as the fused kernels take it; merged
**     over the cluster through distributed shared memory, in rank order;
**  2. min-p's threshold from the largest logit, and lower bounds of the
**     final threshold from the threads' maxima (sorted in shared memory,
**     the cluster's largest ones in rank 0's); a second pass over the
**     slices gathers every candidate at or above them into rank 0's shared
**     memory where they fit (FT_CAP), and rank 0 alone runs steps 3-5
**     there; else (or with FS_FILTER_GATHER=0, runtime/filter.c) every CTA
**     runs them as passes over its slice, "the long way", each pass's
**     histograms summed in rank 0's shared memory and its digit read back;
**  3. top-k's: the k-th largest key by radix selection over the candidates
**     above min-p's threshold (three passes of 11, 11 and 10 bits, counts
**     in a shared histogram);
**  4. top-p's: the same selection by mass, each candidate's weight
**     2^((z - z_max) log2(e) / T) in 64-bit fixed point (2^32 for the
**     largest), so that the sums are integers whose value does not depend on
**     the order of the atomics: the draw is reproducible; the long way's
**     first digit is a bin of value below z_max (ft_vscale), the radix's
**     three passes then run within it;
**  5. the draw: the max over kept tokens (z >= tau) of the fused kernels' key
**     fs_pack_key(fmaf(z, 1 / T, fs_gumbel_fast(word)), token), the same
**     score and noise as theirs, so that a row whose filters keep every
**     candidate draws what the fused kernel would have drawn, bit for bit.
** Rows that are greedy, have no candidate or whose filters are off draw as
** the fused kernels do over every token, each CTA over its slice.
*/
/* fs_device.h's shared pieces (fs_col_load, fs_mask_bits_n) need its
** epilogue's tile macros: a dummy epilogue, which nothing here instantiates */
#define FS_BF16 1
#define TILE_V 16
#define TILE_B 1
#define TPC 1
#define RPT 16
#include "fs_device.h"
#include "fs_penalty.h"

#define FT_THREADS 512
#define FT_WARPS (FT_THREADS / 32)
#ifndef FT_UNROLL
#define FT_UNROLL 2   /* float4 loads a thread's scan takes at once (FS_FILTER_UNROLL,
                         runtime/filter.c) */
#endif
#ifndef FT_PIPE
#define FT_PIPE 1     /* 1: a scan's next FT_UNROLL loads issued before its current ones
                         are used (FS_FILTER_PIPE; perf-notes 36b) */
#endif
#ifndef FT_MINB
#define FT_MINB 2     /* CTAs an SM (__launch_bounds__: 64 registers; FS_FILTER_MINB,
                         runtime/filter.c): at one CTA a row (large B), two CTAs an SM
                         keep twice the loads in flight (perf-notes 36b) */
#endif
#define FT_BINS 2048  /* the widest digit: 11 bits */
#define FT_CAP 2048   /* the kept set gathered into shared memory, when it fits */
#define FT_LCAP 1024  /* a slice's share of it, staged in its own CTA first */
#define FT_MAXCS 8    /* the largest cluster (runtime/filter.c's) */
#define FT_NINF (-__int_as_float(0x7f800000))
#ifndef FT_NO_GATHER
#define FT_NO_GATHER 0 /* 1: never gather the kept set (runtime/filter.c, FS_FILTER_GATHER=0) */
#endif

struct ft_shared {
  union {
    unsigned cnt[FT_BINS];
    unsigned long long mass[FT_BINS];
  } h;
  float kz[FT_CAP];               /* the gathered set: logits and rows */
  int kv[FT_CAP];
  float lz[FT_LCAP];              /* a slice's candidates (clusters of 2 or more) */
  int lv[FT_LCAP];
  float mx[FT_THREADS];           /* the cluster's largest thread maxima (rank 0) */
  unsigned long long u[FT_WARPS]; /* the block reductions' partials */
  float f2[FT_WARPS];             /* ft_scan_sum's */
  unsigned long long sel_above;   /* ft_select's result of a pass */
  unsigned long long sel_target;  /* ft_cpass's target, where it takes it from the bins */
  unsigned sel_digit, nk;         /* and the gathered count (rank 0: the row's) */
  unsigned ln, off, first;        /* the slice's count, its place in rank 0's, a thread */
  unsigned cnts[FT_MAXCS];        /* the gather's slices' counts and (top-p alone) */
  unsigned long long s1m[FT_MAXCS], s1h[FT_MAXCS]; /* masses: every CTA's copy */
  unsigned bias_at;               /* ft_bias_raw's entry */
  unsigned long long best, cbest; /* ft_creduce's: this CTA's, for the cluster's; the cluster's */
  float bound;                    /* rank 0: the gather's bound */
  struct ft_part {                /* a slice's pass 1 (ft_merge) */
    float tmax, lm, ll, wm, ws;
    unsigned n, ninf;
  } mine, row, wpart[FT_WARPS];
};
typedef ft_shared::ft_part ft_part;

/* ---- the row's cluster: sm_90's CTAs of a cluster read and write each
** other's shared memory; elsewhere every cluster is one CTA ---------------- */
__device__ __forceinline__ unsigned ft_rank() {
#if __CUDA_ARCH__ >= 900
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#else
  return 0u;
#endif
}
__device__ __forceinline__ unsigned ft_ncta() {
#if __CUDA_ARCH__ >= 900
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
#else
  return 1u;
#endif
}
/* Every thread of every CTA of the cluster; what each wrote before (its own
** or a peer's shared memory) is seen by all after. */
__device__ __forceinline__ void ft_csync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
#endif
}
/* The generic address of *x in the shared memory of the cluster's CTA `rank`. */
template <typename T>
__device__ __forceinline__ T *ft_peer(T *x, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  unsigned long long a;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(a) : "l"(x), "r"(rank));
  return (T *)a;
#else
  return x;
#endif
}

/* The block's sum of x: every thread calls it and gets the result. */
__device__ __forceinline__ unsigned long long ft_sum(unsigned long long x, ft_shared &sh) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  if ((threadIdx.x & 31) == 0) sh.u[threadIdx.x >> 5] = x;
  __syncthreads();
  unsigned long long s = 0;
  for (int w = 0; w < FT_WARPS; w++) s += sh.u[w];
  __syncthreads();
  return s;
}

/* The block's max of x: every thread calls it and gets the result. */
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

/* The cluster's max (MAX) or sum of x over its cs CTAs (each CTA's block
** result first, then the CTAs' in rank order): every thread of every CTA
** calls it and gets the result. */
template <bool MAX>
__device__ __forceinline__ unsigned long long ft_creduce(unsigned long long x, ft_shared &sh,
                                                         unsigned cs) {
  x = MAX ? ft_max64(x, sh) : ft_sum(x, sh);
  if (cs == 1u) return x;
  if (threadIdx.x == 0) sh.best = x;
  ft_csync();
  if (threadIdx.x == 0) {
    x = 0ull;
    for (unsigned r = 0; r < cs; r++) {
      const unsigned long long y = *ft_peer(&sh.best, r);
      x = MAX ? (y > x ? y : x) : x + y;
    }
    sh.cbest = x; /* not sh.u: the next ft_max64 writes it unguarded */
  }
  ft_csync(); /* the peers have read this CTA's best; sh.cbest is seen */
  return sh.cbest;
}

/* Two slices' pass 1 as one: the weights' sums (log-sum-exp l at m, top-p's
** ws at wm) brought to the larger reference; an empty part's sum is 0. */
__device__ __forceinline__ ft_part ft_merge(ft_part a, const ft_part &b, float c2) {
  const float m = fmaxf(a.lm, b.lm), wm = fmaxf(a.wm, b.wm);
  a.ll = (a.ll == 0.0f ? 0.0f : a.ll * __expf(a.lm - m)) +
         (b.ll == 0.0f ? 0.0f : b.ll * __expf(b.lm - m));
  a.ws = (a.ws == 0.0f ? 0.0f : a.ws * exp2f((a.wm - wm) * c2)) +
         (b.ws == 0.0f ? 0.0f : b.ws * exp2f((b.wm - wm) * c2));
  a.lm = m;
  a.wm = wm;
  a.tmax = fmaxf(a.tmax, b.tmax);
  a.n += b.n;
  a.ninf += b.ninf;
  return a;
}

/* The block's pass 1 from every thread's: merged by shuffles within each
** warp (the same bits in every lane: each merge is symmetric), then the
** warps' in order by thread 0 into sh.mine. */
template <typename S> /* ft_shared, or fsamp_toplp's ft_tshared */
__device__ __forceinline__ void ft_block_part(ft_part t, S &sh, float c2) {
  for (int o = 16; o > 0; o >>= 1) {
    ft_part y;
    y.tmax = __shfl_xor_sync(0xffffffffu, t.tmax, o);
    y.lm = __shfl_xor_sync(0xffffffffu, t.lm, o);
    y.ll = __shfl_xor_sync(0xffffffffu, t.ll, o);
    y.wm = __shfl_xor_sync(0xffffffffu, t.wm, o);
    y.ws = __shfl_xor_sync(0xffffffffu, t.ws, o);
    y.n = __shfl_xor_sync(0xffffffffu, t.n, o);
    y.ninf = __shfl_xor_sync(0xffffffffu, t.ninf, o);
    t = ft_merge(t, y, c2);
  }
  if ((threadIdx.x & 31) == 0) sh.wpart[threadIdx.x >> 5] = t;
  __syncthreads();
  if (threadIdx.x == 0) {
    ft_part a = sh.wpart[0];
    for (int w = 1; w < FT_WARPS; w++) a = ft_merge(a, sh.wpart[w], c2);
    sh.mine = a;
  }
  __syncthreads();
}

/* The row's pass 1 from every slice's sh.mine (ft_block_part's): merged in
** rank order by each CTA's thread 0, so that every CTA has the same bits. */
__device__ __forceinline__ ft_part ft_row_part(ft_shared &sh, unsigned cs, float c2) {
  if (cs == 1u) return sh.mine;
  ft_csync();
  if (threadIdx.x == 0) {
    ft_part a = *ft_peer(&sh.mine, 0u);
    for (unsigned r = 1; r < cs; r++) a = ft_merge(a, *ft_peer(&sh.mine, r), c2);
    sh.row = a;
  }
  ft_csync(); /* the peers have read this CTA's part; sh.row is seen */
  return sh.row;
}

/* A raw logit as a log-sum-exp term: +inf as NaN, as the fused kernels
** take it (the row's log-sum-exp is then NaN). */
__device__ __forceinline__ float ft_lse_term(float z) {
  return z == -FT_NINF ? __int_as_float(0x7fffffff) : z;
}

/* A running log-sum-exp (m, l), merged: the fused kernels' fs_lse rules
** (fs_device.h: -inf adds nothing, NaN makes l NaN). */
__device__ __forceinline__ void ft_lse_add(float &m, float &l, float z) {
  if (z > m) {
    l = l * __expf(m - z) + 1.0f;
    m = z;
  } else if (z != FT_NINF) {
    l += __expf(z - m); /* NaN stays NaN */
  }
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

/* One row of the staged logits, or the float4s [q0, q1) of it (a slice). */
struct ft_row {
  const float *z;
  int b, q0, q1;
};

/* Calls f(v, z, allowed) for every token v of the row's float4s [q0, q1),
** the threads taking four consecutive tokens a float4 (the row is 16-byte
** aligned and padded to whole float4s), FT_UNROLL float4s of each thread in
** flight before any is used (one at a time, the passes were bound by L2's
** latency), and with FT_PIPE the next FT_UNROLL in flight while these are
** used. */
template <bool PIPE = (FT_PIPE != 0), typename F>
__device__ __forceinline__ void ft_scan(const fs_params &p, const ft_row &r, F f) {
  const float4 *z4 = (const float4 *)r.z;
  const int vend = min(p.V, 4 * r.q1); /* the slice's tokens end here */
  float4 q[FT_UNROLL];
  unsigned allow[FT_UNROLL];
  auto load = [&](int i0) {
#pragma unroll
    for (int u = 0; u < FT_UNROLL; u++) {
      const int i = i0 + u * FT_THREADS;
      q[u] = i < r.q1 ? __ldcg(z4 + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      allow[u] = !p.mask || i >= r.q1
                     ? 0xfu
                     : fs_mask_bits_n(p, r.b, (unsigned)(p.vocab_offset + 4 * i), 4u);
    }
  };
  if (PIPE) load(r.q0 + (int)threadIdx.x);
  for (int i0 = r.q0 + (int)threadIdx.x; i0 < r.q1; i0 += FT_THREADS * FT_UNROLL) {
    float4 c[FT_UNROLL];
    unsigned a[FT_UNROLL];
    if (!PIPE) load(i0);
#pragma unroll
    for (int u = 0; u < FT_UNROLL; u++) c[u] = q[u], a[u] = allow[u];
    /* PIPE: the next float4s in flight while these are used */
    if (PIPE && i0 + FT_THREADS * FT_UNROLL < r.q1) load(i0 + FT_THREADS * FT_UNROLL);
#pragma unroll
    for (int u = 0; u < FT_UNROLL; u++) {
      const int v = 4 * (i0 + u * FT_THREADS);
      const float zz[4] = {c[u].x, c[u].y, c[u].z, c[u].w};
#pragma unroll
      for (int e = 0; e < 4; e++) /* one compare a token, as in 0.3.4 */
        if (v + e < vend) f(v + e, zz[e], (a[u] >> e & 1u) != 0u);
    }
  }
}

/* Calls f(z, v) for every element of the gathered set. */
template <typename F>
__device__ __forceinline__ void ft_scan_kept(const ft_shared &sh, F f) {
  for (int i = threadIdx.x; i < (int)sh.nk; i += FT_THREADS) f(sh.kz[i], sh.kv[i]);
}

/* Top-p's weight of a logit z: 2^((z - zmax) c2) in 64-bit fixed point
** (2^32 for zmax), c2 = log2(e) / T; every mass of a row sums these, so that
** its value does not depend on the order of the additions. */
__device__ __forceinline__ unsigned long long ft_weight(float z, float zmax, float c2) {
  return __float2ull_rn(exp2f((z - zmax) * c2) * 4294967296.0f);
}

/* One pass of a selection: the histogram, into sh.h (counts, or with MASS
** the weights ft_weight), of digit(z) (a bin below nb; ~0u leaves z out)
** over the elements of the set S (given by scan, which calls its argument
** g(z) for each).  Every thread calls it; sh.h is seen on return. */
template <bool MASS, typename Scan, typename Digit>
__device__ void ft_hist(Scan scan, float zmax, float c2, Digit digit, unsigned nb,
                        ft_shared &sh) {
  for (unsigned i = threadIdx.x; i < nb; i += FT_THREADS) {
    if (MASS) sh.h.mass[i] = 0ull;
    else sh.h.cnt[i] = 0u;
  }
  __syncthreads();
  scan([&](float z) {
    const unsigned d = digit(z);
    if (d == ~0u) return;
    if (MASS) {
      /* a weight of 0 adds nothing (a peaked row's tail) */
      const unsigned long long w = ft_weight(z, zmax, c2);
      if (w) atomicAdd(&sh.h.mass[d], w);
    } else {
      atomicAdd(&sh.h.cnt[d], 1u);
    }
  });
  __syncthreads();
}

/* The radix's digit of z: (key >> shift) & (nb - 1) where z's key has
** `prefix` in the bits `fixed`, else ~0u. */
struct ft_radix {
  unsigned prefix, fixed, nb;
  int shift;
  __device__ __forceinline__ unsigned operator()(float z) const {
    const unsigned k = ft_key(z);
    return (k & fixed) == prefix ? (k >> shift) & (nb - 1u) : ~0u;
  }
};

/* Top-p's value digit of z <= zmax: 2047 for the bin of zmax, each bin
** 1 / inv_w wide below it, the last one (0) holding the rest; monotone in
** z, and the same on every rank for the same z. */
__device__ __forceinline__ unsigned ft_vdigit(float z, float zmax, float inv_w) {
  const float t = (zmax - z) * inv_w;
  return 2047u - (t < 2047.0f ? (unsigned)t : 2047u);
}

/* 1 / the width of top-p's value bins: 2047 of them from zmax down to
** where the weights round to 0 (z < zmax - 33 / c2) or to the threshold t;
** 0 (one bin) where that span is not a number above 0 (T = +inf weighs all
** alike).  Value bins, not the key's top bits, make top-p's first digit:
** most of a flat row's logits share a few of the key's 2048 bins, and the
** 64-bit shared atomics on them queue (perf-notes 37c, 38a). */
__device__ __forceinline__ float ft_vscale(float zmax, float t, float c2) {
  const float span = zmax - fmaxf(t, zmax - 33.0f / c2);
  const float iw = span > 0.0f && span < -FT_NINF ? 2047.0f / span : 0.0f;
  return iw < -FT_NINF ? iw : 0.0f;
}

/* The digit of a histogram of nb bins in sh.h (counts, or with MASS the
** masses) at which the sum from the top bin down, plus `above` (what the
** keys above the histogram's hold), first reaches target: into
** sh.sel_digit, and the sum of the bins above it plus `above` into
** sh.sel_above.  The thread whose bins hold the crossing writes them;
** where the sum falls short of target (it cannot while the sums are exact:
** target is at most the set's total), digit 0 and `above`, so that every
** rank of a tensor-parallel call still takes the same digit.  Every thread
** calls it; both are seen on return. */
template <bool MASS>
__device__ void ft_cross(unsigned nb, unsigned long long above, unsigned long long target,
                         ft_shared &sh) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (tid == 0) { /* before the barrier below, after which a crossing is written */
    sh.sel_digit = 0u;
    sh.sel_above = above;
  }
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
}

/* Top-p's target: ceil(p x total), at least 1 (the mass from the largest
** logit down that the kept set reaches). */
__device__ __forceinline__ unsigned long long ft_target(float tp, unsigned long long total) {
  const double want = ceil((double)tp * (double)total);
  return want < 1.0 ? 1ull : (unsigned long long)want;
}

/* The radix selection's passes: 11, 11 and 10 bits. */
__device__ __forceinline__ int ft_shift(int pass) { return pass == 0 ? 21 : pass == 1 ? 10 : 0; }
__device__ __forceinline__ unsigned ft_nbins(int pass) { return pass == 2 ? 1024u : 2048u; }

/* A digit and what the elements above it hold (ft_cross's). */
struct ft_crossing {
  unsigned digit;
  unsigned long long above, target;
};

/* The slices' histograms h[0, nb) of a cluster of cs CTAs summed into rank
** 0's: CTA r sums bins r, r + cs, r + 2 cs, ... over every CTA (four
** independent loads in flight a thread) and stores the sums there.
** Bin i is read and written by its CTA alone; the caller's cluster barriers
** order it after the histograms and before anything reads rank 0's. */
template <typename T>
__device__ __forceinline__ void ft_csum_bins(T *h, unsigned nb, unsigned cs) {
  for (unsigned i = ft_rank() + threadIdx.x * cs; i < nb; i += FT_THREADS * cs) {
    T s = 0;
#pragma unroll 4
    for (unsigned r = 0; r < cs; r++) s += *ft_peer(&h[i], r);
    *ft_peer(&h[i], 0u) = s;
  }
}

/* One pass of a selection over the row's cluster of cs CTAs, each of whose
** scan gives its slice's elements: the slices' histograms (ft_hist) summed
** into rank 0's, its crossing (ft_cross, from `above` to target; with tp >
** 0 the target is top-p's of the bins' total, ft_target) returned with the
** target to every thread of every CTA.  With cs 1 the block's alone. */
template <bool MASS, typename Scan, typename Digit>
__device__ ft_crossing ft_cpass(Scan scan, float zmax, float c2, Digit digit, unsigned nb,
                                unsigned long long above, unsigned long long target,
                                ft_shared &sh, unsigned cs, float tp = 0.0f) {
  ft_hist<MASS>(scan, zmax, c2, digit, nb, sh);
  const bool lead = cs == 1u || ft_rank() == 0u;
  if (cs > 1u) {
    ft_csync(); /* every slice's histogram is complete */
    if (MASS) ft_csum_bins(sh.h.mass, nb, cs);
    else ft_csum_bins(sh.h.cnt, nb, cs);
    ft_csync(); /* rank 0 holds the row's histogram; every peer's is read */
  }
  if (lead) {
    if (tp > 0.0f) {
      unsigned long long t = 0ull;
      for (unsigned i = threadIdx.x; i < nb; i += FT_THREADS) t += MASS ? sh.h.mass[i] : sh.h.cnt[i];
      target = ft_target(tp, ft_sum(t, sh));
    }
    if (threadIdx.x == 0) sh.sel_target = target;
    ft_cross<MASS>(nb, above, target, sh);
  }
  if (cs == 1u) return {sh.sel_digit, sh.sel_above, target};
  /* rank 0's crossing is seen; its next one is written after the next
  ** pass's first cluster barrier, which no CTA passes before reading this */
  ft_csync();
  return {*ft_peer(&sh.sel_digit, 0u), *ft_peer(&sh.sel_above, 0u), *ft_peer(&sh.sel_target, 0u)};
}

/* The key of the set S's elements (given by scan, which calls its argument
** g(z) for each; over a cluster of cs CTAs, each its slice's) at which the
** count (MASS false) or the weight (MASS true) summed from the largest key
** down, plus `above` (what lies above S), first reaches target (1 <= target
** - above <= S's total).  Three passes of a radix selection (ft_cpass):
** each histograms the digit below the bits fixed so far, over the elements
** whose key has them, and fixes the digit where the sum crosses target. */
template <bool MASS, typename Scan>
__device__ unsigned ft_select(Scan scan, float zmax, float c2, unsigned long long target,
                              unsigned long long above, ft_shared &sh, unsigned cs) {
  ft_radix d = {0u, 0u, 0u, 0};
#pragma unroll 1
  for (int pass = 0; pass < 3; pass++) {
    d.shift = ft_shift(pass);
    d.nb = ft_nbins(pass);
    const ft_crossing x = ft_cpass<MASS>(scan, zmax, c2, d, d.nb, above, target, sh, cs);
    d.prefix |= x.digit << d.shift;
    d.fixed |= (d.nb - 1u) << d.shift;
    above = x.above;
  }
  return d.prefix;
}

/* Token v's score for sample s, as the fused kernels score it, and its key. */
__device__ __forceinline__ unsigned long long ft_score_key(const fs_params &p, const fs_col &c,
                                                           int v, float z, int s) {
  const unsigned tok = (unsigned)(p.vocab_offset + v);
  float sc = z;
  if (!c.greedy) {
    const fs_philox_out q = fs_noise_quad(c.seed, c.off, tok >> 2, (unsigned)s, c.tag);
    const unsigned j = tok & 3u;
    const unsigned x = j == 0 ? q.v[0] : j == 1 ? q.v[1] : j == 2 ? q.v[2] : q.v[3];
    sc = fmaf(z, c.inv_t, fs_gumbel_fast(x));
  }
  return fs_pack_key(sc, tok);
}

/* Thread 0 writes item (row, s) of the winner `best` (its logit z). */
__device__ __forceinline__ void ft_put(const fs_params &p, int b, int s, unsigned long long best,
                                       float z, float lse) {
  const size_t item = (size_t)b * p.num_samples + s;
  p.tokens[item] = (int)fs_key_token(best);
  if (p.logits) p.logits[item] = z;
  if (p.keys) p.keys[item] = best;
  if (p.logprobs) p.logprobs[item] = z - lse;
}

/* A logit bias with the filters (fsamp_filter_bias ran first): the row's
** entries' global ids and the raw logits they had before it. */
struct ft_bias {
  const int *tokens; /* [B, count] */
  const float *raw;  /* [B, count]: the entry's token's raw logit (in this call's ids) */
  int count;         /* 0: no bias */
};

/* The raw logit of token tok of row b, whose zout value is z (biased where
** an entry names it): every thread calls it, thread 0's result counts. */
__device__ __forceinline__ float ft_bias_raw(const ft_bias &x, int b, unsigned tok, float z,
                                             ft_shared &sh) {
  if (x.count == 0) return z;
  if (threadIdx.x == 0) sh.bias_at = 0xffffffffu;
  __syncthreads();
  const int *t = x.tokens + (size_t)b * x.count;
  for (int j = (int)threadIdx.x; j < x.count; j += FT_THREADS)
    if ((unsigned)t[j] == tok) atomicMin(&sh.bias_at, (unsigned)j);
  __syncthreads();
  const unsigned j = sh.bias_at;
  __syncthreads(); /* read before the next call's store */
  return j < (unsigned)x.count ? x.raw[(size_t)b * x.count + j] : z;
}

/* This thread's best key of sample smp over the tokens that scan gives
** (it calls its argument f(v, z, ok) for each) that are kept (ok, a number
** and z >= t) or with all every token (masked ones at -inf), as
** ft_score_key scores them, one Philox call per quad of ids in a row. */
template <typename Scan>
__device__ __forceinline__ unsigned long long ft_best(Scan scan, const fs_params &p,
                                                      const fs_col &c, int smp, float t,
                                                      bool all) {
  unsigned long long best = 0ull;
  unsigned quad = 0xffffffffu;
  fs_philox_out q = {{0u, 0u, 0u, 0u}};
  scan([&](int v, float z, bool ok) {
    if (all) {
      if (!ok) z = FS_MASKED_LOGIT;
    } else if (!(ok && z != FT_NINF && z >= t)) {
      return;
    }
    const unsigned tok = (unsigned)(p.vocab_offset + v);
    float sc = z;
    if (!c.greedy) {
      if (tok >> 2 != quad) {
        quad = tok >> 2;
        q = fs_noise_quad(c.seed, c.off, quad, (unsigned)smp, c.tag);
      }
      const unsigned j = tok & 3u;
      const unsigned x = j == 0 ? q.v[0] : j == 1 ? q.v[1] : j == 2 ? q.v[2] : q.v[3];
      sc = fmaf(z, c.inv_t, fs_gumbel_fast(x));
    }
    const unsigned long long k = fs_pack_key(sc, tok);
    best = k > best ? k : best;
  });
  return best;
}

/* The row's draw of sample s over every token (ft_best), as the fused
** kernels draw it, each CTA of the row's cluster of cs over its slice r. */
__device__ void ft_draw_all(const fs_params &p, const ft_row &r, const fs_col &c, int s,
                            float lse, const ft_bias &bias, ft_shared &sh, unsigned cs) {
  const unsigned long long best = ft_creduce<true>(
      ft_best([&](auto f) { ft_scan<false>(p, r, f); }, p, c, s, 0.0f, true), sh, cs);
  const unsigned tok = fs_key_token(best);
  const float z0 = __ldcg(r.z + (int)(tok - (unsigned)p.vocab_offset));
  const float z = ft_bias_raw(bias, r.b, tok, z0, sh);
  if (threadIdx.x == 0 && ft_rank() == 0u) {
    const bool ok = !p.mask || (fs_mask_bits_n(p, r.b, tok, 1u) & 1u);
    ft_put(p, r.b, s, best, ok ? z : FS_MASKED_LOGIT, lse);
  }
}

/* Row b's filters (flashsampling.h's per-row rules): min-p, top-k and
** top-p values, which are on, and T. */
struct ft_rowf {
  float mp, tp, T;
  int k;
  bool on_m, on_p;
};
__device__ __forceinline__ ft_rowf ft_row_filters(const fs_params &p, const fs_filter &f,
                                                  const fs_col &c, int b) {
  ft_rowf r;
  r.mp = f.min_ps ? f.min_ps[b] : f.min_p;
  r.k = f.top_ks ? f.top_ks[b] : f.top_k;
  r.tp = f.top_ps ? f.top_ps[b] : f.top_p;
  r.T = p.temperatures ? p.temperatures[b] : p.temperature;
  r.on_m = r.mp > 0.0f;
  r.on_p = r.tp > 0.0f && r.tp < 1.0f && !c.greedy;
  return r;
}

/* min-p's threshold z >= z_max + T ln(min_p) (T = +inf weighs all alike: a
** NaN threshold keeps all), -inf where min-p is off. */
__device__ __forceinline__ float ft_minp_tau(const ft_rowf &r, float zmax) {
  const float t = r.on_m ? zmax + r.T * logf(fminf(r.mp, 1.0f)) : FT_NINF;
  return t == t ? t : FT_NINF;
}

/* The larger of two keys. */
__device__ __forceinline__ unsigned long long ft_hi(unsigned long long x, unsigned long long y) {
  return x > y ? x : y;
}

/* x or y, for the lower of a compare-exchange pair in a descending run
** (up) the larger, else the smaller.  Where x == y the smaller side takes
** y: the multiset is kept for distinct keys and for floats as numbers (a
** -0 and +0 pair may come out as two of one; no caller tells them apart). */
template <typename T>
__device__ __forceinline__ T ft_cx(T x, T y, bool up) {
  return (y > x) == up ? y : x;
}

/* x, one per thread, sorted into descending order (no NaN) in a[0 ..
** FT_THREADS): a bitonic sort, its exchanges within a warp by shuffles
** (unrolled: each one's partner and direction constants but for the run's
** bit, perf-notes 44), the wider ones through a and spare (FT_THREADS
** elements each) in turn, one barrier each.  Every thread calls it. */
template <typename T>
__device__ __forceinline__ void ft_sort_desc(T x, T *a, T *spare) {
  const unsigned i = threadIdx.x;
#pragma unroll
  for (unsigned k = 2; k <= 32u; k <<= 1) /* each warp's runs of up to 32 */
#pragma unroll
    for (unsigned j = k >> 1; j > 0; j >>= 1)
      x = ft_cx(x, __shfl_xor_sync(0xffffffffu, x, (int)j), ((i & j) == 0u) == ((i & k) == 0u));
  bool t = false;
#pragma unroll 1
  for (unsigned k = 64; k <= FT_THREADS; k <<= 1) {
    const bool lo = (i & k) == 0u; /* a descending run */
#pragma unroll 1
    for (unsigned j = k >> 1; j >= 32u; j >>= 1) {
      T *buf = t ? spare : a;
      buf[i] = x;
      __syncthreads();
      const T y = buf[i ^ j];
      t = !t; /* the next wide exchange writes the other buffer */
      x = ft_cx(x, y, ((i & j) == 0u) == lo);
    }
#pragma unroll
    for (unsigned j = 16; j > 0; j >>= 1)
      x = ft_cx(x, __shfl_xor_sync(0xffffffffu, x, (int)j), ((i & j) == 0u) == lo);
  }
  __syncthreads(); /* every wide exchange's reads are done */
  a[i] = x;
  __syncthreads();
}

/* ft_sort_desc with every step in one rolled loop: fewer registers, more
** instructions (fsamp_filter's sorts and fsamp_toplp's cuts, whose kernels
** would spill, and ft_tbound's where FT_TROLLED). */
template <typename T>
__device__ __forceinline__ void ft_sort_desc_rolled(T x, T *a, T *spare) {
  const unsigned i = threadIdx.x;
  bool t = false;
#pragma unroll 1
  for (unsigned k = 2; k <= FT_THREADS; k <<= 1)
#pragma unroll 1
    for (unsigned j = k >> 1; j > 0; j >>= 1) {
      T y;
      if (j < 32u) {
        y = __shfl_xor_sync(0xffffffffu, x, (int)j);
      } else {
        T *buf = t ? spare : a;
        buf[i] = x;
        __syncthreads();
        y = buf[i ^ j];
        t = !t;
      }
      x = ft_cx(x, y, ((i & j) == 0u) == ((i & k) == 0u));
    }
  __syncthreads();
  a[i] = x;
  __syncthreads();
}

/* The block's inclusive prefix sum of x in thread order. */
__device__ __forceinline__ float ft_scan_sum(float x, ft_shared &sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    const float y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) sh.f2[warp] = x;
  __syncthreads();
  for (int w = 0; w < warp; w++) x += sh.f2[w];
  __syncthreads();
  return x;
}

extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_MINB)
    fsamp_filter(const fs_params p, const fs_filter f, const ft_bias bias, const float *lse_in) {
  __shared__ ft_shared sh;
  /* grid (cs, B): the row's cluster of cs CTAs, this CTA its slice */
  const unsigned cs = ft_ncta(), rank = ft_rank();
  const int b = (int)blockIdx.y, nq = (p.V + 3) / 4;
  const float *zrow = p.zout + (long long)b * p.zout_stride;
  const ft_row r = {zrow, b, (int)((long long)nq * rank / cs),
                    (int)((long long)nq * (rank + 1u) / cs)};
  const fs_col c = fs_col_load(p, b);
  const ft_rowf rf = ft_row_filters(p, f, c, b);
  const int k = rf.k;
  const float tp = rf.tp;
  const bool on_m = rf.on_m, on_p = rf.on_p;
  const float c2 = c.inv_t * 1.4426950408889634f;
  if (threadIdx.x == 0) sh.nk = 0u; /* rank 0's count the row's (the first cluster barrier
                                      ** orders it before the peers' adds) */

  /* 1. the candidates' max, count and (top-p) mass; with logprobs the raw
  ** logits' log-sum-exp (NaN with a NaN or +inf logit, as the fused
  ** kernels'); each a running value per thread, merged over the block,
  ** then over the cluster */
  float tmax = FT_NINF, lm = FT_NINF, ll = 0.0f, wm = FT_NINF, ws = 0.0f;
  unsigned n = 0u, ninf = 0u;
  const bool lp = p.logprobs != nullptr && !lse_in; /* else fsamp_filter_bias's */
  ft_scan(p, r, [&](int, float z, bool ok) {
    if (lp) ft_lse_add(lm, ll, ft_lse_term(z));
    if (ok && z > FT_NINF) {
      tmax = fmaxf(tmax, z);
      n++;
      ninf += z == -FT_NINF;
      if (on_p) { /* sum of 2^((z - wm) c2) */
        if (z > wm) ws = ws * exp2f((wm - z) * c2) + 1.0f, wm = z;
        else ws += exp2f((z - wm) * c2);
      }
    }
  });
  ft_block_part({tmax, lm, ll, wm, ws, n, ninf}, sh, c2); /* into sh.mine */
  const ft_part row = ft_row_part(sh, cs, c2);
  const float zmax = row.tmax;
  const float lse = lse_in ? lse_in[b] : lp ? row.lm + logf(row.ll) : 0.0f;

  const bool all = c.greedy || row.n == 0u ||
                   (!on_m && !on_p && (k <= 0 || (unsigned)k >= row.n));
  if (all) { /* the draw without filters (a greedy row's samples are all the same) */
    for (int s = 0; s < (c.greedy ? 1 : p.num_samples); s++)
      ft_draw_all(p, r, c, s, lse, bias, sh, cs);
    if (c.greedy && threadIdx.x == 0 && rank == 0u) /* thread 0 wrote sample 0 */
      for (int s = 1; s < p.num_samples; s++) {
        const size_t i0 = (size_t)b * p.num_samples, item = i0 + s;
        p.tokens[item] = p.tokens[i0];
        if (p.logits) p.logits[item] = p.logits[i0];
        if (p.keys) p.keys[item] = p.keys[i0];
        if (p.logprobs) p.logprobs[item] = p.logprobs[i0];
      }
    return;
  }
  const bool on_k = k > 0, ninf_ = row.ninf != 0u;
  float tau, lo;
  if (ninf_) {
    tau = lo = -FT_NINF; /* the +inf candidates hold all the mass */
  } else {
    /* 2. min-p */
    tau = lo = ft_minp_tau(rf, zmax);
    /* Lower bounds of the final threshold from the threads' maxima, which
    ** are distinct candidates: top-k's is the k-th largest of them (k of
    ** them lie at or above it); top-p's (without top-k, whose set it would
    ** have to be renormalised over) the least of the largest ones whose
    ** masses, in fp32 with a 0.1% margin, already reach p of the row's.
    ** A cluster's CTAs each sort their FT_THREADS maxima and give rank 0
    ** their largest FT_THREADS / cs, from which it takes the bounds.
    ** Everything at or above the bound fits in shared memory for typical k
    ** and peaked rows: one pass gathers it. */
    if ((on_k && k <= FT_THREADS) || (on_p && !on_k)) {
      ft_sort_desc_rolled(tmax, sh.kz, sh.lz);
      float *top = sh.kz;
      if (cs > 1u) {
        const unsigned per = FT_THREADS / cs;
        if (threadIdx.x < per) *ft_peer(&sh.mx[rank * per + threadIdx.x], 0u) = sh.kz[threadIdx.x];
        ft_csync();
        if (rank == 0u) ft_sort_desc_rolled(sh.mx[threadIdx.x], sh.mx, sh.lz);
        top = sh.mx;
      }
      if (rank == 0u) {
        float bound = FT_NINF;
        if (on_k) {
          bound = top[k - 1];
        } else {
          /* the thread maxima's masses from the largest down, against the row's */
          const float mine = top[threadIdx.x], want = tp * 1.001f;
          const float row_w = row.ws * exp2f((row.wm - zmax) * c2);
          const float cum = ft_scan_sum(mine > FT_NINF ? exp2f((mine - zmax) * c2) : 0.0f, sh);
          if (threadIdx.x == 0) sh.first = FT_THREADS;
          __syncthreads();
          if (cum >= want * row_w) atomicMin(&sh.first, threadIdx.x); /* the first to reach it */
          __syncthreads();
          if (sh.first < FT_THREADS) bound = top[sh.first];
        }
        if (threadIdx.x == 0) sh.bound = bound;
      }
      if (cs > 1u) ft_csync(); /* rank 0's bound is seen */
      else __syncthreads();
      lo = fmaxf(lo, *ft_peer(&sh.bound, 0u));
    }
  }
  /* the candidates at or above lo into rank 0's shared memory, where they
  ** fit (each slice's staged in its own CTA first, then copied over); with
  ** top-p and no top-k (s1), the fixed-point masses of min-p's survivors
  ** (mrow) and of those gathered (hrow), from which every CTA sees whether
  ** the bound held */
  bool gathered = false;
  const bool s1 = on_p && !on_k && !ninf_;
  unsigned long long mrow = 0ull, hrow = 0ull;
  if (lo > FT_NINF && !FT_NO_GATHER) {
    float *gz = cs > 1u ? sh.lz : sh.kz;
    int *gv = cs > 1u ? sh.lv : sh.kv;
    const unsigned cap = cs > 1u ? FT_LCAP : FT_CAP;
    unsigned *cnt = cs > 1u ? &sh.ln : &sh.nk; /* one CTA a row: its count is the row's */
    if (threadIdx.x == 0) *cnt = 0u;
    __syncthreads();
    const float tm = tau;
    unsigned long long m = 0ull, mh = 0ull;
    ft_scan(p, r, [&](int v, float z, bool ok) {
      if (!(ok && z != FT_NINF)) return;
      if (s1 && z >= tm) {
        const unsigned long long w = ft_weight(z, zmax, c2);
        m += w;
        if (z >= lo) mh += w;
      }
      if (!(z >= lo)) return;
      const unsigned i = atomicAdd(cnt, 1u);
      if (i < cap) gz[i] = z, gv[i] = v;
    });
    if (s1) {
      m = ft_sum(m, sh);
      mh = ft_sum(mh, sh);
    }
    __syncthreads();
    const unsigned ln = *cnt;
    unsigned nrow = ln; /* the row's count, as every CTA sees it */
    mrow = m;
    hrow = mh;
    if (cs > 1u) {
      if (threadIdx.x == 0) {
        /* a slice that overflowed its stage overflows the row's */
        const unsigned add = ln <= FT_LCAP ? ln : FT_CAP + 1u;
        sh.off = atomicAdd(ft_peer(&sh.nk, 0u), add);
        for (unsigned q = 0; q < cs; q++) {
          *ft_peer(&sh.cnts[rank], q) = add;
          *ft_peer(&sh.s1m[rank], q) = m;
          *ft_peer(&sh.s1h[rank], q) = mh;
        }
      }
      __syncthreads();
      const unsigned off = sh.off;
      if (ln <= FT_LCAP && off + ln <= FT_CAP) {
        float *kz0 = ft_peer(sh.kz, 0u);
        int *kv0 = ft_peer(sh.kv, 0u);
        for (unsigned i = threadIdx.x; i < ln; i += FT_THREADS) {
          kz0[off + i] = gz[i];
          kv0[off + i] = gv[i];
        }
      }
      ft_csync(); /* rank 0 has the row's set, every CTA the slices' counts */
      nrow = 0u;
      mrow = hrow = 0ull;
      for (unsigned q = 0; q < cs; q++) {
        nrow += sh.cnts[q];
        mrow += sh.s1m[q];
        hrow += sh.s1h[q];
      }
    }
    gathered = nrow <= FT_CAP;
    /* top-p's target from min-p's survivors' mass; the bound missed where
    ** the gathered fall short of it (it cannot: a 0.1% margin): the long way */
    if (s1 && ft_target(tp, mrow) > hrow) gathered = false;
  }
  /* rank 0 alone: the gathered set; the peers have read its bound (before
  ** the gather's cluster barrier) and read nothing of it any more */
  if (gathered && rank != 0u) return;
  if (gathered && !ninf_) {
    /* 3. top-k: where lo is its bound, k of the gathered lie at or above it */
    const unsigned nk = sh.nk;
    auto kept = [&](auto g) { ft_scan_kept(sh, [&](float z, int) { g(z); }); };
    if (on_k && (lo > tau || (unsigned)k < nk))
      tau = fmaxf(tau, ft_unkey(ft_select<false>(kept, zmax, 0.0f, (unsigned long long)k, 0ull,
                                                 sh, 1u)));
    /* 4. top-p over what is left: its mass is min-p's survivors' (s1) or,
    ** with top-k, the gathered ones above tau */
    if (on_p) {
      const float t0 = tau;
      unsigned long long total = mrow;
      if (!s1) {
        unsigned long long m = 0ull;
        ft_scan_kept(sh, [&](float z, int) {
          if (z >= t0) m += ft_weight(z, zmax, c2);
        });
        total = ft_sum(m, sh);
      }
      auto above = [&](auto g) {
        ft_scan_kept(sh, [&](float z, int) {
          if (z >= t0) g(z);
        });
      };
      tau = ft_unkey(ft_select<true>(above, zmax, c2, ft_target(tp, total), 0ull, sh, 1u));
    }
  }
  if (!gathered && !ninf_) { /* the long way: passes over the row */
    const float t0 = tau;
    auto over = [&](auto g) {
      ft_scan(p, r, [&](int, float z, bool ok) {
        if (ok && z >= t0 && z != FT_NINF) g(z);
      });
    };
    if (on_k) {
      unsigned long long m = 0ull;
      over([&](float) { m++; });
      if ((unsigned long long)k < ft_creduce<false>(m, sh, cs))
        tau = ft_unkey(ft_select<false>(over, zmax, 0.0f, (unsigned long long)k, 0ull, sh, cs));
    }
    if (on_p) {
      const float t1 = tau;
      auto over1 = [&](auto g) {
        ft_scan<false>(p, r, [&](int, float z, bool ok) {
          if (ok && z >= t1 && z != FT_NINF) g(z);
        });
      };
      /* the value bin (ft_vscale) where the mass crosses top-p's target
      ** (from the bins' total), then the radix's passes within it: the
      ** first also gathers the bin's elements into each CTA's shared
      ** memory where they fit, which the other two then read (not with
      ** FT_NO_GATHER: its tests run the passes over the row) */
      const float iw = ft_vscale(zmax, t1, c2);
      const ft_crossing vb = ft_cpass<true>(
          over1, zmax, c2, [&](float z) { return ft_vdigit(z, zmax, iw); }, 2048u, 0ull, 0ull,
          sh, cs, tp);
      if (threadIdx.x == 0) sh.nk = 0u;
      __syncthreads();
      int scans = 0;
      auto in_bin = [&](auto g) {
        if (scans++ > 0 && !FT_NO_GATHER && sh.nk <= FT_CAP) {
          ft_scan_kept(sh, [&](float z, int) { g(z); });
          return;
        }
        const bool first = scans == 1; /* gathers into the stage */
        over1([&](float z) {
          if (ft_vdigit(z, zmax, iw) != vb.digit) return;
          g(z);
          if (!first) return;
          const unsigned i = atomicAdd(&sh.nk, 1u);
          if (i < FT_CAP) sh.kz[i] = z;
        });
      };
      tau = ft_unkey(ft_select<true>(in_bin, zmax, c2, vb.target, vb.above, sh, cs));
    }
  }
  /* 5. the draws over z >= tau: the fused kernels' scores and noise (rank
  ** 0 over the gathered set, else the long way's CTAs over their slices) */
  for (int s = 0; s < p.num_samples; s++) {
    unsigned long long best = 0ull;
    const float t = tau;
    auto offer = [&](int v, float z) {
      if (!(z >= t)) return;
      const unsigned long long key = ft_score_key(p, c, v, z, s);
      best = key > best ? key : best;
    };
    if (gathered) {
      ft_scan_kept(sh, [&](float z, int v) { offer(v, z); });
    } else {
      ft_scan<false>(p, r, [&](int v, float z, bool ok) {
        if (ok && z != FT_NINF) offer(v, z);
      });
    }
    best = ft_creduce<true>(best, sh, gathered ? 1u : cs);
    const unsigned tok = fs_key_token(best);
    const float z0 = __ldcg(zrow + (int)(tok - (unsigned)p.vocab_offset));
    const float z = ft_bias_raw(bias, b, tok, z0, sh);
    if (threadIdx.x == 0 && rank == 0u) ft_put(p, b, s, best, z, lse);
  }
}

/* A logit bias with the filters (runtime/filter.c, before fsamp_filter), a
** CTA a row of the staged logits: with lse_out, the row's raw log-sum-exp
** as fsamp_filter's pass 1 takes it; then each entry's raw logit into raw
** (entries outside the call's ids: 0, never read), and each biased token's
** zout value becomes its score pen(z) + the sum of its values (pen the row's
** repetition penalty, fs_penalty.h; the sum in fp32, in entry order, as
** fsamp_bias.cu sums them), -inf where that is NaN (such a token ranks as
** -inf, flashsampling.h), written by its first entry.  distinct: the
** entries are fsamp_bias_dedup's (fsamp_bias.cu; any count up to
** FS_MAX_LOGIT_BIAS), each token once with its values summed, -1 elsewhere;
** else count <= FS_BIAS_SHORT (1024), whose entries fit sh.kv and sh.kz. */
extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_MINB)
    fsamp_filter_bias(const fs_params p, const int *tokens, const float *values, int count,
                      float *raw, float *lse_out, float rep, const float *reps, int distinct) {
  __shared__ ft_shared sh;
  const int b = (int)blockIdx.x;
  float *zrow = p.zout + (long long)b * p.zout_stride;
  if (lse_out) {
    fs_params q = p;
    q.mask = nullptr; /* raw: every token */
    const ft_row whole = {zrow, b, 0, (p.V + 3) / 4};
    float lm = FT_NINF, ll = 0.0f;
    ft_scan(q, whole, [&](int, float z, bool) {
      ft_lse_add(lm, ll, ft_lse_term(z));
    });
    ft_block_part({FT_NINF, lm, ll, FT_NINF, 0.0f, 0u, 0u}, sh, 0.0f); /* into sh.mine */
    if (threadIdx.x == 0) lse_out[b] = sh.mine.lm + logf(sh.mine.ll);
  }
  const int *tk = tokens + (size_t)b * count;
  const float *vl = values + (size_t)b * count;
  const float r = fs_rep(rep, reps, b);
  if (distinct) { /* a token once: its entry alone reads and writes its logit */
    __syncthreads(); /* the log-sum-exp's reads of zrow before any write */
    for (int j = (int)threadIdx.x; j < count; j += FT_THREADS) {
      const long long v = (long long)tk[j] - p.vocab_offset;
      if (v < 0 || v >= p.V) continue; /* -1: a pad, a repeat or another shard's id */
      const float z = __ldcg(zrow + v);
      raw[(size_t)b * count + j] = z;
      const float y = fs_pen(z, r) + vl[j];
      zrow[v] = y == y ? y : FT_NINF;
    }
    return;
  }
  for (int j = (int)threadIdx.x; j < count; j += FT_THREADS) {
    const int t = tk[j];
    const long long v = (long long)t - p.vocab_offset;
    sh.kv[j] = t;
    sh.kz[j] = vl[j];
    raw[(size_t)b * count + j] = v >= 0 && v < p.V ? __ldcg(zrow + v) : 0.0f;
  }
  __syncthreads(); /* every raw logit read before any is biased */
  for (int j = (int)threadIdx.x; j < count; j += FT_THREADS) {
    const int t = sh.kv[j];
    const long long v = (long long)t - p.vocab_offset;
    if (v < 0 || v >= p.V) continue;
    bool first = true;
    for (int i = 0; i < j && first; i++) first = sh.kv[i] != t;
    if (!first) continue;
    float sum = 0.0f;
    for (int i = j; i < count; i++)
      if (sh.kv[i] == t) sum += sh.kz[i];
    const float y = fs_pen(raw[(size_t)b * count + j], r) + sum;
    zrow[v] = y == y ? y : FT_NINF;
  }
}

/* ---- tensor parallelism (runtime/filter.c's fs_filter_tp, for tp.c) -----
** A rank holds its shard of each row; the thresholds need the whole row's
** order, which the ranks agree on through the call's all-reduces, every
** rank taking the same decisions from the same reduced values.  Each kernel
** takes a row over G CTAs (grid (G, B), each a slice of the shard's row):
**  fsamp_ftp_stats: the shard's candidates' largest logit and whether one
**    is +inf, as keys max-combined into st (zeroed first) whose max over
**    ranks (FS_REDUCE_MAX_U64) is the row's; with logprobs each slice's
**    raw log-sum-exp pair;
**  fsamp_ftp_round (one launch a pass, up to seven): the selections of
**    top-k (counts) and top-p (masses, weighed as fsamp_filter weighs them)
**    of fsamp_filter's steps 3 and 4, each launch taking the digit of the
**    previous pass from its histogram summed over the ranks and adding the
**    next digit's histogram of its slice into hout (zeroed first).  Top-k's
**    digits are the radix's (three passes); top-p's first is a bin of 2048
**    in value below the row's largest logit (most of a row's logits share
**    the few bins of the key's top 11 bits, and the 64-bit atomics on them
**    queued: 401 us at B = 256, perf-notes 37), then the radix's three
**    within that bin.  A bin's count or mass goes as 12-bit limbs in
**    floats, whose sums over G slices and R ranks are exact in any order
**    while G R <= 4096 (runtime/filter.c takes G <= 32, so R <= 128): the
**    sums are the integers one GPU's would be, and so are the thresholds
**    (every digit but the radix's last only narrows the set) and the draw;
**  fsamp_ftp_draw: the last digit, then each slice's best key of each
**    sample over its kept tokens (or every token, as fsamp_filter draws the
**    rows it leaves unfiltered), max-combined into lk (zeroed first); the
**    row's last CTA writes the winners' raw logits into ll and with
**    logprobs the shard's log-sum-exp key after the items (tp.c's layout),
**    which tp.c's key all-reduce and fsamp_finalize make the outputs.
** A row's state between launches is an ftp_state in the workspace, two of
** them a row (a launch reads one and its slice 0 writes the other). */
#define FTP_ALL 1u /* the draw over every token (fsamp_filter's `all` rows) */
#define FTP_K 2u   /* top-k's selection under way */
#define FTP_P 4u   /* top-p's selection under way */
#define FTP_INF 8u /* a +inf candidate: top-k's count only decides FTP_ALL */
#define FTP_M 16u  /* min-p is on (so no count of top-k's makes the row FTP_ALL) */
#define FTP_LISTED 32u /* top-k's round 0 listed the shard's tokens above a bound (ftp_list) */
#define FTP_LIMB 12 /* bits a limb */
#define FTP_CAP 4096 /* a row's list (runtime/filter.c's FTP_LIST_CAP) */

struct ftp_state {
  unsigned long long above, target; /* ft_cross's: the mass above the digits, the target */
  float tau, zmax;                  /* the threshold so far; the row's largest candidate */
  float inv_w;                      /* top-p's value bins: 1 / their width (0: one bin) */
  unsigned flags, prefix, fixed;    /* FTP_*; the radix's digits so far */
  unsigned vbin;                    /* top-p's value bin (its digit) */
  unsigned pad;
};
static_assert(sizeof(ftp_state) == 48, "runtime/filter.c's FTP_STATE_BYTES");

/* Round 0..2: top-k's radix passes (counts, two limbs); 3: top-p's value
** bins, 4..6 its radix passes (masses, five limbs: a slice's bin holds at
** most 2^24 tokens of weight <= 2^32).  The radix pass of a round. */
__device__ __forceinline__ bool ftp_is_k(int round) { return round < 3; }
__device__ __forceinline__ unsigned ftp_limbs(int round) { return round < 3 ? 2u : 5u; }
__device__ __forceinline__ int ftp_pass(int round) { return round < 3 ? round : round - 4; }

/* Top-k's list of a row (where FTP_LISTED): round 0 puts each of the
** shard's candidates at or above lo = max(tau, bound) in it, bound the
** largest over slices and ranks of a slice's k-th largest thread maximum
** (k tokens lie at or above it, so top-k's threshold does, when top-k
** selects at all); the later rounds and the draw then read the list
** instead of the row, every token they count or keep being in it: tokens
** below top-k's threshold cannot move a crossing above it.  n < 0 where the
** row has no list or this shard's overflowed FTP_CAP (each rank decides for
** its own shard: a list or the row give the same sums). */
struct ftp_list {
  const float2 *e; /* (token as int bits, z) */
  int n;
};

/* Slice blockIdx.x of gridDim.x of row blockIdx.y of the shard's logits. */
__device__ __forceinline__ ft_row ftp_slice(const fs_params &p) {
  const int b = (int)blockIdx.y, nq = (p.V + 3) / 4, G = (int)gridDim.x, g = (int)blockIdx.x;
  return {p.zout + (long long)b * p.zout_stride, b, (int)((long long)nq * g / G),
          (int)((long long)nq * (g + 1) / G)};
}

/* Calls f(v, z, ok) for the slice's tokens (ft_scan) or, with a list, for
** its share of the listed ones (ok true). */
template <typename F>
__device__ __forceinline__ void ftp_scan(const fs_params &p, const ft_row &r, const ftp_list &l,
                                         F f) {
  if (l.n < 0) {
    ft_scan(p, r, f);
    return;
  }
  const int G = (int)gridDim.x, g = (int)blockIdx.x;
  const int i1 = (int)((long long)l.n * (g + 1) / G);
  for (int i = (int)((long long)l.n * g / G) + (int)threadIdx.x; i < i1; i += FT_THREADS) {
    const float2 e = __ldcg(l.e + i);
    f(__float_as_int(e.x), e.y, true);
  }
}

/* Row b's list, where its state says it has one and this shard's fit. */
__device__ __forceinline__ ftp_list ftp_list_of(const ftp_state &s, const float2 *list,
                                               const unsigned *lcnt, int b) {
  ftp_list l = {list + (size_t)b * FTP_CAP, -1};
  if (s.flags & FTP_LISTED) {
    const unsigned n = __ldcg(lcnt + b);
    if (n <= FTP_CAP) l.n = (int)n;
  }
  return l;
}

/* Row b's state before its first round (or its draw): fsamp_filter's
** per-row rules, from the reduced largest logit and +inf flag at st. */
__device__ ftp_state ftp_init(const fs_params &p, const fs_filter &f, const fs_col &c,
                              const unsigned long long *st, int b) {
  ftp_state s;
  s.tau = FT_NINF;
  s.inv_w = 0.0f;
  s.flags = s.prefix = s.fixed = s.vbin = s.pad = 0u;
  s.above = s.target = 0ull;
  s.zmax = ft_unkey((unsigned)__ldcg(st + 3 * b));
  const bool ninf = __ldcg(st + 3 * b + 1) != 0ull;
  const ft_rowf rf = ft_row_filters(p, f, c, b);
  const int k = rf.k;
  const bool on_m = rf.on_m, on_p = rf.on_p;
  if (c.greedy || !(s.zmax > FT_NINF) || (!on_m && !on_p && k <= 0)) {
    s.flags = FTP_ALL;
  } else if (ninf) { /* the +inf candidates hold all the mass */
    if (!on_m && !on_p) s.flags = FTP_K | FTP_INF; /* unless k keeps every candidate */
    else s.tau = -FT_NINF;
  } else {
    s.tau = ft_minp_tau(rf, s.zmax);
    s.flags = (k > 0 ? FTP_K : 0u) | (on_p ? FTP_P : 0u) | (on_m ? FTP_M : 0u);
  }
  return s;
}

/* Row b's state after round `prev` (-1: none yet, ftp_init; else its state
** at sin and its histogram, summed over slices and ranks, at hist): the
** digit where the sum crosses the target (top-k: k; top-p: ceil(p x the
** mass of pass 0's histogram)), and after a selection's third pass its
** threshold.  Every thread of every CTA of the row calls it and gets the
** same state. */
__device__ ftp_state ftp_step(const fs_params &p, const fs_filter &f, const fs_col &c,
                              const unsigned long long *st, const float *hist,
                              const ftp_state *sin, int b, int prev, ft_shared &sh) {
  if (prev < 0) return ftp_init(p, f, c, st, b);
  ftp_state s = sin[b];
  const bool kph = ftp_is_k(prev);
  const unsigned fl = kph ? FTP_K : FTP_P;
  if (!(s.flags & fl)) return s;
  const bool vpass = prev == 3; /* top-p's value bins */
  const int pass = vpass ? 0 : ftp_pass(prev), shift = ft_shift(pass);
  const unsigned nb = vpass ? 2048u : ft_nbins(pass), L = ftp_limbs(prev);
  const float *h = hist + (size_t)b * nb * L;
  unsigned long long tot = 0ull;
  for (unsigned i = threadIdx.x; i < nb; i += FT_THREADS) {
    unsigned long long v = 0ull;
    for (unsigned l = 0; l < L; l++)
      v += (unsigned long long)__ldcg(h + l * nb + i) << (FTP_LIMB * l);
    sh.h.mass[i] = v;
    tot += v;
  }
  __syncthreads();
  if (prev == 0 || vpass) {
    tot = ft_sum(tot, sh);
    if (kph) {
      const int k = ft_row_filters(p, f, c, b).k;
      if ((unsigned long long)k >= tot) { /* k keeps every candidate above tau */
        s.flags &= ~(FTP_K | FTP_INF);
        if (!(s.flags & (FTP_P | FTP_M))) s.flags = FTP_ALL; /* no filter left */
        return s;
      }
      if (s.flags & FTP_INF) {
        s.tau = -FT_NINF;
        s.flags = 0u;
        return s;
      }
      s.target = (unsigned long long)k;
      if (k <= FT_THREADS && __ldcg(st + 3 * b + 2) != 0ull)
        s.flags |= FTP_LISTED; /* round 0 listed the tokens above the bound */
    } else {
      const float tp = ft_row_filters(p, f, c, b).tp;
      s.target = ft_target(tp, tot);
    }
  }
  ft_cross<true>(nb, s.above, s.target, sh);
  s.above = sh.sel_above;
  if (vpass) {
    s.vbin = sh.sel_digit;
    __syncthreads();
    return s;
  }
  s.prefix |= sh.sel_digit << shift;
  s.fixed |= (nb - 1u) << shift;
  __syncthreads();
  if (pass == 2) {
    s.tau = kph ? fmaxf(s.tau, ft_unkey(s.prefix)) : ft_unkey(s.prefix);
    s.flags &= ~fl;
    s.prefix = s.fixed = 0u;
    s.above = 0ull;
  }
  return s;
}

/* The slice's candidates' largest logit and +inf flag max-combined into
** st[3 b], st[3 b + 1] (zeroed before the launch), and where the row's k is
** 1..FT_THREADS the k-th largest of the threads' largest candidates (top-k's
** list bound, ftp_list) into st[3 b + 2], all as keys; with lsep (logprobs
** and no lse_in), the slice's raw log-sum-exp pair (m, l) at lsep[2 (b G +
** g)]. */
extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_MINB)
    fsamp_ftp_stats(const fs_params p, const fs_filter f, unsigned long long *st, float *lsep) {
  __shared__ ft_shared sh;
  const ft_row r = ftp_slice(p);
  float tmax = FT_NINF, lm = FT_NINF, ll = 0.0f;
  unsigned ninf = 0u;
  ft_scan(p, r, [&](int, float z, bool ok) {
    if (lsep) ft_lse_add(lm, ll, ft_lse_term(z));
    if (ok && z > FT_NINF) {
      tmax = fmaxf(tmax, z);
      ninf |= z == -FT_NINF;
    }
  });
  ft_block_part({tmax, lm, ll, FT_NINF, 0.0f, 0u, ninf}, sh, 0.0f); /* into sh.mine */
  const int k = f.top_ks ? f.top_ks[r.b] : f.top_k;
  if (k > 0 && k <= FT_THREADS) { /* block-uniform */
    ft_sort_desc_rolled(tmax, sh.kz, sh.lz);
    if (threadIdx.x == 0 && sh.kz[k - 1] > FT_NINF)
      atomicMax(st + 3 * r.b + 2, (unsigned long long)ft_key(sh.kz[k - 1]));
  }
  if (threadIdx.x == 0) {
    atomicMax(st + 3 * r.b, (unsigned long long)ft_key(sh.mine.tmax));
    if (sh.mine.ninf) atomicMax(st + 3 * r.b + 1, 1ull);
    if (lsep) {
      float *e = lsep + 2 * ((size_t)r.b * gridDim.x + blockIdx.x);
      e[0] = sh.mine.lm;
      e[1] = sh.mine.ll;
    }
  }
}

/* Round `next` (0..2: top-k's passes, 3..6: top-p's) of row blockIdx.y
** after round `prev` (ftp_step: its state at sin, its summed histogram at
** hin): the histogram of the slice's tokens above the threshold with the
** digits fixed so far, added bin d's limb l (12 bits of its count or mass,
** as a float) into hout[b nb L + l nb + d] (zeroed before the launch), and
** the row's state into sout by slice 0.  hin and hout, sin and sout are
** apart: other CTAs of the launch may still read the former. */
extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_MINB)
    fsamp_ftp_round(const fs_params p, const fs_filter f, const unsigned long long *st,
                    const float *hin, float *hout, const ftp_state *sin, ftp_state *sout,
                    int prev, int next, float2 *list, unsigned *lcnt) {
  __shared__ ft_shared sh;
  const ft_row r = ftp_slice(p);
  const int b = r.b;
  const fs_col c = fs_col_load(p, b);
  ftp_state s = ftp_step(p, f, c, st, hin, sin, b, prev, sh);
  const ftp_list l = ftp_list_of(s, list, lcnt, b);
  const bool kph = ftp_is_k(next);
  if (s.flags & (kph ? FTP_K : FTP_P)) {
    const int pass = next == 3 ? 0 : ftp_pass(next), shift = ft_shift(pass);
    const unsigned nb = next == 3 ? 2048u : ft_nbins(pass), L = ftp_limbs(next);
    const float t = s.tau, c2 = c.inv_t * 1.4426950408889634f;
    if (next == 3) { /* top-p's value bins (ft_vscale) */
      s.inv_w = ft_vscale(s.zmax, t, c2);
      const float zm = s.zmax, iw = s.inv_w;
      auto kept = [&](auto g) {
        ftp_scan(p, r, l, [&](int, float z, bool ok) {
          if (ok && z >= t && z != FT_NINF) g(z);
        });
      };
      ft_hist<true>(kept, zm, c2, [&](float z) { return ft_vdigit(z, zm, iw); }, nb, sh);
    } else {
      const float zm = s.zmax, iw = s.inv_w;
      const unsigned vb = s.vbin;
      /* round 0 lists the candidates at or above lo (ftp_list), where a
      ** slice had k candidates for a bound */
      const int k = ft_row_filters(p, f, c, b).k;
      const unsigned long long bk = __ldcg(st + 3 * b + 2);
      const bool gather = next == 0 && k <= FT_THREADS && bk != 0ull;
      const float lo = gather ? fmaxf(t, ft_unkey((unsigned)bk)) : 0.0f;
      float2 *le = list + (size_t)b * FTP_CAP;
      auto over = [&](auto g) {
        ftp_scan(p, r, l, [&](int v, float z, bool ok) {
          if (!(ok && z >= t && z != FT_NINF)) return;
          if (gather && z >= lo) {
            const unsigned i = atomicAdd(lcnt + b, 1u);
            if (i < FTP_CAP) le[i] = make_float2(__int_as_float(v), z);
          }
          if (kph || ft_vdigit(z, zm, iw) == vb) g(z);
        });
      };
      const ft_radix d = {s.prefix, s.fixed, nb, shift};
      if (kph) ft_hist<false>(over, s.zmax, 0.0f, d, nb, sh);
      else ft_hist<true>(over, s.zmax, c2, d, nb, sh);
    }
    float *h = hout + (size_t)b * nb * L;
    for (unsigned i = threadIdx.x; i < nb; i += FT_THREADS) {
      const unsigned long long v = kph ? sh.h.cnt[i] : sh.h.mass[i];
      if (v == 0ull) continue;
      for (unsigned l = 0; l < L; l++) {
        const unsigned x = (unsigned)(v >> (FTP_LIMB * l)) & ((1u << FTP_LIMB) - 1u);
        if (x) atomicAdd(h + l * nb + i, (float)x);
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) sout[b] = s;
}

/* After round `prev` (ftp_step; -1: none): each slice's best key of each
** sample of row blockIdx.y over its tokens z >= tau (FTP_ALL: over every
** token, masked ones at -inf) max-combined into lk[b S + s] (zeroed before
** the launch); the row's last CTA to finish (cnt[b], left 0 for the next
** call) then writes the winner's raw logit into ll[b S + s] (-inf where
** FTP_ALL drew a masked one; 0, with key 0, where the shard offers none),
** a greedy row's first sample over its others, and with lse_keys the
** shard's raw log-sum-exp (lse_in[b], else the slices' pairs at lsep) as
** fs_lse_key into lse_keys[b]. */
extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_MINB)
    fsamp_ftp_draw(const fs_params p, const fs_filter f, const ft_bias bias,
                   const unsigned long long *st, const float *hin, const ftp_state *sin,
                   int prev, unsigned long long *lk, float *ll, unsigned *cnt,
                   const float *lse_in, const float *lsep, unsigned long long *lse_keys,
                   const float2 *list, const unsigned *lcnt) {
  __shared__ ft_shared sh;
  __shared__ unsigned last;
  const ft_row r = ftp_slice(p);
  const int b = r.b, S = p.num_samples;
  const fs_col c = fs_col_load(p, b);
  const ftp_state s = ftp_step(p, f, c, st, hin, sin, b, prev, sh);
  const ftp_list l = ftp_list_of(s, list, lcnt, b);
  const bool all = (s.flags & FTP_ALL) != 0u;
  for (int smp = 0; smp < (c.greedy ? 1 : S); smp++) {
    const unsigned long long best = ft_max64(
        ft_best([&](auto g) { ftp_scan(p, r, l, g); }, p, c, smp, s.tau, all), sh);
    if (threadIdx.x == 0 && best) atomicMax(lk + (size_t)b * S + smp, best);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(cnt + b, 1u) == gridDim.x - 1u;
  __syncthreads();
  if (!last) return;
  __threadfence(); /* every slice's keys are seen */
  for (int smp = 0; smp < (c.greedy ? 1 : S); smp++) {
    const size_t item = (size_t)b * S + smp;
    const unsigned long long best = __ldcg(lk + item);
    const unsigned tok = fs_key_token(best);
    const long long v = (long long)tok - p.vocab_offset;
    const bool here = best != 0ull && v >= 0 && v < p.V;
    const float z = ft_bias_raw(bias, b, tok, here ? __ldcg(r.z + v) : 0.0f, sh);
    if (threadIdx.x == 0) {
      const bool ok = !all || !p.mask || (fs_mask_bits_n(p, b, tok, 1u) & 1u);
      for (int j = smp; j < (c.greedy ? S : smp + 1); j++) {
        lk[(size_t)b * S + j] = here ? best : 0ull;
        ll[(size_t)b * S + j] = here ? (ok ? z : FS_MASKED_LOGIT) : 0.0f;
      }
    }
  }
  if (threadIdx.x == 0) {
    if (lse_keys) {
      float L;
      if (lse_in) {
        L = lse_in[b];
      } else {
        float m = FT_NINF, l = 0.0f; /* the slices' pairs merged as ft_merge merges them */
        for (unsigned g = 0; g < gridDim.x; g++) {
          const float gm = __ldcg(lsep + 2 * ((size_t)b * gridDim.x + g)),
                      gl = __ldcg(lsep + 2 * ((size_t)b * gridDim.x + g) + 1);
          const float mm = fmaxf(m, gm);
          l = (l == 0.0f ? 0.0f : l * __expf(m - mm)) + (gl == 0.0f ? 0.0f : gl * __expf(gm - mm));
          m = mm;
        }
        L = m + logf(l);
      }
      lse_keys[b] = fs_lse_key(L);
    }
    cnt[b] = 0u; /* for the next call */
  }
}

/* ---- top logprobs (fs_options.top_logprobs; runtime/filter.c) ------------
** Each row's n largest raw logits (n <= FT_TMAX = FS_MAX_TOP_LOGPROBS <=
** FT_THREADS), as keys (ft_tkey: distinct; equal values by increasing id,
** NaN below every number), after the logits' pass and before
** fsamp_filter_bias changes any logit:
**  fsamp_toplp, grid (G, B): a slice of the row a CTA.  The slice goes by
**    in chunks of FT_TU float4s a thread, read once (the next chunk's
**    loads in flight while one is used; -inf past the slice and V): the
**    log-sum-exp from each chunk's largest term, and the chunk's keys at or
**    above the bound t gathered into sh.key (keys made only for the logits
**    at or above t's value, and only where the chunk's largest reaches
**    it).  Where there is no bound yet, the chunk's own bound from its
**    threads' maxima (below) narrows the gather and becomes t (n keys at or
**    above it are then in sh.key); where a gather loses keys (sh.key full),
**    the kept keys are cut to n and the chunk is gathered again, in halves,
**    under their own bounds; where sh.key holds more than FT_TCUT keys they
**    are sorted and cut to their n largest, whose n-th is the new t.  At the
**    end the slice's n largest keys, descending and 0-padded, go to
**    keys[(b G + g) n ..] and its raw log-sum-exp pair (m, l) to
**    pairs[b G + g]; with G = 1 and tokens set the outputs themselves
**    (ft_toplp_out; tokens NULL: a tensor-parallel rank's lists, merged
**    after the ranks' gather).
**    Where the logits' pass drew the call and it asks for ranks (fs_options.
**    ranks, at most FT_TRS samples a row: runtime/filter.c) fsamp_toplp_ranks,
**    the same kernel with the counts, counts them in the same read as
**    fsamp_rank would (below): each logit of the slice >=
**    a draw's reported logit drawn[b S + s] (fp32, NaN counts nothing) adds
**    1 to ranks[b S + s], which the host zeroed, a CTA's sum an atomic (with
**    one slice a row the CTA writes its sums: no zeroing);
**  fsamp_toplp_merge, grid B (G > 1): the G lists' n largest (sorted
**    whole where they fit one thread a key, else merged pairwise as sorted
**    lists by ft_tmerge), and the row's log-sum-exp from the pairs, merged
**    in slice order (deterministic);
**    the outputs (ft_toplp_out).
** A set's bound from its threads' maxima: the n-th largest of them bounds
** the set's n-th largest key from below (n threads hold a key at or above
** it), and only those n threads hold keys at or above it, at most n x the
** keys a thread holds: 16 n for a chunk (into an empty sh.key) and 8 n
** for a half (into at most n kept, then at most FT_TCAP - 8 n).  No second
** try: such a gather always fits. */
#define FT_TCAP 4096
#define FT_TMAX 256  /* FS_MAX_TOP_LOGPROBS */
#define FT_RS 4      /* fsamp_rank's samples a read */
#define FT_TRS 4     /* the most samples a row whose ranks fsamp_toplp counts
                        (runtime/filter.c's FS_TOPLP_RANKS) */
#ifndef FT_TU
#define FT_TU 4 /* a chunk's float4s a thread, 2 to 4 (FS_TOPLP_TU): 16 FT_TMAX <= FT_TCAP */
#endif
#if FT_TU < 2 || FT_TU > 4
#error "FT_TU outside 2..4: the gathers' bounds assume a chunk of at most 16 keys a thread"
#endif
#ifndef FT_TMINB
#define FT_TMINB FT_MINB /* fsamp_toplp's CTAs an SM (FS_TOPLP_MINB) */
#endif
#ifndef FT_TCUT
#define FT_TCUT 512 /* sh.key's fill above which fsamp_toplp cuts it (<= FT_TCAP;
                       FS_TOPLP_CUT, runtime/filter.c; perf-notes 43b) */
#endif
#ifndef FT_TROLLED /* ft_tbound's sort rolled (FS_TOPLP_TROLLED=0|1): where
                      fsamp_toplp would spill with ft_sort_desc (sm_120) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define FT_TROLLED 1
#else
#define FT_TROLLED 0
#endif
#endif
#ifndef FT_TMSHFL
#define FT_TMSHFL 1 /* ft_tmerge's strides below a warp by shuffles (FS_TOPLP_MSHFL=0|1) */
#endif
#if FT_TCUT > FT_TCAP
#error "FT_TCUT above FT_TCAP: a gather past the slots would go unseen"
#endif

struct ft_tshared {
  unsigned long long key[FT_TCAP];        /* the gathered keys */
  unsigned long long mx[2 * FT_THREADS];  /* ft_tbound's sort of the threads' maxima */
  ft_part mine, wpart[FT_WARPS];          /* ft_block_part's */
  unsigned nk;                            /* ft_tgather's count */
  unsigned add[3];                        /* fsamp_toplp's chunks' gather counts */
};

/* A raw logit's key: its value's order above (NaN as 0, below -inf), the
** complement of its global id below (31-bit ids: never 0). */
__device__ __forceinline__ unsigned long long ft_tkey(float z, unsigned tok) {
  return (unsigned long long)(z == z ? ft_key(z) : 0u) << 32 | ~tok;
}

/* Is key k's value (into tf) a number above -inf: then a logit at or above
** k has a value >= tf, and the -inf padding has not.  A -inf or NaN key, or
** 0, is not. */
__device__ __forceinline__ bool ft_tabove(unsigned long long k, float &tf) {
  tf = ft_unkey((unsigned)(k >> 32));
  return (unsigned)(k >> 32) > ft_key(FT_NINF);
}

/* The least power of two at or above x. */
__device__ __forceinline__ unsigned ft_pow2(unsigned x) {
  unsigned np = 1u;
  while (np < x) np <<= 1;
  return np;
}

/* sh.key[0 .. nk) (nk <= FT_TCAP) sorted into descending order, 0-padded
** to a power of two of at least `least`, by every thread of the block (up
** to FT_THREADS keys a key a thread, by ft_sort_desc's shuffles); ends with
** a barrier. */
template <bool R = false> /* ft_sort_desc_rolled's registers, not ft_sort_desc's steps */
__device__ void ft_sort_keys(ft_tshared &sh, unsigned nk, unsigned least) {
  unsigned long long *a = sh.key;
  const unsigned np = ft_pow2(max(nk, least));
  if (np <= FT_THREADS) {
    const unsigned i = threadIdx.x;
    if (R)
      ft_sort_desc_rolled(i < nk ? a[i] : 0ull, sh.mx, sh.mx + FT_THREADS);
    else
      ft_sort_desc(i < nk ? a[i] : 0ull, sh.mx, sh.mx + FT_THREADS);
    a[i] = sh.mx[i]; /* every thread read its a[i] before ft_sort_desc's barriers */
    __syncthreads();
    return;
  }
  for (unsigned i = nk + threadIdx.x; i < np; i += FT_THREADS) a[i] = 0ull;
  __syncthreads();
#pragma unroll 1
  for (unsigned k = 2; k <= np; k <<= 1)
#pragma unroll 1
    for (unsigned j = k >> 1; j > 0; j >>= 1) {
      for (unsigned i = threadIdx.x; i < np; i += FT_THREADS) {
        const unsigned l = i ^ j;
        if (l > i) {
          const unsigned long long x = a[i], y = a[l];
          if (((i & k) == 0u) == (x < y)) a[i] = y, a[l] = x;
        }
      }
      __syncthreads();
    }
}

/* The bound of a set from this thread's largest key tmax (0: none), for n:
** the n-th largest of the block's, at least 1 (every key is).  Every thread
** calls it and gets it. */
__device__ __forceinline__ unsigned long long ft_tbound(unsigned long long tmax, int n,
                                                        ft_tshared &sh) {
  if (FT_TROLLED)
    ft_sort_desc_rolled(tmax, sh.mx, sh.mx + FT_THREADS);
  else
    ft_sort_desc(tmax, sh.mx, sh.mx + FT_THREADS);
  const unsigned long long t = sh.mx[n - 1];
  __syncthreads(); /* every thread has read it before sh.mx is written again */
  return t ? t : 1ull;
}

/* Adds key k to sh.key where k >= t (atomically counted in sh.nk). */
__device__ __forceinline__ void ft_tgather(unsigned long long k, unsigned long long t,
                                           ft_tshared &sh) {
  if (k >= t) {
    const unsigned i = atomicAdd(&sh.nk, 1u);
    if (i < FT_TCAP) sh.key[i] = k;
  }
}

/* Row b's outputs from its n largest keys in sh.key[0 .. n) and its raw
** log-sum-exp: the lists (token -1 and -inf where a key is 0), lse for
** fsamp_filter's logprobs, and where the logits' pass drew the call
** (draws: the fused kernel without logprobs, into p.tokens) each draw's
** logprob from its raw logit, FS_MASKED_LOGIT where the mask bars it (a row
** that allows none), as the fused kernels report it; with draws 2 (a
** tensor-parallel call, whose draws may lie on another rank's shard) from
** the draws' reduced logits p.logits[b S + s] instead, as fsamp_tp_logprobs. */
__device__ void ft_toplp_out(const fs_params &p, int b, int n, float lse, float *lse_out,
                             int *tokens, float *values, int draws, const ft_tshared &sh) {
  for (int i = (int)threadIdx.x; i < n; i += FT_THREADS) {
    const unsigned long long k = sh.key[i];
    tokens[(size_t)b * n + i] = k ? (int)~(unsigned)k : -1;
    values[(size_t)b * n + i] = k ? ft_unkey((unsigned)(k >> 32)) - lse : FT_NINF;
  }
  if (threadIdx.x == 0 && lse_out) lse_out[b] = lse;
  for (int s = (int)threadIdx.x; draws && p.logprobs && s < p.num_samples; s += FT_THREADS) {
    const size_t item = (size_t)b * p.num_samples + s;
    if (draws == 2) {
      p.logprobs[item] = p.logits[item] - lse;
      continue;
    }
    const unsigned tok = (unsigned)p.tokens[item];
    const bool ok = !p.mask || (fs_mask_bits_n(p, b, tok, 1u) & 1u);
    const float z = __ldcg(p.zout + (long long)b * p.zout_stride + (tok - (unsigned)p.vocab_offset));
    p.logprobs[item] = (ok ? z : FS_MASKED_LOGIT) - lse;
  }
}

/* fsamp_toplp's body; R (fsamp_toplp_ranks): the ranks counted too, a
** kernel of its own, so that fsamp_toplp keeps its registers (the counts'
** set-up and arguments alone made it spill on sm_86, sm_89 and sm_100). */
template <bool R>
__device__ __forceinline__ void ft_toplp(const fs_params &p, int n, unsigned long long *keys,
                                         float2 *pairs, float *lse_out, int *tokens,
                                         float *values, int draws, const float *drawn,
                                         int *ranks) {
  __shared__ ft_tshared sh;
  __shared__ float rdraw[FT_TRS];   /* with ranks: the row's draws' logits */
  __shared__ unsigned rcount[FT_TRS]; /* and the CTA's counts */
  const unsigned G = gridDim.x, g = blockIdx.x;
  const int b = (int)blockIdx.y, nq = (p.V + 3) / 4;
  const int q0 = (int)((long long)nq * g / G), q1 = (int)((long long)nq * (g + 1u) / G);
  const float4 *z4 = (const float4 *)(p.zout + (long long)b * p.zout_stride);
  const unsigned off = (unsigned)p.vocab_offset;
  float lm = FT_NINF, ll = 0.0f;
  /* with ranks (nr samples): the counts in shared memory, a warp's sum an
  ** atomic a chunk (registers held over the chunks spilled the kernel on
  ** sm_100 and sm_120) */
  const int nr = R ? min(p.num_samples, FT_TRS) : 0;
  if (nr) {
    if ((int)threadIdx.x < nr) {
      rdraw[threadIdx.x] = drawn[(size_t)b * p.num_samples + threadIdx.x];
      rcount[threadIdx.x] = 0u;
    }
    __syncthreads();
  }
  unsigned nk = 0u;            /* sh.key's count (every thread's copy) */
  unsigned long long t = 0ull; /* the bound: n keys at or above it are in sh.key */
  /* sh.key cut to its n largest: t their n-th */
  auto cut = [&]() {
    ft_sort_keys<true>(sh, nk, 1u);
    nk = min(nk, (unsigned)n);
    if (nk == (unsigned)n) t = sh.key[n - 1];
  };
  /* the chunk at c0 into d: loads alone (their data is waited for where
  ** it is used, a chunk later), 0 past the slice */
  float4 q[FT_TU], nx[FT_TU];
  auto load = [&](int c0, float4 *d) {
#pragma unroll
    for (int u = 0; u < FT_TU; u++) {
      const int i = c0 + (int)threadIdx.x + u * FT_THREADS;
      d[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (i < q1) d[u] = __ldcg(z4 + i);
    }
  };
  load(q0, nx);
  /* chunk c's gather counts in sh.add[c % 3]: read by every thread right
  ** after the chunk's barrier, zeroed by thread 0 during chunk c + 2 (after
  ** the barrier of c + 1, by which every thread has read it; before that of
  ** c + 2, after which chunk c + 3 counts in it) */
  if (threadIdx.x == 0) sh.add[0] = 0u;
  for (int c0 = q0, c = 0; c0 < q1; c0 += FT_THREADS * FT_TU, c++) {
#pragma unroll
    for (int u = 0; u < FT_TU; u++) q[u] = nx[u];
    if (c0 + FT_THREADS * FT_TU < q1) load(c0 + FT_THREADS * FT_TU, nx);
    if (c0 + FT_THREADS * FT_TU > q1 || 4LL * (c0 + FT_THREADS * FT_TU) > (long long)p.V) {
      /* the slice's last chunk: -inf past the slice and past V */
#pragma unroll
      for (int u = 0; u < FT_TU; u++) {
        const int r = (c0 + (int)threadIdx.x + u * FT_THREADS < q1)
                          ? p.V - 4 * (c0 + (int)threadIdx.x + u * FT_THREADS)
                          : 0; /* the float4's logits within the slice and V */
        q[u] = make_float4(r > 0 ? q[u].x : FT_NINF, r > 1 ? q[u].y : FT_NINF,
                           r > 2 ? q[u].z : FT_NINF, r > 3 ? q[u].w : FT_NINF);
      }
    }
    /* the ranks' counts: the chunk's logits within the slice and V (NaN on
    ** either side counts nothing) */
    for (int k = 0; k < nr; k++) {
      const float d = rdraw[k];
      unsigned cnt = 0u;
#pragma unroll
      for (int u = 0; u < FT_TU; u++) {
        const int i = c0 + (int)threadIdx.x + u * FT_THREADS, r = i < q1 ? p.V - 4 * i : 0;
        cnt += (r > 0 && q[u].x >= d) + (r > 1 && q[u].y >= d) + (r > 2 && q[u].z >= d) +
               (r > 3 && q[u].w >= d);
      }
      cnt = __reduce_add_sync(0xffffffffu, cnt);
      if ((threadIdx.x & 31u) == 0u && cnt) atomicAdd(&rcount[k], cnt);
    }
    /* each float4's largest (NaN ignored) and the chunk's */
    float mu[FT_TU], mc = FT_NINF;
#pragma unroll
    for (int u = 0; u < FT_TU; u++) {
      mu[u] = fmaxf(fmaxf(q[u].x, q[u].y), fmaxf(q[u].z, q[u].w));
      mc = fmaxf(mc, mu[u]);
    }
    /* calls f(z, key) for each of the thread's logits of the chunk's
    ** float4s [u0, u1) within the slice and V; where `above` (the value of
    ** bound, a key, is a number above -inf: the -inf padding is below it)
    ** only for those at or above that value (ft_key orders as the floats,
    ** -0 as +0, NaN below every number), in float4s whose largest reaches it */
    auto each = [&](int u0, int u1, unsigned long long bound, auto f) {
      float tf;
      const bool above = ft_tabove(bound, tf);
#pragma unroll
      for (int u = 0; u < FT_TU; u++) {
        const int i = c0 + (int)threadIdx.x + u * FT_THREADS, v = 4 * i;
        const float zz[4] = {q[u].x, q[u].y, q[u].z, q[u].w};
        if (u < u0 || u >= u1 || (above && !(mu[u] >= tf))) continue;
#pragma unroll
        for (int e = 0; e < 4; e++)
          if (above ? zz[e] >= tf : i < q1 && v + e < p.V)
            f(zz[e], ft_tkey(zz[e], off + (unsigned)(v + e)));
      }
    };
    if (threadIdx.x == 0) sh.add[(c + 1) % 3] = 0u; /* chunk c - 2's */
    /* the log-sum-exp from the chunk's largest term (the padding adds 0;
    ** NaN terms make ll NaN) */
    if (mc == -FT_NINF) { /* a +inf term: NaN, as ft_lse_term makes it */
      ll = __int_as_float(0x7fffffff);
    } else {
      /* e^(z - ms) by fs_lse_term (fs_device.h: one FFMA and one MUFU, no
      ** denormals), the sum corrected for msl's rounding by fs_lse_fix as
      ** the fused kernels correct theirs */
      const float m = fmaxf(lm, mc), ms = m == FT_NINF ? 0.0f : m, msl = ms * FS_L2E;
      float s = 0.0f;
#pragma unroll
      for (int u = 0; u < FT_TU; u++)
        s += (fs_lse_term(q[u].x, msl) + fs_lse_term(q[u].y, msl)) +
             (fs_lse_term(q[u].z, msl) + fs_lse_term(q[u].w, msl));
      ll = ll * fs_ex2_approx((lm - ms) * FS_L2E) + fs_lse_fix(s, ms, msl);
      lm = m;
    }
    bool full = false; /* this thread's gather reached past FT_TCUT */
    /* not without a bound: it would take every key; and with a bound that is
    ** a number, only where the chunk's largest reaches it */
    float tf;
    if (t && (!ft_tabove(t, tf) || mc >= tf))
      each(0, FT_TU, t, [&](float, unsigned long long k) {
        if (k >= t) {
          const unsigned i = nk + atomicAdd(&sh.add[c % 3], 1u);
          if (i < FT_TCAP) sh.key[i] = k;
          full |= i >= FT_TCUT;
        }
      });
    const int busy = __syncthreads_or(!t || full);
    const unsigned m = nk + sh.add[c % 3];
    if (!busy) { /* the common case: a few keys more, room left */
      nk = m;
      continue;
    }
    /* the float4s [u0, u1) gathered again under their own bound (their
    ** threads' maxima, at most 4 n (u1 - u0) keys), which becomes t */
    auto regather = [&](int u0, int u1) {
      unsigned long long tmax = 0ull;
      each(u0, u1, 0ull, [&](float, unsigned long long k) { tmax = ft_hi(tmax, k); });
      const unsigned long long tc = ft_hi(t, ft_tbound(tmax, n, sh));
      if (threadIdx.x == 0) sh.nk = nk;
      __syncthreads();
      each(u0, u1, tc, [&](float, unsigned long long k) { ft_tgather(k, tc, sh); });
      __syncthreads();
      nk = sh.nk;
      t = tc;
    };
    if (!t) { /* no bound yet: sh.key is empty, and 16 n <= FT_TCAP keys fit */
      regather(0, FT_TU);
    } else if (m > FT_TCAP) { /* keys lost: this chunk's dropped, the kept cut to
                                 n, the chunk again in halves of at most 8 n */
      if (nk > (unsigned)n) cut();
      regather(0, FT_TU / 2);
      if (nk > FT_TCAP - 8u * (unsigned)n) cut();
      regather(FT_TU / 2, FT_TU);
    } else {
      nk = m;
    }
    if (nk > FT_TCUT) cut(); /* so that the next chunk finds room and a tighter bound */
  }
  if (nr) { /* the CTA's counts (here: nothing of them lives across a call) */
    __syncthreads();
    const unsigned cnt = (int)threadIdx.x < nr ? rcount[threadIdx.x] : 0u;
    int *const to = ranks + (size_t)b * p.num_samples + threadIdx.x;
    if (G == 1u) { /* the row's one CTA: its counts are the ranks (not zeroed) */
      if ((int)threadIdx.x < nr) *to = (int)cnt;
    } else if (cnt) {
      atomicAdd(to, (int)cnt);
    }
  }
  ft_sort_keys(sh, nk, (unsigned)n); /* the slice's n largest, 0-padded */
  ft_block_part({FT_NINF, lm, ll, FT_NINF, 0.0f, 0u, 0u}, sh, 0.0f); /* into sh.mine */
  if (G == 1u && tokens) { /* tokens NULL: a tensor-parallel rank's lists */
    ft_toplp_out(p, b, n, sh.mine.lm + logf(sh.mine.ll), lse_out, tokens, values, draws, sh);
    return;
  }
  if (threadIdx.x == 0) pairs[(size_t)b * G + g] = make_float2(sh.mine.lm, sh.mine.ll);
  unsigned long long *out = keys + ((size_t)b * G + g) * (size_t)n;
  for (int i = (int)threadIdx.x; i < n; i += FT_THREADS) out[i] = sh.key[i];
}

extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_TMINB)
    fsamp_toplp(const fs_params p, int n, unsigned long long *keys, float2 *pairs,
                float *lse_out, int *tokens, float *values, int draws) {
  ft_toplp<false>(p, n, keys, pairs, lse_out, tokens, values, draws, nullptr, nullptr);
}

/* fsamp_toplp with the ranks of the row's draws (drawn: their logits,
** [B, S], S <= FT_TRS) added into ranks (zeroed by the host), or with one
** slice a row (gridDim.x 1) written there. */
extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_TMINB)
    fsamp_toplp_ranks(const fs_params p, int n, unsigned long long *keys, float2 *pairs,
                      float *lse_out, int *tokens, float *values, int draws,
                      const float *drawn, int *ranks) {
  ft_toplp<true>(p, n, keys, pairs, lse_out, tokens, values, draws, drawn, ranks);
}

/* The n largest of G lists of n keys at kr (each descending, as
** fsamp_toplp writes them) into sh.key[0 .. n), descending, [n, np) the
** next largest or 0 (np = ft_pow2(n) <= FT_TMAX): the lists go into sh.key
** in batches, each padded to np, list i at sh.key[i np]; L lists fold into
** ceil(L / 2), list p merged with list p + ceil(L / 2) into p (their n largest:
** the larger of a[j] and b[np - 1 - j] for each j, a bitonic sequence that
** holds them, then sorted by log2 np half-cleaner steps), until one is
** left, which stays at sh.key[0] while the next batch comes in after it.
** A fold takes 1 + log2 np steps with a barrier each (the strides below a
** warp's in one of them, by shuffles), ceil(log2 L) folds a batch, against
** (log2 m)(log2 m + 1) / 2 steps for a bitonic sort of all m = G np keys
** (perf-notes 45a).  Every thread calls it; ends with a barrier. */
__device__ void ft_tmerge(ft_tshared &sh, const unsigned long long *kr, int G, int n) {
  unsigned long long *a = sh.key;
  const unsigned np = ft_pow2((unsigned)n), lg = (unsigned)__ffs((int)np) - 1u;
  const unsigned per = FT_TCAP / np; /* lists a batch holds: >= 16 */
  for (int next = 0; next < G;) {
    const unsigned kept = next ? 1u : 0u; /* the lists so far, folded into one */
    const unsigned take = min((unsigned)(G - next), per - kept);
    for (unsigned i = threadIdx.x; i < take << lg; i += FT_THREADS) {
      const unsigned l = i >> lg, j = i & (np - 1u);
      a[((kept + l) << lg) + j] = j < (unsigned)n ? kr[(size_t)(next + (int)l) * n + j] : 0ull;
    }
    next += (int)take;
    __syncthreads();
    for (unsigned L = kept + take; L > 1u;) {
      const unsigned h = (L + 1u) >> 1, pairs = L - h; /* list p with list p + h */
      for (unsigned i = threadIdx.x; i < pairs << lg; i += FT_THREADS) {
        const unsigned p = i >> lg, j = i & (np - 1u);
        a[i] = ft_hi(a[i], a[((p + h) << lg) + (np - 1u - j)]);
      }
      __syncthreads();
      /* the half-cleaners: strides of a warp or more through sh.key, the
      ** rest (lists of 64 keys or more, FT_TMSHFL) by shuffles, a warp's
      ** 32 consecutive keys held a key a thread (pairs np is a multiple of
      ** 64, so a warp's threads take the loop's turns together) */
      const unsigned last = FT_TMSHFL && np >= 64u ? 32u : 1u;
#pragma unroll 1
      for (unsigned s = np >> 1; s >= last; s >>= 1) {
        for (unsigned i = threadIdx.x; i < pairs << (lg - 1u); i += FT_THREADS) {
          const unsigned p = i >> (lg - 1u), k = i & ((np >> 1) - 1u);
          const unsigned j = (p << lg) + ((k & ~(s - 1u)) << 1) + (k & (s - 1u));
          const unsigned long long x = a[j], y = a[j + s];
          if (y > x) a[j] = y, a[j + s] = x;
        }
        __syncthreads();
      }
      if (last == 32u) {
        for (unsigned i = threadIdx.x; i < pairs << lg; i += FT_THREADS) {
          unsigned long long x = a[i];
#pragma unroll
          for (unsigned s = 16u; s > 0u; s >>= 1) /* the larger to the lower index */
            x = ft_cx(x, __shfl_xor_sync(0xffffffffu, x, s), (i & s) == 0u);
          a[i] = x;
        }
        __syncthreads();
      }
      L = h;
    }
  }
}

extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_MINB)
    fsamp_toplp_merge(const fs_params p, int n, int G, const unsigned long long *keys,
                      const float2 *pairs, float *lse_out, int *tokens, float *values,
                      int draws) {
  __shared__ ft_tshared sh;
  const int b = (int)blockIdx.x, m = G * n;
  const unsigned long long *kr = keys + (size_t)b * m;
  /* the row's log-sum-exp: a thread's pairs in slice order, then the block's */
  ft_part a = {FT_NINF, FT_NINF, 0.0f, FT_NINF, 0.0f, 0u, 0u};
  for (int i = (int)threadIdx.x; i < G; i += FT_THREADS) {
    const float2 x = pairs[(size_t)b * G + i];
    a = ft_merge(a, {FT_NINF, x.x, x.y, FT_NINF, 0.0f, 0u, 0u}, 0.0f);
  }
  ft_block_part(a, sh, 0.0f); /* into sh.mine */
  const float lse = sh.mine.lm + logf(sh.mine.ll);
  if (m <= FT_THREADS) { /* every list in sh.key, sorted a key a thread */
    for (int i = (int)threadIdx.x; i < m; i += FT_THREADS) sh.key[i] = kr[i];
    ft_sort_keys(sh, (unsigned)m, (unsigned)n);
  } else {
    ft_tmerge(sh, kr, G, n);
  }
  ft_toplp_out(p, b, n, lse, lse_out, tokens, values, draws, sh);
}

/* ---- ranks (fs_options.ranks) ------------------------------------------------
** fsamp_rank, grid (G, B): CTA g of row b counts, for each draw s of the row,
** the logits of its slice of the row's float4s (zout: the call's V raw
** logits) that are >= the draw's reported logit drawn[b S + s], an fp32
** compare (NaN on either side counts nothing), and adds its count to
** ranks[b S + s], which the host zeroed: as an int, or with as_float (a
** tensor-parallel rank's counts, summed over ranks as floats: exact below
** 2^24) as a float.  With a logit bias
** (fsamp_filter_bias wrote the biased ids' scores into zout) it first puts
** back the raw logits of the biased ids of its own slice (bias.raw; a token
** listed twice gets the same value twice), which no other CTA reads, and
** waits for them at a barrier.  FT_RS samples a read of the slice. */

extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_MINB)
    fsamp_rank(const fs_params p, const float *drawn, int *ranks, const ft_bias bias,
               int as_float) {
  __shared__ unsigned part[FT_WARPS][FT_RS];
  const unsigned G = gridDim.x, g = blockIdx.x;
  const int b = (int)blockIdx.y, nq = (p.V + 3) / 4, S = p.num_samples;
  const int q0 = (int)((long long)nq * g / G), q1 = (int)((long long)nq * (g + 1u) / G);
  float *zrow = p.zout + (long long)b * p.zout_stride;
  if (bias.count) {
    const int *t = bias.tokens + (size_t)b * bias.count;
    const float *raw = bias.raw + (size_t)b * bias.count;
    for (int j = (int)threadIdx.x; j < bias.count; j += FT_THREADS) {
      const long long v = (long long)t[j] - p.vocab_offset;
      if (v >= 4LL * q0 && v < 4LL * q1 && v < p.V) zrow[v] = raw[j];
    }
    __syncthreads();
  }
  const float4 *z4 = (const float4 *)zrow;
  const float nan = __int_as_float(0x7fffffff);
  for (int s0 = 0; s0 < S; s0 += FT_RS) {
    float d[FT_RS];
    unsigned cnt[FT_RS];
#pragma unroll
    for (int k = 0; k < FT_RS; k++) {
      d[k] = s0 + k < S ? drawn[(size_t)b * S + s0 + k] : nan;
      cnt[k] = 0u;
    }
    for (int i0 = q0 + (int)threadIdx.x; i0 < q1; i0 += 4 * FT_THREADS) {
      float4 x[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int i = i0 + u * FT_THREADS;
        x[u] = i < q1 ? __ldcg(z4 + i) : make_float4(nan, nan, nan, nan);
      }
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int r = p.V - 4 * (i0 + u * FT_THREADS); /* the float4's logits within V */
        const float zz[4] = {x[u].x, r > 1 ? x[u].y : nan, r > 2 ? x[u].z : nan,
                             r > 3 ? x[u].w : nan};
#pragma unroll
        for (int k = 0; k < FT_RS; k++)
#pragma unroll
          for (int e = 0; e < 4; e++) cnt[k] += zz[e] >= d[k] ? 1u : 0u;
      }
    }
#pragma unroll
    for (int k = 0; k < FT_RS; k++) {
      unsigned c = cnt[k];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
      if ((threadIdx.x & 31u) == 0u) part[threadIdx.x / 32u][k] = c;
    }
    __syncthreads();
    if (threadIdx.x < FT_RS && s0 + (int)threadIdx.x < S) {
      unsigned c = 0u;
      for (int w = 0; w < FT_WARPS; w++) c += part[w][threadIdx.x];
      int *at = ranks + (size_t)b * S + s0 + threadIdx.x;
      if (c && as_float) atomicAdd((float *)at, (float)c);
      else if (c) atomicAdd(at, (int)c);
    }
    __syncthreads(); /* part read before the next samples' counts */
  }
}

/* ---- targets (fs_options.target_tokens) ------------------------------------
** fsamp_target, grid (G, B): CTA g of row b reads its slice of the row's
** float4s (zout: the call's V raw logits, before any bias changes them)
** once, for the slice's raw log-sum-exp pair (m, l) (ft_lse_add: -inf adds
** nothing, NaN and +inf make l NaN) and the count of its logits >= the
** target's logit zt (ft_target_logit; NaN counts nothing; in a tensor-
** parallel call, zkeys not NULL, zt from the reduced zkeys[b]), into
** parts[b G + g] = (m, l, the count's bits, 0); with G = 1 and zkeys NULL
** it writes the outputs itself, as fsamp_target_out would.
** fsamp_target_out, 128 threads a block, a warp a row (4 rows a block):
** lane j merges parts j, j + 32, ... (fs_lse_merge), the warp's lanes are
** merged (ft_target_warp), lse = m + ln l, logprobs[b] = zt - lse and
** ranks[b] = the counts' sum, where each is not NULL; in a tensor-parallel
** call (lkeys not NULL) the shard's lse as lkeys[b] = fs_lse_key(lse) and
** shard[b] = (lse, count) instead (fsamp_tp_target_fin goes on).  (A thread
** a row, its loads dependent, took 9.4 us at B = 1, G = 37 on an H100:
** perf-notes 53b, 54b.) */

#ifndef FT_TGT_QUAD
#define FT_TGT_QUAD 1 /* fsamp_target's log-sum-exp a float4 at a time, one max and four
                         exponentials (FS_TARGET_QUAD=0: ft_lse_add a logit at a time) */
#endif

/* A float4's logits z[0..3] (those past V -inf; +inf as NaN, ft_lse_term)
** into the running (m, l): the largest first, then exp(z - m) of each (-inf
** adds 0, NaN makes l NaN); while m is -inf only a NaN changes l. */
__device__ __forceinline__ void ft_lse_quad(float &m, float &l, const float z[4]) {
  const float m4 = fmaxf(fmaxf(z[0], z[1]), fmaxf(z[2], z[3])); /* NaN only if all are */
  if (m4 > m) {
    l *= fs_ex2_approx((m - m4) * FS_L2E);
    m = m4;
  }
  if (m != FT_NINF) {
    l += (fs_ex2_approx((z[0] - m) * FS_L2E) + fs_ex2_approx((z[1] - m) * FS_L2E)) +
         (fs_ex2_approx((z[2] - m) * FS_L2E) + fs_ex2_approx((z[3] - m) * FS_L2E));
  } else if (z[0] != z[0] || z[1] != z[1] || z[2] != z[2] || z[3] != z[3]) {
    l = __int_as_float(0x7fffffff);
  }
}

/* Row b's target's raw logit: NaN where targets[b] is not among the call's
** ids [vocab_offset, vocab_offset + V) (-1: none). */
__device__ __forceinline__ float ft_target_logit(const fs_params &p, const int *targets, int b) {
  const long long v = (long long)targets[b] - p.vocab_offset;
  return v >= 0 && v < p.V ? p.zout[(long long)b * p.zout_stride + v]
                           : __int_as_float(0x7fffffff);
}

/* A tensor-parallel row's target logit from its reduced key
** (fsamp_tp_target_key's): NaN where no rank holds the target. */
__device__ __forceinline__ float ft_tp_zt(unsigned long long k) {
  return k ? fs_lse_unkey(k) : __int_as_float(0x7fffffff);
}

/* A part (m, l, count) merged across a warp, into every lane's. */
__device__ __forceinline__ void ft_target_warp(fs_lse &a, unsigned &c) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, a.m, o);
    const float l2 = __shfl_xor_sync(0xffffffffu, a.l, o);
    c += __shfl_xor_sync(0xffffffffu, c, o);
    fs_lse_merge(a, m2, l2);
  }
}

/* The outputs of row b from its merged part. */
__device__ __forceinline__ void ft_target_put(const fs_params &p, const int *targets, int b,
                                              fs_lse a, unsigned c, float *logprobs,
                                              int *ranks) {
  if (logprobs) logprobs[b] = ft_target_logit(p, targets, b) - (a.m + logf(a.l));
  if (ranks) ranks[b] = (int)c;
}

extern "C" __global__ void __launch_bounds__(FT_THREADS, FT_MINB)
    fsamp_target(const fs_params p, const int *targets, float4 *parts, float *logprobs,
                 int *ranks, const unsigned long long *zkeys) {
  __shared__ float4 part[FT_WARPS];
  const unsigned G = gridDim.x, g = blockIdx.x;
  const int b = (int)blockIdx.y, nq = (p.V + 3) / 4;
  const int q0 = (int)((long long)nq * g / G), q1 = (int)((long long)nq * (g + 1u) / G);
  const float4 *z4 = (const float4 *)(p.zout + (long long)b * p.zout_stride);
  const float zt = zkeys ? ft_tp_zt(zkeys[b]) : ft_target_logit(p, targets, b);
  float lm = FT_NINF, ll = 0.0f;
  unsigned cnt = 0u;
  for (int i0 = q0 + (int)threadIdx.x; i0 < q1; i0 += 4 * FT_THREADS) {
    float4 x[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int i = i0 + u * FT_THREADS;
      x[u] = i < q1 ? __ldcg(z4 + i) : make_float4(FT_NINF, FT_NINF, FT_NINF, FT_NINF);
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int i = i0 + u * FT_THREADS;
      const int r = i < q1 ? p.V - 4 * i : 0; /* the float4's logits within V */
      const float zz[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
#if FT_TGT_QUAD
      float zq[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        zq[e] = e < r ? ft_lse_term(zz[e]) : FT_NINF;
        cnt += e < r && zz[e] >= zt ? 1u : 0u;
      }
      ft_lse_quad(lm, ll, zq);
#else
#pragma unroll
      for (int e = 0; e < 4; e++) {
        if (e >= r) continue;
        ft_lse_add(lm, ll, ft_lse_term(zz[e]));
        cnt += zz[e] >= zt ? 1u : 0u;
      }
#endif
    }
  }
  fs_lse a = {lm, ll};
  ft_target_warp(a, cnt);
  const unsigned lane = threadIdx.x & 31u, w = threadIdx.x / 32u;
  if (lane == 0u) part[w] = make_float4(a.m, a.l, __uint_as_float(cnt), 0.0f);
  __syncthreads();
  if (w != 0u) return;
  const float4 q = lane < FT_WARPS ? part[lane] : make_float4(FT_NINF, 0.0f, 0.0f, 0.0f);
  a = {q.x, q.y};
  cnt = __float_as_uint(q.z);
  ft_target_warp(a, cnt);
  if (lane != 0u) return;
  if (G == 1u && !zkeys) ft_target_put(p, targets, b, a, cnt, logprobs, ranks);
  else parts[(size_t)b * G + g] = make_float4(a.m, a.l, __uint_as_float(cnt), 0.0f);
}

extern "C" __global__ void __launch_bounds__(128)
    fsamp_target_out(const fs_params p, const int *targets, const float4 *parts, int G,
                     float *logprobs, int *ranks, unsigned long long *lkeys, float2 *shard) {
  const int b = (int)(blockIdx.x * 4u + threadIdx.x / 32u);
  const int lane = (int)(threadIdx.x & 31u);
  if (b >= p.B) return; /* a whole warp: the shuffles below see all 32 lanes */
  fs_lse a = fs_lse_none();
  unsigned c = 0u;
  for (int g = lane; g < G; g += 32) {
    const float4 q = __ldcg(parts + (size_t)b * G + g);
    fs_lse_merge(a, q.x, q.y);
    c += __float_as_uint(q.z);
  }
  ft_target_warp(a, c);
  if (lane != 0) return;
  if (!lkeys) {
    ft_target_put(p, targets, b, a, c, logprobs, ranks);
    return;
  }
  const float L = a.m + logf(a.l); /* the shard's log-sum-exp: -inf where it is all -inf */
  lkeys[b] = fs_lse_key(L);
  shard[b] = make_float2(L, (float)c);
}

/* fsamp_tp_target_key, 128 threads a block, a thread a row: zkeys[b] = 1 <<
** 32 | fs_lse_key(zt) where this shard holds row b's target (global id
** targets[b] in [vocab_offset, vocab_offset + V)), zt its raw logit, else
** 0; a max all-reduce then gives every rank the key (0: no rank holds it).
** fsamp_tp_target_fin, 128 threads a block, a thread a row, after the max
** all-reduce of lkeys (fsamp_target_out's: M, the largest shard log-sum-
** exp): step 0 turns shard[b] = (L, count) into (exp(L - M), count), which
** a sum all-reduce makes (exp(lse - M), the rank); step 1 writes
** logprobs[b] = zt - (M + ln of that) and ranks[b], where each is not NULL.
** The counts are floats: exact below 2^24 (fs_filter_tp_zout's bound). */
extern "C" __global__ void __launch_bounds__(128)
    fsamp_tp_target_key(const fs_params p, const int *targets, unsigned long long *zkeys) {
  const int b = (int)(blockIdx.x * 128u + threadIdx.x);
  if (b >= p.B) return;
  const long long v = (long long)targets[b] - p.vocab_offset;
  zkeys[b] = v >= 0 && v < p.V
                 ? 1ull << 32 | fs_lse_key(p.zout[(long long)b * p.zout_stride + v])
                 : 0ull;
}

extern "C" __global__ void __launch_bounds__(128)
    fsamp_tp_target_fin(int B, int step, const unsigned long long *zkeys,
                        const unsigned long long *lkeys, float2 *shard, float *logprobs,
                        int *ranks) {
  const int b = (int)(blockIdx.x * 128u + threadIdx.x);
  if (b >= B) return;
  const float M = fs_lse_unkey(lkeys[b]);
  const float2 e = shard[b];
  if (step == 0) {
    shard[b] = make_float2(expf(e.x - M), e.y);
    return;
  }
  if (logprobs) logprobs[b] = ft_tp_zt(zkeys[b]) - (M + logf(e.x));
  if (ranks) ranks[b] = (int)e.y;
}

/* ---- the logits' release (fs_params.zout_keep; runtime/filter.c) ------------
** fsamp_zout_drop, a grid-stride loop over the `lines` whole 128-byte lines
** at p.zout (128-byte aligned): discard.global.L2 each, the one-GPU filtered
** call's last kernel, after every read of the logits.  Their lines, stored
** with an evict_last policy, leave L2 without a write to memory: the
** workspace's logits are scratch, written again before any later read (the
** rows' padding past V, never written, is never used). */
extern "C" __global__ void __launch_bounds__(256)
    fsamp_zout_drop(const fs_params p, long long lines) {
  const char *z = (const char *)p.zout;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < lines;
       i += (long long)gridDim.x * blockDim.x)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(z + 128 * i) : "memory");
}

/* fsamp_rank_int, 128 threads a block: ranks[i] = counts[i] for i < n, the
** counts of a tensor-parallel call's ranks summed over its ranks (floats
** holding integers, exact below 2^24). */
extern "C" __global__ void __launch_bounds__(128)
    fsamp_rank_int(const float *counts, int n, int *ranks) {
  const int i = (int)(blockIdx.x * 128u + threadIdx.x);
  if (i < n) ranks[i] = (int)counts[i];
}

/* fsamp_tp_place, grid B, 256 threads: row b of a tensor-parallel rank's
** gather of top-logprob lists (fs_filter_tp_toplp_merge): dst's row b is R
** parts of `width` words, part `rank` src's row b and the others 0, so
** that a max all-reduce over the ranks (each part nonzero on its rank
** alone) leaves every rank's part on every rank. */
extern "C" __global__ void __launch_bounds__(256)
    fsamp_tp_place(const unsigned long long *src, unsigned long long *dst, int width, int R,
                   int rank) {
  const int b = (int)blockIdx.x, all = R * width;
  const unsigned long long *s = src + (size_t)b * width;
  unsigned long long *d = dst + (size_t)b * all;
  for (int i = (int)threadIdx.x; i < all; i += 256) {
    const int part = i / width;
    d[i] = part == rank ? s[i - part * width] : 0ull;
  }
}
