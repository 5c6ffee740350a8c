/*
 * test_squeeze_scenario - `hourglassd --scenario squeeze` end to end, as a
 * user runs it: the binary, its stdout, its exit status and the files it
 * writes (statements/<account>.csv, statements/fund.csv, fills.csv). The
 * group setup runs the scenario twice on two fresh data directories.
 *
 * The figures are checked two ways. First by hand, from
 * settlement/CONTRACT.md (TV = 1,000,000 micro-USD per tick; IM 15%, MM 75%
 * of IM, liquidation fee 50 bps capped at the equity left, band 20%), the
 * scenario's script (daemon/squeeze.c) and the fills export:
 *
 * Day 0 (2027-06-07): the producer (101, cash 14,000 USD) sells 20 to
 * hedger-1 and the maker (102, cash 3,000 USD = 10 x 2,000 x 150,000 micro,
 * exactly its IM) sells 10 to hedger-2 at 2,000; the DSP is the provider's
 * mid 2,000; every VM is 0. The fund gets 1,000 USD.
 *
 * Day 1 (2027-06-08), mark 2,390 (mid of 2,385 / 2,395, band 1,600..2,400):
 *   producer: E = 14,000 - 20 x 390 = 6,200 USD; IM_M = 20 x 2,390 x 0.15 =
 *     7,170; MM = 5,377.5; MM <= E < IM_M: CALLED for 970 (it deposits 970).
 *   maker: E = 3,000 - 10 x 390 = -900 < MM: LIQUIDATING; its slice buys 10
 *     at most min(floor(2,390 x 1.2), 2,400) = 2,400 and finds the thin offer:
 *     2 at 2,395. E after = -900 - 2 x 5 = -910 < 0: fee min(ceil(2 x 2,395 x
 *     0.005 USD), max(0, -910)) = 0. 13:00: 1 more at 2,395, fee 0.
 *   cycle, DSP 2,390: maker VM = -10 x 390 + 3 x (2,390 - 2,395) = -3,915 USD,
 *     cash -915: bankrupt; the fund pays min(1,000, 915) = 915, fund 85.
 * Day 2, mark 2,640: the producer (cash 14,970 - 7,800 = 7,170) has E =
 *   7,170 - 20 x 250 = 2,170 < MM = 5,940: LIQUIDATING; being registered
 *   first it takes the 2-lot offer at 2,645: fee ceil(2 x 2,645 x 0.005) =
 *   26.45 USD to the fund (85 + 26.45 = 111.45). The maker buys 1 at 2,645 at
 *   13:00. Cycle DSP 2,640: maker VM = -7 x 250 + 1 x (-5) = -1,755, cash
 *   -1,755; the fund pays its 111.45 (now empty); R = 1,643.55 is socialized
 *   over the winners: hedger-1 VM 20 x 250 = 5,000, hedger-2 2,500 (the
 *   provider lost), K = 7,500 > R: hedger-1 floor(1,643.55 x 5,000 / 7,500)
 *   = 1,095.70, hedger-2 547.85, no micro-USD left over.
 * Day 3: the producer buys 10 at 2,885 (fee 144.25 to the fund); the maker 1
 *   at 2,885; cycle 2,880: maker VM = -6 x 240 - 5 = -1,445; fund pays
 *   144.25, 1,300.75 socialized over VMs 4,800 and 2,400: floor(1,300,750,000
 *   x 2 / 3) = 867,166,666 and floor(1,300,750,000 / 3) = 433,583,333 micro,
 *   1 micro-USD left over, charged to hedger-1 (registered first):
 *   867,166,667 and 433,583,333.
 * Day 4: the maker buys its last 5 at 3,045 (flat); cycle 3,040: VM = -5 x
 *   160 - 5 x 5 = -825, the fund is empty: 825 socialized.
 * So: calls=2 (producer, maker), liquidated=2, bankrupt=1 (the maker, in four
 * cycles), fund 1,000 -> 0 (+ fees 170.70, - covers 1,170.70), socialized
 * 1,643.55 + 1,300.75 + 825 = 3,769.30 USD.
 *
 * Second, by a recomputation in code from the fills export and the printed
 * DSPs and marks alone: every VM entry of every statement (section 4.2),
 * every liquidation fee (4.6, the cap with the equity at the round's mark),
 * the fund's movements and the waterfall of each cycle (4.7), and
 * conservation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon_util.h"

static const char *g_bin;

#define TV INT64_C(1000000)
#define NACCT 5
#define NDAYS 8 /* listing day + 7 */
#define MAXF 64
#define MAXE 256
#define DAY0 20976 /* 2027-06-07 */
#define NS_DAY (INT64_C(86400) * 1000000000)
#define CYCLE_TS(d) ((int64_t)(DAY0 + (d)) * NS_DAY + INT64_C(16) * 3600 * 1000000000)

static const unsigned g_acct[NACCT] = {101, 102, 201, 202, 301}; /* registration order */

static const char g_line[] =
    "squeeze: accounts=5 calls=2 liquidated=2 bankrupt=1 fund_start=1000000000 fund_end=0 "
    "socialized=3769300000 conservation=OK\n";

static du_scenario_runs_t g_runs;
#define g_dir g_runs.dir
#define g_out g_runs.out
#define g_rc g_runs.rc

typedef struct fill {
  long long seq, ts, price, qty;
  unsigned buyer, seller, liq;
} fill_t;

typedef struct entry {
  long long index, seq, ts, amount, balance, price, qty;
  char kind[16];
} entry_t;

static int setup(void **state) {
  (void)state;
  return du_scenario_runs(&g_runs, g_bin, "squeeze");
}

static int teardown(void **state) {
  (void)state;
  du_scenario_runs_free(&g_runs);
  return 0;
}

static char *read_in(int run, const char *name) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", g_dir[run], name);
  char *s = du_read(path);
  assert_non_null(s);
  return s;
}

static size_t load_fills(fill_t *f) {
  char *csv = read_in(0, "fills.csv");
  const char *p = strchr(csv, '\n');
  assert_non_null(p);
  static const char head[] = "seq,ts,instrument,price,qty,buyer,seller,aggressor,liquidated\n";
  assert_int_equal(strncmp(csv, head, strlen(head)), 0);
  size_t n = 0;
  for (p++; *p; p = strchr(p, '\n') + 1) {
    assert_true(n < MAXF);
    char aggr[8];
    assert_int_equal(sscanf(p, "%lld,%lld,1,%lld,%lld,%u,%u,%7[A-Z],%u", &f[n].seq, &f[n].ts,
                            &f[n].price, &f[n].qty, &f[n].buyer, &f[n].seller, aggr, &f[n].liq),
                     8);
    /* a liquidation order is the aggressor, on the side that reduces */
    if (f[n].liq != 0)
      assert_int_equal(f[n].liq, strcmp(aggr, "BUY") == 0 ? f[n].buyer : f[n].seller);
    n++;
  }
  free(csv);
  return n;
}

static size_t load_statement(const char *name, entry_t *e) {
  char file[64];
  snprintf(file, sizeof file, "statements/%s.csv", name);
  char *csv = read_in(0, file);
  const char *p = strchr(csv, '\n');
  assert_non_null(p);
  size_t n = 0;
  for (p++; *p; p = strchr(p, '\n') + 1) {
    assert_true(n < MAXE);
    /* index,seq,ts,account,instrument,kind,amount,balance,price,qty; the
     * instrument is empty for cash entries */
    const char *q = p;
    long long v[3];
    for (int k = 0; k < 3; k++) {
      v[k] = atoll(q);
      q = strchr(q, ',') + 1;
    }
    q = strchr(q, ',') + 1; /* account */
    q = strchr(q, ',') + 1; /* instrument */
    e[n].index = v[0];
    e[n].seq = v[1];
    e[n].ts = v[2];
    assert_int_equal(sscanf(q, "%15[A-Z_],%lld,%lld,%lld,%lld", e[n].kind, &e[n].amount,
                            &e[n].balance, &e[n].price, &e[n].qty),
                     5);
    n++;
  }
  free(csv);
  return n;
}

/* The DSPs the scenario printed, day 0..7. */
static void load_dsps(long long dsp[NDAYS]) {
  const char *p = strstr(g_out[0], "\nDSPs (ticks):");
  assert_non_null(p);
  p += strlen("\nDSPs (ticks):");
  for (int d = 0; d < NDAYS; d++) dsp[d] = strtoll(p, (char **)&p, 10);
  /* +60% in a week: 2,000 -> 3,200 */
  assert_int_equal(dsp[0], 2000);
  assert_int_equal(dsp[5], 3200);
}

/* The mark printed for the round at ts (a MARK command's own time). */
static long long mark_at(long long ts) {
  long long sec = ts / 1000000000;
  assert_int_equal(ts % 1000000000, 0);
  long long d = sec / 86400 - DAY0;
  char key[64];
  snprintf(key, sizeof key, "2027-06-%02lld %02lld:%02lld MARK ", 7 + d, sec % 86400 / 3600,
           sec % 3600 / 60);
  const char *p = strstr(g_out[0], key);
  assert_non_null(p);
  return atoll(p + strlen(key));
}

static long long signed_qty(const fill_t *f, unsigned a) {
  return (f->buyer == a ? f->qty : 0) - (f->seller == a ? f->qty : 0);
}

static void exits_zero_and_prints_the_line(void **state) {
  (void)state;
  assert_int_equal(g_rc[0], 0);
  size_t n = strlen(g_out[0]), m = strlen(g_line);
  assert_true(n > m);
  assert_string_equal(g_out[0] + n - m, g_line); /* the last line */
  assert_non_null(strstr(g_out[0], "producer CALLED: equity 6200.000000, margin 7170.000000, "
                                   "call 970.000000"));
  assert_non_null(strstr(g_out[0], "bankrupt: maker, the fund pays 915.000000"));
}

static void second_run_is_byte_identical(void **state) {
  (void)state;
  assert_int_equal(g_rc[1], 0);
  assert_string_equal(g_out[0], g_out[1]);
  static const char *const files[] = {"fills.csv", "statements/101.csv", "statements/102.json",
                                      "statements/fund.csv", "statements/301.json"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *a = read_in(0, files[i]), *b = read_in(1, files[i]);
    assert_string_equal(a, b);
    free(a);
    free(b);
  }
}

/* CONTRACT.md 4.2: each cycle's VM of each account from the fills export and
 * the DSPs; every VM entry of the statements is one of these. */
static void vm_follows_fills_and_dsps(void **state) {
  (void)state;
  fill_t f[MAXF];
  entry_t e[MAXE];
  long long dsp[NDAYS];
  size_t nf = load_fills(f);
  load_dsps(dsp);
  for (int i = 0; i < NACCT; i++) {
    char name[16];
    snprintf(name, sizeof name, "%u", g_acct[i]);
    size_t ne = load_statement(name, e);
    int vms = 0;
    for (int d = 0; d < NDAYS; d++) {
      long long pos_prev = 0, vm = 0;
      int touched = 0;
      for (size_t k = 0; k < nf; k++) {
        long long q = signed_qty(&f[k], g_acct[i]);
        if (q == 0) continue;
        if (f[k].ts < (d ? CYCLE_TS(d - 1) : 0)) pos_prev += q;
        else if (f[k].ts < CYCLE_TS(d)) vm += q * (dsp[d] - f[k].price) * TV, touched = 1;
      }
      if (d > 0) vm += pos_prev * (dsp[d] - dsp[d - 1]) * TV;
      if (pos_prev == 0 && !touched) continue; /* no VM entry that day */
      int found = 0;
      for (size_t k = 0; k < ne; k++)
        if (strcmp(e[k].kind, "VM") == 0 && e[k].ts == CYCLE_TS(d)) {
          assert_int_equal(e[k].amount, vm);
          assert_int_equal(e[k].price, dsp[d]);
          found = 1;
        }
      assert_true(found);
      vms++;
    }
    int listed = 0;
    for (size_t k = 0; k < ne; k++) listed += strcmp(e[k].kind, "VM") == 0;
    assert_int_equal(listed, vms);
  }
}

/* CONTRACT.md 4.6: each liquidation fill's fee is ceil(q p TV 50 / 10000),
 * capped at the liquidated account's equity at the round's mark after the
 * fill; the fund's statement receives exactly those fees. */
static void liquidation_fees_follow_the_fills(void **state) {
  (void)state;
  fill_t f[MAXF];
  entry_t e[MAXE], fund[MAXE];
  long long dsp[NDAYS];
  size_t nf = load_fills(f), nfund = load_statement("fund", fund);
  load_dsps(dsp);
  long long fees = 0;
  int nliq = 0;
  for (size_t k = 0; k < nf; k++) {
    if (f[k].liq == 0) continue;
    nliq++;
    unsigned a = f[k].liq;
    char name[16];
    snprintf(name, sizeof name, "%u", a);
    size_t ne = load_statement(name, e);
    long long uncapped = (f[k].qty * f[k].price * TV * 50 + 9999) / 10000;
    /* E after the fill at the mark M of its round: cash + TV (pos_prev (M -
     * DSP_prev) + sum of today's fills q (M - p)), today's fills up to this
     * one */
    int d = (int)(f[k].ts / NS_DAY - DAY0);
    long long m = mark_at(f[k].ts), pos_prev = 0, open = 0, cash = 0, fee = 0;
    for (size_t j = 0; j <= k; j++) {
      long long q = signed_qty(&f[j], a);
      if (f[j].ts < CYCLE_TS(d - 1)) pos_prev += q;
      else open += q * (m - f[j].price);
    }
    open += pos_prev * (m - dsp[d - 1]);
    for (size_t j = 0; j < ne; j++) {
      if (e[j].ts > f[k].ts) break;
      if (strcmp(e[j].kind, "LIQ_FEE") == 0 && e[j].seq == f[k].seq) {
        assert_int_equal(e[j].price, f[k].price);
        assert_int_equal(e[j].qty, f[k].qty);
        fee = -e[j].amount;
        cash = e[j].balance + fee;
      } else {
        cash = e[j].balance;
      }
    }
    long long eq = cash + open * TV;
    long long expect = uncapped < (eq > 0 ? eq : 0) ? uncapped : (eq > 0 ? eq : 0);
    assert_int_equal(fee, expect);
    if (fee > 0) {
      int seen = 0;
      for (size_t j = 0; j < nfund; j++)
        if (strcmp(fund[j].kind, "LIQ_FEE") == 0 && fund[j].seq == f[k].seq &&
            fund[j].qty == f[k].qty) {
          assert_int_equal(fund[j].amount, fee);
          seen = 1;
        }
      assert_true(seen);
    }
    fees += fee;
  }
  assert_int_equal(nliq, 7);
  long long in_fund = 0;
  for (size_t j = 0; j < nfund; j++)
    if (strcmp(fund[j].kind, "LIQ_FEE") == 0) in_fund += fund[j].amount;
  assert_int_equal(in_fund, fees);
  assert_int_equal(fees, 170700000); /* 26.45 + 144.25 USD */
}

/* CONTRACT.md 4.7 at every cycle: the bankrupt account's shortfall after VM,
 * min(F, s) from the fund, the rest charged to the winners pro rata with
 * weights min(VM, cash), leftover micro-USD one each in registration order;
 * the fund's own statement and conservation. */
static void waterfall_and_fund(void **state) {
  (void)state;
  entry_t e[NACCT][MAXE], fund[MAXE];
  size_t ne[NACCT], nfund = load_statement("fund", fund);
  for (int i = 0; i < NACCT; i++) {
    char name[16];
    snprintf(name, sizeof name, "%u", g_acct[i]);
    ne[i] = load_statement(name, e[i]);
  }
  assert_string_equal(fund[0].kind, "FUND_DEPOSIT");
  assert_int_equal(fund[0].amount, 1000000000);
  long long socialized = 0;
  for (int d = 0; d < NDAYS; d++) {
    long long ts = CYCLE_TS(d), vm[NACCT] = {0}, after[NACCT] = {0}, cover[NACCT] = {0},
              soc[NACCT] = {0}, fund_before = 0;
    for (size_t j = 0; j < nfund && fund[j].ts < ts; j++) fund_before = fund[j].balance;
    for (int i = 0; i < NACCT; i++)
      for (size_t j = 0; j < ne[i]; j++) {
        if (e[i][j].ts != ts) continue;
        if (strcmp(e[i][j].kind, "VM") == 0) vm[i] = e[i][j].amount, after[i] = e[i][j].balance;
        if (strcmp(e[i][j].kind, "FUND_COVER") == 0) cover[i] = e[i][j].amount;
        if (strcmp(e[i][j].kind, "SOCIALIZED") == 0) soc[i] = e[i][j].amount;
      }
    long long fund_left = fund_before, rest = 0, kk = 0, w[NACCT] = {0};
    for (int i = 0; i < NACCT; i++) {
      if (after[i] >= 0) continue;
      long long s = -after[i], paid = s < fund_left ? s : fund_left;
      assert_int_equal(cover[i], paid);
      fund_left -= paid;
      rest += s - paid;
      assert_int_equal(soc[i], s - paid); /* the winners cover the rest */
    }
    for (int i = 0; i < NACCT; i++)
      if (after[i] >= 0 && vm[i] > 0) w[i] = vm[i] < after[i] ? vm[i] : after[i], kk += w[i];
    long long charged = 0, expect[NACCT] = {0};
    for (int i = 0; i < NACCT && rest > 0; i++) {
      expect[i] = rest >= kk ? w[i] : (long long)((__int128)rest * w[i] / kk);
      charged += expect[i];
    }
    for (int i = 0; i < NACCT && rest > 0 && rest < kk && charged < rest; i++)
      if (w[i] > 0) expect[i]++, charged++;
    for (int i = 0; i < NACCT; i++)
      if (after[i] >= 0) assert_int_equal(soc[i], -expect[i]);
    socialized += rest;
  }
  assert_int_equal(socialized, 3769300000);
  /* The fund: deposit + fees - covers, ending at the printed fund_end = 0. */
  long long bal = 0;
  for (size_t j = 0; j < nfund; j++) {
    bal += fund[j].amount;
    assert_int_equal(fund[j].balance, bal);
  }
  assert_int_equal(bal, 0);
  /* Conservation: balances + fund == deposits (no withdrawal, no fee). */
  long long deposits = 1000000000, balances = 0;
  for (int i = 0; i < NACCT; i++) {
    for (size_t j = 0; j < ne[i]; j++)
      if (strcmp(e[i][j].kind, "DEPOSIT") == 0) deposits += e[i][j].amount;
    balances += e[i][ne[i] - 1].balance;
  }
  assert_int_equal(balances + bal, deposits);
}

static void journal_replay_gives_the_printed_state_hash(void **state) {
  (void)state;
  assert_true(du_scenario_hash_replays(g_bin, g_dir[0], g_out[0]));
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_squeeze_scenario HOURGLASSD\n");
    return 2;
  }
  g_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(exits_zero_and_prints_the_line),
      cmocka_unit_test(second_run_is_byte_identical),
      cmocka_unit_test(vm_follows_fills_and_dsps),
      cmocka_unit_test(liquidation_fees_follow_the_fills),
      cmocka_unit_test(waterfall_and_fund),
      cmocka_unit_test(journal_replay_gives_the_printed_state_hash),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
