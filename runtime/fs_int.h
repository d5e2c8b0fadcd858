/*
** fs_int.h: internal declarations shared by the runtime's files.
**
** Errors: every failing path records a message with fs_err() (printf-style)
** on the context, or on the thread when there is none, and returns a status.
** FS_CHECK_CU records the failing driver call's text and file:line.
*/
#ifndef FS_INT_H
#define FS_INT_H

#include "flashsampling.h"
#include "cudrv.h"
#include "gen.h"

#include <stdarg.h>
#include <stddef.h>

#define FS_ERRMSG_MAX 1024

/* One compiled and loaded kernel variant. */
typedef struct fs_kernel {
  fs_variant v;          /* what it is (name, tiles, threads, smem, ...) */
  CUmodule module;
  CUfunction main_fn;    /* fsamp_main (the module's only kernel) */
  int blocks_per_sm;     /* occupancy of fsamp_main, from the driver */
  int max_clusters;      /* clusters of v.cluster CTAs that fit at once (v.cluster > 1) */
  int registers;         /* per thread, from the driver */
  struct fs_kernel *next;
} fs_kernel;

/* What a call is, for the choice of its kernel: the values of the tuning
** database's fs_store_mode (tuned.c checks that they agree). */
enum {
  FS_CALL_TOKEN = 0,   /* sampled, FS_NOISE_TOKEN */
  FS_CALL_GROUP16 = 1, /* sampled, FS_NOISE_GROUP16 */
  FS_CALL_GREEDY = 2,  /* greedy: scalar temperature 0, no per-row temperatures */
  FS_CALL_MODES = 3
};

/* The call mode of a call with sampling s on ctx (its noise mode). */
int fs_call_mode(const fs_context *ctx, const fs_sampling *s);

/* A logit bias of more entries a row than this takes the filters' path
** (filter.c: the logits written out, the entries applied to them) rather
** than the fused kernel's with a dot product an entry (bias.c), whose
** search for repeats is O(count^2) a row.  A context takes
** ctx->bias_short: this, or FS_BIAS_SHORT=N from the environment. */
#define FS_BIAS_SHORT 1024

/* sizeof a 0.3.3 program's fs_options: that struct ended with
** logit_bias_count, so it is min_p's offset here padded to the struct's
** alignment (8): 64 bytes on LP64; validate.c takes it and that offset, and
** reads no filter from either. */
#define FS_OPTIONS_SIZE_033                                                            \
  ((offsetof(fs_options, min_p) + _Alignof(fs_options) - 1) / _Alignof(fs_options) *   \
   _Alignof(fs_options))

/* A prepared shape: which kernel serves (dtype, D, V, batch bucket) for each
** call mode.  kernel[FS_CALL_TOKEN] is always set; another mode's is set
** only when a tuning database has a winner of its own for that mode (exact
** key) and it is another variant; NULL: the token kernel serves it. */
typedef struct fs_plan {
  int dtype, hidden, vocab, bucket;
  fs_kernel *kernel[FS_CALL_MODES];
  char how[FS_CALL_MODES][192]; /* how each was chosen ("built-in default") */
  struct fs_plan *next;
} fs_plan;

/* The workspace's fixed head, zeroed once and kept so by every launch, at
** offsets that do not depend on the shape (so that no call reads what
** another shape's call left there): the last-CTA reduction's counters, one per
** batch tile (B of them with the fma family's one-row tiles), then the rows'
** bounds (fs_params.bound); the candidates follow, 8-byte aligned. */
#define FS_COUNTER_BYTES ((size_t)(FS_MAX_BATCH + 1) * 4)
#define FS_BOUND_BYTES ((size_t)(FS_MAX_BATCH + 1) * 8)
#define FS_HEAD_BYTES (FS_COUNTER_BYTES + FS_BOUND_BYTES)
#define FS_MAX_RETIRED 32

/* An encoded TMA tensor map and what it encodes: fs_launch reuses it when a
** call names the same tensor (a decode loop passes the same W and H buffers
** every step), saving cuTensorMapEncodeTiled on the host. */
#define FS_TMAP_CACHE 4
typedef struct fs_tmap_entry {
  const void *ptr;
  int dtype, valid, promotion;
  unsigned long long dim[2], stride;
  unsigned box[2];
  unsigned char map[128]; /* a CUtensorMap, copied bytewise (it wants 64-byte alignment) */
} fs_tmap_entry;

struct fs_context {
  const fs_cu_api *cu;
  CUcontext cu_ctx;
  CUdevice device;
  int owns_primary;        /* 1 if we retained the primary context */
  int arch;                /* major * 10 + minor */
  int sm_count;
  int max_smem_optin;      /* bytes per block with opt-in */
  char device_name[128];
  fs_gen *gen;             /* opened on first use */
  fs_kernel *kernels;      /* loaded variants */
  fs_plan *plans;          /* prepared shapes */
  struct fs_store *user_db, *defaults_db; /* tuning results, read-only */
  int user_db_tried, defaults_db_tried;
  CUdeviceptr workspace;   /* counters, then candidates */
  size_t workspace_bytes;
  CUdeviceptr retired[FS_MAX_RETIRED]; /* outgrown workspaces (graphs may use them) */
  int n_retired;
  fs_tmap_entry tmaps[FS_TMAP_CACHE]; /* recently encoded tensor maps */
  int tmap_next;                      /* the entry to replace next */
  int noise;               /* an fs_noise_mode (fs_context_set_noise) */
  int prune;               /* 0: kernels get no bound buffer, so nothing is pruned
                              (FS_PRUNE=0 at creation; the draw is the same either way,
                              perf-notes 22g) */
  CUmodule reduce_module;   /* templates/fsamp_reduce.cu (kernels.c), loaded with the first
                               variant */
  CUfunction reduce_fn;     /* fsamp_reduce (variants' second-launch reduction) */
  CUfunction finalize_fn;   /* fsamp_finalize (tensor parallelism) */
  CUfunction tp_lse_fn;     /* fsamp_tp_lse (tensor parallelism with logprobs) */
  CUfunction tp_logprobs_fn; /* fsamp_tp_logprobs (the same) */
  CUmodule bias_module;     /* the logit bias's kernels (bias.c), loaded on first use */
  CUfunction bias_fn[4];   /* fsamp_bias_prep_bf16, _f16, fsamp_bias_gprep_bf16, _f16 */
  CUfunction bias_merge_fn[2]; /* fsamp_bias_merge, fsamp_bias_gmerge (FS_NOISE_GROUP16) */
  CUfunction bias_dedup_fn; /* fsamp_bias_dedup (long lists on the filters' path) */
  CUmodule filter_module;   /* the filters' kernel (filter.c), loaded on first use */
  CUfunction filter_fn;     /* fsamp_filter */
  CUfunction filter_bias_fn; /* fsamp_filter_bias (a logit bias with the filters) */
  CUfunction ftp_fn[3];     /* fsamp_ftp_stats, _round, _draw (filters over shards) */
  CUfunction toplp_fn[3];   /* fsamp_toplp, fsamp_toplp_merge, fsamp_toplp_ranks (top
                               logprobs; with ranks counted) */
  CUfunction rank_fn;       /* fsamp_rank (fs_options.ranks) */
  CUfunction zdrop_fn;      /* fsamp_zout_drop (fs_params.zout_keep) */
  int l2_bytes;             /* the device's L2 */
  int zout_keep;            /* -1: filter.c's zout_keep decides; 0, 1: FS_ZOUT_KEEP */
  CUfunction rank_int_fn;   /* fsamp_rank_int (ranks in the tensor-parallel calls) */
  CUfunction tp_place_fn;   /* fsamp_tp_place (top logprobs in the tensor-parallel calls) */
  CUfunction target_fn[4];  /* fsamp_target, fsamp_target_out, fsamp_tp_target_key,
                               fsamp_tp_target_fin (fs_options.target_tokens) */
  int bias_short;           /* FS_BIAS_SHORT, or the environment's (context.c) */
  int bias_short_env;       /* 1: that came from the environment (no cost model) */
  int toplp_slices;         /* > 0: fsamp_toplp's slices a row, at most
                               FS_TOPLP_SLICES_MAX (FS_TOPLP_SLICES=G at creation; tests
                               and measurements), else the library's choice (filter.c) */
  int toplp_ranks;          /* the most samples a row whose ranks fsamp_toplp counts
                               (FS_TOPLP_RANKS, or FS_TOPLP_RANKS=0..4 at creation:
                               measurements, 0 always fsamp_rank; filter.c) */
  int filter_ranks;         /* 1: one GPU's filtered calls take the ranks' path
                               (FS_FILTER_RANKS=1 at creation; measurement) */
  int tp_rank, tp_ranks;    /* this rank's index and the rank count
                               (fs_context_set_tp_rank; tp_ranks 0: not set) */
  int tp_ranks_pass;        /* 1: a tensor-parallel call's ranks drawn in its fused
                               pass where it can (tp.c); 0: always the filters' path
                               (FS_TP_RANKS_PASS=0 at creation; tests, measurements) */
  int filter_clusters[4];   /* co-resident clusters of fsamp_filter of 1, 2, 4, 8 CTAs
                               (0: that size is not used) */
  char errmsg[FS_ERRMSG_MAX];
  char *compile_log;       /* last NVRTC failure: name, options, log, source */
};

/* kernels.c: loads (generating and compiling if needed) a variant.  The
** caller has made ctx's CUDA context current. */
int fs_kernel_load(fs_context *ctx, const fs_variant *v, fs_kernel **out);

/* The loaded kernel of that name, or NULL. */
fs_kernel *fs_kernel_find(fs_context *ctx, const char *name);

/* The same from a cubin compiled earlier (tuning database, tuner): no NVRTC
** for the variant (a context's first load compiles its reductions' module,
** templates/fsamp_reduce.cu, ~0.2 s, as any load does).  The cubin must have
** been compiled from v's source for this GPU. */
int fs_kernel_load_cubin(fs_context *ctx, const fs_variant *v, const void *cubin,
                         fs_kernel **out);

/* A module of the context's own from an embedded template (tmpl: the
** reductions', the logit bias's, the filters'), `head` (NULL: none; e.g. a #define) put before it,
** compiled for ctx's GPU by NVRTC and loaded into *mod, its n functions
** names[i] into fns[i]; `what` names it in messages (a compile failure
** keeps NVRTC's log as the compile log).
** fs_own_compile: its cubin for an NVRTC target (tests; no GPU). */
struct fs_cubin;
int fs_own_module(fs_context *ctx, const char *tmpl, const char *head, const char *what,
                  const char *const *names, int n, CUmodule *mod, CUfunction *fns);
int fs_own_compile(const char *tmpl, const char *head, const char *target,
                   struct fs_cubin *out, char *err, size_t errlen);

/* Unloads and forgets a loaded kernel (plans using it are dropped too). */
void fs_kernel_unload(fs_context *ctx, fs_kernel *k);

/* tuned.c: the tuned kernel for (shape, bucket) and call mode from the
** tuning databases, loaded (and re-validated against `dflt` if it was tuned
** on another shape), with how it was found; *out NULL when nothing tuned
** applies.  FS_CALL_TOKEN follows the whole chain (exact, then nearest);
** the other modes take exact keys only (their fallback is the token
** kernel, not a guess from another shape) and may pass dflt NULL. */
int fs_tuned_choose(fs_context *ctx, const fs_problem *p, int bucket, int mode,
                    const fs_variant *dflt, fs_kernel **out, char *how, size_t howlen);
/* Is `stored` (a winner's generator revision, with or without the tuner's
** "+suffix") today's revision `cur`?  Such a winner is accepted without
** hashing its source: the revision hashes the code of every generator and
** template file, comments left out (fs_gen_code_hash), so a comment edit
** keeps it.  Its stored cubin is loaded only if today's source hashes as
** the one it was compiled from (else NVRTC compiles the winner). */
int fs_tuned_same_revision(const char *stored, const char *cur);
/* The hash (16 hex digits into out) v's source would have if generated today
** under the revision `rev` (a stored one, up to any "+suffix"): the generated
** header names the revision, so today's source is hashed with that name put
** back.  Equal to the stored hash exactly when nothing that is compiled has
** changed since.  Returns 1, or 0 if the source cannot be generated. */
int fs_tuned_measured_hash(fs_gen *g, const fs_variant *v, const char *rev, char *out,
                           size_t n);

/* sample.c: the generator architecture a GPU of compute capability `arch`
** (major * 10 + minor) runs: the newest one the generator knows with the
** same major version, not above it (sm_90 runs the sm_90a variants); 0 if
** none.  The one table of known architectures (the tuner and the tests ask
** here too). */
int fs_target_arch(int arch);

/* The batch bucket of B (the next power of two, at most 256, then
** multiples of 256). */
int fs_bucket(int batch);

/* The number of vocabulary chunks (candidates per item) for a kernel and
** shape: the CTAs along the vocabulary (one chunk each). */
int fs_num_chunks(const fs_context *ctx, const fs_kernel *k, int batch,
                  int vocab);

/* Workspace bytes a call needs. */
size_t fs_workspace_need(const fs_context *ctx, const fs_kernel *k, int batch,
                         int vocab, int samples);
/* Where in the workspace the tensor-parallel keys and logits of such a call
** start (fs_workspace_need's layout): local keys [n + batch], global keys
** [n + batch], logits [n + batch], n = batch x samples (the items, then a
** log-sum-exp per row with logprobs). */
size_t fs_workspace_tp_at(const fs_context *ctx, const fs_kernel *k, int batch, int vocab,
                          int samples);
/* Where the log-sum-exp pairs (fs_params.lse) of such a call start. */
size_t fs_workspace_lse_at(const fs_context *ctx, const fs_kernel *k, int batch, int vocab,
                           int samples);

/* A call's fs_options, resolved (fs_validate_options): words NULL for no
** token mask, logprobs NULL for none. */
typedef struct fs_opts {
  const uint32_t *words;
  long long stride; /* words between rows */
  float *logprobs;  /* [B, S] device (host for the reference) or NULL */
  float softcap;    /* fs_options.logit_softcap: 0 or c > 0, logits c tanh(z / c) */
  int lse_pairs;    /* the kernel leaves the (m, l) pairs of every (row, chunk) in the
                       workspace (fs_workspace_lse_at) without writing logprobs: the
                       tensor-parallel calls with logprobs (tp.c) */
  const int32_t *bias_tokens; /* fs_options.logit_bias_*: [B, bias_count] device (host for */
  const float *bias_values;   /* the reference) arrays, or bias_count 0 */
  int bias_count;
  float rep;                  /* fs_options.repetition_penalty: 0 (none) or finite r > 0 */
  const float *reps;          /* fs_options.repetition_penalties: [B] device (host for the
                                 reference) or NULL */
  /* fs_options' filters (min_p, top_k, top_p: scalars and [B] device arrays, host
  ** arrays for the reference); filter is 1 when any may keep fewer than all */
  float min_p, top_p;
  int top_k, filter;
  const float *min_ps, *top_ps;
  const int32_t *top_ks;
  /* fs_options.top_logprobs: n a row (0: none) and where the lists go ([B, n]
  ** device arrays; host arrays for the reference) */
  int top_n;
  int32_t *top_tokens;
  float *top_values;
  int32_t *ranks;             /* fs_options.ranks: [B, S] device (host for the reference) or
                                 NULL */
  /* fs_options.target_*: [B] device arrays (host for the reference); targets NULL: none */
  const int32_t *targets;
  float *target_lp;
  int32_t *target_ranks;
  /* set by the filter path (filter.c) for the fused kernel it runs first:
  ** where every logit goes (fs_params.zout), or NULL */
  float *zout;
  long long zout_stride;
  int zout_keep;              /* fs_params.zout_keep */
} fs_opts;

/* Environment variable `name` as a whole number in [lo, hi] (decimal, an
** optional '-', nothing else) into *v: 1 where it is one, 0 where unset or
** empty, -1 (v untouched, a line on stderr naming the variable, its value
** and the range) where it is anything else (env.c). */
int fs_env_int(const char *name, int lo, int hi, int *v);

/* fsamp_toplp's slices a row at most (filter.c): fsamp_toplp_merge takes
** any number of lists (fsamp_filter.cu's ft_tmerge), but more slices than
** the GPU has SMs only add lists to merge, and each costs the workspace
** 8 n + 8 bytes a row. */
#define FS_TOPLP_SLICES_MAX 1024
/* The most samples a row whose ranks fsamp_toplp counts in its read of the
** logits (fsamp_filter.cu's FT_TRS); more take fsamp_rank's read after it. */
#define FS_TOPLP_RANKS 4

/* Does a validated call take the filters' path (filter.c): a sampled call
** with filters, any call with top_logprobs or ranks, or any call whose bias is
** longer than ctx->bias_short, or with model (one GPU; not a
** tensor-parallel rank, whose shard's V must not decide), without
** FS_BIAS_SHORT in the environment and from B = 16, long enough that its
** dot products would cost more than the logits written out. */
int fs_filter_path(const fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                   const fs_opts *m, int model);

/* Runs a given loaded kernel (tests and the tuner use it to force a
** variant).  Arguments must have been validated; no allocation. */
int fs_launch(fs_context *ctx, const fs_kernel *k, const fs_problem *p,
              const fs_sampling *s, const fs_outputs *o, CUstream stream);
/* fs_launch with a token mask (NULL: none). */
int fs_launch_masked(fs_context *ctx, const fs_kernel *k, const fs_problem *p,
                     const fs_sampling *s, const fs_opts *m, const fs_outputs *o,
                     CUstream stream);

/* The kernel of the prepared plan for this call, preparing it first when
** not capturing (FS_NOT_PREPARED while capturing).  ctx's CUDA context must
** be current. */
int fs_plan_kernel(fs_context *ctx, const fs_problem *p, const fs_sampling *s, CUstream stream,
                   fs_kernel **out);

/* Makes sure the workspace holds `bytes` (allocating outside capture). */
int fs_workspace_reserve(fs_context *ctx, size_t bytes);

/* Records a message on ctx (or the thread's slot when ctx is NULL) and
** returns `status`, so callers write `return fs_err(ctx, FS_..., "...")`. */
int fs_err(fs_context *ctx, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void fs_clear_err(fs_context *ctx);

/* Replaces ctx's compile log (takes a copy of text). */
void fs_set_compile_log(fs_context *ctx, const char *text);

/* Records a failing driver call.  Returns FS_CUDA (FS_OUT_OF_MEMORY for
** CUDA_ERROR_OUT_OF_MEMORY, FS_NO_DEVICE for no device/driver). */
int fs_cu_fail(fs_context *ctx, CUresult r, const char *call,
               const char *file, int line);

#define FS_CHECK_CU(ctx, call)                                              \
  do {                                                                      \
    CUresult fs_r_ = (call);                                                \
    if (fs_r_ != CUDA_SUCCESS)                                              \
      return fs_cu_fail((ctx), fs_r_, #call, __FILE__, __LINE__);           \
  } while (0)

#define FS_TRY(call)                                                        \
  do {                                                                      \
    int fs_s_ = (call);                                                     \
    if (fs_s_ != FS_OK) return fs_s_;                                       \
  } while (0)

/* validate.c: argument checks shared by the GPU path and the CPU reference.
** Return FS_OK or FS_INVALID_ARGUMENT with a message naming the argument,
** the value and the rule.  device=1 also checks 16-byte pointer alignment
** rules that only matter to the kernels (the CPU path checks them too). */
int fs_validate_problem(fs_context *ctx, const fs_problem *p, int need_ptrs);
int fs_validate_sampling(fs_context *ctx, const fs_sampling *s, int batch);
int fs_validate_outputs(fs_context *ctx, const fs_outputs *o);
/* Checks options (NULL: none) against the problem and resolves its mask
** into *m (words NULL: none). */
int fs_validate_options(fs_context *ctx, const fs_options *o, const fs_problem *p,
                        fs_opts *m);
/* bias.c: calls with a logit bias (fs_options.logit_bias_*).
** fs_bias_ready: the bias module loaded and the workspace holding `need`
** bytes (the call's, fs_workspace_need) plus the mask copy and the entries
** of `count` a row, loading and growing it outside capture (FS_NOT_PREPARED
** while capturing); returns in *mask_at where the copy goes.
** fs_bias_prep: enqueues the fused kernel's mask at *mask_at (m's mask,
** all ones without one, with the biased ids cleared) and the entries'
** logits after it, and makes *fused the options of the fused kernel: m with
** that mask.
** fs_bias_merge: enqueues the entries' scores against the fused kernel's
** winners in keys / logits ([B, S], the kernel's local outputs, then with
** logprobs the rows' log-sum-exp keys of fsamp_tp_lse): the winners back
** into them (final NULL), or as the call's outputs (final; its logprobs
** from m).
** fs_bias_compile: the module's cubin for an NVRTC target (tests).
** fs_bias_load: the module, compiled and loaded on a context's first use
** (never while a stream captures: the callers check).
** fs_bias_dedup: enqueues fsamp_bias_dedup, m's entries made distinct into
** [B, count] int32 tokens at tok_out and fp32 values at val_out. */
int fs_bias_load(fs_context *ctx);
/* The bits of an entry's index in fsamp_bias_dedup's sort words for a
** shard of V ids and count entries a row, or 0 where they do not fit (every
** word (V - 1) << bits | (count - 1) must stay below 0xffffffff). */
int fs_bias_key_bits(long long V, int count);
int fs_bias_dedup(fs_context *ctx, const fs_problem *p, const fs_opts *m, CUdeviceptr tok_out,
                  CUdeviceptr val_out, CUstream stream);
int fs_bias_ready(fs_context *ctx, const fs_problem *p, int count, size_t need,
                  CUstream stream, CUdeviceptr *mask_at);
int fs_bias_prep(fs_context *ctx, const fs_problem *p, const fs_sampling *s, const fs_opts *m,
                 CUdeviceptr mask_at, fs_opts *fused, CUstream stream);
int fs_bias_merge(fs_context *ctx, const fs_problem *p, const fs_sampling *s, const fs_opts *m,
                  CUdeviceptr mask_at, CUdeviceptr keys, CUdeviceptr logits,
                  const fs_outputs *final, CUstream stream);
/* filter.c: fs_sample_ex() of a call with filters (m->filter), validated;
** ctx's CUDA context current.  fs_filter_compile: the filters' module for
** an NVRTC target (tests). */
int fs_sample_filtered(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                       const fs_opts *m, const fs_outputs *o, CUstream stream);
/* tp.c: the collective of one tensor-parallel call, the engine's in-place
** all-reduce or NCCL's (nccl_comm set); fs_tp_reduce all-reduces count keys
** (max) or floats (sum) from send into recv (which may be send) on stream. */
typedef struct fs_tp_coll {
  fs_allreduce_fn allreduce;
  void *user;
  void *nccl_comm;
  int one_gpu; /* fs_sample_ranks: one rank, the whole vocabulary */
  int ranks;   /* the rank count where known (NCCL, one_gpu), else 0 */
  int rank;    /* this rank's index where ranks is known (the lists' gather
                  of top logprobs: tp.c, filter.c) */
} fs_tp_coll;
/* tp.c: fs_sample_ex() of a call with filters through the ranks' path with
** one rank (a collective that does nothing): ctx->filter_ranks (measurement:
** FS_FILTER_RANKS=1 at creation, perf-notes 37e). */
int fs_sample_ranks(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                    const fs_options *options, const fs_outputs *outputs, void *stream);
int fs_tp_reduce(fs_context *ctx, const fs_tp_coll *c, CUdeviceptr send, CUdeviceptr recv,
                 size_t count, int op, void *stream);
/* filter.c: one rank's part of a tensor-parallel call with filters, up to
** its draw (through c's collectives): the shard's best keys of the n = B x
** S items, then with logprobs the B rows' shard log-sum-exp keys, at *lk;
** the items' logits at *ll; room for the reduced keys at *gk (n + B each,
** tp.c's layout); *k the logits' pass's kernel (its fsamp_finalize).
** With ranks (m->ranks) *tr holds what fs_filter_tp_ranks needs. */
typedef struct fs_tp_rank {
  float *zout;                /* the shard's written logits */
  long long zout_stride;      /* floats between their rows */
  const int32_t *bias_tokens; /* the bias's entries as fsamp_filter_bias took them */
  const float *bias_raw;      /* their raw logits */
  int32_t bias_count;         /* 0: no bias */
  CUdeviceptr counts;         /* n floats of workspace */
  int zout_keep;              /* the logits went to L2 with evict_last: dropped after the count */
  long long zlines;           /* their whole 128-byte lines */
  unsigned toplp_g;           /* top logprobs: fsamp_toplp's slices a row on the shard */
  CUdeviceptr lists, gather;  /* its B x G lists of n keys and B x G pairs; room for
                                 the R ranks' B x R G lists and pairs */
  unsigned target_g;          /* targets: fsamp_target's slices a row on the shard */
  CUdeviceptr targets;        /* their buffers (fs_filter_tp_targets) */
} fs_tp_rank;
int fs_filter_tp(fs_context *ctx, const fs_problem *p, const fs_sampling *s, const fs_opts *m,
                 const fs_tp_coll *c, CUstream stream, fs_kernel **k, CUdeviceptr *lk,
                 CUdeviceptr *gk, CUdeviceptr *ll, fs_tp_rank *tr);
/* filter.c: a tensor-parallel call whose fused kernel writes the shard's
** logits while it draws (tp.c's logits_in_pass: m->ranks, m->top_n or
** m->targets; R the rank count where m->top_n > 0):
** the kernel of that pass (*k: one that stages its
** tiles, which can write the shard's logits out), the filters' module
** loaded and the workspace grown (FS_NOT_PREPARED where either is needed
** while stream captures; FS_INVALID_ARGUMENT for shards above 2^24 - 8
** rows with ranks, as fs_filter_tp), and *tr: where the pass writes the shard's
** logits (after fs_workspace_need's bytes), whether they go to L2 with
** evict_last (zout_keep), where the counts go, and with top_n the lists'
** slices a row (tp_toplp_slices: the same on every rank) and buffers. */
int fs_filter_tp_zout(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                      const fs_opts *m, int R, CUstream stream, struct fs_kernel **k,
                      fs_tp_rank *tr);
/* filter.c: a tensor-parallel call's top logprobs (m->top_n, since 0.3.16),
** in two steps.  fs_filter_tp_toplp_local, after the fused pass wrote the
** shard's logits (tr, from fs_filter_tp_zout with top_n and R): fsamp_toplp
** lists the shard's n largest a slice (global ids) and their log-sum-exp
** pairs into tr->lists, and where nothing reads the logits after it (no
** m->ranks, no m->targets) discards their L2 lines (tr->zout_keep).
** fs_filter_tp_toplp_merge, after the draws' logits `drawn` ([B, S], or
** NULL without logprobs) are reduced: the R ranks' lists gathered through
** one FS_REDUCE_MAX_U64 all-reduce of B x R G (n + 1) words (zeros but
** rank c->rank's part: a max that is a gather), then fsamp_toplp_merge
** writes the lists, and with m->logprobs the draws' logprobs from drawn,
** against the log-sum-exp of all ranks' pairs (every rank the same). */
int fs_filter_tp_toplp_local(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                             const fs_opts *m, const fs_tp_rank *tr, CUstream stream);
int fs_filter_tp_toplp_merge(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                             const fs_opts *m, const fs_tp_coll *c, const fs_tp_rank *tr,
                             float *drawn, CUstream stream);
/* filter.c: a tensor-parallel call's ranks (m->ranks), after its draws'
** logits `drawn` ([B, S], every rank the same) are reduced: each rank counts
** its shard's logits >= each draw's (fsamp_rank, as floats), discards the
** logits' L2 lines where tr->zout_keep (fsamp_zout_drop: the count was
** their last read; not with m->targets, whose fs_filter_tp_targets reads
** them after), one FS_REDUCE_SUM_F32 all-reduce of the n counts
** through c, and fsamp_rank_int writes them to m->ranks. */
int fs_filter_tp_ranks(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                       const fs_opts *m, const fs_tp_coll *c, const fs_tp_rank *tr,
                       const float *drawn, CUstream stream);
/* filter.c: launches one of the small kernels (128 threads a block,
** `blocks` blocks) on stream; `name` names the call in the error. */
int fs_launch_small(fs_context *ctx, CUfunction f, const char *name, unsigned blocks,
                    void **args, void *stream);
/* filter.c: a tensor-parallel call's targets (m->targets, since 0.3.19),
** after the fused pass wrote the shard's logits (tr, from fs_filter_tp_zout
** with m->targets) and after any ranks: fsamp_tp_target_key, one
** FS_REDUCE_MAX_U64 all-reduce of B keys (the target's logit from the rank
** that holds it), fsamp_target and fsamp_target_out over the shard (its
** log-sum-exp and count against that logit; then fsamp_zout_drop where
** tr->zout_keep), one max all-reduce of the B log-sum-exp keys, one
** FS_REDUCE_SUM_F32 all-reduce of B (exp(L - M), count) pairs, and
** fsamp_tp_target_fin writes m->target_lp and m->target_ranks: three
** collectives, the same on every rank. */
int fs_filter_tp_targets(fs_context *ctx, const fs_problem *p, const fs_sampling *s,
                         const fs_opts *m, const fs_tp_coll *c, const fs_tp_rank *tr,
                         CUstream stream);
int fs_filter_compile(const char *target, struct fs_cubin *out, char *err, size_t errlen);
/* tp.c: fs_sample_ex() of a call with a logit bias, on one GPU. */
int fs_sample_biased(fs_context *ctx, const fs_problem *problem, const fs_sampling *sampling,
                     const fs_options *options, const fs_outputs *outputs, void *stream);
int fs_bias_compile(const char *target, struct fs_cubin *out, char *err, size_t errlen);

/* The call-level fields of the kernels' parameter block (sample.c): the
** problem, the sampling and the options m (NULL: none); the outputs and the
** workspace's pointers stay 0. */
struct fs_params;
void fs_params_call(struct fs_params *prm, const fs_problem *p, const fs_sampling *s,
                    const fs_opts *m);

/* Filters (m->filter) need FS_NOISE_TOKEN (FS_INVALID_ARGUMENT under
** FS_NOISE_GROUP16). */
int fs_validate_filter_use(fs_context *ctx, int noise, const fs_opts *m);
/* A logit bias under FS_NOISE_GROUP16 (since 0.3.17): at most FS_BIAS_SHORT
** entries a row, without top logprobs or ranks (FS_INVALID_ARGUMENT). */
int fs_validate_bias_noise(fs_context *ctx, int noise, const fs_opts *m);
/* An fs_noise value, and the problem's fit to it (FS_NOISE_GROUP16 needs
** vocab_offset % 16 == 0). */
int fs_validate_noise(fs_context *ctx, int noise, const fs_problem *p);

/* Effective row strides (0 means D). */
static inline long long fs_h_stride(const fs_problem *p) {
  return p->hidden_stride ? p->hidden_stride : p->hidden;
}
static inline long long fs_w_stride(const fs_problem *p) {
  return p->weight_stride ? p->weight_stride : p->hidden;
}

#endif /* FS_INT_H */
