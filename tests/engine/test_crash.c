/*
 * Crash test. A child process runs the pipeline with journaling under a
 * continuous stream of generated commands and reports, through a pipe, the
 * seq of every command whose results it received (its acknowledgements).
 * The parent kills it with SIGKILL at a random moment, then recovers the
 * data directory and checks:
 *   - every acknowledged command is in the recovered state (last seq >= the
 *     highest ack) and acknowledgements came in seq order;
 *   - the journal holds exactly the commands that were sent, in order: record
 *     seq s decodes to generated command s - 1, so no command that was not
 *     sent appears;
 *   - the state hash after recovery (snapshot + journal tail) equals that of
 *     a replay of the whole journal into an empty exchange.
 * The next child continues from the recovered seq. Snapshots are frequent so
 * that kills land during snapshot writes and recovery uses snapshot + tail.
 *
 * With --mode loop the child drives a loop-mode pipeline as an event loop
 * would: it executes commands itself, commits each batch, and waits on the
 * pipeline's loop fd for the completion.
 *
 * With --liquidation 1 the stream is liqgen_command's: thinly funded
 * accounts sell 30 contracts, the provider's quotes move to the top of the
 * band, and MARK commands liquidate them a slice at a time (settlement/
 * CONTRACT.md section 4.6), so kills land in the middle of liquidations;
 * the test then also checks that liquidation fees were journaled.
 *
 *   test_crash [--kills N] [--seed S] [--mode threads|loop] [--liquidation 1]
 *   (default 20 kills, threads, cmdgen's stream)
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmdgen.h"
#include "hourglass/error.h"
#include "pipeline_util.h"

static unsigned g_kills = 20;
static uint64_t g_seed = 1;
static int g_mode = HG_PIPE_MODE_THREADS;

/* The liquidation stream: cmdgen's set-up (one contract at reference
 * 3,000, band 20%, eight accounts with 1,000,000 USD each); withdrawals
 * leave accounts 1..6 with 1,960 USD; then periods of 16 commands in which a
 * victim v (1..6 in turn) is topped up to 20,500 USD and sells 30 at 3,000
 * to the provider (8), who then quotes 3,590 / 3,600 (30 offered): mark
 * 3,595, equity 20,500 - 30 x 595 = 2,650 USD, below maintenance margin
 * (12,133 USD). Three MARKs buy back 10 at 3,600 each (fee 180 USD each,
 * equity staying below maintenance margin until flat), v is back to 1,960
 * USD, and the quotes return to 2,999 / 3,001. Kills land in the middle. */
#define LIQ_PERIOD 16u
#define LIQ_LP 8u
static void liqgen_command(uint64_t i, uint64_t seed, hg_command_t *c) {
  (void)seed;
  if (i < CMDGEN_SETUP) {
    cmdgen_command(i, 0, c);
    return;
  }
  memset(c, 0, sizeof *c);
  uint64_t j = i - CMDGEN_SETUP;
  if (j < 6) {
    c->type = HG_COMMAND_WITHDRAW;
    c->u.cash = (hg_cmd_cash_t){(hg_account_t)(1 + j), 998040000000ll};
    return;
  }
  j -= 6;
  hg_account_t v = (hg_account_t)(1 + (j / LIQ_PERIOD) % 6);
  hg_cmd_new_order_t *o = &c->u.new_order;
  c->type = HG_COMMAND_NEW_ORDER;
  *o = (hg_cmd_new_order_t){.instrument_id = CMDGEN_INSTRUMENT, .account = LIQ_LP,
                            .client_order_id = i, .type = HG_ORD_LIMIT, .tif = HG_TIF_GTC};
  switch (j % LIQ_PERIOD) {
  case 0: case 4: case 11:
    c->type = HG_COMMAND_MASS_CANCEL;
    c->u.mass_cancel = (hg_cmd_mass_cancel_t){0, LIQ_LP, HG_SIDES_BOTH};
    break;
  case 1: /* the last period's loss and fees */
    c->type = HG_COMMAND_DEPOSIT;
    c->u.cash = (hg_cmd_cash_t){v, 18540000000ll};
    break;
  case 2: o->side = HG_SIDE_BUY, o->price = 3000, o->qty = 30; break;
  case 3: o->account = v, o->side = HG_SIDE_SELL, o->price = 3000, o->qty = 30; break;
  case 5: o->side = HG_SIDE_BUY, o->price = 3590, o->qty = 5; break;
  case 6: o->side = HG_SIDE_SELL, o->price = 3600, o->qty = 30; break;
  case 12: o->side = HG_SIDE_BUY, o->price = 2999, o->qty = 1; break;
  case 13: o->side = HG_SIDE_SELL, o->price = 3001, o->qty = 1; break;
  default: c->type = HG_COMMAND_MARK; break; /* 7..10, 14, 15 */
  }
}

static int g_liquidation = 0;
static void gen(uint64_t i, uint64_t seed, hg_command_t *c) {
  if (g_liquidation) liqgen_command(i, seed, c);
  else cmdgen_command(i, seed, c);
}

/* Writes the seqs of the DONE records among out[0..n) to ack_fd. */
static void send_acks(int ack_fd, const hg_pipe_out_t *out, size_t n) {
  uint64_t acks[512];
  size_t k = 0;
  for (size_t j = 0; j < n && k < 512; j++)
    if (out[j].kind == HG_PIPE_DONE) acks[k++] = out[j].seq;
  if (k && write(ack_fd, acks, k * sizeof acks[0]) != (ssize_t)(k * sizeof acks[0])) _exit(5);
}

/* The child's loop in loop mode: 64 commands per iteration, one commit,
 * then a wait on the loop fd (1 ms at most) and the reap. */
static void child_loop(hg_pipeline_t *p, uint64_t i, int ack_fd) {
  hg_pipe_out_t out[512];
  for (;;) {
    for (int b = 0; b < 64; b++) {
      hg_command_t cmd;
      gen(i, g_seed, &cmd);
      int rc = hg_pipeline_execute(p, i, &cmd);
      if (rc == HG_EBUSY) break;
      if (rc != 0) _exit(4);
      i++;
    }
    int ready = hg_pipeline_loop_commit(p);
    struct pollfd pf = {.fd = hg_pipeline_loop_fd(p), .events = POLLIN};
    if (poll(&pf, 1, 1) > 0) ready |= hg_pipeline_loop_reap(p, 0);
    size_t n;
    while (ready && (n = hg_pipeline_poll(p, out, 512)) > 0) send_acks(ack_fd, out, n);
  }
}

static void child_run(const char *dir, int ack_fd) {
  util_log_t log = {0};
  hg_pipeline_config_t cfg;
  util_config(&cfg, dir, &log);
  cfg.snapshot_every = 300;
  cfg.mode = g_mode;
  hg_pipeline_t *p = NULL;
  if (hg_pipeline_open(&cfg, &p) != 0 || hg_pipeline_start(p) != 0) _exit(3);
  uint64_t i = hg_exchange_last_seq(hg_pipeline_exchange(p)); /* next index */
  const uint64_t ready = UINT64_MAX;
  if (write(ack_fd, &ready, sizeof ready) != sizeof ready) _exit(5);
  if (g_mode == HG_PIPE_MODE_LOOP) child_loop(p, i, ack_fd);
  hg_pipe_out_t out[512];
  uint64_t acks[512];
  for (;;) {
    hg_command_t cmd;
    gen(i, g_seed, &cmd);
    int rc = hg_pipeline_submit(p, i, &cmd);
    if (rc == 0) {
      /* About 50k commands/s keeps the journal of a 500-kill run small. */
      if (++i % 64 == 0) nanosleep(&(struct timespec){0, 1000000}, NULL);
    } else if (rc != HG_EBUSY) {
      _exit(4);
    }
    size_t n = hg_pipeline_poll(p, out, 512), k = 0;
    for (size_t j = 0; j < n; j++)
      if (out[j].kind == HG_PIPE_DONE) acks[k++] = out[j].seq;
    if (k && write(ack_fd, acks, k * sizeof acks[0]) != (ssize_t)(k * sizeof acks[0])) _exit(5);
    if (rc == HG_EBUSY) hg_pipeline_wait(p, 1000000);
  }
}

/* Reads whole acks from fd until EOF or the deadline; checks their order.
 * The child writes at most PIPE_BUF bytes per write(), so acks never tear. */
static uint8_t g_buf[1 << 16];
static size_t g_have;
static int g_ready;

static void read_acks(int fd, int64_t ms, int stop_at_ready, uint64_t *max_ack, uint64_t *count) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint8_t *buf = g_buf;
  size_t have = g_have;
  for (;;) {
    int wait_ms = -1;
    if (ms >= 0) {
      struct timespec t;
      clock_gettime(CLOCK_MONOTONIC, &t);
      int64_t el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
      if (el >= ms) break;
      wait_ms = (int)(ms - el);
    }
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int pr = poll(&pfd, 1, wait_ms);
    if (pr == 0) break;
    ssize_t r = read(fd, buf + have, sizeof g_buf - have);
    if (r <= 0) break;
    have += (size_t)r;
    size_t whole = have / 8 * 8;
    for (size_t off = 0; off < whole; off += 8) {
      uint64_t s;
      memcpy(&s, buf + off, 8);
      if (s == UINT64_MAX) { /* the child finished recovery and started */
        g_ready = 1;
        if (stop_at_ready) {
          memmove(buf, buf + off + 8, have - off - 8);
          g_have = have - off - 8;
          return;
        }
        continue;
      }
      assert_int_equal(s, *max_ack + 1); /* in seq order, none skipped */
      *max_ack = s;
      (*count)++;
    }
    memmove(buf, buf + whole, have - whole);
    have -= whole;
  }
  g_have = have;
}

/* shadow: an exchange that has applied the journal from seq 1 up to
 * *last_out; it only ever moves forward, since the durable prefix never
 * changes, so it equals a from-scratch replay without redoing it. */
static void verify(const char *dir, uint64_t max_ack, hg_exchange_t *shadow, uint64_t *last_out) {
  util_log_t log = {0};
  hg_pipeline_config_t cfg;
  util_config(&cfg, dir, &log);
  hg_pipeline_t *p = NULL;
  int rc = hg_pipeline_open(&cfg, &p);
  if (rc != 0) fail_msg("recovery failed: %s (%s)", hg_strerror(rc), log.last);
  uint64_t last = hg_exchange_last_seq(hg_pipeline_exchange(p));
  assert_true(last >= max_ack);

  /* The journal holds exactly the generated commands 0..last-1. */
  char jdir[128];
  snprintf(jdir, sizeof jdir, "%s/journal", dir);
  hg_journal_reader_t *rd = NULL;
  uint64_t n = *last_out;
  assert_true(last >= n); /* nothing durable was lost */
  assert_int_equal(hg_journal_reader_open(jdir, n + 1, &rd), 0);
  hg_journal_record_t rec;
  while ((rc = hg_journal_reader_next(rd, UINT64_MAX, &rec)) == 0) {
    n++;
    assert_int_equal(rec.seq, n);
    hg_command_t want, got;
    assert_int_equal(hg_command_decode(rec.payload, rec.len, &got), 0);
    gen(rec.seq - 1, g_seed, &want);
    want.seq = rec.seq;
    want.ts = got.ts;
    uint8_t a[HG_COMMAND_MAX_ENCODED], b[HG_COMMAND_MAX_ENCODED];
    size_t la = 0, lb = 0;
    assert_int_equal(hg_command_encode(&want, a, sizeof a, &la), 0);
    assert_int_equal(hg_command_encode(&got, b, sizeof b, &lb), 0);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
  }
  assert_int_equal(rc, HG_ENOTFOUND);
  hg_journal_reader_close(rd);
  assert_int_equal(n, last);

  /* Snapshot + tail equals a replay from the beginning. */
  uint8_t h1[HG_SHA256_LEN], h2[HG_SHA256_LEN];
  hg_pipeline_state_hash(p, h1);
  uint64_t rlast = 0;
  assert_int_equal(hg_pipeline_replay_journal(jdir, shadow, UINT64_MAX, &rlast), 0);
  assert_int_equal(rlast, last);
  hg_exchange_hash(shadow, h2);
  assert_memory_equal(h1, h2, sizeof h1);
  hg_pipeline_close(p);
  *last_out = last;
}

static void kill_and_recover(void **state) {
  (void)state;
  char dir[64];
  assert_non_null(util_tmpdir(dir, "crash"));
  uint64_t rng = g_seed * 0x9e3779b97f4a7c15ull + 1;
  uint64_t total_acks = 0, last = 0;
  util_log_t log = {0};
  hg_pipeline_config_t cfg;
  util_config(&cfg, dir, &log);
  hg_exchange_t *shadow = NULL;
  assert_int_equal(hg_exchange_create(&cfg.exchange, util_null_sink, NULL, &shadow), 0);
  for (unsigned k = 0; k < g_kills; k++) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      child_run(dir, fds[1]);
      _exit(0);
    }
    close(fds[1]);
    rng = cmdgen_mix(rng);
    uint64_t max_ack = last, count = 0;
    g_have = 0;
    g_ready = 0;
    if (rng % 4 == 0) {
      /* A quarter of the kills land early: during recovery or start-up. */
      read_acks(fds[0], (int64_t)(rng >> 8) % 30, 0, &max_ack, &count);
    } else {
      /* Otherwise 0..149 ms into trading: commits, snapshots, roll-overs. */
      read_acks(fds[0], 20000, 1, &max_ack, &count);
      assert_true(g_ready);
      read_acks(fds[0], (int64_t)(rng >> 8) % 150, 0, &max_ack, &count);
    }
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status)) fail_msg("child exited with %d before the kill", WEXITSTATUS(status));
    read_acks(fds[0], -1, 0, &max_ack, &count); /* what it wrote before dying */
    close(fds[0]);
    verify(dir, max_ack, shadow, &last);
    total_acks += count;
  }
  print_message("crash test: %u kills, %llu acknowledged commands, journal at seq %llu\n",
                g_kills, (unsigned long long)total_acks, (unsigned long long)last);
  assert_true(last > CMDGEN_SETUP);
  if (g_liquidation) { /* the kills landed among liquidations that happened */
    const hg_clearing_t *clr = hg_exchange_clearing(shadow);
    uint64_t fees = 0;
    for (uint64_t e = 0; e < hg_clearing_ledger_size(clr); e++) {
      hg_ledger_entry_t le;
      assert_int_equal(hg_clearing_ledger_get(clr, e, &le), 0);
      fees += le.kind == HG_LEDGER_LIQ_FEE;
    }
    print_message("liquidation fee entries: %llu\n", (unsigned long long)fees);
    assert_true(fees > 0);
  }
  hg_exchange_destroy(shadow);
  util_rm_rf(dir);
}

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--kills") == 0) g_kills = (unsigned)strtoul(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--seed") == 0) g_seed = strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--liquidation") == 0) g_liquidation = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--mode") == 0)
      g_mode = strcmp(argv[i + 1], "loop") == 0 ? HG_PIPE_MODE_LOOP : HG_PIPE_MODE_THREADS;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(kill_and_recover)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
