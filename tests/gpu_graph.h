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

/* The options that only FS_NOISE_TOKEN calls take (top logprobs, ranks), and
** with tp only one GPU's (top logprobs): fs_sample_ex under
** FS_NOISE_GROUP16, and with tp fs_sample_tp_ex, must return
** FS_INVALID_ARGUMENT with a message naming `name`. */
static inline void gu_expect_one_gpu_token(fs_context *c, const fs_problem *p,
                                           const fs_sampling *s, const fs_options *opt,
                                           const fs_outputs *out, const char *name, int tp) {
  CHECK(fs_context_set_noise(c, FS_NOISE_GROUP16) == FS_OK);
  CHECK_MSG(fs_sample_ex(c, p, s, opt, out, NULL) == FS_INVALID_ARGUMENT &&
                strstr(fs_last_error(c), name),
            "group16: %s", fs_last_error(c));
  CHECK(fs_context_set_noise(c, FS_NOISE_TOKEN) == FS_OK);
  if (tp)
    CHECK_MSG(fs_sample_tp_ex(c, p, s, opt, out, gu_no_reduce, NULL, NULL) ==
                    FS_INVALID_ARGUMENT &&
                strstr(fs_last_error(c), name),
            "fs_sample_tp_ex: %s", fs_last_error(c));
}

#endif /* FS_GPU_GRAPH_H */
