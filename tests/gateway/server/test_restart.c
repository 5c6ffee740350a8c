/*
 * test_restart.c - session-scoped orders across a crash of the exchange.
 *
 * A child process runs the gateway and pipeline on a fresh data directory
 * (durable acknowledgements). Key A logs in with cancel-on-disconnect and
 * rests a buy; market maker B sends a MassQuote (one bid, one ask); key C,
 * without cancel-on-disconnect, rests a sell. The child is then killed with
 * SIGKILL: no disconnect handling, no clean stop. This process restarts the
 * exchange on the same directory and checks that A's order and B's quotes
 * are gone from the book (the market data shows only what should be
 * there), that C's order is live with its leaves (OrderStatus from the
 * seeded mirror), and that two new MassQuotes from B leave exactly one
 * quote per side.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client_util.h"

typedef Hourglass__V1__Envelope env_t;
#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x
#define EXEC(x) HOURGLASS__V1__EXEC_TYPE__EXEC_##x

#define OP 1u
#define KA 10u /* trader, cancel-on-disconnect */
#define KB 20u /* market maker */
#define KC 30u /* trader, no cancel-on-disconnect */
#define ACC_A 100u
#define ACC_B 200u
#define ACC_C 300u
#define QGROUP 7u

static const ts_server_options_t OPTS = {.durable = 1};

static hg_client_t *login(uint16_t port, uint64_t key, bool cod) {
  uint8_t sec[32];
  ts_key_secret(key, sec);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = port;
  cfg.key_id = key;
  cfg.secret = sec;
  cfg.secret_len = 32;
  cfg.cancel_on_disconnect = cod;
  hg_client_t *c = NULL;
  assert_int_equal(hg_client_create(&cfg, &c), 0);
  assert_int_equal(hg_client_connect(c), 0);
  return c;
}

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The next frame of type body answering request seq (ref_seq; 0: any),
 * skipping everything else; NULL after 10 s (heartbeats do not extend it). */
static const env_t *wait_for(hg_client_t *c, int body, uint64_t seq) {
  uint64_t deadline = mono_ms() + 10000;
  for (;;) {
    const env_t *e = NULL;
    if (mono_ms() > deadline || hg_client_recv(c, 5000, &e) != 1) return NULL;
    uint64_t ref = e->body_case == BODY(EXECUTION_REPORT)   ? e->execution_report->ref_seq
                   : e->body_case == BODY(ORDER_STATUS)     ? e->order_status->ref_seq
                   : e->body_case == BODY(MASS_QUOTE_ACK)   ? e->mass_quote_ack->ref_seq
                   : e->body_case == BODY(MD_SNAPSHOT)      ? e->md_snapshot->ref_seq
                                                            : 0;
    if ((int)e->body_case == body && (ref == seq || seq == 0)) return e;
  }
}

/* A GTC limit order on instrument 1; returns its order id. */
static uint64_t rest(hg_client_t *c, uint32_t side, int64_t price, int64_t qty, uint64_t clordid) {
  hg_client_order_t o = {.instrument_id = 1, .client_order_id = clordid, .side = side,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC, .has_price = true,
                         .price = price, .qty = qty};
  uint64_t seq = 0;
  assert_int_equal(hg_client_new_order(c, &o, &seq), 0);
  const env_t *e = wait_for(c, BODY(EXECUTION_REPORT), seq);
  assert_non_null(e);
  assert_int_equal(e->execution_report->exec_type, EXEC(NEW));
  return e->execution_report->order_id;
}

/* A MassQuote of one entry on instrument 1; waits for the ack and both
 * sides' NEW reports and stores their order ids (bid, ask). */
static void quote(hg_client_t *c, int64_t bid, int64_t ask, int64_t qty, uint64_t ids[2]) {
  Hourglass__V1__QuoteEntry q = HOURGLASS__V1__QUOTE_ENTRY__INIT;
  q.instrument_id = 1;
  q.has_bid_price = q.has_bid_qty = q.has_ask_price = q.has_ask_qty = 1;
  q.bid_price = bid;
  q.bid_qty = qty;
  q.ask_price = ask;
  q.ask_qty = qty;
  const Hourglass__V1__QuoteEntry *qp = &q;
  uint64_t seq = 0;
  assert_int_equal(hg_client_mass_quote(c, QGROUP, &qp, 1, 0, 0, &seq), 0);
  int news = 0, acked = 0;
  uint64_t deadline = mono_ms() + 10000;
  while (news < 2 || !acked) {
    const env_t *e = NULL;
    assert_true(mono_ms() < deadline);
    assert_int_equal(hg_client_recv(c, 5000, &e), 1);
    if (e->body_case == BODY(MASS_QUOTE_ACK) && e->mass_quote_ack->ref_seq == seq) {
      assert_int_equal(e->mass_quote_ack->reason, 0);
      assert_int_equal(e->mass_quote_ack->n_rejects, 0);
      acked = 1;
    } else if (e->body_case == BODY(EXECUTION_REPORT) && e->execution_report->ref_seq == seq) {
      const Hourglass__V1__ExecutionReport *er = e->execution_report;
      assert_int_equal(er->exec_type, EXEC(NEW));
      ids[er->side == HOURGLASS__V1__SIDE__SIDE_BUY ? 0 : 1] = er->order_id;
      news++;
    }
  }
}

typedef struct status {
  bool live;
  int64_t leaves, price;
} status_t;

static status_t order_status(hg_client_t *c, uint64_t order_id) {
  uint64_t seq = 0;
  assert_int_equal(hg_client_order_status(c, 1, order_id, &seq), 0);
  const env_t *e = wait_for(c, BODY(ORDER_STATUS), seq);
  assert_non_null(e);
  return (status_t){e->order_status->live, e->order_status->leaves, e->order_status->price};
}

/* The book of instrument 1 as "B<qty>@<price> ... | A<qty>@<price> ...". */
static void book_text(hg_client_t *c, char *out, size_t cap) {
  uint64_t seq = 0;
  assert_int_equal(hg_client_md_subscribe(c, 1, 10, &seq), 0);
  const env_t *e = wait_for(c, BODY(MD_SNAPSHOT), seq);
  assert_non_null(e);
  const Hourglass__V1__MarketDataSnapshot *s = e->md_snapshot;
  assert_int_equal(s->reason, 0);
  size_t n = 0;
  for (size_t i = 0; i < s->n_bids; i++)
    n += (size_t)snprintf(out + n, cap - n, "B%" PRId64 "@%" PRId64 " ", s->bids[i]->qty,
                          s->bids[i]->price);
  n += (size_t)snprintf(out + n, cap - n, "|");
  for (size_t i = 0; i < s->n_asks; i++)
    n += (size_t)snprintf(out + n, cap - n, " A%" PRId64 "@%" PRId64, s->asks[i]->qty,
                          s->asks[i]->price);
  uint64_t useq = 0;
  assert_int_equal(hg_client_md_unsubscribe(c, 1, &useq), 0);
}

/* The child: a server on a new data directory; reports "<port> <dir>" on
 * fd, then waits to be killed. Never returns. */
static void child_server(int fd) {
  ts_server_t s;
  int ok = ts_server_create(&s, &OPTS) == 0 && ts_server_add_key(&s, OP, HG_ROLE_OPERATOR, 0, 1) == 0 &&
           ts_server_add_key(&s, KA, HG_ROLE_TRADER, ACC_A, 1) == 0 &&
           ts_server_add_key(&s, KB, HG_ROLE_MARKET_MAKER, ACC_B, 2) == 0 &&
           ts_server_add_key(&s, KC, HG_ROLE_TRADER, ACC_C, 3) == 0 && ts_server_run(&s) == 0;
  char msg[300];
  int n = snprintf(msg, sizeof msg, "%u %s\n", ok ? (unsigned)s.port : 0u, s.dir);
  if (write(fd, msg, (size_t)n) != n) _exit(3);
  close(fd);
  for (;;) pause();
}

static void test_crash_ends_session_scoped_orders(void **state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    child_server(fds[1]);
  }
  close(fds[1]);
  char msg[300] = {0};
  size_t got = 0;
  while (got < sizeof msg - 1 && (got == 0 || msg[got - 1] != '\n')) {
    ssize_t r = read(fds[0], msg + got, sizeof msg - 1 - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fds[0]);
  unsigned port = 0;
  char dir[256] = {0};
  assert_int_equal(sscanf(msg, "%u %255s", &port, dir), 2);
  assert_true(port > 0);

  ts_server_t s;
  memset(&s, 0, sizeof s);
  s.port = (uint16_t)port;
  const uint32_t accts[] = {ACC_A, ACC_B, ACC_C}, firms[] = {1, 2, 3};
  assert_int_equal(ch_setup_market(&s, OP, 1, accts, firms, 3), 0);

  hg_client_t *a = login(s.port, KA, true);
  hg_client_t *b = login(s.port, KB, false);
  hg_client_t *c = login(s.port, KC, false);
  uint64_t a_oid = rest(a, HOURGLASS__V1__SIDE__SIDE_BUY, 400, 5, 1);
  uint64_t q_old[2];
  quote(b, 450, 550, 3, q_old);
  uint64_t c_oid = rest(c, HOURGLASS__V1__SIDE__SIDE_SELL, 600, 7, 1);
  char book[256];
  book_text(c, book, sizeof book);
  assert_string_equal(book, "B3@450 B5@400 | A3@550 A7@600");

  /* The crash: the process dies with every session open. */
  assert_int_equal(kill(pid, SIGKILL), 0);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  hg_client_destroy(a);
  hg_client_destroy(b);
  hg_client_destroy(c);

  ts_server_options_t o = OPTS;
  o.data_dir = dir;
  assert_int_equal(ts_server_create(&s, &o), 0);
  assert_int_equal(ts_server_run(&s), 0);
  a = login(s.port, KA, true);
  b = login(s.port, KB, false);
  c = login(s.port, KC, false);

  /* C's ordinary order survived, and the gateway knows it. */
  status_t cs = order_status(c, c_oid);
  assert_true(cs.live);
  assert_int_equal(cs.leaves, 7);
  assert_int_equal(cs.price, 600);
  /* A's cancel-on-disconnect order and B's quotes did not. */
  assert_false(order_status(a, a_oid).live);
  assert_false(order_status(b, q_old[0]).live);
  assert_false(order_status(b, q_old[1]).live);

  /* A new quote is B's only quote; the engine applied the restart's cancels
   * before it (they were sequenced first), so the book is exactly this. */
  uint64_t q_new[2];
  quote(b, 440, 560, 2, q_new);
  book_text(c, book, sizeof book);
  assert_string_equal(book, "B2@440 | A2@560 A7@600");
  /* And the next one replaces it as before the restart. */
  uint64_t q_next[2];
  quote(b, 445, 555, 4, q_next);
  assert_false(order_status(b, q_new[0]).live);
  assert_true(order_status(b, q_next[1]).live);
  book_text(c, book, sizeof book);
  assert_string_equal(book, "B4@445 | A4@555 A7@600");
  /* C's order still trades: A buys 2 of it. */
  hg_client_order_t buy = {.instrument_id = 1, .client_order_id = 2,
                           .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                           .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                           .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC, .has_price = true,
                           .price = 600, .qty = 6};
  uint64_t seq = 0;
  assert_int_equal(hg_client_new_order(a, &buy, &seq), 0);
  /* Fills carry no ref_seq: 4 from B's ask at 555 first, then 2 from C. */
  int64_t filled[2] = {0, 0};
  while (filled[1] == 0) {
    const env_t *e = wait_for(a, BODY(EXECUTION_REPORT), 0);
    assert_non_null(e);
    const Hourglass__V1__ExecutionReport *er = e->execution_report;
    if (er->exec_type != EXEC(FILL)) continue;
    assert_true(er->price == 555 || er->price == 600);
    filled[er->price == 600] += er->qty;
  }
  assert_int_equal(filled[0], 4);
  assert_int_equal(filled[1], 2);
  cs = order_status(c, c_oid);
  assert_true(cs.live);
  assert_int_equal(cs.leaves, 5);

  hg_client_destroy(a);
  hg_client_destroy(b);
  hg_client_destroy(c);
  ts_server_stop(&s);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crash_ends_session_scoped_orders),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
