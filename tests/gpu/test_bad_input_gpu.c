// fs-test-timeout: 300
/*
** test_bad_input_gpu.c: bad input to a real context (issue 2, "Bad input"):
** a clear status, a message that names the argument (and the value where
** there is one), nothing written, nothing crashed, and the context still
** works afterwards.
**
** For each bad fs_sample() call: the outputs are poisoned first and must
** still be poisoned afterwards (nothing was enqueued), fs_last_error(ctx)
** must name the argument, and then a valid call on the same context must
** succeed and reproduce the first valid call's tokens, keys and logits bit
** for bit.  Covered: NULL ctx/problem/sampling/outputs, H and W pointers NULL
** or misaligned (+2 and +8 bytes), NULL or misaligned tokens/logits/keys,
** B, D and num_samples of 0 or too large, V = 0, D = 4095, bad strides,
** vocab_offset negative or past 31 bits, unknown dtype, temperature NaN,
** negative or infinite, misaligned per-row arrays; fs_prepare() and
** fs_variant_name() with bad arguments; fs_context_create(99) and (-1) name
** device_ordinal; fs_context_create_from_cucontext(NULL) names cu_context
** and, with the real CUcontext, gives a working context.
**
** The further inputs (fs_options) of fs_sample_ex() and fs_sample_tp_ex(),
** the same way: options->size 0, 12 (ending inside token_mask), one that
** ends before token_mask_stride (no version had that layout) and
** sizeof(fs_options) + 8 (from a newer header) name options->size and the
** value; a token_mask misaligned by 2 bytes names token_mask; a
** token_mask_stride of -1, 1, 31 (one below ceil((vocab_offset + V) / 32) =
** 32 at V = 1000) and 2^40 (past the index range) names token_mask_stride,
** the value and the rule; fs_sample_tp_ex() refuses a bad stride, a stride
** of 0 with a mask (a shard cannot know the whole vocabulary's words) and a
** bad size before any collective is called; logprobs misaligned by 2 bytes
** names logprobs, in fs_sample_tp_ex() too (before any collective); a
** logit_softcap of -1, NaN, +-inf, 1e-31 or 1e31 (outside [FS_MIN_SOFTCAP,
** FS_MAX_SOFTCAP]) names
** logit_softcap, the value and the rule, in fs_sample_tp_ex() too;
** fs_reference_sample_ex() refuses a
** bad size and stride too (fs_last_error(NULL)).  Accepted, and drawing
** fs_sample()'s tokens, keys and logits bit for bit: NULL options, options
** with a NULL token_mask, and a mask of all ones with stride 0, 32 (the
** minimum) and 40 (padding words); 0.2's options (the size ending before
** logprobs, whose misaligned pointer is then never read), 0.3.0's (the
** size ending before logit_softcap, whose NaN is then never read), options
** with logprobs and options with logit_softcap -0 (none).  The logit bias
** (0.3.3): test_bias_args.
**
** The tensor-parallel calls' collectives, as an engine's callback sees them
** (one rank, an in-place callback that records each call and reduces
** nothing): fs_sample_tp_ex() with logits asks for a max of B*S keys, then
** a sum of B*S floats; without logits the max alone; with logprobs a max
** and a sum of B*S + B each, with or without logits; a callback that fails
** on its second call gives FS_CUDA naming the sum.  On a GPU the one-rank
** tokens are fs_sample()'s.
**
** Kernel selection failures, forced with FS_VARIANT in a fresh context each
** (FS_VARIANT is read when a shape is first prepared), all derived from this
** GPU's default variant name: a name that is not a variant, one that breaks
** a constraint (100-row vocab tile), an unknown dtype (fp8), a missing field,
** and a valid variant of an architecture of another major version.  Each
** must fail with FS_INVALID_ARGUMENT (or FS_LUA / FS_UNSUPPORTED) and a
** message naming FS_VARIANT or the variant, fs_last_compile_log() must be ""
** or hold an NVRTC log, and once FS_VARIANT is unset the same context must
** work.  A real NVRTC failure cannot be provoked through the public API
** (every name the generator accepts compiles), so that path is left to the
** cpu tests.  Finally a bf16 variant forced onto an fp16 problem must be
** rejected, or else give the right (greedy) tokens: reading fp16 bits as
** bf16 must not pass silently.
**
** Runtime on an H200: ~6 NVRTC compiles (one per fresh context that gets as
** far as compiling) and ~100 tiny launches: 10-30 s.
*/
#include "gen.h"
#include "gpu_util.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TB 4
#define TD 64
#define TV 1000
#define TS 8

static fs_context *g_ctx;
static gu_lmhead g_lm;
static fs_problem g_p;   /* valid, device pointers */
static fs_sampling g_s;  /* valid */
static gu_outputs g_o;
static int32_t g_tok[TB * TS];
static uint64_t g_key[TB * TS];
static float g_logit[TB * TS];
static CUdeviceptr g_seeds; /* device [TB] */
static CUdeviceptr g_mask;  /* device [TB, MASK_WORDS], every bit 1 (gu_alloc's fill) */
static CUdeviceptr g_lp;    /* device [TB * TS + 1] floats: logprobs (fs_options) */
static long g_allreduce_calls;

#define MASK_NEED ((TV + 31) / 32) /* ceil((vocab_offset + V) / 32) of g_p */
#define MASK_WORDS 40              /* the widest stride the accepted cases use */

/* The valid call on ctx reproduces the baseline bit for bit. */
static void check_valid_call(fs_context *ctx, const char *after) {
  char what[200];
  snprintf(what, sizeof what, "valid call after %s", after);
  if (gu_sample_fetch(ctx, &g_p, &g_s, &g_o, NULL, what) != FS_OK) return;
  long diff = 0;
  for (int i = 0; i < TB * TS; i++)
    diff += g_o.h_tokens[i] != g_tok[i] || g_o.h_keys[i] != g_key[i] ||
            gu_float_bits(g_o.h_logits[i]) != gu_float_bits(g_logit[i]);
  CHECK_MSG(diff == 0, "%s: %ld draws differ from the first valid call", what, diff);
}

/* After a rejected call: no token entry written (g_o was poisoned before
** it), then a valid call on the same context draws as the first one did. */
static void expect_unwritten_then_valid(const char *what) {
  gu_outputs_fetch(g_ctx, &g_o);
  const long written = gu_outputs_written(&g_o);
  CHECK_MSG(written == 0, "%s: %ld token entries were written by a rejected call", what,
            written);
  check_valid_call(g_ctx, what);
}

/* One bad fs_sample call: expects FS_INVALID_ARGUMENT, a message holding
** both needles (NULL: not checked), no output written, then a working
** context. */
static void expect_bad(const char *what, const fs_problem *p, const fs_sampling *s,
                       const fs_outputs *o, const char *needle1, const char *needle2) {
  gu_outputs_poison(g_ctx, &g_o);
  const int st = fs_sample(g_ctx, p, s, o, NULL);
  const char *msg = fs_last_error(g_ctx);
  printf("%-44s -> %s: %s\n", what, fs_status_string(st), msg);
  CHECK_MSG(st == FS_INVALID_ARGUMENT, "%s: got %s (%d), want invalid argument: %s", what,
            fs_status_string(st), st, msg);
  CHECK_MSG(msg[0] != 0, "%s: fs_last_error(ctx) is empty", what);
  CHECK_MSG(fs_test_has(msg, needle1) && fs_test_has(msg, needle2),
            "%s: the message does not name \"%s\"%s%s: \"%s\"", what, needle1,
            needle2 ? " and " : "", needle2 ? needle2 : "", msg);
  expect_unwritten_then_valid(what);
}

static const void *plus(const void *p, size_t bytes) {
  return (const char *)p + bytes;
}

static void test_sample_args(void) {
  const fs_outputs o = gu_outputs_api(&g_o);
  fs_problem p;
  fs_sampling s;
  fs_outputs oo;

#define P_CASE(what, stmt, n1, n2)                                           \
  do {                                                                       \
    p = g_p;                                                                 \
    stmt;                                                                    \
    expect_bad(what, &p, &g_s, &o, n1, n2);                                  \
  } while (0)
#define S_CASE(what, stmt, n1, n2)                                           \
  do {                                                                       \
    s = g_s;                                                                 \
    stmt;                                                                    \
    expect_bad(what, &g_p, &s, &o, n1, n2);                                  \
  } while (0)
#define O_CASE(what, stmt, n1, n2)                                           \
  do {                                                                       \
    oo = o;                                                                  \
    stmt;                                                                    \
    expect_bad(what, &g_p, &g_s, &oo, n1, n2);                               \
  } while (0)

  P_CASE("H misaligned by 2 bytes", p.hidden_states = plus(p.hidden_states, 2),
         "hidden_states", "16-byte");
  P_CASE("H misaligned by 8 bytes", p.hidden_states = plus(p.hidden_states, 8),
         "hidden_states", "16-byte");
  P_CASE("W misaligned by 2 bytes", p.weight = plus(p.weight, 2), "weight", "16-byte");
  P_CASE("H NULL", p.hidden_states = NULL, "hidden_states", NULL);
  P_CASE("W NULL", p.weight = NULL, "weight", NULL);
  P_CASE("D = 4095", p.hidden = 4095, "hidden", "4095");
  P_CASE("D = 0", p.hidden = 0, "hidden", NULL);
  P_CASE("D too large", p.hidden = FS_MAX_HIDDEN + 8, "hidden", NULL);
  P_CASE("B = 0", p.batch = 0, "batch", NULL);
  P_CASE("B too large", p.batch = FS_MAX_BATCH + 1, "batch", NULL);
  P_CASE("V = 0", p.vocab = 0, "vocab", NULL);
  P_CASE("vocab_offset = -1", p.vocab_offset = -1, "vocab_offset", NULL);
  P_CASE("vocab_offset + V past 31 bits",
         p.vocab_offset = (int64_t)FS_MAX_VOCAB - TV + 1, "vocab_offset", NULL);
  P_CASE("unknown dtype 3", p.dtype = 3, "dtype", "3");
  P_CASE("unknown dtype 0", p.dtype = 0, "dtype", NULL);
  P_CASE("hidden_stride < D", p.hidden_stride = TD - 8, "hidden_stride", NULL);
  P_CASE("weight_stride not a multiple of 8", p.weight_stride = TD + 4, "weight_stride",
         NULL);
  expect_bad("problem NULL", NULL, &g_s, &o, "problem", NULL);

  S_CASE("temperature NaN", s.temperature = NAN, "temperature", "nan");
  S_CASE("temperature -1", s.temperature = -1.0f, "temperature", "-1");
  S_CASE("temperature +inf", s.temperature = INFINITY, "temperature", NULL);
  S_CASE("num_samples 0", s.num_samples = 0, "num_samples", "0");
  S_CASE("num_samples too large", s.num_samples = FS_MAX_SAMPLES + 1, "num_samples",
         NULL);
  S_CASE("seeds misaligned", s.seeds = (const uint64_t *)plus(gu_ptr(g_seeds), 4),
         "seeds", NULL);
  S_CASE("offsets misaligned", s.offsets = (const uint64_t *)plus(gu_ptr(g_seeds), 4),
         "offsets", NULL);
  S_CASE("temperatures misaligned",
         s.temperatures = (const float *)plus(gu_ptr(g_seeds), 2), "temperatures", NULL);
  expect_bad("sampling NULL", &g_p, NULL, &o, "sampling", NULL);

  O_CASE("tokens NULL", oo.tokens = NULL, "tokens", NULL);
  O_CASE("tokens misaligned", oo.tokens = (int32_t *)plus(oo.tokens, 2), "tokens", NULL);
  O_CASE("logits misaligned", oo.logits = (float *)plus(oo.logits, 2), "logits", NULL);
  O_CASE("keys misaligned", oo.keys = (uint64_t *)plus(oo.keys, 4), "keys", NULL);
  expect_bad("outputs NULL", &g_p, &g_s, NULL, "outputs", NULL);
#undef P_CASE
#undef S_CASE
#undef O_CASE

  /* no context at all */
  int st = fs_sample(NULL, &g_p, &g_s, &o, NULL);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), "ctx"),
            "fs_sample(NULL ctx): %s: %s", fs_status_string(st), fs_last_error(NULL));

  /* fs_prepare and fs_variant_name check the same rules */
  p = g_p;
  p.hidden = 4095;
  st = fs_prepare(g_ctx, &p, &g_s);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(g_ctx), "4095"),
            "fs_prepare(D=4095): %s: %s", fs_status_string(st), fs_last_error(g_ctx));
  s = g_s;
  s.num_samples = 0;
  st = fs_prepare(g_ctx, &g_p, &s);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(g_ctx), "num_samples"),
            "fs_prepare(num_samples=0): %s: %s", fs_status_string(st), fs_last_error(g_ctx));
  st = fs_prepare(NULL, &g_p, &g_s);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), "ctx"),
            "fs_prepare(NULL ctx): %s: %s", fs_status_string(st), fs_last_error(NULL));
  char buf[8];
  st = fs_variant_name(g_ctx, &g_p, &g_s, NULL, 16);
  CHECK_MSG(st == FS_INVALID_ARGUMENT, "fs_variant_name(buf=NULL): %s", fs_status_string(st));
  p = g_p;
  p.dtype = 7;
  st = fs_variant_name(g_ctx, &p, &g_s, buf, sizeof buf);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(g_ctx), "dtype"),
            "fs_variant_name(dtype=7): %s: %s", fs_status_string(st), fs_last_error(g_ctx));
  /* a valid prepare still works */
  st = fs_prepare(g_ctx, &g_p, &g_s);
  CHECK_MSG(st == FS_OK, "fs_prepare after errors: %s: %s", fs_status_string(st),
            fs_last_error(g_ctx));
  check_valid_call(g_ctx, "fs_prepare/fs_variant_name errors");
}

/* An all-reduce that must never be reached (it fails if it is). */
static int never_allreduce(void *user, void *buf, size_t count, int op, void *stream) {
  (void)user, (void)buf, (void)count, (void)op, (void)stream;
  g_allreduce_calls++;
  return 1;
}

/* The collectives of a tensor-parallel call, recorded by rec_allreduce. */
static struct {
  int n, fail_at; /* calls so far; the call (1-based) that fails, 0 none */
  size_t count[4];
  int op[4];
} g_rec;

/* One rank's in-place all-reduce: nothing to reduce; records the call. */
static int rec_allreduce(void *user, void *buf, size_t count, int op, void *stream) {
  (void)user, (void)buf, (void)stream;
  if (g_rec.n < 4) g_rec.count[g_rec.n] = count, g_rec.op[g_rec.n] = op;
  return ++g_rec.n == g_rec.fail_at;
}

/* fs_sample_tp_ex with opt (NULL: none), with or without logits, failing
** at the callback's call fail_at (0: never): its status and collectives
** must be st, and the n calls (count[i], op[i]). */
static void expect_collectives(const char *what, const fs_options *opt, int with_logits,
                               int fail_at, int st, int n, const size_t *count, const int *op) {
  memset(&g_rec, 0, sizeof g_rec);
  g_rec.fail_at = fail_at;
  gu_outputs_poison(g_ctx, &g_o);
  fs_outputs o = gu_outputs_api(&g_o);
  if (!with_logits) o.logits = NULL;
  const int got = fs_sample_tp_ex(g_ctx, &g_p, &g_s, opt, &o, rec_allreduce, NULL, NULL);
  const char *msg = got ? fs_last_error(g_ctx) : "";
  printf("%-44s -> %s, %d collective(s)%s%s\n", what, fs_status_string(got), g_rec.n,
         got ? ": " : "", msg);
  CHECK_MSG(got == st, "%s: %s (%d), want %s: %s", what, fs_status_string(got), got,
            fs_status_string(st), msg);
  int same = g_rec.n == n;
  for (int i = 0; same && i < n; i++) same = g_rec.count[i] == count[i] && g_rec.op[i] == op[i];
  CHECK_MSG(same, "%s: %d collective(s), the first (%zu, op %d), want %d (%zu, op %d)", what,
            g_rec.n, g_rec.count[0], g_rec.op[0], n, count[0], op[0]);
  if (st) {
    CHECK_MSG(fs_test_has(msg, "sum"), "%s: the message does not name the sum: %s", what, msg);
    return;
  }
  if (gu_fake_driver()) return;
  gu_outputs_fetch(g_ctx, &g_o);
  int diff = 0;
  for (int i = 0; i < TB * TS; i++) diff += g_o.h_tokens[i] != g_tok[i];
  CHECK_MSG(diff == 0, "%s: %d tokens differ from fs_sample's", what, diff);
}

static void test_tp_collectives(void) {
  const size_t n = TB * TS, nl = TB * TS + TB;
  const size_t c2[] = {n, n}, c1[] = {n}, cl[] = {nl, nl};
  const int ops[] = {FS_REDUCE_MAX_U64, FS_REDUCE_SUM_F32};
  fs_options opt;
  memset(&opt, 0, sizeof opt);
  opt.size = sizeof opt;
  expect_collectives("fs_sample_tp_ex, logits", NULL, 1, 0, FS_OK, 2, c2, ops);
  expect_collectives("fs_sample_tp_ex, no logits", NULL, 0, 0, FS_OK, 1, c1, ops);
  opt.logprobs = (float *)gu_ptr(g_lp);
  expect_collectives("fs_sample_tp_ex, logprobs and logits", &opt, 1, 0, FS_OK, 2, cl, ops);
  expect_collectives("fs_sample_tp_ex, logprobs, no logits", &opt, 0, 0, FS_OK, 2, cl, ops);
  expect_collectives("fs_sample_tp_ex, logprobs, the sum fails", &opt, 0, 2, FS_CUDA, 2, cl, ops);
  check_valid_call(g_ctx, "a failed collective");
}

/* One fs_sample_ex call (tp: fs_sample_tp_ex, whose collective must not be
** reached) with bad options: expect_bad's checks, with up to three needles. */
static void expect_bad_options(const char *what, int tp, const fs_options *opt,
                               const char *needle1, const char *needle2, const char *needle3) {
  gu_outputs_poison(g_ctx, &g_o);
  const fs_outputs o = gu_outputs_api(&g_o);
  const long calls = g_allreduce_calls;
  const int st = tp ? fs_sample_tp_ex(g_ctx, &g_p, &g_s, opt, &o, never_allreduce, NULL, NULL)
                    : fs_sample_ex(g_ctx, &g_p, &g_s, opt, &o, NULL);
  const char *msg = fs_last_error(g_ctx);
  printf("%-44s -> %s: %s\n", what, fs_status_string(st), msg);
  /* catches: bad options accepted (a kernel would read a wrong mask) */
  CHECK_MSG(st == FS_INVALID_ARGUMENT, "%s: got %s (%d), want invalid argument: %s", what,
            fs_status_string(st), st, msg);
  /* catches: a message that does not say what was wrong */
  CHECK_MSG(fs_test_has(msg, needle1) && fs_test_has(msg, needle2) && fs_test_has(msg, needle3),
            "%s: the message does not name \"%s\"%s%s%s%s: \"%s\"", what, needle1,
            needle2 ? ", " : "", needle2 ? needle2 : "", needle3 ? ", " : "",
            needle3 ? needle3 : "", msg);
  /* catches: a TP call that reached the collective before validating */
  CHECK_MSG(g_allreduce_calls == calls, "%s: the all-reduce was called", what);
  expect_unwritten_then_valid(what);
}

/* Accepted options that allow every token: fs_sample_ex must draw the
** baseline (fs_sample's) bit for bit.  Catches: options that are accepted
** but change the draw, or a mask of all ones read as something else. */
static void expect_same_draw(const char *what, const fs_options *opt) {
  gu_outputs_poison(g_ctx, &g_o);
  const fs_outputs o = gu_outputs_api(&g_o);
  const int st = fs_sample_ex(g_ctx, &g_p, &g_s, opt, &o, NULL);
  printf("%-44s -> %s%s%s\n", what, fs_status_string(st), st ? ": " : "",
         st ? fs_last_error(g_ctx) : "");
  CHECK_MSG(st == FS_OK, "%s: fs_sample_ex returned %s: %s", what, fs_status_string(st),
            fs_last_error(g_ctx));
  if (st != FS_OK) return;
  gu_outputs_fetch(g_ctx, &g_o);
  gu_outputs_check(&g_o, what);
  long diff = 0;
  for (int i = 0; i < TB * TS; i++)
    diff += g_o.h_tokens[i] != g_tok[i] || g_o.h_keys[i] != g_key[i] ||
            gu_float_bits(g_o.h_logits[i]) != gu_float_bits(g_logit[i]);
  CHECK_MSG(diff == 0, "%s: %ld draws differ from fs_sample's", what, diff);
}

static fs_options options_of(size_t size, const void *mask, int64_t stride) {
  fs_options opt;
  memset(&opt, 0, sizeof opt);
  opt.size = size;
  opt.token_mask = (const uint32_t *)mask;
  opt.token_mask_stride = stride;
  return opt;
}

/* The logit bias (0.3.3): a count outside 0..FS_MAX_LOGIT_BIAS, a NULL or
** misaligned array name the argument, the value and the rule, in
** fs_sample_tp_ex() too (before any collective); FS_NOISE_GROUP16 takes a
** bias (since 0.3.17) but refuses one with ranks or of more than 1024
** entries (FS_INVALID_ARGUMENT); the CPU reference checks the count.  Accepted and
** drawing fs_sample()'s tokens, keys and logits bit for bit: 0.3.2's options
** (the size ending before the bias, whose garbage is then never read), a
** count of 0 with NULL arrays, and entries that are all pads (-1) or ids
** outside the call's [0, V) (the biased path with nothing biased: the mask
** copy of all ones and the merge of no entry). */
static void test_bias_args(void) {
  enum { N = 3 };
  int32_t tok[TB * N];
  float val[TB * N];
  for (int i = 0; i < TB * N; i++) tok[i] = i % 2 ? -1 : TV + i, val[i] = 1.0f;
  const CUdeviceptr dtok = gu_upload_new(g_ctx, tok, sizeof tok);
  const CUdeviceptr dval = gu_upload_new(g_ctx, val, sizeof val);
  const size_t full = sizeof(fs_options);
  fs_options opt = options_of(full, NULL, 0);
  opt.logit_bias_tokens = (const int32_t *)gu_ptr(dtok);
  opt.logit_bias_values = (const float *)gu_ptr(dval);
  char needle[64], rule[32];
  snprintf(rule, sizeof rule, "0..%d", FS_MAX_LOGIT_BIAS);
  static const int bad_counts[] = {-1, FS_MAX_LOGIT_BIAS + 1, -2147483647 - 1};
  for (size_t i = 0; i < sizeof bad_counts / sizeof *bad_counts; i++) {
    fs_options o = opt;
    o.logit_bias_count = bad_counts[i];
    snprintf(needle, sizeof needle, "options->logit_bias_count=%d", bad_counts[i]);
    expect_bad_options(needle, 0, &o, needle, rule, NULL);
  }
  fs_options o = opt;
  o.logit_bias_count = -1;
  expect_bad_options("fs_sample_tp_ex, logit_bias_count -1", 1, &o,
                     "options->logit_bias_count=-1", rule, NULL);
  o = opt;
  o.logit_bias_count = N;
  o.logit_bias_tokens = NULL;
  expect_bad_options("logit_bias_tokens NULL", 0, &o, "options->logit_bias_tokens=NULL",
                     "logit_bias_count=3", NULL);
  o = opt;
  o.logit_bias_count = N;
  o.logit_bias_values = NULL;
  expect_bad_options("fs_sample_tp_ex, logit_bias_values NULL", 1, &o,
                     "options->logit_bias_values=NULL", NULL, NULL);
  o = opt;
  o.logit_bias_count = N;
  o.logit_bias_tokens = (const int32_t *)plus(gu_ptr(dtok), 2);
  expect_bad_options("logit_bias_tokens misaligned by 2", 0, &o, "options->logit_bias_tokens",
                     "4-byte", NULL);
  o = opt;
  o.logit_bias_count = N;
  o.logit_bias_values = (const float *)plus(gu_ptr(dval), 2);
  expect_bad_options("logit_bias_values misaligned by 2", 0, &o, "options->logit_bias_values",
                     "4-byte", NULL);
  /* FS_NOISE_GROUP16: a bias runs (since 0.3.17), but not with ranks, before
  ** any work */
  o = opt;
  o.logit_bias_count = N;
  REQUIRE(fs_context_set_noise(g_ctx, FS_NOISE_GROUP16) == FS_OK);
  const fs_outputs out = gu_outputs_api(&g_o);
  int st = fs_sample_ex(g_ctx, &g_p, &g_s, &o, &out, NULL);
  CHECK_MSG(st == FS_OK, "FS_NOISE_GROUP16 with a bias: %s: %s", fs_status_string(st),
            fs_last_error(g_ctx));
  const CUdeviceptr drk = gu_alloc(g_ctx, sizeof(int32_t) * (size_t)TB * TS);
  o.ranks = (int32_t *)gu_ptr(drk);
  st = fs_sample_ex(g_ctx, &g_p, &g_s, &o, &out, NULL);
  printf("%-44s -> %s: %s\n", "FS_NOISE_GROUP16, a logit bias and ranks", fs_status_string(st),
         fs_last_error(g_ctx));
  CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(g_ctx), "logit_bias_count=3") &&
                fs_test_has(fs_last_error(g_ctx), "options->ranks"),
            "FS_NOISE_GROUP16 with a bias and ranks: %s: %s", fs_status_string(st),
            fs_last_error(g_ctx));
  gu_free(g_ctx, drk);
  /* and a bias long enough for the filters' path (above FS_BIAS_SHORT a
  ** row), which once went there unchecked and drew with per-token noise */
  {
    const int nl = FS_BIAS_SHORT + 1;
    const size_t bytes = sizeof(int32_t) * (size_t)TB * (size_t)nl;
    const CUdeviceptr lt = gu_alloc(g_ctx, bytes), lv = gu_alloc(g_ctx, bytes);
    o = opt;
    o.logit_bias_count = nl;
    o.logit_bias_tokens = (const int32_t *)gu_ptr(lt);
    o.logit_bias_values = (const float *)gu_ptr(lv);
    st = fs_sample_ex(g_ctx, &g_p, &g_s, &o, &out, NULL);
    printf("%-44s -> %s: %s\n", "FS_NOISE_GROUP16 with a long logit bias", fs_status_string(st),
           fs_last_error(g_ctx));
    CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(g_ctx), "logit_bias_count") &&
                  fs_test_has(fs_last_error(g_ctx), "at most 1024"),
              "FS_NOISE_GROUP16 with a bias of %d: %s: %s", nl, fs_status_string(st),
              fs_last_error(g_ctx));
    gu_free(g_ctx, lt);
    gu_free(g_ctx, lv);
  }
  REQUIRE(fs_context_set_noise(g_ctx, FS_NOISE_TOKEN) == FS_OK);
  /* the CPU reference checks the count too */
  {
    const fs_problem hp = gu_problem(&g_lm, 0);
    int32_t rt[TB * TS];
    fs_options ho = options_of(full, NULL, 0);
    ho.logit_bias_count = FS_MAX_LOGIT_BIAS + 1;
    ho.logit_bias_tokens = tok;
    ho.logit_bias_values = val;
    st = fs_reference_sample_ex(&hp, &g_s, FS_NOISE_TOKEN, &ho, rt, NULL, NULL);
    char name[64];
    snprintf(name, sizeof name, "options->logit_bias_count=%d", FS_MAX_LOGIT_BIAS + 1);
    CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), name),
              "fs_reference_sample_ex(logit_bias_count %d): %s: %s", FS_MAX_LOGIT_BIAS + 1,
              fs_status_string(st), fs_last_error(NULL));
  }
  /* accepted */
  o = options_of(offsetof(fs_options, logit_bias_tokens), NULL, 0);
  o.logit_bias_count = -7; /* past the size: never read */
  expect_same_draw("0.3.2 options (size without the bias)", &o);
  o = options_of(full, NULL, 0);
  expect_same_draw("logit_bias_count 0, NULL arrays", &o);
  o = opt;
  o.logit_bias_count = N;
  expect_same_draw("a bias of pads and ids outside [0, V)", &o);
  gu_free(g_ctx, dtok);
  gu_free(g_ctx, dval);
}

static void test_options_args(void) {
  const void *mask = gu_ptr(g_mask);
  const size_t full = sizeof(fs_options);
  const size_t short_size = offsetof(fs_options, token_mask) + sizeof(const uint32_t *) - 4;
  fs_options opt;
  char needle[64], what[96];
  const char *rule = "ceil((vocab_offset + V) / 32)";

  opt = options_of(0, mask, 0);
  expect_bad_options("options->size 0", 0, &opt, "options->size=0", "sizeof(fs_options)", NULL);
  opt = options_of(short_size, mask, 0);
  snprintf(needle, sizeof needle, "options->size=%zu", short_size);
  expect_bad_options("options->size ends inside token_mask", 0, &opt, needle, NULL, NULL);
  opt = options_of(full + 8, mask, 0);
  snprintf(needle, sizeof needle, "options->size=%zu", full + 8);
  expect_bad_options("options->size sizeof(fs_options) + 8", 0, &opt, needle,
                     "sizeof(fs_options)", NULL);
  opt = options_of(full, plus(mask, 2), 0);
  expect_bad_options("token_mask misaligned by 2 bytes", 0, &opt, "token_mask", "4-byte", NULL);
  static const int64_t bad_strides[] = {-1, 1, MASK_NEED - 1, (int64_t)1 << 40};
  for (size_t i = 0; i < sizeof bad_strides / sizeof *bad_strides; i++) {
    const int64_t st = bad_strides[i];
    opt = options_of(full, mask, st);
    snprintf(needle, sizeof needle, "token_mask_stride=%lld", (long long)st);
    snprintf(what, sizeof what, "token_mask_stride %lld", (long long)st);
    /* the rule for strides below the minimum; the index range past it */
    expect_bad_options(what, 0, &opt, needle, st < MASK_NEED ? rule : "range", NULL);
  }
  opt = options_of(full, mask, 1);
  expect_bad_options("fs_sample_tp_ex, token_mask_stride 1", 1, &opt, "token_mask_stride=1", rule,
                     NULL);
  opt = options_of(full, mask, -1);
  expect_bad_options("fs_sample_tp_ex, token_mask_stride -1", 1, &opt, "token_mask_stride=-1",
                     rule, NULL);
  opt = options_of(0, mask, 0);
  expect_bad_options("fs_sample_tp_ex, options->size 0", 1, &opt, "options->size", NULL, NULL);
  /* catches: a shard's own width taken for the mask's row stride (every
  ** rank but the last would read rows b >= 1 at the wrong words) */
  opt = options_of(full, mask, 0);
  expect_bad_options("fs_sample_tp_ex, token_mask_stride 0", 1, &opt, "token_mask_stride=0",
                     "fs_sample_tp_ex", NULL);
  /* catches: a layout no version had, read as if it were one (a wrong size
  ** that would silently take the minimal stride) */
  opt = options_of(offsetof(fs_options, token_mask_stride), mask, -5);
  snprintf(needle, sizeof needle, "options->size=%zu", offsetof(fs_options, token_mask_stride));
  expect_bad_options("options->size ends before token_mask_stride", 0, &opt, needle, NULL, NULL);

  /* the CPU reference checks the same rules (host pointers) */
  {
    const fs_problem hp = gu_problem(&g_lm, 0);
    uint32_t hmask[TB * MASK_NEED];
    int32_t tok[TB * TS];
    memset(hmask, 0xFF, sizeof hmask);
    opt = options_of(0, hmask, 0);
    int st = fs_reference_sample_ex(&hp, &g_s, FS_NOISE_TOKEN, &opt, tok, NULL, NULL);
    CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), "options->size"),
              "fs_reference_sample_ex(options->size 0): %s: %s", fs_status_string(st),
              fs_last_error(NULL));
    opt = options_of(full, hmask, 1);
    st = fs_reference_sample_ex(&hp, &g_s, FS_NOISE_TOKEN, &opt, tok, NULL, NULL);
    CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), "token_mask_stride=1"),
              "fs_reference_sample_ex(token_mask_stride 1): %s: %s", fs_status_string(st),
              fs_last_error(NULL));
    printf("%-44s -> %s: %s\n", "fs_reference_sample_ex, token_mask_stride 1",
           fs_status_string(st), fs_last_error(NULL));
  }

  /* logprobs (0.3): misaligned, and in the tensor-parallel calls */
  opt = options_of(full, NULL, 0);
  opt.logprobs = (float *)plus(gu_ptr(g_lp), 2);
  expect_bad_options("logprobs misaligned by 2 bytes", 0, &opt, "options->logprobs", "4-byte",
                     NULL);
  expect_bad_options("fs_sample_tp_ex, logprobs misaligned by 2", 1, &opt, "options->logprobs",
                     "4-byte", NULL);

  /* logit_softcap (0.3.2): negative, NaN, infinite, below FS_MIN_SOFTCAP */
  static const float bad_caps[] = {-1.0f, NAN, INFINITY, -INFINITY, 1e-31f, 1e31f};
  for (size_t i = 0; i < sizeof bad_caps / sizeof *bad_caps; i++) {
    opt = options_of(full, NULL, 0);
    opt.logit_softcap = bad_caps[i];
    snprintf(needle, sizeof needle, "options->logit_softcap=%g", (double)bad_caps[i]);
    snprintf(what, sizeof what, "logit_softcap %g", (double)bad_caps[i]);
    expect_bad_options(what, 0, &opt, needle, "[1e-30, 1e+30]", NULL);
  }
  opt = options_of(full, NULL, 0);
  opt.logit_softcap = -2.0f;
  expect_bad_options("fs_sample_tp_ex, logit_softcap -2", 1, &opt, "options->logit_softcap=-2",
                     NULL, NULL);

  /* accepted: what allows every token draws as fs_sample */
  expect_same_draw("options NULL", NULL);
  /* 0.3.0's options (they end before logit_softcap): the cap never read */
  opt = options_of(offsetof(fs_options, logit_softcap), mask, 0);
  opt.logit_softcap = NAN;
  expect_same_draw("0.3.0 options (size without logit_softcap)", &opt);
  opt = options_of(full, NULL, 0);
  opt.logit_softcap = -0.0f; /* == 0: none */
  expect_same_draw("options with logit_softcap -0", &opt);
  /* 0.2's options (they end before logprobs): the mask read, logprobs not */
  opt = options_of(offsetof(fs_options, logprobs), mask, 0);
  opt.logprobs = (float *)plus(gu_ptr(g_lp), 2); /* past the size: never read */
  expect_same_draw("0.2 options (size without logprobs)", &opt);
  /* logprobs asked for: the same draw */
  opt = options_of(full, NULL, 0);
  opt.logprobs = (float *)gu_ptr(g_lp);
  expect_same_draw("options with logprobs", &opt);
  opt = options_of(full, NULL, 0);
  expect_same_draw("options with token_mask NULL", &opt);
  opt = options_of(full, mask, 0);
  expect_same_draw("all-ones mask, stride 0", &opt);
  opt = options_of(full, mask, MASK_NEED);
  expect_same_draw("all-ones mask, stride 32 (the minimum)", &opt);
  opt = options_of(full, mask, MASK_WORDS);
  expect_same_draw("all-ones mask, stride 40", &opt);
  test_bias_args();
}

static void test_context_args(void) {
  static char sentinel;
  fs_context *c = (fs_context *)(void *)&sentinel; /* not NULL: must be cleared */
  int st = fs_context_create(99, &c);
  printf("%-44s -> %s: %s\n", "fs_context_create(99)", fs_status_string(st),
         fs_last_error(NULL));
  CHECK_MSG(st == FS_INVALID_ARGUMENT, "fs_context_create(99): %s (%d)",
            fs_status_string(st), st);
  CHECK_MSG(c == NULL, "fs_context_create(99) left *ppCtx non-NULL");
  CHECK_MSG(fs_test_has(fs_last_error(NULL), "device_ordinal") && fs_test_has(fs_last_error(NULL), "99"),
            "fs_context_create(99): message \"%s\"", fs_last_error(NULL));
  st = fs_context_create(-1, &c);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && c == NULL &&
                fs_test_has(fs_last_error(NULL), "device_ordinal"),
            "fs_context_create(-1): %s: %s", fs_status_string(st), fs_last_error(NULL));
  st = fs_context_create(0, NULL);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(NULL), "ppCtx"),
            "fs_context_create(0, NULL): %s: %s", fs_status_string(st), fs_last_error(NULL));
  st = fs_context_create_from_cucontext(NULL, &c);
  CHECK_MSG(st == FS_INVALID_ARGUMENT && c == NULL && fs_test_has(fs_last_error(NULL), "cu_context"),
            "fs_context_create_from_cucontext(NULL): %s: %s", fs_status_string(st),
            fs_last_error(NULL));
  fs_context_destroy(NULL); /* accepted */

  /* the caller's CUcontext: a working context */
  st = fs_context_create_from_cucontext((void *)g_ctx->cu_ctx, &c);
  CHECK_MSG(st == FS_OK, "fs_context_create_from_cucontext: %s: %s", fs_status_string(st),
            fs_last_error(NULL));
  if (st == FS_OK) {
    check_valid_call(c, "fs_context_create_from_cucontext");
    fs_context_destroy(c);
  }
}

/* A fresh context with FS_VARIANT=name: the first fs_sample must fail with
** one of the accepted statuses and a message holding `needle`; after unsetting
** FS_VARIANT the same context must work. */
static void expect_variant_failure(const char *name, const char *needle, const char *why) {
  setenv("FS_VARIANT", name, 1);
  fs_context *c = NULL;
  int st = fs_context_create(0, &c);
  REQUIRE(st == FS_OK);
  fs_outputs o = gu_outputs_api(&g_o);
  gu_outputs_poison(c, &g_o);
  st = fs_sample(c, &g_p, &g_s, &o, NULL);
  const char *msg = fs_last_error(c);
  printf("FS_VARIANT %-38s -> %s: %.300s\n", why, fs_status_string(st), msg);
  CHECK_MSG(st == FS_INVALID_ARGUMENT || st == FS_LUA || st == FS_UNSUPPORTED,
            "FS_VARIANT=%s (%s): got %s (%d): %s", name, why, fs_status_string(st), st, msg);
  CHECK_MSG(fs_test_has(msg, needle), "FS_VARIANT=%s (%s): the message does not name \"%s\": %s",
            name, why, needle, msg);
  const char *log = fs_last_compile_log(c);
  CHECK_MSG(log != NULL && (log[0] == 0 || strstr(log, "NVRTC log") != NULL),
            "FS_VARIANT=%s: fs_last_compile_log is neither empty nor a log: %.200s", name,
            log ? log : "(NULL)");
  gu_outputs_fetch(c, &g_o);
  const long written = gu_outputs_written(&g_o);
  CHECK_MSG(written == 0, "FS_VARIANT=%s: %ld entries written by a failed call", name, written);
  unsetenv("FS_VARIANT");
  char after[200];
  snprintf(after, sizeof after, "FS_VARIANT=%s failed and was unset", name);
  check_valid_call(c, after);
  fs_context_destroy(c);
}

/* A bf16 variant (`name`, valid for this GPU) forced onto an fp16 problem. */
static void test_dtype_mismatch(const char *name) {
  gu_lmhead lm;
  gu_lmhead_init(&lm, TB, TD, TV, FS_DTYPE_FP16, 0, 0, 0, gu_w_scale(TD, 2.0), 0xF16);
  gu_lmhead_upload(g_ctx, &lm);
  const fs_problem p = gu_problem(&lm, 1);
  fs_sampling s;
  memset(&s, 0, sizeof s);
  s.temperature = 0.0f; /* greedy: an exact answer */
  s.num_samples = 1;
  setenv("FS_VARIANT", name, 1);
  fs_context *c = NULL;
  int st = fs_context_create(0, &c);
  REQUIRE(st == FS_OK);
  gu_outputs o;
  gu_outputs_alloc(c, &o, TB, 1, 1);
  fs_outputs oo = gu_outputs_api(&o);
  gu_outputs_poison(c, &o);
  st = fs_sample(c, &p, &s, &oo, NULL);
  printf("FS_VARIANT bf16 variant, fp16 problem          -> %s: %s\n", fs_status_string(st),
         st ? fs_last_error(c) : "(accepted)");
  if (st != FS_OK) {
    CHECK_MSG(st == FS_INVALID_ARGUMENT && fs_test_has(fs_last_error(c), "dtype"),
              "bf16 variant for an fp16 problem: %s: %s", fs_status_string(st),
              fs_last_error(c));
  } else {
    gu_outputs_fetch(c, &o);
    const double gd = 2.0 * TD / 16777216.0;
    for (int b = 0; b < TB; b++) {
      int best = 0, second = -1;
      double z[TV], a[TV];
      for (int v = 0; v < TV; v++) {
        z[v] = gu_logit(&lm, b, v, &a[v]);
        if (v && z[v] > z[best]) {
          second = best;
          best = v;
        } else if (v && (second < 0 || z[v] > z[second])) {
          second = v;
        }
      }
      if (z[best] - z[second] <= gd * (a[best] + a[second]) / (1 - gd)) continue;
      CHECK_MSG(o.h_tokens[b] == best,
                "FS_VARIANT=%s accepted an fp16 problem and returned token %d, the "
                "argmax is %d: fp16 data read as bf16 (sample.c choose() does not check "
                "the forced variant's dtype)", name, (int)o.h_tokens[b], best);
    }
  }
  unsetenv("FS_VARIANT");
  gu_outputs_free(c, &o);
  fs_context_destroy(c);
  gu_lmhead_free(g_ctx, &lm);
}

/* The "_v<rows>" field of a variant name, or NULL (the fma family has none). */
static const char *vrows_field(const char *name) {
  const char *v = name;
  while ((v = strstr(v, "_v")) != NULL && !(v[2] >= '0' && v[2] <= '9')) v += 2;
  return v;
}

/* The first bf16 variant of this GPU's generator architecture with a vocab
** tile field, into buf (empty if none). */
static void first_with_vrows(char *buf, size_t n) {
  char err[768];
  fs_gen *g = NULL;
  fs_variant *list = NULL;
  int count = 0;
  buf[0] = 0;
  if (fs_gen_open(&g, err, sizeof err) ||
      fs_gen_enumerate(g, fs_target_arch(g_ctx->arch), FS_DTYPE_BF16, &list, &count, err,
                       sizeof err)) {
    CHECK_MSG(0, "the generator failed: %s", err);
  }
  for (int i = 0; i < count && !buf[0]; i++)
    if (vrows_field(list[i].name)) snprintf(buf, n, "%s", list[i].name);
  free(list);
  if (g) fs_gen_close(g);
}

/* Bad FS_VARIANT names, each derived from a name known to be valid (this
** GPU's default bf16 variant, or the first variant with a vocab tile when
** the default has none), so they keep their meaning as the design space
** and the shipped defaults change. */
static void test_variant_failures(void) {
  char def[320], name[400];
  int st = fs_variant_name(g_ctx, &g_p, &g_s, def, sizeof def);
  CHECK_MSG(st == FS_OK, "fs_variant_name: %s: %s", fs_status_string(st), fs_last_error(g_ctx));
  if (st != FS_OK) return;
  char *sp = strchr(def, ' ');
  if (sp) *sp = 0; /* "name (how)" -> name */
  printf("default bf16 variant: %s\n", def);
  if (!vrows_field(def)) {
    first_with_vrows(def, sizeof def);
    printf("it has no vocab tile field; the bad names derive from %s\n", def);
  }

  expect_variant_failure("fsamp_bogus", "FS_VARIANT", "not a variant name");

  /* a vocab tile of 100 rows is none of the family's values (the message
  ** lists them) */
  const char *v = vrows_field(def);
  if (v) {
    const char *rest = v + 2;
    while (*rest >= '0' && *rest <= '9') rest++;
    snprintf(name, sizeof name, "%.*s_v100%s", (int)(v - def), def, rest);
    expect_variant_failure(name, "one of", "a tile_v outside the values (v100)");
  } else {
    CHECK_MSG(0, "default variant %s has no _v<rows> field", def);
  }

  const char *d = strstr(def, "_bf16_");
  if (d) {
    snprintf(name, sizeof name, "%.*s_fp8_%s", (int)(d - def), def, d + 6);
    expect_variant_failure(name, "fp8", "unknown dtype fp8");
  }

  const char *last = strrchr(def, '_');
  snprintf(name, sizeof name, "%.*s", (int)(last ? last - def : 0), def);
  expect_variant_failure(name, "FS_VARIANT", "a field missing");

  /* a valid variant of an architecture of another major version */
  fs_gen *gen = NULL;
  char err[768];
  st = fs_gen_open(&gen, err, sizeof err);
  CHECK_MSG(st == FS_OK, "fs_gen_open: %s", err);
  if (st == FS_OK) {
    const int other = fs_target_arch(g_ctx->arch) >= 90 ? 80 : 90;
    fs_variant *list = NULL;
    int count = 0;
    st = fs_gen_enumerate(gen, other, FS_DTYPE_BF16, &list, &count, err, sizeof err);
    CHECK_MSG(st == FS_OK && count > 0, "fs_gen_enumerate(sm_%d): %s", other, err);
    if (st == FS_OK && count > 0)
      expect_variant_failure(list[0].name, "sm_", "another architecture");
    free(list);
    fs_gen_close(gen);
  }

  test_dtype_mismatch(def);
}

int main(void) {
  g_ctx = fs_test_gpu_or_skip();
  if (getenv("FS_VARIANT")) unsetenv("FS_VARIANT");
  gu_lmhead_init(&g_lm, TB, TD, TV, FS_DTYPE_BF16, 0, 0, 0, gu_w_scale(TD, 2.0), 0xBAD);
  gu_lmhead_upload(g_ctx, &g_lm);
  g_p = gu_problem(&g_lm, 1);
  memset(&g_s, 0, sizeof g_s);
  g_s.temperature = 1.0f;
  g_s.num_samples = TS;
  g_s.seed = 42;
  g_s.offset = 7;
  gu_outputs_alloc(g_ctx, &g_o, TB * TS, 1, 1);
  uint64_t seeds[TB] = {1, 2, 3, 4};
  g_seeds = gu_upload_new(g_ctx, seeds, sizeof seeds);
  g_mask = gu_alloc(g_ctx, sizeof(uint32_t) * TB * MASK_WORDS);
  g_lp = gu_alloc(g_ctx, sizeof(float) * (TB * TS + 1));

  /* the baseline every recovery is compared with */
  REQUIRE(gu_sample_fetch(g_ctx, &g_p, &g_s, &g_o, NULL, "first valid call") == FS_OK);
  memcpy(g_tok, g_o.h_tokens, sizeof g_tok);
  memcpy(g_key, g_o.h_keys, sizeof g_key);
  memcpy(g_logit, g_o.h_logits, sizeof g_logit);

  test_context_args();
  test_sample_args();
  test_options_args();
  test_tp_collectives();
  test_variant_failures();

  gu_free(g_ctx, g_mask);
  gu_free(g_ctx, g_lp);
  gu_free(g_ctx, g_seeds);
  gu_outputs_free(g_ctx, &g_o);
  gu_lmhead_free(g_ctx, &g_lm);
  fs_context_destroy(g_ctx);
  return fs_test_done("test_bad_input_gpu");
}
