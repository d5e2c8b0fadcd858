/*
** nvrtc.c: NVRTC compilation of generated sources (see fs_nvrtc.h).  Options:
** C++17, the named target, -Xptxas -v (so registers and spills are reported
** even without a GPU) and no fast math (the Gumbel cap depends on precise
** log1pf/logf).
*/
#include "fs_nvrtc.h"

#include "flashsampling.h"
#include "gen.h"

#include <nvrtc.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int fs_nvrtc_version(void) {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return -1;
  return major * 1000 + minor * 10;
}

unsigned long long fs_nvrtc_cache_key(const char *source, const char *target) {
  unsigned long long h = 1469598103934665603ull; /* FNV-1a 64 */
  const unsigned char *p;
  for (p = (const unsigned char *)source; *p; p++) h = (h ^ *p) * 1099511628211ull;
  for (p = (const unsigned char *)target; *p; p++) h = (h ^ *p) * 1099511628211ull;
  /* the headers the source includes are part of what is compiled */
  const char *const *hn = NULL, *const *hd = NULL;
  int nh = fs_gen_headers(&hn, &hd);
  for (int i = 0; i < nh; i++)
    for (p = (const unsigned char *)hd[i]; *p; p++) h = (h ^ *p) * 1099511628211ull;
  h = (h ^ (unsigned)fs_nvrtc_version()) * 1099511628211ull;
  return h;
}

/* Reads "Used N registers" and "N bytes stack frame, N bytes spill stores,
** N bytes spill loads" from a ptxas -v log; with several kernels in the
** module, the largest of each (the worst kernel decides). */
static void parse_resources(fs_cubin *c) {
  const char *s;
  c->registers = -1;
  c->spill_bytes = 0;
  c->stack_bytes = 0;
  for (s = c->log; (s = strstr(s, "Used ")) != NULL; s += 5) {
    int r;
    if (sscanf(s, "Used %d registers", &r) == 1 && r > c->registers) c->registers = r;
  }
  for (s = c->log; (s = strstr(s, "bytes stack frame")) != NULL; s++) {
    const char *d = s;
    int frame = 0, st = 0, ld = 0;
    while (d > c->log && d[-1] == ' ') d--;
    while (d > c->log && d[-1] >= '0' && d[-1] <= '9') d--;
    sscanf(d, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
           &frame, &st, &ld);
    if (frame > c->stack_bytes) c->stack_bytes = frame;
    if (st + ld > c->spill_bytes) c->spill_bytes = st + ld;
  }
}

/* The number of ld. / st. instructions in `ptx` (NUL-terminated) that name
** no state space (.global, .shared..., .local, .param, .const): accesses
** through generic addresses.  Reads the first instruction of each line, as
** NVRTC writes them; ldu, atom and red are not counted, and a space is
** recognised by its name's prefix. */
static int count_generic(const char *ptx) {
  static const char *const spaces[] = {"global", "shared", "local", "param", "const"};
  int n = 0;
  for (const char *l = ptx; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
    while (*l == ' ' || *l == '\t') l++;
    if (*l == '@') /* a guard predicate */
      while (*l && *l != ' ' && *l != '\t' && *l != '\n') l++;
    while (*l == ' ' || *l == '\t') l++;
    if (strncmp(l, "ld.", 3) != 0 && strncmp(l, "st.", 3) != 0) continue;
    int named = 0;
    for (const char *q = l + 2; *q == '.'; ) {
      q++;
      for (size_t i = 0; i < sizeof spaces / sizeof *spaces; i++)
        if (strncmp(q, spaces[i], strlen(spaces[i])) == 0) named = 1;
      while (*q && *q != '.' && *q != ' ' && *q != '\t' && *q != '\n') q++;
    }
    n += !named;
  }
  return n;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define NV_CHECK(call)                                                      \
  do {                                                                      \
    nvrtcResult r_ = (call);                                                \
    if (r_ != NVRTC_SUCCESS) {                                              \
      snprintf(err, errlen, "%s: %s failed: %s", name, #call,               \
               nvrtcGetErrorString(r_));                                    \
      goto fail;                                                            \
    }                                                                       \
  } while (0)

int fs_nvrtc_compile(const char *name, const char *source, const char *target,
                     fs_cubin *out, char *err, size_t errlen) {
  nvrtcProgram prog = NULL;
  const char *const *hnames = NULL, *const *hdata = NULL;
  char arch_opt[48];
  int status = FS_NVRTC;
  memset(out, 0, sizeof *out);
  out->generic_accesses = -1;
  int nh = fs_gen_headers(&hnames, &hdata);
  if (nh < 0) {
    snprintf(err, errlen, "%s: template headers are not embedded", name);
    return FS_INTERNAL;
  }
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", target);
  const char *opts[] = {arch_opt, "-std=c++17", "-Xptxas", "-v",
                        "-default-device", "--extra-device-vectorization"};
  double t0 = now();
  NV_CHECK(nvrtcCreateProgram(&prog, source, name, nh, hdata, hnames));
  nvrtcResult cr = nvrtcCompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
  size_t logsz = 0;
  NV_CHECK(nvrtcGetProgramLogSize(prog, &logsz));
  out->log = malloc(logsz + 1);
  if (!out->log) {
    snprintf(err, errlen, "%s: out of memory for the NVRTC log", name);
    status = FS_OUT_OF_MEMORY;
    goto fail;
  }
  out->log[0] = 0;
  NV_CHECK(nvrtcGetProgramLog(prog, out->log));
  out->log[logsz] = 0;
  if (cr != NVRTC_SUCCESS) {
    snprintf(err, errlen, "%s: NVRTC compile for %s failed: %s (see the compile log)",
             name, target, nvrtcGetErrorString(cr));
    goto fail;
  }
  NV_CHECK(nvrtcGetCUBINSize(prog, &out->size));
  out->data = malloc(out->size ? out->size : 1);
  if (!out->data) {
    snprintf(err, errlen, "%s: out of memory for the cubin", name);
    status = FS_OUT_OF_MEMORY;
    goto fail;
  }
  NV_CHECK(nvrtcGetCUBIN(prog, out->data));
  size_t ptxsz = 0;
  if (nvrtcGetPTXSize(prog, &ptxsz) == NVRTC_SUCCESS && ptxsz > 0) {
    char *ptx = malloc(ptxsz);
    if (ptx && nvrtcGetPTX(prog, ptx) == NVRTC_SUCCESS) {
      ptx[ptxsz - 1] = 0;
      out->generic_accesses = count_generic(ptx);
    }
    free(ptx);
  }
  nvrtcDestroyProgram(&prog);
  out->seconds = now() - t0;
  parse_resources(out);
  return FS_OK;
fail:
  if (prog) nvrtcDestroyProgram(&prog);
  out->seconds = now() - t0;
  return status;
}

void fs_cubin_free(fs_cubin *c) {
  if (!c) return;
  free(c->data);
  free(c->log);
  memset(c, 0, sizeof *c);
}

/* Little-endian fields of an ELF64 header or section header. */
static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int fs_cubin_plausible(const void *data, size_t size) {
  const unsigned char *e = data;
  if (!e || size < 64 || memcmp(e, "\177ELF", 4) || e[4] != 2 || e[5] != 1) return 0;
  const uint64_t phoff = le(e + 0x20, 8), shoff = le(e + 0x28, 8);
  const uint64_t phsz = le(e + 0x36, 2), phn = le(e + 0x38, 2);
  const uint64_t shsz = le(e + 0x3a, 2), shn = le(e + 0x3c, 2), shstr = le(e + 0x3e, 2);
  if (phn && (phsz < 56 || phoff > size || phn * phsz > size - phoff)) return 0;
  if (!shn || shsz < 64 || shoff > size || shn * shsz > size - shoff || shstr >= shn) return 0;
  for (uint64_t i = 0; i < shn; i++) {
    const unsigned char *sh = e + shoff + i * shsz;
    const uint64_t off = le(sh + 0x18, 8), n = le(sh + 0x20, 8);
    if (le(sh + 4, 4) != 8 /* SHT_NOBITS occupies no bytes */ && (off > size || n > size - off))
      return 0;
  }
  return 1;
}
