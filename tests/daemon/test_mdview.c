/* The market view's figures per contract (daemon/mdview.c), from events
 * applied as the pipeline releases them: the day's open/high/low/volume
 * (starting again on a new UTC day), OHLC candles per interval in their
 * fixed rings (the oldest dropped), the settlement history (a re-run of a
 * day replaces it) and open interest summed from a cycle's VM events; the
 * clearing guarantee's aggregates; and what the API and the stream make of
 * them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/civil.h"
#include "market_api.h"
#include "market_fixture.h"

#define NS 1000000000ull

static uint64_t g_seq = 100;

/* UTC 2027-01-04 hh:mm:ss in ns. */
static uint64_t at(int day_offset, int h, int m, int s) {
  int32_t d = hg_civil_to_day(2027, 1, 4) + day_offset;
  return ((uint64_t)d * 86400u + (uint64_t)(h * 3600 + m * 60 + s)) * NS;
}

static void apply(hg_mdview_t *v, const hg_exchange_event_t *ev) {
  hg_pipe_out_t r;
  memset(&r, 0, sizeof r);
  r.kind = HG_PIPE_EVENT;
  r.seq = ev->seq;
  r.event = *ev;
  hg_mdview_apply(v, &r, 1, ev->ts);
  hg_mdview_publish(v);
}

static void fill(hg_mdview_t *v, uint32_t id, uint64_t ts, int64_t price, int64_t qty) {
  hg_exchange_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.seq = ++g_seq;
  ev.ts = ts;
  ev.type = HG_XEV_BOOK;
  ev.instrument_id = id;
  ev.book.type = HG_EV_FILL;
  ev.book.instrument_id = id;
  ev.book.side = HG_SIDE_BUY;
  ev.book.price = price;
  ev.book.qty = qty;
  apply(v, &ev);
}

/* A daily cycle for instrument id: its DSP, then one VM event per position. */
static void cycle(hg_mdview_t *v, uint32_t id, int32_t day, int64_t dsp, const int64_t *pos,
                  size_t n) {
  hg_exchange_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.seq = ++g_seq;
  ev.ts = at(0, 16, 0, 0);
  ev.type = HG_XEV_DSP;
  ev.instrument_id = id;
  ev.day = day;
  ev.price = dsp;
  ev.tier = 1;
  apply(v, &ev);
  for (size_t i = 0; i < n; i++) {
    ev.type = HG_XEV_VM;
    ev.account = 1000 + i;
    ev.qty = pos[i];
    apply(v, &ev);
  }
}

static hg_md_instrument_t info(hg_mdview_t *v, uint32_t id) {
  hg_md_instrument_t in;
  assert_int_equal(hg_mdview_book(v, id, &in, NULL, NULL, NULL, NULL, NULL, NULL), 0);
  return in;
}

static void day_figures_and_candles(void **state) {
  (void)state;
  hg_mdview_t *v = market_fixture();
  assert_non_null(v);
  fill(v, 1, at(0, 10, 0, 0), 3400, 2);
  fill(v, 1, at(0, 10, 0, 30), 3410, 3);
  fill(v, 1, at(0, 10, 1, 10), 3390, 5);
  hg_md_instrument_t in = info(v, 1);
  assert_int_equal(in.day, hg_civil_to_day(2027, 1, 4));
  assert_int_equal(in.day_open, 3400);
  assert_int_equal(in.day_high, 3410);
  assert_int_equal(in.day_low, 3390);
  assert_int_equal(in.day_volume, 10);
  assert_int_equal(in.day_trades, 3);
  assert_int_equal(info(v, 7).day_trades, 0); /* the other contract untouched */

  static hg_md_candle_t cd[HG_MD_CANDLES];
  size_t n = 0;
  assert_int_equal(hg_mdview_candles(v, 1, 0, cd, &n), 0); /* 1m */
  assert_int_equal(n, 2);
  assert_int_equal(cd[0].start, (int64_t)(at(0, 10, 0, 0) / NS));
  assert_int_equal(cd[0].open, 3400);
  assert_int_equal(cd[0].high, 3410);
  assert_int_equal(cd[0].low, 3400);
  assert_int_equal(cd[0].close, 3410);
  assert_int_equal(cd[0].volume, 5);
  assert_int_equal(cd[0].trades, 2);
  assert_int_equal(cd[1].open, 3390);
  assert_int_equal(hg_mdview_candles(v, 1, 1, cd, &n), 0); /* 1h: one */
  assert_int_equal(n, 1);
  assert_int_equal(cd[0].close, 3390);
  assert_int_equal(cd[0].volume, 10);
  assert_int_equal(hg_mdview_candles(v, 1, HG_MD_INTERVALS, cd, &n), HG_EINVAL);
  assert_int_equal(hg_mdview_candles(v, 2, 0, cd, &n), HG_ENOTFOUND);

  /* A new UTC day starts the day's figures again. */
  fill(v, 1, at(1, 0, 0, 5), 3420, 1);
  in = info(v, 1);
  assert_int_equal(in.day, hg_civil_to_day(2027, 1, 5));
  assert_int_equal(in.day_open, 3420);
  assert_int_equal(in.day_low, 3420);
  assert_int_equal(in.day_volume, 1);
  assert_int_equal(in.volume, 11); /* since start: all of them */

  /* One trade a minute for longer than the ring: the newest HG_MD_CANDLES
   * remain, oldest first. */
  for (int k = 0; k < HG_MD_CANDLES + 30; k++) fill(v, 1, at(2, 0, k, 0), 3000 + k, 1);
  assert_int_equal(hg_mdview_candles(v, 1, 0, cd, &n), 0);
  assert_int_equal(n, HG_MD_CANDLES);
  assert_int_equal(cd[0].open, 3030);
  assert_int_equal(cd[HG_MD_CANDLES - 1].open, 3000 + HG_MD_CANDLES + 29);
  for (size_t i = 1; i < n; i++) assert_int_equal(cd[i].start - cd[i - 1].start, 60);
  hg_mdview_destroy(v);
}

static void settlements_and_open_interest(void **state) {
  (void)state;
  hg_mdview_t *v = market_fixture();
  assert_non_null(v);
  int32_t d = hg_civil_to_day(2027, 1, 4);
  static const int64_t pos[] = {5, -5, 3, -3, 0};
  cycle(v, 1, d, 3405, pos, 5);
  assert_int_equal(info(v, 1).open_interest, 8);
  assert_int_equal(info(v, 1).dsp, 3405);
  /* The day's cycle again: its settlement replaces the first, open interest
   * is summed again, not added. */
  static const int64_t pos2[] = {4, -4};
  cycle(v, 1, d, 3406, pos2, 2);
  assert_int_equal(info(v, 1).open_interest, 4);
  cycle(v, 1, d + 1, 3410, pos2, 2);
  static hg_md_settlement_t st[HG_MD_SETTLEMENTS];
  size_t n = 0;
  assert_int_equal(hg_mdview_settlements(v, 1, st, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(st[0].day, d);
  assert_int_equal(st[0].price, 3406);
  assert_int_equal(st[1].day, d + 1);
  assert_int_equal(st[1].price, 3410);
  assert_int_equal(hg_mdview_settlements(v, 7, st, &n), 0);
  assert_int_equal(n, 0);

  /* The API: change against the settlement, the day, open interest, last
   * trading day. */
  fill(v, 1, at(1, 10, 0, 0), 3390, 2);
  hg_http_response_t r = {200, NULL, {0}};
  hg_market_api(v, "/api/v1/instruments", "", &r);
  assert_int_equal(r.status, 200);
  const char *want[] = {"\"last_price\":3390,", "\"dsp\":3410,\"settlement_day\":\"2027-01-05\","
                        "\"change\":-20,\"change_pct\":-0.58,\"day\":\"2027-01-05\",\"open\":3390,"
                        "\"high\":3390,\"low\":3390,\"day_volume\":2,\"open_interest\":4,"
                        "\"last_trading_day\":\"2027-03-31\",\"bid\":null,\"ask\":null}"};
  for (size_t i = 0; i < 2; i++)
    if (strstr(r.body.p, want[i]) == NULL) fail_msg("no %s in %s", want[i], r.body.p);
  hg_sbuf_free(&r.body);
  r = (hg_http_response_t){200, NULL, {0}};
  hg_market_api(v, "/api/v1/settlements", "instrument=1", &r);
  assert_string_equal(r.body.p, "{\"instrument\":1,\"settlements\":[{\"day\":\"2027-01-04\","
                                "\"price\":3406,\"tier\":1},{\"day\":\"2027-01-05\","
                                "\"price\":3410,\"tier\":1}]}\n");
  hg_sbuf_free(&r.body);
  hg_mdview_destroy(v);
}

/* After the first event, a trade sends only the fields it changed and the
 * trade itself on the book's topic. */
static void stream_sends_what_a_trade_changed(void **state) {
  (void)state;
  hg_mdview_t *v = market_fixture();
  assert_non_null(v);
  hg_market_stream_t *st;
  assert_int_equal(hg_market_stream_create(v, &st), 0);
  hg_sbuf_t out = {0};
  hg_market_stream(st, &out);
  hg_sbuf_free(&out);
  fill(v, 7, at(0, 10, 0, 0), 3400, 2);
  hg_market_stream(st, &out);
  assert_non_null(out.p);
  /* frame 1: the delta, topic 0 */
  uint32_t hdr[2];
  memcpy(hdr, out.p, 8);
  assert_int_equal(hdr[0], 0);
  char *delta = strndup(out.p + 8, hdr[1]);
  assert_string_equal(delta,
                      "event: delta\ndata: {\"instruments\":[{\"id\":7,\"trades\":1,"
                      "\"volume\":2,\"last_price\":3400,\"last_qty\":2,"
                      "\"day\":\"2027-01-04\",\"open\":3400,\"high\":3400,\"low\":3400,"
                      "\"day_volume\":2}]}\n\n");
  free(delta);
  /* frame 2: the book of 7, topic 7, with the trade */
  size_t off = 8 + hdr[1];
  memcpy(hdr, out.p + off, 8);
  assert_int_equal(hdr[0], 7);
  char *book = strndup(out.p + off + 8, hdr[1]);
  assert_non_null(strstr(book, "event: book\ndata: {\"instrument\":7,\"trades\":[{\"seq\":"));
  assert_non_null(strstr(book, "\"price\":3400,\"qty\":2,\"aggressor\":\"buy\"}]}\n\n"));
  free(book);
  assert_int_equal(off + 8 + hdr[1], out.len);
  hg_sbuf_free(&out);
  /* A snapshot now holds the trade. */
  uint32_t topic;
  assert_int_equal(hg_market_stream_snapshot(st, "book=7", &out, &topic), 0);
  assert_non_null(strstr(out.p, "\"book\":{\"instrument\":7,\"bids\":[],\"asks\":[],\"trades\":[{"));
  hg_sbuf_free(&out);
  hg_market_stream_destroy(st);
  hg_mdview_destroy(v);
}

static void clearing_event(hg_mdview_t *v, hg_exchange_event_t ev) {
  ev.seq = ++g_seq;
  ev.ts = at(0, 12, 0, 0);
  apply(v, &ev);
}

/* The guarantee's aggregates from its events (engine/include/hourglass/
 * exchange.h): a fund deposit of 100 USD; a mark round that called one
 * account and liquidated another, whose slice filled and paid a 2 USD fee
 * (one entry on the account, one on the fund); a daily cycle that called
 * two accounts, had 1 bankruptcy, paid 30 USD from the fund and charged 5
 * USD to a winner (SOCIALIZED entries: - on the winner, + on the bankrupt,
 * which is not counted). /api/v1/clearing says the same, without accounts. */
static void clearing_aggregates(void **state) {
  (void)state;
  hg_mdview_t *v = market_fixture();
  assert_non_null(v);
  hg_md_clearing_t g;
  hg_mdview_clearing(v, &g);
  assert_int_equal(g.fund, 0);
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_CASH, .kind = HG_LEDGER_FUND_DEPOSIT,
                                          .amount = 100000000, .balance = 100000000});
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_MARGIN_CALL, .account = 4001,
                                          .status = HG_CLR_CALLED});
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_MARGIN_CALL, .account = 4002,
                                          .status = HG_CLR_LIQUIDATING});
  hg_exchange_event_t f = {.type = HG_XEV_BOOK, .kind = HG_XBOOK_LIQUIDATION, .instrument_id = 1};
  f.book.type = HG_EV_FILL;
  f.book.instrument_id = 1;
  f.book.price = 3400;
  f.book.qty = 1;
  clearing_event(v, f);
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_CASH, .kind = HG_LEDGER_LIQ_FEE,
                                          .account = 4002, .instrument_id = 1,
                                          .amount = -2000000, .balance = 5000000});
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_CASH, .kind = HG_LEDGER_LIQ_FEE,
                                          .instrument_id = 1, .amount = 2000000,
                                          .balance = 102000000});
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_MARK_ROUND, .amount = 5, .lo = 1,
                                          .hi = 0, .qty = 1, .margin = 1,
                                          .balance = 102000000});
  hg_mdview_clearing(v, &g);
  assert_int_equal(g.fund, 102000000);
  assert_int_equal(g.fund_deposits, 100000000);
  assert_int_equal(g.liq_fees, 2000000);
  assert_int_equal(g.called, 1);
  assert_int_equal(g.liquidating, 0);
  assert_int_equal(g.liquidation_fills, 1);
  assert_int_equal(g.mark_rounds, 1);
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_CASH, .kind = HG_LEDGER_FUND_COVER,
                                          .amount = -30000000, .balance = 72000000});
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_CASH, .kind = HG_LEDGER_FUND_COVER,
                                          .account = 4003, .amount = 30000000});
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_CASH, .kind = HG_LEDGER_SOCIALIZED,
                                          .account = 4004, .amount = -5000000});
  clearing_event(
      v,
      (hg_exchange_event_t){
          .type = HG_XEV_CASH, .kind = HG_LEDGER_SOCIALIZED, .account = 4003, .amount = 5000000});
  for (uint32_t a = 4001; a <= 4002; a++)
    clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_MARGIN_CALL, .account = a,
                                            .status = HG_CLR_CALLED});
  clearing_event(v, (hg_exchange_event_t){.type = HG_XEV_CYCLE, .margin = 1,
                                          .price = 30000000});
  hg_mdview_clearing(v, &g);
  assert_int_equal(g.fund, 72000000);
  assert_int_equal(g.fund_used, 30000000);
  assert_int_equal(g.socialized, 5000000);
  assert_int_equal(g.bankruptcies, 1);
  assert_int_equal(g.called, 2);
  assert_int_equal(g.liquidating, 0);
  hg_http_response_t r = {200, NULL, {0}};
  hg_market_api(v, "/api/v1/clearing", "", &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body.p,
                      "{\"insurance_fund_micro_usd\":72000000,\"fund_deposits_micro_usd\":100000000,"
                      "\"liquidation_fees_micro_usd\":2000000,\"fund_used_micro_usd\":30000000,"
                      "\"socialized_micro_usd\":5000000,\"bankruptcies\":1,\"accounts_called\":2,"
                      "\"accounts_liquidating\":0,\"liquidation_fills\":1,\"mark_rounds\":1}\n");
  assert_null(strstr(r.body.p, "4001"));
  hg_sbuf_free(&r.body);
  hg_mdview_destroy(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(day_figures_and_candles),
      cmocka_unit_test(settlements_and_open_interest),
      cmocka_unit_test(stream_sends_what_a_trade_changed),
      cmocka_unit_test(clearing_aggregates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
