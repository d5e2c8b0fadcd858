/*
** env.c: the library's environment knobs read as numbers (FS_TOPLP_SLICES,
** FS_BIAS_SHORT, FS_FILTER_CLUSTER, the filter module's FS_FILTER_* and
** FS_TOPLP_* measurement knobs).  A knob set to anything but a whole number
** in its range is ignored, with a line on stderr that names it, its value
** and the rule, rather than read as 0 or as its digits' prefix.  errno is
** left as it was.
*/
#include "fs_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int fs_env_int(const char *name, int lo, int hi, int *v) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  const char *d = s + (*s == '-');
  int digits = *d >= '0' && *d <= '9';
  for (const char *c = d; digits && *c; c++) digits = *c >= '0' && *c <= '9';
  char *end = NULL;
  const int saved = errno;
  errno = 0;
  const long x = digits ? strtol(s, &end, 10) : 0;
  const int range = errno;
  errno = saved;
  if (!digits || range || *end || x < lo || x > hi) {
    fprintf(stderr, "flashsampling: %s=\"%s\" ignored: not a whole number in %d..%d\n", name,
            s, lo, hi);
    return -1;
  }
  *v = (int)x;
  return 1;
}
