/*
 * market_api.c - the public market data under /api/v1/ (see market_api.h):
 * JSON from the market view's published copy (mdview.h), and the market
 * events of /api/v1/stream.
 */
#include "market_api.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/civil.h"
#include "hourglass/names.h"

/* The instrument named by ?instrument=: a numeric id, or a contract symbol
 * (B200.A.2027-03) looked up in the view's list. The id; -1 when the value
 * is missing or neither; -2 for a well-formed symbol the view does not know. */
static long query_instrument(hg_mdview_t *view, const char *query) {
  char v[HG_SYMBOL_MAX + 1];
  if (hg_http_query_get(query, "instrument", v, sizeof v) != 0) return -1;
  if (v[0] >= '0' && v[0] <= '9') {
    char *end;
    unsigned long id = strtoul(v, &end, 10);
    return *end != '\0' || id == 0 || id > UINT32_MAX ? -1 : (long)id;
  }
  char gpu[HG_INDEX_GPU_MAX], grade[HG_INDEX_GRADE_MAX];
  uint32_t year, month;
  if (!hg_symbol_parse(v, gpu, sizeof gpu, grade, sizeof grade, &year, &month)) return -1;
  enum { MAXI = HG_MARKET_MAX_INSTRUMENTS };
  hg_md_instrument_t *ins = malloc(MAXI * sizeof *ins);
  if (ins == NULL) return -2;
  size_t n = hg_mdview_instruments(view, ins, MAXI);
  long id = -2;
  for (size_t i = 0; i < n && i < MAXI; i++)
    if (strcmp(ins[i].symbol, v) == 0) id = ins[i].id; /* the newest listing wins */
  free(ins);
  return id;
}

static void json_instrument(hg_sbuf_t *b, const hg_md_instrument_t *in, const hg_tob_t *t) {
  hg_sbuf_printf(b, "{\"id\":%u,\"symbol\":", in->id);
  hg_sbuf_json_str(b, in->symbol);
  hg_sbuf_printf(b,
                 ",\"listed\":%s,\"halted\":%s,\"tick_size\":%" PRId64 ",\"contract_unit\":%" PRId64
                 ",\"min_price\":%" PRId64 ",\"max_price\":%" PRId64 ",\"seq\":%" PRIu64
                 ",\"trades\":%" PRIu64 ",\"volume\":%" PRIu64 ",\"last_price\":%" PRId64
                 ",\"last_qty\":%" PRId64,
                 in->listed ? "true" : "false", in->halted ? "true" : "false", in->tick_size,
                 in->contract_unit, in->min_price, in->max_price, in->seq, in->trades, in->volume,
                 in->last_price, in->last_qty);
  if (in->dsp > 0) hg_sbuf_printf(b, ",\"dsp\":%" PRId64, in->dsp);
  if (t != NULL) {
    hg_sbuf_puts(b, ",\"bid\":");
    if (t->bid_qty > 0)
      hg_sbuf_printf(b, "{\"price\":%" PRId64 ",\"qty\":%" PRId64 "}", t->bid_px, t->bid_qty);
    else
      hg_sbuf_puts(b, "null");
    hg_sbuf_puts(b, ",\"ask\":");
    if (t->ask_qty > 0)
      hg_sbuf_printf(b, "{\"price\":%" PRId64 ",\"qty\":%" PRId64 "}", t->ask_px, t->ask_qty);
    else
      hg_sbuf_puts(b, "null");
  }
  hg_sbuf_puts(b, "}");
}

/* "instruments":[...] with each one's top of book. */
static void json_instruments(hg_mdview_t *view, hg_sbuf_t *b, const hg_md_instrument_t *ins,
                             size_t n) {
  hg_sbuf_puts(b, "\"instruments\":[");
  for (size_t i = 0; i < n; i++) {
    hg_tob_t t;
    if (i) hg_sbuf_puts(b, ",");
    json_instrument(b, &ins[i], hg_mdview_tob(view, ins[i].id, &t) == 0 ? &t : NULL);
  }
  hg_sbuf_puts(b, "]");
}

static void levels(hg_sbuf_t *b, const hg_md_level_t *l, size_t n) {
  hg_sbuf_puts(b, "[");
  for (size_t i = 0; i < n; i++)
    hg_sbuf_printf(b, "%s[%" PRId64 ",%" PRId64 "]", i ? "," : "", l[i].price, l[i].qty);
  hg_sbuf_puts(b, "]");
}

/* The fields of /api/v1/book without the closing brace. */
static void json_book(hg_sbuf_t *b, const hg_md_instrument_t *in, const hg_md_level_t *bids,
                      size_t nb, const hg_md_level_t *asks, size_t na) {
  hg_sbuf_printf(b, "{\"instrument\":%u,\"symbol\":", in->id);
  hg_sbuf_json_str(b, in->symbol);
  hg_sbuf_printf(b, ",\"seq\":%" PRIu64 ",\"truncated\":%s,\"bids\":", in->seq,
                 in->depth_truncated ? "true" : "false");
  levels(b, bids, nb);
  hg_sbuf_puts(b, ",\"asks\":");
  levels(b, asks, na);
}

/* "trades":[...], newest first. */
static void json_trades(hg_sbuf_t *b, const hg_md_trade_t *t, size_t n) {
  hg_sbuf_puts(b, "\"trades\":[");
  for (size_t i = 0; i < n; i++)
    hg_sbuf_printf(b,
                   "%s{\"seq\":%" PRIu64 ",\"ts\":%" PRIu64 ",\"price\":%" PRId64
                   ",\"qty\":%" PRId64 ",\"aggressor\":\"%s\"}",
                   i ? "," : "", t[i].seq, t[i].ts, t[i].price, t[i].qty,
                   t[i].aggressor == HG_SIDE_BUY ? "buy" : "sell");
  hg_sbuf_puts(b, "]");
}

static void not_found(hg_http_response_t *r, const char *msg) {
  r->status = 404;
  r->content_type = "application/json";
  hg_sbuf_puts(&r->body, "{\"error\":");
  hg_sbuf_json_str(&r->body, msg);
  hg_sbuf_puts(&r->body, "}\n");
}

/* /api/v1/fixings: the kept fixings, oldest day first, each with the counts
 * of its receipt and, when the exchange keeps one (computed fixings), the
 * address of /api/v1/fixings/receipt?index=GPU.GRADE&day=YYYY-MM-DD, which
 * answers that one fixing with its receipt (404 when there is none). */
static void fixings(hg_mdview_t *view, int receipt, const char *query, hg_http_response_t *r) {
  static _Thread_local hg_md_fixing_t fx[HG_MD_FIXINGS];
  static const char *const status[] = {"", "PROVISIONAL", "FINAL", "NO_FIX"};
  static const char *const kind[] = {"", "computed", "carried", "external"};
  hg_sbuf_t *b = &r->body;
  char want_index[2 * HG_INDEX_GPU_MAX + HG_INDEX_GRADE_MAX], want_day[16];
  if (receipt && (hg_http_query_get(query, "index", want_index, sizeof want_index) != 0 ||
                  hg_http_query_get(query, "day", want_day, sizeof want_day) != 0)) {
    r->status = 400;
    hg_sbuf_puts(b, "{\"error\":\"expected ?index=<GPU.GRADE>&day=<YYYY-MM-DD>\"}\n");
    return;
  }
  size_t n = hg_mdview_fixings(view, fx, HG_MD_FIXINGS), shown = 0;
  if (!receipt) hg_sbuf_printf(b, "{\"available\":%s,\"fixings\":[", n ? "true" : "false");
  for (size_t i = 0; i < n; i++) {
    char index[2 * HG_INDEX_GPU_MAX + HG_INDEX_GRADE_MAX], day[16];
    snprintf(index, sizeof index, "%s.%s", fx[i].gpu, fx[i].grade);
    hg_civil_format_date(fx[i].day, day);
    int has_receipt = fx[i].providers > 0;
    if (receipt && (strcmp(index, want_index) != 0 || strcmp(day, want_day) != 0 || !has_receipt))
      continue;
    hg_sbuf_printf(b,
                   "%s{\"index\":\"IGX %s\",\"day\":\"%s\",\"value_micro_usd\":%" PRId64
                   ",\"tier\":%u,\"status\":\"%s\",\"source\":\"%s\",\"inputs\":%" PRIu64,
                   shown++ ? "," : "", index, day, fx[i].value, fx[i].tier,
                   fx[i].status < 4 ? status[fx[i].status] : "",
                   fx[i].kind < 4 ? kind[fx[i].kind] : "", fx[i].inputs);
    if (has_receipt) {
      hg_sbuf_printf(b, ",\"providers\":%u,\"hours\":%u", fx[i].providers, fx[i].hours);
      if (receipt)
        hg_sbuf_printf(b, ",\"used\":%u,\"volume_gpu_hours\":%" PRId64, fx[i].used,
                       fx[i].volume);
      else
        hg_sbuf_printf(b, ",\"receipt\":\"/api/v1/fixings/receipt?index=%s&day=%s\"", index, day);
    }
    hg_sbuf_puts(b, "}");
    if (receipt) break;
  }
  if (!receipt) {
    hg_sbuf_puts(b, "]}\n");
  } else if (shown == 0) {
    not_found(r, "no receipt kept for that index and day");
  } else {
    hg_sbuf_puts(b, "\n");
  }
}

void hg_market_api(hg_mdview_t *view, const char *path, const char *query, hg_http_response_t *r) {
  r->content_type = "application/json";
  hg_sbuf_t *b = &r->body;
  if (strcmp(path, "/api/v1/instruments") == 0) {
    enum { MAXI = HG_MARKET_MAX_INSTRUMENTS };
    hg_md_instrument_t *ins = malloc(MAXI * sizeof *ins);
    if (ins == NULL) {
      b->oom = 1;
      return;
    }
    size_t n = hg_mdview_instruments(view, ins, MAXI);
    if (n > MAXI) n = MAXI;
    hg_sbuf_puts(b, "{");
    json_instruments(view, b, ins, n);
    hg_sbuf_puts(b, "}\n");
    free(ins);
    return;
  }
  if (strcmp(path, "/api/v1/fixings") == 0 || strcmp(path, "/api/v1/fixings/receipt") == 0) {
    fixings(view, strcmp(path, "/api/v1/fixings") != 0, query, r);
    return;
  }
  /* The per-instrument endpoints; any other path is unknown (404) before
   * its query is looked at. */
  bool tob = strcmp(path, "/api/v1/tob") == 0, book = strcmp(path, "/api/v1/book") == 0;
  if (!tob && !book && strcmp(path, "/api/v1/trades") != 0) {
    not_found(r, "no such endpoint");
    return;
  }
  long id = query_instrument(view, query);
  if (id == -1) {
    r->status = 400;
    hg_sbuf_puts(b, "{\"error\":\"expected ?instrument=<id or symbol>\"}\n");
    return;
  }
  if (id < 0) {
    not_found(r, "unknown instrument");
    return;
  }
  if (tob) {
    hg_tob_t t;
    if (hg_mdview_tob(view, (uint32_t)id, &t) != 0) {
      not_found(r, "unknown instrument");
      return;
    }
    hg_sbuf_printf(b,
                   "{\"instrument\":%ld,\"seq\":%" PRIu64 ",\"bid\":[%" PRId64 ",%" PRId64
                   "],\"ask\":[%" PRId64 ",%" PRId64 "],\"last\":[%" PRId64 ",%" PRId64 "]}\n",
                   id, t.version, t.bid_px, t.bid_qty, t.ask_px, t.ask_qty, t.last_px,
                   t.last_qty);
    return;
  }
  uint32_t depth = hg_mdview_depth(view), tcap = hg_mdview_trade_cap(view);
  hg_md_level_t *bids = malloc(depth * sizeof *bids), *asks = malloc(depth * sizeof *asks);
  hg_md_trade_t *trades = malloc(tcap * sizeof *trades);
  size_t nb = 0, na = 0, nt = 0;
  hg_md_instrument_t in;
  if (bids == NULL || asks == NULL || trades == NULL) {
    b->oom = 1;
  } else if (hg_mdview_book(view, (uint32_t)id, &in, bids, &nb, asks, &na, trades, &nt) != 0) {
    not_found(r, "unknown instrument");
  } else if (book) {
    json_book(b, &in, bids, nb, asks, na);
    hg_sbuf_puts(b, "}\n");
  } else {
    hg_sbuf_printf(b, "{\"instrument\":%u,", in.id);
    json_trades(b, trades, nt);
    hg_sbuf_puts(b, "}\n");
  }
  free(bids);
  free(asks);
  free(trades);
}

/* Trades an event carries per changed instrument (the page shows them all). */
#define STREAM_TRADES 20

void hg_market_stream(hg_mdview_t *view, hg_market_stream_t *st, hg_sbuf_t *out) {
  enum { MAXI = HG_MARKET_MAX_INSTRUMENTS };
  hg_md_instrument_t *ins = malloc(MAXI * sizeof *ins);
  uint32_t depth = hg_mdview_depth(view), tcap = hg_mdview_trade_cap(view);
  hg_md_level_t *bids = malloc(depth * sizeof *bids), *asks = malloc(depth * sizeof *asks);
  hg_md_trade_t *trades = malloc(tcap * sizeof *trades);
  if (ins == NULL || bids == NULL || asks == NULL || trades == NULL) goto done;
  size_t n = hg_mdview_instruments(view, ins, MAXI);
  if (n > MAXI) n = MAXI;
  size_t changed = 0;
  for (size_t i = 0; i < n; i++) changed += i >= st->sent_n || st->sent_seq[i] != ins[i].seq;
  if (changed == 0 && n == st->sent_n) goto done;
  hg_sbuf_puts(out, "event: market\ndata: {");
  json_instruments(view, out, ins, n);
  hg_sbuf_puts(out, ",\"books\":[");
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (i < st->sent_n && st->sent_seq[i] == ins[i].seq) continue;
    st->sent_seq[i] = ins[i].seq;
    hg_md_instrument_t in;
    size_t nb = 0, na = 0, nt = 0;
    if (hg_mdview_book(view, ins[i].id, &in, bids, &nb, asks, &na, trades, &nt) != 0) continue;
    if (k++) hg_sbuf_puts(out, ",");
    json_book(out, &in, bids, nb, asks, na);
    hg_sbuf_puts(out, ",");
    json_trades(out, trades, nt < STREAM_TRADES ? nt : STREAM_TRADES);
    hg_sbuf_puts(out, "}");
  }
  st->sent_n = n;
  hg_sbuf_puts(out, "]}\n\n");
done:
  free(ins);
  free(bids);
  free(asks);
  free(trades);
}
