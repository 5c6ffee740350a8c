/*
 * server.c - the in-process exchange server of server.h: one way to build
 * the gateway and pipeline configurations from ts_server_options_t, so the
 * wire-level tests (ts_server_start) and the client-library tests
 * (ts_server_create) run the same server.
 */
#include "server.h"
#include "tls_certs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void gw_log(void *ctx, int level, const char *msg) {
  const ts_server_t *s = ctx;
  if (s->verbose || (level >= HG_LOG_ERROR && !s->quiet))
    fprintf(stderr, "[gateway %d] %s\n", level, msg);
}

static void gateway_config(const ts_server_t *s, const ts_server_options_t *o,
                           hg_gateway_config_t *gc) {
  hg_gateway_config_init(gc);
  gc->key_dir = s->keys;
  gc->max_sessions = o->max_sessions ? o->max_sessions : 64;
  if (o->small_gateway) {
    gc->max_unauthenticated = 16;
    gc->max_orders = 1u << 14;
    gc->max_accounts = 256;
    gc->max_positions = 4096;
    gc->pending_capacity = 4096;
    gc->out_hard_cap = 1u << 20;
    gc->out_high_water = 128u << 10;
    gc->retransmit_bytes = 64u << 10;
    gc->retransmit_frames = 1024;
  } else {
    gc->max_unauthenticated = gc->max_sessions < 64 ? 64 : gc->max_sessions;
    gc->max_orders = o->max_book_orders ? o->max_book_orders * 2 : 1u << 17;
    gc->max_accounts = o->max_accounts ? o->max_accounts + 16 : 256;
  }
  if (o->throttle_rate) {
    gc->throttle_rate = o->throttle_rate;
    gc->throttle_burst = o->throttle_rate;
  }
  gc->rt_priority = o->rt_priority;
  gc->log = gw_log;
  gc->log_ctx = (void *)s;
  if (o->tweak != NULL) o->tweak(gc);
}

int ts_pipe_mode(const ts_server_options_t *o) {
  if (o != NULL && o->pipe_mode != 0) return o->pipe_mode - 1;
  const char *e = getenv("HG_TEST_PIPE_MODE");
  return e != NULL && strcmp(e, "threads") == 0 ? HG_PIPE_MODE_THREADS : HG_PIPE_MODE_LOOP;
}

static void pipeline_config(ts_server_t *s, const ts_server_options_t *o,
                            hg_pipeline_config_t *pc) {
  util_config(pc, s->dir, &s->plog);
  s->plog.verbose = o->verbose;
  pc->exchange.clearing = o->clearing != NULL ? o->clearing : util_no_risk();
  pc->exchange.max_instruments = o->max_instruments ? o->max_instruments : 4;
  pc->exchange.max_accounts = o->max_accounts ? o->max_accounts : 64;
  pc->exchange.max_book_orders = o->max_book_orders ? o->max_book_orders : 1u << 16;
  if (o->ring_capacity) {
    pc->inbound_capacity = o->ring_capacity;
    pc->outbound_capacity = o->ring_capacity * 4;
    pc->staging_capacity = o->ring_capacity * 4;
  }
  if (o->staging_capacity) pc->staging_capacity = o->staging_capacity;
  if (o->outbound_capacity) pc->outbound_capacity = o->outbound_capacity;
  if (o->segment_size) {
    pc->journal.segment_size = o->segment_size;
    pc->journal.batch_bytes = 4u << 20;
  }
  pc->journal.force_fallback = o->journal_direct;
  pc->rt_priority = o->rt_priority;
  pc->durability = o->durable ? HG_DURABILITY_DURABLE : HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE;
  pc->clock = o->clock;
  pc->clock_ctx = o->clock_ctx;
  pc->mode = ts_pipe_mode(o);
  pc->out_notify = hg_gateway_notify;
  pc->out_notify_ctx = s->gw;
  pc->loop_drain = hg_gateway_drain;
  pc->loop_drain_ctx = s->gw;
}

int ts_server_create(ts_server_t *s, const ts_server_options_t *o) {
  char reopen[sizeof s->dir];
  if (o->data_dir != NULL) snprintf(reopen, sizeof reopen, "%s", o->data_dir);
  memset(s, 0, sizeof *s);
  s->verbose = o->verbose;
  s->quiet = o->quiet;
  if (o->data_dir != NULL) {
    snprintf(s->dir, sizeof s->dir, "%s", reopen);
    snprintf(s->keys, sizeof s->keys, "%s/keys", s->dir);
  } else {
    const char *base = o->base_dir;
    if (base == NULL) base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    if ((size_t)snprintf(s->dir, sizeof s->dir, "%s/hgtest-server-XXXXXX", base) >= sizeof s->dir)
      return -ENAMETOOLONG;
    if (mkdtemp(s->dir) == NULL) return -errno;
    snprintf(s->keys, sizeof s->keys, "%s/keys", s->dir);
    if (mkdir(s->keys, 0700) != 0) return -errno;
  }
  hg_gateway_config_t gc;
  gateway_config(s, o, &gc);
  int rc = hg_gateway_create(&gc, &s->gw);
  if (rc != 0) return rc;
  hg_pipeline_config_t pc;
  pipeline_config(s, o, &pc);
  rc = hg_pipeline_open(&pc, &s->p);
  if (rc == 0) rc = hg_gateway_attach(s->gw, s->p);
  return rc;
}

int ts_server_add_key(ts_server_t *s, uint64_t id, uint32_t role, uint32_t account, uint32_t firm) {
  uint8_t sec[32];
  ts_key_secret(id, sec);
  hg_gateway_key_t k = {.key_id = id,
                        .role = role,
                        .account = account,
                        .firm = firm,
                        .secret = sec,
                        .secret_len = 32};
  return hg_gateway_add_key(s->gw, &k, 0);
}

int ts_server_run(ts_server_t *s) {
  int rc = hg_pipeline_start(s->p);
  if (rc == 0) rc = hg_gateway_start(s->gw);
  s->port = hg_gateway_port(s->gw);
  return rc;
}

void ts_server_halt(ts_server_t *s) {
  if (s->gw != NULL) hg_gateway_stop(s->gw);
  if (s->p != NULL) {
    hg_pipeline_stop(s->p);
    hg_pipeline_close(s->p);
  }
  hg_gateway_destroy(s->gw);
  s->gw = NULL;
  s->p = NULL;
}

void ts_server_stop(ts_server_t *s) {
  ts_server_halt(s);
  util_rm_rf(s->dir);
}

static int start_small(ts_server_t *s, const char *data_dir, int unsafe,
                       void (*tweak)(hg_gateway_config_t *cfg), void (*keys)(ts_server_t *s)) {
  ts_server_options_t o = {0};
  o.data_dir = data_dir;
  o.durable = !unsafe;
  o.small_gateway = 1;
  o.tweak = tweak;
  o.quiet = 1;
  o.verbose = getenv("GT_VERBOSE") != NULL;
  int rc = ts_server_create(s, &o);
  if (rc == 0 && keys != NULL) keys(s);
  if (rc == 0) rc = ts_server_run(s);
  return rc;
}

int ts_server_start(ts_server_t *s, int unsafe, void (*tweak)(hg_gateway_config_t *cfg),
                    void (*keys)(ts_server_t *s)) {
  return start_small(s, NULL, unsafe, tweak, keys);
}

int ts_server_reopen(ts_server_t *s, int unsafe, void (*tweak)(hg_gateway_config_t *cfg),
                     void (*keys)(ts_server_t *s)) {
  return start_small(s, s->dir, unsafe, tweak, keys);
}

/* ts_server_create_tls: the certificate files the tweak names. */
static char tls_cert[600], tls_key[600];

static void tls_tweak(hg_gateway_config_t *cfg) {
  cfg->tls_cert = tls_cert;
  cfg->tls_key = tls_key;
}

int ts_server_create_tls(ts_server_t *s, const char *dir) {
  if (ts_tls_make(dir) != 0) return -1;
  snprintf(tls_cert, sizeof tls_cert, "%s/server.pem", dir);
  snprintf(tls_key, sizeof tls_key, "%s/server.key", dir);
  ts_server_options_t so = {0};
  so.tweak = tls_tweak;
  return ts_server_create(s, &so);
}
