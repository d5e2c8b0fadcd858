/*
** test_tuned_revision.c: which stored winners the runtime accepts
** (runtime/tuned.c).  A winner is used when it was tuned with the current
** generator revision, or with another revision whose source for the variant
** hashes as today's; otherwise the runtime falls back.  Three one-row
** tuning databases for (this GPU, bf16, D=256, V=4096, bucket 8), each naming
** the same non-default variant (the first mma variant with an 8-row batch
** tile), are checked through fs_variant_name in a fresh context each:
**   1. an old revision with the hash of today's source generated under it
**      (only the revision named in the generated header differs)
**                                                    -> the winner is used;
**   2. an old revision with another source hash      -> the built-in default;
**   3. today's revision with another source hash     -> the winner is used,
**      compiled by NVRTC (its stored hash does not match, so no cubin is).
**   4. today's revision and source hash with a stored cubin of that source
**                                                    -> the winner, from the cubin;
**   5. the same with half of the cubin stored        -> the winner, compiled
**      (fs_cubin_plausible keeps a damaged cubin from the driver).
** Case 2 is the one that fails if the rule is too lax, cases 1 and 3 if it
** is too strict; case 5 if stored cubins are loaded unchecked.
*/
#include "fs_nvrtc.h"
#include "gen.h"
#include "gpu_store.h"
#include "gpu_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TD 256
#define TV 4096
#define TB 8
#define OLD_REV "gen-0-0123abcd"

/* cubin: stored with the winner (n bytes), unless NULL. */
static void write_db_cubin(const char *path, const fs_context *ctx, const char *rev,
                           const char *variant, const char *source_hash, const void *cubin,
                           size_t n) {
  int64_t id = 0;
  char arch[16];
  fs_store *st = gs_begin(path, ctx, rev, &id);
  gs_add_ok(st, id, TD, TV, TB, FS_STORE_MODE_TOKEN, variant, source_hash, 10.0);
  snprintf(arch, sizeof arch, "sm_%d", ctx->arch);
  if (cubin)
    REQUIRE(fs_store_put_cubin(st, variant, arch, "13.0", source_hash, cubin, n) == FS_OK);
  gs_end(st, id);
}

static void write_db(const char *path, const fs_context *ctx, const char *rev,
                     const char *variant, const char *source_hash) {
  write_db_cubin(path, ctx, rev, variant, source_hash, NULL, 0);
}

/* fs_variant_name for the test shape in a fresh context reading `db`. */
static void chosen(const char *db, char *buf, size_t n) {
  setenv("FS_TUNING_DB", db, 1);
  fs_context *c = NULL;
  REQUIRE(fs_context_create(0, &c) == FS_OK);
  int st = gu_variant_name(c, TB, TD, TV, FS_DTYPE_BF16, buf, n);
  CHECK_MSG(st == FS_OK, "fs_variant_name: %s", fs_last_error(c));
  fs_context_destroy(c);
}

int main(void) {
  fs_context *ctx = fs_test_gpu_or_skip();
  char err[768], hash[32], db[256], got[512], *src = NULL;
  setenv("FS_DEFAULTS_DB", "", 1); /* no shipped defaults: only the test's database */
  unsetenv("FS_VARIANT");
  fs_gen *g = NULL;
  fs_variant *list = NULL, dflt;
  int n = 0;
  gs_variants(ctx, TB, TD, TV, &g, &list, &n, &dflt);
  const fs_variant *v = NULL;
  for (int i = 0; i < n && !v; i++)
    if (gs_alt_mma(&list[i], &dflt)) v = &list[i];
  REQUIRE(v != NULL);
  /* the source as an older revision would have generated it: the same code,
  ** the older revision's name in its generated header */
  REQUIRE(fs_gen_source(g, v, &src, err, sizeof err) == FS_OK);
  /* today's source, its hash and its cubin (cases 4 and 5) */
  char hash_now[32];
  snprintf(hash_now, sizeof hash_now, "%016llx", fs_nvrtc_cache_key(src, v->target));
  fs_cubin cub;
  REQUIRE(fs_nvrtc_compile(v->name, src, v->target, &cub, err, sizeof err) == FS_OK);
  const char *cur = fs_gen_revision(g);
  char *at = strstr(src, cur), old[65536];
  REQUIRE(at != NULL && strlen(src) + 32 < sizeof old);
  snprintf(old, sizeof old, "%.*s%s%s", (int)(at - src), src, OLD_REV, at + strlen(cur));
  snprintf(hash, sizeof hash, "%016llx", fs_nvrtc_cache_key(old, v->target));
  free(src);
  printf("variant %s, source hash %s; built-in default %s\n", v->name, hash, dflt.name);
  snprintf(db, sizeof db, "/tmp/fs-test-rev-%d.db", (int)getpid());

  write_db(db, ctx, OLD_REV "+00000000", v->name, hash);
  chosen(db, got, sizeof got);
  printf("1. old revision, same source:    %s\n", got);
  CHECK_MSG(strncmp(got, v->name, strlen(v->name)) == 0 && strstr(got, "tuning database"),
            "an unchanged source tuned under another revision was not used: %s", got);

  write_db(db, ctx, OLD_REV "+00000000", v->name, "0123456789abcdef");
  chosen(db, got, sizeof got);
  printf("2. old revision, other source:   %s\n", got);
  CHECK_MSG(strncmp(got, dflt.name, strlen(dflt.name)) == 0 && strstr(got, "built-in default"),
            "a winner of another source and revision was used: %s", got);

  write_db(db, ctx, fs_gen_revision(g), v->name, "0123456789abcdef");
  chosen(db, got, sizeof got);
  printf("3. this revision, other hash:    %s\n", got);
  CHECK_MSG(strncmp(got, v->name, strlen(v->name)) == 0 && strstr(got, "tuning database"),
            "a winner of this revision was not used: %s", got);

  write_db_cubin(db, ctx, fs_gen_revision(g), v->name, hash_now, cub.data, cub.size);
  chosen(db, got, sizeof got);
  printf("4. this source, its cubin:       %s\n", got);
  CHECK_MSG(strncmp(got, v->name, strlen(v->name)) == 0 && strstr(got, ", stored cubin"),
            "a winner's stored cubin of today's source was not loaded: %s", got);

  write_db_cubin(db, ctx, fs_gen_revision(g), v->name, hash_now, cub.data, cub.size / 2);
  chosen(db, got, sizeof got);
  printf("5. this source, half its cubin:  %s\n", got);
  CHECK_MSG(strncmp(got, v->name, strlen(v->name)) == 0 && strstr(got, "tuning database") &&
                !strstr(got, "stored cubin"),
            "a winner's truncated cubin was loaded (or the winner dropped): %s", got);
  fs_cubin_free(&cub);

  gs_remove_db(db);
  free(list);
  fs_gen_close(g);
  fs_context_destroy(ctx);
  return fs_test_done("test_tuned_revision");
}
