/*
 * `hgctl replay` on a journal with the clearing guarantee at work
 * (settlement/CONTRACT.md 4.6, 4.7): the call, the liquidation fill, the
 * fund's movements, the fills export's liquidated column and the totals.
 * Argument: the hgctl binary.
 *
 * The scenario, by hand (default clearing: IM 1500 bps outside the delivery
 * month, MM 7500 bps of IM, liquidation fee 50 bps, slices of 10, band 20%;
 * B200.A.2027-03, id 1, reference 3000 ticks, TV = 1 USD per tick).
 *   1 list;  2-4 add accounts 1 (firm 1), 2, 3 (firm 2);
 *   5-7 deposit 1,000 USD to 1, 1,000,000 USD to 2 and 3;
 *   8 fund deposit 100 USD (fund: 100);
 *   9 acct 1 bids 2 @ 3000 (IM 2 x 450 = 900 <= 1,000);
 *   10 acct 2 sells 2 @ 3000: fill, acct 1 +2, acct 2 -2;
 *   11-12 acct 3 bids 5 @ 2600 and offers 5 @ 2610;
 *   13 MARK: the mark is the mid, 2605. Acct 1 at the marks:
 *      E = 1,000 + 2 x (2605 - 3000) = 210 USD,
 *      IM_M = 2 x ceil(2605 x 1,000,000 x 1500 / 10000) = 781.50 USD,
 *      MM = ceil(781.50 x 7500 / 10000) = 586.125 USD: E < MM, liquidating
 *      (call 571.50). Its slice sells 2, limit ceil(2605 x 0.8) = 2084:
 *      fills 2 @ 2600 against acct 3's bid. Fee = min(ceil(2 x 2600 x 1
 *      USD x 50 / 10000) = 26 USD, E after = 1,000 - 2 x 400 = 200) = 26:
 *      acct 1's cash 974, the fund 126. The call was opened due at daily
 *      cycle 0 + 1 = 1; the fill leaves acct 1 flat, so good again.
 *   14 MARK: acct 1 holds nothing: good again.
 */
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_run.h"
#include "cmdgen.h"
#include "hourglass/error.h"
#include "hourglass/pipeline.h"
#include "pipeline_util.h"

#define CAPS "--max-instruments 4 --max-accounts 64 --max-book-orders 65536"
#define DAY_0201 20850 /* 2027-02-01 */
#define NS_H 3600000000000ull

static const char *hgctl;
static char dir[64];
static _Atomic uint64_t clock_ns;
static uint64_t submitted, done;

static uint64_t fake_clock(void *ctx) {
  (void)ctx;
  return atomic_fetch_add(&clock_ns, 1);
}

/* Submits one command and waits until it is processed. */
static void submit(hg_pipeline_t *p, hg_command_t *c) {
  assert_int_equal(util_submit_wait(p, c, &submitted, &done), 0);
}

static void order(hg_pipeline_t *p, uint32_t acct, int side, int64_t price, int64_t qty) {
  hg_command_t c = {0};
  c.type = HG_COMMAND_NEW_ORDER;
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = 1, .account = acct,
                                       .client_order_id = submitted + 1, .side = (uint8_t)side,
                                       .type = HG_ORD_LIMIT, .tif = HG_TIF_GTC, .price = price,
                                       .qty = qty};
  submit(p, &c);
}

/* The pipeline on data directory d, started at 2027-02-01 10:00 UTC, with
 * B200.A.2027-03 listed (seq 1). */
static hg_pipeline_t *market_open(const char *d) {
  util_log_t log = {0};
  hg_pipeline_config_t cfg;
  util_config(&cfg, d, &log);
  cfg.clock = fake_clock;
  atomic_store(&clock_ns, (uint64_t)DAY_0201 * 24 * NS_H + 10 * NS_H);
  submitted = done = 0;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  hg_command_t c = {0};
  c.type = HG_COMMAND_LIST_INSTRUMENT;
  snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "B200.A.2027-03");
  cmdgen_book_params(&c.u.list.params, 1, 1024, 16);
  submit(p, &c);
  return p;
}

static void market_close(hg_pipeline_t *p, uint64_t commands) {
  assert_int_equal(submitted, commands);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
}

static void add_account(hg_pipeline_t *p, uint32_t acct, uint32_t firm) {
  hg_command_t c = {0};
  c.type = HG_COMMAND_ADD_ACCOUNT;
  c.u.add_account.account = acct;
  c.u.add_account.firm = firm;
  submit(p, &c);
}

/* A deposit to acct, or to the insurance fund with acct 0. */
static void deposit(hg_pipeline_t *p, uint32_t acct, int64_t amount) {
  hg_command_t c = {0};
  if (acct == 0) {
    c.type = HG_COMMAND_FUND_DEPOSIT;
    c.u.fund.amount = amount;
  } else {
    c.type = HG_COMMAND_DEPOSIT;
    c.u.cash.account = acct;
    c.u.cash.amount = amount;
  }
  submit(p, &c);
}

static void build(const char *d) {
  hg_pipeline_t *p = market_open(d);
  for (uint32_t a = 1; a <= 3; a++) add_account(p, a, a == 1 ? 1 : 2);
  for (uint32_t a = 1; a <= 3; a++) deposit(p, a, a == 1 ? 1000000000 : 1000000000000);
  deposit(p, 0, 100000000);
  order(p, 1, HG_SIDE_BUY, 3000, 2);
  order(p, 2, HG_SIDE_SELL, 3000, 2);
  order(p, 3, HG_SIDE_BUY, 2600, 5);
  order(p, 3, HG_SIDE_SELL, 2610, 5);
  hg_command_t c = {0};
  c.type = HG_COMMAND_MARK;
  submit(p, &c);
  submit(p, &c);
  market_close(p, 14);
}

/* The journal for the mark what-if (test project_marks_standing): no MARK,
 * so nothing is called in the journal itself. */
static void build_marks(const char *d) {
  hg_pipeline_t *p = market_open(d);
  static const uint32_t firm[] = {0, 1, 2, 1};
  static const int64_t cash[] = {0, 1000000000, 2000000000, 1800000000};
  for (uint32_t a = 1; a <= 3; a++) {
    add_account(p, a, firm[a]);
    deposit(p, a, cash[a]);
  }
  deposit(p, 0, 100000000);
  order(p, 1, HG_SIDE_BUY, 3000, 2);
  order(p, 2, HG_SIDE_SELL, 3000, 2);
  order(p, 3, HG_SIDE_BUY, 3000, 2);
  order(p, 2, HG_SIDE_SELL, 3000, 2);
  market_close(p, 12);
}

static int setup(void **state) {
  (void)state;
  assert_non_null(util_tmpdir(dir, "guarantee"));
  build(dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  util_rm_rf(dir);
  return 0;
}


/* Every call, liquidation and fund movement, in journal order, and the
 * fills export's liquidated column. */
static void replay_prints_the_guarantee(void **state) {
  (void)state;
  char args[512], fills[128], *o;
  snprintf(fills, sizeof fills, "%s.fills.csv", dir);
  snprintf(args, sizeof args, "replay --data %s " CAPS " --fills %s", dir, fills);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "cash seq=8 kind=FUND_DEPOSIT account=fund amount=100.00 balance=100.00\n");
  cli_expect(o, "call seq=13 account=1 firm=1 standing=liquidating (below maintenance) "
                "call=571.50 equity=210.00 initial_margin=781.50 "
                "maintenance_margin=586.125000 due_cycle=1\n");
  cli_expect(o, "liquidation seq=13 trade_id=13.1 account=1 instrument=1 side=sell qty=2 "
                "price=2.600 counterparty=3\n");
  cli_expect(o, "cash seq=13 kind=LIQ_FEE account=1 instrument=1 amount=-26.00 balance=974.00\n");
  cli_expect(o, "cash seq=13 kind=LIQ_FEE account=fund instrument=1 amount=26.00 "
                "balance=126.00\n");
  cli_expect(o, "mark seq=13 evaluated=2 called=0 liquidating=0 liquidation_orders=1 "
                "liquidation_fills=1 fund=126.00\n");
  cli_expect(o, "call seq=14 account=1 standing=good (cleared)\n");
  cli_expect(o, "guarantee call_changes=1 liquidation_fills=1 called=0 liquidating=0 "
                "fund=126.00 fund_deposits=100.00 liquidation_fees=26.00 fund_used=0.00 "
                "socialized=0.00 uncovered=0.00 bankruptcies=0\n");
  cli_expect(o, "verdict: OK\n");
  /* The round's counts are after its fills (acct 1 holds nothing: good);
   * the second mark sends nothing. */
  assert_null(strstr(o, "mark seq=14"));
  free(o);
  o = cli_slurp(fills);
  assert_string_equal(o, "seq,trade_id,time_utc,instrument,symbol,price_usd,qty,aggressor,buyer,"
                         "seller,buyer_position,seller_position,liquidated\n"
                         "10,10.1,2027-02-01T10:00:00.000000009Z,1,B200.A.2027-03,3.000,2,sell,"
                         "1,2,2,-2,\n"
                         "13,13.1,2027-02-01T10:00:00.000000012Z,1,B200.A.2027-03,2.600,2,sell,"
                         "3,1,2,0,1\n");
  free(o);
  remove(fills);
}

/* --project: B200.A.2027-03's whole month fixes at 1,000 USD (FSP
 * 1,000,000 ticks). Acct 2 (short 2 sold at 3000, no cycle yet) would pay
 * (2 x 3000 - 2 x 1,000,000) x 1 USD = -1,994,000 USD against 1,000,000 of
 * cash: bankrupt by 994,000; the fund's 126 covers part, the winners share
 * 993,874. The mark round: 1,000,000 ticks lies outside the band around
 * the reference 3000, so the mark rule takes the last trade (the
 * liquidation fill at 2600, inside the band), and the line says so. */
static void project_lists_bankruptcies(void **state) {
  (void)state;
  char args[512], *o;
  snprintf(args, sizeof args, "replay --data %s " CAPS " --project 1000 --index B200.A", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "what-if the guarantee at final settlement, cash now plus the P&L above (USD):\n"
                "  bankrupt account=2 firm=2 cash=1000000.00 pnl=-1994000.00 "
                "shortfall=994000.00\n"
                "  bankrupt=1 shortfall=994000.00 fund=126.00 fund_used=126.00 "
                "socialized=993874.00\n");
  cli_expect(o, "  mark B200.A.2027-03 instrument=1 projected=1000.000 mark=2.600 (the "
                "projection lies outside the band around the reference: the mark rule takes "
                "the last trade or the reference, within the band)\n");
  free(o);
}

/* --project runs the clearing's own mark round at the projection, on a copy
 * (settlement/CONTRACT.md 4.6, 4.7). The journal (build_marks): accounts 1
 * (firm 1, 1,000 USD), 2 (firm 2, 2,000 USD), 3 (firm 1, 1,800 USD), fund
 * 100 USD; acct 1 and acct 3 each buy 2 @ 3000 from acct 2 (IM at the
 * reference 3000: 2 x 450 = 900 <= 1,000 and <= 1,800; acct 2 short 4:
 * 1,800 <= 2,000). No MARK in the journal.
 * --project 2.4: every day of 2027-03 fixes at 2.4 USD, FSP 2400 ticks,
 * inside the band [ceil(3000 x 0.8), floor(3000 x 1.2)] = [2400, 3600], so
 * the quoted mid 2400 is the mark. At M = 2400 (TV 1 USD a tick, IM 1500
 * bps, MM 7500 bps of IM):
 *   IM per contract = ceil(2400 x 1,000,000 x 1500 / 10000) = 360 USD.
 *   acct 1: E = 1,000 + 2 x (2400 - 3000) = -200; IM_M = 720;
 *           MM = ceil(720 x 0.75) = 540: E < MM, liquidating; call =
 *           IM_M - E = 920; closed at the mark it owes 200 (shortfall).
 *   acct 2: E = 2,000 + 4 x 600 = 4,400; IM_M = 1,440, MM 1,080: good.
 *   acct 3: E = 1,800 - 1,200 = 600; IM_M = 720, MM = 540: 540 <= 600 <
 *           720, called for 720 - 600 = 120.
 *   Fund 100 pays 100 of the 200; the winners share 100.
 * The final settlement lines agree: acct 1's cash 1,000 + P&L -1,200 =
 * -200. */
static void project_marks_standing(void **state) {
  (void)state;
  char d[64], args[512], *o;
  assert_non_null(util_tmpdir(d, "guarantee-marks"));
  build_marks(d);
  snprintf(args, sizeof args, "replay --data %s " CAPS " --project 2.4 --index B200.A", d);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "  bankrupt account=1 firm=1 cash=1000.00 pnl=-1200.00 shortfall=200.00\n"
                "  bankrupt=1 shortfall=200.00 fund=100.00 fund_used=100.00 "
                "socialized=100.00\n");
  cli_expect(o, "what-if standing at the projected marks, the clearing's mark round on a copy "
                "(USD):\n"
                "  mark B200.A.2027-03 instrument=1 projected=2.400 mark=2.400\n"
                "  account=1 firm=1 standing=liquidating equity=-200.00 "
                "initial_margin=720.00 maintenance_margin=540.00 call=920.00 "
                "shortfall=200.00\n"
                "  account=2 firm=2 standing=good equity=4400.00 initial_margin=1440.00 "
                "maintenance_margin=1080.00 call=0.00 shortfall=0.00\n"
                "  account=3 firm=1 standing=called equity=600.00 initial_margin=720.00 "
                "maintenance_margin=540.00 call=120.00 shortfall=0.00\n"
                "  called=1 liquidating=1 shortfall=200.00 fund=100.00 fund_used=100.00 "
                "socialized=100.00\n");
  cli_expect(o, "verdict: OK (what-if replay)\n");
  free(o);
  /* For scripts: the same figures as rows of the projection's one table. */
  snprintf(args, sizeof args,
           "replay --data %s " CAPS " --project 2.4 --index B200.A --format csv", d);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  cli_expect(o, "row,firm,account,instrument,symbol,position,last_dsp_usd,fsp_usd,pnl_usd,"
                "mark_usd,standing,equity_usd,initial_margin_usd,maintenance_margin_usd,"
                "call_usd,shortfall_usd,fund_usd,fund_used_usd,socialized_usd\n");
  cli_expect(o, "mark,,,1,B200.A.2027-03,,,2.400,,2.400,,,,,,,,,\n"
                "standing,1,1,,,,,,,,liquidating,-200.00,720.00,540.00,920.00,200.00,,,\n"
                "standing,2,2,,,,,,,,good,4400.00,1440.00,1080.00,0.00,0.00,,,\n"
                "standing,1,3,,,,,,,,called,600.00,720.00,540.00,120.00,0.00,,,\n"
                "guarantee,,,,,,,,,,,,,,,200.00,100.00,100.00,100.00\n");
  assert_null(strstr(o, "what-if standing"));
  free(o);
  /* Nothing was applied: the journal's own replay has no call. */
  snprintf(args, sizeof args, "replay --data %s " CAPS, d);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  assert_null(strstr(o, "call seq="));
  cli_expect(o, "verdict: OK\n");
  free(o);
  util_rm_rf(d);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_replay_guarantee HGCTL\n");
    return 2;
  }
  hgctl = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(replay_prints_the_guarantee),
      cmocka_unit_test(project_lists_bankruptcies),
      cmocka_unit_test(project_marks_standing),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
