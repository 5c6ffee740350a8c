/*
 * hourglass/book.h - the price-time order book and matcher of one instrument.
 *
 * The book is a library on its own: create it with an instrument's
 * parameters, feed it commands (new, cancel, replace, mass cancel, expire DAY
 * orders), read its best prices and depth, destroy it. Every outcome leaves
 * through an event sink the caller provides, synchronously, before the
 * command function returns.
 *
 * Units. Prices are int64 ticks (for Hourglass futures one tick is 0.001 USD
 * per GPU-hour). Quantities are positive int64 contract counts. No floating
 * point anywhere.
 *
 * Determinism. The book reads no clock and no random source; the timestamp of
 * a command arrives inside it and is copied into its events. Event order is
 * fully specified below, so two books fed the same commands emit the same
 * events, byte for byte, and the reference book in tests/ can be compared to
 * this one event by event.
 *
 * Threads. A book is owned by exactly one thread: every function here must be
 * called from that thread, and the sink is called on it. Nothing is locked.
 *
 * Memory. hg_book_create() allocates everything the book will ever use (order
 * pool, id tables, price levels, bitmaps); no command allocates. A full pool
 * is a clean reject (HG_REJ_BOOK_FULL), never a crash.
 *
 * ---------------------------------------------------------------------------
 * Semantics (the contract between this book and the reference book)
 * ---------------------------------------------------------------------------
 * Self-match. Two orders self-match when they have the same account, or when
 * both carry the same non-zero SMP group. The incoming (aggressing) order's
 * STP mode decides what happens (HG_STP_DEFAULT means the book's configured
 * default, itself HG_STP_CANCEL_INCOMING unless set otherwise).
 *
 * New order, in this order:
 *  1. Validation. The first failing check gives the reject reason:
 *     side, type, TIF or STP out of range, or post_only not 0 or 1
 *     (HG_REJ_INVALID_FIELD);
 *     market order with TIF GTC or DAY, or post-only with IOC, FOK or
 *     market (HG_REJ_INVALID_TIF); order_id 0 (HG_REJ_INVALID_FIELD);
 *     qty <= 0 (HG_REJ_INVALID_QTY); qty > max_order_qty
 *     (HG_REJ_QTY_TOO_LARGE); for a limit order, price outside
 *     [min_price, max_price] (HG_REJ_PRICE_OUT_OF_RANGE); order_id already live in this book
 *     (HG_REJ_DUPLICATE_ORDER_ID); (account, client_order_id) already live
 *     in this book (HG_REJ_DUPLICATE_CLORDID); post-only that would cross
 *     the best opposite price (HG_REJ_POST_ONLY_WOULD_CROSS); for an
 *     order that could rest (GTC or DAY): max_orders orders already live,
 *     or max_accounts accounts already have live orders and this account
 *     has none (HG_REJ_BOOK_FULL). IOC, FOK and market orders never rest
 *     and need no slot.
 *     A rejected order emits exactly one HG_EV_REJECTED and changes nothing.
 *  2. HG_EV_ACCEPTED.
 *  3. A market order becomes an IOC limit order at its price, the caller's
 *     cap (the exchange gives the edge of the clearing's price band),
 *     clamped to [min_price, max_price]; with no cap (price <= 0) at
 *     max_price for a buy, min_price for a sell.
 *  4. FOK only: the quantity it could execute is counted first by walking the
 *     crossing levels best first, each FIFO in time order, applying its STP
 *     mode (a self-matching resting order is counted under NONE, skipped
 *     under CANCEL_RESTING, and ends the walk under CANCEL_INCOMING and
 *     CANCEL_BOTH). If it is less than qty, the order is killed:
 *     HG_EV_CANCELLED with HG_CXL_FOK_UNFILLED, nothing else changes.
 *  5. Matching: while the incoming order has quantity and the best opposite
 *     level crosses its limit, walk that level's FIFO oldest first:
 *       - a self-matching resting order under CANCEL_RESTING is removed
 *         (HG_EV_CANCELLED of the resting order, HG_CXL_SELF_TRADE) and
 *         the walk goes on; under CANCEL_INCOMING the walk stops; under
 *         CANCEL_BOTH the resting order is removed as above, then the walk
 *         stops; under NONE it trades like any other;
 *       - otherwise HG_EV_FILL at the resting order's price for
 *         min(incoming leaves, resting leaves); a resting order whose leaves
 *         reach 0 leaves the book (no separate event).
 *     When the walk leaves a level (level empty, incoming filled, or walk
 *     stopped), one HG_EV_LEVEL for that level's side and price gives its
 *     new aggregate quantity (0 when empty); this holds even when the walk
 *     stopped at the level's first order and the quantity did not change.
 *  6. End: a walk stopped by STP gives HG_EV_CANCELLED of the incoming order
 *     with HG_CXL_SELF_TRADE for its leaves. Otherwise, leaves > 0 of an IOC,
 *     FOK or market order give HG_EV_CANCELLED with HG_CXL_IOC_REMAINDER;
 *     leaves > 0 of a GTC or DAY order rest at the back of their level's FIFO,
 *     followed by HG_EV_LEVEL of that level.
 *
 * Cancel: an order_id that is not live in this book, or live but owned by a
 * different account, gets HG_EV_REJECTED with HG_REJ_UNKNOWN_ORDER (the same
 * reply in both cases, so no account learns of another's orders). Otherwise
 * HG_EV_CANCELLED (HG_CXL_USER) then HG_EV_LEVEL.
 *
 * Replace (new price, new open quantity; the order keeps its order_id,
 * client_order_id, side, TIF, STP mode and post-only flag):
 *  - HG_REJ_UNKNOWN_ORDER as for cancel; then, in this order, new_qty <= 0
 *    (HG_REJ_INVALID_QTY), > max_order_qty (HG_REJ_QTY_TOO_LARGE), price
 *    out of range (as for new), a post-only order whose new price
 *    would cross (HG_REJ_POST_ONLY_WOULD_CROSS). A rejected replace leaves
 *    the order exactly as it was.
 *  - Same price and new_qty <= current leaves: HG_EV_REPLACED with
 *    priority_kept = 1, then HG_EV_LEVEL (also when nothing changed).
 *  - Otherwise (price changed, or quantity increased) the order loses its
 *    time priority: HG_EV_REPLACED with priority_kept = 0; the order leaves
 *    its level (HG_EV_LEVEL of the old level); then it is processed as an
 *    incoming order from step 5 on, with its new price and quantity.
 *
 * Mass cancel (account, optionally one side): every live order of that
 * account (and side) in this book, in time-priority order (oldest entry
 * first; an order re-entered by a replace counts from its re-entry), gets
 * HG_EV_CANCELLED (HG_CXL_MASS_CANCEL) followed by HG_EV_LEVEL. No events if
 * there are none, or if sides is not one of the three HG_SIDES_ values.
 *
 * Expire DAY orders (end of session): every live DAY order, both sides, in
 * time-priority order, gets HG_EV_CANCELLED (HG_CXL_EXPIRY) then HG_EV_LEVEL.
 *
 * Cancel session-scoped orders (the sessions that entered them are gone):
 * every live order entered with session_scoped = 1, both sides, every
 * account, in time-priority order, gets HG_EV_CANCELLED (HG_CXL_MASS_CANCEL)
 * then HG_EV_LEVEL. The flag changes nothing else: a scoped order matches,
 * rests, is replaced (keeping the flag) and cancelled like any other.
 *
 * No price band: the band around the reference price is the clearing's
 * (settlement/CONTRACT.md 4.5), checked by the exchange before an order
 * reaches the book, and a market order's cap is its edge (step 3).
 */
#ifndef HOURGLASS_BOOK_H
#define HOURGLASS_BOOK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int64_t hg_price_t;   /* ticks */
typedef int64_t hg_qty_t;     /* contracts; positive in commands */
typedef uint64_t hg_oid_t;    /* exchange order id, unique per book, never 0 */
typedef uint32_t hg_account_t;

typedef enum hg_side { HG_SIDE_BUY = 0, HG_SIDE_SELL = 1 } hg_side_t;
/* Side filter of a mass cancel. */
enum { HG_SIDES_BUY = 0, HG_SIDES_SELL = 1, HG_SIDES_BOTH = 2 };

typedef enum hg_ord_type { HG_ORD_LIMIT = 0, HG_ORD_MARKET = 1 } hg_ord_type_t;

typedef enum hg_tif {
  HG_TIF_GTC = 0, /* good till cancelled */
  HG_TIF_DAY = 1, /* expired by hg_book_expire_day() at the daily cycle */
  HG_TIF_IOC = 2, /* immediate or cancel */
  HG_TIF_FOK = 3  /* fill or kill: all of it now, or nothing */
} hg_tif_t;

typedef enum hg_stp {
  HG_STP_DEFAULT = 0,          /* the book's configured default */
  HG_STP_CANCEL_RESTING = 1,   /* cancel the resting order, keep matching */
  HG_STP_CANCEL_INCOMING = 2,  /* cancel the incoming order's remainder */
  HG_STP_CANCEL_BOTH = 3,      /* cancel both */
  HG_STP_NONE = 4              /* opt out: self-trades happen */
} hg_stp_t;

/* Why an order or request was rejected. Stable numbers: they go on the wire. */
#define HG_REJECT_MAP(XX)                                                       \
  XX(NONE,                  0, "no reject")                                     \
  XX(INVALID_FIELD,         1, "a field is out of range")                       \
  XX(INVALID_TIF,           2, "time in force not allowed for this order type") \
  XX(INVALID_QTY,           3, "quantity must be positive")                     \
  XX(QTY_TOO_LARGE,         4, "quantity above the maximum order size")         \
  XX(PRICE_OUT_OF_RANGE,    5, "price outside the instrument's price range")    \
  /* 6 was PRICE_BAND: the band is the clearing's (book.h, top) */           \
  XX(DUPLICATE_ORDER_ID,    7, "order id already live")                         \
  XX(DUPLICATE_CLORDID,     8, "client order id already live for the account")  \
  XX(POST_ONLY_WOULD_CROSS, 9, "post-only order would cross")                   \
  XX(BOOK_FULL,            10, "order book capacity exhausted")                 \
  XX(UNKNOWN_ORDER,        11, "unknown order")

typedef enum hg_reject {
#define HG_REJECT_ENUM(name, num, msg) HG_REJ_##name = num,
  HG_REJECT_MAP(HG_REJECT_ENUM)
#undef HG_REJECT_ENUM
  HG_REJ_BOOK_LAST_
} hg_reject_t;

/* Why a live order left the book other than by filling. Stable numbers. */
#define HG_CANCEL_MAP(XX)                                                       \
  XX(USER,          1, "cancelled by the owner")                                \
  XX(IOC_REMAINDER, 2, "unfilled remainder of an IOC or market order")          \
  XX(SELF_TRADE,    3, "self-trade prevention")                                 \
  XX(MASS_CANCEL,   4, "mass cancel")                                           \
  XX(EXPIRY,        5, "DAY order expired at the daily cycle")                  \
  XX(FOK_UNFILLED,  6, "fill-or-kill order could not be filled in full")

typedef enum hg_cancel_reason {
#define HG_CANCEL_ENUM(name, num, msg) HG_CXL_##name = num,
  HG_CANCEL_MAP(HG_CANCEL_ENUM)
#undef HG_CANCEL_ENUM
  HG_CXL_BOOK_LAST_
} hg_cancel_reason_t;

typedef enum hg_book_event_type {
  HG_EV_ACCEPTED = 1,  /* order validated and assigned to the book */
  HG_EV_REJECTED = 2,  /* new, cancel or replace refused; reason in .reason */
  HG_EV_FILL = 3,      /* one execution between a maker and a taker */
  HG_EV_CANCELLED = 4, /* order left the book unfilled; reason in .reason */
  HG_EV_REPLACED = 5,  /* replace applied; new price and leaves */
  HG_EV_LEVEL = 6      /* aggregate quantity at (side, price) is now .qty */
} hg_book_event_type_t;

/* Which command produced a reject. */
typedef enum hg_book_cmd {
  HG_CMD_NEW = 1,
  HG_CMD_CANCEL = 2,
  HG_CMD_REPLACE = 3
} hg_book_cmd_t;

/*
 * One event. Flat and fixed-size so it can be copied into a ring. Fields not
 * listed for a type are zero.
 *  ACCEPTED:  order_id, client_order_id, account, side, price (the limit;
 *             for a market order its cap, as step 3), qty (order qty),
 *             leaves (= qty).
 *  REJECTED:  cmd, reason (hg_reject_t), order_id, client_order_id,
 *             account, side (new only), price and qty as requested.
 *             Cancel and replace carry no client_order_id, so theirs is 0
 *             (for a replace, price and qty are new_price and new_qty).
 *  FILL:      order_id/client_order_id/account = taker's; maker_order_id,
 *             maker_client_order_id, maker_account; side = aggressor side;
 *             price = maker's price; qty = traded; leaves = taker's leaves
 *             after the fill; maker_leaves = maker's leaves after it.
 *  CANCELLED: reason (hg_cancel_reason_t), order_id, client_order_id,
 *             account, side, price, qty = leaves cancelled, leaves = 0.
 *  REPLACED:  order_id, client_order_id, account, side, price (new), qty and
 *             leaves (new open quantity), priority_kept.
 *  LEVEL:     side, price, qty = new aggregate resting quantity (0 = gone).
 * ts is the timestamp of the command that caused the event;
 * instrument_id is the book's.
 */
typedef struct hg_book_event {
  uint8_t type;          /* hg_book_event_type_t */
  uint8_t side;          /* hg_side_t */
  uint8_t cmd;           /* hg_book_cmd_t, REJECTED only */
  uint8_t priority_kept; /* REPLACED only */
  uint16_t reason;       /* hg_reject_t or hg_cancel_reason_t */
  uint16_t pad_;
  uint32_t instrument_id;
  hg_account_t account;
  hg_account_t maker_account;
  uint32_t pad2_;
  hg_oid_t order_id;
  uint64_t client_order_id;
  hg_oid_t maker_order_id;
  uint64_t maker_client_order_id;
  hg_price_t price;
  hg_qty_t qty;
  hg_qty_t leaves;
  hg_qty_t maker_leaves;
  uint64_t ts;
} hg_book_event_t;

/*
 * The event sink. Called synchronously, on the book's thread, once per event,
 * in order. ev is valid only during the call: copy what you keep. The sink
 * must not call back into the same book.
 */
typedef void (*hg_book_sink_fn)(void *ctx, const hg_book_event_t *ev);

typedef struct hg_book_params {
  uint32_t instrument_id;
  int64_t tick_size;      /* value of one tick, e.g. 1000 micro-USD per GPU-hour; informational */
  int64_t contract_unit;  /* e.g. 1000 GPU-hours; informational */
  hg_price_t min_price;   /* lowest valid price, ticks, >= 1 */
  hg_price_t max_price;   /* highest valid price, ticks; max - min < HG_BOOK_MAX_LEVELS */
  hg_qty_t max_order_qty; /* largest order, >= 1 */
  hg_price_t ref_price;   /* the listing's price, ticks, 0 = none: the clearing's
                             first settlement price; the book does not use it */
  uint32_t max_orders;    /* capacity of the resting-order pool, >= 1 */
  uint32_t max_accounts;  /* distinct accounts with live orders, >= 1 */
  uint8_t default_stp;    /* hg_stp_t used for HG_STP_DEFAULT; 0 = CANCEL_INCOMING */
} hg_book_params_t;
/* Also rejected by hg_book_create: ref_price < 0, default_stp > HG_STP_NONE, and
 * max_order_qty * max_orders > INT64_MAX (so no aggregate quantity can overflow). */

/* Widest price range a book accepts: max_price - min_price + 1 levels. */
#define HG_BOOK_MAX_LEVELS (1u << 24)

typedef struct hg_order_new {
  hg_oid_t order_id;        /* assigned by the caller, unique among live orders */
  uint64_t client_order_id; /* the client's id, unique among its live orders */
  hg_account_t account;
  uint32_t smp_group;       /* 0 = none; same non-zero group self-matches */
  hg_price_t price;         /* limit price in ticks; for a market order its cap
                               (step 3), <= 0 none */
  hg_qty_t qty;
  uint8_t side;             /* hg_side_t */
  uint8_t type;             /* hg_ord_type_t */
  uint8_t tif;              /* hg_tif_t */
  uint8_t stp;              /* hg_stp_t */
  uint8_t post_only;        /* 0 or 1 */
  uint8_t session_scoped;   /* non-zero: the order lives only as long as the
                               session that entered it (stored as 1); see
                               hg_book_cancel_scoped() */
  uint64_t ts;              /* command timestamp, copied into events */
} hg_order_new_t;

/* A live resting order, as returned by queries and used by snapshots. */
typedef struct hg_book_order {
  hg_oid_t order_id;
  uint64_t client_order_id;
  hg_account_t account;
  uint32_t smp_group;
  hg_price_t price;
  hg_qty_t qty;      /* original quantity at entry or last replace */
  hg_qty_t leaves;   /* open quantity */
  uint64_t ts;       /* timestamp of entry (or of the replace that re-entered it) */
  uint8_t side, tif, stp, post_only;
  uint8_t session_scoped; /* 0 or 1, as entered (a replace keeps it) */
} hg_book_order_t;

typedef struct hg_book_level {
  hg_price_t price;
  hg_qty_t qty;    /* aggregate resting quantity */
  uint32_t orders; /* number of resting orders */
} hg_book_level_t;

typedef struct hg_book hg_book_t;

/*
 * Creates a book. Validates params (ranges above) and allocates all memory.
 * Returns 0 and sets *out, or HG_EINVAL (bad params) or -ENOMEM. On failure
 * *out is untouched and nothing is allocated. sink may not be NULL.
 * The large arrays are reserved, not written: the kernel backs their pages
 * with zeroes as the book first uses them, so creating a book costs about a
 * millisecond whatever max_orders is, and a book with few orders uses little
 * memory. (Under memory overcommit limits a first touch can still fail as
 * any page fault can; size max_orders for the instrument.)
 */
int hg_book_create(const hg_book_params_t *params, hg_book_sink_fn sink, void *sink_ctx,
                   hg_book_t **out);

/* Frees everything. NULL is a no-op. */
void hg_book_destroy(hg_book_t *book);

/*
 * Backs every page of the book's arrays now, so that no command of the
 * book's life takes a page fault (a book sized for 1M orders maps about
 * 200 MiB; first touches during trading cost a fault and a 2 MiB clear
 * each). Resident memory then grows to the whole capacity at once: call it
 * where that is wanted (a venue's listing, a benchmark's set-up), never on
 * the order path. Idempotent; contents unchanged. 0, or -ENOMEM when the
 * kernel cannot back them (the book stays usable, with faults on first
 * touch as without this call).
 */
int hg_book_prefault(hg_book_t *book);

/* Makes the book build each event in *buf (the caller's, alive as long as
 * the book) and hand buf to the sink, instead of its own buffer; NULL goes
 * back to the book's own. For a sink that keeps the event inside a larger
 * record: it finds the event already in place. As always, the sink must not
 * call back into the book, and buf's contents change with every event. */
void hg_book_set_event_buffer(hg_book_t *book, hg_book_event_t *buf);

/* Returns the params the book was created with. */
const hg_book_params_t *hg_book_params(const hg_book_t *book);

/* Commands. Outcomes are events, so these cannot fail and return void. */
void hg_book_submit(hg_book_t *book, const hg_order_new_t *order);
void hg_book_cancel(hg_book_t *book, hg_oid_t order_id, hg_account_t account, uint64_t ts);
void hg_book_replace(hg_book_t *book, hg_oid_t order_id, hg_account_t account,
                     hg_price_t new_price, hg_qty_t new_qty, uint64_t ts);
/* sides: HG_SIDES_BUY, HG_SIDES_SELL or HG_SIDES_BOTH. Returns orders cancelled. */
uint32_t hg_book_mass_cancel(hg_book_t *book, hg_account_t account, int sides, uint64_t ts);
/* Cancels every DAY order (end of session). Returns orders cancelled. */
uint32_t hg_book_expire_day(hg_book_t *book, uint64_t ts);
/* Cancels every session-scoped order (entered with session_scoped = 1), in
 * time priority, reason HG_CXL_MASS_CANCEL. Returns orders cancelled. O(n log
 * n) in the live orders: for restarts, never the order path. */
uint32_t hg_book_cancel_scoped(hg_book_t *book, uint64_t ts);

/*
 * Prefetch hints for a caller that holds several commands at once (the
 * engine's batch from its ring, a journal replay, a benchmark). A resting
 * order in a deep book is a cache miss, and the lines it links to are a
 * second, dependent miss; a command's own work cannot hide them. Calling
 * hg_book_prefetch_order() for the command after next and
 * hg_book_prefetch_links() for the next one lets those misses overlap the
 * current command. They read but never change the book: no state, no
 * events, no effect on results, and a stale or wrong id is harmless (for an
 * id that is not live at its preferred slot, hg_book_prefetch_links at most
 * starts loading the order-id table's line for it). Owner thread only.
 *   hg_book_prefetch_order: the line of order_id (a cancel or replace), or
 *     the slot a new order_id would rest in. Reads nothing itself.
 *   hg_book_prefetch_links: what a cancel or replace of order_id will write
 *     (its level and account neighbours); reads the order's line, so call it
 *     once hg_book_prefetch_order() has had a command's time to land.
 *   hg_book_prefetch_new: what submitting order will touch first (the tail
 *     of its level, or the head of the best opposite level it would cross).
 */
void hg_book_prefetch_order(const hg_book_t *book, hg_oid_t order_id);
void hg_book_prefetch_links(const hg_book_t *book, hg_oid_t order_id);
void hg_book_prefetch_new(const hg_book_t *book, const hg_order_new_t *order);

/* Queries. O(1) unless stated. */
/* Best price of a side: 0 and *price, *qty set, or HG_ENOTFOUND if the side is empty. */
int hg_book_best(const hg_book_t *book, hg_side_t side, hg_price_t *price, hg_qty_t *qty);
/* Aggregate resting quantity at (side, price); 0 if none or out of range. */
hg_qty_t hg_book_qty_at(const hg_book_t *book, hg_side_t side, hg_price_t price);
/* Top n levels of a side, best first, into out[]. Returns how many were written.
 * O(n log L) for L levels in range. */
size_t hg_book_depth(const hg_book_t *book, hg_side_t side, hg_book_level_t *out, size_t n);
/* A live order by id, owned by account: 0 and *out, or HG_ENOTFOUND (also when
 * another account owns it). */
int hg_book_find(const hg_book_t *book, hg_oid_t order_id, hg_account_t account,
                 hg_book_order_t *out);
/* Number of live resting orders. */
uint32_t hg_book_order_count(const hg_book_t *book);

/*
 * Calls fn for every live order in time-priority order (oldest first): the
 * canonical order used by snapshots and the state hash. Restoring the orders
 * in this order into an empty book reproduces every level's FIFO.
 */
void hg_book_foreach(const hg_book_t *book, void (*fn)(void *ctx, const hg_book_order_t *o),
                     void *ctx);

/*
 * Puts a resting order back without matching and without events (snapshot
 * restore). Returns 0, HG_EINVAL (bad fields, or it would cross the opposite
 * side), HG_EEXISTS (order id or client order id live) or HG_EFULL.
 * Bad fields: order_id 0, side, STP, post_only or session_scoped out of
 * range, TIF not GTC or
 * DAY, leaves not in [1, qty], qty > max_order_qty, price outside
 * [min_price, max_price].
 */
int hg_book_restore(hg_book_t *book, const hg_book_order_t *order);

/* Static strings for reject and cancel reasons ("unknown" if out of range). */
const char *hg_reject_str(int reason);
const char *hg_cancel_reason_str(int reason);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_BOOK_H */
