/*
 * hgctl_run.c - hgctl as a child process with piped output (see
 * hgctl_run.h); failures are cmocka assertions.
 */
#include "hgctl_run.h"

#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include <cmocka.h>

#include "test_keys.h"

const char *hgctl_path;
char hgctl_port[16];
bool hgctl_port_from_env;
bool hgctl_merge_stderr;

void hgctl_read_all(int fd, char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r <= 0) break;
    n += (size_t)r;
    if (n == cap - 1) break;
  }
  buf[n] = '\0';
}

bool hgctl_read_until(int fd, char *buf, size_t cap, size_t *len, const char *needle,
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

pid_t hgctl_spawn(uint64_t key, const char *secret_hex, const char *const *args, int *out_fd,
                  int *err_fd) {
  /* Everything the child needs is built here, before fork: the test process
   * runs server threads (the gateway's TLS, the pipeline) that may hold
   * malloc's or libcrypto's locks at the fork, so the child only duplicates
   * descriptors and execs (no setenv, no hashing of the key's secret). */
  const char *argv[40];
  int n = 0;
  argv[n++] = hgctl_path;
  bool port_given = false;
  for (int i = 0; args[i] != NULL && n < 36; i++) {
    port_given |= strcmp(args[i], "--port") == 0;
    argv[n++] = args[i];
  }
  static char kid[40], sec[80];
  enum { ENV_MAX = 512 };
  static const char *envp[ENV_MAX + 3];
  size_t ne = 0;
  for (char **e = environ; *e != NULL && ne < ENV_MAX; e++) {
    if (key != 0 && (strncmp(*e, "HG_KEY_ID=", 10) == 0 || strncmp(*e, "HG_SECRET=", 10) == 0))
      continue;
    envp[ne++] = *e;
  }
  if (key != 0) {
    char hex[65];
    if (secret_hex == NULL) ts_key_secret_hex(key, hex);
    snprintf(kid, sizeof kid, "HG_KEY_ID=%" PRIu64, key);
    snprintf(sec, sizeof sec, "HG_SECRET=%s", secret_hex ? secret_hex : hex);
    envp[ne++] = kid;
    envp[ne++] = sec;
    if (!port_given && !hgctl_port_from_env) {
      argv[n++] = "--port";
      argv[n++] = hgctl_port;
    }
  }
  envp[ne] = NULL;
  argv[n] = NULL;
  int po[2], pe[2];
  assert_int_equal(pipe(po), 0);
  assert_int_equal(pipe(pe), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(hgctl_merge_stderr ? po[1] : pe[1], 2);
    close(po[0]);
    close(pe[0]);
    execve(hgctl_path, (char *const *)argv, (char *const *)envp);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  *out_fd = po[0];
  *err_fd = pe[0];
  return pid;
}

void hgctl_collect(pid_t pid, int fo, int fe, hgctl_out_t *o, size_t len) {
  hgctl_read_all(fo, o->text + len, sizeof o->text - len);
  hgctl_read_all(fe, o->err, sizeof o->err);
  close(fo);
  close(fe);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  o->status = WEXITSTATUS(st);
}

void hgctl_run_as(hgctl_out_t *o, uint64_t key, const char *secret_hex, const char *const *args) {
  int fo, fe;
  pid_t pid = hgctl_spawn(key, secret_hex, args, &fo, &fe);
  hgctl_collect(pid, fo, fe, o, 0);
}
