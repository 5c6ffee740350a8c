/*
 * http.c - the daemon's HTTP/1.1 server (see http.h).
 *
 * One libuv loop on its own thread. Each connection owns a fixed request
 * buffer of max_request bytes (allocated at accept, freed in the close
 * callback, as libuv requires) and an idle timer. Reading stops while a
 * response is being written, so requests on a connection are handled
 * strictly one after the other and pipelined bytes simply wait in the
 * buffer. Parsing looks only at what the server needs (method, target,
 * version, Connection, Content-Length, Transfer-Encoding); everything else
 * in the headers is skipped. Stop is a uv_async that closes every handle;
 * the loop then runs out of handles and the thread returns.
 */
#include "http.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "hourglass/error.h"

/* ------------------------------------------------------------ text buffer */

static int sb_reserve(hg_sbuf_t *b, size_t more) {
  if (b->oom) return -1;
  if (b->len + more + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 1024;
  while (cap < b->len + more + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (p == NULL) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void hg_sbuf_printf(hg_sbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || sb_reserve(b, (size_t)n) != 0) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void hg_sbuf_puts(hg_sbuf_t *b, const char *s) {
  size_t n = strlen(s);
  if (sb_reserve(b, n) != 0) return;
  memcpy(b->p + b->len, s, n + 1);
  b->len += n;
}

void hg_sbuf_put(hg_sbuf_t *b, const void *data, size_t n) {
  if (sb_reserve(b, n) != 0) return;
  memcpy(b->p + b->len, data, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void hg_sbuf_json_str(hg_sbuf_t *b, const char *s) {
  hg_sbuf_puts(b, "\"");
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\')
      hg_sbuf_printf(b, "\\%c", *c);
    else if (*c < 0x20)
      hg_sbuf_printf(b, "\\u%04x", *c);
    else
      hg_sbuf_printf(b, "%c", *c);
  }
  hg_sbuf_puts(b, "\"");
}

void hg_sbuf_free(hg_sbuf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* ----------------------------------------------------------------- server */

struct hg_http {
  hg_http_config_t cfg; /* host not kept */
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop_async;
  pthread_t thread;
  uint16_t port;
  _Atomic int keepalive;
  _Atomic uint32_t idle_ms;
  _Atomic uint64_t accepted, refused, requests, bad;
  _Atomic uint32_t open;
};

typedef struct conn {
  uv_tcp_t tcp; /* first: the handle's address is the conn's */
  uv_timer_t timer;
  uv_write_t wr;
  hg_http_t *srv;
  char *buf;  /* request bytes, max_request */
  char *out;  /* response being written; freed in write_cb */
  size_t len;
  int writing;
  int close_after;
  int closing;
  int handles_open;
} conn_t;

static void conn_free_cb(uv_handle_t *h) {
  conn_t *c = h->data;
  if (--c->handles_open == 0) {
    /* relaxed: a statistic. */
    atomic_fetch_sub_explicit(&c->srv->open, 1, memory_order_relaxed);
    free(c->buf);
    free(c);
  }
}

static void conn_close(conn_t *c) {
  if (c->closing) return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->tcp, conn_free_cb);
  uv_close((uv_handle_t *)&c->timer, conn_free_cb);
}

static void idle_cb(uv_timer_t *t) { conn_close(t->data); }

static void touch(conn_t *c) {
  /* relaxed: a setting; the next request picks up a change. */
  uv_timer_start(&c->timer, idle_cb, atomic_load_explicit(&c->srv->idle_ms, memory_order_relaxed),
                 0);
}

static const char *reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

static void process(conn_t *c);

static void write_cb(uv_write_t *w, int status) {
  conn_t *c = w->data;
  free(c->out); /* libuv needed the bytes until now */
  c->out = NULL;
  c->writing = 0;
  if (status < 0 || c->close_after || c->closing) {
    conn_close(c);
    return;
  }
  process(c); /* a pipelined request may already be buffered */
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf);

/* Sends a complete response; the connection then closes if close_after. */
static void respond(conn_t *c, int status, const char *ctype, const char *body, size_t blen,
                    int close_after, const char *extra) {
  char head[512];
  int hl = snprintf(head, sizeof head,
                    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                    "Cache-Control: no-store\r\nConnection: %s\r\n%s\r\n",
                    status, reason(status), ctype, blen, close_after ? "close" : "keep-alive",
                    extra ? extra : "");
  char *out = malloc((size_t)hl + blen);
  if (out == NULL) {
    conn_close(c);
    return;
  }
  memcpy(out, head, (size_t)hl);
  if (blen) memcpy(out + hl, body, blen);
  c->out = out;
  c->close_after = close_after;
  c->writing = 1;
  uv_read_stop((uv_stream_t *)&c->tcp);
  uv_buf_t b = uv_buf_init(out, (unsigned)((size_t)hl + blen));
  c->wr.data = c;
  int rc = uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, write_cb);
  if (rc < 0) { /* the callback will not run */
    free(out);
    c->out = NULL;
    c->writing = 0;
    conn_close(c);
  }
}

static int bad(conn_t *c, int status, const char *msg) {
  /* relaxed: a statistic. */
  atomic_fetch_add_explicit(&c->srv->bad, 1, memory_order_relaxed);
  respond(c, status, "text/plain; charset=utf-8", msg, strlen(msg), 1,
          status == 405 ? "Allow: GET\r\n" : NULL);
  return 0;
}

/* Case-insensitive search for a header; returns its value (trimmed, not
 * NUL-terminated; *vlen set) or NULL. hdrs spans [hdrs, end). */
static const char *header(const char *hdrs, const char *end, const char *name, size_t *vlen) {
  size_t nl = strlen(name);
  for (const char *l = hdrs; l < end;) {
    const char *e = memchr(l, '\n', (size_t)(end - l));
    if (e == NULL) e = end;
    if ((size_t)(e - l) > nl && strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
      const char *v = l + nl + 1, *ve = e;
      while (v < ve && (*v == ' ' || *v == '\t')) v++;
      while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t')) ve--;
      *vlen = (size_t)(ve - v);
      return v;
    }
    l = e + 1;
  }
  return NULL;
}

static int token_in(const char *v, size_t n, const char *tok) {
  size_t tl = strlen(tok);
  for (size_t i = 0; i + tl <= n; i++)
    if (strncasecmp(v + i, tok, tl) == 0) return 1;
  return 0;
}

void hg_http_parse_request(const char *req, size_t hlen, int keepalive, hg_http_request_t *out) {
  out->status = 400;
  out->msg = "bad request line\n";
  out->keep = 0;
  out->target[0] = '\0';
  out->query = out->target;
  const char *end = req + hlen;
  const char *le = memchr(req, '\n', hlen);
  if (le == NULL) return;
  const char *hdrs = le + 1;
  if (le > req && le[-1] == '\r') le--;
  /* request line: METHOD SP TARGET SP HTTP/1.x */
  const char *sp1 = memchr(req, ' ', (size_t)(le - req));
  if (sp1 == NULL) return;
  const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1));
  if (sp2 == NULL || sp2 == sp1 + 1) return;
  size_t vl = (size_t)(le - sp2 - 1);
  const char *ver = sp2 + 1;
  out->msg = "unsupported HTTP version\n";
  if (vl != 8 || strncmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1')) return;
  int http11 = ver[7] == '1';
  size_t tl = (size_t)(sp2 - sp1 - 1);
  out->msg = "bad target\n";
  if (tl >= sizeof out->target || sp1[1] != '/') return;
  for (size_t i = 0; i < tl; i++) {
    unsigned char ch = (unsigned char)sp1[1 + i];
    if (ch <= 0x20 || ch >= 0x7f) return;
  }
  size_t n;
  out->msg = "request bodies are not accepted\n";
  const char *v = header(hdrs, end, "Transfer-Encoding", &n);
  if (v != NULL) return;
  v = header(hdrs, end, "Content-Length", &n);
  if (v != NULL && !(n == 1 && v[0] == '0')) return;
  if ((size_t)(sp1 - req) != 3 || strncmp(req, "GET", 3) != 0) {
    out->status = 405;
    out->msg = "only GET is served\n";
    return;
  }
  int keep = keepalive;
  v = header(hdrs, end, "Connection", &n);
  if (http11)
    keep = keep && !(v != NULL && token_in(v, n, "close"));
  else
    keep = keep && v != NULL && token_in(v, n, "keep-alive");
  memcpy(out->target, sp1 + 1, tl);
  out->target[tl] = '\0';
  char *q = strchr(out->target, '?');
  out->query = "";
  if (q != NULL) {
    *q = '\0';
    out->query = q + 1;
  }
  out->status = 0;
  out->msg = NULL;
  out->keep = keep;
}

/* Handles one complete request in c->buf[0..hlen) (hlen includes the blank
 * line). Always starts a response (or closes); returns 0. */
static int handle(conn_t *c, size_t hlen) {
  hg_http_t *srv = c->srv;
  /* relaxed: a statistic. */
  atomic_fetch_add_explicit(&srv->requests, 1, memory_order_relaxed);
  /* relaxed: a setting. */
  int keep = atomic_load_explicit(&srv->keepalive, memory_order_relaxed);
  hg_http_request_t r;
  hg_http_parse_request(c->buf, hlen, keep, &r);
  if (r.status != 0) return bad(c, r.status, r.msg);
  hg_http_response_t resp = {200, "text/plain; charset=utf-8", {0}};
  srv->cfg.handler(srv->cfg.ctx, r.target, r.query, &resp);
  if (resp.body.oom) {
    hg_sbuf_free(&resp.body);
    return bad(c, 500, "out of memory\n");
  }
  respond(c, resp.status, resp.content_type, resp.body.p ? resp.body.p : "", resp.body.len,
          !r.keep, NULL);
  hg_sbuf_free(&resp.body);
  return 0;
}

size_t hg_http_head_len(const char *buf, size_t len) {
  for (size_t i = 0; i + 1 < len; i++) {
    if (buf[i] == '\n' &&
        (buf[i + 1] == '\n' || (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')))
      return i + (buf[i + 1] == '\n' ? 2 : 3);
  }
  return 0;
}

/* Finds a complete request in the buffer and answers it. */
static void process(conn_t *c) {
  if (c->closing || c->writing) return;
  size_t hlen = hg_http_head_len(c->buf, c->len);
  if (hlen == 0) {
    if (c->len >= c->srv->cfg.max_request) {
      bad(c, 431, "request too large\n");
      return;
    }
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) < 0) conn_close(c);
    return;
  }
  for (size_t i = 0; i < hlen; i++) {
    if (c->buf[i] == '\0') {
      bad(c, 400, "NUL in request\n");
      return;
    }
  }
  handle(c, hlen);
  /* The request's bytes are no longer needed (the response is a copy). */
  memmove(c->buf, c->buf + hlen, c->len - hlen);
  c->len -= hlen;
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)hint;
  conn_t *c = h->data;
  size_t room = c->srv->cfg.max_request - c->len;
  *buf = uv_buf_init(c->buf + c->len, (unsigned)room);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  conn_t *c = s->data;
  if (n < 0) {
    conn_close(c);
    return;
  }
  if (n == 0) return;
  c->len += (size_t)n;
  touch(c);
  uv_read_stop(s);
  process(c);
}

static void accept_cb(uv_stream_t *server, int status) {
  hg_http_t *srv = server->data;
  if (status < 0) return;
  conn_t *c = calloc(1, sizeof *c);
  char *buf = malloc(srv->cfg.max_request);
  if (c == NULL || buf == NULL) {
    /* Leave it in the backlog; the next accept event retries. */
    free(c);
    free(buf);
    return;
  }
  c->srv = srv;
  c->buf = buf;
  uv_tcp_init(&srv->loop, &c->tcp);
  uv_timer_init(&srv->loop, &c->timer);
  c->tcp.data = c->timer.data = c;
  c->handles_open = 2;
  /* relaxed: a statistic. */
  atomic_fetch_add_explicit(&srv->open, 1, memory_order_relaxed);
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  /* relaxed (both): statistics. */
  if (atomic_load_explicit(&srv->open, memory_order_relaxed) > srv->cfg.max_connections) {
    atomic_fetch_add_explicit(&srv->refused, 1, memory_order_relaxed);
    conn_close(c);
    return;
  }
  atomic_fetch_add_explicit(&srv->accepted, 1, memory_order_relaxed);
  uv_tcp_nodelay(&c->tcp, 1);
  touch(c);
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) < 0) conn_close(c);
}

static void close_walk(uv_handle_t *h, void *arg) {
  if (uv_is_closing(h)) return;
  if (h->data == arg || h->data == NULL)
    uv_close(h, NULL); /* the listener or the stop signal: owned by the server */
  else
    conn_close(h->data);
}

static void stop_cb(uv_async_t *a) {
  hg_http_t *srv = a->data;
  uv_walk(&srv->loop, close_walk, srv);
}

static void *thread_main(void *arg) {
  hg_http_t *srv = arg;
  uv_run(&srv->loop, UV_RUN_DEFAULT);
  return NULL;
}

int hg_http_start(const hg_http_config_t *cfg, hg_http_t **out) {
  if (cfg->handler == NULL || cfg->max_request < 64 || cfg->max_connections == 0 ||
      cfg->host == NULL)
    return HG_EINVAL;
  struct sockaddr_storage addr;
  if (strchr(cfg->host, ':') != NULL) {
    if (uv_ip6_addr(cfg->host, cfg->port, (struct sockaddr_in6 *)&addr) != 0) return HG_EINVAL;
  } else if (uv_ip4_addr(cfg->host, cfg->port, (struct sockaddr_in *)&addr) != 0) {
    return HG_EINVAL;
  }
  hg_http_t *srv = calloc(1, sizeof *srv);
  if (srv == NULL) return -ENOMEM;
  srv->cfg = *cfg;
  srv->cfg.host = NULL;
  atomic_init(&srv->keepalive, cfg->keepalive);
  atomic_init(&srv->idle_ms, cfg->idle_ms ? cfg->idle_ms : 10000);
  int rc = uv_loop_init(&srv->loop);
  if (rc < 0) {
    free(srv);
    return rc;
  }
  uv_tcp_init(&srv->loop, &srv->listener);
  srv->listener.data = srv;
  rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&srv->listener, 128, accept_cb);
  srv->stop_async.data = srv;
  if (rc == 0) rc = uv_async_init(&srv->loop, &srv->stop_async, stop_cb);
  if (rc == 0) {
    srv->stop_async.data = srv;
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &blen);
    srv->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                  : ((struct sockaddr_in *)&bound)->sin_port);
    rc = -pthread_create(&srv->thread, NULL, thread_main, srv);
    if (rc == 0) {
      *out = srv;
      return 0;
    }
  }
  /* Close what was opened, let the loop run the close callbacks. */
  uv_walk(&srv->loop, close_walk, srv);
  uv_run(&srv->loop, UV_RUN_DEFAULT);
  uv_loop_close(&srv->loop);
  free(srv);
  return rc;
}

uint16_t hg_http_port(const hg_http_t *h) { return h->port; }

void hg_http_set_keepalive(hg_http_t *h, int on, uint32_t idle_ms) {
  atomic_store(&h->keepalive, on);
  atomic_store(&h->idle_ms, idle_ms);
}

void hg_http_stats(const hg_http_t *h, hg_http_stats_t *out) {
  /* relaxed (all): statistics. */
  out->accepted = atomic_load_explicit(&h->accepted, memory_order_relaxed);
  out->refused = atomic_load_explicit(&h->refused, memory_order_relaxed);
  out->requests = atomic_load_explicit(&h->requests, memory_order_relaxed);
  out->bad_requests = atomic_load_explicit(&h->bad, memory_order_relaxed);
  out->open = atomic_load_explicit(&h->open, memory_order_relaxed);
}

void hg_http_stop(hg_http_t *h) {
  if (h == NULL) return;
  uv_async_send(&h->stop_async);
  pthread_join(h->thread, NULL);
  uv_loop_close(&h->loop);
  free(h);
}
