/*
** tune.h: the parts of fs-tune (tools/fs-tune.c and tools/tune_*.c).
**
** fs-tune measures every generated kernel variant of one LM-head shape for a
** list of batch buckets on one GPU and records each measurement in the
** tuning database (tuning-db/store.h) as soon as it is taken.  The pieces:
**   tune_plan.c     the variants to try: enumerate, filter, order per bucket,
**                   generate sources (one fs_gen, main thread only)
**   tune_compile.c  a pool of threads compiling sources with NVRTC, ahead of
**                   the timing, in the order the timing will want them
**   tune_child.c    the parent's side of the watchdog child: spawn (fork +
**                   exec of this program), fixed-size messages, timeouts
**   tune_worker.c   the child: the only process that touches CUDA; loads a
**                   cubin, verifies it against the oracle, times it
**   tune_run.c      the session: dry run, or tune bucket by bucket, write
**                   the store, progress
**   tune_report.c   the winner table, the CSV and the SVG plot
**
** Process model: the parent never initialises CUDA (it forks while compile
** threads run, so the child exec()s this program afresh rather than running
** on a copy of a multithreaded address space).  A variant that faults,
** hangs or poisons its CUDA context takes only the child down; the parent
** records it as run-failed and starts another child.
*/
#ifndef FS_TUNE_H
#define FS_TUNE_H

#include "fs_tools.h"
#include "fs_nvrtc.h"
#include "gen.h"
#include "store.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TUNE_MAX_BUCKETS 64

/* ---- options (fs-tune.c fills them) -------------------------------------- */
typedef struct tune_opts {
  int D, V, dtype;
  const char *model;          /* preset name or NULL (--shape) */
  int buckets[TUNE_MAX_BUCKETS];
  int nbuckets;
  const char *db_path;        /* --db or the default under the cache dir */
  double budget_s;            /* 0: no budget */
  int jobs;                   /* NVRTC threads */
  int force, dry_run;
  int max_variants;           /* per bucket, 0: all */
  int arch;                   /* --arch (generator arch) or 0: the GPU's */
  int device;                 /* GPU ordinal */
  const char *report;         /* CSV path or NULL (the SVG goes to report.svg) */
  const char *filter;         /* comma-separated variant-name substrings, or NULL */
  double timeout_s;           /* watchdog per variant */
  double cap_s;               /* timing cap per variant */
  int warmup_ms;              /* FS_TUNE_WARMUP_MS, checked (0..10000; 0: none) */
  int mode;                   /* the fs_store_mode timed: --mode, FS_TUNE_NOISE, FS_TUNE_GREEDY */
  int argc;
  char **argv;
} tune_opts;

/* ---- plan (tune_plan.c) ---------------------------------------------------- */
enum { TUNE_PENDING = 0, TUNE_COMPILING = 1, TUNE_DONE = 2 };

/* One variant.  The compile fields belong to the pool while state is not
** TUNE_DONE; after tune_pool_wait() they are read-only. */
typedef struct tune_item {
  fs_variant v;
  char *src;                  /* generated source (malloc'ed) */
  unsigned long long key;     /* fs_nvrtc_cache_key(src, target) */
  char hash[20];              /* the key in hex: the store's source_hash */
  int dup_of;                 /* item compiled for the same source, or -1 */
  int state, status, from_cache;
  char *cubin;                /* malloc'ed */
  size_t cubin_size;
  int registers, spills, stack; /* -1 unknown (cache hits) */
  double seconds;             /* compile wall time */
  char *log;                  /* NVRTC log of a failure (malloc'ed) */
  char err[256];
  int stored;                 /* cubin written to the store under v.name */
} tune_item;

typedef struct tune_plan {
  int arch;                   /* generator arch, e.g. 90 */
  char target[16];            /* NVRTC target, e.g. "sm_90a" */
  char revision[64];          /* generator revision + template hash */
  tune_item *items;           /* every enumerated variant (filter or not) */
  int nitems;
  int nbuckets;
  int buckets[TUNE_MAX_BUCKETS];
  int deflt[TUNE_MAX_BUCKETS];   /* item index of each bucket's default */
  int *order[TUNE_MAX_BUCKETS];  /* items to time, best guess first */
  int norder[TUNE_MAX_BUCKETS];
  int *compile;               /* source items in the order to compile */
  int ncompile;
} tune_plan;

/* Builds the plan for (arch, opts).  Returns FS_OK, or a status with a
** message in err (unknown architecture, generator failure, no variant left
** after the filter). */
int tune_plan_build(tune_plan *pl, fs_gen *g, int arch, const tune_opts *o,
                    char *err, size_t errlen);
void tune_plan_free(tune_plan *pl);
/* 1 when name contains one of the comma-separated pieces of filter (empty
** pieces never match), or filter is NULL; else 0. */
int tune_filter_match(const char *filter, const char *name);
/* The item that holds the compiled cubin of item i (itself or its dup). */
static inline tune_item *tune_src_item(tune_plan *pl, int i) {
  tune_item *it = &pl->items[i];
  return it->dup_of >= 0 ? &pl->items[it->dup_of] : it;
}
/* Looks up a parameter "key=value" in v->params; returns the value's text
** (up to the next comma) copied into buf, or "" */
const char *tune_param(const fs_variant *v, const char *key, char *buf, size_t n);

/* ---- compile pool (tune_compile.c) ----------------------------------------- */
typedef struct tune_pool tune_pool;

/* Starts `threads` threads compiling pl->compile[] in order (items already
** TUNE_DONE, e.g. cache hits, are skipped).  FS_OK or FS_OUT_OF_MEMORY. */
int tune_pool_start(tune_pool **pp, tune_plan *pl, int threads);
/* Moves source item `i` to the front of the queue if it is still pending,
** then blocks until it is compiled.  Returns the item that holds the result
** (tune_src_item).  Safe from the main thread only. */
tune_item *tune_pool_wait(tune_pool *p, int i);
/* Items compiled so far (for progress). */
int tune_pool_done(tune_pool *p);
/* Drops what is not started, waits for running compiles, joins.  NULL ok. */
void tune_pool_stop(tune_pool *p);

/* ---- messages between parent and child (tune_child.c, tune_worker.c) ------- */
#define TUNE_MSG_MAGIC 0x46535475u /* "FSTu" */
enum {
  TUNE_MSG_HELLO = 1, /* child -> parent: context created (or why not) */
  TUNE_MSG_SETUP,     /* parent -> child: shape, bucket, the default's cubin */
  TUNE_MSG_READY,     /* child -> parent: oracle ready, bandwidth, floor */
  TUNE_MSG_JOB,       /* parent -> child: a variant and its cubin */
  TUNE_MSG_RESULT,    /* child -> parent: outcome and time */
  TUNE_MSG_QUIT       /* parent -> child: exit */
};

/* One fixed-size record; a cubin of cubin_size bytes follows SETUP and JOB. */
typedef struct tune_msg {
  uint32_t magic, type;
  int32_t status;             /* FS_OK or an fs_status */
  int32_t outcome;            /* RESULT: an fs_store_outcome */
  /* HELLO */
  int32_t arch, sm_count, driver_version, max_smem;
  char device_name[128];
  /* SETUP / JOB */
  int32_t dtype, hidden, vocab, batch;
  double cap_s;               /* JOB: timing cap */
  double warmup_ms;           /* JOB: least warm-up time (tune_opts.warmup_ms) */
  int32_t mode;               /* JOB: the fs_store_mode of the calls timed (tune_opts.mode) */
  uint64_t cubin_size;
  fs_variant variant;
  /* READY / RESULT */
  double bandwidth;           /* bytes/s */
  double floor_us;            /* (W + H bytes) / bandwidth */
  double median_us, spread_us;
  int32_t samples, registers, local_bytes, fatal;
  char message[1024];
} tune_msg;

/* ---- the watchdog child, parent side (tune_child.c) -------------------------- */
typedef struct tune_child {
  pid_t pid;                  /* 0 when none */
  int to_fd, from_fd;
  int device;
  tune_msg hello;
} tune_child;

/* Results of tune_child_* calls. */
enum {
  TUNE_CHILD_OK = 0,
  TUNE_CHILD_DIED = -1,       /* exited, crashed or timed out: killed, reaped */
  TUNE_CHILD_INTERRUPTED = -2 /* SIGINT arrived while waiting: child killed */
};

/* Starts a child on GPU `device` and reads its HELLO.  Returns TUNE_CHILD_OK
** (c->hello.status says whether it has a GPU) or a failure with `why`. */
int tune_child_spawn(tune_child *c, int device, double timeout_s, char *why,
                     size_t n);
/* Sends req (+ cubin bytes) and waits up to timeout_s for the reply. */
int tune_child_call(tune_child *c, const tune_msg *req, const void *cubin,
                    tune_msg *reply, double timeout_s, char *why, size_t n);
/* Asks the child to exit, then reaps it (kills it after a grace period). */
void tune_child_quit(tune_child *c);
/* SIGKILLs and reaps the child (no-op without one). */
void tune_child_kill(tune_child *c);

/* SIGINT handling for the parent: install, and the flag it sets. */
void tune_signals_install(void);
int tune_interrupted(void);

/* The child's main (fs-tune __worker IN_FD OUT_FD DEVICE). */
int tune_worker_main(int in_fd, int out_fd, int device);

/* ---- session (tune_run.c) ---------------------------------------------------- */
/* One result row of this run, for the table and the report.  outcome is an
** fs_store_outcome, or -1 for "compiled" in a dry run. */
typedef struct tune_row {
  int bucket, item, outcome;
  double median_us, spread_us, floor_us;
  int samples, registers, spills;
} tune_row;

typedef struct tune_bucket_sum {
  int tried, ok, wrong, failed, rejected, skipped, unreached;
  double seconds;
  double floor_us;
} tune_bucket_sum;

typedef struct tune_session {
  const tune_opts *o;
  tune_plan plan;
  fs_gen *gen;
  fs_store *store;
  int64_t run_id;
  char device_name[128];
  char arch_str[16];          /* the store's arch: "sm_90" */
  char nvrtc[16];             /* "13.0" */
  int sm_count, driver_version;
  tune_row *rows;
  int nrows, caprows;
  tune_bucket_sum sum[TUNE_MAX_BUCKETS];
  double t0;                  /* fs_tools_now() at the start (ms) */
  int interrupted;
} tune_session;

/* Runs the tuner with parsed options; returns the process exit code. */
int tune_main(const tune_opts *o);

/* Appends a row (exits on out-of-memory: a tool, not the library). */
void tune_add_row(tune_session *s, const tune_row *r);

/* ---- reports (tune_report.c) ------------------------------------------------ */
/* The winner per bucket from the store, to stdout. */
void tune_report_table(tune_session *s);
/* CSV of the session's rows to path and an SVG plot to path.svg.  Returns 0
** or -1 with a message on stderr. */
int tune_report_files(tune_session *s, const char *path);
/* Refuses a --report path whose files (FILE, FILE.svg) would overwrite the
** tuning database's (DB and its -wal, -shm, -journal): the same file when
** both exist (st_dev, st_ino: links too), else the same resolved path.
** Returns 0, or 2 with a message naming --report and --db. */
int tune_report_check(const char *report, const char *db);

/* "13.0" from fs_nvrtc_version(). */
void tune_nvrtc_string(char *buf, size_t n);

#endif /* FS_TUNE_H */
