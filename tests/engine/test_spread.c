/*
 * The inference-margin spread (settlement/CONTRACT.md 7.4, 5.14, example
 * 6.14) through engine commands: listing and its refusals; leg prices by
 * the published rule and the inter-commodity credit (hand-computed figures
 * of 6.14); the leg band as a pre-trade check; orders the spread book refuses; a property test of
 * spread matching against a simple price-time model with, after every
 * command, both legs on every fill at the rule's prices, leg positions and
 * open quantities = ratio x spread fills and resting spread orders, and the
 * legs' positions summing to zero; snapshot, restore and the same commands
 * after it giving the same events and state hash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/error.h"
#include "hourglass/exchange.h"
#include "hourglass/sha256.h"

#define GPU 1   /* B200.A.2027-03, reference 3,400 */
#define TOKEN 2 /* TOK.OW671B.S.2027-03, reference 4,012 */
#define SPREAD 3
#define NT 27
#define NG 25
#define MAXEV 4096

typedef struct fx {
  hg_exchange_t *ex;
  hg_exchange_event_t *ev; /* MAXEV */
  size_t n;
  uint64_t seq;
  hg_sha256_t sha;
} fx_t;

static void sink(void *ctx, const hg_exchange_event_t *ev) {
  fx_t *f = ctx;
  assert_true(f->n < MAXEV);
  f->ev[f->n++] = *ev;
  hg_sha256_update(&f->sha, ev, sizeof *ev);
}

static void fx_create(fx_t *f) {
  memset(f, 0, sizeof *f);
  f->ev = calloc(MAXEV, sizeof *f->ev);
  assert_non_null(f->ev);
  hg_sha256_init(&f->sha);
  hg_clearing_config_t ccfg;
  hg_clearing_config_default(&ccfg);
  ccfg.max_positions = 256;
  ccfg.ledger_initial = 64;
  ccfg.max_firms = 16;
  hg_exchange_config_t cfg = {.max_instruments = 8, .max_accounts = 16, .max_book_orders = 1024,
                              .clearing = &ccfg};
  assert_int_equal(hg_exchange_create(&cfg, sink, f, &f->ex), 0);
}

static void fx_destroy(fx_t *f) {
  hg_exchange_destroy(f->ex);
  hg_sha256_discard(&f->sha);
  free(f->ev);
}

static hg_command_t mk(fx_t *f, uint32_t type) {
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = ++f->seq;
  c.ts = 1000 + c.seq;
  c.type = type;
  return c;
}

static void apply(fx_t *f, const hg_command_t *c) {
  f->n = 0;
  assert_int_equal(hg_exchange_apply(f->ex, c), 0);
}

static hg_book_params_t book(uint32_t id, int64_t ref, int64_t max_qty) {
  return (hg_book_params_t){.instrument_id = id, .tick_size = 1000, .contract_unit = 1000,
                            .min_price = 1, .max_price = 100000, .max_order_qty = max_qty,
                            .ref_price = ref, .max_orders = 512, .max_accounts = 16};
}

static void list(fx_t *f, const char *sym, uint32_t id, int64_t ref) {
  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "%s", sym);
  c.u.list.params = book(id, ref, 1000);
  apply(f, &c);
}

static void list_spread(fx_t *f, const char *sym, uint32_t id, uint32_t lt, uint32_t lg,
                        uint32_t nt, uint32_t ng, int64_t max_qty) {
  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "%s", sym);
  c.u.list.params = book(id, 0, max_qty);
  c.u.list.leg_token_id = lt;
  c.u.list.leg_gpu_id = lg;
  c.u.list.ratio_token = nt;
  c.u.list.ratio_gpu = ng;
  apply(f, &c);
}

static void account(fx_t *f, hg_account_t a) {
  hg_command_t c = mk(f, HG_COMMAND_ADD_ACCOUNT);
  c.u.add_account.account = a;
  c.u.add_account.firm = a;
  apply(f, &c);
  c = mk(f, HG_COMMAND_DEPOSIT);
  c.u.cash.account = a;
  c.u.cash.amount = 1000000000000000; /* 10^9 USD */
  apply(f, &c);
}

static uint64_t order(fx_t *f, uint32_t id, hg_account_t a, int side, int64_t px, int64_t qty,
                      int tif) {
  hg_command_t c = mk(f, HG_COMMAND_NEW_ORDER);
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = id, .account = a, .price = px,
                                       .client_order_id = c.seq,
                                       .qty = qty, .side = (uint8_t)side, .type = HG_ORD_LIMIT,
                                       .tif = (uint8_t)tif, .stp = HG_STP_NONE};
  apply(f, &c);
  return c.seq;
}

/* GPU and token legs and the 27:25 spread of 6.14, accounts 10..13. */
static void market(fx_t *f) {
  fx_create(f);
  list(f, "B200.A.2027-03", GPU, 3400);
  list(f, "TOK.OW671B.S.2027-03", TOKEN, 4012);
  list_spread(f, "MARGIN.OW671B.S.2027-03", SPREAD, TOKEN, GPU, NT, NG, 30);
  assert_int_equal(f->ev[0].type, HG_XEV_LISTED);
  assert_int_equal(f->ev[0].amount, TOKEN);
  assert_int_equal(f->ev[0].balance, GPU);
  assert_int_equal(f->ev[0].price, 0); /* no reference or band of its own */
  assert_int_equal(f->ev[0].lo, 0);
  assert_int_equal(f->ev[0].qty, NT);
  assert_int_equal(f->ev[0].margin, NG);
  for (hg_account_t a = 10; a <= 13; a++) account(f, a);
}

static int64_t pos(fx_t *f, hg_account_t a, uint32_t id, hg_clearing_position_t *out) {
  hg_clearing_position_t p;
  memset(&p, 0, sizeof p);
  if (hg_clearing_position(hg_exchange_clearing(f->ex), a, id, &p) != 0) memset(&p, 0, sizeof p);
  if (out != NULL) *out = p;
  return p.pos;
}

static const hg_exchange_event_t *find(fx_t *f, uint16_t type, size_t k) {
  for (size_t i = 0; i < f->n; i++)
    if (f->ev[i].type == type && k-- == 0) return &f->ev[i];
  return NULL;
}

static const hg_exchange_event_t *book_ev(fx_t *f, uint8_t type) {
  for (size_t i = 0; i < f->n; i++)
    if (f->ev[i].type == HG_XEV_BOOK && f->ev[i].book.type == type) return &f->ev[i];
  return NULL;
}

static void last_info(void *ctx, const hg_exchange_instrument_info_t *info) {
  *(hg_exchange_instrument_info_t *)ctx = *info;
}

/* ------------------------------------------------------------------------ */

static void test_listing(void **state) {
  (void)state;
  fx_t f;
  market(&f);
  /* the instrument's details name its legs and ratio */
  char sym[HG_SYMBOL_MAX + 1];
  assert_int_equal(hg_exchange_instrument_symbol(f.ex, SPREAD, sym), 0);
  assert_string_equal(sym, "MARGIN.OW671B.S.2027-03");
  assert_int_equal(hg_exchange_instrument_count(f.ex), 3);
  hg_exchange_instrument_info_t info;
  memset(&info, 0, sizeof info);
  hg_exchange_foreach_instrument(f.ex, last_info, &info);
  assert_int_equal(info.id, SPREAD);
  assert_int_equal(info.leg_token_id, TOKEN);
  assert_int_equal(info.leg_gpu_id, GPU);
  assert_int_equal(info.ratio_token, NT);
  assert_int_equal(info.ratio_gpu, NG);
  /* refusals: wrong token leg, ratio 0 or 101, a GPU leg of another month,
   * an order size whose legs pass 1,000, id or symbol taken */
  list(&f, "B200.A.2027-04", 4, 3400);
  list(&f, "TOK.OW671B.S.2027-04", 5, 4000);
  const char *apr = "MARGIN.OW671B.S.2027-04";
  list_spread(&f, apr, 6, TOKEN, 4, NT, NG, 30); /* token leg of March */
  assert_int_equal(f.ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_spread(&f, apr, 6, 5, GPU, NT, NG, 30); /* GPU leg of March */
  assert_int_equal(f.ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_spread(&f, apr, 6, 4, 5, NT, NG, 30); /* legs swapped */
  assert_int_equal(f.ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_spread(&f, apr, 6, 5, 4, 0, NG, 30);
  assert_int_equal(f.ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_spread(&f, apr, 6, 5, 4, 101, NG, 30);
  assert_int_equal(f.ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_spread(&f, apr, 6, 5, 4, NT, NG, 38); /* 38 x 27 > 1,000 */
  assert_int_equal(f.ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_spread(&f, "MARGIN.OW671B.S.2027-03", 6, TOKEN, GPU, NT, NG, 30);
  assert_int_equal(f.ev[0].reason, HG_XREJ_INSTRUMENT_EXISTS); /* symbol */
  list_spread(&f, apr, SPREAD, 5, 4, NT, NG, 30);
  assert_int_equal(f.ev[0].reason, HG_XREJ_INSTRUMENT_EXISTS); /* id */
  list(&f, "B200.A.2027-05", SPREAD, 3400);
  assert_int_equal(f.ev[0].reason, HG_XREJ_INSTRUMENT_EXISTS);
  /* a MARGIN symbol without legs is refused */
  list(&f, "MARGIN.OW671B.S.2027-04", 7, 0);
  assert_int_equal(f.ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_spread(&f, apr, 7, 5, 4, 1, 1, 30);
  assert_int_equal(f.ev[0].type, HG_XEV_LISTED);
  list_spread(&f, "MARGIN.OW671B.S.2027-05", 8, 5, 4, 1, 1, 30); /* legs of April */
  assert_int_equal(f.ev[0].reason, HG_XREJ_INVALID_PARAMS);
  fx_destroy(&f);
}

/* Section 6.14: S = 920 with R_g = 3,400 trades the GPU leg at 3,400 and
 * the token leg at 4,000; S = 921 at 4,001. */
static void test_leg_prices_6_14(void **state) {
  (void)state;
  fx_t f;
  market(&f);
  uint64_t s1 = order(&f, SPREAD, 10, HG_SIDE_SELL, 920, 2, HG_TIF_GTC);
  assert_int_equal(pos(&f, 10, TOKEN, NULL), 0);
  hg_clearing_position_t p;
  pos(&f, 10, TOKEN, &p);
  assert_int_equal(p.open_sell, 2 * NT);
  pos(&f, 10, GPU, &p);
  assert_int_equal(p.open_buy, 2 * NG);
  uint64_t b1 = order(&f, SPREAD, 11, HG_SIDE_BUY, 930, 2, HG_TIF_GTC);
  const hg_exchange_event_t *fill = book_ev(&f, HG_EV_FILL);
  assert_non_null(fill);
  assert_int_equal(fill->book.price, 920);
  assert_int_equal(fill->book.qty, 2);
  const hg_exchange_event_t *leg[4];
  for (int k = 0; k < 4; k++) {
    leg[k] = find(&f, HG_XEV_SPREAD_LEG, (size_t)k);
    assert_non_null(leg[k]);
    assert_int_equal(leg[k]->lo, SPREAD);
    assert_int_equal(leg[k]->hi, 920);
  }
  assert_null(find(&f, HG_XEV_SPREAD_LEG, 4));
  assert_true(leg[0] > fill);
  /* token leg: buyer 11, seller 10, 54 at 4,000; GPU leg: buyer 10,
   * seller 11, 50 at 3,400 */
  assert_int_equal(leg[0]->instrument_id, TOKEN);
  assert_int_equal(leg[0]->account, 11);
  assert_int_equal(leg[0]->kind, HG_SIDE_BUY);
  assert_int_equal(leg[0]->price, 4000);
  assert_int_equal(leg[0]->qty, 2 * NT);
  assert_int_equal(leg[0]->amount, (int64_t)b1);
  assert_int_equal(leg[1]->account, 10);
  assert_int_equal(leg[1]->kind, HG_SIDE_SELL);
  assert_int_equal(leg[1]->amount, (int64_t)s1);
  assert_int_equal(leg[2]->instrument_id, GPU);
  assert_int_equal(leg[2]->account, 10);
  assert_int_equal(leg[2]->kind, HG_SIDE_BUY);
  assert_int_equal(leg[2]->price, 3400);
  assert_int_equal(leg[2]->qty, 2 * NG);
  assert_int_equal(leg[3]->account, 11);
  assert_int_equal(leg[3]->kind, HG_SIDE_SELL);
  assert_int_equal(pos(&f, 11, TOKEN, NULL), 54);
  assert_int_equal(pos(&f, 11, GPU, NULL), -50);
  assert_int_equal(pos(&f, 10, TOKEN, NULL), -54);
  assert_int_equal(pos(&f, 10, GPU, &p), 50);
  assert_int_equal(p.open_buy, 0);
  pos(&f, 11, GPU, &p);
  assert_int_equal(p.open_sell, 0);
  /* S = 921: token leg 4,001 */
  order(&f, SPREAD, 12, HG_SIDE_BUY, 921, 1, HG_TIF_GTC);
  order(&f, SPREAD, 13, HG_SIDE_SELL, 921, 1, HG_TIF_IOC);
  assert_int_equal(find(&f, HG_XEV_SPREAD_LEG, 0)->price, 4001);
  assert_int_equal(find(&f, HG_XEV_SPREAD_LEG, 2)->price, 3400);
  fx_destroy(&f);
}

/* Section 6.14's credit: short 54 token contracts (ref 4,000), long 50
 * GPU-hour contracts (ref 3,400): 2 packages, credit 17,370,000,000, IM
 * 40,530,000,000 instead of 57,900,000,000. */
static void test_credit_6_14(void **state) {
  (void)state;
  fx_t f;
  fx_create(&f);
  list(&f, "B200.A.2027-03", GPU, 3400);
  list(&f, "TOK.OW671B.S.2027-03", TOKEN, 4000);
  account(&f, 10);
  account(&f, 11);
  /* the legs traded outright: no credit while the spread is not listed */
  order(&f, TOKEN, 10, HG_SIDE_SELL, 4000, 54, HG_TIF_GTC);
  order(&f, TOKEN, 11, HG_SIDE_BUY, 4000, 54, HG_TIF_GTC);
  order(&f, GPU, 10, HG_SIDE_BUY, 3400, 50, HG_TIF_GTC);
  order(&f, GPU, 11, HG_SIDE_SELL, 3400, 50, HG_TIF_GTC);
  int64_t im;
  assert_int_equal(hg_clearing_initial_margin(hg_exchange_clearing(f.ex), 10, &im), 0);
  assert_int_equal(im, 57900000000);
  list_spread(&f, "MARGIN.OW671B.S.2027-03", SPREAD, TOKEN, GPU, NT, NG, 30);
  assert_int_equal(hg_clearing_initial_margin(hg_exchange_clearing(f.ex), 10, &im), 0);
  assert_int_equal(im, 40530000000);
  assert_int_equal(hg_clearing_initial_margin(hg_exchange_clearing(f.ex), 11, &im), 0);
  assert_int_equal(im, 40530000000);
  /* the credit survives a snapshot: the restored exchange gives it too */
  size_t len = hg_exchange_serialized_size(f.ex);
  uint8_t *blob = malloc(len);
  assert_int_equal(hg_exchange_serialize(f.ex, blob, len, &len), 0);
  fx_t g;
  fx_create(&g);
  assert_int_equal(hg_exchange_restore(g.ex, blob, len), 0);
  assert_int_equal(hg_clearing_initial_margin(hg_exchange_clearing(g.ex), 10, &im), 0);
  assert_int_equal(im, 40530000000);
  free(blob);
  fx_destroy(&g);
  /* one package less than two: 53 token contracts give k = 1 */
  order(&f, TOKEN, 10, HG_SIDE_BUY, 4000, 1, HG_TIF_GTC);
  order(&f, TOKEN, 11, HG_SIDE_SELL, 4000, 1, HG_TIF_IOC); /* 10 is short 53 */
  assert_int_equal(hg_clearing_initial_margin(hg_exchange_clearing(f.ex), 10, &im), 0);
  /* 53 x 600,000,000 + 50 x 510,000,000 - floor((27 x 600,000,000 + 25 x
   * 510,000,000) x 0.3) = 31,800,000,000 + 25,500,000,000 - 8,685,000,000 */
  assert_int_equal(im, 48615000000);
  /* delisting the spread takes the credit away */
  hg_command_t c = mk(&f, HG_COMMAND_DELIST_INSTRUMENT);
  c.u.instrument.instrument_id = SPREAD;
  apply(&f, &c);
  assert_int_equal(f.ev[0].type, HG_XEV_DELISTED);
  assert_int_equal(hg_clearing_initial_margin(hg_exchange_clearing(f.ex), 10, &im), 0);
  assert_int_equal(im, 57300000000);
  fx_destroy(&f);
}

/* Section 6.14's band: R_t = 4,012 gives 3,210..4,814; S = 1,799 gives
 * P_t = 4,814, S = 1,800 gives 4,815; S = 67 gives 3,210, S = 66 gives
 * 3,209. */
static void test_leg_band(void **state) {
  (void)state;
  fx_t f;
  market(&f);
  order(&f, SPREAD, 10, HG_SIDE_BUY, 1799, 1, HG_TIF_GTC);
  assert_non_null(book_ev(&f, HG_EV_ACCEPTED));
  order(&f, SPREAD, 10, HG_SIDE_BUY, 1800, 1, HG_TIF_GTC);
  const hg_exchange_event_t *r = book_ev(&f, HG_EV_REJECTED);
  assert_non_null(r);
  assert_int_equal(r->book.reason, HG_XREJ_SPREAD_LEG_BAND);
  assert_int_equal(r->lo, 3210);
  assert_int_equal(r->hi, 4814);
  order(&f, SPREAD, 10, HG_SIDE_SELL, 67, 1, HG_TIF_IOC);
  assert_null(book_ev(&f, HG_EV_REJECTED)); /* trades with the 1,799 bid */
  assert_int_equal(find(&f, HG_XEV_SPREAD_LEG, 0)->price, 4814);
  order(&f, SPREAD, 10, HG_SIDE_SELL, 66, 1, HG_TIF_GTC);
  assert_int_equal(book_ev(&f, HG_EV_REJECTED)->book.reason, HG_XREJ_SPREAD_LEG_BAND);
  assert_int_equal(pos(&f, 10, TOKEN, NULL), 0); /* a self-trade: nothing moves */
  /* a market order and a replace are refused with their reason */
  hg_command_t c = mk(&f, HG_COMMAND_NEW_ORDER);
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = SPREAD, .account = 10, .qty = 1,
                                       .side = HG_SIDE_BUY, .type = HG_ORD_MARKET,
                                       .tif = HG_TIF_IOC};
  apply(&f, &c);
  assert_int_equal(book_ev(&f, HG_EV_REJECTED)->book.reason, HG_XREJ_SPREAD_ORDER);
  uint64_t id = order(&f, SPREAD, 11, HG_SIDE_BUY, 900, 1, HG_TIF_GTC);
  c = mk(&f, HG_COMMAND_REPLACE);
  c.u.replace = (hg_cmd_replace_t){.instrument_id = SPREAD, .account = 11, .order_id = id,
                                   .new_price = 901, .new_qty = 1};
  apply(&f, &c);
  assert_int_equal(book_ev(&f, HG_EV_REJECTED)->book.reason, HG_XREJ_SPREAD_ORDER);
  /* a halted leg halts the spread's new orders */
  c = mk(&f, HG_COMMAND_HALT);
  c.u.instrument.instrument_id = GPU;
  apply(&f, &c);
  order(&f, SPREAD, 12, HG_SIDE_SELL, 900, 1, HG_TIF_GTC);
  assert_int_equal(book_ev(&f, HG_EV_REJECTED)->book.reason, HG_XREJ_INSTRUMENT_HALTED);
  c = mk(&f, HG_COMMAND_RESUME);
  c.u.instrument.instrument_id = GPU;
  apply(&f, &c);
  /* a cancel frees both legs' open quantity */
  c = mk(&f, HG_COMMAND_CANCEL);
  c.u.cancel = (hg_cmd_cancel_t){.instrument_id = SPREAD, .account = 11, .order_id = id};
  apply(&f, &c);
  assert_non_null(book_ev(&f, HG_EV_CANCELLED));
  hg_clearing_position_t p;
  pos(&f, 11, TOKEN, &p);
  assert_int_equal(p.open_buy, 0);
  pos(&f, 11, GPU, &p);
  assert_int_equal(p.open_sell, 0);
  fx_destroy(&f);
}

/* ------------------------------------------------------------------------ */
/* Property: random spread orders against a simple price-time model          */
/* ------------------------------------------------------------------------ */

typedef struct mord {
  uint64_t id;
  hg_account_t a;
  int side;
  int64_t px, leaves;
} mord_t;

typedef struct model {
  mord_t o[512];
  size_t n;                     /* in time priority */
  int64_t net[4];               /* spread contracts bought - sold, accounts 10..13 */
  int64_t open[4][2];           /* resting spread quantity by side */
} model_t;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* The model's matching of a limit order: best price, then time. Returns
 * the expected fills (price, qty) in out. */
static size_t model_match(model_t *m, uint64_t id, hg_account_t a, int side, int64_t px,
                          int64_t qty, int tif, int64_t out[][2]) {
  size_t nf = 0;
  while (qty > 0) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < m->n; i++) {
      const mord_t *o = &m->o[i];
      if (o->side == side || o->leaves == 0) continue;
      if (side == HG_SIDE_BUY ? o->px > px : o->px < px) continue;
      if (best == SIZE_MAX || (side == HG_SIDE_BUY ? o->px < m->o[best].px : o->px > m->o[best].px))
        best = i;
    }
    if (best == SIZE_MAX) break;
    mord_t *o = &m->o[best];
    int64_t q = qty < o->leaves ? qty : o->leaves;
    out[nf][0] = o->px;
    out[nf][1] = q;
    nf++;
    o->leaves -= q;
    qty -= q;
    int d = side == HG_SIDE_BUY ? 1 : -1;
    m->net[a - 10] += d * q;
    m->net[o->a - 10] -= d * q;
    m->open[o->a - 10][o->side] -= q;
  }
  size_t k = 0;
  for (size_t i = 0; i < m->n; i++)
    if (m->o[i].leaves > 0) m->o[k++] = m->o[i];
  m->n = k;
  if (qty > 0 && tif == HG_TIF_GTC) {
    m->o[m->n++] = (mord_t){id, a, side, px, qty};
    m->open[a - 10][side] += qty;
  }
  return nf;
}

static void check_invariants(fx_t *f, const model_t *m) {
  int64_t st = 0, sg = 0;
  for (hg_account_t a = 10; a <= 13; a++) {
    hg_clearing_position_t pt, pg;
    pos(f, a, TOKEN, &pt);
    pos(f, a, GPU, &pg);
    assert_int_equal(pt.pos, NT * m->net[a - 10]);
    assert_int_equal(pg.pos, -NG * m->net[a - 10]);
    assert_int_equal(pt.open_buy, NT * m->open[a - 10][HG_SIDE_BUY]);
    assert_int_equal(pt.open_sell, NT * m->open[a - 10][HG_SIDE_SELL]);
    assert_int_equal(pg.open_sell, NG * m->open[a - 10][HG_SIDE_BUY]);
    assert_int_equal(pg.open_buy, NG * m->open[a - 10][HG_SIDE_SELL]);
    st += pt.pos;
    sg += pg.pos;
  }
  assert_int_equal(st, 0);
  assert_int_equal(sg, 0);
}

/* Every spread fill is followed by its four legs at the rule's prices. */
static void check_fills(fx_t *f, int64_t expect[][2], size_t nf) {
  size_t k = 0;
  for (size_t i = 0; i < f->n; i++) {
    const hg_exchange_event_t *e = &f->ev[i];
    if (e->type == HG_XEV_SPREAD_LEG) assert_true(0 && "leg without its fill");
    if (e->type != HG_XEV_BOOK || e->book.type != HG_EV_FILL) continue;
    assert_true(k < nf);
    assert_int_equal(e->book.price, expect[k][0]);
    assert_int_equal(e->book.qty, expect[k][1]);
    k++;
    int64_t s = e->book.price;
    int64_t pt = (2 * NG * (s + 3400) + NT) / (2 * NT);
    assert_true(i + 4 < f->n);
    for (int l = 0; l < 4; l++) {
      const hg_exchange_event_t *g = &f->ev[i + 1 + (size_t)l];
      assert_int_equal(g->type, HG_XEV_SPREAD_LEG);
      assert_int_equal(g->instrument_id, l < 2 ? TOKEN : GPU);
      assert_int_equal(g->price, l < 2 ? pt : 3400);
      assert_int_equal(g->qty, (l < 2 ? NT : NG) * e->book.qty);
      assert_int_equal(g->hi, s);
    }
    i += 4;
  }
  assert_int_equal(k, nf);
}

static void random_commands(fx_t *f, model_t *m, uint64_t *seed, int count) {
  int64_t fills[64][2];
  for (int step = 0; step < count; step++) {
    uint64_t r = rnd(seed);
    hg_account_t a = (hg_account_t)(10 + r % 4);
    if ((r >> 8) % 8 == 0 && m->n > 0) { /* cancel a random resting order */
      mord_t o = m->o[(r >> 16) % m->n];
      hg_command_t c = mk(f, HG_COMMAND_CANCEL);
      c.u.cancel = (hg_cmd_cancel_t){.instrument_id = SPREAD, .account = o.a, .order_id = o.id};
      apply(f, &c);
      for (size_t i = 0; i < m->n; i++)
        if (m->o[i].id == o.id) {
          m->open[o.a - 10][o.side] -= m->o[i].leaves;
          memmove(&m->o[i], &m->o[i + 1], (m->n - i - 1) * sizeof *m->o);
          m->n--;
          break;
        }
      check_fills(f, fills, 0);
    } else {
      int side = (r >> 20) & 1 ? HG_SIDE_SELL : HG_SIDE_BUY;
      /* far inside the position limit: 10,000 / 27 spread contracts */
      if (m->net[a - 10] > 100) side = HG_SIDE_SELL;
      if (m->net[a - 10] < -100) side = HG_SIDE_BUY;
      int64_t px = 900 + (int64_t)((r >> 24) % 21);
      int64_t qty = 1 + (int64_t)((r >> 32) % 5);
      int tif = (r >> 40) % 4 == 0 ? HG_TIF_IOC : HG_TIF_GTC;
      if (m->n >= 40) tif = HG_TIF_IOC;
      uint64_t id = f->seq + 1;
      size_t nf = model_match(m, id, a, side, px, qty, tif, fills);
      order(f, SPREAD, a, side, px, qty, tif);
      check_fills(f, fills, nf);
    }
    check_invariants(f, m);
  }
}

static void test_property_matching_and_replay(void **state) {
  (void)state;
  for (uint64_t s0 = 1; s0 <= 4; s0++) {
    fx_t f;
    market(&f);
    model_t m;
    memset(&m, 0, sizeof m);
    uint64_t seed = 0x9e3779b97f4a7c15ull * s0;
    random_commands(&f, &m, &seed, 400);
    /* snapshot, restore into a fresh exchange: same hash, then the same
     * commands give the same events and hash */
    size_t len = hg_exchange_serialized_size(f.ex);
    uint8_t *blob = malloc(len);
    assert_int_equal(hg_exchange_serialize(f.ex, blob, len, &len), 0);
    fx_t g;
    fx_create(&g);
    g.seq = f.seq;
    assert_int_equal(hg_exchange_restore(g.ex, blob, len), 0);
    uint8_t h1[HG_SHA256_LEN], h2[HG_SHA256_LEN];
    hg_exchange_hash(f.ex, h1);
    hg_exchange_hash(g.ex, h2);
    assert_memory_equal(h1, h2, sizeof h1);
    model_t m2 = m;
    uint64_t seed2 = seed;
    hg_sha256_discard(&f.sha);
    hg_sha256_init(&f.sha);
    hg_sha256_discard(&g.sha);
    hg_sha256_init(&g.sha);
    random_commands(&f, &m, &seed, 100);
    random_commands(&g, &m2, &seed2, 100);
    uint8_t e1[HG_SHA256_LEN], e2[HG_SHA256_LEN];
    hg_sha256_final(&f.sha, e1);
    hg_sha256_final(&g.sha, e2);
    hg_sha256_init(&f.sha); /* for fx_destroy */
    hg_sha256_init(&g.sha);
    assert_memory_equal(e1, e2, sizeof e1);
    hg_exchange_hash(f.ex, h1);
    hg_exchange_hash(g.ex, h2);
    assert_memory_equal(h1, h2, sizeof h1);
    free(blob);
    fx_destroy(&g);
    fx_destroy(&f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_listing),
      cmocka_unit_test(test_leg_prices_6_14),
      cmocka_unit_test(test_leg_band),
      cmocka_unit_test(test_credit_6_14),
      cmocka_unit_test(test_property_matching_and_replay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
