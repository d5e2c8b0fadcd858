/*
** test_nvrtc: an NVRTC failure is data.  A broken source gives FS_NVRTC, a
** one-line message naming the program and target, and the compiler's log;
** a good one gives a cubin and a resource report, with the count of its PTX's
** generic-address loads and stores, and it passes fs_cubin_plausible while
** its cuts and damaged copies do not.  Needs no GPU.
*/
#include "fs_test.h"

#include "fs_nvrtc.h"

#include <string.h>

int main(void) {
  char err[512];
  fs_cubin c;
  static const char bad[] = "extern \"C\" __global__ void k(int *p) { *p = undeclared; }\n";
  int st = fs_nvrtc_compile("broken_variant", bad, "sm_90a", &c, err, sizeof err);
  CHECK(st == FS_NVRTC);
  CHECK_MSG(strstr(err, "broken_variant") && strstr(err, "sm_90a"), "message: %s", err);
  CHECK_MSG(c.log && strstr(c.log, "undeclared"), "log: %s", c.log ? c.log : "(null)");
  CHECK(c.data == NULL && c.size == 0);
  fs_cubin_free(&c);

  static const char good[] = "extern \"C\" __global__ void k(int *p) { p[threadIdx.x] = 1; }\n";
  st = fs_nvrtc_compile("good_variant", good, "sm_90a", &c, err, sizeof err);
  CHECK_MSG(st == FS_OK, "%s", err);
  CHECK(c.data && c.size > 0);
  CHECK_MSG(c.registers > 0 && c.spill_bytes == 0, "registers %d spills %d", c.registers,
            c.spill_bytes);
  /* A stored cubin is loaded only when it is a whole ELF file: this one is,
  ** and no cut of it, nor one with a bad magic or section table, is. */
  CHECK(fs_cubin_plausible(c.data, c.size));
  CHECK(!fs_cubin_plausible(c.data, c.size - 1));
  CHECK(!fs_cubin_plausible(c.data, c.size / 2));
  CHECK(!fs_cubin_plausible(c.data, 63));
  CHECK(!fs_cubin_plausible(NULL, c.size));
  c.data[1] ^= 1;
  CHECK(!fs_cubin_plausible(c.data, c.size));
  c.data[1] ^= 1;
  const char shstr = c.data[0x3f];
  c.data[0x3f] = (char)0x7f; /* the section names' table past the sections */
  CHECK(!fs_cubin_plausible(c.data, c.size));
  c.data[0x3f] = shstr;
  CHECK(fs_cubin_plausible(c.data, c.size));
  c.data[0x2f] = (char)0x7f; /* the section table's offset past the file */
  CHECK(!fs_cubin_plausible(c.data, c.size));
  fs_cubin_free(&c);

  /* Loads and stores through generic addresses are counted from the PTX:
  ** rounding a shared-memory pointer through an integer loses its space (a
  ** generic store and load), pointer arithmetic keeps it (perf-notes 15a). */
  static const char lost[] =
      "extern \"C\" __global__ void k(float *p) { extern __shared__ float s[];\n"
      "  float *q = (float *)(((unsigned long long)s + 1023) & ~1023ull);\n"
      "  q[threadIdx.x] = p[0]; __syncthreads(); p[1] = q[threadIdx.x ^ 1]; }\n";
  static const char kept[] =
      "extern \"C\" __global__ void k(float *p) { extern __shared__ float s[];\n"
      "  float *q = s + ((0u - (unsigned)__cvta_generic_to_shared(s)) & 1023u) / 4;\n"
      "  q[threadIdx.x] = p[0]; __syncthreads(); p[1] = q[threadIdx.x ^ 1]; }\n";
  st = fs_nvrtc_compile("lost_space", lost, "sm_90a", &c, err, sizeof err);
  CHECK_MSG(st == FS_OK && c.generic_accesses > 0, "%s: generic accesses %d", err,
            c.generic_accesses);
  fs_cubin_free(&c);
  st = fs_nvrtc_compile("kept_space", kept, "sm_90a", &c, err, sizeof err);
  CHECK_MSG(st == FS_OK && c.generic_accesses == 0, "%s: generic accesses %d", err,
            c.generic_accesses);
  fs_cubin_free(&c);

  /* An unknown target is an NVRTC failure too, never a crash. */
  st = fs_nvrtc_compile("good_variant", good, "sm_12345", &c, err, sizeof err);
  CHECK_MSG(st == FS_NVRTC && *err, "status %d: %s", st, err);
  fs_cubin_free(&c);
  CHECK(fs_nvrtc_version() >= 12000);
  return fs_test_done("test_nvrtc");
}
