/*
** fs-demo: samples from a random LM head of a given shape and prints the
** tokens, the time per call and the fraction of the HBM bandwidth floor.
** Without a GPU it runs the CPU reference on the same kind of problem and
** says so.
**
**   fs-demo [--model NAME | --shape D=4096,V=151936] [--batch B]
**           [--dtype bf16|fp16] [--temperature T] [--seed S] [--iters N]
**           [--check 0|1] [--noise token|group16] [--mask-density P]
**           [--logprobs 0|1] [--softcap C] [--logit-bias N]
**           [--repetition-penalty R] [--top-k K] [--top-p P] [--min-p M]
**           [--top-logprobs N] [--ranks 0|1] [--targets 0|1]
**
** --check 1 compares the GPU's tokens of the last call with the CPU
** reference's (exit 3 if any differs).  The shape is checked here (the
** rules of fs_problem); the temperature by the library (its message names the
** field and the rule), but a number out of a float's range (1e-50, which
** strtof reads as 0) is an error here.
** --mask-density P (0 < P <= 1) draws through fs_sample_ex with a token mask
** that allows each (row, token) with probability P (from --seed).
** --logprobs 1 asks every call for the draws' logprobs (fs_options.logprobs)
** and prints the first few; with --check 1 they are compared with the
** reference's too (within 1e-3).
** --softcap C caps every logit to C tanh(z / C) (fs_options.logit_softcap;
** 0, the default, for none); the library checks C.
** --logit-bias N adds a bias to N random tokens of each row (fs_options.
** logit_bias_*, values uniform in [-5, 5], from --seed; 0, the default, for
** none); the library checks N.
** --repetition-penalty R applies the repetition penalty R to those tokens
** (fs_options.repetition_penalty: z / R where z > 0, z R else; 0, the
** default, for none); the library checks R.
** --top-k K, --top-p P, --min-p M filter each row's distribution
** (fs_options.top_k, top_p, min_p; 0, the default, for none); the library
** checks them.
** --top-logprobs N asks every call for each row's N most likely tokens and
** their logprobs (fs_options.top_logprobs; 0, the default, for none) and
** prints the first row's first five; with --check 1 the lists are compared
** with the reference's too (ids, and values within 1e-3).
** --ranks 1 asks every call for each draw's rank (fs_options.ranks: the count
** of ids whose raw logit is >= the drawn one's) and prints the first rows';
** with --check 1 they are compared with the reference's (a rank off by a
** near-tie of the logits is counted, not failed).
** --targets 1 gives every call a target id a row (fs_options.target_tokens:
** row b's is b x 7919 mod V) and prints the first rows' target logprobs and
** ranks (the tests hold them to the reference: tests/gpu/test_targets.c).
*/
#include "fs_tools.h"

#include "fs_half.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct args {
  int D, V, B, dtype, iters, check;
  float T;
  unsigned long long seed;
  int noise; /* fs_noise_mode */
  double mask_density; /* 0: no token mask */
  int logprobs;        /* 1: fs_options.logprobs */
  float softcap;       /* fs_options.logit_softcap (0: none) */
  int bias;            /* fs_options.logit_bias_count (0: none) */
  int top_k;           /* fs_options' filters (0: none) */
  float top_p, min_p;
  float rep;           /* fs_options.repetition_penalty (0: none) */
  int top;             /* fs_options.top_logprobs (0: none) */
  int ranks;           /* fs_options.ranks (0: none) */
  int targets;         /* fs_options.target_* (0: none) */
} args;

#define USAGE                                                                              \
  "usage: fs-demo [--model NAME | --shape D=..,V=..] [--batch B] [--dtype bf16|fp16]\n"     \
  "               [--temperature T] [--seed S] [--iters N] [--check 0|1] [--list-models]\n"     \
  "               [--noise token|group16] [--mask-density P] [--logprobs 0|1]\n"     \
  "               [--softcap C] [--logit-bias N] [--repetition-penalty R]\n"              \
  "               [--top-k K] [--top-p P] [--min-p M] [--top-logprobs N] [--ranks 0|1]\n" \
  "               [--targets 0|1]\n"

/* A bad argument: the message names the argument, its value and the rule. */
#define bad(...) fs_tools_bad_arg("fs-demo", USAGE, __VA_ARGS__)

/* A float option, whole string, within a float's range (the rule of its
** value is the library's). */
static int float_arg(const char *k, const char *v, float *out) {
  const int r = fs_tools_parse_float(v, out);
  if (r == -2)
    return bad("%s %s: out of a float's range (it would read as 0 or infinity)", k, v);
  if (r) return bad("%s %s: not a number", k, *v ? v : "''");
  return 0;
}

/* An integer option in lo..hi, whole string. */
static int int_arg(const char *k, const char *v, long lo, long hi, int *out) {
  if (fs_tools_parse_int(v, lo, hi, out))
    return bad("%s %s: must be an integer in %ld..%ld", k, v, lo, hi);
  return 0;
}

static int parse(int argc, char **argv, args *a) {
  *a = (args){4096, 151936, 4, FS_DTYPE_BF16, 50, 0, 1.0f, 1234, FS_NOISE_TOKEN, 0.0, 0, 0.0f, 0,
              0, 0.0f, 0.0f, 0.0f, 0, 0, 0};
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(k, "--list-models")) {
      fs_tools_list_models();
      exit(0);
    }
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
      fputs(USAGE, stdout);
      exit(0);
    }
    static const char *const with_value[] = {"--model", "--shape", "--batch", "--dtype",
                                             "--temperature", "--seed", "--iters", "--check",
                                             "--noise", "--mask-density", "--logprobs",
                                             "--softcap", "--logit-bias", "--top-k",
                                             "--top-p", "--min-p", "--repetition-penalty",
                                             "--top-logprobs", "--ranks", "--targets", NULL};
    int st = 0;
    if (!fs_tools_is_option(k, with_value)) return bad("%s: not an option", k);
    if (!v) return bad("%s: the option takes a value", k);
    i++;
    if (!strcmp(k, "--model")) {
      const fs_model *m = fs_model_find(v);
      if (!m) return bad("--model %s: not a preset (see --list-models)", v);
      a->D = m->hidden;
      a->V = m->vocab;
    } else if (!strcmp(k, "--shape")) {
      char why[256];
      if (fs_tools_parse_shape(v, &a->D, &a->V, why, sizeof why))
        return bad("--shape %s: %s", *v ? v : "''", why);
    } else if (!strcmp(k, "--batch")) {
      st = int_arg(k, v, 1, FS_MAX_BATCH, &a->B);
    } else if (!strcmp(k, "--dtype")) {
      if (!strcmp(v, "bf16")) a->dtype = FS_DTYPE_BF16;
      else if (!strcmp(v, "fp16")) a->dtype = FS_DTYPE_FP16;
      else return bad("--dtype %s: the element type is bf16 or fp16", v);
    } else if (!strcmp(k, "--temperature")) {
      st = float_arg(k, v, &a->T);
    } else if (!strcmp(k, "--seed")) {
      char *end;
      errno = 0;
      a->seed = strtoull(v, &end, 0);
      if (end == v || *end || *v == '-' || errno == ERANGE)
        return bad("--seed %s: must be an unsigned 64-bit integer", v);
    } else if (!strcmp(k, "--noise")) {
      if (fs_tools_parse_noise(v, &a->noise))
        return bad("--noise %s: " FS_TOOLS_NOISE_RULE, *v ? v : "''");
    } else if (!strcmp(k, "--mask-density")) {
      char *end;
      errno = 0;
      a->mask_density = strtod(v, &end);
      if (end == v || *end || errno == ERANGE ||
          !(a->mask_density > 0.0 && a->mask_density <= 1.0))
        return bad("--mask-density %s: must be a number in (0, 1]", v);
    } else if (!strcmp(k, "--iters")) {
      st = int_arg(k, v, 1, 100000, &a->iters);
    } else if (!strcmp(k, "--softcap") || !strcmp(k, "--top-p") || !strcmp(k, "--min-p") ||
               !strcmp(k, "--repetition-penalty")) {
      st = float_arg(k, v,
                     !strcmp(k, "--softcap") ? &a->softcap
                     : !strcmp(k, "--top-p") ? &a->top_p
                     : !strcmp(k, "--min-p") ? &a->min_p
                                             : &a->rep);
    } else if (!strcmp(k, "--top-k")) {
      st = int_arg(k, v, -1000000, 1000000, &a->top_k); /* the library's rule, its message */
    } else if (!strcmp(k, "--top-logprobs")) {
      st = int_arg(k, v, -1000000, 1000000, &a->top); /* the library's rule, its message */
    } else if (!strcmp(k, "--logit-bias")) {
      st = int_arg(k, v, -1000000, 1000000, &a->bias); /* the library's rule, its message */
    } else if (!strcmp(k, "--logprobs")) {
      st = int_arg(k, v, 0, 1, &a->logprobs);
    } else if (!strcmp(k, "--ranks")) {
      st = int_arg(k, v, 0, 1, &a->ranks);
    } else if (!strcmp(k, "--targets")) {
      st = int_arg(k, v, 0, 1, &a->targets);
    } else {
      st = int_arg(k, v, 0, 1, &a->check);
    }
    if (st) return st;
  }
  return 0;
}

/* The demo's host random stream (a 64-bit LCG): advances *s, returns it. */
static unsigned long long lcg(unsigned long long *s) {
  return *s = *s * 6364136223846793005ull + 1442695040888963407ull;
}

/* The token mask of --mask-density: [B, ceil(V / 32)] words, each bit set
** with probability a->mask_density (malloc'ed; NULL without a mask or memory). */
static uint32_t *make_mask(const args *a, size_t *words) {
  *words = (size_t)a->B * (size_t)((a->V + 31) / 32);
  if (a->mask_density <= 0.0) return NULL;
  uint32_t *m = calloc(*words, 4);
  unsigned long long s = a->seed ^ 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; m && i < *words * 32; i++) {
    if ((double)(lcg(&s) >> 11) * (1.0 / 9007199254740992.0) < a->mask_density)
      m[i / 32] |= 1u << (i % 32);
  }
  return m;
}

/* The bias of --logit-bias: [B, N] random ids of [0, V) and values uniform
** in [-5, 5] (malloc'ed into *tok and *val; 0 without a bias, -1 out of
** memory). */
static int make_bias(const args *a, int32_t **tok, float **val) {
  *tok = NULL;
  *val = NULL;
  if (a->bias <= 0) return 0;
  const size_t n = (size_t)a->B * (size_t)a->bias;
  *tok = malloc(n * 4);
  *val = malloc(n * 4);
  if (!*tok || !*val) return -1;
  unsigned long long s = a->seed ^ 0xb1a5b1a5ull;
  for (size_t i = 0; i < n; i++) {
    (*tok)[i] = (int32_t)((lcg(&s) >> 20) % (unsigned long long)a->V);
    (*val)[i] = (float)((double)(lcg(&s) >> 11) * (10.0 / 9007199254740992.0) - 5.0);
  }
  return 0;
}

static void print_tokens(const int32_t *tok, int B) {
  printf("tokens:");
  for (int b = 0; b < B && b < 16; b++) printf(" %d", tok[b]);
  printf(B > 16 ? " ...\n" : "\n");
}

/* The first row's first five of n top logprobs. */
static void print_top(const int32_t *tok, const float *val, int n) {
  if (n <= 0) return;
  printf("top logprobs of row 0:");
  for (int i = 0; i < n && i < 5; i++) printf(" %d:%.5g", tok[i], (double)val[i]);
  printf(n > 5 ? " ...\n" : "\n");
}

/* The first rows' ranks (fs_options.ranks). */
static void print_ranks(const int32_t *rk, int B) {
  printf("ranks:");
  for (int b = 0; b < (B < 8 ? B : 8); b++) printf(" %d", rk[b]);
  printf(B > 8 ? " ...\n" : "\n");
}

/* No GPU: the CPU reference on host tensors. */
static int run_cpu(const args *a) {
  size_t nh = (size_t)a->B * a->D, nw = (size_t)a->V * a->D;
  uint16_t *H = malloc(nh * 2), *W = malloc(nw * 2);
  int32_t *tok = malloc((size_t)a->B * 4);
  const size_t nt = (size_t)a->B * (size_t)(a->top > 0 ? a->top : 0);
  int32_t *ttok = malloc(nt * 4 + 4), *rk = malloc((size_t)a->B * 4);
  float *tval = malloc(nt * 4 + 4);
  if (!H || !W || !tok || !ttok || !tval || !rk)
    return fprintf(stderr, "fs-demo: out of memory\n"), 1;
  unsigned long long s = a->seed;
  for (size_t i = 0; i < nh + nw; i++) {
    float u = (float)((lcg(&s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
    uint16_t x = a->dtype == FS_DTYPE_BF16 ? fs_float_to_bf16(u) : fs_float_to_half(u);
    if (i < nh) H[i] = x; else W[i - nh] = x;
  }
  fs_problem p = {a->B, a->D, a->V, 0, a->dtype, H, 0, W, 0};
  fs_sampling sm = {a->T, NULL, 1, a->seed, NULL, 0, NULL};
  size_t words;
  uint32_t *mask = make_mask(a, &words);
  if (a->mask_density > 0.0 && !mask) return fprintf(stderr, "fs-demo: out of memory\n"), 1;
  int32_t *btok;
  float *bval;
  if (make_bias(a, &btok, &bval)) return fprintf(stderr, "fs-demo: out of memory\n"), 1;
  fs_options opt = {.size = sizeof opt, .token_mask = mask, .logit_softcap = a->softcap,
                    .logit_bias_tokens = btok, .logit_bias_values = bval,
                    .logit_bias_count = a->bias, .min_p = a->min_p, .top_k = a->top_k,
                    .top_p = a->top_p, .repetition_penalty = a->rep, .top_logprobs = a->top,
                    .top_logprob_tokens = ttok, .top_logprob_values = tval,
                    .ranks = a->ranks ? rk : NULL};
  double t0 = fs_tools_now();
  int st = fs_reference_sample_ex(&p, &sm, a->noise, &opt, tok, NULL, NULL);
  free(mask);
  free(btok);
  free(bval);
  double ms = fs_tools_now() - t0;
  if (st) {
    fprintf(stderr, "fs-demo: %s: %s\n", fs_status_string(st), fs_last_error(NULL));
    return 1;
  }
  print_tokens(tok, a->B);
  print_top(ttok, tval, a->top);
  if (a->ranks) print_ranks(rk, a->B);
  printf("CPU reference: %.1f ms for B=%d D=%d V=%d (no timing of the GPU kernel: no GPU)\n", ms,
         a->B, a->D, a->V);
  free(H); free(W); free(tok); free(ttok); free(tval); free(rk);
  return 0;
}

/* Compares the last call's tokens with the CPU reference on the same data. */
static int check(fs_context *ctx, const args *a, CUdeviceptr H, CUdeviceptr W,
                 const fs_problem *p, const fs_sampling *sm, const uint32_t *mask,
                 const int32_t *btok, const float *bval, CUdeviceptr tok, CUdeviceptr dlp,
                 CUdeviceptr dtt, CUdeviceptr dtv, CUdeviceptr drk) {
  const fs_cu_api *cu = ctx->cu;
  size_t nh = (size_t)a->B * a->D, nw = (size_t)a->V * a->D;
  uint16_t *h = malloc(nh * 2), *w = malloc(nw * 2);
  int32_t *gpu = malloc((size_t)a->B * 4), *ref = malloc((size_t)a->B * 4);
  float *glp = malloc((size_t)a->B * 4), *rlp = malloc((size_t)a->B * 4);
  int32_t *grk = malloc((size_t)a->B * 4), *rrk = malloc((size_t)a->B * 4);
  const size_t nt = (size_t)a->B * (size_t)(a->top > 0 ? a->top : 0);
  int32_t *gtt = malloc(nt * 4 + 4), *rtt = malloc(nt * 4 + 4);
  float *gtv = malloc(nt * 4 + 4), *rtv = malloc(nt * 4 + 4);
  CUcontext dummy;
  if (!h || !w || !gpu || !ref || !glp || !rlp || !gtt || !rtt || !gtv || !rtv || !grk || !rrk)
    return fprintf(stderr, "fs-demo: out of memory\n"), 1;
  cu->cuCtxPushCurrent(ctx->cu_ctx);
  cu->cuMemcpyDtoH(h, H, nh * 2);
  cu->cuMemcpyDtoH(w, W, nw * 2);
  cu->cuMemcpyDtoH(gpu, tok, (size_t)a->B * 4);
  if (dlp) cu->cuMemcpyDtoH(glp, dlp, (size_t)a->B * 4);
  if (drk) cu->cuMemcpyDtoH(grk, drk, (size_t)a->B * 4);
  if (nt) cu->cuMemcpyDtoH(gtt, dtt, nt * 4), cu->cuMemcpyDtoH(gtv, dtv, nt * 4);
  cu->cuCtxPopCurrent(&dummy);
  fs_problem q = *p;
  q.hidden_states = h;
  q.weight = w;
  const fs_options opt = {.size = sizeof opt, .token_mask = mask, .logprobs = rlp,
                          .logit_softcap = a->softcap, .logit_bias_tokens = btok,
                          .logit_bias_values = bval, .logit_bias_count = a->bias,
                          .min_p = a->min_p, .top_k = a->top_k, .top_p = a->top_p,
                          .repetition_penalty = a->rep, .top_logprobs = a->top,
                          .top_logprob_tokens = rtt, .top_logprob_values = rtv,
                          .ranks = drk ? rrk : NULL};
  int st = fs_reference_sample_ex(&q, sm, a->noise, &opt, ref, NULL, NULL), bad = 0, badlp = 0;
  if (st) return fprintf(stderr, "fs-demo: reference: %s\n", fs_last_error(NULL)), 1;
  for (int b = 0; b < a->B; b++) {
    bad += gpu[b] != ref[b];
    badlp += dlp && gpu[b] == ref[b] && !(fabsf(glp[b] - rlp[b]) <= 1e-3f);
  }
  printf("check: %d of %d tokens equal the CPU reference's\n", a->B - bad, a->B);
  if (dlp) printf("check: %d of %d logprobs within 1e-3 of the reference's\n", a->B - badlp, a->B);
  size_t tsame = 0, tbad = 0; /* a place whose id differs may be a near-tie: counted, not failed */
  for (size_t i = 0; i < nt; i++) {
    tsame += gtt[i] == rtt[i];
    tbad += gtt[i] == rtt[i] &&
            !(fabsf(gtv[i] - rtv[i]) <= 1e-3f || (isnan(gtv[i]) && isnan(rtv[i])));
  }
  if (nt)
    printf("check: %zu of %zu top-logprob places hold the reference's id, %zu of them with a "
           "value off by more than 1e-3\n", tsame, nt, tbad);
  int rsame = 0; /* a rank off by a near-tie of the logits: counted, not failed */
  for (int b = 0; drk && b < a->B; b++) rsame += gpu[b] == ref[b] && grk[b] == rrk[b];
  if (drk) printf("check: %d of %d ranks equal the reference's\n", rsame, a->B);
  free(h); free(w); free(gpu); free(ref); free(glp); free(rlp);
  free(gtt); free(rtt); free(gtv); free(rtv); free(grk); free(rrk);
  return bad || badlp || tbad || tsame * 100 < nt * 99 ? 3 : 0;
}

static int run_gpu(fs_context *ctx, const args *a) {
  const fs_cu_api *cu = ctx->cu;
  CUdeviceptr H = 0, W = 0, tok = 0, dmask = 0, dlp = 0, dbt = 0, dbv = 0, dtt = 0, dtv = 0,
              drk = 0, dtg = 0, dtl = 0, dtr = 0;
  int32_t *tg = a->targets ? malloc((size_t)a->B * 4) : NULL;
  if (a->targets && !tg) return fprintf(stderr, "fs-demo: out of memory\n"), 1;
  for (int b = 0; tg && b < a->B; b++) tg[b] = (int32_t)((long long)b * 7919 % a->V);
  CUevent e0, e1;
  CUcontext dummy;
  size_t wbytes = (size_t)a->V * a->D * 2, words;
  uint32_t *mask = make_mask(a, &words);
  if (a->mask_density > 0.0 && !mask) return fprintf(stderr, "fs-demo: out of memory\n"), 1;
  int32_t *btok;
  float *bval;
  if (make_bias(a, &btok, &bval)) return fprintf(stderr, "fs-demo: out of memory\n"), 1;
  const size_t nb = btok ? (size_t)a->B * (size_t)a->bias * 4 : 0;
  double bw = fs_tools_read_bandwidth(ctx, (size_t)2 << 30, 10);
  int st = FS_OK;
  cu->cuCtxPushCurrent(ctx->cu_ctx);
  if (cu->cuMemAlloc(&H, (size_t)a->B * a->D * 2) || cu->cuMemAlloc(&W, wbytes) ||
      cu->cuMemAlloc(&tok, (size_t)a->B * 4) || cu->cuEventCreate(&e0, 0) ||
      (a->logprobs && cu->cuMemAlloc(&dlp, (size_t)a->B * 4)) ||
      (a->ranks && cu->cuMemAlloc(&drk, (size_t)a->B * 4)) ||
      (tg && (cu->cuMemAlloc(&dtg, (size_t)a->B * 4) || cu->cuMemAlloc(&dtl, (size_t)a->B * 4) ||
              cu->cuMemAlloc(&dtr, (size_t)a->B * 4) ||
              cu->cuMemcpyHtoD(dtg, tg, (size_t)a->B * 4))) ||
      (a->top > 0 && (cu->cuMemAlloc(&dtt, (size_t)a->B * (size_t)a->top * 4) ||
                      cu->cuMemAlloc(&dtv, (size_t)a->B * (size_t)a->top * 4))) ||
      cu->cuEventCreate(&e1, 0) || (mask && (cu->cuMemAlloc(&dmask, words * 4) ||
                                              cu->cuMemcpyHtoD(dmask, mask, words * 4))) ||
      (btok && (cu->cuMemAlloc(&dbt, nb) || cu->cuMemAlloc(&dbv, nb) ||
                cu->cuMemcpyHtoD(dbt, btok, nb) || cu->cuMemcpyHtoD(dbv, bval, nb)))) {
    fprintf(stderr, "fs-demo: device allocation failed\n");
    return 1;
  }
  cu->cuCtxPopCurrent(&dummy);
  if ((st = fs_tools_fill_random(ctx, H, (size_t)a->B * a->D, a->dtype, 1.0f, a->seed)) ||
      (st = fs_tools_fill_random(ctx, W, (size_t)a->V * a->D, a->dtype, 1.0f, a->seed + 1)))
    goto fail;
  fs_problem p = {a->B, a->D, a->V, 0, a->dtype, (void *)(uintptr_t)H, 0,
                  (void *)(uintptr_t)W, 0};
  fs_sampling sm = {a->T, NULL, 1, a->seed, NULL, 0, NULL};
  fs_outputs o = {(int32_t *)(uintptr_t)tok, NULL, NULL};
  const fs_options opt = {.size = sizeof opt, .token_mask = (const uint32_t *)(uintptr_t)dmask,
                          .logprobs = (float *)(uintptr_t)dlp, .logit_softcap = a->softcap,
                          .logit_bias_tokens = (const int32_t *)(uintptr_t)dbt,
                          .logit_bias_values = (const float *)(uintptr_t)dbv,
                          .logit_bias_count = a->bias, .min_p = a->min_p, .top_k = a->top_k,
                          .top_p = a->top_p, .repetition_penalty = a->rep,
                          .top_logprobs = a->top,
                          .top_logprob_tokens = (int32_t *)(uintptr_t)dtt,
                          .top_logprob_values = (float *)(uintptr_t)dtv,
                          .ranks = (int32_t *)(uintptr_t)drk,
                          .target_tokens = (const int32_t *)(uintptr_t)dtg,
                          .target_logprobs = (float *)(uintptr_t)dtl,
                          .target_ranks = (int32_t *)(uintptr_t)dtr};
  char name[256];
  if ((st = fs_context_set_noise(ctx, a->noise)) || (st = fs_prepare(ctx, &p, &sm)) ||
      (st = fs_variant_name(ctx, &p, &sm, name, sizeof name)))
    goto fail;
  cu->cuCtxPushCurrent(ctx->cu_ctx);
  for (int i = 0; i < 3 && !st; i++) st = fs_sample_ex(ctx, &p, &sm, &opt, &o, NULL);
  cu->cuEventRecord(e0, NULL);
  for (int i = 0; i < a->iters && !st; i++) {
    sm.offset = (unsigned long long)i;
    st = fs_sample_ex(ctx, &p, &sm, &opt, &o, NULL);
  }
  cu->cuEventRecord(e1, NULL);
  cu->cuEventSynchronize(e1);
  float ms = 0;
  cu->cuEventElapsedTime(&ms, e0, e1);
  int32_t host_tok[16], host_tt[5], host_rk[8], host_tr[4];
  float host_lp[4], host_tv[5], host_tl[4];
  const int nshow = a->top < 5 ? a->top : 5;
  cu->cuMemcpyDtoH(host_tok, tok, (size_t)(a->B < 16 ? a->B : 16) * 4);
  if (dlp) cu->cuMemcpyDtoH(host_lp, dlp, (size_t)(a->B < 4 ? a->B : 4) * 4);
  if (drk) cu->cuMemcpyDtoH(host_rk, drk, (size_t)(a->B < 8 ? a->B : 8) * 4);
  if (dtg) {
    cu->cuMemcpyDtoH(host_tl, dtl, (size_t)(a->B < 4 ? a->B : 4) * 4);
    cu->cuMemcpyDtoH(host_tr, dtr, (size_t)(a->B < 4 ? a->B : 4) * 4);
  }
  if (nshow > 0) {
    cu->cuMemcpyDtoH(host_tt, dtt, (size_t)nshow * 4);
    cu->cuMemcpyDtoH(host_tv, dtv, (size_t)nshow * 4);
  }
  cu->cuCtxPopCurrent(&dummy);
  if (st) goto fail;
  double us = ms * 1e3 / a->iters, floor_us = wbytes / bw * 1e6;
  print_tokens(host_tok, a->B);
  printf("device: %s (sm_%d, %d SMs)\nvariant: %s\n", ctx->device_name, ctx->arch,
         ctx->sm_count, name);
  printf("B=%d D=%d V=%d %s: %.1f us per call (mean of %d back to back; W = %.2f GB > L2)\n",
         a->B, a->D, a->V, a->dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", us, a->iters,
         wbytes / 1e9);
  printf("floor: %.1f us (W bytes / measured read bandwidth %.2f TB/s) -> time/floor %.3f\n",
         floor_us, bw / 1e12, us / floor_us);
  if (mask) printf("token mask: each token allowed with probability %g\n", a->mask_density);
  if (a->softcap > 0.0f) printf("logit soft-cap: %g tanh(z / %g)\n", a->softcap, a->softcap);
  if (btok) printf("logit bias: %d random tokens a row, values in [-5, 5]\n", a->bias);
  if (a->rep != 0.0f) printf("repetition penalty: %g on those tokens\n", (double)a->rep);
  if (a->top_k || a->top_p > 0.0f || a->min_p > 0.0f)
    printf("filters: min_p %g, top_k %d, top_p %g\n", (double)a->min_p, a->top_k,
           (double)a->top_p);
  print_top(host_tt, host_tv, a->top); /* its first nshow were copied */
  if (drk) print_ranks(host_rk, a->B); /* its first 8 were copied */
  if (dtg) {
    printf("targets (id: logprob, rank):");
    for (int b = 0; b < (a->B < 4 ? a->B : 4); b++)
      printf(" %d: %.6g, %d", tg[b], (double)host_tl[b], host_tr[b]);
    printf("\n");
  }
  if (dlp) {
    printf("logprobs:");
    for (int b = 0; b < (a->B < 4 ? a->B : 4); b++) printf(" %.6g", (double)host_lp[b]);
    printf("\n");
  }
  const int rc =
      a->check ? check(ctx, a, H, W, &p, &sm, mask, btok, bval, tok, dlp, dtt, dtv, drk) : 0;
  free(mask);
  free(btok);
  free(bval);
  free(tg);
  return rc;
fail:
  free(mask);
  free(btok);
  free(bval);
  free(tg);
  fprintf(stderr, "fs-demo: %s: %s\n", fs_status_string(st), fs_last_error(ctx));
  if (*fs_last_compile_log(ctx)) fprintf(stderr, "%.4000s\n", fs_last_compile_log(ctx));
  return 1;
}

int main(int argc, char **argv) {
  args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc;
  fs_context *ctx = NULL;
  int st = fs_context_create(0, &ctx);
  if (st == FS_NO_DEVICE || st == FS_UNSUPPORTED) {
    printf("no usable GPU (%s): running the CPU reference instead\n", fs_last_error(NULL));
    return run_cpu(&a);
  }
  if (st) {
    fprintf(stderr, "fs-demo: %s: %s\n", fs_status_string(st), fs_last_error(NULL));
    return 1;
  }
  rc = run_gpu(ctx, &a);
  fs_context_destroy(ctx);
  return rc;
}
