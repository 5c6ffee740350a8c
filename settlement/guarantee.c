/*
 * The clearing guarantee (settlement/CONTRACT.md sections 4.6 and 4.7):
 * marks, equity at the marks, maintenance margin, margin calls, the
 * liquidation slices of a mark round, and the insurance fund. The waterfall
 * itself runs inside the daily cycle (settle.c), the liquidation fee inside
 * hg_clearing_liq_fill (clearing.c), because both post cash in the
 * all-or-nothing style of their callers.
 *
 * State. Each account keeps its standing (OK, CALLED, LIQUIDATING with a
 * reason), the call amount of its last evaluation and the cycle count its
 * call is due at; each instrument keeps its last mark and last trade price.
 * Nothing else is stored: E, IM at the marks and MM are recomputed from the
 * position records whenever they are needed, in one walk of the account's
 * records, so they can never drift from the positions.
 *
 * Only a mark round or a daily cycle opens a call or starts a liquidation
 * (hg_clr__evaluate). Deposits and fills in between only improve a standing
 * (hg_clr__improve), so an account's standing never worsens because of a
 * command it did not see coming, and the fill path of an account in good
 * standing pays one flag test.
 */
#include <string.h>

#include "clearing_int.h"
#include "hourglass/error.h"

static int64_t sat(i128 v) {
  return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

/* Band edges around p (> 0): lo = ceil(p (10000 - bps) / 10000) >= 1,
 * hi = floor(p (10000 + bps) / 10000). */
static void band_edges(hg_price_t p, uint32_t bps, hg_price_t *lo, hg_price_t *hi) {
  i128 l = ((i128)p * (10000 - (int64_t)bps) + 9999) / 10000;
  *lo = l < 1 ? 1 : (hg_price_t)l;
  *hi = (hg_price_t)((i128)p * (10000 + (int64_t)bps) / 10000);
}

int hg_clearing_mark_compute(hg_price_t ref, hg_price_t bid, hg_price_t ask, hg_price_t last,
                             uint32_t band_bps, hg_price_t *mark) {
  if (mark == NULL || ref <= 0 || ref > HG_CLR_PRICE_MAX || bid < 0 || bid > HG_CLR_PRICE_MAX ||
      ask < 0 || ask > HG_CLR_PRICE_MAX || last < 0 || last > HG_CLR_PRICE_MAX ||
      band_bps > 10000)
    return HG_EINVAL;
  hg_price_t lo = 1, hi = HG_CLR_PRICE_MAX;
  if (band_bps > 0) band_edges(ref, band_bps, &lo, &hi);
  hg_price_t m;
  if (bid > 0 && ask > 0 && bid >= lo && ask <= hi && bid <= hi && ask >= lo)
    m = (hg_price_t)(((i128)bid + ask + 1) / 2);
  else if (last > 0)
    m = last;
  else
    m = ref;
  if (m < lo) m = lo;
  if (m > hi) m = hi;
  *mark = m;
  return 0;
}

/* ------------------------------------------------------ evaluation -- */

i128 hg_clr__equity(const hg_clearing_t *c, uint32_t s, int *has_pos) {
  const account_t *a = &c->accounts[s];
  i128 e = 0;
  int any = 0;
  for (uint32_t r = a->rec_head; r != NIL32; r = c->recs[r].a_next) {
    const posrec_t *p = &c->recs[r];
    if (p->pos != 0) any = 1;
    if (p->pos_prev == 0 && !p->fills) continue;
    const instrument_t *in = &c->insts[p->inst];
    hg_price_t m = in->mark > 0 ? in->mark : hg_clr__ref_price(c, in);
    if (m == 0) continue; /* no price at all: no order could have traded */
    /* the VM formula with the mark in place of DSP_t */
    i128 inner = (i128)p->pos_prev * (m - in->def.last_dsp) + (i128)p->day_q * m - p->day_qp;
    e += inner * hg_clr__tv(c, in);
  }
  if (has_pos != NULL) *has_pos = any;
  return e + a->balance;
}

/* E, IM_M and MM of account slot s. */
static void eval_figures(const hg_clearing_t *c, uint32_t s, i128 *e, i128 *im, i128 *mm,
                         int *has_pos) {
  *e = hg_clr__equity(c, s, has_pos);
  /* the margin scratch is restored to zero: logically const */
  *im = hg_clr__account_im((hg_clearing_t *)c, s, 1);
  *mm = (*im * c->cfg.mm_rate_bps + 9999) / 10000;
}

static void set_ok(account_t *a) {
  a->state = HG_CLR_OK;
  a->liq_reason = 0;
  a->call_amount = 0;
  a->call_due = 0;
}

void hg_clr__evaluate(hg_clearing_t *c, uint32_t s, int deadline, hg_clearing_mark_report_t *rep) {
  account_t *a = &c->accounts[s];
  i128 e, im, mm;
  int has_pos;
  eval_figures(c, s, &e, &im, &mm, &has_pos);
  if (!has_pos || e >= im) {
    set_ok(a);
    if (has_pos && rep != NULL) rep->accounts_evaluated++;
    return;
  }
  uint8_t before = a->state;
  if (a->state == HG_CLR_OK) {
    a->call_due = c->ncycles + c->cfg.call_cycles;
    if (rep != NULL) rep->new_calls++;
  }
  a->call_amount = sat(im - e);
  if (e < mm) {
    if (!(a->state == HG_CLR_LIQUIDATING && a->liq_reason == HG_CLR_LIQ_DEADLINE))
      a->liq_reason = HG_CLR_LIQ_MM;
    a->state = HG_CLR_LIQUIDATING;
  } else if (!(a->state == HG_CLR_LIQUIDATING && a->liq_reason == HG_CLR_LIQ_DEADLINE)) {
    a->state = HG_CLR_CALLED;
    a->liq_reason = 0;
  }
  if (deadline && a->call_due <= c->ncycles) {
    a->state = HG_CLR_LIQUIDATING;
    a->liq_reason = HG_CLR_LIQ_DEADLINE;
  }
  if (rep != NULL) {
    rep->accounts_evaluated++;
    if (a->state == HG_CLR_CALLED) rep->called++;
    else rep->liquidating++;
    if (a->state == HG_CLR_LIQUIDATING && before != HG_CLR_LIQUIDATING) rep->new_liquidations++;
  }
}

void hg_clr__improve(hg_clearing_t *c, uint32_t s) {
  account_t *a = &c->accounts[s];
  if (a->state == HG_CLR_OK) return;
  i128 e, im, mm;
  int has_pos;
  eval_figures(c, s, &e, &im, &mm, &has_pos);
  if (!has_pos || e >= im) {
    set_ok(a);
    return;
  }
  a->call_amount = sat(im - e);
  if (a->state == HG_CLR_LIQUIDATING && a->liq_reason == HG_CLR_LIQ_MM && e >= mm) {
    a->state = HG_CLR_CALLED;
    a->liq_reason = 0;
  }
}

void hg_clr__evaluate_all(hg_clearing_t *c, int deadline, hg_clearing_mark_report_t *rep) {
  for (uint32_t i = 0; i < c->naccounts; i++) {
    if (c->accounts[i].nrec == 0 && c->accounts[i].state == HG_CLR_OK) continue;
    hg_clr__evaluate(c, i, deadline, rep);
  }
}

/* ------------------------------------------------------- mark round -- */

int hg_clearing_mark(hg_clearing_t *c, const hg_clearing_top_t *tops, size_t ntops,
                     hg_clearing_mark_report_t *rep) {
  int rc = hg_clr__load_tops(c, tops, ntops);
  if (rc < 0) return rc;
  hg_clearing_mark_report_t local;
  if (rep == NULL) rep = &local;
  memset(rep, 0, sizeof *rep);
  for (uint32_t k = 0; k < c->ninst_order; k++) {
    uint32_t s = c->inst_order[k];
    instrument_t *in = &c->insts[s];
    hg_price_t ref = hg_clr__ref_price(c, in);
    if (in->settled || ref <= 0) continue;
    hg_price_t m;
    if (hg_clearing_mark_compute(ref, c->top_bid[s], c->top_ask[s], in->last_trade,
                                 c->cfg.band_bps, &m) != 0)
      continue; /* inputs are validated above and on every fill */
    in->mark = m;
    rep->instruments_marked++;
  }
  hg_clr__evaluate_all(c, 0, rep);
  return 0;
}

int hg_clearing_mark_get(const hg_clearing_t *c, uint32_t instrument, hg_price_t *mark,
                         hg_price_t *last_trade) {
  uint32_t s = hg_clr__inst_slot(c, instrument);
  if (s == NIL32) return HG_ENOTFOUND;
  if (mark != NULL) *mark = c->insts[s].mark;
  if (last_trade != NULL) *last_trade = c->insts[s].last_trade;
  return 0;
}

int hg_clearing_standing(const hg_clearing_t *c, hg_account_t account,
                         hg_clearing_standing_t *out) {
  uint32_t s = hg_clr__acct_slot(c, account);
  if (s == NIL32) return HG_ENOTFOUND;
  const account_t *a = &c->accounts[s];
  i128 e, im, mm;
  int has_pos;
  eval_figures(c, s, &e, &im, &mm, &has_pos);
  memset(out, 0, sizeof *out);
  out->state = a->state;
  out->liq_reason = a->liq_reason;
  out->equity = sat(e);
  out->im = sat(im);
  out->mm = sat(mm);
  out->call_amount = a->call_amount;
  out->call_due = a->call_due;
  return 0;
}

int hg_clearing_liq_slices(const hg_clearing_t *c, hg_clearing_liq_slice_t *out, size_t cap,
                           size_t *n) {
  if (n == NULL || (out == NULL && cap > 0)) return HG_EINVAL;
  size_t count = 0;
  for (uint32_t i = 0; i < c->naccounts; i++) {
    const account_t *a = &c->accounts[i];
    if (a->state != HG_CLR_LIQUIDATING) continue;
    for (uint32_t r = a->rec_head; r != NIL32; r = c->recs[r].a_next) {
      const posrec_t *p = &c->recs[r];
      const instrument_t *in = &c->insts[p->inst];
      if (p->pos == 0 || in->settled) continue;
      hg_price_t m = in->mark > 0 ? in->mark : hg_clr__ref_price(c, in);
      if (m <= 0) continue;
      if (count < cap) {
        hg_clearing_liq_slice_t *sl = &out[count];
        int64_t apos = p->pos < 0 ? -p->pos : p->pos;
        sl->account = a->id;
        sl->instrument = in->def.id;
        sl->side = p->pos > 0 ? HG_CLR_SELL : HG_CLR_BUY;
        sl->qty = apos < c->cfg.liq_slice_qty ? apos : c->cfg.liq_slice_qty;
        sl->limit = 0;
        if (c->cfg.band_bps > 0) {
          hg_price_t lo, hi;
          band_edges(m, c->cfg.band_bps, &lo, &hi);
          if (hi > HG_CLR_PRICE_MAX) hi = HG_CLR_PRICE_MAX;
          sl->limit = sl->side == HG_CLR_SELL ? lo : hi;
        }
      }
      count++;
    }
  }
  *n = count;
  return count > cap ? HG_ERANGE : 0;
}

/* ------------------------------------------------------------- fund -- */

int hg_clearing_fund_deposit(hg_clearing_t *c, int64_t amount, uint64_t seq, uint64_t ts) {
  if (amount <= 0) return HG_EINVAL;
  int64_t nf, nt, nd;
  if (__builtin_add_overflow(c->fund, amount, &nf) ||
      __builtin_add_overflow(c->tot_deposits, amount, &nt) ||
      __builtin_add_overflow(c->g_fund_deposits, amount, &nd))
    return HG_EOVERFLOW;
  int rc = hg_clr__ledger_reserve(c, 1);
  if (rc < 0) return rc;
  hg_clr__post_fund(c, HG_LEDGER_FUND_DEPOSIT, HG_CLR_NO_INSTRUMENT, amount, 0, 0, seq, ts);
  c->tot_deposits = nt;
  c->g_fund_deposits = nd;
  return 0;
}

void hg_clearing_guarantee(const hg_clearing_t *c, hg_clearing_guarantee_t *out) {
  memset(out, 0, sizeof *out);
  out->fund = c->fund;
  out->fund_deposits = c->g_fund_deposits;
  out->liq_fees = c->g_liq_fees;
  out->fund_used = c->g_fund_used;
  out->socialized = c->g_socialized;
  out->uncovered = c->g_uncovered;
  out->bankruptcies = c->g_bankruptcies;
  out->cycles = c->ncycles;
  for (uint32_t i = 0; i < c->naccounts; i++) {
    if (c->accounts[i].state == HG_CLR_CALLED) out->called++;
    else if (c->accounts[i].state == HG_CLR_LIQUIDATING) out->liquidating++;
  }
}
