/*
** fs_tools.h: helpers shared by the command-line programs (not part of the
** library's ABI): model presets, random device tensors, an HBM read
** bandwidth probe compiled with NVRTC, and argument checking.
*/
#ifndef FS_TOOLS_H
#define FS_TOOLS_H

#include "fs_int.h"

#include <stddef.h>
#include <stdint.h>

typedef struct fs_model {
  const char *name;
  int vocab, hidden;
  const char *note;
} fs_model;

/* The LM-head presets of shared/BACKGROUND.md, ending with a NULL name. */
extern const fs_model fs_models[];
const fs_model *fs_model_find(const char *name);
/* Prints the presets, one per line (the tools' --list-models). */
void fs_tools_list_models(void);

/* Fills n elements of bf16/fp16 (dtype) at dst on the device with values
** uniform in [-scale, scale) from `seed` (host generation, then a copy). */
int fs_tools_fill_random(fs_context *ctx, CUdeviceptr dst, size_t n, int dtype,
                         float scale, uint64_t seed);

/* Measures HBM read bandwidth (bytes/s) by streaming `bytes` of device memory
** with 16-byte loads, median of `reps` runs.  Returns 0 on failure. */
double fs_tools_read_bandwidth(fs_context *ctx, size_t bytes, int reps);

/* Milliseconds between two events. */
double fs_tools_now(void);

/* A bad command-line argument: prints "<prog>: <message>" and then `hint`
** (a usage text or a pointer to --help) to stderr; returns 2, the tools' exit
** status for bad arguments. */
int fs_tools_bad_arg(const char *prog, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Whether option k is one of the NULL-terminated names. */
int fs_tools_is_option(const char *k, const char *const *names);

/* Parses all of s as a decimal integer in [lo, hi]; 0 on success, -1 else. */
int fs_tools_parse_int(const char *s, long lo, long hi, int *out);

/* Parses all of s as a float (strtof): 0 on success; -1 when s is not a
** number (empty, or trailing characters); -2 when it is out of a float's
** range (ERANGE: it would read as 0, a subnormal or an infinity).  "nan" and
** "inf" parse: the caller's range rule must reject them. */
int fs_tools_parse_float(const char *s, float *out);

/* Parses all of s as "D=<hidden>,V=<vocabulary>" (either order, each once,
** decimal, no spaces or signs but a '-') with D a multiple of 8 in
** 8..FS_MAX_HIDDEN and V in 1..FS_MAX_VOCAB_ROWS.  0 with *D, *V set, or -1
** with the rule s breaks in why (e.g. "D=-8: the hidden size must be ...";
** the caller prefixes "--shape <s>: "); *D and *V are untouched then. */
int fs_tools_parse_shape(const char *s, int *D, int *V, char *why, size_t n);

/* Parses all of s as a comma-separated list of batch sizes, each in
** 1..FS_MAX_BATCH, into out (at most max): the count (>= 1), or -1 for an
** empty list, an empty item, a bad or out-of-range value, or more than max. */
int fs_tools_parse_batches(const char *s, int *out, int max);

/* "token" or "group16" -> FS_NOISE_TOKEN / FS_NOISE_GROUP16 in *out; 0, or
** -1 for another string.  fs_tools_noise_name is the inverse. */
int fs_tools_parse_noise(const char *s, int *out);
/* The rule a bad --noise value breaks, for the tools' messages. */
#define FS_TOOLS_NOISE_RULE "the noise is token (one Gumbel variate per token) or group16"
const char *fs_tools_noise_name(int noise);

#endif
