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

#include <stdarg.h>
#include <stddef.h>

#define FS_ERRMSG_MAX 1024

/* One compiled and loaded kernel variant. */
typedef struct fs_kernel {
  char name[160];        /* the variant name (also the DB key) */
  CUmodule module;
  CUfunction main_fn;    /* fsamp_main */
  CUfunction reduce_fn;  /* fsamp_reduce (two-pass reduction) or NULL */
  int threads;           /* threads per CTA */
  int smem_bytes;        /* dynamic shared memory per CTA */
  int tile_v, tile_b;    /* vocab rows and batch rows per CTA tile */
  int lastcta;           /* 1: reduction by the last CTA, 0: second launch */
  int blocks_per_sm;     /* occupancy, from the driver */
  int dtype, hidden, vocab; /* the shape it was prepared for */
  struct fs_kernel *next;
} fs_kernel;

struct fs_context {
  CUcontext cu_ctx;
  CUdevice device;
  int owns_primary;        /* 1 if we retained the primary context */
  int sm_major, sm_minor, sm_count;
  int max_smem_optin;      /* bytes per block with opt-in */
  char device_name[128];
  fs_kernel *kernels;      /* loaded variants (a small list) */
  CUdeviceptr workspace;   /* candidates and counters */
  size_t workspace_bytes;
  char errmsg[FS_ERRMSG_MAX];
  char *compile_log;       /* last NVRTC failure: name, options, log, source */
};

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

/* Effective row strides (0 means D). */
static inline long long fs_h_stride(const fs_problem *p) {
  return p->hidden_stride ? p->hidden_stride : p->hidden;
}
static inline long long fs_w_stride(const fs_problem *p) {
  return p->weight_stride ? p->weight_stride : p->hidden;
}

#endif /* FS_INT_H */
