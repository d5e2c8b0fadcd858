/*
** fsamp_wg.cu: fused LM-head sampling with warpgroup MMA (wgmma, sm_90a).
**
** The loads are those of fsamp_ws.cu: one producer warp streams, per stage,
** TILE_K/64 boxes of [TILE_V rows x 64 elements] of W and [TILE_B x 64] of H
** with 2-D tensor copies (128-byte swizzle, zero fill past the edges of W
** and H), completing on the stage's "full" mbarrier.  The math differs: WGS
** consumer warpgroups issue wgmma.mma_async m64nTILE_Bk16 straight from the
** swizzled boxes (matrix descriptors, no ldmatrix), the vocab rows as M and
** the batch as N, fp32 accumulators in registers.  Warpgroup g owns the
** m64 blocks g, g + WGS, ... of the tile (MB of them), so that an epilogue
** round stages the contiguous rows [r * EPI_V, (r + 1) * EPI_V) of the tile
** (EPI_V = 64 * WGS) for at most EPI_B = 128 batch columns, and the staged
** logits need only EPI_B x EPI_V floats of shared memory (OVERLAP, below,
** stages the whole tile instead).
**
** With CLUSTER = 2, CTAs 2c and 2c + 1 (adjacent vocab chunks, the same
** batch tile) form a thread-block cluster and share H: each producer copies
** half of every H box and multicasts it into both CTAs' stage (the L2 traffic
** of H, which dominates at large batches, halves).  A slot is then refilled
** only when the consumers of both CTAs released it (they arrive on both
** "empty" barriers), and the two CTAs run the same number of tiles.
**
** (A ping-pong mode, each warpgroup its own chunk so that one's epilogue
** ran under the other's wgmmas, was never within 3% of a bucket's best on
** the H200 and left the family in session 29: perf-notes 7d, 32a.)
**
** With OVERLAP = 1 (cooperative tiles otherwise) the whole tile is staged
** at once (EPI_V = TILE_V rows x EPI_B = TILE_B columns) and, for one
** sample per row, its epilogue runs under the next tile's wgmmas: after
** each stage's issue (and the release of the stage before it) come 1/KT of
** the staged tile's quads of rows, so the CUDA cores add the noise while
** the tensor cores multiply.  TPC consecutive consumer threads share one
** batch column for the whole chunk (each its RPT rows of every tile) and
** keep their bests in registers across tiles; the candidate is stored once,
** at the chunk's end.  Several samples per
** row take the staged tile's epilogue right after staging (not hidden).
**
** With two consumer warpgroups the producer is a whole warpgroup (one
** thread issues the copies) so that setmaxnreg can move registers from it
** (down to 40) to the consumers (up to 232): tiles of 128 accumulators per
** thread (256 x 128 or 128 x 256) then fit without spilling.
**
** The vocabulary is read in T = ceil(V / TILE_V) whole tiles, each by one
** chunk, so no row is read twice: chunk c of G takes the contiguous tiles
** [c * T / G, (c + 1) * T / G) (perf-notes 10b, 11a) and its candidate is
** its best over their rows; a chunk with no tile (T < G) writes empty
** candidates.
**
** One group of wgmmas (one stage) stays in flight: after committing stage
** i a warp waits for stage i - 1 and releases its slot on the "empty"
** mbarrier.  The epilogue, the candidates and the reductions are the shared
** ones of fs_device.h; only the fp32 summation order inside a k16 step may
** differ from mma.sync's.
*/

/* ---- tunables (the generator overrides these) ---------------------------- */
#ifndef FS_BF16
#define FS_BF16 1          /* 1: bfloat16 inputs; 0: IEEE half */
#endif
#ifndef TILE_B
#define TILE_B 64          /* batch rows per CTA: the wgmma N (16..256) */
#endif
#ifndef TILE_K
#define TILE_K 64          /* hidden elements per stage: 64 * (boxes per operand) */
#endif
#ifndef WGS
#define WGS 2              /* consumer warpgroups */
#endif
#ifndef MB
#define MB 1               /* m64 blocks per consumer warpgroup */
#endif
#ifndef STAGES
#define STAGES 4           /* pipeline depth, 2..8 */
#endif
#ifndef OVERLAP
#define OVERLAP 0          /* 1: whole tiles staged, epilogue under the next wgmmas */
#endif
#ifndef CLUSTER
#define CLUSTER 1          /* CTAs per cluster sharing H by multicast: 1 or 2 */
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

/* ---- derived values and static checks ----------------------------------- */
#define TILE_V (64 * WGS * MB)
#define ROW_BLOCK(g, mb) ((g) + (mb) * WGS) /* the box's m64 block of warpgroup g */
#if OVERLAP
#define EPI_V TILE_V                  /* rows staged per epilogue round */
#define STAGE_ROW(g, mb) (ROW_BLOCK(g, mb) * 64) /* its first row in the staging buffer */
#else
#define EPI_V (64 * WGS)
#define STAGE_ROW(g, mb) ((g) * 64)
#endif
#define CWARPS (4 * WGS)              /* consumer warps: 0 .. CWARPS-1 */
#define CTHREADS (CWARPS * 32)        /* consumer threads */
#define ETHREADS CTHREADS             /* threads that share a tile's epilogue: all consumers */
#define PTHREADS (WGS == 2 ? 128 : 32) /* the producer: a warpgroup or a warp */
#define THREADS (CTHREADS + PTHREADS)
#if OVERLAP
#undef EPI_B
#define EPI_B TILE_B                  /* the whole tile in one round */
#endif
#ifndef EPI_B
#define EPI_B (TILE_B < 128 ? TILE_B : 128) /* batch columns per epilogue round */
#endif
#define KB (TILE_K / 64)              /* 64-element (128-byte) boxes per row and stage */
#define W_BOX (TILE_V * 64)           /* elements of one W box */
#define H_BOX (TILE_B * 64)
#define STAGE_ELEMS (KB * (W_BOX + H_BOX))
#define ZP (EPI_V + 4)
#define TPC (ETHREADS / EPI_B)
#define RPT (EPI_V / TPC)
#define NACC (TILE_B / 2)             /* fp32 accumulators per m64 block and thread */

static_assert(TILE_B % 16 == 0 && TILE_B >= 16 && TILE_B <= 256 &&
              (TILE_B & (TILE_B - 1)) == 0, "TILE_B must be 16, 32, 64, 128 or 256");
static_assert(TILE_V <= 256, "a TMA box has at most 256 rows");
static_assert(TILE_K % 64 == 0, "TILE_K must be a multiple of 64 (128-byte swizzle boxes)");
static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
static_assert(CLUSTER == 1 || CLUSTER == 2, "CLUSTER must be 1 or 2");
static_assert((TILE_B / CLUSTER) % 8 == 0, "H shares must keep 1024-byte alignment");
static_assert(ETHREADS % EPI_B == 0 && TPC <= 32, "epilogue threads must be EPI_B times 1..32");
static_assert(RPT % 4 == 0, "each epilogue thread takes whole quads of rows");
static_assert(TILE_B % EPI_B == 0 && (EPI_B <= 128 || OVERLAP),
              "epilogue rounds of at most 128 columns");

/* the producer leaves early (after setmaxnreg it has too few registers for
** more): the tail reduction is the consumers' alone, on barrier 3 */
#define FS_TAIL_SYNC() asm volatile("bar.sync 3, %0;\n" ::"n"(CTHREADS) : "memory")
/* the accumulators are dead by then: with two consumer warpgroups
** (setmaxnreg gives them 232 registers) 8 items x 5 candidates of loads in
** flight; one warpgroup keeps fs_device.h's 2 (8 made the tail its register
** peak, 232+ registers, and cost the variants that fitted 2-3 CTAs per SM
** their occupancy) */
#define FS_RED_ITEMS (WGS == 2 ? 8 : 2)

#include "fs_device.h"
#include "fs_tma.h"
#include "fs_ring.h"
#include "fs_wgmma.h"

#define FS_CAT2(a, b) a##b
#define FS_CAT(a, b) FS_CAT2(a, b)
#define WGMMA FS_CAT(wgmma_n, TILE_B)

/* The consumer threads, which share each tile's epilogue (barrier 1). */
__device__ __forceinline__ void epilogue_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(ETHREADS) : "memory");
}

/* Fill `it` of the ring: waits until it is full and issues its
** wgmmas into acc (overwriting acc when first), committed as one group.
** base is the descriptor low word of the ring's first stage
** (wgmma_desc_word, taken once per thread): offsets add to it in 32 bits and
** the high word is a constant (wgmma_desc_lo), where a generic-to-shared
** conversion and 64-bit descriptor arithmetic per stage were most of the
** mainloop's instructions (perf-notes 27g; the wt family's since 19a). */
__device__ __forceinline__ void mma_stage(float (&acc)[MB][NACC], unsigned base,
                                          unsigned long long *full, int it, int g, bool first) {
  const int slot = it % STAGES;
  mbar_wait(full + slot, (it / STAGES) & 1);
  const unsigned dw = base + (unsigned)slot * (STAGE_ELEMS * 2 / 16), dh = dw + KB * W_BOX * 2 / 16;
  wgmma_fence();
#pragma unroll
  for (int kb = 0; kb < KB; kb++)
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
      for (int kk = 0; kk < 4; kk++) /* k16 steps: +32 bytes = +2 in the descriptor */
        WGMMA(acc[mb], wgmma_desc_lo(dw + (kb * W_BOX + ROW_BLOCK(g, mb) * 64 * 64) * 2 / 16 + 2 * kk),
              wgmma_desc_lo(dh + kb * H_BOX * 2 / 16 + 2 * kk), !first || (kb | kk) != 0);
  wgmma_commit();
}

/* k-step kt of a tile, fill `it` of the ring: its wgmmas issued,
** then stage it - 1's awaited (one group stays in flight) and its slot
** released.  mma_drain ends the tile: the last group awaited, its slot
** released (`it` = the fills consumed so far). */
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

/* Defined accumulators before the first wgmma (which overwrites them). */
__device__ __forceinline__ void fs_zero_acc(float (&acc)[MB][NACC]) {
#pragma unroll
  for (int mb = 0; mb < MB; mb++)
#pragma unroll
    for (int q = 0; q < NACC; q++) acc[mb][q] = 0.0f;
}

/* Stages this thread's accumulators of columns [nb * EPI_B, (nb + 1) *
** EPI_B) of m64 blocks mb0 .. mb1-1 into the staging buffer sz: rows row,
** row + 8 of columns 8c + 2 (lane & 3) (+1); one base address, constant
** offsets (an index expression per store makes ptxas keep 64 addresses
** live). */
__device__ __forceinline__ void stage_acc(float *sz, const float (&acc)[MB][NACC], int mb0,
                                          int mb1, int nb) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = warp >> 2;
#pragma unroll
  for (int mb = mb0; mb < mb1; mb++) {
    float *const zst = sz + 2 * (lane & 3) * ZP + STAGE_ROW(g, mb) + (warp & 3) * 16 + (lane >> 2);
#pragma unroll
    for (int qq = 0; qq < EPI_B / 2; qq++)
      zst[((qq >> 2) * 8 + (qq & 1)) * ZP + 8 * ((qq >> 1) & 1)] = acc[mb][nb * EPI_B / 2 + qq];
  }
}

#if !OVERLAP
/* With logprobs and one sample per row, a thread of at most two columns
** holds its (m, l) pair of each across the chunk's tiles and stores it
** once, at the chunk's end (perf-notes 29i); with more columns (four or
** eight, B = 256 tiles of 64-column rounds) the pairs would spill, and each
** round folds its pair into the stored one (fs_lse_tile). */
#define LSE_HELD (TILE_B / EPI_B <= 2)

/* The consumer warpgroups: wgmma over each stage of each of the nt tiles of
** chunk blockIdx.x (the last ones past its rows when the cluster's peer has
** more), then the epilogue of the tile
** in rounds of EPI_V staged rows x EPI_B columns.  With one sample per row
** a thread keeps its best of each of its TILE_B / EPI_B columns in registers
** across the tiles and stores the candidates once, at the chunk's end (no
** candidate round trip through memory per round). */
__device__ __forceinline__ void consume(const fs_params &p, const fs_elem *smem, float *sZ,
                                        unsigned long long *full, unsigned long long *empty,
                                        int nt, int KT, int b0, unsigned rank) {
  const int tid = threadIdx.x;
  const unsigned base = wgmma_desc_word(smem_addr(smem));
  /* the warpgroup, broadcast so that the compiler keeps it (and the W
  ** descriptors) in uniform registers, as fsamp_wt.cu does */
  const int g = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int ecol = tid / TPC, epart = tid % TPC;
  const int chunk = blockIdx.x;
  const fs_span sp = chunk_span(p, chunk);
  const bool fused = p.num_samples == 1;
  fs_best best[TILE_B / EPI_B]; /* this thread's bests, per column */
  fs_lse la[LSE_HELD ? TILE_B / EPI_B : 1]; /* its held pairs (LSE_HELD) */
#pragma unroll
  for (int nb = 0; nb < TILE_B / EPI_B; nb++) best[nb] = fs_best_none();
#pragma unroll
  for (int nb = 0; nb < (LSE_HELD ? TILE_B / EPI_B : 1); nb++) la[nb] = fs_lse_none();
  float acc[MB][NACC];
  fs_zero_acc(acc);

  /* each column's bound from the other chunks (fused calls; fs_bound_load),
  ** read at a tile's start so that the loads complete under its wgmmas */
  unsigned long long known[TILE_B / EPI_B];
#pragma unroll
  for (int nb = 0; nb < TILE_B / EPI_B; nb++) known[nb] = 0ull;

  int it = 0; /* fills of the ring consumed */
  for (int j = 0; j < nt; j++) {
    if (fused)
#pragma unroll
      for (int nb = 0; nb < TILE_B / EPI_B; nb++) {
        const unsigned long long k = fs_bound_load(p, b0 + nb * EPI_B + ecol);
        known[nb] = k > known[nb] ? k : known[nb];
      }
    for (int kt = 0; kt < KT; kt++, it++) mma_step(acc, base, full, empty, it, kt, g, rank);
    mma_drain(empty, it, rank);

#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
      for (int nb = 0; nb < TILE_B / EPI_B; nb++) {
        epilogue_sync(); /* the previous round's epilogue is done with sZ */
        stage_acc(sZ, acc, mb, mb + 1, nb);
        epilogue_sync();
        if (p.softcap > 0.0f) { /* fs_options.logit_softcap */
          fs_softcap_staged(p, sZ, EPI_B, ZP, tid, ETHREADS);
          epilogue_sync();
        }
        if (p.zout) /* a filtered call's logits (runtime/filter.c) */
          fs_zout_staged(p, sZ, EPI_B, ZP, b0 + nb * EPI_B, sp.v0 + j * TILE_V + mb * EPI_V,
                         sp.v_end, tid, ETHREADS);
        /* the column's parameters, loaded per round (an array of them for
        ** every round would hold 8 registers per round for the whole tile) */
        const fs_col col = fs_col_load(p, b0 + nb * EPI_B + ecol);
        const int vrow0 = sp.v0 + j * TILE_V + mb * EPI_V, t = j * MB + mb;
        const float *zc = sZ + ecol * ZP;
        /* fused: the held best, bounded; else each sample's into its
        ** candidate (fs_epilogue's work).  One fold for both, so that each
        ** round inlines the fold's paths once (twice cost the family 1.3x
        ** its NVRTC time, tiles of several rounds up to 1.9x: perf-notes
        ** 32b) */
        for (int s = 0; s < (fused ? 1 : p.num_samples); s++) {
          fs_best b = fused ? best[nb] : fs_best_none();
          fs_fold_part(p, zc, col, epart, vrow0, sp.v_end, (unsigned)s, b,
                       fused ? fs_bound_score(known[nb]) : FS_NO_BOUND);
          if (fused) {
            best[nb] = b;
            fs_bound_publish(p, col, b, epart == 0, known[nb]);
          } else
            fs_candidate_put(p, col, s, chunk, t > 0, epart == 0, fs_best_key(b), b.z);
        }
        if (!fused || !LSE_HELD)
          fs_lse_tile(p, zc, col, epart * RPT, vrow0, sp.v_end, chunk, t > 0, epart == 0);
        else if (p.lse)
          fs_lse_rows(zc, epart * RPT, epart * RPT + RPT, vrow0, sp.v_end,
                      la[LSE_HELD ? nb : 0]);
      }
  }
  /* the chunk's candidates (an empty chunk's are empty), every column */
#pragma unroll
  for (int nb = 0; nb < TILE_B / EPI_B; nb++)
    if (fused) {
      const fs_col col = fs_col_load(p, b0 + nb * EPI_B + ecol);
      fs_candidate_put(p, col, 0, chunk, false, epart == 0, fs_best_key(best[nb]), best[nb].z);
      if (p.lse && (LSE_HELD || nt == 0)) /* held pairs, or an empty chunk's */
        fs_lse_put(p, col, chunk, false, epart == 0, la[LSE_HELD ? nb : 0]);
    } else if (nt == 0)
      fs_epilogue_empty(p, fs_col_load(p, b0 + nb * EPI_B + ecol), chunk, epart == 0);
}
#else
/* The consumer warpgroups with whole tiles staged: tile j's wgmmas run while
** the threads fold the staged tile j - 1 (one sample per row), 1/KT of its
** quads of rows per stage; the tile's own staging waits for the last quad.
** Thread tid owns column b0 + tid / TPC for the chunk (rows epart * RPT ..
** of every tile).  With logprobs, the thread's (m, l) pair of its rows of
** the staged tile j - 1 is folded after tile j's last stage is issued (under
** its wgmmas), held across tiles and stored once, at the chunk's end (folded
** piece by piece in the stages instead, it ran 23% more instructions and was
** slower: perf-notes 29i).  Several samples:
** each tile's epilogue right after its staging, as in the cooperative
** mode. */
__device__ __forceinline__ void consume(const fs_params &p, const fs_elem *smem, float *sZ,
                                        unsigned long long *full, unsigned long long *empty,
                                        int nt, int KT, int b0, unsigned rank) {
  const int tid = threadIdx.x;
  const unsigned base = wgmma_desc_word(smem_addr(smem));
  /* the warpgroup, broadcast so that the compiler keeps it (and the W
  ** descriptors) in uniform registers, as fsamp_wt.cu does */
  const int g = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int ecol = tid / TPC, epart = tid % TPC, r0 = epart * RPT;
  const int chunk = blockIdx.x;
  const fs_span sp = chunk_span(p, chunk);
  const float *zcol = sZ + ecol * ZP;
  const fs_col col = fs_col_load(p, b0 + ecol);
  const bool fused = p.num_samples == 1;
  const bool grouped = p.noise && !col.greedy; /* FS_NOISE_GROUP16: groups of 16 rows */
  fs_best best = fs_best_none(); /* this thread's best over the chunk's tiles */
  fs_lse la = fs_lse_none();      /* its (m, l) over them (logprobs) */
  const bool lse = fused && p.lse; /* uniform: the call's */
  float acc[MB][NACC];
  fs_zero_acc(acc);

  unsigned long long known = 0ull; /* the column's bound (fs_bound_load), fused calls */
  int it = 0; /* fills of the ring consumed */
  for (int j = 0; j < nt; j++) {
    const int vprev = sp.v0 + (j - 1) * TILE_V; /* first row of the staged tile j - 1 */
    if (fused) { /* read under this tile's wgmmas, for tile j - 1's fold */
      const unsigned long long k = fs_bound_load(p, col.b);
      known = k > known ? k : known;
    }
    const float sb = fs_bound_score(known);
    /* next staged quad of rows, or group; units owed, in 1 / KT */
    int r = r0, gj = 0, debt = 0;
    for (int kt = 0; kt < KT; kt++, it++) {
      mma_step(acc, base, full, empty, it, kt, g, rank);
      /* the lane's RPT / 4 quads (or groups) spread evenly over the KT
      ** stages, while stage it's wgmmas run (after the release of stage
      ** it - 1's slot, so that its refill is not held up by them) */
      debt += grouped ? FS_LANE_GROUPS(EPI_V) : RPT / 4;
      if (fused && j > 0 && debt >= KT) {
        const int q = debt / KT; /* 1 unless the units outnumber KT */
        debt -= q * KT;
        if (grouped) {
          fs_fold_groups(p, zcol, col, epart, gj, gj + q, EPI_V / 16, vprev, sp.v_end, 0u, best);
          gj += q;
        } else {
          fs_fold_rows(p, zcol, col, r, r + 4 * q, vprev, sp.v_end, 0u, best, sb);
          r += 4 * q;
        }
      }
    }
    if (fused && j > 0) fs_bound_publish(p, col, best, epart == 0, known);
    if (lse && j > 0) fs_lse_rows(zcol, r0, r0 + RPT, vprev, sp.v_end, la);
    mma_drain(empty, it, rank);
    epilogue_sync(); /* every thread is done with the staged tile j - 1 */
    stage_acc(sZ, acc, 0, MB, 0);
    epilogue_sync();
    if (p.softcap > 0.0f) { /* fs_options.logit_softcap */
      fs_softcap_staged(p, sZ, EPI_B, ZP, tid, ETHREADS);
      epilogue_sync();
    }
    if (p.zout) /* a filtered call's logits (runtime/filter.c) */
      fs_zout_staged(p, sZ, EPI_B, ZP, b0, sp.v0 + j * TILE_V, sp.v_end, tid, ETHREADS);
    /* the tile just staged, whole: fused, the last one (no wgmmas left to
    ** hide it under); else every one, each sample's into its candidate
    ** (fs_epilogue's work).  One fold for both, so that the kernel inlines
    ** the fold's paths once here (perf-notes 32b) */
    if (!fused || j == nt - 1) {
      const int vrow0 = sp.v0 + j * TILE_V;
      for (int s = 0; s < (fused ? 1 : p.num_samples); s++) {
        fs_best b = fused ? best : fs_best_none();
        fs_fold_part(p, zcol, col, epart, vrow0, sp.v_end, (unsigned)s, b,
                     fused ? fs_bound_score(known) : FS_NO_BOUND);
        if (fused)
          best = b;
        else
          fs_candidate_put(p, col, s, chunk, j > 0, epart == 0, fs_best_key(b), b.z);
      }
      if (lse)
        fs_lse_rows(zcol, r0, r0 + RPT, vrow0, sp.v_end, la);
      else if (!fused)
        fs_lse_tile(p, zcol, col, r0, vrow0, sp.v_end, chunk, j > 0, epart == 0);
    }
  }
  if (fused) {
    if (lse) fs_lse_put(p, col, chunk, false, epart == 0, la); /* (-inf, 0) when empty */
    fs_candidate_put(p, col, 0, chunk, false, epart == 0, fs_best_key(best), best.z);
  } else if (nt == 0) { /* an empty chunk still writes its (empty) candidates */
    fs_epilogue_empty(p, col, chunk, epart == 0);
  }
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
fsamp_main(const __grid_constant__ fs_params p, const __grid_constant__ fs_tmap tmW,
           const __grid_constant__ fs_tmap tmH) {
  /* 128-byte swizzled boxes need 1024-byte aligned destinations: aligned
  ** here (the size has 1 KB of slack), not by the declaration, which would
  ** pad the static shared memory to 1 KB and cost a pipeline stage */
  extern __shared__ __align__(16) unsigned char fs_smem_raw[];
  fs_elem *smem = (fs_elem *)fs_smem_align1024(fs_smem_raw);
  float *sZ = (float *)(smem + STAGES * STAGE_ELEMS);          /* [EPI_B][ZP] */
  unsigned long long *full = (unsigned long long *)(sZ + EPI_B * ZP); /* [STAGES] */
  unsigned long long *empty = full + STAGES;                   /* [STAGES] */

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
      /* the tiles in the order the consumers take them, the slots in turn */
      int it = 0;
      for (int j = 0; j < nt; j++)
        for (int kt = 0; kt < KT; kt++, it++) {
          const int slot = it % STAGES;
          mbar_wait(empty + slot, ((it / STAGES) & 1) ^ 1);
          load_stage(smem, slot, full, &tmW, &tmH, kt * TILE_K, sp.v0 + j * TILE_V, b0, rank);
        }
    }
    cluster_leave();
    return;
  }
  /* ---- consumers: wgmma over each stage, each tile's epilogue after it ---- */
#if WGS == 2
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
#endif
  consume(p, smem, sZ, full, empty, nt, KT, b0, rank);
  fs_last_cta_reduce(p, b0, CTHREADS);
  cluster_leave();
}
