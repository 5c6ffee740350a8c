/*
 * client_util.c - client-library helpers for tests against a ts_server_t
 * (see client_util.h).
 */
#include "client_util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hourglass/error.h"
#include "hourglass/index.h"
#include "test_keys.h"

static const char *tls_ca; /* ch_use_tls */

void ch_use_tls(const char *ca_file) { tls_ca = ca_file; }

int ch_client(const ts_server_t *s, uint64_t key_id, hg_client_t **out) {
  uint8_t sec[32];
  ts_key_secret(key_id, sec);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = s->port;
  cfg.key_id = key_id;
  cfg.secret = sec;
  cfg.secret_len = 32;
  cfg.tls = tls_ca != NULL;
  cfg.tls_ca_file = tls_ca;
  return hg_client_create(&cfg, out);
}

int ch_node_client(int port, const char *nodes, uint64_t key_id, const char *secret_hex,
                   hg_client_t **out) {
  uint8_t sec[32];
  if (hg_client_parse_hex(secret_hex, sec, sizeof sec) != 32) return HG_EINVAL;
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = (uint16_t)port;
  cfg.key_id = key_id;
  cfg.secret = sec;
  cfg.secret_len = sizeof sec;
  cfg.nodes = nodes;
  cfg.timeout_ms = 2000;
  /* A test's client idles while a node restarts (seconds in a sanitized
   * build): its session must not lapse meanwhile. */
  cfg.keepalive_ms = 30000;
  return hg_client_create(&cfg, out);
}

int ch_connect_retry(hg_client_t *c, double timeout_s, void (*between)(void)) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int rc = hg_client_connect(c);
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (rc == 0 || (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > timeout_s)
      return rc;
    if (between != NULL) between();
    nanosleep(&(struct timespec){0, 100000000}, NULL);
  }
}

int ch_response(hg_client_t *c, uint64_t seq) {
  for (;;) {
    const Hourglass__V1__Envelope *e = NULL;
    int rc = hg_client_recv(c, 5000, &e);
    if (rc <= 0) return -1;
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_RESPONSE && e->response->ref_seq == seq)
      return (int)e->response->reason;
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_TERMINATE) return -1;
  }
}

int32_t ch_day(const char *s) {
  int32_t d = 0;
  if (hg_index_day_parse(s, strlen(s), &d) != 0) {
    fprintf(stderr, "ch_day: bad date %s\n", s);
    abort();
  }
  return d;
}

uint64_t ch_clock_read(void *ctx) { return atomic_load((_Atomic uint64_t *)ctx); }

void ch_clock_set(_Atomic uint64_t *now, int32_t day, int64_t secs) {
  atomic_store(now, ((uint64_t)day * 86400u + (uint64_t)secs) * 1000000000ull);
}

int ch_list_contract(hg_client_t *op) { return ch_list_contract_sized(op, 1024); }

int ch_cluster_market(hg_client_t *op, uint32_t max_orders) {
  uint64_t seq;
  if (ch_list_contract_sized(op, max_orders) != 0) return -1;
  if (hg_client_add_account(op, 1, 1, &seq) != 0 || ch_response(op, seq) != 0) return -1;
  if (hg_client_cash(op, 1, 1000000000000ll, false, &seq) != 0 || ch_response(op, seq) != 0)
    return -1;
  return 0;
}

int ch_list_contract_sized(hg_client_t *op, uint32_t max_orders) {
  Hourglass__V1__ListInstrument l = HOURGLASS__V1__LIST_INSTRUMENT__INIT;
  l.instrument_id = 1;
  l.symbol = "B200.A.2027-02";
  l.tick_size = 1000;
  l.contract_unit = 1000;
  l.min_price = 1;
  l.max_price = 100000;
  l.max_order_qty = 1000;
  l.max_orders = max_orders;
  l.max_accounts = 64;
  l.has_ref_price = 1;
  l.ref_price = 500;
  Hourglass__V1__Envelope e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = HOURGLASS__V1__ENVELOPE__BODY_LIST_INSTRUMENT;
  e.list_instrument = &l;
  uint64_t seq = 0;
  if (hg_client_send(op, &e, &seq) != 0) return -1;
  return ch_response(op, seq);
}

int ch_order(hg_client_t *c, uint32_t side, int64_t price, int64_t qty, uint64_t clordid) {
  hg_client_order_t o = {.instrument_id = 1,
                         .client_order_id = clordid,
                         .side = side,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC,
                         .has_price = true,
                         .price = price,
                         .qty = qty};
  uint64_t seq = 0;
  if (hg_client_new_order(c, &o, &seq) != 0) return -1;
  for (;;) {
    const Hourglass__V1__Envelope *e = NULL;
    if (hg_client_recv(c, 5000, &e) != 1) return -1;
    if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT ||
        e->execution_report->ref_seq != seq)
      continue;
    return e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_NEW ? 0 : -1;
  }
}

int ch_responses(hg_client_t *c, uint64_t first, uint64_t last) {
  uint64_t got = 0;
  int bad = 0;
  while (got < last - first + 1) {
    const Hourglass__V1__Envelope *e = NULL;
    if (hg_client_recv(c, 10000, &e) <= 0) return -1;
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_TERMINATE) return -1;
    if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_RESPONSE) continue;
    if (e->response->ref_seq < first || e->response->ref_seq > last) continue;
    got++;
    bad |= e->response->reason != 0;
  }
  return bad ? -1 : 0;
}

int ch_setup_market(const ts_server_t *s, uint64_t op_key, uint32_t n_instr,
                    const uint32_t *accounts, const uint32_t *firms, size_t n) {
  hg_client_t *op = NULL;
  if (ch_client(s, op_key, &op) != 0) return -1;
  int bad = hg_client_connect(op) != 0;
  uint64_t first = 1, seq = 0;
  for (uint32_t i = 1; i <= n_instr && !bad; i++) {
    char sym[32];
    snprintf(sym, sizeof sym, "B200.A.2027-%02u", i);
    Hourglass__V1__ListInstrument l = HOURGLASS__V1__LIST_INSTRUMENT__INIT;
    l.instrument_id = i;
    l.symbol = sym;
    l.tick_size = 1000;
    l.contract_unit = 1000;
    l.min_price = 1;
    l.max_price = 100000;
    l.max_order_qty = 1000000;
    l.max_orders = 1u << 16;
    l.max_accounts = (uint32_t)(n + 1);
    l.has_ref_price = 1;
    l.ref_price = 500; /* a first settlement price: the clearing needs a reference */
    Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
    env.body_case = HOURGLASS__V1__ENVELOPE__BODY_LIST_INSTRUMENT;
    env.list_instrument = &l;
    bad |= hg_client_send(op, &env, &seq) != 0;
  }
  /* Listing first: accounts are independent of it, but keep the order simple. */
  if (!bad && seq >= first) bad |= ch_responses(op, first, seq) != 0;
  first = seq + 1;
  for (size_t i = 0; i < n && !bad; i++) {
    Hourglass__V1__AddAccount a = HOURGLASS__V1__ADD_ACCOUNT__INIT;
    a.account = accounts[i];
    a.firm = firms[i];
    Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
    env.body_case = HOURGLASS__V1__ENVELOPE__BODY_ADD_ACCOUNT;
    env.add_account = &a;
    bad |= hg_client_send(op, &env, &seq) != 0;
    /* Bounded batches so the gateway's pending table never fills. */
    if (!bad && (seq - first + 1 == 1024 || i + 1 == n)) {
      bad |= ch_responses(op, first, seq) != 0;
      first = seq + 1;
    }
  }
  hg_client_logout(op, 2000);
  hg_client_destroy(op);
  return bad ? -1 : 0;
}

int ch_two_trader_market(ts_server_t *s, uint64_t op_key, uint64_t key_a, uint32_t acc_a,
                         uint64_t key_b, uint32_t acc_b, uint32_t n_instr) {
  ts_server_options_t o = {0};
  if (ts_server_create(s, &o) != 0) return -1;
  if (ts_server_add_key(s, op_key, HG_ROLE_OPERATOR, 0, 0) != 0 ||
      ts_server_add_key(s, key_a, HG_ROLE_TRADER, acc_a, 1) != 0 ||
      ts_server_add_key(s, key_b, HG_ROLE_TRADER, acc_b, 2) != 0 || ts_server_run(s) != 0)
    return -1;
  const uint32_t acc[] = {acc_a, acc_b}, firm[] = {1, 2};
  return ch_setup_market(s, op_key, n_instr, acc, firm, 2);
}
