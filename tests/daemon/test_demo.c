/*
 * The demo market driven straight through an exchange state machine: the
 * setup lists twelve months, the makers keep every book two-sided, hedgers
 * trade, nothing the demo sends is refused, and the flow is reproducible.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "demo.h"
#include "hourglass/error.h"

typedef struct run {
  hg_demo_t *demo;
  hg_exchange_t *ex;
  uint64_t seq;
  uint64_t fills, rejects, cmds;
  uint64_t hash; /* FNV-1a over the commands, for reproducibility */
} run_t;

static void sink(void *ctx, const hg_exchange_event_t *ev) {
  run_t *r = ctx;
  hg_pipe_out_t rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = HG_PIPE_EVENT;
  rec.seq = ev->seq;
  rec.event = *ev;
  if (ev->type == HG_XEV_BOOK && ev->book.type == HG_EV_FILL) r->fills++;
  if (ev->type == HG_XEV_REJECTED || (ev->type == HG_XEV_BOOK && ev->book.type == HG_EV_REJECTED))
    r->rejects++;
  hg_demo_observe(r->demo, &rec);
}

static void apply(run_t *r, hg_command_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    c[i].seq = ++r->seq;
    c[i].ts = 1800000000000000000ull + r->seq * 1000;
    const uint8_t *b = (const uint8_t *)&c[i].u;
    for (size_t k = 0; k < sizeof c[i].u; k++) r->hash = (r->hash ^ b[k]) * 0x100000001b3ull;
    assert_int_equal(hg_exchange_apply(r->ex, &c[i]), 0);
    r->cmds++;
  }
}

static void run_demo(run_t *r, uint64_t seed, int steps) {
  memset(r, 0, sizeof *r);
  r->hash = 0xcbf29ce484222325ull;
  assert_int_equal(hg_demo_create(2026, 12, seed, &r->demo), 0);
  hg_exchange_config_t cfg = {
      .max_instruments = 32, .max_accounts = 64, .max_book_orders = 1u << 14};
  assert_int_equal(hg_exchange_create(&cfg, sink, r, &r->ex), 0);
  hg_command_t cmds[512];
  size_t n = hg_demo_setup(r->demo, cmds, 512);
  assert_true(n <= 512);
  apply(r, cmds, n);
  for (int s = 0; s < steps; s++) {
    n = hg_demo_step(r->demo, cmds, 512);
    assert_true(n <= 512);
    apply(r, cmds, n);
  }
}

static void setup_lists_a_year_of_months(void **state) {
  (void)state;
  hg_demo_t *d = NULL;
  assert_int_equal(hg_demo_create(2026, 12, 1, &d), 0);
  const hg_demo_instrument_t *in = hg_demo_instruments(d);
  assert_string_equal(in[0].symbol, "B200.A.2027-01");
  assert_string_equal(in[11].symbol, "B200.A.2027-12");
  hg_command_t c[64];
  size_t n = hg_demo_setup(d, c, 64);
  assert_int_equal(n, HG_DEMO_MONTHS + 11);
  assert_int_equal(c[0].type, HG_COMMAND_LIST_INSTRUMENT);
  assert_int_equal(c[HG_DEMO_MONTHS].type, HG_COMMAND_LIST_CURVE);
  assert_string_equal(c[HG_DEMO_MONTHS].u.curve.gpu, "OW671B");
  assert_int_equal(c[HG_DEMO_MONTHS].u.curve.year, 2027);
  assert_int_equal(c[HG_DEMO_MONTHS].u.curve.month, 1);
  assert_int_equal(c[HG_DEMO_MONTHS + 1].type, HG_COMMAND_ADD_ACCOUNT);
  /* later months are dearer (contango) */
  assert_true(hg_demo_fair(d, 11) > hg_demo_fair(d, 0));
  /* a short buffer is not overrun and still reports the full count */
  assert_int_equal(hg_demo_setup(d, c, 3), n);
  hg_demo_destroy(d);
  assert_int_equal(hg_demo_create(2026, 13, 1, &d), HG_EINVAL);
}

/* With today's date the setup also builds a month of index history: 30
 * fixings computed from the providers' rentals (6 providers, 12 hours, 72
 * samples a day), each with its receipt kept, all but the last three
 * finalized, nothing refused. */
static void setup_publishes_an_index_history(void **state) {
  (void)state;
  run_t r;
  memset(&r, 0, sizeof r);
  assert_int_equal(hg_demo_create(2026, 12, 1, &r.demo), 0);
  hg_demo_set_today(r.demo, 20424); /* 2025-12-02 */
  hg_exchange_config_t cfg = {
      .max_instruments = 32, .max_accounts = 64, .max_book_orders = 1u << 14};
  assert_int_equal(hg_exchange_create(&cfg, sink, &r, &r.ex), 0);
  static hg_command_t cmds[700];
  size_t n = hg_demo_setup(r.demo, cmds, 700);
  /* listings (the B200 months and the token curve), accounts and deposits, 6 grades, per day 18
   * sample batches and a computation, 27 finalizations */
  assert_int_equal(n, HG_DEMO_MONTHS + 11 + 6 + 30 * 19 + 27);
  apply(&r, cmds, n);
  assert_int_equal(r.rejects, 0);
  hg_index_fixing_t f;
  assert_int_equal(hg_exchange_fixing(r.ex, "B200", "A", 20424 - 4, &f), 0);
  assert_int_equal(f.status, HG_INDEX_FINAL);
  assert_int_equal(hg_exchange_fixing(r.ex, "B200", "A", 20424 - 1, &f), 0);
  assert_int_equal(f.status, HG_INDEX_PROVISIONAL);
  for (int32_t ago = 30; ago >= 1; ago--) {
    assert_int_equal(hg_exchange_fixing(r.ex, "B200", "A", 20424 - ago, &f), 0);
    assert_int_equal(f.kind, HG_INDEX_COMPUTED);
    assert_int_equal(f.tier, 1);
    /* near the history's drift: 3.400 USD less 0.002 a day, +-0.004 noise
     * and the providers' spread */
    int64_t centre = 3400000 - 2000 * ago;
    assert_true(f.value > centre - 12000 && f.value < centre + 12000);
    hg_exchange_receipt_t rc;
    assert_int_equal(hg_exchange_receipt(r.ex, "B200", "A", 20424 - ago, &rc), 0);
    assert_int_equal(rc.input_count, 72);
    assert_int_equal(rc.receipt_tier, 1);
    assert_int_equal(rc.tier[0].providers, 6);
    assert_int_equal(rc.tier[0].hours, 12);
  }
  hg_exchange_destroy(r.ex);
  hg_demo_destroy(r.demo);
}

static void makers_keep_every_book_two_sided(void **state) {
  (void)state;
  run_t r;
  run_demo(&r, 7, 300);
  assert_int_equal(r.rejects, 0);
  assert_true(r.fills > 0);
  for (uint32_t k = 0; k < HG_DEMO_MONTHS; k++) {
    const hg_book_t *b = hg_exchange_book(r.ex, HG_DEMO_FIRST_INSTRUMENT + k);
    assert_non_null(b);
    hg_price_t bid, ask;
    hg_qty_t bq, aq;
    assert_int_equal(hg_book_best(b, HG_SIDE_BUY, &bid, &bq), 0);
    assert_int_equal(hg_book_best(b, HG_SIDE_SELL, &ask, &aq), 0);
    assert_true(bid < ask);
    assert_true(ask - bid <= 10); /* tight enough for a DSP from the midpoint */
    /* Ten levels a side quoted; the last step's hedger may have taken the
     * two best levels of one side, refilled on the next step. */
    hg_book_level_t lv[16];
    assert_true(hg_book_depth(b, HG_SIDE_BUY, lv, 16) >= 8);
    assert_true(hg_book_depth(b, HG_SIDE_SELL, lv, 16) >= 8);
  }
  hg_exchange_destroy(r.ex);
  hg_demo_destroy(r.demo);
}

/* The token curve beside the B200 curve: listed in the TOK form, its front
 * months quoted two-sided by maker 0, the rest listed and empty; the month
 * scenario's demo (hg_demo_create_months) lists no token curve. */
static void token_curve_listed_and_quoted(void **state) {
  (void)state;
  run_t r;
  run_demo(&r, 7, 50);
  assert_int_equal(r.rejects, 0);
  char sym[HG_SYMBOL_MAX + 1];
  assert_int_equal(hg_exchange_instrument_symbol(r.ex, HG_DEMO_TOKEN_FIRST_INSTRUMENT, sym), 0);
  assert_string_equal(sym, "TOK.OW671B.S.2027-01");
  assert_int_equal(
      hg_exchange_instrument_symbol(r.ex, HG_DEMO_TOKEN_FIRST_INSTRUMENT + 11, sym), 0);
  assert_string_equal(sym, "TOK.OW671B.S.2027-12");
  for (uint32_t j = 0; j < HG_DEMO_TOKEN_QUOTED; j++) {
    const hg_book_t *b = hg_exchange_book(r.ex, HG_DEMO_TOKEN_FIRST_INSTRUMENT + j);
    hg_price_t bid, ask;
    hg_qty_t bq, aq;
    assert_int_equal(hg_book_best(b, HG_SIDE_BUY, &bid, &bq), 0);
    assert_int_equal(hg_book_best(b, HG_SIDE_SELL, &ask, &aq), 0);
    assert_int_equal(ask - bid, 4);
    assert_int_equal(bid + 2, hg_demo_token_fair(r.demo, j));
  }
  hg_price_t bid;
  hg_qty_t bq;
  assert_true(hg_book_best(hg_exchange_book(r.ex, HG_DEMO_TOKEN_FIRST_INSTRUMENT + 5), HG_SIDE_BUY,
                           &bid, &bq) != 0);
  hg_exchange_destroy(r.ex);
  hg_demo_destroy(r.demo);
  /* An exchange without room for the curve refuses it: no token quotes, so
   * no order names an instrument that does not exist. */
  memset(&r, 0, sizeof r);
  assert_int_equal(hg_demo_create(2026, 12, 7, &r.demo), 0);
  hg_exchange_config_t small = {.max_instruments = 16, .max_accounts = 64,
                                .max_book_orders = 1u << 14};
  assert_int_equal(hg_exchange_create(&small, sink, &r, &r.ex), 0);
  static hg_command_t cmds[512];
  size_t n = hg_demo_setup(r.demo, cmds, 512);
  apply(&r, cmds, n);
  assert_int_equal(r.rejects, 1); /* the LIST_CURVE */
  for (int st = 0; st < 20; st++) {
    n = hg_demo_step(r.demo, cmds, 512);
    for (size_t i = 0; i < n; i++)
      assert_true(cmds[i].type != HG_COMMAND_NEW_ORDER ||
                  cmds[i].u.new_order.instrument_id < HG_DEMO_TOKEN_FIRST_INSTRUMENT);
    apply(&r, cmds, n);
  }
  assert_int_equal(r.rejects, 1);
  hg_exchange_destroy(r.ex);
  hg_demo_destroy(r.demo);
  hg_demo_t *d = NULL;
  assert_int_equal(hg_demo_create_months(2026, 12, 1, 1, &d), 0);
  assert_false(hg_demo_has_tokens(d));
  hg_command_t c[64];
  assert_int_equal(hg_demo_setup(d, c, 64), 1 + 10);
  hg_demo_destroy(d);
}

static void the_flow_is_reproducible(void **state) {
  (void)state;
  run_t a, b, c;
  run_demo(&a, 42, 100);
  run_demo(&b, 42, 100);
  run_demo(&c, 43, 100);
  assert_int_equal(a.cmds, b.cmds);
  assert_int_equal(a.hash, b.hash);
  assert_true(a.hash != c.hash);
  run_t *all[] = {&a, &b, &c};
  for (int i = 0; i < 3; i++) {
    hg_exchange_destroy(all[i]->ex);
    hg_demo_destroy(all[i]->demo);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(setup_lists_a_year_of_months),
      cmocka_unit_test(setup_publishes_an_index_history),
      cmocka_unit_test(makers_keep_every_book_two_sided),
      cmocka_unit_test(the_flow_is_reproducible),
      cmocka_unit_test(token_curve_listed_and_quoted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
