/*
** tune_compile.c: a pool of threads compiling variant sources with NVRTC
** (tune_pool_*), so that compilation, which dominates naive tuners, runs
** ahead of and alongside the timing.
**
** The queue is the plan's compile order (every bucket's default, then the
** buckets' variants in turn, most promising first); tune_pool_wait() moves
** a source the timing needs now to the front.  NVRTC is thread-safe; the
** generator is not, so sources were generated before the pool starts.  A
** compile result (cubin, registers, spills, log) is written to its
** tune_item under the pool's mutex and is read-only once its state is
** TUNE_DONE.
*/
#include "tune.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tune_pool {
  tune_plan *pl;
  pthread_mutex_t mu;
  pthread_cond_t done_cv;
  int *queue;          /* source items; [head, n) not yet taken */
  int n, head;
  int stop, ndone;
  pthread_t *threads;
  int nthreads;
};

static void compile_one(tune_item *it, tune_item *res) {
  fs_cubin c;
  char err[256];
  int st = fs_nvrtc_compile(it->v.name, it->src, it->v.target, &c, err, sizeof err);
  res->status = st;
  res->registers = c.registers;
  res->spills = c.spill_bytes;
  res->stack = c.stack_bytes;
  res->seconds = c.seconds;
  if (st) {
    snprintf(res->err, sizeof res->err, "%s", err);
    res->log = c.log;  /* keep the story of a failure */
    c.log = NULL;
  } else {
    res->cubin = c.data;
    res->cubin_size = c.size;
    c.data = NULL;
  }
  fs_cubin_free(&c);
}

/* Compiles `it` (state TUNE_COMPILING, mutex not held) and publishes the
** result under the mutex. */
static void run_compile(tune_pool *p, tune_item *it) {
  tune_item res;
  memset(&res, 0, sizeof res);
  compile_one(it, &res);
  pthread_mutex_lock(&p->mu);
  it->status = res.status;
  it->registers = res.registers;
  it->spills = res.spills;
  it->stack = res.stack;
  it->seconds = res.seconds;
  it->cubin = res.cubin;
  it->cubin_size = res.cubin_size;
  it->log = res.log;
  memcpy(it->err, res.err, sizeof it->err);
  it->state = TUNE_DONE;
  p->ndone++;
  pthread_cond_broadcast(&p->done_cv);
  pthread_mutex_unlock(&p->mu);
}

static void *worker(void *arg) {
  tune_pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (!p->stop && p->head < p->n && p->pl->items[p->queue[p->head]].state != TUNE_PENDING)
      p->head++;
    if (p->stop || p->head >= p->n) {
      pthread_mutex_unlock(&p->mu);
      return NULL;
    }
    tune_item *it = &p->pl->items[p->queue[p->head++]];
    it->state = TUNE_COMPILING;
    pthread_mutex_unlock(&p->mu);
    run_compile(p, it);
  }
}

int tune_pool_start(tune_pool **pp, tune_plan *pl, int threads) {
  tune_pool *p = calloc(1, sizeof *p);
  *pp = NULL;
  if (!p) return FS_OUT_OF_MEMORY;
  p->pl = pl;
  p->n = pl->ncompile;
  p->queue = malloc(((size_t)p->n + 1) * sizeof *p->queue);
  if (threads > p->n) threads = p->n > 0 ? p->n : 1;
  p->threads = calloc((size_t)threads, sizeof *p->threads);
  if (!p->queue || !p->threads) {
    free(p->queue);
    free(p->threads);
    free(p);
    return FS_OUT_OF_MEMORY;
  }
  memcpy(p->queue, pl->compile, (size_t)p->n * sizeof *p->queue);
  for (int i = 0; i < p->n; i++)
    if (pl->items[p->queue[i]].state == TUNE_DONE) p->ndone++;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  for (int t = 0; t < threads; t++) {
    if (pthread_create(&p->threads[t], NULL, worker, p) != 0) break;
    p->nthreads++;
  }
  if (p->nthreads == 0) {
    tune_pool_stop(p);
    return FS_OUT_OF_MEMORY;
  }
  *pp = p;
  return FS_OK;
}

tune_item *tune_pool_wait(tune_pool *p, int i) {
  tune_item *it = tune_src_item(p->pl, i);
  const int s = (int)(it - p->pl->items);
  pthread_mutex_lock(&p->mu);
  if (it->state == TUNE_PENDING) {
    /* Bring it to the front: the timing is waiting for it. */
    int found = 0;
    for (int q = p->head; q < p->n && !found; q++)
      if (p->queue[q] == s) {
        memmove(&p->queue[p->head + 1], &p->queue[p->head],
                (size_t)(q - p->head) * sizeof *p->queue);
        p->queue[p->head] = s;
        found = 1;
      }
    if (!found) { /* not queued (or the threads are gone): compile here */
      it->state = TUNE_COMPILING;
      pthread_mutex_unlock(&p->mu);
      run_compile(p, it);
      pthread_mutex_lock(&p->mu);
    }
  }
  while (it->state != TUNE_DONE) pthread_cond_wait(&p->done_cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  return it;
}

int tune_pool_done(tune_pool *p) {
  pthread_mutex_lock(&p->mu);
  int n = p->ndone;
  pthread_mutex_unlock(&p->mu);
  return n;
}

void tune_pool_stop(tune_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_mutex_unlock(&p->mu);
  for (int t = 0; t < p->nthreads; t++) pthread_join(p->threads[t], NULL);
  pthread_cond_destroy(&p->done_cv);
  pthread_mutex_destroy(&p->mu);
  free(p->queue);
  free(p->threads);
  free(p);
}
