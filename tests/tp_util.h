/*
** tp_util.h: the problem the tensor-parallel tests share (test_tp on one
** GPU, test_tp_nccl over several): B rows of H and a V-row W (bf16, fixed
** seed), per-row temperatures with greedy rows mixed in, two samples per
** row, uneven shard boundaries, and the unsharded draw every rank must
** reproduce bitwise.  Header-only (static), like gpu_util.h.
*/
#ifndef FS_TP_UTIL_H
#define FS_TP_UTIL_H

#include "gpu_util.h"

#define TP_MAXR 8
enum { TP_B = 6, TP_D = 512, TP_V = 30011, TP_S = 2, TP_NITEMS = TP_B * TP_S };

/* Per-row temperatures: sampled rows and greedy ones (T = 0). */
static const float tp_temps[TP_B] = {1.0f, 0.0f, 0.7f, 2.0f, 1.0f, 0.0f};

/* Uneven shard boundaries of nv rows over R ranks: start[0 .. R], not
** multiples of 16 (or 4) inside. */
static inline void tp_shard_bounds(int nv, int R, int *start) {
  for (int k = 0; k <= R; k++) start[k] = (int)((long long)nv * k / R);
  for (int k = 1; k < R; k++) start[k] += (k % 2 ? 3 : -5);
}

/* The host data (malloc'ed; free both): H [TP_B, TP_D] uniform in [0, 1),
** W [TP_V, TP_D] in [0, 0.2). */
static inline void tp_host_data(uint16_t **h, uint16_t **w) {
  unsigned long long seed = 99;
  *h = gu_malloc((size_t)TP_B * TP_D * 2);
  *w = gu_malloc((size_t)TP_V * TP_D * 2);
  for (size_t i = 0; i < (size_t)TP_B * TP_D; i++)
    (*h)[i] = fs_test_f2bf((float)fs_test_uniform(&seed));
  for (size_t i = 0; i < (size_t)TP_V * TP_D; i++)
    (*w)[i] = fs_test_f2bf((float)(fs_test_uniform(&seed) * 0.2));
}

/* The sampling parameters, with the temperatures at device pointer temps. */
static inline fs_sampling tp_sampling(CUdeviceptr temps) {
  fs_sampling s = {0, (const float *)gu_ptr(temps), TP_S, 1234, NULL, 5, NULL};
  return s;
}

/* Outputs of every item (tokens, logits, keys), poisoned, on ctx's GPU. */
static inline void tp_outputs(fs_context *ctx, gu_outputs *o) {
  gu_outputs_alloc(ctx, o, TP_NITEMS, 1, 1);
  gu_outputs_poison(ctx, o);
}

/* The unsharded problem on ctx's GPU (H, W and temperatures uploaded) and
** its draw: what every test of a sharded call compares against. */
typedef struct tp_unsharded {
  uint16_t *h, *w; /* host data (tp_host_data) */
  CUdeviceptr dh, dw, dtemps;
  fs_problem full;
  fs_sampling s;
  gu_outputs ref; /* its draw, fetched to the host copies */
} tp_unsharded;

static inline void tp_unsharded_init(fs_context *ctx, tp_unsharded *u) {
  tp_host_data(&u->h, &u->w);
  u->dh = gu_upload_new(ctx, u->h, (size_t)TP_B * TP_D * 2);
  u->dw = gu_upload_new(ctx, u->w, (size_t)TP_V * TP_D * 2);
  u->dtemps = gu_upload_new(ctx, tp_temps, sizeof tp_temps);
  u->s = tp_sampling(u->dtemps);
  u->full = (fs_problem){TP_B, TP_D, TP_V, 0, FS_DTYPE_BF16, gu_ptr(u->dh), 0, gu_ptr(u->dw), 0};
  tp_outputs(ctx, &u->ref);
  const fs_outputs o = gu_outputs_api(&u->ref);
  REQUIRE(fs_sample(ctx, &u->full, &u->s, &o, NULL) == FS_OK);
  gu_outputs_fetch(ctx, &u->ref);
}

static inline void tp_unsharded_free(fs_context *ctx, tp_unsharded *u) {
  gu_outputs_free(ctx, &u->ref);
  gu_free(ctx, u->dh);
  gu_free(ctx, u->dw);
  gu_free(ctx, u->dtemps);
  free(u->h);
  free(u->w);
}

/* Counts the items of one rank's outputs o (on ctx's GPU; poisoned before
** the call) that differ from the unsharded draw ref (fetched) in token, key
** or logit bits, printing the first few. */
static inline int tp_mismatches(fs_context *ctx, gu_outputs *o, const gu_outputs *ref,
                                const char *who) {
  gu_outputs_fetch(ctx, o);
  int mism = 0;
  for (int i = 0; i < TP_NITEMS; i++)
    if (o->h_tokens[i] != ref->h_tokens[i] || o->h_keys[i] != ref->h_keys[i] ||
        memcmp(&o->h_logits[i], &ref->h_logits[i], 4)) {
      if (mism++ < 5)
        fprintf(stderr, "%s item %d: token %d key %016llx logit %g; unsharded %d %016llx %g\n",
                who, i, o->h_tokens[i], (unsigned long long)o->h_keys[i], o->h_logits[i],
                ref->h_tokens[i], (unsigned long long)ref->h_keys[i], ref->h_logits[i]);
    }
  return mism;
}

#endif
