/*
** fake_cuda.c: a stand-in libcuda.so.1 for testing the runtime's host logic
** on machines without a GPU (tests/CMakeLists.txt builds it as
** tests/fakecuda/libcuda.so.1 and runs chosen GPU tests with it first on
** LD_LIBRARY_PATH, as `cpu` tests).
**
** It plays an H200 (sm_90, 132 SMs, 227 KB of shared memory per block) that
** runs nothing: modules load, kernels "launch" and graphs "replay" without
** effect, and every other call succeeds.  What it does keep:
**  - device memory: allocations of up to 256 MB are host memory (their
**    address is the device pointer), so copies and memsets work on them;
**    larger ones are addresses only (copies from them give zeros);
**  - memory accounting: allocations fail with CUDA_ERROR_OUT_OF_MEMORY past
**    FS_FAKE_CUDA_MEM_GB (default 141) in all, and cuMemGetInfo reports it;
**  - stream capture: cuStreamIsCapturing is true between a stream's
**    cuStreamBeginCapture and cuStreamEndCapture (which gives a graph);
**  - one injected failure: FS_FAKE_CUDA_FAIL_ONCE="<call>:<kernel>" fails
**    the first cuFuncSetAttribute or cuOccupancyMaxActiveClusters on that
**    kernel.
** So a test under it checks what the runtime decides and allocates, never
** what a kernel computes.  Each function has cuda.h's prototype, so its
** symbol is the versioned one the runtime resolves (cuMemAlloc_v2, ...).
*/
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ALLOCS = 4096 };
#define BACKED_MAX ((size_t)256 << 20) /* allocations up to this have host bytes */
static struct { CUdeviceptr p; size_t n; int backed; } g_alloc[MAX_ALLOCS];
static size_t g_used;
static CUdeviceptr g_next = (CUdeviceptr)1 << 50; /* unbacked: past user space, never touched */

/* The host bytes of [d, d + n) if a backed allocation holds them, else NULL. */
static unsigned char *bytes_of(CUdeviceptr d, size_t n) {
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (g_alloc[i].p && g_alloc[i].backed && d >= g_alloc[i].p &&
        n <= g_alloc[i].n && d - g_alloc[i].p <= g_alloc[i].n - n)
      return (unsigned char *)(uintptr_t)d;
  return NULL;
}

static size_t total_bytes(void) {
  const char *e = getenv("FS_FAKE_CUDA_MEM_GB");
  return (size_t)(e ? atof(e) : 141.0) * ((size_t)1 << 30);
}

typedef struct fake_stream { int capturing; } fake_stream;

CUresult CUDAAPI cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 62914560; break;
  default: *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d) {
  (void)d;
  snprintf(name, (size_t)len, "NVIDIA H200");
  return CUDA_SUCCESS;
}
static int g_ctx_token;
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  (void)d;
  *c = (CUcontext)&g_ctx_token;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c) { *c = (CUcontext)&g_ctx_token; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPopCurrent(CUcontext *c) {
  if (c) *c = (CUcontext)&g_ctx_token;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSynchronize(void) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *image) {
  (void)image;
  *m = (CUmodule)malloc(1);
  return *m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) { free(m); return CUDA_SUCCESS; }
/* A function is its name's slot here (the same name, the same handle), so
** that FS_FAKE_CUDA_FAIL_ONCE="<driver call>:<kernel name>" can make that
** call on that kernel fail once, with CUDA_ERROR_UNKNOWN (the runtime's
** recovery from a failed module set-up). */
enum { MAX_FUNCS = 256 };
static char g_func_name[MAX_FUNCS][64];
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  (void)m;
  int i = 0;
  while (i < MAX_FUNCS - 1 && g_func_name[i][0] && strcmp(g_func_name[i], name)) i++;
  if (!g_func_name[i][0]) snprintf(g_func_name[i], sizeof g_func_name[i], "%s", name);
  *f = (CUfunction)(void *)g_func_name[i];
  return CUDA_SUCCESS;
}
static int fail_once(const char *call, CUfunction f) {
  static int failed;
  const char *e = getenv("FS_FAKE_CUDA_FAIL_ONCE"), *colon = e ? strchr(e, ':') : NULL;
  if (failed || !colon || strncmp(e, call, (size_t)(colon - e)) || call[colon - e] ||
      strcmp(colon + 1, (const char *)(void *)f))
    return 0;
  failed = 1;
  return 1;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  (void)a;
  (void)v;
  return fail_once("cuFuncSetAttribute", f) ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
  (void)f;
  *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 128;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int threads,
                                                              size_t smem) {
  (void)f;
  (void)threads;
  (void)smem;
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *n, CUfunction f, const CUlaunchConfig *c) {
  (void)c;
  *n = 66;
  return fail_once("cuOccupancyMaxActiveClusters", f) ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned smem, CUstream s, void **args,
                                void **extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem;
  (void)s, (void)args, (void)extra;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **args,
                                  void **extra) {
  (void)c, (void)f, (void)args, (void)extra;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n) {
  int i = 0;
  while (i < MAX_ALLOCS && g_alloc[i].p) i++;
  if (i == MAX_ALLOCS || n > total_bytes() - g_used) return CUDA_ERROR_OUT_OF_MEMORY;
  void *host = n <= BACKED_MAX ? calloc(1, n ? n : 1) : NULL;
  if (host) {
    g_alloc[i].p = (CUdeviceptr)(uintptr_t)host;
  } else {
    g_alloc[i].p = g_next;
    g_next += (n + 0xfffff) & ~(CUdeviceptr)0xfffff;
  }
  g_alloc[i].n = n;
  g_alloc[i].backed = host != NULL;
  g_used += n;
  *p = g_alloc[i].p;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (g_alloc[i].p == p) {
      if (g_alloc[i].backed) free((void *)(uintptr_t)p);
      g_used -= g_alloc[i].n;
      g_alloc[i].p = 0;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult CUDAAPI cuMemGetInfo(size_t *free_bytes, size_t *total) {
  *total = total_bytes();
  *free_bytes = *total - g_used;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *h, size_t n) {
  unsigned char *b = bytes_of(d, n);
  if (b) memcpy(b, h, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoH(void *h, CUdeviceptr d, size_t n) {
  const unsigned char *b = bytes_of(d, n);
  if (b)
    memcpy(h, b, n);
  else
    memset(h, 0, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  unsigned char *b = bytes_of(d, n);
  if (b) memset(b, v, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
  (void)s;
  unsigned char *b = bytes_of(d, n * 4);
  for (size_t i = 0; b && i < n; i++) memcpy(b + 4 * i, &v, 4);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  (void)s;
  return cuMemsetD8(d, v, n);
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream st) {
  (void)st;
  unsigned char *b = bytes_of(d, n);
  const unsigned char *a = bytes_of(src, n);
  if (b && a) memmove(b, a, n);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int flags) {
  (void)flags;
  *s = (CUstream)calloc(1, sizeof(fake_stream));
  return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) { free(s); return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamSynchronize(CUstream s) { (void)s; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  *st = s && ((fake_stream *)s)->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                           : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  (void)mode;
  if (!s) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  ((fake_stream *)s)->capturing = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g) {
  if (!s || !((fake_stream *)s)->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  ((fake_stream *)s)->capturing = 0;
  *g = (CUgraph)malloc(1);
  return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *e, CUgraph g, unsigned long long flags) {
  (void)g, (void)flags;
  *e = (CUgraphExec)malloc(1);
  return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) { (void)e, (void)s; return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphDestroy(CUgraph g) { free(g); return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) { free(e); return CUDA_SUCCESS; }

CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags) {
  (void)flags;
  *e = (CUevent)malloc(1);
  return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuEventDestroy(CUevent e) { free(e); return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) { (void)e, (void)s; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  (void)a, (void)b;
  *ms = 0.0f;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory (fake driver)" : "fake driver";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank,
                                        void *addr, const cuuint64_t *dims,
                                        const cuuint64_t *strides, const cuuint32_t *box,
                                        const cuuint32_t *estrides, CUtensorMapInterleave il,
                                        CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill oob) {
  (void)t, (void)rank, (void)addr, (void)dims, (void)strides, (void)box, (void)estrides;
  (void)il, (void)sw, (void)l2, (void)oob;
  memset(m, 0, sizeof *m);
  return CUDA_SUCCESS;
}

/* NVRTC asks the driver for its private tables when one is loaded: none here. */
CUresult CUDAAPI cuGetExportTable(const void **table, const CUuuid *id) {
  (void)id;
  *table = NULL;
  return CUDA_ERROR_NOT_SUPPORTED;
}
