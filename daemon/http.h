/*
 * http.h - a small HTTP/1.1 server for the daemon's operational and public
 * endpoints, on its own libuv loop thread. Internal to the daemon.
 *
 * What it accepts: GET only (anything else: 405), a request line and headers
 * of at most max_request bytes (431 beyond; the connection closes), no
 * request body (Content-Length other than 0 or Transfer-Encoding: 400),
 * targets of printable ASCII starting with '/'. Keep-alive follows
 * HTTP/1.1 rules (HTTP/1.0: only when asked) unless switched off; requests
 * on one connection are answered in order, one at a time; an idle
 * connection closes after idle_ms. Malformed input gets a 400 and a close,
 * never a crash. Connections beyond max_connections are closed at accept.
 *
 * Threads: hg_http_start/stop on the owner thread; the handler runs on the
 * server's loop thread; hg_http_set_keepalive and hg_http_stats from any
 * thread.
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
 * ("" if none). Runs on the loop thread; must not block for long. */
typedef void (*hg_http_handler_fn)(void *ctx, const char *path, const char *query,
                                   hg_http_response_t *resp);

typedef struct hg_http_config {
  const char *host;          /* IPv4 or IPv6 literal */
  uint16_t port;             /* 0: ephemeral (see hg_http_port) */
  uint32_t max_connections;
  uint32_t max_request;      /* bytes of request line + headers */
  int keepalive;
  uint32_t idle_ms;
  hg_http_handler_fn handler;
  void *ctx;
} hg_http_config_t;

typedef struct hg_http_stats {
  uint64_t accepted, refused, requests, bad_requests;
  uint32_t open;
} hg_http_stats_t;

typedef struct hg_http hg_http_t;

/* Binds, listens and starts the loop thread. 0 and *out, HG_EINVAL (bad
 * host or config), -errno from bind/listen (-EADDRINUSE ...), -ENOMEM. */
int hg_http_start(const hg_http_config_t *cfg, hg_http_t **out);

/* The bound port. Any thread. */
uint16_t hg_http_port(const hg_http_t *h);

/* Changes keep-alive and idle timeout for requests from now on. Any thread. */
void hg_http_set_keepalive(hg_http_t *h, int on, uint32_t idle_ms);

void hg_http_stats(const hg_http_t *h, hg_http_stats_t *out);

/* Closes every connection, stops and joins the thread, frees h. NULL: no-op. */
void hg_http_stop(hg_http_t *h);

/* ---- The request parser the server runs on each request head (exposed
 * for the fuzz target, tests/daemon/fuzz_http.c; pure, any thread). ---- */

/* Length of the first complete request head in buf[0..len): through the
 * blank line that ends it ("\n\n" or "\n\r\n"), 0 if there is none yet. */
size_t hg_http_head_len(const char *buf, size_t len);

/* One parsed request head. */
typedef struct hg_http_request {
  int status;        /* 0: a GET to answer; 400 or 405: refuse with msg */
  const char *msg;   /* static text of the refusal; NULL when status is 0 */
  int keep;          /* status 0: the connection stays open after the answer */
  char target[1024]; /* status 0: the path, NUL-terminated (printable ASCII, '/' first) */
  const char *query; /* status 0: what followed '?' (into target), "" if none */
} hg_http_request_t;

/* Parses the head req[0..hlen) (as hg_http_head_len measured it; the server
 * refuses a head holding a NUL before calling this). keepalive is the
 * server's setting. Never reads outside req[0..hlen); fills *out. */
void hg_http_parse_request(const char *req, size_t hlen, int keepalive, hg_http_request_t *out);

#endif /* HOURGLASS_HTTP_H */
