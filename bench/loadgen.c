/*
 * loadgen.c - the open-loop load generator (loadgen.h): sessions, the
 * due-time schedule with per-tick batching, the epoll wait, and the
 * round-trip log turned into percentiles.
 *
 * The generator never spins: between sends it sleeps in epoll_pwait2 until
 * the next request is due or a reply arrives (ns resolution), since on a
 * 2-core machine a spinning generator would take a core from the server.
 */
#include "loadgen.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/error.h"

static const char *g_prog = "bench";

uint64_t lg_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void lg_set_prog(const char *name) { g_prog = name; }

void lg_die(const char *what, int err) {
  fprintf(stderr, "%s: %s: %s\n", g_prog, what, hg_strerror(err));
  exit(1);
}

int lg_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

double lg_pct(const uint64_t *v, size_t n, double p) {
  if (n == 0) return 0;
  size_t i = (size_t)(p * (double)(n - 1));
  return (double)v[i] / 1000.0;
}

/* Per answered request of a run: round trip and its two legs, in ns. */
typedef struct lat_log {
  uint64_t *rtt;
  int64_t *in, *out;
  size_t n, cap;
  uint64_t real_minus_mono; /* CLOCK_REALTIME - CLOCK_MONOTONIC at the start */
} lat_log_t;

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_i64(const int64_t *v, size_t n, double p) {
  if (n == 0) return 0;
  return (double)v[(size_t)(p * (double)(n - 1))] / 1000.0;
}

/* Fills r's percentiles from the log (sorts the log's arrays). */
static void lat_summarise(lat_log_t *l, lg_result_t *r) {
  size_t n = l->n;
  if (n == 0) return;
  uint64_t *sorted = malloc(n * sizeof *sorted);
  if (sorted == NULL) return;
  memcpy(sorted, l->rtt, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, lg_cmp_u64);
  r->p50 = lg_pct(sorted, n, 0.50);
  r->p99 = lg_pct(sorted, n, 0.99);
  r->p999 = lg_pct(sorted, n, 0.999);
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

/* ------------------------------------------------------------- the fleet */

int lg_fleet_login(lg_fleet_t *f, uint16_t port, uint64_t key_base, uint32_t n,
                   lg_secret_fn *secret, uint32_t keepalive_ms) {
  return lg_fleet_login_tls(f, port, key_base, n, secret, keepalive_ms, NULL);
}

int lg_fleet_login_tls(lg_fleet_t *f, uint16_t port, uint64_t key_base, uint32_t n,
                       lg_secret_fn *secret, uint32_t keepalive_ms, const char *tls_ca) {
  memset(f, 0, sizeof *f);
  f->batch = true;
  f->sess = calloc(n, sizeof *f->sess);
  if (f->sess == NULL) return -ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    uint8_t sec[32];
    secret(key_base + i, sec);
    hg_client_config_t cfg;
    hg_client_config_init(&cfg);
    cfg.port = port;
    cfg.key_id = key_base + i;
    cfg.secret = sec;
    cfg.secret_len = 32;
    cfg.max_frame = 8192;
    cfg.tx_capacity = 64u * 1024u;
    cfg.nonblocking_send = true;
    cfg.keepalive_ms = keepalive_ms;
    cfg.tls = tls_ca != NULL;
    cfg.tls_ca_file = tls_ca;
    int rc = hg_client_create(&cfg, &f->sess[i].c);
    if (rc == 0) rc = hg_client_connect(f->sess[i].c);
    if (rc != 0) {
      fprintf(stderr, "session %u of %u: ", i, n);
      f->n = i + 1;
      lg_fleet_close(f);
      return rc;
    }
    /* Logging in 1000 sessions takes a while: keep the earlier ones alive. */
    if (i % 64 == 63)
      for (uint32_t j = 0; j <= i; j++) hg_client_tick(f->sess[j].c);
  }
  f->n = n;
  return 0;
}

void lg_fleet_close(lg_fleet_t *f) {
  for (uint32_t i = 0; i < f->n; i++) hg_client_destroy(f->sess[i].c);
  free(f->sess);
  memset(f, 0, sizeof *f);
}

/* ---------------------------------------------------------------- a run */

/* Reads every frame available on session s; records round trips. */
static void drain(lg_sess_t *s, lat_log_t *l) {
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
    uint64_t *d = &s->due[ref % LG_RING];
    if (*d == 0) continue; /* second report of the same request, or warm-up */
    uint64_t t = lg_now_ns();
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

lg_result_t lg_run(lg_fleet_t *f, uint32_t nsess, double rate, double seconds) {
  lg_result_t r = {.offered = rate};
  bool batch = f->batch;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  for (uint32_t i = 0; i < nsess; i++) {
    lg_sess_t *s = &f->sess[i];
    s->sent = s->answered = s->rejected = 0;
    memset(s->due, 0, sizeof s->due);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
    epoll_ctl(ep, EPOLL_CTL_ADD, hg_client_fd(s->c), &ev);
    if (batch) hg_client_cork(s->c);
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
    uint64_t mono = lg_now_ns();
    lg.real_minus_mono = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec - mono;
  }
  uint64_t total = (uint64_t)(rate * seconds);
  double gap = 1e9 / rate;
  uint64_t t0 = lg_now_ns() + 1000000, k = 0, last_tick = 0;
  uint32_t rr = 0, in_batch = 0;
  struct epoll_event evs[256];
  for (;;) {
    uint64_t now = lg_now_ns();
    /* Send everything that is due (open loop). */
    while (k < total) {
      uint64_t due = t0 + (uint64_t)((double)k * gap);
      if (due > now) break;
      lg_sess_t *s = &f->sess[rr];
      /* Unbatched, sessions take turns per request; batched, per tick (up
       * to LG_BATCH_MAX requests), so a tick's requests share one write. */
      if (!batch || ++in_batch == LG_BATCH_MAX) {
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
        s->due[seq % LG_RING] = due;
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
    for (uint32_t i = 0; batch && i < nsess; i++) {
      lg_sess_t *s = &f->sess[i];
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
        answered += f->sess[i].answered;
        sent += f->sess[i].sent;
      }
      if (answered >= sent || now > t0 + (uint64_t)(seconds * 1e9) + 2000000000u) break;
    }
    /* Heartbeats and pending writes, every 50 ms for every session. */
    if (now - last_tick > 50000000u) {
      last_tick = now;
      for (uint32_t i = 0; i < nsess; i++) {
        if (f->sess[i].dead) continue;
        hg_client_tick(f->sess[i].c);
        hg_client_flush(f->sess[i].c, 0);
      }
    }
    /* Sleep until the next send is due or a reply arrives. */
    struct timespec ts = {0, 5000000};
    if (!done_sending) {
      uint64_t next = t0 + (uint64_t)((double)k * gap);
      now = lg_now_ns();
      uint64_t d = next > now ? next - now : 0;
      ts.tv_sec = (time_t)(d / 1000000000u);
      ts.tv_nsec = (long)(d % 1000000000u);
    }
    int n = epoll_pwait2(ep, evs, 256, &ts, NULL);
    if (n < 0 && errno == ENOSYS) /* e.g. under valgrind: ms resolution instead */
      n = epoll_wait(ep, evs, 256, (int)((ts.tv_sec * 1000000000 + ts.tv_nsec + 999999) / 1000000));
    for (int i = 0; i < n; i++) drain(&f->sess[evs[i].data.u32], &lg);
    /* Pending bytes (a full socket): retry at once rather than wait 50 ms. */
    for (uint32_t i = 0; i < nsess && n >= 0; i++)
      if (hg_client_tx_pending(f->sess[i].c) > 0) hg_client_flush(f->sess[i].c, 0);
  }
  uint64_t t_end = lg_now_ns();
  for (uint32_t i = 0; i < nsess; i++) {
    lg_sess_t *s = &f->sess[i];
    epoll_ctl(ep, EPOLL_CTL_DEL, hg_client_fd(s->c), NULL);
    if (batch && !s->dead) (void)hg_client_uncork(s->c);
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
void lg_print(const char *label, const lg_result_t *r) {
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

bool lg_sustained(const lg_result_t *r) {
  return r->late_unanswered == 0 && r->rejected == 0 && r->achieved >= 0.95 * r->offered &&
         r->p99 < 1000000.0;
}
