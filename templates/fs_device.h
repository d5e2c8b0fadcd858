/*
** fs_device.h: device code shared by the kernel templates (NVRTC includes
** it).  The including template defines FS_BF16, TILE_V, TILE_B, TPC (epilogue
** threads per batch column) and RPT (epilogue rows per thread) first.
**
**  - PTX wrappers: ldmatrix, mma.sync m16n8k16 (bf16/fp16 -> fp32);
**  - the epilogue: a thread owns one batch column and RPT consecutive rows
**    of the tile's logits staged in shared memory, adds the Gumbel noise (one
**    Philox call per four tokens), keeps the best key and folds it into the
**    chunk's candidate;
**  - FS_NOISE_GROUP16: a thread folds whole groups of 16 staged rows instead
**    (one Philox call, one Gumbel variate and an inverse-CDF pick per group);
**  - the reduction of (row, sample) items over their G chunk candidates.
*/
#ifndef FS_DEVICE_H
#define FS_DEVICE_H

#include "fs_params.h"
#include "fs_rng.h"

typedef unsigned short fs_elem; /* raw bf16/fp16 bits */

__device__ __forceinline__ unsigned smem_addr(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

/* p advanced to the next 1024-byte boundary of the shared window (the
** 128-byte swizzled TMA boxes need it).  By pointer arithmetic on p, a
** pointer into a __shared__ array, so that the compiler still knows that
** what is derived from it is shared memory: rounding through an integer
** made every access through it generic (ST.E / LD.E instead of STS / LDS:
** the staged logits paid the generic path's latency, perf-notes 15a). */
__device__ __forceinline__ unsigned char *fs_smem_align1024(unsigned char *p) {
  return p + ((0u - smem_addr(p)) & 1023u);
}

__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned r[2], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
}

/* d += a * b, m16n8k16, fp32 accumulate. */
__device__ __forceinline__ void mma16816(float d[4], const unsigned a[4], const unsigned b[2]) {
#if FS_BF16
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#endif
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Keeps the larger key (and its logit). */
__device__ __forceinline__ void keep_max(unsigned long long &k, float &z,
                                         unsigned long long k2, float z2) {
  if (k2 > k) { k = k2; z = z2; }
}

/* A lane's best over the tokens it folded so far, which come in increasing
** order: token tok (FS_NO_TOKEN before the first), its score s and logit z.
** Its key is fs_pack_key(s, tok), or 0 before the first token.  As tokens
** only increase, a later token's key is larger exactly when its score is
** larger (a non-NaN s; +0 and -0 compare equal in fp32 and are keyed alike,
** fs_pack_key), or when s is NaN and the later score is not: so a lane
** compares scores in fp32 and forms the 64-bit key once, in fs_best_key. */
#define FS_NO_TOKEN 0xffffffffu
struct fs_best {
  float s, z;
  unsigned tok;
};

__device__ __forceinline__ fs_best fs_best_none() {
  fs_best b;
  b.s = __int_as_float(0x7fffffff); /* NaN: any first token takes its place */
  b.z = 0.0f;
  b.tok = FS_NO_TOKEN;
  return b;
}

__device__ __forceinline__ unsigned long long fs_best_key(const fs_best &b) {
  return b.tok == FS_NO_TOKEN ? 0ull : fs_pack_key(b.s, b.tok);
}

/* The sampling parameters of one batch column (fixed for a CTA). */
struct fs_col {
  int b;                       /* batch row, may be >= B (then unused) */
  bool greedy;                 /* T == 0, negative or NaN */
  float inv_t;
  unsigned long long seed, off;
  unsigned tag;                /* row + 1 with a scalar seed, else 0 */
};

__device__ __forceinline__ fs_col fs_col_load(const fs_params &p, int b) {
  fs_col c;
  const int bc = b < p.B ? b : 0;
  const float T = p.temperatures ? p.temperatures[bc] : p.temperature;
  c.b = b;
  c.greedy = !(T > 0.0f);
  c.inv_t = c.greedy ? 0.0f : 1.0f / T;
  c.seed = p.seeds ? p.seeds[bc] : p.seed;
  c.off = p.offsets ? p.offsets[bc] : p.offset;
  c.tag = p.seeds ? 0u : (unsigned)(b + 1);
  return c;
}

/* ---- logit soft-capping (fs_options.logit_softcap) ------------------------ */
/* c tanh(z / c), as CUDA's tanhf (2 ulp) of z times ic = 1 / c, which the
** callers take from __fdividef (rcp.approx, 1 ulp): the correctly rounded
** 1.0f / c is a called subroutine, and its call made the wt family's
** 128-accumulator tiles spill. */
__device__ __forceinline__ float fs_softcap1(float z, float c, float ic) {
  return c * tanhf(z * ic);
}

/* With p.softcap = c > 0: caps the staged logits of a tile in place, the
** TPC * RPT rows of each of `cols` columns (column j at z[j * ld ..]), shared
** out over threads t = 0 .. nthreads - 1.  The caller calls it only with c
** set (a uniform branch), after the staging's barrier, and runs that
** barrier again before anything reads z: so every read (either noise, greedy
** rows, the log-sum-exp, the winners' logits) sees the capped logits, and
** calls without it run no instruction more per logit.  A rolled loop: one
** copy of tanhf's code per kernel. */
__device__ __forceinline__ void fs_softcap_staged(const fs_params &p, float *z, int cols, int ld,
                                                  int t, int nthreads) {
  const float c = p.softcap, ic = __fdividef(1.0f, c);
  constexpr int n = TPC * RPT;
#pragma unroll 1
  for (int i = t; i < cols * n; i += nthreads) {
    float *const zi = z + (i / n) * ld + i % n;
    *zi = fs_softcap1(*zi, c, ic);
  }
}

/* With p.zout (a filtered call, runtime/filter.c): writes a staged tile's
** logits out, the TPC * RPT rows of each of `cols` columns (column j at
** z[j * ld ..]: batch row b0 + j, W rows vrow0 + r), as fs_softcap_staged
** shares them out over threads t = 0 .. nthreads - 1, four rows a store;
** rows from v_end on and batch rows from B on are not written.  The caller
** calls it only with p.zout set (a uniform branch), after the staging's
** barrier and any soft-cap's; it only reads the staged tile.  With
** p.zout_keep the float4 stores carry an L2 evict_last policy, so that the
** W stream around them does not push them out before the kernels after the
** pass read them (perf-notes 47b). */
__device__ __forceinline__ void fs_zout_staged(const fs_params &p, const float *z, int cols,
                                               int ld, int b0, int vrow0, int v_end, int t,
                                               int nthreads) {
  constexpr int nq = TPC * RPT / 4;
  unsigned long long keep = 0ull;
  if (p.zout_keep) asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
#pragma unroll 1
  for (int i = t; i < cols * nq; i += nthreads) {
    const int j = i / nq, r = 4 * (i % nq), v = vrow0 + r;
    if (b0 + j >= p.B || v >= v_end) continue;
    const float *zj = z + j * ld + r;
    float *o = p.zout + (long long)(b0 + j) * p.zout_stride + v;
    if (v + 4 <= v_end) {
      const float4 x = *(const float4 *)zj;
      if (p.zout_keep)
        asm volatile("st.global.cg.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(o),
                     "f"(x.x), "f"(x.y), "f"(x.z), "f"(x.w), "l"(keep)
                     : "memory");
      else
        __stcg((float4 *)o, x);
    } else {
      for (int e = 0; v + e < v_end; e++) __stcg(o + e, zj[e]);
    }
  }
}

/* The token mask (fs_options): bit j (j < n <= 32) is row b's bit of global
** id tok + j, from the word of tok and, where the n ids straddle words, the
** next; a word past the one of the last id (vocab_offset + V - 1) is never
** read (its bits are 0: ids past a tile's end, or a cluster's padding
** tiles), nor are rows b >= B (a tile's padding: row 0's is read).  Bits j
** >= n are unspecified. */
__device__ __forceinline__ unsigned fs_mask_bits_n(const fs_params &p, int b, unsigned tok,
                                                   unsigned n) {
  const unsigned *row = p.mask + (long long)(b < p.B ? b : 0) * p.mask_stride;
  const unsigned w = tok >> 5, sh = tok & 31u, last = (unsigned)(p.vocab_offset + p.V - 1) >> 5;
  if (w > last) return 0u;
  unsigned bits = __ldg(row + w) >> sh;
  if (sh + n > 32u && w < last) bits |= __ldg(row + w + 1) << (32u - sh);
  return bits;
}

/* fs_mask_bits_n for a constant count N. */
template <unsigned N>
__device__ __forceinline__ unsigned fs_mask_bits(const fs_params &p, int b, unsigned tok) {
  return fs_mask_bits_n(p, b, tok, N);
}

/* A masked token's logit: -inf (flashsampling.h: drawn as if its logit were). */
#define FS_MASKED_LOGIT __int_as_float(0xff800000)

/* The token mask applied to N logits: z[i] becomes -inf where bit i of allow
** is 0. */
template <int N>
__device__ __forceinline__ void fs_mask_logits(float (&z)[N], unsigned allow) {
#pragma unroll
  for (int i = 0; i < N; i++) z[i] = allow >> i & 1u ? z[i] : FS_MASKED_LOGIT;
}

/* No bound from other chunks (fs_fold_rows' sb). */
#define FS_NO_BOUND __int_as_float(0x7fffffff)

/* Folds rows [r0, r1) (r0 and r1 multiples of 4) of column c for sample s
** into the lane's best: one Philox call per four tokens.  Rows from v_end on
** are skipped.  Once the best has a number for its score (all but a lane's
** first quad), a token takes its place by one fp32 compare.
** sb: a score another chunk's token of this row and sample has reached, or
** FS_NO_BOUND.  Given one, the noise is pruned exactly (fs_prune_need): a
** quad whose tokens cannot beat the larger of sb and the lane's best is
** skipped, before its Philox call when no word could (its largest logit too
** far below), else after it, before the logs, when all four words are too
** large.  A skipped token loses to an existing one, so the row's draw is
** unchanged; only this chunk's candidate may then be a lesser token.
** GENERAL (else vocab_offset % 4 == 0 and no mask, the common call): a
** vocab_offset not a multiple of 4 makes the token quads straddle the rows
** (two Philox calls per quad), and p.mask's zero bits make logits -inf
** first, read once per 32 rows of the call (one word, two where those rows
** straddle words: the overlap mode's one-quad calls read one word a quad).
** Both are uniform branches, so one instance serves the three uncommon
** cases (compiling each as its own instance cost a third of the wg family's
** compile time: perf-notes 26b). */
template <bool GENERAL>
__device__ __forceinline__ void fs_epilogue_rows(const fs_params &p, const float *zcol,
                                                 const fs_col &c, int r0, int r1, int vrow0,
                                                 int v_end, unsigned s, fs_best &best, float sb) {
  const unsigned phase = GENERAL ? (unsigned)p.vocab_offset & 3u : 0u;
  const bool masked = GENERAL && p.mask != nullptr;
  unsigned allow32 = 0xffffffffu; /* mask bits of rows r0 + 32 i .. r0 + 32 i + 31 */
  for (int r = r0; r < r1; r += 4) {
    const int v = vrow0 + r;
    if (v >= v_end) break;
    const float4 z4 = *(const float4 *)(zcol + r);
    float z[4] = {z4.x, z4.y, z4.z, z4.w};
    const unsigned tok0 = (unsigned)(p.vocab_offset + v);
    if (masked) {
      if (((r - r0) & 31) == 0) /* the rows this call folds, up to 32 */
        allow32 = fs_mask_bits_n(p, c.b, tok0, (unsigned)min(32, r1 - r));
      const unsigned allow = allow32 >> ((r - r0) & 31);
      /* four masked tokens lose to any best with a number (-inf included:
      ** ties go to the earlier token) */
      if (!(allow & 0xfu) && best.s == best.s) continue;
      fs_mask_logits<4>(z, allow);
    }
    float sc[4] = {z[0], z[1], z[2], z[3]};
    if (!c.greedy) {
      float t = FS_NO_BOUND; /* the noise a token of the quad must exceed, if bounded */
      if (sb == sb) {
        const float bound = fmaxf(best.s, sb);
        if (fabsf(bound) < __int_as_float(0x7f800000)) {
          t = fs_prune_need(bound, fmaxf(fmaxf(z[0], z[1]), fmaxf(z[2], z[3])), c.inv_t);
          if (t > FS_GUMBEL_CAP) continue; /* no word reaches it: no Philox either */
        }
      }
      unsigned x[4]; /* the random words of tokens tok0 .. tok0 + 3 */
      const fs_philox_out q0 = fs_noise_quad(c.seed, c.off, tok0 >> 2, s, c.tag);
      if (phase) { /* 0 in the common instance: the branch folds away */
        const fs_philox_out q1 = fs_noise_quad(c.seed, c.off, (tok0 >> 2) + 1u, s, c.tag);
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const unsigned w = phase + (unsigned)j; /* word of token tok0 + j */
          x[j] = w == 1 ? q0.v[1] : w == 2 ? q0.v[2] : w == 3 ? q0.v[3]
               : w == 4 ? q1.v[0] : w == 5 ? q1.v[1] : q1.v[2];
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; j++) x[j] = q0.v[j];
      }
      if (t == t) {
        const unsigned X = fs_prune_word(t);
        if (min(min(x[0], x[1]), min(x[2], x[3])) > X) continue; /* no word small enough */
      }
#pragma unroll
      for (int j = 0; j < 4; j++) sc[j] = fmaf(z[j], c.inv_t, fs_gumbel_fast(x[j]));
    }
    if (best.s == best.s && v + 4 <= v_end) {
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (sc[j] > best.s) best.s = sc[j], best.z = z[j], best.tok = tok0 + (unsigned)j;
    } else {
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (v + j < v_end &&
            (sc[j] > best.s || (best.s != best.s && (sc[j] == sc[j] || best.tok == FS_NO_TOKEN))))
          best.s = sc[j], best.z = z[j], best.tok = tok0 + (unsigned)j;
    }
  }
}

/* fs_epilogue_rows: the common instance for calls without a mask at a
** vocab_offset that is a multiple of 4, the general one for the rest (a
** uniform branch). */
__device__ __forceinline__ void fs_fold_rows(const fs_params &p, const float *zcol,
                                             const fs_col &c, int r0, int r1, int vrow0,
                                             int v_end, unsigned s, fs_best &best, float sb) {
  if (p.mask || ((unsigned)p.vocab_offset & 3u))
    fs_epilogue_rows<true>(p, zcol, c, r0, r1, vrow0, v_end, s, best, sb);
  else
    fs_epilogue_rows<false>(p, zcol, c, r0, r1, vrow0, v_end, s, best, sb);
}

/* ---- FS_NOISE_GROUP16 (flashsampling.h) ----------------------------------- */
static_assert((TPC * RPT) % 16 == 0, "a column's staged rows must be whole groups of 16");

/* 2^x on the special-function unit (ex2.approx.ftz.f32: relative error
** <= 2^-22.5; -inf gives +0, NaN gives NaN). */
__device__ __forceinline__ float fs_ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Offers (score sc, logit z, token tok) to a lane's best; tokens come in
** increasing order (fs_best). */
__device__ __forceinline__ void fs_best_offer(fs_best &best, float sc, float z, unsigned tok) {
  if (sc > best.s || (best.s != best.s && (sc == sc || best.tok == FS_NO_TOKEN)))
    best.s = sc, best.z = z, best.tok = tok;
}

/* The group of 16 global ids from tok0 (a multiple of 16) for sample s of
** column c: its first nv (1..16) tokens are staged at zg[0 .. nv) (16-byte
** aligned shared memory), the rest lie past the chunk.  With m the largest
** logit and c2 = log2(e) / T, token i weighs 2^(z_i c2 - m c2) (0 for -inf
** and NaN logits); the running sums P_i of the weights, in token order, end
** at S; the group scores m / T + ln S + g (its Gumbel variate) and offers
** the first token with P_i > u S (u its uniform, the product rounded toward
** zero, so that P_15 = S exceeds it).  A group without finite mass (m is
** +-inf or NaN, or m c2 overflows) offers its first token equal to m (the
** first token when m is NaN) with score m / T (m when that is NaN).  allow
** (16 bits): bit i 0 makes token i's logit -inf (the token mask; 0xffff
** without). */
__device__ __forceinline__ void fs_fold_group(const float *zg, const fs_col &c, unsigned tok0,
                                              int nv, unsigned s, unsigned allow,
                                              fs_best &best) {
  float w[16];
#pragma unroll
  for (int q = 0; q < 4; q++) {
    const float4 z4 = *(const float4 *)(zg + 4 * q);
    w[4 * q] = z4.x, w[4 * q + 1] = z4.y, w[4 * q + 2] = z4.z, w[4 * q + 3] = z4.w;
  }
  if (allow != 0xffffu) {
    if (!allow && best.s == best.s) return; /* as fs_epilogue_rows' masked quads */
    fs_mask_logits<16>(w, allow);
  }
  if (nv < 16) {
    /* NaN past the chunk: no mass, never the max (fmaxf skips it) and never
    ** equal to it, so that tokens there are never picked, and m is NaN
    ** exactly when every token inside is (-inf here made a group of NaN
    ** logits offer the token past its end at score -inf, above NaN) */
#pragma unroll
    for (int i = 1; i < 16; i++)
      if (i >= nv) w[i] = __int_as_float(0x7fffffff);
  }
  float m = w[0];
#pragma unroll
  for (int i = 1; i < 16; i++) m = fmaxf(m, w[i]); /* NaN only if all are */
  const fs_philox_out r = fs_noise_group(c.seed, c.off, tok0 >> 4, s, c.tag);
  const float c2 = c.inv_t * 1.44269504088896341f, mc = m * c2;
  float sc;
  int n = 0;
  if (fabsf(mc) < __int_as_float(0x7f800000)) {
    float P = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; i++) {
      P += fmaxf(fs_ex2_approx(fmaf(w[i], c2, -mc)), 0.0f);
      w[i] = P;
    }
    const float t = __fmul_rz(fs_group_uniform(r.v[1]), P);
#pragma unroll
    for (int i = 0; i < 15; i++) n += w[i] <= t ? 1 : 0;
    sc = fmaf(m, c.inv_t, fmaf(0.69314718f, fs_lg2_approx(P), fs_gumbel_fast(r.v[0])));
  } else {
#pragma unroll
    for (int i = 15; i >= 0; i--)
      if (w[i] == m) n = i;
    sc = m * c.inv_t;
    if (sc != sc) sc = m;
  }
  fs_best_offer(best, sc, allow >> n & 1u ? zg[n] : FS_MASKED_LOGIT, tok0 + (unsigned)n);
}

/* Groups k = part + TPC j, j in [j0, j1), of a column whose ng groups of 16
** rows are staged at zcol[16 k ..] (rows vrow0 + 16 k ..); groups from v_end
** on are skipped. */
__device__ __forceinline__ void fs_fold_groups(const fs_params &p, const float *zcol,
                                               const fs_col &c, int part, int j0, int j1,
                                               int ng, int vrow0, int v_end, unsigned s,
                                               fs_best &best) {
  for (int j = j0; j < j1; j++) {
    const int k = part + TPC * j, v = vrow0 + 16 * k;
    if (k >= ng || v >= v_end) break;
    const unsigned tok0 = (unsigned)(p.vocab_offset + v);
    fs_fold_group(zcol + 16 * k, c, tok0, min(16, v_end - v), s,
                  p.mask ? fs_mask_bits<16>(p, c.b, tok0) & 0xffffu : 0xffffu, best);
  }
}

/* Groups per lane of a column of `rows` staged rows (some lanes get one less). */
#define FS_LANE_GROUPS(rows) (((rows) / 16 + TPC - 1) / TPC)

/* Lane part's share of a column's TPC * RPT staged rows: rows [part RPT,
** part RPT + RPT) with per-token noise (and for greedy columns), groups part,
** part + TPC, ... with FS_NOISE_GROUP16. */
__device__ __forceinline__ void fs_fold_part(const fs_params &p, const float *zcol,
                                             const fs_col &c, int part, int vrow0, int v_end,
                                             unsigned s, fs_best &best, float sb) {
  if (p.noise && !c.greedy)
    fs_fold_groups(p, zcol, c, part, 0, FS_LANE_GROUPS(TPC * RPT), TPC * RPT / 16, vrow0, v_end,
                   s, best);
  else
    fs_fold_rows(p, zcol, c, part * RPT, part * RPT + RPT, vrow0, v_end, s, best, sb);
}

/* The bound of batch row b (fused calls, sample 0): the largest key any
** chunk has published for it so far, read through L2, or 0 where none (no
** bound buffer, a row past B, the grouped noise; a greedy row's stays 0). */
__device__ __forceinline__ unsigned long long fs_bound_load(const fs_params &p, int b) {
  unsigned long long k = 0ull;
  if (p.bound && b < p.B && !p.noise)
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(k) : "l"(p.bound + b) : "memory");
  return k;
}

/* The score of a bound key for fs_fold_rows: FS_NO_BOUND for none (0). */
__device__ __forceinline__ float fs_bound_score(unsigned long long k) {
  return k ? fs_key_score(k) : FS_NO_BOUND;
}

/* The TPC consecutive lanes that share column c combine their bests' keys;
** where the result beats `known` (the column's bound as last read or
** published), the first of them publishes it with an atomic max and every
** lane takes it as known.  All lanes of the warp must call it together. */
__device__ __forceinline__ void fs_bound_publish(const fs_params &p, const fs_col &c,
                                                 const fs_best &b, bool leader,
                                                 unsigned long long &known) {
  unsigned long long k = p.bound && !c.greedy && !p.noise ? fs_best_key(b) : 0ull;
#pragma unroll
  for (int o = 1; o < TPC; o <<= 1) {
    const unsigned long long k2 = __shfl_xor_sync(0xffffffffu, k, o);
    k = k2 > k ? k2 : k;
  }
  if (k > known) {
    if (leader && c.b < p.B) atomicMax(p.bound + c.b, k);
    known = k;
  }
}

/* The TPC consecutive lanes that share column c combine their bests
** (bk, bz) for sample s, and the first of them (leader) stores the result as
** candidate (c.b, s, chunk), folded into the stored one when fold.  All
** lanes of the warp must call it together. */
__device__ __forceinline__ void fs_candidate_put(const fs_params &p, const fs_col &c, int s,
                                                 int chunk, bool fold, bool leader,
                                                 unsigned long long bk, float bz) {
#pragma unroll
  for (int o = 1; o < TPC; o <<= 1) {
    const unsigned long long k2 = __shfl_xor_sync(0xffffffffu, bk, o);
    const float z2 = __shfl_xor_sync(0xffffffffu, bz, o);
    keep_max(bk, bz, k2, z2);
  }
  if (leader && c.b < p.B) {
    const size_t ci = ((size_t)c.b * p.num_samples + s) * p.num_chunks + chunk;
    /* global accesses by name (NVRTC at sm_100 left plain stores generic), with
    ** the default caching: the fold reads back what this thread stored at the
    ** chunk's previous tile, from L1 (.cg, through L2, made the ws family's
    ** short tiles 9-12% slower at D = 1024: perf-notes 17e) */
    if (fold) keep_max(bk, bz, __ldca(p.cand_keys + ci), __ldca(p.cand_logits + ci));
    __stwb(p.cand_keys + ci, bk);
    __stwb(p.cand_logits + ci, bz);
  }
}

/* ---- logprobs (fs_options.logprobs): the raw logits' log-sum-exp -------- */
/* A running (m, l): m the largest raw logit folded, l the sum of exp(z - m)
** over them (none: -inf, 0).  A -inf logit adds nothing; NaN makes l NaN. */
struct fs_lse {
  float m, l;
};
__device__ __forceinline__ fs_lse fs_lse_none() { return {-__int_as_float(0x7f800000), 0.0f}; }

/* Folds another (m2, l2) into a. */
__device__ __forceinline__ void fs_lse_merge(fs_lse &a, float m2, float l2) {
  const float m = fmaxf(a.m, m2);
  if (m == -__int_as_float(0x7f800000)) { /* both empty (l NaN: an all-NaN quad) */
    a.l += l2;
    return;
  }
  a.l = a.l * __expf(a.m - m) + l2 * __expf(m2 - m);
  a.m = m;
}

/* exp(z - m) as 2^(z log2e - mc), mc = m log2e rounded: one FFMA and one
** MUFU a logit (perf-notes 29g: the epilogue pays ~10 us per instruction per
** logit at B = 256).  fs_lse_fix corrects a sum of them for mc's rounding
** (an offset of up to |m| 2^-24 in every exponent): the true sum is the sum
** times 2^d, d = mc - m log2e, ~ sum (1 + d ln 2).  m = +inf gives NaN. */
#define FS_L2E 1.44269504088896341f
__device__ __forceinline__ float fs_lse_term(float z, float mc) {
  return fs_ex2_approx(fmaf(z, FS_L2E, -mc));
}
__device__ __forceinline__ float fs_lse_fix(float sum, float m, float mc) {
  return fmaf(sum, -fmaf(m, FS_L2E, -mc) * 0.69314718f, sum);
}

/* Rows [r0, r1) (multiples of 4) of a staged column (rows vrow0 + r, those
** from v_end on skipped) into a, in two passes with no chain between the
** quads: their max m first (one FMNMX a row), then the sum of exp(z - m)
** into four independent sums (fs_lse_term: three instructions a row).  The
** share's whole quads run without bounds, its last rows one by one.  (A
** merge per quad, two exponentials waiting on the previous quad's, made
** logprobs cost 21% at B = 256: perf-notes 29e.)  A share whose rows are all
** -inf or NaN adds (-inf, 0), or NaN for l if any is NaN. */
__device__ __forceinline__ void fs_lse_rows(const float *zcol, int r0, int r1, int vrow0,
                                            int v_end, fs_lse &a) {
  const float ninf = -__int_as_float(0x7f800000);
  const int n = min(r1, v_end - vrow0) - r0; /* rows of the share inside the chunk */
  if (n <= 0) return;
  const int e4 = r0 + (n & ~3), e = r0 + n;
  float m = ninf;
#pragma unroll 1
  for (int r = r0; r < e4; r += 4) {
    const float4 z4 = *(const float4 *)(zcol + r);
    m = fmaxf(m, fmaxf(fmaxf(z4.x, z4.y), fmaxf(z4.z, z4.w)));
  }
  for (int r = e4; r < e; r++) m = fmaxf(m, zcol[r]);
  float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (m > ninf) {
    const float mc = m * FS_L2E;
#pragma unroll 1
    for (int r = r0; r < e4; r += 4) {
      const float4 z4 = *(const float4 *)(zcol + r);
      l[0] += fs_lse_term(z4.x, mc);
      l[1] += fs_lse_term(z4.y, mc);
      l[2] += fs_lse_term(z4.z, mc);
      l[3] += fs_lse_term(z4.w, mc);
    }
    for (int r = e4; r < e; r++) l[0] += fs_lse_term(zcol[r], mc);
    l[0] = fs_lse_fix((l[0] + l[1]) + (l[2] + l[3]), m, mc);
  } else { /* no finite or +inf logit: NaN if any is NaN */
    for (int r = r0; r < e; r++)
      if (zcol[r] != zcol[r]) l[0] = zcol[r];
  }
  fs_lse_merge(a, m, l[0]);
}

/* The TPC consecutive lanes that share column c combine their (m, l), and
** the first of them (leader) stores the result as the pair of (c.b, chunk),
** folded into the stored one when fold.  All lanes of the warp must call it
** together. */
__device__ __forceinline__ void fs_lse_put(const fs_params &p, const fs_col &c, int chunk,
                                           bool fold, bool leader, fs_lse a) {
#pragma unroll
  for (int o = 1; o < TPC; o <<= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, a.m, o);
    const float l2 = __shfl_xor_sync(0xffffffffu, a.l, o);
    fs_lse_merge(a, m2, l2);
  }
  if (leader && c.b < p.B) {
    float *e = p.lse + 2 * ((size_t)c.b * p.num_chunks + chunk);
    if (fold) fs_lse_merge(a, __ldca(e), __ldca(e + 1));
    __stwb(e, a.m);
    __stwb(e + 1, a.l);
  }
}

/* With logprobs: the thread's rows [r0, r0 + RPT) of a staged column into the
** pair of (c.b, chunk) (fs_lse_put; t == 0 starts it).  Every lane of the
** warp must call it (a uniform branch: p.lse is the call's). */
__device__ __forceinline__ void fs_lse_tile(const fs_params &p, const float *zcol,
                                            const fs_col &c, int r0, int vrow0, int v_end,
                                            int chunk, bool fold, bool leader) {
  if (!p.lse) return;
  fs_lse a = fs_lse_none();
  fs_lse_rows(zcol, r0, r0 + RPT, vrow0, v_end, a);
  fs_lse_put(p, c, chunk, fold, leader, a);
}

/* The epilogue of one vocab tile for one thread: rows [r0, r0 + RPT) of
** column c, staged at zcol[0 .. TILE_V) (fp32 logits of rows vrow0 + r),
** for every sample, into candidate (c.b, s, chunk); t == 0 starts the
** chunk's candidate.  All lanes of the warp must call it together.
** The noise is fs_gumbel_fast (fs_rng.h): within 2^-17 of the exact
** function of the same bits (2^-16 of the CPU reference's libm logs). */
__device__ __forceinline__ void fs_epilogue(const fs_params &p, const float *zcol,
                                            const fs_col &c, int r0, int vrow0, int v_end,
                                            int t, int chunk, bool leader) {
  fs_lse_tile(p, zcol, c, r0, vrow0, v_end, chunk, t > 0, leader);
  for (int s = 0; s < p.num_samples; s++) {
    fs_best best = fs_best_none();
    fs_fold_part(p, zcol, c, r0 / RPT, vrow0, v_end, (unsigned)s, best, FS_NO_BOUND);
    fs_candidate_put(p, c, s, chunk, t > 0, leader, fs_best_key(best), best.z);
  }
}

/* What fs_epilogue writes for a chunk without rows (v_end <= vrow0), in a
** few instructions: each sample's empty candidate and, with logprobs, the
** pair (-inf, 0).  All lanes of the warp must call it together. */
__device__ __forceinline__ void fs_epilogue_empty(const fs_params &p, const fs_col &c, int chunk,
                                                  bool leader) {
  if (p.lse) fs_lse_put(p, c, chunk, false, leader, fs_lse_none());
  const fs_best none = fs_best_none();
  for (int s = 0; s < p.num_samples; s++)
    fs_candidate_put(p, c, s, chunk, false, leader, fs_best_key(none), none.z);
}

/* Loads in flight per lane in fs_reduce_items: FS_RED_ITEMS items at once,
** FS_RED_CANDS candidates of each per pass (a pass covers 32 * FS_RED_CANDS
** chunks: 160 >= the 132 or so of a persistent grid, in one pass).  The
** reduction is a chain of L2 round trips: one item and 32 candidates per
** round trip made the last CTA's tail ~30 us at B = 128 (perf-notes 10a).
** A template may set FS_RED_ITEMS (before including this file) where its
** registers allow more in flight. */
#ifndef FS_RED_ITEMS
#define FS_RED_ITEMS 2
#endif
#define FS_RED_CANDS 5

/* The factor that brings a sum taken under max m2 to one under m >= m2: 1
** when m is -inf (every pair so far empty, its l 0 or NaN). */
__device__ __forceinline__ float fs_lse_scale(float m2, float m) {
  return m == -__int_as_float(0x7f800000) ? 1.0f : __expf(m2 - m);
}

/* Items [first, first + n), n <= FS_RED_ITEMS, by one warp: the max key
** over each item's G chunk candidates (and its logit); lane 0 writes.
** With logprobs (p.logprobs set; the tensor-parallel calls leave their
** pairs, p.lse without p.logprobs, to fsamp_tp_lse), the item's row's G
** (m, l) pairs are loaded after the
** candidates, all in flight together, and merged as a tree: the max of the
** m's first, then the l's scaled to it (one exponential a pair), so that no
** merge waits on another (a merge per pair after a round trip each made the
** last CTA's tail 20-30 us longer at B = 256: perf-notes 29g).
** Every lane of the warp passes the same first and n. */
__device__ __forceinline__ void fs_reduce_items(const fs_params &p, int first, int n, int lane) {
  const float ninf = -__int_as_float(0x7f800000);
  const int G = p.num_chunks;
  const bool lp = p.logprobs != nullptr; /* the call's: uniform */
  unsigned long long best[FS_RED_ITEMS];
  float z[FS_RED_ITEMS], lm[FS_RED_ITEMS], ll[FS_RED_ITEMS];
#pragma unroll
  for (int i = 0; i < FS_RED_ITEMS; i++) {
    best[i] = 0ull;
    z[i] = 0.0f;
    lm[i] = ninf;
    ll[i] = 0.0f;
  }
  for (int c0 = lane; c0 < G; c0 += 32 * FS_RED_CANDS) {
    unsigned long long k[FS_RED_ITEMS][FS_RED_CANDS];
    float l[FS_RED_ITEMS][FS_RED_CANDS];
#pragma unroll
    for (int i = 0; i < FS_RED_ITEMS; i++)
#pragma unroll
      for (int j = 0; j < FS_RED_CANDS; j++) { /* every load first, then the compares */
        const int c = c0 + 32 * j;
        const bool ok = i < n && c < G;
        const size_t at = (size_t)(first + i) * G + c;
        k[i][j] = ok ? __ldcg(p.cand_keys + at) : 0ull;
        l[i][j] = ok ? __ldcg(p.cand_logits + at) : 0.0f;
      }
#pragma unroll
    for (int i = 0; i < FS_RED_ITEMS; i++)
#pragma unroll
      for (int j = 0; j < FS_RED_CANDS; j++) keep_max(best[i], z[i], k[i][j], l[i][j]);
  }
  /* a pass of its own (beside the candidates' loads, the wg and wt families'
  ** eight items spilled): every load first, then the merges */
  for (int c0 = lane; lp && c0 < G; c0 += 32 * FS_RED_CANDS) {
    float em[FS_RED_ITEMS][FS_RED_CANDS], el[FS_RED_ITEMS][FS_RED_CANDS];
#pragma unroll
    for (int i = 0; i < FS_RED_ITEMS; i++)
#pragma unroll
      for (int j = 0; j < FS_RED_CANDS; j++) {
        const int c = c0 + 32 * j;
        const bool ok = i < n && c < G;
        const float *e = p.lse + 2 * ((size_t)((first + i) / p.num_samples) * G + c);
        em[i][j] = ok ? __ldcg(e) : ninf;
        el[i][j] = ok ? __ldcg(e + 1) : 0.0f;
      }
#pragma unroll
    for (int i = 0; i < FS_RED_ITEMS; i++) {
      float m = lm[i];
#pragma unroll
      for (int j = 0; j < FS_RED_CANDS; j++) m = fmaxf(m, em[i][j]);
      float s = ll[i] * fs_lse_scale(lm[i], m);
#pragma unroll
      for (int j = 0; j < FS_RED_CANDS; j++) s += el[i][j] * fs_lse_scale(em[i][j], m);
      lm[i] = m;
      ll[i] = s;
    }
  }
  if (lp) { /* the warp's pairs of every slot, the slots side by side */
#pragma unroll
    for (int i = 0; i < FS_RED_ITEMS; i++) {
      float m = lm[i];
      for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
      ll[i] *= fs_lse_scale(lm[i], m);
      lm[i] = m;
      for (int o = 16; o > 0; o >>= 1) ll[i] += __shfl_xor_sync(0xffffffffu, ll[i], o);
    }
  }
#pragma unroll
  for (int i = 0; i < FS_RED_ITEMS; i++) {
    if (i >= n) break; /* n is the warp's: no shuffle tree for empty slots */
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned long long k2 = __shfl_xor_sync(0xffffffffu, best[i], o);
      const float z2 = __shfl_xor_sync(0xffffffffu, z[i], o);
      if (k2 > best[i] || (k2 == best[i] && z2 > z[i])) {
        best[i] = k2;
        z[i] = z2;
      }
    }
    if (lane == 0) {
      const int item = first + i;
      __stwb(p.tokens + item, (int)fs_key_token(best[i]));
      if (p.logits) __stwb(p.logits + item, z[i]);
      if (p.keys) __stwb(p.keys + item, best[i]);
      if (lp) __stwb(p.logprobs + item, z[i] - (lm[i] + logf(ll[i])));
    }
  }
}

/* The barrier of the threads that call fs_last_cta_reduce: the whole CTA
** unless the template names a subset (threads 0 .. nthreads-1). */
#ifndef FS_TAIL_SYNC
#define FS_TAIL_SYNC() __syncthreads()
#endif

/* Called by threads 0 .. nthreads-1 (all that wrote candidates) after their
** candidates are written (a CTA may own several chunks): the last CTA of
** batch tile blockIdx.y to finish
** reduces the tile's items and resets the tile's counter for the next
** launch. */
__device__ __forceinline__ void fs_last_cta_reduce(const fs_params &p, int b0, int nthreads) {
  __shared__ int is_last;
  const int tid = threadIdx.x;
  __threadfence();
  FS_TAIL_SYNC();
  if (tid == 0) is_last = atomicAdd(p.counters + blockIdx.y, 1u) == gridDim.x - 1u;
  FS_TAIL_SYNC();
  if (!is_last) return;
  __threadfence();
  const int n = min(TILE_B, p.B - b0) * p.num_samples, step = nthreads / 32 * FS_RED_ITEMS;
  for (int i = (tid >> 5) * FS_RED_ITEMS; i < n; i += step)
    fs_reduce_items(p, b0 * p.num_samples + i, min(FS_RED_ITEMS, n - i), tid & 31);
  if (p.bound) /* every chunk of the tile has published: ready for the next launch */
    for (int i = tid; i < min(TILE_B, p.B - b0); i += nthreads) p.bound[b0 + i] = 0ull;
  if (tid == 0) p.counters[blockIdx.y] = 0u; /* ready for the next launch */
}

/* The balanced share of 16-row groups of chunk `chunk`: rows [*vb, *ve). */
__device__ __forceinline__ void fs_chunk_rows(const fs_params &p, int chunk, int *vb, int *ve) {
  const int G = p.num_chunks;
  *vb = (int)((long long)chunk * p.row_groups / G) * 16;
  *ve = min((int)((long long)(chunk + 1) * p.row_groups / G) * 16, p.V);
}

/* ---- tensor parallelism (runtime/tp.c) ----------------------------------- */
/* A shard's log-sum-exp L as a key whose u64 max over ranks is the largest
** L (NaN the largest of all, so that it reaches every rank), and back. */
__device__ __forceinline__ unsigned long long fs_lse_key(float L) {
  const unsigned b = __float_as_uint(L);
  if (L != L) return 0xffffffffull;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float fs_lse_unkey(unsigned long long k) {
  const unsigned b = (unsigned)k;
  return __uint_as_float((b & 0x80000000u) ? (b & 0x7fffffffu) : ~b);
}

#endif /* FS_DEVICE_H */
