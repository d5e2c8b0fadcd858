/*
** cudrv.h: the CUDA Driver API, loaded at run time with dlopen().
**
** The library never links libcuda, so it loads and reports FS_NO_DEVICE on
** machines without a driver (CI) instead of failing to start.  Each entry of
** the table below has the exact type of the cuda.h prototype and is resolved
** by the versioned symbol that cuda.h's macros select (cuMemAlloc ->
** "cuMemAlloc_v2"), so the ABI matches the header we compiled against.
*/
#ifndef FS_CUDRV_H
#define FS_CUDRV_H

#include <cuda.h>

#define FS_CU_FUNCS(X)                                                      \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet)        \
  X(cuDeviceGetAttribute) X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain)    \
  X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent)        \
  X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxGetDevice)                  \
  X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload)                 \
  X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuFuncGetAttribute)        \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuLaunchKernel)          \
  X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH)                \
  X(cuMemsetD8) X(cuMemsetD32Async) X(cuMemsetD8Async) X(cuMemcpyDtoDAsync) X(cuStreamCreate)    \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamIsCapturing)          \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate)       \
  X(cuGraphLaunch) X(cuGraphDestroy) X(cuGraphExecDestroy)                  \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                       \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuGetErrorName)             \
  X(cuGetErrorString) X(cuMemGetInfo) X(cuTensorMapEncodeTiled)  \
  X(cuLaunchKernelEx) X(cuOccupancyMaxActiveClusters)

typedef struct fs_cu_api {
#define FS_CU_MEMBER(name) __typeof__(&name) name;
  FS_CU_FUNCS(FS_CU_MEMBER)
#undef FS_CU_MEMBER
} fs_cu_api;

/* The loaded table, or NULL if libcuda.so.1 or cuInit() failed; then *why
** (if not NULL) points to a static explanation.  Thread-safe, loads once. */
const fs_cu_api *fs_cu_load(const char **why);

#endif /* FS_CUDRV_H */
