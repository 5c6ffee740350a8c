/* Property test: random fills between random accounts, deposits,
 * withdrawals, open orders, daily cycles and final settlements, checked
 * after every step against a naive model that keeps every fill:
 *  - total cash + fund == deposits - withdrawals, exactly (conservation);
 *    accounts the random fills leave negative go through the waterfall
 *    (CONTRACT.md 4.7), whose entries the model takes as posted;
 *  - variation margin sums to zero in every cycle, and every account's
 *    balance equals the model's pos_{t-1}(D_t - D_{t-1}) + sum q (D_t - p);
 *  - positions sum to zero per contract; final settlement closes them all;
 *  - mid-day, every third day, the state is replaced by its restored
 *    snapshot (which must serialize to the same bytes) and the run goes on.
 * argv[1] = number of seeds (default 20; the slow variant runs 5000). The
 * generator is a fixed-seed xorshift, so every run is reproducible. */
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

#define NACC 24
#define NINST 4
#define DAYS 25
#define MAXFILLS 4096
#define TV 1000000
#define D0 20500u

static unsigned g_seeds = 20;

typedef struct mfill {
  int acct;
  int inst;
  int64_t q; /* signed */
  int64_t p;
} mfill_t;

typedef struct model {
  int64_t pos[NACC][NINST];
  int64_t pos_prev[NACC][NINST];
  int64_t open_buy[NACC][NINST];
  int64_t open_sell[NACC][NINST];
  int64_t bal[NACC];
  int64_t dsp[NINST];
  int settled[NINST];
  mfill_t fills[MAXFILLS];
  int nfills;
  int64_t deposits, withdrawals;
} model_t;

static model_t m;

static void check_invariants(hg_clearing_t *c) {
  hg_clearing_totals_t t;
  hg_clearing_totals(c, &t);
  assert_int_equal(t.deposits, m.deposits);
  assert_int_equal(t.withdrawals, m.withdrawals);
  assert_int_equal(t.balances + t.fund, t.deposits - t.withdrawals);
  for (int i = 0; i < NINST; i++) {
    int64_t sum = 0;
    for (int a = 0; a < NACC; a++) {
      hg_clearing_position_t p;
      assert_int_equal(hg_clearing_position(c, (hg_account_t)(1000 + a), (uint32_t)(i + 1), &p),
                       0);
      assert_int_equal(p.pos, m.pos[a][i]);
      assert_int_equal(p.open_buy, m.open_buy[a][i]);
      assert_int_equal(p.open_sell, m.open_sell[a][i]);
      sum += p.pos;
    }
    assert_int_equal(sum, 0);
  }
  for (int a = 0; a < NACC; a++) {
    hg_clearing_account_info_t ai;
    assert_int_equal(hg_clearing_account_info(c, (hg_account_t)(1000 + a), &ai), 0);
    assert_int_equal(ai.balance, m.bal[a]);
  }
}

static void do_fill(hg_clearing_t *c, uint64_t ts) {
  int i = (int)rnd(0, NINST - 1);
  if (m.settled[i] || m.nfills + 2 > MAXFILLS) return;
  int b = (int)rnd(0, NACC - 1), s = (int)rnd(0, NACC - 1);
  int64_t q = rnd(1, 60);
  int64_t p = m.dsp[i] + rnd(-80, 80);
  unsigned flags = 0;
  if (m.open_buy[b][i] >= q && rnd(0, 1)) flags |= HG_CLR_FILL_BUY_RESTING;
  if (m.open_sell[s][i] >= q && rnd(0, 1)) flags |= HG_CLR_FILL_SELL_RESTING;
  assert_int_equal(hg_clearing_fill(c, (uint32_t)(i + 1), (hg_account_t)(1000 + b),
                                    (hg_account_t)(1000 + s), q, p, ts, flags),
                   0);
  m.pos[b][i] += q;
  m.pos[s][i] -= q;
  if (flags & HG_CLR_FILL_BUY_RESTING) m.open_buy[b][i] -= q;
  if (flags & HG_CLR_FILL_SELL_RESTING) m.open_sell[s][i] -= q;
  m.fills[m.nfills++] = (mfill_t){b, i, q, p};
  m.fills[m.nfills++] = (mfill_t){s, i, -q, p};
}

static void do_order(hg_clearing_t *c) {
  int a = (int)rnd(0, NACC - 1), i = (int)rnd(0, NINST - 1);
  int side = (int)rnd(0, 1);
  int64_t q = rnd(1, 40);
  hg_clearing_result_t r;
  assert_int_equal(hg_clearing_check_order(c, (hg_account_t)(1000 + a), (uint32_t)(i + 1), side,
                                           q, m.dsp[i], &r),
                   0);
  if (m.settled[i]) {
    assert_int_equal(r.reason, HG_CLR_REJ_INSTRUMENT_CLOSED);
    return;
  }
  /* the check and the reported numbers agree with each other */
  if (r.reason == HG_CLR_REJ_INSUFFICIENT_MARGIN) assert_true(r.equity < r.initial_margin);
  if (r.reason == HG_CLR_REJ_NONE) {
    assert_true(r.equity >= r.initial_margin);
    assert_int_equal(hg_clearing_open_add(c, (hg_account_t)(1000 + a), (uint32_t)(i + 1), side, q),
                     0);
    if (side == HG_CLR_BUY) m.open_buy[a][i] += q;
    else m.open_sell[a][i] += q;
  }
}

static void do_cancel(hg_clearing_t *c) {
  int a = (int)rnd(0, NACC - 1), i = (int)rnd(0, NINST - 1);
  int side = (int)rnd(0, 1);
  int64_t *open = side == HG_CLR_BUY ? &m.open_buy[a][i] : &m.open_sell[a][i];
  if (*open == 0) return;
  int64_t q = rnd(1, *open);
  assert_int_equal(
      hg_clearing_open_remove(c, (hg_account_t)(1000 + a), (uint32_t)(i + 1), side, q), 0);
  *open -= q;
}

static void do_cash(hg_clearing_t *c, uint64_t seq) {
  int a = (int)rnd(0, NACC - 1);
  int64_t amt = rnd(1, 50000) * 1000000;
  if (rnd(0, 2) == 0) {
    hg_clearing_result_t r;
    int64_t im;
    assert_int_equal(hg_clearing_initial_margin(c, (hg_account_t)(1000 + a), &im), 0);
    /* equity at the marks (the last DSPs here): cash plus today's fills
     * valued at the DSP (CONTRACT.md 4.7); only the lower of it and cash may
     * go, and not at all while called */
    int64_t eq = m.bal[a];
    for (int k = 0; k < m.nfills; k++)
      if (m.fills[k].acct == a) eq += m.fills[k].q * (m.dsp[m.fills[k].inst] - m.fills[k].p) * TV;
    hg_clearing_standing_t st;
    assert_int_equal(hg_clearing_standing(c, (hg_account_t)(1000 + a), &st), 0);
    assert_int_equal(st.equity, eq);
    assert_int_equal(hg_clearing_withdraw(c, (hg_account_t)(1000 + a), amt, seq, 0, &r), 0);
    if (eq > m.bal[a]) eq = m.bal[a];
    int ok = st.state == HG_CLR_OK && eq - amt - im >= 0;
    assert_int_equal(r.reason, ok                          ? HG_CLR_REJ_NONE
                               : st.state != HG_CLR_OK ? HG_CLR_REJ_MARGIN_CALL
                                                           : HG_CLR_REJ_INSUFFICIENT_MARGIN);
    if (ok) {
      m.bal[a] -= amt;
      m.withdrawals += amt;
    }
  } else {
    assert_int_equal(hg_clearing_deposit(c, (hg_account_t)(1000 + a), amt, seq, 0), 0);
    m.bal[a] += amt;
    m.deposits += amt;
  }
}

static void do_cycle(hg_clearing_t *c, unsigned day, uint64_t seq) {
  hg_clearing_top_t tops[NINST];
  size_t nt = 0;
  for (int i = 0; i < NINST; i++) {
    if (rnd(0, 1)) {
      int64_t bid = m.dsp[i] + rnd(-30, 30);
      tops[nt++] = (hg_clearing_top_t){(uint32_t)(i + 1), bid, bid + rnd(1, 14)};
    }
  }
  uint64_t before = hg_clearing_ledger_size(c);
  hg_clearing_cycle_report_t rep;
  assert_int_equal(hg_clearing_daily_cycle(c, seq, (uint64_t)day * HG_NS_PER_DAY +
                                                       (uint64_t)16 * 3600 * 1000000000u,
                                           tops, nt, &rep),
                   0);
  assert_int_equal(rep.vm_paid + rep.vm_received, 0);
  /* the posted entries sum to zero per instrument */
  int64_t sum[NINST] = {0}, wf_sum = 0;
  for (uint64_t k = before; k < hg_clearing_ledger_size(c); k++) {
    hg_ledger_entry_t e;
    assert_int_equal(hg_clearing_ledger_get(c, k, &e), 0);
    if (e.kind != HG_LEDGER_VM) {
      /* the waterfall (CONTRACT.md 4.7) of an account the random fills left
       * negative: it moves cash only, and the model takes it as posted */
      assert_true(e.kind == HG_LEDGER_FUND_COVER || e.kind == HG_LEDGER_SOCIALIZED);
      wf_sum += e.amount;
      if (e.account != HG_CLR_FUND_ACCOUNT) m.bal[e.account - 1000] += e.amount;
      continue;
    }
    sum[e.instrument - 1] += e.amount;
  }
  assert_int_equal(wf_sum, 0);
  for (int i = 0; i < NINST; i++) assert_int_equal(sum[i], 0);
  /* the naive model: every fill marked to the new DSP */
  int64_t newdsp[NINST];
  for (int i = 0; i < NINST; i++) {
    hg_clearing_instrument_info_t ii;
    assert_int_equal(hg_clearing_instrument_info(c, (uint32_t)(i + 1), &ii), 0);
    newdsp[i] = ii.inst.last_dsp;
    if (m.settled[i]) continue;
    for (int a = 0; a < NACC; a++) m.bal[a] += m.pos_prev[a][i] * (newdsp[i] - m.dsp[i]) * TV;
  }
  for (int k = 0; k < m.nfills; k++) {
    const mfill_t *f = &m.fills[k];
    m.bal[f->acct] += f->q * (newdsp[f->inst] - f->p) * TV;
  }
  m.nfills = 0;
  for (int i = 0; i < NINST; i++) {
    m.dsp[i] = newdsp[i];
    for (int a = 0; a < NACC; a++) m.pos_prev[a][i] = m.pos[a][i];
  }
}

static void do_final(hg_clearing_t *c, int i, uint64_t seq) {
  for (int a = 0; a < NACC; a++) {
    if (m.open_buy[a][i])
      assert_int_equal(hg_clearing_open_remove(c, (hg_account_t)(1000 + a), (uint32_t)(i + 1),
                                               HG_CLR_BUY, m.open_buy[a][i]),
                       0);
    if (m.open_sell[a][i])
      assert_int_equal(hg_clearing_open_remove(c, (hg_account_t)(1000 + a), (uint32_t)(i + 1),
                                               HG_CLR_SELL, m.open_sell[a][i]),
                       0);
    m.open_buy[a][i] = m.open_sell[a][i] = 0;
  }
  int64_t fsp = m.dsp[i] + rnd(-100, 100);
  uint64_t before = hg_clearing_ledger_size(c);
  assert_int_equal(hg_clearing_final_settle(c, (uint32_t)(i + 1), fsp, seq, 0), 0);
  int64_t sum = 0;
  for (uint64_t k = before; k < hg_clearing_ledger_size(c); k++) {
    hg_ledger_entry_t e;
    assert_int_equal(hg_clearing_ledger_get(c, k, &e), 0);
    assert_int_equal(e.kind, HG_LEDGER_FINAL);
    sum += e.amount;
  }
  assert_int_equal(sum, 0);
  for (int a = 0; a < NACC; a++) {
    m.bal[a] += m.pos[a][i] * (fsp - m.dsp[i]) * TV;
    m.pos[a][i] = m.pos_prev[a][i] = 0;
  }
  m.settled[i] = 1;
}

/* Replaces c by a copy restored from its snapshot, after checking that the
 * copy serializes to the same bytes. */
static hg_clearing_t *swap_for_restored(hg_clearing_t *c) {
  buf_t b1 = {0}, b2 = {0};
  assert_int_equal(hg_clearing_serialize(c, put, &b1), 0);
  hg_clearing_t *r = NULL;
  assert_int_equal(hg_clearing_restore(b1.p, b1.n, &r), 0);
  assert_int_equal(hg_clearing_serialize(r, put, &b2), 0);
  assert_int_equal(b1.n, b2.n);
  assert_memory_equal(b1.p, b2.p, b1.n);
  free(b1.p);
  free(b2.p);
  hg_clearing_destroy(c);
  return r;
}

static void one_seed(uint64_t seed) {
  memset(&m, 0, sizeof m);
  rng = seed * 0x9e3779b97f4a7c15ull + 1;
  hg_clearing_config_t cfg;
  hg_clearing_config_default(&cfg);
  cfg.ledger_initial = 16; /* exercise growth */
  cfg.max_accounts = NACC;
  cfg.max_instruments = NINST;
  cfg.max_groups = 2;
  cfg.max_firms = 4;
  cfg.max_positions = NACC * NINST;
  hg_clearing_t *c = NULL;
  assert_int_equal(hg_clearing_create(&cfg, &c), 0);
  for (int i = 0; i < NINST; i++) {
    m.dsp[i] = 2000 + 100 * i;
    hg_clearing_instrument_t in = {.id = (uint32_t)(i + 1), .group_id = (uint32_t)(i / 2),
                                   .year = 2027, .month = (uint8_t)(3 + i % 2),
                                   .in_delivery = (uint8_t)(i == 0), .last_dsp = m.dsp[i]};
    assert_int_equal(hg_clearing_instrument_add(c, &in), 0);
  }
  for (int a = 0; a < NACC; a++)
    assert_int_equal(hg_clearing_account_add(c, (hg_account_t)(1000 + a), (uint32_t)(a % 4)), 0);
  uint64_t seq = 1;
  for (unsigned d = 0; d < DAYS; d++) {
    unsigned day = D0 + d;
    int steps = (int)rnd(20, 200);
    for (int k = 0; k < steps; k++) {
      /* times across the day, some inside [15:55, 16:00) */
      uint64_t tod = rnd(0, 3) == 0 ? (uint64_t)rnd(57300, 57599) : (uint64_t)rnd(0, 57599);
      uint64_t ts = (uint64_t)day * HG_NS_PER_DAY + tod * 1000000000u;
      switch (rnd(0, 9)) {
      case 0: case 1: do_cash(c, seq++); break;
      case 2: case 3: do_order(c); break;
      case 4: do_cancel(c); break;
      default: do_fill(c, ts); break;
      }
      if (k % 16 == 0) check_invariants(c);
      if (k == steps / 2 && d % 3 == 0) c = swap_for_restored(c);
    }
    do_cycle(c, day, seq++);
    check_invariants(c);
    /* contracts expire in turn after day 10 */
    if (d >= 10 && d % 4 == 0) {
      int i = (int)((d - 10) / 4);
      if (i < NINST && !m.settled[i]) {
        do_final(c, i, seq++);
        check_invariants(c);
      }
    }
  }
  for (int i = 0; i < NINST; i++)
    if (!m.settled[i]) do_final(c, i, seq++);
  check_invariants(c);
  /* after final settlement every position is closed and cash is conserved */
  for (int a = 0; a < NACC; a++)
    for (int i = 0; i < NINST; i++) assert_int_equal(m.pos[a][i], 0);
  hg_clearing_destroy(c);
}

static void random_sessions_conserve_cash(void **state) {
  (void)state;
  for (unsigned s = 1; s <= g_seeds; s++) one_seed(s);
}

int main(int argc, char **argv) {
  if (argc > 1) g_seeds = (unsigned)strtoul(argv[1], NULL, 10);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_sessions_conserve_cash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
