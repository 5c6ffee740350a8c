/* Settlement, settlement/CONTRACT.md section 4, hand-computed: the four DSP
 * tiers and their rounding, variation margin over three days for three
 * accounts, the Final Settlement Price, final settlement and the
 * statements. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/clearing.h"
#include "hourglass/error.h"

#define NS 1000000000ull
#define DAY(d) ((uint64_t)(d) * HG_NS_PER_DAY)
#define AT(d, h, m, s) (DAY(d) + ((uint64_t)(h) * 3600 + (uint64_t)(m) * 60 + (s)) * NS)
#define D1 20000u /* a UTC day number */
#define INST 7u
#define A 1u
#define B 2u
#define C 3u
#define USD 1000000LL

static int dsp(int64_t q, int64_t qp, int64_t bid, int64_t ask, int64_t prev, int64_t fix,
               int64_t *out) {
  hg_clearing_dsp_input_t in = {.window_qty = q, .window_qp = qp, .best_bid = bid,
                                .best_ask = ask, .max_spread = 10, .prev_dsp = prev,
                                .final_fixing = fix};
  int tier = -1;
  int rc = hg_clearing_dsp_compute(&in, out, &tier);
  return rc < 0 ? rc : tier;
}

static void dsp_tiers_and_rounding(void **state) {
  (void)state;
  int64_t d;
  /* tier 1: 2 @ 2030 + 1 @ 2035 -> 6095 / 3 = 2031.67 -> 2032 */
  assert_int_equal(dsp(3, 6095, 2060, 2061, 1999, 2000000, &d), HG_DSP_TIER_VWAP);
  assert_int_equal(d, 2032);
  /* 1 @ 2000 + 1 @ 2001 -> 2000.5 -> 2001 (half up) */
  assert_int_equal(dsp(2, 4001, 0, 0, 0, 0, &d), HG_DSP_TIER_VWAP);
  assert_int_equal(d, 2001);
  /* 3 @ 2000 + 1 @ 2001 -> 2000.25 -> 2000 */
  assert_int_equal(dsp(4, 8001, 0, 0, 0, 0, &d), HG_DSP_TIER_VWAP);
  assert_int_equal(d, 2000);
  /* tier 2: (2060 + 2069) / 2 = 2064.5 -> 2065; spread 9 */
  assert_int_equal(dsp(0, 0, 2060, 2069, 1999, 0, &d), HG_DSP_TIER_MID);
  assert_int_equal(d, 2065);
  /* spread exactly 10: (2060 + 2070) / 2 = 2065 */
  assert_int_equal(dsp(0, 0, 2060, 2070, 1999, 0, &d), HG_DSP_TIER_MID);
  assert_int_equal(d, 2065);
  /* spread 11: not tier 2 -> previous DSP */
  assert_int_equal(dsp(0, 0, 2060, 2071, 1999, 2000000, &d), HG_DSP_TIER_PREVIOUS);
  assert_int_equal(d, 1999);
  /* one side only -> previous */
  assert_int_equal(dsp(0, 0, 2060, 0, 1999, 0, &d), HG_DSP_TIER_PREVIOUS);
  assert_int_equal(d, 1999);
  /* tier 4: 2,345,500 micro-USD = 2345.5 ticks -> 2346; 2,345,499 -> 2345 */
  assert_int_equal(dsp(0, 0, 0, 2071, 0, 2345500, &d), HG_DSP_TIER_INDEX);
  assert_int_equal(d, 2346);
  assert_int_equal(dsp(0, 0, 0, 0, 0, 2345499, &d), HG_DSP_TIER_INDEX);
  assert_int_equal(d, 2345);
  assert_int_equal(dsp(0, 0, 0, 0, 0, 0, &d), HG_DSP_TIER_NONE);
  assert_int_equal(d, 0);
  /* bad input */
  assert_int_equal(dsp(-1, 0, 0, 0, 0, 0, &d), HG_EINVAL);
  assert_int_equal(dsp(1, 0, 0, 0, 0, 0, &d), HG_EINVAL);
  assert_int_equal(dsp(0, 5, 0, 0, 0, 0, &d), HG_EINVAL);
  assert_int_equal(dsp(0, 0, -1, 0, 0, 0, &d), HG_EINVAL);
  assert_int_equal(dsp(1, (int64_t)HG_CLR_PRICE_MAX + 1, 0, 0, 0, 0, &d), HG_ERANGE);
}

static hg_clearing_t *make(uint64_t ledger_max) {
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  cfg.ledger_initial = 4;
  cfg.ledger_max_entries = ledger_max;
  hg_clearing_t *c = NULL;
  assert_int_equal(hg_clearing_create(&cfg, &c), 0);
  hg_clearing_instrument_t in = {.id = INST, .group_id = 1, .year = 2027, .month = 3,
                                 .last_dsp = 2000};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  for (uint32_t a = A; a <= C; a++) {
    assert_int_equal(hg_clearing_account_add(c, a, 1), 0);
    assert_int_equal(hg_clearing_deposit(c, a, 1000 * USD, a, 0), 0);
  }
  return c;
}

static int64_t balance(hg_clearing_t *c, uint32_t a) {
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, a, &ai), 0);
  return ai.balance - 1000 * USD;
}

static int64_t pos(hg_clearing_t *c, uint32_t a) {
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(c, a, INST, &p), 0);
  return p.pos;
}

static int64_t vm_of(hg_clearing_t *c, uint64_t index) {
  hg_ledger_entry_t e;
  assert_int_equal(hg_clearing_ledger_get(c, index, &e), 0);
  assert_int_equal(e.kind, HG_LEDGER_VM);
  return e.amount;
}

/*
 * Day 1 (DSP_0 = 2000 from listing):
 *   10:00 A buys 5 from B @ 2010;  10:01 A buys 3 from C @ 2020;
 *   10:02 C buys 4 from B @ 2005;  15:56 C buys 2 from A @ 2030 (window);
 *   15:59:59 B buys 1 from C @ 2035 (window).
 *   Positions A 6, B -8, C 2. DSP_1 = VWAP (2*2030 + 2035) / 3 = 2031.67 -> 2032.
 *   VM_A = 5(2032-2010) + 3(2032-2020) - 2(2032-2030) = 110 + 36 - 4 = 142
 *   VM_B = -5(22) - 4(2032-2005) + 1(2032-2035) = -110 - 108 - 3 = -221
 *   VM_C = -3(12) + 4(27) + 2(2) - 1(-3) = -36 + 108 + 4 + 3 = 79; sum 0.
 * Day 2: 11:00 B buys 3 from A @ 2050. Positions A 3, B -5, C 2.
 *   No window trades; bid 2060 / ask 2069 -> DSP_2 = 2064.5 -> 2065.
 *   VM_A = 6(2065-2032) - 3(2065-2050) = 198 - 45 = 153
 *   VM_B = -8(33) + 3(15) = -264 + 45 = -219
 *   VM_C = 2(33) = 66; sum 0.
 * Day 3: no trades, bid 2000 / ask 2020 (spread 20) -> DSP_3 = 2065 (previous):
 *   every VM is 0 (entries posted with amount 0 for the held positions).
 * Amounts in micro-USD are these times TV = 1,000,000.
 */
static void run_three_days(hg_clearing_t *c) {
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 5, 2010, AT(D1, 10, 0, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, A, C, 3, 2020, AT(D1, 10, 1, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, C, B, 4, 2005, AT(D1, 10, 2, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, C, A, 2, 2030, AT(D1, 15, 56, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, B, C, 1, 2035, AT(D1, 15, 59, 59), 0), 0);
  hg_clearing_cycle_report_t rep;
  assert_int_equal(hg_clearing_daily_cycle(c, 100, AT(D1, 16, 0, 0), NULL, 0, &rep), 0);
  assert_int_equal(rep.instruments_settled, 1);
  assert_int_equal(rep.entries_posted, 3);
  assert_int_equal(rep.vm_received, 221 * USD);
  assert_int_equal(rep.vm_paid, -221 * USD);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.inst.last_dsp, 2032);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_VWAP);
  /* ledger: 0..2 deposits, then records in creation order A, B, C */
  assert_int_equal(vm_of(c, 3), 142 * USD);
  assert_int_equal(vm_of(c, 4), -221 * USD);
  assert_int_equal(vm_of(c, 5), 79 * USD);

  assert_int_equal(hg_clearing_fill(c, INST, B, A, 3, 2050, AT(D1 + 1, 11, 0, 0), 0), 0);
  hg_clearing_top_t top = {.instrument = INST, .best_bid = 2060, .best_ask = 2069};
  assert_int_equal(hg_clearing_daily_cycle(c, 200, AT(D1 + 1, 16, 0, 0), &top, 1, &rep), 0);
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.inst.last_dsp, 2065);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_MID);
  assert_int_equal(vm_of(c, 6), 153 * USD);
  assert_int_equal(vm_of(c, 7), -219 * USD);
  assert_int_equal(vm_of(c, 8), 66 * USD);

  top = (hg_clearing_top_t){.instrument = INST, .best_bid = 2000, .best_ask = 2020};
  assert_int_equal(hg_clearing_daily_cycle(c, 300, AT(D1 + 2, 16, 0, 0), &top, 1, &rep), 0);
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.inst.last_dsp, 2065);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_PREVIOUS);
  assert_int_equal(rep.entries_posted, 3);
  assert_int_equal(vm_of(c, 9), 0);
  assert_int_equal(vm_of(c, 11), 0);
  assert_int_equal(balance(c, A), (142 + 153) * USD);
  assert_int_equal(balance(c, B), (-221 - 219) * USD);
  assert_int_equal(balance(c, C), (79 + 66) * USD);
  assert_int_equal(pos(c, A), 3);
  assert_int_equal(pos(c, B), -5);
  assert_int_equal(pos(c, C), 2);
}

static void variation_margin_three_days(void **state) {
  (void)state;
  hg_clearing_t *c = make(0);
  run_three_days(c);
  hg_clearing_totals_t t;
  hg_clearing_totals(c, &t);
  assert_int_equal(t.balances, 3000 * USD);
  hg_clearing_destroy(c);
}

static void cycle_failure_changes_nothing(void **state) {
  (void)state;
  hg_clearing_t *c = make(5); /* 3 deposits + room for 2 entries */
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 5, 2010, AT(D1, 10, 0, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, A, C, 3, 2020, AT(D1, 10, 1, 0), 0), 0);
  assert_int_equal(hg_clearing_daily_cycle(c, 100, AT(D1, 16, 0, 0), NULL, 0, NULL), HG_EFULL);
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(c, A, INST, &p), 0);
  assert_int_equal(p.pos_prev, 0);
  assert_int_equal(p.day_qty, 8);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.inst.last_dsp, 2000);
  assert_int_equal(balance(c, A), 0);
  assert_int_equal(hg_clearing_ledger_size(c), 3);
  /* tops naming an unknown instrument, or twice the same, are refused */
  hg_clearing_top_t tops[2] = {{.instrument = 99}, {.instrument = INST}};
  assert_int_equal(hg_clearing_daily_cycle(c, 100, AT(D1, 16, 0, 0), tops, 1, NULL), HG_EINVAL);
  tops[0].instrument = INST;
  assert_int_equal(hg_clearing_daily_cycle(c, 100, AT(D1, 16, 0, 0), tops, 2, NULL), HG_EINVAL);
  hg_clearing_destroy(c);
}

static void cycle_overflow_changes_nothing(void **state) {
  (void)state;
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  hg_clearing_t *c = NULL;
  assert_int_equal(hg_clearing_create(&cfg, &c), 0);
  hg_clearing_instrument_t in = {.id = INST, .group_id = 1, .year = 2027, .month = 3,
                                 .last_dsp = 1, .tick_value = HG_CLR_TICK_VALUE_MAX};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  assert_int_equal(hg_clearing_account_add(c, A, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, B, 1), 0);
  /* 1e9 contracts @ 1 tick, DSP 1e9: VM = 1e9 * (1e9 - 1) * 1e9 > INT64_MAX */
  assert_int_equal(hg_clearing_fill(c, INST, A, B, HG_CLR_QTY_MAX, 1, AT(D1, 10, 0, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 1, 1, AT(D1, 10, 0, 0), 0), HG_EOVERFLOW);
  hg_clearing_top_t top = {.instrument = INST, .best_bid = HG_CLR_PRICE_MAX,
                           .best_ask = HG_CLR_PRICE_MAX};
  assert_int_equal(hg_clearing_daily_cycle(c, 1, AT(D1, 16, 0, 0), &top, 1, NULL), HG_EOVERFLOW);
  assert_int_equal(hg_clearing_ledger_size(c), 0);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.inst.last_dsp, 1);
  hg_clearing_destroy(c);
}

/* The window is [15:55, 16:00) of the cycle's UTC day, both ends exact. */
static void vwap_window_bounds(void **state) {
  (void)state;
  hg_clearing_t *c = make(0);
  /* a window trade of the previous day does not count */
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 1, 2300, AT(D1 - 1, 15, 57, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 1, 2100, AT(D1, 15, 54, 59) + NS - 1, 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 3, 2001, AT(D1, 15, 55, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 1, 2002, AT(D1, 15, 59, 59) + NS - 1, 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 1, 2200, AT(D1, 16, 0, 0), 0), 0);
  /* VWAP = (3 * 2001 + 2002) / 4 = 8005 / 4 = 2001.25 -> 2001 */
  assert_int_equal(hg_clearing_daily_cycle(c, 1, AT(D1, 16, 0, 1), NULL, 0, NULL), 0);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_VWAP);
  assert_int_equal(ii.inst.last_dsp, 2001);
  /* next day: the window sums were reset, so previous DSP */
  assert_int_equal(hg_clearing_daily_cycle(c, 2, AT(D1 + 1, 16, 0, 0), NULL, 0, NULL), 0);
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_PREVIOUS);
  /* a day-(D1+2) window trade is not used by a cycle stamped D1+3 */
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 1, 2300, AT(D1 + 2, 15, 57, 0), 0), 0);
  assert_int_equal(hg_clearing_daily_cycle(c, 3, AT(D1 + 3, 16, 0, 0), NULL, 0, NULL), 0);
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_PREVIOUS);
  assert_int_equal(ii.inst.last_dsp, 2001);
  hg_clearing_destroy(c);
}

/* An instrument without any DSP: skipped (fills carry) until a FINAL fixing
 * gives tier 4; a provisional fixing is only a reference price. */
static void first_dsp_from_final_fixing(void **state) {
  (void)state;
  hg_clearing_t *c = make(0);
  hg_clearing_instrument_t in = {.id = 9, .group_id = 9, .year = 2027, .month = 4};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  assert_int_equal(hg_clearing_fill(c, 9, A, B, 1, 2000, AT(D1, 10, 0, 0), 0), 0);
  hg_clearing_cycle_report_t rep;
  assert_int_equal(hg_clearing_daily_cycle(c, 1, AT(D1, 16, 0, 0), NULL, 0, &rep), 0);
  assert_int_equal(rep.instruments_settled, 1); /* INST, previous DSP */
  assert_int_equal(rep.instruments_skipped, 1);
  assert_int_equal(rep.entries_posted, 0);
  assert_int_equal(hg_clearing_set_fixing(c, 9, 2001500, 0), 0);
  assert_int_equal(hg_clearing_daily_cycle(c, 2, AT(D1 + 1, 16, 0, 0), NULL, 0, &rep), 0);
  assert_int_equal(rep.instruments_skipped, 1);
  assert_int_equal(hg_clearing_set_fixing(c, 9, 2001500, 1), 0);
  assert_int_equal(hg_clearing_fill(c, 9, B, A, 1, 2004, AT(D1 + 2, 10, 0, 0), 0), 0);
  assert_int_equal(hg_clearing_fill(c, 9, A, C, 2, 2001, AT(D1 + 2, 10, 0, 0), 0), 0);
  assert_int_equal(hg_clearing_daily_cycle(c, 3, AT(D1 + 2, 16, 0, 0), NULL, 0, &rep), 0);
  assert_int_equal(rep.instruments_skipped, 0);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, 9, &ii), 0);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_INDEX);
  /* 2,001,500 micro-USD -> 2001.5 -> 2002 */
  assert_int_equal(ii.inst.last_dsp, 2002);
  /* every fill since listing is marked at DSP 2002 (pos_prev is 0):
   * A: +1(2002-2000) - 1(2002-2004) + 2(2002-2001) = 2 + 2 + 2 = 6
   * B: -1(2002-2000) + 1(2002-2004) = -2 - 2 = -4
   * C: -2(2002-2001) = -2;  6 - 4 - 2 = 0 */
  assert_int_equal(balance(c, A), 6 * USD);
  assert_int_equal(balance(c, B), -4 * USD);
  assert_int_equal(balance(c, C), -2 * USD);
  hg_clearing_destroy(c);
}

static hg_clearing_fixing_t fx(uint8_t day, uint8_t status, int64_t v) {
  return (hg_clearing_fixing_t){.day = day, .status = status, .value = v};
}

/* March 2027, 31 days: 30 days at 2,070,000 and day 31 at 2,085,500:
 * sum 64,185,500, mean 2,070,500 micro-USD = 2070.5 ticks -> 2071. With day
 * 31 at 2,085,499 the mean is 2070.49999... ticks -> 2070 (one rounding
 * step: rounding to a micro-USD first would give 2,070,500 and then 2071). */
/* The price given at registration (an exchange listing's price) serves as a
 * contract's first previous settlement price only where the contract's
 * rules give nothing: the reference is the latest fixing as soon as one
 * exists, and a first DSP without trades or quotes is tier 4 (the latest
 * FINAL fixing); the registered price is the DSP (tier 3) only with no FINAL
 * fixing at all. */
static void initial_price_ranks_after_the_fixings(void **state) {
  (void)state;
  hg_clearing_t *c = make(0); /* INST: group 1, registered with 2000 */
  hg_clearing_instrument_t in = {.id = 10, .group_id = 2, .year = 2027, .month = 4,
                                 .last_dsp = 2000};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  hg_price_t ref = 0;
  assert_int_equal(hg_clearing_ref_price(c, 10, &ref), 0);
  assert_int_equal(ref, 2000); /* nothing else yet */
  /* 2,345,500 micro-USD FINAL -> 2345.5 -> 2346 ticks */
  assert_int_equal(hg_clearing_set_fixing(c, 2, 2345500, 1), 0);
  assert_int_equal(hg_clearing_ref_price(c, 10, &ref), 0);
  assert_int_equal(ref, 2346);
  assert_int_equal(hg_clearing_fill(c, 10, A, B, 1, 2300, AT(D1, 10, 0, 0), 0), 0);
  /* a later provisional fixing, 2,400,400 -> 2400: the reference, not a DSP */
  assert_int_equal(hg_clearing_set_fixing(c, 2, 2400400, 0), 0);
  assert_int_equal(hg_clearing_ref_price(c, 10, &ref), 0);
  assert_int_equal(ref, 2400);
  hg_clearing_cycle_report_t rep;
  assert_int_equal(hg_clearing_daily_cycle(c, 1, AT(D1, 16, 0, 0), NULL, 0, &rep), 0);
  assert_int_equal(rep.instruments_settled, 2);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, 10, &ii), 0);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_INDEX);
  assert_int_equal(ii.inst.last_dsp, 2346);
  /* VM = q (DSP - p) TV: A +1 x (2346 - 2300) = +46 USD, B -46 USD (with
   * the registered 2000 as DSP it would have been -300 / +300 USD) */
  assert_int_equal(balance(c, A), 46 * USD);
  assert_int_equal(balance(c, B), -46 * USD);
  assert_int_equal(hg_clearing_ref_price(c, 10, &ref), 0);
  assert_int_equal(ref, 2346); /* the DSP now, not the fixing */
  /* INST: group 1 has no fixing, so its registered price is its DSP */
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_PREVIOUS);
  assert_int_equal(ii.inst.last_dsp, 2000);
  hg_clearing_destroy(c);
}

static void fsp_all_final(void **state) {
  (void)state;
  hg_clearing_fixing_t f[31];
  for (int i = 0; i < 31; i++) f[i] = fx((uint8_t)(31 - i), HG_CLR_FIX_FINAL, 2070000);
  f[0].value = 2085500; /* day 31 */
  hg_clearing_fsp_t out;
  assert_int_equal(hg_clearing_fsp(2027, 3, f, 31, &out), 0);
  assert_int_equal(out.days, 31);
  assert_int_equal(out.n_missing, 0);
  assert_int_equal(out.fsp, 2071);
  f[0].value = 2085499;
  assert_int_equal(hg_clearing_fsp(2027, 3, f, 31, &out), 0);
  assert_int_equal(out.fsp, 2070);
  /* bad input */
  assert_int_equal(hg_clearing_fsp(2027, 2, f, 31, &out), HG_EINVAL); /* day 31 in Feb */
  f[1].day = 31;
  assert_int_equal(hg_clearing_fsp(2027, 3, f, 31, &out), HG_EINVAL); /* twice */
  f[1].day = 30;
  f[1].status = 9;
  assert_int_equal(hg_clearing_fsp(2027, 3, f, 31, &out), HG_EINVAL);
  f[1].status = HG_CLR_FIX_FINAL;
  f[1].value = 0;
  assert_int_equal(hg_clearing_fsp(2027, 3, f, 31, &out), HG_EINVAL);
  assert_int_equal(hg_clearing_fsp(2027, 13, f, 0, &out), HG_EINVAL);
}

/* February 2028 has 29 days. Day 3 NO_FIX, day 10 provisional, day 29 never
 * published: settlement waits and lists exactly those days. */
static void fsp_lists_missing_days(void **state) {
  (void)state;
  hg_clearing_fixing_t f[28];
  size_t n = 0;
  for (uint8_t d = 1; d <= 28; d++) {
    uint8_t st = d == 3 ? HG_CLR_FIX_NO_FIX : d == 10 ? HG_CLR_FIX_PROVISIONAL : HG_CLR_FIX_FINAL;
    f[n++] = fx(d, st, d == 3 ? 0 : 2000000);
  }
  hg_clearing_fsp_t out;
  assert_int_equal(hg_clearing_fsp(2028, 2, f, n, &out), HG_ESTATE);
  assert_int_equal(out.days, 29);
  assert_int_equal(out.n_missing, 3);
  assert_int_equal(out.missing_day[0], 3);
  assert_int_equal(out.missing_status[0], HG_CLR_FIX_NO_FIX);
  assert_int_equal(out.missing_day[1], 10);
  assert_int_equal(out.missing_status[1], HG_CLR_FIX_PROVISIONAL);
  assert_int_equal(out.missing_day[2], 29);
  assert_int_equal(out.missing_status[2], HG_CLR_FIX_MISSING);
  /* 2027 is not a leap year: 28 days, all final at 2,000,000 -> 2000 */
  f[2].status = HG_CLR_FIX_FINAL;
  f[2].value = 2000000;
  f[9].status = HG_CLR_FIX_FINAL;
  assert_int_equal(hg_clearing_fsp(2027, 2, f, n, &out), 0);
  assert_int_equal(out.days, 28);
  assert_int_equal(out.fsp, 2000);
  /* 2100 is not a leap year, 2000 is */
  assert_int_equal(hg_clearing_fsp(2100, 2, f, n, &out), 0);
  assert_int_equal(hg_clearing_fsp(2000, 2, f, n, &out), HG_ESTATE);
  assert_int_equal(out.n_missing, 1);
  assert_int_equal(out.missing_day[0], 29);
}

/* After the three days (last DSP 2065; A 3, B -5, C 2), FSP 2071:
 *   A: 3 * (2071 - 2065) = 18;  B: -5 * 6 = -30;  C: 2 * 6 = 12;  sum 0. */
static void final_settlement_and_statements(void **state) {
  (void)state;
  hg_clearing_t *c = make(0);
  run_three_days(c);
  /* preconditions: open orders, then unsettled fills */
  assert_int_equal(hg_clearing_open_add(c, A, INST, HG_CLR_BUY, 1), 0);
  assert_int_equal(hg_clearing_final_settle(c, INST, 2071, 400, AT(D1 + 40, 12, 0, 0)),
                   HG_ESTATE);
  assert_int_equal(hg_clearing_open_remove(c, A, INST, HG_CLR_BUY, 1), 0);
  assert_int_equal(hg_clearing_final_settle(c, INST, 0, 400, 0), HG_EINVAL);
  assert_int_equal(hg_clearing_final_settle(c, 99, 2071, 400, 0), HG_ENOTFOUND);
  assert_int_equal(hg_clearing_final_settle(c, INST, 2071, 400, AT(D1 + 40, 12, 0, 0)), 0);
  assert_int_equal(balance(c, A), (142 + 153 + 18) * USD);
  assert_int_equal(balance(c, B), (-221 - 219 - 30) * USD);
  assert_int_equal(balance(c, C), (79 + 66 + 12) * USD);
  assert_int_equal(pos(c, A), 0);
  assert_int_equal(pos(c, B), 0);
  hg_clearing_totals_t t;
  hg_clearing_totals(c, &t);
  assert_int_equal(t.balances, 3000 * USD);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.settled, 1);
  assert_int_equal(ii.fsp, 2071);
  assert_int_equal(ii.open_interest, 0);
  /* closed for business */
  assert_int_equal(hg_clearing_final_settle(c, INST, 2071, 401, 0), HG_ESTATE);
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 1, 2071, 0, 0), HG_ESTATE);
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_check_order(c, A, INST, HG_CLR_BUY, 1, 2071, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INSTRUMENT_CLOSED);
  hg_clearing_cycle_report_t rep;
  assert_int_equal(hg_clearing_daily_cycle(c, 500, AT(D1 + 41, 16, 0, 0), NULL, 0, &rep), 0);
  assert_int_equal(rep.entries_posted, 0);

  /* who gets a statement: all three, in order of first entry; an account
   * with only a deposit does not */
  assert_int_equal(hg_clearing_account_add(c, 4, 1), 0);
  assert_int_equal(hg_clearing_deposit(c, 4, 5, 450, 0), 0);
  hg_account_t who[4];
  size_t nwho = 0;
  assert_int_equal(hg_clearing_statement_accounts(c, INST, who, 4, &nwho), 0);
  assert_int_equal(nwho, 3);
  assert_int_equal(who[0], A);
  assert_int_equal(who[1], B);
  assert_int_equal(who[2], C);
  assert_int_equal(hg_clearing_statement_accounts(c, INST, who, 2, &nwho), HG_ERANGE);
  assert_int_equal(nwho, 3);
  assert_int_equal(hg_clearing_statement_accounts(c, HG_CLR_NO_INSTRUMENT, NULL, 0, &nwho),
                   HG_ERANGE);
  assert_int_equal(nwho, 4); /* deposits */

  /* C's statement: ledger entries 5, 8, 11 (VM) and 14 (FINAL) */
  char expect[1024];
  snprintf(expect, sizeof expect,
           "index,seq,ts,account,instrument,kind,amount,balance,price,qty\n"
           "5,100,%llu,3,7,VM,79000000,1079000000,2032,2\n"
           "8,200,%llu,3,7,VM,66000000,1145000000,2065,2\n"
           "11,300,%llu,3,7,VM,0,1145000000,2065,2\n"
           "14,400,%llu,3,7,FINAL,12000000,1157000000,2071,2\n",
           (unsigned long long)AT(D1, 16, 0, 0), (unsigned long long)AT(D1 + 1, 16, 0, 0),
           (unsigned long long)AT(D1 + 2, 16, 0, 0), (unsigned long long)AT(D1 + 40, 12, 0, 0));
  char buf[1024];
  size_t len = 0;
  assert_int_equal(hg_clearing_statement_csv(c, C, INST, buf, sizeof buf, &len), 0);
  assert_string_equal(buf, expect);
  assert_int_equal(len, strlen(expect));
  /* truncation: snprintf-like */
  assert_int_equal(hg_clearing_statement_csv(c, C, INST, buf, 10, &len), HG_ERANGE);
  assert_int_equal(len, strlen(expect));
  assert_string_equal(buf, "index,seq");
  assert_int_equal(hg_clearing_statement_csv(c, C, INST, NULL, 0, &len), HG_ERANGE);
  assert_int_equal(hg_clearing_statement_csv(c, 77, INST, buf, sizeof buf, &len), HG_ENOTFOUND);

  assert_int_equal(hg_clearing_statement_json(c, C, INST, buf, sizeof buf, &len), 0);
  assert_non_null(strstr(buf, "{\"account\":3,\"instrument\":7,\"entries\":[{\"index\":5,"));
  assert_non_null(strstr(buf, "\"kind\":\"FINAL\",\"amount\":12000000,\"balance\":1157000000,"
                              "\"price\":2071,\"qty\":2}],\"total\":157000000}\n"));
  /* every entry of B: the deposit too */
  assert_int_equal(hg_clearing_statement_json(c, B, HG_CLR_NO_INSTRUMENT, buf, sizeof buf, &len),
                   0);
  assert_non_null(strstr(buf, "\"instrument\":null,\"entries\":[{\"index\":1,"));
  assert_non_null(strstr(buf, "\"kind\":\"DEPOSIT\",\"amount\":1000000000,"));
  assert_non_null(strstr(buf, "\"total\":530000000}")); /* 1000 - 470 USD */

  /* FILE writers give the same bytes */
  char *mem = NULL;
  size_t memlen = 0;
  FILE *f = open_memstream(&mem, &memlen);
  assert_non_null(f);
  assert_int_equal(hg_clearing_statement_csv_file(c, C, INST, f), 0);
  fclose(f);
  assert_string_equal(mem, expect);
  free(mem);

  /* a copy of the ledger prints the same statements */
  uint64_t nled = hg_clearing_ledger_size(c);
  hg_ledger_entry_t *led = calloc(nled, sizeof *led);
  assert_non_null(led);
  for (uint64_t i = 0; i < nled; i++) assert_int_equal(hg_clearing_ledger_get(c, i, &led[i]), 0);
  char copy[1024];
  size_t clen = 0;
  assert_int_equal(hg_clearing_statement_of(led, nled, C, INST, 0, copy, sizeof copy, &clen), 0);
  assert_string_equal(copy, expect);
  assert_int_equal(hg_clearing_statement_json(c, B, HG_CLR_NO_INSTRUMENT, buf, sizeof buf, &len),
                   0);
  assert_int_equal(hg_clearing_statement_of(led, nled, B, HG_CLR_NO_INSTRUMENT, 1, copy,
                                            sizeof copy, &clen), 0);
  assert_string_equal(copy, buf);
  assert_int_equal(hg_clearing_statement_of(led, nled, C, INST, 0, NULL, 0, &clen), HG_ERANGE);
  assert_int_equal(clen, strlen(expect));
  free(led);

  /* removing the instrument frees its records; the ledger stays */
  assert_int_equal(hg_clearing_instrument_remove(c, INST), 0);
  assert_int_equal(hg_clearing_instrument_remove(c, INST), HG_ENOTFOUND);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, A, &ai), 0);
  assert_int_equal(ai.positions, 0);
  assert_int_equal(hg_clearing_statement_csv(c, C, INST, buf, sizeof buf, &len), 0);
  assert_string_equal(buf, expect);
  /* the id can be listed again, fresh */
  hg_clearing_instrument_t in = {.id = INST, .group_id = 1, .year = 2028, .month = 3,
                                 .last_dsp = 2100};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  assert_int_equal(pos(c, A), 0);
  hg_clearing_destroy(c);
}

static void final_settlement_waits_for_the_cycle(void **state) {
  (void)state;
  hg_clearing_t *c = make(0);
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 1, 2000, AT(D1, 10, 0, 0), 0), 0);
  assert_int_equal(hg_clearing_final_settle(c, INST, 2071, 1, 0), HG_ESTATE);
  assert_int_equal(hg_clearing_instrument_remove(c, INST), HG_ESTATE);
  assert_int_equal(hg_clearing_daily_cycle(c, 1, AT(D1, 16, 0, 0), NULL, 0, NULL), 0);
  assert_int_equal(hg_clearing_final_settle(c, INST, 2071, 2, 0), 0);
  /* VM at the previous DSP 2000 was 0; final: 1 * (2071 - 2000) = 71 */
  assert_int_equal(balance(c, A), 71 * USD);
  assert_int_equal(balance(c, B), -71 * USD);
  hg_clearing_destroy(c);
}

/* The cycle returns records that hold nothing to the pool, after their VM. */
static void cycle_frees_empty_records(void **state) {
  (void)state;
  hg_clearing_t *c = make(0);
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_check_order(c, C, INST, HG_CLR_BUY, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(hg_clearing_open_add(c, B, INST, HG_CLR_SELL, 2), 0);
  /* A buys 2 @ 1995 and sells them back @ 2003: flat, with fills */
  assert_int_equal(hg_clearing_fill(c, INST, A, B, 2, 1995, AT(D1, 10, 0, 0),
                                    HG_CLR_FILL_SELL_RESTING), 0);
  assert_int_equal(hg_clearing_fill(c, INST, B, A, 2, 2003, AT(D1, 11, 0, 0), 0), 0);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, C, &ai), 0);
  assert_int_equal(ai.positions, 1);
  hg_clearing_cycle_report_t rep;
  assert_int_equal(hg_clearing_daily_cycle(c, 1, AT(D1, 16, 0, 0), NULL, 0, &rep), 0);
  /* DSP 2000 (previous): A 2(2000-1995) - 2(2000-2003) = 10 + 6 = 16; B -16 */
  assert_int_equal(rep.entries_posted, 2);
  assert_int_equal(balance(c, A), 16 * USD);
  assert_int_equal(balance(c, B), -16 * USD);
  for (uint32_t a = A; a <= C; a++) {
    assert_int_equal(hg_clearing_account_info(c, a, &ai), 0);
    assert_int_equal(ai.positions, 0);
  }
  /* a record with resting quantity survives the sweep */
  assert_int_equal(hg_clearing_open_add(c, C, INST, HG_CLR_BUY, 3), 0);
  assert_int_equal(hg_clearing_daily_cycle(c, 2, AT(D1 + 1, 16, 0, 0), NULL, 0, &rep), 0);
  assert_int_equal(hg_clearing_account_info(c, C, &ai), 0);
  assert_int_equal(ai.positions, 1);
  /* and the freed slots are reused */
  assert_int_equal(hg_clearing_fill(c, INST, A, C, 1, 2000, AT(D1 + 2, 10, 0, 0),
                                    HG_CLR_FILL_SELL_RESTING), HG_EINVAL);
  assert_int_equal(hg_clearing_fill(c, INST, C, A, 1, 2000, AT(D1 + 2, 10, 0, 0),
                                    HG_CLR_FILL_BUY_RESTING), 0);
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(c, A, INST, &p), 0);
  assert_int_equal(p.pos, -1);
  assert_int_equal(hg_clearing_position(c, C, INST, &p), 0);
  assert_int_equal(p.pos, 1);
  assert_int_equal(p.open_buy, 2);
  hg_clearing_destroy(c);
}

typedef struct blob {
  unsigned char *p;
  size_t len, cap;
  int fail_after; /* > 0: the n-th write fails */
} blob_t;

static int blob_write(void *ctx, const void *data, size_t len) {
  blob_t *b = ctx;
  if (b->fail_after > 0 && --b->fail_after == 0) return -EIO;
  if (b->len + len > b->cap) {
    size_t cap = (b->len + len) * 2;
    unsigned char *p = realloc(b->p, cap);
    assert_non_null(p);
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, len);
  b->len += len;
  return 0;
}

static blob_t snap(const hg_clearing_t *c) {
  blob_t b = {0};
  assert_int_equal(hg_clearing_serialize(c, blob_write, &b), 0);
  return b;
}

/* Serialize after three days, restore, and check the copy: same bytes again,
 * same positions and balances, same statements, and it settles the same. */
static void snapshot_round_trip(void **state) {
  (void)state;
  hg_clearing_t *c = make(0);
  run_three_days(c);
  assert_int_equal(hg_clearing_open_add(c, A, INST, HG_CLR_BUY, 4), 0);
  /* a window trade and unsettled fills of the fourth day are state too */
  assert_int_equal(hg_clearing_fill(c, INST, A, C, 1, 2070, AT(D1 + 3, 15, 58, 0), 0), 0);
  blob_t b1 = snap(c);
  hg_clearing_t *r = NULL;
  assert_int_equal(hg_clearing_restore(b1.p, b1.len, &r), 0);
  blob_t b2 = snap(r);
  assert_int_equal(b1.len, b2.len);
  assert_memory_equal(b1.p, b2.p, b1.len);
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(r, A, INST, &p), 0);
  assert_int_equal(p.pos, 4);
  assert_int_equal(p.pos_prev, 3);
  assert_int_equal(p.open_buy, 4);
  assert_int_equal(balance(r, B), (-221 - 219) * USD);
  char s1[1024], s2[1024];
  size_t l1, l2;
  assert_int_equal(hg_clearing_statement_csv(c, C, INST, s1, sizeof s1, &l1), 0);
  assert_int_equal(hg_clearing_statement_csv(r, C, INST, s2, sizeof s2, &l2), 0);
  assert_string_equal(s1, s2);
  hg_clearing_totals_t t1, t2;
  hg_clearing_totals(c, &t1);
  hg_clearing_totals(r, &t2);
  assert_memory_equal(&t1, &t2, sizeof t1);
  /* both run the same next cycle (VWAP 2070 from the window trade) */
  hg_clearing_t *both[2] = {c, r};
  for (int k = 0; k < 2; k++) {
    assert_int_equal(hg_clearing_daily_cycle(both[k], 500, AT(D1 + 3, 16, 0, 0), NULL, 0, NULL), 0);
    hg_clearing_instrument_info_t ii;
    assert_int_equal(hg_clearing_instrument_info(both[k], INST, &ii), 0);
    assert_int_equal(ii.inst.last_dsp, 2070);
  }
  blob_t b3 = snap(c), b4 = snap(r);
  assert_int_equal(b3.len, b4.len);
  assert_memory_equal(b3.p, b4.p, b3.len);

  /* every truncation is refused cleanly */
  for (size_t n = 0; n < b1.len; n++) {
    hg_clearing_t *x = NULL;
    int rc = hg_clearing_restore(b1.p, n, &x);
    assert_true(rc == HG_ECORRUPT);
    assert_null(x);
  }
  /* trailing bytes, a flipped magic, another version */
  hg_clearing_t *x = NULL;
  unsigned char *longer = malloc(b1.len + 1);
  memcpy(longer, b1.p, b1.len);
  longer[b1.len] = 0;
  assert_int_equal(hg_clearing_restore(longer, b1.len + 1, &x), HG_ECORRUPT);
  free(longer);
  b1.p[0] ^= 1;
  assert_int_equal(hg_clearing_restore(b1.p, b1.len, &x), HG_ECORRUPT);
  b1.p[0] ^= 1;
  b1.p[4] = 3;
  assert_int_equal(hg_clearing_restore(b1.p, b1.len, &x), HG_EVERSION);
  b1.p[4] = 2;
  /* a balance that the ledger does not replay: the last 4 bytes are the end
   * marker, before them the guarantee's 64 bytes (fund, five totals,
   * bankruptcies, cycles), before them the last entry's qty, price, balance */
  b1.p[b1.len - 4 - 64 - 16 - 8] ^= 1;
  assert_int_equal(hg_clearing_restore(b1.p, b1.len, &x), HG_ECORRUPT);
  assert_null(x);
  /* a failing writer stops the serialization with its error */
  blob_t bf = {.fail_after = 1};
  assert_int_equal(hg_clearing_serialize(c, blob_write, &bf), -EIO);
  free(bf.p);
  free(b1.p);
  free(b2.p);
  free(b3.p);
  free(b4.p);
  hg_clearing_destroy(r);
  hg_clearing_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dsp_tiers_and_rounding),
      cmocka_unit_test(variation_margin_three_days),
      cmocka_unit_test(cycle_failure_changes_nothing),
      cmocka_unit_test(cycle_overflow_changes_nothing),
      cmocka_unit_test(vwap_window_bounds),
      cmocka_unit_test(first_dsp_from_final_fixing),
      cmocka_unit_test(initial_price_ranks_after_the_fixings),
      cmocka_unit_test(fsp_all_final),
      cmocka_unit_test(fsp_lists_missing_days),
      cmocka_unit_test(final_settlement_and_statements),
      cmocka_unit_test(final_settlement_waits_for_the_cycle),
      cmocka_unit_test(cycle_frees_empty_records),
      cmocka_unit_test(snapshot_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
