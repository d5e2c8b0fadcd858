/*
** gen.h: the kernel generator as seen from C (fs_gen_*).  Runs the Lua files
** of generator/ (embedded in the library) in a private lua_State opened with
** base, string, table and math only; every call into Lua is protected by
** lua_pcall with a traceback handler.  Not thread-safe: one fs_gen per
** thread (or a lock around it).
*/
#ifndef FS_GEN_H
#define FS_GEN_H

#include <stddef.h>

typedef struct fs_gen fs_gen;

/* One variant: its name (the DB key, NVRTC program name and CLI filter),
** compile target, and the values the host needs to launch it. */
typedef struct fs_variant {
  char name[160];
  char target[16];     /* NVRTC --gpu-architecture, e.g. "sm_90a" */
  char params[384];    /* "tile_v=128,tile_b=16,..." */
  char family[16];     /* "mma", "ws" */
  int arch, dtype;
  int k_multiple;      /* D must be a multiple of this for the variant */
  int tile_v, tile_b, tile_k, warps_m, warps_n, stages, load;
  int threads, smem, lastcta, persistent;
  int cluster;         /* CTAs per thread-block cluster along the vocabulary (0, 1: none) */
  int tma;             /* 1: the kernel takes W's and H's tensor maps after its params */
  int whole_tiles;     /* 1: a chunk is whole vocab tiles (at most one chunk per tile);
                       ** 0: balanced 16-row groups (at most one chunk per group) */
} fs_variant;

/* Opens a generator.  Returns 0 or an fs_status (FS_LUA, FS_OUT_OF_MEMORY)
** with a message in err. */
int fs_gen_open(fs_gen **out, char *err, size_t errlen);
void fs_gen_close(fs_gen *g);

/* The generator revision string (part of every provenance record). */
const char *fs_gen_revision(fs_gen *g);

/* Every valid variant for (arch = major*10+minor, dtype), in a fixed order.
** *list is malloc'ed (free it); *count its length. */
int fs_gen_enumerate(fs_gen *g, int arch, int dtype, fs_variant **list,
                     int *count, char *err, size_t errlen);

/* Parses and checks a variant name. */
int fs_gen_parse(fs_gen *g, const char *name, fs_variant *v, char *err,
                 size_t errlen);

/* The built-in default variant for a shape. */
int fs_gen_default(fs_gen *g, int arch, int dtype, int batch, int hidden,
                   int vocab, fs_variant *v, char *err, size_t errlen);

/* The full CUDA source of a variant (malloc'ed, NUL-terminated): the
** generator's #define block followed by the template. */
int fs_gen_source(fs_gen *g, const fs_variant *v, char **src, char *err,
                  size_t errlen);

/* The kernels that finish a call outside its variant (the second launch's
** reduction, tensor parallelism's; runtime/kernels.c), the logit bias's
** (fs_options.logit_bias_*; runtime/bias.c) and the filters' (fs_options.
** min_p, top_k, top_p; runtime/filter.c): embedded templates compiled as
** they are, each a module of the context's own, not part of the revision's
** hash. */
#define FS_REDUCE_TEMPLATE "templates/fsamp_reduce.cu"
#define FS_BIAS_TEMPLATE "templates/fsamp_bias.cu"
#define FS_FILTER_TEMPLATE "templates/fsamp_filter.cu"
#define FS_PENALTY_HEADER "templates/fs_penalty.h" /* theirs alone (the repetition penalty) */

/* 1 when the embedded file at `path` enters the revision's hash: every file
** but the three modules above and the header only two of them include. */
int fs_gen_in_revision(const char *path);

/* FNV-1a (64-bit, continuing from h) over the code of a C/CUDA (lua = 0) or
** Lua (lua = 1) source of n bytes: comments are left out and every run of
** whitespace and comments counts as one separator: in C a newline where it
** holds one (it ends a preprocessor line), else a space, C's line splices
** (backslash, newline) counting as nothing, also in // comments; in Lua a
** space, or nothing beside one of "(){},;".  String and character literals
** (Lua's long strings too) count byte for byte.  So an edit to comments or
** indentation alone keeps the hash, and an edit to code changes it, for
** sources without CR line ends, raw strings (R"(..)") or digit separators
** (1'000), which it does not parse (cpu/test_code_hash checks that the
** embedded files have none).  Used for the generator revision. */
unsigned long long fs_gen_code_hash(unsigned long long h, const char *s, size_t n, int lua);

/* Headers the templates #include, for NVRTC: names and contents; returns
** their count, or -1 if the library was built without them. */
int fs_gen_headers(const char *const **names, const char *const **contents);

#endif
