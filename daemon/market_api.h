/*
 * market_api.h - the daemon's public market data over HTTP: the JSON of
 * /api/v1/instruments, /book, /tob, /trades, /candles, /settlements,
 * /fixings and /fixings/receipt, and the events of /api/v1/stream, all
 * read from a market view's published copy (mdview.h). Internal to the
 * daemon.
 *
 * Wherever ?instrument= is read, the value is a numeric id or a contract
 * symbol (B200.A.2027-03, hourglass/names.h); a symbol is looked up in the
 * view's instrument list (the newest listing of it wins).
 *
 * /api/v1/instruments lists each contract with: its settings, seq, trades
 * and volume since the daemon started, last trade (last_price, last_qty),
 * "dsp" and "settlement_day" (the last daily settlement), "change" (last
 * price minus the settlement, ticks) and "change_pct" (the same in
 * percent of the settlement, two decimals, rounded toward zero), the day's
 * trading ("day", "open", "high", "low", "day_volume": the UTC day of
 * the newest trade), "open_interest", "last_trading_day" (the
 * last calendar day of the delivery month; trading ends 16:00 UTC) and
 * top of book ("bid", "ask": [price, qty] or null). Fields without a
 * value (no settlement, no trade yet) are left out.
 *
 * /api/v1/candles?instrument=&interval=1m|1h|1d: OHLC candles of the
 * trades since the daemon started, oldest first (mdview.h's rings);
 * /api/v1/settlements?instrument=: the settlement prices the view holds,
 * oldest day first.
 *
 * Threads: any thread that may read the view (the HTTP thread); a
 * hg_market_stream_t belongs to the one thread that encodes with it.
 * Allocates per call (the body, copies of the view) and frees before
 * returning; an allocation failure sets the body's oom.
 */
#ifndef HOURGLASS_MARKET_API_H
#define HOURGLASS_MARKET_API_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "mdview.h"

/* Instruments the answers list at most. */
#define HG_MARKET_MAX_INSTRUMENTS 1024

/* Answers a GET of path under /api/v1/ with query (as sent, "" if none):
 * 200 with JSON, 400 for a missing or malformed parameter, 404 for an
 * unknown instrument or endpoint. Sets r's content type. */
void hg_market_api(hg_mdview_t *view, const char *path, const char *query,
                   hg_http_response_t *r);

/* Every path hg_market_api answers (the API's description,
 * /api/v1/openapi.json, lists them), NULL-terminated. */
extern const char *const hg_market_api_paths[];

/* The market event stream (/api/v1/stream, Server-Sent Events). A watcher
 * first gets one "snapshot" event: {"instruments":[...] as
 * /api/v1/instruments lists them, "book":{...} or null}, the book (bids,
 * asks, trades newest first) being that of ?book=<id or symbol> when the
 * stream was asked with one. Then changes only: "delta" events,
 * {"instruments":[{"id":N, each field that changed, null for one that is
 * gone}]} (not "seq", nor "change" and "change_pct", which follow from
 * last_price and dsp), for every watcher; and "book" events,
 * {"instrument":N,"bids":[[price,qty]...],"asks":[...],"trades":[...]},
 * only for the watchers of that book: the levels that changed (qty 0: the
 * level is gone; a book holds the best hg_mdview_depth levels), or, where
 * shorter, "bids_full"/"asks_full" with the whole side; and the trades
 * since the previous event, newest first. A reconnect gets a new snapshot. hg_market_stream_t holds
 * what was sent: the snapshot is made from it, so snapshot plus the events after it always give the
 * present state. (After an allocation failure in an encode, the next one sends every field and
 * whole books.) */
typedef struct hg_market_stream hg_market_stream_t;

/* 0 and *out, or -ENOMEM. Any thread; then used by one thread only. */
int hg_market_stream_create(hg_mdview_t *view, hg_market_stream_t **out);
void hg_market_stream_destroy(hg_market_stream_t *st); /* NULL: no-op */

/* Appends the events of what changed since the previous call
 * (hg_http_stream_event; the delta for topic 0, each book for the topic of
 * its instrument id); nothing when nothing did. */
void hg_market_stream(hg_market_stream_t *st, hg_sbuf_t *out);

/* The snapshot of a new watcher (hg_http_snapshot_fn): 0 with the event in
 * out and *topic the book's instrument id (0 without ?book=); 400 or 404
 * with a JSON error in out for a malformed or unknown ?book=. */
int hg_market_stream_snapshot(hg_market_stream_t *st, const char *query, hg_sbuf_t *out,
                              uint32_t *topic);

#endif /* HOURGLASS_MARKET_API_H */
