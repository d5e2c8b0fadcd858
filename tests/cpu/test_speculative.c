// fs-test-timeout: 120
/*
** test_speculative.c: speculative decoding with the same noise
** (docs/design.md, "Speculative decoding with the same noise"), on the CPU
** reference, which the GPU tests hold the kernels to token for token.
**
** A toy model: the hidden state at position j is row tok[j - 1] of a random
** embedding E [V, D], the target's LM head W [V, D], the draft's W plus a
** small perturbation.  Plain decoding draws position j with the target alone,
** one row (per-row seed s, offset j).  Speculative decoding drafts K tokens
** one at a time with the draft head (the same seed, offset = position), then
** verifies the K + 1 positions in one call of K + 1 rows (row i: the state of
** the prefix it extends, seed s, offset pos + i), accepts draft tokens while
** each equals the target's and emits the target's at the first difference.
** Checked, for T = 1 and T = 0.7 with top_p 0.9 (the options the same in
** every call), K = 4, 96 tokens, three seeds:
**  - the speculative sequence is plain decoding's, token for token;
**  - the draft helps: at least a third of the draft tokens are accepted;
**  - the test can fail: the same verification with every row at the first
**    position's offset, or with a scalar seed (the row index enters the
**    noise), gives another sequence.
*/
#include "fs_reference.h"
#include "fs_test.h"
#include "ref_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { V = 1000, D = 64, K = 4, N = 96 };

typedef struct toy {
  uint16_t *e, *w, *wd; /* embedding, target head, draft head: [V, D] bf16 */
  float T;
  const fs_options *opt;
  uint64_t seed;
} toy;

/* What a verification call gets wrong on purpose (the test must catch it). */
enum { RIGHT, ONE_OFFSET, SCALAR_SEED };

/* Draws rows [0, B) of head w: row i's state is E[prev[i]], its offset
** offs[i]; tokens into out. */
static void draw(const toy *m, const uint16_t *w, int B, const int32_t *prev,
                 const uint64_t *offs, int how, int32_t *out) {
  uint16_t h[(K + 1) * D];
  uint64_t seeds[K + 1], o[K + 1];
  for (int i = 0; i < B; i++) {
    memcpy(h + i * D, m->e + (size_t)prev[i] * D, sizeof(uint16_t) * D);
    seeds[i] = m->seed;
    o[i] = how == ONE_OFFSET ? offs[0] : offs[i];
  }
  const fs_problem p = {.batch = B, .hidden = D, .vocab = V, .dtype = FS_DTYPE_BF16,
                        .hidden_states = h, .weight = w};
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = m->T;
  s.num_samples = 1;
  s.seed = m->seed;
  s.seeds = how == SCALAR_SEED ? NULL : seeds;
  s.offsets = o;
  REQUIRE(fs_reference_sample_ex(&p, &s, FS_NOISE_TOKEN, m->opt, out, NULL, NULL) == FS_OK);
}

/* Plain decoding: seq[0] given, seq[1 .. n] drawn one at a time. */
static void plain(const toy *m, int32_t *seq, int n) {
  for (int j = 1; j <= n; j++) {
    const uint64_t off = (uint64_t)j;
    draw(m, m->w, 1, &seq[j - 1], &off, RIGHT, &seq[j]);
  }
}

/* Speculative decoding of seq[1 .. n]; returns the draft tokens accepted
** (and their count proposed in *proposed). */
static int speculative(const toy *m, int32_t *seq, int n, int how, int *proposed) {
  int pos = 1, accepted = 0;
  *proposed = 0;
  while (pos <= n) {
    int32_t prev[K + 1], d[K], y[K + 1];
    uint64_t offs[K + 1];
    prev[0] = seq[pos - 1];
    for (int i = 0; i < K; i++) { /* the draft, a token at a time */
      offs[i] = (uint64_t)(pos + i);
      draw(m, m->wd, 1, &prev[i], &offs[i], RIGHT, &d[i]);
      prev[i + 1] = d[i];
    }
    offs[K] = (uint64_t)(pos + K);
    draw(m, m->w, K + 1, prev, offs, how, y); /* the target verifies K + 1 positions */
    int a = 0;
    while (a < K && d[a] == y[a]) a++;
    for (int i = 0; i < a && pos <= n; i++) seq[pos++] = d[i];
    if (pos <= n) seq[pos++] = y[a];
    accepted += a;
    *proposed += K;
  }
  return accepted;
}

static void run(float T, const fs_options *opt, uint64_t seed) {
  unsigned long long st = 0x73706563ull ^ seed;
  toy m = {ref_xalloc(sizeof(uint16_t) * V * D), ref_xalloc(sizeof(uint16_t) * V * D),
           ref_xalloc(sizeof(uint16_t) * V * D), T, opt, seed};
  const double sc = ref_scale_for_sd(2.0, D);
  ref_fill(m.e, FS_DTYPE_BF16, V, D, D, -sc, sc, &st);
  ref_fill(m.w, FS_DTYPE_BF16, V, D, D, -sc, sc, &st);
  for (int i = 0; i < V * D; i++) /* the draft: the target's head, perturbed by ~10% */
    m.wd[i] = ref_encode(FS_DTYPE_BF16, ref_decode(FS_DTYPE_BF16, m.w[i]) +
                                            0.1 * sc * fs_test_uniform(&st));
  int32_t want[N + 1], got[N + 1], bad[N + 1];
  want[0] = got[0] = bad[0] = 7;
  plain(&m, want, N);
  int proposed = 0;
  const int accepted = speculative(&m, got, N, RIGHT, &proposed);
  int differ = 0;
  for (int j = 1; j <= N; j++) differ += got[j] != want[j];
  char what[96];
  snprintf(what, sizeof what, "T=%g%s seed=%llu", (double)T, opt ? " top_p 0.9" : "",
           (unsigned long long)seed);
  CHECK_MSG(differ == 0, "%s: %d of %d speculative tokens differ from plain decoding's", what,
            differ, N);
  CHECK_MSG(3 * accepted >= proposed, "%s: only %d of %d draft tokens accepted", what,
            accepted, proposed);
  int wrong[2] = {0, 0};
  for (int how = ONE_OFFSET; how <= SCALAR_SEED; how++) {
    int pr;
    speculative(&m, bad, N, how, &pr);
    for (int j = 1; j <= N; j++) wrong[how - 1] += bad[j] != want[j];
  }
  CHECK_MSG(wrong[0] > 0 && wrong[1] > 0, "%s: a wrong verification still gives plain "
            "decoding's tokens (one offset: %d differ, scalar seed: %d)", what, wrong[0],
            wrong[1]);
  printf("%s: %d tokens, plain decoding's; %d of %d draft tokens accepted; a wrong "
         "verification differs at %d (one offset) and %d (scalar seed) positions\n",
         what, N, accepted, proposed, wrong[0], wrong[1]);
  free(m.e);
  free(m.w);
  free(m.wd);
}

int main(void) {
  fs_options topp;
  memset(&topp, 0, sizeof topp);
  topp.size = sizeof topp;
  topp.top_p = 0.9f;
  for (uint64_t seed = 1; seed <= 3; seed++) {
    run(1.0f, NULL, seed);
    run(0.7f, &topp, seed);
  }
  return fs_test_done("test_speculative");
}
