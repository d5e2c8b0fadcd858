/*
** tuned.c: where a shape's kernel comes from.  The chain, first hit wins:
**   1. FS_VARIANT=<name> in the environment (forced; benchmarks, debugging);
**   2. the user's tuning database (FS_TUNING_DB, else
**      $XDG_CACHE_HOME/flashsampling/tuning.db, else
**      ~/.cache/flashsampling/tuning.db), exact (device, shape, bucket);
**   3. the shipped defaults (FS_DEFAULTS_DB, else the installed copy under
**      the prefix of the file that holds this code (defaults_path()), else
**      the source tree's tuning-db/defaults/defaults.db), exact;
**   4. the nearest tuned shape of the same arch and dtype in either, which is
**      re-validated on this GPU against the built-in default before use;
**   5. the built-in default of the generator.
** That is the chain of sampled calls with per-token noise (FS_CALL_TOKEN).
** Greedy calls and FS_NOISE_GROUP16 calls have winners of their own where
** fs-tune timed them (FS_TUNE_GREEDY=1, FS_TUNE_NOISE=group16): steps 2 and
** 3 for that mode, else the token kernel serves them (sample.c).
** Databases are opened read-only on first use; one that is missing, corrupt
** or of another schema is skipped (FS_LOG=1 says why), never fatal.  A
** winner is used only if it was tuned with the current generator revision
** (the hash of the generator's and templates' code, comments left out:
** fs_gen_code_hash) or its source today hashes
** as the one measured: cubins of other sources are never loaded.  Its
** cubin, when stored, is loaded without NVRTC.
*/
#define _GNU_SOURCE /* dladdr */
#include "fs_int.h"
#include "fs_nvrtc.h"
#include "fs_rng.h"
#include "store.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FS_DEFAULTS_PATH
#define FS_DEFAULTS_PATH ""
#endif
#ifndef FS_DEFAULTS_FROM_LIB
#define FS_DEFAULTS_FROM_LIB "../share/flashsampling/defaults.db"
#define FS_DEFAULTS_FROM_BIN "../share/flashsampling/defaults.db"
#endif

static int logging(void) {
  const char *e = getenv("FS_LOG");
  return e && *e && strcmp(e, "0") != 0;
}

/* Opens `path` read-only into *slot (once); NULL on any problem.  `what`
** names the database in FS_LOG's lines. */
static fs_store *open_db(fs_store **slot, int *tried, const char *path, const char *what) {
  char err[512];
  if (*tried) return *slot;
  *tried = 1;
  if (!path || !*path) return NULL;
  if (fs_store_open(path, FS_STORE_READONLY, slot, err, sizeof err) != FS_OK) {
    *slot = NULL;
    if (logging()) fprintf(stderr, "flashsampling: %s skipped: %s\n", what, err);
  } else if (logging()) {
    fprintf(stderr, "flashsampling: %s: %s\n", what, path);
  }
  return *slot;
}

/* Whether addr lies in the main program (dl_iterate_phdr lists it first). */
static int in_main_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  const uintptr_t a = (uintptr_t)((const void **)data)[0];
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && a >= lo && a - lo < ph->p_memsz) ((const void **)data)[1] = data;
  }
  return 1; /* the first object only */
}

/* The shipped defaults' path into buf (n >= PATH_MAX): FS_DEFAULTS_DB if
** set; else, where this code was installed, the installed copy that the
** install rules put at FS_DEFAULTS_FROM_BIN relative to the main program's
** directory (a tool linked with the static library; /proc/self/exe, since
** dladdr names the main program by argv[0]) or at FS_DEFAULTS_FROM_LIB
** relative to the shared library's, if it is readable; else the source
** tree's (FS_DEFAULTS_PATH, the build tree's case). */
static void defaults_path(char *buf, size_t n) {
  const char *e = getenv("FS_DEFAULTS_DB");
  if (e) {
    snprintf(buf, n, "%s", e);
    return;
  }
  static const char anchor = 0; /* an address inside this library or tool */
  const void *probe[2] = {&anchor, NULL};
  dl_iterate_phdr(in_main_cb, probe);
  const int in_main = probe[1] != NULL;
  Dl_info info;
  char self[PATH_MAX] = "", cand[PATH_MAX];
  const char *file = in_main ? "/proc/self/exe"
                     : dladdr(&anchor, &info) && info.dli_fname ? info.dli_fname : NULL;
  char *slash;
  if (!file || !realpath(file, self)) self[0] = 0;
  if ((slash = strrchr(self, '/'))) {
    slash[1] = 0;
    if ((size_t)snprintf(cand, sizeof cand, "%s%s", self,
                         in_main ? FS_DEFAULTS_FROM_BIN : FS_DEFAULTS_FROM_LIB) < sizeof cand &&
        access(cand, R_OK) == 0 && realpath(cand, buf))
      return;
  }
  if (logging() && *FS_DEFAULTS_PATH)
    fprintf(stderr, "flashsampling: no installed shipped defaults in %s: the source tree's\n",
            *self ? self : "this program's directory");
  snprintf(buf, n, "%s", FS_DEFAULTS_PATH);
}

static void user_db_path(char *buf, size_t n) {
  const char *e = getenv("FS_TUNING_DB");
  if (e) {
    snprintf(buf, n, "%s", strcmp(e, "off") ? e : "");
    return;
  }
  const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  if (x && *x) snprintf(buf, n, "%s/flashsampling/tuning.db", x);
  else if (h && *h) snprintf(buf, n, "%s/.cache/flashsampling/tuning.db", h);
  else buf[0] = 0;
}

/* accept()'s state.  A choice is loaded only after accept() took it, and
** accept() sees no other choice in between (fs_store_nearest stops at the
** first it takes), so `v` and `same` describe the choice being loaded. */
typedef struct accept_arg {
  fs_context *ctx;
  const char *rev;
  fs_variant *v;   /* OUT: the last choice's variant, parsed */
  int hidden;
  int same;        /* OUT: 1 if accept() hashed the last choice's source and
                   ** found it today's; 0 if it did not hash (same revision)
                   ** or rejected the choice */
} accept_arg;

int fs_tuned_measured_hash(fs_gen *g, const fs_variant *v, const char *rev, char *out,
                           size_t n) {
  char err[256], *src = NULL;
  if (fs_gen_source(g, v, &src, err, sizeof err) != FS_OK) return 0;
  const char *cur = fs_gen_revision(g);
  const size_t rl = strcspn(rev, "+"), cl = strlen(cur);
  char *at = strstr(src, cur), *fixed = NULL;
  if (at && (fixed = malloc(strlen(src) - cl + rl + 1)) == NULL) {
    free(src); /* no hash rather than the hash of the wrong text */
    return 0;
  }
  if (at) {
    const size_t head = (size_t)(at - src);
    memcpy(fixed, src, head);
    memcpy(fixed + head, rev, rl);
    strcpy(fixed + head + rl, at + cl);
  }
  snprintf(out, n, "%016llx", fs_nvrtc_cache_key(fixed ? fixed : src, v->target));
  free(fixed);
  free(src);
  return 1;
}

int fs_tuned_same_revision(const char *stored, const char *cur) {
  /* the tuner may append "+<hash>" to the generator revision */
  const size_t n = strlen(cur);
  return strncmp(stored, cur, n) == 0 && (stored[n] == 0 || stored[n] == '+');
}

/* Was v measured on the code that would run today? */
static int same_source(fs_gen *g, const fs_variant *v, const fs_store_choice *c) {
  char hash[32];
  return c->source_hash[0] && fs_tuned_measured_hash(g, v, c->generator_rev, hash, sizeof hash) &&
         strcmp(hash, c->source_hash) == 0;
}

/* A stored winner is usable if it parses for this GPU, fits it, and was
** measured on the code that would run: tuned with this generator revision,
** or with another whose source for this variant (headers included) is byte
** for byte today's, so that work on one family does not retire the winners
** of the others. */
static int accept(void *arg, const fs_store_choice *c) {
  accept_arg *a = arg;
  char err[256];
  a->same = 0;
  if (fs_gen_parse(a->ctx->gen, c->variant, a->v, err, sizeof err) != FS_OK) return 0;
  if (a->v->k_multiple > 0 && a->hidden % a->v->k_multiple) return 0;
  if (a->v->smem > a->ctx->max_smem_optin) return 0;
  if (fs_tuned_same_revision(c->generator_rev, a->rev)) return 1;
  a->same = same_source(a->ctx->gen, a->v, c);
  return a->same;
}

/* Runs k and the built-in default on a small synthetic problem of the same
** D (V capped at 4096, B = bucket capped at 64) and checks that they pick
** the same tokens except at fp32 near-ties.  Used for nearest-shape winners,
** which were verified on another shape. */
static int revalidate(fs_context *ctx, fs_kernel *k, const fs_variant *dflt,
                      const fs_problem *p, int bucket) {
  const fs_cu_api *cu = ctx->cu;
  fs_kernel *kd = NULL;
  FS_TRY(fs_kernel_load(ctx, dflt, &kd));
  const int B = bucket < 64 ? bucket : 64, V = p->vocab < 4096 ? p->vocab : 4096, D = p->hidden;
  size_t nh = (size_t)B * D, nw = (size_t)V * D;
  unsigned short *host = malloc((nh + nw) * 2);
  unsigned long long *keys = malloc((size_t)B * 16);
  if (!host || !keys) {
    free(host);
    free(keys);
    return fs_err(ctx, FS_OUT_OF_MEMORY, "out of memory re-validating %s", k->v.name);
  }
  unsigned long long s = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < nh + nw; i++) { /* small values: bf16 0x3c00 ~ 2^-7 scale */
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    host[i] = (unsigned short)((p->dtype == FS_DTYPE_BF16 ? 0x3c00 : 0x2000) | (s & 0x7f) |
                               ((s >> 8) & 1) << 15);
  }
  CUdeviceptr dh = 0, dw = 0, dt = 0, dk = 0;
  int st = FS_OK, bad = 0;
  CUresult r;
  if ((r = cu->cuMemAlloc(&dh, (nh + nw) * 2)) || (r = cu->cuMemAlloc(&dt, (size_t)B * 4)) ||
      (r = cu->cuMemAlloc(&dk, (size_t)B * 16)) ||
      (r = cu->cuMemcpyHtoD(dh, host, (nh + nw) * 2)))
    st = fs_cu_fail(ctx, r, "allocating the re-validation problem", __FILE__, __LINE__);
  /* its launches use the context's workspace on the legacy stream, which a
  ** call still running on a non-blocking stream of the user's may hold */
  if (!st && (r = cu->cuCtxSynchronize()))
    st = fs_cu_fail(ctx, r, "cuCtxSynchronize before re-validation", __FILE__, __LINE__);
  dw = dh + nh * 2;
  fs_problem q = {B, D, V, 0, p->dtype, (void *)(uintptr_t)dh, 0, (void *)(uintptr_t)dw, 0};
  fs_sampling sm = {1.0f, NULL, 1, 7, NULL, 0, NULL};
  for (int pass = 0; pass < 2 && !st; pass++) {
    fs_kernel *kk = pass ? kd : k;
    fs_outputs o = {(int32_t *)(uintptr_t)dt, NULL, (uint64_t *)(uintptr_t)(dk + (size_t)pass * B * 8)};
    st = fs_workspace_reserve(ctx, fs_workspace_need(ctx, kk, B, V, 1));
    if (!st) st = fs_launch(ctx, kk, &q, &sm, &o, NULL);
  }
  if (!st && (r = cu->cuMemcpyDtoH(keys, dk, (size_t)B * 16)))
    st = fs_cu_fail(ctx, r, "reading re-validation results", __FILE__, __LINE__);
  for (int b = 0; b < B && !st; b++) {
    unsigned long long a = keys[b], d = keys[B + b];
    float sa = fs_key_score(a), sd = fs_key_score(d);
    if (a != d && !(sa - sd < 1e-3f * (1.0f + (sd < 0 ? -sd : sd)) &&
                    sd - sa < 1e-3f * (1.0f + (sd < 0 ? -sd : sd))))
      bad++;
  }
  if (dh) cu->cuMemFree(dh);
  if (dt) cu->cuMemFree(dt);
  if (dk) cu->cuMemFree(dk);
  free(host);
  free(keys);
  if (!st && bad)
    st = fs_err(ctx, FS_INTERNAL, "tuned variant %s disagrees with the built-in default on "
                "%d of %d rows: not used", k->v.name, bad, B);
  return st;
}

/* Loads a database winner: its stored cubin if that was compiled from the
** code that would run today and is a whole ELF file (fs_cubin_plausible),
** else today's source compiled with NVRTC.
** `same` nonzero: the caller has already found v's source to hash as c's
** (accept() did), so it is not generated and hashed again. */
static int load_choice(fs_context *ctx, const fs_variant *v, const fs_store_choice *c, int same,
                       fs_kernel **out, int *used_cubin) {
  *used_cubin = 0;
  if (c->cubin && !fs_cubin_plausible(c->cubin, c->cubin_size)) {
    if (logging())
      fprintf(stderr, "flashsampling: the stored cubin of %s (%zu bytes) is not a whole ELF "
              "file: compiled again\n", v->name, c->cubin_size);
  } else if (c->cubin && (same || same_source(ctx->gen, v, c))) {
    *used_cubin = 1;
    return fs_kernel_load_cubin(ctx, v, c->cubin, out);
  }
  return fs_kernel_load(ctx, v, out);
}

_Static_assert((int)FS_CALL_TOKEN == (int)FS_STORE_MODE_TOKEN &&
                   (int)FS_CALL_GROUP16 == (int)FS_STORE_MODE_GROUP16 &&
                   (int)FS_CALL_GREEDY == (int)FS_STORE_MODE_GREEDY &&
                   (int)FS_CALL_MODES == FS_STORE_MODES,
               "call modes are the tuning database's modes");

int fs_tuned_choose(fs_context *ctx, const fs_problem *p, int bucket, int mode,
                    const fs_variant *dflt, fs_kernel **out, char *how, size_t howlen) {
  char path[PATH_MAX], arch[16]; /* defaults_path() needs PATH_MAX */
  fs_variant v;
  accept_arg aa = {ctx, fs_gen_revision(ctx->gen), &v, p->hidden, 0};
  snprintf(arch, sizeof arch, "sm_%d", ctx->arch);
  fs_store_key key = {ctx->device_name, arch, p->dtype, p->hidden, p->vocab, bucket, mode};
  static const char *const names[2] = {"tuning database", "shipped defaults"};
  fs_store *dbs[2];
  user_db_path(path, sizeof path);
  dbs[0] = open_db(&ctx->user_db, &ctx->user_db_tried, path, names[0]);
  if (!ctx->defaults_db_tried) defaults_path(path, sizeof path);
  dbs[1] = open_db(&ctx->defaults_db, &ctx->defaults_db_tried, path, names[1]);
  for (int nearest = 0; nearest < (mode == FS_CALL_TOKEN ? 2 : 1); nearest++)
    for (int i = 0; i < 2; i++) {
      fs_store_choice c;
      memset(&c, 0, sizeof c);
      if (!dbs[i]) continue;
      int st = nearest ? fs_store_nearest(dbs[i], &key, accept, &aa, &c)
                       : fs_store_winner(dbs[i], &key, &c);
      if (st != FS_OK) {
        if (logging())
          fprintf(stderr, "flashsampling: %s: %s\n", names[i], fs_store_errmsg(dbs[i]));
        fs_store_choice_clear(&c);
        continue;
      }
      if (c.match == FS_STORE_MATCH_NONE || (!nearest && !accept(&aa, &c))) {
        fs_store_choice_clear(&c);
        continue;
      }
      fs_kernel *k = NULL;
      int used_cubin = 0;
      st = load_choice(ctx, &v, &c, aa.same, &k, &used_cubin);
      if (!st && c.match == FS_STORE_MATCH_NEAREST) st = revalidate(ctx, k, dflt, p, bucket);
      if (!st) {
        snprintf(how, howlen, "%s, %s%s%s (D=%d V=%d B=%d)", names[i],
                 c.match == FS_STORE_MATCH_EXACT ? "tuned" : "nearest tuned",
                 mode == FS_CALL_TOKEN ? "" : mode == FS_CALL_GREEDY ? " for greedy calls"
                                                                     : " for group16 noise",
                 used_cubin ? ", stored cubin" : "", c.hidden, c.vocab, c.bucket);
        *out = k;
      } else {
        if (logging())
          fprintf(stderr, "flashsampling: %s winner %s skipped: %s\n", names[i], c.variant,
                  fs_last_error(ctx));
        fs_clear_err(ctx); /* skipped, not failed: the call goes on without it */
      }
      fs_store_choice_clear(&c);
      if (!st) return FS_OK;
    }
  *out = NULL;
  return FS_OK;
}
