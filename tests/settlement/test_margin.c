/* Initial margin, settlement/CONTRACT.md section 4.4, every number computed
 * by hand:
 *   margin(contract) = ceil(|w| * ref * TV * rate / 10000)
 *   w = a or b (a = pos + open buy, b = pos - open sell), larger |.|, a on tie
 *   per group IM = L + S - floor(min(L, S) / 2)
 * TV = 1,000,000 micro-USD unless stated; rate 1500 bps, 2000 in delivery. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hourglass/clearing.h"
#include "hourglass/error.h"

#define X 1u /* group 1, DSP 2000 */
#define Y 2u /* group 1, DSP 2500 (next month) */
#define Z 3u /* group 2, DSP 2000 */
#define T 4u /* group 3, DSP 2001, TV 1 micro-USD */
#define U 5u /* group 3, DSP 2003, TV 1 micro-USD */
#define F 6u /* group 4, no DSP: reference from the index fixing */
#define ACC 10u
#define CPTY 99u

static hg_clearing_t *c;

static void add(uint32_t id, uint32_t group, uint8_t month, int64_t dsp, int64_t tv) {
  hg_clearing_instrument_t in = {.id = id, .group_id = group, .year = 2027, .month = month,
                                 .last_dsp = dsp, .tick_value = tv};
  assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
}

static int setup(void **state) {
  (void)state;
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  if (hg_clearing_create(&cfg, &c) != 0) return -1;
  add(X, 1, 3, 2000, 0);
  add(Y, 1, 4, 2500, 0);
  add(Z, 2, 3, 2000, 0);
  add(T, 3, 3, 2001, 1);
  add(U, 3, 4, 2003, 1);
  add(F, 4, 3, 0, 0);
  assert_int_equal(hg_clearing_account_add(c, ACC, 1), 0);
  assert_int_equal(hg_clearing_account_add(c, CPTY, 1), 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  hg_clearing_destroy(c);
  c = NULL;
  return 0;
}

static int64_t im(void) {
  int64_t v = -1;
  assert_int_equal(hg_clearing_initial_margin(c, ACC, &v), 0);
  return v;
}

/* ACC buys q (q > 0) or sells -q from the counterparty at price p. */
static void trade(uint32_t inst, int64_t q, int64_t p) {
  if (q > 0) assert_int_equal(hg_clearing_fill(c, inst, ACC, CPTY, q, p, 0, 0), 0);
  else assert_int_equal(hg_clearing_fill(c, inst, CPTY, ACC, -q, p, 0, 0), 0);
}

static void single_contract_and_delivery_rate(void **state) {
  (void)state;
  assert_int_equal(im(), 0);
  trade(X, 3, 1990); /* fill price does not matter: ref is the DSP */
  /* 3 * 2000 * 1,000,000 * 1500 / 10000 = 900,000,000 */
  assert_int_equal(im(), 900000000);
  assert_int_equal(hg_clearing_set_delivery(c, X, 1), 0);
  /* 3 * 2000 * 1,000,000 * 2000 / 10000 = 1,200,000,000 */
  assert_int_equal(im(), 1200000000);
  int64_t v;
  assert_int_equal(hg_clearing_initial_margin(c, 12345, &v), HG_ENOTFOUND);
}

static void open_orders_pick_the_worst_side(void **state) {
  (void)state;
  trade(X, 2, 2000);
  assert_int_equal(hg_clearing_open_add(c, ACC, X, HG_CLR_BUY, 3), 0);
  assert_int_equal(hg_clearing_open_add(c, ACC, X, HG_CLR_SELL, 10), 0);
  /* a = 2 + 3 = 5, b = 2 - 10 = -8: w = -8 -> 8 * 2000 * 1e6 * 0.15 = 2,400,000,000 */
  assert_int_equal(im(), 2400000000);
  assert_int_equal(hg_clearing_open_remove(c, ACC, X, HG_CLR_SELL, 6), 0);
  /* a = 5, b = 2 - 4 = -2: w = 5 -> 1,500,000,000 */
  assert_int_equal(im(), 1500000000);
}

static void calendar_spread_gets_half_credit(void **state) {
  (void)state;
  trade(X, 4, 2000);
  trade(Y, -2, 2500);
  /* L = 4 * 2000 * 1e6 * 0.15 = 1,200,000,000; S = 2 * 2500 * 1e6 * 0.15 =
   * 750,000,000; IM = 1,950,000,000 - floor(750,000,000 / 2) = 1,575,000,000 */
  assert_int_equal(im(), 1575000000);
  /* another group offsets nothing: short 1 Z adds 300,000,000 in full */
  trade(Z, -1, 2000);
  assert_int_equal(im(), 1875000000);
}

static void tie_takes_a(void **state) {
  (void)state;
  /* X: pos 0, open buy 5, open sell 5: a = 5, b = -5, tie -> w = +5 (L) */
  assert_int_equal(hg_clearing_open_add(c, ACC, X, HG_CLR_BUY, 5), 0);
  assert_int_equal(hg_clearing_open_add(c, ACC, X, HG_CLR_SELL, 5), 0);
  /* Y: short 4 (S) at 2500: 4 * 2500 * 1e6 * 0.15 = 1,500,000,000 */
  trade(Y, -4, 2500);
  /* L = 5 * 2000 * 1e6 * 0.15 = 1,500,000,000, S = 1,500,000,000:
   * IM = 3,000,000,000 - 750,000,000 = 2,250,000,000. Had the tie taken b,
   * both would be short (S = 3e9, L = 0) and IM would be 3,000,000,000. */
  assert_int_equal(im(), 2250000000);
}

static void rounding_up_per_contract_floor_on_credit(void **state) {
  (void)state;
  trade(T, 1, 2001);
  /* TV = 1: 1 * 2001 * 1 * 1500 / 10000 = 300.15 -> 301 (rounded up) */
  assert_int_equal(im(), 301);
  trade(U, -1, 2003);
  /* S = 2003 * 0.15 = 300.45 -> 301; IM = 301 + 301 - floor(301 / 2) = 452 */
  assert_int_equal(im(), 452);
}

static void reference_from_fixing_without_dsp(void **state) {
  (void)state;
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_check_order(c, ACC, F, HG_CLR_BUY, 1, 2500, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NO_REFERENCE);
  /* 2,500,400 micro-USD -> 2500.4 ticks -> 2500 */
  assert_int_equal(hg_clearing_set_fixing(c, 4, 2500400, 0), 0);
  trade(F, 2, 2500);
  /* 2 * 2500 * 1e6 * 0.15 = 750,000,000 */
  assert_int_equal(im(), 750000000);
}

/* Pre-trade: equity - IM (order counted as open) >= 0. */
static void order_accepted_only_with_enough_equity(void **state) {
  (void)state;
  hg_clearing_result_t r;
  /* buy 10 X: IM = 10 * 2000 * 1e6 * 0.15 = 3,000,000,000 */
  assert_int_equal(hg_clearing_deposit(c, ACC, 3000000000 - 1, 1, 0), 0);
  assert_int_equal(hg_clearing_check_order(c, ACC, X, HG_CLR_BUY, 10, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(r.equity, 2999999999);
  assert_int_equal(r.initial_margin, 3000000000);
  assert_int_equal(hg_clearing_deposit(c, ACC, 1, 2, 0), 0);
  assert_int_equal(hg_clearing_check_order(c, ACC, X, HG_CLR_BUY, 10, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.initial_margin, 3000000000);
  assert_int_equal(hg_clearing_open_add(c, ACC, X, HG_CLR_BUY, 10), 0);
  /* one more buy: a = 11 -> 3,300,000,000 > 3e9 */
  assert_int_equal(hg_clearing_check_order(c, ACC, X, HG_CLR_BUY, 1, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(r.initial_margin, 3300000000);
  /* a sell of 4: a = 10, b = -4, w = 10: IM unchanged, accepted */
  assert_int_equal(hg_clearing_check_order(c, ACC, X, HG_CLR_SELL, 4, 2000, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  assert_int_equal(r.initial_margin, 3000000000);
  /* selling 12 of the next month is a calendar spread: L = 3e9, S = 12 * 2500
   * * 1e6 * 0.15 = 4.5e9; IM = 7.5e9 - 1.5e9 = 6e9 > 3e9: rejected */
  assert_int_equal(hg_clearing_check_order(c, ACC, Y, HG_CLR_SELL, 12, 2500, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(r.initial_margin, 6000000000);
  /* selling 4 Y: S = 1.5e9, IM = 4.5e9 - 0.75e9 = 3.75e9 > 3e9: rejected;
   * after a deposit of 0.75e9 it fits exactly (without the credit it would
   * need 4.5e9) */
  assert_int_equal(hg_clearing_check_order(c, ACC, Y, HG_CLR_SELL, 4, 2500, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(r.initial_margin, 3750000000);
  assert_int_equal(hg_clearing_deposit(c, ACC, 750000000, 3, 0), 0);
  assert_int_equal(hg_clearing_check_order(c, ACC, Y, HG_CLR_SELL, 4, 2500, &r), 0);
  assert_int_equal(r.reason, HG_CLR_REJ_NONE);
  /* the check itself changes no open quantity */
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(c, ACC, Y, &p), 0);
  assert_int_equal(p.open_sell, 0);
  assert_int_equal(im(), 3000000000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(single_contract_and_delivery_rate, setup, teardown),
      cmocka_unit_test_setup_teardown(open_orders_pick_the_worst_side, setup, teardown),
      cmocka_unit_test_setup_teardown(calendar_spread_gets_half_credit, setup, teardown),
      cmocka_unit_test_setup_teardown(tie_takes_a, setup, teardown),
      cmocka_unit_test_setup_teardown(rounding_up_per_contract_floor_on_credit, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(reference_from_fixing_without_dsp, setup, teardown),
      cmocka_unit_test_setup_teardown(order_accepted_only_with_enough_equity, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
