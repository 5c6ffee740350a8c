/*
 * market_api.c - the public market data under /api/v1/ (see market_api.h):
 * JSON from the market view's published copy (mdview.h), and the market
 * events of /api/v1/stream.
 */
#include "market_api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/civil.h"
#include "hourglass/names.h"

/* The instrument named by ?<name>= (instrument, book): a numeric id, or a contract symbol
 * (B200.A.2027-03) looked up in the view's list. The id; -1 when the value
 * is missing or neither; -2 for a well-formed symbol the view does not know. */
static long query_instrument(hg_mdview_t *view, const char *query, const char *name) {
  char v[HG_SYMBOL_MAX + 1];
  if (hg_http_query_get(query, name, v, sizeof v) != 0) return -1;
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

/* The fields of an instrument's JSON after "id", each rendered as its JSON
 * value ("" when left out), so that the stream can compare them with what
 * it sent. */
enum {
  F_SYMBOL, F_LISTED, F_HALTED, F_TICK, F_UNIT, F_MIN, F_MAX, F_SEQ, F_TRADES, F_VOLUME,
  F_LAST, F_LAST_QTY, F_DSP, F_SETTLE_DAY, F_CHANGE, F_CHANGE_PCT, F_DAY, F_OPEN, F_HIGH,
  F_LOW, F_DAY_VOLUME, F_OI, F_LTD, F_BID, F_ASK, NFIELDS
};
static const char *const field_name[NFIELDS] = {
    "symbol", "listed", "halted", "tick_size", "contract_unit", "min_price", "max_price",
    "seq", "trades", "volume", "last_price", "last_qty", "dsp", "settlement_day", "change",
    "change_pct", "day", "open", "high", "low", "day_volume", "open_interest",
    "last_trading_day", "bid", "ask"};
typedef char fval_t[48];

static void date_value(fval_t v, int32_t day) {
  char d[16];
  hg_civil_format_date(day, d);
  snprintf(v, sizeof(fval_t), "\"%s\"", d);
}

static void quote_value(fval_t v, const hg_tob_t *t, int ask) {
  int64_t px = ask ? t->ask_px : t->bid_px, qty = ask ? t->ask_qty : t->bid_qty;
  if (qty > 0)
    snprintf(v, sizeof(fval_t), "[%" PRId64 ",%" PRId64 "]", px, qty);
  else
    snprintf(v, sizeof(fval_t), "null");
}

static void render_instrument(const hg_md_instrument_t *in, const hg_tob_t *t, fval_t v[NFIELDS]) {
  const size_t n = sizeof(fval_t);
  for (size_t k = 0; k < NFIELDS; k++) v[k][0] = '\0';
  /* Symbols are names (hourglass/names.h): nothing to escape. */
  snprintf(v[F_SYMBOL], n, "\"%s\"", in->symbol);
  snprintf(v[F_LISTED], n, "%s", in->listed ? "true" : "false");
  snprintf(v[F_HALTED], n, "%s", in->halted ? "true" : "false");
  snprintf(v[F_TICK], n, "%" PRId64, in->tick_size);
  snprintf(v[F_UNIT], n, "%" PRId64, in->contract_unit);
  snprintf(v[F_MIN], n, "%" PRId64, in->min_price);
  snprintf(v[F_MAX], n, "%" PRId64, in->max_price);
  snprintf(v[F_SEQ], n, "%" PRIu64, in->seq);
  snprintf(v[F_TRADES], n, "%" PRIu64, in->trades);
  snprintf(v[F_VOLUME], n, "%" PRIu64, in->volume);
  snprintf(v[F_LAST], n, "%" PRId64, in->last_price);
  snprintf(v[F_LAST_QTY], n, "%" PRId64, in->last_qty);
  if (in->dsp > 0) {
    snprintf(v[F_DSP], n, "%" PRId64, in->dsp);
    if (in->dsp_day > 0) date_value(v[F_SETTLE_DAY], in->dsp_day);
    if (in->last_price > 0) {
      int64_t ch = in->last_price - in->dsp, bp = ch * 10000 / in->dsp, a = bp < 0 ? -bp : bp;
      snprintf(v[F_CHANGE], n, "%" PRId64, ch);
      snprintf(v[F_CHANGE_PCT], n, "%s%" PRId64 ".%02" PRId64, bp < 0 ? "-" : "", a / 100,
               a % 100);
    }
  }
  if (in->day_trades > 0) {
    date_value(v[F_DAY], in->day);
    snprintf(v[F_OPEN], n, "%" PRId64, in->day_open);
    snprintf(v[F_HIGH], n, "%" PRId64, in->day_high);
    snprintf(v[F_LOW], n, "%" PRId64, in->day_low);
    snprintf(v[F_DAY_VOLUME], n, "%" PRIu64, in->day_volume);
  }
  snprintf(v[F_OI], n, "%" PRId64, in->open_interest);
  char gpu[HG_INDEX_GPU_MAX], grade[HG_INDEX_GRADE_MAX];
  uint32_t year, month;
  if (hg_symbol_parse(in->symbol, gpu, sizeof gpu, grade, sizeof grade, &year, &month))
    date_value(v[F_LTD], hg_civil_to_day(year, month, hg_civil_month_days(year, month)));
  if (t != NULL) {
    quote_value(v[F_BID], t, 0);
    quote_value(v[F_ASK], t, 1);
  }
}

/* {"id":N,"name":value...}: every field with a value. */
static void json_fields(hg_sbuf_t *b, uint32_t id, const fval_t v[NFIELDS]) {
  hg_sbuf_printf(b, "{\"id\":%u", id);
  for (size_t k = 0; k < NFIELDS; k++)
    if (v[k][0] != '\0') hg_sbuf_printf(b, ",\"%s\":%s", field_name[k], v[k]);
  hg_sbuf_puts(b, "}");
}

static void json_instrument(hg_sbuf_t *b, const hg_md_instrument_t *in, const hg_tob_t *t) {
  fval_t v[NFIELDS];
  render_instrument(in, t, v);
  json_fields(b, in->id, v);
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

const char *const hg_market_api_paths[] = {
    "/api/v1/instruments", "/api/v1/fixings",  "/api/v1/fixings/receipt",
    "/api/v1/tob",         "/api/v1/book",     "/api/v1/trades",
    "/api/v1/candles",     "/api/v1/settlements", "/api/v1/clearing", NULL};

/* The "1m", "1h", "1d" of ?interval=: the index in hg_md_intervals_s, or -1. */
static int query_interval(const char *query) {
  static const char *const names[HG_MD_INTERVALS] = {"1m", "1h", "1d"};
  char v[8];
  if (hg_http_query_get(query, "interval", v, sizeof v) != 0) return -1;
  for (int k = 0; k < HG_MD_INTERVALS; k++)
    if (strcmp(v, names[k]) == 0) return k;
  return -1;
}

/* /api/v1/candles: the instrument's candles of one interval, oldest first. */
static void candles(hg_mdview_t *view, uint32_t id, const char *query, hg_http_response_t *r) {
  static _Thread_local hg_md_candle_t cd[HG_MD_CANDLES];
  hg_sbuf_t *b = &r->body;
  int k = query_interval(query);
  if (k < 0) {
    r->status = 400;
    hg_sbuf_puts(b, "{\"error\":\"expected &interval=1m, 1h or 1d\"}\n");
    return;
  }
  size_t n = 0;
  if (hg_mdview_candles(view, id, (size_t)k, cd, &n) != 0) {
    not_found(r, "unknown instrument");
    return;
  }
  hg_sbuf_printf(b, "{\"instrument\":%u,\"interval_s\":%u,\"candles\":[", id,
                 hg_md_intervals_s[k]);
  for (size_t i = 0; i < n; i++)
    hg_sbuf_printf(b,
                   "%s{\"t\":%" PRId64 ",\"open\":%" PRId64 ",\"high\":%" PRId64
                   ",\"low\":%" PRId64 ",\"close\":%" PRId64 ",\"volume\":%" PRIu64
                   ",\"trades\":%" PRIu64 "}",
                   i ? "," : "", cd[i].start, cd[i].open, cd[i].high, cd[i].low, cd[i].close,
                   cd[i].volume, cd[i].trades);
  hg_sbuf_puts(b, "]}\n");
}

/* /api/v1/settlements: the instrument's settlement prices, oldest first. */
static void settlements(hg_mdview_t *view, uint32_t id, hg_http_response_t *r) {
  static _Thread_local hg_md_settlement_t st[HG_MD_SETTLEMENTS];
  size_t n = 0;
  if (hg_mdview_settlements(view, id, st, &n) != 0) {
    not_found(r, "unknown instrument");
    return;
  }
  hg_sbuf_printf(&r->body, "{\"instrument\":%u,\"settlements\":[", id);
  for (size_t i = 0; i < n; i++) {
    char day[16];
    hg_civil_format_date(st[i].day, day);
    hg_sbuf_printf(&r->body, "%s{\"day\":\"%s\",\"price\":%" PRId64 ",\"tier\":%u}",
                   i ? "," : "", day, st[i].price, st[i].tier);
  }
  hg_sbuf_puts(&r->body, "]}\n");
}

void hg_market_api(hg_mdview_t *view, const char *path, const char *query, hg_http_response_t *r) {
  r->content_type = "application/json";
  hg_sbuf_t *b = &r->body;
  size_t route = 0;
  while (hg_market_api_paths[route] != NULL && strcmp(hg_market_api_paths[route], path) != 0)
    route++;
  if (hg_market_api_paths[route] == NULL) {
    not_found(r, "no such endpoint");
    return;
  }
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
  if (strcmp(path, "/api/v1/clearing") == 0) {
    /* The insurance fund and what went through it (no account ids). */
    hg_md_clearing_t g;
    hg_mdview_clearing(view, &g);
    hg_sbuf_printf(b,
                   "{\"insurance_fund_micro_usd\":%" PRId64 ",\"fund_deposits_micro_usd\":%" PRId64
                   ",\"liquidation_fees_micro_usd\":%" PRId64 ",\"fund_used_micro_usd\":%" PRId64
                   ",\"socialized_micro_usd\":%" PRId64 ",\"bankruptcies\":%" PRIu64
                   ",\"accounts_called\":%" PRIu32 ",\"accounts_liquidating\":%" PRIu32
                   ",\"liquidation_fills\":%" PRIu64 ",\"mark_rounds\":%" PRIu64 "}\n",
                   g.fund, g.fund_deposits, g.liq_fees, g.fund_used, g.socialized, g.bankruptcies,
                   g.called, g.liquidating, g.liquidation_fills, g.mark_rounds);
    return;
  }
  if (strcmp(path, "/api/v1/fixings") == 0 || strcmp(path, "/api/v1/fixings/receipt") == 0) {
    fixings(view, strcmp(path, "/api/v1/fixings") != 0, query, r);
    return;
  }
  /* The per-instrument endpoints; any other path is unknown (404) before
   * its query is looked at. */
  bool tob = strcmp(path, "/api/v1/tob") == 0, book = strcmp(path, "/api/v1/book") == 0;
  bool candle = strcmp(path, "/api/v1/candles") == 0;
  bool settle = strcmp(path, "/api/v1/settlements") == 0;
  if (!tob && !book && !candle && !settle && strcmp(path, "/api/v1/trades") != 0) {
    not_found(r, "no such endpoint");
    return;
  }
  long id = query_instrument(view, query, "instrument");
  if (id == -1) {
    r->status = 400;
    hg_sbuf_puts(b, "{\"error\":\"expected ?instrument=<id or symbol>\"}\n");
    return;
  }
  if (id < 0) {
    not_found(r, "unknown instrument");
    return;
  }
  if (candle) {
    candles(view, (uint32_t)id, query, r);
    return;
  }
  if (settle) {
    settlements(view, (uint32_t)id, r);
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
  } else { /* /api/v1/trades */
    hg_sbuf_printf(b, "{\"instrument\":%u,", in.id);
    json_trades(b, trades, nt);
    hg_sbuf_puts(b, "}\n");
  }
  free(bids);
  free(asks);
  free(trades);
}

/* ---------------------------------------------------------------- stream */

/* Trades a book keeps and sends (the page shows them all). */
#define STREAM_TRADES 20

/* What the watchers were sent of one instrument (by the view's list
 * order, which only appends). */
typedef struct sent {
  uint32_t id;
  uint64_t seq;
  fval_t v[NFIELDS];
  hg_md_level_t *lv[2]; /* depth each, best first */
  uint32_t n[2];
  hg_md_trade_t tr[STREAM_TRADES]; /* newest first */
  uint32_t ntr;
  uint64_t trades; /* the instrument's trade count when sent */
} sent_t;

struct hg_market_stream {
  hg_mdview_t *view;
  uint32_t depth;
  sent_t *sent; /* HG_MARKET_MAX_INSTRUMENTS; levels allocated on first use */
  size_t n;
  /* scratch for one encode */
  hg_md_instrument_t *ins;
  hg_md_level_t *lv[2];
  hg_md_trade_t *tr;
  hg_sbuf_t delta, book, books; /* books: the frames of the book events */
  int resync; /* an encode failed: send every field and whole books next */
};

int hg_market_stream_create(hg_mdview_t *view, hg_market_stream_t **out) {
  hg_market_stream_t *st = calloc(1, sizeof *st);
  if (st == NULL) return -ENOMEM;
  st->view = view;
  st->depth = hg_mdview_depth(view);
  st->sent = calloc(HG_MARKET_MAX_INSTRUMENTS, sizeof *st->sent);
  st->ins = malloc(HG_MARKET_MAX_INSTRUMENTS * sizeof *st->ins);
  st->lv[0] = malloc(st->depth * sizeof(hg_md_level_t));
  st->lv[1] = malloc(st->depth * sizeof(hg_md_level_t));
  st->tr = malloc(hg_mdview_trade_cap(view) * sizeof *st->tr);
  if (st->sent == NULL || st->ins == NULL || st->lv[0] == NULL || st->lv[1] == NULL ||
      st->tr == NULL) {
    hg_market_stream_destroy(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

void hg_market_stream_destroy(hg_market_stream_t *st) {
  if (st == NULL) return;
  for (size_t i = 0; st->sent != NULL && i < HG_MARKET_MAX_INSTRUMENTS; i++) {
    free(st->sent[i].lv[0]);
    free(st->sent[i].lv[1]);
  }
  free(st->sent);
  free(st->ins);
  free(st->lv[0]);
  free(st->lv[1]);
  free(st->tr);
  hg_sbuf_free(&st->delta);
  hg_sbuf_free(&st->book);
  hg_sbuf_free(&st->books);
  free(st);
}

/* ,"<side>":[[price,qty],...] with the levels that differ between was and
 * now (qty 0 for a price gone), or ,"<side>_full":[...] with the whole side
 * when that is shorter; nothing when none differ. 1 if any. */
static int level_changes(hg_sbuf_t *b, const char *side, const hg_md_level_t *was, size_t nw,
                         const hg_md_level_t *now, size_t nn, int whole) {
  size_t mark = b->len;
  int k = 0;
  hg_sbuf_printf(b, ",\"%s\":[", side);
  for (size_t i = 0; i < nn; i++) {
    size_t j = 0;
    while (j < nw && was[j].price != now[i].price) j++;
    if (j < nw && was[j].qty == now[i].qty) continue;
    hg_sbuf_printf(b, "%s[%" PRId64 ",%" PRId64 "]", k++ ? "," : "", now[i].price, now[i].qty);
  }
  for (size_t j = 0; j < nw; j++) {
    size_t i = 0;
    while (i < nn && now[i].price != was[j].price) i++;
    if (i == nn) hg_sbuf_printf(b, "%s[%" PRId64 ",0]", k++ ? "," : "", was[j].price);
  }
  hg_sbuf_puts(b, "]");
  if (k == 0 || (size_t)k > nn || whole) {
    if (!b->oom) b->len = mark; /* nothing, or the whole side */
    if (k > 0 || whole) {
      hg_sbuf_printf(b, ",\"%s_full\":", side);
      levels(b, now, nn);
    }
  }
  return k > 0;
}

/* The "book" event of instrument slot s if its book or trades changed;
 * updates what was sent. */
static void stream_book(hg_market_stream_t *st, sent_t *s, hg_sbuf_t *out) {
  size_t n[2] = {0, 0}, nt = 0;
  hg_md_instrument_t in;
  if (hg_mdview_book(st->view, s->id, &in, st->lv[0], &n[0], st->lv[1], &n[1], st->tr, &nt) != 0)
    return;
  hg_sbuf_t *b = &st->book;
  b->len = 0;
  b->oom = 0;
  hg_sbuf_printf(b, "event: book\ndata: {\"instrument\":%u", s->id);
  int changed = level_changes(b, "bids", s->lv[0], s->n[0], st->lv[0], n[0], st->resync);
  changed |= level_changes(b, "asks", s->lv[1], s->n[1], st->lv[1], n[1], st->resync);
  changed |= st->resync;
  /* The trades since the last event: the newest in.trades - s->trades. */
  uint64_t fresh = in.trades > s->trades ? in.trades - s->trades : 0;
  if (fresh > nt) fresh = nt;
  if (fresh > STREAM_TRADES) fresh = STREAM_TRADES;
  hg_sbuf_puts(b, ",");
  json_trades(b, st->tr, (size_t)fresh);
  hg_sbuf_puts(b, "}\n\n");
  for (int side = 0; side < 2; side++) {
    memcpy(s->lv[side], st->lv[side], n[side] * sizeof(hg_md_level_t));
    s->n[side] = (uint32_t)n[side];
  }
  uint32_t keep = s->ntr + fresh > STREAM_TRADES ? STREAM_TRADES - (uint32_t)fresh : s->ntr;
  memmove(s->tr + fresh, s->tr, keep * sizeof *s->tr);
  memcpy(s->tr, st->tr, (size_t)fresh * sizeof *s->tr);
  s->ntr = keep + (uint32_t)fresh;
  s->trades = in.trades;
  if ((changed || fresh > 0) && !b->oom) hg_http_stream_event(out, s->id, b->p, b->len);
}

void hg_market_stream(hg_market_stream_t *st, hg_sbuf_t *out) {
  enum { MAXI = HG_MARKET_MAX_INSTRUMENTS };
  size_t n = hg_mdview_instruments(st->view, st->ins, MAXI);
  if (n > MAXI) n = MAXI;
  hg_sbuf_t *d = &st->delta;
  d->len = 0;
  d->oom = 0;
  st->books.len = 0;
  st->books.oom = 0;
  hg_sbuf_puts(d, "event: delta\ndata: {\"instruments\":[");
  size_t changed = 0;
  for (size_t i = 0; i < n; i++) {
    const hg_md_instrument_t *in = &st->ins[i];
    sent_t *s = &st->sent[i];
    if (i < st->n && s->seq == in->seq && !st->resync) continue;
    if (s->lv[0] == NULL) {
      s->lv[0] = calloc(st->depth, sizeof(hg_md_level_t));
      s->lv[1] = calloc(st->depth, sizeof(hg_md_level_t));
      if (s->lv[0] == NULL || s->lv[1] == NULL) {
        free(s->lv[0]);
        free(s->lv[1]);
        s->lv[0] = s->lv[1] = NULL;
        d->oom = 1;
        break;
      }
    }
    hg_tob_t t;
    fval_t v[NFIELDS];
    render_instrument(in, hg_mdview_tob(st->view, in->id, &t) == 0 ? &t : NULL, v);
    s->id = in->id;
    s->seq = in->seq;
    int k = 0;
    for (size_t f = 0; f < NFIELDS; f++) {
      if (strcmp(v[f], s->v[f]) == 0) continue;
      memcpy(s->v[f], v[f], sizeof(fval_t));
      /* seq is not a change anyone shows; change and change_pct follow
       * from last_price and dsp. */
      if (f == F_SEQ || f == F_CHANGE || f == F_CHANGE_PCT) continue;
      hg_sbuf_printf(d, "%s", k++ ? "" : changed++ ? ",{" : "{");
      if (k == 1) hg_sbuf_printf(d, "\"id\":%u", in->id);
      hg_sbuf_printf(d, ",\"%s\":%s", field_name[f], v[f][0] ? v[f] : "null");
    }
    if (k) hg_sbuf_puts(d, "}");
    stream_book(st, s, &st->books);
  }
  if (n > st->n) st->n = n;
  hg_sbuf_puts(d, "]}\n\n");
  st->resync = 0;
  if (d->oom || st->books.oom) {
    /* What was sent is no longer known: the next encode sends it all. */
    for (size_t i = 0; i < st->n; i++) memset(st->sent[i].v, 0, sizeof st->sent[i].v);
    st->resync = 1;
    out->oom = 1;
    return;
  }
  if (changed) hg_http_stream_event(out, 0, d->p, d->len);
  if (st->books.len) hg_sbuf_put(out, st->books.p, st->books.len); /* after the delta */
}

int hg_market_stream_snapshot(hg_market_stream_t *st, const char *query, hg_sbuf_t *out,
                              uint32_t *topic) {
  *topic = 0;
  long id = 0;
  char v[HG_SYMBOL_MAX + 1];
  if (hg_http_query_get(query, "book", v, sizeof v) == 0 || strstr(query, "book=") != NULL) {
    id = query_instrument(st->view, query, "book");
    if (id == -1) {
      hg_sbuf_puts(out, "{\"error\":\"expected ?book=<id or symbol>\"}\n");
      return 400;
    }
  }
  const sent_t *book = NULL;
  for (size_t i = 0; id > 0 && i < st->n; i++)
    if (st->sent[i].id == (uint32_t)id) book = &st->sent[i];
  if (id != 0 && book == NULL) {
    hg_sbuf_puts(out, "{\"error\":\"unknown instrument\"}\n");
    return 404;
  }
  hg_sbuf_puts(out, "event: snapshot\ndata: {\"instruments\":[");
  for (size_t i = 0; i < st->n; i++) {
    if (i) hg_sbuf_puts(out, ",");
    json_fields(out, st->sent[i].id, (const fval_t *)st->sent[i].v);
  }
  hg_sbuf_puts(out, "],\"book\":");
  if (book == NULL) {
    hg_sbuf_puts(out, "null");
  } else {
    hg_sbuf_printf(out, "{\"instrument\":%u,\"bids\":", book->id);
    levels(out, book->lv[0], book->n[0]);
    hg_sbuf_puts(out, ",\"asks\":");
    levels(out, book->lv[1], book->n[1]);
    hg_sbuf_puts(out, ",");
    json_trades(out, book->tr, book->ntr);
    hg_sbuf_puts(out, "}");
    *topic = book->id;
  }
  hg_sbuf_puts(out, "}\n\n");
  return 0;
}
