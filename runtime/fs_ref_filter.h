/*
** fs_ref_filter.h: the CPU reference's filters (reference_filter.c), as
** reference.c calls them: from one row's logits, which tokens a filtered
** call (fs_options.min_p / top_k / top_p, flashsampling.h) draws over.
*/
#ifndef FS_REF_FILTER_H
#define FS_REF_FILTER_H

#include "fs_int.h"

#include <stdint.h>

/* A candidate's logit and row of W, the unit fs_ref_filter_row sorts. */
typedef struct fs_ref_pair {
  double z;
  int32_t v;
} fs_ref_pair;

/* One row's filters, resolved (fs_reference.h defines the four fields it
** copies into fs_ref_result: tau, kept, filter_margin, mass_margin). */
typedef struct fs_ref_filter {
  double tau;           /* K = the candidates with z >= tau; -INFINITY: all of them */
  long long kept;       /* |K|: all the row's candidates when nothing was dropped */
  double filter_margin; /* in logit units; +INFINITY when no filter dropped a candidate */
  double mass_margin;   /* top-p's; +INFINITY when top-p dropped nothing */
  int draw_k;           /* 1: draw over K alone; 0: draw as without filters */
} fs_ref_filter;

/* The filters of row b of a call with options m (m->filter set; its per-row
** arrays are host arrays) over the row's V scores z (the logits after the
** soft-cap, -inf where the token mask forbids), at temperature T (the
** row's, in double; not > 0 means greedy: nothing is filtered), into *f.
** draw_k is 0 (the unfiltered draw; kept = the candidates, tau = -inf) for
** a greedy row, a row without candidates and a row whose filter values are
** all "off"; else it is 1 and the draw is over K only, even where K holds
** every candidate.  pairs is scratch of V entries.  Cannot fail. */
void fs_ref_filter_row(const double *z, int V, double T, const fs_opts *m, int b,
                       fs_ref_pair *pairs, fs_ref_filter *f /* OUT */);

#endif /* FS_REF_FILTER_H */
