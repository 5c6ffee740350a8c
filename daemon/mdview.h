/*
 * mdview.h - the daemon's public market-data view: what the HTTP endpoints
 * and /metrics show about instruments, books and trades, built from the
 * pipeline's released event stream, never from the engine's memory.
 * Internal to the daemon.
 *
 * Threads and ownership.
 *  - The view's working state belongs to the consumer thread (the thread
 *    that polls the pipeline): hg_mdview_apply() and hg_mdview_publish().
 *    Before the pipeline starts, the owner thread seeds it from the
 *    exchange with hg_mdview_seed() (the exchange is the owner's then).
 *  - Readers (the HTTP thread) never touch the working state:
 *      top of book: one hg_seqlock_t per instrument, written by
 *        hg_mdview_publish() and read lock-free (hg_mdview_tob());
 *      everything else (instrument list, depth, recent trades, counters): a
 *        published copy guarded by a mutex. hg_mdview_publish() only
 *        *tries* the lock: if a reader holds it, the copy stays dirty and is
 *        published after the next batch, so the consumer never waits for a
 *        reader. Readers copy out under the lock and format without it.
 *  - Counters of the latency histogram are atomics.
 *
 * Only public data is kept: no accounts, no order ids, no client ids
 * (open interest is summed from the cycle's variation-margin events, whose
 * accounts are not kept).
 * Memory is allocated at create; applying events never allocates.
 */
#ifndef HOURGLASS_MDVIEW_H
#define HOURGLASS_MDVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/levels.h"
#include "hourglass/pipeline.h"
#include "hourglass/seqlock.h"

/* Working depth kept per side: the best HG_MD_WORK_LEVELS levels
 * (hourglass/levels.h's overflow rule); depth_truncated says one was
 * evicted or dropped. */
#define HG_MD_WORK_LEVELS 4096

/* A published level: price in ticks, qty in contracts. */
typedef hg_level_t hg_md_level_t;

typedef struct hg_md_trade {
  uint64_t seq; /* of the command that traded */
  uint64_t ts;  /* ns since the epoch (sequencer) */
  int64_t price;
  int64_t qty;
  uint8_t aggressor; /* hg_side_t of the taker */
} hg_md_trade_t;

/* One instrument as published. */
typedef struct hg_md_instrument {
  uint32_t id;
  uint8_t listed; /* 0 once delisted */
  uint8_t halted;
  uint8_t depth_truncated; /* a level was evicted or dropped past HG_MD_WORK_LEVELS
                              since the book last reset (listing, delisting) */
  char symbol[HG_SYMBOL_MAX + 1];
  int64_t tick_size, contract_unit, min_price, max_price; /* 0 if unknown */
  uint64_t seq;        /* last command that changed it */
  uint64_t trades;     /* since open of the view (start of the process) */
  uint64_t volume;     /* contracts traded, same period */
  uint64_t orders;     /* orders accepted, same period */
  uint64_t cancels;    /* orders cancelled (any reason), same period */
  int64_t last_price, last_qty;
  int64_t dsp;         /* last daily settlement price, ticks; 0 = no cycle set one yet */
  int32_t dsp_day;     /* its UTC day number */
  /* The trading of one UTC day (that of the newest trade's timestamp):
   * first, highest and lowest trade price (ticks), contracts and trades.
   * All 0 until the view sees a trade. */
  int32_t day;
  int64_t day_open, day_high, day_low;
  uint64_t day_volume, day_trades;
  /* Contracts open (the sum of long positions) as of the last daily cycle
   * the view saw, or as the exchange held them when the view was seeded. */
  int64_t open_interest;
} hg_md_instrument_t;

/* OHLC candles, per instrument and interval, of the trades the view saw
 * (since the process started): HG_MD_CANDLES per interval, the oldest
 * dropped first. Intervals, seconds: hg_md_intervals_s. */
#define HG_MD_INTERVALS 3
#define HG_MD_CANDLES 120
extern const uint32_t hg_md_intervals_s[HG_MD_INTERVALS]; /* 60, 3600, 86400 */

typedef struct hg_md_candle {
  int64_t start; /* seconds since the epoch, a multiple of the interval */
  int64_t open, high, low, close; /* ticks */
  uint64_t volume, trades;
} hg_md_candle_t;

/* Daily settlement prices, per instrument: the last one at seeding, then
 * every cycle's; HG_MD_SETTLEMENTS kept, the oldest dropped first. */
#define HG_MD_SETTLEMENTS 64

typedef struct hg_md_settlement {
  int32_t day;  /* UTC day number of the cycle */
  uint8_t tier; /* hg_clr_dsp_tier_t */
  int64_t price; /* ticks */
} hg_md_settlement_t;

/* One published index fixing (public data: the index, not who traded). */
typedef struct hg_md_fixing {
  uint32_t group;   /* the exchange's index (GPU, grade) number */
  char gpu[HG_INDEX_GPU_MAX];     /* the index's GPU and grade, NUL-terminated */
  char grade[HG_INDEX_GRADE_MAX];
  int32_t day;      /* UTC day number */
  int64_t value;    /* micro-USD per GPU-hour; 0 for NO_FIX */
  uint8_t tier, status, kind;
  uint64_t inputs;  /* samples behind a computed fixing */
  /* From the receipt kept with the fixing (0 when none is, as for an
   * external value): distinct providers, non-empty hours, samples and
   * GPU-hours used by the tier that made the value. */
  uint32_t providers, hours, used;
  int64_t volume;
} hg_md_fixing_t;

/* Fixings the view keeps (the most recent days). */
#define HG_MD_FIXINGS 64

/* Latency buckets (upper bounds, ns) of the release-latency histogram. */
#define HG_MD_LAT_BUCKETS 14
extern const uint64_t hg_md_lat_bounds_ns[HG_MD_LAT_BUCKETS];

typedef struct hg_md_latency {
  uint64_t bucket[HG_MD_LAT_BUCKETS + 1]; /* cumulative counts; last is +Inf */
  uint64_t count;
  uint64_t sum_ns;
} hg_md_latency_t;

/* The clearing guarantee's public aggregates (settlement/CONTRACT.md 4.6,
 * 4.7), as Deribit publishes its insurance fund: no account ids. Money in
 * micro-USD. Seeded from the exchange (hg_clearing_guarantee), then followed
 * from the events (HG_XEV_CASH, HG_XEV_MARK_ROUND, HG_XEV_CYCLE). */
typedef struct hg_md_clearing {
  int64_t fund;            /* insurance fund balance */
  int64_t fund_deposits;   /* operator funding, total */
  int64_t liq_fees;        /* liquidation fees paid into the fund, total */
  int64_t fund_used;       /* paid by the fund to bankrupt accounts, total */
  int64_t socialized;      /* charged to the winners of a cycle, total */
  uint64_t bankruptcies;   /* (account, daily cycle) pairs left with negative cash */
  uint32_t called;         /* accounts called, as of the last mark round or cycle */
  uint32_t liquidating;    /* accounts liquidating, the same */
  uint64_t liquidation_fills; /* since the view opened (the process started) */
  uint64_t mark_rounds;       /* the same */
} hg_md_clearing_t;

typedef struct hg_mdview hg_mdview_t;

/* Allocates a view for up to max_instruments distinct instrument ids,
 * publishing depth levels per side and recent trades per instrument.
 * 0 and *out, HG_EINVAL (a zero argument) or -ENOMEM. Owner thread. */
int hg_mdview_create(uint32_t max_instruments, uint32_t depth, uint32_t trades, hg_mdview_t **out);

/* Frees the view; no thread may use it any more. NULL is a no-op. */
void hg_mdview_destroy(hg_mdview_t *v);

/* Seeds instruments and books from ex (not running) and publishes. Owner
 * thread, before the consumer starts. 0 or HG_EFULL (too many instruments:
 * the rest are left out, and logged by the caller). */
int hg_mdview_seed(hg_mdview_t *v, const hg_exchange_t *ex);

/* Applies n records polled from the pipeline. now_ns (CLOCK_REALTIME) is
 * read once per batch by the caller; the first event of each command adds
 * now_ns - ts to the release-latency histogram. Consumer thread. */
void hg_mdview_apply(hg_mdview_t *v, const hg_pipe_out_t *recs, size_t n, uint64_t now_ns);

/* Publishes what changed since the last publish (see above). Consumer
 * thread, after each batch. Never blocks. 1 when readers can see
 * something new (the caller then wakes the event stream), else 0. */
int hg_mdview_publish(hg_mdview_t *v);

/* ---- readers: any thread ---- */

/* Copies up to cap instruments (listed and delisted, by slot order) into
 * out; returns the total number known. */
size_t hg_mdview_instruments(hg_mdview_t *v, hg_md_instrument_t *out, size_t cap);

/* One instrument with its published depth (best first; up to the view's
 * depth each) and recent trades (newest first, up to the view's count).
 * bids/asks/trades may be NULL to skip them. 0 or HG_ENOTFOUND. */
int hg_mdview_book(hg_mdview_t *v, uint32_t id, hg_md_instrument_t *info, hg_md_level_t *bids,
                   size_t *nbids, hg_md_level_t *asks, size_t *nasks, hg_md_trade_t *trades,
                   size_t *ntrades);

/* The candles of one instrument for interval hg_md_intervals_s[interval],
 * oldest first, into out[HG_MD_CANDLES]; *n how many. 0, HG_ENOTFOUND or
 * HG_EINVAL (interval). */
int hg_mdview_candles(hg_mdview_t *v, uint32_t id, size_t interval, hg_md_candle_t *out,
                      size_t *n);

/* The settlement history of one instrument, oldest day first, into
 * out[HG_MD_SETTLEMENTS]; *n how many. 0 or HG_ENOTFOUND. */
int hg_mdview_settlements(hg_mdview_t *v, uint32_t id, hg_md_settlement_t *out, size_t *n);

/* Lock-free top of book (seqlock). 0 or HG_ENOTFOUND. */
int hg_mdview_tob(hg_mdview_t *v, uint32_t id, hg_tob_t *out);

/* The view's published depth and trade counts (sizes for the arrays above). */
uint32_t hg_mdview_depth(const hg_mdview_t *v);
uint32_t hg_mdview_trade_cap(const hg_mdview_t *v);

/* Release-latency histogram (sequencer stamp to consumer), and the number
 * of records applied. */
void hg_mdview_latency(const hg_mdview_t *v, hg_md_latency_t *out);
uint64_t hg_mdview_records(const hg_mdview_t *v);

/* The published clearing aggregates. Any thread. */
void hg_mdview_clearing(hg_mdview_t *v, hg_md_clearing_t *out);

/* Copies the kept fixings, oldest day first, into out (cap entries);
 * returns how many. Any thread. */
size_t hg_mdview_fixings(hg_mdview_t *v, hg_md_fixing_t *out, size_t cap);

#endif /* HOURGLASS_MDVIEW_H */
