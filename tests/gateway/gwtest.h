/*
 * gwtest.h - shared by the gateway integration tests: a pipeline and a
 * gateway on temporary directories, and a small blocking test client that
 * speaks the wire protocol over loopback TCP through hourglass/wire.h.
 */
#ifndef HOURGLASS_TESTS_GWTEST_H
#define HOURGLASS_TESTS_GWTEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/error.h"
#include "hourglass/gateway.h"
#include "hourglass/wire.h"
#include "pipeline_util.h"

#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x
#define TERMC(x) HOURGLASS__V1__TERMINATE_CODE__TERM_##x
#define LREJ(x) HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_##x
#define REJ(x) HOURGLASS__V1__REJECT_REASON__REJ_##x
#define EXEC(x) HOURGLASS__V1__EXEC_TYPE__EXEC_##x

typedef Hourglass__V1__Envelope env_t;

static inline uint64_t gt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ the server */

typedef struct gt_server {
  char dir[64];
  char keys[128];
  util_log_t plog;
  hg_pipeline_t *p;
  hg_gateway_t *gw;
  uint16_t port;
} gt_server_t;

static inline void gt_quiet_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  if (getenv("GT_VERBOSE") != NULL) fprintf(stderr, "[gw %d] %s\n", level, msg);
}

/* Opens the pipeline on s->dir and a gateway on s->keys (both existing). */
static inline int gt_open(gt_server_t *s, int unsafe, void (*tweak)(hg_gateway_config_t *cfg),
                          void (*keys)(gt_server_t *s)) {
  hg_gateway_config_t gc;
  hg_gateway_config_init(&gc);
  gc.key_dir = s->keys;
  gc.max_sessions = 64;
  gc.max_unauthenticated = 16;
  gc.max_orders = 1u << 14;
  gc.max_accounts = 256;
  gc.max_positions = 4096;
  gc.pending_capacity = 4096;
  gc.out_hard_cap = 1u << 20;
  gc.out_high_water = 128u << 10;
  gc.retransmit_bytes = 64u << 10;
  gc.retransmit_frames = 1024;
  gc.log = gt_quiet_log;
  if (tweak != NULL) tweak(&gc);
  int rc = hg_gateway_create(&gc, &s->gw);
  if (rc != 0) return rc;
  hg_pipeline_config_t pc;
  util_config(&pc, s->dir, &s->plog);
  pc.exchange.clearing = util_no_risk();
  pc.durability = unsafe ? HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE : HG_DURABILITY_DURABLE;
  pc.out_notify = hg_gateway_notify;
  pc.out_notify_ctx = s->gw;
  rc = hg_pipeline_open(&pc, &s->p);
  if (rc == 0) rc = hg_gateway_attach(s->gw, s->p);
  if (rc == 0 && keys != NULL) keys(s);
  if (rc == 0) rc = hg_pipeline_start(s->p);
  if (rc == 0) rc = hg_gateway_start(s->gw);
  s->port = hg_gateway_port(s->gw);
  return rc;
}

/* Starts a pipeline (durable unless unsafe) and a gateway on fresh
 * directories; tweak lets a test change the gateway config before create,
 * keys adds keys before start. */
static inline int gt_start(gt_server_t *s, int unsafe, void (*tweak)(hg_gateway_config_t *cfg),
                           void (*keys)(gt_server_t *s)) {
  memset(s, 0, sizeof *s);
  if (util_tmpdir(s->dir, "gw") == NULL) return -errno;
  snprintf(s->keys, sizeof s->keys, "%s/keys", s->dir);
  if (mkdir(s->keys, 0700) != 0) return -errno;
  return gt_open(s, unsafe, tweak, keys);
}

/* Stops the gateway and the pipeline, keeping the directories. */
static inline void gt_shutdown(gt_server_t *s) {
  hg_gateway_stop(s->gw);
  if (s->p != NULL) {
    hg_pipeline_stop(s->p);
    hg_pipeline_close(s->p);
  }
  hg_gateway_destroy(s->gw);
  s->p = NULL;
  s->gw = NULL;
}

static inline void gt_stop(gt_server_t *s) {
  hg_gateway_stop(s->gw);
  if (s->p != NULL) {
    hg_pipeline_stop(s->p);
    hg_pipeline_close(s->p);
  }
  hg_gateway_destroy(s->gw);
  util_rm_rf(s->dir);
}

static inline int gt_add_key(gt_server_t *s, uint64_t id, uint32_t role, uint32_t account,
                             uint32_t firm) {
  uint8_t sec[32];
  for (int i = 0; i < 32; i++) sec[i] = (uint8_t)(id * 31 + (uint64_t)i);
  hg_gateway_key_t k = {.key_id = id, .role = role, .account = account, .firm = firm,
                        .secret = sec, .secret_len = 32};
  return hg_gateway_add_key(s->gw, &k, 0);
}

/* ------------------------------------------------------------ the client */

typedef struct gt_client {
  int fd;
  uint64_t seq;          /* last client seq sent */
  uint64_t key_id;
  uint8_t *in;
  size_t in_len;
  size_t in_off;          /* consumed bytes at the front of in */
  size_t in_cap;
  uint8_t *arena_buf;
  hg_wire_arena_t arena;
  uint8_t sid[16];
  uint32_t sid_counter;
  int eof;
} gt_client_t;

static inline int gt_connect(gt_client_t *c, uint16_t port) {
  memset(c, 0, sizeof *c);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (c->fd < 0) return -errno;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) return -errno;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->in_cap = 4u << 20;
  c->in = malloc(c->in_cap);
  size_t acap = HG_WIRE_ARENA_SIZE(HG_WIRE_DEFAULT_MAX_FRAME);
  c->arena_buf = malloc(acap);
  hg_wire_arena_init(&c->arena, c->arena_buf, acap);
  return 0;
}

static inline void gt_close(gt_client_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  free(c->in);
  free(c->arena_buf);
  c->in = NULL;
  c->arena_buf = NULL;
}

static inline int gt_send_raw(gt_client_t *c, const void *b, size_t n) {
  const uint8_t *p = b;
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

/* Sends env; application messages get the next seq (unless has_seq set). */
static inline int gt_send(gt_client_t *c, env_t *env) {
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

/* Next frame within timeout_ms; NULL on timeout or EOF (c->eof set). The
 * envelope is valid until the next gt_recv. */
static inline env_t *gt_recv(gt_client_t *c, int timeout_ms) {
  for (;;) {
    hg_wire_frame_t f;
    const uint8_t *p = c->in + c->in_off;
    size_t avail = c->in_len - c->in_off;
    int rc = hg_wire_frame_parse(p, avail, HG_WIRE_DEFAULT_MAX_FRAME, &f);
    if (rc == 0 && avail >= (size_t)f.hdr_len + f.body_len) {
      env_t *e = NULL;
      int d = hg_wire_decode(&c->arena, p + f.hdr_len, f.body_len, &e);
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
    int pr = poll(&pfd, 1, timeout_ms);
    if (pr <= 0) return NULL;
    ssize_t r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (r <= 0) {
      c->eof = 1;
      return NULL;
    }
    c->in_len += (size_t)r;
  }
}

/* Next frame of body case `want`, skipping heartbeats, warnings and market
 * data (unless wanted). */
static inline env_t *gt_expect(gt_client_t *c, uint32_t want, int timeout_ms) {
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

/* Waits until the server closes the connection. */
static inline bool gt_wait_closed(gt_client_t *c, int timeout_ms) {
  while (!c->eof) {
    if (gt_recv(c, timeout_ms) == NULL && !c->eof) return false;
  }
  return true;
}

static inline void gt_secret(uint64_t id, uint8_t sec[32]) {
  for (int i = 0; i < 32; i++) sec[i] = (uint8_t)(id * 31 + (uint64_t)i);
}

static inline void gt_new_sid(gt_client_t *c, uint64_t key_id) {
  static uint32_t counter;
  counter++;
  memset(c->sid, 0, sizeof c->sid);
  memcpy(c->sid, &key_id, 8);
  memcpy(c->sid + 8, &counter, 4);
  uint32_t pid = (uint32_t)getpid();
  memcpy(c->sid + 12, &pid, 4);
}

/* Sends a Login (fresh session id unless reuse) with timestamp ts (0: now). */
static inline int gt_send_login(gt_client_t *c, uint64_t key_id, const uint8_t *secret,
                                uint64_t ts, int cod, uint32_t keepalive_ms, int reuse_sid) {
  if (!reuse_sid) gt_new_sid(c, key_id);
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

/* Connects and logs in; returns the LoginAck's next_seq or 0 on failure.
 * keepalive_ms 0 means 30 s: tests that are not about heartbeats must not
 * depend on how fast a loaded (sanitized) machine runs them. */
static inline uint64_t gt_login(gt_client_t *c, uint16_t port, uint64_t key_id, int cod,
                                uint32_t keepalive_ms) {
  if (keepalive_ms == 0) keepalive_ms = 30000;
  if (gt_connect(c, port) != 0) return 0;
  uint8_t sec[32];
  gt_secret(key_id, sec);
  if (gt_send_login(c, key_id, sec, 0, cod, keepalive_ms, 0) != 0) return 0;
  env_t *e = gt_expect(c, BODY(LOGIN_ACK), 2000);
  return e != NULL ? e->login_ack->next_seq : 0;
}

/* ------------------------------------------------------------- requests */

static inline int gt_new_order(gt_client_t *c, uint32_t instr, uint64_t clordid, int side,
                               int64_t price, int64_t qty, int tif) {
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

static inline int gt_cancel(gt_client_t *c, uint32_t instr, uint64_t oid) {
  Hourglass__V1__CancelRequest r = HOURGLASS__V1__CANCEL_REQUEST__INIT;
  r.instrument_id = instr;
  r.order_id = oid;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(CANCEL);
  e.cancel = &r;
  return gt_send(c, &e);
}

static inline int gt_replace(gt_client_t *c, uint32_t instr, uint64_t oid, int64_t px,
                             int64_t qty) {
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

static inline int gt_status(gt_client_t *c, uint32_t instr, uint64_t oid) {
  Hourglass__V1__OrderStatusRequest r = HOURGLASS__V1__ORDER_STATUS_REQUEST__INIT;
  r.instrument_id = instr;
  r.order_id = oid;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(ORDER_STATUS_REQUEST);
  e.order_status_request = &r;
  return gt_send(c, &e);
}

/* Operator: list an instrument with a wide range and no band. */
static inline int gt_list(gt_client_t *c, uint32_t id, const char *sym) {
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

static inline int gt_add_account(gt_client_t *c, uint32_t account, uint32_t firm) {
  Hourglass__V1__AddAccount a = HOURGLASS__V1__ADD_ACCOUNT__INIT;
  a.account = account;
  a.firm = firm;
  env_t e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = BODY(ADD_ACCOUNT);
  e.add_account = &a;
  return gt_send(c, &e);
}

/* Sends a request and returns its Response's reason (-1: none arrived). */
static inline int gt_response_reason(gt_client_t *c) {
  env_t *e = gt_expect(c, BODY(RESPONSE), 3000);
  if (e == NULL) return -1;
  if (e->response->ref_seq != c->seq) return -2;
  return (int)e->response->reason;
}

/* Operator session setting up instruments 1..n_instr and accounts. */
static inline int gt_setup_market(gt_server_t *s, uint64_t op_key, uint32_t n_instr,
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

#endif /* HOURGLASS_TESTS_GWTEST_H */
