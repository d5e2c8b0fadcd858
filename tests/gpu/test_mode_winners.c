/*
** test_mode_winners.c: a bucket's tuned kernels per call mode (runtime/sample.c,
** tuned.c; tuning-db/store.h "mode").  One tuning database for (this GPU,
** bf16, D=256, V=65536, bucket 8) at today's generator revision names three
** different non-default mma variants with an 8-row batch tile, chosen by
** their workspace need at 64 samples: A (the smallest) the winner of sampled
** calls (mode token), G (the largest) of greedy calls, Q of FS_NOISE_GROUP16
** calls (each also measured slower in another mode, so a runtime that
** ignores the mode picks wrongly).  Checked:
**  1. fs_variant_name: T = 1 -> A; T = 0 with temperatures NULL -> G ("for
**     greedy calls"); T = 0 with per-row temperatures -> A (the host cannot
**     see them); under FS_NOISE_GROUP16: T = 1 -> Q, T = 0 -> G.  Without
**     the database every call gets the built-in default, and under
**     FS_VARIANT every call gets the forced variant.
**  2. The calls run, in a fresh context: after one fs_prepare (64 samples),
**     which must leave no message, a CUDA graph captures a greedy call (G)
**     and a per-row-greedy call (A) of 64 samples each (no FS_NOT_PREPARED:
**     prepare loaded G and sized the workspace for it, beyond A's need and
**     the 1 MiB minimum when the candidates allow, which the test prints);
**     replayed, both give the CPU reference's argmax tokens; a sampled call
**     (A) and a group16 call (Q) give the reference's tokens too (pathwise,
**     up to fp32 near-ties).
**  3. A greedy winner that cannot load is skipped (fs_prepare succeeds, no
**     message left, greedy calls run A), and a group16 winner equal to A
**     serves both.
** Case 1's T = 0 and group16 rows fail if the runtime ignores the mode;
** the per-row row fails if it guesses greedy from a device array; case 2's
** capture fails if prepare sized the workspace for the token kernel only.
** Also a `cpu` test, cpu/fake_mode_winners: under the fake driver of
** tests/fakecuda (FS_FAKE_CUDA set), which runs no kernel, all but the draws
** are checked.
*/
#include "fs_int.h"
#include "gen.h"
#include "gpu_store.h"
#include "gpu_graph.h"
#include "gpu_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TD 256
#define TV 65536
#define TB 8

static void add(fs_store *st, int64_t run, int mode, const char *variant, double us) {
  gs_add_ok(st, run, TD, TV, TB, mode, variant, NULL, us);
}

static void write_db(const char *path, const fs_context *ctx, const char *rev, const char *a,
                     const char *g, const char *q) {
  int64_t id = 0;
  fs_store *st = gs_begin(path, ctx, rev, &id);
  add(st, id, FS_STORE_MODE_TOKEN, a, 10.0);
  add(st, id, FS_STORE_MODE_TOKEN, g, 20.0);
  add(st, id, FS_STORE_MODE_TOKEN, q, 30.0);
  add(st, id, FS_STORE_MODE_GREEDY, g, 10.0);
  add(st, id, FS_STORE_MODE_GREEDY, a, 20.0);
  add(st, id, FS_STORE_MODE_GROUP16, q, 10.0);
  add(st, id, FS_STORE_MODE_GROUP16, a, 20.0);
  gs_end(st, id);
}

/* fs_variant_name for the test shape with scalar T (per_row: a non-NULL
** temperatures pointer, never read by fs_variant_name) under `noise`. */
static void name_of(fs_context *c, float T, int per_row, int noise, char *buf, size_t n) {
  fs_problem p;
  memset(&p, 0, sizeof p);
  p.batch = TB;
  p.hidden = TD;
  p.vocab = TV;
  p.dtype = FS_DTYPE_BF16;
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = T;
  s.temperatures = per_row ? (const float *)(uintptr_t)0x1000 : NULL;
  s.num_samples = 1;
  REQUIRE(fs_context_set_noise(c, noise) == FS_OK);
  const int st = fs_variant_name(c, &p, &s, buf, n);
  CHECK_MSG(st == FS_OK, "fs_variant_name: %s", fs_last_error(c));
}

static int starts(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0 && s[strlen(prefix)] == ' ';
}

/* Case 1 for one context; want[i] the variant expected for row i. */
static void check_names(fs_context *c, const char *const want[5], const char *what) {
  static const struct { float T; int per_row, noise; const char *call; } rows[5] = {
      {1.0f, 0, FS_NOISE_TOKEN, "T=1"},
      {0.0f, 0, FS_NOISE_TOKEN, "T=0"},
      {0.0f, 1, FS_NOISE_TOKEN, "per-row T"},
      {1.0f, 0, FS_NOISE_GROUP16, "group16 T=1"},
      {0.0f, 0, FS_NOISE_GROUP16, "group16 T=0"},
  };
  char got[512];
  for (int i = 0; i < 5; i++) {
    name_of(c, rows[i].T, rows[i].per_row, rows[i].noise, got, sizeof got);
    printf("  %-12s %-12s -> %s\n", what, rows[i].call, got);
    CHECK_MSG(starts(got, want[i]), "%s, %s call: ran %s, expected %s", what, rows[i].call, got,
              want[i]);
  }
  REQUIRE(fs_context_set_noise(c, FS_NOISE_TOKEN) == FS_OK);
}

/* The reference's tokens for lm at scalar T under noise (T = 0: the argmax,
** which per-row zero temperatures give too). */
static void reference(const gu_lmhead *lm, float T, int noise, int32_t *tok) {
  fs_problem hp = gu_problem(lm, 0);
  fs_sampling hs = {T, NULL, 1, 99, NULL, 5, NULL};
  const int st = fs_reference_sample_noise(&hp, &hs, noise, tok, NULL, NULL);
  REQUIRE(st == FS_OK);
}

/* o holds S samples per row; ref one token per row (S > 1: greedy calls,
** every sample the row's argmax). */
static void compare(const gu_outputs *o, int S, const int32_t *ref, const char *what) {
  if (gu_fake_driver()) return;
  int bad = 0;
  for (int b = 0; b < TB; b++)
    for (int k = 0; k < S; k++) bad += o->h_tokens[b * S + k] != ref[b];
  printf("  %-28s %d of %d draws as the reference\n", what, TB * S - bad, TB * S);
  CHECK_MSG(bad == 0, "%s: %d of %d draws differ from the CPU reference", what, bad, TB * S);
}

/* Case 2 in a fresh context c (reading the test's database): nothing is
** prepared before fs_prepare(sampled, S = GS samples), which must load the
** greedy winner and size the workspace for it (main picks G as the variant
** needing the most). */
#define GS 64
static void check_calls(fs_context *c) {
  gu_lmhead lm;
  gu_lmhead_init(&lm, TB, TD, TV, FS_DTYPE_BF16, 0, 0, 0, gu_w_scale(TD, 3.0), 0x5eed);
  gu_lmhead_upload(c, &lm);
  const fs_problem dp = gu_problem(&lm, 1);
  gu_outputs o1, o2;
  gu_outputs_alloc(c, &o1, TB * GS, 0, 0);
  gu_outputs_alloc(c, &o2, TB * GS, 0, 0);
  CUdeviceptr dz = gu_alloc(c, TB * sizeof(float));
  float zeros[TB] = {0};
  gu_upload(c, dz, zeros, sizeof zeros);
  fs_sampling greedy = {0.0f, NULL, GS, 99, NULL, 5, NULL};
  fs_sampling per_row = {1.0f, (const float *)gu_ptr(dz), GS, 99, NULL, 5, NULL};
  fs_sampling sampled = {1.0f, NULL, GS, 99, NULL, 5, NULL};
  REQUIRE(fs_prepare(c, &dp, &sampled) == FS_OK);
  CHECK_MSG(fs_last_error(c)[0] == 0, "fs_prepare left a message: %s", fs_last_error(c));
  sampled.num_samples = 1;
  int32_t ref[TB];

  CUstream stream = NULL;
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  gu_push(c);
  GU_CU(c, c->cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  GU_CU(c, c->cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  gu_pop(c);
  fs_outputs a1 = gu_outputs_api(&o1), a2 = gu_outputs_api(&o2);
  const int s1 = fs_sample(c, &dp, &greedy, &a1, (void *)stream);
  const int s2 = fs_sample(c, &dp, &per_row, &a2, (void *)stream);
  gu_push(c);
  const CUresult end = c->cu->cuStreamEndCapture(stream, &graph);
  gu_pop(c);
  CHECK_MSG(s1 == FS_OK && s2 == FS_OK && end == CUDA_SUCCESS,
            "capturing a greedy and a per-row call after fs_prepare: %s / %s (%s)",
            fs_status_string(s1), fs_status_string(s2), fs_last_error(c));
  if (s1 == FS_OK && s2 == FS_OK && end == CUDA_SUCCESS) {
    gu_outputs_poison(c, &o1);
    gu_outputs_poison(c, &o2);
    gu_push(c);
    GU_CU(c, gu_graph_instantiate(c, &exec, graph));
    GU_CU(c, c->cu->cuGraphLaunch(exec, stream));
    GU_CU(c, c->cu->cuStreamSynchronize(stream));
    gu_pop(c);
    gu_outputs_fetch(c, &o1);
    gu_outputs_fetch(c, &o2);
    gu_outputs_check(&o1, "graph, greedy call");
    gu_outputs_check(&o2, "graph, per-row greedy call");
    reference(&lm, 0.0f, FS_NOISE_TOKEN, ref);
    compare(&o1, GS, ref, "graph: greedy call (G)");
    compare(&o2, GS, ref, "graph: per-row greedy (A)");
  }
  gu_push(c);
  if (exec) c->cu->cuGraphExecDestroy(exec);
  if (graph) c->cu->cuGraphDestroy(graph);
  c->cu->cuStreamDestroy(stream);
  gu_pop(c);

  gu_outputs o3; /* one sample per row */
  gu_outputs_alloc(c, &o3, TB, 0, 0);
  if (gu_sample_fetch(c, &dp, &sampled, &o3, NULL, "sampled call") == FS_OK) {
    reference(&lm, 1.0f, FS_NOISE_TOKEN, ref);
    compare(&o3, 1, ref, "sampled call (A)");
  }
  REQUIRE(fs_context_set_noise(c, FS_NOISE_GROUP16) == FS_OK);
  if (gu_sample_fetch(c, &dp, &sampled, &o3, NULL, "group16 call") == FS_OK) {
    reference(&lm, 1.0f, FS_NOISE_GROUP16, ref);
    compare(&o3, 1, ref, "group16 call (Q)");
  }
  REQUIRE(fs_context_set_noise(c, FS_NOISE_TOKEN) == FS_OK);
  gu_free(c, dz);
  gu_outputs_free(c, &o1);
  gu_outputs_free(c, &o2);
  gu_outputs_free(c, &o3);
  gu_lmhead_free(c, &lm);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  char err[768], db[256];
  setenv("FS_DEFAULTS_DB", "", 1); /* no shipped defaults: only the test's database */
  unsetenv("FS_VARIANT");
  fs_gen *g = NULL;
  fs_variant *list = NULL, dflt;
  int n = 0;
  gs_variants(ctx, TB, TD, TV, &g, &list, &n, &dflt);
  /* Up to six candidates, by their workspace need at GS samples: A the
  ** smallest, G the largest, Q another. */
  const fs_variant *cand[6];
  size_t need[6];
  int nc = 0;
  if (!ctx->gen) REQUIRE(fs_gen_open(&ctx->gen, err, sizeof err) == FS_OK); /* fs_kernel_load's */
  gu_push(ctx);
  for (int i = 0; i < n && nc < 6; i++)
    if (gs_alt_mma(&list[i], &dflt)) {
      fs_kernel *k = NULL;
      REQUIRE(fs_kernel_load(ctx, &list[i], &k) == FS_OK);
      need[nc] = fs_workspace_need(ctx, k, TB, TV, GS);
      cand[nc++] = &list[i];
      fs_kernel_unload(ctx, k);
    }
  gu_pop(ctx);
  REQUIRE(nc >= 3);
  int ia = 0, ig = 0;
  for (int i = 1; i < nc; i++) {
    if (need[i] < need[ia]) ia = i;
    if (need[i] > need[ig]) ig = i;
  }
  if (ig == ia) ig = (ia + 1) % nc;
  const int iq = (ia != 0 && ig != 0) ? 0 : (ia != 1 && ig != 1) ? 1 : 2;
  const char *A = cand[ia]->name, *G = cand[ig]->name, *Q = cand[iq]->name;
  printf("token winner A %s (workspace %zu B at S=%d)\ngreedy winner G %s (%zu B)\n"
         "group16 winner Q %s\ndefault %s\n", A, need[ia], GS, G, need[ig], Q, dflt.name);
  if (need[ig] <= need[ia] || need[ig] <= ((size_t)1 << 20))
    printf("note: G needs no more workspace than A (or than the 1 MiB minimum): the "
           "capture does not test the sizing for the greedy kernel\n");
  snprintf(db, sizeof db, "/tmp/fs-test-modes-%d.db", (int)getpid());
  write_db(db, ctx, fs_gen_revision(g), A, G, Q);

  setenv("FS_TUNING_DB", db, 1);
  fs_context *c = NULL;
  REQUIRE(fs_context_create(0, &c) == FS_OK);
  const char *const want[5] = {A, G, A, Q, G};
  check_names(c, want, "tuned");
  fs_context_destroy(c);
  REQUIRE(fs_context_create(0, &c) == FS_OK);
  check_calls(c);
  fs_context_destroy(c);

  /* A mode winner that cannot load (a name the generator does not know) is
  ** skipped: fs_prepare succeeds, leaves no message, and greedy calls run the
  ** token winner; a mode winner equal to the token winner serves both. */
  {
    int64_t id = 0;
    fs_store *st = gs_begin(db, ctx, fs_gen_revision(g), &id);
    add(st, id, FS_STORE_MODE_TOKEN, A, 10.0);
    add(st, id, FS_STORE_MODE_GREEDY, "fsamp_bf16_sm90a_mma_no_such_variant", 5.0);
    add(st, id, FS_STORE_MODE_GROUP16, A, 10.0);
    gs_end(st, id);
    REQUIRE(fs_context_create(0, &c) == FS_OK);
    const char *const fallback[5] = {A, A, A, A, A};
    check_names(c, fallback, "unloadable");
    CHECK_MSG(fs_last_error(c)[0] == 0, "a skipped mode winner left a message: %s",
              fs_last_error(c));
    fs_context_destroy(c);
  }
  write_db(db, ctx, fs_gen_revision(g), A, G, Q);

  setenv("FS_TUNING_DB", "off", 1);
  REQUIRE(fs_context_create(0, &c) == FS_OK);
  const char *const none[5] = {dflt.name, dflt.name, dflt.name, dflt.name, dflt.name};
  check_names(c, none, "no database");
  fs_context_destroy(c);

  setenv("FS_TUNING_DB", db, 1);
  setenv("FS_VARIANT", Q, 1);
  REQUIRE(fs_context_create(0, &c) == FS_OK);
  const char *const forced[5] = {Q, Q, Q, Q, Q};
  check_names(c, forced, "FS_VARIANT");
  fs_context_destroy(c);
  unsetenv("FS_VARIANT");

  gs_remove_db(db);
  free(list);
  fs_gen_close(g);
  fs_context_destroy(ctx);
  return fs_test_done("test_mode_winners");
}
