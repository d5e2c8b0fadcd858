/*
** test_shipped_defaults: every winner in tuning-db/defaults/defaults.db is one
** the runtime would load today.  A winner is used only if it was tuned with
** today's generator revision or its source, generated today, hashes as the
** one measured (runtime/tuned.c); any edit to a template or to a header the
** kernels include changes every variant's source, so the shipped winners
** would silently fall back to the built-in defaults until the next re-tune.
** This test makes that a red CI instead.  Checks, per winner: the name
** parses for its architecture, a cubin is stored with it, and it was tuned
** with today's generator revision (which leaves comments out of its hash,
** so a comment edit keeps it) or the stored source hash equals today's
** source's (fs_tuned_same_revision, fs_tuned_measured_hash: the runtime's
** own rule).  It can fail: at today's revision the rule must hash
** exactly the generated source, and a one-byte edit must change that hash
** (a template comment edit made all 27 winners fail, sixth session; since
** the thirtieth a comment edit keeps them by the revision, and the test
** only notes that their stored cubins, of the older source, will not load:
** the runtime compiles such a winner at first use).
*/
#include "fs_test.h"

#include "fs_int.h"
#include "fs_nvrtc.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct walk {
  fs_gen *g;
  int winners, edited_differs, same_rev;
  int stale_cubins; /* stored cubins of another source: compiled again at first use */
} walk;

static int check_winner(void *arg, const fs_store_choice *c) {
  walk *w = arg;
  char err[512], today[32];
  fs_variant v;
  char *src = NULL;
  w->winners++;
  const int parsed = fs_gen_parse(w->g, c->variant, &v, err, sizeof err) == FS_OK;
  CHECK_MSG(parsed, "%s (D=%d V=%d B=%d): does not parse: %s", c->variant, c->hidden, c->vocab,
            c->bucket, err);
  if (!parsed) return 0;
  CHECK_MSG(c->has_cubin, "%s (D=%d V=%d B=%d): no cubin stored", c->variant, c->hidden,
            c->vocab, c->bucket);
  CHECK_MSG(c->source_hash[0], "%s: no source hash stored", c->variant);
  REQUIRE(fs_tuned_measured_hash(w->g, &v, c->generator_rev, today, sizeof today));
  const int same_rev = fs_tuned_same_revision(c->generator_rev, fs_gen_revision(w->g));
  w->same_rev += same_rev;
  w->stale_cubins += c->has_cubin && strcmp(c->source_hash, today) != 0;
  CHECK_MSG(same_rev || strcmp(c->source_hash, today) == 0,
            "%s (D=%d V=%d B=%d): measured on another source (revision %s, today's %s; "
            "stored hash %s, today's %s): a template or generator code edit retired it; "
            "re-tune the shipped defaults (scripts/gpu-final.sh, step rewin or a full tuning)",
            c->variant, c->hidden, c->vocab, c->bucket, c->generator_rev,
            fs_gen_revision(w->g), c->source_hash, today);
  /* The rule's teeth, at today's revision (where it hashes the source as
  ** generated): it must hash exactly today's source, and one byte more
  ** must give another hash.  (That an edit under an older stored revision
  ** is caught too was mutation-checked: a one-line template comment made
  ** every winner fail, perf-notes 11 / design.md.) */
  REQUIRE(fs_gen_source(w->g, &v, &src, err, sizeof err) == FS_OK);
  char same[32], plain[32], more[32];
  REQUIRE(fs_tuned_measured_hash(w->g, &v, fs_gen_revision(w->g), same, sizeof same));
  snprintf(plain, sizeof plain, "%016llx", fs_nvrtc_cache_key(src, v.target));
  CHECK_MSG(strcmp(same, plain) == 0, "%s: at today's revision the rule hashed %s, the source %s",
            c->variant, same, plain);
  char *edited = malloc(strlen(src) + 2);
  REQUIRE(edited != NULL);
  snprintf(edited, strlen(src) + 2, "%s ", src);
  snprintf(more, sizeof more, "%016llx", fs_nvrtc_cache_key(edited, v.target));
  w->edited_differs += strcmp(plain, more) != 0;
  free(edited);
  free(src);
  return 0;
}

int main(void) {
  const char *root = getenv("FS_TEST_SOURCE_DIR");
  if (!root) {
    fprintf(stderr, "test_shipped_defaults: FS_TEST_SOURCE_DIR (the repository root) is not "
                    "set; run it through ctest\n");
    return 1;
  }
  char path[4096], err[512];
  snprintf(path, sizeof path, "%s/tuning-db/defaults/defaults.db", root);
  fs_store *s = NULL;
  REQUIRE(fs_store_open(path, FS_STORE_READONLY, &s, err, sizeof err) == FS_OK);
  walk w = {NULL, 0, 0, 0, 0};
  REQUIRE(fs_gen_open(&w.g, err, sizeof err) == FS_OK);
  CHECK(fs_store_list_winners(s, NULL, check_winner, &w) == FS_OK);
  /* the three shipped shapes, nine buckets each */
  CHECK_MSG(w.winners >= 27, "%d winners shipped, expected 27 or more", w.winners);
  CHECK_MSG(w.edited_differs == w.winners, "a one-byte edit left the hash as it was (%d of %d)",
            w.winners - w.edited_differs, w.winners);
  printf("%d shipped winners checked against today's sources, %d of today's revision\n",
         w.winners, w.same_rev);
  if (w.stale_cubins)
    printf("note: %d winners' stored cubins were compiled from another source (comments "
           "edited since they were tuned): the runtime compiles them with NVRTC at first "
           "use; scripts/gpu-final.sh, step rewin, stores today's\n", w.stale_cubins);
  fs_gen_close(w.g);
  fs_store_close(s);
  return fs_test_done("test_shipped_defaults");
}
