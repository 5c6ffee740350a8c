/*
 * The gateway over loopback TCP with a real pipeline on a temporary data
 * directory: login and each login failure, protocol violations and their
 * terminate codes, the order lifecycle with execution reports routed to
 * their owners, isolation of another account's order ids, positions,
 * reference and market data, retransmission after reconnect, throttling,
 * cancel-on-disconnect on close and on keepalive lapse, mass quotes and
 * market-maker protection, the reply type of each role refusal.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "gw_client.h"

enum { OP = 1, TA = 10, TB = 11, MM = 12, RV1 = 13, TC = 14 };
enum { ACC_A = 101, ACC_B = 102, ACC_M = 103, ACC_C = 104 };

static void setup_keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(s, TB, HG_ROLE_TRADER, ACC_B, 2), 0);
  assert_int_equal(ts_server_add_key(s, MM, HG_ROLE_MARKET_MAKER, ACC_M, 3), 0);
  assert_int_equal(ts_server_add_key(s, RV1, HG_ROLE_RISK_VIEWER, 0, 1), 0);
  assert_int_equal(ts_server_add_key(s, TC, HG_ROLE_TRADER, ACC_C, 1), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, 1), HG_EEXISTS);
}

static void start_market(ts_server_t *s, int unsafe, void (*tweak)(hg_gateway_config_t *)) {
  assert_int_equal(ts_server_start(s, unsafe, tweak, setup_keys), 0);
  const uint32_t acc[] = {ACC_A, ACC_B, ACC_M, ACC_C};
  const uint32_t firm[] = {1, 2, 3, 1};
  assert_int_equal(gt_setup_market(s, OP, 2, acc, firm, 4), 0);
}

/* Sends a MarketDataSubscribe, with depth when has_depth. */
static void md_subscribe_depth(gt_client_t *c, uint32_t instrument_id, uint32_t depth,
                               int has_depth) {
  Hourglass__V1__MarketDataSubscribe ms = HOURGLASS__V1__MARKET_DATA_SUBSCRIBE__INIT;
  ms.instrument_id = instrument_id;
  ms.has_depth = has_depth;
  ms.depth = depth;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(MD_SUBSCRIBE);
  q.md_subscribe = &ms;
  gt_send(c, &q);
}

/* Subscribes c to an instrument's market data (the snapshot follows). */
static void md_subscribe(gt_client_t *c, uint32_t instrument_id) {
  md_subscribe_depth(c, instrument_id, 0, 0);
}

/* --------------------------------------------------------------- login */

static void short_login(hg_gateway_config_t *cfg) {
  cfg->login_timeout_ms = 200;
  cfg->sessions_per_key = 2;
}

static void expect_login_reject(gt_client_t *c, uint32_t code) {
  if (getenv("GT_VERBOSE")) fprintf(stderr, "expect reject %u\n", code);
  env_t *e = gt_expect(c, BODY(LOGIN_REJECT), 2000);
  assert_non_null(e);
  assert_int_equal(e->login_reject->code, code);
  assert_true(gt_wait_closed(c, 2000));
}

static void test_login(void **state) {
  (void)state;
  ts_server_t s;
  assert_int_equal(ts_server_start(&s, 1, short_login, setup_keys), 0);
  uint8_t sec[32], bad[32];
  ts_key_secret(TA, sec);
  ts_key_secret(TB, bad);
  gt_client_t c;
  /* Success. */
  assert_int_equal(gt_connect(&c, s.port), 0);
  assert_int_equal(gt_send_login(&c, TA, sec, 0, 0, 0, 0), 0);
  env_t *e = gt_expect(&c, BODY(LOGIN_ACK), 2000);
  assert_non_null(e);
  assert_int_equal(e->login_ack->account, ACC_A);
  assert_int_equal(e->login_ack->firm, 1);
  assert_int_equal(e->login_ack->role, HG_ROLE_TRADER);
  assert_int_equal(e->login_ack->next_seq, 1);
  assert_int_equal(e->login_ack->session_id.len, 16);
  assert_memory_equal(e->login_ack->session_id.data, c.sid, 16);
  uint8_t used_sid[16];
  memcpy(used_sid, c.sid, 16);
  /* A second login on the same connection is a violation. */
  assert_int_equal(gt_send_login(&c, TA, sec, 0, 0, 0, 0), 0);
  e = gt_expect(&c, BODY(TERMINATE), 2000);
  assert_non_null(e);
  assert_int_equal(e->terminate->code, TERMC(ALREADY_LOGGED_IN));
  assert_true(gt_wait_closed(&c, 2000));
  gt_close(&c);

  /* Wrong secret and unknown key: the same code. */
  assert_int_equal(gt_connect(&c, s.port), 0);
  assert_int_equal(gt_send_login(&c, TA, bad, 0, 0, 0, 0), 0);
  expect_login_reject(&c, LREJ(AUTH_FAILED));
  gt_close(&c);
  assert_int_equal(gt_connect(&c, s.port), 0);
  assert_int_equal(gt_send_login(&c, 999, sec, 0, 0, 0, 0), 0);
  expect_login_reject(&c, LREJ(AUTH_FAILED));
  gt_close(&c);
  /* Stale timestamp (6 s old). */
  assert_int_equal(gt_connect(&c, s.port), 0);
  assert_int_equal(gt_send_login(&c, TA, sec, gt_now_ns() - 6000000000ull, 0, 0, 0), 0);
  expect_login_reject(&c, LREJ(TIMESTAMP_SKEW));
  gt_close(&c);
  /* Reused session id. */
  assert_int_equal(gt_connect(&c, s.port), 0);
  memcpy(c.sid, used_sid, 16);
  assert_int_equal(gt_send_login(&c, TA, sec, 0, 0, 0, 1), 0);
  expect_login_reject(&c, LREJ(SESSION_ID_REUSED));
  gt_close(&c);
  /* The same key while as many sessions as it may have (2 here) are live. */
  gt_client_t live, live2;
  assert_true(gt_login(&live, s.port, TA, 0, 0) > 0);
  assert_true(gt_login(&live2, s.port, TA, 0, 0) > 0);
  assert_int_equal(gt_connect(&c, s.port), 0);
  assert_int_equal(gt_send_login(&c, TA, sec, 0, 0, 0, 0), 0);
  expect_login_reject(&c, LREJ(ALREADY_ACTIVE));
  gt_close(&c);
  gt_close(&live2);
  gt_close(&live);
  /* Login timeout. */
  assert_int_equal(gt_connect(&c, s.port), 0);
  e = gt_expect(&c, BODY(TERMINATE), 3000);
  assert_non_null(e);
  assert_int_equal(e->terminate->code, TERMC(LOGIN_TIMEOUT));
  gt_close(&c);
  hg_gateway_stats_t st;
  hg_gateway_stats(s.gw, &st);
  assert_int_equal(st.login_rejects, 5);
  ts_server_stop(&s);
}

/* ------------------------------------------------------ protocol violations */

static void expect_terminate_after(ts_server_t *s, const uint8_t *bytes, size_t n, int login,
                                   uint32_t code) {
  gt_client_t c;
  if (login) {
    assert_true(gt_login(&c, s->port, TB, 0, 0) > 0);
  } else {
    assert_int_equal(gt_connect(&c, s->port), 0);
  }
  assert_int_equal(gt_send_raw(&c, bytes, n), 0);
  env_t *e = gt_expect(&c, BODY(TERMINATE), 2000);
  assert_non_null(e);
  assert_int_equal(e->terminate->code, code);
  assert_true(gt_wait_closed(&c, 2000));
  gt_close(&c);
}

static void test_violations(void **state) {
  (void)state;
  ts_server_t s;
  assert_int_equal(ts_server_start(&s, 1, NULL, setup_keys), 0);
  const uint8_t zero[] = {0x00};
  expect_terminate_after(&s, zero, 1, 0, TERMC(FRAME_ZERO_LENGTH));
  const uint8_t nonmin[] = {0x81, 0x00};
  expect_terminate_after(&s, nonmin, 2, 1, TERMC(FRAME_BAD_VARINT));
  const uint8_t huge[] = {0x81, 0x80, 0x04}; /* 65537: one above the maximum */
  expect_terminate_after(&s, huge, 3, 1, TERMC(FRAME_TOO_LARGE));
  const uint8_t junk[] = {0x03, 0xff, 0xff, 0xff};
  expect_terminate_after(&s, junk, 4, 1, TERMC(DECODE_FAILED));
  /* Envelope with only field 99 (unknown body): 99 << 3 = 792 = 0x98 0x06. */
  const uint8_t unknown[] = {0x03, 0x98, 0x06, 0x01};
  expect_terminate_after(&s, unknown, 4, 1, TERMC(UNKNOWN_MESSAGE));
  /* A cancel before login; the same cancel without seq after login. */
  Hourglass__V1__CancelRequest cr = HOURGLASS__V1__CANCEL_REQUEST__INIT;
  cr.instrument_id = 1;
  cr.order_id = 1;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(CANCEL);
  q.cancel = &cr;
  uint8_t buf[64];
  size_t n = 0;
  assert_int_equal(hg_wire_encode(&q, buf, sizeof buf, &n), 0);
  expect_terminate_after(&s, buf, n, 1, TERMC(MISSING_SEQ));
  q.has_seq = 1;
  q.seq = 1;
  assert_int_equal(hg_wire_encode(&q, buf, sizeof buf, &n), 0);
  expect_terminate_after(&s, buf, n, 0, TERMC(NOT_LOGGED_IN));
  /* A server-to-client message from the client. */
  Hourglass__V1__Heartbeat hb = HOURGLASS__V1__HEARTBEAT__INIT;
  Hourglass__V1__Terminate tm = HOURGLASS__V1__TERMINATE__INIT;
  tm.code = 1;
  q = (env_t)HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(TERMINATE);
  q.terminate = &tm;
  assert_int_equal(hg_wire_encode(&q, buf, sizeof buf, &n), 0);
  expect_terminate_after(&s, buf, n, 1, TERMC(WRONG_DIRECTION));
  /* Heartbeat, then a frame split across writes, are fine. */
  (void)hb;
  /* The server is still healthy. */
  gt_client_t c;
  assert_true(gt_login(&c, s.port, TA, 0, 0) > 0);
  gt_close(&c);
  ts_server_stop(&s);
}

/* ------------------------------------------------------- order lifecycle */

static env_t *expect_er(gt_client_t *c, uint32_t type) {
  env_t *e = gt_expect(c, BODY(EXECUTION_REPORT), 3000);
  assert_non_null(e);
  if (e->execution_report->exec_type != type)
    fprintf(stderr, "exec type %u reason %u, wanted %u\n", e->execution_report->exec_type,
            e->execution_report->reason, type);
  assert_int_equal(e->execution_report->exec_type, type);
  return e;
}

static void test_order_lifecycle(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 0, NULL); /* durable mode */
  gt_client_t a, b;
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);

  /* A buys 10 @ 500 GTC. */
  assert_int_equal(gt_new_order(&a, 1, 7001, 0, 500, 10, 0), 0);
  env_t *e = expect_er(&a, EXEC(NEW));
  const Hourglass__V1__ExecutionReport *er = e->execution_report;
  assert_int_equal(er->ref_seq, a.seq);
  assert_int_equal(er->client_order_id, 7001);
  assert_int_equal(er->leaves, 10);
  assert_false(er->has_account); /* never on the owner's own reports */
  uint64_t oid = er->order_id;
  assert_true(oid > 0);
  /* Status: live for the owner; for B exactly like an unknown id. */
  gt_status(&a, 1, oid);
  e = gt_expect(&a, BODY(ORDER_STATUS), 2000);
  assert_non_null(e);
  assert_true(e->order_status->live);
  assert_int_equal(e->order_status->leaves, 10);
  gt_status(&b, 1, oid);
  e = gt_expect(&b, BODY(ORDER_STATUS), 2000);
  assert_false(e->order_status->live);
  assert_false(e->order_status->has_client_order_id);
  /* B cancelling A's order and cancelling a never-used id get the same reply. */
  gt_cancel(&b, 1, oid);
  e = expect_er(&b, EXEC(REJECTED));
  uint32_t r1 = e->execution_report->reason, q1 = e->execution_report->request;
  int has_cl1 = e->execution_report->has_client_order_id;
  gt_cancel(&b, 1, 999999);
  e = expect_er(&b, EXEC(REJECTED));
  assert_int_equal(e->execution_report->reason, r1);
  assert_int_equal(e->execution_report->request, q1);
  assert_int_equal(e->execution_report->has_client_order_id, has_cl1);
  assert_int_equal(r1, REJ(UNKNOWN_ORDER));
  gt_replace(&b, 1, oid, 501, 5);
  e = expect_er(&b, EXEC(REJECTED));
  assert_int_equal(e->execution_report->reason, REJ(UNKNOWN_ORDER));
  /* A replaces: qty down at the same price keeps priority. */
  gt_replace(&a, 1, oid, 500, 8);
  e = expect_er(&a, EXEC(REPLACED));
  assert_true(e->execution_report->priority_kept);
  assert_int_equal(e->execution_report->leaves, 8);
  assert_int_equal(e->execution_report->ref_seq, a.seq);
  /* B sells 3 @ 499 IOC: fills at 500 against A. */
  gt_new_order(&b, 1, 8001, 1, 499, 3, 2);
  e = expect_er(&b, EXEC(NEW));
  e = expect_er(&b, EXEC(FILL));
  assert_int_equal(e->execution_report->price, 500);
  assert_int_equal(e->execution_report->qty, 3);
  assert_false(e->execution_report->maker);
  assert_int_equal(e->execution_report->client_order_id, 8001);
  e = expect_er(&a, EXEC(FILL));
  assert_true(e->execution_report->maker);
  assert_int_equal(e->execution_report->order_id, oid);
  assert_int_equal(e->execution_report->leaves, 5);
  assert_int_equal(e->execution_report->client_order_id, 7001);
  assert_false(e->execution_report->has_ref_seq); /* unsolicited */
  /* Positions. */
  Hourglass__V1__PositionsRequest pr = HOURGLASS__V1__POSITIONS_REQUEST__INIT;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(POSITIONS_REQUEST);
  q.positions_request = &pr;
  gt_send(&a, &q);
  e = gt_expect(&a, BODY(POSITIONS), 2000);
  assert_non_null(e);
  assert_int_equal(e->positions->account, ACC_A);
  assert_int_equal(e->positions->n_positions, 1);
  assert_int_equal(e->positions->positions[0]->net_qty, 3);
  /* Asking for another account's positions: like an unknown account. */
  pr.has_account = 1;
  pr.account = ACC_B;
  q.has_seq = 0;
  gt_send(&a, &q);
  e = gt_expect(&a, BODY(POSITIONS), 2000);
  assert_int_equal(e->positions->reason, REJ(UNKNOWN_ACCOUNT));
  assert_int_equal(e->positions->n_positions, 0);
  /* Instruments. */
  Hourglass__V1__InstrumentsRequest ir = HOURGLASS__V1__INSTRUMENTS_REQUEST__INIT;
  q = (env_t)HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(INSTRUMENTS_REQUEST);
  q.instruments_request = &ir;
  gt_send(&b, &q);
  e = gt_expect(&b, BODY(INSTRUMENT_LIST), 2000);
  assert_non_null(e);
  assert_int_equal(e->instrument_list->n_instruments, 2);
  assert_string_equal(e->instrument_list->instruments[0]->symbol, "B200.A.2027-01");
  assert_string_equal(e->instrument_list->instruments[0]->grade, "A");
  assert_string_equal(e->instrument_list->instruments[0]->delivery_month, "2027-01");
  /* Market data: snapshot shows A's remaining 5 @ 500, then increments. */
  md_subscribe(&b, 1);
  e = gt_recv(&b, 2000);
  assert_non_null(e);
  assert_int_equal(e->body_case, BODY(MD_SNAPSHOT));
  assert_int_equal(e->md_snapshot->n_bids, 1);
  assert_int_equal(e->md_snapshot->bids[0]->price, 500);
  assert_int_equal(e->md_snapshot->bids[0]->qty, 5);
  assert_int_equal(e->md_snapshot->n_asks, 0);
  uint64_t mdseq = e->md_snapshot->md_seq;
  /* A cancels: B sees the level go, next md seq; A gets CANCELLED. */
  gt_cancel(&a, 1, oid);
  e = expect_er(&a, EXEC(CANCELLED));
  assert_int_equal(e->execution_report->ref_seq, a.seq);
  assert_int_equal(e->execution_report->qty, 5);
  e = gt_recv(&b, 2000);
  assert_non_null(e);
  assert_int_equal(e->body_case, BODY(MD_LEVEL));
  assert_int_equal(e->md_level->md_seq, mdseq + 1);
  assert_int_equal(e->md_level->qty, 0);
  /* Role: a trader may not list instruments; operator messages refused. */
  gt_list(&a, 9, "X.Y.2027-01");
  assert_int_equal(gt_response_reason(&a), REJ(NOT_PERMITTED));
  /* Mass cancel with nothing live: a plain OK. */
  Hourglass__V1__MassCancelRequest mc = HOURGLASS__V1__MASS_CANCEL_REQUEST__INIT;
  q = (env_t)HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(MASS_CANCEL);
  q.mass_cancel = &mc;
  gt_send(&a, &q);
  assert_int_equal(gt_response_reason(&a), 0);
  /* Engine rejects carry the engine's code: qty 0. */
  gt_new_order(&a, 1, 7002, 0, 500, 0, 0);
  e = expect_er(&a, EXEC(REJECTED));
  assert_int_equal(e->execution_report->reason, REJ(INVALID_QTY));
  /* Client seq: a repeat is ignored, a gap is reported. */
  Hourglass__V1__NewOrderRequest no = HOURGLASS__V1__NEW_ORDER_REQUEST__INIT;
  no.instrument_id = 1;
  no.client_order_id = 7003;
  no.side = HOURGLASS__V1__SIDE__SIDE_BUY;
  no.tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC;
  no.has_price = 1;
  no.price = 100;
  no.qty = 1;
  q = (env_t)HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(NEW_ORDER);
  q.new_order = &no;
  q.has_seq = 1;
  q.seq = a.seq; /* repeated */
  gt_send(&a, &q);
  q.seq = a.seq + 3;
  a.seq += 3;
  gt_send(&a, &q);
  e = gt_expect(&a, BODY(SEQUENCE_GAP), 2000);
  assert_non_null(e);
  assert_int_equal(e->sequence_gap->expected, a.seq - 2);
  assert_int_equal(e->sequence_gap->received, a.seq);
  e = expect_er(&a, EXEC(NEW));
  assert_int_equal(e->execution_report->ref_seq, a.seq);
  assert_int_equal(e->execution_report->client_order_id, 7003);
  /* Nothing else is pending for A (the repeat produced nothing). */
  assert_null(gt_recv(&a, 200));
  gt_close(&a);
  gt_close(&b);
  ts_server_stop(&s);
}

/* ------------------------------------------------------------ retransmit */

static void small_queue(hg_gateway_config_t *cfg) {
  cfg->out_high_water = 2048;
  cfg->out_hard_cap = 1u << 18;
}

static void test_retransmit(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, small_queue);
  gt_client_t a;
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 1);
  for (int i = 0; i < 300; i++) gt_new_order(&a, 1, 100 + (uint64_t)i, 0, 100 + i, 1, 0);
  for (int i = 0; i < 300; i++) {
    env_t *e = expect_er(&a, EXEC(NEW));
    assert_int_equal(e->seq, (uint64_t)i + 1);
  }
  /* Logout (clean) and reconnect with a new session id. */
  Hourglass__V1__Logout lo = HOURGLASS__V1__LOGOUT__INIT;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(LOGOUT);
  q.logout = &lo;
  gt_send(&a, &q);
  env_t *e = gt_expect(&a, BODY(TERMINATE), 2000);
  assert_int_equal(e->terminate->code, TERMC(LOGOUT));
  gt_close(&a);
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 301);
  /* Ask for 250..300 and 1..200 again. */
  Hourglass__V1__RetransmitRequest rr = HOURGLASS__V1__RETRANSMIT_REQUEST__INIT;
  rr.from_seq = 250;
  rr.count = 51;
  q = (env_t)HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(RETRANSMIT_REQUEST);
  q.retransmit_request = &rr;
  gt_send(&a, &q);
  e = gt_expect(&a, BODY(RETRANSMISSION), 2000);
  assert_non_null(e);
  assert_int_equal(e->retransmission->reason, 0);
  for (uint64_t k = 250; k <= 300; k++) {
    e = expect_er(&a, EXEC(NEW));
    assert_int_equal(e->seq, k);
    assert_int_equal(e->execution_report->client_order_id, 100 + k - 1);
  }
  /* Out of range: beyond what was sent. */
  rr.from_seq = 300;
  rr.count = 2;
  gt_send(&a, &q);
  e = gt_expect(&a, BODY(RETRANSMISSION), 2000);
  assert_int_equal(e->retransmission->reason, REJ(RETRANSMIT_RANGE));
  /* Too many at once. */
  rr.from_seq = 1;
  rr.count = 5000;
  gt_send(&a, &q);
  e = gt_expect(&a, BODY(RETRANSMISSION), 2000);
  assert_int_equal(e->retransmission->reason, REJ(INVALID_REQUEST));
  /* A second request while one is being served (the small queue makes the
   * first take several writes; both go in one segment). */
  rr.from_seq = 1;
  rr.count = 300;
  static uint8_t two[256];
  size_t l1 = 0, l2 = 0;
  assert_int_equal(hg_wire_encode(&q, two, sizeof two, &l1), 0);
  assert_int_equal(hg_wire_encode(&q, two + l1, sizeof two - l1, &l2), 0);
  assert_int_equal(gt_send_raw(&a, two, l1 + l2), 0);
  e = gt_expect(&a, BODY(RETRANSMISSION), 2000);
  assert_non_null(e);
  int got_term = 0;
  for (;;) {
    e = gt_recv(&a, 2000);
    if (e == NULL) break;
    if (e->body_case == BODY(TERMINATE)) {
      assert_int_equal(e->terminate->code, TERMC(RETRANSMIT_IN_PROGRESS));
      got_term = 1;
      break;
    }
  }
  assert_true(got_term);
  gt_close(&a);
  ts_server_stop(&s);
}

/* ------------------------------------------------------------- throttle */

static void tight_throttle(hg_gateway_config_t *cfg) {
  cfg->throttle_rate = 5;
  cfg->throttle_burst = 5;
}

static void test_throttle(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, tight_throttle);
  gt_client_t a;
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  /* Corked, the ten orders leave in one segment when uncorked, so the
   * burst reaches the gateway at once however late this thread runs
   * between two sends (a 400 ms stall here would otherwise refill two
   * tokens mid-burst). */
  int on = 1, off = 0;
  assert_int_equal(setsockopt(a.fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on), 0);
  for (int i = 0; i < 10; i++) gt_new_order(&a, 1, 200 + (uint64_t)i, 0, 100, 1, 0);
  assert_int_equal(setsockopt(a.fd, IPPROTO_TCP, TCP_CORK, &off, sizeof off), 0);
  int news = 0, throttled = 0;
  uint64_t first = 0;
  for (int i = 0; i < 10; i++) {
    env_t *e = gt_expect(&a, BODY(EXECUTION_REPORT), 2000);
    assert_non_null(e);
    if (e->execution_report->exec_type == EXEC(NEW)) {
      news++;
      if (first == 0) first = e->execution_report->order_id;
    } else {
      assert_int_equal(e->execution_report->exec_type, EXEC(REJECTED));
      assert_int_equal(e->execution_report->reason, REJ(THROTTLED));
      throttled++;
    }
  }
  /* The burst passes (the refill during the burst is at most one token). */
  assert_true(news >= 5 && news <= 6);
  assert_int_equal(news + throttled, 10);
  /* Cancels are never throttled. */
  gt_cancel(&a, 1, first);
  expect_er(&a, EXEC(CANCELLED));
  /* The session stays up and the bucket refills. */
  usleep(450 * 1000);
  gt_new_order(&a, 1, 300, 0, 100, 1, 0);
  expect_er(&a, EXEC(NEW));
  gt_close(&a);
  ts_server_stop(&s);
}

/* --------------------------------------------------- cancel-on-disconnect */

typedef struct level {
  uint32_t instrument_id;
  int side;
  int64_t price;
} level_t;

/* Reads c's frames until market data has said, for each of the n levels,
 * that it is gone (in any order). A disconnect's cancels go through the
 * engine like any other command, so how long they take depends on the
 * machine's load: wait for them to land, not for a fixed time. Fails after
 * 10 s. */
static void wait_levels_gone(gt_client_t *c, const level_t *lv, int n) {
  enum { MAX_LEVELS = 4 };
  assert_true(n <= MAX_LEVELS);
  bool gone[MAX_LEVELS] = {0};
  int left = n;
  uint64_t end = gt_now_ns() + 10000000000ull;
  for (uint64_t now; left > 0 && (now = gt_now_ns()) < end;) {
    env_t *e = gt_recv(c, (int)((end - now) / 1000000u) + 1);
    if (e == NULL) break;
    if (e->body_case != BODY(MD_LEVEL) || e->md_level->qty != 0) continue;
    for (int i = 0; i < n; i++) {
      if (!gone[i] && e->md_level->instrument_id == lv[i].instrument_id &&
          (int)e->md_level->side == lv[i].side && e->md_level->price == lv[i].price) {
        gone[i] = true;
        left--;
      }
    }
  }
  for (int i = 0; i < n; i++)
    if (!gone[i])
      fail_msg("level %d@%lld of instrument %u still there after 10 s", lv[i].side,
               (long long)lv[i].price, lv[i].instrument_id);
}

static void test_cancel_on_disconnect(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t a, c, b;
  /* A with COD rests two orders; C (same firm, no COD) rests one. */
  assert_true(gt_login(&a, s.port, TA, 1, 0) > 0);
  assert_true(gt_login(&c, s.port, TC, 0, 0) > 0);
  gt_new_order(&a, 1, 1, 0, 400, 5, 0);
  uint64_t a1 = expect_er(&a, EXEC(NEW))->execution_report->order_id;
  gt_new_order(&a, 2, 2, 1, 900, 5, 1);
  uint64_t a2 = expect_er(&a, EXEC(NEW))->execution_report->order_id;
  gt_new_order(&c, 1, 3, 0, 401, 5, 0);
  uint64_t c1 = expect_er(&c, EXEC(NEW))->execution_report->order_id;
  /* B watches both books to see when the cancels have landed. */
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);
  md_subscribe(&b, 1);
  assert_non_null(gt_expect(&b, BODY(MD_SNAPSHOT), 2000));
  md_subscribe(&b, 2);
  assert_non_null(gt_expect(&b, BODY(MD_SNAPSHOT), 2000));
  /* A drops without logout. */
  gt_close(&a);
  wait_levels_gone(&b, (const level_t[]){{1, 0, 400}, {2, 1, 900}}, 2);
  gt_close(&b);
  /* A's orders are gone, C's stays: check via a fresh snapshot. */
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);
  md_subscribe(&b, 1);
  env_t *e = gt_expect(&b, BODY(MD_SNAPSHOT), 2000);
  assert_non_null(e);
  assert_int_equal(e->md_snapshot->n_bids, 1);
  assert_int_equal(e->md_snapshot->bids[0]->price, 401);
  gt_status(&c, 1, c1);
  assert_true(gt_expect(&c, BODY(ORDER_STATUS), 2000)->order_status->live);
  /* A logs in again: its stream holds the two cancellations. */
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  gt_status(&a, 1, a1);
  e = gt_expect(&a, BODY(ORDER_STATUS), 2000);
  assert_false(e->order_status->live);
  gt_status(&a, 2, a2);
  e = gt_expect(&a, BODY(ORDER_STATUS), 2000);
  assert_false(e->order_status->live);
  gt_close(&a);

  /* Keepalive lapse: A (COD, keepalive 100 ms) goes silent. */
  assert_true(gt_login(&a, s.port, TA, 1, 100) > 0);
  gt_new_order(&a, 1, 10, 0, 402, 5, 0);
  uint64_t a3 = expect_er(&a, EXEC(NEW))->execution_report->order_id;
  int warned = 0, terminated = 0;
  for (;;) {
    e = gt_recv(&a, 1000);
    if (e == NULL) break;
    if (e->body_case == BODY(WARNING)) warned = 1;
    if (e->body_case == BODY(TERMINATE)) {
      assert_int_equal(e->terminate->code, TERMC(KEEPALIVE_LAPSED));
      terminated = 1;
      break;
    }
  }
  assert_true(warned);
  assert_true(terminated);
  gt_close(&a);
  wait_levels_gone(&b, (const level_t[]){{1, 0, 402}}, 1); /* B still watches it */
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  gt_status(&a, 1, a3);
  assert_false(gt_expect(&a, BODY(ORDER_STATUS), 2000)->order_status->live);
  gt_close(&a);
  gt_close(&b);
  gt_close(&c);
  ts_server_stop(&s);
}

/* c's own Positions; the entry of instrument id (asserted present). */
static const Hourglass__V1__Position *own_position(gt_client_t *c, uint32_t id) {
  Hourglass__V1__PositionsRequest pr = HOURGLASS__V1__POSITIONS_REQUEST__INIT;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(POSITIONS_REQUEST);
  q.positions_request = &pr;
  assert_int_equal(gt_send(c, &q), 0);
  env_t *e = gt_expect(c, BODY(POSITIONS), 3000);
  assert_non_null(e);
  for (size_t i = 0; i < e->positions->n_positions; i++)
    if (e->positions->positions[i]->instrument_id == id) return e->positions->positions[i];
  fail_msg("no position in instrument %u", id);
  return NULL;
}

/* A trades against B at 510, 505 and 502 around the reference price 500
 * (no daily settlement yet; tick value 1000 x 1000 micro-USD = 1 USD).
 * Hand-computed: after +5@510 -2@505 A holds 3 at an average of 510
 * (open value 1530 ticks), P&L at 500: 3*500 - (2550 - 1010) = -40 ticks
 * = -40 USD; B the opposite. Then -5@502 flips A to -2 at 502 (open value
 * -1004) with P&L -50 + 10 + 10 = -30 USD. After a restart the P&L
 * comes from the clearing's sums; the entry prices are not known. */
static void test_positions_pnl(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 0, NULL);
  gt_client_t a, b;
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);
  const struct { int b_side; int64_t px, qty; } legs[] = {{1, 510, 5}, {0, 505, 2}, {0, 502, 5}};
  for (size_t k = 0; k < 3; k++) {
    gt_new_order(&b, 2, 100 + k, legs[k].b_side, legs[k].px, legs[k].qty, 0);
    expect_er(&b, EXEC(NEW));
    gt_new_order(&a, 2, 200 + k, legs[k].b_side ^ 1, legs[k].px, legs[k].qty, 0);
    expect_er(&a, EXEC(NEW));
    expect_er(&a, EXEC(FILL));
    expect_er(&b, EXEC(FILL));
    if (k == 1) {
      const Hourglass__V1__Position *p = own_position(&a, 2);
      assert_int_equal(p->net_qty, 3);
      assert_int_equal(p->settle_price, 500);
      assert_true(p->has_open_value);
      assert_int_equal(p->open_value, 1530);
      assert_int_equal(p->pnl, -40000000);
      p = own_position(&b, 2);
      assert_int_equal(p->net_qty, -3);
      assert_int_equal(p->open_value, -1530);
      assert_int_equal(p->pnl, 40000000);
    }
  }
  const Hourglass__V1__Position *p = own_position(&a, 2);
  assert_int_equal(p->net_qty, -2);
  assert_int_equal(p->open_value, -1004);
  assert_int_equal(p->pnl, -30000000);
  gt_close(&a);
  gt_close(&b);
  usleep(50 * 1000);
  ts_server_halt(&s);
  assert_int_equal(ts_server_reopen(&s, 0, NULL, NULL), 0);
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  p = own_position(&a, 2);
  assert_int_equal(p->net_qty, -2);
  assert_int_equal(p->pnl, -30000000);
  assert_false(p->has_open_value);
  gt_close(&a);
  ts_server_stop(&s);
}

/* Logs c in as key and returns its LoginAck's ref_seq_base. */
static uint64_t login_base(gt_client_t *c, uint16_t port, uint64_t key, int cod) {
  uint8_t sec[32];
  ts_key_secret(key, sec);
  assert_int_equal(gt_connect(c, port), 0);
  assert_int_equal(gt_send_login(c, key, sec, 0, cod, 30000, 0), 0);
  env_t *e = gt_expect(c, BODY(LOGIN_ACK), 3000);
  assert_non_null(e);
  return e->login_ack->has_ref_seq_base ? e->login_ack->ref_seq_base : 0;
}

/* Two sessions of one key: each receives the key's whole stream (the same
 * seqs), tells its own replies by ref_seq (request seq + its base), and
 * cancel-on-disconnect cancels only what the closed session entered. */
static void test_sessions_of_one_key(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t a1, a2, b;
  assert_int_equal(login_base(&a1, s.port, TA, 1), 0);
  uint64_t base = login_base(&a2, s.port, TA, 0);
  assert_true(base != 0);
  /* a2's order: both sessions get its NEW, one seq, a2's ref_seq. */
  gt_new_order(&a2, 1, 21, 0, 500, 5, 0);
  env_t *e = expect_er(&a2, EXEC(NEW));
  uint64_t seq_new = e->seq, o2 = e->execution_report->order_id;
  assert_int_equal(e->execution_report->ref_seq, 1 + base);
  e = expect_er(&a1, EXEC(NEW));
  assert_int_equal(e->seq, seq_new);
  assert_int_equal(e->execution_report->order_id, o2);
  assert_int_equal(e->execution_report->ref_seq, 1 + base);
  /* a1's cancel-on-disconnect order: ref_seq 1, the next seq, in both. */
  gt_new_order(&a1, 2, 22, 1, 900, 5, 0);
  e = expect_er(&a1, EXEC(NEW));
  uint64_t o1 = e->execution_report->order_id;
  assert_int_equal(e->execution_report->ref_seq, 1);
  assert_int_equal(e->seq, seq_new + 1);
  e = expect_er(&a2, EXEC(NEW));
  assert_int_equal(e->seq, seq_new + 1);
  assert_int_equal(e->execution_report->ref_seq, 1);
  /* B hits a2's bid: the fill reaches both sessions. */
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);
  gt_new_order(&b, 1, 23, 1, 500, 2, 0);
  e = expect_er(&a1, EXEC(FILL));
  assert_int_equal(e->execution_report->order_id, o2);
  uint64_t seq_fill = e->seq;
  e = expect_er(&a2, EXEC(FILL));
  assert_int_equal(e->seq, seq_fill);
  /* a1 drops: only its own order is cancelled, reported to a2. */
  gt_close(&a1);
  e = expect_er(&a2, EXEC(CANCELLED));
  assert_int_equal(e->execution_report->order_id, o1);
  gt_status(&a2, 1, o2);
  e = gt_expect(&a2, BODY(ORDER_STATUS), 2000);
  assert_non_null(e);
  assert_int_equal(e->order_status->ref_seq, 2 + base);
  assert_true(e->order_status->live);
  assert_int_equal(e->order_status->leaves, 3);
  /* a2 is now the key's only session; a new one joins with a new base. */
  uint64_t base3 = login_base(&a1, s.port, TA, 0);
  assert_true(base3 != 0 && base3 != base);
  gt_close(&a1);
  gt_close(&a2);
  gt_close(&b);
  ts_server_stop(&s);
}

/* ----------------------------------------------------- mass quote and MMP */

static void send_quote(gt_client_t *m, uint32_t group, int64_t bid, int64_t bq, int64_t ask,
                       int64_t aq, int64_t mmp) {
  Hourglass__V1__QuoteEntry qe = HOURGLASS__V1__QUOTE_ENTRY__INIT;
  qe.instrument_id = 1;
  qe.has_bid_price = qe.has_bid_qty = qe.has_ask_price = qe.has_ask_qty = 1;
  qe.bid_price = bid;
  qe.bid_qty = bq;
  qe.ask_price = ask;
  qe.ask_qty = aq;
  Hourglass__V1__QuoteEntry *pe = &qe;
  Hourglass__V1__MassQuote mq = HOURGLASS__V1__MASS_QUOTE__INIT;
  mq.quote_group = group;
  mq.n_entries = 1;
  mq.entries = &pe;
  if (mmp > 0) {
    mq.has_mmp_qty = 1;
    mq.mmp_qty = mmp;
    mq.has_mmp_window_ms = 1;
    mq.mmp_window_ms = 10000;
  }
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(MASS_QUOTE);
  q.mass_quote = &mq;
  gt_send(m, &q);
}

static void test_mass_quote_mmp(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t m, b;
  assert_true(gt_login(&m, s.port, MM, 0, 0) > 0);
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);
  /* A trader may not quote. */
  send_quote(&b, 1, 100, 10, 110, 10, 0);
  assert_int_equal(gt_response_reason(&b), REJ(NOT_PERMITTED));
  send_quote(&m, 1, 100, 10, 110, 10, 15);
  env_t *e = gt_expect(&m, BODY(MASS_QUOTE_ACK), 2000);
  assert_non_null(e);
  assert_int_equal(e->mass_quote_ack->reason, 0);
  assert_int_equal(e->mass_quote_ack->n_rejects, 0);
  uint64_t bid1 = expect_er(&m, EXEC(NEW))->execution_report->order_id;
  e = expect_er(&m, EXEC(NEW));
  assert_int_equal(e->execution_report->quote_group, 1);
  /* Requote: the previous quote is replaced. */
  send_quote(&m, 1, 101, 10, 109, 10, 0);
  assert_non_null(gt_expect(&m, BODY(MASS_QUOTE_ACK), 2000));
  int cancelled = 0, news = 0;
  for (int i = 0; i < 4; i++) {
    e = gt_expect(&m, BODY(EXECUTION_REPORT), 2000);
    assert_non_null(e);
    if (e->execution_report->exec_type == EXEC(CANCELLED)) cancelled++;
    if (e->execution_report->exec_type == EXEC(NEW)) news++;
  }
  assert_int_equal(cancelled, 2);
  assert_int_equal(news, 2);
  gt_status(&m, 1, bid1);
  assert_false(gt_expect(&m, BODY(ORDER_STATUS), 2000)->order_status->live);
  /* B hits the bid (10) and lifts the ask (10): 20 > 15 trips protection. */
  gt_new_order(&b, 1, 1, 1, 101, 10, 2);
  gt_new_order(&b, 1, 2, 0, 109, 10, 2);
  int fills = 0, tripped = 0;
  while (!tripped || fills < 2) {
    e = gt_recv(&m, 2000);
    assert_non_null(e);
    if (e->body_case == BODY(EXECUTION_REPORT) && e->execution_report->exec_type == EXEC(FILL))
      fills++;
    if (e->body_case == BODY(MMP_TRIGGERED)) {
      tripped = 1;
      assert_int_equal(e->mmp_triggered->quote_group, 1);
      assert_int_equal(e->mmp_triggered->filled_qty, 20);
    }
  }
  /* Stays pulled until reset. */
  send_quote(&m, 1, 100, 5, 110, 5, 0);
  e = gt_expect(&m, BODY(MASS_QUOTE_ACK), 2000);
  assert_int_equal(e->mass_quote_ack->reason, REJ(MMP_TRIPPED));
  Hourglass__V1__QuoteGroupReset rs = HOURGLASS__V1__QUOTE_GROUP_RESET__INIT;
  rs.quote_group = 1;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(QUOTE_GROUP_RESET);
  q.quote_group_reset = &rs;
  gt_send(&m, &q);
  assert_int_equal(gt_response_reason(&m), 0);
  send_quote(&m, 1, 100, 5, 110, 5, 0);
  e = gt_expect(&m, BODY(MASS_QUOTE_ACK), 2000);
  assert_int_equal(e->mass_quote_ack->reason, 0);
  gt_close(&m);
  gt_close(&b);
  ts_server_stop(&s);
}

/* ------------------------------------------- what a market maker is told */

/* Operator: AddApiKey over the wire; returns the Response's reason. */
static int add_api_key(gt_client_t *op, uint64_t key_id, uint32_t role, uint32_t account,
                       uint32_t firm) {
  uint8_t sec[32];
  ts_key_secret(key_id, sec);
  Hourglass__V1__AddApiKey k = HOURGLASS__V1__ADD_API_KEY__INIT;
  k.key_id = key_id;
  k.secret.data = sec;
  k.secret.len = sizeof sec;
  k.role = role;
  k.has_account = account != 0;
  k.account = account;
  k.has_firm = firm != 0;
  k.firm = firm;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(ADD_API_KEY);
  q.add_api_key = &k;
  gt_send(op, &q);
  return gt_response_reason(op);
}

static void md_unsubscribe_req(gt_client_t *c, uint32_t instrument_id) {
  Hourglass__V1__MarketDataUnsubscribe mu = HOURGLASS__V1__MARKET_DATA_UNSUBSCRIBE__INIT;
  mu.instrument_id = instrument_id;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(MD_UNSUBSCRIBE);
  q.md_unsubscribe = &mu;
  gt_send(c, &q);
}

/* A REJECTED report echoes the price and quantity it refused, whichever
 * layer refused it (book, exchange, gateway). */
static void test_reject_echoes_request(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t a;
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  /* The book: a price above max_price (100000). */
  gt_new_order(&a, 1, 9001, 1, 200000, 7, 0);
  const Hourglass__V1__ExecutionReport *er = expect_er(&a, EXEC(REJECTED))->execution_report;
  assert_int_equal(er->reason, REJ(PRICE_OUT_OF_RANGE));
  assert_int_equal(er->request, HOURGLASS__V1__REQUEST_KIND__REQ_NEW_ORDER);
  assert_true(er->has_price && er->has_qty && er->has_side);
  assert_int_equal(er->price, 200000);
  assert_int_equal(er->qty, 7);
  assert_int_equal(er->side, HOURGLASS__V1__SIDE__SIDE_SELL);
  assert_int_equal(er->client_order_id, 9001);
  assert_true(er->order_id > 0); /* a rejected order still gets its id */
  /* The exchange: an unknown instrument. */
  gt_new_order(&a, 77, 9002, 0, 450, 3, 0);
  er = expect_er(&a, EXEC(REJECTED))->execution_report;
  assert_int_equal(er->reason, REJ(UNKNOWN_INSTRUMENT));
  assert_true(er->has_order_id && er->order_id > 0); /* the engine's seq, as above */
  assert_int_equal(er->price, 450);
  assert_int_equal(er->qty, 3);
  assert_true(er->has_side);
  assert_int_equal(er->side, HOURGLASS__V1__SIDE__SIDE_BUY);
  /* A replace of an unknown order: new_price and new_qty. */
  gt_replace(&a, 1, 424242, 510, 4);
  er = expect_er(&a, EXEC(REJECTED))->execution_report;
  assert_int_equal(er->reason, REJ(UNKNOWN_ORDER));
  assert_int_equal(er->request, HOURGLASS__V1__REQUEST_KIND__REQ_REPLACE);
  assert_true(er->has_price && er->has_qty);
  assert_int_equal(er->price, 510);
  assert_int_equal(er->qty, 4);
  /* The gateway itself: a client order id in the quotes' half. */
  gt_new_order(&a, 1, (uint64_t)1 << 63 | 5, 0, 480, 2, 0);
  er = expect_er(&a, EXEC(REJECTED))->execution_report;
  assert_int_equal(er->reason, REJ(INVALID_REQUEST));
  assert_false(er->has_order_id); /* never reached the engine: no order id */
  assert_int_equal(er->price, 480);
  assert_int_equal(er->qty, 2);
  /* A cancel has nothing to echo. */
  gt_cancel(&a, 1, 424242);
  er = expect_er(&a, EXEC(REJECTED))->execution_report;
  assert_false(er->has_price);
  assert_false(er->has_qty);
  /* A role refusal echoes too. */
  gt_client_t v;
  assert_true(gt_login(&v, s.port, RV1, 0, 0) > 0);
  gt_new_order(&v, 1, 9003, 1, 470, 9, 0);
  er = expect_er(&v, EXEC(REJECTED))->execution_report;
  assert_int_equal(er->reason, REJ(NOT_PERMITTED));
  assert_false(er->has_order_id);
  assert_int_equal(er->side, HOURGLASS__V1__SIDE__SIDE_SELL);
  assert_int_equal(er->price, 470);
  assert_int_equal(er->qty, 9);
  gt_close(&v);
  gt_close(&a);
  ts_server_stop(&s);
}

/* MassQuote refusals: the gateway's per entry in the ack, the engine's as
 * execution reports; quoting an instrument in a new group pulls the old
 * group's quote there. */
static void test_quote_rejects_and_groups(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t m, b;
  assert_true(gt_login(&m, s.port, MM, 0, 0) > 0);
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);
  send_quote(&m, 1, 100, 10, 110, 10, 0);
  env_t *e = gt_expect(&m, BODY(MASS_QUOTE_ACK), 2000);
  assert_non_null(e);
  assert_int_equal(e->mass_quote_ack->n_rejects, 0);
  expect_er(&m, EXEC(NEW));
  expect_er(&m, EXEC(NEW));
  /* B rests an ask at 120: a bid quote at 130 would cross it. */
  gt_new_order(&b, 1, 1, 1, 120, 3, 0);
  expect_er(&b, EXEC(NEW));
  Hourglass__V1__QuoteEntry qe[2];
  Hourglass__V1__QuoteEntry *pe[2] = {&qe[0], &qe[1]};
  for (int i = 0; i < 2; i++) {
    hourglass__v1__quote_entry__init(&qe[i]);
    qe[i].has_bid_price = qe[i].has_bid_qty = qe[i].has_ask_price = qe[i].has_ask_qty = 1;
  }
  qe[0].instrument_id = 1;
  qe[0].bid_price = 130;
  qe[0].bid_qty = 5;
  qe[0].ask_price = 140;
  qe[0].ask_qty = 6;
  qe[1].instrument_id = 77; /* not listed */
  qe[1].bid_price = 100;
  qe[1].bid_qty = 1;
  Hourglass__V1__MassQuote mq = HOURGLASS__V1__MASS_QUOTE__INIT;
  mq.quote_group = 2;
  mq.n_entries = 2;
  mq.entries = pe;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(MASS_QUOTE);
  q.mass_quote = &mq;
  gt_send(&m, &q);
  e = gt_expect(&m, BODY(MASS_QUOTE_ACK), 2000);
  assert_non_null(e);
  assert_int_equal(e->mass_quote_ack->reason, 0);
  assert_int_equal(e->mass_quote_ack->quote_group, 2);
  assert_int_equal(e->mass_quote_ack->n_rejects, 1);
  assert_int_equal(e->mass_quote_ack->rejects[0]->index, 1);
  assert_int_equal(e->mass_quote_ack->rejects[0]->reason, REJ(UNKNOWN_INSTRUMENT));
  /* Group 1's two quotes in instrument 1 are pulled; the bid of group 2
   * is refused by the book (post-only would cross), the ask rests. */
  int cancelled_g1 = 0, rejected = 0, news = 0;
  for (int i = 0; i < 4; i++) {
    e = gt_expect(&m, BODY(EXECUTION_REPORT), 2000);
    assert_non_null(e);
    const Hourglass__V1__ExecutionReport *er = e->execution_report;
    if (er->exec_type == EXEC(CANCELLED)) {
      assert_int_equal(er->quote_group, 1);
      assert_int_equal(er->reason, HOURGLASS__V1__CANCEL_REASON__CXL_USER);
      cancelled_g1++;
    } else if (er->exec_type == EXEC(REJECTED)) {
      assert_int_equal(er->reason, REJ(POST_ONLY_WOULD_CROSS));
      assert_int_equal(er->request, HOURGLASS__V1__REQUEST_KIND__REQ_QUOTE);
      assert_int_equal(er->quote_group, 2);
      assert_int_equal(er->side, HOURGLASS__V1__SIDE__SIDE_BUY);
      assert_int_equal(er->price, 130);
      assert_int_equal(er->qty, 5);
      assert_true(er->order_id > 0);
      assert_true((er->client_order_id >> 63) == 1);
      rejected++;
    } else {
      assert_int_equal(er->exec_type, EXEC(NEW));
      assert_int_equal(er->quote_group, 2);
      assert_int_equal(er->price, 140);
      news++;
    }
  }
  assert_int_equal(cancelled_g1, 2);
  assert_int_equal(rejected, 1);
  assert_int_equal(news, 1);
  gt_close(&m);
  gt_close(&b);
  ts_server_stop(&s);
}

/* AddApiKey: a trading key must name a known account of the firm given. */
static void test_add_api_key_account_firm(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t op, t;
  assert_true(gt_login(&op, s.port, OP, 0, 0) > 0);
  /* ACC_A is firm 1. */
  assert_int_equal(add_api_key(&op, 50, HG_ROLE_TRADER, ACC_A, 2), REJ(FIRM_MISMATCH));
  assert_int_equal(add_api_key(&op, 50, HG_ROLE_MARKET_MAKER, ACC_A, 3), REJ(FIRM_MISMATCH));
  assert_int_equal(add_api_key(&op, 50, HG_ROLE_TRADER, 999, 1), REJ(UNKNOWN_ACCOUNT));
  assert_int_equal(add_api_key(&op, 50, HG_ROLE_TRADER, ACC_A, 0), REJ(INVALID_REQUEST));
  assert_int_equal(add_api_key(&op, 50, HG_ROLE_TRADER, 0, 1), REJ(INVALID_REQUEST));
  /* None of the refusals stored the key: it does not log in. */
  assert_true(gt_connect(&t, s.port) == 0);
  uint8_t sec[32];
  ts_key_secret(50, sec);
  assert_int_equal(gt_send_login(&t, 50, sec, 0, 0, 30000, 0), 0);
  env_t *e = gt_expect(&t, BODY(LOGIN_REJECT), 2000);
  assert_non_null(e);
  assert_int_equal(e->login_reject->code, LREJ(AUTH_FAILED));
  gt_close(&t);
  /* The right firm: stored, and the key trades for the account. */
  assert_int_equal(add_api_key(&op, 50, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(add_api_key(&op, 51, HG_ROLE_RISK_VIEWER, 0, 2), 0);
  /* An id already stored is refused, whatever the rest says. */
  assert_int_equal(add_api_key(&op, 50, HG_ROLE_TRADER, ACC_A, 1), REJ(KEY_EXISTS));
  assert_int_equal(add_api_key(&op, 51, HG_ROLE_OPERATOR, 0, 0), REJ(KEY_EXISTS));
  assert_true(gt_login(&t, s.port, 50, 0, 0) > 0);
  gt_new_order(&t, 1, 1, 0, 400, 1, 0);
  assert_int_equal(expect_er(&t, EXEC(NEW))->execution_report->ref_seq, t.seq);
  gt_close(&t);
  gt_close(&op);
  ts_server_stop(&s);
}

/* The next application reply on c (heartbeats, warnings and market data
 * skipped). */
static env_t *next_reply(gt_client_t *c) {
  for (;;) {
    env_t *e = gt_recv(c, 3000);
    assert_non_null(e);
    if (e->body_case != BODY(HEARTBEAT) && e->body_case != BODY(WARNING) &&
        e->body_case != BODY(MD_LEVEL) && e->body_case != BODY(MD_TRADE) &&
        e->body_case != BODY(MD_STATUS))
      return e;
  }
}

/* A request outside the key's role: NewOrderRequest, CancelRequest and
 * ReplaceRequest get a REJECTED ExecutionReport with no instrument or order
 * id; every other request gets a Response with REJ_NOT_PERMITTED, not its
 * usual reply type (proto/README.md, Roles). Nothing else is sent. */
static void test_role_refusal_reply_types(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t op, t, v;
  assert_true(gt_login(&op, s.port, OP, 0, 0) > 0);
  assert_true(gt_login(&t, s.port, TA, 0, 0) > 0);
  assert_true(gt_login(&v, s.port, RV1, 0, 0) > 0);
  Hourglass__V1__NewOrderRequest no = HOURGLASS__V1__NEW_ORDER_REQUEST__INIT;
  no.instrument_id = 1;
  no.client_order_id = 1;
  no.has_price = 1;
  no.price = 500;
  no.qty = 1;
  Hourglass__V1__CancelRequest cx = HOURGLASS__V1__CANCEL_REQUEST__INIT;
  cx.instrument_id = 1;
  cx.order_id = 1;
  Hourglass__V1__ReplaceRequest rp = HOURGLASS__V1__REPLACE_REQUEST__INIT;
  rp.instrument_id = 1;
  rp.order_id = 1;
  rp.new_price = 500;
  rp.new_qty = 1;
  Hourglass__V1__MassCancelRequest mc = HOURGLASS__V1__MASS_CANCEL_REQUEST__INIT;
  Hourglass__V1__OrderStatusRequest os = HOURGLASS__V1__ORDER_STATUS_REQUEST__INIT;
  os.instrument_id = 1;
  os.order_id = 1;
  Hourglass__V1__MassQuote mq = HOURGLASS__V1__MASS_QUOTE__INIT;
  mq.quote_group = 1;
  Hourglass__V1__QuoteGroupReset qr = HOURGLASS__V1__QUOTE_GROUP_RESET__INIT;
  qr.quote_group = 1;
  Hourglass__V1__PositionsRequest pr = HOURGLASS__V1__POSITIONS_REQUEST__INIT;
  Hourglass__V1__StatementRequest sr = HOURGLASS__V1__STATEMENT_REQUEST__INIT;
  Hourglass__V1__DropCopySubscribe dc = HOURGLASS__V1__DROP_COPY_SUBSCRIBE__INIT;
  Hourglass__V1__AddApiKey ak = HOURGLASS__V1__ADD_API_KEY__INIT;
  uint8_t secret[32] = {1};
  ak.key_id = 77;
  ak.secret.data = secret;
  ak.secret.len = sizeof secret;
  ak.role = HG_ROLE_TRADER;
  Hourglass__V1__DailySettlement ds = HOURGLASS__V1__DAILY_SETTLEMENT__INIT;
  ds.day = 20859;
  Hourglass__V1__ClusterRequest cr = HOURGLASS__V1__CLUSTER_REQUEST__INIT;
  cr.op = HOURGLASS__V1__CLUSTER_OP__CLUSTER_STATUS;
  const struct {
    gt_client_t *c;
    uint32_t body;
    void *msg;
    uint32_t req; /* REQ_* for an ExecutionReport; 0: a Response */
  } cases[] = {
      {&op, BODY(NEW_ORDER), &no, HOURGLASS__V1__REQUEST_KIND__REQ_NEW_ORDER},
      {&op, BODY(CANCEL), &cx, HOURGLASS__V1__REQUEST_KIND__REQ_CANCEL},
      {&op, BODY(REPLACE), &rp, HOURGLASS__V1__REQUEST_KIND__REQ_REPLACE},
      {&op, BODY(MASS_CANCEL), &mc, 0},
      {&op, BODY(ORDER_STATUS_REQUEST), &os, 0},
      {&op, BODY(POSITIONS_REQUEST), &pr, 0},
      {&op, BODY(STATEMENT_REQUEST), &sr, 0},
      {&op, BODY(DROP_COPY_SUBSCRIBE), &dc, 0},
      {&t, BODY(MASS_QUOTE), &mq, 0},
      {&t, BODY(QUOTE_GROUP_RESET), &qr, 0},
      {&t, BODY(DROP_COPY_SUBSCRIBE), &dc, 0},
      {&t, BODY(ADD_API_KEY), &ak, 0},
      {&t, BODY(DAILY_SETTLEMENT), &ds, 0},
      {&t, BODY(CLUSTER_REQUEST), &cr, 0},
      {&v, BODY(CLUSTER_REQUEST), &cr, 0},
      {&v, BODY(NEW_ORDER), &no, HOURGLASS__V1__REQUEST_KIND__REQ_NEW_ORDER},
      {&v, BODY(MASS_QUOTE), &mq, 0},
      {&v, BODY(MASS_CANCEL), &mc, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    env_t q = HOURGLASS__V1__ENVELOPE__INIT;
    q.body_case = cases[i].body;
    q.new_order = cases[i].msg; /* the body is a union of pointers */
    assert_int_equal(gt_send(cases[i].c, &q), 0);
    env_t *e = next_reply(cases[i].c);
    if (cases[i].req != 0) {
      assert_int_equal(e->body_case, BODY(EXECUTION_REPORT));
      const Hourglass__V1__ExecutionReport *er = e->execution_report;
      assert_int_equal(er->exec_type, EXEC(REJECTED));
      assert_int_equal(er->reason, REJ(NOT_PERMITTED));
      assert_int_equal(er->request, cases[i].req);
      assert_int_equal(er->ref_seq, cases[i].c->seq);
      assert_int_equal(er->instrument_id, 0);
      assert_false(er->has_order_id);
    } else {
      if (e->body_case != BODY(RESPONSE)) fail_msg("case %zu: body %d", i, (int)e->body_case);
      assert_int_equal(e->response->reason, REJ(NOT_PERMITTED));
      assert_int_equal(e->response->ref_seq, cases[i].c->seq);
    }
  }
  /* Nothing followed the refusals. */
  gt_client_t *all[] = {&op, &t, &v};
  for (size_t i = 0; i < 3; i++) {
    env_t *e = gt_recv(all[i], 100);
    assert_true(e == NULL || e->body_case == BODY(HEARTBEAT));
  }
  gt_close(&v);
  gt_close(&t);
  gt_close(&op);
  ts_server_stop(&s);
}

/* An operator's ClusterRequest on a gateway that is not a cluster node
 * (no cluster_request callback) is answered by a ClusterStatus refusing it
 * REJ_INVALID_REQUEST, as is a malformed one (proto/README.md, "Cluster
 * membership"). */
static void test_cluster_request_single_node(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t op;
  assert_true(gt_login(&op, s.port, OP, 0, 0) > 0);
  Hourglass__V1__ClusterRequest cr = HOURGLASS__V1__CLUSTER_REQUEST__INIT;
  const struct {
    uint32_t op, id;
    char *raft, *client;
    const char *text; /* in the refusal */
  } cases[] = {
      {HOURGLASS__V1__CLUSTER_OP__CLUSTER_STATUS, 0, NULL, NULL, "not a cluster node"},
      {HOURGLASS__V1__CLUSTER_OP__CLUSTER_ADD, 4, "127.0.0.1:7304", "127.0.0.1:7704",
       "not a cluster node"},
      {HOURGLASS__V1__CLUSTER_OP__CLUSTER_ADD, 4, "127.0.0.1", "127.0.0.1:7704", "host:port"},
      {HOURGLASS__V1__CLUSTER_OP__CLUSTER_REMOVE, 17, NULL, NULL, "id 1..16"},
      {HOURGLASS__V1__CLUSTER_OP__CLUSTER_REMOVE, 2, "127.0.0.1:7304", NULL, "op 1..4"},
      {9, 0, NULL, NULL, "op 1..4"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cr.op = cases[i].op;
    cr.has_id = cases[i].id != 0;
    cr.id = cases[i].id;
    cr.raft_address = cases[i].raft;
    cr.client_address = cases[i].client;
    env_t q = HOURGLASS__V1__ENVELOPE__INIT;
    q.body_case = BODY(CLUSTER_REQUEST);
    q.cluster_request = &cr;
    assert_int_equal(gt_send(&op, &q), 0);
    env_t *e = next_reply(&op);
    if (e->body_case != BODY(CLUSTER_STATUS)) fail_msg("case %zu: body %d", i, (int)e->body_case);
    const Hourglass__V1__ClusterStatus *st = e->cluster_status;
    assert_int_equal(st->ref_seq, op.seq);
    assert_int_equal(st->reason, REJ(INVALID_REQUEST));
    if (st->text == NULL || strstr(st->text, cases[i].text) == NULL)
      fail_msg("case %zu: text '%s'", i, st->text ? st->text : "");
    assert_int_equal(st->n_members, 0);
  }
  gt_close(&op);
  ts_server_stop(&s);
}

/* Market data requests: a refused subscription is a Response in the key's
 * stream, never a snapshot; unsubscribing tells "not subscribed" from
 * "unknown instrument"; a delisted instrument is unknown to both. */
static void test_market_data_reply_codes(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  gt_client_t b, op;
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);
  assert_true(gt_login(&op, s.port, OP, 0, 0) > 0);
  md_subscribe_depth(&b, 1, 0, 1);
  env_t *e = next_reply(&b);
  assert_int_equal(e->body_case, BODY(RESPONSE));
  assert_int_equal(e->response->reason, REJ(INVALID_REQUEST));
  assert_true(e->seq > 0); /* sequenced */
  md_subscribe_depth(&b, 1, 51, 1);
  assert_int_equal(gt_response_reason(&b), REJ(INVALID_REQUEST));
  md_subscribe(&b, 77);
  e = next_reply(&b);
  assert_int_equal(e->body_case, BODY(RESPONSE));
  assert_int_equal(e->response->reason, REJ(UNKNOWN_INSTRUMENT));
  md_subscribe_depth(&b, 1, 50, 1);
  e = next_reply(&b);
  assert_int_equal(e->body_case, BODY(MD_SNAPSHOT));
  assert_false(e->md_snapshot->has_reason && e->md_snapshot->reason != 0);
  md_unsubscribe_req(&b, 2);
  assert_int_equal(gt_response_reason(&b), REJ(NOT_SUBSCRIBED));
  md_unsubscribe_req(&b, 77);
  assert_int_equal(gt_response_reason(&b), REJ(UNKNOWN_INSTRUMENT));
  md_unsubscribe_req(&b, 1);
  assert_int_equal(gt_response_reason(&b), 0);
  md_unsubscribe_req(&b, 1);
  assert_int_equal(gt_response_reason(&b), REJ(NOT_SUBSCRIBED));
  /* Delisted: unknown, subscribed or not. */
  md_subscribe(&b, 2);
  assert_non_null(gt_expect(&b, BODY(MD_SNAPSHOT), 2000));
  Hourglass__V1__DelistInstrument dl = HOURGLASS__V1__DELIST_INSTRUMENT__INIT;
  dl.instrument_id = 2;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(DELIST_INSTRUMENT);
  q.delist_instrument = &dl;
  gt_send(&op, &q);
  assert_int_equal(gt_response_reason(&op), 0);
  md_unsubscribe_req(&b, 2);
  assert_int_equal(gt_response_reason(&b), REJ(UNKNOWN_INSTRUMENT));
  md_subscribe(&b, 2);
  assert_int_equal(gt_response_reason(&b), REJ(UNKNOWN_INSTRUMENT));
  gt_close(&op);
  gt_close(&b);
  ts_server_stop(&s);
}

/* ---------------------------------------------------------- slow consumer */

static void small_cap(hg_gateway_config_t *cfg) {
  cfg->out_hard_cap = 128u << 10; /* the smallest allowed: two maximum frames */
  cfg->out_high_water = 16u << 10;
  cfg->socket_sndbuf = 8192;
  cfg->throttle_rate = 1000000;
}

static void test_slow_consumer(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, small_cap);
  /* S subscribes to market data with a tiny receive window and never reads. */
  gt_client_t slow, a;
  assert_int_equal(gt_connect(&slow, s.port), 0);
  close(slow.fd);
  slow.fd = socket(AF_INET, SOCK_STREAM, 0);
  int small = 2048;
  setsockopt(slow.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(s.port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(slow.fd, (struct sockaddr *)&sa, sizeof sa), 0);
  uint8_t sec[32];
  ts_key_secret(TB, sec);
  gt_send_login(&slow, TB, sec, 0, 0, 60000, 0);
  assert_non_null(gt_expect(&slow, BODY(LOGIN_ACK), 2000));
  md_subscribe(&slow, 1);
  assert_non_null(gt_expect(&slow, BODY(MD_SNAPSHOT), 2000));
  /* A makes plenty of market data (each replace moves a level: two level
   * messages), reading its own reports as it goes. */
  assert_true(gt_login(&a, s.port, TA, 0, 60000) > 0);
  gt_new_order(&a, 1, 1, 0, 100, 1, 0);
  uint64_t oid = expect_er(&a, EXEC(NEW))->execution_report->order_id;
  hg_gateway_stats_t st;
  int rounds = 0;
  for (; rounds < 200; rounds++) {
    for (int i = 0; i < 100; i++) gt_replace(&a, 1, oid, 100 + (i % 2), 1);
    for (int i = 0; i < 100; i++) expect_er(&a, EXEC(REPLACED));
    hg_gateway_stats(s.gw, &st);
    if (st.terminations > 0) break;
  }
  if (getenv("GT_VERBOSE"))
    fprintf(stderr, "rounds %d frames_out %llu terminations %llu\n", rounds,
            (unsigned long long)st.frames_out, (unsigned long long)st.terminations);
  assert_true(st.terminations > 0);
  /* The slow session is gone (after what was buffered), A is unaffected. */
  assert_true(gt_wait_closed(&slow, 3000));
  gt_new_order(&a, 1, 999999, 0, 5, 1, 0);
  expect_er(&a, EXEC(NEW));
  gt_close(&slow);
  gt_close(&a);
  ts_server_stop(&s);
}

/* ---------------------------------------------------------------- restart */

static void test_restart(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 0, NULL);
  gt_client_t a;
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 1);
  gt_new_order(&a, 1, 55, 1, 700, 4, 0);
  uint64_t oid = expect_er(&a, EXEC(NEW))->execution_report->order_id;
  gt_new_order(&a, 1, 56, 1, 701, 1, 0);
  expect_er(&a, EXEC(NEW));
  gt_close(&a);
  usleep(50 * 1000);
  ts_server_halt(&s);
  /* Same directories: keys, session ids and stream numbering survive; the
   * mirror is seeded from the recovered exchange. */
  assert_int_equal(ts_server_reopen(&s, 0, NULL, NULL), 0);
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 3);
  gt_status(&a, 1, oid);
  env_t *e = gt_expect(&a, BODY(ORDER_STATUS), 2000);
  assert_non_null(e);
  assert_true(e->order_status->live);
  assert_int_equal(e->order_status->leaves, 4);
  assert_int_equal(e->order_status->client_order_id, 55);
  assert_int_equal(e->seq, 3);
  /* Frames from before the restart come back from the outbound journal. */
  Hourglass__V1__RetransmitRequest rr = HOURGLASS__V1__RETRANSMIT_REQUEST__INIT;
  rr.from_seq = 1;
  rr.count = 1;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(RETRANSMIT_REQUEST);
  q.retransmit_request = &rr;
  gt_send(&a, &q);
  e = gt_expect(&a, BODY(RETRANSMISSION), 2000);
  assert_int_equal(e->retransmission->reason, 0);
  e = gt_expect(&a, BODY(EXECUTION_REPORT), 2000);
  assert_non_null(e);
  assert_int_equal(e->seq, 1);
  assert_int_equal(e->execution_report->client_order_id, 55);
  /* Market data seeded from the books. */
  md_subscribe(&a, 1);
  e = gt_expect(&a, BODY(MD_SNAPSHOT), 2000);
  assert_non_null(e);
  assert_int_equal(e->md_snapshot->n_asks, 2);
  assert_int_equal(e->md_snapshot->asks[0]->price, 700);
  assert_int_equal(e->md_snapshot->asks[1]->price, 701);
  /* The seeded order's events reach its account's key. */
  gt_cancel(&a, 1, oid);
  e = expect_er(&a, EXEC(CANCELLED));
  assert_int_equal(e->execution_report->order_id, oid);
  gt_close(&a);
  /* A session id used before the restart is still refused. */
  gt_client_t c;
  assert_int_equal(gt_connect(&c, s.port), 0);
  memcpy(c.sid, a.sid, 16);
  uint8_t sec[32];
  ts_key_secret(TA, sec);
  assert_int_equal(gt_send_login(&c, TA, sec, 0, 0, 0, 1), 0);
  expect_login_reject(&c, LREJ(SESSION_ID_REUSED));
  gt_close(&c);
  ts_server_stop(&s);
}

/* ------------------------------------------------------------- SIGPIPE */

/* The loop thread writes every socket; a client closing while it writes must
 * not kill the process, and this test program (like any embedder) leaves
 * SIGPIPE at its default. So the thread blocks it: checked in its mask. */
static void test_loop_thread_blocks_sigpipe(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, 1, NULL);
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  int found = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[300], line[256], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    if (fgets(comm, sizeof comm, f) == NULL) comm[0] = '\0';
    fclose(f);
    if (strncmp(comm, "hg-gateway", 10) != 0) continue;
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    f = fopen(path, "r");
    assert_non_null(f);
    unsigned long long blk = 0;
    while (fgets(line, sizeof line, f) != NULL)
      if (sscanf(line, "SigBlk: %llx", &blk) == 1) break;
    fclose(f);
    assert_true(blk & (1ull << (SIGPIPE - 1)));
    found = 1;
  }
  closedir(d);
  assert_true(found);
  ts_server_stop(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_login),
      cmocka_unit_test(test_cluster_request_single_node),
      cmocka_unit_test(test_violations),
      cmocka_unit_test(test_order_lifecycle),
      cmocka_unit_test(test_retransmit),
      cmocka_unit_test(test_throttle),
      cmocka_unit_test(test_cancel_on_disconnect),
      cmocka_unit_test(test_sessions_of_one_key),
      cmocka_unit_test(test_positions_pnl),
      cmocka_unit_test(test_mass_quote_mmp),
      cmocka_unit_test(test_reject_echoes_request),
      cmocka_unit_test(test_quote_rejects_and_groups),
      cmocka_unit_test(test_add_api_key_account_firm),
      cmocka_unit_test(test_market_data_reply_codes),
      cmocka_unit_test(test_role_refusal_reply_types),
      cmocka_unit_test(test_loop_thread_blocks_sigpipe),
      cmocka_unit_test(test_restart),
      cmocka_unit_test(test_slow_consumer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
