// fs-test-timeout: 600
/*
** test_determinism.c: a draw is a function of (inputs, seed, offset, sample,
** global token) and of nothing else (issue 2, "How it is tested",
** determinism), checked bitwise on tokens, keys and logits:
**  1. repeat: the same call three times gives the same bits; changing the
**     seed or the offset changes the sampled rows (not the greedy ones);
**  2. slot: with per-row seeds a row's draws do not depend on its slot or
**     the batch size (slot 0 of B=1, slot 7 of B=16, slots 3 and 200 of
**     B=256; these use three different default kernel variants, bitwise
**     unless B=256's default sums in another order, as wgmma does: then
**     up to fp32 near-ties, see snap_close); with a
**     scalar seed identical rows are independent, with equal per-row seeds
**     they are identical;
**  3. shards: W split into 2, 3, 4 and 8 shards at boundaries that are not
**     multiples of 16 (down to shards of 13 rows and of 1 row), each called
**     with its vocab_offset: the max key over shards equals the unsharded key
**     bit for bit, with its token and logit (bf16 D=4096 and fp16 D=64);
**  4. CUDA graphs: fs_sample captured on a non-default stream after
**     fs_prepare replays to the direct call's bits; changing the per-row
**     seed and temperature arrays between replays changes the draws exactly
**     as a direct call with the new arrays does; capturing an unprepared
**     shape (or more samples than prepared) returns FS_NOT_PREPARED naming
**     fs_prepare, writes nothing and does not invalidate the capture;
**  5. variants: forcing kernel variants with FS_VARIANT (a fresh context per
**     variant): last-CTA (_rl_) vs second-launch (_r2_) reduction, persistent
**     (_gp) vs per-tile (_gt) grid on one otherwise equal head, and 4 evenly
**     spread variants of each family (mma, fma; ws, wg on sm_90) from the generator's
**     enumeration (other tiles, K tiles, warp layouts, stages, load widths),
**     each called twice (the last-CTA counters must reset), all give the
**     default variant's bits; the wg (wgmma) and fma (FFMA) families, whose
**     fp32 summation order differs, give the default's draws except at fp32
**     near-ties, and their own bits again on the second call.
**
** Why bitwise and not "up to near-ties": every logit is one H row . W row
** dot product accumulated in fp32 over K in increasing order, 16 at a time
** by mma.sync, whatever the tile, chunk, shard, slot, warp or variant; the
** noise is keyed by the global token; the reduction compares exact keys.  So
** any difference is a bug (for example a chunk boundary that drops or
** doubles a row, a key from the wrong token, a variant whose K order
** differs), and each one is reported with row, sample, both tokens and keys.
**
** Runtime on an H200: ~3 s to fill a 151937 x 4096 head, ~17 NVRTC compiles
** (default variants for 5 batch buckets and 2 dtypes, and up to 11 forced
** variants, a few seconds each) and ~150 launches: one to two minutes.  No
** CPU reference.
*/
#include "fs_tools.h"
#include "gen.h"
#include "gpu_graph.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DT_D 4096
#define DT_V 151937
#define SMALL_D 64

static fs_context *g_ctx;
static CUdeviceptr g_W;       /* [DT_V, DT_D] bf16 */
static CUdeviceptr g_W16;     /* [DT_V, SMALL_D] fp16 */

/* ---- helpers ------------------------------------------------------------------ */

/* Entries i where a and b differ in token, key or logit bits.  Each is a
** CHECK failure; the first few are printed.  S is the samples per row (for
** row/sample in the message). */
static long snap_diff(const snap *a, const snap *b, int S, const char *what) {
  long bad = 0;
  REQUIRE(a->n == b->n);
  for (size_t i = 0; i < a->n; i++) {
    if (a->tok[i] == b->tok[i] && a->key[i] == b->key[i] &&
        gu_float_bits(a->logit[i]) == gu_float_bits(b->logit[i]))
      continue;
    if (bad < 6)
      fprintf(stderr, "%s: row %zu sample %zu: token %d key %016llx (score %.9g) "
              "logit %.9g vs token %d key %016llx (score %.9g) logit %.9g\n", what,
              i / (size_t)S, i % (size_t)S, (int)a->tok[i], (unsigned long long)a->key[i],
              (double)fs_key_score(a->key[i]), (double)a->logit[i], (int)b->tok[i],
              (unsigned long long)b->key[i], (double)fs_key_score(b->key[i]),
              (double)b->logit[i]);
    bad++;
  }
  CHECK_MSG(bad == 0, "%s: %ld of %zu draws differ bitwise", what, bad, a->n);
  return bad;
}

/* For a variant whose fp32 summation order differs from the default's (wgmma
** inside a k16 step, FFMA lanes and butterfly): the same draw unless the
** scores are within fp32 rounding of the logits (|d| <= 1e-3 (1 + |s|)), where
** another token may win legitimately; the logit of an equal token agrees to
** 1e-3 relative.  Returns the rows that are neither; *exact counts the bitwise
** equal draws. */
static long snap_close(const snap *a, const snap *b, int S, const char *what, long *exact) {
  long bad = 0;
  *exact = 0;
  REQUIRE(a->n == b->n);
  for (size_t i = 0; i < a->n; i++) {
    const float sa = fs_key_score(a->key[i]), sb = fs_key_score(b->key[i]);
    const float tol = 1e-3f * (1.0f + (sa < 0 ? -sa : sa));
    const float dz = a->logit[i] - b->logit[i];
    const float ztol = 1e-3f * (1.0f + (a->logit[i] < 0 ? -a->logit[i] : a->logit[i]));
    if (a->key[i] == b->key[i] && gu_float_bits(a->logit[i]) == gu_float_bits(b->logit[i])) {
      ++*exact;
      continue;
    }
    if (a->tok[i] == b->tok[i] ? (dz <= ztol && -dz <= ztol)
                               : (sa - sb <= tol && sb - sa <= tol))
      continue;
    if (bad < 6)
      fprintf(stderr, "%s: row %zu sample %zu: token %d score %.9g logit %.9g vs token %d "
              "score %.9g logit %.9g\n", what, i / (size_t)S, i % (size_t)S, (int)a->tok[i],
              (double)sa, (double)a->logit[i], (int)b->tok[i], (double)sb,
              (double)b->logit[i]);
    bad++;
  }
  CHECK_MSG(bad == 0, "%s: %ld of %zu draws differ beyond fp32 near-ties", what, bad, a->n);
  return bad;
}

/* The per-row temperatures of a "mix" batch, by b % 6 (greedy: 0, -1). */
static float mix_t(int b) {
  static const float t[6] = {1.0f, 0.5f, 0.0f, 2.0f, -1.0f, 0.7f};
  return t[b % 6];
}

static fs_problem problem(CUdeviceptr dH, int B, int D, CUdeviceptr dW, int V,
                          int64_t vocab_offset, int dtype) {
  fs_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B;
  p.hidden = D;
  p.vocab = V;
  p.vocab_offset = vocab_offset;
  p.dtype = dtype;
  p.hidden_states = gu_ptr(dH);
  p.weight = gu_ptr(dW);
  return p;
}

/* Random H [B, D] on the device (host bits from seed). */
static CUdeviceptr random_h(int B, int D, int dtype, unsigned long long seed) {
  uint16_t *h = gu_malloc(sizeof(uint16_t) * (size_t)B * D);
  unsigned long long st = seed;
  gu_fill(h, B, D, D, dtype, 1.0, &st);
  CUdeviceptr d = gu_upload_new(g_ctx, h, sizeof(uint16_t) * (size_t)B * D);
  free(h);
  return d;
}

/* ---- 1. repeat ------------------------------------------------------------------- */

/* Fraction of the sampled (non-greedy) draws that differ between a and b;
** greedy rows must not differ at all. */
static double sampled_change(const snap *a, const snap *b, int B, int S,
                             const float *temps, const char *what) {
  long changed = 0, sampled = 0, greedy_changed = 0;
  for (int r = 0; r < B; r++) {
    const int greedy = !(temps[r] > 0.0f);
    for (int s = 0; s < S; s++) {
      const size_t i = (size_t)r * S + s;
      const int differs = a->tok[i] != b->tok[i] || a->key[i] != b->key[i];
      if (greedy) {
        greedy_changed += differs;
      } else {
        sampled++;
        changed += a->tok[i] != b->tok[i];
      }
    }
  }
  CHECK_MSG(greedy_changed == 0, "%s: %ld greedy draws changed", what,
            greedy_changed);
  return sampled ? (double)changed / (double)sampled : 0.0;
}

/* Prints and checks that change `what` (a -> b) changed >25% of sampled draws, no greedy one. */
static void expect_changed(const snap *a, const snap *b, int B, int S, const float *temps,
                           const char *what) {
  const double f = sampled_change(a, b, B, S, temps, what);
  printf("%s changed %.1f%% of sampled draws\n", what, 100 * f);
  CHECK_MSG(f > 0.25, "%s changed only %.1f%% of sampled draws", what, 100 * f);
}

static void test_repeat(void) {
  const int B = 64, S = 4;
  CUdeviceptr dH = random_h(B, DT_D, FS_DTYPE_BF16, 0x1111);
  float temps[64];
  uint64_t seeds[64], offsets[64];
  unsigned long long rs = 0x2222;
  for (int b = 0; b < B; b++) {
    temps[b] = mix_t(b);
    seeds[b] = fs_test_rand(&rs);
    offsets[b] = fs_test_rand(&rs);
  }
  CUdeviceptr d_t = gu_upload_new(g_ctx, temps, sizeof temps);
  CUdeviceptr d_s = gu_upload_new(g_ctx, seeds, sizeof seeds);
  CUdeviceptr d_o = gu_upload_new(g_ctx, offsets, sizeof offsets);
  const fs_problem p = problem(dH, B, DT_D, g_W, DT_V, 0, FS_DTYPE_BF16);
  gu_outputs o;
  gu_outputs_alloc(g_ctx, &o, (size_t)B * S, 1, 1);

  for (int per_row = 0; per_row < 2; per_row++) {
    fs_sampling s;
    memset(&s, 0, sizeof s);
    s.temperatures = (const float *)gu_ptr(d_t);
    s.num_samples = S;
    s.seed = 0xFEEDFACECAFEBEEFull;
    s.offset = 0x100000007ull;
    if (per_row) {
      s.seeds = (const uint64_t *)gu_ptr(d_s);
      s.offsets = (const uint64_t *)gu_ptr(d_o);
    }
    const char *mode = per_row ? "repeat (per-row seeds)" : "repeat (scalar seed)";
    snap first = {0};
    for (int rep = 0; rep < 3; rep++) {
      if (gu_sample_fetch(g_ctx, &p, &s, &o, NULL, mode) != FS_OK) break;
      snap cur = snap_take(&o);
      if (rep == 0) {
        first = cur;
      } else {
        snap_diff(&first, &cur, S, mode);
        snap_free(&cur);
      }
    }
    if (!first.n) continue;
    if (!per_row) {
      /* the seed and the offset must matter (for sampled rows only) */
      fs_sampling s2 = s;
      s2.seed ^= 1;
      if (gu_sample_fetch(g_ctx, &p, &s2, &o, NULL, "seed+1") == FS_OK) {
        snap c = snap_take(&o);
        expect_changed(&first, &c, B, S, temps, "repeat: changing the seed");
        snap_free(&c);
      }
      s2 = s;
      s2.offset += 1;
      if (gu_sample_fetch(g_ctx, &p, &s2, &o, NULL, "offset+1") == FS_OK) {
        snap c = snap_take(&o);
        expect_changed(&first, &c, B, S, temps, "repeat: changing the offset");
        snap_free(&c);
      }
    }
    printf("%s: 3 calls bitwise identical\n", mode);
    snap_free(&first);
  }
  gu_outputs_free(g_ctx, &o);
  gu_free(g_ctx, d_t);
  gu_free(g_ctx, d_s);
  gu_free(g_ctx, d_o);
  gu_free(g_ctx, dH);
}

/* ---- 2. slot and batch size ---------------------------------------------------- */

/* Draws of `probe` (an H row, seed, offset, temperature) placed at `slots`
** of a batch of B otherwise random rows, per-row seeds: returns the S draws
** of each slot, concatenated (nslots * S entries). */
static snap place_probe(const uint16_t *probe_h, uint64_t seed, uint64_t offset,
                        float T, int B, const int *slots, int nslots, int S,
                        unsigned long long fill_seed) {
  uint16_t *h = gu_malloc(sizeof(uint16_t) * (size_t)B * DT_D);
  float *temps = gu_malloc(sizeof(float) * (size_t)B);
  uint64_t *seeds = gu_malloc(sizeof(uint64_t) * (size_t)B);
  uint64_t *offs = gu_malloc(sizeof(uint64_t) * (size_t)B);
  unsigned long long st = fill_seed;
  gu_fill(h, B, DT_D, DT_D, FS_DTYPE_BF16, 1.0, &st);
  for (int b = 0; b < B; b++) {
    temps[b] = mix_t((int)(fs_test_rand(&st) % 6));
    seeds[b] = fs_test_rand(&st);
    offs[b] = fs_test_rand(&st);
  }
  for (int i = 0; i < nslots; i++) {
    memcpy(h + (size_t)slots[i] * DT_D, probe_h, sizeof(uint16_t) * DT_D);
    temps[slots[i]] = T;
    seeds[slots[i]] = seed;
    offs[slots[i]] = offset;
  }
  CUdeviceptr dH = gu_upload_new(g_ctx, h, sizeof(uint16_t) * (size_t)B * DT_D);
  CUdeviceptr d_t = gu_upload_new(g_ctx, temps, sizeof(float) * (size_t)B);
  CUdeviceptr d_s = gu_upload_new(g_ctx, seeds, sizeof(uint64_t) * (size_t)B);
  CUdeviceptr d_o = gu_upload_new(g_ctx, offs, sizeof(uint64_t) * (size_t)B);
  const fs_problem p = problem(dH, B, DT_D, g_W, DT_V, 0, FS_DTYPE_BF16);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperatures = (const float *)gu_ptr(d_t);
  s.seeds = (const uint64_t *)gu_ptr(d_s);
  s.offsets = (const uint64_t *)gu_ptr(d_o);
  s.num_samples = S;
  gu_outputs o;
  gu_outputs_alloc(g_ctx, &o, (size_t)B * S, 1, 1);
  snap r;
  r.n = (size_t)nslots * S;
  r.tok = gu_malloc(r.n * sizeof *r.tok);
  r.logit = gu_malloc(r.n * sizeof *r.logit);
  r.key = gu_malloc(r.n * sizeof *r.key);
  memset(r.tok, 0xFF, r.n * sizeof *r.tok);
  memset(r.logit, 0xFF, r.n * sizeof *r.logit);
  memset(r.key, 0xFF, r.n * sizeof *r.key);
  char what[64];
  snprintf(what, sizeof what, "slot test B=%d", B);
  if (gu_sample_fetch(g_ctx, &p, &s, &o, NULL, what) == FS_OK) {
    for (int i = 0; i < nslots; i++)
      for (int k = 0; k < S; k++) {
        const size_t src = (size_t)slots[i] * S + k, dst = (size_t)i * S + k;
        r.tok[dst] = o.h_tokens[src];
        r.logit[dst] = o.h_logits[src];
        r.key[dst] = o.h_keys[src];
      }
  }
  gu_outputs_free(g_ctx, &o);
  gu_free(g_ctx, dH);
  gu_free(g_ctx, d_t);
  gu_free(g_ctx, d_s);
  gu_free(g_ctx, d_o);
  free(h);
  free(temps);
  free(seeds);
  free(offs);
  return r;
}

/* A snap holding entries [i * S, (i + 1) * S) of s. */
static snap snap_part(const snap *s, int i, int S) {
  snap r;
  r.n = (size_t)S;
  r.tok = s->tok + (size_t)i * S;
  r.logit = s->logit + (size_t)i * S;
  r.key = s->key + (size_t)i * S;
  return r;
}

/* 1 if the default variant for batch B sums like mma.sync (families mma and
** ws), so that its draws equal B=1's bit for bit; 0 for wg and fma. */
static int default_sums_like_mma(int B) {
  char name[320];
  REQUIRE(gu_variant_name(g_ctx, B, DT_D, DT_V, FS_DTYPE_BF16, name, sizeof name) == FS_OK);
  return strstr(name, "_mma_") != NULL || strstr(name, "_ws_") != NULL;
}

static void test_slots(void) {
  const int S = 8;
  const int same_order = default_sums_like_mma(1) == default_sums_like_mma(256);
  static const float probe_t[4] = {1.0f, 0.5f, 0.0f, 2.0f};
  uint16_t probe_h[DT_D];
  unsigned long long st = 0x5107;
  for (int pi = 0; pi < 4; pi++) {
    gu_fill(probe_h, 1, DT_D, DT_D, FS_DTYPE_BF16, 1.0, &st);
    const uint64_t seed = fs_test_rand(&st), offset = fs_test_rand(&st);
    static const int s1[1] = {0}, s16[1] = {7}, s256[2] = {200, 3};
    snap a = place_probe(probe_h, seed, offset, probe_t[pi], 1, s1, 1, S, st + 1);
    snap b = place_probe(probe_h, seed, offset, probe_t[pi], 16, s16, 1, S, st + 2);
    snap c = place_probe(probe_h, seed, offset, probe_t[pi], 256, s256, 2, S, st + 3);
    char what[96];
    snap c200 = snap_part(&c, 0, S), c3 = snap_part(&c, 1, S);
    snprintf(what, sizeof what, "probe %d (T=%g): B=1 slot 0 vs B=16 slot 7", pi,
             (double)probe_t[pi]);
    long bad = snap_diff(&a, &b, S, what);
    snprintf(what, sizeof what, "probe %d (T=%g): B=1 slot 0 vs B=256 slot 200",
             pi, (double)probe_t[pi]);
    long exact = 0;
    bad += same_order ? snap_diff(&a, &c200, S, what) : snap_close(&a, &c200, S, what, &exact);
    snprintf(what, sizeof what, "probe %d (T=%g): B=256 slot 200 vs slot 3", pi,
             (double)probe_t[pi]);
    bad += snap_diff(&c200, &c3, S, what);
    if (!bad)
      printf("slot: probe %d (T=%g): %d draws identical at slot 0 of B=1, 7 of B=16, 3 and "
             "200 of B=256%s\n", pi, (double)probe_t[pi], S,
             same_order ? "" : " (B=256's default sums otherwise: up to fp32 near-ties)");
    snap_free(&a);
    snap_free(&b);
    snap_free(&c);
  }

  /* 16 copies of one row: independent under a scalar seed (the row index
  ** enters the counter), identical under equal per-row seeds. */
  const int B = 16;
  gu_fill(probe_h, 1, DT_D, DT_D, FS_DTYPE_BF16, 1.0, &st);
  uint16_t *h = gu_malloc(sizeof(uint16_t) * (size_t)B * DT_D);
  for (int b = 0; b < B; b++) memcpy(h + (size_t)b * DT_D, probe_h, sizeof probe_h);
  CUdeviceptr dH = gu_upload_new(g_ctx, h, sizeof(uint16_t) * (size_t)B * DT_D);
  uint64_t seeds[16], offs[16];
  for (int b = 0; b < B; b++) {
    seeds[b] = 0x77;
    offs[b] = 0x88;
  }
  CUdeviceptr d_s = gu_upload_new(g_ctx, seeds, sizeof seeds);
  CUdeviceptr d_o = gu_upload_new(g_ctx, offs, sizeof offs);
  const fs_problem p = problem(dH, B, DT_D, g_W, DT_V, 0, FS_DTYPE_BF16);
  gu_outputs o;
  gu_outputs_alloc(g_ctx, &o, (size_t)B * S, 1, 1);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = 1.0f;
  s.num_samples = S;
  s.seed = 0x77;
  s.offset = 0x88;
  if (gu_sample_fetch(g_ctx, &p, &s, &o, NULL, "identical rows, scalar seed") == FS_OK) {
    long same = 0;
    for (int b = 1; b < B; b++)
      for (int k = 0; k < S; k++) same += o.h_tokens[b * S + k] == o.h_tokens[k];
    const double f = (double)same / ((B - 1) * S);
    printf("slot: identical rows with a scalar seed agree with row 0 in %.1f%% of draws\n",
           100 * f);
    CHECK_MSG(f < 0.5, "identical rows under a scalar seed agree in %.1f%% of draws: "
              "the row index does not seem to enter the counter", 100 * f);
  }
  s.seeds = (const uint64_t *)gu_ptr(d_s);
  s.offsets = (const uint64_t *)gu_ptr(d_o);
  if (gu_sample_fetch(g_ctx, &p, &s, &o, NULL, "identical rows, equal per-row seeds") == FS_OK) {
    long diff = 0;
    for (int b = 1; b < B; b++)
      for (int k = 0; k < S; k++)
        diff += o.h_tokens[b * S + k] != o.h_tokens[k] || o.h_keys[b * S + k] != o.h_keys[k];
    CHECK_MSG(diff == 0, "identical rows with equal per-row seeds: %ld draws differ", diff);
    if (!diff) printf("slot: identical rows with equal per-row seeds: all draws identical\n");
  }
  gu_outputs_free(g_ctx, &o);
  gu_free(g_ctx, dH);
  gu_free(g_ctx, d_s);
  gu_free(g_ctx, d_o);
  free(h);
}

/* ---- 3. vocabulary shards --------------------------------------------------------- */

/* Shard boundaries of [0, DT_V): none is a multiple of 16; shards of 13 and
** of 1 row appear. */
static const int cuts2[] = {0, 75973, DT_V};
static const int cuts3[] = {0, 40001, 100003, DT_V};
static const int cuts4[] = {0, 1, 65537, 131071, DT_V};
static const int cuts8[] = {0, 13, 14, 19001, 38002, 76005, 76018, 120003, DT_V};

typedef struct shard_cfg {
  const char *name;
  int B, S, D, dtype;
  int64_t base_offset;
  int mix;            /* per-row temperatures (else scalar T) */
  float T;
  int per_row_seeds;
} shard_cfg;

static void test_shards_cfg(const shard_cfg *c, CUdeviceptr dW) {
  const int B = c->B, S = c->S;
  CUdeviceptr dH = random_h(B, c->D, c->dtype, 0x3333 + (unsigned long long)B);
  float temps[64];
  uint64_t seeds[64], offs[64];
  unsigned long long rs = 0x4444;
  REQUIRE(B <= 64);
  for (int b = 0; b < B; b++) {
    temps[b] = mix_t(b);
    seeds[b] = fs_test_rand(&rs);
    offs[b] = fs_test_rand(&rs);
  }
  CUdeviceptr d_t = gu_upload_new(g_ctx, temps, sizeof temps);
  CUdeviceptr d_s = gu_upload_new(g_ctx, seeds, sizeof seeds);
  CUdeviceptr d_o = gu_upload_new(g_ctx, offs, sizeof offs);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = c->T;
  s.temperatures = c->mix ? (const float *)gu_ptr(d_t) : NULL;
  s.num_samples = S;
  s.seed = 0xABCDEF0123ull;
  s.offset = 0x5555ull << 32;
  if (c->per_row_seeds) {
    s.seeds = (const uint64_t *)gu_ptr(d_s);
    s.offsets = (const uint64_t *)gu_ptr(d_o);
  }
  const size_t n = (size_t)B * S;
  gu_outputs o;
  gu_outputs_alloc(g_ctx, &o, n, 1, 1);
  const fs_problem full = problem(dH, B, c->D, dW, DT_V, c->base_offset, c->dtype);
  char what[128];
  snprintf(what, sizeof what, "%s unsharded", c->name);
  if (gu_sample_fetch(g_ctx, &full, &s, &o, NULL, what) != FS_OK) goto done;
  snap ref = snap_take(&o);

  static const int *const tables[4] = {cuts2, cuts3, cuts4, cuts8};
  static const int counts[4] = {2, 3, 4, 8};
  snap best = snap_take(&o); /* overwritten below */
  for (int t = 0; t < 4; t++) {
    const int *cut = tables[t], ns = counts[t];
    for (size_t i = 0; i < n; i++) best.key[i] = 0; /* below every real key */
    long range_bad = 0, sample_fail = 0;
    for (int k = 0; k < ns; k++) {
      const int start = cut[k], len = cut[k + 1] - cut[k];
      const int64_t row_bytes = (int64_t)c->D * 2;
      fs_problem sp = problem(dH, B, c->D, dW + (CUdeviceptr)(start * row_bytes), len,
                              c->base_offset + start, c->dtype);
      snprintf(what, sizeof what, "%s %d shards: shard %d [%d, %d)", c->name, ns, k,
               start, start + len);
      if (gu_sample_fetch(g_ctx, &sp, &s, &o, NULL, what) != FS_OK) {
        sample_fail++;
        continue;
      }
      for (size_t i = 0; i < n; i++) {
        const int64_t tok = o.h_tokens[i];
        if (tok < sp.vocab_offset || tok >= sp.vocab_offset + len ||
            fs_key_token(o.h_keys[i]) != (uint32_t)tok) {
          if (range_bad < 4)
            fprintf(stderr, "%s: draw %zu: token %lld (key token %u) outside the shard\n",
                    what, i, (long long)tok, (unsigned)fs_key_token(o.h_keys[i]));
          range_bad++;
        }
        if (o.h_keys[i] > best.key[i]) {
          best.key[i] = o.h_keys[i];
          best.tok[i] = o.h_tokens[i];
          best.logit[i] = o.h_logits[i];
        }
      }
    }
    CHECK_MSG(range_bad == 0, "%s %d shards: %ld draws outside their shard", c->name,
              ns, range_bad);
    if (sample_fail) continue;
    snprintf(what, sizeof what, "%s: max over %d shards vs unsharded", c->name, ns);
    if (!snap_diff(&ref, &best, S, what))
      printf("shards: %s: best of %d shards == unsharded, %zu draws bitwise\n", c->name,
             ns, n);
  }
  snap_free(&best);
  snap_free(&ref);
done:
  gu_outputs_free(g_ctx, &o);
  gu_free(g_ctx, dH);
  gu_free(g_ctx, d_t);
  gu_free(g_ctx, d_s);
  gu_free(g_ctx, d_o);
}

static void test_shards(void) {
  static const shard_cfg cfgs[] = {
      {"bf16 D=4096 B=64 mix", 64, 4, DT_D, FS_DTYPE_BF16, 0, 1, 0.0f, 0},
      {"bf16 D=4096 B=3 per-row seeds", 3, 8, DT_D, FS_DTYPE_BF16, 0, 0, 1.0f, 1},
      {"fp16 D=64 B=16 T=0.7 offset 7", 16, 4, SMALL_D, FS_DTYPE_FP16, 7, 0, 0.7f, 0},
  };
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
    test_shards_cfg(&cfgs[i], cfgs[i].dtype == FS_DTYPE_BF16 ? g_W : g_W16);
}

/* ---- 4. CUDA graphs ------------------------------------------------------------------ */

/* Begins a global-mode capture on stream, runs fs_sample, ends the capture.
** Returns fs_sample's status; *graph is the captured graph (or NULL) and
** *end_result cuStreamEndCapture's result. */
static int capture(fs_context *c, CUstream stream, const fs_problem *p,
                   const fs_sampling *s, const gu_outputs *o, CUgraph *graph,
                   CUresult *end_result) {
  *graph = NULL;
  gu_push(c);
  GU_CU(c, c->cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  gu_pop(c);
  fs_outputs out = gu_outputs_api(o);
  const int st = fs_sample(c, p, s, &out, (void *)stream);
  gu_push(c);
  *end_result = c->cu->cuStreamEndCapture(stream, graph);
  gu_pop(c);
  return st;
}

static void test_graph(void) {
  fs_context *c = NULL;
  int st = fs_context_create(0, &c);
  REQUIRE(st == FS_OK);
  const int B = 64, S = 4;
  CUdeviceptr dH = random_h(B, DT_D, FS_DTYPE_BF16, 0x6666);
  float temps[64], greedy[64];
  uint64_t seeds[64], seeds2[64], offs[64];
  unsigned long long rs = 0x7777;
  for (int b = 0; b < B; b++) {
    temps[b] = mix_t(b);
    greedy[b] = 0.0f;
    seeds[b] = fs_test_rand(&rs);
    seeds2[b] = fs_test_rand(&rs);
    offs[b] = fs_test_rand(&rs);
  }
  CUdeviceptr d_t = gu_upload_new(c, temps, sizeof temps);
  CUdeviceptr d_s = gu_upload_new(c, seeds, sizeof seeds);
  CUdeviceptr d_o = gu_upload_new(c, offs, sizeof offs);
  const fs_problem p = problem(dH, B, DT_D, g_W, DT_V, 0, FS_DTYPE_BF16);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperatures = (const float *)gu_ptr(d_t);
  s.seeds = (const uint64_t *)gu_ptr(d_s);
  s.offsets = (const uint64_t *)gu_ptr(d_o);
  s.num_samples = S;
  gu_outputs o;
  gu_outputs_alloc(c, &o, (size_t)B * S, 1, 1);

  CUstream stream = NULL;
  gu_push(c);
  GU_CU(c, c->cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  gu_pop(c);

  st = fs_prepare(c, &p, &s);
  CHECK_MSG(st == FS_OK, "fs_prepare: %s: %s", fs_status_string(st), fs_last_error(c));
  snap direct1 = {0}, direct2 = {0}, direct3 = {0};
  if (gu_sample_fetch(c, &p, &s, &o, (void *)stream, "graph: direct call") == FS_OK)
    direct1 = snap_take(&o);

  /* capture; nothing may run during capture */
  gu_outputs_poison(c, &o);
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  CUresult er;
  st = capture(c, stream, &p, &s, &o, &graph, &er);
  CHECK_MSG(st == FS_OK, "fs_sample during capture: %s: %s", fs_status_string(st),
            fs_last_error(c));
  CHECK_MSG(er == CUDA_SUCCESS && graph, "cuStreamEndCapture failed (%d)", (int)er);
  gu_outputs_fetch(c, &o);
  const long ran = gu_outputs_written(&o);
  CHECK_MSG(ran == 0, "graph: %ld outputs were written while capturing", ran);

  if (st == FS_OK && er == CUDA_SUCCESS && graph && direct1.n) {
    gu_push(c);
    GU_CU(c, gu_graph_instantiate(c, &exec, graph));
    gu_pop(c);
    for (int rep = 0; rep < 2; rep++) {
      snap g = gu_graph_replay(c, exec, stream, &o, "graph replay");
      snap_diff(&direct1, &g, S, rep ? "graph: second replay vs direct" : "graph: replay vs direct");
      snap_free(&g);
    }
    /* new per-row seeds between replays */
    gu_upload(c, d_s, seeds2, sizeof seeds2);
    snap g2 = gu_graph_replay(c, exec, stream, &o, "graph replay, new seeds");
    if (gu_sample_fetch(c, &p, &s, &o, (void *)stream, "graph: direct call, new seeds") == FS_OK) {
      direct2 = snap_take(&o);
      snap_diff(&direct2, &g2, S, "graph: replay with new seeds vs direct with new seeds");
    }
    expect_changed(&direct1, &g2, B, S, temps, "graph: new per-row seeds on replay");
    snap_free(&g2);

    /* all rows greedy between replays */
    gu_upload(c, d_t, greedy, sizeof greedy);
    snap g3 = gu_graph_replay(c, exec, stream, &o, "graph replay, greedy");
    if (gu_sample_fetch(c, &p, &s, &o, (void *)stream, "graph: direct call, greedy") == FS_OK) {
      direct3 = snap_take(&o);
      snap_diff(&direct3, &g3, S, "graph: greedy replay vs greedy direct");
      long spread = 0;
      for (int b = 0; b < B; b++)
        for (int k = 1; k < S; k++) spread += g3.tok[b * S + k] != g3.tok[b * S];
      CHECK_MSG(spread == 0, "graph: greedy replay: %ld samples differ from sample 0", spread);
    }
    snap_free(&g3);
    printf("graph: replays match direct calls; per-row arrays are re-read on replay\n");
    gu_upload(c, d_t, temps, sizeof temps);
  }
  if (exec) {
    gu_push(c);
    GU_CU(c, c->cu->cuGraphExecDestroy(exec));
    gu_pop(c);
  }
  if (graph) {
    gu_push(c);
    GU_CU(c, c->cu->cuGraphDestroy(graph));
    gu_pop(c);
  }

  /* capturing what was not prepared: a new shape, then more samples */
  {
    const int B2 = 5, V2 = 1003;
    CUdeviceptr dH2 = random_h(B2, SMALL_D, FS_DTYPE_BF16, 0x8888);
    CUdeviceptr dW2 = random_h(V2, SMALL_D, FS_DTYPE_BF16, 0x9999);
    const fs_problem p2 = problem(dH2, B2, SMALL_D, dW2, V2, 0, FS_DTYPE_BF16);
    fs_sampling s2;
    memset(&s2, 0, sizeof s2);
    s2.temperature = 1.0f;
    s2.num_samples = 2;
    gu_outputs o2;
    gu_outputs_alloc(c, &o2, (size_t)B2 * 2, 1, 1);
    fs_sampling s3 = s;
    s3.num_samples = 4096; /* the workspace was prepared for 4 */
    gu_outputs o3;
    gu_outputs_alloc(c, &o3, (size_t)B * s3.num_samples, 1, 1);
    struct {
      const char *what;
      const fs_problem *p;
      const fs_sampling *s;
      gu_outputs *o;
    } tries[2] = {{"unprepared shape (D=64, V=1003)", &p2, &s2, &o2},
                  {"prepared shape with num_samples 4096 > 4", &p, &s3, &o3}};
    for (int i = 0; i < 2; i++) {
      gu_outputs_poison(c, tries[i].o);
      CUgraph g = NULL;
      st = capture(c, stream, tries[i].p, tries[i].s, tries[i].o, &g, &er);
      const char *msg = fs_last_error(c);
      CHECK_MSG(st == FS_NOT_PREPARED, "capturing an %s: got %s (%d): %s", tries[i].what,
                fs_status_string(st), st, msg);
      CHECK_MSG(strstr(msg, "fs_prepare") != NULL,
                "capturing an %s: the message does not name fs_prepare: \"%s\"",
                tries[i].what, msg);
      CHECK_MSG(er == CUDA_SUCCESS,
                "capturing an %s: cuStreamEndCapture returned %d: the failed fs_sample "
                "made a call that is illegal while capturing", tries[i].what, (int)er);
      if (g) {
        gu_push(c);
        GU_CU(c, c->cu->cuGraphDestroy(g));
        gu_pop(c);
      }
      gu_outputs_fetch(c, tries[i].o);
      long written = 0;
      for (size_t k = 0; k < tries[i].o->cap; k++) written += tries[i].o->h_tokens[k] != -1;
      CHECK_MSG(written == 0, "capturing an %s: %ld outputs written", tries[i].what, written);
      printf("graph: capturing an %s -> %s: %s\n", tries[i].what, fs_status_string(st), msg);
      /* outside capture the same call prepares itself and works */
      char what[128];
      snprintf(what, sizeof what, "after the failed capture, %s", tries[i].what);
      gu_sample_fetch(c, tries[i].p, tries[i].s, tries[i].o, (void *)stream, what);
    }
    gu_outputs_free(c, &o2);
    gu_outputs_free(c, &o3);
    gu_free(c, dH2);
    gu_free(c, dW2);
  }

  snap_free(&direct1);
  snap_free(&direct2);
  snap_free(&direct3);
  gu_outputs_free(c, &o);
  gu_push(c);
  GU_CU(c, c->cu->cuStreamSynchronize(stream));
  GU_CU(c, c->cu->cuStreamDestroy(stream));
  gu_pop(c);
  gu_free(c, dH);
  gu_free(c, d_t);
  gu_free(c, d_s);
  gu_free(c, d_o);
  fs_context_destroy(c);
}

/* ---- 5. forced variants ------------------------------------------------------------ */

/* Field 4 of a variant name, the family ("mma", "ws"), into fam. */
static void family_of(const char *name, char *fam, size_t n) {
  const char *a = name;
  for (int i = 0; i < 3 && a; i++) {
    a = strchr(a, '_');
    if (a) a++;
  }
  const char *e = a ? strchr(a, '_') : NULL;
  if (!a || !e) {
    snprintf(fam, n, "?");
    return;
  }
  snprintf(fam, n, "%.*s", (int)(e - a), a);
}

#define MAX_VARIANTS 20

/* Picks the variants to compare from the generator's enumeration (so the
** list follows the design space as it changes): the first head H with all of
** H_rl_gp, H_r2_gp and H_rl_gt valid (last-CTA vs second-launch reduction,
** persistent vs per-tile grid), then up to 4 evenly spread variants of each
** family.  Returns the count; names[0..2] are the triple when *triple. */
static int pick_variants(const fs_variant *list, int count,
                         char names[MAX_VARIANTS][192], int *triple) {
  int n = 0;
  *triple = 0;
  for (int i = 0; i < count && !*triple; i++) {
    const char *nm = list[i].name;
    const size_t len = strlen(nm);
    if (len < 7 || strcmp(nm + len - 6, "_rl_gp") != 0) continue;
    char want[2][192];
    snprintf(want[0], sizeof want[0], "%.*s_r2_gp", (int)(len - 6), nm);
    snprintf(want[1], sizeof want[1], "%.*s_rl_gt", (int)(len - 6), nm);
    int found = 0;
    for (int j = 0; j < count; j++)
      found += strcmp(list[j].name, want[0]) == 0 || strcmp(list[j].name, want[1]) == 0;
    if (found == 2) {
      snprintf(names[n++], 192, "%s", nm);
      snprintf(names[n++], 192, "%s", want[0]);
      snprintf(names[n++], 192, "%s", want[1]);
      *triple = 1;
    }
  }
  char fams[4][16];
  int nf = 0;
  for (int i = 0; i < count && nf < 4; i++) {
    char f[16];
    family_of(list[i].name, f, sizeof f);
    int seen = 0;
    for (int k = 0; k < nf; k++) seen |= strcmp(fams[k], f) == 0;
    if (!seen) snprintf(fams[nf++], sizeof fams[0], "%s", f);
  }
  for (int k = 0; k < nf; k++) {
    int m = 0;
    for (int i = 0; i < count; i++) {
      char f[16];
      family_of(list[i].name, f, sizeof f);
      m += strcmp(f, fams[k]) == 0;
    }
    for (int j = 0; j < 4 && n < MAX_VARIANTS; j++) {
      const int want = (2 * j + 1) * m / 8; /* the j-th of 4 evenly spread */
      for (int i = 0, seen = 0; i < count; i++) {
        char f[16];
        family_of(list[i].name, f, sizeof f);
        if (strcmp(f, fams[k]) != 0) continue;
        if (seen++ != want) continue;
        int dup = 0;
        for (int q = 0; q < n; q++) dup |= strcmp(names[q], list[i].name) == 0;
        if (!dup) snprintf(names[n++], 192, "%s", list[i].name);
        break;
      }
    }
  }
  return n;
}

static void test_variants(void) {
  const int B = 64, S = 2;
  CUdeviceptr dH = random_h(B, DT_D, FS_DTYPE_BF16, 0xAAAA);
  float temps[64];
  for (int b = 0; b < B; b++) temps[b] = mix_t(b);
  CUdeviceptr d_t = gu_upload_new(g_ctx, temps, sizeof temps);
  const fs_problem p = problem(dH, B, DT_D, g_W, DT_V, 0, FS_DTYPE_BF16);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperatures = (const float *)gu_ptr(d_t);
  s.num_samples = S;
  s.seed = 0xBBBB;
  s.offset = 0xCCCC;
  gu_outputs o;
  gu_outputs_alloc(g_ctx, &o, (size_t)B * S, 1, 1);
  fs_gen *gen = NULL;
  fs_variant *list = NULL;
  int count = 0;

  char buf[320];
  int st = fs_variant_name(g_ctx, &p, &s, buf, sizeof buf);
  CHECK_MSG(st == FS_OK, "fs_variant_name: %s", fs_last_error(g_ctx));
  const int def_mma = default_sums_like_mma(B);
  snap def = {0};
  if (st == FS_OK && gu_sample_fetch(g_ctx, &p, &s, &o, NULL, "default variant") == FS_OK)
    def = snap_take(&o);
  if (!def.n) goto done;
  printf("variants: default %s\n", buf);

  char err[768];
  st = fs_gen_open(&gen, err, sizeof err);
  CHECK_MSG(st == FS_OK, "fs_gen_open: %s", err);
  if (st != FS_OK) goto done;
  const int arch = fs_target_arch(g_ctx->arch);
  st = fs_gen_enumerate(gen, arch, FS_DTYPE_BF16, &list, &count, err, sizeof err);
  CHECK_MSG(st == FS_OK && count > 0, "fs_gen_enumerate(sm_%d, bf16): %d variants: %s", arch,
            count, st ? err : "");
  if (st != FS_OK) goto done;
  char names[MAX_VARIANTS][192];
  int triple = 0;
  const int nn = pick_variants(list, count, names, &triple);
  CHECK_MSG(triple, "no variant head H with H_rl_gp, H_r2_gp and H_rl_gt all valid among "
            "the %d variants for sm_%d: the reduction strategies cannot be compared", count,
            arch);
  printf("variants: comparing %d of the %d for sm_%d with the default\n", nn, count, arch);

  for (int i = 0; i < nn; i++) {
    setenv("FS_VARIANT", names[i], 1);
    fs_context *c = NULL;
    st = fs_context_create(0, &c);
    REQUIRE(st == FS_OK);
    st = fs_variant_name(c, &p, &s, buf, sizeof buf);
    if (st != FS_OK) {
      CHECK_MSG(0, "variant %s: %s: %s\n%.2000s", names[i], fs_status_string(st),
                fs_last_error(c), fs_last_compile_log(c));
    } else {
      CHECK_MSG(strncmp(buf, names[i], strlen(names[i])) == 0 &&
                    strstr(buf, "FS_VARIANT") != NULL,
                "FS_VARIANT=%s was not used: fs_variant_name says %s", names[i], buf);
      /* mma.sync families against an mma.sync default: bitwise; others within
      ** fp32 near-ties of it, and bitwise equal to themselves */
      char f[16];
      family_of(names[i], f, sizeof f);
      const int same_order = def_mma && (!strcmp(f, "mma") || !strcmp(f, "ws"));
      long bad = 0, exact = 0;
      snap first = {0};
      for (int rep = 0; rep < 2; rep++) {
        char what[256];
        snprintf(what, sizeof what, "%s call %d vs default", names[i], rep + 1);
        if (gu_sample_fetch(c, &p, &s, &o, NULL, what) != FS_OK) {
          bad++;
          break;
        }
        snap cur = snap_take(&o);
        if (same_order) {
          bad += snap_diff(&def, &cur, S, what);
        } else if (rep == 0) {
          bad += snap_close(&def, &cur, S, what, &exact);
          first = cur;
          continue;
        } else {
          snprintf(what, sizeof what, "%s call 2 vs call 1", names[i]);
          bad += snap_diff(&first, &cur, S, what);
        }
        snap_free(&cur);
      }
      snap_free(&first);
      if (!bad && same_order) printf("variants: %s == default, twice\n", names[i]);
      if (!bad && !same_order)
        printf("variants: %s within fp32 near-ties of the default (%ld of %zu draws bitwise "
               "equal), and equal to itself\n", names[i], exact, def.n);
    }
    fs_context_destroy(c);
    unsetenv("FS_VARIANT");
  }
done:
  free(list);
  fs_gen_close(gen);
  snap_free(&def);
  gu_outputs_free(g_ctx, &o);
  gu_free(g_ctx, dH);
  gu_free(g_ctx, d_t);
}

int main(void) {
  g_ctx = fs_test_gpu_or_skip();
  if (getenv("FS_VARIANT")) {
    printf("note: FS_VARIANT=%s unset for this test\n", getenv("FS_VARIANT"));
    unsetenv("FS_VARIANT");
  }
  const double t0 = gu_now();
  g_W = gu_alloc(g_ctx, sizeof(uint16_t) * (size_t)DT_V * DT_D);
  g_W16 = gu_alloc(g_ctx, sizeof(uint16_t) * (size_t)DT_V * SMALL_D);
  int st = fs_tools_fill_random(g_ctx, g_W, (size_t)DT_V * DT_D, FS_DTYPE_BF16,
                                (float)gu_w_scale(DT_D, 2.0), 0xD00D);
  if (st == FS_OK)
    st = fs_tools_fill_random(g_ctx, g_W16, (size_t)DT_V * SMALL_D, FS_DTYPE_FP16,
                              (float)gu_w_scale(SMALL_D, 2.0), 0xD00E);
  if (st != FS_OK) {
    fprintf(stderr, "fs_tools_fill_random: %s: %s\n", fs_status_string(st),
            fs_last_error(g_ctx));
    return 1;
  }
  printf("heads filled in %.1f s\n", gu_now() - t0);
  test_repeat();
  test_slots();
  test_shards();
  test_graph();
  test_variants();
  gu_free(g_ctx, g_W);
  gu_free(g_ctx, g_W16);
  printf("determinism: %.1f s\n", gu_now() - t0);
  fs_context_destroy(g_ctx);
  return fs_test_done("test_determinism");
}
