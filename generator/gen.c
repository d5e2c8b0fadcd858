/*
** gen.c: embeds Lua 5.4 to run the generator (see gen.h).  The Lua files and
** templates come from the library's embedded copy (runtime/embedded.h);
** `fs_require(path)` is the only way Lua reaches them.
*/
#include "gen.h"

#include "embedded.h"
#include "flashsampling.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fs_gen {
  lua_State *L;
  int ref_fsgen;      /* registry ref of the fsgen module table */
  char revision[64];
};

/* fs_require(path): runs an embedded Lua file once and caches its result. */
static int l_require(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "fs_loaded");
  lua_getfield(L, -1, path);
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  const fs_embedded_file *f = fs_embedded_find(path);
  if (!f) return luaL_error(L, "fs_require: no embedded file '%s'", path);
  char chunk[256];
  snprintf(chunk, sizeof chunk, "@%s", path);
  if (luaL_loadbufferx(L, f->data, f->size, chunk, "t") != LUA_OK)
    return lua_error(L);
  lua_call(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, path);
  return 1;
}

/* Message handler: appends a traceback (as lua.c does). */
static int l_traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = luaL_tolstring(L, 1, NULL);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Calls fsgen[fn] with nargs arguments already pushed; nres results.
** On error copies the message (with traceback) to err. */
static int call(fs_gen *g, const char *fn, int nargs, int nres, char *err,
                size_t errlen) {
  lua_State *L = g->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, l_traceback);
  lua_rawgeti(L, LUA_REGISTRYINDEX, g->ref_fsgen);
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  lua_rotate(L, base + 1, 2); /* handler, function, args... */
  if (lua_pcall(L, nargs, nres, base + 1) != LUA_OK) {
    snprintf(err, errlen, "generator: %s", lua_tostring(L, -1));
    lua_settop(L, base);
    return FS_LUA;
  }
  lua_remove(L, base + 1); /* the handler */
  return FS_OK;
}

static void open_libs(lua_State *L) {
  static const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base},
                                  {LUA_STRLIBNAME, luaopen_string},
                                  {LUA_TABLIBNAME, luaopen_table},
                                  {LUA_MATHLIBNAME, luaopen_math},
                                  {NULL, NULL}};
  for (const luaL_Reg *l = libs; l->func; l++) {
    luaL_requiref(L, l->name, l->func, 1);
    lua_pop(L, 1);
  }
  /* base's file loaders reach the file system: the generator needs none. */
  lua_pushnil(L); lua_setglobal(L, "dofile");
  lua_pushnil(L); lua_setglobal(L, "loadfile");
}

/* FNV-1a of one byte. */
static unsigned long long fnv_byte(unsigned long long h, unsigned char c) {
  return (h ^ c) * 1099511628211ull;
}

/* Length of a Lua long bracket "[==[" at s (its level + 2), or 0. */
static size_t lua_long_open(const char *s, size_t n) {
  size_t i = 1;
  if (n < 2 || s[0] != '[') return 0;
  while (i < n && s[i] == '=') i++;
  return i < n && s[i] == '[' ? i + 1 : 0;
}

/* Index just past the long bracket's close "]==]" of the same level as the
** open of length `open` (or n if it never closes). */
static size_t lua_long_close(const char *s, size_t n, size_t i, size_t open) {
  const size_t level = open - 2;
  for (; i < n; i++) {
    if (s[i] != ']') continue;
    size_t j = i + 1, e = 0;
    while (j < n && s[j] == '=') j++, e++;
    if (e == level && j < n && s[j] == ']') return j + 1;
  }
  return n;
}

/* Is ch one of Lua's tokens that never join a neighbour into another? */
static int lua_lone(unsigned char ch) { return ch && strchr("(){},;", ch) != NULL; }

/* Length of a C line splice (backslash, newline) at s[i], or 0. */
static size_t splice_len(const char *s, size_t n, size_t i) {
  if (s[i] != '\\') return 0;
  if (i + 1 < n && s[i + 1] == '\n') return 2;
  return i + 2 < n && s[i + 1] == '\r' && s[i + 2] == '\n' ? 3 : 0;
}

/* See gen.h. */
unsigned long long fs_gen_code_hash(unsigned long long h, const char *s, size_t n, int lua) {
  int gap = 0, nl = 0, any = 0; /* whitespace or comments pending; held a newline; code seen */
  unsigned char last = 0;       /* the last byte hashed */
  size_t i = 0;
  while (i < n) {
    const unsigned char c = (unsigned char)s[i];
    size_t skip = 0; /* a comment's length: whitespace for the hash */
    if (!lua && (skip = splice_len(s, n, i)) != 0) { /* C joins the lines: nothing */
      i += skip;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
      gap = 1;
      nl |= c == '\n' && !lua; /* newlines end C's preprocessor lines */
      i++;
      continue;
    }
    if (!lua && c == '/' && i + 1 < n && (s[i + 1] == '/' || s[i + 1] == '*')) {
      size_t j = i + 2;
      if (s[i + 1] == '/') { /* to the line's end, through splices */
        for (size_t sp; j < n && s[j] != '\n'; j += (sp = splice_len(s, n, j)) ? sp : 1) {}
      } else {
        while (j + 1 < n && !(s[j] == '*' && s[j + 1] == '/')) j++; /* one space, as in C */
        j = j + 1 < n ? j + 2 : n;
      }
      skip = j - i;
    } else if (lua && c == '-' && i + 1 < n && s[i + 1] == '-') {
      const size_t open = lua_long_open(s + i + 2, n - i - 2);
      size_t j = i + 2;
      if (open) j = lua_long_close(s, n, i + 2 + open, open);
      else while (j < n && s[j] != '\n') j++;
      skip = j - i;
    }
    if (skip) {
      gap = 1;
      i += skip;
      continue;
    }
    /* a separator wherever it could matter: always in C (a space before
    ** "(" makes a #define object-like), in Lua not beside a lone token */
    if (gap && any && (!lua || !(lua_lone(last) || lua_lone(c))))
      h = fnv_byte(h, nl ? '\n' : ' ');
    gap = nl = 0;
    any = 1;
    /* literals are hashed as they are, comment markers and spaces included */
    size_t j = i + 1;
    const size_t open = lua ? lua_long_open(s + i, n - i) : 0;
    if (open) {
      j = lua_long_close(s, n, i + open, open);
    } else if (c == '"' || c == '\'') {
      while (j < n && s[j] != (char)c && s[j] != '\n') j += s[j] == '\\' && j + 1 < n ? 2 : 1;
      if (j < n && s[j] == (char)c) j++;
    }
    for (; i < j; i++) h = fnv_byte(h, (unsigned char)s[i]);
    last = (unsigned char)s[j - 1];
  }
  return h;
}

/* FNV-1a over every embedded file's path and code (fs_gen_code_hash:
** comments and the width of whitespace left out): changes whenever the
** generator, a template or a shared header changes what it computes, so
** tuning results of older code are never mistaken for current ones, while
** an edit to comments alone keeps them.  Except templates/fsamp_reduce.cu,
** fsamp_bias.cu and fsamp_filter.cu, the modules of their own of the
** reductions that finish a call, the logit bias and the filters (runtime/
** kernels.c, bias.c, filter.c), and templates/fs_penalty.h, which only the
** last two include: no variant includes them, so a change to them changes
** no tuned kernel (the second launch's reduction is fs_reduce_items, in
** fs_device.h, which every variant includes). */
int fs_gen_in_revision(const char *path) {
  return strcmp(path, FS_REDUCE_TEMPLATE) && strcmp(path, FS_BIAS_TEMPLATE) &&
         strcmp(path, FS_FILTER_TEMPLATE) && strcmp(path, FS_PENALTY_HEADER);
}

static unsigned long long content_hash(void) {
  unsigned long long h = 1469598103934665603ull;
  for (const fs_embedded_file *f = fs_embedded; f->path; f++) {
    if (!fs_gen_in_revision(f->path)) continue;
    const size_t pl = strlen(f->path);
    for (size_t i = 0; i < pl; i++) h = fnv_byte(h, (unsigned char)f->path[i]);
    h = fs_gen_code_hash(h, f->data, f->size, pl > 4 && !strcmp(f->path + pl - 4, ".lua"));
  }
  return h;
}

static int l_open(lua_State *L) {
  open_libs(L);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "fs_loaded");
  lua_register(L, "fs_require", l_require);
  lua_pushcfunction(L, l_require);
  lua_pushstring(L, "generator/fsgen.lua");
  lua_call(L, 1, 1);
  /* REVISION = the Lua file's base revision + the content hash */
  char rev[96];
  lua_getfield(L, -1, "REVISION");
  snprintf(rev, sizeof rev, "%s-%08x", lua_tostring(L, -1), (unsigned)(content_hash() >> 32));
  lua_pushstring(L, rev);
  lua_setfield(L, -3, "REVISION");
  lua_pop(L, 1);
  return 1;
}

int fs_gen_open(fs_gen **out, char *err, size_t errlen) {
  *out = NULL;
  fs_gen *g = calloc(1, sizeof *g);
  if (!g) {
    snprintf(err, errlen, "generator: out of memory");
    return FS_OUT_OF_MEMORY;
  }
  g->L = luaL_newstate();
  if (!g->L) {
    free(g);
    snprintf(err, errlen, "generator: cannot create a Lua state");
    return FS_OUT_OF_MEMORY;
  }
  lua_State *L = g->L;
  lua_pushcfunction(L, l_traceback);
  lua_pushcfunction(L, l_open);
  if (lua_pcall(L, 0, 1, 1) != LUA_OK) {
    snprintf(err, errlen, "generator: %s", lua_tostring(L, -1));
    fs_gen_close(g);
    return FS_LUA;
  }
  lua_getfield(L, -1, "REVISION");
  snprintf(g->revision, sizeof g->revision, "%s",
           lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
  lua_pop(L, 1);
  g->ref_fsgen = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, 0);
  *out = g;
  return FS_OK;
}

void fs_gen_close(fs_gen *g) {
  if (!g) return;
  if (g->L) lua_close(g->L);
  free(g);
}

const char *fs_gen_revision(fs_gen *g) { return g->revision; }

static int int_field(lua_State *L, int idx, const char *key) {
  lua_getfield(L, idx, key);
  int v = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return v;
}

static void str_field(lua_State *L, int idx, const char *key, char *dst,
                      size_t n) {
  lua_getfield(L, idx, key);
  snprintf(dst, n, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
  lua_pop(L, 1);
}

/* Reads the variant table at the top of the stack into v (pops it). */
static int read_variant(fs_gen *g, fs_variant *v, char *err, size_t errlen) {
  lua_State *L = g->L;
  int t = lua_gettop(L);
  memset(v, 0, sizeof *v);
  str_field(L, t, "name", v->name, sizeof v->name);
  str_field(L, t, "target", v->target, sizeof v->target);
  str_field(L, t, "family", v->family, sizeof v->family);
  v->k_multiple = int_field(L, t, "k_multiple");
  v->arch = int_field(L, t, "arch");
  v->dtype = int_field(L, t, "dtype");
  v->tile_v = int_field(L, t, "tile_v");
  v->tile_b = int_field(L, t, "tile_b");
  v->tile_k = int_field(L, t, "tile_k");
  v->warps_m = int_field(L, t, "warps_m");
  v->warps_n = int_field(L, t, "warps_n");
  v->stages = int_field(L, t, "stages");
  v->load = int_field(L, t, "load");
  v->threads = int_field(L, t, "threads");
  v->smem = int_field(L, t, "smem");
  v->lastcta = int_field(L, t, "lastcta");
  v->persistent = int_field(L, t, "persistent");
  v->cluster = int_field(L, t, "cluster");
  v->tma = int_field(L, t, "tma");
  v->whole_tiles = int_field(L, t, "whole_tiles");
  lua_pushvalue(L, t);
  int st = call(g, "params", 1, 1, err, errlen);
  if (st == FS_OK) {
    snprintf(v->params, sizeof v->params, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_settop(L, t - 1);
  return st;
}

int fs_gen_enumerate(fs_gen *g, int arch, int dtype, fs_variant **list,
                     int *count, char *err, size_t errlen) {
  lua_State *L = g->L;
  *list = NULL;
  *count = 0;
  lua_pushinteger(L, arch);
  lua_pushinteger(L, dtype);
  int st = call(g, "enumerate", 2, 1, err, errlen);
  if (st) return st;
  int n = (int)luaL_len(L, -1);
  fs_variant *out = calloc(n > 0 ? (size_t)n : 1, sizeof *out);
  if (!out) {
    lua_settop(L, 0);
    snprintf(err, errlen, "generator: out of memory for %d variants", n);
    return FS_OUT_OF_MEMORY;
  }
  for (int i = 0; i < n; i++) {
    lua_geti(L, -1, i + 1);
    st = read_variant(g, &out[i], err, errlen);
    if (st) {
      free(out);
      lua_settop(L, 0);
      return st;
    }
  }
  lua_settop(L, 0);
  *list = out;
  *count = n;
  return FS_OK;
}

/* Runs fsgen.parse on a variant name.  Returns FS_OK with the variant table
** on top of the stack; FS_INVALID_ARGUMENT with the parser's reason in err
** (the name is malformed or breaks a constraint) and the stack emptied; or
** FS_LUA if the generator itself failed. */
static int parse_name(fs_gen *g, const char *name, char *err, size_t errlen) {
  lua_State *L = g->L;
  lua_pushstring(L, name);
  int st = call(g, "parse", 1, 2, err, errlen);
  if (st) return st;
  if (lua_isnil(L, -2)) {
    snprintf(err, errlen, "variant name: %s", lua_tostring(L, -1));
    lua_settop(L, 0);
    return FS_INVALID_ARGUMENT;
  }
  lua_pop(L, 1);
  return FS_OK;
}

int fs_gen_parse(fs_gen *g, const char *name, fs_variant *v, char *err,
                 size_t errlen) {
  int st = parse_name(g, name, err, errlen);
  if (st) return st;
  st = read_variant(g, v, err, errlen);
  lua_settop(g->L, 0);
  return st;
}

int fs_gen_default(fs_gen *g, int arch, int dtype, int batch, int hidden,
                   int vocab, fs_variant *v, char *err, size_t errlen) {
  lua_State *L = g->L;
  lua_pushinteger(L, arch);
  lua_pushinteger(L, dtype);
  lua_pushinteger(L, batch);
  lua_pushinteger(L, hidden);
  lua_pushinteger(L, vocab);
  int st = call(g, "default", 5, 1, err, errlen);
  if (st) return st;
  st = read_variant(g, v, err, errlen);
  lua_settop(L, 0);
  return st;
}

int fs_gen_source(fs_gen *g, const fs_variant *v, char **src, char *err,
                  size_t errlen) {
  lua_State *L = g->L;
  *src = NULL;
  int st = parse_name(g, v->name, err, errlen);
  if (st) return st;
  lua_getfield(L, -1, "template");
  char tpath[128];
  snprintf(tpath, sizeof tpath, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  st = call(g, "defines", 1, 1, err, errlen);
  if (st) return st;
  size_t dlen;
  const char *defs = lua_tolstring(L, -1, &dlen);
  const fs_embedded_file *t = fs_embedded_find(tpath);
  if (!t) {
    snprintf(err, errlen, "generator: template '%s' is not embedded", tpath);
    lua_settop(L, 0);
    return FS_INTERNAL;
  }
  char *out = malloc(dlen + t->size + 1);
  if (!out) {
    lua_settop(L, 0);
    snprintf(err, errlen, "generator: out of memory");
    return FS_OUT_OF_MEMORY;
  }
  memcpy(out, defs, dlen);
  memcpy(out + dlen, t->data, t->size + 1);
  lua_settop(L, 0);
  *src = out;
  return FS_OK;
}

/* runtime/fs_rng.h and every header under templates/, by base name; found
** once (pthread_once: contexts on several threads compile concurrently). */
enum { FS_MAX_HEADERS = 16 };
static const char *g_hnames[FS_MAX_HEADERS], *g_hdata[FS_MAX_HEADERS];
static int g_nheaders;
static pthread_once_t g_headers_once = PTHREAD_ONCE_INIT;

static void find_headers(void) {
  int k = 0;
  for (const fs_embedded_file *f = fs_embedded; f->path && k < FS_MAX_HEADERS; f++) {
    size_t len = strlen(f->path);
    int tmpl = strncmp(f->path, "templates/", 10) == 0 && !strcmp(f->path + len - 2, ".h");
    if (!tmpl && strcmp(f->path, "runtime/fs_rng.h")) continue;
    g_hnames[k] = strrchr(f->path, '/') + 1;
    g_hdata[k++] = f->data;
  }
  g_nheaders = k < 3 ? -1 : k;
}

int fs_gen_headers(const char *const **names, const char *const **contents) {
  pthread_once(&g_headers_once, find_headers);
  *names = g_hnames;
  *contents = g_hdata;
  return g_nheaders;
}
