/* The clearing guarantee: marks, maintenance margin, calls, liquidation
 * slices and fees, the insurance fund and the waterfall, with the
 * hand-computed cases of settlement/CONTRACT.md sections 6.7 to 6.10. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/test_gen.h"

#include "hourglass/clearing.h"
#include "hourglass/error.h"

#define INST 7u
#define GROUP 1u
#define DAY 20000ull
#define NS 1000000000ull
#define AT(day, hour) ((uint64_t)(day) * HG_NS_PER_DAY + (uint64_t)(hour) * 3600 * NS)

enum { P = 1, M = 2, L = 3, S = 4, B = 5, X = 6, Y = 7 };

static hg_clearing_t *make(void) {
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  hg_clearing_t *c = NULL;
  assert_int_equal(hg_clearing_create(&cfg, &c), 0);
  hg_clearing_instrument_t in = {.id = INST, .group_id = GROUP, .year = 2027, .month = 3,
                                 .last_dsp = 2000};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  return c;
}

static void conserved(const hg_clearing_t *c) { assert_true(hg_clearing_conserved(c)); }

/* seller sells qty to buyer at 2000 at 10:00 of DAY, then the cycle of DAY
 * (no quotes: the initial price 2000 is the DSP). */
static void open_at_2000(hg_clearing_t *c, hg_account_t buyer, hg_account_t seller, int64_t q) {
  assert_int_equal(hg_clearing_fill(c, INST, buyer, seller, q, 2000, AT(DAY, 10), 0), 0);
}

static void cycle(hg_clearing_t *c, uint64_t day, hg_price_t bid, hg_price_t ask,
                  hg_clearing_cycle_report_t *rep) {
  hg_clearing_top_t t = {.instrument = INST, .best_bid = bid, .best_ask = ask};
  assert_int_equal(hg_clearing_daily_cycle(c, 1, AT(day, 16), &t, 1, rep), 0);
  conserved(c);
}

static void mark(hg_clearing_t *c, hg_price_t bid, hg_price_t ask) {
  hg_clearing_top_t t = {.instrument = INST, .best_bid = bid, .best_ask = ask};
  assert_int_equal(hg_clearing_mark(c, &t, 1, NULL), 0);
}

/* P short 20 against M at DSP 2000, P's cash 7,000 USD (section 6.8). */
static hg_clearing_t *producer(void) {
  hg_clearing_t *c = make();
  assert_int_equal(hg_clearing_account_add(c, P, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, M, 2), 0);
  assert_int_equal(hg_clearing_deposit(c, P, 7000000000, 1, AT(DAY, 9)), 0);
  assert_int_equal(hg_clearing_deposit(c, M, 100000000000, 1, AT(DAY, 9)), 0);
  open_at_2000(c, M, P, 20);
  cycle(c, DAY, 0, 0, NULL);
  return c;
}

static void mark_price_rule(void **state) { /* 6.7 */
  (void)state;
  hg_price_t m;
  assert_int_equal(hg_clearing_mark_compute(2000, 2050, 2061, 0, 2000, &m), 0);
  assert_int_equal(m, 2056);
  assert_int_equal(hg_clearing_mark_compute(2000, 2050, 2450, 2070, 2000, &m), 0);
  assert_int_equal(m, 2070);
  assert_int_equal(hg_clearing_mark_compute(2000, 0, 0, 0, 2000, &m), 0);
  assert_int_equal(m, 2000);
  assert_int_equal(hg_clearing_mark_compute(2000, 0, 0, 2450, 2000, &m), 0);
  assert_int_equal(m, 2400);
  assert_int_equal(hg_clearing_mark_compute(2000, 0, 0, 1500, 2000, &m), 0);
  assert_int_equal(m, 1600);
  /* the band edges are inside: bid 1600, ask 2400 is a mid of 2000 */
  assert_int_equal(hg_clearing_mark_compute(2000, 1600, 2400, 2300, 2000, &m), 0);
  assert_int_equal(m, 2000);
  assert_int_equal(hg_clearing_mark_compute(0, 0, 0, 0, 2000, &m), HG_EINVAL);
  assert_int_equal(hg_clearing_mark_compute(2000, -1, 0, 0, 2000, &m), HG_EINVAL);
  assert_int_equal(hg_clearing_mark_compute(2000, 0, 0, 0, 10001, &m), HG_EINVAL);
}

static void call_then_deposit_clears_it(void **state) { /* 6.8, mark 2,100 */
  (void)state;
  hg_clearing_t *c = producer();
  mark(c, 2099, 2101);
  hg_price_t mk, last;
  assert_int_equal(hg_clearing_mark_get(c, INST, &mk, &last), 0);
  assert_int_equal(mk, 2100);
  assert_int_equal(last, 2000);
  hg_clearing_standing_t st;
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.state, HG_CLR_CALLED);
  assert_int_equal(st.equity, 5000000000);
  assert_int_equal(st.im, 6300000000);
  assert_int_equal(st.mm, 4725000000);
  assert_int_equal(st.call_amount, 1300000000);
  assert_int_equal(st.call_due, 2); /* one cycle ran: due at the next */
  /* reduce only */
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_check_order(c, P, INST, HG_CLR_BUY, 5, 2100, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(hg_clearing_check_order(c, P, INST, HG_CLR_BUY, 25, 2100, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_MARGIN_CALL);
  assert_int_equal(r.equity, 5000000000);
  assert_int_equal(r.initial_margin, 6300000000);
  assert_int_equal(r.amount, 1300000000);
  assert_int_equal(hg_clearing_check_order(c, P, INST, HG_CLR_SELL, 1, 2100, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_MARGIN_CALL);
  /* resting buys count: with 16 resting, a buy of 5 would flip the position */
  assert_int_equal(hg_clearing_open_add(c, P, INST, HG_CLR_BUY, 16), 0);
  assert_int_equal(hg_clearing_check_order(c, P, INST, HG_CLR_BUY, 5, 2100, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_MARGIN_CALL);
  assert_int_equal(hg_clearing_open_remove(c, P, INST, HG_CLR_BUY, 16), 0);
  assert_int_equal(hg_clearing_withdraw(c, P, 1, 2, AT(DAY + 1, 11), &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_MARGIN_CALL);
  /* the counterparty is untouched */
  assert_int_equal(hg_clearing_standing(c, M, &st), 0);
  assert_int_equal(st.state, HG_CLR_OK);
  /* 1 micro-USD short of the call: still called */
  assert_int_equal(hg_clearing_deposit(c, P, 1299999999, 3, AT(DAY + 1, 12)), 0);
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.state, HG_CLR_CALLED);
  assert_int_equal(st.call_amount, 1);
  assert_int_equal(hg_clearing_deposit(c, P, 1, 4, AT(DAY + 1, 12)), 0);
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.state, HG_CLR_OK);
  assert_int_equal(st.equity, 6300000000);
  assert_int_equal(st.call_amount, 0);
  assert_int_equal(st.call_due, 0);
  size_t n = 99;
  assert_int_equal(hg_clearing_liq_slices(c, NULL, 0, &n), 0);
  assert_int_equal(n, 0);
  conserved(c);
  hg_clearing_destroy(c);
}

static void call_past_its_deadline_liquidates(void **state) { /* 6.8, the cycle */
  (void)state;
  hg_clearing_t *c = producer();
  mark(c, 2099, 2101);
  /* a second mark keeps the due cycle */
  mark(c, 2099, 2101);
  hg_clearing_standing_t st;
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.call_due, 2);
  hg_clearing_cycle_report_t rep;
  cycle(c, DAY + 1, 2099, 2101, &rep); /* DSP 2,100 (tier 2) */
  assert_int_equal(rep.bankrupt, 0);
  assert_int_equal(rep.marks.liquidating, 1);
  assert_int_equal(rep.marks.new_liquidations, 1);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, P, &ai), 0);
  assert_int_equal(ai.balance, 5000000000);
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.state, HG_CLR_LIQUIDATING);
  assert_int_equal(st.liq_reason, HG_CLR_LIQ_DEADLINE);
  assert_int_equal(st.equity, 5000000000);
  assert_int_equal(st.call_amount, 1300000000);
  /* above MM but liquidation goes on to IM: a mark does not stop it */
  mark(c, 2099, 2101);
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.state, HG_CLR_LIQUIDATING);
  hg_clearing_liq_slice_t sl[2];
  size_t n;
  assert_int_equal(hg_clearing_liq_slices(c, sl, 2, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(sl[0].side, HG_CLR_BUY);
  assert_int_equal(sl[0].qty, 10);
  assert_int_equal(sl[0].limit, 2520); /* floor(2,100 x 1.2) */
  hg_clearing_destroy(c);
}

static void liquidation_slice_and_fee(void **state) { /* 6.8, mark 2,150 */
  (void)state;
  hg_clearing_t *c = producer();
  hg_clearing_mark_report_t rep;
  hg_clearing_top_t t = {.instrument = INST, .best_bid = 2149, .best_ask = 2151};
  assert_int_equal(hg_clearing_mark(c, &t, 1, &rep), 0);
  assert_int_equal(rep.instruments_marked, 1);
  assert_int_equal(rep.accounts_evaluated, 2);
  assert_int_equal(rep.liquidating, 1);
  assert_int_equal(rep.new_calls, 1);
  hg_clearing_standing_t st;
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.state, HG_CLR_LIQUIDATING);
  assert_int_equal(st.liq_reason, HG_CLR_LIQ_MM);
  assert_int_equal(st.equity, 4000000000);
  assert_int_equal(st.im, 6450000000);
  assert_int_equal(st.mm, 4837500000);
  assert_int_equal(st.call_amount, 2450000000);
  hg_clearing_liq_slice_t sl[4];
  size_t n;
  assert_int_equal(hg_clearing_liq_slices(c, sl, 0, &n), HG_ERANGE);
  assert_int_equal(n, 1);
  assert_int_equal(hg_clearing_liq_slices(c, sl, 4, &n), 0);
  assert_int_equal(sl[0].account, P);
  assert_int_equal(sl[0].instrument, INST);
  assert_int_equal(sl[0].side, HG_CLR_BUY);
  assert_int_equal(sl[0].qty, 10);
  assert_int_equal(sl[0].limit, 2580);
  int64_t fee = -1;
  assert_int_equal(hg_clearing_liq_fill(c, INST, P, M, 10, 2160, 0, HG_CLR_BUY, 5,
                                        AT(DAY + 1, 12), &fee),
                   0);
  assert_int_equal(fee, 108000000);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, P, &ai), 0);
  assert_int_equal(ai.balance, 6892000000);
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.equity, 3792000000);
  assert_int_equal(st.im, 3225000000);
  assert_int_equal(st.state, HG_CLR_OK);
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(c, &g);
  assert_int_equal(g.fund, 108000000);
  assert_int_equal(g.liq_fees, 108000000);
  assert_int_equal(g.liquidating, 0);
  /* the fee is two ledger entries, flagged, naming the fill */
  uint64_t k = hg_clearing_ledger_size(c);
  hg_ledger_entry_t e;
  assert_int_equal(hg_clearing_ledger_get(c, k - 2, &e), 0);
  assert_int_equal(e.kind, HG_LEDGER_LIQ_FEE);
  assert_int_equal(e.account, P);
  assert_int_equal(e.amount, -108000000);
  assert_int_equal(e.price, 2160);
  assert_int_equal(e.qty, 10);
  assert_int_equal(hg_clearing_ledger_get(c, k - 1, &e), 0);
  assert_int_equal(e.kind, HG_LEDGER_LIQ_FEE);
  assert_int_equal(e.account, HG_CLR_FUND_ACCOUNT);
  assert_int_equal(e.amount, 108000000);
  assert_int_equal(e.balance, 108000000);
  char buf[1024];
  size_t len;
  assert_int_equal(hg_clearing_statement_csv(c, P, INST, buf, sizeof buf, &len), 0);
  assert_non_null(strstr(buf, ",LIQ_FEE,-108000000,6892000000,2160,10\n"));
  conserved(c);
  hg_clearing_destroy(c);
}

static void fee_is_capped_at_equity(void **state) {
  (void)state;
  hg_clearing_t *c = producer();
  /* mark 2,340: E = 7,000 - 20 x 340 = 200 USD, liquidating */
  mark(c, 2339, 2341);
  hg_clearing_standing_t st;
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.equity, 200000000);
  /* buys 10 at 2,350: E = 7,000 + (-20 x 340 + 10 x (2,340 - 2,350)) = 100 USD,
   * below the full fee of 117.5 USD */
  int64_t fee;
  assert_int_equal(hg_clearing_liq_fill(c, INST, P, M, 10, 2350, 0, HG_CLR_BUY, 5,
                                        AT(DAY + 1, 12), &fee),
                   0);
  assert_int_equal(fee, 100000000);
  assert_int_equal(hg_clearing_standing(c, P, &st), 0);
  assert_int_equal(st.equity, 0);
  /* no equity left: the next fill pays no fee */
  assert_int_equal(hg_clearing_liq_fill(c, INST, P, M, 10, 2350, 0, HG_CLR_BUY, 6,
                                        AT(DAY + 1, 12), &fee),
                   0);
  assert_int_equal(fee, 0);
  assert_int_equal(hg_clearing_liq_fill(c, INST, P, M, 1, 2350, 0, 7, 6, 0, NULL), HG_EINVAL);
  conserved(c);
  hg_clearing_destroy(c);
}

static void withdrawals_take_only_paid_money(void **state) { /* 6.9 */
  (void)state;
  hg_clearing_t *c = make();
  assert_int_equal(hg_clearing_account_add(c, L, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, S, 2), 0);
  assert_int_equal(hg_clearing_deposit(c, L, 10000000000, 1, AT(DAY, 9)), 0);
  assert_int_equal(hg_clearing_deposit(c, S, 5000000000, 1, AT(DAY, 9)), 0);
  open_at_2000(c, L, S, 20);
  cycle(c, DAY, 0, 0, NULL);
  mark(c, 1899, 1901);
  hg_clearing_standing_t st;
  assert_int_equal(hg_clearing_standing(c, L, &st), 0);
  assert_int_equal(st.state, HG_CLR_OK);
  assert_int_equal(st.equity, 8000000000);
  assert_int_equal(hg_clearing_standing(c, S, &st), 0);
  assert_int_equal(st.equity, 7000000000);
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_withdraw(c, L, 2000000001, 2, AT(DAY + 1, 10), &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(r.equity, 8000000000);
  assert_int_equal(r.initial_margin, 6000000000);
  assert_int_equal(hg_clearing_withdraw(c, S, 1, 2, AT(DAY + 1, 10), &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(r.equity, 5000000000);
  assert_int_equal(hg_clearing_withdraw(c, L, 2000000000, 2, AT(DAY + 1, 10), &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  conserved(c);
  hg_clearing_destroy(c);
}

static void waterfall_fund_then_winners(void **state) { /* 6.10 */
  (void)state;
  hg_clearing_t *c = make();
  assert_int_equal(hg_clearing_account_add(c, B, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, X, 2), 0);
  assert_int_equal(hg_clearing_account_add(c, Y, 2), 0);
  assert_int_equal(hg_clearing_account_add(c, HG_CLR_FUND_ACCOUNT, 2), HG_EINVAL);
  assert_int_equal(hg_clearing_deposit(c, B, 400000000, 1, AT(DAY, 9)), 0);
  assert_int_equal(hg_clearing_deposit(c, X, 1400000000, 1, AT(DAY, 9)), 0);
  assert_int_equal(hg_clearing_deposit(c, Y, 700000000, 1, AT(DAY, 9)), 0);
  assert_int_equal(hg_clearing_fund_deposit(c, 0, 1, AT(DAY, 9)), HG_EINVAL);
  assert_int_equal(hg_clearing_fund_deposit(c, 300000000, 1, AT(DAY, 9)), 0);
  open_at_2000(c, X, B, 6);
  open_at_2000(c, Y, B, 3);
  cycle(c, DAY, 0, 0, NULL);
  uint64_t before = hg_clearing_ledger_size(c);
  hg_clearing_cycle_report_t rep;
  cycle(c, DAY + 1, 2099, 2101, &rep);
  assert_int_equal(rep.vm_paid, -900000000);
  assert_int_equal(rep.bankrupt, 1);
  assert_int_equal(rep.fund_used, 300000000);
  assert_int_equal(rep.socialized, 200000000);
  assert_int_equal(rep.uncovered, 0);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, B, &ai), 0);
  assert_int_equal(ai.balance, 0);
  assert_int_equal(hg_clearing_account_info(c, X, &ai), 0);
  assert_int_equal(ai.balance, 1866666666);
  assert_int_equal(hg_clearing_account_info(c, Y, &ai), 0);
  assert_int_equal(ai.balance, 933333334);
  hg_clearing_totals_t t;
  hg_clearing_totals(c, &t);
  assert_int_equal(t.fund, 0);
  assert_int_equal(t.balances + t.fund, 2800000000);
  /* ledger: 3 VM, fund cover pair, 2 charges, 1 credit */
  static const struct { uint32_t acct, kind; int64_t amount; } want[] = {
      {X, HG_LEDGER_VM, 600000000},           {B, HG_LEDGER_VM, -900000000},
      {Y, HG_LEDGER_VM, 300000000}, /* record order: the buyer's came first */           {B, HG_LEDGER_FUND_COVER, 300000000},
      {HG_CLR_FUND_ACCOUNT, HG_LEDGER_FUND_COVER, -300000000},
      {X, HG_LEDGER_SOCIALIZED, -133333334}, {Y, HG_LEDGER_SOCIALIZED, -66666666},
      {B, HG_LEDGER_SOCIALIZED, 200000000}};
  assert_int_equal(hg_clearing_ledger_size(c) - before, 8);
  for (size_t i = 0; i < 8; i++) {
    hg_ledger_entry_t e;
    assert_int_equal(hg_clearing_ledger_get(c, before + i, &e), 0);
    assert_int_equal(e.account, want[i].acct);
    assert_int_equal(e.kind, want[i].kind);
    assert_int_equal(e.amount, want[i].amount);
  }
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(c, &g);
  assert_int_equal(g.bankruptcies, 1);
  assert_int_equal(g.fund_used, 300000000);
  assert_int_equal(g.socialized, 200000000);
  assert_int_equal(g.cycles, 2);
  /* B is still short 9 with no equity; X and Y were called at the first
   * cycle (IM 1,800 and 900 USD above their cash) and are now past due */
  assert_int_equal(g.liquidating, 3);
  /* the fund is nobody's statement but the winners list stays members */
  hg_account_t ids[4];
  size_t n;
  assert_int_equal(hg_clearing_statement_accounts(c, HG_CLR_NO_INSTRUMENT, ids, 4, &n), 0);
  assert_int_equal(n, 3);
  hg_clearing_destroy(c);
}

static void winner_weights_are_capped_by_cash(void **state) {
  (void)state;
  hg_clearing_t *c = make();
  assert_int_equal(hg_clearing_account_add(c, B, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, X, 2), 0);
  assert_int_equal(hg_clearing_deposit(c, B, 100000000, 1, AT(DAY, 9)), 0);
  assert_int_equal(hg_clearing_deposit(c, X, 50000000, 1, AT(DAY, 9)), 0);
  open_at_2000(c, X, B, 1);
  cycle(c, DAY, 0, 0, NULL);
  /* DSP 2,300 (mid of 2,299 / 2,301): X wins 300 USD, B loses 300 with 100
   * of cash: -200, no fund; X's weight min(300, 350) covers all of it */
  hg_clearing_cycle_report_t rep;
  cycle(c, DAY + 1, 2299, 2301, &rep);
  assert_int_equal(rep.bankrupt, 1);
  assert_int_equal(rep.fund_used, 0);
  assert_int_equal(rep.socialized, 200000000);
  assert_int_equal(rep.uncovered, 0);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, X, &ai), 0);
  assert_int_equal(ai.balance, 150000000);
  /* a fee takes X to -50; at 2,400 X wins 100 (cash 50 after VM) and B loses
   * 100 (cash -100): X's weight is min(100, 50) = 50, the other 50 stays */
  assert_int_equal(hg_clearing_fee(c, X, HG_CLR_NO_INSTRUMENT, 200000000, 2, AT(DAY + 2, 9)),
                   0);
  cycle(c, DAY + 2, 2399, 2401, &rep);
  assert_int_equal(rep.bankrupt, 1);
  assert_int_equal(rep.socialized, 50000000);
  assert_int_equal(rep.uncovered, 50000000);
  assert_int_equal(hg_clearing_account_info(c, X, &ai), 0);
  assert_int_equal(ai.balance, 0);
  assert_int_equal(hg_clearing_account_info(c, B, &ai), 0);
  assert_int_equal(ai.balance, -50000000);
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(c, &g);
  assert_int_equal(g.uncovered, 50000000);
  assert_int_equal(g.socialized, 250000000);
  hg_clearing_destroy(c);
}

static void uncovered_rest_stays_negative(void **state) {
  (void)state;
  hg_clearing_t *c = make();
  assert_int_equal(hg_clearing_account_add(c, B, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, X, 2), 0);
  assert_int_equal(hg_clearing_deposit(c, X, 1000000000, 1, AT(DAY, 9)), 0);
  assert_int_equal(hg_clearing_deposit(c, B, 1000000000, 1, AT(DAY, 9)), 0);
  /* B pays a fee of 1,500 USD: cash -500; no VM that cycle, nobody wins */
  assert_int_equal(hg_clearing_fee(c, B, HG_CLR_NO_INSTRUMENT, 1500000000, 1, AT(DAY, 9)), 0);
  hg_clearing_cycle_report_t rep;
  cycle(c, DAY, 0, 0, &rep);
  assert_int_equal(rep.bankrupt, 1);
  assert_int_equal(rep.socialized, 0);
  assert_int_equal(rep.uncovered, 500000000);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, B, &ai), 0);
  assert_int_equal(ai.balance, -500000000);
  /* funding the fund covers it at the next cycle */
  assert_int_equal(hg_clearing_fund_deposit(c, 800000000, 2, AT(DAY + 1, 9)), 0);
  cycle(c, DAY + 1, 0, 0, &rep);
  assert_int_equal(rep.fund_used, 500000000);
  assert_int_equal(rep.uncovered, 0);
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(c, &g);
  assert_int_equal(g.fund, 300000000);
  assert_int_equal(g.bankruptcies, 2);
  hg_clearing_destroy(c);
}

/* ---- snapshot ---- */

static void snapshot_round_trips_the_guarantee(void **state) {
  (void)state;
  hg_clearing_t *c = producer();
  assert_int_equal(hg_clearing_fund_deposit(c, 5000000, 1, AT(DAY, 9)), 0);
  mark(c, 2149, 2151);
  assert_int_equal(hg_clearing_liq_fill(c, INST, P, M, 1, 2160, 0, HG_CLR_BUY, 5,
                                        AT(DAY + 1, 12), NULL),
                   0);
  buf_t a = {0}, b = {0};
  assert_int_equal(hg_clearing_serialize(c, put, &a), 0);
  hg_clearing_t *r = NULL;
  assert_int_equal(hg_clearing_restore(a.p, a.n, &r), 0);
  assert_int_equal(hg_clearing_serialize(r, put, &b), 0);
  assert_int_equal(a.n, b.n);
  assert_memory_equal(a.p, b.p, a.n);
  hg_clearing_standing_t s1, s2;
  assert_int_equal(hg_clearing_standing(c, P, &s1), 0);
  assert_int_equal(hg_clearing_standing(r, P, &s2), 0);
  assert_memory_equal(&s1, &s2, sizeof s1);
  hg_clearing_guarantee_t g1, g2;
  hg_clearing_guarantee(c, &g1);
  hg_clearing_guarantee(r, &g2);
  assert_memory_equal(&g1, &g2, sizeof g1);
  /* every single-byte change is refused or restores to a state that
   * serializes back to the changed bytes (the blob has no slack) */
  for (size_t i = 8; i < a.n; i += 7) {
    unsigned char save = a.p[i];
    a.p[i] ^= 0x5a;
    hg_clearing_t *x = NULL;
    int rc = hg_clearing_restore(a.p, a.n, &x);
    if (rc == 0) {
      buf_t z = {0};
      assert_int_equal(hg_clearing_serialize(x, put, &z), 0);
      assert_int_equal(z.n, a.n);
      assert_memory_equal(z.p, a.p, a.n);
      assert_true(hg_clearing_conserved(x));
      free(z.p);
      hg_clearing_destroy(x);
    }
    a.p[i] = save;
  }
  free(a.p);
  free(b.p);
  hg_clearing_destroy(r);
  hg_clearing_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mark_price_rule),
      cmocka_unit_test(call_then_deposit_clears_it),
      cmocka_unit_test(call_past_its_deadline_liquidates),
      cmocka_unit_test(liquidation_slice_and_fee),
      cmocka_unit_test(fee_is_capped_at_equity),
      cmocka_unit_test(withdrawals_take_only_paid_money),
      cmocka_unit_test(waterfall_fund_then_winners),
      cmocka_unit_test(winner_weights_are_capped_by_cash),
      cmocka_unit_test(uncovered_rest_stays_negative),
      cmocka_unit_test(snapshot_round_trips_the_guarantee),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
