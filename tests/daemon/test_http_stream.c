/*
 * The HTTP server's event stream (daemon/http.c) under many watchers: 1,000
 * raw-socket clients of one stream, half of which never read (a small
 * receive buffer each). The server encodes each update once into its ring:
 * every reader receives every event, in order, none missing; the
 * non-readers are dropped (the idle timeout, or falling more than the ring
 * behind) and counted; the process's memory grows by far less than what
 * per-watcher buffering of the sent events would take. Each watcher gets
 * its own snapshot first and then only the events of its topic and of
 * topic 0; a refused snapshot is the stream's answer. And HTTPS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http.h"

enum { WATCHERS = 1000, READERS = 500, EVENTS = 200, PAD = 1000 };

static _Atomic uint64_t g_tick; /* the update the next encode sends */
static uint64_t g_sent;         /* HTTP thread: the last one sent */

static void encode(void *ctx, hg_sbuf_t *out) {
  (void)ctx;
  uint64_t t = atomic_load(&g_tick);
  if (t == g_sent) return;
  g_sent = t;
  char pad[PAD + 1];
  memset(pad, 'x', PAD);
  pad[PAD] = '\0';
  char text[PAD + 64];
  int n = snprintf(text, sizeof text, "event: tick\ndata: %llu %s\n\n", (unsigned long long)t, pad);
  hg_http_stream_event(out, 0, text, (size_t)n);
}

static void handler(void *ctx, const char *path, const char *query, hg_http_response_t *r) {
  (void)ctx, (void)path, (void)query;
  r->status = 404;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

static int connect_watcher(uint16_t port, int small_rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  if (small_rcvbuf) {
    int sz = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char req[] = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(send(fd, req, sizeof req - 1, 0), (ssize_t)(sizeof req - 1));
  return fd;
}

/* One reader's parse state: the text of the event being read. */
typedef struct reader {
  int fd;
  char buf[4 * PAD];
  size_t len;
  int head_done;
  uint64_t first, last; /* ticks seen */
  int bad;
} reader_t;

static reader_t g_r[READERS];
static _Atomic int g_reading;

/* Consumes complete events from r->buf: each must be the next tick. */
static void parse(reader_t *r) {
  if (!r->head_done) {
    char *e = memmem(r->buf, r->len, "\r\n\r\nretry: 1000\n\n", 17);
    if (e == NULL) return;
    size_t used = (size_t)(e + 17 - r->buf);
    memmove(r->buf, r->buf + used, r->len - used);
    r->len -= used;
    r->head_done = 1;
  }
  for (;;) {
    char *end = memmem(r->buf, r->len, "\n\n", 2);
    if (end == NULL) return;
    unsigned long long id, t;
    if (r->buf[0] == ':') { /* a heartbeat comment */
      size_t used = (size_t)(end + 2 - r->buf);
      memmove(r->buf, r->buf + used, r->len - used);
      r->len -= used;
      continue;
    }
    if (sscanf(r->buf, "id: %llu\nevent: tick\ndata: %llu ", &id, &t) != 2 || id != t ||
        (r->last != 0 && t != r->last + 1))
      r->bad = 1;
    if (r->first == 0) r->first = t;
    r->last = t;
    size_t used = (size_t)(end + 2 - r->buf);
    memmove(r->buf, r->buf + used, r->len - used);
    r->len -= used;
  }
}

static void *reader_main(void *arg) {
  (void)arg;
  static struct pollfd pf[READERS];
  for (int i = 0; i < READERS; i++) pf[i] = (struct pollfd){.fd = g_r[i].fd, .events = POLLIN};
  while (atomic_load(&g_reading)) {
    if (poll(pf, READERS, 100) <= 0) continue;
    for (int i = 0; i < READERS; i++) {
      if (!(pf[i].revents & POLLIN)) continue;
      reader_t *r = &g_r[i];
      ssize_t n = recv(r->fd, r->buf + r->len, sizeof r->buf - r->len, 0);
      if (n <= 0) {
        r->bad = 1;
        pf[i].fd = -1;
        continue;
      }
      r->len += (size_t)n;
      parse(r);
      if (r->len == sizeof r->buf) r->bad = 1; /* an event larger than expected */
    }
  }
  return NULL;
}

static void thousand_watchers(void **state) {
  (void)state;
  struct rlimit rl = {4096, 4096};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_max < 2 * WATCHERS + 64) skip(); /* not enough descriptors here */
    rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
  }
  hg_http_config_t cfg = {.host = "127.0.0.1", .max_connections = WATCHERS + 16,
                          .max_per_ip = WATCHERS + 16, .max_request = 8192, .keepalive = 1,
                          .idle_ms = 1000, .handler = handler, .stream_path = "/stream",
                          .stream_buffer = 64 * 1024, .encode = encode};
  hg_http_t *h;
  assert_int_equal(hg_http_start(&cfg, &h), 0);
  uint16_t port = hg_http_port(h);
  static int quiet[WATCHERS - READERS];
  for (int i = 0; i < WATCHERS; i++) {
    if (i % 2 == 0)
      g_r[i / 2].fd = connect_watcher(port, 0);
    else
      quiet[i / 2] = connect_watcher(port, 1);
  }
  hg_http_stats_t st;
  double end = now_s() + 30;
  do {
    hg_http_stats(h, &st);
  } while (st.watchers < WATCHERS && now_s() < end && usleep(10000) == 0);
  assert_int_equal(st.watchers, WATCHERS);
  atomic_store(&g_reading, 1);
  pthread_t rt;
  assert_int_equal(pthread_create(&rt, NULL, reader_main, NULL), 0);
  long rss0 = rss_kb();

  /* The updates, one event each. */
  for (uint64_t t = 1; t <= EVENTS; t++) {
    atomic_store(&g_tick, t);
    hg_http_wake(h);
    end = now_s() + 10;
    do {
      hg_http_stats(h, &st);
    } while (st.events < t && now_s() < end && usleep(500) == 0);
    assert_int_equal(st.events, t);
  }
  long rss1 = rss_kb();
  /* Every reader got every event from its first to the last. */
  end = now_s() + 30;
  for (int i = 0; i < READERS; i++)
    while (g_r[i].last != EVENTS && !g_r[i].bad && now_s() < end) usleep(10000);
  /* The non-readers are dropped, the readers are not. */
  end = now_s() + 30;
  do {
    hg_http_stats(h, &st);
  } while (st.dropped < WATCHERS - READERS && now_s() < end && usleep(20000) == 0);
  atomic_store(&g_reading, 0);
  pthread_join(rt, NULL);
  for (int i = 0; i < READERS; i++) {
    if (g_r[i].bad || g_r[i].first != 1 || g_r[i].last != EVENTS)
      fail_msg("reader %d (dropped %llu, watchers %u): events %llu..%llu%s", i,
               (unsigned long long)st.dropped, st.watchers, (unsigned long long)g_r[i].first,
               (unsigned long long)g_r[i].last, g_r[i].bad ? ", out of order or cut" : "");
  }
  assert_int_equal(st.dropped, WATCHERS - READERS);
  assert_int_equal(st.watchers, READERS);
  /* Sent: EVENTS x ~1 KB to each of 1,000 watchers, ~200 MB in all; held:
   * the ring and the fixed connection pools. */
  print_message("rss %ld kB before the events, %ld kB after\n", rss0, rss1);
  assert_true(rss1 - rss0 < 32 * 1024);
  hg_http_stop(h); /* ends the readers' streams */
  for (int i = 0; i < READERS; i++) close(g_r[i].fd);
  for (int i = 0; i < WATCHERS - READERS; i++) close(quiet[i]);
}

static char *read_until(int fd, const char *want);

/* GET path over a fresh connection (Connection: close); the answer's head
 * and the start of its body. */
static char *get_raw(uint16_t port, const char *path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                   path);
  assert_int_equal(send(fd, req, (size_t)n, 0), n);
  char *got = strdup(read_until(fd, "\r\n\r\n{"));
  close(fd);
  return got;
}

/* Runs cmd through the shell; its first output line into out. */
static int run_line(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  if (p == NULL) return -1;
  out[0] = '\0';
  if (fgets(out, (int)cap, p) == NULL) out[0] = '\0';
  return pclose(p);
}

/* HTTPS with a certificate and key from PEM files (a self-signed pair made
 * by openssl, fetched with curl; skipped without them); plain HTTP to that
 * port gets no answer; a missing file stops the start. */
static void https_with_certificate(void **state) {
  (void)state;
  if (access("/usr/bin/openssl", X_OK) != 0 || access("/usr/bin/curl", X_OK) != 0) skip();
  char dir[] = "/tmp/hg_https_XXXXXX", cmd[1024], line[64], cert[64], key[64];
  assert_non_null(mkdtemp(dir));
  snprintf(cert, sizeof cert, "%s/c.pem", dir);
  snprintf(key, sizeof key, "%s/k.pem", dir);
  snprintf(cmd, sizeof cmd,
           "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 1 "
           "-subj /CN=127.0.0.1 >/dev/null 2>&1",
           key, cert);
  assert_int_equal(system(cmd), 0);
  hg_http_config_t cfg = {.host = "127.0.0.1", .max_connections = 8, .max_request = 8192,
                          .keepalive = 1, .idle_ms = 1000, .tls_cert = cert, .tls_key = key,
                          .handler = handler};
  hg_http_t *h;
  assert_int_equal(hg_http_start(&cfg, &h), 0);
  snprintf(cmd, sizeof cmd,
           "curl -sk --max-time 10 -o /dev/null -w '%%{http_code}' https://127.0.0.1:%u/x",
           hg_http_port(h));
  assert_int_equal(run_line(cmd, line, sizeof line), 0);
  assert_string_equal(line, "404"); /* the handler's answer, over TLS */
  snprintf(cmd, sizeof cmd,
           "curl -s --max-time 10 -o /dev/null -w '%%{http_code}' http://127.0.0.1:%u/x",
           hg_http_port(h));
  run_line(cmd, line, sizeof line);
  assert_string_equal(line, "000"); /* no HTTP answer on the TLS port */
  hg_http_stop(h);
  cfg.tls_key = "/nonexistent/k.pem";
  assert_int_equal(hg_http_start(&cfg, &h), -ENOENT);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* ---- topics and snapshots */

static _Atomic int g_round; /* the encode sends round g_round's events once */
static int g_sent_round;

static void topic_encode(void *ctx, hg_sbuf_t *out) {
  (void)ctx;
  int r = atomic_load(&g_round);
  if (r == g_sent_round) return;
  g_sent_round = r;
  char t[64];
  for (uint32_t topic = 0; topic <= 2; topic++) {
    int n = snprintf(t, sizeof t, "event: e\ndata: round %d topic %u\n\n", r, topic);
    hg_http_stream_event(out, topic, t, (size_t)n);
  }
}

/* ?t=N: topic N (1 or 2) with a snapshot naming it; anything else 404. */
static int topic_snapshot(void *ctx, const char *query, hg_sbuf_t *out, uint32_t *topic) {
  (void)ctx;
  if (strcmp(query, "t=1") != 0 && strcmp(query, "t=2") != 0) {
    hg_sbuf_puts(out, "{\"error\":\"no such topic\"}\n");
    return 404;
  }
  *topic = (uint32_t)(query[2] - '0');
  hg_sbuf_printf(out, "event: snapshot\ndata: topic %u\n\n", *topic);
  return 0;
}

/* Reads fd until text holds want (or 10 s pass); the text read. */
static char *read_until(int fd, const char *want) {
  static char buf[8192];
  size_t len = 0;
  double end = now_s() + 10;
  buf[0] = '\0';
  while (strstr(buf, want) == NULL && now_s() < end && len < sizeof buf - 1) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
    if (n <= 0) break;
    len += (size_t)n;
    buf[len] = '\0';
  }
  return buf;
}

/* Each watcher gets its snapshot first, then the events of its topic and of
 * topic 0, never another topic's; a snapshot refusal is the answer. */
static void topics_and_snapshots(void **state) {
  (void)state;
  hg_http_config_t cfg = {.host = "127.0.0.1", .max_connections = 16, .max_request = 8192,
                          .keepalive = 1, .idle_ms = 5000, .handler = handler,
                          .stream_path = "/stream", .stream_buffer = 64 * 1024,
                          .encode = topic_encode, .snapshot = topic_snapshot};
  hg_http_t *h;
  assert_int_equal(hg_http_start(&cfg, &h), 0);
  uint16_t port = hg_http_port(h);
  int fd[2];
  for (int i = 0; i < 2; i++) {
    fd[i] = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd[i], (struct sockaddr *)&a, sizeof a), 0);
    char req[64];
    int n = snprintf(req, sizeof req, "GET /stream?t=%d HTTP/1.1\r\nHost: x\r\n\r\n", i + 1);
    assert_int_equal(send(fd[i], req, (size_t)n, 0), n);
    char want[32];
    snprintf(want, sizeof want, "data: topic %d\n\n", i + 1);
    assert_non_null(strstr(read_until(fd[i], want), "retry: 1000\n\nevent: snapshot\n"));
  }
  for (int r = 1; r <= 3; r++) {
    atomic_store(&g_round, r);
    hg_http_wake(h);
    for (int i = 0; i < 2; i++) {
      char want[64], other[64];
      snprintf(want, sizeof want, "data: round %d topic %d\n\n", r, i + 1);
      snprintf(other, sizeof other, "topic %d", 2 - i);
      char *got = read_until(fd[i], want);
      if (strstr(got, want) == NULL || strstr(got, other) != NULL)
        fail_msg("watcher of topic %d, round %d: %s", i + 1, r, got);
      char all[32];
      snprintf(all, sizeof all, "data: round %d topic 0\n\n", r);
      assert_non_null(strstr(got, all));
      assert_true(strstr(got, all) < strstr(got, want)); /* in the encode's order */
    }
  }
  char *bad = get_raw(port, "/stream?t=9");
  assert_non_null(strstr(bad, "404"));
  assert_non_null(strstr(bad, "no such topic"));
  free(bad);
  hg_http_stop(h);
  close(fd[0]);
  close(fd[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(topics_and_snapshots),
                                     cmocka_unit_test(thousand_watchers),
                                     cmocka_unit_test(https_with_certificate)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
