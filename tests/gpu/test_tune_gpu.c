// fs-test-timeout: 900
/*
** test_tune_gpu: fs-tune end to end on a small shape (D=1024, V=32000,
** buckets 1 and 8, seven variants each), with four planted faults:
**   FS_TUNE_INJECT_WRONG  one variant's tokens are corrupted after it runs,
**   FS_TUNE_INJECT_CRASH  one variant's job kills the worker (SIGSEGV),
**   FS_TUNE_INJECT_HANG   one variant's job never answers (--timeout 5),
**   FS_TUNE_INJECT_FAULT  one variant reads W at a bad address: a real GPU
**                         fault that leaves the worker's context unusable.
** Checks: fs-tune exits 0; the store records 'wrong' and 'run-failed' for
** them and none of them wins; each bucket has an exact winner with a stored
** cubin; that cubin, loaded with fs_kernel_load_cubin and launched with
** fs_launch on a fresh problem, draws the CPU reference's tokens (a
** different token only on a near-tie, judged by exact scores), and so does
** fs_sample itself with FS_TUNING_DB pointing at the database, where the
** runtime must report that it took the tuned winner; a rerun skips
** everything measured and keeps the winners; the CSV has the fault rows; a
** greedy run (FS_TUNE_GREEDY=1) of bucket 8 measures anew, as mode greedy,
** and adds a greedy winner beside the unchanged sampled one.
** The victims are taken from a --dry-run of the same plan: the 2nd to 5th
** compiled variants of bucket 8 (the 1st is the default, the oracle).
*/
#include "fs_test.h"

#include "fs_half.h"
#include "fs_tools.h"
#include "fs_rng.h"
#include "gen.h"
#include "store.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#define D 1024
#define V 32000

static char bin[4096], tmp[4096];

typedef fs_test_proc result;

/* Runs fs-tune in tmp with args; env is a NULL-terminated list of
** "NAME=value" to set (the FS_TUNE_INJECT_* hooks are unset otherwise). */
static result run(const char *const *env, const char *const *args) {
  const char *all[16] = {"FS_TUNE_INJECT_WRONG", "FS_TUNE_INJECT_CRASH", "FS_TUNE_INJECT_HANG",
                         "FS_TUNE_INJECT_FAULT"};
  int n = 4;
  for (int i = 0; env && env[i] && n < 15; i++) all[n++] = env[i];
  all[n] = NULL;
  return fs_test_run(bin, tmp, all, args);
}

/* ---- the store's view ------------------------------------------------------- */
typedef struct outcome_scan {
  const char *variant;
  int bucket;
  int outcome; /* of the last matching row, -1 if none */
  int rows;
} outcome_scan;

static int on_meas(void *arg, const fs_store_run *r, const fs_store_measurement *m) {
  outcome_scan *s = arg;
  (void)r;
  if (strcmp(m->variant, s->variant) == 0 && m->bucket == s->bucket) {
    s->outcome = m->outcome;
    s->rows++;
  }
  return 0;
}

static int recorded_outcome(fs_store *st, const char *variant, int bucket) {
  outcome_scan s = {variant, bucket, -1, 0};
  fs_store_filter f;
  memset(&f, 0, sizeof f);
  f.variant = variant;
  CHECK(fs_store_list_measurements(st, &f, on_meas, &s) == FS_OK);
  return s.outcome;
}

/* ---- running a stored winner ------------------------------------------------ */
#define CU(call)                                                            \
  do {                                                                      \
    CUresult r_ = (call);                                                   \
    if (r_ != CUDA_SUCCESS) {                                               \
      fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #call, \
              (int)r_);                                                     \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

static double dot(const uint16_t *h, const uint16_t *w) {
  double acc = 0;
  for (int i = 0; i < D; i++) acc += (double)fs_bf16_to_float(h[i]) * fs_bf16_to_float(w[i]);
  return acc;
}

/* Random host H [B, D] and W [V, D] in bf16 (logits of a few units). */
static void make_data(int B, unsigned long long seed, uint16_t **H, uint16_t **W) {
  *H = malloc((size_t)B * D * 2);
  *W = malloc((size_t)V * D * 2);
  REQUIRE(*H && *W);
  for (size_t i = 0; i < (size_t)B * D; i++) (*H)[i] = fs_float_to_bf16((float)fs_test_uniform(&seed));
  for (size_t i = 0; i < (size_t)V * D; i++)
    (*W)[i] = fs_float_to_bf16((float)(fs_test_uniform(&seed) * 3.0 * 3.0 / sqrt((double)D)));
}

/* Rows where the GPU token differs from the reference's by more than a
** near-tie (exact perturbed scores within 1e-3 relative). */
static int bad_rows(const uint16_t *H, const uint16_t *W, const fs_sampling *sm, const int32_t *tok,
                    const int32_t *ref, int B, const char *what) {
  int bad = 0;
  for (int b = 0; b < B; b++) {
    if (tok[b] == ref[b]) continue;
    if (tok[b] < 0 || tok[b] >= V) {
      fprintf(stderr, "%s row %d: token %d out of range\n", what, b, tok[b]);
      bad++;
      continue;
    }
    double sg = dot(H + (size_t)b * D, W + (size_t)tok[b] * D) / sm->temperature +
                fs_noise(sm->seed, sm->offset, (uint32_t)tok[b], 0, (uint32_t)b + 1);
    double sr = dot(H + (size_t)b * D, W + (size_t)ref[b] * D) / sm->temperature +
                fs_noise(sm->seed, sm->offset, (uint32_t)ref[b], 0, (uint32_t)b + 1);
    if (sr - sg > 1e-3 * (1 + fabs(sr))) {
      fprintf(stderr, "%s row %d: drew %d (score %.6f), the reference %d (%.6f)\n", what, b,
              tok[b], sg, ref[b], sr);
      bad++;
    }
  }
  return bad;
}

/* Draws p's tokens into o's device buffer; failures are CHECKed, not returned. */
typedef void (*draw_fn)(fs_context *ctx, const void *arg, const fs_problem *p,
                        const fs_sampling *sm, const fs_outputs *o);

/* Draws B rows of a fresh problem (data from seed) with draw; returns bad_rows vs the reference. */
static int check_draw(fs_context *ctx, int B, unsigned long long seed, draw_fn draw,
                      const void *arg, const char *what) {
  const fs_cu_api *cu = ctx->cu;
  CUcontext dummy;
  uint16_t *H, *W;
  make_data(B, seed, &H, &W);
  int32_t *tok = malloc((size_t)B * 4), *ref = malloc((size_t)B * 4);
  REQUIRE(tok && ref);
  CUdeviceptr dH, dW, dT;
  CU(cu->cuCtxPushCurrent(ctx->cu_ctx));
  CU(cu->cuMemAlloc(&dH, (size_t)B * D * 2));
  CU(cu->cuMemAlloc(&dW, (size_t)V * D * 2));
  CU(cu->cuMemAlloc(&dT, (size_t)B * 4));
  CU(cu->cuMemcpyHtoD(dH, H, (size_t)B * D * 2));
  CU(cu->cuMemcpyHtoD(dW, W, (size_t)V * D * 2));
  CU(cu->cuMemsetD8(dT, 0xFF, (size_t)B * 4));
  cu->cuCtxPopCurrent(&dummy);
  fs_problem p = {B, D, V, 0, FS_DTYPE_BF16, (void *)(uintptr_t)dH, 0, (void *)(uintptr_t)dW, 0};
  fs_sampling sm = {0.8f, NULL, 1, 4242, NULL, 3, NULL};
  fs_outputs o = {(int32_t *)(uintptr_t)dT, NULL, NULL};
  draw(ctx, arg, &p, &sm, &o);
  CU(cu->cuCtxPushCurrent(ctx->cu_ctx));
  CU(cu->cuCtxSynchronize());
  CU(cu->cuMemcpyDtoH(tok, dT, (size_t)B * 4));
  CU(cu->cuMemFree(dH));
  CU(cu->cuMemFree(dW));
  CU(cu->cuMemFree(dT));
  cu->cuCtxPopCurrent(&dummy);
  fs_problem hp = p;
  hp.hidden_states = H;
  hp.weight = W;
  REQUIRE(fs_reference_sample(&hp, &sm, ref, NULL, NULL) == FS_OK);
  int bad = bad_rows(H, W, &sm, tok, ref, B, what);
  free(H); free(W); free(tok); free(ref);
  return bad;
}

/* check_draw's draw for run_winner: fs_launch of the kernel arg (its context current). */
static void launch_kernel(fs_context *ctx, const void *arg, const fs_problem *p,
                          const fs_sampling *sm, const fs_outputs *o) {
  const int st = fs_launch(ctx, arg, p, sm, o, NULL);
  CHECK_MSG(st == FS_OK, "fs_launch: %s", fs_last_error(ctx));
}

/* Loads the stored cubin of `c`, samples B rows of a fresh problem with it
** and compares with the CPU reference.  Returns the number of bad rows. */
static int run_winner(fs_context *ctx, fs_gen *g, const fs_store_choice *c, int B) {
  char err[512];
  fs_variant v;
  REQUIRE(fs_gen_parse(g, c->variant, &v, err, sizeof err) == FS_OK);
  const fs_cu_api *cu = ctx->cu;
  CUcontext dummy;
  CU(cu->cuCtxPushCurrent(ctx->cu_ctx));
  fs_kernel *k = NULL;
  int st = fs_kernel_load_cubin(ctx, &v, c->cubin, &k);
  CHECK_MSG(st == FS_OK, "loading %s: %s", c->variant, fs_last_error(ctx));
  if (st) {
    cu->cuCtxPopCurrent(&dummy);
    return B;
  }
  REQUIRE(fs_workspace_reserve(ctx, fs_workspace_need(ctx, k, B, V, 1)) == FS_OK);
  const int bad = check_draw(ctx, B, 777 + (unsigned long long)B, launch_kernel, k, c->variant);
  fs_kernel_unload(ctx, k);
  cu->cuCtxPopCurrent(&dummy);
  return bad;
}

/* check_draw's draw for run_public: checks the plan is the tuned winner arg, then fs_sample. */
static void sample_public(fs_context *ctx, const void *arg, const fs_problem *p,
                          const fs_sampling *sm, const fs_outputs *o) {
  const char *winner = arg;
  char name[320] = "";
  CHECK_MSG(fs_variant_name(ctx, p, sm, name, sizeof name) == FS_OK, "%s", fs_last_error(ctx));
  printf("B=%d through fs_sample: %s\n", (int)p->batch, name);
  CHECK_MSG(strstr(name, winner) && strstr(name, "tuning database, tuned"),
            "B=%d: the runtime chose %s, the tuned winner is %s", (int)p->batch, name, winner);
  CHECK_MSG(fs_sample(ctx, p, sm, o, NULL) == FS_OK, "fs_sample: %s", fs_last_error(ctx));
}

/* Samples through the public API with FS_TUNING_DB = db_path: the plan must
** say the kernel came from the tuning database and be `winner`, and the
** tokens must be the CPU reference's (up to near-ties).  Returns bad rows. */
static int run_public(const char *db_path, const char *winner, int B) {
  setenv("FS_TUNING_DB", db_path, 1);
  setenv("FS_DEFAULTS_DB", "", 1);
  fs_context *ctx = NULL;
  REQUIRE(fs_context_create(0, &ctx) == FS_OK);
  const int bad = check_draw(ctx, B, 991 + (unsigned long long)B, sample_public, winner,
                             "fs_sample");
  fs_context_destroy(ctx);
  unsetenv("FS_TUNING_DB");
  unsetenv("FS_DEFAULTS_DB");
  return bad;
}

/* The compiled variants a dry run lists, in order (names into buf). */
static int dry_run_names(char names[][160], int max) {
  result r = run(NULL, (const char *const[]){"--dry-run", "--shape", "D=1024,V=32000", "--batch",
                                             "8", "--max-variants", "7", NULL});
  CHECK_MSG(r.code == 0, "dry run: exit %d\n%s\n%s", r.code, r.out, r.err);
  int n = 0;
  for (const char *p = r.out; n < max && (p = strstr(p, "  compiled fsamp_")) != NULL; p++) {
    if (sscanf(p + 11, "%159s", names[n]) == 1) n++;
  }
  fs_test_proc_free(&r);
  return n;
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  const char *bd = getenv("FS_TEST_BINARY_DIR");
  REQUIRE(bd != NULL);
  snprintf(bin, sizeof bin, "%s/fs-tune", bd);
  REQUIRE(access(bin, X_OK) == 0);
  const char *td = getenv("TMPDIR");
  snprintf(tmp, sizeof tmp, "%s/fs-tune-gpu-XXXXXX", td && *td ? td : "/tmp");
  REQUIRE(mkdtemp(tmp) != NULL);
  printf("binary %s, scratch %s, device %s\n", bin, tmp, ctx->device_name);

  char names[8][160];
  int n = dry_run_names(names, 8);
  REQUIRE(n >= 5);
  const char *wrong = names[1], *crash = names[2], *hang = names[3], *fault = names[4];
  printf("planted: wrong %s, crash %s, hang %s, fault %s\n", wrong, crash, hang, fault);
  char e1[300], e2[300], e3[300], e4[300];
  snprintf(e1, sizeof e1, "FS_TUNE_INJECT_WRONG=%s", wrong);
  snprintf(e2, sizeof e2, "FS_TUNE_INJECT_CRASH=%s", crash);
  snprintf(e3, sizeof e3, "FS_TUNE_INJECT_HANG=%s", hang);
  snprintf(e4, sizeof e4, "FS_TUNE_INJECT_FAULT=%s", fault);
  const char *tune_args[] = {"--shape", "D=1024,V=32000", "--batch", "1,8", "--max-variants",
                             "7", "--db", "t.db", "--timeout", "5", "--report", "rep.csv",
                             NULL};
  double t0 = fs_tools_now();
  result r = run((const char *const[]){e1, e2, e3, e4, NULL}, tune_args);
  printf("first run: exit %d in %.1f s\n%s\n%s\n", r.code, (fs_tools_now() - t0) / 1e3, r.out,
         r.err);
  CHECK(r.code == 0);
  CHECK(strstr(r.out, "winners for") != NULL);
  fs_test_proc_free(&r);

  char path[4600], err[512], arch[16];
  snprintf(path, sizeof path, "%s/t.db", tmp);
  snprintf(arch, sizeof arch, "sm_%d", ctx->arch);
  fs_store *st = NULL;
  REQUIRE(fs_store_open(path, FS_STORE_READONLY | FS_STORE_QUICK_CHECK, &st, err, sizeof err) ==
          FS_OK);
  fs_gen *g = NULL;
  REQUIRE(fs_gen_open(&g, err, sizeof err) == FS_OK);
  static const int buckets[2] = {1, 8};
  char winners[2][160];
  for (int i = 0; i < 2; i++) {
    const int bucket = buckets[i];
    CHECK_MSG(recorded_outcome(st, wrong, bucket) == FS_STORE_OUTCOME_WRONG,
              "B=%d: %s recorded as %d, not wrong", bucket, wrong,
              recorded_outcome(st, wrong, bucket));
    CHECK_MSG(recorded_outcome(st, crash, bucket) == FS_STORE_OUTCOME_RUN_FAILED,
              "B=%d: %s (crash) recorded as %d", bucket, crash, recorded_outcome(st, crash, bucket));
    CHECK_MSG(recorded_outcome(st, hang, bucket) == FS_STORE_OUTCOME_RUN_FAILED,
              "B=%d: %s (hang) recorded as %d", bucket, hang, recorded_outcome(st, hang, bucket));
    CHECK_MSG(recorded_outcome(st, fault, bucket) == FS_STORE_OUTCOME_RUN_FAILED,
              "B=%d: %s (fault) recorded as %d", bucket, fault,
              recorded_outcome(st, fault, bucket));
    fs_store_key key = {ctx->device_name, arch, FS_DTYPE_BF16, D, V, bucket, FS_STORE_MODE_TOKEN};
    fs_store_choice c;
    memset(&c, 0, sizeof c);
    REQUIRE(fs_store_winner(st, &key, &c) == FS_OK);
    CHECK_MSG(c.match == FS_STORE_MATCH_EXACT, "B=%d: no winner", bucket);
    snprintf(winners[i], sizeof winners[i], "%s", c.variant);
    if (c.match != FS_STORE_MATCH_EXACT) continue;
    printf("B=%d winner %s %.2f us (%d candidates)\n", bucket, c.variant, c.median_us,
           c.n_candidates);
    CHECK(strcmp(c.variant, wrong) && strcmp(c.variant, crash) && strcmp(c.variant, hang) &&
          strcmp(c.variant, fault));
    CHECK(c.n_candidates >= 1 && c.median_us > 0);
    CHECK_MSG(c.has_cubin && c.cubin && c.cubin_size > 0, "B=%d: the winner has no cubin",
              bucket);
    if (c.cubin) {
      const int B = bucket == 1 ? 1 : 5;
      CHECK_MSG(run_winner(ctx, g, &c, B) == 0, "B=%d: the stored winner draws wrong tokens",
                bucket);
    }
    fs_store_choice_clear(&c);
  }
  fs_store_close(st);

  /* The runtime itself picks the tuned winners from the database. */
  CHECK_MSG(run_public(path, winners[0], 1) == 0, "B=1 through fs_sample: wrong tokens");
  CHECK_MSG(run_public(path, winners[1], 7) == 0, "B=7 through fs_sample: wrong tokens");

  /* The report lists the faults. */
  snprintf(path, sizeof path, "%s/rep.csv", tmp);
  char *csv = fs_test_slurp(path);
  CHECK(strstr(csv, ",wrong,") != NULL && strstr(csv, ",run-failed,") != NULL);
  CHECK(strstr(csv, ",ok,") != NULL);
  free(csv);

  /* A rerun measures nothing new and keeps the winners. */
  r = run(NULL, tune_args);
  CHECK_MSG(r.code == 0, "rerun: exit %d\n%s\n%s", r.code, r.out, r.err);
  CHECK_MSG(strstr(r.out, "B=1: 0 measured") && strstr(r.out, "B=8: 0 measured"),
            "rerun measured again:\n%s", r.out);
  CHECK(strstr(r.out, winners[0]) != NULL && strstr(r.out, winners[1]) != NULL);
  fs_test_proc_free(&r);

  /* A greedy run (FS_TUNE_GREEDY=1) measures again, as mode greedy: its rows
  ** and winner sit beside the sampled ones, which do not change. */
  const char *greedy_args[] = {"--shape", "D=1024,V=32000", "--batch", "8", "--max-variants",
                               "3", "--db", "t.db", "--timeout", "5", NULL};
  r = run((const char *const[]){"FS_TUNE_GREEDY=1", NULL}, greedy_args);
  CHECK_MSG(r.code == 0, "greedy run: exit %d\n%s\n%s", r.code, r.out, r.err);
  CHECK_MSG(strstr(r.out, "B=8: 0 measured") == NULL, "the greedy run measured nothing:\n%s",
            r.out);
  fs_test_proc_free(&r);
  snprintf(path, sizeof path, "%s/t.db", tmp);
  REQUIRE(fs_store_open(path, FS_STORE_READONLY, &st, err, sizeof err) == FS_OK);
  for (int mode = FS_STORE_MODE_TOKEN; mode <= FS_STORE_MODE_GREEDY; mode += 2) {
    fs_store_key key = {ctx->device_name, arch, FS_DTYPE_BF16, D, V, 8, mode};
    fs_store_choice c;
    memset(&c, 0, sizeof c);
    REQUIRE(fs_store_winner(st, &key, &c) == FS_OK);
    printf("B=8 %s winner: %s\n", fs_store_mode_name(mode),
           c.match == FS_STORE_MATCH_EXACT ? c.variant : "(none)");
    CHECK_MSG(c.match == FS_STORE_MATCH_EXACT && c.mode == mode, "B=8: no %s winner",
              fs_store_mode_name(mode));
    if (mode == FS_STORE_MODE_TOKEN)
      CHECK_MSG(!strcmp(c.variant, winners[1]), "the greedy run changed the sampled winner: %s",
                c.variant);
    fs_store_choice_clear(&c);
  }
  fs_store_close(st);

  fs_gen_close(g);
  fs_context_destroy(ctx);
  if (!fs_test_failures) {
    char cmd[4700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
  }
  return fs_test_done("test_tune_gpu");
}
