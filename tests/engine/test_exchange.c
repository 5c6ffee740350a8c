/*
 * The exchange state machine: the effect and events of every command, the
 * exchange-level rejects, the seq rule, and the properties the pipeline
 * relies on: the same log gives the same events and state hash; a
 * serialization restored into a fresh exchange hashes equal and then behaves
 * identically; the hash moves when any part of the state moves; a damaged
 * snapshot is refused cleanly.
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
#include "pipeline_util.h"

/* ------------------------------------------------------------------------ */
/* Event recorder and command builders                                       */
/* ------------------------------------------------------------------------ */

typedef struct rec {
  hg_exchange_event_t *ev;
  size_t n, cap;
  hg_sha256_t sha; /* over every event's bytes, in order */
  uint64_t total;
} rec_t;

static void rec_sink(void *ctx, const hg_exchange_event_t *ev) {
  rec_t *r = ctx;
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 256;
    r->ev = realloc(r->ev, r->cap * sizeof *r->ev);
    assert_non_null(r->ev);
  }
  r->ev[r->n++] = *ev;
  hg_sha256_update(&r->sha, ev, sizeof *ev);
  r->total++;
}

static void rec_init(rec_t *r) {
  memset(r, 0, sizeof *r);
  hg_sha256_init(&r->sha);
}

static void rec_clear(rec_t *r) { r->n = 0; }

static void rec_free(rec_t *r) {
  free(r->ev);
  hg_sha256_discard(&r->sha);
}

static const hg_exchange_config_t CFG = {
    .max_instruments = 8, .max_accounts = 32, .max_book_orders = 4096};

typedef struct fx {
  hg_exchange_t *ex;
  rec_t rec;
  uint64_t seq;
} fx_t;

/* These tests are about the commands and the book behind the exchange:
 * the clearing runs with no band and no margin so that any order passes
 * (margin, limits and band are tested in test_settlement_flow.c). */
static hg_exchange_config_t cfg_no_risk(hg_clearing_config_t *ccfg) {
  util_no_risk_config(ccfg);
  ccfg->max_positions = 512; /* small tables: restores are tried thousands of times */
  ccfg->ledger_initial = 64;
  ccfg->max_firms = 32;
  hg_exchange_config_t c = CFG;
  c.clearing = ccfg;
  return c;
}

static int create_ex(rec_t *r, hg_exchange_t **ex) {
  hg_clearing_config_t ccfg;
  hg_exchange_config_t cfg = cfg_no_risk(&ccfg);
  return hg_exchange_create(&cfg, rec_sink, r, ex);
}

static int setup(void **state) {
  fx_t *f = calloc(1, sizeof *f);
  rec_init(&f->rec);
  hg_clearing_config_t ccfg;
  hg_exchange_config_t cfg = cfg_no_risk(&ccfg);
  if (hg_exchange_create(&cfg, rec_sink, &f->rec, &f->ex) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx_t *f = *state;
  hg_exchange_destroy(f->ex);
  rec_free(&f->rec);
  free(f);
  return 0;
}

static hg_command_t mk(fx_t *f, uint32_t type) {
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = ++f->seq;
  c.ts = 1000 + c.seq;
  c.type = type;
  return c;
}

/* Applies c, expecting success, with the recorder cleared first. */
static void run(fx_t *f, const hg_command_t *c) {
  rec_clear(&f->rec);
  assert_int_equal(hg_exchange_apply(f->ex, c), 0);
}

static hg_book_params_t params(uint32_t id) {
  return (hg_book_params_t){.instrument_id = id, .tick_size = 1000, .contract_unit = 1000,
                            .min_price = 1, .max_price = 10000, .max_order_qty = 1000,
                            .ref_price = 1000, .max_orders = 1024, .max_accounts = 32};
}

static void list(fx_t *f, uint32_t id, const char *sym) {
  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, sym);
  c.u.list.params = params(id);
  run(f, &c);
}

static void add_account(fx_t *f, hg_account_t a, uint32_t firm) {
  hg_command_t c = mk(f, HG_COMMAND_ADD_ACCOUNT);
  c.u.add_account = (hg_cmd_add_account_t){a, firm};
  run(f, &c);
}

static void cash(fx_t *f, uint32_t type, hg_account_t a, int64_t amount) {
  hg_command_t c = mk(f, type);
  c.u.cash = (hg_cmd_cash_t){a, amount};
  run(f, &c);
}

static void instrument_cmd(fx_t *f, uint32_t type, uint32_t id) {
  hg_command_t c = mk(f, type);
  c.u.instrument.instrument_id = id;
  run(f, &c);
}

/* A limit order; returns its order id (its command's seq). */
static hg_oid_t order(fx_t *f, uint32_t inst, hg_account_t a, int side, hg_price_t px,
                      hg_qty_t qty, int tif) {
  hg_command_t c = mk(f, HG_COMMAND_NEW_ORDER);
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = inst, .account = a,
                                       .client_order_id = c.seq * 10, .price = px, .qty = qty,
                                       .side = (uint8_t)side, .type = HG_ORD_LIMIT,
                                       .tif = (uint8_t)tif};
  run(f, &c);
  return c.seq;
}

/* A GTC or DAY limit order entered by a session that it must not outlive. */
static hg_oid_t scoped_order(fx_t *f, uint32_t inst, hg_account_t a, int side, hg_price_t px,
                             hg_qty_t qty, int tif) {
  hg_command_t c = mk(f, HG_COMMAND_NEW_ORDER);
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = inst, .account = a,
                                       .client_order_id = c.seq * 10, .price = px, .qty = qty,
                                       .side = (uint8_t)side, .type = HG_ORD_LIMIT,
                                       .tif = (uint8_t)tif, .session_scoped = 1};
  run(f, &c);
  return c.seq;
}

static void sessions_ended(fx_t *f) {
  hg_command_t c = mk(f, HG_COMMAND_SESSIONS_ENDED);
  run(f, &c);
}

static void cancel(fx_t *f, uint32_t inst, hg_account_t a, hg_oid_t oid) {
  hg_command_t c = mk(f, HG_COMMAND_CANCEL);
  c.u.cancel = (hg_cmd_cancel_t){inst, a, oid};
  run(f, &c);
}

static void replace(fx_t *f, uint32_t inst, hg_account_t a, hg_oid_t oid, hg_price_t px,
                    hg_qty_t qty) {
  hg_command_t c = mk(f, HG_COMMAND_REPLACE);
  c.u.replace = (hg_cmd_replace_t){inst, a, oid, px, qty};
  run(f, &c);
}

static void mass_cancel(fx_t *f, uint32_t inst, hg_account_t a, int sides) {
  hg_command_t c = mk(f, HG_COMMAND_MASS_CANCEL);
  c.u.mass_cancel = (hg_cmd_mass_cancel_t){inst, a, (uint8_t)sides};
  run(f, &c);
}

static void end_of_session(fx_t *f, uint32_t date) {
  hg_command_t c = mk(f, HG_COMMAND_END_OF_SESSION);
  c.u.end_of_session.session_date = date;
  run(f, &c);
}

/* The single event of the last command, checked for type, seq and command. */
static const hg_exchange_event_t *only(fx_t *f, uint16_t type) {
  assert_int_equal(f->rec.n, 1);
  const hg_exchange_event_t *e = &f->rec.ev[0];
  assert_int_equal(e->type, type);
  assert_int_equal(e->seq, f->seq);
  assert_int_equal(e->ts, 1000 + f->seq);
  return e;
}

static void expect_xreject(fx_t *f, uint16_t reason) {
  const hg_exchange_event_t *e = only(f, HG_XEV_REJECTED);
  assert_int_equal(e->reason, reason);
}

/* An order command refused before the book: one book-shaped reject. */
static void expect_order_reject(fx_t *f, uint8_t cmd, uint16_t reason) {
  const hg_exchange_event_t *e = only(f, HG_XEV_BOOK);
  assert_int_equal(e->book.type, HG_EV_REJECTED);
  assert_int_equal(e->book.cmd, cmd);
  assert_int_equal(e->book.reason, reason);
}

/* i-th event of the last command must be a book event of type t. */
static const hg_book_event_t *book_ev(fx_t *f, size_t i, uint8_t t) {
  assert_true(i < f->rec.n);
  assert_int_equal(f->rec.ev[i].type, HG_XEV_BOOK);
  assert_int_equal(f->rec.ev[i].seq, f->seq);
  assert_int_equal(f->rec.ev[i].book.type, t);
  return &f->rec.ev[i].book;
}

/* ------------------------------------------------------------------------ */
/* Command effects                                                           */
/* ------------------------------------------------------------------------ */

static void test_list_instrument(void **state) {
  fx_t *f = *state;
  list(f, 7, "B200.A.2027-03");
  const hg_exchange_event_t *e = only(f, HG_XEV_LISTED);
  assert_int_equal(e->instrument_id, 7);
  assert_int_equal(e->command, HG_COMMAND_LIST_INSTRUMENT);
  assert_non_null(hg_exchange_book(f->ex, 7));
  char sym[HG_SYMBOL_MAX + 1];
  assert_int_equal(hg_exchange_instrument_symbol(f->ex, 7, sym), 0);
  assert_string_equal(sym, "B200.A.2027-03");
  int halted = -1;
  assert_int_equal(hg_exchange_instrument_status(f->ex, 7, &halted), 0);
  assert_int_equal(halted, 0);

  list(f, 7, "B200.A.2027-04"); /* same id */
  expect_xreject(f, HG_XREJ_INSTRUMENT_EXISTS);
  list(f, 8, "B200.A.2027-03"); /* same symbol */
  expect_xreject(f, HG_XREJ_INSTRUMENT_EXISTS);
  list(f, 0, "B200.A.2027-05");
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);
  list(f, 9, "B200 A");
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);
  list(f, 9, "");
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);
  /* Only contract symbols <GPU>.<GRADE>.<YYYY-MM> are listed. */
  list(f, 9, "B200A");
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);
  list(f, 9, "B200.A.2027-13");
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);
  list(f, 9, "B200.A.27-03");
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);

  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, "BAD.PARAMS");
  c.u.list.params = params(9);
  c.u.list.params.min_price = 0; /* the book refuses it */
  run(f, &c);
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);
  c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, "TOO.BIG");
  c.u.list.params = params(9);
  c.u.list.params.max_orders = CFG.max_book_orders + 1;
  run(f, &c);
  expect_xreject(f, HG_XREJ_CAPACITY);
  /* A book cannot track more accounts than the exchange holds: a typo here
   * must be a reject, not a huge allocation. */
  c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, "TOO.MANY");
  c.u.list.params = params(9);
  c.u.list.params.max_accounts = CFG.max_accounts + 1;
  run(f, &c);
  expect_xreject(f, HG_XREJ_CAPACITY);
  assert_int_equal(hg_exchange_instrument_count(f->ex), 1);

  /* Fill every slot (ids listed out of order stay sorted), then one more. */
  char s[16];
  for (uint32_t id = 20; id > 13; id--) {
    snprintf(s, sizeof s, "H100.B.2030-%02u", id - 12);
    list(f, id, s);
    only(f, HG_XEV_LISTED);
  }
  assert_int_equal(hg_exchange_instrument_count(f->ex), CFG.max_instruments);
  list(f, 30, "H100.B.2031-01");
  expect_xreject(f, HG_XREJ_CAPACITY);
  assert_null(hg_exchange_book(f->ex, 30));
}

static void test_accounts_and_cash(void **state) {
  fx_t *f = *state;
  add_account(f, 42, 5);
  const hg_exchange_event_t *e = only(f, HG_XEV_ACCOUNT_ADDED);
  assert_int_equal(e->account, 42);
  assert_int_equal(e->firm, 5);
  add_account(f, 42, 6);
  expect_xreject(f, HG_XREJ_ACCOUNT_EXISTS);
  add_account(f, 0, 6);
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);
  add_account(f, 43, 0);
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);

  cash(f, HG_COMMAND_DEPOSIT, 42, 1000000);
  e = only(f, HG_XEV_DEPOSIT);
  assert_int_equal(e->account, 42);
  assert_int_equal(e->amount, 1000000);
  assert_int_equal(e->balance, 1000000);
  cash(f, HG_COMMAND_WITHDRAW, 42, 400000);
  e = only(f, HG_XEV_WITHDRAWAL);
  assert_int_equal(e->balance, 600000);
  /* 600,000 left: 600,001 is refused, exactly 600,000 is not. */
  cash(f, HG_COMMAND_WITHDRAW, 42, 600001);
  expect_xreject(f, HG_XREJ_INSUFFICIENT_FUNDS);
  assert_int_equal(f->rec.ev[0].balance, 600000);
  int64_t bal;
  uint32_t firm;
  assert_int_equal(hg_exchange_account(f->ex, 42, &bal, &firm), 0);
  assert_int_equal(bal, 600000);
  assert_int_equal(firm, 5);
  cash(f, HG_COMMAND_WITHDRAW, 42, 600000);
  assert_int_equal(only(f, HG_XEV_WITHDRAWAL)->balance, 0);

  cash(f, HG_COMMAND_DEPOSIT, 42, 0);
  expect_xreject(f, HG_XREJ_INVALID_AMOUNT);
  cash(f, HG_COMMAND_WITHDRAW, 42, -5);
  expect_xreject(f, HG_XREJ_INVALID_AMOUNT);
  cash(f, HG_COMMAND_DEPOSIT, 99, 10);
  expect_xreject(f, HG_XREJ_UNKNOWN_ACCOUNT);
  cash(f, HG_COMMAND_WITHDRAW, 99, 10);
  expect_xreject(f, HG_XREJ_UNKNOWN_ACCOUNT);
  /* Deposits so far total 1,000,000: the clearing keeps that total too. */
  cash(f, HG_COMMAND_DEPOSIT, 42, INT64_MAX - 1000000);
  only(f, HG_XEV_DEPOSIT);
  cash(f, HG_COMMAND_DEPOSIT, 42, 1); /* would overflow */
  expect_xreject(f, HG_XREJ_INVALID_AMOUNT);
  assert_int_equal(hg_exchange_account(f->ex, 42, &bal, &firm), 0);
  assert_int_equal(bal, INT64_MAX - 1000000);
  assert_int_equal(hg_exchange_account(f->ex, 99, &bal, &firm), HG_ENOTFOUND);

  for (hg_account_t a = 100; a < 100 + CFG.max_accounts - 1; a++) add_account(f, a, 1);
  add_account(f, 1, 1);
  expect_xreject(f, HG_XREJ_CAPACITY);
}

static void test_orders_fill_cancel_replace(void **state) {
  fx_t *f = *state;
  list(f, 1, "B200.A.2027-03");
  add_account(f, 10, 1);
  add_account(f, 20, 2);
  hg_oid_t bid = order(f, 1, 10, HG_SIDE_BUY, 5000, 10, HG_TIF_GTC);
  const hg_book_event_t *b = book_ev(f, 0, HG_EV_ACCEPTED);
  assert_int_equal(b->order_id, bid); /* the order id is the command's seq */
  assert_int_equal(b->client_order_id, bid * 10);
  assert_int_equal(f->rec.ev[0].instrument_id, 1);
  assert_int_equal(f->rec.ev[0].account, 10);
  assert_int_equal(f->rec.ev[0].command, HG_COMMAND_NEW_ORDER);
  book_ev(f, 1, HG_EV_LEVEL);
  assert_int_equal(f->rec.n, 2);

  hg_oid_t ask = order(f, 1, 20, HG_SIDE_SELL, 4990, 4, HG_TIF_GTC);
  book_ev(f, 0, HG_EV_ACCEPTED);
  b = book_ev(f, 1, HG_EV_FILL);
  assert_int_equal(b->order_id, ask);
  assert_int_equal(b->maker_order_id, bid);
  assert_int_equal(b->price, 5000);
  assert_int_equal(b->qty, 4);
  hg_price_t px;
  hg_qty_t q;
  assert_int_equal(hg_book_best(hg_exchange_book(f->ex, 1), HG_SIDE_BUY, &px, &q), 0);
  assert_int_equal(q, 6);

  replace(f, 1, 10, bid, 5001, 6);
  b = book_ev(f, 0, HG_EV_REPLACED);
  assert_int_equal(b->order_id, bid);
  assert_int_equal(b->price, 5001);
  cancel(f, 1, 10, bid);
  b = book_ev(f, 0, HG_EV_CANCELLED);
  assert_int_equal(b->reason, HG_CXL_USER);
  assert_int_equal(b->qty, 6);
  cancel(f, 1, 10, bid); /* no longer live: the book's reject */
  b = book_ev(f, 0, HG_EV_REJECTED);
  assert_int_equal(b->reason, HG_REJ_UNKNOWN_ORDER);

  /* Exchange-level rejects, shaped as book rejects. */
  order(f, 2, 10, HG_SIDE_BUY, 5000, 1, HG_TIF_GTC);
  expect_order_reject(f, HG_CMD_NEW, HG_XREJ_UNKNOWN_INSTRUMENT);
  assert_int_equal(f->rec.ev[0].book.order_id, f->seq);
  assert_int_equal(f->rec.ev[0].book.qty, 1);
  order(f, 1, 99, HG_SIDE_BUY, 5000, 1, HG_TIF_GTC);
  expect_order_reject(f, HG_CMD_NEW, HG_XREJ_UNKNOWN_ACCOUNT);
  cancel(f, 2, 10, 1);
  expect_order_reject(f, HG_CMD_CANCEL, HG_XREJ_UNKNOWN_INSTRUMENT);
  cancel(f, 1, 99, 1);
  expect_order_reject(f, HG_CMD_CANCEL, HG_XREJ_UNKNOWN_ACCOUNT);
  replace(f, 2, 10, 1, 5000, 1);
  expect_order_reject(f, HG_CMD_REPLACE, HG_XREJ_UNKNOWN_INSTRUMENT);
  replace(f, 1, 99, 1, 5000, 1);
  expect_order_reject(f, HG_CMD_REPLACE, HG_XREJ_UNKNOWN_ACCOUNT);
  /* The book's own validation still applies behind the exchange. */
  order(f, 1, 10, HG_SIDE_BUY, 5000, 0, HG_TIF_GTC);
  b = book_ev(f, 0, HG_EV_REJECTED);
  assert_int_equal(b->reason, HG_REJ_INVALID_QTY);
  assert_string_equal(hg_xreject_str(HG_XREJ_INSTRUMENT_HALTED), "instrument is halted");
  assert_string_equal(hg_xreject_str(HG_REJ_INVALID_QTY), hg_reject_str(HG_REJ_INVALID_QTY));
}

static void test_halt_and_resume(void **state) {
  fx_t *f = *state;
  list(f, 1, "B200.A.2027-03");
  add_account(f, 10, 1);
  hg_oid_t oid = order(f, 1, 10, HG_SIDE_BUY, 5000, 5, HG_TIF_GTC);
  instrument_cmd(f, HG_COMMAND_HALT, 1);
  assert_int_equal(only(f, HG_XEV_HALTED)->instrument_id, 1);
  int halted;
  assert_int_equal(hg_exchange_instrument_status(f->ex, 1, &halted), 0);
  assert_int_equal(halted, 1);
  order(f, 1, 10, HG_SIDE_BUY, 5000, 1, HG_TIF_GTC);
  expect_order_reject(f, HG_CMD_NEW, HG_XREJ_INSTRUMENT_HALTED);
  replace(f, 1, 10, oid, 4999, 5);
  expect_order_reject(f, HG_CMD_REPLACE, HG_XREJ_INSTRUMENT_HALTED);
  assert_int_equal(hg_book_order_count(hg_exchange_book(f->ex, 1)), 1);
  instrument_cmd(f, HG_COMMAND_HALT, 1);
  expect_xreject(f, HG_XREJ_NOT_IN_STATE);
  /* Cancels go through while halted. */
  cancel(f, 1, 10, oid);
  book_ev(f, 0, HG_EV_CANCELLED);
  instrument_cmd(f, HG_COMMAND_RESUME, 1);
  only(f, HG_XEV_RESUMED);
  instrument_cmd(f, HG_COMMAND_RESUME, 1);
  expect_xreject(f, HG_XREJ_NOT_IN_STATE);
  order(f, 1, 10, HG_SIDE_BUY, 5000, 1, HG_TIF_GTC);
  book_ev(f, 0, HG_EV_ACCEPTED);
  instrument_cmd(f, HG_COMMAND_HALT, 5);
  expect_xreject(f, HG_XREJ_UNKNOWN_INSTRUMENT);
  instrument_cmd(f, HG_COMMAND_RESUME, 5);
  expect_xreject(f, HG_XREJ_UNKNOWN_INSTRUMENT);
}

static void test_end_of_session_expires_day_orders(void **state) {
  fx_t *f = *state;
  list(f, 2, "B200.A.2027-04");
  list(f, 1, "B200.A.2027-03");
  add_account(f, 10, 1);
  hg_oid_t d2 = order(f, 2, 10, HG_SIDE_BUY, 100, 1, HG_TIF_DAY);
  hg_oid_t g1 = order(f, 1, 10, HG_SIDE_BUY, 100, 2, HG_TIF_GTC);
  hg_oid_t d1a = order(f, 1, 10, HG_SIDE_SELL, 200, 3, HG_TIF_DAY);
  hg_oid_t d1b = order(f, 1, 10, HG_SIDE_BUY, 90, 4, HG_TIF_DAY);
  instrument_cmd(f, HG_COMMAND_HALT, 2); /* halted books expire too */
  end_of_session(f, 20270315);
  /* Instrument 1 first (id order), its DAY orders in time priority, each
   * followed by its level; then instrument 2; then the session event. */
  assert_int_equal(f->rec.n, 7);
  const hg_book_event_t *b = book_ev(f, 0, HG_EV_CANCELLED);
  assert_int_equal(b->order_id, d1a);
  assert_int_equal(b->reason, HG_CXL_EXPIRY);
  assert_int_equal(b->instrument_id, 1);
  book_ev(f, 1, HG_EV_LEVEL);
  assert_int_equal(book_ev(f, 2, HG_EV_CANCELLED)->order_id, d1b);
  book_ev(f, 3, HG_EV_LEVEL);
  b = book_ev(f, 4, HG_EV_CANCELLED);
  assert_int_equal(b->order_id, d2);
  assert_int_equal(b->instrument_id, 2);
  book_ev(f, 5, HG_EV_LEVEL);
  assert_int_equal(f->rec.ev[6].type, HG_XEV_SESSION_END);
  assert_int_equal(f->rec.ev[6].amount, 3);
  hg_book_order_t o;
  assert_int_equal(hg_book_find(hg_exchange_book(f->ex, 1), g1, 10, &o), 0);
  assert_int_equal(hg_book_order_count(hg_exchange_book(f->ex, 1)), 1);
  assert_int_equal(hg_book_order_count(hg_exchange_book(f->ex, 2)), 0);
  end_of_session(f, 20270316);
  assert_int_equal(only(f, HG_XEV_SESSION_END)->amount, 0);
}

/* Live session-scoped orders in every book, through the public walks (what
 * a restarted gateway counts while it seeds its mirror). */
static void count_scoped_order(void *ctx, const hg_book_order_t *o) {
  *(uint64_t *)ctx += o->session_scoped;
}

typedef struct scoped_count {
  const hg_exchange_t *ex;
  uint64_t n;
} scoped_count_t;

static void count_scoped_book(void *ctx, const hg_exchange_instrument_info_t *info) {
  scoped_count_t *c = ctx;
  hg_book_foreach(hg_exchange_book(c->ex, info->id), count_scoped_order, &c->n);
}

static uint64_t scoped_orders(const hg_exchange_t *ex) {
  scoped_count_t c = {ex, 0};
  hg_exchange_foreach_instrument(ex, count_scoped_book, &c);
  return c.n;
}

/* The live order oid of account a in instrument inst, which must exist. */
static hg_book_order_t live(fx_t *f, uint32_t inst, hg_account_t a, hg_oid_t oid) {
  hg_book_order_t o;
  assert_int_equal(hg_book_find(hg_exchange_book(f->ex, inst), oid, a, &o), 0);
  return o;
}

static void test_sessions_ended_cancels_scoped_orders(void **state) {
  fx_t *f = *state;
  list(f, 2, "B200.A.2027-04");
  list(f, 1, "B200.A.2027-03");
  add_account(f, 10, 1);
  add_account(f, 20, 2);
  hg_oid_t s2 = scoped_order(f, 2, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  hg_oid_t g1 = order(f, 1, 10, HG_SIDE_BUY, 100, 2, HG_TIF_GTC);
  hg_oid_t s1a = scoped_order(f, 1, 20, HG_SIDE_SELL, 200, 3, HG_TIF_DAY);
  hg_oid_t s1b = scoped_order(f, 1, 10, HG_SIDE_BUY, 100, 4, HG_TIF_GTC);
  hg_oid_t g2 = order(f, 2, 20, HG_SIDE_SELL, 300, 5, HG_TIF_GTC);
  assert_int_equal(live(f, 1, 10, g1).session_scoped, 0);
  assert_int_equal(live(f, 1, 10, s1b).session_scoped, 1);
  /* A replace that loses priority keeps the flag and re-enters behind s1b. */
  replace(f, 1, 20, s1a, 210, 3);
  assert_int_equal(live(f, 1, 20, s1a).session_scoped, 1);
  assert_int_equal(scoped_orders(f->ex), 3);
  instrument_cmd(f, HG_COMMAND_HALT, 2); /* halted books are swept too */

  sessions_ended(f);
  /* Instrument 1 first (id order): s1b (entry 4) before s1a (re-entered at
   * the replace), each followed by its level; then instrument 2; then the
   * summary event. g1 and g2 stay. */
  assert_int_equal(f->rec.n, 7);
  const hg_book_event_t *b = book_ev(f, 0, HG_EV_CANCELLED);
  assert_int_equal(b->order_id, s1b);
  assert_int_equal(b->reason, HG_CXL_MASS_CANCEL);
  assert_int_equal(b->instrument_id, 1);
  assert_int_equal(b->account, 10);
  assert_int_equal(b->qty, 4);
  assert_int_equal(f->rec.ev[0].command, HG_COMMAND_SESSIONS_ENDED);
  b = book_ev(f, 1, HG_EV_LEVEL);
  assert_int_equal(b->side, HG_SIDE_BUY);
  assert_int_equal(b->price, 100);
  assert_int_equal(b->qty, 2); /* g1 alone */
  b = book_ev(f, 2, HG_EV_CANCELLED);
  assert_int_equal(b->order_id, s1a);
  assert_int_equal(b->price, 210);
  assert_int_equal(b->qty, 3);
  assert_int_equal(b->reason, HG_CXL_MASS_CANCEL);
  b = book_ev(f, 3, HG_EV_LEVEL);
  assert_int_equal(b->side, HG_SIDE_SELL);
  assert_int_equal(b->price, 210);
  assert_int_equal(b->qty, 0);
  b = book_ev(f, 4, HG_EV_CANCELLED);
  assert_int_equal(b->order_id, s2);
  assert_int_equal(b->instrument_id, 2);
  b = book_ev(f, 5, HG_EV_LEVEL);
  assert_int_equal(b->price, 100);
  assert_int_equal(b->qty, 0);
  assert_int_equal(f->rec.ev[6].type, HG_XEV_SESSIONS_ENDED);
  assert_int_equal(f->rec.ev[6].seq, f->seq);
  assert_int_equal(f->rec.ev[6].amount, 3);
  live(f, 1, 10, g1);
  live(f, 2, 20, g2);
  assert_int_equal(hg_book_order_count(hg_exchange_book(f->ex, 1)), 1);
  assert_int_equal(hg_book_order_count(hg_exchange_book(f->ex, 2)), 1);
  assert_int_equal(scoped_orders(f->ex), 0);
  /* Nothing left to cancel: only the summary. */
  sessions_ended(f);
  assert_int_equal(only(f, HG_XEV_SESSIONS_ENDED)->amount, 0);
  /* The free type numbers around it are not commands. */
  uint32_t gaps[] = {HG_COMMAND_LAST_SETTLEMENT + 1, HG_COMMAND_SESSIONS_ENDED - 1,
                     HG_COMMAND_SESSIONS_ENDED + 1};
  for (size_t i = 0; i < sizeof gaps / sizeof *gaps; i++) {
    hg_command_t c = mk(f, gaps[i]);
    assert_int_equal(hg_exchange_apply(f->ex, &c), HG_EINVAL);
    f->seq--;
  }
}

/* A scoped order keeps its flag through fills and matching like any other. */
static void test_scoped_order_trades_normally(void **state) {
  fx_t *f = *state;
  list(f, 1, "B200.A.2027-03");
  add_account(f, 10, 1);
  add_account(f, 20, 2);
  hg_oid_t s = scoped_order(f, 1, 10, HG_SIDE_SELL, 150, 5, HG_TIF_GTC);
  order(f, 1, 20, HG_SIDE_BUY, 150, 2, HG_TIF_IOC);
  assert_int_equal(book_ev(f, 1, HG_EV_FILL)->maker_order_id, s);
  hg_book_order_t o = live(f, 1, 10, s);
  assert_int_equal(o.leaves, 3);
  assert_int_equal(o.session_scoped, 1);
  /* A scoped taker that rests keeps the flag; one that fills in full is gone. */
  hg_oid_t t = scoped_order(f, 1, 20, HG_SIDE_BUY, 150, 4, HG_TIF_GTC);
  o = live(f, 1, 20, t);
  assert_int_equal(o.leaves, 1);
  assert_int_equal(o.session_scoped, 1);
  assert_int_equal(scoped_orders(f->ex), 1);
  sessions_ended(f);
  assert_int_equal(f->rec.n, 3);
  assert_int_equal(book_ev(f, 0, HG_EV_CANCELLED)->order_id, t);
  assert_int_equal(f->rec.ev[2].amount, 1);
}

static void test_delist_cancels_everything(void **state) {
  fx_t *f = *state;
  list(f, 1, "B200.A.2027-03");
  list(f, 2, "B200.A.2027-04");
  add_account(f, 10, 1);
  add_account(f, 20, 2);
  hg_oid_t a = order(f, 1, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  hg_oid_t b = order(f, 1, 20, HG_SIDE_SELL, 200, 2, HG_TIF_DAY);
  hg_oid_t c = order(f, 1, 10, HG_SIDE_BUY, 100, 3, HG_TIF_GTC);
  order(f, 2, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  instrument_cmd(f, HG_COMMAND_DELIST_INSTRUMENT, 1);
  assert_int_equal(f->rec.n, 7);
  hg_oid_t want[3] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    const hg_book_event_t *e = book_ev(f, (size_t)(2 * i), HG_EV_CANCELLED);
    assert_int_equal(e->order_id, want[i]);
    assert_int_equal(e->reason, HG_XCXL_DELISTED);
    book_ev(f, (size_t)(2 * i + 1), HG_EV_LEVEL);
  }
  assert_int_equal(f->rec.ev[6].type, HG_XEV_DELISTED);
  assert_int_equal(f->rec.ev[6].instrument_id, 1);
  assert_int_equal(f->rec.ev[6].amount, 3);
  assert_null(hg_exchange_book(f->ex, 1));
  assert_int_equal(hg_exchange_instrument_count(f->ex), 1);
  assert_int_equal(hg_book_order_count(hg_exchange_book(f->ex, 2)), 1);
  order(f, 1, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  expect_order_reject(f, HG_CMD_NEW, HG_XREJ_UNKNOWN_INSTRUMENT);
  instrument_cmd(f, HG_COMMAND_DELIST_INSTRUMENT, 1);
  expect_xreject(f, HG_XREJ_UNKNOWN_INSTRUMENT);
  /* Id and symbol are free again; an empty book delists with no cancels. */
  list(f, 1, "B200.A.2027-03");
  only(f, HG_XEV_LISTED);
  instrument_cmd(f, HG_COMMAND_DELIST_INSTRUMENT, 1);
  assert_int_equal(only(f, HG_XEV_DELISTED)->amount, 0);
}

static void test_mass_cancel(void **state) {
  fx_t *f = *state;
  list(f, 1, "B200.A.2027-03");
  list(f, 2, "B200.B.2027-03");
  add_account(f, 10, 1);
  add_account(f, 20, 1);
  order(f, 1, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  order(f, 1, 10, HG_SIDE_SELL, 200, 1, HG_TIF_GTC);
  order(f, 2, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  hg_oid_t other = order(f, 2, 20, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  mass_cancel(f, 1, 10, HG_SIDES_SELL);
  assert_int_equal(f->rec.n, 2);
  assert_int_equal(book_ev(f, 0, HG_EV_CANCELLED)->reason, HG_CXL_MASS_CANCEL);
  assert_int_equal(f->rec.ev[0].book.side, HG_SIDE_SELL);
  mass_cancel(f, 0, 10, HG_SIDES_BOTH); /* every instrument, id order */
  assert_int_equal(f->rec.n, 4);
  assert_int_equal(book_ev(f, 0, HG_EV_CANCELLED)->instrument_id, 1);
  assert_int_equal(book_ev(f, 2, HG_EV_CANCELLED)->instrument_id, 2);
  mass_cancel(f, 0, 10, HG_SIDES_BOTH);
  assert_int_equal(f->rec.n, 0);
  hg_book_order_t o;
  assert_int_equal(hg_book_find(hg_exchange_book(f->ex, 2), other, 20, &o), 0);
  mass_cancel(f, 3, 10, HG_SIDES_BOTH);
  expect_xreject(f, HG_XREJ_UNKNOWN_INSTRUMENT);
  mass_cancel(f, 0, 99, HG_SIDES_BOTH);
  expect_xreject(f, HG_XREJ_UNKNOWN_ACCOUNT);
  mass_cancel(f, 0, 10, 3);
  expect_xreject(f, HG_XREJ_INVALID_PARAMS);
}

static void test_seq_rule(void **state) {
  fx_t *f = *state;
  add_account(f, 10, 1);
  assert_int_equal(hg_exchange_last_seq(f->ex), f->seq);
  hg_command_t c = mk(f, HG_COMMAND_DEPOSIT);
  c.u.cash = (hg_cmd_cash_t){10, 5};
  c.seq = f->seq - 1; /* replayed: already applied */
  rec_clear(&f->rec);
  assert_int_equal(hg_exchange_apply(f->ex, &c), HG_ESTATE);
  c.seq = 0;
  assert_int_equal(hg_exchange_apply(f->ex, &c), HG_ESTATE);
  c.seq = f->seq;
  c.type = 99;
  assert_int_equal(hg_exchange_apply(f->ex, &c), HG_EINVAL);
  assert_int_equal(f->rec.n, 0);
  assert_int_equal(hg_exchange_last_seq(f->ex), f->seq - 1);
  int64_t bal;
  uint32_t firm;
  assert_int_equal(hg_exchange_account(f->ex, 10, &bal, &firm), 0);
  assert_int_equal(bal, 0);
  /* Gaps are fine: the sequencer may stamp commands the engine never sees. */
  c.type = HG_COMMAND_DEPOSIT;
  c.seq = f->seq + 100;
  assert_int_equal(hg_exchange_apply(f->ex, &c), 0);
  assert_int_equal(hg_exchange_last_seq(f->ex), f->seq + 100);
  hg_exchange_config_t bad = CFG;
  bad.max_accounts = 0;
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&bad, rec_sink, &f->rec, &ex), HG_EINVAL);
  assert_int_equal(hg_exchange_create(&CFG, NULL, NULL, &ex), HG_EINVAL);
  assert_null(ex);
}

/* ------------------------------------------------------------------------ */
/* Random command streams                                                    */
/* ------------------------------------------------------------------------ */

typedef struct gen {
  uint64_t s;
  uint64_t seq;
  hg_oid_t recent[64]; /* order ids to cancel / replace */
  uint32_t nrecent;
} gen_t;

static uint64_t rnd(gen_t *g) {
  g->s ^= g->s << 13;
  g->s ^= g->s >> 7;
  g->s ^= g->s << 17;
  return g->s;
}

/* A deterministic stream touching every command type. Instruments 1..4,
 * accounts 1..8; prices near 5000 so that orders cross often. */
static hg_command_t gen_next(gen_t *g) {
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = ++g->seq;
  c.ts = 1700000000000000000ull + c.seq * 1000;
  uint64_t r = rnd(g) % 1000;
  uint32_t inst = 1 + (uint32_t)(rnd(g) % 4);
  hg_account_t acct = 1 + (hg_account_t)(rnd(g) % 8);
  if (g->seq <= 4) {
    c.type = HG_COMMAND_LIST_INSTRUMENT;
    snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "B200.A.2027-%02u", (unsigned)g->seq);
    c.u.list.params = params((uint32_t)g->seq);
  } else if (g->seq <= 12) {
    c.type = HG_COMMAND_ADD_ACCOUNT;
    c.u.add_account = (hg_cmd_add_account_t){(hg_account_t)(g->seq - 4), 1 + (uint32_t)g->seq % 3};
  } else if (r < 650) {
    c.type = HG_COMMAND_NEW_ORDER;
    hg_cmd_new_order_t *o = &c.u.new_order;
    o->instrument_id = inst;
    o->account = acct;
    o->client_order_id = c.seq;
    o->side = (uint8_t)(rnd(g) % 2);
    o->price = 4980 + (hg_price_t)(rnd(g) % 41);
    o->qty = 1 + (hg_qty_t)(rnd(g) % 20);
    uint64_t k = rnd(g) % 20;
    o->type = k == 0 ? HG_ORD_MARKET : HG_ORD_LIMIT;
    o->tif = k == 0 ? HG_TIF_IOC : k < 3 ? HG_TIF_IOC : k < 4 ? HG_TIF_FOK : k < 10 ? HG_TIF_DAY
                                                                                     : HG_TIF_GTC;
    o->stp = (uint8_t)(rnd(g) % 5);
    o->smp_group = rnd(g) % 7 == 0 ? 1 : 0;
    g->recent[g->nrecent++ % 64] = c.seq;
  } else if (r < 800) {
    c.type = HG_COMMAND_CANCEL;
    c.u.cancel = (hg_cmd_cancel_t){inst, acct, g->recent[rnd(g) % 64]};
  } else if (r < 900) {
    c.type = HG_COMMAND_REPLACE;
    c.u.replace = (hg_cmd_replace_t){inst, acct, g->recent[rnd(g) % 64],
                                     4980 + (hg_price_t)(rnd(g) % 41), 1 + (hg_qty_t)(rnd(g) % 20)};
  } else if (r < 920) {
    c.type = HG_COMMAND_MASS_CANCEL;
    c.u.mass_cancel = (hg_cmd_mass_cancel_t){rnd(g) % 2 ? inst : 0, acct, (uint8_t)(rnd(g) % 3)};
  } else if (r < 940) {
    c.type = rnd(g) % 2 ? HG_COMMAND_HALT : HG_COMMAND_RESUME;
    c.u.instrument.instrument_id = inst;
  } else if (r < 950) {
    c.type = HG_COMMAND_END_OF_SESSION;
    c.u.end_of_session.session_date = 20270000 + (uint32_t)(g->seq % 10000);
  } else if (r < 975) {
    c.type = HG_COMMAND_DEPOSIT;
    c.u.cash = (hg_cmd_cash_t){acct, 1 + (int64_t)(rnd(g) % 1000000)};
  } else if (r < 995) {
    c.type = HG_COMMAND_WITHDRAW;
    c.u.cash = (hg_cmd_cash_t){acct, 1 + (int64_t)(rnd(g) % 1000000)};
  } else if (r < 998) {
    c.type = HG_COMMAND_DELIST_INSTRUMENT;
    c.u.instrument.instrument_id = inst;
  } else {
    c.type = HG_COMMAND_LIST_INSTRUMENT; /* relists a delisted one, else rejected */
    snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "B200.A.2027-%02u", (unsigned)inst);
    c.u.list.params = params(inst);
  }
  return c;
}

/* Runs n commands of stream seed through a fresh exchange; returns the
 * event digest and the state hash. */
static void run_stream(uint64_t seed, int n, int via_journal, uint8_t ev_digest[32],
                       uint8_t state_hash[32], uint64_t *events) {
  rec_t r;
  rec_init(&r);
  hg_exchange_t *ex;
  assert_int_equal(create_ex(&r, &ex), 0);
  gen_t g = {.s = seed};
  for (int i = 0; i < n; i++) {
    hg_command_t c = gen_next(&g);
    if (via_journal) {
      /* What a replay does: the journal's bytes, decoded. */
      uint8_t buf[HG_COMMAND_MAX_ENCODED];
      size_t len = 0;
      assert_int_equal(hg_command_encode(&c, buf, sizeof buf, &len), 0);
      assert_int_equal(hg_command_decode(buf, len, &c), 0);
    }
    r.n = 0;
    assert_int_equal(hg_exchange_apply(ex, &c), 0);
  }
  hg_sha256_final(&r.sha, ev_digest);
  hg_exchange_hash(ex, state_hash);
  *events = r.total;
  hg_exchange_destroy(ex);
  rec_free(&r);
}

static void test_determinism(void **state) {
  (void)state;
  uint8_t e1[32], h1[32], e2[32], h2[32], e3[32], h3[32];
  uint64_t n1, n2, n3;
  run_stream(0x1234567ull, 20000, 0, e1, h1, &n1);
  run_stream(0x1234567ull, 20000, 0, e2, h2, &n2);
  assert_true(n1 > 20000);
  assert_int_equal(n1, n2);
  assert_memory_equal(e1, e2, 32);
  assert_memory_equal(h1, h2, 32);
  /* Replaying the journal encoding of the same log changes nothing. */
  run_stream(0x1234567ull, 20000, 1, e2, h2, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(e1, e2, 32);
  assert_memory_equal(h1, h2, 32);
  /* A different log gives a different history. */
  run_stream(0x7654321ull, 20000, 0, e3, h3, &n3);
  assert_memory_not_equal(e1, e3, 32);
  assert_memory_not_equal(h1, h3, 32);
}

static uint8_t *serialize(const hg_exchange_t *ex, size_t *len) {
  size_t need = hg_exchange_serialized_size(ex);
  uint8_t *buf = malloc(need ? need : 1);
  assert_non_null(buf);
  assert_int_equal(hg_exchange_serialize(ex, buf, need, len), 0);
  assert_int_equal(*len, need);
  return buf;
}

static void assert_same_state(const hg_exchange_t *a, const hg_exchange_t *b) {
  uint8_t ha[32], hb[32];
  hg_exchange_hash(a, ha);
  hg_exchange_hash(b, hb);
  assert_memory_equal(ha, hb, 32);
  size_t la, lb;
  uint8_t *ba = serialize(a, &la), *bb = serialize(b, &lb);
  assert_int_equal(la, lb);
  assert_memory_equal(ba, bb, la);
  /* The hash is the SHA-256 of the serialization. */
  uint8_t hs[32];
  hg_sha256(ba, la, hs);
  assert_memory_equal(hs, ha, 32);
  free(ba);
  free(bb);
}

static void test_snapshot_restore_equivalence(void **state) {
  (void)state;
  rec_t ra, rb;
  rec_init(&ra);
  rec_init(&rb);
  hg_exchange_t *a, *b;
  assert_int_equal(create_ex(&ra, &a), 0);
  gen_t g = {.s = 0xC0FFEEull};
  for (int i = 0; i < 6000; i++) {
    hg_command_t c = gen_next(&g);
    assert_int_equal(hg_exchange_apply(a, &c), 0);
  }
  size_t len;
  uint8_t *blob = serialize(a, &len);
  assert_int_equal(create_ex(&rb, &b), 0);
  assert_int_equal(hg_exchange_restore(b, blob, len), 0);
  assert_int_equal(rb.n, 0); /* restore emits nothing */
  assert_int_equal(hg_exchange_last_seq(b), hg_exchange_last_seq(a));
  assert_same_state(a, b);
  uint32_t live = 0;
  for (uint32_t id = 1; id <= 4; id++)
    if (hg_exchange_book(a, id)) live += hg_book_order_count(hg_exchange_book(a, id));
  assert_true(live > 0); /* the snapshot really carried orders */
  /* Restoring twice into the same exchange is refused. */
  assert_int_equal(hg_exchange_restore(b, blob, len), HG_ESTATE);
  free(blob);

  for (int i = 0; i < 6000; i++) {
    hg_command_t c = gen_next(&g);
    ra.n = rb.n = 0;
    assert_int_equal(hg_exchange_apply(a, &c), 0);
    assert_int_equal(hg_exchange_apply(b, &c), 0);
    assert_int_equal(ra.n, rb.n);
    if (ra.n) assert_memory_equal(ra.ev, rb.ev, ra.n * sizeof *ra.ev);
    if (i % 1000 == 999) assert_same_state(a, b);
  }
  assert_same_state(a, b);
  hg_exchange_destroy(a);
  hg_exchange_destroy(b);
  rec_free(&ra);
  rec_free(&rb);
}

/* Two exchanges fed the same log except one command differ in the hash. */
static void hash_differs(void (*variant)(fx_t *f, int which)) {
  uint8_t h[2][32];
  for (int which = 0; which < 2; which++) {
    fx_t *f = NULL;
    assert_int_equal(setup((void **)&f), 0);
    list(f, 1, "B200.A.2027-03");
    list(f, 2, "B200.A.2027-04");
    add_account(f, 10, 1);
    add_account(f, 20, 1);
    variant(f, which);
    hg_exchange_hash(f->ex, h[which]);
    void *p = f;
    teardown(&p);
  }
  assert_memory_not_equal(h[0], h[1], 32);
}

static void v_deposit(fx_t *f, int w) { cash(f, HG_COMMAND_DEPOSIT, 10, 100 + w); }
static void v_firm(fx_t *f, int w) { add_account(f, 30, 1 + (uint32_t)w); }
static void v_price(fx_t *f, int w) { order(f, 1, 10, HG_SIDE_BUY, 100 + w, 1, HG_TIF_GTC); }
static void v_qty(fx_t *f, int w) { order(f, 1, 10, HG_SIDE_BUY, 100, 1 + w, HG_TIF_GTC); }
static void v_tif(fx_t *f, int w) {
  order(f, 1, 10, HG_SIDE_BUY, 100, 1, w ? HG_TIF_DAY : HG_TIF_GTC);
}
static void v_book(fx_t *f, int w) { order(f, 1 + (uint32_t)w, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC); }
static void v_halt(fx_t *f, int w) { instrument_cmd(f, HG_COMMAND_HALT, w ? 1 : 3); }
static void v_session(fx_t *f, int w) { end_of_session(f, 20270101 + (uint32_t)w); }
static void v_ts(fx_t *f, int w) {
  hg_command_t c = mk(f, HG_COMMAND_DEPOSIT);
  c.u.cash = (hg_cmd_cash_t){10, 5};
  c.ts += (uint64_t)w;
  run(f, &c);
}
static void v_order_time(fx_t *f, int w) {
  /* Same orders, other time priority at one level. */
  order(f, 1, w ? 20 : 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  order(f, 1, w ? 10 : 20, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
}
static void v_scoped(fx_t *f, int w) {
  if (w) scoped_order(f, 1, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
  else order(f, 1, 10, HG_SIDE_BUY, 100, 1, HG_TIF_GTC);
}
static void v_listing(fx_t *f, int w) {
  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, "B200.A.2027-05");
  c.u.list.params = params(3);
  c.u.list.params.band_bps = (uint32_t)w;
  run(f, &c);
}

static void test_hash_moves_with_every_part_of_the_state(void **state) {
  (void)state;
  hash_differs(v_deposit);
  hash_differs(v_firm);
  hash_differs(v_price);
  hash_differs(v_qty);
  hash_differs(v_tif);
  hash_differs(v_book);
  hash_differs(v_halt);
  hash_differs(v_session);
  hash_differs(v_ts);
  hash_differs(v_order_time);
  hash_differs(v_listing);
  hash_differs(v_scoped);
}

/* Offset of the session_scoped byte of the only order of the only
 * instrument "B200.A.2027-03" (14 bytes), per the layout in exchange.c:
 * header 36, n_instruments 4, id 4, halted 1, symbol length 1 + 14, params
 * 6 x 8 + 3 x 4 + 1, n_orders 4, the order's 56 bytes of integers and its
 * four u8 fields. */
#define SCOPED_AT (36 + 4 + 4 + 1 + 1 + 14 + 48 + 12 + 1 + 4 + 56 + 4)

static void test_scoped_flag_in_snapshots(void **state) {
  fx_t *f = *state;
  list(f, 1, "B200.A.2027-03");
  add_account(f, 10, 1);
  hg_oid_t s = scoped_order(f, 1, 10, HG_SIDE_BUY, 100, 7, HG_TIF_GTC);
  size_t len;
  uint8_t *blob = serialize(f->ex, &len);
  assert_int_equal(blob[4], HG_EXCHANGE_FORMAT_VERSION);
  assert_int_equal(blob[SCOPED_AT], 1);
  assert_int_equal(blob[SCOPED_AT - 4], HG_SIDE_BUY); /* the layout is as counted */

  /* Round trip: the flag survives and still decides what SESSIONS_ENDED does. */
  rec_t r;
  rec_init(&r);
  hg_exchange_t *b;
  assert_int_equal(create_ex(&r, &b), 0);
  assert_int_equal(hg_exchange_restore(b, blob, len), 0);
  assert_same_state(f->ex, b);
  hg_book_order_t o;
  assert_int_equal(hg_book_find(hg_exchange_book(b, 1), s, 10, &o), 0);
  assert_int_equal(o.session_scoped, 1);
  assert_int_equal(scoped_orders(b), 1);
  hg_command_t c = mk(f, HG_COMMAND_SESSIONS_ENDED);
  assert_int_equal(hg_exchange_apply(b, &c), 0);
  assert_int_equal(r.n, 3);
  assert_int_equal(r.ev[0].book.order_id, s);
  assert_int_equal(r.ev[0].book.reason, HG_CXL_MASS_CANCEL);
  hg_exchange_destroy(b);

  /* A flag byte other than 0 or 1 is corruption. */
  blob[SCOPED_AT] = 2;
  assert_int_equal(create_ex(&r, &b), 0);
  assert_int_equal(hg_exchange_restore(b, blob, len), HG_ECORRUPT);
  blob[SCOPED_AT] = 1;

  /* The same state as version 2 wrote it (no flag byte, no spread count at
   * the end) is read with the order unscoped, and serializes as the
   * current version. */
  uint8_t *v2 = malloc(len - 1);
  memcpy(v2, blob, SCOPED_AT);
  memcpy(v2 + SCOPED_AT, blob + SCOPED_AT + 1, len - SCOPED_AT - 1);
  v2[4] = 2;
  assert_int_equal(hg_exchange_restore(b, v2, len - 5), 0);
  assert_int_equal(hg_book_find(hg_exchange_book(b, 1), s, 10, &o), 0);
  assert_int_equal(o.session_scoped, 0);
  assert_int_equal(o.leaves, 7);
  assert_int_equal(scoped_orders(b), 0);
  size_t l2;
  uint8_t *again = serialize(b, &l2);
  blob[SCOPED_AT] = 0;
  assert_int_equal(l2, len);
  assert_memory_equal(again, blob, len);
  free(again);
  hg_exchange_destroy(b);
  /* Version 1 is still refused. */
  v2[4] = 1;
  assert_int_equal(create_ex(&r, &b), 0);
  assert_int_equal(hg_exchange_restore(b, v2, len - 5), HG_EVERSION);
  hg_exchange_destroy(b);
  free(v2);
  free(blob);
  rec_free(&r);
}

static void test_restore_refuses_bad_blobs(void **state) {
  fx_t *f = *state;
  list(f, 1, "B200.A.2027-03");
  add_account(f, 10, 1);
  order(f, 1, 10, HG_SIDE_BUY, 100, 3, HG_TIF_GTC);
  order(f, 1, 10, HG_SIDE_SELL, 200, 4, HG_TIF_DAY);
  size_t len;
  uint8_t *blob = serialize(f->ex, &len);
  uint8_t small[8];
  size_t need = 0;
  assert_int_equal(hg_exchange_serialize(f->ex, small, sizeof small, &need), HG_EFULL);
  assert_int_equal(need, len);

  rec_t r;
  rec_init(&r);
  hg_exchange_t *b;
  assert_int_equal(create_ex(&r, &b), 0);
  /* Every truncation is refused and leaves b empty and reusable. */
  for (size_t cut = 0; cut < len; cut++) {
    assert_int_equal(hg_exchange_restore(b, blob, cut), HG_ECORRUPT);
    assert_int_equal(hg_exchange_instrument_count(b), 0);
    assert_int_equal(hg_exchange_last_seq(b), 0);
  }
  uint8_t *longer = malloc(len + 1);
  memcpy(longer, blob, len);
  longer[len] = 0;
  assert_int_equal(hg_exchange_restore(b, longer, len + 1), HG_ECORRUPT);
  free(longer);
  /* Newer format version. */
  blob[4]++;
  assert_int_equal(hg_exchange_restore(b, blob, len), HG_EVERSION);
  blob[4]--;
  /* Single-byte damage anywhere: refused or accepted, never a crash, and an
   * accepted blob is a consistent state that serializes back to itself. */
  for (size_t i = 0; i < len; i++) {
    for (int bit = 0; bit < 8; bit += 3) {
      blob[i] ^= (uint8_t)(1u << bit);
      int rc = hg_exchange_restore(b, blob, len);
      if (rc == 0) {
        size_t l2;
        uint8_t *again = serialize(b, &l2);
        assert_int_equal(l2, len);
        assert_memory_equal(again, blob, len);
        free(again);
        hg_exchange_destroy(b);
        assert_int_equal(create_ex(&r, &b), 0);
      } else {
        assert_true(rc == HG_ECORRUPT || rc == HG_EVERSION || rc == HG_EFULL);
        assert_int_equal(hg_exchange_instrument_count(b), 0);
      }
      blob[i] ^= (uint8_t)(1u << bit);
    }
  }
  /* A smaller config cannot hold the state. */
  hg_exchange_config_t tiny = CFG;
  tiny.max_book_orders = 16;
  hg_exchange_t *t;
  assert_int_equal(hg_exchange_create(&tiny, rec_sink, &r, &t), 0);
  assert_int_equal(hg_exchange_restore(t, blob, len), HG_EFULL);
  hg_exchange_destroy(t);
  /* And the intact blob still restores. */
  assert_int_equal(hg_exchange_restore(b, blob, len), 0);
  assert_same_state(f->ex, b);
  assert_int_equal(r.n, 0);
  hg_exchange_destroy(b);
  rec_free(&r);
  free(blob);
}

/* ------------------------------------------------------------------------ */
/* Id lookup: the direct-indexed hints agree with the sorted arrays          */
/* ------------------------------------------------------------------------ */

/* With CFG (32 accounts, 8 instruments) the hint tables cover account ids
 * below 32 * 4 + 1024 = 1152 and instrument ids below 8 * 4 + 1024 = 1056;
 * ids at and past those bounds take the binary search. */
static const hg_account_t PROBE_ACCTS[] = {0, 1, 2, 3, 6, 7, 8, 599, 600, 601, 1150, 1151, 1152,
                                          1153, 4000000000u, 4000000001u, UINT32_MAX};
static const uint32_t PROBE_INSTS[] = {0, 1, 2, 3, 4, 1054, 1055, 1056, 1057, 70000, UINT32_MAX};

static int in_set(const uint32_t *set, size_t n, uint32_t v) {
  for (size_t i = 0; i < n; i++)
    if (set[i] == v) return 1;
  return 0;
}

/* Every probed id is found exactly when the model holds it. */
static void check_lookups(const hg_exchange_t *ex, const uint32_t *accts, size_t na,
                          const uint32_t *insts, size_t ni) {
  for (size_t i = 0; i < sizeof PROBE_ACCTS / sizeof *PROBE_ACCTS; i++) {
    int64_t cash;
    uint32_t firm;
    int rc = hg_exchange_account(ex, PROBE_ACCTS[i], &cash, &firm);
    assert_int_equal(rc == 0, in_set(accts, na, PROBE_ACCTS[i]));
    if (rc == 0) assert_int_equal(firm, PROBE_ACCTS[i] % 7 + 1);
  }
  for (size_t i = 0; i < sizeof PROBE_INSTS / sizeof *PROBE_INSTS; i++)
    assert_int_equal(hg_exchange_book(ex, PROBE_INSTS[i]) != NULL,
                     in_set(insts, ni, PROBE_INSTS[i]));
}

static void test_lookup_hints_agree_with_search(void **state) {
  fx_t *f = *state;
  /* Inserted out of order so that later ones shift earlier ones. */
  const uint32_t accts[] = {1151, 1152, 7, 4000000000u, 1, 600, 2, UINT32_MAX};
  const uint32_t insts[] = {1055, 1056, 3, 1, 70000, 2};
  const char *syms[] = {"B200.A.2027-03", "B200.A.2027-04", "B200.A.2027-05",
                        "B200.A.2027-06", "B200.A.2027-07", "B200.A.2027-08"};
  for (size_t i = 0; i < 8; i++) {
    add_account(f, accts[i], accts[i] % 7 + 1);
    check_lookups(f->ex, accts, i + 1, insts, 0);
  }
  for (size_t i = 0; i < 6; i++) {
    list(f, insts[i], syms[i]);
    check_lookups(f->ex, accts, 8, insts, i + 1);
  }
  /* The order path finds both: a hinted and an unhinted account and
   * instrument trade with each other. */
  order(f, 1056, 1152, HG_SIDE_SELL, 1000, 5, HG_TIF_GTC);
  order(f, 1056, 1151, HG_SIDE_BUY, 1000, 2, HG_TIF_GTC);
  int fills = 0;
  for (size_t i = 0; i < f->rec.n; i++)
    if (f->rec.ev[i].type == HG_XEV_BOOK && f->rec.ev[i].book.type == HG_EV_FILL) {
      assert_int_equal(f->rec.ev[i].book.maker_account, 1152);
      fills++;
    }
  assert_int_equal(fills, 1);
  hg_oid_t o = order(f, 1055, UINT32_MAX, HG_SIDE_BUY, 900, 1, HG_TIF_GTC);
  cancel(f, 1055, UINT32_MAX, o);
  assert_int_equal(f->rec.ev[0].book.type, HG_EV_CANCELLED);
  /* Delisting shifts the ids after it; one of them carries the hint. */
  instrument_cmd(f, HG_COMMAND_DELIST_INSTRUMENT, 3);
  const uint32_t left[] = {1055, 1056, 1, 70000, 2};
  check_lookups(f->ex, accts, 8, left, 5);
  instrument_cmd(f, HG_COMMAND_DELIST_INSTRUMENT, 1);
  const uint32_t left2[] = {1055, 1056, 70000, 2};
  check_lookups(f->ex, accts, 8, left2, 4);
  /* A restored exchange builds its own hints. */
  size_t len;
  uint8_t *blob = serialize(f->ex, &len);
  rec_t rb;
  rec_init(&rb);
  hg_exchange_t *b;
  assert_int_equal(create_ex(&rb, &b), 0);
  assert_int_equal(hg_exchange_restore(b, blob, len), 0);
  check_lookups(b, accts, 8, left2, 4);
  assert_same_state(f->ex, b);
  free(blob);
  hg_exchange_destroy(b);
  rec_free(&rb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_list_instrument, setup, teardown),
      cmocka_unit_test_setup_teardown(test_accounts_and_cash, setup, teardown),
      cmocka_unit_test_setup_teardown(test_orders_fill_cancel_replace, setup, teardown),
      cmocka_unit_test_setup_teardown(test_halt_and_resume, setup, teardown),
      cmocka_unit_test_setup_teardown(test_end_of_session_expires_day_orders, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sessions_ended_cancels_scoped_orders, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_scoped_order_trades_normally, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scoped_flag_in_snapshots, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delist_cancels_everything, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mass_cancel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_seq_rule, setup, teardown),
      cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_snapshot_restore_equivalence),
      cmocka_unit_test(test_hash_moves_with_every_part_of_the_state),
      cmocka_unit_test_setup_teardown(test_restore_refuses_bad_blobs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lookup_hints_agree_with_search, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
