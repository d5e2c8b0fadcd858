/*
** fsamp_ws.cu: fused LM-head sampling, warp-specialised for Hopper (sm_90+).
**
** Like fsamp_mma.cu (mma.sync m16n8k16, vocab rows as M, batch as N, fp32
** accumulation, the same epilogue and candidates), but the loads are done by
** one producer warp with cp.async.bulk (the TMA engine): one bulk copy per
** W row and per H row of a [TILE_K]-wide stage, completing on the stage's
** "full" mbarrier with its byte count.  The consumer warps wait on "full",
** multiply, and arrive on the stage's "empty" mbarrier; the producer waits
** on "empty" before refilling.  There is no CTA-wide barrier in the main
** loop, so the producer keeps up to STAGES stages in flight while the
** consumers run an epilogue.
**
** Rule: D must be a multiple of TILE_K (a bulk copy cannot zero-fill a
** ragged K tail); the runtime only picks this family when it is.
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
#define TILE_K 128         /* hidden elements per stage (one bulk copy per row) */
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
#define LDS (TILE_K + 8)            /* smem row pitch (elements): +16 B pad */
#define STAGE_ELEMS ((TILE_V + TILE_B) * LDS)
#define ZP (TILE_V + 4)
#define TPC (CTHREADS / TILE_B)
#define RPT (TILE_V / TPC)

static_assert(TILE_V % (16 * WARPS_M) == 0, "TILE_V must be a multiple of 16*WARPS_M");
static_assert(TILE_B % (8 * WARPS_N) == 0, "TILE_B must be a multiple of 8*WARPS_N");
static_assert(TILE_K % 16 == 0, "TILE_K must be a multiple of 16");
static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
static_assert(CTHREADS % TILE_B == 0 && TPC <= 32, "consumer threads must be TILE_B times 1..32");
static_assert(RPT % 4 == 0, "each epilogue thread takes whole quads of rows");

#include "fs_device.h"

/* ---- mbarrier and bulk-copy wrappers ------------------------------------- */
__device__ __forceinline__ void mbar_init(unsigned long long *bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
/* Waits until the phase of parity `parity` of *bar has completed. */
__device__ __forceinline__ void mbar_wait(unsigned long long *bar, unsigned parity) {
  asm volatile("{\n"
               ".reg .pred P1;\n"
               "LAB_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
               "@P1 bra DONE;\n"
               "bra LAB_WAIT;\n"
               "DONE:\n"
               "}\n" ::"r"(smem_addr(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, unsigned bytes,
                                          unsigned long long *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1], %2, [%3];\n" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes),
               "r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(CTHREADS) : "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
fsamp_main(const fs_params p) {
  extern __shared__ __align__(128) unsigned char fs_smem[];
  fs_elem *smem = (fs_elem *)fs_smem;
  float *sZ = (float *)(smem + STAGES * STAGE_ELEMS);                     /* [TILE_B][ZP] */
  unsigned long long *full = (unsigned long long *)(sZ + TILE_B * ZP);   /* [STAGES] */
  unsigned long long *empty = full + STAGES;                             /* [STAGES] */

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int chunk = blockIdx.x, b0 = blockIdx.y * TILE_B;
  int v_begin, v_end;
  fs_chunk_rows(p, chunk, &v_begin, &v_end);
  const int ntiles = (v_end - v_begin + TILE_V - 1) / TILE_V;
  const int KT = p.D / TILE_K;
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
    /* ---- producer: one bulk copy per valid row of W and H per stage ---- */
    const fs_elem *Wg = (const fs_elem *)p.W, *Hg = (const fs_elem *)p.H;
    const int nbr = min(TILE_B, p.B - b0);
    const unsigned kbytes = TILE_K * 2;
    for (int it = 0; it < total; it++) {
      const int slot = it % STAGES;
      mbar_wait(empty + slot, ((it / STAGES) & 1) ^ 1);
      const int t = it / KT, k0 = (it - t * KT) * TILE_K;
      const int vrow0 = v_begin + t * TILE_V, nv = min(TILE_V, v_end - vrow0);
      if (lane == 0) mbar_expect_tx(full + slot, (unsigned)(nv + nbr) * kbytes);
      __syncwarp();
      fs_elem *sW = smem + slot * STAGE_ELEMS, *sH = sW + TILE_V * LDS;
      for (int r = lane; r < nv; r += 32)
        bulk_copy(sW + r * LDS, Wg + (long long)(vrow0 + r) * p.w_stride + k0, kbytes, full + slot);
      for (int r = lane; r < nbr; r += 32)
        bulk_copy(sH + r * LDS, Hg + (long long)(b0 + r) * p.h_stride + k0, kbytes, full + slot);
    }
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
      const fs_elem *sW = smem + slot * STAGE_ELEMS, *sH = sW + TILE_V * LDS;
#pragma unroll
      for (int kk = 0; kk < TILE_K; kk += 16) {
        unsigned af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
          ldmatrix_x4(af[mi], sW + (wm * WM + mi * 16 + (lane & 15)) * LDS + kk + (lane >> 4) * 8);
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
          ldmatrix_x2(bf[ni], sH + (wn * WN + ni * 8 + (lane & 7)) * LDS + kk + ((lane >> 3) & 1) * 8);
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
      fs_epilogue(p, sZ + ecol * ZP, col, epart * RPT, v_begin + t * TILE_V, v_end, t, chunk,
                  epart == 0);
    }
  }

#if REDUCE_LASTCTA
  fs_last_cta_reduce(p, b0, THREADS);
#endif
}

FS_DEFINE_REDUCE_KERNEL
