/*
 * bench_floor: the gateway's round trip next to the machine's own floor,
 * measured in the same process run and reported as ratios.
 *
 * Method. The generator of bench_gateway (loadgen.h: 16 sessions, per-tick
 * batching, round trip from each request's due time) offers 50k orders/s
 * to six servers in this process (targets.h): echo (one libuv thread that
 * decodes each order and answers at once with a frame of the gateway's
 * reply size), gateway (journal on tmpfs, --shm), commit (echo + group
 * commit: 64 bytes per order, io_uring writev + fdatasync in --dir, one
 * commit in flight, replies held until durable) and durable (gateway,
 * journal in --dir); gateway and durable run the pipeline in hourglassd's
 * default mode (pipeline.mode = loop), gateway_threads and durable_threads
 * are the same in threads mode, for comparison (RESULT
 * gateway.threads_*). All six start once; each round then runs them one
 * after the other, so a noisy spell hits neighbours alike: 3 short rounds
 * with --quick, 5 otherwise. Figures are medians over the rounds; a ratio
 * is the median of the per-round ratios (gateway / echo, durable /
 * commit), each comparing runs seconds apart. gateway.cpu_us_per_order is
 * process CPU minus the generator thread's (RUSAGE_THREAD) over the tmpfs
 * gateway run, per order answered ("# cpu" gives it for all four servers,
 * and the generator's own). Like the gateway, the floors follow each
 * reply with the IOC's cancel report (the generator skips it), so both send
 * the same frames per order; "# reply frame bytes" checks the sizes match; "# load" gives the load average at start and end.
 * "# wake-ups per order" counts the context switches (voluntary and not)
 * of every thread of the process but the generator's over each run, per
 * order answered: the hand-offs an order costs the server.
 *
 * Usage: bench_floor [--quick] [--rounds N] [--seconds S] [--rate R]
 *        [--dir DIR] [--shm DIR]. Loopback only.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "hourglass/wire.h"
#include "loadgen.h"
#include "targets.h"

#define NSESS 16u
#define MAX_ROUNDS 32
#define KEEPALIVE_MS 60000u /* a fleet is silent while the others run */

enum { T_ECHO, T_GATEWAY, T_COMMIT, T_DURABLE, T_GW_THREADS, T_DUR_THREADS, N_TARGETS };
static const char *const NAMES[N_TARGETS] = {"echo",    "gateway",         "commit",
                                             "durable", "gateway_threads", "durable_threads"};

typedef struct target {
  lg_fleet_t f;
  tg_gateway_t *gw;  /* T_GATEWAY, T_DURABLE */
  tg_floor_t *floor; /* T_ECHO, T_COMMIT */
  double p50[MAX_ROUNDS], p99[MAX_ROUNDS], cpu[MAX_ROUNDS], gen_cpu[MAX_ROUNDS], wakes[MAX_ROUNDS];
  uint64_t unanswered, rejected;
} target_t;

static uint64_t cpu_us(int who) {
  struct rusage ru;
  if (getrusage(who, &ru) != 0) return 0;
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Context switches of every thread of this process except the caller's. */
static uint64_t switches_but_mine(void) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return 0;
  long self = syscall(SYS_gettid);
  uint64_t sum = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || atol(e->d_name) == self) continue;
    char path[300], line[128];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
    FILE *fp = fopen(path, "r");
    if (fp == NULL) continue;
    while (fgets(line, sizeof line, fp) != NULL) {
      unsigned long long v;
      if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
          sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
        sum += v;
    }
    fclose(fp);
  }
  closedir(d);
  return sum;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
  double s[MAX_ROUNDS];
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void print_load(const char *when) {
  double l[3] = {-1, -1, -1};
  if (getloadavg(l, 3) != 3) l[0] = l[1] = l[2] = -1;
  printf("# load %s: %.2f %.2f %.2f\n", when, l[0], l[1], l[2]);
  fflush(stdout);
}

/* Sends one order on session 0 and returns the size of the frame that
 * answers it (the first ExecutionReport naming it), or 0 if none came. */
static size_t reply_frame_bytes(lg_fleet_t *f) {
  hg_client_t *c = f->sess[0].c;
  hg_client_order_t o = {.instrument_id = 1, .client_order_id = 1u << 30,
                         .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC, .has_price = true,
                         .price = 1000, .qty = 1};
  uint64_t seq = 0;
  if (hg_client_new_order(c, &o, &seq) != 0 || hg_client_flush(c, 1000) != 0) return 0;
  for (;;) {
    const Hourglass__V1__Envelope *e = NULL;
    if (hg_client_recv(c, 2000, &e) != 1) return 0;
    if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT ||
        e->execution_report->ref_seq != seq)
      continue;
    size_t body = hourglass__v1__envelope__get_packed_size(e);
    return hg_wire_varint_len(body) + body;
  }
}

int main(int argc, char **argv) {
  bool quick = false;
  int rounds = 0;
  double seconds = 0, rate = 50000;
  const char *disk_dir = ".";
  const char *shm_dir = "/dev/shm";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = true;
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc) rate = atof(argv[++i]);
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) disk_dir = argv[++i];
    else if (strcmp(argv[i], "--shm") == 0 && i + 1 < argc) shm_dir = argv[++i];
    else {
      fprintf(stderr, "usage: bench_floor [--quick] [--rounds N] [--seconds S] [--rate R] "
                      "[--dir DIR] [--shm DIR]\n");
      return 2;
    }
  }
  if (rounds <= 0) rounds = quick ? 3 : 5;
  if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
  if (seconds <= 0) seconds = quick ? 0.8 : 2.0;
  if (rate <= 0) rate = 50000;
  lg_set_prog("bench_floor");
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  printf("bench_floor: %s, %u sessions, %.0f orders/s, %d rounds of %.1f s per server, "
         "journal/commit dir %s, tmpfs %s\n",
         quick ? "quick" : "full", NSESS, rate, rounds, seconds, disk_dir, shm_dir);
  print_load("start");

  /* All six up and warm before the first timed run. */
  static target_t t[N_TARGETS];
  t[T_ECHO].floor = tg_floor_start(TG_ECHO, NULL, 0, NSESS, KEEPALIVE_MS, &t[T_ECHO].f);
  tg_gateway_opts_t go = {.dir = shm_dir, .sessions = NSESS, .keepalive_ms = KEEPALIVE_MS};
  t[T_GATEWAY].gw = tg_gateway_up(&go, &t[T_GATEWAY].f);
  go.threads_mode = 1;
  t[T_GW_THREADS].gw = tg_gateway_up(&go, &t[T_GW_THREADS].f);
  go.threads_mode = 0;
  /* Room for every round's records; more would only wrap around. */
  uint64_t file_bytes = (uint64_t)(rate * seconds * 1.25) * 64u;
  t[T_COMMIT].floor =
      tg_floor_start(TG_COMMIT, disk_dir, file_bytes, NSESS, KEEPALIVE_MS, &t[T_COMMIT].f);
  go.dir = disk_dir;
  t[T_DURABLE].gw = tg_gateway_up(&go, &t[T_DURABLE].f);
  go.threads_mode = 1;
  t[T_DUR_THREADS].gw = tg_gateway_up(&go, &t[T_DUR_THREADS].f);
  for (int k = 0; k < N_TARGETS; k++) (void)lg_run(&t[k].f, NSESS, 20000, quick ? 0.2 : 1.0);

  bool bad = false;
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < N_TARGETS; k++) {
      target_t *x = &t[k];
      uint64_t sw0 = switches_but_mine();
      uint64_t self0 = cpu_us(RUSAGE_SELF), gen0 = cpu_us(RUSAGE_THREAD);
      lg_result_t res = lg_run(&x->f, NSESS, rate, seconds);
      uint64_t self1 = cpu_us(RUSAGE_SELF), gen1 = cpu_us(RUSAGE_THREAD);
      uint64_t sw1 = switches_but_mine();
      uint64_t server_us = (self1 - self0) - (gen1 - gen0);
      char label[32];
      snprintf(label, sizeof label, "%d %s", r + 1, NAMES[k]);
      lg_print(label, &res);
      x->p50[r] = res.p50;
      x->p99[r] = res.p99;
      x->cpu[r] = res.answered ? (double)server_us / (double)res.answered : 0;
      x->gen_cpu[r] = res.answered ? (double)(gen1 - gen0) / (double)res.answered : 0;
      x->wakes[r] = res.answered ? (double)(sw1 - sw0) / (double)res.answered : 0;
      x->unanswered += res.late_unanswered;
      x->rejected += res.rejected;
      bad |= res.answered == 0;
    }
  }
  double rp50[MAX_ROUNDS], rp99[MAX_ROUNDS], dp50[MAX_ROUNDS], dp99[MAX_ROUNDS];
  double trp50[MAX_ROUNDS], trp99[MAX_ROUNDS], tdp50[MAX_ROUNDS], tdp99[MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    rp50[r] = t[T_GATEWAY].p50[r] / t[T_ECHO].p50[r];
    rp99[r] = t[T_GATEWAY].p99[r] / t[T_ECHO].p99[r];
    dp50[r] = t[T_DURABLE].p50[r] / t[T_COMMIT].p50[r];
    dp99[r] = t[T_DURABLE].p99[r] / t[T_COMMIT].p99[r];
    trp50[r] = t[T_GW_THREADS].p50[r] / t[T_ECHO].p50[r];
    trp99[r] = t[T_GW_THREADS].p99[r] / t[T_ECHO].p99[r];
    tdp50[r] = t[T_DUR_THREADS].p50[r] / t[T_COMMIT].p50[r];
    tdp99[r] = t[T_DUR_THREADS].p99[r] / t[T_COMMIT].p99[r];
    printf("# round %d ratios: gateway/echo p50 %.2f p99 %.2f, durable/commit p50 %.2f p99 %.2f"
           " (threads mode: %.2f %.2f, %.2f %.2f)\n",
           r + 1, rp50[r], rp99[r], dp50[r], dp99[r], trp50[r], trp99[r], tdp50[r], tdp99[r]);
  }
  printf("# medians over %d rounds, us:", rounds);
  for (int k = 0; k < N_TARGETS; k++)
    printf(" %s p50 %.0f p99 %.0f%s", NAMES[k], median(t[k].p50, rounds), median(t[k].p99, rounds),
           k + 1 < N_TARGETS ? "," : "\n");
  printf("# cpu us per order, server threads (generator thread):");
  for (int k = 0; k < N_TARGETS; k++)
    printf(" %s %.2f (%.2f)%s", NAMES[k], median(t[k].cpu, rounds), median(t[k].gen_cpu, rounds),
           k + 1 < N_TARGETS ? "," : "\n");
  printf("# wake-ups per order (context switches of the server threads):");
  for (int k = 0; k < N_TARGETS; k++)
    printf(" %s %.2f%s", NAMES[k], median(t[k].wakes, rounds), k + 1 < N_TARGETS ? "," : "\n");
  tg_floor_stats_t cs = tg_floor_stats(t[T_COMMIT].floor);
  if (cs.commits > 0)
    printf("# commit floor: %llu commits, %.1f orders each\n", (unsigned long long)cs.commits,
           (double)cs.records / (double)cs.commits);
  for (int k = 0; k < N_TARGETS; k++)
    if (t[k].unanswered != 0 || t[k].rejected != 0)
      printf("# warning: %s: %llu unanswered, %llu rejected over the rounds\n", NAMES[k],
             (unsigned long long)t[k].unanswered, (unsigned long long)t[k].rejected);
  printf("# reply frame bytes:");
  for (int k = 0; k < N_TARGETS; k++)
    printf(" %s %zu%s", NAMES[k], reply_frame_bytes(&t[k].f), k + 1 < N_TARGETS ? "," : "\n");
  tg_floor_stop(t[T_ECHO].floor, &t[T_ECHO].f);
  tg_gateway_down(t[T_GATEWAY].gw, &t[T_GATEWAY].f);
  tg_floor_stop(t[T_COMMIT].floor, &t[T_COMMIT].f);
  tg_gateway_down(t[T_DURABLE].gw, &t[T_DURABLE].f);
  tg_gateway_down(t[T_GW_THREADS].gw, &t[T_GW_THREADS].f);
  tg_gateway_down(t[T_DUR_THREADS].gw, &t[T_DUR_THREADS].f);
  print_load("end");

  printf("RESULT gateway.floor_echo_p50_us %.0f us\n", median(t[T_ECHO].p50, rounds));
  printf("RESULT gateway.floor_echo_p99_us %.0f us\n", median(t[T_ECHO].p99, rounds));
  printf("RESULT gateway.floor_commit_p50_us %.0f us\n", median(t[T_COMMIT].p50, rounds));
  printf("RESULT gateway.floor_commit_p99_us %.0f us\n", median(t[T_COMMIT].p99, rounds));
  printf("RESULT gateway.rtt_p50_floor_ratio %.2f x\n", median(rp50, rounds));
  printf("RESULT gateway.rtt_p99_floor_ratio %.2f x\n", median(rp99, rounds));
  printf("RESULT gateway.durable_p50_floor_ratio %.2f x\n", median(dp50, rounds));
  printf("RESULT gateway.durable_p99_floor_ratio %.2f x\n", median(dp99, rounds));
  printf("RESULT gateway.cpu_us_per_order %.2f us\n", median(t[T_GATEWAY].cpu, rounds));
  printf("RESULT gateway.wakeups_per_order %.2f switches/order\n", median(t[T_GATEWAY].wakes, rounds));
  printf("RESULT gateway.threads_rtt_p50_us %.0f us\n", median(t[T_GW_THREADS].p50, rounds));
  printf("RESULT gateway.threads_rtt_p99_us %.0f us\n", median(t[T_GW_THREADS].p99, rounds));
  printf("RESULT gateway.threads_rtt_p50_floor_ratio %.2f x\n", median(trp50, rounds));
  printf("RESULT gateway.threads_rtt_p99_floor_ratio %.2f x\n", median(trp99, rounds));
  printf("RESULT gateway.threads_durable_p50_floor_ratio %.2f x\n", median(tdp50, rounds));
  printf("RESULT gateway.threads_durable_p99_floor_ratio %.2f x\n", median(tdp99, rounds));
  printf("RESULT gateway.threads_cpu_us_per_order %.2f us\n", median(t[T_GW_THREADS].cpu, rounds));
  printf("RESULT gateway.threads_wakeups_per_order %.2f switches/order\n", median(t[T_GW_THREADS].wakes, rounds));
  if (bad) {
    fprintf(stderr, "bench_floor: a run had no answer at all; its figures are meaningless\n");
    return 1;
  }
  return 0;
}
