/*
** transfer.c: moving tuning results between files: export (the winners of a
** database into a compact "defaults" file that is committed to the repository
** and shipped to a fleet), and merge/import (every run, measurement and cubin
** of another file into this one).
**
** Rows are copied between two connections column by column
** (sqlite3_bind_value of the source's column values), never through ATTACH,
** so the source may be a read-only handle or an in-memory migration of an old
** file.  Identity across files: a run is its uuid, a measurement is (run uuid,
** dtype, D, V, bucket, mode, variant), a cubin is (variant, arch,
** nvrtc_version, source_hash).  Existing rows in the destination are kept,
** which makes a merge idempotent; since winners are derived from the rows,
** the destination's winners after a merge are those of the union.
*/
#include "store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUN_COLS                                                           \
  "uuid, started_at, finished_at, device_name, arch, sm_count,"            \
  " driver_version, nvrtc_version, generator_rev, host, command_line"
#define N_RUN_COLS 11

#define MEAS_COLS                                                          \
  "dtype, hidden, vocab, bucket, mode, variant, params, outcome,"          \
  " median_us, spread_us, samples, floor_us, registers, spills,"           \
  " smem_bytes, message, source_hash, measured_at"
#define N_MEAS_COLS 18
/* Positions in MEAS_COLS of the columns export reads itself. */
#define MEAS_COL_VARIANT 5
#define MEAS_COL_SOURCE_HASH 16

#define CUBIN_COLS "variant, arch, nvrtc_version, source_hash, cubin, created_at"
#define N_CUBIN_COLS 6

/* The statements of one copy, prepared once. */
typedef struct copier {
  fs_store *src, *dst;
  sqlite3_stmt *src_run;      /* ?1 = run id -> RUN_COLS */
  sqlite3_stmt *dst_find_run; /* ?1 = uuid -> id, finished_at */
  sqlite3_stmt *dst_ins_run;  /* RUN_COLS */
  sqlite3_stmt *dst_fin_run;  /* ?1 = finished_at, ?2 = id */
  sqlite3_stmt *dst_ins_meas; /* ?1 = run id, ?2.. = MEAS_COLS */
  sqlite3_stmt *dst_ins_cubin;/* CUBIN_COLS */
  fs_store_transfer_stats st;
} copier;

static void copier_free(copier *c) {
  sqlite3_finalize(c->src_run);
  sqlite3_finalize(c->dst_find_run);
  sqlite3_finalize(c->dst_ins_run);
  sqlite3_finalize(c->dst_fin_run);
  sqlite3_finalize(c->dst_ins_meas);
  sqlite3_finalize(c->dst_ins_cubin);
}

static int copier_init(copier *c, fs_store *src, fs_store *dst) {
  memset(c, 0, sizeof *c);
  c->src = src;
  c->dst = dst;
  const char *what = "preparing the copy";
  FS_STORE_TRY(FS_STORE_PREPARE(
      src, "SELECT " RUN_COLS " FROM runs WHERE id = ?1", &c->src_run, what));
  FS_STORE_TRY(FS_STORE_PREPARE(
      dst, "SELECT id, finished_at FROM runs WHERE uuid = ?1",
      &c->dst_find_run, what));
  FS_STORE_TRY(FS_STORE_PREPARE(
      dst,
      "INSERT INTO runs(" RUN_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
      " ?9, ?10, ?11)",
      &c->dst_ins_run, what));
  FS_STORE_TRY(FS_STORE_PREPARE(
      dst, "UPDATE runs SET finished_at = ?1 WHERE id = ?2", &c->dst_fin_run,
      what));
  /* ON CONFLICT ... DO NOTHING skips only the duplicate; a row breaking a
  ** CHECK still fails loudly (INSERT OR IGNORE would drop it silently). */
  FS_STORE_TRY(FS_STORE_PREPARE(
      dst,
      "INSERT INTO measurements(run_id, " MEAS_COLS ") VALUES(?1, ?2, ?3, ?4,"
      " ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"
      " ON CONFLICT(run_id, dtype, hidden, vocab, bucket, mode, variant)"
      " DO NOTHING",
      &c->dst_ins_meas, what));
  FS_STORE_TRY(FS_STORE_PREPARE(
      dst,
      "INSERT INTO cubins(" CUBIN_COLS ") VALUES(?1, ?2, ?3, ?4, ?5, ?6)"
      " ON CONFLICT(variant, arch, nvrtc_version, source_hash) DO NOTHING",
      &c->dst_ins_cubin, what));
  return FS_OK;
}

/* Steps a write statement on dst and resets it; *pChanged = rows changed. */
static int step_write(copier *c, sqlite3_stmt *st, const char *what,
                      int *pChanged) {
  int rc = sqlite3_step(st);
  int status = FS_OK;
  if (rc != SQLITE_DONE)
    status = fs_store__sqlfail(c->dst, rc, what, __FILE__, __LINE__);
  else if (pChanged)
    *pChanged = sqlite3_changes(c->dst->db);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return status;
}

/* Copies src run `src_id` (if dst lacks its uuid) and returns its id in dst.
** A run dst has unfinished but src has finished gets src's finished_at. */
static int copy_run(copier *c, int64_t src_id, int64_t *pDstId) {
  const char *what = "copying a run";
  sqlite3_stmt *q = c->src_run;
  sqlite3_bind_int64(q, 1, src_id);
  int rc = sqlite3_step(q);
  if (rc != SQLITE_ROW) {
    int status =
        rc == SQLITE_DONE
            ? fs_store__err(c->src, FS_DB, "%s: run %lld vanished", what,
                            (long long)src_id)
            : fs_store__sqlfail(c->src, rc, what, __FILE__, __LINE__);
    sqlite3_reset(q);
    return status;
  }
  /* Look the uuid up in dst. */
  sqlite3_stmt *f = c->dst_find_run;
  sqlite3_bind_value(f, 1, sqlite3_column_value(q, 0));
  int status = FS_OK;
  rc = sqlite3_step(f);
  if (rc == SQLITE_ROW) {
    *pDstId = sqlite3_column_int64(f, 0);
    int dst_unfinished = sqlite3_column_type(f, 1) == SQLITE_NULL;
    sqlite3_reset(f);
    if (dst_unfinished && sqlite3_column_type(q, 2) != SQLITE_NULL) {
      sqlite3_bind_value(c->dst_fin_run, 1, sqlite3_column_value(q, 2));
      sqlite3_bind_int64(c->dst_fin_run, 2, *pDstId);
      status = step_write(c, c->dst_fin_run, what, NULL);
    }
  } else if (rc == SQLITE_DONE) {
    sqlite3_reset(f);
    for (int i = 0; i < N_RUN_COLS; i++)
      sqlite3_bind_value(c->dst_ins_run, i + 1, sqlite3_column_value(q, i));
    status = step_write(c, c->dst_ins_run, what, NULL);
    if (!status) {
      *pDstId = sqlite3_last_insert_rowid(c->dst->db);
      c->st.runs++;
    }
  } else {
    status = fs_store__sqlfail(c->dst, rc, what, __FILE__, __LINE__);
    sqlite3_reset(f);
  }
  sqlite3_clear_bindings(f);
  sqlite3_reset(q);
  return status;
}

/* Inserts the measurement in the current row of `q` (MEAS_COLS from column
** `first`) under dst run `dst_run`. */
static int copy_measurement(copier *c, sqlite3_stmt *q, int first,
                            int64_t dst_run) {
  sqlite3_stmt *ins = c->dst_ins_meas;
  sqlite3_bind_int64(ins, 1, dst_run);
  for (int i = 0; i < N_MEAS_COLS; i++)
    sqlite3_bind_value(ins, i + 2, sqlite3_column_value(q, first + i));
  int changed = 0;
  FS_STORE_TRY(step_write(c, ins, "copying a measurement", &changed));
  c->st.measurements += changed;
  return FS_OK;
}

/* Inserts the cubin in the current row of `q` (CUBIN_COLS from column 0). */
static int copy_cubin(copier *c, sqlite3_stmt *q) {
  for (int i = 0; i < N_CUBIN_COLS; i++)
    sqlite3_bind_value(c->dst_ins_cubin, i + 1, sqlite3_column_value(q, i));
  int changed = 0;
  FS_STORE_TRY(step_write(c, c->dst_ins_cubin, "copying a cubin", &changed));
  c->st.cubins += changed;
  return FS_OK;
}

/* Errors land on the store whose call failed; the caller reads `to`.  Both
** messages are cleared when an operation starts, so a message on `from` and
** none on `to` means `from` failed. */
static int report_on(fs_store *to, fs_store *from, int status) {
  if (status && from && from != to && from->errmsg[0] && !to->errmsg[0])
    fs_store__set_msg(to, "", from->errmsg);
  return status;
}

/* ---- merge ------------------------------------------------------------------ */

static int merge_rows(copier *c) {
  fs_store *src = c->src;
  const char *what = "reading the source";
  sqlite3_stmt *runs = NULL, *meas = NULL, *cubins = NULL;
  int status = FS_STORE_PREPARE(src, "SELECT id FROM runs ORDER BY id", &runs,
                                what);
  if (!status)
    status = FS_STORE_PREPARE(
        src, "SELECT " MEAS_COLS " FROM measurements WHERE run_id = ?1", &meas,
        what);
  if (!status)
    status = FS_STORE_PREPARE(src, "SELECT " CUBIN_COLS " FROM cubins",
                              &cubins, what);
  int rc = SQLITE_DONE;
  while (!status && (rc = sqlite3_step(runs)) == SQLITE_ROW) {
    int64_t src_id = sqlite3_column_int64(runs, 0), dst_id = 0;
    status = copy_run(c, src_id, &dst_id);
    if (status) break;
    sqlite3_bind_int64(meas, 1, src_id);
    while (!status && (rc = sqlite3_step(meas)) == SQLITE_ROW)
      status = copy_measurement(c, meas, 0, dst_id);
    if (!status && rc != SQLITE_DONE)
      status = fs_store__sqlfail(src, rc, what, __FILE__, __LINE__);
    sqlite3_reset(meas);
    rc = SQLITE_DONE;
  }
  if (!status && rc != SQLITE_DONE)
    status = fs_store__sqlfail(src, rc, what, __FILE__, __LINE__);
  while (!status && (rc = sqlite3_step(cubins)) == SQLITE_ROW)
    status = copy_cubin(c, cubins);
  if (!status && rc != SQLITE_DONE)
    status = fs_store__sqlfail(src, rc, what, __FILE__, __LINE__);
  sqlite3_finalize(runs);
  sqlite3_finalize(meas);
  sqlite3_finalize(cubins);
  return status;
}

int fs_store_merge(fs_store *dst, fs_store *src,
                   fs_store_transfer_stats *stats) {
  if (!dst) return FS_INVALID_ARGUMENT;
  if (stats) memset(stats, 0, sizeof *stats);
  if (!src || src == dst)
    return fs_store__err(dst, FS_INVALID_ARGUMENT,
                         "merging: the source must be another open store");
  const char *what = "merging";
  dst->errmsg[0] = src->errmsg[0] = 0;
  FS_STORE_TRY(fs_store__begin(dst, what));
  copier c;
  int status = copier_init(&c, src, dst);
  /* One read transaction on the source: the copy is a consistent snapshot
  ** even if a tuner is writing to it meanwhile. */
  int src_tx = 0;
  if (!status) {
    status = fs_store__exec(src, "BEGIN", "reading the source");
    src_tx = !status;
  }
  if (!status) status = merge_rows(&c);
  if (src_tx) fs_store__rollback(src); /* ends the read transaction */
  copier_free(&c);
  if (status) {
    report_on(dst, src, status);
    fs_store__rollback(dst);
    return status;
  }
  status = fs_store__commit(dst, what);
  if (!status && stats) *stats = c.st;
  return status;
}

int fs_store_merge_file(fs_store *dst, const char *src_path,
                        fs_store_transfer_stats *stats) {
  if (!dst) return FS_INVALID_ARGUMENT;
  if (stats) memset(stats, 0, sizeof *stats);
  fs_store *src = NULL;
  char err[FS_STORE_ERRMSG_MAX];
  int status = fs_store_open(src_path, FS_STORE_READONLY | FS_STORE_QUICK_CHECK,
                             &src, err, sizeof err);
  if (status) {
    fs_store__set_msg(dst, "merging from ", err);
    return status;
  }
  status = fs_store_merge(dst, src, stats);
  fs_store_close(src);
  return status;
}

/* ---- export ------------------------------------------------------------------ */

static void remove_db_files(const char *path) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
  char name[4096];
  for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
    if ((size_t)snprintf(name, sizeof name, "%s%s", path, suffix[i]) <
        sizeof name)
      unlink(name);
  }
}

/* Copies the winner measurement `id` (and its run and cubin) to dst. */
static int export_one(copier *c, sqlite3_stmt *q_meas, sqlite3_stmt *q_cubin,
                      int64_t id, const char *arch) {
  fs_store *src = c->src;
  const char *what = "exporting a winner";
  sqlite3_bind_int64(q_meas, 1, id);
  int rc = sqlite3_step(q_meas);
  if (rc != SQLITE_ROW) {
    int status = rc == SQLITE_DONE
                     ? fs_store__err(src, FS_DB, "%s: measurement %lld vanished",
                                     what, (long long)id)
                     : fs_store__sqlfail(src, rc, what, __FILE__, __LINE__);
    sqlite3_reset(q_meas);
    return status;
  }
  int64_t src_run = sqlite3_column_int64(q_meas, 0), dst_run = 0;
  int status = copy_run(c, src_run, &dst_run);
  if (!status) status = copy_measurement(c, q_meas, 1, dst_run);
  c->st.winners += !status;
  if (!status &&
      sqlite3_column_type(q_meas, 1 + MEAS_COL_SOURCE_HASH) != SQLITE_NULL) {
    /* cubin key: variant, arch, the run's nvrtc_version, source_hash */
    sqlite3_bind_value(q_cubin, 1,
                       sqlite3_column_value(q_meas, 1 + MEAS_COL_VARIANT));
    fs_store__bind_text(q_cubin, 2, arch);
    sqlite3_bind_value(q_cubin, 3,
                       sqlite3_column_value(q_meas, 1 + N_MEAS_COLS));
    sqlite3_bind_value(q_cubin, 4,
                       sqlite3_column_value(q_meas, 1 + MEAS_COL_SOURCE_HASH));
    rc = sqlite3_step(q_cubin);
    if (rc == SQLITE_ROW)
      status = copy_cubin(c, q_cubin);
    else if (rc == SQLITE_DONE)
      c->st.missing_cubins++;
    else
      status = fs_store__sqlfail(src, rc, what, __FILE__, __LINE__);
    sqlite3_reset(q_cubin);
    sqlite3_clear_bindings(q_cubin);
  } else if (!status) {
    c->st.missing_cubins++;
  }
  sqlite3_reset(q_meas);
  return status;
}

static int export_rows(copier *c, const fs_store_filter *filter) {
  fs_store *src = c->src;
  const char *what = "exporting winners";
  fs_store__tkey *keys = NULL;
  int n = 0;
  sqlite3_stmt *q_meas = NULL, *q_cubin = NULL;
  int status = fs_store__tuned_keys(src, filter, &keys, &n);
  if (!status)
    status = FS_STORE_PREPARE(
        src,
        "SELECT m.run_id, " MEAS_COLS ", (SELECT nvrtc_version FROM runs"
        " WHERE id = m.run_id) FROM measurements m WHERE m.id = ?1",
        &q_meas, what);
  if (!status)
    status = FS_STORE_PREPARE(
        src,
        "SELECT " CUBIN_COLS " FROM cubins WHERE variant = ?1 AND arch = ?2"
        " AND nvrtc_version = ?3 AND source_hash = ?4",
        &q_cubin, what);
  /* One winner per tuned (key, mode).  A row has one mode, so it wins at
  ** most once; the winner rule in the exported file sees only winning 'ok'
  ** rows and so picks the same ones in every mode. */
  for (int i = 0; !status && i < n; i++) {
    fs_store__tkey *k = &keys[i];
    fs_store_choice ch;
    status = fs_store__winner(src, k->device_name, k->arch, k->dtype,
                              k->hidden, k->vocab, k->bucket, k->mode, 0, &ch);
    if (status) break;
    if (ch.match == FS_STORE_MATCH_NONE) continue;
    if (filter && filter->variant && strcmp(filter->variant, ch.variant) != 0)
      continue;
    status = export_one(c, q_meas, q_cubin, ch.measurement_id, k->arch);
  }
  sqlite3_finalize(q_meas);
  sqlite3_finalize(q_cubin);
  free(keys);
  return status;
}

int fs_store_export(fs_store *s, const char *dest_path,
                    const fs_store_filter *filter,
                    fs_store_transfer_stats *stats) {
  if (!s) return FS_INVALID_ARGUMENT;
  if (stats) memset(stats, 0, sizeof *stats);
  const char *what = "exporting";
  if (!dest_path || !*dest_path)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: the destination path is %s", what,
                         dest_path ? "empty" : "NULL");
  FS_STORE_TRY(fs_store__check_filter(s, what, filter));
  struct stat sb;
  if (stat(dest_path, &sb) == 0)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: '%s' already exists: export writes a new file "
                         "(remove it first, or merge into it)", what,
                         dest_path);
  if (errno != ENOENT)
    return fs_store__err(s, FS_DB, "%s: cannot create '%s': %s", what,
                         dest_path, strerror(errno));
  /* Written under a temporary name beside it and renamed when whole, so
  ** that an interrupted export leaves no half-written dest_path. */
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", dest_path, (long)getpid()) >= sizeof tmp)
    return fs_store__err(s, FS_INVALID_ARGUMENT, "%s: the destination path is too long",
                         what);
  remove_db_files(tmp);
  fs_store *dst = NULL;
  char err[FS_STORE_ERRMSG_MAX];
  int status = fs_store_open(tmp, FS_STORE_CREATE, &dst, err, sizeof err);
  if (status) {
    fs_store__set_msg(s, "exporting to ", err);
    remove_db_files(tmp);
    return status;
  }
  copier c;
  memset(&c, 0, sizeof c);
  s->errmsg[0] = 0;
  status = fs_store__begin(dst, what);
  int src_tx = 0;
  if (!status) status = copier_init(&c, s, dst);
  if (!status) {
    status = fs_store__exec(s, "BEGIN", "reading the source");
    src_tx = !status;
  }
  if (!status) status = export_rows(&c, filter);
  if (src_tx) fs_store__rollback(s);
  copier_free(&c);
  if (!status) status = fs_store__commit(dst, what);
  /* A rollback-journal file opens read-only from a read-only directory
  ** (a WAL file needs its -shm beside it); it is also one file to commit. */
  if (!status)
    status = fs_store__exec(dst, "PRAGMA journal_mode=DELETE",
                            "leaving WAL mode");
  if (status) {
    report_on(s, dst, status);
    fs_store__rollback(dst);
    fs_store_close(dst);
    remove_db_files(tmp);
    return status;
  }
  fs_store_close(dst);
  if (stat(dest_path, &sb) == 0)
    status = fs_store__err(s, FS_INVALID_ARGUMENT, "%s: '%s' appeared while exporting: "
                           "export writes a new file", what, dest_path);
  else if (rename(tmp, dest_path) != 0)
    status = fs_store__err(s, FS_DB, "%s: cannot create '%s': %s", what, dest_path,
                           strerror(errno));
  if (status) {
    remove_db_files(tmp);
    return status;
  }
  if (stats) *stats = c.st;
  return FS_OK;
}
