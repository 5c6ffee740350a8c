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
  if (have[0]) printf("RESULT host.wake_same_cpu_rtt_p99_us %.1f us\n", r[0].p99);
  if (have[1]) {
    printf("RESULT host.wake_cross_cpu_idle_rtt_p50_us %.1f us\n", r[1].p50);
    printf("RESULT host.wake_cross_cpu_idle_rtt_p99_us %.1f us\n", r[1].p99);
  }
  return 0;
}
