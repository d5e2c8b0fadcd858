/*
** validate.c: argument checks.  Every rejection names the argument, the value
** and the rule, e.g. "problem->hidden=4095: D must be a multiple of 8".
** Per-row device arrays cannot be read here (that would synchronise): their
** pointers are checked, their values are documented in flashsampling.h.
*/
#include "fs_int.h"
#include "fs_rng.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BAD(...) fs_err(ctx, FS_INVALID_ARGUMENT, __VA_ARGS__)

static int misaligned(const void *p, unsigned a) {
  return ((uintptr_t)p % a) != 0;
}

int fs_validate_problem(fs_context *ctx, const fs_problem *p, int need_ptrs) {
  if (!p) return BAD("problem=NULL: a problem description is required");
  if (p->batch < 1 || p->batch > FS_MAX_BATCH)
    return BAD("problem->batch=%d: B must be in 1..%d", (int)p->batch,
               FS_MAX_BATCH);
  if (p->hidden < 8 || p->hidden > FS_MAX_HIDDEN)
    return BAD("problem->hidden=%d: D must be in 8..%d", (int)p->hidden,
               FS_MAX_HIDDEN);
  if (p->hidden % 8)
    return BAD("problem->hidden=%d: D must be a multiple of 8 (16-byte rows)",
               (int)p->hidden);
  if (p->vocab < 1 || p->vocab > FS_MAX_VOCAB_ROWS)
    return BAD("problem->vocab=%d: V must be in 1..%d", (int)p->vocab, FS_MAX_VOCAB_ROWS);
  if (p->vocab_offset < 0 ||
      p->vocab_offset > (int64_t)FS_MAX_VOCAB - p->vocab)
    return BAD("problem->vocab_offset=%lld: must be >= 0 and vocab_offset + "
               "V (V=%d) must not exceed %d (31-bit token ids)",
               (long long)p->vocab_offset, (int)p->vocab, FS_MAX_VOCAB);
  if (p->dtype != FS_DTYPE_BF16 && p->dtype != FS_DTYPE_FP16)
    return BAD("problem->dtype=%d: unknown dtype (FS_DTYPE_BF16=%d, "
               "FS_DTYPE_FP16=%d)", (int)p->dtype, FS_DTYPE_BF16,
               FS_DTYPE_FP16);
  long long hs = fs_h_stride(p), ws = fs_w_stride(p);
  if (hs < p->hidden || hs % 8)
    return BAD("problem->hidden_stride=%lld: must be 0 (means D) or >= D "
               "(D=%d) and a multiple of 8", (long long)p->hidden_stride,
               (int)p->hidden);
  if (ws < p->hidden || ws % 8)
    return BAD("problem->weight_stride=%lld: must be 0 (means D) or >= D "
               "(D=%d) and a multiple of 8", (long long)p->weight_stride,
               (int)p->hidden);
  if (ws > (1LL << 40) / p->vocab)
    return BAD("problem->weight_stride=%lld: weight_stride x V (V=%d) exceeds the "
               "2^40-element index range", ws, (int)p->vocab);
  if (hs > (1LL << 40) / p->batch)
    return BAD("problem->hidden_stride=%lld: hidden_stride x B (B=%d) exceeds the "
               "2^40-element index range", hs, (int)p->batch);
  if (!need_ptrs) return FS_OK;
  if (!p->hidden_states)
    return BAD("problem->hidden_states=NULL: H [B, D] is required");
  if (!p->weight) return BAD("problem->weight=NULL: W [V, D] is required");
  if (misaligned(p->hidden_states, 16))
    return BAD("problem->hidden_states=%p: must be 16-byte aligned",
               p->hidden_states);
  if (misaligned(p->weight, 16))
    return BAD("problem->weight=%p: must be 16-byte aligned", p->weight);
  return FS_OK;
}

int fs_validate_sampling(fs_context *ctx, const fs_sampling *s, int batch) {
  if (!s) return BAD("sampling=NULL: a sampling description is required");
  if (s->num_samples < 1 || s->num_samples > FS_MAX_SAMPLES)
    return BAD("sampling->num_samples=%d: must be in 1..%d",
               (int)s->num_samples, FS_MAX_SAMPLES);
  if ((long long)batch * s->num_samples > FS_MAX_DRAWS)
    return BAD("sampling->num_samples=%d: B x num_samples (B=%d) must not exceed %d",
               (int)s->num_samples, batch, FS_MAX_DRAWS);
  if (!s->temperatures) {
    float t = s->temperature;
    if (isnan(t))
      return BAD("sampling->temperature=nan: must be 0 (greedy) or a finite "
                 "value >= %g", (double)FS_MIN_TEMPERATURE);
    if (t < 0.0f || isinf(t) || (t > 0.0f && t < FS_MIN_TEMPERATURE))
      return BAD("sampling->temperature=%g: must be 0 (greedy) or a finite "
                 "value >= %g (smaller ones overflow z / T in fp32)", (double)t,
                 (double)FS_MIN_TEMPERATURE);
  } else if (misaligned(s->temperatures, 4)) {
    return BAD("sampling->temperatures=%p: must be 4-byte aligned",
               (const void *)s->temperatures);
  }
  if (s->seeds && misaligned(s->seeds, 8))
    return BAD("sampling->seeds=%p: must be 8-byte aligned",
               (const void *)s->seeds);
  if (s->offsets && misaligned(s->offsets, 8))
    return BAD("sampling->offsets=%p: must be 8-byte aligned",
               (const void *)s->offsets);
  return FS_OK;
}

int fs_validate_noise(fs_context *ctx, int noise, const fs_problem *p) {
  if (noise != FS_NOISE_TOKEN && noise != FS_NOISE_GROUP16)
    return BAD("noise=%d: must be FS_NOISE_TOKEN (0) or FS_NOISE_GROUP16 (1)", noise);
  if (noise == FS_NOISE_GROUP16 && p && p->vocab_offset % FS_GROUP_TOKENS)
    return BAD("problem->vocab_offset=%lld: FS_NOISE_GROUP16 needs a multiple of %d "
               "(shards cut inside a group of 16 ids would each see part of it)",
               (long long)p->vocab_offset, FS_GROUP_TOKENS);
  return FS_OK;
}

/* The filters of a 0.3.4 fs_options into m (flashsampling.h: min_p, top_k,
** top_p); m->filter is 1 when a per-row array is given or a scalar keeps
** fewer than all. */
static int validate_filters(fs_context *ctx, const fs_options *o, fs_opts *m) {
  if (!(o->min_p >= 0.0f && o->min_p <= 1.0f))
    return BAD("options->min_p=%g: must be in [0, 1] (0: no min-p filter)", (double)o->min_p);
  if (o->top_k < 0)
    return BAD("options->top_k=%d: must be >= 0 (0: no top-k filter)", (int)o->top_k);
  if (!(o->top_p >= 0.0f && o->top_p <= 1.0f))
    return BAD("options->top_p=%g: must be in [0, 1] (0 and 1: no top-p filter)",
               (double)o->top_p);
  if (misaligned(o->min_ps, 4))
    return BAD("options->min_ps=%p: must be 4-byte aligned", (const void *)o->min_ps);
  if (misaligned(o->top_ks, 4))
    return BAD("options->top_ks=%p: must be 4-byte aligned", (const void *)o->top_ks);
  if (misaligned(o->top_ps, 4))
    return BAD("options->top_ps=%p: must be 4-byte aligned", (const void *)o->top_ps);
  m->min_p = o->min_p;
  m->top_k = o->top_k;
  m->top_p = o->top_p;
  m->min_ps = o->min_ps;
  m->top_ks = o->top_ks;
  m->top_ps = o->top_ps;
  m->filter = o->min_ps || o->top_ks || o->top_ps || o->min_p > 0.0f || o->top_k > 0 ||
              (o->top_p > 0.0f && o->top_p < 1.0f);
  return FS_OK;
}

/* The top_logprobs of a 0.3.12 fs_options into m (flashsampling.h). */
static int validate_top(fs_context *ctx, const fs_options *o, fs_opts *m) {
  const int n = o->top_logprobs;
  if (!n) return FS_OK;
  if (n < 0 || n > FS_MAX_TOP_LOGPROBS)
    return BAD("options->top_logprobs=%d: must be in 0..%d (0: none)", n, FS_MAX_TOP_LOGPROBS);
  if (!o->top_logprob_tokens || !o->top_logprob_values)
    return BAD("options->top_logprob_%s=NULL: top_logprobs=%d needs [B, %d] device arrays of "
               "tokens and values", o->top_logprob_tokens ? "values" : "tokens", n, n);
  if (misaligned(o->top_logprob_tokens, 4))
    return BAD("options->top_logprob_tokens=%p: must be 4-byte aligned",
               (void *)o->top_logprob_tokens);
  if (misaligned(o->top_logprob_values, 4))
    return BAD("options->top_logprob_values=%p: must be 4-byte aligned",
               (void *)o->top_logprob_values);
  m->top_n = n;
  m->top_tokens = o->top_logprob_tokens;
  m->top_values = o->top_logprob_values;
  return FS_OK;
}

/* The ranks of a 0.3.13 fs_options into m (flashsampling.h). */
static int validate_ranks(fs_context *ctx, const fs_options *o, fs_opts *m) {
  if (!o->ranks) return FS_OK;
  if (misaligned(o->ranks, 4))
    return BAD("options->ranks=%p: must be 4-byte aligned", (void *)o->ranks);
  m->ranks = o->ranks;
  return FS_OK;
}

/* The targets of a 0.3.18 fs_options into m (flashsampling.h). */
static int validate_targets(fs_context *ctx, const fs_options *o, fs_opts *m) {
  if (!o->target_tokens) {
    if (o->target_logprobs || o->target_ranks)
      return BAD("options->target_tokens=NULL with options->target_%s set: the outputs need "
                 "a [B] device array of target ids", o->target_logprobs ? "logprobs" : "ranks");
    return FS_OK;
  }
  if (!o->target_logprobs && !o->target_ranks)
    return BAD("options->target_tokens=%p with target_logprobs and target_ranks NULL: set at "
               "least one output (or target_tokens NULL)", (const void *)o->target_tokens);
  if (misaligned(o->target_tokens, 4))
    return BAD("options->target_tokens=%p: must be 4-byte aligned",
               (const void *)o->target_tokens);
  if (misaligned(o->target_logprobs, 4))
    return BAD("options->target_logprobs=%p: must be 4-byte aligned",
               (void *)o->target_logprobs);
  if (misaligned(o->target_ranks, 4))
    return BAD("options->target_ranks=%p: must be 4-byte aligned", (void *)o->target_ranks);
  m->targets = o->target_tokens;
  m->target_lp = o->target_logprobs;
  m->target_ranks = o->target_ranks;
  return FS_OK;
}

int fs_validate_options(fs_context *ctx, const fs_options *o, const fs_problem *p,
                        fs_opts *m) {
  memset(m, 0, sizeof *m);
  if (!o) return FS_OK;
  /* the sizes of fs_options that have been: 0.2's (up to token_mask_stride),
  ** 0.3.0's (logprobs), 0.3.2's (logit_softcap) and 0.3.3's (the logit bias) */
  const size_t size02 = offsetof(fs_options, logprobs);
  const size_t size030 = offsetof(fs_options, logit_softcap);
  const size_t size032 = offsetof(fs_options, logit_bias_tokens);
  /* 0.3.3's struct ends with logit_bias_count: its sizeof is padded past
  ** min_p's offset (FS_OPTIONS_SIZE_033); its last bytes are padding there,
  ** and min_p is read only from larger sizes */
  const size_t size033 = offsetof(fs_options, min_p), size033p = FS_OPTIONS_SIZE_033;
  const size_t size034 = offsetof(fs_options, repetition_penalty);
  const size_t size039 = offsetof(fs_options, top_logprobs);
  const size_t size0312 = offsetof(fs_options, ranks);
  const size_t size0313 = offsetof(fs_options, target_tokens);
  if (o->size != sizeof(fs_options) && o->size != size02 && o->size != size030 &&
      o->size != size032 && o->size != size033 && o->size != size033p && o->size != size034 &&
      o->size != size039 && o->size != size0312 && o->size != size0313)
    return BAD("options->size=%zu: must be sizeof(fs_options) as the caller was compiled "
               "(%zu in this library, %zu for a 0.3.13 to 0.3.17 header, %zu for a 0.3.12 header, %zu for "
               "a 0.3.9 header, %zu for a 0.3.4 header, %zu for a 0.3.3 header, %zu for a 0.3.2 "
               "header, %zu for a 0.3.0 header, %zu for a 0.2 header; a larger one is from a "
               "newer header)", o->size, sizeof(fs_options), size0313, size0312, size039,
               size034, size033p, size032, size030, size02);
  if (o->size > size033p) FS_TRY(validate_filters(ctx, o, m));
  if (o->size > size039) FS_TRY(validate_top(ctx, o, m));
  if (o->size > size0312) FS_TRY(validate_ranks(ctx, o, m));
  if (o->size > size0313) FS_TRY(validate_targets(ctx, o, m));
  if (o->size > size034) {
    const float r = o->repetition_penalty;
    if (!(r == 0.0f || (r > 0.0f && r <= FLT_MAX)))
      return BAD("options->repetition_penalty=%g: must be 0 (none) or a finite r > 0 (the "
                 "listed tokens' logits z / r where z > 0, z r else)", (double)r);
    if (misaligned(o->repetition_penalties, 4))
      return BAD("options->repetition_penalties=%p: must be 4-byte aligned",
                 (const void *)o->repetition_penalties);
    m->rep = r; /* 1 penalises nothing: the kernels and the reference know it */
    m->reps = o->repetition_penalties;
  }
  if (o->size > size032 && o->logit_bias_count) {
    const int n = o->logit_bias_count;
    if (n < 0 || n > FS_MAX_LOGIT_BIAS)
      return BAD("options->logit_bias_count=%d: must be in 0..%d (entries per row)", n,
                 FS_MAX_LOGIT_BIAS);
    if (n > FS_BIAS_SHORT && !fs_bias_key_bits(p->vocab, n)) {
      int most = n; /* the longest list this V takes */
      while (most > FS_BIAS_SHORT && !fs_bias_key_bits(p->vocab, most)) most--;
      return BAD("options->logit_bias_count=%d at V=%d: above %d entries a row, (V - 1) x "
                 "2^ceil(log2 count) + count - 1 must be below 2^32 - 1 (at this V: at most %d)",
                 n, (int)p->vocab, FS_BIAS_SHORT, most);
    }
    if (!o->logit_bias_tokens || !o->logit_bias_values)
      return BAD("options->logit_bias_%s=NULL: logit_bias_count=%d needs [B, %d] device "
                 "arrays of tokens and values", o->logit_bias_tokens ? "values" : "tokens",
                 n, n);
    if (misaligned(o->logit_bias_tokens, 4))
      return BAD("options->logit_bias_tokens=%p: must be 4-byte aligned",
                 (const void *)o->logit_bias_tokens);
    if (misaligned(o->logit_bias_values, 4))
      return BAD("options->logit_bias_values=%p: must be 4-byte aligned",
                 (const void *)o->logit_bias_values);
    m->bias_tokens = o->logit_bias_tokens;
    m->bias_values = o->logit_bias_values;
    m->bias_count = n;
  }
  if (o->size > size030) {
    const float c = o->logit_softcap;
    /* past 2^126 the kernels' fast reciprocal (__fdividef) of c is 0 */
    if (!(c == 0.0f || (c >= FS_MIN_SOFTCAP && c <= FS_MAX_SOFTCAP)))
      return BAD("options->logit_softcap=%g: must be 0 (none) or in [%g, %g] (logits "
                 "become c tanh(z / c))", (double)c, (double)FS_MIN_SOFTCAP,
                 (double)FS_MAX_SOFTCAP);
    m->softcap = c;
  }
  if (o->size > size02 && o->logprobs) {
    if (misaligned(o->logprobs, 4))
      return BAD("options->logprobs=%p: must be 4-byte aligned", (void *)o->logprobs);
    m->logprobs = o->logprobs;
  }
  const long long stride = (long long)o->token_mask_stride;
  if (!o->token_mask) return FS_OK;
  if (misaligned(o->token_mask, 4))
    return BAD("options->token_mask=%p: must be 4-byte aligned", (const void *)o->token_mask);
  const long long need = (p->vocab_offset + p->vocab + 31) / 32;
  if (stride < 0 || (stride > 0 && stride < need))
    return BAD("options->token_mask_stride=%lld: must be 0 (means ceil((vocab_offset + V) / "
               "32) = %lld words) or at least that", stride, need);
  m->stride = stride ? stride : need;
  if (m->stride > (1LL << 40) / p->batch)
    return BAD("options->token_mask_stride=%lld: token_mask_stride x B (B=%d) exceeds the "
               "2^40-word index range", m->stride, (int)p->batch);
  m->words = o->token_mask;
  return FS_OK;
}

int fs_validate_filter_use(fs_context *ctx, int noise, const fs_opts *m) {
  /* top logprobs and ranks read the raw logits, whatever the noise: under
  ** FS_NOISE_GROUP16 the fused pass that writes them draws (filter.c's
  ** pass_draws, tp.c's logits_in_pass), as neither a bias nor filters
  ** come with it (refused here and in fs_validate_bias_noise) */
  if (!m->filter) return FS_OK;
  if (noise == FS_NOISE_GROUP16)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "options->min_p/top_k/top_p: the filters need "
                  "FS_NOISE_TOKEN (a group of 16 ids may straddle the threshold; "
                  "fs_context_set_noise)");
  return FS_OK;
}

int fs_validate_bias_noise(fs_context *ctx, int noise, const fs_opts *m) {
  if (!m->bias_count || noise != FS_NOISE_GROUP16) return FS_OK;
  /* the fused path's lists alone: the filters' path draws per token */
  if (m->bias_count > FS_BIAS_SHORT)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "options->logit_bias_count=%d: under "
                  "FS_NOISE_GROUP16 a logit bias takes at most %d entries a row (longer lists "
                  "take the filters' path, which draws per token; fs_context_set_noise)",
                  m->bias_count, FS_BIAS_SHORT);
  if (m->top_n || m->ranks || m->targets)
    return fs_err(ctx, FS_INVALID_ARGUMENT, "options->logit_bias_count=%d with options->%s: "
                  "under FS_NOISE_GROUP16 a logit bias takes neither top logprobs, ranks nor "
                  "targets (with a bias their path draws per token; fs_context_set_noise)",
                  m->bias_count, m->top_n ? "top_logprobs" : m->ranks ? "ranks" : "target_tokens");
  return FS_OK;
}

int fs_validate_outputs(fs_context *ctx, const fs_outputs *o) {
  if (!o) return BAD("outputs=NULL: an outputs description is required");
  if (!o->tokens) return BAD("outputs->tokens=NULL: [B, num_samples] int32 "
                             "device array is required");
  if (misaligned(o->tokens, 4))
    return BAD("outputs->tokens=%p: must be 4-byte aligned",
               (void *)o->tokens);
  if (o->logits && misaligned(o->logits, 4))
    return BAD("outputs->logits=%p: must be 4-byte aligned",
               (void *)o->logits);
  if (o->keys && misaligned(o->keys, 8))
    return BAD("outputs->keys=%p: must be 8-byte aligned", (void *)o->keys);
  return FS_OK;
}
