/*
** tune_run.c: one fs-tune session (tune_main): find the GPU (through the
** child), build the plan, then either a dry run (compile everything, report
** resources) or the tuning proper, bucket by bucket:
**
**   for each bucket (its share of --budget):
**     SETUP the child: shape, bucket, the default's cubin -> the oracle
**     for each variant, most promising first:
**       skip it if this device/arch/revision already measured it (--force
**       retunes); wait for its compile (the pool runs ahead); reject compile
**       failures and spills; store its cubin; JOB the child: verify, time;
**       write the measurement to the store at once (its own transaction)
**     a child that dies or stalls: the variant is run-failed, a new child
**     is set up for the rest
**
** SIGINT stops between variants (the one in flight is killed and simply not
** recorded: a rerun measures it), finishes the run record and prints what
** was done.
*/
#include "tune.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SETUP_TIMEOUT_S 600.0 /* data generation + CPU reference + probe */
#define HELLO_TIMEOUT_S 120.0

void tune_add_row(tune_session *s, const tune_row *r) {
  if (s->nrows == s->caprows) {
    int cap = s->caprows ? 2 * s->caprows : 256;
    tune_row *p = realloc(s->rows, (size_t)cap * sizeof *p);
    if (!p) {
      fprintf(stderr, "fs-tune: out of memory\n");
      exit(1);
    }
    s->rows = p;
    s->caprows = cap;
  }
  s->rows[s->nrows++] = *r;
}

void tune_nvrtc_string(char *buf, size_t n) {
  int v = fs_nvrtc_version();
  if (v < 0) snprintf(buf, n, "unknown");
  else snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
}

static const char *dtype_name(int dtype) { return dtype == FS_DTYPE_BF16 ? "bf16" : "fp16"; }

/* ---- progress ------------------------------------------------------------ */
static void progress(tune_session *s, int b, int done, int total, const char *name,
                     const tune_row *r, const char *msg) {
  const int tty = isatty(1);
  const char *oc = r ? fs_store_outcome_name(r->outcome) : "skipped";
  if (tty) {
    char bar[21];
    int fill = total ? done * 20 / total : 20;
    for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : '.';
    bar[20] = 0;
    printf("\r\033[K[%s] B=%-3d %d/%d %.60s", bar, s->plan.buckets[b], done, total, name);
    if (r && r->outcome == FS_STORE_OUTCOME_OK) printf(" %.2f us", r->median_us);
    else printf(" %s", oc ? oc : "?");
    fflush(stdout);
    return;
  }
  printf("B=%d [%d/%d] %s %s", s->plan.buckets[b], done, total, name, oc ? oc : "?");
  if (r && r->outcome == FS_STORE_OUTCOME_OK)
    printf(" %.3f us +-%.3f (n=%d)", r->median_us, r->spread_us, r->samples);
  if (msg && *msg) printf(": %.300s", msg);
  printf("\n");
  fflush(stdout);
}

/* ---- dry run ----------------------------------------------------------------- */
static int dry_run(tune_session *s, const char *why_no_gpu) {
  const tune_opts *o = s->o;
  tune_plan *pl = &s->plan;
  tune_pool *pool = NULL;
  if (tune_pool_start(&pool, pl, o->jobs)) {
    fprintf(stderr, "fs-tune: out of memory starting %d compile threads\n", o->jobs);
    return 1;
  }
  printf("compiling %d sources for %s (%s) with %d threads\n", pl->ncompile, pl->target,
         dtype_name(o->dtype), o->jobs);
  char *seen = calloc((size_t)pl->nitems, 1);
  int nvar = 0, nok = 0, nspill = 0, nfail = 0;
  const double t0 = fs_tools_now();
  for (int b = 0; b < pl->nbuckets && seen && !tune_interrupted(); b++) {
    for (int k = -1; k < pl->norder[b] && !tune_interrupted(); k++) {
      const int i = k < 0 ? pl->deflt[b] : pl->order[b][k];
      if (seen[i]) continue;
      seen[i] = 1;
      nvar++;
      tune_item *it = &pl->items[i], *src = tune_pool_wait(pool, i);
      const int oracle_only = k < 0 && !tune_filter_match(o->filter, it->v.name);
      tune_row r = {0, i, -1, -1, -1, -1, -1, src->registers, src->spills};
      if (src->status) {
        nfail++;
        r.outcome = FS_STORE_OUTCOME_COMPILE_FAILED;
        printf("  FAILED   %s: %s\n", it->v.name, src->err);
        if (src->log) printf("%.2000s\n", src->log);
      } else {
        if (src->spills > 0) {
          nspill++;
          r.outcome = FS_STORE_OUTCOME_SPILLS;
        } else {
          nok++;
        }
        printf("  %-8s %s  regs=%d spills=%d stack=%d smem=%d  %.2f s%s%s\n",
               src->spills > 0 ? "SPILLS" : "compiled", it->v.name, src->registers,
               src->spills, src->stack, it->v.smem, src->seconds,
               src != it ? " (shared source)" : "", oracle_only ? " (oracle only)" : "");
      }
      tune_add_row(s, &r);
    }
  }
  tune_pool_stop(pool);
  free(seen);
  printf("\n%d variants for %s %s (D=%d, V=%d, %d bucket(s)), %d distinct sources, "
         "compiled in %.1f s:\n  %d ok, %d rejected (register spills), %d failed to compile\n",
         nvar, pl->target, dtype_name(o->dtype), o->D, o->V, pl->nbuckets, pl->ncompile,
         (fs_tools_now() - t0) / 1e3, nok, nspill, nfail);
  printf("timing needs a GPU: no variants were timed (%s)\n", why_no_gpu);
  if (o->report && tune_report_files(s, o->report)) return 1;
  return tune_interrupted() ? 130 : 0;
}

/* ---- tuning ------------------------------------------------------------------- */
/* Writes one outcome to the store and the session.  Returns 0 or -1 (store
** failure: message printed). */
static int record(tune_session *s, int b, const tune_item *it, const tune_item *src, int outcome,
                  const tune_msg *res, double floor_us, const char *message) {
  fs_store_measurement m;
  char pbuf[FS_STORE_PARAMS_MAX + 1];
  memset(&m, 0, sizeof m);
  snprintf(pbuf, sizeof pbuf, "%s", it->v.params);
  m.dtype = s->o->dtype;
  m.hidden = s->o->D;
  m.vocab = s->o->V;
  m.bucket = s->plan.buckets[b];
  m.mode = s->o->mode;
  m.variant = it->v.name;
  m.params = pbuf;
  m.source_hash = src->hash[0] ? src->hash : NULL;
  m.outcome = outcome;
  m.median_us = res && outcome == FS_STORE_OUTCOME_OK ? res->median_us : -1;
  m.spread_us = res && outcome == FS_STORE_OUTCOME_OK ? res->spread_us : -1;
  m.samples = res && outcome == FS_STORE_OUTCOME_OK ? res->samples : -1;
  m.floor_us = floor_us;
  m.registers = src->registers >= 0 ? src->registers : res ? res->registers : -1;
  /* A compile whose log reported no registers reported no spills either. */
  m.spills = src->from_cache ? 0 : src->registers < 0 ? -1 : src->spills;
  m.smem_bytes = it->v.smem;
  m.message = message && *message ? message : NULL;
  int st = fs_store_add_measurement(s->store, s->run_id, &m, NULL);
  if (st) {
    fprintf(stderr, "\nfs-tune: %s\n", fs_store_errmsg(s->store));
    return -1;
  }
  tune_row r = {m.bucket, (int)(it - s->plan.items), outcome, m.median_us, m.spread_us,
                floor_us, m.samples, m.registers, m.spills};
  tune_add_row(s, &r);
  tune_bucket_sum *sum = &s->sum[b];
  sum->tried++;
  if (outcome == FS_STORE_OUTCOME_OK) sum->ok++;
  else if (outcome == FS_STORE_OUTCOME_WRONG) sum->wrong++;
  else if (outcome == FS_STORE_OUTCOME_RUN_FAILED) sum->failed++;
  else sum->rejected++;
  return 0;
}

static int has_row(const tune_session *s, int bucket, int item) {
  for (int i = 0; i < s->nrows; i++)
    if (s->rows[i].bucket == bucket && s->rows[i].item == item) return 1;
  return 0;
}

/* Makes sure a child is running and set up for bucket b.  Returns 0; -1
** with why (the bucket cannot be tuned; a default that disagrees with the
** CPU reference is recorded as wrong); -3 when the store failed (message
** printed); or TUNE_CHILD_INTERRUPTED. */
static int ensure_child(tune_session *s, tune_child *c, int b, int *set_up, tune_pool *pool,
                        tune_msg *ready, char *why, size_t n) {
  const tune_opts *o = s->o;
  if (c->pid > 0 && *set_up) return 0;
  if (c->pid <= 0) {
    *set_up = 0;
    int r = tune_child_spawn(c, o->device, HELLO_TIMEOUT_S, why, n);
    if (r) return r == TUNE_CHILD_INTERRUPTED || tune_interrupted() ? TUNE_CHILD_INTERRUPTED : -1;
    if (c->hello.status) {
      snprintf(why, n, "the worker has no GPU now: %.900s", c->hello.message);
      tune_child_quit(c);
      return -1;
    }
  }
  const int d = s->plan.deflt[b];
  tune_item *src = tune_pool_wait(pool, d);
  if (src->status || src->spills > 0) {
    snprintf(why, n, "the built-in default %s %s", s->plan.items[d].v.name,
             src->status ? "failed to compile" : "spills registers");
    return -1;
  }
  tune_msg m;
  memset(&m, 0, sizeof m);
  m.magic = TUNE_MSG_MAGIC;
  m.type = TUNE_MSG_SETUP;
  m.dtype = o->dtype;
  m.hidden = o->D;
  m.vocab = o->V;
  m.batch = s->plan.buckets[b];
  m.variant = s->plan.items[d].v;
  m.cubin_size = src->cubin_size;
  int r = tune_child_call(c, &m, src->cubin, ready, SETUP_TIMEOUT_S, why, n);
  if (r) {
    if (r == TUNE_CHILD_INTERRUPTED || tune_interrupted()) return TUNE_CHILD_INTERRUPTED;
    size_t l = strlen(why);
    snprintf(why + l, n - l, " while setting up B=%d", m.batch);
    return -1;
  }
  if (ready->status) {
    snprintf(why, n, "setting up B=%d with the built-in default %s: %.700s", m.batch,
             m.variant.name, ready->message);
    if (ready->fatal) tune_child_kill(c);
    if (ready->outcome == FS_STORE_OUTCOME_WRONG && !has_row(s, m.batch, d) &&
        record(s, b, &s->plan.items[d], src, FS_STORE_OUTCOME_WRONG, NULL, ready->floor_us,
               ready->message))
      return -3;
    return -1;
  }
  *set_up = 1;
  return 0;
}

/* Loads cubins of this arch, NVRTC version and source from the store, so
** that those variants skip NVRTC. */
static int preload_cache(tune_session *s) {
  int n = 0;
  for (int k = 0; k < s->plan.ncompile; k++) {
    tune_item *it = &s->plan.items[s->plan.compile[k]];
    void *data = NULL;
    size_t size = 0;
    if (fs_store_get_cubin(s->store, it->v.name, s->arch_str, s->nvrtc, it->hash, &data, &size) ||
        !data)
      continue;
    it->cubin = malloc(size);
    if (it->cubin) {
      memcpy(it->cubin, data, size);
      it->cubin_size = size;
      it->state = TUNE_DONE;
      it->from_cache = 1;
      it->stored = 1;
      it->spills = 0; /* only cubins that do not spill are stored */
      n++;
    }
    fs_store_free(data);
  }
  return n;
}

static int tune_bucket(tune_session *s, tune_child *c, tune_pool *pool, int b,
                       double budget_end) {
  const tune_opts *o = s->o;
  tune_plan *pl = &s->plan;
  tune_bucket_sum *sum = &s->sum[b];
  const double t0 = fs_tools_now();
  /* The bucket's share of what is left of the budget counts from the end of
  ** its set-up (data, oracle), so one-time costs do not eat the first
  ** bucket's share; before that only the whole budget limits it. */
  double deadline = budget_end;
  int set_up = 0, rc = 0, shared = 0;
  tune_msg ready, res;
  char why[1024];
  memset(&ready, 0, sizeof ready);
  ready.floor_us = -1;
  for (int k = 0; k < pl->norder[b]; k++) {
    const int i = pl->order[b][k];
    tune_item *it = &pl->items[i];
    if (tune_interrupted()) break;
    if (budget_end > 0 && fs_tools_now() > deadline) {
      sum->unreached += pl->norder[b] - k;
      break;
    }
    int prev = -1;
    if (!o->force &&
        fs_store_has_measurement(s->store, s->run_id, o->dtype, o->D, o->V, pl->buckets[b],
                                 o->mode, it->v.name, &prev) == FS_OK && prev >= 0) {
      sum->skipped++;
      if (!isatty(1)) progress(s, b, k + 1, pl->norder[b], it->v.name, NULL, "measured before");
      continue;
    }
    tune_item *src = tune_pool_wait(pool, i);
    if (src->status) {
      char msg[600];
      snprintf(msg, sizeof msg, "%s%s%.300s", src->err, src->log ? "\n" : "",
               src->log ? src->log : "");
      if (record(s, b, it, src, FS_STORE_OUTCOME_COMPILE_FAILED, NULL, ready.floor_us, msg))
        return -1;
      progress(s, b, k + 1, pl->norder[b], it->v.name, &s->rows[s->nrows - 1], src->err);
      continue;
    }
    if (src->spills > 0) {
      snprintf(why, sizeof why, "%d bytes of register spills", src->spills);
      if (record(s, b, it, src, FS_STORE_OUTCOME_SPILLS, NULL, ready.floor_us, why)) return -1;
      progress(s, b, k + 1, pl->norder[b], it->v.name, &s->rows[s->nrows - 1], why);
      continue;
    }
    if (!it->stored) {
      if (fs_store_put_cubin(s->store, it->v.name, s->arch_str, s->nvrtc, src->hash, src->cubin,
                             src->cubin_size)) {
        fprintf(stderr, "\nfs-tune: %s\n", fs_store_errmsg(s->store));
        return -1;
      }
      it->stored = 1;
    }
    int r = ensure_child(s, c, b, &set_up, pool, &ready, why, sizeof why);
    if (r == TUNE_CHILD_INTERRUPTED) break;
    if (r == -3) return -1;
    if (r) {
      fprintf(stderr, "%sfs-tune: B=%d skipped: %s\n", isatty(1) ? "\n" : "", pl->buckets[b],
              why);
      sum->unreached += pl->norder[b] - k;
      break;
    }
    if (budget_end > 0 && !shared) {
      const double now = fs_tools_now();
      deadline = now + (budget_end > now ? budget_end - now : 0) / (pl->nbuckets - b);
      shared = 1;
    }
    sum->floor_us = ready.floor_us;
    tune_msg job;
    memset(&job, 0, sizeof job);
    job.magic = TUNE_MSG_MAGIC;
    job.type = TUNE_MSG_JOB;
    job.cap_s = o->cap_s;
    job.warmup_ms = o->warmup_ms;
    job.mode = o->mode;
    job.variant = it->v;
    job.cubin_size = src->cubin_size;
    const double limit_s = o->timeout_s + o->cap_s + o->warmup_ms / 1e3;
    r = tune_child_call(c, &job, src->cubin, &res, limit_s, why, sizeof why);
    /* a worker that died while we were being interrupted (a signal to the
    ** whole group) is no verdict on the variant: not recorded, a rerun
    ** measures it */
    if (r == TUNE_CHILD_INTERRUPTED || (r && tune_interrupted())) break;
    const char *msg = res.message;
    int outcome = res.outcome;
    if (r) { /* crashed or hung: the child is gone */
      char m2[sizeof why];
      snprintf(m2, sizeof m2, "the worker died or stalled (limit %.0f s): %.900s", limit_s,
               why);
      memcpy(why, m2, sizeof why);
      msg = why;
      outcome = FS_STORE_OUTCOME_RUN_FAILED;
      set_up = 0;
    } else if (res.fatal) {
      tune_child_kill(c); /* its CUDA context is unusable */
      set_up = 0;
    }
    if (record(s, b, it, src, outcome, r ? NULL : &res, ready.floor_us, msg)) return -1;
    progress(s, b, k + 1, pl->norder[b], it->v.name, &s->rows[s->nrows - 1], msg);
  }
  sum->seconds = (fs_tools_now() - t0) / 1e3;
  if (isatty(1)) printf("\r\033[K");
  printf("B=%d: %d measured (%d ok, %d wrong, %d run-failed, %d rejected), %d measured "
         "before, %d not reached, %.1f s\n",
         pl->buckets[b], sum->tried, sum->ok, sum->wrong, sum->failed, sum->rejected,
         sum->skipped, sum->unreached, sum->seconds);
  return rc;
}

/* Appends printf output to the NUL-terminated buf of n bytes (truncating). */
static void append(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t n, const char *fmt, ...) {
  const size_t l = strlen(buf);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + l, n - l, fmt, ap);
  va_end(ap);
}

static int gpu_run(tune_session *s, tune_child *c) {
  const tune_opts *o = s->o;
  char host[256] = "", cmd[2048] = "";
  gethostname(host, sizeof host - 1);
  for (int i = 0; i < o->argc; i++) append(cmd, sizeof cmd, "%s%s", i ? " " : "", o->argv[i]);
  /* settings that change what is measured stay with the run */
  if (o->warmup_ms > 0) append(cmd, sizeof cmd, " (FS_TUNE_WARMUP_MS=%d)", o->warmup_ms);
  if (o->mode) append(cmd, sizeof cmd, " (mode %s)", fs_store_mode_name(o->mode));
  fs_store_run run;
  memset(&run, 0, sizeof run);
  run.device_name = s->device_name;
  run.arch = s->arch_str;
  run.sm_count = s->sm_count;
  run.driver_version = s->driver_version;
  run.nvrtc_version = s->nvrtc;
  run.generator_rev = s->plan.revision;
  run.host = host;
  run.command_line = cmd;
  if (fs_store_begin_run(s->store, &run, &s->run_id)) {
    fprintf(stderr, "fs-tune: %s\n", fs_store_errmsg(s->store));
    return 1;
  }
  const int cached = preload_cache(s);
  tune_pool *pool = NULL;
  if (tune_pool_start(&pool, &s->plan, o->jobs)) {
    fprintf(stderr, "fs-tune: out of memory starting %d compile threads\n", o->jobs);
    return 1;
  }
  printf("tuning %s D=%d V=%d on %s (%s, %d SMs), %d bucket(s), database %s\n"
         "%d distinct sources (%d cubins from the database, the rest compiled with %d "
         "threads), generator %s\n",
         dtype_name(o->dtype), o->D, o->V, s->device_name, s->arch_str, s->sm_count,
         s->plan.nbuckets, o->db_path, s->plan.ncompile, cached, o->jobs, s->plan.revision);
  const double budget_end = o->budget_s > 0 ? s->t0 + o->budget_s * 1e3 : 0;
  int rc = 0;
  for (int b = 0; b < s->plan.nbuckets && !rc && !tune_interrupted(); b++)
    if (tune_bucket(s, c, pool, b, budget_end)) rc = 1;
  tune_pool_stop(pool);
  tune_child_quit(c);
  if (tune_interrupted()) {
    s->interrupted = 1;
    printf("\ninterrupted: stopping; what was measured is in %s\n", o->db_path);
  }
  if (fs_store_finish_run(s->store, s->run_id))
    fprintf(stderr, "fs-tune: %s\n", fs_store_errmsg(s->store));
  tune_report_table(s);
  if (o->report && tune_report_files(s, o->report)) rc = 1;
  if (!rc && s->interrupted) rc = 130;
  return rc;
}

/* Asks the child for the GPU.  Fills s's device fields and *arch (the
** generator arch) when there is one; returns 0 and sets *no_gpu to the
** reason when there is none; or an exit status. */
static int find_gpu(tune_session *s, tune_child *c, int *arch, const char **no_gpu, char *why,
                    size_t n) {
  const tune_opts *o = s->o;
  int r = tune_child_spawn(c, o->device, HELLO_TIMEOUT_S, why, n);
  if (r == TUNE_CHILD_INTERRUPTED) return 130;
  if (r) {
    fprintf(stderr, "fs-tune: the GPU worker did not start: %s\n", why);
    if (!o->dry_run) return 1;
    *no_gpu = "the GPU worker did not start";
    return 0;
  }
  if (c->hello.status) {
    tune_child_quit(c);
    /* a GPU that is not there is a bad argument; no driver or no GPU at all
    ** (FS_NO_DEVICE) leaves compiling */
    if (c->hello.status == FS_INVALID_ARGUMENT) {
      fprintf(stderr, "fs-tune: --device %d: no such GPU (%.900s)\n(run 'fs-tune --help' for "
              "the options)\n", o->device, c->hello.message);
      return 2;
    }
    snprintf(why, n, "%.900s", c->hello.message);
    *no_gpu = why;
    return 0;
  }
  snprintf(s->device_name, sizeof s->device_name, "%s", c->hello.device_name);
  snprintf(s->arch_str, sizeof s->arch_str, "sm_%d", c->hello.arch);
  s->sm_count = c->hello.sm_count;
  s->driver_version = c->hello.driver_version;
  const int ga = fs_target_arch(c->hello.arch);
  if (!ga) {
    fprintf(stderr, "fs-tune: %s is sm_%d: no kernels are generated for it\n", s->device_name,
            c->hello.arch);
    return 1;
  }
  if (*arch && *arch != ga) {
    fprintf(stderr, "fs-tune: --arch %d: this GPU (%s) runs sm_%d kernels; --arch picks the "
            "target of a --dry-run without a GPU\n", *arch, s->device_name, ga);
    return 2;
  }
  *arch = ga;
  return 0;
}

int tune_main(const tune_opts *o) {
  tune_session S, *s = &S;
  tune_child c;
  char why[1024] = "", err[1024];
  const char *no_gpu = NULL;
  int rc = 1, arch = o->arch;
  memset(s, 0, sizeof *s);
  memset(&c, 0, sizeof c);
  s->o = o;
  s->t0 = fs_tools_now();
  tune_signals_install();
  tune_nvrtc_string(s->nvrtc, sizeof s->nvrtc);

  /* The database first: a damaged one is reported before any work. */
  if (!o->dry_run && fs_store_open(o->db_path, FS_STORE_CREATE, &s->store, err, sizeof err)) {
    fprintf(stderr, "fs-tune: %s\n", err);
    return 1;
  }
  if (o->dry_run && o->arch) no_gpu = "--dry-run";
  else if ((rc = find_gpu(s, &c, &arch, &no_gpu, why, sizeof why)) != 0) goto done;
  const int have_gpu = !no_gpu;
  if (!arch) arch = 90;
  if (!have_gpu && !o->dry_run) printf("no usable GPU (%s): compiling only\n", no_gpu);
  if (have_gpu && o->dry_run) {
    tune_child_quit(&c);
    no_gpu = "--dry-run";
  }
  int st = fs_gen_open(&s->gen, err, sizeof err);
  if (!st) st = tune_plan_build(&s->plan, s->gen, arch, o, err, sizeof err);
  if (st) {
    fprintf(stderr, "fs-tune: %s\n", err);
    rc = st == FS_INVALID_ARGUMENT ? 2 : 1;
    goto done;
  }
  if (!no_gpu) rc = gpu_run(s, &c);
  else rc = dry_run(s, no_gpu);
done:
  tune_child_kill(&c);
  fs_store_close(s->store);
  fs_gen_close(s->gen);
  tune_plan_free(&s->plan);
  free(s->rows);
  return rc;
}
