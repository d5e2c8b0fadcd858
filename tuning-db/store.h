/*
** store.h: the tuning database (an SQLite file) shared by fs-tune, which
** writes it, and the runtime, which only reads it.
**
** The workload: one fs-tune process per GPU measures a few hundred kernel
** variants for a few shapes and nine batch buckets, committing every
** measurement as it is taken (seconds apart), so a database holds thousands to
** tens of thousands of rows and a few hundred cubins of ~100 KB.  The runtime
** opens it read-only once per context and asks for one winner per shape.  A
** second tuner (another GPU of the host, another user) may write at the same
** time; the file may have been copied around, truncated or written by a newer
** flashsampling.
**
** This header is public inside the repository (fs-tune, the runtime, tests),
** not part of flashsampling.h.
**
** ---- Conventions --------------------------------------------------------
**  - Functions return an fs_status: FS_OK, FS_INVALID_ARGUMENT for an argument
**    that breaks a rule stated here, FS_DB when SQLite fails (busy past the
**    timeout, corrupt file, disk full...), FS_OUT_OF_MEMORY.  On failure
**    fs_store_errmsg(store) names the database path, what was being done and
**    SQLite's message, e.g.
**      tuning database '/x/t.db': adding a measurement: database is locked
**      (SQLITE_BUSY; another process held the database for more than 10 s)
**      at tuning-db/store.c:142
**    The message is owned by the store and valid until the next call on it.
**    A write on a store opened FS_STORE_READONLY is FS_INVALID_ARGUMENT.
**  - A store is used by one thread at a time and must not cross a fork():
**    open it again in the child.  fs_store_close() accepts NULL.
**  - Strings returned through callbacks are valid during the callback only.
**  - Numbers that may be unknown (spread, registers...) are negative when
**    unknown; they are stored as SQL NULL.
**
** ---- The file -------------------------------------------------------------
** PRAGMA application_id = FS_STORE_APPLICATION_ID marks our files and
** PRAGMA user_version is the schema version.  Read-write opens put the file in
** WAL mode (readers never block the writer), wait up to FS_STORE_BUSY_MS for
** another writer, run PRAGMA quick_check, and create or migrate the schema.
** Every write is one BEGIN IMMEDIATE transaction, so a measurement that
** fs_store_add_measurement() returned FS_OK for survives a crash or Ctrl-C
** (synchronous=NORMAL: only a power loss may lose the last commits).
**
** Schema version 3 (current):
**   runs(id, uuid UNIQUE, started_at, finished_at, device_name, arch,
**        sm_count, driver_version, nvrtc_version, generator_rev, host,
**        command_line)                       one tuning session
**   measurements(id, run_id -> runs, dtype 'bf16'|'fp16', hidden, vocab,
**        bucket, mode, variant, params, outcome, median_us, spread_us,
**        samples, floor_us, registers, spills, smem_bytes, message,
**        source_hash, measured_at,
**        UNIQUE(run_id, dtype, hidden, vocab, bucket, mode, variant))
**        outcome is 'ok', 'compile-failed', 'run-failed', 'wrong' or 'spills';
**        mode is what the time is of: 'token' (sampled calls with per-token
**        noise, the default), 'group16' (sampled, FS_NOISE_GROUP16) or
**        'greedy' (greedy calls, scalar temperature 0)
**   cubins(id, variant, arch, nvrtc_version, source_hash, cubin BLOB,
**        created_at, UNIQUE(variant, arch, nvrtc_version, source_hash))
** Times are ISO-8601 UTC text with milliseconds ("2026-11-29T09:30:00.123Z")
** so that they sort as text and read well in the sqlite3 shell.
** Schema version 2 had no mode column (every row was of mode 'token', the
** only one fs-tune timed as its own) and the UNIQUE key without it.
** Schema version 1 (the first fs-tune) had no uuid, finished_at, sm_count,
** host, command_line in runs, no spread/samples/floor/resources/message/
** source_hash in measurements, no 'spills' outcome and no cubins table.
** Opening a version-1 or -2 file read-write migrates it in place (one
** transaction); opening it read-only migrates a private in-memory copy.  A file with a newer
** version than FS_STORE_SCHEMA_VERSION is refused with a message saying so.
**
** ---- Winners ---------------------------------------------------------------
** Winners are derived from the raw measurements, never stored.  For a key
** (device_name, arch, dtype, hidden, vocab, bucket, mode):
**  1. The revision: the generator_rev of the latest run (by started_at, then
**     the larger generator_rev string) that has an 'ok' measurement for the
**     key.  Only that revision's measurements count below.
**  2. Eligible variants: those with at least one 'ok' measurement for the key
**     at that revision and no other outcome ('wrong', 'run-failed',
**     'compile-failed', 'spills') for the key *in any mode* at that revision
**     (fs-tune verifies every candidate on per-token, greedy and group16
**     calls whatever it times, so a failure disqualifies the variant for all
**     modes): a variant
**     that was ever wrong or crashed never wins (even if a --force rerun of
**     the same revision later measured it ok).  A variant's time is its
**     latest 'ok' measurement (largest measured_at; equal times: the smaller
**     median).
**  3. The best: the smallest median m (equal medians: smaller variant name);
**     its spread is s_best.  Variant i with median m_i and spread s_i is tied
**     with the best when
**         m_i <= m + max(min(s_i, s_best), FS_STORE_TIE_FRACTION * m)
**     (0.5%: one variant's medians on one machine vary by 0.3-0.5% from run
**     to run; at 1%, leads of 0.6-0.8% were tied and settled by name,
**     perf-notes 13b).  fs-tune measures until the spread is below the same
**     fraction, so two converged measurements tie within the fraction alone;
**     the spreads widen the margin only where both are wider (both noisy):
**     a variant that stopped at fs-tune's run cap with a wide spread cannot
**     tie a precisely measured faster one on its own noise (perf-notes 49e:
**     584 +-45 us tied 553 +-1 by max(s_i, s_best) and won by name).
**  4. The winner is the tied variant whose name is smallest by strcmp().
** The result depends only on the set of rows, not on insertion order or row
** ids, so two tuning runs that measure within noise pick the same winner.
**
** ---- Lookup chain (the runtime) ----------------------------------------
** fs_store_lookup(): the exact key's winner (FS_STORE_MATCH_EXACT); else the
** nearest tuned shape of the same arch, dtype and mode, any device name
** (FS_STORE_MATCH_NEAREST); else FS_STORE_MATCH_NONE (use a built-in default).
** Nearest: among the keys with an 'ok' measurement with the same arch,
** dtype and mode, the smallest
**     |ln(D/D')| + |ln(V/V')| + |ln(bucket/bucket')|;
** equal distances prefer the requested device name, then the smaller D',
** V', bucket', then device name.  A caller may reject a candidate (e.g. a
** variant that cannot run the requested D) with an accept callback; the next
** nearest key is then tried.  The nearest winner must be re-validated by the
** runtime before first use: it was verified on another shape.
*/
#ifndef FS_STORE_H
#define FS_STORE_H

#include "flashsampling.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FS_STORE_SCHEMA_VERSION 3

/* The tie margin of the winner rule (above), as a fraction of the best median. */
#define FS_STORE_TIE_FRACTION 0.005
#define FS_STORE_APPLICATION_ID 0x46536462 /* "FSdb" */
#define FS_STORE_BUSY_MS 10000             /* wait for another writer */

/* Limits on stored strings (bytes, without the NUL).  Longer arguments are
** rejected with FS_INVALID_ARGUMENT; the out-structs below hold them. */
#define FS_STORE_NAME_MAX 159    /* variant names (fs_kernel.name is 160) */
#define FS_STORE_PARAMS_MAX 1023 /* "tile_v=128,tile_b=16,..." */
#define FS_STORE_SHORT_MAX 127   /* device name, arch, versions, hashes */

typedef struct fs_store fs_store;

/* ---- open / close ------------------------------------------------------- */
#define FS_STORE_READONLY 0x01    /* never write (the runtime) */
#define FS_STORE_CREATE 0x02      /* read-write; create the file if missing */
#define FS_STORE_QUICK_CHECK 0x04 /* READONLY: run quick_check too (RW always) */

/* Opens the tuning database at `path`.  flags: 0 (read-write, the file must
** exist), FS_STORE_CREATE, or FS_STORE_READONLY [| FS_STORE_QUICK_CHECK].
** The parent directory must exist (the caller creates cache directories).
** On success *ppStore is the store.  On failure *ppStore is NULL, err (if not
** NULL) holds a NUL-terminated message naming the path and the cause, and the
** status is FS_INVALID_ARGUMENT (bad flags or NULL path), FS_DB (missing file,
** not an SQLite file, corrupt, not a tuning database, newer schema, busy),
** or FS_OUT_OF_MEMORY.  A corrupt file never crashes: it fails here or, for
** read-only opens without FS_STORE_QUICK_CHECK, at the first query that
** reads the damaged pages. */
int fs_store_open(const char *path, int flags, fs_store **ppStore /* OUT */,
                  char *err, size_t errlen);

/* Closes the store (accepts NULL).  Does not fail. */
void fs_store_close(fs_store *store);

/* The message of the last failed call on `store` ("" if none). */
const char *fs_store_errmsg(const fs_store *store);

/* The path given to fs_store_open(). */
const char *fs_store_path(const fs_store *store);

/* The schema version found in the file when it was opened (1, 2 or 3); a
** read-write open of an older file migrated it to 3. */
int fs_store_file_version(const fs_store *store);

/* Runs PRAGMA quick_check now.  FS_OK when the file is intact, else FS_DB
** with SQLite's first complaint in the message. */
int fs_store_check(fs_store *store);

/* ---- runs --------------------------------------------------------------- */
/* One tuning session.  Input fields for fs_store_begin_run(); all fields are
** filled when a run is reported by fs_store_list_runs(). */
typedef struct fs_store_run {
  const char *device_name;   /* required: "NVIDIA H200" (cuDeviceGetName) */
  const char *arch;          /* required: "sm_90" (the compile target) */
  int sm_count;              /* multiprocessors, < 0 unknown */
  int driver_version;        /* cuDriverGetVersion(), e.g. 13000; < 0 unknown */
  const char *nvrtc_version; /* required: "13.0" (part of the cubin key) */
  const char *generator_rev; /* required: generator + templates revision */
  const char *host;          /* may be NULL */
  const char *command_line;  /* may be NULL */
  const char *started_at;    /* ISO-8601 UTC; NULL when beginning = now */
  /* Output only (fs_store_list_runs): */
  int64_t id;                /* row id in this file */
  const char *uuid;          /* 32 hex digits, the identity across files */
  const char *finished_at;   /* NULL while unfinished (or interrupted) */
  int64_t n_measurements, n_ok;
} fs_store_run;

/* Records the start of a tuning session; *pRunId is its id in this file.
** Required strings must be non-empty.  Errors: FS_INVALID_ARGUMENT, FS_DB. */
int fs_store_begin_run(fs_store *store, const fs_store_run *run,
                       int64_t *pRunId /* OUT */);

/* Stamps finished_at on the run (an interrupted run simply lacks it; its
** measurements count all the same). */
int fs_store_finish_run(fs_store *store, int64_t run_id);

/* ---- measurements --------------------------------------------------------- */
typedef enum fs_store_outcome {
  FS_STORE_OUTCOME_OK = 0,             /* verified and timed */
  FS_STORE_OUTCOME_COMPILE_FAILED = 1, /* NVRTC (or the generator) failed */
  FS_STORE_OUTCOME_RUN_FAILED = 2,     /* launch error, fault, hang */
  FS_STORE_OUTCOME_WRONG = 3,          /* ran but disagreed with the reference */
  FS_STORE_OUTCOME_SPILLS = 4          /* rejected: register spills */
} fs_store_outcome;

/* "ok", "compile-failed", "run-failed", "wrong", "spills"; NULL if unknown. */
const char *fs_store_outcome_name(int outcome);
/* The inverse; -1 for an unknown name. */
int fs_store_outcome_parse(const char *name);
/* "bf16", "fp16"; NULL for other values. */
const char *fs_store_dtype_name(int dtype);
/* The inverse; -1 for an unknown name. */
int fs_store_dtype_parse(const char *name);

/* What a measurement's time is of, and so which calls its winner serves
** (the runtime picks per call: fs_sample with a scalar temperature of 0 and
** no per-row temperatures is greedy; else the context's noise mode). */
typedef enum fs_store_mode {
  FS_STORE_MODE_TOKEN = 0,   /* sampled, FS_NOISE_TOKEN: fs-tune's default */
  FS_STORE_MODE_GROUP16 = 1, /* sampled, FS_NOISE_GROUP16 (FS_TUNE_NOISE=group16) */
  FS_STORE_MODE_GREEDY = 2   /* greedy calls (FS_TUNE_GREEDY=1) */
} fs_store_mode;
#define FS_STORE_MODES 3
/* "token", "group16", "greedy"; NULL for other values. */
const char *fs_store_mode_name(int mode);
/* The inverse; -1 for an unknown name. */
int fs_store_mode_parse(const char *name);

/* One measured variant.  Input of fs_store_add_measurement(); output (with
** the id fields) of fs_store_list_measurements(). */
typedef struct fs_store_measurement {
  int dtype;                /* an fs_dtype */
  int hidden, vocab;        /* D, V: >= 1 */
  int bucket;               /* batch bucket: >= 1 */
  int mode;                 /* an fs_store_mode (0: token) */
  const char *variant;      /* required, <= FS_STORE_NAME_MAX bytes */
  const char *params;       /* may be NULL: "tile_v=128,tile_b=16,..." */
  const char *source_hash;  /* may be NULL: hash of the generated source,
                               the key of its cubin */
  int outcome;              /* an fs_store_outcome */
  double median_us;         /* required (> 0, finite) when outcome is ok */
  double spread_us;         /* noise radius the tuner measured, < 0 unknown */
  int samples;              /* timed repetitions, < 0 unknown */
  double floor_us;          /* bandwidth floor for the shape, < 0 unknown */
  int registers, spills, smem_bytes; /* < 0 unknown */
  const char *message;      /* may be NULL: compile log excerpt, error... */
  const char *measured_at;  /* ISO-8601 UTC; NULL when adding = now */
  /* Output only: */
  int64_t id, run_id;
} fs_store_measurement;

/* Adds one measurement to run `run_id` in its own transaction: when this
** returns FS_OK the row is committed.  A run holds at most one measurement
** per (dtype, D, V, bucket, mode, variant); a second is FS_INVALID_ARGUMENT.
** Errors: FS_INVALID_ARGUMENT (rules above, unknown run), FS_DB. */
int fs_store_add_measurement(fs_store *store, int64_t run_id,
                             const fs_store_measurement *m,
                             int64_t *pId /* OUT, may be NULL */);

/* Resume support.  Looks for a measurement of `variant` for (dtype, D, V,
** bucket, mode) in any run with the same device_name, arch and generator_rev
** as run `run_id` (so a rerun after Ctrl-C skips what is measured).
** *pOutcome is the outcome of the latest such measurement, or -1 if none. */
int fs_store_has_measurement(fs_store *store, int64_t run_id, int dtype,
                             int hidden, int vocab, int bucket, int mode,
                             const char *variant, int *pOutcome /* OUT */);

/* ---- cubins ------------------------------------------------------------- */
/* Stores a compiled cubin under (variant, arch, nvrtc_version, source_hash),
** replacing one with the same key.  All four strings required; size >= 1. */
int fs_store_put_cubin(fs_store *store, const char *variant, const char *arch,
                       const char *nvrtc_version, const char *source_hash,
                       const void *data, size_t size);

/* Fetches a cubin.  On FS_OK *ppData is a malloc'd copy (free it with
** fs_store_free()) and *pSize its size, or *ppData is NULL and *pSize 0 when
** there is none. */
int fs_store_get_cubin(fs_store *store, const char *variant, const char *arch,
                       const char *nvrtc_version, const char *source_hash,
                       void **ppData /* OUT */, size_t *pSize /* OUT */);

/* Frees memory returned by this module (accepts NULL). */
void fs_store_free(void *p);

/* ---- winners and lookup ------------------------------------------------------ */
/* The shape a caller looks for. */
typedef struct fs_store_key {
  const char *device_name; /* required */
  const char *arch;        /* required */
  int dtype, hidden, vocab, bucket;
  int mode;                /* an fs_store_mode (0, the zero value: token) */
} fs_store_key;

typedef enum fs_store_match {
  FS_STORE_MATCH_NONE = 0,    /* nothing tuned: use the built-in default */
  FS_STORE_MATCH_EXACT = 1,   /* winner of this device and shape */
  FS_STORE_MATCH_NEAREST = 2  /* winner of a nearby shape / other device */
} fs_store_match;

/* "none", "exact", "nearest". */
const char *fs_store_match_name(int match);

/* A chosen variant.  Strings are copies held in the struct.  Release with
** fs_store_choice_clear() (frees the cubin; the struct may then be reused). */
typedef struct fs_store_choice {
  int match;                 /* an fs_store_match; NONE: the rest is zero */
  double distance;           /* the nearest rule's distance (0 for exact) */
  /* The tuned key (differs from the request for NEAREST): */
  char device_name[FS_STORE_SHORT_MAX + 1];
  char arch[FS_STORE_SHORT_MAX + 1];
  int dtype, hidden, vocab, bucket, mode;
  /* The winner: */
  char variant[FS_STORE_NAME_MAX + 1];
  char params[FS_STORE_PARAMS_MAX + 1];
  double median_us, spread_us, floor_us; /* spread/floor < 0 when unknown */
  int n_candidates;          /* eligible variants */
  int n_tied;                /* eligible variants within noise of the best */
  char generator_rev[FS_STORE_SHORT_MAX + 1];
  char nvrtc_version[FS_STORE_SHORT_MAX + 1];
  char source_hash[FS_STORE_SHORT_MAX + 1]; /* "" when unknown */
  int64_t measurement_id;
  int has_cubin;             /* a cubin with the winner's key is stored */
  size_t cubin_size;
  void *cubin;               /* malloc'd bytes when loaded, else NULL */
} fs_store_choice;

void fs_store_choice_clear(fs_store_choice *c);

/* The winner for exactly `key` (the rule above), with its cubin loaded when
** stored.  FS_OK with c->match FS_STORE_MATCH_EXACT, or FS_STORE_MATCH_NONE
** when nothing eligible is measured for the key.  *c is overwritten (clear
** it first if it holds a cubin). */
int fs_store_winner(fs_store *store, const fs_store_key *key,
                    fs_store_choice *c /* OUT */);

/* Optional filter for nearest lookups: return nonzero to accept `c`. */
typedef int (*fs_store_accept_fn)(void *arg, const fs_store_choice *c);

/* The winner of the nearest tuned key of the same arch, dtype and mode (the rule
** above; the exact key itself has distance 0 and so comes first when tuned).
** c->match is EXACT when the key found equals the request (same device and
** shape), NEAREST for another key, NONE when no candidate exists or `accept`
** (may be NULL) refused them all. */
int fs_store_nearest(fs_store *store, const fs_store_key *key,
                     fs_store_accept_fn accept, void *arg,
                     fs_store_choice *c /* OUT */);

/* The runtime's chain: fs_store_winner() if it finds one that `accept` (may
** be NULL) takes, else fs_store_nearest(); c->match says which path
** matched. */
int fs_store_lookup(fs_store *store, const fs_store_key *key,
                    fs_store_accept_fn accept, void *arg,
                    fs_store_choice *c /* OUT */);

/* ---- listing (fs-tune list / show) -------------------------------------------- */
/* Callbacks return 0 to continue, nonzero to stop (the call then returns
** FS_OK). */
typedef int (*fs_store_run_fn)(void *arg, const fs_store_run *run);
typedef int (*fs_store_measurement_fn)(void *arg, const fs_store_run *run,
                                       const fs_store_measurement *m);
typedef int (*fs_store_choice_fn)(void *arg, const fs_store_choice *c);

/* Every run, oldest first. */
int fs_store_list_runs(fs_store *store, fs_store_run_fn fn, void *arg);

/* Selects rows: NULL strings and values <= 0 match anything (mode is a
** name, "token", "group16" or "greedy", so that the zero filter takes all). */
typedef struct fs_store_filter {
  const char *device_name, *arch, *variant;
  int dtype, hidden, vocab, bucket;
  const char *mode;
} fs_store_filter;

/* The winner of every tuned key matching `filter` (may be NULL), ordered by
** device, arch, dtype, D, V, bucket, mode (token, group16, greedy).  Cubins are not loaded (has_cubin and
** cubin_size are set). */
int fs_store_list_winners(fs_store *store, const fs_store_filter *filter,
                          fs_store_choice_fn fn, void *arg);

/* Every measurement matching `filter` (may be NULL) with its run, ordered by
** device, arch, dtype, D, V, bucket, then ok rows by median, then the other
** outcomes, then variant name. */
int fs_store_list_measurements(fs_store *store, const fs_store_filter *filter,
                               fs_store_measurement_fn fn, void *arg);

/* One-line renderings for the CLI, like snprintf(): they write at most n
** bytes (NUL included) and return the length the full line needs.  The
** formats are stable (CLI transcript tests depend on them):
**   run:         "run 3 2026-11-29T09:30:00.000Z NVIDIA H200 sm_90 sms=132
**                 driver=13000 nvrtc=13.0 rev=abc host=h measurements=12
**                 ok=10 finished" (one line; "unfinished" when not)
**   measurement: "bf16 D=4096 V=151936 B=8 fsamp_x ok 12.345 us +-0.100
**                 floor=10.000 regs=128 spills=0 smem=49152 n=50 [message]"
**   choice:      "NVIDIA H200 sm_90 bf16 D=4096 V=151936 B=8 -> fsamp_x
**                 12.345 us +-0.100 (83% of floor) tied=2/40 cubin=123456 B
**                 [nearest d=0.693]" ("no-cubin" when none is stored;
**                 "no tuned variant" for FS_STORE_MATCH_NONE)
** Fields that are unknown (< 0) are left out.  A mode other than token
** follows the bucket as " mode=greedy" ("B=8 mode=greedy fsamp_x ..."), so
** the lines of token rows read as before. */
int fs_store_format_run(const fs_store_run *run, char *buf, size_t n);
int fs_store_format_measurement(const fs_store_measurement *m, char *buf,
                                size_t n);
int fs_store_format_choice(const fs_store_choice *c, char *buf, size_t n);

/* ---- transfer (fs-tune export / import / merge) ------------------------------ */
typedef struct fs_store_transfer_stats {
  int64_t runs;          /* runs written (new to the destination) */
  int64_t measurements;  /* measurements written (new) */
  int64_t cubins;        /* cubins written (new) */
  int64_t winners;       /* export: winners exported */
  int64_t missing_cubins;/* export: winners without a stored cubin */
} fs_store_transfer_stats;

/* Writes a compact "defaults" database at `dest_path`, which must not exist:
** for every winner matching `filter` (may be NULL), its measurement row, its
** run (same uuid) and its cubin.  The file is a normal version-3 store in
** rollback-journal mode (so it can be opened read-only from a read-only
** directory), ready to be committed and shipped; its winners are the same
** as the source's (every mode's).  On failure no file is left at dest_path. */
int fs_store_export(fs_store *store, const char *dest_path,
                    const fs_store_filter *filter,
                    fs_store_transfer_stats *stats /* OUT, may be NULL */);

/* Merges every run, measurement and cubin of `src` into `dst` in one
** transaction.  Runs are matched by uuid, measurements by (run uuid, dtype,
** D, V, bucket, mode, variant), cubins by their key; what dst already has is kept,
** so merging twice adds nothing.  Importing an exported defaults file is a
** merge of it.  src and dst must be different handles; errors are reported
** on dst. */
int fs_store_merge(fs_store *dst, fs_store *src,
                   fs_store_transfer_stats *stats /* OUT, may be NULL */);

/* fs_store_merge() from the file at src_path (opened read-only; an older
** file is migrated in memory).  Errors, including those opening src, are
** reported on dst. */
int fs_store_merge_file(fs_store *dst, const char *src_path,
                        fs_store_transfer_stats *stats /* OUT, may be NULL */);

#ifdef __cplusplus
}
#endif
#endif /* FS_STORE_H */
