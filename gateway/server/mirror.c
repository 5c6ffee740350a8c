/*
 * mirror.c - the engine-state mirror: the u64 -> u32 hash map, instruments
 * with their price levels, live orders, accounts, positions and the ledger
 * copy, and their seeding from the exchange at attach (before the pipeline
 * threads start). Loop thread afterwards; updated from events.c.
 */
#include "gateway_int.h"

/* ------------------------------------------------------------- u64 -> u32 */

int gw_map_init(u64map_t *m, uint32_t entries) {
  uint32_t cap = 16;
  while (cap < entries * 2u && cap < (1u << 30)) cap <<= 1;
  m->keys = calloc(cap, sizeof *m->keys);
  m->vals = calloc(cap, sizeof *m->vals);
  m->mask = cap - 1;
  m->dense = 0;
  if (m->keys == NULL || m->vals == NULL) return -ENOMEM;
  hg_prefault(m->keys, cap * sizeof *m->keys); /* probes land anywhere */
  hg_prefault(m->vals, cap * sizeof *m->vals);
  return 0;
}

void gw_map_free(u64map_t *m) {
  free(m->keys);
  free(m->vals);
}

int gw_map_init_dense(u64map_t *m, uint32_t entries) {
  int rc = gw_map_init(m, entries);
  m->dense = 1;
  return rc;
}

static inline uint32_t map_home(const u64map_t *m, uint64_t k) {
  return (uint32_t)(m->dense ? k : hg_mix64(k)) & m->mask;
}

uint32_t gw_map_get(const u64map_t *m, uint64_t k) {
  for (uint32_t i = map_home(m, k);; i = (i + 1) & m->mask) {
    if (m->keys[i] == k) return m->vals[i];
    if (m->keys[i] == 0) return NONE32;
  }
}

/* The caller keeps the load under one half (tables are sized for it). */
void gw_map_put(u64map_t *m, uint64_t k, uint32_t v) {
  uint32_t i = map_home(m, k);
  while (m->keys[i] != 0 && m->keys[i] != k) i = (i + 1) & m->mask;
  m->keys[i] = k;
  m->vals[i] = v;
}

/* Linear probing delete with backward shift, so no tombstones build up. */
void gw_map_del(u64map_t *m, uint64_t k) {
  uint32_t i = map_home(m, k);
  while (m->keys[i] != k) {
    if (m->keys[i] == 0) return;
    i = (i + 1) & m->mask;
  }
  for (;;) {
    m->keys[i] = 0;
    uint32_t j = i;
    for (;;) {
      j = (j + 1) & m->mask;
      if (m->keys[j] == 0) return;
      uint32_t home = map_home(m, m->keys[j]);
      /* Move j back to i unless home lies cyclically in (i, j]. */
      bool stay = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stay) break;
    }
    m->keys[i] = m->keys[j];
    m->vals[i] = m->vals[j];
    i = j;
  }
}

/* ------------------------------------------------------------ instruments */

instr_t *gw_instr_find(hg_gateway_t *gw, uint32_t id) {
  if (id == 0) return NULL;
  for (uint32_t i = 0; i < gw->cfg.max_instruments; i++)
    if (gw->instr[i].id == id) return &gw->instr[i];
  return NULL;
}

uint32_t gw_instr_slot(hg_gateway_t *gw, const instr_t *in) {
  return (uint32_t)(in - gw->instr);
}

void gw_instr_reference(instr_t *in, int64_t ref, int64_t lo, int64_t hi) {
  in->ref_price = ref;
  in->band_low = lo;
  in->band_high = hi;
}

/* Adds an instrument (listing or seed); its level arrays hold one level per
 * possible resting order (allocated here, kept across relistings that fit).
 * NULL when the table is full or memory is short. */
instr_t *gw_instr_add(hg_gateway_t *gw, uint32_t id, const char *symbol,
                      const hg_book_params_t *params, uint32_t state) {
  instr_t *in = gw_instr_find(gw, id);
  if (in == NULL) {
    for (uint32_t i = 0; i < gw->cfg.max_instruments && in == NULL; i++)
      if (gw->instr[i].id == 0) in = &gw->instr[i];
    if (in == NULL) return NULL;
  }
  uint32_t cap = params->max_orders > 0 ? params->max_orders : 1;
  if (in->lv[0].cap < cap) {
    hg_level_t *b = calloc(cap, sizeof *b), *a = calloc(cap, sizeof *a);
    if (b == NULL || a == NULL) {
      free(b);
      free(a);
      return NULL;
    }
    free(in->lv[0].lv);
    free(in->lv[1].lv);
    hg_levels_init(&in->lv[0], HG_LEVELS_BID, b, cap);
    hg_levels_init(&in->lv[1], HG_LEVELS_ASK, a, cap);
  }
  in->id = id;
  in->state = state;
  snprintf(in->symbol, sizeof in->symbol, "%s", symbol);
  in->params = *params;
  hg_levels_clear(&in->lv[0]);
  hg_levels_clear(&in->lv[1]);
  in->lv_truncated_logged = 0;
  in->n_subs = 0;
  /* md_seq continues across a relisting of the same id so subscribers of the
   * old one see a jump rather than a repeat. */
  uint32_t slot = gw_instr_slot(gw, in);
  for (uint32_t s = 0; s < gw->cfg.max_streams; s++)
    if (gw->streams[s].quote_gen != NULL) {
      gw->streams[s].quote_gen[slot * 2] = 0;
      gw->streams[s].quote_gen[slot * 2 + 1] = 0;
    }
  return in;
}

/* Sets the aggregate at (side, price) from a LEVEL event; qty 0 removes
 * the level. A side that overflows (see instr_t.lv) is logged once per
 * listing: snapshots may then miss levels below the best ones kept. */
void gw_level_set(hg_gateway_t *gw, instr_t *in, int side, int64_t price, int64_t qty) {
  assert(side == HG_SIDE_BUY || side == HG_SIDE_SELL);
  if (hg_levels_set(&in->lv[side], price, qty) == 0 || in->lv_truncated_logged) return;
  in->lv_truncated_logged = 1;
  gw_log(gw, HG_LOG_WARN,
         "instrument %" PRIu32 ": more price levels on one side than its %" PRIu32
         " orders; market data snapshots keep the best %" PRIu32,
         in->id, in->lv[side].cap, in->lv[side].cap);
}

/* ----------------------------------------------------------------- orders */

order_t *gw_order_find(hg_gateway_t *gw, uint64_t id) {
  uint32_t i = gw_map_get(&gw->order_map, id);
  return i == NONE32 ? NULL : &gw->orders[i];
}

static void order_link(hg_gateway_t *gw, uint32_t i) {
  order_t *o = &gw->orders[i];
  o->prev = NONE32;
  o->next = NONE32;
  if (o->stream == NONE32) return;
  stream_t *st = &gw->streams[o->stream];
  o->next = st->orders;
  if (st->orders != NONE32) gw->orders[st->orders].prev = i;
  st->orders = i;
}

/* Appends order i to its account's list: order ids are command seqs, so
 * events add them in ascending order (the seed sorts its own, seed_sort). */
static void order_link_account(hg_gateway_t *gw, uint32_t i) {
  order_t *o = &gw->orders[i];
  uint32_t ai = gw_map_get(&gw->account_map, o->account);
  o->aslot = ai;
  o->aprev = o->anext = NONE32;
  if (ai == NONE32) return;
  account_t *a = &gw->accounts[ai];
  o->aprev = a->otail;
  if (a->otail != NONE32) gw->orders[a->otail].anext = i;
  else a->ohead = i;
  a->otail = i;
}

static void order_unlink_account(hg_gateway_t *gw, order_t *o) {
  if (o->aslot == NONE32) return;
  account_t *a = &gw->accounts[o->aslot];
  if (o->aprev != NONE32) gw->orders[o->aprev].anext = o->anext;
  else a->ohead = o->anext;
  if (o->anext != NONE32) gw->orders[o->anext].aprev = o->aprev;
  else a->otail = o->aprev;
  o->aslot = NONE32;
}

uint32_t gw_account_orders_from(hg_gateway_t *gw, const account_t *a, uint64_t from) {
  if (from != 0) {
    uint32_t i = gw_map_get(&gw->order_map, from);
    if (i != NONE32 && gw->orders[i].aslot == (uint32_t)(a - gw->accounts)) return i;
  }
  uint32_t i = a->ohead;
  while (i != NONE32 && gw->orders[i].order_id < from) i = gw->orders[i].anext;
  return i;
}

order_t *gw_order_add(hg_gateway_t *gw, const hg_book_event_t *be, uint32_t stream) {
  if (gw->free_order == NONE32) return NULL;
  uint32_t i = gw->free_order;
  order_t *o = &gw->orders[i];
  gw->free_order = o->next;
  memset(o, 0, sizeof *o);
  o->order_id = be->order_id;
  o->client_order_id = be->client_order_id;
  o->price = be->price;
  o->qty = be->qty;
  o->leaves = be->leaves;
  o->instrument_id = be->instrument_id;
  o->account = be->account;
  o->side = be->side;
  o->stream = stream;
  order_link(gw, i);
  order_link_account(gw, i);
  gw_map_put(&gw->order_map, o->order_id, i);
  gw->n_orders++;
  assert(gw->n_orders <= gw->cfg.max_orders);
  return o;
}

static void order_unlink(hg_gateway_t *gw, order_t *o) {
  if (o->stream == NONE32) return;
  stream_t *st = &gw->streams[o->stream];
  if (o->prev != NONE32) {
    gw->orders[o->prev].next = o->next;
  } else {
    st->orders = o->next;
  }
  if (o->next != NONE32) gw->orders[o->next].prev = o->prev;
}

void gw_order_move(hg_gateway_t *gw, order_t *o, uint32_t stream) {
  assert(o->order_id != 0);
  order_unlink(gw, o);
  o->stream = stream;
  order_link(gw, (uint32_t)(o - gw->orders));
}

void gw_order_set_scoped(hg_gateway_t *gw, order_t *o) {
  assert(o->order_id != 0 && !o->scoped);
  o->scoped = 1;
  gw->n_scoped++;
}

void gw_order_remove(hg_gateway_t *gw, order_t *o) {
  assert(o->order_id != 0); /* a live entry, not one of the free list */
  uint32_t i = (uint32_t)(o - gw->orders);
  if (o->scoped) {
    assert(gw->n_scoped > 0);
    gw->n_scoped--;
  }
  order_unlink(gw, o);
  order_unlink_account(gw, o);
  gw_map_del(&gw->order_map, o->order_id);
  o->order_id = 0;
  o->next = gw->free_order;
  gw->free_order = i;
  assert(gw->n_orders > 0);
  gw->n_orders--;
}

/* ------------------------------------------------------ accounts, positions */

account_t *gw_account_find(hg_gateway_t *gw, uint32_t id) {
  uint32_t i = gw_map_get(&gw->account_map, id);
  return i == NONE32 ? NULL : &gw->accounts[i];
}

account_t *gw_account_add(hg_gateway_t *gw, uint32_t id, uint32_t firm, int64_t cash) {
  account_t *a = gw_account_find(gw, id);
  if (a == NULL) {
    uint32_t i;
    for (i = 0; i < gw->cfg.max_accounts; i++)
      if (gw->accounts[i].id == 0) break;
    if (i == gw->cfg.max_accounts) return NULL;
    a = &gw->accounts[i];
    a->stream = NONE32;
    a->ohead = a->otail = NONE32;
    gw_map_put(&gw->account_map, id, i);
  }
  a->id = id;
  a->firm = firm;
  a->cash = cash;
  return a;
}

static position_t *position_get(hg_gateway_t *gw, uint32_t account, uint32_t instrument) {
  uint64_t k = (uint64_t)account << 32 | instrument;
  uint32_t i = gw_map_get(&gw->position_map, k);
  if (i == NONE32) {
    if (gw->n_positions == gw->cfg.max_positions) {
      gw_log(gw, HG_LOG_WARN, "position table full (%u); positions incomplete",
             gw->cfg.max_positions);
      return NULL;
    }
    i = gw->n_positions++;
    gw->positions[i].key = k;
    gw->positions[i].cost_known = 1;
    gw_map_put(&gw->position_map, k, i);
  }
  return &gw->positions[i];
}

void gw_position_add(hg_gateway_t *gw, uint32_t account, uint32_t instrument, int side,
                     int64_t qty, int64_t price) {
  position_t *q = position_get(gw, account, instrument);
  if (q == NULL) return;
  int64_t net = q->bought - q->sold;
  int64_t sq = side == HG_SIDE_BUY ? qty : -qty;
  q->day_q = gw_sat64((__int128)q->day_q + sq);
  q->day_qp = gw_sat64((__int128)q->day_qp + (__int128)sq * price);
  if (net == 0 || (net > 0) == (sq > 0)) {
    q->cost = gw_sat64((__int128)q->cost + (__int128)sq * price);
  } else {
    int64_t left = (net > 0 ? net : -net) - qty;
    if (left >= 0) /* a reduction: the rest keeps its average */
      q->cost = gw_sat64((__int128)q->cost * left / (net > 0 ? net : -net));
    else { /* a flip: the new side's entry is this fill */
      q->cost = gw_sat64((__int128)(net > 0 ? left : -left) * price);
      q->cost_known = 1;
    }
  }
  if (side == HG_SIDE_BUY) {
    q->bought += qty;
  } else {
    q->sold += qty;
  }
  if (q->bought == q->sold) {
    q->cost = 0;
    q->cost_known = 1;
  }
}

void gw_positions_settled(hg_gateway_t *gw, uint32_t instrument) {
  for (uint32_t i = 0; i < gw->n_positions; i++)
    if ((uint32_t)gw->positions[i].key == instrument) gw->positions[i].day_q = gw->positions[i].day_qp = 0;
}

/* Appends e to the ledger copy and to its account's chain. */
static void ledger_append(hg_gateway_t *gw, const hg_ledger_entry_t *e) {
  if (gw->ledger_lost) return;
  if (gw->n_ledger == gw->cap_ledger) {
    uint64_t ncap = gw->cap_ledger ? gw->cap_ledger * 2 : 4096;
    hg_ledger_entry_t *nl = realloc(gw->ledger, ncap * sizeof *nl);
    if (nl != NULL) gw->ledger = nl;
    uint64_t *nn = nl != NULL ? realloc(gw->ledger_next, ncap * sizeof *nn) : NULL;
    if (nn == NULL) {
      gw->ledger_lost = 1;
      gw_log(gw, HG_LOG_WARN, "ledger copy: out of memory; statements unavailable");
      return;
    }
    gw->ledger_next = nn;
    gw->cap_ledger = ncap;
  }
  uint64_t i = gw->n_ledger++;
  gw->ledger[i] = *e;
  gw->ledger[i].index = i;
  gw->ledger_next[i] = 0;
  account_t *a = gw_account_find(gw, e->account);
  if (a == NULL) return; /* not in the account table: kept, never shown */
  if (a->ltail != 0) gw->ledger_next[a->ltail - 1] = i + 1;
  else a->lhead = i + 1;
  a->ltail = i + 1;
}

/* The events that post ledger entries, one entry each and in the order the
 * clearing posted them, so the copy's indexes are the ledger's. */
void gw_ledger_event(hg_gateway_t *gw, const hg_exchange_event_t *ev) {
  hg_ledger_entry_t e;
  memset(&e, 0, sizeof e);
  e.seq = ev->seq;
  e.ts = ev->ts;
  e.account = ev->account;
  e.balance = ev->balance;
  switch (ev->type) {
  case HG_XEV_DEPOSIT:
  case HG_XEV_WITHDRAWAL:
    e.kind = ev->type == HG_XEV_DEPOSIT ? HG_LEDGER_DEPOSIT : HG_LEDGER_WITHDRAWAL;
    e.instrument = HG_CLR_NO_INSTRUMENT;
    e.amount = ev->type == HG_XEV_DEPOSIT ? ev->amount : -ev->amount;
    break;
  case HG_XEV_VM:
  case HG_XEV_FINAL_SETTLEMENT:
    e.kind = ev->type == HG_XEV_VM ? HG_LEDGER_VM : HG_LEDGER_FINAL;
    e.instrument = ev->instrument_id;
    e.amount = ev->amount;
    e.price = ev->price;
    e.qty = ev->qty;
    /* The cycle posts VM at the 16:00 of its day, not at the command's ts. */
    if (ev->type == HG_XEV_VM) e.ts = (uint64_t)ev->day * HG_NS_PER_DAY + gw->cycle_tod_ns;
    break;
  case HG_XEV_CASH: /* the guarantee's entries, the fund's (account 0) included */
    e.kind = ev->kind;
    e.instrument = ev->instrument_id != 0 ? ev->instrument_id : HG_CLR_NO_INSTRUMENT;
    e.amount = ev->amount;
    e.price = ev->price;
    e.qty = ev->qty;
    if (ev->command == HG_COMMAND_DAILY_SETTLEMENT)
      e.ts = (uint64_t)ev->day * HG_NS_PER_DAY + gw->cycle_tod_ns;
    break;
  default:
    return;
  }
  ledger_append(gw, &e);
}

/* Copies the recovered ledger; before the pipeline threads start. */
static int seed_ledger(hg_gateway_t *gw, const hg_clearing_t *clr) {
  hg_clearing_config_t d;
  hg_clearing_config_default(&d);
  gw->cycle_tod_ns = d.cycle_time_of_day_ns;
  uint64_t n = hg_clearing_ledger_size(clr);
  for (uint64_t i = 0; i < n; i++) {
    hg_ledger_entry_t e;
    int rc = hg_clearing_ledger_get(clr, i, &e);
    if (rc != 0) return rc;
    /* A recovered cycle shows the time of day this exchange was set up with. */
    if (e.kind == HG_LEDGER_VM) gw->cycle_tod_ns = e.ts % HG_NS_PER_DAY;
    ledger_append(gw, &e);
    if (gw->ledger_lost) return -ENOMEM;
  }
  return 0;
}

typedef struct seed_ctx {
  hg_gateway_t *gw;
  const hg_exchange_t *ex;
  uint32_t instrument; /* being seeded */
  int rc;
  uint64_t orders;     /* live orders seen */
  int orders_full;     /* the mirror could not hold them all */
} seed_ctx_t;

/* A recovered resting order, mirrored on the account's stream (which
 * hg_gateway_start() opens: see open_recovered). Session-scoped ones (COD
 * orders, quotes) are mirrored too, flagged: their sessions are gone, and
 * a SESSIONS_ENDED cancels them. A single node journals it at start and
 * drops them from the mirror; a cluster node keeps them until the next
 * leader's, and a cluster snapshot's route state moves each to the key
 * that entered it (hg_gateway_seed_routes), so that the cancel's report
 * goes where every other node sends it. */
static void seed_order(void *ctx, const hg_book_order_t *o) {
  seed_ctx_t *s = ctx;
  account_t *a = gw_account_find(s->gw, o->account);
  if (a != NULL) a->recovered = 1;
  s->orders++;
  if (s->orders_full) return;
  hg_book_event_t be;
  memset(&be, 0, sizeof be);
  be.order_id = o->order_id;
  be.client_order_id = o->client_order_id;
  be.account = o->account;
  be.price = o->price;
  be.qty = o->qty;
  be.leaves = o->leaves;
  be.side = o->side;
  be.instrument_id = s->instrument;
  order_t *m = gw_order_add(s->gw, &be, gw_owner_stream(s->gw, NULL, o->account));
  if (m == NULL) {
    s->orders_full = 1;
    s->rc = HG_EFULL;
  } else if (o->session_scoped) {
    gw_order_set_scoped(s->gw, m);
  }
}

static void seed_instrument(void *ctx, const hg_exchange_instrument_info_t *info) {
  seed_ctx_t *s = ctx;
  hg_gateway_t *gw = s->gw;
  instr_t *in = gw_instr_add(gw, info->id, info->symbol, &info->params,
                             info->halted ? ISTATE(HALTED) : ISTATE(TRADING));
  if (in == NULL) {
    s->rc = HG_EFULL;
    return;
  }
  gw_instr_reference(in, info->ref_price, info->band_low, info->band_high);
  const hg_book_t *book = hg_exchange_book(s->ex, info->id);
  if (book == NULL) return;
  /* hg_book_depth writes hg_book_level_t: bounce through the arena, idle
   * before the loop runs. */
  size_t maxn = gw->arena.cap / sizeof(hg_book_level_t);
  hg_book_level_t *tmp = (hg_book_level_t *)(void *)gw->arena_buf;
  for (int side = 0; side < 2; side++) {
    uint32_t cap = in->lv[side].cap;
    size_t n = hg_book_depth(book, (hg_side_t)side, tmp, maxn < cap ? maxn : cap);
    for (size_t k = 0; k < n; k++) gw_level_set(gw, in, side, tmp[k].price, tmp[k].qty);
  }
  s->instrument = info->id;
  hg_book_foreach(book, seed_order, s);
}

static void seed_account(void *ctx, const hg_exchange_account_info_t *info) {
  seed_ctx_t *s = ctx;
  if (gw_account_add(s->gw, info->id, info->firm, info->cash) == NULL) s->rc = HG_EFULL;
}

/* The position each account holds at attach (recovered state), carried as
 * bought (long) or sold (short): the mirror otherwise counts only fills it
 * sees, and a restarted gateway must not answer a position query with
 * nothing for an account that holds contracts. The day's sums come from
 * the clearing; the entry value of a recovered position is unknown. */
static void seed_positions(hg_gateway_t *gw, const hg_clearing_t *clr) {
  for (uint32_t a = 0; a < gw->cfg.max_accounts; a++) {
    if (gw->accounts[a].id == 0) continue;
    for (uint32_t i = 0; i < gw->cfg.max_instruments; i++) {
      if (gw->instr[i].id == 0) continue;
      hg_clearing_position_t cp;
      if (hg_clearing_position(clr, gw->accounts[a].id, gw->instr[i].id, &cp) != 0 ||
          (cp.pos == 0 && cp.day_qty == 0 && cp.day_value == 0))
        continue;
      position_t *q = position_get(gw, gw->accounts[a].id, gw->instr[i].id);
      if (q == NULL) continue;
      if (cp.pos > 0) q->bought += cp.pos;
      else q->sold -= cp.pos;
      q->day_q = cp.day_qty;
      q->day_qp = cp.day_value;
      q->cost_known = cp.pos == 0;
    }
  }
}

static const order_t *sort_orders; /* seed_sort's qsort only (attach, one thread) */

static int cmp_order_id(const void *x, const void *y) {
  uint64_t a = sort_orders[*(const uint32_t *)x].order_id;
  uint64_t b = sort_orders[*(const uint32_t *)y].order_id;
  return (a > b) - (a < b);
}

/* The seed adds orders book by book: relinks each account's list in order
 * id order, which later events keep by appending. */
static int seed_sort(hg_gateway_t *gw) {
  if (gw->n_orders == 0) return 0;
  uint32_t *ix = malloc((size_t)gw->n_orders * sizeof *ix);
  if (ix == NULL) return -ENOMEM;
  sort_orders = gw->orders;
  for (uint32_t k = 0; k < gw->cfg.max_accounts; k++) {
    account_t *a = &gw->accounts[k];
    if (a->id == 0 || a->ohead == NONE32) continue;
    uint32_t n = 0;
    for (uint32_t i = a->ohead; i != NONE32; i = gw->orders[i].anext) ix[n++] = i;
    qsort(ix, n, sizeof *ix, cmp_order_id);
    a->ohead = a->otail = NONE32;
    for (uint32_t j = 0; j < n; j++) order_link_account(gw, ix[j]);
  }
  sort_orders = NULL;
  free(ix);
  return 0;
}

int hg_gateway_attach(hg_gateway_t *gw, hg_pipeline_t *p) {
  if (gw->pipe != NULL || gw->started || p == NULL) return HG_ESTATE;
  const hg_exchange_t *ex = hg_pipeline_exchange(p);
  seed_ctx_t s = {.gw = gw, .ex = ex, .rc = 0};
  hg_exchange_foreach_account(ex, seed_account, &s);
  if (s.rc == 0) hg_exchange_foreach_instrument(ex, seed_instrument, &s);
  if (s.rc == 0) s.rc = seed_sort(gw);
  if (s.rc == 0) seed_positions(gw, hg_exchange_clearing(ex));
  if (s.rc == 0) s.rc = seed_ledger(gw, hg_exchange_clearing(ex));
  if (s.orders_full)
    gw_log(gw, HG_LOG_ERROR,
           "the recovered books hold %" PRIu64 " live orders but the order mirror holds at "
           "most %" PRIu32 " (max_orders): refusing to start rather than not track some",
           s.orders, gw->cfg.max_orders);
  if (s.rc != 0) return s.rc;
  gw->pipe = p;
  gw->attached = 1;
  return 0;
}
