/*
** main.c: an engine's first use of an installed flashsampling: the header
** and library agree on the version, a context opens on GPU 0, and the
** kernel for the Qwen3-8B LM head at B = 256 is named (FS_LOG=1 also
** prints which shipped defaults were read).  Prints "variant <name> (<how>)";
** exits 1 with the library's message on any failure.
*/
#include <flashsampling.h>

#include <stdio.h>

int main(void) {
  if (fs_version_number() != FS_VERSION_NUMBER) {
    fprintf(stderr, "consumer: header %d, library %d\n", FS_VERSION_NUMBER, fs_version_number());
    return 1;
  }
  fs_context *ctx = NULL;
  if (fs_context_create(0, &ctx) != FS_OK) {
    fprintf(stderr, "consumer: fs_context_create: %s\n", fs_last_error(NULL));
    return 1;
  }
  fs_problem p = {0};
  p.batch = 256;
  p.hidden = 4096;
  p.vocab = 151936;
  p.dtype = FS_DTYPE_BF16;
  fs_sampling s = {0};
  s.temperature = 1.0f;
  s.num_samples = 1;
  char name[512];
  const int st = fs_variant_name(ctx, &p, &s, name, sizeof name);
  if (st != FS_OK) fprintf(stderr, "consumer: fs_variant_name: %s\n", fs_last_error(ctx));
  else printf("variant %s\n", name);
  fs_context_destroy(ctx);
  return st == FS_OK ? 0 : 1;
}
