/*
 * test_hgctl.c - hgctl's network commands as a user runs them: the real
 * binary (path in argv[1]) against a gateway in this process. Checks the
 * printed reports, exit statuses (0 done, 1 refused, 2 usage), symbol
 * resolution, the ladder snapshot, positions, executions history and
 * --follow (a fill made by another session while it tails), mass quotes,
 * the quote group reset and the drop copy tail, the error messages for a
 * bad secret, a refused connection and bad options, and a command whose
 * gateway goes away while it waits (status 1, one "connection lost").
 */
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "client_util.h"
#include "hgctl_run.h"
#include "pipeline_util.h"

#define OP 1u
#define TA 10u
#define TB 11u
#define MM 12u /* market maker on ACC_B */
#define RV 13u /* risk viewer of firm 1 (ACC_A) */
#define ACC_A 100u
#define ACC_B 200u

static ts_server_t srv;

#define RUN(o, ...)                                      \
  do {                                                   \
    const char *const a_[] = {__VA_ARGS__, NULL};        \
    hgctl_run_as((o), TA, NULL, a_);                           \
  } while (0)

static uint64_t field(const char *text, const char *name) {
  const char *p = strstr(text, name);
  assert_non_null(p);
  return strtoull(p + strlen(name), NULL, 10);
}

static int setup(void **state) {
  (void)state;
  ts_server_options_t o = {0};
  if (ts_server_create(&srv, &o) != 0) return -1;
  if (ts_server_add_key(&srv, OP, HG_ROLE_OPERATOR, 0, 0) != 0) return -1;
  if (ts_server_add_key(&srv, TA, HG_ROLE_TRADER, ACC_A, 1) != 0) return -1;
  if (ts_server_add_key(&srv, TB, HG_ROLE_TRADER, ACC_B, 2) != 0) return -1;
  if (ts_server_add_key(&srv, MM, HG_ROLE_MARKET_MAKER, ACC_B, 2) != 0) return -1;
  if (ts_server_add_key(&srv, RV, HG_ROLE_RISK_VIEWER, 0, 1) != 0) return -1;
  if (ts_server_run(&srv) != 0) return -1;
  snprintf(hgctl_port, sizeof hgctl_port, "%u", (unsigned)srv.port);
  const uint32_t acc[] = {ACC_A, ACC_B}, firm[] = {1, 2};
  return ch_setup_market(&srv, OP, 2, acc, firm, 2);
}

static int teardown(void **state) {
  (void)state;
  ts_server_stop(&srv);
  return 0;
}

static void test_orders_and_queries(void **state) {
  (void)state;
  static hgctl_out_t o;
  RUN(&o, "instruments");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "B200.A.2027-01"));
  assert_non_null(strstr(o.text, "B200.A.2027-02"));
  assert_non_null(strstr(o.text, "trading"));
  /* Tick, min and max in one unit, USD per GPU-hour; --raw as on the wire. */
  assert_non_null(strstr(o.text, "tick_usd"));
  assert_non_null(strstr(o.text, "     0.001     1000      0.001    100.000"));
  RUN(&o, "instruments", "--raw");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "      1000     1000          1     100000"));
  RUN(&o, "instruments", "--format", "csv");
  assert_int_equal(o.status, 0);
  assert_true(strncmp(o.text, "id,symbol,grade,month,tick_usd,unit,min_usd,max_usd,max_qty,state\n",
                      66) == 0);
  assert_non_null(strstr(o.text, "\n1,B200.A.2027-01,A,2027-01,0.001,1000,0.001,100.000,"));

  /* 0.5 USD = 500 ticks; printed back with three decimals and a UTC time. */
  RUN(&o, "order", "new", "--instrument", "B200.A.2027-01", "--side", "buy", "--qty", "3",
      "--price", "0.5", "--clordid", "77");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "NEW "));
  assert_non_null(strstr(o.text, "clordid=77 side=buy price=0.500 qty=3 leaves=3"));
  assert_non_null(strstr(o.text, " time=20"));
  assert_non_null(strstr(o.text, "Z\n"));
  uint64_t oid = field(o.text, "order_id=");
  char oid_s[24];
  snprintf(oid_s, sizeof oid_s, "%" PRIu64, oid);

  RUN(&o, "order", "replace", "--instrument", "1", "--order-id", oid_s, "--price", "0.510",
      "--qty", "2");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "REPLACED"));
  assert_non_null(strstr(o.text, "price=0.510"));

  RUN(&o, "ladder", "B200.A.2027-01", "--once", "--depth", "3");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "B200.A.2027-01 (id 1)"));
  /* One bid level: qty 2 at 0.510, no asks. */
  assert_non_null(strstr(o.text, "           2        0.510 |"));
  RUN(&o, "ladder", "B200.A.2027-01", "--once", "--depth", "3", "--raw");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "           2          510 |"));
  /* Named in lower case or by id, the ladder shows the listed symbol. */
  RUN(&o, "ladder", "b200.a.2027-01", "--once", "--depth", "1");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "B200.A.2027-01 (id 1)"));
  RUN(&o, "ladder", "1", "--once", "--depth", "1");
  assert_non_null(strstr(o.text, "B200.A.2027-01 (id 1)"));

  RUN(&o, "order", "cancel", "--instrument", "1", "--order-id", oid_s);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "CANCELLED"));
  assert_non_null(strstr(o.text, "reason=user(1)"));
  RUN(&o, "order", "cancel", "--instrument", "1", "--order-id", oid_s);
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.text, "REJECTED"));
  assert_non_null(strstr(o.text, "reason=unknown_order(11)"));

  RUN(&o, "order", "new", "--instrument", "2", "--side", "sell", "--qty", "1", "--price", "0.9");
  assert_int_equal(o.status, 0);
  RUN(&o, "order", "new", "--instrument", "2", "--side", "sell", "--qty", "1", "--price", "0.901",
      "--post-only", "--tif", "day");
  assert_int_equal(o.status, 0);
  RUN(&o, "order", "mass-cancel", "--instrument", "2", "--side", "buy");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "cancelled 0 orders"));
  RUN(&o, "order", "mass-cancel");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "cancelled 2 orders"));

  RUN(&o, "positions");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "account 100"));

  RUN(&o, "executions", "--last", "50");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "NEW "));
  assert_non_null(strstr(o.text, "REPLACED"));
  assert_non_null(strstr(o.text, "reason=mass_cancel(4)"));

  /* A rejected order: price outside the instrument's range. */
  RUN(&o, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "1", "--price",
      "999999.999");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.text, "REJECTED"));
}

static void test_follow_sees_a_fill(void **state) {
  (void)state;
  static hgctl_out_t o;
  RUN(&o, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "4", "--price", "0.600");
  assert_int_equal(o.status, 0);
  int fo, fe;
  /* --last 1 resends the buy's report: once it is printed, the follower is
   * logged in and anything after it is live. */
  const char *const args[] = {"executions", "--last", "1", "--follow", NULL};
  pid_t pid = hgctl_spawn(TA, NULL, args, &fo, &fe);
  size_t got = 0;
  assert_true(hgctl_read_until(fo, o.text, sizeof o.text, &got, "\n", 10000));
  hg_client_t *b = NULL;
  assert_int_equal(ch_client(&srv, TB, &b), 0);
  assert_int_equal(hg_client_connect(b), 0);
  hg_client_order_t s = {.instrument_id = 1, .client_order_id = 5,
                         .side = HOURGLASS__V1__SIDE__SIDE_SELL,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC, .has_price = true,
                         .price = 600, .qty = 3};
  assert_int_equal(hg_client_new_order(b, &s, NULL), 0);
  assert_true(hgctl_read_until(fo, o.text, sizeof o.text, &got, "maker=1", 10000));
  kill(pid, SIGTERM);
  hgctl_collect(pid, fo, fe, &o, got);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "FILL "));
  assert_non_null(strstr(o.text, "price=0.600 qty=3 leaves=1 maker=1"));
  hg_client_logout(b, 1000);
  hg_client_destroy(b);
  /* The 3 bought show under the instrument's symbol, at an average of
   * 0.600 against the reference 0.500: 3 x -0.100 x 1000 = -300 USD. */
  RUN(&o, "positions");
  assert_int_equal(o.status, 0);
  char want[160];
  snprintf(want, sizeof want, "%-10u %-20s %8d %8d %8d %12s %10s %14s\n", 1u, "B200.A.2027-01", 3,
           3, 0, "0.600", "0.500", "-300.00");
  if (strstr(o.text, want) == NULL) fprintf(stderr, "%s", o.text);
  assert_non_null(strstr(o.text, want));
  assert_non_null(strstr(o.text, "pnl against the last settlement: -300.00 USD\n"));
  /* No margin rates in this market; the line is there when the gateway
   * runs the exchange (loop mode). */
  assert_int_equal(strstr(o.text, "initial margin 0.00 USD (open orders 0.00), excess equity ") != NULL,
                   ts_pipe_mode(NULL) == HG_PIPE_MODE_LOOP);
  /* No mark round has run: good standing, no call line. */
  assert_int_equal(strstr(o.text, "standing good: equity at the marks ") != NULL,
                   ts_pipe_mode(NULL) == HG_PIPE_MODE_LOOP);
  assert_null(strstr(o.text, " due at daily cycle "));
  RUN(&o, "positions", "--raw");
  assert_non_null(strstr(o.text, "        1800        500     -300000000\n"));
  RUN(&o, "order", "mass-cancel");
  assert_non_null(strstr(o.text, "cancelled 1 order"));
}

/* The README tour with one key in three terminals: a ladder and an
 * executions tail run while the same key enters and cancels an order; the
 * tail prints the order's reports and the ladder shows its level. */
static void test_three_terminals_one_key(void **state) {
  (void)state;
  static hgctl_out_t o, lad, tail;
  RUN(&o, "order", "new", "--instrument", "1", "--side", "sell", "--qty", "1", "--price", "0.990");
  assert_int_equal(o.status, 0);
  int lo, le, fo, fe;
  const char *const ladder[] = {"ladder", "B200.A.2027-01", NULL};
  pid_t lpid = hgctl_spawn(TA, NULL, ladder, &lo, &le);
  size_t lgot = 0;
  assert_true(hgctl_read_until(lo, lad.text, sizeof lad.text, &lgot, "0.990", 10000));
  /* The stream holds the ladder's replies too: the sell's NEW is among
   * the last few frames. */
  const char *const follow[] = {"executions", "--last", "4", "--follow", NULL};
  pid_t fpid = hgctl_spawn(TA, NULL, follow, &fo, &fe);
  size_t fgot = 0;
  assert_true(hgctl_read_until(fo, tail.text, sizeof tail.text, &fgot, "price=0.990", 10000));
  /* The third terminal: order entry with the same key. */
  RUN(&o, "order", "new", "--instrument", "B200.A.2027-01", "--side", "buy", "--qty", "7",
      "--price", "0.444", "--clordid", "4444");
  if (o.status != 0) fprintf(stderr, "%s", o.err);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "NEW "));
  assert_non_null(strstr(o.text, "clordid=4444 side=buy price=0.444 qty=7 leaves=7"));
  /* A third session's ref_seq is a wire number above 2^32: --raw only. */
  assert_null(strstr(o.text, "ref_seq="));
  char oid_s[24];
  snprintf(oid_s, sizeof oid_s, "%" PRIu64, field(o.text, "order_id="));
  assert_true(hgctl_read_until(fo, tail.text, sizeof tail.text, &fgot, "clordid=4444", 10000));
  assert_true(hgctl_read_until(lo, lad.text, sizeof lad.text, &lgot, "0.444", 10000));
  RUN(&o, "order", "cancel", "--instrument", "B200.A.2027-01", "--order-id", oid_s, "--raw");
  assert_int_equal(o.status, 0);
  assert_true(field(o.text, " ref_seq=") > (1ull << 32));
  assert_true(hgctl_read_until(fo, tail.text, sizeof tail.text, &fgot, "CANCELLED", 10000));
  kill(fpid, SIGTERM);
  hgctl_collect(fpid, fo, fe, &tail, fgot);
  kill(lpid, SIGTERM);
  hgctl_collect(lpid, lo, le, &lad, lgot);
  assert_int_equal(tail.status, 0);
  assert_int_equal(lad.status, 0);
  assert_non_null(strstr(tail.text, "NEW "));
  assert_non_null(strstr(tail.text, oid_s));
  RUN(&o, "order", "mass-cancel");
  assert_non_null(strstr(o.text, "cancelled 1 order"));
}

#define RUN_AS(o, key, ...)                       \
  do {                                            \
    const char *const a_[] = {__VA_ARGS__, NULL}; \
    hgctl_run_as((o), (key), NULL, a_);                 \
  } while (0)

/* A risk viewer's `positions` shows every account of its firm (here two),
 * and another firm's account answers like an unknown one. */
static void test_risk_viewer_positions_whole_firm(void **state) {
  (void)state;
  static hgctl_out_t o;
  RUN_AS(&o, OP, "op", "add-account", "--account", "150", "--firm", "1");
  assert_int_equal(o.status, 0);
  RUN_AS(&o, RV, "positions");
  if (o.status != 0) fprintf(stderr, "%s", o.err);
  assert_int_equal(o.status, 0);
  const char *a = strstr(o.text, "account 100 cash");
  const char *b = strstr(o.text, "account 150 cash 0.00 USD");
  assert_non_null(a);
  assert_non_null(b);
  assert_true(a < b);
  assert_null(strstr(o.text, "account 200"));
  /* For scripts: one row per account and contract, an account without
   * positions as one row with the contract columns empty. */
  RUN_AS(&o, RV, "positions", "--format", "csv");
  assert_int_equal(o.status, 0);
  const char *hdr = "account,instrument,symbol,net,bought,sold,avg_price,settle_usd,pnl_usd,"
                    "cash_usd,initial_margin_usd,excess_equity_usd,standing,mark_equity_usd,"
                    "maintenance_margin_usd,call_usd,call_due_cycle\n";
  assert_true(strncmp(o.text, hdr, strlen(hdr)) == 0);
  assert_non_null(strstr(o.text, "\n150,,,,,,,,,0.00,"));
  /* The standing columns: good, no call (loop mode; empty otherwise). */
  if (ts_pipe_mode(NULL) == HG_PIPE_MODE_LOOP)
    assert_non_null(strstr(o.text, ",good,0.00,0.00,0.00,0\n"));
  assert_non_null(strstr(o.text, "\n100,"));
  assert_null(strstr(o.text, "\n200,"));
  RUN_AS(&o, RV, "positions", "--format", "json", "--account", "150");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "[{\"account\":150,\"instrument\":null,\"symbol\":null,"));
  RUN_AS(&o, RV, "positions", "--account", "150");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "account 150 cash"));
  assert_null(strstr(o.text, "account 100"));
  RUN_AS(&o, RV, "positions", "--account", "200");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "unknown_account"));
}

/* A mass quote, a drop copy tail that sees the fill against it, the
 * protection pull that fill causes, and the group's reset. */
static void test_quotes_and_drop_copy(void **state) {
  (void)state;
  static hgctl_out_t o;
  RUN_AS(&o, MM, "quote", "--group", "7", "--quote", "B200.A.2027-02:5@0.4/5@0.600", "--quote",
         "1:2@0.410/", "--mmp-qty", "1", "--mmp-window-ms", "60000");
  if (o.status != 0) fprintf(stderr, "%s%s", o.text, o.err);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "ACK group=7 reason=none(0) rejects=0"));
  RUN(&o, "ladder", "B200.A.2027-02", "--once", "--depth", "1");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "           5        0.400 | 0.600        5"));

  int fo, fe;
  const char *const args[] = {"dropcopy", NULL};
  pid_t pid = hgctl_spawn(RV, NULL, args, &fo, &fe);
  /* Waits for what the drop copy prints, not for a fixed time: a loaded
   * machine may take seconds to start it. */
  static hgctl_out_t d;
  size_t got = 0;
  assert_true(hgctl_read_until(fo, d.text, sizeof d.text, &got, "SUBSCRIBED\n", 20000));
  RUN(&o, "order", "new", "--instrument", "2", "--side", "sell", "--qty", "2", "--price", "0.400",
      "--tif", "ioc");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "FILL "));
  assert_true(hgctl_read_until(fo, d.text, sizeof d.text, &got, "account=100", 20000));
  kill(pid, SIGTERM);
  hgctl_collect(pid, fo, fe, &d, got); /* and whatever followed */
  assert_int_equal(d.status, 0);
  const char *fill = strstr(d.text, "FILL ");
  assert_non_null(fill);
  assert_non_null(strstr(fill, "side=sell price=0.400 qty=2 leaves=0 maker=0 account=100"));
  /* Firm 1's drop copy never shows the market maker's (firm 2) side. */
  assert_null(strstr(d.text, "account=200"));

  /* 2 filled > mmp-qty 1: the group's quotes are pulled; reset re-enables. */
  RUN(&o, "ladder", "B200.A.2027-02", "--once", "--depth", "1");
  assert_null(strstr(o.text, "| 0.600        5"));
  RUN_AS(&o, MM, "quote", "reset", "--group", "7");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "OK quote-reset"));
  RUN_AS(&o, MM, "quote", "--group", "7", "--quote", "2:1@0.390/1@0.610");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "ACK group=7 reason=none(0) rejects=0"));
  assert_non_null(strstr(o.text, "QUOTED sides=2 accepted=2 refused=0\n"));

  /* Both sides refused by the engine (post-only would cross a trader's
   * 0.500 bid and 0.510 ask): the ACK has no rejects, but the command
   * fails and says so. */
  RUN(&o, "order", "new", "--instrument", "2", "--side", "buy", "--qty", "1", "--price", "0.500");
  assert_int_equal(o.status, 0);
  RUN(&o, "order", "new", "--instrument", "2", "--side", "sell", "--qty", "1", "--price", "0.510");
  assert_int_equal(o.status, 0);
  RUN_AS(&o, MM, "quote", "--group", "8", "--quote", "2:1@0.520/1@0.490");
  if (o.status != 1) fprintf(stderr, "%s%s", o.text, o.err);
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.text, "ACK group=8 reason=none(0) rejects=0"));
  assert_non_null(strstr(o.text, "QUOTED sides=2 accepted=0 refused=2\n"));
  assert_non_null(strstr(o.err, "2 of 2 quoted sides refused"));
  RUN(&o, "order", "mass-cancel");
  assert_int_equal(o.status, 0);

  /* One side only, the other left out (the old "0@0" still means the same). */
  RUN_AS(&o, MM, "quote", "--group", "7", "--quote", "2:/1@0.620");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "ACK group=7 reason=none(0) rejects=0"));
  RUN(&o, "ladder", "2", "--once", "--depth", "1");
  assert_non_null(strstr(o.text, "| 0.620        1"));
  assert_null(strstr(o.text, "0.390"));
  /* For scripts: the quote's reports in the columns of executions. */
  RUN_AS(&o, MM, "quote", "--group", "7", "--quote", "b200.a.2027-02:/1@0.630", "--format", "csv");
  if (o.status != 0) fprintf(stderr, "%s%s", o.text, o.err);
  assert_int_equal(o.status, 0);
  assert_true(strncmp(o.text, "exec_type,seq,instrument,symbol,order_id,clordid,side,price_usd,qty,"
                              "leaves,maker,reason,account,time_utc\n", 98) == 0);
  assert_non_null(strstr(o.text, "\nNEW,"));
  assert_non_null(strstr(o.text, ",2,B200.A.2027-02,"));
  assert_non_null(strstr(o.text, ",sell,0.630,1,1,,,,"));
  assert_null(strstr(o.text, "ACK "));
  RUN_AS(&o, MM, "quote", "--group", "7", "--quote", "2:/1@0.620", "--format", "json");
  assert_int_equal(o.status, 0);
  assert_true(o.text[0] == '[');
  assert_non_null(strstr(o.text, "{\"exec_type\":\"NEW\",\"seq\":"));
  assert_non_null(strstr(o.text, "\"side\":\"sell\",\"price_usd\":0.620,\"qty\":1,"));
  assert_non_null(strstr(o.text, "}]\n"));
  RUN_AS(&o, MM, "quote", "reset", "--group", "7", "--format", "csv");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "leave out --format"));
  RUN_AS(&o, MM, "quote", "--group", "7", "--quote", "2:/");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "must be SYMBOL:BIDQTY@BID/ASKQTY@ASK"));

  /* Refusals and usage errors. */
  RUN(&o, "quote", "--group", "7", "--quote", "2:1@0.390/1@0.610");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "not_permitted"));
  RUN(&o, "quote", "reset", "--group", "7");
  assert_int_equal(o.status, 1);
  RUN(&o, "dropcopy");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "not_permitted"));
  RUN_AS(&o, MM, "quote", "--group", "7", "--quote", "2:1@0.390");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "must be SYMBOL:BIDQTY@BID/ASKQTY@ASK"));
  RUN_AS(&o, MM, "quote", "--group", "7", "--quote", "2:1@0.3905/1@0.610");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "must be SYMBOL:BIDQTY@BID/ASKQTY@ASK"));
  RUN_AS(&o, MM, "quote", "--quote", "2:1@0.390/1@0.610");
  assert_int_equal(o.status, 2);
  RUN_AS(&o, MM, "quote", "--group", "7");
  assert_int_equal(o.status, 2);
  RUN_AS(&o, MM, "order", "mass-cancel");
  assert_int_equal(o.status, 0);
}

static void test_errors(void **state) {
  (void)state;
  static hgctl_out_t o;
  const char *const inst[] = {"instruments", NULL};
  hgctl_run_as(&o, TA, "00112233", inst);
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "login refused: authentication failed"));
  hgctl_run_as(&o, TA, "xyz", inst);
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "secret must be hex"));

  RUN(&o, "order", "new", "--instrument", "1", "--side", "up", "--qty", "1", "--price", "1");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "--side must be buy or sell"));
  RUN(&o, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "x", "--price", "1");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "--qty 'x' is not a number"));
  RUN(&o, "order", "cancel", "--bogus", "1");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "unknown option '--bogus'"));
  RUN(&o, "ladder", "NO.SUCH");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "no instrument 'NO.SUCH'"));
  RUN(&o, "ladder");
  assert_int_equal(o.status, 2);
  /* Nothing listens on port 1. */
  RUN(&o, "positions", "--port", "1");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "cannot connect to 127.0.0.1:1"));
}

/* Prices typed in USD per GPU-hour become exact ticks or a clear refusal
 * before anything is sent; --raw speaks ticks, micro-USD and ns. */
static void test_prices_in_usd(void **state) {
  (void)state;
  static hgctl_out_t o;
  static const struct {
    const char *price, *why;
  } bad[] = {
      {"3.4205", "--price '3.4205' has more than 3 decimals: prices are on a tick of 0.001 USD"},
      {"3.4200", "has more than 3 decimals"},
      {"-1", "--price '-1' must be above zero"},
      {"0.000", "--price '0.000' must be above zero"},
      {"99999999999999999999", "--price '99999999999999999999' is too large"},
      {"3,42", "--price '3,42' is not a price in USD per GPU-hour (e.g. 3.42)"},
      {"3.", "is not a price"},
      /* ticks typed without --raw: no contract trades at 1000 USD */
      {"3420", "--price '3420' is 3420 USD per GPU-hour: did you mean 3.420? (prices are in USD "
               "per GPU-hour; --raw takes ticks)"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    RUN(&o, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "1", "--price",
        bad[k].price);
    assert_int_equal(o.status, 2);
    if (strstr(o.err, bad[k].why) == NULL) fprintf(stderr, "%s: %s", bad[k].price, o.err);
    assert_non_null(strstr(o.err, bad[k].why));
    assert_string_equal(o.text, "");
  }
  RUN(&o, "order", "replace", "--instrument", "1", "--order-id", "1", "--price", "0.5005",
      "--qty", "1");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "has more than 3 decimals"));

  /* 3.420 USD is 3420 ticks on the wire, printed back as typed; a symbol
   * in lower case names the same contract. */
  RUN(&o, "order", "new", "--instrument", "b200.a.2027-01", "--side", "buy", "--qty", "1",
      "--price", "3.420");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "side=buy price=3.420 qty=1 leaves=1"));
  RUN(&o, "ladder", "1", "--once", "--depth", "1", "--raw");
  assert_non_null(strstr(o.text, "           1         3420 |"));
  RUN(&o, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "1", "--price", "3.420",
      "--raw");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "--price '3.420' is not a number"));

  /* --raw: ticks in, ticks and nanoseconds out. */
  RUN(&o, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "1", "--price", "550",
      "--raw");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "price=550 qty=1"));
  assert_non_null(strstr(o.text, " ts="));
  assert_null(strstr(o.text, " time="));
  RUN(&o, "executions", "--last", "1");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "price=0.550 qty=1"));
  /* For scripts: the same report as a row (symbol, USD, UTC). */
  RUN(&o, "executions", "--last", "1", "--format", "csv");
  assert_int_equal(o.status, 0);
  assert_true(strncmp(o.text, "exec_type,seq,instrument,symbol,order_id,clordid,side,price_usd,"
                              "qty,leaves,maker,reason,account,time_utc,liquidation\nNEW,",
                      121) == 0);
  assert_non_null(strstr(o.text, ",1,B200.A.2027-01,"));
  assert_non_null(strstr(o.text, ",buy,0.550,1,1,,,,"));
  /* --last counts execution reports, not frames: the symbol lookups'
   * replies of the runs above are in the stream after the report, and
   * --last 1 still finds it; --last 2 is it and the report before. */
  RUN(&o, "executions", "--last", "1", "--format", "json");
  assert_int_equal(o.status, 0);
  assert_true(strncmp(o.text, "[{\"exec_type\":\"NEW\",", 20) == 0);
  assert_null(strstr(o.text, "},{"));
  assert_non_null(strstr(o.text, "\"side\":\"buy\",\"price_usd\":0.550,"));
  RUN(&o, "executions", "--last", "2", "--format", "csv");
  assert_int_equal(o.status, 0);
  {
    int rows = 0;
    for (const char *p = strchr(o.text, '\n'); p != NULL && p[1] != '\0'; p = strchr(p + 1, '\n'))
      rows++;
    assert_int_equal(rows, 2);
  }
  RUN(&o, "executions", "--last", "0");
  assert_int_equal(o.status, 0);
  assert_null(strstr(o.text, "NEW "));
  RUN(&o, "executions", "--last", "3", "--format", "json");
  assert_int_equal(o.status, 0);
  assert_true(o.text[0] == '[');
  assert_non_null(strstr(o.text, "{\"exec_type\":\"NEW\","));
  assert_non_null(strstr(o.text,
                         "\"side\":\"buy\",\"price_usd\":0.550,\"qty\":1,\"leaves\":1,"
                         "\"maker\":null,\"reason\":null,\"account\":null,\"time_utc\":\""));
  assert_non_null(strstr(o.text, "\"liquidation\":null}"));
  RUN(&o, "positions");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, " USD\n"));
  RUN(&o, "order", "mass-cancel");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "cancelled 2 orders"));
}

/* The gateway's address from HG_HOST / HG_PORT, so that one export
 * serves every command; an option still wins over the environment. */
static void test_address_from_environment(void **state) {
  (void)state;
  static hgctl_out_t o;
  setenv("HG_HOST", "127.0.0.1", 1);
  setenv("HG_PORT", hgctl_port, 1);
  hgctl_port_from_env = true;
  RUN(&o, "instruments");
  if (o.status != 0) fprintf(stderr, "%s", o.err);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "B200.A.2027-01"));
  setenv("HG_PORT", "70000", 1);
  RUN(&o, "instruments");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "HG_PORT '70000' is not in 1..65535"));
  /* Nothing listens on port 1 of this loopback address. */
  setenv("HG_HOST", "127.0.0.2", 1);
  setenv("HG_PORT", "1", 1);
  RUN(&o, "instruments");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "cannot connect to 127.0.0.2:1"));
  /* With --nodes the client goes on through them: the error names them and
   * the last one tried, not only the first address. */
  RUN(&o, "instruments", "--nodes", "127.0.0.3:1,127.0.0.4:1");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "cannot connect to 127.0.0.2:1 nor to any of the nodes "
                                "127.0.0.3:1,127.0.0.4:1 (the last tried: 127.0.0.4:1): "));
  RUN(&o, "instruments", "--host", "127.0.0.1", "--port", hgctl_port);
  assert_int_equal(o.status, 0);
  hgctl_port_from_env = false;
  unsetenv("HG_HOST");
  unsetenv("HG_PORT");
}

/* A second gateway serving TLS (throwaway certificates): hgctl reaches it
 * with --tls --ca (also written before the command) or HG_TLS/HG_CA, and
 * fails, saying why, without a CA it trusts or without TLS. */

static void test_over_tls(void **state) {
  (void)state;
  static hgctl_out_t o;
  char dir[256], ca[320];
  assert_non_null(util_tmpdir(dir, "hgctltls"));
  snprintf(ca, sizeof ca, "%s/ca.pem", dir);
  ts_server_t ts;
  assert_int_equal(ts_server_create_tls(&ts, dir), 0);
  assert_int_equal(ts_server_add_key(&ts, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_run(&ts), 0);
  char plain_port[16];
  snprintf(plain_port, sizeof plain_port, "%s", hgctl_port);
  snprintf(hgctl_port, sizeof hgctl_port, "%u", (unsigned)ts.port);

  RUN(&o, "--tls", "--ca", ca, "instruments");
  if (o.status != 0) fprintf(stderr, "%s", o.err);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "symbol"));
  RUN(&o, "instruments", "--ca", ca);
  assert_int_equal(o.status, 0);
  setenv("HG_TLS", "1", 1);
  setenv("HG_CA", ca, 1);
  RUN(&o, "instruments");
  assert_int_equal(o.status, 0);
  unsetenv("HG_CA");
  RUN(&o, "instruments"); /* the system's CAs do not know this one */
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "TLS failed"));
  unsetenv("HG_TLS");
  RUN(&o, "instruments", "--tls", "--ca", ca, "--tls-name", "exchange.example");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "TLS failed"));
  RUN(&o, "instruments"); /* plain TCP to a TLS port */
  assert_int_equal(o.status, 1);

  snprintf(hgctl_port, sizeof hgctl_port, "%s", plain_port);
  ts_server_stop(&ts);
  util_rm_rf(dir);
}

/* Every command's --help: exit 0, usage on stdout, and its first line names
 * that command (the list comes from `hgctl --help`, so a new command is
 * checked too). */
static void test_help_of_every_command(void **state) {
  (void)state;
  static hgctl_out_t top, o;
  const char *const help[] = {"--help", NULL};
  hgctl_run_as(&top, 0, NULL, help);
  assert_int_equal(top.status, 0);
  int n = 0;
  for (const char *line = strstr(top.text, "\n  hgctl "); line != NULL;
       line = strstr(line + 1, "\n  hgctl ")) {
    /* "  hgctl %-17s summary": the name is "group" or "group verb". */
    char name[32], group[24] = "", verb[24] = "";
    snprintf(name, sizeof name, "%.17s", line + 9);
    for (size_t k = strlen(name); k > 0 && name[k - 1] == ' '; k--) name[k - 1] = '\0';
    if (sscanf(name, "%23s %23s", group, verb) < 1) fail();
    const char *args[] = {group, verb[0] ? verb : "--help", verb[0] ? "--help" : NULL, NULL};
    hgctl_run_as(&o, 0, NULL, args);
    char want[48];
    snprintf(want, sizeof want, "usage: hgctl %s", name);
    if (o.status != 0 || strncmp(o.text, want, strlen(want)) != 0 ||
        (o.text[strlen(want)] != ' ' && o.text[strlen(want)] != '\n'))
      fprintf(stderr, "'hgctl %s --help' printed:\n%s%s", name, o.text, o.err);
    assert_int_equal(o.status, 0);
    assert_memory_equal(o.text, want, strlen(want));
    assert_true(o.text[strlen(want)] == ' ' || o.text[strlen(want)] == '\n');
    if (strcmp(name, "statement") == 0) assert_non_null(strstr(o.text, "--remote"));
    n++;
  }
  assert_true(n >= 29);
}

/* Operator commands on one instrument take --instrument, like the order
 * commands; the positional form is kept. */
static void test_operator_instrument_option(void **state) {
  (void)state;
  static hgctl_out_t o;
  const char *const halt[] = {"op", "halt", "--instrument", "B200.A.2027-02", NULL};
  hgctl_run_as(&o, OP, NULL, halt);
  if (o.status != 0) fprintf(stderr, "%s", o.err);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "OK halt engine_seq="));
  RUN(&o, "ladder", "B200.A.2027-02", "--once");
  assert_non_null(strstr(o.text, "halted"));
  const char *const resume[] = {"op", "resume", "2", NULL};
  hgctl_run_as(&o, OP, NULL, resume);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "OK resume engine_seq="));
  const char *const both[] = {"op", "halt", "--instrument", "2", "2", NULL};
  hgctl_run_as(&o, OP, NULL, both);
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "give the instrument once"));
  const char *const none[] = {"op", "halt", NULL};
  hgctl_run_as(&o, OP, NULL, none);
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "which instrument? (--instrument ID|SYMBOL)"));
  const char *const list[] = {"op", "list", NULL};
  hgctl_run_as(&o, OP, NULL, list);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "B200.A.2027-02"));
  assert_non_null(strstr(o.text, "trading"));
}

/* hgctl orders: the account's live orders from the gateway's list
 * (OpenOrdersRequest); cancelled and filled ones are gone; a risk viewer
 * sees its firm's, never another firm's. */
static void test_orders_lists_live_orders(void **state) {
  (void)state;
  static hgctl_out_t o;
  /* Operators see no account's orders: refused, one line. */
  RUN_AS(&o, OP, "orders");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "hgctl orders: refused: not_permitted (131)"));
  assert_null(strstr(o.text, "order_id"));
  RUN(&o, "order", "mass-cancel");
  RUN(&o, "orders");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "order_id"));
  assert_null(strstr(o.text, "B200.A."));
  RUN(&o, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "2", "--price", "0.45",
      "--clordid", "4501");
  assert_int_equal(o.status, 0);
  RUN(&o, "order", "new", "--instrument", "2", "--side", "sell", "--qty", "5", "--price", "0.95",
      "--clordid", "9501");
  assert_int_equal(o.status, 0);
  char oid_s[24];
  snprintf(oid_s, sizeof oid_s, "%" PRIu64, field(o.text, "order_id="));
  RUN(&o, "order", "new", "--instrument", "2", "--side", "sell", "--qty", "1", "--price", "0.96",
      "--clordid", "9601");
  assert_int_equal(o.status, 0);
  /* The id alone is enough: the order's instrument is looked up among
   * the account's live orders; another account's order is not found. */
  const char *const cancel_b[] = {"order", "cancel", "--order-id", oid_s, NULL};
  hgctl_run_as(&o, TB, NULL, cancel_b);
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "no live order "));
  RUN(&o, "order", "cancel", "--order-id", oid_s);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "CANCELLED "));
  RUN(&o, "order", "cancel", "--order-id", oid_s);
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "(hgctl orders lists them)"));
  /* Another key buys the 0.96 offer whole: filled, not live. */
  const char *const buy[] = {"order", "new", "--instrument", "2", "--side", "buy", "--qty", "1",
                             "--price", "0.96", "--tif", "ioc", NULL};
  hgctl_run_as(&o, TB, NULL, buy);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "FILL "));
  RUN(&o, "orders");
  if (o.status != 0) fprintf(stderr, "%s", o.err);
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, " B200.A.2027-01       buy       0.450          2          2 -      4501\n"));
  assert_null(strstr(o.text, "9501"));
  assert_null(strstr(o.text, "9601"));
  RUN(&o, "orders", "--raw");
  assert_non_null(strstr(o.text, " buy         450          2          2 -      4501\n"));
  /* For scripts: the text's column names, a missing group empty or null. */
  RUN(&o, "orders", "--format", "csv");
  assert_int_equal(o.status, 0);
  assert_true(strncmp(o.text, "account,order_id,symbol,side,price_usd,qty,leaves,group,clordid\n",
                      64) == 0);
  assert_non_null(strstr(o.text, "\n100,"));
  assert_non_null(strstr(o.text, ",B200.A.2027-01,buy,0.450,2,2,,4501\n"));
  RUN(&o, "orders", "--format", "json");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text,
                         "\"symbol\":\"B200.A.2027-01\",\"side\":\"buy\",\"price_usd\":0.450,"
                         "\"qty\":2,\"leaves\":2,\"group\":null,\"clordid\":4501}]\n"));
  RUN(&o, "orders", "--format", "xml");
  assert_int_equal(o.status, 2);
  assert_non_null(strstr(o.err, "--format must be text, json or csv"));
  /* The firm's risk viewer: the same order under ACC_A; ACC_B (firm 2)
   * is refused like an account that does not exist. */
  RUN_AS(&o, RV, "orders", "--format", "csv");
  assert_int_equal(o.status, 0);
  assert_non_null(strstr(o.text, "\n100,"));
  assert_non_null(strstr(o.text, ",B200.A.2027-01,buy,0.450,2,2,,4501\n"));
  assert_null(strstr(o.text, "\n200,"));
  RUN_AS(&o, RV, "orders", "--account", "200");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "not an account this key may see"));
  RUN_AS(&o, RV, "orders", "--account", "999");
  assert_int_equal(o.status, 1);
  assert_non_null(strstr(o.err, "not an account this key may see"));
  RUN(&o, "order", "mass-cancel");
  assert_non_null(strstr(o.text, "cancelled 1 order"));
}

/* ---- a connection lost while a command waits for its answer ---- */

/* Relays one connection from a port of its own to the gateway, and once
 * the gateway has answered the login, closes both sides at the client's
 * next bytes (its request), as a gateway that dies would. */
typedef struct cut_relay {
  int lfd, port;
  pthread_t thr;
} cut_relay_t;

static void *cut_relay_main(void *arg) {
  cut_relay_t *r = arg;
  int cfd = accept(r->lfd, NULL, NULL);
  int sfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(srv.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (cfd < 0 || sfd < 0 || connect(sfd, (struct sockaddr *)&a, sizeof a) != 0) goto out;
  bool answered = false;
  char buf[4096];
  for (;;) {
    struct pollfd p[2] = {{.fd = cfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    if (poll(p, 2, 10000) <= 0) break;
    if (p[0].revents != 0) {
      if (answered) break; /* the request: the "gateway" dies */
      ssize_t n = read(cfd, buf, sizeof buf);
      if (n <= 0 || write(sfd, buf, (size_t)n) != n) break;
    }
    if (p[1].revents != 0) {
      ssize_t n = read(sfd, buf, sizeof buf);
      if (n <= 0 || write(cfd, buf, (size_t)n) != n) break;
      answered = true;
    }
  }
out:
  if (cfd >= 0) close(cfd);
  if (sfd >= 0) close(sfd);
  return NULL;
}

static void cut_relay_start(cut_relay_t *r) {
  r->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(r->lfd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  assert_int_equal(bind(r->lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(r->lfd, 4), 0);
  assert_int_equal(getsockname(r->lfd, (struct sockaddr *)&a, &len), 0);
  r->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&r->thr, NULL, cut_relay_main, r), 0);
}

/* Kills the child still running after 10 s: a command that does not end
 * fails the test instead of hanging it. */
static void *watchdog_main(void *arg) {
  pid_t pid = (pid_t)(intptr_t)arg;
  for (int i = 0; i < 100 && kill(pid, 0) == 0; i++) usleep(100000);
  (void)kill(pid, SIGKILL); /* reaped by hgctl_collect; a no-op on a zombie */
  return NULL;
}

/* Each command that waits for one answer ends with status 1 and one
 * "connection lost" line when the gateway goes away after the login. */
static void test_connection_lost_while_waiting(void **state) {
  (void)state;
  static hgctl_out_t o;
  static const struct {
    uint64_t key;
    const char *args[8];
  } cmds[] = {
      {OP, {"op", "cluster", "status", NULL}},
      {TA, {"positions", NULL}},
      {TA, {"order", "new", "--instrument", "1", "--side", "buy", "--qty", NULL}},
      {OP, {"op", "deposit", "--account", "100", "--amount", "1", NULL}},
  };
  for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
    cut_relay_t r;
    cut_relay_start(&r);
    char port[16];
    snprintf(port, sizeof port, "%d", r.port);
    const char *args[16];
    size_t n = 0;
    for (; cmds[k].args[n] != NULL; n++) args[n] = cmds[k].args[n];
    if (strcmp(args[0], "order") == 0) {
      args[n++] = "1";
      args[n++] = "--price";
      args[n++] = "0.5";
    }
    args[n++] = "--port";
    args[n++] = port;
    args[n] = NULL;
    int fo, fe;
    pid_t pid = hgctl_spawn(cmds[k].key, NULL, args, &fo, &fe);
    pthread_t dog;
    assert_int_equal(pthread_create(&dog, NULL, watchdog_main, (void *)(intptr_t)pid), 0);
    hgctl_collect(pid, fo, fe, &o, 0);
    pthread_join(dog, NULL);
    pthread_join(r.thr, NULL);
    close(r.lfd);
    if (o.status != 1 || strstr(o.err, "connection lost") == NULL)
      fail_msg("%s: status %d, stderr: %.300s", args[0], o.status, o.err);
    const char *second = strstr(strstr(o.err, "connection lost") + 1, "connection lost");
    assert_null(second);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH_TO_HGCTL\n", argv[0]);
    return 2;
  }
  hgctl_path = argv[1];
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_orders_and_queries),
      cmocka_unit_test(test_follow_sees_a_fill),
      cmocka_unit_test(test_three_terminals_one_key),
      cmocka_unit_test(test_quotes_and_drop_copy),
      cmocka_unit_test(test_risk_viewer_positions_whole_firm),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_connection_lost_while_waiting),
      cmocka_unit_test(test_prices_in_usd),
      cmocka_unit_test(test_address_from_environment),
      cmocka_unit_test(test_over_tls),
      cmocka_unit_test(test_help_of_every_command),
      cmocka_unit_test(test_operator_instrument_option),
      cmocka_unit_test(test_orders_lists_live_orders),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
