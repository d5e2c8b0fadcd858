/*
** fs_nvrtc.h: compiles one generated kernel variant with NVRTC (fs_nvrtc_*).
** Needs no GPU: the target architecture is named, never queried.
*/
#ifndef FS_NVRTC_H
#define FS_NVRTC_H

#include <stddef.h>

typedef struct fs_cubin {
  char *data;      /* the cubin (malloc'ed) */
  size_t size;
  char *log;       /* NVRTC/ptxas log (malloc'ed, may be "") */
  int registers;   /* per thread, from ptxas -v (-1 if not reported) */
  int spill_bytes; /* spill stores + loads (bytes), from ptxas -v */
  int stack_bytes; /* stack frame */
  int generic_accesses; /* PTX loads and stores through generic addresses
                        ** (ld. / st. naming no state space; -1: no PTX).
                        ** The kernels name every space (a shared-memory
                        ** access through a generic address takes the slower
                        ** generic path, perf-notes 15a), except 8 stores of
                        ** the optional outputs that NVRTC 13.0 leaves
                        ** generic at sm_100. */
  double seconds;  /* compile wall time */
} fs_cubin;

/* Compiles `source` named `name` for `target` ("sm_90a", ...).  Returns
** FS_OK, or FS_NVRTC with the log in out->log and a one-line summary in err.
** Free out with fs_cubin_free() in both cases. */
int fs_nvrtc_compile(const char *name, const char *source, const char *target,
                     fs_cubin *out, char *err, size_t errlen);
void fs_cubin_free(fs_cubin *c);

/* Nonzero when `size` bytes at data hold a whole ELF64 file: the header, the
** program and section header tables and every section's bytes lie inside
** them, and the section names' table is one of the sections.  A stored cubin is checked so before the driver (which takes no
** size) reads it: a truncated or damaged blob is compiled again instead. */
int fs_cubin_plausible(const void *data, size_t size);

/* NVRTC's version as major*1000 + minor*10 (13000), or -1. */
int fs_nvrtc_version(void);

/* A hash of (source, target, NVRTC version) naming a compiled cubin. */
unsigned long long fs_nvrtc_cache_key(const char *source, const char *target);

#endif
