/*
 * test_hgctl_settle.c - hgctl's settlement and statement commands as a user
 * runs them: the real binary (path in argv[1]) against a gateway in this
 * process whose sequencer clock the test sets. The operator runs two daily
 * cycles (`op settle`), expires the contract (`op expire`), withdraws,
 * ends the session, lists a curve and delists one of it; then `statement
 * --remote` must print exactly what `statement --data` prints from the
 * data directory (CSV and JSON, all entries and one instrument's, and an
 * account whose ledger spans several pages), and an account out of a
 * session's reach must get exactly the answer an unknown account gets.
 * After a restart on the same data directory the statements are the same
 * (the gateway seeds its ledger copy from the recovered state).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "client_util.h"
#include "hgctl_run.h"

#define OP 1u
#define OPC 2u /* the operator key hgctl uses (one session per key) */
#define TA 10u
#define TB 11u
#define RV1 20u /* risk viewer of firm 1 */
#define ACC_A 100u
#define ACC_B 200u
#define TV 1000000 /* tick value per contract, micro-USD */
#define B_DEPOSITS 300 /* more than one Statement page */

typedef Hourglass__V1__Envelope env_t;
#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x

static _Atomic uint64_t g_now; /* the sequencer's clock, ns */

#define RUN(o, key, ...)                          \
  do {                                            \
    const char *const a_[] = {__VA_ARGS__, NULL}; \
    hgctl_run_as((o), (key), NULL, a_);                       \
  } while (0)

static hg_client_t *login(ts_server_t *s, uint64_t key) {
  hg_client_t *c = NULL;
  assert_int_equal(ch_client(s, key, &c), 0);
  assert_int_equal(hg_client_connect(c), 0);
  return c;
}

static int ok_result(hg_client_t *c, uint64_t seq) {
  for (;;) {
    const env_t *e = NULL;
    if (hg_client_recv(c, 5000, &e) <= 0) return -1;
    if (e->body_case == BODY(SETTLEMENT_RESULT) && e->settlement_result->ref_seq == seq)
      return (int)e->settlement_result->reason;
    if (e->body_case == BODY(RESPONSE) && e->response->ref_seq == seq) return -1;
  }
}

static size_t count_lines(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* `statement --remote` as key equals `statement --data` for account. */
static void same_statement(ts_server_t *s, uint64_t key, const char *account, const char *inst,
                           const char *fmt, size_t want_lines) {
  static hgctl_out_t remote, local;
  const char *ra[12] = {"statement", "--remote", "--format", fmt}, *la[12] = {
      "statement", "--data", s->dir, "--format", fmt, "--account", account};
  int nr = 4, nl = 7;
  if (key == RV1 || strcmp(fmt, "json") == 0) { /* the own account named: allowed */
    ra[nr++] = "--account";
    ra[nr++] = account;
  }
  if (inst != NULL) {
    ra[nr++] = "--instrument";
    ra[nr++] = inst;
    la[nl++] = "--instrument";
    la[nl++] = inst;
  }
  ra[nr] = la[nl] = NULL;
  hgctl_run_as(&remote, key, NULL, ra);
  if (remote.status != 0) fprintf(stderr, "%s", remote.err);
  assert_int_equal(remote.status, 0);
  hgctl_run_as(&local, 0, NULL, la);
  if (local.status != 0) fprintf(stderr, "%s", local.err);
  assert_int_equal(local.status, 0);
  assert_string_equal(remote.text, local.text);
  if (want_lines) assert_int_equal(count_lines(remote.text), want_lines);
}

/* The positions text as a restarted gateway prints it: the average price
 * of the open position in B200.A.2027-03 (0.500) unknown. */
static void unknown_average(char *text) {
  char *p = strstr(text, "        0.500 ");
  assert_non_null(p);
  memcpy(p, "            - ", 14);
}

static void test_settle_expire_statements(void **state) {
  (void)state;
  const int32_t d1 = ch_day("2027-02-01"), d10 = ch_day("2027-02-10"),
                d28 = ch_day("2027-02-28");
  ch_clock_set(&g_now, d10, 12 * 3600);
  ts_server_t s;
  ts_server_options_t o = {
      .clock = ch_clock_read, .clock_ctx = &g_now, .durable = 1, .max_instruments = 16};
  assert_int_equal(ts_server_create(&s, &o), 0);
  assert_int_equal(ts_server_add_key(&s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(&s, OPC, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(&s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(&s, TB, HG_ROLE_TRADER, ACC_B, 2), 0);
  assert_int_equal(ts_server_add_key(&s, RV1, HG_ROLE_RISK_VIEWER, 0, 1), 0);
  assert_int_equal(ts_server_run(&s), 0);
  snprintf(hgctl_port, sizeof hgctl_port, "%u", (unsigned)s.port);
  hg_client_t *op = login(&s, OP);
  uint64_t seq = 0, first = 0;
  assert_int_equal(ch_list_contract(op), 0);
  assert_int_equal(hg_client_add_account(op, ACC_A, 1, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_add_account(op, ACC_B, 2, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_cash(op, ACC_A, 1000000000, false, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  /* B: 1e9, then B_DEPOSITS deposits of 1 micro-USD (several pages). */
  assert_int_equal(hg_client_cash(op, ACC_B, 1000000000, false, &first), 0);
  for (int i = 0; i < B_DEPOSITS; i++)
    assert_int_equal(hg_client_cash(op, ACC_B, 1, false, &seq), 0);
  assert_int_equal(ch_responses(op, first, seq), 0);

  /* A buys 2 from B at 510; then a resting bid 505 (A) and ask 509 (B). */
  hg_client_t *ta = login(&s, TA), *tb = login(&s, TB);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_SELL, 510, 2, 1), 0);
  assert_int_equal(ch_order(ta, HOURGLASS__V1__SIDE__SIDE_BUY, 510, 2, 1), 0);
  assert_int_equal(ch_order(ta, HOURGLASS__V1__SIDE__SIDE_BUY, 505, 1, 2), 0);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_SELL, 509, 1, 2), 0);
  hg_client_logout(ta, 1000);
  hg_client_destroy(ta);
  hg_client_logout(tb, 1000);
  hg_client_destroy(tb);
  /* Every day of February: an external 0.500000, FINAL. */
  for (int32_t d = d1; d <= d28; d++) {
    assert_int_equal(hg_client_publish_fixing(op, "B200", "A", d, 500000, "ext", &seq), 0);
    assert_int_equal(ok_result(op, seq), 0);
    assert_int_equal(hg_client_finalize_fixing(op, "B200", "A", d, &seq), 0);
    assert_int_equal(ok_result(op, seq), 0);
  }

  static hgctl_out_t r;
  /* Amounts in USD: 1 USD = 1,000,000 micro-USD; the new balance in USD. */
  RUN(&r, OPC, "op", "withdraw", "--account", "100", "--amount", "1");
  if (r.status != 0) fprintf(stderr, "%s%s", r.text, r.err);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "OK withdraw engine_seq="));
  assert_non_null(strstr(r.text, " balance=999.00\n"));
  RUN(&r, OPC, "op", "withdraw", "--account", "100", "--amount", "0.0000001");
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "--amount '0.0000001' has more decimals than micro-USD (6)"));
  /* More than the cash: refused, exit 1. */
  RUN(&r, OPC, "op", "withdraw", "--account", "100", "--amount", "999000");
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.err, "refused: insufficient_funds"));

  /* A fixing's command, status, kind and outcome by name (finalizing a FINAL
   * day again changes nothing); --raw prints the wire's numbers. */
  RUN(&r, OPC, "op", "fixing", "finalize", "--gpu", "B200", "--grade", "A", "--day", "2027-02-09");
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "RESULT command=finalize_fixing reason=none(0)"));
  assert_non_null(strstr(r.text, " day=2027-02-09 fixing=0.500000 tier=0 status=final "
                                 "kind=external outcome=finalized inputs=0\n"));
  RUN(&r, OPC, "op", "fixing", "finalize", "--gpu", "B200", "--grade", "A", "--day", "2027-02-09",
      "--raw");
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "RESULT command=20 reason=none(0)"));
  assert_non_null(strstr(r.text, " fixing=500000 tier=0 status=2 kind=3 outcome=4 inputs=0\n"));

  /* Cycle of the 10th: DSP tier 2 = (505 + 509) / 2 = 507; A bought 2 at
   * 510: VM 2 x (507 - 510) x TV = -6,000,000, B +6,000,000. */
  ch_clock_set(&g_now, d10, 16 * 3600 + 1);
  RUN(&r, OPC, "op", "settle", "--day", "2027-02-10");
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "RESULT command=daily_settlement reason=none(0)"));
  assert_non_null(strstr(r.text, "vm_sum=0.00 vm_paid=-6.00 vm_received=6.00 vm_entries=2"));
  assert_non_null(strstr(r.text, "DSP instrument=1 dsp=0.507 tier=2"));
  RUN(&r, OPC, "op", "settle", "--day", "2027-02-10"); /* once per day */
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.err, "refused: already_settled"));
  assert_non_null(strstr(r.err, "2027-02-10 is already settled"));
  /* As a terminal shows it: the reason before the record. */
  hgctl_merge_stderr = true;
  RUN(&r, OPC, "op", "settle", "--day", "2027-02-10");
  hgctl_merge_stderr = false;
  const char *why = strstr(r.text, "refused: already_settled");
  const char *rec = strstr(r.text, "RESULT command=daily_settlement reason=already_settled(80)");
  assert_non_null(why);
  assert_non_null(rec);
  assert_true(why < rec);

  /* Last trading day's cycle (no VM: unchanged DSP), then expiry at FSP
   * 500000 / 1000 = 500: A 2 x (500 - 507) x TV = -14,000,000. */
  ch_clock_set(&g_now, d28, 16 * 3600 + 1);
  RUN(&r, OPC, "op", "settle", "--day", "2027-02-28");
  assert_int_equal(r.status, 0);
  /* The session date takes the YYYY-MM-DD form of every other operator
   * command; an impossible day or both forms at once are usage errors. */
  RUN(&r, OPC, "op", "end-of-session", "--day", "2027-02-30");
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "--day must be YYYY-MM-DD"));
  RUN(&r, OPC, "op", "end-of-session", "--day", "2027-02-28", "--date", "20270228");
  assert_int_equal(r.status, 2);
  RUN(&r, OPC, "op", "end-of-session", "--day", "2027-02-28");
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "OK end-of-session engine_seq="));
  RUN(&r, OPC, "op", "expire", "B200.A.2027-02");
  if (r.status != 0) fprintf(stderr, "%s%s", r.text, r.err);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "instrument=1 fsp=0.500 positions_closed=2 final_sum=0.00"));

  /* Statements: A has DEPOSIT, WITHDRAWAL, VM -6e6, VM 0, FINAL -14e6. */
  same_statement(&s, TA, "100", NULL, "csv", 6);
  same_statement(&s, TA, "100", NULL, "json", 1);
  same_statement(&s, TA, "100", "1", "csv", 4);
  same_statement(&s, RV1, "100", NULL, "csv", 6);
  RUN(&r, TA, "statement", "--remote");
  assert_non_null(strstr(r.text, ",WITHDRAWAL,-1000000,999000000,0,0\n"));
  assert_non_null(strstr(r.text, ",1,VM,-6000000,993000000,507,2\n"));
  assert_non_null(strstr(r.text, ",1,FINAL,-14000000,979000000,500,2\n"));
  /* --usd: the same entries in USD, USD per GPU-hour, UTC and symbols,
   * alike from the data directory and from the gateway, which knows the
   * symbols of listed contracts only (B200.A.2027-02 expired above). */
  static hgctl_out_t ru, lu;
  const char *lu_args[] = {"statement", "--data", s.dir, "--account", "100", "--usd", NULL};
  hgctl_run_as(&lu, 0, NULL, lu_args);
  assert_int_equal(lu.status, 0);
  assert_true(strncmp(lu.text, "index,seq,time_utc,account,instrument,symbol,kind,amount_usd,"
                               "balance_usd,price_usd,qty\n", 86) == 0);
  assert_non_null(strstr(lu.text, ",100,,,WITHDRAWAL,-1.00,999.00,,\n"));
  assert_non_null(strstr(lu.text, "T16:00:00.000000000Z,100,1,B200.A.2027-02,VM,-6.00,993.00,"
                                  "0.507,2\n"));
  assert_non_null(strstr(lu.text, ",100,1,B200.A.2027-02,FINAL,-14.00,979.00,0.500,2\n"));
  RUN(&ru, TA, "statement", "--remote", "--usd");
  assert_int_equal(ru.status, 0);
  for (char *p = strstr(lu.text, "B200.A.2027-02"); p != NULL; p = strstr(p, "B200.A.2027-02"))
    memmove(p, p + 14, strlen(p + 14) + 1);
  assert_string_equal(ru.text, lu.text);
  /* B: 1 + B_DEPOSITS + 3 entries, over two pages. */
  same_statement(&s, TB, "200", NULL, "csv", 1 + 1 + B_DEPOSITS + 3);
  same_statement(&s, TB, "200", NULL, "json", 1);

  /* Out of reach = unknown: the other firm's account, another trader's. */
  static hgctl_out_t unknown, other;
  RUN(&unknown, RV1, "statement", "--remote", "--account", "999");
  assert_int_equal(unknown.status, 1);
  assert_non_null(strstr(unknown.err, "refused: unknown_account (66)"));
  RUN(&other, RV1, "statement", "--remote", "--account", "200");
  assert_int_equal(other.status, 1);
  assert_string_equal(other.err, unknown.err);
  assert_string_equal(other.text, "");
  /* A risk viewer without --account is told which accounts it may name:
   * its firm's (100), never another firm's (200). */
  RUN(&other, RV1, "statement", "--remote");
  assert_int_equal(other.status, 2);
  assert_string_equal(other.err,
                      "hgctl statement: a risk viewer names the account: --account N, one of "
                      "firm 1's: 100\n");
  RUN(&other, TA, "statement", "--remote", "--account", "200");
  assert_int_equal(other.status, 1);
  assert_string_equal(other.err, unknown.err);
  RUN(&r, OPC, "statement", "--remote", "--account", "100");
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.err, "not_permitted"));

  /* A curve of twelve contracts from March, then one delisted. */
  RUN(&r, OPC, "op", "list-curve", "--gpu", "B200", "--grade", "A", "--from", "2027-03",
      "--first-id", "20", "--max-orders", "64", "--max-accounts", "8");
  if (r.status != 0) fprintf(stderr, "%s%s", r.text, r.err);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "LISTED instrument=20\n"));
  assert_non_null(strstr(r.text, "LISTED instrument=31\n"));
  RUN(&r, OPC, "op", "delist", "31");
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "OK delist engine_seq="));
  RUN(&r, OPC, "op", "delist", "31");
  assert_int_equal(r.status, 1);
  RUN(&r, OPC, "op", "list-curve", "--gpu", "B200", "--grade", "A", "--from", "2027-3x",
      "--first-id", "20");
  assert_int_equal(r.status, 2);

  hg_client_logout(op, 1000);
  hg_client_destroy(op);

  /* An open position on the curve, to be seen again after the restart. */
  RUN(&r, TA, "order", "new", "--instrument", "20", "--side", "sell", "--qty", "2", "--price",
      "0.500");
  if (r.status != 0) fprintf(stderr, "%s%s", r.text, r.err);
  assert_int_equal(r.status, 0);
  RUN(&r, TB, "order", "new", "--instrument", "20", "--side", "buy", "--qty", "2", "--price", "0.5",
      "--tif", "ioc");
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.text, "FILL "));
  static hgctl_out_t pos_a, pos_b;
  RUN(&pos_a, TA, "positions");
  RUN(&pos_b, TB, "positions");
  assert_int_equal(pos_b.status, 0);
  if (strstr(pos_b.text, "B200.A.2027-03              2        2        0        0.500 ") == NULL)
    fprintf(stderr, "%s", pos_b.text);
  assert_non_null(strstr(pos_b.text, "B200.A.2027-03              2        2        0        0.500 "));
  assert_non_null(strstr(pos_a.text, "B200.A.2027-03             -2        0        2        0.500 "));

  /* Restart on the same data directory: the gateway's copy of the ledger
   * is seeded from the recovered state (the same statements), and entries
   * appended after the restart continue its indexes. Positions are seeded
   * too (net, carried as bought or sold, and the P&L), so they answer as
   * before, but for the average price of a position whose fills the
   * restarted gateway has not seen. */
  static hgctl_out_t before, after;
  RUN(&before, TB, "statement", "--remote", "--format", "json");
  assert_int_equal(before.status, 0);
  char dir[256];
  snprintf(dir, sizeof dir, "%s", s.dir);
  ts_server_halt(&s);
  o.data_dir = dir;
  assert_int_equal(ts_server_create(&s, &o), 0);
  assert_int_equal(ts_server_run(&s), 0); /* the keys are in the reopened key store */
  snprintf(hgctl_port, sizeof hgctl_port, "%u", (unsigned)s.port);
  RUN(&after, TB, "statement", "--remote", "--format", "json");
  assert_int_equal(after.status, 0);
  assert_string_equal(after.text, before.text);
  unknown_average(pos_b.text);
  unknown_average(pos_a.text);
  RUN(&after, TB, "positions");
  assert_string_equal(after.text, pos_b.text);
  RUN(&after, TA, "positions");
  assert_string_equal(after.text, pos_a.text);
  RUN(&r, OPC, "op", "deposit", "--account", "200", "--amount", "0.000007"); /* 7 micro-USD */
  assert_int_equal(r.status, 0);
  /* As the runbook says: the amount and the new balance, in USD. */
  assert_non_null(strstr(r.text, "OK deposit engine_seq="));
  assert_non_null(strstr(r.text, " amount=0.000007 balance="));
  same_statement(&s, TB, "200", NULL, "csv", 1 + 1 + B_DEPOSITS + 3 + 1);
  same_statement(&s, TA, "100", NULL, "csv", 6);
  ts_server_stop(&s);
}

/* A pre-trade risk reject reaches the client with the check's numbers,
 * and hgctl names the reason and prints them. Default clearing: band 20%
 * around the listing's reference price 500. */
static void test_risk_reject_numbers(void **state) {
  (void)state;
  ch_clock_set(&g_now, ch_day("2027-02-10"), 12 * 3600);
  hg_clearing_config_t clr;
  hg_clearing_config_default(&clr);
  ts_server_t s;
  ts_server_options_t o = {.clock = ch_clock_read, .clock_ctx = &g_now, .clearing = &clr};
  assert_int_equal(ts_server_create(&s, &o), 0);
  assert_int_equal(ts_server_add_key(&s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(&s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_run(&s), 0);
  snprintf(hgctl_port, sizeof hgctl_port, "%u", (unsigned)s.port);
  hg_client_t *op = login(&s, OP);
  uint64_t seq = 0;
  assert_int_equal(ch_list_contract(op), 0);
  assert_int_equal(hg_client_add_account(op, ACC_A, 1, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_cash(op, ACC_A, 50000000, false, &seq), 0); /* 50 USD */
  assert_int_equal(ch_response(op, seq), 0);
  static hgctl_out_t r;
  /* Band: 500 +- 500 * 2000 / 10000 = [400, 600] ticks; 0.601 USD is outside. */
  RUN(&r, TA, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "1", "--price",
      "0.601");
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.text, "reason=risk_price_band(39)"));
  assert_non_null(strstr(r.text, "ref_price=0.500 position=0 low=0.400 high=0.600"));
  RUN(&r, TA, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "1", "--price",
      "601", "--raw");
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.text, "ref_price=500 position=0 low=400 high=600"));
  /* Margin: the listed contract is February 2027 and today is 2027-02-10,
   * its delivery month, so the delivery rate applies: 1 contract x 500 ticks
   * x 1,000,000 micro-USD x 20% = 100,000,000 against equity 50,000,000. */
  RUN(&r, TA, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "1", "--price",
      "0.500");
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.text, "reason=risk_insufficient_margin(41) equity=50.00 "
                                 "initial_margin=100.00 ref_price=0.500 position=1"));
  RUN(&r, TA, "order", "new", "--instrument", "1", "--side", "buy", "--qty", "1", "--price",
      "500", "--raw");
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.text, "reason=risk_insufficient_margin(41) equity=50000000 "
                                 "initial_margin=100000000 ref_price=500 position=1"));
  hg_client_logout(op, 1000);
  hg_client_destroy(op);
  ts_server_stop(&s);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH_TO_HGCTL\n", argv[0]);
    return 2;
  }
  hgctl_path = argv[1];
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_settle_expire_statements),
      cmocka_unit_test(test_risk_reject_numbers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
