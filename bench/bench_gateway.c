/*
 * bench_gateway: the gateway under an open-loop load over loopback TCP.
 *
 * The server (pipeline + gateway, tests/support/server.h) runs in
 * this process on its own threads; the load generator is the main thread
 * driving N client-library sessions (hg_client, non-blocking sends) through
 * one epoll set. Offered load is open loop: request k of a run is due at
 * t0 + k / rate whatever the replies do, sessions take turns, and a
 * request's round trip is measured from its due time (not from when the
 * generator got round to sending it) to the first ExecutionReport whose
 * ref_seq names it, so generator lag counts against the result instead of
 * hiding it (no coordinated omission). Each run also prints the round
 * trip's two legs, split at the sequencer's timestamp carried back in
 * ExecutionReport.ts (same host, CLOCK_REALTIME against CLOCK_MONOTONIC
 * offset once per run): "in" is due -> sequenced, "out" is sequenced ->
 * received, with the mean legs of the slowest 1% of round trips, to show
 * which half a tail comes from.
 *
 * Requests are IOC limit orders that never cross (buys at 1000..1049 ticks
 * against resting sells at 90000+), so every order travels the whole path
 * (gateway decode and checks, sequencer, journal, risk, book, IOC cancel,
 * release, routing) and the book stays the same size.
 *
 * Phases:
 *  1. rate sweep, journal on tmpfs (/dev/shm) in the default durable
 *     policy (fdatasync on tmpfs is nearly free): a ladder of offered rates; a rate is sustained when the achieved ack
 *     rate is at least 95% of it, every request was answered, and p99 is
 *     under 10 ms. RESULT gateway.max_orders_per_s is the highest such rate;
 *     the 50k step gives rtt_p50/p99_us_at_50k.
 *  2. 50k/s with the journal on the real disk (--dir, default the current
 *     directory), durable mode: RESULT gateway.rtt_p99_durable_us_at_50k.
 *  3. RESULT disk.fdatasync_p99_us: 4 KiB appends + fdatasync in the same
 *     directory (bench_journal's raw-disk method), per call; and RESULT
 *     disk.group_commit_floor_p99_us: the round-trip p99 a perfect group
 *     commit would give steady arrivals on that same trace (see
 *     fdatasync_p99()).
 *  4. many sessions (default 1000) logged in at once, each sending at a low
 *     rate and heartbeating, for a few seconds: RESULT gateway.sessions is
 *     the count still logged in and fully answered at the end.
 *
 * Batching: by default each session is corked (hg_client_cork), sessions
 * take turns per generator tick instead of per request, and the requests
 * due at one tick (up to BATCH_MAX, then the next session) leave in one
 * write, as a real client sending a burst would; the round trip still
 * counts from each request's own due time. --no-batch: one send per
 * request, sessions taking turns per request (the earlier generator).
 *
 * Usage: bench_gateway [--quick] [--no-batch] [--journal-direct] [--rt N] [--sweep-only] [--dir DIR]
 *        [--sessions N] [--rates a,b,c] [--seconds S]. --sweep-only stops
 *        after phase 1 (for perf stat over a fixed load). Loopback only. The machine is shared: figures vary.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "client_util.h"

#define OP_KEY 1u
#define KEY_BASE 1000u
#define RING 8192u /* outstanding requests per session tracked */

/* Batch sends (hg_client_cork): each session writes all the requests due
 * at one generator tick in one send; --no-batch sends each on its own. */
static bool g_batch = true;
/* --journal-direct: the journal thread calls pwritev + fdatasync itself
 * (journal.force_fallback) instead of committing through io_uring, whose
 * linked fdatasync runs on a kernel io-wq worker. */
static int g_journal_direct = 0;
/* --rt N: the exchange's engine, journal and gateway threads run under
 * SCHED_FIFO at priority N (threads.realtime_priority); the load generator,
 * which stands for clients on other machines, stays at normal priority. */
static int g_rt = 0;
#define BATCH_MAX 64u /* requests one session sends in one tick at most */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int err) {
  fprintf(stderr, "bench_gateway: %s: %s\n", what, hg_strerror(err));
  exit(1);
}

typedef struct sess {
  hg_client_t *c;
  uint64_t due[RING]; /* due time of request seq (index seq % RING); 0: answered */
  uint64_t sent, answered, rejected;
  uint64_t clid;
  bool dead;
} sess_t;

typedef struct run_result {
  double offered, achieved;
  uint64_t sent, answered, late_unanswered, rejected;
  double p50, p99, p999, max;
  /* The round trip split at the sequencer's stamp (ExecutionReport.ts):
   * in = due -> sequenced (generator, socket, gateway, engine wake-up),
   * out = sequenced -> received (journal, release, gateway, socket). */
  double in_p50, in_p99, out_p50, out_p99;
  double slow_in, slow_out; /* mean legs of the round trips at or above p99 */
  uint32_t alive;
} run_result_t;

/* Per answered request of a run: round trip and its two legs, in ns. */
typedef struct lat_log {
  uint64_t *rtt;
  int64_t *in, *out;
  size_t n, cap;
  uint64_t real_minus_mono; /* CLOCK_REALTIME - CLOCK_MONOTONIC at the start */
} lat_log_t;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct(const uint64_t *v, size_t n, double p) {
  if (n == 0) return 0;
  size_t i = (size_t)(p * (double)(n - 1));
  return (double)v[i] / 1000.0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_i64(const int64_t *v, size_t n, double p) {
  if (n == 0) return 0;
  return (double)v[(size_t)(p * (double)(n - 1))] / 1000.0;
}

/* Fills r's percentiles from the log (sorts the log's arrays). */
static void lat_summarise(lat_log_t *l, run_result_t *r) {
  size_t n = l->n;
  if (n == 0) return;
  uint64_t *sorted = malloc(n * sizeof *sorted);
  if (sorted == NULL) return;
  memcpy(sorted, l->rtt, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, cmp_u64);
  r->p50 = pct(sorted, n, 0.50);
  r->p99 = pct(sorted, n, 0.99);
  r->p999 = pct(sorted, n, 0.999);
  r->max = (double)sorted[n - 1] / 1000.0;
  uint64_t slow = sorted[(size_t)(0.99 * (double)(n - 1))];
  free(sorted);
  double si = 0, so = 0;
  size_t ns = 0;
  for (size_t i = 0; i < n; i++)
    if (l->rtt[i] >= slow) {
      si += (double)l->in[i];
      so += (double)l->out[i];
      ns++;
    }
  r->slow_in = si / (double)ns / 1000.0;
  r->slow_out = so / (double)ns / 1000.0;
  qsort(l->in, n, sizeof *l->in, cmp_i64);
  qsort(l->out, n, sizeof *l->out, cmp_i64);
  r->in_p50 = pct_i64(l->in, n, 0.50);
  r->in_p99 = pct_i64(l->in, n, 0.99);
  r->out_p50 = pct_i64(l->out, n, 0.50);
  r->out_p99 = pct_i64(l->out, n, 0.99);
}

/* ------------------------------------------------------------- the server */

typedef struct bench_server {
  ts_server_t s;
  sess_t *sess;
  uint32_t n;
} bench_server_t;

static void server_up(bench_server_t *b, const char *dir, uint32_t n_sessions) {
  ts_server_options_t o = {0};
  o.base_dir = dir;
  o.durable = 1;
  o.journal_direct = g_journal_direct;
  o.rt_priority = g_rt;
  o.max_sessions = n_sessions + 8;
  o.max_instruments = 4;
  o.max_accounts = n_sessions + 8;
  o.max_book_orders = 1u << 16;
  o.throttle_rate = 1000000;
  o.ring_capacity = 65536;
  o.segment_size = 256u << 20; /* no segment switch inside a run */
  int rc = ts_server_create(&b->s, &o);
  if (rc != 0) die("server create", rc);
  if ((rc = ts_server_add_key(&b->s, OP_KEY, HG_ROLE_OPERATOR, 0, 0)) != 0) die("add key", rc);
  uint32_t *acc = calloc(n_sessions, sizeof *acc), *firm = calloc(n_sessions, sizeof *firm);
  for (uint32_t i = 0; i < n_sessions; i++) {
    acc[i] = i + 1;
    firm[i] = 1 + i % 16;
    rc = ts_server_add_key(&b->s, KEY_BASE + i, HG_ROLE_TRADER, acc[i], firm[i]);
    if (rc != 0) die("add key", rc);
  }
  if ((rc = ts_server_run(&b->s)) != 0) die("server start", rc);
  if (ch_setup_market(&b->s, OP_KEY, 1, acc, firm, n_sessions) != 0) die("market setup", HG_EINVAL);
  free(acc);
  free(firm);

  b->n = n_sessions;
  b->sess = calloc(n_sessions, sizeof *b->sess);
  if (b->sess == NULL) die("sessions", -ENOMEM);
  for (uint32_t i = 0; i < n_sessions; i++) {
    uint8_t sec[32];
    ts_key_secret(KEY_BASE + i, sec);
    hg_client_config_t cfg;
    hg_client_config_init(&cfg);
    cfg.port = b->s.port;
    cfg.key_id = KEY_BASE + i;
    cfg.secret = sec;
    cfg.secret_len = 32;
    cfg.max_frame = 8192;
    cfg.tx_capacity = 64u * 1024u;
    cfg.nonblocking_send = true;
    cfg.keepalive_ms = 5000;
    rc = hg_client_create(&cfg, &b->sess[i].c);
    if (rc == 0) rc = hg_client_connect(b->sess[i].c);
    if (rc != 0) {
      fprintf(stderr, "session %u of %u: ", i, n_sessions);
      die("login", rc);
    }
    /* Logging in 1000 sessions takes a while: keep the earlier ones alive. */
    if (i % 64 == 63)
      for (uint32_t j = 0; j <= i; j++) hg_client_tick(b->sess[j].c);
  }
  /* Resting sells far above the IOC buys: a book with depth that never trades. */
  for (uint32_t i = 0; i < n_sessions && i < 8; i++) {
    for (int k = 0; k < 50; k++) {
      hg_client_order_t o2 = {.instrument_id = 1, .client_order_id = (uint64_t)1 << 40 | (uint64_t)k,
                              .side = HOURGLASS__V1__SIDE__SIDE_SELL,
                              .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                              .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC, .has_price = true,
                              .price = 90000 + k * 10 + (int64_t)i, .qty = 5};
      uint64_t seq;
      hg_client_new_order(b->sess[i].c, &o2, &seq);
      b->sess[i].due[seq % RING] = 0;
    }
    hg_client_flush(b->sess[i].c, 1000);
  }
}

static void server_down(bench_server_t *b) {
  for (uint32_t i = 0; i < b->n; i++) hg_client_destroy(b->sess[i].c);
  free(b->sess);
  ts_server_stop(&b->s);
}

/* ---------------------------------------------------------------- a run */

/* Reads every frame available on session s; records round trips. */
static void drain(sess_t *s, lat_log_t *l) {
  for (;;) {
    const Hourglass__V1__Envelope *e = NULL;
    int rc = hg_client_recv(s->c, 0, &e);
    if (rc == 0) return;
    if (rc < 0) {
      if (!s->dead) fprintf(stderr, "session lost: %s\n", hg_strerror(rc));
      s->dead = true;
      return;
    }
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_TERMINATE) {
      if (!s->dead) fprintf(stderr, "session terminated: code %u\n", e->terminate->code);
      s->dead = true;
      return;
    }
    if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT) continue;
    uint64_t ref = e->execution_report->ref_seq;
    if (ref == 0) continue;
    uint64_t *d = &s->due[ref % RING];
    if (*d == 0) continue; /* second report of the same request, or warm-up */
    uint64_t t = now_ns();
    if (l->n < l->cap) {
      int64_t stamped = (int64_t)(e->execution_report->ts - l->real_minus_mono);
      l->rtt[l->n] = t > *d ? t - *d : 0;
      l->in[l->n] = stamped - (int64_t)*d;
      l->out[l->n] = (int64_t)t - stamped;
      l->n++;
    }
    *d = 0;
    s->answered++;
    if (e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED) s->rejected++;
  }
}

/*
 * Offers `rate` requests/s for `seconds` spread over sessions [0, nsess),
 * then waits up to 2 s for the stragglers.
 */
static run_result_t run(bench_server_t *b, uint32_t nsess, double rate, double seconds) {
  run_result_t r = {.offered = rate};
  int ep = epoll_create1(EPOLL_CLOEXEC);
  for (uint32_t i = 0; i < nsess; i++) {
    sess_t *s = &b->sess[i];
    s->sent = s->answered = s->rejected = 0;
    memset(s->due, 0, sizeof s->due);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
    epoll_ctl(ep, EPOLL_CTL_ADD, hg_client_fd(s->c), &ev);
    if (g_batch) hg_client_cork(s->c);
  }
  lat_log_t lg = {.cap = (size_t)(rate * seconds * 1.1) + 1024};
  lg.rtt = malloc(lg.cap * sizeof *lg.rtt);
  lg.in = malloc(lg.cap * sizeof *lg.in);
  lg.out = malloc(lg.cap * sizeof *lg.out);
  if (lg.rtt == NULL || lg.in == NULL || lg.out == NULL) lg.cap = 0;
  /* Faulted in now, not by the generator during the timed run. */
  if (lg.cap > 0) {
    memset(lg.rtt, 0, lg.cap * sizeof *lg.rtt);
    memset(lg.in, 0, lg.cap * sizeof *lg.in);
    memset(lg.out, 0, lg.cap * sizeof *lg.out);
  }
  {
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t mono = now_ns();
    lg.real_minus_mono = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec - mono;
  }
  uint64_t total = (uint64_t)(rate * seconds);
  double gap = 1e9 / rate;
  uint64_t t0 = now_ns() + 1000000, k = 0, last_tick = 0;
  uint32_t rr = 0, in_batch = 0;
  struct epoll_event evs[256];
  for (;;) {
    uint64_t now = now_ns();
    /* Send everything that is due (open loop). */
    while (k < total) {
      uint64_t due = t0 + (uint64_t)((double)k * gap);
      if (due > now) break;
      sess_t *s = &b->sess[rr];
      /* Unbatched, sessions take turns per request; batched, per tick (up
       * to BATCH_MAX requests), so a tick's requests share one write. */
      if (!g_batch || ++in_batch == BATCH_MAX) {
        rr = (rr + 1) % nsess;
        in_batch = 0;
      }
      if (s->dead) {
        k++;
        continue;
      }
      hg_client_order_t o = {.instrument_id = 1, .client_order_id = ++s->clid,
                             .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                             .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                             .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC, .has_price = true,
                             .price = 1000 + (int64_t)(k % 50), .qty = 1};
      uint64_t seq = 0;
      int rc = hg_client_new_order(s->c, &o, &seq);
      if (rc == 0 || seq != 0) {
        s->due[seq % RING] = due;
        s->sent++;
      }
      if (rc < 0 && rc != HG_EFULL) {
        if (!s->dead) fprintf(stderr, "session send: %s\n", hg_strerror(rc));
        s->dead = true;
      }
      k++;
    }
    if (in_batch != 0) {
      rr = (rr + 1) % nsess;
      in_batch = 0;
    }
    /* Corked sessions: one write each for what this tick queued (due times
     * were taken per request above, so batching delay counts). */
    for (uint32_t i = 0; g_batch && i < nsess; i++) {
      sess_t *s = &b->sess[i];
      if (s->dead || hg_client_tx_pending(s->c) == 0) continue;
      int rc = hg_client_flush(s->c, 0);
      if (rc < 0 && rc != -EAGAIN) {
        fprintf(stderr, "session send: %s\n", hg_strerror(rc));
        s->dead = true;
      }
    }
    bool done_sending = k >= total;
    uint64_t answered = 0, sent = 0;
    if (done_sending) {
      for (uint32_t i = 0; i < nsess; i++) {
        answered += b->sess[i].answered;
        sent += b->sess[i].sent;
      }
      if (answered >= sent || now > t0 + (uint64_t)(seconds * 1e9) + 2000000000u) break;
    }
    /* Heartbeats and pending writes, every 50 ms for every session. */
    if (now - last_tick > 50000000u) {
      last_tick = now;
      for (uint32_t i = 0; i < nsess; i++) {
        if (b->sess[i].dead) continue;
        hg_client_tick(b->sess[i].c);
        hg_client_flush(b->sess[i].c, 0);
      }
    }
    /* Sleep until the next send is due or a reply arrives (ns resolution:
     * spinning would take a core from the server on a 2-core machine). */
    struct timespec ts = {0, 5000000};
    if (!done_sending) {
      uint64_t next = t0 + (uint64_t)((double)k * gap);
      now = now_ns();
      uint64_t d = next > now ? next - now : 0;
      ts.tv_sec = (time_t)(d / 1000000000u);
      ts.tv_nsec = (long)(d % 1000000000u);
    }
    int n = epoll_pwait2(ep, evs, 256, &ts, NULL);
    for (int i = 0; i < n; i++) drain(&b->sess[evs[i].data.u32], &lg);
    /* Pending bytes (a full socket): retry at once rather than wait 50 ms. */
    for (uint32_t i = 0; i < nsess && n >= 0; i++)
      if (hg_client_tx_pending(b->sess[i].c) > 0) hg_client_flush(b->sess[i].c, 0);
  }
  uint64_t t_end = now_ns();
  for (uint32_t i = 0; i < nsess; i++) {
    sess_t *s = &b->sess[i];
    epoll_ctl(ep, EPOLL_CTL_DEL, hg_client_fd(s->c), NULL);
    if (g_batch && !s->dead) (void)hg_client_uncork(s->c);
    r.sent += s->sent;
    r.answered += s->answered;
    r.rejected += s->rejected;
    if (!s->dead && hg_client_session(s->c) != NULL) r.alive++;
  }
  close(ep);
  /* Achieved: answers per second over the offered window plus the drain. */
  double span = (double)(t_end - t0) / 1e9;
  if (span < seconds) span = seconds;
  r.achieved = (double)r.answered / span;
  r.late_unanswered = r.sent - r.answered;
  lat_summarise(&lg, &r);
  free(lg.rtt);
  free(lg.in);
  free(lg.out);
  return r;
}

/* The machine is shared: each line carries the 1-minute load average, since
 * on two cores every other runnable task delays one of the hops measured. */
static void print_run(const char *label, const run_result_t *r) {
  double load[1] = {0};
  if (getloadavg(load, 1) != 1) load[0] = -1;
  printf("%-10s offered %7.0f/s achieved %7.0f/s sent %7" PRIu64 " unanswered %5" PRIu64
         " rejected %5" PRIu64 "  rtt us p50 %7.0f p99 %7.0f p99.9 %7.0f max %7.0f  load %.2f\n",
         label, r->offered, r->achieved, r->sent, r->late_unanswered, r->rejected, r->p50, r->p99,
         r->p999, r->max, load[0]);
  if (r->answered > 0)
    printf("%-10s legs us: in (due -> sequenced) p50 %6.0f p99 %6.0f, out (sequenced -> received) "
           "p50 %6.0f p99 %6.0f; slowest 1%%: in %6.0f out %6.0f\n",
           "", r->in_p50, r->in_p99, r->out_p50, r->out_p99, r->slow_in, r->slow_out);
  fflush(stdout);
}

/* Throughput kept up: everything answered, nothing refused (busy,
 * throttled), answers at >= 95% of the offered rate, and no runaway queue
 * (p99 under a second). Latency is reported separately. */
static bool sustained(const run_result_t *r) {
  return r->late_unanswered == 0 && r->rejected == 0 && r->achieved >= 0.95 * r->offered &&
         r->p99 < 1000000.0;
}

/* ------------------------------------------------------ raw disk fdatasync */

/*
 * The raw disk: n back-to-back 4 KiB appends, each followed by fdatasync.
 * Returns the per-call p99 and sets *floor99 to the p99 round trip that a
 * perfect group commit (no CPU cost, one sync in flight, as the journal
 * runs) would give orders arriving at a steady rate on this disk in these
 * seconds: an order arriving while sync i runs is written by sync i + 1 and
 * is durable when that ends. Long syncs catch more arrivals than short ones
 * and each arrival waits out the rest of one sync plus the whole next one,
 * so this floor sits above the per-call p99 whenever the disk stalls now
 * and then; it is the fairer yardstick for gateway.rtt_p99_durable_us_at_50k.
 */
static double fdatasync_p99(const char *dir, int n, double *floor99) {
  char path[512];
  snprintf(path, sizeof path, "%s/bench_gateway_fsync.XXXXXX", dir);
  int fd = mkstemp(path);
  if (fd < 0) die("fdatasync file", -errno);
  unlink(path);
  static uint8_t block[4096];
  memset(block, 0x5a, sizeof block);
  uint64_t *t = malloc((size_t)n * sizeof *t);
  uint64_t *start = malloc((size_t)n * sizeof *start);
  uint64_t *end = malloc((size_t)n * sizeof *end);
  if (t == NULL || start == NULL || end == NULL) die("fdatasync trace", -ENOMEM);
  for (int i = 0; i < n; i++) {
    start[i] = now_ns();
    if (pwrite(fd, block, sizeof block, (off_t)i * 4096) != (ssize_t)sizeof block)
      die("pwrite", -errno);
    if (fdatasync(fd) != 0) die("fdatasync", -errno);
    end[i] = now_ns();
    t[i] = end[i] - start[i];
  }
  close(fd);
  /* Arrivals evenly spread over syncs 0 .. n-2 (sync n-1 ends the last). */
  size_t m = 100000, k = 0;
  uint64_t *w = malloc(m * sizeof *w);
  if (w == NULL) die("fdatasync trace", -ENOMEM);
  uint64_t from = start[0], span = start[n - 1] - start[0];
  int i = 0; /* arrivals ascend, so the scan resumes where it stopped */
  for (size_t j = 0; j < m; j++) {
    uint64_t at = from + span * j / m;
    while (i + 2 < n && start[i + 1] <= at) i++;
    w[k++] = end[i + 1] - at;
  }
  qsort(w, k, sizeof *w, cmp_u64);
  *floor99 = pct(w, k, 0.99);
  qsort(t, (size_t)n, sizeof *t, cmp_u64);
  double p50 = pct(t, (size_t)n, 0.5), p99 = pct(t, (size_t)n, 0.99);
  printf("disk       %d x (4 KiB append + fdatasync) in %s: p50 %.0f us p99 %.0f us; "
         "group-commit floor p50 %.0f us p99 %.0f us\n",
         n, dir, p50, p99, pct(w, k, 0.5), *floor99);
  free(w);
  free(start);
  free(end);
  free(t);
  return p99;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  bool quick = false, sweep_only = false;
  const char *disk_dir = ".";
  const char *shm_dir = "/dev/shm";
  uint32_t many = 1000, nsess = 16;
  double seconds = 0;
  double rates[32];
  int nrates = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = true;
    else if (strcmp(argv[i], "--no-batch") == 0) g_batch = false;
    else if (strcmp(argv[i], "--journal-direct") == 0) g_journal_direct = 1;
    else if (strcmp(argv[i], "--rt") == 0 && i + 1 < argc) g_rt = atoi(argv[++i]);
    else if (strcmp(argv[i], "--sweep-only") == 0) sweep_only = true;
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) disk_dir = argv[++i];
    else if (strcmp(argv[i], "--shm") == 0 && i + 1 < argc) shm_dir = argv[++i];
    else if (strcmp(argv[i], "--sessions") == 0 && i + 1 < argc) many = (uint32_t)atoi(argv[++i]);
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--rates") == 0 && i + 1 < argc) {
      for (char *p = strtok(argv[++i], ","); p && nrates < 32; p = strtok(NULL, ","))
        rates[nrates++] = atof(p);
    } else {
      fprintf(stderr,
              "usage: bench_gateway [--quick] [--no-batch] [--journal-direct] [--rt N] [--sweep-only] [--dir DIR] [--shm DIR] "
              "[--sessions N] [--rates a,b,...] [--seconds S]\n");
      return 2;
    }
  }
  if (nrates == 0) {
    static const double q[] = {25000, 50000, 100000, 150000, 200000};
    static const double f[] = {10000, 25000, 50000, 75000, 100000, 125000, 150000, 200000, 250000, 300000};
    const double *src = quick ? q : f;
    nrates = quick ? 5 : 10;
    for (int i = 0; i < nrates; i++) rates[i] = src[i];
  }
  if (seconds <= 0) seconds = quick ? 1.0 : 3.0;
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  printf("bench_gateway: %s, %u sessions for the rate runs, %.1f s per rate, loopback, %s\n",
         quick ? "quick" : "full", nsess, seconds,
         g_batch ? "batched sends (cork)" : "one send per request");

  /* 1. rate sweep, journal on tmpfs. */
  bench_server_t b;
  server_up(&b, shm_dir, nsess);
  (void)run(&b, nsess, 20000, quick ? 0.3 : 1.0); /* warm-up */
  double best = 0;
  run_result_t at50 = {0};
  bool have50 = false;
  int failures_in_a_row = 0;
  for (int i = 0; i < nrates; i++) {
    run_result_t r = run(&b, nsess, rates[i], seconds);
    char label[32];
    snprintf(label, sizeof label, "sweep %s", sustained(&r) ? "ok" : "--");
    print_run(label, &r);
    if (sustained(&r) && r.offered > best) best = r.offered;
    if (quick && !sustained(&r)) break;
    if (rates[i] == 50000) {
      at50 = r;
      have50 = true;
    }
    failures_in_a_row = sustained(&r) ? 0 : failures_in_a_row + 1;
    if (failures_in_a_row >= 2) break; /* past saturation */
  }
  if (sweep_only) {
    server_down(&b);
    printf("RESULT gateway.max_orders_per_s %.0f orders/s\n", best);
    return 0;
  }
  if (!have50) {
    at50 = run(&b, nsess, 50000, seconds);
    print_run("sweep 50k", &at50);
  }
  server_down(&b);

  /* 2. 50k/s, durable, journal on the disk. */
  server_up(&b, disk_dir, nsess);
  (void)run(&b, nsess, 20000, quick ? 0.3 : 1.0);
  run_result_t dur = run(&b, nsess, 50000, seconds * (quick ? 1.5 : 1.0));
  print_run("disk 50k", &dur);
  server_down(&b);

  /* 3. the disk itself. */
  double floor99 = 0;
  double fsync99 = fdatasync_p99(disk_dir, quick ? 300 : 2000, &floor99);

  /* 4. many sessions at once. */
  server_up(&b, shm_dir, many);
  run_result_t ms = run(&b, many, quick ? 10000 : 20000, quick ? 2.0 : 5.0);
  print_run("sessions", &ms);
  printf("sessions   %u logged in, %u alive and fully answered at the end\n", many,
         ms.late_unanswered == 0 ? ms.alive : 0);
  server_down(&b);

  printf("RESULT gateway.max_orders_per_s %.0f orders/s\n", best);
  printf("RESULT gateway.rtt_p50_us_at_50k %.0f us\n", at50.p50);
  printf("RESULT gateway.rtt_p99_us_at_50k %.0f us\n", at50.p99);
  printf("RESULT gateway.rtt_p999_us_at_50k %.0f us\n", at50.p999);
  printf("RESULT gateway.rtt_p99_durable_us_at_50k %.0f us\n", dur.p99);
  printf("RESULT disk.fdatasync_p99_us %.0f us\n", fsync99);
  printf("RESULT disk.group_commit_floor_p99_us %.0f us\n", floor99);
  printf("RESULT gateway.sessions %u sessions\n", ms.late_unanswered == 0 ? ms.alive : 0);
  return 0;
}
