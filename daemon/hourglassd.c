/*
 * hourglassd - the exchange daemon: one process hosting the engine pipeline
 * (sequencer, journal, state machine, snapshots), the client gateway (when
 * built in; see GATEWAY below) and an HTTP port for health, metrics and
 * public market data.
 *
 * Threads and what each owns:
 *  - main: configuration, start-up and shutdown order, signals (all blocked
 *    in every thread and taken synchronously here with sigtimedwait, so no
 *    async-signal-safety puzzles), reload;
 *  - the pipeline's engine, journal and snapshot threads (pipeline.h);
 *  - consumer: polls the pipeline's output and feeds the market-data view
 *    (mdview.h). With the gateway built in, the gateway's loop thread is the
 *    consumer instead (it must route execution reports), and the view is fed
 *    through the gateway's tap (see GATEWAY);
 *  - http: the HTTP loop (http.h); it reads the view's published copy and
 *    seqlocks, the pipeline's counters and the health state, never the
 *    engine's memory;
 *  - synthetic (optional, synthetic.orders_per_sec > 0): a deterministic
 *    order generator for load tests and demos, submitting like a client.
 *
 * Health: "starting" -> "recovering" (the HTTP port answers 503 while the
 * journal replays) -> "ready" -> "stopping"; a journal failure turns ready
 * into "journal failed: <cause>" for good (the pipeline refuses intake).
 *
 * The data directory lock. data_dir/LOCK (created if missing, never
 * deleted) is held with flock(LOCK_EX) by every process that writes the
 * data directory: the daemon, from before it opens anything in it until it
 * exits, --scenario on its own directory, and --state-hash --repair. Each
 * writes its pid into the file. A second writer does not wait: it exits
 * with EXIT_LOCKED (4) and "data directory in use by a running hourglassd"
 * naming the directory and that pid. The kernel drops the lock when the
 * holder exits, however it exits, so a stale LOCK file never blocks a start.
 * The read-only tools take no lock and write nothing in the data directory
 * (--state-hash without --repair, the --backup-* modes, hgctl replay and
 * statement), so they may run beside the daemon.
 *
 * Tool modes (same binary, so a deploy carries its own tools):
 *   --check-config        parse the config and exit (0 ok, 2 bad);
 *   --state-hash [--upto N]
 *                         read the data directory without writing anything
 *                         (latest good snapshot + journal, or the journal
 *                         from empty up to N) and print last_seq and the
 *                         state hash; safe while the daemon runs;
 *   --state-hash --repair recover as the daemon does, writing: also cuts a
 *                         torn last journal batch (never a durable record;
 *                         hourglass/journal.h); takes the lock, so it
 *                         refuses while a daemon uses the directory;
 *   --backup-state DEST   consistent copy of the LMDB store (mdb_env_copy2,
 *                         safe while the daemon runs);
 *   --backup-keys DEST    the same for the gateway's key store (data_dir/keys);
 *   --backup-journal DEST [--max-seq N]
 *                         copies the journal records up to N (the daemon's
 *                         durable seq) into a fresh journal in DEST;
 *   --scenario month [--scenario-dir DIR]
 *                         runs a contract's whole life in simulated time on
 *                         a fresh data directory (scenario.h) and exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "daemon_config.h"
#include "daemon_log.h"
#include "hourglass/error.h"
#include "hourglass/journal.h"
#include "hourglass/pipeline.h"
#include "hourglass/thread.h"
#include "http.h"
#include "mdview.h"

#include "hourglass/gateway.h"
#include "demo.h"
#include "scenario.h"
#include "web_assets.h"

/* Appended to the start failure when threads.realtime_priority was refused. */
#define RT_HINT                                                                  \
  " hint=\"threads.realtime_priority needs root, CAP_SYS_NICE or LimitRTPRIO= (with" \
  " RestrictRealtime=no) in the unit; 0 runs without real-time scheduling\""

#ifndef HG_VERSION
#define HG_VERSION "dev"
#endif

#define EXIT_CONFIG 2
#define EXIT_START 1
#define EXIT_LOCKED 4 /* the data directory is locked by another process */

/* --------------------------------------------------------------- daemon */

typedef struct daemon {
  hg_daemon_config_t cfg; /* main thread; readers use the atomics below */
  const char *conf_path;  /* NULL: defaults only */
  char **overrides;       /* -o key=value, argv-owned */
  int noverrides;
  hg_pipeline_t *pipe;
  hg_mdview_t *view;
  hg_http_t *http;
  hg_gateway_t *gw;
  pthread_t consumer, synth, md, demo_thr;
  int consumer_running, synth_running, md_running, demo_running;
  hg_demo_t *demo;        /* --demo: owned by the demo thread while it runs */
  int demo_setup;         /* the data dir was empty: the demo lists its market */
  int32_t demo_cycle_day; /* last settled day, -1: none (demo thread once it runs) */
  _Atomic int stop_demo;
  _Atomic int stop_consumer;
  _Atomic int stop_synth;
  _Atomic uint32_t synth_rate;
  _Atomic uint64_t synth_submitted, synth_busy;
  int synth_setup;       /* setup commands the generator must send first */
  /* Set (once, by main) after pipe, view, gw and http are assigned; the
   * HTTP thread touches those pointers only after seeing it. They stay
   * valid until the HTTP thread is joined. */
  _Atomic int published;
  /* Health: the state and, when not ready, a static reason. */
  _Atomic int ready;
  _Atomic(const char *) reason;
  char fail_reason[160]; /* written once by main before reason points at it */
  _Atomic uint64_t reloads, reload_failures;
  uint64_t start_ns;
} daemon_t;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void set_health(daemon_t *d, int ready, const char *why) {
  atomic_store(&d->reason, why);
  atomic_store(&d->ready, ready);
}

/* ------------------------------------------------------------- consumer */

/*
 * Pipeline consumers. Consumer 0 is the gateway's loop (or, without the
 * gateway, consumer_main, which only drains). Consumer 1 is md_main, which
 * feeds the public market view the HTTP thread serves: applying a batch never
 * allocates and publishing never blocks (mdview.h). Consumer 2, with --demo,
 * is the demo market's thread. Each has its own ring (pipeline.h), so a slow
 * web reader or the demo never holds the gateway back.
 */
enum { CONSUMER_CLIENTS = 0, CONSUMER_MARKET = 1, CONSUMER_DEMO = 2 };

static void *md_main(void *arg) {
  daemon_t *d = arg;
  enum { BATCH = 1024 };
  static hg_pipe_out_t recs[BATCH]; /* one market-data thread */
  for (;;) {
    size_t n = hg_pipeline_poll_consumer(d->pipe, CONSUMER_MARKET, recs, BATCH);
    if (n > 0) {
      hg_mdview_apply(d->view, recs, n, now_ns());
      hg_mdview_publish(d->view);
      continue;
    }
    hg_mdview_publish(d->view); /* retries a publish a busy reader deferred */
    if (atomic_load(&d->stop_consumer)) break;
    hg_pipeline_wait_consumer(d->pipe, CONSUMER_MARKET, 50 * 1000000LL);
  }
  return NULL;
}

/* The daemon's consumer: without the gateway, for the whole run; with it,
 * only while hg_pipeline_stop() drains after the gateway has stopped. */
static void *consumer_main(void *arg) {
  daemon_t *d = arg;
  enum { BATCH = 1024 };
  static hg_pipe_out_t recs[BATCH]; /* one consumer thread */
  for (;;) {
    if (hg_pipeline_poll(d->pipe, recs, BATCH) > 0) continue;
    if (atomic_load(&d->stop_consumer)) break;
    hg_pipeline_wait(d->pipe, 50 * 1000000LL);
  }
  return NULL;
}

/* ----------------------------------------------------------------- demo */

static void hex(const uint8_t *h, size_t n, char *out);

#define DEMO_ORIGIN (UINT64_C(0xde) << 56)
#define DEMO_STEP_NS 250000000LL
/* How often the demo looks for a daily cycle to run. A cycle settles day D
 * only from D 16:00 UTC on and only once, so on wall-clock time there is at
 * most one a day: the first look (after the first quotes, so the DSP is
 * their midpoint) settles the latest day whose 16:00 has passed, later
 * looks catch each 16:00 within this period. */
#define DEMO_CYCLE_CHECK_NS 10000000000LL

/* Submits n commands, waiting while the inbound ring is full. 0, or the
 * first hard error (the pipeline stopping). */
static int demo_submit(daemon_t *d, hg_command_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int rc;
    while ((rc = hg_pipeline_submit(d->pipe, DEMO_ORIGIN, &c[i])) == HG_EBUSY) {
      if (atomic_load(&d->stop_demo)) return rc;
      nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

/* The demo thread: sets the market up (first run on an empty data dir),
 * then every quarter second moves the makers' quotes and lets the hedgers
 * trade, learning its order ids from its own consumer ring. */
static void *demo_main(void *arg) {
  daemon_t *d = arg;
  enum { CAP = 2048 };
  static hg_command_t cmds[CAP];     /* demo thread only */
  static hg_pipe_out_t recs[1024];
  size_t n;
  if (d->demo_setup) {
    n = hg_demo_setup(d->demo, cmds, CAP);
  } else {
    /* A restart: the makers' old quotes are unknown to this run; pull them. */
    n = 0;
    for (uint32_t m = 0; m < HG_DEMO_MAKERS; m++) {
      memset(&cmds[n], 0, sizeof cmds[n]);
      cmds[n].type = HG_COMMAND_MASS_CANCEL;
      cmds[n].u.mass_cancel.account = HG_DEMO_MAKER_ACCOUNT(m);
      cmds[n].u.mass_cancel.sides = HG_SIDES_BOTH;
      n++;
    }
  }
  if (demo_submit(d, cmds, n) != 0) return NULL;
  uint64_t next_cycle_check = 0; /* right after the first step */
  while (!atomic_load(&d->stop_demo)) {
    uint64_t until = now_ns() + DEMO_STEP_NS;
    for (;;) {
      size_t k = hg_pipeline_poll_consumer(d->pipe, CONSUMER_DEMO, recs, 1024);
      for (size_t i = 0; i < k; i++) hg_demo_observe(d->demo, &recs[i]);
      uint64_t t = now_ns();
      if (k == 0 && t >= until) break;
      if (k == 0) hg_pipeline_wait_consumer(d->pipe, CONSUMER_DEMO, (int64_t)(until - t));
      if (atomic_load(&d->stop_demo)) return NULL;
    }
    n = hg_demo_step(d->demo, cmds, CAP);
    uint64_t t = now_ns();
    if (t >= next_cycle_check && n < CAP) {
      next_cycle_check = t + DEMO_CYCLE_CHECK_NS;
      int32_t day = hg_demo_daily_settlement(t, d->demo_cycle_day, &cmds[n]);
      if (day != d->demo_cycle_day) {
        d->demo_cycle_day = day;
        n++;
      }
    }
    if (demo_submit(d, cmds, n) != 0) return NULL;
  }
  return NULL;
}

/* Demo API keys, new random secrets at every start, printed once on stdout
 * (a demo convenience: never logged). */
static int demo_keys(daemon_t *d) {
  static const struct {
    uint64_t id;
    uint32_t role, account, firm;
    const char *what;
  } keys[] = {
      {HG_DEMO_USER_ACCOUNT, HG_ROLE_TRADER, HG_DEMO_USER_ACCOUNT, 300, "trader, account 3001"},
      {HG_DEMO_USER_ACCOUNT + 1, HG_ROLE_RISK_VIEWER, 0, 300, "risk viewer, firm 300"},
      {1, HG_ROLE_OPERATOR, 0, 0, "operator"},
  };
  printf("\nDemo market: %d monthly B200 grade-A contracts (%s .. %s), two market makers\n"
         "quoting, two inference producers hedging. API keys (new at every start):\n",
         HG_DEMO_MONTHS, hg_demo_instruments(d->demo)[0].symbol,
         hg_demo_instruments(d->demo)[HG_DEMO_MONTHS - 1].symbol);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    uint8_t secret[32];
    if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret) return -EIO;
    hg_gateway_key_t k = {.key_id = keys[i].id, .role = keys[i].role, .account = keys[i].account,
                          .firm = keys[i].firm, .secret = secret, .secret_len = sizeof secret};
    int rc = hg_gateway_add_key(d->gw, &k, 1);
    if (rc != 0) return rc;
    char hx[2 * sizeof secret + 1];
    hex(secret, sizeof secret, hx);
    printf("  %-22s export HG_KEY_ID=%llu HG_SECRET=%s\n", keys[i].what,
           (unsigned long long)keys[i].id, hx);
  }
  fflush(stdout);
  return 0;
}

/* The demo's addresses as the listeners really have them (an ephemeral
 * port included), printed once both listen. */
static void demo_addresses(daemon_t *d) {
  unsigned gw = hg_gateway_port(d->gw), http = hg_http_port(d->http);
  printf("Order entry: %s:%u   (hgctl and the Python client: export HG_HOST=%s HG_PORT=%u)\n"
         "Market page: http://%s:%u/\n"
         "Then: hgctl instruments; hgctl ladder %s; hgctl order new --help\n\n",
         d->cfg.order_entry.host, gw, d->cfg.order_entry.host, gw, d->cfg.http.host, http,
         hg_demo_instruments(d->demo)[0].symbol);
  fflush(stdout);
}

/* ------------------------------------------------------------ synthetic */

#define SYN_INSTRUMENT 1u

static int synth_submit(daemon_t *d, uint64_t origin, const hg_command_t *c) {
  for (;;) {
    int rc = hg_pipeline_submit(d->pipe, origin, c);
    if (rc != HG_EBUSY) return rc;
    /* relaxed: a statistic. */
    atomic_fetch_add_explicit(&d->synth_busy, 1, memory_order_relaxed);
    if (atomic_load(&d->stop_synth)) return rc;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

static void synth_order(uint64_t i, hg_command_t *c) {
  memset(c, 0, sizeof *c);
  if (i % 64 == 63) {
    c->type = HG_COMMAND_MASS_CANCEL;
    c->u.mass_cancel.instrument_id = SYN_INSTRUMENT;
    c->u.mass_cancel.account = (hg_account_t)(1 + (i / 64) % 2);
    c->u.mass_cancel.sides = HG_SIDES_BOTH;
    return;
  }
  hg_cmd_new_order_t *o = &c->u.new_order;
  c->type = HG_COMMAND_NEW_ORDER;
  o->instrument_id = SYN_INSTRUMENT;
  /* Each account alternates buying and selling, so positions stay small
   * (far from the position limit). */
  o->side = (uint8_t)(i % 2);
  o->account = (hg_account_t)(1 + ((i >> 1) & 1));
  o->client_order_id = i + 1;
  o->price = 1000 + (int64_t)((i * 7) % 9) - 4;
  o->qty = 1 + (int64_t)(i % 4);
  o->type = HG_ORD_LIMIT;
  o->tif = HG_TIF_GTC;
}

static void *synth_main(void *arg) {
  daemon_t *d = arg;
  hg_command_t c;
  if (d->synth_setup & 1) {
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_LIST_INSTRUMENT;
    snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "SYN.T.2099-12");
    hg_book_params_t *bp = &c.u.list.params;
    bp->instrument_id = SYN_INSTRUMENT;
    bp->tick_size = 1000;
    bp->contract_unit = 1000;
    bp->min_price = 1;
    bp->max_price = 100000;
    bp->max_order_qty = 1000;
    bp->ref_price = 1000; /* the generator trades around 1000 ticks */
    bp->max_orders = d->cfg.max_book_orders < 65536 ? d->cfg.max_book_orders : 65536;
    bp->max_accounts = d->cfg.max_accounts < 16 ? d->cfg.max_accounts : 16;
    synth_submit(d, 0, &c);
  }
  for (uint32_t a = 1; a <= 2; a++) {
    if (!(d->synth_setup & (1 << a))) continue;
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_ADD_ACCOUNT;
    c.u.add_account.account = a;
    c.u.add_account.firm = a;
    synth_submit(d, 0, &c);
    /* Enough collateral that the pre-trade margin check never binds. */
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_DEPOSIT;
    c.u.cash.account = a;
    c.u.cash.amount = INT64_C(1000000000) * 1000000; /* 1e9 USD */
    synth_submit(d, 0, &c);
  }
  uint64_t i = 0, next = now_ns();
  while (!atomic_load(&d->stop_synth)) {
    uint32_t rate = atomic_load(&d->synth_rate);
    uint64_t t = now_ns();
    if (rate == 0) {
      struct timespec ts = {0, 100000000};
      nanosleep(&ts, NULL);
      next = now_ns();
      continue;
    }
    /* Catch up on what is due, at most 1000 commands per wake-up. */
    uint64_t step = 1000000000u / rate;
    for (int k = 0; k < 1000 && next <= t && !atomic_load(&d->stop_synth); k++, i++) {
      synth_order(i, &c);
      if (synth_submit(d, 0, &c) != 0) break;
      /* relaxed: a statistic. */
      atomic_fetch_add_explicit(&d->synth_submitted, 1, memory_order_relaxed);
      next += step;
    }
    if (next < t) next = t; /* do not bank a backlog after a stall */
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* ----------------------------------------------------------------- HTTP */

static long query_u32(const char *query, const char *name) {
  size_t nl = strlen(name);
  for (const char *q = query; q && *q;) {
    if (strncmp(q, name, nl) == 0 && q[nl] == '=') {
      char *end;
      unsigned long v = strtoul(q + nl + 1, &end, 10);
      if (end == q + nl + 1 || (*end != '\0' && *end != '&') || v == 0 || v > UINT32_MAX)
        return -1;
      return (long)v;
    }
    q = strchr(q, '&');
    if (q) q++;
  }
  return -1;
}

static void health(daemon_t *d, hg_http_response_t *r) {
  hg_pipeline_stats_t st = {0};
  int ready = atomic_load(&d->ready);
  if (ready && atomic_load(&d->published)) hg_pipeline_stats(d->pipe, &st);
  r->content_type = "application/json";
  if (ready) {
    hg_sbuf_printf(&r->body,
                   "{\"status\":\"ready\",\"last_seq\":%" PRIu64 ",\"durable_seq\":%" PRIu64
                   ",\"version\":",
                   st.last_seq, st.durable_seq);
  } else {
    r->status = 503;
    hg_sbuf_puts(&r->body, "{\"status\":\"not ready\",\"reason\":");
    hg_sbuf_json_str(&r->body, atomic_load(&d->reason));
    hg_sbuf_puts(&r->body, ",\"version\":");
  }
  hg_sbuf_json_str(&r->body, HG_VERSION);
  hg_sbuf_puts(&r->body, "}\n");
}

static void metric(hg_sbuf_t *b, const char *name, const char *type, const char *help,
                   uint64_t v) {
  hg_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name, type, name,
                 v);
}

static void metrics(daemon_t *d, hg_http_response_t *r) {
  hg_sbuf_t *b = &r->body;
  r->content_type = "text/plain; version=0.0.4; charset=utf-8";
  hg_pipeline_stats_t st = {0};
  int ready = atomic_load(&d->ready);
  int pub = atomic_load(&d->published);
  if (pub) hg_pipeline_stats(d->pipe, &st);
  hg_sbuf_printf(b, "# HELP hourglass_build_info Version of the running daemon.\n"
                    "# TYPE hourglass_build_info gauge\nhourglass_build_info{version=\"%s\"} 1\n",
                 HG_VERSION);
  metric(b, "hourglass_ready", "gauge", "1 when /health answers 200.", (uint64_t)ready);
  metric(b, "hourglass_uptime_seconds", "gauge", "Seconds since start.",
         (now_ns() - d->start_ns) / 1000000000u);
  metric(b, "hourglass_commands_total", "counter", "Commands sequenced since start.", st.commands);
  metric(b, "hourglass_last_seq", "gauge", "Seq of the last sequenced command.", st.last_seq);
  metric(b, "hourglass_durable_seq", "gauge", "Journal durable up to this seq.", st.durable_seq);
  metric(b, "hourglass_durable_lag", "gauge", "last_seq - durable_seq: commands awaiting fsync.",
         st.last_seq >= st.durable_seq ? st.last_seq - st.durable_seq : 0);
  metric(b, "hourglass_released_seq", "gauge", "Events released to consumers up to this seq.",
         st.released_seq);
  metric(b, "hourglass_snapshots_total", "counter", "Snapshots written since start.",
         st.snapshots);
  metric(b, "hourglass_replayed_commands", "gauge", "Commands replayed by the last recovery.",
         st.replayed);
  metric(b, "hourglass_busy_rejects_total", "counter",
         "Submits refused because the inbound ring was full.", st.busy_rejects);
  metric(b, "hourglass_journal_failed", "gauge", "1 once the journal failed (intake stopped).",
         pub ? (uint64_t)(hg_pipeline_failed(d->pipe) != 0) : 0);
  metric(b, "hourglass_config_reloads_total", "counter", "SIGHUP reloads applied.",
         atomic_load(&d->reloads));
  metric(b, "hourglass_config_reload_failures_total", "counter", "SIGHUP reloads refused.",
         atomic_load(&d->reload_failures));
  uint64_t sessions = 0;
  if (pub && d->gw != NULL) {
    hg_gateway_stats_t gs;
    hg_gateway_stats(d->gw, &gs);
    sessions = gs.sessions;
    metric(b, "hourglass_gateway_connections_total", "counter", "Connections accepted.",
           gs.connections);
    metric(b, "hourglass_gateway_logins_total", "counter", "Successful logins.", gs.logins);
    metric(b, "hourglass_gateway_login_rejects_total", "counter", "Refused logins.",
           gs.login_rejects);
    metric(b, "hourglass_gateway_frames_in_total", "counter", "Frames received.", gs.frames_in);
    metric(b, "hourglass_gateway_frames_out_total", "counter", "Frames sent.", gs.frames_out);
    metric(b, "hourglass_gateway_throttled_total", "counter", "Requests throttled.",
           gs.throttled);
    metric(b, "hourglass_gateway_busy_total", "counter", "Submits refused as busy.", gs.busy);
    metric(b, "hourglass_gateway_refused_total", "counter",
           "Connections refused at accept: too many awaiting login (per address or in all).",
           gs.refused);
    metric(b, "hourglass_gateway_outlog_write_errors_total", "counter",
           "Failed writes to the outbound journal (e.g. disk full).", gs.outlog_write_errors);
    metric(b, "hourglass_gateway_outlog_dropped_total", "counter",
           "Outbound journal records never written.", gs.outlog_dropped);
    metric(b, "hourglass_gateway_outlog_corrupt_total", "counter",
           "Bad outbound journal records met.", gs.outlog_corrupt);
    metric(b, "hourglass_gateway_outlog_segments", "gauge", "Outbound journal segments on disk.",
           gs.outlog_segments);
    metric(b, "hourglass_gateway_outlog_failing", "gauge",
           "1 while writes to the outbound journal fail.", (uint64_t)gs.outlog_failing);
  }
  metric(b, "hourglass_sessions", "gauge", "Logged-in client sessions.", sessions);
  if (pub) {
    metric(b, "hourglass_events_total", "counter", "Pipeline records consumed by the daemon.",
           hg_mdview_records(d->view));
    hg_md_latency_t lat;
    hg_mdview_latency(d->view, &lat);
    hg_sbuf_puts(b, "# HELP hourglass_release_latency_seconds Sequencer stamp to events "
                    "consumed (includes the journal fsync in durable mode).\n"
                    "# TYPE hourglass_release_latency_seconds histogram\n");
    for (size_t i = 0; i < HG_MD_LAT_BUCKETS; i++)
      hg_sbuf_printf(b, "hourglass_release_latency_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
                     (double)hg_md_lat_bounds_ns[i] / 1e9, lat.bucket[i]);
    hg_sbuf_printf(b,
                   "hourglass_release_latency_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
                   "hourglass_release_latency_seconds_sum %.9f\n"
                   "hourglass_release_latency_seconds_count %" PRIu64 "\n",
                   lat.bucket[HG_MD_LAT_BUCKETS], (double)lat.sum_ns / 1e9, lat.count);
    enum { MAXI = 1024 };
    hg_md_instrument_t *ins = malloc(MAXI * sizeof *ins);
    size_t n = ins ? hg_mdview_instruments(d->view, ins, MAXI) : 0;
    if (ins == NULL) b->oom = 1;
    if (n > MAXI) n = MAXI;
    static const struct {
      const char *name, *type, *help;
      size_t off;
    } per[] = {
        {"hourglass_instrument_trades_total", "counter", "Trades since start.",
         offsetof(hg_md_instrument_t, trades)},
        {"hourglass_instrument_volume_total", "counter", "Contracts traded since start.",
         offsetof(hg_md_instrument_t, volume)},
        {"hourglass_instrument_orders_total", "counter", "Orders accepted since start.",
         offsetof(hg_md_instrument_t, orders)},
        {"hourglass_instrument_cancels_total", "counter", "Orders cancelled since start.",
         offsetof(hg_md_instrument_t, cancels)},
    };
    for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
      hg_sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", per[k].name, per[k].help, per[k].name,
                     per[k].type);
      for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&ins[i] + per[k].off, sizeof v);
        hg_sbuf_printf(b, "%s{instrument=\"%s\",id=\"%u\"} %" PRIu64 "\n", per[k].name,
                       ins[i].symbol, ins[i].id, v);
      }
    }
    hg_sbuf_puts(b, "# HELP hourglass_instrument_halted 1 while halted.\n"
                    "# TYPE hourglass_instrument_halted gauge\n");
    for (size_t i = 0; i < n; i++)
      if (ins[i].listed)
        hg_sbuf_printf(b, "hourglass_instrument_halted{instrument=\"%s\",id=\"%u\"} %u\n",
                       ins[i].symbol, ins[i].id, ins[i].halted);
    free(ins);
  }
  if (pub) {
    hg_http_stats_t hs;
    hg_http_stats(d->http, &hs);
    metric(b, "hourglass_http_requests_total", "counter", "HTTP requests.", hs.requests);
    metric(b, "hourglass_http_bad_requests_total", "counter", "HTTP requests refused as bad.",
           hs.bad_requests);
    metric(b, "hourglass_http_connections", "gauge", "Open HTTP connections.", hs.open);
  }
  metric(b, "hourglass_synthetic_submitted_total", "counter", "Synthetic orders submitted.",
         atomic_load(&d->synth_submitted));
}

static void json_instrument(hg_sbuf_t *b, const hg_md_instrument_t *in, const hg_tob_t *t) {
  hg_sbuf_printf(b, "{\"id\":%u,\"symbol\":", in->id);
  hg_sbuf_json_str(b, in->symbol);
  hg_sbuf_printf(b,
                 ",\"listed\":%s,\"halted\":%s,\"tick_size\":%" PRId64 ",\"contract_unit\":%" PRId64
                 ",\"min_price\":%" PRId64 ",\"max_price\":%" PRId64 ",\"seq\":%" PRIu64
                 ",\"trades\":%" PRIu64 ",\"volume\":%" PRIu64 ",\"last_price\":%" PRId64
                 ",\"last_qty\":%" PRId64,
                 in->listed ? "true" : "false", in->halted ? "true" : "false", in->tick_size,
                 in->contract_unit, in->min_price, in->max_price, in->seq, in->trades, in->volume,
                 in->last_price, in->last_qty);
  if (in->dsp > 0) hg_sbuf_printf(b, ",\"dsp\":%" PRId64, in->dsp);
  if (t != NULL) {
    hg_sbuf_puts(b, ",\"bid\":");
    if (t->bid_qty > 0)
      hg_sbuf_printf(b, "{\"price\":%" PRId64 ",\"qty\":%" PRId64 "}", t->bid_px, t->bid_qty);
    else
      hg_sbuf_puts(b, "null");
    hg_sbuf_puts(b, ",\"ask\":");
    if (t->ask_qty > 0)
      hg_sbuf_printf(b, "{\"price\":%" PRId64 ",\"qty\":%" PRId64 "}", t->ask_px, t->ask_qty);
    else
      hg_sbuf_puts(b, "null");
  }
  hg_sbuf_puts(b, "}");
}

static void levels(hg_sbuf_t *b, const hg_md_level_t *l, size_t n) {
  hg_sbuf_puts(b, "[");
  for (size_t i = 0; i < n; i++)
    hg_sbuf_printf(b, "%s[%" PRId64 ",%" PRId64 "]", i ? "," : "", l[i].price, l[i].qty);
  hg_sbuf_puts(b, "]");
}

static void not_found(hg_http_response_t *r, const char *msg) {
  r->status = 404;
  r->content_type = "application/json";
  hg_sbuf_puts(&r->body, "{\"error\":");
  hg_sbuf_json_str(&r->body, msg);
  hg_sbuf_puts(&r->body, "}\n");
}

/* The value of query parameter `name` (up to '&'), copied into out[cap]; 0,
 * or -1 when absent, empty or too long. */
static int query_str(const char *query, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  for (const char *q = query; q && *q;) {
    if (strncmp(q, name, nl) == 0 && q[nl] == '=') {
      size_t len = strcspn(q + nl + 1, "&");
      if (len == 0 || len >= cap) return -1;
      memcpy(out, q + nl + 1, len);
      out[len] = '\0';
      return 0;
    }
    q = strchr(q, '&');
    if (q) q++;
  }
  return -1;
}

/* /api/v1/fixings: the kept fixings, oldest day first, each with the counts
 * of its receipt and, when the exchange keeps one (computed fixings), the
 * address of /api/v1/fixings/receipt?index=GPU.GRADE&day=YYYY-MM-DD, which
 * answers that one fixing with its receipt (404 when there is none). */
static void fixings(daemon_t *d, int receipt, const char *query, hg_http_response_t *r) {
  static _Thread_local hg_md_fixing_t fx[HG_MD_FIXINGS];
  static const char *const status[] = {"", "PROVISIONAL", "FINAL", "NO_FIX"};
  static const char *const kind[] = {"", "computed", "carried", "external"};
  hg_sbuf_t *b = &r->body;
  char want_index[2 * HG_INDEX_GPU_MAX + HG_INDEX_GRADE_MAX], want_day[16];
  if (receipt && (query_str(query, "index", want_index, sizeof want_index) != 0 ||
                  query_str(query, "day", want_day, sizeof want_day) != 0)) {
    r->status = 400;
    hg_sbuf_puts(b, "{\"error\":\"expected ?index=<GPU.GRADE>&day=<YYYY-MM-DD>\"}\n");
    return;
  }
  size_t n = hg_mdview_fixings(d->view, fx, HG_MD_FIXINGS), shown = 0;
  if (!receipt) hg_sbuf_printf(b, "{\"available\":%s,\"fixings\":[", n ? "true" : "false");
  for (size_t i = 0; i < n; i++) {
    /* day number -> civil date (UTC) */
    time_t t = (time_t)fx[i].day * 86400;
    struct tm tm;
    gmtime_r(&t, &tm);
    char index[2 * HG_INDEX_GPU_MAX + HG_INDEX_GRADE_MAX], day[16];
    snprintf(index, sizeof index, "%s.%s", fx[i].gpu, fx[i].grade);
    snprintf(day, sizeof day, "%04d-%02d-%02d", (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
             tm.tm_mday % 100);
    int has_receipt = fx[i].providers > 0;
    if (receipt && (strcmp(index, want_index) != 0 || strcmp(day, want_day) != 0 || !has_receipt))
      continue;
    hg_sbuf_printf(b,
                   "%s{\"index\":\"IGX %s\",\"day\":\"%s\",\"value_micro_usd\":%" PRId64
                   ",\"tier\":%u,\"status\":\"%s\",\"source\":\"%s\",\"inputs\":%" PRIu64,
                   shown++ ? "," : "", index, day, fx[i].value, fx[i].tier,
                   fx[i].status < 4 ? status[fx[i].status] : "",
                   fx[i].kind < 4 ? kind[fx[i].kind] : "", fx[i].inputs);
    if (has_receipt) {
      hg_sbuf_printf(b, ",\"providers\":%u,\"hours\":%u", fx[i].providers, fx[i].hours);
      if (receipt)
        hg_sbuf_printf(b, ",\"used\":%u,\"volume_gpu_hours\":%" PRId64, fx[i].used,
                       fx[i].volume);
      else
        hg_sbuf_printf(b, ",\"receipt\":\"/api/v1/fixings/receipt?index=%s&day=%s\"", index, day);
    }
    hg_sbuf_puts(b, "}");
    if (receipt) break;
  }
  if (!receipt) {
    hg_sbuf_puts(b, "]}\n");
  } else if (shown == 0) {
    not_found(r, "no receipt kept for that index and day");
  } else {
    hg_sbuf_puts(b, "\n");
  }
}

static void market(daemon_t *d, const char *path, const char *query, hg_http_response_t *r) {
  r->content_type = "application/json";
  hg_sbuf_t *b = &r->body;
  if (strcmp(path, "/api/v1/instruments") == 0) {
    enum { MAXI = 1024 };
    hg_md_instrument_t *ins = malloc(MAXI * sizeof *ins);
    if (ins == NULL) {
      b->oom = 1;
      return;
    }
    size_t n = hg_mdview_instruments(d->view, ins, MAXI);
    if (n > MAXI) n = MAXI;
    hg_sbuf_puts(b, "{\"instruments\":[");
    for (size_t i = 0; i < n; i++) {
      hg_tob_t t;
      if (i) hg_sbuf_puts(b, ",");
      json_instrument(b, &ins[i], hg_mdview_tob(d->view, ins[i].id, &t) == 0 ? &t : NULL);
    }
    hg_sbuf_puts(b, "]}\n");
    free(ins);
    return;
  }
  if (strcmp(path, "/api/v1/fixings") == 0 || strcmp(path, "/api/v1/fixings/receipt") == 0) {
    fixings(d, strcmp(path, "/api/v1/fixings") != 0, query, r);
    return;
  }
  long id = query_u32(query, "instrument");
  if (id < 0) {
    r->status = 400;
    hg_sbuf_puts(b, "{\"error\":\"expected ?instrument=<id>\"}\n");
    return;
  }
  if (strcmp(path, "/api/v1/tob") == 0) {
    hg_tob_t t;
    if (hg_mdview_tob(d->view, (uint32_t)id, &t) != 0) {
      not_found(r, "unknown instrument");
      return;
    }
    hg_sbuf_printf(b,
                   "{\"instrument\":%ld,\"seq\":%" PRIu64 ",\"bid\":[%" PRId64 ",%" PRId64
                   "],\"ask\":[%" PRId64 ",%" PRId64 "],\"last\":[%" PRId64 ",%" PRId64 "]}\n",
                   id, t.version, t.bid_px, t.bid_qty, t.ask_px, t.ask_qty, t.last_px,
                   t.last_qty);
    return;
  }
  uint32_t depth = hg_mdview_depth(d->view), tcap = hg_mdview_trade_cap(d->view);
  hg_md_level_t *bids = malloc(depth * sizeof *bids), *asks = malloc(depth * sizeof *asks);
  hg_md_trade_t *trades = malloc(tcap * sizeof *trades);
  size_t nb = 0, na = 0, nt = 0;
  hg_md_instrument_t in;
  if (bids == NULL || asks == NULL || trades == NULL) {
    b->oom = 1;
  } else if (hg_mdview_book(d->view, (uint32_t)id, &in, bids, &nb, asks, &na, trades, &nt) != 0) {
    not_found(r, "unknown instrument");
  } else if (strcmp(path, "/api/v1/book") == 0) {
    hg_sbuf_printf(b, "{\"instrument\":%u,\"symbol\":", in.id);
    hg_sbuf_json_str(b, in.symbol);
    hg_sbuf_printf(b, ",\"seq\":%" PRIu64 ",\"truncated\":%s,\"bids\":", in.seq,
                   in.depth_truncated ? "true" : "false");
    levels(b, bids, nb);
    hg_sbuf_puts(b, ",\"asks\":");
    levels(b, asks, na);
    hg_sbuf_puts(b, "}\n");
  } else if (strcmp(path, "/api/v1/trades") == 0) {
    hg_sbuf_printf(b, "{\"instrument\":%u,\"trades\":[", in.id);
    for (size_t i = 0; i < nt; i++)
      hg_sbuf_printf(b,
                     "%s{\"seq\":%" PRIu64 ",\"ts\":%" PRIu64 ",\"price\":%" PRId64
                     ",\"qty\":%" PRId64 ",\"aggressor\":\"%s\"}",
                     i ? "," : "", trades[i].seq, trades[i].ts, trades[i].price, trades[i].qty,
                     trades[i].aggressor == HG_SIDE_BUY ? "buy" : "sell");
    hg_sbuf_puts(b, "]}\n");
  } else {
    not_found(r, "no such endpoint");
  }
  free(bids);
  free(asks);
  free(trades);
}

static void http_handler(void *ctx, const char *path, const char *query, hg_http_response_t *r) {
  daemon_t *d = ctx;
  if (strcmp(path, "/health") == 0) {
      health(d, r);
      return;
    }
  if (strcmp(path, "/metrics") == 0) {
      metrics(d, r);
      return;
    }
  if (strncmp(path, "/api/v1/", 8) == 0) {
    if (!atomic_load(&d->published)) {
      r->status = 503;
      r->content_type = "application/json";
      hg_sbuf_puts(&r->body, "{\"error\":\"starting\"}\n");
      return;
    }
    {
      market(d, path, query, r);
      return;
    }
  }
  /* The market web page (daemon/web, compiled in): public data only. */
  const hg_web_asset_t *asset = hg_web_asset_find(path);
  if (asset != NULL) {
    r->content_type = asset->content_type;
    hg_sbuf_put(&r->body, asset->data, asset->len);
    return;
  }
  r->status = 404;
  hg_sbuf_puts(&r->body, "not found\n");
}

/* ----------------------------------------------------------- configuration */

static int load_config(const char *path, char **ovr, int novr, hg_daemon_config_t *cfg) {
  hg_dcfg_error_t err;
  hg_daemon_config_defaults(cfg);
  if (path != NULL && hg_daemon_config_load(cfg, path, &err) != 0) {
    hg_dlog(HG_LOG_ERROR, "config", "bad configuration", "file=%s line=%u key=%s reason=\"%s\"",
            path, err.line, err.key[0] ? err.key : "-", err.reason);
    return -1;
  }
  for (int i = 0; i < novr; i++) {
    if (hg_daemon_config_parse(cfg, ovr[i], strlen(ovr[i]), &err) != 0) {
      hg_dlog(HG_LOG_ERROR, "config", "bad configuration", "option=-o index=%d key=%s reason=\"%s\"",
              i + 1, err.key[0] ? err.key : "-", err.reason);
      return -1;
    }
  }
  if (hg_daemon_config_check(cfg, &err) != 0) {
    hg_dlog(HG_LOG_ERROR, "config", "bad configuration", "key=%s reason=\"%s\"", err.key,
            err.reason);
    return -1;
  }
  return 0;
}

typedef struct reload_ctx {
  daemon_t *d;
  const hg_daemon_config_t *next;
  int applied, skipped;
} reload_ctx_t;

static void reload_key(void *ctx, const char *key, int reloadable) {
  reload_ctx_t *r = ctx;
  if (!reloadable) {
    hg_dlog(HG_LOG_WARN, "config", "changed key not applied: restart required", "key=%s", key);
    r->skipped++;
    return;
  }
  r->applied++;
  hg_dlog(HG_LOG_INFO, "config", "applied changed key", "key=%s", key);
}

static void reload(daemon_t *d) {
  hg_daemon_config_t next;
  if (load_config(d->conf_path, d->overrides, d->noverrides, &next) != 0) {
    atomic_fetch_add(&d->reload_failures, 1);
    hg_dlog(HG_LOG_ERROR, "config", "reload refused; running configuration unchanged", NULL);
    return;
  }
  reload_ctx_t r = {d, &next, 0, 0};
  hg_daemon_config_diff(&d->cfg, &next, reload_key, &r);
  /* Apply the reloadable keys; keep the running value of every other key so
   * that later diffs keep reporting them. */
  d->cfg.synthetic_rate = next.synthetic_rate;
  atomic_store(&d->synth_rate, d->synth_running ? next.synthetic_rate : 0);
  if (next.synthetic_rate > 0 && !d->synth_running)
    hg_dlog(HG_LOG_WARN, "config", "synthetic load was off at start; restart to enable it", NULL);
  d->cfg.http_keepalive = next.http_keepalive;
  d->cfg.http_idle_ms = next.http_idle_ms;
  if (d->http) hg_http_set_keepalive(d->http, next.http_keepalive, next.http_idle_ms);
  atomic_fetch_add(&d->reloads, 1);
  /* warn: a configuration change is worth seeing at any level. */
  hg_dlog(HG_LOG_WARN, "config", "reloaded", "applied=%d not_applied=%d", r.applied, r.skipped);
  /* Last, so that the lines above are written at the level they were
   * asked under. */
  d->cfg.log_level = next.log_level;
  hg_dlog_set_level(next.log_level);
}

/* ------------------------------------------------------------------ tools */

static void hex(const uint8_t *h, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", h[i]);
}

static void null_sink(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

/* -------------------------------------------------------- data dir lock */

/* Where the data directory lives: the mount point of its filesystem (from
 * /proc/self/mountinfo, matched by device number) into mnt, "?" if unknown. */
static void mount_point(const char *dir, char *mnt, size_t cap) {
  snprintf(mnt, cap, "?");
  struct stat st;
  if (stat(dir, &st) != 0) return;
  FILE *f = fopen("/proc/self/mountinfo", "r");
  if (f == NULL) return;
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned maj, min;
    char point[512];
    /* id parent major:minor root mount-point ... */
    if (sscanf(line, "%*u %*u %u:%u %*s %511s", &maj, &min, point) != 3) continue;
    if (makedev(maj, min) == st.st_dev) snprintf(mnt, cap, "%s", point); /* the last one wins */
  }
  fclose(f);
}

/* A write failed for want of space: names the disk holding the data
 * directory, whatever file the failing write was for (a key store, the
 * journal, the lock). Returns 1 when rc is such an error (and logged). */
static int disk_full(const char *data_dir, int rc) {
  if (rc != -ENOSPC && rc != -EDQUOT) return 0;
  char mnt[512];
  mount_point(data_dir, mnt, sizeof mnt);
  struct statvfs vs;
  unsigned long long avail = 0;
  if (statvfs(data_dir, &vs) == 0) avail = (unsigned long long)vs.f_bavail * vs.f_frsize;
  hg_dlog(HG_LOG_ERROR, "daemon",
          rc == -ENOSPC ? "no space left on the disk holding the data directory"
                        : "disk quota exceeded on the disk holding the data directory",
          "data_dir=%s mount=%s available_bytes=%llu err=%s", data_dir, mnt, avail,
          hg_strerror(rc));
  return 1;
}

/*
 * Takes data_dir/LOCK (see the top of this file) for the rest of the
 * process's life and writes the pid into it. Returns 0; EXIT_LOCKED when
 * another process holds it; EXIT_START when the file cannot be had or
 * written. Every failure is logged. The descriptor is deliberately never
 * closed: closing it would drop the lock.
 */
static int lock_data_dir(const char *data_dir) {
  char path[HG_DCFG_PATH_MAX + 8];
  snprintf(path, sizeof path, "%s/LOCK", data_dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    int rc = -errno;
    if (!disk_full(data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "daemon", "cannot open the data directory's lock file",
              "file=%s err=%s", path, hg_strerror(rc));
    return EXIT_START;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      char pid[24] = "";
      ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
      pid[n > 0 ? n : 0] = '\0';
      pid[strcspn(pid, "\n")] = '\0';
      hg_dlog(HG_LOG_ERROR, "daemon",
              "data directory in use by a running hourglassd; stop it first (or use a "
              "read-only tool)",
              "data_dir=%s pid=%s lock=%s", data_dir, pid[0] ? pid : "?", path);
      close(fd);
      return EXIT_LOCKED;
    }
    hg_dlog(HG_LOG_ERROR, "daemon", "cannot lock the data directory", "file=%s err=%s", path,
            strerror(e));
    close(fd);
    return EXIT_START;
  }
  char pid[24];
  int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  int rc = 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) rc = errno ? -errno : -EIO;
  if (rc != 0) {
    if (!disk_full(data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "daemon", "cannot write the data directory's lock file",
              "file=%s err=%s", path, hg_strerror(rc));
    close(fd);
    return EXIT_START;
  }
  return 0;
}

static int tool_state_hash(const hg_daemon_config_t *cfg, int repair, uint64_t upto) {
  uint8_t h[HG_SHA256_LEN];
  char hx[2 * HG_SHA256_LEN + 1];
  uint64_t last = 0;
  if (upto != 0) {
    hg_exchange_config_t ec = {.max_instruments = cfg->max_instruments,
                               .max_accounts = cfg->max_accounts,
                               .max_book_orders = cfg->max_book_orders};
    hg_exchange_t *ex;
    int rc = hg_exchange_create(&ec, null_sink, NULL, &ex);
    char dir[HG_DCFG_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/journal", cfg->data_dir);
    if (rc == 0) rc = hg_pipeline_replay_journal(dir, ex, upto, &last);
    if (rc != 0) {
      hg_dlog(HG_LOG_ERROR, "tool", "replay failed", "dir=%s err=%s", dir, hg_strerror(rc));
      hg_exchange_destroy(ex);
      return 1;
    }
    hg_exchange_hash(ex, h);
    hg_exchange_destroy(ex);
  } else if (!repair) {
    /* Read-only: safe beside a running daemon. */
    hg_pipeline_config_t pc;
    hg_daemon_config_pipeline(cfg, &pc);
    pc.log = hg_dlog_pipe_cb;
    pc.log_ctx = "pipeline";
    hg_exchange_t *ex = NULL;
    uint64_t snap = 0;
    int rc = hg_exchange_create(&pc.exchange, null_sink, NULL, &ex);
    if (rc == 0) rc = hg_pipeline_recover_readonly(&pc, ex, &snap, &last);
    if (rc != 0) {
      hg_dlog(HG_LOG_ERROR, "tool", "recovery failed; see the message above", "data_dir=%s err=%s",
              cfg->data_dir, hg_strerror(rc));
      hg_exchange_destroy(ex);
      return 1;
    }
    hg_exchange_hash(ex, h);
    hg_exchange_destroy(ex);
  } else {
    /* --repair writes, as the daemon's start-up does: only with the lock. */
    int lrc = lock_data_dir(cfg->data_dir);
    if (lrc != 0) return lrc;
    hg_pipeline_config_t pc;
    hg_daemon_config_pipeline(cfg, &pc);
    pc.journal.repair = repair;
    pc.log = hg_dlog_pipe_cb;
    pc.log_ctx = "pipeline";
    hg_pipeline_t *p;
    int rc = hg_pipeline_open(&pc, &p);
    if (rc != 0) {
      hg_dlog(HG_LOG_ERROR, "tool", "recovery failed", "data_dir=%s err=%s", cfg->data_dir,
              hg_strerror(rc));
      return 1;
    }
    hg_pipeline_state_hash(p, h);
    last = hg_exchange_last_seq(hg_pipeline_exchange(p));
    hg_pipeline_close(p);
  }
  hex(h, sizeof h, hx);
  printf("last_seq=%" PRIu64 " state_hash=%s\n", last, hx);
  return 0;
}

/* Copies the LMDB environment data_dir/<sub> ("state": snapshots; "keys":
 * the gateway's API keys and sessions) into dest. */
static int tool_backup_lmdb(const hg_daemon_config_t *cfg, const char *sub, const char *dest) {
  char dir[HG_DCFG_PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/%s", cfg->data_dir, sub);
  MDB_env *env;
  int rc = mdb_env_create(&env);
  if (rc == 0) rc = mdb_env_set_maxdbs(env, 8);
  if (rc == 0) rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOTLS, 0640);
  /* A read transaction inside the copy pins one consistent version of the
   * store while the daemon keeps writing. */
  if (rc == 0) rc = mdb_env_copy2(env, dest, MDB_CP_COMPACT);
  mdb_env_close(env);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "tool", "store copy failed", "from=%s to=%s err=\"%s\"", dir, dest,
            mdb_strerror(rc));
    return 1;
  }
  printf("state_copied=%s\n", dest);
  return 0;
}

static int tool_backup_journal(const hg_daemon_config_t *cfg, const char *dest, uint64_t max_seq) {
  char dir[HG_DCFG_PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/journal", cfg->data_dir);
  hg_journal_reader_t *r;
  int rc = hg_journal_reader_open(dir, 1, &r);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "tool", "cannot read journal", "dir=%s err=%s", dir, hg_strerror(rc));
    return 1;
  }
  hg_journal_options_t opt;
  hg_journal_options_init(&opt);
  opt.segment_size = cfg->journal_segment_size;
  opt.batch_bytes = cfg->journal_batch_bytes;
  opt.log = hg_dlog_pipe_cb;
  opt.log_ctx = "journal";
  hg_journal_t *j;
  rc = hg_journal_open(dest, &opt, &j);
  if (rc != 0) {
    hg_journal_reader_close(r);
    hg_dlog(HG_LOG_ERROR, "tool", "cannot create journal copy", "dir=%s err=%s", dest,
            hg_strerror(rc));
    return 1;
  }
  uint64_t last = 0;
  hg_journal_record_t rec;
  for (;;) {
    rc = hg_journal_reader_next(r, max_seq, &rec);
    if (rc == HG_ENOTFOUND) {
      rc = 0;
      break;
    }
    if (rc == HG_ECORRUPT && max_seq == UINT64_MAX) {
      /* Without a durable bound the tail may be a batch in flight. */
      hg_dlog(HG_LOG_WARN, "tool", "journal copy stops at an unfinished record", "after=%" PRIu64,
              last);
      rc = 0;
      break;
    }
    if (rc != 0) break;
    while ((rc = hg_journal_append(j, rec.seq, rec.ts, rec.payload, rec.len)) == HG_EBUSY) {
      hg_journal_commit(j);
      hg_journal_poll(j, 100);
    }
    if (rc != 0) break;
    last = rec.seq;
  }
  hg_journal_reader_close(r);
  int crc = hg_journal_close(j);
  if (rc == 0) rc = crc;
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "tool", "journal copy failed", "err=%s after=%" PRIu64, hg_strerror(rc),
            last);
    return 1;
  }
  printf("journal_last_seq=%" PRIu64 "\n", last);
  return 0;
}

/* ------------------------------------------------------------------ serve */

static int mkdir_p(const char *path) {
  char tmp[HG_DCFG_PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0750) != 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  if (mkdir(tmp, 0750) != 0 && errno != EEXIST) return -errno;
  return 0;
}

static void plan_synthetic(daemon_t *d) {
  const hg_exchange_t *ex = hg_pipeline_exchange(d->pipe);
  int halted;
  int64_t cash;
  uint32_t firm;
  d->synth_setup = 0;
  if (hg_exchange_instrument_status(ex, SYN_INSTRUMENT, &halted) != 0) d->synth_setup |= 1;
  for (uint32_t a = 1; a <= 2; a++)
    if (hg_exchange_account(ex, a, &cash, &firm) != 0) d->synth_setup |= 1 << a;
}

static int serve(daemon_t *d) {
  hg_daemon_config_t *cfg = &d->cfg;
  d->start_ns = now_ns();
  set_health(d, 0, "starting");
  hg_dlog(HG_LOG_INFO, "daemon", "starting",
          "version=%s data_dir=%s order_entry=%s:%u http=%s:%u durability=%s", HG_VERSION,
          cfg->data_dir, cfg->order_entry.host, cfg->order_entry.port, cfg->http.host,
          cfg->http.port,
          cfg->durability == HG_DURABILITY_DURABLE ? "durable" : "ack_before_durable_unsafe");
  if (cfg->durability != HG_DURABILITY_DURABLE)
    hg_dlog(HG_LOG_WARN, "daemon",
            "durability=ack_before_durable_unsafe: a crash may lose acknowledged commands", NULL);
  int rc = mkdir_p(cfg->data_dir);
  if (rc != 0) {
    if (!disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "daemon", "cannot create data directory", "data_dir=%s err=%s",
              cfg->data_dir, hg_strerror(rc));
    return EXIT_START;
  }
  /* Before anything opens a file in the data directory; held until exit. */
  if ((rc = lock_data_dir(cfg->data_dir)) != 0) return rc;

  /* HTTP first, so that /health says "recovering" during a long replay. */
  hg_http_config_t hc = {cfg->http.host, cfg->http.port, cfg->http_max_connections,
                         cfg->http_max_request, cfg->http_keepalive, cfg->http_idle_ms,
                         http_handler, d};
  rc = hg_http_start(&hc, &d->http);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "http", "cannot listen", "addr=%s:%u err=%s", cfg->http.host,
            cfg->http.port, hg_strerror(rc));
    return EXIT_START;
  }
  hg_dlog(HG_LOG_INFO, "http", "listening", "addr=%s:%u", cfg->http.host, hg_http_port(d->http));

  hg_pipeline_config_t pc;
  hg_daemon_config_pipeline(cfg, &pc);
  pc.log = hg_dlog_pipe_cb;
  pc.log_ctx = "pipeline";
  pc.consumers = d->demo != NULL ? 3 : 2;
  /* GATEWAY: create before the pipeline so it can be the pipeline's consumer. */
  hg_gateway_config_t gc;
  hg_gateway_config_init(&gc);
  gc.host = cfg->order_entry.host;
  gc.port = cfg->order_entry.port;
  char key_dir[HG_DCFG_PATH_MAX + 8];
  snprintf(key_dir, sizeof key_dir, "%s/keys", cfg->data_dir);
  if ((rc = mkdir_p(key_dir)) != 0) {
    if (!disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "gateway", "cannot create key directory", "dir=%s err=%s", key_dir,
              hg_strerror(rc));
    hg_http_stop(d->http);
    return EXIT_START;
  }
  gc.key_dir = key_dir;
  gc.max_frame = cfg->max_frame;
  gc.max_sessions = cfg->max_sessions;
  gc.max_orders = cfg->max_orders;
  gc.max_instruments = cfg->max_instruments;
  gc.max_accounts = cfg->max_accounts;
  gc.throttle_rate = cfg->throttle_rate;
  gc.throttle_burst = cfg->throttle_burst;
  gc.rt_priority = (int)cfg->rt_priority;
  gc.outlog_segment_size = cfg->outlog_segment_size;
  gc.outlog_segments_kept = cfg->outlog_segments_kept;
  gc.outlog_max_session_ids = cfg->outlog_max_session_ids;
  gc.max_unauthenticated = cfg->max_unauthenticated;
  gc.max_unauthenticated_per_address = cfg->max_unauthenticated_per_address;
  gc.login_timeout_ms = cfg->login_timeout_ms;
  gc.log = hg_dlog_pipe_cb;
  gc.log_ctx = "gateway";
  rc = hg_gateway_create(&gc, &d->gw);
  if (rc != 0) {
    if (!disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "gateway", "cannot start", "addr=%s:%u err=%s", gc.host, gc.port,
              hg_strerror(rc));
    hg_http_stop(d->http);
    return EXIT_START;
  }
  pc.out_notify = hg_gateway_notify;
  pc.out_notify_ctx = d->gw;

  set_health(d, 0, "recovering");
  uint64_t t0 = now_ns();
  rc = hg_pipeline_open(&pc, &d->pipe);
  if (rc != 0) {
    if (!disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "daemon", "recovery failed; see the pipeline's message above",
              "data_dir=%s err=%s", cfg->data_dir, hg_strerror(rc));
    set_health(d, 0, "recovery failed");
    goto fail;
  }
  {
    uint8_t h[HG_SHA256_LEN];
    char hx[2 * HG_SHA256_LEN + 1];
    hg_pipeline_state_hash(d->pipe, h);
    hex(h, sizeof h, hx);
    hg_pipeline_stats_t st;
    hg_pipeline_stats(d->pipe, &st);
    hg_dlog(HG_LOG_INFO, "daemon", "recovered",
            "last_seq=%" PRIu64 " replayed=%" PRIu64 " ms=%" PRIu64 " state_hash=%s",
            hg_exchange_last_seq(hg_pipeline_exchange(d->pipe)), st.replayed,
            (now_ns() - t0) / 1000000u, hx);
  }
  rc = hg_mdview_create(cfg->max_instruments, cfg->md_depth, cfg->md_trades, &d->view);
  if (rc == 0) {
    rc = hg_mdview_seed(d->view, hg_pipeline_exchange(d->pipe));
    if (rc == HG_EFULL) {
      hg_dlog(HG_LOG_WARN, "daemon", "market view full; some instruments are not shown", NULL);
      rc = 0;
    }
  }
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "daemon", "cannot create market view", "err=%s", hg_strerror(rc));
    goto fail;
  }
  rc = hg_gateway_attach(d->gw, d->pipe);
  if (rc != 0) {
    if (!disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "gateway", "cannot attach", "err=%s", hg_strerror(rc));
    goto fail;
  }
  if (cfg->keys_file[0] != '\0') {
    unsigned line = 0;
    rc = hg_gateway_load_keys(d->gw, cfg->keys_file, &line);
    /* A full disk fails the first write into the key store: the disk is
     * at fault, not the keys file. */
    if (rc != 0 && !disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "gateway", "cannot load keys", "file=%s line=%u err=%s",
              cfg->keys_file, line, hg_strerror(rc));
    if (rc != 0) goto fail;
  }
  if (cfg->synthetic_rate > 0) plan_synthetic(d);
  if (d->demo != NULL) {
    d->demo_setup = hg_exchange_instrument_count(hg_pipeline_exchange(d->pipe)) == 0;
    d->demo_cycle_day = hg_exchange_last_cycle_day(hg_pipeline_exchange(d->pipe));
    if ((rc = demo_keys(d)) != 0) {
      if (!disk_full(cfg->data_dir, rc))
        hg_dlog(HG_LOG_ERROR, "daemon", "cannot add the demo keys", "err=%s", hg_strerror(rc));
      goto fail;
    }
  }

  rc = hg_pipeline_start(d->pipe);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "daemon", "cannot start the pipeline", "err=%s%s", hg_strerror(rc),
            rc == -EPERM ? RT_HINT : "");
    goto fail;
  }
  if ((rc = hg_thread_start("hg-marketdata", 0, md_main, d, &d->md)) != 0) goto stop;
  d->md_running = 1;
  rc = hg_gateway_start(d->gw);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "gateway", "cannot start", "err=%s%s", hg_strerror(rc),
            rc == -EPERM ? RT_HINT : "");
    goto stop;
  }
  hg_dlog(HG_LOG_INFO, "gateway", "listening", "addr=%s:%u", cfg->order_entry.host,
          hg_gateway_port(d->gw));
  if (d->demo != NULL) demo_addresses(d);
  if (cfg->synthetic_rate > 0) {
    atomic_store(&d->synth_rate, cfg->synthetic_rate);
    if ((rc = hg_thread_start("hg-synthetic", 0, synth_main, d, &d->synth)) != 0) goto stop;
    d->synth_running = 1;
    hg_dlog(HG_LOG_INFO, "daemon", "synthetic load on", "orders_per_sec=%u instrument=%u",
            cfg->synthetic_rate, SYN_INSTRUMENT);
  }
  if (d->demo != NULL) {
    if ((rc = hg_thread_start("hg-demo", 0, demo_main, d, &d->demo_thr)) != 0) goto stop;
    d->demo_running = 1;
  }
  atomic_store(&d->published, 1);
  set_health(d, 1, "ready");
  hg_dlog(HG_LOG_INFO, "daemon", "ready", NULL);

  /* Signals arrive here, synchronously. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  int failed_logged = 0;
  for (;;) {
    struct timespec tick = {0, 200000000};
    int sig = sigtimedwait(&set, NULL, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      hg_dlog(HG_LOG_INFO, "daemon", "stopping", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
      break;
    }
    if (sig == SIGHUP) reload(d);
    int f = hg_pipeline_failed(d->pipe);
    if (f != 0 && !failed_logged) {
      failed_logged = 1;
      snprintf(d->fail_reason, sizeof d->fail_reason, "journal failed: %s", hg_strerror(f));
      set_health(d, 0, d->fail_reason);
      hg_dlog(HG_LOG_ERROR, "daemon", "journal failed: intake stopped; restart after fixing the disk",
              "err=%s", hg_strerror(f));
      disk_full(cfg->data_dir, f);
    }
  }
  rc = 0;

stop:
  /* Stop intake first (generator, gateway), then drain and snapshot. */
  set_health(d, 0, "stopping");
  atomic_store(&d->stop_synth, 1);
  if (d->synth_running) pthread_join(d->synth, NULL);
  atomic_store(&d->stop_demo, 1);
  if (d->demo_running) pthread_join(d->demo_thr, NULL);
  hg_gateway_stop(d->gw); /* its loop thread is joined: the consumer role is free */
  if (!d->consumer_running && pthread_create(&d->consumer, NULL, consumer_main, d) == 0)
    d->consumer_running = 1;
  {
    uint64_t t1 = now_ns();
    int src = hg_pipeline_stop(d->pipe);
    atomic_store(&d->stop_consumer, 1);
    if (d->consumer_running) pthread_join(d->consumer, NULL);
    if (d->md_running) pthread_join(d->md, NULL);
    hg_pipeline_stats_t st;
    hg_pipeline_stats(d->pipe, &st);
    uint8_t h[HG_SHA256_LEN];
    char hx[2 * HG_SHA256_LEN + 1];
    hg_pipeline_state_hash(d->pipe, h);
    hex(h, sizeof h, hx);
    if (src != 0) {
      hg_dlog(HG_LOG_ERROR, "daemon", "stop failed; the journal keeps every durable command",
              "err=%s", hg_strerror(src));
      rc = src;
    }
    hg_dlog(src == 0 ? HG_LOG_INFO : HG_LOG_ERROR, "daemon", "stopped",
            "last_seq=%" PRIu64 " durable_seq=%" PRIu64 " snapshots=%" PRIu64
            " ms=%" PRIu64 " state_hash=%s",
            st.last_seq, st.durable_seq, st.snapshots, (now_ns() - t1) / 1000000u, hx);
  }
  /* The HTTP thread may hold the pointers it was given: join it first. */
  hg_http_stop(d->http);
  hg_pipeline_close(d->pipe);
  hg_gateway_destroy(d->gw);
  hg_mdview_destroy(d->view);
  return rc == 0 ? 0 : EXIT_START;

fail:
  hg_http_stop(d->http);
  hg_pipeline_close(d->pipe);
  hg_gateway_destroy(d->gw);
  hg_mdview_destroy(d->view);
  return EXIT_START;
}

/* --scenario: a fresh data directory (given, or a new one under $TMPDIR),
 * named on stderr so that stdout is the scenario's alone. */
static int run_scenario(const hg_daemon_config_t *cfg, const char *name, const char *dir) {
  if (strcmp(name, "month") != 0) {
    fprintf(stderr, "hourglassd: unknown scenario '%s' (known: month)\n", name);
    return EXIT_CONFIG;
  }
  char path[HG_DCFG_PATH_MAX];
  if (dir != NULL) {
    snprintf(path, sizeof path, "%s", dir);
    int rc = mkdir_p(path);
    if (rc != 0) {
      fprintf(stderr, "hourglassd: cannot create %s: %s\n", path, hg_strerror(rc));
      return EXIT_START;
    }
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/hourglass-month-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(path) == NULL) {
      fprintf(stderr, "hourglassd: cannot create a data directory: %s\n", strerror(errno));
      return EXIT_START;
    }
  }
  fprintf(stderr, "hourglassd: scenario %s, data dir %s\n", name, path);
  int lrc = lock_data_dir(path);
  if (lrc != 0) return lrc;
  hg_pipeline_config_t pc;
  hg_daemon_config_pipeline(cfg, &pc);
  pc.log = hg_dlog_pipe_cb;
  pc.log_ctx = "pipeline";
  int rc = hg_scenario_month(&pc, path, stdout, stderr);
  if (rc == HG_SCENARIO_OK) fprintf(stderr, "hourglassd: statements in %s/statements\n", path);
  return rc;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: hourglassd [-c FILE] [-o key=value]... [MODE]\n"
          "  -c FILE             configuration (ops/hourglass.conf documents every key);\n"
          "                      without it every key has its default\n"
          "  -o key=value        override one key (after the file)\n"
          "  --demo              serve with the demo market (twelve B200 months, makers,\n"
          "                      hedgers, demo API keys printed at start; a daily\n"
          "                      settlement cycle at start and at each 16:00 UTC)\n"
          "modes (default: serve until SIGTERM/SIGINT; SIGHUP reloads):\n"
          "  --check-config      parse and exit: 0 valid, 2 invalid\n"
          "  --print-data-dir    print data_dir as configured\n"
          "  --state-hash [--upto SEQ]\n"
          "                      read data_dir without writing to it (safe while the\n"
          "                      daemon runs) and print last_seq and the state hash;\n"
          "                      --upto replays the journal from empty up to SEQ\n"
          "  --state-hash --repair\n"
          "                      recover data_dir as the daemon does, writing: also cuts\n"
          "                      a torn last journal batch (never a durable record);\n"
          "                      refused with exit 4 while a daemon holds data_dir/LOCK\n"
          "  --backup-state DEST copy the LMDB store (safe while running)\n"
          "  --backup-keys DEST  copy the gateway's key store (safe while running)\n"
          "  --backup-journal DEST [--max-seq SEQ]\n"
          "                      copy journal records up to SEQ (the durable seq)\n"
          "  --scenario month [--scenario-dir DIR]\n"
          "                      run one contract (B200.A.2027-03) from listing through\n"
          "                      expiry in simulated time on the full pipeline, print\n"
          "                      its settlement summary and exit: 0 when the cash sums\n"
          "                      to zero, 1 when a check fails; DIR (default: a new\n"
          "                      directory under $TMPDIR) must be empty and receives\n"
          "                      the journal, the state and the statements\n"
          "  --version\n"
          "data_dir/LOCK: the daemon, --scenario and --state-hash --repair hold it\n"
          "(flock) while they write the directory; a second one exits 4, naming the\n"
          "holder's pid. The other modes only read the data directory.\n");
}

int main(int argc, char **argv) {
  static daemon_t d; /* large; lives for the process */
  const char *mode = "serve", *dest = NULL, *scenario = NULL, *scenario_dir = NULL;
  int repair = 0;
  uint64_t upto = 0, max_seq = UINT64_MAX;
  char **ovr = calloc((size_t)argc, sizeof *ovr);
  if (ovr == NULL) return EXIT_START;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (strcmp(a, "-c") == 0 && has) {
      d.conf_path = argv[++i];
    } else if (strcmp(a, "-o") == 0 && has) {
      ovr[d.noverrides++] = argv[++i];
    } else if (strcmp(a, "--check-config") == 0 || strcmp(a, "--state-hash") == 0 ||
               strcmp(a, "--print-data-dir") == 0) {
      mode = a + 2;
    } else if ((strcmp(a, "--backup-state") == 0 || strcmp(a, "--backup-journal") == 0 ||
                strcmp(a, "--backup-keys") == 0) &&
               has) {
      mode = a + 2;
      dest = argv[++i];
    } else if (strcmp(a, "--demo") == 0) {
      time_t now = time(NULL);
      struct tm tm;
      gmtime_r(&now, &tm);
      if (d.demo == NULL && hg_demo_create(tm.tm_year + 1900, tm.tm_mon + 1, (uint64_t)now,
                                           &d.demo) != 0) {
        fprintf(stderr, "hourglassd: cannot create the demo market\n");
        return EXIT_START;
      }
      hg_demo_set_today(d.demo, (int32_t)(now / 86400));
    } else if (strcmp(a, "--scenario") == 0 && has) {
      mode = "scenario";
      scenario = argv[++i];
    } else if (strcmp(a, "--scenario-dir") == 0 && has) {
      scenario_dir = argv[++i];
    } else if (strcmp(a, "--repair") == 0) {
      repair = 1;
    } else if ((strcmp(a, "--upto") == 0 || strcmp(a, "--max-seq") == 0) && has) {
      char *end;
      unsigned long long v = strtoull(argv[++i], &end, 10);
      if (*end != '\0' || v == 0) {
        fprintf(stderr, "hourglassd: %s needs a positive seq\n", a);
        return EXIT_CONFIG;
      }
      if (a[2] == 'u')
        upto = v;
      else
        max_seq = v;
    } else if (strcmp(a, "--version") == 0) {
      printf("hourglassd %s\n", HG_VERSION);
      return 0;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return EXIT_CONFIG;
    }
  }
  if (repair && upto != 0) {
    fprintf(stderr, "hourglassd: --repair recovers the whole directory; it does not go with --upto\n");
    return EXIT_CONFIG;
  }
  d.overrides = ovr;
  hg_dlog_init(2, HG_LOG_INFO);
  if (load_config(d.conf_path, ovr, d.noverrides, &d.cfg) != 0) return EXIT_CONFIG;
  hg_dlog_init(2, d.cfg.log_level);

  int rc;
  if (strcmp(mode, "check-config") == 0) {
    printf("configuration ok\n");
    rc = 0;
  } else if (strcmp(mode, "print-data-dir") == 0) {
    printf("%s\n", d.cfg.data_dir);
    rc = 0;
  } else if (strcmp(mode, "state-hash") == 0) {
    rc = tool_state_hash(&d.cfg, repair, upto);
  } else if (strcmp(mode, "backup-state") == 0) {
    rc = tool_backup_lmdb(&d.cfg, "state", dest);
  } else if (strcmp(mode, "backup-keys") == 0) {
    rc = tool_backup_lmdb(&d.cfg, "keys", dest);
  } else if (strcmp(mode, "backup-journal") == 0) {
    rc = tool_backup_journal(&d.cfg, dest, max_seq);
  } else if (strcmp(mode, "scenario") == 0) {
    rc = run_scenario(&d.cfg, scenario, scenario_dir);
  } else {
    /* Block the signals in every thread (they inherit the mask); main
     * takes them with sigtimedwait. SIGPIPE: a closed socket is an error
     * return, not a death. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = serve(&d);
  }
  hg_demo_destroy(d.demo);
  free(ovr);
  return rc;
}
