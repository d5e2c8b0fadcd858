/*
** embedded.h: the generator's Lua files and the CUDA templates, compiled into
** the library by scripts/embed.cmake so it needs no files at run time.
*/
#ifndef FS_EMBEDDED_H
#define FS_EMBEDDED_H

#include <stddef.h>

typedef struct fs_embedded_file {
  const char *path; /* relative to the source root, e.g. "templates/x.cu" */
  const char *data; /* NUL-terminated contents */
  size_t size;      /* bytes, without the NUL */
} fs_embedded_file;

extern const fs_embedded_file fs_embedded[]; /* ends with a NULL path */

/* The embedded file at `path`, or NULL. */
const fs_embedded_file *fs_embedded_find(const char *path);

#endif
