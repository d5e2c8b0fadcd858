/*
** test_launch_facts: the host launches a variant by the facts the generator
** states for it (gen.h), never by its family's name, so those facts must
** agree with the kernel the variant's source is.  For every variant of
** sm_80, sm_90a and sm_100 in bf16:
**   - v.tma      iff the kernel takes W's and H's tensor maps after its
**                params (`__grid_constant__ fs_tmap` in the source);
**   - v.whole_tiles iff the source does not split the vocabulary into
**                balanced 16-row groups (`fs_chunk_rows(`), so that
**                fs_num_chunks counts tiles, not groups;
**   - v.cluster  is the source's `#define CLUSTER n` (the CTAs its kernel
**                expects per cluster; at most 1 where it defines none).
** The test can fail: dropping `v.tma = 1` from a family file, setting
** `whole_tiles` in one whose template calls fs_chunk_rows, or a `cluster`
** field that disagrees with the CLUSTER macro the generator emits fails it.
*/
#include "fs_test.h"

#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  char err[1024];
  fs_gen *g = NULL;
  REQUIRE(fs_gen_open(&g, err, sizeof err) == FS_OK);
  static const int archs[] = {80, 90, 100};
  int checked = 0, tma = 0, whole = 0, clustered = 0;
  for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
    fs_variant *list = NULL;
    int n = 0;
    CHECK_MSG(fs_gen_enumerate(g, archs[a], 1, &list, &n, err, sizeof err) == FS_OK, "%s", err);
    for (int i = 0; i < n; i++) {
      const fs_variant *v = &list[i];
      char *src = NULL;
      if (fs_gen_source(g, v, &src, err, sizeof err) != FS_OK || !src) {
        CHECK_MSG(0, "%s: no source: %s", v->name, err);
        continue;
      }
      const int copies = strstr(src, "__grid_constant__ fs_tmap") != NULL;
      const int groups = strstr(src, "fs_chunk_rows(") != NULL;
      const char *cl = strstr(src, "#define CLUSTER ");
      const int cluster = cl ? atoi(cl + strlen("#define CLUSTER ")) : 1;
      CHECK_MSG(v->tma == copies, "%s: tma = %d but its kernel %s tensor maps", v->name, v->tma,
                copies ? "takes" : "takes no");
      CHECK_MSG(v->whole_tiles == !groups, "%s: whole_tiles = %d but its source %s 16-row groups",
                v->name, v->whole_tiles, groups ? "splits chunks into" : "does not use");
      CHECK_MSG((v->cluster > 1 ? v->cluster : 1) == cluster,
                "%s: cluster = %d but its source defines CLUSTER %d", v->name, v->cluster, cluster);
      checked++;
      tma += v->tma;
      whole += v->whole_tiles;
      clustered += v->cluster > 1;
      free(src);
    }
    free(list);
  }
  printf("%d variants: %d with tensor maps, %d with chunks of whole tiles, %d clustered\n",
         checked, tma, whole, clustered);
  /* the space has all kinds (else the checks above prove nothing) */
  CHECK(tma > 0 && tma < checked && whole > 0 && whole < checked && clustered > 0);
  fs_gen_close(g);
  return fs_test_done("test_launch_facts");
}
