/* Property test of the clearing guarantee: random price paths (drifting up,
 * with jumps) and order flow over many thinly funded accounts, marks,
 * liquidation slices against a deep-pocketed liquidity provider that is
 * present only some of the time, fees, deposits, withdrawals and daily
 * cycles interleaved. After every step:
 *  - balances + fund == deposits - withdrawals - fees (conservation);
 * after every mark round:
 *  - every account holding a position with E < MM is LIQUIDATING and has a
 *    slice in every contract it holds;
 * after every daily cycle:
 *  - no negative balance survives unless the cycle reports it uncovered;
 * and the whole run, replayed from the same seed, serializes to the same
 * bytes; a restored mid-run snapshot serializes to the same bytes.
 * argv[1] = number of seeds (default 12). */
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

#define NACC 40
#define NINST 2
#define DAYS 12
#define STEPS_PER_DAY 120
#define LP 1000u /* the liquidity provider */
#define D0 20500ull
#define NS 1000000000ull

static unsigned g_seeds = 12;


static void snap(const hg_clearing_t *c, buf_t *b) {
  b->n = 0;
  assert_int_equal(hg_clearing_serialize(c, put, b), 0);
}

static hg_price_t price[NINST];
static uint64_t seq;
static uint64_t stats_liq, stats_calls, stats_bankrupt;

static void check_marked(const hg_clearing_t *c) {
  hg_clearing_liq_slice_t sl[4 * NACC];
  size_t n;
  assert_int_equal(hg_clearing_liq_slices(c, sl, 4 * NACC, &n), 0);
  for (uint32_t a = 1; a <= NACC; a++) {
    hg_clearing_standing_t st;
    assert_int_equal(hg_clearing_standing(c, a, &st), 0);
    for (uint32_t i = 1; i <= NINST; i++) {
      hg_clearing_position_t p;
      assert_int_equal(hg_clearing_position(c, a, i, &p), 0);
      if (p.pos == 0 || st.equity >= st.mm) continue;
      assert_int_equal(st.state, HG_CLR_LIQUIDATING);
      int found = 0;
      for (size_t k = 0; k < n; k++)
        if (sl[k].account == a && sl[k].instrument == i) found = 1;
      assert_true(found);
    }
    if (st.state != HG_CLR_OK) stats_calls++;
  }
}

/* One mark round, then its slices, each filled by the provider when it is
 * there (70%) at a price between the mark and the slice's limit. */
static void mark_round(hg_clearing_t *c, uint64_t ts) {
  hg_clearing_top_t tops[NINST];
  for (int i = 0; i < NINST; i++)
    tops[i] = (hg_clearing_top_t){.instrument = (uint32_t)i + 1,
                                  .best_bid = price[i] - rnd(1, 3),
                                  .best_ask = price[i] + rnd(1, 3)};
  assert_int_equal(hg_clearing_mark(c, tops, NINST, NULL), 0);
  check_marked(c);
  hg_clearing_liq_slice_t sl[4 * NACC];
  size_t n;
  assert_int_equal(hg_clearing_liq_slices(c, sl, 4 * NACC, &n), 0);
  for (size_t k = 0; k < n; k++) {
    stats_liq++;
    if (rnd(0, 9) >= 7) continue; /* no liquidity this round */
    hg_price_t m;
    assert_int_equal(hg_clearing_mark_get(c, sl[k].instrument, &m, NULL), 0);
    hg_price_t lo = sl[k].side == HG_CLR_BUY ? m : sl[k].limit;
    hg_price_t hi = sl[k].side == HG_CLR_BUY ? sl[k].limit : m;
    hg_price_t p = rnd(lo, hi);
    hg_account_t buyer = sl[k].side == HG_CLR_BUY ? sl[k].account : LP;
    hg_account_t seller = sl[k].side == HG_CLR_BUY ? LP : sl[k].account;
    assert_int_equal(hg_clearing_liq_fill(c, sl[k].instrument, buyer, seller, sl[k].qty, p, 0,
                                          sl[k].side, ++seq, ts, NULL),
                     0);
    assert_true(hg_clearing_conserved(c));
  }
}

static void run(uint64_t seed, buf_t *out) {
  rng = seed * 0x9e3779b97f4a7c15ull | 1;
  seq = 0;
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  cfg.ledger_initial = 1024;
  hg_clearing_t *c = NULL;
  assert_int_equal(hg_clearing_create(&cfg, &c), 0);
  for (int i = 0; i < NINST; i++) {
    price[i] = 2000 + rnd(-100, 100);
    hg_clearing_instrument_t in = {.id = (uint32_t)i + 1, .group_id = 1, .year = 2027,
                                   .month = (uint8_t)(3 + i), .last_dsp = price[i]};
    assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  }
  assert_int_equal(hg_clearing_account_add(c, LP, 99), 0);
  assert_int_equal(hg_clearing_deposit(c, LP, (int64_t)1 << 50, ++seq, D0 * 86400 * NS), 0);
  assert_int_equal(hg_clearing_fund_deposit(c, rnd(1, 3) * 1000000000, ++seq, D0 * 86400 * NS),
                   0);
  for (uint32_t a = 1; a <= NACC; a++) {
    assert_int_equal(hg_clearing_account_add(c, a, a % 5), 0);
    assert_int_equal(hg_clearing_deposit(c, a, rnd(3, 40) * 1000000000, ++seq,
                                         D0 * 86400 * NS),
                     0);
  }
  for (uint64_t day = D0; day < D0 + DAYS; day++) {
    for (int step = 0; step < STEPS_PER_DAY; step++) {
      uint64_t ts = day * 86400 * NS + (uint64_t)(8 * 3600 + step * 60) * NS;
      int i = (int)rnd(0, NINST - 1);
      /* the path: drift up, sometimes a jump, within 15% of the last DSP */
      hg_price_t ref;
      assert_int_equal(hg_clearing_ref_price(c, (uint32_t)i + 1, &ref), 0);
      price[i] += rnd(-3, 5) + (rnd(0, 40) == 0 ? rnd(20, 120) : 0);
      if (price[i] > ref * 115 / 100) price[i] = ref * 115 / 100;
      if (price[i] < ref * 85 / 100) price[i] = ref * 85 / 100;
      int what = (int)rnd(0, 19);
      if (what < 12) { /* an order against the provider, checked */
        hg_account_t a = (hg_account_t)rnd(1, NACC);
        int side = (int)rnd(0, 1);
        int64_t q = rnd(1, 15);
        hg_clearing_result_t r;
        assert_int_equal(hg_clearing_check_order(c, a, (uint32_t)i + 1, side, q, price[i], &r),
                         0);
        if (r.reason == HG_CLR_REJ_NONE)
          assert_int_equal(hg_clearing_fill(c, (uint32_t)i + 1, side == HG_CLR_BUY ? a : LP,
                                            side == HG_CLR_BUY ? LP : a, q, price[i], ts, 0),
                           0);
        else
          assert_true(r.reason == HG_CLR_REJ_INSUFFICIENT_MARGIN ||
                      r.reason == HG_CLR_REJ_MARGIN_CALL || r.reason == HG_CLR_REJ_PRICE_BAND);
      } else if (what < 14) {
        assert_int_equal(
            hg_clearing_deposit(c, (hg_account_t)rnd(1, NACC), rnd(1, 5) * 1000000000, ++seq, ts),
            0);
      } else if (what < 16) {
        hg_clearing_result_t r;
        assert_int_equal(hg_clearing_withdraw(c, (hg_account_t)rnd(1, NACC),
                                              rnd(1, 5) * 1000000000, ++seq, ts, &r),
                         0);
      } else if (what < 17) {
        assert_int_equal(hg_clearing_fee(c, (hg_account_t)rnd(1, NACC), HG_CLR_NO_INSTRUMENT,
                                         rnd(1, 50) * 1000000, ++seq, ts),
                         0);
      } else {
        mark_round(c, ts);
      }
      assert_true(hg_clearing_conserved(c));
      if (step == STEPS_PER_DAY / 2 && day % 3 == 0) { /* restore mid-run */
        buf_t a = {0}, b = {0};
        snap(c, &a);
        hg_clearing_t *r = NULL;
        assert_int_equal(hg_clearing_restore(a.p, a.n, &r), 0);
        snap(r, &b);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.p, b.p, a.n);
        hg_clearing_destroy(c);
        c = r;
        free(a.p);
        free(b.p);
      }
    }
    hg_clearing_top_t tops[NINST];
    for (int i = 0; i < NINST; i++)
      tops[i] = (hg_clearing_top_t){.instrument = (uint32_t)i + 1, .best_bid = price[i] - 1,
                                    .best_ask = price[i] + 1};
    hg_clearing_cycle_report_t rep;
    assert_int_equal(
        hg_clearing_daily_cycle(c, ++seq, day * 86400 * NS + 16 * 3600 * NS, tops, NINST, &rep),
        0);
    assert_true(hg_clearing_conserved(c));
    stats_bankrupt += rep.bankrupt;
    if (rep.uncovered == 0)
      for (uint32_t a = 1; a <= NACC; a++) {
        hg_clearing_account_info_t ai;
        assert_int_equal(hg_clearing_account_info(c, a, &ai), 0);
        assert_true(ai.balance >= 0);
      }
  }
  snap(c, out);
  hg_clearing_destroy(c);
}

static void guarantee_holds_on_random_paths(void **state) {
  (void)state;
  for (unsigned s = 1; s <= g_seeds; s++) {
    buf_t a = {0}, b = {0};
    run(s, &a);
    run(s, &b); /* replay: the same calls give the same state, byte for byte */
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.p, b.p, a.n);
    free(a.p);
    free(b.p);
  }
  /* the paths must exercise the rules, not just pass by them */
  assert_true(stats_liq > 0);
  assert_true(stats_calls > 0);
  assert_true(stats_bankrupt > 0);
}

int main(int argc, char **argv) {
  if (argc > 1) g_seeds = (unsigned)strtoul(argv[1], NULL, 10);
  const struct CMUnitTest tests[] = {cmocka_unit_test(guarantee_holds_on_random_paths)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
