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
 *  - SESSIONS_ENDED: the sessions that entered the session-scoped orders
 *    (NEW_ORDER with session_scoped = 1: cancel-on-disconnect orders and
 *    quotes) are gone, as after a restart. Every such order in every book
 *    (halted ones too; instrument id order, then time priority within a
 *    book) gets a book HG_EV_CANCELLED with HG_CXL_MASS_CANCEL followed by
 *    its HG_EV_LEVEL; then HG_XEV_SESSIONS_ENDED with .amount = orders
 *    cancelled (also when 0). Orders without the flag are untouched.
 *  - ADD_ACCOUNT: account or firm 0 (HG_XREJ_INVALID_PARAMS), account
 *    exists (HG_XREJ_ACCOUNT_EXISTS), no slot (HG_XREJ_CAPACITY); emits
 *    HG_XEV_ACCOUNT_ADDED.
 *  - DEPOSIT / WITHDRAW: unknown account, amount <= 0
 *    (HG_XREJ_INVALID_AMOUNT), a deposit that would overflow the balance
 *    (HG_XREJ_INVALID_AMOUNT), a withdrawal that would leave equity below
 *    the account's initial margin (HG_XREJ_INSUFFICIENT_FUNDS); emits
 *    HG_XEV_DEPOSIT / HG_XEV_WITHDRAWAL with the new balance.
 *
 *  - NEW_ORDER / REPLACE also refuse, after the halted check, a contract
 *    whose last trading day has ended (command ts >= 16:00 UTC of the last
 *    calendar day of the delivery month: HG_XREJ_TRADING_ENDED). The
 *    pre-trade check (hg_clearing_check_order) runs after the account
 *    check, except for orders the book refuses on its own field checks
 *    (their reject is the book's): band, order size, position limits,
 *    initial margin with every open order (delivery-month rate, calendar
 *    spread credit). Its rejects are book-shaped HG_XEV_BOOK events whose
 *    book.reason is the hg_clr_reject_t, numbers in the event (see
 *    hg_exchange_event_t). A replace that raises the quantity is checked as
 *    an order of the increase at the new price; otherwise only the band.
 *  - Delivery month. A contract is in its delivery month when the UTC
 *    calendar date of the command's ts (ts / 86400 s) falls in that month:
 *    from 00:00:00 UTC of its first day the pre-trade check and withdrawals
 *    use the delivery-month margin rate and position limit, whether or not
 *    a daily cycle ran the day before. The first command of each UTC day
 *    (any type) sets the clearing's flags before it is applied; the flags
 *    as serialized are those of the last applied command's day. Orders
 *    resting when the month starts stay; their quantity counts at the
 *    delivery-month rate from that second, and only orders and replaces
 *    that raise the worst case meet the lower limit (settlement/CLEARING.md).
 *  - LIST_INSTRUMENT also refuses (HG_XREJ_INVALID_PARAMS) a symbol that is
 *    not a contract <GPU>.<GRADE>.<YYYY-MM> (GPU [A-Za-z0-9]{1,15}, grade
 *    [A-Za-z0-9]{1,7}). The contract is registered with the clearing in the
 *    product group (GPU, grade) and its delivery month; the listing's
 *    ref_price (if > 0) is its initial price: until a first daily
 *    settlement it is the reference price only while the group has no
 *    fixing, and the first DSP only when no trade, quote or FINAL fixing
 *    gives one (settlement/README.md). A delisted contract
 *    stays registered with the clearing, so relisting its id must name the
 *    same contract (else HG_XREJ_INSTRUMENT_EXISTS).
 *  - DELIST_INSTRUMENT: refused (HG_XREJ_NOT_IN_STATE) while any account
 *    holds a position in it; positions close by EXPIRE only.
 *
 * The inference-margin spread (settlement/CONTRACT.md 7.4 and 5.14):
 *  - LIST_INSTRUMENT with leg_token_id, leg_gpu_id, ratio_token and
 *    ratio_gpu set (or a symbol MARGIN.*) lists a spread: symbol
 *    MARGIN.<CLASS>.<GRADE>.<YYYY-MM>, token leg the listed
 *    TOK.<CLASS>.<GRADE>.<YYYY-MM>, GPU leg a listed GPU-hour contract of
 *    the same month, ratios 1..100, max_order_qty x the larger ratio at most
 *    the clearing's max_order_qty (else INVALID_PARAMS); id or symbol taken
 *    (INSTRUMENT_EXISTS), HG_EX_MAX_SPREADS (32) listed (CAPACITY). It has
 *    its own book and no clearing record; the clearing gets its pair for the
 *    inter-commodity credit. hg_exchange_foreach_instrument reports spreads
 *    after the contracts, with their legs.
 *  - NEW_ORDER in a spread: a limit order (else HG_XREJ_SPREAD_ORDER), price
 *    S in ticks; the spread or either leg halted is INSTRUMENT_HALTED. Refused when the GPU leg has
 * no reference (the clearing's NO_REFERENCE) or the token leg at S is outside its band
 *    (HG_XREJ_SPREAD_LEG_BAND, .lo/.hi = the token leg's band); then the
 *    clearing's check of the token leg (n_t x qty at P_t, the order's side)
 *    and of the GPU leg (n_g x qty at R_g, the other side, the token leg
 *    counted open); its rejects as for any order. Resting quantity is open
 *    on both legs. Each fill (HG_XEV_BOOK, the spread's id and price) is
 *    followed by four HG_XEV_SPREAD_LEG events and booked on the legs, out
 *    of the DSP window. REPLACE is HG_XREJ_SPREAD_ORDER; CANCEL, MASS_CANCEL,
 *    HALT, RESUME, DELIST, END_OF_SESSION, SESSIONS_ENDED and a MARK's
 *    liquidation cancels work as for a contract; a DAILY_SETTLEMENT on the
 *    legs' last trading day cancels its orders (HG_XCXL_EXPIRED) and the
 *    EXPIRE of either leg delists it (HG_XEV_DELISTED after HG_XEV_EXPIRED's
 *    ledger events, before HG_XEV_EXPIRED).
 *
 * Settlement commands (operator commands; rejects are HG_XEV_REJECTED with
 * .group/.day where they apply; nothing changes on a reject):
 *  - SET_PROVIDER_GRADE: bad strings or day (INVALID_PARAMS), an effective
 *    day on or before the last day any index of that GPU has a fixing for
 *    (NOT_IN_STATE: a grade change never rewrites past fixings), the same
 *    (provider, gpu, day) twice (INVALID_PARAMS). Emits HG_XEV_GRADE_SET.
 *  - PUBLISH_SAMPLES: stages the batch for (gpu, grade, day); bad strings,
 *    kind or volume (INVALID_PARAMS), the day's fixing is FINAL
 *    (FIXING_FINAL), staging full (CAPACITY). Emits HG_XEV_SAMPLES.
 *  - DISCARD_SAMPLES: drops the staged samples of (gpu, grade, day); emits
 *    HG_XEV_SAMPLES_DISCARDED with the count (0 if none).
 *  - COMPUTE_FIXING: computes the day from the staged samples
 *    (settlement/CONTRACT.md section 3 steps 1-6, carry-forward from the
 *    stored history), publishes it (first publication, restatement, or
 *    UNCHANGED when it moves less than a tick) and consumes the staged
 *    samples. Restating = publishing a corrected full set and computing
 *    again. FINAL day: FIXING_FINAL. Emits HG_XEV_FIXING with value, tier,
 *    status, kind and outcome.
 *  - PUBLISH_FIXING: an external value (1..HG_CLR_FIXING_MAX, else
 *    INVALID_AMOUNT) with its source, same publication rules; HG_XEV_FIXING.
 *  - FINALIZE_FIXING: PROVISIONAL -> FINAL (again on a FINAL day is not an
 *    error); no record (NO_FIXING), a NO_FIX day (NOT_IN_STATE).
 *    HG_XEV_FIXING with outcome HG_XFIX_FINALIZED.
 *    Each of these three, when it emits HG_XEV_FIXING, follows it with one
 *    HG_XEV_REFERENCE per listed contract of that index.
 *  - DAILY_SETTLEMENT (day): refused (ALREADY_SETTLED) unless day is after
 *    the last settled day, and (NOT_IN_STATE) unless the command's ts is at
 *    or after 16:00 UTC of day (the cycle time is day's 16:00, never a clock). DSP per contract by
 * the tiers (HG_XEV_DSP each, in id order), then HG_XEV_REFERENCE for every contract (its reference
 * price and band now), variation margin for every position (HG_XEV_VM each, in the clearing's
 * ledger order), checked to sum to exactly zero; then every DAY order expires, contracts whose last
 *    trading day this is lose their resting orders (HG_XCXL_EXPIRED);
 *    HG_XEV_CYCLE last. The cycle does not move the delivery-month flags
 *    (see "Delivery month" above).
 *  - EXPIRE (instrument): refused (NOT_IN_STATE) before the cycle of its
 *    last trading day. If a day of the delivery month is not FINAL:
 *    one HG_XEV_FIXING_MISSING per such day, then HG_XEV_REJECTED
 *    FIXINGS_MISSING (.amount = count, .balance = bitmap, bit d-1 for day
 *    d). Else FSP, one HG_XEV_FINAL_SETTLEMENT per open position (summing
 *    to zero), the contract leaves the exchange and the clearing (its
 *    ledger entries stay for statements), HG_XEV_EXPIRED, and, if the
 *    (GPU, grade) has a curve, its next month is listed (HG_XEV_LISTED).
 *  - LIST_CURVE: lists 12 consecutive months (all or nothing: an id or
 *    symbol taken, or a curve already there, is INSTRUMENT_EXISTS) with book
 *    parameters tick 1, prices 1..100,000 ticks, max order 1,000; each
 *    EXPIRE of the group lists the next month with the next id.
 *
 * The clearing guarantee (settlement/CONTRACT.md sections 4.6 and 4.7):
 *  - MARK (operator, or the daemon's timer): for every contract in id order
 *    its best bid and ask feed hg_clearing_mark (mark = mid inside the band,
 *    else last trade, else reference, clamped to the band): one HG_XEV_MARK
 *    per contract marked; then one HG_XEV_MARGIN_CALL per account that is
 *    called or liquidating after the round (registration order); then, for
 *    every liquidating account (hg_clearing_liq_slices order), its resting
 *    orders in every contract are cancelled (book HG_EV_CANCELLED with
 *    reason HG_XCXL_LIQUIDATION) and one immediate-or-cancel limit order
 *    per position goes into the book: order id HG_XLIQ_OID(seq, k) (k =
 *    the slice's index), client_order_id 0, the side that reduces, qty
 *    min(|pos|, liq_slice_qty), limit the band edge around the mark. Its
 *    book events carry .kind = HG_XBOOK_LIQUIDATION; each of its fills is
 *    booked by hg_clearing_liq_fill, and the fee's two ledger entries follow
 *    the fill as HG_XEV_CASH events. The order bypasses the pre-trade
 *    check (it only reduces) and is not refused for a halted contract's
 *    state (a halted book is skipped: no slice). HG_XEV_MARK_ROUND last.
 *    Nothing but the liquidation fills and fees moves cash.
 *  - FUND_DEPOSIT (amount): credits the insurance fund (amount <= 0 or an
 *    overflow: INVALID_AMOUNT); HG_XEV_CASH with .account 0.
 *  - DAILY_SETTLEMENT also runs the waterfall after VM: each of its ledger
 *    entries (FUND_COVER, SOCIALIZED, the fund's side with .account 0) is an
 *    HG_XEV_CASH after the HG_XEV_VM events; HG_XEV_CYCLE then carries
 *    .margin = accounts bankrupt, .price = fund used, .group = 0, and an
 *    HG_XEV_MARGIN_CALL per account called or liquidating after the
 *    evaluation at the DSPs precedes it.
 *  - A called or liquidating account's orders and replaces that do not
 *    reduce are refused with the clearing's MARGIN_CALL (45): .balance =
 *    equity at the marks, .margin = IM at the marks, .hi = the call.
 *
 * Accounts. Cash, positions, open quantities, margin and the ledger are the
 * clearing library's (hourglass/clearing.h, hg_exchange_clearing() for
 * reads and statements). Deposits that would overflow the balance or the
 * clearing's deposit total are INVALID_AMOUNT.
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
#include "hourglass/civil.h"
#include "hourglass/clearing.h"
#include "hourglass/index.h"

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
 * drift. 15..39 are reserved for the settlement commands (24..39 unused),
 * 40..63 for further non-settlement commands (40 used). Values in the gaps
 * are not commands: hg_exchange_apply() and hg_command_encode() refuse
 * them like any unknown type.
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
  HG_COMMAND_WITHDRAW = 14,
  /* Settlement commands (see "Settlement commands" below). 26..39 free. */
  HG_COMMAND_SET_PROVIDER_GRADE = 15,
  HG_COMMAND_PUBLISH_SAMPLES = 16,
  HG_COMMAND_DISCARD_SAMPLES = 17,
  HG_COMMAND_COMPUTE_FIXING = 18,
  HG_COMMAND_PUBLISH_FIXING = 19,
  HG_COMMAND_FINALIZE_FIXING = 20,
  HG_COMMAND_DAILY_SETTLEMENT = 21,
  HG_COMMAND_EXPIRE = 22,
  HG_COMMAND_LIST_CURVE = 23,
  HG_COMMAND_MARK = 24,         /* the clearing guarantee: a mark round */
  HG_COMMAND_FUND_DEPOSIT = 25, /* funds the insurance fund */
  /* Non-settlement commands added later. 41..63 free. */
  HG_COMMAND_SESSIONS_ENDED = 40
} hg_command_type_t;

/* Highest command type this build applies (the range has gaps: see above). */
#define HG_COMMAND_LAST HG_COMMAND_SESSIONS_ENDED
/* Last of the settlement commands (26..39 are not commands yet). */
#define HG_COMMAND_LAST_SETTLEMENT HG_COMMAND_FUND_DEPOSIT

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
  uint8_t session_scoped;   /* 1: the order lives only as long as the session
                               that entered it (a cancel-on-disconnect order
                               or a quote); cancelled by
                               HG_COMMAND_SESSIONS_ENDED. 0: an ordinary
                               order. Non-zero values are stored as 1. */
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
  /* An inference-margin spread MARGIN.<CLASS>.<GRADE>.<YYYY-MM>
   * (settlement/CONTRACT.md 7.4): its token leg (the listed
   * TOK.<CLASS>.<GRADE>.<YYYY-MM>), its GPU-hour leg (a listed GPU-hour
   * contract of the same month) and the ratio n_t : n_g (1..100 each). All
   * four are 0 for any other listing. */
  uint32_t leg_token_id;
  uint32_t leg_gpu_id;
  uint32_t ratio_token;
  uint32_t ratio_gpu;
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

/* ---- Settlement commands ------------------------------------------------ */
/* Days are UTC day numbers (days since 1970-01-01, as in hourglass/index.h).
 * An index is named by (gpu, grade): GPU model [A-Za-z0-9]{1,15} and grade
 * code [A-Za-z0-9]{1,7}, NUL-terminated in their arrays; it is the product
 * group of every contract <gpu>.<grade>.<YYYY-MM>. */

/* SET_PROVIDER_GRADE: provider's grade for gpu from effective_day on. */
typedef struct hg_cmd_provider_grade {
  char provider[HG_INDEX_PROVIDER_MAX]; /* 1..31 printable bytes, no ',' */
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  int32_t effective_day;                /* 0..HG_DAY_MAX */
} hg_cmd_provider_grade_t;

/* Most samples one PUBLISH_SAMPLES command carries; a large file goes as
 * several commands. */
#define HG_SAMPLES_PER_COMMAND 4
/* Highest day number accepted (9999-12-31). */
#define HG_DAY_MAX 2932896

/* PUBLISH_SAMPLES: stages samples for the fixing of (gpu, grade, day). The
 * samples keep their own gpu, grade and ts: a sample of another GPU or
 * outside the day is staged and then excluded with its reason. */
typedef struct hg_cmd_samples {
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  int32_t day;
  uint32_t n; /* 1..HG_SAMPLES_PER_COMMAND */
  hg_index_sample_t s[HG_SAMPLES_PER_COMMAND];
} hg_cmd_samples_t;

/* DISCARD_SAMPLES, COMPUTE_FIXING, FINALIZE_FIXING. */
typedef struct hg_cmd_index_day {
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  int32_t day;
} hg_cmd_index_day_t;

/* PUBLISH_FIXING: a fixing computed elsewhere. */
typedef struct hg_cmd_publish_fixing {
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  int32_t day;
  int64_t value;                      /* micro-USD per GPU-hour, 1..HG_CLR_FIXING_MAX */
  char source[HG_INDEX_SOURCE_MAX];   /* 1..47 printable bytes */
} hg_cmd_publish_fixing_t;

/* DAILY_SETTLEMENT: the 16:00 UTC cycle of `day`. */
typedef struct hg_cmd_daily_settlement {
  int32_t day;
} hg_cmd_daily_settlement_t;

/* EXPIRE: final settlement of a contract after its last trading day. */
typedef struct hg_cmd_expire {
  uint32_t instrument_id;
} hg_cmd_expire_t;

/* LIST_CURVE: lists the 12 monthly contracts of (gpu, grade) from (year,
 * month) on, ids first_instrument_id .. +11, and keeps the curve rolling: each
 * EXPIRE of one of its contracts lists the next month with the next id. */
/* The years a curve may start in: its months, and the month after the last
 * (listed at a roll), stay within hourglass/civil.h's years. */
#define HG_CURVE_YEAR_MIN HG_CIVIL_YEAR_MIN
#define HG_CURVE_YEAR_MAX (HG_CIVIL_YEAR_MAX - 1)

typedef struct hg_cmd_list_curve {
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  uint16_t year;                /* HG_CURVE_YEAR_MIN..HG_CURVE_YEAR_MAX */
  uint8_t month;                /* 1..12 */
  uint8_t pad_;
  uint32_t first_instrument_id; /* > 0 */
  uint32_t max_orders;          /* book capacity of each contract */
  uint32_t max_accounts;
  hg_price_t ref_price;         /* initial settlement price, ticks, used only
                                   where the index gives nothing (see
                                   LIST_INSTRUMENT); 0 = none */
} hg_cmd_list_curve_t;

/* MARK: no parameters; FUND_DEPOSIT: amount. */
typedef struct hg_cmd_fund {
  int64_t amount; /* micro-USD, > 0 */
} hg_cmd_fund_t;

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
    hg_cmd_provider_grade_t provider_grade;
    hg_cmd_samples_t samples;
    hg_cmd_index_day_t index_day;   /* discard, compute, finalize */
    hg_cmd_publish_fixing_t fixing;
    hg_cmd_daily_settlement_t daily;
    hg_cmd_expire_t expire;
    hg_cmd_list_curve_t curve;
    hg_cmd_fund_t fund;             /* fund deposit */
  } u;
} hg_command_t;

/* Upper bound of hg_command_encode()'s output, bytes. */
#define HG_COMMAND_MAX_ENCODED 1024

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
  XX(RISK,                 74, "pre-trade risk check failed")                 \
  XX(TRADING_ENDED,        75, "the contract's last trading day has passed")  \
  XX(FIXINGS_MISSING,      76, "final settlement waits for FINAL fixings")    \
  XX(FIXING_FINAL,         77, "the fixing is FINAL and never changes")       \
  XX(NO_FIXING,            78, "no fixing for that day")                      \
  XX(SETTLEMENT_FAILED,    79, "settlement could not be applied")          \
  XX(ALREADY_SETTLED,      80, "the daily cycle of that day has already run") \
  XX(SPREAD_LEG_BAND,      81, "a leg of the spread would trade outside its band") \
  XX(SPREAD_ORDER,         82, "spread orders are limit orders; replace is not offered")

typedef enum hg_xreject {
#define HG_XREJECT_ENUM(name, num, msg) HG_XREJ_##name = num,
  HG_XREJECT_MAP(HG_XREJECT_ENUM)
#undef HG_XREJECT_ENUM
  HG_XREJ_LAST_
} hg_xreject_t;

/* Cancel reason of the orders a delisting removes (beyond hg_cancel_reason_t). */
#define HG_XCXL_DELISTED 32
/* Cancel reason of the orders still resting when a contract expires. */
#define HG_XCXL_EXPIRED 33
/* Cancel reason of a liquidating account's resting orders (MARK). */
#define HG_XCXL_LIQUIDATION 34
/* .kind of the HG_XEV_BOOK events of a liquidation order. */
#define HG_XBOOK_LIQUIDATION 1
/* Order id of slice k of the MARK command seq: never a command's seq. */
#define HG_XLIQ_OID(seq, k) (((uint64_t)1 << 62) | ((uint64_t)(seq) << 16) | (uint64_t)(k))

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
  HG_XEV_LISTED = 3,       /* .instrument_id; .price, .lo, .hi = reference
                              price and band as in HG_XEV_REFERENCE (0 for
                              a spread); a spread's .amount = token leg id,
                              .balance = GPU-hour leg id, .qty = n_t,
                              .margin = n_g */
  HG_XEV_DELISTED = 4,     /* .instrument_id; .amount = orders cancelled */
  HG_XEV_HALTED = 5,       /* .instrument_id */
  HG_XEV_RESUMED = 6,      /* .instrument_id */
  HG_XEV_SESSION_END = 7,  /* .amount = DAY orders expired in all books */
  HG_XEV_ACCOUNT_ADDED = 8,/* .account, .firm */
  HG_XEV_DEPOSIT = 9,      /* .account, .firm, .amount, .balance (cash after) */
  HG_XEV_WITHDRAWAL = 10,  /* .account, .firm, .amount, .balance (cash after) */
  HG_XEV_GRADE_SET = 11,   /* .day = effective day */
  HG_XEV_SAMPLES = 12,     /* .group, .day, .amount = samples in the command,
                              .balance = samples now staged (all indexes
                              and days) */
  HG_XEV_SAMPLES_DISCARDED = 13, /* .group, .day, .amount = samples dropped */
  HG_XEV_FIXING = 14,      /* .group, .day, .price = value (micro-USD per
                              GPU-hour, 0 for NO_FIX), .tier, .status
                              (HG_INDEX_PROVISIONAL/_FINAL/_NO_FIX), .kind
                              (HG_INDEX_COMPUTED/...), .outcome
                              (HG_INDEX_PUBLISHED/_RESTATED/_UNCHANGED, or
                              HG_XFIX_FINALIZED), .amount = input samples
                              (computed fixings), .index.gpu/.grade = the
                              index's GPU and grade; from the receipt kept
                              with the day's fixing (hg_exchange_receipt(),
                              its receipt_tier; all 0 when none is kept, as
                              for an external value): .lo = providers,
                              .hi = non-empty hours, .qty = samples used,
                              .margin = GPU-hours used */
  HG_XEV_DSP = 15,         /* .instrument_id, .group, .day, .price = DSP
                              (ticks), .tier (hg_clr_dsp_tier_t; 0: no DSP
                              could be set, the contract was not marked) */
  HG_XEV_VM = 16,          /* .account, .firm, .instrument_id, .day, .amount
                              = variation margin (signed), .balance = cash
                              after, .price = DSP, .qty = position */
  HG_XEV_CYCLE = 17,       /* .day, .amount = sum of VM over all accounts
                              (always 0: checked), .lo = VM paid (<= 0), .hi
                              = VM received, .qty = DAY orders expired,
                              .balance = VM entries posted */
  HG_XEV_FIXING_MISSING = 18, /* .instrument_id, .group, .day (the missing
                              day), .status (hg_clr_fixing_status_t: MISSING,
                              PROVISIONAL, NO_FIX) */
  HG_XEV_FINAL_SETTLEMENT = 19, /* .account, .firm, .instrument_id, .amount =
                              payment (signed), .balance = cash after, .price
                              = FSP, .qty = position closed */
  HG_XEV_EXPIRED = 20,     /* .instrument_id, .group, .price = FSP (ticks),
                              .amount = positions closed, .qty = orders
                              cancelled */
  HG_XEV_SESSIONS_ENDED = 21, /* .amount = session-scoped orders cancelled in
                              all books */
  HG_XEV_REFERENCE = 22,   /* .instrument_id, .group, .price = the clearing's
                              reference price (ticks; last DSP, else the
                              index's latest fixing, else the listing
                              price; 0 none), .lo/.hi = the inclusive price
                              band around it (ticks; 0/0 when there is no
                              reference or the band is off). After the DSP
                              events of a cycle (every contract) and after
                              the HG_XEV_FIXING of a compute, publish or
                              finalize (the index's contracts). */
  HG_XEV_MARK = 23,        /* .instrument_id, .group, .price = mark (ticks),
                              .lo/.hi = the band around the reference */
  HG_XEV_MARGIN_CALL = 24, /* .account, .firm, .status = hg_clr_standing_t
                              (CALLED, LIQUIDATING), .kind = HG_CLR_LIQ_*
                              (0 when called), .amount = the call, .balance =
                              equity at the marks, .margin = IM at the marks,
                              .lo = maintenance margin, .qty = cycle count the
                              call is due at (hg_clearing_standing). The
                              owning account's data only. */
  HG_XEV_MARK_ROUND = 25,  /* .amount = accounts evaluated, .lo = called,
                              .hi = liquidating, .qty = liquidation orders
                              sent, .margin = liquidation fills, .balance =
                              insurance fund after */
  HG_XEV_SPREAD_LEG = 27,  /* after the HG_XEV_BOOK fill of a spread book
                              (.instrument_id = the spread), one per leg per
                              side: .instrument_id = the leg, .account, .firm
                              = 0, .kind = the leg's hg_side_t for that
                              account, .price = the leg price (ticks), .qty =
                              leg contracts, .lo = the spread's id, .hi = the
                              spread fill's price (S, ticks), .amount = the
                              account's spread order id. Order: token leg
                              buyer, token leg seller, GPU leg buyer, GPU
                              leg seller. */
  HG_XEV_CASH = 26         /* a ledger entry of the guarantee: .account (0 =
                              the insurance fund), .firm, .instrument_id (0 =
                              none), .kind = hg_ledger_kind_t (FUND_DEPOSIT,
                              LIQ_FEE, FUND_COVER, SOCIALIZED), .amount
                              (signed), .balance = after, .price/.qty = the
                              fill of a LIQ_FEE, .day = the cycle's day (cycle
                              entries, posted at its 16:00) */
} hg_xevent_type_t;

/* .outcome of an HG_XEV_FIXING caused by FINALIZE_FIXING. */
#define HG_XFIX_FINALIZED 4

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
  uint16_t reason;   /* HG_XEV_REJECTED: hg_xreject_t (settlement command
                        failures: HG_XREJ_SETTLEMENT_FAILED with .amount =
                        the HG_E* code) */
  uint16_t pad_;
  uint32_t instrument_id;
  hg_account_t account;
  uint32_t firm;
  uint32_t pad2_;
  int64_t amount;
  int64_t balance;
  /* Settlement events (above) and the numbers of risk rejects: an order or
   * replace refused by the clearing check is an HG_XEV_BOOK whose
   * book.reason is the hg_clr_reject_t (32..63), with .balance = equity,
   * .margin = initial margin with the order counted, .price = reference
   * price (ticks, 0 = none), .qty = worst-case position with the order and
   * .lo/.hi = the inclusive price band (PRICE_BAND) or -limit/+limit
   * (POSITION_LIMIT); for MARGIN_CALL (45) .balance = equity at the marks,
   * .margin = initial margin at the marks, .hi = the call amount. A refused
   * WITHDRAW has .margin = current initial margin and .balance = cash (a
   * called account's withdrawal is INSUFFICIENT_FUNDS). */
  int64_t price;
  int64_t qty;
  int64_t margin;
  int64_t lo, hi;
  int32_t day;
  uint32_t group;   /* index / product group id (1.., order of creation) */
  uint8_t tier, status, kind, outcome;
  uint32_t pad3_;
  union {
    hg_book_event_t book; /* HG_XEV_BOOK */
    struct {              /* HG_XEV_LISTED: what consumers need to show it */
      char symbol[HG_SYMBOL_MAX + 1];
      hg_book_params_t params;
    } listed;
    struct {              /* HG_XEV_FIXING: the index .group names, so that
                             consumers can show it without a lookup */
      char gpu[HG_INDEX_GPU_MAX];
      char grade[HG_INDEX_GRADE_MAX];
    } index;
  };
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
  /* Clearing parameters; NULL: hg_clearing_config_default() with
   * max_positions capped at max_accounts x its instruments and a 4,096-entry
   * initial ledger. Its max_accounts is replaced by the field above and its
   * max_instruments by 2 x max_instruments + 16 (delisted contracts stay
   * registered). Read only by
   * hg_exchange_create(); a restore takes them from the blob. */
  const hg_clearing_config_t *clearing;
  uint32_t max_indexes;        /* (GPU, grade) indexes; 0: 16 */
  uint32_t max_fixing_days;    /* fixings kept per index; 0: 4096 */
  uint32_t max_staged_samples; /* samples staged, all indexes; 0: 1 << 20 */
} hg_exchange_config_t;

typedef struct hg_exchange hg_exchange_t;

/* The default capacities: 64 instruments, 4,096 accounts, books of up to
 * 1 << 20 orders, everything else 0 (the defaults above). The pipeline,
 * hourglassd's configuration and hgctl replay all start from it, so a
 * replay given no capacities uses those of an exchange that set none. */
void hg_exchange_config_default(hg_exchange_config_t *cfg);

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
 * allocate its book, or a settlement command its working memory; the engine
 * should stop). One exception to "change nothing": HG_ECORRUPT means a
 * clearing call on the book path failed (never expected: the pre-trade
 * check reserves what fills need) or a cycle's VM did not sum to zero; the
 * command was applied and its events emitted, and every later call returns
 * HG_ECORRUPT without applying anything (stop and investigate).
 */
int hg_exchange_apply(hg_exchange_t *ex, const hg_command_t *cmd);

/*
 * Prefetch hint for a caller holding several commands (a replay batch, the
 * engine's batch from its ring): call it with stage 0 for the command after
 * next and stage 1 for the next one, before applying the current one, so the
 * book's cache misses for those orders overlap the current command (see
 * hg_book_prefetch_order). It reads but changes nothing: no state, no
 * events, same results with or without it. cmd->seq must be the seq the
 * command will be applied with (a new order's id). Owner thread only.
 */
void hg_exchange_prefetch(const hg_exchange_t *ex, const hg_command_t *cmd, int stage);

/* Seq of the last applied command, 0 if none. */
uint64_t hg_exchange_last_seq(const hg_exchange_t *ex);

/* Queries, for tests and tools, and for the gateway and the daemon, which
 * read the recovered state on the owner thread before the pipeline starts
 * (hg_pipeline_exchange()). Same thread rule as every call here. */
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
  int64_t ref_price;       /* the clearing's reference price, ticks (0: none) */
  int64_t band_low;        /* its inclusive price band, ticks (0, 0: no band) */
  int64_t band_high;
  /* A spread (CONTRACT.md 7.4): its legs and ratio; all 0 otherwise. A
   * spread has no reference price or band of its own (ref_price 0). */
  uint32_t leg_token_id;
  uint32_t leg_gpu_id;
  uint32_t ratio_token;
  uint32_t ratio_gpu;
} hg_exchange_instrument_info_t;

typedef struct hg_exchange_account_info {
  hg_account_t id;
  uint32_t firm;
  int64_t cash; /* micro-USD */
} hg_exchange_account_info_t;

/* The clearing state (accounts, positions, ledger, statements: see
 * hourglass/clearing.h), read-only. Valid until the next hg_exchange_apply()
 * or hg_exchange_restore() or until the exchange is destroyed. */
const hg_clearing_t *hg_exchange_clearing(const hg_exchange_t *ex);

/* The fixing of index (gpu, grade) for day: 0 and *out, or HG_ENOTFOUND. */
int hg_exchange_fixing(const hg_exchange_t *ex, const char *gpu, const char *grade, int32_t day,
                       hg_index_fixing_t *out);

/* The receipt kept with a computed fixing (settlement/CONTRACT.md section 3
 * step 8): the counts of hg_index_result_t. The per-sample exclusions and
 * weights are not kept in the state: they follow from the journaled samples
 * (replay, or hgctl index fix on the same input). */
typedef struct hg_exchange_receipt_tier {
  uint8_t tried, sufficient, cap_applied, pad_;
  uint32_t eligible, used, providers, hours;
  int64_t volume, median, mad, cap, value;
  uint32_t reason_count[HG_INDEX_REASON_COUNT];
} hg_exchange_receipt_tier_t;

typedef struct hg_exchange_receipt {
  int32_t day;
  uint32_t input_count;
  uint8_t receipt_tier; /* 1 or 2: the tier whose exclusions the value used */
  uint8_t pad_[7];
  hg_exchange_receipt_tier_t tier[2];
} hg_exchange_receipt_t;

/* 0 and *out, or HG_ENOTFOUND (no computed fixing for that day). */
int hg_exchange_receipt(const hg_exchange_t *ex, const char *gpu, const char *grade, int32_t day,
                        hg_exchange_receipt_t *out);

/* One stored fixing, as hg_exchange_foreach_fixing() reports it. */
typedef struct hg_exchange_fixing_info {
  uint32_t group; /* index / product group id */
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  hg_index_fixing_t fixing;
} hg_exchange_fixing_info_t;

/* Calls fn for every stored fixing, indexes in creation order, days
 * ascending; info is valid only during the call and fn must not change the
 * exchange. */
void hg_exchange_foreach_fixing(const hg_exchange_t *ex,
                                void (*fn)(void *ctx, const hg_exchange_fixing_info_t *info),
                                void *ctx);

/* Day of the last DAILY_SETTLEMENT applied, -1 if none. */
int32_t hg_exchange_last_cycle_day(const hg_exchange_t *ex);

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

/* Version 4: the books carry no price band of their own (the band is the
 * clearing's), and the spread instruments follow the clearing bytes.
 * hg_exchange_restore() reads this version only. */
#define HG_EXCHANGE_FORMAT_VERSION 4u
#define HG_SHA256_LEN 32

/* Exact size, bytes, of the current serialization. */
size_t hg_exchange_serialized_size(const hg_exchange_t *ex);

/*
 * Writes the whole state as the canonical byte stream (fixed field order,
 * explicit little-endian integers; instruments by id with each book's orders
 * in time priority, accounts by id, indexes with their fixings and
 * receipts, provider grades, staged samples, then the clearing state with
 * its whole ledger). Returns 0 and *len, HG_EFULL (cap <
 * hg_exchange_serialized_size(); *len is then set to the size needed and
 * buf is untouched) or -ENOMEM (the clearing's 4 KiB staging buffer).
 */
int hg_exchange_serialize(const hg_exchange_t *ex, uint8_t *buf, size_t cap, size_t *len);

/* SHA-256 of the canonical serialization, computed without a buffer. */
void hg_exchange_hash(const hg_exchange_t *ex, uint8_t out[HG_SHA256_LEN]);

/*
 * Rebuilds the state held in blob[0..len) (a hg_exchange_serialize() output)
 * into ex, which must be empty (just created: no instruments, accounts or
 * applied commands; otherwise HG_ESTATE). Afterwards ex hashes equal to the
 * exchange that wrote blob and applies further commands identically.
 * Returns 0, HG_EVERSION (a version other than the current one),
 * HG_ECORRUPT (anything
 * malformed or inconsistent), HG_EFULL (blob needs more capacity than ex's
 * config has; the clearing tables' capacities in the blob are checked
 * against ex's before anything is allocated) or -ENOMEM. On failure ex is
 * empty again. No events.
 */
int hg_exchange_restore(hg_exchange_t *ex, const uint8_t *blob, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_EXCHANGE_H */
