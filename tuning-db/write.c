/*
** write.c: the write path used by fs-tune: runs, measurements and cubins, and
** the resume query (has this variant been measured already?).
**
** Each call is its own BEGIN IMMEDIATE transaction, committed before it
** returns: fs-tune measures a variant for seconds and then records it, so a
** commit per row costs nothing measurable, and a Ctrl-C or crash loses at
** most the variant being measured.  Arguments are checked before SQLite sees
** them, so a bad call gets an FS_INVALID_ARGUMENT naming the field and the
** rule rather than a constraint failure.
*/
#include "store_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- runs ----------------------------------------------------------------- */

int fs_store_begin_run(fs_store *s, const fs_store_run *run, int64_t *pRunId) {
  if (!s) return FS_INVALID_ARGUMENT;
  if (pRunId) *pRunId = 0;
  if (!run || !pRunId)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "fs_store_begin_run: run and pRunId are required");
  FS_STORE_TRY(fs_store__check_str(s, "device_name", run->device_name,
                             FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_str(s, "arch", run->arch, FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_str(s, "nvrtc_version", run->nvrtc_version,
                             FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_str(s, "generator_rev", run->generator_rev,
                             FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_opt_str(s, "started_at", run->started_at,
                                 FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_opt_str(s, "host", run->host, 1023));
  FS_STORE_TRY(fs_store__check_opt_str(s, "command_line", run->command_line, 65535));

  const char *what = "beginning a run";
  sqlite3_stmt *st = NULL;
  FS_STORE_TRY(fs_store__begin(s, what));
  int status = FS_STORE_PREPARE(
      s,
      "INSERT INTO runs(uuid, started_at, device_name, arch, sm_count,"
      " driver_version, nvrtc_version, generator_rev, host, command_line)"
      " VALUES(lower(hex(randomblob(16))), coalesce(?1, " FS_STORE_NOW_SQL "),"
      " ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
      &st, what);
  if (!status) {
    fs_store__bind_text(st, 1, run->started_at);
    fs_store__bind_text(st, 2, run->device_name);
    fs_store__bind_text(st, 3, run->arch);
    fs_store__bind_opt_int(st, 4, run->sm_count);
    fs_store__bind_opt_int(st, 5, run->driver_version);
    fs_store__bind_text(st, 6, run->nvrtc_version);
    fs_store__bind_text(st, 7, run->generator_rev);
    fs_store__bind_text(st, 8, run->host);
    fs_store__bind_text(st, 9, run->command_line);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
      status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
    else
      *pRunId = sqlite3_last_insert_rowid(s->db);
  }
  sqlite3_finalize(st);
  if (status) {
    fs_store__rollback(s);
    *pRunId = 0;
    return status;
  }
  status = fs_store__commit(s, what);
  if (status) *pRunId = 0;
  return status;
}

int fs_store_finish_run(fs_store *s, int64_t run_id) {
  if (!s) return FS_INVALID_ARGUMENT;
  const char *what = "finishing a run";
  sqlite3_stmt *st = NULL;
  FS_STORE_TRY(fs_store__begin(s, what));
  int status = FS_STORE_PREPARE(
      s, "UPDATE runs SET finished_at = " FS_STORE_NOW_SQL " WHERE id = ?1",
      &st, what);
  if (!status) {
    sqlite3_bind_int64(st, 1, run_id);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
      status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
    else if (sqlite3_changes(s->db) != 1)
      status = fs_store__err(s, FS_INVALID_ARGUMENT, "%s: no run %lld", what,
                             (long long)run_id);
  }
  sqlite3_finalize(st);
  if (status) {
    fs_store__rollback(s);
    return status;
  }
  return fs_store__commit(s, what);
}

/* ---- measurements ------------------------------------------------------------ */

static int check_shape(fs_store *s, const char *what, int dtype, int hidden,
                       int vocab, int bucket) {
  if (!fs_store_dtype_name(dtype))
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: dtype=%d: must be FS_DTYPE_BF16 or FS_DTYPE_FP16",
                         what, dtype);
  if (hidden < 1 || vocab < 1 || bucket < 1)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: D=%d V=%d bucket=%d: each must be >= 1", what,
                         hidden, vocab, bucket);
  return FS_OK;
}

static int check_measurement(fs_store *s, const fs_store_measurement *m) {
  const char *what = "adding a measurement";
  FS_STORE_TRY(check_shape(s, what, m->dtype, m->hidden, m->vocab, m->bucket));
  FS_STORE_TRY(fs_store__check_mode(s, what, "mode", m->mode));
  FS_STORE_TRY(fs_store__check_str(s, "variant", m->variant, FS_STORE_NAME_MAX));
  FS_STORE_TRY(fs_store__check_opt_str(s, "params", m->params, FS_STORE_PARAMS_MAX));
  FS_STORE_TRY(fs_store__check_opt_str(s, "source_hash", m->source_hash,
                                 FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_opt_str(s, "measured_at", m->measured_at,
                                 FS_STORE_SHORT_MAX));
  if (!fs_store_outcome_name(m->outcome))
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: outcome=%d is not an fs_store_outcome", what,
                         m->outcome);
  if (m->outcome == FS_STORE_OUTCOME_OK &&
      !(m->median_us > 0 && isfinite(m->median_us)))
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: variant %s: median_us=%g: an 'ok' measurement "
                         "needs a finite time > 0", what, m->variant,
                         m->median_us);
  return FS_OK;
}

/* Whether run `run_id` exists (inside the caller's transaction). */
static int run_exists(fs_store *s, int64_t run_id, int *exists) {
  sqlite3_stmt *st;
  FS_STORE_TRY(FS_STORE_PREPARE(s, "SELECT 1 FROM runs WHERE id = ?1", &st,
                          "looking up the run"));
  sqlite3_bind_int64(st, 1, run_id);
  int rc = sqlite3_step(st);
  *exists = rc == SQLITE_ROW;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return fs_store__sqlfail(s, rc, "looking up the run", __FILE__, __LINE__);
  return FS_OK;
}

int fs_store_add_measurement(fs_store *s, int64_t run_id,
                             const fs_store_measurement *m, int64_t *pId) {
  if (!s) return FS_INVALID_ARGUMENT;
  if (pId) *pId = 0;
  if (!m)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "adding a measurement: m is NULL");
  FS_STORE_TRY(check_measurement(s, m));
  const char *what = "adding a measurement";
  FS_STORE_TRY(fs_store__begin(s, what));
  int exists = 0;
  int status = run_exists(s, run_id, &exists);
  if (!status && !exists)
    status = fs_store__err(s, FS_INVALID_ARGUMENT, "%s: no run %lld", what,
                           (long long)run_id);
  sqlite3_stmt *st = NULL;
  if (!status)
    status = FS_STORE_PREPARE(
        s,
        "INSERT INTO measurements(run_id, dtype, hidden, vocab, bucket,"
        " variant, params, outcome, median_us, spread_us, samples, floor_us,"
        " registers, spills, smem_bytes, message, source_hash, measured_at,"
        " mode)"
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, coalesce(?7, ''), ?8, ?9, ?10, ?11,"
        " ?12, ?13, ?14, ?15, ?16, ?17, coalesce(?18, " FS_STORE_NOW_SQL "),"
        " ?19)",
        &st, what);
  if (!status) {
    sqlite3_bind_int64(st, 1, run_id);
    fs_store__bind_text(st, 2, fs_store_dtype_name(m->dtype));
    sqlite3_bind_int(st, 3, m->hidden);
    sqlite3_bind_int(st, 4, m->vocab);
    sqlite3_bind_int(st, 5, m->bucket);
    fs_store__bind_text(st, 6, m->variant);
    fs_store__bind_text(st, 7, m->params);
    fs_store__bind_text(st, 8, fs_store_outcome_name(m->outcome));
    fs_store__bind_opt_double(st, 9, m->median_us);
    fs_store__bind_opt_double(st, 10, m->spread_us);
    fs_store__bind_opt_int(st, 11, m->samples);
    fs_store__bind_opt_double(st, 12, m->floor_us);
    fs_store__bind_opt_int(st, 13, m->registers);
    fs_store__bind_opt_int(st, 14, m->spills);
    fs_store__bind_opt_int(st, 15, m->smem_bytes);
    fs_store__bind_text(st, 16, m->message);
    fs_store__bind_text(st, 17, m->source_hash);
    fs_store__bind_text(st, 18, m->measured_at);
    fs_store__bind_text(st, 19, fs_store_mode_name(m->mode));
    int rc = sqlite3_step(st);
    if (rc == SQLITE_CONSTRAINT_UNIQUE)
      status = fs_store__err(
          s, FS_INVALID_ARGUMENT,
          "%s: run %lld already has a measurement of %s for %s D=%d V=%d "
          "bucket=%d mode=%s (one per run and mode; begin a new run to "
          "remeasure)",
          what, (long long)run_id, m->variant, fs_store_dtype_name(m->dtype),
          m->hidden, m->vocab, m->bucket, fs_store_mode_name(m->mode));
    else if (rc != SQLITE_DONE)
      status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
    else if (pId)
      *pId = sqlite3_last_insert_rowid(s->db);
  }
  sqlite3_finalize(st);
  if (status) {
    fs_store__rollback(s);
    if (pId) *pId = 0;
    return status;
  }
  status = fs_store__commit(s, what);
  if (status && pId) *pId = 0;
  return status;
}

int fs_store_has_measurement(fs_store *s, int64_t run_id, int dtype,
                             int hidden, int vocab, int bucket, int mode,
                             const char *variant, int *pOutcome) {
  if (!s) return FS_INVALID_ARGUMENT;
  const char *what = "looking for an earlier measurement";
  if (!pOutcome)
    return fs_store__err(s, FS_INVALID_ARGUMENT, "%s: pOutcome is NULL", what);
  *pOutcome = -1;
  FS_STORE_TRY(check_shape(s, what, dtype, hidden, vocab, bucket));
  FS_STORE_TRY(fs_store__check_mode(s, what, "mode", mode));
  FS_STORE_TRY(fs_store__check_str(s, "variant", variant, FS_STORE_NAME_MAX));
  sqlite3_stmt *st;
  /* Same device, arch and generator revision as run_id: the runs_context
  ** index finds the runs, the UNIQUE index of measurements the row. */
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT m.outcome FROM runs q, runs r, measurements m"
      " WHERE q.id = ?1 AND r.device_name = q.device_name AND r.arch = q.arch"
      "   AND r.generator_rev = q.generator_rev AND m.run_id = r.id"
      "   AND m.dtype = ?2 AND m.hidden = ?3 AND m.vocab = ?4"
      "   AND m.bucket = ?5 AND m.mode = ?7 AND m.variant = ?6"
      " ORDER BY m.measured_at DESC, r.uuid DESC LIMIT 1",
      &st, what));
  sqlite3_bind_int64(st, 1, run_id);
  fs_store__bind_text(st, 2, fs_store_dtype_name(dtype));
  sqlite3_bind_int(st, 3, hidden);
  sqlite3_bind_int(st, 4, vocab);
  sqlite3_bind_int(st, 5, bucket);
  fs_store__bind_text(st, 6, variant);
  fs_store__bind_text(st, 7, fs_store_mode_name(mode));
  int status = FS_OK;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *pOutcome = fs_store_outcome_parse(fs_store__col_text(st, 0));
    /* An outcome this code does not know still means "measured". */
    if (*pOutcome < 0) *pOutcome = FS_STORE_OUTCOME_RUN_FAILED;
  } else if (rc != SQLITE_DONE) {
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  }
  sqlite3_finalize(st);
  if (!status && rc == SQLITE_DONE) {
    int exists = 0;
    status = run_exists(s, run_id, &exists);
    if (!status && !exists)
      status = fs_store__err(s, FS_INVALID_ARGUMENT, "%s: no run %lld", what,
                             (long long)run_id);
  }
  return status;
}

/* ---- cubins ---------------------------------------------------------------- */

static int check_cubin_key(fs_store *s, const char *variant, const char *arch,
                           const char *nvrtc_version,
                           const char *source_hash) {
  FS_STORE_TRY(fs_store__check_str(s, "variant", variant, FS_STORE_NAME_MAX));
  FS_STORE_TRY(fs_store__check_str(s, "arch", arch, FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_str(s, "nvrtc_version", nvrtc_version,
                             FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_str(s, "source_hash", source_hash,
                             FS_STORE_SHORT_MAX));
  return FS_OK;
}

int fs_store_put_cubin(fs_store *s, const char *variant, const char *arch,
                       const char *nvrtc_version, const char *source_hash,
                       const void *data, size_t size) {
  if (!s) return FS_INVALID_ARGUMENT;
  FS_STORE_TRY(check_cubin_key(s, variant, arch, nvrtc_version, source_hash));
  if (!data || size == 0)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "storing the cubin of %s: no bytes (data=%p size=%zu)",
                         variant, data, size);
  const char *what = "storing a cubin";
  FS_STORE_TRY(fs_store__begin(s, what));
  sqlite3_stmt *st = NULL;
  int status = FS_STORE_PREPARE(
      s,
      "INSERT INTO cubins(variant, arch, nvrtc_version, source_hash, cubin,"
      " created_at) VALUES(?1, ?2, ?3, ?4, ?5, " FS_STORE_NOW_SQL ")"
      " ON CONFLICT(variant, arch, nvrtc_version, source_hash) DO UPDATE"
      " SET cubin = excluded.cubin, created_at = excluded.created_at",
      &st, what);
  if (!status) {
    fs_store__bind_text(st, 1, variant);
    fs_store__bind_text(st, 2, arch);
    fs_store__bind_text(st, 3, nvrtc_version);
    fs_store__bind_text(st, 4, source_hash);
    sqlite3_bind_blob64(st, 5, data, (sqlite3_uint64)size, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
      status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  }
  sqlite3_finalize(st);
  if (status) {
    fs_store__rollback(s);
    return status;
  }
  return fs_store__commit(s, what);
}

int fs_store_get_cubin(fs_store *s, const char *variant, const char *arch,
                       const char *nvrtc_version, const char *source_hash,
                       void **ppData, size_t *pSize) {
  if (!s) return FS_INVALID_ARGUMENT;
  if (!ppData || !pSize)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "fetching a cubin: ppData and pSize are required");
  *ppData = NULL;
  *pSize = 0;
  FS_STORE_TRY(check_cubin_key(s, variant, arch, nvrtc_version, source_hash));
  const char *what = "fetching a cubin";
  sqlite3_stmt *st;
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT cubin FROM cubins WHERE variant = ?1 AND arch = ?2"
      " AND nvrtc_version = ?3 AND source_hash = ?4",
      &st, what));
  fs_store__bind_text(st, 1, variant);
  fs_store__bind_text(st, 2, arch);
  fs_store__bind_text(st, 3, nvrtc_version);
  fs_store__bind_text(st, 4, source_hash);
  int status = FS_OK;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const void *blob = sqlite3_column_blob(st, 0);
    int n = sqlite3_column_bytes(st, 0);
    if (n > 0 && blob) {
      *ppData = malloc((size_t)n);
      if (!*ppData)
        status = fs_store__err(s, FS_OUT_OF_MEMORY, "%s: %d bytes", what, n);
      else {
        memcpy(*ppData, blob, (size_t)n);
        *pSize = (size_t)n;
      }
    } else if (sqlite3_errcode(s->db) == SQLITE_NOMEM) {
      status = fs_store__sqlfail(s, SQLITE_NOMEM, what, __FILE__, __LINE__);
    }
  } else if (rc != SQLITE_DONE) {
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  }
  sqlite3_finalize(st);
  return status;
}
