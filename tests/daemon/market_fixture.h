/*
 * market_fixture.h - a market view (mdview.h) seeded from an exchange that
 * lists two contracts: id 1 B200.A.2027-03 and id 7 H100.B.2027-04. For
 * tests of the market API (test_market_api.c, fuzz_http.c).
 */
#ifndef HOURGLASS_TESTS_MARKET_FIXTURE_H
#define HOURGLASS_TESTS_MARKET_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "hourglass/exchange.h"
#include "mdview.h"

static void market_fixture_sink(void *ctx, const hg_exchange_event_t *ev) { (void)ctx, (void)ev; }

/* The seeded view, or NULL on failure. */
static inline hg_mdview_t *market_fixture(void) {
  hg_exchange_config_t cfg = {.max_instruments = 8, .max_accounts = 8, .max_book_orders = 64};
  hg_exchange_t *ex = NULL;
  hg_mdview_t *v = NULL;
  if (hg_exchange_create(&cfg, market_fixture_sink, NULL, &ex) != 0) return NULL;
  static const struct {
    uint32_t id;
    const char *sym;
  } list[] = {{1, "B200.A.2027-03"}, {7, "H100.B.2027-04"}};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
    hg_command_t c;
    memset(&c, 0, sizeof c);
    c.seq = i + 1;
    c.ts = 1000 + i;
    c.type = HG_COMMAND_LIST_INSTRUMENT;
    strcpy(c.u.list.symbol, list[i].sym);
    c.u.list.params = (hg_book_params_t){.instrument_id = list[i].id, .tick_size = 1000,
                                         .contract_unit = 1000, .min_price = 1,
                                         .max_price = 10000, .max_order_qty = 1000,
                                         .ref_price = 1000, .max_orders = 64, .max_accounts = 8};
    if (hg_exchange_apply(ex, &c) != 0) goto out;
  }
  if (hg_mdview_create(8, 20, 100, &v) == 0 && hg_mdview_seed(v, ex) != 0) {
    hg_mdview_destroy(v);
    v = NULL;
  }
out:
  hg_exchange_destroy(ex);
  return v;
}

#endif /* HOURGLASS_TESTS_MARKET_FIXTURE_H */
