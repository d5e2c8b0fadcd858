/*
** tune_report.c: what fs-tune shows at the end (tune_report_*): the winner
** of every bucket, chosen by the store from all measurements (so a resumed
** run shows the same table as an uninterrupted one), and --report FILE: a
** CSV of this run's rows plus FILE.svg, a hand-written SVG with one panel
** per main tile parameter (time relative to the bucket's best against the
** parameter's value, one colour per bucket).
*/
#define _XOPEN_SOURCE 700 /* realpath */
#include "tune.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void tune_report_table(tune_session *s) {
  const tune_opts *o = s->o;
  printf("\nwinners for %s %s, %s D=%d V=%d%s%s (from %s):\n", s->device_name, s->arch_str,
         o->dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", o->D, o->V,
         o->mode ? ", mode " : "", o->mode ? fs_store_mode_name(o->mode) : "", o->db_path);
  printf("%7s  %-52s %10s %8s %9s %10s %10s %9s\n", "bucket", "winner", "median_us", "spread",
         "floor_us", "floor/time", "candidates", "tuning_s");
  for (int b = 0; b < s->plan.nbuckets; b++) {
    fs_store_key key = {s->device_name, s->arch_str, o->dtype, o->D, o->V, s->plan.buckets[b],
                        o->mode};
    fs_store_choice c;
    memset(&c, 0, sizeof c);
    int st = fs_store_winner(s->store, &key, &c);
    if (st) {
      printf("%7d  (store error: %s)\n", key.bucket, fs_store_errmsg(s->store));
      continue;
    }
    if (c.match == FS_STORE_MATCH_NONE) {
      printf("%7d  %-52s %10s %8s %9s %10s %10d %9.1f\n", key.bucket, "(none verified)", "-",
             "-", "-", "-", 0, s->sum[b].seconds);
      continue;
    }
    double fl = c.floor_us >= 0 ? c.floor_us : s->sum[b].floor_us;
    char fls[32] = "-", frac[32] = "-";
    if (fl > 0) {
      snprintf(fls, sizeof fls, "%.2f", fl);
      snprintf(frac, sizeof frac, "%.1f%%", 100.0 * fl / c.median_us);
    }
    printf("%7d  %-52s %10.2f %8.2f %9s %10s %10d %9.1f\n", key.bucket, c.variant, c.median_us,
           c.spread_us, fls, frac, c.n_candidates, s->sum[b].seconds);
    fs_store_choice_clear(&c);
  }
  printf("total time %.1f s\n", (fs_tools_now() - s->t0) / 1e3);
}

/* ---- CSV ---------------------------------------------------------------------- */
static void csv_num(FILE *f, double x, const char *fmt) {
  if (x >= 0) fprintf(f, fmt, x);
  fputc(',', f);
}

static int write_csv(tune_session *s, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  fprintf(f, "bucket,variant,tile_v,tile_b,tile_k,warps,stages,load,reduce,grid,outcome,"
             "median_us,spread_us,samples,floor_us,registers,spills,mode\n");
  for (int i = 0; i < s->nrows; i++) {
    const tune_row *r = &s->rows[i];
    const fs_variant *v = &s->plan.items[r->item].v;
    char red[32], grid[32], load[32];
    const char *oc = r->outcome < 0 ? "compiled" : fs_store_outcome_name(r->outcome);
    /* Parameters a family lacks stay empty. */
    fprintf(f, "%d,%s,%d,%d,%d,%dx%d,%d,%s,%s,%s,%s,", r->bucket, v->name, v->tile_v, v->tile_b,
            v->tile_k, v->warps_m, v->warps_n, v->stages, tune_param(v, "load", load, sizeof load),
            tune_param(v, "reduce", red, sizeof red), tune_param(v, "grid", grid, sizeof grid),
            oc ? oc : "?");
    csv_num(f, r->median_us, "%.3f");
    csv_num(f, r->spread_us, "%.3f");
    csv_num(f, r->samples, "%.0f");
    csv_num(f, r->floor_us, "%.3f");
    csv_num(f, r->registers, "%.0f");
    if (r->spills >= 0) fprintf(f, "%d", r->spills);
    fprintf(f, ",%s\n", fs_store_mode_name(s->o->mode)); /* what the times are of */
  }
  if (fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

/* ---- SVG ---------------------------------------------------------------------- */
#define PANEL_W 360
#define PANEL_H 260
#define MARGIN 50
#define YMAX 3.0 /* relative time shown: 1 .. 3 x the bucket's best */

static void xml_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '&') fputs("&amp;", f);
    else if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '"') fputs("&quot;", f);
    else if ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f) fputc(*s, f);
  }
}

static int param_value(const fs_variant *v, int p) {
  switch (p) {
  case 0: return v->tile_v;
  case 1: return v->tile_b;
  case 2: return v->tile_k;
  default: return v->stages;
  }
}

static int write_svg(tune_session *s, const char *path) {
  static const char *names[] = {"tile_v", "tile_b", "tile_k", "stages"};
  static const char *colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  const int ncol = (int)(sizeof colors / sizeof *colors);
  tune_plan *pl = &s->plan;
  double best[TUNE_MAX_BUCKETS];
  int nok = 0;
  for (int b = 0; b < pl->nbuckets; b++) best[b] = -1;
  for (int i = 0; i < s->nrows; i++) {
    const tune_row *r = &s->rows[i];
    if (r->outcome != FS_STORE_OUTCOME_OK) continue;
    nok++;
    for (int b = 0; b < pl->nbuckets; b++)
      if (pl->buckets[b] == r->bucket && (best[b] < 0 || r->median_us < best[b]))
        best[b] = r->median_us;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return -1;
  }
  const int W = 2 * PANEL_W + 40, H = 2 * PANEL_H + 110;
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
             "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
             "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
  fprintf(f, "<text x=\"20\" y=\"22\" font-size=\"14\">fs-tune: ");
  xml_text(f, s->device_name[0] ? s->device_name : "no GPU");
  fprintf(f, " %s, %s D=%d V=%d: time / best of the bucket against each parameter</text>\n",
          pl->target, s->o->dtype == FS_DTYPE_BF16 ? "bf16" : "fp16", s->o->D, s->o->V);
  if (!nok)
    fprintf(f, "<text x=\"20\" y=\"60\" font-size=\"13\">no timed variants (a dry run, or "
               "nothing was verified): nothing to plot</text>\n");
  for (int p = 0; p < 4 && nok; p++) {
    const int x0 = 20 + (p % 2) * PANEL_W, y0 = 40 + (p / 2) * PANEL_H;
    const int px = x0 + MARGIN, pw = PANEL_W - MARGIN - 20, py = y0 + 20,
              ph = PANEL_H - 70;
    /* The distinct values of the parameter among the plotted rows. */
    int vals[16], nv = 0;
    for (int i = 0; i < s->nrows; i++) {
      if (s->rows[i].outcome != FS_STORE_OUTCOME_OK) continue;
      int v = param_value(&pl->items[s->rows[i].item].v, p), k = 0;
      while (k < nv && vals[k] != v) k++;
      if (k == nv && nv < 16) vals[nv++] = v;
    }
    for (int a = 1; a < nv; a++) /* insertion sort */
      for (int k = a; k > 0 && vals[k - 1] > vals[k]; k--) {
        int t = vals[k]; vals[k] = vals[k - 1]; vals[k - 1] = t;
      }
    fprintf(f, "<g>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#444\"/>\n", px, py, pw, ph);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", px + pw / 2,
            py + ph + 32, names[p]);
    for (double y = 1.0; y <= YMAX + 1e-9; y += 0.5) {
      int yy = py + ph - (int)((y - 1.0) / (YMAX - 1.0) * ph);
      fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>"
                 "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.1fx</text>\n",
              px, yy, px + pw, yy, px - 4, yy + 4, y);
    }
    for (int k = 0; k < nv; k++) {
      int xx = px + (int)((k + 0.5) * pw / nv);
      fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", xx,
              py + ph + 15, vals[k]);
    }
    for (int i = 0; i < s->nrows; i++) {
      const tune_row *r = &s->rows[i];
      if (r->outcome != FS_STORE_OUTCOME_OK) continue;
      int b = 0;
      while (b < pl->nbuckets && pl->buckets[b] != r->bucket) b++;
      if (b == pl->nbuckets || best[b] <= 0) continue;
      int v = param_value(&pl->items[r->item].v, p), k = 0;
      while (k < nv && vals[k] != v) k++;
      if (k == nv) continue;
      double rel = r->median_us / best[b];
      if (rel > YMAX) rel = YMAX;
      double jitter = ((r->item * 37 + b * 11) % 21 - 10) / 10.0 * (0.3 * pw / nv);
      double cx = px + (k + 0.5) * pw / nv + jitter;
      double cy = py + ph - (rel - 1.0) / (YMAX - 1.0) * ph;
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\" fill-opacity=\"0.7\">"
                 "<title>%s B=%d %.2f us</title></circle>\n",
              cx, cy, colors[b % ncol], pl->items[r->item].v.name, r->bucket, r->median_us);
    }
    fprintf(f, "</g>\n");
  }
  /* Legend: one colour per bucket. */
  for (int b = 0; b < pl->nbuckets && nok; b++) {
    int x = 20 + b * 70, y = H - 20;
    fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"4\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">"
               "B=%d</text>\n", x + 5, y - 4, colors[b % ncol], x + 12, y, pl->buckets[b]);
  }
  fprintf(f, "</svg>\n");
  if (fclose(f) != 0) {
    perror(path);
    return -1;
  }
  return 0;
}

int tune_report_files(tune_session *s, const char *path) {
  size_t n = strlen(path) + 5;
  char *svg = malloc(n);
  if (!svg) return -1;
  snprintf(svg, n, "%s.svg", path);
  int rc = write_csv(s, path);
  if (!rc) rc = write_svg(s, svg);
  if (!rc) printf("report: %s (%d rows) and %s\n", path, s->nrows, svg);
  free(svg);
  return rc;
}

/* ---- --report against --db ------------------------------------------------ */
/* path with its directory resolved (realpath: links, "." and ".."), for a
** file that may not exist yet; path itself when the directory is not there. */
static void resolve(const char *path, char *out, size_t n) {
  char dir[PATH_MAX], real[PATH_MAX];
  if (realpath(path, real)) {
    snprintf(out, n, "%s", real);
    return;
  }
  const char *slash = strrchr(path, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  if (!*dir) snprintf(dir, sizeof dir, "/");
  if (realpath(dir, real)) snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path);
  else snprintf(out, n, "%s", path);
}

/* Whether a and b name one file: the same inode when both exist, else the
** same resolved path. */
static int same_file(const char *a, const char *b) {
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  char ra[PATH_MAX + 256], rb[PATH_MAX + 256];
  resolve(a, ra, sizeof ra);
  resolve(b, rb, sizeof rb);
  return strcmp(ra, rb) == 0;
}

int tune_report_check(const char *report, const char *db) {
  static const char *const db_suffix[] = {"", "-wal", "-shm", "-journal"};
  static const char *const report_suffix[] = {"", ".svg"};
  char rf[PATH_MAX + 8], df[PATH_MAX + 16];
  if (!report || !db) return 0;
  for (int r = 0; r < 2; r++) {
    snprintf(rf, sizeof rf, "%s%s", report, report_suffix[r]);
    for (int d = 0; d < 4; d++) {
      snprintf(df, sizeof df, "%s%s", db, db_suffix[d]);
      if (!same_file(rf, df)) continue;
      char what[PATH_MAX + 64] = "";
      if (d) snprintf(what, sizeof what, "%s, a file of ", df);
      return fs_tools_bad_arg("fs-tune", "(run 'fs-tune --help' for the options)\n",
                              "--report %s: the report%s%s would overwrite %sthe tuning "
                              "database --db %s: choose another report path",
                              report, r ? "'s plot " : "", r ? rf : "", what, db);
    }
  }
  return 0;
}
