/*
 * hourglass/exchange.h - the exchange state machine and its command schema.
 *
 * One hg_exchange_t owns every listed instrument's order book and the account
 * state, and applies commands one at a time, in sequence order. It is the only
 * writer of that state. Everything that changes the exchange is a command
 * (hg_command_t): the sequencer stamps it with a seq and a timestamp, the
 * journal stores it (encoded as a hourglass.v1.Command protobuf with
 * hg_command_encode()), and the engine thread or a replay feeds it to
 * hg_exchange_apply(). Outcomes leave as events (hg_exchange_event_t) through
 * a sink, synchronously, before hg_exchange_apply() returns.
 *
 * Determinism. The state machine reads no clock and no random source and does
 * no floating point; iteration orders are fixed (instruments and accounts by
 * id, orders in time priority). The same sequence of commands therefore
 * yields the same events, byte for byte, and the same state.
 * hg_exchange_serialize() writes that state as a canonical byte stream and
 * hg_exchange_hash() is the SHA-256 of it: two exchanges with equal hashes
 * hold equal state.
 *
 * Rules of the commands (rejects are events, never error returns):
 *  - Every command carries seq > 0, strictly greater than the last applied
 *    one; a command that breaks this is refused with HG_ESTATE and changes
 *    nothing (a replay skips seq <= hg_exchange_last_seq()).
 *  - Order ids are assigned by the state machine: a new order's id is the
 *    seq of its command. A replace keeps the order's id.
 *  - NEW_ORDER: unknown instrument (HG_XREJ_UNKNOWN_INSTRUMENT), halted
 *    (HG_XREJ_INSTRUMENT_HALTED), unknown account (HG_XREJ_UNKNOWN_ACCOUNT),
 *    then the pre-trade risk check (HG_XREJ_RISK), then the book, then the
 *    fills are booked. Exchange-level rejects of order commands come out as
 *    a book event HG_EV_REJECTED whose reason is an hg_xreject_t (numbers
 *    from 64 on, so they never collide with hg_reject_t).
 *  - REPLACE: as NEW_ORDER (a halted instrument rejects replaces).
 *  - CANCEL: unknown instrument, then unknown account, are rejected as for
 *    NEW_ORDER; cancels are allowed while halted so that participants can
 *    always take risk off.
 *  - MASS_CANCEL: sides out of range (HG_XREJ_INVALID_PARAMS), unknown
 *    account, then, with an instrument_id, unknown instrument (each an
 *    HG_XEV_REJECTED); cancels in that instrument or, with instrument_id 0,
 *    in every instrument in id order; allowed while halted. No events when
 *    the account has nothing live.
 *  - LIST_INSTRUMENT: id 0 or an invalid symbol or book params
 *    (HG_XREJ_INVALID_PARAMS), id or symbol already listed
 *    (HG_XREJ_INSTRUMENT_EXISTS), max_orders above the configured
 *    max_book_orders, max_accounts above the configured max_accounts, or
 *    every instrument slot taken (HG_XREJ_CAPACITY).
 *    Emits HG_XEV_LISTED. The instrument starts trading.
 *  - DELIST_INSTRUMENT: cancels every live order of the book in time
 *    priority (book HG_EV_CANCELLED events whose reason is HG_XCXL_DELISTED,
 *    each followed by its HG_EV_LEVEL), then HG_XEV_DELISTED; the
 *    instrument and its book are gone and its id may be listed again.
 *  - HALT / RESUME: HG_XEV_HALTED / HG_XEV_RESUMED; halting a halted or
 *    resuming a trading instrument is HG_XREJ_NOT_IN_STATE.
 *  - END_OF_SESSION: every DAY order in every book (halted ones too, in
 *    instrument id order) expires (HG_CXL_EXPIRY), then HG_XEV_SESSION_END.
 *  - ADD_ACCOUNT: account or firm 0 (HG_XREJ_INVALID_PARAMS), account
 *    exists (HG_XREJ_ACCOUNT_EXISTS), no slot (HG_XREJ_CAPACITY); emits
 *    HG_XEV_ACCOUNT_ADDED.
 *  - DEPOSIT / WITHDRAW: unknown account, amount <= 0
 *    (HG_XREJ_INVALID_AMOUNT), a deposit that would overflow the balance
 *    (HG_XREJ_INVALID_AMOUNT), a withdrawal that would leave equity below
 *    the account's initial margin (HG_XREJ_INSUFFICIENT_FUNDS); emits
 *    HG_XEV_DEPOSIT / HG_XEV_WITHDRAWAL with the new balance.
 *
 * Accounts. Today the exchange keeps a cash-only account table (equity =
 * cash, initial margin 0, no positions). The clearing library
 * (hourglass/clearing.h) takes over behind the seams named in exchange.c
 * (risk_check_new_order, risk_check_replace, book_fills,
 * risk_check_withdraw) once its state can be serialized into the snapshot;
 * the commands and events above do not change when it does.
 *
 * Threads. An exchange is owned by one thread (the engine thread, or the
 * replaying thread); every function must be called from it, the sink runs on
 * it. Nothing is locked.
 *
 * Memory. hg_exchange_create() sizes the instrument and account tables from
 * the config; listing an instrument allocates its book (an operator command,
 * not the order path). Orders, cancels and fills never allocate.
 */
#ifndef HOURGLASS_EXCHANGE_H
#define HOURGLASS_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/book.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

/* Longest instrument symbol, bytes, without the NUL. */
#define HG_SYMBOL_MAX 31

/*
 * Command types. Each value equals the field number of the command in the
 * `body` oneof of hourglass.v1.Command, so the C and wire numbering never
 * drift. 15..39 are reserved for the settlement commands.
 */
typedef enum hg_command_type {
  HG_COMMAND_NEW_ORDER = 3,
  HG_COMMAND_CANCEL = 4,
  HG_COMMAND_REPLACE = 5,
  HG_COMMAND_MASS_CANCEL = 6,
  HG_COMMAND_LIST_INSTRUMENT = 7,
  HG_COMMAND_DELIST_INSTRUMENT = 8,
  HG_COMMAND_HALT = 9,
  HG_COMMAND_RESUME = 10,
  HG_COMMAND_END_OF_SESSION = 11,
  HG_COMMAND_ADD_ACCOUNT = 12,
  HG_COMMAND_DEPOSIT = 13,
  HG_COMMAND_WITHDRAW = 14
  /* 15..39: settlement commands (index fixing, daily settlement, expiry). */
} hg_command_type_t;

typedef struct hg_cmd_new_order {
  uint32_t instrument_id;
  hg_account_t account;
  uint64_t client_order_id;
  uint32_t smp_group;       /* 0 = none */
  hg_price_t price;         /* ticks; for market orders not journaled and
                               treated as 0 by hg_exchange_apply() */
  hg_qty_t qty;
  uint8_t side;             /* hg_side_t */
  uint8_t type;             /* hg_ord_type_t */
  uint8_t tif;              /* hg_tif_t */
  uint8_t stp;              /* hg_stp_t */
  uint8_t post_only;        /* 0 or 1 */
} hg_cmd_new_order_t;

typedef struct hg_cmd_cancel {
  uint32_t instrument_id;
  hg_account_t account;
  hg_oid_t order_id;
} hg_cmd_cancel_t;

typedef struct hg_cmd_replace {
  uint32_t instrument_id;
  hg_account_t account;
  hg_oid_t order_id;
  hg_price_t new_price;
  hg_qty_t new_qty;
} hg_cmd_replace_t;

typedef struct hg_cmd_mass_cancel {
  uint32_t instrument_id; /* 0 = every listed instrument */
  hg_account_t account;
  uint8_t sides;          /* HG_SIDES_BUY, HG_SIDES_SELL or HG_SIDES_BOTH */
} hg_cmd_mass_cancel_t;

typedef struct hg_cmd_list_instrument {
  char symbol[HG_SYMBOL_MAX + 1]; /* NUL-terminated; [A-Za-z0-9._-], 1..31 bytes */
  hg_book_params_t params;        /* params.instrument_id is the new id, > 0 */
} hg_cmd_list_instrument_t;

/* DELIST_INSTRUMENT, HALT and RESUME. */
typedef struct hg_cmd_instrument {
  uint32_t instrument_id;
} hg_cmd_instrument_t;

typedef struct hg_cmd_end_of_session {
  uint32_t session_date; /* YYYYMMDD, informational; kept in the state */
} hg_cmd_end_of_session_t;

typedef struct hg_cmd_add_account {
  hg_account_t account;
  uint32_t firm;
} hg_cmd_add_account_t;

/* DEPOSIT and WITHDRAW. */
typedef struct hg_cmd_cash {
  hg_account_t account;
  int64_t amount; /* micro-USD, > 0 */
} hg_cmd_cash_t;

/*
 * One command as the sequencer stamps it and the journal stores it. Plain
 * data, no pointers: copy it freely (into rings, arrays). Zero-initialize it
 * before filling so that padding is deterministic.
 */
typedef struct hg_command {
  uint64_t seq;  /* global sequence number, > 0 */
  uint64_t ts;   /* sequencer timestamp, ns since the Unix epoch */
  uint32_t type; /* hg_command_type_t: selects the member of u */
  uint32_t pad_;
  union {
    hg_cmd_new_order_t new_order;
    hg_cmd_cancel_t cancel;
    hg_cmd_replace_t replace;
    hg_cmd_mass_cancel_t mass_cancel;
    hg_cmd_list_instrument_t list;
    hg_cmd_instrument_t instrument; /* delist, halt, resume */
    hg_cmd_end_of_session_t end_of_session;
    hg_cmd_add_account_t add_account;
    hg_cmd_cash_t cash;             /* deposit, withdraw */
  } u;
} hg_command_t;

/* Upper bound of hg_command_encode()'s output, bytes. */
#define HG_COMMAND_MAX_ENCODED 256

/*
 * Encodes cmd as a hourglass.v1.Command protobuf into buf[0..cap).
 * Returns 0 and sets *len, HG_EINVAL (unknown type, symbol not
 * NUL-terminated within HG_SYMBOL_MAX + 1 bytes) or HG_EFULL (cap too small;
 * HG_COMMAND_MAX_ENCODED is always enough). Encoding does not validate the
 * values; hg_command_decode() does. Does not allocate; any thread.
 */
int hg_command_encode(const hg_command_t *cmd, uint8_t *buf, size_t cap, size_t *len);

/*
 * Decodes one hourglass.v1.Command from buf[0..len) into *out, trusting
 * nothing: returns HG_EPARSE for bytes that are not a valid Command (garbage,
 * truncation, missing required field, no command body, unknown fields, more
 * than HG_COMMAND_MAX_ENCODED bytes), HG_ERANGE for a value outside its
 * range (an enum value not defined, seq 0, a symbol that is empty, too long
 * or has a byte outside [A-Za-z0-9._-], a limit order without a price).
 * Business ranges (qty > 0, known ids, ...) are the state machine's to
 * reject, as events. On failure *out is zeroed. Decoding uses a
 * fixed arena on the stack: it never calls malloc. Any thread.
 */
int hg_command_decode(const uint8_t *buf, size_t len, hg_command_t *out);

/* Static name of a command type ("NEW_ORDER", ...), "UNKNOWN" if out of range. */
const char *hg_command_type_str(uint32_t type);

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Exchange-level reject reasons. Stable numbers, on the wire; they start at
 * 64 so that they share one number space with hg_reject_t (0..31) and the
 * clearing library's hg_clr_reject_t (32..63).
 */
#define HG_XREJECT_MAP(XX)                                                      \
  XX(UNKNOWN_INSTRUMENT,   64, "unknown instrument")                            \
  XX(INSTRUMENT_HALTED,    65, "instrument is halted")                          \
  XX(UNKNOWN_ACCOUNT,      66, "unknown account")                               \
  XX(NOT_IN_STATE,         67, "not allowed in the instrument's current state") \
  XX(INSTRUMENT_EXISTS,    68, "instrument id or symbol already listed")        \
  XX(ACCOUNT_EXISTS,       69, "account already exists")                        \
  XX(INVALID_PARAMS,       70, "invalid command parameters")                    \
  XX(CAPACITY,             71, "configured capacity exhausted")                 \
  XX(INVALID_AMOUNT,       72, "amount must be positive and fit the balance")   \
  XX(INSUFFICIENT_FUNDS,   73, "equity would fall below initial margin")        \
  XX(RISK,                 74, "pre-trade risk check failed")

typedef enum hg_xreject {
#define HG_XREJECT_ENUM(name, num, msg) HG_XREJ_##name = num,
  HG_XREJECT_MAP(HG_XREJECT_ENUM)
#undef HG_XREJECT_ENUM
  HG_XREJ_LAST_
} hg_xreject_t;

/* Cancel reason of the orders a delisting removes (beyond hg_cancel_reason_t). */
#define HG_XCXL_DELISTED 32

/* Static string for an hg_reject_t or hg_xreject_t ("unknown" otherwise). */
const char *hg_xreject_str(int reason);

typedef enum hg_xevent_type {
  HG_XEV_BOOK = 1,         /* .book holds an order book event; .instrument_id
                              and .account are copied from it */
  HG_XEV_REJECTED = 2,     /* a non-order command was refused: .reason, and
                              .instrument_id / .account as the command gave
                              them; for DEPOSIT and WITHDRAW also .amount
                              and .balance (cash now, 0 for an unknown
                              account) */
  HG_XEV_LISTED = 3,       /* .instrument_id */
  HG_XEV_DELISTED = 4,     /* .instrument_id; .amount = orders cancelled */
  HG_XEV_HALTED = 5,       /* .instrument_id */
  HG_XEV_RESUMED = 6,      /* .instrument_id */
  HG_XEV_SESSION_END = 7,  /* .amount = DAY orders expired in all books */
  HG_XEV_ACCOUNT_ADDED = 8,/* .account, .firm */
  HG_XEV_DEPOSIT = 9,      /* .account, .firm, .amount, .balance (cash after) */
  HG_XEV_WITHDRAWAL = 10   /* .account, .firm, .amount, .balance (cash after) */
} hg_xevent_type_t;

/*
 * One exchange event. Flat and fixed-size so it can be copied into a ring;
 * fields not listed for a type are zero. seq and ts are those of the command
 * that caused it, command its hg_command_type_t.
 */
typedef struct hg_exchange_event {
  uint64_t seq;
  uint64_t ts;
  uint16_t type;     /* hg_xevent_type_t */
  uint16_t command;  /* hg_command_type_t */
  uint16_t reason;   /* HG_XEV_REJECTED: hg_xreject_t */
  uint16_t pad_;
  uint32_t instrument_id;
  hg_account_t account;
  uint32_t firm;
  uint32_t pad2_;
  int64_t amount;
  int64_t balance;
  hg_book_event_t book; /* HG_XEV_BOOK only */
} hg_exchange_event_t;

/* Called once per event, in order, on the exchange's thread; ev is valid only
 * during the call. The sink must not call back into the exchange. */
typedef void (*hg_exchange_sink_fn)(void *ctx, const hg_exchange_event_t *ev);

/* ------------------------------------------------------------------------ */
/* The state machine                                                         */
/* ------------------------------------------------------------------------ */

typedef struct hg_exchange_config {
  uint32_t max_instruments; /* listed at once, >= 1 */
  uint32_t max_accounts;    /* >= 1 */
  uint32_t max_book_orders; /* largest max_orders a listing may ask for, >= 1 */
} hg_exchange_config_t;

typedef struct hg_exchange hg_exchange_t;

/*
 * Creates an empty exchange (no instruments, no accounts, last seq 0).
 * Returns 0 and sets *out, HG_EINVAL (a config field is 0, or sink NULL) or
 * -ENOMEM; on failure nothing is allocated and *out is untouched.
 */
int hg_exchange_create(const hg_exchange_config_t *cfg, hg_exchange_sink_fn sink, void *sink_ctx,
                       hg_exchange_t **out);

/* Frees the exchange and every book. NULL is a no-op. */
void hg_exchange_destroy(hg_exchange_t *ex);

/* Replaces the sink (a replay that discards events, for example). */
void hg_exchange_set_sink(hg_exchange_t *ex, hg_exchange_sink_fn sink, void *sink_ctx);

/*
 * Applies one command. Business outcomes, rejects included, are events and
 * the call returns 0. Errors are for a broken pipeline and change nothing:
 * HG_ESTATE (cmd->seq is 0 or not greater than the last applied seq),
 * HG_EINVAL (unknown command type; a command that passed
 * hg_command_decode() never gets this) or -ENOMEM (a listing could not
 * allocate its book; the engine should stop).
 */
int hg_exchange_apply(hg_exchange_t *ex, const hg_command_t *cmd);

/* Seq of the last applied command, 0 if none. */
uint64_t hg_exchange_last_seq(const hg_exchange_t *ex);

/* Queries, for tests, tools and the gateway's reads through the engine thread. */
/* The book of a listed instrument, or NULL. Valid until that instrument is
 * delisted or the exchange destroyed; do not submit to it directly. */
const hg_book_t *hg_exchange_book(const hg_exchange_t *ex, uint32_t instrument_id);
/* 0 and *halted (0 or 1), or HG_ENOTFOUND. */
int hg_exchange_instrument_status(const hg_exchange_t *ex, uint32_t instrument_id, int *halted);
/* 0 and the symbol copied into sym[HG_SYMBOL_MAX + 1], or HG_ENOTFOUND. */
int hg_exchange_instrument_symbol(const hg_exchange_t *ex, uint32_t instrument_id, char *sym);
/* Number of listed instruments. */
uint32_t hg_exchange_instrument_count(const hg_exchange_t *ex);
/* 0 and *cash (micro-USD) and *firm, or HG_ENOTFOUND. */
int hg_exchange_account(const hg_exchange_t *ex, hg_account_t account, int64_t *cash,
                        uint32_t *firm);

/* One listed instrument, as hg_exchange_foreach_instrument() reports it. */
typedef struct hg_exchange_instrument_info {
  uint32_t id;
  uint8_t halted;
  char symbol[HG_SYMBOL_MAX + 1];
  hg_book_params_t params; /* ref_price as currently set */
  uint32_t orders;         /* live resting orders */
} hg_exchange_instrument_info_t;

typedef struct hg_exchange_account_info {
  hg_account_t id;
  uint32_t firm;
  int64_t cash; /* micro-USD */
} hg_exchange_account_info_t;

/* Calls fn for every listed instrument in id order; info is valid only
 * during the call and fn must not change the exchange. */
void hg_exchange_foreach_instrument(const hg_exchange_t *ex,
                                    void (*fn)(void *ctx,
                                               const hg_exchange_instrument_info_t *info),
                                    void *ctx);
/* Calls fn for every account in id order; same rules. */
void hg_exchange_foreach_account(const hg_exchange_t *ex,
                                 void (*fn)(void *ctx, const hg_exchange_account_info_t *info),
                                 void *ctx);

/* ------------------------------------------------------------------------ */
/* Canonical serialization, state hash, restore                              */
/* ------------------------------------------------------------------------ */

#define HG_EXCHANGE_FORMAT_VERSION 1u
#define HG_SHA256_LEN 32

/* Exact size, bytes, of the current serialization. */
size_t hg_exchange_serialized_size(const hg_exchange_t *ex);

/*
 * Writes the whole state as the canonical byte stream (fixed field order,
 * explicit little-endian integers; instruments by id with each book's orders
 * in time priority, accounts by id, positions, counters). Returns 0 and
 * *len, or HG_EFULL (cap < hg_exchange_serialized_size(); *len is then set
 * to the size needed and buf is untouched).
 */
int hg_exchange_serialize(const hg_exchange_t *ex, uint8_t *buf, size_t cap, size_t *len);

/* SHA-256 of the canonical serialization, computed without a buffer. */
void hg_exchange_hash(const hg_exchange_t *ex, uint8_t out[HG_SHA256_LEN]);

/*
 * Rebuilds the state held in blob[0..len) (a hg_exchange_serialize() output)
 * into ex, which must be empty (just created: no instruments, accounts or
 * applied commands; otherwise HG_ESTATE). Afterwards ex hashes equal to the
 * exchange that wrote blob and applies further commands identically.
 * Returns 0, HG_EVERSION (written by a newer format), HG_ECORRUPT (anything
 * malformed or inconsistent), HG_EFULL (blob needs more capacity than ex's
 * config has) or -ENOMEM. On failure ex is empty again. No events.
 */
int hg_exchange_restore(hg_exchange_t *ex, const uint8_t *blob, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_EXCHANGE_H */
