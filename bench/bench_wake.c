/*
 * bench_wake - what one thread waking another costs on this host.
 *
 * Every hop of the exchange's order path (client -> gateway loop -> engine
 * -> journal -> gateway loop -> client) is one thread waking another that
 * sleeps. This program measures that hop alone, with nothing of Hourglass
 * in it, so the gateway's round trip can be read against the host's floor:
 * two threads hand a token back and forth through a futex word (a round
 * trip is two wake-ups), pinned
 *   - both to CPU 0 (the woken thread runs on the waker's CPU: a context
 *     switch, no inter-processor interrupt);
 *   - to CPUs 0 and 1, with an idle gap before each round (200 us: orders
 *     arriving at 5,000/s), so the other CPU has gone idle when it is woken.
 *     On a virtual machine an idle vCPU is halted and its wake-up goes
 *     through the hypervisor;
 *   - to CPUs 0 and 1 back to back (no gap): the other CPU is still awake.
 * The gap is spent asleep on the measuring thread and is not timed.
 *
 * Prints p50 / p99 / p99.9 of the round trip per case and RESULT lines
 * host.wake_same_cpu_rtt_p99_us, host.wake_cross_cpu_idle_rtt_p50_us,
 * host.wake_cross_cpu_idle_rtt_p99_us. --quick: 5,000 rounds a case
 * instead of 20,000.
 *
 * Stalls. A thread that never sleeps is still taken off its CPU now and
 * then: by the hypervisor (the vCPU is descheduled on the host), by
 * interrupts, or by other tasks of the guest (kernel threads). While that
 * lasts, whatever the exchange had on that CPU waits, however it was
 * written. One thread per CPU, pinned, reads the clock in a loop for a few
 * seconds and records every gap between two reads; the gaps of at least
 * STALL_NS are the stalls. RESULT host.stall_share_pct is the share of
 * time inside stalls summed over the CPUs (an order's path uses every CPU
 * of this 2-CPU machine, and stalls of two CPUs rarely overlap),
 * host.stalls_per_s the stalls a second on all CPUs together,
 * host.stall_max_us the longest. An order in flight on a CPU during a
 * stall is late by at least the rest of it, and so are the orders queued
 * behind it, so when the stalls cover about 1% of the time or more, a
 * round-trip p99 under STALL_NS cannot be had on this host by any design.
 * The probe then runs again while another thread appends 4 KiB blocks to
 * a file in the current directory with an fdatasync after each (the
 * durable journal's disk traffic without the exchange):
 * host.stall_share_while_syncing_pct and host.stall_max_while_syncing_us.
 * On a virtual machine the disk's emulation and the guest's I/O completion
 * can take the vCPUs the exchange runs on.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct pingpong {
  _Atomic uint32_t to_pong; /* round number the pong thread may answer */
  _Atomic uint32_t to_ping; /* round number the pong thread has answered */
  uint32_t rounds;
} pingpong_t;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static cpu_set_t one_cpu(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return s;
}

/* Sleeps while *w == v (seq_cst loads: the token is the only data). */
static void wait_while(_Atomic uint32_t *w, uint32_t v) {
  while (atomic_load(w) == v) syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void post(_Atomic uint32_t *w, uint32_t v) {
  atomic_store(w, v);
  syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *pong_main(void *arg) {
  pingpong_t *pp = arg;
  for (uint32_t i = 1; i <= pp->rounds; i++) {
    wait_while(&pp->to_pong, i - 1);
    post(&pp->to_ping, i);
  }
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct pct {
  double p50, p99, p999;
} pct_t;

/* One case: rounds round trips with the pong thread on pong_cpu, gap_ns of
 * untimed sleep before each. Returns 0, or -1 if a CPU is not available. */
static int run_case(int pong_cpu, uint64_t gap_ns, uint32_t rounds, pct_t *out) {
  cpu_set_t ping_set = one_cpu(0), pong_set = one_cpu(pong_cpu);
  if (pthread_setaffinity_np(pthread_self(), sizeof ping_set, &ping_set) != 0) return -1;
  /* The pong thread starts on its CPU, so a CPU we may not use fails here,
   * before either side waits for the other. */
  pingpong_t pp = {.rounds = rounds};
  pthread_attr_t attr;
  pthread_t t;
  if (pthread_attr_init(&attr) != 0) return -1;
  int rc = pthread_attr_setaffinity_np(&attr, sizeof pong_set, &pong_set);
  if (rc == 0) rc = pthread_create(&t, &attr, pong_main, &pp);
  pthread_attr_destroy(&attr);
  if (rc != 0) return -1;
  uint64_t *rtt = malloc(rounds * sizeof *rtt);
  if (rtt == NULL) {
    fprintf(stderr, "bench_wake: out of memory\n");
    exit(1);
  }
  for (uint32_t i = 1; i <= rounds; i++) {
    if (gap_ns != 0) {
      struct timespec ts = {0, (long)gap_ns};
      nanosleep(&ts, NULL);
    }
    uint64_t t0 = now_ns();
    post(&pp.to_pong, i);
    wait_while(&pp.to_ping, i - 1);
    rtt[i - 1] = now_ns() - t0;
  }
  pthread_join(t, NULL);
  qsort(rtt, rounds, sizeof *rtt, cmp_u64);
  out->p50 = (double)rtt[rounds / 2] / 1e3;
  out->p99 = (double)rtt[(size_t)rounds * 99 / 100] / 1e3;
  out->p999 = (double)rtt[(size_t)rounds * 999 / 1000] / 1e3;
  free(rtt);
  return 0;
}

#define STALL_NS 200000u /* the gateway target's round trip, 200 us */
#define GAP_NS 20000u     /* gaps counted in the histogram */

typedef struct stall_probe {
  int cpu;
  uint64_t run_ns;
  int ok;
  uint64_t stalls, stall_ns, max_ns;
  uint64_t gaps, gap_ns; /* every gap of at least GAP_NS */
} stall_probe_t;

static void *stall_main(void *arg) {
  stall_probe_t *sp = arg;
  cpu_set_t set = one_cpu(sp->cpu);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) return NULL;
  sp->ok = 1;
  uint64_t start = now_ns(), last = start;
  while (last - start < sp->run_ns) {
    uint64_t t = now_ns();
    uint64_t g = t - last;
    last = t;
    if (g < GAP_NS) continue;
    sp->gaps++;
    sp->gap_ns += g;
    if (g > sp->max_ns) sp->max_ns = g;
    if (g >= STALL_NS) {
      sp->stalls++;
      sp->stall_ns += g;
    }
  }
  return NULL;
}

/* Runs one spinning probe per CPU for run_ns; returns how many ran. */
static int stall_run(long ncpu, uint64_t run_ns, stall_probe_t *sp) {
  pthread_t t[64];
  int n = ncpu < 64 ? (int)ncpu : 64, started = 0;
  for (int c = 0; c < n; c++) {
    sp[c] = (stall_probe_t){.cpu = c, .run_ns = run_ns};
    if (pthread_create(&t[c], NULL, stall_main, &sp[c]) != 0) break;
    started++;
  }
  for (int c = 0; c < started; c++) pthread_join(t[c], NULL);
  return started;
}

typedef struct stall_sum {
  int measured;
  double share, per_s, max_us;
} stall_sum_t;

/* Runs the probes for run_ns and prints one line per CPU. */
static stall_sum_t stall_report(const char *what, long ncpu, uint64_t run_ns) {
  static stall_probe_t sp[64];
  int nsp = stall_run(ncpu, run_ns, sp);
  stall_sum_t sum = {0};
  double sec = (double)run_ns / 1e9;
  printf("stalls, %s: one spinning thread per CPU for %.0f s, gaps between clock reads\n", what, sec);
  for (int c = 0; c < nsp; c++) {
    if (!sp[c].ok) continue;
    sum.measured++;
    printf("  CPU %d: gaps >= %u us %6.0f/s (%.2f%% of the time), stalls >= %u us %5.1f/s "
           "(%.2f%% of the time), longest %.0f us\n",
           c, GAP_NS / 1000, (double)sp[c].gaps / sec, 100.0 * (double)sp[c].gap_ns / (double)run_ns,
           STALL_NS / 1000, (double)sp[c].stalls / sec, 100.0 * (double)sp[c].stall_ns / (double)run_ns,
           (double)sp[c].max_ns / 1e3);
    sum.share += 100.0 * (double)sp[c].stall_ns / (double)run_ns;
    sum.per_s += (double)sp[c].stalls / sec;
    if ((double)sp[c].max_ns / 1e3 > sum.max_us) sum.max_us = (double)sp[c].max_ns / 1e3;
  }
  return sum;
}

/* The disk's side of the durable journal, without the exchange: 4 KiB
 * appends, each followed by fdatasync, until told to stop. */
typedef struct sync_ctx {
  int fd;
  atomic_int stop;
  uint64_t syncs;
} sync_ctx_t;

static void *sync_main(void *arg) {
  sync_ctx_t *sc = arg;
  static uint8_t block[4096];
  memset(block, 0x5a, sizeof block);
  off_t off = 0;
  while (!atomic_load(&sc->stop)) {
    if (pwrite(sc->fd, block, sizeof block, off) != (ssize_t)sizeof block || fdatasync(sc->fd) != 0) break;
    off += (off_t)sizeof block;
    if (off >= (off_t)64 << 20) off = 0;
    sc->syncs++;
  }
  return NULL;
}

int main(int argc, char **argv) {
  uint32_t rounds = 20000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      rounds = 5000;
    } else {
      fprintf(stderr, "usage: bench_wake [--quick]\n");
      return 2;
    }
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  printf("bench_wake: futex wake-up round trips (two wake-ups each), %u rounds a case, %ld CPUs\n",
         rounds, ncpu);
  static const struct {
    const char *name;
    int pong_cpu;
    uint64_t gap_ns;
  } cases[] = {
      {"same CPU (0 and 0), 200 us idle gap", 0, 200000},
      {"cross CPU (0 and 1), 200 us idle gap", 1, 200000},
      {"cross CPU (0 and 1), back to back", 1, 0},
  };
  pct_t r[3];
  bool have[3] = {false, false, false};
  for (int c = 0; c < 3; c++) {
    if (cases[c].pong_cpu >= ncpu || run_case(cases[c].pong_cpu, cases[c].gap_ns, rounds, &r[c]) != 0) {
      printf("  %-40s skipped (CPU %d not available)\n", cases[c].name, cases[c].pong_cpu);
      continue;
    }
    have[c] = true;
    printf("  %-40s rtt p50 %7.1f us  p99 %7.1f us  p99.9 %7.1f us\n", cases[c].name, r[c].p50,
           r[c].p99, r[c].p999);
  }
  uint64_t run_ns = rounds == 5000 ? 1000000000u : 4000000000u;
  stall_sum_t quiet = stall_report("nothing else running", ncpu, run_ns);
  sync_ctx_t sc = {.fd = -1};
  char path[] = "./hgwake-sync-XXXXXX";
  sc.fd = mkstemp(path);
  stall_sum_t syncing = {0};
  pthread_t st;
  if (sc.fd >= 0 && pthread_create(&st, NULL, sync_main, &sc) == 0) {
    syncing = stall_report("a thread appending 4 KiB + fdatasync in . meanwhile", ncpu, run_ns);
    atomic_store(&sc.stop, 1);
    pthread_join(st, NULL);
    printf("  (%.0f syncs/s)\n", (double)sc.syncs / ((double)run_ns / 1e9));
  } else {
    printf("stalls while syncing: skipped (cannot create a file in .)\n");
  }
  if (sc.fd >= 0) {
    close(sc.fd);
    unlink(path);
  }
  if (have[0]) printf("RESULT host.wake_same_cpu_rtt_p99_us %.1f us\n", r[0].p99);
  if (have[1]) {
    printf("RESULT host.wake_cross_cpu_idle_rtt_p50_us %.1f us\n", r[1].p50);
    printf("RESULT host.wake_cross_cpu_idle_rtt_p99_us %.1f us\n", r[1].p99);
  }
  if (quiet.measured > 0) {
    printf("RESULT host.stall_share_pct %.2f %%\n", quiet.share);
    printf("RESULT host.stalls_per_s %.1f stalls/s\n", quiet.per_s);
    printf("RESULT host.stall_max_us %.0f us\n", quiet.max_us);
  }
  if (syncing.measured > 0) {
    printf("RESULT host.stall_share_while_syncing_pct %.2f %%\n", syncing.share);
    printf("RESULT host.stall_max_while_syncing_us %.0f us\n", syncing.max_us);
  }
  return 0;
}
