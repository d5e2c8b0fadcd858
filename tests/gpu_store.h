/*
** gpu_store.h: one-run tuning databases written by the GPU tests that check
** what the runtime takes from a database (test_tuned_revision.c,
** test_mode_winners.c).  Header-only, like gpu_util.h.
*/
#ifndef FS_GPU_STORE_H
#define FS_GPU_STORE_H

#include "fs_int.h"
#include "fs_test.h"
#include "store.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Removes the database at path and its WAL side files. */
static inline void gs_remove_db(const char *path) {
  char side[300];
  unlink(path);
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
}

/* Creates a new database at path (an old one removed first) with one run of
** ctx's GPU under generator revision rev; *run is its id.  Add measurements,
** then gs_end. */
static inline fs_store *gs_begin(const char *path, const fs_context *ctx, const char *rev,
                                 int64_t *run) {
  char err[512], arch[16];
  fs_store *st = NULL;
  gs_remove_db(path);
  REQUIRE(fs_store_open(path, FS_STORE_CREATE, &st, err, sizeof err) == FS_OK);
  snprintf(arch, sizeof arch, "sm_%d", ctx->arch);
  fs_store_run r;
  memset(&r, 0, sizeof r);
  r.device_name = ctx->device_name;
  r.arch = arch;
  r.sm_count = ctx->sm_count;
  r.driver_version = 13000;
  r.nvrtc_version = "13.0";
  r.generator_rev = rev;
  REQUIRE(fs_store_begin_run(st, &r, run) == FS_OK);
  return st;
}

/* Adds an `ok` bf16 measurement of variant at (D, V, bucket) in `mode`
** (an fs_store_mode) with median us and the given source hash (NULL: none);
** the fields no runtime choice reads are plausible constants. */
static inline void gs_add_ok(fs_store *st, int64_t run, int D, int V, int bucket, int mode,
                             const char *variant, const char *source_hash, double us) {
  fs_store_measurement m;
  memset(&m, 0, sizeof m);
  m.dtype = FS_DTYPE_BF16;
  m.hidden = D;
  m.vocab = V;
  m.bucket = bucket;
  m.mode = mode;
  m.variant = variant;
  m.source_hash = source_hash;
  m.outcome = FS_STORE_OUTCOME_OK;
  m.median_us = us;
  m.spread_us = us / 100;
  m.samples = 20;
  m.floor_us = -1;
  m.registers = m.spills = m.smem_bytes = -1;
  REQUIRE(fs_store_add_measurement(st, run, &m, NULL) == FS_OK);
}

/* The test's variant pool: the generator (*g, close with fs_gen_close), its
** bf16 variants for ctx's GPU (*list of *n, free with free()) and the
** built-in default for (B, D, V) (*dflt).  The tests write winners that are
** not the default (gs_alt_mma), so that the database visibly decides. */
static inline void gs_variants(const fs_context *ctx, int B, int D, int V, fs_gen **g,
                               fs_variant **list, int *n, fs_variant *dflt) {
  char err[768];
  const int arch = fs_target_arch(ctx->arch);
  REQUIRE(fs_gen_open(g, err, sizeof err) == FS_OK);
  REQUIRE(fs_gen_enumerate(*g, arch, FS_DTYPE_BF16, list, n, err, sizeof err) == FS_OK);
  REQUIRE(fs_gen_default(*g, arch, FS_DTYPE_BF16, B, D, V, dflt, err, sizeof err) == FS_OK);
}

/* Nonzero for an mma variant with an 8-row batch tile other than dflt: a
** kernel that runs any small shape, and never the built-in choice. */
static inline int gs_alt_mma(const fs_variant *v, const fs_variant *dflt) {
  return !strcmp(v->family, "mma") && v->tile_b == 8 && strcmp(v->name, dflt->name);
}

/* Finishes the run and closes the database. */
static inline void gs_end(fs_store *st, int64_t run) {
  REQUIRE(fs_store_finish_run(st, run) == FS_OK);
  fs_store_close(st);
}

#endif
