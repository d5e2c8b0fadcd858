/*
** fs_test.h: a tiny test harness.  CHECK records a failure and goes on;
** REQUIRE stops the test.  fs_test_done() returns the exit code.
** GPU tests call fs_test_gpu_or_skip() first: with no usable GPU it prints why
** and exits 77, which ctest reports as skipped.
*/
#ifndef FS_TEST_H
#define FS_TEST_H

#include "flashsampling.h"

#include <stdio.h>
#include <stdlib.h>

extern int fs_test_failures;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,      \
              #cond);                                                       \
      fs_test_failures++;                                                   \
    }                                                                       \
  } while (0)

#define CHECK_MSG(cond, ...)                                                \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__,      \
              #cond);                                                       \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
      fs_test_failures++;                                                   \
    }                                                                       \
  } while (0)

#define REQUIRE(cond)                                                       \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__,    \
              #cond);                                                       \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

/* Exits 77 with a message when no GPU can be used; otherwise returns a
** context on GPU 0 (the caller destroys it). */
fs_context *fs_test_gpu_or_skip(void);

/* A finished child process: exit status (or 128 + signal), stdout, stderr. */
typedef struct fs_test_proc {
  int code;
  char *out, *err; /* malloc'ed, NUL-terminated */
} fs_test_proc;

/* Runs the program `bin` with the NULL-terminated `args` in directory `dir`;
** its stdout and stderr go to dir/stdout.txt and dir/stderr.txt and are read
** back.  `env` (or NULL) is a NULL-terminated list applied in the child:
** "NAME=value" sets, a bare "NAME" unsets. */
fs_test_proc fs_test_run(const char *bin, const char *dir, const char *const *env,
                         const char *const *args);
void fs_test_proc_free(fs_test_proc *p);

/* A whole file, malloc'ed and NUL-terminated ("" if it cannot be read). */
char *fs_test_slurp(const char *path);

/* 1 when needle is NULL or occurs in msg (an error message's checks). */
int fs_test_has(const char *msg, const char *needle);

/* Returns 0 if no CHECK failed, else 1, after printing a summary. */
int fs_test_done(const char *name);

/* Deterministic test data: splitmix64 stream. */
unsigned long long fs_test_rand(unsigned long long *state);
/* Uniform in [-1, 1). */
double fs_test_uniform(unsigned long long *state);
/* float -> bf16/fp16 bits (round to nearest even) and back. */
unsigned short fs_test_f2bf(float f);
unsigned short fs_test_f2h(float f);
float fs_test_bf2f(unsigned short h);
float fs_test_h2f(unsigned short h);

#endif
