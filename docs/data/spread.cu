// Experiment: per-SM spread of a streaming read of a W-sized buffer split
// into 128-row tiles (1 MB at D = 4096), one persistent CTA per SM.
// mode 0: contiguous chunks of tiles per CTA (the kernels' order)
// mode 1: tiles interleaved over CTAs (tile c, c + G, ...)
// mode 2: contiguous chunks, tile read in TMA box order (64-col pieces, all rows, next k)
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
__device__ unsigned long long gt() { unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }
__device__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %smid;" : "=r"(s)); return s; }
__global__ void __launch_bounds__(1024) stream(const uint4 *W, int tiles, int rows, int D, int mode,
    unsigned long long *t0, unsigned long long *t1, unsigned *sm, unsigned *sink) {
  const int G = gridDim.x, c = blockIdx.x;
  unsigned long long s = gt();
  const size_t tile_u4 = (size_t)rows * D * 2 / 16;
  unsigned acc = 0;
  int jb = (int)((long long)c * tiles / G), je = (int)((long long)(c + 1) * tiles / G);
  int n = mode == 1 ? (tiles - c + G - 1) / G : je - jb;
  for (int j = 0; j < n; j++) {
    const int tile = mode == 1 ? c + j * G : jb + j;
    const uint4 *p = W + tile * tile_u4;
    if (mode == 2) { // piece (k, row): 8 x 16 B per row per k-step of 64 elements
      const int rowu4 = D * 2 / 16, ksteps = D / 64;
      for (int i = threadIdx.x; i < ksteps * rows * 8; i += 4 * blockDim.x) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) { int q = i + u * blockDim.x; int k = q / (rows * 8), r = (q / 8) % rows, e = q % 8;
          v[u] = q < ksteps * rows * 8 ? __ldcs(p + (size_t)r * rowu4 + k * 8 + e) : make_uint4(0,0,0,0); }
#pragma unroll
        for (int u = 0; u < 4; u++) acc ^= v[u].x;
      }
    } else {
      for (size_t i = threadIdx.x; i < tile_u4; i += 4 * blockDim.x) {
        uint4 a = __ldcs(p + i), b = __ldcs(p + i + blockDim.x), cc = __ldcs(p + i + 2 * blockDim.x), d = __ldcs(p + i + 3 * blockDim.x);
        acc ^= a.x ^ b.y ^ cc.z ^ d.w;
      }
    }
  }
  __syncthreads();
  if (acc == 0x12345u) *sink = acc;
  if (threadIdx.x == 0) { t0[c] = s; t1[c] = gt(); sm[c] = smid(); }
}
int main(int argc, char **argv) {
  int D = argc > 1 ? atoi(argv[1]) : 4096, V = argc > 2 ? atoi(argv[2]) : 151936, rows = 128;
  int tiles = V / rows, G; cudaDeviceGetAttribute(&G, cudaDevAttrMultiProcessorCount, 0);
  size_t bytes = (size_t)tiles * rows * D * 2;
  uint4 *W; cudaMalloc(&W, bytes); cudaMemset(W, 1, bytes);
  unsigned long long *t0, *t1; unsigned *sm, *sink;
  cudaMalloc(&t0, G * 8); cudaMalloc(&t1, G * 8); cudaMalloc(&sm, G * 4); cudaMalloc(&sink, 4);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<unsigned long long> h0(G), h1(G); std::vector<unsigned> hs(G);
  std::vector<std::vector<double>> persm(3, std::vector<double>(G * 8, 0));
  printf("D=%d V=%d tiles=%d G=%d bytes=%.3f GB\n", D, V, tiles, G, bytes / 1e9);
  for (int mode = 0; mode < 3; mode++) {
    std::vector<double> times;
    std::vector<std::vector<double>> runs;
    for (int r = 0; r < 7; r++) {
      cudaEventRecord(e0);
      stream<<<G, 1024>>>(W, tiles, rows, D, mode, t0, t1, sm, sink);
      cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); times.push_back(ms * 1e3);
      cudaMemcpy(h0.data(), t0, G * 8, cudaMemcpyDeviceToHost); cudaMemcpy(h1.data(), t1, G * 8, cudaMemcpyDeviceToHost);
      cudaMemcpy(hs.data(), sm, G * 4, cudaMemcpyDeviceToHost);
      unsigned long long mn = *std::min_element(h0.begin(), h0.end()), mx = *std::max_element(h1.begin(), h1.end());
      double sum = 0, dmax = 0, dmin = 1e30, smax = 0; std::vector<double> bysm(G, 0);
      for (int c = 0; c < G; c++) { double d = (h1[c] - h0[c]) * 1e-3; sum += d; dmax = std::max(dmax, d); dmin = std::min(dmin, d); smax = std::max(smax, (h0[c] - mn) * 1e-3); if (hs[c] < (unsigned)G) bysm[hs[c]] = d; }
      runs.push_back(bysm);
      if (r >= 1) printf("mode %d run %d: event %.1f us, span %.1f us, per-CTA dur avg %.1f max %.1f min %.1f, last start %.1f us\n", mode, r, ms * 1e3, (mx - mn) * 1e-3, sum / G, dmax, dmin, smax);
    }
    // stability of per-SM duration across runs 1..6: correlation of run 1 vs others
    auto corr = [&](const std::vector<double> &a, const std::vector<double> &b) { double ma = 0, mb = 0; for (int i = 0; i < G; i++) ma += a[i], mb += b[i]; ma /= G; mb /= G; double sab = 0, saa = 0, sbb = 0; for (int i = 0; i < G; i++) sab += (a[i]-ma)*(b[i]-mb), saa += (a[i]-ma)*(a[i]-ma), sbb += (b[i]-mb)*(b[i]-mb); return sab / sqrt(saa * sbb + 1e-30); };
    printf("mode %d per-SM duration correlation run1 vs runs 2..6:", mode);
    for (int r = 2; r < 7; r++) printf(" %.2f", corr(runs[1], runs[r]));
    printf("\nmode %d per-SM duration (run 6, us) by smid:", mode);
    for (int i = 0; i < G; i++) printf("%s%.0f", i % 22 ? " " : "\n  ", runs[6][i]);
    printf("\n");
  }
  return 0;
}
