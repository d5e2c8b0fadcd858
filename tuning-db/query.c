/*
** query.c: deriving winners from raw measurements, the runtime's lookup chain
** (exact key -> nearest tuned shape of the same arch and mode -> none), and the
** listings behind `fs-tune list` and `fs-tune show`.  A key includes its
** mode (what the times are of): each mode has its own winners and nearest
** keys, but a failure in any mode disqualifies a variant in all.
**
** Winners are computed on demand from the measurements of one key (an index
** lookup on the shape, a few hundred rows), never stored, so there is one
** definition of "winner" (fs_store__winner, rule in store.h) and nothing to
** keep in sync after a merge.  Reads need no transaction: each statement sees
** one consistent snapshot in WAL mode, and the rule's two statements (the
** revision, then its rows) at worst see a newer measurement in the second,
** which is as good a winner as the first would have given.
*/
#include "store_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fs_store_choice_clear(fs_store_choice *c) {
  if (!c) return;
  free(c->cubin);
  memset(c, 0, sizeof *c);
}

const char *fs_store_match_name(int match) {
  switch (match) {
    case FS_STORE_MATCH_EXACT: return "exact";
    case FS_STORE_MATCH_NEAREST: return "nearest";
    default: return "none";
  }
}

static int check_key(fs_store *s, const char *what, const fs_store_key *key) {
  if (!key)
    return fs_store__err(s, FS_INVALID_ARGUMENT, "%s: key is NULL", what);
  FS_STORE_TRY(fs_store__check_str(s, "key.device_name", key->device_name,
                                   FS_STORE_SHORT_MAX));
  FS_STORE_TRY(fs_store__check_str(s, "key.arch", key->arch,
                                   FS_STORE_SHORT_MAX));
  if (!fs_store_dtype_name(key->dtype))
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: key.dtype=%d: must be FS_DTYPE_BF16 or "
                         "FS_DTYPE_FP16", what, key->dtype);
  if (key->hidden < 1 || key->vocab < 1 || key->bucket < 1)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: D=%d V=%d bucket=%d: each must be >= 1", what,
                         key->hidden, key->vocab, key->bucket);
  return fs_store__check_mode(s, what, "key.mode", key->mode);
}

/* ---- the winner rule -------------------------------------------------------- */

typedef struct candidate {
  char *variant;
  int64_t id;        /* the measurement giving its time */
  double median, spread;
} candidate;

static void free_candidates(candidate *c, int n) {
  for (int i = 0; i < n; i++) free(c[i].variant);
  free(c);
}

/* Binds ?1..?7 = device, arch, dtype, D, V, bucket, mode. */
static void bind_key(sqlite3_stmt *st, const fs_store_key *k) {
  fs_store__bind_text(st, 1, k->device_name);
  fs_store__bind_text(st, 2, k->arch);
  fs_store__bind_text(st, 3, fs_store_dtype_name(k->dtype));
  sqlite3_bind_int(st, 4, k->hidden);
  sqlite3_bind_int(st, 5, k->vocab);
  sqlite3_bind_int(st, 6, k->bucket);
  fs_store__bind_text(st, 7, fs_store_mode_name(k->mode));
}

/* The shape's rows in every mode (?7, the mode, is left to the caller). */
#define KEY_WHERE                                                          \
  " r.id = m.run_id AND r.device_name = ?1 AND r.arch = ?2"                \
  " AND m.dtype = ?3 AND m.hidden = ?4 AND m.vocab = ?5 AND m.bucket = ?6"

/* Step 1: the revision; *found 0 when the key has no 'ok' row in its mode. */
static int latest_revision(fs_store *s, const fs_store_key *k, char *rev,
                           size_t cap, int *found) {
  const char *what = "finding the latest tuned revision";
  sqlite3_stmt *st;
  *found = 0;
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT r.generator_rev FROM measurements m, runs r WHERE" KEY_WHERE
      " AND m.mode = ?7 AND m.outcome = 'ok'"
      " ORDER BY r.started_at DESC, r.generator_rev DESC LIMIT 1",
      &st, what));
  bind_key(st, k);
  int status = FS_OK;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *found = 1;
    if (fs_store__copy(rev, cap, fs_store__col_text(st, 0)))
      status = fs_store__err(s, FS_DB, "%s: a stored revision is too long",
                             what);
  } else if (rc != SQLITE_DONE) {
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  }
  sqlite3_finalize(st);
  return status;
}

/* Step 2: the eligible variants at `rev`, sorted by name (SQLite's BINARY
** collation is memcmp order, the same as strcmp for our strings).  The rows
** read are the key's mode's 'ok' rows and the failures of every mode (fs-tune
** verifies a candidate on every kind of call whatever it times, so a
** failure in one mode disqualifies the variant in all); 'ok' rows of other
** modes are not read at all. */
static int eligible(fs_store *s, const fs_store_key *k, const char *rev,
                    candidate **pCand, int *pN) {
  const char *what = "reading the measurements of a key";
  sqlite3_stmt *st;
  *pCand = NULL;
  *pN = 0;
  /* Within a variant: 'ok' rows first, the latest first, then the smaller
  ** median, spread and run uuid, so the row chosen does not depend on
  ** insertion order. */
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT m.variant, m.outcome, m.median_us, m.spread_us, m.id"
      " FROM measurements m, runs r WHERE" KEY_WHERE
      " AND r.generator_rev = ?8 AND (m.mode = ?7 OR m.outcome <> 'ok')"
      " ORDER BY m.variant, m.outcome <> 'ok', m.measured_at DESC,"
      "  m.median_us, coalesce(m.spread_us, 0), r.uuid",
      &st, what));
  bind_key(st, k);
  fs_store__bind_text(st, 8, rev);
  candidate *cand = NULL;
  int n = 0, cap = 0, status = FS_OK, rc;
  char *cur = NULL;   /* the variant being read */
  int cur_bad = 0;    /* it has a non-ok row */
  candidate pending;  /* its first ('ok', latest) row */
  int have_pending = 0;
  for (;;) {
    rc = sqlite3_step(st);
    const char *v = rc == SQLITE_ROW ? fs_store__col_text(st, 0) : NULL;
    if (rc == SQLITE_ROW && !v) continue; /* NOT NULL in the schema */
    int new_group = rc != SQLITE_ROW || !cur || strcmp(cur, v) != 0;
    if (new_group && cur) {
      if (have_pending && !cur_bad) {
        if (fs_store__grow((void **)&cand, &cap, n, sizeof *cand, 64)) {
          status = fs_store__err(s, FS_OUT_OF_MEMORY, "%s: %d candidates",
                                 what, 2 * cap);
          break;
        }
        pending.variant = cur;
        cand[n++] = pending;
        cur = NULL;
      }
      free(cur);
      cur = NULL;
    }
    if (rc != SQLITE_ROW) break;
    if (new_group) {
      cur = strdup(v);
      if (!cur) {
        status = fs_store__err(s, FS_OUT_OF_MEMORY, "%s", what);
        break;
      }
      cur_bad = 0;
      have_pending = 0;
    }
    const char *outcome = fs_store__col_text(st, 1);
    if (outcome && strcmp(outcome, "ok") == 0) {
      if (!have_pending) {
        pending.id = sqlite3_column_int64(st, 4);
        pending.median = sqlite3_column_double(st, 2);
        pending.spread = fs_store__col_opt_double(st, 3);
        have_pending = 1;
      }
    } else {
      cur_bad = 1; /* wrong, failed or spilled once at this revision */
    }
  }
  free(cur);
  if (!status && rc != SQLITE_DONE)
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  sqlite3_finalize(st);
  if (status) {
    free_candidates(cand, n);
    return status;
  }
  *pCand = cand;
  *pN = n;
  return FS_OK;
}

/* Steps 3 and 4 on candidates sorted by name: returns the winner's index and
** sets *pTied. */
static int pick(const candidate *c, int n, int *pTied) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (c[i].median < c[best].median) best = i; /* equal: keeps the smaller name */
  double m = c[best].median;
  double s_best = c[best].spread > 0 ? c[best].spread : 0;
  int winner = -1, tied = 0;
  for (int i = 0; i < n; i++) {
    double s_i = c[i].spread > 0 ? c[i].spread : 0;
    double tol = fmax(fmin(s_i, s_best), FS_STORE_TIE_FRACTION * m);
    if (c[i].median <= m + tol) {
      tied++;
      if (winner < 0) winner = i; /* the first in name order */
    }
  }
  *pTied = tied;
  return winner;
}

/* Fills c from measurement `id` and looks up (or loads) its cubin. */
static int fill_choice(fs_store *s, int64_t id, const char *arch,
                       int load_cubin, fs_store_choice *c) {
  const char *what = "reading the winner";
  sqlite3_stmt *st;
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT m.variant, m.params, m.median_us, m.spread_us, m.floor_us,"
      " m.source_hash, r.nvrtc_version, r.generator_rev"
      " FROM measurements m, runs r WHERE m.id = ?1 AND r.id = m.run_id",
      &st, what));
  sqlite3_bind_int64(st, 1, id);
  int status = FS_OK;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    int bad = 0;
    bad |= fs_store__copy(c->variant, sizeof c->variant,
                          fs_store__col_text(st, 0));
    bad |= fs_store__copy(c->params, sizeof c->params,
                          fs_store__col_text(st, 1));
    c->median_us = sqlite3_column_double(st, 2);
    c->spread_us = fs_store__col_opt_double(st, 3);
    c->floor_us = fs_store__col_opt_double(st, 4);
    bad |= fs_store__copy(c->source_hash, sizeof c->source_hash,
                          fs_store__col_text(st, 5));
    bad |= fs_store__copy(c->nvrtc_version, sizeof c->nvrtc_version,
                          fs_store__col_text(st, 6));
    bad |= fs_store__copy(c->generator_rev, sizeof c->generator_rev,
                          fs_store__col_text(st, 7));
    c->measurement_id = id;
    if (bad)
      status = fs_store__err(s, FS_DB,
                             "%s: measurement %lld holds a string longer than "
                             "this library's limits", what, (long long)id);
  } else if (rc == SQLITE_DONE) {
    status = fs_store__err(s, FS_DB, "%s: measurement %lld vanished", what,
                           (long long)id);
  } else {
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  }
  sqlite3_finalize(st);
  if (status || !c->source_hash[0]) return status;

  what = "reading the winner's cubin";
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      load_cubin
          ? "SELECT length(cubin), cubin FROM cubins WHERE variant = ?1"
            " AND arch = ?2 AND nvrtc_version = ?3 AND source_hash = ?4"
          : "SELECT length(cubin) FROM cubins WHERE variant = ?1"
            " AND arch = ?2 AND nvrtc_version = ?3 AND source_hash = ?4",
      &st, what));
  fs_store__bind_text(st, 1, c->variant);
  fs_store__bind_text(st, 2, arch);
  fs_store__bind_text(st, 3, c->nvrtc_version);
  fs_store__bind_text(st, 4, c->source_hash);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    c->has_cubin = 1;
    c->cubin_size = (size_t)sqlite3_column_int64(st, 0);
    if (load_cubin && c->cubin_size) {
      const void *blob = sqlite3_column_blob(st, 1);
      c->cubin = blob ? malloc(c->cubin_size) : NULL;
      if (!c->cubin)
        status = fs_store__err(s, FS_OUT_OF_MEMORY, "%s: %zu bytes", what,
                               c->cubin_size);
      else
        memcpy(c->cubin, blob, c->cubin_size);
    }
  } else if (rc != SQLITE_DONE) {
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  }
  sqlite3_finalize(st);
  return status;
}

int fs_store__winner(fs_store *s, const char *device_name, const char *arch,
                     int dtype, int hidden, int vocab, int bucket, int mode,
                     int load_cubin, fs_store_choice *c) {
  memset(c, 0, sizeof *c);
  const fs_store_key k = {device_name, arch, dtype, hidden, vocab, bucket,
                          mode};
  char rev[FS_STORE_SHORT_MAX + 1];
  int found;
  FS_STORE_TRY(latest_revision(s, &k, rev, sizeof rev, &found));
  if (!found) return FS_OK;
  candidate *cand;
  int n;
  FS_STORE_TRY(eligible(s, &k, rev, &cand, &n));
  if (n == 0) {
    free_candidates(cand, n);
    return FS_OK;
  }
  int tied;
  int w = pick(cand, n, &tied);
  int64_t id = cand[w].id;
  free_candidates(cand, n);
  int status = fill_choice(s, id, arch, load_cubin, c);
  if (status) {
    fs_store_choice_clear(c);
    return status;
  }
  c->match = FS_STORE_MATCH_EXACT;
  c->n_candidates = n;
  c->n_tied = tied;
  fs_store__copy(c->device_name, sizeof c->device_name, device_name);
  fs_store__copy(c->arch, sizeof c->arch, arch);
  c->dtype = dtype;
  c->hidden = hidden;
  c->vocab = vocab;
  c->bucket = bucket;
  c->mode = mode;
  return FS_OK;
}

int fs_store_winner(fs_store *s, const fs_store_key *key, fs_store_choice *c) {
  if (!s) return FS_INVALID_ARGUMENT;
  if (!c)
    return fs_store__err(s, FS_INVALID_ARGUMENT, "winner lookup: c is NULL");
  memset(c, 0, sizeof *c);
  FS_STORE_TRY(check_key(s, "winner lookup", key));
  return fs_store__winner(s, key->device_name, key->arch, key->dtype,
                          key->hidden, key->vocab, key->bucket, key->mode, 1,
                          c);
}

/* ---- nearest ------------------------------------------------------------------ */

typedef struct near_key {
  char *device_name;
  int hidden, vocab, bucket;
  int other_device;   /* 0 for the requested device */
  double distance;
} near_key;

static double log_gap(int a, int b) { return fabs(log((double)a) - log((double)b)); }

static int near_cmp(const void *pa, const void *pb) {
  const near_key *a = pa, *b = pb;
  if (a->distance != b->distance) return a->distance < b->distance ? -1 : 1;
  if (a->other_device != b->other_device) return a->other_device - b->other_device;
  if (a->hidden != b->hidden) return a->hidden < b->hidden ? -1 : 1;
  if (a->vocab != b->vocab) return a->vocab < b->vocab ? -1 : 1;
  if (a->bucket != b->bucket) return a->bucket < b->bucket ? -1 : 1;
  return strcmp(a->device_name, b->device_name);
}

static void free_near(near_key *k, int n) {
  for (int i = 0; i < n; i++) free(k[i].device_name);
  free(k);
}

int fs_store_nearest(fs_store *s, const fs_store_key *key,
                     fs_store_accept_fn accept, void *arg,
                     fs_store_choice *c) {
  if (!s) return FS_INVALID_ARGUMENT;
  const char *what = "nearest lookup";
  if (!c) return fs_store__err(s, FS_INVALID_ARGUMENT, "%s: c is NULL", what);
  memset(c, 0, sizeof *c);
  FS_STORE_TRY(check_key(s, what, key));
  sqlite3_stmt *st;
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT DISTINCT r.device_name, m.hidden, m.vocab, m.bucket"
      " FROM measurements m, runs r"
      " WHERE r.id = m.run_id AND r.arch = ?1 AND m.dtype = ?2"
      "   AND m.mode = ?3 AND m.outcome = 'ok'",
      &st, what));
  fs_store__bind_text(st, 1, key->arch);
  fs_store__bind_text(st, 2, fs_store_dtype_name(key->dtype));
  fs_store__bind_text(st, 3, fs_store_mode_name(key->mode));
  near_key *keys = NULL;
  int n = 0, cap = 0, status = FS_OK, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *dev = fs_store__col_text(st, 0);
    int D = sqlite3_column_int(st, 1), V = sqlite3_column_int(st, 2),
        B = sqlite3_column_int(st, 3);
    if (!dev || D < 1 || V < 1 || B < 1) continue;
    if (fs_store__grow((void **)&keys, &cap, n, sizeof *keys, 32)) {
      status = fs_store__err(s, FS_OUT_OF_MEMORY, "%s", what);
      break;
    }
    near_key *k = &keys[n];
    k->device_name = strdup(dev);
    if (!k->device_name) {
      status = fs_store__err(s, FS_OUT_OF_MEMORY, "%s", what);
      break;
    }
    n++;
    k->hidden = D;
    k->vocab = V;
    k->bucket = B;
    k->other_device = strcmp(dev, key->device_name) != 0;
    /* Summed in a fixed order from |ln a - ln b|, which is symmetric, so
    ** equal distances compare equal and the tie-breaks apply. */
    k->distance = log_gap(key->hidden, D) + log_gap(key->vocab, V) +
                  log_gap(key->bucket, B);
  }
  if (!status && rc != SQLITE_DONE)
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  sqlite3_finalize(st);
  if (status) {
    free_near(keys, n);
    return status;
  }
  if (n > 1) qsort(keys, (size_t)n, sizeof *keys, near_cmp);
  for (int i = 0; i < n; i++) {
    near_key *k = &keys[i];
    status = fs_store__winner(s, k->device_name, key->arch, key->dtype,
                              k->hidden, k->vocab, k->bucket, key->mode, 1, c);
    if (status) break;
    if (c->match == FS_STORE_MATCH_NONE) continue; /* nothing eligible */
    if (accept && !accept(arg, c)) {
      fs_store_choice_clear(c);
      continue;
    }
    c->distance = k->distance;
    c->match = (!k->other_device && k->hidden == key->hidden &&
                k->vocab == key->vocab && k->bucket == key->bucket)
                   ? FS_STORE_MATCH_EXACT
                   : FS_STORE_MATCH_NEAREST;
    break;
  }
  free_near(keys, n);
  if (status) fs_store_choice_clear(c);
  return status;
}

int fs_store_lookup(fs_store *s, const fs_store_key *key,
                    fs_store_accept_fn accept, void *arg,
                    fs_store_choice *c) {
  if (!s) return FS_INVALID_ARGUMENT;
  FS_STORE_TRY(fs_store_winner(s, key, c));
  if (c->match == FS_STORE_MATCH_EXACT && (!accept || accept(arg, c)))
    return FS_OK;
  fs_store_choice_clear(c);
  return fs_store_nearest(s, key, accept, arg, c);
}

/* ---- listings ------------------------------------------------------------------ */

/* measurements m's mode as its fs_store_mode number, for listing modes in
** enum order rather than by name (the schema's CHECK allows no other). */
#define MODE_NUMBER_SQL                                                    \
  "CASE m.mode WHEN 'token' THEN 0 WHEN 'group16' THEN 1"                 \
  " WHEN 'greedy' THEN 2 ELSE -1 END"

/* Filter columns ?1..?8: device, arch, variant, dtype, D, V, bucket,
** mode. */
#define FILTER_WHERE                                                       \
  " (?1 IS NULL OR r.device_name = ?1) AND (?2 IS NULL OR r.arch = ?2)"   \
  " AND (?3 IS NULL OR m.variant = ?3) AND (?4 IS NULL OR m.dtype = ?4)"  \
  " AND (?5 IS NULL OR m.hidden = ?5) AND (?6 IS NULL OR m.vocab = ?6)"   \
  " AND (?7 IS NULL OR m.bucket = ?7) AND (?8 IS NULL OR m.mode = ?8)"

int fs_store__check_filter(fs_store *s, const char *what,
                           const fs_store_filter *f) {
  if (f && f->mode && fs_store_mode_parse(f->mode) < 0)
    return fs_store__err(s, FS_INVALID_ARGUMENT,
                         "%s: filter mode '%.40s': must be token, group16 or "
                         "greedy (NULL for every mode)", what, f->mode);
  return FS_OK;
}

static void bind_filter(sqlite3_stmt *st, const fs_store_filter *f,
                        int with_variant) {
  if (!f) return; /* unbound parameters are NULL */
  fs_store__bind_text(st, 1, f->device_name);
  fs_store__bind_text(st, 2, f->arch);
  if (with_variant) fs_store__bind_text(st, 3, f->variant);
  if (f->dtype > 0) {
    const char *name = fs_store_dtype_name(f->dtype);
    fs_store__bind_text(st, 4, name ? name : "?");
  }
  if (f->hidden > 0) sqlite3_bind_int(st, 5, f->hidden);
  if (f->vocab > 0) sqlite3_bind_int(st, 6, f->vocab);
  if (f->bucket > 0) sqlite3_bind_int(st, 7, f->bucket);
  fs_store__bind_text(st, 8, f->mode); /* checked: a mode name or NULL */
}

int fs_store__tuned_keys(fs_store *s, const fs_store_filter *filter,
                         fs_store__tkey **pKeys, int *pCount) {
  const char *what = "listing tuned keys";
  *pKeys = NULL;
  *pCount = 0;
  FS_STORE_TRY(fs_store__check_filter(s, what, filter));
  sqlite3_stmt *st;
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT DISTINCT r.device_name, r.arch, m.dtype, m.hidden, m.vocab,"
      " m.bucket, " MODE_NUMBER_SQL " FROM measurements m, runs r"
      " WHERE r.id = m.run_id AND m.outcome = 'ok' AND" FILTER_WHERE
      " ORDER BY 1, 2, 3, 4, 5, 6, 7",
      &st, what));
  bind_filter(st, filter, 0);
  fs_store__tkey *keys = NULL;
  int n = 0, cap = 0, status = FS_OK, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int dtype = fs_store_dtype_parse(fs_store__col_text(st, 2));
    int mode = sqlite3_column_int(st, 6);
    if (dtype < 0 || !fs_store_mode_name(mode)) continue;
    if (fs_store__grow((void **)&keys, &cap, n, sizeof *keys, 32)) {
      status = fs_store__err(s, FS_OUT_OF_MEMORY, "%s", what);
      break;
    }
    fs_store__tkey *k = &keys[n];
    if (fs_store__copy(k->device_name, sizeof k->device_name,
                       fs_store__col_text(st, 0)) ||
        fs_store__copy(k->arch, sizeof k->arch, fs_store__col_text(st, 1)))
      continue; /* longer than any name we write: not ours */
    k->dtype = dtype;
    k->hidden = sqlite3_column_int(st, 3);
    k->vocab = sqlite3_column_int(st, 4);
    k->bucket = sqlite3_column_int(st, 5);
    k->mode = mode;
    n++;
  }
  if (!status && rc != SQLITE_DONE)
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  sqlite3_finalize(st);
  if (status) {
    free(keys);
    return status;
  }
  *pKeys = keys;
  *pCount = n;
  return FS_OK;
}

int fs_store_list_winners(fs_store *s, const fs_store_filter *filter,
                          fs_store_choice_fn fn, void *arg) {
  if (!s) return FS_INVALID_ARGUMENT;
  if (!fn)
    return fs_store__err(s, FS_INVALID_ARGUMENT, "listing winners: fn is NULL");
  FS_STORE_TRY(fs_store__check_filter(s, "listing winners", filter));
  fs_store__tkey *keys;
  int n;
  FS_STORE_TRY(fs_store__tuned_keys(s, filter, &keys, &n));
  int status = FS_OK;
  fs_store_choice c;
  for (int i = 0; i < n; i++) {
    fs_store__tkey *k = &keys[i];
    status = fs_store__winner(s, k->device_name, k->arch, k->dtype, k->hidden,
                              k->vocab, k->bucket, k->mode, 0, &c);
    if (status) break;
    if (c.match == FS_STORE_MATCH_NONE) continue;
    if (filter && filter->variant && strcmp(filter->variant, c.variant) != 0)
      continue;
    int stop = fn(arg, &c);
    fs_store_choice_clear(&c);
    if (stop) break;
  }
  free(keys);
  return status;
}

/* Fills a run from columns first..first+13 of `st` (see RUN_COLUMNS). */
#define RUN_COLUMNS                                                        \
  "r.id, r.uuid, r.started_at, r.finished_at, r.device_name, r.arch,"      \
  " r.sm_count, r.driver_version, r.nvrtc_version, r.generator_rev,"       \
  " r.host, r.command_line"

static void read_run(sqlite3_stmt *st, int i, fs_store_run *r) {
  memset(r, 0, sizeof *r);
  r->id = sqlite3_column_int64(st, i + 0);
  r->uuid = fs_store__col_text(st, i + 1);
  r->started_at = fs_store__col_text(st, i + 2);
  r->finished_at = fs_store__col_text(st, i + 3);
  r->device_name = fs_store__col_text(st, i + 4);
  r->arch = fs_store__col_text(st, i + 5);
  r->sm_count = fs_store__col_opt_int(st, i + 6);
  r->driver_version = fs_store__col_opt_int(st, i + 7);
  r->nvrtc_version = fs_store__col_text(st, i + 8);
  r->generator_rev = fs_store__col_text(st, i + 9);
  r->host = fs_store__col_text(st, i + 10);
  r->command_line = fs_store__col_text(st, i + 11);
  r->n_measurements = -1;
  r->n_ok = -1;
}

int fs_store_list_runs(fs_store *s, fs_store_run_fn fn, void *arg) {
  if (!s) return FS_INVALID_ARGUMENT;
  const char *what = "listing runs";
  if (!fn) return fs_store__err(s, FS_INVALID_ARGUMENT, "%s: fn is NULL", what);
  sqlite3_stmt *st;
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT " RUN_COLUMNS ","
      " (SELECT count(*) FROM measurements m WHERE m.run_id = r.id),"
      " (SELECT count(*) FROM measurements m WHERE m.run_id = r.id"
      "   AND m.outcome = 'ok')"
      " FROM runs r ORDER BY r.started_at, r.uuid",
      &st, what));
  int rc, status = FS_OK;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    fs_store_run r;
    read_run(st, 0, &r);
    r.n_measurements = sqlite3_column_int64(st, 12);
    r.n_ok = sqlite3_column_int64(st, 13);
    if (fn(arg, &r)) {
      rc = SQLITE_DONE;
      break;
    }
  }
  if (rc != SQLITE_DONE)
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  sqlite3_finalize(st);
  return status;
}

int fs_store_list_measurements(fs_store *s, const fs_store_filter *filter,
                               fs_store_measurement_fn fn, void *arg) {
  if (!s) return FS_INVALID_ARGUMENT;
  const char *what = "listing measurements";
  if (!fn) return fs_store__err(s, FS_INVALID_ARGUMENT, "%s: fn is NULL", what);
  FS_STORE_TRY(fs_store__check_filter(s, what, filter));
  sqlite3_stmt *st;
  FS_STORE_TRY(FS_STORE_PREPARE(
      s,
      "SELECT " RUN_COLUMNS ","
      " m.id, m.dtype, m.hidden, m.vocab, m.bucket, m.variant, m.params,"
      " m.source_hash, m.outcome, m.median_us, m.spread_us, m.samples,"
      " m.floor_us, m.registers, m.spills, m.smem_bytes, m.message,"
      " m.measured_at, " MODE_NUMBER_SQL
      " FROM measurements m, runs r WHERE r.id = m.run_id AND" FILTER_WHERE
      " ORDER BY r.device_name, r.arch, m.dtype, m.hidden, m.vocab, m.bucket,"
      "  m.outcome <> 'ok', m.median_us, m.variant, r.started_at, r.uuid,"
      "  " MODE_NUMBER_SQL,
      &st, what));
  bind_filter(st, filter, 1);
  int rc, status = FS_OK;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    fs_store_run r;
    fs_store_measurement m;
    read_run(st, 0, &r);
    memset(&m, 0, sizeof m);
    int i = 12;
    m.id = sqlite3_column_int64(st, i++);
    m.run_id = r.id;
    m.dtype = fs_store_dtype_parse(fs_store__col_text(st, i++));
    m.hidden = sqlite3_column_int(st, i++);
    m.vocab = sqlite3_column_int(st, i++);
    m.bucket = sqlite3_column_int(st, i++);
    m.variant = fs_store__col_text(st, i++);
    m.params = fs_store__col_text(st, i++);
    m.source_hash = fs_store__col_text(st, i++);
    m.outcome = fs_store_outcome_parse(fs_store__col_text(st, i++));
    m.median_us = fs_store__col_opt_double(st, i++);
    m.spread_us = fs_store__col_opt_double(st, i++);
    m.samples = fs_store__col_opt_int(st, i++);
    m.floor_us = fs_store__col_opt_double(st, i++);
    m.registers = fs_store__col_opt_int(st, i++);
    m.spills = fs_store__col_opt_int(st, i++);
    m.smem_bytes = fs_store__col_opt_int(st, i++);
    m.message = fs_store__col_text(st, i++);
    m.measured_at = fs_store__col_text(st, i++);
    m.mode = sqlite3_column_int(st, i++);
    if (fn(arg, &r, &m)) {
      rc = SQLITE_DONE;
      break;
    }
  }
  if (rc != SQLITE_DONE)
    status = fs_store__sqlfail(s, rc, what, __FILE__, __LINE__);
  sqlite3_finalize(st);
  return status;
}

/* ---- one-line formats (stable: CLI transcripts depend on them) ------------- */

/* snprintf into buf[n] at *pos, tracking the length the full line needs. */
static void put(char *buf, size_t n, size_t *pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void put(char *buf, size_t n, size_t *pos, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(*pos < n ? buf + *pos : NULL, *pos < n ? n - *pos : 0,
                    fmt, ap);
  va_end(ap);
  if (k > 0) *pos += (size_t)k;
}

static const char *or_q(const char *s) { return s && *s ? s : "?"; }

/* " mode=<name>" after the bucket, nothing for token: the lines of token rows
** read as they did before modes ("mode=?" for a value that is no mode). */
static void put_mode(char *buf, size_t n, size_t *pos, int mode) {
  if (mode == FS_STORE_MODE_TOKEN) return;
  put(buf, n, pos, " mode=%s", or_q(fs_store_mode_name(mode)));
}

int fs_store_format_run(const fs_store_run *r, char *buf, size_t n) {
  size_t pos = 0;
  if (buf && n) buf[0] = 0;
  if (!buf) n = 0;
  put(buf, n, &pos, "run %lld %s %s %s", (long long)r->id,
      or_q(r->started_at), or_q(r->device_name), or_q(r->arch));
  if (r->sm_count >= 0) put(buf, n, &pos, " sms=%d", r->sm_count);
  if (r->driver_version >= 0)
    put(buf, n, &pos, " driver=%d", r->driver_version);
  put(buf, n, &pos, " nvrtc=%s rev=%s", or_q(r->nvrtc_version),
      or_q(r->generator_rev));
  if (r->host) put(buf, n, &pos, " host=%s", r->host);
  if (r->n_measurements >= 0)
    put(buf, n, &pos, " measurements=%lld ok=%lld",
        (long long)r->n_measurements, (long long)r->n_ok);
  put(buf, n, &pos, " %s", r->finished_at ? "finished" : "unfinished");
  return (int)pos;
}

int fs_store_format_measurement(const fs_store_measurement *m, char *buf,
                                size_t n) {
  size_t pos = 0;
  if (buf && n) buf[0] = 0;
  if (!buf) n = 0;
  const char *dt = fs_store_dtype_name(m->dtype);
  const char *oc = fs_store_outcome_name(m->outcome);
  put(buf, n, &pos, "%s D=%d V=%d B=%d", dt ? dt : "?", m->hidden, m->vocab,
      m->bucket);
  put_mode(buf, n, &pos, m->mode);
  put(buf, n, &pos, " %s %s", or_q(m->variant), oc ? oc : "?");
  if (m->median_us >= 0) put(buf, n, &pos, " %.3f us", m->median_us);
  if (m->spread_us >= 0) put(buf, n, &pos, " +-%.3f", m->spread_us);
  if (m->floor_us >= 0) put(buf, n, &pos, " floor=%.3f", m->floor_us);
  if (m->registers >= 0) put(buf, n, &pos, " regs=%d", m->registers);
  if (m->spills >= 0) put(buf, n, &pos, " spills=%d", m->spills);
  if (m->smem_bytes >= 0) put(buf, n, &pos, " smem=%d", m->smem_bytes);
  if (m->samples >= 0) put(buf, n, &pos, " n=%d", m->samples);
  if (m->message && *m->message) {
    /* First line only: a compile log belongs to `show`, not a listing. */
    int len = (int)strcspn(m->message, "\n");
    put(buf, n, &pos, " [%.*s%s]", len > 200 ? 200 : len, m->message,
        (len > 200 || m->message[len]) ? "..." : "");
  }
  return (int)pos;
}

int fs_store_format_choice(const fs_store_choice *c, char *buf, size_t n) {
  size_t pos = 0;
  if (buf && n) buf[0] = 0;
  if (!buf) n = 0;
  if (c->match == FS_STORE_MATCH_NONE) {
    put(buf, n, &pos, "no tuned variant");
    return (int)pos;
  }
  const char *dt = fs_store_dtype_name(c->dtype);
  put(buf, n, &pos, "%s %s %s D=%d V=%d B=%d", c->device_name, c->arch,
      dt ? dt : "?", c->hidden, c->vocab, c->bucket);
  put_mode(buf, n, &pos, c->mode);
  put(buf, n, &pos, " -> %s %.3f us", c->variant, c->median_us);
  if (c->spread_us >= 0) put(buf, n, &pos, " +-%.3f", c->spread_us);
  if (c->floor_us > 0)
    put(buf, n, &pos, " (%.0f%% of floor)", 100.0 * c->floor_us / c->median_us);
  put(buf, n, &pos, " tied=%d/%d", c->n_tied, c->n_candidates);
  if (c->has_cubin) put(buf, n, &pos, " cubin=%zu B", c->cubin_size);
  else put(buf, n, &pos, " no-cubin");
  if (c->match == FS_STORE_MATCH_NEAREST)
    put(buf, n, &pos, " [nearest d=%.3f]", c->distance);
  return (int)pos;
}
