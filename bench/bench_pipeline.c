/*
 * bench_pipeline: the exchange core end to end. A producer thread submits
 * generated commands (tests/support/cmdgen.h: orders, cancels, replaces around
 * a moving price) into the pipeline; the main thread consumes the released
 * records and times each command from submit to its DONE marker, which in
 * the default mode is released only once the command is durable. So the
 * figures are durable commands per second through sequencer + journal +
 * state machine, and acknowledgement latency including the group commit.
 *
 * Runs: saturation (offered load unlimited) and a fixed offered rate of
 * 100k commands/s, on the real disk (data dir under the current directory)
 * and, for reference, on tmpfs (/dev/shm) where fdatasync costs nothing.
 *
 * Usage: bench_pipeline [--quick] [--seconds S]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmdgen.h"
#include "hourglass/error.h"
#include "hourglass/pipeline.h"
#include "pipeline_util.h"

#define MAX_CMDS (1u << 24)
#define HIST_US 100000u

static uint64_t *submit_ns; /* by command index; written by producer before submit */
static uint32_t hist[HIST_US + 1];
static atomic_int stop_flag;
static atomic_uint_fast64_t submitted;

typedef struct run {
  hg_pipeline_t *p;
  uint64_t rate; /* commands/s; 0 = unlimited */
  double seconds;
} run_t;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *producer(void *arg) {
  run_t *r = arg;
  uint64_t t0 = now_ns(), i = 0;
  while (!atomic_load(&stop_flag) && i < MAX_CMDS) {
    if (r->rate) {
      uint64_t due = t0 + i * 1000000000ull / r->rate;
      /* Sleep, not spin: the machine has two cores and the pipeline needs them. */
      for (uint64_t t = now_ns(); t < due; t = now_ns()) {
        if (atomic_load(&stop_flag)) return NULL;
        if (due - t > 20000) nanosleep(&(struct timespec){0, (long)(due - t)}, NULL);
      }
    }
    hg_command_t cmd;
    cmdgen_command(i, 7, &cmd);
    submit_ns[i] = now_ns();
    int rc = hg_pipeline_submit(r->p, i, &cmd);
    if (rc == 0) {
      i++;
      atomic_store_explicit(&submitted, i, memory_order_release); /* publishes submit_ns[i-1] */
    } else if (rc != HG_EBUSY) {
      fprintf(stderr, "submit: %s\n", hg_strerror(rc));
      exit(1);
    }
  }
  return NULL;
}

/* Runs hg_pipeline_stop() while the main thread keeps polling: at
 * saturation more commands are queued than the stage holds, and the engine
 * can only sequence them once the consumer makes room. */
typedef struct stopper {
  hg_pipeline_t *p;
  atomic_int done;
} stopper_t;

static void *stopper_main(void *arg) {
  stopper_t *s = arg;
  hg_pipeline_stop(s->p);
  atomic_store(&s->done, 1);
  return NULL;
}

static double pct(uint64_t n, double q) {
  uint64_t want = (uint64_t)((double)n * q), c = 0;
  for (uint32_t us = 0; us <= HIST_US; us++) {
    c += hist[us];
    if (c > want) return us;
  }
  return HIST_US;
}

typedef struct result {
  double cmds_per_s, p50, p99, p999;
} result_t;

static result_t run_once(const char *base, uint64_t rate, double seconds) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s/hgbench-pipe-XXXXXX", base);
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    exit(1);
  }
  util_log_t log = {0};
  hg_pipeline_config_t cfg;
  util_config(&cfg, dir, &log);
  cfg.inbound_capacity = 1u << 16;
  cfg.outbound_capacity = 1u << 18;
  cfg.staging_capacity = 1u << 18;
  cfg.journal.segment_size = 256u << 20;
  cfg.journal.batch_bytes = 4u << 20;
  cfg.snapshot_every = 0;
  hg_pipeline_t *p = NULL;
  int rc = hg_pipeline_open(&cfg, &p);
  if (rc == 0) rc = hg_pipeline_start(p);
  if (rc != 0) {
    fprintf(stderr, "pipeline: %s (%s)\n", hg_strerror(rc), log.last);
    exit(1);
  }
  memset(hist, 0, sizeof hist);
  atomic_store(&stop_flag, 0);
  atomic_store(&submitted, 0);
  run_t r = {.p = p, .rate = rate, .seconds = seconds};
  pthread_t th;
  pthread_create(&th, NULL, producer, &r);
  uint64_t t0 = now_ns(), done = 0, first_ns = 0;
  static hg_pipe_out_t out[1024];
  uint64_t warm = 0; /* the first 10% is warm-up, not measured */
  for (;;) {
    size_t n = hg_pipeline_poll(p, out, 1024);
    uint64_t t = now_ns();
    for (size_t k = 0; k < n; k++) {
      if (out[k].kind != HG_PIPE_DONE) continue;
      uint64_t idx = out[k].origin;
      if (t - t0 < (uint64_t)(seconds * 1e8)) {
        warm = done + 1;
      } else {
        if (first_ns == 0) first_ns = t;
        uint64_t us = (t - submit_ns[idx]) / 1000;
        hist[us > HIST_US ? HIST_US : us]++;
      }
      done++;
    }
    if (t - t0 > (uint64_t)(seconds * 1e9)) break;
    if (n == 0) hg_pipeline_wait(p, 1000000);
  }
  uint64_t t_end = now_ns();
  atomic_store(&stop_flag, 1);
  pthread_join(th, NULL);
  stopper_t st = {.p = p};
  pthread_t sth;
  pthread_create(&sth, NULL, stopper_main, &st);
  while (!atomic_load(&st.done))
    if (hg_pipeline_poll(p, out, 1024) == 0) hg_pipeline_wait(p, 1000000);
  pthread_join(sth, NULL);
  while (hg_pipeline_poll(p, out, 1024) > 0) {
  }
  hg_pipeline_close(p);
  util_rm_rf(dir);
  uint64_t measured = done - warm;
  result_t res = {0};
  res.cmds_per_s = first_ns ? (double)measured / ((double)(t_end - first_ns) / 1e9) : 0;
  res.p50 = pct(measured, 0.50);
  res.p99 = pct(measured, 0.99);
  res.p999 = pct(measured, 0.999);
  return res;
}

int main(int argc, char **argv) {
  double seconds = 4;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) seconds = 1.5;
    else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_pipeline [--quick] [--seconds S]\n");
      return 2;
    }
  }
  submit_ns = calloc(MAX_CMDS, sizeof *submit_ns);
  if (submit_ns == NULL) return 1;
  struct {
    const char *name, *base;
  } media[] = {{"disk", "."}, {"tmpfs", "/dev/shm"}};
  for (size_t m = 0; m < 2; m++) {
    if (access(media[m].base, W_OK) != 0) continue;
    result_t sat = run_once(media[m].base, 0, seconds);
    result_t fix = run_once(media[m].base, 100000, seconds);
    printf("pipeline on %-5s: saturation %.0f durable cmd/s, ack p50/p99/p99.9 %.0f/%.0f/%.0f us; "
           "at 100k cmd/s offered: %.0f cmd/s, ack p50/p99/p99.9 %.0f/%.0f/%.0f us\n",
           media[m].name, sat.cmds_per_s, sat.p50, sat.p99, sat.p999, fix.cmds_per_s, fix.p50,
           fix.p99, fix.p999);
    printf("RESULT pipeline.%s_durable_cmds_per_s %.0f cmd/s\n", media[m].name, sat.cmds_per_s);
    printf("RESULT pipeline.%s_ack_p50_us_at_100k %.0f us\n", media[m].name, fix.p50);
    printf("RESULT pipeline.%s_ack_p99_us_at_100k %.0f us\n", media[m].name, fix.p99);
  }
  free(submit_ns);
  return 0;
}
