/*
 * The exchange state machine.
 *
 * Structure: two arrays kept sorted by id, instruments (each owning its
 * hg_book_t) and accounts, searched by binary search. Sorted arrays give the
 * canonical iteration order (by id) for free, never depend on hash layout,
 * and cost a memmove only on listing, delisting and account creation, which
 * are operator commands; orders only search. Both arrays are allocated at
 * create from the config, so no order allocates.
 *
 * Money, positions and margin live in the clearing library (hg_clearing_t,
 * owned here): accounts are registered with it, deposits and withdrawals go
 * through it, every order passes its pre-trade check before the book, and
 * the book sink keeps it in step with the book: an accepted order's quantity
 * is open (ACCEPTED), fills move positions and reduce both sides' open
 * quantity (FILL), whatever leaves the book unfilled stops being open
 * (CANCELLED: user, IOC remainder, FOK, STP, mass cancel, expiry, delisting),
 * a replace swaps the old open quantity for the new (REPLACED). A clearing
 * call on that path cannot fail once the pre-trade check created the
 * position record; if one does anyway, the exchange records a sticky fault
 * and every later apply returns HG_ECORRUPT (the engine must stop: the state
 * can no longer be trusted).
 *
 * While a command is applied, ex->cur holds its seq, ts and type so that the
 * sink can stamp book events into exchange events, and so that a delisting
 * or an expiry can relabel the cancels it causes.
 *
 * The settlement commands are in exchange_settle.c, serialization and
 * restore in exchange_snap.c; exchange_int.h holds the layout they share.
 */
#include "exchange_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/names.h"

/* ------------------------------------------------------------------------ */
/* Names and events                                                          */
/* ------------------------------------------------------------------------ */

static void emit_simple(hg_exchange_t *ex, uint16_t type, uint32_t instrument_id,
                        hg_account_t account) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, type);
  ev.instrument_id = instrument_id;
  ev.account = account;
  ex->sink(ex->sink_ctx, &ev);
}

void hg_ex__emit_reject(hg_exchange_t *ex, uint16_t reason, uint32_t instrument_id,
                        hg_account_t account) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_REJECTED);
  ev.reason = reason;
  ev.instrument_id = instrument_id;
  ev.account = account;
  ex->sink(ex->sink_ctx, &ev);
}

/* An exchange-level reject of an order command, shaped like the book's own
 * rejects so that the gateway answers every order reject the same way. */
void hg_ex__emit_order_reject(hg_exchange_t *ex, uint8_t cmd, uint16_t reason,
                              uint32_t instrument_id, hg_account_t account, hg_oid_t order_id,
                              uint64_t client_order_id, uint8_t side, hg_price_t price,
                              hg_qty_t qty, const hg_clearing_result_t *res) {
  hg_exchange_event_t *ev = &ex->rev;
  ev->seq = ex->cur.seq;
  ev->ts = ex->cur.ts;
  ev->type = HG_XEV_BOOK;
  ev->command = (uint16_t)ex->cur.type;
  ev->balance = ev->margin = ev->price = ev->qty = ev->lo = ev->hi = 0;
  if (res != NULL) {
    ev->balance = res->equity;
    ev->margin = res->initial_margin;
    ev->price = res->ref_price;
    ev->qty = res->position;
    if (res->reason == HG_CLR_REJ_PRICE_BAND) {
      ev->lo = res->band_low;
      ev->hi = res->band_high;
    } else if (res->reason == HG_CLR_REJ_POSITION_LIMIT) {
      ev->lo = -res->limit;
      ev->hi = res->limit;
    } else if (res->reason == HG_CLR_REJ_MARGIN_CALL) {
      ev->hi = res->amount; /* the call */
    }
  }
  ev->instrument_id = instrument_id;
  ev->account = account;
  ev->book = (hg_book_event_t){.type = HG_EV_REJECTED,
                               .cmd = cmd,
                               .reason = reason,
                               .instrument_id = instrument_id,
                               .account = account,
                               .order_id = order_id,
                               .client_order_id = client_order_id,
                               .side = side,
                               .price = price,
                               .qty = qty,
                               .ts = ex->cur.ts};
  ex->sink(ex->sink_ctx, ev);
}

/* The clearing's reference price of an instrument and its inclusive price
 * band, in ticks (all 0: no reference; lo and hi 0: the band is off). */
void hg_ex__ref_band(const hg_exchange_t *ex, uint32_t id, int64_t *ref, int64_t *lo,
                     int64_t *hi) {
  hg_clearing_result_t r;
  *ref = *lo = *hi = 0;
  if (hg_clearing_check_band(ex->clr, id, 0, &r) != 0) return;
  *ref = r.ref_price;
  *lo = r.band_low;
  *hi = r.band_high;
}

/* ------------------------------------------------------------------------ */
/* Clearing on the order path                                                */
/* ------------------------------------------------------------------------ */

/* Whether the book would refuse the order on its own field checks; such an
 * order skips the clearing check so that it gets the book's reject reason. */
static int book_refuses(const hg_book_t *book, const hg_cmd_new_order_t *c, hg_price_t price) {
  const hg_book_params_t *p = hg_book_params(book);
  if (c->side > HG_SIDE_SELL || c->type > HG_ORD_MARKET || c->tif > HG_TIF_FOK ||
      c->stp > HG_STP_NONE || c->post_only > 1)
    return 1;
  if (c->qty <= 0 || c->qty > p->max_order_qty) return 1;
  if (c->type == HG_ORD_LIMIT && (price < p->min_price || price > p->max_price)) return 1;
  return 0;
}

/* Pre-trade check of a new order that passed the exchange checks: margin
 * with every open order and this one (delivery-month rate, spread credit),
 * position limits, band, order size (hg_clearing_check_order). Returns 0 or
 * the hg_clr_reject_t, with the numbers in *res. */
static uint16_t risk_check_new_order(hg_exchange_t *ex, const instrument_t *inst,
                                     const hg_cmd_new_order_t *c, hg_price_t price,
                                     hg_clearing_result_t *res) {
  if (book_refuses(inst->book, c, price)) return 0;
  int rc = hg_clearing_check_order(ex->clr, c->account, inst->id, c->side, c->qty, price, res);
  if (rc != 0) return HG_XREJ_RISK;
  return (uint16_t)res->reason;
}

/* Pre-trade check of a replace. A quantity increase is checked like a new
 * order of the increase at the new price; a decrease or an unchanged
 * quantity only needs the new price inside the band. An order the book does
 * not know is left to the book's UNKNOWN_ORDER reject. */
static uint16_t risk_check_replace(hg_exchange_t *ex, const instrument_t *inst,
                                   const hg_cmd_replace_t *c, hg_clearing_result_t *res) {
  hg_book_order_t o;
  ex->cur.replace_leaves = 0;
  if (hg_book_find(inst->book, c->order_id, c->account, &o) != 0) return 0;
  ex->cur.replace_leaves = o.leaves;
  const hg_book_params_t *p = hg_book_params(inst->book);
  if (c->new_qty <= 0 || c->new_qty > p->max_order_qty || c->new_price < p->min_price ||
      c->new_price > p->max_price)
    return 0; /* the book's reject */
  if (c->new_qty > o.leaves) {
    int rc = hg_clearing_check_order(ex->clr, c->account, inst->id, o.side, c->new_qty - o.leaves,
                                     c->new_price, res);
    if (rc != 0) return HG_XREJ_RISK;
    return (uint16_t)res->reason;
  }
  /* A replace that does not grow the order adds no risk: only the band. */
  if (hg_clearing_check_band(ex->clr, inst->id, c->new_price, res) != 0) return HG_XREJ_RISK;
  return (uint16_t)res->reason;
}

/* Books one fill the book just emitted: both positions, both sides' open
 * quantity (the taker's quantity was made open at ACCEPTED or REPLACED), the
 * day's sums and the DSP window. */
static void book_fill(hg_exchange_t *ex, const hg_book_event_t *f) {
  hg_account_t buyer = f->side == HG_SIDE_BUY ? f->account : f->maker_account;
  hg_account_t seller = f->side == HG_SIDE_BUY ? f->maker_account : f->account;
  if (__builtin_expect(ex->cur.liq, 0) && f->account == ex->cur.liq_account) {
    /* a liquidation order is the taker: its fill pays the fee to the fund */
    ex->cur.liq_led = hg_clearing_ledger_size(ex->clr);
    ex->cur.liq_fills++;
    clr_fault(ex, hg_clearing_liq_fill(ex->clr, f->instrument_id, buyer, seller, f->qty, f->price,
                                       HG_CLR_FILL_BUY_RESTING | HG_CLR_FILL_SELL_RESTING,
                                       f->side, ex->cur.seq, ex->cur.ts, NULL));
    return;
  }
  clr_fault(ex, hg_clearing_fill(ex->clr, f->instrument_id, buyer, seller, f->qty, f->price,
                                 ex->cur.ts, HG_CLR_FILL_BUY_RESTING | HG_CLR_FILL_SELL_RESTING));
}

/* ------------------------------------------------------------------------ */
/* Book sink                                                                 */
/* ------------------------------------------------------------------------ */

void hg_ex__book_sink(void *ctx, const hg_book_event_t *bev) {
  hg_exchange_t *ex = ctx;
  switch (bev->type) {
  case HG_EV_ACCEPTED:
    clr_fault(ex, hg_clearing_open_add(ex->clr, bev->account, bev->instrument_id, bev->side,
                                       bev->qty));
    break;
  case HG_EV_FILL: book_fill(ex, bev); break;
  case HG_EV_CANCELLED:
    if (bev->qty > 0)
      clr_fault(ex, hg_clearing_open_remove(ex->clr, bev->account, bev->instrument_id, bev->side,
                                            bev->qty));
    break;
  case HG_EV_REPLACED:
    if (ex->cur.replace_leaves > 0)
      clr_fault(ex, hg_clearing_open_remove(ex->clr, bev->account, bev->instrument_id, bev->side,
                                            ex->cur.replace_leaves));
    if (bev->leaves > 0)
      clr_fault(ex, hg_clearing_open_add(ex->clr, bev->account, bev->instrument_id, bev->side,
                                         bev->leaves));
    ex->cur.replace_leaves = 0;
    break;
  default: break;
  }
  hg_exchange_event_t *ev = book_event(ex, bev);
  if (__builtin_expect(ex->cur.liq, 0)) {
    ev->kind = HG_XBOOK_LIQUIDATION;
    ex->sink(ex->sink_ctx, ev);
    ev->kind = 0;
    if (bev->type == HG_EV_FILL) hg_ex__emit_cash(ex, ex->cur.liq_led, -1); /* the fee */
    return;
  }
  ex->sink(ex->sink_ctx, ev);
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                          */
/* ------------------------------------------------------------------------ */

static void free_all(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_instr; i++) hg_book_destroy(ex->instr[i].book);
  hg_ex__spread_free(ex);
  if (ex->idx != NULL) hg_ex__free_indexes(ex);
  hg_clearing_destroy(ex->clr);
  hg_index_registry_dispose(&ex->reg);
  free(ex->staged);
  free(ex->instr);
  free(ex->acct);
  hg_idhint_free(&ex->instr_dir);
  hg_idhint_free(&ex->acct_dir);
  free(ex->scratch);
  free(ex->tops);
  free(ex->liq);
  free(ex->idx);
  free(ex);
}

void hg_exchange_config_default(hg_exchange_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->max_instruments = 64;
  cfg->max_accounts = 4096;
  cfg->max_book_orders = 1u << 20;
}

int hg_exchange_create(const hg_exchange_config_t *cfg, hg_exchange_sink_fn sink, void *sink_ctx,
                       hg_exchange_t **out) {
  if (cfg == NULL || sink == NULL || out == NULL || cfg->max_instruments == 0 ||
      cfg->max_accounts == 0 || cfg->max_book_orders == 0)
    return HG_EINVAL;
  hg_exchange_t *ex = calloc(1, sizeof *ex);
  if (ex == NULL) return -ENOMEM;
  ex->cfg = *cfg;
  ex->cfg.clearing = NULL; /* not kept: only read here */
  if (ex->cfg.max_indexes == 0) ex->cfg.max_indexes = DEFAULT_MAX_INDEXES;
  if (ex->cfg.max_fixing_days == 0) ex->cfg.max_fixing_days = DEFAULT_MAX_FIXING_DAYS;
  if (ex->cfg.max_staged_samples == 0) ex->cfg.max_staged_samples = DEFAULT_MAX_STAGED;
  if (ex->cfg.max_staged_samples > HG_INDEX_SAMPLES_MAX)
    ex->cfg.max_staged_samples = HG_INDEX_SAMPLES_MAX;
  ex->sink = sink;
  ex->sink_ctx = sink_ctx;
  ex->last_cycle_day = -1;
  ex->flags_day = -1;
  hg_index_config_default(&ex->icfg);
  /* Delisted contracts stay registered with the clearing (their ledger and
   * any pending day sums), so it holds more than the listed ones. */
  uint32_t clr_instruments = cfg->max_instruments * 2 + 16;
  if (cfg->clearing != NULL) {
    ex->ccfg = *cfg->clearing;
  } else {
    /* The defaults, with tables no larger than this exchange can fill (the
     * clearing touches every page of them at create): at most one record
     * per (account, instrument), and a ledger that starts small and grows. */
    hg_clearing_config_default(&ex->ccfg);
    uint64_t pairs = (uint64_t)cfg->max_accounts * clr_instruments;
    if (pairs < ex->ccfg.max_positions) ex->ccfg.max_positions = (uint32_t)pairs;
    if (ex->ccfg.ledger_initial > 4096) ex->ccfg.ledger_initial = 4096;
  }
  ex->ccfg.max_accounts = cfg->max_accounts;
  ex->ccfg.max_instruments = clr_instruments;
  if (ex->ccfg.max_groups < ex->cfg.max_indexes) ex->ccfg.max_groups = ex->cfg.max_indexes;
  if (ex->ccfg.max_firms < cfg->max_accounts) ex->ccfg.max_firms = cfg->max_accounts;
  ex->instr = calloc(cfg->max_instruments, sizeof *ex->instr);
  ex->acct = calloc(cfg->max_accounts, sizeof *ex->acct);
  ex->scratch = calloc(cfg->max_book_orders, sizeof *ex->scratch);
  ex->tops = calloc(cfg->max_instruments, sizeof *ex->tops);
  ex->idx = calloc(ex->cfg.max_indexes, sizeof *ex->idx);
  int hints = hg_idhint_init(&ex->instr_dir, cfg->max_instruments) |
              hg_idhint_init(&ex->acct_dir, cfg->max_accounts);
  if (ex->instr == NULL || ex->acct == NULL || ex->scratch == NULL || ex->tops == NULL ||
      ex->idx == NULL || hints != 0) {
    free_all(ex);
    return -ENOMEM;
  }
  int rc = hg_clearing_create(&ex->ccfg, &ex->clr);
  if (rc != 0) {
    ex->clr = NULL;
    free_all(ex);
    return rc == -ENOMEM ? rc : HG_EINVAL;
  }
  *out = ex;
  return 0;
}

/* Back to the just-created state after a failed restore, which never
 * installs its clearing state: the empty one is still in place. */
void hg_ex__reset(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_instr; i++) hg_book_destroy(ex->instr[i].book);
  hg_ex__spread_free(ex);
  memset(ex->instr, 0, (size_t)ex->cfg.max_instruments * sizeof *ex->instr);
  memset(ex->acct, 0, (size_t)ex->cfg.max_accounts * sizeof *ex->acct);
  ex->n_instr = 0;
  ex->n_acct = 0;
  hg_ex__free_indexes(ex);
  hg_index_registry_dispose(&ex->reg);
  memset(&ex->reg, 0, sizeof ex->reg);
  ex->n_staged = 0;
  ex->last_seq = 0;
  ex->last_ts = 0;
  ex->sessions = 0;
  ex->last_session_date = 0;
  ex->last_cycle_day = -1;
  ex->flags_day = -1;
  ex->fault = 0;
  memset(&ex->cur, 0, sizeof ex->cur);
}

void hg_exchange_destroy(hg_exchange_t *ex) {
  if (ex == NULL) return;
  free_all(ex);
}

void hg_exchange_set_sink(hg_exchange_t *ex, hg_exchange_sink_fn sink, void *sink_ctx) {
  ex->sink = sink;
  ex->sink_ctx = sink_ctx;
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

void hg_ex__submit(hg_exchange_t *ex, hg_book_t *book, const hg_cmd_new_order_t *c, hg_oid_t oid,
                   hg_price_t price) {
  hg_order_new_t o = {
      .order_id = oid,
      .client_order_id = c->client_order_id,
      .account = c->account,
      .smp_group = c->smp_group,
      .price = price,
      .qty = c->qty,
      .side = c->side,
      .type = c->type,
      .tif = c->tif,
      .stp = c->stp,
      .post_only = c->post_only,
      .session_scoped = c->session_scoped != 0,
      .ts = ex->cur.ts,
  };
  hg_book_submit(book, &o);
}

static void do_new_order(hg_exchange_t *ex, const hg_cmd_new_order_t *c) {
  hg_oid_t oid = ex->cur.seq;
  /* A market order's price means nothing and is not journaled; zero it so
   * that applying the struct and replaying its encoding emit the same. */
  hg_price_t price = c->type == HG_ORD_MARKET ? 0 : c->price;
  uint16_t rej = 0;
  hg_clearing_result_t res;
  memset(&res, 0, sizeof res);
  instrument_t *inst = instr_find(ex, c->instrument_id);
  if (__builtin_expect(inst == NULL && ex->n_spr != 0, 0)) {
    spread_t *sp = hg_ex__spread_find(ex, c->instrument_id);
    if (sp != NULL) {
      hg_ex__spread_new_order(ex, sp, c);
      return;
    }
  }
  if (inst == NULL) rej = HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (inst->halted) rej = HG_XREJ_INSTRUMENT_HALTED;
  else if (ex->cur.ts >= inst->cutoff_ts) rej = HG_XREJ_TRADING_ENDED;
  else if (acct_find(ex, c->account) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else rej = risk_check_new_order(ex, inst, c, price, &res);
  if (rej != 0) {
    hg_ex__emit_order_reject(ex, HG_CMD_NEW, rej, c->instrument_id, c->account, oid,
                             c->client_order_id, c->side, price, c->qty,
                             res.reason != 0 ? &res : NULL);
    return;
  }
  /* The band is the clearing's (CONTRACT.md 4.5): the check above refused a
   * limit outside it, and a market order walks no further than its edge. */
  if (c->type == HG_ORD_MARKET) price = c->side == HG_SIDE_BUY ? res.band_high : res.band_low;
  hg_ex__submit(ex, inst->book, c, oid, price);
}

static void do_cancel(hg_exchange_t *ex, const hg_cmd_cancel_t *c) {
  instrument_t *inst = instr_find(ex, c->instrument_id);
  hg_book_t *book = inst != NULL ? inst->book : NULL;
  if (__builtin_expect(inst == NULL && ex->n_spr != 0, 0)) {
    spread_t *sp = hg_ex__spread_find(ex, c->instrument_id);
    if (sp != NULL) book = sp->book;
  }
  uint16_t rej = 0;
  if (book == NULL) rej = HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (acct_find(ex, c->account) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  if (rej != 0) {
    hg_ex__emit_order_reject(ex, HG_CMD_CANCEL, rej, c->instrument_id, c->account, c->order_id, 0,
                             0, 0, 0, NULL);
    return;
  }
  hg_book_cancel(book, c->order_id, c->account, ex->cur.ts);
}

static void do_replace(hg_exchange_t *ex, const hg_cmd_replace_t *c) {
  instrument_t *inst = instr_find(ex, c->instrument_id);
  uint16_t rej = 0;
  hg_clearing_result_t res;
  memset(&res, 0, sizeof res);
  if (inst == NULL)
    rej = ex->n_spr != 0 && hg_ex__spread_find(ex, c->instrument_id) != NULL
              ? HG_XREJ_SPREAD_ORDER
              : HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (inst->halted) rej = HG_XREJ_INSTRUMENT_HALTED;
  else if (ex->cur.ts >= inst->cutoff_ts) rej = HG_XREJ_TRADING_ENDED;
  else if (acct_find(ex, c->account) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else rej = risk_check_replace(ex, inst, c, &res);
  if (rej != 0) {
    hg_ex__emit_order_reject(ex, HG_CMD_REPLACE, rej, c->instrument_id, c->account, c->order_id, 0,
                             0, c->new_price, c->new_qty, res.reason != 0 ? &res : NULL);
    return;
  }
  hg_book_replace(inst->book, c->order_id, c->account, c->new_price, c->new_qty, ex->cur.ts);
  ex->cur.replace_leaves = 0;
}

static void do_mass_cancel(hg_exchange_t *ex, const hg_cmd_mass_cancel_t *c) {
  if (c->sides > HG_SIDES_BOTH) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, c->instrument_id, c->account);
    return;
  }
  if (acct_find(ex, c->account) == NULL) {
    hg_ex__emit_reject(ex, HG_XREJ_UNKNOWN_ACCOUNT, c->instrument_id, c->account);
    return;
  }
  if (c->instrument_id != 0) {
    instrument_t *inst = instr_find(ex, c->instrument_id);
    spread_t *sp = inst == NULL ? hg_ex__spread_find(ex, c->instrument_id) : NULL;
    if (inst == NULL && sp == NULL) {
      hg_ex__emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, c->instrument_id, c->account);
      return;
    }
    hg_book_mass_cancel(inst != NULL ? inst->book : sp->book, c->account, c->sides, ex->cur.ts);
    return;
  }
  for (uint32_t i = 0; i < ex->n_instr; i++)
    hg_book_mass_cancel(ex->instr[i].book, c->account, c->sides, ex->cur.ts);
  for (uint32_t i = 0; i < ex->n_spr; i++)
    hg_book_mass_cancel(ex->spr[i].book, c->account, c->sides, ex->cur.ts);
}

/* Fills the delivery-month fields of inst from (year, month). */
void hg_ex__set_month(hg_exchange_t *ex, instrument_t *inst, uint32_t year, uint32_t month) {
  inst->year = (uint16_t)year;
  inst->month = (uint8_t)month;
  inst->first_day = hg_civil_to_day(year, month, 1);
  inst->last_day = inst->first_day + (int32_t)hg_civil_month_days(year, month) - 1;
  inst->cutoff_ts = (uint64_t)inst->last_day * HG_NS_PER_DAY + ex->ccfg.cycle_time_of_day_ns;
}

static int in_delivery(const instrument_t *inst, int32_t day) {
  return day >= inst->first_day && day <= inst->last_day;
}

/* Sets every listed contract's delivery-month flag in the clearing for UTC
 * day `day`: the 20% rate and the 1,000-contract limit apply from the first
 * second of the month's first calendar day (settlement/CONTRACT.md section
 * 1), whether or not a daily cycle ran the day before. O(contracts), once
 * per day (hg_exchange_apply); a delisted contract keeps its flag until it
 * is listed again (it holds no position and no order: the flag counts for
 * nothing meanwhile). */
static void set_delivery_flags(hg_exchange_t *ex, int32_t day) {
  for (uint32_t i = 0; i < ex->n_instr; i++)
    clr_fault(ex, hg_clearing_set_delivery(ex->clr, ex->instr[i].id,
                                           in_delivery(&ex->instr[i], day)));
  ex->flags_day = day;
}

/*
 * Lists one contract: the checks of LIST_INSTRUMENT, then the book, then the
 * clearing registration (product group = index of (GPU, grade), delivery
 * month from the symbol, the listing's ref_price as its initial price,
 * which ranks after the index: settlement/README.md). Emits HG_XEV_LISTED or
 * one reject; returns 0 or -ENOMEM.
 */
int hg_ex__list_one(hg_exchange_t *ex, const char *symbol, const hg_book_params_t *params) {
  uint32_t id = params->instrument_id;
  if (id == 0 || !hg_symbol_ok(symbol, HG_SYMBOL_MAX + 1)) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  int found;
  uint32_t pos = instr_pos(ex, id, &found);
  for (uint32_t i = 0; i < ex->n_instr && !found; i++)
    if (strcmp(ex->instr[i].symbol, symbol) == 0) found = 1;
  if (!found) found = hg_ex__spread_taken(ex, id, symbol);
  if (found) {
    hg_ex__emit_reject(ex, HG_XREJ_INSTRUMENT_EXISTS, id, 0);
    return 0;
  }
  if (ex->n_instr == ex->cfg.max_instruments || params->max_orders > ex->cfg.max_book_orders ||
      params->max_accounts > ex->cfg.max_accounts) {
    hg_ex__emit_reject(ex, HG_XREJ_CAPACITY, id, 0);
    return 0;
  }
  char gpu[HG_INDEX_GPU_MAX], grade[HG_INDEX_GRADE_MAX];
  uint32_t year, month;
  bool token;
  /* A token group's contracts only in the TOK form, a GPU group's never
   * (settlement/CONTRACT.md 7.3). */
  if (!hg_symbol_parse_product(symbol, &token, gpu, sizeof gpu, grade, sizeof grade, &year,
                               &month) ||
      token != hg_ex__idx_is_token(gpu, grade) || params->ref_price < 0 ||
      params->ref_price > HG_CLR_PRICE_MAX) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  int slot = hg_ex__idx_get(ex, gpu, grade);
  if (slot == -ENOMEM) return slot;
  if (slot < 0) {
    hg_ex__emit_reject(ex, HG_XREJ_CAPACITY, id, 0);
    return 0;
  }
  /* A delisted contract stays registered with the clearing: relisting its id
   * must name the same contract. */
  hg_clearing_instrument_info_t info;
  int known = hg_clearing_instrument_info(ex->clr, id, &info) == 0;
  if (known && (info.inst.group_id != (uint32_t)slot + 1 || info.inst.year != year ||
                info.inst.month != month || info.settled)) {
    hg_ex__emit_reject(ex, HG_XREJ_INSTRUMENT_EXISTS, id, 0);
    return 0;
  }
  hg_book_t *book = NULL;
  int rc = hg_book_create(params, hg_ex__book_sink, ex, &book);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  hg_book_set_event_buffer(book, &ex->bev.book);
  instrument_t tmp;
  memset(&tmp, 0, sizeof tmp);
  hg_ex__set_month(ex, &tmp, year, month);
  int32_t today = hg_civil_day_of_ns(ex->cur.ts);
  if (!known) {
    hg_clearing_instrument_t ci = {.id = id, .group_id = (uint32_t)slot + 1,
                                   .year = (uint16_t)year, .month = (uint8_t)month,
                                   .in_delivery = (uint8_t)in_delivery(&tmp, today),
                                   .tick_value = 0, .last_dsp = params->ref_price};
    rc = hg_clearing_instrument_add(ex->clr, &ci);
    if (rc != 0) {
      hg_book_destroy(book);
      if (rc == -ENOMEM) return rc;
      hg_ex__emit_reject(ex, rc == HG_EFULL ? HG_XREJ_CAPACITY : HG_XREJ_INVALID_PARAMS, id, 0);
      return 0;
    }
  } else {
    /* Relisted: its flag is the one it had when it was delisted. */
    clr_fault(ex, hg_clearing_set_delivery(ex->clr, id, in_delivery(&tmp, today)));
  }
  memmove(&ex->instr[pos + 1], &ex->instr[pos], (size_t)(ex->n_instr - pos) * sizeof *ex->instr);
  instrument_t *inst = &ex->instr[pos];
  *inst = tmp;
  inst->id = id;
  memcpy(inst->symbol, symbol, strlen(symbol) + 1);
  inst->book = book;
  inst->index = (uint32_t)slot;
  ex->n_instr++;
  instr_dir_refresh(ex, pos);
  hg_ex__idx_push_fixings(ex, (uint32_t)slot);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_LISTED);
  ev.instrument_id = id;
  memcpy(ev.listed.symbol, inst->symbol, sizeof ev.listed.symbol);
  ev.listed.params = *params;
  hg_ex__ref_band(ex, id, &ev.price, &ev.lo, &ev.hi);
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

static int do_list(hg_exchange_t *ex, const hg_cmd_list_instrument_t *c) {
  if (memchr(c->symbol, '\0', sizeof c->symbol) == NULL) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, c->params.instrument_id, 0);
    return 0;
  }
  if (c->leg_token_id != 0 || c->leg_gpu_id != 0 || c->ratio_token != 0 || c->ratio_gpu != 0 ||
      strncmp(c->symbol, "MARGIN.", 7) == 0)
    return hg_ex__spread_list(ex, c);
  return hg_ex__list_one(ex, c->symbol, &c->params);
}

static void collect_order(void *ctx, const hg_book_order_t *o) {
  hg_exchange_t *ex = ctx;
  /* A book never holds more than its max_orders, which listing capped at
   * the scratch size; the check keeps a broken invariant from writing past. */
  if (ex->scratch_n < ex->cfg.max_book_orders)
    ex->scratch[ex->scratch_n++] = (order_ref_t){o->order_id, o->account};
}

/* Cancels every resting order of a book (a contract's or a spread's) in time priority, relabelled
 * with reason; returns how many. */
uint32_t hg_ex__cancel_all(hg_exchange_t *ex, hg_book_t *book, uint16_t reason) {
  ex->scratch_n = 0;
  hg_book_foreach(book, collect_order, ex);
  ex->cur.relabel = reason;
  for (uint32_t i = 0; i < ex->scratch_n; i++)
    hg_book_cancel(book, ex->scratch[i].order_id, ex->scratch[i].account, ex->cur.ts);
  ex->cur.relabel = 0;
  uint32_t n = ex->scratch_n;
  ex->scratch_n = 0;
  return n;
}

void hg_ex__remove_instrument(hg_exchange_t *ex, uint32_t pos) {
  hg_book_destroy(ex->instr[pos].book);
  memmove(&ex->instr[pos], &ex->instr[pos + 1],
          (size_t)(ex->n_instr - pos - 1) * sizeof *ex->instr);
  ex->n_instr--;
  memset(&ex->instr[ex->n_instr], 0, sizeof *ex->instr);
  instr_dir_refresh(ex, pos);
}

static void do_delist(hg_exchange_t *ex, uint32_t id) {
  int found;
  uint32_t pos = instr_pos(ex, id, &found);
  if (!found) {
    spread_t *sp = hg_ex__spread_find(ex, id);
    if (sp != NULL) hg_ex__spread_delist(ex, sp, HG_XCXL_DELISTED);
    else hg_ex__emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, id, 0);
    return;
  }
  /* Open positions are closed by expiry and final settlement, never by a
   * delisting. */
  hg_clearing_instrument_info_t info;
  if (hg_clearing_instrument_info(ex->clr, id, &info) != 0 || info.open_interest != 0) {
    hg_ex__emit_reject(ex, HG_XREJ_NOT_IN_STATE, id, 0);
    return;
  }
  uint32_t cancelled = hg_ex__cancel_all(ex, ex->instr[pos].book, HG_XCXL_DELISTED);
  hg_ex__remove_instrument(ex, pos);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_DELISTED);
  ev.instrument_id = id;
  ev.amount = cancelled;
  ex->sink(ex->sink_ctx, &ev);
}

static void do_halt(hg_exchange_t *ex, uint32_t id, int halt) {
  instrument_t *inst = instr_find(ex, id);
  spread_t *sp = inst == NULL ? hg_ex__spread_find(ex, id) : NULL;
  uint8_t *halted = inst != NULL ? &inst->halted : sp != NULL ? &sp->halted : NULL;
  if (halted == NULL) {
    hg_ex__emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, id, 0);
    return;
  }
  if (*halted == (halt ? 1 : 0)) {
    hg_ex__emit_reject(ex, HG_XREJ_NOT_IN_STATE, id, 0);
    return;
  }
  *halted = halt ? 1 : 0;
  emit_simple(ex, halt ? HG_XEV_HALTED : HG_XEV_RESUMED, id, 0);
}

int64_t hg_ex__expire_day_orders(hg_exchange_t *ex) {
  int64_t expired = 0;
  for (uint32_t i = 0; i < ex->n_instr; i++)
    expired += hg_book_expire_day(ex->instr[i].book, ex->cur.ts);
  return expired;
}

static void do_end_of_session(hg_exchange_t *ex, const hg_cmd_end_of_session_t *c) {
  int64_t expired = hg_ex__expire_day_orders(ex);
  for (uint32_t i = 0; i < ex->n_spr; i++)
    expired += hg_book_expire_day(ex->spr[i].book, ex->cur.ts);
  ex->sessions++;
  ex->last_session_date = c->session_date;
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_SESSION_END);
  ev.amount = expired;
  ex->sink(ex->sink_ctx, &ev);
}

/* The sessions that entered the session-scoped orders are gone (a restart):
 * their orders go, book by book in instrument id order. */
static void do_sessions_ended(hg_exchange_t *ex) {
  int64_t cancelled = 0;
  for (uint32_t i = 0; i < ex->n_instr; i++)
    cancelled += hg_book_cancel_scoped(ex->instr[i].book, ex->cur.ts);
  for (uint32_t i = 0; i < ex->n_spr; i++)
    cancelled += hg_book_cancel_scoped(ex->spr[i].book, ex->cur.ts);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_SESSIONS_ENDED);
  ev.amount = cancelled;
  ex->sink(ex->sink_ctx, &ev);
}

static int do_add_account(hg_exchange_t *ex, const hg_cmd_add_account_t *c) {
  if (c->account == 0 || c->firm == 0) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, 0, c->account);
    return 0;
  }
  int found;
  uint32_t pos = acct_pos(ex, c->account, &found);
  if (found) {
    hg_ex__emit_reject(ex, HG_XREJ_ACCOUNT_EXISTS, 0, c->account);
    return 0;
  }
  if (ex->n_acct == ex->cfg.max_accounts) {
    hg_ex__emit_reject(ex, HG_XREJ_CAPACITY, 0, c->account);
    return 0;
  }
  int rc = hg_clearing_account_add(ex->clr, c->account, c->firm);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    hg_ex__emit_reject(ex, rc == HG_EFULL ? HG_XREJ_CAPACITY : HG_XREJ_ACCOUNT_EXISTS, 0,
                       c->account);
    return 0;
  }
  memmove(&ex->acct[pos + 1], &ex->acct[pos], (size_t)(ex->n_acct - pos) * sizeof *ex->acct);
  ex->acct[pos] = (account_t){.id = c->account, .firm = c->firm};
  ex->n_acct++;
  acct_dir_refresh(ex, pos);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_ACCOUNT_ADDED);
  ev.account = c->account;
  ev.firm = c->firm;
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

static int64_t cash_of(const hg_exchange_t *ex, hg_account_t id) {
  hg_clearing_account_info_t info;
  if (hg_clearing_account_info(ex->clr, id, &info) != 0) return 0;
  return info.balance;
}

static void do_cash(hg_exchange_t *ex, const hg_cmd_cash_t *c, int deposit) {
  account_t *acct = acct_find(ex, c->account);
  uint16_t rej = 0;
  hg_clearing_result_t res;
  memset(&res, 0, sizeof res);
  if (acct == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else if (c->amount <= 0) rej = HG_XREJ_INVALID_AMOUNT;
  else if (deposit) {
    int rc = hg_clearing_deposit(ex->clr, c->account, c->amount, ex->cur.seq, ex->cur.ts);
    if (rc == HG_EOVERFLOW) rej = HG_XREJ_INVALID_AMOUNT;
    else if (rc != 0) rej = HG_XREJ_CAPACITY;
  } else {
    int rc = hg_clearing_withdraw(ex->clr, c->account, c->amount, ex->cur.seq, ex->cur.ts, &res);
    if (rc != 0) rej = HG_XREJ_CAPACITY;
    else if (res.reason == HG_CLR_REJ_INSUFFICIENT_MARGIN || res.reason == HG_CLR_REJ_MARGIN_CALL)
      rej = HG_XREJ_INSUFFICIENT_FUNDS; /* called: nothing may leave (CONTRACT.md 4.7) */
    else if (res.reason != HG_CLR_REJ_NONE) rej = HG_XREJ_INVALID_AMOUNT;
  }
  hg_exchange_event_t ev;
  if (rej != 0) {
    event_init(ex, &ev, HG_XEV_REJECTED);
    ev.reason = rej;
    ev.account = c->account;
    ev.amount = c->amount;
    ev.balance = acct != NULL ? cash_of(ex, c->account) : 0;
    ev.margin = res.initial_margin;
    ex->sink(ex->sink_ctx, &ev);
    return;
  }
  event_init(ex, &ev, deposit ? HG_XEV_DEPOSIT : HG_XEV_WITHDRAWAL);
  ev.account = c->account;
  ev.firm = acct->firm;
  ev.amount = c->amount;
  ev.balance = cash_of(ex, c->account);
  ex->sink(ex->sink_ctx, &ev);
}

void hg_exchange_prefetch(const hg_exchange_t *ex, const hg_command_t *cmd, int stage) {
  uint32_t instrument_id;
  hg_oid_t oid;
  switch (cmd->type) {
  case HG_COMMAND_NEW_ORDER: instrument_id = cmd->u.new_order.instrument_id; oid = cmd->seq; break;
  case HG_COMMAND_CANCEL: instrument_id = cmd->u.cancel.instrument_id; oid = cmd->u.cancel.order_id; break;
  case HG_COMMAND_REPLACE:
    instrument_id = cmd->u.replace.instrument_id;
    oid = cmd->u.replace.order_id;
    break;
  default: return;
  }
  const instrument_t *in = instr_find(ex, instrument_id);
  if (in == NULL || in->book == NULL) return;
  if (stage == 0) {
    hg_book_prefetch_order(in->book, oid);
  } else if (cmd->type == HG_COMMAND_NEW_ORDER) {
    hg_clearing_prefetch_account(ex->clr, cmd->u.new_order.account);
    const hg_cmd_new_order_t *c = &cmd->u.new_order;
    hg_order_new_t o = {.order_id = oid, .account = c->account, .price = c->price,
                        .qty = c->qty, .side = c->side, .type = c->type, .tif = c->tif};
    hg_book_prefetch_new(in->book, &o);
  } else {
    hg_book_prefetch_links(in->book, oid);
  }
}

int hg_exchange_apply(hg_exchange_t *ex, const hg_command_t *cmd) {
  if (cmd->seq == 0 || cmd->seq <= ex->last_seq) return HG_ESTATE;
  if (cmd->type < HG_COMMAND_NEW_ORDER || cmd->type > HG_COMMAND_LAST ||
      (cmd->type > HG_COMMAND_LAST_SETTLEMENT && cmd->type < HG_COMMAND_SESSIONS_ENDED))
    return HG_EINVAL;
  if (ex->fault != 0) return HG_ECORRUPT;
  ex->cur = (current_t){.seq = cmd->seq, .ts = cmd->ts, .type = cmd->type};
  /* The delivery-month flags follow the command's own UTC date, so every
   * check of this command (orders, replaces, withdrawals) sees the month it
   * is stamped in. */
  int32_t day = hg_civil_day_of_ns(cmd->ts);
  int flags_moved = day != ex->flags_day;
  if (flags_moved) set_delivery_flags(ex, day);
  int rc = 0;
  switch ((hg_command_type_t)cmd->type) {
  case HG_COMMAND_NEW_ORDER: do_new_order(ex, &cmd->u.new_order); break;
  case HG_COMMAND_CANCEL: do_cancel(ex, &cmd->u.cancel); break;
  case HG_COMMAND_REPLACE: do_replace(ex, &cmd->u.replace); break;
  case HG_COMMAND_MASS_CANCEL: do_mass_cancel(ex, &cmd->u.mass_cancel); break;
  case HG_COMMAND_LIST_INSTRUMENT: rc = do_list(ex, &cmd->u.list); break;
  case HG_COMMAND_DELIST_INSTRUMENT: do_delist(ex, cmd->u.instrument.instrument_id); break;
  case HG_COMMAND_HALT: do_halt(ex, cmd->u.instrument.instrument_id, 1); break;
  case HG_COMMAND_RESUME: do_halt(ex, cmd->u.instrument.instrument_id, 0); break;
  case HG_COMMAND_END_OF_SESSION: do_end_of_session(ex, &cmd->u.end_of_session); break;
  case HG_COMMAND_ADD_ACCOUNT: rc = do_add_account(ex, &cmd->u.add_account); break;
  case HG_COMMAND_DEPOSIT: do_cash(ex, &cmd->u.cash, 1); break;
  case HG_COMMAND_WITHDRAW: do_cash(ex, &cmd->u.cash, 0); break;
  case HG_COMMAND_SET_PROVIDER_GRADE:
  case HG_COMMAND_PUBLISH_SAMPLES:
  case HG_COMMAND_DISCARD_SAMPLES:
  case HG_COMMAND_COMPUTE_FIXING:
  case HG_COMMAND_PUBLISH_FIXING:
  case HG_COMMAND_FINALIZE_FIXING:
  case HG_COMMAND_DAILY_SETTLEMENT:
  case HG_COMMAND_EXPIRE:
  case HG_COMMAND_LIST_CURVE:
  case HG_COMMAND_MARK:
  case HG_COMMAND_FUND_DEPOSIT: rc = hg_ex__apply_settlement(ex, cmd); break;
  case HG_COMMAND_SESSIONS_ENDED: do_sessions_ended(ex); break;
  }
  if (rc != 0) {
    /* An error changes nothing: the flags go back to the last applied
     * command's day. */
    if (flags_moved) set_delivery_flags(ex, hg_civil_day_of_ns(ex->last_ts));
    return rc;
  }
  ex->last_seq = cmd->seq;
  ex->last_ts = cmd->ts;
  /* A clearing call that failed on the book path left the two out of step:
   * the command is applied (its events are out) but nothing more may be. */
  if (ex->fault != 0) return HG_ECORRUPT;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

uint64_t hg_exchange_last_seq(const hg_exchange_t *ex) { return ex->last_seq; }

const hg_book_t *hg_exchange_book(const hg_exchange_t *ex, uint32_t instrument_id) {
  const instrument_t *inst = instr_find(ex, instrument_id);
  if (inst == NULL) {
    const spread_t *sp = hg_ex__spread_find((hg_exchange_t *)ex, instrument_id);
    return sp != NULL ? sp->book : NULL;
  }
  return inst->book;
}

/* A listed contract's or spread's halted flag and symbol, or HG_ENOTFOUND. */
static int instrument_head(const hg_exchange_t *ex, uint32_t id, int *halted, char *sym) {
  const instrument_t *inst = instr_find(ex, id);
  const spread_t *sp = inst == NULL ? hg_ex__spread_find((hg_exchange_t *)ex, id) : NULL;
  if (inst == NULL && sp == NULL) return HG_ENOTFOUND;
  if (halted != NULL) *halted = inst != NULL ? inst->halted : sp->halted;
  if (sym != NULL) memcpy(sym, inst != NULL ? inst->symbol : sp->symbol, HG_SYMBOL_MAX + 1);
  return 0;
}

int hg_exchange_instrument_status(const hg_exchange_t *ex, uint32_t instrument_id, int *halted) {
  return instrument_head(ex, instrument_id, halted, NULL);
}

int hg_exchange_instrument_symbol(const hg_exchange_t *ex, uint32_t instrument_id, char *sym) {
  return instrument_head(ex, instrument_id, NULL, sym);
}

uint32_t hg_exchange_instrument_count(const hg_exchange_t *ex) { return ex->n_instr + ex->n_spr; }

int hg_exchange_account(const hg_exchange_t *ex, hg_account_t account, int64_t *cash,
                        uint32_t *firm) {
  const account_t *a = acct_find(ex, account);
  if (a == NULL) return HG_ENOTFOUND;
  *cash = cash_of(ex, account);
  *firm = a->firm;
  return 0;
}

static void info_head(hg_exchange_instrument_info_t *info, uint32_t id, uint8_t halted,
                      const char *symbol, const hg_book_t *book) {
  memset(info, 0, sizeof *info);
  info->id = id;
  info->halted = halted;
  memcpy(info->symbol, symbol, sizeof info->symbol);
  info->params = *hg_book_params(book);
  info->orders = hg_book_order_count(book);
}

void hg_exchange_foreach_instrument(const hg_exchange_t *ex,
                                    void (*fn)(void *ctx,
                                               const hg_exchange_instrument_info_t *info),
                                    void *ctx) {
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    const instrument_t *inst = &ex->instr[i];
    hg_exchange_instrument_info_t info;
    info_head(&info, inst->id, inst->halted, inst->symbol, inst->book);
    hg_ex__ref_band(ex, inst->id, &info.ref_price, &info.band_low, &info.band_high);
    fn(ctx, &info);
  }
  for (uint32_t i = 0; i < ex->n_spr; i++) { /* spreads after the contracts */
    const spread_t *sp = &ex->spr[i];
    hg_exchange_instrument_info_t info;
    info_head(&info, sp->id, sp->halted, sp->symbol, sp->book);
    info.leg_token_id = sp->leg_t;
    info.leg_gpu_id = sp->leg_g;
    info.ratio_token = sp->n_t;
    info.ratio_gpu = sp->n_g;
    fn(ctx, &info);
  }
}

void hg_exchange_foreach_account(const hg_exchange_t *ex,
                                 void (*fn)(void *ctx, const hg_exchange_account_info_t *info),
                                 void *ctx) {
  for (uint32_t i = 0; i < ex->n_acct; i++) {
    hg_exchange_account_info_t info = {ex->acct[i].id, ex->acct[i].firm,
                                       cash_of(ex, ex->acct[i].id)};
    fn(ctx, &info);
  }
}

const hg_clearing_t *hg_exchange_clearing(const hg_exchange_t *ex) { return ex->clr; }

int32_t hg_exchange_last_cycle_day(const hg_exchange_t *ex) { return ex->last_cycle_day; }

const char *hg_xreject_str(int reason) {
  switch (reason) {
#define HG_XREJECT_STR(name, num, msg) \
  case num:                            \
    return msg;
    HG_XREJECT_MAP(HG_XREJECT_STR)
#undef HG_XREJECT_STR
  default:
    if (HG_CLR_IS_REJECT(reason)) return hg_clearing_reject_str(reason);
    return hg_reject_str(reason);
  }
}
