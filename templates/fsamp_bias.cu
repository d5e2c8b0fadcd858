/*
** fsamp_bias.cu: the kernels of a call with a logit bias (fs_options.logit_bias_*;
** runtime/bias.c launches them).  Compiled once per context into a module of
** its own, never into a variant: the generator's revision does not hash this
** file (generator/gen.c), so a change here retires no tuning result.
**
** The fused kernel draws over every token but the biased ones, which the mask
** it is given clears: fsamp_bias_prep_bf16 / _f16 write that mask (the
** caller's, or all ones, with each row's biased ids cleared) and take each
** entry's logit from its W row (a warp an entry), before the fused kernel;
** fsamp_bias_merge then scores the entries with the noise the fused kernels
** give those ids and keeps the larger key.  The argmax over a partition of
** the tokens is the argmax over the whole: exact, and pathwise the draw a
** fused kernel adding the bias itself would make (up to fp32 near-ties of the
** dot products, which here run in another order).
*/
/* fs_device.h's shared pieces (fs_softcap1, fs_lse_unkey) need its epilogue's
** tile macros: a dummy epilogue, which nothing here instantiates */
#define FS_BF16 1
#define TILE_V 16
#define TILE_B 1
#define TPC 1
#define RPT 16
#include "fs_device.h"
#include "fs_penalty.h"

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
  const int n = p.D / 8; /* 16-byte pieces */
  for (int i0 = lane; i0 < n; i0 += 32 * 4) { /* four pieces of each in flight */
    uint4 x[4], y[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int i = i0 + 32 * u;
      x[u] = i < n ? __ldg(h + i) : make_uint4(0u, 0u, 0u, 0u);
      y[u] = i < n ? __ldg(w + i) : make_uint4(0u, 0u, 0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const unsigned xs[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
      const unsigned ys[4] = {y[u].x, y[u].y, y[u].z, y[u].w};
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const float2 a = bias_pair<BF16>(xs[k]), c = bias_pair<BF16>(ys[k]);
        acc = fmaf(a.x, c.x, acc);
        acc = fmaf(a.y, c.y, acc);
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (p.softcap > 0.0f) acc = fs_softcap1(acc, p.softcap, __fdividef(1.0f, p.softcap));
  return acc;
}

/* Words of the fused kernel's mask a prep block copies. */
#define FS_BIAS_SHARE 2048

/* The mask copy of bias_prep / bias_gprep (below): block blockIdx.x's words
** of row blockIdx.y's mask (the caller's, or all ones), then in them the
** bits `clear` of each biased id in the shard (clear << (t & shift) cleared:
** one id's bit, or with clear 0xffff and shift 16 its group's half word). */
__device__ __forceinline__ void bias_mask_copy(const fs_params &p, const int *tk, int count,
                                               int first, int span, long long out_stride,
                                               unsigned *mask_out, unsigned clear,
                                               int shift) {
  const int b = blockIdx.y;
  const int w0 = first + (int)min(blockIdx.x * (unsigned)FS_BIAS_SHARE, (unsigned)span);
  const int w1 = min(w0 + FS_BIAS_SHARE, first + span);
  unsigned *row = mask_out + b * out_stride;
  const unsigned *src = p.mask ? p.mask + b * p.mask_stride : nullptr;
  for (int w = w0 + threadIdx.x; w < w1; w += blockDim.x) row[w] = src ? src[w] : 0xffffffffu;
  __syncthreads(); /* the block's copies before its clears */
  const int lo = p.vocab_offset, hi = p.vocab_offset + p.V;
  for (int i = threadIdx.x; w0 < w1 && i < count; i += blockDim.x) {
    const int t = tk[i];
    if (t >= lo && t < hi && (t >> 5) >= w0 && (t >> 5) < w1)
      atomicAnd(row + (t >> 5), ~(clear << (t & shift)));
  }
}

/* Block blockIdx.x of row blockIdx.y (gridDim.x blocks a row, at least
** ceil(count / 4) and ceil(span / FS_BIAS_SHARE)):
**  - the row's words [first, first + span) of the fused kernel's mask, at
**    mask_out + row * out_stride + word (mask_out may point before the
**    buffer: only these words are written, and the fused kernel reads only
**    them): this block's FS_BIAS_SHARE of them from the caller's mask p.mask
**    (or all ones), then the bits of the row's biased ids in [vocab_offset,
**    vocab_offset + V) among them cleared (a block clears only words it
**    copied: no other block's copy can undo a clear; a block without words
**    does not scan the entries);
**  - entry j = 4 blockIdx.x + warp (a warp an entry, so that a row's W rows
**    are read by many SMs at once): its token t, or -1 when the entry is
**    skipped (t outside [vocab_offset, vocab_offset + V), listed earlier in
**    the row, or disallowed by the caller's mask), at etok[row * count + j],
**    and its raw logit z and biased logit z' = pen(z) + the sum of the row's
**    values of t (fp32, in entry order) at zz[row * count + j], pen the row's
**    repetition penalty (fs_rep of rep, reps; fs_pen: fs_penalty.h).
** 128 threads. */
template <bool BF16>
__device__ __forceinline__ void bias_prep(const fs_params &p, const int *tokens,
                                          const float *values, int count, int first, int span,
                                          long long out_stride, unsigned *mask_out, float2 *zz,
                                          int *etok, float rep, const float *reps) {
  const int b = blockIdx.y, lane = threadIdx.x & 31, j = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int *tk = tokens + (size_t)b * count;
  bias_mask_copy(p, tk, count, first, span, out_stride, mask_out, 1u, 31);
  const int lo = p.vocab_offset, hi = p.vocab_offset + p.V;
  const unsigned *src = p.mask ? p.mask + b * p.mask_stride : nullptr;
  if (j >= count) return;
  const float *vl = values + (size_t)b * count;
  const int t = tk[j];
  bool ok = t >= lo && t < hi;
  if (ok && src) /* the caller's mask: a disallowed token stays -inf */
    ok = src[t >> 5] >> (t & 31) & 1u;
  float sum = 0.0f; /* the token's values in entry order; none when listed before */
  for (int i0 = 0; ok && i0 < count; i0 += 32) { /* ok is the warp's: uniform */
    const unsigned same = __ballot_sync(0xffffffffu, i0 + lane < count && tk[i0 + lane] == t);
    if (i0 < j && (same & (j - i0 < 32 ? (1u << (j - i0)) - 1u : 0xffffffffu))) ok = false;
    for (unsigned m = same & (i0 + 32 > j ? ~0u << (j > i0 ? j - i0 : 0) : 0u); ok && m;
         m &= m - 1u)
      sum += vl[i0 + __ffs(m) - 1];
  }
  const float z = ok ? bias_logit<BF16>(p, b, t - lo, lane) : 0.0f;
  if (lane == 0) {
    etok[(size_t)b * count + j] = ok ? t : -1;
    zz[(size_t)b * count + j] = make_float2(z, fs_pen(z, fs_rep(rep, reps, b)) + sum);
  }
}

/* Where a merge writes (bias_put). */
struct bias_out {
  int *tokens;
  float *logits;
  unsigned long long *keys;
  float *logprobs;
};

/* The end of a merge for row b, sample s: the warp's lanes' best keys
** (with their tokens' raw logits bz) reduced, and the result against the
** fused kernel's winner at keys / logits (an equal key is the same token,
** which the fused kernel saw as masked, so the entry's wins): without
** out.tokens the winner back into keys / logits (a rank's local outputs,
** reduced over ranks after); with it the call's outputs, and where asked
** keys, logits and logprobs (the logit minus the row's log-sum-exp,
** fs_lse_key'd at keys[B * S + row] by fsamp_tp_lse).  Every lane of the
** warp calls it. */
__device__ __forceinline__ void bias_put(const fs_params &p, int b, int s,
                                         unsigned long long best, float bz,
                                         unsigned long long *keys, float *logits,
                                         const bias_out &out) {
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long k2 = __shfl_xor_sync(0xffffffffu, best, o);
    const float z2 = __shfl_xor_sync(0xffffffffu, bz, o);
    if (k2 > best) best = k2, bz = z2;
  }
  const size_t item = (size_t)b * p.num_samples + s;
  if ((threadIdx.x & 31) != 0) return;
  const unsigned long long k = keys[item];
  const bool won = best && best >= k;
  if (!out.tokens) {
    if (won) keys[item] = best, logits[item] = bz;
    return;
  }
  const unsigned long long g = won ? best : k;
  const float z = won ? bz : logits[item];
  out.tokens[item] = (int)fs_key_token(g);
  if (out.keys) out.keys[item] = g;
  if (out.logits) out.logits[item] = z;
  if (out.logprobs)
    out.logprobs[item] = z - fs_lse_unkey(keys[(size_t)p.B * p.num_samples + b]);
}

/* Row blockIdx.x's biased tokens (bias_prep's entries) against the fused
** kernel's winners keys / logits [B, S]: for each sample s, the best key over
** the entries (score z' / T + the token's noise, z' itself on greedy rows)
** wins when it is not smaller than keys[row * S + s] (an equal key is the same
** token, which the fused kernel saw as masked), with that token's raw logit
** z, written by bias_put.  128 threads, a warp a sample. */
__device__ __forceinline__ void bias_merge(const fs_params &p, int count, const float2 *zz,
                                           const int *etok, unsigned long long *keys,
                                           float *logits, const bias_out &out) {
  const int b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  /* the row's parameters as fs_col_load (fs_device.h) takes them, first, while
  ** little is live (the division is a called subroutine) */
  const float T = p.temperatures ? p.temperatures[b] : p.temperature;
  const bool greedy = !(T > 0.0f);
  const float inv_t = greedy ? 0.0f : 1.0f / T;
  const unsigned long long seed = p.seeds ? p.seeds[b] : p.seed;
  const unsigned long long off = p.offsets ? p.offsets[b] : p.offset;
  const unsigned tag = p.seeds ? 0u : (unsigned)(b + 1);
  const int *et = etok + (size_t)b * count;
  const float2 *ez = zz + (size_t)b * count;
  for (int s = warp; s < p.num_samples; s += 4) {
    unsigned long long best = 0ull;
    float bz = 0.0f;
    for (int j = lane; j < count; j += 32) {
      const int t = et[j];
      if (t < 0) continue;
      const float2 e = ez[j];
      float sc = e.y;
      if (!greedy) {
        const fs_philox_out q = fs_noise_quad(seed, off, (unsigned)t >> 2, (unsigned)s, tag);
        const unsigned k = (unsigned)t & 3u; /* selects: an indexed q.v went to the stack */
        const unsigned x = k == 0 ? q.v[0] : k == 1 ? q.v[1] : k == 2 ? q.v[2] : q.v[3];
        sc = fmaf(sc, inv_t, fs_gumbel_fast(x));
      }
      /* a NaN score ranks as -inf: what the fused kernel, which saw the token
      ** masked, would have ranked it (flashsampling.h) */
      const unsigned long long key = fs_pack_key(sc == sc ? sc : -__int_as_float(0x7f800000),
                                                 (unsigned)t);
      if (key > best) best = key, bz = e.x;
    }
    bias_put(p, b, s, best, bz, keys, logits, out);
  }
}

/* FS_NOISE_GROUP16 (since 0.3.17): the fused kernel draws groups of 16 ids
** [16k, 16k + 16), so a bias changes whole groups' masses.  bias_gprep is
** bias_prep for groups: the mask clears the 16 bits of each biased id's
** group in the shard, and entry j, where it is the row's first entry whose
** id lies in the shard and in that group, puts the group's first id at
** etok[row * count + j] (else -1) and for each id i of the group its raw
** logit z and biased logit z' at zz[(row * count + j) * 16 + i]: z' =
** pen(z) + the sum of the row's values of that id (fp32, in entry order)
** where the row lists it, z else, and -inf where that is NaN (a biased
** score that is NaN ranks as -inf, as in bias_merge); ids at or past
** vocab_offset + V are left unwritten (fs_fold_group reads none of them).
** The caller's mask is the merge's to apply.  128 threads, a warp an
** (entry, id of its group): 16 warps an entry, so that the 16 W rows of a
** group are read at once. */
template <bool BF16>
__device__ __forceinline__ void bias_gprep(const fs_params &p, const int *tokens,
                                           const float *values, int count, int first, int span,
                                           long long out_stride, unsigned *mask_out, float2 *zz,
                                           int *etok, float rep, const float *reps) {
  const int b = blockIdx.y, lane = threadIdx.x & 31, wid = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int *tk = tokens + (size_t)b * count;
  /* a group lies in one half of a word */
  bias_mask_copy(p, tk, count, first, span, out_stride, mask_out, 0xffffu, 16);
  const int lo = p.vocab_offset, hi = p.vocab_offset + p.V;
  const int j = wid >> 4, id_in = wid & 15; /* a warp an (entry, id of its group) */
  if (j >= count) return;
  const int t = tk[j], g = t >> 4, id = (g << 4) + id_in;
  bool ok = t >= lo && t < hi; /* the warp's: uniform */
  for (int i0 = 0; ok && i0 < j; i0 += 32) { /* an earlier entry of the group */
    const int ti = i0 + lane < j ? tk[i0 + lane] : -1;
    if (__any_sync(0xffffffffu, ti >= lo && ti < hi && ti >> 4 == g)) ok = false;
  }
  if (lane == 0 && id_in == 0) etok[(size_t)b * count + j] = ok ? g << 4 : -1;
  if (!ok || id >= hi) return;
  const float *vl = values + (size_t)b * count;
  float sum = 0.0f;
  bool listed = false;
  for (int i0 = 0; i0 < count; i0 += 32) {
    const unsigned same = __ballot_sync(0xffffffffu, i0 + lane < count && tk[i0 + lane] == id);
    listed |= same != 0u;
    for (unsigned m = same; m; m &= m - 1u) sum += vl[i0 + __ffs(m) - 1];
  }
  const float z = bias_logit<BF16>(p, b, id - lo, lane);
  float zb = listed ? fs_pen(z, fs_rep(rep, reps, b)) + sum : z;
  if (listed && zb != zb) zb = -__int_as_float(0x7f800000);
  if (lane == 0) zz[((size_t)b * count + j) * 16 + id_in] = make_float2(z, zb);
}

/* bias_merge for FS_NOISE_GROUP16: each entry's group (bias_gprep's) is
** folded as the fused kernels fold a group (fs_fold_group: the caller's
** mask applied, the group's noise, the inverse-CDF pick; a greedy row's
** ids one by one, as fs_fold_rows offers them), its pick reported with its
** raw logit (-inf where masked), and the best key per sample against the
** fused kernel's as in bias_merge.  A lane compares whole keys, not
** fs_best_offer's scores: its entries come in the caller's order, not by
** id, and an equal score must go to the smaller id (fs_pack_key).  128
** threads, a warp a sample. */
__device__ __forceinline__ void bias_gmerge(const fs_params &p, int count, const float2 *zz,
                                            const int *etok, unsigned long long *keys,
                                            float *logits, const bias_out &out) {
  const int b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const fs_col c = fs_col_load(p, b);
  const int *et = etok + (size_t)b * count;
  const int hi = p.vocab_offset + p.V;
  for (int s = warp; s < p.num_samples; s += 4) {
    unsigned long long best = 0ull;
    float bz = 0.0f;
    for (int j = lane; j < count; j += 32) {
      const int g0 = et[j];
      if (g0 < 0) continue;
      const float2 *e = zz + ((size_t)b * count + j) * 16;
      const int nv = min(16, hi - g0);
      __align__(16) float w[16];
      for (int i = 0; i < 16; i++) w[i] = i < nv ? e[i].y : 0.0f; /* NaN past nv: the fold's */
      const unsigned allow =
          p.mask ? fs_mask_bits<16>(p, b, (unsigned)g0) & 0xffffu : 0xffffu;
      if (c.greedy) {
        for (int i = 0; i < nv; i++) {
          const bool a = allow >> i & 1u;
          const unsigned long long key =
              fs_pack_key(a ? w[i] : FS_MASKED_LOGIT, (unsigned)(g0 + i));
          if (key > best) best = key, bz = a ? e[i].x : FS_MASKED_LOGIT;
        }
        continue;
      }
      fs_best gb = fs_best_none(); /* the group's pick, offered even where all are masked */
      fs_fold_group(w, c, (unsigned)g0, nv, (unsigned)s, allow, gb);
      const int n = (int)(gb.tok - (unsigned)g0) & 15; /* the fold always offers one */
      const unsigned long long key = fs_best_key(gb);
      if (key > best) best = key, bz = allow >> n & 1u ? e[n].x : FS_MASKED_LOGIT;
    }
    bias_put(p, b, s, best, bz, keys, logits, out);
  }
}

/* The preps' entry points: a per-dtype instance of bias_prep or bias_gprep each. */
#define FS_BIAS_PREP_ENTRY(name, prep, bf16)                                                  \
  extern "C" __global__ void __launch_bounds__(128)                                         \
  name(const fs_params p, const int *tokens, const float *values, int count, int first,     \
       int span, long long out_stride, unsigned *mask_out, float2 *zz, int *etok, float rep,  \
       const float *reps) {                                                                 \
    prep<bf16>(p, tokens, values, count, first, span, out_stride, mask_out, zz, etok, rep,   \
               reps);                                                                       \
  }
FS_BIAS_PREP_ENTRY(fsamp_bias_prep_bf16, bias_prep, true)
FS_BIAS_PREP_ENTRY(fsamp_bias_prep_f16, bias_prep, false)
FS_BIAS_PREP_ENTRY(fsamp_bias_gprep_bf16, bias_gprep, true)
FS_BIAS_PREP_ENTRY(fsamp_bias_gprep_f16, bias_gprep, false)

extern "C" __global__ void __launch_bounds__(128)
fsamp_bias_gmerge(const fs_params p, int count, const float2 *zz, const int *etok,
                  unsigned long long *keys, float *logits, bias_out out) {
  bias_gmerge(p, count, zz, etok, keys, logits, out);
}

extern "C" __global__ void __launch_bounds__(128)
fsamp_bias_merge(const fs_params p, int count, const float2 *zz, const int *etok,
                 unsigned long long *keys, float *logits, bias_out out) {
  bias_merge(p, count, zz, etok, keys, logits, out);
}

/* Long lists (on the filters' path from 257 entries a row, runtime/filter.c;
** fs_filter_path sends lists above FS_BIAS_SHORT there): row blockIdx.x's
** entries made distinct, so
** that fsamp_filter_bias needs no search for repeats.  Entry j's output is
** tok_out[j] = its token and val_out[j] = the sum of the row's values of
** that token (fp32, from 0, in entry order: what bias_prep and
** fsamp_filter_bias sum) where j is the token's first entry in [vocab_offset,
** vocab_offset + V); -1 and 0 elsewhere (pads, other shards' ids, repeats).
** How: a bitonic sort of the words (the id in the shard) << ibits | the
** entry's index (0xffffffff outside the shard; the caller checks that every
** other word is below that: fs_bias_key_bits), np of them (count rounded up
** to a power of two, at least DD_E x 32), np / DD_E threads of DD_E
** consecutive words each: strides below DD_E within a thread's registers,
** below 32 DD_E across the warp's lanes by shuffles, the rest through 4 np
** bytes of dynamic shared memory (np <= 16384: 64 KB); a repeat then
** follows its first entry, in entry order. */
#define DD_E 16

/* One compare-exchange of the network: a <= b after it where up, else >=. */
__device__ __forceinline__ void dd_order(unsigned &a, unsigned &b, bool up) {
  const unsigned lo = min(a, b), hi = max(a, b);
  a = up ? lo : hi;
  b = up ? hi : lo;
}

/* Stride S of the merges of SIZE-word runs within a thread's words
** (ascending runs where the word's index & SIZE is 0; SIZE <= DD_E). */
template <int SIZE, int S>
__device__ __forceinline__ void dd_first(unsigned (&r)[DD_E], int g0) {
#pragma unroll
  for (int i = 0; i < DD_E; i++) /* g0, a multiple of DD_E: i & SIZE below it, g0's at it */
    if ((i & S) == 0) dd_order(r[i], r[i + S], ((g0 + i) & SIZE) == 0);
}
template <int SIZE>
__device__ __forceinline__ void dd_first_size(unsigned (&r)[DD_E], int g0) {
  if (SIZE >= 16) dd_first<SIZE, 8>(r, g0);
  if (SIZE >= 8) dd_first<SIZE, 4>(r, g0);
  if (SIZE >= 4) dd_first<SIZE, 2>(r, g0);
  dd_first<SIZE, 1>(r, g0);
}

/* Stride S of a merge of runs longer than DD_E, whose direction is the
** thread's (up: ascending). */
template <int S>
__device__ __forceinline__ void dd_regs(unsigned (&r)[DD_E], bool up) {
#pragma unroll
  for (int i = 0; i < DD_E; i++)
    if ((i & S) == 0) dd_order(r[i], r[i + S], up);
}

extern "C" __global__ void __launch_bounds__(1024) /* FS_MAX_LOGIT_BIAS / DD_E */
fsamp_bias_dedup(const int *tokens, const float *values, int count, int vocab_offset, int V,
                 int np, int ibits, int *tok_out, float *val_out) {
  extern __shared__ unsigned dd_key[]; /* np words */
  const size_t row = (size_t)blockIdx.x * (size_t)count;
  const int t = threadIdx.x, lane = t & 31, g0 = t * DD_E;
  for (int i = t; i < count; i += blockDim.x) tok_out[row + i] = -1, val_out[row + i] = 0.0f;
  unsigned r[DD_E];
#pragma unroll
  for (int i = 0; i < DD_E; i++) {
    unsigned k = 0xffffffffu;
    if (g0 + i < count) {
      const long long v = (long long)tokens[row + g0 + i] - vocab_offset;
      if (v >= 0 && v < V) k = (unsigned)v << ibits | (unsigned)(g0 + i);
    }
    r[i] = k;
  }
  dd_first_size<2>(r, g0); /* runs of up to DD_E words: within the thread */
  dd_first_size<4>(r, g0);
  dd_first_size<8>(r, g0);
  dd_first_size<16>(r, g0);
  for (int size = 2 * DD_E; size <= np; size <<= 1) {
    int stride = size >> 1;
    const bool up = (g0 & size) == 0; /* this thread's words' run ascends */
    if (stride >= 32 * DD_E) { /* across warps: shared memory */
#pragma unroll
      for (int i = 0; i < DD_E; i++) dd_key[g0 + i] = r[i];
      __syncthreads();
      for (; stride >= 32 * DD_E; stride >>= 1) {
        for (int i = t; i < np / 2; i += blockDim.x) {
          const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
          const unsigned a = dd_key[lo], b = dd_key[hi];
          if ((a > b) == ((lo & size) == 0)) dd_key[lo] = b, dd_key[hi] = a;
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < DD_E; i++) r[i] = dd_key[g0 + i];
      __syncthreads(); /* read before the next size's stores */
    }
    for (; stride >= DD_E; stride >>= 1) { /* across the warp's lanes */
      const int d = stride / DD_E;
      const bool keep_min = ((lane & d) == 0) == up;
#pragma unroll
      for (int i = 0; i < DD_E; i++) {
        const unsigned o = __shfl_xor_sync(0xffffffffu, r[i], d);
        r[i] = keep_min ? min(r[i], o) : max(r[i], o);
      }
    }
    dd_regs<8>(r, up); /* stride is DD_E / 2 here */
    dd_regs<4>(r, up);
    dd_regs<2>(r, up);
    dd_regs<1>(r, up);
  }
#pragma unroll
  for (int i = 0; i < DD_E; i++) dd_key[g0 + i] = r[i];
  __syncthreads();
  const unsigned emask = (1u << ibits) - 1u;
  for (int k = t; k < np; k += blockDim.x) {
    const unsigned w = dd_key[k], v = w >> ibits;
    if (w == 0xffffffffu || (k > 0 && dd_key[k - 1] >> ibits == v)) continue; /* not a first */
    float sum = 0.0f;
    for (int j = k; j < np && dd_key[j] != 0xffffffffu && dd_key[j] >> ibits == v; j++)
      sum += values[row + (dd_key[j] & emask)];
    tok_out[row + (w & emask)] = (int)v + vocab_offset;
    val_out[row + (w & emask)] = sum;
  }
}
