/*
 * client.c - the gateway client library (hourglass/client.h).
 *
 * One object per connection slot, owned by one thread: a receive buffer of
 * one maximal frame plus read-ahead, a decode arena sized for one frame
 * (hg_wire), and a send buffer that frames are encoded straight into. The
 * socket is non-blocking; blocking behaviour is poll() with a timeout, so a
 * stuck server can never hang a caller forever.
 *
 * Stream tracking is a small state machine over the server's seq:
 *   rx_next     the seq to deliver next;
 *   rx_high     the highest seq seen ahead of rx_next (held back);
 *   retx_left   frames still to come in the running Retransmission;
 * A gap (seq > rx_next, e.g. after a reconnect) drops the frame and asks for
 * [rx_next, rx_high] once no retransmission runs; the resent frames then
 * arrive in order. Live frames may interleave with resent ones; a frame
 * belongs to the retransmission only if its seq is inside the announced
 * range. Dropping instead of buffering keeps memory fixed; the server keeps
 * the frames, so nothing is lost by asking again.
 *
 * TLS: OpenSSL on the socket through a small BIO of our own (send with
 * MSG_NOSIGNAL, as the plain path: a peer that closed costs a write EPIPE,
 * never the process a SIGPIPE), non-blocking like the rest: write_some
 * and read_some go through SSL_write_ex/SSL_read_ex and
 * treat "want read/write" as EAGAIN; read_some reads until OpenSSL has
 * nothing buffered, so poll() on the socket never sleeps on decrypted
 * data. Partial writes and a moving send buffer are allowed (the send
 * buffer compacts between retries).
 */
#include "hourglass/client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdint.h>

#include "hourglass/error.h"
#include "hourglass/hmac.h"

#define RX_SLACK 4096u /* read-ahead beyond one maximal frame */

struct hg_client {
  hg_client_config_t cfg; /* host and secret point into this object */
  char host[256];
  uint8_t secret[HG_WIRE_SECRET_MAX];

  int fd;
  bool logged_in;
  SSL_CTX *tls_ctx;      /* NULL: plain TCP */
  SSL *ssl;              /* the connection's TLS state; NULL when closed or plain */
  SSL_SESSION *tls_sess; /* the last connection's session, offered at the next */
  char server_name[256];
  hg_client_session_t session;

  /* refusal of the last connect */
  bool rejected;
  bool reject_terminated;
  uint32_t reject_code;
  char reject_text[128];
  char reject_leader[128]; /* LoginReject.leader of a LOGIN_NOT_LEADER, "" if none */
  char nodes[1024];        /* config.nodes, copied */

  /* receive side */
  uint8_t *rx;
  size_t rx_cap, rx_len, rx_off;
  hg_wire_arena_t arena;
  uint8_t *arena_buf;

  /* send side */
  uint8_t *tx;
  size_t tx_cap, tx_len, tx_off;
  uint64_t tx_seq; /* next request seq of this login */
  bool corked;     /* sends only queue; hg_client_flush/uncork write */
  uint64_t last_tx_ns;

  /* server stream */
  bool have_rx;     /* rx_next is meaningful (a login happened) */
  uint64_t epoch;   /* of the last login; 0: none yet or not sent */
  uint64_t rx_next;
  uint64_t rx_high; /* 0: nothing held back */
  bool retx_running;  /* request sent, header or frames still to come */
  bool retx_user;     /* the caller asked: deliver everything */
  bool retx_header;   /* header received */
  uint64_t retx_from; /* the header's range: [retx_from, retx_from + retx_count) */
  uint32_t retx_count;
  uint32_t retx_left;

  hg_client_stats_t stats;
};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Milliseconds left until deadline (monotonic ns); -1 for no deadline. */
static int ms_left(uint64_t deadline) {
  if (deadline == UINT64_MAX) return -1;
  uint64_t now = mono_ns();
  if (now >= deadline) return 0;
  uint64_t ms = (deadline - now + 999999u) / 1000000u;
  return ms > 1000000000u ? 1000000000 : (int)ms;
}

static uint64_t deadline_of(int timeout_ms) {
  if (timeout_ms < 0) return UINT64_MAX;
  return mono_ns() + (uint64_t)timeout_ms * 1000000u;
}

void hg_client_config_init(hg_client_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->host = HG_CLIENT_DEFAULT_HOST;
  cfg->port = HG_CLIENT_DEFAULT_PORT;
  cfg->keepalive_ms = 1000;
  cfg->max_frame = HG_WIRE_DEFAULT_MAX_FRAME;
  cfg->tx_capacity = 256u * 1024u;
  cfg->timeout_ms = 5000;
  cfg->retransmit_max = 1000;
}

/* The socket BIO: the descriptor in the BIO's data. */
static int bio_fd(BIO *b) { return (int)(intptr_t)BIO_get_data(b); }

static int bio_write(BIO *b, const char *buf, size_t len, size_t *done) {
  BIO_clear_retry_flags(b);
  ssize_t n = send(bio_fd(b), buf, len, MSG_NOSIGNAL);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(b);
    return 0;
  }
  *done = (size_t)n;
  return 1;
}

static int bio_read(BIO *b, char *buf, size_t len, size_t *done) {
  BIO_clear_retry_flags(b);
  ssize_t n = recv(bio_fd(b), buf, len, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(b);
  if (n <= 0) return 0;
  *done = (size_t)n;
  return 1;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
  (void)b;
  (void)num;
  (void)ptr;
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b) {
  BIO_set_init(b, 1);
  return 1;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_make(void) {
  BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "hg_client socket");
  if (m != NULL && BIO_meth_set_write_ex(m, bio_write) == 1 &&
      BIO_meth_set_read_ex(m, bio_read) == 1 && BIO_meth_set_ctrl(m, bio_ctrl) == 1 &&
      BIO_meth_set_create(m, bio_create) == 1) {
    bio_method = m;
  } else {
    BIO_meth_free(m);
  }
}

/* Builds the TLS context: TLS 1.3, peer verification against the CA file
 * (or the system's store), the client certificate if any. */
static int tls_setup(hg_client_t *c, const hg_client_config_t *cfg) {
  pthread_once(&bio_once, bio_method_make);
  if (bio_method == NULL) return -ENOMEM;
  const char *name = cfg->tls_server_name != NULL ? cfg->tls_server_name : c->host;
  if (strlen(name) >= sizeof c->server_name || (cfg->tls_key != NULL) != (cfg->tls_cert != NULL))
    return HG_ETLS;
  snprintf(c->server_name, sizeof c->server_name, "%s", name);
  c->cfg.tls_ca_file = c->cfg.tls_server_name = c->cfg.tls_cert = c->cfg.tls_key = NULL;
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) return -ENOMEM;
  int ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 &&
           (cfg->tls_ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, cfg->tls_ca_file, NULL)
                                     : SSL_CTX_set_default_verify_paths(ctx)) == 1;
  if (ok && cfg->tls_cert != NULL)
    ok = SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) == 1 &&
         SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) == 1 &&
         SSL_CTX_check_private_key(ctx) == 1;
  ERR_clear_error();
  if (!ok) {
    SSL_CTX_free(ctx);
    return HG_ETLS;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  /* No cache: the client keeps its one session itself (tls_sess). */
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  c->tls_ctx = ctx;
  return 0;
}

int hg_client_create(const hg_client_config_t *cfg, hg_client_t **out) {
  if (cfg == NULL || out == NULL || cfg->key_id == 0 || cfg->secret == NULL ||
      cfg->secret_len == 0 || cfg->secret_len > HG_WIRE_SECRET_MAX ||
      cfg->max_frame > HG_WIRE_MAX_FRAME_LIMIT)
    return HG_EINVAL;
  const char *host = cfg->host ? cfg->host : HG_CLIENT_DEFAULT_HOST;
  if (strlen(host) >= 256) return HG_EINVAL;
  hg_client_t *c = calloc(1, sizeof *c);
  if (c == NULL) return -ENOMEM;
  c->cfg = *cfg;
  snprintf(c->host, sizeof c->host, "%s", host);
  c->cfg.host = c->host;
  if (cfg->nodes != NULL && strlen(cfg->nodes) >= sizeof c->nodes) {
    free(c);
    return HG_EINVAL;
  }
  snprintf(c->nodes, sizeof c->nodes, "%s", cfg->nodes != NULL ? cfg->nodes : "");
  c->cfg.nodes = c->nodes;
  memcpy(c->secret, cfg->secret, cfg->secret_len);
  c->cfg.secret = c->secret;
  if (c->cfg.port == 0) c->cfg.port = HG_CLIENT_DEFAULT_PORT;
  if (c->cfg.keepalive_ms == 0) c->cfg.keepalive_ms = 1000;
  if (c->cfg.max_frame == 0) c->cfg.max_frame = HG_WIRE_DEFAULT_MAX_FRAME;
  if (c->cfg.tx_capacity == 0) c->cfg.tx_capacity = 256u * 1024u;
  if (c->cfg.timeout_ms == 0) c->cfg.timeout_ms = 5000;
  if (c->cfg.retransmit_max == 0) c->cfg.retransmit_max = 1000;
  if (c->cfg.wall_clock == NULL) c->cfg.wall_clock = real_ns;
  c->fd = -1;
  c->rx_cap = (size_t)c->cfg.max_frame + HG_WIRE_VARINT_MAX + RX_SLACK;
  c->tx_cap = c->cfg.tx_capacity;
  size_t arena_cap = HG_WIRE_ARENA_SIZE(c->cfg.max_frame);
  c->rx = malloc(c->rx_cap);
  c->tx = malloc(c->tx_cap);
  c->arena_buf = malloc(arena_cap);
  if (c->rx == NULL || c->tx == NULL || c->arena_buf == NULL) {
    hg_client_destroy(c);
    return -ENOMEM;
  }
  hg_wire_arena_init(&c->arena, c->arena_buf, arena_cap);
  if (cfg->tls) {
    int rc = tls_setup(c, cfg);
    if (rc != 0) {
      hg_client_destroy(c);
      return rc;
    }
  }
  *out = c;
  return 0;
}

void hg_client_close(hg_client_t *c) {
  if (c->ssl != NULL) {
    /* Keep a resumable session (its ticket arrived after the handshake). */
    SSL_SESSION *s = SSL_get1_session(c->ssl);
    if (s != NULL && SSL_SESSION_is_resumable(s)) {
      SSL_SESSION_free(c->tls_sess);
      c->tls_sess = s;
    } else {
      SSL_SESSION_free(s);
    }
    /* close_notify (best effort) while the session is up; either way the
     * SSL counts as shut down, or freeing it would mark the session kept
     * above as not resumable. */
    if (c->logged_in) (void)SSL_shutdown(c->ssl);
    SSL_set_shutdown(c->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(c->ssl);
    c->ssl = NULL;
    ERR_clear_error();
  }
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->logged_in = false;
  c->rx_len = c->rx_off = 0;
  c->tx_len = c->tx_off = 0;
  /* A retransmission in flight dies with the connection; the gap stays
   * recorded in rx_next and is asked for again after the next login. */
  c->retx_running = c->retx_user = c->retx_header = false;
  c->retx_left = 0;
}

void hg_client_destroy(hg_client_t *c) {
  if (c == NULL) return;
  hg_client_close(c);
  SSL_SESSION_free(c->tls_sess);
  SSL_CTX_free(c->tls_ctx);
  hg_wipe(c->secret, sizeof c->secret);
  free(c->rx);
  free(c->tx);
  free(c->arena_buf);
  free(c);
}

int hg_client_fd(const hg_client_t *c) { return c->fd; }
const hg_client_session_t *hg_client_session(const hg_client_t *c) {
  return c->logged_in ? &c->session : NULL;
}
uint64_t hg_client_rx_next_seq(const hg_client_t *c) { return c->have_rx ? c->rx_next : 0; }
uint64_t hg_client_tx_next_seq(const hg_client_t *c) { return c->tx_seq; }
size_t hg_client_tx_pending(const hg_client_t *c) { return c->tx_len - c->tx_off; }
void hg_client_stats(const hg_client_t *c, hg_client_stats_t *out) { *out = c->stats; }

int hg_client_login_reject(const hg_client_t *c, uint32_t *code, bool *terminated, char *text,
                           size_t text_cap) {
  if (!c->rejected) return HG_ESTATE;
  if (code) *code = c->reject_code;
  if (terminated) *terminated = c->reject_terminated;
  if (text && text_cap) snprintf(text, text_cap, "%s", c->reject_text);
  return 0;
}

/* ------------------------------------------------------------------ send */

/* Writes what the socket takes now. 0, or -errno (not EAGAIN). */
/* An SSL_*_ex failure as this file's results: 0 for "try again" (the
 * socket would block), -ECONNRESET for the peer's close, HG_ETLS else. */
static int tls_err(hg_client_t *c, int r) {
  int e = SSL_get_error(c->ssl, r);
  bool eof = ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
  ERR_clear_error();
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
  if (e == SSL_ERROR_ZERO_RETURN || eof) return -ECONNRESET; /* the peer's close */
  if (e == SSL_ERROR_SYSCALL) return errno != 0 ? -errno : -ECONNRESET;
  return HG_ETLS;
}

static int write_some(hg_client_t *c) {
  while (c->ssl != NULL && c->tx_off < c->tx_len) {
    size_t n = 0;
    int r = SSL_write_ex(c->ssl, c->tx + c->tx_off, c->tx_len - c->tx_off, &n);
    if (r != 1) return tls_err(c, r);
    c->tx_off += n;
  }
  while (c->tx_off < c->tx_len) {
    ssize_t n = send(c->fd, c->tx + c->tx_off, c->tx_len - c->tx_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -errno;
    }
    c->tx_off += (size_t)n;
  }
  c->tx_off = c->tx_len = 0;
  return 0;
}

int hg_client_flush(hg_client_t *c, int timeout_ms) {
  if (c->fd < 0) return -ENOTCONN;
  uint64_t deadline = deadline_of(timeout_ms);
  for (;;) {
    int rc = write_some(c);
    if (rc < 0) return rc;
    if (c->tx_len == 0) return 0;
    int left = ms_left(deadline);
    if (left == 0) return -EAGAIN;
    struct pollfd p = {.fd = c->fd, .events = POLLOUT};
    rc = poll(&p, 1, left);
    if (rc < 0 && errno != EINTR) return -errno;
  }
}

void hg_client_cork(hg_client_t *c) { c->corked = true; }

int hg_client_uncork(hg_client_t *c) {
  c->corked = false;
  if (c->fd < 0) return c->tx_len > c->tx_off ? -ENOTCONN : 0;
  if (c->cfg.nonblocking_send) return write_some(c);
  int rc = hg_client_flush(c, (int)c->cfg.timeout_ms);
  return rc == -EAGAIN ? -ETIMEDOUT : rc;
}

/* Encodes env into the send buffer (compacting it first if needed). */
static int enqueue(hg_client_t *c, const Hourglass__V1__Envelope *env) {
  if (c->tx_off > 0 && c->tx_off == c->tx_len) c->tx_off = c->tx_len = 0;
  size_t len = 0;
  int rc = hg_wire_encode(env, c->tx + c->tx_len, c->tx_cap - c->tx_len, &len);
  if (rc == HG_EFULL && c->tx_off > 0) {
    memmove(c->tx, c->tx + c->tx_off, c->tx_len - c->tx_off);
    c->tx_len -= c->tx_off;
    c->tx_off = 0;
    rc = hg_wire_encode(env, c->tx + c->tx_len, c->tx_cap - c->tx_len, &len);
  }
  if (rc < 0) return rc;
  c->tx_len += len;
  c->stats.frames_out++;
  c->last_tx_ns = mono_ns();
  return 0;
}

/* Queues env and writes: at once, and for blocking clients until the frame
 * is out (or the timeout). */
static int send_env_q(hg_client_t *c, const Hourglass__V1__Envelope *env, bool *queued) {
  *queued = false;
  if (c->fd < 0) return -ENOTCONN;
  int rc = enqueue(c, env);
  if (c->corked) {
    /* A full buffer is written out (what the socket takes, or all of it for
     * a blocking client) to make room; otherwise nothing is written now. */
    if (rc == HG_EFULL) {
      rc = c->cfg.nonblocking_send ? write_some(c) : hg_client_flush(c, (int)c->cfg.timeout_ms);
      if (rc == -EAGAIN) return -ETIMEDOUT;
      if (rc < 0) return rc;
      rc = enqueue(c, env);
    }
    if (rc < 0) return rc;
    *queued = true;
    return 0;
  }
  if (rc == HG_EFULL && !c->cfg.nonblocking_send) {
    rc = hg_client_flush(c, (int)c->cfg.timeout_ms);
    if (rc == -EAGAIN) return -ETIMEDOUT;
    if (rc < 0) return rc;
    rc = enqueue(c, env);
  }
  if (rc < 0) return rc;
  *queued = true;
  if (c->cfg.nonblocking_send) return write_some(c);
  rc = hg_client_flush(c, (int)c->cfg.timeout_ms);
  return rc == -EAGAIN ? -ETIMEDOUT : rc;
}

static int send_env(hg_client_t *c, const Hourglass__V1__Envelope *env) {
  bool queued;
  return send_env_q(c, env, &queued);
}

int hg_client_send(hg_client_t *c, Hourglass__V1__Envelope *env, uint64_t *seq) {
  if (env == NULL) return HG_EINVAL;
  if (c->fd < 0 || !c->logged_in) return -ENOTCONN;
  if (hg_wire_body_is_request(env->body_case)) {
    env->has_seq = 1;
    env->seq = c->tx_seq;
  } else {
    env->has_seq = 0;
  }
  bool queued;
  int rc = send_env_q(c, env, &queued);
  /* The seq is used once the frame is queued, even if writing it failed
   * later: the server may have received it. */
  if (hg_wire_body_is_request(env->body_case) && queued) {
    if (seq) *seq = c->tx_seq + c->session.ref_seq_base;
    c->tx_seq++;
  }
  return rc;
}

int hg_client_tick(hg_client_t *c) {
  if (c->fd < 0 || !c->logged_in) return 0;
  uint64_t ka = (uint64_t)c->session.keepalive_ms * 1000000u;
  if (mono_ns() - c->last_tx_ns < ka) return 0;
  Hourglass__V1__Heartbeat hb = HOURGLASS__V1__HEARTBEAT__INIT;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT;
  env.heartbeat = &hb;
  c->stats.heartbeats_out++;
  return send_env(c, &env);
}

/* --------------------------------------------------------------- builders */

int hg_client_new_order(hg_client_t *c, const hg_client_order_t *o, uint64_t *seq) {
  if (o == NULL) return HG_EINVAL;
  Hourglass__V1__NewOrderRequest m = HOURGLASS__V1__NEW_ORDER_REQUEST__INIT;
  m.instrument_id = o->instrument_id;
  m.client_order_id = o->client_order_id;
  m.side = (Hourglass__V1__Side)o->side;
  m.type = (Hourglass__V1__OrdType)o->type;
  m.tif = (Hourglass__V1__TimeInForce)o->tif;
  m.has_price = o->has_price;
  m.price = o->price;
  m.qty = o->qty;
  if (o->stp != 0) {
    m.has_stp = 1;
    m.stp = (Hourglass__V1__StpMode)o->stp;
  }
  if (o->post_only) {
    m.has_post_only = 1;
    m.post_only = 1;
  }
  if (o->smp_group != 0) {
    m.has_smp_group = 1;
    m.smp_group = o->smp_group;
  }
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER;
  env.new_order = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_cancel(hg_client_t *c, uint32_t instrument_id, uint64_t order_id, uint64_t *seq) {
  Hourglass__V1__CancelRequest m = HOURGLASS__V1__CANCEL_REQUEST__INIT;
  m.instrument_id = instrument_id;
  m.order_id = order_id;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_CANCEL;
  env.cancel = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_replace(hg_client_t *c, uint32_t instrument_id, uint64_t order_id, int64_t new_price,
                      int64_t new_qty, uint64_t *seq) {
  Hourglass__V1__ReplaceRequest m = HOURGLASS__V1__REPLACE_REQUEST__INIT;
  m.instrument_id = instrument_id;
  m.order_id = order_id;
  m.new_price = new_price;
  m.new_qty = new_qty;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_REPLACE;
  env.replace = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_mass_cancel(hg_client_t *c, uint32_t instrument_id, uint32_t sides, uint64_t *seq) {
  Hourglass__V1__MassCancelRequest m = HOURGLASS__V1__MASS_CANCEL_REQUEST__INIT;
  if (instrument_id != 0) {
    m.has_instrument_id = 1;
    m.instrument_id = instrument_id;
  }
  m.has_sides = 1;
  m.sides = (Hourglass__V1__SideFilter)sides;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_MASS_CANCEL;
  env.mass_cancel = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_order_status(hg_client_t *c, uint32_t instrument_id, uint64_t order_id,
                           uint64_t *seq) {
  Hourglass__V1__OrderStatusRequest m = HOURGLASS__V1__ORDER_STATUS_REQUEST__INIT;
  m.instrument_id = instrument_id;
  m.order_id = order_id;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_ORDER_STATUS_REQUEST;
  env.order_status_request = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_positions(hg_client_t *c, uint32_t account, uint64_t *seq) {
  Hourglass__V1__PositionsRequest m = HOURGLASS__V1__POSITIONS_REQUEST__INIT;
  if (account != 0) {
    m.has_account = 1;
    m.account = account;
  }
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_POSITIONS_REQUEST;
  env.positions_request = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_instruments(hg_client_t *c, uint64_t *seq) {
  Hourglass__V1__InstrumentsRequest m = HOURGLASS__V1__INSTRUMENTS_REQUEST__INIT;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_INSTRUMENTS_REQUEST;
  env.instruments_request = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_md_subscribe(hg_client_t *c, uint32_t instrument_id, uint32_t depth, uint64_t *seq) {
  Hourglass__V1__MarketDataSubscribe m = HOURGLASS__V1__MARKET_DATA_SUBSCRIBE__INIT;
  m.instrument_id = instrument_id;
  if (depth != 0) {
    m.has_depth = 1;
    m.depth = depth;
  }
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_MD_SUBSCRIBE;
  env.md_subscribe = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_md_unsubscribe(hg_client_t *c, uint32_t instrument_id, uint64_t *seq) {
  Hourglass__V1__MarketDataUnsubscribe m = HOURGLASS__V1__MARKET_DATA_UNSUBSCRIBE__INIT;
  m.instrument_id = instrument_id;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_MD_UNSUBSCRIBE;
  env.md_unsubscribe = &m;
  return hg_client_send(c, &env, seq);
}

static int send_retransmit(hg_client_t *c, uint64_t from, uint32_t count, bool user) {
  Hourglass__V1__RetransmitRequest m = HOURGLASS__V1__RETRANSMIT_REQUEST__INIT;
  m.from_seq = from;
  m.count = count;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_RETRANSMIT_REQUEST;
  env.retransmit_request = &m;
  int rc = send_env(c, &env);
  if (rc < 0) return rc;
  c->retx_running = true;
  c->retx_user = user;
  c->retx_header = false;
  c->retx_left = 0;
  c->stats.retransmit_requests++;
  return 0;
}

int hg_client_retransmit(hg_client_t *c, uint64_t from_seq, uint32_t count) {
  if (from_seq == 0 || count == 0 || count > c->cfg.retransmit_max) return HG_EINVAL;
  if (c->fd < 0 || !c->logged_in) return -ENOTCONN;
  if (c->retx_running) return HG_ESTATE;
  return send_retransmit(c, from_seq, count, true);
}

/* Asks for the held-back range if there is one and nothing runs. */
static int fill_gap(hg_client_t *c) {
  if (c->retx_running || c->rx_high < c->rx_next || c->fd < 0) return 0;
  uint64_t want = c->rx_high - c->rx_next + 1;
  uint32_t count = want > c->cfg.retransmit_max ? c->cfg.retransmit_max : (uint32_t)want;
  return send_retransmit(c, c->rx_next, count, false);
}

/* --------------------------------------------------------------- receive */

/* Reads what has arrived. >0 bytes, 0 would block, -ECONNRESET on EOF. */
static int read_some(hg_client_t *c) {
  if (c->rx_off > 0) {
    memmove(c->rx, c->rx + c->rx_off, c->rx_len - c->rx_off);
    c->rx_len -= c->rx_off;
    c->rx_off = 0;
  }
  if (c->rx_len == c->rx_cap) return HG_EPARSE; /* cannot happen: a frame fits */
  if (c->ssl != NULL) {
    size_t got = 0;
    errno = 0;
    int r = SSL_read_ex(c->ssl, c->rx + c->rx_len, c->rx_cap - c->rx_len, &got);
    if (r != 1) return tls_err(c, r);
    c->rx_len += got;
    return (int)got;
  }
  for (;;) {
    ssize_t n = recv(c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len, 0);
    if (n > 0) {
      c->rx_len += (size_t)n;
      return (int)n;
    }
    if (n == 0) return -ECONNRESET;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

/* Decodes the next whole frame in the buffer: 1 and *env, 0 if incomplete,
 * HG_EPARSE on a bad header or body. */
static int next_frame(hg_client_t *c, Hourglass__V1__Envelope **env) {
  hg_wire_frame_t f;
  int rc = hg_wire_frame_parse(c->rx + c->rx_off, c->rx_len - c->rx_off, c->cfg.max_frame, &f);
  if (rc == -EAGAIN) return 0;
  if (rc < 0) return HG_EPARSE;
  size_t total = (size_t)f.hdr_len + f.body_len;
  if (c->rx_len - c->rx_off < total) return 0;
  rc = hg_wire_decode(&c->arena, c->rx + c->rx_off + f.hdr_len, f.body_len, env);
  c->rx_off += total;
  if (rc < 0) return HG_EPARSE;
  c->stats.frames_in++;
  return 1;
}

static bool is_stream_frame(const Hourglass__V1__Envelope *e) {
  return e->has_seq && e->seq > 0 &&
         (uint32_t)e->body_case >= HOURGLASS__V1__BODY_RANGE__BODY_SERVER_APP_FIRST &&
         e->body_case != HOURGLASS__V1__ENVELOPE__BODY_MD_SNAPSHOT &&
         e->body_case != HOURGLASS__V1__ENVELOPE__BODY_MD_LEVEL &&
         e->body_case != HOURGLASS__V1__ENVELOPE__BODY_MD_TRADE &&
         e->body_case != HOURGLASS__V1__ENVELOPE__BODY_MD_STATUS;
}

/* Applies the stream rules to a decoded frame. Returns 1 to deliver, 0 to
 * drop, or a send error of a gap-fill request. */
static int classify(hg_client_t *c, const Hourglass__V1__Envelope *e) {
  if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_RETRANSMISSION) {
    const Hourglass__V1__Retransmission *r = e->retransmission;
    bool user = c->retx_user;
    if (!c->retx_running) return 1; /* unasked: just show it */
    c->retx_header = true;
    c->retx_from = r->from_seq;
    c->retx_count = r->count;
    c->retx_left = r->count;
    if ((r->has_reason && r->reason != 0) || r->count == 0) {
      c->retx_running = false;
      if (!user && c->rx_high >= c->rx_next) {
        /* The server cannot resend the gap: skip past it rather than ask forever. */
        c->stats.lost += c->rx_high - c->rx_next + 1;
        c->rx_next = c->rx_high + 1;
        c->rx_high = 0;
      }
      return 1;
    }
    return user ? 1 : 0;
  }
  /* Live frames may interleave with a retransmission: only seqs inside the
   * announced range belong to it (live ones are newer than any resent one). */
  bool in_retx = c->retx_running && c->retx_header && c->retx_left > 0 && is_stream_frame(e) &&
                 e->seq >= c->retx_from && e->seq - c->retx_from < c->retx_count;
  if (in_retx) {
    c->retx_left--;
    bool user = c->retx_user;
    int deliver = user ? 1 : 0;
    if (e->seq == c->rx_next) {
      c->rx_next++;
      deliver = 1;
    } else if (!user) {
      c->stats.duplicates++;
    }
    if (c->retx_left == 0) {
      c->retx_running = false;
      if (c->rx_high < c->rx_next) c->rx_high = 0;
      int rc = fill_gap(c);
      if (rc < 0) return rc;
    }
    return deliver;
  }
  if (!is_stream_frame(e)) return 1;
  if (!c->have_rx) { /* cannot happen after a login; be permissive */
    c->have_rx = true;
    c->rx_next = e->seq;
  }
  if (e->seq < c->rx_next) {
    c->stats.duplicates++;
    return 0;
  }
  if (e->seq == c->rx_next) {
    c->rx_next++;
    if (c->rx_high < c->rx_next) c->rx_high = 0;
    return 1;
  }
  /* Ahead of a gap, or a gap is already being filled: hold back. */
  c->stats.held_back++;
  if (e->seq > c->rx_high) c->rx_high = e->seq;
  int rc = fill_gap(c);
  return rc < 0 ? rc : 0;
}

int hg_client_recv(hg_client_t *c, int timeout_ms, const Hourglass__V1__Envelope **out) {
  if (c->fd < 0) return -ENOTCONN;
  uint64_t deadline = deadline_of(timeout_ms);
  for (;;) {
    Hourglass__V1__Envelope *e = NULL;
    int rc = next_frame(c, &e);
    if (rc < 0) {
      hg_client_close(c);
      return rc;
    }
    if (rc == 1) {
      if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_TERMINATE) {
        /* Deliver it; the server closes next. Stop sending on this socket. */
        c->logged_in = false;
        *out = e;
        return 1;
      }
      rc = c->logged_in ? classify(c, e) : 1;
      if (rc < 0) return rc;
      if (rc == 1) {
        *out = e;
        return 1;
      }
      continue;
    }
    rc = hg_client_tick(c);
    if (rc < 0 && rc != -EAGAIN) {
      hg_client_close(c);
      return rc;
    }
    if (c->tx_len > c->tx_off && !c->corked) {
      rc = write_some(c);
      if (rc < 0) {
        hg_client_close(c);
        return rc;
      }
    }
    rc = read_some(c);
    if (rc < 0) {
      hg_client_close(c);
      return rc;
    }
    if (rc > 0) continue;
    int left = ms_left(deadline);
    if (left == 0) return 0;
    /* Wake for heartbeats even when the caller waits long. */
    if (c->logged_in) {
      int ka = (int)c->session.keepalive_ms;
      if (left < 0 || left > ka) left = ka;
    }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (c->tx_len > c->tx_off) p.events |= POLLOUT;
    if (poll(&p, 1, left) < 0 && errno != EINTR) return -errno;
  }
}

/* ----------------------------------------------------------------- login */

static int set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
  return 0;
}

static int do_login(hg_client_t *c) {
  uint64_t deadline = deadline_of((int)c->cfg.timeout_ms);
  c->rejected = false;
  c->tx_seq = 1;
  c->rx_len = c->rx_off = 0;
  c->tx_len = c->tx_off = 0;
  int one = 1;
  (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* not TCP: harmless */
  uint8_t sid[HG_WIRE_SESSION_ID_LEN];
  if (getrandom(sid, sizeof sid, 0) != (ssize_t)sizeof sid) return errno ? -errno : -EIO;
  uint64_t ts = c->cfg.wall_clock(c->cfg.clock_ctx);
  uint8_t mac[HG_WIRE_MAC_LEN];
  hg_wire_login_mac(c->secret, c->cfg.secret_len, ts, sid, c->cfg.key_id, mac);

  Hourglass__V1__Login m = HOURGLASS__V1__LOGIN__INIT;
  m.key_id = c->cfg.key_id;
  m.session_id.data = sid;
  m.session_id.len = sizeof sid;
  m.timestamp_ns = ts;
  m.hmac.data = mac;
  m.hmac.len = sizeof mac;
  m.has_cancel_on_disconnect = 1;
  m.cancel_on_disconnect = c->cfg.cancel_on_disconnect;
  m.has_keepalive_ms = 1;
  m.keepalive_ms = c->cfg.keepalive_ms;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_LOGIN;
  env.login = &m;
  int rc = enqueue(c, &env);
  hg_wipe(mac, sizeof mac);
  if (rc < 0) return rc;
  rc = hg_client_flush(c, ms_left(deadline));
  if (rc == -EAGAIN) return -ETIMEDOUT;
  if (rc < 0) return rc;

  for (;;) {
    Hourglass__V1__Envelope *e = NULL;
    rc = next_frame(c, &e);
    if (rc < 0) return rc;
    if (rc == 1) {
      switch (e->body_case) {
      case HOURGLASS__V1__ENVELOPE__BODY_LOGIN_ACK: {
        const Hourglass__V1__LoginAck *a = e->login_ack;
        hg_client_session_t *s = &c->session;
        memset(s, 0, sizeof *s);
        memcpy(s->session_id, sid, sizeof sid);
        s->role = a->role;
        s->account = a->account;
        s->firm = a->firm;
        s->keepalive_ms = a->keepalive_ms ? a->keepalive_ms : c->cfg.keepalive_ms;
        s->server_time_ns = a->server_time_ns;
        s->login_next_seq = a->next_seq;
        s->cancel_on_disconnect = a->has_cancel_on_disconnect && a->cancel_on_disconnect;
        s->epoch = a->has_epoch ? a->epoch : 0;
        s->ref_seq_base = a->has_ref_seq_base ? a->ref_seq_base : 0;
        s->restarted = c->epoch != 0 && s->epoch != c->epoch;
        c->epoch = s->epoch;
        c->logged_in = true;
        if (!c->have_rx || a->next_seq < c->rx_next) {
          /* First login, or a server whose stream restarted: start at its head. */
          c->have_rx = true;
          c->rx_next = a->next_seq;
          c->rx_high = 0;
        } else if (a->next_seq > c->rx_next) {
          if (a->next_seq - 1 > c->rx_high) c->rx_high = a->next_seq - 1;
          rc = fill_gap(c);
          if (rc < 0) return rc;
        }
        return 0;
      }
      case HOURGLASS__V1__ENVELOPE__BODY_LOGIN_REJECT:
      case HOURGLASS__V1__ENVELOPE__BODY_TERMINATE: {
        bool term = e->body_case == HOURGLASS__V1__ENVELOPE__BODY_TERMINATE;
        c->rejected = true;
        c->reject_terminated = term;
        c->reject_code = term ? e->terminate->code : e->login_reject->code;
        const char *t = term ? e->terminate->text : e->login_reject->text;
        snprintf(c->reject_text, sizeof c->reject_text, "%s", t ? t : "");
        const char *l = term ? NULL : e->login_reject->leader;
        snprintf(c->reject_leader, sizeof c->reject_leader, "%s", l ? l : "");
        return HG_EAUTH;
      }
      default:
        continue; /* nothing else is expected before the ack; ignore it */
      }
    }
    rc = read_some(c);
    if (rc < 0) return rc;
    if (rc > 0) continue;
    int left = ms_left(deadline);
    if (left == 0) return -ETIMEDOUT;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, left) < 0 && errno != EINTR) return -errno;
  }
}

/* Runs the TLS handshake on the connected socket, offering the last
 * session, verifying the server's certificate and name. */
static int tls_handshake(hg_client_t *c) {
  uint64_t deadline = deadline_of((int)c->cfg.timeout_ms);
  c->ssl = SSL_new(c->tls_ctx);
  BIO *bio = c->ssl != NULL ? BIO_new(bio_method) : NULL;
  if (bio == NULL) return -ENOMEM;
  BIO_set_data(bio, (void *)(intptr_t)c->fd);
  SSL_set_bio(c->ssl, bio, bio); /* ssl owns it */
  unsigned char ip[16];
  bool is_ip = inet_pton(AF_INET, c->server_name, ip) == 1 ||
               inet_pton(AF_INET6, c->server_name, ip) == 1;
  X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
  X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, c->server_name)
                 : X509_VERIFY_PARAM_set1_host(vp, c->server_name, 0) &&
                       SSL_set_tlsext_host_name(c->ssl, c->server_name);
  if (ok != 1) return HG_ETLS;
  if (c->tls_sess != NULL) SSL_set_session(c->ssl, c->tls_sess);
  for (;;) {
    errno = 0;
    int r = SSL_connect(c->ssl);
    if (r == 1) break;
    int e = SSL_get_error(c->ssl, r);
    ERR_clear_error();
    short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (ev == 0) return e == SSL_ERROR_SYSCALL && errno != 0 ? -errno : HG_ETLS;
    int left = ms_left(deadline);
    if (left == 0) return -ETIMEDOUT;
    struct pollfd p = {.fd = c->fd, .events = ev};
    if (poll(&p, 1, left) < 0 && errno != EINTR) return -errno;
  }
  c->stats.tls_handshakes++;
  if (SSL_session_reused(c->ssl)) c->stats.tls_resumed++;
  return 0;
}

int hg_client_login_fd(hg_client_t *c, int fd) {
  hg_client_close(c);
  c->fd = fd;
  int rc = set_nonblocking(fd);
  if (rc == 0 && c->tls_ctx != NULL) rc = tls_handshake(c);
  if (rc == 0) rc = do_login(c);
  if (rc < 0) hg_client_close(c);
  return rc;
}

static int tcp_connect(const hg_client_t *c, int *out) {
  char port[8];
  snprintf(port, sizeof port, "%u", (unsigned)c->cfg.port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  if (getaddrinfo(c->host, port, &hints, &res) != 0 || res == NULL) return HG_EINVAL;
  int rc = -ECONNREFUSED;
  uint64_t deadline = deadline_of((int)c->cfg.timeout_ms);
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      rc = -errno;
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      rc = 0;
    } else if (errno != EINPROGRESS) {
      rc = -errno;
    } else {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      int n;
      do n = poll(&p, 1, ms_left(deadline));
      while (n < 0 && errno == EINTR);
      if (n == 0) {
        rc = -ETIMEDOUT;
      } else {
        int err = 0;
        socklen_t len = sizeof err;
        if (n < 0) err = errno;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
        rc = -err;
      }
    }
    if (rc == 0) {
      *out = fd;
      break;
    }
    close(fd);
  }
  freeaddrinfo(res);
  return rc;
}

static int connect_once(hg_client_t *c) {
  hg_client_close(c);
  c->rejected = false;
  c->reject_leader[0] = '\0';
  int fd = -1;
  int rc = tcp_connect(c, &fd);
  if (rc < 0) return rc;
  return hg_client_login_fd(c, fd);
}

/* "host:port" or "[v6]:port" into the client's host and port. 0 or -1. */
static int set_address(hg_client_t *c, const char *a, size_t len) {
  char buf[256];
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, a, len);
  buf[len] = '\0';
  char *colon = strrchr(buf, ':');
  if (colon == NULL || colon == buf) return -1;
  *colon = '\0';
  char *end;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (*end != '\0' || port == 0 || port > 65535) return -1;
  char *host = buf;
  if (host[0] == '[' && colon[-1] == ']') {
    host++;
    colon[-1] = '\0';
  }
  snprintf(c->host, sizeof c->host, "%s", host);
  c->cfg.port = (uint16_t)port;
  return 0;
}

/* A refusal that names the leader to go to. */
static bool redirected(const hg_client_t *c, int rc) {
  return rc == HG_EAUTH && !c->reject_terminated &&
         c->reject_code == HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_NOT_LEADER &&
         c->reject_leader[0] != '\0';
}

/* A refusal for what the client is, not for where it connected. */
static bool refused(const hg_client_t *c, int rc) {
  return rc == HG_EAUTH && (c->reject_terminated ||
                            c->reject_code != HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_NOT_LEADER);
}

/* Connects to the client's address and follows the leader a follower
 * names (a few hops: leadership may move while we go). */
static int connect_follow(hg_client_t *c) {
  int rc = connect_once(c);
  for (int hop = 0; hop < 3 && redirected(c, rc); hop++) {
    if (set_address(c, c->reject_leader, strlen(c->reject_leader)) != 0) break;
    rc = connect_once(c);
  }
  return rc;
}

int hg_client_connect(hg_client_t *c) {
  int rc = connect_follow(c);
  if (rc == 0 || c->nodes[0] == '\0' || refused(c, rc)) return rc;
  /* This node is down or knows no leader: try the others in turn. */
  for (const char *p = c->nodes; *p != '\0';) {
    size_t n = strcspn(p, ",");
    if (set_address(c, p, n) == 0) {
      rc = connect_follow(c);
      if (rc == 0 || refused(c, rc)) return rc;
    }
    p += n;
    if (*p == ',') p++;
  }
  return rc;
}

const char *hg_client_login_leader(const hg_client_t *c) { return c->reject_leader; }

void hg_client_address(const hg_client_t *c, char *out, size_t cap) {
  if (strchr(c->host, ':') != NULL) snprintf(out, cap, "[%s]:%u", c->host, c->cfg.port);
  else snprintf(out, cap, "%s:%u", c->host, c->cfg.port);
}

int hg_client_logout(hg_client_t *c, int timeout_ms) {
  if (c->fd < 0) return -ENOTCONN;
  Hourglass__V1__Logout m = HOURGLASS__V1__LOGOUT__INIT;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_LOGOUT;
  env.logout = &m;
  int rc = send_env(c, &env);
  uint64_t deadline = deadline_of(timeout_ms);
  if (rc == 0 && c->corked) {
    /* The Logout and everything queued before it must leave now. */
    rc = hg_client_flush(c, timeout_ms);
    if (rc == -EAGAIN) rc = -ETIMEDOUT;
  }
  while (rc == 0) {
    const Hourglass__V1__Envelope *e = NULL;
    int left = ms_left(deadline);
    rc = hg_client_recv(c, left, &e);
    if (rc == 0) {
      rc = -ETIMEDOUT;
      break;
    }
    if (rc < 0) {
      rc = rc == -ECONNRESET ? 0 : rc; /* closed after the Terminate: done */
      break;
    }
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_TERMINATE) {
      rc = 0;
      break;
    }
    rc = 0;
  }
  hg_client_close(c);
  return rc;
}

/* ------------------------------------------------------------------ misc */

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

int hg_client_parse_hex(const char *hex, uint8_t *out, size_t cap) {
  if (hex == NULL) return HG_EINVAL;
  size_t n = strlen(hex);
  if (n == 0 || n % 2 != 0 || n > 128 || n / 2 > cap) return HG_EINVAL;
  for (size_t i = 0; i < n / 2; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return HG_EINVAL;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return (int)(n / 2);
}

/* ------------------------------------------------- operator and quotes */

#define ENV_SEND(c, field, BODY, msg, seq)                    \
  do {                                                        \
    Hourglass__V1__Envelope env_ = HOURGLASS__V1__ENVELOPE__INIT; \
    env_.body_case = HOURGLASS__V1__ENVELOPE__BODY_##BODY;    \
    env_.field = (msg);                                       \
    return hg_client_send((c), &env_, (seq));                 \
  } while (0)

int hg_client_provider_grade(hg_client_t *c, const char *provider, const char *gpu,
                             const char *grade, int32_t effective_day, uint64_t *seq) {
  if (provider == NULL || gpu == NULL || grade == NULL) return HG_EINVAL;
  Hourglass__V1__ProviderGrade m = HOURGLASS__V1__PROVIDER_GRADE__INIT;
  m.provider = (char *)provider;
  m.gpu = (char *)gpu;
  m.grade = (char *)grade;
  m.effective_day = effective_day;
  ENV_SEND(c, set_provider_grade, SET_PROVIDER_GRADE, &m, seq);
}

/* Encoded size of a length-delimited field with a body of n bytes. */
static size_t field_size(size_t n) {
  size_t v = 1;
  for (size_t x = n; x >= 0x80; x >>= 7) v++;
  return 1 + v + n;
}

int hg_client_publish_samples(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                              const hg_index_sample_t *s, size_t n, size_t *taken,
                              uint64_t *seq) {
  if (gpu == NULL || grade == NULL || s == NULL || n == 0 || taken == NULL) return HG_EINVAL;
  size_t cap = n < HG_CLIENT_SAMPLES_MAX ? n : HG_CLIENT_SAMPLES_MAX;
  /* The one allocation outside create: this request's message, freed here. */
  Hourglass__V1__IndexSample *xs = malloc(cap * sizeof *xs);
  Hourglass__V1__IndexSample **xp = malloc(cap * sizeof *xp);
  if (xs == NULL || xp == NULL) {
    free(xs);
    free(xp);
    return -ENOMEM;
  }
  Hourglass__V1__PublishSamples m = HOURGLASS__V1__PUBLISH_SAMPLES__INIT;
  m.gpu = (char *)gpu;
  m.grade = (char *)grade;
  m.day = day;
  m.samples = xp;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_PUBLISH_SAMPLES;
  env.publish_samples = &m;
  /* Room for the envelope's seq and the message header besides the samples. */
  size_t budget = c->cfg.max_frame - 64, used = hourglass__v1__publish_samples__get_packed_size(&m);
  size_t k = 0;
  for (; k < cap; k++) {
    Hourglass__V1__IndexSample *x = &xs[k];
    hourglass__v1__index_sample__init(x);
    x->ts = s[k].ts;
    x->provider = (char *)s[k].provider;
    x->region = (char *)s[k].region;
    x->gpu = (char *)s[k].gpu;
    x->grade = (char *)s[k].grade;
    x->term_days = s[k].term_days;
    x->price = s[k].price;
    x->volume = s[k].volume;
    x->kind = s[k].kind == HG_INDEX_QUOTE ? HOURGLASS__V1__SAMPLE_KIND__SAMPLE_QUOTE
                                          : HOURGLASS__V1__SAMPLE_KIND__SAMPLE_TRADE;
    size_t add = field_size(hourglass__v1__index_sample__get_packed_size(x));
    if (used + add > budget) break;
    used += add;
    xp[k] = x;
  }
  int rc = HG_EINVAL;
  if (k > 0) {
    m.n_samples = k;
    rc = hg_client_send(c, &env, seq);
    if (rc == 0) *taken = k;
  }
  free(xs);
  free(xp);
  return rc;
}

static int index_day(hg_client_t *c, uint32_t body, const char *gpu, const char *grade,
                     int32_t day, uint64_t *seq) {
  if (gpu == NULL || grade == NULL) return HG_EINVAL;
  Hourglass__V1__IndexDay m = HOURGLASS__V1__INDEX_DAY__INIT;
  m.gpu = (char *)gpu;
  m.grade = (char *)grade;
  m.day = day;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = (Hourglass__V1__Envelope__BodyCase)body;
  /* The three IndexDay bodies share the oneof's storage. */
  env.discard_samples = &m;
  return hg_client_send(c, &env, seq);
}

int hg_client_discard_samples(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                              uint64_t *seq) {
  return index_day(c, HOURGLASS__V1__ENVELOPE__BODY_DISCARD_SAMPLES, gpu, grade, day, seq);
}

int hg_client_compute_fixing(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                             uint64_t *seq) {
  return index_day(c, HOURGLASS__V1__ENVELOPE__BODY_COMPUTE_FIXING, gpu, grade, day, seq);
}

int hg_client_finalize_fixing(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                              uint64_t *seq) {
  return index_day(c, HOURGLASS__V1__ENVELOPE__BODY_FINALIZE_FIXING, gpu, grade, day, seq);
}

int hg_client_publish_fixing(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                             int64_t value, const char *source, uint64_t *seq) {
  if (gpu == NULL || grade == NULL || source == NULL) return HG_EINVAL;
  Hourglass__V1__PublishFixing m = HOURGLASS__V1__PUBLISH_FIXING__INIT;
  m.gpu = (char *)gpu;
  m.grade = (char *)grade;
  m.day = day;
  m.value = value;
  m.source = (char *)source;
  ENV_SEND(c, publish_fixing, PUBLISH_FIXING, &m, seq);
}

int hg_client_daily_settlement(hg_client_t *c, int32_t day, uint64_t *seq) {
  Hourglass__V1__DailySettlement m = HOURGLASS__V1__DAILY_SETTLEMENT__INIT;
  m.day = day;
  ENV_SEND(c, daily_settlement, DAILY_SETTLEMENT, &m, seq);
}

int hg_client_mark(hg_client_t *c, uint64_t *seq) {
  Hourglass__V1__Mark m = HOURGLASS__V1__MARK__INIT;
  ENV_SEND(c, mark, MARK, &m, seq);
}

int hg_client_fund_deposit(hg_client_t *c, int64_t amount, uint64_t *seq) {
  Hourglass__V1__FundDeposit m = HOURGLASS__V1__FUND_DEPOSIT__INIT;
  m.amount = amount;
  ENV_SEND(c, fund_deposit, FUND_DEPOSIT, &m, seq);
}

int hg_client_expire(hg_client_t *c, uint32_t instrument_id, uint64_t *seq) {
  Hourglass__V1__Expire m = HOURGLASS__V1__EXPIRE__INIT;
  m.instrument_id = instrument_id;
  ENV_SEND(c, expire, EXPIRE, &m, seq);
}

int hg_client_list_curve(hg_client_t *c, const char *gpu, const char *grade, uint32_t year,
                         uint32_t month, uint32_t first_id, uint32_t max_orders,
                         uint32_t max_accounts, int64_t ref_price, uint64_t *seq) {
  if (gpu == NULL || grade == NULL) return HG_EINVAL;
  Hourglass__V1__ListCurve m = HOURGLASS__V1__LIST_CURVE__INIT;
  m.gpu = (char *)gpu;
  m.grade = (char *)grade;
  m.year = year;
  m.month = month;
  m.first_instrument_id = first_id;
  m.max_orders = max_orders;
  m.max_accounts = max_accounts;
  m.has_ref_price = ref_price != 0;
  m.ref_price = ref_price;
  ENV_SEND(c, list_curve, LIST_CURVE, &m, seq);
}

int hg_client_halt(hg_client_t *c, uint32_t instrument_id, bool resume, uint64_t *seq) {
  if (resume) {
    Hourglass__V1__Resume m = HOURGLASS__V1__RESUME__INIT;
    m.instrument_id = instrument_id;
    ENV_SEND(c, resume, RESUME, &m, seq);
  }
  Hourglass__V1__Halt m = HOURGLASS__V1__HALT__INIT;
  m.instrument_id = instrument_id;
  ENV_SEND(c, halt, HALT, &m, seq);
}

int hg_client_delist(hg_client_t *c, uint32_t instrument_id, uint64_t *seq) {
  Hourglass__V1__DelistInstrument m = HOURGLASS__V1__DELIST_INSTRUMENT__INIT;
  m.instrument_id = instrument_id;
  ENV_SEND(c, delist_instrument, DELIST_INSTRUMENT, &m, seq);
}

int hg_client_end_of_session(hg_client_t *c, uint32_t session_date, uint64_t *seq) {
  Hourglass__V1__EndOfSession m = HOURGLASS__V1__END_OF_SESSION__INIT;
  m.has_session_date = session_date != 0;
  m.session_date = session_date;
  ENV_SEND(c, end_of_session, END_OF_SESSION, &m, seq);
}

int hg_client_statement(hg_client_t *c, uint32_t account, uint32_t instrument_id,
                        uint64_t from_index, uint64_t *seq) {
  Hourglass__V1__StatementRequest m = HOURGLASS__V1__STATEMENT_REQUEST__INIT;
  m.has_account = account != 0;
  m.account = account;
  m.has_instrument_id = instrument_id != 0;
  m.instrument_id = instrument_id;
  m.has_from_index = from_index != 0;
  m.from_index = from_index;
  ENV_SEND(c, statement_request, STATEMENT_REQUEST, &m, seq);
}

int hg_client_open_orders(hg_client_t *c, uint32_t account, uint32_t instrument_id,
                          uint32_t from_account, uint64_t from_order_id, uint32_t limit,
                          uint64_t *seq) {
  Hourglass__V1__OpenOrdersRequest m = HOURGLASS__V1__OPEN_ORDERS_REQUEST__INIT;
  m.has_account = account != 0;
  m.account = account;
  m.has_instrument_id = instrument_id != 0;
  m.instrument_id = instrument_id;
  m.has_from_account = from_account != 0;
  m.from_account = from_account;
  m.has_from_order_id = from_order_id != 0;
  m.from_order_id = from_order_id;
  m.has_limit = limit != 0;
  m.limit = limit;
  ENV_SEND(c, open_orders_request, OPEN_ORDERS_REQUEST, &m, seq);
}

int hg_client_add_account(hg_client_t *c, uint32_t account, uint32_t firm, uint64_t *seq) {
  Hourglass__V1__AddAccount m = HOURGLASS__V1__ADD_ACCOUNT__INIT;
  m.account = account;
  m.firm = firm;
  ENV_SEND(c, add_account, ADD_ACCOUNT, &m, seq);
}

int hg_client_add_api_key(hg_client_t *c, uint64_t key_id, uint32_t role, uint32_t account,
                          uint32_t firm, const uint8_t *secret, size_t len, uint64_t *seq) {
  if (secret == NULL || len < HG_WIRE_SECRET_MIN || len > HG_WIRE_SECRET_MAX) return HG_EINVAL;
  Hourglass__V1__AddApiKey m = HOURGLASS__V1__ADD_API_KEY__INIT;
  m.key_id = key_id;
  m.role = role;
  m.has_account = account != 0;
  m.account = account;
  m.has_firm = firm != 0;
  m.firm = firm;
  m.secret.data = (uint8_t *)secret;
  m.secret.len = len;
  ENV_SEND(c, add_api_key, ADD_API_KEY, &m, seq);
}

int hg_client_cluster(hg_client_t *c, uint32_t op, uint32_t id, const char *raft_address,
                      const char *client_address, uint64_t *seq) {
  Hourglass__V1__ClusterRequest m = HOURGLASS__V1__CLUSTER_REQUEST__INIT;
  m.op = op;
  m.has_id = id != 0;
  m.id = id;
  m.raft_address = (char *)raft_address;
  m.client_address = (char *)client_address;
  ENV_SEND(c, cluster_request, CLUSTER_REQUEST, &m, seq);
}

int hg_client_cash(hg_client_t *c, uint32_t account, int64_t amount, bool withdraw,
                   uint64_t *seq) {
  if (withdraw) {
    Hourglass__V1__Withdraw m = HOURGLASS__V1__WITHDRAW__INIT;
    m.account = account;
    m.amount = amount;
    ENV_SEND(c, withdraw, WITHDRAW, &m, seq);
  }
  Hourglass__V1__Deposit m = HOURGLASS__V1__DEPOSIT__INIT;
  m.account = account;
  m.amount = amount;
  ENV_SEND(c, deposit, DEPOSIT, &m, seq);
}

int hg_client_mass_quote(hg_client_t *c, uint32_t quote_group,
                         const Hourglass__V1__QuoteEntry *const *entries, size_t n,
                         int64_t mmp_qty, uint32_t mmp_window_ms, uint64_t *seq) {
  if (entries == NULL || n == 0) return HG_EINVAL;
  Hourglass__V1__MassQuote m = HOURGLASS__V1__MASS_QUOTE__INIT;
  m.quote_group = quote_group;
  m.n_entries = n;
  m.entries = (Hourglass__V1__QuoteEntry **)entries;
  m.has_mmp_qty = mmp_qty != 0;
  m.mmp_qty = mmp_qty;
  m.has_mmp_window_ms = mmp_window_ms != 0;
  m.mmp_window_ms = mmp_window_ms;
  ENV_SEND(c, mass_quote, MASS_QUOTE, &m, seq);
}

int hg_client_quote_group_reset(hg_client_t *c, uint32_t quote_group, uint64_t *seq) {
  Hourglass__V1__QuoteGroupReset m = HOURGLASS__V1__QUOTE_GROUP_RESET__INIT;
  m.quote_group = quote_group;
  ENV_SEND(c, quote_group_reset, QUOTE_GROUP_RESET, &m, seq);
}

int hg_client_drop_copy(hg_client_t *c, uint64_t *seq) {
  Hourglass__V1__DropCopySubscribe m = HOURGLASS__V1__DROP_COPY_SUBSCRIBE__INIT;
  ENV_SEND(c, drop_copy_subscribe, DROP_COPY_SUBSCRIBE, &m, seq);
}
