/*
 * book.c - price-time order book and matcher (contract: hourglass/book.h).
 *
 * Layout. Every byte is allocated in hg_book_create() (the big arrays as
 * zero-filled mappings, backed as they are first touched: see arr_alloc);
 * commands only move indices around.
 *  - Price levels: one array per side indexed directly by price - min_price.
 *    A level holds the head and tail of an intrusive FIFO of orders, its
 *    aggregate quantity and its order count.
 *  - Each side has a hierarchical bitmap of non-empty levels (64-bit words,
 *    up to four levels for 2^24 prices). The best price of a side is cached;
 *    when the best level empties, the next one is found with ctz/clz over
 *    the bitmap in O(log64 L), so a book whose prices drift far or jump
 *    costs the same as a static one, and depth walks are O(n log L).
 *  - Orders live in a preallocated pool addressed by uint32 index, two to
 *    four slots per order of capacity. An order rests at the slot named by
 *    the low bits of its id when that slot is free (ids usually come in
 *    sequence: in the bench workloads 95% do), otherwise at a free slot
 *    from a stack; so a cancel usually finds its order with a single load,
 *    not a table probe followed by a load. The low bits taken (the
 *    preferred range) start at START_RANGE and double once half as many
 *    orders are live (pref_grow), so orders rest in a part of the pool that
 *    follows the live count, not the capacity: with ids in random order a
 *    book for a million orders would otherwise scatter ten thousand over
 *    128 MiB, each new one on a line never touched. Each slot also counts
 *    the live orders that prefer it but rest elsewhere, so a lookup that
 *    misses the preferred slot skips the table when that count is 0 (see
 *    order_find).
 *    What matching and cancels read is one 64-byte line per order (the
 *    session-scoped flag and the slot's count included); entry number,
 *    original quantity and timestamp sit in a parallel cold array.
 *    An order is linked into two intrusive doubly linked lists: its
 *    level's FIFO and its account's list (for mass cancel); position in
 *    both is time priority. Time priority across the book (expire_day,
 *    foreach, snapshots) is the entry number, a counter bumped each time an
 *    order rests: those rare walks sort the live orders by it instead of
 *    every order paying for a third list (two more random neighbours to
 *    touch on each removal).
 *  - Accounts with live orders have a record in a fixed array (free list),
 *    found through an open-addressing table keyed by account id. The record
 *    is released when the account's last order leaves.
 *  - order_id -> slot and (account, client_order_id) -> slot are
 *    open-addressing tables of 8-byte (tag, slot) entries with linear
 *    probing, a fixed multiplicative hash and backward-shift deletion,
 *    allocated for a power of two >= 1.5x max_orders; the part in use
 *    starts at START_RANGE entries and doubles before it is 2/3 full
 *    (tables_grow). Both are fallbacks: the first holds only orders not at
 *    their preferred slot; the second is filled for an account only once
 *    it sends a client order id not above all of its live ones (until then
 *    clid_hi answers the duplicate check), and a new id above every live
 *    one needs no probe either.
 *    Tables are only probed, never iterated, so hash layout cannot leak into
 *    any output.
 *  - An incoming order is a local struct (struct taker) while it matches;
 *    it takes a pool slot only if it rests.
 *
 * Ownership: the book (and everything it points to) belongs to the thread
 * that created it; the sink context pointer is owned by the caller.
 */
#include "hourglass/book.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "book_int.h"
#include "book_internal.h"
#include "hourglass/error.h"

/* ------------------------------------------------------------------------ */
/* Hierarchical bitmap                                                        */

static int bm_layout(uint64_t nbits, uint32_t nwords[BM_MAX_DEPTH]) {
  int depth = 0;
  do {
    uint64_t nw = (nbits + 63) / 64;
    nwords[depth++] = (uint32_t)nw;
    nbits = nw;
  } while (nbits > 1 && depth < BM_MAX_DEPTH);
  return depth;
}

static void bm_set(bitmap_t *b, uint64_t i) {
  for (int k = 0; k < b->depth; k++) {
    uint64_t *w = &b->w[k][i >> 6];
    uint64_t old = *w;
    *w = old | (1ull << (i & 63));
    if (old != 0) return;
    i >>= 6;
  }
}

static void bm_clear(bitmap_t *b, uint64_t i) {
  for (int k = 0; k < b->depth; k++) {
    uint64_t *w = &b->w[k][i >> 6];
    *w &= ~(1ull << (i & 63));
    if (*w != 0) return;
    i >>= 6;
  }
}

/* Lowest set bit >= i, or -1. */
static int64_t bm_next(const bitmap_t *b, uint64_t i) {
  int k = 0;
  uint64_t pos = i;
  for (;;) {
    uint64_t wi = pos >> 6;
    if (wi >= b->nwords[k]) return -1;
    uint64_t w = b->w[k][wi] & (~0ull << (pos & 63));
    if (w != 0) {
      pos = (wi << 6) | (uint64_t)__builtin_ctzll(w);
      break;
    }
    pos = wi + 1;
    if (++k == b->depth) return -1;
  }
  while (k > 0) {
    k--;
    pos = (pos << 6) | (uint64_t)__builtin_ctzll(b->w[k][pos]);
  }
  return (int64_t)pos;
}

/* Highest set bit <= i, or -1. */
static int64_t bm_prev(const bitmap_t *b, uint64_t i) {
  int k = 0;
  uint64_t pos = i;
  for (;;) {
    uint64_t wi = pos >> 6;
    unsigned bit = (unsigned)(pos & 63);
    uint64_t mask = bit == 63 ? ~0ull : ((1ull << (bit + 1)) - 1);
    uint64_t w = b->w[k][wi] & mask;
    if (w != 0) {
      pos = (wi << 6) | (uint64_t)(63 - __builtin_clzll(w));
      break;
    }
    if (wi == 0 || ++k == b->depth) return -1;
    pos = wi - 1;
  }
  while (k > 0) {
    k--;
    pos = (pos << 6) | (uint64_t)(63 - __builtin_clzll(b->w[k][pos]));
  }
  return (int64_t)pos;
}

int64_t hg_book__bm_next(const bitmap_t *b, uint64_t i) { return bm_next(b, i); }

/* Next level after idx going away from the best price of side, or -1. */
static inline int64_t level_after(const hg_book_t *b, int side, int64_t idx) {
  if (side == HG_SIDE_BUY) return idx == 0 ? -1 : bm_prev(&b->bm[0], (uint64_t)idx - 1);
  if ((uint64_t)idx + 1 >= b->nlevels) return -1;
  return bm_next(&b->bm[1], (uint64_t)idx + 1);
}

/* ------------------------------------------------------------------------ */
/* Hash tables                                                                */

static void tab_put(const hg_book_t *b, id_ent_t *tab, uint32_t tag, uint32_t slot) {
  uint64_t i = tag_home(b, tag);
  while (tab[i].slot1 != 0) i = (i + 1) & b->id_mask;
  tab[i].tag = tag;
  tab[i].slot1 = slot + 1;
}

/*
 * Doubles the part of both id tables in use. The entries of each go out to
 * scratch memory (the walks' array: max_orders entries of 16 bytes, and a
 * table holds at most one entry per live order) and back in under the new
 * mask. Linear in the old size, once per doubling: amortised over the
 * inserts that filled it.
 */
__attribute__((noinline, cold)) static void tables_grow(hg_book_t *b) {
  assert(!b->walk->busy && b->id_mask < b->id_max_mask);
  id_ent_t *tmp = (id_ent_t *)(void *)b->walk->a;
  uint64_t old = b->id_mask;
  b->id_mask = old * 2 + 1;
  id_ent_t *tabs[2] = {b->oid_tab, b->clid_tab};
  for (int t = 0; t < 2; t++) {
    uint64_t n = 0;
    for (uint64_t i = 0; i <= old; i++) {
      if (tabs[t][i].slot1 == 0) continue;
      tmp[n++] = tabs[t][i];
      tabs[t][i].tag = 0;
      tabs[t][i].slot1 = 0;
    }
    for (uint64_t k = 0; k < n; k++) tab_put(b, tabs[t], tmp[k].tag, tmp[k].slot1 - 1);
  }
}

/* Adds slot under tag to tab (oid_tab or clid_tab), first doubling the
 * tables' part in use if this entry would fill it beyond 2/3. */
static void tab_insert(hg_book_t *b, id_ent_t *tab, uint32_t tag, uint32_t slot) {
  uint64_t *used = tab == b->oid_tab ? &b->oid_used : &b->clid_used;
  if (UNLIKELY((*used + 1) * 3 > (b->id_mask + 1) * 2) && b->id_mask < b->id_max_mask)
    tables_grow(b);
  tab_put(b, tab, tag, slot);
  ++*used;
}

/* Removes the entry of slot (present, with this tag): backward-shift deletion. */
static void tab_erase(hg_book_t *b, id_ent_t *tab, uint32_t tag, uint32_t slot) {
  uint64_t mask = b->id_mask;
  uint64_t i = tag_home(b, tag);
  while (tab[i].slot1 != slot + 1) i = (i + 1) & mask;
  for (uint64_t j = (i + 1) & mask; tab[j].slot1 != 0; j = (j + 1) & mask) {
    uint64_t h = tag_home(b, tab[j].tag);
    /* The entry at j may fill the hole at i only if its probe path passed i. */
    if (((j - h) & mask) >= ((j - i) & mask)) {
      tab[i] = tab[j];
      i = j;
    }
  }
  tab[i].tag = 0;
  tab[i].slot1 = 0;
  --*(tab == b->oid_tab ? &b->oid_used : &b->clid_used);
}

/* Takes a free record for account (caller checked capacity) and indexes it. */
static uint32_t acct_add(hg_book_t *b, hg_account_t account) {
  uint32_t r = b->acct_free;
  acct_t *a = &b->accts[r];
  b->acct_free = a->head;
  a->account = account;
  a->head = a->tail = NIL;
  a->count = 0;
  a->indexed = 0;
  a->clid_hi = 0;
  b->acct_count++;
  uint64_t i = acct_home(b, account);
  while (b->acct_tab[i].rec != NIL) i = (i + 1) & b->acct_mask;
  b->acct_tab[i].account = account;
  b->acct_tab[i].rec = r;
  return r;
}

static void acct_remove(hg_book_t *b, uint32_t r) {
  hg_account_t account = b->accts[r].account;
  uint64_t mask = b->acct_mask;
  uint64_t i = acct_home(b, account);
  while (b->acct_tab[i].rec != r) i = (i + 1) & mask;
  for (uint64_t j = (i + 1) & mask; b->acct_tab[j].rec != NIL; j = (j + 1) & mask) {
    uint64_t h = acct_home(b, b->acct_tab[j].account);
    if (((j - h) & mask) >= ((j - i) & mask)) {
      b->acct_tab[i] = b->acct_tab[j];
      i = j;
    }
  }
  b->acct_tab[i].account = 0;
  b->acct_tab[i].rec = NIL;
  b->accts[r].account = 0;
  b->accts[r].head = b->acct_free;
  b->accts[r].tail = NIL;
  b->acct_free = r;
  b->acct_count--;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                     */

/* The event being built: in the caller's buffer (hg_book_set_event_buffer)
 * or else in `local`, on the emitter's stack. One at a time: each is handed
 * to the sink before the next is begun. */
static inline hg_book_event_t *ev_begin(const hg_book_t *b, hg_book_event_t *local, uint8_t type,
                                        uint64_t ts) {
  hg_book_event_t *ev = b->evbuf != NULL ? b->evbuf : local;
  /* Field by field, not memset or an initialiser: for a 96-byte block
   * the compiler emits `rep stos`, whose start-up cost was the largest
   * stall outside the cache misses (two to three events a message); these
   * stores merge into a dozen plain ones. */
  ev->type = type;
  ev->side = 0;
  ev->cmd = 0;
  ev->priority_kept = 0;
  ev->reason = 0;
  ev->pad_ = 0;
  ev->instrument_id = b->params.instrument_id;
  ev->account = 0;
  ev->maker_account = 0;
  ev->pad2_ = 0;
  ev->order_id = 0;
  ev->client_order_id = 0;
  ev->maker_order_id = 0;
  ev->maker_client_order_id = 0;
  ev->price = 0;
  ev->qty = 0;
  ev->leaves = 0;
  ev->maker_leaves = 0;
  ev->ts = ts;
  return ev;
}

static inline hg_price_t level_price(const hg_book_t *b, int64_t idx) {
  return b->params.min_price + idx;
}

static void emit_level(hg_book_t *b, int side, uint32_t idx, uint64_t ts) {
  hg_book_event_t local;
  hg_book_event_t *ev = ev_begin(b, &local, HG_EV_LEVEL, ts);
  ev->side = (uint8_t)side;
  ev->price = level_price(b, idx);
  ev->qty = b->levels[side][idx].qty;
  b->sink(b->sink_ctx, ev);
}

static void emit_reject(hg_book_t *b, uint8_t cmd, int reason, hg_oid_t id, uint64_t clid,
                        hg_account_t account, uint8_t side, hg_price_t price, hg_qty_t qty,
                        uint64_t ts) {
  hg_book_event_t local;
  hg_book_event_t *ev = ev_begin(b, &local, HG_EV_REJECTED, ts);
  ev->cmd = cmd;
  ev->reason = (uint16_t)reason;
  ev->order_id = id;
  ev->client_order_id = clid;
  ev->account = account;
  ev->side = side;
  ev->price = price;
  ev->qty = qty;
  b->sink(b->sink_ctx, ev);
}

static void emit_order_cancel(hg_book_t *b, const order_t *o, int reason, uint64_t ts) {
  hg_book_event_t local;
  hg_book_event_t *ev = ev_begin(b, &local, HG_EV_CANCELLED, ts);
  ev->reason = (uint16_t)reason;
  ev->order_id = o->id;
  ev->client_order_id = o->clid;
  ev->account = o->account;
  ev->side = o->side;
  ev->price = level_price(b, o->lvl);
  ev->qty = o->leaves;
  b->sink(b->sink_ctx, ev);
}

static void emit_taker_cancel(hg_book_t *b, const struct taker *t, int reason) {
  hg_book_event_t local;
  hg_book_event_t *ev = ev_begin(b, &local, HG_EV_CANCELLED, t->ts);
  ev->reason = (uint16_t)reason;
  ev->order_id = t->id;
  ev->client_order_id = t->clid;
  ev->account = t->account;
  ev->side = t->side;
  ev->price = t->price;
  ev->qty = t->leaves;
  b->sink(b->sink_ctx, ev);
}

/* ------------------------------------------------------------------------ */
/* Order slots                                                                */

/*
 * Slots from `fresh` on have never been handed out other than as a
 * preferred slot; below it, every free slot is on a stack (LIFO: a slot
 * freed recently is likely still in cache). A slot taken because it was an
 * order's preferred slot stays on the stack, marked, and is skipped when
 * popped; so each slot is on the stack at most once, and taking one is
 * amortised O(1). `fresh` only grows, skipping live slots, so the pool
 * needs no initialisation: its pages are mapped as orders first use them.
 * The caller checked that fewer than max_orders orders are live, so when
 * the stack holds no free slot there is one at or above `fresh`.
 */
static uint32_t pool_take(hg_book_t *b, hg_oid_t id) {
  uint32_t s = pref_slot(b, id);
  if (b->pool[s].id == 0) return s;
  while (b->free_top > 0) {
    s = b->free_stack[--b->free_top];
    b->pool[s].stacked = 0;
    if (b->pool[s].id == 0) return s;
  }
  while (b->pool[b->fresh].id != 0) b->fresh++;
  return b->fresh++;
}

static inline void pool_give(hg_book_t *b, uint32_t s) {
  order_t *o = &b->pool[s];
  if (s < b->fresh && !o->stacked) {
    o->stacked = 1;
    b->free_stack[b->free_top++] = s;
  }
}

/* ------------------------------------------------------------------------ */
/* Resting orders                                                             */

/* Unlinks a resting order from every structure and frees its slot. */
static void order_remove(hg_book_t *b, uint32_t s) {
  order_t *o = &b->pool[s];
  int side = o->side;
  level_t *lv = &b->levels[side][o->lvl];
  /* Debug builds: the order's neighbours point back at it, and the level and
   * the book count it (hg_book_check walks everything, in tests). */
  assert(o->id != 0 && b->count > 0 && lv->count > 0 && lv->qty >= o->leaves);
  assert(o->lprev == NIL ? lv->head == s : b->pool[o->lprev].lnext == s);
  assert(o->lnext == NIL ? lv->tail == s : b->pool[o->lnext].lprev == s);

  if (o->lprev != NIL) b->pool[o->lprev].lnext = o->lnext;
  else lv->head = o->lnext;
  if (o->lnext != NIL) b->pool[o->lnext].lprev = o->lprev;
  else lv->tail = o->lprev;
  lv->qty -= o->leaves;
  assert(lv->count > 1 || lv->qty == 0); /* a level's total is its orders' leaves */
  if (--lv->count == 0) {
    bm_clear(&b->bm[side], o->lvl);
    if (b->best[side] == (int64_t)o->lvl) b->best[side] = level_after(b, side, o->lvl);
  }

  acct_t *a = &b->accts[o->acct];
  assert(a->count > 0 && (o->aprev == NIL ? a->head == s : b->pool[o->aprev].anext == s));
  if (o->aprev != NIL) b->pool[o->aprev].anext = o->anext;
  else a->head = o->anext;
  if (o->anext != NIL) b->pool[o->anext].aprev = o->aprev;
  else a->tail = o->aprev;
  if (a->indexed) tab_erase(b, b->clid_tab, clid_tag(o->account, o->clid), s);
  if (--a->count == 0) acct_remove(b, o->acct);

  uint32_t pref = pref_slot(b, o->id);
  if (s != pref) {
    tab_erase(b, b->oid_tab, oid_tag(o->id), s);
    disp_dec(b, pref);
  }

  o->id = 0;
  o->leaves = 0;
  pool_give(b, s);
  b->count--;
}

/* Starts loading what order_remove(o) will write, so that those misses
 * overlap one another and whatever runs before the removal (usually the
 * sink) instead of following one by one. */
static inline void prefetch_remove(const hg_book_t *b, const order_t *o) {
  if (o->lprev != NIL) __builtin_prefetch(&b->pool[o->lprev], 1);
  if (o->lnext != NIL) __builtin_prefetch(&b->pool[o->lnext], 1);
  if (o->aprev != NIL) __builtin_prefetch(&b->pool[o->aprev], 1);
  if (o->anext != NIL) __builtin_prefetch(&b->pool[o->anext], 1);
  if (b->accts[o->acct].indexed)
    __builtin_prefetch(&b->clid_tab[tag_home(b, clid_tag(o->account, o->clid))], 1);
}

/*
 * Doubles the preferred range (slot_mask + 1), once half as many orders
 * are live. An order at its old preferred slot whose new one differs joins
 * the order-id table; one in the table that sits at its new preferred slot
 * leaves it; every slot's displaced count is counted again. Live orders sit
 * below the range or below fresh, so that is all it reads: linear, once per
 * doubling, amortised over the orders that made it grow.
 */
__attribute__((noinline, cold)) static void pref_grow(hg_book_t *b) {
  uint32_t old = b->slot_mask, mask = old * 2 + 1;
  uint32_t end = live_end(b);
  for (uint32_t s = 0; s < end; s++) {
    const order_t *o = &b->pool[s];
    if (o->id == 0) continue;
    bool was = s == ((uint32_t)o->id & old), is = s == ((uint32_t)o->id & mask);
    if (was && !is) tab_insert(b, b->oid_tab, oid_tag(o->id), s);
    else if (!was && is) tab_erase(b, b->oid_tab, oid_tag(o->id), s);
  }
  b->slot_mask = mask;
  for (uint32_t s = 0; s <= mask; s++) b->pool[s].displaced = 0;
  for (uint32_t s = 0; s < end; s++) {
    const order_t *o = &b->pool[s];
    if (o->id != 0 && s != pref_slot(b, o->id)) disp_inc(b, pref_slot(b, o->id));
  }
}

/* Puts an order at the back of its level, its account's list and the time
 * list. The caller checked that a slot (and an account record) is free. */
static void order_rest(hg_book_t *b, const struct taker *t) {
  if (UNLIKELY((uint64_t)b->count * 2 >= (uint64_t)b->slot_mask + 1) &&
      b->slot_mask + 1 < b->pref_max)
    pref_grow(b);
  uint32_t s = pool_take(b, t->id);
  order_t *o = &b->pool[s];
  b->count++;

  uint32_t r = acct_find(b, t->account);
  if (r == NIL) r = acct_add(b, t->account);

  uint32_t idx = (uint32_t)(t->price - b->params.min_price);
  int side = t->side;
  o->id = t->id;
  o->clid = t->clid;
  o->leaves = t->leaves;
  order_cold_t *c = &b->cold[s];
  c->seq = b->next_seq++;
  c->qty = t->qty;
  c->ts = t->ts;
  o->scoped = t->scoped;
  o->account = t->account;
  o->smp = t->smp;
  o->lvl = idx;
  o->side = t->side;
  o->tif = t->tif;
  o->stp = t->stp;
  o->post_only = t->post_only;
  o->acct = r;

  level_t *lv = &b->levels[side][idx];
  o->lnext = NIL;
  if (lv->count == 0) {
    o->lprev = NIL;
    lv->head = s;
  } else {
    o->lprev = lv->tail;
    b->pool[lv->tail].lnext = s;
  }
  lv->tail = s;
  lv->qty += t->leaves;
  if (lv->count++ == 0) {
    bm_set(&b->bm[side], idx);
    int64_t best = b->best[side];
    if (best < 0 || (side == HG_SIDE_BUY ? (int64_t)idx > best : (int64_t)idx < best))
      b->best[side] = idx;
  }
  /* Debug builds: a resting order never crosses the other side. */
  assert(t->leaves > 0 && b->count <= b->params.max_orders);
  assert(b->best[HG_SIDE_BUY] < 0 || b->best[HG_SIDE_SELL] < 0 ||
         b->best[HG_SIDE_BUY] < b->best[HG_SIDE_SELL]);

  acct_t *a = &b->accts[r];
  if (t->clid > a->clid_hi) a->clid_hi = t->clid;
  if (t->id > b->oid_hi) b->oid_hi = t->id;
  o->anext = NIL;
  o->aprev = a->tail;
  if (a->tail != NIL) b->pool[a->tail].anext = s;
  else a->head = s;
  a->tail = s;
  a->count++;

  uint32_t pref = pref_slot(b, t->id);
  if (s != pref) {
    tab_insert(b, b->oid_tab, oid_tag(t->id), s);
    disp_inc(b, pref);
  }
  if (a->indexed) tab_insert(b, b->clid_tab, clid_tag(t->account, t->clid), s);
}

/* ------------------------------------------------------------------------ */
/* Validation helpers                                                         */

static int price_reject(const hg_book_t *b, hg_price_t p) {
  if (p < b->params.min_price || p > b->params.max_price) return HG_REJ_PRICE_OUT_OF_RANGE;
  return HG_REJ_NONE;
}

/* Would a limit at p on side cross the best opposite price? p is in range. */
static inline bool would_cross(const hg_book_t *b, int side, hg_price_t p) {
  int64_t opp = b->best[side ^ 1];
  if (opp < 0) return false;
  hg_price_t op = level_price(b, opp);
  return side == HG_SIDE_BUY ? p >= op : p <= op;
}

/* A market order's limit: its cap clamped to the range, or the range's far
 * end without one (book.h, new order step 3). */
static hg_price_t market_limit(const hg_book_t *b, int side, hg_price_t cap) {
  hg_price_t lo = b->params.min_price, hi = b->params.max_price;
  if (cap <= 0) return side == HG_SIDE_BUY ? hi : lo;
  return cap < lo ? lo : cap > hi ? hi : cap;
}

static inline uint8_t resolve_stp(const hg_book_t *b, uint8_t stp) {
  return stp == HG_STP_DEFAULT ? b->stp_default : stp;
}

static inline bool self_match(const struct taker *t, const order_t *o) {
  return t->account == o->account || (t->smp != 0 && t->smp == o->smp);
}

static inline bool crosses_level(const hg_book_t *b, const struct taker *t, int64_t idx) {
  hg_price_t p = level_price(b, idx);
  return t->side == HG_SIDE_BUY ? p <= t->price : p >= t->price;
}

/* ------------------------------------------------------------------------ */
/* Matching                                                                   */

/* Quantity a FOK order could execute now, capped at its qty. */
static hg_qty_t fok_available(const hg_book_t *b, const struct taker *t) {
  int opp = t->side ^ 1;
  hg_qty_t need = t->qty, got = 0;
  for (int64_t idx = b->best[opp]; idx >= 0 && crosses_level(b, t, idx);
       idx = level_after(b, opp, idx)) {
    const level_t *lv = &b->levels[opp][idx];
    if (t->mode == HG_STP_NONE) {
      if (lv->qty >= need - got) return need;
      got += lv->qty;
      continue;
    }
    for (uint32_t s = lv->head; s != NIL; s = b->pool[s].lnext) {
      const order_t *o = &b->pool[s];
      if (self_match(t, o)) {
        if (t->mode == HG_STP_CANCEL_RESTING) continue;
        return got;
      }
      if (o->leaves >= need - got) return need;
      got += o->leaves;
    }
  }
  return got;
}

/* Steps 5 and 6 of book.h for an accepted (or re-entering) order. */
static void process(hg_book_t *b, struct taker *t) {
  int opp = t->side ^ 1;
  bool stopped = false;
  level_t *levels = b->levels[opp];

  while (t->leaves > 0) {
    int64_t idx = b->best[opp];
    if (idx < 0 || !crosses_level(b, t, idx)) break;
    level_t *lv = &levels[idx];
    hg_price_t px = level_price(b, idx);
    /* Every order the walk passes leaves the level, so it always works on
     * the head; only a CANCEL_INCOMING stop leaves the head in place. */
    while (t->leaves > 0 && lv->count > 0) {
      uint32_t s = lv->head;
      order_t *o = &b->pool[s];
      prefetch_remove(b, o);
      if (UNLIKELY(self_match(t, o)) && t->mode != HG_STP_NONE) {
        if (t->mode == HG_STP_CANCEL_INCOMING) {
          stopped = true;
          break;
        }
        emit_order_cancel(b, o, HG_CXL_SELF_TRADE, t->ts);
        order_remove(b, s);
        if (t->mode == HG_STP_CANCEL_BOTH) {
          stopped = true;
          break;
        }
        continue;
      }
      hg_qty_t q = t->leaves < o->leaves ? t->leaves : o->leaves;
      t->leaves -= q;
      o->leaves -= q;
      lv->qty -= q;

      hg_book_event_t local;

      hg_book_event_t *ev = ev_begin(b, &local, HG_EV_FILL, t->ts);
      ev->side = t->side;
      ev->order_id = t->id;
      ev->client_order_id = t->clid;
      ev->account = t->account;
      ev->maker_order_id = o->id;
      ev->maker_client_order_id = o->clid;
      ev->maker_account = o->account;
      ev->price = px;
      ev->qty = q;
      ev->leaves = t->leaves;
      ev->maker_leaves = o->leaves;
      b->sink(b->sink_ctx, ev);

      if (o->leaves == 0) order_remove(b, s);
    }
    emit_level(b, opp, (uint32_t)idx, t->ts);
    if (stopped) break;
  }

  if (stopped) {
    emit_taker_cancel(b, t, HG_CXL_SELF_TRADE);
  } else if (t->leaves > 0) {
    if (t->tif >= HG_TIF_IOC) {
      emit_taker_cancel(b, t, HG_CXL_IOC_REMAINDER);
    } else {
      order_rest(b, t);
      emit_level(b, t->side, (uint32_t)(t->price - b->params.min_price), t->ts);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                 */

#define HUGE_PAGE ((size_t)2 << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older headers lack the name */
#endif

/*
 * Zeroed array of n elements, aligned to a cache line (an order record is
 * one line), recorded in the book's region list (freed by hg_book_destroy).
 * The big arrays (pool, id tables, levels) are read at random addresses, one
 * or two per order; on 4 KiB pages nearly every such read also misses the
 * TLB, and on a virtualised host the page walk is two-dimensional. Arrays of
 * 2 MiB and more are therefore their own anonymous mapping, aligned to
 * 2 MiB and offered to the kernel as huge pages (madvise is only a hint: if
 * it fails the book is merely slower). They are not written here: the
 * kernel maps zero pages as they are first touched, so creating a book (one
 * per instrument, also on recovery) costs microseconds instead of clearing
 * tens of MiB, and memory a book never uses is never backed. Every array is
 * laid out so that all-zero bytes are its initial state.
 */
static void *arr_alloc(hg_book_t *b, size_t n, size_t size) {
  if (size != 0 && n > SIZE_MAX / size) return NULL;
  if (b->nregions == MAX_REGIONS) return NULL;
  size_t bytes = n * size;
  region_t *r = &b->regions[b->nregions];
  void *p;
  if (bytes < HUGE_PAGE) {
    size_t rounded = ((bytes ? bytes : 1) + 63) & ~(size_t)63;
    p = aligned_alloc(64, rounded);
    if (p == NULL) return NULL;
    memset(p, 0, rounded);
    r->base = p;
    r->len = 0;
  } else {
    size_t rounded = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (rounded > SIZE_MAX - HUGE_PAGE) return NULL;
    size_t len = rounded + HUGE_PAGE; /* room to align the start */
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    p = (void *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    (void)madvise(p, rounded, MADV_HUGEPAGE);
    r->base = m;
    r->len = len;
  }
  b->nregions++;
  return p;
}

/*
 * The preferred range and the id tables start at this many entries (or
 * their full size, if smaller) and double as orders fill them (pref_grow,
 * tables_grow): what a book touches follows how many orders are live, not
 * how many it could hold, so a book sized for a million orders runs a day
 * of ten thousand on the same few MiB as one sized for ten thousand.
 */
#define START_RANGE 32768u

static uint64_t pow2_at_least(uint64_t n) {
  uint64_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

static int log2u64(uint64_t c) {
  return 63 - __builtin_clzll(c);
}

static bool params_valid(const hg_book_params_t *p) {
  if (p->min_price < 1 || p->max_price < p->min_price) return false;
  if ((uint64_t)(p->max_price - p->min_price) >= HG_BOOK_MAX_LEVELS) return false;
  if (p->max_order_qty < 1 || p->max_orders < 1 || p->max_accounts < 1) return false;
  if (p->ref_price < 0 || p->default_stp > HG_STP_NONE) return false;
  /* Aggregates (a level, a FOK count) must not overflow. */
  if ((__int128)p->max_order_qty * p->max_orders > INT64_MAX) return false;
  return true;
}

int hg_book_create(const hg_book_params_t *params, hg_book_sink_fn sink, void *sink_ctx,
                   hg_book_t **out) {
  if (params == NULL || sink == NULL || out == NULL || !params_valid(params)) return HG_EINVAL;

  hg_book_t *b = calloc(1, sizeof *b);
  if (b == NULL) return -ENOMEM;
  b->params = *params;
  b->sink = sink;
  b->sink_ctx = sink_ctx;
  b->stp_default = params->default_stp == HG_STP_DEFAULT ? HG_STP_CANCEL_INCOMING
                                                         : params->default_stp;
  b->nlevels = (uint32_t)(params->max_price - params->min_price + 1);
  b->best[0] = b->best[1] = -1;

  /* Load at most 2/3 when the pool is full: short probes, small tables. */
  uint64_t id_cap = pow2_at_least((uint64_t)params->max_orders * 3 / 2 + 1);
  /* A home is 32 tag bits; max_orders < 2^32 still leaves a free entry. */
  if (id_cap > ((uint64_t)1 << 32)) id_cap = (uint64_t)1 << 32;
  uint64_t acct_cap = pow2_at_least(2 * (uint64_t)params->max_accounts);
  b->id_max_mask = id_cap - 1;
  b->id_mask = (id_cap < START_RANGE ? id_cap : START_RANGE) - 1;
  b->acct_mask = acct_cap - 1;
  b->acct_shift = 64 - log2u64(acct_cap);

  bool ok = true;
  for (int side = 0; side < 2; side++) {
    b->levels[side] = arr_alloc(b, b->nlevels, sizeof(level_t));
    bitmap_t *bm = &b->bm[side];
    bm->depth = bm_layout(b->nlevels, bm->nwords);
    for (int k = 0; k < bm->depth; k++) {
      bm->w[k] = calloc(bm->nwords[k], sizeof(uint64_t));
      ok = ok && bm->w[k] != NULL;
    }
    ok = ok && b->levels[side] != NULL;
  }
  /* Two to four slots per order, so that most orders find their preferred
   * slot free (about 95% in the bench workloads, 78% with one to two). */
  uint64_t nslots = params->max_orders, pref_range = (uint64_t)1 << 30;
  if (nslots <= pref_range) nslots = pref_range = pow2_at_least(2 * nslots);
  b->nslots = (uint32_t)nslots;
  b->pref_max = (uint32_t)pref_range;
  b->slot_mask = (uint32_t)((pref_range < START_RANGE ? pref_range : START_RANGE) - 1);
  b->pool = arr_alloc(b, b->nslots, sizeof(order_t));
  b->cold = arr_alloc(b, b->nslots, sizeof(order_cold_t));
  b->free_stack = arr_alloc(b, b->nslots, sizeof(uint32_t));
  b->walk = calloc(1, sizeof *b->walk);
  if (b->walk != NULL) {
    /* Touched only by expire_day and foreach: plain calloc leaves the pages
     * unmapped until then. */
    b->walk->a = calloc(params->max_orders, sizeof(seq_slot_t));
    b->walk->b = calloc(params->max_orders, sizeof(seq_slot_t));
  }
  b->oid_tab = arr_alloc(b, id_cap, sizeof(id_ent_t));
  b->clid_tab = arr_alloc(b, id_cap, sizeof(id_ent_t));
  b->accts = calloc(params->max_accounts, sizeof(acct_t));
  b->acct_tab = calloc(acct_cap, sizeof(acct_ent_t));
  ok = ok && b->pool && b->cold && b->free_stack && b->walk && b->walk->a && b->walk->b &&
       b->oid_tab && b->clid_tab && b->accts && b->acct_tab;
  if (!ok) {
    hg_book_destroy(b);
    return -ENOMEM;
  }

  for (uint32_t i = 0; i < params->max_accounts; i++) {
    b->accts[i].head = i + 1 < params->max_accounts ? i + 1 : NIL;
    b->accts[i].tail = NIL;
  }
  b->acct_free = 0;
  for (uint64_t i = 0; i < acct_cap; i++) b->acct_tab[i].rec = NIL;

  *out = b;
  return 0;
}

int hg_book_prefault(hg_book_t *b) {
  for (int i = 0; i < b->nregions; i++) {
    region_t *r = &b->regions[i];
    if (r->len == 0) continue; /* heap blocks were cleared at create */
    /* MADV_POPULATE_WRITE (Linux 5.14) backs the range as a write would;
     * an older kernel gets one write per page, of the byte already there. */
    if (madvise(r->base, r->len, MADV_POPULATE_WRITE) == 0) continue;
    if (errno == ENOMEM) return -ENOMEM;
    volatile unsigned char *p = r->base;
    for (size_t off = 0; off < r->len; off += 4096) p[off] = p[off];
  }
  return 0;
}

void hg_book_destroy(hg_book_t *b) {
  if (b == NULL) return;
  for (int side = 0; side < 2; side++)
    for (int k = 0; k < BM_MAX_DEPTH; k++) free(b->bm[side].w[k]);
  for (int i = 0; i < b->nregions; i++) {
    if (b->regions[i].len > 0) (void)munmap(b->regions[i].base, b->regions[i].len);
    else free(b->regions[i].base);
  }
  if (b->walk != NULL) {
    free(b->walk->a);
    free(b->walk->b);
    free(b->walk);
  }
  free(b->accts);
  free(b->acct_tab);
  free(b);
}

void hg_book_set_event_buffer(hg_book_t *b, hg_book_event_t *buf) {
  b->evbuf = buf;
}

const hg_book_params_t *hg_book_params(const hg_book_t *b) {
  return &b->params;
}

/*
 * Is order id live? Ids and client ids usually grow, so a new order's id is
 * above every live one and the answer is known without probing a table
 * (whose line, for a client order id, is usually not in cache).
 */
static inline bool oid_live(const hg_book_t *b, hg_oid_t id) {
  return id <= b->oid_hi && order_find(b, id) != NIL;
}

/*
 * The client-order-id table is built lazily, per account: an account whose
 * client order ids only grow never needs it (clid_hi answers), so its
 * orders never pay for a table entry (a random cache line to write on rest
 * and again on removal). The first time a lower id has to be checked, the
 * account's live orders are indexed, and from then on every order of the
 * account is, until its record is released (no live orders left). Each
 * order is indexed at most once, so the cost stays O(1) amortised; the
 * one-off walk is linear in that account's live orders.
 */
static bool clid_live(hg_book_t *b, hg_account_t account, uint64_t clid) {
  uint32_t r = acct_find(b, account);
  if (r == NIL || clid > b->accts[r].clid_hi) return false;
  acct_t *a = &b->accts[r];
  if (!a->indexed) {
    for (uint32_t s = a->head; s != NIL; s = b->pool[s].anext)
      tab_insert(b, b->clid_tab, clid_tag(account, b->pool[s].clid), s);
    a->indexed = 1;
  }
  return clid_find(b, account, clid) != NIL;
}

static int validate_new(hg_book_t *b, const hg_order_new_t *o) {
  if (o->side > HG_SIDE_SELL || o->type > HG_ORD_MARKET || o->tif > HG_TIF_FOK ||
      o->stp > HG_STP_NONE || o->post_only > 1)
    return HG_REJ_INVALID_FIELD;
  if (o->type == HG_ORD_MARKET && o->tif <= HG_TIF_DAY) return HG_REJ_INVALID_TIF;
  if (o->post_only && (o->tif >= HG_TIF_IOC || o->type == HG_ORD_MARKET))
    return HG_REJ_INVALID_TIF;
  if (o->order_id == 0) return HG_REJ_INVALID_FIELD;
  if (o->qty <= 0) return HG_REJ_INVALID_QTY;
  if (o->qty > b->params.max_order_qty) return HG_REJ_QTY_TOO_LARGE;
  if (o->type == HG_ORD_LIMIT) {
    int r = price_reject(b, o->price);
    if (r != HG_REJ_NONE) return r;
  }
  if (oid_live(b, o->order_id)) return HG_REJ_DUPLICATE_ORDER_ID;
  if (clid_live(b, o->account, o->client_order_id)) return HG_REJ_DUPLICATE_CLORDID;
  if (o->post_only && would_cross(b, o->side, o->price)) return HG_REJ_POST_ONLY_WOULD_CROSS;
  if (o->tif <= HG_TIF_DAY) {
    if (b->count >= b->params.max_orders) return HG_REJ_BOOK_FULL;
    if (b->acct_count >= b->params.max_accounts && acct_find(b, o->account) == NIL)
      return HG_REJ_BOOK_FULL;
  }
  return HG_REJ_NONE;
}

/*
 * What a new order will write if it rests (its slot and both id table
 * entries) usually misses the cache, and so do the order it will rest
 * behind (its level's tail) and the first order it would trade with (the
 * best opposite level's head): the level arrays are small and warm, the
 * orders are not. Starting all of them at once makes the misses overlap
 * instead of following one another and the validation.
 */
static inline void prefetch_submit(const hg_book_t *b, const hg_order_new_t *o) {
  if (o->tif <= HG_TIF_DAY) {
    __builtin_prefetch(&b->pool[pref_slot(b, o->order_id)], 1);
  }
  int side = o->side & 1;
  bool in_range = o->price >= b->params.min_price && o->price <= b->params.max_price;
  int64_t opp = b->best[side ^ 1];
  if (opp >= 0 && (o->type == HG_ORD_MARKET || (in_range && would_cross(b, side, o->price)))) {
    const level_t *ol = &b->levels[side ^ 1][opp];
    __builtin_prefetch(&b->pool[ol->head], 1);
  } else if (in_range && o->tif <= HG_TIF_DAY) {
    const level_t *lv = &b->levels[side][o->price - b->params.min_price];
    if (lv->count > 0) __builtin_prefetch(&b->pool[lv->tail], 1);
  }
}

void hg_book_prefetch_order(const hg_book_t *b, hg_oid_t id) {
  __builtin_prefetch(&b->pool[pref_slot(b, id)], 1);
}

void hg_book_prefetch_links(const hg_book_t *b, hg_oid_t id) {
  const order_t *o = &b->pool[pref_slot(b, id)];
  if (o->id != id || id == 0) {
    /* Elsewhere or gone: only the count says whether the table is worth a line. */
    if (o->displaced != 0) __builtin_prefetch(&b->oid_tab[tag_home(b, oid_tag(id))]);
    return;
  }
  __builtin_prefetch(&b->levels[o->side][o->lvl], 1);
  prefetch_remove(b, o);
}

void hg_book_prefetch_new(const hg_book_t *b, const hg_order_new_t *o) {
  prefetch_submit(b, o);
}

void hg_book_submit(hg_book_t *b, const hg_order_new_t *o) {
  prefetch_submit(b, o);
  int rej = validate_new(b, o);
  if (rej != HG_REJ_NONE) {
    emit_reject(b, HG_CMD_NEW, rej, o->order_id, o->client_order_id, o->account, o->side,
                o->price, o->qty, o->ts);
    return;
  }
  struct taker t;
  t.id = o->order_id;
  t.clid = o->client_order_id;
  t.account = o->account;
  t.smp = o->smp_group;
  t.price = o->type == HG_ORD_MARKET ? market_limit(b, o->side, o->price) : o->price;
  t.qty = t.leaves = o->qty;
  t.ts = o->ts;
  t.side = o->side;
  t.tif = o->tif;
  t.stp = o->stp;
  t.post_only = o->post_only;
  t.mode = resolve_stp(b, o->stp);
  t.scoped = o->session_scoped != 0;

  hg_book_event_t local;

  hg_book_event_t *ev = ev_begin(b, &local, HG_EV_ACCEPTED, t.ts);
  ev->order_id = t.id;
  ev->client_order_id = t.clid;
  ev->account = t.account;
  ev->side = t.side;
  ev->price = t.price;
  ev->qty = t.qty;
  ev->leaves = t.qty;
  b->sink(b->sink_ctx, ev);

  if (t.tif == HG_TIF_FOK && fok_available(b, &t) < t.qty) {
    emit_taker_cancel(b, &t, HG_CXL_FOK_UNFILLED);
    return;
  }
  process(b, &t);
}

/* The order slot of order_id if account owns it, else NIL. */
static inline uint32_t owned(const hg_book_t *b, hg_oid_t id, hg_account_t account) {
  uint32_t s = order_find(b, id);
  if (s == NIL || b->pool[s].account != account) return NIL;
  return s;
}

void hg_book_cancel(hg_book_t *b, hg_oid_t id, hg_account_t account, uint64_t ts) {
  uint32_t s = owned(b, id, account);
  if (s == NIL) {
    emit_reject(b, HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, id, 0, account, 0, 0, 0, ts);
    return;
  }
  order_t *o = &b->pool[s];
  prefetch_remove(b, o);
  int side = o->side;
  uint32_t idx = o->lvl;
  emit_order_cancel(b, o, HG_CXL_USER, ts);
  order_remove(b, s);
  emit_level(b, side, idx, ts);
}

static int replace_reject(const hg_book_t *b, uint32_t s, hg_price_t new_price,
                          hg_qty_t new_qty) {
  if (s == NIL) return HG_REJ_UNKNOWN_ORDER;
  if (new_qty <= 0) return HG_REJ_INVALID_QTY;
  if (new_qty > b->params.max_order_qty) return HG_REJ_QTY_TOO_LARGE;
  int r = price_reject(b, new_price);
  if (r != HG_REJ_NONE) return r;
  if (b->pool[s].post_only && would_cross(b, b->pool[s].side, new_price))
    return HG_REJ_POST_ONLY_WOULD_CROSS;
  return HG_REJ_NONE;
}

void hg_book_replace(hg_book_t *b, hg_oid_t id, hg_account_t account, hg_price_t new_price,
                     hg_qty_t new_qty, uint64_t ts) {
  uint32_t s = owned(b, id, account);
  int rej = replace_reject(b, s, new_price, new_qty);
  if (rej != HG_REJ_NONE) {
    emit_reject(b, HG_CMD_REPLACE, rej, id, 0, account, 0, new_price, new_qty, ts);
    return;
  }

  order_t *o = &b->pool[s];
  int side = o->side;
  uint32_t old_idx = o->lvl;
  hg_book_event_t local;
  hg_book_event_t *ev = ev_begin(b, &local, HG_EV_REPLACED, ts);
  ev->order_id = o->id;
  ev->client_order_id = o->clid;
  ev->account = o->account;
  ev->side = o->side;
  ev->price = new_price;
  ev->qty = new_qty;
  ev->leaves = new_qty;

  if (new_price == level_price(b, old_idx) && new_qty <= o->leaves) {
    b->levels[side][old_idx].qty -= o->leaves - new_qty;
    o->leaves = new_qty;
    b->cold[s].qty = new_qty;
    ev->priority_kept = 1;
    b->sink(b->sink_ctx, ev);
    emit_level(b, side, old_idx, ts);
    return;
  }

  prefetch_remove(b, o);
  struct taker t;
  t.id = o->id;
  t.clid = o->clid;
  t.account = o->account;
  t.smp = o->smp;
  t.price = new_price;
  t.qty = t.leaves = new_qty;
  t.ts = ts;
  t.side = o->side;
  t.tif = o->tif;
  t.stp = o->stp;
  t.post_only = o->post_only;
  t.mode = resolve_stp(b, o->stp);
  t.scoped = o->scoped;
  b->sink(b->sink_ctx, ev);
  /* Freeing the slot guarantees the re-entry a slot and an account record. */
  order_remove(b, s);
  emit_level(b, side, old_idx, ts);
  process(b, &t);
}

uint32_t hg_book_mass_cancel(hg_book_t *b, hg_account_t account, int sides, uint64_t ts) {
  if (sides < HG_SIDES_BUY || sides > HG_SIDES_BOTH) return 0;
  uint32_t r = acct_find(b, account);
  if (r == NIL) return 0;
  uint32_t n = 0;
  uint32_t s = b->accts[r].head;
  while (s != NIL) {
    order_t *o = &b->pool[s];
    /* Captured first: removing the last order releases the account record. */
    uint32_t next = o->anext;
    if (sides == HG_SIDES_BOTH || sides == o->side) {
      int side = o->side;
      uint32_t idx = o->lvl;
      emit_order_cancel(b, o, HG_CXL_MASS_CANCEL, ts);
      order_remove(b, s);
      emit_level(b, side, idx, ts);
      n++;
    }
    s = next;
  }
  return n;
}

/* Which live orders a time-ordered walk visits. */
typedef enum walk_filter { WALK_ALL, WALK_DAY, WALK_SCOPED } walk_filter_t;

static inline bool walk_skips(const hg_book_t *b, uint32_t s, walk_filter_t f) {
  const order_t *o = &b->pool[s];
  if (o->id == 0) return true;
  if (f == WALK_DAY) return o->tif != HG_TIF_DAY;
  if (f == WALK_SCOPED) return o->scoped == 0;
  return false;
}

/* The oldest live order passing filter f entered after seq `after` (any, if
 * first), or NIL. O(max_orders): for walks nested in walks only. */
static uint32_t oldest_after(const hg_book_t *b, walk_filter_t f, bool first, uint64_t after) {
  uint32_t best = NIL, end = live_end(b);
  for (uint32_t s = 0; s < end; s++) {
    if (walk_skips(b, s, f)) continue;
    uint64_t q = b->cold[s].seq;
    if ((first || q > after) && (best == NIL || q < b->cold[best].seq)) best = s;
  }
  return best;
}

/*
 * Live orders passing filter f in time priority, oldest first,
 * into walk->a; returns how many. Entry numbers are unique and every
 * structure appends in entry order, so this is the order the book's lists
 * would give. Bottom-up merge sort: O(n log n), no allocation.
 */
static uint32_t time_order(const hg_book_t *b, walk_filter_t f) {
  seq_slot_t *src = b->walk->a, *dst = b->walk->b;
  uint32_t n = 0, end = live_end(b);
  for (uint32_t s = 0; s < end; s++) {
    if (walk_skips(b, s, f)) continue;
    src[n].seq = b->cold[s].seq;
    src[n].slot = s;
    src[n].pad_ = 0;
    n++;
  }
  for (uint32_t width = 1; width < n; width *= 2) {
    for (uint32_t lo = 0; lo < n; lo += 2 * width) {
      uint32_t mid = lo + width < n ? lo + width : n;
      uint32_t hi = mid + width < n ? mid + width : n;
      uint32_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) dst[k++] = src[j].seq < src[i].seq ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    seq_slot_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != b->walk->a) memcpy(b->walk->a, src, (size_t)n * sizeof *src);
  return n;
}

static void sweep_one(hg_book_t *b, uint32_t s, int reason, uint64_t ts) {
  order_t *o = &b->pool[s];
  int side = o->side;
  uint32_t idx = o->lvl;
  emit_order_cancel(b, o, reason, ts);
  order_remove(b, s);
  emit_level(b, side, idx, ts);
}

/* Cancels every live order passing f, in time priority, with reason. */
static uint32_t sweep(hg_book_t *b, walk_filter_t f, int reason, uint64_t ts) {
  uint32_t n = 0;
  if (b->walk->busy) { /* called from inside a foreach */
    for (uint32_t s; (s = oldest_after(b, f, true, 0)) != NIL; n++) sweep_one(b, s, reason, ts);
    return n;
  }
  n = time_order(b, f);
  /* Removing an order never moves another, so the sorted slots stay valid. */
  b->walk->busy = true;
  for (uint32_t k = 0; k < n; k++) sweep_one(b, b->walk->a[k].slot, reason, ts);
  b->walk->busy = false;
  return n;
}

uint32_t hg_book_expire_day(hg_book_t *b, uint64_t ts) {
  return sweep(b, WALK_DAY, HG_CXL_EXPIRY, ts);
}

uint32_t hg_book_cancel_scoped(hg_book_t *b, uint64_t ts) {
  return sweep(b, WALK_SCOPED, HG_CXL_MASS_CANCEL, ts);
}

int hg_book_best(const hg_book_t *b, hg_side_t side, hg_price_t *price, hg_qty_t *qty) {
  if ((unsigned)side > HG_SIDE_SELL || b->best[side] < 0) return HG_ENOTFOUND;
  int64_t idx = b->best[side];
  if (price != NULL) *price = level_price(b, idx);
  if (qty != NULL) *qty = b->levels[side][idx].qty;
  return 0;
}

hg_qty_t hg_book_qty_at(const hg_book_t *b, hg_side_t side, hg_price_t price) {
  if ((unsigned)side > HG_SIDE_SELL || price < b->params.min_price || price > b->params.max_price)
    return 0;
  return b->levels[side][price - b->params.min_price].qty;
}

size_t hg_book_depth(const hg_book_t *b, hg_side_t side, hg_book_level_t *out, size_t n) {
  if ((unsigned)side > HG_SIDE_SELL) return 0;
  size_t k = 0;
  for (int64_t idx = b->best[side]; idx >= 0 && k < n; idx = level_after(b, side, idx)) {
    const level_t *lv = &b->levels[side][idx];
    out[k].price = level_price(b, idx);
    out[k].qty = lv->qty;
    out[k].orders = lv->count;
    k++;
  }
  return k;
}

static void order_export(const hg_book_t *b, uint32_t s, hg_book_order_t *out) {
  const order_t *o = &b->pool[s];
  memset(out, 0, sizeof *out);
  out->order_id = o->id;
  out->client_order_id = o->clid;
  out->account = o->account;
  out->smp_group = o->smp;
  out->price = level_price(b, o->lvl);
  out->qty = b->cold[s].qty;
  out->leaves = o->leaves;
  out->ts = b->cold[s].ts;
  out->side = o->side;
  out->tif = o->tif;
  out->stp = o->stp;
  out->post_only = o->post_only;
  out->session_scoped = o->scoped;
}

int hg_book_find(const hg_book_t *b, hg_oid_t id, hg_account_t account, hg_book_order_t *out) {
  uint32_t s = owned(b, id, account);
  if (s == NIL) return HG_ENOTFOUND;
  if (out != NULL) order_export(b, s, out);
  return 0;
}

uint32_t hg_book_order_count(const hg_book_t *b) {
  return b->count;
}

void hg_book_foreach(const hg_book_t *b, void (*fn)(void *ctx, const hg_book_order_t *o),
                     void *ctx) {
  hg_book_order_t o;
  if (b->walk->busy) { /* fn of an outer foreach walks the book again */
    bool first = true;
    uint64_t after = 0;
    for (uint32_t s; (s = oldest_after(b, WALK_ALL, first, after)) != NIL; first = false) {
      after = b->cold[s].seq;
      order_export(b, s, &o);
      fn(ctx, &o);
    }
    return;
  }
  uint32_t n = time_order(b, WALK_ALL);
  b->walk->busy = true;
  for (uint32_t k = 0; k < n; k++) {
    order_export(b, b->walk->a[k].slot, &o);
    fn(ctx, &o);
  }
  b->walk->busy = false;
}

int hg_book_restore(hg_book_t *b, const hg_book_order_t *o) {
  if (o == NULL || o->order_id == 0 || o->side > HG_SIDE_SELL || o->tif > HG_TIF_DAY ||
      o->stp > HG_STP_NONE || o->post_only > 1 || o->session_scoped > 1 || o->leaves <= 0 ||
      o->leaves > o->qty || o->qty > b->params.max_order_qty || o->price < b->params.min_price ||
      o->price > b->params.max_price)
    return HG_EINVAL;
  if (would_cross(b, o->side, o->price)) return HG_EINVAL;
  if (order_find(b, o->order_id) != NIL || clid_live(b, o->account, o->client_order_id))
    return HG_EEXISTS;
  if (b->count >= b->params.max_orders) return HG_EFULL;
  if (b->acct_count >= b->params.max_accounts && acct_find(b, o->account) == NIL) return HG_EFULL;
  struct taker t;
  t.id = o->order_id;
  t.clid = o->client_order_id;
  t.account = o->account;
  t.smp = o->smp_group;
  t.price = o->price;
  t.qty = o->qty;
  t.leaves = o->leaves;
  t.ts = o->ts;
  t.side = o->side;
  t.tif = o->tif;
  t.stp = o->stp;
  t.post_only = o->post_only;
  t.mode = resolve_stp(b, o->stp);
  t.scoped = o->session_scoped;
  order_rest(b, &t);
  return 0;
}

const char *hg_reject_str(int reason) {
  switch (reason) {
#define HG_REJECT_STR(name, num, msg) \
  case num:                           \
    return msg;
    HG_REJECT_MAP(HG_REJECT_STR)
#undef HG_REJECT_STR
  default:
    return "unknown";
  }
}

const char *hg_cancel_reason_str(int reason) {
  switch (reason) {
#define HG_CANCEL_STR(name, num, msg) \
  case num:                           \
    return msg;
    HG_CANCEL_MAP(HG_CANCEL_STR)
#undef HG_CANCEL_STR
  default:
    return "unknown";
  }
}
