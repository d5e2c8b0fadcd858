/*
** fs_stats.c: chi-square goodness of fit, its p-value and power, softmax
** (see fs_stats.h for the contracts).  Workload: up to ~10^5 bins and
** p-values down to the underflow threshold; everything in double.
**
** Q(a, x) follows Numerical Recipes' gser/gcf split (series when x < a + 1,
** where Q >= ~0.3 so 1 - P loses nothing; continued fraction otherwise, which
** yields Q itself and so keeps tiny tails accurate), with the iteration cap
** raised: both need O(sqrt(a)) terms, i.e. hundreds at dof = 10^5, where
** NR's cap of 100 would silently truncate.
*/
#include "fs_stats.h"

#include "fs_test.h"

#include <math.h>

#define STATS_EPS 1e-16
#define STATS_TINY 1e-300
#define STATS_MAX_ITER 10000000
#define M_PI_VALUE 3.14159265358979323846

/* t - log(1 + t), without the cancellation near t = 0. */
static double stats_log1pmx(double t) {
  if (fabs(t) >= 0.25) return t - log1p(t);
  double term = -t, sum = 0.0; /* sum_{k>=2} (-t)^k / k */
  for (int k = 2; k < 100; k++) {
    term *= -t;
    const double add = term / k;
    sum += add;
    if (fabs(add) < 1e-17 * sum) break;
  }
  return sum;
}

/* log(x^a e^-x / Gamma(a)).  For a >= 10 it is rewritten as
** -a * (t - log1p(t)) + log(a / 2pi) / 2 - stirlerr(a) with x = a (1 + t),
** which avoids the cancellation between terms of size a log a (at a = 5e5,
** lgamma's own rounding would cost ~1e-10 relative in Q). */
static double stats_log_prefactor(double a, double x) {
  if (a < 10.0) return a * log(x) - x - lgamma(a);
  const double t = (x - a) / a, r = 1.0 / a, r2 = r * r;
  const double stirlerr =
      r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 -
           r2 * (1.0 / 1680 - r2 * (1.0 / 1188)))));
  return -a * stats_log1pmx(t) + 0.5 * log(a / (2.0 * M_PI_VALUE)) - stirlerr;
}

double fs_stats_gamma_q(double a, double x) {
  if (!(a > 0.0) || !(x >= 0.0) || isinf(a)) return NAN;
  if (x == 0.0) return 1.0;
  if (isinf(x)) return 0.0;
  const double lp = stats_log_prefactor(a, x);
  if (x < a + 1.0) {
    double ap = a, del = 1.0 / a, sum = del;
    for (int n = 0; n < STATS_MAX_ITER; n++) {
      ap += 1.0;
      del *= x / ap;
      sum += del;
      if (fabs(del) < fabs(sum) * STATS_EPS) break;
    }
    return 1.0 - sum * exp(lp);
  }
  /* Modified Lentz evaluation of the continued fraction for Q. */
  double b = x + 1.0 - a, c = 1.0 / STATS_TINY, d = 1.0 / b, h = d;
  for (int i = 1; i < STATS_MAX_ITER; i++) {
    const double an = -(double)i * ((double)i - a);
    b += 2.0;
    d = an * d + b;
    if (fabs(d) < STATS_TINY) d = STATS_TINY;
    c = b + an / c;
    if (fabs(c) < STATS_TINY) c = STATS_TINY;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (fabs(del - 1.0) < STATS_EPS) break;
  }
  return exp(lp) * h;
}

double fs_stats_chi2_sf(double x, double dof) {
  if (!(dof > 0.0)) return NAN;
  if (x <= 0.0) return 1.0;
  return fs_stats_gamma_q(0.5 * dof, 0.5 * x);
}

fs_chi2 fs_stats_chi2_gof(const int64_t *counts, const double *probs, int n) {
  fs_chi2 r = {0.0, 0, NAN, 0, 0, 0, 0, 0.0, -1};
  double psum = 0.0;
  int i;
  if (n < 1) return r;
  for (i = 0; i < n; i++) {
    if (!(probs[i] >= 0.0) || isinf(probs[i])) return r;
    psum += probs[i];
    r.total += counts[i];
  }
  if (!(psum > 0.0)) return r;
  const double N = (double)r.total;

  /* Pass 1: the pool, and the big bin of smallest expectation. */
  double pool_e = 0.0, pool_o = 0.0, min_e = INFINITY;
  int min_bin = -1, big = 0;
  for (i = 0; i < n; i++) {
    const double e = N * (probs[i] / psum);
    if (probs[i] == 0.0) {
      r.impossible += counts[i];
    } else if (e < 5.0) {
      pool_e += e;
      pool_o += (double)counts[i];
      r.pooled++;
    } else {
      big++;
      if (e < min_e) { min_e = e; min_bin = i; }
    }
  }
  /* A pool too small for the chi-square approximation joins a big bin. */
  const int merge = r.pooled > 0 && pool_e < 5.0 && big > 0;

  /* Pass 2: the statistic over the final bins. */
  for (i = 0; i < n; i++) {
    double e = N * (probs[i] / psum), o = (double)counts[i];
    if (probs[i] == 0.0 || e < 5.0) continue;
    if (merge && i == min_bin) { e += pool_e; o += pool_o; }
    const double zz = (o - e) / sqrt(e);
    r.stat += zz * zz;
    r.bins++;
    if (fabs(zz) > r.worst_z) { r.worst_z = fabs(zz); r.worst_bin = i; }
  }
  if (r.pooled > 0 && !merge) {
    r.bins++;
    if (pool_e > 0.0) {
      const double zz = (pool_o - pool_e) / sqrt(pool_e);
      r.stat += zz * zz;
      if (fabs(zz) > r.worst_z) { r.worst_z = fabs(zz); r.worst_bin = -1; }
    }
  }
  r.dof = r.bins > 1 ? r.bins - 1 : 0;
  r.p = r.dof > 0 ? fs_stats_chi2_sf(r.stat, (double)r.dof) : 1.0;
  if (r.impossible > 0) {
    r.stat = INFINITY;
    r.p = 0.0;
  }
  return r;
}

double fs_stats_noncentrality(const double *p, const double *q, int n,
                              double N) {
  double ps = 0.0, qs = 0.0, lam = 0.0;
  int i;
  for (i = 0; i < n; i++) { ps += p[i]; qs += q[i]; }
  for (i = 0; i < n; i++) {
    if (q[i] <= 0.0) continue;
    const double d = p[i] / ps - q[i] / qs;
    lam += d * d / (q[i] / qs);
  }
  return N * lam;
}

double fs_stats_chi2_critical(double dof, double alpha) {
  double lo = 0.0, hi = dof + 10.0;
  while (fs_stats_chi2_sf(hi, dof) > alpha) hi *= 2.0;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
    const double mid = 0.5 * (lo + hi);
    if (fs_stats_chi2_sf(mid, dof) > alpha) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

double fs_stats_power(double dof, double lambda, double alpha) {
  const double crit = fs_stats_chi2_critical(dof, alpha);
  const double c = (dof + 2.0 * lambda) / (dof + lambda);
  const double h = (dof + lambda) * (dof + lambda) / (dof + 2.0 * lambda);
  return fs_stats_chi2_sf(crit / c, h);
}

void fs_stats_softmax(const double *z, int n, double temperature, double *p) {
  int i, arg = 0;
  for (i = 1; i < n; i++)
    if (z[i] > z[arg]) arg = i;
  if (!(temperature > 0.0)) {
    for (i = 0; i < n; i++) p[i] = i == arg ? 1.0 : 0.0;
    return;
  }
  double sum = 0.0;
  for (i = 0; i < n; i++) {
    p[i] = exp((z[i] - z[arg]) / temperature);
    sum += p[i];
  }
  for (i = 0; i < n; i++) p[i] /= sum;
}

void fs_stats_max_only_law(const double *z, int n, long long vocab_offset, double temperature,
                           double *q) {
  const long long voff = vocab_offset;
  const double T = temperature;
  double tot = 0.0, zmax = -INFINITY;
  for (int v = 0; v < n; v++) zmax = z[v] > zmax ? z[v] : zmax;
  for (long long k = voff / 16; k * 16 < voff + n; k++) {
    const int lo = (int)(k * 16 > voff ? k * 16 - voff : 0);
    const int hi = (int)(k * 16 + 16 < voff + n ? k * 16 + 16 - voff : n);
    double m = -INFINITY, S = 0.0;
    for (int v = lo; v < hi; v++) m = z[v] > m ? z[v] : m;
    for (int v = lo; v < hi; v++) S += exp((z[v] - m) / T);
    for (int v = lo; v < hi; v++) q[v] = exp((m - zmax) / T) * exp((z[v] - m) / T) / S;
  }
  for (int v = 0; v < n; v++) tot += q[v];
  for (int v = 0; v < n; v++) q[v] /= tot;
}

void fs_stats_must_reject(const char *name, const int64_t *counts, const double *p,
                          const double *q, int n, int64_t N, const char *law) {
  const fs_chi2 r = fs_stats_chi2_gof(counts, q, n);
  const double lambda = fs_stats_noncentrality(p, q, n, (double)N);
  const double power = fs_stats_power((double)r.dof, lambda, 1e-6);
  printf("    against %-34s chi2 %.1f dof %d p=%.4g; lambda %.0f, power at 1e-6 %.6f\n", law,
         r.stat, r.dof, r.p, lambda, power);
  CHECK_MSG(r.p < 1e-6, "%s: chi-square fails to reject %s: p=%.4g", name, law, r.p);
  CHECK_MSG(power > 0.999, "%s: the test's power against %s is only %.4f", name, law, power);
}
