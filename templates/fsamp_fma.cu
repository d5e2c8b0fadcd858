/*
** fsamp_fma.cu: fused LM-head sampling with plain FFMA, for the smallest
** batches (TILE_B <= 8), where the tensor cores would idle on padding.
**
** Loads are register-staged and vectorised: no shared-memory pipeline.  A
** warp owns ROWS vocab rows of the tile; per step each lane loads 16 bytes
** (8 elements) of every one of those W rows with ld.global.nc and L1
** no-allocate (W is streamed once) and 16 bytes of each of the TILE_B H rows
** (read-only path, L1-cached: H is re-read by every warp), UNROLL steps of
** loads issued before any of their FMAs.  A warp step covers 256 elements of
** K; a lane accumulates in fp32 the k-slices lane*8 .. lane*8+7 of every
** step.  At the tile's end a butterfly reduce-scatter over the warp leaves
** each dot product in one lane, which stages it in shared memory; after one
** CTA barrier one warp (rotating) runs the shared epilogue of fs_device.h on
** the tile while the others go on.  Two staging buffers, so one barrier per
** tile.  Summation order: per lane in K order, then a fixed butterfly.
*/

/* ---- tunables (the generator overrides these) ---------------------------- */
#ifndef FS_BF16
#define FS_BF16 1          /* 1: bfloat16 inputs; 0: IEEE half */
#endif
#ifndef TILE_B
#define TILE_B 1           /* batch rows per CTA: 1, 2, 4 or 8 */
#endif
#ifndef ROWS
#define ROWS 8             /* vocab rows per warp and tile */
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef UNROLL
#define UNROLL 1           /* K steps of loads in registers before their FMAs */
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

/* ---- derived values and static checks ----------------------------------- */
#define THREADS (WARPS * 32)
#define TILE_V (WARPS * ROWS)
#define ZP (TILE_V + 4)
#define NVAL (ROWS * TILE_B)                 /* dot products per warp and tile */
#define TPC_A (32 / TILE_B)
#define TPC_B (TILE_V / 4)
#define TPC (TPC_A < TPC_B ? TPC_A : TPC_B)  /* epilogue lanes per batch column */
#define RPT (TILE_V / TPC)

static_assert(TILE_B == 1 || TILE_B == 2 || TILE_B == 4 || TILE_B == 8, "TILE_B must be 1..8");
static_assert((ROWS & (ROWS - 1)) == 0 && ROWS >= 2, "ROWS must be a power of two");
static_assert(RPT % 4 == 0, "each epilogue lane takes whole quads of rows");

#include "fs_device.h"

/* 16 bytes of W, streamed: not kept in L1. */
__device__ __forceinline__ uint4 ld_stream(const fs_elem *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

/* The two elements of a packed pair as fp32. */
__device__ __forceinline__ float2 pair_f32(unsigned x) {
#if FS_BF16
  return make_float2(__uint_as_float(x << 16), __uint_as_float(x & 0xffff0000u));
#else
  float lo, hi;
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi) : "r"(x));
  return make_float2(lo, hi);
#endif
}

/* acc += w . h over the 8 elements of one 16-byte vector each. */
__device__ __forceinline__ void dot8(float &acc, const uint4 &w, const float (&h)[8]) {
  const unsigned ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 f = pair_f32(ws[i]);
    acc = fmaf(f.x, h[2 * i], acc);
    acc = fmaf(f.y, h[2 * i + 1], acc);
  }
}

/* Butterfly reduce-scatter of NV per-lane partial sums over a warp, step J
** (lane mask 16 >> J): while a lane holds n > 1 values it keeps the half
** named by its mask bit and adds the partner's copy of that half; once it
** holds one value the steps are plain xor reductions.  At the end the lane
** holds max(NV / 32, 1) full sums, those of indices base, base + 1, ... */
template <int J> struct fs_butterfly {
  template <int NV>
  static __device__ __forceinline__ void run(float (&v)[NV], int lane, int &base) {
    constexpr int m = 16 >> J, n = NV >> J;
    if constexpr (n > 1) {
      const bool up = (lane & m) != 0;
#pragma unroll
      for (int i = 0; i < n / 2; i++) {
        const float send = up ? v[i] : v[i + n / 2];
        const float keep = up ? v[i + n / 2] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, m);
      }
      if (up) base += n / 2;
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], m);
    }
    fs_butterfly<J + 1>::run(v, lane, base);
  }
};
template <> struct fs_butterfly<5> {
  template <int NV> static __device__ __forceinline__ void run(float (&)[NV], int, int &) {}
};

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
fsamp_main(const __grid_constant__ fs_params p) {
  __shared__ __align__(16) float sZ[2][TILE_B * ZP];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int chunk = blockIdx.x, b0 = blockIdx.y * TILE_B;
  int v_begin, v_end;
  fs_chunk_rows(p, chunk, &v_begin, &v_end);
  const int ntiles = (v_end - v_begin + TILE_V - 1) / TILE_V;
  const int nsteps = (p.D + 255) / 256;
  const fs_elem *W = (const fs_elem *)p.W, *H = (const fs_elem *)p.H;

  /* this thread's column when it runs the epilogue */
  const int ecol = lane / TPC, epart = lane % TPC;
  const fs_col col = fs_col_load(p, ecol < TILE_B ? b0 + ecol : p.B);
  const fs_elem *hrow[TILE_B];
#pragma unroll
  for (int b = 0; b < TILE_B; b++)
    hrow[b] = H + (long long)min(b0 + b, p.B - 1) * p.h_stride;

  for (int t = 0; t < ntiles; t++) {
    const int r0 = v_begin + t * TILE_V + warp * ROWS;
    const fs_elem *wrow[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; r++) wrow[r] = W + (long long)min(r0 + r, p.V - 1) * p.w_stride;
    float acc[ROWS][TILE_B];
#pragma unroll
    for (int r = 0; r < ROWS; r++)
#pragma unroll
      for (int b = 0; b < TILE_B; b++) acc[r][b] = 0.0f;

    for (int s0 = 0; s0 < nsteps; s0 += UNROLL) {
      uint4 w[UNROLL][ROWS], h[UNROLL][TILE_B];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        const int k = (s0 + u) * 256 + lane * 8;
        const bool ok = k < p.D;
#pragma unroll
        for (int r = 0; r < ROWS; r++) w[u][r] = ok ? ld_stream(wrow[r] + k) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int b = 0; b < TILE_B; b++)
          h[u][b] = ok ? __ldg((const uint4 *)(hrow[b] + k)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int b = 0; b < TILE_B; b++) {
          float hf[8];
          const unsigned hs[4] = {h[u][b].x, h[u][b].y, h[u][b].z, h[u][b].w};
#pragma unroll
          for (int i = 0; i < 4; i++) {
            const float2 f = pair_f32(hs[i]);
            hf[2 * i] = f.x;
            hf[2 * i + 1] = f.y;
          }
#pragma unroll
          for (int r = 0; r < ROWS; r++) dot8(acc[r][b], w[u][r], hf);
        }
    }

    float v[NVAL]; /* index b * ROWS + r */
#pragma unroll
    for (int b = 0; b < TILE_B; b++)
#pragma unroll
      for (int r = 0; r < ROWS; r++) v[b * ROWS + r] = acc[r][b];
    int base = 0;
    fs_butterfly<0>::run(v, lane, base);
    float *z = sZ[t & 1];
    constexpr int NHELD = NVAL > 32 ? NVAL / 32 : 1;
#pragma unroll
    for (int i = 0; i < NHELD; i++) {
      const int idx = base + i, b = idx / ROWS, r = idx % ROWS;
      z[b * ZP + warp * ROWS + r] = v[i];
    }
    __syncthreads();
    if (warp == t % WARPS) {
      if (p.softcap > 0.0f) { /* fs_options.logit_softcap: each column by its TPC lanes */
        if (ecol < TILE_B) fs_softcap_staged(p, z + ecol * ZP, 1, ZP, epart, TPC);
        __syncwarp();
      }
      if (p.zout && ecol < TILE_B) /* a filtered call's logits (runtime/filter.c) */
        fs_zout_staged(p, z + ecol * ZP, 1, ZP, b0 + ecol, v_begin + t * TILE_V, v_end, epart,
                       TPC);
      fs_epilogue(p, z + (ecol < TILE_B ? ecol : 0) * ZP, col, epart * RPT,
                  v_begin + t * TILE_V, v_end, t, chunk, epart == 0);
    }
  }

  fs_last_cta_reduce(p, b0, THREADS);
}
