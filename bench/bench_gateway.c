/*
 * bench_gateway: the gateway under an open-loop load over loopback TCP.
 *
 * The server (pipeline + gateway, targets.h) runs in this process on its
 * own threads; the load generator (loadgen.h) is the main thread driving N
 * client-library sessions (hg_client, non-blocking sends) through one
 * epoll set. Offered load is open loop: request k of a run is due at
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
 *     the 50k step gives rtt_p50/p99_us_at_50k. After phase 4 the same
 *     ladder runs with pipeline.mode = threads (the pipelined layout:
 *     engine and journal threads): RESULT gateway.threads_max_orders_per_s,
 *     and gateway.max_orders_loop_vs_threads_ratio, the loop's over it
 *     (not with --pipe threads, whose phase 1 is that ladder).
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
 *  5. TLS: the same gateway with a TLS 1.3 listener (throwaway P-256
 *     certificates, TLS_AES_256_GCM_SHA384 as negotiated) and every session
 *     over TLS, journal on tmpfs: 50k/s gives RESULT gateway.tls_rtt_p50_us
 *     and tls_rtt_p99_us, and gateway.tls_vs_plain_ratio is its p50 over
 *     phase 1's plain p50 at 50k (same process, same run); a rate ladder as
 *     in phase 1 gives gateway.tls_max_orders_per_s. --tls runs phase 1's
 *     50k step and this phase only; --no-tls skips it.
 *
 * Batching: by default each session is corked (hg_client_cork), sessions
 * take turns per generator tick instead of per request, and the requests
 * due at one tick (up to LG_BATCH_MAX, then the next session) leave in one
 * write, as a real client sending a burst would; the round trip still
 * counts from each request's own due time (loadgen.h). --no-batch: one send per
 * request, sessions taking turns per request (the earlier generator).
 *
 * Usage: bench_gateway [--quick] [--no-batch] [--journal-direct] [--rt N] [--sweep-only] [--dir DIR]
 *        [--tls | --no-tls]
 *        [--sessions N] [--rates a,b,c] [--seconds S]. --sweep-only stops
 *        after phase 1 (for perf stat over a fixed load). Loopback only. The machine is shared: figures vary.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "targets.h"

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
/* --pipe threads|loop: the pipeline mode (pipeline.mode); hourglassd's
 * default, loop, unless told. */
static int g_threads_mode = 0;

/* The real gateway in this process and the sessions logged in to it. */
typedef struct bench_server {
  tg_gateway_t *g;
  lg_fleet_t f;
} bench_server_t;

static void server_up_tls(bench_server_t *b, const char *dir, uint32_t n_sessions, bool tls) {
  tg_gateway_opts_t o = {.dir = dir, .sessions = n_sessions, .journal_direct = g_journal_direct,
                         .rt_priority = g_rt, .tls = tls, .threads_mode = g_threads_mode};
  b->g = tg_gateway_up(&o, &b->f);
  b->f.batch = g_batch;
}

static void server_up(bench_server_t *b, const char *dir, uint32_t n_sessions) {
  server_up_tls(b, dir, n_sessions, false);
}

static void server_down(bench_server_t *b) { tg_gateway_down(b->g, &b->f); }

static lg_result_t run(bench_server_t *b, uint32_t nsess, double rate, double seconds) {
  return lg_run(&b->f, nsess, rate, seconds);
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
  if (fd < 0) lg_die("fdatasync file", -errno);
  unlink(path);
  static uint8_t block[4096];
  memset(block, 0x5a, sizeof block);
  uint64_t *t = malloc((size_t)n * sizeof *t);
  uint64_t *start = malloc((size_t)n * sizeof *start);
  uint64_t *end = malloc((size_t)n * sizeof *end);
  if (t == NULL || start == NULL || end == NULL) lg_die("fdatasync trace", -ENOMEM);
  for (int i = 0; i < n; i++) {
    start[i] = lg_now_ns();
    if (pwrite(fd, block, sizeof block, (off_t)i * 4096) != (ssize_t)sizeof block)
      lg_die("pwrite", -errno);
    if (fdatasync(fd) != 0) lg_die("fdatasync", -errno);
    end[i] = lg_now_ns();
    t[i] = end[i] - start[i];
  }
  close(fd);
  /* Arrivals evenly spread over syncs 0 .. n-2 (sync n-1 ends the last). */
  size_t m = 100000, k = 0;
  uint64_t *w = malloc(m * sizeof *w);
  if (w == NULL) lg_die("fdatasync trace", -ENOMEM);
  uint64_t from = start[0], span = start[n - 1] - start[0];
  int i = 0; /* arrivals ascend, so the scan resumes where it stopped */
  for (size_t j = 0; j < m; j++) {
    uint64_t at = from + span * j / m;
    while (i + 2 < n && start[i + 1] <= at) i++;
    w[k++] = end[i + 1] - at;
  }
  qsort(w, k, sizeof *w, lg_cmp_u64);
  *floor99 = lg_pct(w, k, 0.99);
  qsort(t, (size_t)n, sizeof *t, lg_cmp_u64);
  double p50 = lg_pct(t, (size_t)n, 0.5), p99 = lg_pct(t, (size_t)n, 0.99);
  printf("disk       %d x (4 KiB append + fdatasync) in %s: p50 %.0f us p99 %.0f us; "
         "group-commit floor p50 %.0f us p99 %.0f us\n",
         n, dir, p50, p99, lg_pct(w, k, 0.5), *floor99);
  free(w);
  free(start);
  free(end);
  free(t);
  return p99;
}

/* The rate ladder of phase 1 on b: the highest sustained rate, and the
 * 50k step's result in *at50 (measured on its own if the ladder skipped
 * it). */
static double sweep(bench_server_t *b, const char *name, uint32_t nsess, const double *rates,
                    int nrates, double seconds, bool quick, lg_result_t *at50) {
  double best = 0;
  bool have50 = false;
  int failures_in_a_row = 0;
  for (int i = 0; i < nrates; i++) {
    lg_result_t r = run(b, nsess, rates[i], seconds);
    char label[32];
    snprintf(label, sizeof label, "%s %s", name, lg_sustained(&r) ? "ok" : "--");
    lg_print(label, &r);
    if (lg_sustained(&r) && r.offered > best) best = r.offered;
    if (rates[i] == 50000) {
      *at50 = r;
      have50 = true;
    }
    if (quick && !lg_sustained(&r)) break;
    failures_in_a_row = lg_sustained(&r) ? 0 : failures_in_a_row + 1;
    if (failures_in_a_row >= 2) break; /* past saturation */
  }
  if (!have50) {
    *at50 = run(b, nsess, 50000, seconds);
    char label[32];
    snprintf(label, sizeof label, "%s 50k", name);
    lg_print(label, at50);
  }
  return best;
}

/* Phase 5: TLS on tmpfs; prints its RESULT lines against plain50. */
static void tls_phase(const char *shm_dir, uint32_t nsess, const double *rates, int nrates,
                      double seconds, bool quick, const lg_result_t *plain50) {
  bench_server_t b;
  server_up_tls(&b, shm_dir, nsess, true);
  (void)run(&b, nsess, 20000, quick ? 0.3 : 1.0); /* warm-up */
  lg_result_t at50 = {0};
  double best = sweep(&b, "tls", nsess, rates, nrates, seconds, quick, &at50);
  server_down(&b);
  printf("RESULT gateway.tls_rtt_p50_us %.0f us\n", at50.p50);
  printf("RESULT gateway.tls_rtt_p99_us %.0f us\n", at50.p99);
  printf("RESULT gateway.tls_max_orders_per_s %.0f orders/s\n", best);
  printf("RESULT gateway.tls_vs_plain_ratio %.2f x\n",
         plain50->p50 > 0 ? at50.p50 / plain50->p50 : 0.0);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  bool quick = false, sweep_only = false, tls_only = false, no_tls = false;
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
    else if (strcmp(argv[i], "--tls") == 0) tls_only = true;
    else if (strcmp(argv[i], "--no-tls") == 0) no_tls = true;
    else if (strcmp(argv[i], "--pipe") == 0 && i + 1 < argc)
      g_threads_mode = strcmp(argv[++i], "threads") == 0;
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) disk_dir = argv[++i];
    else if (strcmp(argv[i], "--shm") == 0 && i + 1 < argc) shm_dir = argv[++i];
    else if (strcmp(argv[i], "--sessions") == 0 && i + 1 < argc) many = (uint32_t)atoi(argv[++i]);
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--rates") == 0 && i + 1 < argc) {
      for (char *p = strtok(argv[++i], ","); p && nrates < 32; p = strtok(NULL, ","))
        rates[nrates++] = atof(p);
    } else {
      fprintf(stderr,
              "usage: bench_gateway [--quick] [--no-batch] [--journal-direct] [--rt N] [--pipe threads|loop] [--sweep-only] [--dir DIR] [--shm DIR] "
              "[--sessions N] [--rates a,b,...] [--seconds S] [--tls | --no-tls]\n");
      return 2;
    }
  }
  if (nrates == 0) {
    static const double q[] = {25000,  50000,  100000, 200000, 300000,
                               400000, 500000, 600000, 700000, 800000};
    static const double f[] = {10000,  25000,  50000,  75000,  100000, 150000, 200000,
                               300000, 400000, 500000, 600000, 700000, 800000, 1000000};
    const double *src = quick ? q : f;
    nrates = quick ? (int)(sizeof q / sizeof q[0]) : (int)(sizeof f / sizeof f[0]);
    for (int i = 0; i < nrates; i++) rates[i] = src[i];
  }
  if (seconds <= 0) seconds = quick ? 1.0 : 3.0;
  lg_set_prog("bench_gateway");
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

  /* 1. rate sweep, journal on tmpfs (--tls: its 50k step only). */
  bench_server_t b;
  server_up(&b, shm_dir, nsess);
  (void)run(&b, nsess, 20000, quick ? 0.3 : 1.0); /* warm-up */
  lg_result_t at50 = {0};
  double best = 0;
  if (tls_only) {
    at50 = run(&b, nsess, 50000, seconds);
    lg_print("plain 50k", &at50);
  } else {
    best = sweep(&b, "sweep", nsess, rates, nrates, seconds, quick, &at50);
  }
  if (sweep_only) {
    server_down(&b);
    printf("RESULT gateway.max_orders_per_s %.0f orders/s\n", best);
    return 0;
  }
  server_down(&b);
  if (tls_only) {
    printf("RESULT gateway.rtt_p50_us_at_50k %.0f us\n", at50.p50);
    tls_phase(shm_dir, nsess, rates, nrates, seconds, quick, &at50);
    return 0;
  }

  /* 2. 50k/s, durable, journal on the disk. */
  server_up(&b, disk_dir, nsess);
  (void)run(&b, nsess, 20000, quick ? 0.3 : 1.0);
  lg_result_t dur = run(&b, nsess, 50000, seconds * (quick ? 1.5 : 1.0));
  lg_print("disk 50k", &dur);
  server_down(&b);

  /* 3. the disk itself. */
  double floor99 = 0;
  double fsync99 = fdatasync_p99(disk_dir, quick ? 300 : 2000, &floor99);

  /* 4. many sessions at once. */
  server_up(&b, shm_dir, many);
  lg_result_t ms = run(&b, many, quick ? 10000 : 20000, quick ? 2.0 : 5.0);
  lg_print("sessions", &ms);
  printf("sessions   %u logged in, %u alive and fully answered at the end\n", many,
         ms.late_unanswered == 0 ? ms.alive : 0);
  server_down(&b);

  /* 4b. the ladder of phase 1 in threads mode, for the loop's ratio to it
   * in the same run (not with --pipe threads: phase 1 was that ladder);
   * last, so that its saturated steps do not precede the durable run. */
  double threads_best = 0;
  if (!g_threads_mode) {
    g_threads_mode = 1;
    lg_result_t t50;
    server_up(&b, shm_dir, nsess);
    (void)run(&b, nsess, 20000, quick ? 0.3 : 1.0);
    threads_best = sweep(&b, "threads", nsess, rates, nrates, seconds, quick, &t50);
    server_down(&b);
    g_threads_mode = 0;
  }

  printf("RESULT gateway.max_orders_per_s %.0f orders/s\n", best);
  if (!g_threads_mode) {
    printf("RESULT gateway.threads_max_orders_per_s %.0f orders/s\n", threads_best);
    printf("RESULT gateway.max_orders_loop_vs_threads_ratio %.2f x\n",
           threads_best > 0 ? best / threads_best : 0);
  }
  printf("RESULT gateway.rtt_p50_us_at_50k %.0f us\n", at50.p50);
  printf("RESULT gateway.rtt_p99_us_at_50k %.0f us\n", at50.p99);
  printf("RESULT gateway.rtt_p999_us_at_50k %.0f us\n", at50.p999);
  printf("RESULT gateway.rtt_p99_durable_us_at_50k %.0f us\n", dur.p99);
  printf("RESULT disk.fdatasync_p99_us %.0f us\n", fsync99);
  printf("RESULT disk.group_commit_floor_p99_us %.0f us\n", floor99);
  printf("RESULT gateway.sessions %u sessions\n", ms.late_unanswered == 0 ? ms.alive : 0);

  /* 5. TLS. */
  if (!no_tls) tls_phase(shm_dir, nsess, rates, nrates, seconds, quick, &at50);
  return 0;
}
