/*
 * OpenOrdersRequest over loopback: the live orders of the session's account
 * (after fills, a cancel and a replace), paged by order id with a limit;
 * an instrument filter; isolation (a trader asking for another account,
 * a risk viewer for another firm's, get exactly the reply an unknown
 * account gets); a risk viewer's firm-wide pages; operators refused; bad
 * requests refused; and the same list after the exchange restarts on its
 * data directory (the recovered orders in order id order).
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

enum { OP = 1, TA = 10, TB = 11, TC = 12, V1 = 20, V2 = 21 };
enum { ACC_A = 101, ACC_B = 102, ACC_C = 201, FIRM1 = 1, FIRM2 = 2 };

static void keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, FIRM1), 0);
  assert_int_equal(ts_server_add_key(s, TB, HG_ROLE_TRADER, ACC_B, FIRM1), 0);
  assert_int_equal(ts_server_add_key(s, TC, HG_ROLE_TRADER, ACC_C, FIRM2), 0);
  assert_int_equal(ts_server_add_key(s, V1, HG_ROLE_RISK_VIEWER, 0, FIRM1), 0);
  assert_int_equal(ts_server_add_key(s, V2, HG_ROLE_RISK_VIEWER, 0, FIRM2), 0);
}

/* The sessions of TA, TB, TC, V1, V2 and OP, in that order. */
static void login_all(const ts_server_t *s, gt_client_t *const *all) {
  const uint64_t ids[] = {TA, TB, TC, V1, V2, OP};
  for (int k = 0; k < 6; k++) assert_true(gt_login(all[k], s->port, ids[k], 0, 0) != 0);
}

static void close_all(gt_client_t *const *all) {
  for (int k = 0; k < 6; k++) gt_close(all[k]);
}

/* The next frame of body `want`, skipping every other (fills, market
 * data, heartbeats); NULL after 5 s without one. */
static env_t *wait_body(gt_client_t *c, uint32_t want) {
  for (int k = 0; k < 1000; k++) {
    env_t *e = gt_recv(c, 5000);
    if (e == NULL) return NULL;
    if ((uint32_t)e->body_case == want) return e;
  }
  return NULL;
}

/* A resting GTC order; its order id. */
static uint64_t rest(gt_client_t *c, uint32_t instr, int side, int64_t px, int64_t qty) {
  static uint64_t clordid = 1;
  assert_int_equal(gt_new_order(c, instr, clordid++, side, px, qty, 0), 0);
  env_t *e = wait_body(c, BODY(EXECUTION_REPORT));
  assert_non_null(e);
  assert_int_equal(e->execution_report->exec_type, EXEC(NEW));
  return e->execution_report->order_id;
}

/* An IOC that trades against resting orders; waits for its last report. */
static void take(gt_client_t *c, uint32_t instr, int side, int64_t px, int64_t qty) {
  assert_int_equal(gt_new_order(c, instr, 9000, side, px, qty, 2), 0);
  int64_t left = qty;
  while (left > 0) {
    env_t *e = wait_body(c, BODY(EXECUTION_REPORT));
    assert_non_null(e);
    const Hourglass__V1__ExecutionReport *er = e->execution_report;
    if (er->exec_type == EXEC(FILL)) left -= er->qty;
    else if (er->exec_type == EXEC(CANCELLED)) left = 0;
    else assert_int_equal(er->exec_type, EXEC(NEW));
  }
}

typedef struct page {
  uint32_t reason, account, n;
  uint32_t next_account;
  uint64_t next_order_id;
  uint64_t oid[64];
  uint32_t acct[64], instr[64];
  int64_t price[64], qty[64], leaves[64];
} page_t;

static page_t ask(gt_client_t *c, uint32_t account, uint32_t instr, uint32_t from_account,
                  uint64_t from_oid, uint32_t limit) {
  Hourglass__V1__OpenOrdersRequest r = HOURGLASS__V1__OPEN_ORDERS_REQUEST__INIT;
  r.has_account = account != 0;
  r.account = account;
  r.has_instrument_id = instr != 0;
  r.instrument_id = instr;
  r.has_from_account = from_account != 0;
  r.from_account = from_account;
  r.has_from_order_id = from_oid != 0;
  r.from_order_id = from_oid;
  r.has_limit = limit != 0;
  r.limit = limit;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(OPEN_ORDERS_REQUEST);
  q.open_orders_request = &r;
  assert_int_equal(gt_send(c, &q), 0);
  env_t *e = wait_body(c, BODY(OPEN_ORDERS));
  assert_non_null(e);
  const Hourglass__V1__OpenOrders *m = e->open_orders;
  assert_int_equal(m->ref_seq, c->seq);
  page_t p;
  memset(&p, 0, sizeof p);
  p.reason = m->reason;
  p.account = m->account;
  p.n = (uint32_t)m->n_orders;
  p.next_account = m->next_account;
  p.next_order_id = m->next_order_id;
  assert_true(p.n <= 64);
  for (uint32_t k = 0; k < p.n; k++) {
    p.oid[k] = m->orders[k]->order_id;
    p.acct[k] = m->orders[k]->account;
    p.instr[k] = m->orders[k]->instrument_id;
    p.price[k] = m->orders[k]->price;
    p.qty[k] = m->orders[k]->qty;
    p.leaves[k] = m->orders[k]->leaves;
  }
  if (p.reason != 0) {
    /* A refusal carries nothing else, so no two refusals can differ. */
    assert_int_equal(p.n, 0);
    assert_false(m->has_account || m->has_next_account || m->has_next_order_id);
  }
  return p;
}

/* Pages through the account's (or the firm's) orders with `limit`: every
 * order id in *out (up to 64), the number of pages. */
static int all_pages(gt_client_t *c, uint32_t account, uint32_t limit, uint64_t *out,
                     uint32_t *n) {
  uint32_t from_account = 0;
  uint64_t from = 0;
  int pages = 0;
  *n = 0;
  for (;;) {
    page_t p = ask(c, account, 0, from_account, from, limit);
    assert_int_equal(p.reason, 0);
    assert_true(p.n <= limit);
    pages++;
    for (uint32_t k = 0; k < p.n; k++) out[(*n)++] = p.oid[k];
    if (p.next_order_id == 0) return pages;
    assert_int_equal(p.n, limit);
    from_account = p.next_account;
    from = p.next_order_id;
  }
}

static void test_open_orders(void **state) {
  (void)state;
  ts_server_t s;
  assert_int_equal(ts_server_start(&s, 0, NULL, keys), 0);
  const uint32_t accounts[] = {ACC_A, ACC_B, ACC_C}, firms[] = {FIRM1, FIRM1, FIRM2};
  assert_int_equal(gt_setup_market(&s, OP, 2, accounts, firms, 3), 0);
  static gt_client_t a, b, c, v1, v2, op;
  gt_client_t *all[] = {&a, &b, &c, &v1, &v2, &op};
  login_all(&s, all);

  /* A: one order in instrument 2 first, five bids in 1, one more in 2, so
   * that the recovered books (seeded instrument by instrument) are not in
   * order id order. */
  uint64_t a2 = rest(&a, 2, 0, 300, 5);
  uint64_t a1[5];
  for (int k = 0; k < 5; k++) a1[k] = rest(&a, 1, 0, 100 + k, 10);
  uint64_t a3 = rest(&a, 2, 0, 301, 5);
  uint64_t bo = rest(&b, 1, 1, 200, 3);
  uint64_t co = rest(&c, 1, 1, 201, 4);

  /* B fills A's 104 whole and 4 of A's 103; A cancels its 100 and
   * replaces its 101 (same id, new price and qty). */
  take(&b, 1, 1, 104, 10);
  take(&b, 1, 1, 103, 4);
  assert_int_equal(gt_cancel(&a, 1, a1[0]), 0);
  assert_non_null(wait_body(&a, BODY(EXECUTION_REPORT)));
  assert_int_equal(gt_replace(&a, 1, a1[1], 99, 20), 0);
  env_t *e = NULL;
  do {
    e = wait_body(&a, BODY(EXECUTION_REPORT));
    assert_non_null(e);
  } while (e->execution_report->exec_type != EXEC(REPLACED));

  const uint64_t want[] = {a2, a1[1], a1[2], a1[3], a3};
  for (int round = 0; round < 2; round++) {
    /* The whole list in one page, by order id. */
    page_t p = ask(&a, 0, 0, 0, 0, 0);
    assert_int_equal(p.reason, 0);
    assert_int_equal(p.account, ACC_A);
    assert_int_equal(p.n, 5);
    assert_int_equal(p.next_order_id, 0);
    for (int k = 0; k < 5; k++) {
      assert_int_equal(p.oid[k], want[k]);
      assert_int_equal(p.acct[k], ACC_A);
    }
    assert_int_equal(p.price[1], 99);
    assert_int_equal(p.qty[1], 20);
    assert_int_equal(p.leaves[1], 20);
    assert_int_equal(p.price[3], 103);
    assert_int_equal(p.qty[3], 10);
    assert_int_equal(p.leaves[3], 6);
    assert_int_equal(p.instr[0], 2);
    /* The own account named is the same list. */
    assert_int_equal(ask(&a, ACC_A, 0, 0, 0, 0).n, 5);

    /* Pages of 2: 2 + 2 + 1, nothing twice or missed. */
    uint64_t got[64];
    uint32_t n = 0;
    assert_int_equal(all_pages(&a, 0, 2, got, &n), 3);
    assert_int_equal(n, 5);
    for (int k = 0; k < 5; k++) assert_int_equal(got[k], want[k]);
    /* A page of exactly what is left says there is no more. */
    assert_int_equal(all_pages(&a, 0, 5, got, &n), 1);
    /* One instrument only. */
    p = ask(&a, 0, 2, 0, 0, 0);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.oid[0], a2);
    assert_int_equal(p.oid[1], a3);
    /* A cursor whose order has gone starts at the next id. */
    p = ask(&a, 0, 0, 0, a1[0], 1);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.oid[0], a1[1]);
    assert_int_equal(p.next_order_id, a1[2]);

    /* Isolation: another account, another firm's and one that does not
     * exist all get the same refusal. */
    assert_int_equal(ask(&a, ACC_B, 0, 0, 0, 0).reason, REJ(UNKNOWN_ACCOUNT));
    assert_int_equal(ask(&a, 999, 0, 0, 0, 0).reason, REJ(UNKNOWN_ACCOUNT));
    assert_int_equal(ask(&c, ACC_A, 0, 0, 0, 0).reason, REJ(UNKNOWN_ACCOUNT));
    assert_int_equal(ask(&v1, ACC_C, 0, 0, 0, 0).reason, REJ(UNKNOWN_ACCOUNT));
    assert_int_equal(ask(&v1, 999, 0, 0, 0, 0).reason, REJ(UNKNOWN_ACCOUNT));
    assert_int_equal(ask(&v2, ACC_A, 0, 0, 0, 0).reason, REJ(UNKNOWN_ACCOUNT));
    /* B and C see only their own. */
    p = ask(&b, 0, 0, 0, 0, 0);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.oid[0], bo);
    p = ask(&c, 0, 0, 0, 0, 0);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.oid[0], co);

    /* Risk viewers: an account of the firm, and the whole firm in pages
     * (A's five, then B's one), never the other firm's. */
    p = ask(&v1, ACC_B, 0, 0, 0, 0);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.oid[0], bo);
    assert_int_equal(all_pages(&v1, 0, 4, got, &n), 2);
    assert_int_equal(n, 6);
    for (int k = 0; k < 5; k++) assert_int_equal(got[k], want[k]);
    assert_int_equal(got[5], bo);
    p = ask(&v1, 0, 0, 0, 0, 0);
    assert_int_equal(p.account, 0);
    assert_int_equal(p.acct[5], ACC_B);
    p = ask(&v2, 0, 0, 0, 0, 0);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.oid[0], co);
    assert_int_equal(p.acct[0], ACC_C);

    /* Bad requests change nothing: a limit over 1000, a cursor account
     * that is not the one asked for. */
    assert_int_equal(ask(&a, 0, 0, 0, 0, 1001).reason, REJ(INVALID_REQUEST));
    assert_int_equal(ask(&a, 0, 0, ACC_B, 0, 0).reason, REJ(INVALID_REQUEST));
    /* Operators are not permitted. */
    Hourglass__V1__OpenOrdersRequest r = HOURGLASS__V1__OPEN_ORDERS_REQUEST__INIT;
    env_t q = HOURGLASS__V1__ENVELOPE__INIT;
    q.body_case = BODY(OPEN_ORDERS_REQUEST);
    q.open_orders_request = &r;
    assert_int_equal(gt_send(&op, &q), 0);
    e = wait_body(&op, BODY(RESPONSE));
    assert_non_null(e);
    assert_int_equal(e->response->reason, REJ(NOT_PERMITTED));

    if (round == 1) break;
    /* The exchange restarts on its data directory: the same orders. */
    close_all(all);
    ts_server_halt(&s);
    assert_int_equal(ts_server_reopen(&s, 0, NULL, NULL), 0);
    login_all(&s, all);
  }

  /* Orders entered after the restart come after the recovered ones. */
  uint64_t late = rest(&a, 1, 0, 50, 1);
  page_t p = ask(&a, 0, 0, 0, 0, 0);
  assert_int_equal(p.n, 6);
  assert_int_equal(p.oid[5], late);
  assert_int_equal(p.oid[4], a3);

  close_all(all);
  ts_server_stop(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_orders),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
