/*
** fsamp_wt.cu: fused LM-head sampling with transposed warpgroup MMA (wgmma,
** sm_90a): the batch rows as the wgmma M, the vocabulary as N.
**
** The loads are those of fsamp_wg.cu: one producer thread streams, per
** stage, TILE_K/64 boxes of [TILE_V rows x 64 elements] of W and [TILE_B x
** 64] of H by TMA (128-byte swizzle, zero fill past the edges), completing
** on the stage's "full" mbarrier; with CLUSTER = 2 the two CTAs of a
** cluster (adjacent vocab chunks) share H by multicast.  The operands swap:
** consumer warpgroup g issues wgmma m64nTILE_Vk16 with the m64 blocks g *
** MB .. g * MB + MB - 1 of the H box as A and the whole W box as B.  A
** thread's accumulators then hold, per m64 block, two batch rows (16 * warp
** + lane / 4 and the row 8 below) and TILE_V / 4 of the tile's vocabulary
** columns for each (8 i + 2 (lane % 4) + {0, 1}).  Sampling is a reduction
** over the vocabulary, so it runs in registers and over the four lanes of
** a quad: no logit is staged in shared memory (fsamp_wg.cu stages every
** tile and folds it from there, 18-23% of its consumers' time at B = 256,
** perf-notes 17b, 18c), and the shared memory is the ring.
**
** The epilogue, per tile and row of the thread:
**  - greedy rows of whole tiles: fold_greedy, unrolled, three instructions
**    per logit;
**  - per-token noise (FS_NOISE_TOKEN): lanes 2l and 2l + 1 of a quad need
**    halves of the same Philox quads of tokens, so each computes every other
**    one and they swap halves by two shuffles (one Philox per four tokens,
**    as in the staged families);
**  - FS_NOISE_GROUP16: group k of a tile is its columns 16k .. 16k + 15, four
**    per lane of a quad.  Per four groups k0 .. k0 + 3, a transpose over the
**    quad (quad_transpose: three xor rounds of four shuffles, 3 per group
**    where forming the sums over the quad took 17) gives lane q the sixteen
**    values of group k0 + q in token order, and the lane folds that group
**    alone with fs_fold_group's floating-point operations in its order
**    (fold_group), so that the draw is the staged families'.  The lane draws
**    its group's Philox words; its offers come in increasing token order
**    (groups q, q + 4, ...), and the quad's four bests meet by key in
**    fs_candidate_put, as for the per-token noise.
** The noisy paths are loops that pick a group's values out of the
** accumulators by a switch of constant indices (group_vals): unrolled, their
** code ran from instruction-cache misses (perf-notes 19a).  Chunks of whole
** tiles, the candidates and the last-CTA reduction are those of
** fsamp_wg.cu; a thread's best per row (one sample per row) is kept across a
** chunk's tiles in shared memory.  The epilogue is not overlapped with the
** next tile's wgmmas: it needs the accumulators, and the registers hold one
** set of them (128 of the 232 that setmaxnreg gives a consumer).
*/

/* ---- tunables (the generator overrides these) ---------------------------- */
#ifndef FS_BF16
#define FS_BF16 1          /* 1: bfloat16 inputs; 0: IEEE half */
#endif
#ifndef TILE_V
#define TILE_V 128         /* vocab columns per tile: the wgmma N (64, 128, 192, 256) */
#endif
#ifndef TILE_K
#define TILE_K 64          /* hidden elements per stage: 64 * (boxes per operand) */
#endif
#ifndef WGS
#define WGS 2              /* consumer warpgroups */
#endif
#ifndef MB
#define MB 2               /* m64 blocks of batch rows per consumer warpgroup */
#endif
#ifndef STAGES
#define STAGES 4           /* pipeline depth, 2..8 */
#endif
#ifndef CLUSTER
#define CLUSTER 1          /* CTAs per cluster sharing H by multicast: 1 or 2 */
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

/* ---- derived values and static checks ----------------------------------- */
#define TILE_B (64 * WGS * MB)        /* batch rows per CTA */
#define CWARPS (4 * WGS)              /* consumer warps: 0 .. CWARPS-1 */
#define CTHREADS (CWARPS * 32)
#define PTHREADS (WGS == 2 ? 128 : 32) /* the producer: a warpgroup or a warp */
#define THREADS (CTHREADS + PTHREADS)
#define KB (TILE_K / 64)              /* 64-element (128-byte) boxes per row and stage */
#define W_BOX (TILE_V * 64)           /* elements of one W box */
#define H_BOX (TILE_B * 64)
#define STAGE_ELEMS (KB * (W_BOX + H_BOX))
#define NACC (TILE_V / 2)             /* fp32 accumulators per m64 block and thread */
/* fs_device.h's geometry: the TPC = 4 lanes of a quad share a batch row (its
** fs_candidate_put combines them), each holding RPT of the tile's columns */
#define TPC 4
#define RPT (TILE_V / 4)

static_assert(TILE_V == 64 || TILE_V == 128 || TILE_V == 192 || TILE_V == 256,
              "TILE_V must be 64, 128, 192 or 256 (whole quads of groups of 16 per tile)");
static_assert(TILE_B <= 256, "a TMA box has at most 256 rows");
static_assert(MB * NACC <= 128, "at most 128 fp32 accumulators per thread");
static_assert(TILE_K % 64 == 0, "TILE_K must be a multiple of 64 (128-byte swizzle boxes)");
static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
static_assert(CLUSTER == 1 || CLUSTER == 2, "CLUSTER must be 1 or 2");

/* the producer leaves early (after setmaxnreg it has too few registers for
** more): the tail reduction is the consumers' alone, on barrier 3 */
#define FS_TAIL_SYNC() asm volatile("bar.sync 3, %0;\n" ::"n"(CTHREADS) : "memory")
#define FS_RED_ITEMS (WGS == 2 ? 8 : 2)

#include "fs_device.h"
#include "fs_tma.h"
#include "fs_ring.h"
#include "fs_wgmma.h"

#if TILE_V == 192
/* wgmma m64n192k16, the N of cuBLAS's B = 128 tiles (perf-notes 20), with
** fs_wgmma.h's contract (d the thread's 96 accumulators); here, not there,
** so that the other families' sources (and their winners' hashes) stay. */
__device__ __forceinline__ void wgmma_n192(float (&d)[96], unsigned long long da,
                                          unsigned long long db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16" FS_WGMMA_TYPES " {"
      "%0, %1, %2, %3, %4, %5, %6, %7,"
      "%8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23,"
      "%24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39,"
      "%40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55,"
      "%56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71,"
      "%72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87,"
      "%88, %89, %90, %91, %92, %93, %94, %95"
      "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(da), "l"(db), "r"(scale_d));
}
#endif

#define FS_CAT2(a, b) a##b
#define FS_CAT(a, b) FS_CAT2(a, b)
#define WGMMA FS_CAT(wgmma_n, TILE_V)

/* Fill `it` of the ring: waits until it is full and issues warpgroup g's
** wgmmas into acc (overwriting acc when first), committed as one group;
** base: the descriptor low word of the ring's first stage (fs_wgmma.h's
** wgmma_desc_word), to which the offsets add in 32 bits so that the
** per-wgmma arithmetic stays uniform (64-bit adds of per-thread descriptors,
** moved to uniform registers per wgmma, took 15 M of the mainloop's 60 M
** instructions: perf-notes 19a). */
__device__ __forceinline__ void mma_stage(float (&acc)[MB][NACC], unsigned base,
                                          unsigned long long *full, int it, int g, bool first) {
  const int slot = it % STAGES;
  mbar_wait(full + slot, (it / STAGES) & 1);
  const unsigned dw = base + (unsigned)slot * (STAGE_ELEMS * 2 / 16);
  const unsigned dh = dw + KB * W_BOX * 2 / 16 + (unsigned)(g * MB) * (64 * 64 * 2 / 16);
  wgmma_fence();
#pragma unroll
  for (int kb = 0; kb < KB; kb++)
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
      for (int kk = 0; kk < 4; kk++) /* k16 steps: +32 bytes = +2 in the descriptor */
        WGMMA(acc[mb], wgmma_desc_lo(dh + (kb * H_BOX + mb * 64 * 64) * 2 / 16 + 2 * kk),
              wgmma_desc_lo(dw + kb * W_BOX * 2 / 16 + 2 * kk), !first || (kb | kk) != 0);
  wgmma_commit();
}

/* k-step kt of a tile: its wgmmas issued, then the previous stage's awaited
** (one group stays in flight) and its slot released; mma_drain ends the
** tile (`it` = the fills consumed so far). */
__device__ __forceinline__ void mma_step(float (&acc)[MB][NACC], unsigned base,
                                         unsigned long long *full, unsigned long long *empty,
                                         int it, int kt, int g, unsigned rank) {
  mma_stage(acc, base, full, it, g, kt == 0);
  if (kt > 0) {
    wgmma_wait<1>();
    if ((threadIdx.x & 31) == 0) release(empty + (it + STAGES - 1) % STAGES, rank);
  }
}
__device__ __forceinline__ void mma_drain(unsigned long long *empty, int it, unsigned rank) {
  wgmma_wait<0>();
  if ((threadIdx.x & 31) == 0) release(empty + (it - 1) % STAGES, rank);
}

/* A thread's rows: r = 2 mb + h, the accumulator half h of m64 block mb. */
#define NROWS (2 * MB)
#define NG (TILE_V / 16) /* groups of 16 columns per tile row */

/* The batch row (within the CTA's tile) of the thread's row r. */
__device__ __forceinline__ int acc_row(int r) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return ((warp >> 2) * MB + (r >> 1)) * 64 + (warp & 3) * 16 + (lane >> 2) + 8 * (r & 1);
}

/* The lane's values of groups G c .. G c + G - 1 of its row G c / NG (G
** divides NG): z[4 g + e] = tile column 16 k + 8 (e / 2) + 2 q + e % 2 of
** group k = (G c + g) % NG (q = lane % 4).  A switch of constant indices,
** so that the epilogue is a loop (its unrolled form, 4-8 K instructions per
** row, ran from the instruction cache's misses: perf-notes 19a) while the
** accumulators stay in registers. */
#define FS_GV(c)                                                                   \
  case c:                                                                          \
    if constexpr ((c) < NROWS * NG / G) {                                          \
    constexpr int c0_ = (c) * G;                                                   \
    constexpr int m_ = (c0_ / NG / 2) < MB ? c0_ / NG / 2 : MB - 1;                \
    constexpr int h_ = c0_ / NG % 2, k_ = c0_ % NG;                                \
    _Pragma("unroll") for (int g_ = 0; g_ < G; g_++) {                             \
      z[4 * g_] = acc[m_][8 * (k_ + g_) + 2 * h_];                                 \
      z[4 * g_ + 1] = acc[m_][8 * (k_ + g_) + 2 * h_ + 1];                         \
      z[4 * g_ + 2] = acc[m_][8 * (k_ + g_) + 4 + 2 * h_];                         \
      z[4 * g_ + 3] = acc[m_][8 * (k_ + g_) + 5 + 2 * h_];                         \
    }                                                                              \
  } break;
template <int G>
__device__ __forceinline__ void group_vals(const float (&acc)[MB][NACC], int c,
                                           float (&z)[4 * G]) {
  static_assert(NG % G == 0 && NROWS * NG <= 32, "whole blocks of at most 32 groups");
  switch (c) {
    FS_GV(0) FS_GV(1) FS_GV(2) FS_GV(3) FS_GV(4) FS_GV(5) FS_GV(6) FS_GV(7)
    FS_GV(8) FS_GV(9) FS_GV(10) FS_GV(11) FS_GV(12) FS_GV(13) FS_GV(14) FS_GV(15)
    FS_GV(16) FS_GV(17) FS_GV(18) FS_GV(19) FS_GV(20) FS_GV(21) FS_GV(22) FS_GV(23)
    FS_GV(24) FS_GV(25) FS_GV(26) FS_GV(27) FS_GV(28) FS_GV(29) FS_GV(30) FS_GV(31)
  }
}
#undef FS_GV

/* With p.softcap = c > 0 (fs_options.logit_softcap; the caller's uniform
** branch): the thread's accumulators capped in place, c tanh(z / c), before
** the tile's folds, log-sum-exps and greedy rows read them.  Unrolled, so
** that they stay in registers (capping the values each fold reads instead,
** through group_vals, spilled the 128-accumulator tiles at Llama's
** vocabulary: three copies of the cap beside the folds' live values). */
__device__ __forceinline__ void softcap_acc(const fs_params &p, float (&acc)[MB][NACC]) {
  const float c = p.softcap, ic = __fdividef(1.0f, c);
#pragma unroll
  for (int mb = 0; mb < MB; mb++)
#pragma unroll
    for (int i = 0; i < NACC; i++) acc[mb][i] = fs_softcap1(acc[mb][i], c, ic);
}

/* Word j (0..3) of a Philox output, without indexing (no local memory). */
__device__ __forceinline__ unsigned fs_word(const fs_philox_out &r, unsigned j) {
  return j == 0 ? r.v[0] : j == 1 ? r.v[1] : j == 2 ? r.v[2] : r.v[3];
}

/* Folds the lane's values z of group k of a row (tile column of z[e]: 16 k
** + 8 (e / 2) + 2 q + e % 2, global id tok0 + column, W row vrow0 + column)
** into the lane's best, in increasing token order; columns from v_end on
** are skipped.  noise (warp-uniform): the words of sample s are formed (a
** lane whose row is greedy ignores them); active: this lane's row takes
** this path (the others run its shuffles only).  Unphased (tok0 % 4 == 0),
** lanes 2l and 2l + 1 of the quad need halves of the same two Philox quads:
** each computes one and they swap halves; PHASED computes the quads its two
** pairs straddle.  With a token mask, masked tokens' logits are -inf. */
template <bool PHASED>
__device__ __forceinline__ void fold_tokens(const fs_params &p, const float (&zin)[4], int k,
                                            const fs_col &c, unsigned tok0, int vrow0, int v_end,
                                            bool noise, bool active, unsigned s, fs_best &best) {
  const unsigned q = threadIdx.x & 3u, odd = q & 1u;
  unsigned w[4] = {0u, 0u, 0u, 0u};
  if (noise) {
    if (PHASED) {
#pragma unroll
      for (int d = 0; d < 2; d++) {
        const unsigned t = tok0 + 16u * (unsigned)k + 8u * (unsigned)d + 2u * q;
        const fs_philox_out r0 = fs_noise_quad(c.seed, c.off, t >> 2, s, c.tag);
        const fs_philox_out r1 = fs_noise_quad(c.seed, c.off, (t >> 2) + 1u, s, c.tag);
        w[2 * d] = fs_word(r0, t & 3u);
        w[2 * d + 1] = (t & 3u) == 3u ? r1.v[0] : fs_word(r0, (t & 3u) + 1u);
      }
    } else {
      /* pair 2k + odd's quad: tokens 16 k + 8 odd + 4 (q / 2) .. + 3 */
      const unsigned quad = (tok0 >> 2) + 4u * (unsigned)k + 2u * odd + (q >> 1);
      const fs_philox_out r = fs_noise_quad(c.seed, c.off, quad, s, c.tag);
      const unsigned x0 = __shfl_xor_sync(0xffffffffu, odd ? r.v[0] : r.v[2], 1);
      const unsigned x1 = __shfl_xor_sync(0xffffffffu, odd ? r.v[1] : r.v[3], 1);
      w[0] = odd ? x0 : r.v[0];
      w[1] = odd ? x1 : r.v[1];
      w[2] = odd ? r.v[2] : x0;
      w[3] = odd ? r.v[3] : x1;
    }
  }
  if (!active) return;
  float z[4] = {zin[0], zin[1], zin[2], zin[3]};
  if (p.mask) { /* tokens 2 q, 2 q + 1, 8 + 2 q, 9 + 2 q of group k */
    const unsigned allow = fs_mask_bits<10>(p, c.b, tok0 + 16u * (unsigned)k + 2u * q);
    fs_mask_logits<4>(z, (allow & 3u) | (allow >> 6 & 0xcu)); /* bits 0, 1, 8, 9 */
  }
  const bool use_noise = noise && !c.greedy;
  float sc[4];
#pragma unroll
  for (int e = 0; e < 4; e++) sc[e] = use_noise ? fmaf(z[e], c.inv_t, fs_gumbel_fast(w[e])) : z[e];
  const unsigned t0 = tok0 + 16u * (unsigned)k + 2u * q; /* the token of z[0] */
  if (vrow0 + TILE_V <= v_end && best.s == best.s) { /* one compare per token */
#pragma unroll
    for (int e = 0; e < 4; e++)
      if (sc[e] > best.s) best.s = sc[e], best.z = z[e], best.tok = t0 + 8u * (e >> 1) + (e & 1);
  } else {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const unsigned off = 8u * (e >> 1) + (e & 1);
      if (vrow0 + (int)(t0 - tok0 + off) < v_end) fs_best_offer(best, sc[e], z[e], t0 + off);
    }
  }
}

/* Block m ^ q of z (block m: z[4 m .. 4 m + 3]) moved to block m's place,
** for each m: a swap by each bit of q, 32 selects of constant indices (no
** local memory). */
__device__ __forceinline__ void xor_blocks(float (&z)[16], unsigned q) {
#pragma unroll
  for (int bit = 1; bit < 4; bit <<= 1) /* block m <- block m ^ (q & bit) */
#pragma unroll
    for (int m = 0; m < 4; m++)
      if (!(m & bit))
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const float a = z[4 * m + e], b = z[4 * (m | bit) + e];
          z[4 * m + e] = q & (unsigned)bit ? b : a;
          z[4 * (m | bit) + e] = q & (unsigned)bit ? a : b;
        }
}

/* The quad transpose of four groups k0 .. k0 + 3 of a row.  In, z[4 t + e]
** is the lane's value of group k0 + t at tile column 16 (k0 + t) + 8 (e / 2)
** + 2 q + e % 2 (group_vals<4>); out, z[i] is token i of group k0 + q, in
** token order: token 8 h + 2 q' + e2 is element 2 h + e2 of lane q''s block
** q.  Three xor rounds (m = 1, 2, 3) of one block each, 12 shuffles: lane q
** sends its block q ^ m and receives lane q ^ m's block q.  Every lane of the
** warp must call it (the shuffles name all 32 lanes). */
__device__ __forceinline__ void quad_transpose(float (&z)[16]) {
  const unsigned q = threadIdx.x & 3u;
  xor_blocks(z, q); /* block m: the lane's values of group k0 + (q ^ m) */
#pragma unroll
  for (int m = 1; m < 4; m++)
#pragma unroll
    for (int e = 0; e < 4; e++) z[4 * m + e] = __shfl_xor_sync(0xffffffffu, z[4 * m + e], m);
  xor_blocks(z, q); /* block q': lane q''s values of group k0 + q */
  float y[16];
#pragma unroll
  for (int i = 0; i < 16; i++) y[i] = z[4 * ((i & 7) >> 1) + 2 * (i >> 3) + (i & 1)];
#pragma unroll
  for (int i = 0; i < 16; i++) z[i] = y[i];
}

/* FS_NOISE_GROUP16 for one group held by the lane, offered to its best:
** z[i] its token i (global id tok + i), the first nv inside the chunk (PART:
** 1 <= nv < 16, the vocabulary's last group; else nv >= 16), g and u its
** Gumbel variate and uniform.  fs_fold_group's floating-point operations in
** its order, so that the draw is the staged families' to the bit: the max
** over the tokens inside the chunk, the weights and their running sums P_i in
** token order, the count n of P_i <= u P (i < 15), the score, and the cases
** without finite mass.  From registers: the pick's logit z[n] (unmasked, as
** fs_fold_group's staged zg[n]) by a tree of selects on the bits of n. */
template <bool PART>
__device__ __forceinline__ void fold_group(const float (&z)[16], float g, float u, float inv_t,
                                           unsigned tok, int nv, fs_best &best) {
  float w[16];
#pragma unroll
  for (int i = 0; i < 16; i++) /* NaN past the chunk, as fs_fold_group (full groups skip it) */
    w[i] = !PART || i == 0 || i < nv ? z[i] : __int_as_float(0x7fffffff);
  float m = w[0];
#pragma unroll
  for (int i = 1; i < 16; i++) m = fmaxf(m, w[i]); /* NaN only if all are */
  const float c2 = inv_t * 1.44269504088896341f, mc = m * c2;
  float sc;
  int n = 0;
  if (fabsf(mc) < __int_as_float(0x7f800000)) {
    float P = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; i++) {
      P += fmaxf(fs_ex2_approx(fmaf(w[i], c2, -mc)), 0.0f);
      w[i] = P;
    }
    const float t = __fmul_rz(u, P);
    unsigned le = 0u; /* bit i: P_i <= t (the count by one popc) */
#pragma unroll
    for (int i = 0; i < 15; i++) le |= (w[i] <= t ? 1u : 0u) << i;
    n = __popc(le);
    sc = fmaf(m, inv_t, fmaf(0.69314718f, fs_lg2_approx(P), g));
  } else {
#pragma unroll
    for (int i = 15; i >= 0; i--)
      if (w[i] == m) n = i;
    sc = m * inv_t;
    if (sc != sc) sc = m;
  }
  float x[8];
#pragma unroll
  for (int j = 0; j < 8; j++) x[j] = n & 1 ? z[2 * j + 1] : z[2 * j];
#pragma unroll
  for (int j = 0; j < 4; j++) x[j] = n & 2 ? x[2 * j + 1] : x[2 * j];
#pragma unroll
  for (int j = 0; j < 2; j++) x[j] = n & 4 ? x[2 * j + 1] : x[2 * j];
  fs_best_offer(best, sc, n & 8 ? x[1] : x[0], tok + (unsigned)n);
}

/* A greedy row of a whole tile (half h of a[], tile columns 8 i + 2 q + e at
** global ids tok0 + column) into a best that has a number for its score:
** the first largest logit, three instructions per logit, unrolled (no
** noise, so its code is small). */
__device__ __forceinline__ void fold_greedy(const float (&a)[NACC], int h, unsigned tok0,
                                            fs_best &best) {
  float m = best.s;
  int bc = -1; /* the column of a larger logit, if any */
#pragma unroll
  for (int i = 0; i < NACC / 4; i++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const float z = a[4 * i + 2 * h + e];
      if (z > m) m = z, bc = 8 * i + e;
    }
  if (bc >= 0) best.s = best.z = m, best.tok = tok0 + (unsigned)bc + 2u * (threadIdx.x & 3u);
}

/* With logprobs: a row's logits of the tile (half h of a[], tile columns
** 8 i + 2 q + e, as fold_greedy reads them; those from v_end on -inf) into
** the pair of (c.b, chunk) (fs_lse_put; fold: not the chunk's first tile).
** Two passes over the registers as fs_lse_rows: the max in four independent
** FMNMX chains, then four sums of fs_lse_term.  Every lane of the warp calls
** it; unrolled (constant indices, so that a[] stays in registers), after the
** tile's samples as fold_greedy (called per row inside the samples' loop,
** the 256-column tiles spilled 8 bytes at the 168-register limit).
** lse_pair: the pair of half h; WHOLE: a whole tile, else the columns from
** column -c0 on (c0 + 8 i + e >= 0) lie past v_end. */
template <bool WHOLE>
__device__ __forceinline__ fs_lse lse_pair(const float (&a)[NACC], int h, int c0) {
  const float ninf = -__int_as_float(0x7f800000);
  float mq[4] = {ninf, ninf, ninf, ninf}, l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < NACC / 4; i++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const float z = WHOLE || c0 + 8 * i + e < 0 ? a[4 * i + 2 * h + e] : ninf;
      mq[(2 * i + e) & 3] = fmaxf(mq[(2 * i + e) & 3], z);
    }
  const float m = fmaxf(fmaxf(mq[0], mq[1]), fmaxf(mq[2], mq[3]));
  if (m > ninf) {
    const float mc = m * FS_L2E;
#pragma unroll
    for (int i = 0; i < NACC / 4; i++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const float t = fs_lse_term(a[4 * i + 2 * h + e], mc);
        l[(2 * i + e) & 3] += WHOLE || c0 + 8 * i + e < 0 ? t : 0.0f;
      }
    return {m, fs_lse_fix((l[0] + l[1]) + (l[2] + l[3]), m, mc)};
  }
#pragma unroll /* no finite or +inf logit: NaN if any is NaN */
  for (int i = 0; i < NACC / 4; i++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const float z = a[4 * i + 2 * h + e];
      if ((WHOLE || c0 + 8 * i + e < 0) && z != z) l[0] = z;
    }
  return {m, l[0]};
}

__device__ __forceinline__ void lse_row(const fs_params &p, const float (&a)[NACC], int h,
                                        const fs_col &c, int vrow0, int v_end, int chunk,
                                        bool fold, bool leader) {
  const fs_lse l = vrow0 + TILE_V <= v_end
                       ? lse_pair<true>(a, h, 0)
                       : lse_pair<false>(a, h, vrow0 + 2 * (int)(threadIdx.x & 3u) - v_end);
  fs_lse_put(p, c, chunk, fold, leader, l);
}

/* Row r of the tile (its first W row vrow0), sample s, into the lane's best:
** grouped rows (FS_NOISE_GROUP16 and T > 0) by quad_transpose and fold_group,
** the others by fold_tokens (greedy rows with noise false); lanes whose row
** takes neither path (not grouped, or skip: left to fold_greedy) only run the
** shuffles.  Every lane of the warp calls it.  Loops, not unrolled:
** group_vals picks each group's values. */
__device__ __forceinline__ void fold_row(const fs_params &p, const float (&acc)[MB][NACC], int r,
                                         const fs_col &c, int vrow0, int v_end, unsigned s,
                                         bool skip, fs_best &best) {
  const unsigned q = threadIdx.x & 3u;
  const unsigned tok0 = (unsigned)(p.vocab_offset + vrow0);
  const bool grouped = p.noise && !c.greedy;
  if (__any_sync(0xffffffffu, grouped)) {
#pragma unroll 1
    for (int k0 = 0; k0 < NG; k0 += 4) {
      /* lane q draws the words of group k = k0 + q and folds it */
      const int k = k0 + (int)q, nv = v_end - (vrow0 + 16 * k); /* nv: its tokens in the chunk */
      const fs_philox_out rw =
          fs_noise_group(c.seed, c.off, (tok0 >> 4) + (unsigned)k, s, c.tag);
      float z[16];
      group_vals<4>(acc, (r * NG + k0) / 4, z);
      quad_transpose(z);
      if (grouped && nv > 0 && p.mask) { /* the token mask: masked logits -inf */
        fs_mask_logits<16>(z, fs_mask_bits<16>(p, c.b, tok0 + 16u * (unsigned)k));
      }
      if (grouped && nv > 0) {
        const float g = fs_gumbel_fast(rw.v[0]), u = fs_group_uniform(rw.v[1]);
        const unsigned tok = tok0 + 16u * (unsigned)k;
        if (nv >= 16)
          fold_group<false>(z, g, u, c.inv_t, tok, nv, best);
        else
          fold_group<true>(z, g, u, c.inv_t, tok, nv, best);
      }
    }
  }
  const bool tokens = !grouped && !skip;
  if (__any_sync(0xffffffffu, tokens)) {
    const bool noise = !p.noise && __any_sync(0xffffffffu, !c.greedy);
#pragma unroll 1
    for (int k = 0; k < NG; k += 2) {
      float z[8];
      group_vals<2>(acc, (r * NG + k) / 2, z);
#pragma unroll
      for (int t = 0; t < 2; t++) {
        const float zt[4] = {z[4 * t], z[4 * t + 1], z[4 * t + 2], z[4 * t + 3]};
        if (tok0 & 3u)
          fold_tokens<true>(p, zt, k + t, c, tok0, vrow0, v_end, noise, tokens, s, best);
        else
          fold_tokens<false>(p, zt, k + t, c, tok0, vrow0, v_end, noise, tokens, s, best);
      }
    }
  }
}

/* The consumer warpgroups: wgmma over each stage of each of the nt tiles of
** chunk blockIdx.x (the last ones past its rows when the cluster's peer has
** more), then the tile's epilogue from the accumulators, row by row.  One
** sample per row: a thread keeps its best of each of its NROWS rows across
** the tiles, in shared memory (sbest[r][thread]; in registers they would
** need the rows unrolled), and stores the candidates once, at the chunk's
** end; several: each tile's candidates folded into the stored ones. */
__device__ __forceinline__ void consume(const fs_params &p, const fs_elem *smem, fs_best *sbest,
                                        unsigned long long *full, unsigned long long *empty,
                                        int nt, int KT, int b0, unsigned rank) {
  const int chunk = blockIdx.x, tid = threadIdx.x;
  const fs_span sp = chunk_span(p, chunk);
  const bool fused = p.num_samples == 1, leader = (tid & 3) == 0;
#pragma unroll 1
  for (int r = 0; r < NROWS; r++) sbest[r * CTHREADS + tid] = fs_best_none();
  float acc[MB][NACC];
#pragma unroll
  for (int mb = 0; mb < MB; mb++)
#pragma unroll
    for (int i = 0; i < NACC; i++) acc[mb][i] = 0.0f;

  /* the warpgroup, broadcast so that the compiler keeps it (and the
  ** descriptors) in uniform registers */
  const int g = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const unsigned base = wgmma_desc_word(smem_addr(smem));
  int it = 0; /* fills of the ring consumed */
  for (int j = 0; j < nt; j++) {
    for (int kt = 0; kt < KT; kt++, it++) mma_step(acc, base, full, empty, it, kt, g, rank);
    mma_drain(empty, it, rank);
    if (p.softcap > 0.0f) softcap_acc(p, acc); /* fs_options.logit_softcap */
    const int vrow0 = sp.v0 + j * TILE_V;
    for (int s = 0; s < p.num_samples; s++) {
      unsigned fastrows = 0u; /* rows left to fold_greedy */
#pragma unroll 1
      for (int r = 0; r < NROWS; r++) {
        /* the row's parameters, loaded per tile (L1 hits), not held */
        const fs_col col = fs_col_load(p, b0 + acc_row(r));
        fs_best b = fused ? sbest[r * CTHREADS + tid] : fs_best_none();
        /* greedy rows of whole tiles, once a best has a number: unrolled
        ** (three instructions per logit) in fold_greedy below (unmasked) */
        const bool fast =
            fused && col.greedy && !p.mask && vrow0 + TILE_V <= sp.v_end && b.s == b.s;
        fastrows |= (unsigned)fast << r;
        if (__any_sync(0xffffffffu, !fast))
          fold_row(p, acc, r, col, vrow0, sp.v_end, (unsigned)s, fast, b);
        if (fused)
          sbest[r * CTHREADS + tid] = b;
        else
          fs_candidate_put(p, col, s, chunk, j > 0, leader, fs_best_key(b), b.z);
      }
#pragma unroll
      for (int r = 0; r < NROWS; r++)
        if (fastrows >> r & 1u) {
          fs_best b = sbest[r * CTHREADS + tid];
          fold_greedy(acc[r >> 1], r & 1, (unsigned)(p.vocab_offset + vrow0), b);
          sbest[r * CTHREADS + tid] = b;
        }
    }
    if (p.lse)
#pragma unroll
      for (int r = 0; r < NROWS; r++)
        lse_row(p, acc[r >> 1], r & 1, fs_col_load(p, b0 + acc_row(r)), vrow0, sp.v_end, chunk,
                j > 0, leader);
  }
  /* the chunk's candidates (an empty chunk's are empty) */
  if (nt == 0 && p.lse)
#pragma unroll 1
    for (int r = 0; r < NROWS; r++)
      fs_lse_put(p, fs_col_load(p, b0 + acc_row(r)), chunk, false, leader, fs_lse_none());
  if (fused || nt == 0)
    for (int s = 0; s < p.num_samples; s++)
#pragma unroll 1
      for (int r = 0; r < NROWS; r++) {
        const fs_best b = fused ? sbest[r * CTHREADS + tid] : fs_best_none();
        fs_candidate_put(p, fs_col_load(p, b0 + acc_row(r)), s, chunk, false, leader,
                         fs_best_key(b), b.z);
      }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
fsamp_main(const __grid_constant__ fs_params p, const __grid_constant__ fs_tmap tmW,
           const __grid_constant__ fs_tmap tmH) {
  /* 128-byte swizzled boxes need 1024-byte aligned destinations (fsamp_wg.cu) */
  extern __shared__ __align__(16) unsigned char fs_smem_raw[];
  fs_elem *smem = (fs_elem *)fs_smem_align1024(fs_smem_raw);
  unsigned long long *full = (unsigned long long *)(smem + STAGES * STAGE_ELEMS); /* [STAGES] */
  unsigned long long *empty = full + STAGES;                                      /* [STAGES] */
  fs_best *sbest = (fs_best *)(empty + STAGES); /* [NROWS][CTHREADS] */

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int b0 = blockIdx.y * TILE_B;
  const fs_span sp = chunk_span(p, blockIdx.x);
  int nt = sp.n;
#if CLUSTER > 1
  const unsigned rank = cluster_rank();
  /* the CTAs of a cluster fill each other's stages: as many tiles as the larger chunk */
  nt = max(nt, chunk_span(p, blockIdx.x ^ 1).n);
#else
  const unsigned rank = 0;
#endif
  const int KT = (p.D + TILE_K - 1) / TILE_K;

  ring_init(full, empty, CWARPS);

  if (warp >= CWARPS) {
    /* ---- producer: TILE_K/64 boxes of W and of H per stage ---- */
#if WGS == 2
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
#endif
    if (warp == CWARPS && lane == 0) {
      int it = 0;
      for (int j = 0; j < nt; j++)
        for (int kt = 0; kt < KT; kt++, it++) {
          const int slot = it % STAGES, k0 = kt * TILE_K;
          mbar_wait(empty + slot, ((it / STAGES) & 1) ^ 1);
          load_stage(smem, slot, full, &tmW, &tmH, k0, sp.v0 + j * TILE_V, b0, rank);
        }
    }
    cluster_leave();
    return;
  }
  /* ---- consumers ---- */
#if WGS == 2
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
#endif
  consume(p, smem, sbest, full, empty, nt, KT, b0, rank);
  fs_last_cta_reduce(p, b0, CTHREADS);
  cluster_leave();
}
