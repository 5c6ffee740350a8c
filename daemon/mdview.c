/*
 * mdview.c - the public market-data view (see mdview.h).
 *
 * Structure. Slots, one per instrument id ever listed (ids are not dense, so a
 * slot table scanned linearly; instrument counts are small and the last hit
 * is cached). Each slot has two halves:
 *  - work (consumer thread only): the price levels the events reported,
 *    per side an hourglass/levels.h side of HG_MD_WORK_LEVELS levels (the
 *    best kept; an overflow sets info.depth_truncated), a ring of recent
 *    trades and public counters;
 *  - pub (under the mutex): the top `depth` levels per side, the recent
 *    trades newest first and a copy of the counters.
 * plus a seqlock carrying top of book for lock-free readers. Candles and
 * settlements are fixed rings in both halves; a publish copies only the
 * candles written since the last one (usually the newest). The consumer
 * marks slots dirty while applying and copies dirty work into pub once per
 * batch; a reader copies pub out. Both halves are allocated at create.
 *
 * Slot ids are published to lock-free readers through an atomic id array
 * and an atomic count: a slot's id is stored before the count that covers
 * it, and never changes afterwards.
 */
#include "mdview.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/civil.h"
#include "hourglass/error.h"

const uint64_t hg_md_lat_bounds_ns[HG_MD_LAT_BUCKETS] = {
    10000,    25000,    50000,     100000,    250000,    500000,     1000000,
    2500000,  5000000,  10000000,  25000000,  50000000,  100000000,  1000000000};

const uint32_t hg_md_intervals_s[HG_MD_INTERVALS] = {60, 3600, 86400};

/* Candle and settlement rings (in work and pub alike). */
typedef struct history {
  hg_md_candle_t cd[HG_MD_INTERVALS][HG_MD_CANDLES];
  uint64_t cd_n[HG_MD_INTERVALS]; /* candles ever started; the newest at (n - 1) % cap */
  hg_md_settlement_t st[HG_MD_SETTLEMENTS];
  uint64_t st_n;
} history_t;

typedef struct work {
  hg_md_instrument_t info;
  hg_levels_t lv[2];    /* [HG_SIDE_BUY], [HG_SIDE_SELL]; storage owned here */
  hg_md_trade_t *tr;    /* ring of tcap */
  uint32_t tr_head;     /* next write */
  uint32_t tr_count;
  uint8_t dirty;        /* pub copy out of date */
  uint8_t tob_dirty;    /* seqlock out of date */
  history_t h;
} work_t;

typedef struct pub {
  hg_md_instrument_t info;
  hg_md_level_t *lv[2]; /* up to depth, best first */
  uint32_t n[2];
  hg_md_trade_t *tr;    /* newest first */
  uint32_t tr_count;
  history_t h;
} pub_t;

struct hg_mdview {
  uint32_t cap, depth, tcap;
  /* consumer thread */
  work_t *work;
  uint32_t nslots;
  uint32_t last_hit;
  uint64_t lat_seq; /* last seq whose latency was recorded */
  int any_dirty;
  hg_md_fixing_t fx[HG_MD_FIXINGS]; /* working copy, by (group, day) */
  uint32_t nfx;
  int fx_dirty;
  hg_md_clearing_t clr;  /* working copy */
  uint32_t pend_called, pend_liq; /* HG_XEV_MARGIN_CALL events before a cycle's end */
  int clr_dirty;
  /* shared with readers */
  hg_md_clearing_t clr_pub; /* guarded by mu */
  hg_md_fixing_t fx_pub[HG_MD_FIXINGS]; /* guarded by mu */
  uint32_t nfx_pub;
  pthread_mutex_t mu; /* guards pub */
  pub_t *pub;
  _Atomic uint32_t *ids;
  _Atomic uint32_t nids;
  hg_seqlock_t *tob; /* cap entries, cache-line aligned */
  _Atomic uint64_t lat[HG_MD_LAT_BUCKETS + 1];
  _Atomic uint64_t lat_count, lat_sum, records;
};

int hg_mdview_create(uint32_t max_instruments, uint32_t depth, uint32_t trades,
                     hg_mdview_t **out) {
  if (max_instruments == 0 || depth == 0 || trades == 0) return HG_EINVAL;
  if (depth > HG_MD_WORK_LEVELS) depth = HG_MD_WORK_LEVELS;
  hg_mdview_t *v = calloc(1, sizeof *v);
  if (v == NULL) return -ENOMEM;
  /* Room for delist-and-relist under new ids without running out at once. */
  v->cap = max_instruments * 2;
  v->depth = depth;
  v->tcap = trades;
  pthread_mutex_init(&v->mu, NULL);
  v->work = calloc(v->cap, sizeof *v->work);
  v->pub = calloc(v->cap, sizeof *v->pub);
  v->ids = calloc(v->cap, sizeof *v->ids);
  v->tob = aligned_alloc(64, sizeof(hg_seqlock_t) * v->cap);
  int ok = v->work && v->pub && v->ids && v->tob;
  for (uint32_t i = 0; ok && i < v->cap; i++) {
    work_t *w = &v->work[i];
    pub_t *p = &v->pub[i];
    hg_level_t *bids = calloc(HG_MD_WORK_LEVELS, sizeof *bids);
    hg_level_t *asks = calloc(HG_MD_WORK_LEVELS, sizeof *asks);
    if (bids != NULL) hg_levels_init(&w->lv[HG_SIDE_BUY], HG_LEVELS_BID, bids, HG_MD_WORK_LEVELS);
    if (asks != NULL) hg_levels_init(&w->lv[HG_SIDE_SELL], HG_LEVELS_ASK, asks, HG_MD_WORK_LEVELS);
    w->tr = calloc(trades, sizeof(hg_md_trade_t));
    p->lv[0] = calloc(depth, sizeof(hg_md_level_t));
    p->lv[1] = calloc(depth, sizeof(hg_md_level_t));
    p->tr = calloc(trades, sizeof(hg_md_trade_t));
    ok = bids && asks && w->tr && p->lv[0] && p->lv[1] && p->tr;
    hg_seqlock_init(&v->tob[i]);
  }
  if (!ok) {
    hg_mdview_destroy(v);
    return -ENOMEM;
  }
  *out = v;
  return 0;
}

void hg_mdview_destroy(hg_mdview_t *v) {
  if (v == NULL) return;
  for (uint32_t i = 0; i < v->cap; i++) {
    if (v->work != NULL) {
      free(v->work[i].lv[0].lv);
      free(v->work[i].lv[1].lv);
      free(v->work[i].tr);
    }
    if (v->pub != NULL) {
      free(v->pub[i].lv[0]);
      free(v->pub[i].lv[1]);
      free(v->pub[i].tr);
    }
  }
  free(v->work);
  free(v->pub);
  free((void *)v->ids);
  free(v->tob);
  pthread_mutex_destroy(&v->mu);
  free(v);
}

uint32_t hg_mdview_depth(const hg_mdview_t *v) { return v->depth; }
uint32_t hg_mdview_trade_cap(const hg_mdview_t *v) { return v->tcap; }

/* ------------------------------------------------------------- consumer side */

static work_t *slot(hg_mdview_t *v, uint32_t id, int create) {
  if (v->last_hit < v->nslots && v->work[v->last_hit].info.id == id) return &v->work[v->last_hit];
  for (uint32_t i = 0; i < v->nslots; i++) {
    if (v->work[i].info.id == id) {
      v->last_hit = i;
      return &v->work[i];
    }
  }
  if (!create || v->nslots == v->cap) return NULL;
  uint32_t i = v->nslots++;
  work_t *w = &v->work[i];
  w->info.id = id; /* the caller (a listing) fills in the rest */
  /* relaxed: nids' release store below publishes it. */
  atomic_store_explicit(&v->ids[i], id, memory_order_relaxed);
  /* release: a reader that sees the new count sees the slot's id. */
  atomic_store_explicit(&v->nids, v->nslots, memory_order_release);
  v->last_hit = i;
  return w;
}

static void reset_book(work_t *w) {
  hg_levels_clear(&w->lv[0]);
  hg_levels_clear(&w->lv[1]);
  w->info.depth_truncated = 0;
}

/* A level event; an overflow (hourglass/levels.h keeps the best
 * HG_MD_WORK_LEVELS) is flagged in the instrument until its book resets. */
static void set_level(work_t *w, int side, int64_t price, int64_t qty) {
  if (side != HG_SIDE_BUY && side != HG_SIDE_SELL) return;
  if (hg_levels_set(&w->lv[side], price, qty) != 0) w->info.depth_truncated = 1;
}

/* The day's figures: a trade of a later UTC day starts them again. */
static void add_day(hg_md_instrument_t *in, uint64_t ts, int64_t price, int64_t qty) {
  int32_t day = hg_civil_day_of_ns(ts);
  if (in->day_trades == 0 || day > in->day) {
    in->day = day;
    in->day_open = in->day_high = in->day_low = price;
    in->day_volume = in->day_trades = 0;
  }
  if (price > in->day_high) in->day_high = price;
  if (price < in->day_low) in->day_low = price;
  in->day_volume += qty > 0 ? (uint64_t)qty : 0;
  in->day_trades++;
}

/* A trade into the candle of interval k it falls in: the newest, or a new
 * one (a timestamp older than the newest candle counts in the newest). */
static void add_candle(history_t *h, size_t k, uint64_t ts, int64_t price, int64_t qty) {
  int64_t iv = hg_md_intervals_s[k], t = (int64_t)(ts / 1000000000u);
  int64_t start = t - t % iv;
  hg_md_candle_t *c = h->cd_n[k] ? &h->cd[k][(h->cd_n[k] - 1) % HG_MD_CANDLES] : NULL;
  if (c == NULL || start > c->start) {
    c = &h->cd[k][h->cd_n[k]++ % HG_MD_CANDLES];
    *c = (hg_md_candle_t){.start = start, .open = price, .high = price, .low = price};
  }
  if (price > c->high) c->high = price;
  if (price < c->low) c->low = price;
  c->close = price;
  c->volume += qty > 0 ? (uint64_t)qty : 0;
  c->trades++;
}

/* A day's settlement price; a second one for the same day replaces it. */
static void add_settlement(history_t *h, int32_t day, uint8_t tier, int64_t price) {
  hg_md_settlement_t *s = h->st_n ? &h->st[(h->st_n - 1) % HG_MD_SETTLEMENTS] : NULL;
  if (s == NULL || s->day != day) s = &h->st[h->st_n++ % HG_MD_SETTLEMENTS];
  *s = (hg_md_settlement_t){.day = day, .tier = tier, .price = price};
}

static void add_trade(hg_mdview_t *v, work_t *w, const hg_exchange_event_t *ev) {
  const hg_book_event_t *b = &ev->book;
  hg_md_trade_t *t = &w->tr[w->tr_head];
  t->seq = ev->seq;
  t->ts = ev->ts;
  t->price = b->price;
  t->qty = b->qty;
  t->aggressor = b->side;
  w->tr_head = (w->tr_head + 1) % v->tcap;
  if (w->tr_count < v->tcap) w->tr_count++;
  w->info.trades++;
  w->info.volume += b->qty > 0 ? (uint64_t)b->qty : 0;
  w->info.last_price = b->price;
  w->info.last_qty = b->qty;
  add_day(&w->info, ev->ts, b->price, b->qty);
  for (size_t k = 0; k < HG_MD_INTERVALS; k++) add_candle(&w->h, k, ev->ts, b->price, b->qty);
}

static void latency(hg_mdview_t *v, uint64_t now, uint64_t ts) {
  uint64_t d = now > ts ? now - ts : 0;
  size_t b = 0;
  while (b < HG_MD_LAT_BUCKETS && d > hg_md_lat_bounds_ns[b]) b++;
  /* relaxed (all): independent counters; readers accept slight skew. */
  atomic_fetch_add_explicit(&v->lat[b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&v->lat_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&v->lat_sum, d, memory_order_relaxed);
}

/* Keeps the latest state of each (index, day) fixing; when full, the oldest
 * day makes room. */
static void apply_fixing(hg_mdview_t *v, const hg_exchange_event_t *ev) {
  uint32_t i = 0;
  while (i < v->nfx && !(v->fx[i].group == ev->group && v->fx[i].day == ev->day)) i++;
  if (i == v->nfx) {
    if (v->nfx == HG_MD_FIXINGS) {
      uint32_t old = 0;
      for (uint32_t k = 1; k < v->nfx; k++)
        if (v->fx[k].day < v->fx[old].day) old = k;
      i = old;
    } else {
      v->nfx++;
    }
  }
  hg_md_fixing_t *f = &v->fx[i];
  f->group = ev->group;
  memcpy(f->gpu, ev->index.gpu, sizeof f->gpu);
  f->gpu[sizeof f->gpu - 1] = '\0';
  memcpy(f->grade, ev->index.grade, sizeof f->grade);
  f->grade[sizeof f->grade - 1] = '\0';
  f->day = ev->day;
  if (ev->outcome != HG_XFIX_FINALIZED) {
    f->value = ev->price;
    f->tier = ev->tier;
    f->kind = ev->kind;
    f->inputs = (uint64_t)ev->amount;
    f->providers = (uint32_t)ev->lo;
    f->hours = (uint32_t)ev->hi;
    f->used = (uint32_t)ev->qty;
    f->volume = ev->margin;
  }
  f->status = ev->status;
  v->fx_dirty = 1;
  v->any_dirty = 1;
}

/* The guarantee's aggregates (hg_md_clearing_t); other events pass. */
static void apply_clearing(hg_mdview_t *v, const hg_exchange_event_t *ev) {
  hg_md_clearing_t *g = &v->clr;
  switch (ev->type) {
    case HG_XEV_MARGIN_CALL:
      if (ev->status == HG_CLR_LIQUIDATING) v->pend_liq++;
      else v->pend_called++;
      return;
    case HG_XEV_MARK_ROUND: /* its counts are after its liquidation fills */
      g->called = (uint32_t)ev->lo;
      g->liquidating = (uint32_t)ev->hi;
      g->fund = ev->balance;
      g->mark_rounds++;
      v->pend_called = v->pend_liq = 0;
      break;
    case HG_XEV_CYCLE: /* its calls came before it, one event each */
      g->called = v->pend_called;
      g->liquidating = v->pend_liq;
      v->pend_called = v->pend_liq = 0;
      if (ev->margin > 0) g->bankruptcies += (uint64_t)ev->margin;
      g->fund_used += ev->price;
      break;
    case HG_XEV_CASH:
      if (ev->account == 0) g->fund = ev->balance; /* the fund's own entries */
      if (ev->kind == HG_LEDGER_FUND_DEPOSIT) g->fund_deposits += ev->amount;
      else if (ev->kind == HG_LEDGER_LIQ_FEE && ev->account == 0) g->liq_fees += ev->amount;
      else if (ev->kind == HG_LEDGER_SOCIALIZED && ev->amount < 0) g->socialized -= ev->amount;
      break;
    case HG_XEV_BOOK:
      if (ev->book.type != HG_EV_FILL || ev->kind != HG_XBOOK_LIQUIDATION) return;
      g->liquidation_fills++;
      break;
    default:
      return;
  }
  v->clr_dirty = 1;
  v->any_dirty = 1;
}

static void apply_one(hg_mdview_t *v, const hg_exchange_event_t *ev) {
  /* Only a listing makes a slot: events about ids never listed (an order
   * rejected as an unknown instrument) stay out of every public view, and
   * cannot use up the slots later listings need. */
  work_t *w = slot(v, ev->instrument_id, ev->type == HG_XEV_LISTED);
  if (w == NULL) return; /* never listed, or out of slots */
  switch (ev->type) {
    case HG_XEV_BOOK:
      switch (ev->book.type) {
        case HG_EV_ACCEPTED: w->info.orders++; break;
        case HG_EV_CANCELLED: w->info.cancels++; break;
        case HG_EV_FILL: add_trade(v, w, ev); w->tob_dirty = 1; break;
        case HG_EV_LEVEL:
          set_level(w, ev->book.side, ev->book.price, ev->book.qty);
          w->tob_dirty = 1;
          break;
        default: break;
      }
      break;
    case HG_XEV_LISTED:
      reset_book(w);
      w->tr_count = w->tr_head = 0;
      w->info.listed = 1;
      w->info.halted = 0;
      memcpy(w->info.symbol, ev->listed.symbol, sizeof w->info.symbol);
      w->info.symbol[sizeof w->info.symbol - 1] = '\0';
      w->info.tick_size = ev->listed.params.tick_size;
      w->info.contract_unit = ev->listed.params.contract_unit;
      w->info.min_price = ev->listed.params.min_price;
      w->info.max_price = ev->listed.params.max_price;
      w->tob_dirty = 1;
      break;
    case HG_XEV_DELISTED:
      reset_book(w);
      w->info.listed = 0;
      w->tob_dirty = 1;
      break;
    case HG_XEV_HALTED: w->info.halted = 1; break;
    case HG_XEV_RESUMED: w->info.halted = 0; break;
    case HG_XEV_DSP:
      if (ev->tier == 0) return; /* no price could be set: keep the last one */
      w->info.dsp = ev->price;
      w->info.dsp_day = ev->day;
      add_settlement(&w->h, ev->day, ev->tier, ev->price);
      w->info.open_interest = 0; /* the cycle's VM events, next, sum it again */
      break;
    case HG_XEV_VM:
      if (ev->qty > 0) w->info.open_interest += ev->qty;
      break;
    default: return;
  }
  w->info.seq = ev->seq;
  w->dirty = 1;
  v->any_dirty = 1;
}

void hg_mdview_apply(hg_mdview_t *v, const hg_pipe_out_t *recs, size_t n, uint64_t now_ns) {
  for (size_t i = 0; i < n; i++) {
    if (recs[i].kind != HG_PIPE_EVENT) continue;
    const hg_exchange_event_t *ev = &recs[i].event;
    if (ev->seq != v->lat_seq) {
      v->lat_seq = ev->seq;
      latency(v, now_ns, ev->ts);
    }
    apply_clearing(v, ev);
    if (ev->type == HG_XEV_FIXING) apply_fixing(v, ev);
    else if (ev->instrument_id != 0) apply_one(v, ev);
  }
  /* relaxed: a statistic. */
  atomic_fetch_add_explicit(&v->records, n, memory_order_relaxed);
}

static void write_tob(hg_mdview_t *v, uint32_t i) {
  const work_t *w = &v->work[i];
  hg_tob_t t = {0};
  if (w->lv[HG_SIDE_BUY].n > 0) {
    t.bid_px = w->lv[HG_SIDE_BUY].lv[0].price;
    t.bid_qty = w->lv[HG_SIDE_BUY].lv[0].qty;
  }
  if (w->lv[HG_SIDE_SELL].n > 0) {
    t.ask_px = w->lv[HG_SIDE_SELL].lv[0].price;
    t.ask_qty = w->lv[HG_SIDE_SELL].lv[0].qty;
  }
  t.last_px = w->info.last_price;
  t.last_qty = w->info.last_qty;
  t.version = w->info.seq;
  hg_seqlock_write(&v->tob[i], &t);
}

static void copy_pub(hg_mdview_t *v, uint32_t i) {
  const work_t *w = &v->work[i];
  pub_t *p = &v->pub[i];
  p->info = w->info;
  for (int s = 0; s < 2; s++) {
    uint32_t k = w->lv[s].n < v->depth ? w->lv[s].n : v->depth;
    memcpy(p->lv[s], w->lv[s].lv, k * sizeof(hg_md_level_t));
    p->n[s] = k;
  }
  for (uint32_t j = 0; j < w->tr_count; j++)
    p->tr[j] = w->tr[(w->tr_head + v->tcap - 1 - j) % v->tcap];
  p->tr_count = w->tr_count;
  /* Candles started since the last publish, and the newest one before them
   * (it may have changed). */
  for (size_t k = 0; k < HG_MD_INTERVALS; k++) {
    uint64_t n = w->h.cd_n[k], from = p->h.cd_n[k] ? p->h.cd_n[k] - 1 : 0;
    if (n - from > HG_MD_CANDLES) from = n - HG_MD_CANDLES;
    for (uint64_t j = from; j < n; j++)
      p->h.cd[k][j % HG_MD_CANDLES] = w->h.cd[k][j % HG_MD_CANDLES];
    p->h.cd_n[k] = n;
  }
  if (p->h.st_n != w->h.st_n || (w->h.st_n && memcmp(&p->h.st[(w->h.st_n - 1) % HG_MD_SETTLEMENTS],
                                                     &w->h.st[(w->h.st_n - 1) % HG_MD_SETTLEMENTS],
                                                     sizeof(hg_md_settlement_t)) != 0)) {
    memcpy(p->h.st, w->h.st, sizeof p->h.st);
    p->h.st_n = w->h.st_n;
  }
}

static int publish(hg_mdview_t *v, int wait) {
  if (!v->any_dirty) return 0;
  int tob = 0;
  for (uint32_t i = 0; i < v->nslots; i++) {
    if (v->work[i].tob_dirty) {
      write_tob(v, i);
      v->work[i].tob_dirty = 0;
      tob = 1;
    }
  }
  if (wait)
    pthread_mutex_lock(&v->mu);
  else if (pthread_mutex_trylock(&v->mu) != 0)
    return tob; /* a reader holds it: publish after the next batch */
  for (uint32_t i = 0; i < v->nslots; i++) {
    if (v->work[i].dirty) {
      copy_pub(v, i);
      v->work[i].dirty = 0;
    }
  }
  if (v->clr_dirty) {
    v->clr_pub = v->clr;
    v->clr_dirty = 0;
  }
  if (v->fx_dirty) {
    memcpy(v->fx_pub, v->fx, sizeof v->fx);
    v->nfx_pub = v->nfx;
    v->fx_dirty = 0;
  }
  pthread_mutex_unlock(&v->mu);
  v->any_dirty = 0;
  return 1;
}

int hg_mdview_publish(hg_mdview_t *v) { return publish(v, 0); }

typedef struct seed_ctx {
  hg_mdview_t *v;
  const hg_exchange_t *ex;
  hg_book_level_t *tmp;
  int full;
} seed_ctx_t;

static void seed_one(void *ctx, const hg_exchange_instrument_info_t *info) {
  seed_ctx_t *c = ctx;
  work_t *w = slot(c->v, info->id, 1);
  if (w == NULL) {
    c->full = 1;
    return;
  }
  reset_book(w);
  w->info.listed = 1;
  w->info.halted = info->halted;
  snprintf(w->info.symbol, sizeof w->info.symbol, "%s", info->symbol);
  w->info.tick_size = info->params.tick_size;
  w->info.contract_unit = info->params.contract_unit;
  w->info.min_price = info->params.min_price;
  w->info.max_price = info->params.max_price;
  const hg_book_t *b = hg_exchange_book(c->ex, info->id);
  for (int s = 0; b != NULL && s < 2; s++) {
    size_t k = hg_book_depth(b, (hg_side_t)s, c->tmp, HG_MD_WORK_LEVELS);
    for (size_t j = 0; j < k; j++) set_level(w, s, c->tmp[j].price, c->tmp[j].qty);
  }
  /* The last DSP a cycle set (a listing's initial price is not one). */
  hg_clearing_instrument_info_t ci;
  if (hg_clearing_instrument_info(hg_exchange_clearing(c->ex), info->id, &ci) == 0) {
    w->info.open_interest = ci.open_interest;
    if (ci.last_dsp_tier != 0) {
      w->info.dsp = ci.inst.last_dsp;
      w->info.dsp_day = hg_exchange_last_cycle_day(c->ex);
      add_settlement(&w->h, w->info.dsp_day, (uint8_t)ci.last_dsp_tier, ci.inst.last_dsp);
    }
  }
  w->info.seq = hg_exchange_last_seq(c->ex);
  w->dirty = w->tob_dirty = 1;
  c->v->any_dirty = 1;
}

/* Stored fixings come in day order, so the view keeps the latest ones. */
static void seed_fixing(void *ctx, const hg_exchange_fixing_info_t *info) {
  seed_ctx_t *c = ctx;
  hg_exchange_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.type = HG_XEV_FIXING;
  ev.group = info->group;
  ev.day = info->fixing.day;
  ev.price = info->fixing.value;
  ev.tier = info->fixing.tier;
  ev.status = info->fixing.status;
  ev.kind = info->fixing.kind;
  hg_exchange_receipt_t r;
  if (hg_exchange_receipt(c->ex, info->gpu, info->grade, info->fixing.day, &r) == 0 &&
      r.receipt_tier >= 1 && r.receipt_tier <= 2) {
    const hg_exchange_receipt_tier_t *t = &r.tier[r.receipt_tier - 1];
    ev.amount = r.input_count;
    ev.lo = t->providers;
    ev.hi = t->hours;
    ev.qty = t->used;
    ev.margin = t->volume;
  }
  memcpy(ev.index.gpu, info->gpu, sizeof ev.index.gpu);
  memcpy(ev.index.grade, info->grade, sizeof ev.index.grade);
  apply_fixing(c->v, &ev);
}

int hg_mdview_seed(hg_mdview_t *v, const hg_exchange_t *ex) {
  seed_ctx_t c = {v, ex, malloc(HG_MD_WORK_LEVELS * sizeof(hg_book_level_t)), 0};
  if (c.tmp == NULL) return -ENOMEM;
  hg_exchange_foreach_instrument(ex, seed_one, &c);
  hg_exchange_foreach_fixing(ex, seed_fixing, &c);
  hg_clearing_guarantee_t g;
  hg_clearing_guarantee(hg_exchange_clearing(ex), &g);
  v->clr = (hg_md_clearing_t){.fund = g.fund, .fund_deposits = g.fund_deposits,
                              .liq_fees = g.liq_fees, .fund_used = g.fund_used,
                              .socialized = g.socialized, .bankruptcies = g.bankruptcies,
                              .called = g.called, .liquidating = g.liquidating};
  v->clr_dirty = v->any_dirty = 1;
  free(c.tmp);
  publish(v, 1);
  return c.full ? HG_EFULL : 0;
}

/* --------------------------------------------------------------- readers */

size_t hg_mdview_instruments(hg_mdview_t *v, hg_md_instrument_t *out, size_t cap) {
  pthread_mutex_lock(&v->mu);
  /* acquire: pairs with the consumer's release of the count. */
  uint32_t n = atomic_load_explicit(&v->nids, memory_order_acquire);
  size_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (v->pub[i].info.id == 0) continue; /* created, not yet published */
    if (k < cap) out[k] = v->pub[i].info;
    k++;
  }
  pthread_mutex_unlock(&v->mu);
  return k;
}

int hg_mdview_book(hg_mdview_t *v, uint32_t id, hg_md_instrument_t *info, hg_md_level_t *bids,
                   size_t *nbids, hg_md_level_t *asks, size_t *nasks, hg_md_trade_t *trades,
                   size_t *ntrades) {
  int rc = HG_ENOTFOUND;
  pthread_mutex_lock(&v->mu);
  /* acquire: as in hg_mdview_instruments. */
  uint32_t n = atomic_load_explicit(&v->nids, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++) {
    const pub_t *p = &v->pub[i];
    if (p->info.id != id || id == 0) continue;
    if (info) *info = p->info;
    if (bids) {
      memcpy(bids, p->lv[0], p->n[0] * sizeof *bids);
      *nbids = p->n[0];
    }
    if (asks) {
      memcpy(asks, p->lv[1], p->n[1] * sizeof *asks);
      *nasks = p->n[1];
    }
    if (trades) {
      memcpy(trades, p->tr, p->tr_count * sizeof *trades);
      *ntrades = p->tr_count;
    }
    rc = 0;
    break;
  }
  pthread_mutex_unlock(&v->mu);
  return rc;
}

int hg_mdview_tob(hg_mdview_t *v, uint32_t id, hg_tob_t *out) {
  /* acquire: pairs with the consumer's release of the count. */
  uint32_t n = atomic_load_explicit(&v->nids, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++) {
    /* relaxed: ordered by the acquire of the count above. */
    if (atomic_load_explicit(&v->ids[i], memory_order_relaxed) == id) {
      hg_seqlock_read(&v->tob[i], out);
      return 0;
    }
  }
  return HG_ENOTFOUND;
}

void hg_mdview_latency(const hg_mdview_t *v, hg_md_latency_t *out) {
  uint64_t cum = 0;
  for (size_t b = 0; b <= HG_MD_LAT_BUCKETS; b++) {
    /* relaxed (all): statistics, slight skew between counters is fine. */
    cum += atomic_load_explicit(&v->lat[b], memory_order_relaxed);
    out->bucket[b] = cum;
  }
  out->count = cum;
  out->sum_ns = atomic_load_explicit(&v->lat_sum, memory_order_relaxed);
}

uint64_t hg_mdview_records(const hg_mdview_t *v) {
  /* relaxed: a statistic. */
  return atomic_load_explicit(&v->records, memory_order_relaxed);
}

static int fixing_cmp(const void *a, const void *b) {
  const hg_md_fixing_t *x = a, *y = b;
  if (x->day != y->day) return x->day < y->day ? -1 : 1;
  return x->group < y->group ? -1 : x->group > y->group;
}

size_t hg_mdview_fixings(hg_mdview_t *v, hg_md_fixing_t *out, size_t cap) {
  pthread_mutex_lock(&v->mu);
  size_t n = v->nfx_pub < cap ? v->nfx_pub : cap;
  memcpy(out, v->fx_pub, n * sizeof *out);
  pthread_mutex_unlock(&v->mu);
  qsort(out, n, sizeof *out, fixing_cmp);
  return n;
}

void hg_mdview_clearing(hg_mdview_t *v, hg_md_clearing_t *out) {
  pthread_mutex_lock(&v->mu);
  *out = v->clr_pub;
  pthread_mutex_unlock(&v->mu);
}

/* The published slot of id, under mu; NULL when unknown. */
static const pub_t *pub_of(hg_mdview_t *v, uint32_t id) {
  /* acquire: as in hg_mdview_instruments. */
  uint32_t n = atomic_load_explicit(&v->nids, memory_order_acquire);
  for (uint32_t i = 0; i < n && id != 0; i++)
    if (v->pub[i].info.id == id) return &v->pub[i];
  return NULL;
}

int hg_mdview_candles(hg_mdview_t *v, uint32_t id, size_t interval, hg_md_candle_t *out,
                      size_t *n) {
  if (interval >= HG_MD_INTERVALS) return HG_EINVAL;
  pthread_mutex_lock(&v->mu);
  const pub_t *p = pub_of(v, id);
  if (p != NULL) {
    uint64_t total = p->h.cd_n[interval], k = total < HG_MD_CANDLES ? total : HG_MD_CANDLES;
    for (uint64_t j = 0; j < k; j++)
      out[j] = p->h.cd[interval][(total - k + j) % HG_MD_CANDLES];
    *n = (size_t)k;
  }
  pthread_mutex_unlock(&v->mu);
  return p != NULL ? 0 : HG_ENOTFOUND;
}

int hg_mdview_settlements(hg_mdview_t *v, uint32_t id, hg_md_settlement_t *out, size_t *n) {
  pthread_mutex_lock(&v->mu);
  const pub_t *p = pub_of(v, id);
  if (p != NULL) {
    uint64_t total = p->h.st_n, k = total < HG_MD_SETTLEMENTS ? total : HG_MD_SETTLEMENTS;
    for (uint64_t j = 0; j < k; j++) out[j] = p->h.st[(total - k + j) % HG_MD_SETTLEMENTS];
    *n = (size_t)k;
  }
  pthread_mutex_unlock(&v->mu);
  return p != NULL ? 0 : HG_ENOTFOUND;
}
