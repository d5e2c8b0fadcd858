/*
** tp.c: sampling over a vocabulary-sharded LM head (tensor parallelism).
**
** The fused kernel runs on this rank's shard and leaves its best key per
** (row, sample) in the workspace; one max all-reduce of the keys over ranks
** gives the global winner (keys are (score << 32 | ~global token), so the
** max is the unsharded argmax, smaller token on exact ties); fsamp_finalize
** writes tokens and, when asked, this rank's logit where it holds the winner
** (0 elsewhere), which a sum all-reduce turns into the winner's logit.
** Logprobs (fs_options.logprobs) need the log-sum-exp over all shards: the
** kernel leaves this shard's (m, l) pairs in the workspace, fsamp_tp_lse
** turns each row's into the shard's log-sum-exp L as a key after the items'
** keys, so that the same max all-reduce gives the max M over shards;
** fsamp_finalize writes exp(L - M) after the logits, so that the same sum
** all-reduce gives sum exp(L - M); fsamp_tp_logprobs writes logit - (M +
** log of that sum).  Two collectives, as a call with logits has.
** Ranks (fs_options.ranks) need the shard's logits written: where nothing
** else in the call needs the filters' path (logits_in_pass) the fused
** kernel writes them while it draws (fs_filter_tp_zout), else the filters'
** path does (fs_filter_tp); once the draws' logits are summed, each rank
** counts its shard's logits against them and one more sum all-reduce adds
** the counts (fs_filter_tp_ranks).
** Top logprobs (fs_options.top_logprobs, since 0.3.16) take the same pass
** (or with a bias or a sampled call's filters the filters' path, which
** lists the raw logits before it applies the bias): fsamp_toplp lists each
** row's n largest of the shard (global ids) a slice,
** with their log-sum-exp pairs; once the draws' logits are summed, one more
** max all-reduce gathers every rank's lists (each rank's part zero on the
** others, c->rank), and fsamp_toplp_merge merges them, and the draws'
** logprobs, against the log-sum-exp of every rank's pairs.
** Targets (fs_options.target_tokens, since 0.3.19) take the same pass, where
** it serves (no logit bias, no sampled call's filters; refused otherwise):
** after everything else, one max all-reduce gives every rank the target's
** logit from the rank that holds it, each rank's log-sum-exp and count
** against it follow from one read of its shard, and one more max and one
** sum all-reduce merge them (fs_filter_tp_targets).
** Through NCCL the keys are reduced out of place (no copy of them first).
** NCCL is loaded with dlopen, so the library does not depend on it.
*/
#include "fs_int.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h's f() declarations */
#include <nccl.h>
#pragma GCC diagnostic pop

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Workspace for TP, after head and candidates (fs_workspace_tp_at): local
** and global keys and the logits, each of the n items and then the B rows'
** log-sum-exp terms (logprobs). */
static void tp_buffers(const fs_context *ctx, const fs_kernel *k, const fs_problem *p, int S,
                       CUdeviceptr *local_keys, CUdeviceptr *global_keys,
                       CUdeviceptr *local_logits) {
  const size_t len = (size_t)p->batch * S + (size_t)p->batch;
  const size_t base = fs_workspace_tp_at(ctx, k, p->batch, p->vocab, S);
  *local_keys = ctx->workspace + base;
  *global_keys = *local_keys + len * 8;
  *local_logits = *global_keys + len * 8;
}

int fs_sample_tp(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                 const fs_outputs *outputs, fs_allreduce_fn allreduce, void *user,
                 void *stream) {
  return fs_sample_tp_ex(ctx, problem, sampling, NULL, outputs, allreduce, user, stream);
}

static int nccl_reduce(fs_context *ctx, void *comm, const void *send, void *recv, size_t count,
                       int op, void *stream);

/* Through NCCL out of place; through the engine's collective in place on
** recv after a copy of send there (none when send == recv). */
int fs_tp_reduce(fs_context *ctx, const fs_tp_coll *c, CUdeviceptr send, CUdeviceptr recv,
                 size_t count, int op, void *stream) {
  if (c->nccl_comm)
    return nccl_reduce(ctx, c->nccl_comm, (void *)(uintptr_t)send, (void *)(uintptr_t)recv,
                       count, op, stream);
  CUresult r;
  if (send != recv &&
      (r = ctx->cu->cuMemcpyDtoDAsync(recv, send, count * (op == FS_REDUCE_MAX_U64 ? 8 : 4),
                                      (CUstream)stream)))
    return fs_cu_fail(ctx, r, "cuMemcpyDtoDAsync", __FILE__, __LINE__);
  if (c->allreduce(c->user, (void *)(uintptr_t)recv, count, op, stream))
    return fs_err(ctx, FS_CUDA, "allreduce(%s of %zu %s) failed",
                  op == FS_REDUCE_MAX_U64 ? "max" : "sum", count,
                  op == FS_REDUCE_MAX_U64 ? "keys" : "floats");
  return FS_OK;
}

/* Does a tensor-parallel call's fused pass write the shard's logits while
** it draws: top logprobs, targets, or ranks (unless FS_TP_RANKS_PASS=0, but
** always under FS_NOISE_GROUP16, whose groups fs_filter_tp does not draw), and
** nothing that needs the filters' path (no logit bias, no sampled call's
** filters: with them fs_filter_tp writes the logits and lists); the same on
** every rank (the options and the call mode are), as their collectives must be. */
static int logits_in_pass(const fs_context *ctx, const fs_sampling *s, const fs_opts *m) {
  const int ranks_pass = ctx->tp_ranks_pass || ctx->noise == FS_NOISE_GROUP16;
  return (m->top_n || m->targets || (ranks_pass && m->ranks)) && m->bias_count == 0 &&
         !(m->filter && fs_call_mode(ctx, s) != FS_CALL_GREEDY);
}

/* The fused kernel's part of one rank's call (or with write_out, a call
** with a logit bias on one GPU, whose merge then writes the outputs): the
** shard's best keys and their logits (then with logprobs the rows'
** log-sum-exp keys) at *lk and *ll, room for the reduced keys at *gk.
** With tr (logits_in_pass) the kernel also writes the shard's logits where
** fs_filter_tp_zout puts them (with room for R ranks' top-logprob lists),
** and *tr is what fs_filter_tp_ranks and fs_filter_tp_toplp_* read. */
static int tp_fused(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                    const fs_opts *m, const fs_outputs *outputs, int write_out, fs_tp_rank *tr,
                    int R, CUstream stream, fs_kernel **kp, CUdeviceptr *lkp, CUdeviceptr *gkp,
                    CUdeviceptr *llp) {
  const int S = sampling->num_samples, B = problem->batch;
  const size_t n = (size_t)B * S;
  const float *lp = m->logprobs;
  int rows = lp ? B : 0; /* log-sum-exp terms after the items */
  fs_kernel *k = NULL;
  int st = tr ? fs_filter_tp_zout(ctx, problem, sampling, m, R, stream, &k, tr)
              : fs_plan_kernel(ctx, problem, sampling, stream, &k);
  CUdeviceptr lk = 0, gk = 0, ll = 0, mask_at = 0;
  fs_opts fused = *m; /* with a bias: the mask without the biased ids */
  if (!st && m->bias_count)
    st = fs_bias_ready(ctx, problem, m->bias_count,
                       fs_workspace_need(ctx, k, B, problem->vocab, S), stream, &mask_at);
  if (!st && m->bias_count)
    st = fs_bias_prep(ctx, problem, sampling, m, mask_at, &fused, stream);
  if (!st) {
    tp_buffers(ctx, k, problem, S, &lk, &gk, &ll);
    fs_outputs local = {outputs->tokens, (float *)(uintptr_t)ll, (uint64_t *)(uintptr_t)lk};
    fs_opts pairs = fused; /* with logprobs: the pairs, not the shard's logprobs */
    pairs.logprobs = NULL;
    pairs.lse_pairs = lp != NULL;
    if (tr) {
      pairs.zout = tr->zout;
      pairs.zout_stride = tr->zout_stride;
      pairs.zout_keep = tr->zout_keep;
    }
    st = fs_launch_masked(ctx, k, problem, sampling, &pairs, &local, stream);
  }
  if (!st && lp) {
    CUdeviceptr lse = ctx->workspace + fs_workspace_lse_at(ctx, k, B, problem->vocab, S);
    CUdeviceptr rk = lk + n * 8;
    int G = fs_num_chunks(ctx, k, B, problem->vocab);
    void *args[] = {&lse, &G, &rows, &rk};
    st = fs_launch_small(ctx, ctx->tp_lse_fn, "cuLaunchKernel(fsamp_tp_lse)",
                         (unsigned)((B + 3) / 4), args, stream);
  }
  if (!st && m->bias_count)
    st = fs_bias_merge(ctx, problem, sampling, m, mask_at, lk, ll, write_out ? outputs : NULL,
                       stream);
  *kp = k;
  *lkp = lk;
  *gkp = gk;
  *llp = ll;
  return st;
}

/* A tensor-parallel call with top logprobs: this rank's index and the rank
** count known (NCCL's, else fs_context_set_tp_rank's) into c. */
static int tp_toplp_check(fs_context *ctx, const fs_opts *m, fs_tp_coll *c) {
  const char *fn = c->nccl_comm ? "fs_sample_nccl_ex" : "fs_sample_tp_ex";
  if (!c->one_gpu && !c->nccl_comm) {
    c->rank = ctx->tp_rank;
    c->ranks = ctx->tp_ranks;
  }
  if (c->ranks < 1 || c->ranks > FS_MAX_TP_RANKS || c->rank < 0 || c->rank >= c->ranks)
    return fs_err(ctx, FS_INVALID_ARGUMENT,
                  "options->top_logprobs=%d: %s gathers every rank's lists and needs this "
                  "rank's index and the rank count, at most %d (%s); they are %d of %d",
                  m->top_n, fn, FS_MAX_TP_RANKS,
                  c->nccl_comm ? "ncclCommUserRank and ncclCommCount failed or are missing"
                               : "fs_context_set_tp_rank(ctx, rank, ranks) first",
                  c->rank, c->ranks);
  return FS_OK;
}

/* One rank's call through collective c, or with c NULL one GPU's call with a
** logit bias (fs_sample_ex): the same steps up to the bias's merge, which
** then writes the outputs (no collective, no fsamp_finalize).  A sampled
** call with filters, or one with a long bias or ranks (fs_filter_path),
** takes filter.c's rank part (fs_filter_tp) instead of the fused kernel's,
** but for ranks that the fused pass draws (logits_in_pass); the rest is the
** same. */
static int tp_sample(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                     const fs_options *options, const fs_outputs *outputs, const fs_tp_coll *c,
                     void *stream) {
  fs_opts m;
  FS_TRY(fs_validate_problem(ctx, problem, 1));
  FS_TRY(fs_validate_sampling(ctx, sampling, problem->batch));
  FS_TRY(fs_validate_options(ctx, options, problem, &m));
  FS_TRY(fs_validate_bias_noise(ctx, ctx->noise, &m));
  FS_TRY(fs_validate_filter_use(ctx, ctx->noise, &m));
  /* fs_sample_ranks (one_gpu) never takes targets: sample.c */
  if (c && m.targets && !logits_in_pass(ctx, sampling, &m))
    return fs_err(ctx, FS_INVALID_ARGUMENT, "options->target_tokens=%p: %s takes targets "
                  "only where its fused pass writes the shard's logits: not with a logit bias "
                  "(logit_bias_count=%d) nor with top_k, top_p or min_p in a sampled call "
                  "(one GPU's fs_sample_ex takes both)", (const void *)m.targets,
                  c->nccl_comm ? "fs_sample_nccl_ex" : "fs_sample_tp_ex", (int)m.bias_count);
  fs_tp_coll cr = c ? *c : (fs_tp_coll){0};
  if (c && m.top_n) FS_TRY(tp_toplp_check(ctx, &m, &cr));
  if (c && !c->one_gpu && m.words && options->token_mask_stride == 0)
    return fs_err(ctx, FS_INVALID_ARGUMENT,
                  "options->token_mask_stride=0: %s needs the mask's row stride "
                  "(at least ceil(the whole vocabulary / 32) words), the same on every rank: "
                  "0 would mean this shard's ceil((vocab_offset + V) / 32) = %lld",
                  c->nccl_comm ? "fs_sample_nccl_ex" : "fs_sample_tp_ex", (long long)m.stride);
  FS_TRY(fs_validate_outputs(ctx, outputs));
  FS_TRY(fs_validate_noise(ctx, ctx->noise, problem));
  const fs_cu_api *cu = ctx->cu;
  CUcontext dummy;
  FS_CHECK_CU(ctx, cu->cuCtxPushCurrent(ctx->cu_ctx));
  const int S = sampling->num_samples, B = problem->batch;
  const size_t n = (size_t)B * S;
  /* with top logprobs fsamp_toplp_merge writes the logprobs (their
  ** log-sum-exp the lists'), not fsamp_tp_logprobs */
  float *lp = m.top_n ? NULL : m.logprobs;
  int rows = lp ? B : 0; /* log-sum-exp terms after the items */
  fs_opts mf = m;
  mf.logprobs = lp;
  fs_kernel *k = NULL;
  CUdeviceptr lk, gk, ll;
  fs_tp_rank tr;
  memset(&tr, 0, sizeof tr);
  /* one GPU: fs_sample_ex sends those calls to filter.c.  Ranks decide by
  ** the count alone: the cost model reads the shard's V, and ranks that
  ** chose different paths would not meet in the same collectives */
  const int in_pass = c && logits_in_pass(ctx, sampling, &m);
  int st = c && !in_pass && fs_filter_path(ctx, problem, sampling, &m, c->one_gpu)
               ? fs_filter_tp(ctx, problem, sampling, &mf, &cr, (CUstream)stream, &k, &lk, &gk,
                              &ll, &tr)
               : tp_fused(ctx, problem, sampling, &mf, outputs, !c, in_pass ? &tr : NULL,
                          cr.ranks, (CUstream)stream, &k, &lk, &gk, &ll);
  /* the shard's lists (the filters' path made them before its bias) */
  if (!st && m.top_n && in_pass)
    st = fs_filter_tp_toplp_local(ctx, problem, sampling, &m, &tr, stream);
  if (!c) { /* one GPU: the merge wrote the outputs */
    cu->cuCtxPopCurrent(&dummy);
    return st;
  }
  /* where the winners' logits are summed: with logprobs (through
  ** fsamp_tp_logprobs), and with ranks or top logprobs' logprobs where the
  ** caller asked for no logits, the workspace; else outputs->logits */
  const int need = m.ranks || (m.top_n && m.logprobs);
  float *lg = lp || (need && !outputs->logits) ? (float *)(uintptr_t)ll : outputs->logits;
  if (!st) st = fs_tp_reduce(ctx, c, lk, gk, n + (size_t)rows, FS_REDUCE_MAX_U64, stream);
  if (!st) {
    int nn = (int)n;
    CUdeviceptr sc = ll + n * 4;
    void *args[] = {&lk, &gk, &ll, &nn, (void *)&outputs->tokens, &lg, (void *)&outputs->keys,
                    &rows, &sc};
    st = fs_launch_small(ctx, ctx->finalize_fn, "cuLaunchKernel(fsamp_finalize)",
                         (unsigned)(((n > (size_t)rows ? n : (size_t)rows) + 127) / 128), args,
                         stream);
  }
  if (!st && lp) {
    st = fs_tp_reduce(ctx, c, ll, ll, n + (size_t)rows, FS_REDUCE_SUM_F32, stream);
    int nn = (int)n, ss = S;
    void *args[] = {&ll, &gk, &nn, &ss, &lp, (void *)&outputs->logits};
    if (!st)
      st = fs_launch_small(ctx, ctx->tp_logprobs_fn, "cuLaunchKernel(fsamp_tp_logprobs)",
                           (unsigned)((n + 127) / 128), args, stream);
  } else if (!st && lg) {
    const CUdeviceptr at = (CUdeviceptr)(uintptr_t)lg;
    st = fs_tp_reduce(ctx, c, at, at, n, FS_REDUCE_SUM_F32, stream);
  }
  if (!st && m.top_n)
    st = fs_filter_tp_toplp_merge(ctx, problem, sampling, &m, &cr, &tr,
                                  m.logprobs ? lg : NULL, (CUstream)stream);
  if (!st && m.ranks) /* against the draws' summed logits */
    st = fs_filter_tp_ranks(ctx, problem, sampling, &m, c, &tr, lg, (CUstream)stream);
  if (!st && m.targets) /* in_pass: logits_in_pass holds (refused above otherwise) */
    st = fs_filter_tp_targets(ctx, problem, sampling, &m, c, &tr, (CUstream)stream);
  cu->cuCtxPopCurrent(&dummy);
  return st;
}

int fs_sample_biased(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                     const fs_options *options, const fs_outputs *outputs, void *stream) {
  return tp_sample(ctx, problem, sampling, options, outputs, NULL, stream);
}

int fs_sample_tp_ex(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                    const fs_options *options, const fs_outputs *outputs,
                    fs_allreduce_fn allreduce, void *user, void *stream) {
  if (!ctx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ctx=NULL: a context is required");
  if (!allreduce)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "allreduce=NULL: a collective is required");
  const fs_tp_coll c = {allreduce, user, NULL, 0, 0, 0};
  return tp_sample(ctx, problem, sampling, options, outputs, &c, stream);
}

/* One rank's collective: every reduction leaves buf as it is. */
static int one_rank(void *user, void *buf, size_t count, int op, void *stream) {
  (void)user, (void)buf, (void)count, (void)op, (void)stream;
  return 0;
}

int fs_sample_ranks(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                    const fs_options *options, const fs_outputs *outputs, void *stream) {
  const fs_tp_coll c = {one_rank, NULL, NULL, 1, 1, 0};
  return tp_sample(ctx, problem, sampling, options, outputs, &c, stream);
}

/* ---- NCCL, loaded at run time ------------------------------------------- */
typedef struct fs_nccl_api {
  __typeof__(&ncclAllReduce) allreduce;
  __typeof__(&ncclGetErrorString) errstr;
  __typeof__(&ncclCommCount) count; /* optional */
  __typeof__(&ncclCommUserRank) rank; /* optional */
} fs_nccl_api;

static fs_nccl_api g_nccl;
static int g_nccl_ok;
static char g_nccl_why[256]; /* why it could not be loaded (dlerror() is read once) */
static pthread_once_t g_nccl_once = PTHREAD_ONCE_INIT;

static void load_nccl(void) {
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  const char *e = h ? NULL : dlerror();
  if (h) {
    *(void **)&g_nccl.allreduce = dlsym(h, "ncclAllReduce");
    *(void **)&g_nccl.errstr = dlsym(h, "ncclGetErrorString");
    *(void **)&g_nccl.count = dlsym(h, "ncclCommCount");
    *(void **)&g_nccl.rank = dlsym(h, "ncclCommUserRank");
    g_nccl_ok = g_nccl.allreduce && g_nccl.errstr;
    if (!g_nccl_ok) e = "it lacks ncclAllReduce or ncclGetErrorString";
  }
  snprintf(g_nccl_why, sizeof g_nccl_why, "%s", e ? e : "?");
}

/* ncclAllReduce of count keys (max) or logits (sum) from send into recv
** (which may be send) on stream: FS_OK, or FS_CUDA with NCCL's reason in
** ctx's error message. */
static int nccl_reduce(fs_context *ctx, void *comm, const void *send, void *recv, size_t count,
                       int op, void *stream) {
  const int keys = op == FS_REDUCE_MAX_U64;
  ncclResult_t r = g_nccl.allreduce(send, recv, count, keys ? ncclUint64 : ncclFloat32,
                                    keys ? ncclMax : ncclSum, (ncclComm_t)comm,
                                    (cudaStream_t)stream);
  if (r != ncclSuccess)
    return fs_err(ctx, FS_CUDA, "ncclAllReduce(%s of %zu %s) failed: %s", keys ? "max" : "sum",
                  count, keys ? "keys" : "floats", g_nccl.errstr(r));
  return FS_OK;
}

int fs_sample_nccl(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                   const fs_outputs *outputs, void *nccl_comm, void *stream) {
  return fs_sample_nccl_ex(ctx, problem, sampling, NULL, outputs, nccl_comm, stream);
}

int fs_sample_nccl_ex(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                      const fs_options *options, const fs_outputs *outputs, void *nccl_comm,
                      void *stream) {
  if (!ctx) return fs_err(NULL, FS_INVALID_ARGUMENT, "ctx=NULL: a context is required");
  if (!nccl_comm)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "nccl_comm=NULL: an NCCL communicator is required");
  pthread_once(&g_nccl_once, load_nccl);
  if (!g_nccl_ok)
    return fs_err(ctx, FS_UNSUPPORTED, "libnccl.so.2 could not be loaded: %s", g_nccl_why);
  int ranks = 0, rank = -1; /* the filters' slices (fs_filter_tp), the top logprobs' gather */
  if (g_nccl.count && g_nccl.count((ncclComm_t)nccl_comm, &ranks) != ncclSuccess) ranks = 0;
  if (g_nccl.rank && g_nccl.rank((ncclComm_t)nccl_comm, &rank) != ncclSuccess) rank = -1;
  const fs_tp_coll c = {NULL, NULL, nccl_comm, 0, ranks, rank};
  return tp_sample(ctx, problem, sampling, options, outputs, &c, stream);
}
