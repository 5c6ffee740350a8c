/*
 * test_client.c - the client library against a scripted server on a
 * socketpair: the login frame and its proof, login refusal, every request
 * builder and its seq, framing split across reads, a malformed frame,
 * duplicate and gap handling with retransmission, recovery after a
 * reconnect, heartbeats, corked (batched) sends, and the hex parser.
 *
 * The socketpair buffers, so the "server" writes its replies (LoginAck ...)
 * before the client call that waits for them, then reads what the client
 * sent and checks it. Everything runs on one thread.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "hourglass/client.h"
#include "hourglass/error.h"
#include "hourglass/hmac.h"

#define KEY_ID 42u
#define CLOCK_NS 1700000000123456789ull

static uint8_t SECRET[32];
static uint8_t srv_arena_buf[HG_WIRE_ARENA_SIZE(HG_WIRE_DEFAULT_MAX_FRAME)];
static hg_wire_arena_t srv_arena;
static uint8_t srv_rx[1 << 16];
static size_t srv_rx_len;

static uint64_t fixed_clock(void *ctx) {
  (void)ctx;
  return CLOCK_NS;
}

typedef struct fixture {
  hg_client_t *c;
  int srv; /* the server's end */
} fixture_t;

static void srv_write(int fd, const uint8_t *b, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    assert_true(w > 0);
    b += w;
    n -= (size_t)w;
  }
}

static void srv_send(int fd, const Hourglass__V1__Envelope *env) {
  uint8_t buf[4096];
  size_t len = 0;
  assert_int_equal(hg_wire_encode(env, buf, sizeof buf, &len), 0);
  srv_write(fd, buf, len);
}

/* Reads the next frame the client sent; fails the test after 1 s. */
static Hourglass__V1__Envelope *srv_recv(int fd) {
  for (;;) {
    hg_wire_frame_t f;
    int rc = hg_wire_frame_parse(srv_rx, srv_rx_len, HG_WIRE_DEFAULT_MAX_FRAME, &f);
    if (rc == 0 && srv_rx_len >= f.hdr_len + f.body_len) {
      Hourglass__V1__Envelope *e = NULL;
      assert_int_equal(hg_wire_decode(&srv_arena, srv_rx + f.hdr_len, f.body_len, &e), 0);
      /* The arena holds the decoded copy; the bytes can go. */
      size_t used = f.hdr_len + f.body_len;
      memmove(srv_rx, srv_rx + used, srv_rx_len - used);
      srv_rx_len -= used;
      return e;
    }
    assert_int_equal(rc, -EAGAIN);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 1000), 1);
    ssize_t n = read(fd, srv_rx + srv_rx_len, sizeof srv_rx - srv_rx_len);
    assert_true(n > 0);
    srv_rx_len += (size_t)n;
  }
}

static bool srv_idle(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return srv_rx_len == 0 && poll(&p, 1, 0) == 0;
}

static uint64_t srv_epoch; /* LoginAck.epoch; 0: not sent */

static void srv_login_ack(int fd, uint64_t next_seq, uint32_t keepalive_ms) {
  uint8_t sid[16] = {0};
  Hourglass__V1__LoginAck a = HOURGLASS__V1__LOGIN_ACK__INIT;
  a.session_id.data = sid;
  a.session_id.len = 16;
  a.role = 1;
  a.account = 7;
  a.firm = 3;
  a.keepalive_ms = keepalive_ms;
  a.next_seq = next_seq;
  a.server_time_ns = CLOCK_NS;
  a.has_epoch = srv_epoch != 0;
  a.epoch = srv_epoch;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_LOGIN_ACK;
  env.login_ack = &a;
  srv_send(fd, &env);
}

/* A stream frame: an ExecutionReport with seq and order_id = seq * 10. */
static void srv_exec(int fd, uint64_t seq) {
  Hourglass__V1__ExecutionReport r = HOURGLASS__V1__EXECUTION_REPORT__INIT;
  r.exec_type = HOURGLASS__V1__EXEC_TYPE__EXEC_NEW;
  r.instrument_id = 1;
  r.has_order_id = 1;
  r.order_id = seq * 10;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.has_seq = 1;
  env.seq = seq;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT;
  env.execution_report = &r;
  srv_send(fd, &env);
}

static void srv_retransmission(int fd, uint64_t from, uint32_t count, uint32_t reason) {
  Hourglass__V1__Retransmission r = HOURGLASS__V1__RETRANSMISSION__INIT;
  r.from_seq = from;
  r.count = count;
  if (reason) {
    r.has_reason = 1;
    r.reason = reason;
  }
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_RETRANSMISSION;
  env.retransmission = &r;
  srv_send(fd, &env);
}

static int new_pair(fixture_t *fx) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fx->srv = sv[1];
  srv_rx_len = 0;
  return sv[0];
}

static int setup(void **state) {
  for (int i = 0; i < 32; i++) SECRET[i] = (uint8_t)i;
  hg_wire_arena_init(&srv_arena, srv_arena_buf, sizeof srv_arena_buf);
  fixture_t *fx = calloc(1, sizeof *fx);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.key_id = KEY_ID;
  cfg.secret = SECRET;
  cfg.secret_len = sizeof SECRET;
  cfg.cancel_on_disconnect = true;
  cfg.keepalive_ms = 250;
  cfg.timeout_ms = 1000;
  cfg.wall_clock = fixed_clock;
  assert_int_equal(hg_client_create(&cfg, &fx->c), 0);
  fx->srv = -1;
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fx = *state;
  hg_client_destroy(fx->c);
  if (fx->srv >= 0) close(fx->srv);
  free(fx);
  return 0;
}

/* Logs the fixture's client in with a LoginAck carrying next_seq; returns
 * the decoded Login the client sent. */
static Hourglass__V1__Envelope *login(fixture_t *fx, uint64_t next_seq, uint32_t keepalive) {
  if (fx->srv >= 0) close(fx->srv);
  int fd = new_pair(fx);
  srv_login_ack(fx->srv, next_seq, keepalive);
  assert_int_equal(hg_client_login_fd(fx->c, fd), 0);
  Hourglass__V1__Envelope *e = srv_recv(fx->srv);
  assert_int_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_LOGIN);
  return e;
}

static const Hourglass__V1__Envelope *client_recv(fixture_t *fx) {
  const Hourglass__V1__Envelope *e = NULL;
  assert_int_equal(hg_client_recv(fx->c, 1000, &e), 1);
  return e;
}

static void be64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i));
}

/* ------------------------------------------------------------------ tests */

/* The signed string is "HGv1" || be64(ts) || sid || be64(key_id); the
 * expected MAC was computed with Python's hmac module (an independent
 * implementation) for these inputs. */
static void test_login_signature_vector(void **state) {
  (void)state;
  uint8_t msg[36], sid[16], mac[32], mac2[32];
  for (int i = 0; i < 32; i++) SECRET[i] = (uint8_t)i;
  for (int i = 0; i < 16; i++) sid[i] = (uint8_t)(0xa0 + i);
  memcpy(msg, "HGv1", 4);
  be64(msg + 4, CLOCK_NS);
  memcpy(msg + 12, sid, 16);
  be64(msg + 28, KEY_ID);
  hg_hmac_sha256(SECRET, 32, msg, sizeof msg, mac);
  static const uint8_t want[32] = {
      0x98, 0x45, 0x3d, 0xdf, 0x4d, 0xbc, 0x6a, 0x33, 0x66, 0x49, 0x0e, 0x7f, 0x6d, 0x2f, 0x13, 0x37,
      0x8d, 0x4d, 0xd5, 0x5b, 0x61, 0x70, 0xd2, 0xa8, 0x6f, 0x2d, 0x50, 0xc1, 0x74, 0xe9, 0xd7, 0x96};
  assert_memory_equal(mac, want, 32);
  hg_wire_login_mac(SECRET, 32, CLOCK_NS, sid, KEY_ID, mac2);
  assert_memory_equal(mac2, want, 32);
}

static void test_login_frame(void **state) {
  fixture_t *fx = *state;
  Hourglass__V1__Envelope *e = login(fx, 1, 250);
  const Hourglass__V1__Login *l = e->login;
  assert_false(e->has_seq);
  assert_int_equal(l->key_id, KEY_ID);
  assert_int_equal(l->timestamp_ns, CLOCK_NS);
  assert_int_equal(l->session_id.len, 16);
  assert_int_equal(l->hmac.len, 32);
  assert_true(l->has_cancel_on_disconnect && l->cancel_on_disconnect);
  assert_int_equal(l->keepalive_ms, 250);
  uint8_t msg[36], mac[32];
  memcpy(msg, "HGv1", 4);
  be64(msg + 4, CLOCK_NS);
  memcpy(msg + 12, l->session_id.data, 16);
  be64(msg + 28, KEY_ID);
  hg_hmac_sha256(SECRET, 32, msg, sizeof msg, mac);
  assert_memory_equal(l->hmac.data, mac, 32);
  uint8_t first_sid[16];
  memcpy(first_sid, l->session_id.data, 16);

  const hg_client_session_t *s = hg_client_session(fx->c);
  assert_non_null(s);
  assert_int_equal(s->account, 7);
  assert_int_equal(s->firm, 3);
  assert_int_equal(s->keepalive_ms, 250);
  assert_int_equal(hg_client_rx_next_seq(fx->c), 1);
  assert_int_equal(hg_client_tx_next_seq(fx->c), 1);

  /* A second login uses a fresh session id. */
  e = login(fx, 1, 250);
  assert_memory_not_equal(e->login->session_id.data, first_sid, 16);
}

static void test_login_rejected(void **state) {
  fixture_t *fx = *state;
  int fd = new_pair(fx);
  Hourglass__V1__LoginReject r = HOURGLASS__V1__LOGIN_REJECT__INIT;
  r.code = HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_TIMESTAMP_SKEW;
  r.text = "clock skew";
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_LOGIN_REJECT;
  env.login_reject = &r;
  srv_send(fx->srv, &env);
  assert_int_equal(hg_client_login_fd(fx->c, fd), HG_EAUTH);
  uint32_t code = 0;
  bool term = true;
  char text[64];
  assert_int_equal(hg_client_login_reject(fx->c, &code, &term, text, sizeof text), 0);
  assert_int_equal(code, 2);
  assert_false(term);
  assert_string_equal(text, "clock skew");
  assert_null(hg_client_session(fx->c));
  assert_int_equal(hg_client_fd(fx->c), -1);
  assert_int_equal(hg_client_cancel(fx->c, 1, 1, NULL), -ENOTCONN);

  /* Silence: the login times out instead of hanging. */
  fd = new_pair(fx);
  assert_int_equal(hg_client_login_fd(fx->c, fd), -ETIMEDOUT);
}

static void test_builders_and_seq(void **state) {
  fixture_t *fx = *state;
  login(fx, 1, 250);
  uint64_t seq = 0;
  hg_client_order_t o = {.instrument_id = 3, .client_order_id = 99, .side = 1, .type = 0,
                         .tif = 2, .has_price = true, .price = 1234, .qty = 5,
                         .stp = 2, .post_only = true, .smp_group = 8};
  assert_int_equal(hg_client_new_order(fx->c, &o, &seq), 0);
  assert_int_equal(seq, 1);
  Hourglass__V1__Envelope *e = srv_recv(fx->srv);
  assert_true(e->has_seq);
  assert_int_equal(e->seq, 1);
  assert_int_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER);
  const Hourglass__V1__NewOrderRequest *no = e->new_order;
  assert_int_equal(no->instrument_id, 3);
  assert_int_equal(no->client_order_id, 99);
  assert_int_equal(no->side, 1);
  assert_int_equal(no->tif, 2);
  assert_true(no->has_price);
  assert_int_equal(no->price, 1234);
  assert_int_equal(no->qty, 5);
  assert_true(no->has_stp && no->stp == 2);
  assert_true(no->has_post_only && no->post_only);
  assert_true(no->has_smp_group && no->smp_group == 8);

  /* A market order: no price, defaults not sent. */
  hg_client_order_t m = {.instrument_id = 3, .client_order_id = 100, .type = 1, .tif = 2, .qty = 1};
  assert_int_equal(hg_client_new_order(fx->c, &m, &seq), 0);
  e = srv_recv(fx->srv);
  assert_int_equal(e->seq, 2);
  assert_false(e->new_order->has_price);
  assert_false(e->new_order->has_stp);
  assert_false(e->new_order->has_post_only);

  assert_int_equal(hg_client_cancel(fx->c, 3, 777, &seq), 0);
  e = srv_recv(fx->srv);
  assert_int_equal(e->seq, 3);
  assert_int_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_CANCEL);
  assert_int_equal(e->cancel->order_id, 777);

  assert_int_equal(hg_client_replace(fx->c, 3, 777, 1250, 9, &seq), 0);
  e = srv_recv(fx->srv);
  assert_int_equal(e->seq, 4);
  assert_int_equal(e->replace->new_price, 1250);
  assert_int_equal(e->replace->new_qty, 9);

  assert_int_equal(hg_client_mass_cancel(fx->c, 0, 1, &seq), 0);
  e = srv_recv(fx->srv);
  assert_int_equal(e->seq, 5);
  assert_false(e->mass_cancel->has_instrument_id);
  assert_true(e->mass_cancel->has_sides && e->mass_cancel->sides == 1);

  assert_int_equal(hg_client_order_status(fx->c, 3, 777, NULL), 0);
  e = srv_recv(fx->srv);
  assert_int_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_ORDER_STATUS_REQUEST);
  assert_int_equal(hg_client_positions(fx->c, 0, NULL), 0);
  e = srv_recv(fx->srv);
  assert_false(e->positions_request->has_account);
  assert_int_equal(hg_client_instruments(fx->c, NULL), 0);
  e = srv_recv(fx->srv);
  assert_int_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_INSTRUMENTS_REQUEST);
  assert_int_equal(hg_client_md_subscribe(fx->c, 3, 5, NULL), 0);
  e = srv_recv(fx->srv);
  assert_int_equal(e->md_subscribe->depth, 5);
  assert_int_equal(hg_client_md_unsubscribe(fx->c, 3, &seq), 0);
  e = srv_recv(fx->srv);
  assert_int_equal(e->seq, 10);
  assert_int_equal(seq, 10);
  assert_int_equal(hg_client_tx_next_seq(fx->c), 11);

  /* A reconnect starts the request seq at 1 again (per session). */
  login(fx, 1, 250);
  assert_int_equal(hg_client_cancel(fx->c, 3, 1, &seq), 0);
  assert_int_equal(seq, 1);
}

static bool srv_readable(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return poll(&p, 1, 0) == 1;
}

/* Corked, requests get their seqs but stay queued (recv writes nothing
 * either) until flush writes them all at once; uncork restores immediate
 * sends. */
static void test_cork_batches_until_flush(void **state) {
  fixture_t *fx = *state;
  login(fx, 1, 250);
  hg_client_cork(fx->c);
  hg_client_order_t o = {.instrument_id = 3, .client_order_id = 1, .type = 0, .tif = 2,
                         .has_price = true, .price = 1000, .qty = 1};
  uint64_t seq = 0;
  for (uint64_t i = 1; i <= 3; i++) {
    o.client_order_id = i;
    assert_int_equal(hg_client_new_order(fx->c, &o, &seq), 0);
    assert_int_equal(seq, i);
  }
  assert_false(srv_readable(fx->srv));
  size_t queued = hg_client_tx_pending(fx->c);
  assert_true(queued > 0);
  const Hourglass__V1__Envelope *e = NULL;
  assert_int_equal(hg_client_recv(fx->c, 0, &e), 0);
  assert_false(srv_readable(fx->srv));
  assert_int_equal(hg_client_tx_pending(fx->c), queued);

  assert_int_equal(hg_client_flush(fx->c, 0), 0);
  assert_int_equal(hg_client_tx_pending(fx->c), 0);
  uint8_t peek[4096];
  assert_int_equal(recv(fx->srv, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT), (ssize_t)queued);
  for (uint64_t i = 1; i <= 3; i++) {
    Hourglass__V1__Envelope *r = srv_recv(fx->srv);
    assert_int_equal(r->seq, i);
    assert_int_equal(r->new_order->client_order_id, i);
  }

  /* Still corked: the next one waits; uncork writes it, later sends go at once. */
  assert_int_equal(hg_client_cancel(fx->c, 3, 777, &seq), 0);
  assert_int_equal(seq, 4);
  assert_false(srv_readable(fx->srv));
  assert_int_equal(hg_client_uncork(fx->c), 0);
  Hourglass__V1__Envelope *r = srv_recv(fx->srv);
  assert_int_equal(r->seq, 4);
  assert_int_equal(hg_client_cancel(fx->c, 3, 778, &seq), 0);
  assert_true(srv_readable(fx->srv));
  r = srv_recv(fx->srv);
  assert_int_equal(r->seq, 5);
  assert_int_equal(r->cancel->order_id, 778);
}

/* Frames split into single bytes, and several in one write, decode alike. */
static void test_framing_split_and_batched(void **state) {
  fixture_t *fx = *state;
  login(fx, 5, 250);
  uint8_t buf[256];
  size_t len = 0, total = 0;
  for (uint64_t s = 5; s <= 7; s++) {
    Hourglass__V1__ExecutionReport r = HOURGLASS__V1__EXECUTION_REPORT__INIT;
    r.exec_type = 1;
    r.instrument_id = 1;
    r.has_order_id = 1;
    r.order_id = s * 10;
    Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
    env.has_seq = 1;
    env.seq = s;
    env.body_case = HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT;
    env.execution_report = &r;
    assert_int_equal(hg_wire_encode(&env, buf + total, sizeof buf - total, &len), 0);
    total += len;
  }
  /* First frame byte by byte: nothing delivered until it is whole. */
  const Hourglass__V1__Envelope *e = NULL;
  size_t first = len; /* every frame here has the same length */
  for (size_t i = 0; i + 1 < first; i++) {
    srv_write(fx->srv, buf + i, 1);
    assert_int_equal(hg_client_recv(fx->c, 0, &e), 0);
  }
  srv_write(fx->srv, buf + first - 1, total - first + 1);
  for (uint64_t s = 5; s <= 7; s++) {
    e = client_recv(fx);
    assert_int_equal(e->seq, s);
    assert_int_equal(e->execution_report->order_id, s * 10);
  }
  assert_int_equal(hg_client_recv(fx->c, 0, &e), 0);
  assert_int_equal(hg_client_rx_next_seq(fx->c), 8);

  /* A zero-length frame is a protocol violation: HG_EPARSE, closed. */
  uint8_t zero = 0;
  srv_write(fx->srv, &zero, 1);
  assert_int_equal(hg_client_recv(fx->c, 1000, &e), HG_EPARSE);
  assert_int_equal(hg_client_fd(fx->c), -1);
  assert_int_equal(hg_client_recv(fx->c, 0, &e), -ENOTCONN);
}

static void test_duplicate_and_gap(void **state) {
  fixture_t *fx = *state;
  login(fx, 5, 250);
  srv_exec(fx->srv, 5);
  srv_exec(fx->srv, 6);
  srv_exec(fx->srv, 6); /* duplicate: dropped */
  srv_exec(fx->srv, 9); /* gap: 7, 8 missing */
  assert_int_equal(client_recv(fx)->seq, 5);
  assert_int_equal(client_recv(fx)->seq, 6);
  const Hourglass__V1__Envelope *e = NULL;
  assert_int_equal(hg_client_recv(fx->c, 50, &e), 0);
  hg_client_stats_t st;
  hg_client_stats(fx->c, &st);
  assert_int_equal(st.duplicates, 1);
  assert_int_equal(st.held_back, 1);
  /* The client asked for [7, 9]: 9 was held back, so it is asked again. */
  Hourglass__V1__Envelope *req = srv_recv(fx->srv);
  assert_int_equal(req->body_case, HOURGLASS__V1__ENVELOPE__BODY_RETRANSMIT_REQUEST);
  assert_int_equal(req->retransmit_request->from_seq, 7);
  assert_int_equal(req->retransmit_request->count, 3);
  /* A second request while this one runs would be a violation. */
  assert_int_equal(hg_client_retransmit(fx->c, 1, 1), HG_ESTATE);
  srv_exec(fx->srv, 10); /* live frame racing the retransmission: held back */
  srv_retransmission(fx->srv, 7, 3, 0);
  srv_exec(fx->srv, 7);
  srv_exec(fx->srv, 11); /* live frames may interleave with resent ones */
  srv_exec(fx->srv, 8);
  srv_exec(fx->srv, 9);
  assert_int_equal(client_recv(fx)->seq, 7);
  assert_int_equal(client_recv(fx)->seq, 8);
  assert_int_equal(client_recv(fx)->seq, 9);
  /* 10 and 11 were held back: a follow-up request for them. */
  req = srv_recv(fx->srv);
  assert_int_equal(req->retransmit_request->from_seq, 10);
  assert_int_equal(req->retransmit_request->count, 2);
  srv_retransmission(fx->srv, 10, 2, 0);
  srv_exec(fx->srv, 10);
  srv_exec(fx->srv, 11);
  e = client_recv(fx);
  assert_int_equal(e->seq, 10);
  assert_int_equal(e->execution_report->order_id, 100);
  assert_int_equal(client_recv(fx)->seq, 11);
  assert_int_equal(hg_client_rx_next_seq(fx->c), 12);
  assert_true(srv_idle(fx->srv));

  /* The server cannot resend: the gap is skipped and counted as lost. */
  srv_exec(fx->srv, 14);
  assert_int_equal(hg_client_recv(fx->c, 50, &e), 0);
  req = srv_recv(fx->srv);
  assert_int_equal(req->retransmit_request->from_seq, 12);
  assert_int_equal(req->retransmit_request->count, 3);
  srv_retransmission(fx->srv, 12, 0, HOURGLASS__V1__REJECT_REASON__REJ_RETRANSMIT_RANGE);
  e = client_recv(fx);
  assert_int_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_RETRANSMISSION);
  hg_client_stats(fx->c, &st);
  assert_int_equal(st.lost, 3);
  assert_int_equal(hg_client_rx_next_seq(fx->c), 15);
  srv_exec(fx->srv, 15);
  assert_int_equal(client_recv(fx)->seq, 15);
}

static void test_reconnect_recovers(void **state) {
  fixture_t *fx = *state;
  login(fx, 1, 250);
  srv_exec(fx->srv, 1);
  srv_exec(fx->srv, 2);
  assert_int_equal(client_recv(fx)->seq, 1);
  assert_int_equal(client_recv(fx)->seq, 2);
  hg_client_close(fx->c);
  /* Meanwhile the server produced 3..5: the new login says next_seq 6. */
  login(fx, 6, 250);
  Hourglass__V1__Envelope *req = srv_recv(fx->srv);
  assert_int_equal(req->body_case, HOURGLASS__V1__ENVELOPE__BODY_RETRANSMIT_REQUEST);
  assert_int_equal(req->retransmit_request->from_seq, 3);
  assert_int_equal(req->retransmit_request->count, 3);
  srv_retransmission(fx->srv, 3, 3, 0);
  for (uint64_t s = 3; s <= 5; s++) srv_exec(fx->srv, s);
  srv_exec(fx->srv, 6);
  for (uint64_t s = 3; s <= 6; s++) assert_int_equal(client_recv(fx)->seq, s);

  /* A caller's own retransmit request delivers frames seen before. */
  assert_int_equal(hg_client_retransmit(fx->c, 1, 2), 0);
  req = srv_recv(fx->srv);
  assert_int_equal(req->retransmit_request->from_seq, 1);
  srv_retransmission(fx->srv, 1, 2, 0);
  srv_exec(fx->srv, 1);
  srv_exec(fx->srv, 2);
  assert_int_equal(client_recv(fx)->body_case, HOURGLASS__V1__ENVELOPE__BODY_RETRANSMISSION);
  assert_int_equal(client_recv(fx)->seq, 1);
  assert_int_equal(client_recv(fx)->seq, 2);
  assert_int_equal(hg_client_rx_next_seq(fx->c), 7);
}

/* LoginAck.epoch is exposed, and a change between two logins of one client
 * says the exchange restarted; a server that sends none reads as 0. */
static void test_epoch_and_restart(void **state) {
  fixture_t *fx = *state;
  srv_epoch = 0;
  login(fx, 1, 250);
  assert_int_equal(hg_client_session(fx->c)->epoch, 0);
  assert_false(hg_client_session(fx->c)->restarted);
  srv_epoch = 4;
  login(fx, 1, 250);
  assert_int_equal(hg_client_session(fx->c)->epoch, 4);
  assert_false(hg_client_session(fx->c)->restarted); /* nothing known before */
  login(fx, 1, 250);
  assert_false(hg_client_session(fx->c)->restarted);
  srv_epoch = 5;
  login(fx, 1, 250);
  assert_int_equal(hg_client_session(fx->c)->epoch, 5);
  assert_true(hg_client_session(fx->c)->restarted);
  login(fx, 1, 250);
  assert_false(hg_client_session(fx->c)->restarted);
  srv_epoch = 0;
}

static void test_heartbeat_and_terminate(void **state) {
  fixture_t *fx = *state;
  login(fx, 1, 50);
  const Hourglass__V1__Envelope *e = NULL;
  /* Nothing sent for 50 ms: recv sends a Heartbeat while it waits. */
  assert_int_equal(hg_client_recv(fx->c, 120, &e), 0);
  Hourglass__V1__Envelope *hb = srv_recv(fx->srv);
  assert_int_equal(hb->body_case, HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT);
  assert_false(hb->has_seq);
  hg_client_stats_t st;
  hg_client_stats(fx->c, &st);
  assert_true(st.heartbeats_out >= 1);

  Hourglass__V1__Terminate t = HOURGLASS__V1__TERMINATE__INIT;
  t.code = HOURGLASS__V1__TERMINATE_CODE__TERM_KEEPALIVE_LAPSED;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_TERMINATE;
  env.terminate = &t;
  srv_send(fx->srv, &env);
  close(fx->srv);
  fx->srv = -1;
  e = client_recv(fx);
  assert_int_equal(e->terminate->code, 13);
  assert_null(hg_client_session(fx->c));
  assert_int_equal(hg_client_recv(fx->c, 1000, &e), -ECONNRESET);
}

static void test_parse_hex(void **state) {
  (void)state;
  uint8_t b[4];
  assert_int_equal(hg_client_parse_hex("00ff7A", b, sizeof b), 3);
  assert_int_equal(b[0], 0x00);
  assert_int_equal(b[1], 0xff);
  assert_int_equal(b[2], 0x7a);
  assert_int_equal(hg_client_parse_hex("abc", b, sizeof b), HG_EINVAL);
  assert_int_equal(hg_client_parse_hex("zz", b, sizeof b), HG_EINVAL);
  assert_int_equal(hg_client_parse_hex("", b, sizeof b), HG_EINVAL);
  assert_int_equal(hg_client_parse_hex("0102030405", b, sizeof b), HG_EINVAL);

  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  hg_client_t *c = NULL;
  assert_int_equal(hg_client_create(&cfg, &c), HG_EINVAL); /* no key */
  cfg.key_id = 1;
  cfg.secret = b;
  cfg.secret_len = 65;
  assert_int_equal(hg_client_create(&cfg, &c), HG_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_login_signature_vector),
      cmocka_unit_test_setup_teardown(test_login_frame, setup, teardown),
      cmocka_unit_test_setup_teardown(test_login_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(test_builders_and_seq, setup, teardown),
      cmocka_unit_test_setup_teardown(test_framing_split_and_batched, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cork_batches_until_flush, setup, teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_and_gap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reconnect_recovers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_epoch_and_restart, setup, teardown),
      cmocka_unit_test_setup_teardown(test_heartbeat_and_terminate, setup, teardown),
      cmocka_unit_test(test_parse_hex),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
