/*
 * The order book against hand-computed event sequences, one rule at a time,
 * plus a random-command property test that checks the book's internal
 * invariants after every command.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "book_internal.h"
#include "hourglass/book.h"
#include "hourglass/error.h"

_Static_assert(sizeof(hg_book_event_t) == 96, "event has no hidden padding");

#define INSTR 7u
#define MAX_EVENTS 4096
#define B_ HG_SIDE_BUY
#define S_ HG_SIDE_SELL

/* ------------------------------------------------------------------------ */
/* Recording sink and expectations                                            */

static hg_book_event_t rec[MAX_EVENTS];
static size_t nrec;
static hg_book_t *book;
static uint64_t now;

static void rec_sink(void *ctx, const hg_book_event_t *ev) {
  (void)ctx;
  assert_true(nrec < MAX_EVENTS);
  rec[nrec++] = *ev;
}

static void print_event(const char *tag, const hg_book_event_t *e) {
  fprintf(stderr,
          "%s type=%u side=%u cmd=%u kept=%u reason=%u instr=%u acct=%u macct=%u oid=%" PRIu64
          " clid=%" PRIu64 " moid=%" PRIu64 " mclid=%" PRIu64 " px=%" PRId64 " qty=%" PRId64
          " leaves=%" PRId64 " mleaves=%" PRId64 " ts=%" PRIu64 "\n",
          tag, e->type, e->side, e->cmd, e->priority_kept, e->reason, e->instrument_id,
          e->account, e->maker_account, e->order_id, e->client_order_id, e->maker_order_id,
          e->maker_client_order_id, e->price, e->qty, e->leaves, e->maker_leaves, e->ts);
}

/* Compares the events recorded since the last call with exp[] (ts and
 * instrument filled in here), then checks the book's invariants. */
static void expect_events(const hg_book_event_t *exp, size_t n, const char *file, int line) {
  bool ok = n == nrec;
  for (size_t i = 0; ok && i < n; i++) {
    hg_book_event_t e = exp[i];
    e.ts = now;
    e.instrument_id = INSTR;
    ok = memcmp(&e, &rec[i], sizeof e) == 0;
  }
  if (!ok) {
    fprintf(stderr, "%s:%d: event mismatch (expected %zu, got %zu)\n", file, line, n, nrec);
    for (size_t i = 0; i < n; i++) {
      hg_book_event_t e = exp[i];
      e.ts = now;
      e.instrument_id = INSTR;
      print_event("  want", &e);
    }
    for (size_t i = 0; i < nrec; i++) print_event("  got ", &rec[i]);
  }
  nrec = 0;
  if (!ok) fail_msg("%s:%d: event mismatch", file, line);
  int c = hg_book_check(book);
  if (c != 0) fail_msg("%s:%d: hg_book_check = %d", file, line, c);
}

#define EXPECT(...)                                                    \
  do {                                                                 \
    const hg_book_event_t exp_[] = {__VA_ARGS__};                      \
    expect_events(exp_, sizeof exp_ / sizeof exp_[0], __FILE__, __LINE__); \
  } while (0)
#define EXPECT_NONE() expect_events(NULL, 0, __FILE__, __LINE__)

#define ACC(id, clid, acct, sd, px, q)                                              \
  ((hg_book_event_t){.type = HG_EV_ACCEPTED, .order_id = (id), .client_order_id = (clid), \
                     .account = (acct), .side = (sd), .price = (px), .qty = (q), .leaves = (q)})
#define REJ(c, rsn, id, clid, acct, sd, px, q)                                            \
  ((hg_book_event_t){.type = HG_EV_REJECTED, .cmd = (c), .reason = (rsn), .order_id = (id), \
                     .client_order_id = (clid), .account = (acct), .side = (sd), .price = (px), \
                     .qty = (q)})
#define FILL(sd, id, clid, acct, mid, mclid, macct, px, q, lv, mlv)                       \
  ((hg_book_event_t){.type = HG_EV_FILL, .side = (sd), .order_id = (id),                   \
                     .client_order_id = (clid), .account = (acct), .maker_order_id = (mid), \
                     .maker_client_order_id = (mclid), .maker_account = (macct),            \
                     .price = (px), .qty = (q), .leaves = (lv), .maker_leaves = (mlv)})
#define CXL(rsn, id, clid, acct, sd, px, q)                                                \
  ((hg_book_event_t){.type = HG_EV_CANCELLED, .reason = (rsn), .order_id = (id),           \
                     .client_order_id = (clid), .account = (acct), .side = (sd), .price = (px), \
                     .qty = (q)})
#define REP(id, clid, acct, sd, px, q, kept)                                               \
  ((hg_book_event_t){.type = HG_EV_REPLACED, .order_id = (id), .client_order_id = (clid),  \
                     .account = (acct), .side = (sd), .price = (px), .qty = (q), .leaves = (q), \
                     .priority_kept = (kept)})
#define LVL(sd, px, q) ((hg_book_event_t){.type = HG_EV_LEVEL, .side = (sd), .price = (px), .qty = (q)})

/* Client order id of order n in these tests, unless a test says otherwise. */
#define CL(id) ((uint64_t)(id) + 1000)

static hg_book_params_t default_params(void) {
  hg_book_params_t p;
  memset(&p, 0, sizeof p);
  p.instrument_id = INSTR;
  p.tick_size = 1000;
  p.contract_unit = 1000;
  p.min_price = 1;
  p.max_price = 1000;
  p.max_order_qty = 1000000;
  p.max_orders = 64;
  p.max_accounts = 8;
  return p;
}

static void open_book(const hg_book_params_t *p) {
  if (book != NULL) hg_book_destroy(book);
  book = NULL;
  nrec = 0;
  assert_int_equal(hg_book_create(p, rec_sink, NULL, &book), 0);
}

static int setup(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  open_book(&p);
  now = 0;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  hg_book_destroy(book);
  book = NULL;
  return 0;
}

static hg_order_new_t ord(hg_oid_t id, hg_account_t acct, int side, hg_price_t px, hg_qty_t qty) {
  hg_order_new_t o;
  memset(&o, 0, sizeof o);
  o.order_id = id;
  o.client_order_id = CL(id);
  o.account = acct;
  o.side = (uint8_t)side;
  o.price = px;
  o.qty = qty;
  o.type = HG_ORD_LIMIT;
  o.tif = HG_TIF_GTC;
  return o;
}

static hg_order_new_t with_tif(hg_order_new_t o, int tif) {
  o.tif = (uint8_t)tif;
  return o;
}

static hg_order_new_t with_stp(hg_order_new_t o, int stp) {
  o.stp = (uint8_t)stp;
  return o;
}

static hg_order_new_t market(hg_oid_t id, hg_account_t acct, int side, hg_qty_t qty, int tif) {
  hg_order_new_t o = ord(id, acct, side, 0, qty);
  o.type = HG_ORD_MARKET;
  o.tif = (uint8_t)tif;
  return o;
}

static void submit(hg_order_new_t o) {
  o.ts = ++now;
  hg_book_submit(book, &o);
}

static void cancel(hg_oid_t id, hg_account_t acct) {
  hg_book_cancel(book, id, acct, ++now);
}

static void replace(hg_oid_t id, hg_account_t acct, hg_price_t px, hg_qty_t qty) {
  hg_book_replace(book, id, acct, px, qty, ++now);
}

/* Submits a resting GTC limit and checks the two events it must give. */
static void rest(hg_oid_t id, hg_account_t acct, int side, hg_price_t px, hg_qty_t qty) {
  hg_qty_t before = hg_book_qty_at(book, (hg_side_t)side, px);
  submit(ord(id, acct, side, px, qty));
  EXPECT(ACC(id, CL(id), acct, side, px, qty), LVL(side, px, before + qty));
}

/* A digest of every live order in time order, to prove a command changed nothing. */
static void digest_fn(void *ctx, const hg_book_order_t *o) {
  uint64_t *h = ctx;
  const unsigned char *p = (const unsigned char *)o;
  for (size_t i = 0; i < sizeof *o; i++) *h = (*h ^ p[i]) * 0x100000001b3ull;
}

static uint64_t digest(void) {
  uint64_t h = 0xcbf29ce484222325ull;
  hg_book_foreach(book, digest_fn, &h);
  return h;
}

/* ------------------------------------------------------------------------ */
/* Creation and strings                                                       */

static void sink_noop(void *ctx, const hg_book_event_t *ev) {
  (void)ctx;
  (void)ev;
}

static void create_validates_params(void **state) {
  (void)state;
  hg_book_t *sentinel = (hg_book_t *)(uintptr_t)0x1;
  hg_book_t *b = sentinel;
  hg_book_params_t p = default_params();
  assert_int_equal(hg_book_create(NULL, sink_noop, NULL, &b), HG_EINVAL);
  assert_int_equal(hg_book_create(&p, NULL, NULL, &b), HG_EINVAL);
  assert_int_equal(hg_book_create(&p, sink_noop, NULL, NULL), HG_EINVAL);

  size_t n = 0;
#define CASE(body)                                            \
  do {                                                        \
    hg_book_params_t q = default_params();                    \
    body;                                                     \
    b = sentinel;                                             \
    assert_int_equal(hg_book_create(&q, sink_noop, NULL, &b), HG_EINVAL); \
    assert_ptr_equal(b, sentinel);                            \
    n++;                                                      \
  } while (0)
  CASE(q.min_price = 0);
  CASE(q.min_price = -5);
  CASE((q.min_price = 10, q.max_price = 9));
  CASE((q.min_price = 1, q.max_price = 1 + (hg_price_t)HG_BOOK_MAX_LEVELS));
  CASE(q.max_order_qty = 0);
  CASE(q.max_orders = 0);
  CASE(q.max_accounts = 0);
  CASE(q.default_stp = 5);
  CASE(q.ref_price = -1);
  CASE((q.max_order_qty = INT64_MAX / 2, q.max_orders = 3));
#undef CASE
  assert_int_equal(n, 10);

  /* Edges that are valid: one price, widest range, default_stp NONE. */
  p.min_price = p.max_price = 5;
  assert_int_equal(hg_book_create(&p, sink_noop, NULL, &b), 0);
  hg_book_destroy(b);
  p = default_params();
  p.max_price = p.min_price + (hg_price_t)HG_BOOK_MAX_LEVELS - 1;
  p.default_stp = HG_STP_NONE;
  assert_int_equal(hg_book_create(&p, sink_noop, NULL, &b), 0);
  assert_int_equal(hg_book_params(b)->max_price, p.max_price);
  hg_book_destroy(b);
  hg_book_destroy(NULL);
}

static void reason_strings(void **state) {
  (void)state;
  assert_string_equal(hg_reject_str(HG_REJ_BOOK_FULL), "order book capacity exhausted");
  assert_string_equal(hg_reject_str(HG_REJ_UNKNOWN_ORDER), "unknown order");
  assert_string_equal(hg_reject_str(HG_REJ_NONE), "no reject");
  assert_string_equal(hg_reject_str(HG_REJ_BOOK_LAST_), "unknown");
  assert_string_equal(hg_reject_str(-1), "unknown");
  assert_string_equal(hg_cancel_reason_str(HG_CXL_USER), "cancelled by the owner");
  assert_string_equal(hg_cancel_reason_str(HG_CXL_FOK_UNFILLED),
                      "fill-or-kill order could not be filled in full");
  assert_string_equal(hg_cancel_reason_str(0), "unknown");
  assert_string_equal(hg_cancel_reason_str(HG_CXL_BOOK_LAST_), "unknown");
}

/* ------------------------------------------------------------------------ */
/* Validation                                                                 */

/* Each check in book.h order; every case also fails a later check, so the
 * reason proves which check ran first. Rejects leave the book as it was. */
static void new_order_rejects_in_order(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.min_price = 50;
  p.max_price = 150;
  p.max_order_qty = 100;
  open_book(&p);
  rest(1, 1, B_, 95, 10);
  rest(2, 1, S_, 105, 10);
  uint64_t d = digest();

#define REJECT_NEW(o, reason)                                                     \
  do {                                                                           \
    hg_order_new_t o_ = (o);                                                     \
    submit(o_);                                                                  \
    EXPECT(REJ(HG_CMD_NEW, reason, o_.order_id, o_.client_order_id, o_.account, o_.side, \
               o_.price, o_.qty));                                               \
    assert_int_equal(digest(), d);                                               \
    assert_int_equal(hg_book_order_count(book), 2);                              \
  } while (0)

  hg_order_new_t o;
  o = ord(1, 1, 2, 40, 0); /* bad side, also dup id, bad qty and price */
  REJECT_NEW(o, HG_REJ_INVALID_FIELD);
  o = ord(3, 1, B_, 100, 5), o.type = 2, o.tif = HG_TIF_GTC;
  REJECT_NEW(o, HG_REJ_INVALID_FIELD);
  o = ord(3, 1, B_, 100, 5), o.tif = 4;
  REJECT_NEW(o, HG_REJ_INVALID_FIELD);
  o = ord(3, 1, B_, 100, 5), o.stp = 5;
  REJECT_NEW(o, HG_REJ_INVALID_FIELD);
  o = ord(3, 1, B_, 100, 5), o.post_only = 2;
  REJECT_NEW(o, HG_REJ_INVALID_FIELD);
  o = market(0, 1, B_, 5, HG_TIF_GTC); /* also order id 0 */
  REJECT_NEW(o, HG_REJ_INVALID_TIF);
  o = market(3, 1, S_, 5, HG_TIF_DAY);
  REJECT_NEW(o, HG_REJ_INVALID_TIF);
  o = with_tif(ord(0, 1, B_, 100, 5), HG_TIF_IOC), o.post_only = 1;
  REJECT_NEW(o, HG_REJ_INVALID_TIF);
  o = with_tif(ord(3, 1, B_, 100, 5), HG_TIF_FOK), o.post_only = 1;
  REJECT_NEW(o, HG_REJ_INVALID_TIF);
  o = market(3, 1, B_, 5, HG_TIF_IOC), o.post_only = 1;
  REJECT_NEW(o, HG_REJ_INVALID_TIF);
  o = ord(0, 1, B_, 100, 0); /* id 0 before qty */
  REJECT_NEW(o, HG_REJ_INVALID_FIELD);
  o = ord(3, 1, B_, 40, 0); /* qty before price */
  REJECT_NEW(o, HG_REJ_INVALID_QTY);
  o = ord(3, 1, B_, 40, -5);
  REJECT_NEW(o, HG_REJ_INVALID_QTY);
  o = market(3, 1, B_, -1, HG_TIF_IOC);
  REJECT_NEW(o, HG_REJ_INVALID_QTY);
  o = ord(3, 1, B_, 40, 101);
  REJECT_NEW(o, HG_REJ_QTY_TOO_LARGE);
  o = ord(1, 1, B_, 49, 100); /* range before duplicate id */
  REJECT_NEW(o, HG_REJ_PRICE_OUT_OF_RANGE);
  o = ord(3, 1, S_, 151, 100);
  REJECT_NEW(o, HG_REJ_PRICE_OUT_OF_RANGE);
  o = ord(2, 1, B_, 110, 1), o.client_order_id = CL(1); /* dup id before dup clordid */
  REJECT_NEW(o, HG_REJ_DUPLICATE_ORDER_ID);
  o = with_tif(ord(1, 2, S_, 95, 1), HG_TIF_IOC); /* an IOC may not reuse a live id */
  REJECT_NEW(o, HG_REJ_DUPLICATE_ORDER_ID);
  o = ord(3, 1, B_, 110, 1), o.client_order_id = CL(2), o.post_only = 1;
  REJECT_NEW(o, HG_REJ_DUPLICATE_CLORDID);
  o = ord(3, 1, B_, 105, 1), o.post_only = 1;
  REJECT_NEW(o, HG_REJ_POST_ONLY_WOULD_CROSS);
  o = ord(3, 1, S_, 95, 1), o.post_only = 1;
  REJECT_NEW(o, HG_REJ_POST_ONLY_WOULD_CROSS);
#undef REJECT_NEW

  /* A market order's price is its cap, never a range reject: -99 is none,
   * so the sell goes down to min_price. */
  o = market(3, 1, S_, 1, HG_TIF_IOC);
  o.price = -99;
  submit(o);
  EXPECT(ACC(3, CL(3), 1, S_, 50, 1), LVL(B_, 95, 10),
         CXL(HG_CXL_SELF_TRADE, 3, CL(3), 1, S_, 50, 1));
  rest(4, 2, B_, 90, 1);
  rest(5, 2, S_, 110, 1);
}

static void post_only_rests_when_not_crossing(void **state) {
  (void)state;
  hg_order_new_t o = ord(1, 1, B_, 100, 5);
  o.post_only = 1;
  submit(o); /* empty opposite side */
  EXPECT(ACC(1, CL(1), 1, B_, 100, 5), LVL(B_, 100, 5));
  rest(2, 2, S_, 102, 5);
  o = ord(3, 3, B_, 101, 5);
  o.post_only = 1;
  submit(o);
  EXPECT(ACC(3, CL(3), 3, B_, 101, 5), LVL(B_, 101, 5));
  o = ord(4, 3, S_, 102, 5);
  o.post_only = 1;
  submit(o);
  EXPECT(ACC(4, CL(4), 3, S_, 102, 5), LVL(S_, 102, 10));
  o = ord(5, 3, S_, 101, 5);
  o.post_only = 1;
  submit(o);
  EXPECT(REJ(HG_CMD_NEW, HG_REJ_POST_ONLY_WOULD_CROSS, 5, CL(5), 3, S_, 101, 5));
}

static void book_full_by_orders_and_accounts(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_orders = 4;
  p.max_accounts = 2;
  open_book(&p);
  rest(1, 1, B_, 100, 1);
  rest(2, 2, B_, 99, 1);
  /* A third account cannot rest, DAY included; its IOC needs no slot. */
  submit(ord(3, 3, B_, 98, 1));
  EXPECT(REJ(HG_CMD_NEW, HG_REJ_BOOK_FULL, 3, CL(3), 3, B_, 98, 1));
  submit(with_tif(ord(3, 3, B_, 98, 1), HG_TIF_DAY));
  EXPECT(REJ(HG_CMD_NEW, HG_REJ_BOOK_FULL, 3, CL(3), 3, B_, 98, 1));
  submit(with_tif(ord(3, 3, S_, 100, 1), HG_TIF_IOC));
  EXPECT(ACC(3, CL(3), 3, S_, 100, 1), FILL(S_, 3, CL(3), 3, 1, CL(1), 1, 100, 1, 0, 0),
         LVL(B_, 100, 0));
  /* Account 1 left the book with its last order; its entry is gone. */
  rest(4, 3, B_, 97, 1);
  rest(5, 3, B_, 96, 1);
  rest(6, 2, S_, 110, 1);
  assert_int_equal(hg_book_order_count(book), 4);
  /* Pool full: even an order of a present account that would fill entirely. */
  submit(ord(7, 2, S_, 99, 1));
  EXPECT(REJ(HG_CMD_NEW, HG_REJ_BOOK_FULL, 7, CL(7), 2, S_, 99, 1));
  submit(with_tif(ord(7, 3, S_, 99, 1), HG_TIF_FOK));
  EXPECT(ACC(7, CL(7), 3, S_, 99, 1), FILL(S_, 7, CL(7), 3, 2, CL(2), 2, 99, 1, 0, 0),
         LVL(B_, 99, 0));
  rest(8, 2, S_, 111, 1);
}

static void duplicate_ids_and_reuse(void **state) {
  (void)state;
  hg_order_new_t o = ord(1, 1, B_, 100, 5);
  o.client_order_id = 500;
  submit(o);
  EXPECT(ACC(1, 500, 1, B_, 100, 5), LVL(B_, 100, 5));
  o = ord(2, 1, B_, 99, 5);
  o.client_order_id = 500;
  submit(o);
  EXPECT(REJ(HG_CMD_NEW, HG_REJ_DUPLICATE_CLORDID, 2, 500, 1, B_, 99, 5));
  /* The same clordid under another account is a different key. */
  o.account = 2;
  submit(o);
  EXPECT(ACC(2, 500, 2, B_, 99, 5), LVL(B_, 99, 5));
  cancel(1, 1);
  EXPECT(CXL(HG_CXL_USER, 1, 500, 1, B_, 100, 5), LVL(B_, 100, 0));
  /* Both the order id and the clordid are free again. */
  o = ord(1, 1, B_, 98, 2);
  o.client_order_id = 500;
  submit(o);
  EXPECT(ACC(1, 500, 1, B_, 98, 2), LVL(B_, 98, 2));
  /* An IOC's id is never live, so the same id may come again. */
  submit(with_tif(ord(9, 3, B_, 50, 1), HG_TIF_IOC));
  EXPECT(ACC(9, CL(9), 3, B_, 50, 1), CXL(HG_CXL_IOC_REMAINDER, 9, CL(9), 3, B_, 50, 1));
  submit(with_tif(ord(9, 3, B_, 50, 1), HG_TIF_IOC));
  EXPECT(ACC(9, CL(9), 3, B_, 50, 1), CXL(HG_CXL_IOC_REMAINDER, 9, CL(9), 3, B_, 50, 1));
  /* A fully filled order frees its ids too. */
  submit(ord(10, 4, S_, 99, 5));
  EXPECT(ACC(10, CL(10), 4, S_, 99, 5), FILL(S_, 10, CL(10), 4, 2, 500, 2, 99, 5, 0, 0),
         LVL(B_, 99, 0));
  o = ord(2, 2, B_, 97, 1);
  o.client_order_id = 500;
  submit(o);
  EXPECT(ACC(2, 500, 2, B_, 97, 1), LVL(B_, 97, 1));
}

/* ------------------------------------------------------------------------ */
/* Matching                                                                   */

static void gtc_day_ioc(void **state) {
  (void)state;
  rest(1, 1, S_, 100, 5);
  submit(with_tif(ord(2, 2, S_, 101, 5), HG_TIF_DAY));
  EXPECT(ACC(2, CL(2), 2, S_, 101, 5), LVL(S_, 101, 5));
  submit(with_tif(ord(3, 3, B_, 99, 5), HG_TIF_IOC));
  EXPECT(ACC(3, CL(3), 3, B_, 99, 5), CXL(HG_CXL_IOC_REMAINDER, 3, CL(3), 3, B_, 99, 5));
  submit(with_tif(ord(4, 3, B_, 100, 7), HG_TIF_IOC));
  EXPECT(ACC(4, CL(4), 3, B_, 100, 7), FILL(B_, 4, CL(4), 3, 1, CL(1), 1, 100, 5, 2, 0),
         LVL(S_, 100, 0), CXL(HG_CXL_IOC_REMAINDER, 4, CL(4), 3, B_, 100, 2));
  /* A GTC that crosses trades, then rests its remainder. */
  submit(ord(5, 3, B_, 101, 8));
  EXPECT(ACC(5, CL(5), 3, B_, 101, 8), FILL(B_, 5, CL(5), 3, 2, CL(2), 2, 101, 5, 3, 0),
         LVL(S_, 101, 0), LVL(B_, 101, 3));
  hg_book_order_t bo;
  assert_int_equal(hg_book_find(book, 5, 3, &bo), 0);
  assert_int_equal(bo.qty, 8);
  assert_int_equal(bo.leaves, 3);
  assert_int_equal(bo.ts, now);
  assert_int_equal(hg_book_find(book, 5, 4, &bo), HG_ENOTFOUND);
  assert_int_equal(hg_book_find(book, 4, 3, &bo), HG_ENOTFOUND);
}

static void price_time_priority(void **state) {
  (void)state;
  rest(1, 1, S_, 101, 5);
  rest(2, 2, S_, 100, 3);
  rest(3, 3, S_, 100, 4);
  rest(4, 1, S_, 102, 2);
  rest(5, 2, S_, 100, 1);
  submit(ord(10, 4, B_, 101, 10));
  EXPECT(ACC(10, CL(10), 4, B_, 101, 10),
         FILL(B_, 10, CL(10), 4, 2, CL(2), 2, 100, 3, 7, 0),
         FILL(B_, 10, CL(10), 4, 3, CL(3), 3, 100, 4, 3, 0),
         FILL(B_, 10, CL(10), 4, 5, CL(5), 2, 100, 1, 2, 0), LVL(S_, 100, 0),
         FILL(B_, 10, CL(10), 4, 1, CL(1), 1, 101, 2, 0, 3), LVL(S_, 101, 3));
  hg_price_t px;
  hg_qty_t q;
  assert_int_equal(hg_book_best(book, S_, &px, &q), 0);
  assert_int_equal(px, 101);
  assert_int_equal(q, 3);
  /* A sweep through two levels at a limit better than both, resting the rest. */
  submit(ord(11, 4, B_, 105, 10));
  EXPECT(ACC(11, CL(11), 4, B_, 105, 10),
         FILL(B_, 11, CL(11), 4, 1, CL(1), 1, 101, 3, 7, 0), LVL(S_, 101, 0),
         FILL(B_, 11, CL(11), 4, 4, CL(4), 1, 102, 2, 5, 0), LVL(S_, 102, 0),
         LVL(B_, 105, 5));
  assert_int_equal(hg_book_best(book, S_, &px, &q), HG_ENOTFOUND);
  /* Sell side symmetric: highest bid first, then time. */
  rest(12, 1, B_, 104, 1);
  rest(13, 2, B_, 105, 1);
  submit(ord(14, 3, S_, 104, 8));
  EXPECT(ACC(14, CL(14), 3, S_, 104, 8),
         FILL(S_, 14, CL(14), 3, 11, CL(11), 4, 105, 5, 3, 0),
         FILL(S_, 14, CL(14), 3, 13, CL(13), 2, 105, 1, 2, 0), LVL(B_, 105, 0),
         FILL(S_, 14, CL(14), 3, 12, CL(12), 1, 104, 1, 1, 0), LVL(B_, 104, 0),
         LVL(S_, 104, 1));
}

/* A market order with a cap (the exchange's: the clearing's band edge). */
static hg_order_new_t capped(hg_oid_t id, hg_account_t acct, int side, hg_qty_t qty, int tif,
                             hg_price_t cap) {
  hg_order_new_t o = market(id, acct, side, qty, tif);
  o.price = cap;
  return o;
}

static void market_orders_stop_at_their_cap(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_price = 2000;
  open_book(&p);
  rest(1, 1, S_, 1026, 5);
  rest(2, 1, S_, 1027, 5);
  rest(3, 1, B_, 976, 5);
  rest(4, 1, B_, 975, 5);
  submit(capped(5, 2, B_, 8, HG_TIF_IOC, 1026));
  EXPECT(ACC(5, CL(5), 2, B_, 1026, 8), FILL(B_, 5, CL(5), 2, 1, CL(1), 1, 1026, 5, 3, 0),
         LVL(S_, 1026, 0), CXL(HG_CXL_IOC_REMAINDER, 5, CL(5), 2, B_, 1026, 3));
  submit(capped(6, 2, S_, 8, HG_TIF_IOC, 976));
  EXPECT(ACC(6, CL(6), 2, S_, 976, 8), FILL(S_, 6, CL(6), 2, 3, CL(3), 1, 976, 5, 3, 0),
         LVL(B_, 976, 0), CXL(HG_CXL_IOC_REMAINDER, 6, CL(6), 2, S_, 976, 3));
  /* Market FOK: 5 at 1027 is beyond the cap, so 1 cannot be filled. */
  submit(capped(7, 2, B_, 1, HG_TIF_FOK, 1026));
  EXPECT(ACC(7, CL(7), 2, B_, 1026, 1), CXL(HG_CXL_FOK_UNFILLED, 7, CL(7), 2, B_, 1026, 1));
  /* The book has no band of its own: limits anywhere in range rest. */
  rest(8, 3, S_, 1999, 1);
  rest(9, 3, B_, 2, 1);

  /* A cap outside the range is clamped to it. */
  p.max_price = 1020;
  p.min_price = 980;
  open_book(&p);
  submit(capped(1, 1, B_, 1, HG_TIF_IOC, 5000));
  EXPECT(ACC(1, CL(1), 1, B_, 1020, 1), CXL(HG_CXL_IOC_REMAINDER, 1, CL(1), 1, B_, 1020, 1));
  submit(capped(2, 1, S_, 1, HG_TIF_IOC, 3));
  EXPECT(ACC(2, CL(2), 1, S_, 980, 1), CXL(HG_CXL_IOC_REMAINDER, 2, CL(2), 1, S_, 980, 1));

  /* No cap (0 or negative): max_price / min_price. */
  p = default_params();
  open_book(&p);
  submit(market(1, 1, B_, 1, HG_TIF_IOC));
  EXPECT(ACC(1, CL(1), 1, B_, 1000, 1), CXL(HG_CXL_IOC_REMAINDER, 1, CL(1), 1, B_, 1000, 1));
  submit(capped(2, 1, S_, 1, HG_TIF_IOC, -7));
  EXPECT(ACC(2, CL(2), 1, S_, 1, 1), CXL(HG_CXL_IOC_REMAINDER, 2, CL(2), 1, S_, 1, 1));
}

static void fok_fill_or_kill(void **state) {
  (void)state;
  rest(1, 1, S_, 100, 3);
  rest(2, 2, S_, 101, 4);
  uint64_t d = digest();
  submit(with_tif(ord(3, 3, B_, 101, 8), HG_TIF_FOK));
  EXPECT(ACC(3, CL(3), 3, B_, 101, 8), CXL(HG_CXL_FOK_UNFILLED, 3, CL(3), 3, B_, 101, 8));
  submit(with_tif(ord(3, 3, B_, 100, 4), HG_TIF_FOK));
  EXPECT(ACC(3, CL(3), 3, B_, 100, 4), CXL(HG_CXL_FOK_UNFILLED, 3, CL(3), 3, B_, 100, 4));
  assert_int_equal(digest(), d);
  submit(with_tif(ord(3, 3, B_, 101, 7), HG_TIF_FOK));
  EXPECT(ACC(3, CL(3), 3, B_, 101, 7), FILL(B_, 3, CL(3), 3, 1, CL(1), 1, 100, 3, 4, 0),
         LVL(S_, 100, 0), FILL(B_, 3, CL(3), 3, 2, CL(2), 2, 101, 4, 0, 0), LVL(S_, 101, 0));
  assert_int_equal(hg_book_order_count(book), 0);
}

/* Asks at 100: o1 acct 1, o2 acct 2, then o3 acct 1 at 101. FOK buyer is acct 1. */
static void fok_with_stp(void **state) {
  (void)state;
#define BOOK3()           \
  do {                    \
    setup(NULL);          \
    rest(1, 1, S_, 100, 3); \
    rest(2, 2, S_, 100, 3); \
    rest(3, 1, S_, 101, 3); \
  } while (0)

  /* NONE counts its own orders and trades with them. */
  BOOK3();
  submit(with_stp(with_tif(ord(9, 1, B_, 101, 9), HG_TIF_FOK), HG_STP_NONE));
  EXPECT(ACC(9, CL(9), 1, B_, 101, 9), FILL(B_, 9, CL(9), 1, 1, CL(1), 1, 100, 3, 6, 0),
         FILL(B_, 9, CL(9), 1, 2, CL(2), 2, 100, 3, 3, 0), LVL(S_, 100, 0),
         FILL(B_, 9, CL(9), 1, 3, CL(3), 1, 101, 3, 0, 0), LVL(S_, 101, 0));

  /* CANCEL_RESTING skips its own: 3 available. */
  BOOK3();
  submit(with_stp(with_tif(ord(9, 1, B_, 101, 4), HG_TIF_FOK), HG_STP_CANCEL_RESTING));
  EXPECT(ACC(9, CL(9), 1, B_, 101, 4), CXL(HG_CXL_FOK_UNFILLED, 9, CL(9), 1, B_, 101, 4));
  submit(with_stp(with_tif(ord(9, 1, B_, 101, 3), HG_TIF_FOK), HG_STP_CANCEL_RESTING));
  EXPECT(ACC(9, CL(9), 1, B_, 101, 3), CXL(HG_CXL_SELF_TRADE, 1, CL(1), 1, S_, 100, 3),
         FILL(B_, 9, CL(9), 1, 2, CL(2), 2, 100, 3, 0, 0), LVL(S_, 100, 0));
  assert_int_equal(hg_book_qty_at(book, S_, 101), 3);

  /* CANCEL_INCOMING / CANCEL_BOTH: the walk ends at o1, nothing counted. */
  BOOK3();
  submit(with_stp(with_tif(ord(9, 1, B_, 101, 1), HG_TIF_FOK), HG_STP_CANCEL_INCOMING));
  EXPECT(ACC(9, CL(9), 1, B_, 101, 1), CXL(HG_CXL_FOK_UNFILLED, 9, CL(9), 1, B_, 101, 1));
  submit(with_stp(with_tif(ord(9, 1, B_, 101, 1), HG_TIF_FOK), HG_STP_CANCEL_BOTH));
  EXPECT(ACC(9, CL(9), 1, B_, 101, 1), CXL(HG_CXL_FOK_UNFILLED, 9, CL(9), 1, B_, 101, 1));
  /* Default STP of the book is CANCEL_INCOMING. */
  submit(with_tif(ord(9, 1, B_, 101, 1), HG_TIF_FOK));
  EXPECT(ACC(9, CL(9), 1, B_, 101, 1), CXL(HG_CXL_FOK_UNFILLED, 9, CL(9), 1, B_, 101, 1));
  assert_int_equal(hg_book_order_count(book), 3);

  /* A self order behind enough quantity does not matter. */
  setup(NULL);
  rest(2, 2, S_, 100, 3);
  rest(1, 1, S_, 100, 3);
  submit(with_stp(with_tif(ord(9, 1, B_, 100, 3), HG_TIF_FOK), HG_STP_CANCEL_BOTH));
  EXPECT(ACC(9, CL(9), 1, B_, 100, 3), FILL(B_, 9, CL(9), 1, 2, CL(2), 2, 100, 3, 0, 0),
         LVL(S_, 100, 3));
  submit(with_stp(with_tif(ord(9, 1, B_, 100, 1), HG_TIF_FOK), HG_STP_CANCEL_BOTH));
  EXPECT(ACC(9, CL(9), 1, B_, 100, 1), CXL(HG_CXL_FOK_UNFILLED, 9, CL(9), 1, B_, 100, 1));
#undef BOOK3
}

/* Asks at 100 in time order: o1 acct 2, o2 acct 1 (or acct 5 in SMP group
 * 9), o3 acct 3. The taker is acct 1 (SMP group 9), buy 5 at 100, GTC. */
static void stp_case(int stp, uint8_t book_default, bool smp, int effective) {
  hg_book_params_t p = default_params();
  p.default_stp = book_default;
  open_book(&p);
  hg_account_t self = smp ? 5 : 1;
  rest(1, 2, S_, 100, 2);
  hg_order_new_t o = ord(2, self, S_, 100, 2);
  o.smp_group = smp ? 9 : 0;
  submit(o);
  EXPECT(ACC(2, CL(2), self, S_, 100, 2), LVL(S_, 100, 4));
  rest(3, 3, S_, 100, 2);
  o = with_stp(ord(9, 1, B_, 100, 5), stp);
  o.smp_group = 9;
  submit(o);
  const hg_book_event_t acc = ACC(9, CL(9), 1, B_, 100, 5);
  const hg_book_event_t f1 = FILL(B_, 9, CL(9), 1, 1, CL(1), 2, 100, 2, 3, 0);
  const hg_book_event_t c2 = CXL(HG_CXL_SELF_TRADE, 2, CL(2), self, S_, 100, 2);
  switch (effective) {
  case HG_STP_CANCEL_RESTING:
    EXPECT(acc, f1, c2, FILL(B_, 9, CL(9), 1, 3, CL(3), 3, 100, 2, 1, 0), LVL(S_, 100, 0),
           LVL(B_, 100, 1));
    break;
  case HG_STP_CANCEL_INCOMING:
    EXPECT(acc, f1, LVL(S_, 100, 4), CXL(HG_CXL_SELF_TRADE, 9, CL(9), 1, B_, 100, 3));
    break;
  case HG_STP_CANCEL_BOTH:
    EXPECT(acc, f1, c2, LVL(S_, 100, 2), CXL(HG_CXL_SELF_TRADE, 9, CL(9), 1, B_, 100, 3));
    break;
  case HG_STP_NONE:
    EXPECT(acc, f1, FILL(B_, 9, CL(9), 1, 2, CL(2), self, 100, 2, 1, 0),
           FILL(B_, 9, CL(9), 1, 3, CL(3), 3, 100, 1, 0, 1), LVL(S_, 100, 1));
    break;
  default:
    fail();
  }
}

static void stp_all_modes(void **state) {
  (void)state;
  for (int smp = 0; smp < 2; smp++) {
    for (int m = HG_STP_CANCEL_RESTING; m <= HG_STP_NONE; m++) {
      stp_case(m, 0, smp, m);
      /* The book default never overrides an explicit mode. */
      stp_case(m, m == HG_STP_NONE ? HG_STP_CANCEL_RESTING : HG_STP_NONE, smp, m);
      /* HG_STP_DEFAULT follows the configured default. */
      stp_case(HG_STP_DEFAULT, (uint8_t)m, smp, m);
    }
    stp_case(HG_STP_DEFAULT, 0, smp, HG_STP_CANCEL_INCOMING);
  }
}

static void stp_edge_cases(void **state) {
  (void)state;
  /* Stop at a level's first order: a LEVEL event with the quantity unchanged. */
  rest(1, 1, S_, 100, 2);
  submit(ord(2, 1, B_, 100, 2));
  EXPECT(ACC(2, CL(2), 1, B_, 100, 2), LVL(S_, 100, 2),
         CXL(HG_CXL_SELF_TRADE, 2, CL(2), 1, B_, 100, 2));
  /* Different accounts, both SMP group 0: no self-match. */
  submit(with_tif(ord(3, 2, B_, 100, 1), HG_TIF_IOC));
  EXPECT(ACC(3, CL(3), 2, B_, 100, 1), FILL(B_, 3, CL(3), 2, 1, CL(1), 1, 100, 1, 0, 1),
         LVL(S_, 100, 1));
  /* CANCEL_RESTING across levels, then a market remainder is IOC_REMAINDER. */
  rest(4, 1, S_, 101, 2);
  submit(with_stp(market(5, 1, B_, 3, HG_TIF_IOC), HG_STP_CANCEL_RESTING));
  EXPECT(ACC(5, CL(5), 1, B_, 1000, 3), CXL(HG_CXL_SELF_TRADE, 1, CL(1), 1, S_, 100, 1),
         LVL(S_, 100, 0), CXL(HG_CXL_SELF_TRADE, 4, CL(4), 1, S_, 101, 2), LVL(S_, 101, 0),
         CXL(HG_CXL_IOC_REMAINDER, 5, CL(5), 1, B_, 1000, 3));
  assert_int_equal(hg_book_order_count(book), 0);
}

/* ------------------------------------------------------------------------ */
/* Cancel, replace, mass cancel, expiry                                       */

static void cancel_rules(void **state) {
  (void)state;
  rest(1, 1, B_, 100, 5);
  rest(2, 2, B_, 100, 3);
  uint64_t d = digest();
  cancel(77, 1);
  EXPECT(REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 77, 0, 1, 0, 0, 0));
  /* Another account's live order gets the reply an unknown id gets. */
  cancel(2, 1);
  EXPECT(REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 2, 0, 1, 0, 0, 0));
  cancel(0, 1);
  EXPECT(REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 0, 0, 1, 0, 0, 0));
  assert_int_equal(digest(), d);
  cancel(1, 1);
  EXPECT(CXL(HG_CXL_USER, 1, CL(1), 1, B_, 100, 5), LVL(B_, 100, 3));
  cancel(1, 1);
  EXPECT(REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 1, 0, 1, 0, 0, 0));
  cancel(2, 2);
  EXPECT(CXL(HG_CXL_USER, 2, CL(2), 2, B_, 100, 3), LVL(B_, 100, 0));
  hg_price_t px;
  assert_int_equal(hg_book_best(book, B_, &px, NULL), HG_ENOTFOUND);
}

static void replace_keeps_priority(void **state) {
  (void)state;
  rest(1, 1, B_, 100, 5);
  rest(2, 2, B_, 100, 5);
  replace(1, 1, 100, 3);
  EXPECT(REP(1, CL(1), 1, B_, 100, 3, 1), LVL(B_, 100, 8));
  replace(1, 1, 100, 3); /* nothing changes, events all the same */
  EXPECT(REP(1, CL(1), 1, B_, 100, 3, 1), LVL(B_, 100, 8));
  hg_book_order_t bo;
  assert_int_equal(hg_book_find(book, 1, 1, &bo), 0);
  assert_int_equal(bo.qty, 3);
  assert_int_equal(bo.leaves, 3);
  assert_int_equal(bo.ts, 1); /* entry time kept */
  submit(with_tif(ord(3, 3, S_, 100, 4), HG_TIF_IOC));
  EXPECT(ACC(3, CL(3), 3, S_, 100, 4), FILL(S_, 3, CL(3), 3, 1, CL(1), 1, 100, 3, 1, 0),
         FILL(S_, 3, CL(3), 3, 2, CL(2), 2, 100, 1, 0, 4), LVL(B_, 100, 4));
}

static void replace_loses_priority(void **state) {
  (void)state;
  rest(1, 1, B_, 100, 5);
  rest(2, 2, B_, 100, 5);
  /* Quantity up at the same price: to the back. */
  replace(1, 1, 100, 6);
  EXPECT(REP(1, CL(1), 1, B_, 100, 6, 0), LVL(B_, 100, 5), LVL(B_, 100, 11));
  hg_book_order_t bo;
  assert_int_equal(hg_book_find(book, 1, 1, &bo), 0);
  assert_int_equal(bo.ts, now);
  submit(with_tif(ord(3, 3, S_, 100, 6), HG_TIF_IOC));
  EXPECT(ACC(3, CL(3), 3, S_, 100, 6), FILL(S_, 3, CL(3), 3, 2, CL(2), 2, 100, 5, 1, 0),
         FILL(S_, 3, CL(3), 3, 1, CL(1), 1, 100, 1, 0, 5), LVL(B_, 100, 5));
  /* A price change that crosses trades at the maker's price, then rests. */
  rest(4, 4, S_, 101, 2);
  rest(5, 4, S_, 102, 9);
  replace(1, 1, 101, 4);
  EXPECT(REP(1, CL(1), 1, B_, 101, 4, 0), LVL(B_, 100, 0),
         FILL(B_, 1, CL(1), 1, 4, CL(4), 4, 101, 2, 2, 0), LVL(S_, 101, 0), LVL(B_, 101, 2));
  assert_int_equal(hg_book_find(book, 1, 1, &bo), 0);
  assert_int_equal(bo.qty, 4);
  assert_int_equal(bo.leaves, 2);
  assert_int_equal(bo.price, 101);
  /* A price change down with a smaller quantity also loses priority. */
  rest(6, 2, B_, 99, 1);
  replace(1, 1, 99, 1);
  EXPECT(REP(1, CL(1), 1, B_, 99, 1, 0), LVL(B_, 101, 0), LVL(B_, 99, 2));
  submit(with_tif(ord(7, 3, S_, 99, 1), HG_TIF_IOC));
  EXPECT(ACC(7, CL(7), 3, S_, 99, 1), FILL(S_, 7, CL(7), 3, 6, CL(6), 2, 99, 1, 0, 0),
         LVL(B_, 99, 1));
  /* Replaced into a full fill: the order is gone, with its ids. */
  replace(1, 1, 102, 5);
  EXPECT(REP(1, CL(1), 1, B_, 102, 5, 0), LVL(B_, 99, 0),
         FILL(B_, 1, CL(1), 1, 5, CL(5), 4, 102, 5, 0, 4), LVL(S_, 102, 4));
  assert_int_equal(hg_book_find(book, 1, 1, &bo), HG_ENOTFOUND);
  assert_int_equal(hg_book_order_count(book), 1);
  /* A re-entering order applies its own STP mode (default: cancel incoming). */
  rest(8, 4, B_, 90, 3);
  replace(8, 4, 102, 3);
  EXPECT(REP(8, CL(8), 4, B_, 102, 3, 0), LVL(B_, 90, 0), LVL(S_, 102, 4),
         CXL(HG_CXL_SELF_TRADE, 8, CL(8), 4, B_, 102, 3));
  assert_int_equal(hg_book_order_count(book), 1);
}

static void replace_rejects_leave_order(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.min_price = 50;
  p.max_price = 150;
  p.max_order_qty = 100;
  open_book(&p);
  hg_order_new_t o = ord(1, 1, B_, 95, 10);
  o.post_only = 1;
  submit(o);
  EXPECT(ACC(1, CL(1), 1, B_, 95, 10), LVL(B_, 95, 10));
  rest(2, 2, S_, 105, 10);
  uint64_t d = digest();
  hg_book_order_t before, after;
  assert_int_equal(hg_book_find(book, 1, 1, &before), 0);
#define REJECT_REP(id, acct, px, q, reason)                                   \
  do {                                                                       \
    replace(id, acct, px, q);                                                \
    EXPECT(REJ(HG_CMD_REPLACE, reason, id, 0, acct, 0, px, q));              \
    assert_int_equal(digest(), d);                                           \
  } while (0)
  REJECT_REP(9, 1, 96, 0, HG_REJ_UNKNOWN_ORDER);
  REJECT_REP(2, 1, 96, 0, HG_REJ_UNKNOWN_ORDER); /* someone else's order */
  REJECT_REP(1, 1, 40, 0, HG_REJ_INVALID_QTY);
  REJECT_REP(1, 1, 40, -1, HG_REJ_INVALID_QTY);
  REJECT_REP(1, 1, 40, 101, HG_REJ_QTY_TOO_LARGE);
  REJECT_REP(1, 1, 49, 100, HG_REJ_PRICE_OUT_OF_RANGE);
  REJECT_REP(1, 1, 151, 100, HG_REJ_PRICE_OUT_OF_RANGE);
  REJECT_REP(1, 1, 105, 5, HG_REJ_POST_ONLY_WOULD_CROSS);
#undef REJECT_REP
  assert_int_equal(hg_book_find(book, 1, 1, &after), 0);
  assert_memory_equal(&before, &after, sizeof before);
  /* A post-only order may move to a non-crossing price. */
  replace(1, 1, 104, 10);
  EXPECT(REP(1, CL(1), 1, B_, 104, 10, 0), LVL(B_, 95, 0), LVL(B_, 104, 10));
  /* A non-post-only order may cross on replace. */
  replace(2, 2, 104, 4);
  EXPECT(REP(2, CL(2), 2, S_, 104, 4, 0), LVL(S_, 105, 0),
         FILL(S_, 2, CL(2), 2, 1, CL(1), 1, 104, 4, 0, 6), LVL(B_, 104, 6));
}

static void mass_cancel_rules(void **state) {
  (void)state;
  rest(1, 1, B_, 100, 1);
  rest(2, 1, S_, 105, 2);
  rest(3, 1, B_, 99, 3);
  rest(4, 2, B_, 100, 4);
  rest(5, 1, S_, 106, 5);
  rest(6, 1, S_, 105, 6);
  assert_int_equal(hg_book_mass_cancel(book, 1, HG_SIDES_SELL, ++now), 3);
  EXPECT(CXL(HG_CXL_MASS_CANCEL, 2, CL(2), 1, S_, 105, 2), LVL(S_, 105, 6),
         CXL(HG_CXL_MASS_CANCEL, 5, CL(5), 1, S_, 106, 5), LVL(S_, 106, 0),
         CXL(HG_CXL_MASS_CANCEL, 6, CL(6), 1, S_, 105, 6), LVL(S_, 105, 0));
  assert_int_equal(hg_book_mass_cancel(book, 1, HG_SIDES_SELL, ++now), 0);
  EXPECT_NONE();
  assert_int_equal(hg_book_mass_cancel(book, 1, 3, ++now), 0); /* bad filter */
  EXPECT_NONE();
  assert_int_equal(hg_book_mass_cancel(book, 9, HG_SIDES_BOTH, ++now), 0);
  EXPECT_NONE();
  /* An order re-entered by replace counts from its re-entry. */
  rest(7, 1, B_, 90, 7);
  replace(1, 1, 91, 1);
  EXPECT(REP(1, CL(1), 1, B_, 91, 1, 0), LVL(B_, 100, 4), LVL(B_, 91, 1));
  replace(3, 1, 99, 2); /* keeps priority */
  EXPECT(REP(3, CL(3), 1, B_, 99, 2, 1), LVL(B_, 99, 2));
  assert_int_equal(hg_book_mass_cancel(book, 1, HG_SIDES_BOTH, ++now), 3);
  EXPECT(CXL(HG_CXL_MASS_CANCEL, 3, CL(3), 1, B_, 99, 2), LVL(B_, 99, 0),
         CXL(HG_CXL_MASS_CANCEL, 7, CL(7), 1, B_, 90, 7), LVL(B_, 90, 0),
         CXL(HG_CXL_MASS_CANCEL, 1, CL(1), 1, B_, 91, 1), LVL(B_, 91, 0));
  /* Account 2 untouched. */
  assert_int_equal(hg_book_order_count(book), 1);
  assert_int_equal(hg_book_find(book, 4, 2, NULL), 0);
  rest(8, 2, S_, 101, 1);
  assert_int_equal(hg_book_mass_cancel(book, 2, HG_SIDES_BUY, ++now), 1);
  EXPECT(CXL(HG_CXL_MASS_CANCEL, 4, CL(4), 2, B_, 100, 4), LVL(B_, 100, 0));
}

static void expire_day_rules(void **state) {
  (void)state;
  submit(with_tif(ord(1, 1, B_, 100, 1), HG_TIF_DAY));
  EXPECT(ACC(1, CL(1), 1, B_, 100, 1), LVL(B_, 100, 1));
  rest(2, 1, B_, 100, 2);
  submit(with_tif(ord(3, 2, S_, 105, 3), HG_TIF_DAY));
  EXPECT(ACC(3, CL(3), 2, S_, 105, 3), LVL(S_, 105, 3));
  submit(with_tif(ord(4, 3, B_, 99, 4), HG_TIF_DAY));
  EXPECT(ACC(4, CL(4), 3, B_, 99, 4), LVL(B_, 99, 4));
  replace(1, 1, 98, 1); /* re-entered: now the newest */
  EXPECT(REP(1, CL(1), 1, B_, 98, 1, 0), LVL(B_, 100, 2), LVL(B_, 98, 1));
  assert_int_equal(hg_book_expire_day(book, ++now), 3);
  EXPECT(CXL(HG_CXL_EXPIRY, 3, CL(3), 2, S_, 105, 3), LVL(S_, 105, 0),
         CXL(HG_CXL_EXPIRY, 4, CL(4), 3, B_, 99, 4), LVL(B_, 99, 0),
         CXL(HG_CXL_EXPIRY, 1, CL(1), 1, B_, 98, 1), LVL(B_, 98, 0));
  assert_int_equal(hg_book_expire_day(book, ++now), 0);
  EXPECT_NONE();
  assert_int_equal(hg_book_order_count(book), 1);
}

/* ------------------------------------------------------------------------ */
/* Queries, snapshots, wide ranges                                            */

static void depth_and_queries(void **state) {
  (void)state;
  rest(1, 1, B_, 100, 1);
  rest(2, 2, B_, 98, 2);
  rest(3, 3, B_, 100, 3);
  rest(4, 1, B_, 50, 4);
  rest(5, 1, S_, 1000, 5);
  rest(6, 1, S_, 101, 6);
  hg_book_level_t lv[8];
  assert_int_equal(hg_book_depth(book, B_, lv, 8), 3);
  assert_int_equal(lv[0].price, 100);
  assert_int_equal(lv[0].qty, 4);
  assert_int_equal(lv[0].orders, 2);
  assert_int_equal(lv[1].price, 98);
  assert_int_equal(lv[1].orders, 1);
  assert_int_equal(lv[2].price, 50);
  assert_int_equal(lv[2].qty, 4);
  assert_int_equal(hg_book_depth(book, B_, lv, 2), 2);
  assert_int_equal(hg_book_depth(book, B_, lv, 0), 0);
  assert_int_equal(hg_book_depth(book, S_, lv, 8), 2);
  assert_int_equal(lv[0].price, 101);
  assert_int_equal(lv[1].price, 1000);
  assert_int_equal(hg_book_qty_at(book, B_, 100), 4);
  assert_int_equal(hg_book_qty_at(book, S_, 100), 0);
  assert_int_equal(hg_book_qty_at(book, B_, 0), 0);
  assert_int_equal(hg_book_qty_at(book, B_, 1001), 0);
  hg_price_t px = 0;
  hg_qty_t q = 0;
  assert_int_equal(hg_book_best(book, B_, &px, &q), 0);
  assert_int_equal(px, 100);
  assert_int_equal(q, 4);
  assert_int_equal(hg_book_best(book, S_, &px, &q), 0);
  assert_int_equal(px, 101);
  assert_int_equal(q, 6);
  cancel(6, 1);
  EXPECT(CXL(HG_CXL_USER, 6, CL(6), 1, S_, 101, 6), LVL(S_, 101, 0));
  assert_int_equal(hg_book_best(book, S_, &px, &q), 0);
  assert_int_equal(px, 1000);
  assert_int_equal(hg_book_order_count(book), 5);
}

struct snap {
  hg_book_order_t o[64];
  size_t n;
};

static void snap_fn(void *ctx, const hg_book_order_t *o) {
  struct snap *s = ctx;
  assert_true(s->n < 64);
  s->o[s->n++] = *o;
}

static void foreach_restore_round_trip(void **state) {
  (void)state;
  rest(1, 1, B_, 100, 5);
  rest(2, 2, B_, 100, 6);
  submit(with_tif(ord(3, 3, B_, 99, 7), HG_TIF_DAY));
  EXPECT(ACC(3, CL(3), 3, B_, 99, 7), LVL(B_, 99, 7));
  hg_order_new_t o = with_stp(ord(4, 1, S_, 103, 8), HG_STP_NONE);
  o.smp_group = 4;
  o.post_only = 1;
  submit(o);
  EXPECT(ACC(4, CL(4), 1, S_, 103, 8), LVL(S_, 103, 8));
  rest(5, 2, S_, 103, 9);
  replace(1, 1, 100, 10); /* to the back of 100 */
  EXPECT(REP(1, CL(1), 1, B_, 100, 10, 0), LVL(B_, 100, 6), LVL(B_, 100, 16));
  submit(with_tif(ord(6, 4, B_, 100, 3), HG_TIF_IOC)); /* partial: 104 no, nothing */
  EXPECT(ACC(6, CL(6), 4, B_, 100, 3), CXL(HG_CXL_IOC_REMAINDER, 6, CL(6), 4, B_, 100, 3));
  submit(with_tif(ord(7, 4, S_, 100, 2), HG_TIF_IOC)); /* o2 leaves 4 of 6 */
  EXPECT(ACC(7, CL(7), 4, S_, 100, 2), FILL(S_, 7, CL(7), 4, 2, CL(2), 2, 100, 2, 0, 4),
         LVL(B_, 100, 14));

  struct snap a = {.n = 0}, b2 = {.n = 0};
  hg_book_foreach(book, snap_fn, &a);
  assert_int_equal(a.n, 5);
  const hg_oid_t order[] = {2, 3, 4, 5, 1};
  for (size_t i = 0; i < 5; i++) assert_int_equal(a.o[i].order_id, order[i]);
  assert_int_equal(a.o[0].qty, 6);
  assert_int_equal(a.o[0].leaves, 4);
  assert_int_equal(a.o[2].smp_group, 4);
  assert_int_equal(a.o[2].post_only, 1);
  assert_int_equal(a.o[2].stp, HG_STP_NONE);
  assert_int_equal(a.o[1].tif, HG_TIF_DAY);

  hg_book_t *orig = book;
  book = NULL;
  hg_book_params_t p = default_params();
  open_book(&p);
  for (size_t i = 0; i < a.n; i++) assert_int_equal(hg_book_restore(book, &a.o[i]), 0);
  EXPECT_NONE(); /* restore emits nothing */
  hg_book_foreach(book, snap_fn, &b2);
  assert_int_equal(b2.n, a.n);
  assert_memory_equal(a.o, b2.o, a.n * sizeof a.o[0]);
  hg_book_t *copy = book;

  /* The same commands on both books give the same events. */
  hg_book_event_t ev_orig[32], ev_copy[32];
  size_t n_orig = 0, n_copy = 0;
  for (int pass = 0; pass < 2; pass++) {
    book = pass == 0 ? orig : copy;
    nrec = 0;
    hg_order_new_t s = ord(20, 5, S_, 99, 20);
    s.ts = 1000;
    hg_book_submit(book, &s);
    hg_book_expire_day(book, 1001);
    hg_order_new_t bb = ord(21, 4, B_, 103, 12);
    bb.ts = 1002;
    hg_book_submit(book, &bb);
    hg_book_mass_cancel(book, 1, HG_SIDES_BOTH, 1003);
    assert_int_equal(hg_book_check(book), 0);
    memcpy(pass == 0 ? ev_orig : ev_copy, rec, nrec * sizeof rec[0]);
    if (pass == 0) n_orig = nrec;
    else n_copy = nrec;
  }
  assert_int_equal(n_orig, n_copy);
  assert_memory_equal(ev_orig, ev_copy, n_orig * sizeof ev_orig[0]);
  /* Hand-checked: the sell of 20 at 99 takes o2 (4), o1 (10) at 100, then
   * the DAY o3 (6 of 7) at 99. */
  assert_int_equal(ev_orig[1].maker_order_id, 2);
  assert_int_equal(ev_orig[2].maker_order_id, 1);
  assert_int_equal(ev_orig[4].maker_order_id, 3);
  assert_int_equal(ev_orig[4].qty, 6);
  nrec = 0;
  book = orig;
  hg_book_destroy(copy);
}

static void restore_rejects(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_orders = 3;
  p.max_accounts = 1;
  open_book(&p);
  hg_book_order_t o;
  memset(&o, 0, sizeof o);
  o.order_id = 1;
  o.client_order_id = 11;
  o.account = 1;
  o.price = 100;
  o.qty = 5;
  o.leaves = 3;
  o.side = B_;
  o.tif = HG_TIF_GTC;
  assert_int_equal(hg_book_restore(book, &o), 0);
  hg_book_order_t bad;
#define BAD(field, value, err)                       \
  do {                                               \
    bad = o;                                         \
    bad.order_id = 2;                                \
    bad.client_order_id = 12;                        \
    bad.field = value;                               \
    assert_int_equal(hg_book_restore(book, &bad), err); \
  } while (0)
  BAD(order_id, 0, HG_EINVAL);
  BAD(side, 2, HG_EINVAL);
  BAD(tif, HG_TIF_IOC, HG_EINVAL);
  BAD(stp, 5, HG_EINVAL);
  BAD(post_only, 2, HG_EINVAL);
  BAD(leaves, 0, HG_EINVAL);
  BAD(leaves, 6, HG_EINVAL);
  BAD(qty, 1000001, HG_EINVAL);
  BAD(price, 0, HG_EINVAL);
  BAD(price, 1001, HG_EINVAL);
  BAD(order_id, 1, HG_EEXISTS);
  BAD(client_order_id, 11, HG_EEXISTS);
  /* Crossing the bid at 100 is refused. */
  bad = o;
  bad.order_id = 2;
  bad.client_order_id = 12;
  bad.side = S_;
  assert_int_equal(hg_book_restore(book, &bad), HG_EINVAL);
  bad.price = 101;
  assert_int_equal(hg_book_restore(book, &bad), 0);
  bad.order_id = 3;
  bad.client_order_id = 13;
  bad.account = 3;
  assert_int_equal(hg_book_restore(book, &bad), HG_EFULL); /* accounts */
  bad.account = 1;
  assert_int_equal(hg_book_restore(book, &bad), 0);
  bad.order_id = 4;
  bad.client_order_id = 14;
  assert_int_equal(hg_book_restore(book, &bad), HG_EFULL); /* orders */
#undef BAD
  assert_int_equal(hg_book_order_count(book), 3);
  assert_int_equal(hg_book_check(book), 0);
  assert_int_equal(nrec, 0);
}

/* The widest range, orders at both ends: best-price moves are bitmap jumps. */
static void extreme_prices_far_apart(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.min_price = 1;
  p.max_price = (hg_price_t)HG_BOOK_MAX_LEVELS;
  const hg_price_t hi = p.max_price;
  open_book(&p);
  rest(1, 1, B_, 1, 1);
  rest(2, 2, S_, hi, 2);
  rest(3, 1, B_, 5000000, 3);
  rest(4, 2, S_, 9000000, 4);
  rest(5, 2, S_, 9000063, 5);
  rest(6, 2, S_, 9000064, 6);
  hg_price_t px;
  assert_int_equal(hg_book_best(book, B_, &px, NULL), 0);
  assert_int_equal(px, 5000000);
  cancel(3, 1);
  EXPECT(CXL(HG_CXL_USER, 3, CL(3), 1, B_, 5000000, 3), LVL(B_, 5000000, 0));
  assert_int_equal(hg_book_best(book, B_, &px, NULL), 0);
  assert_int_equal(px, 1);
  hg_book_level_t lv[8];
  assert_int_equal(hg_book_depth(book, S_, lv, 8), 4);
  assert_int_equal(lv[0].price, 9000000);
  assert_int_equal(lv[1].price, 9000063);
  assert_int_equal(lv[2].price, 9000064);
  assert_int_equal(lv[3].price, hi);
  submit(market(7, 3, B_, 20, HG_TIF_IOC));
  EXPECT(ACC(7, CL(7), 3, B_, hi, 20), FILL(B_, 7, CL(7), 3, 4, CL(4), 2, 9000000, 4, 16, 0),
         LVL(S_, 9000000, 0), FILL(B_, 7, CL(7), 3, 5, CL(5), 2, 9000063, 5, 11, 0),
         LVL(S_, 9000063, 0), FILL(B_, 7, CL(7), 3, 6, CL(6), 2, 9000064, 6, 5, 0),
         LVL(S_, 9000064, 0), FILL(B_, 7, CL(7), 3, 2, CL(2), 2, hi, 2, 3, 0), LVL(S_, hi, 0),
         CXL(HG_CXL_IOC_REMAINDER, 7, CL(7), 3, B_, hi, 3));
  /* A crash to the bottom and back. */
  submit(market(8, 3, S_, 2, HG_TIF_IOC));
  EXPECT(ACC(8, CL(8), 3, S_, 1, 2), FILL(S_, 8, CL(8), 3, 1, CL(1), 1, 1, 1, 1, 0),
         LVL(B_, 1, 0), CXL(HG_CXL_IOC_REMAINDER, 8, CL(8), 3, S_, 1, 1));
  assert_int_equal(hg_book_order_count(book), 0);
  rest(9, 1, S_, 2, 1);
  rest(10, 2, B_, 1, 1);
  hg_price_t bid, ask;
  assert_int_equal(hg_book_best(book, B_, &bid, NULL), 0);
  assert_int_equal(hg_book_best(book, S_, &ask, NULL), 0);
  assert_int_equal(bid, 1);
  assert_int_equal(ask, 2);
}

/* ------------------------------------------------------------------------ */
/* Property test                                                              */

static uint64_t rng_state;

static uint64_t rnd(uint64_t n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state % n;
}

/*
 * Mass cancel walks an account's log, which cancels and replaces only mark
 * dead and compaction later drops. After many rounds of both (several
 * compactions, chunks freed and reused, a replace re-entering at the back),
 * a mass cancel must still name exactly the live orders of that side, oldest
 * entry first.
 */
static void mass_cancel_after_log_compactions(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_orders = 60;
  p.max_accounts = 3;
  open_book(&p);
  /* Account 1 rests ids 1..50 (buys at 100 + id % 5, sells on odd ids at
   * 600), then cancels every id not divisible by 7 except 49, in three
   * passes, interleaved with account 2's orders so the chunk pool is shared. */
  for (hg_oid_t id = 1; id <= 50; id++) {
    int side = id % 2 ? S_ : B_;
    hg_book_submit(book, &(hg_order_new_t){.order_id = id, .client_order_id = CL(id),
                                            .account = 1, .side = (uint8_t)side,
                                            .price = side == B_ ? 100 + (hg_price_t)(id % 5) : 600,
                                            .qty = 1, .type = HG_ORD_LIMIT, .tif = HG_TIF_GTC,
                                            .ts = ++now});
    submit(ord(100 + id, 2, B_, 50, 1));
    hg_book_cancel(book, 100 + id, 2, ++now);
  }
  for (int pass = 0; pass < 3; pass++)
    for (hg_oid_t id = 1 + (hg_oid_t)pass; id <= 50; id += 3)
      if (id % 7 != 0 && id != 49) hg_book_cancel(book, id, 1, ++now);
  assert_int_equal(hg_book_check(book), 0);
  /* Live: 7 14 21 28 35 42 49. 14 re-enters (loses priority) at the back. */
  hg_book_replace(book, 14, 1, 101, 2, ++now);
  /* Fresh orders after the compactions: 51 (buy), 52 (sell). */
  submit(ord(51, 1, B_, 103, 1));
  submit(ord(52, 1, S_, 601, 1));
  assert_int_equal(hg_book_check(book), 0);
  nrec = 0;
  /* Buys of account 1 in entry order: 28, 42, 14 (re-entered), 51. */
  assert_int_equal(hg_book_mass_cancel(book, 1, HG_SIDES_BUY, ++now), 4);
  assert_int_equal(nrec, 8);
  const hg_oid_t want_buy[] = {28, 42, 14, 51};
  for (size_t k = 0; k < 4; k++) {
    assert_int_equal(rec[2 * k].type, HG_EV_CANCELLED);
    assert_int_equal(rec[2 * k].reason, HG_CXL_MASS_CANCEL);
    assert_int_equal(rec[2 * k].order_id, want_buy[k]);
    assert_int_equal(rec[2 * k + 1].type, HG_EV_LEVEL);
  }
  assert_int_equal(hg_book_check(book), 0);
  nrec = 0;
  /* Then the sells: 7, 21, 35, 49, 52. */
  assert_int_equal(hg_book_mass_cancel(book, 1, HG_SIDES_BOTH, ++now), 5);
  const hg_oid_t want_sell[] = {7, 21, 35, 49, 52};
  for (size_t k = 0; k < 5; k++) assert_int_equal(rec[2 * k].order_id, want_sell[k]);
  assert_int_equal(hg_book_order_count(book), 0);
  assert_int_equal(hg_book_check(book), 0);
  assert_int_equal(hg_book_mass_cancel(book, 1, HG_SIDES_BOTH, ++now), 0);
}

/*
 * The log chunks are sized for the worst case: every account at once with
 * the pool full and logs at their longest. Filling the pool over all
 * accounts, churning it, then asking for one more order must end in a clean
 * HG_REJ_BOOK_FULL, with the book intact.
 */
static void full_pool_over_many_accounts(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_orders = 40;
  p.max_accounts = 8;
  open_book(&p);
  hg_oid_t id = 1;
  for (int round = 0; round < 20; round++) {
    /* Refill to capacity, spread over the accounts. */
    while (hg_book_order_count(book) < p.max_orders) {
      submit(ord(id, 1 + (hg_account_t)(id % 8), B_, 10 + (hg_price_t)(id % 13), 1));
      id++;
    }
    assert_int_equal(hg_book_check(book), 0);
    nrec = 0;
    submit(ord(id, 3, B_, 10, 1));
    EXPECT(REJ(HG_CMD_NEW, HG_REJ_BOOK_FULL, id, CL(id), 3, B_, 10, 1));
    id++;
    /* Cancel three quarters, oldest accounts' orders first. */
    for (hg_oid_t k = id - 60 > 0 ? id - 60 : 1; k < id && hg_book_order_count(book) > 10; k++)
      hg_book_cancel(book, k, 1 + (hg_account_t)(k % 8), ++now);
    assert_int_equal(hg_book_check(book), 0);
  }
}

/*
 * Orders whose preferred pool slot (order id modulo the slot count) is taken
 * rest elsewhere, and the preferred slot counts them; a lookup that misses
 * the preferred slot trusts a zero count. With max_orders 4 the pool has 16
 * slots, so ids 1, 17 and 33 all prefer slot 1. Every command must find
 * exactly the orders that are live, whichever slot they sit in, also after
 * the preferred slot's own order left or was replaced by another.
 */
static void displaced_orders_are_found(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_orders = 4;
  open_book(&p);
  rest(1, 1, B_, 100, 10);
  rest(17, 2, B_, 100, 5); /* slot 1 taken: displaced, count 1 */
  rest(33, 1, B_, 99, 3);  /* displaced too, count 2 */
  /* Live displaced ids are duplicates, a free id of the same slot is not. */
  submit(ord(17, 3, S_, 200, 1));
  EXPECT(REJ(HG_CMD_NEW, HG_REJ_DUPLICATE_ORDER_ID, 17, CL(17), 3, S_, 200, 1));
  cancel(1, 1); /* the slot's own order leaves; the count stays 2 */
  EXPECT(CXL(HG_CXL_USER, 1, CL(1), 1, B_, 100, 10), LVL(B_, 100, 5));
  hg_book_order_t o;
  assert_int_equal(hg_book_find(book, 17, 2, &o), 0);
  assert_int_equal(o.leaves, 5);
  assert_int_equal(hg_book_find(book, 33, 1, &o), 0);
  assert_int_equal(hg_book_find(book, 1, 1, &o), HG_ENOTFOUND);
  /* Id 49 takes the free slot 1 itself; 17 and 33 are still found. */
  rest(49, 3, S_, 300, 2);
  replace(17, 2, 98, 5); /* moves: leaves and re-enters, displaced again */
  EXPECT(REP(17, CL(17), 2, B_, 98, 5, 0), LVL(B_, 100, 0), LVL(B_, 98, 5));
  cancel(33, 1);
  EXPECT(CXL(HG_CXL_USER, 33, CL(33), 1, B_, 99, 3), LVL(B_, 99, 0));
  cancel(33, 1); /* gone: count 1 (17) is not 0, so the table says no */
  EXPECT(REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 33, 0, 1, 0, 0, 0));
  cancel(17, 2);
  EXPECT(CXL(HG_CXL_USER, 17, CL(17), 2, B_, 98, 5), LVL(B_, 98, 0));
  /* Count 0 now: gone and never-seen ids of slot 1 are answered at the slot. */
  cancel(17, 2);
  EXPECT(REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 17, 0, 2, 0, 0, 0));
  replace(65, 1, 100, 1);
  EXPECT(REJ(HG_CMD_REPLACE, HG_REJ_UNKNOWN_ORDER, 65, 0, 1, 0, 100, 1));
  /* The counts survive a snapshot round trip: restore into a fresh book. */
  rest(17, 2, B_, 97, 4); /* slot 1 holds 49: displaced */
  hg_book_order_t snap[2];
  assert_int_equal(hg_book_find(book, 49, 3, &snap[0]), 0);
  assert_int_equal(hg_book_find(book, 17, 2, &snap[1]), 0);
  open_book(&p);
  assert_int_equal(hg_book_restore(book, &snap[0]), 0);
  assert_int_equal(hg_book_restore(book, &snap[1]), 0);
  assert_int_equal(hg_book_restore(book, &snap[1]), HG_EEXISTS);
  assert_int_equal(hg_book_check(book), 0);
  cancel(17, 2);
  EXPECT(CXL(HG_CXL_USER, 17, CL(17), 2, B_, 97, 4), LVL(B_, 97, 0));
}

/*
 * A slot's displaced count is 16 bits and sticks at its maximum: 65,537
 * orders preferring slot 1 (ids 1 + k * 2^18 in a 2^18-slot pool), so
 * 65,536 displaced, one more than the count holds. All stay reachable while
 * they leave in any order, and once stuck the count keeps the table lookup
 * (a gone id is still rejected, not mistaken for a live one).
 */
static void displaced_count_saturates(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_orders = 70000; /* pool: 2^18 slots */
  p.max_accounts = 2;
  open_book(&p);
  const hg_oid_t stride = (hg_oid_t)1 << 18;
  const uint32_t n = 65537;
  for (uint32_t k = 0; k < n; k++) {
    submit(ord(1 + k * stride, 1, B_, 100, 1));
    assert_int_equal(rec[0].type, HG_EV_ACCEPTED);
    nrec = 0;
  }
  assert_int_equal(hg_book_order_count(book), n);
  assert_int_equal(hg_book_check(book), 0);
  submit(ord(1 + 9 * stride, 1, B_, 100, 1));
  EXPECT(REJ(HG_CMD_NEW, HG_REJ_DUPLICATE_ORDER_ID, 1 + 9 * stride, CL(1 + 9 * stride), 1, B_,
             100, 1));
  /* Every other order first (the slot's own among them), then the rest. */
  for (uint32_t pass = 0; pass < 2; pass++)
    for (uint32_t k = pass; k < n; k += 2) {
      cancel(1 + k * stride, 1);
      assert_int_equal(rec[0].type, HG_EV_CANCELLED);
      assert_int_equal(rec[0].order_id, 1 + k * stride);
      nrec = 0;
    }
  assert_int_equal(hg_book_order_count(book), 0);
  assert_int_equal(hg_book_check(book), 0);
  cancel(1 + 5 * stride, 1);
  EXPECT(REJ(HG_CMD_CANCEL, HG_REJ_UNKNOWN_ORDER, 1 + 5 * stride, 0, 1, 0, 0, 0));
}

/* Resident memory of this process, in KiB (0 if unknown). */
static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (f == NULL) return 0;
  if (fscanf(f, "%ld %ld", &size, &res) != 2) res = 0;
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/*
 * Creating a book reserves its arrays but does not write them: a book for
 * 1M orders (about 250 MiB of arrays) must not make the process resident in
 * proportion, and must work as usual, including a full consistency walk.
 */
static void create_leaves_arrays_untouched(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_orders = 1u << 20;
  p.max_price = 100000;
  long before = rss_kib();
  hg_book_t *big = NULL;
  assert_int_equal(hg_book_create(&p, rec_sink, NULL, &big), 0);
  long grown = rss_kib() - before;
  if (before > 0 && grown > 64 * 1024) fail_msg("create made %ld KiB resident", grown);
  hg_order_new_t o = ord(5, 1, B_, 100, 3);
  nrec = 0;
  hg_book_submit(big, &o);
  hg_book_cancel(big, 5, 1, ++now);
  o.order_id = 6;
  o.client_order_id = CL(6);
  hg_book_submit(big, &o);
  assert_int_equal(hg_book_order_count(big), 1);
  assert_int_equal(hg_book_qty_at(big, B_, 100), 3);
  assert_int_equal(hg_book_check(big), 0);
  hg_book_destroy(big);
}

/* The book of the random tests: 20 prices around a reference of 110. */
static hg_book_params_t small_params(void) {
  hg_book_params_t p = default_params();
  p.min_price = 100;
  p.max_price = 119;
  p.max_order_qty = 20;
  p.max_orders = 24;
  p.max_accounts = 4;
  return p;
}

enum { RND_NEW, RND_CANCEL, RND_REPLACE, RND_MASS, RND_EXPIRE };

/* One random command, the same to each of the n books (ids 1 + k * id_stride
 * for k < 40, prices a little beyond both ends, now and then an invalid
 * quantity, side or sides). Returns its kind (RND_*). */
static int random_step(hg_book_t *const *books, size_t n, hg_oid_t id_stride, uint64_t ts) {
  uint64_t kind = rnd(100);
  hg_oid_t id = 1 + rnd(40) * id_stride;
  hg_account_t acct = 1 + (hg_account_t)rnd(6);
  hg_price_t px = 97 + (hg_price_t)rnd(26);
  hg_qty_t q = (hg_qty_t)rnd(23) - 1;
  if (kind < 55) {
    hg_order_new_t o = ord(id, acct, (int)rnd(2), px, q);
    o.client_order_id = rnd(8);
    o.smp_group = (uint32_t)rnd(3);
    o.type = rnd(10) == 0 ? HG_ORD_MARKET : HG_ORD_LIMIT;
    o.tif = (uint8_t)rnd(4);
    o.stp = (uint8_t)rnd(5);
    o.post_only = rnd(6) == 0;
    if (rnd(50) == 0) o.side = 3;
    o.ts = ts;
    for (size_t i = 0; i < n; i++) hg_book_submit(books[i], &o);
    return RND_NEW;
  }
  if (kind < 70) {
    for (size_t i = 0; i < n; i++) hg_book_cancel(books[i], id, acct, ts);
    return RND_CANCEL;
  }
  if (kind < 92) {
    for (size_t i = 0; i < n; i++) hg_book_replace(books[i], id, acct, px, q, ts);
    return RND_REPLACE;
  }
  if (kind < 97) {
    int sides = (int)rnd(3);
    for (size_t i = 0; i < n; i++) hg_book_mass_cancel(books[i], acct, sides, ts);
    return RND_MASS;
  }
  for (size_t i = 0; i < n; i++) hg_book_expire_day(books[i], ts);
  return RND_EXPIRE;
}

/* ------------------------------------------------------------------------ */
/* Events built in the caller's buffer                                        */

typedef struct ev_log {
  hg_book_event_t ev[64];
  size_t n;
  const hg_book_event_t *buf; /* the buffer every event must arrive in, or NULL */
} ev_log_t;

static void log_sink(void *ctx, const hg_book_event_t *ev) {
  ev_log_t *l = ctx;
  assert_true(l->n < 64);
  if (l->buf != NULL) assert_ptr_equal(ev, l->buf);
  l->ev[l->n++] = *ev;
  /* The book must not read an event back once handed over. */
  if (l->buf != NULL) memset((void *)(uintptr_t)l->buf, 0xA5, sizeof *l->buf);
}

/* Two books fed the same random commands, one building its events in a
 * caller's buffer (hg_book_set_event_buffer, as the exchange does): the same
 * events, every event in the buffer, and none read back after the sink. */
static void event_buffer_gives_same_events(void **state) {
  (void)state;
  hg_book_params_t p = small_params();
  static ev_log_t plain, inbuf;
  static hg_book_event_t buf;
  memset(&plain, 0, sizeof plain);
  memset(&inbuf, 0, sizeof inbuf);
  inbuf.buf = &buf;
  hg_book_t *books[2] = {NULL, NULL};
  assert_int_equal(hg_book_create(&p, log_sink, &plain, &books[0]), 0);
  assert_int_equal(hg_book_create(&p, log_sink, &inbuf, &books[1]), 0);
  hg_book_set_event_buffer(books[1], &buf);
  rng_state = 0x2545F4914F6CDD1Dull;
  uint32_t types = 0;
  for (int step = 0; step < 20000; step++) {
    plain.n = inbuf.n = 0;
    (void)random_step(books, 2, 1, (uint64_t)step + 1);
    assert_int_equal(plain.n, inbuf.n);
    if (memcmp(plain.ev, inbuf.ev, plain.n * sizeof plain.ev[0]) != 0)
      fail_msg("step %d: events differ", step);
    for (size_t i = 0; i < plain.n; i++) types |= 1u << plain.ev[i].type;
  }
  /* Every kind of event went through the buffer. */
  uint32_t all = 1u << HG_EV_ACCEPTED | 1u << HG_EV_REJECTED | 1u << HG_EV_FILL |
                 1u << HG_EV_CANCELLED | 1u << HG_EV_REPLACED | 1u << HG_EV_LEVEL;
  assert_int_equal(types & all, all);
  /* NULL goes back to the book's own buffer. */
  hg_book_set_event_buffer(books[1], NULL);
  inbuf.buf = NULL;
  inbuf.n = 0;
  hg_order_new_t o = ord(99, 1, B_, 100, 1);
  o.ts = 30000;
  hg_book_submit(books[1], &o);
  assert_true(inbuf.n >= 1);
  hg_book_destroy(books[0]);
  hg_book_destroy(books[1]);
}

/* hg_book_prefault backs the big arrays (resident memory grows by at least
 * the pool) and changes nothing a book does: two books fed the same random
 * commands, one prefaulted before and again in the middle, give the same
 * events. */
static void prefault_backs_and_changes_nothing(void **state) {
  (void)state;
  hg_book_params_t p = small_params();
  p.max_orders = 1u << 16; /* a pool of 8 MiB: mapped, not from the heap */
  static ev_log_t a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  hg_book_t *books[2] = {NULL, NULL};
  assert_int_equal(hg_book_create(&p, log_sink, &a, &books[0]), 0);
  assert_int_equal(hg_book_create(&p, log_sink, &b, &books[1]), 0);
  long before = rss_kib();
  assert_int_equal(hg_book_prefault(books[1]), 0);
  long grown = rss_kib() - before;
  if (before > 0 && grown < 8 * 1024) fail_msg("prefault made only %ld KiB resident", grown);
  rng_state = 0x9E3779B97F4A7C15ull;
  for (int step = 0; step < 20000; step++) {
    a.n = b.n = 0;
    (void)random_step(books, 2, 4099, (uint64_t)step + 1);
    if (step == 10000) assert_int_equal(hg_book_prefault(books[1]), 0); /* with live orders */
    assert_int_equal(a.n, b.n);
    if (memcmp(a.ev, b.ev, a.n * sizeof a.ev[0]) != 0) fail_msg("step %d: events differ", step);
  }
  assert_int_equal(hg_book_check(books[1]), 0);
  hg_book_destroy(books[0]);
  hg_book_destroy(books[1]);
}

/* Counts a book's events by type (index HG_EV_*). */
static void count_sink(void *ctx, const hg_book_event_t *ev) {
  uint64_t *n = ctx;
  n[ev->type & 7]++;
}

/* A book sized for a million orders starts small and grows its preferred
 * range and id tables as orders come (40,000 live, ids in random order,
 * far past where both start): every order is found again, the DAY ones are
 * all expired by the walk (which reads only below where live orders can
 * be), the rest all cancelled, and the structures agree at each stage. */
static void large_book_grows_with_its_orders(void **state) {
  (void)state;
  hg_book_params_t p = default_params();
  p.max_orders = 1000000;
  p.max_accounts = 64;
  static uint64_t n[8];
  memset(n, 0, sizeof n);
  hg_book_t *b = NULL;
  assert_int_equal(hg_book_create(&p, count_sink, n, &b), 0);
  enum { N = 40000 };
  /* ids: a multiplicative permutation of 1..2^20, the first N of it */
  static hg_oid_t ids[N];
  for (uint32_t i = 0; i < N; i++) ids[i] = ((uint64_t)(i + 1) * 0x9E3779B1u & 0xFFFFFu) + 1;
  uint64_t day = 0;
  for (uint32_t i = 0; i < N; i++) {
    hg_order_new_t o;
    memset(&o, 0, sizeof o);
    o.order_id = ids[i];
    o.client_order_id = i + 1;
    o.account = 1 + i % 50;
    o.side = HG_SIDE_BUY;
    o.type = HG_ORD_LIMIT;
    o.tif = i % 3 == 0 ? HG_TIF_DAY : HG_TIF_GTC;
    day += o.tif == HG_TIF_DAY;
    o.price = 1 + (hg_price_t)(i % 997);
    o.qty = 1;
    hg_book_submit(b, &o);
  }
  assert_int_equal(n[HG_EV_ACCEPTED], N);
  assert_int_equal(n[HG_EV_REJECTED], 0);
  assert_int_equal(hg_book_order_count(b), N);
  assert_int_equal(hg_book_check(b), 0);
  hg_book_order_t got;
  for (uint32_t i = 0; i < N; i++)
    assert_int_equal(hg_book_find(b, ids[i], 1 + i % 50, &got), 0);
  assert_int_equal(hg_book_expire_day(b, 1), day);
  assert_int_equal(hg_book_order_count(b), N - day);
  assert_int_equal(hg_book_check(b), 0);
  for (uint32_t i = N; i-- > 0;) {
    if (i % 3 == 0) {
      assert_int_equal(hg_book_find(b, ids[i], 1 + i % 50, &got), HG_ENOTFOUND);
      continue;
    }
    hg_book_cancel(b, ids[i], 1 + i % 50, 2);
  }
  assert_int_equal(hg_book_order_count(b), 0);
  assert_int_equal(n[HG_EV_CANCELLED], N);
  assert_int_equal(hg_book_check(b), 0);
  hg_book_destroy(b);
}

/* ids: 1 + k * id_stride for 40 values of k. */
static void random_commands(hg_oid_t id_stride) {
  hg_book_params_t p = small_params();
  open_book(&p);
  rng_state = 0x9E3779B97F4A7C15ull;
  hg_qty_t shadow[2][20];
  memset(shadow, 0, sizeof shadow);
  for (int step = 0; step < 30000; step++) {
    uint64_t d = digest();
    uint32_t count = hg_book_order_count(book);
    uint64_t ts = ++now;
    if (random_step(&book, 1, id_stride, ts) == RND_NEW) {
      assert_true(nrec >= 1);
      assert_true(rec[0].type == HG_EV_ACCEPTED || rec[0].type == HG_EV_REJECTED);
    }
    int c = hg_book_check(book);
    if (c != 0) fail_msg("step %d: hg_book_check = %d", step, c);
    if (nrec > 0 && rec[0].type == HG_EV_REJECTED) {
      assert_int_equal(nrec, 1);
      assert_int_equal(digest(), d);
      assert_int_equal(hg_book_order_count(book), count);
    }
    for (size_t i = 0; i < nrec; i++) {
      const hg_book_event_t *e = &rec[i];
      assert_int_equal(e->ts, ts);
      assert_int_equal(e->instrument_id, INSTR);
      if (e->type == HG_EV_LEVEL) shadow[e->side][e->price - 100] = e->qty;
      if (e->type == HG_EV_FILL) {
        assert_true(e->qty > 0);
        assert_true(e->leaves >= 0 && e->maker_leaves >= 0);
      }
    }
    nrec = 0;
    /* LEVEL events alone reconstruct the book's aggregates. */
    for (int s = 0; s < 2; s++)
      for (hg_price_t x = 100; x < 120; x++)
        assert_int_equal(shadow[s][x - 100], hg_book_qty_at(book, (hg_side_t)s, x));
  }
}

static void random_commands_keep_invariants(void **state) {
  (void)state;
  random_commands(1);
}

/* Stride 48 in a 64-slot pool: the 40 ids share four preferred slots, so
 * most orders rest away from theirs and the displaced counts and the
 * order-id table carry every lookup. */
static void random_colliding_ids_keep_invariants(void **state) {
  (void)state;
  random_commands(48);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(create_validates_params),
      cmocka_unit_test(reason_strings),
      cmocka_unit_test(event_buffer_gives_same_events),
      cmocka_unit_test(prefault_backs_and_changes_nothing),
      cmocka_unit_test(large_book_grows_with_its_orders),
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
      T(new_order_rejects_in_order),
      T(post_only_rests_when_not_crossing),
      T(book_full_by_orders_and_accounts),
      T(duplicate_ids_and_reuse),
      T(gtc_day_ioc),
      T(price_time_priority),
      T(market_orders_stop_at_their_cap),
      T(fok_fill_or_kill),
      T(fok_with_stp),
      T(stp_all_modes),
      T(stp_edge_cases),
      T(cancel_rules),
      T(replace_keeps_priority),
      T(replace_loses_priority),
      T(replace_rejects_leave_order),
      T(mass_cancel_rules),
      T(expire_day_rules),
      T(depth_and_queries),
      T(foreach_restore_round_trip),
      T(restore_rejects),
      T(extreme_prices_far_apart),
      T(mass_cancel_after_log_compactions),
      T(full_pool_over_many_accounts),
      T(displaced_orders_are_found),
      T(displaced_count_saturates),
      T(create_leaves_arrays_untouched),
      T(random_commands_keep_invariants),
      T(random_colliding_ids_keep_invariants),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
