/*
** fs_params.h: the kernel parameter block, shared word for word by the host
** (runtime/sample.c, C11) and the generated kernels (NVRTC).  Passed by value
** as the only kernel argument.  Only fixed-size types (LP64 on both sides).
**
** Candidates: the main kernel splits the V rows of W into G balanced chunks
** (in groups of 16 rows) and writes, for every (row b, sample s, chunk c),
** the best key and its raw logit at index ((b * S) + s) * G + c.  The winner
** of (b, s) is the max key over its G candidates.
*/
#ifndef FS_PARAMS_H
#define FS_PARAMS_H

typedef struct fs_params {
  const void *H;                     /* [B, h_stride] bf16/fp16 */
  const void *W;                     /* [V, w_stride] bf16/fp16 */
  long long h_stride, w_stride;      /* elements */
  int B, D, V;
  int vocab_offset;                  /* global id of W's row 0 */
  int num_samples;                   /* S */
  int num_chunks;                    /* G: CTAs along the vocabulary */
  int row_groups;                    /* ceil(V / 16) */
  int noise;                         /* an fs_noise_mode: 0 per token, 1 groups of 16 */
  float temperature;                 /* used when temperatures == 0 */
  float softcap;                     /* 0, or c > 0: each logit z becomes c tanh(z / c)
                                        before anything reads it (fs_options.logit_softcap;
                                        in the padding before the pointers, so that the
                                        block's size and later offsets stay 0.3.1's) */
  const float *temperatures;         /* [B] or 0 */
  unsigned long long seed;           /* used when seeds == 0 */
  const unsigned long long *seeds;   /* [B] or 0 */
  unsigned long long offset;         /* used when offsets == 0 */
  const unsigned long long *offsets; /* [B] or 0 */
  int *tokens;                       /* [B, S] global ids */
  float *logits;                     /* [B, S] or 0 */
  unsigned long long *keys;          /* [B, S] or 0 */
  unsigned long long *cand_keys;     /* workspace [B * S * G] */
  float *cand_logits;                /* workspace [B * S * G] */
  unsigned int *counters;            /* workspace [ceil(B / TILE_B)], zeroed */
  unsigned long long *bound;         /* workspace [B] or 0: the largest key a chunk has
                                        published for each row (sample 0; fused calls of
                                        the wg family), zeroed, reset by the last CTA */
  const unsigned int *mask;          /* [B, mask_stride] or 0: bit t % 32 of word t / 32
                                        of row b allows global id t (fs_options) */
  long long mask_stride;             /* words between the mask's rows */
  float *logprobs;                   /* [B, S] or 0: log softmax of the raw logits at each
                                        draw's token (fs_options.logprobs) */
  float *lse;                        /* workspace [B * G] pairs (m, l) or 0: per (row, chunk)
                                        the max raw logit m and the sum of exp(z - m) over
                                        the chunk's tokens; set with logprobs, and by the
                                        tensor-parallel calls with logprobs (where logprobs
                                        is 0: the pairs are merged over ranks) */
  float *zout;                       /* [B, zout_stride] or 0: every logit of the call
                                        written out (after the soft-cap, before the
                                        mask) for the filters (fs_options.min_p, top_k,
                                        top_p; runtime/filter.c), 16-byte aligned */
  long long zout_stride;             /* floats between zout's rows, a multiple of 4 */
  int zout_keep;                     /* 1: zout's stores carry an L2 evict_last policy
                                        (the logits fit in L2 and the kernels after
                                        the pass read them there; runtime/filter.c
                                        discards them from L2 at the call's end) */
} fs_params;

/* The filters of a call (fs_options.min_p, top_k, top_p), fsamp_filter's
** second argument (templates/fsamp_filter.cu, runtime/filter.c): per-row
** device arrays of B entries, or 0 for the scalar beside them. */
typedef struct fs_filter {
  const float *min_ps;
  const int *top_ks;
  const float *top_ps;
  float min_p;
  int top_k;
  float top_p;
  int unused;                        /* padding, 0 */
} fs_filter;

#endif /* FS_PARAMS_H */
