/*
** store.c: opening and closing the tuning database, error reporting and the
** small helpers (transactions, binding, strings) the other files share.
**
** Opening is where robustness lives: a missing file, a file that is not
** SQLite, a truncated or corrupt file, someone else's SQLite file, and a file
** written by a newer schema each give one clear FS_DB message naming the path;
** a second tuner that holds the write lock is waited for (busy_timeout) and
** only reported after FS_STORE_BUSY_MS.  Every write is one BEGIN IMMEDIATE
** transaction: taking the write lock up front means a transaction never has
** to be upgraded from a read snapshot, which WAL mode cannot wait for.
*/
#include "store_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- errors --------------------------------------------------------------- */

int fs_store__err(fs_store *s, int status, const char *fmt, ...) {
  char body[FS_STORE_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  char prefix[FS_STORE_ERRMSG_MAX];
  size_t plen = strlen(s->path ? s->path : "?");
  /* A path longer than the message keeps its tail, the informative part. */
  const char *path = s->path ? s->path : "?";
  if (plen > 200) path += plen - 200;
  snprintf(prefix, sizeof prefix, "tuning database '%s%s': ",
           path != s->path && s->path ? "..." : "", path);
  fs_store__set_msg(s, prefix, body);
  return status;
}

void fs_store__set_msg(fs_store *s, const char *prefix, const char *msg) {
  size_t cap = sizeof s->errmsg, n = 0;
  for (const char *p = prefix; p && *p && n + 1 < cap; p++) s->errmsg[n++] = *p;
  for (const char *p = msg; p && *p && n + 1 < cap; p++) s->errmsg[n++] = *p;
  s->errmsg[n] = 0;
}

const char *fs_store__rcname(int rc) {
  switch (rc & 0xff) {
    case SQLITE_ERROR: return "SQLITE_ERROR";
    case SQLITE_INTERNAL: return "SQLITE_INTERNAL";
    case SQLITE_PERM: return "SQLITE_PERM";
    case SQLITE_ABORT: return "SQLITE_ABORT";
    case SQLITE_BUSY: return "SQLITE_BUSY";
    case SQLITE_LOCKED: return "SQLITE_LOCKED";
    case SQLITE_NOMEM: return "SQLITE_NOMEM";
    case SQLITE_READONLY: return "SQLITE_READONLY";
    case SQLITE_INTERRUPT: return "SQLITE_INTERRUPT";
    case SQLITE_IOERR: return "SQLITE_IOERR";
    case SQLITE_CORRUPT: return "SQLITE_CORRUPT";
    case SQLITE_FULL: return "SQLITE_FULL";
    case SQLITE_CANTOPEN: return "SQLITE_CANTOPEN";
    case SQLITE_PROTOCOL: return "SQLITE_PROTOCOL";
    case SQLITE_SCHEMA: return "SQLITE_SCHEMA";
    case SQLITE_TOOBIG: return "SQLITE_TOOBIG";
    case SQLITE_CONSTRAINT: return "SQLITE_CONSTRAINT";
    case SQLITE_MISMATCH: return "SQLITE_MISMATCH";
    case SQLITE_MISUSE: return "SQLITE_MISUSE";
    case SQLITE_NOTADB: return "SQLITE_NOTADB";
    default: return "SQLITE_?";
  }
}

/* A hint for the codes a user can act on. */
static const char *rc_hint(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "another process held the database for more than 10 s";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return "the file is damaged or not a tuning database: move it away and "
             "retune, or restore a good copy";
    case SQLITE_READONLY:
      return "the file or its directory is not writable";
    case SQLITE_FULL:
      return "the disk is full";
    default:
      return NULL;
  }
}

int fs_store__sqlfail(fs_store *s, int rc, const char *what, const char *file,
                      int line) {
  const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
  const char *hint = rc_hint(rc);
  char sys[96] = "";
  int e = s->db ? sqlite3_system_errno(s->db) : 0;
  if ((rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_IOERR) {
    if (e) snprintf(sys, sizeof sys, ", %s", strerror(e));
  }
  fs_store__err(s, (rc & 0xff) == SQLITE_NOMEM ? FS_OUT_OF_MEMORY : FS_DB,
                "%s: %s (%s%s%s%s) at %s:%d", what, msg, fs_store__rcname(rc),
                sys, hint ? "; " : "", hint ? hint : "", file, line);
  return (rc & 0xff) == SQLITE_NOMEM ? FS_OUT_OF_MEMORY : FS_DB;
}

const char *fs_store_errmsg(const fs_store *store) {
  return store ? store->errmsg : "";
}

const char *fs_store_path(const fs_store *store) {
  return store ? store->path : "";
}

int fs_store_file_version(const fs_store *store) {
  return store ? store->file_version : 0;
}

void fs_store_free(void *p) { free(p); }

int fs_store__grow(void **arr, int *cap, int n, size_t size, int first) {
  if (n < *cap) return 0;
  int ncap = *cap ? 2 * *cap : first;
  void *na = realloc(*arr, (size_t)ncap * size);
  if (!na) return -1;
  *arr = na;
  *cap = ncap;
  return 0;
}

/* ---- small helpers -------------------------------------------------------- */

int fs_store__prepare(fs_store *s, const char *sql, sqlite3_stmt **ppStmt,
                      const char *what, const char *file, int line) {
  int rc = sqlite3_prepare_v2(s->db, sql, -1, ppStmt, NULL);
  if (rc != SQLITE_OK) {
    *ppStmt = NULL;
    return fs_store__sqlfail(s, rc, what, file, line);
  }
  return FS_OK;
}

/* PRAGMA journal_mode=WAL upgrades a lock without the busy handler when a
** second process is creating the schema at the same moment (SQLite returns
** SQLITE_BUSY at once to avoid a deadlock), so retry for up to
** FS_STORE_BUSY_MS before reporting it. */
static int switch_to_wal(fs_store *s) {
  int rc = SQLITE_BUSY;
  for (int waited = 0; waited <= FS_STORE_BUSY_MS; waited += 20) {
    rc = sqlite3_exec(s->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
    sqlite3_sleep(20);
  }
  if (rc != SQLITE_OK) return fs_store__sqlfail(s, rc, "switching to WAL", __FILE__, __LINE__);
  return FS_OK;
}

int fs_store__exec(fs_store *s, const char *sql, const char *what) {
  int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK) return fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  return FS_OK;
}

int fs_store__begin(fs_store *s, const char *what) {
  if (s->flags & FS_STORE_READONLY)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: the store was opened read-only", what);
  int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  return FS_OK;
}

int fs_store__commit(fs_store *s, const char *what) {
  int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    int st = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
    fs_store__rollback(s);
    return st;
  }
  return FS_OK;
}

void fs_store__rollback(fs_store *s) {
  if (s->db && !sqlite3_get_autocommit(s->db))
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int fs_store__bind_text(sqlite3_stmt *st, int i, const char *str) {
  return str ? sqlite3_bind_text(st, i, str, -1, SQLITE_TRANSIENT)
             : sqlite3_bind_null(st, i);
}

int fs_store__bind_opt_double(sqlite3_stmt *st, int i, double v) {
  /* !(v >= 0) also catches NaN */
  return (v >= 0 && isfinite(v)) ? sqlite3_bind_double(st, i, v)
                                 : sqlite3_bind_null(st, i);
}

int fs_store__bind_opt_int(sqlite3_stmt *st, int i, long long v) {
  return v >= 0 ? sqlite3_bind_int64(st, i, v) : sqlite3_bind_null(st, i);
}

double fs_store__col_opt_double(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? -1.0
                                                    : sqlite3_column_double(st, i);
}

int fs_store__col_opt_int(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? -1
                                                    : sqlite3_column_int(st, i);
}

const char *fs_store__col_text(sqlite3_stmt *st, int i) {
  return (const char *)sqlite3_column_text(st, i);
}

int fs_store__copy(char *dst, size_t cap, const char *src) {
  if (!src) src = "";
  size_t n = strlen(src);
  if (n >= cap) {
    memcpy(dst, src, cap - 1);
    dst[cap - 1] = 0;
    return -1;
  }
  memcpy(dst, src, n + 1);
  return 0;
}

int fs_store__check_str(fs_store *s, const char *what, const char *str,
                        size_t max) {
  if (!str || !*str)
    return fs_store__err(s, FS_INVALID_ARGUMENT, "%s is %s: it is required",
                         what, str ? "empty" : "NULL");
  return fs_store__check_opt_str(s, what, str, max);
}

int fs_store__check_opt_str(fs_store *s, const char *what, const char *str,
                            size_t max) {
  if (str && strlen(str) > max)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s '%.40s...' is %zu bytes: the limit is %zu", what,
                         str, strlen(str), max);
  return FS_OK;
}

const char *fs_store_outcome_name(int outcome) {
  switch (outcome) {
    case FS_STORE_OUTCOME_OK: return "ok";
    case FS_STORE_OUTCOME_COMPILE_FAILED: return "compile-failed";
    case FS_STORE_OUTCOME_RUN_FAILED: return "run-failed";
    case FS_STORE_OUTCOME_WRONG: return "wrong";
    case FS_STORE_OUTCOME_SPILLS: return "spills";
    default: return NULL;
  }
}

int fs_store_outcome_parse(const char *name) {
  for (int i = 0; i <= FS_STORE_OUTCOME_SPILLS; i++)
    if (name && strcmp(name, fs_store_outcome_name(i)) == 0) return i;
  return -1;
}

const char *fs_store_dtype_name(int dtype) {
  switch (dtype) {
    case FS_DTYPE_BF16: return "bf16";
    case FS_DTYPE_FP16: return "fp16";
    default: return NULL;
  }
}

int fs_store_dtype_parse(const char *name) {
  if (!name) return -1;
  if (strcmp(name, "bf16") == 0) return FS_DTYPE_BF16;
  if (strcmp(name, "fp16") == 0) return FS_DTYPE_FP16;
  return -1;
}

const char *fs_store_mode_name(int mode) {
  switch (mode) {
    case FS_STORE_MODE_TOKEN: return "token";
    case FS_STORE_MODE_GROUP16: return "group16";
    case FS_STORE_MODE_GREEDY: return "greedy";
    default: return NULL;
  }
}

int fs_store_mode_parse(const char *name) {
  for (int i = 0; i < FS_STORE_MODES; i++)
    if (name && strcmp(name, fs_store_mode_name(i)) == 0) return i;
  return -1;
}

int fs_store__check_mode(fs_store *s, const char *what, const char *field,
                         int mode) {
  if (fs_store_mode_name(mode)) return FS_OK;
  return fs_store__err(s, FS_INVALID_ARGUMENT,
                       "%s: %s=%d: must be an fs_store_mode (0 token, "
                       "1 group16, 2 greedy)", what, field, mode);
}

/* ---- open / close ---------------------------------------------------------- */

/* Reads application_id, user_version and the number of schema entries in one
** read transaction.  This is the first read of the file, so a file that is
** not SQLite or whose header is damaged fails here. */
static int read_header(fs_store *s, int *app_id, int *version, int *n_schema) {
  sqlite3_stmt *st;
  int status = FS_STORE_PREPARE(
      s,
      "SELECT (SELECT application_id FROM pragma_application_id),"
      " (SELECT user_version FROM pragma_user_version),"
      " (SELECT count(*) FROM sqlite_schema)",
      &st, "reading the file header");
  if (status) return status;
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    status = fs_store__sqlfail(s, rc, "reading the file header", __FILE__,
                               __LINE__);
    sqlite3_finalize(st);
    return status;
  }
  *app_id = sqlite3_column_int(st, 0);
  *version = sqlite3_column_int(st, 1);
  *n_schema = sqlite3_column_int(st, 2);
  sqlite3_finalize(st);
  return FS_OK;
}

int fs_store_check(fs_store *s) {
  sqlite3_stmt *st;
  int status = FS_STORE_PREPARE(s, "PRAGMA quick_check(3)", &st,
                                "checking integrity (quick_check)");
  if (status) return status;
  char report[512] = "";
  int rc, rows = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *line = fs_store__col_text(st, 0);
    if (rows++ == 0 && line && strcmp(line, "ok") == 0) continue;
    size_t used = strlen(report);
    snprintf(report + used, sizeof report - used, "%s%s", used ? "; " : "",
             line ? line : "?");
  }
  if (rc != SQLITE_DONE) {
    status = fs_store__sqlfail(s, rc, "checking integrity (quick_check)",
                               __FILE__, __LINE__);
  } else if (report[0]) {
    status = fs_store__err(
        s, FS_DB,
        "failed the integrity check (quick_check): %s; the file is damaged: "
        "move it away and retune, or restore a good copy", report);
  }
  sqlite3_finalize(st);
  return status;
}

/* Checks application_id/user_version; *action is 0 (use as is), 1 (create the
** schema in an empty file) or 2 (migrate). */
static int judge_header(fs_store *s, int app_id, int version, int n_schema,
                        int *action) {
  *action = 0;
  if (app_id != 0 && app_id != FS_STORE_APPLICATION_ID)
    return fs_store__err(s, FS_DB,
                         "not a flashsampling tuning database (an SQLite file "
                         "of another application: application_id 0x%08x)",
                         (unsigned)app_id);
  if (version > FS_STORE_SCHEMA_VERSION)
    return fs_store__err(s, FS_DB,
                         "schema version %d is newer than this flashsampling "
                         "knows (%d): it was written by a newer fs-tune; "
                         "upgrade flashsampling or use another database",
                         version, FS_STORE_SCHEMA_VERSION);
  if (version == 0) {
    if (n_schema != 0)
      return fs_store__err(s, FS_DB,
                           "not a flashsampling tuning database (an SQLite "
                           "file with %d tables or indexes but no schema "
                           "version)", n_schema);
    *action = 1;
    return FS_OK;
  }
  if (version < 0)
    return fs_store__err(s, FS_DB, "invalid schema version %d", version);
  if (version < FS_STORE_SCHEMA_VERSION) *action = 2;
  return FS_OK;
}

/* Creates or migrates the schema of a writable connection in one
** transaction.  Re-reads the header under the write lock, since another
** process may have created the schema meanwhile. */
static int prepare_schema(fs_store *s) {
  int app_id, version, n_schema, action;
  int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return fs_store__sqlfail(s, rc, "locking to check the schema", __FILE__,
                             __LINE__);
  int status = read_header(s, &app_id, &version, &n_schema);
  if (!status) status = judge_header(s, app_id, version, n_schema, &action);
  if (!status) {
    s->file_version = version;
    if (action == 1) status = fs_store__create_schema(s);
    else if (action == 2) status = fs_store__migrate(s, version);
  }
  if (status) {
    fs_store__rollback(s);
    return status;
  }
  return fs_store__commit(s, "committing the schema");
}

/* Read-only open of an older schema: copy the file into a private in-memory
** database and migrate that, so readers understand old files without
** writing them. */
static int migrate_in_memory(fs_store *s, int version) {
  sqlite3 *mem = NULL;
  int rc = sqlite3_open_v2(":memory:", &mem,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_close(mem);
    return fs_store__err(s, FS_OUT_OF_MEMORY,
                         "opening an in-memory copy to migrate schema %d: %s",
                         version, sqlite3_errstr(rc));
  }
  sqlite3_backup *b = sqlite3_backup_init(mem, "main", s->db, "main");
  if (!b) {
    fs_store__err(s, FS_DB, "copying schema-%d file to memory: %s", version,
                  sqlite3_errmsg(mem));
    sqlite3_close(mem);
    return FS_DB;
  }
  rc = sqlite3_backup_step(b, -1);
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) {
    int st = fs_store__sqlfail(s, rc, "copying an old-schema file to memory",
                               __FILE__, __LINE__);
    sqlite3_close(mem);
    return st;
  }
  sqlite3_close(s->db);
  s->db = mem;
  s->in_memory = 1;
  int st = fs_store__exec(s, "BEGIN", "migrating an in-memory copy");
  if (!st) st = fs_store__migrate(s, version);
  if (st) {
    fs_store__rollback(s);
    return st;
  }
  st = fs_store__exec(s, "COMMIT", "migrating an in-memory copy");
  if (!st) st = fs_store__exec(s, "PRAGMA query_only=1", "freezing the copy");
  return st;
}

static int open_fail(fs_store *s, int status, char *err, size_t errlen) {
  if (err && errlen) snprintf(err, errlen, "%s", s->errmsg);
  fs_store_close(s);
  return status;
}

int fs_store_open(const char *path, int flags, fs_store **ppStore, char *err,
                  size_t errlen) {
  if (err && errlen) err[0] = 0;
  if (!ppStore) {
    if (err && errlen) snprintf(err, errlen, "fs_store_open: ppStore is NULL");
    return FS_INVALID_ARGUMENT;
  }
  *ppStore = NULL;
  if (!path || !*path) {
    if (err && errlen)
      snprintf(err, errlen, "fs_store_open: the database path is %s",
               path ? "empty" : "NULL");
    return FS_INVALID_ARGUMENT;
  }
  if ((flags & ~(FS_STORE_READONLY | FS_STORE_CREATE | FS_STORE_QUICK_CHECK)) ||
      ((flags & FS_STORE_READONLY) && (flags & FS_STORE_CREATE))) {
    if (err && errlen)
      snprintf(err, errlen,
               "tuning database '%s': flags 0x%x: use 0, FS_STORE_CREATE or "
               "FS_STORE_READONLY [| FS_STORE_QUICK_CHECK]", path, flags);
    return FS_INVALID_ARGUMENT;
  }
  fs_store *s = calloc(1, sizeof *s);
  if (s) s->path = strdup(path);
  if (!s || !s->path) {
    free(s);
    if (err && errlen) snprintf(err, errlen, "fs_store_open: out of memory");
    return FS_OUT_OF_MEMORY;
  }
  s->flags = flags;
  int readonly = (flags & FS_STORE_READONLY) != 0;

  /* SQLite's own message for a missing file ("unable to open database
  ** file") does not say which; stat first. */
  struct stat sb;
  if (stat(path, &sb) != 0) {
    int e = errno;
    if (e != ENOENT || !(flags & FS_STORE_CREATE))
      return open_fail(s,
                       fs_store__err(s, FS_DB, "cannot open%s: %s",
                                     readonly ? " read-only" : "",
                                     strerror(e)),
                       err, errlen);
  } else if (S_ISDIR(sb.st_mode)) {
    return open_fail(s, fs_store__err(s, FS_DB, "is a directory"), err,
                     errlen);
  }

  int oflags = readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (flags & FS_STORE_CREATE) oflags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path, &s->db, oflags, NULL);
  if (rc != SQLITE_OK)
    return open_fail(s, fs_store__sqlfail(s, rc, "opening", __FILE__, __LINE__),
                     err, errlen);
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, FS_STORE_BUSY_MS);

  int app_id, version, n_schema, action;
  int st = read_header(s, &app_id, &version, &n_schema);
  if (!st && (!readonly || (flags & FS_STORE_QUICK_CHECK)))
    st = fs_store_check(s);
  if (st) return open_fail(s, st, err, errlen);

  if (readonly) {
    st = judge_header(s, app_id, version, n_schema, &action);
    if (!st && action == 1)
      st = fs_store__err(s, FS_DB,
                         "not a flashsampling tuning database (empty file, "
                         "no schema)");
    if (st) return open_fail(s, st, err, errlen);
    s->file_version = version;
    if (action == 2) {
      st = migrate_in_memory(s, version);
      if (st) return open_fail(s, st, err, errlen);
    }
  } else {
    /* WAL: readers (the runtime, `fs-tune list`) never block a tuner.  It
    ** is a property of the file, so this is a no-op after the first time.
    ** A file system without shared memory keeps the rollback journal,
    ** which is slower but just as correct. */
    st = switch_to_wal(s);
    if (!st)
      st = fs_store__exec(s, "PRAGMA synchronous=NORMAL",
                          "setting synchronous");
    if (!st) st = prepare_schema(s);
    if (st) return open_fail(s, st, err, errlen);
  }
  st = fs_store__exec(s, "PRAGMA foreign_keys=ON", "enabling foreign keys");
  if (st) return open_fail(s, st, err, errlen);
  *ppStore = s;
  return FS_OK;
}

void fs_store_close(fs_store *store) {
  if (!store) return;
  if (store->db) {
    fs_store__rollback(store);
    /* sqlite3_close_v2 defers the close if a statement leaked; none should. */
    sqlite3_close_v2(store->db);
  }
  free(store->path);
  free(store);
}

