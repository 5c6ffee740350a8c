/*
 * test_overflow.c - single commands whose events outnumber what the
 * pipeline holds between the engine and the gateway (its stage plus the
 * gateway's ring: 2048 + 512 records here).
 *
 * Trader A rests 4,000 one-lot bids over 80 price levels in each of two
 * instruments. Trader B sells 3,000 lots of the first in one IOC order
 * (3,000 fills in one command), then A mass cancels the remaining 5,000
 * (one command). Every report must arrive: A's stream has 8,000 NEW, 3,000
 * maker FILL and 5,000 CANCELLED reports, each order id filled or cancelled
 * exactly once, B's has 3,000 taker fills, and every sequenced frame of
 * both streams carries the
 * next seq, with no gap. Runs in both pipeline modes (the *_threads
 * registration), durable and acknowledged before durable: in loop mode the
 * sweep and the mass cancel are drained in the middle of the command.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gw_client.h"

enum { OP = 1, TA = 10, TB = 11 };
enum { ACC_A = 101, ACC_B = 102 };
#define BUY HOURGLASS__V1__SIDE__SIDE_BUY
#define SELL HOURGLASS__V1__SIDE__SIDE_SELL
#define IOC HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC
#define N_ORDERS 8000u /* half in each instrument */
#define N_LEVELS 80u
#define N_SWEEP 3000u
#define WINDOW 250u
#define WAIT_MS 10000

static void setup_keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(s, TB, HG_ROLE_TRADER, ACC_B, 2), 0);
}

/* A client and the seq its next sequenced frame must carry. */
typedef struct stream_check {
  gt_client_t c;
  uint64_t next;
} stream_check_t;

/* The next frame of body `want`; every sequenced frame on the way must
 * continue the stream, and only heartbeats and warnings may be skipped. */
static env_t *next_frame(stream_check_t *sc, uint32_t want) {
  for (;;) {
    env_t *e = gt_recv(&sc->c, WAIT_MS);
    assert_non_null(e);
    if (e->has_seq) {
      if (e->seq != sc->next)
        fprintf(stderr, "stream of key %llu: seq %llu, expected %llu\n",
                (unsigned long long)sc->c.key_id, (unsigned long long)e->seq,
                (unsigned long long)sc->next);
      assert_int_equal(e->seq, sc->next);
      sc->next++;
    }
    if (e->body_case == want) return e;
    assert_true(e->body_case == BODY(HEARTBEAT) || e->body_case == BODY(WARNING));
  }
}

static Hourglass__V1__ExecutionReport *next_er(stream_check_t *sc, uint32_t type) {
  env_t *e = next_frame(sc, BODY(EXECUTION_REPORT));
  if (e->execution_report->exec_type != type)
    fprintf(stderr, "exec type %u reason %u, wanted %u\n", e->execution_report->exec_type,
            e->execution_report->reason, type);
  assert_int_equal(e->execution_report->exec_type, type);
  return e->execution_report;
}

static void run_overflow(int unsafe) {
  ts_server_t s;
  ts_server_options_t o = {0};
  o.durable = !unsafe;
  o.small_gateway = 1;
  o.quiet = 1;
  o.ring_capacity = 512;
  o.staging_capacity = 2048;
  o.outbound_capacity = 512;
  o.throttle_rate = 1000000;
  o.max_book_orders = 1u << 14;
  hg_clearing_config_t clr;
  util_no_risk_config(&clr);
  clr.max_order_qty = N_SWEEP; /* the sweep is one order */
  o.clearing = &clr;
  assert_int_equal(ts_server_create(&s, &o), 0);
  setup_keys(&s);
  assert_int_equal(ts_server_run(&s), 0);
  const uint32_t acc[] = {ACC_A, ACC_B};
  const uint32_t firm[] = {1, 2};
  assert_int_equal(gt_setup_market(&s, OP, 2, acc, firm, 2), 0);

  stream_check_t a, b;
  a.next = gt_login(&a.c, s.port, TA, 0, 0);
  b.next = gt_login(&b.c, s.port, TB, 0, 0);
  assert_true(a.next > 0 && b.next > 0);

  /* Order id -> what happened to it: 1 resting, 2 filled, 3 cancelled. */
  uint64_t *oids = calloc(N_ORDERS, sizeof *oids);
  uint8_t *fate = calloc(N_ORDERS, 1);
  assert_non_null(oids);
  assert_non_null(fate);
  for (uint32_t i = 0; i < N_ORDERS; i += WINDOW) {
    for (uint32_t k = i; k < i + WINDOW; k++)
      assert_int_equal(
          gt_new_order(&a.c, 1 + k / (N_ORDERS / 2), 1 + k, BUY, 100 + k % N_LEVELS, 1, 0), 0);
    for (uint32_t k = i; k < i + WINDOW; k++) {
      Hourglass__V1__ExecutionReport *er = next_er(&a, EXEC(NEW));
      assert_int_equal(er->client_order_id, 1 + k);
      oids[k] = er->order_id;
      fate[k] = 1;
    }
  }

  /* One command, 3,000 fills: the best levels go first. */
  assert_int_equal(gt_new_order(&b.c, 1, 1, SELL, 1, N_SWEEP, IOC), 0);
  assert_int_equal(next_er(&b, EXEC(NEW))->leaves, N_SWEEP);
  int64_t filled = 0;
  for (uint32_t k = 0; k < N_SWEEP; k++) {
    Hourglass__V1__ExecutionReport *er = next_er(&b, EXEC(FILL));
    assert_int_equal(er->qty, 1);
    filled += er->qty;
    assert_int_equal(er->leaves, (int64_t)N_SWEEP - filled);
  }
  for (uint32_t k = 0; k < N_SWEEP; k++) {
    Hourglass__V1__ExecutionReport *er = next_er(&a, EXEC(FILL));
    assert_true(er->maker);
    uint64_t i = er->client_order_id - 1;
    assert_true(i < N_ORDERS);
    assert_int_equal(er->order_id, oids[i]);
    assert_int_equal(fate[i], 1);
    fate[i] = 2;
  }

  /* One command, 5,000 cancels, then its response. */
  Hourglass__V1__MassCancelRequest mc = HOURGLASS__V1__MASS_CANCEL_REQUEST__INIT;
  env_t q = HOURGLASS__V1__ENVELOPE__INIT;
  q.body_case = BODY(MASS_CANCEL);
  q.mass_cancel = &mc;
  assert_int_equal(gt_send(&a.c, &q), 0);
  for (uint32_t k = 0; k < N_ORDERS - N_SWEEP; k++) {
    Hourglass__V1__ExecutionReport *er = next_er(&a, EXEC(CANCELLED));
    assert_int_equal(er->reason, HOURGLASS__V1__CANCEL_REASON__CXL_MASS_CANCEL);
    uint64_t i = er->client_order_id - 1;
    assert_true(i < N_ORDERS);
    assert_int_equal(er->order_id, oids[i]);
    assert_int_equal(fate[i], 1);
    fate[i] = 3;
  }
  env_t *e = next_frame(&a, BODY(RESPONSE));
  assert_int_equal(e->response->ref_seq, a.c.seq);
  assert_false(e->response->has_reason);
  for (uint32_t k = 0; k < N_ORDERS; k++) assert_true(fate[k] == 2 || fate[k] == 3);

  /* Nothing lost and nothing refused for volume. */
  hg_pipeline_stats_t st;
  hg_pipeline_stats(s.p, &st);
  assert_int_equal(st.busy_rejects, 0);
  free(oids);
  free(fate);
  gt_close(&a.c);
  gt_close(&b.c);
  ts_server_stop(&s);
}

static void test_overflow_durable(void **state) {
  (void)state;
  run_overflow(0);
}

static void test_overflow_unsafe(void **state) {
  (void)state;
  run_overflow(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_overflow_durable),
      cmocka_unit_test(test_overflow_unsafe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
