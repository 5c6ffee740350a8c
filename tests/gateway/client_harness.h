/*
 * client_harness.h - a real gateway server in this process for the client
 * tests and the load generator: a pipeline in a fresh data directory, the
 * gateway on an ephemeral loopback port, API keys, and a market (listed
 * instruments, accounts) set up over the wire by an operator session through
 * the client library itself.
 *
 * Secrets: key id k has the 32-byte secret byte i = (k * 31 + i) mod 256,
 * so any client (C or Python) can derive it; ch_secret_hex() gives it as hex.
 */
#ifndef HOURGLASS_TESTS_CLIENT_HARNESS_H
#define HOURGLASS_TESTS_CLIENT_HARNESS_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hourglass/client.h"
#include "hourglass/error.h"
#include "hourglass/gateway.h"
#include "hourglass/index.h"
#include "pipeline_util.h"

typedef struct ch_options {
  const char *base_dir;      /* where the data directory is made; NULL: "." */
  int durable;               /* 1: HG_DURABILITY_DURABLE, 0: ack before durable */
  uint32_t max_sessions;     /* 0: 64 */
  uint32_t max_instruments;  /* exchange slots; 0: 4 */
  uint32_t max_accounts;     /* 0: 64 */
  uint32_t max_book_orders;  /* 0: 1 << 16 */
  uint32_t throttle_rate;    /* per session; 0: gateway default */
  uint32_t ring_capacity;    /* pipeline rings, power of two; 0: 16384 */
  uint64_t segment_size;     /* journal segment bytes; 0: 4 MiB (tests) */
  int verbose;               /* server logs to stderr */
  uint64_t (*clock)(void *ctx); /* the sequencer's clock; NULL: the wall clock */
  const char *data_dir;      /* reopen this data directory (ch_halt left it); NULL: a new one */
  void *clock_ctx;
  int journal_direct;        /* journal.force_fallback: pwritev + fdatasync, no io_uring */
  int rt_priority;           /* SCHED_FIFO for the engine, journal and gateway threads; 0: off */
  const hg_clearing_config_t *clearing; /* NULL: no band and no margin (util_no_risk) */
} ch_options_t;

typedef struct ch_server {
  char dir[256];
  char keys[300];
  util_log_t plog;
  hg_pipeline_t *p;
  hg_gateway_t *gw;
  uint16_t port;
  int verbose;
} ch_server_t;

static inline void ch_secret(uint64_t key_id, uint8_t sec[32]) {
  for (int i = 0; i < 32; i++) sec[i] = (uint8_t)(key_id * 31u + (uint64_t)i);
}

static inline void ch_secret_hex(uint64_t key_id, char hex[65]) {
  uint8_t sec[32];
  ch_secret(key_id, sec);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", sec[i]);
}

static inline void ch_gw_log(void *ctx, int level, const char *msg) {
  const ch_server_t *s = ctx;
  if (s->verbose || level >= HG_PIPE_LOG_ERROR) fprintf(stderr, "[gateway %d] %s\n", level, msg);
}

/* Creates the server (not started): call ch_add_key, then ch_run. */
static inline int ch_create(ch_server_t *s, const ch_options_t *o) {
  memset(s, 0, sizeof *s);
  s->verbose = o->verbose;
  if (o->data_dir != NULL) {
    snprintf(s->dir, sizeof s->dir, "%s", o->data_dir);
    snprintf(s->keys, sizeof s->keys, "%s/keys", s->dir);
  } else {
    snprintf(s->dir, sizeof s->dir, "%s/hgclient-XXXXXX", o->base_dir ? o->base_dir : ".");
    if (mkdtemp(s->dir) == NULL) return -errno;
    snprintf(s->keys, sizeof s->keys, "%s/keys", s->dir);
    if (mkdir(s->keys, 0700) != 0) return -errno;
  }
  hg_gateway_config_t gc;
  hg_gateway_config_init(&gc);
  gc.key_dir = s->keys;
  gc.port = 0;
  gc.max_sessions = o->max_sessions ? o->max_sessions : 64;
  gc.max_unauthenticated = gc.max_sessions < 64 ? 64 : gc.max_sessions;
  gc.max_orders = o->max_book_orders ? o->max_book_orders * 2 : 1u << 17;
  gc.max_accounts = o->max_accounts ? o->max_accounts + 16 : 256;
  if (o->throttle_rate) {
    gc.throttle_rate = o->throttle_rate;
    gc.throttle_burst = o->throttle_rate;
  }
  gc.log = ch_gw_log;
  gc.log_ctx = s;
  gc.rt_priority = o->rt_priority;
  int rc = hg_gateway_create(&gc, &s->gw);
  if (rc != 0) return rc;
  hg_pipeline_config_t pc;
  util_config(&pc, s->dir, &s->plog);
  s->plog.verbose = o->verbose;
  pc.exchange.clearing = o->clearing != NULL ? o->clearing : util_no_risk();
  pc.exchange.max_instruments = o->max_instruments ? o->max_instruments : 4;
  pc.exchange.max_accounts = o->max_accounts ? o->max_accounts : 64;
  pc.exchange.max_book_orders = o->max_book_orders ? o->max_book_orders : 1u << 16;
  if (o->ring_capacity) {
    pc.inbound_capacity = o->ring_capacity;
    pc.outbound_capacity = o->ring_capacity * 4;
    pc.staging_capacity = o->ring_capacity * 4;
  }
  if (o->segment_size) {
    pc.journal.segment_size = o->segment_size;
    pc.journal.batch_bytes = 4u << 20;
  }
  pc.journal.force_fallback = o->journal_direct;
  pc.rt_priority = o->rt_priority;
  pc.durability = o->durable ? HG_DURABILITY_DURABLE : HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE;
  pc.clock = o->clock;
  pc.clock_ctx = o->clock_ctx;
  pc.out_notify = hg_gateway_notify;
  pc.out_notify_ctx = s->gw;
  rc = hg_pipeline_open(&pc, &s->p);
  if (rc == 0) rc = hg_gateway_attach(s->gw, s->p);
  return rc;
}

static inline int ch_add_key(ch_server_t *s, uint64_t id, uint32_t role, uint32_t account,
                             uint32_t firm) {
  uint8_t sec[32];
  ch_secret(id, sec);
  hg_gateway_key_t k = {.key_id = id, .role = role, .account = account, .firm = firm,
                        .secret = sec, .secret_len = 32};
  return hg_gateway_add_key(s->gw, &k, 0);
}

static inline int ch_run(ch_server_t *s) {
  int rc = hg_pipeline_start(s->p);
  if (rc == 0) rc = hg_gateway_start(s->gw);
  s->port = hg_gateway_port(s->gw);
  return rc;
}

/* Stops and closes the server but keeps its data directory (and key store)
 * for a ch_create with data_dir. */
static inline void ch_halt(ch_server_t *s) {
  if (s->gw != NULL) hg_gateway_stop(s->gw);
  if (s->p != NULL) {
    hg_pipeline_stop(s->p);
    hg_pipeline_close(s->p);
  }
  hg_gateway_destroy(s->gw);
  s->gw = NULL;
  s->p = NULL;
}

/* Stops and closes the server and removes its data directory. */
static inline void ch_stop(ch_server_t *s) {
  ch_halt(s);
  util_rm_rf(s->dir);
}

/* A client for key_id on the server (not connected). */
static inline int ch_client(const ch_server_t *s, uint64_t key_id, hg_client_t **out) {
  uint8_t sec[32];
  ch_secret(key_id, sec);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = s->port;
  cfg.key_id = key_id;
  cfg.secret = sec;
  cfg.secret_len = 32;
  return hg_client_create(&cfg, out);
}

/* Waits for the Response to request seq; returns its reason, or -1. */
static inline int ch_response(hg_client_t *c, uint64_t seq) {
  for (;;) {
    const Hourglass__V1__Envelope *e = NULL;
    int rc = hg_client_recv(c, 5000, &e);
    if (rc <= 0) return -1;
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_RESPONSE && e->response->ref_seq == seq)
      return (int)e->response->reason;
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_TERMINATE) return -1;
  }
}

/* The day number of "YYYY-MM-DD"; the test's own dates, so one that does
 * not parse is a bug in the test and aborts it. */
static inline int32_t ch_day(const char *s) {
  int32_t d = 0;
  if (hg_index_day_parse(s, strlen(s), &d) != 0) {
    fprintf(stderr, "ch_day: bad date %s\n", s);
    abort();
  }
  return d;
}

/* A sequencer clock the test sets: pass ch_clock_read as ch_options_t.clock
 * and the test's _Atomic uint64_t (ns since the epoch) as clock_ctx. */
static inline uint64_t ch_clock_read(void *ctx) { return atomic_load((_Atomic uint64_t *)ctx); }

/* Sets that clock to day (days since the epoch) + secs. */
static inline void ch_clock_set(_Atomic uint64_t *now, int32_t day, int64_t secs) {
  atomic_store(now, ((uint64_t)day * 86400u + (uint64_t)secs) * 1000000000ull);
}

/* Operator op lists instrument 1, "B200.A.2027-02" (tick size 1000, unit
 * 1000, ticks 1..100000, at most 1000 per order, 1024 orders, 64 accounts,
 * reference price 500), and waits for the Response. Returns its reason (0:
 * listed), or -1 if it could not be sent or no Response came. */
static inline int ch_list_contract(hg_client_t *op) {
  Hourglass__V1__ListInstrument l = HOURGLASS__V1__LIST_INSTRUMENT__INIT;
  l.instrument_id = 1;
  l.symbol = "B200.A.2027-02";
  l.tick_size = 1000;
  l.contract_unit = 1000;
  l.min_price = 1;
  l.max_price = 100000;
  l.max_order_qty = 1000;
  l.max_orders = 1024;
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

/* Sends a GTC limit order on instrument 1 and waits for the execution
 * report answering it (other messages are skipped). 0 if that report is
 * NEW; -1 if it is anything else, the order could not be sent, or the
 * receive failed or timed out (5 s). */
static inline int ch_order(hg_client_t *c, uint32_t side, int64_t price, int64_t qty,
                           uint64_t clordid) {
  hg_client_order_t o = {.instrument_id = 1, .client_order_id = clordid, .side = side,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC, .has_price = true,
                         .price = price, .qty = qty};
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

/* Waits for the Responses to requests [first, last]; 0 if all said done. */
static inline int ch_responses(hg_client_t *c, uint64_t first, uint64_t last) {
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

/* Operator op_key lists instruments 1..n_instr ("B200.A.2027-01", ...,
 * ticks 1..100000) and adds accounts[i] in firms[i]; requests are pipelined
 * (sent at once, then every Response awaited). 0 or -1. */
static inline int ch_setup_market(const ch_server_t *s, uint64_t op_key, uint32_t n_instr,
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

#endif /* HOURGLASS_TESTS_CLIENT_HARNESS_H */
