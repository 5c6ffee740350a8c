/*
 * refbook.c - the reference order book: obviously correct, deliberately slow.
 *
 * Structure: every live resting order is one hg_book_order_t in a single
 * growable array, kept in time-priority order (an order is appended when it
 * comes to rest, and a replace that loses priority removes it and appends it
 * again). There are no levels, no id tables, no bitmaps: a level is simply
 * "the orders of this side at this price", its FIFO is their array order, and
 * every question (best price, level quantity, is this id live, how many
 * accounts have orders) is answered by scanning the array. Removal shifts the
 * tail down so the array order never changes.
 *
 * Why: this file is the oracle of the differential test against engine/book.c.
 * Each step of hourglass/book.h's contract appears here once, in the order the
 * header lists it, so a reader can check the code against the text without
 * having to trust any data structure.
 */
#include "refbook.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"

struct ref_book {
  hg_book_params_t params;
  hg_book_sink_fn sink;
  void *sink_ctx;
  hg_book_order_t *orders; /* owned by the book; live orders, oldest first */
  size_t count;
  size_t cap;
};

/* An order while it is being matched: the incoming order of a new or replace. */
typedef struct taker {
  hg_book_order_t o;  /* price = its limit, leaves = open quantity */
  uint8_t stp;        /* resolved: never HG_STP_DEFAULT */
  uint8_t is_market;
} taker_t;

/* ---- small helpers --------------------------------------------------- */

static hg_book_event_t new_event(const ref_book_t *b, uint8_t type, uint64_t ts) {
  hg_book_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.type = type;
  ev.instrument_id = b->params.instrument_id;
  ev.ts = ts;
  return ev;
}

static void emit(ref_book_t *b, const hg_book_event_t *ev) { b->sink(b->sink_ctx, ev); }

static int opposite(int side) { return side == HG_SIDE_BUY ? HG_SIDE_SELL : HG_SIDE_BUY; }

/* Is resting price p better than q for a resting order on side? */
static int better(int side, hg_price_t p, hg_price_t q) {
  return side == HG_SIDE_BUY ? p > q : p < q;
}

/* Does an incoming order on taker_side with this limit trade at resting price p? */
static int crosses(int taker_side, hg_price_t limit, hg_price_t p) {
  return taker_side == HG_SIDE_BUY ? p <= limit : p >= limit;
}

static int self_match(const hg_book_order_t *a, const hg_book_order_t *b) {
  return a->account == b->account || (a->smp_group != 0 && a->smp_group == b->smp_group);
}

static long find_order(const ref_book_t *b, hg_oid_t id) {
  for (size_t i = 0; i < b->count; i++)
    if (b->orders[i].order_id == id) return (long)i;
  return -1;
}

static int clordid_live(const ref_book_t *b, hg_account_t acct, uint64_t clordid) {
  for (size_t i = 0; i < b->count; i++)
    if (b->orders[i].account == acct && b->orders[i].client_order_id == clordid) return 1;
  return 0;
}

static int account_live(const ref_book_t *b, hg_account_t acct) {
  for (size_t i = 0; i < b->count; i++)
    if (b->orders[i].account == acct) return 1;
  return 0;
}

/* Number of distinct accounts with live orders: an account is counted at its
 * first (oldest) order. */
static uint32_t live_accounts(const ref_book_t *b) {
  uint32_t n = 0;
  for (size_t i = 0; i < b->count; i++) {
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++) seen = b->orders[j].account == b->orders[i].account;
    n += !seen;
  }
  return n;
}

/* First (oldest) order at (side, price), or -1. */
static long first_at(const ref_book_t *b, int side, hg_price_t price) {
  for (size_t i = 0; i < b->count; i++)
    if (b->orders[i].side == side && b->orders[i].price == price) return (long)i;
  return -1;
}

static hg_qty_t level_qty(const ref_book_t *b, int side, hg_price_t price) {
  hg_qty_t q = 0;
  for (size_t i = 0; i < b->count; i++)
    if (b->orders[i].side == side && b->orders[i].price == price) q += b->orders[i].leaves;
  return q;
}

/* Best price of side strictly worse than `after` (any price if !has_after).
 * Returns 1 and *out, or 0 if there is none. */
static int next_price(const ref_book_t *b, int side, int has_after, hg_price_t after,
                      hg_price_t *out) {
  int found = 0;
  hg_price_t best = 0;
  for (size_t i = 0; i < b->count; i++) {
    const hg_book_order_t *o = &b->orders[i];
    if (o->side != side) continue;
    if (has_after && !better(side, after, o->price)) continue;
    if (!found || better(side, o->price, best)) best = o->price;
    found = 1;
  }
  if (found) *out = best;
  return found;
}

static void remove_at(ref_book_t *b, size_t i) {
  memmove(&b->orders[i], &b->orders[i + 1], (b->count - i - 1) * sizeof b->orders[0]);
  b->count--;
}

static void append(ref_book_t *b, const hg_book_order_t *o) {
  if (b->count == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    hg_book_order_t *p = realloc(b->orders, cap * sizeof *p);
    if (!p) {
      fprintf(stderr, "refbook: out of memory\n");
      abort();
    }
    b->orders = p;
    b->cap = cap;
  }
  b->orders[b->count++] = *o;
}

/* ---- events ---------------------------------------------------------- */

static void emit_level(ref_book_t *b, int side, hg_price_t price, uint64_t ts) {
  hg_book_event_t ev = new_event(b, HG_EV_LEVEL, ts);
  ev.side = (uint8_t)side;
  ev.price = price;
  ev.qty = level_qty(b, side, price);
  emit(b, &ev);
}

static void emit_cancelled(ref_book_t *b, const hg_book_order_t *o, int reason, uint64_t ts) {
  hg_book_event_t ev = new_event(b, HG_EV_CANCELLED, ts);
  ev.reason = (uint16_t)reason;
  ev.order_id = o->order_id;
  ev.client_order_id = o->client_order_id;
  ev.account = o->account;
  ev.side = o->side;
  ev.price = o->price;
  ev.qty = o->leaves;
  ev.leaves = 0;
  emit(b, &ev);
}

static void emit_reject(ref_book_t *b, int cmd, int reason, hg_oid_t id, uint64_t clordid,
                        hg_account_t acct, int side, hg_price_t price, hg_qty_t qty,
                        uint64_t ts) {
  hg_book_event_t ev = new_event(b, HG_EV_REJECTED, ts);
  ev.cmd = (uint8_t)cmd;
  ev.reason = (uint16_t)reason;
  ev.order_id = id;
  ev.client_order_id = clordid;
  ev.account = acct;
  ev.side = (uint8_t)side;
  ev.price = price;
  ev.qty = qty;
  emit(b, &ev);
}

/* Cancels the resting order at index i: CANCELLED, removal, then LEVEL. */
static void cancel_at(ref_book_t *b, size_t i, int reason, uint64_t ts) {
  hg_book_order_t o = b->orders[i];
  emit_cancelled(b, &o, reason, ts);
  remove_at(b, i);
  emit_level(b, o.side, o.price, ts);
}

/* ---- price rules ----------------------------------------------------- */

static int out_of_range(const ref_book_t *b, hg_price_t p) {
  return p < b->params.min_price || p > b->params.max_price;
}

static hg_price_t clamp_price(const ref_book_t *b, __int128 p) {
  if (p < b->params.min_price) return b->params.min_price;
  if (p > b->params.max_price) return b->params.max_price;
  return (hg_price_t)p;
}

/* The limit a market order gets (step 3): its cap, clamped, or none. */
static hg_price_t market_limit(const ref_book_t *b, int side, hg_price_t cap) {
  if (cap <= 0) return side == HG_SIDE_BUY ? b->params.max_price : b->params.min_price;
  return clamp_price(b, cap);
}

/* Would a limit at price on side cross the best opposite price? */
static int would_cross(const ref_book_t *b, int side, hg_price_t price) {
  hg_price_t best;
  if (!next_price(b, opposite(side), 0, 0, &best)) return 0;
  return crosses(side, price, best);
}

static uint8_t resolve_stp(const ref_book_t *b, uint8_t stp) {
  if (stp != HG_STP_DEFAULT) return stp;
  return b->params.default_stp != HG_STP_DEFAULT ? b->params.default_stp
                                                  : (uint8_t)HG_STP_CANCEL_INCOMING;
}

/* ---- matching -------------------------------------------------------- */

/* Step 4: how much a FOK could execute now. */
static hg_qty_t fok_executable(const ref_book_t *b, const taker_t *t) {
  int opp = opposite(t->o.side);
  hg_qty_t total = 0;
  hg_price_t p = 0;
  int has = 0;
  while (next_price(b, opp, has, p, &p) && crosses(t->o.side, t->o.price, p)) {
    has = 1;
    for (size_t i = 0; i < b->count; i++) {
      const hg_book_order_t *r = &b->orders[i];
      if (r->side != opp || r->price != p) continue;
      if (t->stp != HG_STP_NONE && self_match(&t->o, r)) {
        if (t->stp == HG_STP_CANCEL_RESTING) continue;
        return total; /* CANCEL_INCOMING, CANCEL_BOTH: the walk ends */
      }
      total += r->leaves;
    }
  }
  return total;
}

/* Step 5. Returns 1 if the walk was stopped by self-trade prevention. */
static int match(ref_book_t *b, taker_t *t, uint64_t ts) {
  int opp = opposite(t->o.side);
  int stopped = 0;
  hg_price_t p;
  while (t->o.leaves > 0 && !stopped && next_price(b, opp, 0, 0, &p) &&
         crosses(t->o.side, t->o.price, p)) {
    long i;
    while (t->o.leaves > 0 && !stopped && (i = first_at(b, opp, p)) >= 0) {
      hg_book_order_t *r = &b->orders[i];
      if (t->stp != HG_STP_NONE && self_match(&t->o, r)) {
        if (t->stp == HG_STP_CANCEL_INCOMING) {
          stopped = 1;
          continue;
        }
        emit_cancelled(b, r, HG_CXL_SELF_TRADE, ts);
        remove_at(b, (size_t)i);
        if (t->stp == HG_STP_CANCEL_BOTH) stopped = 1;
        continue;
      }
      hg_qty_t q = t->o.leaves < r->leaves ? t->o.leaves : r->leaves;
      t->o.leaves -= q;
      r->leaves -= q;
      hg_book_event_t ev = new_event(b, HG_EV_FILL, ts);
      ev.order_id = t->o.order_id;
      ev.client_order_id = t->o.client_order_id;
      ev.account = t->o.account;
      ev.maker_order_id = r->order_id;
      ev.maker_client_order_id = r->client_order_id;
      ev.maker_account = r->account;
      ev.side = t->o.side;
      ev.price = r->price;
      ev.qty = q;
      ev.leaves = t->o.leaves;
      ev.maker_leaves = r->leaves;
      emit(b, &ev);
      if (r->leaves == 0) remove_at(b, (size_t)i);
    }
    emit_level(b, opp, p, ts); /* the walk leaves this level */
  }
  return stopped;
}

/* Step 6. */
static void finish(ref_book_t *b, taker_t *t, int stopped, uint64_t ts) {
  if (stopped) {
    emit_cancelled(b, &t->o, HG_CXL_SELF_TRADE, ts);
  } else if (t->o.leaves > 0) {
    if (t->is_market || t->o.tif == HG_TIF_IOC || t->o.tif == HG_TIF_FOK) {
      emit_cancelled(b, &t->o, HG_CXL_IOC_REMAINDER, ts);
    } else {
      append(b, &t->o);
      emit_level(b, t->o.side, t->o.price, ts);
    }
  }
}

/* ---- public API ------------------------------------------------------ */

int ref_book_create(const hg_book_params_t *p, hg_book_sink_fn sink, void *sink_ctx,
                    ref_book_t **out) {
  if (!p || !sink || !out) return HG_EINVAL;
  if (p->min_price < 1 || p->max_price < p->min_price ||
      (uint64_t)(p->max_price - p->min_price) >= HG_BOOK_MAX_LEVELS || p->max_order_qty < 1 ||
      p->ref_price < 0 || p->max_orders < 1 || p->max_accounts < 1 ||
      p->default_stp > HG_STP_NONE)
    return HG_EINVAL;
  ref_book_t *b = calloc(1, sizeof *b);
  if (!b) return -ENOMEM;
  b->params = *p;
  b->sink = sink;
  b->sink_ctx = sink_ctx;
  *out = b;
  return 0;
}

void ref_book_destroy(ref_book_t *b) {
  if (!b) return;
  free(b->orders);
  free(b);
}


/* Step 1: the reject reason of a new order, or HG_REJ_NONE. */
static int validate_new(const ref_book_t *b, const hg_order_new_t *o) {
  /* post_only is documented as "0 or 1": any other value is a field out of
   * range too, checked with the other enumerations. */
  if (o->side > HG_SIDE_SELL || o->type > HG_ORD_MARKET || o->tif > HG_TIF_FOK ||
      o->stp > HG_STP_NONE || o->post_only > 1)
    return HG_REJ_INVALID_FIELD;
  if (o->type == HG_ORD_MARKET && (o->tif == HG_TIF_GTC || o->tif == HG_TIF_DAY))
    return HG_REJ_INVALID_TIF;
  if (o->post_only &&
      (o->tif == HG_TIF_IOC || o->tif == HG_TIF_FOK || o->type == HG_ORD_MARKET))
    return HG_REJ_INVALID_TIF;
  if (o->order_id == 0) return HG_REJ_INVALID_FIELD;
  if (o->qty <= 0) return HG_REJ_INVALID_QTY;
  if (o->qty > b->params.max_order_qty) return HG_REJ_QTY_TOO_LARGE;
  if (o->type == HG_ORD_LIMIT) {
    if (out_of_range(b, o->price)) return HG_REJ_PRICE_OUT_OF_RANGE;
  }
  if (find_order(b, o->order_id) >= 0) return HG_REJ_DUPLICATE_ORDER_ID;
  if (clordid_live(b, o->account, o->client_order_id)) return HG_REJ_DUPLICATE_CLORDID;
  if (o->post_only && would_cross(b, o->side, o->price)) return HG_REJ_POST_ONLY_WOULD_CROSS;
  if (o->tif == HG_TIF_GTC || o->tif == HG_TIF_DAY) {
    if (b->count >= b->params.max_orders) return HG_REJ_BOOK_FULL;
    if (!account_live(b, o->account) && live_accounts(b) >= b->params.max_accounts)
      return HG_REJ_BOOK_FULL;
  }
  return HG_REJ_NONE;
}

void ref_book_submit(ref_book_t *b, const hg_order_new_t *o) {
  int reason = validate_new(b, o);
  if (reason != HG_REJ_NONE) {
    emit_reject(b, HG_CMD_NEW, reason, o->order_id, o->client_order_id, o->account, o->side,
                o->price, o->qty, o->ts);
    return;
  }

  taker_t t;
  memset(&t, 0, sizeof t);
  t.o.order_id = o->order_id;
  t.o.client_order_id = o->client_order_id;
  t.o.account = o->account;
  t.o.smp_group = o->smp_group;
  t.o.price = o->type == HG_ORD_MARKET ? market_limit(b, o->side, o->price) : o->price;
  t.o.qty = o->qty;
  t.o.leaves = o->qty;
  t.o.ts = o->ts;
  t.o.side = o->side;
  t.o.tif = o->tif;
  t.o.stp = o->stp;
  t.o.post_only = o->post_only;
  t.stp = resolve_stp(b, o->stp);
  t.is_market = o->type == HG_ORD_MARKET;

  hg_book_event_t ev = new_event(b, HG_EV_ACCEPTED, o->ts);
  ev.order_id = t.o.order_id;
  ev.client_order_id = t.o.client_order_id;
  ev.account = t.o.account;
  ev.side = t.o.side;
  ev.price = t.o.price;
  ev.qty = t.o.qty;
  ev.leaves = t.o.leaves;
  emit(b, &ev);

  if (t.o.tif == HG_TIF_FOK && fok_executable(b, &t) < t.o.qty) {
    emit_cancelled(b, &t.o, HG_CXL_FOK_UNFILLED, o->ts);
    return;
  }
  int stopped = match(b, &t, o->ts);
  finish(b, &t, stopped, o->ts);
}

void ref_book_cancel(ref_book_t *b, hg_oid_t id, hg_account_t acct, uint64_t ts) {
  long i = find_order(b, id);
  if (i < 0 || b->orders[i].account != acct) {
    emit_reject(b, HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, id, 0, acct, 0, 0, 0, ts);
    return;
  }
  cancel_at(b, (size_t)i, HG_CXL_USER, ts);
}

void ref_book_replace(ref_book_t *b, hg_oid_t id, hg_account_t acct, hg_price_t new_price,
                      hg_qty_t new_qty, uint64_t ts) {
  long i = find_order(b, id);
  if (i < 0 || b->orders[i].account != acct) {
    emit_reject(b, HG_CMD_REPLACE, HG_REJ_UNKNOWN_ORDER, id, 0, acct, 0, new_price, new_qty, ts);
    return;
  }
  hg_book_order_t *o = &b->orders[i];
  int reason = HG_REJ_NONE;
  if (new_qty <= 0)
    reason = HG_REJ_INVALID_QTY;
  else if (new_qty > b->params.max_order_qty)
    reason = HG_REJ_QTY_TOO_LARGE;
  else if (out_of_range(b, new_price))
    reason = HG_REJ_PRICE_OUT_OF_RANGE;
  else if (o->post_only && would_cross(b, o->side, new_price))
    reason = HG_REJ_POST_ONLY_WOULD_CROSS;
  if (reason != HG_REJ_NONE) {
    /* Fields "as requested": a replace request carries no client order id. */
    emit_reject(b, HG_CMD_REPLACE, reason, id, 0, acct, 0, new_price, new_qty, ts);
    return;
  }

  int keep = new_price == o->price && new_qty <= o->leaves;
  hg_book_event_t ev = new_event(b, HG_EV_REPLACED, ts);
  ev.order_id = o->order_id;
  ev.client_order_id = o->client_order_id;
  ev.account = o->account;
  ev.side = o->side;
  ev.price = new_price;
  ev.qty = new_qty;
  ev.leaves = new_qty;
  ev.priority_kept = (uint8_t)keep;

  if (keep) {
    o->qty = new_qty;
    o->leaves = new_qty;
    emit(b, &ev);
    emit_level(b, o->side, o->price, ts);
    return;
  }

  taker_t t;
  memset(&t, 0, sizeof t);
  t.o = *o;
  remove_at(b, (size_t)i);
  emit(b, &ev);
  emit_level(b, t.o.side, t.o.price, ts); /* the old level, without the order */
  t.o.price = new_price;
  t.o.qty = new_qty;
  t.o.leaves = new_qty;
  t.o.ts = ts;
  t.stp = resolve_stp(b, t.o.stp);
  int stopped = match(b, &t, ts);
  finish(b, &t, stopped, ts);
}

static uint32_t cancel_where(ref_book_t *b, int (*pick)(const hg_book_order_t *, const void *),
                             const void *arg, int reason, uint64_t ts) {
  uint32_t n = 0;
  size_t i = 0;
  while (i < b->count) {
    if (pick(&b->orders[i], arg)) {
      cancel_at(b, i, reason, ts); /* the next order slides into index i */
      n++;
    } else {
      i++;
    }
  }
  return n;
}

typedef struct mass_filter {
  hg_account_t account;
  int sides;
} mass_filter_t;

static int pick_mass(const hg_book_order_t *o, const void *arg) {
  const mass_filter_t *f = arg;
  return o->account == f->account && (f->sides == HG_SIDES_BOTH || o->side == f->sides);
}

static int pick_day(const hg_book_order_t *o, const void *arg) {
  (void)arg;
  return o->tif == HG_TIF_DAY;
}

uint32_t ref_book_mass_cancel(ref_book_t *b, hg_account_t account, int sides, uint64_t ts) {
  mass_filter_t f = {account, sides};
  return cancel_where(b, pick_mass, &f, HG_CXL_MASS_CANCEL, ts);
}

uint32_t ref_book_expire_day(ref_book_t *b, uint64_t ts) {
  return cancel_where(b, pick_day, NULL, HG_CXL_EXPIRY, ts);
}

int ref_book_best(const ref_book_t *b, hg_side_t side, hg_price_t *price, hg_qty_t *qty) {
  hg_price_t p;
  if (!next_price(b, side, 0, 0, &p)) return HG_ENOTFOUND;
  *price = p;
  *qty = level_qty(b, side, p);
  return 0;
}

hg_qty_t ref_book_qty_at(const ref_book_t *b, hg_side_t side, hg_price_t price) {
  return level_qty(b, side, price);
}

size_t ref_book_depth(const ref_book_t *b, hg_side_t side, hg_book_level_t *out, size_t n) {
  size_t k = 0;
  hg_price_t p = 0;
  while (k < n && next_price(b, side, k > 0, p, &p)) {
    memset(&out[k], 0, sizeof out[k]);
    out[k].price = p;
    for (size_t i = 0; i < b->count; i++) {
      if (b->orders[i].side != side || b->orders[i].price != p) continue;
      out[k].qty += b->orders[i].leaves;
      out[k].orders++;
    }
    k++;
  }
  return k;
}

uint32_t ref_book_order_count(const ref_book_t *b) { return (uint32_t)b->count; }

void ref_book_foreach(const ref_book_t *b, void (*fn)(void *ctx, const hg_book_order_t *o),
                      void *ctx) {
  for (size_t i = 0; i < b->count; i++) fn(ctx, &b->orders[i]);
}
