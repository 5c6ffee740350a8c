/* The public market view (daemon/mdview.c): only listed instruments enter it.
 * Rejected orders for ids that were never listed must neither appear in the
 * instrument list nor use up the slots a later listing needs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mdview.h"

static hg_pipe_out_t rec(uint64_t seq, uint16_t type, uint32_t id) {
  hg_pipe_out_t r;
  memset(&r, 0, sizeof r);
  r.kind = HG_PIPE_EVENT;
  r.seq = seq;
  r.event.seq = seq;
  r.event.ts = seq;
  r.event.type = type;
  r.event.instrument_id = id;
  return r;
}

static hg_pipe_out_t listed(uint64_t seq, uint32_t id, const char *sym) {
  hg_pipe_out_t r = rec(seq, HG_XEV_LISTED, id);
  snprintf(r.event.listed.symbol, sizeof r.event.listed.symbol, "%s", sym);
  r.event.listed.params.instrument_id = id;
  r.event.listed.params.tick_size = 1000;
  return r;
}

static hg_pipe_out_t rejected(uint64_t seq, uint32_t id) {
  hg_pipe_out_t r = rec(seq, HG_XEV_BOOK, id);
  r.event.book.type = HG_EV_REJECTED;
  r.event.book.reason = HG_XREJ_UNKNOWN_INSTRUMENT;
  return r;
}

static void unknown_ids_never_enter_the_view(void **state) {
  (void)state;
  hg_mdview_t *v = NULL;
  assert_int_equal(hg_mdview_create(4, 5, 10, &v), 0);
  uint64_t seq = 1;
  hg_pipe_out_t r = listed(seq++, 1, "B200.A.2027-03");
  hg_mdview_apply(v, &r, 1, 0);
  /* Far more rejected orders for unknown ids than the view has slots. */
  for (uint32_t id = 90; id < 190; id++) {
    r = rejected(seq++, id);
    hg_mdview_apply(v, &r, 1, 0);
  }
  hg_mdview_publish(v);
  hg_md_instrument_t list[16];
  assert_int_equal(hg_mdview_instruments(v, list, 16), 1);
  assert_int_equal(list[0].id, 1);
  assert_int_equal(hg_mdview_book(v, 99, NULL, NULL, NULL, NULL, NULL, NULL, NULL), HG_ENOTFOUND);
  hg_tob_t t;
  assert_int_equal(hg_mdview_tob(v, 99, &t), HG_ENOTFOUND);

  /* A later listing still appears, with its book. */
  r = listed(seq++, 40, "H100.B.2027-04");
  hg_mdview_apply(v, &r, 1, 0);
  r = rec(seq++, HG_XEV_BOOK, 40);
  r.event.book.type = HG_EV_LEVEL;
  r.event.book.side = HG_SIDE_BUY;
  r.event.book.price = 2510;
  r.event.book.qty = 3;
  hg_mdview_apply(v, &r, 1, 0);
  hg_mdview_publish(v);
  assert_int_equal(hg_mdview_instruments(v, list, 16), 2);
  hg_md_instrument_t info;
  hg_md_level_t bids[5], asks[5];
  size_t nb = 0, na = 0;
  assert_int_equal(hg_mdview_book(v, 40, &info, bids, &nb, asks, &na, NULL, NULL), 0);
  assert_string_equal(info.symbol, "H100.B.2027-04");
  assert_int_equal(nb, 1);
  assert_int_equal(bids[0].price, 2510);
  assert_int_equal(hg_mdview_tob(v, 40, &t), 0);
  assert_int_equal(t.bid_px, 2510);
  hg_mdview_destroy(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unknown_ids_never_enter_the_view),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
