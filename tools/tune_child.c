/*
** tune_child.c: the parent's side of the watchdog child (tune_child_*).
**
** The child is this program again (fork, then exec of /proc/self/exe with
** the hidden subcommand "__worker IN OUT DEVICE"): the parent runs NVRTC
** threads and must not hand a copy of that address space to CUDA, and a
** fresh exec guarantees the parent never initialised CUDA in the child's
** image.  The two talk over a pair of pipes in fixed-size tune_msg records
** (smaller than PIPE_BUF, so each is written atomically), a cubin following
** SETUP and JOB.  Every wait has a deadline; a child that misses it, dies or
** sends garbage is killed and reaped, and the caller learns why.
*/
#include "tune.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(tune_msg) <= PIPE_BUF, "a message must be written atomically");

#define POLL_SLICE_MS 100 /* the longest a wait goes without looking at `interrupted` */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
  (void)sig;
  if (interrupted) { /* a second Ctrl-C: leave now */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    raise(sig);
  }
  interrupted = 1;
}

void tune_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: poll() returns EINTR */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN); /* a dead child is seen as EPIPE */
}

int tune_interrupted(void) { return interrupted != 0; }

/* Waits (up to ~1 s) for the child to exit by itself so its status can be
** reported, then kills it; describes how it ended in why (if not NULL). */
static void reap(tune_child *c, char *why, size_t n) {
  int status = 0;
  pid_t r = 0;
  if (c->pid <= 0) return;
  for (int i = 0; i < 50 && r == 0; i++) {
    r = waitpid(c->pid, &status, WNOHANG);
    if (r == 0) nanosleep(&(struct timespec){0, 20000000}, NULL);
  }
  if (r == 0) {
    kill(c->pid, SIGKILL);
    r = waitpid(c->pid, &status, 0);
  }
  if (why && r == c->pid) {
    size_t len = strlen(why);
    if (WIFSIGNALED(status))
      snprintf(why + len, n - len, " (child killed by signal %d, %s)", WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status) && WEXITSTATUS(status))
      snprintf(why + len, n - len, " (child exited with status %d)", WEXITSTATUS(status));
  }
  close(c->to_fd);
  close(c->from_fd);
  c->pid = 0;
  c->to_fd = c->from_fd = -1;
}

void tune_child_kill(tune_child *c) {
  if (c->pid <= 0) return;
  kill(c->pid, SIGKILL);
  reap(c, NULL, 0);
}

/* Milliseconds left to `deadline` (fs_tools_now() units), at least 0. */
static int left_ms(double deadline) {
  double l = deadline - fs_tools_now();
  return l <= 0 ? 0 : l > 1e9 ? 1000000000 : (int)l + 1;
}

/* Moves n bytes through fd (reading or writing) by the deadline.  Returns
** TUNE_CHILD_OK, TUNE_CHILD_DIED (why says: end of file, timeout, error) or
** TUNE_CHILD_INTERRUPTED. */
static int xfer(int fd, void *buf, size_t n, int writing, double deadline, char *why,
                size_t wn) {
  char *p = buf;
  size_t done = 0;
  while (done < n) {
    if (interrupted) return TUNE_CHILD_INTERRUPTED;
    struct pollfd pf = {fd, (short)(writing ? POLLOUT : POLLIN), 0};
    int ms = left_ms(deadline);
    if (ms == 0) {
      snprintf(why, wn, "no answer within the time limit");
      return TUNE_CHILD_DIED;
    }
    /* A signal that lands between the check above and poll(), or in a
    ** compile thread (they do not block SIGINT), interrupts no poll(): the
    ** slice bounds how late `interrupted` is seen. */
    int r = poll(&pf, 1, ms < POLL_SLICE_MS ? ms : POLL_SLICE_MS);
    if (r < 0) {
      if (errno == EINTR) continue;
      snprintf(why, wn, "poll: %s", strerror(errno));
      return TUNE_CHILD_DIED;
    }
    if (r == 0) continue; /* re-check the deadline */
    ssize_t k = writing ? write(fd, p + done, n - done) : read(fd, p + done, n - done);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      snprintf(why, wn, "%s: %s", writing ? "write" : "read", strerror(errno));
      return TUNE_CHILD_DIED;
    }
    if (k == 0) {
      snprintf(why, wn, "the child closed its pipe");
      return TUNE_CHILD_DIED;
    }
    done += (size_t)k;
  }
  return TUNE_CHILD_OK;
}

static int read_msg(tune_child *c, tune_msg *m, double deadline, char *why, size_t n) {
  int r = xfer(c->from_fd, m, sizeof *m, 0, deadline, why, n);
  if (r == TUNE_CHILD_OK && m->magic != TUNE_MSG_MAGIC) {
    snprintf(why, n, "malformed message from the child");
    r = TUNE_CHILD_DIED;
  }
  if (r == TUNE_CHILD_OK) m->message[sizeof m->message - 1] = 0;
  return r;
}

static int set_cloexec(int fd, int on) {
  return fcntl(fd, F_SETFD, on ? FD_CLOEXEC : 0);
}

int tune_child_spawn(tune_child *c, int device, double timeout_s, char *why, size_t n) {
  int to[2], from[2];
  char a_in[16], a_out[16], a_dev[16];
  memset(c, 0, sizeof *c);
  c->to_fd = c->from_fd = -1;
  c->device = device;
  why[0] = 0;
  if (pipe(to) != 0) {
    snprintf(why, n, "pipe: %s", strerror(errno));
    return TUNE_CHILD_DIED;
  }
  if (pipe(from) != 0) {
    snprintf(why, n, "pipe: %s", strerror(errno));
    close(to[0]);
    close(to[1]);
    return TUNE_CHILD_DIED;
  }
  set_cloexec(to[0], 1);
  set_cloexec(to[1], 1);
  set_cloexec(from[0], 1);
  set_cloexec(from[1], 1);
  snprintf(a_in, sizeof a_in, "%d", to[0]);
  snprintf(a_out, sizeof a_out, "%d", from[1]);
  snprintf(a_dev, sizeof a_dev, "%d", device);
  char *argv[] = {"fs-tune", "__worker", a_in, a_out, a_dev, NULL};
  fflush(stdout);
  fflush(stderr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, n, "fork: %s", strerror(errno));
    close(to[0]); close(to[1]); close(from[0]); close(from[1]);
    return TUNE_CHILD_DIED;
  }
  if (pid == 0) {
    /* Only async-signal-safe calls until exec.  Ctrl-C and SIGTERM to the
    ** process group are the parent's to handle (it kills the worker when it
    ** must); ignored from here on, so no window before the worker's own
    ** signal() calls.  Since it ignores them, PR_SET_PDEATHSIG ends it with
    ** its parent (a second Ctrl-C, a SIGKILL): no orphan left timing. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, NULL);
    sigaction(SIGTERM, &ign, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    set_cloexec(to[0], 0);
    set_cloexec(from[1], 0);
    dup2(2, 1); /* the child's stray output must not break the parent's table */
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  c->pid = pid;
  c->to_fd = to[1];
  c->from_fd = from[0];
  fcntl(c->to_fd, F_SETFL, fcntl(c->to_fd, F_GETFL) | O_NONBLOCK);
  int r = read_msg(c, &c->hello, fs_tools_now() + timeout_s * 1e3, why, n);
  if (r == TUNE_CHILD_OK && c->hello.type != TUNE_MSG_HELLO) {
    snprintf(why, n, "the child did not say hello");
    r = TUNE_CHILD_DIED;
  }
  if (r != TUNE_CHILD_OK) {
    if (r == TUNE_CHILD_INTERRUPTED) kill(c->pid, SIGKILL);
    reap(c, why, n);
  }
  return r;
}

int tune_child_call(tune_child *c, const tune_msg *req, const void *cubin, tune_msg *reply,
                    double timeout_s, char *why, size_t n) {
  double deadline = fs_tools_now() + timeout_s * 1e3;
  why[0] = 0;
  if (c->pid <= 0) {
    snprintf(why, n, "no child");
    return TUNE_CHILD_DIED;
  }
  int r = xfer(c->to_fd, (void *)req, sizeof *req, 1, deadline, why, n);
  if (r == TUNE_CHILD_OK && req->cubin_size)
    r = xfer(c->to_fd, (void *)cubin, (size_t)req->cubin_size, 1, deadline, why, n);
  if (r == TUNE_CHILD_OK) r = read_msg(c, reply, deadline, why, n);
  if (r == TUNE_CHILD_OK && reply->type != req->type + 1) {
    snprintf(why, n, "unexpected message type %u from the child", reply->type);
    r = TUNE_CHILD_DIED;
  }
  if (r != TUNE_CHILD_OK) {
    kill(c->pid, SIGKILL);
    reap(c, why, n);
  }
  return r;
}

void tune_child_quit(tune_child *c) {
  if (c->pid <= 0) return;
  tune_msg q;
  char why[64];
  memset(&q, 0, sizeof q);
  q.magic = TUNE_MSG_MAGIC;
  q.type = TUNE_MSG_QUIT;
  xfer(c->to_fd, &q, sizeof q, 1, fs_tools_now() + 1000, why, sizeof why);
  reap(c, NULL, 0); /* waits up to ~1 s, then kills */
}
