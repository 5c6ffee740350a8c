/*
 * The inference-margin spread MARGIN.<CLASS>.<GRADE>.<YYYY-MM>
 * (settlement/CONTRACT.md 7.4 and 5.14).
 *
 * Design: as an exchange lists an inter-commodity spread, a spread is an
 * instrument with its own book, in which spread orders (price = the net
 * spread price S in ticks) match only each other, price-time, like any
 * book. The spread has no record in the clearing: every quantity it moves
 * is moved on its two legs, n_t token contracts and n_g GPU-hour contracts
 * per spread contract, in opposite directions (buying the spread buys the
 * token leg and sells the GPU leg):
 *  - a spread order's resting quantity is open quantity on both legs
 *    (ACCEPTED adds, CANCELLED removes), so the legs' margin counts it;
 *  - a spread fill is one clearing fill per leg, at the published leg
 *    prices: the GPU leg at its reference R_g, the token leg at
 *    P_t = floor((2 n_g (S + R_g) + n_t) / (2 n_t)); both fills are booked
 *    in the same call or neither trades (the pre-trade check reserved the
 *    records), and they stay out of the DSP window (HG_CLR_FILL_NO_DSP);
 *  - the pre-trade check refuses a spread order whose token leg at its limit
 *    price falls outside the token band (the GPU leg at R_g is always
 *    inside its own), then checks each leg's margin and limits with the
 *    clearing's own check, the token leg counted open while the GPU leg is
 *    checked.
 * The clearing knows the pairs (hg_clearing_spreads_set, kept in step by
 * hg_ex__spread_sync) and gives complete packages the inter-commodity
 * credit of 7.4 in every margin it computes.
 * Spreads live in their own small table (ex->spr, by id), not among the
 * contracts: nothing that walks the contracts (DSP, VM, marks, delivery
 * flags, the clearing's tables) ever meets one, and the order path of a
 * plain contract gains nothing. The table is serialized after the clearing
 * (exchange_snap.c, format version 4).
 */
#include "exchange_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/names.h"

#define SPREAD_PREFIX "MARGIN."
#define SPREAD_PREFIX_LEN 7

spread_t *hg_ex__spread_find(hg_exchange_t *ex, uint32_t id) {
  for (uint32_t i = 0; i < ex->n_spr; i++)
    if (ex->spr[i].id == id) return &ex->spr[i];
  return NULL;
}

int hg_ex__spread_taken(const hg_exchange_t *ex, uint32_t id, const char *symbol) {
  for (uint32_t i = 0; i < ex->n_spr; i++)
    if (ex->spr[i].id == id || (symbol != NULL && strcmp(ex->spr[i].symbol, symbol) == 0))
      return 1;
  return 0;
}

void hg_ex__spread_sync(hg_exchange_t *ex) {
  hg_clearing_spread_t pairs[HG_EX_MAX_SPREADS];
  for (uint32_t i = 0; i < ex->n_spr; i++)
    pairs[i] = (hg_clearing_spread_t){ex->spr[i].leg_t, ex->spr[i].leg_g, ex->spr[i].n_t,
                                      ex->spr[i].n_g};
  clr_fault(ex, hg_clearing_spreads_set(ex->clr, pairs, ex->n_spr));
}

int64_t hg_ex__spread_token_price(const spread_t *sp, int64_t s, int64_t rg) {
  /* |S + R_g| <= 2 x HG_CLR_PRICE_MAX and n <= 100: no overflow */
  int64_t num = 2 * (int64_t)sp->n_g * (s + rg) + (int64_t)sp->n_t;
  int64_t den = 2 * (int64_t)sp->n_t;
  int64_t q = num / den;
  if (num % den != 0 && num < 0) q--; /* floor */
  return q;
}

/* ------------------------------------------------------------------------ */
/* Listing                                                                   */
/* ------------------------------------------------------------------------ */

int hg_ex__spread_list(hg_exchange_t *ex, const hg_cmd_list_instrument_t *c) {
  const hg_book_params_t *params = &c->params;
  uint32_t id = params->instrument_id;
  const char *symbol = c->symbol;
  if (id == 0 || !hg_symbol_ok(symbol, HG_SYMBOL_MAX + 1) ||
      strncmp(symbol, SPREAD_PREFIX, SPREAD_PREFIX_LEN) != 0 || c->ratio_token == 0 ||
      c->ratio_gpu == 0 || c->ratio_token > HG_EX_SPREAD_RATIO_MAX ||
      c->ratio_gpu > HG_EX_SPREAD_RATIO_MAX) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  int taken = instr_find(ex, id) != NULL || hg_ex__spread_taken(ex, id, symbol);
  for (uint32_t i = 0; i < ex->n_instr && !taken; i++)
    if (strcmp(ex->instr[i].symbol, symbol) == 0) taken = 1;
  hg_clearing_instrument_info_t info;
  if (!taken && hg_clearing_instrument_info(ex->clr, id, &info) == 0) taken = 1;
  if (taken) {
    hg_ex__emit_reject(ex, HG_XREJ_INSTRUMENT_EXISTS, id, 0);
    return 0;
  }
  if (ex->n_spr == HG_EX_MAX_SPREADS || params->max_orders > ex->cfg.max_book_orders ||
      params->max_accounts > ex->cfg.max_accounts) {
    hg_ex__emit_reject(ex, HG_XREJ_CAPACITY, id, 0);
    return 0;
  }
  /* The legs: TOK.<rest> and a GPU-hour contract of the same month. */
  const instrument_t *lt = instr_find(ex, c->leg_token_id);
  const instrument_t *lg = instr_find(ex, c->leg_gpu_id);
  char want[HG_SYMBOL_MAX + 8];
  memcpy(want, "TOK.", 4);
  memcpy(want + 4, symbol + SPREAD_PREFIX_LEN, strlen(symbol) - SPREAD_PREFIX_LEN + 1);
  char gpu[HG_INDEX_GPU_MAX], grade[HG_INDEX_GRADE_MAX];
  uint32_t y, m;
  bool token = true;
  int legs_ok = lt != NULL && lg != NULL && strcmp(lt->symbol, want) == 0 &&
                hg_symbol_parse_product(lg->symbol, &token, gpu, sizeof gpu, grade,
                                        sizeof grade, &y, &m) &&
                !token && lt->year == lg->year && lt->month == lg->month;
  /* Each leg of the largest order is an order the contracts accept
   * (section 4.5's order size). */
  int64_t nmax = c->ratio_token > c->ratio_gpu ? c->ratio_token : c->ratio_gpu;
  if (!legs_ok || params->max_order_qty <= 0 ||
      params->max_order_qty > ex->ccfg.max_order_qty / nmax) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  hg_book_t *book = NULL;
  int rc = hg_book_create(params, hg_ex__spread_sink, ex, &book);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    hg_ex__emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  hg_book_set_event_buffer(book, &ex->bev.book);
  uint32_t pos = 0;
  while (pos < ex->n_spr && ex->spr[pos].id < id) pos++;
  memmove(&ex->spr[pos + 1], &ex->spr[pos], (size_t)(ex->n_spr - pos) * sizeof *ex->spr);
  spread_t *sp = &ex->spr[pos];
  memset(sp, 0, sizeof *sp);
  sp->id = id;
  memcpy(sp->symbol, symbol, strlen(symbol) + 1);
  sp->book = book;
  sp->leg_t = lt->id;
  sp->leg_g = lg->id;
  sp->n_t = c->ratio_token;
  sp->n_g = c->ratio_gpu;
  sp->last_day = lt->last_day;
  sp->cutoff_ts = lt->cutoff_ts;
  ex->n_spr++;
  hg_ex__spread_sync(ex);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_LISTED);
  ev.instrument_id = id;
  memcpy(ev.listed.symbol, sp->symbol, sizeof ev.listed.symbol);
  ev.listed.params = *params;
  ev.amount = sp->leg_t;
  ev.balance = sp->leg_g;
  ev.qty = sp->n_t;
  ev.margin = sp->n_g;
  ex->sink(ex->sink_ctx, &ev);
  return 0;
}

void hg_ex__spread_delist(hg_exchange_t *ex, spread_t *sp, uint16_t reason) {
  uint32_t n = hg_ex__cancel_all(ex, sp->book, reason);
  uint32_t id = sp->id;
  hg_book_destroy(sp->book);
  uint32_t pos = (uint32_t)(sp - ex->spr);
  memmove(&ex->spr[pos], &ex->spr[pos + 1], (size_t)(ex->n_spr - pos - 1) * sizeof *ex->spr);
  ex->n_spr--;
  memset(&ex->spr[ex->n_spr], 0, sizeof *ex->spr);
  hg_ex__spread_sync(ex);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_DELISTED);
  ev.instrument_id = id;
  ev.amount = n;
  ex->sink(ex->sink_ctx, &ev);
}

void hg_ex__spread_drop_leg(hg_exchange_t *ex, uint32_t leg) {
  for (uint32_t i = 0; i < ex->n_spr;) {
    if (ex->spr[i].leg_t == leg || ex->spr[i].leg_g == leg)
      hg_ex__spread_delist(ex, &ex->spr[i], HG_XCXL_EXPIRED);
    else
      i++;
  }
}

int64_t hg_ex__spread_cycle(hg_exchange_t *ex, int32_t day) {
  int64_t n = 0;
  for (uint32_t i = 0; i < ex->n_spr; i++) {
    spread_t *sp = &ex->spr[i];
    n += hg_book_expire_day(sp->book, ex->cur.ts);
    if (sp->last_day <= day) n += hg_ex__cancel_all(ex, sp->book, HG_XCXL_EXPIRED);
  }
  return n;
}

void hg_ex__spread_free(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_spr; i++) hg_book_destroy(ex->spr[i].book);
  memset(ex->spr, 0, sizeof ex->spr);
  ex->n_spr = 0;
}

/* ------------------------------------------------------------------------ */
/* Orders                                                                    */
/* ------------------------------------------------------------------------ */

static int other_side(int side) { return side == HG_SIDE_BUY ? HG_SIDE_SELL : HG_SIDE_BUY; }

/* The pre-trade check of a spread order at its limit price: 0 or the
 * reject, numbers in *res. */
static uint16_t spread_check(hg_exchange_t *ex, const spread_t *sp, const hg_cmd_new_order_t *c,
                             hg_clearing_result_t *res) {
  const hg_book_params_t *p = hg_book_params(sp->book);
  if (c->type != HG_ORD_LIMIT) return HG_XREJ_SPREAD_ORDER;
  /* the book's own field checks give the book's reject */
  if (c->side > HG_SIDE_SELL || c->tif > HG_TIF_FOK || c->stp > HG_STP_NONE ||
      c->post_only > 1 || c->qty <= 0 || c->qty > p->max_order_qty || c->price < p->min_price ||
      c->price > p->max_price)
    return 0;
  int64_t rg, glo, ghi;
  hg_ex__ref_band(ex, sp->leg_g, &rg, &glo, &ghi);
  if (rg <= 0) {
    res->reason = HG_CLR_REJ_NO_REFERENCE;
    return (uint16_t)HG_CLR_REJ_NO_REFERENCE;
  }
  int64_t pt = hg_ex__spread_token_price(sp, c->price, rg);
  if (pt < 1 || pt > HG_CLR_PRICE_MAX) return HG_XREJ_SPREAD_LEG_BAND;
  if (hg_clearing_check_band(ex->clr, sp->leg_t, pt, res) != 0) return HG_XREJ_RISK;
  if (res->reason != 0 || res->ref_price == 0) {
    res->reason = HG_CLR_REJ_PRICE_BAND;
    return HG_XREJ_SPREAD_LEG_BAND;
  }
  hg_qty_t qt = c->qty * (hg_qty_t)sp->n_t, qg = c->qty * (hg_qty_t)sp->n_g;
  if (hg_clearing_check_order(ex->clr, c->account, sp->leg_t, c->side, qt, pt, res) != 0)
    return HG_XREJ_RISK;
  if (res->reason != 0) return (uint16_t)res->reason;
  /* the GPU leg is checked with the token leg counted open */
  if (hg_clearing_open_add(ex->clr, c->account, sp->leg_t, c->side, qt) != 0) return HG_XREJ_RISK;
  int rc = hg_clearing_check_order(ex->clr, c->account, sp->leg_g, other_side(c->side), qg, rg,
                                   res);
  clr_fault(ex, hg_clearing_open_remove(ex->clr, c->account, sp->leg_t, c->side, qt));
  if (rc != 0) return HG_XREJ_RISK;
  return (uint16_t)res->reason;
}

void hg_ex__spread_new_order(hg_exchange_t *ex, spread_t *sp, const hg_cmd_new_order_t *c) {
  hg_oid_t oid = ex->cur.seq;
  hg_price_t price = c->type == HG_ORD_MARKET ? 0 : c->price;
  hg_clearing_result_t res;
  memset(&res, 0, sizeof res);
  uint16_t rej = 0;
  const instrument_t *lt = instr_find(ex, sp->leg_t), *lg = instr_find(ex, sp->leg_g);
  /* a leg that cannot trade stops the spread: no leg trades without the other */
  if (sp->halted || lt == NULL || lg == NULL || lt->halted || lg->halted)
    rej = HG_XREJ_INSTRUMENT_HALTED;
  else if (ex->cur.ts >= sp->cutoff_ts) rej = HG_XREJ_TRADING_ENDED;
  else if (acct_find(ex, c->account) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else rej = spread_check(ex, sp, c, &res);
  if (rej != 0) {
    hg_ex__emit_order_reject(ex, HG_CMD_NEW, rej, sp->id, c->account, oid, c->client_order_id,
                             c->side, price, c->qty, res.reason != 0 ? &res : NULL);
    return;
  }
  hg_ex__submit(ex, sp->book, c, oid, price);
}

/* ------------------------------------------------------------------------ */
/* Book sink                                                                 */
/* ------------------------------------------------------------------------ */

static spread_t *spread_of(hg_exchange_t *ex, uint32_t id) { return hg_ex__spread_find(ex, id); }

/* Resting quantity of the spread: open on both legs, opposite sides. */
static void legs_open(hg_exchange_t *ex, const spread_t *sp, hg_account_t a, int side, hg_qty_t q,
                      int add) {
  hg_qty_t qt = q * (hg_qty_t)sp->n_t, qg = q * (hg_qty_t)sp->n_g;
  if (add) {
    clr_fault(ex, hg_clearing_open_add(ex->clr, a, sp->leg_t, side, qt));
    clr_fault(ex, hg_clearing_open_add(ex->clr, a, sp->leg_g, other_side(side), qg));
  } else {
    clr_fault(ex, hg_clearing_open_remove(ex->clr, a, sp->leg_t, side, qt));
    clr_fault(ex, hg_clearing_open_remove(ex->clr, a, sp->leg_g, other_side(side), qg));
  }
}

static void emit_leg(hg_exchange_t *ex, const spread_t *sp, const hg_book_event_t *f,
                     uint32_t leg, hg_account_t a, int side, hg_price_t px, hg_qty_t q) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_SPREAD_LEG);
  ev.instrument_id = leg;
  ev.account = a;
  ev.kind = (uint8_t)side;
  ev.price = px;
  ev.qty = q;
  ev.lo = sp->id;
  ev.hi = f->price;
  ev.amount = (int64_t)(a == f->account ? f->order_id : f->maker_order_id);
  ex->sink(ex->sink_ctx, &ev);
}

void hg_ex__spread_sink(void *ctx, const hg_book_event_t *bev) {
  hg_exchange_t *ex = ctx;
  spread_t *sp = spread_of(ex, bev->instrument_id);
  if (sp == NULL) {
    clr_fault(ex, HG_ECORRUPT);
    return;
  }
  hg_account_t buyer = 0, seller = 0;
  hg_price_t pt = 0, rg = 0;
  hg_qty_t qt = 0, qg = 0;
  switch (bev->type) {
  case HG_EV_ACCEPTED: legs_open(ex, sp, bev->account, bev->side, bev->qty, 1); break;
  case HG_EV_CANCELLED:
    if (bev->qty > 0) legs_open(ex, sp, bev->account, bev->side, bev->qty, 0);
    break;
  case HG_EV_FILL: {
    buyer = bev->side == HG_SIDE_BUY ? bev->account : bev->maker_account;
    seller = bev->side == HG_SIDE_BUY ? bev->maker_account : bev->account;
    int64_t lo, hi;
    hg_ex__ref_band(ex, sp->leg_g, &rg, &lo, &hi);
    pt = hg_ex__spread_token_price(sp, bev->price, rg);
    /* a resting order was checked at entry; a reference that moved since
     * (a cycle) cannot take a leg below one tick */
    if (pt < 1) pt = 1;
    if (pt > HG_CLR_PRICE_MAX) pt = HG_CLR_PRICE_MAX;
    qt = bev->qty * (hg_qty_t)sp->n_t;
    qg = bev->qty * (hg_qty_t)sp->n_g;
    unsigned fl = HG_CLR_FILL_BUY_RESTING | HG_CLR_FILL_SELL_RESTING | HG_CLR_FILL_NO_DSP;
    clr_fault(ex, hg_clearing_fill(ex->clr, sp->leg_t, buyer, seller, qt, pt, ex->cur.ts, fl));
    clr_fault(ex, hg_clearing_fill(ex->clr, sp->leg_g, seller, buyer, qg, rg, ex->cur.ts, fl));
    break;
  }
  default: break;
  }
  hg_exchange_event_t *ev = book_event(ex, bev);
  ex->sink(ex->sink_ctx, ev);
  if (bev->type != HG_EV_FILL) return;
  hg_book_event_t f = ev->book; /* the leg events reuse nothing of ev */
  emit_leg(ex, sp, &f, sp->leg_t, buyer, HG_SIDE_BUY, pt, qt);
  emit_leg(ex, sp, &f, sp->leg_t, seller, HG_SIDE_SELL, pt, qt);
  emit_leg(ex, sp, &f, sp->leg_g, seller, HG_SIDE_BUY, rg, qg);
  emit_leg(ex, sp, &f, sp->leg_g, buyer, HG_SIDE_SELL, rg, qg);
}
