/*
** reference.c: the CPU reference draw, fs_reference_sample() and
** fs_reference_row().  It is the oracle the GPU tests compare against, so it
** is written to be obviously right first and fast enough second: tests run
** it on LM-head shapes such as B=300, D=64, V=151937 and B=3, D=4096,
** V=151937 and expect seconds, i.e. a few GFLOP of double arithmetic on one
** core.
**
** The definition (the same as flashsampling.h and fs_rng.h):
**   z[b,v]   = sum over k = 0..D-1, in that order, of
**              double(H[b,k]) * double(W[v,k])      (bf16/fp16 decoded exactly;
**              each product is exact in double, so FMA contraction is moot)
**   token    = vocab_offset + v                      (the global id)
**   T[b]     = temperatures ? temperatures[b] : temperature
**   greedy   : T == 0, T < 0 or T is NaN
**   score    = z                                     (greedy row)
**            = z / T + (double)fs_noise(seed_b, offset_b, token, sample, tag)
**   seed_b   = seeds ? seeds[b] : seed;  offset_b likewise
**   tag      = seeds ? 0 : b + 1
**   winner   = argmax over v of score, ties to the smaller token; a NaN
**              score loses to every number
**   outputs  : tokens = winner, logits = (float)z, keys =
**              fs_pack_key((float)score, winner)
** With FS_NOISE_GROUP16 (flashsampling.h) a sampled row's candidates are
** groups instead of tokens: group k = ids [16k, 16k + 16) of this shard,
**   m        = max z over the group (NaN ignored)
**   w_i      = exp((z_i - m) / T) (0 where that is NaN), P_i = w_0 + .. + w_i
**   score    = m / T + log(P_last) + (double)fs_gumbel(word 0)
**   pick     = first i with P_i > u P_last, u = fs_group_uniform(word 1)
** (words of fs_noise_group(seed_b, offset_b, k, sample, tag)); a group whose
** m is +-inf offers its first token equal to m with score m, one of NaNs its
** first token with score NaN.  The winner is the best group's pick.
** A token mask (fs_options) sets z = -inf for every token of a row whose bit
** is 0, before all of the above; a logit_softcap c > 0 makes every z
** c tanh(z / c) first (in double, so the logprobs' log-sum-exp and the
** returned logits are of the capped logits too); a logit bias (fs_options)
** then adds each row's values to its tokens' z for the draw (the sum of a
** token's entries; ids outside the shard ignored; with a repetition penalty
** r the listed token's z becomes z / r where z > 0, z r else, before the
** sum is added), after the log-sum-exp and
** before the mask, so that the returned logits and logprobs stay raw; an
** allowed biased token whose score is NaN ranks as -inf.
** Filters (fs_options.min_p / top_k / top_p; FS_NOISE_TOKEN):
** reference_filter.c finds a sampled row's kept set K = {candidates with
** z >= tau} from the whole row's scores (biased; a biased score that is NaN
** taken as -inf), and the winner is the argmax above
** over K alone (the same noise); greedy rows, rows without candidates and
** rows whose filter values are all "off" draw as without filters.
** Top logprobs (fs_options.top_logprobs = n): each row's n largest raw
** logits (capped, before the bias and the mask; equal ones by the smaller
** id, NaN last), kept in order as the tiles go by, each z - lse in double
** rounded to float.  Ranks (fs_options.ranks): after the draws, the same
** sums again, each draw's rank the count of its row's capped raw logits,
** rounded to float, at or above its reported logit.  Both read the raw
** logits alone, so they are the same under either noise.
**
** Work layout: H rows are decoded to double once per block of rows, W is
** decoded REF_VT rows at a time into an interleaved tile, and each (b, tile)
** runs REF_VT independent sequential sums (instruction-level parallelism
** without changing the summation order), ~0.1 ns per multiply-add.  The
** noise (two logs per (b, v, sample), one Philox call per four tokens) costs
** ~20 ns, so it dominates sampled rows unless D is in the hundreds.  A
** filtered call keeps a block's logits (at most REF_Z_DOUBLES: ~220 rows of
** V = 151936) with the same sums in the same order, then filters (a sort
** of each sampled row's candidates, ~20 ms at that V) and draws each row,
** computing the noise of kept tokens only.
*/
#include "fs_int.h"
#include "fs_half.h"
#include "fs_ref_filter.h"
#include "fs_reference.h"
#include "fs_rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define REF_VT 8                  /* W rows per tile: independent sums */
_Static_assert(REF_VT == 8, "ref_pass names eight accumulators");
_Static_assert(FS_GROUP_TOKENS % REF_VT == 0, "a W tile lies in one group");
#define REF_H_DOUBLES (1 << 18)   /* decoded H rows per block: 2 MiB */
#define REF_RESULTS_MAX (1 << 20) /* (row, sample) results per pass */
#define REF_Z_DOUBLES (1 << 25)   /* a filtered call's logits per block: 256 MiB */

/* The per-row sampling parameters of row b (host arrays). */
typedef struct ref_row {
  int greedy;
  double temperature;
  uint64_t seed, offset;
  uint32_t tag;
} ref_row;

static ref_row ref_row_params(const fs_sampling *s, int b) {
  ref_row r;
  float t = s->temperatures ? s->temperatures[b] : s->temperature;
  r.greedy = !(t > 0.0f); /* 0, negative or NaN */
  r.temperature = (double)t;
  r.seed = s->seeds ? s->seeds[b] : s->seed;
  r.offset = s->offsets ? s->offsets[b] : s->offset;
  r.tag = s->seeds ? 0u : (uint32_t)b + 1u;
  return r;
}

/* Decodes n elements of dtype (bf16 or fp16 bits) to double, dst[i*step]. */
static void ref_decode(int dtype, const uint16_t *src, long long n,
                       double *dst, int step) {
  long long i;
  if (dtype == FS_DTYPE_BF16) {
    for (i = 0; i < n; i++) dst[i * step] = (double)fs_bf16_to_float(src[i]);
  } else {
    for (i = 0; i < n; i++) dst[i * step] = (double)fs_half_to_float(src[i]);
  }
}

/* a beats b: larger, or a number against a NaN. */
static int ref_better(double a, double b) {
  return a > b || (isnan(b) && !isnan(a));
}

static void ref_result_init(fs_ref_result *r) {
  r->pick_margin = INFINITY;
  r->tau = -INFINITY;
  r->kept = 0;
  r->filter_margin = r->mass_margin = INFINITY;
  r->token = -1;
  r->logit = r->score = -INFINITY;
  r->second_token = -1;
  r->second_logit = r->second_score = -INFINITY;
}

/* Offers candidate `token` to r.  Candidates arrive in increasing token
** order, so a tie keeps the earlier (smaller) id as the winner and the later
** one becomes the runner-up. */
static void ref_offer(fs_ref_result *r, double score, double z,
                      int32_t token, double pick_margin) {
  if (r->token < 0 || ref_better(score, r->score)) {
    r->pick_margin = pick_margin;
    r->second_token = r->token;
    r->second_logit = r->logit;
    r->second_score = r->score;
    r->token = token;
    r->logit = z;
    r->score = score;
  } else if (r->second_token < 0 || ref_better(score, r->second_score)) {
    r->second_token = token;
    r->second_logit = z;
    r->second_score = score;
  }
}

/* FS_NOISE_GROUP16: the n (1..16) logits z of the group whose first token
** is tok0 (a multiple of 16), for one sample, offered to r; the pick
** reports raw (its unbiased logit, -inf where masked). */
static void ref_group(const double *z, const double *raw, int n, int32_t tok0,
                      const ref_row *rp, uint32_t sample, fs_ref_result *r) {
  const fs_philox_out q = fs_noise_group(rp->seed, rp->offset, (uint32_t)tok0 >> 4,
                                         sample, rp->tag);
  double m = NAN, score, margin = INFINITY;
  int i, pick = 0;
  for (i = 0; i < n; i++)
    if (!isnan(z[i]) && (isnan(m) || z[i] > m)) m = z[i];
  if (isnan(m) || isinf(m)) {
    while (!isnan(m) && z[pick] != m) pick++;
    score = m;
  } else {
    double w[FS_GROUP_TOKENS], S = 0.0, P = 0.0;
    for (i = 0; i < n; i++) {
      w[i] = exp((z[i] - m) / rp->temperature);
      if (!(w[i] >= 0.0)) w[i] = 0.0; /* NaN: -inf / inf or a NaN logit */
      S += w[i];
    }
    const double t = (double)fs_group_uniform(q.v[1]) * S;
    pick = -1;
    for (i = 0; i < n; i++) {
      P += w[i];
      if (pick < 0 && P > t) pick = i;
      if (i < n - 1 && fabs(P - t) / S < margin) margin = fabs(P - t) / S;
    }
    if (pick < 0) pick = n - 1; /* not reached: P_last = S > t */
    score = m / rp->temperature + log(S) + (double)fs_gumbel(q.v[0]);
  }
  ref_offer(r, score, raw[pick], tok0 + pick, margin);
}

/* A biased row v of W (v - vocab_offset of the token) and the sum of its
** values; `at` orders a token's entries as given; raw, for a filtered call,
** the logit it reports (-inf where the mask forbids it). */
typedef struct ref_bias {
  int32_t v, at;
  double sum, raw;
} ref_bias;

static int ref_bias_cmp(const void *a, const void *b) {
  const ref_bias *x = a, *y = b;
  return x->v != y->v ? (x->v > y->v) - (x->v < y->v) : (x->at > y->at) - (x->at < y->at);
}

/* Row b's repetition penalty (fs_options.repetition_penalty): r, or 0 where
** it penalises nothing (NaN, <= 0, +inf or 1); and z under it (z / r where
** z > 0, z r else), which the listed tokens' logits take before their sum. */
static double ref_rep(const fs_opts *m, int b) {
  const float r = m->reps ? m->reps[b] : m->rep;
  return r > 0.0f && r < INFINITY && r != 1.0f ? (double)r : 0.0;
}
static double ref_pen(double z, double r) { return r == 0.0 ? z : z > 0.0 ? z / r : z * r; }

/* Row b's entries of m's bias whose tokens lie in the shard, as rows of W
** sorted by v with a token's values summed: into out, returns how many. */
static int ref_bias_row(const fs_problem *p, const fs_opts *m, int b, ref_bias *out) {
  int n = 0, k = 0;
  for (int j = 0; j < m->bias_count; j++) {
    const long long t = m->bias_tokens[(size_t)b * m->bias_count + j];
    if (t < p->vocab_offset || t >= p->vocab_offset + p->vocab) continue;
    out[n].v = (int32_t)(t - p->vocab_offset);
    out[n].at = j;
    out[n].raw = 0.0;
    out[n++].sum = (double)m->bias_values[(size_t)b * m->bias_count + j];
  }
  qsort(out, (size_t)n, sizeof *out, ref_bias_cmp);
  for (int j = 0; j < n; j++) {
    if (k > 0 && out[k - 1].v == out[j].v) /* in fp32, in entry order, as the kernels */
      out[k - 1].sum = (double)((float)out[k - 1].sum + (float)out[j].sum);
    else out[k++] = out[j];
  }
  return k;
}

/* A raw logit and its token, in a row's top logprobs list. */
typedef struct ref_top {
  double z;
  int32_t token;
} ref_top;

/* Scratch for one pass; sized by ref_alloc(). */
typedef struct ref_scratch {
  double *h;           /* [rows, D] decoded H */
  double *wt;          /* [D, REF_VT] decoded W tile, interleaved */
  double *zg;          /* [rows, 2 FS_GROUP_TOKENS] the open group's scores' logits, raw ones */
  double *lse;         /* [rows, 2]: running max m and sum of exp(z - m) of the raw logits */
  fs_ref_result *res;  /* [rows, samples] */
  ref_bias *bias;      /* [rows, bias count]: each row's biased rows of W, sorted */
  int *nbias;          /* [rows, 2]: the next one to add, and how many */
  fs_ref_filter *filt; /* [rows]: each row's filters (kept: its candidates without) */
  double *z;           /* filtered calls: [rows, V] scores (capped, masked), else NULL */
  fs_ref_pair *pairs;  /* filtered calls: [V] fs_ref_filter_row's scratch, else NULL */
  ref_top *top;        /* [rows, top_n]: each row's most likely tokens so far, in order */
  int *ntop;           /* [rows]: how many of them */
} ref_scratch;

static void ref_free(ref_scratch *sc) {
  free(sc->h);
  free(sc->wt);
  free(sc->zg);
  free(sc->lse);
  free(sc->res);
  free(sc->bias);
  free(sc->nbias);
  free(sc->filt);
  free(sc->z);
  free(sc->pairs);
  free(sc->top);
  free(sc->ntop);
}

/* zV: 0, or for a filtered call V (the rows' whole logits are kept); top:
** top_logprobs. */
static int ref_alloc(ref_scratch *sc, int rows, int samples, int D, int bias, int zV, int top) {
  sc->top = malloc(sizeof(ref_top) * ((size_t)rows * (size_t)top + 1));
  sc->ntop = malloc(sizeof(int) * (size_t)rows);
  sc->h = malloc(sizeof(double) * (size_t)rows * (size_t)D);
  sc->wt = malloc(sizeof(double) * (size_t)D * REF_VT);
  sc->res = malloc(sizeof(fs_ref_result) * (size_t)rows * (size_t)samples);
  sc->zg = malloc(sizeof(double) * (size_t)rows * 2 * FS_GROUP_TOKENS);
  sc->lse = malloc(sizeof(double) * (size_t)rows * 2);
  sc->bias = malloc(sizeof(ref_bias) * ((size_t)rows * (size_t)bias + 1));
  sc->nbias = malloc(sizeof(int) * (size_t)rows * 2);
  sc->filt = malloc(sizeof(fs_ref_filter) * (size_t)rows);
  sc->z = zV ? malloc(sizeof(double) * (size_t)rows * (size_t)zV) : NULL;
  sc->pairs = zV ? malloc(sizeof(fs_ref_pair) * (size_t)zV) : NULL;
  if (!sc->h || !sc->wt || !sc->res || !sc->zg || !sc->lse || !sc->bias || !sc->nbias ||
      !sc->filt || (zV && (!sc->z || !sc->pairs)) || !sc->top || !sc->ntop) {
    ref_free(sc);
    return fs_err(NULL, FS_OUT_OF_MEMORY,
                  "fs_reference: cannot allocate %zu bytes of scratch "
                  "(rows=%d, D=%d, samples=%d%s)",
                  sizeof(double) * ((size_t)rows * (size_t)D +
                                    (size_t)D * REF_VT + (size_t)rows * (size_t)zV) +
                      sizeof(fs_ref_result) * (size_t)rows * (size_t)samples +
                      sizeof(fs_ref_pair) * (size_t)zV,
                  rows, D, samples, zV ? ", the filters' logits" : "");
  }
  return FS_OK;
}

/* Decodes rows [b0, b0 + nb) of H into h ([nb, D]). */
static void ref_h_block(const fs_problem *p, int b0, int nb, double *h) {
  const uint16_t *H = (const uint16_t *)p->hidden_states;
  for (int i = 0; i < nb; i++)
    ref_decode(p->dtype, H + (long long)(b0 + i) * fs_h_stride(p), p->hidden,
               h + (size_t)i * p->hidden, 1);
}

/* Decodes rows [v0, v0 + nv) of W (nv <= REF_VT) into the interleaved tile
** wt ([D, REF_VT]), zeros in the columns past nv. */
static void ref_w_tile(const fs_problem *p, int v0, int nv, double *wt) {
  const uint16_t *W = (const uint16_t *)p->weight;
  for (int j = 0; j < REF_VT; j++) {
    if (j < nv) {
      ref_decode(p->dtype, W + (long long)(v0 + j) * fs_w_stride(p), p->hidden, wt + j, REF_VT);
    } else {
      for (int k = 0; k < p->hidden; k++) wt[(size_t)k * REF_VT + j] = 0.0;
    }
  }
}

/* acc[j] (j < REF_VT) = the logit of the decoded H row hb against column j
** of the tile wt, soft-capped (softcap > 0) for j < nv. */
static void ref_dot(const double *hb, const double *wt, int D, float softcap, int nv,
                    double *acc) {
  /* Eight named accumulators stay in registers (an array does not at
  ** -O2); each is a plain sequential sum over k. */
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
  for (int k = 0; k < D; k++) {
    const double x = hb[k];
    const double *w = wt + (size_t)k * REF_VT;
    a0 += x * w[0]; a1 += x * w[1]; a2 += x * w[2]; a3 += x * w[3];
    a4 += x * w[4]; a5 += x * w[5]; a6 += x * w[6]; a7 += x * w[7];
  }
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
  acc[4] = a4; acc[5] = a5; acc[6] = a6; acc[7] = a7;
  if (softcap > 0.0f)
    for (int j = 0; j < nv; j++) acc[j] = softcap * tanh(acc[j] / softcap);
}

/* Adds the nv raw logits acc to a row's online log-sum-exp lm = {max, sum}. */
static void ref_lse_add(double *lm, const double *acc, int nv) {
  double *ll = lm + 1;
  for (int j = 0; j < nv; j++) {
    if (acc[j] > *lm) *ll = *ll * exp(*lm - acc[j]) + 1.0, *lm = acc[j];
    else if (acc[j] != -INFINITY) *ll += exp(acc[j] - *lm); /* NaN makes it NaN */
    if (acc[j] == INFINITY) *ll = NAN; /* as the kernels' merges (inf - inf) */
  }
}

/* Does (za, ta) come before (zb, tb) in a top logprobs list: the larger raw
** logit, equal ones by the smaller id, a NaN after every number. */
static int ref_top_before(double za, int32_t ta, double zb, int32_t tb) {
  if (isnan(za) || isnan(zb)) return !isnan(za) || (isnan(zb) && ta < tb);
  return za > zb || (za == zb && ta < tb);
}

/* Row i's raw logits acc of tokens token0.. (nv of them) into its online
** log-sum-exp and its top logprobs list (n long at most). */
static void ref_raw_add(ref_scratch *sc, int i, int n, int32_t token0, const double *acc,
                        int nv) {
  ref_lse_add(sc->lse + 2 * i, acc, nv);
  ref_top *list = sc->top + (size_t)i * (size_t)n;
  int *cnt = &sc->ntop[i];
  for (int j = 0; j < nv && n > 0; j++) {
    const int32_t tok = token0 + j;
    if (*cnt == n && !ref_top_before(acc[j], tok, list[n - 1].z, list[n - 1].token)) continue;
    int at = *cnt < n ? (*cnt)++ : n - 1;
    for (; at > 0 && ref_top_before(acc[j], tok, list[at - 1].z, list[at - 1].token); at--)
      list[at] = list[at - 1];
    list[at].z = acc[j];
    list[at].token = tok;
  }
}

/* Row b's token mask over the nv tokens token0..: -inf in acc and raw, and
** hit cleared, where a token is not allowed.  Returns how many of the nv
** are candidates (a score that is a number above -inf). */
static int ref_mask(const fs_opts *m, int b, int32_t token0, int nv, double *acc, double *raw,
                    int *hit) {
  int j, n = 0;
  if (m->words) {
    const uint32_t *row = m->words + (long long)b * m->stride;
    for (j = 0; j < nv; j++)
      if (!(row[(token0 + j) >> 5] >> ((token0 + j) & 31) & 1u))
        acc[j] = raw[j] = -INFINITY, hit[j] = 0;
  }
  for (j = 0; j < nv; j++) n += acc[j] > -INFINITY;
  return n;
}

/* Offers the n tokens token0.. of one row to its results ri[0 .. ns)
** (samples s0 ..), in increasing token order: acc their scores' logits
** (biased, masked), raw the logits they report, hit (NULL: none) the
** biased ones, whose NaN score ranks as -inf.  A greedy row offers its
** logits to ri[0] alone.  With f, a filtered row that draws over K, only
** K: the candidates with z >= f->tau.
** fs_noise(token) is word token & 3 of fs_noise_quad(token >> 2): one
** Philox call serves four consecutive ids (tests compare against fs_noise
** itself). */
static void ref_offer_tokens(const double *acc, const double *raw, const int *hit, int n,
                             int32_t token0, const ref_row *rp, int s0, int ns,
                             fs_ref_result *ri, const fs_ref_filter *f) {
  int j, t;
  if (rp->greedy) {
    for (j = 0; j < n; j++)
      ref_offer(ri, hit && hit[j] && isnan(acc[j]) ? -INFINITY : acc[j], raw[j], token0 + j,
                INFINITY);
    return;
  }
  for (t = 0; t < ns; t++) {
    uint32_t quad = 0xffffffffu; /* token >> 2 < 2^29: never a quad */
    fs_philox_out q = {{0, 0, 0, 0}};
    for (j = 0; j < n; j++) {
      if (f && !(acc[j] > -INFINITY && acc[j] >= f->tau)) continue;
      const uint32_t token = (uint32_t)(token0 + j);
      if (token >> 2 != quad) {
        quad = token >> 2;
        q = fs_noise_quad(rp->seed, rp->offset, quad, (uint32_t)(s0 + t), rp->tag);
      }
      const double g = (double)fs_gumbel(q.v[token & 3]), y = acc[j] / rp->temperature + g;
      ref_offer(&ri[t], hit && hit[j] && isnan(y) ? -INFINITY : y, raw[j], (int32_t)token,
                INFINITY);
    }
  }
}

/* The end of a pass over rows [b0, b0 + nb) x ns samples: a greedy row's
** samples are all the same draw; every result gets its row's log-sum-exp
** and filters (sc->filt). */
static void ref_finish(const fs_sampling *s, int b0, int nb, int ns, ref_scratch *sc) {
  for (int i = 0; i < nb; i++) {
    fs_ref_result *ri = sc->res + (size_t)i * ns;
    const fs_ref_filter *f = &sc->filt[i];
    const double lse = sc->lse[2 * i] + log(sc->lse[2 * i + 1]);
    if (ref_row_params(s, b0 + i).greedy)
      for (int t = 1; t < ns; t++) ri[t] = ri[0];
    for (int t = 0; t < ns; t++) {
      ri[t].lse = lse;
      ri[t].tau = f->tau;
      ri[t].kept = f->kept;
      ri[t].filter_margin = f->filter_margin;
      ri[t].mass_margin = f->mass_margin;
    }
  }
}

/* The start of a pass over rows [b0, b0 + nb): H decoded, the
** log-sum-exps emptied, the rows kept unfiltered with no candidate yet. */
static void ref_start(const fs_problem *p, int b0, int nb, ref_scratch *sc) {
  ref_h_block(p, b0, nb, sc->h);
  for (int i = 0; i < nb; i++) {
    sc->lse[2 * i] = -INFINITY, sc->lse[2 * i + 1] = 0.0;
    sc->ntop[i] = 0;
    sc->filt[i].tau = -INFINITY;
    sc->filt[i].kept = 0;
    sc->filt[i].filter_margin = sc->filt[i].mass_margin = INFINITY;
    sc->filt[i].draw_k = 0;
  }
}

/* Draws rows [b0, b1) x samples [s0, s1) of a call without filters into
** sc->res[(b - b0) * (s1 - s0) + (s - s0)].  The problem and sampling must
** have been validated; sc must hold (b1 - b0) rows and (s1 - s0) samples. */
static void ref_pass(const fs_problem *p, const fs_sampling *s, int noise, const fs_opts *m,
                     int b0, int b1, int s0, int s1, ref_scratch *sc) {
  const int D = p->hidden, V = p->vocab, nb = b1 - b0, ns = s1 - s0;
  fs_ref_result *res = sc->res;
  int i, j, v0, t;

  ref_start(p, b0, nb, sc);
  for (i = 0; i < nb * ns; i++) ref_result_init(&res[i]);
  for (i = 0; i < nb; i++) {
    sc->nbias[2 * i] = 0;
    sc->nbias[2 * i + 1] = ref_bias_row(p, m, b0 + i, sc->bias + (size_t)i * m->bias_count);
  }

  for (v0 = 0; v0 < V; v0 += REF_VT) {
    const int nv = V - v0 < REF_VT ? V - v0 : REF_VT;
    ref_w_tile(p, v0, nv, sc->wt);
    for (i = 0; i < nb; i++) {
      const ref_row rp = ref_row_params(s, b0 + i);
      fs_ref_result *ri = res + (size_t)i * ns;
      double acc[REF_VT];
      ref_dot(sc->h + (size_t)i * D, sc->wt, D, m->softcap, nv, acc);
      const int32_t token0 = (int32_t)(p->vocab_offset + v0);
      /* the raw logits' log-sum-exp, online, and top logprobs list */
      ref_raw_add(sc, i, m->top_n, token0, acc, nv);
      /* the bias: the row's next biased rows of W, in increasing order; raw
      ** keeps the unbiased logits for the outputs */
      double raw[REF_VT];
      int hit[REF_VT] = {0}; /* biased and allowed: a NaN score ranks as -inf */
      for (j = 0; j < REF_VT; j++) raw[j] = acc[j];
      const ref_bias *bi = sc->bias + (size_t)i * m->bias_count;
      const double rr = ref_rep(m, b0 + i);
      for (int *at = &sc->nbias[2 * i]; *at < sc->nbias[2 * i + 1] && bi[*at].v < v0 + nv; ++*at) {
        const int x = bi[*at].v - v0; /* earlier tiles took v < v0 */
        acc[x] = ref_pen(acc[x], rr) + bi[*at].sum, hit[x] = 1;
      }
      sc->filt[i].kept += ref_mask(m, b0 + i, token0, nv, acc, raw, hit);
      if (!rp.greedy && noise == FS_NOISE_GROUP16) {
        /* REF_VT divides 16 and vocab_offset % 16 == 0: a tile lies in
        ** one group; the group is drawn once its last row is in */
        /* a biased id's NaN score ranks as -inf, as per token */
        double *zg = sc->zg + (size_t)i * 2 * FS_GROUP_TOKENS, *zr = zg + FS_GROUP_TOKENS;
        for (j = 0; j < nv; j++) {
          zg[(v0 + j) % FS_GROUP_TOKENS] = hit[j] && isnan(acc[j]) ? -INFINITY : acc[j];
          zr[(v0 + j) % FS_GROUP_TOKENS] = raw[j];
        }
        if ((v0 + nv) % FS_GROUP_TOKENS == 0 || v0 + nv == V) {
          const int first = v0 - v0 % FS_GROUP_TOKENS;
          for (t = 0; t < ns; t++)
            ref_group(zg, zr, v0 + nv - first, (int32_t)(p->vocab_offset + first), &rp,
                      (uint32_t)(s0 + t), &ri[t]);
        }
        continue;
      }
      ref_offer_tokens(acc, raw, hit, nv, token0, &rp, s0, ns, ri, NULL);
    }
  }
  ref_finish(s, b0, nb, ns, sc);
}

/* Rows of a filtered call (m->filter: FS_NOISE_TOKEN) are drawn in two
** steps, because no token can be kept before the whole row's order is
** known: ref_block_logits keeps the logits of rows [b0, b1) (the scores:
** capped, biased, -inf where masked or where a biased score is NaN, which
** ranks as -inf; the same sums, in the same order, as ref_pass) in sc->z,
** their log-sum-exps (of the raw logits), their biased tokens' raw logits
** (sc->bias) and their filters (fs_ref_filter_row); ref_block_draw then
** draws any range of samples from them, reporting raw logits.  sc must hold
** b1 - b0 rows of V logits. */
static void ref_block_logits(const fs_problem *p, const fs_sampling *s, const fs_opts *m,
                             int b0, int b1, ref_scratch *sc) {
  const int D = p->hidden, V = p->vocab, nb = b1 - b0;
  int i, j, v0;
  ref_start(p, b0, nb, sc);
  for (i = 0; i < nb; i++) {
    sc->nbias[2 * i] = 0;
    sc->nbias[2 * i + 1] = ref_bias_row(p, m, b0 + i, sc->bias + (size_t)i * m->bias_count);
  }
  for (v0 = 0; v0 < V; v0 += REF_VT) {
    const int nv = V - v0 < REF_VT ? V - v0 : REF_VT;
    ref_w_tile(p, v0, nv, sc->wt);
    for (i = 0; i < nb; i++) {
      double acc[REF_VT], raw[REF_VT];
      int hit[REF_VT] = {0};
      ref_dot(sc->h + (size_t)i * D, sc->wt, D, m->softcap, nv, acc);
      ref_raw_add(sc, i, m->top_n, (int32_t)(p->vocab_offset + v0), acc, nv);
      for (j = 0; j < nv; j++) raw[j] = acc[j];
      ref_bias *bi = sc->bias + (size_t)i * m->bias_count;
      const int e0 = sc->nbias[2 * i];
      const double rr = ref_rep(m, b0 + i);
      for (int *at = &sc->nbias[2 * i]; *at < sc->nbias[2 * i + 1] && bi[*at].v < v0 + nv; ++*at) {
        const int x = bi[*at].v - v0;
        acc[x] = ref_pen(acc[x], rr) + bi[*at].sum, hit[x] = 1;
      }
      ref_mask(m, b0 + i, (int32_t)(p->vocab_offset + v0), nv, acc, raw, hit);
      for (int e = e0; e < sc->nbias[2 * i]; e++) bi[e].raw = raw[bi[e].v - v0];
      for (j = 0; j < nv; j++)
        sc->z[(size_t)i * V + v0 + j] = hit[j] && isnan(acc[j]) ? -INFINITY : acc[j];
    }
  }
  for (i = 0; i < nb; i++)
    fs_ref_filter_row(sc->z + (size_t)i * V, V, ref_row_params(s, b0 + i).temperature, m,
                      b0 + i, sc->pairs, &sc->filt[i]);
}

/* A biased token's raw logit in place of its score z, where row i of the
** block (its nbias[2 i + 1] entries, sorted by v) names token tok. */
static double ref_unbias(const ref_scratch *sc, int i, int nbias, const fs_problem *p,
                         int32_t tok, double z) {
  const ref_bias *bi = sc->bias + (size_t)i * nbias;
  int lo = 0, hi = sc->nbias[2 * i + 1];
  const long long v = (long long)tok - p->vocab_offset;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (bi[mid].v < v) lo = mid + 1;
    else hi = mid;
  }
  return tok >= 0 && lo < sc->nbias[2 * i + 1] && bi[lo].v == v ? bi[lo].raw : z;
}

static void ref_block_draw(const fs_problem *p, const fs_sampling *s, const fs_opts *m, int b0,
                           int b1, int s0, int s1, ref_scratch *sc) {
  const int V = p->vocab, nb = b1 - b0, ns = s1 - s0;
  for (int i = 0; i < nb; i++) {
    const ref_row rp = ref_row_params(s, b0 + i);
    const double *z = sc->z + (size_t)i * V;
    fs_ref_result *ri = sc->res + (size_t)i * ns;
    for (int t = 0; t < ns; t++) ref_result_init(&ri[t]);
    ref_offer_tokens(z, z, NULL, V, (int32_t)p->vocab_offset, &rp, s0, ns, ri,
                     sc->filt[i].draw_k ? &sc->filt[i] : NULL);
    for (int t = 0; m->bias_count && t < ns; t++) { /* the outputs report raw logits */
      ri[t].logit = ref_unbias(sc, i, m->bias_count, p, ri[t].token, ri[t].logit);
      ri[t].second_logit =
          ref_unbias(sc, i, m->bias_count, p, ri[t].second_token, ri[t].second_logit);
    }
  }
  ref_finish(s, b0, nb, ns, sc);
}

/* One more pass over W after the draws (ranks, targets): for each block of
** rows, first(u, p, b0, nb, h) once (h: the block's decoded H rows), then
** visit(u, b, acc, nv) for each row b and tile of nv raw logits acc
** (capped), tiles in increasing id order; then last(u, b0, nb).  `what`
** names the outputs in an allocation failure's message. */
typedef struct ref_sweep_fns {
  void (*first)(void *u, const fs_problem *p, int b0, int nb, const double *h);
  void (*visit)(void *u, int b, const double *acc, int nv);
  void (*last)(void *u, int b0, int nb);
} ref_sweep_fns;

static int ref_sweep(const fs_problem *p, float softcap, const ref_sweep_fns *f, void *u,
                     const char *what) {
  const int B = p->batch, D = p->hidden, V = p->vocab;
  int rows = REF_H_DOUBLES / D;
  rows = rows < 1 ? 1 : rows > B ? B : rows;
  double *h = malloc(sizeof(double) * (size_t)rows * (size_t)D);
  double *wt = malloc(sizeof(double) * (size_t)D * REF_VT);
  if (!h || !wt) {
    free(h), free(wt);
    return fs_err(NULL, FS_OUT_OF_MEMORY, "fs_reference: cannot allocate %zu bytes for the %s",
                  sizeof(double) * ((size_t)rows + REF_VT) * (size_t)D, what);
  }
  for (int b0 = 0; b0 < B; b0 += rows) {
    const int nb = B - b0 < rows ? B - b0 : rows;
    ref_h_block(p, b0, nb, h);
    if (f->first) f->first(u, p, b0, nb, h);
    for (int v0 = 0; v0 < V; v0 += REF_VT) {
      const int nv = V - v0 < REF_VT ? V - v0 : REF_VT;
      ref_w_tile(p, v0, nv, wt);
      for (int i = 0; i < nb; i++) {
        double acc[REF_VT];
        ref_dot(h + (size_t)i * D, wt, D, softcap, nv, acc);
        f->visit(u, b0 + i, acc, nv);
      }
    }
    if (f->last) f->last(u, b0, nb);
  }
  free(h), free(wt);
  return FS_OK;
}

/* fs_options.ranks on the host: each draw's rank, the count of the row's ids
** whose raw logit (capped, rounded to float as the outputs report it) is >=
** the draw's reported logit drawn[b S + s] (a NaN on either side counts
** nothing). */
typedef struct ref_rank_state {
  int32_t *ranks;
  int S;
  const float *drawn;
} ref_rank_state;

static void ref_rank_visit(void *u, int b, const double *acc, int nv) {
  const ref_rank_state *r = u;
  const size_t o = (size_t)b * (size_t)r->S;
  for (int j = 0; j < nv; j++)
    for (int t = 0; t < r->S; t++) r->ranks[o + t] += (float)acc[j] >= r->drawn[o + t];
}

static int ref_ranks(const fs_problem *p, const fs_opts *m, int S, const float *drawn) {
  for (size_t i = 0; i < (size_t)p->batch * (size_t)S; i++) m->ranks[i] = 0;
  ref_rank_state r = {m->ranks, S, drawn};
  const ref_sweep_fns f = {NULL, ref_rank_visit, NULL};
  return ref_sweep(p, m->softcap, &f, &r, "ranks");
}

/* fs_options.target_* on the host: each row's target's raw logit zt
** (capped, in double; NaN for an id not among the call's), the row's raw
** log-sum-exp (ref_lse_add) and the count of its ids whose raw logit,
** rounded to float as the outputs report it, is >= (float)zt (NaN counts
** nothing); target_logprobs[b] = zt - lse rounded once, target_ranks[b] the
** count.  zt of a block's rows from their target's W row, then the pass. */
typedef struct ref_target_state {
  const fs_opts *m;
  float softcap;
  double *zt; /* [rows, 3]: zt, then the lse pair (max, sum) */
  double *wt; /* [D, REF_VT]: a target's W row */
  int b0;
} ref_target_state;

static void ref_target_first(void *u, const fs_problem *p, int b0, int nb, const double *h) {
  ref_target_state *t = u;
  t->b0 = b0;
  for (int i = 0; i < nb; i++) {
    const long long v = (long long)t->m->targets[b0 + i] - p->vocab_offset;
    double *z = t->zt + 3 * i, acc[REF_VT];
    z[0] = NAN, z[1] = -INFINITY, z[2] = 0.0;
    if (t->m->target_ranks) t->m->target_ranks[b0 + i] = 0;
    if (v < 0 || v >= p->vocab) continue;
    ref_w_tile(p, (int)v, 1, t->wt);
    ref_dot(h + (size_t)i * p->hidden, t->wt, p->hidden, t->softcap, 1, acc);
    z[0] = acc[0];
  }
}

static void ref_target_visit(void *u, int b, const double *acc, int nv) {
  const ref_target_state *t = u;
  double *z = t->zt + 3 * (b - t->b0);
  ref_lse_add(z + 1, acc, nv);
  const float d = (float)z[0];
  for (int j = 0; t->m->target_ranks && j < nv; j++) t->m->target_ranks[b] += (float)acc[j] >= d;
}

static void ref_target_last(void *u, int b0, int nb) {
  const ref_target_state *t = u;
  for (int i = 0; t->m->target_lp && i < nb; i++) {
    const double *z = t->zt + 3 * i;
    t->m->target_lp[b0 + i] = (float)(z[0] - (z[1] + log(z[2])));
  }
}

static int ref_targets(const fs_problem *p, const fs_opts *m) {
  int rows = REF_H_DOUBLES / p->hidden; /* ref_sweep's block of rows */
  rows = rows < 1 ? 1 : rows > p->batch ? p->batch : rows;
  ref_target_state t = {m, m->softcap, malloc(sizeof(double) * (size_t)rows * 3),
                        malloc(sizeof(double) * (size_t)p->hidden * REF_VT), 0};
  int st = FS_OK;
  if (!t.zt || !t.wt) {
    st = fs_err(NULL, FS_OUT_OF_MEMORY, "fs_reference: cannot allocate %zu bytes for the "
                "targets", sizeof(double) * ((size_t)rows * 3 + (size_t)p->hidden * REF_VT));
  } else {
    const ref_sweep_fns f = {ref_target_first, ref_target_visit, ref_target_last};
    st = ref_sweep(p, m->softcap, &f, &t, "targets");
  }
  free(t.zt), free(t.wt);
  return st;
}

static int ref_misaligned(const void *ptr, unsigned a) {
  return ((uintptr_t)ptr % a) != 0;
}

int fs_reference_sample(const fs_problem *problem, const fs_sampling *sampling,
                        int32_t *tokens, float *logits, uint64_t *keys) {
  return fs_reference_sample_noise(problem, sampling, FS_NOISE_TOKEN, tokens, logits, keys);
}

int fs_reference_sample_noise(const fs_problem *problem, const fs_sampling *sampling,
                              int noise, int32_t *tokens, float *logits, uint64_t *keys) {
  return fs_reference_sample_ex(problem, sampling, noise, NULL, tokens, logits, keys);
}

int fs_reference_sample_ex(const fs_problem *problem, const fs_sampling *sampling, int noise,
                           const fs_options *options, int32_t *tokens, float *logits,
                           uint64_t *keys) {
  fs_opts m;
  FS_TRY(fs_validate_problem(NULL, problem, 1));
  FS_TRY(fs_validate_sampling(NULL, sampling, problem->batch));
  FS_TRY(fs_validate_noise(NULL, noise, problem));
  FS_TRY(fs_validate_options(NULL, options, problem, &m));
  FS_TRY(fs_validate_bias_noise(NULL, noise, &m));
  FS_TRY(fs_validate_filter_use(NULL, noise, &m));
  if (!tokens)
    return fs_err(NULL, FS_INVALID_ARGUMENT,
                  "tokens=NULL: a [B, num_samples] int32 host array is "
                  "required");
  if (ref_misaligned(tokens, 4))
    return fs_err(NULL, FS_INVALID_ARGUMENT,
                  "tokens=%p: must be 4-byte aligned", (void *)tokens);
  if (logits && ref_misaligned(logits, 4))
    return fs_err(NULL, FS_INVALID_ARGUMENT,
                  "logits=%p: must be 4-byte aligned", (void *)logits);
  if (keys && ref_misaligned(keys, 8))
    return fs_err(NULL, FS_INVALID_ARGUMENT,
                  "keys=%p: must be 8-byte aligned", (void *)keys);

  const int B = problem->batch, D = problem->hidden, V = problem->vocab;
  const int S = sampling->num_samples;
  int rows = REF_H_DOUBLES / D;
  if (m.filter && rows > REF_Z_DOUBLES / V) rows = REF_Z_DOUBLES / V; /* the rows' logits */
  if (rows < 1) rows = 1;
  if (rows > B) rows = B;
  int samples = REF_RESULTS_MAX / rows;
  if (samples < 1) samples = 1;
  if (samples > S) samples = S;

  float *drawn = NULL; /* with ranks: the draws' reported logits */
  if (m.ranks && !(drawn = malloc(sizeof(float) * (size_t)B * (size_t)S)))
    return fs_err(NULL, FS_OUT_OF_MEMORY, "fs_reference: cannot allocate %zu bytes for the "
                  "ranks' logits", sizeof(float) * (size_t)B * (size_t)S);
  ref_scratch sc;
  const int st = ref_alloc(&sc, rows, samples, D, m.bias_count, m.filter ? V : 0, m.top_n);
  if (st) {
    free(drawn);
    return st;
  }
  for (int b0 = 0; b0 < B; b0 += rows) {
    const int b1 = B - b0 < rows ? B : b0 + rows;
    if (m.filter) ref_block_logits(problem, sampling, &m, b0, b1, &sc);
    for (int s0 = 0; s0 < S; s0 += samples) {
      const int s1 = S - s0 < samples ? S : s0 + samples;
      if (m.filter) ref_block_draw(problem, sampling, &m, b0, b1, s0, s1, &sc);
      else ref_pass(problem, sampling, noise, &m, b0, b1, s0, s1, &sc);
      for (int i = 0; i < b1 - b0; i++) {
        for (int t = 0; t < s1 - s0; t++) {
          const fs_ref_result *r = &sc.res[(size_t)i * (s1 - s0) + t];
          const size_t o = (size_t)(b0 + i) * S + (size_t)(s0 + t);
          tokens[o] = r->token;
          if (logits) logits[o] = (float)r->logit;
          if (drawn) drawn[o] = (float)r->logit;
          if (m.logprobs) m.logprobs[o] = (float)(r->logit - r->lse);
          if (keys) keys[o] = fs_pack_key((float)r->score, (uint32_t)r->token);
        }
      }
      for (int i = 0; s0 == 0 && i < b1 - b0; i++) { /* the rows' top logprobs lists */
        const double lse = sc.lse[2 * i] + log(sc.lse[2 * i + 1]);
        const ref_top *list = sc.top + (size_t)i * (size_t)m.top_n;
        for (int j = 0; j < m.top_n; j++) {
          const size_t o = (size_t)(b0 + i) * (size_t)m.top_n + (size_t)j;
          m.top_tokens[o] = j < sc.ntop[i] ? list[j].token : -1;
          m.top_values[o] = j < sc.ntop[i] ? (float)(list[j].z - lse) : -INFINITY;
        }
      }
    }
  }
  ref_free(&sc);
  const int rst = drawn ? ref_ranks(problem, &m, S, drawn) : FS_OK;
  free(drawn);
  return rst ? rst : m.targets ? ref_targets(problem, &m) : FS_OK;
}

int fs_reference_row(const fs_problem *p, const fs_sampling *s, int row,
                     int sample, fs_ref_result *out) {
  return fs_reference_row_noise(p, s, FS_NOISE_TOKEN, row, sample, out);
}

int fs_reference_row_noise(const fs_problem *p, const fs_sampling *s, int noise,
                           int row, int sample, fs_ref_result *out) {
  return fs_reference_row_ex(p, s, noise, NULL, row, sample, out);
}

int fs_reference_row_ex(const fs_problem *p, const fs_sampling *s, int noise,
                        const fs_options *options, int row, int sample, fs_ref_result *out) {
  fs_opts m;
  FS_TRY(fs_validate_problem(NULL, p, 1));
  FS_TRY(fs_validate_sampling(NULL, s, p->batch));
  FS_TRY(fs_validate_noise(NULL, noise, p));
  FS_TRY(fs_validate_options(NULL, options, p, &m));
  FS_TRY(fs_validate_bias_noise(NULL, noise, &m));
  FS_TRY(fs_validate_filter_use(NULL, noise, &m));
  if (row < 0 || row >= p->batch)
    return fs_err(NULL, FS_INVALID_ARGUMENT,
                  "row=%d: must be in 0..%d (B=%d)", row, (int)p->batch - 1,
                  (int)p->batch);
  if (sample < 0 || sample >= s->num_samples)
    return fs_err(NULL, FS_INVALID_ARGUMENT,
                  "sample=%d: must be in 0..%d (num_samples=%d)", sample,
                  (int)s->num_samples - 1, (int)s->num_samples);
  if (!out)
    return fs_err(NULL, FS_INVALID_ARGUMENT,
                  "out=NULL: an fs_ref_result is required");
  ref_scratch sc;
  FS_TRY(ref_alloc(&sc, 1, 1, p->hidden, m.bias_count, m.filter ? p->vocab : 0, m.top_n));
  if (m.filter) {
    ref_block_logits(p, s, &m, row, row + 1, &sc);
    ref_block_draw(p, s, &m, row, row + 1, sample, sample + 1, &sc);
  } else {
    ref_pass(p, s, noise, &m, row, row + 1, sample, sample + 1, &sc);
  }
  *out = sc.res[0];
  ref_free(&sc);
  return FS_OK;
}
