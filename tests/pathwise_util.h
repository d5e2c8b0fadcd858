/*
** pathwise_util.h: the case table and per-call inputs that the pathwise GPU
** tests share (test_pathwise.c: token noise; test_group.c: FS_NOISE_GROUP16).
** A case is one random head drawn `calls` times; every call's sampling is
** built twice, with host arrays for the CPU reference and device arrays for
** fs_sample, from the same values.  Header-only (static), like gpu_util.h.
*/
#ifndef FS_PATHWISE_UTIL_H
#define FS_PATHWISE_UTIL_H

#include "gpu_family.h"
#include "gpu_util.h"

enum { TEMPS_SCALAR = 0, TEMPS_MIX = 1 };

typedef struct pw_case {
  const char *name;
  int B, D, V, dtype;
  int64_t vocab_offset;
  int temps;         /* TEMPS_SCALAR (T below) or TEMPS_MIX */
  float T;
  int per_row_seeds; /* seeds and offsets as per-row device arrays */
  int S, calls;      /* num_samples; calls with different seeds/offsets */
  int strided;       /* padded row strides */
} pw_case;

/* One row's sampling parameters on the host (as the reference reads them). */
typedef struct pw_row_params {
  int greedy;
  double T;
  uint64_t seed, offset;
  uint32_t tag;
} pw_row_params;

static inline pw_row_params pw_row_of(const fs_sampling *hs, int b) {
  pw_row_params r;
  const float t = hs->temperatures ? hs->temperatures[b] : hs->temperature;
  r.greedy = !(t > 0.0f);
  r.T = (double)t;
  r.seed = hs->seeds ? hs->seeds[b] : hs->seed;
  r.offset = hs->offsets ? hs->offsets[b] : hs->offset;
  r.tag = hs->seeds ? 0u : (uint32_t)b + 1u;
  return r;
}

/* The fp32 accumulation bound of a logit over D products with
** sum |h w| = a (test_pathwise.c's file comment): 2 D 2^-24 a / (1 - 2 D 2^-24). */
static inline double pw_dz(int D, double a) {
  const double gd = 2.0 * D / 16777216.0;
  return gd * a / (1.0 - gd);
}

/* A case's per-row arrays: host copies (for the reference) and device copies
** (for fs_sample).  The temperatures are fixed; seeds and offsets are drawn
** per call. */
typedef struct pw_rows {
  int B;
  float *temps;
  uint64_t *seeds, *offsets;
  CUdeviceptr d_temps, d_seeds, d_offsets;
} pw_rows;

/* temps[b] = temperature(b), uploaded; seeds and offsets allocated. */
static inline void pw_rows_init(fs_context *ctx, pw_rows *r, int B, float (*temperature)(int b)) {
  r->B = B;
  r->temps = gu_malloc(sizeof(float) * (size_t)B);
  r->seeds = gu_malloc(sizeof(uint64_t) * (size_t)B);
  r->offsets = gu_malloc(sizeof(uint64_t) * (size_t)B);
  for (int b = 0; b < B; b++) r->temps[b] = temperature(b);
  r->d_temps = gu_upload_new(ctx, r->temps, sizeof(float) * (size_t)B);
  r->d_seeds = gu_alloc(ctx, sizeof(uint64_t) * (size_t)B);
  r->d_offsets = gu_alloc(ctx, sizeof(uint64_t) * (size_t)B);
}

static inline void pw_rows_free(fs_context *ctx, pw_rows *r) {
  gu_free(ctx, r->d_temps);
  gu_free(ctx, r->d_seeds);
  gu_free(ctx, r->d_offsets);
  free(r->temps);
  free(r->seeds);
  free(r->offsets);
}

/* The sampling of call `call` of case c (the index-th of its table): *hs
** with host arrays, *ds the same with r's device arrays.  Seeds and offsets
** have high bits set, so both 32-bit halves matter; with per-row seeds they
** are drawn from *rs and uploaded. */
static inline void pw_call_sampling(fs_context *ctx, const pw_case *c, int index, int call,
                                    pw_rows *r, unsigned long long *rs, fs_sampling *hs,
                                    fs_sampling *ds) {
  const int B = r->B;
  memset(hs, 0, sizeof *hs);
  hs->temperature = c->T;
  hs->num_samples = c->S;
  hs->seed = 0x0123456789ABCDEFull ^ ((unsigned long long)call << 40) ^ (unsigned long long)index;
  hs->offset = ((unsigned long long)(call + 1) << 32) | (unsigned long long)(call * 7919 + index);
  if (c->temps == TEMPS_MIX) hs->temperatures = r->temps;
  if (c->per_row_seeds) {
    for (int b = 0; b < B; b++) {
      r->seeds[b] = fs_test_rand(rs);
      r->offsets[b] = fs_test_rand(rs) >> (b % 3 ? 0 : 40);
    }
    gu_upload(ctx, r->d_seeds, r->seeds, sizeof(uint64_t) * (size_t)B);
    gu_upload(ctx, r->d_offsets, r->offsets, sizeof(uint64_t) * (size_t)B);
    hs->seeds = r->seeds;
    hs->offsets = r->offsets;
  }
  *ds = *hs;
  ds->temperatures = hs->temperatures ? (const float *)gu_ptr(r->d_temps) : NULL;
  ds->seeds = hs->seeds ? (const uint64_t *)gu_ptr(r->d_seeds) : NULL;
  ds->offsets = hs->offsets ? (const uint64_t *)gu_ptr(r->d_offsets) : NULL;
}

/* Case c's head, generated from `seed` and uploaded: logits of standard
** deviation ~2 (a spread distribution at T = 1), rows padded (H by 16, W
** by 8) when c->strided. */
static inline void pw_head_init(fs_context *ctx, gu_lmhead *lm, const pw_case *c,
                                unsigned long long seed) {
  gu_lmhead_init(lm, c->B, c->D, c->V, c->dtype, c->vocab_offset, c->strided ? c->D + 16 : 0,
                 c->strided ? c->D + 8 : 0, gu_w_scale(c->D, 2.0), seed);
  gu_lmhead_upload(ctx, lm);
}

/* Runs run(context, &cases[i], i) for each of the n cases, on ctx or on the
** kernel family FS_TEST_FAMILY forces (gpu_family.h). */
static inline void pw_run_cases(fs_context *ctx, const pw_case *cases, int n,
                                void (*run)(fs_context *, const pw_case *, int)) {
  for (int i = 0; i < n; i++) {
    fs_context *c = gu_family_context(ctx, cases[i].dtype, cases[i].B);
    run(c, &cases[i], i);
    gu_family_release(ctx, c);
  }
}

#endif /* FS_PATHWISE_UTIL_H */
