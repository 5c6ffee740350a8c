/*
 * exchange_int.h - the exchange state machine's layout, shared by its three
 * translation units. Not installed.
 *
 *   exchange.c         create/destroy, hg_exchange_apply() and the order path
 *                      (new order, cancel, replace, mass cancel), listing,
 *                      delisting, halts, sessions, accounts and cash, queries.
 *   exchange_settle.c  the settlement commands: provider grades, samples,
 *                      fixings, the daily cycle, expiry and the curve; the
 *                      index slots and their receipts; the fixing queries.
 *   exchange_snap.c    canonical serialization, state hash and restore.
 *
 * The lookups and the event stamp are static inline here: the order path
 * calls them per command and keeps them inlined whatever file it is in.
 * Everything else shared is named hg_ex__*, defined in the file named at its
 * declaration. Same thread rules as hourglass/exchange.h: one thread owns
 * an hg_exchange_t and makes every call.
 */
#ifndef HOURGLASS_EXCHANGE_INT_H
#define HOURGLASS_EXCHANGE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "hourglass/civil.h"
#include "hourglass/exchange.h"
#include "hourglass/idhint.h"


#define DEFAULT_MAX_INDEXES 16u
#define DEFAULT_MAX_FIXING_DAYS 4096u
#define DEFAULT_MAX_STAGED (1u << 20)
/* Listed months per (GPU, grade) curve (settlement/CONTRACT.md section 1). */
#define CURVE_MONTHS 12u
/* Book parameters of curve contracts: 0.001 USD per GPU-hour ticks, 1,000
 * GPU-hours, prices 1 tick .. 100 USD per GPU-hour. The 20% band and the
 * 1,000-contract order size are the clearing check's. */
#define CURVE_MAX_PRICE 100000
#define CURVE_MAX_ORDER_QTY 1000

typedef struct instrument {
  uint32_t id;
  uint8_t halted;
  char symbol[HG_SYMBOL_MAX + 1];
  hg_book_t *book;   /* owned by the exchange */
  uint32_t index;    /* slot in ex->idx; group id = index + 1 */
  uint16_t year;
  uint8_t month;
  int32_t first_day; /* first and last calendar day of the delivery month */
  int32_t last_day;
  uint64_t cutoff_ts; /* last trading day, cycle time of day (16:00 UTC), ns */
} instrument_t;

/* An inference-margin spread (settlement/CONTRACT.md 7.4): its own book,
 * no clearing record; its fills are booked on the two legs
 * (exchange_spread.c). */
typedef struct spread {
  uint32_t id;
  uint8_t halted;
  char symbol[HG_SYMBOL_MAX + 1];
  hg_book_t *book;   /* owned by the exchange */
  uint32_t leg_t;    /* token leg's instrument id */
  uint32_t leg_g;    /* GPU-hour leg's instrument id */
  uint32_t n_t, n_g; /* ratio, 1..HG_EX_SPREAD_RATIO_MAX each */
  int32_t last_day;  /* last calendar day of the delivery month */
  uint64_t cutoff_ts;
} spread_t;

/* Spreads listed at once; their table lives in the exchange. */
#define HG_EX_MAX_SPREADS 32
#define HG_EX_SPREAD_RATIO_MAX 100

typedef struct account {
  hg_account_t id;
  uint32_t firm;
} account_t;

/* A live order's identity, collected before a delisting cancels it. */
typedef struct order_ref {
  hg_oid_t order_id;
  hg_account_t account;
} order_ref_t;

typedef struct current {
  uint64_t seq;
  uint64_t ts;
  uint32_t type;
  uint16_t relabel;        /* cancel reason replacing HG_CXL_USER, 0 = none */
  hg_qty_t replace_leaves; /* leaves of the order being replaced */
  /* a liquidation order of a MARK being submitted (liq != 0): its fills
   * are booked by hg_clearing_liq_fill and its events flagged */
  uint8_t liq;
  uint8_t liq_side;
  hg_account_t liq_account;
  uint64_t liq_led;        /* ledger size before the fill being booked */
  uint32_t liq_fills;      /* liquidation fills of this MARK */
} current_t;

typedef struct staged {
  uint32_t index;
  int32_t day;
  hg_index_sample_t s;
} staged_t;

typedef struct index {
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  hg_index_fixing_t *fix;       /* owned; storage of hist, max_fixing_days */
  hg_index_history_t hist;
  hg_exchange_receipt_t *rcpt;  /* owned; max_fixing_days slots, by day */
  uint32_t n_rcpt;
  uint8_t has_curve;
  uint8_t next_month;           /* next month the curve lists */
  uint16_t next_year;
  uint32_t next_id;             /* its instrument id */
  uint32_t curve_max_orders;
  uint32_t curve_max_accounts;
  int64_t curve_ref;
} index_t;

struct hg_exchange {
  hg_exchange_config_t cfg;
  hg_exchange_sink_fn sink;
  void *sink_ctx;
  instrument_t *instr; /* owned; cfg.max_instruments slots, n_instr used, by id */
  uint32_t n_instr;
  account_t *acct;     /* owned; cfg.max_accounts slots, n_acct used, by id */
  uint32_t n_acct;
  /* Owned; position hints by id for instr[] and acct[] (hourglass/idhint.h),
   * confirmed against the array and backed by the binary search. */
  hg_idhint_t instr_dir, acct_dir;
  order_ref_t *scratch; /* owned; cfg.max_book_orders slots, delisting only */
  uint32_t scratch_n;
  hg_clearing_t *clr;   /* owned */
  hg_clearing_config_t ccfg; /* as created (restore: band and cycle time from the blob) */
  hg_clearing_top_t *tops;   /* owned; cfg.max_instruments slots, daily cycle and MARK */
  hg_clearing_liq_slice_t *liq; /* owned; n_liq_cap slots, grown by MARK only */
  size_t n_liq_cap;
  index_t *idx;        /* owned; cfg.max_indexes slots, n_idx used, creation order */
  uint32_t n_idx;
  hg_index_registry_t reg; /* owned: provider grades */
  staged_t *staged;    /* owned; n_staged used of cap_staged (grows) */
  uint32_t n_staged, cap_staged;
  hg_index_config_t icfg;
  uint64_t last_seq;
  uint64_t last_ts;
  uint64_t sessions;          /* END_OF_SESSION commands applied */
  uint32_t last_session_date; /* date of the last one */
  int32_t last_cycle_day;     /* day of the last DAILY_SETTLEMENT, -1 none */
  /* UTC day the clearing's delivery-month flags were last set for, -1 none.
   * Not serialized: the flags are (in the clearing blob), and they are a
   * function of this day, so a restore simply sets them again. */
  int32_t flags_day;
  int fault;                  /* sticky: a clearing call failed on the book path */
  current_t cur;
  /* Book events are built here rather than in a zeroed local: only the
   * fields a book event sets are ever written, so the rest stay zero from
   * create, and no 216-byte clear runs per event. bev for events the book
   * emits, rev for the exchange's own order rejects. */
  hg_exchange_event_t bev, rev;
  spread_t spr[HG_EX_MAX_SPREADS]; /* by id, n_spr used */
  uint32_t n_spr;
};

/* A day a command may name: 0..HG_DAY_MAX. */
static inline int day_ok(int32_t d) { return d >= 0 && d <= HG_DAY_MAX; }

/* Position of id in a sorted array of n records of stride bytes whose first
 * member is a uint32_t id, or of where it would be inserted (*found = 0). */
static inline uint32_t id_pos(const void *base, size_t stride, uint32_t n, uint32_t id,
                              int *found) {
  const unsigned char *b = base;
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    uint32_t v;
    memcpy(&v, b + (size_t)mid * stride, sizeof v);
    if (v < id) lo = mid + 1;
    else hi = mid;
  }
  uint32_t v = 0;
  if (lo < n) memcpy(&v, b + (size_t)lo * stride, sizeof v);
  *found = lo < n && v == id;
  return lo;
}

static inline uint32_t instr_pos(const hg_exchange_t *ex, uint32_t id, int *found) {
  return id_pos(ex->instr, sizeof *ex->instr, ex->n_instr, id, found);
}

static inline instrument_t *instr_find(const hg_exchange_t *ex, uint32_t id) {
  uint32_t h = hg_idhint_get(&ex->instr_dir, id);
  if (h < ex->n_instr && ex->instr[h].id == id) return &ex->instr[h];
  int found;
  uint32_t i = instr_pos(ex, id, &found);
  return found ? &ex->instr[i] : NULL;
}

static inline uint32_t acct_pos(const hg_exchange_t *ex, hg_account_t id, int *found) {
  return id_pos(ex->acct, sizeof *ex->acct, ex->n_acct, id, found);
}

static inline account_t *acct_find(const hg_exchange_t *ex, hg_account_t id) {
  uint32_t h = hg_idhint_get(&ex->acct_dir, id);
  if (h < ex->n_acct && ex->acct[h].id == id) return &ex->acct[h];
  int found;
  uint32_t i = acct_pos(ex, id, &found);
  return found ? &ex->acct[i] : NULL;
}

/* Refreshes the hints of the records at positions [from, n), which an
 * insertion or a removal at from has moved. */
static inline void instr_dir_refresh(hg_exchange_t *ex, uint32_t from) {
  for (uint32_t i = from; i < ex->n_instr; i++) hg_idhint_set(&ex->instr_dir, ex->instr[i].id, i);
}

static inline void acct_dir_refresh(hg_exchange_t *ex, uint32_t from) {
  for (uint32_t i = from; i < ex->n_acct; i++) hg_idhint_set(&ex->acct_dir, ex->acct[i].id, i);
}

/* A zeroed event stamped with the current command. */
static inline void event_init(const hg_exchange_t *ex, hg_exchange_event_t *ev, uint16_t type) {
  memset(ev, 0, sizeof *ev);
  ev->seq = ex->cur.seq;
  ev->ts = ex->cur.ts;
  ev->type = type;
  ev->command = (uint16_t)ex->cur.type;
}

/* The exchange event of a book event, stamped with the current command in
 * ex->bev (a cancel relabelled when the command asks). The exchange's books
 * build their events in ex->bev.book already (hg_book_set_event_buffer):
 * copying an event just written would stall on store forwarding. */
static inline hg_exchange_event_t *book_event(hg_exchange_t *ex, const hg_book_event_t *bev) {
  hg_exchange_event_t *ev = &ex->bev;
  ev->seq = ex->cur.seq;
  ev->ts = ex->cur.ts;
  ev->type = HG_XEV_BOOK;
  ev->command = (uint16_t)ex->cur.type;
  ev->instrument_id = bev->instrument_id;
  ev->account = bev->account;
  if (bev != &ev->book) ev->book = *bev;
  if (ex->cur.relabel != 0 && bev->type == HG_EV_CANCELLED && bev->reason == HG_CXL_USER)
    ev->book.reason = ex->cur.relabel;
  return ev;
}

/* Records the first failed clearing call (sticky; see exchange.c). */
static inline void clr_fault(hg_exchange_t *ex, int rc) {
  if (rc != 0 && ex->fault == 0) ex->fault = rc;
}

/* exchange.c */

/* The book sink every book of the exchange is created with (ctx = ex). */
void hg_ex__book_sink(void *ctx, const hg_book_event_t *bev);
/* Back to the just-created state after a failed restore. */
void hg_ex__reset(hg_exchange_t *ex);
/* The clearing's reference price of an instrument and its inclusive price
 * band, in ticks (all 0: no reference; lo and hi 0: the band is off). */
void hg_ex__ref_band(const hg_exchange_t *ex, uint32_t id, int64_t *ref, int64_t *lo,
                     int64_t *hi);
void hg_ex__emit_reject(hg_exchange_t *ex, uint16_t reason, uint32_t instrument_id,
                        hg_account_t account);
/* Fills the delivery-month fields of inst from (year, month). */
void hg_ex__set_month(hg_exchange_t *ex, instrument_t *inst, uint32_t year, uint32_t month);
/* Lists one contract (LIST_INSTRUMENT's checks, book, clearing): emits
 * HG_XEV_LISTED or one reject; returns 0 or -ENOMEM. */
int hg_ex__list_one(hg_exchange_t *ex, const char *symbol, const hg_book_params_t *params);
/* Cancels every resting order of inst in time priority, relabelled with
 * reason; returns how many. */
uint32_t hg_ex__cancel_all(hg_exchange_t *ex, hg_book_t *book, uint16_t reason);
/* Emits HG_XEV_CASH for each ledger entry from index from on (the
 * guarantee's kinds; day: the cycle's, or -1 outside a cycle). */
void hg_ex__emit_cash(hg_exchange_t *ex, uint64_t from, int32_t day);
/* Destroys the book at instr[pos] and closes the gap. */
void hg_ex__remove_instrument(hg_exchange_t *ex, uint32_t pos);
/* Expires every book's day orders; returns how many. */
int64_t hg_ex__expire_day_orders(hg_exchange_t *ex);
/* Submits the NEW_ORDER c to book as order oid at price (exchange.c). */
void hg_ex__submit(hg_exchange_t *ex, hg_book_t *book, const hg_cmd_new_order_t *c, hg_oid_t oid,
                   hg_price_t price);
/* The book-shaped reject of an order command (exchange.c). */
void hg_ex__emit_order_reject(hg_exchange_t *ex, uint8_t cmd, uint16_t reason,
                              uint32_t instrument_id, hg_account_t account, hg_oid_t order_id,
                              uint64_t client_order_id, uint8_t side, hg_price_t price,
                              hg_qty_t qty, const hg_clearing_result_t *res);

/* exchange_spread.c: the inference-margin spread (CONTRACT.md 7.4). */
spread_t *hg_ex__spread_find(hg_exchange_t *ex, uint32_t id);
/* Whether id or symbol is taken by a spread. */
int hg_ex__spread_taken(const hg_exchange_t *ex, uint32_t id, const char *symbol);
/* LIST_INSTRUMENT of a spread (legs named): emits LISTED or a reject. */
int hg_ex__spread_list(hg_exchange_t *ex, const hg_cmd_list_instrument_t *c);
void hg_ex__spread_new_order(hg_exchange_t *ex, spread_t *sp, const hg_cmd_new_order_t *c);
/* Cancels every resting order of the spread (reason as hg_ex__cancel_all)
 * and removes it; emits HG_XEV_DELISTED. */
void hg_ex__spread_delist(hg_exchange_t *ex, spread_t *sp, uint16_t reason);
/* Delists every spread with leg id (the leg expires). */
void hg_ex__spread_drop_leg(hg_exchange_t *ex, uint32_t leg);
/* The daily cycle of day: DAY orders expire and the spreads whose last
 * trading day it is lose their resting orders; returns orders cancelled. */
int64_t hg_ex__spread_cycle(hg_exchange_t *ex, int32_t day);
void hg_ex__spread_free(hg_exchange_t *ex);
/* Gives the clearing the spreads' pairs (after a listing, delisting or
 * restore). */
void hg_ex__spread_sync(hg_exchange_t *ex);
/* The spread book sink: keeps the legs' open quantities and positions. */
void hg_ex__spread_sink(void *ctx, const hg_book_event_t *bev);
/* P_t of section 7.4 for spread price s and GPU reference rg. */
int64_t hg_ex__spread_token_price(const spread_t *sp, int64_t s, int64_t rg);

/* exchange_settle.c */

/* True when (gpu, grade) is a token product group: a (class, grade) of the
 * output grade table (settlement/CONTRACT.md 7.3; exchange_settle.c). */
bool hg_ex__idx_is_token(const char *gpu, const char *grade);

/* Applies one settlement command (SET_PROVIDER_GRADE .. LIST_CURVE):
 * 0 once its events are out, or -ENOMEM with nothing changed. */
int hg_ex__apply_settlement(hg_exchange_t *ex, const hg_command_t *cmd);
/* The slot of (gpu, grade), or -1. */
int hg_ex__idx_find(const hg_exchange_t *ex, const char *gpu, const char *grade);
/* The slot of (gpu, grade), created if new: >= 0, HG_EFULL or -ENOMEM.
 * gpu and grade are valid names. */
int hg_ex__idx_get(hg_exchange_t *ex, const char *gpu, const char *grade);
/* Tells the clearing the group's latest fixings (see exchange_settle.c). */
void hg_ex__idx_push_fixings(hg_exchange_t *ex, uint32_t slot);
/* Frees every index slot's storage; n_idx becomes 0. */
void hg_ex__free_indexes(hg_exchange_t *ex);
/* Whether a staged sample's fields are valid. */
int hg_ex__sample_ok(const hg_index_sample_t *s);

#endif /* HOURGLASS_EXCHANGE_INT_H */
