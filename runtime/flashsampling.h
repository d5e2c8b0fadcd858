/*
** flashsampling.h: the public C interface of libflashsampling.
**
** libflashsampling draws the next token of a language model exactly from
** softmax((H . W^T) / T) without writing the [B, V] logits to GPU memory: a
** generated CUDA kernel computes logits tile by tile on chip, adds Gumbel
** noise keyed by (seed, offset, sample, global token id) and keeps one
** candidate per (row, vocab chunk); a tiny reduction picks the winner.
** argmax(z/T + Gumbel) is an exact sample of softmax(z/T).
**
** Contracts that hold for every function below:
**  - Functions return an fs_status; FS_OK (0) is success. On failure the
**    context (or, for calls without one, the calling thread) keeps a message
**    naming the argument, its value and the rule it broke: fs_last_error().
**  - Device pointers are plain addresses in the context's CUDA context
**    (CUdeviceptr values cast to pointers).  Streams are CUstream values (or
**    cudaStream_t, the same thing) cast to void*; NULL is the legacy stream.
**  - Destructors accept NULL.  The library never calls abort() or exit().
**  - A context may be used by one thread at a time.
**
** This header compiles alone as C11 and as C++.
*/
#ifndef FLASHSAMPLING_H
#define FLASHSAMPLING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ------------------------------------------------------------ */
#define FS_VERSION_MAJOR 0
#define FS_VERSION_MINOR 3
#define FS_VERSION_PATCH 19
/* MAJOR*10000 + MINOR*100 + PATCH, as returned by fs_version_number(). */
#define FS_VERSION_NUMBER \
  (FS_VERSION_MAJOR * 10000 + FS_VERSION_MINOR * 100 + FS_VERSION_PATCH)
#define FS_VERSION_STRING "0.3.19"

/* The version of the library actually linked; compare with FS_VERSION_NUMBER
** to detect a header/library mismatch. */
int fs_version_number(void);
const char *fs_version_string(void);

/* ---- status codes (stable values; new codes are only ever appended) ------ */
typedef enum fs_status {
  FS_OK = 0,
  FS_INVALID_ARGUMENT = 1, /* an argument broke a documented rule */
  FS_NO_DEVICE = 2,        /* no CUDA driver or no such GPU */
  FS_CUDA = 3,             /* a CUDA driver call failed */
  FS_NVRTC = 4,            /* run-time compilation failed (log kept) */
  FS_LUA = 5,              /* the kernel generator failed */
  FS_DB = 6,               /* the tuning database failed */
  FS_UNSUPPORTED = 7,      /* the GPU architecture is not supported */
  FS_NOT_PREPARED = 8,     /* needs fs_prepare() first (e.g. while capturing) */
  FS_OUT_OF_MEMORY = 9,    /* host or device allocation failed */
  FS_INTERNAL = 10         /* a bug in libflashsampling: please report */
} fs_status;

/* A static English description of a status code ("invalid argument"). Never
** NULL; unknown codes give "unknown status". */
const char *fs_status_string(int status);

/* ---- context -------------------------------------------------------------- */
typedef struct fs_context fs_context;

/* Creates a context on GPU `device_ordinal` (retaining its primary CUDA
** context).  On success *ppCtx is the new context.  On failure *ppCtx is NULL
** and fs_last_error(NULL) says why (FS_NO_DEVICE when there is no driver or no
** GPU, FS_INVALID_ARGUMENT for an ordinal out of range or ppCtx NULL,
** FS_UNSUPPORTED below sm_80). */
int fs_context_create(int device_ordinal, fs_context **ppCtx /* OUT */);

/* Like fs_context_create() but uses an existing CUcontext (passed as void*),
** which the caller keeps alive longer than the fs_context (NULL:
** FS_INVALID_ARGUMENT). */
int fs_context_create_from_cucontext(void *cu_context,
                                     fs_context **ppCtx /* OUT */);

/* Unloads kernels, frees the workspace and releases the CUDA context.
** Accepts NULL.  Must not be called while work it enqueued may still run. */
void fs_context_destroy(fs_context *ctx);

/* The message of the last failure of a call on `ctx`, or, with ctx NULL, of
** the last failed call on this thread that had no context.  "" when none.
** The string is owned by the library and valid until the next call on the
** same context (or, for NULL, the next context-less call on this thread). */
const char *fs_last_error(const fs_context *ctx);

/* The NVRTC log of the last failed compilation on `ctx` together with the
** variant name, options and the generated source, or "" if none.  Same
** lifetime rule as fs_last_error(). */
const char *fs_last_compile_log(const fs_context *ctx);

/* ---- the problem ---------------------------------------------------------- */
typedef enum fs_dtype {
  FS_DTYPE_BF16 = 1, /* bfloat16 H and W */
  FS_DTYPE_FP16 = 2  /* IEEE half H and W */
} fs_dtype;

/* Limits of the index arithmetic (checked; larger values are rejected). */
#define FS_MAX_BATCH 65535         /* B */
#define FS_MAX_HIDDEN 65536        /* D */
#define FS_MAX_VOCAB 0x7fffffff    /* vocab_offset + V (31-bit token ids) */
#define FS_MAX_VOCAB_ROWS 0x7ffffc00 /* V: a tile past the last row stays in range */
#define FS_MAX_SAMPLES 65535       /* num_samples */
#define FS_MAX_DRAWS (1 << 30)     /* B x num_samples */
#define FS_MIN_TEMPERATURE 1e-30f  /* the least T > 0: z / T stays finite in fp32 */
#define FS_MIN_SOFTCAP 1e-30f      /* the least logit_softcap > 0: 1 / c is finite */
#define FS_MAX_SOFTCAP 1e30f       /* the largest: the kernels' fast 1 / c stays normal */
#define FS_MAX_LOGIT_BIAS 16384    /* fs_options.logit_bias_count: entries per row
                                      (1024 before 0.3.11) */
#define FS_MAX_TOP_LOGPROBS 256    /* fs_options.top_logprobs: the most a row (since 0.3.12) */
#define FS_MAX_TP_RANKS 4096       /* fs_context_set_tp_rank's ranks (since 0.3.16) */

/* One LM-head problem: logits z = H . W^T, H is [B, D], W is [V, D], both
** row-major with the given row strides (in elements, >= D, multiple of 8;
** hidden_stride x B and weight_stride x V within 2^40 elements).
** W holds rows [vocab_offset, vocab_offset + V) of a larger vocabulary: the
** returned tokens are global ids and the noise is keyed by global id, so the
** best candidate over shards equals the unsharded sample.
** Alignment: both pointers 16-byte aligned, D a multiple of 8. */
typedef struct fs_problem {
  int32_t batch;           /* B, 1..FS_MAX_BATCH */
  int32_t hidden;          /* D, 8..FS_MAX_HIDDEN, multiple of 8 */
  int32_t vocab;           /* V, rows of W in this call, 1..FS_MAX_VOCAB_ROWS */
  int64_t vocab_offset;    /* global id of W's first row, >= 0 */
  int32_t dtype;           /* an fs_dtype */
  const void *hidden_states; /* device [B, hidden_stride] */
  int64_t hidden_stride;   /* elements between rows of H (0 means D) */
  const void *weight;      /* device [V, weight_stride] */
  int64_t weight_stride;   /* elements between rows of W (0 means D) */
} fs_problem;

/* How to sample.  Each per-row array, when not NULL, is a device array of B
** entries read by the kernel (so it may change between graph replays); when
** NULL the scalar beside it applies to every row.
**  - temperature T: 0 means greedy (exact argmax of the logits) for that row,
**    so greedy and sampled rows mix in one batch; otherwise finite and >=
**    FS_MIN_TEMPERATURE.  A per-row value that is negative or NaN is treated
**    as greedy (the host cannot see device values without a
**    synchronisation); +inf gives the uniform distribution (z / inf = 0,
**    noise only); one in (0, FS_MIN_TEMPERATURE) breaks the contract (z / T
**    may overflow to +inf, and the draw is then no sample).
**  - seed, offset: the Philox key is the seed; the counter holds the offset,
**    the sample index and the global token id.  With a scalar seed the row
**    index enters the counter too (rows independent); with per-row seeds it
**    does not, so a request's tokens do not depend on its slot in the batch.
**    Nothing depends on tile sizes, the kernel variant or the GPU. */
typedef struct fs_sampling {
  float temperature;           /* scalar T (used when temperatures == NULL) */
  const float *temperatures;   /* device [B] or NULL */
  int32_t num_samples;         /* i.i.d. samples per row, 1..FS_MAX_SAMPLES,
                                  with B x num_samples <= FS_MAX_DRAWS */
  uint64_t seed;               /* scalar seed (used when seeds == NULL) */
  const uint64_t *seeds;       /* device [B] or NULL */
  uint64_t offset;             /* scalar offset (used when offsets == NULL) */
  const uint64_t *offsets;     /* device [B] or NULL */
} fs_sampling;

/* Where results go (device memory, [B, num_samples] row-major). */
typedef struct fs_outputs {
  int32_t *tokens;  /* required: global token ids */
  float *logits;    /* optional: the raw logit z of each sampled token */
  uint64_t *keys;   /* optional: the winner's order-preserving 64-bit key,
                       (perturbed score bits << 32) | ~token; the max key
                       over vocab shards is the unsharded winner */
} fs_outputs;

/* Further inputs of one call (fs_sample_ex(), fs_sample_tp_ex(),
** fs_sample_nccl_ex(); since 0.2.0), a struct that later versions only
** append to: set `size` to sizeof(fs_options) and zero what is unused (NULL
** options mean all unused).
** A later library reads only the fields that `size` covers, so a program
** built against this header keeps working; a size that no version of
** fs_options has had (here: anything but 0.2's, which ends before logprobs,
** 0.3.0's, which ends before logit_softcap, 0.3.2's, which ends before
** logit_bias_tokens, 0.3.3's, which ends before min_p (its sizeof, padded to
** the struct's alignment, or that offset), 0.3.4's, which ends
** before repetition_penalty, 0.3.9's, which ends before top_logprobs, 0.3.12's,
** which ends before ranks, 0.3.13's, which ends before target_tokens, and
** this one) is rejected.
**  - token_mask: which tokens each row may draw, the bitmask layout of vLLM
**    and xgrammar: global token id t is allowed for row b when bit t % 32 of
**    word token_mask[b * token_mask_stride + t / 32] is 1; only the words
**    holding this call's ids [vocab_offset, vocab_offset + V) are read, and
**    only those ids' bits used.  A token that
**    is not allowed is drawn as if its logit were -inf (no mass in either
**    noise, never a greedy argmax while an allowed token has a logit above
**    -inf); a row with no allowed token among them draws as a row of -inf
**    logits does: its first id, vocab_offset, with logit -inf (over the ranks
**    of fs_sample_tp_ex() / fs_sample_nccl_ex(), the smallest such id).  The
**    kernel reads the mask, so it may change between graph replays.  4-byte
**    aligned device memory; for the tensor-parallel calls, the same contents
**    and stride on each rank's device (the ids are global).
**  - token_mask_stride: ignored without a mask; token_mask_stride x B must
**    stay within 2^40 words.  fs_sample_tp_ex() and fs_sample_nccl_ex() need
**    it given (the whole vocabulary's words: a shard cannot know them), not
**    0.
**  - logprobs (since 0.3.0; the 0.2 struct ends before it): where each draw's
**    log-probability goes, [B, num_samples] row-major like the tokens: the
**    sampled token's raw logit z minus the log-sum-exp of the raw logits of
**    all V tokens of the call, log softmax(z) at the token, computed without
**    the logits ever in memory.  Raw: no temperature and no token mask (the
**    logprobs vLLM returns by default), so greedy rows get theirs too; a row
**    with no allowed token reports logit -inf, so logprob -inf.  NaN for a
**    row whose logits hold NaN or +inf (fp32 logits: a dot product past
**    FLT_MAX is +inf), and for a row whose logits are all -inf.  The log-sum-exp is taken in
**    fp32 with the fast exponential (relative error of the sum ~1e-6).  The
**    tensor-parallel calls fs_sample_tp_ex() and fs_sample_nccl_ex() give them
**    too (since 0.3.1; 0.3.0 refused them), over the whole vocabulary: each
**    rank passes its own array, and every rank gets the same values.  All
**    ranks of a call ask for logprobs or none does (their all-reduces have B
**    more elements with them: ranks that disagree would reduce buffers of
**    different lengths).  4-byte aligned device memory, or NULL.
**  - logit_softcap (since 0.3.2; the 0.3.0 struct ends before it): 0 for
**    none, else c in [FS_MIN_SOFTCAP, FS_MAX_SOFTCAP]: every logit z of the call becomes
**    c tanh(z / c) before anything else reads it (the token mask, the
**    temperature, the noise, greedy rows' argmax, logprobs' log-sum-exp and
**    outputs->logits are all of the capped logits), as Gemma 2 (c = 30) and
**    Grok-1 ask of their final logits.  tanh is CUDA's tanhf in fp32 (2 ulp)
**    of z times 1 / c; +-inf become +-c, NaN stays NaN, and logits beyond
**    ~9 c all become +-c exactly (tanh rounds to 1 in fp32; greedy rows
**    take the first of them).  The tensor-parallel
**    calls cap every shard alike, so every rank must pass the same c.
**  - logit_bias_tokens, logit_bias_values, logit_bias_count (since 0.3.3; the
**    0.3.2 struct ends before them): a sparse additive bias per row, as
**    OpenAI's logit_bias and vLLM's processors ask: entry j of row b, token
**    logit_bias_tokens[b * count + j] and value logit_bias_values[b * count +
**    j], adds the value to that token's logit after the soft-cap and before
**    the token mask, the temperature, the noise and greedy rows' argmax.  An
**    entry whose token is not in this call's [vocab_offset, vocab_offset + V)
**    is ignored (-1 pads a row; the tensor-parallel calls take the same
**    arrays on every rank, each rank applying the ids of its shard); a token
**    listed more than once in a row gets the sum of its values (in fp32, in
**    entry order).  A value of -inf gives the token a score of -inf (drawn
**    only where no token scores more: then the first of the row's -inf ids,
**    with its raw logit), +inf draws it whenever its logit is finite (the
**    smallest such id among several).  A biased token that the mask allows
**    and whose score is NaN (a NaN value, +inf and -inf on one id, a NaN
**    logit, or +inf at a per-row temperature of +inf) ranks as -inf: below
**    every number, above the NaN scores of unbiased tokens (the fused
**    kernel, to which biased ids are masked, ranks them so).  outputs->logits and
**    logprobs stay those of the raw logits, as for the temperature.  How:
**    the fused kernel draws over the other tokens (each row's biased ids
**    cleared from a copy of the token mask in the workspace: B x (the
**    words holding the call's ids) more, and 12 bytes an entry), and
**    two small kernels take the biased tokens' logits from their W rows and
**    score them with the same noise, keeping the larger key: exact, and
**    pathwise the draw one fused kernel would make (with min_p, top_k or
**    top_p the filters' path takes the bias instead: see below).  Cost: one W row (D x 2
**    bytes) read per entry, the mask copy and two small launches; count 0
**    costs nothing.  Above 1024 entries a row (since 0.3.11; a repetition
**    penalty's list of a long prompt) the call takes the filters' path
**    below, with or without filters and greedy or not: the logits written
**    to the workspace (B x V x 4 bytes more, and B x count x 12), each row's
**    entries (from 257 of them) made distinct by a sort in shared memory (a
**    CTA a row) and applied to them, and the draw over them, instead of a dot product an
**    entry; the draws are the same.  From B = 16 shorter lists take it too
**    where the dot products would cost more (fitted on the H200: ~1.2 +
**    0.45 D / 1024 ns a row and entry against ~50 us + ~0.6 us a row at V =
**    151,936; at Qwen3-8B's shape above ~460 entries at B = 64, ~265 at
**    B = 256; one GPU only: the tensor-parallel ranks decide by the count,
**    so that every rank takes the same path whatever its shard).  There the sort's 32-bit words need
**    (V - 1) x 2^ceil(log2 count) + count - 1 < 2^32 - 1: every count up to
**    FS_MAX_LOGIT_BIAS for V < 2^18, 16383 at V = 2^18 (the message names
**    the most a V takes).  count is 0..FS_MAX_LOGIT_BIAS (0: no bias, the
**    pointers unread); else both arrays are 4-byte aligned device memory of
**    B x count entries.  Under FS_NOISE_GROUP16 (since 0.3.17) a bias changes
**    its ids' groups' masses: the fused kernel draws over the groups no
**    entry touches, and each group an entry touches is read (16 W rows), its
**    listed ids biased, and folded as the fused kernel folds a group (a
**    biased id whose score is NaN ranks as -inf); there count is at most
**    1024 (the filters' path draws per token), and top_logprobs and ranks
**    are not taken with a bias (FS_INVALID_ARGUMENT for either).  Cost: 16
**    W rows an entry (Qwen3-8B on an H100, 16 entries a row: +16 us at B =
**    1, +57 at 64, +210 at 256, against +17, +21 and +65 per token; 256
**    entries: +35, +689, +2691 us: a long penalty list is cheaper under
**    FS_NOISE_TOKEN, whose filters' path takes it; perf-notes 52b).  The first
**    call with a bias on a context
**    compiles the bias kernels and may grow the workspace: make one before
**    capturing such calls in a CUDA graph (while capturing that first call
**    returns FS_NOT_PREPARED).
**  - min_p / min_ps, top_k / top_ks, top_p / top_ps (since 0.3.4; the 0.3.3
**    struct ends before them): filters of a sampled row's distribution, as
**    vLLM's and FlashInfer's samplers apply them.  Each per-row array, when
**    not NULL, is a device array of B entries (4-byte aligned) read by the
**    kernels (it may change between graph replays); when NULL the scalar
**    applies to every row.  A row's candidates are its tokens whose score z
**    (the logit after the soft-cap, the logit bias and the token mask) is a
**    number above -inf; p_i = softmax(z / T) over them.  The draw is exactly from p
**    restricted to the kept set K below and renormalised, by the same noise
**    as without filters: argmax over K of z / T + g(token), so that where a
**    row's filters keep every candidate the draw is the unfiltered one.  K
**    is the candidates with z >= tau, one threshold per row:
**      1. min-p: z >= z_max + T ln(min_p) (p_i >= min_p x the largest p);
**         min_p 0 keeps all; a per-row value <= 0 or NaN keeps all, one
**         above 1 acts as 1 (only the largest z);
**      2. top-k: the k largest z among those, ties with the k-th all kept;
**         k 0 keeps all, as does k >= their count or a per-row k <= 0;
**      3. top-p: the fewest largest z among those whose probability,
**         renormalised over them, reaches p (taken from the largest z down,
**         ties with the last one taken all kept); p 1 keeps all, as does a
**         per-row value that is NaN, <= 0 or >= 1.
**    This is vLLM's order (min-p, then top-k and top-p together, top-p over
**    what top-k kept); min-p and top-k commute.  A +inf score holds all the
**    mass: K is then the +inf candidates, and the draw the first of them.
**    Greedy rows (T = 0) are unchanged (every filter keeps the largest z);
**    a row without candidates draws as without filters.  outputs->logits,
**    keys and logprobs are as without filters (logprobs of the raw logits).
**    How (0.3.4): the call's kernel writes the row's logits to the
**    workspace (B x V x 4 bytes more: the filters need the whole row's
**    order before any token can be kept), and one CTA per row (since 0.3.5,
**    at small B on sm_90 and newer, a cluster of 2-8 CTAs) finds tau by radix
**    selection (counts for top-k; for top-p the masses, summed in
**    64-bit fixed point, 2^-32 of the largest weight a token, so that the
**    sums do not depend on the order of the atomics) and draws, over the
**    tokens above a bound gathered into shared memory where they fit
**    (docs/design.md, "Filters").  The masses
**    are fp32 exponentials: a row whose top-p boundary lies within ~1e-5 of
**    p (relative), or whose min-p boundary lies within fp32 rounding of a
**    logit, may keep one token more or fewer than the exact rule.  Scalars:
**    top_k >= 0, top_p in [0, 1], min_p in [0, 1].  With a logit bias
**    (since 0.3.6; 0.3.4 and 0.3.5 refused it) the filters see the biased
**    scores: a small kernel adds each row's values to the written logits
**    of its biased tokens before the filters run (one more launch, a CTA a
**    row; with logprobs it first takes the raw logits' log-sum-exp, one
**    more pass over them), and the draws report raw logits; a biased
**    score that is NaN is -inf there, before the temperature (so at a
**    per-row T of +inf a +inf score ranks as an unbiased +inf logit does).
**    In the tensor-parallel calls (since 0.3.7; 0.3.4 to 0.3.6 refused
**    them) each rank writes its shard's logits and the ranks agree on each
**    row's thresholds through the call's collective: one more
**    FS_REDUCE_MAX_U64 of 3 B keys (the row's largest logit), then one
**    FS_REDUCE_SUM_F32 a pass of the selections the options can ask for
**    (top-k: three, B x 2048 x 2 floats at most; top-p: four, B x 2048 x 5
**    floats at most), histograms whose counts and masses travel as 12-bit
**    limbs, so that their sums are exact in any order for up to 128 ranks:
**    the draws are the unsharded call's, bit for bit (up to fp32 near-ties
**    of the dot products, as without filters).  Not with FS_NOISE_GROUP16
**    (FS_INVALID_ARGUMENT).
**    The first filtered call on a context compiles the filter kernel (2-6 s
**    of NVRTC on a 2-core machine) and may grow the workspace: make one
**    before capturing such calls in a CUDA
**    graph (while capturing that first call returns FS_NOT_PREPARED).
**  - repetition_penalty / repetition_penalties (since 0.3.9; the 0.3.4 struct
**    ends before them): the repetition penalty of CTRL (Keskar et al. 2019)
**    as Hugging Face's and vLLM's samplers apply it, to the tokens the row's
**    logit bias lists: each distinct token listed in row b (in this call's
**    ids) has its logit z (after the soft-cap) replaced by z / r where z > 0
**    and by z r where z <= 0, and then its values added (so its score is
**    pen_r(z) + the sum of its values), before the token mask, the
**    temperature, the noise, greedy rows' argmax and the filters.  vLLM's
**    penalties are then one list a row: every distinct token of the prompt
**    and the output so far, with value -(frequency_penalty x its count in the
**    output + presence_penalty x [count > 0]) (0 for a prompt-only token).
**    r is the row's repetition_penalties[b] (a device array of B floats,
**    4-byte aligned, read by the kernels) when that is not NULL, else the
**    scalar; a per-row value that is NaN, <= 0 or +inf penalises nothing,
**    nor does r = 1 (the identity).  The scalar must be 0 (none) or a finite
**    r > 0.  In fp32: z / r rounded once, z r rounded once, then the values'
**    sum added.  outputs->logits and logprobs stay those of the raw logits;
**    without listed tokens (logit_bias_count 0) nothing is penalised.  Cost:
**    the logit bias's (its kernels apply it), nothing more.
**  - top_logprobs, top_logprob_tokens, top_logprob_values (since 0.3.12;
**    the 0.3.9 struct ends before them): the n = top_logprobs most likely
**    tokens of each row and their log-probabilities, as vLLM's `logprobs=n`
**    and OpenAI's `top_logprobs` return them beside the sampled token: row
**    b's i-th, i in 0..n-1, goes to top_logprob_tokens[b * n + i] (a global
**    id) and top_logprob_values[b * n + i] (its raw logit z minus the
**    row's log-sum-exp, as logprobs above), in descending order of the raw
**    logits (after the soft-cap; before the bias, the repetition penalty,
**    the token mask and the temperature, none of which changes them), equal
**    logits by increasing id, a NaN logit after every number.  Where the
**    call has fewer than n ids, the rest are -1 and -inf.  The values are
**    NaN where logprobs are (a NaN or +inf logit in the row, or every logit
**    -inf); with logprobs too, a sampled token in the list has the same
**    value bit for bit (one log-sum-exp serves both).  The list does not
**    depend on the sampling (temperature, seeds, samples, filters), up to
**    fp32 near-ties of the dot products (the kernel that computes the
**    logits may differ with the call's mode).  How:
**    the call's kernel writes the logits to the workspace (B x V x 4 bytes
**    more; without a bias or a sampled call's filters it is the call's own
**    fused kernel, which draws as it would without the lists; else the
**    filters' path below), and two small kernels take each row's n largest
**    (slices of the row, each read once in chunks, the keys above the n-th
**    so far gathered and sorted in shared memory; then the slices' lists
**    merged).  top_logprobs is 0..FS_MAX_TOP_LOGPROBS (0: none, the
**    pointers unread); else both arrays are 4-byte aligned device memory of
**    B x n entries.  Under
**    FS_NOISE_GROUP16 (since 0.3.17) the fused pass draws the groups as
**    without the lists (a bias and filters need FS_NOISE_TOKEN).  In the
**    tensor-parallel
**    calls (since 0.3.16; the same n on every rank, each with B x n entries
**    of its own) each rank's fused pass writes its shard's logits while it
**    draws (with a logit bias or a sampled call's filters the filters' path
**    writes them, the lists taken before the bias), the rank lists its
**    shard's n largest (global ids) and their
**    log-sum-exp terms, and after the draws' collectives one more
**    FS_REDUCE_MAX_U64 all-reduce of B x R x G x (n + 1) words (R ranks, G
**    the slices a row: a function of B and n alone, the same on every rank,
**    at most 66 for n <= 64 and 16 above) gathers every rank's lists
**    (zero but in this rank's part, so the max is a gather), which each
**    rank merges: every rank gets the unsharded call's lists, and with
**    logprobs the draws' logprobs against the same log-sum-exp (merged in
**    another order than one GPU's: within ~1e-6 relative of the unsharded
**    call's values).  The gather needs this rank's index and the rank
**    count: NCCL's (fs_sample_nccl_ex), else fs_context_set_tp_rank's
**    (FS_INVALID_ARGUMENT before it is set).  The
**    first such call on a context compiles the filters' kernels and may
**    grow the workspace: make one before capturing such calls in a CUDA
**    graph.
**  - ranks (since 0.3.13; the 0.3.12 struct ends before it): where each
**    draw's rank goes, [B, num_samples] row-major like the tokens, as vLLM
**    returns it beside a sampled token's logprob: the number of the call's
**    V ids whose raw logit (after the soft-cap; before the bias, the
**    repetition penalty, the token mask and the temperature) is >= the
**    draw's reported logit (outputs->logits), so 1 for the most likely
**    token and the drawn token's ties counted with it.  NaN logits are
**    never counted, so a draw whose logit is NaN has rank 0; a row with no
**    allowed token (its logit -inf) has the count of its ids whose logit is
**    not NaN.  Comparisons in fp32, of the logits the call computed: up to
**    fp32 near-ties of the dot products, as the lists above.  How: the
**    call takes the path of top_logprobs (the logits written to the
**    workspace, B x V x 4 bytes more; its own fused kernel drawing where
**    neither a bias nor a sampled call's filters need them first), and
**    after the draw one more kernel counts each row's logits against its
**    draws (a read of the written logits; the biased ids' raw logits put
**    back first).  4-byte aligned device memory of B x num_samples int32,
**    or NULL.  Under FS_NOISE_GROUP16 (since 0.3.17) as top_logprobs: the
**    fused pass draws the groups while it writes the logits, in the
**    tensor-parallel calls too.  In the tensor-parallel calls
**    (since 0.3.14; the same on every rank) each rank writes its shard's
**    logits (B x V x 4 bytes of workspace): without a logit bias or a
**    sampled call's filters (since 0.3.15) its fused kernel writes them
**    while it draws, and the collectives are the keys' max all-reduce, the
**    draws' logits' sum all-reduce (with or without outputs->logits) and
**    one more FS_REDUCE_SUM_F32 all-reduce of B x num_samples counts, each
**    rank's count of its shard's logits >= each draw's (exact while the
**    whole vocabulary has fewer than 2^24 ids); with either, the call
**    takes the filters' path (fs_sample_tp_ex), which adds a max all-reduce
**    of 3 B keys (the shards' bounds) before the keys'.  Every rank gets
**    the unsharded call's ranks.  As with
**    top_logprobs, make one such call before capturing such calls in a
**    CUDA graph.
**  - target_tokens, target_logprobs, target_ranks (since 0.3.18; the 0.3.13
**    struct ends before them): the log-probability and rank of a given
**    token per row, as vLLM's prompt_logprobs and an evaluation's
**    log-likelihood ask of each prompt position's next token: row b's
**    target is target_tokens[b] (a global id); target_logprobs[b] gets its
**    raw logit z minus the row's log-sum-exp (as logprobs above: after the
**    soft-cap; before the bias, the repetition penalty, the token mask and
**    the temperature) and target_ranks[b] the number of the call's V ids
**    whose raw logit is >= z (as ranks above: 1 for the most likely, ties
**    counted, NaN never).  A row whose target is not among the call's ids
**    [vocab_offset, vocab_offset + V) (-1 for none) gets NaN and rank 0,
**    as does one whose target's logit is NaN; the logprob is NaN where
**    logprobs are (a NaN or +inf logit in the row, or every logit -inf).
**    The call draws as the same call with ranks does (up to fp32
**    near-ties of the dot products, as without them: the path that writes
**    the logits may run another kernel); the values do not depend on the
**    sampling.  How: the call takes the path of ranks (the logits written
**    to the workspace, B x V x 4 bytes more, by its own fused kernel where
**    neither a bias nor a sampled call's filters need them first), and
**    before any bias changes them fsamp_target reads each row's logits
**    once (slices of the row: a log-sum-exp pair and a count each; with
**    more than one slice a row, fsamp_target_out merges them) and writes
**    the outputs: a read of B x V x 4 bytes (perf-notes 53).  The
**    log-sum-exp is fp32 with the fast exponential, summed in another
**    order than logprobs': the same token's values agree within ~1e-6 x
**    |lse| (absolute).  target_tokens: 4-byte aligned device memory of B
**    int32, read by the kernels (it may change between graph replays), or
**    NULL for none, and then both outputs must be NULL; with it at least
**    one output, each 4-byte aligned device memory of B entries or NULL.
**    The tensor-parallel calls (since 0.3.19) take them where their fused
**    pass writes the shard's logits: not with a logit bias, nor with
**    min_p, top_k or top_p in a sampled call (FS_INVALID_ARGUMENT naming
**    target_tokens; one GPU's fs_sample_ex takes both).  Each rank reads
**    its shard's logits once and adds three all-reduces after the call's
**    others: a FS_REDUCE_MAX_U64 of B keys (the target's logit from the
**    rank that holds it), one of B keys (the shards' log-sum-exps), and a
**    FS_REDUCE_SUM_F32 of 2 B floats; every rank gets the unsharded call's
**    values (the log-sum-exp merged in another order: within ~2e-5 + 1e-6
**    x |lse|) and ranks (exact while the whole vocabulary has fewer than
**    2^24 ids).  Under FS_NOISE_GROUP16 as ranks (not with a logit bias).
**    As with ranks, make one such call before capturing such calls in a
**    CUDA graph. */
typedef struct fs_options {
  size_t size;                /* sizeof(fs_options) as the caller was compiled */
  const uint32_t *token_mask; /* device [B, token_mask_stride] or NULL (all allowed) */
  int64_t token_mask_stride;  /* words between rows, >= ceil((vocab_offset + V) / 32);
                                 0 means exactly that */
  float *logprobs;            /* device [B, num_samples] or NULL (since 0.3.0) */
  float logit_softcap;        /* 0 (none) or c > 0: z becomes c tanh(z / c) (since 0.3.2) */
  const int32_t *logit_bias_tokens; /* device [B, logit_bias_count] global ids (since 0.3.3) */
  const float *logit_bias_values;   /* device [B, logit_bias_count] added to their logits */
  int32_t logit_bias_count;         /* entries per row, 0..FS_MAX_LOGIT_BIAS (0: none) */
  float min_p;                      /* 0 (none) .. 1 (since 0.3.4) */
  const float *min_ps;              /* device [B] or NULL */
  int32_t top_k;                    /* 0 (none) or k >= 1 */
  const int32_t *top_ks;            /* device [B] or NULL */
  float top_p;                      /* 0 or 1 (none), else in (0, 1) */
  const float *top_ps;              /* device [B] or NULL */
  float repetition_penalty;         /* 0 or 1 (none), else r > 0: the listed tokens'
                                       logits z / r where z > 0, z r else (since 0.3.9) */
  const float *repetition_penalties; /* device [B] or NULL */
  int32_t top_logprobs;             /* n, 0 (none) .. FS_MAX_TOP_LOGPROBS (since 0.3.12) */
  int32_t *top_logprob_tokens;      /* device [B, n]: the n most likely ids, in order */
  float *top_logprob_values;        /* device [B, n]: their log-probabilities */
  int32_t *ranks;                   /* device [B, num_samples] or NULL: each draw's rank
                                       among the raw logits, 1 for the largest (since 0.3.13) */
  const int32_t *target_tokens;     /* device [B] global ids or NULL (since 0.3.18) */
  float *target_logprobs;           /* device [B]: their log-probabilities, or NULL */
  int32_t *target_ranks;            /* device [B]: their ranks among the raw logits, or NULL */
} fs_options;

/* Compiles (NVRTC) and loads the kernel for this shape and allocates the
** context's workspace, so that later fs_sample() calls of the same dtype, D
** and V with B <= problem->batch and num_samples <= sampling->num_samples do
** no compilation, allocation or host synchronisation.  Pointers in `problem`
** and `sampling` are not read.  FS_UNSUPPORTED on a GPU of sm_80 or newer
** for which the generator has no kernels (e.g. sm_110); fs_sample() too. */
int fs_prepare(fs_context *ctx, const fs_problem *problem,
               const fs_sampling *sampling);

/* Draws num_samples tokens per row, asynchronously on `stream`.  For a
** prepared shape it enqueues kernels only: no allocation, no host
** synchronisation, and it may be captured in a CUDA graph.  For a shape not
** prepared it prepares first (compile, load, allocate), except while the
** stream is capturing, where it returns FS_NOT_PREPARED.
** Calls on one context share its workspace: enqueue them on one stream (or
** order their streams), or use one context per stream.  A call or prepare
** that needs a larger workspace allocates a new one and keeps the old one
** until fs_context_destroy(), so graphs captured earlier stay valid. */
int fs_sample(fs_context *ctx, const fs_problem *problem,
              const fs_sampling *sampling, const fs_outputs *outputs,
              void *stream);

/* fs_sample() with further inputs (fs_options; NULL: fs_sample() itself).
** The same kernels serve it: what fs_prepare() prepared needs nothing more. */
int fs_sample_ex(fs_context *ctx, const fs_problem *problem,
                 const fs_sampling *sampling, const fs_options *options,
                 const fs_outputs *outputs, void *stream);

/* Writes the name of the kernel variant fs_sample() would run for this call
** into buf (NUL-terminated, truncated to bufsize) and how it was chosen.
** A shape's batch bucket may have up to three tuned kernels: the one of
** sampled calls, the one of greedy calls (sampling->temperature == 0 with
** temperatures NULL) and the one of FS_NOISE_GROUP16 calls, where fs-tune
** timed those (FS_TUNE_GREEDY=1, FS_TUNE_NOISE=group16); fs_prepare() loads
** all of them, and a call runs the one of its kind (else the sampled one).
** A call with filters (fs_options.min_p, top_k, top_p) writes its logits
** with the kernel of greedy calls where that one stages its tiles, else the
** sampled one's, else the bucket's built-in default (docs/design.md,
** "Filters"), then runs the filters' own kernel. */
int fs_variant_name(fs_context *ctx, const fs_problem *problem,
                    const fs_sampling *sampling, char *buf, size_t bufsize);

/* ---- the noise: how the exact sample is drawn ------------------------------ */
/* Both ways draw exactly from softmax(z / T); they give different tokens for
** the same seed.  Greedy rows (T = 0) are the same argmax in both.
**  FS_NOISE_TOKEN (the default): one Gumbel variate per token; the sample is
**    argmax over tokens of z / T + g(seed, offset, sample, token, row tag).
**  FS_NOISE_GROUP16: one Gumbel variate per group of 16 global ids
**    [16k, 16k + 16) (the part of it inside [vocab_offset, vocab_offset + V)),
**    drawn from Philox counter 2^31 | k (word 0, as for a token's noise), and
**    one uniform u_k (word 1, its top 24 bits times 2^-24).  A group's score
**    is m / T + ln(sum_i 2^((z_i - m) log2(e) / T)) + g_k, m its largest
**    logit: the Gumbel-max over groups picks group k with probability
**    proportional to its mass, and inside it the first token i whose running
**    sum of weights exceeds u_k times their total (inverse CDF).  The keys
**    (fs_outputs.keys) carry the group's score.  About a third of the
**    per-token work of FS_NOISE_TOKEN at large batches (perf-notes 18).
**    Needs vocab_offset % 16 == 0, so that shards of a vocabulary cut at
**    multiples of 16 give the unsharded draw (fs_sample_tp()).
**  Logits of -inf get no mass; NaN logits get none either (FS_NOISE_TOKEN
**  ranks them last); a group whose largest logit is +inf takes its first
**  +inf token with score +inf. */
typedef enum fs_noise_mode {
  FS_NOISE_TOKEN = 0,
  FS_NOISE_GROUP16 = 1
} fs_noise_mode;

/* Sets how fs_sample() / fs_sample_tp() calls on ctx draw (an fs_noise_mode);
** FS_NOISE_TOKEN until set.  Takes effect at the next call without
** compilation (fs_prepare() loaded the kernels of both noises,
** fs_variant_name()); a CUDA graph keeps the noise of the calls it
** captured.  FS_INVALID_ARGUMENT for another value. */
int fs_context_set_noise(fs_context *ctx, int noise);

/* Tells ctx which rank of a tensor-parallel group it serves: rank in
** 0..ranks - 1, ranks in 1..FS_MAX_TP_RANKS, each rank's context a distinct
** rank.  fs_sample_tp_ex needs it for fs_options.top_logprobs (the lists'
** gather gives each rank a part of its own); fs_sample_nccl_ex asks NCCL
** instead.  Since 0.3.16.  FS_INVALID_ARGUMENT for values outside those
** ranges (ctx unchanged). */
int fs_context_set_tp_rank(fs_context *ctx, int rank, int ranks);

/* ---- tensor parallelism: W sharded along the vocabulary -------------------- */
/* Each rank passes its own shard of W as `problem` (vocab = its rows,
** vocab_offset = the global id of its first row) and the SAME sampling
** (seeds, offsets, temperatures) on every rank.  Because the noise is keyed
** by the global token id, every rank's best key is a candidate of the
** unsharded argmax: the max over ranks of the 64-bit keys is exactly the
** token one unsharded fs_sample() would draw (bitwise, up to fp32 near-ties
** of the dot products), with O(B * num_samples) bytes exchanged.  Shards
** may be uneven. */

/* Reductions a fs_allreduce_fn must perform, in place, over all ranks. */
typedef enum fs_reduce_op {
  FS_REDUCE_MAX_U64 = 1, /* buf is count uint64_t: element-wise max */
  FS_REDUCE_SUM_F32 = 2  /* buf is count float: element-wise sum */
} fs_reduce_op;

/* An engine-provided collective: enqueue an in-place all-reduce of `count`
** elements at device pointer `buf` on `stream` and return 0, or nonzero on
** failure.  It must be stream-ordered (no host synchronisation needed).
** FS_REDUCE_SUM_F32 must add in fp32 (in any order, not in a narrower
** type): with filters it carries histograms of integers whose sums stay
** below 2^24, exact only so, for at most 128 ranks (fs_sample_nccl_ex
** asks NCCL for the count and allows up to 4096). */
typedef int (*fs_allreduce_fn)(void *user, void *buf, size_t count, int op,
                               void *stream);

/* fs_sample() for one rank of a vocabulary-sharded LM head: the fused kernel
** on this rank's shard, one FS_REDUCE_MAX_U64 all-reduce of B*num_samples
** keys, a tiny kernel that writes tokens (and keys), and, only when
** outputs->logits is set, one FS_REDUCE_SUM_F32 all-reduce of the winners'
** logits (fs_sample_tp_ex's filters, long logit-bias lists and ranks take
** more collectives, top logprobs one more FS_REDUCE_MAX_U64 after those,
** and target_tokens three more after every other: fs_options).  With fs_options.logprobs (fs_sample_tp_ex(), fs_sample_nccl_ex();
** on every rank or on none), both all-reduces run and each has B more
** elements (a log-sum-exp term per row): B*num_samples + B keys, then as
** many floats, with two more tiny kernels.
** Every rank gets the same outputs.  Asynchronous on `stream` and
** graph-capturable after fs_prepare() (if the collective is). */
int fs_sample_tp(fs_context *ctx, const fs_problem *problem,
                 const fs_sampling *sampling, const fs_outputs *outputs,
                 fs_allreduce_fn allreduce, void *user, void *stream);

/* fs_sample_tp() with further inputs (fs_options, the same on every rank;
** a mask needs its token_mask_stride given; on the filters' path, sampled
** calls with filters and long logit-bias lists, a shard has at most
** 2^24 - 8 rows, ranks, top_logprobs and target_tokens too, on every rank
** (a rank that refuses leaves the others waiting in their collectives);
** top_logprobs needs fs_context_set_tp_rank first). */
int fs_sample_tp_ex(fs_context *ctx, const fs_problem *problem,
                    const fs_sampling *sampling, const fs_options *options,
                    const fs_outputs *outputs, fs_allreduce_fn allreduce,
                    void *user, void *stream);

/* fs_sample_tp() with an NCCL communicator (ncclComm_t passed as void*),
** using ncclAllReduce (ncclUint64/ncclMax, then ncclFloat32/ncclSum; the
** options' further collectives in fs_sample_tp()'s order), and for top
** logprobs ncclCommUserRank and ncclCommCount (this rank's index).
** libnccl.so.2 is loaded at run time; FS_UNSUPPORTED if it is missing. */
int fs_sample_nccl(fs_context *ctx, const fs_problem *problem,
                   const fs_sampling *sampling, const fs_outputs *outputs,
                   void *nccl_comm, void *stream);

/* fs_sample_nccl() with further inputs (fs_options, the same on every rank,
** as for fs_sample_tp_ex(): a mask needs its token_mask_stride given). */
int fs_sample_nccl_ex(fs_context *ctx, const fs_problem *problem,
                      const fs_sampling *sampling, const fs_options *options,
                      const fs_outputs *outputs, void *nccl_comm, void *stream);

/* ---- CPU reference ---------------------------------------------------------- */
/* The same draw on the CPU in plain C: logits in double from the same
** bf16/fp16 inputs, the same Philox noise (see fs_rng.h), argmax.  Every
** pointer is a HOST pointer (per-row arrays too).  tokens is required;
** logits and keys may be NULL.  Errors: fs_last_error(NULL). */
int fs_reference_sample(const fs_problem *problem, const fs_sampling *sampling,
                        int32_t *tokens /* OUT [B*S] */,
                        float *logits /* OUT [B*S] or NULL */,
                        uint64_t *keys /* OUT [B*S] or NULL */);

/* fs_reference_sample() with the given fs_noise_mode (FS_NOISE_GROUP16: the
** groups' masses, scores and inverse-CDF picks in double). */
int fs_reference_sample_noise(const fs_problem *problem,
                              const fs_sampling *sampling, int noise,
                              int32_t *tokens /* OUT [B*S] */,
                              float *logits /* OUT [B*S] or NULL */,
                              uint64_t *keys /* OUT [B*S] or NULL */);

/* fs_reference_sample_noise() with further inputs (fs_options; its arrays,
** the token mask, the bias, the filters', the outputs of logprobs, top
** logprobs, ranks and targets, all HOST arrays). */
int fs_reference_sample_ex(const fs_problem *problem,
                           const fs_sampling *sampling, int noise,
                           const fs_options *options,
                           int32_t *tokens /* OUT [B*S] */,
                           float *logits /* OUT [B*S] or NULL */,
                           uint64_t *keys /* OUT [B*S] or NULL */);

#ifdef __cplusplus
}
#endif
#endif /* FLASHSAMPLING_H */
