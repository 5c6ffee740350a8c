/*
 * query.c - requests answered from the mirror: market data subscriptions and
 * snapshots, positions, statements, open orders and the instrument list.
 * Loop thread.
 */
#include "gateway_int.h"

#include "hourglass/clearing.h"
#include "hourglass/exchange.h"

/* ------------------------------------------------------------ market data */

void gw_md_send_all(hg_gateway_t *gw, instr_t *in, env_t *env) {
  if (in->n_subs == 0) return;
  size_t n = gw_encode(gw, env);
  if (n == 0) return;
  /* A send may close a slow subscriber, which removes it from subs. */
  for (uint32_t k = in->n_subs; k-- > 0;) {
    if (k >= in->n_subs) continue;
    gw_conn_send_raw(&gw->conns[in->subs[k]], gw->scratch, n);
  }
}

void gw_md_status(hg_gateway_t *gw, instr_t *in) {
  Hourglass__V1__MarketDataStatus m = HOURGLASS__V1__MARKET_DATA_STATUS__INIT;
  m.instrument_id = in->id;
  m.md_seq = ++in->md_seq;
  m.state = in->state;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(MD_STATUS);
  env.md_status = &m;
  gw_md_send_all(gw, in, &env);
}

bool gw_md_unsubscribe(conn_t *c, instr_t *in) {
  for (uint32_t k = 0; k < in->n_subs; k++)
    if (in->subs[k] == c->idx) {
      in->subs[k] = in->subs[--in->n_subs];
      c->n_md--;
      return true;
    }
  return false;
}

void gw_md_unsubscribe_all(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  for (uint32_t i = 0; i < gw->cfg.max_instruments && c->n_md > 0; i++)
    if (gw->instr[i].id != 0) gw_md_unsubscribe(c, &gw->instr[i]);
  c->n_md = 0;
}

static void md_snapshot(conn_t *c, instr_t *in, uint32_t depth, uint64_t ref_seq) {
  hg_gateway_t *gw = c->gw;
  Hourglass__V1__PriceLevel lv[2][MAX_MD_DEPTH];
  Hourglass__V1__PriceLevel *ptr[2][MAX_MD_DEPTH];
  size_t n[2];
  for (int s = 0; s < 2; s++) {
    n[s] = in->lv[s].n < depth ? in->lv[s].n : depth;
    for (size_t k = 0; k < n[s]; k++) {
      hourglass__v1__price_level__init(&lv[s][k]);
      lv[s][k].price = in->lv[s].lv[k].price;
      lv[s][k].qty = in->lv[s].lv[k].qty;
      ptr[s][k] = &lv[s][k];
    }
  }
  Hourglass__V1__MarketDataSnapshot m = HOURGLASS__V1__MARKET_DATA_SNAPSHOT__INIT;
  m.instrument_id = in->id;
  m.md_seq = in->md_seq;
  m.state = in->state;
  m.n_bids = n[0];
  m.bids = ptr[0];
  m.n_asks = n[1];
  m.asks = ptr[1];
  PB_SET(m, ref_seq, ref_seq);
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(MD_SNAPSHOT);
  env.md_snapshot = &m;
  (void)gw;
  gw_conn_send(c, &env);
}

/* Bounds on the encoded size of the replies built here, for fitting them in
 * max_frame. A protobuf uint32 field takes at most 1 + 5 bytes, an int64 or
 * uint64 field at most 1 + 10 (a negative int64 always 10), and an element
 * of a repeated message field adds 2 (tag, a length below 128).
 *  - Position{instrument_id, net_qty, bought_qty, sold_qty}: 6 + 3 * 11 + 2
 *    = 41 bytes, rounded up to 48; in a Positions reply also settle_price,
 *    pnl and open_value: 41 + 3 * 11 = 74, rounded up to 80;
 *  - LedgerEntry{index, seq, ts, amount, balance, price, qty: 7 * 11; kind,
 *    instrument_id: 2 * 6} + 2 = 91 bytes, rounded up to 104;
 *  - the Envelope around the reply and the reply's own scalar fields
 *    (ref_seq, reason, account, instrument_id, next_index, cash: under 60
 *    bytes, the Envelope's seq and body tag under 20): 512 leaves room for
 *    fields added later. */
#define POSITION_ENCODED_MAX 48u
#define POSITION_PNL_ENCODED_MAX 80u
#define LEDGER_ENTRY_ENCODED_MAX 104u
#define REPLY_FIXED_MAX 512u

/* Memory for a reply, from the frame arena after the request it answers
 * (valid until the next frame is decoded). NULL when the arena is spent. */
static void *arena_take(hg_gateway_t *gw, size_t size) {
  return gw->arena.allocator.alloc(gw->arena.allocator.allocator_data, size);
}

/* settle_price, pnl and open_value of a Positions reply's entry. */
static void position_pnl(const instr_t *in, const position_t *q, Hourglass__V1__Position *m) {
  int64_t s = in->ref_price;
  PB_SET(*m, settle_price, s);
  __int128 v = ((__int128)q->day_q * s - q->day_qp) * in->params.tick_size *
               in->params.contract_unit;
  PB_SET(*m, pnl, gw_sat64(v));
  if (q->cost_known) PB_SET(*m, open_value, q->cost);
}

/* The account's positions as messages, in instrument order (pos holds them,
 * pp points at them; both have room for max_instruments, which bounds an
 * account's positions in listed instruments); open_only skips flat ones
 * (statements), and the others carry settle_price, pnl and open_value
 * (Positions). */
static size_t fill_positions(const hg_gateway_t *gw, uint32_t acct, int open_only,
                             Hourglass__V1__Position *pos, Hourglass__V1__Position **pp) {
  size_t n = 0;
  for (uint32_t i = 0; i < gw->cfg.max_instruments; i++) {
    if (gw->instr[i].id == 0) continue;
    uint32_t k = gw_map_get(&gw->position_map, (uint64_t)acct << 32 | gw->instr[i].id);
    if (k == NONE32) continue;
    const position_t *q = &gw->positions[k];
    if (open_only && q->bought == q->sold) continue;
    hourglass__v1__position__init(&pos[n]);
    pos[n].instrument_id = gw->instr[i].id;
    pos[n].bought_qty = q->bought;
    pos[n].sold_qty = q->sold;
    pos[n].net_qty = q->bought - q->sold;
    if (!open_only) position_pnl(&gw->instr[i], q, &pos[n]);
    pp[n] = &pos[n];
    n++;
  }
  return n;
}

/* Room for every position of one account (max_instruments), from the arena:
 * 0, or -1 when the arena is spent. */
static int positions_room(hg_gateway_t *gw, Hourglass__V1__Position **pos,
                          Hourglass__V1__Position ***pp) {
  uint32_t cap = gw->cfg.max_instruments;
  uint8_t *mem = arena_take(gw, (size_t)cap * (sizeof **pos + sizeof **pp));
  if (mem == NULL) return -1;
  *pos = (void *)mem;
  *pp = (void *)(*pos + cap);
  return 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The ids of the firm's accounts from `from` up, ascending, in the arena
 * (*n of them); NULL when there are none, more than max, or the arena is
 * spent (*n says which). */
static uint32_t *firm_ids(hg_gateway_t *gw, uint32_t firm, uint32_t from, size_t max, size_t *n) {
  size_t k = 0;
  for (uint32_t i = 0; i < gw->cfg.max_accounts; i++)
    k += gw->accounts[i].id != 0 && gw->accounts[i].id >= from && gw->accounts[i].firm == firm;
  *n = k;
  uint32_t *ids = k > 0 && k <= max ? arena_take(gw, k * sizeof *ids) : NULL;
  if (ids == NULL) return NULL;
  k = 0;
  for (uint32_t i = 0; i < gw->cfg.max_accounts; i++)
    if (gw->accounts[i].id != 0 && gw->accounts[i].id >= from && gw->accounts[i].firm == firm)
      ids[k++] = gw->accounts[i].id;
  qsort(ids, k, sizeof *ids, cmp_u32);
  return ids;
}

/* A risk viewer's PositionsRequest without an account: the firm's account
 * ids, ascending (a firm with more than fit max_frame is refused whole,
 * REJ_GATEWAY_FULL). */
static void firm_accounts(hg_gateway_t *gw, uint32_t firm, uint64_t ref_seq, uint32_t si) {
  Hourglass__V1__Positions m = HOURGLASS__V1__POSITIONS__INIT;
  m.ref_seq = ref_seq;
  size_t n = 0;
  /* Five bytes an id at most (packed varints). */
  size_t max = gw->cfg.max_frame > REPLY_FIXED_MAX ? (gw->cfg.max_frame - REPLY_FIXED_MAX) / 5 : 0;
  uint32_t *ids = firm_ids(gw, firm, 0, max, &n);
  if (n > 0 && ids == NULL) {
    PB_SET(m, reason, REJ(GATEWAY_FULL));
  } else {
    m.n_firm_accounts = n;
    m.firm_accounts = ids;
  }
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(POSITIONS);
  out.positions = &m;
  gw_stream_send_idx(gw, si, &out);
}

/* The account's margin and standing from the clearing, in loop mode only: the loop
 * then owns the exchange between commands (hourglass/pipeline.h). In
 * threads mode the engine thread does, and the fields stay absent. */
static void account_margin(const hg_gateway_t *gw, uint32_t acct, Hourglass__V1__Positions *m) {
  if (!gw->loop_mode || gw->pipe == NULL) return;
  hg_clearing_account_info_t info;
  if (hg_clearing_account_info(hg_exchange_clearing(hg_pipeline_exchange(gw->pipe)), acct,
                               &info) != 0)
    return;
  PB_SET(*m, initial_margin, info.initial_margin);
  PB_SET(*m, open_order_margin, info.initial_margin - info.position_margin);
  /* saturates like the margin itself, never wraps */
  PB_SET(*m, excess_equity, gw_sat64((__int128)info.balance - info.initial_margin));
  hg_clearing_standing_t st;
  if (hg_clearing_standing(hg_exchange_clearing(hg_pipeline_exchange(gw->pipe)), acct, &st) != 0)
    return;
  PB_SET(*m, standing, (Hourglass__V1__Standing)st.state);
  PB_SET(*m, mark_equity, st.equity);
  PB_SET(*m, maintenance_margin, st.mm);
  PB_SET(*m, call_amount, st.call_amount);
  PB_SET(*m, call_due_cycle, st.call_due);
}

/* Every position of the account, never cut short: a reply that would not
 * fit max_frame is refused whole (REJ_GATEWAY_FULL). */
void gw_handle_positions(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__PositionsRequest *r = env->positions_request;
  uint32_t acct = st->account;
  account_t *a = NULL;
  uint32_t reason = 0;
  if (st->role == HG_ROLE_RISK_VIEWER && (!r->has_account || r->account == 0)) {
    firm_accounts(gw, st->firm, env->seq, si);
    return;
  }
  if (st->role == HG_ROLE_RISK_VIEWER) {
    acct = r->account;
    a = gw_account_find(gw, acct);
    /* Another firm's account answers like one that does not exist. */
    if (a == NULL || a->firm != st->firm) reason = REJ(UNKNOWN_ACCOUNT);
  } else {
    if (r->has_account && r->account != 0 && r->account != acct) {
      reason = REJ(UNKNOWN_ACCOUNT);
    } else {
      a = gw_account_find(gw, acct);
      if (a == NULL) reason = REJ(UNKNOWN_ACCOUNT);
    }
  }
  Hourglass__V1__Position *pos = NULL, **pp = NULL;
  size_t n = 0;
  if (reason == 0 && positions_room(gw, &pos, &pp) != 0) reason = REJ(GATEWAY_FULL);
  if (reason == 0) n = fill_positions(gw, acct, 0, pos, pp);
  if (reason == 0 && REPLY_FIXED_MAX + n * POSITION_PNL_ENCODED_MAX > gw->cfg.max_frame) {
    reason = REJ(GATEWAY_FULL);
    n = 0;
  }
  Hourglass__V1__Positions m = HOURGLASS__V1__POSITIONS__INIT;
  m.ref_seq = env->seq;
  m.account = reason == 0 ? acct : 0;
  m.cash = a != NULL && reason == 0 ? a->cash : 0;
  m.n_positions = n;
  m.positions = pp;
  m.has_reason = reason != 0;
  m.reason = reason;
  if (reason == 0) account_margin(gw, acct, &m);
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(POSITIONS);
  out.positions = &m;
  gw_stream_send_idx(gw, si, &out);
}

/* The account a request naming `asked` (0: none) may see: a trader's or
 * market maker's own (asked 0 or the own), a risk viewer's account of its
 * firm (asked). NULL for any other, which the reply must not tell from an
 * account that does not exist. */
static account_t *account_in_reach(hg_gateway_t *gw, const stream_t *st, uint32_t asked) {
  bool viewer = st->role == HG_ROLE_RISK_VIEWER;
  uint32_t acct = viewer || asked != 0 ? asked : st->account;
  if (acct == 0 || (!viewer && acct != st->account)) return NULL;
  account_t *a = gw_account_find(gw, acct);
  return a == NULL || (viewer && a->firm != st->firm) ? NULL : a;
}

/* -------------------------------------------------------------- statements */

/* Entries of one Statement page at most. */
#define STMT_PAGE_MAX 256u
/* Positions a page's size always leaves room for, so that the page size
 * does not depend on the account's positions up to that many. */
#define STMT_POS_ROOM 256u

/* A Statement that only says why there is none. */
static void stmt_refuse(hg_gateway_t *gw, uint32_t si, env_t *out, uint32_t reason) {
  out->statement->has_reason = 1;
  out->statement->reason = reason;
  gw_stream_send_idx(gw, si, out);
}

/* One page of the account's ledger entries (from r->from_index) and every
 * open position. The page holds what fits max_frame next to the positions
 * (STMT_PAGE_MAX at most, one at least); an account whose open positions
 * and one entry would not fit is refused (REJ_GATEWAY_FULL), never cut
 * short. */
void gw_handle_statement(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__StatementRequest *r = env->statement_request;
  Hourglass__V1__Statement m = HOURGLASS__V1__STATEMENT__INIT;
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(STATEMENT);
  out.statement = &m;
  m.ref_seq = env->seq;
  account_t *a = account_in_reach(gw, st, r->account);
  if (a == NULL) {
    stmt_refuse(gw, si, &out, REJ(UNKNOWN_ACCOUNT));
    return;
  }
  uint32_t acct = a->id;
  if (r->base.n_unknown_fields != 0 || r->instrument_id == HG_CLR_NO_INSTRUMENT ||
      gw->ledger_lost) {
    stmt_refuse(gw, si, &out, gw->ledger_lost ? REJ(UNAVAILABLE) : REJ(INVALID_REQUEST));
    return;
  }
  Hourglass__V1__Position *pos, **pp;
  if (positions_room(gw, &pos, &pp) != 0) {
    stmt_refuse(gw, si, &out, REJ(GATEWAY_FULL));
    return;
  }
  size_t np = fill_positions(gw, acct, 1, pos, pp);
  if (REPLY_FIXED_MAX + np * POSITION_ENCODED_MAX + LEDGER_ENTRY_ENCODED_MAX >
      gw->cfg.max_frame) {
    stmt_refuse(gw, si, &out, REJ(GATEWAY_FULL));
    return;
  }
  uint64_t fixed = REPLY_FIXED_MAX + (uint64_t)(np > STMT_POS_ROOM ? np : STMT_POS_ROOM) *
                                         POSITION_ENCODED_MAX;
  /* A smaller configured frame gets smaller pages (never below one entry). */
  uint32_t page = STMT_PAGE_MAX;
  if (gw->cfg.max_frame < fixed + STMT_PAGE_MAX * LEDGER_ENTRY_ENCODED_MAX)
    page = gw->cfg.max_frame > fixed + LEDGER_ENTRY_ENCODED_MAX
               ? (uint32_t)((gw->cfg.max_frame - fixed) / LEDGER_ENTRY_ENCODED_MAX)
               : 1;
  Hourglass__V1__LedgerEntry *le = arena_take(gw, page * (sizeof *le + sizeof(void *)));
  if (le == NULL) {
    stmt_refuse(gw, si, &out, REJ(GATEWAY_FULL));
    return;
  }
  Hourglass__V1__LedgerEntry **lp = (void *)(le + page);
  size_t n = 0;
  uint32_t inst = r->instrument_id;
  for (uint64_t k = a->lhead; k != 0; k = gw->ledger_next[k - 1]) {
    const hg_ledger_entry_t *x = &gw->ledger[k - 1];
    if (x->index < r->from_index || (inst != 0 && x->instrument != inst)) continue;
    if (n == page) {
      PB_SET(m, next_index, x->index);
      break;
    }
    hourglass__v1__ledger_entry__init(&le[n]);
    le[n].index = x->index;
    le[n].seq = x->seq;
    le[n].ts = x->ts;
    le[n].kind = x->kind;
    le[n].has_instrument_id = x->instrument != HG_CLR_NO_INSTRUMENT;
    le[n].instrument_id = le[n].has_instrument_id ? x->instrument : 0;
    le[n].amount = x->amount;
    le[n].balance = x->balance;
    le[n].has_price = x->price != 0;
    le[n].price = x->price;
    le[n].has_qty = x->qty != 0;
    le[n].qty = x->qty;
    lp[n] = &le[n];
    n++;
  }
  PB_SET(m, account, acct);
  m.has_instrument_id = inst != 0;
  m.instrument_id = inst;
  m.n_entries = n;
  m.entries = lp;
  PB_SET(m, cash, a->cash);
  m.n_positions = np;
  m.positions = pp;
  gw_stream_send_idx(gw, si, &out);
}

/* "GPU.GRADE.YYYY-MM": grade and delivery month, when the symbol has them. */
static void split_symbol(const char *sym, char *grade, size_t gcap, char *month, size_t mcap) {
  grade[0] = month[0] = 0;
  const char *d1 = strchr(sym, '.');
  const char *d2 = d1 != NULL ? strchr(d1 + 1, '.') : NULL;
  if (d1 == NULL || d2 == NULL) return;
  snprintf(grade, gcap, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
  snprintf(month, mcap, "%s", d2 + 1);
}

void gw_handle_instruments(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  uint32_t cap = gw->cfg.max_instruments;
  /* Sized by max_instruments, so taken from the frame arena (after the
   * request it answers, which stays valid) rather than the stack. */
  size_t need = cap * (sizeof(Hourglass__V1__InstrumentInfo) + sizeof(void *) +
                       2 * (HG_SYMBOL_MAX + 1));
  uint8_t *mem = arena_take(gw, need);
  if (mem == NULL) {
    gw_send_response(gw, si, env->seq, REJ(GATEWAY_FULL), NULL);
    return;
  }
  Hourglass__V1__InstrumentInfo *info = (void *)mem;
  Hourglass__V1__InstrumentInfo **ptr = (void *)(info + cap);
  char (*grade)[HG_SYMBOL_MAX + 1] = (void *)(ptr + cap);
  char (*month)[HG_SYMBOL_MAX + 1] = (void *)(grade + cap);
  size_t n = 0;
  for (uint32_t i = 0; i < cap; i++) {
    instr_t *in = &gw->instr[i];
    if (in->id == 0 || in->state == ISTATE(DELISTED)) continue;
    hourglass__v1__instrument_info__init(&info[n]);
    info[n].instrument_id = in->id;
    info[n].symbol = in->symbol;
    split_symbol(in->symbol, grade[n], sizeof grade[n], month[n], sizeof month[n]);
    info[n].grade = grade[n][0] ? grade[n] : NULL;
    info[n].delivery_month = month[n][0] ? month[n] : NULL;
    info[n].tick_size = in->params.tick_size;
    info[n].contract_unit = in->params.contract_unit;
    info[n].min_price = in->params.min_price;
    info[n].max_price = in->params.max_price;
    info[n].max_order_qty = in->params.max_order_qty;
    info[n].state = in->state;
    info[n].has_ref_price = info[n].has_band_low = info[n].has_band_high = 1;
    info[n].ref_price = in->ref_price;
    info[n].band_low = in->band_low;
    info[n].band_high = in->band_high;
    ptr[n] = &info[n];
    n++;
  }
  Hourglass__V1__InstrumentList m = HOURGLASS__V1__INSTRUMENT_LIST__INIT;
  m.ref_seq = env->seq;
  m.n_instruments = n;
  m.instruments = ptr;
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(INSTRUMENT_LIST);
  out.instrument_list = &m;
  gw_stream_send_idx(gw, si, &out);
}

void gw_handle_md_subscribe(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__MarketDataSubscribe *r = env->md_subscribe;
  uint32_t depth = r->has_depth ? r->depth : 10;
  instr_t *in = gw_instr_find(gw, r->instrument_id);
  uint32_t reason = 0;
  if (depth == 0 || depth > MAX_MD_DEPTH) reason = REJ(INVALID_REQUEST);
  else if (in == NULL || in->state == ISTATE(DELISTED)) reason = REJ(UNKNOWN_INSTRUMENT);
  if (reason != 0) {
    gw_send_response(gw, si, env->seq, reason, NULL);
    return;
  }
  bool already = false;
  for (uint32_t k = 0; k < in->n_subs; k++) already |= in->subs[k] == c->idx;
  if (!already) {
    in->subs[in->n_subs++] = c->idx;
    c->n_md++;
  }
  md_snapshot(c, in, depth, env->seq);
}

void gw_handle_md_unsubscribe(conn_t *c, uint32_t si, const env_t *env) {
  instr_t *in = gw_instr_find(c->gw, env->md_unsubscribe->instrument_id);
  uint32_t reason = in == NULL || in->state == ISTATE(DELISTED) ? REJ(UNKNOWN_INSTRUMENT)
                    : !gw_md_unsubscribe(c, in)                     ? REJ(NOT_SUBSCRIBED)
                                                                 : 0;
  gw_send_response(c->gw, si, env->seq, reason, NULL);
}

void gw_handle_drop_copy(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  if (!c->drop_copy) {
    c->drop_copy = 1;
    gw->drop_list[gw->n_drop++] = c->idx;
  }
  gw_send_response(gw, si, env->seq, 0, NULL);
}

/* ------------------------------------------------------------- open orders */

/* Orders of one OpenOrders page at most (and a request's limit). */
#define OPEN_ORDERS_PAGE_MAX 1000u
/* OpenOrder{account, instrument_id, side, quote_group: 4 * 6; order_id,
 * client_order_id, price, qty, leaves: 5 * 11} + 2 = 81, rounded up. */
#define OPEN_ORDER_ENCODED_MAX 96u

/* An OpenOrders that only says why there is none. */
static void open_orders_refuse(hg_gateway_t *gw, uint32_t si, env_t *out, uint32_t reason) {
  out->open_orders->has_reason = 1;
  out->open_orders->reason = reason;
  gw_stream_send_idx(gw, si, out);
}

/* Adds the account's live orders from order id `from` to the page (room
 * for `page`); returns 0, or 1 when the page is full with more to come
 * (next_account, next_order_id set). Walks the account's own list only. */
static int open_orders_account(hg_gateway_t *gw, const account_t *a, uint64_t from,
                               uint32_t inst, Hourglass__V1__OpenOrder *oo,
                               Hourglass__V1__OpenOrders *m, size_t page) {
  for (uint32_t i = gw_account_orders_from(gw, a, from); i != NONE32; i = gw->orders[i].anext) {
    const order_t *o = &gw->orders[i];
    if (inst != 0 && o->instrument_id != inst) continue;
    if (m->n_orders == page) {
      PB_SET(*m, next_account, a->id);
      PB_SET(*m, next_order_id, o->order_id);
      return 1;
    }
    Hourglass__V1__OpenOrder *x = &oo[m->n_orders];
    hourglass__v1__open_order__init(x);
    x->account = o->account;
    x->instrument_id = o->instrument_id;
    x->order_id = o->order_id;
    if (o->client_order_id != 0) PB_SET(*x, client_order_id, o->client_order_id);
    x->side = (Hourglass__V1__Side)o->side;
    x->price = o->price;
    x->qty = o->qty;
    x->leaves = o->leaves;
    if (o->quote_group != 0) PB_SET(*x, quote_group, o->quote_group);
    m->orders[m->n_orders++] = x;
  }
  return 0;
}

/* One page of live orders, by account then order id, from the mirror's
 * per-account lists: never a walk of the whole order table. A risk
 * viewer's request without an account covers its firm's accounts in id
 * order (the account table is scanned, the orders are not). */
void gw_handle_open_orders(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__OpenOrdersRequest *r = env->open_orders_request;
  Hourglass__V1__OpenOrders m = HOURGLASS__V1__OPEN_ORDERS__INIT;
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(OPEN_ORDERS);
  out.open_orders = &m;
  m.ref_seq = env->seq;
  /* A risk viewer naming no account asks for its whole firm. */
  bool firm = st->role == HG_ROLE_RISK_VIEWER && r->account == 0;
  account_t *a = firm ? NULL : account_in_reach(gw, st, r->account);
  if (!firm && a == NULL) {
    open_orders_refuse(gw, si, &out, REJ(UNKNOWN_ACCOUNT));
    return;
  }
  if (r->base.n_unknown_fields != 0 || r->limit > OPEN_ORDERS_PAGE_MAX ||
      (a != NULL && r->from_account != 0 && r->from_account != a->id)) {
    open_orders_refuse(gw, si, &out, REJ(INVALID_REQUEST));
    return;
  }
  size_t page = r->limit != 0 ? r->limit : OPEN_ORDERS_PAGE_MAX;
  /* A smaller configured frame gets smaller pages (never below one order). */
  size_t fit = gw->cfg.max_frame > REPLY_FIXED_MAX + OPEN_ORDER_ENCODED_MAX
                   ? (gw->cfg.max_frame - REPLY_FIXED_MAX) / OPEN_ORDER_ENCODED_MAX
                   : 1;
  if (page > fit) page = fit;
  Hourglass__V1__OpenOrder *oo = arena_take(gw, page * (sizeof *oo + sizeof(void *)));
  if (oo == NULL) {
    open_orders_refuse(gw, si, &out, REJ(GATEWAY_FULL));
    return;
  }
  m.orders = (void *)(oo + page);
  uint32_t inst = r->instrument_id;
  if (a != NULL) {
    m.account = a->id;
    m.has_account = 1;
    open_orders_account(gw, a, r->from_order_id, inst, oo, &m, page);
  } else {
    /* The firm's accounts from from_account up, in id order (the account
     * table is scanned once, the orders never). */
    size_t na = 0;
    uint32_t *ids = firm_ids(gw, st->firm, r->from_account, gw->cfg.max_accounts, &na);
    if (na > 0 && ids == NULL) {
      open_orders_refuse(gw, si, &out, REJ(GATEWAY_FULL));
      return;
    }
    for (size_t j = 0; j < na; j++) {
      uint64_t from = ids[j] == r->from_account ? r->from_order_id : 0;
      if (open_orders_account(gw, gw_account_find(gw, ids[j]), from, inst, oo, &m, page) != 0)
        break;
    }
  }
  gw_stream_send_idx(gw, si, &out);
}
