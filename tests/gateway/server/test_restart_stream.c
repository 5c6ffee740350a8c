/*
 * test_restart_stream.c - what each key's stream says about its orders
 * across an exchange restart.
 *
 * Trader A (cancel-on-disconnect) rests two orders, market maker B quotes
 * two instruments (four session-scoped quotes), trader C (no
 * cancel-on-disconnect) rests one order. The exchange then restarts on the
 * same directories, after a crash (a child process running the server is
 * killed with SIGKILL) or after a clean stop with every session still open.
 * A, B and C log in again either late (after an operator request answered
 * by the restarted engine shows that the restart's SessionsEnded was
 * processed) or at once (as soon as the restarted server accepts). Each asks
 * for what it missed from the last seq it saw and then sends one order as a
 * barrier: A and B must find every cancel of their session-scoped orders
 * exactly once, reason CXL_MASS_CANCEL, with seqs continuing their streams
 * and nothing else before the barrier; C's order rests on and C's stream has
 * nothing new. LoginAck.epoch is 1 at the first start and 2 after the
 * restart. Then an ordinary order that fills after a restart, before its
 * key logs in: the fill is in the key's stream. Last, a clean stop with
 * orders in flight: every order the exchange keeps has its report in the
 * stream.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gw_client.h"

enum { OP = 1, KA = 10, KB = 20, KC = 30 };
enum { ACC_A = 101, ACC_B = 201, ACC_C = 301 };
#define QGROUP 7u
#define BUY HOURGLASS__V1__SIDE__SIDE_BUY
#define SELL HOURGLASS__V1__SIDE__SIDE_SELL
#define GTC HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC
#define MAX_TRACK 64

static void setup_keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, KA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(s, KB, HG_ROLE_MARKET_MAKER, ACC_B, 2), 0);
  assert_int_equal(ts_server_add_key(s, KC, HG_ROLE_TRADER, ACC_C, 3), 0);
}

static void setup_market(ts_server_t *s) {
  const uint32_t acc[] = {ACC_A, ACC_B, ACC_C};
  const uint32_t firm[] = {1, 2, 3};
  assert_int_equal(gt_setup_market(s, OP, 2, acc, firm, 3), 0);
}

/* Logs in; returns LoginAck.next_seq and sets *epoch (0: not sent). */
static uint64_t login(gt_client_t *c, uint16_t port, uint64_t key, int cod, uint64_t *epoch) {
  assert_int_equal(gt_connect(c, port), 0);
  uint8_t sec[32];
  ts_key_secret(key, sec);
  assert_int_equal(gt_send_login(c, key, sec, 0, cod, 30000, 0), 0);
  env_t *e = gt_expect(c, BODY(LOGIN_ACK), 5000);
  assert_non_null(e);
  *epoch = e->login_ack->has_epoch ? e->login_ack->epoch : 0;
  return e->login_ack->next_seq;
}

/* What one key saw before the restart. */
typedef struct key_view {
  uint64_t last;                /* the last stream seq received */
  uint64_t scoped[4];           /* its session-scoped orders */
  size_t n_scoped;
} key_view_t;

/* Reads until `reports` NEW execution reports (and, if ack, the
 * MassQuoteAck) answering request seq ref have arrived; returns the last
 * order id, records the quotes' ids and the last stream seq seen in v. */
static uint64_t wait_new(gt_client_t *c, uint64_t ref, key_view_t *v, int reports, int ack) {
  uint64_t oid = 0;
  for (int got = 0; got < reports || ack;) {
    env_t *e = gt_recv(c, 5000);
    assert_non_null(e);
    if (e->has_seq) {
      assert_int_equal(e->seq, v->last + 1);
      v->last = e->seq;
    }
    if (e->body_case == BODY(MASS_QUOTE_ACK) && e->mass_quote_ack->ref_seq == ref) {
      assert_int_equal(e->mass_quote_ack->reason, 0);
      ack = 0;
    }
    if (e->body_case != BODY(EXECUTION_REPORT) || e->execution_report->ref_seq != ref) continue;
    assert_int_equal(e->execution_report->exec_type, EXEC(NEW));
    oid = e->execution_report->order_id;
    got++;
    if (reports > 1) v->scoped[v->n_scoped++] = oid;
  }
  return oid;
}

static void quote_two(gt_client_t *b, key_view_t *v) {
  Hourglass__V1__QuoteEntry q[2];
  Hourglass__V1__QuoteEntry *qp[2];
  for (int i = 0; i < 2; i++) {
    hourglass__v1__quote_entry__init(&q[i]);
    q[i].instrument_id = (uint32_t)i + 1;
    q[i].has_bid_price = q[i].has_bid_qty = q[i].has_ask_price = q[i].has_ask_qty = 1;
    q[i].bid_price = 450;
    q[i].bid_qty = 3;
    q[i].ask_price = 550;
    q[i].ask_qty = 3;
    qp[i] = &q[i];
  }
  Hourglass__V1__MassQuote mq = HOURGLASS__V1__MASS_QUOTE__INIT;
  mq.quote_group = QGROUP;
  mq.n_entries = 2;
  mq.entries = qp;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = BODY(MASS_QUOTE);
  env.mass_quote = &mq;
  assert_int_equal(gt_send(b, &env), 0);
  wait_new(b, b->seq, v, 4, 1);
}

static void retransmit(gt_client_t *c, uint64_t from, uint32_t count) {
  assert_int_equal(gt_retransmit(c, from, count), 0);
}

/*
 * After the restart: logs key in, asks for [v->last + 1, next_seq) if that
 * is not empty, sends a barrier order and reads until it is answered and
 * every seq up to it has arrived. Asserts that each seq came once, that the
 * frames before the barrier are exactly the cancels of v->scoped (each once,
 * CXL_MASS_CANCEL) and, if late, that the LoginAck already counted them.
 */
static void check_after(gt_client_t *c, uint16_t port, uint64_t key, const key_view_t *v,
                        int late) {
  uint64_t epoch = 0;
  uint64_t next = login(c, port, key, 0, &epoch);
  assert_int_equal(epoch, 2);
  assert_true(next >= v->last + 1);
  if (late) assert_int_equal(next, v->last + 1 + v->n_scoped);
  uint32_t missed = (uint32_t)(next - v->last - 1);
  if (missed > 0) retransmit(c, v->last + 1, missed);
  assert_int_equal(gt_new_order(c, 1, 900 + key, BUY, 100, 1, GTC), 0);
  uint64_t barrier_ref = c->seq;

  uint8_t seen[MAX_TRACK] = {0};  /* by seq - v->last */
  uint64_t cancelled[MAX_TRACK];
  size_t n_cancelled = 0;
  uint64_t barrier = 0;           /* the barrier's seq once seen */
  int header = missed == 0;
  for (;;) {
    bool complete = barrier != 0 && header;
    for (uint64_t q = v->last + 1; complete && q <= barrier; q++) complete = seen[q - v->last];
    if (complete) break;
    env_t *e = gt_recv(c, 5000);
    assert_non_null(e);
    if (e->body_case == BODY(RETRANSMISSION)) {
      assert_int_equal(e->retransmission->reason, 0);
      assert_int_equal(e->retransmission->from_seq, v->last + 1);
      assert_int_equal(e->retransmission->count, missed);
      header = 1;
      continue;
    }
    if (!e->has_seq) continue; /* heartbeats, warnings */
    assert_true(e->seq > v->last && e->seq - v->last < MAX_TRACK);
    assert_int_equal(seen[e->seq - v->last], 0); /* each seq once */
    seen[e->seq - v->last] = 1;
    assert_int_equal(e->body_case, BODY(EXECUTION_REPORT));
    const Hourglass__V1__ExecutionReport *er = e->execution_report;
    if (er->has_ref_seq && er->ref_seq == barrier_ref) {
      assert_int_equal(er->exec_type, EXEC(NEW));
      barrier = e->seq;
      continue;
    }
    assert_int_equal(er->exec_type, EXEC(CANCELLED));
    assert_int_equal(er->reason, HOURGLASS__V1__CANCEL_REASON__CXL_MASS_CANCEL);
    cancelled[n_cancelled++] = er->order_id;
  }
  /* Nothing but the cancels between what the key saw and the barrier. */
  assert_int_equal(barrier, v->last + v->n_scoped + 1);
  assert_int_equal(n_cancelled, v->n_scoped);
  for (size_t i = 0; i < v->n_scoped; i++) {
    int found = 0;
    for (size_t j = 0; j < n_cancelled; j++) found += cancelled[j] == v->scoped[i];
    assert_int_equal(found, 1);
  }
  gt_close(c);
}

/* The child: a server on a new directory; reports "<port> <dir>" on fd and
 * waits to be killed. */
static void child_server(int fd) {
  ts_server_t s;
  int ok = ts_server_start(&s, 0, NULL, setup_keys) == 0;
  char msg[128];
  int n = snprintf(msg, sizeof msg, "%u %s\n", ok ? (unsigned)s.port : 0u, s.dir);
  if (write(fd, msg, (size_t)n) != n) _exit(3);
  close(fd);
  for (;;) pause();
}

/* The server child of the running test; the teardown kills it if the test
 * failed before it did. */
static pid_t child_pid = -1;

static int kill_child(void **state) {
  (void)state;
  if (child_pid > 0) {
    kill(child_pid, SIGKILL);
    waitpid(child_pid, NULL, 0);
  }
  child_pid = -1;
  return 0;
}

static void scenario(int crash, int late) {
  ts_server_t s;
  pid_t pid = -1;
  if (crash) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      child_server(fds[1]);
    }
    child_pid = pid;
    close(fds[1]);
    char msg[128] = {0};
    size_t got = 0;
    while (got < sizeof msg - 1 && (got == 0 || msg[got - 1] != '\n')) {
      ssize_t r = read(fds[0], msg + got, sizeof msg - 1 - got);
      if (r <= 0) break;
      got += (size_t)r;
    }
    close(fds[0]);
    memset(&s, 0, sizeof s);
    unsigned port = 0;
    assert_int_equal(sscanf(msg, "%u %63s", &port, s.dir), 2);
    assert_true(port > 0);
    s.port = (uint16_t)port;
    snprintf(s.keys, sizeof s.keys, "%s/keys", s.dir);
  } else {
    assert_int_equal(ts_server_start(&s, 0, NULL, setup_keys), 0);
  }
  setup_market(&s);

  gt_client_t a, b, c;
  key_view_t va = {0}, vb = {0}, vc = {0};
  uint64_t epoch = 0;
  assert_int_equal(login(&a, s.port, KA, 1, &epoch), 1);
  assert_int_equal(epoch, 1);
  assert_int_equal(login(&b, s.port, KB, 0, &epoch), 1);
  assert_int_equal(login(&c, s.port, KC, 0, &epoch), 1);
  assert_int_equal(epoch, 1);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(gt_new_order(&a, (uint32_t)i + 1, 11 + (uint64_t)i, BUY, 400, 5, GTC), 0);
    va.scoped[va.n_scoped++] = wait_new(&a, a.seq, &va, 1, 0);
  }
  quote_two(&b, &vb);
  assert_int_equal(gt_new_order(&c, 1, 31, SELL, 600, 7, GTC), 0);
  wait_new(&c, c.seq, &vc, 1, 0);
  assert_int_equal(va.n_scoped, 2);
  assert_int_equal(vb.n_scoped, 4);

  if (crash) { /* every session open, no stop of any kind */
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    child_pid = -1;
    assert_true(WIFSIGNALED(st));
    gt_close(&a);
    gt_close(&b);
    gt_close(&c);
  } else { /* a clean stop with the sessions still open */
    ts_server_halt(&s);
    gt_close(&a);
    gt_close(&b);
    gt_close(&c);
  }
  assert_int_equal(ts_server_reopen(&s, 0, NULL, NULL), 0);

  if (late) {
    /* The operator's request is answered after every event of the
     * SessionsEnded sequenced before it has been routed. */
    gt_client_t op;
    assert_true(login(&op, s.port, OP, 0, &epoch) > 0);
    assert_int_equal(epoch, 2);
    gt_add_account(&op, 999, 9);
    assert_int_equal(gt_response_reason(&op), 0);
    gt_close(&op);
  }
  check_after(&a, s.port, KA, &va, late);
  check_after(&b, s.port, KB, &vb, late);
  /* C's order rests on: nothing new in its stream. */
  assert_int_equal(login(&c, s.port, KC, 0, &epoch), vc.last + 1);
  assert_int_equal(epoch, 2);
  gt_close(&c);
  ts_server_stop(&s);
}

static void test_crash_late_login(void **state) {
  (void)state;
  scenario(1, 1);
}

static void test_crash_login_at_once(void **state) {
  (void)state;
  scenario(1, 0);
}

static void test_clean_stop_late_login(void **state) {
  (void)state;
  scenario(0, 1);
}

static void test_clean_stop_login_at_once(void **state) {
  (void)state;
  scenario(0, 0);
}

/*
 * An ordinary order that rests across a restart and fills before its key
 * logs in again: the fill is in the key's stream, next after what it saw.
 */
static void test_fill_before_login(void **state) {
  (void)state;
  ts_server_t s;
  assert_int_equal(ts_server_start(&s, 0, NULL, setup_keys), 0);
  setup_market(&s);
  gt_client_t a, c;
  uint64_t epoch = 0;
  key_view_t vc = {0};
  assert_int_equal(login(&c, s.port, KC, 0, &epoch), 1);
  assert_int_equal(gt_new_order(&c, 1, 31, SELL, 600, 7, GTC), 0);
  uint64_t c_oid = wait_new(&c, c.seq, &vc, 1, 0);
  gt_close(&c);
  ts_server_halt(&s);
  assert_int_equal(ts_server_reopen(&s, 0, NULL, NULL), 0);

  /* A buys 2 of C's order (IOC) while C is away. */
  assert_int_equal(login(&a, s.port, KA, 0, &epoch), 1);
  assert_int_equal(gt_new_order(&a, 1, 41, BUY, 600, 2, HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC),
                   0);
  for (;;) {
    env_t *e = gt_expect(&a, BODY(EXECUTION_REPORT), 5000);
    assert_non_null(e);
    if (e->execution_report->exec_type == EXEC(FILL)) break;
  }
  gt_close(&a);

  uint64_t next = login(&c, s.port, KC, 0, &epoch);
  assert_int_equal(epoch, 2);
  assert_int_equal(next, vc.last + 2);
  retransmit(&c, vc.last + 1, 1);
  env_t *e = gt_expect(&c, BODY(RETRANSMISSION), 5000);
  assert_non_null(e);
  assert_int_equal(e->retransmission->reason, 0);
  e = gt_expect(&c, BODY(EXECUTION_REPORT), 5000);
  assert_non_null(e);
  assert_int_equal(e->seq, vc.last + 1);
  const Hourglass__V1__ExecutionReport *er = e->execution_report;
  assert_int_equal(er->exec_type, EXEC(FILL));
  assert_int_equal(er->order_id, c_oid);
  assert_true(er->has_maker && er->maker);
  assert_int_equal(er->price, 600);
  assert_int_equal(er->qty, 2);
  assert_int_equal(er->leaves, 5);
  gt_close(&c);
  ts_server_stop(&s);
}

/* Bid levels of instrument 1 (each order below rests alone at its price). */
static size_t bid_levels(gt_client_t *c) {
  Hourglass__V1__MarketDataSubscribe m = HOURGLASS__V1__MARKET_DATA_SUBSCRIBE__INIT;
  m.instrument_id = 1;
  m.has_depth = 1;
  m.depth = 50;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = BODY(MD_SUBSCRIBE);
  env.md_subscribe = &m;
  assert_int_equal(gt_send(c, &env), 0);
  for (;;) {
    env_t *e = gt_recv(c, 5000);
    assert_non_null(e);
    if (e->body_case != BODY(MD_SNAPSHOT)) continue;
    assert_int_equal(e->md_snapshot->reason, 0);
    return e->md_snapshot->n_bids;
  }
}

/*
 * A stop while orders are in flight: the orders the engine accepted before
 * it stopped are exactly those whose reports the key received before the
 * stop's Terminate, and the stream after the restart holds nothing more.
 * Orders go out in bursts and the stop comes right after a burst, so that
 * some are usually between the gateway and the durable journal then.
 */
static void test_stop_answers_in_flight(void **state) {
  (void)state;
  for (int round = 0; round < 3; round++) {
    ts_server_t s;
    assert_int_equal(ts_server_start(&s, 0, NULL, setup_keys), 0);
    setup_market(&s);
    gt_client_t a, c;
    uint64_t epoch = 0;
    assert_int_equal(login(&a, s.port, KA, 0, &epoch), 1);
    /* A first order answered: the gateway reads A's socket. */
    assert_int_equal(gt_new_order(&a, 1, 1, BUY, 100, 1, GTC), 0);
    key_view_t va = {0};
    wait_new(&a, a.seq, &va, 1, 0);
    for (int i = 0; i < 40; i++)
      assert_int_equal(gt_new_order(&a, 1, 2 + (uint64_t)i, BUY, 101 + i, 1, GTC), 0);
    usleep((useconds_t)(round * 300));
    ts_server_halt(&s);
    size_t reports = 1;
    for (;;) {
      env_t *e = gt_recv(&a, 5000);
      assert_non_null(e);
      if (e->body_case == BODY(TERMINATE)) break;
      if (!e->has_seq) continue;
      assert_int_equal(e->seq, va.last + 1);
      va.last = e->seq;
      assert_int_equal(e->body_case, BODY(EXECUTION_REPORT));
      assert_int_equal(e->execution_report->exec_type, EXEC(NEW));
      reports++;
    }
    gt_close(&a);
    assert_int_equal(ts_server_reopen(&s, 0, NULL, NULL), 0);
    assert_int_equal(login(&c, s.port, KC, 0, &epoch), 1);
    assert_int_equal(bid_levels(&c), reports);
    gt_close(&c);
    assert_int_equal(login(&a, s.port, KA, 0, &epoch), va.last + 1);
    gt_close(&a);
    ts_server_stop(&s);
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_crash_late_login, kill_child),
      cmocka_unit_test_teardown(test_crash_login_at_once, kill_child),
      cmocka_unit_test(test_clean_stop_late_login),
      cmocka_unit_test(test_clean_stop_login_at_once),
      cmocka_unit_test(test_fill_before_login),
      cmocka_unit_test(test_stop_answers_in_flight),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
