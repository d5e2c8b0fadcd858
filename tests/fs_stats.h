/*
** fs_stats.h: the statistics the distribution tests share (CPU and GPU).
**
** A sampler is tested by drawing N tokens, counting them per bin and asking
** Pearson's chi-square test whether the counts fit the exact probabilities.
** The p-value is the upper tail of the chi-square law, Q(dof/2, x/2), computed
** here in double to a relative accuracy of ~1e-13 (checked against mpmath)
** for dof up to 10^6 and p-values down to ~1e-300, so a test may demand
** p > 1e-3 for the right distribution AND p < 1e-6 (or 1e-12) for a
** deliberately wrong one.
**
** Contract for a distribution test that uses these functions:
**  - compute the expected probabilities in double from the same inputs the
**    sampler saw (e.g. fs_stats_softmax over logits formed in double from the
**    bf16/fp16 H and W), never from the sampler's own output;
**  - fix every seed, so a test is deterministic: its p-value is a number
**    that either passes or fails, every run;
**  - state the test's power against the broken case it must reject
**    (fs_stats_noncentrality() gives lambda; the statistic then has mean
**    about dof + lambda and variance about 2 * (dof + 2 * lambda)).
*/
#ifndef FS_STATS_H
#define FS_STATS_H

#include <stdint.h>

/* Regularized upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a), for
** a > 0, x >= 0 (Q(a, 0) = 1, Q(a, +inf) = 0).  Series for x < a + 1,
** Lentz continued fraction otherwise, with the prefactor
** x^a e^-x / Gamma(a) formed in log space, so tiny tails keep their relative
** accuracy.  Returns NaN for invalid arguments. */
double fs_stats_gamma_q(double a, double x);

/* Chi-square survival function P(X >= x) for `dof` degrees of freedom
** (dof > 0): fs_stats_gamma_q(dof / 2, x / 2). */
double fs_stats_chi2_sf(double x, double dof);

/* The result of a goodness-of-fit test. */
typedef struct fs_chi2 {
  double stat;      /* Pearson's statistic over the pooled bins */
  int dof;          /* bins after pooling - 1 (0 if fewer than 2 bins) */
  double p;         /* P(chi2_dof >= stat); 1 when dof == 0; 0 when impossible */
  int bins;         /* bins after pooling */
  int pooled;       /* input bins merged into the pool bin */
  int64_t total;    /* N, the sum of the counts */
  int64_t impossible; /* draws that fell in bins of probability 0 */
  double worst_z;   /* the largest |O - E| / sqrt(E) over the pooled bins */
  int worst_bin;    /* the input bin with that z (-1 for the pool bin) */
} fs_chi2;

/* Pearson's chi-square goodness-of-fit test of counts[0..n-1] against
** probabilities probs[0..n-1] (>= 0; normalised by their sum here, so they
** need not sum to exactly 1).  With N = sum(counts), expected counts are
** E_i = N * p_i.  Bins with E_i < 5 are merged into one pool bin; if the pool
** itself ends up with E < 5 it is merged into the bin of smallest E (when
** there is another bin).  Bins with p_i == 0 are not bins at all: a draw in
** one is `impossible`, and then stat = +inf and p = 0.  Never fails for
** n >= 1 (it allocates nothing); n < 1 or a zero probability sum gives
** p = NaN. */
fs_chi2 fs_stats_chi2_gof(const int64_t *counts, const double *probs, int n);

/* lambda = N * sum_i (p_i - q_i)^2 / q_i: the noncentrality of the chi-square
** statistic when draws follow p and the test expects q (both normalised
** here, unpooled).  Bins with q_i == 0 are skipped.  A quick power estimate:
** the test rejects at level alpha when lambda is well above the critical
** value minus dof (see fs_stats_power()). */
double fs_stats_noncentrality(const double *p, const double *q, int n,
                              double N);

/* Approximate probability that a chi-square test with `dof` degrees of
** freedom and noncentrality `lambda` gives a p-value below alpha (Patnaik's
** two-moment approximation of the noncentral law by a scaled central
** chi-square).  Good to a few percent; use it for comments and printed
** diagnostics, not for pass/fail decisions. */
double fs_stats_power(double dof, double lambda, double alpha);

/* Checks (fs_test's CHECK) that counts[0 .. n) of N draws reject the wrong
** law q at p < 1e-6, with power above 0.999 when the draws follow p (so that
** passing means something), and prints both; name and law name the case and
** q in its messages.  Catches a kernel whose law is q (or nearer q than p). */
void fs_stats_must_reject(const char *name, const int64_t *counts, const double *p,
                          const double *q, int n, int64_t N, const char *law);

/* The chi-square critical value: the x with fs_stats_chi2_sf(x, dof) ==
** alpha (bisection; alpha in (0, 1)). */
double fs_stats_chi2_critical(double dof, double alpha);

/* p[i] = softmax(z / temperature)[i] for i < n, computed in double with the
** maximum subtracted.  temperature <= 0 or NaN means greedy: a one-hot at the
** first maximum of z (the sampler's tie rule: smaller index wins). */
void fs_stats_softmax(const double *z, int n, double temperature,
                      double *p /* OUT [n] */);

/* q[i] (i < n) = the law of a broken FS_NOISE_GROUP16 sampler, for the group
** tests to reject: it picks the group of 16 global ids (z[i] is the logit of
** id vocab_offset + i; partial groups at both ends) with probability
** proportional to exp(m / temperature), m the group's max logit (forgetting
** ln S, the log of the group's weight sum), then token i inside it with
** probability w_i / S, w_i = exp((z_i - m) / temperature): every
** within-group ratio is right.  temperature > 0; z finite. */
void fs_stats_max_only_law(const double *z, int n, long long vocab_offset, double temperature,
                           double *q /* OUT [n] */);

#endif /* FS_STATS_H */
