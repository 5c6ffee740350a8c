/*
 * Settlement: the daily settlement price (four tiers), the daily cycle that
 * pays variation margin, the Final Settlement Price, final settlement, and
 * the per-account statements (CSV and JSON).
 *
 * Every cash-moving operation runs in two passes over the position records:
 * the first computes each payment in __int128, checks it fits int64, checks
 * the per-instrument sum is exactly zero and that every account balance stays
 * inside int64 (payments parked in per-record and per-account scratch
 * fields); then the ledger is reserved; only then the second pass posts and
 * rolls. So every error leaves the state exactly as it was.
 *
 * Variation margin uses the per-record sums kept by the fill path:
 *   pos_{t-1}(D_t - D_{t-1}) + sum_i q_i (D_t - p_i)
 *     = pos_{t-1}(D_t - D_{t-1}) + D_t * sum q - sum q*p
 * times TV, an identity, so no fill is stored. Summed over all records of an
 * instrument it is zero: sum pos_{t-1} = 0, and every fill adds +q and -q,
 * +qp and -qp to two records.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include "clearing_int.h"
#include "hourglass/civil.h"
#include "hourglass/error.h"

/* ---------------------------------------------------------------- DSP -- */

int hg_clearing_dsp_compute(const hg_clearing_dsp_input_t *in, hg_price_t *dsp, int *tier) {
  if (in == NULL || dsp == NULL || tier == NULL) return HG_EINVAL;
  if (in->window_qty < 0 || in->best_bid < 0 || in->best_ask < 0 || in->max_spread < 0 ||
      in->prev_dsp < 0 || in->final_fixing < 0)
    return HG_EINVAL;
  if ((in->window_qty > 0) != (in->window_qp > 0) || (in->window_qty == 0 && in->window_qp != 0))
    return HG_EINVAL;
  i128 v;
  int t;
  if (in->window_qty > 0) {
    i128 q = in->window_qty;
    v = (2 * in->window_qp + q) / (2 * q); /* half up: floor(qp/q + 1/2) */
    t = HG_DSP_TIER_VWAP;
  } else if (in->best_bid > 0 && in->best_ask > 0 &&
             (i128)in->best_ask - in->best_bid <= in->max_spread) {
    v = ((i128)in->best_bid + in->best_ask + 1) / 2;
    t = HG_DSP_TIER_MID;
  } else if (in->prev_dsp > 0) {
    v = in->prev_dsp;
    t = HG_DSP_TIER_PREVIOUS;
  } else if (in->final_fixing > 0 && (in->final_fixing + 500) / 1000 > 0) {
    v = ((i128)in->final_fixing + 500) / 1000; /* 1 tick = 1000 micro-USD, half up */
    t = HG_DSP_TIER_INDEX;
  } else {
    *dsp = 0;
    *tier = HG_DSP_TIER_NONE;
    return 0;
  }
  if (v < 1 || v > HG_CLR_PRICE_MAX) return HG_ERANGE;
  *dsp = (hg_price_t)v;
  *tier = t;
  return 0;
}

/* ------------------------------------------------------- daily cycle -- */

int hg_clr__load_tops(hg_clearing_t *c, const hg_clearing_top_t *tops, size_t ntops) {
  if (ntops > 0 && tops == NULL) return HG_EINVAL;
  for (uint32_t k = 0; k < c->ninst_order; k++) {
    uint32_t s = c->inst_order[k];
    c->top_bid[s] = c->top_ask[s] = 0;
    c->top_seen[s] = 0;
  }
  for (size_t i = 0; i < ntops; i++) {
    uint32_t s = hg_clr__inst_slot(c, tops[i].instrument);
    if (s == NIL32 || c->top_seen[s] || tops[i].best_bid < 0 ||
        tops[i].best_bid > HG_CLR_PRICE_MAX || tops[i].best_ask < 0 ||
        tops[i].best_ask > HG_CLR_PRICE_MAX)
      return HG_EINVAL;
    c->top_seen[s] = 1;
    c->top_bid[s] = tops[i].best_bid;
    c->top_ask[s] = tops[i].best_ask;
  }
  return 0;
}

static int fits64(i128 v) { return v >= INT64_MIN && v <= INT64_MAX; }

/* Clears the per-account scratch of every account. */
static void clear_acct_scratch(hg_clearing_t *c) {
  for (uint32_t i = 0; i < c->naccounts; i++) c->accounts[i].scratch = 0;
}

/* Every balance + pending scratch must stay inside int64. */
static int balances_fit(const hg_clearing_t *c) {
  for (uint32_t i = 0; i < c->naccounts; i++)
    if (!fits64((i128)c->accounts[i].balance + c->accounts[i].scratch)) return 0;
  return 1;
}

static int needs_vm(const posrec_t *p) { return p->pos_prev != 0 || p->fills; }

/* Debug builds: the ledger entries from index `from` on (variation margin
 * or final settlement) sum to zero: they move cash between accounts only. */
static void assert_zero_sum(const hg_clearing_t *c, uint64_t from) {
#ifndef NDEBUG
  i128 sum = 0;
  for (uint64_t i = from; i < c->ledger_len; i++) sum += c->ledger[i].e.amount;
  assert(sum == 0);
#else
  (void)c;
  (void)from;
#endif
}

/* ------------------------------------------------------- waterfall -- */

/* The waterfall of a cycle (CONTRACT.md 4.7), planned on the balances after
 * VM (balance + scratch) before anything is posted: for a bankrupt account
 * wf = what the fund pays it, for a winner wf = -(its share of the
 * socialized loss). */
typedef struct waterfall {
  uint32_t nbank;
  uint64_t entries;
  i128 fund_used, social, uncovered;
} waterfall_t;

static i128 min128(i128 a, i128 b) { return a < b ? a : b; }

static int waterfall_plan(hg_clearing_t *c, waterfall_t *w) {
  memset(w, 0, sizeof *w);
  i128 fund = c->fund, rest = 0, k_sum = 0;
  uint32_t nwin = 0;
  for (uint32_t i = 0; i < c->naccounts; i++) {
    account_t *a = &c->accounts[i];
    i128 cash = (i128)a->balance + a->scratch;
    a->wf = 0;
    if (cash < 0) {
      i128 cover = min128(fund, -cash);
      fund -= cover;
      a->wf = (int64_t)cover;
      rest += -cash - cover;
      w->nbank++;
      w->entries += (cover > 0 ? 2 : 0) + 1; /* cover pair, socialized credit */
      w->fund_used += cover;
    } else if (a->scratch > 0) {
      k_sum += min128(a->scratch, cash);
      nwin++;
    }
  }
  if (rest > INT64_MAX || k_sum > INT64_MAX) return HG_EOVERFLOW;
  i128 social = min128(rest, k_sum), left = social;
  if (social > 0) {
    for (uint32_t i = 0; i < c->naccounts; i++) {
      account_t *a = &c->accounts[i];
      i128 cash = (i128)a->balance + a->scratch;
      if (cash < 0 || a->scratch <= 0) continue;
      i128 k = min128(a->scratch, cash);
      i128 h = rest >= k_sum ? k : rest * k / k_sum; /* < 2^126 */
      a->wf = -(int64_t)h;
      left -= h;
    }
    /* the micro-USD that flooring left, one each in registration order;
     * fewer than the winners, and a floored share is below its weight */
    for (uint32_t i = 0; i < c->naccounts && left > 0; i++) {
      account_t *a = &c->accounts[i];
      i128 cash = (i128)a->balance + a->scratch;
      if (cash < 0 || a->scratch <= 0) continue;
      a->wf -= 1;
      left--;
    }
    w->entries += nwin;
  }
  w->social = social;
  w->uncovered = rest - social;
  return 0;
}

static int64_t sat_add(int64_t a, i128 b) {
  i128 v = (i128)a + b;
  return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* Posts the plan on the balances after VM; cannot fail (reserved). */
static void waterfall_post(hg_clearing_t *c, const waterfall_t *w, uint64_t seq, uint64_t ts) {
  for (uint32_t i = 0; i < c->naccounts; i++) {
    account_t *a = &c->accounts[i];
    if (a->balance < 0 && a->wf > 0) {
      hg_clr__post(c, i, HG_LEDGER_FUND_COVER, HG_CLR_NO_INSTRUMENT, a->wf, 0, 0, seq, ts);
      hg_clr__post_fund(c, HG_LEDGER_FUND_COVER, HG_CLR_NO_INSTRUMENT, -a->wf, 0, 0, seq, ts);
    }
  }
  for (uint32_t i = 0; i < c->naccounts; i++) {
    account_t *a = &c->accounts[i];
    if (a->balance >= 0 && a->wf < 0)
      hg_clr__post(c, i, HG_LEDGER_SOCIALIZED, HG_CLR_NO_INSTRUMENT, a->wf, 0, 0, seq, ts);
  }
  i128 left = w->social;
  for (uint32_t i = 0; i < c->naccounts && left > 0; i++) {
    account_t *a = &c->accounts[i];
    if (a->balance >= 0) continue;
    int64_t credit = (int64_t)min128(left, -(i128)a->balance);
    hg_clr__post(c, i, HG_LEDGER_SOCIALIZED, HG_CLR_NO_INSTRUMENT, credit, 0, 0, seq, ts);
    left -= credit;
  }
  for (uint32_t i = 0; i < c->naccounts; i++) c->accounts[i].wf = 0;
  c->g_bankruptcies += w->nbank;
  c->g_fund_used = sat_add(c->g_fund_used, w->fund_used);
  c->g_socialized = sat_add(c->g_socialized, w->social);
  c->g_uncovered = (int64_t)w->uncovered;
}

int hg_clearing_daily_cycle(hg_clearing_t *c, uint64_t seq, uint64_t ts,
                            const hg_clearing_top_t *tops, size_t ntops,
                            hg_clearing_cycle_report_t *report) {
  int rc0 = hg_clr__load_tops(c, tops, ntops);
  if (rc0 < 0) return rc0;
  uint64_t day = ts / HG_NS_PER_DAY;

  /* pass 1: prices, payments, checks */
  clear_acct_scratch(c);
  uint64_t entries = 0;
  i128 paid = 0, received = 0;
  uint32_t settled = 0, skipped = 0;
  for (uint32_t k = 0; k < c->ninst_order; k++) {
    uint32_t s = c->inst_order[k];
    instrument_t *in = &c->insts[s];
    c->cyc_tier[s] = HG_DSP_TIER_NONE;
    if (in->settled) continue;
    hg_clearing_dsp_input_t di = {
        .window_qty = in->win_day == day ? in->win_q : 0,
        .window_qp = in->win_day == day ? in->win_qp : 0,
        .best_bid = c->top_bid[s],
        .best_ask = c->top_ask[s],
        .max_spread = c->cfg.dsp_max_spread,
        /* tier 3 is a DSP a cycle set; an initial price (registered,
         * dsp_tier NONE) comes only after tier 4, below */
        .prev_dsp = in->dsp_tier != HG_DSP_TIER_NONE ? in->def.last_dsp : 0,
        .final_fixing = c->groups[in->group].final_fixing,
    };
    hg_price_t d;
    int tier;
    int rc = hg_clearing_dsp_compute(&di, &d, &tier);
    if (rc < 0) return rc == HG_ERANGE ? HG_EOVERFLOW : HG_ECORRUPT;
    if (tier == HG_DSP_TIER_NONE && in->def.last_dsp > 0) {
      d = in->def.last_dsp; /* the initial price is the previous settlement price */
      tier = HG_DSP_TIER_PREVIOUS;
    }
    if (tier == HG_DSP_TIER_NONE) {
      skipped++;
      continue;
    }
    settled++;
    c->cyc_dsp[s] = d;
    c->cyc_tier[s] = tier;
    hg_price_t dprev = in->def.last_dsp;
    int64_t tv = hg_clr__tv(c, in);
    i128 sum = 0;
    for (uint32_t r = in->rec_head; r != NIL32; r = c->recs[r].i_next) {
      posrec_t *p = &c->recs[r];
      if (!needs_vm(p)) continue;
      /* a position held over a cycle implies a DSP existed at that cycle */
      if (dprev == 0 && p->pos_prev != 0) return HG_ECORRUPT;
      i128 inner = (i128)p->pos_prev * (d - dprev) + (i128)p->day_q * d - p->day_qp;
      if (!fits64(inner)) return HG_EOVERFLOW;
      i128 vm = inner * tv;
      if (!fits64(vm)) return HG_EOVERFLOW;
      p->scratch = (int64_t)vm;
      c->accounts[p->acct].scratch += vm;
      sum += vm;
      if (vm < 0) paid += vm;
      else received += vm;
      entries++;
    }
    if (sum != 0) return HG_ECORRUPT;
  }
  if (!balances_fit(c)) return HG_EOVERFLOW;
  waterfall_t wf;
  int rc = waterfall_plan(c, &wf);
  if (rc < 0) return rc;
  rc = hg_clr__ledger_reserve(c, entries + wf.entries);
  if (rc < 0) return rc;

  /* pass 2: post and roll; nothing below can fail */
  uint64_t first_posted = c->ledger_len;
  for (uint32_t k = 0; k < c->ninst_order; k++) {
    uint32_t s = c->inst_order[k];
    instrument_t *in = &c->insts[s];
    if (c->cyc_tier[s] == HG_DSP_TIER_NONE) continue;
    hg_price_t d = c->cyc_dsp[s];
    for (uint32_t r = in->rec_head; r != NIL32; r = c->recs[r].i_next) {
      posrec_t *p = &c->recs[r];
      if (!needs_vm(p)) continue;
      hg_clr__post(c, p->acct, HG_LEDGER_VM, in->def.id, p->scratch, d, p->pos, seq, ts);
      p->pos_prev = p->pos;
      p->day_q = 0;
      p->day_qp = 0;
      p->fills = 0;
    }
    hg_clr__rec_sweep(c, s);
    in->def.last_dsp = d;
    in->dsp_tier = c->cyc_tier[s];
    in->win_day = NIL64;
    in->win_q = 0;
    in->win_qp = 0;
  }
  waterfall_post(c, &wf, seq, ts);
  c->ncycles++;
  for (uint32_t k = 0; k < c->ninst_order; k++) {
    uint32_t s = c->inst_order[k];
    if (c->cyc_tier[s] != HG_DSP_TIER_NONE) c->insts[s].mark = c->cyc_dsp[s];
  }
  hg_clearing_mark_report_t marks = {0};
  hg_clr__evaluate_all(c, 1, &marks);
  if (report != NULL) {
    report->bankrupt = wf.nbank;
    report->fund_used = (int64_t)wf.fund_used;
    report->socialized = (int64_t)wf.social;
    report->uncovered = (int64_t)wf.uncovered;
    report->marks = marks;
    report->instruments_settled = settled;
    report->instruments_skipped = skipped;
    report->entries_posted = entries;
    report->vm_paid = paid < INT64_MIN ? INT64_MIN : (int64_t)paid;
    report->vm_received = received > INT64_MAX ? INT64_MAX : (int64_t)received;
  }
  assert_zero_sum(c, first_posted);
  return 0;
}

/* ---------------------------------------------------------------- FSP -- */

int hg_clearing_fsp(unsigned year, unsigned month, const hg_clearing_fixing_t *fixings,
                    size_t n, hg_clearing_fsp_t *out) {
  if (out == NULL || (n > 0 && fixings == NULL)) return HG_EINVAL;
  if (year < 1 || year > 9999 || month < 1 || month > 12) return HG_EINVAL;
  unsigned days = hg_civil_month_days(year, month);
  uint8_t status[32] = {0}, seen[32] = {0};
  int64_t value[32] = {0};
  for (size_t i = 0; i < n; i++) {
    const hg_clearing_fixing_t *f = &fixings[i];
    if (f->day < 1 || f->day > days || seen[f->day] || f->status > HG_CLR_FIX_NO_FIX)
      return HG_EINVAL;
    if (f->status == HG_CLR_FIX_FINAL && (f->value <= 0 || f->value > HG_CLR_FIXING_MAX))
      return HG_EINVAL;
    seen[f->day] = 1;
    status[f->day] = f->status;
    value[f->day] = f->value;
  }
  memset(out, 0, sizeof *out);
  out->days = days;
  int64_t sum = 0; /* at most 31 * 1e12 */
  for (unsigned d = 1; d <= days; d++) {
    if (status[d] != HG_CLR_FIX_FINAL) {
      out->missing_day[out->n_missing] = (uint8_t)d;
      out->missing_status[out->n_missing] = status[d];
      out->n_missing++;
    } else {
      sum += value[d];
    }
  }
  if (out->n_missing > 0) return HG_ESTATE;
  /* mean in ticks = sum / (days * 1000), rounded half up in one step */
  int64_t den = (int64_t)days * 1000;
  int64_t fsp = (2 * sum + den) / (2 * den);
  if (fsp < 1) return HG_ERANGE;
  out->fsp = fsp;
  return 0;
}

/* --------------------------------------------------- final settlement -- */

int hg_clearing_final_settle(hg_clearing_t *c, uint32_t instrument, hg_price_t fsp,
                             uint64_t seq, uint64_t ts) {
  uint32_t s = hg_clr__inst_slot(c, instrument);
  if (s == NIL32) return HG_ENOTFOUND;
  if (fsp < 1 || fsp > HG_CLR_PRICE_MAX) return HG_EINVAL;
  instrument_t *in = &c->insts[s];
  if (in->settled || in->def.last_dsp == 0) return HG_ESTATE;
  hg_price_t dsp = in->def.last_dsp;
  int64_t tv = hg_clr__tv(c, in);
  i128 sum = 0;
  uint64_t entries = 0;
  for (uint32_t r = in->rec_head; r != NIL32; r = c->recs[r].i_next) {
    posrec_t *p = &c->recs[r];
    if (p->fills || p->open_buy != 0 || p->open_sell != 0) return HG_ESTATE;
    if (p->pos == 0) continue;
    i128 pay = (i128)p->pos * (fsp - dsp) * tv;
    if (!fits64(pay)) return HG_EOVERFLOW;
    /* one record per (account, instrument): each balance moves once */
    if (!fits64((i128)c->accounts[p->acct].balance + pay)) return HG_EOVERFLOW;
    p->scratch = (int64_t)pay;
    sum += pay;
    entries++;
  }
  if (sum != 0) return HG_ECORRUPT;
  int rc = hg_clr__ledger_reserve(c, entries);
  if (rc < 0) return rc;
  uint64_t first_posted = c->ledger_len;
  for (uint32_t r = in->rec_head; r != NIL32; r = c->recs[r].i_next) {
    posrec_t *p = &c->recs[r];
    if (p->pos == 0) continue;
    hg_clr__post(c, p->acct, HG_LEDGER_FINAL, in->def.id, p->scratch, fsp, p->pos, seq, ts);
    p->pos = 0;
    p->pos_prev = 0;
  }
  in->settled = 1;
  in->fsp = fsp;
  assert_zero_sum(c, first_posted);
  return 0;
}

/* --------------------------------------------------------- statements -- */

/* Output to a caller buffer (snprintf semantics) or a FILE. */
typedef struct writer {
  char *buf;
  size_t cap;
  size_t len;
  FILE *f;
  int err;
} writer_t;

__attribute__((format(printf, 2, 3))) static void wprintf(writer_t *w, const char *fmt, ...) {
  char tmp[320];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) { /* our formats are far shorter */
    w->err = HG_ECORRUPT;
    return;
  }
  if (w->f != NULL) {
    if (fwrite(tmp, 1, (size_t)n, w->f) != (size_t)n) w->err = -EIO;
  } else if (w->len < w->cap) {
    size_t room = w->cap - w->len;
    memcpy(w->buf + w->len, tmp, (size_t)n < room ? (size_t)n : room);
  }
  w->len += (size_t)n;
}

const char *hg_clearing_ledger_kind_str(uint32_t k) {
  switch (k) {
  case HG_LEDGER_DEPOSIT: return "DEPOSIT";
  case HG_LEDGER_WITHDRAWAL: return "WITHDRAWAL";
  case HG_LEDGER_VM: return "VM";
  case HG_LEDGER_FINAL: return "FINAL";
  case HG_LEDGER_FEE: return "FEE";
  case HG_LEDGER_FUND_DEPOSIT: return "FUND_DEPOSIT";
  case HG_LEDGER_LIQ_FEE: return "LIQ_FEE";
  case HG_LEDGER_FUND_COVER: return "FUND_COVER";
  case HG_LEDGER_SOCIALIZED: return "SOCIALIZED";
  default: return "UNKNOWN";
  }
}

static void statement_head(writer_t *w, hg_account_t account, uint32_t instrument, int json) {
  if (!json) wprintf(w, "index,seq,ts,account,instrument,kind,amount,balance,price,qty\n");
  else if (instrument == HG_CLR_NO_INSTRUMENT)
    wprintf(w, "{\"account\":%" PRIu32 ",\"instrument\":null,\"entries\":[", account);
  else
    wprintf(w, "{\"account\":%" PRIu32 ",\"instrument\":%" PRIu32 ",\"entries\":[", account,
            instrument);
}

static void statement_line(writer_t *w, const hg_ledger_entry_t *e, int first, int json) {
  char inst[16] = "";
  if (e->instrument != HG_CLR_NO_INSTRUMENT)
    snprintf(inst, sizeof inst, "%" PRIu32, e->instrument);
  if (json) {
    wprintf(w,
            "%s{\"index\":%" PRIu64 ",\"seq\":%" PRIu64 ",\"ts\":%" PRIu64
            ",\"account\":%" PRIu32 ",\"instrument\":%s,\"kind\":\"%s\",\"amount\":%" PRId64
            ",\"balance\":%" PRId64 ",\"price\":%" PRId64 ",\"qty\":%" PRId64 "}",
            first ? "" : ",", e->index, e->seq, e->ts, e->account, inst[0] ? inst : "null",
            hg_clearing_ledger_kind_str(e->kind), e->amount, e->balance, e->price, e->qty);
  } else {
    wprintf(w,
            "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu32 ",%s,%s,%" PRId64 ",%" PRId64
            ",%" PRId64 ",%" PRId64 "\n",
            e->index, e->seq, e->ts, e->account, inst, hg_clearing_ledger_kind_str(e->kind),
            e->amount, e->balance, e->price, e->qty);
  }
}

static int statement_tail(writer_t *w, i128 total, int json) {
  if (json) {
    /* the amounts of one account fit int64 since its balance does; the total
     * of a subset may not, so print it from the 128-bit sum */
    if (fits64(total)) wprintf(w, "],\"total\":%" PRId64 "}\n", (int64_t)total);
    else return HG_EOVERFLOW;
  }
  return w->err;
}

static int statement(const hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                     int json, writer_t *w) {
  uint32_t s = hg_clr__acct_slot(c, account);
  if (s == NIL32) return HG_ENOTFOUND;
  int all = instrument == HG_CLR_NO_INSTRUMENT;
  statement_head(w, account, instrument, json);
  i128 total = 0;
  int first = 1;
  for (uint64_t i = c->accounts[s].led_first; i != NIL64; i = c->ledger[i].next_same) {
    const hg_ledger_entry_t *e = &c->ledger[i].e;
    if (!all && e->instrument != instrument) continue;
    total += e->amount;
    statement_line(w, e, first, json);
    first = 0;
  }
  return statement_tail(w, total, json);
}

/* The same statement from a copy of the ledger. */
static int statement_of(const hg_ledger_entry_t *e, size_t n, hg_account_t account,
                        uint32_t instrument, int json, writer_t *w) {
  int all = instrument == HG_CLR_NO_INSTRUMENT;
  statement_head(w, account, instrument, json);
  i128 total = 0;
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    if (e[i].account != account || (!all && e[i].instrument != instrument)) continue;
    total += e[i].amount;
    statement_line(w, &e[i], first, json);
    first = 0;
  }
  return statement_tail(w, total, json);
}

int hg_clearing_statement_accounts(hg_clearing_t *c, uint32_t instrument, hg_account_t *out,
                                   size_t cap, size_t *n) {
  if (n == NULL || (out == NULL && cap > 0)) return HG_EINVAL;
  uint64_t gen = ++c->mark_gen; /* marks of earlier scans are all smaller */
  size_t count = 0;
  for (uint64_t i = 0; i < c->ledger_len; i++) {
    const ledger_rec_t *l = &c->ledger[i];
    if (l->e.instrument != instrument || l->acct == NIL32) continue; /* NIL32: the fund */
    account_t *a = &c->accounts[l->acct];
    if (a->mark == gen) continue;
    a->mark = gen;
    if (count < cap) out[count] = a->id;
    count++;
  }
  *n = count;
  return count > cap ? HG_ERANGE : 0;
}

/* Ends w's buffer output as the buffer variants promise. */
static int finish_buf(const writer_t *w, int rc, size_t *len) {
  if (rc < 0) return rc;
  *len = w->len;
  if (w->cap == 0) return HG_ERANGE;
  if (w->len >= w->cap) {
    w->buf[w->cap - 1] = '\0';
    return HG_ERANGE;
  }
  w->buf[w->len] = '\0';
  return 0;
}

static int statement_buf(const hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                         int json, char *buf, size_t cap, size_t *len) {
  if ((buf == NULL && cap > 0) || len == NULL) return HG_EINVAL;
  writer_t w = {.buf = buf, .cap = cap};
  return finish_buf(&w, statement(c, account, instrument, json, &w), len);
}

int hg_clearing_statement_of(const hg_ledger_entry_t *e, size_t n, hg_account_t account,
                             uint32_t instrument, int json, char *buf, size_t cap, size_t *len) {
  if ((e == NULL && n > 0) || (buf == NULL && cap > 0) || len == NULL) return HG_EINVAL;
  writer_t w = {.buf = buf, .cap = cap};
  return finish_buf(&w, statement_of(e, n, account, instrument, json, &w), len);
}

int hg_clearing_statement_csv(const hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                              char *buf, size_t cap, size_t *len) {
  return statement_buf(c, account, instrument, 0, buf, cap, len);
}

int hg_clearing_statement_json(const hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                               char *buf, size_t cap, size_t *len) {
  return statement_buf(c, account, instrument, 1, buf, cap, len);
}

int hg_clearing_statement_csv_file(const hg_clearing_t *c, hg_account_t account,
                                   uint32_t instrument, FILE *f) {
  if (f == NULL) return HG_EINVAL;
  writer_t w = {.f = f};
  return statement(c, account, instrument, 0, &w);
}

int hg_clearing_statement_json_file(const hg_clearing_t *c, hg_account_t account,
                                    uint32_t instrument, FILE *f) {
  if (f == NULL) return HG_EINVAL;
  writer_t w = {.f = f};
  return statement(c, account, instrument, 1, &w);
}
