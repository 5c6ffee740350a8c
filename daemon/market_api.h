/*
 * market_api.h - the daemon's public market data over HTTP: the JSON of
 * /api/v1/instruments, /book, /tob, /trades, /fixings and
 * /fixings/receipt, and the "market" events of /api/v1/stream, all read
 * from a market view's published copy (mdview.h). Internal to the daemon.
 *
 * Wherever ?instrument= is read, the value is a numeric id or a contract
 * symbol (B200.A.2027-03, hourglass/names.h); a symbol is looked up in the
 * view's instrument list (the newest listing of it wins).
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

/* What the stream has sent: the seq of each instrument (by the view's list
 * order, which only appends). Zero-initialise. */
typedef struct hg_market_stream {
  uint64_t sent_seq[HG_MARKET_MAX_INSTRUMENTS];
  size_t sent_n;
} hg_market_stream_t;

/* Appends one "market" event (no id line) to out: the instrument list with
 * top of book, and the book and newest trades of each instrument whose seq
 * changed since the previous call with st; nothing when none did. */
void hg_market_stream(hg_mdview_t *view, hg_market_stream_t *st, hg_sbuf_t *out);

#endif /* HOURGLASS_MARKET_API_H */
