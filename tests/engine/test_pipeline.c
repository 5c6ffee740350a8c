/*
 * The pipeline end to end on a real data directory: ordering of released
 * records, restart equivalence, back-pressure, the durability gate when the
 * journal fails, and clear errors for bad directories and a corrupt journal.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmdgen.h"
#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "hourglass/thread.h"
#include "journal_internal.h"
#include "pipeline_internal.h"
#include "pipeline_util.h"

#define SEED 42u

typedef struct fixture {
  char dir[64];
  util_log_t log;
  hg_pipeline_config_t cfg;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (f == NULL || util_tmpdir(f->dir, "pipe") == NULL) return -1;
  util_config(&f->cfg, f->dir, &f->log);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  util_rm_rf(f->dir);
  free(f);
  return 0;
}

/* Submits commands [from, to) of the generated stream with origin = index,
 * retrying on HG_EBUSY while draining outputs into a counter. */
typedef struct consumer {
  uint64_t next_done;  /* seq the next DONE must carry */
  uint64_t events;
  uint64_t unavailable;
  uint64_t malformed;
  uint64_t event_seq;  /* seq of the last EVENT seen */
  uint64_t cancelled;  /* book cancel events */
} consumer_t;

static void consume_k(hg_pipeline_t *p, uint32_t k, consumer_t *c) {
  hg_pipe_out_t out[256];
  size_t n;
  while ((n = hg_pipeline_poll_consumer(p, k, out, 256)) > 0) {
    for (size_t i = 0; i < n; i++) {
      switch (out[i].kind) {
      case HG_PIPE_EVENT:
        /* Events of a command come after the previous command's DONE and
         * carry the command's seq. */
        assert_int_equal(out[i].seq, c->next_done);
        assert_int_equal(out[i].event.seq, out[i].seq);
        assert_int_equal(out[i].origin, out[i].seq - 1);
        c->events++;
        c->cancelled += out[i].event.type == HG_XEV_BOOK &&
                        out[i].event.book.type == HG_EV_CANCELLED;
        break;
      case HG_PIPE_DONE:
        assert_int_equal(out[i].seq, c->next_done);
        assert_int_equal(out[i].origin, out[i].seq - 1);
        c->next_done++;
        break;
      case HG_PIPE_UNAVAILABLE:
        c->unavailable++;
        break;
      case HG_PIPE_MALFORMED:
        c->malformed++;
        assert_int_equal(out[i].seq, c->next_done - 1);
        break;
      default:
        fail_msg("unknown record kind %u", out[i].kind);
      }
    }
  }
}

static void consume(hg_pipeline_t *p, consumer_t *c) { consume_k(p, 0, c); }

static void submit_range(hg_pipeline_t *p, uint64_t from, uint64_t to, consumer_t *c) {
  for (uint64_t i = from; i < to; i++) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    int rc;
    while ((rc = hg_pipeline_submit(p, i, &cmd)) == HG_EBUSY) consume(p, c);
    assert_int_equal(rc, 0);
  }
}

static void wait_done(hg_pipeline_t *p, consumer_t *c, uint64_t seq) {
  while (c->next_done <= seq) {
    consume(p, c);
    if (c->next_done > seq) break;
    assert_int_equal(hg_pipeline_wait(p, 5000000000ll), 0);
  }
}

static void lifecycle_restart_and_replay(void **state) {
  fixture_t *f = *state;
  f->cfg.snapshot_every = 500;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c = {.next_done = 1};
  const uint64_t n = 3000;
  submit_range(p, 0, n / 2, &c);
  /* A command the journal cannot hold is refused without a seq. */
  hg_command_t bad = {.type = 999};
  assert_int_equal(hg_pipeline_submit(p, 77, &bad), 0);
  submit_range(p, n / 2, n, &c);
  wait_done(p, &c, n);
  assert_true(c.events >= n); /* every command here yields at least one event */
  assert_int_equal(c.malformed, 1);
  assert_int_equal(hg_pipeline_stop(p), 0);
  assert_int_equal(hg_pipeline_submit(p, 0, &(hg_command_t){0}), HG_EUNAVAIL);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(p, &st);
  assert_int_equal(st.last_seq, n);
  assert_int_equal(st.durable_seq, n);
  assert_int_equal(st.released_seq, n);
  assert_true(st.snapshots >= 2); /* periodic ones and the final one */
  uint8_t h1[HG_SHA256_LEN];
  hg_pipeline_state_hash(p, h1);
  hg_pipeline_close(p);

  /* Restart: the final snapshot covers everything. */
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  uint8_t h2[HG_SHA256_LEN];
  hg_pipeline_state_hash(p, h2);
  assert_memory_equal(h1, h2, sizeof h1);
  hg_pipeline_stats(p, &st);
  assert_int_equal(st.replayed, 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), n);

  /* It carries on where it stopped. */
  assert_int_equal(hg_pipeline_start(p), 0);
  c.next_done = n + 1;
  submit_range(p, n, n + 500, &c);
  wait_done(p, &c, n + 500);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_state_hash(p, h1);
  hg_pipeline_close(p);

  /* A from-scratch replay of the journal reaches the same state. */
  char jdir[128];
  snprintf(jdir, sizeof jdir, "%s/journal", f->dir);
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&f->cfg.exchange, util_null_sink, NULL, &ex), 0);
  uint64_t last = 0;
  assert_int_equal(hg_pipeline_replay_journal(jdir, ex, UINT64_MAX, &last), 0);
  assert_int_equal(last, n + 500);
  hg_exchange_hash(ex, h2);
  assert_memory_equal(h1, h2, sizeof h1);
  hg_exchange_destroy(ex);
}

/* With the inbound ring tiny and nobody consuming, submit pushes back with
 * HG_EBUSY; once the consumer drains, every accepted command completes. */
static void backpressure_is_busy_not_loss(void **state) {
  fixture_t *f = *state;
  f->cfg.inbound_capacity = 64;
  f->cfg.outbound_capacity = 64;
  f->cfg.staging_capacity = 2048;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  uint64_t accepted = 0, busy = 0;
  for (uint64_t i = 0; i < 200000 && busy == 0; i++) {
    hg_command_t cmd;
    cmdgen_command(accepted, SEED, &cmd);
    int rc = hg_pipeline_submit(p, accepted, &cmd);
    if (rc == 0) accepted++;
    else if (rc == HG_EBUSY) busy++;
    else fail_msg("submit: %s", hg_strerror(rc));
  }
  assert_true(busy > 0);
  consumer_t c = {.next_done = 1};
  wait_done(p, &c, accepted);
  assert_int_equal(c.next_done, accepted + 1);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(p, &st);
  assert_true(st.busy_rejects >= 1);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
}

/* Two consumers (say the gateway and a market-data view) each receive every
 * record in order, even when one of them is slow and its ring tiny. */
typedef struct slow_consumer {
  hg_pipeline_t *p;
  consumer_t c;
  uint64_t until;
} slow_consumer_t;

static void *slow_consumer_main(void *arg) {
  slow_consumer_t *s = arg;
  hg_pipe_out_t out[16];
  while (s->c.next_done <= s->until) {
    size_t n = hg_pipeline_poll_consumer(s->p, 1, out, 16);
    for (size_t i = 0; i < n; i++)
      if (out[i].kind == HG_PIPE_DONE) {
        if (out[i].seq != s->c.next_done) return (void *)1;
        s->c.next_done++;
      }
    if (n == 0 && hg_pipeline_wait_consumer(s->p, 1, 5000000000ll) != 0) return (void *)2;
    usleep(50); /* slow on purpose */
  }
  return NULL;
}

/* Waits until the engine and journal threads have both been asleep for a
 * while, i.e. nothing is left that would wake the engine by itself. */
static void wait_asleep(hg_pipeline_t *p) {
  for (int stable = 0; stable < 2;) {
    usleep(2000);
    stable = hg_pipeline__threads_asleep(p) ? stable + 1 : 0;
  }
}

static void submit_nowake_range(hg_pipeline_t *p, uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; i++) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    assert_int_equal(hg_pipeline_submit_nowake(p, i, &cmd), 0);
  }
}

/* A deferred submit really leaves a sleeping engine asleep, and the kick
 * then gets every deferred command processed. */
static void nowake_waits_for_kick(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c = {.next_done = 1};
  submit_range(p, 0, 10, &c);
  wait_done(p, &c, 10);
  wait_asleep(p);
  submit_nowake_range(p, 10, 13);
  usleep(30000);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(p, &st);
  assert_int_equal(st.commands, 10);
  assert_true(hg_pipeline__threads_asleep(p));
  consume(p, &c);
  assert_int_equal(c.next_done, 11);
  hg_pipeline_kick(p);
  wait_done(p, &c, 13);
  hg_pipeline_stats(p, &st);
  assert_int_equal(st.commands, 13);
  /* A kick with nothing queued is harmless. */
  hg_pipeline_kick(p);
  assert_int_equal(hg_pipeline_stop(p), 0);
  consume(p, &c);
  assert_int_equal(c.next_done, 14);
  hg_pipeline_close(p);
}

/* No lost wake-up: batches submitted without waking and then kicked are
 * always processed, whether the engine was asleep for certain (even rounds)
 * or racing towards sleep as the batch arrived (odd rounds). wait_done fails
 * the test after 5 s without progress. */
static void kick_after_nowake_always_wakes(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c = {.next_done = 1};
  uint64_t next = 0;
  for (int round = 0; round < 120; round++) {
    uint64_t k = 1 + (uint64_t)round % 4;
    if (round % 2 == 0) wait_asleep(p);
    submit_nowake_range(p, next, next + k);
    hg_pipeline_kick(p);
    next += k;
    wait_done(p, &c, next);
  }
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
}

static void two_consumers_each_get_everything(void **state) {
  fixture_t *f = *state;
  f->cfg.consumers = 2;
  f->cfg.outbound_capacity = 64;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  slow_consumer_t sc = {.p = p, .c = {.next_done = 1}, .until = 2000};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, slow_consumer_main, &sc), 0);
  consumer_t c = {.next_done = 1};
  submit_range(p, 0, 2000, &c);
  wait_done(p, &c, 2000);
  void *ret = (void *)9;
  pthread_join(th, &ret);
  assert_null(ret);
  assert_int_equal(sc.c.next_done, 2001);
  assert_int_equal(hg_pipeline_wait_consumer(p, 2, 0), HG_EINVAL);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
  f->cfg.consumers = HG_PIPE_MAX_CONSUMERS + 1;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_EINVAL);
}

/* Stop with a consumer that has not read anything and an outbound ring far
 * too small: stop still completes, and every result stays pollable. */
static void stop_keeps_unpolled_results(void **state) {
  fixture_t *f = *state;
  f->cfg.outbound_capacity = 64;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  for (uint64_t i = 0; i < 500; i++) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    assert_int_equal(hg_pipeline_submit(p, i, &cmd), 0);
  }
  assert_int_equal(hg_pipeline_stop(p), 0);
  consumer_t c = {.next_done = 1};
  consume(p, &c);
  assert_int_equal(c.next_done, 501);
  hg_pipeline_close(p);
}

/* A journal that fails never lets an undurable result out, stops intake, and
 * a restart holds only what was durable. */
static void journal_failure_stops_intake(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  hg_journal__inject_fault(hg_pipeline__journal(p), HG_JOURNAL_FAULT_EIO);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c = {.next_done = 1};
  uint64_t sent = 0;
  int rc = 0;
  /* Up to ~10 s: the failure surfaces when the first batch completes. */
  for (uint64_t i = 0, tries = 0; tries < 100000; tries++) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    rc = hg_pipeline_submit(p, i, &cmd);
    if (rc == HG_EUNAVAIL) break;
    if (rc == 0) {
      sent++;
      i++;
    } else {
      usleep(100);
    }
    consume(p, &c);
  }
  assert_int_equal(rc, HG_EUNAVAIL);
  assert_int_equal(hg_pipeline_failed(p), -EIO);
  consume(p, &c);
  assert_int_equal(c.next_done, 1); /* no DONE, */
  assert_int_equal(c.events, 0);    /* and no event, ever released */
  assert_true(f->log.errors >= 1);
  assert_non_null(strstr(f->log.last, "journal failed"));
  assert_int_equal(hg_pipeline_stop(p), -EIO);
  hg_pipeline_close(p);
  (void)sent;

  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), 0);
  hg_pipeline_close(p);
}

/* Waits until the engine has sequenced every command up to seq and pushed
 * all their records to consumer 0's ring: it sleeps only after a pass that
 * moved nothing, and the records of one command may reach the ring over
 * several passes. */
static void wait_outbound(hg_pipeline_t *p, uint64_t seq) {
  hg_pipeline_stats_t st;
  for (int i = 0; i < 50000; i++) {
    hg_pipeline_stats(p, &st);
    if (st.last_seq >= seq && hg_pipeline__engine_asleep(p)) break;
    usleep(100);
  }
  assert_int_equal(st.last_seq, seq);
  assert_true(hg_pipeline__engine_asleep(p));
  assert_false(hg_pipeline__outbound_empty(p, 0));
}

/* The engine hands records to the consumer's ring before they are durable;
 * the consumer side must not see them until the journal says so, must be
 * woken when it does (without the engine), and must never see them if the
 * journal fails instead. */
static void events_wait_for_durability(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  /* io_uring unless the direct pwritev + fdatasync was asked for. */
  if (f->cfg.journal.force_fallback)
    assert_int_equal(hg_journal_uses_io_uring(hg_pipeline__journal(p)), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c = {.next_done = 1};
  hg_pipe_out_t out[16];

  hg_pipeline__hold_journal(p, 1);
  submit_range(p, 0, 10, &c);
  wait_outbound(p, 10);
  /* Sequenced, applied and in the ring, but not durable: invisible. */
  assert_int_equal(hg_pipeline_poll(p, out, 16), 0);
  assert_int_equal(hg_pipeline_wait(p, 20000000), -ETIMEDOUT);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(p, &st);
  assert_int_equal(st.last_seq, 10);
  assert_int_equal(st.durable_seq, 0);
  assert_int_equal(st.released_seq, 0);
  /* Durable: the journal thread's wake alone must get them out. */
  hg_pipeline__hold_journal(p, 0);
  wait_done(p, &c, 10);
  assert_int_equal(c.next_done, 11);
  hg_pipeline_stats(p, &st);
  assert_true(st.durable_seq >= 10);
  assert_int_equal(st.released_seq, 10);

  /* The next batch fails: its records, already in the ring, are dropped. */
  uint64_t events = c.events;
  hg_pipeline__hold_journal(p, 1);
  submit_range(p, 10, 15, &c);
  wait_outbound(p, 15);
  hg_journal__inject_fault(hg_pipeline__journal(p), HG_JOURNAL_FAULT_EIO);
  hg_pipeline__hold_journal(p, 0);
  for (int i = 0; i < 50000 && hg_pipeline_failed(p) == 0; i++) usleep(100);
  assert_int_equal(hg_pipeline_failed(p), -EIO);
  /* The wait wakes for the drop (it does not spin: a second wait times out). */
  assert_int_equal(hg_pipeline_wait(p, 5000000000ll), 0);
  consume(p, &c);
  assert_true(hg_pipeline__outbound_empty(p, 0));
  assert_int_equal(hg_pipeline_wait(p, 20000000), -ETIMEDOUT);
  assert_int_equal(c.next_done, 11);
  assert_int_equal(c.events, events);
  assert_int_equal(hg_pipeline_stop(p), -EIO);
  assert_int_equal(hg_pipeline_poll(p, out, 16), 0);
  hg_pipeline_close(p);

  /* Recovery keeps exactly the durable prefix. */
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), 10);
  hg_pipeline_close(p);
}

/* The same with the journal thread calling pwritev + fdatasync itself
 * instead of io_uring (writev linked to fdatasync). */
static void events_wait_for_durability_direct(void **state) {
  fixture_t *f = *state;
  f->cfg.journal.force_fallback = 1;
  events_wait_for_durability(state);
}

static void ack_before_durable_mode_releases(void **state) {
  fixture_t *f = *state;
  f->cfg.durability = HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c = {.next_done = 1};
  submit_range(p, 0, 100, &c);
  wait_done(p, &c, 100);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
  f->cfg.durability = 7;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_EINVAL);
}

static void bad_data_dir_is_a_clear_error(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  char path[128];
  snprintf(path, sizeof path, "%s/missing", f->dir);
  f->cfg.data_dir = path;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), -ENOENT);
  assert_non_null(strstr(f->log.last, path));
  snprintf(path, sizeof path, "%s/file", f->dir);
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  fclose(fp);
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), -ENOTDIR);
  assert_non_null(strstr(f->log.last, "not a directory"));
}

/* Flips one byte in the middle of the journal: start-up refuses with
 * HG_ECORRUPT and names the file; nothing is silently dropped. */
static void corrupt_journal_stops_startup(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c = {.next_done = 1};
  submit_range(p, 0, 200, &c);
  wait_done(p, &c, 200);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);

  char jdir[128], seg[400];
  snprintf(jdir, sizeof jdir, "%s/journal", f->dir);
  DIR *d = opendir(jdir);
  assert_non_null(d);
  struct dirent *e;
  seg[0] = 0;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, "journal-00000000000000000001.hgj") == 0)
      snprintf(seg, sizeof seg, "%s/%s", jdir, e->d_name);
  closedir(d);
  assert_true(seg[0] != 0);
  int fd = open(seg, O_RDWR);
  assert_true(fd >= 0);
  uint8_t b;
  assert_int_equal(pread(fd, &b, 1, 2000), 1);
  b ^= 0x5a;
  assert_int_equal(pwrite(fd, &b, 1, 2000), 1);
  close(fd);
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  assert_non_null(strstr(f->log.last, "journal"));
}

/* Scheduling policy of this process's thread named `name`; -1: none. */
static int policy_of(const char *name) {
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  int policy = -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    if (fgets(comm, sizeof comm, f) != NULL) comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    if (strcmp(comm, name) == 0) policy = sched_getscheduler((pid_t)atoi(e->d_name));
  }
  closedir(d);
  return policy;
}

/* rt_priority puts exactly the order path's threads (engine, journal) under
 * SCHED_FIFO; the snapshot writer stays ordinary. Out of range is refused
 * at open. */
static void rt_priority_reaches_engine_and_journal(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  f->cfg.rt_priority = HG_THREAD_RT_MAX + 1;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_EINVAL);
  f->cfg.rt_priority = 3;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  int rc = hg_pipeline_start(p);
  if (rc == -EPERM) { /* real-time scheduling not permitted here */
    hg_pipeline_close(p);
    skip();
  }
  assert_int_equal(rc, 0);
  assert_int_equal(policy_of("hg-engine"), SCHED_FIFO);
  assert_int_equal(policy_of("hg-journal"), SCHED_FIFO);
  assert_int_equal(policy_of("hg-snapshot"), SCHED_OTHER);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
}

/* ------------------------------------------------------------ loop mode */

/* One timestamp for every command: the engine thread reads the clock again
 * for a command it retries (journal ring full), so a clock that moves would
 * stamp the two modes' commands differently. */
static uint64_t fixed_clock(void *ctx) { return *(const uint64_t *)ctx; }

/* Names of this process's threads contain name. */
static int thread_named(const char *name) {
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  struct dirent *e;
  int found = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *fp = fopen(path, "r");
    if (fp == NULL) continue;
    if (fgets(comm, sizeof comm, fp) != NULL && strstr(comm, name) != NULL) found = 1;
    fclose(fp);
  }
  closedir(d);
  return found;
}

/* Runs commands [from, to) as the loop owner would: execute, a commit every
 * `batch` commands, reaps until the last one is released. */
static void loop_run(hg_pipeline_t *p, uint64_t from, uint64_t to, uint32_t batch,
                     consumer_t *c) {
  for (uint64_t i = from; i < to; i++) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    int rc;
    while ((rc = hg_pipeline_execute(p, i, &cmd)) == HG_EBUSY) {
      hg_pipeline_loop_commit(p);
      hg_pipeline_loop_reap(p, -1);
      consume(p, c);
    }
    assert_int_equal(rc, 0);
    if ((i + 1) % batch == 0 && hg_pipeline_loop_commit(p)) consume(p, c);
  }
  while (c->next_done < to + 1) {
    if (hg_pipeline_loop_commit(p) | hg_pipeline_loop_reap(p, -1)) consume(p, c);
  }
}

static void file_bytes(const char *path, uint8_t **buf, size_t *len) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  fseek(fp, 0, SEEK_END);
  *len = (size_t)ftell(fp);
  fseek(fp, 0, SEEK_SET);
  *buf = malloc(*len);
  assert_non_null(*buf);
  assert_int_equal(fread(*buf, 1, *len, fp), *len);
  fclose(fp);
}

/* The same commands through both modes give the same records, the same
 * state and the same journal bytes; loop mode runs no engine or journal
 * thread; a restart recovers the loop mode's journal and snapshots. */
static void loop_mode_matches_threads(void **state) {
  fixture_t *f = *state;
  enum { N = 6000 };
  uint64_t t0 = 1767225600000000000ull, t1 = t0;
  uint8_t h0[HG_SHA256_LEN], h1[HG_SHA256_LEN];
  char dir1[64];
  assert_non_null(util_tmpdir(dir1, "pipeloop"));

  f->cfg.clock = fixed_clock;
  f->cfg.clock_ctx = &t0;
  f->cfg.snapshot_every = 1000;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c0 = {.next_done = 1};
  submit_range(p, 0, N, &c0);
  wait_done(p, &c0, N);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_state_hash(p, h0);
  hg_pipeline_close(p);

  hg_pipeline_config_t lc = f->cfg;
  util_log_t llog = {0};
  lc.data_dir = dir1;
  lc.log_ctx = &llog;
  lc.clock_ctx = &t1;
  lc.mode = HG_PIPE_MODE_LOOP;
  assert_int_equal(hg_pipeline_open(&lc, &p), 0);
  assert_int_equal(hg_pipeline_mode(p), HG_PIPE_MODE_LOOP);
  assert_true(hg_pipeline_loop_fd(p) >= 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  assert_false(thread_named("hg-engine"));
  assert_false(thread_named("hg-journal"));
  consumer_t c1 = {.next_done = 1};
  loop_run(p, 0, N, 64, &c1);
  assert_int_equal(c1.events, c0.events);
  assert_int_equal(c1.malformed, c0.malformed);
  assert_int_equal(c1.unavailable, 0);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_state_hash(p, h1);
  hg_pipeline_close(p);
  assert_memory_equal(h0, h1, sizeof h0);
  assert_int_equal(llog.errors, 0);

  char a[128], b[128];
  snprintf(a, sizeof a, "%s/journal/journal-%020d.hgj", f->dir, 1);
  snprintf(b, sizeof b, "%s/journal/journal-%020d.hgj", dir1, 1);
  uint8_t *ba, *bb;
  size_t la, lb;
  file_bytes(a, &ba, &la);
  file_bytes(b, &bb, &lb);
  assert_int_equal(la, lb);
  assert_memory_equal(ba, bb, la);
  free(ba);
  free(bb);

  /* Restart in loop mode: the recovered state, then more commands. */
  assert_int_equal(hg_pipeline_open(&lc, &p), 0);
  hg_pipeline_state_hash(p, h1);
  assert_memory_equal(h0, h1, sizeof h0);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c2 = {.next_done = N + 1};
  loop_run(p, N, N + 500, 32, &c2);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
  util_rm_rf(dir1);
}

/* Cluster mode: batches as a group would carry them, kept in order. */
typedef struct batches {
  uint8_t *b[4096];
  size_t len[4096];
  size_t n;
  int refuse; /* the next replicate call fails with this */
} batches_t;

static int capture_batch(void *ctx, const void *batch, size_t len, uint64_t last_seq) {
  batches_t *bs = ctx;
  (void)last_seq;
  if (bs->refuse != 0) return bs->refuse;
  assert_true(bs->n < 4096);
  bs->b[bs->n] = malloc(len);
  assert_non_null(bs->b[bs->n]);
  memcpy(bs->b[bs->n], batch, len);
  bs->len[bs->n++] = len;
  return 0;
}

/* Drives p's journal until records stop coming; counts DONE records. */
static uint64_t drain_dones(hg_pipeline_t *p) {
  uint64_t dones = 0;
  hg_pipe_out_t out[256];
  for (int idle = 0; idle < 3;) {
    hg_pipeline_loop_commit(p);
    hg_pipeline_loop_reap(p, 50);
    size_t n = hg_pipeline_poll(p, out, 256);
    for (size_t i = 0; i < n; i++) dones += out[i].kind == HG_PIPE_DONE;
    idle = n == 0 ? idle + 1 : 0;
  }
  return dones;
}

/* A leader executes ahead but releases nothing before the group commits;
 * a follower applying the same batches reaches the same state; followers
 * refuse to sequence; a bad batch is refused; a refused proposal fails the
 * pipeline with nothing more released. */
static void cluster_mode_releases_on_commit(void **state) {
  fixture_t *f = *state;
  enum { N = 3000 };
  char dir1[64];
  assert_non_null(util_tmpdir(dir1, "pipefollow"));
  static batches_t bl, bf;
  memset(&bl, 0, sizeof bl);
  memset(&bf, 0, sizeof bf);
  static uint64_t t0 = 1767225600000000000ull;
  f->cfg.clock = fixed_clock; /* the single-node run below stamps the same */
  f->cfg.clock_ctx = &t0;
  hg_pipeline_config_t lc = f->cfg;
  lc.mode = HG_PIPE_MODE_LOOP;
  lc.replicate = capture_batch;
  lc.replicate_ctx = &bl;
  hg_pipeline_config_t tc = lc;
  tc.mode = HG_PIPE_MODE_THREADS;
  hg_pipeline_t *bad = NULL;
  assert_int_equal(hg_pipeline_open(&tc, &bad), HG_EINVAL); /* loop mode only */
  util_log_t flog = {0};
  hg_pipeline_config_t fc = lc;
  fc.data_dir = dir1;
  fc.log_ctx = &flog;
  fc.replicate_ctx = &bf;
  hg_pipeline_t *L = NULL, *F = NULL;
  assert_int_equal(hg_pipeline_open(&lc, &L), 0);
  assert_int_equal(hg_pipeline_open(&fc, &F), 0);
  assert_int_equal(hg_pipeline_start(L), 0);
  assert_int_equal(hg_pipeline_start(F), 0);

  hg_command_t cmd;
  cmdgen_command(0, SEED, &cmd);
  assert_int_equal(hg_pipeline_execute(L, 0, &cmd), HG_EPERM); /* not writable yet */
  hg_pipeline_set_writable(L, 1);
  consumer_t c = {.next_done = 1};
  for (uint64_t i = 0; i < N; i++) {
    cmdgen_command(i, SEED, &cmd);
    assert_int_equal(hg_pipeline_execute(L, i, &cmd), 0);
    if ((i + 1) % 100 == 0) hg_pipeline_loop_commit(L);
  }
  hg_pipeline_loop_commit(L);
  for (int k = 0; k < 20; k++) hg_pipeline_loop_reap(L, 10);
  consume(L, &c);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(L, &st);
  assert_int_equal(st.durable_seq, N);   /* on the local disk ... */
  assert_int_equal(st.committed_seq, 0); /* ... but not committed */
  assert_int_equal(c.next_done, 1);      /* so nothing released */
  assert_true(bl.n >= N / 100);

  /* Commit (in log order) the first half of the batches on both nodes. */
  size_t half = bl.n / 2;
  for (size_t i = 0; i < half; i++) {
    assert_int_equal(hg_pipeline_apply_batch(F, bl.b[i], bl.len[i]), 0);
    assert_int_equal(hg_pipeline_apply_batch(L, bl.b[i], bl.len[i]), 0);
  }
  hg_pipeline_stats(L, &st);
  assert_true(st.committed_seq > 0 && st.committed_seq < N);
  hg_pipeline_loop_commit(L);
  consume(L, &c);
  assert_int_equal(c.next_done, st.committed_seq + 1); /* released exactly that far */
  for (size_t i = half; i < bl.n; i++) {
    assert_int_equal(hg_pipeline_apply_batch(F, bl.b[i], bl.len[i]), 0);
    assert_int_equal(hg_pipeline_apply_batch(L, bl.b[i], bl.len[i]), 0);
  }
  hg_pipeline_loop_commit(L);
  consume(L, &c);
  assert_int_equal(c.next_done, N + 1);
  assert_int_equal(drain_dones(F), N);
  assert_int_equal(bf.n, 0); /* the follower proposes nothing */

  /* The follower sequences nothing of its own; bad batches are refused. */
  assert_int_equal(hg_pipeline_execute(F, 0, &cmd), HG_EPERM);
  uint8_t junk[16] = {1, 2, 3};
  assert_int_equal(hg_pipeline_apply_batch(F, junk, sizeof junk), HG_ECORRUPT);
  assert_int_equal(hg_pipeline_apply_batch(F, bl.b[0], bl.len[0] - 8), HG_ECORRUPT);
  /* Already applied: skipped. */
  assert_int_equal(hg_pipeline_apply_batch(F, bl.b[bl.n - 1], bl.len[bl.n - 1]), 0);

  /* Committed is enough: records leave before the local journal reports
   * them durable (no reap yet), since the group's majority holds them. */
  for (uint64_t i = N; i < N + 10; i++) {
    cmdgen_command(i, SEED, &cmd);
    assert_int_equal(hg_pipeline_execute(L, i, &cmd), 0);
  }
  size_t before = bl.n;
  hg_pipeline_loop_commit(L);
  assert_int_equal(bl.n, before + 1);
  assert_int_equal(hg_pipeline_apply_batch(L, bl.b[before], bl.len[before]), 0);
  hg_pipeline_stats(L, &st);
  assert_int_equal(st.committed_seq, N + 10);
  /* With io_uring durable_seq moves only at a reap, so the journal has
   * not reported the batch durable: the release below waits on the commit
   * alone. (The synchronous fallback is durable at once and proves less.) */
  if (hg_journal_uses_io_uring(hg_pipeline__journal(L))) assert_true(st.durable_seq < N + 10);
  consume(L, &c);
  assert_int_equal(c.next_done, N + 11);
  for (int k = 0; k < 20; k++) hg_pipeline_loop_reap(L, 10);

  /* A proposal the group refuses fails the leader: nothing more leaves. */
  bl.refuse = HG_EPERM;
  cmdgen_command(N + 10, SEED, &cmd);
  assert_int_equal(hg_pipeline_execute(L, N + 10, &cmd), 0);
  hg_pipeline_loop_commit(L);
  assert_int_equal(hg_pipeline_failed(L), HG_EPERM);
  assert_int_equal(hg_pipeline_execute(L, N + 11, &cmd), HG_EUNAVAIL);
  consume(L, &c);
  assert_int_equal(c.next_done, N + 11);

  uint8_t hf[HG_SHA256_LEN], hs[HG_SHA256_LEN];
  assert_int_equal(hg_pipeline_stop(F), 0);
  hg_pipeline_stop(L);
  hg_pipeline_state_hash(F, hf);
  hg_pipeline_close(L);
  hg_pipeline_close(F);
  /* The follower's state is the single node's after the same N commands. */
  util_rm_rf(f->dir);
  assert_int_equal(mkdir(f->dir, 0700), 0);
  hg_pipeline_config_t sc = f->cfg;
  sc.mode = HG_PIPE_MODE_LOOP;
  hg_pipeline_t *S = NULL;
  assert_int_equal(hg_pipeline_open(&sc, &S), 0);
  assert_int_equal(hg_pipeline_start(S), 0);
  consumer_t cs = {.next_done = 1};
  loop_run(S, 0, N, 64, &cs);
  assert_int_equal(hg_pipeline_stop(S), 0);
  hg_pipeline_state_hash(S, hs);
  hg_pipeline_close(S);
  assert_memory_equal(hf, hs, sizeof hf);
  assert_int_equal(flog.errors, 0);
  for (size_t i = 0; i < bl.n; i++) free(bl.b[i]);
  util_rm_rf(dir1);
}

/* Cluster mode routes and stream records: what one node records. */
typedef struct routed {
  uint64_t origin[8192], seq[8192], k[8192];
  uint32_t kind[8192];
  size_t n;
  char streamed[64][16]; /* the follower's cfg.stream_in bytes, in order */
  size_t n_streamed;
} routed_t;

/* The leader's route of a record: its origin times 3. */
static void route_out_x3(void *ctx, uint64_t origin, uint8_t *out) {
  (void)ctx;
  hg_st64(out, origin * 3);
  out[HG_PIPE_ROUTE_BYTES - 1] = 0x5a;
}

/* The follower's origin for a route: what the route says, plus 1. */
static uint64_t route_in_plus1(void *ctx, const uint8_t *route, size_t len,
                               const hg_command_t *cmd) {
  (void)ctx;
  (void)cmd;
  assert_int_equal(len, HG_PIPE_ROUTE_BYTES);
  assert_int_equal(route[HG_PIPE_ROUTE_BYTES - 1], 0x5a);
  return hg_ld64(route) + 1;
}

static int stream_in_keep(void *ctx, const uint8_t *bytes, size_t len) {
  routed_t *r = ctx;
  assert_true(r->n_streamed < 64 && len < 16);
  memcpy(r->streamed[r->n_streamed], bytes, len);
  r->streamed[r->n_streamed++][len] = '\0';
  return 0;
}

/* Polls p until nothing comes, recording the DONE and STREAM records. */
static void poll_routed(hg_pipeline_t *p, routed_t *r) {
  hg_pipe_out_t out[256];
  for (int idle = 0; idle < 3;) {
    hg_pipeline_loop_commit(p);
    hg_pipeline_loop_reap(p, 20);
    size_t n = hg_pipeline_poll(p, out, 256);
    for (size_t i = 0; i < n; i++) {
      if (out[i].kind != HG_PIPE_DONE && out[i].kind != HG_PIPE_STREAM) continue;
      assert_true(r->n < 8192);
      r->origin[r->n] = out[i].origin;
      r->seq[r->n] = out[i].seq;
      r->kind[r->n] = out[i].kind;
      r->k[r->n++] = out[i].kind == HG_PIPE_STREAM ? out[i].event.seq : 0;
    }
    idle = n == 0 ? idle + 1 : 0;
  }
}

/* The follower stages each applied record with the origin its route
 * gives (not 0), and both nodes see the leader's stream records at the
 * same place among the results, only once committed. */
static void cluster_routes_and_stream_records(void **state) {
  fixture_t *f = *state;
  enum { N = 400 };
  char dir1[64];
  assert_non_null(util_tmpdir(dir1, "piperoute"));
  static batches_t bl, bf;
  static routed_t rl, rf;
  memset(&bl, 0, sizeof bl);
  memset(&bf, 0, sizeof bf);
  memset(&rl, 0, sizeof rl);
  memset(&rf, 0, sizeof rf);
  hg_pipeline_config_t lc = f->cfg;
  lc.mode = HG_PIPE_MODE_LOOP;
  lc.replicate = capture_batch;
  lc.replicate_ctx = &bl;
  lc.route_out = route_out_x3;
  lc.route_in = route_in_plus1;
  lc.stream_in = stream_in_keep;
  lc.route_ctx = &rl;
  hg_pipeline_config_t fc = lc;
  fc.data_dir = dir1;
  fc.replicate_ctx = &bf;
  fc.route_ctx = &rf;
  hg_pipeline_t *L = NULL, *F = NULL;
  assert_int_equal(hg_pipeline_open(&lc, &L), 0);
  assert_int_equal(hg_pipeline_open(&fc, &F), 0);
  assert_int_equal(hg_pipeline_start(L), 0);
  assert_int_equal(hg_pipeline_start(F), 0);
  assert_int_equal(hg_pipeline_stream_add(L, "x", 1), HG_EPERM); /* not writable */
  assert_int_equal(hg_pipeline_stream_add(F, "x", 0), HG_EINVAL);
  hg_pipeline_set_writable(L, 1);
  hg_command_t cmd;
  size_t streams = 0;
  for (uint64_t i = 0; i < N; i++) {
    cmdgen_command(i, SEED, &cmd);
    assert_int_equal(hg_pipeline_execute(L, 1000 + i, &cmd), 0);
    /* Stream records after some commands, two in a row now and then. */
    for (uint64_t k = 0; k < (i % 37 == 0 ? 2u : i % 11 == 0 ? 1u : 0u); k++) {
      char b[16];
      int n = snprintf(b, sizeof b, "s%zu", streams++);
      assert_int_equal(hg_pipeline_stream_add(L, b, (size_t)n), 0);
    }
    if ((i + 1) % 50 == 0) hg_pipeline_loop_commit(L);
  }
  char tail[] = "tail";
  assert_int_equal(hg_pipeline_stream_add(L, tail, 4), 0); /* alone in the last batch */
  streams++;
  hg_pipeline_loop_commit(L);
  poll_routed(L, &rl);
  assert_int_equal(rl.n, 0); /* nothing committed, nothing out */
  /* Every batch but the last (the lone stream record after seq N). */
  for (size_t i = 0; i + 1 < bl.n; i++) {
    assert_int_equal(hg_pipeline_apply_batch(F, bl.b[i], bl.len[i]), 0);
    assert_int_equal(hg_pipeline_apply_batch(L, bl.b[i], bl.len[i]), 0);
  }
  hg_pipeline_stats_t st;
  hg_pipeline_stats(L, &st);
  assert_int_equal(st.committed_seq, N);
  poll_routed(L, &rl);
  poll_routed(F, &rf);
  assert_int_equal(rl.n, N + streams - 1); /* seq N is committed, its stream record not */
  assert_int_equal(hg_pipeline_apply_batch(F, bl.b[bl.n - 1], bl.len[bl.n - 1]), 0);
  assert_int_equal(hg_pipeline_apply_batch(L, bl.b[bl.n - 1], bl.len[bl.n - 1]), 0);
  poll_routed(L, &rl);
  poll_routed(F, &rf);
  assert_int_equal(rl.n, N + streams);
  assert_int_equal(rf.n, rl.n);
  for (size_t i = 0; i < rl.n; i++) {
    assert_int_equal(rf.kind[i], rl.kind[i]);
    assert_int_equal(rf.seq[i], rl.seq[i]);
    assert_int_equal(rf.k[i], rl.k[i]);
    if (rl.kind[i] == HG_PIPE_DONE) /* the follower's origin comes from the route */
      assert_int_equal(rf.origin[i], rl.origin[i] * 3 + 1);
  }
  assert_int_equal(rl.kind[rl.n - 1], HG_PIPE_STREAM);
  assert_int_equal(rl.seq[rl.n - 1], N);
  assert_int_equal(rf.n_streamed, streams);
  assert_string_equal(rf.streamed[0], "s0");
  assert_string_equal(rf.streamed[streams - 1], "tail");
  assert_int_equal(rl.n_streamed, 0); /* the leader keeps its own */
  /* Applied again: skipped, nothing new. */
  assert_int_equal(hg_pipeline_apply_batch(F, bl.b[0], bl.len[0]), 0);
  assert_int_equal(rf.n_streamed, streams);
  assert_int_equal(hg_pipeline_stop(F), 0);
  assert_int_equal(hg_pipeline_stop(L), 0);
  hg_pipeline_close(L);
  hg_pipeline_close(F);
  for (size_t i = 0; i < bl.n; i++) free(bl.b[i]);
  util_rm_rf(dir1);
}

/* Commands other threads submit in loop mode are sequenced by the loop;
 * hg_pipeline_execute refuses in threads mode. */
static void *loop_submitter(void *arg) {
  hg_pipeline_t *p = arg;
  for (uint64_t i = 0; i < 2000;) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    int rc = hg_pipeline_submit(p, i, &cmd);
    if (rc == 0) i++;
    else if (rc == HG_EBUSY) usleep(100);
    else return (void *)(intptr_t)rc;
  }
  return NULL;
}

static void loop_mode_takes_other_threads_submits(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  hg_command_t cmd;
  cmdgen_command(0, SEED, &cmd);
  assert_int_equal(hg_pipeline_execute(p, 0, &cmd), HG_EINVAL);
  hg_pipeline_close(p);

  f->cfg.mode = HG_PIPE_MODE_LOOP;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_execute(p, 0, &cmd), HG_EUNAVAIL); /* not started */
  assert_int_equal(hg_pipeline_start(p), 0);
  pthread_t thr;
  assert_int_equal(pthread_create(&thr, NULL, loop_submitter, p), 0);
  consumer_t c = {.next_done = 1};
  while (c.next_done < 2001) {
    if (hg_pipeline_loop_commit(p) | hg_pipeline_loop_reap(p, 1)) consume(p, &c);
  }
  void *ret;
  pthread_join(thr, &ret);
  assert_null(ret);
  assert_int_equal(hg_pipeline_stop(p), 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), 2000);
  hg_pipeline_close(p);
}

/* Loop mode with small outbound rings and a second consumer that the owner
 * polls only now and then: its excess waits in the stage, so the stage is
 * emptied and refilled many times over its capacity with the consumers'
 * cursors apart and together, and each consumer still gets every record
 * once, in order. (The backlog stays below the stage's reserve: a full
 * consumer other than 0 is waited for, and here nobody else polls it.) */
static void loop_mode_two_consumers_over_many_stages(void **state) {
  fixture_t *f = *state;
  f->cfg.mode = HG_PIPE_MODE_LOOP;
  f->cfg.consumers = 2;
  f->cfg.staging_capacity = 2048;
  f->cfg.outbound_capacity = 64;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  enum { N = 12000 };
  consumer_t c0 = {.next_done = 1}, c1 = {.next_done = 1};
  for (uint64_t i = 0; i < N; i++) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    assert_int_equal(hg_pipeline_execute(p, i, &cmd), 0);
    if ((i + 1) % 2 != 0) continue;
    hg_pipeline_loop_commit(p);
    hg_pipeline_loop_reap(p, -1);
    consume(p, &c0);
    if ((i + 1) % 16 == 0) consume_k(p, 1, &c1);
  }
  while (c0.next_done < N + 1 || c1.next_done < N + 1) {
    hg_pipeline_loop_commit(p);
    hg_pipeline_loop_reap(p, -1);
    consume(p, &c0);
    consume_k(p, 1, &c1);
  }
  assert_int_equal(c0.next_done, N + 1);
  assert_int_equal(c1.next_done, N + 1);
  assert_true(c0.events > N);
  assert_int_equal(c1.events, c0.events);
  assert_int_equal(c1.cancelled, c0.cancelled);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipe_out_t extra;
  assert_int_equal(hg_pipeline_poll(p, &extra, 1), 0);
  assert_int_equal(hg_pipeline_poll_consumer(p, 1, &extra, 1), 0);
  hg_pipeline_close(p);
}

/* Loop mode with the journal's fallback: each commit is synchronous, so
 * the commit call itself makes the batch durable and releasable. */
static void loop_mode_fallback_commits_at_once(void **state) {
  fixture_t *f = *state;
  f->cfg.mode = HG_PIPE_MODE_LOOP;
  f->cfg.journal.force_fallback = 1;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  hg_command_t cmd;
  cmdgen_command(0, SEED, &cmd);
  assert_int_equal(hg_pipeline_execute(p, 0, &cmd), 0);
  assert_int_equal(hg_pipeline_loop_commit(p), 1);
  consumer_t c = {.next_done = 1};
  consume(p, &c);
  assert_int_equal(c.next_done, 2);
  loop_run(p, 1, 3000, 50, &c);
  assert_int_equal(hg_pipeline_stop(p), 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), 3000);
  hg_pipeline_close(p);
}

/* Loop mode, journal failure: intake stops, nothing undurable comes out. */
static void loop_mode_journal_failure(void **state) {
  fixture_t *f = *state;
  f->cfg.mode = HG_PIPE_MODE_LOOP;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  hg_journal__inject_fault(hg_pipeline__journal(p), HG_JOURNAL_FAULT_EIO);
  assert_int_equal(hg_pipeline_start(p), 0);
  consumer_t c = {.next_done = 1};
  int rc = 0;
  for (uint64_t i = 0; i < 100000; i++) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    rc = hg_pipeline_execute(p, i, &cmd);
    if (rc != 0) break;
    if (hg_pipeline_loop_commit(p) | hg_pipeline_loop_reap(p, -1)) consume(p, &c);
  }
  assert_int_equal(rc, HG_EUNAVAIL);
  assert_int_equal(hg_pipeline_failed(p), -EIO);
  hg_command_t cmd;
  cmdgen_command(0, SEED, &cmd);
  assert_int_equal(hg_pipeline_submit(p, 0, &cmd), HG_EUNAVAIL);
  hg_pipeline_loop_commit(p);
  consume(p, &c);
  assert_int_equal(c.next_done, 1);
  assert_int_equal(c.events, 0);
  assert_non_null(strstr(f->log.last, "journal failed"));
  assert_int_equal(hg_pipeline_stop(p), -EIO);
  consume(p, &c);
  assert_int_equal(c.events, 0);
  hg_pipeline_close(p);
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), 0);
  hg_pipeline_close(p);
}

/* Loop mode, one command with more events than the stage and consumer 0's
 * ring hold (a mass cancel of 3,000 orders against 2,048 + 512 slots): the
 * pipeline makes the batch durable and calls loop_drain in the middle, so
 * every event arrives, in order (the orders before it, consumed only every
 * 100 commands, need drains before a command too, so execute never says
 * HG_EBUSY); a command executed inside the drain is
 * queued and comes next; commit and reap do nothing there. */
typedef struct drain_ctx {
  hg_pipeline_t *p;
  consumer_t c;
  uint32_t calls;         /* drains since nested_origin was set */
  uint64_t nested_origin; /* 0: no command to execute from the drain yet */
  int nested_rc, commit_rc;
} drain_ctx_t;

static void drain_cb(void *ctx) {
  drain_ctx_t *d = ctx;
  consume(d->p, &d->c);
  if (d->nested_origin != 0 && ++d->calls == 1) {
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmdgen_new_order(&cmd, CMDGEN_INSTRUMENT, 2, 1, 1ull << 16 | 2ull << 40, 3500, 1, 0); /* GTC ask */
    d->nested_rc = hg_pipeline_execute(d->p, d->nested_origin, &cmd);
    d->commit_rc = hg_pipeline_loop_commit(d->p) | hg_pipeline_loop_reap(d->p, 0);
  }
}

static void loop_mode_drains_inside_a_command(void **state) {
  fixture_t *f = *state;
  enum { N = 3000 };
  f->cfg.mode = HG_PIPE_MODE_LOOP;
  f->cfg.staging_capacity = 2048;
  f->cfg.outbound_capacity = 512;
  f->cfg.exchange.clearing = util_no_risk();
  drain_ctx_t d = {.c = {.next_done = 1}, .nested_rc = -1, .commit_rc = -1};
  f->cfg.loop_drain = drain_cb;
  f->cfg.loop_drain_ctx = &d;
  assert_int_equal(hg_pipeline_open(&f->cfg, &d.p), 0);
  hg_pipeline_t *p = d.p;
  assert_int_equal(hg_pipeline_start(p), 0);
  uint64_t i = 0;
  for (; i < CMDGEN_SETUP + N; i++) {
    hg_command_t cmd;
    if (i < CMDGEN_SETUP) {
      cmdgen_command(i, SEED, &cmd);
    } else {
      memset(&cmd, 0, sizeof cmd);
      /* A GTC bid (bits 40..) on one of 50 levels. */
      cmdgen_new_order(&cmd, CMDGEN_INSTRUMENT, 1, i, 2ull << 40, 2500 + (int64_t)(i % 50), 1, 0);
      cmd.u.new_order.qty = 1;
    }
    assert_int_equal(hg_pipeline_execute(p, i, &cmd), 0);
    if (i % 100 == 99 && hg_pipeline_loop_commit(p)) consume(p, &d.c);
  }
  while (d.c.next_done < i + 1)
    if (hg_pipeline_loop_commit(p) | hg_pipeline_loop_reap(p, -1)) consume(p, &d.c);
  hg_command_t mc;
  memset(&mc, 0, sizeof mc);
  cmdgen_mass_cancel(&mc, CMDGEN_INSTRUMENT, 1);
  d.nested_origin = i + 1;
  assert_int_equal(hg_pipeline_execute(p, i, &mc), 0);
  assert_true(d.calls >= 1);
  assert_int_equal(d.nested_rc, 0);
  assert_int_equal(d.commit_rc, 0);
  while (d.c.next_done < i + 3)
    if (hg_pipeline_loop_commit(p) | hg_pipeline_loop_reap(p, -1)) consume(p, &d.c);
  assert_int_equal(d.c.cancelled, N);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(p, &st);
  assert_int_equal(st.busy_rejects, 0);
  assert_int_equal(st.last_seq, i + 2);
  assert_int_equal(f->log.errors, 0); /* nothing lost (logged as an error) */
  assert_int_equal(hg_pipeline_stop(p), 0);
  consume(p, &d.c);
  assert_int_equal(d.c.next_done, i + 3);
  hg_pipeline_close(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(lifecycle_restart_and_replay, setup, teardown),
      cmocka_unit_test_setup_teardown(backpressure_is_busy_not_loss, setup, teardown),
      cmocka_unit_test_setup_teardown(stop_keeps_unpolled_results, setup, teardown),
      cmocka_unit_test_setup_teardown(two_consumers_each_get_everything, setup, teardown),
      cmocka_unit_test_setup_teardown(nowake_waits_for_kick, setup, teardown),
      cmocka_unit_test_setup_teardown(rt_priority_reaches_engine_and_journal, setup, teardown),
      cmocka_unit_test_setup_teardown(kick_after_nowake_always_wakes, setup, teardown),
      cmocka_unit_test_setup_teardown(journal_failure_stops_intake, setup, teardown),
      cmocka_unit_test_setup_teardown(events_wait_for_durability, setup, teardown),
      cmocka_unit_test_setup_teardown(events_wait_for_durability_direct, setup, teardown),
      cmocka_unit_test_setup_teardown(ack_before_durable_mode_releases, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_data_dir_is_a_clear_error, setup, teardown),
      cmocka_unit_test_setup_teardown(corrupt_journal_stops_startup, setup, teardown),
      cmocka_unit_test_setup_teardown(loop_mode_matches_threads, setup, teardown),
      cmocka_unit_test_setup_teardown(loop_mode_takes_other_threads_submits, setup, teardown),
      cmocka_unit_test_setup_teardown(cluster_routes_and_stream_records, setup, teardown),
      cmocka_unit_test_setup_teardown(loop_mode_journal_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(loop_mode_fallback_commits_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(loop_mode_two_consumers_over_many_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(loop_mode_drains_inside_a_command, setup, teardown),
      cmocka_unit_test_setup_teardown(cluster_mode_releases_on_commit, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
