/*
** reference_filter.c: the CPU reference's filters (fs_options.min_p, top_k,
** top_p; flashsampling.h): from one sampled row's scores, the threshold tau
** of its kept set K and how near another K was.  reference.c then draws
** argmax over K of z / T + the unfiltered draw's noise.  Written to be
** obviously right first: a row's candidates are sorted (qsort, ~20 ms a row
** at V = 151936) and masses are summed in double in that order.
**
** The definition, for row b at temperature T > 0 (+inf included):
**   candidates  tokens whose score z is a number > -inf; n of them, z_max
**               the largest
**   mp          min_ps ? min_ps[b] : min_p; on when mp > 0 (NaN: off), one
**               above 1 acts as 1
**   k           top_ks ? top_ks[b] : top_k; on when 0 < k < n
**   pp          top_ps ? top_ps[b] : top_p; on when 0 < pp < 1 (NaN: off)
** With none on (or n = 0) the row draws as without filters (draw_k = 0).
** Else, if z_max = +inf, K = the +inf candidates (they hold all the mass);
** otherwise
**   1. min-p:   keep z >= z_max + T ln(mp) (double); at T = +inf every
**               candidate weighs the same and min-p keeps all;
**   2. top-k:   the survivors sorted by z descending (ties by token); keep
**               those with z >= the k-th's (all when k >= their count);
**   3. top-p:   over what 1-2 kept, w_i = exp((z_i - z_max) / T) (1 at
**               T = +inf), W = their sum in sorted order; C(x) = (the sum,
**               in the same order, of the w_i with z_i >= x) / W; keep the
**               largest distinct values down to the first x with C(x) >= pp.
** tau is the least kept z when K misses a candidate, else -inf.
** The margins (fs_reference.h): min-p's is the distance from its threshold
** to the nearest candidate z (all of the row's), top-k's and top-p's the gap
** between the least z they kept and the largest they dropped, each counted
** only where that filter dropped a candidate; mass_margin is
** min(|C_above - pp|, |C_with - pp|) at top-p's last value.
*/
#include "fs_ref_filter.h"

#include <math.h>
#include <stdlib.h>

/* Descending z, then ascending token: the order of the draw's ties. */
static int ref_pair_cmp(const void *a, const void *b) {
  const fs_ref_pair *x = a, *y = b;
  if (x->z != y->z) return x->z < y->z ? 1 : -1;
  return (x->v > y->v) - (x->v < y->v);
}

/* Top-k over pr[0 .. n) (sorted): how many it keeps; *margin lowered where
** it drops one. */
static long long ref_top_k(const fs_ref_pair *pr, long long n, long long k, double *margin) {
  if (k <= 0 || k >= n) return n;
  const double kth = pr[k - 1].z;
  long long e = k;
  while (e < n && pr[e].z == kth) e++; /* ties with the k-th */
  if (e < n && kth - pr[e].z < *margin) *margin = kth - pr[e].z;
  return e;
}

/* Top-p over pr[0 .. n) (sorted, pr[0] at z_max): how many it keeps;
** *margin and *mass lowered where it drops one. */
static long long ref_top_p(const fs_ref_pair *pr, long long n, double pp, double T,
                           double zmax, double *margin, double *mass) {
  const int flat = isinf(T); /* every candidate weighs 1 */
  double W = 0.0, C = 0.0, above = 0.0;
  long long i, e = 0;
  for (i = 0; i < n; i++) W += flat ? 1.0 : exp((pr[i].z - zmax) / T);
  while (e < n) {
    const double x = pr[e].z;
    above = C;
    for (; e < n && pr[e].z == x; e++) C += flat ? 1.0 : exp((pr[e].z - zmax) / T);
    if (C / W >= pp) break; /* C == W at the last value: reached */
  }
  if (e < n) {
    const double lo = fabs(above / W - pp), hi = fabs(C / W - pp);
    *mass = lo < hi ? lo : hi;
    if (pr[e - 1].z - pr[e].z < *margin) *margin = pr[e - 1].z - pr[e].z;
  }
  return e;
}

void fs_ref_filter_row(const double *z, int V, double T, const fs_opts *m, int b,
                       fs_ref_pair *pr, fs_ref_filter *f) {
  double mp = m->min_ps ? (double)m->min_ps[b] : (double)m->min_p;
  const long long k = m->top_ks ? m->top_ks[b] : m->top_k;
  const double pp = m->top_ps ? (double)m->top_ps[b] : (double)m->top_p;
  long long n = 0, ninf = 0, keep = 0, i;
  double zmax = -INFINITY;
  int v;
  for (v = 0; v < V; v++) {
    if (!(z[v] > -INFINITY)) continue; /* -inf and NaN are no candidates */
    n++;
    ninf += z[v] == INFINITY;
    if (z[v] > zmax) zmax = z[v];
  }
  f->tau = -INFINITY;
  f->kept = n;
  f->filter_margin = f->mass_margin = INFINITY;
  f->draw_k = 0;
  const int mp_on = mp > 0.0, k_on = k > 0 && k < n, p_on = pp > 0.0 && pp < 1.0;
  if (!(T > 0.0) || n == 0 || !(mp_on || k_on || p_on)) return;
  f->draw_k = 1;
  if (zmax == INFINITY) { /* all the mass: K = the +inf candidates */
    f->kept = ninf;
    if (ninf < n) f->tau = INFINITY;
    return;
  }
  /* 1. min-p (T = +inf: every weight 1, every candidate kept) */
  const double thr = mp_on && !isinf(T) ? zmax + T * log(mp > 1.0 ? 1.0 : mp) : -INFINITY;
  double near = INFINITY;
  for (v = 0; v < V; v++) {
    if (!(z[v] > -INFINITY)) continue;
    if (fabs(z[v] - thr) < near) near = fabs(z[v] - thr);
    if (z[v] >= thr) pr[keep].z = z[v], pr[keep++].v = (int32_t)v;
  }
  if (keep < n) f->filter_margin = near;
  /* 2. top-k, 3. top-p, over the survivors in order */
  if ((k > 0 && k < keep) || p_on) {
    qsort(pr, (size_t)keep, sizeof *pr, ref_pair_cmp);
    keep = ref_top_k(pr, keep, k, &f->filter_margin);
    if (p_on) keep = ref_top_p(pr, keep, pp, T, zmax, &f->filter_margin, &f->mass_margin);
  }
  f->kept = keep;
  if (keep < n) {
    f->tau = INFINITY;
    for (i = 0; i < keep; i++)
      if (pr[i].z < f->tau) f->tau = pr[i].z;
  }
}
