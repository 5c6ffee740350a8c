/*
 * Positions and Statement replies for an account with positions in many
 * instruments: every position is in the reply (none is cut off at a fixed
 * count), and a reply that cannot fit the gateway's max_frame is refused
 * whole with REJ_GATEWAY_FULL rather than cut short.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gw_client.h"
#include "server.h"

enum { OP = 1, TA = 10, TB = 11 };
enum { ACC_A = 101, ACC_B = 102 };

static void setup_keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(s, TB, HG_ROLE_TRADER, ACC_B, 1), 0);
}

static uint32_t g_max_frame;

static void tweak(hg_gateway_config_t *cfg) {
  cfg->max_instruments = 320;
  cfg->max_frame = g_max_frame;
}

/* A small-gateway server whose exchange lists up to 320 instruments. */
static void start(ts_server_t *s) {
  ts_server_options_t o = {0};
  o.small_gateway = 1;
  o.max_instruments = 320;
  o.max_accounts = 16;
  o.tweak = tweak;
  o.quiet = 1;
  assert_int_equal(ts_server_create(s, &o), 0);
  setup_keys(s);
  assert_int_equal(ts_server_run(s), 0);
}

/* Lists instruments 1..n (one index, consecutive months) and the accounts. */
static void list_market(ts_server_t *s, uint32_t n) {
  gt_client_t op;
  assert_true(gt_login(&op, s->port, OP, 0, 0) != 0);
  for (uint32_t i = 1; i <= n; i++) {
    char sym[32];
    snprintf(sym, sizeof sym, "B200.A.%04u-%02u", 2030 + (i - 1) / 12, (i - 1) % 12 + 1);
    Hourglass__V1__ListInstrument l = HOURGLASS__V1__LIST_INSTRUMENT__INIT;
    l.instrument_id = i;
    l.symbol = sym;
    l.tick_size = 1000;
    l.contract_unit = 1000;
    l.min_price = 1;
    l.max_price = 100000;
    l.max_order_qty = 1000;
    l.max_orders = 16;
    l.max_accounts = 8;
    l.has_ref_price = 1;
    l.ref_price = 500;
    env_t e = HOURGLASS__V1__ENVELOPE__INIT;
    e.body_case = BODY(LIST_INSTRUMENT);
    e.list_instrument = &l;
    assert_int_equal(gt_send(&op, &e), 0);
    assert_int_equal(gt_response_reason(&op), 0);
  }
  gt_add_account(&op, ACC_A, 1);
  assert_int_equal(gt_response_reason(&op), 0);
  gt_add_account(&op, ACC_B, 1);
  assert_int_equal(gt_response_reason(&op), 0);
  gt_close(&op);
}

/* A buys one lot from B in each of instruments 1..n. */
static void trade_everywhere(gt_client_t *a, gt_client_t *b, uint32_t n) {
  for (uint32_t i = 1; i <= n; i++) {
    assert_int_equal(gt_new_order(a, i, 1000 + i, 0, 500, 1, 0), 0); /* GTC buy */
    env_t *e = gt_expect(a, BODY(EXECUTION_REPORT), 3000);
    assert_non_null(e);
    assert_int_equal(e->execution_report->exec_type, EXEC(NEW));
    assert_int_equal(gt_new_order(b, i, 2000 + i, 1, 500, 1, 2), 0); /* IOC sell */
    e = gt_expect(b, BODY(EXECUTION_REPORT), 3000);
    assert_non_null(e);
    assert_int_equal(e->execution_report->exec_type, EXEC(NEW));
    e = gt_expect(b, BODY(EXECUTION_REPORT), 3000);
    assert_non_null(e);
    assert_int_equal(e->execution_report->exec_type, EXEC(FILL));
    e = gt_expect(a, BODY(EXECUTION_REPORT), 3000);
    assert_non_null(e);
    assert_int_equal(e->execution_report->exec_type, EXEC(FILL));
  }
}

/* Sends a PositionsRequest or StatementRequest (all defaults: own account)
 * and returns the reply to it. */
static env_t *ask(gt_client_t *c, uint32_t body) {
  Hourglass__V1__PositionsRequest pr = HOURGLASS__V1__POSITIONS_REQUEST__INIT;
  Hourglass__V1__StatementRequest sr = HOURGLASS__V1__STATEMENT_REQUEST__INIT;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = body;
  if (body == BODY(POSITIONS_REQUEST)) q.positions_request = &pr;
  else q.statement_request = &sr;
  assert_int_equal(gt_send(c, &q), 0);
  uint32_t reply = body == BODY(POSITIONS_REQUEST) ? BODY(POSITIONS) : BODY(STATEMENT);
  env_t *e = gt_expect(c, reply, 3000);
  assert_non_null(e);
  assert_int_equal(body == BODY(POSITIONS_REQUEST) ? e->positions->ref_seq : e->statement->ref_seq,
                   c->seq);
  return e;
}

/* 300 positions: more than any fixed 256-entry reply buffer holds. */
static void test_all_positions(void **state) {
  (void)state;
  enum { N = 300 };
  g_max_frame = 0; /* the default, 64 KiB: room for about 1,350 positions */
  ts_server_t s;
  start(&s);
  list_market(&s, N);
  gt_client_t a, b;
  assert_true(gt_login(&a, s.port, TA, 0, 0) != 0);
  assert_true(gt_login(&b, s.port, TB, 0, 0) != 0);
  trade_everywhere(&a, &b, N);

  env_t *e = ask(&a, BODY(POSITIONS_REQUEST));
  assert_false(e->positions->has_reason);
  assert_int_equal(e->positions->account, ACC_A);
  assert_int_equal(e->positions->n_positions, N);
  for (size_t k = 0; k < N; k++) {
    assert_int_equal(e->positions->positions[k]->instrument_id, k + 1);
    assert_int_equal(e->positions->positions[k]->net_qty, 1);
    assert_int_equal(e->positions->positions[k]->bought_qty, 1);
  }
  e = ask(&b, BODY(POSITIONS_REQUEST));
  assert_int_equal(e->positions->n_positions, N);
  assert_int_equal(e->positions->positions[N - 1]->net_qty, -1);

  e = ask(&a, BODY(STATEMENT_REQUEST));
  assert_false(e->statement->has_reason);
  assert_int_equal(e->statement->n_positions, N);
  assert_int_equal(e->statement->positions[N - 1]->instrument_id, N);

  gt_close(&a);
  gt_close(&b);
  ts_server_stop(&s);
}

/* A 4 KiB frame holds (4096 - 512) / 48 = 74 positions: 80 are refused
 * whole, never sent cut short. */
static void test_too_many_for_the_frame(void **state) {
  (void)state;
  enum { N = 80 };
  g_max_frame = 4096;
  ts_server_t s;
  start(&s);
  list_market(&s, N);
  gt_client_t a, b;
  assert_true(gt_login(&a, s.port, TA, 0, 0) != 0);
  assert_true(gt_login(&b, s.port, TB, 0, 0) != 0);
  trade_everywhere(&a, &b, N);

  env_t *e = ask(&a, BODY(POSITIONS_REQUEST));
  assert_true(e->positions->has_reason);
  assert_int_equal(e->positions->reason, REJ(GATEWAY_FULL));
  assert_int_equal(e->positions->n_positions, 0);
  e = ask(&a, BODY(STATEMENT_REQUEST));
  assert_true(e->statement->has_reason);
  assert_int_equal(e->statement->reason, REJ(GATEWAY_FULL));
  assert_int_equal(e->statement->n_positions, 0);

  gt_close(&a);
  gt_close(&b);
  ts_server_stop(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_positions),
      cmocka_unit_test(test_too_many_for_the_frame),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
