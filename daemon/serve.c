/*
 * serve.c - hourglassd's serve mode: the start-up order (data directory
 * lock, HTTP port, gateway, pipeline recovery, market view, keys, threads),
 * the signal loop with reload, and the shutdown order (intake first, then
 * drain and snapshot). Also the pipeline's consumers other than the
 * gateway, the demo market's thread and the synthetic order generator.
 * Threads are listed at the top of hourglassd.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "cluster.h"
#include "daemon_log.h"
#include "hourglass/error.h"
#include "hourglass/hmac.h"
#include "hourglass/thread.h"
#include "hourglassd.h"
#include "market_api.h"

/* serve_cycle(): this cluster node must be rebuilt from the group. */
#define SERVE_REBUILD 100
/* A rebuild within 10 s of the previous one waits REBUILD_WAIT_MS first. */
#define REBUILD_QUIET_NS 10000000000ull
#define REBUILD_WAIT_MS 1000

/* Appended to the start failure when threads.realtime_priority was refused. */
#define RT_HINT                                                                  \
  " hint=\"threads.realtime_priority needs root, CAP_SYS_NICE or LimitRTPRIO= (with" \
  " RestrictRealtime=no) in the unit; 0 runs without real-time scheduling\""

/* ------------------------------------------------------------- consumer */

/*
 * Pipeline consumers. Consumer 0 is the gateway's loop (and, once the
 * gateway has stopped, consumer_main, which only drains). Consumer 1 is md_main, which
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
      if (hg_mdview_publish(d->view)) hg_http_wake(d->http); /* the event stream */
      continue;
    }
    /* retries a publish a busy reader deferred */
    if (hg_mdview_publish(d->view)) hg_http_wake(d->http);
    if (atomic_load(&d->stop_consumer)) break;
    hg_pipeline_wait_consumer(d->pipe, CONSUMER_MARKET, 50 * 1000000LL);
  }
  return NULL;
}

/* Consumer 0 while hg_pipeline_stop() drains after the gateway has
 * stopped: takes the records nobody routes any more. */
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

/* Cluster mode: the demo trades only through the leader. Waits until this
 * node takes orders, 0, or -1 when stopping. Meanwhile it drains its
 * consumer ring (the records of the group's batches this node applies,
 * which the demo does not need): the stage frees a slot only once every
 * consumer has taken it, so a full demo ring would stop this node applying
 * the group's log, and, elected, it would never take orders. */
static int demo_wait_leader(daemon_t *d) {
  static hg_pipe_out_t recs[1024]; /* demo thread only */
  while (!daemon_cluster_writable(d->cluster)) {
    if (atomic_load(&d->stop_demo)) return -1;
    if (hg_pipeline_poll_consumer(d->pipe, CONSUMER_DEMO, recs, 1024) == 0)
      hg_pipeline_wait_consumer(d->pipe, CONSUMER_DEMO, 50000000);
  }
  return 0;
}

/* The demo's first commands into cmds[0..cap), how many: on an exchange
 * that holds nothing yet (fresh), the market's set-up; else the pull of the
 * makers' quotes, which an earlier run (or, in a cluster, the previous
 * leader's demo) placed and this run does not know. Never the set-up
 * twice: its deposits would pay the accounts again. */
static size_t demo_first(daemon_t *d, hg_command_t *cmds, size_t cap, int fresh) {
  size_t n = 0;
  if (fresh) {
    n = hg_demo_setup(d->demo, cmds, cap - 2);
    /* The account of the person's market-maker key (demo_keys), with the
     * trader's firm and deposit, so that the firm's risk viewer sees both. */
    memset(&cmds[n], 0, 2 * sizeof cmds[n]);
    cmds[n].type = HG_COMMAND_ADD_ACCOUNT;
    cmds[n].u.add_account.account = HG_DEMO_USER_MAKER_ACCOUNT;
    cmds[n].u.add_account.firm = 300;
    cmds[n + 1].type = HG_COMMAND_DEPOSIT;
    cmds[n + 1].u.cash.account = HG_DEMO_USER_MAKER_ACCOUNT;
    cmds[n + 1].u.cash.amount = (int64_t)1000000 * 1000000;
    return n + 2;
  }
  for (uint32_t m = 0; m < HG_DEMO_MAKERS && n < cap; m++) {
    memset(&cmds[n], 0, sizeof cmds[n]);
    cmds[n].type = HG_COMMAND_MASS_CANCEL;
    cmds[n].u.mass_cancel.account = HG_DEMO_MAKER_ACCOUNT(m);
    cmds[n].u.mass_cancel.sides = HG_SIDES_BOTH;
    n++;
  }
  return n;
}

/* The demo thread: sets the market up (first run on an empty data dir, or
 * a cluster's first leader), then every quarter second moves the makers'
 * quotes and lets the hedgers trade, learning its order ids from its own
 * consumer ring. */
static void *demo_main(void *arg) {
  daemon_t *d = arg;
  enum { CAP = 2048 };
  static hg_command_t cmds[CAP];     /* demo thread only */
  static hg_pipe_out_t recs[1024];
  size_t n;
  if (d->cluster != NULL) {
    /* Every start of a node rebuilds its state from the group, so the data
     * dir says nothing: what the group's log holds, once this node leads,
     * does. */
    if (demo_wait_leader(d) != 0) return NULL;
    hg_pipeline_stats_t st;
    hg_pipeline_stats(d->pipe, &st);
    n = demo_first(d, cmds, CAP, st.last_seq == 0);
  } else {
    n = demo_first(d, cmds, CAP, d->demo_setup);
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

/* 1 if the configured keys file defines key id (it was loaded before the
 * demo's keys, and its secret is the one its users know). */
static int keys_file_has(const daemon_t *d, uint64_t id) {
  if (d->cfg.keys_file[0] == '\0') return 0;
  FILE *f = fopen(d->cfg.keys_file, "r");
  if (f == NULL) return 0;
  char line[512];
  uint8_t secret[HG_WIRE_SECRET_MAX];
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    hg_gateway_key_t k;
    found = hg_gateway_key_line_parse(line, &k, secret) == 0 && k.key_id == id;
  }
  hg_wipe(line, sizeof line);
  hg_wipe(secret, sizeof secret);
  fclose(f);
  return found;
}

/* An absolute form of path (as given when realpath fails), for lines a
 * user pastes in another directory. */
static const char *abs_path(const char *path, char out[PATH_MAX]) {
  if (realpath(path, out) == NULL) snprintf(out, PATH_MAX, "%s", path);
  return out;
}

/* The demo's key lines, made by demo_keys at start and printed by
 * demo_banner once the daemon is ready (main thread only). */
static char demo_key_lines[1024];

/* Demo API keys, as lines that paste as they are (a demo convenience: never
 * logged). A key id the keys file defines keeps the file's secret, and its
 * line reads the secret from the file rather than showing it (ops/run keeps
 * the demo's keys in var/demo-keys so exports survive restarts, and a
 * cluster node's stdout is its log); the others get new random secrets at
 * every start, shown once. */
static int demo_keys(daemon_t *d) {
  static const struct {
    uint64_t id;
    uint32_t role, account, firm;
    const char *what;
  } keys[] = {
      {HG_DEMO_USER_ACCOUNT, HG_ROLE_TRADER, HG_DEMO_USER_ACCOUNT, 300, "trader, account 3001"},
      {HG_DEMO_USER_ACCOUNT + 1, HG_ROLE_RISK_VIEWER, 0, 300, "risk viewer, firm 300"},
      {HG_DEMO_USER_MAKER_ACCOUNT, HG_ROLE_MARKET_MAKER, HG_DEMO_USER_MAKER_ACCOUNT, 300,
       "market maker, account 3003"},
      {1, HG_ROLE_OPERATOR, 0, 0, "operator"},
  };
  enum { NKEYS = sizeof keys / sizeof keys[0] };
  int in_file[NKEYS], all_in_file = 1;
  for (size_t i = 0; i < NKEYS; i++) {
    in_file[i] = keys_file_has(d, keys[i].id);
    all_in_file &= in_file[i];
  }
  char file[PATH_MAX];
  abs_path(d->cfg.keys_file, file);
  size_t n = 0, cap = sizeof demo_key_lines;
  n += (size_t)snprintf(demo_key_lines, cap, "and one key per terminal (%s%s):\n",
                        all_in_file ? "kept across restarts in " : "new at every start",
                        all_in_file ? file : "");
  for (size_t i = 0; i < NKEYS && n < cap; i++) {
    if (in_file[i]) {
      n += (size_t)snprintf(demo_key_lines + n, cap - n,
                            "  %-26s export HG_KEY_ID=%llu HG_SECRET=$(awk '$1==%llu{print $5}' "
                            "%s)\n",
                            keys[i].what, (unsigned long long)keys[i].id,
                            (unsigned long long)keys[i].id, file);
      continue;
    }
    uint8_t secret[32];
    if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret) return -EIO;
    hg_gateway_key_t k = {.key_id = keys[i].id, .role = keys[i].role, .account = keys[i].account,
                          .firm = keys[i].firm, .secret = secret, .secret_len = sizeof secret};
    int rc = hg_gateway_add_key(d->gw, &k, 1);
    if (rc != 0) return rc;
    char hx[2 * sizeof secret + 1];
    daemon_hex(secret, sizeof secret, hx);
    hg_wipe(secret, sizeof secret);
    n += (size_t)snprintf(demo_key_lines + n, cap - n,
                          "  %-26s export HG_KEY_ID=%llu HG_SECRET=%s\n", keys[i].what,
                          (unsigned long long)keys[i].id, hx);
  }
  return 0;
}

/* 1 if the first certificate of the PEM file is self-signed (its own
 * issuer): then it is also the CA a client trusts. */
static int cert_self_signed(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
  fclose(f);
  int self = x != NULL && X509_check_issued(x, x) == X509_V_OK;
  X509_free(x);
  return self;
}

/* The demo's banner, the last thing the daemon prints at start (after
 * "ready"): lines that paste as they are, with the addresses the listeners
 * really have (an ephemeral port included), the trust anchor of the order
 * entry's TLS, where the tools are, and the keys. */
static void demo_banner(daemon_t *d) {
  unsigned gw = hg_gateway_port(d->gw), http = hg_http_port(d->http);
  printf("\nDemo market: %d monthly B200 grade-A contracts (%s .. %s), two market makers\n"
         "quoting, two inference producers hedging. Paste in each terminal:\n",
         HG_DEMO_MONTHS, hg_demo_instruments(d->demo)[0].symbol,
         hg_demo_instruments(d->demo)[HG_DEMO_MONTHS - 1].symbol);
  /* hgctl is built beside hourglassd. */
  char exe[PATH_MAX], tool[PATH_MAX + 8];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) *slash = '\0';
    snprintf(tool, sizeof tool, "%s/hgctl", exe);
    if (access(tool, X_OK) == 0) printf("  export PATH=%s:$PATH\n", exe);
  }
  printf("  export HG_HOST=%s HG_PORT=%u\n", d->cfg.order_entry.host, gw);
  if (hg_daemon_config_tls(&d->cfg)) {
    char cert[PATH_MAX];
    abs_path(d->cfg.tls_cert, cert);
    if (cert_self_signed(cert))
      printf("  export HG_TLS=1 HG_CA=%s\n", cert);
    else
      printf("  export HG_TLS=1 HG_CA=<the CA that signed %s>\n", cert);
  }
  fputs(demo_key_lines, stdout);
  printf("Order entry: %s:%u%s\n"
         "Market page: http://%s:%u/\n"
         "Then: hgctl instruments; hgctl ladder %s; hgctl order new --help (README.md, "
         "\"A short tour\")\n\n",
         d->cfg.order_entry.host, gw, hg_daemon_config_tls(&d->cfg) ? " (TLS 1.3)" : "",
         d->cfg.http.host, http, hg_demo_instruments(d->demo)[0].symbol);
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
  if (daemon_load_config(d->conf_path, d->overrides, d->noverrides, &next) != 0) {
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


/* ------------------------------------------------------------------ serve */

/* The start-up line, and a warning when acknowledgements may outrun the
 * journal. */
static void announce(const daemon_t *d) {
  const hg_daemon_config_t *cfg = &d->cfg;
  hg_dlog(HG_LOG_INFO, "daemon", "starting",
          "version=%s data_dir=%s order_entry=%s:%u http=%s:%u durability=%s", HG_VERSION,
          cfg->data_dir, cfg->order_entry.host, cfg->order_entry.port, cfg->http.host,
          cfg->http.port,
          cfg->durability == HG_DURABILITY_DURABLE ? "durable" : "ack_before_durable_unsafe");
  if (cfg->durability != HG_DURABILITY_DURABLE)
    hg_dlog(HG_LOG_WARN, "daemon",
            "durability=ack_before_durable_unsafe: a crash may lose acknowledged commands", NULL);
}

/* Creates the data directory if needed and takes its lock, before anything
 * opens a file in it; the lock is held until exit. 0, EXIT_START or
 * EXIT_LOCKED (logged). */
static int claim_data_dir(const daemon_t *d) {
  const char *dir = d->cfg.data_dir;
  int rc = daemon_mkdir_p(dir);
  if (rc != 0) {
    if (!daemon_disk_full(dir, rc))
      hg_dlog(HG_LOG_ERROR, "daemon", "cannot create data directory", "data_dir=%s err=%s", dir,
              hg_strerror(rc));
    return EXIT_START;
  }
  return daemon_lock_data_dir(dir);
}

/* The HTTP port, first of all, so that /health says "recovering" during a
 * long replay. 0 or EXIT_START (logged). */
static int start_http(daemon_t *d) {
  const hg_daemon_config_t *cfg = &d->cfg;
  int tls = cfg->http_tls_cert[0] != '\0';
  hg_http_config_t hc = {cfg->http.host, cfg->http.port, cfg->http_max_connections,
                         cfg->http_max_per_ip, cfg->http_max_request, cfg->http_keepalive,
                         cfg->http_idle_ms, tls ? cfg->http_tls_cert : NULL,
                         tls ? cfg->http_tls_key : NULL, daemon_http_handler, d,
                         DAEMON_STREAM_PATH, cfg->http_stream_buffer, daemon_http_stream,
                         daemon_http_snapshot};
  int rc = hg_http_start(&hc, &d->http);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "http", "cannot listen", "addr=%s:%u err=%s", cfg->http.host,
            cfg->http.port, hg_strerror(rc));
    return EXIT_START;
  }
  hg_dlog(HG_LOG_INFO, "http", "listening", "addr=%s:%u tls=%s", cfg->http.host,
          hg_http_port(d->http), tls ? "on" : "off");
  return 0;
}

/* Creates the gateway (not yet listening) with its key store in
 * data_dir/keys. It exists before the pipeline because it is the pipeline's
 * consumer 0 and is woken by it (out_notify). 0 or EXIT_START (logged). */
static int create_gateway(daemon_t *d) {
  const hg_daemon_config_t *cfg = &d->cfg;
  hg_gateway_config_t gc;
  hg_gateway_config_init(&gc);
  gc.host = cfg->order_entry.host;
  gc.port = cfg->order_entry.port;
  char key_dir[HG_DCFG_PATH_MAX + 8];
  snprintf(key_dir, sizeof key_dir, "%s/keys", cfg->data_dir);
  int rc = daemon_mkdir_p(key_dir);
  if (rc != 0) {
    if (!daemon_disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "gateway", "cannot create key directory", "dir=%s err=%s", key_dir,
              hg_strerror(rc));
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
  gc.sessions_per_key = cfg->sessions_per_key;
  if (hg_daemon_config_tls(cfg)) {
    gc.tls_cert = cfg->tls_cert;
    gc.tls_key = cfg->tls_key;
    if (cfg->tls_client_ca[0] != '\0') gc.tls_client_ca = cfg->tls_client_ca;
  }
  gc.log = hg_dlog_pipe_cb;
  gc.log_ctx = "gateway";
  if (d->cluster != NULL) {
    gc.order_entry_leader = daemon_cluster_leader;
    gc.loop_stop = daemon_cluster_loop_stop;
    gc.cluster_request = daemon_cluster_request;
    gc.replicate_key = daemon_cluster_replicate_key;
    gc.cluster_ctx = d->cluster;
  }
  rc = hg_gateway_create(&gc, &d->gw);
  if (rc != 0) {
    if (!daemon_disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "gateway", "cannot start", "addr=%s:%u err=%s", gc.host, gc.port,
              hg_strerror(rc));
    return EXIT_START;
  }
  return 0;
}

/* Opens the pipeline: recovery from the latest snapshot and the journal,
 * logged with its state hash. 0 or the error (logged). */
static int open_pipeline(daemon_t *d) {
  const hg_daemon_config_t *cfg = &d->cfg;
  hg_pipeline_config_t pc;
  hg_daemon_config_pipeline(cfg, &pc);
  pc.log = hg_dlog_pipe_cb;
  pc.log_ctx = "pipeline";
  pc.consumers = d->demo != NULL ? 3 : 2;
  pc.out_notify = hg_gateway_notify;
  pc.out_notify_ctx = d->gw;
  pc.loop_drain = hg_gateway_drain;
  pc.loop_drain_ctx = d->gw;
  if (d->cluster != NULL) {
    pc.data_dir = daemon_cluster_engine_dir(d->cluster);
    pc.replicate = daemon_cluster_replicate;
    pc.replicate_ctx = d->cluster;
    pc.route_out = hg_gateway_route_out;
    pc.route_in = hg_gateway_route_in;
    pc.stream_in = hg_gateway_stream_in;
    pc.route_ctx = d->gw;
    int rc = daemon_cluster_seed(d->cluster, &pc);
    if (rc != 0) return rc;
  }
  set_health(d, 0, "recovering");
  uint64_t t0 = now_ns();
  int rc = hg_pipeline_open(&pc, &d->pipe);
  if (rc != 0) {
    if (!daemon_disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "daemon", "recovery failed; see the pipeline's message above",
              "data_dir=%s err=%s", cfg->data_dir, hg_strerror(rc));
    set_health(d, 0, "recovery failed");
    return rc;
  }
  uint8_t h[HG_SHA256_LEN];
  char hx[2 * HG_SHA256_LEN + 1];
  hg_pipeline_state_hash(d->pipe, h);
  daemon_hex(h, sizeof h, hx);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(d->pipe, &st);
  hg_dlog(HG_LOG_INFO, "daemon", "recovered",
          "last_seq=%" PRIu64 " replayed=%" PRIu64 " ms=%" PRIu64 " state_hash=%s",
          hg_exchange_last_seq(hg_pipeline_exchange(d->pipe)), st.replayed,
          (now_ns() - t0) / 1000000u, hx);
  return 0;
}

/* The public market view, seeded from the recovered exchange. 0 or the
 * error (logged); a view too small for every instrument is only a warning. */
static int create_view(daemon_t *d) {
  const hg_daemon_config_t *cfg = &d->cfg;
  int rc = hg_mdview_create(cfg->max_instruments, cfg->md_depth, cfg->md_trades, &d->view);
  if (rc == 0) rc = hg_market_stream_create(d->view, &d->mstream);
  if (rc == 0) {
    rc = hg_mdview_seed(d->view, hg_pipeline_exchange(d->pipe));
    if (rc == HG_EFULL) {
      hg_dlog(HG_LOG_WARN, "daemon", "market view full; some instruments are not shown", NULL);
      rc = 0;
    }
  }
  if (rc != 0)
    hg_dlog(HG_LOG_ERROR, "daemon", "cannot create market view", "err=%s", hg_strerror(rc));
  return rc;
}

/* Gives the gateway the recovered pipeline and loads keys_file into its key
 * store. 0 or the error (logged). */
static int attach_gateway(daemon_t *d) {
  const hg_daemon_config_t *cfg = &d->cfg;
  int rc = hg_gateway_attach(d->gw, d->pipe);
  if (rc != 0) {
    if (!daemon_disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "gateway", "cannot attach", "err=%s", hg_strerror(rc));
    return rc;
  }
  if (cfg->keys_file[0] != '\0') {
    unsigned line = 0;
    rc = hg_gateway_load_keys(d->gw, cfg->keys_file, &line);
    /* A full disk fails the first write into the key store: the disk is
     * at fault, not the keys file. */
    if (rc != 0 && !daemon_disk_full(cfg->data_dir, rc))
      hg_dlog(HG_LOG_ERROR, "gateway", "cannot load keys", "file=%s line=%u err=%s",
              cfg->keys_file, line, hg_strerror(rc));
  }
  return rc;
}

/* What the synthetic generator and the demo must set up in the recovered
 * exchange, and the demo's API keys. 0 or the error (logged). */
static int plan_generators(daemon_t *d) {
  if (d->cfg.synthetic_rate > 0) plan_synthetic(d);
  if (d->demo == NULL) return 0;
  d->demo_setup = hg_exchange_instrument_count(hg_pipeline_exchange(d->pipe)) == 0;
  d->demo_cycle_day = hg_exchange_last_cycle_day(hg_pipeline_exchange(d->pipe));
  int rc = demo_keys(d);
  if (rc != 0 && !daemon_disk_full(d->cfg.data_dir, rc))
    hg_dlog(HG_LOG_ERROR, "daemon", "cannot add the demo keys", "err=%s", hg_strerror(rc));
  return rc;
}

/* Starts the market-data thread, the gateway's listener and loop, and the
 * optional generators (synthetic, demo), after the pipeline's threads run.
 * 0 or the error (logged where the callee does not); what did start is
 * recorded in d for shut_down. */
static int start_serving(daemon_t *d) {
  const hg_daemon_config_t *cfg = &d->cfg;
  int rc = hg_thread_start("hg-marketdata", 0, md_main, d, &d->md);
  if (rc != 0) return rc;
  d->md_running = 1;
  rc = hg_gateway_start(d->gw);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "gateway", "cannot start", "err=%s%s", hg_strerror(rc),
            rc == -EPERM ? RT_HINT : "");
    return rc;
  }
  hg_dlog(HG_LOG_INFO, "gateway", "listening", "addr=%s:%u", cfg->order_entry.host,
          hg_gateway_port(d->gw));
  if (hg_daemon_config_tls(cfg))
    hg_dlog(HG_LOG_INFO, "gateway", "TLS 1.3 on", "cert=%s client_ca=%s", cfg->tls_cert,
            cfg->tls_client_ca[0] != '\0' ? cfg->tls_client_ca : "none");
  if (cfg->synthetic_rate > 0) {
    atomic_store(&d->synth_rate, cfg->synthetic_rate);
    if ((rc = hg_thread_start("hg-synthetic", 0, synth_main, d, &d->synth)) != 0) return rc;
    d->synth_running = 1;
    hg_dlog(HG_LOG_INFO, "daemon", "synthetic load on", "orders_per_sec=%u instrument=%u",
            cfg->synthetic_rate, SYN_INSTRUMENT);
  }
  if (d->demo != NULL) {
    if ((rc = hg_thread_start("hg-demo", 0, demo_main, d, &d->demo_thr)) != 0) return rc;
    d->demo_running = 1;
  }
  return 0;
}

/* Origin of the MARK commands of the timer (no one waits for their results). */
#define MARK_ORIGIN (UINT64_C(0x4d) << 56)

/* The mark timer (settlement/CONTRACT.md section 4.6): every
 * clearing.mark_interval_ms, a MARK command through the normal command path,
 * while trading: only when commands were sequenced since the last MARK (an
 * idle exchange would mark to the same prices and journal a command a
 * second for nothing). Single node only: a cluster's nodes would each
 * need to agree which one marks, so a cluster marks by operator command
 * (`hgctl op mark`) for now. Main thread. */
static void mark_tick(daemon_t *d, uint64_t *next, uint64_t *seen_seq) {
  uint32_t ms = d->cfg.mark_interval_ms;
  uint64_t t = now_ns();
  if (ms == 0 || t < *next) return;
  *next = t + (uint64_t)ms * 1000000u;
  if (d->cluster != NULL) return; /* a cluster marks by operator command for now */
  hg_pipeline_stats_t st;
  hg_pipeline_stats(d->pipe, &st);
  if (st.last_seq == *seen_seq) return;
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.type = HG_COMMAND_MARK;
  /* busy: the next tick tries again */
  if (hg_pipeline_submit(d->pipe, MARK_ORIGIN, &c) == 0) *seen_seq = st.last_seq + 1;
}

/* 1 (logged) when sig, as sigtimedwait returned it, asks the daemon to stop. */
static int is_stop(int sig) {
  if (sig != SIGTERM && sig != SIGINT) return 0;
  hg_dlog(HG_LOG_INFO, "daemon", "stopping", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
  return 1;
}

/* Takes SIGTERM, SIGINT (return 0) and SIGHUP (reload) synchronously, and
 * turns health into "journal failed: ..." once the pipeline reports a
 * journal failure. A cluster node whose state the group no longer holds
 * returns SERVE_REBUILD: daemon_serve() rebuilds it from the group. */
static int signal_loop(daemon_t *d) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  int failed_logged = 0;
  uint64_t next_mark = now_ns() + (uint64_t)d->cfg.mark_interval_ms * 1000000u, mark_seq = 0;
  for (;;) {
    long tick_ns = 200000000;
    if (d->cfg.mark_interval_ms != 0 && d->cfg.mark_interval_ms < 200)
      tick_ns = (long)d->cfg.mark_interval_ms * 1000000;
    struct timespec tick = {0, tick_ns};
    int sig = sigtimedwait(&set, NULL, &tick);
    if (is_stop(sig)) return 0;
    if (sig == SIGHUP) reload(d);
    mark_tick(d, &next_mark, &mark_seq);
    int f = hg_pipeline_failed(d->pipe);
    if (d->cluster != NULL && (f != 0 || daemon_cluster_must_rebuild(d->cluster)))
      return SERVE_REBUILD;
    if (f != 0 && !failed_logged) {
      failed_logged = 1;
      snprintf(d->fail_reason, sizeof d->fail_reason, "journal failed: %s", hg_strerror(f));
      set_health(d, 0, d->fail_reason);
      hg_dlog(HG_LOG_ERROR, "daemon", "journal failed: intake stopped; restart after fixing the disk",
              "err=%s", hg_strerror(f));
      daemon_disk_full(d->cfg.data_dir, f);
    }
  }
}

/* Stops intake first (generators, gateway), then drains the pipeline and
 * writes its final snapshot, logging the state hash. Returns rc, or the
 * pipeline's stop error when rc is 0. */
static int shut_down(daemon_t *d, int rc) {
  set_health(d, 0, "stopping");
  atomic_store(&d->stop_synth, 1);
  if (d->synth_running) pthread_join(d->synth, NULL);
  atomic_store(&d->stop_demo, 1);
  if (d->demo_running) pthread_join(d->demo_thr, NULL);
  hg_gateway_stop(d->gw); /* its loop thread is joined: the consumer role is free */
  if (!d->consumer_running && pthread_create(&d->consumer, NULL, consumer_main, d) == 0)
    d->consumer_running = 1;
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
  daemon_hex(h, sizeof h, hx);
  if (src != 0 && rc == SERVE_REBUILD) {
    src = 0; /* the failure that asked for the rebuild, logged then */
  } else if (src != 0) {
    hg_dlog(HG_LOG_ERROR, "daemon", "stop failed; the journal keeps every durable command",
            "err=%s", hg_strerror(src));
    rc = src;
  }
  hg_dlog(src == 0 ? HG_LOG_INFO : HG_LOG_ERROR, "daemon", "stopped",
          "last_seq=%" PRIu64 " durable_seq=%" PRIu64 " snapshots=%" PRIu64
          " ms=%" PRIu64 " state_hash=%s",
          st.last_seq, st.durable_seq, st.snapshots, (now_ns() - t1) / 1000000u, hx);
  return rc;
}

/* Frees what serve created. The HTTP thread may hold the pointers it was
 * given: it is joined first. Each destroy takes NULL. */
static void release(daemon_t *d) {
  hg_http_stop(d->http);
  hg_pipeline_close(d->pipe);
  hg_gateway_destroy(d->gw);
  hg_market_stream_destroy(d->mstream);
  hg_mdview_destroy(d->view);
  daemon_cluster_destroy(d->cluster);
}

/* Forgets what one serving cycle created, once release() freed it, so the
 * next cycle starts as the first did (the data directory's lock, the
 * configuration and the demo market stay). */
static void forget_cycle(daemon_t *d) {
  d->pipe = NULL;
  d->view = NULL;
  d->mstream = NULL;
  d->http = NULL;
  d->gw = NULL;
  d->cluster = NULL;
  d->consumer_running = d->synth_running = d->md_running = d->demo_running = 0;
  atomic_store(&d->stop_demo, 0);
  atomic_store(&d->stop_consumer, 0);
  atomic_store(&d->stop_synth, 0);
  atomic_store(&d->published, 0);
}

/* One serving cycle: everything after the data directory's lock, up to a
 * stop (0), a failed start (EXIT_START) or a cluster node that must be
 * rebuilt from the group (SERVE_REBUILD); what it created is released. */
static int serve_cycle(daemon_t *d) {
  if (start_http(d) != 0) return EXIT_START;
  if (d->cfg.cluster_id != 0 && daemon_cluster_create(&d->cfg, &d->cluster) != 0) {
    hg_http_stop(d->http);
    return EXIT_START;
  }
  if (create_gateway(d) != 0) {
    daemon_cluster_destroy(d->cluster);
    hg_http_stop(d->http);
    return EXIT_START;
  }
  if (d->cluster != NULL && daemon_cluster_open(d->cluster, d->gw) != 0) goto fail;
  if (open_pipeline(d) != 0 || create_view(d) != 0 || attach_gateway(d) != 0 ||
      plan_generators(d) != 0)
    goto fail;
  int rc = hg_pipeline_start(d->pipe);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "daemon", "cannot start the pipeline", "err=%s%s", hg_strerror(rc),
            rc == -EPERM ? RT_HINT : "");
    goto fail;
  }
  if (d->cluster != NULL) daemon_cluster_start(d->cluster, d->pipe);
  rc = start_serving(d);
  if (rc == 0) {
    atomic_store(&d->published, 1);
    set_health(d, 1, "ready");
    hg_dlog(HG_LOG_INFO, "daemon", "ready", NULL);
    if (d->demo != NULL) demo_banner(d);
    rc = signal_loop(d);
  }
  rc = shut_down(d, rc);
  release(d);
  return rc == 0 || rc == SERVE_REBUILD ? rc : EXIT_START;

fail:
  release(d);
  return EXIT_START;
}

/* Waits ms unless SIGTERM or SIGINT comes first (then 1). */
static int pause_unless_stopped(long ms) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  return is_stop(sigtimedwait(&set, NULL, &t));
}

int daemon_serve(daemon_t *d) {
  d->start_ns = now_ns();
  set_health(d, 0, "starting");
  announce(d);
  int rc = claim_data_dir(d);
  if (rc != 0) return rc;
  uint64_t rebuilt_ns = 0;
  while ((rc = serve_cycle(d)) == SERVE_REBUILD) {
    /* A rebuild that follows the last within REBUILD_QUIET_NS waits first,
     * so a node that cannot hold the group's state does not spin. */
    uint64_t t = now_ns();
    int quick = rebuilt_ns != 0 && t - rebuilt_ns < REBUILD_QUIET_NS;
    uint64_t n = atomic_fetch_add(&d->rebuilds, 1) + 1;
    hg_dlog(HG_LOG_INFO, "cluster", "rebuilding this node from the group in place",
            "rebuilds=%" PRIu64 " wait_ms=%d", n, quick ? REBUILD_WAIT_MS : 0);
    forget_cycle(d);
    set_health(d, 0, "rebuilding from the group");
    if (quick && pause_unless_stopped(REBUILD_WAIT_MS)) return 0;
    rebuilt_ns = now_ns();
  }
  return rc == 0 ? 0 : EXIT_START;
}
