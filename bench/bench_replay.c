/*
 * bench_replay: how fast a journal replays into the exchange state machine.
 *
 *  1. Generate: a journal of N commands written straight through hg_journal
 *     (no pipeline, no fsync per batch) into a fresh data directory: 4
 *     instruments, 256 funded accounts, then a stream of new orders (limit
 *     GTC/DAY/IOC around a slowly moving mid, about half crossing), cancels of
 *     recent orders, replaces, mass cancels, deposits and withdrawals, each
 *     checked by the clearing's pre-trade risk, and a DAILY_SETTLEMENT every
 *     250,000 commands (one trading day each: DSP, variation margin for
 *     every position, DAY orders expired). The stream is a pure function of
 *     the command index.
 *  2. replay.cmds_per_s: hg_pipeline_replay_journal() from an empty exchange,
 *     i.e. read + CRC check + protobuf decode + apply of every record, timed
 *     with CLOCK_MONOTONIC; the best of 3 runs (1 with --quick) is reported.
 *  3. recovery.cmds_per_s: hg_pipeline_open() on the same data directory,
 *     which has no snapshot: the journal's recovery scan decodes each record
 *     it has passed and feeds it to the applying (calling) thread; the
 *     pipeline's threads are never started.
 *  Besides wall and process CPU time, each run prints the rate over the
 *  calling (applying) thread's own CPU time, which bounds replay and moves
 *  far less than wall time when other processes share the cores.
 *
 * Usage: bench_replay [--quick] [--commands N] [--dir DIR] [--keep] [--use DATADIR]
 *   default N = 10,000,000 (--quick: 1,000,000). Files go to a fresh
 *   directory under DIR (default: the current directory, on the real disk)
 *   and are removed afterwards unless --keep; --use replays a kept directory
 *   again (give the same --commands) without generating, e.g. under perf.
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmdgen.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"
#include "hourglass/journal.h"
#include "hourglass/pipeline.h"

#define INSTRUMENTS 4u
#define ACCOUNTS 256u
#define SETUP (INSTRUMENTS + 2u * ACCOUNTS)
#define SESSION_EVERY 250000u
#define FIRST_DAY 20850 /* 2027-02-01 */
#define NS_PER_HOUR 3600000000000ull

/* Timestamp of command i: block b = i / SESSION_EVERY trades on day
 * FIRST_DAY + b from 09:00, one command per microsecond; the block's first
 * command is the previous day's 16:00 settlement cycle. */
static uint64_t ts_of(uint64_t i) {
  uint64_t b = i / SESSION_EVERY, k = i % SESSION_EVERY;
  if (b > 0 && k == 0) return ((uint64_t)FIRST_DAY + b - 1) * 24 * NS_PER_HOUR + 16 * NS_PER_HOUR;
  return ((uint64_t)FIRST_DAY + b) * 24 * NS_PER_HOUR + 9 * NS_PER_HOUR + k * 1000;
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wall time, the process's CPU time, and the calling thread's CPU time
 * (the applier's alone: the replay's feeder runs on a thread of its own). */
static uint64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
static uint64_t cpu_ns(void) { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
static uint64_t thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

/* Command i (0-based; its seq will be i + 1). */
static void gen(uint64_t i, hg_command_t *c) {
  memset(c, 0, sizeof *c);
  if (i < INSTRUMENTS) {
    c->type = HG_COMMAND_LIST_INSTRUMENT;
    snprintf(c->u.list.symbol, sizeof c->u.list.symbol, "B200.A.2027-%02u", (unsigned)(3 + i));
    cmdgen_book_params(&c->u.list.params, (uint32_t)(i + 1), 1u << 17, ACCOUNTS);
    return;
  }
  if (i < INSTRUMENTS + ACCOUNTS) {
    c->type = HG_COMMAND_ADD_ACCOUNT;
    c->u.add_account.account = (hg_account_t)(i - INSTRUMENTS + 1);
    c->u.add_account.firm = (uint32_t)(i - INSTRUMENTS) / 4 + 1;
    return;
  }
  if (i < SETUP) {
    c->type = HG_COMMAND_DEPOSIT;
    c->u.cash.account = (hg_account_t)(i - INSTRUMENTS - ACCOUNTS + 1);
    c->u.cash.amount = 1000000000000000ll; /* 1e9 USD */
    return;
  }
  if (i % SESSION_EVERY == 0) { /* the cycle of the previous block's day */
    c->type = HG_COMMAND_DAILY_SETTLEMENT;
    c->u.daily.day = FIRST_DAY + (int32_t)(i / SESSION_EVERY) - 1;
    return;
  }
  uint64_t r = cmdgen_mix(i);
  hg_account_t acct = (hg_account_t)(1 + (r >> 8) % ACCOUNTS);
  uint32_t inst = (uint32_t)(1 + (r >> 56) % INSTRUMENTS);
  int64_t mid = 3000 + (int64_t)((i / 20000) % 50) - 25;
  uint32_t kind = (uint32_t)(r % 1000);
  uint64_t back = 1 + (r >> 20) % 100;
  hg_oid_t target = (hg_oid_t)(i + 1 > back ? i + 1 - back : 1);
  if (kind >= 560 && kind < 960) {
    /* Aim at the order a recent command created, with its instrument and
     * account, so the cancel or replace succeeds if the order still rests. */
    hg_command_t t;
    gen(target - 1, &t);
    if (t.type == HG_COMMAND_NEW_ORDER) {
      inst = t.u.new_order.instrument_id;
      acct = t.u.new_order.account;
    }
  }
  if (kind < 560)
    cmdgen_new_order(c, inst, acct, i, r, mid, 10, 3); /* about half cross */
  else if (kind < 900)
    cmdgen_cancel(c, inst, acct, target);
  else if (kind < 960)
    cmdgen_replace(c, inst, acct, target, r, mid);
  else if (kind < 965)
    cmdgen_mass_cancel(c, inst, acct);
  else {
    c->type = kind < 985 ? HG_COMMAND_DEPOSIT : HG_COMMAND_WITHDRAW;
    c->u.cash.account = acct;
    c->u.cash.amount = (int64_t)(1 + (r >> 24) % 1000) * 1000000;
  }
}

static void quiet_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  if (level >= HG_LOG_WARN) fprintf(stderr, "bench_replay: %s\n", msg);
}

static int generate(const char *jdir, uint64_t n) {
  hg_journal_options_t jo;
  hg_journal_options_init(&jo);
  jo.batch_bytes = 8u << 20;
  jo.force_fallback = 1; /* plain pwritev; nothing here waits for durability */
  jo.log = quiet_log;
  hg_journal_t *j = NULL;
  int rc = hg_journal_open(jdir, &jo, &j);
  if (rc != 0) return rc;
  uint8_t buf[HG_COMMAND_MAX_ENCODED];
  for (uint64_t i = 0; i < n && rc == 0; i++) {
    hg_command_t c;
    gen(i, &c);
    c.seq = i + 1;
    c.ts = ts_of(i);
    size_t len;
    if ((rc = hg_command_encode(&c, buf, sizeof buf, &len)) != 0) break;
    while ((rc = hg_journal_append(j, c.seq, c.ts, buf, (uint32_t)len)) == HG_EBUSY) {
      if ((rc = hg_journal_commit(j)) != 0) break;
      if ((rc = hg_journal_poll(j, -1)) != 0) break;
    }
  }
  int rc2 = hg_journal_close(j);
  return rc ? rc : rc2;
}

typedef struct counts {
  uint64_t events, fills, rejects, cycles, vm;
} counts_t;

static void count_sink(void *ctx, const hg_exchange_event_t *ev) {
  counts_t *c = ctx;
  c->events++;
  if (ev->type == HG_XEV_BOOK && ev->book.type == HG_EV_FILL) c->fills++;
  if (ev->type == HG_XEV_CYCLE) c->cycles++;
  if (ev->type == HG_XEV_VM) c->vm++;
  if (ev->type == HG_XEV_REJECTED || (ev->type == HG_XEV_BOOK && ev->book.type == HG_EV_REJECTED))
    c->rejects++;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void pipe_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  if (level >= HG_LOG_WARN) fprintf(stderr, "bench_replay: %s\n", msg);
}

int main(int argc, char **argv) {
  int quick = 0, keep = 0;
  uint64_t n = 0;
  const char *base = ".", *use = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--keep") == 0) keep = 1;
    else if (strcmp(argv[i], "--commands") == 0 && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) base = argv[++i];
    else if (strcmp(argv[i], "--use") == 0 && i + 1 < argc) use = argv[++i];
    else {
      fprintf(stderr, "usage: bench_replay [--quick] [--commands N] [--dir DIR] [--keep] [--use DATADIR]\n");
      return 2;
    }
  }
  if (n == 0) n = quick ? 1000000u : 10000000u;
  if (n <= SETUP) n = SETUP + 1;

  char dir[4096], jdir[4200];
  int status = 1, rc;
  uint64_t t0 = now_ns();
  if (use != NULL) { /* a directory kept by an earlier --keep run, N as then */
    snprintf(dir, sizeof dir, "%s", use);
    snprintf(jdir, sizeof jdir, "%s/journal", dir);
    keep = 1;
    goto replay;
  }
  snprintf(dir, sizeof dir, "%s/bench-replay-XXXXXX", base);
  if (mkdtemp(dir) == NULL) {
    perror("bench_replay: mkdtemp");
    return 1;
  }
  snprintf(jdir, sizeof jdir, "%s/journal", dir);
  if (mkdir(jdir, 0750) != 0) {
    perror("bench_replay: mkdir");
    return 1;
  }
  rc = generate(jdir, n);
  if (rc != 0) {
    fprintf(stderr, "bench_replay: generating the journal: %s\n", hg_strerror(rc));
    goto out;
  }
  printf("generated %" PRIu64 " commands in %.2f s into %s\n", n, (double)(now_ns() - t0) / 1e9,
         dir);
replay:;

  hg_exchange_config_t xcfg = {.max_instruments = INSTRUMENTS,
                               .max_accounts = ACCOUNTS,
                               .max_book_orders = 1u << 20};
  double best = 0;
  uint8_t hash_replay[HG_SHA256_LEN];
  int runs = quick ? 1 : 3;
  for (int k = 0; k < runs; k++) {
    counts_t cnt = {0};
    hg_exchange_t *ex = NULL;
    if ((rc = hg_exchange_create(&xcfg, count_sink, &cnt, &ex)) != 0) goto out;
    uint64_t last = 0;
    uint64_t a = now_ns(), ca = cpu_ns();
    rc = hg_pipeline_replay_journal(jdir, ex, SETUP, &last);
    uint64_t m = now_ns(), cm = cpu_ns(), tm = thread_cpu_ns();
    if (rc == 0) rc = hg_pipeline_replay_journal(jdir, ex, UINT64_MAX, &last);
    uint64_t b = now_ns(), cb = cpu_ns(), tb = thread_cpu_ns();
    hg_exchange_hash(ex, hash_replay);
    hg_exchange_destroy(ex);
    if (rc != 0 || last != n) {
      fprintf(stderr, "bench_replay: replay stopped at %" PRIu64 ": %s\n", last, hg_strerror(rc));
      goto out;
    }
    double s = (double)(b - a) / 1e9, rate = (double)n / s;
    printf("replay run %d: %.3f s (cpu %.3f s), %.2f M cmd/s; setup (listings, accounts) %.3f s "
           "(cpu %.3f s); trading part %.2f M cmd/s (cpu-only %.2f M cmd/s, applier thread "
           "cpu-only %.2f M cmd/s); %" PRIu64
           " events, %" PRIu64 " fills, %" PRIu64 " rejects, %" PRIu64 " daily cycles, %" PRIu64
           " VM payments\n",
           k + 1, s, (double)(cb - ca) / 1e9, rate / 1e6, (double)(m - a) / 1e9,
           (double)(cm - ca) / 1e9, (double)(n - SETUP) / ((double)(b - m) / 1e9) / 1e6,
           (double)(n - SETUP) / ((double)(cb - cm) / 1e9) / 1e6,
           (double)(n - SETUP) / ((double)(tb - tm) / 1e9) / 1e6, cnt.events, cnt.fills,
           cnt.rejects, cnt.cycles, cnt.vm);
    if (rate > best) best = rate;
  }

  hg_pipeline_config_t pc;
  hg_pipeline_config_init(&pc);
  pc.data_dir = dir;
  pc.exchange = xcfg;
  pc.inbound_capacity = 1024;
  pc.outbound_capacity = 1024;
  pc.map_size = (size_t)1 << 30;
  pc.log = pipe_log;
  hg_pipeline_t *p = NULL;
  uint64_t a = now_ns(), ca = cpu_ns(), ta = thread_cpu_ns();
  rc = hg_pipeline_open(&pc, &p);
  uint64_t b = now_ns(), cb = cpu_ns(), tb = thread_cpu_ns();
  if (rc != 0) {
    fprintf(stderr, "bench_replay: recovery failed: %s\n", hg_strerror(rc));
    goto out;
  }
  uint8_t hash_rec[HG_SHA256_LEN];
  hg_pipeline_state_hash(p, hash_rec);
  hg_pipeline_close(p);
  if (memcmp(hash_rec, hash_replay, sizeof hash_rec) != 0) {
    fprintf(stderr, "bench_replay: recovery and replay hashes differ\n");
    goto out;
  }
  double rs = (double)(b - a) / 1e9;
  printf("recovery (open, no snapshot): %.3f s (cpu %.3f s), %.2f M cmd/s (cpu-only %.2f, "
         "calling thread cpu-only %.2f); state hash equal to the replay's\n",
         rs, (double)(cb - ca) / 1e9, (double)n / rs / 1e6, (double)n / ((double)(cb - ca) / 1e9) / 1e6,
         (double)n / ((double)(tb - ta) / 1e9) / 1e6);
  printf("RESULT replay.cmds_per_s %.0f cmd/s\n", best);
  printf("RESULT recovery.cmds_per_s %.0f cmd/s\n", (double)n / rs);
  status = 0;
out:
  if (!keep) nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return status;
}
