/*
 * Canonical serialization of the clearing state, and restore.
 *
 * The blob is a sequence of little-endian fixed-width integers written field
 * by field (never a struct image), in the state's canonical orders: accounts
 * and groups in registration order, instruments in registration order each
 * followed by its position records in list order, then the whole ledger. The
 * same state therefore always gives the same bytes, which makes the blob
 * usable for a state hash. Internal slots, map layouts, scratch fields and
 * totals (recomputed from the ledger) are not written.
 *
 * Restore trusts nothing: it rebuilds the state through the same code paths
 * as live calls, replays the ledger to recompute every balance and total,
 * and checks the invariants (positions and today's sums add up to zero per
 * instrument, day_q = pos - pos_prev, balances and the fund agree with the
 * ledger, the fund's totals agree with its entries).
 *
 * Version 2 adds, after the version 1 configuration: mm_rate_bps,
 * liq_fee_bps, liq_slice_qty, call_cycles; after each account's balance:
 * state, liq_reason, call_due, call_amount; after each instrument's window
 * sums: mark, last_trade; after the ledger: fund, the waterfall totals,
 * bankruptcies, cycles. A version 1 blob restores with the defaults and
 * nothing called, marked or funded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clearing_int.h"
#include "hourglass/bytes.h"
#include "hourglass/error.h"

#define SNAP_MAGIC 0x4c434748u /* "HGCL" little-endian */
#define SNAP_END 0x444e4547u   /* "GEND" */
#define SNAP_VERSION 2u /* 2: the guarantee (config, standings, marks, fund) */
#define SNAP_VERSION_OLDEST 1u

/* ---------------------------------------------------------------- write -- */

typedef struct out {
  hg_clearing_write_fn fn;
  void *ctx;
  unsigned char buf[4096];
  size_t len;
  int err;
} out_t;

static void flush(out_t *o) {
  if (o->err == 0 && o->len > 0) {
    int rc = o->fn(o->ctx, o->buf, o->len);
    if (rc < 0) o->err = rc;
  }
  o->len = 0;
}

static void put(out_t *o, uint64_t v, int bytes) {
  if (o->len + (size_t)bytes > sizeof o->buf) flush(o);
  o->len += hg_st_le(o->buf + o->len, v, bytes);
}
static void p8(out_t *o, uint64_t v) { put(o, v, 1); }
static void p16(out_t *o, uint64_t v) { put(o, v, 2); }
static void p32(out_t *o, uint64_t v) { put(o, v, 4); }
static void p64(out_t *o, uint64_t v) { put(o, v, 8); }
static void pi64(out_t *o, int64_t v) { put(o, (uint64_t)v, 8); }
static void p128(out_t *o, i128 v) {
  unsigned __int128 u = (unsigned __int128)v;
  p64(o, (uint64_t)u);
  p64(o, (uint64_t)(u >> 64));
}

int hg_clearing_serialize(const hg_clearing_t *c, hg_clearing_write_fn write, void *ctx) {
  if (c == NULL || write == NULL) return HG_EINVAL;
  out_t *o = malloc(sizeof *o); /* the staging buffer is too big for a stack frame */
  if (o == NULL) return -ENOMEM;
  o->fn = write;
  o->ctx = ctx;
  o->len = 0;
  o->err = 0;
  const hg_clearing_config_t *g = &c->cfg;
  p32(o, SNAP_MAGIC);
  p32(o, SNAP_VERSION);
  p32(o, g->max_accounts);
  p32(o, g->max_instruments);
  p32(o, g->max_firms);
  p32(o, g->max_groups);
  p32(o, g->max_positions);
  p64(o, g->ledger_initial);
  p64(o, g->ledger_max_entries);
  pi64(o, g->tick_value);
  pi64(o, g->position_limit);
  pi64(o, g->position_limit_delivery);
  pi64(o, g->max_order_qty);
  p32(o, g->band_bps);
  p32(o, g->im_rate_bps);
  p32(o, g->im_rate_delivery_bps);
  pi64(o, g->dsp_max_spread);
  p64(o, g->dsp_window_ns);
  p64(o, g->cycle_time_of_day_ns);
  p32(o, g->mm_rate_bps);
  p32(o, g->liq_fee_bps);
  pi64(o, g->liq_slice_qty);
  p32(o, g->call_cycles);

  p32(o, c->naccounts);
  for (uint32_t i = 0; i < c->naccounts; i++) {
    p32(o, c->accounts[i].id);
    p32(o, c->accounts[i].firm_id);
    pi64(o, c->accounts[i].balance);
    p8(o, c->accounts[i].state);
    p8(o, c->accounts[i].liq_reason);
    p64(o, c->accounts[i].call_due);
    pi64(o, c->accounts[i].call_amount);
  }
  p32(o, c->ngroups);
  for (uint32_t i = 0; i < c->ngroups; i++) {
    p32(o, c->groups[i].id);
    pi64(o, c->groups[i].fixing);
    pi64(o, c->groups[i].final_fixing);
  }
  p32(o, c->ninst_order);
  for (uint32_t k = 0; k < c->ninst_order; k++) {
    const instrument_t *in = &c->insts[c->inst_order[k]];
    p32(o, in->def.id);
    p32(o, in->def.group_id);
    p16(o, in->def.year);
    p8(o, in->def.month);
    p8(o, in->def.in_delivery);
    pi64(o, in->def.tick_value);
    pi64(o, in->def.last_dsp);
    p8(o, in->settled);
    p8(o, (uint64_t)in->dsp_tier);
    pi64(o, in->fsp);
    p64(o, in->win_day);
    pi64(o, in->win_q);
    p128(o, in->win_qp);
    pi64(o, in->mark);
    pi64(o, in->last_trade);
    uint32_t n = 0;
    for (uint32_t r = in->rec_head; r != NIL32; r = c->recs[r].i_next) n++;
    p32(o, n);
    for (uint32_t r = in->rec_head; r != NIL32; r = c->recs[r].i_next) {
      const posrec_t *p = &c->recs[r];
      p32(o, c->accounts[p->acct].id);
      pi64(o, p->pos);
      pi64(o, p->pos_prev);
      pi64(o, p->open_buy);
      pi64(o, p->open_sell);
      pi64(o, p->day_q);
      p128(o, p->day_qp);
      p8(o, p->fills);
    }
  }
  p64(o, c->ledger_len);
  for (uint64_t i = 0; i < c->ledger_len; i++) {
    const hg_ledger_entry_t *e = &c->ledger[i].e;
    p64(o, e->seq);
    p64(o, e->ts);
    p32(o, e->account);
    p32(o, e->instrument);
    p32(o, e->kind);
    pi64(o, e->amount);
    pi64(o, e->balance);
    pi64(o, e->price);
    pi64(o, e->qty);
  }
  pi64(o, c->fund);
  pi64(o, c->g_fund_deposits);
  pi64(o, c->g_liq_fees);
  pi64(o, c->g_fund_used);
  pi64(o, c->g_socialized);
  pi64(o, c->g_uncovered);
  p64(o, c->g_bankruptcies);
  p64(o, c->ncycles);
  p32(o, SNAP_END);
  flush(o);
  int rc = o->err;
  free(o);
  return rc;
}

/* ----------------------------------------------------------------- read -- */

typedef struct in {
  const unsigned char *p;
  size_t left;
  int bad;
} in_t;

static uint64_t get(in_t *r, int bytes) {
  if (r->bad || r->left < (size_t)bytes) {
    r->bad = 1;
    return 0;
  }
  uint64_t v = hg_ld_le(r->p, bytes);
  r->p += bytes;
  r->left -= (size_t)bytes;
  return v;
}
static uint8_t g8(in_t *r) { return (uint8_t)get(r, 1); }
static uint16_t g16(in_t *r) { return (uint16_t)get(r, 2); }
static uint32_t g32(in_t *r) { return (uint32_t)get(r, 4); }
static uint64_t g64(in_t *r) { return get(r, 8); }
static int64_t gi64(in_t *r) { return (int64_t)get(r, 8); }
static i128 g128(in_t *r) {
  uint64_t lo = g64(r), hi = g64(r);
  return (i128)(((unsigned __int128)hi << 64) | lo);
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

static int restore_body(hg_clearing_t *c, in_t *r, uint32_t version) {
  /* accounts (balances are rebuilt from the ledger and compared) */
  uint32_t na = g32(r);
  if (r->bad || na > c->cfg.max_accounts) return HG_ECORRUPT;
  int64_t *want = calloc(na ? na : 1, sizeof *want);
  if (want == NULL) return -ENOMEM;
  int rc = HG_ECORRUPT;
  for (uint32_t i = 0; i < na; i++) {
    uint32_t id = g32(r), firm = g32(r);
    want[i] = gi64(r);
    if (r->bad || hg_clearing_account_add(c, id, firm) != 0) goto out;
    if (version >= 2) {
      account_t *a = &c->accounts[i];
      a->state = g8(r);
      a->liq_reason = g8(r);
      a->call_due = g64(r);
      a->call_amount = gi64(r);
      if (r->bad || a->state > HG_CLR_LIQUIDATING || a->liq_reason > HG_CLR_LIQ_DEADLINE ||
          (a->state == HG_CLR_LIQUIDATING) != (a->liq_reason != 0) ||
          (a->state == HG_CLR_OK) != (a->call_due == 0) ||
          (a->state == HG_CLR_OK && a->call_amount != 0) || a->call_amount < 0)
        goto out;
    }
  }
  /* groups */
  uint32_t ng = g32(r);
  if (r->bad || ng > c->cfg.max_groups) goto out;
  for (uint32_t i = 0; i < ng; i++) {
    uint32_t id = g32(r);
    int64_t fix = gi64(r), fin = gi64(r);
    if (r->bad || hg_clr__group_slot(c, id) != NIL32 || fix < 0 || fix > HG_CLR_FIXING_MAX ||
        fin < 0 || fin > HG_CLR_FIXING_MAX)
      goto out;
    hg_clr__group_add(c, id);
    c->groups[i].fixing = fix;
    c->groups[i].final_fixing = fin;
  }
  /* instruments and their records */
  uint32_t ni = g32(r);
  if (r->bad || ni > c->cfg.max_instruments) goto out;
  for (uint32_t k = 0; k < ni; k++) {
    hg_clearing_instrument_t d = {0};
    d.id = g32(r);
    d.group_id = g32(r);
    d.year = g16(r);
    d.month = g8(r);
    d.in_delivery = g8(r);
    d.tick_value = gi64(r);
    d.last_dsp = gi64(r);
    uint8_t settled = g8(r), tier = g8(r);
    int64_t fsp = gi64(r);
    uint64_t win_day = g64(r);
    int64_t win_q = gi64(r);
    i128 win_qp = g128(r);
    int64_t mark = version >= 2 ? gi64(r) : 0, last_trade = version >= 2 ? gi64(r) : 0;
    uint32_t nrec = g32(r);
    if (r->bad || d.in_delivery > 1 || settled > 1 || tier > HG_DSP_TIER_INDEX ||
        hg_clr__group_slot(c, d.group_id) == NIL32 || hg_clearing_instrument_add(c, &d) != 0)
      goto out;
    if (fsp < 0 || fsp > HG_CLR_PRICE_MAX || (settled != 0) != (fsp != 0) || win_q < 0 ||
        win_qp < 0 || (win_q == 0) != (win_qp == 0) || (win_q > 0 && win_day == NIL64) ||
        nrec > c->cfg.max_positions || mark < 0 || mark > HG_CLR_PRICE_MAX ||
        last_trade < 0 || last_trade > HG_CLR_PRICE_MAX)
      goto out;
    uint32_t s = hg_clr__inst_slot(c, d.id);
    instrument_t *in = &c->insts[s];
    in->settled = settled;
    in->dsp_tier = tier;
    in->fsp = fsp;
    in->win_day = win_day;
    in->win_q = win_q;
    in->win_qp = win_qp;
    in->mark = mark;
    in->last_trade = last_trade;
    i128 sum_pos = 0, sum_prev = 0, sum_qp = 0;
    for (uint32_t j = 0; j < nrec; j++) {
      uint32_t acct_id = g32(r);
      int64_t pos = gi64(r), prev = gi64(r), ob = gi64(r), os = gi64(r), dq = gi64(r);
      i128 dqp = g128(r);
      uint8_t fills = g8(r);
      uint32_t as = hg_clr__acct_slot(c, acct_id);
      if (r->bad || as == NIL32 || hg_clr__rec_find(c, as, s) != NIL32) goto out;
      if (abs64(pos) > HG_CLR_QTY_MAX || abs64(prev) > HG_CLR_QTY_MAX || ob < 0 ||
          ob > HG_CLR_QTY_MAX || os < 0 || os > HG_CLR_QTY_MAX || dq != pos - prev ||
          fills > 1 || (!fills && (dq != 0 || dqp != 0)) || (settled && pos != 0) ||
          (in->def.last_dsp == 0 && prev != 0))
        goto out;
      uint32_t rec = hg_clr__rec_get_or_create(c, as, s);
      if (rec == NIL32) goto out;
      posrec_t *p = &c->recs[rec];
      p->pos = pos;
      p->pos_prev = prev;
      p->open_buy = ob;
      p->open_sell = os;
      p->day_q = dq;
      p->day_qp = dqp;
      p->fills = fills;
      sum_pos += pos;
      sum_prev += prev;
      sum_qp += dqp;
    }
    if (sum_pos != 0 || sum_prev != 0 || sum_qp != 0) goto out;
  }
  /* the ledger, replayed */
  uint64_t nl = g64(r);
  if (r->bad || nl > r->left / 60) goto out; /* 60 bytes per entry */
  if ((rc = hg_clr__ledger_reserve(c, nl)) < 0) goto out;
  rc = HG_ECORRUPT;
  int64_t fund_dep = 0, fund_fees = 0;
  for (uint64_t i = 0; i < nl; i++) {
    uint64_t seq = g64(r), ts = g64(r);
    uint32_t acct_id = g32(r), inst = g32(r), kind = g32(r);
    int64_t amount = gi64(r), bal = gi64(r), price = gi64(r), qty = gi64(r);
    if (r->bad) goto out;
    if (acct_id == HG_CLR_FUND_ACCOUNT) {
      /* the fund's side: funding, fees in, cover out */
      int64_t nf;
      if (__builtin_add_overflow(c->fund, amount, &nf) || nf != bal || nf < 0) goto out;
      if (kind == HG_LEDGER_FUND_DEPOSIT) {
        if (amount <= 0 || __builtin_add_overflow(c->tot_deposits, amount, &c->tot_deposits) ||
            __builtin_add_overflow(fund_dep, amount, &fund_dep))
          goto out;
      } else if (kind == HG_LEDGER_LIQ_FEE) {
        if (amount <= 0 || __builtin_add_overflow(fund_fees, amount, &fund_fees)) goto out;
      } else if (kind != HG_LEDGER_FUND_COVER || amount >= 0) {
        goto out;
      }
      hg_clr__post_fund(c, kind, inst, amount, price, qty, seq, ts);
      continue;
    }
    uint32_t as = hg_clr__acct_slot(c, acct_id);
    uint32_t kmax = version >= 2 ? HG_LEDGER_SOCIALIZED : HG_LEDGER_FEE;
    if (as == NIL32 || kind < HG_LEDGER_DEPOSIT || kind > kmax ||
        kind == HG_LEDGER_FUND_DEPOSIT)
      goto out;
    int64_t nb, *tot = NULL, delta = 0;
    if (__builtin_add_overflow(c->accounts[as].balance, amount, &nb) || nb != bal) goto out;
    switch (kind) {
    case HG_LEDGER_DEPOSIT: tot = &c->tot_deposits; delta = amount; break;
    case HG_LEDGER_WITHDRAWAL: tot = &c->tot_withdrawals; delta = -amount; break;
    case HG_LEDGER_FEE: tot = &c->tot_fees; delta = -amount; break;
    default: break;
    }
    if (tot != NULL && (delta <= 0 || __builtin_add_overflow(*tot, delta, tot))) goto out;
    hg_clr__post(c, as, kind, inst, amount, price, qty, seq, ts);
  }
  for (uint32_t i = 0; i < na; i++)
    if (c->accounts[i].balance != want[i]) goto out;
  if (version >= 2) {
    int64_t fund = gi64(r);
    c->g_fund_deposits = gi64(r);
    c->g_liq_fees = gi64(r);
    c->g_fund_used = gi64(r);
    c->g_socialized = gi64(r);
    c->g_uncovered = gi64(r);
    c->g_bankruptcies = g64(r);
    c->ncycles = g64(r);
    if (r->bad || fund != c->fund || c->g_fund_deposits != fund_dep ||
        c->g_liq_fees != fund_fees || c->g_fund_used < 0 || c->g_socialized < 0 ||
        c->g_uncovered < 0)
      goto out;
    for (uint32_t i = 0; i < na; i++)
      if (c->accounts[i].call_due > c->ncycles + c->cfg.call_cycles) goto out;
  }
  if (!hg_clearing_conserved(c)) goto out;
  if (g32(r) != SNAP_END || r->bad || r->left != 0) goto out;
  rc = 0;
out:
  free(want);
  return rc;
}

int hg_clearing_restore(const void *data, size_t len, hg_clearing_t **out) {
  if ((data == NULL && len > 0) || out == NULL) return HG_EINVAL;
  in_t r = {.p = data, .left = len};
  if (g32(&r) != SNAP_MAGIC || r.bad) return HG_ECORRUPT;
  uint32_t version = g32(&r);
  if (r.bad) return HG_ECORRUPT;
  if (version != SNAP_VERSION && version != SNAP_VERSION_OLDEST) return HG_EVERSION;
  /* A truncated blob is refused before anything is allocated for it. */
  if (len < 12) return HG_ECORRUPT;
  const unsigned char *tail = (const unsigned char *)data + len - 4;
  if (((uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 |
       (uint32_t)tail[3] << 24) != SNAP_END)
    return HG_ECORRUPT;
  hg_clearing_config_t g;
  memset(&g, 0, sizeof g);
  g.max_accounts = g32(&r);
  g.max_instruments = g32(&r);
  g.max_firms = g32(&r);
  g.max_groups = g32(&r);
  g.max_positions = g32(&r);
  g.ledger_initial = g64(&r);
  g.ledger_max_entries = g64(&r);
  g.tick_value = gi64(&r);
  g.position_limit = gi64(&r);
  g.position_limit_delivery = gi64(&r);
  g.max_order_qty = gi64(&r);
  g.band_bps = g32(&r);
  g.im_rate_bps = g32(&r);
  g.im_rate_delivery_bps = g32(&r);
  g.dsp_max_spread = gi64(&r);
  g.dsp_window_ns = g64(&r);
  g.cycle_time_of_day_ns = g64(&r);
  if (version >= 2) {
    g.mm_rate_bps = g32(&r);
    g.liq_fee_bps = g32(&r);
    g.liq_slice_qty = gi64(&r);
    g.call_cycles = g32(&r);
  } else {
    hg_clearing_config_t d;
    hg_clearing_config_default(&d);
    g.mm_rate_bps = d.mm_rate_bps;
    g.liq_fee_bps = d.liq_fee_bps;
    g.liq_slice_qty = d.liq_slice_qty;
    g.call_cycles = d.call_cycles;
  }
  if (r.bad) return HG_ECORRUPT;
  /* the ledger is sized from the entries actually present, not from the
   * recorded initial capacity; the recorded value is kept for serialization */
  uint64_t ledger_initial = g.ledger_initial;
  if (ledger_initial == 0) return HG_ECORRUPT;
  g.ledger_initial = 1;
  hg_clearing_t *c = NULL;
  int rc = hg_clearing_create(&g, &c);
  if (rc < 0) return rc == HG_EINVAL ? HG_ECORRUPT : rc;
  if (g.ledger_max_entries != 0 && g.ledger_max_entries < ledger_initial) {
    hg_clearing_destroy(c);
    return HG_ECORRUPT;
  }
  c->cfg.ledger_initial = ledger_initial;
  rc = restore_body(c, &r, version);
  if (rc < 0) {
    hg_clearing_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}
