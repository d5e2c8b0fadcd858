/*
** fs_penalty.h: the repetition penalty (fs_options.repetition_penalty and
** repetition_penalties, flashsampling.h) as the logit bias's and the
** filters' modules apply it (templates/fsamp_bias.cu, fsamp_filter.cu).
** Like those modules it is outside the generator's revision
** (fs_gen_in_revision, generator/gen.c): no variant includes it.
*/
#ifndef FS_PENALTY_H
#define FS_PENALTY_H

/* Row b's penalty: reps[b] where reps is given, else rep; 0 where it
** penalises nothing (NaN, <= 0, +inf or 1). */
__device__ __forceinline__ float fs_rep(float rep, const float *reps, int b) {
  const float r = reps ? reps[b] : rep;
  return r > 0.0f && r < __int_as_float(0x7f800000) && r != 1.0f ? r : 0.0f;
}

/* z under penalty r (0: none): z / r where z > 0, z r else, each rounded
** once (no contraction with the values' sum added after). */
__device__ __forceinline__ float fs_pen(float z, float r) {
  return r == 0.0f ? z : z > 0.0f ? __fdiv_rn(z, r) : __fmul_rn(z, r);
}

#endif /* FS_PENALTY_H */
