/*
** fs-tune: tunes flashsampling's generated kernels for one GPU and keeps the
** results in an SQLite tuning database that the runtime reads; lists, shows,
** exports, imports and merges those databases so one tuned GPU serves a
** fleet of the same GPU.  Run `fs-tune --help` for the options.
**
** This file parses the command line and runs the database subcommands; the
** tuning itself is tune_main() (tune_run.c and the other tune_*.c files).
** Exit status: 0 done, 1 failure (message on stderr), 2 bad arguments
** (the message names the argument, its value and the rule), 130 interrupted.
*/
#include "tune.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: fs-tune [options]                    tune the kernels on this GPU\n"
    "       fs-tune list [--db PATH]             tuning runs and winners\n"
    "       fs-tune show [filters] [--db PATH]   measurements\n"
    "       fs-tune export OUT.db [filters] [--db PATH]\n"
    "                                            winners and their cubins, to ship\n"
    "       fs-tune import IN.db [--db PATH]     merge a database into --db\n"
    "       fs-tune merge A.db B.db ... [--db PATH]\n"
    "\n"
    "tuning options:\n"
    "  --model NAME        LM-head preset (default qwen3-8b; see --list-models)\n"
    "  --shape D=..,V=..   hidden size and vocabulary instead of a preset\n"
    "  --batch LIST        batch sizes, comma-separated, each tuned as its bucket\n"
    "                      (default 1,2,4,8,16,32,64,128,256)\n"
    "  --dtype bf16|fp16   element type of H and W (default bf16)\n"
    "  --db PATH           tuning database (default\n"
    "                      $XDG_CACHE_HOME/flashsampling/tuning.db, else\n"
    "                      $HOME/.cache/flashsampling/tuning.db)\n"
    "  --budget SECONDS    start no new variant after this long (shared by buckets)\n"
    "  --jobs N            parallel NVRTC compiles (default: number of CPUs)\n"
    "  --force             measure again what this GPU measured before\n"
    "  --dry-run           enumerate and compile only; report registers and spills\n"
    "  --arch N            target without a GPU: 80, 86, 89, 90, 100 or 120 (default 90)\n"
    "  --device N          GPU ordinal (default 0)\n"
    "  --filter LIST       only variants whose name contains one of the\n"
    "                      comma-separated substrings of LIST (a list of\n"
    "                      names re-measures just those, e.g. the winners of\n"
    "                      a database after a template change)\n"
    "  --max-variants N    at most N variants per bucket, most promising first\n"
    "  --report FILE       CSV of this run's measurements, and a plot in FILE.svg\n"
    "  --timeout SECONDS   watchdog per variant (default 20)\n"
    "  --mode MODE         the calls timed, and so the winners written: token (sampled,\n"
    "                      per-token noise; the default), group16 (FS_NOISE_GROUP16) or\n"
    "                      greedy (temperature 0); each mode keeps its own winners\n"
    "  --list-models       print the presets and exit\n"
    "  --help              print this and exit\n"
    "\n"
    "filters (show, export):\n"
    "  --model NAME | --shape D=..,V=..   --dtype bf16|fp16   --bucket N\n"
    "  --variant NAME   --device-name NAME   --arch sm_NN\n"
    "  --mode token|group16|greedy   the calls a time is of (FS_TUNE_GREEDY, FS_TUNE_NOISE)\n"
    "\n"
    "Without a GPU (or with --dry-run) fs-tune compiles the space and says that\n"
    "timing needs a GPU.  Measurements are committed one by one: Ctrl-C loses\n"
    "nothing, and a rerun skips what was measured (unless --force).\n"
    "\n"
    "FS_TUNE_WARMUP_MS=<ms> (0..10000) warms each candidate up, back to back, for at\n"
    "least that long before timing it (the clock and power state of sustained\n"
    "decoding; at B = 256 on an H200 ~15% above a burst's times; an experiment,\n"
    "perf-notes 15c).  A run records it with its command line.\n"
    "--mode group16 (or FS_TUNE_NOISE=group16) times each candidate with\n"
    "FS_NOISE_GROUP16, --mode greedy (or FS_TUNE_GREEDY=1) on greedy calls; every\n"
    "candidate is verified per token, greedy and group16 whatever is timed.  Times\n"
    "are stored as modes of their own (show --mode), so such a run adds winners beside\n"
    "the sampled ones in the same database: fs_sample() runs a bucket's greedy winner\n"
    "for calls with temperature 0 and its group16 winner under FS_NOISE_GROUP16 (at\n"
    "B >= 128 on an H200 the greedy winners are the wt family's, perf-notes 19, 20).\n";

/* Prints "fs-tune: <message>" and a hint; returns exit status 2. */
#define bad(...) fs_tools_bad_arg("fs-tune", "(run 'fs-tune --help' for the options)\n", __VA_ARGS__)

static int parse_seconds(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v > 0) || v > 1e9) return -1;
  *out = v;
  return 0;
}

/* "D=4096,V=151936" (either order; fs_tools_parse_shape's rules). */
static int parse_shape(const char *s, int *D, int *V) {
  char why[256];
  if (fs_tools_parse_shape(s, D, V, why, sizeof why))
    return bad("--shape %s: %s", *s ? s : "''", why);
  return 0;
}

static int parse_dtype(const char *s, int *dtype) {
  if (!strcmp(s, "bf16")) *dtype = FS_DTYPE_BF16;
  else if (!strcmp(s, "fp16")) *dtype = FS_DTYPE_FP16;
  else return bad("--dtype %s: the element type must be bf16 or fp16", s);
  return 0;
}

static int parse_model(const char *s, int *D, int *V) {
  const fs_model *m = fs_model_find(s);
  if (!m) return bad("--model %s: not a preset (see fs-tune --list-models)", s);
  *D = m->hidden;
  *V = m->vocab;
  return 0;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* "1,8,64": each batch size becomes its bucket; sorted, without repeats. */
static int parse_batch(const char *s, tune_opts *o) {
  char buf[512];
  int n = 0;
  if (strlen(s) >= sizeof buf) return bad("--batch: the list is too long");
  snprintf(buf, sizeof buf, "%s", s);
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    int b;
    if (fs_tools_parse_int(tok, 1, FS_MAX_BATCH, &b))
      return bad("--batch %s: '%s': batch sizes must be integers in 1..%d", s, tok,
                 FS_MAX_BATCH);
    b = fs_bucket(b);
    int seen = 0;
    for (int i = 0; i < n; i++) seen |= o->buckets[i] == b;
    if (seen) continue;
    if (n == TUNE_MAX_BUCKETS) return bad("--batch %s: at most %d buckets", s, TUNE_MAX_BUCKETS);
    o->buckets[n++] = b;
  }
  if (!n) return bad("--batch '%s': expected a comma-separated list of batch sizes", s);
  qsort(o->buckets, (size_t)n, sizeof *o->buckets, cmp_int);
  o->nbuckets = n;
  return 0;
}

/* mkdir -p of the directory part of `path`. */
static int make_parent_dirs(const char *path) {
  char buf[4096];
  if (strlen(path) >= sizeof buf) return -1;
  snprintf(buf, sizeof buf, "%s", path);
  char *slash = strrchr(buf, '/');
  if (!slash || slash == buf) return 0;
  *slash = 0;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

/* The default database path, or NULL when there is no cache directory to
** put it in. */
static const char *default_db_quiet(char *buf, size_t n) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg) snprintf(buf, n, "%s/flashsampling/tuning.db", xdg);
  else if (home && *home) snprintf(buf, n, "%s/.cache/flashsampling/tuning.db", home);
  else return NULL;
  return buf;
}

/* default_db_quiet, with a message when there is none. */
static const char *default_db(char *buf, size_t n) {
  const char *p = default_db_quiet(buf, n);
  if (!p) fprintf(stderr, "fs-tune: neither XDG_CACHE_HOME nor HOME is set: give --db PATH\n");
  return p;
}

/* ---- tuning options --------------------------------------------------------- */
/* Value of option argv[*i] (advancing *i), or NULL after printing why. */
static const char *value(int argc, char **argv, int *i) {
  if (*i + 1 >= argc) {
    bad("%s: this option needs a value", argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

static int parse_tune(int argc, char **argv, tune_opts *o) {
  const char *model = NULL, *shape = NULL, *mode_arg = NULL;
  int mode = FS_STORE_MODE_TOKEN;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  memset(o, 0, sizeof *o);
  o->dtype = FS_DTYPE_BF16;
  o->jobs = ncpu > 0 ? (int)(ncpu < 256 ? ncpu : 256) : 1;
  o->timeout_s = 20;
  o->cap_s = 2;
  o->argc = argc;
  o->argv = argv;
  for (int b = 1; b <= 256; b *= 2) o->buckets[o->nbuckets++] = b;
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i], *v;
#define VALUE() do { if (!(v = value(argc, argv, &i))) return 2; } while (0)
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
      fputs(usage_text, stdout);
      exit(0);
    } else if (!strcmp(k, "--list-models")) {
      fs_tools_list_models();
      exit(0);
    } else if (!strcmp(k, "--force")) {
      o->force = 1;
    } else if (!strcmp(k, "--dry-run")) {
      o->dry_run = 1;
    } else if (!strcmp(k, "--model")) {
      VALUE();
      if (parse_model(v, &o->D, &o->V)) return 2;
      model = v;
    } else if (!strcmp(k, "--shape")) {
      VALUE();
      if (parse_shape(v, &o->D, &o->V)) return 2;
      shape = v;
    } else if (!strcmp(k, "--batch")) {
      VALUE();
      if (parse_batch(v, o)) return 2;
    } else if (!strcmp(k, "--dtype")) {
      VALUE();
      if (parse_dtype(v, &o->dtype)) return 2;
    } else if (!strcmp(k, "--db")) {
      VALUE();
      if (!*v) return bad("--db '': the path must not be empty");
      o->db_path = v;
    } else if (!strcmp(k, "--budget")) {
      VALUE();
      if (parse_seconds(v, &o->budget_s))
        return bad("--budget %s: the budget must be a number of seconds > 0", v);
    } else if (!strcmp(k, "--timeout")) {
      VALUE();
      if (parse_seconds(v, &o->timeout_s))
        return bad("--timeout %s: the watchdog must be a number of seconds > 0", v);
    } else if (!strcmp(k, "--jobs")) {
      VALUE();
      if (fs_tools_parse_int(v, 1, 256, &o->jobs))
        return bad("--jobs %s: the number of compile threads must be in 1..256", v);
    } else if (!strcmp(k, "--max-variants")) {
      VALUE();
      if (fs_tools_parse_int(v, 1, 1000000, &o->max_variants))
        return bad("--max-variants %s: must be an integer >= 1", v);
    } else if (!strcmp(k, "--arch")) {
      VALUE();
      const char *a = strncmp(v, "sm_", 3) ? v : v + 3;
      if (fs_tools_parse_int(a, 0, 1000, &o->arch) ||
          (o->arch != 80 && o->arch != 86 && o->arch != 89 && o->arch != 90 &&
           o->arch != 100 && o->arch != 120))
        return bad("--arch %s: the target must be one of 80, 86, 89, 90, 100, 120", v);
    } else if (!strcmp(k, "--device")) {
      VALUE();
      if (fs_tools_parse_int(v, 0, 1023, &o->device))
        return bad("--device %s: the GPU ordinal must be an integer >= 0", v);
    } else if (!strcmp(k, "--filter")) {
      VALUE();
      if (!v[strspn(v, ",")] || strpbrk(v, " \t\n"))
        return bad("--filter '%s': give one or more variant-name substrings, "
                   "comma-separated, without spaces", v);
      o->filter = v;
    } else if (!strcmp(k, "--report")) {
      VALUE();
      if (!*v) return bad("--report '': the path must not be empty");
      o->report = v;
    } else if (!strcmp(k, "--mode")) {
      VALUE();
      if ((mode = fs_store_mode_parse(v)) < 0)
        return bad("--mode %s: the calls timed are token (sampled, per-token noise), group16 "
                   "(sampled, FS_NOISE_GROUP16) or greedy (temperature 0)", v);
      mode_arg = v;
    } else if (k[0] == '-') {
      return bad("%s: unknown option", k);
    } else {
      return bad("'%s': unexpected argument (subcommands: list, show, export, import, merge)",
                 k);
    }
#undef VALUE
  }
  const char *wu = getenv("FS_TUNE_WARMUP_MS");
  if (wu && fs_tools_parse_int(wu, 0, 10000, &o->warmup_ms))
    return bad("FS_TUNE_WARMUP_MS=%s: the warm-up must be a whole number of milliseconds "
               "in 0..10000", wu);
  int noise = FS_NOISE_TOKEN, greedy = 0;
  const char *nz = getenv("FS_TUNE_NOISE");
  if (nz && *nz && fs_tools_parse_noise(nz, &noise))
    return bad("FS_TUNE_NOISE=%s: the noise timed is token or group16", nz);
  const char *gr = getenv("FS_TUNE_GREEDY");
  if (gr && *gr && fs_tools_parse_int(gr, 0, 1, &greedy))
    return bad("FS_TUNE_GREEDY=%s: must be 0 (time sampled calls, the default) or 1 (time "
               "greedy calls)", gr);
  /* the variables' non-default values name a mode; --mode must agree */
  if (greedy && noise == FS_NOISE_GROUP16)
    return bad("FS_TUNE_GREEDY=1 and FS_TUNE_NOISE=group16: a run times one kind of call "
               "(--mode greedy or --mode group16)");
  const int env_mode = greedy ? FS_STORE_MODE_GREEDY
                       : noise == FS_NOISE_GROUP16 ? FS_STORE_MODE_GROUP16
                                                   : FS_STORE_MODE_TOKEN;
  if (mode_arg && env_mode != FS_STORE_MODE_TOKEN && mode != env_mode)
    return bad("--mode %s and %s disagree: give one of them", mode_arg,
               greedy ? "FS_TUNE_GREEDY=1" : "FS_TUNE_NOISE=group16");
  o->mode = mode_arg ? mode : env_mode;
  if (model && shape) return bad("--model %s and --shape %s: give one of them", model, shape);
  if (!model && !shape) {
    parse_model("qwen3-8b", &o->D, &o->V);
    model = "qwen3-8b";
  }
  o->model = model;
  return 0;
}

/* ---- database subcommands ------------------------------------------------------ */
typedef struct db_args {
  const char *db;
  const char *pos[64];        /* positional arguments */
  int npos;
  fs_store_filter f;
  char arch[32];
} db_args;

static int parse_db_args(int argc, char **argv, int allow_filters, db_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 2; i < argc; i++) {
    const char *k = argv[i], *v;
#define VALUE() do { if (!(v = value(argc, argv, &i))) return 2; } while (0)
    if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
      fputs(usage_text, stdout);
      exit(0);
    } else if (!strcmp(k, "--db")) {
      VALUE();
      if (!*v) return bad("--db '': the path must not be empty");
      a->db = v;
    } else if (allow_filters && !strcmp(k, "--model")) {
      VALUE();
      if (parse_model(v, &a->f.hidden, &a->f.vocab)) return 2;
    } else if (allow_filters && !strcmp(k, "--shape")) {
      VALUE();
      if (parse_shape(v, &a->f.hidden, &a->f.vocab)) return 2;
    } else if (allow_filters && !strcmp(k, "--dtype")) {
      VALUE();
      if (parse_dtype(v, &a->f.dtype)) return 2;
    } else if (allow_filters && !strcmp(k, "--bucket")) {
      VALUE();
      if (fs_tools_parse_int(v, 1, FS_MAX_BATCH, &a->f.bucket))
        return bad("--bucket %s: a bucket is an integer in 1..%d", v, FS_MAX_BATCH);
    } else if (allow_filters && !strcmp(k, "--mode")) {
      VALUE();
      if (fs_store_mode_parse(v) < 0)
        return bad("--mode %s: the mode is token, group16 or greedy", v);
      a->f.mode = v;
    } else if (allow_filters && !strcmp(k, "--variant")) {
      VALUE();
      a->f.variant = v;
    } else if (allow_filters && !strcmp(k, "--device-name")) {
      VALUE();
      a->f.device_name = v;
    } else if (allow_filters && !strcmp(k, "--arch")) {
      VALUE();
      int n;
      if (fs_tools_parse_int(strncmp(v, "sm_", 3) ? v : v + 3, 1, 1000, &n))
        return bad("--arch %s: expected sm_NN or NN (e.g. sm_90)", v);
      snprintf(a->arch, sizeof a->arch, "sm_%d", n);
      a->f.arch = a->arch;
    } else if (k[0] == '-' && k[1]) {
      return bad("%s %s: unknown option", argv[1], k);
    } else {
      if (a->npos == (int)(sizeof a->pos / sizeof *a->pos))
        return bad("%s: too many files", argv[1]);
      a->pos[a->npos++] = k;
    }
#undef VALUE
  }
  return 0;
}

/* Opens the database for reading; *missing is set (and FS_OK returned with
** no store) when the file does not exist. */
static int open_read(const char *path, fs_store **st, int *missing) {
  char err[1024];
  *st = NULL;
  *missing = access(path, F_OK) != 0;
  if (*missing) return 0;
  if (fs_store_open(path, FS_STORE_READONLY | FS_STORE_QUICK_CHECK, st, err, sizeof err)) {
    fprintf(stderr, "fs-tune: %s\n", err);
    return 1;
  }
  return 0;
}

static int open_write(const char *path, fs_store **st) {
  char err[1024];
  *st = NULL;
  if (make_parent_dirs(path)) {
    fprintf(stderr, "fs-tune: cannot create the directory of %s: %s\n", path, strerror(errno));
    return 1;
  }
  if (fs_store_open(path, FS_STORE_CREATE, st, err, sizeof err)) {
    fprintf(stderr, "fs-tune: %s\n", err);
    return 1;
  }
  return 0;
}

typedef struct print_ctx {
  int n;
  char *buf;
  size_t cap;
} print_ctx;

static void print_line(print_ctx *p, int (*fmt)(const void *, char *, size_t), const void *x) {
  int need = fmt(x, p->buf, p->cap);
  if (need >= 0 && (size_t)need >= p->cap) {
    char *nb = realloc(p->buf, (size_t)need + 1);
    if (nb) {
      p->buf = nb;
      p->cap = (size_t)need + 1;
      fmt(x, p->buf, p->cap);
    }
  }
  printf("  %s\n", p->buf);
  p->n++;
}

static int fmt_run(const void *x, char *b, size_t n) { return fs_store_format_run(x, b, n); }
static int fmt_choice(const void *x, char *b, size_t n) { return fs_store_format_choice(x, b, n); }
static int fmt_meas(const void *x, char *b, size_t n) {
  return fs_store_format_measurement(x, b, n);
}
static int on_run(void *arg, const fs_store_run *r) {
  print_line(arg, fmt_run, r);
  return 0;
}
static int on_choice(void *arg, const fs_store_choice *c) {
  print_line(arg, fmt_choice, c);
  return 0;
}
static int on_meas(void *arg, const fs_store_run *r, const fs_store_measurement *m) {
  (void)r;
  print_line(arg, fmt_meas, m);
  return 0;
}

static int cmd_list_show(int argc, char **argv, int show) {
  db_args a;
  char dbbuf[4096];
  fs_store *st;
  int missing, rc = parse_db_args(argc, argv, show, &a);
  if (rc) return rc;
  if (a.npos) return bad("%s: unexpected argument '%s'", argv[1], a.pos[0]);
  if (!a.db && !(a.db = default_db(dbbuf, sizeof dbbuf))) return 1;
  if (open_read(a.db, &st, &missing)) return 1;
  if (missing) {
    printf("no tuning database at %s yet: nothing is tuned\n", a.db);
    return 0;
  }
  print_ctx p = {0, malloc(512), 512};
  int s = FS_OK;
  if (!p.buf) return 1;
  printf("tuning database %s (schema version %d)\n", a.db, fs_store_file_version(st));
  if (show) {
    printf("measurements:\n");
    s = fs_store_list_measurements(st, &a.f, on_meas, &p);
    if (!s && !p.n) printf("  (none)\n");
  } else {
    printf("runs:\n");
    s = fs_store_list_runs(st, on_run, &p);
    if (!s && !p.n) printf("  (none)\n");
    p.n = 0;
    if (!s) {
      printf("winners:\n");
      s = fs_store_list_winners(st, NULL, on_choice, &p);
      if (!s && !p.n) printf("  (none)\n");
    }
  }
  if (s) fprintf(stderr, "fs-tune: %s\n", fs_store_errmsg(st));
  free(p.buf);
  fs_store_close(st);
  return s ? 1 : 0;
}

static void print_stats(const char *what, const char *file, const fs_store_transfer_stats *t) {
  printf("%s %s: %lld run(s), %lld measurement(s), %lld cubin(s) written", what, file,
         (long long)t->runs, (long long)t->measurements, (long long)t->cubins);
  if (t->winners || t->missing_cubins)
    printf("; %lld winner(s), %lld without a cubin", (long long)t->winners,
           (long long)t->missing_cubins);
  printf("\n");
}

static int cmd_export(int argc, char **argv) {
  db_args a;
  char dbbuf[4096];
  fs_store *st = NULL;
  int missing, rc = parse_db_args(argc, argv, 1, &a);
  if (rc) return rc;
  if (a.npos != 1) return bad("export: expected one output file (export OUT.db)");
  if (!access(a.pos[0], F_OK))
    return bad("export %s: the output file exists; choose a new name", a.pos[0]);
  if (!a.db && !(a.db = default_db(dbbuf, sizeof dbbuf))) return 1;
  if (open_read(a.db, &st, &missing)) return 1;
  if (missing) { /* nothing to export, and no empty database left behind */
    fprintf(stderr, "fs-tune: export: no tuning database at %s: nothing to export\n", a.db);
    return 1;
  }
  fs_store_transfer_stats t;
  memset(&t, 0, sizeof t);
  int s = fs_store_export(st, a.pos[0], &a.f, &t);
  if (s) fprintf(stderr, "fs-tune: %s\n", fs_store_errmsg(st));
  else print_stats("exported to", a.pos[0], &t);
  fs_store_close(st);
  return s ? 1 : 0;
}

static int cmd_merge(int argc, char **argv, int import) {
  db_args a;
  char dbbuf[4096];
  fs_store *st = NULL;
  int rc = parse_db_args(argc, argv, 0, &a);
  if (rc) return rc;
  if (import && a.npos != 1) return bad("import: expected one input file (import IN.db)");
  if (!import && a.npos < 1) return bad("merge: expected one or more input files");
  if (!a.db && !(a.db = default_db(dbbuf, sizeof dbbuf))) return 1;
  /* every input opens as a tuning database before the target is created */
  for (int i = 0; i < a.npos; i++) {
    fs_store *in = NULL;
    int missing;
    if (access(a.pos[i], R_OK))
      return fprintf(stderr, "fs-tune: %s %s: %s\n", argv[1], a.pos[i], strerror(errno)), 1;
    if (open_read(a.pos[i], &in, &missing)) return 1;
    fs_store_close(in);
  }
  if (open_write(a.db, &st)) return 1;
  for (int i = 0; i < a.npos && !rc; i++) {
    fs_store_transfer_stats t;
    memset(&t, 0, sizeof t);
    if (fs_store_merge_file(st, a.pos[i], &t)) {
      fprintf(stderr, "fs-tune: %s\n", fs_store_errmsg(st));
      rc = 1;
    } else {
      print_stats("merged", a.pos[i], &t);
    }
  }
  fs_store_close(st);
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "__worker")) {
    int in, out, dev;
    if (argc != 5 || fs_tools_parse_int(argv[2], 0, 1 << 20, &in) ||
        fs_tools_parse_int(argv[3], 0, 1 << 20, &out) || fs_tools_parse_int(argv[4], 0, 1023, &dev))
      return bad("__worker: internal use only");
    return tune_worker_main(in, out, dev);
  }
  if (argc >= 2 && (!strcmp(argv[1], "list") || !strcmp(argv[1], "show")))
    return cmd_list_show(argc, argv, !strcmp(argv[1], "show"));
  if (argc >= 2 && !strcmp(argv[1], "export")) return cmd_export(argc, argv);
  if (argc >= 2 && (!strcmp(argv[1], "import") || !strcmp(argv[1], "merge")))
    return cmd_merge(argc, argv, !strcmp(argv[1], "import"));

  tune_opts o;
  char dbbuf[4096];
  int rc = parse_tune(argc, argv, &o);
  if (rc) return rc;
  if (!o.db_path && !o.dry_run && !(o.db_path = default_db(dbbuf, sizeof dbbuf))) return 1;
  /* before any work: --report must not overwrite a database (a dry run's
  ** report is checked against the default one too) */
  if (o.report && (rc = tune_report_check(o.report, o.db_path ? o.db_path
                                                  : default_db_quiet(dbbuf, sizeof dbbuf))))
    return rc;
  if (!o.db_path) o.db_path = "(none: dry run)";
  else if (!o.dry_run && make_parent_dirs(o.db_path)) {
    fprintf(stderr, "fs-tune: cannot create the directory of %s: %s\n", o.db_path,
            strerror(errno));
    return 1;
  }
  return tune_main(&o);
}
