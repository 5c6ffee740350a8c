/*
 * http.h - the daemon's HTTP server for its operational and public
 * endpoints: libmicrohttpd (HTTP/1.1, and HTTPS through GnuTLS) run from
 * one thread of its own. Internal to the daemon.
 *
 * What it answers: GET only (anything else: 405 with Allow: GET), no
 * request body (Content-Length other than 0, or Transfer-Encoding: 400).
 * libmicrohttpd parses requests and refuses malformed ones itself (400 or
 * a close, 414/431 for a head that does not fit its per-connection memory
 * of max_request + 8 KiB, 505 for an HTTP version other than 1.0/1.1). Keep-alive follows HTTP/1.1 rules unless switched off; an
 * idle connection closes after idle_ms (rounded up to whole seconds).
 * Connections beyond max_connections, or beyond max_per_ip from one
 * address, are closed at accept.
 *
 * Server-Sent Events: a GET of stream_path answers text/event-stream and
 * stays open. At the start of each stream the HTTP thread calls encode
 * (so that what was sent is current), then snapshot with the query: its
 * text goes to that watcher alone, first, and its topic picks which
 * events the watcher receives. After hg_http_wake() the HTTP thread calls
 * encode once; the events it appends (hg_http_stream_event, each with a
 * topic: 0 for every watcher, else only for the watchers of that topic)
 * get "id: N" first and are copied once into a ring of stream_buffer bytes
 * that every watcher reads with its own cursor, skipping other topics. A
 * watcher whose unread bytes have been overwritten (it fell more than
 * stream_buffer behind) is dropped; so is one whose socket accepts nothing
 * for idle_ms. A watcher that has read everything is suspended (no
 * polling, no timeout) until the next event; a comment line (":") goes
 * out after 15 s without events. Memory is the ring plus libmicrohttpd's
 * fixed per-connection pool, a fixed 32 KiB kernel send buffer per
 * connection and each watcher's snapshot until it is sent: it does not
 * grow with a slow watcher.
 *
 * Threads: hg_http_start/stop on the owner thread; the handler and encode
 * run on the server's thread; hg_http_wake, hg_http_set_keepalive and
 * hg_http_stats from any thread.
 */
#ifndef HOURGLASS_HTTP_H
#define HOURGLASS_HTTP_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* A growable text buffer for response bodies. An allocation failure sets
 * oom and later appends do nothing (the server then answers 500). */
typedef struct hg_sbuf {
  char *p;
  size_t len, cap;
  int oom;
} hg_sbuf_t;

void hg_sbuf_printf(hg_sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hg_sbuf_puts(hg_sbuf_t *b, const char *s);
/* Appends n bytes (which may hold NULs); the buffer stays NUL-terminated. */
void hg_sbuf_put(hg_sbuf_t *b, const void *data, size_t n);
/* Appends s as a JSON string literal (with quotes). */
void hg_sbuf_json_str(hg_sbuf_t *b, const char *s);
void hg_sbuf_free(hg_sbuf_t *b);

typedef struct hg_http_response {
  int status;               /* 200 by default */
  const char *content_type; /* static string; default "text/plain; charset=utf-8" */
  hg_sbuf_t body;
} hg_http_response_t;

/* Fills resp for one GET. path starts with '/', query is what followed '?'
 * ("" if none), both as the client sent them (not percent-decoded). Runs
 * on the server's thread; must not block for long. */
typedef void (*hg_http_handler_fn)(void *ctx, const char *path, const char *query,
                                   hg_http_response_t *resp);

/* Appends the events that changed since the last call to out with
 * hg_http_stream_event, or nothing. Server's thread. */
typedef void (*hg_http_encode_fn)(void *ctx, hg_sbuf_t *out);

/* A new watcher's first event(s) ("event: ...\ndata: ...\n\n") into out,
 * from query (as sent, "" if none): the state the events encode has
 * appended so far bring up to date. Sets *topic (0: none). 0, or an HTTP
 * status (400, 404) to refuse the stream with out as the message.
 * Server's thread. */
typedef int (*hg_http_snapshot_fn)(void *ctx, const char *query, hg_sbuf_t *out,
                                   uint32_t *topic);

/* Appends one event's text ("event: ...\ndata: ...\n\n", without the id
 * line) to an encode's out, for the watchers of topic (0: all). */
void hg_http_stream_event(hg_sbuf_t *out, uint32_t topic, const char *text, size_t len);

typedef struct hg_http_config {
  const char *host;          /* IPv4 or IPv6 literal */
  uint16_t port;             /* 0: ephemeral (see hg_http_port) */
  uint32_t max_connections;
  uint32_t max_per_ip;       /* connections from one address; 0: no limit */
  uint32_t max_request;      /* bytes of request line + headers (>= 256), see above */
  int keepalive;
  uint32_t idle_ms;
  const char *tls_cert;      /* PEM files of certificate chain and key, */
  const char *tls_key;       /* read at start; both NULL for plain HTTP */
  hg_http_handler_fn handler;
  void *ctx;
  const char *stream_path;   /* NULL: no event stream */
  uint32_t stream_buffer;    /* ring bytes (>= 4096) */
  hg_http_encode_fn encode;  /* required with stream_path */
  hg_http_snapshot_fn snapshot; /* NULL: no snapshot, topic 0 */
} hg_http_config_t;

typedef struct hg_http_stats {
  uint64_t accepted, requests, bad_requests;
  uint32_t open;
  uint32_t watchers;        /* open event streams */
  uint64_t events;          /* events encoded */
  uint64_t dropped;         /* watchers dropped for falling behind or stalling */
} hg_http_stats_t;

typedef struct hg_http hg_http_t;

/* Binds, listens and starts the server's thread. 0 and *out, HG_EINVAL
 * (bad host, config, or TLS certificate/key), -ENOTSUP (TLS asked
 * but libmicrohttpd has none), -errno (a PEM file unreadable, -EADDRINUSE
 * ...), -ENOMEM. */
int hg_http_start(const hg_http_config_t *cfg, hg_http_t **out);

/* The bound port. Any thread. */
uint16_t hg_http_port(const hg_http_t *h);

/* Changes keep-alive and idle timeout for requests from now on. Any thread. */
void hg_http_set_keepalive(hg_http_t *h, int on, uint32_t idle_ms);

/* Asks the server's thread to call encode and wake the watchers. Never
 * blocks; calls close together are coalesced. Any thread; NULL: no-op. */
void hg_http_wake(hg_http_t *h);

void hg_http_stats(const hg_http_t *h, hg_http_stats_t *out);

/* Ends every event stream, closes every connection, stops and joins the
 * thread, frees h. NULL: no-op. */
void hg_http_stop(hg_http_t *h);

/* ---- Query strings (pure, any thread; exposed for the fuzz target,
 * tests/daemon/fuzz_http.c). ---- */

/* The value of parameter name in query ("a=1&b=2", as the client sent it,
 * not decoded), up to the next '&', copied into out[cap] NUL-terminated.
 * The first occurrence counts. 0, or -1 when absent, empty or too long. */
int hg_http_query_get(const char *query, const char *name, char *out, size_t cap);

#endif /* HOURGLASS_HTTP_H */
