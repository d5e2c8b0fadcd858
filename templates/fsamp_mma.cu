/*
** fsamp_mma.cu: fused LM-head sampling with tensor-core mma.sync (sm_80+).
**
** One CTA owns a balanced chunk of W's rows (a multiple of 16) and one tile of
** TILE_B batch rows.  It streams its chunk through a STAGES-deep cp.async
** pipeline of [TILE_V x TILE_K] W tiles and [TILE_B x TILE_K] H tiles,
** multiplies them with mma.sync m16n8k16 (vocab rows are the M dimension,
** batch rows N, fp32 accumulation), and at the end of every vocab tile
** perturbs the logits with Gumbel noise (fs_rng.h, keyed by the global token
** id) and folds them into one candidate per (batch row, sample) for the
** chunk.  Logits never leave the chip.  The candidates of all chunks are
** reduced by the last CTA of each batch tile (REDUCE_LASTCTA=1) or by the
** fsamp_reduce kernel in a second launch (REDUCE_LASTCTA=0).
**
** Workload: decode, B small to a few hundred, D 1k..8k, V 16k..262k; W is
** read from HBM exactly once per batch tile.  Every tunable below has a
** default, so this file compiles alone.
*/
/* ---- tunables (the generator overrides these) ---------------------------- */
#ifndef FS_BF16
#define FS_BF16 1          /* 1: bfloat16 inputs; 0: IEEE half */
#endif
#ifndef TILE_V
#define TILE_V 128         /* vocab rows per CTA tile (M); 16*WARPS_M | TILE_V */
#endif
#ifndef TILE_B
#define TILE_B 16          /* batch rows per CTA (N); 8*WARPS_N | TILE_B */
#endif
#ifndef TILE_K
#define TILE_K 64          /* hidden elements per stage: 32, 64 or 128 */
#endif
#ifndef WARPS_M
#define WARPS_M 4          /* warps along the vocab tile */
#endif
#ifndef WARPS_N
#define WARPS_N 1          /* warps along the batch tile */
#endif
#ifndef STAGES
#define STAGES 4           /* cp.async pipeline depth, 2..8 */
#endif
#ifndef LOAD_BYTES
#define LOAD_BYTES 16      /* bytes per cp.async: 16 (cg) or 8 (ca) */
#endif
#ifndef REDUCE_LASTCTA
#define REDUCE_LASTCTA 1   /* 1: last CTA reduces; 0: fsamp_reduce launch */
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1       /* __launch_bounds__ minimum CTAs per SM */
#endif

/* ---- derived values and static checks ----------------------------------- */
#define THREADS (WARPS_M * WARPS_N * 32)
#define WM (TILE_V / WARPS_M)       /* rows per warp */
#define WN (TILE_B / WARPS_N)       /* batch columns per warp */
#define MI (WM / 16)                /* m16 blocks per warp */
#define NI (WN / 8)                 /* n8 blocks per warp */
#define LDS (TILE_K + 8)            /* smem row pitch (elements): +16 B pad */
#define VEC (LOAD_BYTES / 2)        /* elements per cp.async */
#define STAGE_ELEMS ((TILE_V + TILE_B) * LDS)
#define ZP (TILE_V + 4)             /* pitch (floats) of the staged logits */
#define TPC (THREADS / TILE_B)      /* epilogue threads per batch column */
#define RPT (TILE_V / TPC)          /* epilogue rows per thread */

static_assert(TILE_V % (16 * WARPS_M) == 0, "TILE_V must be a multiple of 16*WARPS_M");
static_assert(TILE_B % (8 * WARPS_N) == 0, "TILE_B must be a multiple of 8*WARPS_N");
static_assert(TILE_K % 16 == 0 && TILE_K >= 16, "TILE_K must be a multiple of 16");
static_assert(STAGES >= 2 && STAGES <= 8, "STAGES must be in 2..8");
static_assert(LOAD_BYTES == 8 || LOAD_BYTES == 16, "LOAD_BYTES must be 8 or 16");
static_assert(THREADS <= 1024, "too many threads");
static_assert(THREADS % TILE_B == 0 && TPC <= 32, "THREADS must be TILE_B times 1..32");
static_assert(RPT % 4 == 0, "each epilogue thread takes whole quads of rows");

#include "fs_device.h"

/* ---- PTX wrappers -------------------------------------------------------- */
/* Copies LOAD_BYTES from global to shared, or zero-fills when !valid. */
__device__ __forceinline__ void cp_async(void *dst, const void *src, bool valid) {
  unsigned d = smem_addr(dst);
  int n = valid ? LOAD_BYTES : 0;
#if LOAD_BYTES == 16
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(n));
#endif
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
fsamp_main(const fs_params p) {
  extern __shared__ __align__(16) unsigned char fs_smem[];
  fs_elem *smem = (fs_elem *)fs_smem;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int chunk = blockIdx.x, b0 = blockIdx.y * TILE_B;

  int v_begin, v_end; /* this CTA's rows: a balanced share of 16-row groups */
  fs_chunk_rows(p, chunk, &v_begin, &v_end);
  const int ntiles = (v_end - v_begin + TILE_V - 1) / TILE_V;
  const int KT = (p.D + TILE_K - 1) / TILE_K;
  const int total = ntiles * KT;

  const fs_elem *Wg = (const fs_elem *)p.W;
  const fs_elem *Hg = (const fs_elem *)p.H;

  /* Issues the cp.async copies of pipeline step `it` into slot `slot`. */
  auto load_stage = [&](int it, int slot) {
    const int t = it / KT, k0 = (it - t * KT) * TILE_K;
    fs_elem *sW = smem + slot * STAGE_ELEMS;
    fs_elem *sH = sW + TILE_V * LDS;
    const int vrow0 = v_begin + t * TILE_V;
    constexpr int CPR = TILE_K / VEC; /* copies per row */
    constexpr int NW = TILE_V * CPR, NH = TILE_B * CPR;
#pragma unroll
    for (int n = 0; n < (NW + THREADS - 1) / THREADS; n++) {
      const int i = tid + n * THREADS;
      if (NW % THREADS != 0 && i >= NW) break;
      const int r = i / CPR, c = (i - r * CPR) * VEC;
      const int v = vrow0 + r, k = k0 + c;
      const bool ok = v < v_end && k < p.D;
      const fs_elem *src = Wg + (ok ? (long long)v * p.w_stride + k : 0);
      cp_async(sW + r * LDS + c, src, ok);
    }
#pragma unroll
    for (int n = 0; n < (NH + THREADS - 1) / THREADS; n++) {
      const int i = tid + n * THREADS;
      if (NH % THREADS != 0 && i >= NH) break;
      const int r = i / CPR, c = (i - r * CPR) * VEC;
      const int b = b0 + r, k = k0 + c;
      const bool ok = b < p.B && k < p.D;
      const fs_elem *src = Hg + (ok ? (long long)b * p.h_stride + k : 0);
      cp_async(sH + r * LDS + c, src, ok);
    }
  };

  /* The epilogue's column and rows for this thread. */
  float *sZ = (float *)(smem + STAGES * STAGE_ELEMS); /* [TILE_B][ZP] */
  const int ecol = tid / TPC, epart = tid % TPC;
  const fs_col col = fs_col_load(p, b0 + ecol);

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int q = 0; q < 4; q++) acc[mi][ni][q] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < total) load_stage(s, s);
    cp_async_commit();
  }

  for (int it = 0; it < total; it++) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      const int nx = it + STAGES - 1;
      if (nx < total) load_stage(nx, nx % STAGES);
      cp_async_commit();
    }
    const fs_elem *sW = smem + (it % STAGES) * STAGE_ELEMS;
    const fs_elem *sH = sW + TILE_V * LDS;
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

    const int t = it / KT;
    if (it - t * KT != KT - 1) continue;

    /* ---- epilogue of vocab tile t: stage the logits, perturb, fold ---- */
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int q = 0; q < 4; q++)
          sZ[(wn * WN + ni * 8 + 2 * (lane & 3) + (q & 1)) * ZP + wm * WM + mi * 16 +
             (lane >> 2) + 8 * (q >> 1)] = acc[mi][ni][q];
    __syncthreads();
    if (p.softcap > 0.0f) { /* fs_options.logit_softcap */
      fs_softcap_staged(p, sZ, TILE_B, ZP, tid, THREADS);
      __syncthreads();
    }
    if (p.zout) /* a filtered call's logits (runtime/filter.c) */
      fs_zout_staged(p, sZ, TILE_B, ZP, b0, v_begin + t * TILE_V, v_end, tid, THREADS);
    fs_epilogue(p, sZ + ecol * ZP, col, epart * RPT, v_begin + t * TILE_V, v_end, t, chunk,
                epart == 0);
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int q = 0; q < 4; q++) acc[mi][ni][q] = 0.0f;
  }
  cp_async_wait<0>();

#if REDUCE_LASTCTA
  fs_last_cta_reduce(p, b0, THREADS);
#endif
}
