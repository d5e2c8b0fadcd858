// fs-test-timeout: 300
/*
** test_mask.c: the per-row token mask (fs_options.token_mask; fs_sample_ex,
** fs_sample_tp_ex) on the GPU.  flashsampling.h: global id t is allowed for
** row b when bit t % 32 of word token_mask[b * stride + t / 32] is 1; a token
** that is not is drawn as if its logit were -inf (no mass in either noise,
** never a greedy argmax while an allowed token has a logit above -inf); a row
** with no allowed token draws as a row of -inf logits does, with logit -inf.
**
** Every mask row below is drawn as one of six kinds, and every word of it is
** random first, so the bits of ids outside [vocab_offset, vocab_offset + V)
** and the padding words of a stride above the minimum are garbage a kernel
** must not read as the shard's (a wrong word index or row stride shows up as
** masked tokens drawn):
**   half   each id of the shard allowed with probability 1/2 (groups of 16
**          cut at random places);
**   one    exactly one allowed id: the draw must be that id, with its logit;
**   none   no allowed id: the reference's token (the first id of the shard),
**          logit -inf, the reference's key (score -inf);
**   low    only the quarter of ids with the lowest logits, far below the
**          row's max (~4 sd of the logits, a weight of ~e^-8 at T = 1, at
**          V >= 2000): a kernel that masks after choosing, or prunes with a
**          bound taken from masked tokens, returns a masked token or skips
**          the allowed ones;
**   sparse each id allowed with probability 1/16 (most groups of 16 hold
**          zero to two allowed ids);
**   dense  each id allowed with probability 7/8.
** The kind of row b at call c is (b + c) % 6, so B = 1 cases see every kind
** over six calls and B >= 42 see every pairing with the per-row
** temperatures (greedy 0, -1 and NaN among sampled ones, period 7).
**
** 1. Pathwise: fs_sample_ex against fs_reference_sample_ex (the same mask,
**    a host copy) over B in {1, 8, 64, 256} (the large-batch kernels from
**    64), D from 512 to 2048 (520: a partial K tile), V from 2003 to 151937,
**    bf16 and fp16, scalar T in {0.5, 0.7, 1, 2, 0 (greedy calls)} and
**    per-row temperatures mixing greedy rows, scalar and per-row seeds,
**    num_samples 1 to 64 (1 at V = 151937 in both noises, where the wg
**    family prunes by other chunks' bounds), vocab_offset 0, 37 (not a multiple of 4 or 32;
**    vocab_offset + V ends inside a word), and in FS_NOISE_GROUP16 0 and
**    multiples of 16 that are not of 32, token_mask_stride 0, equal to the
**    minimum and 1 to 5 words above it.  Per draw:
**     - the token lies in the shard and its key decodes to it;
**     - the reference's own token is allowed (else agreeing with it would
**       prove nothing about the mask);
**     - the GPU's token is allowed (rows of kind none excepted): the direct
**       check of the semantics, independent of the reference;
**     - none rows: the reference's token and key, logit -inf (bits);
**     - one rows: the lone id;
**     - otherwise test_pathwise.c's rules (token noise and greedy rows) or
**       test_group.c's (FS_NOISE_GROUP16) with the masked logits: the logit
**       within the fp32 bound of the exact one, the key's score within the
**       bound of the exact (group) score, and a token other than the
**       reference's is a near-tie (or, in a group, a pick near a boundary);
**     - greedy rows give the same draw for every sample.
**    At least 99.9% of the ~20,000 draws must be the reference's.  (The
**    first run on an H200 found the staged folds' masked path taking token
**    tok0's noise from the wrong Philox word when vocab_offset % 4 == 0:
**    3,099 mismatches beyond the bound, all in such cases; wt was clean.)
** 2. Distribution: 2^20 draws each (64 equal rows x 1024 samples x 16
**    calls) of a V = 203, D = 64 head whose mask allows about half the
**    ids and never the five most likely, at T = 1 (bf16, vocab_offset 37),
**    T = 0.5 (fp16, per-row seeds, a padded stride) and in FS_NOISE_GROUP16
**    (T = 1, vocab_offset 48), against the masked softmax (the CPU's
**    logits, masked ids at probability 0) by chi-square: p > 1e-3 and no
**    draw of a masked id.  The same counts must be rejected (p < 1e-6, and
**    each test's power from fs_stats_power above 0.999) against the
**    unmasked softmax, the masked softmax at 1.05 T, and, in group mode,
**    the law of a kernel that weighs each group by its unmasked mass but
**    picks among its allowed ids.  All seeds are fixed: the p-values are
**    fixed numbers.
** 3. Tensor parallelism on one GPU (tp_util.h's head, B = 6, V = 30011):
**    two ranks as threads with their own contexts call fs_sample_tp_ex with
**    the same mask on shards cut at 15013 (token noise: the cut inside a
**    mask word and a Philox quad) and 15024 (FS_NOISE_GROUP16): tokens, keys
**    and logits bitwise those of the unsharded fs_sample_ex.  The rows hold
**    a none row (every rank offers -inf) and one rows whose lone id lies in
**    one shard only.
** 4. Graph capture: fs_sample_ex captured in a CUDA graph; the mask's
**    device words replaced by their complement in the shard between
**    replays: the replay equals a direct call with the new mask bitwise, and
**    no row (but none rows) keeps the token of the old mask (the old and new
**    allowed sets are disjoint); restoring the old words restores the old
**    draw.
** Parts 3 and 4 run only without FS_TEST_FAMILY (tests/gpu_family.h); parts
** 1 and 2 run once per family selection too.  Under the fake driver
** (gu_fake_driver()) every call is made and no output is checked.
**
** Cost: the reference (~7 s), the test's own exact scores and the
** thresholds of the low rows (V x D per row), the NVRTC compiles of the
** buckets 1, 8, 64, 256 in two dtypes and of the two TP contexts, and ~1 s
** of GPU time: 20 s in all on the H200 (measured; 14-27 s per family
** selection with five running at once); 7-9 s under the fake driver.
*/
#include "fs_reference.h"
#include "fs_stats.h"
#include "gpu_family.h"
#include "gpu_graph.h"
#include "gpu_util.h"
#include "pathwise_util.h"
#include "tp_util.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOISE_TOL (1.0 / 65536.0) /* 2^-16: fs_gumbel_fast vs fs_gumbel (test_pathwise.c) */
#define LOG_TOL (1.0 / 262144.0)  /* 2^-18: a group's log-sum (test_group.c) */
#define U23 (1.0 / 8388608.0)     /* 2^-23 */
#define U20 (1.0 / 1048576.0)     /* 2^-20 */
#define U18 (1.0 / 262144.0)      /* 2^-18 */
#define MAX_PRINTED 12
#define V_BIG 151937
#define NEG_INF_BITS 0xff800000u

/* ---- exact logits ------------------------------------------------------------- */

/* gu_logit's result (the same products, summed in the same order), with the
** bf16/fp16 decode through a table: ~10x faster, for the thresholds of low
** rows (V x D per row) and the exact scores of every draw. */
static double mk_logit(const gu_lmhead *lm, int b, int v, double *abs_sum) {
  static double lut[2][65536];
  static int ready[2];
  const int di = lm->dtype == FS_DTYPE_FP16;
  if (!ready[di]) {
    for (int i = 0; i < 65536; i++) lut[di][i] = gu_decode(lm->dtype, (uint16_t)i);
    ready[di] = 1;
  }
  const double *t = lut[di];
  const uint16_t *h = lm->H + (int64_t)b * lm->hs;
  const uint16_t *w = lm->W + (int64_t)v * lm->ws;
  double z = 0.0, a = 0.0;
  for (int k = 0; k < lm->D; k++) {
    const double p = t[h[k]] * t[w[k]];
    z += p;
    a += fabs(p);
  }
  if (abs_sum) *abs_sum = a;
  return z;
}

/* ---- masks ------------------------------------------------------------------ */

enum { MK_HALF, MK_ONE, MK_NONE, MK_LOW, MK_SPARSE, MK_DENSE, MK_KINDS };
static const char *const kind_name[MK_KINDS] = {"half", "one", "none", "low", "sparse", "dense"};

/* A [B, stride] mask on the host and its device copy. */
typedef struct mk_mask {
  int B;
  int64_t need;       /* ceil((vocab_offset + V) / 32): the least stride */
  int64_t stride;     /* words between rows in memory */
  int64_t api_stride; /* options->token_mask_stride: 0 (means need) or stride */
  uint32_t *h;        /* host [B, stride] */
  CUdeviceptr d;      /* device copy (0 without a context) */
  int *kind;          /* each row's kind */
  int32_t *one;       /* one rows: the allowed global id, else -1 */
  int64_t *allowed;   /* allowed ids inside the shard, per row */
} mk_mask;

/* A mask for lm's B rows and shard.  pad < 0: the stride is the minimum,
** passed as such; 0: passed as 0 (means the minimum); > 0: pad words more. */
static void mask_init(fs_context *ctx, mk_mask *m, const gu_lmhead *lm, int pad) {
  memset(m, 0, sizeof *m);
  m->B = lm->B;
  m->need = (lm->vocab_offset + lm->V + 31) / 32;
  m->stride = m->need + (pad > 0 ? pad : 0);
  m->api_stride = pad == 0 ? 0 : m->stride;
  const size_t words = (size_t)m->B * (size_t)m->stride;
  m->h = gu_malloc(words * sizeof(uint32_t));
  m->kind = gu_malloc(sizeof(int) * (size_t)m->B);
  m->one = gu_malloc(sizeof(int32_t) * (size_t)m->B);
  m->allowed = gu_malloc(sizeof(int64_t) * (size_t)m->B);
  if (ctx) m->d = gu_alloc(ctx, words * sizeof(uint32_t));
}

static void mask_free(fs_context *ctx, mk_mask *m) {
  if (ctx) gu_free(ctx, m->d);
  free(m->h);
  free(m->kind);
  free(m->one);
  free(m->allowed);
  memset(m, 0, sizeof *m);
}

static void mask_upload(fs_context *ctx, const mk_mask *m) {
  gu_upload(ctx, m->d, m->h, (size_t)m->B * (size_t)m->stride * sizeof(uint32_t));
}

static uint32_t *mask_row_words(const mk_mask *m, int b) {
  return m->h + (int64_t)b * m->stride;
}

/* 1 when global id t is allowed in row b (the header's rule, on the host). */
static int mask_bit(const mk_mask *m, int b, int64_t t) {
  return (int)(mask_row_words(m, b)[t >> 5] >> (t & 31) & 1u);
}

static void set_bit(uint32_t *row, int64_t t, int on) {
  const uint32_t bit = 1u << (t & 31);
  if (on) row[t >> 5] |= bit;
  else row[t >> 5] &= ~bit;
}

/* Counts row b's allowed ids inside lm's shard into m->allowed[b]. */
static void mask_count(mk_mask *m, const gu_lmhead *lm, int b) {
  int64_t n = 0;
  for (int v = 0; v < lm->V; v++) n += mask_bit(m, b, lm->vocab_offset + v);
  m->allowed[b] = n;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Row b of m drawn as `kind` for lm: every word random first (garbage outside
** the shard and in the padding), then the shard's bits.  Under the fake
** driver, where no output is checked, a low row is drawn as half (its
** threshold costs V x D). */
static void mask_row(mk_mask *m, const gu_lmhead *lm, int b, int kind, unsigned long long *rs) {
  uint32_t *row = mask_row_words(m, b);
  for (int64_t w = 0; w < m->stride; w++) row[w] = (uint32_t)fs_test_rand(rs);
  const int64_t t0 = lm->vocab_offset;
  const int V = lm->V;
  if (kind == MK_LOW && gu_fake_driver()) kind = MK_HALF;
  double thr = 0.0, *z = NULL;
  if (kind == MK_LOW) { /* the lowest quarter of the row's exact logits */
    z = gu_malloc(sizeof(double) * (size_t)V);
    double *sorted = gu_malloc(sizeof(double) * (size_t)V);
    for (int v = 0; v < V; v++) z[v] = sorted[v] = mk_logit(lm, b, v, NULL);
    qsort(sorted, (size_t)V, sizeof(double), cmp_double);
    thr = sorted[V / 4];
    free(sorted);
  }
  const int32_t one =
      kind == MK_ONE ? (int32_t)(t0 + (int64_t)(fs_test_rand(rs) % (unsigned long long)V)) : -1;
  unsigned long long bits = 0;
  int left = 0;
  for (int v = 0; v < V; v++) {
    if (!left) {
      bits = fs_test_rand(rs);
      left = 16;
    }
    const unsigned r4 = (unsigned)(bits & 15u);
    bits >>= 4;
    left--;
    int on;
    switch (kind) {
    case MK_HALF: on = (int)(r4 & 1u); break;
    case MK_ONE: on = t0 + v == one; break;
    case MK_NONE: on = 0; break;
    case MK_LOW: on = z[v] < thr; break;
    case MK_SPARSE: on = r4 == 0; break;
    default: on = (r4 & 7u) != 0; break; /* MK_DENSE */
    }
    set_bit(row, t0 + v, on);
  }
  free(z);
  m->kind[b] = kind;
  m->one[b] = one;
  mask_count(m, lm, b);
  if (m->allowed[b] == 0 && kind != MK_NONE) { /* a tiny V: keep the kind's promise */
    set_bit(row, t0 + V - 1, 1);
    m->allowed[b] = 1;
  }
}

/* Makes row b a one row allowing global id `token` alone (its other words
** kept). */
static void mask_only(mk_mask *m, const gu_lmhead *lm, int b, int32_t token) {
  uint32_t *row = mask_row_words(m, b);
  for (int v = 0; v < lm->V; v++) set_bit(row, lm->vocab_offset + v, 0);
  set_bit(row, token, 1);
  m->kind[b] = MK_ONE;
  m->one[b] = token;
  m->allowed[b] = 1;
}

/* The options of a call with mask m: its device words (device = 1) or its
** host words (for fs_reference_sample_ex). */
static fs_options mask_options(const mk_mask *m, int device) {
  fs_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.token_mask = device ? (const uint32_t *)gu_ptr(m->d) : m->h;
  o.token_mask_stride = m->api_stride;
  return o;
}

/* Poisons o, runs fs_sample_ex, fetches and checks that everything was
** written (gu_sample_fetch with options).  Returns fs_sample_ex's status. */
static int sample_fetch(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                        const fs_options *opt, gu_outputs *o, void *stream, const char *what) {
  gu_outputs_poison(ctx, o);
  const fs_outputs out = gu_outputs_api(o);
  const int st = fs_sample_ex(ctx, p, s, opt, &out, stream);
  CHECK_MSG(st == FS_OK, "%s: fs_sample_ex returned %s (%d): %s", what, fs_status_string(st), st,
            fs_last_error(ctx));
  if (st != FS_OK) return st;
  gu_outputs_fetch(ctx, o);
  gu_outputs_check(o, what);
  return st;
}

/* ---- 1. pathwise -------------------------------------------------------------- */

typedef struct mk_case {
  pw_case pw; /* shape, temperatures, seeds, samples, calls, padded H/W strides */
  int noise;  /* FS_NOISE_TOKEN or FS_NOISE_GROUP16 */
  int pad;    /* mask_init's pad: -1 the minimum stride, 0 stride 0, > 0 words more */
} mk_case;

/* Per-row temperatures of TEMPS_MIX (test_pathwise.c's): greedy as 0, -1, NaN. */
static float mix_temperature(int b) {
  static const float t[7] = {0.5f, 0.0f, 1.0f, -1.0f, 2.0f, NAN, 0.7f};
  return t[b % 7];
}

static const mk_case cases[] = {
    /* B = 1: six calls, one per kind */
    {{"b1_d1024_vbig_bf16_t1", 1, 1024, V_BIG, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 1.0f, 0, 16, 6, 0},
     FS_NOISE_TOKEN, 0},
    {{"b1_d1024_v5000_fp16_t05_off37_pad3", 1, 1024, 5000, FS_DTYPE_FP16, 37, TEMPS_SCALAR, 0.5f,
      1, 64, 6, 0}, FS_NOISE_TOKEN, 3},
    {{"b8_d1024_v32000_bf16_mix_off37_s2", 8, 1024, 32000, FS_DTYPE_BF16, 37, TEMPS_MIX, 0.0f, 0,
      2, 3, 0}, FS_NOISE_TOKEN, -1},
    {{"b8_d520_v4099_fp16_t1_strided", 8, 520, 4099, FS_DTYPE_FP16, 0, TEMPS_SCALAR, 1.0f, 1, 32,
      2, 1}, FS_NOISE_TOKEN, 1},
    {{"b64_d768_v4000_bf16_mix_off37_s2_pad5", 64, 768, 4000, FS_DTYPE_BF16, 37, TEMPS_MIX, 0.0f,
      1, 2, 2, 0}, FS_NOISE_TOKEN, 5},
    {{"b64_d2048_v8000_fp16_t2_s32", 64, 2048, 8000, FS_DTYPE_FP16, 0, TEMPS_SCALAR, 2.0f, 0, 32,
      2, 0}, FS_NOISE_TOKEN, 0},
    {{"b256_d1024_v3000_bf16_mix_off37_s2", 256, 1024, 3000, FS_DTYPE_BF16, 37, TEMPS_MIX, 0.0f,
      0, 2, 2, 0}, FS_NOISE_TOKEN, 0},
    {{"b256_d512_v2003_fp16_t07_s16_pad2", 256, 512, 2003, FS_DTYPE_FP16, 0, TEMPS_SCALAR, 0.7f,
      1, 16, 2, 0}, FS_NOISE_TOKEN, 2},
    /* a greedy call (scalar T = 0): the greedy call mode's kernel */
    {{"b256_d1024_v4000_bf16_greedy_off37", 256, 1024, 4000, FS_DTYPE_BF16, 37, TEMPS_SCALAR,
      0.0f, 0, 1, 2, 0}, FS_NOISE_TOKEN, -1},
    /* one sample per row, as in serving, over a large vocabulary: the wg
    ** family's pruning by other chunks' bounds (the "low" rows' allowed
    ** tokens far below their best), the overlap mode's interleave and wt's
    ** bests carried across tiles run only with num_samples 1 (catches e.g. a
    ** bound or zmax taken from the unmasked logits) */
    {{"b1_d1024_vbig_bf16_t1_s1", 1, 1024, V_BIG, FS_DTYPE_BF16, 0, TEMPS_SCALAR, 1.0f, 0, 1, 6,
      0}, FS_NOISE_TOKEN, 0},
    {{"b64_d512_vbig_fp16_mix_off37_s1", 64, 512, V_BIG, FS_DTYPE_FP16, 37, TEMPS_MIX, 0.0f, 0, 1,
      2, 0}, FS_NOISE_TOKEN, 0},
    {{"b256_d512_vbig_bf16_mix_s1", 256, 512, V_BIG, FS_DTYPE_BF16, 0, TEMPS_MIX, 0.0f, 1, 1, 1,
      0}, FS_NOISE_TOKEN, -1},
    {{"g16_b64_d512_vbig_bf16_mix_s1", 64, 512, V_BIG, FS_DTYPE_BF16, 0, TEMPS_MIX, 0.0f, 0, 1, 2,
      0}, FS_NOISE_GROUP16, 0},
    {{"g16_b256_d512_vbig_fp16_t1_off16_s1", 256, 512, V_BIG, FS_DTYPE_FP16, 16, TEMPS_SCALAR,
      1.0f, 0, 1, 1, 0}, FS_NOISE_GROUP16, 1},
    /* FS_NOISE_GROUP16 (vocab_offset % 16 == 0): masks cut the groups */
    {{"g16_b1_d1024_v40000_fp16_t2_off4144", 1, 1024, 40000, FS_DTYPE_FP16, 4144, TEMPS_SCALAR,
      2.0f, 0, 32, 6, 0}, FS_NOISE_GROUP16, 1},
    {{"g16_b8_d512_v5000_bf16_t1_off48", 8, 512, 5000, FS_DTYPE_BF16, 48, TEMPS_SCALAR, 1.0f, 0,
      16, 3, 0}, FS_NOISE_GROUP16, 0},
    {{"g16_b64_d1024_v3000_fp16_mix_s2_pad4", 64, 1024, 3000, FS_DTYPE_FP16, 0, TEMPS_MIX, 0.0f,
      1, 2, 2, 0}, FS_NOISE_GROUP16, 4},
    {{"g16_b256_d768_v2003_bf16_t05_off16_s8", 256, 768, 2003, FS_DTYPE_BF16, 16, TEMPS_SCALAR,
      0.5f, 0, 8, 2, 0}, FS_NOISE_GROUP16, -1},
};

typedef struct mk_tally {
  long draws, mismatches; /* compared draws; draws unlike the reference's */
  long ties, boundary;    /* mismatches explained: near-ties, picks near a boundary */
  long far, masked;       /* not explained: beyond the bound; masked tokens drawn */
} mk_tally;

static mk_tally g_tally;
static long g_printed;
static double g_ref_seconds;

/* The exact score of local token v (allowed) in row b, sample s under token
** noise, or its logit in a greedy row, with its tolerance (test_pathwise.c's
** bound); *z_out, *dz_out: the logit and its fp32 accumulation bound. */
static double token_score(const gu_lmhead *lm, const pw_row_params *rp, int b, int v, int s,
                          double *tol, double *z_out, double *dz_out) {
  double a;
  const double z = mk_logit(lm, b, v, &a);
  const double dz = pw_dz(lm->D, a);
  double score = z, e = dz;
  if (!rp->greedy) {
    const double g = (double)fs_noise(rp->seed, rp->offset, (uint32_t)(lm->vocab_offset + v),
                                      (uint32_t)s, rp->tag);
    score = z / rp->T + g;
    e = dz / rp->T * (1.0 + U23) + U23 * (fabs(z) / rp->T + fabs(score)) + NOISE_TOL;
  }
  *tol = e;
  if (z_out) *z_out = z;
  if (dz_out) *dz_out = dz;
  return score;
}

/* One group of one (row, sample) under FS_NOISE_GROUP16 with row b's mask,
** exactly (test_group.c's group_eval; a masked id has logit -inf and weight
** 0; a group with no allowed id scores -inf). */
typedef struct grp {
  int lo, hi;           /* its local tokens [lo, hi) */
  double z[16], dz[16]; /* logits (-inf where masked) and their bounds */
  double score, tol;    /* m / T + ln S + g and its tolerance */
  int pick;             /* local index of the exact pick */
  double margin;        /* min over i < n - 1 of |P_i - u S| / S */
  double pick_tol;
} grp;

static void group_eval(const gu_lmhead *lm, const mk_mask *m, const pw_row_params *rp, int b,
                       int s, int64_t k, grp *g) {
  const int64_t voff = lm->vocab_offset;
  g->lo = (int)(16 * k > voff ? 16 * k - voff : 0);
  g->hi = (int)(16 * k + 16 < voff + lm->V ? 16 * k + 16 - voff : lm->V);
  const int n = g->hi - g->lo;
  double mx = -INFINITY, dzmax = 0.0;
  for (int i = 0; i < n; i++) {
    g->z[i] = -INFINITY;
    g->dz[i] = 0.0;
    if (!mask_bit(m, b, voff + g->lo + i)) continue;
    double a;
    g->z[i] = mk_logit(lm, b, g->lo + i, &a);
    g->dz[i] = pw_dz(lm->D, a);
    if (g->z[i] > mx) mx = g->z[i];
    if (g->dz[i] > dzmax) dzmax = g->dz[i];
  }
  g->pick = g->lo;
  g->margin = INFINITY;
  g->pick_tol = 0.0;
  if (mx == -INFINITY) {
    g->score = -INFINITY;
    g->tol = 0.0;
    return;
  }
  const fs_philox_out r = fs_noise_group(rp->seed, rp->offset, (uint32_t)k, (uint32_t)s, rp->tag);
  const double gum = (double)fs_gumbel(r.v[0]), u = (double)fs_group_uniform(r.v[1]);
  double P[16], S = 0.0;
  for (int i = 0; i < n; i++) {
    S += g->z[i] == -INFINITY ? 0.0 : exp((g->z[i] - mx) / rp->T);
    P[i] = S;
  }
  int pick = -1;
  for (int i = 0; i < n; i++) {
    if (pick < 0 && P[i] > u * S) pick = i;
    if (i < n - 1 && fabs(P[i] - u * S) / S < g->margin) g->margin = fabs(P[i] - u * S) / S;
  }
  g->pick = g->lo + (pick < 0 ? n - 1 : pick);
  g->score = mx / rp->T + log(S) + gum;
  g->tol = dzmax / rp->T * (1.0 + U23) + U23 * (fabs(mx) / rp->T + fabs(g->score)) + NOISE_TOL +
           LOG_TOL;
  g->pick_tol = 2.0 * (dzmax / rp->T) * (1.0 + U20) + U18;
}

/* A draw of token noise or of a greedy row (gv, rv local; both allowed):
** the logit and key within the bound, and a mismatch is a near-tie.
** Catches: a wrong logit or key for a masked call, and a masked kernel that
** loses a token it should have drawn (a gap beyond the fp32 bound). */
static void check_token_draw(const char *what, const gu_lmhead *lm, const pw_row_params *rp,
                             int b, int s, int gv, int rv, float glogit, uint64_t gkey,
                             mk_tally *t) {
  double eg, zg, dzg;
  const double sg = token_score(lm, rp, b, gv, s, &eg, &zg, &dzg);
  CHECK_MSG(fabs((double)glogit - zg) <= dzg, "%s row %d sample %d token %lld: logit %.9g, "
            "exact %.9g (bound %.3g)", what, b, s, (long long)(lm->vocab_offset + gv),
            (double)glogit, zg, dzg);
  const double ks = (double)fs_key_score(gkey);
  CHECK_MSG(fabs(ks - sg) <= eg, "%s row %d sample %d token %lld: key score %.9g, exact score "
            "%.9g (bound %.3g)", what, b, s, (long long)(lm->vocab_offset + gv), ks, sg, eg);
  if (gv == rv) return;
  t->mismatches++;
  double er;
  const double sr = token_score(lm, rp, b, rv, s, &er, NULL, NULL);
  const double gap = sr - sg;
  CHECK_MSG(gap >= 0.0, "%s row %d sample %d: the reference's token %lld scores %.17g below the "
            "GPU's %lld (%.17g): reference not an argmax?", what, b, s,
            (long long)(lm->vocab_offset + rv), sr, (long long)(lm->vocab_offset + gv), sg);
  CHECK_MSG(gap <= er + eg, "%s row %d sample %d%s: GPU token %lld (score %.9g), reference %lld "
            "(score %.9g): gap %.3g exceeds the fp32 bound %.3g: NOT a near-tie", what, b, s,
            rp->greedy ? " (greedy)" : "", (long long)(lm->vocab_offset + gv), sg,
            (long long)(lm->vocab_offset + rv), sr, gap, er + eg);
  if (gap > er + eg) {
    t->far++;
    return;
  }
  t->ties++;
  if (g_printed++ < MAX_PRINTED)
    printf("  mismatch %s row %d sample %d%s: GPU %lld, reference %lld: near-tie (gap %.3g, "
           "bound %.3g)\n", what, b, s, rp->greedy ? " (greedy)" : "",
           (long long)(lm->vocab_offset + gv), (long long)(lm->vocab_offset + rv), gap, er + eg);
}

/* A sampled draw of FS_NOISE_GROUP16 (gv, rv local; both allowed): the
** logit, the key's group score and the pick within their bounds, and a
** mismatch is a near-tie of group scores or a pick near a boundary.
** Catches: a group score that counts masked ids' mass, a pick that lands on
** or is displaced by a masked id. */
static void check_group_draw(const char *what, const gu_lmhead *lm, const mk_mask *m,
                             const fs_problem *hp, const fs_sampling *hs, const fs_options *hopt,
                             const pw_row_params *rp, int b, int s, int gv, int rv, float glogit,
                             uint64_t gkey, mk_tally *t) {
  const int64_t voff = lm->vocab_offset;
  grp G, R;
  group_eval(lm, m, rp, b, s, (voff + gv) / 16, &G);
  const double zg = G.z[gv - G.lo], dzg = G.dz[gv - G.lo];
  CHECK_MSG(fabs((double)glogit - zg) <= dzg, "%s row %d sample %d token %lld: logit %.9g, exact "
            "%.9g (bound %.3g)", what, b, s, (long long)(voff + gv), (double)glogit, zg, dzg);
  const double ks = (double)fs_key_score(gkey);
  CHECK_MSG(fabs(ks - G.score) <= G.tol, "%s row %d sample %d token %lld: key score %.9g, exact "
            "masked group score %.9g (bound %.3g)", what, b, s, (long long)(voff + gv), ks,
            G.score, G.tol);
  CHECK_MSG(gv == G.pick || G.margin < G.pick_tol, "%s row %d sample %d: GPU token %lld is not "
            "its group's masked inverse-CDF pick %lld (margin %.3g, bound %.3g)", what, b, s,
            (long long)(voff + gv), (long long)(voff + G.pick), G.margin, G.pick_tol);
  if (gv == rv) return;
  t->mismatches++;
  const char *why;
  if ((voff + rv) / 16 != (voff + gv) / 16) {
    group_eval(lm, m, rp, b, s, (voff + rv) / 16, &R);
    const double gap = R.score - G.score;
    CHECK_MSG(gap <= R.tol + G.tol, "%s row %d sample %d: GPU token %lld (group score %.9g), "
              "reference %lld (%.9g): gap %.3g exceeds %.3g: NOT a near-tie", what, b, s,
              (long long)(voff + gv), G.score, (long long)(voff + rv), R.score, gap,
              R.tol + G.tol);
    CHECK_MSG(gap >= -1e-9 * (1.0 + fabs(R.score)), "%s row %d sample %d: the reference's group "
              "scores %.17g below the GPU's (%.17g): reference not an argmax?", what, b, s,
              R.score, G.score);
    if (gap > R.tol + G.tol) {
      t->far++;
      return;
    }
    t->ties++;
    why = "near-tie of group scores";
  } else {
    fs_ref_result rr;
    const int st = fs_reference_row_ex(hp, hs, FS_NOISE_GROUP16, hopt, b, s, &rr);
    CHECK_MSG(st == FS_OK, "fs_reference_row_ex: %s", fs_last_error(NULL));
    CHECK_MSG(st != FS_OK || (rr.token == voff + rv && rr.pick_margin < G.pick_tol),
              "%s row %d sample %d: GPU token %lld, reference %lld in the same group: pick "
              "margin %.3g is not below %.3g: NOT a boundary pick", what, b, s,
              (long long)(voff + gv), (long long)(voff + rv), st == FS_OK ? rr.pick_margin : NAN,
              G.pick_tol);
    if (st != FS_OK || !(rr.token == voff + rv && rr.pick_margin < G.pick_tol)) {
      t->far++;
      return;
    }
    t->boundary++;
    why = "pick near a boundary";
  }
  if (g_printed++ < MAX_PRINTED)
    printf("  mismatch %s row %d sample %d: GPU %lld, reference %lld: %s\n", what, b, s,
           (long long)(voff + gv), (long long)(voff + rv), why);
}

/* Compares one call's GPU outputs o with the reference's (ref, ref_logit,
** ref_key) under mask m; what names the call. */
static void compare(const mk_case *mc, const gu_lmhead *lm, const mk_mask *m,
                    const fs_sampling *hs, const fs_options *hopt, const gu_outputs *o,
                    const int32_t *ref, const float *ref_logit, const uint64_t *ref_key,
                    const char *what, mk_tally *t) {
  const int B = mc->pw.B, S = mc->pw.S;
  const int64_t voff = lm->vocab_offset, vend = voff + lm->V;
  const fs_problem hp = gu_problem(lm, 0);
  for (int b = 0; b < B; b++) {
    const pw_row_params rp = pw_row_of(hs, b);
    const int kind = m->kind[b];
    for (int s = 0; s < S; s++) {
      const size_t i = (size_t)b * S + (size_t)s;
      const int32_t gt = o->h_tokens[i], rt = ref[i];
      const float glogit = o->h_logits[i];
      const uint64_t gkey = o->h_keys[i];
      if (rp.greedy && s > 0) { /* every sample of a greedy row is one draw */
        const size_t i0 = (size_t)b * S;
        CHECK_MSG(gt == o->h_tokens[i0] && gkey == o->h_keys[i0] &&
                      gu_float_bits(glogit) == gu_float_bits(o->h_logits[i0]),
                  "%s row %d (greedy, %s): sample %d token %d key %016llx, sample 0 token %d "
                  "key %016llx", what, b, kind_name[kind], s, (int)gt, (unsigned long long)gkey,
                  (int)o->h_tokens[i0], (unsigned long long)o->h_keys[i0]);
        continue;
      }
      t->draws++;
      /* catches: a token outside the shard, e.g. a kernel offering the id
      ** past its last row for a row with nothing allowed */
      if (gt < voff || gt >= vend) {
        CHECK_MSG(0, "%s row %d sample %d (%s): token %d outside [%lld, %lld)", what, b, s,
                  kind_name[kind], (int)gt, (long long)voff, (long long)vend);
        t->mismatches++;
        continue;
      }
      CHECK_MSG(fs_key_token(gkey) == (uint32_t)gt, "%s row %d sample %d: key %016llx decodes to "
                "token %u, tokens[] has %d", what, b, s, (unsigned long long)gkey,
                (unsigned)fs_key_token(gkey), (int)gt);
      /* catches: a reference that ignores the mask (agreeing with it would
      ** then prove nothing) */
      const int ref_in = rt >= voff && rt < vend;
      CHECK_MSG(ref_in && (kind == MK_NONE || mask_bit(m, b, rt)), "%s row %d sample %d (%s): "
                "the REFERENCE drew token %d, %s", what, b, s, kind_name[kind], (int)rt,
                ref_in ? "which the mask does not allow" : "outside the shard");
      if (!ref_in) {
        t->mismatches++;
        continue;
      }
      /* catches: a kernel that ignores the mask, reads the wrong word, bit,
      ** row stride or row, or applies the mask after the choice */
      if (kind != MK_NONE && !mask_bit(m, b, gt)) {
        t->masked++;
        t->mismatches++;
        CHECK_MSG(0, "%s row %d sample %d (%s, %lld allowed%s): the GPU drew token %d, which the "
                  "mask does NOT allow (reference %d)", what, b, s, kind_name[kind],
                  (long long)m->allowed[b], rp.greedy ? ", greedy" : "", (int)gt, (int)rt);
        continue;
      }
      if (kind == MK_NONE) {
        /* catches: a row without an allowed token that does not draw as a
        ** row of -inf logits (another token, a finite logit or score) */
        const int ok = gt == rt && gkey == ref_key[i] && gu_float_bits(glogit) == NEG_INF_BITS &&
                       gu_float_bits(ref_logit[i]) == NEG_INF_BITS;
        CHECK_MSG(ok, "%s row %d sample %d (none allowed%s): GPU token %d logit %g key %016llx; "
                  "reference token %d logit %g key %016llx (want equal, logit -inf)", what, b, s,
                  rp.greedy ? ", greedy" : "", (int)gt, (double)glogit, (unsigned long long)gkey,
                  (int)rt, (double)ref_logit[i], (unsigned long long)ref_key[i]);
        if (!ok) t->mismatches++;
        continue;
      }
      if (kind == MK_ONE)
        /* catches: a lone allowed token lost to masked ones */
        CHECK_MSG(gt == m->one[b] && rt == m->one[b], "%s row %d sample %d: the only allowed "
                  "token is %d; GPU %d, reference %d", what, b, s, (int)m->one[b], (int)gt,
                  (int)rt);
      const int gv = (int)(gt - voff), rv = (int)(rt - voff);
      if (mc->noise == FS_NOISE_GROUP16 && !rp.greedy)
        check_group_draw(what, lm, m, &hp, hs, hopt, &rp, b, s, gv, rv, glogit, gkey, t);
      else
        check_token_draw(what, lm, &rp, b, s, gv, rv, glogit, gkey, t);
    }
  }
}

static void run_case(fs_context *ctx, const mk_case *mc, int index) {
  const pw_case *c = &mc->pw;
  const int B = c->B, S = c->S, fake = gu_fake_driver();
  const size_t n = (size_t)B * S;
  const double t0 = gu_now();
  REQUIRE(fs_context_set_noise(ctx, mc->noise) == FS_OK);
  gu_lmhead lm;
  pw_head_init(ctx, &lm, c, 0x3A5C0000ull + (unsigned long long)index);
  const fs_problem dp = gu_problem(&lm, 1), hp = gu_problem(&lm, 0);
  pw_rows rows;
  pw_rows_init(ctx, &rows, B, mix_temperature);
  mk_mask m;
  mask_init(ctx, &m, &lm, mc->pad);
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, n, 1, 1);
  int32_t *ref = gu_malloc(sizeof(int32_t) * n);
  float *ref_logit = gu_malloc(sizeof(float) * n);
  uint64_t *ref_key = gu_malloc(sizeof(uint64_t) * n);
  unsigned long long rs = 0xC0FFEEull * (unsigned long long)(index + 1);
  unsigned long long ms = 0x3A5CB175ull * (unsigned long long)(index + 1);
  mk_tally t = {0, 0, 0, 0, 0, 0};
  double t_ref = 0.0;
  for (int call = 0; call < c->calls; call++) {
    for (int b = 0; b < B; b++) mask_row(&m, &lm, b, (b + call) % MK_KINDS, &ms);
    mask_upload(ctx, &m);
    fs_sampling hs, ds;
    pw_call_sampling(ctx, c, index, call, &rows, &rs, &hs, &ds);
    const fs_options dopt = mask_options(&m, 1), hopt = mask_options(&m, 0);
    char what[160];
    snprintf(what, sizeof what, "%s call %d", c->name, call);
    if (sample_fetch(ctx, &dp, &ds, &dopt, &o, NULL, what) != FS_OK) break;
    if (fake) continue; /* no kernel ran */
    const double r0 = gu_now();
    const int st = fs_reference_sample_ex(&hp, &hs, mc->noise, &hopt, ref, ref_logit, ref_key);
    t_ref += gu_now() - r0;
    CHECK_MSG(st == FS_OK, "%s: fs_reference_sample_ex: %s: %s", what, fs_status_string(st),
              fs_last_error(NULL));
    if (st != FS_OK) break;
    compare(mc, &lm, &m, &hs, &hopt, &o, ref, ref_logit, ref_key, what, &t);
  }
  printf("%-40s B=%-3d D=%-4d V=%-6d %s %s S=%-2d calls=%d off=%-4lld stride %lld%s: %5ld draws, "
         "%ld mismatches (%ld near-ties, %ld boundary picks; %ld beyond the bound, %ld masked); "
         "ref %.1f s, all %.1f s\n", c->name, B, c->D, c->V, gu_dtype_name(c->dtype),
         mc->noise == FS_NOISE_GROUP16 ? "group16" : "token", S, c->calls,
         (long long)c->vocab_offset, (long long)m.api_stride,
         m.api_stride ? "" : " (0: the minimum)", t.draws, t.mismatches, t.ties, t.boundary,
         t.far, t.masked, t_ref, gu_now() - t0);
  fflush(stdout);
  g_tally.draws += t.draws;
  g_tally.mismatches += t.mismatches;
  g_tally.ties += t.ties;
  g_tally.boundary += t.boundary;
  g_tally.far += t.far;
  g_tally.masked += t.masked;
  g_ref_seconds += t_ref;
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  free(ref);
  free(ref_logit);
  free(ref_key);
  gu_outputs_free(ctx, &o);
  mask_free(ctx, &m);
  pw_rows_free(ctx, &rows);
  gu_lmhead_free(ctx, &lm);
}

static void test_pathwise(fs_context *base) {
  const double t0 = gu_now();
  const int ncases = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < ncases; i++) {
    fs_context *c = gu_family_context(base, cases[i].pw.dtype, cases[i].pw.B);
    run_case(c, &cases[i], i);
    gu_family_release(base, c);
  }
  if (gu_fake_driver()) return;
  const mk_tally *t = &g_tally;
  const double agree = t->draws ? 1.0 - (double)t->mismatches / (double)t->draws : 0.0;
  printf("pathwise (mask): %ld draws, %ld mismatches (%ld near-ties, %ld boundary picks; %ld "
         "beyond the bound, %ld masked tokens drawn), agreement %.5f%% (need >= 99.9%%); "
         "reference %.1f s, total %.1f s\n", t->draws, t->mismatches, t->ties, t->boundary,
         t->far, t->masked, 100.0 * agree, g_ref_seconds, gu_now() - t0);
  /* catches: a table that silently compared little (a failing case stops early) */
  CHECK_MSG(t->draws >= 10000, "only %ld draws were compared", t->draws);
  /* catches: a kernel slightly wrong everywhere (each mismatch near a tie) */
  CHECK_MSG(agree >= 0.999, "agreement %.5f%% is below 99.9%%", 100.0 * agree);
}

/* ---- 2. distribution -------------------------------------------------------------- */

#define DV 203
#define DD 64
#define DB 64
#define DS 1024
#define DCALLS 16
#define DTOP 5 /* the most likely ids, always masked */

typedef struct dist_case {
  const char *name;
  int dtype;
  float T;
  int per_row_seeds;
  int64_t vocab_offset;
  int noise;
  int pad; /* mask_init's */
} dist_case;

static const dist_case dcases[] = {
    {"token bf16 T=1 off=37", FS_DTYPE_BF16, 1.0f, 0, 37, FS_NOISE_TOKEN, 0},
    {"token fp16 T=0.5 per-row seeds pad=3", FS_DTYPE_FP16, 0.5f, 1, 0, FS_NOISE_TOKEN, 3},
    {"group16 bf16 T=1 off=48", FS_DTYPE_BF16, 1.0f, 0, 48, FS_NOISE_GROUP16, 0},
};

/* q = the law of a broken FS_NOISE_GROUP16 kernel that scores each group
** with an allowed id by its unmasked mass (ln of the sum over all its ids)
** but picks among its allowed ids by their weights. */
static void unmasked_group_mass_law(const double *z, const int *allowed, int n, int64_t voff,
                                    double T, double *q) {
  double zmax = -INFINITY, total = 0.0;
  for (int i = 0; i < n; i++) zmax = z[i] > zmax ? z[i] : zmax;
  for (int lo = 0; lo < n;) {
    const int64_t end = ((voff + lo) / 16 + 1) * 16 - voff; /* the group's end, local */
    const int hi = end < n ? (int)end : n;
    double full = 0.0, allow = 0.0;
    for (int i = lo; i < hi; i++) {
      const double w = exp((z[i] - zmax) / T);
      full += w;
      allow += allowed[i] ? w : 0.0;
    }
    for (int i = lo; i < hi; i++)
      q[i] = allowed[i] && allow > 0.0 ? full * exp((z[i] - zmax) / T) / allow : 0.0;
    lo = hi;
  }
  for (int i = 0; i < n; i++) total += q[i];
  for (int i = 0; i < n; i++) q[i] /= total;
}

static void dist_case_run(fs_context *ctx, const dist_case *c, int index) {
  REQUIRE(fs_context_set_noise(ctx, c->noise) == FS_OK);
  gu_lmhead lm;
  gu_lmhead_init(&lm, DB, DD, DV, c->dtype, c->vocab_offset, 0, 0, gu_w_scale(DD, 1.0),
                 0x4D41534Bull + (unsigned long long)index);
  for (int b = 1; b < DB; b++) memcpy(lm.H + (size_t)b * DD, lm.H, sizeof(uint16_t) * DD);
  gu_lmhead_upload(ctx, &lm);
  const fs_problem dp = gu_problem(&lm, 1);

  /* row 0: half the ids, never the DTOP most likely; every row the same */
  double z[DV], zm[DV], p[DV], q_unmasked[DV], q_t[DV], q_grp[DV];
  int allowed[DV];
  for (int v = 0; v < DV; v++) z[v] = mk_logit(&lm, 0, v, NULL);
  mk_mask m;
  mask_init(ctx, &m, &lm, c->pad);
  unsigned long long ms = 0x4D53ull + (unsigned long long)index;
  mask_row(&m, &lm, 0, MK_HALF, &ms);
  for (int k = 0; k < DTOP; k++) {
    int best = -1;
    for (int v = 0; v < DV; v++)
      if (mask_bit(&m, 0, c->vocab_offset + v) && (best < 0 || z[v] > z[best])) best = v;
    if (best >= 0) set_bit(mask_row_words(&m, 0), c->vocab_offset + best, 0);
  }
  for (int b = 1; b < DB; b++)
    memcpy(mask_row_words(&m, b), mask_row_words(&m, 0), sizeof(uint32_t) * (size_t)m.stride);
  mask_upload(ctx, &m);
  int nallowed = 0;
  for (int v = 0; v < DV; v++) {
    allowed[v] = mask_bit(&m, 0, c->vocab_offset + v);
    nallowed += allowed[v];
    zm[v] = allowed[v] ? z[v] : -INFINITY;
  }
  fs_stats_softmax(zm, DV, (double)c->T, p);
  fs_stats_softmax(z, DV, (double)c->T, q_unmasked);
  fs_stats_softmax(zm, DV, (double)c->T * 1.05, q_t);
  unmasked_group_mass_law(z, allowed, DV, c->vocab_offset, (double)c->T, q_grp);
  double masked_mass = 0.0;
  for (int v = 0; v < DV; v++) masked_mass += allowed[v] ? 0.0 : q_unmasked[v];

  uint64_t seeds[DB];
  unsigned long long rs = 0x4D5EEDull + (unsigned long long)index;
  for (int b = 0; b < DB; b++) seeds[b] = fs_test_rand(&rs);
  CUdeviceptr d_seeds = gu_upload_new(ctx, seeds, sizeof seeds);
  const fs_options opt = mask_options(&m, 1);
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, (size_t)DB * DS, 0, 0);
  int64_t counts[DV] = {0};
  long out_of_range = 0;
  for (int call = 0; call < DCALLS; call++) {
    fs_sampling s;
    memset(&s, 0, sizeof s);
    s.temperature = c->T;
    s.num_samples = DS;
    s.seed = 0x4D5EEDF00Dull + (unsigned long long)index;
    s.offset = 1000003ull * (unsigned long long)call;
    if (c->per_row_seeds) s.seeds = (const uint64_t *)gu_ptr(d_seeds);
    char what[160];
    snprintf(what, sizeof what, "distribution %s call %d", c->name, call);
    if (sample_fetch(ctx, &dp, &s, &opt, &o, NULL, what) != FS_OK) break;
    if (gu_fake_driver()) continue;
    for (size_t i = 0; i < o.n; i++) {
      const int64_t v = (int64_t)o.h_tokens[i] - c->vocab_offset;
      if (v < 0 || v >= DV) out_of_range++;
      else counts[v]++;
    }
  }
  CHECK_MSG(out_of_range == 0, "%s: %ld tokens outside the shard", c->name, out_of_range);
  int64_t N = 0;
  for (int v = 0; v < DV; v++) N += counts[v];
  if (N > 0) {
    const fs_chi2 ok = fs_stats_chi2_gof(counts, p, DV);
    printf("mask %-38s N=%lld, %d of %d ids allowed (the unmasked law puts %.3f on the others): "
           "chi2 %.1f dof %d p=%.4g (worst bin z %.2f), %lld masked draws\n", c->name,
           (long long)N, nallowed, DV, masked_mass, ok.stat, ok.dof, ok.p, ok.worst_z,
           (long long)ok.impossible);
    CHECK_MSG(N >= 1000000, "%s: only %lld samples", c->name, (long long)N);
    /* catches: any draw of a masked id (a bin of probability 0) */
    CHECK_MSG(ok.impossible == 0, "%s: %lld draws of masked ids", c->name,
              (long long)ok.impossible);
    /* catches: a law other than the masked softmax (e.g. mass lost or moved) */
    CHECK_MSG(ok.p > 1e-3, "%s: chi-square rejects the masked softmax(z/T): p=%.4g", c->name,
              ok.p);
    fs_stats_must_reject(c->name, counts, p, q_unmasked, DV, N, "the unmasked softmax");
    fs_stats_must_reject(c->name, counts, p, q_t, DV, N, "the masked softmax at 1.05 T");
    if (c->noise == FS_NOISE_GROUP16)
      fs_stats_must_reject(c->name, counts, p, q_grp, DV, N, "groups by their unmasked mass");
  }
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  gu_outputs_free(ctx, &o);
  gu_free(ctx, d_seeds);
  mask_free(ctx, &m);
  gu_lmhead_free(ctx, &lm);
}

static void test_distribution(fs_context *base) {
  const int n = (int)(sizeof dcases / sizeof dcases[0]);
  for (int i = 0; i < n; i++) {
    fs_context *c = gu_family_context(base, dcases[i].dtype, DB);
    dist_case_run(c, &dcases[i], i);
    gu_family_release(base, c);
  }
}

/* ---- 3. tensor parallelism on one GPU ------------------------------------------------ */

/* A rank (tp_util.h's, whose user pointer tp_host_allreduce reads) with the
** call's options and noise. */
typedef struct mk_rank {
  tp_rank r;
  const fs_options *opt;
  int noise;
} mk_rank;

static void *rank_main(void *arg) {
  mk_rank *mr = arg;
  tp_rank *r = &mr->r;
  r->status = fs_context_set_noise(r->ctx, mr->noise);
  if (!r->status)
    r->status = fs_sample_tp_ex(r->ctx, &r->p, &r->s, mr->opt, &r->o, tp_host_allreduce, r,
                                (void *)r->stream);
  if (r->status) snprintf(r->err, sizeof r->err, "%s", fs_last_error(r->ctx));
  gu_sync(r->ctx);
  return NULL;
}

/* The unsharded masked draw u_out (fetched) against the reference: allowed
** tokens, the none row's -inf, the one rows' lone ids, and at most one
** other difference (a near-tie). */
static void check_unsharded(const tp_unsharded *u, const gu_lmhead *lm, const mk_mask *m,
                            int noise, const gu_outputs *uo, const char *name) {
  float h_temps[TP_B];
  memcpy(h_temps, tp_temps, sizeof h_temps);
  fs_problem hp = gu_problem(lm, 0);
  fs_sampling hs = u->s;
  hs.temperatures = h_temps;
  const fs_options hopt = mask_options(m, 0);
  int32_t ref[TP_NITEMS];
  float ref_logit[TP_NITEMS];
  REQUIRE(fs_reference_sample_ex(&hp, &hs, noise, &hopt, ref, ref_logit, NULL) == FS_OK);
  int diff = 0;
  for (int i = 0; i < TP_NITEMS; i++) {
    const int b = i / TP_S, t = uo->h_tokens[i];
    if (m->kind[b] == MK_NONE) {
      CHECK_MSG(t == ref[i] && gu_float_bits(uo->h_logits[i]) == NEG_INF_BITS,
                "%s item %d (none allowed): token %d logit %g, reference %d", name, i, t,
                (double)uo->h_logits[i], (int)ref[i]);
      continue;
    }
    CHECK_MSG(t >= 0 && t < TP_V && mask_bit(m, b, t), "%s item %d (%s): token %d is not allowed",
              name, i, kind_name[m->kind[b]], t);
    if (m->kind[b] == MK_ONE)
      CHECK_MSG(t == m->one[b], "%s item %d: token %d, the only allowed one is %d", name, i, t,
                (int)m->one[b]);
    diff += t != ref[i];
  }
  CHECK_MSG(diff <= 1, "%s: %d of %d unsharded draws differ from the reference", name, diff,
            TP_NITEMS);
}

static void test_tp_mask(fs_context *ctx) {
  const int fake = gu_fake_driver();
  tp_unsharded u;
  tp_unsharded_init(ctx, &u);
  gu_lmhead lm; /* a view of u's host data, for mk_logit and the reference */
  memset(&lm, 0, sizeof lm);
  lm.B = TP_B, lm.D = TP_D, lm.V = TP_V, lm.dtype = FS_DTYPE_BF16, lm.hs = lm.ws = TP_D;
  lm.H = u.h, lm.W = u.w;
  mk_mask m;
  mask_init(ctx, &m, &lm, 2);
  static const int kinds[TP_B] = {MK_HALF, MK_NONE, MK_ONE, MK_LOW, MK_SPARSE, MK_ONE};
  unsigned long long ms = 0x7E5Aull;
  for (int b = 0; b < TP_B; b++) mask_row(&m, &lm, b, kinds[b], &ms);
  mask_only(&m, &lm, 2, 30000); /* in the second shard only (T = 0.7) */
  mask_only(&m, &lm, 5, 100);   /* in the first shard only (greedy) */
  mask_upload(ctx, &m);
  const fs_options opt = mask_options(&m, 1);

  enum { R = 2 };
  tp_shared sh;
  memset(&sh, 0, sizeof sh);
  sh.R = R;
  pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
  mk_rank rk[R];
  for (int k = 0; k < R; k++) {
    tp_rank *r = &rk[k].r;
    memset(&rk[k], 0, sizeof rk[k]);
    r->sh = &sh;
    r->rank = k;
    sh.host[k] = gu_malloc(TP_MAXCOUNT * 8);
    REQUIRE(fs_context_create(0, &r->ctx) == FS_OK);
    gu_push(r->ctx);
    GU_CU(r->ctx, r->ctx->cu->cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING));
    gu_pop(r->ctx);
    r->s = u.s;
    tp_outputs(r->ctx, &r->go);
    r->o = gu_outputs_api(&r->go);
    rk[k].opt = &opt;
  }
  static const struct {
    int noise, cut;
    const char *name;
  } scen[2] = {{FS_NOISE_TOKEN, 15013, "token, cut at 15013"},
               {FS_NOISE_GROUP16, 16 * 939, "group16, cut at 15024"}};
  for (int si = 0; si < 2; si++) {
    REQUIRE(fs_context_set_noise(ctx, scen[si].noise) == FS_OK);
    gu_outputs full;
    tp_outputs(ctx, &full);
    const fs_outputs fo = gu_outputs_api(&full);
    const int st = fs_sample_ex(ctx, &u.full, &u.s, &opt, &fo, NULL);
    CHECK_MSG(st == FS_OK, "TP %s: the unsharded fs_sample_ex: %s", scen[si].name,
              fs_last_error(ctx));
    gu_outputs_fetch(ctx, &full);
    if (!fake && st == FS_OK) check_unsharded(&u, &lm, &m, scen[si].noise, &full, scen[si].name);
    const int start[R + 1] = {0, scen[si].cut, TP_V};
    pthread_t th[R];
    for (int k = 0; k < R; k++) {
      tp_rank *r = &rk[k].r;
      r->p = (fs_problem){TP_B, TP_D, start[k + 1] - start[k], start[k], FS_DTYPE_BF16,
                          gu_ptr(u.dh), 0, gu_ptr(u.dw + (CUdeviceptr)start[k] * TP_D * 2), 0};
      r->status = 0;
      r->err[0] = 0;
      rk[k].noise = scen[si].noise;
      gu_outputs_poison(r->ctx, &r->go);
    }
    for (int k = 0; k < R; k++) REQUIRE(pthread_create(&th[k], NULL, rank_main, &rk[k]) == 0);
    for (int k = 0; k < R; k++) pthread_join(th[k], NULL);
    int mism = 0;
    for (int k = 0; k < R; k++) {
      char who[64];
      snprintf(who, sizeof who, "TP %s rank %d", scen[si].name, k);
      CHECK_MSG(rk[k].r.status == FS_OK, "%s: %s", who, rk[k].r.err);
      /* catches: a rank that masks with local ids, or the wrong words
      ** of its shard, and a reduction that mishandles -inf candidates */
      if (!fake) mism += tp_mismatches(rk[k].r.ctx, &rk[k].r.go, &full, who);
    }
    CHECK_MSG(mism == 0, "TP %s: %d mismatches", scen[si].name, mism);
    printf("TP with a mask, %s: %s\n", scen[si].name,
           fake ? "ran (fake driver: not checked)"
                : mism ? "MISMATCH" : "tokens, keys and logits equal the unsharded fs_sample_ex");
    gu_outputs_free(ctx, &full);
  }
  REQUIRE(fs_context_set_noise(ctx, FS_NOISE_TOKEN) == FS_OK);
  for (int k = 0; k < R; k++) {
    tp_rank *r = &rk[k].r;
    gu_outputs_free(r->ctx, &r->go);
    gu_push(r->ctx);
    r->ctx->cu->cuStreamDestroy(r->stream);
    gu_pop(r->ctx);
    fs_context_destroy(r->ctx);
    free(sh.host[k]);
  }
  pthread_barrier_destroy(&sh.bar);
  mask_free(ctx, &m);
  tp_unsharded_free(ctx, &u);
}

/* ---- 4. graph capture ------------------------------------------------------------------ */

/* Items whose token, key or logit bits differ. */
static long snap_diff(const snap *a, const snap *b) {
  long d = 0;
  for (size_t i = 0; i < a->n; i++)
    d += a->tok[i] != b->tok[i] || a->key[i] != b->key[i] ||
         gu_float_bits(a->logit[i]) != gu_float_bits(b->logit[i]);
  return d;
}

static void test_graph_mask(fs_context *ctx) {
  const int B = 64, S = 2, D = 512, V = 4000, fake = gu_fake_driver();
  const int64_t voff = 37;
  gu_lmhead lm;
  gu_lmhead_init(&lm, B, D, V, FS_DTYPE_BF16, voff, 0, 0, gu_w_scale(D, 2.0), 0x67A9ull);
  gu_lmhead_upload(ctx, &lm);
  const fs_problem p = gu_problem(&lm, 1);
  pw_rows rows;
  pw_rows_init(ctx, &rows, B, mix_temperature);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperatures = (const float *)gu_ptr(rows.d_temps);
  s.num_samples = S;
  s.seed = 0x1234;
  s.offset = 99;
  /* mask A (its device words are the ones captured) and B: A's complement
  ** inside the shard, so no id is allowed by both */
  mk_mask a, bm;
  mask_init(ctx, &a, &lm, 1);
  mask_init(NULL, &bm, &lm, 1);
  unsigned long long ms = 0x6A11ull;
  for (int b = 0; b < B; b++) mask_row(&a, &lm, b, b % MK_KINDS, &ms);
  memcpy(bm.h, a.h, sizeof(uint32_t) * (size_t)B * (size_t)a.stride);
  for (int b = 0; b < B; b++) {
    for (int v = 0; v < V; v++)
      set_bit(mask_row_words(&bm, b), voff + v, !mask_bit(&a, b, voff + v));
    mask_count(&bm, &lm, b);
    REQUIRE(bm.allowed[b] > 0);
  }
  mask_upload(ctx, &a);
  const fs_options opt = mask_options(&a, 1);
  const size_t bytes = sizeof(uint32_t) * (size_t)B * (size_t)a.stride;
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, (size_t)B * S, 1, 1);
  CUstream stream = NULL;
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  gu_pop(ctx);

  /* the direct call prepares the shape (its bucket and workspace) */
  snap directA = {0, NULL, NULL, NULL}, directB = {0, NULL, NULL, NULL};
  if (sample_fetch(ctx, &p, &s, &opt, &o, (void *)stream, "graph: direct call, mask A") == FS_OK)
    directA = snap_take(&o);
  gu_outputs_poison(ctx, &o);
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  gu_pop(ctx);
  const fs_outputs out = gu_outputs_api(&o);
  const int st = fs_sample_ex(ctx, &p, &s, &opt, &out, (void *)stream);
  gu_push(ctx);
  const CUresult er = ctx->cu->cuStreamEndCapture(stream, &graph);
  gu_pop(ctx);
  CHECK_MSG(st == FS_OK, "fs_sample_ex while capturing: %s: %s", fs_status_string(st),
            fs_last_error(ctx));
  CHECK_MSG(er == CUDA_SUCCESS && graph, "cuStreamEndCapture failed (%d)", (int)er);
  gu_outputs_fetch(ctx, &o);
  const long ran = gu_outputs_written(&o);
  /* catches: work run, not captured, during capture */
  CHECK_MSG(ran == 0, "graph: %ld outputs were written while capturing", ran);

  if (st == FS_OK && er == CUDA_SUCCESS && graph && directA.n) {
    gu_push(ctx);
    GU_CU(ctx, gu_graph_instantiate(ctx, &exec, graph));
    gu_pop(ctx);
    snap gA = gu_graph_replay(ctx, exec, stream, &o, "graph replay, mask A");
    gu_upload(ctx, a.d, bm.h, bytes); /* the same device words now hold mask B */
    snap gB = gu_graph_replay(ctx, exec, stream, &o, "graph replay, mask B");
    if (sample_fetch(ctx, &p, &s, &opt, &o, (void *)stream, "graph: direct call, mask B") ==
        FS_OK)
      directB = snap_take(&o);
    gu_upload(ctx, a.d, a.h, bytes);
    snap gA2 = gu_graph_replay(ctx, exec, stream, &o, "graph replay, mask A again");
    if (!fake && directB.n) {
      /* catches: a graph that does not run the masked kernel as captured */
      const long dA = snap_diff(&directA, &gA);
      CHECK_MSG(dA == 0, "graph: the replay with mask A differs from the direct call in %ld of "
                "%zu draws", dA, gA.n);
      /* catches: a mask copied or resolved at capture instead of read by
      ** the kernel at each replay */
      const long dB = snap_diff(&directB, &gB);
      CHECK_MSG(dB == 0, "graph: the replay with mask B differs from the direct call with mask B "
                "in %ld of %zu draws", dB, gB.n);
      long not_allowed = 0, kept = 0;
      for (int b = 0; b < B; b++)
        for (int k = 0; k < S; k++) {
          const size_t i = (size_t)b * S + (size_t)k;
          const int32_t t = gB.tok[i];
          not_allowed += t < voff || t >= voff + V || !mask_bit(&bm, b, t);
          kept += a.kind[b] != MK_NONE && t == gA.tok[i];
        }
      CHECK_MSG(not_allowed == 0, "graph: %ld draws of the replay with mask B are not allowed by "
                "mask B", not_allowed);
      CHECK_MSG(kept == 0, "graph: %ld draws of the replay with mask B kept mask A's token (the "
                "two masks allow disjoint sets)", kept);
      const long dA2 = snap_diff(&directA, &gA2);
      CHECK_MSG(dA2 == 0, "graph: mask A restored, the replay differs from the direct call in "
                "%ld of %zu draws", dA2, gA2.n);
      printf("graph: replays follow the mask's device words (A, its complement B, A again): "
             "%zu draws each, as direct calls\n", gA.n);
    } else if (fake) {
      printf("graph: captured and replayed (fake driver: not checked)\n");
    }
    snap_free(&gA);
    snap_free(&gB);
    snap_free(&gA2);
  }
  if (exec) {
    gu_push(ctx);
    GU_CU(ctx, ctx->cu->cuGraphExecDestroy(exec));
    gu_pop(ctx);
  }
  if (graph) {
    gu_push(ctx);
    GU_CU(ctx, ctx->cu->cuGraphDestroy(graph));
    gu_pop(ctx);
  }
  gu_sync(ctx);
  gu_push(ctx);
  GU_CU(ctx, ctx->cu->cuStreamDestroy(stream));
  gu_pop(ctx);
  snap_free(&directA);
  snap_free(&directB);
  gu_outputs_free(ctx, &o);
  mask_free(ctx, &a);
  mask_free(NULL, &bm);
  pw_rows_free(ctx, &rows);
  gu_lmhead_free(ctx, &lm);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  const double t0 = gu_now();
  test_pathwise(ctx);
  test_distribution(ctx);
  if (!gu_test_family()) {
    test_tp_mask(ctx);
    test_graph_mask(ctx);
  }
  printf("test_mask: %.1f s\n", gu_now() - t0);
  fs_context_destroy(ctx);
  return fs_test_done("test_mask");
}
