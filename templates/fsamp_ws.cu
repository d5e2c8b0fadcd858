/*
** fsamp_ws.cu: fused LM-head sampling, warp-specialised for Hopper (sm_90+).
**
** Like fsamp_mma.cu (mma.sync m16n8k16, vocab rows as M, batch as N, fp32
** accumulation, the same epilogue and candidates), but the loads are done by
** one producer warp with 2-D tensor copies (cp.async.bulk.tensor, the TMA
** engine): per stage, TILE_K/64 boxes of [TILE_V rows x 64 elements] of W and
** [TILE_B x 64] of H, 128-byte swizzled (so ldmatrix reads are conflict-free)
** and zero-filled past the edges of W and H (ragged V, B and K need no
** special case), completing on the stage's "full" mbarrier with its byte
** count.  The host encodes the two tensor maps (runtime/sample.c) and passes
** them as __grid_constant__ parameters.  The consumer warps wait on "full",
** multiply, and arrive on the stage's "empty" mbarrier; the producer waits
** on "empty" before refilling.  There is no CTA-wide barrier in the main
** loop, so the producer keeps up to STAGES stages in flight while the
** consumers run an epilogue.
*/

/* ---- tunables (the generator overrides these) ---------------------------- */
#ifndef FS_BF16
#define FS_BF16 1          /* 1: bfloat16 inputs; 0: IEEE half */
#endif
#ifndef TILE_V
#define TILE_V 128         /* vocab rows per CTA tile (M) */
#endif
#ifndef TILE_B
#define TILE_B 16          /* batch rows per CTA (N) */
#endif
#ifndef TILE_K
#define TILE_K 128         /* hidden elements per stage: 64 * (boxes per operand) */
#endif
#ifndef WARPS_M
#define WARPS_M 4          /* consumer warps along the vocab tile */
#endif
#ifndef WARPS_N
#define WARPS_N 1          /* consumer warps along the batch tile */
#endif
#ifndef STAGES
#define STAGES 4           /* pipeline depth, 2..8 */
#endif
#ifndef REDUCE_LASTCTA
#define REDUCE_LASTCTA 1   /* 1: last CTA reduces; 0: fsamp_reduce launch */
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

/* ---- derived values and static checks ----------------------------------- */
#define CWARPS (WARPS_M * WARPS_N)  /* consumer warps: 0 .. CWARPS-1 */
#define CTHREADS (CWARPS * 32)
#define THREADS (CTHREADS + 32)     /* + the producer warp */
#define WM (TILE_V / WARPS_M)
#define WN (TILE_B / WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)
#define KB (TILE_K / 64)            /* 64-element (128-byte) boxes per row and stage */
#define W_BOX (TILE_V * 64)         /* elements of one W box */
#define H_BOX (TILE_B * 64)
#define STAGE_ELEMS (KB * (W_BOX + H_BOX))
#define ZP (TILE_V + 4)
#define TPC (CTHREADS / TILE_B)
#define RPT (TILE_V / TPC)

static_assert(TILE_V % (16 * WARPS_M) == 0, "TILE_V must be a multiple of 16*WARPS_M");
static_assert(TILE_B % (8 * WARPS_N) == 0, "TILE_B must be a multiple of 8*WARPS_N");
static_assert(TILE_K % 64 == 0, "TILE_K must be a multiple of 64 (128-byte swizzle boxes)");
static_assert((TILE_B * 128) % 1024 == 0, "H boxes must keep 1024-byte alignment (TILE_B % 8)");
static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
static_assert(CTHREADS % TILE_B == 0 && TPC <= 32, "consumer threads must be TILE_B times 1..32");
static_assert(RPT % 4 == 0, "each epilogue thread takes whole quads of rows");

/* The tail reduction is the consumers' alone, on barrier 2: the producer warp
** leaves after its loop.  (With the whole CTA on barrier 0, compute-sanitizer's
** racecheck reported, in some runs, the producer's read of fs_last_cta_reduce's
** is_last as racing with thread 0's write across the barrier: perf-notes 29a.) */
#define FS_TAIL_SYNC() asm volatile("bar.sync 2, %0;\n" ::"n"(CTHREADS) : "memory")

#include "fs_device.h"
#include "fs_tma.h"

/* Address of the 16-byte chunk holding element (row r, column k) of a
** 128-byte-swizzled box of 64-element rows: chunk (k / 8) ^ (r % 8). */
__device__ __forceinline__ const fs_elem *swz(const fs_elem *box, int r, int k) {
  return box + r * 64 + ((((k >> 3) ^ r) & 7) << 3);
}
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(CTHREADS) : "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
fsamp_main(const __grid_constant__ fs_params p, const __grid_constant__ fs_tmap tmW,
           const __grid_constant__ fs_tmap tmH) {
  extern __shared__ __align__(1024) unsigned char fs_smem_raw[];
  /* 128-byte swizzled boxes need 1024-byte aligned destinations */
  fs_elem *smem = (fs_elem *)fs_smem_align1024(fs_smem_raw);
  float *sZ = (float *)(smem + STAGES * STAGE_ELEMS);                     /* [TILE_B][ZP] */
  unsigned long long *full = (unsigned long long *)(sZ + TILE_B * ZP);   /* [STAGES] */
  unsigned long long *empty = full + STAGES;                             /* [STAGES] */

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int chunk = blockIdx.x, b0 = blockIdx.y * TILE_B;
  int v_begin, v_end;
  fs_chunk_rows(p, chunk, &v_begin, &v_end);
  const int ntiles = (v_end - v_begin + TILE_V - 1) / TILE_V;
  const int KT = (p.D + TILE_K - 1) / TILE_K;
  const int total = ntiles * KT;

  if (tid == 0) {
    for (int s = 0; s < STAGES; s++) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, CWARPS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp == CWARPS) {
    /* ---- producer: TILE_K/64 boxes of W and of H per stage ---- */
    if (lane == 0) {
      for (int it = 0; it < total; it++) {
        const int slot = it % STAGES;
        mbar_wait(empty + slot, ((it / STAGES) & 1) ^ 1);
        const int t = it / KT, k0 = (it - t * KT) * TILE_K;
        mbar_expect_tx(full + slot, STAGE_ELEMS * 2);
        fs_elem *sW = smem + slot * STAGE_ELEMS, *sH = sW + KB * W_BOX;
#pragma unroll
        for (int kb = 0; kb < KB; kb++) {
          tma_load_2d(sW + kb * W_BOX, &tmW, k0 + kb * 64, v_begin + t * TILE_V, full + slot);
          tma_load_2d(sH + kb * H_BOX, &tmH, k0 + kb * 64, b0, full + slot);
        }
      }
    }
    return; /* the copies complete on the mbarriers the consumers wait on */
  } else {
    /* ---- consumers: mma over each stage, epilogue at each tile's end ---- */
    const int wm = warp % WARPS_M, wn = warp / WARPS_M;
    const int ecol = tid / TPC, epart = tid % TPC;
    const fs_col col = fs_col_load(p, b0 + ecol);
    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int q = 0; q < 4; q++) acc[mi][ni][q] = 0.0f;

    for (int it = 0; it < total; it++) {
      const int slot = it % STAGES;
      mbar_wait(full + slot, (it / STAGES) & 1);
      const fs_elem *sW = smem + slot * STAGE_ELEMS, *sH = sW + KB * W_BOX;
#pragma unroll
      for (int kk = 0; kk < TILE_K; kk += 16) {
        unsigned af[MI][4], bf[NI][2];
        const fs_elem *bw = sW + (kk >> 6) * W_BOX, *bh = sH + (kk >> 6) * H_BOX;
        const int kc = kk & 63;
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
          ldmatrix_x4(af[mi], swz(bw, wm * WM + mi * 16 + (lane & 15), kc + (lane >> 4) * 8));
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
          ldmatrix_x2(bf[ni], swz(bh, wn * WN + ni * 8 + (lane & 7), kc + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
          for (int ni = 0; ni < NI; ni++) mma16816(acc[mi][ni], af[mi], bf[ni]);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty + slot);

      const int t = it / KT;
      if (it - t * KT != KT - 1) continue;
      consumers_sync(); /* the previous tile's epilogue is done with sZ */
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
          for (int q = 0; q < 4; q++) {
            sZ[(wn * WN + ni * 8 + 2 * (lane & 3) + (q & 1)) * ZP + wm * WM + mi * 16 +
               (lane >> 2) + 8 * (q >> 1)] = acc[mi][ni][q];
            acc[mi][ni][q] = 0.0f;
          }
      consumers_sync();
      if (p.softcap > 0.0f) { /* fs_options.logit_softcap */
        fs_softcap_staged(p, sZ, TILE_B, ZP, tid, CTHREADS);
        consumers_sync();
      }
      if (p.zout) /* a filtered call's logits (runtime/filter.c) */
        fs_zout_staged(p, sZ, TILE_B, ZP, b0, v_begin + t * TILE_V, v_end, tid, CTHREADS);
      fs_epilogue(p, sZ + ecol * ZP, col, epart * RPT, v_begin + t * TILE_V, v_end, t, chunk,
                  epart == 0);
    }
  }

#if REDUCE_LASTCTA
  fs_last_cta_reduce(p, b0, CTHREADS);
#endif
}
