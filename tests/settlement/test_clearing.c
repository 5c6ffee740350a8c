/* Clearing state: accounts, cash, positions, open quantities, fills and the
 * pre-trade checks of settlement/CONTRACT.md sections 1 and 4.5 (band, max
 * order, limits). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/clearing.h"
#include "hourglass/error.h"

#define USD 1000000LL
#define INST 7u  /* B200.A.2027-03 */
#define INST2 8u /* B200.A.2027-04 */
#define GROUP 1u

/* A clearing with instruments INST and INST2 (last DSP 2000) on cfg (its
 * sizes are set here). */
static hg_clearing_t *make_cfg(hg_clearing_config_t *cfg0, uint32_t max_accounts,
                               uint32_t max_positions) {
  hg_clearing_config_t cfg = *cfg0;
  cfg.max_accounts = max_accounts;
  cfg.max_positions = max_positions;
  cfg.max_firms = 2;
  cfg.ledger_initial = 2;
  cfg.ledger_max_entries = 64;
  hg_clearing_t *c = NULL;
  assert_int_equal(hg_clearing_create(&cfg, &c), 0);
  hg_clearing_instrument_t in = {.id = INST, .group_id = GROUP, .year = 2027, .month = 3,
                                 .last_dsp = 2000};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  in.id = INST2;
  in.month = 4;
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  return c;
}

static hg_clearing_t *make(uint32_t max_accounts, uint32_t max_positions) {
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  return make_cfg(&cfg, max_accounts, max_positions);
}

static void config_is_validated(void **state) {
  (void)state;
  hg_clearing_config_t cfg;
  hg_clearing_t *c = NULL;
  assert_int_equal(hg_clearing_create(NULL, &c), HG_EINVAL);
  hg_clearing_config_default(&cfg);
  cfg.max_accounts = 0;
  assert_int_equal(hg_clearing_create(&cfg, &c), HG_EINVAL);
  hg_clearing_config_default(&cfg);
  cfg.tick_value = 0;
  assert_int_equal(hg_clearing_create(&cfg, &c), HG_EINVAL);
  hg_clearing_config_default(&cfg);
  cfg.ledger_max_entries = cfg.ledger_initial - 1;
  assert_int_equal(hg_clearing_create(&cfg, &c), HG_EINVAL);
  hg_clearing_config_default(&cfg);
  cfg.dsp_window_ns = cfg.cycle_time_of_day_ns + 1;
  assert_int_equal(hg_clearing_create(&cfg, &c), HG_EINVAL);
  assert_null(c);
  hg_clearing_config_default(&cfg);
  assert_int_equal(hg_clearing_create(&cfg, &c), 0);
  hg_clearing_destroy(c);
  hg_clearing_destroy(NULL);
}

static void accounts_and_firms_are_bounded(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 100, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, 100, 1), HG_EEXISTS);
  assert_int_equal(hg_clearing_account_add(c, 200, 2), 0);
  /* third firm: max_firms is 2 */
  assert_int_equal(hg_clearing_account_add(c, 300, 3), HG_EFULL);
  assert_int_equal(hg_clearing_account_add(c, 300, 2), 0);
  assert_int_equal(hg_clearing_account_add(c, 400, 1), HG_EFULL);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, 300, &ai), 0);
  assert_int_equal(ai.firm_id, 2);
  assert_int_equal(ai.balance, 0);
  assert_int_equal(hg_clearing_account_info(c, 400, &ai), HG_ENOTFOUND);
  hg_clearing_destroy(c);
}

static void instruments_are_validated(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  hg_clearing_instrument_t in = {.id = INST, .group_id = GROUP, .year = 2027, .month = 3};
  assert_int_equal(hg_clearing_instrument_add(c, &in), HG_EEXISTS);
  in.id = 99;
  in.month = 13;
  assert_int_equal(hg_clearing_instrument_add(c, &in), HG_EINVAL);
  in.month = 5;
  in.last_dsp = -1;
  assert_int_equal(hg_clearing_instrument_add(c, &in), HG_EINVAL);
  in.last_dsp = 0;
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  assert_int_equal(hg_clearing_set_delivery(c, 12345, 1), HG_ENOTFOUND);
  assert_int_equal(hg_clearing_set_fixing(c, 555, 2000000, 1), HG_ENOTFOUND);
  assert_int_equal(hg_clearing_set_fixing(c, GROUP, 0, 1), HG_EINVAL);
  /* instrument 99 has no DSP: the reference is the latest fixing (any
   * status), 2,100,499 micro-USD -> 2100.499 ticks -> 2100 */
  assert_int_equal(hg_clearing_set_fixing(c, GROUP, 2100499, 0), 0);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, 99, &ii), 0);
  assert_int_equal(ii.ref_price, 2100);
  assert_int_equal(hg_clearing_set_fixing(c, GROUP, 2100500, 0), 0);
  assert_int_equal(hg_clearing_instrument_info(c, 99, &ii), 0);
  assert_int_equal(ii.ref_price, 2101);
  /* instrument INST was registered with 2000, an initial price that no
   * cycle has replaced: the fixing comes first ("last DSP, else the latest
   * fixing") */
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.ref_price, 2101);
  /* the O(1) accessor the order path uses agrees */
  hg_price_t ref = -1;
  assert_int_equal(hg_clearing_ref_price(c, 99, &ref), 0);
  assert_int_equal(ref, 2101);
  assert_int_equal(hg_clearing_ref_price(c, INST, &ref), 0);
  assert_int_equal(ref, 2101);
  /* a cycle with no trade, no quote and no FINAL fixing makes the initial
   * price INST's DSP (tier 3); from then on that DSP is the reference */
  const uint64_t cycle_ts = 20000 * HG_NS_PER_DAY + 16 * 3600 * 1000000000ull;
  assert_int_equal(hg_clearing_daily_cycle(c, 1, cycle_ts, NULL, 0, NULL), 0);
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.last_dsp_tier, HG_DSP_TIER_PREVIOUS);
  assert_int_equal(ii.ref_price, 2000);
  assert_int_equal(hg_clearing_ref_price(c, INST, &ref), 0);
  assert_int_equal(ref, 2000);
  assert_int_equal(hg_clearing_ref_price(c, 12345, &ref), HG_ENOTFOUND);
  hg_clearing_destroy(c);
}

static void deposits_post_ledger_entries(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 100, 1), 0);
  assert_int_equal(hg_clearing_deposit(c, 100, 5 * USD, 1, 11), 0);
  assert_int_equal(hg_clearing_deposit(c, 100, 2 * USD, 2, 12), 0);
  assert_int_equal(hg_clearing_deposit(c, 100, 0, 3, 13), HG_EINVAL);
  assert_int_equal(hg_clearing_deposit(c, 100, -1, 3, 13), HG_EINVAL);
  assert_int_equal(hg_clearing_deposit(c, 101, 1, 3, 13), HG_ENOTFOUND);
  assert_int_equal(hg_clearing_deposit(c, 100, INT64_MAX, 3, 13), HG_EOVERFLOW);
  assert_int_equal(hg_clearing_ledger_size(c), 2);
  hg_ledger_entry_t e;
  assert_int_equal(hg_clearing_ledger_get(c, 1, &e), 0);
  assert_int_equal(e.kind, HG_LEDGER_DEPOSIT);
  assert_int_equal(e.seq, 2);
  assert_int_equal(e.ts, 12);
  assert_int_equal(e.amount, 2 * USD);
  assert_int_equal(e.balance, 7 * USD);
  assert_int_equal(e.instrument, HG_CLR_NO_INSTRUMENT);
  assert_int_equal(hg_clearing_ledger_get(c, 2, &e), HG_ENOTFOUND);
  hg_clearing_totals_t t;
  hg_clearing_totals(c, &t);
  assert_int_equal(t.deposits, 7 * USD);
  assert_int_equal(t.balances, 7 * USD);
  hg_clearing_destroy(c);
}

static void ledger_full_is_a_clean_error(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16); /* ledger grows from 2 up to 64 entries */
  assert_int_equal(hg_clearing_account_add(c, 100, 1), 0);
  for (int i = 0; i < 64; i++) assert_int_equal(hg_clearing_deposit(c, 100, 1, (uint64_t)i, 0), 0);
  assert_int_equal(hg_clearing_deposit(c, 100, 1, 64, 0), HG_EFULL);
  assert_int_equal(hg_clearing_fee(c, 100, INST, 1, 64, 0), HG_EFULL);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, 100, &ai), 0);
  assert_int_equal(ai.balance, 64);
  assert_int_equal(hg_clearing_ledger_size(c), 64);
  hg_clearing_destroy(c);
}

static void fees_debit_without_margin_check(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 100, 1), 0);
  assert_int_equal(hg_clearing_deposit(c, 100, 10, 1, 0), 0);
  assert_int_equal(hg_clearing_fee(c, 100, INST, 25, 2, 0), 0);
  assert_int_equal(hg_clearing_fee(c, 100, 4242, 1, 2, 0), HG_ENOTFOUND);
  assert_int_equal(hg_clearing_fee(c, 100, INST, 0, 2, 0), HG_EINVAL);
  hg_ledger_entry_t e;
  assert_int_equal(hg_clearing_ledger_get(c, 1, &e), 0);
  assert_int_equal(e.kind, HG_LEDGER_FEE);
  assert_int_equal(e.amount, -25);
  assert_int_equal(e.balance, -15);
  hg_clearing_totals_t t;
  hg_clearing_totals(c, &t);
  assert_int_equal(t.fees, 25);
  assert_int_equal(t.balances, t.deposits - t.withdrawals - t.fees);
  hg_clearing_destroy(c);
}

static void fills_move_positions_of_both_sides(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 1, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, 2, 1), 0);
  assert_int_equal(hg_clearing_open_add(c, 2, INST, HG_CLR_SELL, 10), 0);
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 4, 2010, 0, HG_CLR_FILL_SELL_RESTING), 0);
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(c, 1, INST, &p), 0);
  assert_int_equal(p.pos, 4);
  assert_int_equal(p.day_qty, 4);
  assert_int_equal(p.pos_prev, 0);
  assert_int_equal(hg_clearing_position(c, 2, INST, &p), 0);
  assert_int_equal(p.pos, -4);
  assert_int_equal(p.open_sell, 6);
  /* a self-trade leaves the position unchanged */
  assert_int_equal(hg_clearing_fill(c, INST, 1, 1, 3, 2010, 0, 0), 0);
  assert_int_equal(hg_clearing_position(c, 1, INST, &p), 0);
  assert_int_equal(p.pos, 4);
  /* rejected fills change nothing */
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 7, 2010, 0, HG_CLR_FILL_SELL_RESTING),
                   HG_EINVAL); /* only 6 open */
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 1, 2010, 0, HG_CLR_FILL_BUY_RESTING),
                   HG_EINVAL); /* buyer has no open buy */
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 0, 2010, 0, 0), HG_EINVAL);
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 1, 0, 0, 0), HG_EINVAL);
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 1, 2010, 0, 8u), HG_EINVAL);
  assert_int_equal(hg_clearing_fill(c, INST, 1, 9, 1, 2010, 0, 0), HG_ENOTFOUND);
  assert_int_equal(hg_clearing_fill(c, 99, 1, 2, 1, 2010, 0, 0), HG_ENOTFOUND);
  assert_int_equal(hg_clearing_position(c, 1, INST, &p), 0);
  assert_int_equal(p.pos, 4);
  assert_int_equal(hg_clearing_position(c, 2, INST, &p), 0);
  assert_int_equal(p.pos, -4);
  assert_int_equal(p.open_sell, 6);
  /* a pair with no record reads as zero */
  assert_int_equal(hg_clearing_position(c, 1, INST2, &p), 0);
  assert_int_equal(p.pos, 0);
  assert_int_equal(hg_clearing_position(c, 3, INST2, &p), HG_ENOTFOUND);
  hg_clearing_instrument_info_t ii;
  assert_int_equal(hg_clearing_instrument_info(c, INST, &ii), 0);
  assert_int_equal(ii.open_interest, 4);
  hg_clearing_destroy(c);
}

static void open_quantities_are_tracked(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 1, 1), 0);
  assert_int_equal(hg_clearing_open_add(c, 1, INST, HG_CLR_BUY, 5), 0);
  assert_int_equal(hg_clearing_open_add(c, 1, INST, HG_CLR_BUY, 3), 0);
  assert_int_equal(hg_clearing_open_add(c, 1, INST, HG_CLR_SELL, 2), 0);
  assert_int_equal(hg_clearing_open_remove(c, 1, INST, HG_CLR_BUY, 6), 0);
  assert_int_equal(hg_clearing_open_remove(c, 1, INST, HG_CLR_SELL, 3), HG_EINVAL);
  assert_int_equal(hg_clearing_open_remove(c, 1, INST2, HG_CLR_SELL, 1), HG_EINVAL);
  assert_int_equal(hg_clearing_open_add(c, 1, INST, 2, 1), HG_EINVAL);
  assert_int_equal(hg_clearing_open_add(c, 1, INST, HG_CLR_BUY, 0), HG_EINVAL);
  assert_int_equal(hg_clearing_open_add(c, 5, INST, HG_CLR_BUY, 1), HG_ENOTFOUND);
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(c, 1, INST, &p), 0);
  assert_int_equal(p.open_buy, 2);
  assert_int_equal(p.open_sell, 2);
  hg_clearing_destroy(c);
}

static void position_pool_exhaustion_is_clean(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 2); /* two records in all */
  assert_int_equal(hg_clearing_account_add(c, 1, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, 2, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, 3, 1), 0);
  assert_int_equal(hg_clearing_deposit(c, 3, 1000 * USD, 1, 0), 0);
  assert_int_equal(hg_clearing_open_add(c, 1, INST, HG_CLR_BUY, 1), 0);
  /* a fill needing two new records (account 3 and 2) with one free fails whole */
  assert_int_equal(hg_clearing_fill(c, INST, 3, 2, 1, 2000, 0, 0), HG_EFULL);
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(c, 3, INST, &p), 0);
  assert_int_equal(p.pos, 0);
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 1, 2000, 0, HG_CLR_FILL_BUY_RESTING), 0);
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_check_order(c, 3, INST, HG_CLR_BUY, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_POSITIONS_FULL);
  assert_int_equal(hg_clearing_open_add(c, 3, INST, HG_CLR_BUY, 1), HG_EFULL);
  hg_clearing_destroy(c);
}

/* Section 1: reasons in their documented order, band and max order size. */
static void order_checks_band_and_size(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 1, 1), 0);
  assert_int_equal(hg_clearing_deposit(c, 1, 1000000 * USD, 1, 0), 0);
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 1, 2000, NULL), HG_EINVAL);
  assert_int_equal(hg_clearing_check_order(c, 9, INST, HG_CLR_BUY, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_UNKNOWN_ACCOUNT);
  assert_int_equal(hg_clearing_check_order(c, 1, 99, HG_CLR_BUY, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_UNKNOWN_INSTRUMENT);
  assert_int_equal(hg_clearing_check_order(c, 1, INST, 5, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INVALID_SIDE);
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 0, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INVALID_QTY);
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 1001, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_QTY_TOO_LARGE);
  assert_int_equal(r.limit, 1000);
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 1000, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 1, -1, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INVALID_PRICE);
  /* ref 2000, band 20%: [1600, 2400] inclusive */
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 1, 2400, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.band_low, 1600);
  assert_int_equal(r.band_high, 2400);
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 1, 2401, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_PRICE_BAND);
  assert_int_equal(r.ref_price, 2000);
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_SELL, 1, 1600, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_SELL, 1, 1599, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_PRICE_BAND);
  /* price 0 is a market order: no band */
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_SELL, 1, 0, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  /* no DSP and no fixing: no reference */
  hg_clearing_instrument_t in = {.id = 50, .group_id = 77, .year = 2027, .month = 9};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  assert_int_equal(hg_clearing_check_order(c, 1, 50, HG_CLR_SELL, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NO_REFERENCE);
  assert_string_equal(hg_clearing_reject_str(HG_CLR_REJ_NO_REFERENCE),
                      "no reference price (no settlement price, no fixing)");
  assert_string_equal(hg_clearing_reject_str(12345), "unknown reason");
  hg_clearing_destroy(c);
}

/* The band step alone (a replace that does not grow its order): the same
 * figures as check_order; no reference is not a refusal here. */
static void band_check_alone_matches_check_order(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_check_band(c, INST, 2400, NULL), HG_EINVAL);
  assert_int_equal(hg_clearing_check_band(c, 99, 2400, &r), HG_ENOTFOUND);
  /* ref 2000, band 20%: [1600, 2400] inclusive */
  assert_int_equal(hg_clearing_check_band(c, INST, 2400, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.ref_price, 2000);
  assert_int_equal(r.band_low, 1600);
  assert_int_equal(r.band_high, 2400);
  assert_int_equal(hg_clearing_check_band(c, INST, 2401, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_PRICE_BAND);
  assert_int_equal(hg_clearing_check_band(c, INST, 1599, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_PRICE_BAND);
  assert_int_equal(r.band_low, 1600);
  /* Every price around the band: the same verdict and figures as the full
   * check for an order that passes every other step. */
  assert_int_equal(hg_clearing_account_add(c, 1, 1), 0);
  assert_int_equal(hg_clearing_deposit(c, 1, 1000000 * USD, 1, 0), 0);
  for (hg_price_t px = 1500; px <= 2500; px++) {
    hg_clearing_result_t full;
    assert_int_equal(hg_clearing_check_band(c, INST, px, &r), 0);
    assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 1, px, &full), 0);
    assert_int_equal(r.reason, full.reason);
    assert_int_equal(r.ref_price, full.ref_price);
    assert_int_equal(r.band_low, full.band_low);
    assert_int_equal(r.band_high, full.band_high);
  }
  hg_clearing_instrument_t in = {.id = 50, .group_id = 77, .year = 2027, .month = 9};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  assert_int_equal(hg_clearing_check_band(c, 50, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.ref_price, 0);
  hg_clearing_destroy(c);

  /* A band over 100% (150%): ref 2000 * (1 - 1.5) < 0, so the low end is
   * the lowest price, 1; the high end 2000 * 2.5 = 5000. */
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  cfg.band_bps = 15000;
  c = make_cfg(&cfg, 3, 16);
  assert_int_equal(hg_clearing_check_band(c, INST, 5000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.band_low, 1);
  assert_int_equal(r.band_high, 5000);
  assert_int_equal(hg_clearing_check_band(c, INST, 5001, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_PRICE_BAND);
  hg_clearing_destroy(c);
}

/* Section 1 limits: 10,000 net; 1,000 in the delivery month; the worst case
 * counts every open order of the order's side plus the order. */
static void position_limits_count_the_worst_case(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 1, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, 2, 1), 0);
  assert_int_equal(hg_clearing_deposit(c, 1, 1000000000 * USD, 1, 0), 0);
  assert_int_equal(hg_clearing_deposit(c, 2, 1000000000 * USD, 1, 0), 0);
  /* account 1: long 9,000 and 500 open buys */
  for (int i = 0; i < 9; i++)
    assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 1000, 2000, 0, 0), 0);
  assert_int_equal(hg_clearing_open_add(c, 1, INST, HG_CLR_BUY, 500), 0);
  hg_clearing_result_t r;
  /* 9,000 + 500 + 500 = 10,000: at the limit, accepted */
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 500, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.position, 10000);
  /* 9,000 + 500 + 501 = 10,001 > 10,000: rejected with the numbers */
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_BUY, 501, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_POSITION_LIMIT);
  assert_int_equal(r.position, 10001);
  assert_int_equal(r.limit, 10000);
  /* sells only reduce: 9,000 - 1,000 = 8,000 */
  assert_int_equal(hg_clearing_check_order(c, 1, INST, HG_CLR_SELL, 1000, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.position, 8000);
  /* delivery month: limit 1,000. Account 2 is short 9,000 */
  assert_int_equal(hg_clearing_set_delivery(c, INST, 1), 0);
  assert_int_equal(hg_clearing_check_order(c, 2, INST, HG_CLR_SELL, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_POSITION_LIMIT);
  assert_int_equal(r.position, -9001);
  assert_int_equal(r.limit, 1000);
  /* ...but may buy back: -9,000 + 1,000 = -8,000 moves toward zero */
  assert_int_equal(hg_clearing_check_order(c, 2, INST, HG_CLR_BUY, 1000, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.position, -8000);
  /* account 1 in another contract: 0 + 1,000 open... then 1 more is 1,001 */
  assert_int_equal(hg_clearing_set_delivery(c, INST2, 1), 0);
  assert_int_equal(hg_clearing_open_add(c, 1, INST2, HG_CLR_SELL, 1000), 0);
  assert_int_equal(hg_clearing_check_order(c, 1, INST2, HG_CLR_SELL, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_POSITION_LIMIT);
  assert_int_equal(r.position, -1001);
  /* a buy is checked on the buy side: 0 + 0 + 1,000 */
  assert_int_equal(hg_clearing_check_order(c, 1, INST2, HG_CLR_BUY, 1000, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  hg_clearing_destroy(c);
}

/* The positions' own margin next to the initial margin (section 4.4), and an
 * open order that lowers the margin. Both contracts in one group, reference
 * 2000: 300 USD a contract. Long 10 + 10: L = 6,000, S = 0, IM = 6,000.
 * An open sell of 21 in INST turns its worst case to b = 10 - 21 = -11:
 * L = 3,000, S = 3,300, IM = 6,300 - floor(3,000 / 2) = 4,800: the open
 * orders add -1,200 USD. */
static void position_margin_leaves_orders_out(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 1, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, 2, 1), 0);
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 10, 2000, 0, 0), 0);
  assert_int_equal(hg_clearing_fill(c, INST2, 1, 2, 10, 2000, 0, 0), 0);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, 1, &ai), 0);
  assert_int_equal(ai.initial_margin, 6000 * USD);
  assert_int_equal(ai.position_margin, 6000 * USD);
  assert_int_equal(hg_clearing_open_add(c, 1, INST, HG_CLR_SELL, 21), 0);
  assert_int_equal(hg_clearing_account_info(c, 1, &ai), 0);
  assert_int_equal(ai.initial_margin, 4800 * USD);
  assert_int_equal(ai.position_margin, 6000 * USD);
  int64_t im = 0;
  assert_int_equal(hg_clearing_initial_margin(c, 1, &im), 0);
  assert_int_equal(im, 4800 * USD);
  hg_clearing_destroy(c);
}

static void withdrawal_respects_margin(void **state) {
  (void)state;
  hg_clearing_t *c = make(3, 16);
  assert_int_equal(hg_clearing_account_add(c, 1, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, 2, 1), 0);
  assert_int_equal(hg_clearing_deposit(c, 1, 1000 * USD, 1, 0), 0);
  /* long 1 at ref 2000: IM = 1 * 2000 * 1,000,000 * 1500 / 10000 = 300,000,000 */
  assert_int_equal(hg_clearing_fill(c, INST, 1, 2, 1, 2000, 0, 0), 0);
  hg_clearing_result_t r;
  /* 1,000 USD - 700.000001 USD - 300 USD < 0: rejected with the numbers */
  assert_int_equal(hg_clearing_withdraw(c, 1, 700 * USD + 1, 2, 0, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(r.equity, 1000 * USD);
  assert_int_equal(r.initial_margin, 300 * USD);
  assert_int_equal(r.amount, 700 * USD + 1);
  /* exactly to zero excess is allowed */
  assert_int_equal(hg_clearing_withdraw(c, 1, 700 * USD, 3, 0, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(hg_clearing_withdraw(c, 1, 0, 4, 0, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INVALID_AMOUNT);
  assert_int_equal(hg_clearing_withdraw(c, 77, 1, 4, 0, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_UNKNOWN_ACCOUNT);
  assert_int_equal(hg_clearing_withdraw(c, 1, 1, 4, 0, NULL), HG_EINVAL);
  hg_clearing_account_info_t ai;
  assert_int_equal(hg_clearing_account_info(c, 1, &ai), 0);
  assert_int_equal(ai.balance, 300 * USD);
  assert_int_equal(ai.initial_margin, 300 * USD);
  hg_clearing_totals_t t;
  hg_clearing_totals(c, &t);
  assert_int_equal(t.withdrawals, 700 * USD);
  assert_int_equal(t.balances, 300 * USD);
  hg_ledger_entry_t e;
  assert_int_equal(hg_clearing_ledger_get(c, 1, &e), 0);
  assert_int_equal(e.kind, HG_LEDGER_WITHDRAWAL);
  assert_int_equal(e.amount, -700 * USD);
  hg_clearing_destroy(c);
}

/* Records are created and freed (daily-cycle sweep) many times in a tiny
 * pool whose id map has 16 slots, so lookups cross deletions constantly. The
 * model: open buy quantity per (account, instrument). */
static void record_churn_keeps_lookups_right(void **state) {
  (void)state;
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  cfg.max_accounts = 4;
  cfg.max_instruments = 2;
  cfg.max_positions = 8;
  hg_clearing_t *c = NULL;
  assert_int_equal(hg_clearing_create(&cfg, &c), 0);
  for (uint32_t i = 0; i < 2; i++) {
    hg_clearing_instrument_t in = {.id = 40 + i, .group_id = 1, .year = 2027, .month = 3,
                                   .last_dsp = 2000};
    assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  }
  for (uint32_t a = 0; a < 4; a++) assert_int_equal(hg_clearing_account_add(c, 500 + a * 97, 1), 0);
  int64_t model[4][2] = {{0}};
  uint64_t x = 88172645463325252ull;
  for (int step = 0; step < 20000; step++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint32_t a = (uint32_t)(x % 4), i = (uint32_t)((x >> 8) % 2);
    hg_account_t id = 500 + a * 97;
    if ((x >> 16) % 5 == 0) {
      assert_int_equal(hg_clearing_daily_cycle(c, (uint64_t)step, 0, NULL, 0, NULL), 0);
    } else if (model[a][i] > 0 && (x >> 20) % 2) {
      assert_int_equal(hg_clearing_open_remove(c, id, 40 + i, HG_CLR_BUY, model[a][i]), 0);
      model[a][i] = 0;
    } else {
      assert_int_equal(hg_clearing_open_add(c, id, 40 + i, HG_CLR_BUY, 1), 0);
      model[a][i]++;
    }
    for (uint32_t b = 0; b < 4; b++)
      for (uint32_t j = 0; j < 2; j++) {
        hg_clearing_position_t p;
        assert_int_equal(hg_clearing_position(c, 500 + b * 97, 40 + j, &p), 0);
        assert_int_equal(p.open_buy, model[b][j]);
      }
  }
  hg_clearing_destroy(c);
}

/* Accounts and instruments are found through direct-indexed hints for ids
 * below 4 * capacity + 1024 and through the maps past that; both kinds must
 * resolve to the right slot on every path (queries, cash, order path). With
 * 8 accounts the account bound is 1056; with the default 64 instruments the
 * instrument bound is 1280. */
static int digest_write(void *ctx, const void *buf, size_t len) {
  uint64_t *h = ctx;
  for (size_t i = 0; i < len; i++) *h = (*h ^ ((const uint8_t *)buf)[i]) * 0x100000001b3ull;
  return 0;
}

/* FNV-1a over the clearing's canonical serialization. */
static uint64_t state_digest(const hg_clearing_t *c) {
  uint64_t h = 0xcbf29ce484222325ull;
  assert_int_equal(hg_clearing_serialize(c, digest_write, &h), 0);
  return h;
}

static void ids_resolve_on_both_sides_of_the_hint_bound(void **state) {
  (void)state;
  hg_clearing_t *c = make(8, 64);
  const hg_account_t accts[] = {1055, 1056, 5, 4000000000u, UINT32_MAX, 1};
  for (size_t i = 0; i < 6; i++) {
    assert_int_equal(hg_clearing_account_add(c, accts[i], (uint32_t)(i % 2) + 1), 0);
    assert_int_equal(hg_clearing_account_add(c, accts[i], 1), HG_EEXISTS);
    assert_int_equal(hg_clearing_deposit(c, accts[i], (int64_t)(i + 1) * 1000000 * USD, i + 1, 1), 0);
  }
  const hg_account_t absent[] = {0, 2, 1054, 1057, 4000000001u};
  for (size_t i = 0; i < 5; i++) {
    hg_clearing_account_info_t ai;
    assert_int_equal(hg_clearing_account_info(c, absent[i], &ai), HG_ENOTFOUND);
  }
  for (size_t i = 0; i < 6; i++) {
    hg_clearing_account_info_t ai;
    assert_int_equal(hg_clearing_account_info(c, accts[i], &ai), 0);
    assert_int_equal(ai.balance, (int64_t)(i + 1) * 1000000 * USD);
    assert_int_equal(ai.firm_id, (uint32_t)(i % 2) + 1);
  }
  const uint32_t insts[] = {1279, 1280, 99999};
  for (size_t i = 0; i < 3; i++) {
    hg_clearing_instrument_t in = {.id = insts[i], .group_id = GROUP, .year = 2027,
                                   .month = (uint8_t)(5 + i), .last_dsp = 3000 + (int64_t)i};
    assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
    assert_int_equal(hg_clearing_instrument_add(c, &in), HG_EEXISTS);
  }
  for (size_t i = 0; i < 3; i++) {
    hg_price_t ref = 0;
    assert_int_equal(hg_clearing_ref_price(c, insts[i], &ref), 0);
    assert_int_equal(ref, 3000 + (int64_t)i);
  }
  hg_price_t ref;
  assert_int_equal(hg_clearing_ref_price(c, 1278, &ref), HG_ENOTFOUND);
  assert_int_equal(hg_clearing_ref_price(c, 1281, &ref), HG_ENOTFOUND);
  /* Order path: a hinted buyer rests, an unhinted seller rests, they fill
   * on the unhinted instrument; then the reverse on the hinted one. */
  for (size_t k = 0; k < 2; k++) {
    uint32_t inst = k == 0 ? 1280 : 1279;
    hg_account_t buyer = k == 0 ? 1055 : 4000000000u, seller = k == 0 ? 1056 : 5;
    hg_clearing_result_t res;
    assert_int_equal(hg_clearing_check_order(c, buyer, inst, HG_CLR_BUY, 3, 3000, &res), 0);
    assert_int_equal(res.reason, 0);
    assert_int_equal(hg_clearing_open_add(c, buyer, inst, HG_CLR_BUY, 3), 0);
    assert_int_equal(hg_clearing_open_add(c, seller, inst, HG_CLR_SELL, 2), 0);
    assert_int_equal(hg_clearing_fill(c, inst, buyer, seller, 2, 3000, 5,
                                      HG_CLR_FILL_BUY_RESTING | HG_CLR_FILL_SELL_RESTING), 0);
    assert_int_equal(hg_clearing_open_remove(c, buyer, inst, HG_CLR_BUY, 1), 0);
    hg_clearing_position_t pb, ps;
    assert_int_equal(hg_clearing_position(c, buyer, inst, &pb), 0);
    assert_int_equal(hg_clearing_position(c, seller, inst, &ps), 0);
    assert_int_equal(pb.pos, 2);
    assert_int_equal(ps.pos, -2);
    assert_int_equal(pb.open_buy, 0);
    assert_int_equal(ps.open_sell, 0);
  }
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(c, 1055, 1279, &p), 0);
  assert_int_equal(p.pos, 0); /* nothing crossed into the other instrument */
  /* The prefetch hint, on hinted, unhinted and absent ids, changes nothing. */
  uint64_t before = state_digest(c);
  for (size_t i = 0; i < 6; i++) hg_clearing_prefetch_account(c, accts[i]);
  for (size_t i = 0; i < 5; i++) hg_clearing_prefetch_account(c, absent[i]);
  assert_int_equal(state_digest(c), before);
  hg_clearing_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_is_validated),
      cmocka_unit_test(accounts_and_firms_are_bounded),
      cmocka_unit_test(ids_resolve_on_both_sides_of_the_hint_bound),
      cmocka_unit_test(instruments_are_validated),
      cmocka_unit_test(deposits_post_ledger_entries),
      cmocka_unit_test(ledger_full_is_a_clean_error),
      cmocka_unit_test(fees_debit_without_margin_check),
      cmocka_unit_test(fills_move_positions_of_both_sides),
      cmocka_unit_test(open_quantities_are_tracked),
      cmocka_unit_test(position_pool_exhaustion_is_clean),
      cmocka_unit_test(order_checks_band_and_size),
      cmocka_unit_test(band_check_alone_matches_check_order),
      cmocka_unit_test(position_limits_count_the_worst_case),
      cmocka_unit_test(position_margin_leaves_orders_out),
      cmocka_unit_test(withdrawal_respects_margin),
      cmocka_unit_test(record_churn_keeps_lookups_right),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
