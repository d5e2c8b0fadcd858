/* fs_test.c: the harness of fs_test.h. */
#include "fs_test.h"
#include "fs_half.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int fs_test_failures;

fs_context *fs_test_gpu_or_skip(void) {
  fs_context *ctx = NULL;
  int st = fs_context_create(0, &ctx);
  if (st == FS_NO_DEVICE || st == FS_UNSUPPORTED) {
    printf("SKIPPED: this test needs an sm_80+ GPU: %s\n", fs_last_error(NULL));
    fflush(stdout);
    exit(77);
  }
  if (st != FS_OK) {
    fprintf(stderr, "fs_context_create failed: %s: %s\n", fs_status_string(st),
            fs_last_error(NULL));
    exit(1);
  }
  return ctx;
}

int fs_test_done(const char *name) {
  if (fs_test_failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", name, fs_test_failures);
    return 1;
  }
  printf("%s: all checks passed\n", name);
  return 0;
}

unsigned long long fs_test_rand(unsigned long long *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double fs_test_uniform(unsigned long long *state) {
  return (double)(fs_test_rand(state) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

unsigned short fs_test_f2bf(float f) { return fs_float_to_bf16(f); }
unsigned short fs_test_f2h(float f) { return fs_float_to_half(f); }
float fs_test_bf2f(unsigned short h) { return fs_bf16_to_float(h); }
float fs_test_h2f(unsigned short h) { return fs_half_to_float(h); }

int fs_test_has(const char *msg, const char *needle) {
  return !needle || strstr(msg, needle) != NULL;
}

char *fs_test_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  size_t n = 0, cap = 4096;
  char *buf = malloc(cap);
  REQUIRE(buf);
  if (f) {
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
      n += got;
      if (cap - n - 1 == 0) {
        cap *= 2;
        buf = realloc(buf, cap);
        REQUIRE(buf);
      }
    }
    fclose(f);
  }
  buf[n] = 0;
  return buf;
}

fs_test_proc fs_test_run(const char *bin, const char *dir, const char *const *env,
                         const char *const *args) {
  char out[4600], err[4600];
  const char *argv[64];
  int n = 0;
  argv[n++] = bin;
  for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
  argv[n] = NULL;
  snprintf(out, sizeof out, "%s/stdout.txt", dir);
  snprintf(err, sizeof err, "%s/stderr.txt", dir);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0 || chdir(dir) != 0) _exit(126);
    dup2(fo, 1);
    dup2(fe, 2);
    for (int i = 0; env && env[i]; i++) {
      char kv[4700];
      snprintf(kv, sizeof kv, "%s", env[i]);
      char *eq = strchr(kv, '=');
      if (eq) {
        *eq = 0;
        setenv(kv, eq + 1, 1);
      } else {
        unsetenv(kv);
      }
    }
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  fs_test_proc r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = fs_test_slurp(out);
  r.err = fs_test_slurp(err);
  return r;
}

void fs_test_proc_free(fs_test_proc *p) {
  free(p->out);
  free(p->err);
  p->out = p->err = NULL;
}
