/*
** store_int.h: declarations shared by the files of tuning-db/:
**   store.c     open/close, errors, transactions and binding helpers
**   schema.c    the schema's DDL and the migrations between versions
**   write.c     runs, measurements, cubins, the resume query (fs-tune)
**   query.c     the winner rule, nearest lookup, listings and formats
**   transfer.c  export, merge and import between files
** Nothing outside tuning-db/ includes it.
**
** Internal functions are named fs_store__* (two underscores).  Every SQLite
** call that can fail goes through fs_store__sqlfail() (or the FS_STORE_SQL
** macro), which records what was being done, SQLite's message and the
** file:line, and returns FS_DB (FS_OUT_OF_MEMORY for SQLITE_NOMEM).
*/
#ifndef FS_STORE_INT_H
#define FS_STORE_INT_H

/* strdup, stat, unlink (the build defines it too; this covers hand builds).
** Every .c file of tuning-db/ includes this header first. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "store.h"

#include <sqlite3.h>
#include <stdarg.h>

#define FS_STORE_ERRMSG_MAX 1024

struct fs_store {
  sqlite3 *db;
  char *path;            /* as given to fs_store_open */
  int flags;             /* FS_STORE_* */
  int file_version;      /* user_version found when opened */
  int in_memory;         /* read-only copy migrated in memory */
  char errmsg[FS_STORE_ERRMSG_MAX];
};

/* Records "tuning database '<path>': <formatted>" and returns status. */
int fs_store__err(fs_store *s, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Sets s->errmsg to prefix followed by msg, truncated to fit. */
void fs_store__set_msg(fs_store *s, const char *prefix, const char *msg);

/* Records a failed SQLite call: "<path>: <what>: <errmsg> (<CODE>[, hint])
** at file:line".  rc is the failing result code. Returns FS_DB (or
** FS_OUT_OF_MEMORY). */
int fs_store__sqlfail(fs_store *s, int rc, const char *what, const char *file,
                      int line);

/* The symbolic name of an SQLite primary result code ("SQLITE_BUSY"). */
const char *fs_store__rcname(int rc);

/* Runs `call`; on a result other than OK/ROW/DONE records it and returns. */
#define FS_STORE_SQL(s, call, what)                                         \
  do {                                                                      \
    int fs_rc_ = (call);                                                    \
    if (fs_rc_ != SQLITE_OK && fs_rc_ != SQLITE_ROW && fs_rc_ != SQLITE_DONE) \
      return fs_store__sqlfail((s), fs_rc_, (what), __FILE__, __LINE__);    \
  } while (0)

/* Returns the status of `call` when it is not FS_OK. */
#define FS_STORE_TRY(call)                                                  \
  do {                                                                      \
    int fs_st_ = (call);                                                    \
    if (fs_st_ != FS_OK) return fs_st_;                                     \
  } while (0)

/* Prepares sql; on failure records `what` and returns the status. */
int fs_store__prepare(fs_store *s, const char *sql, sqlite3_stmt **ppStmt,
                      const char *what, const char *file, int line);
#define FS_STORE_PREPARE(s, sql, pp, what) \
  fs_store__prepare((s), (sql), (pp), (what), __FILE__, __LINE__)

/* Executes SQL text without results (schema scripts, pragmas). */
int fs_store__exec(fs_store *s, const char *sql, const char *what);

/* BEGIN IMMEDIATE (waits FS_STORE_BUSY_MS for another writer), COMMIT and
** ROLLBACK.  Writes are refused up front on read-only stores.  rollback
** never fails and keeps the message of the error that caused it. */
int fs_store__begin(fs_store *s, const char *what);
int fs_store__commit(fs_store *s, const char *what);
void fs_store__rollback(fs_store *s);

/* Binds text, or NULL when str is NULL.  Returns the SQLite code. */
int fs_store__bind_text(sqlite3_stmt *st, int i, const char *str);
/* Binds a double / int, or NULL when negative (unknown). */
int fs_store__bind_opt_double(sqlite3_stmt *st, int i, double v);
int fs_store__bind_opt_int(sqlite3_stmt *st, int i, long long v);
/* A column as double / int with NULL read as -1. */
double fs_store__col_opt_double(sqlite3_stmt *st, int i);
int fs_store__col_opt_int(sqlite3_stmt *st, int i);
/* A column as text; NULL reads as NULL. */
const char *fs_store__col_text(sqlite3_stmt *st, int i);

/* Copies src into dst[cap] (NULL gives ""); returns 0, or -1 when it does
** not fit (dst then holds a truncated copy). */
int fs_store__copy(char *dst, size_t cap, const char *src);

/* Makes room for element n of the array *arr of *cap elements of `size`
** bytes, doubling it (from `first`) when full.  Returns 0, or -1 when out of
** memory (then *arr and *cap are unchanged). */
int fs_store__grow(void **arr, int *cap, int n, size_t size, int first);

/* Checks a required string argument: non-NULL, non-empty, <= max bytes.
** Records an FS_INVALID_ARGUMENT message naming `what` otherwise. */
int fs_store__check_str(fs_store *s, const char *what, const char *str,
                        size_t max);
/* The same for an optional string (NULL allowed). */
int fs_store__check_opt_str(fs_store *s, const char *what, const char *str,
                            size_t max);

/* Checks an fs_store_mode argument; the FS_INVALID_ARGUMENT message names
** what was being done (`what`), the field ("key.mode"), its value and the
** allowed values. */
int fs_store__check_mode(fs_store *s, const char *what, const char *field,
                         int mode);

/* Checks a listing filter (may be NULL): its mode, when set, must be a mode
** name.  FS_INVALID_ARGUMENT naming the value and the names otherwise. */
int fs_store__check_filter(fs_store *s, const char *what,
                           const fs_store_filter *filter);

/* The SQL expression for "now" in our time format. */
#define FS_STORE_NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

/* schema.c: creates the current schema in an empty file, or migrates from
** `from_version` to FS_STORE_SCHEMA_VERSION.  Runs inside the caller's
** transaction; foreign keys must be off (they are during open). */
int fs_store__create_schema(fs_store *s);
int fs_store__migrate(fs_store *s, int from_version);

/* query.c: the winner of one exact key (the rule in store.h) in `mode`
** (an fs_store_mode the caller checked).  load_cubin 0 fills
** has_cubin/cubin_size only.  c->match is EXACT or NONE. */
int fs_store__winner(fs_store *s, const char *device_name, const char *arch,
                     int dtype, int hidden, int vocab, int bucket, int mode,
                     int load_cubin, fs_store_choice *c);

/* The keys (device, arch, dtype, D, V, bucket, mode) with an 'ok'
** measurement that match filter (may be NULL; its variant field is ignored;
** the caller checked it with fs_store__check_filter), sorted by device,
** arch, dtype, D, V, bucket, then mode in enum order.  *pKeys is malloc'd
** (free() it); keys with a dtype or mode this code does not know are
** skipped. */
typedef struct fs_store__tkey {
  char device_name[FS_STORE_SHORT_MAX + 1], arch[FS_STORE_SHORT_MAX + 1];
  int dtype, hidden, vocab, bucket, mode;
} fs_store__tkey;
int fs_store__tuned_keys(fs_store *s, const fs_store_filter *filter,
                         fs_store__tkey **pKeys, int *pCount);

#endif /* FS_STORE_INT_H */
