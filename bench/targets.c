/*
 * targets.c - the servers the load generator drives (targets.h): the real
 * gateway set up through the client harness.
 */
#include "targets.h"

#include <errno.h>
#include <stdlib.h>

#include "client_harness.h"

/* ------------------------------------------------------- the real gateway */

struct tg_gateway {
  ch_server_t s;
};

tg_gateway_t *tg_gateway_up(const tg_gateway_opts_t *o, lg_fleet_t *f) {
  tg_gateway_t *g = calloc(1, sizeof *g);
  if (g == NULL) lg_die("server create", -ENOMEM);
  uint32_t n_sessions = o->sessions;
  ch_options_t co = {0};
  co.base_dir = o->dir;
  co.durable = 1;
  co.journal_direct = o->journal_direct;
  co.rt_priority = o->rt_priority;
  co.max_sessions = n_sessions + 8;
  co.max_instruments = 4;
  co.max_accounts = n_sessions + 8;
  co.max_book_orders = 1u << 16;
  co.throttle_rate = 1000000;
  co.ring_capacity = 65536;
  co.segment_size = 256u << 20; /* no segment switch inside a run */
  int rc = ch_create(&g->s, &co);
  if (rc != 0) lg_die("server create", rc);
  if ((rc = ch_add_key(&g->s, TG_OP_KEY, HG_ROLE_OPERATOR, 0, 0)) != 0) lg_die("add key", rc);
  uint32_t *acc = calloc(n_sessions, sizeof *acc), *firm = calloc(n_sessions, sizeof *firm);
  if (acc == NULL || firm == NULL) lg_die("add key", -ENOMEM);
  for (uint32_t i = 0; i < n_sessions; i++) {
    acc[i] = i + 1;
    firm[i] = 1 + i % 16;
    rc = ch_add_key(&g->s, TG_KEY_BASE + i, HG_ROLE_TRADER, acc[i], firm[i]);
    if (rc != 0) lg_die("add key", rc);
  }
  if ((rc = ch_run(&g->s)) != 0) lg_die("server start", rc);
  if (ch_setup_market(&g->s, TG_OP_KEY, 1, acc, firm, n_sessions) != 0)
    lg_die("market setup", HG_EINVAL);
  free(acc);
  free(firm);

  rc = lg_fleet_login(f, g->s.port, TG_KEY_BASE, n_sessions, ch_secret,
                      o->keepalive_ms ? o->keepalive_ms : 5000);
  if (rc != 0) lg_die("login", rc);
  /* Resting sells far above the IOC buys: a book with depth that never trades. */
  for (uint32_t i = 0; i < n_sessions && i < 8; i++) {
    for (int k = 0; k < 50; k++) {
      hg_client_order_t o2 = {.instrument_id = 1, .client_order_id = (uint64_t)1 << 40 | (uint64_t)k,
                              .side = HOURGLASS__V1__SIDE__SIDE_SELL,
                              .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                              .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC, .has_price = true,
                              .price = 90000 + k * 10 + (int64_t)i, .qty = 5};
      uint64_t seq;
      hg_client_new_order(f->sess[i].c, &o2, &seq);
      f->sess[i].due[seq % LG_RING] = 0;
    }
    hg_client_flush(f->sess[i].c, 1000);
  }
  return g;
}

void tg_gateway_down(tg_gateway_t *g, lg_fleet_t *f) {
  lg_fleet_close(f);
  ch_stop(&g->s);
  free(g);
}
