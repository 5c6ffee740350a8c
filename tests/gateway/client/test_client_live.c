/*
 * test_client_live.c - the client library against the real gateway over
 * loopback TCP: login and a refused login, the order lifecycle (new, replace,
 * cancel, mass cancel) with ref_seq matching, instruments, open orders and
 * positions,
 * market data, and recovery of the execution stream after a reconnect
 * (frames produced while disconnected arrive once, in order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client_util.h"

#define OP 1u
#define TA 10u
#define TB 11u
#define ACC_A 100u
#define ACC_B 200u

typedef Hourglass__V1__Envelope env_t;

static ts_server_t srv;

static int setup(void **state) {
  (void)state;
  ts_server_options_t o = {0};
  if (ts_server_create(&srv, &o) != 0) return -1;
  if (ts_server_add_key(&srv, OP, HG_ROLE_OPERATOR, 0, 0) != 0) return -1;
  if (ts_server_add_key(&srv, TA, HG_ROLE_TRADER, ACC_A, 1) != 0) return -1;
  if (ts_server_add_key(&srv, TB, HG_ROLE_TRADER, ACC_B, 2) != 0) return -1;
  if (ts_server_run(&srv) != 0) return -1;
  const uint32_t acc[] = {ACC_A, ACC_B}, firm[] = {1, 2};
  return ch_setup_market(&srv, OP, 2, acc, firm, 2);
}

static int teardown(void **state) {
  (void)state;
  ts_server_stop(&srv);
  return 0;
}

/* Next delivered frame of the given kind (others skipped). */
static const env_t *expect(hg_client_t *c, uint32_t body) {
  for (;;) {
    const env_t *e = NULL;
    int rc = hg_client_recv(c, 3000, &e);
    assert_int_equal(rc, 1);
    if (e->body_case == body) return e;
    assert_int_not_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_TERMINATE);
  }
}

static hg_client_order_t limit(uint64_t clid, uint32_t side, int64_t px, int64_t qty) {
  hg_client_order_t o = {.instrument_id = 1, .client_order_id = clid, .side = side,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC, .has_price = true,
                         .price = px, .qty = qty};
  return o;
}

static void test_login_refused(void **state) {
  (void)state;
  uint8_t wrong[32] = {1};
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = srv.port;
  cfg.key_id = TA;
  cfg.secret = wrong;
  cfg.secret_len = 32;
  hg_client_t *c = NULL;
  assert_int_equal(hg_client_create(&cfg, &c), 0);
  assert_int_equal(hg_client_connect(c), HG_EAUTH);
  uint32_t code = 0;
  bool term = true;
  assert_int_equal(hg_client_login_reject(c, &code, &term, NULL, 0), 0);
  assert_int_equal(code, HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_AUTH_FAILED);
  assert_false(term);
  hg_client_destroy(c);
}

static void test_order_lifecycle(void **state) {
  (void)state;
  hg_client_t *a = NULL;
  assert_int_equal(ch_client(&srv, TA, &a), 0);
  assert_int_equal(hg_client_connect(a), 0);
  const hg_client_session_t *s = hg_client_session(a);
  assert_int_equal(s->account, ACC_A);
  assert_int_equal(s->role, HG_ROLE_TRADER);

  uint64_t seq = 0;
  hg_client_order_t o = limit(7, HOURGLASS__V1__SIDE__SIDE_BUY, 500, 10);
  assert_int_equal(hg_client_new_order(a, &o, &seq), 0);
  const env_t *e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  const Hourglass__V1__ExecutionReport *r = e->execution_report;
  assert_int_equal(r->exec_type, HOURGLASS__V1__EXEC_TYPE__EXEC_NEW);
  assert_int_equal(r->ref_seq, seq);
  assert_int_equal(r->client_order_id, 7);
  assert_int_equal(r->leaves, 10);
  uint64_t oid = r->order_id;
  assert_true(oid > 0);

  assert_int_equal(hg_client_replace(a, 1, oid, 510, 8, &seq), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  assert_int_equal(e->execution_report->exec_type, HOURGLASS__V1__EXEC_TYPE__EXEC_REPLACED);
  assert_int_equal(e->execution_report->price, 510);

  assert_int_equal(hg_client_cancel(a, 1, oid, &seq), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  assert_int_equal(e->execution_report->exec_type, HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED);
  assert_int_equal(e->execution_report->order_id, oid);
  assert_int_equal(e->execution_report->ref_seq, seq);

  /* Cancelling it again: unknown order. */
  assert_int_equal(hg_client_cancel(a, 1, oid, &seq), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  assert_int_equal(e->execution_report->exec_type, HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED);
  assert_int_equal(e->execution_report->reason, HOURGLASS__V1__REJECT_REASON__REJ_UNKNOWN_ORDER);

  assert_int_equal(hg_client_instruments(a, &seq), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_INSTRUMENT_LIST);
  assert_int_equal(e->instrument_list->ref_seq, seq);
  assert_int_equal(e->instrument_list->n_instruments, 2);
  assert_string_equal(e->instrument_list->instruments[0]->symbol, "B200.A.2027-01");

  /* Two resting orders, then a mass cancel of the buy side only. */
  o = limit(8, HOURGLASS__V1__SIDE__SIDE_BUY, 400, 1);
  assert_int_equal(hg_client_new_order(a, &o, NULL), 0);
  expect(a, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  o = limit(9, HOURGLASS__V1__SIDE__SIDE_SELL, 900, 1);
  assert_int_equal(hg_client_new_order(a, &o, NULL), 0);
  expect(a, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  /* Both listed, one a page: the cursor leads to the second. */
  assert_int_equal(hg_client_open_orders(a, 0, 0, 0, 0, 1, &seq), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_OPEN_ORDERS);
  assert_int_equal(e->open_orders->ref_seq, seq);
  assert_int_equal(e->open_orders->n_orders, 1);
  assert_int_equal(e->open_orders->orders[0]->client_order_id, 8);
  assert_int_equal(e->open_orders->next_account, ACC_A);
  uint64_t next = e->open_orders->next_order_id;
  assert_int_equal(hg_client_open_orders(a, 0, 1, ACC_A, next, 0, &seq), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_OPEN_ORDERS);
  assert_int_equal(e->open_orders->n_orders, 1);
  assert_int_equal(e->open_orders->orders[0]->order_id, next);
  assert_int_equal(e->open_orders->orders[0]->client_order_id, 9);
  assert_int_equal(e->open_orders->next_order_id, 0);
  assert_int_equal(hg_client_mass_cancel(a, 1, HOURGLASS__V1__SIDE_FILTER__SIDES_BUY, &seq), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  assert_int_equal(e->execution_report->exec_type, HOURGLASS__V1__EXEC_TYPE__EXEC_CANCELLED);
  assert_int_equal(e->execution_report->client_order_id, 8);
  assert_int_equal(hg_client_mass_cancel(a, 0, HOURGLASS__V1__SIDE_FILTER__SIDES_BOTH, &seq), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  assert_int_equal(e->execution_report->client_order_id, 9);
  assert_int_equal(hg_client_logout(a, 2000), 0);
  hg_client_destroy(a);
}

/* B's resting sell is hit by A while B is disconnected; B's reconnect
 * recovers its fill report from the stream. Market data shows the trade. */
static void test_reconnect_recovers_fill(void **state) {
  (void)state;
  hg_client_t *a = NULL, *b = NULL;
  assert_int_equal(ch_client(&srv, TA, &a), 0);
  assert_int_equal(ch_client(&srv, TB, &b), 0);
  assert_int_equal(hg_client_connect(a), 0);
  assert_int_equal(hg_client_connect(b), 0);

  assert_int_equal(hg_client_md_subscribe(a, 2, 5, NULL), 0);
  const env_t *e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_MD_SNAPSHOT);
  assert_int_equal(e->md_snapshot->instrument_id, 2);
  assert_int_equal(e->md_snapshot->n_asks, 0);

  hg_client_order_t o = limit(1, HOURGLASS__V1__SIDE__SIDE_SELL, 600, 5);
  o.instrument_id = 2;
  assert_int_equal(hg_client_new_order(b, &o, NULL), 0);
  e = expect(b, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  uint64_t b_oid = e->execution_report->order_id;
  uint64_t b_next = hg_client_rx_next_seq(b);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_MD_LEVEL);
  assert_int_equal(e->md_level->price, 600);
  assert_int_equal(e->md_level->qty, 5);

  hg_client_close(b); /* no cancel-on-disconnect: the order stays */
  o = limit(2, HOURGLASS__V1__SIDE__SIDE_BUY, 600, 2);
  o.instrument_id = 2;
  assert_int_equal(hg_client_new_order(a, &o, NULL), 0);
  e = expect(a, HOURGLASS__V1__ENVELOPE__BODY_MD_TRADE);
  assert_int_equal(e->md_trade->qty, 2);

  assert_int_equal(hg_client_connect(b), 0);
  assert_true(hg_client_session(b)->login_next_seq > b_next);
  e = expect(b, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  assert_int_equal(e->seq, b_next);
  assert_int_equal(e->execution_report->exec_type, HOURGLASS__V1__EXEC_TYPE__EXEC_FILL);
  assert_int_equal(e->execution_report->order_id, b_oid);
  assert_int_equal(e->execution_report->qty, 2);
  assert_int_equal(e->execution_report->leaves, 3);
  hg_client_stats_t st;
  hg_client_stats(b, &st);
  assert_int_equal(st.retransmit_requests, 1);

  assert_int_equal(hg_client_positions(b, 0, NULL), 0);
  e = expect(b, HOURGLASS__V1__ENVELOPE__BODY_POSITIONS);
  assert_int_equal(e->positions->account, ACC_B);
  assert_int_equal(e->positions->n_positions, 1);
  assert_int_equal(e->positions->positions[0]->net_qty, -2);
  hg_client_mass_cancel(b, 0, HOURGLASS__V1__SIDE_FILTER__SIDES_BOTH, NULL);
  expect(b, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT);
  hg_client_logout(a, 2000);
  hg_client_logout(b, 2000);
  hg_client_destroy(a);
  hg_client_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_login_refused),
      cmocka_unit_test(test_order_lifecycle),
      cmocka_unit_test(test_reconnect_recovers_fill),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
