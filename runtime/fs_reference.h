/*
** fs_reference.h: the CPU reference's internal entry point for tests.
**
** fs_reference_sample() (flashsampling.h) returns what the GPU returns; GPU
** tests also need to know how close the race was, because the kernel forms
** logits in fp32 in its own order and a near-tie may legitimately go the
** other way.  fs_reference_row() answers one (row, sample) with the winner
** and the runner-up, both scored exactly as fs_reference_sample() scores
** them (see the definition in reference.c).
*/
#ifndef FS_REFERENCE_H
#define FS_REFERENCE_H

#include "flashsampling.h"

#include <stdint.h>

/* One (row, sample) of the reference draw.  "score" is the perturbed score
** in double: z / T + (double)fs_noise(...) for a sampled row, z for a greedy
** row.  When V == 1 there is no runner-up: second_token is -1 and
** second_score / second_logit are -INFINITY.  When two candidates tie
** exactly, the smaller global id is the winner and second_score == score. */
typedef struct fs_ref_result {
  int32_t token;        /* global id of the winner (vocab_offset + v) */
  double logit;         /* its logit z, in double */
  double score;         /* its perturbed score, in double */
  int32_t second_token; /* global id of the runner-up, or -1 */
  double second_logit;  /* the runner-up's z */
  double second_score;  /* the runner-up's perturbed score */
  /* FS_NOISE_GROUP16 only (+INFINITY otherwise): how close the inverse-CDF
  ** pick inside the winner's group came to another token, min over the
  ** group's running sums P_i (i < 15) of |P_i - u S| / S, in double. */
  double pick_margin;
  /* The log-sum-exp of the row's raw logits (all V of them: no temperature,
  ** no token mask), in double: logit - lse is the draw's logprob
  ** (fs_options.logprobs). */
  double lse;
  /* Filters (fs_options.min_p / top_k / top_p, flashsampling.h), sampled
  ** rows only (else tau = -INFINITY, both margins +INFINITY, kept = the
  ** row's candidates):
  **  - tau: the row's threshold, the candidates with z >= tau kept
  **    (-INFINITY when the filters keep every candidate);
  **  - kept: how many candidates were kept;
  **  - filter_margin: in logit units, how near another kept set was: the
  **    least, over the filters that dropped a candidate, of the gap between
  **    the least kept z and the largest dropped z (top-k, top-p) and of the
  **    distance from min-p's threshold z_max + T ln(min_p) to the nearest
  **    candidate z (+INFINITY when no filter dropped one);
  **  - mass_margin: top-p's, the least of |C - p| over C the renormalised
  **    mass strictly above the least kept value and C the mass with it
  **    (+INFINITY when top-p dropped nothing).
  ** The runner-up (second_*) is the best other kept token. */
  double tau;
  long long kept;
  double filter_margin;
  double mass_margin;
} fs_ref_result;

/* The reference draw of row `row` (0..B-1) and sample `sample`
** (0..num_samples-1) of the problem; pointers are HOST pointers as for
** fs_reference_sample().  Costs V x D multiply-adds.  Returns FS_OK and fills
** *out, or FS_INVALID_ARGUMENT (fs_last_error(NULL) names the argument) or
** FS_OUT_OF_MEMORY. */
int fs_reference_row(const fs_problem *p, const fs_sampling *s, int row,
                     int sample, fs_ref_result *out /* OUT */);

/* fs_reference_row() with the given fs_noise_mode: for FS_NOISE_GROUP16 the
** winner is the picked token of the best group, score its group's score,
** and the runner-up the picked token of the second-best group. */
int fs_reference_row_noise(const fs_problem *p, const fs_sampling *s, int noise,
                           int row, int sample, fs_ref_result *out /* OUT */);

/* fs_reference_row_noise() with further inputs (fs_options, its token_mask
** a HOST array, as for fs_reference_sample_ex()).  One draw: the options'
** outputs (logprobs, top logprobs, ranks, targets) are not written; *out
** holds the draw's log-sum-exp. */
int fs_reference_row_ex(const fs_problem *p, const fs_sampling *s, int noise,
                        const fs_options *options, int row, int sample,
                        fs_ref_result *out /* OUT */);

#endif /* FS_REFERENCE_H */
