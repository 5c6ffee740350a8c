/*
 * test_operator.c - the operator's settlement commands end to end over
 * loopback TCP: the client library against a real gateway and pipeline
 * whose sequencer clock the test sets. An operator grades providers,
 * publishes samples (split over several frames by the client), computes,
 * publishes and finalizes fixings, runs two daily cycles and expires the
 * contract; every number is worked out by hand below. Traders get the role
 * reject for each settlement command.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client_util.h"
#include "daemon_util.h"

#define OP 1u
#define OP2 2u
#define TA 10u
#define TB 11u
#define RV1 20u /* risk viewer of firm 1 */
#define RV2 21u /* risk viewer of firm 2 */
#define ACC_A 100u
#define ACC_B 200u
#define TV 1000000 /* tick value per contract, micro-USD */

typedef Hourglass__V1__Envelope env_t;
typedef Hourglass__V1__SettlementResult sres_t;
#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x

static _Atomic uint64_t g_now; /* the sequencer's clock, ns */

/* The SettlementResult answering seq (NULL on anything else). Valid until
 * the next receive on c. Fails the test when no answer comes within 10 s,
 * even while other frames keep coming. */
static const sres_t *await_result(hg_client_t *c, uint64_t seq) {
  double end = du_now() + 10;
  for (;;) {
    if (du_now() > end) fail_msg("no answer to settlement request %" PRIu64 " within 10 s", seq);
    const env_t *e = NULL;
    if (hg_client_recv(c, 5000, &e) <= 0) return NULL;
    if (e->body_case == BODY(SETTLEMENT_RESULT) && e->settlement_result->ref_seq == seq)
      return e->settlement_result;
    if (e->body_case == BODY(RESPONSE) && e->response->ref_seq == seq) return NULL;
    if (e->body_case == BODY(TERMINATE)) return NULL;
  }
}

/* The Positions reply to c's request for account acc (0: its own), any
 * number of positions; fails the test when it has not arrived within 10 s,
 * even while other frames keep coming. Valid until the next receive on c. */
static const Hourglass__V1__Positions *positions_of(hg_client_t *c, uint32_t acc) {
  uint64_t seq = 0;
  assert_int_equal(hg_client_positions(c, acc, &seq), 0);
  double end = du_now() + 10;
  do {
    const env_t *e = NULL;
    assert_int_equal(hg_client_recv(c, 5000, &e), 1);
    if (e->body_case == BODY(POSITIONS) && e->positions->ref_seq == seq) return e->positions;
  } while (du_now() < end);
  fail_msg("no Positions reply to request %" PRIu64 " within 10 s", seq);
  return NULL;
}

static const Hourglass__V1__Positions *own_positions(hg_client_t *c) { return positions_of(c, 0); }

/* c's own position in instrument 1: settle price, P&L and open value. */
static void expect_position(hg_client_t *c, int64_t settle, int64_t pnl, int64_t open_value) {
  const Hourglass__V1__Positions *ps = own_positions(c);
  assert_int_equal(ps->n_positions, 1);
  const Hourglass__V1__Position *p = ps->positions[0];
  assert_int_equal(p->settle_price, settle);
  assert_int_equal(p->pnl, pnl);
  assert_int_equal(p->open_value, open_value);
}

static int ok_result(hg_client_t *c, uint64_t seq) {
  const sres_t *r = await_result(c, seq);
  if (r == NULL) return -1;
  return (int)r->reason;
}

static hg_client_t *login(ts_server_t *s, uint64_t key, uint32_t max_frame) {
  uint8_t sec[32];
  ts_key_secret(key, sec);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = s->port;
  cfg.key_id = key;
  cfg.secret = sec;
  cfg.secret_len = 32;
  cfg.max_frame = max_frame;
  hg_client_t *c = NULL;
  assert_int_equal(hg_client_create(&cfg, &c), 0);
  assert_int_equal(hg_client_connect(c), 0);
  return c;
}

/* 5 providers x 12 hours of day, one trade each: hour h at 0.500000 +
 * h x 0.001000 USD, 20 GPU-hours. Median M = 505000 (the 30th of 60),
 * MAD = 3000, nothing is an outlier (|p - M| <= 6000 < 13343), no provider
 * exceeds the cap (240 of 1200 = C), each hour's median is its price, so
 * the fixing is round-half-up(mean(500000..511000)) = 505500. */
static size_t make_samples(int32_t day, hg_index_sample_t *out) {
  size_t n = 0;
  for (int h = 0; h < 12; h++) {
    for (int p = 1; p <= 5; p++) {
      hg_index_sample_t *x = &out[n++];
      memset(x, 0, sizeof *x);
      x->ts = (int64_t)day * 86400 + h * 3600 + 60 + p;
      x->price = 500000 + h * 1000;
      x->volume = 20;
      x->term_days = 30;
      x->kind = HG_INDEX_TRADE;
      snprintf(x->provider, sizeof x->provider, "prov%d", p);
      snprintf(x->region, sizeof x->region, "us-east");
      snprintf(x->gpu, sizeof x->gpu, "B200");
      snprintf(x->grade, sizeof x->grade, "A");
    }
  }
  return n;
}

static void test_settlement_through_gateway(void **state) {
  (void)state;
  const int32_t d1 = ch_day("2027-02-01"), d3 = ch_day("2027-02-03"), d10 = ch_day("2027-02-10"),
                d27 = ch_day("2027-02-27"), d28 = ch_day("2027-02-28");
  ch_clock_set(&g_now, d10, 12 * 3600);
  ts_server_t s;
  ts_server_options_t o = {.clock = ch_clock_read, .clock_ctx = &g_now};
  assert_int_equal(ts_server_create(&s, &o), 0);
  assert_int_equal(ts_server_add_key(&s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(&s, OP2, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(&s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(&s, TB, HG_ROLE_TRADER, ACC_B, 2), 0);
  assert_int_equal(ts_server_run(&s), 0);
  hg_client_t *op = login(&s, OP, 0);
  uint64_t seq = 0;
  assert_int_equal(ch_list_contract(op), 0);
  assert_int_equal(hg_client_add_account(op, ACC_A, 1, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_add_account(op, ACC_B, 2, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_cash(op, ACC_A, 1000000000, false, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_cash(op, ACC_B, 1000000000, false, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);

  /* A buys 2 from B at 510; then a resting bid 505 (A) and ask 509 (B). */
  hg_client_t *ta = login(&s, TA, 0), *tb = login(&s, TB, 0);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_SELL, 510, 2, 1), 0);
  assert_int_equal(ch_order(ta, HOURGLASS__V1__SIDE__SIDE_BUY, 510, 2, 1), 0);
  assert_int_equal(ch_order(ta, HOURGLASS__V1__SIDE__SIDE_BUY, 505, 1, 2), 0);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_SELL, 509, 1, 2), 0);
  /* Against the listing's reference 500: 2 x (500 - 510) = -20 USD. */
  expect_position(ta, 500, -20 * TV, 1020);

  /* Providers graded A from 2027-01-01. */
  for (int p = 1; p <= 5; p++) {
    char name[16];
    snprintf(name, sizeof name, "prov%d", p);
    assert_int_equal(hg_client_provider_grade(op, name, "B200", "A", ch_day("2027-01-01"), &seq), 0);
    assert_int_equal(ok_result(op, seq), 0);
  }

  /* A batch with one bad sample (empty provider) is refused whole. */
  hg_index_sample_t smp[60];
  size_t n = make_samples(d3, smp);
  hg_index_sample_t bad[8];
  memcpy(bad, smp, sizeof bad);
  bad[5].provider[0] = '\0';
  size_t taken = 0;
  assert_int_equal(hg_client_publish_samples(op, "B200", "A", d3, bad, 8, &taken, &seq), 0);
  assert_int_equal(taken, 8);
  const sres_t *r = await_result(op, seq);
  assert_non_null(r);
  assert_int_equal(r->reason, HOURGLASS__V1__REJECT_REASON__REJ_INVALID_REQUEST);
  assert_non_null(r->text);
  assert_non_null(strstr(r->text, "samples 4..7"));

  /* The 60 samples through a client whose frames hold fewer: several
   * messages, every sample staged once. */
  hg_client_t *small = NULL;
  {
    uint8_t sec[32];
    ts_key_secret(OP2, sec);
    hg_client_config_t cfg;
    hg_client_config_init(&cfg);
    cfg.port = s.port;
    cfg.key_id = OP2;
    cfg.secret = sec;
    cfg.secret_len = 32;
    cfg.max_frame = 1024;
    assert_int_equal(hg_client_create(&cfg, &small), 0);
  }
  assert_int_equal(hg_client_connect(small), 0);
  size_t sent = 0, msgs = 0;
  uint32_t staged = 0;
  while (sent < n) {
    assert_int_equal(hg_client_publish_samples(small, "B200", "A", d3, smp + sent, n - sent,
                                               &taken, &seq), 0);
    r = await_result(small, seq);
    assert_non_null(r);
    assert_int_equal(r->reason, 0);
    assert_int_equal(r->samples_accepted, taken);
    sent += taken;
    staged = r->samples_staged;
    msgs++;
  }
  assert_true(msgs >= 3);
  assert_int_equal(staged, 60);
  hg_client_logout(small, 1000);
  hg_client_destroy(small);

  assert_int_equal(hg_client_compute_fixing(op, "B200", "A", d3, &seq), 0);
  r = await_result(op, seq);
  assert_non_null(r);
  assert_int_equal(r->reason, 0);
  assert_int_equal(r->fixing_value, 505500);
  assert_int_equal(r->fixing_tier, 1);
  assert_int_equal(r->fixing_status, HOURGLASS__V1__FIXING_STATUS__FIXING_PROVISIONAL);
  assert_int_equal(r->fixing_kind, 1);     /* computed */
  assert_int_equal(r->fixing_outcome, 1);  /* published */
  assert_int_equal(r->fixing_inputs, 60);
  assert_int_equal(r->day, d3);

  /* Every other day of February: an external 0.500000. */
  for (int32_t d = d1; d <= d28; d++) {
    if (d == d3) continue;
    assert_int_equal(hg_client_publish_fixing(op, "B200", "A", d, 500000, "ext-index", &seq), 0);
    assert_int_equal(ok_result(op, seq), 0);
  }

  /* Day cycle of the 10th at 16:00:01: DSP tier 2 = (505 + 509) / 2 = 507.
   * VM: A bought 2 at 510: 2 x (507 - 510) x TV = -6,000,000; B +6,000,000. */
  ch_clock_set(&g_now, d10, 16 * 3600 + 1);
  assert_int_equal(hg_client_daily_settlement(op, d10, &seq), 0);
  r = await_result(op, seq);
  assert_non_null(r);
  assert_int_equal(r->reason, 0);
  assert_int_equal(r->day, d10);
  assert_int_equal(r->contracts_settled, 1);
  assert_int_equal(r->n_contracts, 1);
  assert_int_equal(r->contracts[0]->instrument_id, 1);
  assert_int_equal(r->contracts[0]->dsp, 507);
  assert_int_equal(r->contracts[0]->tier, 2);
  assert_true(r->has_vm_sum);
  assert_int_equal(r->vm_sum, 0);
  assert_int_equal(r->vm_paid, -6 * TV);
  assert_int_equal(r->vm_received, 6 * TV);
  assert_int_equal(r->vm_entries, 2);
  /* The cycle paid the day's P&L: none left against the DSP 507; the
   * average price stays 510. */
  expect_position(ta, 507, 0, 1020);
  /* The same day again is refused: ALREADY_SETTLED, with the day. */
  assert_int_equal(hg_client_daily_settlement(op, d10, &seq), 0);
  r = await_result(op, seq);
  assert_non_null(r);
  assert_int_equal(r->reason, HOURGLASS__V1__REJECT_REASON__REJ_ALREADY_SETTLED);
  assert_int_equal(r->day, d10);
  assert_non_null(r->text);
  assert_non_null(strstr(r->text, "already settled"));

  /* Expiry before the last trading day's cycle: NOT_IN_STATE. */
  assert_int_equal(hg_client_expire(op, 1, &seq), 0);
  assert_int_equal(ok_result(op, seq), HOURGLASS__V1__REJECT_REASON__REJ_NOT_IN_STATE);

  /* Finalize every day but the 27th. */
  for (int32_t d = d1; d <= d28; d++) {
    if (d == d27) continue;
    assert_int_equal(hg_client_finalize_fixing(op, "B200", "A", d, &seq), 0);
    r = await_result(op, seq);
    assert_non_null(r);
    assert_int_equal(r->reason, 0);
    assert_int_equal(r->fixing_status, HOURGLASS__V1__FIXING_STATUS__FIXING_FINAL);
    assert_int_equal(r->fixing_outcome, 4);
  }
  /* FINAL never changes. */
  assert_int_equal(hg_client_publish_fixing(op, "B200", "A", d3, 600000, "late", &seq), 0);
  assert_int_equal(ok_result(op, seq), HOURGLASS__V1__REJECT_REASON__REJ_FIXING_FINAL);

  /* Last trading day's cycle: the book is unchanged (507), no VM. */
  ch_clock_set(&g_now, d28, 16 * 3600 + 1);
  assert_int_equal(hg_client_daily_settlement(op, d28, &seq), 0);
  r = await_result(op, seq);
  assert_non_null(r);
  assert_int_equal(r->reason, 0);
  assert_int_equal(r->contracts[0]->dsp, 507);
  assert_int_equal(r->vm_sum, 0);
  assert_int_equal(r->vm_paid, 0);

  /* Expiry waits for the 27th, and says so. */
  assert_int_equal(hg_client_expire(op, 1, &seq), 0);
  r = await_result(op, seq);
  assert_non_null(r);
  assert_int_equal(r->reason, HOURGLASS__V1__REJECT_REASON__REJ_FIXINGS_MISSING);
  assert_int_equal(r->n_missing, 1);
  assert_int_equal(r->missing[0]->day, d27);
  assert_int_equal(r->missing[0]->status, HOURGLASS__V1__FIXING_STATUS__FIXING_PROVISIONAL);
  assert_false(r->has_fsp);

  assert_int_equal(hg_client_finalize_fixing(op, "B200", "A", d27, &seq), 0);
  assert_int_equal(ok_result(op, seq), 0);
  /* FSP = (27 x 500000 + 505500) / 28 = 500196.4 micro-USD -> 500 ticks.
   * A: 2 x (500 - 507) x TV = -14,000,000; B: +14,000,000. */
  assert_int_equal(hg_client_expire(op, 1, &seq), 0);
  r = await_result(op, seq);
  assert_non_null(r);
  assert_int_equal(r->reason, 0);
  assert_int_equal(r->instrument_id, 1);
  assert_int_equal(r->fsp, 500);
  assert_int_equal(r->positions_closed, 2);
  assert_int_equal(r->final_sum, 0);

  /* Cash: 1e9 - 6e6 - 14e6 for A, 1e9 + 6e6 + 14e6 for B (the mirror). */
  assert_int_equal(own_positions(ta)->cash, 1000000000 - 20 * TV);

  /* Trader A tries every settlement command: each gets the role reject. */
  uint64_t seqs[9];
  assert_int_equal(hg_client_provider_grade(ta, "prov9", "B200", "A", d28 + 5, &seqs[0]), 0);
  assert_int_equal(hg_client_publish_samples(ta, "B200", "A", d28, smp, 4, &taken, &seqs[1]), 0);
  assert_int_equal(hg_client_discard_samples(ta, "B200", "A", d28, &seqs[2]), 0);
  assert_int_equal(hg_client_compute_fixing(ta, "B200", "A", d28, &seqs[3]), 0);
  assert_int_equal(hg_client_publish_fixing(ta, "B200", "A", d28, 1, "x", &seqs[4]), 0);
  assert_int_equal(hg_client_finalize_fixing(ta, "B200", "A", d28, &seqs[5]), 0);
  assert_int_equal(hg_client_daily_settlement(ta, d28 + 1, &seqs[6]), 0);
  assert_int_equal(hg_client_expire(ta, 1, &seqs[7]), 0);
  assert_int_equal(hg_client_list_curve(ta, "B200", "A", 2027, 3, 20, 64, 64, 0, &seqs[8]), 0);
  for (int i = 0; i < 9; i++)
    assert_int_equal(ch_response(ta, seqs[i]), HOURGLASS__V1__REJECT_REASON__REJ_NOT_PERMITTED);

  hg_client_destroy(ta);
  hg_client_destroy(tb);
  hg_client_destroy(op);
  ts_server_stop(&s);
}

/* Instrument 1 of the InstrumentList answering a fresh InstrumentsRequest:
 * *ref, *lo, *hi (-1 if absent). */
static void instrument_ref(hg_client_t *c, int64_t *ref, int64_t *lo, int64_t *hi) {
  uint64_t seq = 0;
  *ref = *lo = *hi = -1;
  assert_int_equal(hg_client_instruments(c, &seq), 0);
  double end = du_now() + 10;
  for (;;) {
    if (du_now() > end) fail_msg("no InstrumentList for request %" PRIu64 " within 10 s", seq);
    const env_t *e = NULL;
    assert_int_equal(hg_client_recv(c, 5000, &e), 1);
    if (e->body_case != BODY(INSTRUMENT_LIST) || e->instrument_list->ref_seq != seq) continue;
    for (size_t i = 0; i < e->instrument_list->n_instruments; i++) {
      const Hourglass__V1__InstrumentInfo *in = e->instrument_list->instruments[i];
      if (in->instrument_id != 1) continue;
      if (in->has_ref_price) *ref = in->ref_price;
      if (in->has_band_low) *lo = in->band_low;
      if (in->has_band_high) *hi = in->band_high;
    }
    return;
  }
}

/* Creates and runs a server with options o and the operator's and both
 * traders' keys. */
static void run_with_keys(ts_server_t *s, const ts_server_options_t *o) {
  assert_int_equal(ts_server_create(s, o), 0);
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(s, TB, HG_ROLE_TRADER, ACC_B, 2), 0);
  assert_int_equal(ts_server_run(s), 0);
}

/* InstrumentInfo carries the clearing's reference price and the band the
 * pre-trade check enforces, and follows them through fixings and cycles.
 * Band 20% (2000 bps, the default), inclusive: lo = ceil(ref x 0.8),
 * hi = floor(ref x 1.2). */
static void test_reference_in_instrument_info(void **state) {
  (void)state;
  const int32_t d3 = ch_day("2027-02-03"), d10 = ch_day("2027-02-10");
  ch_clock_set(&g_now, d10, 12 * 3600);
  hg_clearing_config_t clr;
  hg_clearing_config_default(&clr);
  assert_int_equal(clr.band_bps, 2000);
  ts_server_t s;
  ts_server_options_t o = {.clock = ch_clock_read, .clock_ctx = &g_now, .clearing = &clr};
  run_with_keys(&s, &o);
  hg_client_t *op = login(&s, OP, 0);
  uint64_t seq = 0;
  assert_int_equal(ch_list_contract(op), 0);
  /* The listing price 500: 400 .. 600. */
  int64_t ref, lo, hi;
  instrument_ref(op, &ref, &lo, &hi);
  assert_int_equal(ref, 500);
  assert_int_equal(lo, 400);
  assert_int_equal(hi, 600);
  /* No DSP yet: the index's fixing 0.505500 USD rounds half up to 506 ticks:
   * ceil(404.8) = 405 .. floor(607.2) = 607. */
  assert_int_equal(hg_client_publish_fixing(op, "B200", "A", d3, 505500, "ext-index", &seq), 0);
  assert_int_equal(ok_result(op, seq), 0);
  instrument_ref(op, &ref, &lo, &hi);
  assert_int_equal(ref, 506);
  assert_int_equal(lo, 405);
  assert_int_equal(hi, 607);
  assert_int_equal(hg_client_add_account(op, ACC_A, 1, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_add_account(op, ACC_B, 2, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_cash(op, ACC_A, 1000000000, false, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  assert_int_equal(hg_client_cash(op, ACC_B, 1000000000, false, &seq), 0);
  assert_int_equal(ch_response(op, seq), 0);
  hg_client_t *ta = login(&s, TA, 0), *tb = login(&s, TB, 0);
  assert_int_equal(ch_order(ta, HOURGLASS__V1__SIDE__SIDE_BUY, 505, 1, 1), 0);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_SELL, 509, 1, 2), 0);
  /* The cycle's DSP (tier 2, (505 + 509) / 2 = 507) is the new reference:
   * ceil(405.6) = 406 .. floor(608.4) = 608. */
  ch_clock_set(&g_now, d10, 16 * 3600 + 1);
  assert_int_equal(hg_client_daily_settlement(op, d10, &seq), 0);
  const sres_t *r = await_result(op, seq);
  assert_non_null(r);
  assert_int_equal(r->reason, 0);
  assert_int_equal(r->contracts[0]->dsp, 507);
  instrument_ref(ta, &ref, &lo, &hi);
  assert_int_equal(ref, 507);
  assert_int_equal(lo, 406);
  assert_int_equal(hi, 608);
  /* The very band the pre-trade check applies: 609 is outside it. */
  hg_client_order_t ord = {.instrument_id = 1, .client_order_id = 3,
                           .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                           .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                           .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC, .has_price = true,
                           .price = 609, .qty = 1};
  assert_int_equal(hg_client_new_order(ta, &ord, &seq), 0);
  double end = du_now() + 10;
  for (;;) {
    if (du_now() > end)
      fail_msg("no execution report for A's order (request %" PRIu64 ") within 10 s", seq);
    const env_t *e = NULL;
    assert_int_equal(hg_client_recv(ta, 5000, &e), 1);
    if (e->body_case != BODY(EXECUTION_REPORT) || e->execution_report->ref_seq != seq) continue;
    const Hourglass__V1__ExecutionReport *er = e->execution_report;
    assert_int_equal(er->reason, HOURGLASS__V1__REJECT_REASON__REJ_RISK_PRICE_BAND);
    assert_int_equal(er->risk_ref_price, ref);
    assert_int_equal(er->risk_low, lo);
    assert_int_equal(er->risk_high, hi);
    assert_int_equal(er->price, 609);
    break;
  }
  hg_client_logout(ta, 1000);
  hg_client_destroy(ta);
  hg_client_logout(tb, 1000);
  hg_client_destroy(tb);
  hg_client_logout(op, 1000);
  hg_client_destroy(op);
  /* A restarted gateway seeds them from the recovered state. */
  char dir[sizeof s.dir];
  memcpy(dir, s.dir, sizeof dir);
  ts_server_halt(&s);
  o.data_dir = dir;
  assert_int_equal(ts_server_create(&s, &o), 0);
  assert_int_equal(ts_server_run(&s), 0);
  op = login(&s, OP, 0);
  instrument_ref(op, &ref, &lo, &hi);
  assert_int_equal(ref, 507);
  assert_int_equal(lo, 406);
  assert_int_equal(hi, 608);
  hg_client_logout(op, 1000);
  hg_client_destroy(op);
  ts_server_stop(&s);
}

/* The margin figures of a Positions reply against a hand computation
 * (settlement/CONTRACT.md 4.4; default clearing: 1500 bps outside the
 * delivery month, tick value 1 USD; B200.A.2027-02 on 2027-01-15, reference
 * 500). Per contract ceil(|w| x 500 x 1,000,000 x 1500 / 10000) = 75 USD.
 *  - A bids 2 at 500: w = 2, IM 150 USD, all of it the open order's;
 *    excess 1000 - 150 = 850 USD.
 *  - B sells 1 into it: A holds +1 with 1 bid left: w = max(1 + 1, 1 - 0)
 *    = 2, IM still 150, the position's own 75, the order's 75; B holds -1
 *    with nothing open: 75, no order margin, excess 925.
 * With the exchange on its own thread (threads mode) the gateway cannot
 * read the clearing and the fields are absent. */
static void test_margin_in_positions(void **state) {
  (void)state;
  ch_clock_set(&g_now, ch_day("2027-01-15"), 12 * 3600);
  hg_clearing_config_t clr;
  hg_clearing_config_default(&clr);
  ts_server_t s;
  ts_server_options_t o = {.clock = ch_clock_read, .clock_ctx = &g_now, .clearing = &clr};
  run_with_keys(&s, &o);
  bool loop = ts_pipe_mode(&o) == HG_PIPE_MODE_LOOP;
  hg_client_t *op = login(&s, OP, 0);
  uint64_t seq = 0;
  assert_int_equal(ch_list_contract(op), 0);
  const uint32_t acc[] = {ACC_A, ACC_B}, firm[] = {1, 2};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(hg_client_add_account(op, acc[i], firm[i], &seq), 0);
    assert_int_equal(ch_response(op, seq), 0);
    assert_int_equal(hg_client_cash(op, acc[i], 1000000000, false, &seq), 0);
    assert_int_equal(ch_response(op, seq), 0);
  }
  hg_client_t *ta = login(&s, TA, 0), *tb = login(&s, TB, 0);
  assert_int_equal(ch_order(ta, HOURGLASS__V1__SIDE__SIDE_BUY, 500, 2, 1), 0);
  const Hourglass__V1__Positions *p = own_positions(ta);
  assert_int_equal(p->has_initial_margin, loop);
  if (loop) {
    assert_int_equal(p->initial_margin, 150000000);
    assert_int_equal(p->open_order_margin, 150000000);
    assert_int_equal(p->excess_equity, 850000000);
  }
  hg_client_order_t ord = {.instrument_id = 1, .client_order_id = 2,
                           .side = HOURGLASS__V1__SIDE__SIDE_SELL,
                           .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                           .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC, .has_price = true,
                           .price = 500, .qty = 1};
  assert_int_equal(hg_client_new_order(tb, &ord, &seq), 0);
  double end = du_now() + 10;
  for (;;) { /* B's NEW, then its fill */
    if (du_now() > end) fail_msg("no fill for B's sell (request %" PRIu64 ") within 10 s", seq);
    const env_t *e = NULL;
    assert_int_equal(hg_client_recv(tb, 5000, &e), 1);
    if (e->body_case == BODY(EXECUTION_REPORT) &&
        e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_FILL)
      break;
  }
  p = own_positions(ta);
  if (loop) {
    assert_int_equal(p->positions[0]->net_qty, 1);
    assert_int_equal(p->initial_margin, 150000000);
    assert_int_equal(p->open_order_margin, 75000000);
    assert_int_equal(p->excess_equity, 850000000);
  }
  p = own_positions(tb);
  assert_int_equal(p->has_excess_equity, loop);
  if (loop) {
    assert_int_equal(p->initial_margin, 75000000);
    assert_int_equal(p->open_order_margin, 0);
    assert_int_equal(p->excess_equity, 925000000);
  }
  hg_client_logout(ta, 1000);
  hg_client_destroy(ta);
  hg_client_logout(tb, 1000);
  hg_client_destroy(tb);
  hg_client_logout(op, 1000);
  hg_client_destroy(op);
  ts_server_stop(&s);
}

/* The next FILL report on c (its own or its drop copy's); fails the test
 * when none comes within 10 s. Valid until the next receive on c. */
static const Hourglass__V1__ExecutionReport *await_fill(hg_client_t *c) {
  double end = du_now() + 10;
  do {
    const env_t *e = NULL;
    assert_int_equal(hg_client_recv(c, 5000, &e), 1);
    if (e->body_case == BODY(EXECUTION_REPORT) &&
        e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_FILL)
      return e->execution_report;
  } while (du_now() < end);
  fail_msg("no fill within 10 s");
  return NULL;
}

/* A margin call as its account, its firm's risk viewer and another firm's
 * risk viewer see it (settlement/CONTRACT.md 4.6; default clearing: IM
 * 1500 bps, MM 7500 bps of IM, tick value 1 USD, call due one cycle on).
 * A (120 USD) buys 1 at 500 from B; B then quotes 438 / 442, so the mark
 * is their mid, 440. At the marks: E = 120 + (440 - 500) = 60 USD,
 * IM_M = ceil(440 x 1,000,000 x 1500 / 10000) = 66 USD, MM = ceil(66 USD x
 * 7500 / 10000) = 49.5 USD: MM <= E < IM_M, so A is called for 6 USD, due
 * at daily cycle 1 (none has run). B (short 1 at 500) gains: good. A's
 * risk-increasing buy is refused with MARGIN_CALL and those figures. Then
 * a lower mark liquidates A (below). */
static void test_call_in_positions(void **state) {
  (void)state;
  ch_clock_set(&g_now, ch_day("2027-01-15"), 12 * 3600);
  hg_clearing_config_t clr;
  hg_clearing_config_default(&clr);
  ts_server_t s;
  ts_server_options_t o = {.clock = ch_clock_read, .clock_ctx = &g_now, .clearing = &clr};
  assert_int_equal(ts_server_create(&s, &o), 0);
  assert_int_equal(ts_server_add_key(&s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(&s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(&s, TB, HG_ROLE_TRADER, ACC_B, 2), 0);
  assert_int_equal(ts_server_add_key(&s, RV1, HG_ROLE_RISK_VIEWER, 0, 1), 0);
  assert_int_equal(ts_server_add_key(&s, RV2, HG_ROLE_RISK_VIEWER, 0, 2), 0);
  assert_int_equal(ts_server_run(&s), 0);
  bool loop = ts_pipe_mode(&o) == HG_PIPE_MODE_LOOP;
  hg_client_t *op = login(&s, OP, 0);
  uint64_t seq = 0;
  assert_int_equal(ch_list_contract(op), 0);
  const uint32_t acc[] = {ACC_A, ACC_B}, firm[] = {1, 2};
  const int64_t cash[] = {120000000, 1000000000};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(hg_client_add_account(op, acc[i], firm[i], &seq), 0);
    assert_int_equal(ch_response(op, seq), 0);
    assert_int_equal(hg_client_cash(op, acc[i], cash[i], false, &seq), 0);
    assert_int_equal(ch_response(op, seq), 0);
  }
  hg_client_t *ta = login(&s, TA, 0), *tb = login(&s, TB, 0);
  assert_int_equal(ch_order(ta, HOURGLASS__V1__SIDE__SIDE_BUY, 500, 1, 1), 0);
  hg_client_order_t ord = {.instrument_id = 1, .client_order_id = 2,
                           .side = HOURGLASS__V1__SIDE__SIDE_SELL,
                           .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                           .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC, .has_price = true,
                           .price = 500, .qty = 1};
  assert_int_equal(hg_client_new_order(tb, &ord, &seq), 0);
  assert_int_equal(await_fill(tb)->qty, 1);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_BUY, 438, 1, 3), 0);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_SELL, 442, 1, 4), 0);
  const Hourglass__V1__Positions *p = own_positions(ta);
  assert_int_equal(p->has_standing, loop);
  if (loop) assert_int_equal(p->standing, HOURGLASS__V1__STANDING__STANDING_GOOD);
  assert_int_equal(hg_client_mark(op, &seq), 0);
  assert_int_equal(ok_result(op, seq), 0);

  p = own_positions(ta);
  assert_int_equal(p->has_standing, loop);
  if (loop) {
    assert_int_equal(p->standing, HOURGLASS__V1__STANDING__STANDING_CALLED);
    assert_int_equal(p->mark_equity, 60000000);
    assert_int_equal(p->maintenance_margin, 49500000);
    assert_int_equal(p->call_amount, 6000000);
    assert_int_equal(p->call_due_cycle, 1);
  }
  p = own_positions(tb);
  if (loop) {
    assert_int_equal(p->standing, HOURGLASS__V1__STANDING__STANDING_GOOD);
    assert_int_equal(p->call_amount, 0);
    assert_int_equal(p->call_due_cycle, 0);
  }
  /* Firm 1's risk viewer sees A's call; firm 2's cannot see A at all. */
  hg_client_t *rv1 = login(&s, RV1, 0), *rv2 = login(&s, RV2, 0);
  p = positions_of(rv1, ACC_A);
  assert_int_equal(p->reason, 0);
  assert_int_equal(p->account, ACC_A);
  if (loop) {
    assert_int_equal(p->standing, HOURGLASS__V1__STANDING__STANDING_CALLED);
    assert_int_equal(p->call_amount, 6000000);
  }
  p = positions_of(rv2, ACC_A);
  assert_int_equal(p->reason, HOURGLASS__V1__REJECT_REASON__REJ_UNKNOWN_ACCOUNT);
  assert_int_equal(p->account, 0);
  assert_false(p->has_standing);
  assert_false(p->has_call_amount);
  assert_false(p->has_mark_equity);
  p = positions_of(rv2, 0); /* its firm's list: B only */
  assert_int_equal(p->n_firm_accounts, 1);
  assert_int_equal(p->firm_accounts[0], ACC_B);

  /* A's buy would add risk: MARGIN_CALL with the figures at the marks. */
  ord = (hg_client_order_t){.instrument_id = 1, .client_order_id = 5,
                            .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                            .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                            .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC, .has_price = true,
                            .price = 430, .qty = 1};
  assert_int_equal(hg_client_new_order(ta, &ord, &seq), 0);
  double end = du_now() + 10;
  for (;;) {
    if (du_now() > end) fail_msg("no answer to A's buy (request %" PRIu64 ") within 10 s", seq);
    const env_t *e = NULL;
    assert_int_equal(hg_client_recv(ta, 5000, &e), 1);
    if (e->body_case != BODY(EXECUTION_REPORT) || e->execution_report->ref_seq != seq) continue;
    const Hourglass__V1__ExecutionReport *er = e->execution_report;
    assert_int_equal(er->exec_type, HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED);
    assert_int_equal(er->reason, HOURGLASS__V1__REJECT_REASON__REJ_RISK_MARGIN_CALL);
    assert_int_equal(er->risk_equity, 60000000);
    assert_int_equal(er->risk_initial_margin, 66000000);
    assert_int_equal(er->risk_high, 6000000);
    break;
  }

  /* Liquidation, seen in the drop copies: B requotes 400 / 402, the mark
   * is 401, A's E = 120 - 99 = 21 USD < MM = ceil(60.15 x 0.75) = 45.1125
   * USD. The slice sells 1 (limit ceil(401 x 0.8) = 321) into B's bid at
   * 400: a fill flagged liquidation in A's report and in firm 1's drop
   * copy (account A); firm 2's drop copy has only B's side. */
  assert_int_equal(hg_client_drop_copy(rv1, &seq), 0);
  assert_int_equal(ch_response(rv1, seq), 0);
  assert_int_equal(hg_client_drop_copy(rv2, &seq), 0);
  assert_int_equal(ch_response(rv2, seq), 0);
  assert_int_equal(hg_client_mass_cancel(tb, 0, HOURGLASS__V1__SIDE_FILTER__SIDES_BOTH, &seq), 0);
  assert_int_equal(ch_response(tb, seq), 0);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_BUY, 400, 1, 6), 0);
  assert_int_equal(ch_order(tb, HOURGLASS__V1__SIDE__SIDE_SELL, 402, 1, 7), 0);
  assert_int_equal(hg_client_mark(op, &seq), 0);
  assert_int_equal(ok_result(op, seq), 0);
  const Hourglass__V1__ExecutionReport *fill = await_fill(ta);
  assert_true(fill->liquidation);
  assert_false(fill->drop_copy);
  assert_false(fill->has_ref_seq); /* no request of A's: the operator's MARK */
  assert_int_equal(fill->side, HOURGLASS__V1__SIDE__SIDE_SELL);
  assert_int_equal(fill->price, 400);
  assert_int_equal(fill->qty, 1);
  fill = await_fill(rv1);
  assert_true(fill->liquidation);
  assert_true(fill->drop_copy);
  assert_int_equal(fill->account, ACC_A);
  fill = await_fill(rv2);
  assert_true(fill->drop_copy);
  assert_int_equal(fill->account, ACC_B);
  assert_true(fill->maker);
  p = own_positions(ta);
  assert_int_equal(p->positions[0]->net_qty, 0);
  if (loop) assert_int_equal(p->standing, HOURGLASS__V1__STANDING__STANDING_GOOD);
  hg_client_t *cl[] = {ta, tb, rv1, rv2, op};
  for (size_t i = 0; i < sizeof cl / sizeof cl[0]; i++) {
    hg_client_logout(cl[i], 1000);
    hg_client_destroy(cl[i]);
  }
  ts_server_stop(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_settlement_through_gateway),
      cmocka_unit_test(test_reference_in_instrument_info),
      cmocka_unit_test(test_margin_in_positions),
      cmocka_unit_test(test_call_in_positions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
