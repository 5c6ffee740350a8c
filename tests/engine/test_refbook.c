/*
 * The reference book on hand-computed scenarios: one or more cases per rule of
 * hourglass/book.h, each with the full expected event stream written out, so
 * that the oracle of the differential test is itself checked against the text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/error.h"
#include "refbook.h"

#define INSTR 7u
#define MAX_EV 64

typedef struct capture {
  hg_book_event_t ev[MAX_EV];
  size_t n;
} capture_t;

static void sink(void *ctx, const hg_book_event_t *ev) {
  capture_t *c = ctx;
  assert_true(c->n < MAX_EV);
  c->ev[c->n++] = *ev;
}

typedef struct fixture {
  ref_book_t *book;
  capture_t cap;
  uint64_t ts;
} fixture_t;

static hg_book_params_t default_params(void) {
  hg_book_params_t p;
  memset(&p, 0, sizeof p);
  p.instrument_id = INSTR;
  p.tick_size = 1000;
  p.contract_unit = 1000;
  p.min_price = 1;
  p.max_price = 100000;
  p.max_order_qty = 1000;
  p.max_orders = 100;
  p.max_accounts = 10;
  return p;
}

static void open_book(fixture_t *f, const hg_book_params_t *p) {
  memset(f, 0, sizeof *f);
  assert_int_equal(ref_book_create(p, sink, &f->cap, &f->book), 0);
}

static void print_event(const char *tag, const hg_book_event_t *e) {
  fprintf(stderr,
          "  %s type=%u side=%u cmd=%u kept=%u reason=%u instr=%u acct=%u macct=%u oid=%llu "
          "clid=%llu moid=%llu mclid=%llu px=%lld qty=%lld leaves=%lld mleaves=%lld ts=%llu\n",
          tag, e->type, e->side, e->cmd, e->priority_kept, e->reason, e->instrument_id,
          e->account, e->maker_account, (unsigned long long)e->order_id,
          (unsigned long long)e->client_order_id, (unsigned long long)e->maker_order_id,
          (unsigned long long)e->maker_client_order_id, (long long)e->price, (long long)e->qty,
          (long long)e->leaves, (long long)e->maker_leaves, (unsigned long long)e->ts);
}

/* Compares the captured events with exp[] (instrument and ts filled in here),
 * then clears the capture. */
static void expect(fixture_t *f, hg_book_event_t *exp, size_t n) {
  int ok = f->cap.n == n;
  for (size_t i = 0; i < n; i++) {
    exp[i].instrument_id = INSTR;
    exp[i].ts = f->ts;
    if (ok && memcmp(&exp[i], &f->cap.ev[i], sizeof exp[i]) != 0) ok = 0;
  }
  if (!ok) {
    fprintf(stderr, "event mismatch at ts %llu: expected %zu, got %zu\n",
            (unsigned long long)f->ts, n, f->cap.n);
    for (size_t i = 0; i < n; i++) print_event("exp", &exp[i]);
    for (size_t i = 0; i < f->cap.n; i++) print_event("got", &f->cap.ev[i]);
    fail();
  }
  f->cap.n = 0;
}
#define EXPECT(f, ...)                                                  \
  do {                                                                  \
    hg_book_event_t exp_[] = {__VA_ARGS__};                             \
    expect((f), exp_, sizeof exp_ / sizeof exp_[0]);                    \
  } while (0)
#define EXPECT_NONE(f) assert_int_equal((f)->cap.n, 0)

/* Submits and leaves the events in the capture. */
static void submit(fixture_t *f, hg_oid_t id, hg_account_t acct, int side, hg_price_t px,
                   hg_qty_t qty, int tif, int stp) {
  hg_order_new_t o;
  memset(&o, 0, sizeof o);
  o.order_id = id;
  o.client_order_id = id + 1000;
  o.account = acct;
  o.price = px;
  o.qty = qty;
  o.side = (uint8_t)side;
  o.type = HG_ORD_LIMIT;
  o.tif = (uint8_t)tif;
  o.stp = (uint8_t)stp;
  o.ts = ++f->ts;
  ref_book_submit(f->book, &o);
}

/* Submits a GTC limit that must rest without trading; drops its events. */
static void rest(fixture_t *f, hg_oid_t id, hg_account_t acct, int side, hg_price_t px,
                 hg_qty_t qty) {
  submit(f, id, acct, side, px, qty, HG_TIF_GTC, HG_STP_DEFAULT);
  assert_int_equal(f->cap.n, 2);
  assert_int_equal(f->cap.ev[0].type, HG_EV_ACCEPTED);
  assert_int_equal(f->cap.ev[1].type, HG_EV_LEVEL);
  f->cap.n = 0;
}

#define ACC(id, acct, sd, px, q)                                                          \
  {.type = HG_EV_ACCEPTED, .order_id = (id), .client_order_id = (id) + 1000,              \
   .account = (acct), .side = (sd), .price = (px), .qty = (q), .leaves = (q)}
#define FILL(id, acct, mid, macct, sd, px, q, lv, mlv)                                    \
  {.type = HG_EV_FILL, .order_id = (id), .client_order_id = (id) + 1000, .account = (acct), \
   .maker_order_id = (mid), .maker_client_order_id = (mid) + 1000, .maker_account = (macct), \
   .side = (sd), .price = (px), .qty = (q), .leaves = (lv), .maker_leaves = (mlv)}
#define LVL(sd, px, q) {.type = HG_EV_LEVEL, .side = (sd), .price = (px), .qty = (q)}
#define CXL(id, acct, sd, px, q, why)                                                     \
  {.type = HG_EV_CANCELLED, .reason = (why), .order_id = (id), .client_order_id = (id) + 1000, \
   .account = (acct), .side = (sd), .price = (px), .qty = (q)}
#define REJ(c, why, id, clid, acct, sd, px, q)                                            \
  {.type = HG_EV_REJECTED, .cmd = (c), .reason = (why), .order_id = (id),                 \
   .client_order_id = (clid), .account = (acct), .side = (sd), .price = (px), .qty = (q)}
#define REPL(id, acct, sd, px, q, kept)                                                   \
  {.type = HG_EV_REPLACED, .order_id = (id), .client_order_id = (id) + 1000,              \
   .account = (acct), .side = (sd), .price = (px), .qty = (q), .leaves = (q),             \
   .priority_kept = (kept)}

#define B HG_SIDE_BUY
#define S HG_SIDE_SELL

static void sweep_two_levels_fifo(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  open_book(&f, &p);
  rest(&f, 1, 1, S, 100, 4);
  rest(&f, 2, 2, S, 100, 6);
  rest(&f, 3, 3, S, 101, 5);
  rest(&f, 4, 4, S, 102, 5);
  /* Buy 12 @ 101: 4 from #1, 6 from #2 (FIFO), 2 from #3; #4 is beyond the limit. */
  submit(&f, 5, 5, B, 101, 12, HG_TIF_GTC, HG_STP_DEFAULT);
  EXPECT(&f, ACC(5, 5, B, 101, 12), FILL(5, 5, 1, 1, B, 100, 4, 8, 0),
         FILL(5, 5, 2, 2, B, 100, 6, 2, 0), LVL(S, 100, 0), FILL(5, 5, 3, 3, B, 101, 2, 0, 3),
         LVL(S, 101, 3));
  assert_int_equal(ref_book_order_count(f.book), 2);
  hg_price_t px;
  hg_qty_t q;
  assert_int_equal(ref_book_best(f.book, S, &px, &q), 0);
  assert_int_equal(px, 101);
  assert_int_equal(q, 3);
  assert_int_equal(ref_book_best(f.book, B, &px, &q), HG_ENOTFOUND);

  /* A buy GTC larger than the book rests its remainder at its own limit. */
  submit(&f, 6, 5, B, 103, 10, HG_TIF_GTC, HG_STP_DEFAULT);
  EXPECT(&f, ACC(6, 5, B, 103, 10), FILL(6, 5, 3, 3, B, 101, 3, 7, 0), LVL(S, 101, 0),
         FILL(6, 5, 4, 4, B, 102, 5, 2, 0), LVL(S, 102, 0), LVL(B, 103, 2));
  assert_int_equal(ref_book_qty_at(f.book, B, 103), 2);

  /* IOC: remainder cancelled. */
  rest(&f, 7, 1, S, 104, 1);
  submit(&f, 8, 2, S, 103, 5, HG_TIF_IOC, HG_STP_DEFAULT);
  EXPECT(&f, ACC(8, 2, S, 103, 5), FILL(8, 2, 6, 5, S, 103, 2, 3, 0), LVL(B, 103, 0),
         CXL(8, 2, S, 103, 3, HG_CXL_IOC_REMAINDER));
  ref_book_destroy(f.book);
}

static void self_trade_modes(void **state) {
  (void)state;
  static const int modes[] = {HG_STP_DEFAULT, HG_STP_CANCEL_INCOMING, HG_STP_CANCEL_RESTING,
                              HG_STP_CANCEL_BOTH, HG_STP_NONE};
  for (size_t m = 0; m < 5; m++) {
    fixture_t f;
    hg_book_params_t p = default_params();
    open_book(&f, &p);
    rest(&f, 1, 1, S, 100, 5);
    rest(&f, 2, 2, S, 100, 5);
    submit(&f, 3, 1, B, 100, 8, HG_TIF_GTC, modes[m]);
    switch (modes[m]) {
    case HG_STP_DEFAULT:
    case HG_STP_CANCEL_INCOMING:
      EXPECT(&f, ACC(3, 1, B, 100, 8), LVL(S, 100, 10),
             CXL(3, 1, B, 100, 8, HG_CXL_SELF_TRADE));
      assert_int_equal(ref_book_order_count(f.book), 2);
      break;
    case HG_STP_CANCEL_RESTING:
      EXPECT(&f, ACC(3, 1, B, 100, 8), CXL(1, 1, S, 100, 5, HG_CXL_SELF_TRADE),
             FILL(3, 1, 2, 2, B, 100, 5, 3, 0), LVL(S, 100, 0), LVL(B, 100, 3));
      assert_int_equal(ref_book_order_count(f.book), 1);
      break;
    case HG_STP_CANCEL_BOTH:
      EXPECT(&f, ACC(3, 1, B, 100, 8), CXL(1, 1, S, 100, 5, HG_CXL_SELF_TRADE),
             LVL(S, 100, 5), CXL(3, 1, B, 100, 8, HG_CXL_SELF_TRADE));
      assert_int_equal(ref_book_order_count(f.book), 1);
      break;
    case HG_STP_NONE:
      EXPECT(&f, ACC(3, 1, B, 100, 8), FILL(3, 1, 1, 1, B, 100, 5, 3, 0),
             FILL(3, 1, 2, 2, B, 100, 3, 0, 2), LVL(S, 100, 2));
      break;
    }
    ref_book_destroy(f.book);
  }
}

static void self_trade_by_group_and_book_default(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  p.default_stp = HG_STP_CANCEL_RESTING;
  open_book(&f, &p);
  hg_order_new_t o;
  memset(&o, 0, sizeof o);
  o.order_id = 1;
  o.client_order_id = 1001;
  o.account = 1;
  o.smp_group = 9;
  o.price = 100;
  o.qty = 5;
  o.side = S;
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  f.cap.n = 0;
  rest(&f, 2, 2, S, 100, 5); /* group 0: never matches a group */
  /* Account 3 in group 9 matches #1 by group; book default is CANCEL_RESTING. */
  o.order_id = 3;
  o.client_order_id = 1003;
  o.account = 3;
  o.side = B;
  o.qty = 2;
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  EXPECT(&f, ACC(3, 3, B, 100, 2), CXL(1, 1, S, 100, 5, HG_CXL_SELF_TRADE),
         FILL(3, 3, 2, 2, B, 100, 2, 0, 3), LVL(S, 100, 3));
  ref_book_destroy(f.book);
}

static void fill_or_kill(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  open_book(&f, &p);
  rest(&f, 1, 1, S, 100, 5);
  rest(&f, 2, 2, S, 101, 5);
  rest(&f, 3, 3, S, 102, 5);
  submit(&f, 4, 4, B, 101, 11, HG_TIF_FOK, HG_STP_DEFAULT);
  EXPECT(&f, ACC(4, 4, B, 101, 11), CXL(4, 4, B, 101, 11, HG_CXL_FOK_UNFILLED));
  assert_int_equal(ref_book_order_count(f.book), 3);
  /* Own order #2 in the way: under CANCEL_RESTING it is skipped when counting
   * (5 + 5 from #1 and #3 = 10 available). */
  submit(&f, 5, 2, B, 102, 11, HG_TIF_FOK, HG_STP_CANCEL_RESTING);
  EXPECT(&f, ACC(5, 2, B, 102, 11), CXL(5, 2, B, 102, 11, HG_CXL_FOK_UNFILLED));
  submit(&f, 6, 2, B, 102, 10, HG_TIF_FOK, HG_STP_CANCEL_RESTING);
  EXPECT(&f, ACC(6, 2, B, 102, 10), FILL(6, 2, 1, 1, B, 100, 5, 5, 0), LVL(S, 100, 0),
         CXL(2, 2, S, 101, 5, HG_CXL_SELF_TRADE), LVL(S, 101, 0),
         FILL(6, 2, 3, 3, B, 102, 5, 0, 0), LVL(S, 102, 0));
  assert_int_equal(ref_book_order_count(f.book), 0);
  /* Under CANCEL_INCOMING the count stops at the own order. */
  rest(&f, 7, 1, S, 100, 5);
  rest(&f, 8, 2, S, 100, 5);
  rest(&f, 9, 3, S, 100, 5);
  submit(&f, 10, 2, B, 100, 6, HG_TIF_FOK, HG_STP_CANCEL_INCOMING);
  EXPECT(&f, ACC(10, 2, B, 100, 6), CXL(10, 2, B, 100, 6, HG_CXL_FOK_UNFILLED));
  submit(&f, 11, 2, B, 100, 5, HG_TIF_FOK, HG_STP_CANCEL_INCOMING);
  EXPECT(&f, ACC(11, 2, B, 100, 5), FILL(11, 2, 7, 1, B, 100, 5, 0, 0), LVL(S, 100, 10));
  /* Under NONE the own order counts and trades. */
  submit(&f, 12, 2, B, 100, 10, HG_TIF_FOK, HG_STP_NONE);
  EXPECT(&f, ACC(12, 2, B, 100, 10), FILL(12, 2, 8, 2, B, 100, 5, 5, 0),
         FILL(12, 2, 9, 3, B, 100, 5, 0, 0), LVL(S, 100, 0));
  ref_book_destroy(f.book);
}

static void market_orders_stop_at_their_cap(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  open_book(&f, &p);
  rest(&f, 1, 1, S, 1048, 5);
  rest(&f, 2, 1, S, 1049, 5);
  hg_order_new_t o;
  memset(&o, 0, sizeof o);
  o.order_id = 3;
  o.client_order_id = 1003;
  o.account = 2;
  o.qty = 7;
  o.side = B;
  o.type = HG_ORD_MARKET;
  o.tif = HG_TIF_IOC;
  o.price = 1048; /* the cap: 1049 is beyond it */
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  EXPECT(&f, ACC(3, 2, B, 1048, 7), FILL(3, 2, 1, 1, B, 1048, 5, 2, 0), LVL(S, 1048, 0),
         CXL(3, 2, B, 1048, 2, HG_CXL_IOC_REMAINDER));
  o.order_id = 4;
  o.client_order_id = 1004;
  o.side = S;
  o.tif = HG_TIF_FOK;
  o.price = 950;
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  EXPECT(&f, ACC(4, 2, S, 950, 7), CXL(4, 2, S, 950, 7, HG_CXL_FOK_UNFILLED));
  /* No cap: limits are max_price / min_price. */
  o.order_id = 5;
  o.client_order_id = 1005;
  o.side = B;
  o.tif = HG_TIF_IOC;
  o.qty = 1;
  o.price = 0;
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  EXPECT(&f, ACC(5, 2, B, 100000, 1), FILL(5, 2, 2, 1, B, 1049, 1, 0, 4), LVL(S, 1049, 4));
  /* A cap outside the range clamps to it. */
  o.order_id = 6;
  o.client_order_id = 1006;
  o.side = S;
  o.price = -5;
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  EXPECT(&f, ACC(6, 2, S, 1, 1), CXL(6, 2, S, 1, 1, HG_CXL_IOC_REMAINDER));
  o.order_id = 7;
  o.client_order_id = 1007;
  o.side = B;
  o.price = 200000;
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  EXPECT(&f, ACC(7, 2, B, 100000, 1), FILL(7, 2, 2, 1, B, 1049, 1, 0, 3), LVL(S, 1049, 3));
  ref_book_destroy(f.book);
}

static void validation_order(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  p.max_orders = 3;
  p.max_accounts = 2;
  open_book(&f, &p);
  rest(&f, 1, 1, S, 1010, 5);
  hg_order_new_t o, base;
  memset(&base, 0, sizeof base);
  base.order_id = 50;
  base.client_order_id = 1050;
  base.account = 1;
  base.price = 1000;
  base.qty = 5;
  base.side = B;

#define TRY(mutate, why)                                                                    \
  do {                                                                                      \
    o = base;                                                                               \
    mutate;                                                                                 \
    o.ts = ++f.ts;                                                                          \
    ref_book_submit(f.book, &o);                                                            \
    EXPECT(&f, REJ(HG_CMD_NEW, why, o.order_id, o.client_order_id, o.account, o.side,       \
                   o.price, o.qty));                                                        \
  } while (0)
  TRY((o.stp = 5, o.qty = 0), HG_REJ_INVALID_FIELD);
  TRY((o.side = 2), HG_REJ_INVALID_FIELD);
  TRY((o.tif = 4), HG_REJ_INVALID_FIELD);
  TRY((o.type = 2), HG_REJ_INVALID_FIELD);
  TRY((o.post_only = 2, o.type = HG_ORD_MARKET), HG_REJ_INVALID_FIELD);
  TRY((o.type = HG_ORD_MARKET, o.tif = HG_TIF_DAY, o.order_id = 0), HG_REJ_INVALID_TIF);
  TRY((o.post_only = 1, o.tif = HG_TIF_IOC), HG_REJ_INVALID_TIF);
  TRY((o.order_id = 0, o.qty = 0), HG_REJ_INVALID_FIELD);
  TRY((o.qty = 0, o.price = 0), HG_REJ_INVALID_QTY);
  TRY((o.qty = -3), HG_REJ_INVALID_QTY);
  TRY((o.qty = 1001, o.price = 0), HG_REJ_QTY_TOO_LARGE);
  TRY((o.price = 0), HG_REJ_PRICE_OUT_OF_RANGE);
  TRY((o.price = 100001), HG_REJ_PRICE_OUT_OF_RANGE);
  TRY((o.price = 1050, o.order_id = 1), HG_REJ_DUPLICATE_ORDER_ID);
  TRY((o.client_order_id = 1001, o.post_only = 1, o.price = 1010), HG_REJ_DUPLICATE_CLORDID);
  TRY((o.post_only = 1, o.price = 1010), HG_REJ_POST_ONLY_WOULD_CROSS);
  /* The same client order id under another account is fine. */
  o = base;
  o.order_id = 60;
  o.client_order_id = 1001;
  o.account = 2;
  o.price = 950;
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  assert_int_equal(f.cap.n, 2);
  f.cap.n = 0;
  /* Two accounts live (1, 2): a third account's GTC is full, its IOC is not. */
  TRY((o.account = 3), HG_REJ_BOOK_FULL);
  o = base;
  o.account = 3;
  o.tif = HG_TIF_IOC;
  o.ts = ++f.ts;
  ref_book_submit(f.book, &o);
  EXPECT(&f, ACC(50, 3, B, 1000, 5), CXL(50, 3, B, 1000, 5, HG_CXL_IOC_REMAINDER));
  rest(&f, 51, 1, B, 990, 1);
  /* Three orders live: even a known account is full. */
  TRY((o.account = 1, o.tif = HG_TIF_DAY), HG_REJ_BOOK_FULL);
  ref_book_cancel(f.book, 51, 1, ++f.ts);
  EXPECT(&f, CXL(51, 1, B, 990, 1, HG_CXL_USER), LVL(B, 990, 0));
  rest(&f, 52, 1, B, 991, 1);
#undef TRY
  ref_book_destroy(f.book);
}

static void cancel_and_unknown(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  open_book(&f, &p);
  rest(&f, 1, 1, B, 100, 5);
  rest(&f, 2, 2, B, 100, 7);
  ref_book_cancel(f.book, 1, 2, ++f.ts); /* owned by account 1 */
  EXPECT(&f, REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 1, 0, 2, 0, 0, 0));
  ref_book_cancel(f.book, 99, 1, ++f.ts);
  EXPECT(&f, REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 99, 0, 1, 0, 0, 0));
  ref_book_cancel(f.book, 1, 1, ++f.ts);
  EXPECT(&f, CXL(1, 1, B, 100, 5, HG_CXL_USER), LVL(B, 100, 7));
  ref_book_cancel(f.book, 1, 1, ++f.ts); /* already gone */
  EXPECT(&f, REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 1, 0, 1, 0, 0, 0));
  ref_book_destroy(f.book);
}

static void replace_rules(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  open_book(&f, &p);
  rest(&f, 1, 1, B, 100, 5);
  rest(&f, 2, 2, B, 100, 5);
  rest(&f, 3, 3, S, 105, 5);
  /* Shrink in place: keeps priority, even "no change". */
  ref_book_replace(f.book, 1, 1, 100, 3, ++f.ts);
  EXPECT(&f, REPL(1, 1, B, 100, 3, 1), LVL(B, 100, 8));
  ref_book_replace(f.book, 1, 1, 100, 3, ++f.ts);
  EXPECT(&f, REPL(1, 1, B, 100, 3, 1), LVL(B, 100, 8));
  /* Rejects leave it as it was. */
  ref_book_replace(f.book, 1, 2, 100, 3, ++f.ts);
  EXPECT(&f, REJ(HG_CMD_REPLACE, HG_REJ_UNKNOWN_ORDER, 1, 0, 2, 0, 100, 3));
  ref_book_replace(f.book, 1, 1, 0, 0, ++f.ts);
  EXPECT(&f, REJ(HG_CMD_REPLACE, HG_REJ_INVALID_QTY, 1, 0, 1, 0, 0, 0));
  ref_book_replace(f.book, 1, 1, 0, 1001, ++f.ts);
  EXPECT(&f, REJ(HG_CMD_REPLACE, HG_REJ_QTY_TOO_LARGE, 1, 0, 1, 0, 0, 1001));
  ref_book_replace(f.book, 1, 1, 0, 3, ++f.ts);
  EXPECT(&f, REJ(HG_CMD_REPLACE, HG_REJ_PRICE_OUT_OF_RANGE, 1, 0, 1, 0, 0, 3));
  /* Growing loses priority: #1 goes behind #2. */
  ref_book_replace(f.book, 1, 1, 100, 4, ++f.ts);
  EXPECT(&f, REPL(1, 1, B, 100, 4, 0), LVL(B, 100, 5), LVL(B, 100, 9));
  submit(&f, 4, 4, S, 100, 6, HG_TIF_IOC, HG_STP_DEFAULT);
  EXPECT(&f, ACC(4, 4, S, 100, 6), FILL(4, 4, 2, 2, S, 100, 5, 1, 0),
         FILL(4, 4, 1, 1, S, 100, 1, 0, 3), LVL(B, 100, 3));
  /* A crossing replace trades as an incoming order and rests the rest. */
  ref_book_replace(f.book, 1, 1, 106, 8, ++f.ts);
  EXPECT(&f, REPL(1, 1, B, 106, 8, 0), LVL(B, 100, 0), FILL(1, 1, 3, 3, B, 105, 5, 3, 0),
         LVL(S, 105, 0), LVL(B, 106, 3));
  assert_int_equal(ref_book_order_count(f.book), 1);
  hg_book_level_t lv[4];
  assert_int_equal(ref_book_depth(f.book, B, lv, 4), 1);
  assert_int_equal(lv[0].price, 106);
  assert_int_equal(lv[0].qty, 3);
  assert_int_equal(lv[0].orders, 1);
  ref_book_destroy(f.book);
}

static void mass_cancel_and_expiry_in_time_order(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  open_book(&f, &p);
  rest(&f, 1, 1, B, 100, 1);
  rest(&f, 2, 1, S, 110, 2);
  rest(&f, 3, 2, B, 100, 3);
  rest(&f, 4, 1, B, 99, 4);
  submit(&f, 5, 2, S, 111, 5, HG_TIF_DAY, HG_STP_DEFAULT);
  f.cap.n = 0;
  submit(&f, 6, 1, B, 98, 6, HG_TIF_DAY, HG_STP_DEFAULT);
  f.cap.n = 0;
  /* #1 re-entered by a replace now counts after #6. */
  ref_book_replace(f.book, 1, 1, 100, 7, ++f.ts);
  f.cap.n = 0;
  assert_int_equal(ref_book_mass_cancel(f.book, 1, HG_SIDES_BUY, ++f.ts), 3);
  EXPECT(&f, CXL(4, 1, B, 99, 4, HG_CXL_MASS_CANCEL), LVL(B, 99, 0),
         CXL(6, 1, B, 98, 6, HG_CXL_MASS_CANCEL), LVL(B, 98, 0),
         CXL(1, 1, B, 100, 7, HG_CXL_MASS_CANCEL), LVL(B, 100, 3));
  assert_int_equal(ref_book_mass_cancel(f.book, 3, HG_SIDES_BOTH, ++f.ts), 0);
  EXPECT_NONE(&f);
  assert_int_equal(ref_book_mass_cancel(f.book, 2, 3, ++f.ts), 0); /* no such side filter */
  assert_int_equal(ref_book_mass_cancel(f.book, 2, -1, ++f.ts), 0);
  EXPECT_NONE(&f);
  assert_int_equal(ref_book_expire_day(f.book, ++f.ts), 1);
  EXPECT(&f, CXL(5, 2, S, 111, 5, HG_CXL_EXPIRY), LVL(S, 111, 0));
  assert_int_equal(ref_book_mass_cancel(f.book, 1, HG_SIDES_BOTH, ++f.ts), 1);
  EXPECT(&f, CXL(2, 1, S, 110, 2, HG_CXL_MASS_CANCEL), LVL(S, 110, 0));
  assert_int_equal(ref_book_order_count(f.book), 1);
  ref_book_destroy(f.book);
}

static void collect(void *ctx, const hg_book_order_t *o) {
  capture_t *c = ctx; /* reuse: order ids into ev[].order_id */
  c->ev[c->n++].order_id = o->order_id;
}

static void depth_and_foreach(void **state) {
  (void)state;
  fixture_t f;
  hg_book_params_t p = default_params();
  open_book(&f, &p);
  rest(&f, 1, 1, S, 105, 1);
  rest(&f, 2, 1, S, 103, 2);
  rest(&f, 3, 1, S, 105, 4);
  rest(&f, 4, 1, S, 104, 8);
  rest(&f, 5, 1, B, 90, 16);
  hg_book_level_t lv[8];
  assert_int_equal(ref_book_depth(f.book, S, lv, 2), 2);
  assert_int_equal(ref_book_depth(f.book, S, lv, 8), 3);
  assert_int_equal(lv[0].price, 103);
  assert_int_equal(lv[1].price, 104);
  assert_int_equal(lv[2].price, 105);
  assert_int_equal(lv[2].qty, 5);
  assert_int_equal(lv[2].orders, 2);
  assert_int_equal(ref_book_qty_at(f.book, S, 105), 5);
  assert_int_equal(ref_book_qty_at(f.book, B, 105), 0);
  capture_t c;
  memset(&c, 0, sizeof c);
  ref_book_foreach(f.book, collect, &c);
  assert_int_equal(c.n, 5);
  for (size_t i = 0; i < 5; i++) assert_int_equal(c.ev[i].order_id, i + 1);
  ref_book_destroy(f.book);
}

static void create_rejects_bad_params(void **state) {
  (void)state;
  capture_t c;
  ref_book_t *b = NULL;
  hg_book_params_t p = default_params();
  assert_int_equal(ref_book_create(&p, NULL, &c, &b), HG_EINVAL);
  p.min_price = 0;
  assert_int_equal(ref_book_create(&p, sink, &c, &b), HG_EINVAL);
  p = default_params();
  p.max_price = p.min_price + HG_BOOK_MAX_LEVELS;
  assert_int_equal(ref_book_create(&p, sink, &c, &b), HG_EINVAL);
  p = default_params();
  p.max_orders = 0;
  assert_int_equal(ref_book_create(&p, sink, &c, &b), HG_EINVAL);
  p = default_params();
  p.default_stp = 5;
  assert_int_equal(ref_book_create(&p, sink, &c, &b), HG_EINVAL);
  assert_null(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sweep_two_levels_fifo),
      cmocka_unit_test(self_trade_modes),
      cmocka_unit_test(self_trade_by_group_and_book_default),
      cmocka_unit_test(fill_or_kill),
      cmocka_unit_test(market_orders_stop_at_their_cap),
      cmocka_unit_test(validation_order),
      cmocka_unit_test(cancel_and_unknown),
      cmocka_unit_test(replace_rules),
      cmocka_unit_test(mass_cancel_and_expiry_in_time_order),
      cmocka_unit_test(depth_and_foreach),
      cmocka_unit_test(create_rejects_bad_params),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
