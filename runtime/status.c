/*
** status.c: version, status strings and the error-message slots (one per
** context, one per thread for calls without a context).
*/
#include "fs_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char t_errmsg[FS_ERRMSG_MAX];

int fs_version_number(void) { return FS_VERSION_NUMBER; }
const char *fs_version_string(void) { return FS_VERSION_STRING; }

const char *fs_status_string(int status) {
  switch (status) {
    case FS_OK: return "ok";
    case FS_INVALID_ARGUMENT: return "invalid argument";
    case FS_NO_DEVICE: return "no CUDA device";
    case FS_CUDA: return "CUDA driver error";
    case FS_NVRTC: return "NVRTC compilation failed";
    case FS_LUA: return "kernel generator (Lua) failed";
    case FS_DB: return "tuning database error";
    case FS_UNSUPPORTED: return "unsupported GPU architecture";
    case FS_NOT_PREPARED: return "shape not prepared";
    case FS_OUT_OF_MEMORY: return "out of memory";
    case FS_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}

int fs_err(fs_context *ctx, int status, const char *fmt, ...) {
  char *dst = ctx ? ctx->errmsg : t_errmsg;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, FS_ERRMSG_MAX, fmt, ap);
  va_end(ap);
  return status;
}

void fs_clear_err(fs_context *ctx) {
  if (ctx) ctx->errmsg[0] = 0;
  else t_errmsg[0] = 0;
}

const char *fs_last_error(const fs_context *ctx) {
  return ctx ? ctx->errmsg : t_errmsg;
}

const char *fs_last_compile_log(const fs_context *ctx) {
  return ctx && ctx->compile_log ? ctx->compile_log : "";
}

void fs_set_compile_log(fs_context *ctx, const char *text) {
  if (!ctx) return;
  free(ctx->compile_log);
  ctx->compile_log = text ? strdup(text) : NULL;
}

int fs_cu_fail(fs_context *ctx, CUresult r, const char *call,
               const char *file, int line) {
  const fs_cu_api *cu = fs_cu_load(NULL);
  const char *name = NULL, *desc = NULL;
  if (cu) {
    cu->cuGetErrorName(r, &name);
    cu->cuGetErrorString(r, &desc);
  }
  int st = r == CUDA_ERROR_OUT_OF_MEMORY ? FS_OUT_OF_MEMORY
         : (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_INVALID_DEVICE)
             ? FS_NO_DEVICE : FS_CUDA;
  return fs_err(ctx, st, "%s failed with %s (%d: %s) at %s:%d", call,
                name ? name : "?", (int)r, desc ? desc : "?", file, line);
}
