/*
 * bench_http - what the market event stream (/api/v1/stream) costs a
 * watcher: a real hourglassd running its demo market (12 contracts, makers
 * requoting, takers trading), W watchers on raw sockets reading the stream
 * for S seconds once the demo trades. Bytes are counted after each
 * watcher's first event (the snapshot a watcher gets at connect is counted
 * apart).
 *
 *   bench_http [--quick] [--daemon PATH] [--seconds S] [--watchers W]
 *
 * RESULT http.stream_bytes_per_watcher_s: stream bytes a watcher receives
 *   per second, the mean over the watchers.
 * RESULT http.stream_events_per_s: events per second on the stream.
 * RESULT http.stream_snapshot_bytes: the first event a watcher receives
 *   (the full state).
 * RESULT http.stream_full_list_bytes_per_watcher_s: the baseline, measured
 *   in the same run: what the encoding before the deltas sent, the whole
 *   instrument list (/api/v1/instruments, its size read during the run) in
 *   every event plus the book and 20 newest trades of each contract the
 *   event changed (the contracts in each delta the first watcher got; the
 *   mean size of /api/v1/book and of 20 trades of /api/v1/trades). A lower
 *   bound: a change to a book alone is not in a delta.
 * RESULT http.stream_reduction_ratio: the baseline over the first figure.
 *
 * The daemon is --daemon, else $HG_HOURGLASSD, else bin/hourglassd of the
 * build tree this program is in. S defaults to 20 (5 with --quick), W to 4.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon_util.h"

#define MAXW 64

static void die(const char *msg) {
  fprintf(stderr, "bench_http: %s\n", msg);
  du_kill_all(NULL);
  exit(1);
}

static int connect_stream(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("cannot connect");
  const char req[] = "GET /api/v1/stream?book=1 HTTP/1.1\r\nHost: x\r\n\r\n";
  if (send(fd, req, sizeof req - 1, 0) != (ssize_t)(sizeof req - 1)) die("cannot send");
  return fd;
}

/* One watcher: bytes of its first event (the snapshot), bytes after it. */
typedef struct watcher {
  int fd;
  size_t first, after;
  int in_data, seen_first;
  char tail[7]; /* the last bytes read, to find "\ndata: " and "\n\n" across reads */
} watcher_t;

/* The first watcher's text after its snapshot. */
static char *g_text;
static size_t g_len, g_cap;

static void keep(const char *p, size_t n) {
  if (g_len + n + 1 > g_cap) {
    g_cap = (g_len + n + 1) * 2;
    g_text = realloc(g_text, g_cap);
    if (g_text == NULL) die("out of memory");
  }
  memcpy(g_text + g_len, p, n);
  g_len += n;
  g_text[g_len] = '\0';
}

static void consume(watcher_t *w, const char *p, size_t n, int first_watcher) {
  if (w->seen_first) {
    w->after += n;
    if (first_watcher) keep(p, n);
    return;
  }
  /* The response head and the retry line come first; the snapshot's data
   * line ends with "\n\n". */
  for (size_t i = 0; i < n; i++) {
    memmove(w->tail, w->tail + 1, sizeof w->tail - 1);
    w->tail[sizeof w->tail - 1] = p[i];
    if (memcmp(w->tail, "\ndata: ", 7) == 0) w->in_data = 1;
    if (w->in_data) w->first++;
    if (w->in_data && w->tail[5] == '\n' && w->tail[6] == '\n') {
      w->seen_first = 1;
      w->after += n - i - 1;
      if (first_watcher) keep(p + i + 1, n - i - 1);
      return;
    }
  }
}

int main(int argc, char **argv) {
  double seconds = 20;
  int nw = 4;
  const char *given = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) seconds = 5;
    else if (strcmp(a, "--daemon") == 0 && v != NULL) given = argv[++i];
    else if (strcmp(a, "--seconds") == 0 && v != NULL) seconds = atof(argv[++i]);
    else if (strcmp(a, "--watchers") == 0 && v != NULL) nw = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_http [--quick] [--daemon PATH] [--seconds S] [--watchers W]\n");
      return 2;
    }
  }
  if (nw < 1 || nw > MAXW || seconds <= 0) die("--watchers 1..64, --seconds > 0");
  signal(SIGPIPE, SIG_IGN);
  char dir[256], data[300], log[300];
  if (du_tmpdir(dir, sizeof dir, "bench_http") == NULL) die("no temp dir");
  snprintf(data, sizeof data, "data_dir=%s/var", dir);
  snprintf(log, sizeof log, "%s/daemon.log", dir);
  const char *bin = du_daemon_path(given);
  if (bin == NULL) die("cannot find hourglassd: use --daemon PATH");
  char *av[] = {(char *)bin, "--demo", "-o", data, "-o", "listen.http=127.0.0.1:0",
                "-o", "listen.order_entry=127.0.0.1:0", NULL};
  pid_t pid = du_spawn(av, log);
  char *l = du_wait_log(log, "msg=\"ready\"", 120);
  if (l == NULL) die("daemon not ready after 120 s");
  int port = du_listen_port(l, "http");
  free(l);
  if (port <= 0) die("no http port in the log");
  /* Until the demo has quoted every contract and traded. */
  char *ins = NULL;
  for (int i = 0; i < 600; i++) {
    free(ins);
    ins = du_get(port, "/api/v1/instruments");
    if (ins != NULL && strstr(ins, "\"bid\":[") != NULL && strstr(ins, "\"trades\":0,") == NULL)
      break;
    du_sleep_ms(100);
  }
  free(ins);

  static watcher_t w[MAXW];
  struct pollfd pf[MAXW];
  for (int i = 0; i < nw; i++) {
    w[i].fd = connect_stream(port);
    pf[i] = (struct pollfd){.fd = w[i].fd, .events = POLLIN};
  }
  uint64_t ev0 = du_metric(port, "hourglass_http_stream_events_total");
  double t0 = du_now(), end = t0 + seconds, next_list = t0;
  size_t list_bytes = 0, list_n = 0;
  static char buf[1 << 16];
  while (du_now() < end) {
    if (du_now() >= next_list) { /* the list's size, a few times a second */
      char *b = du_get(port, "/api/v1/instruments");
      const char *body = b ? strstr(b, "\r\n\r\n") : NULL;
      if (body != NULL) {
        list_bytes += strlen(body + 4);
        list_n++;
      }
      free(b);
      next_list = du_now() + 0.25;
    }
    if (poll(pf, (nfds_t)nw, 50) <= 0) continue;
    for (int i = 0; i < nw; i++) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = recv(w[i].fd, buf, sizeof buf, 0);
      if (n <= 0) die("a watcher's stream ended");
      consume(&w[i], buf, (size_t)n, i == 0);
    }
  }
  double dt = du_now() - t0;
  uint64_t ev1 = du_metric(port, "hourglass_http_stream_events_total");
  double after = 0, first = 0;
  for (int i = 0; i < nw; i++) {
    after += (double)w[i].after;
    first += (double)w[i].first;
    close(w[i].fd);
  }
  after /= nw;
  first /= nw;
  double rate = after / dt, evs = (double)(ev1 - ev0) / dt;
  double list = list_n ? (double)list_bytes / (double)list_n : 0;
  /* Contracts changed per delta, and the mean size of a book with its 20
   * newest trades as the old events carried them. */
  size_t changed = 0;
  for (const char *d = g_text; d != NULL && (d = strstr(d, "event: delta\ndata: ")) != NULL;) {
    const char *nl = strchr(d, '\n'), *eol = nl != NULL ? strchr(nl + 1, '\n') : NULL;
    for (const char *id = d; (id = strstr(id, "{\"id\":")) != NULL && (eol == NULL || id < eol);
         id++)
      changed++;
    d = eol;
  }
  double book = 0;
  int nbooks = 0;
  char *li = du_get(port, "/api/v1/instruments");
  for (const char *p = li ? strstr(li, "{\"id\":") : NULL; p != NULL;
       p = strstr(p + 1, "{\"id\":")) {
    char q[96];
    snprintf(q, sizeof q, "/api/v1/book?instrument=%ld", atol(p + 6));
    char *b = du_get(port, q);
    snprintf(q, sizeof q, "/api/v1/trades?instrument=%ld", atol(p + 6));
    char *t = du_get(port, q);
    const char *bb = b ? strstr(b, "\r\n\r\n") : NULL, *tb = t ? strstr(t, "\r\n\r\n") : NULL;
    if (bb != NULL && tb != NULL) {
      int nt = 0;
      for (const char *x = tb; (x = strstr(x, "{\"seq\":")) != NULL; x++) nt++;
      double tbytes = (double)strlen(tb + 4);
      book += (double)strlen(bb + 4) + (nt > 20 ? tbytes * 20 / nt : tbytes);
      nbooks++;
    }
    free(b);
    free(t);
  }
  free(li);
  if (nbooks) book /= nbooks;
  double baseline = evs * list + (double)changed / dt * book;
  if (du_stop(pid, SIGTERM, 60) != 0) die("daemon did not stop");
  du_rm_rf(dir);
  printf("%d watchers, %.1f s, %.1f events/s, instrument list %.0f bytes, %.1f contracts changed "
         "per event, a book with 20 trades %.0f bytes\n",
         nw, dt, evs, list, evs > 0 ? (double)changed / dt / evs : 0, book);
  printf("RESULT http.stream_bytes_per_watcher_s %.0f B/s\n", rate);
  printf("RESULT http.stream_events_per_s %.1f events/s\n", evs);
  printf("RESULT http.stream_snapshot_bytes %.0f B\n", first);
  printf("RESULT http.stream_full_list_bytes_per_watcher_s %.0f B/s\n", baseline);
  printf("RESULT http.stream_reduction_ratio %.1f x\n", rate > 0 ? baseline / rate : 0);
  return 0;
}
