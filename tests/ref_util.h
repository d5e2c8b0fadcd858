/*
** ref_util.h: host-side problems for the CPU reference tests
** (tests/cpu/test_reference.c, test_group_ref.c, the options' tests): random
** bf16/fp16 H and W with NaN in the row padding (the reference must not read
** it), the oracle's logits in double straight from the definition, its
** log-sum-exp and token draw, masks, and output buffers.  Header-only (static inline), like gpu_util.h: each test is one
** source plus the harness.  Allocations that fail stop the test (REQUIRE).
*/
#ifndef FS_REF_UTIL_H
#define FS_REF_UTIL_H

#include "fs_test.h"

#include "fs_rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* n bytes (rounded up to 64), 64-byte aligned; free() them. */
/* c tanh(z / c) in double, exactly as the reference forms it (c the float
** option widened to double); c == 0 means no cap. */
static inline double ref_cap(double z, float c) {
  const double cd = (double)c;
  return c > 0.0f ? cd * tanh(z / cd) : z;
}

/* Entries uniform(-s, s) give logits of sd sqrt(D) s^2 / 3: the s of sd. */
static inline double ref_scale_for_sd(double sd, int D) {
  return sqrt(3.0 * sd / sqrt((double)D));
}

static inline void *ref_xalloc(size_t bytes) {
  void *ptr = aligned_alloc(64, (bytes + 63) / 64 * 64);
  REQUIRE(ptr != NULL);
  return ptr;
}

/* x rounded to dtype's bits, and back: exactly what the reference decodes. */
static inline uint16_t ref_encode(int dtype, double x) {
  return dtype == FS_DTYPE_BF16 ? fs_test_f2bf((float)x) : fs_test_f2h((float)x);
}
static inline double ref_decode(int dtype, uint16_t x) {
  return dtype == FS_DTYPE_BF16 ? (double)fs_test_bf2f(x) : (double)fs_test_h2f(x);
}

/* Fills an [rows, stride] matrix with uniform(lo, hi) values (one
** fs_test_uniform() draw u each) in its first D columns and NaN in the
** padding.  A symmetric range (lo == -hi) is hi * u, exactly; any other is
** lo + (hi - lo) (u + 1) / 2. */
static inline void ref_fill(uint16_t *m, int dtype, int rows, int D, long long stride,
                            double lo, double hi, unsigned long long *st) {
  const uint16_t nan = dtype == FS_DTYPE_BF16 ? 0x7fc0 : 0x7e00;
  for (long long r = 0; r < rows; r++)
    for (long long k = 0; k < stride; k++) {
      if (k >= D) {
        m[r * stride + k] = nan;
        continue;
      }
      const double u = fs_test_uniform(st);
      m[r * stride + k] =
          ref_encode(dtype, lo == -hi ? hi * u : lo + (hi - lo) * 0.5 * (u + 1.0));
    }
}

/* A problem that owns its host H and W. */
typedef struct ref_prob {
  fs_problem p;
  uint16_t *h, *w; /* owned, 64-byte aligned */
} ref_prob;

/* B rows of H and V rows of W, uniform(-scale, scale) (H first, from *st);
** hs/ws of 0 mean D (packed rows), else padded with NaN. */
static inline void ref_prob_make(ref_prob *pr, int dtype, int B, int D, int V, long long hs,
                                 long long ws, long long voff, double scale,
                                 unsigned long long *st) {
  memset(pr, 0, sizeof *pr);
  pr->p.batch = B;
  pr->p.hidden = D;
  pr->p.vocab = V;
  pr->p.vocab_offset = voff;
  pr->p.dtype = dtype;
  pr->p.hidden_stride = hs;
  pr->p.weight_stride = ws;
  const long long hse = hs ? hs : D, wse = ws ? ws : D;
  pr->h = ref_xalloc(sizeof(uint16_t) * (size_t)(B * hse));
  pr->w = ref_xalloc(sizeof(uint16_t) * (size_t)(V * wse));
  ref_fill(pr->h, dtype, B, D, hse, -scale, scale, st);
  ref_fill(pr->w, dtype, V, D, wse, -scale, scale, st);
  pr->p.hidden_states = pr->h;
  pr->p.weight = pr->w;
}

static inline void ref_prob_free(ref_prob *pr) {
  free(pr->h);
  free(pr->w);
}

/* z[v] (v < vocab) for row b, straight from the definition: in double, k in
** increasing order (each product is exact in double). */
static inline void ref_oracle_logits(const fs_problem *p, int b, double *z /* OUT */) {
  const long long hs = p->hidden_stride ? p->hidden_stride : p->hidden;
  const long long ws = p->weight_stride ? p->weight_stride : p->hidden;
  const uint16_t *h = (const uint16_t *)p->hidden_states + b * hs;
  for (int v = 0; v < p->vocab; v++) {
    const uint16_t *w = (const uint16_t *)p->weight + v * ws;
    double acc = 0.0;
    for (int k = 0; k < p->hidden; k++)
      acc += ref_decode(p->dtype, h[k]) * ref_decode(p->dtype, w[k]);
    z[v] = acc;
  }
}

/* The three outputs of n draws. */
typedef struct ref_outs {
  int32_t *tokens;
  float *logits;
  uint64_t *keys;
} ref_outs;

static inline ref_outs ref_outs_new(size_t n) {
  ref_outs o;
  o.tokens = ref_xalloc(n * sizeof(int32_t));
  o.logits = ref_xalloc(n * sizeof(float));
  o.keys = ref_xalloc(n * sizeof(uint64_t));
  return o;
}
static inline void ref_outs_free(ref_outs *o) {
  free(o->tokens);
  free(o->logits);
  free(o->keys);
}

static inline int ref_float_bits_equal(float a, float b) { return memcmp(&a, &b, 4) == 0; }

/* The sampling of random problem number `it` with B rows: per-row
** temperatures (greedy 0, -1 and NaN among them), seeds and offsets drawn
** from *st into the caller's temps, seeds and offs [B], num_samples
** 1 + rand % max_samples, a scalar seed drawn last; `it` picks which
** fields are scalar and which per-row (and greedy scalar rows, and an
** offset past 2^32). */
static inline fs_sampling ref_random_sampling(int it, int B, int max_samples, float *temps,
                                              uint64_t *seeds, uint64_t *offs,
                                              unsigned long long *st) {
  static const float Ts[] = {0.0f, -1.0f, NAN, 0.25f, 1.0f, 3.0f};
  for (int b = 0; b < B; b++) {
    temps[b] = Ts[fs_test_rand(st) % 6];
    seeds[b] = fs_test_rand(st);
    offs[b] = fs_test_rand(st);
  }
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.num_samples = 1 + (int)(fs_test_rand(st) % (unsigned long long)max_samples);
  s.temperature = it % 5 == 0 ? 0.0f : 0.7f;
  s.temperatures = it % 2 ? temps : NULL;
  s.seed = fs_test_rand(st);
  s.seeds = it % 3 == 2 ? seeds : NULL;
  s.offset = it % 4 == 3 ? (1ull << 32) + 5 : (uint64_t)it;
  s.offsets = it % 4 == 2 ? offs : NULL;
  return s;
}

/* A [B, stride] mask, each bit of ids [0, vocab_offset + V) set with
** probability dens; row 1 (if B > 1) allows one token, row 2 (if B > 2)
** none; words past the vocabulary all ones (the kernel must not read them as
** allowing anything it draws). */
static inline uint32_t *ref_make_mask(const fs_problem *p, long long stride, double dens,
                                      unsigned long long *st) {
  uint32_t *m = ref_xalloc(sizeof(uint32_t) * (size_t)(p->batch * stride));
  const long long end = p->vocab_offset + p->vocab;
  for (int b = 0; b < p->batch; b++)
    for (long long w = 0; w < stride; w++) {
      uint32_t x = 0;
      for (int i = 0; i < 32; i++) {
        const long long t = w * 32 + i;
        const int on = t >= end || (double)(fs_test_rand(st) >> 11) * 0x1p-53 < dens;
        x |= (uint32_t)on << i;
      }
      m[b * stride + w] = x;
    }
  for (int b = 1; b < p->batch && b < 3; b++) {
    for (long long t = p->vocab_offset; t < end; t++)
      m[b * stride + t / 32] &= ~(1u << (t % 32));
    if (b == 1) {
      const long long t = p->vocab_offset + p->vocab / 2;
      m[b * stride + t / 32] |= 1u << (t % 32);
    }
  }
  return m;
}

/* Bit t (a global id) of row b's mask m ([B, stride] words); every token is
** allowed without one. */
static inline int ref_allowed(const uint32_t *m, long long stride, int b, long long t) {
  return !m || (int)(m[b * stride + t / 32] >> (t % 32) & 1u);
}

/* The log-sum-exp of z[0 .. V) in double, in two passes (max, then sum). */
static inline double ref_lse(const double *z, int V) {
  double mx = -INFINITY, sum = 0.0;
  for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
  for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
  return mx + log(sum);
}

/* a wins against b: larger, or a number against a NaN. */
static inline int ref_beats(double a, double b) { return a > b || (isnan(b) && !isnan(a)); }

/* One FS_NOISE_TOKEN draw of the tests' oracles: its global id, its logit
** after the call's transforms and the mask (-inf where masked), its score. */
typedef struct ref_odraw {
  int32_t token;
  double z;
  double score; /* z / T + noise, or z on a greedy row */
} ref_odraw;

/* The draw of (b, sample) from the row's transformed logits z[0 .. V) (not
** masked): argmax over tokens of z / T + fs_noise(...), masked tokens -inf,
** ties to the smaller id, NaN scores last; a greedy row (T not > 0) the
** argmax of z.  For a greedy row this is the draw of either noise. */
static inline ref_odraw ref_oracle_draw(const fs_problem *p, const fs_sampling *s,
                                        const uint32_t *m, long long stride, const double *z,
                                        int b, int sample) {
  const float T = s->temperatures ? s->temperatures[b] : s->temperature;
  const int greedy = !(T > 0.0f);
  const uint64_t seed = s->seeds ? s->seeds[b] : s->seed;
  const uint64_t off = s->offsets ? s->offsets[b] : s->offset;
  const uint32_t tag = s->seeds ? 0u : (uint32_t)b + 1u;
  ref_odraw d = {-1, 0.0, 0.0};
  for (int v = 0; v < p->vocab; v++) {
    const long long t = p->vocab_offset + v;
    const double zv = ref_allowed(m, stride, b, t) ? z[v] : -INFINITY;
    const double sc = greedy ? zv
                             : zv / (double)T +
                                   (double)fs_noise(seed, off, (uint32_t)t, (uint32_t)sample, tag);
    if (d.token < 0 || ref_beats(sc, d.score)) d.token = (int32_t)t, d.z = zv, d.score = sc;
  }
  return d;
}

/* Row b's logit bias as flashsampling.h defines it: sum[v] is the fp32 sum,
** in entry order, of the values of the row's entries naming id vocab_offset
** + v, hits[v] how many there were (ids outside the call ignored). */
static inline void ref_bias_sums(const fs_problem *p, const int32_t *tok, const float *val,
                                 int count, int b, float *sum /* OUT [V] */,
                                 int *hits /* OUT [V] */) {
  for (int v = 0; v < p->vocab; v++) sum[v] = 0.0f, hits[v] = 0;
  for (int j = 0; j < count; j++) {
    const long long t = tok[(size_t)b * count + j];
    if (t < p->vocab_offset || t >= p->vocab_offset + p->vocab) continue;
    const int v = (int)(t - p->vocab_offset);
    const float x = val[(size_t)b * count + j];
    sum[v] = hits[v]++ ? sum[v] + x : x;
  }
}

/* fs_reference_sample_ex with options o must return FS_INVALID_ARGUMENT and a
** message that names `name`; `what` (NULL: name) labels a failure. */
static inline void ref_expect_bad(const fs_problem *p, const fs_sampling *s,
                                  const fs_options *o, const char *name, const char *what) {
  int32_t tok[4];
  const int st = fs_reference_sample_ex(p, s, FS_NOISE_TOKEN, o, tok, NULL, NULL);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), name),
            "%s: status %d, message '%s'", what ? what : name, st, fs_last_error(NULL));
}

#endif /* FS_REF_UTIL_H */
