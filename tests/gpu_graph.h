/*
** gpu_graph.h: what the GPU tests of CUDA-graph capture share (test_determinism,
** test_mask, test_mode_winners): a host copy of one call's outputs (snap),
** a graph's instantiation across driver API versions, and one checked
** replay.  Header-only (static), like gpu_util.h.
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

#endif /* FS_GPU_GRAPH_H */
