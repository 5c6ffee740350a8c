/*
 * gw_client.c - the blocking wire-protocol test client of gw_client.h:
 * frames built with hourglass/wire.h, sent over loopback TCP, and read back
 * with a poll-bounded receive.
 */
#include "gw_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "test_keys.h"

static SSL_CTX *tls_ctx; /* gt_use_tls */

int gt_use_tls(const char *ca_file) {
  SSL_CTX_free(tls_ctx);
  tls_ctx = NULL;
  if (ca_file == NULL) return 0;
  tls_ctx = SSL_CTX_new(TLS_client_method());
  if (tls_ctx == NULL || SSL_CTX_load_verify_locations(tls_ctx, ca_file, NULL) != 1) {
    SSL_CTX_free(tls_ctx);
    tls_ctx = NULL;
    return -1;
  }
  SSL_CTX_set_min_proto_version(tls_ctx, TLS1_3_VERSION);
  SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_PEER, NULL);
  return 0;
}

/* The handshake on the blocking socket, bounded by a 5 s receive timeout
 * (which also bounds every later SSL_read). */
static int tls_start(gt_client_t *c) {
  struct timeval tv = {5, 0};
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  c->ssl = SSL_new(tls_ctx);
  if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1 ||
      SSL_set1_host(c->ssl, "127.0.0.1") != 1 || SSL_connect(c->ssl) != 1) {
    ERR_clear_error();
    return -ECONNREFUSED;
  }
  return 0;
}

int gt_connect(gt_client_t *c, uint16_t port) {
  memset(c, 0, sizeof *c);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (c->fd < 0) return -errno;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) return -errno;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (tls_ctx != NULL && tls_start(c) != 0) return -ECONNREFUSED;
  c->in_cap = 4u << 20;
  c->in = malloc(c->in_cap);
  size_t acap = HG_WIRE_ARENA_SIZE(HG_WIRE_DEFAULT_MAX_FRAME);
  c->arena_buf = malloc(acap);
  hg_wire_arena_init(&c->arena, c->arena_buf, acap);
  return 0;
}

void gt_close(gt_client_t *c) {
  SSL_free(c->ssl);
  c->ssl = NULL;
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  free(c->in);
  free(c->arena_buf);
  c->in = NULL;
  c->arena_buf = NULL;
}

int gt_send_raw(gt_client_t *c, const void *b, size_t n) {
  const uint8_t *p = b;
  if (c->ssl != NULL) {
    size_t w = 0;
    if (n > 0 && SSL_write_ex(c->ssl, p, n, &w) != 1) {
      ERR_clear_error();
      return -EPIPE;
    }
    return 0;
  }
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int gt_send(gt_client_t *c, env_t *env) {
  uint32_t b = (uint32_t)env->body_case;
  bool app = (b >= 30 && b <= 41) || (b >= 50 && b <= 79);
  if (app && !env->has_seq) {
    env->has_seq = 1;
    env->seq = ++c->seq;
  }
  static uint8_t buf[1 << 17];
  size_t len = 0;
  int rc = hg_wire_encode(env, buf, sizeof buf, &len);
  if (rc != 0) return rc;
  return gt_send_raw(c, buf, len);
}

env_t *gt_recv(gt_client_t *c, int timeout_ms) {
  for (;;) {
    hg_wire_frame_t f;
    const uint8_t *p = c->in + c->in_off;
    size_t avail = c->in_len - c->in_off;
    int rc = hg_wire_frame_parse(p, avail, HG_WIRE_DEFAULT_MAX_FRAME, &f);
    if (rc == 0 && avail >= (size_t)f.hdr_len + f.body_len) {
      env_t *e = NULL;
      int d = hg_wire_decode(&c->arena, p + f.hdr_len, f.body_len, &e);
      c->last_off = c->in_off;
      c->last_len = f.hdr_len + f.body_len;
      c->in_off += f.hdr_len + f.body_len;
      return d == 0 ? e : NULL;
    }
    if (rc != 0 && rc != -EAGAIN) return NULL;
    /* Compact only when the buffer runs out of room (protobuf-c copied
     * everything it kept, so moving bytes does not disturb the last
     * envelope). */
    if (c->in_cap - c->in_len < 65536) {
      memmove(c->in, c->in + c->in_off, avail);
      c->in_len = avail;
      c->in_off = 0;
    }
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    if (c->ssl == NULL || SSL_pending(c->ssl) == 0) {
      int pr = poll(&pfd, 1, timeout_ms);
      if (pr <= 0) return NULL;
    }
    ssize_t r;
    if (c->ssl != NULL) {
      size_t got = 0;
      r = SSL_read_ex(c->ssl, c->in + c->in_len, c->in_cap - c->in_len, &got) == 1 ? (ssize_t)got : -1;
      ERR_clear_error();
    } else {
      r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    }
    if (r <= 0) {
      c->eof = 1;
      return NULL;
    }
    c->in_len += (size_t)r;
  }
}

env_t *gt_expect(gt_client_t *c, uint32_t want, int timeout_ms) {
  for (;;) {
    env_t *e = gt_recv(c, timeout_ms);
    if (e == NULL) return NULL;
    uint32_t b = (uint32_t)e->body_case;
    if (b == want) return e;
    if (b == BODY(HEARTBEAT) || b == BODY(WARNING) || (b >= 87 && b <= 90)) continue;
    fprintf(stderr, "gt_expect: wanted body %u, got %u\n", want, b);
    return NULL;
  }
}

bool gt_wait_closed(gt_client_t *c, int timeout_ms) {
  while (!c->eof) {
    if (gt_recv(c, timeout_ms) == NULL && !c->eof) return false;
  }
  return true;
}

static void new_sid(gt_client_t *c, uint64_t key_id) {
  static uint32_t counter;
  counter++;
  memset(c->sid, 0, sizeof c->sid);
  memcpy(c->sid, &key_id, 8);
  memcpy(c->sid + 8, &counter, 4);
  uint32_t pid = (uint32_t)getpid();
  memcpy(c->sid + 12, &pid, 4);
}

int gt_send_login(gt_client_t *c, uint64_t key_id, const uint8_t *secret, uint64_t ts, int cod,
                  uint32_t keepalive_ms, int reuse_sid) {
  if (!reuse_sid) new_sid(c, key_id);
  if (ts == 0) ts = gt_now_ns();
  uint8_t mac[32];
  hg_wire_login_mac(secret, 32, ts, c->sid, key_id, mac);
  Hourglass__V1__Login lg = HOURGLASS__V1__LOGIN__INIT;
  lg.key_id = key_id;
  lg.session_id.data = c->sid;
  lg.session_id.len = 16;
  lg.timestamp_ns = ts;
  lg.hmac.data = mac;
  lg.hmac.len = 32;
  lg.has_cancel_on_disconnect = cod != 0;
  lg.cancel_on_disconnect = cod != 0;
  if (keepalive_ms != 0) {
    lg.has_keepalive_ms = 1;
    lg.keepalive_ms = keepalive_ms;
  }
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(LOGIN);
  e.login = &lg;
  c->key_id = key_id;
  return gt_send(c, &e);
}

uint64_t gt_login(gt_client_t *c, uint16_t port, uint64_t key_id, int cod, uint32_t keepalive_ms) {
  if (keepalive_ms == 0) keepalive_ms = 30000;
  if (gt_connect(c, port) != 0) return 0;
  uint8_t sec[32];
  ts_key_secret(key_id, sec);
  if (gt_send_login(c, key_id, sec, 0, cod, keepalive_ms, 0) != 0) return 0;
  env_t *e = gt_expect(c, BODY(LOGIN_ACK), 2000);
  return e != NULL ? e->login_ack->next_seq : 0;
}

int gt_new_order(gt_client_t *c, uint32_t instr, uint64_t clordid, int side, int64_t price,
                 int64_t qty, int tif) {
  Hourglass__V1__NewOrderRequest no = HOURGLASS__V1__NEW_ORDER_REQUEST__INIT;
  no.instrument_id = instr;
  no.client_order_id = clordid;
  no.side = (Hourglass__V1__Side)side;
  no.type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT;
  no.tif = (Hourglass__V1__TimeInForce)tif;
  no.has_price = 1;
  no.price = price;
  no.qty = qty;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(NEW_ORDER);
  e.new_order = &no;
  return gt_send(c, &e);
}

int gt_cancel(gt_client_t *c, uint32_t instr, uint64_t oid) {
  Hourglass__V1__CancelRequest r = HOURGLASS__V1__CANCEL_REQUEST__INIT;
  r.instrument_id = instr;
  r.order_id = oid;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(CANCEL);
  e.cancel = &r;
  return gt_send(c, &e);
}

int gt_replace(gt_client_t *c, uint32_t instr, uint64_t oid, int64_t px, int64_t qty) {
  Hourglass__V1__ReplaceRequest r = HOURGLASS__V1__REPLACE_REQUEST__INIT;
  r.instrument_id = instr;
  r.order_id = oid;
  r.new_price = px;
  r.new_qty = qty;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(REPLACE);
  e.replace = &r;
  return gt_send(c, &e);
}

int gt_status(gt_client_t *c, uint32_t instr, uint64_t oid) {
  Hourglass__V1__OrderStatusRequest r = HOURGLASS__V1__ORDER_STATUS_REQUEST__INIT;
  r.instrument_id = instr;
  r.order_id = oid;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(ORDER_STATUS_REQUEST);
  e.order_status_request = &r;
  return gt_send(c, &e);
}

int gt_retransmit(gt_client_t *c, uint64_t from, uint32_t count) {
  Hourglass__V1__RetransmitRequest r = HOURGLASS__V1__RETRANSMIT_REQUEST__INIT;
  r.from_seq = from;
  r.count = count;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(RETRANSMIT_REQUEST);
  e.retransmit_request = &r;
  return gt_send(c, &e);
}

int gt_list(gt_client_t *c, uint32_t id, const char *sym) {
  Hourglass__V1__ListInstrument l = HOURGLASS__V1__LIST_INSTRUMENT__INIT;
  l.instrument_id = id;
  l.symbol = (char *)sym;
  l.tick_size = 1000;
  l.contract_unit = 1000;
  l.min_price = 1;
  l.max_price = 100000;
  l.max_order_qty = 1000000;
  l.max_orders = 4096;
  l.max_accounts = 64;
  l.has_ref_price = 1;
  l.ref_price = 500; /* a first settlement price: the clearing needs a reference */
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(LIST_INSTRUMENT);
  e.list_instrument = &l;
  return gt_send(c, &e);
}

int gt_add_account(gt_client_t *c, uint32_t account, uint32_t firm) {
  Hourglass__V1__AddAccount a = HOURGLASS__V1__ADD_ACCOUNT__INIT;
  a.account = account;
  a.firm = firm;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(ADD_ACCOUNT);
  e.add_account = &a;
  return gt_send(c, &e);
}

int gt_response_reason(gt_client_t *c) {
  env_t *e = gt_expect(c, BODY(RESPONSE), 3000);
  if (e == NULL) return -1;
  if (e->response->ref_seq != c->seq) return -2;
  return (int)e->response->reason;
}

int gt_setup_market(const ts_server_t *s, uint64_t op_key, uint32_t n_instr,
                    const uint32_t *accounts, const uint32_t *firms, size_t n) {
  gt_client_t op;
  if (gt_login(&op, s->port, op_key, 0, 0) == 0) return -1;
  int bad = 0;
  for (uint32_t i = 1; i <= n_instr; i++) {
    char sym[32];
    snprintf(sym, sizeof sym, "B200.A.2027-%02u", i);
    gt_list(&op, i, sym);
    int r = gt_response_reason(&op);
    if (r != 0) fprintf(stderr, "gt_setup_market: listing %u: %d\n", i, r);
    bad |= r != 0;
  }
  for (size_t i = 0; i < n; i++) {
    gt_add_account(&op, accounts[i], firms[i]);
    int r = gt_response_reason(&op);
    if (r != 0) fprintf(stderr, "gt_setup_market: account %u: %d\n", accounts[i], r);
    bad |= r != 0;
  }
  gt_close(&op);
  return bad ? -1 : 0;
}

uint64_t gt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
