/*
 * http.c - the daemon's HTTP server (see http.h) on libmicrohttpd.
 *
 * libmicrohttpd runs without threads of its own (MHD_USE_EPOLL, external
 * polling): one thread here waits in epoll on libmicrohttpd's epoll fd and
 * an eventfd that hg_http_wake() and hg_http_stop() write, then calls
 * MHD_run(). So the thread sleeps while idle, and the event stream's
 * encoding, its ring and its watcher list are touched by this thread only.
 *
 * Per request, the URI log callback keeps the raw target (the handler gets
 * path and query as sent) and counts the request; the completion callback
 * frees it. The event ring is bytes with a 64-bit write position; an event
 * is copied in once, framed by its topic and length (8 bytes the watchers
 * never send), and each watcher's content-reader callback copies from its
 * own position, skipping the frames of other topics. A watcher with
 * nothing to read suspends its connection; a new event resumes every
 * suspended watcher.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/error.h"
#include "hourglass/grow.h"
#include "hourglass/thread.h"

/* ------------------------------------------------------------ text buffer */

static int sb_reserve(hg_sbuf_t *b, size_t more) {
  if (b->oom) return -1;
  char *p = NULL;
  if (more < SIZE_MAX - b->len - 1) p = hg_grow(b->p, &b->cap, 1, b->len + more + 1, 1024);
  if (p == NULL) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
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

/* ------------------------------------------------------------ query */

int hg_http_query_get(const char *query, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  for (const char *q = query; q && *q;) {
    if (strncmp(q, name, nl) == 0 && q[nl] == '=') {
      size_t len = strcspn(q + nl + 1, "&");
      if (len == 0 || len >= cap) return -1;
      memcpy(out, q + nl + 1, len);
      out[len] = '\0';
      return 0;
    }
    q = strchr(q, '&');
    if (q) q++;
  }
  return -1;
}

/* ----------------------------------------------------------------- server */

/* Shortest gap between two encodes: wakes closer together are one event. */
#define ENCODE_GAP_NS 5000000ull
/* Kernel send buffer of each connection (the kernel doubles it). */
#define SNDBUF (32 * 1024)
/* A comment line on the stream after this long without events, so that a
 * watcher that went away is noticed. */
#define HEARTBEAT_NS 15000000000ull

typedef struct watcher {
  struct watcher *prev, *next;
  struct MHD_Connection *conn;
  hg_http_t *srv;
  uint64_t cursor;  /* ring position of the next byte to read */
  uint32_t left;    /* bytes of the current frame's event not yet sent */
  uint32_t topic;   /* from the snapshot; frames of topic 0 or this one */
  size_t hello_off; /* bytes of the greeting and snapshot sent */
  hg_sbuf_t snap;   /* the snapshot, freed once sent */
  int suspended;
} watcher_t;

/* A frame in the encode buffer and in the ring: topic, then the length of
 * the event text that follows. */
typedef struct frame {
  uint32_t topic, len;
} frame_t;

/* One request: the raw target as sent (from the URI log callback). */
typedef struct req {
  char *uri;
  int seen;     /* the handler saw the head */
  int stream;   /* answered with the event stream */
} req_t;

struct hg_http {
  hg_http_config_t cfg; /* host and TLS text not kept */
  char *cert, *key;     /* copies; libmicrohttpd reads them until stop */
  struct MHD_Daemon *mhd;
  pthread_t thread;
  int efd, epfd;
  uint16_t port;
  _Atomic int stop;
  _Atomic int keepalive;
  _Atomic uint32_t idle_ms;
  _Atomic uint64_t accepted, requests, bad, events, dropped;
  _Atomic uint32_t open, watchers;
  /* Server thread only: */
  char *ring;
  uint64_t head;  /* bytes ever written to the ring */
  watcher_t *wl;  /* every watcher */
  uint64_t last_encode_ns, last_event_ns;
  int pending;    /* a wake not yet encoded */
};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned idle_s(hg_http_t *srv) {
  /* relaxed: a setting; the next request picks up a change. */
  uint32_t ms = atomic_load_explicit(&srv->idle_ms, memory_order_relaxed);
  return (ms + 999) / 1000;
}

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)conn;
  hg_http_t *srv = cls;
  /* relaxed: a statistic. */
  atomic_fetch_add_explicit(&srv->requests, 1, memory_order_relaxed);
  req_t *r = calloc(1, sizeof *r);
  if (r != NULL) r->uri = strdup(uri);
  return r;
}

static void completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                      enum MHD_RequestTerminationCode toe) {
  (void)conn;
  hg_http_t *srv = cls;
  req_t *r = *req_cls;
  /* relaxed (both): statistics. A request refused by libmicrohttpd itself
   * (bad version, bad head) ends without reaching the handler; a stream
   * whose socket took nothing for the idle timeout is a dropped watcher. */
  if (r == NULL || !r->seen)
    atomic_fetch_add_explicit(&srv->bad, 1, memory_order_relaxed);
  else if (r->stream && toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED)
    atomic_fetch_add_explicit(&srv->dropped, 1, memory_order_relaxed);
  if (r != NULL) {
    free(r->uri);
    free(r);
  }
  *req_cls = NULL;
}

static void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                        enum MHD_ConnectionNotificationCode code) {
  (void)socket_ctx;
  hg_http_t *srv = cls;
  /* relaxed (all): statistics. */
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    /* A fixed kernel send buffer: a client that stops reading holds at
     * most this much there (no autotuning to megabytes), so it stalls and
     * is dropped instead. */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int sz = SNDBUF;
    if (ci != NULL) setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    atomic_fetch_add_explicit(&srv->accepted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&srv->open, 1, memory_order_relaxed);
  } else {
    atomic_fetch_sub_explicit(&srv->open, 1, memory_order_relaxed);
  }
}

static enum MHD_Result queue(hg_http_t *srv, struct MHD_Connection *conn, int status,
                             const char *ctype, struct MHD_Response *resp) {
  if (resp == NULL) return MHD_NO; /* libmicrohttpd closes the connection */
  MHD_add_response_header(resp, "Content-Type", ctype);
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  if (status == 405) MHD_add_response_header(resp, "Allow", "GET");
  /* relaxed: a setting. */
  if (!atomic_load_explicit(&srv->keepalive, memory_order_relaxed) || status == 400 ||
      status == 405)
    MHD_add_response_header(resp, "Connection", "close");
  enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result refuse(hg_http_t *srv, struct MHD_Connection *conn, int status,
                              const char *msg) {
  /* relaxed: a statistic. */
  atomic_fetch_add_explicit(&srv->bad, 1, memory_order_relaxed);
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_PERSISTENT);
  return queue(srv, conn, status, "text/plain; charset=utf-8", r);
}

/* ---- the event stream */

void hg_http_stream_event(hg_sbuf_t *out, uint32_t topic, const char *text, size_t len) {
  if (len > UINT32_MAX) return;
  frame_t f = {topic, (uint32_t)len};
  hg_sbuf_put(out, &f, sizeof f);
  hg_sbuf_put(out, text, len);
}

static const char HELLO[] = "retry: 1000\n\n";

static void resume_all(hg_http_t *srv) {
  for (watcher_t *w = srv->wl; w; w = w->next) {
    if (w->suspended) {
      w->suspended = 0;
      MHD_resume_connection(w->conn);
    }
  }
}

/* Copies bytes into the ring at its head. */
static void ring_put(hg_http_t *srv, const void *src, size_t n) {
  size_t cap = srv->cfg.stream_buffer;
  const char *p = src;
  size_t at = (size_t)(srv->head % cap), first = cap - at < n ? cap - at : n;
  memcpy(srv->ring + at, p, first);
  memcpy(srv->ring, p + first, n - first);
  srv->head += n;
}

/* Copies n bytes out of the ring from position pos. */
static void ring_get(const hg_http_t *srv, uint64_t pos, void *dst, size_t n) {
  size_t cap = srv->cfg.stream_buffer;
  char *d = dst;
  size_t at = (size_t)(pos % cap), first = cap - at < n ? cap - at : n;
  memcpy(d, srv->ring + at, first);
  memcpy(d + first, srv->ring, n - first);
}

/* One event for topic into the ring: its frame, the id line (none when id
 * is 0), the text. */
static void ring_append(hg_http_t *srv, uint32_t topic, uint64_t id, const char *p, size_t n) {
  char idl[32];
  int il = id ? snprintf(idl, sizeof idl, "id: %" PRIu64 "\n", id) : 0;
  if (sizeof(frame_t) + (size_t)il + n > srv->cfg.stream_buffer) return; /* never torn */
  frame_t f = {topic, (uint32_t)((size_t)il + n)};
  ring_put(srv, &f, sizeof f);
  ring_put(srv, idl, (size_t)il);
  ring_put(srv, p, n);
}

static void encode(hg_http_t *srv, uint64_t now) {
  hg_sbuf_t b = {0};
  /* relaxed: a counter only this thread writes. */
  uint64_t id = atomic_load_explicit(&srv->events, memory_order_relaxed) + 1;
  srv->cfg.encode(srv->cfg.ctx, &b);
  if (!b.oom && b.len > 0) {
    for (size_t at = 0; at + sizeof(frame_t) <= b.len;) {
      frame_t f;
      memcpy(&f, b.p + at, sizeof f);
      at += sizeof f;
      if (f.len > b.len - at) break;
      ring_append(srv, f.topic, id, b.p + at, f.len);
      at += f.len;
    }
    atomic_store_explicit(&srv->events, id, memory_order_relaxed);
    srv->last_event_ns = now;
    resume_all(srv);
  }
  hg_sbuf_free(&b);
  srv->last_encode_ns = now;
  srv->pending = 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  watcher_t *w = cls;
  hg_http_t *srv = w->srv;
  if (atomic_load(&srv->stop)) return MHD_CONTENT_READER_END_OF_STREAM;
  if (w->hello_off < sizeof HELLO - 1 + w->snap.len) {
    size_t off = w->hello_off, n;
    if (off < sizeof HELLO - 1) {
      n = sizeof HELLO - 1 - off;
      if (n > max) n = max;
      memcpy(buf, HELLO + off, n);
    } else {
      off -= sizeof HELLO - 1;
      n = w->snap.len - off;
      if (n > max) n = max;
      memcpy(buf, w->snap.p + off, n);
    }
    w->hello_off += n;
    if (w->hello_off == sizeof HELLO - 1 + w->snap.len)
      hg_sbuf_free(&w->snap); /* sent: its memory goes back (len 0 now) */
    return (ssize_t)n;
  }
  size_t cap = srv->cfg.stream_buffer;
  for (;;) {
    uint64_t behind = srv->head - w->cursor;
    if (behind > cap) {
      /* relaxed: a statistic. */
      atomic_fetch_add_explicit(&srv->dropped, 1, memory_order_relaxed);
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (behind == 0) {
      w->suspended = 1;
      MHD_suspend_connection(w->conn);
      return 0;
    }
    if (w->left > 0) {
      size_t n = w->left < max ? w->left : max;
      ring_get(srv, w->cursor, buf, n);
      w->cursor += n;
      w->left -= (uint32_t)n;
      return (ssize_t)n;
    }
    frame_t f;
    ring_get(srv, w->cursor, &f, sizeof f);
    w->cursor += sizeof f;
    if (f.topic == 0 || f.topic == w->topic)
      w->left = f.len;
    else
      w->cursor += f.len; /* another topic's */
  }
}

static void stream_free(void *cls) {
  watcher_t *w = cls;
  hg_http_t *srv = w->srv;
  if (w->prev)
    w->prev->next = w->next;
  else
    srv->wl = w->next;
  if (w->next) w->next->prev = w->prev;
  /* relaxed: a statistic. */
  atomic_fetch_sub_explicit(&srv->watchers, 1, memory_order_relaxed);
  hg_sbuf_free(&w->snap);
  free(w);
}

static enum MHD_Result stream_start(hg_http_t *srv, struct MHD_Connection *conn,
                                    const char *query) {
  watcher_t *w = calloc(1, sizeof *w);
  if (w == NULL) return MHD_NO;
  w->conn = conn;
  w->srv = srv;
  /* What changed is in the ring first, so that the snapshot and the events
   * after it agree. */
  encode(srv, mono_ns());
  if (srv->cfg.snapshot != NULL) {
    int st = srv->cfg.snapshot(srv->cfg.ctx, query, &w->snap, &w->topic);
    if (w->snap.oom) st = 500;
    if (st != 0) {
      struct MHD_Response *r = MHD_create_response_from_buffer(
          w->snap.len, w->snap.p ? w->snap.p : (void *)"", MHD_RESPMEM_MUST_COPY);
      hg_sbuf_free(&w->snap);
      free(w);
      /* relaxed: a statistic. */
      atomic_fetch_add_explicit(&srv->bad, 1, memory_order_relaxed);
      return queue(srv, conn, st, "application/json", r);
    }
  }
  w->cursor = srv->head; /* events from now on */
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read,
                                                             w, stream_free);
  if (r == NULL) {
    free(w);
    return MHD_NO;
  }
  w->next = srv->wl;
  if (srv->wl) srv->wl->prev = w;
  srv->wl = w;
  /* relaxed: a statistic. */
  atomic_fetch_add_explicit(&srv->watchers, 1, memory_order_relaxed);
  MHD_add_response_header(r, "Content-Type", "text/event-stream");
  MHD_add_response_header(r, "Cache-Control", "no-store");
  MHD_add_response_header(r, "X-Accel-Buffering", "no");
  /* A stream is never followed by another request: answered as HTTP/1.0,
   * the body runs until the connection closes, without chunked framing. */
  MHD_add_response_header(r, "Connection", "close");
  MHD_set_response_options(r, MHD_RF_HTTP_1_0_SERVER, MHD_RO_END);
  enum MHD_Result rc = MHD_queue_response(conn, 200, r);
  MHD_destroy_response(r); /* the connection holds it; stream_free runs with it */
  return rc;
}

/* ---- requests */

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_size, void **req_cls) {
  (void)url, (void)version, (void)upload_data, (void)upload_size;
  hg_http_t *srv = cls;
  req_t *rq = *req_cls;
  if (rq == NULL || rq->uri == NULL) return MHD_NO;
  if (!rq->seen) {
    /* The head: refusals now (the connection then closes); an answer only
     * on the next call, once libmicrohttpd has the whole request, or it
     * would not keep the connection alive. */
    rq->seen = 1;
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, idle_s(srv));
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (te != NULL || (cl != NULL && strcmp(cl, "0") != 0))
      return refuse(srv, conn, 400, "request bodies are not accepted\n");
    if (strcmp(method, "GET") != 0) return refuse(srv, conn, 405, "only GET is served\n");
    return MHD_YES;
  }
  const char *uri = rq->uri;
  if (uri[0] != '/') return refuse(srv, conn, 400, "bad target\n");
  char path[1024];
  const char *q = strchr(uri, '?');
  size_t pl = q ? (size_t)(q - uri) : strlen(uri);
  if (pl >= sizeof path) return refuse(srv, conn, 400, "bad target\n");
  memcpy(path, uri, pl);
  path[pl] = '\0';
  if (srv->cfg.stream_path != NULL && strcmp(path, srv->cfg.stream_path) == 0) {
    rq->stream = 1;
    return stream_start(srv, conn, q ? q + 1 : "");
  }
  hg_http_response_t resp = {200, "text/plain; charset=utf-8", {0}};
  srv->cfg.handler(srv->cfg.ctx, path, q ? q + 1 : "", &resp);
  if (resp.body.oom) {
    hg_sbuf_free(&resp.body);
    return refuse(srv, conn, 500, "out of memory\n");
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(
      resp.body.len, resp.body.p ? resp.body.p : (void *)"",
      resp.body.p ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
  if (r == NULL) hg_sbuf_free(&resp.body);
  return queue(srv, conn, resp.status, resp.content_type, r);
}

/* ---- the thread */

static void *thread_main(void *arg) {
  hg_http_t *srv = arg;
  struct epoll_event ev[4];
  while (!atomic_load(&srv->stop)) {
    uint64_t now = mono_ns();
    long wait_ms = 1000;
    MHD_UNSIGNED_LONG_LONG to;
    if (MHD_get_timeout(srv->mhd, &to) == MHD_YES && to < (MHD_UNSIGNED_LONG_LONG)wait_ms)
      wait_ms = (long)to;
    if (srv->pending) {
      uint64_t due = srv->last_encode_ns + ENCODE_GAP_NS;
      long ms = due > now ? (long)((due - now + 999999) / 1000000) : 0;
      if (ms < wait_ms) wait_ms = ms;
    }
    int n = epoll_wait(srv->epfd, ev, 4, (int)wait_ms);
    for (int i = 0; i < n; i++) {
      if (ev[i].data.fd == srv->efd) {
        uint64_t x;
        if (read(srv->efd, &x, sizeof x) == sizeof x) srv->pending = 1;
      }
    }
    now = mono_ns();
    if (srv->cfg.stream_path != NULL) {
      if (srv->pending && srv->wl == NULL) srv->pending = 0; /* nobody to tell */
    if (srv->pending && now >= srv->last_encode_ns + ENCODE_GAP_NS) encode(srv, now);
      if (srv->wl != NULL && now - srv->last_event_ns >= HEARTBEAT_NS) {
        ring_append(srv, 0, 0, ":\n\n", 3);
        srv->last_event_ns = now;
        resume_all(srv);
      }
    }
    MHD_run(srv->mhd);
  }
  /* End every stream: resumed watchers see stop and finish. */
  resume_all(srv);
  MHD_run(srv->mhd);
  return NULL;
}

static void release(hg_http_t *srv) {
  if (srv->mhd) MHD_stop_daemon(srv->mhd);
  if (srv->efd >= 0) close(srv->efd);
  if (srv->epfd >= 0) close(srv->epfd);
  free(srv->ring);
  free(srv->cert);
  free(srv->key);
  free(srv);
}

/* The whole file at path, NUL-terminated, into *out. 0 or -errno. */
static int read_pem(const char *path, char **out) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -errno;
  hg_sbuf_t b = {0};
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < (1u << 20))
    hg_sbuf_put(&b, chunk, n);
  int bad = ferror(f) || b.len == 0 || b.oom;
  fclose(f);
  if (bad) {
    hg_sbuf_free(&b);
    return HG_EINVAL;
  }
  *out = b.p;
  return 0;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls, (void)fmt, (void)ap; /* refusals are counted, not logged */
}

int hg_http_start(const hg_http_config_t *cfg, hg_http_t **out) {
  if (cfg->handler == NULL || cfg->max_request < 256 || cfg->max_connections == 0 ||
      cfg->host == NULL || (cfg->tls_cert == NULL) != (cfg->tls_key == NULL) ||
      (cfg->stream_path != NULL && (cfg->encode == NULL || cfg->stream_buffer < 4096)))
    return HG_EINVAL;
  if (cfg->tls_cert != NULL && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    return -ENOTSUP;
  struct sockaddr_storage addr;
  memset(&addr, 0, sizeof addr);
  int v6 = strchr(cfg->host, ':') != NULL;
  if (v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&addr;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(cfg->port);
    if (inet_pton(AF_INET6, cfg->host, &a->sin6_addr) != 1) return HG_EINVAL;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&addr;
    a->sin_family = AF_INET;
    a->sin_port = htons(cfg->port);
    if (inet_pton(AF_INET, cfg->host, &a->sin_addr) != 1) return HG_EINVAL;
  }
  hg_http_t *srv = calloc(1, sizeof *srv);
  if (srv == NULL) return -ENOMEM;
  srv->cfg = *cfg;
  srv->cfg.host = srv->cfg.tls_cert = srv->cfg.tls_key = NULL;
  srv->efd = srv->epfd = -1;
  atomic_init(&srv->keepalive, cfg->keepalive);
  atomic_init(&srv->idle_ms, cfg->idle_ms ? cfg->idle_ms : 10000);
  int rc = -ENOMEM;
  if (cfg->stream_path != NULL && (srv->ring = malloc(cfg->stream_buffer)) == NULL) goto fail;
  if (cfg->tls_cert != NULL && ((rc = read_pem(cfg->tls_cert, &srv->cert)) != 0 ||
                                (rc = read_pem(cfg->tls_key, &srv->key)) != 0))
    goto fail;
  rc = -ENOMEM;
  srv->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  srv->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (srv->efd < 0 || srv->epfd < 0) {
    rc = -errno;
    goto fail;
  }
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                   (v6 ? MHD_USE_IPv6 : 0) | (srv->cert ? MHD_USE_TLS : 0);
  /* The connection's memory pool holds the request head (max_request)
   * and libmicrohttpd's own output: response headers, a stream's block. */
  size_t pool = (size_t)cfg->max_request + 8192;
  struct MHD_OptionItem tls[] = {
      {srv->cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, srv->cert},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, srv->key},
      {MHD_OPTION_END, 0, NULL},
  };
  srv->mhd = MHD_start_daemon(
      flags, 0, NULL, NULL, access_cb, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_per_ip,
      MHD_OPTION_CONNECTION_TIMEOUT, idle_s(srv), MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
      MHD_OPTION_URI_LOG_CALLBACK, uri_log, srv, MHD_OPTION_NOTIFY_COMPLETED, completed, srv,
      MHD_OPTION_NOTIFY_CONNECTION, conn_notify, srv,
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 128u, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
  if (srv->mhd == NULL) {
    /* libmicrohttpd does not say why; a port in use is the likely cause
     * when the address and certificate are sound. */
    rc = srv->cert ? HG_EINVAL : -EADDRINUSE;
    goto fail;
  }
  const union MHD_DaemonInfo *pi = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
  const union MHD_DaemonInfo *ei = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_EPOLL_FD);
  if (pi == NULL || ei == NULL) {
    rc = HG_EINVAL;
    goto fail;
  }
  srv->port = pi->port;
  struct epoll_event e = {.events = EPOLLIN, .data.fd = ei->epoll_fd};
  struct epoll_event w = {.events = EPOLLIN, .data.fd = srv->efd};
  if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, ei->epoll_fd, &e) != 0 ||
      epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->efd, &w) != 0) {
    rc = -errno;
    goto fail;
  }
  srv->last_event_ns = mono_ns();
  rc = hg_thread_start("hg-http", 0, thread_main, srv, &srv->thread);
  if (rc == 0) {
    *out = srv;
    return 0;
  }
fail:
  release(srv);
  return rc;
}

uint16_t hg_http_port(const hg_http_t *h) { return h->port; }

void hg_http_set_keepalive(hg_http_t *h, int on, uint32_t idle_ms) {
  atomic_store(&h->keepalive, on);
  atomic_store(&h->idle_ms, idle_ms);
}

void hg_http_wake(hg_http_t *h) {
  if (h == NULL) return;
  uint64_t one = 1;
  /* EAGAIN only when the counter is saturated: a wake is pending anyway. */
  if (write(h->efd, &one, sizeof one) < 0) return;
}

void hg_http_stats(const hg_http_t *h, hg_http_stats_t *out) {
  /* relaxed (all): statistics. */
  out->accepted = atomic_load_explicit(&h->accepted, memory_order_relaxed);
  out->requests = atomic_load_explicit(&h->requests, memory_order_relaxed);
  out->bad_requests = atomic_load_explicit(&h->bad, memory_order_relaxed);
  out->open = atomic_load_explicit(&h->open, memory_order_relaxed);
  out->watchers = atomic_load_explicit(&h->watchers, memory_order_relaxed);
  out->events = atomic_load_explicit(&h->events, memory_order_relaxed);
  out->dropped = atomic_load_explicit(&h->dropped, memory_order_relaxed);
}

void hg_http_stop(hg_http_t *h) {
  if (h == NULL) return;
  atomic_store(&h->stop, 1);
  hg_http_wake(h);
  pthread_join(h->thread, NULL);
  release(h);
}
