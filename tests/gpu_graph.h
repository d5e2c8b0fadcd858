/*
** gpu_graph.h: what the GPU tests of CUDA-graph capture share (test_determinism,
** test_mask, test_mode_winners, test_bias, test_toplp, test_ranks): a host copy of one
** call's outputs (snap), one call's capture, a graph's instantiation across
** driver API versions, and one checked replay.  Header-only (static), like gpu_util.h.
*/
#ifndef FS_GPU_GRAPH_H
#define FS_GPU_GRAPH_H

#include "gpu_util.h"

/* A copy of one call's n outputs. */
typedef struct snap {
  size_t n;
  int32_t *tok;
  float *logit;
  uint64_t *key;
} snap;

static inline snap snap_take(const gu_outputs *o) {
  snap s;
  s.n = o->n;
  s.tok = gu_malloc(s.n * sizeof *s.tok);
  s.logit = gu_malloc(s.n * sizeof *s.logit);
  s.key = gu_malloc(s.n * sizeof *s.key);
  memcpy(s.tok, o->h_tokens, s.n * sizeof *s.tok);
  memcpy(s.logit, o->h_logits, s.n * sizeof *s.logit);
  memcpy(s.key, o->h_keys, s.n * sizeof *s.key);
  return s;
}

static inline void snap_free(snap *s) {
  free(s->tok);
  free(s->logit);
  free(s->key);
  memset(s, 0, sizeof *s);
}

static inline CUresult gu_graph_instantiate(fs_context *c, CUgraphExec *exec, CUgraph graph) {
#if CUDA_VERSION >= 12000
  return c->cu->cuGraphInstantiate(exec, graph, 0);
#else
  return c->cu->cuGraphInstantiate(exec, graph, NULL, NULL, 0);
#endif
}

/* One fs_sample_ex call of c captured on stream into *graph (ended and
** returned whatever the call's status, which it returns). */
static inline int gu_capture_ex(fs_context *c, CUstream stream, const fs_problem *p,
                                const fs_sampling *s, const fs_options *opt,
                                const fs_outputs *out, CUgraph *graph) {
  gu_push(c);
  GU_CU(c, c->cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const int st = fs_sample_ex(c, p, s, opt, out, (void *)stream);
  GU_CU(c, c->cu->cuStreamEndCapture(stream, graph));
  gu_pop(c);
  return st;
}

/* gu_capture_ex's graph of a call that must succeed (a CHECK), instantiated. */
static inline CUgraphExec gu_capture_exec(fs_context *c, CUstream stream, const fs_problem *p,
                                          const fs_sampling *s, const fs_options *opt,
                                          const fs_outputs *out, CUgraph *graph,
                                          const char *what) {
  const int st = gu_capture_ex(c, stream, p, s, opt, out, graph);
  CHECK_MSG(st == FS_OK, "%s: captured fs_sample_ex: %s", what, fs_last_error(c));
  CUgraphExec exec;
  gu_push(c);
  GU_CU(c, gu_graph_instantiate(c, &exec, *graph));
  gu_pop(c);
  return exec;
}

/* The status of a fresh context's first such call (after fs_prepare),
** captured on stream; its message into msg (len bytes).  The graph and the
** context are destroyed. */
static inline int gu_capture_fresh(CUstream stream, const fs_problem *p, const fs_sampling *s,
                                   const fs_options *opt, const fs_outputs *out, char *msg,
                                   size_t len) {
  fs_context *fresh;
  CHECK(fs_context_create(0, &fresh) == FS_OK);
  CHECK(fs_prepare(fresh, p, s) == FS_OK);
  CUgraph g;
  const int st = gu_capture_ex(fresh, stream, p, s, opt, out, &g);
  snprintf(msg, len, "%s", fs_last_error(fresh));
  gu_push(fresh);
  if (g) fresh->cu->cuGraphDestroy(g);
  gu_pop(fresh);
  fs_context_destroy(fresh);
  return st;
}

/* One replay of a captured graph, outputs poisoned first and checked after. */
static inline snap gu_graph_replay(fs_context *c, CUgraphExec exec, CUstream stream,
                                   gu_outputs *o, const char *what) {
  gu_outputs_poison(c, o);
  gu_push(c);
  GU_CU(c, c->cu->cuGraphLaunch(exec, stream));
  gu_pop(c);
  gu_outputs_fetch(c, o);
  gu_outputs_check(o, what);
  return snap_take(o);
}

/* A non-blocking stream on c's context. */
static inline CUstream gu_stream_new(fs_context *c) {
  CUstream stream;
  gu_push(c);
  GU_CU(c, c->cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  gu_pop(c);
  return stream;
}

/* Destroys a graph, its instance and the stream it was captured on. */
static inline void gu_graph_done(fs_context *c, CUgraphExec exec, CUgraph graph,
                                 CUstream stream) {
  gu_push(c);
  c->cu->cuGraphExecDestroy(exec);
  c->cu->cuGraphDestroy(graph);
  c->cu->cuStreamDestroy(stream);
  gu_pop(c);
}

static inline int gu_no_reduce(void *user, void *buf, size_t count, int op, void *stream) {
  (void)user, (void)buf, (void)count, (void)op, (void)stream;
  return 1; /* never reached where a call is refused first */
}

/* The caller's further outputs (lists, ranks) between gu_group16_replay's
** steps: after the direct call (replayed 0: fetch and keep them, then
** poison them) and after the replay (1: fetch and compare). */
typedef void (*gu_extra_fn)(fs_context *c, void *user, int replayed);

/* FS_NOISE_GROUP16 (set on c, FS_NOISE_TOKEN again after) with options
** that read the raw logits (top logprobs, ranks; since 0.3.17): one direct
** fs_sample_ex call, then the same call captured and replayed over poisoned
** outputs, whose draws must be the direct call's bit for bit, and (but
** under the fake driver, which runs no kernel) at least one token unlike
** `token`'s, the FS_NOISE_TOKEN call's draw (else the noise took no
** effect). extra compares the options' own outputs. */
static inline void gu_group16_replay(fs_context *c, const fs_problem *p, const fs_sampling *s,
                                     const fs_options *opt, const fs_outputs *out,
                                     gu_outputs *o, const snap *token, gu_extra_fn extra,
                                     void *user, const char *what) {
  CHECK(fs_context_set_noise(c, FS_NOISE_GROUP16) == FS_OK);
  gu_outputs_poison(c, o);
  CHECK_MSG(fs_sample_ex(c, p, s, opt, out, NULL) == FS_OK, "%s group16: %s", what,
            fs_last_error(c));
  gu_outputs_fetch(c, o);
  gu_outputs_check(o, what);
  snap d = snap_take(o);
  extra(c, user, 0);
  const CUstream stream = gu_stream_new(c);
  CUgraph graph;
  CUgraphExec exec = gu_capture_exec(c, stream, p, s, opt, out, &graph, what);
  snap r = gu_graph_replay(c, exec, stream, o, what);
  CHECK_MSG(!memcmp(d.tok, r.tok, d.n * 4) && !memcmp(d.key, r.key, d.n * 8) &&
                !memcmp(d.logit, r.logit, d.n * 4),
            "%s group16: the replay's draws differ from the direct call's", what);
  extra(c, user, 1);
  long moved = 0;
  for (size_t i = 0; i < d.n && i < token->n; i++) moved += d.tok[i] != token->tok[i];
  CHECK_MSG(moved > 0 || gu_fake_driver(),
            "%s group16: every token the FS_NOISE_TOKEN call's: is the noise set?", what);
  printf("ok %s group16: the replay's draws and outputs are the call's; %ld of %zu tokens "
         "unlike the per-token noise's\n", what, moved, d.n);
  gu_graph_done(c, exec, graph, stream);
  snap_free(&d), snap_free(&r);
  CHECK(fs_context_set_noise(c, FS_NOISE_TOKEN) == FS_OK);
}

#endif /* FS_GPU_GRAPH_H */
