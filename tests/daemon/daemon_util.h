/*
 * daemon_util.h - shared by the hourglassd integration tests: temporary
 * directories, starting the daemon as a child process with its log in a
 * file, waiting for log lines, loopback HTTP requests, stopping with a
 * bounded wait. Everything is bounded in time; only 127.0.0.1 is used.
 */
#ifndef HOURGLASS_TESTS_DAEMON_UTIL_H
#define HOURGLASS_TESTS_DAEMON_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *g_bin; /* hourglassd, from argv[1] */

/* Children started by du_spawn and not yet reaped, so that a failed test
 * never leaves a daemon running (du_kill_all in the teardown). */
static pid_t g_children[16];

static inline int du_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static inline void du_rm_rf(const char *dir) { nftw(dir, du_rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh directory in the build tree (a real disk). buf holds PATH_MAX. */
static inline char *du_tmpdir(char *buf, size_t cap, const char *tag) {
  char cwd[512];
  if (getcwd(cwd, sizeof cwd) == NULL) return NULL;
  if ((size_t)snprintf(buf, cap, "%s/hgtest-%s-XXXXXX", cwd, tag) >= cap) return NULL;
  return mkdtemp(buf);
}

static inline double du_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void du_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Starts bin with argv (NULL-terminated, argv[0] included); stdout and
 * stderr appended to log. Returns the pid. */
static inline pid_t du_spawn(char *const argv[], const char *log) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  for (int i = 0; i < 16; i++) {
    if (g_children[i] == 0) {
      g_children[i] = pid;
      break;
    }
  }
  return pid;
}

/* Reads the whole file into a malloc'd string ("" if missing). */
static inline char *du_read(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return strdup("");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  size_t got = fread(b, 1, (size_t)n, f);
  b[got] = '\0';
  fclose(f);
  return b;
}

/* Waits until log contains needle (after skipping `from` bytes); returns a
 * malloc'd copy of the log, or NULL on timeout. */
static inline char *du_wait_log(const char *log, const char *needle, double timeout_s) {
  double end = du_now() + timeout_s;
  for (;;) {
    char *b = du_read(log);
    if (strstr(b, needle) != NULL) return b;
    free(b);
    if (du_now() > end) return NULL;
    du_sleep_ms(20);
  }
}

/* Value after `key=` in the last line of text containing `line_has`. */
static inline int du_field(const char *text, const char *line_has, const char *key, char *out,
                           size_t cap) {
  const char *best = NULL;
  for (const char *p = text; (p = strstr(p, line_has)) != NULL; p++) best = p;
  if (best == NULL) return -1;
  const char *eol = strchr(best, '\n');
  char k[64];
  snprintf(k, sizeof k, "%s=", key);
  const char *v = strstr(best, k);
  if (v == NULL || (eol != NULL && v > eol)) return -1;
  v += strlen(k);
  size_t n = strcspn(v, " \n\"");
  if (n >= cap) return -1;
  memcpy(out, v, n);
  out[n] = '\0';
  return 0;
}

/* Sends raw bytes to 127.0.0.1:port and reads until the peer closes or
 * `want_responses` complete responses arrived (counted by "HTTP/1.1 "), or
 * 5 s pass. want_responses < 0: half-close after sending (the server sees
 * the end of the request stream) and read until it closes. Returns a
 * malloc'd reply ("" on connect failure). */
static inline char *du_http_raw(int port, const char *req, size_t len, int want_responses) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t cap = 1 << 16, n = 0;
  char *buf = calloc(1, cap);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return buf;
  }
  size_t off = 0;
  while (off < len) {
    ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (want_responses < 0) shutdown(fd, SHUT_WR);
  for (;;) {
    if (n + 4096 > cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
    ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
    if (r <= 0) break;
    n += (size_t)r;
    buf[n] = '\0';
    if (want_responses > 0) {
      /* complete when the count of headers matches and each body is in */
      int seen = 0;
      const char *p = buf;
      const char *last_body_end = NULL;
      while ((p = strstr(p, "HTTP/1.1 ")) != NULL) {
        const char *cl = strstr(p, "Content-Length: ");
        const char *he = strstr(p, "\r\n\r\n");
        if (cl == NULL || he == NULL) break;
        long blen = strtol(cl + 16, NULL, 10);
        if ((size_t)(he + 4 + blen - buf) > n) break;
        seen++;
        last_body_end = he + 4 + blen;
        p = last_body_end;
      }
      if (seen >= want_responses) break;
    }
  }
  buf[n] = '\0';
  close(fd);
  return buf;
}

static inline char *du_get(int port, const char *path) {
  char req[512];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
  return du_http_raw(port, req, (size_t)n, 0);
}

/* The port that component ("http" or "gateway") of a daemon logged it
 * listens on, found in the daemon's log text; -1 if the line is absent. */
static inline int du_listen_port(const char *log, const char *component) {
  char pat[64];
  snprintf(pat, sizeof pat, "%s msg=\"listening\" addr=127.0.0.1:", component);
  const char *l = strstr(log, pat);
  return l != NULL ? atoi(l + strlen(pat)) : -1;
}

/* Replaces the file at path with text; 0 or -1. */
static inline int du_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  int rc = fputs(text, f) < 0 ? -1 : 0;
  return fclose(f) != 0 ? -1 : rc;
}

/* The value of the Prometheus metric name on the daemon's HTTP port,
 * UINT64_MAX if it is absent. */
static inline uint64_t du_metric(int port, const char *name) {
  char *m = du_get(port, "/metrics");
  char pat[128];
  snprintf(pat, sizeof pat, "\n%s ", name);
  const char *p = strstr(m, pat);
  uint64_t v = p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
  free(m);
  return v;
}

static inline int du_status(const char *resp) {
  if (strncmp(resp, "HTTP/1.1 ", 9) != 0) return -1;
  return atoi(resp + 9);
}

/* Sends sig and waits up to timeout_s; returns the exit status, -1 on
 * timeout (the child is then killed), -2 if it died of a signal. */
static inline void du_forget(pid_t pid) {
  for (int i = 0; i < 16; i++)
    if (g_children[i] == pid) g_children[i] = 0;
}

static inline int du_stop(pid_t pid, int sig, double timeout_s) {
  du_forget(pid);
  if (sig) kill(pid, sig);
  double end = du_now() + timeout_s;
  for (;;) {
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
    if (du_now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    du_sleep_ms(10);
  }
}

/* Teardown: kills and reaps every child still running. */
static inline int du_kill_all(void **state) {
  (void)state;
  for (int i = 0; i < 16; i++) {
    if (g_children[i] > 0) {
      kill(g_children[i], SIGKILL);
      waitpid(g_children[i], NULL, 0);
      g_children[i] = 0;
    }
  }
  return 0;
}

/* A port that was free a moment ago on 127.0.0.1. */
static inline int du_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (struct sockaddr *)&a, sizeof a);
  socklen_t l = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &l);
  close(fd);
  return ntohs(a.sin_port);
}

/* Runs a shell command, returns its exit status (-1 if it did not exit). */
static inline int du_system(const char *cmd) {
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Small engine sizes so that a daemon starts in a fraction of a second. */
#define DU_SMALL_OPTS                                                                  \
  "-o", "pipeline.inbound_capacity=4096", "-o", "pipeline.outbound_capacity=16384",   \
      "-o", "pipeline.staging_capacity=16384", "-o", "journal.segment_size=1M", "-o", \
      "journal.batch_bytes=256K", "-o", "limits.max_book_orders=65536", "-o",         \
      "limits.max_instruments=8", "-o", "limits.max_accounts=64"

#endif /* HOURGLASS_TESTS_DAEMON_UTIL_H */
