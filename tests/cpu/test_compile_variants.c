// fs-test-timeout: 2700
/*
** test_compile_variants: the generator enumerates its whole design space for
** sm_80, sm_90a and sm_100 in bf16 and fp16, and NVRTC compiles every
** distinct source (variants differing only in host-side parameters such as
** the grid share one), in parallel.  Prints registers, stack and spills per
** variant; a variant that spills is flagged (and counted), a compile failure
** fails the test with its log, and so does a variant whose PTX loads or
** stores through a generic address (every access names its space, perf-notes
** 15a; the reduction's stores name it too, also at sm_100, where NVRTC 13.0
** did not infer it), or whose cubin holds another kernel than fsamp_main (the
** small kernels that finish a call are a module of the context's own,
** templates/fsamp_reduce.cu: test_own_compile).
** Also checks that names are deterministic and parse back to themselves, and
** that broken names are rejected.
**
** FS_COMPILE_SAMPLE=N compiles only every N-th source (for quick local runs).
*/
#include "fs_test.h"

#include "fs_nvrtc.h"
#include "gen.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct job {
  fs_variant v;
  char *src;
  unsigned long long key;
  int dup_of;     /* index of the job with the same source, or -1 */
  int status, registers, spills, stack, generic, kernels_ok;
  double seconds;
  char err[512];
  char *log;
} job;

static job *jobs;
static int njobs, next_job;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Is name's symbol in the cubin's bytes (its string table)? */
static int has_symbol(const fs_cubin *c, const char *name) {
  const size_t n = strlen(name);
  for (size_t i = 0; i + n < c->size; i++)
    if (!memcmp(c->data + i, name, n) && c->data[i + n] == 0) return 1;
  return 0;
}

static void *worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    int i = next_job++;
    pthread_mutex_unlock(&mu);
    if (i >= njobs) return NULL;
    job *j = &jobs[i];
    if (j->dup_of >= 0) continue;
    fs_cubin c;
    j->status = fs_nvrtc_compile(j->v.name, j->src, j->v.target, &c, j->err, sizeof j->err);
    j->registers = c.registers;
    j->spills = c.spill_bytes;
    j->stack = c.stack_bytes;
    j->generic = c.generic_accesses;
    j->seconds = c.seconds;
    j->kernels_ok = !j->status && has_symbol(&c, "fsamp_main") &&
                    !has_symbol(&c, "fsamp_reduce") && !has_symbol(&c, "fsamp_finalize");
    if (j->status && c.log) j->log = strdup(c.log);
    fs_cubin_free(&c);
  }
}

int main(void) {
  char err[1024];
  fs_gen *g = NULL;
  REQUIRE(fs_gen_open(&g, err, sizeof err) == FS_OK);
  const char *samp = getenv("FS_COMPILE_SAMPLE");
  int every = samp ? atoi(samp) : 1;
  if (every < 1) every = 1;

  static const int archs[] = {80, 90, 100};
  int cap = 0;
  for (size_t a = 0; a < 3; a++)
    for (int dt = 1; dt <= 2; dt++) {
      fs_variant *list = NULL;
      int n = 0;
      int st = fs_gen_enumerate(g, archs[a], dt, &list, &n, err, sizeof err);
      CHECK_MSG(st == FS_OK, "%s", err);
      CHECK_MSG(n >= 100, "sm_%d dtype %d: only %d variants", archs[a], dt, n);
      printf("sm_%d %s: %d variants\n", archs[a], dt == 1 ? "bf16" : "fp16", n);
      /* A second enumeration gives the same names in the same order. */
      fs_variant *again = NULL;
      int n2 = 0;
      CHECK(fs_gen_enumerate(g, archs[a], dt, &again, &n2, err, sizeof err) == FS_OK);
      CHECK(n2 == n);
      for (int i = 0; i < n && i < n2; i++) CHECK(strcmp(list[i].name, again[i].name) == 0);
      free(again);
      for (int i = 0; i < n; i++) {
        if (i % every) continue;
        fs_variant back;
        CHECK_MSG(fs_gen_parse(g, list[i].name, &back, err, sizeof err) == FS_OK &&
                      strcmp(back.name, list[i].name) == 0 &&
                      strcmp(back.params, list[i].params) == 0,
                  "%s does not parse back: %s", list[i].name, err);
        if (njobs == cap) {
          cap = cap ? cap * 2 : 1024;
          jobs = realloc(jobs, (size_t)cap * sizeof *jobs);
          REQUIRE(jobs);
        }
        job *j = &jobs[njobs];
        memset(j, 0, sizeof *j);
        j->v = list[i];
        CHECK(fs_gen_source(g, &list[i], &j->src, err, sizeof err) == FS_OK);
        REQUIRE(j->src);
        j->key = fs_nvrtc_cache_key(j->src, j->v.target);
        j->dup_of = -1;
        for (int k = 0; k < njobs; k++)
          if (jobs[k].key == j->key && strcmp(jobs[k].src, j->src) == 0) {
            j->dup_of = k;
            break;
          }
        njobs++;
      }
      free(list);
    }

  /* Same parameters, same bytes; sources name their variant. */
  char *s1 = NULL, *s2 = NULL;
  CHECK(fs_gen_source(g, &jobs[0].v, &s1, err, sizeof err) == FS_OK);
  CHECK(fs_gen_source(g, &jobs[0].v, &s2, err, sizeof err) == FS_OK);
  CHECK(s1 && s2 && strcmp(s1, s2) == 0 && strstr(s1, jobs[0].v.name));
  free(s1);
  free(s2);

  /* Broken names are rejected with a reason. */
  static const char *bad[] = {
      "fsamp_bf16_sm90a_mma_v128_b16_k64_w4x1_s4_l16_rl",       /* missing field */
      "fsamp_bf16_sm90a_mma_v100_b16_k64_w4x1_s4_l16_rl_gp",    /* 100 not a value */
      "fsamp_bf16_sm90a_mma_v64_b16_k64_w8x1_s4_l16_rl_gp",     /* 64 % (16*8) != 0 */
      "fsamp_bf8_sm90a_mma_v128_b16_k64_w4x1_s4_l16_rl_gp",     /* dtype */
      "fsamp_bf16_sm75_mma_v128_b16_k64_w4x1_s4_l16_rl_gp",     /* arch */
      "hello"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    fs_variant v;
    int st = fs_gen_parse(g, bad[i], &v, err, sizeof err);
    CHECK_MSG(st != FS_OK && *err, "%s was accepted", bad[i]);
  }

  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = ncpu > 0 ? (int)ncpu : 2;
  if (nthreads > 16) nthreads = 16;
  pthread_t th[16];
  for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, worker, NULL);
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);

  int compiled = 0, failed = 0, spilling = 0, generic = 0;
  double total = 0;
  printf("%-58s %-7s %5s %6s %6s %4s %6s\n", "variant", "target", "regs", "stack", "spill",
         "gen", "sec");
  for (int i = 0; i < njobs; i++) {
    job *j = &jobs[i];
    if (j->dup_of >= 0) continue;
    compiled++;
    total += j->seconds;
    if (j->status) {
      failed++;
      fprintf(stderr, "COMPILE FAILED %s: %s\n%.3000s\n", j->v.name, j->err, j->log ? j->log : "");
      continue;
    }
    if (j->spills > 0) spilling++;
    if (j->generic != 0) generic++;
    printf("%-58s %-7s %5d %6d %6d %4d %6.2f%s\n", j->v.name, j->v.target, j->registers,
           j->stack, j->spills, j->generic, j->seconds, j->spills > 0 ? "  SPILLS" : "");
    CHECK_MSG(j->generic == 0,
              "%s (%s): %d loads or stores through generic addresses in its PTX (-1: no "
              "PTX); every access must name its state space", j->v.name, j->v.target,
              j->generic);
    CHECK_MSG(j->kernels_ok, "%s (%s): the cubin must hold fsamp_main and no fsamp_reduce or "
              "fsamp_finalize", j->v.name, j->v.target);
  }
  printf("%d variants, %d distinct sources compiled in %.1f s of NVRTC time on %d threads; "
         "%d failed, %d spill (flagged), %d with generic accesses\n", njobs, compiled, total,
         nthreads, failed, spilling, generic);
  CHECK(failed == 0);
  for (int i = 0; i < njobs; i++) {
    free(jobs[i].src);
    free(jobs[i].log);
  }
  free(jobs);
  fs_gen_close(g);
  return fs_test_done("test_compile_variants");
}
