/*
** fsamp_reduce.cu: the small kernels that finish a fused call outside its
** variant (runtime/sample.c, runtime/tp.c launch them).  Compiled once per
** context into a module of its own, beside the first variant it loads
** (runtime/kernels.c): no variant depends on how they are compiled, so the
** generator's revision does not hash this file (generator/gen.c), and the
** variants' own modules hold fsamp_main alone (until 0.3.9 every variant
** carried these four, 10-15% of its NVRTC time: perf-notes 40a).
**
**  fsamp_reduce  : the second launch's reduction (variants with
**                  REDUCE_LASTCTA=0, `_r2_`), a warp per item;
**  fsamp_finalize: after the keys of all vocabulary shards were max-reduced
**                  (tensor parallelism): the token of each global key, and the
**                  logit where this shard holds the winner (0 elsewhere, so a
**                  sum over shards gives the winner's logit); with logprobs,
**                  for rows < `rows` after the n items, exp(L - M) of this
**                  shard's log-sum-exp L and the max M over shards, whose sum
**                  over shards is exp(log-sum-exp - M);
**  fsamp_tp_lse  : with logprobs, before the max: a warp per row, the shard's
**                  log-sum-exp key of each row (tp_lse_row);
**  fsamp_tp_logprobs: after the sums: logprob = logit - (M + log sum).
*/
/* fs_device.h's shared pieces (fs_reduce_items, fs_lse_key) need its
** epilogue's tile macros: a dummy epilogue, which nothing here instantiates */
#define FS_BF16 1
#define TILE_V 16
#define TILE_B 1
#define TPC 1
#define RPT 16
#include "fs_device.h"

/* Row `row`'s G (m, l) pairs at lse (fs_params.lse) merged by one warp: the
** shard's log-sum-exp m + log l as fs_lse_key, written by lane 0 to *key. */
__device__ __forceinline__ void tp_lse_row(const float *lse, int G, int row, int lane,
                                           unsigned long long *key) {
  const float *e = lse + 2 * (size_t)row * G;
  fs_lse a = fs_lse_none(); /* each pair loaded once, merged as fs_lse_put merges */
  for (int c = lane; c < G; c += 32) fs_lse_merge(a, __ldcg(e + 2 * c), __ldcg(e + 2 * c + 1));
  for (int o = 16; o > 0; o >>= 1)
    fs_lse_merge(a, __shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.l, o));
  if (lane == 0) *key = fs_lse_key(a.m + logf(a.l));
}

extern "C" __global__ void __launch_bounds__(128) fsamp_reduce(const fs_params p) {
  const int item = blockIdx.x * 4 + (threadIdx.x >> 5);
  if (item < p.B * p.num_samples) fs_reduce_items(p, item, 1, threadIdx.x & 31);
}

extern "C" __global__ void fsamp_finalize(const unsigned long long *local_keys,
                                          const unsigned long long *global_keys,
                                          const float *local_logits, int n, int *tokens,
                                          float *logits, unsigned long long *keys, int rows,
                                          float *scaled) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows)
    scaled[i] = expf(fs_lse_unkey(local_keys[n + i]) - fs_lse_unkey(global_keys[n + i]));
  if (i >= n) return;
  const unsigned long long g = global_keys[i];
  tokens[i] = (int)fs_key_token(g);
  if (logits) logits[i] = local_keys[i] == g ? local_logits[i] : 0.0f;
  if (keys) keys[i] = g;
}

extern "C" __global__ void __launch_bounds__(128) fsamp_tp_lse(const float *lse, int G, int rows,
                                                              unsigned long long *keys) {
  const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
  if (row < rows) tp_lse_row(lse, G, row, threadIdx.x & 31, keys + row);
}

extern "C" __global__ void fsamp_tp_logprobs(const float *sums,
                                             const unsigned long long *global_keys, int n, int S,
                                             float *logprobs, float *logits) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int row = n + i / S;
  logprobs[i] = sums[i] - (fs_lse_unkey(global_keys[row]) + logf(sums[row]));
  if (logits) logits[i] = sums[i];
}
