/*
 * transport_tls.c - libraft's transport over TLS 1.3 (see transport_tls.h).
 *
 * A connection (conn_t) moves through
 *   CONNECTING (outbound TCP connect) -> HANDSHAKE -> PREAMBLE (inbound:
 *   waiting for the peer's id) or ACK (outbound: waiting for the answer)
 *   -> PIPED -> DRAINING -> CLOSING
 * and owns three libuv handles: the TCP socket, a timer (handshake and
 * drain deadline) and, once PIPED, its end of the socketpair whose other
 * end libraft owns. OpenSSL runs over two memory BIOs: ciphertext read from
 * TCP goes into rbio, SSL_read's plaintext is written to the pipe; what
 * libraft writes into the pipe goes through SSL_write, and wbio's
 * ciphertext is written to TCP. Each uv_write carries its own copy, freed
 * in its callback.
 *
 * Backpressure: when more than RTLS_HIGH_WATER bytes wait to be written on
 * one side, reading the other side stops, and restarts below
 * RTLS_LOW_WATER. End of stream on one side (libraft closed its stream, or
 * the peer closed TCP) drains the other side with uv_shutdown (its queued
 * writes go out first) and then closes the connection; an error closes it
 * at once.
 *
 * Close ordering: transport->close stops the listener and closes every
 * connection; a connect request not yet handed to libraft completes with
 * RAFT_CANCELED from its connection's last close callback; the transport's
 * close callback runs once the listener and every connection are gone, so
 * no callback reaches libraft after it.
 */
#include "transport_tls.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "hourglass/bytes.h"
#include "hourglass/error.h"

/* After the handshake the client sends
 *   u32 magic "HGRT", u32 version 1, u64 its id, u32 address length,
 *   the address (no NUL)
 * and the server answers one byte, ACK_BYTE, once it has checked that the
 * client's certificate names that id. All little-endian. */
#define PREAMBLE_MAGIC 0x54524748u
#define PREAMBLE_VERSION 1u
#define PREAMBLE_FIXED 20
#define ADDRESS_MAX 64
#define ACK_BYTE 0x01
#define IO_BUF (64u << 10)
#define NAME_MAX_ 48
#define LOG_INTERVAL_MS 1000

typedef enum state {
  S_CONNECTING,
  S_HANDSHAKE,
  S_PREAMBLE,
  S_ACK,
  S_PIPED,
  S_DRAINING,
  S_CLOSING
} state_t;

typedef struct transport transport_t;

typedef struct conn {
  transport_t *tt;
  struct conn *prev, *next; /* tt->conns */
  state_t state;
  bool outbound;
  bool pipe_open;
  bool tcp_paused;  /* TCP reading stopped: the pipe is backed up */
  bool pipe_paused; /* pipe reading stopped: TCP is backed up */
  unsigned handles; /* open handles; the last close callback frees */
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_pipe_t pipe;
  uv_connect_t connect_req;
  uv_shutdown_t shutdown_req;
  SSL *ssl; /* owns rbio and wbio */
  BIO *rbio, *wbio;
  struct raft_uv_connect *req; /* outbound, until handed over */
  raft_uv_connect_cb cb;
  int status; /* given to cb if the connection closes before handover */
  uint64_t peer_id;
  char peer[ADDRESS_MAX]; /* outbound: libraft's address; inbound: ip:port */
  uint8_t pre[PREAMBLE_FIXED + ADDRESS_MAX];
  size_t pre_len;
  char in[IO_BUF];    /* what one read gave (TCP or pipe), used at once */
  char plain[IO_BUF]; /* SSL_read's output */
} conn_t;

struct transport {
  struct raft_uv_transport *t;
  uv_loop_t *loop;
  SSL_CTX *ctx;
  raft_id id;
  const char *address; /* libraft's, valid while the transport lives */
  char bind[ADDRESS_MAX];
  uv_tcp_t listener;
  bool listener_open;
  raft_uv_accept_cb accept_cb;
  conn_t *conns;
  bool closing;
  raft_uv_transport_close_cb close_cb;
  uint64_t failures;
  uint64_t last_log_ms;
  uint64_t unlogged; /* failures not logged since the last line */
  uint64_t self_id;
  hg_log_fn log;
  void *log_ctx;
};

typedef struct wreq {
  uv_write_t req;
  conn_t *c;
  char data[];
} wreq_t;

static void tlog(const transport_t *tt, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tlog(const transport_t *tt, int level, const char *fmt, ...) {
  if (tt->log == NULL) return;
  char msg[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tt->log(tt->log_ctx, level, msg);
}

static void node_name(uint64_t id, char *out, size_t len) {
  snprintf(out, len, "hourglass-node-%llu", (unsigned long long)id);
}

/* "a.b.c.d:port" to an IPv4 socket address. */
static int parse_ipv4(const char *s, struct sockaddr_in *out) {
  const char *colon = strrchr(s, ':');
  if (colon == NULL || colon == s || (size_t)(colon - s) >= 16) return -1;
  char host[16];
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  char *end = NULL;
  long port = strtol(colon + 1, &end, 10);
  if (end == colon + 1 || *end != '\0' || port < 0 || port > 65535) return -1;
  return uv_ip4_addr(host, (int)port, out) == 0 ? 0 : -1;
}

/* ---- connection lifetime ------------------------------------------------ */

static void maybe_closed(transport_t *tt) {
  if (!tt->closing || tt->listener_open || tt->conns != NULL || tt->close_cb == NULL) return;
  raft_uv_transport_close_cb cb = tt->close_cb;
  tt->close_cb = NULL;
  cb(tt->t);
}

static void handle_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  if (--c->handles > 0) return;
  transport_t *tt = c->tt;
  if (c->prev != NULL) c->prev->next = c->next;
  else tt->conns = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  struct raft_uv_connect *req = c->req;
  raft_uv_connect_cb cb = c->cb;
  int status = c->status != 0 ? c->status : RAFT_NOCONNECTION;
  SSL_free(c->ssl);
  free(c);
  if (req != NULL) cb(req, NULL, status);
  maybe_closed(tt);
}

static void conn_close(conn_t *c) {
  if (c->state == S_CLOSING) return;
  c->state = S_CLOSING;
  uv_close((uv_handle_t *)&c->tcp, handle_closed);
  uv_close((uv_handle_t *)&c->timer, handle_closed);
  if (c->pipe_open) uv_close((uv_handle_t *)&c->pipe, handle_closed);
}

/* OpenSSL's reason for the last failure on c, then its queue is cleared. */
static void ssl_reason(conn_t *c, char *out, size_t len) {
  long v = c->ssl != NULL ? SSL_get_verify_result(c->ssl) : X509_V_OK;
  unsigned long e = ERR_peek_error();
  if (v != X509_V_OK) {
    snprintf(out, len, "certificate verify failed: %s", X509_verify_cert_error_string(v));
  } else if (e != 0) {
    ERR_error_string_n(e, out, len);
  } else {
    snprintf(out, len, "TLS error");
  }
  ERR_clear_error();
}

/* A TLS failure: counted, logged (rate-limited), the connection closed. */
static void conn_fail(conn_t *c, const char *reason) {
  transport_t *tt = c->tt;
  tt->failures++;
  uint64_t now = uv_now(tt->loop);
  if (tt->last_log_ms == 0 || now - tt->last_log_ms >= LOG_INTERVAL_MS) {
    char node[40] = "", more[48] = "";
    if (c->peer_id != 0) snprintf(node, sizeof node, " (node %llu)", (unsigned long long)c->peer_id);
    if (tt->unlogged > 0)
      snprintf(more, sizeof more, " (%llu more not logged)", (unsigned long long)tt->unlogged);
    tlog(tt, HG_LOG_WARN, "replica %llu: Raft TLS %s %s%s failed: %s%s",
         (unsigned long long)tt->self_id, c->outbound ? "to" : "from", c->peer, node, reason, more);
    tt->last_log_ms = now != 0 ? now : 1;
    tt->unlogged = 0;
  } else {
    tt->unlogged++;
  }
  c->status = RAFT_NOCONNECTION;
  conn_close(c);
}

static void conn_fail_ssl(conn_t *c) {
  char reason[200];
  ssl_reason(c, reason, sizeof reason);
  conn_fail(c, reason);
}

static conn_t *conn_new(transport_t *tt, bool outbound) {
  conn_t *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->tt = tt;
  c->outbound = outbound;
  uv_tcp_init(tt->loop, &c->tcp);
  uv_timer_init(tt->loop, &c->timer);
  c->tcp.data = c;
  c->timer.data = c;
  c->handles = 2;
  c->next = tt->conns;
  if (tt->conns != NULL) tt->conns->prev = c;
  tt->conns = c;
  return c;
}

/* ---- writing ------------------------------------------------------------ */

static void tcp_written(uv_write_t *req, int status);
static void pipe_written(uv_write_t *req, int status);

static int write_copy(conn_t *c, uv_stream_t *s, const void *p, size_t n, uv_write_cb cb) {
  wreq_t *w = malloc(sizeof *w + n);
  if (w == NULL) return -ENOMEM;
  w->c = c;
  memcpy(w->data, p, n);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
  int rc = uv_write(&w->req, s, &b, 1, cb);
  if (rc != 0) free(w);
  return rc;
}

/* Stops reading the other side while more than the high mark waits to be
 * written to TCP (to_tcp) or to the pipe. */
static void pause_above_high(conn_t *c, bool to_tcp) {
  uv_stream_t *to = to_tcp ? (uv_stream_t *)&c->tcp : (uv_stream_t *)&c->pipe;
  uv_stream_t *from = to_tcp ? (uv_stream_t *)&c->pipe : (uv_stream_t *)&c->tcp;
  bool *paused = to_tcp ? &c->pipe_paused : &c->tcp_paused;
  if (!*paused && uv_stream_get_write_queue_size(to) > RTLS_HIGH_WATER) {
    uv_read_stop(from);
    *paused = true;
  }
}

/* Writes wbio's ciphertext to TCP. 0, or -1 after closing c. */
static int flush_tls(conn_t *c) {
  size_t n = BIO_ctrl_pending(c->wbio);
  if (n == 0) return 0;
  wreq_t *w = malloc(sizeof *w + n);
  if (w == NULL) {
    conn_close(c);
    return -1;
  }
  w->c = c;
  int got = BIO_read(c->wbio, w->data, (int)n);
  uv_buf_t b = uv_buf_init(w->data, got > 0 ? (unsigned)got : 0);
  if (got <= 0 || uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, tcp_written) != 0) {
    free(w);
    conn_close(c);
    return -1;
  }
  if (c->pipe_open) pause_above_high(c, true);
  return 0;
}

static void alloc_in(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn_t *c = h->data;
  *buf = uv_buf_init(c->in, sizeof c->in);
}

static void pipe_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* A write to TCP (to_tcp) or to the pipe finished: an error closes c; once
 * that side is below the low mark, the other side is read again if it was
 * paused for it. */
static void written(uv_write_t *req, int status, bool to_tcp) {
  wreq_t *w = (wreq_t *)req;
  conn_t *c = w->c;
  free(w);
  if (c->state == S_CLOSING) return;
  if (status != 0) {
    conn_close(c);
    return;
  }
  uv_stream_t *to = to_tcp ? (uv_stream_t *)&c->tcp : (uv_stream_t *)&c->pipe;
  uv_stream_t *from = to_tcp ? (uv_stream_t *)&c->pipe : (uv_stream_t *)&c->tcp;
  bool *paused = to_tcp ? &c->pipe_paused : &c->tcp_paused;
  if (*paused && c->state == S_PIPED && uv_stream_get_write_queue_size(to) < RTLS_LOW_WATER) {
    *paused = false;
    if (uv_read_start(from, alloc_in, to_tcp ? pipe_read : tcp_read) != 0) conn_close(c);
  }
}

static void tcp_written(uv_write_t *req, int status) { written(req, status, true); }
static void pipe_written(uv_write_t *req, int status) { written(req, status, false); }

/* ---- end of stream ------------------------------------------------------ */

static void on_timer(uv_timer_t *t) {
  conn_t *c = t->data;
  if (c->state < S_PIPED) conn_fail(c, "handshake timed out");
  else conn_close(c);
}

static void shutdown_done(uv_shutdown_t *req, int status) {
  (void)status;
  conn_t *c = req->data;
  conn_close(c);
}

/* One side ended: stop reading, let the other side's queued writes go
 * out, then close (bounded by the timer). */
static void drain_into(conn_t *c, uv_stream_t *other) {
  c->state = S_DRAINING;
  uv_read_stop((uv_stream_t *)&c->tcp);
  uv_read_stop((uv_stream_t *)&c->pipe);
  uv_timer_start(&c->timer, on_timer, RTLS_HANDSHAKE_MS, 0);
  c->shutdown_req.data = c;
  if (uv_shutdown(&c->shutdown_req, other, shutdown_done) != 0) conn_close(c);
}

/* ---- handover to libraft ------------------------------------------------ */

static void free_raft_handle(uv_handle_t *h) { raft_free(h); }

/* The connection is authenticated: make the socketpair, keep one end and
 * give libraft the other. 0, or -1 if c is no longer PIPED. */
static int hand_over(conn_t *c, const char *address) {
  transport_t *tt = c->tt;
  uv_os_sock_t fds[2];
  int rc = uv_socketpair(SOCK_STREAM, 0, fds, UV_NONBLOCK_PIPE, UV_NONBLOCK_PIPE);
  if (rc != 0) {
    tlog(tt, HG_LOG_WARN, "replica %llu: Raft TLS: socketpair: %s",
         (unsigned long long)tt->self_id, uv_strerror(rc));
    conn_close(c);
    return -1;
  }
  uv_pipe_t *theirs = raft_malloc(sizeof *theirs);
  if (theirs == NULL) {
    close(fds[0]);
    close(fds[1]);
    conn_close(c);
    return -1;
  }
  uv_pipe_init(tt->loop, &c->pipe, 0);
  c->pipe.data = c;
  c->pipe_open = true;
  c->handles++;
  uv_pipe_init(tt->loop, theirs, 0);
  int r1 = uv_pipe_open(&c->pipe, fds[0]);
  int r2 = uv_pipe_open(theirs, fds[1]);
  if (r1 != 0 || r2 != 0 ||
      uv_read_start((uv_stream_t *)&c->pipe, alloc_in, pipe_read) != 0) {
    if (r1 != 0) close(fds[0]);
    if (r2 != 0) close(fds[1]);
    uv_close((uv_handle_t *)theirs, free_raft_handle);
    conn_close(c);
    return -1;
  }
  uv_timer_stop(&c->timer);
  c->state = S_PIPED;
  if (c->outbound) {
    struct raft_uv_connect *req = c->req;
    c->req = NULL;
    c->cb(req, (uv_stream_t *)theirs, 0);
  } else {
    tt->accept_cb(tt->t, c->peer_id, address, (uv_stream_t *)theirs);
  }
  /* libraft may have closed the transport from its callback. */
  return c->state == S_PIPED ? 0 : -1;
}

/* Inbound: the preamble is complete in c->pre. 0, or -1 if c closed. */
static int check_preamble(conn_t *c, size_t addr_len) {
  uint64_t id = hg_ld64(c->pre + 8);
  char address[ADDRESS_MAX];
  memcpy(address, c->pre + PREAMBLE_FIXED, addr_len);
  address[addr_len] = '\0';
  c->peer_id = id;
  char name[NAME_MAX_];
  node_name(id, name, sizeof name);
  X509 *cert = SSL_get0_peer_certificate(c->ssl);
  if (cert == NULL || X509_check_host(cert, name, 0, 0, NULL) != 1) {
    ERR_clear_error();
    char reason[96];
    snprintf(reason, sizeof reason, "the client certificate does not name %s", name);
    conn_fail(c, reason);
    return -1;
  }
  const uint8_t ack = ACK_BYTE;
  ERR_clear_error();
  if (SSL_write(c->ssl, &ack, 1) != 1) {
    conn_fail_ssl(c);
    return -1;
  }
  if (flush_tls(c) != 0) return -1;
  return hand_over(c, address);
}

/* Plaintext from the peer. 0, or -1 if c left its working states. */
static int on_plain(conn_t *c, const uint8_t *p, size_t n) {
  while (n > 0) {
    if (c->state == S_PIPED) {
      if (write_copy(c, (uv_stream_t *)&c->pipe, p, n, pipe_written) != 0) {
        conn_close(c);
        return -1;
      }
      pause_above_high(c, false);
      return 0;
    }
    if (c->state == S_ACK) {
      if (p[0] != ACK_BYTE) {
        conn_fail(c, "bad acknowledgement");
        return -1;
      }
      p++;
      n--;
      if (hand_over(c, NULL) != 0) return -1;
      continue;
    }
    if (c->state != S_PREAMBLE) return -1;
    size_t need = PREAMBLE_FIXED;
    if (c->pre_len >= PREAMBLE_FIXED) need += hg_ld32(c->pre + 16);
    size_t take = need - c->pre_len < n ? need - c->pre_len : n;
    memcpy(c->pre + c->pre_len, p, take);
    c->pre_len += take;
    p += take;
    n -= take;
    if (c->pre_len == PREAMBLE_FIXED) {
      uint32_t alen = hg_ld32(c->pre + 16);
      if (hg_ld32(c->pre) != PREAMBLE_MAGIC || hg_ld32(c->pre + 4) != PREAMBLE_VERSION ||
          hg_ld64(c->pre + 8) == 0 || alen == 0 || alen >= ADDRESS_MAX) {
        conn_fail(c, "bad preamble");
        return -1;
      }
      continue;
    }
    if (c->pre_len > PREAMBLE_FIXED && c->pre_len == need &&
        check_preamble(c, need - PREAMBLE_FIXED) != 0)
      return -1;
  }
  return 0;
}

/* Outbound: the handshake is done; say who we are. 0 or -1 (closed). */
static int send_preamble(conn_t *c) {
  transport_t *tt = c->tt;
  size_t alen = strlen(tt->address);
  uint8_t pre[PREAMBLE_FIXED + ADDRESS_MAX];
  hg_st32(pre, PREAMBLE_MAGIC);
  hg_st32(pre + 4, PREAMBLE_VERSION);
  hg_st64(pre + 8, tt->id);
  hg_st32(pre + 16, (uint32_t)alen);
  memcpy(pre + PREAMBLE_FIXED, tt->address, alen);
  ERR_clear_error();
  if (SSL_write(c->ssl, pre, (int)(PREAMBLE_FIXED + alen)) <= 0) {
    conn_fail_ssl(c);
    return -1;
  }
  c->state = S_ACK;
  return flush_tls(c);
}

/* Runs the handshake and decrypts what rbio holds. */
static void advance(conn_t *c) {
  if (c->state == S_HANDSHAKE) {
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
    if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ) {
      char reason[200];
      ssl_reason(c, reason, sizeof reason);
      flush_tls(c); /* the alert, so the peer learns why */
      conn_fail(c, reason);
      return;
    }
    if (flush_tls(c) != 0 || e == SSL_ERROR_WANT_READ) return;
    if (c->outbound) {
      if (send_preamble(c) != 0) return;
    } else {
      c->state = S_PREAMBLE;
    }
  }
  while (c->state == S_PREAMBLE || c->state == S_ACK || c->state == S_PIPED) {
    ERR_clear_error();
    int n = SSL_read(c->ssl, c->plain, sizeof c->plain);
    if (n > 0) {
      if (on_plain(c, (const uint8_t *)c->plain, (size_t)n) != 0) return;
      continue;
    }
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_WANT_READ) break;
    if (e == SSL_ERROR_ZERO_RETURN && c->state == S_PIPED) {
      drain_into(c, (uv_stream_t *)&c->pipe);
      return;
    }
    if (e == SSL_ERROR_ZERO_RETURN) conn_fail(c, "peer closed before the preamble was answered");
    else conn_fail_ssl(c);
    return;
  }
  if (c->state != S_CLOSING) flush_tls(c);
}

static void tcp_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn_t *c = s->data;
  if (c->state == S_CLOSING || c->state == S_DRAINING || nread == 0) return;
  if (nread < 0) {
    if (c->state == S_PIPED) drain_into(c, (uv_stream_t *)&c->pipe);
    else if (nread == UV_EOF) conn_fail(c, "peer closed the connection during the handshake");
    else conn_fail(c, uv_strerror((int)nread));
    return;
  }
  if (BIO_write(c->rbio, buf->base, (int)nread) != (int)nread) {
    ERR_clear_error();
    conn_close(c);
    return;
  }
  advance(c);
}

static void pipe_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn_t *c = s->data;
  if (c->state != S_PIPED || nread == 0) return;
  if (nread < 0) {
    /* libraft closed its stream: say so to the peer, then drain. */
    ERR_clear_error();
    SSL_shutdown(c->ssl);
    ERR_clear_error();
    if (flush_tls(c) == 0) drain_into(c, (uv_stream_t *)&c->tcp);
    return;
  }
  ERR_clear_error();
  if (SSL_write(c->ssl, buf->base, (int)nread) != (int)nread) {
    conn_fail_ssl(c);
    return;
  }
  flush_tls(c);
}

/* TCP is up (either direction): start the TLS session. 0 or -1 (closed). */
static int start_tls(conn_t *c) {
  transport_t *tt = c->tt;
  c->ssl = SSL_new(tt->ctx);
  c->rbio = BIO_new(BIO_s_mem());
  c->wbio = BIO_new(BIO_s_mem());
  if (c->ssl == NULL || c->rbio == NULL || c->wbio == NULL) {
    BIO_free(c->rbio);
    BIO_free(c->wbio);
    c->rbio = c->wbio = NULL;
    ERR_clear_error();
    conn_close(c);
    return -1;
  }
  /* An empty memory BIO reads as "retry later", not end of file. */
  BIO_set_mem_eof_return(c->rbio, -1);
  BIO_set_mem_eof_return(c->wbio, -1);
  SSL_set_bio(c->ssl, c->rbio, c->wbio);
  if (c->outbound) {
    char name[NAME_MAX_];
    node_name(c->peer_id, name, sizeof name);
    if (SSL_set1_host(c->ssl, name) != 1) {
      ERR_clear_error();
      conn_close(c);
      return -1;
    }
    SSL_set_connect_state(c->ssl);
  } else {
    SSL_set_accept_state(c->ssl);
  }
  uv_tcp_nodelay(&c->tcp, 1);
  c->state = S_HANDSHAKE;
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_in, tcp_read) != 0 ||
      uv_timer_start(&c->timer, on_timer, RTLS_HANDSHAKE_MS, 0) != 0) {
    conn_close(c);
    return -1;
  }
  advance(c);
  return c->state == S_CLOSING ? -1 : 0;
}

/* ---- the raft_uv_transport interface ------------------------------------ */

static int tt_init(struct raft_uv_transport *t, raft_id id, const char *address) {
  transport_t *tt = t->impl;
  tt->id = id;
  tt->address = address;
  return 0;
}

static void on_connected(uv_connect_t *req, int status) {
  conn_t *c = req->data;
  if (c->state == S_CLOSING) return;
  if (status != 0) {
    c->status = RAFT_NOCONNECTION; /* peer down: not a TLS failure */
    conn_close(c);
    return;
  }
  start_tls(c);
}

static int tt_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                      const char *address, raft_uv_connect_cb cb) {
  transport_t *tt = t->impl;
  struct sockaddr_in addr;
  if (tt->closing) return RAFT_CANCELED;
  if (strlen(address) >= ADDRESS_MAX || parse_ipv4(address, &addr) != 0) return RAFT_NOCONNECTION;
  conn_t *c = conn_new(tt, true);
  if (c == NULL) return RAFT_NOMEM;
  req->cb = cb;
  c->peer_id = id;
  snprintf(c->peer, sizeof c->peer, "%s", address);
  c->state = S_CONNECTING;
  c->connect_req.data = c;
  if (uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&addr, on_connected) != 0) {
    conn_close(c); /* req not set yet: its callback never runs */
    return RAFT_NOCONNECTION;
  }
  c->req = req;
  c->cb = cb;
  return 0;
}

static void on_connection(uv_stream_t *server, int status) {
  transport_t *tt = server->data;
  if (status < 0 || tt->closing) return;
  unsigned pending = 0;
  for (const conn_t *o = tt->conns; o != NULL; o = o->next)
    pending += !o->outbound && o->state < S_PIPED;
  conn_t *c = conn_new(tt, false);
  if (c == NULL) return;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  struct sockaddr_storage ss;
  int len = sizeof ss;
  snprintf(c->peer, sizeof c->peer, "?");
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_INET) {
    const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
    char ip[16];
    uv_ip4_name(sin, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "%s:%u", ip, ntohs(sin->sin_port));
  }
  if (pending >= RTLS_MAX_HANDSHAKES) {
    conn_fail(c, "too many connections in their handshake");
    return;
  }
  start_tls(c);
}

static void listener_closed(uv_handle_t *h) {
  transport_t *tt = h->data;
  tt->listener_open = false;
  maybe_closed(tt);
}

static int tt_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb) {
  transport_t *tt = t->impl;
  const char *a = tt->bind[0] != '\0' ? tt->bind : tt->address;
  struct sockaddr_in addr;
  if (a == NULL || parse_ipv4(a, &addr) != 0) {
    snprintf(t->errmsg, sizeof t->errmsg, "bad listen address");
    return RAFT_INVALID;
  }
  tt->accept_cb = cb;
  uv_tcp_init(tt->loop, &tt->listener);
  tt->listener.data = tt;
  tt->listener_open = true;
  int rc = uv_tcp_bind(&tt->listener, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&tt->listener, 128, on_connection);
  if (rc != 0) {
    snprintf(t->errmsg, sizeof t->errmsg, "listen on %s: %s", a, uv_strerror(rc));
    uv_close((uv_handle_t *)&tt->listener, listener_closed);
    return RAFT_IOERR;
  }
  return 0;
}

static void tt_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb) {
  transport_t *tt = t->impl;
  tt->closing = true;
  tt->close_cb = cb;
  if (tt->listener_open && !uv_is_closing((uv_handle_t *)&tt->listener))
    uv_close((uv_handle_t *)&tt->listener, listener_closed);
  for (conn_t *c = tt->conns; c != NULL; c = c->next) {
    if (c->req != NULL) c->status = RAFT_CANCELED;
    conn_close(c);
  }
  maybe_closed(tt);
}

/* ---- setup -------------------------------------------------------------- */

static int load_error(char *err, size_t len, const char *what, const char *path) {
  unsigned long e = ERR_get_error();
  char reason[200];
  if (e != 0) ERR_error_string_n(e, reason, sizeof reason);
  else snprintf(reason, sizeof reason, "unknown error");
  ERR_clear_error();
  snprintf(err, len, "%s %s: %s", what, path, reason);
  return HG_EINVAL;
}

static int make_ctx(const rtls_config_t *cfg, SSL_CTX **out, char *err, size_t len) {
  const char *files[3] = {cfg->cert, cfg->key, cfg->ca};
  for (int i = 0; i < 3; i++) {
    if (files[i] == NULL || files[i][0] == '\0') {
      snprintf(err, len, "TLS needs a certificate, its key and the cluster CA");
      return HG_EINVAL;
    }
    if (access(files[i], R_OK) != 0) {
      int e = errno;
      snprintf(err, len, "cannot read %s: %s", files[i], strerror(e));
      return -e;
    }
  }
  ERR_clear_error();
  SSL_CTX *ctx = SSL_CTX_new(TLS_method());
  if (ctx == NULL) {
    ERR_clear_error();
    snprintf(err, len, "cannot create a TLS context");
    return -ENOMEM;
  }
  int rc = 0;
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) {
    rc = load_error(err, len, "cannot require TLS 1.3", "");
  } else if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert) != 1) {
    rc = load_error(err, len, "cannot load the certificate", cfg->cert);
  } else if (SSL_CTX_use_PrivateKey_file(ctx, cfg->key, SSL_FILETYPE_PEM) != 1) {
    rc = load_error(err, len, "cannot load the key", cfg->key);
  } else if (SSL_CTX_check_private_key(ctx) != 1) {
    rc = load_error(err, len, "the key does not match the certificate; key", cfg->key);
  } else if (SSL_CTX_load_verify_locations(ctx, cfg->ca, NULL) != 1) {
    rc = load_error(err, len, "cannot load the CA", cfg->ca);
  } else {
    char name[NAME_MAX_];
    node_name(cfg->self_id, name, sizeof name);
    if (X509_check_host(SSL_CTX_get0_certificate(ctx), name, 0, 0, NULL) != 1) {
      ERR_clear_error();
      snprintf(err, len, "the certificate %s does not name %s", cfg->cert, name);
      rc = HG_EINVAL;
    }
  }
  if (rc != 0) {
    SSL_CTX_free(ctx);
    return rc;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  *out = ctx;
  return 0;
}

int rtls_init(struct raft_uv_transport *t, uv_loop_t *loop, const rtls_config_t *cfg,
              char *err, size_t err_len) {
  struct sockaddr_in addr;
  if (cfg->bind_address != NULL &&
      (strlen(cfg->bind_address) >= ADDRESS_MAX || parse_ipv4(cfg->bind_address, &addr) != 0)) {
    snprintf(err, err_len, "bad bind address %s", cfg->bind_address);
    return HG_EINVAL;
  }
  SSL_CTX *ctx = NULL;
  int rc = make_ctx(cfg, &ctx, err, err_len);
  if (rc != 0) return rc;
  transport_t *tt = calloc(1, sizeof *tt);
  if (tt == NULL) {
    SSL_CTX_free(ctx);
    snprintf(err, err_len, "out of memory");
    return -ENOMEM;
  }
  tt->t = t;
  tt->loop = loop;
  tt->ctx = ctx;
  if (cfg->bind_address != NULL) snprintf(tt->bind, sizeof tt->bind, "%s", cfg->bind_address);
  tt->self_id = cfg->self_id;
  tt->log = cfg->log;
  tt->log_ctx = cfg->log_ctx;
  void *data = t->data;
  memset(t, 0, sizeof *t);
  t->data = data;
  t->impl = tt;
  t->init = tt_init;
  t->listen = tt_listen;
  t->connect = tt_connect;
  t->close = tt_close;
  return 0;
}

void rtls_release(struct raft_uv_transport *t) {
  transport_t *tt = t->impl;
  if (tt == NULL) return;
  SSL_CTX_free(tt->ctx);
  free(tt);
  t->impl = NULL;
}

uint64_t rtls_failures(const struct raft_uv_transport *t) {
  const transport_t *tt = t->impl;
  return tt != NULL ? tt->failures : 0;
}
