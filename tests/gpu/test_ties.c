/*
** test_ties.c: the kernels break exact ties, NaN logits and signed zeros as
** the key order says (fs_pack_key, fs_rng.h), bit for bit like the CPU
** reference: equal scores go to the smaller token, NaN scores lose to every
** number (and among themselves to the smaller token), -0 and +0 are equal.
**
** The pathwise test's random heads never produce exact ties, NaN logits or
** zeros, and it accepts any mismatch whose gap is within its fp32 bound, so a
** wrong tie-break passes it.  Here the logits are exact by construction: H is
** all ones and every row of W is (x, 0, ..., 0), so z[v] = x exactly (x in
** {4, -1, NaN, 0}; a zero row is all -0 or all +0, whose products are -0 or
** +0 and whose sum an accumulator may give either sign).  Per case, greedy
** rows must give the reference's token, logit and key exactly; sampled rows
** (T = 1) the reference's token (the candidates' logits tie, so the noise
** decides, far from any fp32 near-tie: checked).  The rows sit at every
** place a lane's fold can meet them: in one quad, across quads, lanes, tiles
** and chunks, in the partial last quad (V not a multiple of 4), with a
** vocab_offset that is not a multiple of 4.  Cases run on the built-in
** defaults, and once more per family (FS_TEST_FAMILY, tests/CMakeLists.txt).
**
** It can fail: with fs_pack_key ordering -0 below +0 (the key of earlier
** revisions) a kernel whose accumulator keeps the -0 of an all -0 row picks
** the later +0 row of case "zeros"; a fold that lets a later equal score
** replace the best picks the last of the tied rows of case "max".
*/
#include "fs_reference.h"
#include "gpu_family.h"
#include "gpu_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { X_LOW, X_MAX, X_NAN, X_NZERO, X_PZERO };

typedef struct tie_case {
  const char *name;
  int V;
  int64_t vocab_offset;
  int fill;           /* the value of the rows not listed */
  int rows[8], kinds[8];
  int n;              /* entries of rows/kinds */
} tie_case;

static const tie_case cases[] = {
    /* ties of the maximum in one quad (37, 38), in another tile (517), in
    ** the partial last quad (997 of V = 998); NaN rows before and between */
    {"max", 998, 0, X_LOW, {0, 36, 37, 38, 500, 517, 997}, {X_NAN, X_NAN, X_MAX, X_MAX, X_NAN, X_MAX, X_MAX}, 7},
    {"max_off", 998, 5, X_LOW, {0, 36, 37, 38, 500, 517, 997}, {X_NAN, X_NAN, X_MAX, X_MAX, X_NAN, X_MAX, X_MAX}, 7},
    /* the maximum is zero: -0 at 10, +0 at 11 and 900 */
    {"zeros", 1000, 0, X_LOW, {10, 11, 900}, {X_NZERO, X_PZERO, X_PZERO}, 3},
    {"zeros_rev", 1000, 3, X_LOW, {10, 11, 900}, {X_PZERO, X_NZERO, X_NZERO}, 3},
    /* NaN everywhere but two equal numbers far apart */
    {"nan_two", 40000, 0, X_NAN, {700, 39001}, {X_MAX, X_MAX}, 2},
    /* NaN everywhere: every key is a NaN key, the smallest token wins */
    {"nan_all", 1000, 0, X_NAN, {0}, {X_NAN}, 1},
};

#define TD 64 /* hidden size of every case */

static uint16_t enc(int dtype, int kind) {
  switch (kind) {
  case X_MAX: return gu_encode(dtype, 4.0f);
  case X_NAN: return dtype == FS_DTYPE_BF16 ? 0x7FC0u : 0x7E00u;
  case X_NZERO: return 0x8000u;
  case X_PZERO: return 0x0000u;
  default: return gu_encode(dtype, -1.0f);
  }
}

/* One case at batch B and temperature T (0: greedy), dtype. */
static void run(fs_context *ctx, const tie_case *c, int B, float T, int dtype) {
  gu_lmhead lm;
  memset(&lm, 0, sizeof lm);
  lm.B = B, lm.D = TD, lm.V = c->V, lm.dtype = dtype, lm.vocab_offset = c->vocab_offset;
  lm.hs = lm.ws = TD;
  lm.H = gu_malloc(sizeof(uint16_t) * (size_t)B * TD);
  lm.W = gu_malloc(sizeof(uint16_t) * (size_t)c->V * TD);
  for (int i = 0; i < B * TD; i++) lm.H[i] = gu_encode(dtype, 1.0f);
  for (int v = 0; v < c->V; v++) {
    int kind = c->fill;
    for (int i = 0; i < c->n; i++)
      if (c->rows[i] == v) kind = c->kinds[i];
    const uint16_t x = enc(dtype, kind);
    uint16_t *row = lm.W + (size_t)v * TD;
    row[0] = x;
    for (int k = 1; k < TD; k++) row[k] = kind == X_NZERO ? 0x8000u : 0x0000u;
  }
  gu_lmhead_upload(ctx, &lm);

  const fs_problem dp = gu_problem(&lm, 1), hp = gu_problem(&lm, 0);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = T;
  s.num_samples = 1;
  s.seed = 0x7469657300ull + (uint64_t)B;
  gu_outputs o;
  gu_outputs_alloc(ctx, &o, (size_t)B, 1, 1);
  char what[128];
  snprintf(what, sizeof what, "%s B=%d T=%g %s", c->name, B, (double)T, gu_dtype_name(dtype));
  if (gu_sample_fetch(ctx, &dp, &s, &o, NULL, what) == FS_OK) {
    int32_t *tok = gu_malloc(sizeof(int32_t) * (size_t)B);
    float *lg = gu_malloc(sizeof(float) * (size_t)B);
    uint64_t *key = gu_malloc(sizeof(uint64_t) * (size_t)B);
    const int st = fs_reference_sample(&hp, &s, tok, lg, key);
    CHECK_MSG(st == FS_OK, "%s: fs_reference_sample: %s", what, fs_last_error(NULL));
    long bad = 0;
    for (int b = 0; st == FS_OK && b < B; b++) {
      const int same_logit = (isnan(lg[b]) && isnan(o.h_logits[b])) || lg[b] == o.h_logits[b];
      const int ok = o.h_tokens[b] == tok[b] && same_logit && (T > 0.0f || o.h_keys[b] == key[b]);
      if (!ok && bad++ < 4)
        fprintf(stderr, "%s row %d: GPU token %d logit %a key %016llx, reference %d %a %016llx\n",
                what, b, o.h_tokens[b], (double)o.h_logits[b], (unsigned long long)o.h_keys[b],
                tok[b], (double)lg[b], (unsigned long long)key[b]);
      if (T > 0.0f && ok) { /* the noise decided: it must not have been close */
        fs_ref_result r;
        if (fs_reference_row(&hp, &s, b, 0, &r) == FS_OK && r.second_token >= 0 &&
            !isnan(r.second_score)) /* all NaN: the key order, not the noise, decided */
          CHECK_MSG(r.score - r.second_score > 1e-4, "%s row %d: a near-tie (%g)", what, b,
                    r.score - r.second_score);
      }
    }
    CHECK_MSG(bad == 0, "%s: %ld of %d rows differ from the reference", what, bad, B);
    free(tok);
    free(lg);
    free(key);
  }
  gu_outputs_free(ctx, &o);
  gu_lmhead_free(ctx, &lm);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  static const int batches[] = {5, 256}; /* narrow and wide batch tiles: few NVRTC compiles */
  int runs = 0;
  for (int dt = 0; dt < 2; dt++) {
    const int dtype = dt ? FS_DTYPE_FP16 : FS_DTYPE_BF16;
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
      fs_context *c = gu_family_context(ctx, dtype, batches[bi]);
      for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int sampled = !strncmp(cases[i].name, "nan", 3); /* also at T = 1 */
        run(c, &cases[i], batches[bi], 0.0f, dtype);
        if (sampled) run(c, &cases[i], batches[bi], 1.0f, dtype);
        runs += 1 + sampled;
      }
      gu_family_release(ctx, c);
    }
  }
  printf("test_ties: %d runs (greedy every case, sampled the NaN cases), bf16 and fp16, "
         "B = 5 and 256\n", runs);
  fs_context_destroy(ctx);
  return fs_test_done("test_ties");
}
