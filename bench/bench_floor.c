/*
 * bench_floor: the gateway's round trip next to the machine's own floor,
 * measured in the same process run and reported as ratios.
 *
 * Method. The generator of bench_gateway (loadgen.h: 16 sessions, per-tick
 * batching, round trip from each request's due time) offers 50k orders/s
 * to seven servers in this process (targets.h): epoll (the bare floor: one
 * thread in a plain epoll loop that decodes each order and answers at once
 * with the gateway's two frames), echo (the same answers from one libuv
 * thread), gateway (journal on tmpfs, --shm), commit (echo + group commit:
 * 64 bytes per order, io_uring writev + fdatasync in --dir, one commit in
 * flight, replies held until durable) and durable (gateway, journal in
 * --dir); gateway and durable run the pipeline in hourglassd's default
 * mode (pipeline.mode = loop), gateway_threads and durable_threads are the
 * same in threads mode, for comparison (RESULT gateway.threads_*);
 * gateway_marks is gateway with marks running: a MARK command every 1 s
 * through the same pipeline as the orders, as hourglassd's mark timer
 * sends them (targets.c marker_main, daemon/serve.c mark_tick), and
 * gateway.marks_rtt_p50_ratio (p99 too) its round trip over gateway's,
 * per round, runs seconds apart: the order path's cost with marks
 * running (gateway.rtt_p50_floor_ratio stays the gateway's alone). All
 * start once; each round then runs them one after the other, so a noisy
 * spell hits neighbours alike: 3 short rounds with --quick, 5 otherwise.
 * Figures are medians over the rounds; a ratio is the median of the
 * per-round ratios, each comparing runs seconds apart: gateway / epoll
 * (gateway.rtt_*_floor_ratio), gateway / echo (rtt_*_echo_floor_ratio),
 * durable / commit. CPU per order is process CPU minus the generator
 * thread's (RUSAGE_THREAD) over a target's run, per order answered ("# cpu"
 * gives it for every server, and the generator's own);
 * gateway.cpu_floor_ratio is the gateway's over the epoll floor's. Like
 * the gateway, the floors follow each reply with the IOC's cancel report
 * (the generator skips it), so all send the same frames per order; "#
 * reply frame bytes" checks the sizes match (a byte may differ where a
 * session's seq crosses a varint length); "# load" gives the load average
 * at start and end. "# wake-ups per order" counts the context switches
 * (voluntary and not) of every thread of the process but the generator's
 * over each run, per order answered: the hand-offs an order costs the
 * server. --only NAME,... starts and runs only those servers (for
 * profiling one of them); RESULT lines need them all.
 *
 * Usage: bench_floor [--quick] [--rounds N] [--seconds S] [--rate R]
 *        [--dir DIR] [--shm DIR] [--only NAME,...]. Loopback only.
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
#define MARK_MS 1000u       /* hourglassd's default clearing.mark_interval_ms */

enum {
  T_EPOLL,
  T_ECHO,
  T_GATEWAY,
  T_GW_MARKS,
  T_COMMIT,
  T_DURABLE,
  T_GW_THREADS,
  T_DUR_THREADS,
  N_TARGETS
};
static const char *const NAMES[N_TARGETS] = {
    "epoll",   "echo",            "gateway",        "gateway_marks",
    "commit",  "durable",         "gateway_threads", "durable_threads"};

typedef struct target {
  lg_fleet_t f;
  tg_gateway_t *gw;  /* T_GATEWAY, T_GW_MARKS, T_DURABLE, the threads ones */
  tg_floor_t *floor; /* T_EPOLL, T_ECHO, T_COMMIT */
  bool on;            /* started (all of them unless --only) */
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

/* Marks the targets --only names (a comma list) as on; all of them when
 * there is no list. Returns whether all are on. */
static bool only_parse(const char *only, target_t *t) {
  for (int k = 0; k < N_TARGETS; k++) {
    t[k].on = only == NULL;
    if (only == NULL) continue;
    size_t n = strlen(NAMES[k]);
    for (const char *p = only; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
      if (strncmp(p, NAMES[k], n) == 0 && (p[n] == ',' || p[n] == '\0')) t[k].on = true;
  }
  bool all = true;
  for (int k = 0; k < N_TARGETS; k++) all &= t[k].on;
  return all;
}

static bool any_on(const target_t *t) {
  for (int k = 0; k < N_TARGETS; k++)
    if (t[k].on) return true;
  return false;
}

/* The median over the rounds of a / b, per round, of one figure. */
static double ratio(const double *a, const double *b, int rounds) {
  double v[MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) v[r] = b[r] > 0 ? a[r] / b[r] : 0;
  return median(v, rounds);
}

/* The figures of one pipeline mode (pre "" or "threads_"): its tmpfs
 * gateway gw over the epoll floor, its durable one du over the commit floor. */
static void print_mode(const char *pre, const target_t *gw, const target_t *du, const target_t *t,
                       int rounds) {
  const target_t *ep = &t[T_EPOLL], *cm = &t[T_COMMIT];
  printf("RESULT gateway.%srtt_p50_floor_ratio %.2f x\n", pre, ratio(gw->p50, ep->p50, rounds));
  printf("RESULT gateway.%srtt_p99_floor_ratio %.2f x\n", pre, ratio(gw->p99, ep->p99, rounds));
  printf("RESULT gateway.%sdurable_p50_floor_ratio %.2f x\n", pre, ratio(du->p50, cm->p50, rounds));
  printf("RESULT gateway.%sdurable_p99_floor_ratio %.2f x\n", pre, ratio(du->p99, cm->p99, rounds));
  printf("RESULT gateway.%scpu_us_per_order %.2f us\n", pre, median(gw->cpu, rounds));
  printf("RESULT gateway.%swakeups_per_order %.2f switches/order\n", pre, median(gw->wakes, rounds));
}

/* A floor's own figures: latency, CPU and context switches per order. */
static void print_floor(const char *name, const target_t *f, int rounds, bool costs) {
  printf("RESULT gateway.floor_%s_p50_us %.0f us\n", name, median(f->p50, rounds));
  printf("RESULT gateway.floor_%s_p99_us %.0f us\n", name, median(f->p99, rounds));
  if (!costs) return;
  printf("RESULT gateway.floor_%s_cpu_us_per_order %.2f us\n", name, median(f->cpu, rounds));
  printf("RESULT gateway.floor_%s_wakeups_per_order %.2f switches/order\n", name,
         median(f->wakes, rounds));
}

static void print_results(const target_t *t, int rounds) {
  const target_t *ep = &t[T_EPOLL], *uv = &t[T_ECHO], *gw = &t[T_GATEWAY], *gt = &t[T_GW_THREADS];
  print_floor("epoll", ep, rounds, true);
  print_floor("echo", uv, rounds, true);
  print_floor("commit", &t[T_COMMIT], rounds, false);
  print_mode("", gw, &t[T_DURABLE], t, rounds);
  printf("RESULT gateway.rtt_p50_echo_floor_ratio %.2f x\n", ratio(gw->p50, uv->p50, rounds));
  printf("RESULT gateway.rtt_p99_echo_floor_ratio %.2f x\n", ratio(gw->p99, uv->p99, rounds));
  printf("RESULT gateway.cpu_floor_ratio %.2f x\n", ratio(gw->cpu, ep->cpu, rounds));
  printf("RESULT gateway.cpu_echo_floor_ratio %.2f x\n", ratio(gw->cpu, uv->cpu, rounds));
  /* the order path's cost with marks running: same gateway, same run */
  printf("RESULT gateway.marks_rtt_p50_ratio %.2f x\n", ratio(t[T_GW_MARKS].p50, gw->p50, rounds));
  printf("RESULT gateway.marks_rtt_p99_ratio %.2f x\n", ratio(t[T_GW_MARKS].p99, gw->p99, rounds));
  printf("RESULT gateway.threads_rtt_p50_us %.0f us\n", median(gt->p50, rounds));
  printf("RESULT gateway.threads_rtt_p99_us %.0f us\n", median(gt->p99, rounds));
  print_mode("threads_", gt, &t[T_DUR_THREADS], t, rounds);
}

int main(int argc, char **argv) {
  bool quick = false;
  int rounds = 0;
  double seconds = 0, rate = 50000;
  const char *disk_dir = ".";
  const char *shm_dir = "/dev/shm";
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = true;
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
    else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc) rate = atof(argv[++i]);
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) disk_dir = argv[++i];
    else if (strcmp(argv[i], "--shm") == 0 && i + 1 < argc) shm_dir = argv[++i];
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "usage: bench_floor [--quick] [--rounds N] [--seconds S] [--rate R] "
                      "[--dir DIR] [--shm DIR] [--only NAME,...]\n");
      return 2;
    }
  }
  static target_t t[N_TARGETS];
  bool all = only_parse(only, t);
  if (!any_on(t)) {
    fprintf(stderr, "bench_floor: --only takes names among epoll, echo, gateway, gateway_marks, "
                    "commit, durable, gateway_threads, durable_threads\n");
    return 2;
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

  /* All of them up and warm before the first timed run. */
  if (t[T_EPOLL].on)
    t[T_EPOLL].floor = tg_floor_start(TG_EPOLL, NULL, 0, NSESS, KEEPALIVE_MS, &t[T_EPOLL].f);
  if (t[T_ECHO].on)
    t[T_ECHO].floor = tg_floor_start(TG_ECHO, NULL, 0, NSESS, KEEPALIVE_MS, &t[T_ECHO].f);
  tg_gateway_opts_t go = {.dir = shm_dir, .sessions = NSESS, .keepalive_ms = KEEPALIVE_MS};
  if (t[T_GATEWAY].on) t[T_GATEWAY].gw = tg_gateway_up(&go, &t[T_GATEWAY].f);
  go.mark_ms = MARK_MS;
  if (t[T_GW_MARKS].on) t[T_GW_MARKS].gw = tg_gateway_up(&go, &t[T_GW_MARKS].f);
  go.mark_ms = 0;
  go.threads_mode = 1;
  if (t[T_GW_THREADS].on) t[T_GW_THREADS].gw = tg_gateway_up(&go, &t[T_GW_THREADS].f);
  go.threads_mode = 0;
  /* Room for every round's records; more would only wrap around. */
  uint64_t file_bytes = (uint64_t)(rate * seconds * 1.25) * 64u;
  if (t[T_COMMIT].on)
    t[T_COMMIT].floor =
        tg_floor_start(TG_COMMIT, disk_dir, file_bytes, NSESS, KEEPALIVE_MS, &t[T_COMMIT].f);
  go.dir = disk_dir;
  if (t[T_DURABLE].on) t[T_DURABLE].gw = tg_gateway_up(&go, &t[T_DURABLE].f);
  go.threads_mode = 1;
  if (t[T_DUR_THREADS].on) t[T_DUR_THREADS].gw = tg_gateway_up(&go, &t[T_DUR_THREADS].f);
  for (int k = 0; k < N_TARGETS; k++)
    if (t[k].on) (void)lg_run(&t[k].f, NSESS, 20000, quick ? 0.2 : 1.0);

  bool bad = false;
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < N_TARGETS; k++) {
      target_t *x = &t[k];
      if (!x->on) continue;
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
  if (all) {
    for (int r = 0; r < rounds; r++)
      printf(
          "# round %d ratios: gateway/epoll p50 %.2f p99 %.2f, gateway/echo p50 %.2f p99 %.2f, "
          "durable/commit p50 %.2f p99 %.2f (threads mode: %.2f %.2f, %.2f %.2f), "
          "gateway_marks/gateway p50 %.2f p99 %.2f\n",
          r + 1, t[T_GATEWAY].p50[r] / t[T_EPOLL].p50[r], t[T_GATEWAY].p99[r] / t[T_EPOLL].p99[r],
          t[T_GATEWAY].p50[r] / t[T_ECHO].p50[r], t[T_GATEWAY].p99[r] / t[T_ECHO].p99[r],
          t[T_DURABLE].p50[r] / t[T_COMMIT].p50[r], t[T_DURABLE].p99[r] / t[T_COMMIT].p99[r],
          t[T_GW_THREADS].p50[r] / t[T_EPOLL].p50[r], t[T_GW_THREADS].p99[r] / t[T_EPOLL].p99[r],
          t[T_DUR_THREADS].p50[r] / t[T_COMMIT].p50[r],
          t[T_DUR_THREADS].p99[r] / t[T_COMMIT].p99[r], t[T_GW_MARKS].p50[r] / t[T_GATEWAY].p50[r],
          t[T_GW_MARKS].p99[r] / t[T_GATEWAY].p99[r]);
  }
  printf("# medians over %d rounds, us:", rounds);
  for (int k = 0; k < N_TARGETS; k++)
    if (t[k].on)
      printf(" %s p50 %.0f p99 %.0f", NAMES[k], median(t[k].p50, rounds), median(t[k].p99, rounds));
  printf("\n# cpu us per order, server threads (generator thread):");
  for (int k = 0; k < N_TARGETS; k++)
    if (t[k].on)
      printf(" %s %.2f (%.2f)", NAMES[k], median(t[k].cpu, rounds), median(t[k].gen_cpu, rounds));
  printf("\n# wake-ups per order (context switches of the server threads):");
  for (int k = 0; k < N_TARGETS; k++)
    if (t[k].on) printf(" %s %.2f", NAMES[k], median(t[k].wakes, rounds));
  printf("\n");
  if (t[T_COMMIT].on) {
    tg_floor_stats_t cs = tg_floor_stats(t[T_COMMIT].floor);
    if (cs.commits > 0)
      printf("# commit floor: %llu commits, %.1f orders each\n", (unsigned long long)cs.commits,
             (double)cs.records / (double)cs.commits);
  }
  for (int k = 0; k < N_TARGETS; k++)
    if (t[k].unanswered != 0 || t[k].rejected != 0)
      printf("# warning: %s: %llu unanswered, %llu rejected over the rounds\n", NAMES[k],
             (unsigned long long)t[k].unanswered, (unsigned long long)t[k].rejected);
  printf("# reply frame bytes:");
  for (int k = 0; k < N_TARGETS; k++)
    if (t[k].on) printf(" %s %zu", NAMES[k], reply_frame_bytes(&t[k].f));
  printf("\n");
  if (t[T_GW_MARKS].on)
    printf("# marks: %llu MARK commands through gateway_marks' pipeline\n",
           (unsigned long long)tg_gateway_marks(t[T_GW_MARKS].gw));
  for (int k = 0; k < N_TARGETS; k++) {
    if (!t[k].on) continue;
    if (t[k].floor != NULL) tg_floor_stop(t[k].floor, &t[k].f);
    else tg_gateway_down(t[k].gw, &t[k].f);
  }
  print_load("end");
  if (all) print_results(t, rounds);
  if (bad) {
    fprintf(stderr, "bench_floor: a run had no answer at all; its figures are meaningless\n");
    return 1;
  }
  return 0;
}
