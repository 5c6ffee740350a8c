/*
 * gateway.c - lifecycle: config defaults, create, start, stop, destroy, stats,
 * the pipeline's notify, the loop thread and its timer (heartbeats,
 * keepalive checks, cancel-on-disconnect retries). Shared state and threads:
 * gateway_int.h.
 */
#include "gateway_int.h"

#include <limits.h>

void gw_log(hg_gateway_t *gw, int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hg_logline_v(gw->cfg.log, gw->cfg.log_ctx, "gateway", level, fmt, ap);
  va_end(ap);
}

uint64_t gw_now_wall(hg_gateway_t *gw) {
  if (gw->cfg.wall_clock != NULL) return gw->cfg.wall_clock(gw->cfg.clock_ctx);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ loop handles */

static void on_wake(uv_async_t *a) { gw_drain(a->data); }

/* Pipeline in loop mode: the end of each iteration's reads (check), and
 * before the loop blocks (prepare: commands of close callbacks), submits
 * the batch; a commit that completed (or a submit from another thread)
 * makes the loop fd readable. Consumer 0's records come out of both. */
static void on_pipe_commit(hg_gateway_t *gw) {
  while (hg_pipeline_loop_commit(gw->pipe)) gw_drain(gw);
}

static void on_pipe_check(uv_check_t *h) { on_pipe_commit(h->data); }

static void on_pipe_prepare(uv_prepare_t *h) { on_pipe_commit(h->data); }

static void on_pipe_poll(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  hg_gateway_t *gw = h->data;
  if (hg_pipeline_loop_reap(gw->pipe, 0)) gw_drain(gw);
}

/* Sets up the loop-mode handles (owner thread, before the loop runs). */
static int pipe_handles_start(hg_gateway_t *gw) {
  int rc = uv_poll_init(&gw->loop, &gw->pipe_poll, hg_pipeline_loop_fd(gw->pipe));
  if (rc != 0) return rc;
  gw->pipe_poll.data = gw;
  uv_check_init(&gw->loop, &gw->pipe_check);
  gw->pipe_check.data = gw;
  uv_prepare_init(&gw->loop, &gw->pipe_prepare);
  gw->pipe_prepare.data = gw;
  rc = uv_poll_start(&gw->pipe_poll, UV_READABLE, on_pipe_poll);
  if (rc == 0) rc = uv_check_start(&gw->pipe_check, on_pipe_check);
  if (rc == 0) rc = uv_prepare_start(&gw->pipe_prepare, on_pipe_prepare);
  return rc;
}

static void on_tick(uv_timer_t *t) {
  hg_gateway_t *gw = t->data;
  uint64_t now = now_mono();
  for (uint32_t i = 0; i < gw->n_conns; i++) {
    conn_t *c = &gw->conns[i];
    if (!c->used || uv_is_closing((uv_handle_t *)&c->tcp)) continue;
    if (c->closing) {
      /* A peer that does not read its Terminate is cut off after a second. */
      if (now - c->closing_since > 1000000000ull) gw_conn_close(c);
      continue;
    }
    uint32_t code = 0;
    switch (hg_sess_tick(&c->sess, now, &code)) {
    case HG_ST_HEARTBEAT: {
      Hourglass__V1__Heartbeat hb = HOURGLASS__V1__HEARTBEAT__INIT;
      env_t env = HOURGLASS__V1__ENVELOPE__INIT;
      env.body_case = B(HEARTBEAT);
      env.heartbeat = &hb;
      gw_conn_send(c, &env);
      break;
    }
    case HG_ST_WARN: {
      Hourglass__V1__Warning w = HOURGLASS__V1__WARNING__INIT;
      w.code = HOURGLASS__V1__WARNING_CODE__WARN_KEEPALIVE_LAPSED;
      w.text = "nothing received for one keepalive interval";
      env_t env = HOURGLASS__V1__ENVELOPE__INIT;
      env.body_case = B(WARNING);
      env.warning = &w;
      gw_conn_send(c, &env);
      break;
    }
    case HG_ST_TERMINATE:
      gw_conn_terminate(c, code, NULL);
      break;
    case HG_ST_NONE:
      break;
    }
  }
  for (uint32_t s = 0; s < gw->n_streams; s++) {
    stream_t *st = &gw->streams[s];
    if (st->cod_retry != 0) st->cod_retry = gw_cod_cancel(gw, st);
  }
  gw_flush_dirty(gw);
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Connections the kernel queues before accept: the usual SOMAXCONN cap;
 * admission decides after accept (see "Admission" in hourglass/gateway.h). */
#define LISTEN_BACKLOG 511

/* How long a stop waits for the results of commands already submitted. */
#define STOP_SETTLE_NS (2000ull * 1000000ull)
#define STOP_WAIT_NS (10ll * 1000000ll)

/* At a stop, before the sessions end: the results of every command already
 * submitted (the engine applies them whatever happens next) are drained
 * into the keys' streams and sent, so that no order the exchange keeps is
 * missing from its key's stream. Bounded; the loop reads no socket
 * meanwhile, so only internal cancels can add commands. Loop thread. */
static void settle_in_flight(hg_gateway_t *gw) {
  uint64_t deadline = now_mono() + STOP_SETTLE_NS;
  gw_drain(gw);
  while (gw->pend_tail != gw->pend_next) {
    uint64_t now = now_mono();
    if (now >= deadline) {
      gw_log(gw, HG_LOG_WARN,
             "stop: %" PRIu64 " commands still unanswered after %llu ms; their reports are "
             "not sequenced", gw->pend_next - gw->pend_tail,
             (unsigned long long)(STOP_SETTLE_NS / 1000000u));
      return;
    }
    if (gw->loop_mode) {
      /* This thread drives the journal: wait for the batch in flight. */
      hg_pipeline_loop_commit(gw->pipe);
      if (!hg_pipeline_loop_reap(gw->pipe, (int)(STOP_WAIT_NS / 1000000)))
        uv_sleep(1);
      gw_drain(gw);
      continue;
    }
    /* Short waits: a wake-up that went to the loop's async handle instead
     * costs at most one of them. */
    if (hg_pipeline_wait(gw->pipe, STOP_WAIT_NS) == -ECANCELED) {
      gw_drain(gw);
      return; /* the pipeline stopped first: nothing more will come */
    }
    gw_drain(gw);
  }
}

void hg_gateway_close_handles(hg_gateway_t *gw) { uv_walk(&gw->loop, close_walk, NULL); }

static void on_stop(uv_async_t *a) {
  hg_gateway_t *gw = a->data;
  /* In cluster mode results come with commits, which need the loop to run:
   * what is committed by now is drained, the rest is not waited for. */
  if (gw->cfg.loop_stop != NULL) gw_drain(gw);
  else settle_in_flight(gw);
  gw->stopping = 1;
  for (uint32_t i = 0; i < gw->n_conns; i++) {
    conn_t *c = &gw->conns[i];
    if (c->used && !c->closing) gw_conn_terminate(c, TERM(SERVER_SHUTDOWN), NULL);
  }
  gw_flush_dirty(gw);
  for (uint32_t i = 0; i < gw->n_conns; i++) gw_conn_close(&gw->conns[i]);
  /* Streams that sequenced frames while disconnected keep their numbering. */
  for (uint32_t s = 0; s < gw->n_streams; s++) {
    char name[SEQ_NAME_LEN];
    gw_seq_name(name, gw->streams[s].key_id);
    int rc = hg_store_set_session_seq(gw->store, name, gw->streams[s].next_seq - 1);
    if (rc != 0) gw_log(gw, HG_LOG_ERROR, "saving a stream seq: %s", hg_strerror(rc));
  }
  if (gw->cfg.loop_stop != NULL) {
    gw->cfg.loop_stop(gw->cfg.cluster_ctx); /* then hg_gateway_close_handles() */
    return;
  }
  hg_gateway_close_handles(gw);
}

static void *loop_main(void *arg) {
  hg_gateway_t *gw = arg;
  /* Every socket write happens on this thread. A client that closes while we
   * write to it must cost that write an EPIPE, never the process a SIGPIPE,
   * whatever the embedding program does with the signal; blocked here, the
   * synchronous SIGPIPE of a write stays pending on this thread, unseen. */
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
  uv_run(&gw->loop, UV_RUN_DEFAULT);
  return NULL;
}

/* --------------------------------------------------------------- lifecycle */

void hg_gateway_config_init(hg_gateway_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
}

static void apply_defaults(hg_gateway_config_t *c) {
#define DEF(f, v) \
  if (c->f == 0) c->f = (v)
  DEF(key_map_size, (size_t)64 << 20);
  DEF(max_frame, HG_WIRE_DEFAULT_MAX_FRAME);
  DEF(max_sessions, 1024);
  DEF(sessions_per_key, 4);
  DEF(max_unauthenticated, 64);
  DEF(max_unauthenticated_per_address, c->max_unauthenticated < 16 ? c->max_unauthenticated : 16);
  DEF(max_streams, 2 * c->max_sessions);
  DEF(login_timeout_ms, 5000);
  DEF(login_skew_ms, 5000);
  DEF(keepalive_min_ms, 50);
  DEF(keepalive_max_ms, 60000);
  DEF(tick_ms, 10);
  DEF(throttle_rate, 10000);
  DEF(throttle_burst, c->throttle_rate);
  DEF(out_high_water, 256u << 10);
  DEF(out_hard_cap, 4u << 20);
  DEF(retransmit_bytes, 256u << 10);
  DEF(retransmit_frames, 4096);
  DEF(retransmit_max, 1000);
  DEF(max_orders, 1u << 18);
  DEF(max_instruments, 64);
  DEF(max_accounts, 4096);
  DEF(max_positions, 1u << 16);
  DEF(pending_capacity, 16384);
  DEF(mmp_qty, 1000);
  DEF(mmp_window_ms, 1000);
#undef DEF
}

static void free_all(hg_gateway_t *gw) {
  if (gw->conns != NULL)
    for (uint32_t i = 0; i < gw->n_conns; i++) {
      if (gw->conns[i].ssl != NULL) gw_tls_free(&gw->conns[i]);
      free(gw->conns[i].in);
      free(gw->conns[i].out[0]);
      free(gw->conns[i].out[1]);
      free(gw->conns[i].cbuf);
    }
  free(gw->conns);
  if (gw->streams != NULL)
    for (uint32_t i = 0; i < gw->cfg.max_streams; i++) {
      free(gw->streams[i].log);
      free(gw->streams[i].ent);
      free(gw->streams[i].quote_gen);
    }
  free(gw->streams);
  if (gw->instr != NULL)
    for (uint32_t i = 0; i < gw->cfg.max_instruments; i++) {
      free(gw->instr[i].lv[0].lv);
      free(gw->instr[i].lv[1].lv);
      free(gw->instr[i].subs);
    }
  free(gw->instr);
  free(gw->drop_list);
  free(gw->pend);
  free(gw->orders);
  free(gw->accounts);
  free(gw->positions);
  free(gw->ledger);
  free(gw->ledger_next);
  free(gw->sacc.dsp);
  free(gw->sacc.dspp);
  free(gw->peers);
  free(gw->refusals);
  gw_map_free(&gw->stream_map);
  gw_map_free(&gw->order_map);
  gw_map_free(&gw->account_map);
  gw_map_free(&gw->position_map);
  free(gw->arena_buf);
  free(gw->scratch);
  free(gw->hold);
  gw_tls_destroy(gw);
  hg_outlog_close(gw->outlog);
  hg_store_close(gw->store);
  free(gw);
}

/* The loop, its handles and the bound listener (gw->port). 0 or an error;
 * gw->loop_open says whether the loop needs closing (hg_gateway_destroy). */
static int open_loop(hg_gateway_t *gw) {
  int rc = uv_loop_init(&gw->loop);
  if (rc != 0) return rc;
  gw->loop_open = 1;
  uv_tcp_init(&gw->loop, &gw->listener);
  gw->listener.data = gw;
  uv_async_init(&gw->loop, &gw->wake, on_wake);
  gw->wake.data = gw;
  uv_async_init(&gw->loop, &gw->stop_async, on_stop);
  gw->stop_async.data = gw;
  uv_timer_init(&gw->loop, &gw->timer);
  gw->timer.data = gw;
  struct sockaddr_storage addr;
  rc = uv_ip4_addr(gw->host, gw->cfg.port, (struct sockaddr_in *)&addr);
  if (rc != 0) rc = uv_ip6_addr(gw->host, gw->cfg.port, (struct sockaddr_in6 *)&addr);
  if (rc == 0) rc = uv_tcp_bind(&gw->listener, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&gw->listener, LISTEN_BACKLOG, gw_on_connection);
  if (rc == 0) {
    struct sockaddr_storage bound;
    int len = sizeof bound;
    rc = uv_tcp_getsockname(&gw->listener, (struct sockaddr *)&bound, &len);
    if (rc == 0)
      gw->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                  : ((struct sockaddr_in6 *)&bound)->sin6_port);
  }
  if (rc != 0)
    gw_log(gw, HG_LOG_ERROR, "listen on %s:%u: %s", gw->host, gw->cfg.port, uv_strerror(rc));
  return rc;
}

int hg_gateway_create(const hg_gateway_config_t *cfg_in, hg_gateway_t **out) {
  if (cfg_in == NULL || out == NULL || cfg_in->key_dir == NULL) return HG_EINVAL;
  hg_gateway_config_t cfg = *cfg_in;
  apply_defaults(&cfg);
  if (cfg.max_frame > HG_WIRE_MAX_FRAME_LIMIT || (cfg.pending_capacity & (cfg.pending_capacity - 1)) ||
      cfg.out_high_water >= cfg.out_hard_cap || cfg.out_hard_cap < cfg.max_frame * 2u ||
      cfg.keepalive_min_ms > cfg.keepalive_max_ms || cfg.retransmit_bytes < 1024 ||
      cfg.max_orders > (1u << 28) || cfg.max_accounts > (1u << 28) ||
      cfg.max_positions > (1u << 28) || cfg.rt_priority < 0 || cfg.rt_priority > HG_THREAD_RT_MAX ||
      cfg.max_unauthenticated > (1u << 24) ||
      cfg.max_unauthenticated_per_address > cfg.max_unauthenticated)
    return HG_EINVAL;
  hg_gateway_t *gw = calloc(1, sizeof *gw);
  if (gw == NULL) return -ENOMEM;
  gw->cfg = cfg;
  snprintf(gw->host, sizeof gw->host, "%s", cfg.host != NULL ? cfg.host : "127.0.0.1");
  gw->cfg.host = gw->host;
  gw->cfg.key_dir = NULL; /* not kept: the caller's string */
  int rc = hg_store_create(&gw->store);
  if (rc == 0) rc = hg_store_open(gw->store, cfg.key_dir, cfg.key_map_size);
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "key store: %s", hg_store_errmsg(gw->store));
    free_all(gw);
    return rc;
  }
  char odir[PATH_MAX];
  snprintf(odir, sizeof odir, "%s/outlog", cfg_in->key_dir);
  hg_outlog_options_t oo = {
      .segment_size = cfg.outlog_segment_size,
      .segments_kept = cfg.outlog_segments_kept,
      .max_frame = SCRATCH_SIZE,
      .max_keys = cfg.max_streams,
      .max_session_ids = cfg.outlog_max_session_ids,
      .log = cfg.log,
      .log_ctx = cfg.log_ctx,
  };
  rc = hg_outlog_open(cfg.outlog_dir != NULL ? cfg.outlog_dir : odir, &oo, &gw->outlog);
  gw->cfg.outlog_dir = NULL; /* not kept: the caller's string */
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "outbound journal: %s", hg_strerror(rc));
    free_all(gw);
    return rc;
  }
  rc = gw_tls_create(gw, cfg_in);
  if (rc != 0) {
    free_all(gw);
    return rc;
  }
  gw->cfg.tls_cert = gw->cfg.tls_key = gw->cfg.tls_client_ca = NULL; /* the caller's strings */
  gw->n_conns = cfg.max_sessions + cfg.max_unauthenticated;
  gw->conns = calloc(gw->n_conns, sizeof *gw->conns);
  gw->streams = calloc(cfg.max_streams, sizeof *gw->streams);
  gw->instr = calloc(cfg.max_instruments, sizeof *gw->instr);
  gw->drop_list = calloc(gw->n_conns, sizeof *gw->drop_list);
  gw->pend = calloc(cfg.pending_capacity, sizeof *gw->pend);
  gw->orders = calloc(cfg.max_orders, sizeof *gw->orders);
  gw->accounts = calloc(cfg.max_accounts, sizeof *gw->accounts);
  gw->positions = calloc(cfg.max_positions, sizeof *gw->positions);
  size_t arena = HG_WIRE_ARENA_SIZE(cfg.max_frame);
  gw->arena_buf = malloc(arena);
  gw->scratch = malloc(SCRATCH_SIZE);
  if (cfg.order_entry_leader != NULL) gw->hold = malloc(HOLD_BYTES);
  gw->sacc.dsp = calloc(cfg.max_instruments, sizeof *gw->sacc.dsp);
  gw->sacc.dspp = calloc(cfg.max_instruments, sizeof *gw->sacc.dspp);
  uint32_t pcap = 16;
  while (pcap < 2u * cfg.max_unauthenticated) pcap <<= 1;
  gw->peers = calloc(pcap, sizeof *gw->peers);
  gw->peers_mask = pcap - 1;
  gw->refusals = calloc(N_REFUSALS, sizeof *gw->refusals);
  bool ok = gw->conns && gw->streams && gw->instr && gw->drop_list && gw->pend && gw->orders &&
            gw->accounts && gw->positions && gw->arena_buf && gw->scratch && gw->sacc.dsp && gw->sacc.dspp &&
            (cfg.order_entry_leader == NULL || gw->hold != NULL) &&
            gw->peers && gw->refusals &&
            gw_map_init(&gw->stream_map, cfg.max_streams) == 0 &&
            gw_map_init_dense(&gw->order_map, cfg.max_orders) == 0 &&
            gw_map_init(&gw->account_map, cfg.max_accounts) == 0 &&
            gw_map_init(&gw->position_map, cfg.max_positions) == 0;
  for (uint32_t i = 0; ok && i < gw->n_conns; i++) {
    conn_t *c = &gw->conns[i];
    c->idx = i;
    c->dirty_next = i + 1 < gw->n_conns ? i + 1 : NONE32;
    c->in = malloc(cfg.max_frame + 16);
    c->out[0] = malloc(cfg.out_hard_cap);
    c->out[1] = malloc(cfg.out_hard_cap);
    if (gw->tls != NULL) c->cbuf = malloc(TLS_CBUF_SIZE);
    ok = c->in && c->out[0] && c->out[1] && (gw->tls == NULL || c->cbuf != NULL);
  }
  for (uint32_t i = 0; ok && i < cfg.max_instruments; i++) {
    gw->instr[i].subs = calloc(gw->n_conns, sizeof *gw->instr[i].subs);
    ok = gw->instr[i].subs != NULL;
  }
  if (!ok) {
    free_all(gw);
    return -ENOMEM;
  }
  hg_prefault(gw->pend, (size_t)cfg.pending_capacity * sizeof *gw->pend); /* a ring: one lap */
  hg_prefault(gw->positions, (size_t)cfg.max_positions * sizeof *gw->positions);
  gw->free_conn = 0;
  gw->dirty_head = NONE32;
  for (uint32_t i = 0; i < N_REFUSALS; i++) {
    gw->refusals[i].gw = gw;
    gw->refusals[i].next = i + 1 < N_REFUSALS ? i + 1 : NONE32;
  }
  gw->free_refusal = 0;
  Hourglass__V1__Terminate busy = HOURGLASS__V1__TERMINATE__INIT;
  busy.code = TERM(SERVER_BUSY);
  busy.text = (char *)gw_refusal_text(busy.code);
  env_t busy_env = HOURGLASS__V1__ENVELOPE__INIT;
  busy_env.body_case = B(TERMINATE);
  busy_env.terminate = &busy;
  rc = hg_wire_encode(&busy_env, gw->busy_frame, sizeof gw->busy_frame, &gw->busy_len);
  if (rc != 0) {
    free_all(gw);
    return rc;
  }
  for (uint32_t i = 0; i < cfg.max_orders; i++)
    gw->orders[i].next = i + 1 < cfg.max_orders ? i + 1 : NONE32;
  gw->free_order = 0;
  for (uint32_t i = 0; i < cfg.max_accounts; i++) gw->accounts[i].stream = NONE32;
  hg_wire_arena_init(&gw->arena, gw->arena_buf, arena);

  rc = open_loop(gw);
  if (rc != 0) {
    if (gw->loop_open) hg_gateway_destroy(gw);
    else free_all(gw);
    return rc;
  }
  atomic_store(&gw->live, 1);
  *out = gw;
  return 0;
}

void hg_gateway_notify(void *ctx) {
  hg_gateway_t *gw = ctx;
  atomic_fetch_add(&gw->notifying, 1);
  if (atomic_load(&gw->live)) uv_async_send(&gw->wake);
  atomic_fetch_sub(&gw->notifying, 1);
}

void hg_gateway_drain(void *ctx) { gw_drain(ctx); }

/* Store name of the exchange epoch (sessions table; no key's name starts
 * with 'e'). */
#define EPOCH_NAME "epoch"

/* One more than the epoch of the previous start on this key store,
 * committed before a client can be told it. */
static int bump_epoch(hg_gateway_t *gw) {
  uint64_t e = 0;
  int rc = hg_store_get_session_seq(gw->store, EPOCH_NAME, &e);
  if (rc == HG_ENOTFOUND) {
    e = 0;
    rc = 0;
  }
  if (rc == 0 && e == UINT64_MAX) {
    gw_log(gw, HG_LOG_ERROR, "key store: the stored exchange epoch is at its maximum");
    return HG_ECORRUPT;
  }
  if (rc == 0) rc = hg_store_set_session_seq(gw->store, EPOCH_NAME, e + 1);
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "key store: cannot record the exchange epoch: %s",
           hg_store_errmsg(gw->store));
    return rc;
  }
  gw->epoch = e + 1;
  gw_log(gw, HG_LOG_INFO, "exchange epoch %" PRIu64, gw->epoch);
  return 0;
}

/* For each account holding recovered orders, the lowest-numbered trader or
 * market-maker key of it among the keys with frames in the outbound journal
 * (every key that ever entered an order: each order gets a report). */
static void home_key_of(void *ctx, uint64_t key) {
  hg_gateway_t *gw = ctx;
  if (hg_outlog_next_seq(gw->outlog, key) <= 1) return;
  hg_key_record_t k;
  int rc = gw_key_load(gw, key, &k);
  hg_wipe(k.secret, sizeof k.secret);
  if (rc != 0 || (k.role != HG_ROLE_TRADER && k.role != HG_ROLE_MARKET_MAKER)) return;
  account_t *a = gw_account_find(gw, k.account);
  if (a != NULL && a->recovered && (a->home_key == 0 || key < a->home_key)) a->home_key = key;
}

/* Opens the stream of each account's home key before the pipeline's output
 * is drained, so that the reports of recovered orders (the restart's
 * SessionsEnded cancels first of all, then fills and cancels of orders that
 * rest on) are sequenced into that key's stream and its outbound journal
 * whether or not the key has logged in since the start. Owner thread,
 * before the loop runs (stream_get allocates the stream's rings). */
static void open_recovered(hg_gateway_t *gw) {
  hg_outlog_foreach_key(gw->outlog, home_key_of, gw);
  uint32_t opened = 0, keyless = 0, full = 0;
  for (uint32_t i = 0; i < gw->cfg.max_accounts; i++) {
    account_t *a = &gw->accounts[i];
    if (a->id == 0 || !a->recovered) continue;
    hg_key_record_t k;
    uint32_t si;
    if (a->home_key == 0 || gw_key_load(gw, a->home_key, &k) != 0) {
      keyless++;
    } else if (gw_stream_get(gw, &k, &si) == NULL) {
      full++;
    } else {
      opened++;
    }
    hg_wipe(k.secret, sizeof k.secret);
    a->recovered = 0;
    a->home_key = 0;
  }
  if (opened > 0)
    gw_log(gw, HG_LOG_INFO, "restart: %" PRIu32 " accounts hold recovered orders; their "
           "reports go to one stream each", opened);
  if (keyless > 0)
    gw_log(gw, HG_LOG_WARN, "restart: %" PRIu32 " accounts hold recovered orders but no "
           "trading key of theirs is in the outbound journal: those reports are not sequenced "
           "into any stream", keyless);
  if (full > 0)
    gw_log(gw, HG_LOG_ERROR, "restart: %" PRIu32 " accounts hold recovered orders but the "
           "stream table is full (max_streams %" PRIu32 "): those reports are not sequenced "
           "into any stream", full, gw->cfg.max_streams);
}

void hg_gateway_set_epoch(hg_gateway_t *gw, uint64_t epoch) { gw->epoch = epoch; }

int hg_gateway_start(hg_gateway_t *gw) {
  if (gw->pipe == NULL || gw->started) return HG_ESTATE;
  gw->loop_mode = hg_pipeline_mode(gw->pipe) == HG_PIPE_MODE_LOOP;
  /* A cluster node's epoch is the group's (hg_gateway_set_epoch). */
  int rc = gw->cfg.order_entry_leader == NULL ? bump_epoch(gw) : 0;
  if (rc != 0) return rc;
  open_recovered(gw);
  if (gw->n_scoped > 0 && gw->cfg.order_entry_leader != NULL) {
    gw_log(gw, HG_LOG_INFO,
           "cluster: %" PRIu32 " recovered session-scoped orders are cancelled by the next "
           "leader's SESSIONS_ENDED", gw->n_scoped);
  } else if (gw->n_scoped > 0) {
    /* Sequenced before anything a client can send: no new quote can meet a
     * quote of the previous process, no order a dead COD session's order. */
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = HG_COMMAND_SESSIONS_ENDED;
    if (gw_submit(gw, &cmd, P_INTERNAL, NONE32, NULL, 0, NULL) != 0) {
      gw_log(gw, HG_LOG_ERROR,
             "cannot submit SESSIONS_ENDED for %" PRIu32 " recovered session-scoped orders",
             gw->n_scoped);
      return HG_EBUSY;
    }
    gw_log(gw, HG_LOG_INFO,
           "restart: cancelling %" PRIu32
           " session-scoped orders (cancel-on-disconnect orders and quotes) of sessions "
           "that ended with the previous process",
           gw->n_scoped);
    /* Cancelled before any request is handled: the mirror forgets them
     * now, so no OrderStatus shows them live, and their reports go to the
     * account's stream (open_recovered) like any order it does not hold. */
    for (uint32_t i = 0; i < gw->cfg.max_orders && gw->n_scoped > 0; i++)
      if (gw->orders[i].order_id != 0 && gw->orders[i].scoped)
        gw_order_remove(gw, &gw->orders[i]);
  }
  if (gw->loop_mode && (rc = pipe_handles_start(gw)) != 0) return rc;
  rc = uv_timer_start(&gw->timer, on_tick, gw->cfg.tick_ms, gw->cfg.tick_ms);
  if (rc != 0) return rc;
  rc = hg_thread_start("hg-gateway", gw->cfg.rt_priority, loop_main, gw, &gw->thread);
  if (rc != 0) {
    uv_timer_stop(&gw->timer);
    return rc;
  }
  gw->started = 1;
  /* Output released before the loop ran (notify coalesced into nothing). */
  uv_async_send(&gw->wake);
  return 0;
}

int hg_gateway_sessions_ended(hg_gateway_t *gw) {
  uint32_t n = gw->n_scoped;
  if (n == 0) return 0;
  hg_command_t cmd;
  memset(&cmd, 0, sizeof cmd);
  cmd.type = HG_COMMAND_SESSIONS_ENDED;
  uint32_t r = gw_submit(gw, &cmd, P_INTERNAL, NONE32, NULL, 0, NULL);
  if (r != 0) return r == REJ(BUSY) ? HG_EBUSY : HG_EUNAVAIL;
  gw_log(gw, HG_LOG_INFO,
         "new leader: cancelling %" PRIu32 " session-scoped orders (cancel-on-disconnect "
         "orders and quotes) of the sessions that ended with the previous leader", n);
  return 0;
}

uint16_t hg_gateway_port(const hg_gateway_t *gw) { return gw->port; }

uv_loop_t *hg_gateway_loop(hg_gateway_t *gw) { return &gw->loop; }

void hg_gateway_stop(hg_gateway_t *gw) {
  if (gw == NULL || gw->stopped) return;
  gw->stopped = 1;
  /* No notify may touch the wake handle once the loop starts closing it:
   * turn notifies off and wait out any in progress first. */
  atomic_store(&gw->live, 0);
  while (atomic_load(&gw->notifying) != 0) sched_yield();
  if (gw->started) {
    uv_async_send(&gw->stop_async);
    pthread_join(gw->thread, NULL);
  }
}

void hg_gateway_destroy(hg_gateway_t *gw) {
  if (gw == NULL) return;
  hg_gateway_stop(gw);
  if (gw->loop_open) {
    /* Not started (or stopped): close whatever is still open and let the
     * close callbacks run. */
    hg_gateway_close_handles(gw);
    uv_run(&gw->loop, UV_RUN_DEFAULT);
    uv_loop_close(&gw->loop);
  }
  free_all(gw);
}

void hg_gateway_stats(const hg_gateway_t *gw, hg_gateway_stats_t *out) {
  /* Monitoring reads: relaxed, as for STAT_ADD. */
#define LD(f) atomic_load_explicit(&gw->f, memory_order_relaxed)
  out->connections = LD(st_connections);
  out->logins = LD(st_logins);
  out->login_rejects = LD(st_login_rejects);
  out->terminations = LD(st_terminations);
  out->frames_in = LD(st_frames_in);
  out->frames_out = LD(st_frames_out);
  out->submitted = LD(st_submitted);
  out->busy = LD(st_busy);
  out->throttled = LD(st_throttled);
  out->refused = LD(st_refused);
  out->tls_failures = LD(st_tls_failures);
  out->sessions = LD(st_sessions);
  out->unauthenticated = LD(st_unauth);
#undef LD
  hg_outlog_stats_t os = {0};
  if (gw->outlog != NULL) hg_outlog_stats(gw->outlog, &os);
  out->outlog_write_errors = os.write_errors;
  out->outlog_dropped = os.dropped;
  out->outlog_corrupt = os.corrupt;
  out->outlog_segments = os.segments;
  out->outlog_failing = os.last_error != 0;
}
