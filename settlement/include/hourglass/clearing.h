/*
 * hourglass/clearing.h - accounts, positions, cash ledger, pre-trade risk,
 * daily settlement and final settlement (settlement/CONTRACT.md sections 1
 * and 4; the choices where they are open: section 5).
 *
 * The clearing state is a library on its own: create it with capacities,
 * register accounts and instruments, then feed it what happens: deposits and
 * withdrawals, orders that rest or leave the book, fills, index fixings, the
 * daily settlement cycle and the final settlement of an expiring contract.
 * It computes margin, variation margin and settlement cash exactly.
 *
 * Units. Prices are int64 ticks (one tick = 0.001 USD per GPU-hour = 1,000
 * micro-USD per GPU-hour). Quantities are int64 contracts, signed for
 * positions (+ long, - short). Money is int64 micro-USD. Index fixings are
 * int64 micro-USD per GPU-hour. Timestamps are uint64 nanoseconds since the
 * Unix epoch, UTC, supplied by the caller; seq is the caller's command
 * sequence number, copied into ledger entries. No floating point anywhere;
 * every product of two money-sized values is formed in __int128 and checked
 * against the int64 range before it is stored (HG_EOVERFLOW otherwise).
 *
 * Determinism. Nothing reads a clock or a random source. Iteration orders
 * (daily cycle, final settlement, ledger posting) are registration and
 * creation orders, never hash layout, so the same calls give the same ledger,
 * byte for byte.
 *
 * Threads. An hg_clearing_t is owned by exactly one thread (the exchange
 * state machine's); every function taking one must be called from it.
 * Nothing is locked. The pure functions (hg_clearing_dsp_compute,
 * hg_clearing_fsp, hg_clearing_reject_str) may be called from any thread.
 *
 * Memory. hg_clearing_create() allocates the account, instrument, firm,
 * product-group and position tables and the ledger's initial capacity, and
 * touches every page of the account and position tables and the id maps so
 * that no page fault happens later on the order path. The
 * order path (hg_clearing_check_order, hg_clearing_open_add/_remove,
 * hg_clearing_fill) never allocates: position records come from a pool sized
 * at create and an exhausted pool is a clean reject/error. Only calls that
 * post ledger entries (deposit, withdraw, fee, daily cycle, final settlement)
 * may grow the ledger with realloc, up to cfg.ledger_max_entries; they check
 * and grow before changing anything, so a failure leaves the state as it was.
 *
 * Errors. Functions return 0 or a negative code (hourglass/error.h). A call
 * that returns an error changes nothing. A refused order or withdrawal is not
 * an error: the call returns 0 and the result's reason says why.
 */
#ifndef HOURGLASS_CLEARING_H
#define HOURGLASS_CLEARING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hourglass/civil.h" /* HG_NS_PER_DAY */

#ifdef __cplusplus
extern "C" {
#endif

/* Same types as hourglass/book.h (identical typedefs are legal C11). */
typedef uint32_t hg_account_t;
typedef int64_t hg_price_t; /* ticks */
typedef int64_t hg_qty_t;   /* contracts */

/* Order side: the same values as HG_SIDE_BUY / HG_SIDE_SELL of book.h. */
#define HG_CLR_BUY 0
#define HG_CLR_SELL 1

/* Bounds that keep every intermediate inside __int128 with room to spare
 * (|w| * ref * TV * rate < 2^109): prices and DSPs (ticks), positions and
 * each side's open quantity (contracts), tick values (micro-USD) and index
 * fixings (micro-USD per GPU-hour). */
#define HG_CLR_PRICE_MAX ((int64_t)1000000000)      /* 1e9 ticks = 1M USD/GPU-hour */
#define HG_CLR_QTY_MAX ((int64_t)1000000000)        /* 1e9 contracts */
#define HG_CLR_TICK_VALUE_MAX ((int64_t)1000000000) /* 1e9 micro-USD */
#define HG_CLR_FIXING_MAX ((int64_t)1000000000000)  /* 1e12 micro-USD = 1e9 ticks */
/* instrument field of ledger entries that belong to no instrument */
#define HG_CLR_NO_INSTRUMENT UINT32_MAX

typedef struct hg_clearing hg_clearing_t;

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */
typedef struct hg_clearing_config {
  uint32_t max_accounts;     /* >= 1 */
  uint32_t max_instruments;  /* live (registered, not removed) instruments, >= 1 */
  uint32_t max_firms;        /* distinct firm ids, >= 1 */
  uint32_t max_groups;       /* distinct product groups (GPU, grade), >= 1 */
  uint32_t max_positions;    /* (account, instrument) records in the pool, >= 1 */
  uint64_t ledger_initial;   /* ledger entries allocated at create, >= 1 */
  uint64_t ledger_max_entries; /* growth bound; 0 = limited only by memory */
  int64_t tick_value;        /* micro-USD per tick per contract, default 1,000,000 */
  int64_t position_limit;          /* default 10,000 */
  int64_t position_limit_delivery; /* default 1,000 */
  int64_t max_order_qty;           /* default 1,000 */
  uint32_t band_bps;               /* default 2000 (20%); 0 = no band */
  uint32_t im_rate_bps;            /* default 1500 */
  uint32_t im_rate_delivery_bps;   /* default 2000 */
  int64_t dsp_max_spread;          /* tier-2 widest spread, ticks, default 10 */
  uint64_t dsp_window_ns;          /* tier-1 window before the cycle, default 5 min */
  uint64_t cycle_time_of_day_ns;   /* daily cycle time of day UTC, default 16:00 */
  /* The clearing guarantee (settlement/CONTRACT.md sections 4.6 and 4.7). */
  uint32_t mm_rate_bps;            /* maintenance margin, bps of IM at the mark,
                                      default 7500; 1..10000 */
  uint32_t liq_fee_bps;            /* liquidation fee, bps of a liquidation fill's
                                      notional, default 50; <= 10000 */
  int64_t liq_slice_qty;           /* largest liquidation order, default 10; > 0 */
  uint32_t call_cycles;            /* a call is due at the n-th daily cycle after
                                      the mark that opened it, default 1; >= 1 */
} hg_clearing_config_t;

/* Fills cfg with the defaults of settlement/CONTRACT.md sections 1 and 4
 * (4.6: mm_rate_bps 7500, liq_fee_bps 50, liq_slice_qty 10, call_cycles 1) and
 * modest capacities (1,024 accounts, 64 instruments, 256 firms, 16 groups,
 * 65,536 positions, 65,536 ledger entries initially, unbounded growth).
 * Cannot fail. */
void hg_clearing_config_default(hg_clearing_config_t *cfg);

/*
 * Creates a clearing state. Returns 0 and sets *out; HG_EINVAL if cfg is NULL
 * or a field is out of range (capacities 0, tick_value <= 0, limits <= 0,
 * rates > 100000 bps, window >= one day, cycle time >= one day, window > cycle
 * time of day); -ENOMEM. On failure nothing is allocated and *out untouched.
 */
int hg_clearing_create(const hg_clearing_config_t *cfg, hg_clearing_t **out);

/* Frees everything. NULL is a no-op. */
void hg_clearing_destroy(hg_clearing_t *c);

/* ------------------------------------------------------------------------ */
/* Accounts and cash                                                        */
/* ------------------------------------------------------------------------ */

/* Registers account id (any uint32 chosen by the caller but
 * HG_CLR_FUND_ACCOUNT, HG_EINVAL) of firm firm_id.
 * Balance starts at 0. HG_EEXISTS if id is registered; HG_EFULL if
 * max_accounts accounts, or max_firms firms and firm_id is new. */
int hg_clearing_account_add(hg_clearing_t *c, hg_account_t id, uint32_t firm_id);

typedef struct hg_clearing_account_info {
  uint32_t firm_id;
  int64_t balance;        /* = equity: collateral plus every VM/final settlement, minus fees */
  int64_t initial_margin; /* current, open orders counted (saturates at INT64_MAX) */
  int64_t position_margin; /* the same with every open order left out; initial_margin -
                              position_margin is what the open orders add (it can be
                              negative: an order that turns an instrument's worst case to
                              the other side of the group can earn the spread offset) */
  uint32_t positions;     /* position records held (open or not) */
} hg_clearing_account_info_t;

/* HG_ENOTFOUND if id is unknown. O(positions of the account). */
int hg_clearing_account_info(const hg_clearing_t *c, hg_account_t id,
                             hg_clearing_account_info_t *out);

/* Credits amount (> 0, micro-USD) of collateral. HG_ENOTFOUND (account),
 * HG_EINVAL (amount <= 0), HG_EOVERFLOW (balance would leave int64),
 * HG_EFULL or -ENOMEM (ledger). Posts one HG_LEDGER_DEPOSIT entry. */
int hg_clearing_deposit(hg_clearing_t *c, hg_account_t id, int64_t amount, uint64_t seq,
                        uint64_t ts);

/* Why an order or a withdrawal was refused. Numbered from 32 so that they
 * never collide with hg_reject_t of book.h and can share its wire field. */
#define HG_CLR_REJECT_MAP(XX)                                                        \
  XX(NONE,                0, "accepted")                                             \
  XX(UNKNOWN_ACCOUNT,    32, "unknown account")                                      \
  XX(UNKNOWN_INSTRUMENT, 33, "unknown instrument")                                   \
  XX(INSTRUMENT_CLOSED,  34, "instrument is finally settled")                        \
  XX(INVALID_QTY,        35, "quantity must be positive")                            \
  XX(QTY_TOO_LARGE,      36, "quantity above the maximum order size")                \
  XX(INVALID_PRICE,      37, "price out of range")                                   \
  XX(NO_REFERENCE,       38, "no reference price (no settlement price, no fixing)")  \
  XX(PRICE_BAND,         39, "price outside the band around the reference price")    \
  XX(POSITION_LIMIT,     40, "position limit would be exceeded")                     \
  XX(INSUFFICIENT_MARGIN,41, "equity below initial margin")                          \
  XX(POSITIONS_FULL,     42, "position table full")                                  \
  XX(INVALID_AMOUNT,     43, "amount must be positive")                              \
  XX(INVALID_SIDE,       44, "side must be buy or sell")                        \
  XX(MARGIN_CALL,        45, "account under a margin call may only reduce risk")

/* The clearing's share of the reason number space: [FIRST, END). */
#define HG_CLR_REJECT_FIRST 32
#define HG_CLR_REJECT_END 64
#define HG_CLR_IS_REJECT(r) ((r) >= HG_CLR_REJECT_FIRST && (r) < HG_CLR_REJECT_END)

typedef enum hg_clr_reject {
#define HG_CLR_REJECT_ENUM(name, num, msg) HG_CLR_REJ_##name = num,
  HG_CLR_REJECT_MAP(HG_CLR_REJECT_ENUM)
#undef HG_CLR_REJECT_ENUM
} hg_clr_reject_t;

/* Static description of a reject reason ("unknown reason" if unknown). */
const char *hg_clearing_reject_str(int reason);

/* A hint only: starts loading the records a pre-trade check of `account`
 * reads (the account, its position records), so that a check issued a
 * little later finds them in cache. Changes nothing; an unknown account is
 * ignored. For a caller that knows its next commands (journal replay). */
void hg_clearing_prefetch_account(const hg_clearing_t *c, hg_account_t account);

/*
 * Outcome of a pre-trade or withdrawal check, with the numbers a reject text
 * needs. Fields not meaningful for a reason are 0.
 *  equity          the account's balance
 *  initial_margin  initial margin with the order counted as open (order
 *                  check) or current (withdrawal); INT64_MAX if it does not
 *                  fit int64 (then always a reject)
 *  amount          withdrawal amount (withdrawal only)
 *  position        worst-case position on the order's side with the order
 *                  (see hg_clearing_check_order), limit the limit applied
 *  ref_price       the reference price used (ticks), band_low/band_high the
 *                  inclusive band (ticks) when a band applies
 */
typedef struct hg_clearing_result {
  int reason; /* hg_clr_reject_t; HG_CLR_REJ_NONE = accepted */
  int64_t equity;
  int64_t initial_margin;
  int64_t amount;
  int64_t position;
  int64_t limit;
  int64_t ref_price;
  int64_t band_low, band_high;
} hg_clearing_result_t;

/*
 * Withdraws amount (> 0) if min(balance, E) - amount - IM >= 0, E being the
 * equity at the last marks (hg_clearing_standing) and IM the current
 * initial margin (positions and open orders); res->equity is that minimum.
 * Returns 0 with res->reason NONE (done, one HG_LEDGER_WITHDRAWAL entry) or
 * a reason (nothing changed): UNKNOWN_ACCOUNT, INVALID_AMOUNT, MARGIN_CALL
 * (the account is called or liquidating: res->amount is the call),
 * INSUFFICIENT_MARGIN. Errors: HG_EINVAL (res NULL), HG_EFULL or -ENOMEM
 * (ledger).
 */
int hg_clearing_withdraw(hg_clearing_t *c, hg_account_t id, int64_t amount, uint64_t seq,
                         uint64_t ts, hg_clearing_result_t *res);

/* Debits a fee (amount > 0) tied to instrument (or HG_CLR_NO_INSTRUMENT).
 * No margin check: a fee may make the balance negative. Not for the fill
 * path (it may grow the ledger). HG_ENOTFOUND, HG_EINVAL, HG_EOVERFLOW,
 * HG_EFULL, -ENOMEM. */
int hg_clearing_fee(hg_clearing_t *c, hg_account_t id, uint32_t instrument, int64_t amount,
                    uint64_t seq, uint64_t ts);

/* ------------------------------------------------------------------------ */
/* Instruments and index fixings                                            */
/* ------------------------------------------------------------------------ */
typedef struct hg_clearing_instrument {
  uint32_t id;          /* the book's instrument_id */
  uint32_t group_id;    /* product group (GPU, grade); margin offsets within it */
  uint16_t year;        /* delivery month */
  uint8_t month;        /* 1..12 */
  uint8_t in_delivery;  /* 1 while the contract is in its delivery month */
  int64_t tick_value;   /* micro-USD per tick per contract; 0 = cfg.tick_value */
  hg_price_t last_dsp;  /* last daily settlement price, ticks; 0 = none yet */
} hg_clearing_instrument_t;

/* Registers an instrument. A last_dsp > 0 given here is an initial price,
 * not a DSP: it is the previous settlement price of the first cycle and the
 * reference price only where the contract's rules give none (see
 * hg_clearing_ref_price and hg_clearing_daily_cycle), until a cycle sets a
 * DSP. HG_EEXISTS, HG_EINVAL (month, tick_value < 0, last_dsp < 0 or >
 * HG_CLR_PRICE_MAX), HG_EFULL (max_instruments, or max_groups and group_id
 * is new). */
int hg_clearing_instrument_add(hg_clearing_t *c, const hg_clearing_instrument_t *inst);

/* Sets the delivery-month flag, which selects im_rate_delivery_bps and
 * position_limit_delivery. The clearing keeps no calendar: the caller
 * decides (the exchange sets every contract's flag from the UTC date of each
 * command's timestamp before applying it). HG_ENOTFOUND. */
int hg_clearing_set_delivery(hg_clearing_t *c, uint32_t instrument, int in_delivery);

/* Records the latest index fixing of group_id (micro-USD per GPU-hour,
 * 1..HG_CLR_FIXING_MAX). final != 0 also makes it the latest FINAL fixing.
 * The latest fixing (any status) is the reference price of an instrument with
 * no DSP (ahead of its initial price); the latest FINAL one is DSP tier 4. "Latest" means the most recent
 * call: the caller feeds fixings in day order. HG_ENOTFOUND (group never
 * registered through an instrument), HG_EINVAL. */
int hg_clearing_set_fixing(hg_clearing_t *c, uint32_t group_id, int64_t value_micro, int final);

typedef struct hg_clearing_instrument_info {
  hg_clearing_instrument_t inst; /* as registered, last_dsp and in_delivery current */
  int last_dsp_tier;             /* hg_clr_dsp_tier_t of last_dsp; 0 = none, or
                                  * last_dsp is the initial price */
  hg_price_t ref_price;          /* current reference price, 0 = none */
  int settled;                   /* 1 after final settlement */
  hg_price_t fsp;                /* final settlement price once settled */
  int64_t open_interest;         /* sum of long positions */
} hg_clearing_instrument_info_t;

/* The reference price of an instrument in ticks (last DSP, else the latest
 * fixing rounded half up to a tick, else the initial price given at
 * registration; 0 = none), in O(1): the order path's band check and margin
 * use it. 0 and *out, or HG_ENOTFOUND. */
int hg_clearing_ref_price(const hg_clearing_t *c, uint32_t instrument, hg_price_t *out);

/* HG_ENOTFOUND. O(positions of the instrument) for open_interest. */
int hg_clearing_instrument_info(const hg_clearing_t *c, uint32_t instrument,
                                hg_clearing_instrument_info_t *out);

/*
 * Inter-commodity spreads (settlement/CONTRACT.md 7.4): each pairs a token
 * contract with a GPU-hour contract in a ratio n_t : n_g. For each pair,
 * with w_t and w_g the account's worst cases (4.4) in the two contracts,
 * of opposite signs, k = min(floor(|w_t| / n_t), floor(|w_g| / n_g))
 * complete packages get a credit of floor(k x (n_t x m_t + n_g x m_g) x
 * HG_CLR_SPREAD_CREDIT_BPS / 10000), m_t and m_g the per-contract margins
 * (4.4; at the marks where the margin is at the marks), subtracted from the
 * initial margin after the group margins, pairs in the order given (a leg
 * in two pairs gives its contracts to the first first). The table replaces
 * the previous one; it is not part of the clearing's serialization: its
 * owner (the exchange, from its spread instruments) sets it again after a
 * restore. HG_EINVAL (n > HG_CLR_MAX_SPREADS, a ratio outside 1..100).
 */
#define HG_CLR_MAX_SPREADS 32
#define HG_CLR_SPREAD_CREDIT_BPS 3000
typedef struct hg_clearing_spread {
  uint32_t token, gpu; /* instrument ids */
  uint32_t n_t, n_g;
} hg_clearing_spread_t;
int hg_clearing_spreads_set(hg_clearing_t *c, const hg_clearing_spread_t *pairs, size_t n);

/* ------------------------------------------------------------------------ */
/* Order path                                                               */
/* ------------------------------------------------------------------------ */

/*
 * Pre-trade check of a new order (settlement/CONTRACT.md sections 1 and 4),
 * in this order, the first failure giving res->reason:
 *   UNKNOWN_ACCOUNT, UNKNOWN_INSTRUMENT, INSTRUMENT_CLOSED, INVALID_SIDE,
 *   INVALID_QTY (qty <= 0), QTY_TOO_LARGE (qty > max_order_qty),
 *   INVALID_PRICE (price < 0 or > HG_CLR_PRICE_MAX; price 0 = market order,
 *   no band check), NO_REFERENCE (no DSP and no fixing),
 *   PRICE_BAND (|price - ref| * 10000 > ref * band_bps),
 *   MARGIN_CALL (the account is called or liquidating and the order does
 *   not reduce: a buy needs pos < 0 and pos + open_buy + qty <= 0, a sell
 *   pos > 0 and pos - open_sell - qty >= 0; res->equity = E at the marks,
 *   res->initial_margin = IM at the marks, res->amount = the call),
 *   POSITION_LIMIT, INSUFFICIENT_MARGIN, POSITIONS_FULL.
 * Position limit: x = pos + open_buy + qty for a buy, pos - open_sell - qty
 * for a sell (every open order of that side and this one fill). Rejected iff
 * |x| > limit and |x| > |x without this order| (an order that moves the
 * worst case toward zero is always allowed, so an account above a lowered
 * delivery-month limit can reduce). limit = position_limit, or
 * position_limit_delivery while the instrument is in its delivery month.
 * Margin: initial margin (see hg_clearing_initial_margin) computed with qty
 * added to the order side's open quantity; accepted iff balance - IM >= 0.
 * On acceptance the (account, instrument) position record is created if it
 * did not exist, so that the fills and open-quantity calls that follow cannot
 * run out of records (POSITIONS_FULL otherwise). Nothing else changes; the
 * caller then calls hg_clearing_open_add for what rests and
 * hg_clearing_fill for what trades. Returns 0, or HG_EINVAL if res is NULL.
 */
int hg_clearing_check_order(hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                            int side, hg_qty_t qty, hg_price_t price,
                            hg_clearing_result_t *res);

/* The price-band step of hg_clearing_check_order alone, for a replace that
 * does not grow its order (it adds no position or margin risk). Sets
 * res->ref_price and, when a band applies, res->band_low / band_high, the
 * same figures check_order reports; res->reason = HG_CLR_REJ_PRICE_BAND if
 * price lies outside, else 0 (also with no reference price: a resting
 * order's replace is not refused for that). Returns 0, HG_EINVAL (res
 * NULL) or HG_ENOTFOUND (instrument). */
int hg_clearing_check_band(const hg_clearing_t *c, uint32_t instrument, hg_price_t price,
                           hg_clearing_result_t *res);

/* Resting quantity changes: add when an order (or a replace's increase)
 * rests, remove when resting quantity leaves (cancel, expiry, replace
 * decrease, or a fill of a resting order unless the fill call did it).
 * HG_ENOTFOUND (account, instrument), HG_EINVAL (side, qty <= 0, removing
 * more than is open), HG_EFULL (no position record and the pool is full),
 * HG_EOVERFLOW. */
int hg_clearing_open_add(hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                         int side, hg_qty_t qty);
int hg_clearing_open_remove(hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                            int side, hg_qty_t qty);

/* flags of hg_clearing_fill: the buyer's / seller's side of the trade was a
 * resting order; its open quantity is reduced by qty in the same call. */
#define HG_CLR_FILL_BUY_RESTING 1u
#define HG_CLR_FILL_SELL_RESTING 2u
/* the fill is a leg of a spread trade: it stays out of the DSP window's VWAP
 * (settlement/CONTRACT.md 7.4) */
#define HG_CLR_FILL_NO_DSP 4u

/*
 * One execution of qty (> 0) at price (1..HG_CLR_PRICE_MAX) between buyer and
 * seller (equal for a self-trade: the position is unchanged). Updates both
 * positions and today's sums (sum q, sum q*p) for variation margin, and,
 * when ts falls in [cycle - window, cycle) of its UTC day, the instrument's
 * tier-1 VWAP sums. No cash moves until the daily cycle. Never allocates.
 * Errors (nothing changed): HG_ENOTFOUND (account, instrument), HG_ESTATE
 * (instrument finally settled), HG_EINVAL (qty, price, flags, a resting
 * side's open quantity below qty), HG_EFULL (a side has no position record
 * and the pool is full; cannot happen when both sides passed
 * hg_clearing_check_order or hg_clearing_open_add), HG_EOVERFLOW.
 */
int hg_clearing_fill(hg_clearing_t *c, uint32_t instrument, hg_account_t buyer,
                     hg_account_t seller, hg_qty_t qty, hg_price_t price, uint64_t ts,
                     unsigned flags);

typedef struct hg_clearing_position {
  int64_t pos;       /* current position, today's fills included */
  int64_t pos_prev;  /* position at the last daily cycle (pos_{t-1}) */
  int64_t open_buy;  /* resting buy quantity */
  int64_t open_sell; /* resting sell quantity */
  int64_t day_qty;   /* sum of signed fill quantities since the last cycle */
  int64_t day_value; /* sum of signed quantity x price (ticks) of those fills,
                        saturated at the int64 range */
} hg_clearing_position_t;

/* HG_ENOTFOUND if the account or instrument is unknown; a known pair with no
 * record gives all zeros and 0. */
int hg_clearing_position(const hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                         hg_clearing_position_t *out);

/* Current initial margin of account (positions and open orders),
 * settlement/CONTRACT.md section 4.4: per instrument a = pos + open_buy,
 * b = pos - open_sell, w the one with the larger |.| (a on a tie), margin =
 * ceil(|w| * ref * TV * rate / 10000) (exact for the default TV), rate
 * im_rate_bps or im_rate_delivery_bps in the delivery month; per group
 * IM = L + S - floor(min(L, S) / 2); account IM = sum over groups. Saturates
 * at INT64_MAX. HG_ENOTFOUND. */
int hg_clearing_initial_margin(const hg_clearing_t *c, hg_account_t account, int64_t *out);

/* ------------------------------------------------------------------------ */
/* The clearing guarantee: marks, calls, liquidation, fund, waterfall        */
/* (settlement/CONTRACT.md sections 4.6 and 4.7, choices in 5.12)            */
/* ------------------------------------------------------------------------ */

/*
 * The mark rule alone (pure). ref > 0 the reference price, bid/ask the best
 * prices (0 = side empty), last the last trade price (0 = none), band_bps the
 * band (0 = none). The band is [ceil(ref (10000 - bps) / 10000) (>= 1),
 * floor(ref (10000 + bps) / 10000)]. Mark = floor((bid + ask + 1) / 2) when
 * both sides exist and lie in the band, else last, else ref; then clamped to
 * the band. HG_EINVAL (ref <= 0, negative or > HG_CLR_PRICE_MAX inputs,
 * band_bps > 10000).
 */
int hg_clearing_mark_compute(hg_price_t ref, hg_price_t bid, hg_price_t ask, hg_price_t last,
                             uint32_t band_bps, hg_price_t *mark);

/* Standing of an account. */
typedef enum hg_clr_standing {
  HG_CLR_OK = 0,          /* in good standing */
  HG_CLR_CALLED = 1,      /* equity at the marks below IM at the marks */
  HG_CLR_LIQUIDATING = 2  /* below maintenance margin, or a call past due */
} hg_clr_standing_t;
/* Why an account is liquidating (it stops at the target named). */
#define HG_CLR_LIQ_MM 1       /* below MM: until E >= MM */
#define HG_CLR_LIQ_DEADLINE 2 /* call past due: until E >= IM at the marks */

typedef struct hg_clearing_mark_report {
  uint32_t instruments_marked; /* got a mark (a reference price exists) */
  uint32_t accounts_evaluated; /* accounts holding a position */
  uint32_t called;             /* accounts CALLED after the round */
  uint32_t liquidating;        /* accounts LIQUIDATING after the round */
  uint32_t new_calls;          /* calls opened by this round */
  uint32_t new_liquidations;   /* accounts that became LIQUIDATING in it */
} hg_clearing_mark_report_t;

/* ------------------------------------------------------------------------ */
/* Daily settlement price and the daily cycle                               */
/* ------------------------------------------------------------------------ */
typedef enum hg_clr_dsp_tier {
  HG_DSP_TIER_NONE = 0,     /* no price could be set */
  HG_DSP_TIER_VWAP = 1,     /* VWAP of trades in [15:55, 16:00) */
  HG_DSP_TIER_MID = 2,      /* midpoint of best bid and ask, spread <= 10 ticks */
  HG_DSP_TIER_PREVIOUS = 3, /* previous DSP */
  HG_DSP_TIER_INDEX = 4     /* latest FINAL index fixing, no DSP yet */
} hg_clr_dsp_tier_t;

typedef struct hg_clearing_dsp_input {
  int64_t window_qty;     /* sum of traded quantities in the window */
  __int128 window_qp;     /* sum of qty * price over the same trades */
  hg_price_t best_bid;    /* 0 = no bid */
  hg_price_t best_ask;    /* 0 = no ask */
  int64_t max_spread;     /* ticks */
  hg_price_t prev_dsp;    /* 0 = none */
  int64_t final_fixing;   /* micro-USD per GPU-hour, 0 = none */
} hg_clearing_dsp_input_t;

/*
 * The DSP rule alone (pure). Tier 1 if window_qty > 0: floor((2*qp + q) /
 * (2*q)); tier 2 if bid > 0, ask > 0, ask - bid <= max_spread:
 * floor((bid + ask + 1) / 2); tier 3 if prev_dsp > 0; tier 4 if
 * final_fixing > 0: floor((fixing + 500) / 1000). Sets *tier (NONE and
 * *dsp = 0 if nothing applies). HG_EINVAL on negative inputs or a window
 * with qp <= 0; HG_ERANGE if the result exceeds HG_CLR_PRICE_MAX.
 */
int hg_clearing_dsp_compute(const hg_clearing_dsp_input_t *in, hg_price_t *dsp, int *tier);

/* Best bid/ask of one instrument at the cycle (0 = side empty). */
typedef struct hg_clearing_top {
  uint32_t instrument;
  hg_price_t best_bid;
  hg_price_t best_ask;
} hg_clearing_top_t;

typedef struct hg_clearing_cycle_report {
  uint32_t instruments_settled; /* got a DSP and were marked */
  uint32_t instruments_skipped; /* no DSP could be set (tier NONE): carried over */
  uint64_t entries_posted;      /* VM ledger entries */
  int64_t vm_paid;              /* sum of negative VM (<= 0) */
  int64_t vm_received;          /* sum of positive VM (>= 0); vm_paid + vm_received == 0 */
  /* the waterfall (CONTRACT.md 4.7) */
  uint32_t bankrupt;            /* accounts with negative cash after VM */
  int64_t fund_used;            /* paid by the fund (FUND_COVER) */
  int64_t socialized;           /* charged to the cycle's winners (SOCIALIZED) */
  int64_t uncovered;            /* shortfall left negative, carried over */
  hg_clearing_mark_report_t marks; /* the evaluation at the DSPs */
} hg_clearing_cycle_report_t;

/*
 * The 16:00 cycle of UTC day ts / NS_PER_DAY (ts is the cycle command's
 * timestamp). For every live instrument in registration order: DSP by
 * hg_clearing_dsp_compute (window sums of that day, tops[] for tier 2 -
 * instruments absent from tops have no bid/ask - previous DSP, group's latest
 * final fixing); when none of the four applies to an instrument that has
 * only its initial price, that price, reported as tier 3 (PREVIOUS). An
 * instrument with still no price (tier NONE) is skipped: its positions and
 * today's sums carry over to the next cycle unchanged. For the others, every
 * position record with pos_prev != 0 or fills since the last cycle gets one
 * HG_LEDGER_VM entry (possibly of amount 0) of
 *   VM = TV * (pos_prev * (DSP_t - DSP_{t-1}) + sum_q * DSP_t - sum_qp)
 * which equals the contract's formula exactly; then pos_prev = pos, today's
 * sums reset, last DSP = DSP_t; records that then hold nothing (no
 * position, no open quantity) return to the pool. Then the waterfall of
 * CONTRACT.md 4.7 (every account with negative cash is bankrupt: the fund
 * covers it in registration order, then the winners of this cycle's VM pro
 * rata, weights min(VM, cash), leftover micro-USD one each in registration
 * order; anything beyond stays negative and is reported as uncovered); then
 * every settled instrument's mark becomes its DSP and every account holding
 * a position is evaluated as by hg_clearing_mark, calls due at this cycle
 * (cycle count, see hg_clearing_guarantee) becoming liquidations. Checks that VM sums to exactly
 * zero per instrument before changing anything: HG_ECORRUPT otherwise (never expected). Other
 * errors, all leaving the state unchanged: HG_EINVAL (tops names an unknown instrument, or bad
 * prices), HG_EOVERFLOW, HG_EFULL or -ENOMEM (ledger). report may be NULL.
 */
int hg_clearing_daily_cycle(hg_clearing_t *c, uint64_t seq, uint64_t ts,
                            const hg_clearing_top_t *tops, size_t ntops,
                            hg_clearing_cycle_report_t *report);

/* ------------------------------------------------------------------------ */
/* The clearing guarantee: calls                                              */
/* ------------------------------------------------------------------------ */

/*
 * A mark round (CONTRACT.md 4.6). For every live, unsettled instrument in
 * registration order with a reference price: mark = hg_clearing_mark_compute
 * (reference, the instrument's best bid/ask from tops - absent: none -, its
 * last trade, band_bps); the mark is stored (an instrument with no mark
 * yet is valued at its reference price). Then every account, in
 * registration order, holding a position is evaluated at the marks:
 *   E     = balance + sum TV (pos_prev (M - DSP_prev) + day_q M - day_qp)
 *   IM_M  = initial margin of the positions alone, M in place of ref
 *   MM    = ceil(IM_M * mm_rate_bps / 10000)
 * E >= IM_M: OK (call cleared); MM <= E < IM_M: CALLED for IM_M - E (a new
 * call due at cycle count + call_cycles; an open one keeps its due cycle);
 * E < MM: LIQUIDATING (reason MM, or DEADLINE if it was already). Accounts
 * holding no position become OK. Moves no cash and posts nothing; never
 * allocates. HG_EINVAL (tops names an unknown instrument, twice, or bad
 * prices). rep may be NULL.
 */
int hg_clearing_mark(hg_clearing_t *c, const hg_clearing_top_t *tops, size_t ntops,
                     hg_clearing_mark_report_t *rep);

/* An instrument's mark (ticks; 0 = never marked) and last trade price (0 =
 * none). HG_ENOTFOUND. */
int hg_clearing_mark_get(const hg_clearing_t *c, uint32_t instrument, hg_price_t *mark,
                         hg_price_t *last_trade);

typedef struct hg_clearing_standing {
  int state;            /* hg_clr_standing_t */
  int liq_reason;       /* HG_CLR_LIQ_* when LIQUIDATING, else 0 */
  int64_t equity;       /* E at the last marks, now (saturated to int64) */
  int64_t im;           /* IM_M at the last marks, positions only */
  int64_t mm;           /* ceil(IM_M * mm_rate_bps / 10000) */
  int64_t call_amount;  /* IM_M - E as of the last evaluation; 0 when OK */
  uint64_t call_due;    /* cycle count at which the call is due; 0 when OK */
} hg_clearing_standing_t;

/* The account's standing: state and call as last evaluated, E, IM_M and MM
 * computed now at the last marks. HG_ENOTFOUND. O(positions of the account). */
int hg_clearing_standing(const hg_clearing_t *c, hg_account_t account,
                         hg_clearing_standing_t *out);

/* One liquidation order of a mark round. */
typedef struct hg_clearing_liq_slice {
  hg_account_t account;
  uint32_t instrument;
  int side;            /* HG_CLR_BUY or HG_CLR_SELL: reduces the position */
  hg_qty_t qty;        /* min(|pos|, liq_slice_qty) */
  hg_price_t limit;    /* band edge around the mark (sell: ceil(M (10000 - bps)
                          / 10000), at least 1; buy: floor(M (10000 + bps) /
                          10000)); 0 = no band: a market order */
} hg_clearing_liq_slice_t;

/*
 * The slices of the current round: for every LIQUIDATING account in
 * registration order, one per position (record order) in an unsettled
 * instrument. The caller cancels each listed account's resting orders, then
 * sends the slices to the books as immediate-or-cancel orders and books
 * their fills with hg_clearing_liq_fill. Writes at most cap slices (out may
 * be NULL with cap 0 to count) and sets *n to the full count: 0, or
 * HG_ERANGE if cap < *n. HG_EINVAL. Changes nothing.
 */
int hg_clearing_liq_slices(const hg_clearing_t *c, hg_clearing_liq_slice_t *out, size_t cap,
                           size_t *n);

/*
 * A fill of a liquidation order: hg_clearing_fill (same arguments and
 * errors), then the liquidated side (liq_side HG_CLR_BUY: buyer, else
 * seller) pays fee = min(ceil(qty * price * TV * liq_fee_bps / 10000),
 * max(0, E after the fill)) to the fund (two HG_LEDGER_LIQ_FEE entries; none
 * when 0), then both accounts are re-evaluated as after any fill (a state
 * only improves between marks). The ledger is reserved first: HG_EFULL or
 * -ENOMEM change nothing. *fee (may be NULL) gets the fee.
 */
int hg_clearing_liq_fill(hg_clearing_t *c, uint32_t instrument, hg_account_t buyer,
                         hg_account_t seller, hg_qty_t qty, hg_price_t price, unsigned flags,
                         int liq_side, uint64_t seq, uint64_t ts, int64_t *fee);

/* Credits the insurance fund (amount > 0; counted as a deposit; one
 * HG_LEDGER_FUND_DEPOSIT entry). HG_EINVAL, HG_EOVERFLOW, HG_EFULL, -ENOMEM. */
int hg_clearing_fund_deposit(hg_clearing_t *c, int64_t amount, uint64_t seq, uint64_t ts);

typedef struct hg_clearing_guarantee {
  int64_t fund;            /* insurance fund balance */
  int64_t fund_deposits;   /* operator funding, total */
  int64_t liq_fees;        /* liquidation fees received, total */
  int64_t fund_used;       /* paid to bankrupt accounts, total */
  int64_t socialized;      /* charged to winners, total */
  int64_t uncovered;       /* negative cash left after the last cycle */
  uint64_t bankruptcies;   /* (account, cycle) pairs with negative cash */
  uint64_t cycles;         /* daily cycles run (the cycle count) */
  uint32_t called;         /* accounts CALLED now */
  uint32_t liquidating;    /* accounts LIQUIDATING now */
} hg_clearing_guarantee_t;
/* Aggregates only (no account ids): fit for metrics. O(accounts). */
void hg_clearing_guarantee(const hg_clearing_t *c, hg_clearing_guarantee_t *out);

/* ------------------------------------------------------------------------ */
/* Final settlement                                                         */
/* ------------------------------------------------------------------------ */
typedef enum hg_clr_fixing_status {
  HG_CLR_FIX_MISSING = 0,     /* no fixing published for the day */
  HG_CLR_FIX_PROVISIONAL = 1, /* published, not yet FINAL */
  HG_CLR_FIX_FINAL = 2,       /* FINAL (a finalized CARRIED fixing is FINAL) */
  HG_CLR_FIX_NO_FIX = 3       /* the day has no fixing and needs an operator */
} hg_clr_fixing_status_t;

typedef struct hg_clearing_fixing {
  uint8_t day;       /* day of the delivery month, 1..31 */
  uint8_t status;    /* hg_clr_fixing_status_t */
  int64_t value;     /* micro-USD per GPU-hour (FINAL: > 0) */
} hg_clearing_fixing_t;

typedef struct hg_clearing_fsp {
  hg_price_t fsp;           /* ticks, when complete */
  uint32_t days;            /* calendar days of the month */
  uint32_t n_missing;       /* days that are not FINAL */
  uint8_t missing_day[31];  /* ascending */
  uint8_t missing_status[31]; /* MISSING, PROVISIONAL or NO_FIX for each */
} hg_clearing_fsp_t;

/*
 * Final Settlement Price of delivery month (year, month) from the fixings
 * given (any order, at most one per day): FSP = floor((2 * sum + n * 1000) /
 * (2 * n * 1000)) over the n calendar days, the exact mean rounded half up to
 * a tick in one step. Returns 0 with out->fsp set when every day is FINAL;
 * HG_ESTATE with out->missing_* listing every day that is not (settlement
 * must wait); HG_EINVAL (month, year 1..9999, a day outside the month, a day
 * given twice, an unknown status, a FINAL value <= 0 or > HG_CLR_FIXING_MAX).
 */
int hg_clearing_fsp(unsigned year, unsigned month, const hg_clearing_fixing_t *fixings,
                    size_t n, hg_clearing_fsp_t *out);

/*
 * Final settlement of instrument at fsp (ticks > 0): every open position pays
 * or receives pos * (FSP - last DSP) * TV (one HG_LEDGER_FINAL entry per
 * non-zero position) and closes; the instrument becomes settled (orders
 * refused with INSTRUMENT_CLOSED, fills refused). Requires the instrument to
 * have a DSP and no fills since the last daily cycle (run the cycle of the
 * last trading day first) and no open orders: HG_ESTATE otherwise, or if
 * already settled. HG_ECORRUPT if the payments do not sum to zero (never
 * expected). HG_ENOTFOUND, HG_EINVAL, HG_EOVERFLOW, HG_EFULL, -ENOMEM. All
 * errors leave the state unchanged. The (now empty) position records stay
 * until hg_clearing_instrument_remove or the next daily cycle.
 */
int hg_clearing_final_settle(hg_clearing_t *c, uint32_t instrument, hg_price_t fsp,
                             uint64_t seq, uint64_t ts);

/* Frees a settled instrument's slot and position records (its ledger entries
 * stay). HG_ENOTFOUND, HG_ESTATE (not settled). */
int hg_clearing_instrument_remove(hg_clearing_t *c, uint32_t instrument);

/* ------------------------------------------------------------------------ */
/* Ledger and statements                                                    */
/* ------------------------------------------------------------------------ */
typedef enum hg_ledger_kind {
  HG_LEDGER_DEPOSIT = 1,
  HG_LEDGER_WITHDRAWAL = 2,
  HG_LEDGER_VM = 3,    /* variation margin; price = DSP_t, qty = position after */
  HG_LEDGER_FINAL = 4, /* final settlement; price = FSP, qty = position closed */
  HG_LEDGER_FEE = 5,
  /* The clearing guarantee (CONTRACT.md 4.6, 4.7). Fund entries carry
   * account HG_CLR_FUND_ACCOUNT and balance = the fund after the entry. */
  HG_LEDGER_FUND_DEPOSIT = 6, /* fund only: operator funding, + */
  HG_LEDGER_LIQ_FEE = 7,      /* liquidation fee: - on the liquidated account,
                                 + on the fund; price, qty = the fill */
  HG_LEDGER_FUND_COVER = 8,   /* + on a bankrupt account, - on the fund */
  HG_LEDGER_SOCIALIZED = 9    /* loss sharing: - on each winner of the cycle,
                                 + on the bankrupt accounts */
} hg_ledger_kind_t;

/* The insurance fund's account id in ledger entries: 0, never a member
 * (hg_clearing_account_add refuses it; the exchange never registers 0). */
#define HG_CLR_FUND_ACCOUNT 0u

typedef struct hg_ledger_entry {
  uint64_t index;        /* position in the ledger, from 0 */
  uint64_t seq;          /* caller's command sequence number */
  uint64_t ts;
  hg_account_t account;
  uint32_t instrument;   /* HG_CLR_NO_INSTRUMENT for deposits/withdrawals */
  uint32_t kind;         /* hg_ledger_kind_t */
  int64_t amount;        /* signed: + credit, - debit */
  int64_t balance;       /* account balance after this entry */
  hg_price_t price;      /* see kinds; 0 otherwise */
  int64_t qty;           /* see kinds; 0 otherwise */
} hg_ledger_entry_t;

/* Number of entries ever posted. */
uint64_t hg_clearing_ledger_size(const hg_clearing_t *c);
/* Copies entry index into *out. HG_ENOTFOUND if index >= size. */
int hg_clearing_ledger_get(const hg_clearing_t *c, uint64_t index, hg_ledger_entry_t *out);

/* Sums kept for conservation checks: balances + fund == deposits -
 * withdrawals - fees (VM, final settlement, liquidation fees, fund cover
 * and socialized losses only move cash). */
typedef struct hg_clearing_totals {
  int64_t deposits, withdrawals, fees; /* all >= 0; deposits include the fund's */
  int64_t balances;                    /* sum of every account balance */
  int64_t fund;                        /* the insurance fund's balance */
} hg_clearing_totals_t;
void hg_clearing_totals(const hg_clearing_t *c, hg_clearing_totals_t *out);

/* 1 iff balances + fund == deposits - withdrawals - fees. O(accounts). */
int hg_clearing_conserved(const hg_clearing_t *c);

/*
 * Statement of account for instrument (every ledger entry of that account
 * naming the instrument, oldest first), as CSV with header
 *   index,seq,ts,account,instrument,kind,amount,balance,price,qty
 * (kind as DEPOSIT, WITHDRAWAL, VM, FINAL, FEE, FUND_DEPOSIT, LIQ_FEE,
 * FUND_COVER, SOCIALIZED; amounts in micro-USD) or as
 * JSON: {"account":A,"instrument":I,"entries":[{...same keys...}],"total":T}.
 * instrument HG_CLR_NO_INSTRUMENT gives every entry of the account.
 * Buffer variants write at most cap bytes including the NUL, like snprintf,
 * and set *len to the full length without the NUL: 0 if it fit, HG_ERANGE if
 * truncated (buf may be NULL with cap 0 to size it). FILE variants return
 * -EIO on a write error. HG_ENOTFOUND (account).
 */
/* The ledger kind's name as statements print it ("LIQ_FEE"); "UNKNOWN" if unknown.
 * Static, any thread. */
const char *hg_clearing_ledger_kind_str(uint32_t kind);

int hg_clearing_statement_csv(const hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                              char *buf, size_t cap, size_t *len);
int hg_clearing_statement_json(const hg_clearing_t *c, hg_account_t account, uint32_t instrument,
                               char *buf, size_t cap, size_t *len);
int hg_clearing_statement_csv_file(const hg_clearing_t *c, hg_account_t account,
                                   uint32_t instrument, FILE *f);
int hg_clearing_statement_json_file(const hg_clearing_t *c, hg_account_t account,
                                    uint32_t instrument, FILE *f);
/*
 * The same statement (json 0: CSV, 1: JSON) of account for instrument from
 * e[0..n), a copy of the ledger (hg_clearing_ledger_get) that the caller may
 * have changed: the entries of account (naming instrument unless it is
 * HG_CLR_NO_INSTRUMENT) in array order. Buffer semantics as above; an
 * account with no entries gives the header (and an empty list) only.
 * HG_EINVAL, HG_ERANGE, HG_EOVERFLOW (JSON total beyond int64).
 */
int hg_clearing_statement_of(const hg_ledger_entry_t *e, size_t n, hg_account_t account,
                             uint32_t instrument, int json, char *buf, size_t cap, size_t *len);

/*
 * The accounts that get a statement for instrument: every account with at
 * least one ledger entry naming it (VM, FINAL or fee; flat accounts that
 * traded it earlier included), in the order of their first such entry.
 * Writes at most cap ids to out (NULL with cap 0 to count) and sets *n to the
 * full count: 0, or HG_ERANGE if cap < *n. HG_EINVAL. O(ledger size); not
 * for the order path.
 */
int hg_clearing_statement_accounts(hg_clearing_t *c, uint32_t instrument, hg_account_t *out,
                                   size_t cap, size_t *n);

/* ------------------------------------------------------------------------ */
/* Snapshot                                                                 */
/* ------------------------------------------------------------------------ */

/* Receives the next len bytes of a serialization; returns 0 or a negative
 * code, which stops the serialization and is returned by it. */
typedef int (*hg_clearing_write_fn)(void *ctx, const void *data, size_t len);

/*
 * Writes the whole clearing state (configuration, accounts, product groups
 * and their fixings, instruments with DSP state, VWAP-window sums and every
 * position record, and the whole ledger) as a canonical little-endian byte
 * string through write, in chunks of at most 4 KiB: the same state always
 * gives the same bytes, so the stream can feed a state hash. Returns 0, the
 * first negative value write returned, HG_EINVAL or -ENOMEM (a 4 KiB staging
 * buffer). Does not change the state.
 */
int hg_clearing_serialize(const hg_clearing_t *c, hg_clearing_write_fn write, void *ctx);

/*
 * Rebuilds a clearing state from a serialization (data, len). Everything is
 * checked: HG_ECORRUPT for any malformed, truncated or inconsistent input
 * (trailing bytes, unknown ids, out-of-range values, positions or today's
 * sums not adding up to zero per instrument, ledger balances that do not
 * replay), HG_EVERSION for another format version, -ENOMEM. On failure
 * nothing is allocated and *out is untouched. Capacities come from the
 * serialized configuration and are allocated and touched as by
 * hg_clearing_create (the ledger is sized from the entries present): verify
 * the blob's integrity (checksum) before restoring it, since a corrupted
 * capacity can ask for a large allocation.
 * Serializing the restored state gives the same bytes.
 */
int hg_clearing_restore(const void *data, size_t len, hg_clearing_t **out);

#ifdef __cplusplus
}
#endif

#endif /* HOURGLASS_CLEARING_H */
