/*
 * Settlement through the exchange state machine, with hand-computed numbers:
 * margin rejects carrying equity and required margin, the calendar spread
 * credit deciding an acceptance, position limits, variation margin of three
 * accounts summing to zero, every DSP tier, fixings published, restated and
 * finalized by command, expiry blocked by missing / NO_FIX / provisional
 * days (named one by one), final settlement closing positions with cash
 * summing to zero, and the curve rolling on. Then a property test: random
 * trading, deposits, withdrawals, fixings, cycles and an expiry on many
 * accounts, checking exact conservation of cash at every step and the same
 * state hash on replay, through the journal encoding and across a
 * serialize/restore in the middle of the run.
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

#define NS 1000000000ull
#define HOUR (3600ull * NS)
#define DAY (24ull * HOUR)
#define TV 1000000 /* micro-USD per tick per contract */

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct fx {
  hg_exchange_t *ex;
  hg_exchange_event_t *ev;
  size_t n, cap;
  uint64_t seq;
  uint64_t ts; /* timestamp of the next command (monotonic) */
} fx_t;

static void sink(void *ctx, const hg_exchange_event_t *ev) {
  fx_t *f = ctx;
  if (f->n == f->cap) {
    f->cap = f->cap ? f->cap * 2 : 256;
    f->ev = realloc(f->ev, f->cap * sizeof *f->ev);
    assert_non_null(f->ev);
  }
  f->ev[f->n++] = *ev;
}

static hg_exchange_config_t config(hg_clearing_config_t *ccfg) {
  hg_clearing_config_default(ccfg);
  ccfg->max_positions = 4096;
  ccfg->ledger_initial = 1024;
  hg_exchange_config_t cfg = {.max_instruments = 32, .max_accounts = 64, .max_book_orders = 4096,
                              .clearing = ccfg};
  return cfg;
}

static int setup(void **state) {
  fx_t *f = calloc(1, sizeof *f);
  hg_clearing_config_t ccfg;
  hg_exchange_config_t cfg = config(&ccfg);
  if (hg_exchange_create(&cfg, sink, f, &f->ex) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx_t *f = *state;
  hg_exchange_destroy(f->ex);
  free(f->ev);
  free(f);
  return 0;
}

static int32_t dayn(const char *s) {
  int32_t d;
  assert_int_equal(hg_index_day_parse(s, strlen(s), &d), 0);
  return d;
}

static uint64_t at(int32_t day, uint64_t tod) { return (uint64_t)day * DAY + tod; }

static hg_command_t mk(fx_t *f, uint32_t type) {
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = ++f->seq;
  c.ts = f->ts;
  c.type = type;
  return c;
}

static void run(fx_t *f, const hg_command_t *c) {
  f->n = 0;
  /* Every command goes through the journal encoding first. */
  uint8_t buf[HG_COMMAND_MAX_ENCODED];
  size_t len = 0;
  hg_command_t back;
  assert_int_equal(hg_command_encode(c, buf, sizeof buf, &len), 0);
  assert_int_equal(hg_command_decode(buf, len, &back), 0);
  assert_memory_equal(&back, c, sizeof back);
  assert_int_equal(hg_exchange_apply(f->ex, &back), 0);
}

static void account(fx_t *f, hg_account_t a, int64_t deposit) {
  hg_command_t c = mk(f, HG_COMMAND_ADD_ACCOUNT);
  c.u.add_account = (hg_cmd_add_account_t){a, 1 + a % 3};
  run(f, &c);
  if (deposit > 0) {
    c = mk(f, HG_COMMAND_DEPOSIT);
    c.u.cash = (hg_cmd_cash_t){a, deposit};
    run(f, &c);
    assert_int_equal(f->ev[0].type, HG_XEV_DEPOSIT);
  }
}

static void curve(fx_t *f, const char *gpu, const char *grade, uint16_t y, uint8_t m,
                  uint32_t first, int64_t ref) {
  hg_command_t c = mk(f, HG_COMMAND_LIST_CURVE);
  strcpy(c.u.curve.gpu, gpu);
  strcpy(c.u.curve.grade, grade);
  c.u.curve.year = y;
  c.u.curve.month = m;
  c.u.curve.first_instrument_id = first;
  c.u.curve.max_orders = 2048;
  c.u.curve.max_accounts = 64;
  c.u.curve.ref_price = ref;
  run(f, &c);
}

static void order(fx_t *f, uint32_t inst, hg_account_t a, int side, hg_price_t px, hg_qty_t qty) {
  hg_command_t c = mk(f, HG_COMMAND_NEW_ORDER);
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = inst, .account = a,
                                       .client_order_id = c.seq, .price = px, .qty = qty,
                                       .side = (uint8_t)side, .type = HG_ORD_LIMIT,
                                       .tif = HG_TIF_GTC};
  run(f, &c);
}

static void cash(fx_t *f, uint32_t type, hg_account_t a, int64_t amount) {
  hg_command_t c = mk(f, type);
  c.u.cash = (hg_cmd_cash_t){a, amount};
  run(f, &c);
}

static void daily(fx_t *f, int32_t day) {
  hg_command_t c = mk(f, HG_COMMAND_DAILY_SETTLEMENT);
  c.u.daily.day = day;
  run(f, &c);
}

static void publish_fixing(fx_t *f, const char *gpu, const char *grade, int32_t day, int64_t v) {
  hg_command_t c = mk(f, HG_COMMAND_PUBLISH_FIXING);
  strcpy(c.u.fixing.gpu, gpu);
  strcpy(c.u.fixing.grade, grade);
  c.u.fixing.day = day;
  c.u.fixing.value = v;
  strcpy(c.u.fixing.source, "vendor X");
  run(f, &c);
}

static void index_day(fx_t *f, uint32_t type, const char *gpu, const char *grade, int32_t day) {
  hg_command_t c = mk(f, type);
  strcpy(c.u.index_day.gpu, gpu);
  strcpy(c.u.index_day.grade, grade);
  c.u.index_day.day = day;
  run(f, &c);
}

static void expire(fx_t *f, uint32_t inst) {
  hg_command_t c = mk(f, HG_COMMAND_EXPIRE);
  c.u.expire.instrument_id = inst;
  run(f, &c);
}

/* The first event of the last command with type t (fails if none). */
static const hg_exchange_event_t *find(fx_t *f, uint16_t t, size_t from) {
  for (size_t i = from; i < f->n; i++)
    if (f->ev[i].type == t) return &f->ev[i];
  fail_msg("event type %u not emitted", t);
  return NULL;
}

static size_t count(fx_t *f, uint16_t t) {
  size_t k = 0;
  for (size_t i = 0; i < f->n; i++) k += f->ev[i].type == t;
  return k;
}

/* The order of the last command was accepted (ACCEPTED emitted). */
static void expect_accepted(fx_t *f) {
  assert_true(f->n > 0);
  assert_int_equal(f->ev[0].type, HG_XEV_BOOK);
  assert_int_equal(f->ev[0].book.type, HG_EV_ACCEPTED);
}

static const hg_exchange_event_t *expect_order_reject(fx_t *f, uint16_t reason) {
  assert_int_equal(f->n, 1);
  assert_int_equal(f->ev[0].type, HG_XEV_BOOK);
  assert_int_equal(f->ev[0].book.type, HG_EV_REJECTED);
  assert_int_equal(f->ev[0].book.reason, reason);
  return &f->ev[0];
}

static int64_t cash_of(fx_t *f, hg_account_t a) {
  int64_t c;
  uint32_t firm;
  assert_int_equal(hg_exchange_account(f->ex, a, &c, &firm), 0);
  return c;
}

static const hg_exchange_event_t *vm_of(fx_t *f, hg_account_t a, uint32_t inst) {
  for (size_t i = 0; i < f->n; i++)
    if (f->ev[i].type == HG_XEV_VM && f->ev[i].account == a && f->ev[i].instrument_id == inst)
      return &f->ev[i];
  fail_msg("no VM for account %u", a);
  return NULL;
}

static const hg_exchange_event_t *dsp_of(fx_t *f, uint32_t inst) {
  for (size_t i = 0; i < f->n; i++)
    if (f->ev[i].type == HG_XEV_DSP && f->ev[i].instrument_id == inst) return &f->ev[i];
  fail_msg("no DSP for %u", inst);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Pre-trade risk                                                            */
/* ------------------------------------------------------------------------ */

/* At ref 3,000 ticks one contract's initial margin is
 * 3000 x 1,000,000 x 1500 / 10000 = 450,000,000 micro-USD. */
#define IM1 450000000

static void test_margin_reject_carries_the_numbers(void **state) {
  fx_t *f = *state;
  f->ts = at(dayn("2027-01-11"), 10 * HOUR);
  curve(f, "B200", "A", 2027, 3, 1, 3000);
  assert_int_equal(count(f, HG_XEV_LISTED), 12);
  char sym[HG_SYMBOL_MAX + 1];
  assert_int_equal(hg_exchange_instrument_symbol(f->ex, 1, sym), 0);
  assert_string_equal(sym, "B200.A.2027-03");
  assert_int_equal(hg_exchange_instrument_symbol(f->ex, 12, sym), 0);
  assert_string_equal(sym, "B200.A.2028-02");
  account(f, 1, 2 * IM1);
  order(f, 1, 1, HG_SIDE_BUY, 3000, 2); /* IM exactly equal to equity: accepted */
  expect_accepted(f);
  const uint64_t resting = f->ev[0].book.order_id;
  order(f, 1, 1, HG_SIDE_BUY, 2990, 1);
  const hg_exchange_event_t *e = expect_order_reject(f, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(e->balance, 2 * IM1);
  assert_int_equal(e->margin, 3 * IM1);
  assert_int_equal(e->price, 3000);
  /* Resting orders hold margin: no excess to withdraw. */
  cash(f, HG_COMMAND_WITHDRAW, 1, 1);
  assert_int_equal(f->ev[0].type, HG_XEV_REJECTED);
  assert_int_equal(f->ev[0].reason, HG_XREJ_INSUFFICIENT_FUNDS);
  assert_int_equal(f->ev[0].margin, 2 * IM1);
  assert_int_equal(f->ev[0].balance, 2 * IM1);
  /* The band: 20% around 3,000 is [2,400, 3,600]. */
  order(f, 2, 1, HG_SIDE_BUY, 3601, 1);
  e = expect_order_reject(f, HG_CLR_REJ_PRICE_BAND);
  assert_int_equal(e->lo, 2400);
  assert_int_equal(e->hi, 3600);
  /* A replace that shrinks the order adds no risk, but the band still holds,
   * with the same figures. */
  hg_command_t c = mk(f, HG_COMMAND_REPLACE);
  c.u.replace = (hg_cmd_replace_t){1, 1, resting, 2399, 1};
  run(f, &c);
  e = expect_order_reject(f, HG_CLR_REJ_PRICE_BAND);
  assert_int_equal(e->price, 3000);
  assert_int_equal(e->lo, 2400);
  assert_int_equal(e->hi, 3600);
  c = mk(f, HG_COMMAND_REPLACE);
  c.u.replace = (hg_cmd_replace_t){1, 1, resting, 2400, 1};
  run(f, &c);
  assert_int_equal(find(f, HG_XEV_BOOK, 0)->book.type, HG_EV_REPLACED);
}

static void test_calendar_spread_credit_decides_acceptance(void **state) {
  fx_t *f = *state;
  f->ts = at(dayn("2027-01-11"), 10 * HOUR);
  curve(f, "B200", "A", 2027, 3, 1, 3000);
  account(f, 2, 700000000);
  order(f, 1, 2, HG_SIDE_BUY, 3000, 1); /* L = 450M */
  expect_accepted(f);
  /* Short one April: L = S = 450M, IM = 900M - 225M = 675M <= 700M. Without
   * the credit it would be 900M and refused. */
  order(f, 2, 2, HG_SIDE_SELL, 3000, 1);
  expect_accepted(f);
  hg_clearing_account_info_t info;
  assert_int_equal(hg_clearing_account_info(hg_exchange_clearing(f->ex), 2, &info), 0);
  assert_int_equal(info.initial_margin, 675000000);
  /* A second short: S = 900M, IM = 1350M - 225M = 1125M > 700M. */
  order(f, 3, 2, HG_SIDE_SELL, 3000, 1);
  const hg_exchange_event_t *e = expect_order_reject(f, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(e->margin, 1125000000);
  assert_int_equal(e->balance, 700000000);
}

static void test_position_limit_reject(void **state) {
  fx_t *f = *state;
  f->ts = at(dayn("2027-01-11"), 10 * HOUR);
  curve(f, "B200", "A", 2027, 3, 1, 3000);
  account(f, 3, (int64_t)10001 * IM1);
  for (int i = 0; i < 10; i++) {
    order(f, 1, 3, HG_SIDE_BUY, 3000, 1000);
    expect_accepted(f);
  }
  order(f, 1, 3, HG_SIDE_BUY, 3000, 1);
  const hg_exchange_event_t *e = expect_order_reject(f, HG_CLR_REJ_POSITION_LIMIT);
  assert_int_equal(e->qty, 10001);
  assert_int_equal(e->hi, 10000);
  assert_int_equal(e->lo, -10000);
  /* A sell reduces the worst case of the long side: allowed. */
  order(f, 1, 3, HG_SIDE_SELL, 3100, 1);
  expect_accepted(f);
  /* The maximum order size is 1,000. */
  order(f, 2, 3, HG_SIDE_BUY, 3000, 1001);
  assert_int_equal(f->ev[0].book.type, HG_EV_REJECTED);
}

/* The delivery month's rate (2000 bps) applies from its first calendar day:
 * the cycle of the day before (16:00) does not bring it forward. */
static void test_delivery_month_rate(void **state) {
  fx_t *f = *state;
  int32_t jan31 = dayn("2027-01-31");
  f->ts = at(jan31, 10 * HOUR);
  curve(f, "B200", "A", 2027, 2, 1, 3000);
  account(f, 4, 1000000000);
  order(f, 1, 4, HG_SIDE_BUY, 3000, 2); /* 2 x 450M = 900M */
  expect_accepted(f);
  f->ts = at(jan31, 16 * HOUR);
  daily(f, jan31);
  hg_clearing_account_info_t info;
  assert_int_equal(hg_clearing_account_info(hg_exchange_clearing(f->ex), 4, &info), 0);
  assert_int_equal(info.initial_margin, 900000000); /* still January: 15% */
  f->ts = at(jan31 + 1, 10 * HOUR); /* 2 x 3000 x 1e6 x 20% = 1,200M from here */
  cash(f, HG_COMMAND_WITHDRAW, 4, 1);
  assert_int_equal(f->ev[0].reason, HG_XREJ_INSUFFICIENT_FUNDS);
  assert_int_equal(f->ev[0].margin, 1200000000);
  /* March is not in delivery: 450M more on top of 1,200M is refused. */
  order(f, 2, 4, HG_SIDE_BUY, 3000, 1);
  assert_int_equal(expect_order_reject(f, HG_CLR_REJ_INSUFFICIENT_MARGIN)->margin, 1650000000);
}

/* The delivery-month rules follow the command's UTC date, with the cycle of
 * the month's eve skipped. The February contract's reference price is the
 * curve's listing price, 3,400 ticks (no DSP, no fixing), so 10 contracts
 * need 10 x 3400 x 1,000,000 x 1500 / 10000 = 5,100,000,000 micro-USD in
 * January and 10 x 3400 x 1,000,000 x 2000 / 10000 = 6,800,000,000 from
 * 2027-02-01T00:00:00Z. */
#define IM10_JAN 5100000000
#define IM10_FEB 6800000000

static void feb_curve(fx_t *f) {
  f->ts = at(dayn("2027-01-20"), 10 * HOUR);
  curve(f, "B200", "A", 2027, 2, 1, 3400);
  char sym[HG_SYMBOL_MAX + 1];
  assert_int_equal(hg_exchange_instrument_symbol(f->ex, 1, sym), 0);
  assert_string_equal(sym, "B200.A.2027-02");
}

static int64_t im_of(fx_t *f, hg_account_t a) {
  hg_clearing_account_info_t info;
  assert_int_equal(hg_clearing_account_info(hg_exchange_clearing(f->ex), a, &info), 0);
  return info.initial_margin;
}

static void test_delivery_month_margin_without_cycle(void **state) {
  fx_t *f = *state;
  int32_t jan31 = dayn("2027-01-31");
  feb_curve(f);
  account(f, 1, IM10_FEB - 1);
  account(f, 2, IM10_FEB - 1);
  account(f, 3, IM10_FEB);
  hg_price_t ref = 0;
  assert_int_equal(hg_clearing_ref_price(hg_exchange_clearing(f->ex), 1, &ref), 0);
  assert_int_equal(ref, 3400);
  /* The last nanosecond of January: 15%. */
  f->ts = at(jan31, DAY - 1);
  order(f, 1, 1, HG_SIDE_BUY, 3400, 10);
  expect_accepted(f);
  assert_int_equal(im_of(f, 1), IM10_JAN);
  /* No DAILY_SETTLEMENT for 2027-01-31. The first nanosecond of February:
   * 6,800,000,000 required, one micro-USD short is refused. */
  f->ts = at(jan31 + 1, 0);
  order(f, 1, 2, HG_SIDE_BUY, 3400, 10);
  const hg_exchange_event_t *e = expect_order_reject(f, HG_CLR_REJ_INSUFFICIENT_MARGIN);
  assert_int_equal(e->balance, IM10_FEB - 1);
  assert_int_equal(e->margin, IM10_FEB);
  assert_int_equal(e->price, 3400);
  order(f, 1, 3, HG_SIDE_BUY, 3400, 10);
  expect_accepted(f);
  assert_int_equal(im_of(f, 3), IM10_FEB);
  /* The order resting since January stays, and counts at 20% now: its
   * account has no excess left to withdraw. */
  assert_int_equal(im_of(f, 1), IM10_FEB);
  cash(f, HG_COMMAND_WITHDRAW, 1, 1);
  assert_int_equal(f->ev[0].type, HG_XEV_REJECTED);
  assert_int_equal(f->ev[0].reason, HG_XREJ_INSUFFICIENT_FUNDS);
  assert_int_equal(f->ev[0].margin, IM10_FEB);
}

static void list_feb(fx_t *f, uint32_t id) {
  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, "B200.A.2027-02");
  c.u.list.params = (hg_book_params_t){.instrument_id = id, .tick_size = 1000,
                                       .contract_unit = 1000, .min_price = 1,
                                       .max_price = 100000, .max_order_qty = 1000,
                                       .ref_price = 3400, .max_orders = 64, .max_accounts = 8};
  run(f, &c);
  assert_int_equal(f->ev[0].type, HG_XEV_LISTED);
}

/* A contract delisted in January and listed again in its delivery month
 * (the day's first command already set the flags) is in delivery too. */
static void test_delivery_month_relisted(void **state) {
  fx_t *f = *state;
  f->ts = at(dayn("2027-01-20"), 10 * HOUR);
  list_feb(f, 50);
  hg_command_t c = mk(f, HG_COMMAND_DELIST_INSTRUMENT);
  c.u.instrument.instrument_id = 50;
  run(f, &c);
  assert_int_equal(f->ev[0].type, HG_XEV_DELISTED);
  f->ts = at(dayn("2027-02-01"), 0);
  account(f, 1, IM10_FEB - 1);
  list_feb(f, 50);
  order(f, 50, 1, HG_SIDE_BUY, 3400, 10);
  assert_int_equal(expect_order_reject(f, HG_CLR_REJ_INSUFFICIENT_MARGIN)->margin, IM10_FEB);
}

/* Account 10 long 1,000 February contracts, bought from account 11. */
static void long_1000(fx_t *f) {
  feb_curve(f);
  account(f, 10, 1000000000000);
  account(f, 11, 1000000000000);
  order(f, 1, 11, HG_SIDE_SELL, 3400, 1000);
  expect_accepted(f);
  order(f, 1, 10, HG_SIDE_BUY, 3400, 1000);
  assert_int_equal(find(f, HG_XEV_BOOK, 0)->book.type, HG_EV_ACCEPTED);
  assert_int_equal(find(f, HG_XEV_BOOK, 1)->book.type, HG_EV_FILL);
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(hg_exchange_clearing(f->ex), 10, 1, &p), 0);
  assert_int_equal(p.pos, 1000);
}

static void test_delivery_month_limit_without_cycle(void **state) {
  fx_t *f = *state;
  int32_t jan31 = dayn("2027-01-31");
  long_1000(f);
  /* The last nanosecond of January: the limit is 10,000, 1,100 is fine. */
  f->ts = at(jan31, DAY - 1);
  order(f, 1, 10, HG_SIDE_BUY, 3400, 100);
  expect_accepted(f);
  hg_command_t c = mk(f, HG_COMMAND_CANCEL);
  c.u.cancel = (hg_cmd_cancel_t){1, 10, f->ev[0].book.order_id};
  run(f, &c);
  assert_int_equal(f->ev[0].book.type, HG_EV_CANCELLED);
  /* No cycle; 2027-02-01T00:00:00Z: 1,000 -> 1,100 is over the 1,000 limit. */
  f->ts = at(jan31 + 1, 0);
  order(f, 1, 10, HG_SIDE_BUY, 3400, 100);
  const hg_exchange_event_t *e = expect_order_reject(f, HG_CLR_REJ_POSITION_LIMIT);
  assert_int_equal(e->qty, 1100);
  assert_int_equal(e->lo, -1000);
  assert_int_equal(e->hi, 1000);
  /* Taking the position down stays allowed. */
  order(f, 1, 10, HG_SIDE_SELL, 3400, 100);
  expect_accepted(f);
}

/* Orders resting when the month starts stay (settlement/CLEARING.md): only
 * orders and replaces that raise the worst case meet the 1,000 limit, so a
 * fill of a January order can take the position past it. */
static void test_resting_orders_at_month_start(void **state) {
  fx_t *f = *state;
  int32_t jan31 = dayn("2027-01-31");
  long_1000(f);
  f->ts = at(jan31, 20 * HOUR);
  order(f, 1, 10, HG_SIDE_BUY, 3400, 50);
  expect_accepted(f);
  const hg_oid_t oid = f->ev[0].book.order_id;
  f->ts = at(jan31 + 1, 9 * HOUR);
  hg_command_t c = mk(f, HG_COMMAND_REPLACE);
  c.u.replace = (hg_cmd_replace_t){1, 10, oid, 3400, 60};
  run(f, &c);
  const hg_exchange_event_t *e = expect_order_reject(f, HG_CLR_REJ_POSITION_LIMIT);
  assert_int_equal(e->qty, 1060);
  assert_int_equal(e->hi, 1000);
  c = mk(f, HG_COMMAND_REPLACE);
  c.u.replace = (hg_cmd_replace_t){1, 10, oid, 3400, 40};
  run(f, &c);
  assert_int_equal(find(f, HG_XEV_BOOK, 0)->book.type, HG_EV_REPLACED);
  /* (Account 11, short 1,000, can no longer sell: account 12 does.) */
  account(f, 12, 1000000000000);
  order(f, 1, 12, HG_SIDE_SELL, 3400, 40);
  assert_int_equal(find(f, HG_XEV_BOOK, 1)->book.type, HG_EV_FILL);
  hg_clearing_position_t p;
  assert_int_equal(hg_clearing_position(hg_exchange_clearing(f->ex), 10, 1, &p), 0);
  assert_int_equal(p.pos, 1040);
  /* 1,040 x 3400 x 1,000,000 x 2000 / 10000 */
  assert_int_equal(im_of(f, 10), 707200000000);
  /* Any order that raises it further is refused. */
  order(f, 1, 10, HG_SIDE_BUY, 3400, 1);
  assert_int_equal(expect_order_reject(f, HG_CLR_REJ_POSITION_LIMIT)->qty, 1041);
}

/* A curve's listing price (3,000) is the contracts' first previous
 * settlement price only where the contract gives nothing: once the index
 * has a fixing, the band and margin reference is the latest fixing, and a
 * first DSP without trades or quotes is the latest FINAL fixing (tier 4). */
static void test_listing_price_ranks_after_the_index(void **state) {
  fx_t *f = *state;
  int32_t t = dayn("2027-01-15");
  f->ts = at(t, 9 * HOUR);
  curve(f, "B200", "A", 2027, 3, 1, 3000);
  account(f, 1, 10000000000);
  const hg_clearing_t *clr = hg_exchange_clearing(f->ex);
  hg_price_t ref = 0;
  assert_int_equal(hg_clearing_ref_price(clr, 1, &ref), 0);
  assert_int_equal(ref, 3000);
  publish_fixing(f, "B200", "A", t - 1, 3456789);
  index_day(f, HG_COMMAND_FINALIZE_FIXING, "B200", "A", t - 1);
  /* 3,456,789 micro-USD -> 3456.789 -> 3457 ticks */
  assert_int_equal(hg_clearing_ref_price(clr, 1, &ref), 0);
  assert_int_equal(ref, 3457);
  /* The band is 20% around 3,457: [ceil(2765.6), floor(4148.4)]; 2,700 was
   * inside the band around the listing price. */
  order(f, 1, 1, HG_SIDE_BUY, 2700, 1);
  const hg_exchange_event_t *e = expect_order_reject(f, HG_CLR_REJ_PRICE_BAND);
  assert_int_equal(e->price, 3457);
  assert_int_equal(e->lo, 2766);
  assert_int_equal(e->hi, 4148);
  /* Margin at the fixing: 1 x 3457 x 1,000,000 x 1500 / 10000 */
  order(f, 1, 1, HG_SIDE_BUY, 3400, 1);
  expect_accepted(f);
  hg_clearing_account_info_t info;
  assert_int_equal(hg_clearing_account_info(clr, 1, &info), 0);
  assert_int_equal(info.initial_margin, 518550000);
  f->ts = at(t, 16 * HOUR);
  daily(f, t);
  e = dsp_of(f, 1); /* one bid, no ask, no trade: tier 4 */
  assert_int_equal(e->tier, HG_DSP_TIER_INDEX);
  assert_int_equal(e->price, 3457);
}

/* One band, the contract's (CONTRACT.md 4.5): after the reference moves more
 * than 20% from the listing price, a limit order inside the new band is
 * accepted and a market order is capped at the new band's edge, not the
 * listing's. Listed as the demo lists: a single contract with a price. */
static void test_band_follows_the_reference(void **state) {
  fx_t *f = *state;
  int32_t t = dayn("2027-01-15");
  f->ts = at(t, 9 * HOUR);
  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, "B200.A.2027-03");
  c.u.list.params = (hg_book_params_t){.instrument_id = 1, .tick_size = 1000,
                                       .contract_unit = 1000, .min_price = 1,
                                       .max_price = 100000, .max_order_qty = 1000,
                                       .ref_price = 3000, .max_orders = 64,
                                       .max_accounts = 8};
  run(f, &c);
  find(f, HG_XEV_LISTED, 0);
  account(f, 1, 10000000000);
  account(f, 2, 10000000000);
  /* Index at 4,000 ticks: reference 4,000, band [3,200, 4,800]; the listing
   * band was [2,400, 3,600]. */
  publish_fixing(f, "B200", "A", t - 1, 4000000);
  hg_price_t ref = 0;
  assert_int_equal(hg_clearing_ref_price(hg_exchange_clearing(f->ex), 1, &ref), 0);
  assert_int_equal(ref, 4000);
  order(f, 1, 1, HG_SIDE_SELL, 4700, 2);
  expect_accepted(f);
  order(f, 1, 1, HG_SIDE_SELL, 4900, 1); /* outside the band: the clearing's reject */
  expect_order_reject(f, HG_CLR_REJ_PRICE_BAND);
  /* A market buy walks up to 4,800: it takes the ask at 4,700. */
  c = mk(f, HG_COMMAND_NEW_ORDER);
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = 1, .account = 2,
                                       .client_order_id = c.seq, .qty = 1,
                                       .side = HG_SIDE_BUY, .type = HG_ORD_MARKET,
                                       .tif = HG_TIF_IOC};
  run(f, &c);
  expect_accepted(f);
  assert_int_equal(f->ev[0].book.price, 4800);
  assert_int_equal(count(f, HG_XEV_BOOK) >= 2, 1);
  const hg_exchange_event_t *fill = NULL;
  for (size_t i = 0; i < f->n; i++)
    if (f->ev[i].type == HG_XEV_BOOK && f->ev[i].book.type == HG_EV_FILL) fill = &f->ev[i];
  assert_non_null(fill);
  assert_int_equal(fill->book.price, 4700);
  assert_int_equal(fill->book.qty, 1);
}

/* The reference price and band the clearing checks against are published:
 * on the listing event, after each fixing (the index's contracts only) and
 * after the cycle's DSPs (every contract), and in the instrument listing a
 * restarted consumer seeds from. Band 20%: [ceil(0.8 ref), floor(1.2 ref)]. */
static void info_of(void *ctx, const hg_exchange_instrument_info_t *info) {
  hg_exchange_instrument_info_t *out = ctx;
  if (info->id == out->id) *out = *info;
}

static void test_reference_events(void **state) {
  fx_t *f = *state;
  int32_t t = dayn("2027-01-15");
  f->ts = at(t, 9 * HOUR);
  curve(f, "B200", "A", 2027, 3, 1, 3000);
  const hg_exchange_event_t *e = find(f, HG_XEV_LISTED, 0);
  assert_int_equal(e->instrument_id, 1);
  assert_int_equal(e->price, 3000);
  assert_int_equal(e->lo, 2400);
  assert_int_equal(e->hi, 3600);
  curve(f, "H100", "A", 2027, 3, 101, 2001);
  e = find(f, HG_XEV_LISTED, 0);
  assert_int_equal(e->price, 2001);
  assert_int_equal(e->lo, 1601); /* ceil(1600.8) */
  assert_int_equal(e->hi, 2401); /* floor(2401.2) */
  /* 3,456,789 micro-USD -> 3457 ticks: [ceil(2765.6), floor(4148.4)]. */
  publish_fixing(f, "B200", "A", t - 1, 3456789);
  assert_int_equal(count(f, HG_XEV_REFERENCE), 12);
  for (size_t i = 0; i < f->n; i++) {
    if (f->ev[i].type != HG_XEV_REFERENCE) continue;
    assert_true(f->ev[i].instrument_id >= 1 && f->ev[i].instrument_id <= 12);
    assert_int_equal(f->ev[i].price, 3457);
    assert_int_equal(f->ev[i].lo, 2766);
    assert_int_equal(f->ev[i].hi, 4148);
  }
  hg_exchange_instrument_info_t info = {.id = 1};
  hg_exchange_foreach_instrument(f->ex, info_of, &info);
  assert_int_equal(info.ref_price, 3457);
  assert_int_equal(info.band_low, 2766);
  assert_int_equal(info.band_high, 4148);
  info = (hg_exchange_instrument_info_t){.id = 101};
  hg_exchange_foreach_instrument(f->ex, info_of, &info);
  assert_int_equal(info.ref_price, 2001);
  /* The cycle: one REFERENCE per contract, each its new DSP's, after the
   * DSPs and before CYCLE. */
  index_day(f, HG_COMMAND_FINALIZE_FIXING, "B200", "A", t - 1);
  assert_int_equal(count(f, HG_XEV_REFERENCE), 12);
  account(f, 1, 10000000000);
  order(f, 1, 1, HG_SIDE_BUY, 3400, 1); /* one bid, no ask, no trade: tier 4 */
  expect_accepted(f);
  f->ts = at(t, 16 * HOUR);
  daily(f, t);
  assert_int_equal(count(f, HG_XEV_REFERENCE), 24);
  size_t last_dsp = 0, first_ref = f->n, cyc = 0;
  for (size_t i = 0; i < f->n; i++) {
    if (f->ev[i].type == HG_XEV_DSP) last_dsp = i;
    if (f->ev[i].type == HG_XEV_REFERENCE && i < first_ref) first_ref = i;
    if (f->ev[i].type == HG_XEV_CYCLE) cyc = i;
  }
  assert_true(last_dsp < first_ref && first_ref < cyc);
  e = dsp_of(f, 1);
  assert_int_equal(e->tier, HG_DSP_TIER_INDEX);
  assert_int_equal(e->price, 3457);
  const hg_exchange_event_t *r = NULL;
  for (size_t i = 0; i < f->n; i++)
    if (f->ev[i].type == HG_XEV_REFERENCE && f->ev[i].instrument_id == 1) r = &f->ev[i];
  assert_non_null(r);
  assert_int_equal(r->price, 3457);
  assert_int_equal(r->lo, 2766);
  assert_int_equal(r->hi, 4148);
}

/* ------------------------------------------------------------------------ */
/* Daily cycle: DSP tiers and variation margin                               */
/* ------------------------------------------------------------------------ */

static void test_daily_cycle_vm_and_every_tier(void **state) {
  fx_t *f = *state;
  int32_t t = dayn("2027-01-15");
  f->ts = at(t, 9 * HOUR);
  curve(f, "B200", "A", 2027, 3, 1, 3000);
  /* A contract with no DSP yet: its reference and DSP come from the index. */
  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, "B200.B.2027-03");
  c.u.list.params = (hg_book_params_t){.instrument_id = 20, .tick_size = 1000,
                                       .contract_unit = 1000, .min_price = 1,
                                       .max_price = 100000, .max_order_qty = 1000,
                                       .max_orders = 64, .max_accounts = 8};
  run(f, &c);
  assert_int_equal(f->ev[0].type, HG_XEV_LISTED);
  for (hg_account_t a = 10; a <= 30; a += 10) account(f, a, 10000000000);
  order(f, 20, 10, HG_SIDE_BUY, 3400, 1); /* no reference price yet */
  expect_order_reject(f, HG_CLR_REJ_NO_REFERENCE);
  publish_fixing(f, "B200", "B", t - 1, 3456789);
  const hg_exchange_event_t *e = find(f, HG_XEV_FIXING, 0);
  assert_int_equal(e->status, HG_INDEX_PROVISIONAL);
  assert_int_equal(e->kind, HG_INDEX_EXTERNAL);
  assert_int_equal(e->price, 3456789);
  assert_int_equal(e->lo, 0); /* no receipt for an external value */
  assert_int_equal(e->hi, 0);
  index_day(f, HG_COMMAND_FINALIZE_FIXING, "B200", "B", t - 1);
  assert_int_equal(find(f, HG_XEV_FIXING, 0)->status, HG_INDEX_FINAL);
  assert_int_equal(find(f, HG_XEV_FIXING, 0)->outcome, HG_XFIX_FINALIZED);

  f->ts = at(t, 10 * HOUR);
  order(f, 1, 10, HG_SIDE_SELL, 3010, 5);
  order(f, 1, 20, HG_SIDE_BUY, 3010, 3); /* 20 +3, 10 -3 at 3010 */
  order(f, 1, 30, HG_SIDE_BUY, 3010, 2); /* 30 +2, 10 -5 */
  f->ts = at(t, 15 * HOUR + 56 * 60 * NS); /* inside [15:55, 16:00) */
  order(f, 1, 20, HG_SIDE_SELL, 3020, 1);
  order(f, 1, 30, HG_SIDE_BUY, 3020, 1); /* 30 +3, 20 +2 at 3020 */
  assert_int_equal(count(f, HG_XEV_BOOK) >= 2, 1);

  f->ts = at(t, 16 * HOUR);
  daily(f, t);
  e = dsp_of(f, 1);
  assert_int_equal(e->tier, HG_DSP_TIER_VWAP); /* only the window trade */
  assert_int_equal(e->price, 3020);
  e = dsp_of(f, 2);
  assert_int_equal(e->tier, HG_DSP_TIER_PREVIOUS); /* the listing's reference */
  assert_int_equal(e->price, 3000);
  e = dsp_of(f, 20);
  assert_int_equal(e->tier, HG_DSP_TIER_INDEX); /* (3,456,789 + 500) / 1000 */
  assert_int_equal(e->price, 3457);
  /* VM = sum q (DSP - p) TV: 10: -5 x 10; 20: 3 x 10 - 1 x 0; 30: 2 x 10 + 0. */
  assert_int_equal(vm_of(f, 10, 1)->amount, -50000000);
  assert_int_equal(vm_of(f, 20, 1)->amount, 30000000);
  assert_int_equal(vm_of(f, 30, 1)->amount, 20000000);
  assert_int_equal(vm_of(f, 10, 1)->qty, -5);
  e = find(f, HG_XEV_CYCLE, 0);
  assert_int_equal(e->amount, 0);
  assert_int_equal(e->lo, -50000000);
  assert_int_equal(e->hi, 50000000);
  assert_int_equal(cash_of(f, 10), 10000000000 - 50000000);
  assert_int_equal(cash_of(f, 30), 10000000000 + 20000000);
  /* The same day twice is already settled; a day before its 16:00 is not
   * yet in state. */
  f->ts = at(t + 1, 10 * HOUR);
  daily(f, t);
  assert_int_equal(f->ev[0].reason, HG_XREJ_ALREADY_SETTLED);
  daily(f, t - 1); /* an earlier day than the last cycle's: also settled */
  assert_int_equal(f->ev[0].reason, HG_XREJ_ALREADY_SETTLED);
  daily(f, t + 1);
  assert_int_equal(f->ev[0].reason, HG_XREJ_NOT_IN_STATE);

  /* Day t+1: no trade, bid 3030 / ask 3036 (spread 6 <= 10): tier 2,
   * floor((3030 + 3036 + 1) / 2) = 3033. VM = pos x 13 ticks. */
  order(f, 1, 10, HG_SIDE_BUY, 3030, 1);
  order(f, 1, 20, HG_SIDE_SELL, 3036, 1);
  hg_oid_t ask = f->seq;
  f->ts = at(t + 1, 16 * HOUR);
  daily(f, t + 1);
  e = dsp_of(f, 1);
  assert_int_equal(e->tier, HG_DSP_TIER_MID);
  assert_int_equal(e->price, 3033);
  assert_int_equal(vm_of(f, 10, 1)->amount, -65000000);
  assert_int_equal(vm_of(f, 20, 1)->amount, 26000000);
  assert_int_equal(vm_of(f, 30, 1)->amount, 39000000);
  assert_int_equal(find(f, HG_XEV_CYCLE, 0)->amount, 0);
  assert_int_equal(dsp_of(f, 20)->tier, HG_DSP_TIER_PREVIOUS);

  /* Day t+2: one side only: tier 3, the previous DSP, and VM 0. */
  f->ts = at(t + 2, 10 * HOUR);
  hg_command_t cx = mk(f, HG_COMMAND_CANCEL);
  cx.u.cancel = (hg_cmd_cancel_t){1, 20, ask};
  run(f, &cx);
  f->ts = at(t + 2, 16 * HOUR);
  daily(f, t + 2);
  e = dsp_of(f, 1);
  assert_int_equal(e->tier, HG_DSP_TIER_PREVIOUS);
  assert_int_equal(e->price, 3033);
  assert_int_equal(vm_of(f, 10, 1)->amount, 0);
  assert_int_equal(cash_of(f, 10) + cash_of(f, 20) + cash_of(f, 30), 30000000000);
}

/* ------------------------------------------------------------------------ */
/* Fixings by command                                                        */
/* ------------------------------------------------------------------------ */

static void samples_of(fx_t *f, const char *gpu, const char *grade, int32_t day, int64_t price) {
  /* 5 graded providers x 12 hours, one trade of 100 units each (GPU-hours,
   * or million output tokens for a token index). */
  hg_cmd_samples_t b;
  memset(&b, 0, sizeof b);
  strcpy(b.gpu, gpu);
  strcpy(b.grade, grade);
  b.day = day;
  for (int p = 0; p < 5; p++) {
    for (int h = 0; h < 12; h++) {
      hg_index_sample_t *s = &b.s[b.n++];
      memset(s, 0, sizeof *s);
      s->ts = (int64_t)day * 86400 + h * 3600 + p;
      s->price = price;
      s->volume = 100;
      s->term_days = 30;
      s->kind = HG_INDEX_TRADE;
      snprintf(s->provider, sizeof s->provider, "prov%d", p);
      strcpy(s->region, "us-east");
      strcpy(s->gpu, gpu);
      strcpy(s->grade, grade);
      if (b.n == HG_SAMPLES_PER_COMMAND) {
        hg_command_t c = mk(f, HG_COMMAND_PUBLISH_SAMPLES);
        c.u.samples = b;
        run(f, &c);
        assert_int_equal(f->ev[0].type, HG_XEV_SAMPLES);
        b.n = 0;
      }
    }
  }
}

static void samples(fx_t *f, int32_t day, int64_t price) { samples_of(f, "B200", "A", day, price); }

/* prov0..prov4 graded (gpu, grade) from `from`. */
static void grade_providers(fx_t *f, const char *gpu, const char *grade, int32_t from) {
  for (int p = 0; p < 5; p++) {
    hg_command_t c = mk(f, HG_COMMAND_SET_PROVIDER_GRADE);
    snprintf(c.u.provider_grade.provider, sizeof c.u.provider_grade.provider, "prov%d", p);
    strcpy(c.u.provider_grade.gpu, gpu);
    strcpy(c.u.provider_grade.grade, grade);
    c.u.provider_grade.effective_day = from;
    run(f, &c);
    assert_int_equal(f->ev[0].type, HG_XEV_GRADE_SET);
  }
}

static void test_fixing_compute_restate_finalize(void **state) {
  fx_t *f = *state;
  int32_t d = dayn("2027-03-14");
  f->ts = at(d + 1, HOUR);
  grade_providers(f, "B200", "A", d - 10);
  samples(f, d, 3000000);
  index_day(f, HG_COMMAND_COMPUTE_FIXING, "B200", "A", d);
  const hg_exchange_event_t *e = find(f, HG_XEV_FIXING, 0);
  assert_int_equal(e->tier, 1);
  assert_int_equal(e->status, HG_INDEX_PROVISIONAL);
  assert_int_equal(e->kind, HG_INDEX_COMPUTED);
  assert_int_equal(e->outcome, HG_INDEX_PUBLISHED);
  assert_int_equal(e->price, 3000000);
  assert_int_equal(e->amount, 60);
  hg_exchange_receipt_t r;
  assert_int_equal(hg_exchange_receipt(f->ex, "B200", "A", d, &r), 0);
  assert_int_equal(r.input_count, 60);
  assert_int_equal(r.tier[0].providers, 5);
  assert_int_equal(r.tier[0].hours, 12);
  /* The event carries the receipt's counts for consumers that show them. */
  assert_int_equal(e->lo, 5);
  assert_int_equal(e->hi, 12);
  assert_int_equal(e->qty, r.tier[0].used);
  assert_int_equal(e->margin, r.tier[0].volume);
  assert_true(e->margin > 0);
  /* A corrected set moving the value by less than a tick is not published. */
  samples(f, d, 3000500);
  index_day(f, HG_COMMAND_COMPUTE_FIXING, "B200", "A", d);
  assert_int_equal(find(f, HG_XEV_FIXING, 0)->outcome, HG_INDEX_UNCHANGED);
  assert_int_equal(find(f, HG_XEV_FIXING, 0)->lo, 5); /* the kept receipt's */
  assert_int_equal(find(f, HG_XEV_FIXING, 0)->price, 3000000);
  samples(f, d, 3002000);
  index_day(f, HG_COMMAND_COMPUTE_FIXING, "B200", "A", d);
  assert_int_equal(find(f, HG_XEV_FIXING, 0)->outcome, HG_INDEX_RESTATED);
  assert_int_equal(find(f, HG_XEV_FIXING, 0)->price, 3002000);
  /* A half-published set can be dropped. */
  samples(f, d, 1);
  index_day(f, HG_COMMAND_DISCARD_SAMPLES, "B200", "A", d);
  assert_int_equal(find(f, HG_XEV_SAMPLES_DISCARDED, 0)->amount, 60);
  index_day(f, HG_COMMAND_FINALIZE_FIXING, "B200", "A", d);
  /* FINAL never changes: no samples, no recompute, no external value. */
  index_day(f, HG_COMMAND_COMPUTE_FIXING, "B200", "A", d);
  assert_int_equal(f->ev[0].reason, HG_XREJ_FIXING_FINAL);
  publish_fixing(f, "B200", "A", d, 5000000);
  assert_int_equal(f->ev[0].reason, HG_XREJ_FIXING_FINAL);
  hg_index_fixing_t fx;
  assert_int_equal(hg_exchange_fixing(f->ex, "B200", "A", d, &fx), 0);
  assert_int_equal(fx.value, 3002000);
  assert_int_equal(fx.status, HG_INDEX_FINAL);
  /* A grade change may not reach back over published fixings. */
  hg_command_t c = mk(f, HG_COMMAND_SET_PROVIDER_GRADE);
  strcpy(c.u.provider_grade.provider, "prov0");
  strcpy(c.u.provider_grade.gpu, "B200");
  strcpy(c.u.provider_grade.grade, "B");
  c.u.provider_grade.effective_day = d;
  run(f, &c);
  assert_int_equal(f->ev[0].reason, HG_XREJ_NOT_IN_STATE);
  /* The next day with too little data: carried from the FINAL day. */
  index_day(f, HG_COMMAND_COMPUTE_FIXING, "B200", "A", d + 1);
  e = find(f, HG_XEV_FIXING, 0);
  assert_int_equal(e->kind, HG_INDEX_CARRIED);
  assert_int_equal(e->price, 3002000);
  assert_int_equal(e->tier, 0);
}

/* ------------------------------------------------------------------------ */
/* Expiry                                                                    */
/* ------------------------------------------------------------------------ */

static void test_expiry_blocked_then_final_settlement(void **state) {
  fx_t *f = *state;
  int32_t feb1 = dayn("2027-02-01"), feb28 = dayn("2027-02-28");
  f->ts = at(dayn("2027-01-20"), 10 * HOUR);
  curve(f, "B200", "A", 2027, 2, 100, 3000); /* 2027-02 .. 2028-01, ids 100..111 */
  account(f, 1, 10000000000);
  account(f, 2, 10000000000);
  f->ts = at(dayn("2027-02-10"), 10 * HOUR);
  order(f, 100, 2, HG_SIDE_SELL, 3000, 4);
  order(f, 100, 1, HG_SIDE_BUY, 3000, 4);
  order(f, 100, 2, HG_SIDE_SELL, 3100, 1); /* rests until the last day */
  f->ts = at(dayn("2027-02-10"), 16 * HOUR);
  daily(f, dayn("2027-02-10"));
  assert_int_equal(vm_of(f, 1, 100)->amount, 0);
  f->ts = at(feb28, 12 * HOUR);
  expire(f, 100); /* trading has not ended */
  assert_int_equal(f->ev[0].reason, HG_XREJ_NOT_IN_STATE);
  f->ts = at(feb28, 16 * HOUR);
  daily(f, feb28);
  /* The last trading day's cycle takes what still rests off the book. */
  size_t i;
  for (i = 0; i < f->n; i++)
    if (f->ev[i].type == HG_XEV_BOOK && f->ev[i].book.type == HG_EV_CANCELLED) break;
  assert_true(i < f->n);
  assert_int_equal(f->ev[i].book.reason, HG_XCXL_EXPIRED);
  f->ts = at(feb28, 16 * HOUR + 1);
  order(f, 100, 1, HG_SIDE_BUY, 3000, 1);
  expect_order_reject(f, HG_XREJ_TRADING_ENDED);

  /* Days 1-3 never published, day 4 NO_FIX (computed with no data and
   * nothing to carry), day 6 left PROVISIONAL; the rest FINAL. */
  index_day(f, HG_COMMAND_COMPUTE_FIXING, "B200", "A", feb1 + 3);
  assert_int_equal(find(f, HG_XEV_FIXING, 0)->status, HG_INDEX_NO_FIX);
  for (int d = 5; d <= 28; d++) {
    publish_fixing(f, "B200", "A", feb1 + d - 1, d <= 14 ? 3100000 : 3200500);
    if (d != 6) index_day(f, HG_COMMAND_FINALIZE_FIXING, "B200", "A", feb1 + d - 1);
  }
  expire(f, 100);
  assert_int_equal(count(f, HG_XEV_FIXING_MISSING), 5);
  static const int want_day[5] = {1, 2, 3, 4, 6};
  static const int want_status[5] = {HG_CLR_FIX_MISSING, HG_CLR_FIX_MISSING, HG_CLR_FIX_MISSING,
                                     HG_CLR_FIX_NO_FIX, HG_CLR_FIX_PROVISIONAL};
  for (int k = 0; k < 5; k++) {
    assert_int_equal(f->ev[k].type, HG_XEV_FIXING_MISSING);
    assert_int_equal(f->ev[k].day, feb1 + want_day[k] - 1);
    assert_int_equal(f->ev[k].status, want_status[k]);
  }
  const hg_exchange_event_t *e = find(f, HG_XEV_REJECTED, 0);
  assert_int_equal(e->reason, HG_XREJ_FIXINGS_MISSING);
  assert_int_equal(e->amount, 5);
  assert_int_equal(e->balance, 0x2F); /* days 1, 2, 3, 4, 6 */
  assert_non_null(hg_exchange_book(f->ex, 100));

  /* An operator publishes the missing days; everything is finalized. */
  for (int d = 1; d <= 6; d++) {
    if (d != 5 && d != 6) publish_fixing(f, "B200", "A", feb1 + d - 1, 3100000);
    if (d != 5) index_day(f, HG_COMMAND_FINALIZE_FIXING, "B200", "A", feb1 + d - 1);
  }
  int64_t c1 = cash_of(f, 1), c2 = cash_of(f, 2);
  expire(f, 100);
  /* FSP = mean of 14 x 3,100,000 and 14 x 3,200,500 micro-USD = 3,150.25
   * ticks -> 3,150. Last DSP 3,000: the long 4 receive 4 x 150 ticks. */
  e = find(f, HG_XEV_EXPIRED, 0);
  assert_int_equal(e->price, 3150);
  assert_int_equal(e->amount, 2);
  int64_t sum = 0;
  for (i = 0; i < f->n; i++) {
    if (f->ev[i].type != HG_XEV_FINAL_SETTLEMENT) continue;
    sum += f->ev[i].amount;
    assert_int_equal(f->ev[i].amount, f->ev[i].account == 1 ? 600000000 : -600000000);
    assert_int_equal(f->ev[i].qty, f->ev[i].account == 1 ? 4 : -4);
  }
  assert_int_equal(sum, 0);
  assert_int_equal(cash_of(f, 1), c1 + 600000000);
  assert_int_equal(cash_of(f, 2), c2 - 600000000);
  assert_null(hg_exchange_book(f->ex, 100));
  /* The statement shows the contract's cash movements. */
  char buf[2048];
  size_t len;
  assert_int_equal(hg_clearing_statement_csv(hg_exchange_clearing(f->ex), 1, 100, buf,
                                             sizeof buf, &len),
                   0);
  assert_non_null(strstr(buf, "FINAL"));
  /* The curve rolls: 2028-02 is listed with the next id. */
  e = find(f, HG_XEV_LISTED, 0);
  assert_int_equal(e->instrument_id, 112);
  char sym[HG_SYMBOL_MAX + 1];
  assert_int_equal(hg_exchange_instrument_symbol(f->ex, 112, sym), 0);
  assert_string_equal(sym, "B200.A.2028-02");
  assert_int_equal(hg_exchange_instrument_count(f->ex), 12);
}

/* ------------------------------------------------------------------------ */
/* Token futures (settlement/CONTRACT.md 7.3, worked in 6.12)                */
/* ------------------------------------------------------------------------ */

static void list_symbol(fx_t *f, const char *sym, uint32_t id) {
  hg_command_t c = mk(f, HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, sym);
  c.u.list.params = (hg_book_params_t){.instrument_id = id, .tick_size = 1000,
                                       .contract_unit = 1000, .min_price = 1,
                                       .max_price = 100000, .max_order_qty = 1000,
                                       .ref_price = 4000, .max_orders = 64, .max_accounts = 8};
  run(f, &c);
}

/* A token curve is listed, settled daily, margined and finally settled by
 * the GPU-hour rules with no special case: the figures of section 6.12. */
static void test_token_contract_vm_im_fsp(void **state) {
  fx_t *f = *state;
  f->ts = at(dayn("2027-02-01"), 10 * HOUR);
  curve(f, "OW671B", "S", 2027, 3, 200, 4000); /* ids 200..211 */
  assert_int_equal(f->ev[0].type, HG_XEV_LISTED);
  char sym[HG_SYMBOL_MAX + 1];
  assert_int_equal(hg_exchange_instrument_symbol(f->ex, 200, sym), 0);
  assert_string_equal(sym, "TOK.OW671B.S.2027-03");
  assert_int_equal(hg_exchange_instrument_symbol(f->ex, 211, sym), 0);
  assert_string_equal(sym, "TOK.OW671B.S.2028-02");
  /* A token group's contract only in the TOK form, a GPU group's never. */
  list_symbol(f, "OW671B.S.2027-03", 300);
  assert_int_equal(f->ev[0].type, HG_XEV_REJECTED);
  assert_int_equal(f->ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_symbol(f, "TOK.B200.A.2027-03", 301);
  assert_int_equal(f->ev[0].reason, HG_XREJ_INVALID_PARAMS);
  list_symbol(f, "TOK.OW70B.F.2027-03", 302);
  assert_int_equal(f->ev[0].type, HG_XEV_LISTED);

  /* TPX is computed by the exchange from token samples like IGX: graded
   * providers of the class, samples naming it, one COMPUTE_FIXING. */
  int32_t jan14 = dayn("2027-01-14");
  grade_providers(f, "OW671B", "S", jan14 - 10);
  samples_of(f, "OW671B", "S", jan14, 4020000);
  index_day(f, HG_COMMAND_COMPUTE_FIXING, "OW671B", "S", jan14);
  const hg_exchange_event_t *fx = find(f, HG_XEV_FIXING, 0);
  assert_int_equal(fx->status, HG_INDEX_PROVISIONAL);
  hg_index_fixing_t tpx;
  assert_int_equal(hg_exchange_fixing(f->ex, "OW671B", "S", jan14, &tpx), 0);
  assert_int_equal(tpx.value, 4020000);
  assert_int_equal(tpx.tier, 1);

  account(f, 1, 10000000000);
  account(f, 2, 10000000000);
  account(f, 3, 10000000000);
  /* Day 1: A buys 3 from B at 4,000; the DSP is the listing price (the
   * TPX fixing above is PROVISIONAL: tier 4 needs a FINAL one). */
  int32_t d1 = dayn("2027-02-10");
  f->ts = at(d1, 10 * HOUR);
  order(f, 200, 2, HG_SIDE_SELL, 4000, 3);
  order(f, 200, 1, HG_SIDE_BUY, 4000, 3);
  f->ts = at(d1, 16 * HOUR);
  daily(f, d1);
  assert_int_equal(dsp_of(f, 200)->price, 4000);
  /* Day 2: A buys 2 more at 4,005; quotes 4,011 / 4,013 give DSP 4,012. */
  f->ts = at(d1 + 1, 10 * HOUR);
  order(f, 200, 2, HG_SIDE_SELL, 4005, 2);
  order(f, 200, 1, HG_SIDE_BUY, 4005, 2);
  order(f, 200, 3, HG_SIDE_BUY, 4011, 1);
  order(f, 200, 3, HG_SIDE_SELL, 4013, 1);
  f->ts = at(d1 + 1, 16 * HOUR);
  daily(f, d1 + 1);
  assert_int_equal(dsp_of(f, 200)->price, 4012);
  /* 3 x 12 x TV + 2 x 7 x TV */
  assert_int_equal(vm_of(f, 1, 200)->amount, 50000000);
  assert_int_equal(vm_of(f, 2, 200)->amount, -50000000);
  /* 5 x 4,012 x 150,000 */
  assert_int_equal(im_of(f, 1), 3009000000);
  assert_int_equal(im_of(f, 2), 3009000000);

  /* The last trading day, then the month's TPX fixings, then the FSP. */
  int32_t mar1 = dayn("2027-03-01"), mar31 = dayn("2027-03-31");
  f->ts = at(mar31, 16 * HOUR);
  daily(f, mar31);
  assert_int_equal(dsp_of(f, 200)->price, 4012);
  for (int32_t d = mar1; d <= mar31; d++) {
    publish_fixing(f, "OW671B", "S", d, d == mar1 + 16 ? 4020600 : 4020000);
    index_day(f, HG_COMMAND_FINALIZE_FIXING, "OW671B", "S", d);
  }
  int64_t c1 = cash_of(f, 1), c2 = cash_of(f, 2);
  expire(f, 200);
  const hg_exchange_event_t *e = find(f, HG_XEV_EXPIRED, 0);
  assert_int_equal(e->price, 4020);
  int64_t sum = 0;
  for (size_t i = 0; i < f->n; i++) {
    if (f->ev[i].type != HG_XEV_FINAL_SETTLEMENT) continue;
    sum += f->ev[i].amount;
    assert_int_equal(f->ev[i].amount, f->ev[i].account == 1 ? 40000000 : -40000000);
  }
  assert_int_equal(sum, 0);
  assert_int_equal(cash_of(f, 1), c1 + 40000000);
  assert_int_equal(cash_of(f, 2), c2 - 40000000);
  /* The curve rolls in the TOK form. */
  e = find(f, HG_XEV_LISTED, 0);
  assert_int_equal(hg_exchange_instrument_symbol(f->ex, e->instrument_id, sym), 0);
  assert_string_equal(sym, "TOK.OW671B.S.2028-03");
}

/* ------------------------------------------------------------------------ */
/* Property: conservation and replay                                         */
/* ------------------------------------------------------------------------ */

typedef struct gen {
  uint64_t s;
  uint64_t seq;
  int32_t day;       /* current trading day */
  uint32_t step;     /* commands generated today */
  int expired;
} gen_t;

static uint64_t rnd(gen_t *g) {
  g->s ^= g->s << 13;
  g->s ^= g->s >> 7;
  g->s ^= g->s << 17;
  return g->s;
}

#define P_ACCOUNTS 40u
#define P_PER_DAY 120u

/* Days run from 2027-01-25; each day P_PER_DAY commands between 09:00 and
 * 15:59 (the last ones in the DSP window), then fixing and cycle commands.
 * Contracts 1..3 are 2027-02..04 of B200.A; 2027-02 expires after its last
 * day once every fixing is FINAL. */
static hg_command_t gen_next(gen_t *g, int32_t first_day) {
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = ++g->seq;
  if (g->seq == 1) {
    c.ts = at(first_day, 8 * HOUR);
    c.type = HG_COMMAND_LIST_CURVE;
    c.u.curve = (hg_cmd_list_curve_t){.gpu = "B200", .grade = "A", .year = 2027, .month = 2,
                                      .first_instrument_id = 1, .max_orders = 2048,
                                      .max_accounts = 64, .ref_price = 3000};
    return c;
  }
  if (g->seq <= 1 + P_ACCOUNTS) {
    c.ts = at(first_day, 8 * HOUR) + g->seq;
    c.type = HG_COMMAND_ADD_ACCOUNT;
    c.u.add_account = (hg_cmd_add_account_t){(hg_account_t)(g->seq - 1), 1 + (uint32_t)g->seq % 5};
    return c;
  }
  uint32_t s = g->step++;
  if (s < P_PER_DAY) {
    c.ts = at(g->day, 9 * HOUR) + (uint64_t)s * (7 * HOUR / P_PER_DAY) + 1;
    uint64_t r = rnd(g) % 100;
    hg_account_t a = 1 + (hg_account_t)(rnd(g) % P_ACCOUNTS);
    uint32_t inst = 1 + (uint32_t)(rnd(g) % 3);
    if (r < 12) {
      c.type = HG_COMMAND_DEPOSIT;
      c.u.cash = (hg_cmd_cash_t){a, 1 + (int64_t)(rnd(g) % 4000000000)};
    } else if (r < 18) {
      c.type = HG_COMMAND_WITHDRAW;
      c.u.cash = (hg_cmd_cash_t){a, 1 + (int64_t)(rnd(g) % 2000000000)};
    } else if (r < 85) {
      c.type = HG_COMMAND_NEW_ORDER;
      hg_cmd_new_order_t *o = &c.u.new_order;
      o->instrument_id = inst;
      o->account = a;
      o->client_order_id = c.seq;
      o->side = (uint8_t)(rnd(g) % 2);
      o->price = 2970 + (hg_price_t)(rnd(g) % 61);
      o->qty = 1 + (hg_qty_t)(rnd(g) % 8);
      uint64_t k = rnd(g) % 10;
      o->type = k == 0 ? HG_ORD_MARKET : HG_ORD_LIMIT;
      o->tif = k == 0 ? HG_TIF_IOC : k < 3 ? HG_TIF_DAY : k < 4 ? HG_TIF_FOK : HG_TIF_GTC;
      o->stp = (uint8_t)(rnd(g) % 5);
    } else if (r < 92) {
      c.type = HG_COMMAND_CANCEL;
      c.u.cancel = (hg_cmd_cancel_t){inst, a, g->seq - 1 - rnd(g) % 50};
    } else if (r < 97) {
      c.type = HG_COMMAND_REPLACE;
      c.u.replace = (hg_cmd_replace_t){inst, a, g->seq - 1 - rnd(g) % 50,
                                       2970 + (hg_price_t)(rnd(g) % 61),
                                       1 + (hg_qty_t)(rnd(g) % 8)};
    } else {
      c.type = HG_COMMAND_MASS_CANCEL;
      c.u.mass_cancel = (hg_cmd_mass_cancel_t){0, a, HG_SIDES_BOTH};
    }
    return c;
  }
  /* After the trading: the day's fixing, finalizing the day, the cycle. */
  c.ts = at(g->day, 16 * HOUR) + s;
  if (s == P_PER_DAY) {
    c.type = HG_COMMAND_PUBLISH_FIXING;
    c.u.fixing = (hg_cmd_publish_fixing_t){.gpu = "B200", .grade = "A", .day = g->day,
                                           .value = 2900000 + (int64_t)(rnd(g) % 200000),
                                           .source = "vendor"};
  } else if (s == P_PER_DAY + 1) {
    c.type = HG_COMMAND_FINALIZE_FIXING;
    c.u.index_day = (hg_cmd_index_day_t){.gpu = "B200", .grade = "A", .day = g->day};
  } else if (s == P_PER_DAY + 2) {
    c.type = HG_COMMAND_DAILY_SETTLEMENT;
    c.u.daily.day = g->day;
  } else {
    /* Try to expire the February contract every day: refused until its
     * last day has settled and its fixings are final. */
    c.type = HG_COMMAND_EXPIRE;
    c.u.expire.instrument_id = 1;
    g->day++;
    g->step = 0;
  }
  return c;
}

typedef struct prop {
  int64_t deposits, withdrawals;
  uint64_t cycles, expired, vm_events, final_events;
  int64_t day_sum;
} prop_t;

static void check_event(prop_t *p, const hg_exchange_event_t *e) {
  switch (e->type) {
  case HG_XEV_DEPOSIT: p->deposits += e->amount; break;
  case HG_XEV_WITHDRAWAL: p->withdrawals += e->amount; break;
  case HG_XEV_VM: p->day_sum += e->amount; p->vm_events++; break;
  case HG_XEV_FINAL_SETTLEMENT: p->day_sum += e->amount; p->final_events++; break;
  case HG_XEV_CYCLE:
    assert_int_equal(e->amount, 0);
    assert_int_equal(p->day_sum, 0);
    p->cycles++;
    break;
  case HG_XEV_EXPIRED:
    assert_int_equal(p->day_sum, 0);
    p->expired++;
    break;
  default: break;
  }
}

static void conservation(fx_t *f, const prop_t *p) {
  hg_clearing_totals_t t;
  hg_clearing_totals(hg_exchange_clearing(f->ex), &t);
  assert_int_equal(t.deposits, p->deposits);
  assert_int_equal(t.withdrawals, p->withdrawals);
  assert_int_equal(t.balances, p->deposits - p->withdrawals);
  int64_t sum = 0;
  for (hg_account_t a = 1; a <= P_ACCOUNTS; a++) sum += cash_of(f, a);
  assert_int_equal(sum, p->deposits - p->withdrawals);
}

static void run_property(int days, uint8_t hash[32], prop_t *out, uint64_t restore_at) {
  fx_t f;
  memset(&f, 0, sizeof f);
  hg_clearing_config_t ccfg;
  hg_exchange_config_t cfg = config(&ccfg);
  assert_int_equal(hg_exchange_create(&cfg, sink, &f, &f.ex), 0);
  int32_t first = dayn("2027-01-25");
  gen_t g = {.s = 0xC0FFEE1234ull, .day = first};
  prop_t p;
  memset(&p, 0, sizeof p);
  uint64_t n = 1 + P_ACCOUNTS + (uint64_t)days * (P_PER_DAY + 4);
  for (uint64_t i = 0; i < n; i++) {
    hg_command_t c = gen_next(&g, first);
    if (restore_at != 0 && c.seq == restore_at) {
      /* Mid-run: serialize, restore into a fresh exchange, go on there. */
      size_t len = hg_exchange_serialized_size(f.ex);
      uint8_t *blob = malloc(len);
      assert_int_equal(hg_exchange_serialize(f.ex, blob, len, &len), 0);
      uint8_t h1[32], h2[32];
      hg_exchange_hash(f.ex, h1);
      hg_exchange_t *b;
      assert_int_equal(hg_exchange_create(&cfg, sink, &f, &b), 0);
      assert_int_equal(hg_exchange_restore(b, blob, len), 0);
      hg_exchange_hash(b, h2);
      assert_memory_equal(h1, h2, 32);
      hg_exchange_destroy(f.ex);
      f.ex = b;
      free(blob);
    }
    f.n = 0;
    if (i % 2) {
      uint8_t buf[HG_COMMAND_MAX_ENCODED];
      size_t len;
      assert_int_equal(hg_command_encode(&c, buf, sizeof buf, &len), 0);
      assert_int_equal(hg_command_decode(buf, len, &c), 0);
    }
    assert_int_equal(hg_exchange_apply(f.ex, &c), 0);
    for (size_t k = 0; k < f.n; k++) check_event(&p, &f.ev[k]);
    if (c.type == HG_COMMAND_DAILY_SETTLEMENT || c.type == HG_COMMAND_EXPIRE) {
      p.day_sum = 0;
      conservation(&f, &p);
    }
  }
  conservation(&f, &p);
  hg_exchange_hash(f.ex, hash);
  *out = p;
  hg_exchange_destroy(f.ex);
  free(f.ev);
}

static void test_property_conservation_and_replay(void **state) {
  (void)state;
  /* 2027-01-25 + 40 days reaches mid-March: February expires on 03-01. */
  const int days = 40;
  uint8_t h1[32], h2[32];
  prop_t p1, p2;
  run_property(days, h1, &p1, 0);
  assert_true(p1.cycles == (uint64_t)days);
  assert_int_equal(p1.expired, 1);
  assert_true(p1.vm_events > 100);
  assert_true(p1.final_events > 0);
  assert_true(p1.withdrawals > 0);
  run_property(days, h2, &p2, 1 + P_ACCOUNTS + 17 * (P_PER_DAY + 4) + 55);
  assert_memory_equal(h1, h2, 32);
  assert_int_equal(p1.deposits, p2.deposits);
  assert_int_equal(p1.vm_events, p2.vm_events);
}

/* ------------------------------------------------------------------------ */
/* The clearing guarantee (settlement/CONTRACT.md 4.6, 4.7, example 6.8)     */
/* ------------------------------------------------------------------------ */

static void mark_cmd(fx_t *f) {
  hg_command_t c = mk(f, HG_COMMAND_MARK);
  run(f, &c);
}

static const hg_exchange_event_t *call_of(fx_t *f, hg_account_t a) {
  for (size_t i = 0; i < f->n; i++)
    if (f->ev[i].type == HG_XEV_MARGIN_CALL && f->ev[i].account == a) return &f->ev[i];
  return NULL;
}

/* Producer 1 short 20 at DSP 2,000 with 7,000 USD; a mark at 2,100 calls it
 * (reduce only), a mark at 2,150 liquidates it: its resting order is
 * cancelled and a buy of 10 fills at 2,151 against the provider (3), the
 * fee going to the fund; the replay of every command gives the same hash. */
static void test_mark_call_and_liquidation(void **state) {
  fx_t *f = *state;
  int32_t d = dayn("2027-01-04");
  f->ts = at(d, 9 * HOUR);
  curve(f, "B200", "A", 2027, 3, 1, 2000);
  account(f, 1, 7000 * (int64_t)TV);
  account(f, 2, 1000000 * (int64_t)TV);
  account(f, 3, 1000000 * (int64_t)TV);
  hg_command_t fd = mk(f, HG_COMMAND_FUND_DEPOSIT);
  fd.u.fund.amount = 5 * (int64_t)TV;
  run(f, &fd);
  assert_int_equal(f->ev[0].type, HG_XEV_CASH);
  assert_int_equal(f->ev[0].account, HG_CLR_FUND_ACCOUNT);
  assert_int_equal(f->ev[0].kind, HG_LEDGER_FUND_DEPOSIT);
  assert_int_equal(f->ev[0].balance, 5 * (int64_t)TV);
  fd = mk(f, HG_COMMAND_FUND_DEPOSIT);
  fd.u.fund.amount = 0;
  run(f, &fd);
  assert_int_equal(f->ev[0].type, HG_XEV_REJECTED);
  assert_int_equal(f->ev[0].reason, HG_XREJ_INVALID_AMOUNT);
  f->ts = at(d, 10 * HOUR);
  order(f, 1, 2, HG_SIDE_BUY, 2000, 20);
  order(f, 1, 1, HG_SIDE_SELL, 2000, 20);
  order(f, 1, 1, HG_SIDE_SELL, 2300, 1); /* rests; IM 21 x 300,000,000 <= 7,000 USD */
  expect_accepted(f);
  f->ts = at(d, 16 * HOUR);
  daily(f, d);
  assert_int_equal(dsp_of(f, 1)->price, 2000);
  f->ts = at(d + 1, 10 * HOUR);
  order(f, 1, 3, HG_SIDE_BUY, 2099, 5);
  order(f, 1, 3, HG_SIDE_SELL, 2101, 1);
  mark_cmd(f);
  const hg_exchange_event_t *m = find(f, HG_XEV_MARK, 0);
  assert_int_equal(m->instrument_id, 1);
  assert_int_equal(m->price, 2100);
  const hg_exchange_event_t *call = call_of(f, 1);
  assert_non_null(call);
  assert_int_equal(call->status, HG_CLR_CALLED);
  assert_int_equal(call->amount, 1300000000);
  assert_int_equal(call->balance, 5000000000);
  assert_int_equal(call->margin, 6300000000);
  assert_int_equal(call->lo, 4725000000);
  assert_null(call_of(f, 2));
  assert_int_equal(count(f, HG_XEV_BOOK), 0); /* called, not liquidating */
  /* a called account may only reduce: a sell is refused with the figures */
  order(f, 1, 1, HG_SIDE_SELL, 2100, 1);
  const hg_exchange_event_t *r = expect_order_reject(f, HG_CLR_REJ_MARGIN_CALL);
  assert_int_equal(r->balance, 5000000000);
  assert_int_equal(r->margin, 6300000000);
  assert_int_equal(r->hi, 1300000000);
  cash(f, HG_COMMAND_WITHDRAW, 1, 1);
  assert_int_equal(f->ev[0].type, HG_XEV_REJECTED);
  assert_int_equal(f->ev[0].reason, HG_XREJ_INSUFFICIENT_FUNDS);
  /* the market moves: the ask is taken, the provider quotes 2,149 / 2,151 */
  order(f, 1, 2, HG_SIDE_BUY, 2101, 1);
  order(f, 1, 3, HG_SIDE_BUY, 2149, 5);
  order(f, 1, 3, HG_SIDE_SELL, 2151, 30);
  mark_cmd(f);
  assert_int_equal(find(f, HG_XEV_MARK, 0)->price, 2150);
  call = call_of(f, 1);
  assert_non_null(call);
  assert_int_equal(call->status, HG_CLR_LIQUIDATING);
  assert_int_equal(call->kind, HG_CLR_LIQ_MM);
  assert_int_equal(call->amount, 2450000000);
  assert_int_equal(call->balance, 4000000000);
  assert_int_equal(call->lo, 4837500000);
  /* the resting sell is cancelled, then the slice fills 10 at 2,151 */
  size_t i = 0;
  for (; i < f->n && f->ev[i].type != HG_XEV_BOOK; i++) {}
  assert_true(i < f->n);
  assert_int_equal(f->ev[i].book.type, HG_EV_CANCELLED);
  assert_int_equal(f->ev[i].book.reason, HG_XCXL_LIQUIDATION);
  assert_int_equal(f->ev[i].book.account, 1);
  int fills = 0;
  for (; i < f->n; i++) {
    const hg_exchange_event_t *e = &f->ev[i];
    if (e->type == HG_XEV_BOOK && e->book.order_id == HG_XLIQ_OID(f->seq, 0)) {
      assert_int_equal(e->kind, HG_XBOOK_LIQUIDATION);
      if (e->book.type == HG_EV_FILL) {
        fills++;
        assert_int_equal(e->book.qty, 10);
        assert_int_equal(e->book.price, 2151);
        /* the fee follows: ceil(10 x 2,151 x 1,000,000 x 50 / 10,000) */
        assert_int_equal(f->ev[i + 1].type, HG_XEV_CASH);
        assert_int_equal(f->ev[i + 1].kind, HG_LEDGER_LIQ_FEE);
        assert_int_equal(f->ev[i + 1].account, 1);
        assert_int_equal(f->ev[i + 1].amount, -107550000);
        assert_int_equal(f->ev[i + 2].account, HG_CLR_FUND_ACCOUNT);
        assert_int_equal(f->ev[i + 2].amount, 107550000);
      }
    }
  }
  assert_int_equal(fills, 1);
  const hg_exchange_event_t *round = find(f, HG_XEV_MARK_ROUND, 0);
  assert_int_equal(round->qty, 1);
  assert_int_equal(round->margin, 1);
  assert_int_equal(round->hi, 0); /* E 3,882.45 USD >= IM 3,225 USD: good standing */
  assert_int_equal(round->balance, 5 * (int64_t)TV + 107550000);
  assert_int_equal(cash_of(f, 1), 7000000000 - 107550000);
  hg_clearing_totals_t t;
  hg_clearing_totals(hg_exchange_clearing(f->ex), &t);
  assert_int_equal(t.balances + t.fund, t.deposits - t.withdrawals - t.fees);
  /* a fresh exchange replaying every command reaches the same state */
  uint8_t h1[32], h2[32];
  hg_exchange_hash(f->ex, h1);
  size_t len = hg_exchange_serialized_size(f->ex);
  uint8_t *blob = malloc(len);
  assert_int_equal(hg_exchange_serialize(f->ex, blob, len, &len), 0);
  hg_clearing_config_t ccfg;
  hg_exchange_config_t cfg = config(&ccfg);
  hg_exchange_t *b;
  assert_int_equal(hg_exchange_create(&cfg, sink, f, &b), 0);
  assert_int_equal(hg_exchange_restore(b, blob, len), 0);
  hg_exchange_hash(b, h2);
  assert_memory_equal(h1, h2, 32);
  hg_exchange_destroy(b);
  free(blob);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_margin_reject_carries_the_numbers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_band_follows_the_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(test_calendar_spread_credit_decides_acceptance, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_position_limit_reject, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delivery_month_rate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delivery_month_margin_without_cycle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delivery_month_limit_without_cycle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_delivery_month_relisted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resting_orders_at_month_start, setup, teardown),
      cmocka_unit_test_setup_teardown(test_listing_price_ranks_after_the_index, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reference_events, setup, teardown),
      cmocka_unit_test_setup_teardown(test_daily_cycle_vm_and_every_tier, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fixing_compute_restate_finalize, setup, teardown),
      cmocka_unit_test_setup_teardown(test_expiry_blocked_then_final_settlement, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mark_call_and_liquidation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_token_contract_vm_im_fsp, setup, teardown),
      cmocka_unit_test(test_property_conservation_and_replay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
