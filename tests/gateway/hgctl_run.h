/*
 * hgctl_run.h - runs the hgctl binary from a test, as a user would: a child
 * process with the key in its environment and its output captured. Shared by
 * the hgctl tests; each test sets g_hgctl (the binary) and g_port.
 */
#ifndef HG_TESTS_HGCTL_RUN_H
#define HG_TESTS_HGCTL_RUN_H

#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_harness.h"

static const char *g_hgctl;
static char g_port[16];
/* When set, spawn adds no --port: the address comes from the environment. */
static bool g_spawn_no_port;

typedef struct out {
  char text[65536];
  char err[4096];
  int status;
} out_t;

static inline void read_all(int fd, char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r <= 0) break;
    n += (size_t)r;
    if (n == cap - 1) break;
  }
  buf[n] = '\0';
}

/* Reads fd into buf (appending at *len) until needle appears or timeout_ms
 * passes; true if it appeared. For a child that prints as things happen. */
static inline bool read_until(int fd, char *buf, size_t cap, size_t *len, const char *needle,
                              int timeout_ms) {
  for (int waited = 0;; waited += 20) {
    buf[*len] = '\0';
    if (strstr(buf, needle) != NULL) return true;
    if (waited >= timeout_ms) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 20) == 1) {
      ssize_t r = read(fd, buf + *len, cap - 1 - *len);
      if (r <= 0) return false;
      *len += (size_t)r;
    }
  }
}

/* Starts hgctl with args (NULL-terminated); stdout and stderr piped. key 0:
 * no key and no --port (offline commands); otherwise the key's id and secret
 * (secret_hex, or the harness's secret for key when NULL) in the environment
 * and --port g_port unless args name a port. */
static inline pid_t spawn(uint64_t key, const char *secret_hex, const char *const *args,
                          int *out_fd, int *err_fd) {
  int po[2], pe[2];
  assert_int_equal(pipe(po), 0);
  assert_int_equal(pipe(pe), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]);
    close(pe[0]);
    const char *argv[40];
    int n = 0;
    argv[n++] = g_hgctl;
    bool port_given = false;
    for (int i = 0; args[i] != NULL && n < 36; i++) {
      port_given |= strcmp(args[i], "--port") == 0;
      argv[n++] = args[i];
    }
    if (key != 0) {
      char kid[24], sec[65];
      snprintf(kid, sizeof kid, "%" PRIu64, key);
      if (secret_hex == NULL) ch_secret_hex(key, sec);
      setenv("HG_KEY_ID", kid, 1);
      setenv("HG_SECRET", secret_hex ? secret_hex : sec, 1);
      if (!port_given && !g_spawn_no_port) {
        argv[n++] = "--port";
        argv[n++] = g_port;
      }
    }
    argv[n] = NULL;
    execv(g_hgctl, (char *const *)argv);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  *out_fd = po[0];
  *err_fd = pe[0];
  return pid;
}

/* Reads the rest of a spawned hgctl's output into o (after the len bytes
 * of o->text already read, e.g. by read_until), reaps it and keeps its exit
 * status. To stop one that runs until told, kill it with SIGTERM first. */
static inline void collect(pid_t pid, int fo, int fe, out_t *o, size_t len) {
  read_all(fo, o->text + len, sizeof o->text - len);
  read_all(fe, o->err, sizeof o->err);
  close(fo);
  close(fe);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  o->status = WEXITSTATUS(st);
}

/* Runs hgctl to the end (see spawn) and keeps its output and exit status. */
static inline void run_as(out_t *o, uint64_t key, const char *secret_hex,
                          const char *const *args) {
  int fo, fe;
  pid_t pid = spawn(key, secret_hex, args, &fo, &fe);
  collect(pid, fo, fe, o, 0);
}

#endif
