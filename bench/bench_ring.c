/*
 * bench_ring - throughput and hand-off latency of the engine's rings.
 *
 * Throughput: one producer thread pushes 64-byte messages as fast as it can
 * (retrying on HG_EBUSY), one consumer drains in batches; each pinned to
 * one of the first two CPUs. Reported for the MPSC ring (one producer) and
 * the SPSC ring, and for the MPSC ring with a blocking consumer (producer
 * notifies a spin-0 waiter after every push: the cost of hg_waiter_notify).
 *
 * Hand-off latency: the producer writes CLOCK_MONOTONIC into the message
 * just before the push, the consumer reads the clock right after the pop;
 * the producer sends the next message only after the consumer took the
 * previous one and a short gap, so each one meets an empty ring. Two
 * consumers: busy-polling (the headline ring.handoff_* figures) and blocking
 * on a spin-0 waiter (the default deployment; this adds a futex wake).
 *
 *   bench_ring [--quick]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hourglass/ring.h"

enum { MSG = 64, CAP = 4096, BATCH = 64 };

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
}

/* Busy-wait step. The machine is shared: after a while give the CPU away so
 * a descheduled peer can run, instead of burning our whole time slice. */
static void relax_n(unsigned *n) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  if (++*n % 1024 == 0) sched_yield();
}

typedef struct job {
  hg_mpsc_ring_t *mpsc;
  hg_spsc_ring_t *spsc;
  hg_waiter_t *w;
  uint64_t n;
  int64_t gap_ns; /* latency runs: spacing between messages */
  _Atomic int go;
  _Atomic uint64_t consumed; /* latency runs: the producer sends message i
                                only after the consumer took i - 1 */
} job_t;

static int push(job_t *j, const void *m) {
  return j->mpsc ? hg_mpsc_ring_try_push(j->mpsc, m, MSG) : hg_spsc_ring_try_push(j->spsc, m, MSG);
}

static void *producer(void *arg) {
  job_t *j = arg;
  pin(0);
  unsigned char m[MSG];
  memset(m, 0x5a, sizeof m);
  /* acquire: start together with the consumer. */
  unsigned spins = 0;
  while (!atomic_load_explicit(&j->go, memory_order_acquire)) relax_n(&spins);
  for (uint64_t i = 0; i < j->n; i++) {
    if (j->gap_ns > 0) {
      /* acquire: the consumer is done with the previous message. */
      while (atomic_load_explicit(&j->consumed, memory_order_acquire) < i) relax_n(&spins);
      int64_t until = now_ns() + j->gap_ns;
      while (now_ns() < until) relax_n(&spins);
    }
    int64_t ts = now_ns();
    memcpy(m, &ts, sizeof ts);
    memcpy(m + 8, &i, sizeof i);
    while (push(j, m) == HG_EBUSY) relax_n(&spins);
    if (j->w != NULL) hg_waiter_notify(j->w);
  }
  return NULL;
}

static uint64_t block_wakeups;

/* blocking: the producer notifies a spin-0 waiter after every push and the
 * consumer sleeps on it when the ring is empty (MPSC only). */
static double throughput(int spsc, int blocking, uint64_t n) {
  job_t j = {.n = n};
  if (spsc ? hg_spsc_ring_create(CAP, MSG, &j.spsc) : hg_mpsc_ring_create(CAP, MSG, &j.mpsc)) {
    fprintf(stderr, "bench_ring: ring create failed\n");
    exit(1);
  }
  if (blocking && hg_waiter_create(0, &j.w) != 0) {
    fprintf(stderr, "bench_ring: waiter create failed\n");
    exit(1);
  }
  pthread_t t;
  pthread_create(&t, NULL, producer, &j);
  pin(1);
  static unsigned char buf[BATCH * MSG];
  uint64_t got = 0, sum = 0;
  unsigned spins = 0;
  int64_t t0 = now_ns();
  atomic_store_explicit(&j.go, 1, memory_order_release); /* release: pairs with producer */
  while (got < n) {
    size_t k = spsc ? hg_spsc_ring_pop_batch(j.spsc, buf, BATCH, NULL)
                    : hg_mpsc_ring_pop_batch(j.mpsc, buf, BATCH, NULL);
    if (k == 0) {
      if (j.w != NULL)
        (void)hg_mpsc_ring_wait(j.mpsc, j.w, -1);
      else
        relax_n(&spins);
      continue;
    }
    uint64_t idx;
    memcpy(&idx, buf + (k - 1) * MSG + 8, sizeof idx);
    sum += idx;
    got += k;
  }
  int64_t t1 = now_ns();
  pthread_join(t, NULL);
  if (sum == 0 && n > BATCH) fprintf(stderr, "bench_ring: no data seen\n");
  if (j.w != NULL) block_wakeups = hg_waiter_wakeups(j.w);
  hg_waiter_destroy(j.w);
  hg_spsc_ring_destroy(j.spsc);
  hg_mpsc_ring_destroy(j.mpsc);
  return (double)n * 1e9 / (double)(t1 - t0);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void latency(int blocking, uint64_t n, int64_t gap_ns, int64_t *p50, int64_t *p99,
                    int64_t *p999) {
  job_t j = {.n = n, .gap_ns = gap_ns};
  if (hg_mpsc_ring_create(CAP, MSG, &j.mpsc) != 0 ||
      (blocking && hg_waiter_create(0, &j.w) != 0)) {
    fprintf(stderr, "bench_ring: create failed\n");
    exit(1);
  }
  int64_t *lat = malloc(n * sizeof *lat);
  if (lat == NULL) exit(1);
  pthread_t t;
  pthread_create(&t, NULL, producer, &j);
  pin(1);
  atomic_store_explicit(&j.go, 1, memory_order_release); /* release: pairs with producer */
  unsigned char m[MSG];
  unsigned spins = 0;
  for (uint64_t got = 0; got < n;) {
    if (blocking)
      (void)hg_mpsc_ring_wait(j.mpsc, j.w, -1);
    else if (hg_mpsc_ring_empty(j.mpsc))
      relax_n(&spins);
    while (got < n && hg_mpsc_ring_pop(j.mpsc, m, sizeof m, NULL) == 0) {
      int64_t ts;
      memcpy(&ts, m, sizeof ts);
      lat[got++] = now_ns() - ts;
      /* release: lets the producer send the next message. */
      atomic_store_explicit(&j.consumed, got, memory_order_release);
    }
  }
  pthread_join(t, NULL);
  qsort(lat, n, sizeof *lat, cmp_i64);
  *p50 = lat[n / 2];
  *p99 = lat[n * 99 / 100];
  *p999 = lat[n * 999 / 1000];
  free(lat);
  hg_waiter_destroy(j.w);
  hg_mpsc_ring_destroy(j.mpsc);
}

int main(int argc, char **argv) {
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else {
      fprintf(stderr, "usage: bench_ring [--quick]\n");
      return 2;
    }
  }
  uint64_t n_tp = quick ? 4000000 : 40000000;
  uint64_t n_busy = quick ? 50000 : 500000;
  uint64_t n_block = quick ? 5000 : 50000;

  double mpsc = throughput(0, 0, n_tp);
  double spsc = throughput(1, 0, n_tp);
  double mpsc_block = throughput(0, 1, n_tp);
  int64_t b50, b99, b999, k50, k99, k999;
  latency(0, n_busy, 1000, &b50, &b99, &b999);
  latency(1, n_block, 50000, &k50, &k99, &k999);

  printf("# %llu x %d-byte messages, ring of %d slots, producer cpu0, consumer cpu1\n",
         (unsigned long long)n_tp, MSG, CAP);
  printf("# blocking-consumer throughput run: %llu futex wakes for %llu messages\n",
         (unsigned long long)block_wakeups, (unsigned long long)n_tp);
  printf("# busy-poll hand-off: p50 %lld ns, p99 %lld ns, p99.9 %lld ns (%llu samples)\n",
         (long long)b50, (long long)b99, (long long)b999, (unsigned long long)n_busy);
  printf("# blocking hand-off (spin 0, futex): p50 %lld ns, p99 %lld ns, p99.9 %lld ns "
         "(%llu samples)\n",
         (long long)k50, (long long)k99, (long long)k999, (unsigned long long)n_block);
  printf("RESULT ring.msgs_per_s %.0f msg/s\n", mpsc);
  printf("RESULT ring.spsc_msgs_per_s %.0f msg/s\n", spsc);
  printf("RESULT ring.block_msgs_per_s %.0f msg/s\n", mpsc_block);
  printf("RESULT ring.handoff_p50_ns %lld ns\n", (long long)b50);
  printf("RESULT ring.handoff_p99_ns %lld ns\n", (long long)b99);
  printf("RESULT ring.handoff_block_p50_ns %lld ns\n", (long long)k50);
  printf("RESULT ring.handoff_block_p99_ns %lld ns\n", (long long)k99);
  return 0;
}
