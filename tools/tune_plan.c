/*
** tune_plan.c: which variants fs-tune tries, in which order (tune_plan_*).
**
** The generator enumerates the space for (arch, dtype); --filter keeps names
** containing one of its comma-separated substrings; each bucket then orders
** its variants so that the most promising come first (a small --budget
** still finds a good winner): the built-in default first (it is also the
** oracle), then by how far the batch tile is from the bucket, preferring
** the plain choices (last-CTA reduction, persistent grid, 16-byte loads),
** and, in a space that has the wgmma family (wg: sm_90a), the TMA and wgmma
** families before mma.sync and FFMA, then in enumeration order.
** --max-variants cuts each bucket's list.  Sources are generated here, in
** the main thread (Lua is not thread-safe), and variants whose sources are
** byte-identical (they differ only in host-side parameters such as the grid)
** share one compile.
*/
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *tune_param(const fs_variant *v, const char *key, char *buf, size_t n) {
  size_t kl = strlen(key);
  const char *p = v->params;
  buf[0] = 0;
  while (p && *p) {
    if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
      const char *val = p + kl + 1, *end = strchr(val, ',');
      size_t len = end ? (size_t)(end - val) : strlen(val);
      if (len >= n) len = n - 1;
      memcpy(buf, val, len);
      buf[len] = 0;
      return buf;
    }
    p = strchr(p, ',');
    if (p) p++;
  }
  return buf;
}

static unsigned long long fnv1a(const char *s) {
  unsigned long long h = 1469598103934665603ull;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  return h;
}

/* The batch tiles one family offers (its smallest and largest tile_b). */
typedef struct fam_range {
  char family[16];
  int lo, hi;
} fam_range;

/* Lower is more promising for `bucket`: the batch tile's distance (in
** octaves) from the bucket clamped to what the variant's family offers, so
** that each family's best-fitting tiles rank first, plus one for each
** probe-only choice the family has (a second-launch reduction, one CTA per
** tile, 8-byte loads).  Parameters are read by name, so families without
** them are not penalised.  Where the space has the wgmma family (wg: sm_90a,
** where this was measured), the cp.async families (mma, fma) rank after every
** TMA and wgmma tile (+64, more than any distance): on the H200 no mma.sync
** or FFMA variant won a bucket, 6-14% behind the best at B = 1..16 and
** 1.3-2.9x at B >= 64 (perf-notes 25c), so a small --budget spends its time
** on the families that win. */
static double promise(const fs_variant *v, int bucket, const fam_range *fr, int nfr) {
  char buf[32];
  double want = bucket;
  int hopper = 0;
  for (int i = 0; i < nfr; i++) {
    if (!strcmp(fr[i].family, "wg")) hopper = 1;
    if (!strcmp(fr[i].family, v->family)) {
      if (want < fr[i].lo) want = fr[i].lo;
      if (want > fr[i].hi) want = fr[i].hi;
    }
  }
  double s = 4.0 * fabs(log2((double)(v->tile_b > 0 ? v->tile_b : 1)) - log2(want));
  if (hopper && (!strcmp(v->family, "mma") || !strcmp(v->family, "fma"))) s += 64;
  if (!strcmp(tune_param(v, "reduce", buf, sizeof buf), "pass2")) s += 1;
  if (!strcmp(tune_param(v, "grid", buf, sizeof buf), "tiles")) s += 1;
  if (!strcmp(tune_param(v, "load", buf, sizeof buf), "8")) s += 1;
  return s;
}

/* Fills fr with the batch-tile range of each family of the plan. */
static int family_ranges(const tune_plan *pl, fam_range *fr, int max) {
  int nfr = 0;
  for (int i = 0; i < pl->nitems; i++) {
    const fs_variant *v = &pl->items[i].v;
    int j = 0;
    while (j < nfr && strcmp(fr[j].family, v->family)) j++;
    if (j == nfr) {
      if (nfr == max) continue;
      snprintf(fr[nfr].family, sizeof fr[nfr].family, "%s", v->family);
      fr[nfr].lo = fr[nfr].hi = v->tile_b;
      nfr++;
    }
    if (v->tile_b < fr[j].lo) fr[j].lo = v->tile_b;
    if (v->tile_b > fr[j].hi) fr[j].hi = v->tile_b;
  }
  return nfr;
}

typedef struct ranked {
  double score;
  int index;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->score != y->score) return x->score < y->score ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static int find_item(const tune_plan *pl, const char *name) {
  for (int i = 0; i < pl->nitems; i++)
    if (strcmp(pl->items[i].v.name, name) == 0) return i;
  return -1;
}

/* Generates the source of item i (once) and finds an earlier item with the
** same bytes. */
static int prepare_source(tune_plan *pl, fs_gen *g, int i, char *err, size_t errlen) {
  tune_item *it = &pl->items[i];
  if (it->src) return FS_OK;
  char e[512];
  int st = fs_gen_source(g, &it->v, &it->src, e, sizeof e);
  if (st) {
    snprintf(err, errlen, "%s: %s", it->v.name, e);
    return st;
  }
  it->key = fs_nvrtc_cache_key(it->src, it->v.target);
  snprintf(it->hash, sizeof it->hash, "%016llx", it->key);
  for (int j = 0; j < pl->nitems; j++) {
    tune_item *o = &pl->items[j];
    if (j != i && o->src && o->dup_of < 0 && o->key == it->key &&
        strcmp(o->src, it->src) == 0) {
      it->dup_of = j;
      break;
    }
  }
  return FS_OK;
}

/* The revision names the generator and, through the hash of one fixed full
** source (template included), the templates: the same for every shape,
** dtype and bucket list, so that a rerun with other options resumes. */
static int plan_revision(tune_plan *pl, fs_gen *g, int arch, char *err, size_t errlen) {
  char e[512], *src = NULL;
  fs_variant v;
  int st = fs_gen_default(g, arch, FS_DTYPE_BF16, 1, 4096, 151936, &v, e, sizeof e);
  if (!st) st = fs_gen_source(g, &v, &src, e, sizeof e);
  if (st) {
    snprintf(err, errlen, "generator revision: %s", e);
    return st;
  }
  snprintf(pl->revision, sizeof pl->revision, "%s+%08llx", fs_gen_revision(g),
           fnv1a(src) & 0xffffffffull);
  free(src);
  return FS_OK;
}

int tune_filter_match(const char *filter, const char *name) {
  if (!filter) return 1;
  for (const char *p = filter; *p;) {
    const size_t n = strcspn(p, ",");
    if (n > 0) {
      for (const char *q = name; (q = strchr(q, p[0])) != NULL; q++)
        if (!strncmp(q, p, n)) return 1;
    }
    p += n + (p[n] == ',');
  }
  return 0;
}

static int queue_compile(tune_plan *pl, char *queued, int i) {
  int s = pl->items[i].dup_of >= 0 ? pl->items[i].dup_of : i;
  if (!queued[s]) {
    queued[s] = 1;
    pl->compile[pl->ncompile++] = s;
  }
  return s;
}

int tune_plan_build(tune_plan *pl, fs_gen *g, int arch, const tune_opts *o, char *err,
                    size_t errlen) {
  char e[512];
  fs_variant *list = NULL;
  int n = 0;
  memset(pl, 0, sizeof *pl);
  pl->arch = arch;
  int st = fs_gen_enumerate(g, arch, o->dtype, &list, &n, e, sizeof e);
  if (st) {
    snprintf(err, errlen, "enumerating the design space for sm_%d: %s", arch, e);
    return st;
  }
  pl->items = calloc((size_t)n, sizeof *pl->items);
  pl->compile = calloc((size_t)n, sizeof *pl->compile);
  ranked *rk = calloc((size_t)n, sizeof *rk);
  char *queued = calloc((size_t)n, 1);
  if (!pl->items || !pl->compile || !rk || !queued) {
    free(list); free(rk); free(queued);
    snprintf(err, errlen, "out of memory for %d variants", n);
    return FS_OUT_OF_MEMORY;
  }
  pl->nitems = n;
  for (int i = 0; i < n; i++) {
    pl->items[i].v = list[i];
    pl->items[i].dup_of = -1;
    pl->items[i].registers = pl->items[i].spills = pl->items[i].stack = -1;
  }
  free(list);
  if (n > 0) snprintf(pl->target, sizeof pl->target, "%s", pl->items[0].v.target);

  fam_range fr[8];
  const int nfr = family_ranges(pl, fr, 8);
  pl->nbuckets = o->nbuckets;
  for (int b = 0; b < o->nbuckets && !st; b++) {
    const int bucket = o->buckets[b];
    pl->buckets[b] = bucket;
    fs_variant dv;
    st = fs_gen_default(g, arch, o->dtype, bucket, o->D, o->V, &dv, e, sizeof e);
    if (st) {
      snprintf(err, errlen, "the built-in default for B=%d: %s", bucket, e);
      break;
    }
    int d = find_item(pl, dv.name);
    if (d < 0) {
      snprintf(err, errlen, "the built-in default %s is not in the enumerated space", dv.name);
      st = FS_INTERNAL;
      break;
    }
    pl->deflt[b] = d;
    pl->order[b] = calloc((size_t)n, sizeof(int));
    if (!pl->order[b]) {
      snprintf(err, errlen, "out of memory");
      st = FS_OUT_OF_MEMORY;
      break;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
      if (!tune_filter_match(o->filter, pl->items[i].v.name)) continue;
      rk[m].score = i == d ? -1.0 : promise(&pl->items[i].v, bucket, fr, nfr);
      rk[m].index = i;
      m++;
    }
    qsort(rk, (size_t)m, sizeof *rk, cmp_ranked);
    if (o->max_variants > 0 && m > o->max_variants) m = o->max_variants;
    for (int i = 0; i < m; i++) pl->order[b][i] = rk[i].index;
    pl->norder[b] = m;
    if (!m) {
      snprintf(err, errlen, "--filter %s: no variant of the %d for sm_%d matches", o->filter,
               n, arch);
      st = FS_INVALID_ARGUMENT;
      break;
    }
  }
  /* Sources in compile order: every bucket's default, then the buckets'
  ** lists taken in turn by rank (rank 0 of each bucket, then rank 1, ...).
  ** Bucket by bucket, the first bucket's list (which holds every variant)
  ** queued the last buckets' best-fitting tiles behind everything else, so
  ** under a small --budget they were timed one compile wait at a time. */
  int ranks = 0;
  for (int b = 0; b < pl->nbuckets && !st; b++) {
    st = prepare_source(pl, g, pl->deflt[b], err, errlen);
    if (!st) queue_compile(pl, queued, pl->deflt[b]);
    if (pl->norder[b] > ranks) ranks = pl->norder[b];
  }
  for (int r = 0; r < ranks && !st; r++)
    for (int b = 0; b < pl->nbuckets && !st; b++) {
      if (r >= pl->norder[b]) continue;
      st = prepare_source(pl, g, pl->order[b][r], err, errlen);
      if (!st) queue_compile(pl, queued, pl->order[b][r]);
    }
  if (!st) st = plan_revision(pl, g, arch, err, errlen);
  free(rk);
  free(queued);
  return st;
}

void tune_plan_free(tune_plan *pl) {
  for (int i = 0; i < pl->nitems; i++) {
    free(pl->items[i].src);
    free(pl->items[i].cubin);
    free(pl->items[i].log);
  }
  for (int b = 0; b < pl->nbuckets; b++) free(pl->order[b]);
  free(pl->items);
  free(pl->compile);
  memset(pl, 0, sizeof *pl);
}
