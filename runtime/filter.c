/*
** filter.c: calls with filters (fs_options.min_p, top_k, top_p).
**
** A filter keeps a row's tokens above a threshold that depends on the whole
** row's order (the k-th largest logit, the mass above a value), so no token
** can be kept or dropped before every logit is known.  The call's fused
** kernel therefore runs first as a greedy call with fs_params.zout set: it
** writes every logit (after the soft-cap, before the mask) to the workspace,
** B rows of zout_stride floats after the fused kernel's own part; its draw
** goes to scratch and is not used.  fsamp_filter (templates/fsamp_filter.cu,
** compiled by NVRTC into a module of the context's own on its first
** filtered call) then takes a row per cluster of CTAs: the thresholds by
** radix selection, the draw with the fused kernels' own scores and noise,
** and the outputs (logits, keys and logprobs as without filters).  At small
** B a row's passes would leave most SMs idle, so on sm_90 a row takes a
** cluster of 2, 4 or 8 CTAs, the largest of which B clusters are
** co-resident (perf-notes 35; FS_FILTER_CLUSTER=N caps it, for tests; 16,
** the non-portable size, measured no faster and is not offered: perf-notes
** 39a, 39c).
** With a logit bias, fsamp_filter_bias runs between the two: each biased
** token's staged logit becomes its score (the logit, under the row's
** repetition penalty, plus its values), its
** raw logit kept in the workspace for the outputs, and with logprobs the
** raw log-sum-exp taken first; the filters then see the biased scores.
** A long bias takes this path with or without filters (fs_filter_path:
** above FS_BIAS_SHORT entries a row, or from B = 16 where its dot products
** would cost more; with no filters fsamp_filter draws over every candidate,
** as the fused kernel would), and no dot product an entry is taken.  From
** 257 entries (filters or not) fsamp_bias_dedup (bias.c) first makes each
** row's entries distinct, so that fsamp_filter_bias needs no search for
** repeats (its shared memory holds 1,024 entries at most).
** With top_logprobs (any call: fs_filter_path) fsamp_toplp and
** fsamp_toplp_merge list each row's most likely tokens from the raw logits
** right after the logits' pass, before any bias changes them, and leave
** the rows' log-sum-exps for fsamp_filter's logprobs; without a bias or a
** sampled call's filters the logits' pass is the call itself, whose fused
** kernel draws (pass_draws), and the merge writes the logprobs.
** With ranks (fs_options.ranks; any call: fs_filter_path) fsamp_rank runs
** last: a row's slices count its written logits against its draws'
** reported logits (outputs->logits, or the workspace where the caller
** asked for none), each slice first putting its biased ids' raw logits
** back where fsamp_filter_bias wrote their scores; where the logits' pass
** drew the call with top logprobs and at most FS_TOPLP_RANKS samples a row
** (fs_int.h), fsamp_toplp_ranks counts them in the lists' read instead.
** Where the logits take at most 2/3 of L2 (zout_keep) the pass stores them
** with an evict_last policy and a one-GPU call ends with fsamp_zout_drop,
** which discards their lines from L2 without a write to memory.
** In the tensor-parallel calls (fs_filter_tp_ranks) each rank counts its
** shard against the draws' reduced logits, as floats, and one more sum
** all-reduce adds the counts.
*/
#include "fs_int.h"
#include "fs_nvrtc.h"
#include "fs_params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILTER_THREADS 512 /* fsamp_filter's FT_THREADS */

/* fsamp_filter's third argument (fsamp_filter.cu's ft_bias) */
typedef struct filter_bias {
  const int32_t *tokens; /* [B, count] device, or NULL with count 0 */
  const float *raw;      /* [B, count] workspace: the entries' raw logits */
  int32_t count;
} filter_bias;

int fs_filter_compile(const char *target, fs_cubin *out, char *err, size_t errlen) {
  return fs_own_compile(FS_FILTER_TEMPLATE, NULL, target, out, err, errlen);
}

/* A launch of fsamp_filter on grid (cs, rows), a row a cluster of cs CTAs
** (at points into it: the cluster attribute, set only where cs > 1). */
static void filter_config(CUlaunchConfig *lc, CUlaunchAttribute *at, unsigned cs, unsigned rows,
                          CUstream stream) {
  memset(at, 0, sizeof *at);
  at->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  at->value.clusterDim.x = cs;
  at->value.clusterDim.y = at->value.clusterDim.z = 1;
  memset(lc, 0, sizeof *lc);
  lc->gridDimX = cs; /* fsamp_filter's row is blockIdx.y */
  lc->gridDimY = rows;
  lc->gridDimZ = 1;
  lc->blockDimX = FILTER_THREADS;
  lc->blockDimY = lc->blockDimZ = 1;
  lc->hStream = stream;
  lc->attrs = at;
  lc->numAttrs = cs > 1u ? 1 : 0;
}

/* After the module is loaded: how many clusters of each size (1, 2, 4, 8
** CTAs; only 1 below sm_90 or with FS_FILTER_CLUSTER=1) fit on the GPU at
** once. */
static int filter_clusters(fs_context *ctx) {
  int cap = 8;
  fs_env_int("FS_FILTER_CLUSTER", 0, 8, &cap);
  memset(ctx->filter_clusters, 0, sizeof ctx->filter_clusters);
  ctx->filter_clusters[0] = 1;
  for (int i = 1; i < 4 && ctx->arch >= 90 && (1 << i) <= cap; i++) {
    CUlaunchAttribute at;
    CUlaunchConfig lc;
    filter_config(&lc, &at, 1u << i, 1u, NULL);
    int n = 0;
    CUresult r = ctx->cu->cuOccupancyMaxActiveClusters(&n, ctx->filter_fn, &lc);
    if (r) return fs_cu_fail(ctx, r, "cuOccupancyMaxActiveClusters(fsamp_filter)", __FILE__,
                             __LINE__);
    ctx->filter_clusters[i] = n;
  }
  const char *lg = getenv("FS_LOG");
  if (lg && *lg && strcmp(lg, "0"))
    fprintf(stderr,
            "flashsampling: filters: co-resident clusters of 1/2/4/8 CTAs: %d/%d/%d/%d\n",
            ctx->filter_clusters[0], ctx->filter_clusters[1], ctx->filter_clusters[2],
            ctx->filter_clusters[3]);
  return FS_OK;
}

/* The CTAs of a row's cluster at batch B: the largest size of which B
** clusters run at once (a power of two: fsamp_filter shares FT_THREADS
** thread maxima out among them). */
static unsigned cluster_size(const fs_context *ctx, long long B) {
  for (int i = 3; i > 0; i--)
    if (ctx->filter_clusters[i] > 0 && B <= ctx->filter_clusters[i]) return 1u << i;
  return 1u;
}

/* Floats between the rows of the logits: V rounded up to whole float4s. */
static long long zout_stride(const fs_problem *p) { return ((long long)p->vocab + 3) / 4 * 4; }

static int capturing(fs_context *ctx, CUstream stream, int *yes) {
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  FS_CHECK_CU(ctx, ctx->cu->cuStreamIsCapturing(stream, &cs));
  *yes = cs != CU_STREAM_CAPTURE_STATUS_NONE;
  return FS_OK;
}

/* The kernel of the logits' pass: one that stages its tiles (fs_params.zout
** is written from the staged logits; the wt family samples in registers, and
** writing them out from there made its 128-accumulator tiles spill).  The
** plan's kernel of greedy calls, else of sampled ones, else the bucket's
** built-in default (loaded outside capture). */
static int logits_kernel(fs_context *ctx, const fs_problem *p, const fs_sampling *g,
                         CUstream stream, fs_kernel **out) {
  fs_sampling t = *g;
  t.temperature = 1.0f;
  FS_TRY(fs_plan_kernel(ctx, p, g, stream, out));
  if (strcmp((*out)->v.family, "wt")) return FS_OK;
  FS_TRY(fs_plan_kernel(ctx, p, &t, stream, out));
  if (strcmp((*out)->v.family, "wt")) return FS_OK;
  char err[512];
  fs_variant v;
  int st = fs_gen_default(ctx->gen, fs_target_arch(ctx->arch), p->dtype, fs_bucket(p->batch),
                          p->hidden, p->vocab, &v, err, sizeof err);
  if (st) return fs_err(ctx, st, "%s", err);
  if (!strcmp(v.family, "wt"))
    return fs_err(ctx, FS_INTERNAL, "the filters' logits pass: built-in default %s is of the wt "
                  "family, which cannot write its logits out", v.name);
  if ((*out = fs_kernel_find(ctx, v.name)) != NULL) return FS_OK;
  int cap = 0;
  FS_TRY(capturing(ctx, stream, &cap));
  if (cap)
    return fs_err(ctx, FS_NOT_PREPARED, "stream is capturing and the filters' logits pass at "
                  "B=%d, V=%d needs %s compiled (this bucket's kernels are of the wt family): "
                  "make one such call before capture", (int)p->batch, (int)p->vocab, v.name);
  return fs_kernel_load(ctx, &v, out);
}

/* fsamp_toplp's slices a row for n listed: about a CTA for two SMs in all
** (each reads its slice once; perf-notes 42), at most 512 / n for
** n <= 64 (so that fsamp_toplp_merge sorts their lists a key a thread),
** but at least 4 for 16 < B <= 64 and, for n <= 32,
** 2 up to B = SMs (about a wave of two CTAs an SM on the H200; perf-notes
** 45d); longer lists, whose slices' cuts weigh more, take SMs n / (128 B),
** at most 16 (ft_tmerge merges sorted lists; measured
** at n = 64 to 256 and B = 1 to 256: perf-notes 45b); at most
** FS_TOPLP_SLICES_MAX and a float4 a slice; ctx->toplp_slices > 0
** (FS_TOPLP_SLICES=G at the context's creation; tests, measurements) asks
** for G.  G = 1 writes the outputs without the merge. */
static unsigned slices_at(const fs_context *ctx, long long sms, long long B, int n,
                          long long q) {
  long long g = (sms + 2LL * B - 1) / (2LL * B);
  if (n <= 64) {
    g = g < 512 / n ? g : 512 / n;
    if (B > 16 && B <= 64)
      g = g > 4 ? g : 4;
    else if (n <= 32 && B <= sms)
      g = g > 2 ? g : 2;
  } else { /* two CTAs an SM for n = 256, one for 128, at most 16 */
    g = sms * n / (128LL * B);
    g = g < 16 ? g : 16;
  }
  if (ctx->toplp_slices > 0) g = ctx->toplp_slices;
  g = g < FS_TOPLP_SLICES_MAX ? g : FS_TOPLP_SLICES_MAX;
  g = g < q ? g : q;
  return (unsigned)(g > 1 ? g : 1);
}

static unsigned toplp_slices(const fs_context *ctx, const fs_problem *p, int n) {
  return slices_at(ctx, ctx->sm_count > 0 ? ctx->sm_count : 1, p->batch, n,
                   ((long long)p->vocab + 3) / 4);
}

/* A tensor-parallel rank's slices a row: the size of the lists' gather, so
** the same on every rank whatever its GPU or shard: toplp_slices's rule at
** FS_TP_TOPLP_SMS SMs and no cap by the shard (a slice past it lists
** nothing: 0 keys, an empty log-sum-exp pair), at most 66 for n <= 64 and
** 16 above; FS_TOPLP_SLICES (tests) must then be the same on every rank. */
#define FS_TP_TOPLP_SMS 132
static unsigned tp_toplp_slices(const fs_context *ctx, int B, int n) {
  return slices_at(ctx, FS_TP_TOPLP_SMS, B, n, FS_TOPLP_SLICES_MAX);
}

/* fsamp_toplp (or with ranks fsamp_toplp_ranks) over G slices of each of
** prm's B rows: the slices' lists and pairs at keys and pairs, or with one
** slice and tokens set the outputs (fsamp_filter.cu). */
static int toplp_launch(fs_context *ctx, fs_params *prm, int n, unsigned G, CUdeviceptr keys,
                        CUdeviceptr pairs, float *lse, int32_t *tokens, float *values,
                        int draws, const float *drawn, int32_t *ranks, CUstream stream) {
  void *args[] = {prm,     &n,      (void *)&keys,  (void *)&pairs, &lse,
                  &tokens, &values, &draws,         (void *)&drawn, (void *)&ranks};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->toplp_fn[ranks ? 2 : 0], G, (unsigned)prm->B, 1,
                                       FILTER_THREADS, 1, 1, 0, stream, args, NULL);
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_toplp)", __FILE__, __LINE__) : FS_OK;
}

/* fsamp_toplp_merge of each row's `slices` lists and pairs into the outputs. */
static int toplp_merge(fs_context *ctx, fs_params *prm, int n, int slices, CUdeviceptr keys,
                       CUdeviceptr pairs, float *lse, int32_t *tokens, float *values,
                       int draws, CUstream stream) {
  void *args[] = {prm,  &n,      &slices, (void *)&keys, (void *)&pairs,
                  &lse, &tokens, &values, &draws};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->toplp_fn[1], (unsigned)prm->B, 1, 1, FILTER_THREADS,
                                       1, 1, 0, stream, args, NULL);
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_toplp_merge)", __FILE__, __LINE__)
           : FS_OK;
}

/* The filters' module (fsamp_filter.cu), compiled and loaded on a context's
** first call that needs it; a failure leaves ctx without it. */
static int filter_load(fs_context *ctx) {
  if (ctx->filter_module) return FS_OK;
  /* FS_FILTER_GATHER=0 (tests): the long way, passes over the row only;
  ** measurements (scripts/gpu-filter-ab.sh): FS_FILTER_UNROLL=N float4s a
  ** thread's scan takes at once, FS_FILTER_PIPE=0|1 the next ones in
  ** flight meanwhile, FS_FILTER_MINB=1|2 CTAs an SM, FS_TOPLP_CUT=N keys
  ** fsamp_toplp keeps before it cuts them to n, FS_TOPLP_TROLLED=0|1
  ** its bounds' sort unrolled or rolled, FS_TOPLP_TU=2..4 float4s a
  ** thread a chunk, FS_TOPLP_MINB=1..3 its CTAs an SM, FS_TOPLP_MSHFL=0|1
  ** fsamp_toplp_merge's short strides by shuffles, FS_TARGET_QUAD=0|1
  ** fsamp_target's log-sum-exp a float4 or a logit at a time (fsamp_filter.cu) */
  static const char *const names[] = {"fsamp_filter",      "fsamp_filter_bias",
                                      "fsamp_ftp_stats",   "fsamp_ftp_round",
                                      "fsamp_ftp_draw",    "fsamp_toplp",
                                      "fsamp_toplp_merge", "fsamp_toplp_ranks",
                                      "fsamp_rank",        "fsamp_zout_drop",
                                      "fsamp_rank_int",    "fsamp_tp_place",
                                      "fsamp_target",      "fsamp_target_out",
                                      "fsamp_tp_target_key", "fsamp_tp_target_fin"};
  static const struct { const char *env, *macro; int lo, hi; } knobs[] = {
      {"FS_FILTER_UNROLL", "FT_UNROLL", 1, 16},
      {"FS_FILTER_PIPE", "FT_PIPE", 0, 1},
      {"FS_FILTER_MINB", "FT_MINB", 1, 2},
      {"FS_TOPLP_CUT", "FT_TCUT", 16, 4096},
      {"FS_TOPLP_TROLLED", "FT_TROLLED", 0, 1},
      {"FS_TOPLP_TU", "FT_TU", 2, 4},
      {"FS_TOPLP_MINB", "FT_TMINB", 1, 3},
      {"FS_TOPLP_MSHFL", "FT_TMSHFL", 0, 1},
      {"FS_TARGET_QUAD", "FT_TGT_QUAD", 0, 1}};
  const char *gather = getenv("FS_FILTER_GATHER");
  char head[384] = "";
  if (gather && !strcmp(gather, "0")) strcat(head, "#define FT_NO_GATHER 1\n");
  for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
    int v;
    if (fs_env_int(knobs[i].env, knobs[i].lo, knobs[i].hi, &v) > 0)
      snprintf(head + strlen(head), sizeof head - strlen(head), "#define %s %d\n",
               knobs[i].macro, v);
  }
  CUfunction fns[16];
  CUmodule mod = NULL; /* ctx->filter_module once every step has succeeded */
  FS_TRY(fs_own_module(ctx, FS_FILTER_TEMPLATE, head[0] ? head : NULL, "the filters' kernels",
                       names, 16, &mod, fns));
  ctx->filter_fn = fns[0];
  ctx->filter_bias_fn = fns[1];
  memcpy(ctx->ftp_fn, fns + 2, sizeof ctx->ftp_fn);
  memcpy(ctx->toplp_fn, fns + 5, sizeof ctx->toplp_fn);
  ctx->rank_fn = fns[8];
  ctx->zdrop_fn = fns[9];
  ctx->rank_int_fn = fns[10];
  ctx->tp_place_fn = fns[11];
  memcpy(ctx->target_fn, fns + 12, sizeof ctx->target_fn);
  const int st = filter_clusters(ctx);
  if (st) {
    ctx->cu->cuModuleUnload(mod);
    return st;
  }
  ctx->filter_module = mod;
  return FS_OK;
}

/* The steps of a filtered call before its filters: fsamp_filter's module
** (compiled on a context's first filtered call), the workspace (`extra`
** bytes more at fc->extra_at, 16-byte aligned: the tensor-parallel
** buffers), the logits' pass, and with a logit bias fsamp_filter_bias;
** the filters' arguments into fc, with o's outputs (o NULL: none). */
typedef struct filter_call {
  fs_kernel *k;   /* the logits' pass's kernel */
  fs_params prm;  /* the call's, with zout */
  fs_filter f;
  filter_bias fb; /* count 0: no bias */
  float *lse;     /* with a bias and logprobs, or top logprobs: the rows' raw
                     log-sum-exps, else NULL */
  size_t extra_at;
  int draw;       /* the logits' pass drew the call (top logprobs, ranks): no filter */
  float *drawn;   /* with ranks: the draws' reported logits ([B, S]), else NULL */
  int ranked;     /* fsamp_toplp counted the ranks (no fsamp_rank) */
  long long zlines; /* the logits' whole 128-byte lines */
  CUdeviceptr lists; /* a tensor-parallel rank's top-logprob lists and pairs (o NULL) */
  unsigned toplp_g;  /* their slices a row */
} filter_call;

/* Do the logits of a one-GPU filtered call, or of a tensor-parallel call
** whose ranks its fused pass draws (bytes of them), go to L2 with an
** evict_last policy (fs_params.zout_keep): where they take at most two
** thirds of L2 (H200: B <= 69 at V = 151,936), so that the kernels after
** the pass read them there and the W stream's lines go first; the call's
** last kernel, fsamp_zout_drop, then discards them, so that they neither
** hold L2 after the call nor are ever written to memory.  FS_ZOUT_KEEP=0|1
** at the context's creation (measurements): never, always. */
static int zout_keep(const fs_context *ctx, size_t bytes) {
  if (ctx->zout_keep >= 0) return ctx->zout_keep;
  return ctx->l2_bytes > 0 && bytes <= (size_t)ctx->l2_bytes / 3 * 2;
}

/* Does a call with top logprobs, ranks or targets draw in its logits' pass:
** neither a bias nor filters of a sampled call need the logits before the
** draw, so the call's own fused kernel draws while it writes them (and
** fsamp_toplp_merge writes the logprobs, or without top logprobs the fused
** kernel itself), and fsamp_filter does not run (perf-notes 42). */
static int pass_draws(const fs_context *ctx, const fs_sampling *s, const fs_opts *m) {
  return (m->top_n > 0 || m->ranks || m->targets) && m->bias_count == 0 &&
         !(m->filter && fs_call_mode(ctx, s) != FS_CALL_GREEDY);
}

/* fsamp_rank's and fsamp_target's slices a row: about two CTAs an SM in all, each at least
** 1,024 float4s of the row (a read, no more work a float than a compare). */
static unsigned rank_slices(const fs_context *ctx, const fs_problem *p) {
  const long long q = ((long long)p->vocab + 3) / 4;
  const long long sms = ctx->sm_count > 0 ? ctx->sm_count : 1;
  long long g = (2 * sms + p->batch - 1) / p->batch, most = q / 1024;
  g = g < most ? g : most;
  return (unsigned)(g > 1 ? g : 1);
}

/* fs_options.target_*: fsamp_target over rank_slices' slices of each row
** of prm->zout (the raw logits), then with more than one slice a row
** fsamp_target_out, which merges the slices' B x G parts at `parts`. */
static int target_run(fs_context *ctx, const fs_problem *p, fs_params *prm, const fs_opts *m,
                      CUdeviceptr parts, CUstream stream) {
  const unsigned G = rank_slices(ctx, p);
  const int32_t *t = m->targets;
  float *lp = m->target_lp;
  int32_t *rk = m->target_ranks;
  const void *none = NULL; /* one GPU: no reduced keys, no shard parts */
  void *args[] = {prm, (void *)&t, &parts, &lp, &rk, &none};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->target_fn[0], G, (unsigned)p->batch, 1,
                                       FILTER_THREADS, 1, 1, 0, stream, args, NULL);
  if (r) return fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_target)", __FILE__, __LINE__);
  if (G == 1u) return FS_OK; /* the slice wrote the outputs */
  int g = (int)G;
  void *oargs[] = {prm, (void *)&t, &parts, &g, &lp, &rk, &none, &none};
  r = ctx->cu->cuLaunchKernel(ctx->target_fn[1], (unsigned)((p->batch + 3) / 4), 1, 1, 128, 1,
                              1, 0, stream, oargs, NULL); /* a warp a row */
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_target_out)", __FILE__, __LINE__) : FS_OK;
}

static int filter_begin(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                        const fs_opts *m, const fs_outputs *o, size_t extra, CUstream stream,
                        filter_call *fc) {
  /* the logits' pass: a greedy call of one sample, unmasked, no logprobs;
  ** or (pass_draws) the call itself, its draws into o */
  memset(fc, 0, sizeof *fc);
  fc->draw = o && pass_draws(ctx, s, m);
  fs_sampling g = *s;
  if (!fc->draw) {
    g.temperature = 0.0f;
    g.temperatures = NULL;
    g.num_samples = 1;
  }
  FS_TRY(logits_kernel(ctx, p, &g, stream, &fc->k));
  const size_t B = (size_t)p->batch, zs = (size_t)zout_stride(p);
  /* the logits at a 128-byte line (fsamp_zout_drop discards whole lines) */
  const size_t zat =
      (fs_workspace_need(ctx, fc->k, p->batch, p->vocab, g.num_samples) + 127) / 128 * 128;
  /* then the scratch tokens; with a bias its entries' raw logits and the
  ** rows' raw log-sum-exps, and with a long one (long_bias) its
  ** entries made distinct (tokens, values); then the extra bytes */
  const size_t nb = m->bias_count > 0 ? (size_t)m->bias_count : 0u;
  /* made distinct first: a long list, any that fsamp_filter_bias's shared
  ** memory would not hold (FS_BIAS_SHORT raised), and from 257 entries,
  ** where its O(count^2) search costs more than the sort (perf-notes 41b) */
  const int long_bias = m->bias_count > ctx->bias_short || m->bias_count > FS_BIAS_SHORT ||
                        (m->bias_count > 256 && fs_bias_key_bits(p->vocab, m->bias_count));
  const size_t tat = zat + B * zs * 4, rat = (tat + B * 4 + 15) / 16 * 16, lat = rat + B * nb * 4;
  const size_t dat = (lat + B * 4 + 15) / 16 * 16; /* the distinct entries (long_bias) */
  /* with top logprobs, the slices' lists and log-sum-exp pairs (and the
  ** rows' log-sum-exps at lat); a tensor-parallel rank's (o NULL) kept as
  ** lists, tp_toplp_slices of them, for fs_filter_tp_toplp_merge's gather */
  const int nt = m->top_n, tp_nt = nt && !o;
  const unsigned G = tp_nt ? tp_toplp_slices(ctx, p->batch, nt)
                     : nt  ? toplp_slices(ctx, p, nt)
                           : 0u;
  const size_t kat = ((long_bias ? dat + B * nb * 8 : nb || nt ? lat + B * 4 : tat + B * 4) + 15) /
                     16 * 16,
               pat = kat + B * G * (size_t)nt * 8;
  /* with ranks and no outputs->logits, the draws' logits for fsamp_rank */
  const size_t dlat = (pat + B * G * 8 + 15) / 16 * 16;
  const int own_logits = m->ranks && o && !o->logits;
  /* with targets, fsamp_target's parts (16 bytes a slice) */
  const size_t tgat = (dlat + (own_logits ? B * (size_t)s->num_samples * 4 : 0) + 15) / 16 * 16;
  fc->extra_at = tgat + (m->targets ? B * rank_slices(ctx, p) * 16 : 0);
  const size_t bytes = fc->extra_at + extra;
  if (!ctx->filter_module || (long_bias && !ctx->bias_module) || bytes > ctx->workspace_bytes) {
    int cap = 0;
    FS_TRY(capturing(ctx, stream, &cap));
    char why[96] = "options->min_p/top_k/top_p are set";
    if (nt)
      snprintf(why, sizeof why, "options->top_logprobs=%d writes the logits out (fs_options)",
               nt);
    else if (m->ranks)
      snprintf(why, sizeof why, "options->ranks writes the logits out (fs_options)");
    else if (m->targets)
      snprintf(why, sizeof why, "options->target_tokens writes the logits out (fs_options)");
    else if (!m->filter || fs_call_mode(ctx, s) == FS_CALL_GREEDY)
      snprintf(why, sizeof why, "options->logit_bias_count=%d takes the filters' path "
               "(fs_options)", m->bias_count);
    if (cap)
      return fs_err(ctx, FS_NOT_PREPARED,
                    "stream is capturing and %s at B=%d, V=%d: the first such call %s; make "
                    "one before capture", why, (int)p->batch, (int)p->vocab,
                    !ctx->filter_module || (long_bias && !ctx->bias_module)
                        ? "on a context compiles its kernels"
                        : "at this size grows the workspace (B x V x 4 bytes and more)");
    if (long_bias) FS_TRY(fs_bias_load(ctx));
    FS_TRY(filter_load(ctx));
    FS_TRY(fs_workspace_reserve(ctx, bytes));
  }
  float *zout = (float *)(uintptr_t)(ctx->workspace + zat);
  fs_opts z;
  memset(&z, 0, sizeof z);
  if (fc->draw) { /* the call's mask; its logprobs from fsamp_toplp_merge's sums, or
                    without top logprobs its own */
    z.words = m->words;
    z.stride = m->stride;
    if (!nt) z.logprobs = m->logprobs;
  }
  z.softcap = m->softcap;
  z.zout = zout;
  z.zout_stride = (long long)zs;
  z.zout_keep = o && zout_keep(ctx, B * zs * 4);
  fs_outputs scratch;
  memset(&scratch, 0, sizeof scratch);
  scratch.tokens = (int32_t *)(uintptr_t)(ctx->workspace + tat);
  fs_outputs drawn = scratch;
  if (o) {
    drawn = *o;
    if (own_logits) drawn.logits = (float *)(uintptr_t)(ctx->workspace + dlat);
    fc->drawn = m->ranks ? drawn.logits : NULL;
  }
  FS_TRY(fs_launch_masked(ctx, fc->k, p, &g, &z, fc->draw ? &drawn : &scratch, stream));

  fs_params_call(&fc->prm, p, s, m);
  if (o) { /* tensor parallelism (o NULL): the rank's draw goes to the workspace */
    fc->prm.tokens = o->tokens;
    fc->prm.logits = drawn.logits;
    fc->prm.keys = (unsigned long long *)o->keys;
  }
  fc->prm.logprobs = m->logprobs;
  fc->prm.zout = zout;
  fc->prm.zout_stride = (long long)zs;
  fc->prm.zout_keep = z.zout_keep;
  fc->zlines = (long long)(B * zs * 4 / 128);
  fc->f.min_ps = m->min_ps;
  fc->f.top_ks = m->top_ks;
  fc->f.top_ps = m->top_ps;
  fc->f.min_p = m->min_p;
  fc->f.top_k = m->top_k;
  fc->f.top_p = m->top_p;
  if ((nb && m->logprobs) || (nt && !tp_nt))
    fc->lse = (float *)(uintptr_t)(ctx->workspace + lat);
  if (nt) { /* the raw logits' lists, before the bias below changes any */
    CUdeviceptr keys = ctx->workspace + kat, pairs = ctx->workspace + pat;
    int n = nt, draws = fc->draw;
    int32_t *tokens = tp_nt ? NULL : m->top_tokens;
    float *values = tp_nt ? NULL : m->top_values;
    float *lse = tp_nt ? NULL : fc->lse;
    fc->lists = keys; /* pairs at keys + B G n 8: pat */
    fc->toplp_g = G;
    /* ranks in the same read where the pass drew the call (the logits stay
    ** as written: no bias, no filter after it) */
    fc->ranked = m->ranks && fc->draw && s->num_samples <= ctx->toplp_ranks;
    int32_t *ranks = fc->ranked ? m->ranks : NULL;
    if (ranks && G > 1u) /* the slices add into them; one slice a row writes them */
      FS_CHECK_CU(ctx, ctx->cu->cuMemsetD32Async((CUdeviceptr)(uintptr_t)ranks, 0,
                                                 B * (size_t)s->num_samples, stream));
    FS_TRY(toplp_launch(ctx, &fc->prm, n, G, keys, pairs, lse, tokens, values, draws,
                        fc->drawn, ranks, stream));
    if (G > 1u && !tp_nt) /* one slice a row wrote the outputs itself */
      FS_TRY(toplp_merge(ctx, &fc->prm, n, (int)G, keys, pairs, fc->lse, tokens, values, draws,
                         stream));
  }
  if (m->targets) /* the raw logits, before the bias below changes any */
    FS_TRY(target_run(ctx, p, &fc->prm, m, ctx->workspace + tgat, stream));
  if (nb) {
    const float *values = m->bias_values;
    int distinct = 0; /* fsamp_bias_dedup's entries: no repeats to look for */
    fc->fb.tokens = m->bias_tokens;
    if (long_bias) {
      const CUdeviceptr dt = ctx->workspace + dat, dv = dt + B * nb * 4;
      FS_TRY(fs_bias_dedup(ctx, p, m, dt, dv, stream));
      fc->fb.tokens = (const int32_t *)(uintptr_t)dt;
      values = (const float *)(uintptr_t)dv;
      distinct = 1;
    }
    fc->fb.raw = (float *)(uintptr_t)(ctx->workspace + rat);
    fc->fb.count = m->bias_count;
    float rep = m->rep; /* the repetition penalty, applied with the values */
    const float *reps = m->reps;
    float *blse = nt && !tp_nt ? NULL : fc->lse; /* fsamp_toplp_merge took it */
    void *bargs[] = {&fc->prm, (void *)&fc->fb.tokens, (void *)&values, &fc->fb.count,
                     (void *)&fc->fb.raw, &blse, &rep, (void *)&reps, &distinct};
    FS_CHECK_CU(ctx, ctx->cu->cuLaunchKernel(ctx->filter_bias_fn, (unsigned)p->batch, 1, 1,
                                             FILTER_THREADS, 1, 1, 0, stream, bargs, NULL));
  }
  return FS_OK;
}

/* After the draw: the n = B x S counts at `at` zeroed, then fsamp_rank adds
** each slice's counts of the logits >= drawn into them (as floats with
** as_float: a tensor-parallel rank's). */
static int rank_count(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                      fs_params *prm, const float *drawn, filter_bias *fb, CUdeviceptr at,
                      int as_float, CUstream stream) {
  const size_t n = (size_t)p->batch * (size_t)s->num_samples;
  FS_CHECK_CU(ctx, ctx->cu->cuMemsetD32Async(at, 0, n, stream));
  void *args[] = {prm, (void *)&drawn, (void *)&at, fb, &as_float};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->rank_fn, rank_slices(ctx, p), (unsigned)p->batch, 1,
                                       FILTER_THREADS, 1, 1, 0, stream, args, NULL);
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_rank)", __FILE__, __LINE__) : FS_OK;
}

int fs_filter_tp_zout(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                      const fs_opts *m, int R, CUstream stream, fs_kernel **k, fs_tp_rank *tr) {
  const int top_n = m->top_n;
  if ((m->ranks || m->targets) && p->vocab > (1 << 24) - 8) /* the counts are floats */
    return fs_err(ctx, FS_INVALID_ARGUMENT, "problem->vocab=%d: with %s the tensor-parallel "
                  "calls take shards of at most 2^24 - 8 rows", (int)p->vocab,
                  m->ranks ? "ranks" : "target_tokens");
  FS_TRY(logits_kernel(ctx, p, s, stream, k));
  const size_t B = (size_t)p->batch, zs = (size_t)zout_stride(p),
               n = B * (size_t)s->num_samples;
  /* after the call's workspace, the logits at a 128-byte line
  ** (fsamp_zout_drop discards whole lines), then the n counts; with top
  ** logprobs the shard's lists and pairs, then the R ranks'; with targets
  ** their buffers (fs_filter_tp_targets) */
  const size_t zat =
      (fs_workspace_need(ctx, *k, p->batch, p->vocab, s->num_samples) + 127) / 128 * 128;
  const unsigned G = top_n ? tp_toplp_slices(ctx, p->batch, top_n) : 0u;
  const unsigned TG = m->targets ? rank_slices(ctx, p) : 0u;
  const size_t cat = zat + B * zs * 4, lat = (cat + n * 4 + 15) / 16 * 16,
               words = B * G * ((size_t)top_n + 1), gat = lat + words * 8,
               tat = (gat + words * (size_t)R * 8 + 15) / 16 * 16,
               bytes = tat + (m->targets ? B * (24 + 16 * (size_t)TG) : 0);
  if (!ctx->filter_module || bytes > ctx->workspace_bytes) {
    int cap = 0;
    FS_TRY(capturing(ctx, stream, &cap));
    if (cap)
      return fs_err(ctx, FS_NOT_PREPARED,
                    "stream is capturing and options->%s writes the shard's logits out "
                    "(fs_options) at B=%d, V=%d: the first such call %s; make one before "
                    "capture", top_n ? "top_logprobs" : m->ranks ? "ranks" : "target_tokens",
                    (int)p->batch, (int)p->vocab,
                    !ctx->filter_module ? "on a context compiles its kernels"
                                        : "at this size grows the workspace (B x V x 4 bytes)");
    FS_TRY(filter_load(ctx));
    FS_TRY(fs_workspace_reserve(ctx, bytes));
  }
  memset(tr, 0, sizeof *tr);
  tr->zout = (float *)(uintptr_t)(ctx->workspace + zat);
  tr->zout_stride = (long long)zs;
  tr->counts = ctx->workspace + cat;
  tr->zout_keep = zout_keep(ctx, B * zs * 4);
  tr->zlines = (long long)(B * zs * 4 / 128);
  tr->toplp_g = G;
  tr->lists = ctx->workspace + lat;
  tr->gather = ctx->workspace + gat;
  tr->target_g = TG;
  tr->targets = ctx->workspace + tat;
  return FS_OK;
}

/* fsamp_zout_drop over the `lines` whole 128-byte lines of prm->zout: the
** last kernel of a call whose logits went to L2 with evict_last (zout_keep),
** after every read of them. */
static int zout_drop(fs_context *ctx, fs_params *prm, long long lines, CUstream stream) {
  const long long most = 2LL * (ctx->sm_count > 0 ? ctx->sm_count : 1),
                  need = (lines + 255) / 256; /* a line a thread at most once round */
  const unsigned grid = (unsigned)(need < most ? (need > 0 ? need : 1) : most);
  void *args[] = {prm, &lines};
  CUresult r =
      ctx->cu->cuLaunchKernel(ctx->zdrop_fn, grid, 1, 1, 256, 1, 1, 0, stream, args, NULL);
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_zout_drop)", __FILE__, __LINE__) : FS_OK;
}

int fs_filter_tp_ranks(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                       const fs_opts *m, const fs_tp_coll *c, const fs_tp_rank *tr,
                       const float *drawn, CUstream stream) {
  fs_params prm;
  fs_params_call(&prm, p, s, m);
  prm.zout = tr->zout;
  prm.zout_stride = tr->zout_stride;
  filter_bias fb = {tr->bias_tokens, tr->bias_raw, tr->bias_count};
  FS_TRY(rank_count(ctx, p, s, &prm, drawn, &fb, tr->counts, 1, stream));
  if (tr->zout_keep && !m->targets) FS_TRY(zout_drop(ctx, &prm, tr->zlines, stream));
  int n = p->batch * s->num_samples;
  FS_TRY(fs_tp_reduce(ctx, c, tr->counts, tr->counts, (size_t)n, FS_REDUCE_SUM_F32, stream));
  int32_t *ranks = m->ranks;
  void *args[] = {(void *)&tr->counts, &n, (void *)&ranks};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->rank_int_fn, (unsigned)((n + 127) / 128), 1, 1, 128,
                                       1, 1, 0, stream, args, NULL);
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_rank_int)", __FILE__, __LINE__) : FS_OK;
}

int fs_launch_small(fs_context *ctx, CUfunction f, const char *name, unsigned blocks,
                    void **args, void *stream) {
  CUresult r = ctx->cu->cuLaunchKernel(f, blocks, 1, 1, 128, 1, 1, 0, (CUstream)stream, args,
                                       NULL);
  return r ? fs_cu_fail(ctx, r, name, __FILE__, __LINE__) : FS_OK;
}

int fs_filter_tp_targets(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                         const fs_opts *m, const fs_tp_coll *c, const fs_tp_rank *tr,
                         CUstream stream) {
  fs_params prm;
  fs_params_call(&prm, p, s, m);
  prm.zout = tr->zout;
  prm.zout_stride = tr->zout_stride;
  int B = p->batch, G = (int)tr->target_g, step = 0;
  const unsigned rows = (unsigned)((B + 127) / 128);
  /* at tr->targets (16-byte aligned): B x G float4 parts, B zt keys, B
  ** log-sum-exp keys, B (L, count) pairs */
  CUdeviceptr parts = tr->targets, zk = parts + (size_t)B * G * 16, lk = zk + (size_t)B * 8,
              sh = lk + (size_t)B * 8;
  const int32_t *t = m->targets;
  float *lp = m->target_lp;
  int32_t *rk = m->target_ranks;
  void *kargs[] = {&prm, (void *)&t, &zk};
  FS_TRY(fs_launch_small(ctx, ctx->target_fn[2], "cuLaunchKernel(fsamp_tp_target_key)", rows,
                         kargs, stream));
  FS_TRY(fs_tp_reduce(ctx, c, zk, zk, (size_t)B, FS_REDUCE_MAX_U64, stream));
  const void *none = NULL;
  void *args[] = {&prm, (void *)&t, &parts, &none, &none, &zk};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->target_fn[0], (unsigned)G, (unsigned)B, 1,
                                       FILTER_THREADS, 1, 1, 0, stream, args, NULL);
  if (r) return fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_target)", __FILE__, __LINE__);
  void *oargs[] = {&prm, (void *)&t, &parts, &G, &none, &none, &lk, &sh};
  FS_TRY(fs_launch_small(ctx, ctx->target_fn[1], "cuLaunchKernel(fsamp_target_out)",
                         (unsigned)((B + 3) / 4), oargs, stream));
  if (tr->zout_keep) FS_TRY(zout_drop(ctx, &prm, tr->zlines, stream)); /* the last read */
  FS_TRY(fs_tp_reduce(ctx, c, lk, lk, (size_t)B, FS_REDUCE_MAX_U64, stream));
  void *fargs[] = {&B, &step, &zk, &lk, &sh, &lp, &rk};
  FS_TRY(fs_launch_small(ctx, ctx->target_fn[3], "cuLaunchKernel(fsamp_tp_target_fin)", rows,
                         fargs, stream));
  FS_TRY(fs_tp_reduce(ctx, c, sh, sh, 2 * (size_t)B, FS_REDUCE_SUM_F32, stream));
  step = 1;
  return fs_launch_small(ctx, ctx->target_fn[3], "cuLaunchKernel(fsamp_tp_target_fin)", rows,
                         fargs, stream);
}

int fs_filter_tp_toplp_local(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                             const fs_opts *m, const fs_tp_rank *tr, CUstream stream) {
  fs_params prm;
  fs_params_call(&prm, p, s, m);
  prm.zout = tr->zout;
  prm.zout_stride = tr->zout_stride;
  const size_t B = (size_t)p->batch, G = tr->toplp_g;
  /* tokens NULL: the lists, even with one slice */
  FS_TRY(toplp_launch(ctx, &prm, m->top_n, (unsigned)G, tr->lists,
                      tr->lists + B * G * (size_t)m->top_n * 8, NULL, NULL, NULL, 0, NULL, NULL,
                      stream));
  if (tr->zout_keep && !m->ranks && !m->targets)
    FS_TRY(zout_drop(ctx, &prm, tr->zlines, stream));
  return FS_OK;
}

/* fsamp_tp_place of `width` words a row from src into R parts at dst. */
static int tp_place(fs_context *ctx, unsigned rows, CUdeviceptr src, CUdeviceptr dst, int width,
                    int R, int rank, CUstream stream) {
  void *args[] = {(void *)&src, (void *)&dst, &width, &R, &rank};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->tp_place_fn, rows, 1, 1, 256, 1, 1, 0, stream, args,
                                       NULL);
  return r ? fs_cu_fail(ctx, r, "cuLaunchKernel(fsamp_tp_place)", __FILE__, __LINE__) : FS_OK;
}

int fs_filter_tp_toplp_merge(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                             const fs_opts *m, const fs_tp_coll *c, const fs_tp_rank *tr,
                             float *drawn, CUstream stream) {
  const int n = m->top_n, G = (int)tr->toplp_g, R = c->ranks;
  const size_t B = (size_t)p->batch, lk = B * (size_t)G * n, gk = lk * (size_t)R;
  /* the lists' part, then the pairs' (a float2 a word) */
  FS_TRY(tp_place(ctx, (unsigned)B, tr->lists, tr->gather, G * n, R, c->rank, stream));
  FS_TRY(tp_place(ctx, (unsigned)B, tr->lists + lk * 8, tr->gather + gk * 8, G, R, c->rank,
                  stream));
  FS_TRY(fs_tp_reduce(ctx, c, tr->gather, tr->gather, gk + B * (size_t)G * R,
                      FS_REDUCE_MAX_U64, stream));
  fs_params prm;
  fs_params_call(&prm, p, s, m);
  prm.logits = drawn;
  prm.logprobs = drawn ? m->logprobs : NULL;
  /* draws 2: the draws' logprobs from their reduced logits */
  return toplp_merge(ctx, &prm, n, G * R, tr->gather, tr->gather + gk * 8, NULL, m->top_tokens,
                     m->top_values, 2, stream);
}

int fs_sample_filtered(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                       const fs_opts *m, const fs_outputs *o, CUstream stream) {
  filter_call fc;
  FS_TRY(filter_begin(ctx, p, s, m, o, 0, stream, &fc));
  if (!fc.draw) {
    void *args[] = {&fc.prm, &fc.f, &fc.fb, &fc.lse};
    CUlaunchAttribute at;
    CUlaunchConfig lc;
    filter_config(&lc, &at, cluster_size(ctx, p->batch), (unsigned)p->batch, stream);
    CUresult r = ctx->cu->cuLaunchKernelEx(&lc, ctx->filter_fn, args, NULL);
    if (r) return fs_cu_fail(ctx, r, "cuLaunchKernelEx(fsamp_filter)", __FILE__, __LINE__);
  }
  if (m->ranks && !fc.ranked)
    FS_TRY(rank_count(ctx, p, s, &fc.prm, fc.drawn, &fc.fb, (CUdeviceptr)(uintptr_t)m->ranks, 0,
                      stream));
  if (fc.prm.zout_keep) /* the last read of the logits is done */
    FS_TRY(zout_drop(ctx, &fc.prm, fc.zlines, stream));
  return FS_OK;
}

/* ---- tensor parallelism ----------------------------------------------------
** fsamp_filter.cu's fsamp_ftp_* kernels, a row over G CTAs (G <= 32, and
** G R <= 4096 where the rank count R is known (NCCL), so that the ranks'
** sums of 12-bit limbs stay exact; an engine's collective: up to 128): the
** shard's largest candidate, +inf flag and top-k's list bound (ftp_list),
** max-reduced; then a pass of
** top-k's radix selection (counts, two limbs a bin: rounds 0-2) and of
** top-p's (masses, five: value bins, then the radix's three; rounds 3-6) a
** launch each, the bins sum-reduced, each launch taking the previous
** pass's digit; then the shard's draw.  Only the selections
** the call's options can ask for run (the same on every rank: their
** per-row values are read by the kernels). */
#define FTP_STATE_BYTES 48         /* fsamp_filter.cu's ftp_state (asserted there) */
#define FTP_MAX_SLICES 32
#define FTP_LIST_CAP 4096          /* fsamp_filter.cu's FTP_CAP: top-k's list a row */

static int ftp_launch(fs_context *ctx, int which, unsigned slices, unsigned rows, void **args,
                      CUstream stream) {
  static const char *const what[] = {"cuLaunchKernel(fsamp_ftp_stats)",
                                     "cuLaunchKernel(fsamp_ftp_round)",
                                     "cuLaunchKernel(fsamp_ftp_draw)"};
  CUresult r = ctx->cu->cuLaunchKernel(ctx->ftp_fn[which], slices, rows, 1, FILTER_THREADS, 1, 1,
                                       0, stream, args, NULL);
  return r ? fs_cu_fail(ctx, r, what[which], __FILE__, __LINE__) : FS_OK;
}

int fs_filter_tp(fs_context *ctx, const fs_problem *p, const fs_sampling *s, const fs_opts *m,
                 const fs_tp_coll *c, CUstream stream, fs_kernel **k, CUdeviceptr *lk,
                 CUdeviceptr *gk, CUdeviceptr *ll, fs_tp_rank *tr) {
  const size_t B = (size_t)p->batch, n = B * (size_t)s->num_samples, len = n + B;
  /* a slice's counts fit two limbs (24 bits) */
  if (p->vocab > (1 << 24) - 8)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "problem->vocab=%d: with filters, ranks or a long "
                  "logit bias the tensor-parallel calls take shards of at most 2^24 - 8 rows",
                  (int)p->vocab);
  /* slices a row: about two CTAs an SM in all, and G R <= 4096 (exact sums) */
  const size_t gmax = c->ranks > 0 ? (size_t)(4096 / c->ranks) : FTP_MAX_SLICES;
  if (gmax == 0)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "the communicator has %d ranks: with filters the "
                  "tensor-parallel calls take at most 4096 (exact histogram sums)", c->ranks);
  size_t G = (2 * (size_t)(ctx->sm_count > 0 ? ctx->sm_count : 1) + B - 1) / B;
  G = G > FTP_MAX_SLICES ? FTP_MAX_SLICES : G;
  G = G > gmax ? gmax : G;
  /* what the options can ask for: top-k's rounds (and its list where k <=
  ** 512 can be), top-p's (five limbs a bin, top-k's two) */
  const int with_k = m->top_ks || m->top_k > 0,
            with_p = m->top_ps || (m->top_p > 0.0f && m->top_p < 1.0f),
            with_list = m->top_ks || (m->top_k > 0 && m->top_k <= 512);
  const size_t hist_bytes = B * 2048 * (with_p ? 5 : 2) * 4;
  /* st [3 B], the rows' draw counters [B] and list counters [B], then the
  ** keys local and global [len] (zeroed with st and the counters), the
  ** logits [len], the slices' log-sum-exp pairs [B G], two states a row,
  ** two histograms, the rows' lists (top-k's, FTP_LIST_CAP float2s) and
  ** with ranks their n counts */
  const size_t lk_at = (B * 32 + 15) / 16 * 16, ll_at = lk_at + len * 16,
               lsep_at = (ll_at + len * 4 + 15) / 16 * 16, state_at = lsep_at + B * G * 8,
               h0_at = (state_at + 2 * B * FTP_STATE_BYTES + 15) / 16 * 16,
               list_at = h0_at + 2 * hist_bytes,
               rc_at = list_at + (with_list ? B * FTP_LIST_CAP * 8 : 0),
               gat_at = (rc_at + (m->ranks ? n * 4 : 0) + 15) / 16 * 16,
               tg = m->top_n ? tp_toplp_slices(ctx, p->batch, m->top_n) : 0u,
               extra = gat_at + B * tg * ((size_t)m->top_n + 1) * (size_t)c->ranks * 8;
  filter_call fc;
  FS_TRY(filter_begin(ctx, p, s, m, NULL, extra, stream, &fc));
  const CUdeviceptr base = ctx->workspace + fc.extra_at, st = base, cnt = base + B * 24,
                    lcnt = cnt + B * 4, list = base + list_at, lsep = base + lsep_at,
                    state[2] = {base + state_at, base + state_at + B * FTP_STATE_BYTES},
                    hist[2] = {base + h0_at, base + h0_at + hist_bytes};
  *k = fc.k;
  *lk = base + lk_at;
  *gk = *lk + len * 8;
  *ll = base + ll_at;
  tr->zout = fc.prm.zout;
  tr->zout_stride = fc.prm.zout_stride;
  tr->bias_tokens = fc.fb.tokens;
  tr->bias_raw = fc.fb.raw;
  tr->bias_count = fc.fb.count;
  tr->counts = base + rc_at;
  tr->toplp_g = fc.toplp_g; /* with top logprobs: filter_begin's lists, the gather's room */
  tr->lists = fc.lists;
  tr->gather = base + gat_at;
  const unsigned g = (unsigned)G, rows = (unsigned)B;
  FS_CHECK_CU(ctx, ctx->cu->cuMemsetD32Async(st, 0, (lk_at + n * 8) / 4, stream));
  CUdeviceptr pairs = m->logprobs && !fc.lse ? lsep : 0;
  void *sargs[] = {&fc.prm, &fc.f, (void *)&st, &pairs};
  FS_TRY(ftp_launch(ctx, 0, g, rows, sargs, stream));
  FS_TRY(fs_tp_reduce(ctx, c, st, st, 3 * B, FS_REDUCE_MAX_U64, stream));
  /* the rounds the options can ask for: top-k's 0-2, top-p's 3-6 */
  int prev = -1;
  for (int next = with_k ? 0 : 3; next < (with_p ? 7 : 3); next++) {
    const CUdeviceptr hin = hist[prev & 1], hout = hist[next & 1], sin = state[prev & 1],
                      sout = state[next & 1];
    const size_t count = B * (next == 2 || next == 6 ? 1024 : 2048) * (next < 3 ? 2 : 5);
    FS_CHECK_CU(ctx, ctx->cu->cuMemsetD32Async(hout, 0, count, stream));
    void *args[] = {&fc.prm,      &fc.f, (void *)&st,   (void *)&hin,  (void *)&hout,
                    (void *)&sin, (void *)&sout, &prev, &next, (void *)&list, (void *)&lcnt};
    FS_TRY(ftp_launch(ctx, 1, g, rows, args, stream));
    FS_TRY(fs_tp_reduce(ctx, c, hout, hout, count, FS_REDUCE_SUM_F32, stream));
    prev = next;
  }
  /* prev's histogram and state (unread with prev -1) */
  const CUdeviceptr hin = hist[prev & 1], sin = state[prev & 1];
  CUdeviceptr lse_keys = m->logprobs ? *lk + n * 8 : 0;
  void *dargs[] = {&fc.prm,      &fc.f,        &fc.fb,    (void *)&st,   (void *)&hin,
                   (void *)&sin, &prev,        (void *)lk, (void *)ll,    (void *)&cnt,
                   &fc.lse,      &pairs,       &lse_keys, (void *)&list, (void *)&lcnt};
  return ftp_launch(ctx, 2, g, rows, dargs, stream);
}
