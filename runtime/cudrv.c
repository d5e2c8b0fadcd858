/*
** cudrv.c: loads libcuda.so.1 once and resolves the driver entry points the
** library uses (see cudrv.h for why it is not linked).
*/
#include "cudrv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static fs_cu_api g_api;
static const fs_cu_api *g_loaded;
static char g_why[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Expands cuda.h's versioning macro before stringifying. */
#define FS_SYM_(x) #x
#define FS_SYM(x) FS_SYM_(x)

static void load_once(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g_why, sizeof g_why,
             "no CUDA driver: dlopen(libcuda.so.1) failed (%s)", dlerror());
    return;
  }
#define FS_CU_RESOLVE(name)                                                 \
  *(void **)(&g_api.name) = dlsym(h, FS_SYM(name));                         \
  if (!g_api.name) {                                                        \
    snprintf(g_why, sizeof g_why, "CUDA driver too old: symbol %s missing", \
             FS_SYM(name));                                                 \
    return;                                                                 \
  }
  FS_CU_FUNCS(FS_CU_RESOLVE)
#undef FS_CU_RESOLVE
  CUresult r = g_api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char *n = NULL;
    g_api.cuGetErrorName(r, &n);
    snprintf(g_why, sizeof g_why, "no usable GPU: cuInit failed with %s (%d)",
             n ? n : "?", (int)r);
    return;
  }
  g_loaded = &g_api;
}

const fs_cu_api *fs_cu_load(const char **why) {
  pthread_once(&g_once, load_once);
  if (!g_loaded && why) *why = g_why;
  return g_loaded;
}
