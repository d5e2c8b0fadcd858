/*
** bench_kernels.h: the CUDA source (compiled with NVRTC by fs-bench) of the
** baselines we race against, on materialised logits, and a device fill:
**   fsb_fill      : uniform bf16/fp16 values in [-scale, scale) (hash-based)
**   fsb_gumbel    : Gumbel-max over [B, V] logits, 4 logits per thread and
**                   one Philox per four tokens (our own noise and its fast
**                   logs, fs_gumbel_fast in fs_rng.h, as in the fused kernel), a
**                   per-row atomicMax of the 64-bit key: the best separate
**                   sampler we can write (one pass over the logits)
**   fsb_multinomial : the classic sampler, one CTA per row: max, sum of
**                   exp, then the inverse CDF by a block-wide prefix scan
**                   (three passes over the row)
**   fsb_flush     : reads n 16-byte words (the L2 flush between timed runs:
**                   evicts W and H and leaves only clean lines behind)
*/
#ifndef FS_BENCH_KERNELS_H
#define FS_BENCH_KERNELS_H

static const char fsb_source[] =
"#include \"fs_rng.h\"\n"
"#ifndef FSB_BF16\n#define FSB_BF16 1\n#endif\n"
"__device__ __forceinline__ float fsb_to_float(unsigned short h) {\n"
"#if FSB_BF16\n  return __uint_as_float((unsigned)h << 16);\n"
"#else\n  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n#endif\n}\n"
"__device__ __forceinline__ unsigned short fsb_from_float(float f) {\n"
"#if FSB_BF16\n  unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n"
"#else\n  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n#endif\n}\n"
"extern \"C\" __global__ void fsb_fill(unsigned short *p, unsigned long long n, float scale,\n"
"                                     unsigned long long seed) {\n"
"  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;\n"
"       i += (unsigned long long)gridDim.x * blockDim.x) {\n"
"    unsigned long long z = (i + seed) * 0x9E3779B97F4A7C15ull;\n"
"    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull; z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;\n"
"    z ^= z >> 31;\n"
"    float u = (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;\n"
"    p[i] = fsb_from_float(u * scale);\n"
"  }\n"
"}\n"
"extern \"C\" __global__ void fsb_gumbel(const unsigned short *logits, int B, int V, float invT,\n"
"    unsigned long long seed, unsigned long long offset, unsigned long long *keys) {\n"
"  const int b = blockIdx.y;\n"
"  const unsigned short *row = logits + (size_t)b * V;\n"
"  unsigned long long best = 0ull;\n"
"  for (int q = blockIdx.x * blockDim.x + threadIdx.x; 4 * q < V; q += gridDim.x * blockDim.x) {\n"
"    const int v0 = 4 * q;\n"
"    fs_philox_out r = fs_noise_quad(seed, offset, (unsigned)q, 0u, (unsigned)(b + 1));\n"
"    unsigned short h[4];\n"
"    if (v0 + 3 < V && (V & 3) == 0) { uint2 w = *(const uint2 *)(row + v0);\n"
"      h[0] = w.x & 0xffff; h[1] = w.x >> 16; h[2] = w.y & 0xffff; h[3] = w.y >> 16; }\n"
"    else { for (int j = 0; j < 4; j++) h[j] = v0 + j < V ? row[v0 + j] : 0; }\n"
"    for (int j = 0; j < 4; j++) if (v0 + j < V) {\n"
"      float s = fmaf(fsb_to_float(h[j]), invT, fs_gumbel_fast(r.v[j]));\n"
"      unsigned long long k = fs_pack_key(s, (unsigned)(v0 + j)); if (k > best) best = k; }\n"
"  }\n"
"  for (int o = 16; o > 0; o >>= 1) { unsigned long long k = __shfl_xor_sync(0xffffffffu, best, o);\n"
"    if (k > best) best = k; }\n"
"  if ((threadIdx.x & 31) == 0) atomicMax(keys + b, best);\n"
"}\n"
"extern \"C\" __global__ void __launch_bounds__(1024) fsb_multinomial(const unsigned short *logits,\n"
"    int V, float invT, unsigned long long seed, unsigned long long offset, int *tokens) {\n"
"  __shared__ float red[32];\n"
"  __shared__ float bcast;\n"
"  const int b = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
"  const unsigned short *row = logits + (size_t)b * V;\n"
"  float m = -3.4e38f;\n"
"  for (int v = tid; v < V; v += blockDim.x) m = fmaxf(m, fsb_to_float(row[v]) * invT);\n"
"  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));\n"
"  if (lane == 0) red[warp] = m; __syncthreads();\n"
"  if (tid == 0) { float x = red[0]; for (int i = 1; i < (int)(blockDim.x >> 5); i++) x = fmaxf(x, red[i]); bcast = x; }\n"
"  __syncthreads(); m = bcast; __syncthreads();\n"
"  float s = 0.0f;\n"
"  for (int v = tid; v < V; v += blockDim.x) s += __expf(fsb_to_float(row[v]) * invT - m);\n"
"  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);\n"
"  if (lane == 0) red[warp] = s; __syncthreads();\n"
"  if (tid == 0) { float x = 0; for (int i = 0; i < (int)(blockDim.x >> 5); i++) x += red[i];\n"
"    fs_philox_out r = fs_noise_quad(seed, offset, 0u, 0u, (unsigned)(b + 1));\n"
"    bcast = fs_uniform_small(r.v[0]) * x; }\n"
"  __syncthreads();\n"
"  float target = bcast, base = 0.0f; int found = V - 1;\n"
"  for (int c0 = 0; c0 < V; c0 += blockDim.x) {\n"
"    const int v = c0 + tid;\n"
"    float p = v < V ? __expf(fsb_to_float(row[v]) * invT - m) : 0.0f, x = p;\n"
"    for (int o = 1; o < 32; o <<= 1) { float y = __shfl_up_sync(0xffffffffu, x, o); if (lane >= o) x += y; }\n"
"    __syncthreads(); if (lane == 31) red[warp] = x; __syncthreads();\n"
"    float wsum = 0.0f; for (int i = 0; i < warp; i++) wsum += red[i];\n"
"    float total = 0.0f; for (int i = 0; i < (int)(blockDim.x >> 5); i++) total += red[i];\n"
"    const float incl = base + wsum + x;\n"
"    const int hit = v < V && incl >= target && incl - p < target;\n"
"    if (__syncthreads_or(hit)) { if (hit) tokens[b] = v; return; }\n"
"    base += total;\n"
"  }\n"
"  if (tid == 0) tokens[b] = found;\n"
"}\n"
"extern \"C\" __global__ void fsb_flush(const uint4 *p, unsigned long long n, unsigned *out) {\n"
"  unsigned acc = 0;\n"
"  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;\n"
"       i += (unsigned long long)gridDim.x * blockDim.x) {\n"
"    const uint4 v = p[i];\n"
"    acc ^= v.x ^ v.y ^ v.z ^ v.w;\n"
"  }\n"
"  if (acc == 0x9E3779B9u) *out = acc; /* never, but the loads must stay */\n"
"}\n";

#endif
