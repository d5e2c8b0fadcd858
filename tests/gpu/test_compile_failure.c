/*
** test_compile_failure: when NVRTC rejects a generated source, fs_prepare
** returns FS_NVRTC, fs_last_error names the variant and the target, and
** fs_last_compile_log keeps the variant name, options, the NVRTC log and
** the whole source; the context stays usable.  The failure is injected with
** FS_INJECT_COMPILE_ERROR=1 (the runtime appends an #error to the source).
*/
#include "gpu_util.h"

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  fs_problem p = {4, 256, 1000, 0, FS_DTYPE_BF16, NULL, 0, NULL, 0};
  fs_sampling s = {1.0f, NULL, 1, 1, NULL, 0, NULL};
  setenv("FS_INJECT_COMPILE_ERROR", "1", 1);
  setenv("FS_TUNING_DB", "off", 1);
  setenv("FS_DEFAULTS_DB", "", 1);
  int st = fs_prepare(ctx, &p, &s);
  CHECK_MSG(st == FS_NVRTC, "status %d (%s): %s", st, fs_status_string(st), fs_last_error(ctx));
  CHECK_MSG(strstr(fs_last_error(ctx), "fsamp_") && strstr(fs_last_error(ctx), "sm_"),
            "message: %s", fs_last_error(ctx));
  const char *log = fs_last_compile_log(ctx);
  CHECK_MSG(strstr(log, "variant: fsamp_") && strstr(log, "injected by FS_INJECT_COMPILE_ERROR") &&
                strstr(log, "--- source ---") && strstr(log, "fsamp_main"),
            "compile log (%zu bytes): %.400s", strlen(log), log);
  printf("NVRTC failure reported as: %s\n", fs_last_error(ctx));
  unsetenv("FS_INJECT_COMPILE_ERROR");
  st = fs_prepare(ctx, &p, &s);
  CHECK_MSG(st == FS_OK, "after the failure: %s", fs_last_error(ctx));
  fs_context_destroy(ctx);
  return fs_test_done("test_compile_failure");
}
