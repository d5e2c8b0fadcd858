/*
** test_bad_input.c: every bad argument that can be reached without a GPU
** returns the documented status and leaves a message that names the
** argument and its value (fs_last_error).  The problem and sampling checks
** run through fs_reference_sample(), which shares validate.c with the GPU
** path; on a machine with a GPU the same cases also go through fs_prepare()
** and fs_sample() and must be rejected there, before any launch.  Also: the
** context entry points without a context or without a GPU, status strings and
** the version.  Runs in milliseconds (plus context creation when a GPU is
** present).
*/
#include "fs_reference.h"
#include "fs_test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { GB = 2, GD = 16, GV = 10 };
static _Alignas(64) uint16_t g_h[GB * GD * 2];
static _Alignas(64) uint16_t g_w[GV * GD * 2];
static _Alignas(64) float g_temps[GB + 4];
static _Alignas(64) uint64_t g_seeds[GB + 4], g_offs[GB + 4];
static _Alignas(64) int32_t g_tok[256];
static _Alignas(64) uint64_t g_keys[256];
static fs_context *g_ctx; /* non-NULL on a machine with a usable GPU */

static fs_problem good_problem(void) {
  fs_problem p;
  memset(&p, 0, sizeof p);
  p.batch = GB;
  p.hidden = GD;
  p.vocab = GV;
  p.vocab_offset = 100;
  p.dtype = FS_DTYPE_BF16;
  p.hidden_states = g_h;
  p.weight = g_w;
  return p;
}

static fs_sampling good_sampling(void) {
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = 1.0f;
  s.num_samples = 2;
  s.seed = 1;
  return s;
}

/* st must be `want` and msg must contain n1 (and n2 when not NULL). */
static void expect(int st, int want, const char *msg, const char *n1,
                   const char *n2, const char *what) {
  CHECK_MSG(st == want, "%s: status %d (%s), want %d (%s); message \"%s\"",
            what, st, fs_status_string(st), want, fs_status_string(want), msg);
  CHECK_MSG(strstr(msg, n1) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
            msg, n1);
  if (n2)
    CHECK_MSG(strstr(msg, n2) != NULL, "%s: message \"%s\" lacks \"%s\"",
              what, msg, n2);
}

/* Runs (p, s) through every entry point that validates them.  `ptrs`: the
** case is about pointers, which fs_prepare() does not read. */
static void reject(const fs_problem *p, const fs_sampling *s, const char *n1,
                   const char *n2, int ptrs) {
  char what[160];
  snprintf(what, sizeof what, "fs_reference_sample [%s%s%s]", n1,
           n2 ? " " : "", n2 ? n2 : "");
  int st = fs_reference_sample(p, s, g_tok, NULL, g_keys);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), n1, n2, what);
  fs_ref_result r;
  snprintf(what, sizeof what, "fs_reference_row [%s]", n1);
  st = fs_reference_row(p, s, 0, 0, &r);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), n1, n2, what);
  if (!g_ctx) return;
  fs_outputs o = {g_tok, NULL, NULL};
  snprintf(what, sizeof what, "fs_sample [%s]", n1);
  st = fs_sample(g_ctx, p, s, &o, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(g_ctx), n1, n2, what);
  if (!ptrs) {
    snprintf(what, sizeof what, "fs_prepare [%s]", n1);
    st = fs_prepare(g_ctx, p, s);
    expect(st, FS_INVALID_ARGUMENT, fs_last_error(g_ctx), n1, n2, what);
  }
}

static void accept(const fs_problem *p, const fs_sampling *s,
                   const char *what) {
  int st = fs_reference_sample(p, s, g_tok, NULL, NULL);
  CHECK_MSG(st == FS_OK, "%s: %s", what, fs_last_error(NULL));
}

static void test_problem(void) {
  const fs_sampling s = good_sampling();
  fs_problem p = good_problem();
  char buf[64];
  accept(&p, &s, "the good problem");
  reject(NULL, &s, "problem=NULL", NULL, 0);

  p = good_problem(); p.batch = 0;
  reject(&p, &s, "problem->batch=0", NULL, 0);
  p.batch = 65536;
  reject(&p, &s, "problem->batch=65536", "65535", 0);
  p.batch = -1;
  reject(&p, &s, "problem->batch=-1", NULL, 0);

  p = good_problem(); p.hidden = 0;
  reject(&p, &s, "problem->hidden=0", NULL, 0);
  p.hidden = 4095;
  reject(&p, &s, "problem->hidden=4095", "multiple of 8", 0);
  p.hidden = FS_MAX_HIDDEN + 8;
  reject(&p, &s, "problem->hidden=65544", "65536", 0);

  p = good_problem(); p.vocab = 0;
  reject(&p, &s, "problem->vocab=0", NULL, 0);
  p.vocab = -5;
  reject(&p, &s, "problem->vocab=-5", NULL, 0);
  p.vocab = FS_MAX_VOCAB_ROWS + 1; /* a tile past the last row would overflow int */
  p.vocab_offset = 0;
  reject(&p, &s, "problem->vocab=2147482625", "2147482624", 0);

  p = good_problem(); p.vocab_offset = -1;
  reject(&p, &s, "problem->vocab_offset=-1", NULL, 0);
  p.vocab_offset = (int64_t)FS_MAX_VOCAB - GV + 1; /* last id 2^31 */
  reject(&p, &s, "problem->vocab_offset=2147483638", "2147483647", 0);
  p.vocab_offset = (int64_t)FS_MAX_VOCAB - GV; /* last id 2^31 - 1: fine */
  accept(&p, &s, "the largest vocab_offset");

  p = good_problem(); p.dtype = 7;
  reject(&p, &s, "problem->dtype=7", NULL, 0);
  p.dtype = 0;
  reject(&p, &s, "problem->dtype=0", NULL, 0);

  p = good_problem(); p.hidden_stride = GD - 8;
  reject(&p, &s, "problem->hidden_stride=8", NULL, 0);
  p.hidden_stride = GD + 4;
  reject(&p, &s, "problem->hidden_stride=20", "multiple of 8", 0);
  p.hidden_stride = -16;
  reject(&p, &s, "problem->hidden_stride=-16", NULL, 0);
  p = good_problem(); p.weight_stride = GD - 8;
  reject(&p, &s, "problem->weight_stride=8", NULL, 0);
  p.weight_stride = GD + 12;
  reject(&p, &s, "problem->weight_stride=28", "multiple of 8", 0);
  p.weight_stride = 1LL << 40;
  reject(&p, &s, "problem->weight_stride=1099511627776", "2^40", 0);
  p = good_problem(); p.hidden_stride = 1LL << 40;
  reject(&p, &s, "problem->hidden_stride=1099511627776", "2^40", 0);
  p = good_problem(); p.hidden_stride = GD + 8; p.weight_stride = GD + 16;
  accept(&p, &s, "strides > D"); /* g_h and g_w hold 2x the rows */

  p = good_problem(); p.hidden_states = NULL;
  reject(&p, &s, "problem->hidden_states=NULL", NULL, 1);
  p = good_problem(); p.weight = NULL;
  reject(&p, &s, "problem->weight=NULL", NULL, 1);
  p = good_problem(); p.hidden_states = g_h + 1; /* host pointer + 2 bytes */
  snprintf(buf, sizeof buf, "problem->hidden_states=%p", (void *)(g_h + 1));
  reject(&p, &s, buf, "16-byte", 1);
  p = good_problem(); p.weight = g_w + 1;
  snprintf(buf, sizeof buf, "problem->weight=%p", (void *)(g_w + 1));
  reject(&p, &s, buf, "16-byte", 1);
}

static void test_sampling(void) {
  const fs_problem p = good_problem();
  fs_sampling s = good_sampling();
  char buf[80];
  reject(&p, NULL, "sampling=NULL", NULL, 0);

  s.num_samples = 0;
  reject(&p, &s, "sampling->num_samples=0", NULL, 0);
  s.num_samples = 65536;
  reject(&p, &s, "sampling->num_samples=65536", "65535", 0);
  s.num_samples = -3;
  reject(&p, &s, "sampling->num_samples=-3", NULL, 0);
  /* B x num_samples past FS_MAX_DRAWS (the kernels index draws in int) */
  fs_problem pb = good_problem();
  pb.batch = 16385;
  s.num_samples = 65535;
  reject(&pb, &s, "sampling->num_samples=65535", "B x num_samples (B=16385)", 0);

  s = good_sampling(); s.temperature = NAN;
  reject(&p, &s, "sampling->temperature=nan", NULL, 0);
  s.temperature = -1.0f;
  reject(&p, &s, "sampling->temperature=-1", NULL, 0);
  s.temperature = INFINITY;
  reject(&p, &s, "sampling->temperature=inf", NULL, 0);
  s.temperature = -INFINITY;
  reject(&p, &s, "sampling->temperature=-inf", NULL, 0);
  s.temperature = 0.0f;
  accept(&p, &s, "temperature 0 (greedy)");
  s.temperature = 1e-30f;
  accept(&p, &s, "a tiny temperature");
  s.temperature = 1e-31f; /* 1 / T would overflow z / T for logits of ~3e8 */
  reject(&p, &s, "sampling->temperature=1e-31", "1e-30", 0);
  s.temperature = 1e-39f; /* subnormal: 1 / T is inf */
  reject(&p, &s, "sampling->temperature=1e-39", "1e-30", 0);
  s.temperature = 1e-30f;
  /* With a per-row array the scalar is not used, and per-row values that
  ** are negative or NaN mean greedy. */
  s.temperature = NAN;
  g_temps[0] = NAN;
  g_temps[1] = -2.0f;
  s.temperatures = g_temps;
  accept(&p, &s, "per-row temperatures NaN and -2");

  s = good_sampling();
  s.temperatures = (const float *)((const char *)g_temps + 2);
  snprintf(buf, sizeof buf, "sampling->temperatures=%p", (const void *)s.temperatures);
  reject(&p, &s, buf, "4-byte", 1);
  s = good_sampling();
  s.seeds = (const uint64_t *)((const char *)g_seeds + 4);
  snprintf(buf, sizeof buf, "sampling->seeds=%p", (const void *)s.seeds);
  reject(&p, &s, buf, "8-byte", 1);
  s = good_sampling();
  s.offsets = (const uint64_t *)((const char *)g_offs + 4);
  snprintf(buf, sizeof buf, "sampling->offsets=%p", (const void *)s.offsets);
  reject(&p, &s, buf, "8-byte", 1);
  s = good_sampling();
  s.seeds = g_seeds;
  s.offsets = g_offs;
  accept(&p, &s, "aligned per-row seeds and offsets");
}

/* Arguments of the reference's own: outputs, row and sample. */
static void test_reference_args(void) {
  const fs_problem p = good_problem();
  const fs_sampling s = good_sampling();
  char buf[64];
  fs_ref_result r;
  int st = fs_reference_sample(&p, &s, NULL, NULL, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "tokens=NULL", NULL,
         "NULL tokens");
  int32_t *mis = (int32_t *)((char *)g_tok + 2);
  snprintf(buf, sizeof buf, "tokens=%p", (void *)mis);
  st = fs_reference_sample(&p, &s, mis, NULL, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), buf, "4-byte",
         "misaligned tokens");
  uint64_t *mk = (uint64_t *)((char *)g_keys + 4);
  snprintf(buf, sizeof buf, "keys=%p", (void *)mk);
  st = fs_reference_sample(&p, &s, g_tok, NULL, mk);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), buf, "8-byte",
         "misaligned keys");

  st = fs_reference_row(&p, &s, -1, 0, &r);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "row=-1", NULL, "row");
  st = fs_reference_row(&p, &s, GB, 0, &r);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "row=2", "B=2", "row");
  st = fs_reference_row(&p, &s, 0, 2, &r);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "sample=2",
         "num_samples=2", "sample");
  st = fs_reference_row(&p, &s, 0, 0, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "out=NULL", NULL,
         "NULL out");
  CHECK(fs_reference_row(&p, &s, GB - 1, 1, &r) == FS_OK);
}

/* Context-less calls and context creation, GPU or not. */
static void test_context(void) {
  const fs_problem p = good_problem();
  const fs_sampling s = good_sampling();
  fs_outputs o = {g_tok, NULL, NULL};
  char name[64];
  int st;

  st = fs_sample(NULL, &p, &s, &o, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "ctx=NULL", NULL,
         "fs_sample(NULL)");
  CHECK(strncmp(fs_last_error(NULL), "ctx=NULL: ", 10) == 0);
  st = fs_prepare(NULL, &p, &s);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "ctx=NULL", NULL,
         "fs_prepare(NULL)");
  CHECK(strncmp(fs_last_error(NULL), "ctx=NULL: ", 10) == 0);
  st = fs_variant_name(NULL, &p, &s, name, sizeof name);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "ctx=NULL", NULL,
         "fs_variant_name(NULL)");
  st = fs_sample_tp(NULL, &p, &s, &o, NULL, NULL, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "ctx=NULL", NULL,
         "fs_sample_tp(NULL)");
  st = fs_sample_nccl(NULL, &p, &s, &o, NULL, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "ctx=NULL", NULL,
         "fs_sample_nccl(NULL)");

  fs_context_destroy(NULL); /* a no-op */
  CHECK(fs_last_compile_log(NULL) != NULL && fs_last_compile_log(NULL)[0] == 0);

  fs_context *ctx = (fs_context *)&name; /* must be overwritten */
  st = fs_context_create(0, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "ppCtx=NULL", NULL,
         "fs_context_create(0, NULL)");
  st = fs_context_create_from_cucontext(NULL, &ctx);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(NULL), "cu_context=NULL",
         NULL, "fs_context_create_from_cucontext(NULL)");
  CHECK(ctx == NULL);

  ctx = (fs_context *)&name;
  st = fs_context_create(-1, &ctx);
  CHECK_MSG(st == FS_INVALID_ARGUMENT || st == FS_NO_DEVICE,
            "fs_context_create(-1): %s: %s", fs_status_string(st),
            fs_last_error(NULL));
  CHECK(ctx == NULL);
  CHECK(fs_last_error(NULL)[0] != 0);
  if (st == FS_INVALID_ARGUMENT)
    CHECK(strstr(fs_last_error(NULL), "device_ordinal=-1") != NULL);

  ctx = (fs_context *)&name;
  st = fs_context_create(0, &ctx);
  if (st == FS_OK) {
    CHECK(ctx != NULL);
    printf("GPU present: the cases also run through fs_sample/fs_prepare\n");
    g_ctx = ctx;
  } else {
    printf("no usable GPU (%s: %s)\n", fs_status_string(st), fs_last_error(NULL));
    CHECK_MSG(st == FS_NO_DEVICE || st == FS_UNSUPPORTED,
              "fs_context_create(0): %s", fs_status_string(st));
    CHECK(ctx == NULL);
    CHECK(fs_last_error(NULL)[0] != 0);
  }
}

/* Outputs are only validated on the GPU path. */
static void test_outputs_gpu(void) {
  if (!g_ctx) return;
  const fs_problem p = good_problem();
  const fs_sampling s = good_sampling();
  fs_outputs o = {NULL, NULL, NULL};
  int st = fs_sample(g_ctx, &p, &s, NULL, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(g_ctx), "outputs=NULL", NULL,
         "fs_sample outputs=NULL");
  st = fs_sample(g_ctx, &p, &s, &o, NULL);
  expect(st, FS_INVALID_ARGUMENT, fs_last_error(g_ctx), "outputs->tokens=NULL",
         NULL, "fs_sample outputs->tokens=NULL");
}

static void test_status_and_version(void) {
  for (int i = FS_OK; i <= FS_INTERNAL; i++) {
    const char *m = fs_status_string(i);
    CHECK_MSG(m && m[0] && strcmp(m, "unknown status") != 0, "status %d", i);
    for (int j = FS_OK; j < i; j++)
      CHECK_MSG(strcmp(m, fs_status_string(j)) != 0, "status %d == %d", i, j);
  }
  CHECK(strcmp(fs_status_string(999), "unknown status") == 0);
  CHECK(strcmp(fs_status_string(-1), "unknown status") == 0);
  CHECK(strcmp(fs_status_string(FS_INTERNAL + 1), "unknown status") == 0);
  CHECK(fs_version_number() == FS_VERSION_NUMBER);
  CHECK(strcmp(fs_version_string(), FS_VERSION_STRING) == 0);
  char v[48]; /* the string is the numbers' (a bump of one and not the other) */
  snprintf(v, sizeof v, "%d.%d.%d", FS_VERSION_MAJOR, FS_VERSION_MINOR, FS_VERSION_PATCH);
  CHECK_MSG(strcmp(FS_VERSION_STRING, v) == 0, "FS_VERSION_STRING \"%s\", the numbers say %s",
            FS_VERSION_STRING, v);
}

int main(void) {
  unsigned long long st = 0xbadull;
  for (size_t i = 0; i < sizeof g_h / sizeof g_h[0]; i++)
    g_h[i] = fs_test_f2bf((float)fs_test_uniform(&st));
  for (size_t i = 0; i < sizeof g_w / sizeof g_w[0]; i++)
    g_w[i] = fs_test_f2bf((float)fs_test_uniform(&st));
  for (int i = 0; i < GB + 4; i++) {
    g_temps[i] = 1.0f;
    g_seeds[i] = (uint64_t)i;
    g_offs[i] = (uint64_t)i;
  }
  test_status_and_version();
  test_context();
  test_problem();
  test_sampling();
  test_reference_args();
  test_outputs_gpu();
  fs_context_destroy(g_ctx);
  return fs_test_done("test_bad_input");
}
