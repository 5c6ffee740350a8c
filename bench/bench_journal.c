/*
 * bench_journal: durable throughput and acknowledgement latency of the
 * journal on the real disk.
 *
 *  1. Group commit (io_uring): a producer thread pushes 100-byte commands
 *     into an SPSC ring as fast as it can; the writer thread (main) appends
 *     everything available, commits one batch and waits for it, so each
 *     batch holds what arrived during the previous sync. Ack latency is the
 *     time from hg_journal_append() to the poll that saw the record durable;
 *     at saturation it is mostly queueing, so it is measured again with the
 *     producer held to 100k commands/s (the ack_p* figures).
 *  2. The same with the pwritev + fdatasync fallback.
 *  3. One fdatasync per record: append one, commit, wait (batch size 1).
 *  4. The raw disk: 4 KiB pwrite appends, each followed by fdatasync.
 *
 * Usage: bench_journal [--quick] [--dir DIR]. Journal files go to a fresh
 * directory under DIR (default: the current directory, i.e. the build tree
 * on the real disk; /tmp may be tmpfs) and are removed afterwards.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/journal.h"

#define PAYLOAD 100
#define RING (1u << 16)
#define LAT_SLOTS (1u << 20) /* > ring + two staging buffers of records */
#define HIST_US 200000u
#define LAT_RATE 100000u /* offered load of the latency run, commands/s */

typedef struct cmd {
  uint64_t seq;
  uint8_t payload[PAYLOAD];
} cmd_t;

/* Producer -> writer ring. Slots are written by the producer before it
 * publishes head and read by the writer before it publishes tail. */
static cmd_t ring[RING];
static _Atomic uint64_t ring_head, ring_tail;
static _Atomic int stop_producer;
static uint64_t offered_rate; /* commands/s, 0: unlimited; set before the producer starts */

static uint64_t append_ns[LAT_SLOTS]; /* writer thread only */
static uint32_t hist[HIST_US + 1];    /* writer thread only; 1 us buckets */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *producer(void *arg) {
  (void)arg;
  uint64_t seq = 1, t0 = now_ns();
  while (!atomic_load_explicit(&stop_producer, memory_order_relaxed)) { /* a flag, no data */
    uint64_t h = atomic_load_explicit(&ring_head, memory_order_relaxed); /* own variable */
    /* acquire: the writer finished reading slots below tail */
    uint64_t t = atomic_load_explicit(&ring_tail, memory_order_acquire);
    uint64_t room = RING - (h - t);
    if (offered_rate != 0) {
      uint64_t due = (now_ns() - t0) * offered_rate / 1000000000u + 1;
      if (due < seq) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
        continue;
      }
      if (room > due - seq + 1) room = due - seq + 1;
    }
    if (room == 0) {
      sched_yield();
      continue;
    }
    for (uint64_t k = 0; k < room; k++) {
      cmd_t *c = &ring[(h + k) & (RING - 1)];
      c->seq = seq;
      memset(c->payload, (int)(seq & 0xff), PAYLOAD);
      memcpy(c->payload, &seq, sizeof seq);
      seq++;
    }
    /* release: the slots are written before the writer can see them */
    atomic_store_explicit(&ring_head, h + room, memory_order_release);
  }
  return NULL;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_journal: %s: %s\n", what, hg_strerror(rc));
  exit(1);
}

static void quiet_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  if (level >= HG_LOG_WARN) fprintf(stderr, "%s\n", msg);
}

static void rm_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] != '.') unlinkat(dirfd(d), de->d_name, 0);
  closedir(d);
  rmdir(dir);
}

static hg_journal_t *open_fresh(const char *dir, int fallback) {
  rm_dir(dir);
  if (mkdir(dir, 0755) != 0) die("mkdir", -errno);
  hg_journal_options_t o;
  hg_journal_options_init(&o);
  o.force_fallback = fallback;
  o.log = quiet_log;
  hg_journal_t *j;
  int rc = hg_journal_open(dir, &o, &j);
  if (rc != 0) die("open", rc);
  return j;
}

typedef struct group_result {
  double cmds_per_s;
  double avg_batch;
  uint64_t records;
} group_result_t;

static void record_latencies(hg_journal_t *j, uint64_t *acked) {
  uint64_t d = hg_journal_durable_seq(j);
  if (d == *acked) return;
  uint64_t t = now_ns();
  for (uint64_t s = *acked + 1; s <= d; s++) {
    uint64_t us = (t - append_ns[s & (LAT_SLOTS - 1)]) / 1000u;
    hist[us < HIST_US ? us : HIST_US]++;
  }
  *acked = d;
}

static group_result_t run_group(const char *dir, int fallback, double seconds, uint64_t rate,
                                int measure_latency) {
  offered_rate = rate;
  memset(hist, 0, sizeof hist);
  hg_journal_t *j = open_fresh(dir, fallback);
  atomic_store(&ring_head, 0);
  atomic_store(&ring_tail, 0);
  atomic_store(&stop_producer, 0);
  pthread_t th;
  if (pthread_create(&th, NULL, producer, NULL) != 0) die("pthread_create", -errno);
  uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9);
  uint64_t acked = 0, batches = 0, next = 1;
  int rc;
  while (now_ns() < end) {
    /* acquire: slots below head are fully written */
    uint64_t h = atomic_load_explicit(&ring_head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&ring_tail, memory_order_relaxed); /* own variable */
    uint64_t ts = now_ns();
    for (; t < h; t++) {
      const cmd_t *c = &ring[t & (RING - 1)];
      while ((rc = hg_journal_append(j, next, ts, c->payload, PAYLOAD)) == HG_EBUSY) {
        if ((rc = hg_journal_poll(j, -1)) != 0) die("poll", rc);
        if (measure_latency) record_latencies(j, &acked);
      }
      if (rc != 0) die("append", rc);
      if (measure_latency) append_ns[next & (LAT_SLOTS - 1)] = ts;
      next++;
    }
    /* release: the writer is done with the slots it hands back */
    atomic_store_explicit(&ring_tail, t, memory_order_release);
    if (hg_journal_durable_seq(j) + 1 < next) {
      if ((rc = hg_journal_commit(j)) != 0) die("commit", rc);
      batches++;
      if ((rc = hg_journal_poll(j, -1)) != 0) die("poll", rc);
      if (measure_latency) record_latencies(j, &acked);
    } else {
      sched_yield();
    }
  }
  atomic_store(&stop_producer, 1);
  pthread_join(th, NULL);
  if ((rc = hg_journal_sync(j)) != 0) die("sync", rc);
  if (measure_latency) record_latencies(j, &acked);
  uint64_t t1 = now_ns();
  group_result_t r;
  r.records = hg_journal_durable_seq(j);
  r.cmds_per_s = (double)r.records / ((double)(t1 - t0) / 1e9);
  r.avg_batch = batches ? (double)r.records / (double)batches : 0;
  if ((rc = hg_journal_close(j)) != 0) die("close", rc);
  rm_dir(dir);
  return r;
}

static double run_single(const char *dir, double seconds) {
  hg_journal_t *j = open_fresh(dir, 0);
  uint8_t p[PAYLOAD];
  memset(p, 7, sizeof p);
  uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), seq = 1;
  int rc;
  while (now_ns() < end) {
    if ((rc = hg_journal_append(j, seq, seq, p, PAYLOAD)) != 0) die("append", rc);
    if ((rc = hg_journal_sync(j)) != 0) die("sync", rc);
    seq++;
  }
  double r = (double)(seq - 1) / ((double)(now_ns() - t0) / 1e9);
  hg_journal_close(j);
  rm_dir(dir);
  return r;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void run_raw(const char *dir, int n, double *p50, double *p99) {
  char path[4200];
  snprintf(path, sizeof path, "%s.raw", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die("open raw", -errno);
  uint64_t *lat = calloc((size_t)n, sizeof *lat);
  if (lat == NULL) die("calloc", -ENOMEM);
  static uint8_t block[4096];
  memset(block, 0x5a, sizeof block);
  for (int i = 0; i < n; i++) {
    uint64_t t = now_ns();
    if (pwrite(fd, block, sizeof block, (off_t)i * 4096) != (ssize_t)sizeof block) die("pwrite", -errno);
    if (fdatasync(fd) != 0) die("fdatasync", -errno);
    lat[i] = now_ns() - t;
  }
  close(fd);
  unlink(path);
  qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
  *p50 = (double)lat[n / 2] / 1000.0;
  *p99 = (double)lat[(size_t)n * 99 / 100] / 1000.0;
  free(lat);
}

static double hist_pct(double pct) {
  uint64_t total = 0;
  for (uint32_t i = 0; i <= HIST_US; i++) total += hist[i];
  uint64_t want = (uint64_t)((double)total * pct / 100.0), cum = 0;
  for (uint32_t i = 0; i <= HIST_US; i++) {
    cum += hist[i];
    if (cum > want) return i;
  }
  return HIST_US;
}

int main(int argc, char **argv) {
  int quick = 0;
  const char *base = ".";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
      base = argv[++i];
    else {
      fprintf(stderr, "usage: bench_journal [--quick] [--dir DIR]\n");
      return 2;
    }
  }
  struct statfs sf;
  if (statfs(base, &sf) == 0 && sf.f_type == 0x01021994 /* TMPFS_MAGIC */)
    fprintf(stderr, "bench_journal: warning: %s is tmpfs; figures will not reflect a disk\n", base);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/bench_journal.%d", base, (int)getpid());

  double group_s = quick ? 2.5 : 10.0, other_s = quick ? 1.5 : 5.0;
  int raw_n = quick ? 1000 : 5000;

  group_result_t g = run_group(dir, 0, group_s, 0, 1);
  double sat50 = hist_pct(50), sat99 = hist_pct(99), sat999 = hist_pct(99.9);
  group_result_t lr = run_group(dir, 0, other_s, LAT_RATE, 1);
  double lat50 = hist_pct(50), lat99 = hist_pct(99), lat999 = hist_pct(99.9);
  group_result_t fb = run_group(dir, 1, other_s, 0, 0);
  double single = run_single(dir, other_s);
  double raw50, raw99;
  run_raw(dir, raw_n, &raw50, &raw99);

  printf("group commit (io_uring): %llu records, %.0f records per writer wake-up on average\n",
         (unsigned long long)g.records, g.avg_batch);
  printf("group commit (fallback): %llu records, %.0f records per writer wake-up on average\n",
         (unsigned long long)fb.records, fb.avg_batch);
  printf("RESULT journal.durable_cmds_per_s %.0f cmd/s\n", g.cmds_per_s);
  printf("RESULT journal.fallback_durable_cmds_per_s %.0f cmd/s\n", fb.cmds_per_s);
  printf("RESULT journal.single_cmds_per_s %.0f cmd/s\n", single);
  printf("RESULT journal.group_vs_single_ratio %.1f x\n", g.cmds_per_s / single);
  printf("group commit at %u cmd/s offered: %llu records, %.0f records per writer wake-up on average\n", LAT_RATE,
         (unsigned long long)lr.records, lr.avg_batch);
  printf("RESULT journal.ack_saturated_p50_us %.0f us\n", sat50);
  printf("RESULT journal.ack_saturated_p99_us %.0f us\n", sat99);
  printf("RESULT journal.ack_saturated_p999_us %.0f us\n", sat999);
  printf("RESULT journal.ack_p50_us %.0f us\n", lat50);
  printf("RESULT journal.ack_p99_us %.0f us\n", lat99);
  printf("RESULT journal.ack_p999_us %.0f us\n", lat999);
  printf("RESULT disk.fdatasync_p50_us %.0f us\n", raw50);
  printf("RESULT disk.fdatasync_p99_us %.0f us\n", raw99);
  return 0;
}
