/*
 * `hgctl statement` and `hgctl replay` end to end on a small data directory
 * written by the real pipeline (journal + snapshot), with settlement.
 * Argument: the hgctl binary.
 *
 * The scenario, by hand (seq @ UTC time: command). Contract B200.A.2027-03,
 * id 1, listed with reference (first settlement) price 3000 ticks; TV = 1 USD
 * = 1e6 micro-USD per tick per contract.
 *   1 @03-30 09:00 list;  2-5 add accounts 1..4 (firms 1,1,2,2);
 *   6-9 deposit 1,000,000 USD each;  10 account 2 withdraws 250 USD;
 *   11 acct 1 buys 10 @ 3000 (rests);  12 acct 2 sells 4 @ 3000: fill 4;
 *   13 end of session;
 *   14 @15:56 acct 3 sells 6 @ 3020 (rests);  15 @15:57 acct 4 buys 2 @ 3020:
 *      fill 2 @ 3020;
 *   16 @16:00 daily settlement 03-30: tier 1, VWAP of [15:55, 16:00) = 3020.
 *      VM = q x (3020 - p): acct 1 +4 x 20 = +80 USD, acct 2 -80, accts 3, 4: 0.
 *   17 @03-31 10:00 acct 2 buys 3 @ 3020: fill 3 vs acct 3 (1 left at 3020);
 *   18 @10:01 acct 4 sells 1 @ 3008 (rests): best 3000 / 3008, spread 8;
 *   19 @16:00 daily settlement 03-31: no trade in the window, tier 2: mid
 *      3004. VM = pos_prev x (3004 - 3020) + fills: acct 1: 4 x -16 = -64;
 *      acct 2: -4 x -16 + 3 x (3004 - 3020) = +64 - 48 = +16; acct 3:
 *      -2 x -16 - 3 x -16 = +80; acct 4: 2 x -16 = -32 (sum 0). Last trading
 *      day: the 3 resting orders are cancelled.
 *   20-81 @04-03 09:00 every March day's fixing published at 3.010 USD and
 *      finalized;  82 expire: FSP 3010, paid pos x (3010 - 3004):
 *      acct 1 (+4) +24, acct 2 (-1) -6, acct 3 (-5) -30, acct 4 (+2) +12.
 *   83 list B200.A.2027-04 (id 2);  84-85 acct 1 buys 1 from acct 2 @ 3000
 *      (positions that stay open, no cash moves: no cycle follows);
 *   86 acct 4 deposits 5 USD (or 6, for the snapshot test);  87 end of session.
 * So 4 fills, 5 cycles (2 end of session, 2 daily, 1 expiry).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <lmdb.h>

#include "cli_run.h"
#include "cmdgen.h"

#include "hourglass/error.h"
#include "hourglass/pipeline.h"
#include "hourglass/sha256.h"

#include "pipeline_util.h"

/* The capacities of util_config(), which the replay must be given. */
#define CAPS "--max-instruments 4 --max-accounts 64 --max-book-orders 65536"

static const char *hgctl;
static char dir[64];
static char hash_hex[65];

#define DAY_0330 20907
#define DAY_0331 20908
#define DAY_0403 20911
#define NS_H 3600000000000ull

static _Atomic uint64_t clock_ns;
static uint64_t submitted, done;

static uint64_t at(int32_t day, unsigned hh, unsigned mm) {
  return (uint64_t)day * 24 * NS_H + hh * NS_H + mm * 60000000000ull;
}

/* The sequencer's clock: the time the test set, one ns later per call. */
static uint64_t fake_clock(void *ctx) {
  (void)ctx;
  return atomic_fetch_add(&clock_ns, 1);
}

/* Submits one command and waits until it is processed, so that the clock
 * the test sets next cannot be read for it. */
static void submit(hg_pipeline_t *p, hg_command_t *c) {
  assert_int_equal(util_submit_wait(p, c, &submitted, &done), 0);
}

static void order(hg_pipeline_t *p, uint32_t acct, int side, int64_t price, int64_t qty) {
  hg_command_t c = {0};
  c.type = HG_COMMAND_NEW_ORDER;
  c.u.new_order.instrument_id = 1;
  c.u.new_order.account = acct;
  c.u.new_order.client_order_id = submitted;
  c.u.new_order.side = (uint8_t)side;
  c.u.new_order.type = HG_ORD_LIMIT;
  c.u.new_order.tif = HG_TIF_GTC;
  c.u.new_order.price = price;
  c.u.new_order.qty = qty;
  submit(p, &c);
}

static void cash(hg_pipeline_t *p, uint32_t type, uint32_t acct, int64_t amount) {
  hg_command_t c = {0};
  c.type = type;
  c.u.cash.account = acct;
  c.u.cash.amount = amount;
  submit(p, &c);
}

static void session_end(hg_pipeline_t *p, uint32_t date) {
  hg_command_t c = {0};
  c.type = HG_COMMAND_END_OF_SESSION;
  c.u.end_of_session.session_date = date;
  submit(p, &c);
}

static void daily(hg_pipeline_t *p, int32_t day) {
  hg_command_t c = {0};
  c.type = HG_COMMAND_DAILY_SETTLEMENT;
  c.u.daily.day = day;
  submit(p, &c);
}

static void hex(const uint8_t *h, char *out) {
  for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", h[i]);
}

/* Runs `hgctl <args>` (a printf format) with stdout and stderr together and
 * checks its exit status and that its output holds `want`. */
static void expect_run(int status, const char *want, const char *fmt, ...) {
  char args[1024], *o;
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  assert_true(len > 0 && (size_t)len < sizeof args);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), status);
  cli_expect(o, want);
  free(o);
}

/* SHA-256 over every file's name and bytes under the data directory, so a
 * test can tell whether anything there changed. */
static void dir_digest(const char *d, char out[65]) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "cd %s && find . -type f | LC_ALL=C sort | xargs sha256sum", d);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  hg_sha256_t s;
  hg_sha256_init(&s);
  char buf[4096];
  size_t r;
  while ((r = fread(buf, 1, sizeof buf, p)) > 0) hg_sha256_update(&s, buf, r);
  assert_int_equal(pclose(p), 0);
  uint8_t h[32];
  hg_sha256_final(&s, h);
  hex(h, out);
}

/* A started pipeline on directory d, its clock at 2027-03-30 09:00. */
static hg_pipeline_t *start(const char *d) {
  static util_log_t log; /* one pipeline at a time */
  memset(&log, 0, sizeof log);
  hg_pipeline_config_t cfg;
  util_config(&cfg, d, &log);
  cfg.clock = fake_clock;
  submitted = done = 0;
  atomic_store(&clock_ns, at(DAY_0330, 9, 0));
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  return p;
}

/* Writes the scenario into directory d, account 4's last deposit being
 * last_deposit micro-USD, and the final state hash (hex) into hx. */
static void build(const char *d, int64_t last_deposit, char *hx) {
  hg_pipeline_t *p = start(d);

  hg_command_t c = {0};
  c.type = HG_COMMAND_LIST_INSTRUMENT;
  snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "B200.A.2027-03");
  cmdgen_book_params(&c.u.list.params, 1, 1024, 16);
  const hg_book_params_t params = c.u.list.params;
  submit(p, &c);
  for (uint32_t a = 1; a <= 4; a++) {
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_ADD_ACCOUNT;
    c.u.add_account.account = a;
    c.u.add_account.firm = (a + 1) / 2;
    submit(p, &c);
  }
  for (uint32_t a = 1; a <= 4; a++) cash(p, HG_COMMAND_DEPOSIT, a, 1000000000000ll);
  cash(p, HG_COMMAND_WITHDRAW, 2, 250000000);
  order(p, 1, HG_SIDE_BUY, 3000, 10);
  order(p, 2, HG_SIDE_SELL, 3000, 4);
  session_end(p, 20270330);
  atomic_store(&clock_ns, at(DAY_0330, 15, 56));
  order(p, 3, HG_SIDE_SELL, 3020, 6);
  atomic_store(&clock_ns, at(DAY_0330, 15, 57));
  order(p, 4, HG_SIDE_BUY, 3020, 2);
  atomic_store(&clock_ns, at(DAY_0330, 16, 0));
  daily(p, DAY_0330);
  atomic_store(&clock_ns, at(DAY_0331, 10, 0));
  order(p, 2, HG_SIDE_BUY, 3020, 3);
  atomic_store(&clock_ns, at(DAY_0331, 10, 1));
  order(p, 4, HG_SIDE_SELL, 3008, 1);
  atomic_store(&clock_ns, at(DAY_0331, 16, 0));
  daily(p, DAY_0331);
  atomic_store(&clock_ns, at(DAY_0403, 9, 0));
  for (int32_t day = DAY_0331 - 30; day <= DAY_0331; day++) {
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_PUBLISH_FIXING;
    snprintf(c.u.fixing.gpu, sizeof c.u.fixing.gpu, "B200");
    snprintf(c.u.fixing.grade, sizeof c.u.fixing.grade, "A");
    c.u.fixing.day = day;
    c.u.fixing.value = 3010000;
    snprintf(c.u.fixing.source, sizeof c.u.fixing.source, "ext");
    submit(p, &c);
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_FINALIZE_FIXING;
    snprintf(c.u.index_day.gpu, sizeof c.u.index_day.gpu, "B200");
    snprintf(c.u.index_day.grade, sizeof c.u.index_day.grade, "A");
    c.u.index_day.day = day;
    submit(p, &c);
  }
  memset(&c, 0, sizeof c);
  c.type = HG_COMMAND_EXPIRE;
  c.u.expire.instrument_id = 1;
  submit(p, &c);
  memset(&c, 0, sizeof c);
  c.type = HG_COMMAND_LIST_INSTRUMENT;
  snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "B200.A.2027-04");
  c.u.list.params = params;
  c.u.list.params.instrument_id = 2;
  submit(p, &c);
  hg_command_t o = {0};
  o.type = HG_COMMAND_NEW_ORDER;
  o.u.new_order = (hg_cmd_new_order_t){.instrument_id = 2, .account = 1, .client_order_id = 1,
                                       .price = 3000, .qty = 1, .side = HG_SIDE_BUY,
                                       .type = HG_ORD_LIMIT, .tif = HG_TIF_GTC};
  submit(p, &o);
  o.u.new_order.account = 2;
  o.u.new_order.side = HG_SIDE_SELL;
  submit(p, &o);
  cash(p, HG_COMMAND_DEPOSIT, 4, last_deposit);
  session_end(p, 20270403);
  assert_int_equal(submitted, 87);
  assert_int_equal(hg_pipeline_stop(p), 0);
  uint8_t h[32];
  hg_pipeline_state_hash(p, h);
  hex(h, hx);
  hg_pipeline_close(p);
}

static int setup(void **state) {
  (void)state;
  assert_non_null(util_tmpdir(dir, "tools"));
  build(dir, 5000000, hash_hex);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  util_rm_rf(dir);
  return 0;
}


static void replay_hashes_and_snapshot(void **state) {
  (void)state;
  char *o, args[512], want[256];
  snprintf(args, sizeof args, "replay --data %s " CAPS "", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "cycle seq=13 SESSION_END expired_day_orders=0 hash=");
  /* Prices in USD per GPU-hour, money in USD. */
  cli_expect(o,
             "dsp seq=16 day=2027-03-30 instrument=1 price=3.020 tier=1\n"
             "cycle seq=16 DAILY_SETTLEMENT day=2027-03-30 vm_sum=0.00 vm_paid=-80.00 "
             "vm_received=80.00 vm_entries=4 orders_expired=0 hash=");
  cli_expect(o,
             "dsp seq=19 day=2027-03-31 instrument=1 price=3.004 tier=2\n"
             "cycle seq=19 DAILY_SETTLEMENT day=2027-03-31 vm_sum=0.00 vm_paid=-96.00 "
             "vm_received=96.00 vm_entries=4 orders_expired=3 hash=");
  cli_expect(
      o, "cycle seq=82 EXPIRE instrument=1 fsp=3.010 positions_closed=4 orders_cancelled=0 hash=");
  cli_expect(o, "cycle seq=87 SESSION_END");
  snprintf(want, sizeof want, "snapshot seq=87 hash=%s matches", hash_hex);
  cli_expect(o, want);
  cli_expect(o, "positions checked=2 (fills agree with clearing)\n");
  snprintf(want, sizeof want, "end seq=87 commands=87 fills=4 rejects=0 cycles=5 hash=%s\n",
           hash_hex);
  cli_expect(o, want);
  free(o);
  /* --raw: the state machine's ticks and micro-USD. */
  snprintf(args, sizeof args, "replay --raw --data %s " CAPS "", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o,
             "dsp seq=16 day=2027-03-30 instrument=1 price=3020 tier=1\n"
             "cycle seq=16 DAILY_SETTLEMENT day=2027-03-30 vm_sum=0 vm_paid=-80000000 "
             "vm_received=80000000 vm_entries=4 orders_expired=0 hash=");
  cli_expect(
      o, "cycle seq=82 EXPIRE instrument=1 fsp=3010 positions_closed=4 orders_cancelled=0 hash=");
  free(o);
}

/* A snapshot that is not the journal's state: the journal of the scenario
 * with the state store of a run whose last deposit differed. */
static void snapshot_mismatch_detected(void **state) {
  (void)state;
  char other[64], other_hash[65], args[1024], *o;
  assert_non_null(util_tmpdir(other, "tools-other"));
  build(other, 6000000, other_hash);
  assert_string_not_equal(other_hash, hash_hex);
  snprintf(args, sizeof args, "rm -rf %s/journal && cp -r %s/journal %s/journal", other, dir, other);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args, "replay --data %s " CAPS "", other);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  char want[160];
  snprintf(want, sizeof want, "snapshot seq=87 hash=%s MISMATCH", other_hash);
  cli_expect(o, want);
  snprintf(want, sizeof want, "end seq=87 commands=87 fills=4 rejects=0 cycles=5 hash=%s", hash_hex);
  cli_expect(o, want);
  free(o);
  util_rm_rf(other);
}

/* A newest snapshot with one flipped bit (LMDB keeps no checksum of values;
 * the snapshot header's CRC does): named BAD, exit 1, the replay itself
 * still runs to the end. */
static void bad_snapshot_named(void **state) {
  (void)state;
  char other[64], args[1024], *o;
  assert_non_null(util_tmpdir(other, "tools-bad"));
  snprintf(args, sizeof args, "rm -rf %s && cp -r %s %s", other, dir, other);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args, "%s/state", other);
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  assert_int_equal(mdb_env_create(&env), 0);
  assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
  assert_int_equal(mdb_env_set_mapsize(env, (size_t)1 << 30), 0);
  assert_int_equal(mdb_env_open(env, args, 0, 0640), 0);
  assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
  assert_int_equal(mdb_dbi_open(txn, "snapshots", 0, &dbi), 0);
  uint8_t kb[8] = {0, 0, 0, 0, 0, 0, 0, 87};
  MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
  assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
  uint8_t *copy = malloc(v.mv_size);
  assert_non_null(copy);
  memcpy(copy, v.mv_data, v.mv_size);
  copy[v.mv_size / 2] ^= 0x08;
  MDB_val nv = {.mv_size = v.mv_size, .mv_data = copy};
  assert_int_equal(mdb_put(txn, dbi, &k, &nv, 0), 0);
  assert_int_equal(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  free(copy);
  snprintf(args, sizeof args, "replay --data %s " CAPS "", other);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  cli_expect(o, "snapshot seq=87 BAD (checksum mismatch");
  cli_expect(o, "the newest snapshot (seq 87) in ");
  char want[160];
  snprintf(want, sizeof want, "end seq=87 commands=87 fills=4 rejects=0 cycles=5 hash=%s", hash_hex);
  cli_expect(o, want);
  free(o);
  util_rm_rf(other);
}

static void statement_and_fills(void **state) {
  (void)state;
  char *o, args[512];
  snprintf(args, sizeof args, "statement --data %s " CAPS " --account 1", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  cli_expect(o, "index,seq,ts,account,instrument,kind,amount,balance,price,qty\n0,6,");
  cli_expect(o, ",1,,DEPOSIT,1000000000000,1000000000000,0,0\n");
  cli_expect(o, ",16,1806422400000000000,1,1,VM,80000000,1000080000000,3020,4\n");
  cli_expect(o, ",19,1806508800000000000,1,1,VM,-64000000,1000016000000,3004,4\n");
  cli_expect(o, ",82,");
  cli_expect(o, ",1,1,FINAL,24000000,1000040000000,3010,4\n");
  assert_null(strstr(o, ",2,,DEPOSIT")); /* only account 1 */
  free(o);
  snprintf(args, sizeof args, "statement --data %s " CAPS " --account 2", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  cli_expect(o, ",2,,WITHDRAWAL,-250000000,999750000000,0,0\n");
  cli_expect(o, ",2,1,VM,-80000000,999670000000,3020,-4\n");
  cli_expect(o, ",2,1,VM,16000000,999686000000,3004,-1\n");
  cli_expect(o, ",2,1,FINAL,-6000000,999680000000,3010,-1\n");
  free(o);
  /* The trades behind the VM entries: account 3 sold 2 at 3020 (seq 15) and
   * 3 at 3020 (seq 17), both resting (not the aggressor); the cycles of seq
   * 16 and 19 settled them. Account 1's buy of 2027-04 (seq 85) is not
   * settled yet. */
  snprintf(args, sizeof args, "statement --data %s " CAPS " --account 3 --trades", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  cli_expect(o, "trade_id,seq,time_utc,instrument,symbol,side,aggressor,price_usd,qty,"
                "position_after,settled_by_index,settled_by_seq\n"
                "15.1,15,2027-03-30T15:57:00.000000000Z,1,B200.A.2027-03,sell,no,3.020,2,-2,");
  cli_expect(o, ",16\n17.1,17,2027-03-31T10:00:00.000000000Z,1,B200.A.2027-03,sell,no,3.020,3,-5,");
  cli_expect(o, ",19\n");
  free(o);
  snprintf(args, sizeof args, "statement --data %s " CAPS " --account 1 --instrument 2 --trades",
           dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  cli_expect(o, "\n85.1,85,2027-04-03T09:00:00.000000065Z,2,B200.A.2027-04,buy,no,3.000,1,1,,\n");
  assert_null(strstr(o, ",B200.A.2027-03,"));
  free(o);
  snprintf(args, sizeof args,
           "statement --data %s " CAPS " --account 4 --instrument 1 --format json", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  cli_expect(o, "{\"account\":4,\"instrument\":1,\"entries\":[");
  cli_expect(o,
             "\"kind\":\"FINAL\",\"amount\":12000000,\"balance\":999980000000,\"price\":3010,"
             "\"qty\":2}");
  cli_expect(o, "],\"total\":-20000000}\n"); /* 0 - 32 + 12 USD */
  assert_null(strstr(o, "DEPOSIT"));
  free(o);

  char fills[128];
  snprintf(fills, sizeof fills, "%s.fills.csv", dir);
  snprintf(args, sizeof args, "replay --quiet --data %s " CAPS " --fills %s", dir, fills);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  free(o);
  o = cli_slurp(fills);
  /* UTC times (the sequencer's clock: the time set, +1 ns per command
   * stamped since), USD, and the aggressor: the side of the order that
   * arrived and took liquidity. */
  assert_string_equal(
      o,
      "seq,trade_id,time_utc,instrument,symbol,price_usd,qty,aggressor,buyer,seller,"
      "buyer_position,seller_position,liquidated\n"
      "12,12.1,2027-03-30T09:00:00.000000011Z,1,B200.A.2027-03,3.000,4,sell,1,2,4,-4,\n"
      "15,15.1,2027-03-30T15:57:00.000000000Z,1,B200.A.2027-03,3.020,2,buy,4,3,2,-2,\n"
      "17,17.1,2027-03-31T10:00:00.000000000Z,1,B200.A.2027-03,3.020,3,buy,2,3,-1,-5,\n"
      "85,85.1,2027-04-03T09:00:00.000000065Z,2,B200.A.2027-04,3.000,1,sell,1,2,1,-1,\n");
  free(o);
  snprintf(args, sizeof args, "replay --quiet --raw --data %s " CAPS " --fills %s", dir, fills);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "verdict: OK\n"); /* --quiet keeps the verdict */
  free(o);
  o = cli_slurp(fills);
  cli_expect(o, "seq,trade_id,ts_ns,instrument,symbol,price_ticks,qty,aggressor,");
  cli_expect(o, "\n15,15.1,1806422220000000000,1,B200.A.2027-03,3020,2,buy,4,3,2,-2,\n");
  free(o);
  remove(fills);
}

/* --until stops after a day; --day prints that day's lines and fills only. */
static void replay_one_day(void **state) {
  (void)state;
  char *o, args[512], fills[128];
  snprintf(fills, sizeof fills, "%s.day.csv", dir);
  snprintf(args, sizeof args, "replay --data %s " CAPS " --day 2027-03-31 --fills %s", dir, fills);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  assert_null(strstr(o, "day=2027-03-30"));
  assert_null(strstr(o, "SESSION_END"));
  cli_expect(o, "dsp seq=19 day=2027-03-31 instrument=1 price=3.004 tier=2\n");
  cli_expect(o, "snapshot seq=87 not compared: the replay stopped before it\n");
  cli_expect(o, "end seq=19 commands=19 fills=3 rejects=0 cycles=3 hash=");
  cli_expect(o, "stopped at the end of 2027-03-31");
  cli_expect(o, "verdict: OK\n");
  free(o);
  o = cli_slurp(fills);
  assert_string_equal(
      o,
      "seq,trade_id,time_utc,instrument,symbol,price_usd,qty,aggressor,buyer,seller,"
      "buyer_position,seller_position,liquidated\n"
      "17,17.1,2027-03-31T10:00:00.000000000Z,1,B200.A.2027-03,3.020,3,buy,2,3,-1,-5,\n");
  free(o);
  remove(fills);
  snprintf(args, sizeof args, "replay --data %s " CAPS " --until 2027-03-30", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "cycle seq=13 SESSION_END");
  cli_expect(o, "end seq=16 commands=16 fills=2 ");
  assert_null(strstr(o, "day=2027-03-31"));
  free(o);
  expect_run(2, "not a valid YYYY-MM-DD date", "replay --data %s " CAPS " --day 2027-02-30", dir);
}

/*
 * What-if before expiry, by hand. After the cycle of 2027-03-30 (--until):
 * DSP 3020, positions acct 1 +4, 2 -4, 3 -2, 4 +2, no fill since, no
 * fixing published. The rest of March at 3.0105 USD: all 31 days
 * 3,010,500 micro-USD, sum 93,325,500;
 *   FSP = floor((2 x 93,325,500 + 31,000) / 62,000) = floor(186,682,000 / 62,000)
 *       = 3011 (the mean 3010.5 ticks rounds half up);
 * P&L = pos x (3011 - 3020) x 1 USD: acct 1 -36, acct 2 +36, acct 3 +18,
 * acct 4 -18 (sum 0).
 * At the journal's end B200.A.2027-04 (id 2) is open: acct 1 bought 1 from
 * acct 2 at 3000 and no cycle followed. At 3.2 (FSP 3200) acct 1 makes
 * 1 x 3200 - 3000 = +200 USD, acct 2 -200 (the fills since the last DSP,
 * section 5.6).
 */
static void whatif_projection_by_hand(void **state) {
  (void)state;
  char *o, args[512], before[65], after[65];
  dir_digest(dir, before);
  snprintf(args, sizeof args,
           "replay --data %s " CAPS " --until 2027-03-30 --project 3.0105 --index B200.A", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "what-if B200.A.2027-03 (instrument 1): the rest of 2027-03 fixes at 3.010500\n");
  /* One line for the days the value fills, not one per day. */
  cli_expect(o, "  31 days 2027-03-01..2027-03-31 take 3.010500 (what-if): 31 not published, 0 "
                "PROVISIONAL, 0 NO_FIX\n");
  assert_null(strstr(o, "2027-03-02"));
  cli_expect(o, "what-if fsp=3.011 (0 FINAL fixings kept, 31 filled) last_dsp=3.020\n");
  cli_expect(o, "  1          B200.A.2027-03            4      3.020      3.011             -36.00\n");
  cli_expect(o, "  2          B200.A.2027-03           -4      3.020      3.011              36.00\n");
  cli_expect(o, "  3          B200.A.2027-03           -2      3.020      3.011              18.00\n");
  cli_expect(o, "  4          B200.A.2027-03            2      3.020      3.011             -18.00\n");
  cli_expect(o, "  total                                                                      0.00\n");
  /* Then the firm totals over every contract: firm 1 (accounts 1 and 2)
   * -36 + 36 = 0, firm 2 (3 and 4) 18 - 18 = 0. */
  cli_expect(o, "what-if P&L to final settlement per firm, all contracts (USD):\n"
                "  firm                      pnl\n"
                "  1                        0.00\n"
                "  2                        0.00\n"
                "  total                    0.00\n");
  cli_expect(o, "the state, its hashes and the statements are the journal's");
  cli_expect(o, "verdict: OK (what-if replay)\n");
  free(o);
  snprintf(args, sizeof args, "replay --data %s " CAPS " --project 3.2 --index B200.A --raw", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  assert_null(strstr(o, "B200.A.2027-03 (instrument 1)")); /* settled */
  cli_expect(o, "what-if fsp=3200 (0 FINAL fixings kept, 30 filled)");
  cli_expect(o, "  1          B200.A.2027-04            1");
  cli_expect(o, "3200          200000000\n");
  cli_expect(o, "3200         -200000000\n");
  free(o);
  /* For scripts: the same figures as one table alone on stdout, a row per
   * account and contract, then per firm, then the total. */
  snprintf(args, sizeof args,
           "replay --data %s " CAPS " --until 2027-03-30 --project 3.0105 --index B200.A "
           "--format csv", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  /* Then the clearing's mark round at the projection (test_replay_guarantee
   * checks its figures by hand): every account good at mark 3011, IM in the
   * delivery month 2000 bps (4 x ceil(3011 x 0.2) = 2,408.80 USD). */
  assert_string_equal(o, "row,firm,account,instrument,symbol,position,last_dsp_usd,fsp_usd,pnl_usd,"
                         "mark_usd,standing,equity_usd,initial_margin_usd,"
                         "maintenance_margin_usd,call_usd,shortfall_usd,fund_usd,"
                         "fund_used_usd,socialized_usd\n"
                         "account,1,1,1,B200.A.2027-03,4,3.020,3.011,-36.00,,,,,,,,,,\n"
                         "account,1,2,1,B200.A.2027-03,-4,3.020,3.011,36.00,,,,,,,,,,\n"
                         "account,2,3,1,B200.A.2027-03,-2,3.020,3.011,18.00,,,,,,,,,,\n"
                         "account,2,4,1,B200.A.2027-03,2,3.020,3.011,-18.00,,,,,,,,,,\n"
                         "firm,1,,,,,,,0.00,,,,,,,,,,\n"
                         "firm,2,,,,,,,0.00,,,,,,,,,,\n"
                         "total,,,,,,,,0.00,,,,,,,,,,\n"
                         "mark,,,1,B200.A.2027-03,,,3.011,,3.011,,,,,,,,,\n"
                         "standing,1,1,,,,,,,,good,1000044.00,2408.80,1806.60,0.00,0.00,,,\n"
                         "standing,1,2,,,,,,,,good,999706.00,2408.80,1806.60,0.00,0.00,,,\n"
                         "standing,2,3,,,,,,,,good,1000018.00,1204.40,903.30,0.00,0.00,,,\n"
                         "standing,2,4,,,,,,,,good,999982.00,1204.40,903.30,0.00,0.00,,,\n"
                         "guarantee,,,,,,,,,,,,,,,0.00,0.00,0.00,0.00\n");
  free(o);
  snprintf(args, sizeof args,
           "replay --data %s " CAPS " --project 3.2 --index B200.A --raw --format json", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  assert_true(o[0] == '[');
  cli_expect(o, "{\"row\":\"account\",\"firm\":1,\"account\":1,\"instrument\":2,"
                "\"symbol\":\"B200.A.2027-04\",\"position\":1,\"last_dsp\":3000,\"fsp\":3200,"
                "\"pnl\":200000000,\"mark\":null,");
  cli_expect(o, "{\"row\":\"total\",");
  assert_null(strstr(o, "verdict"));
  free(o);
  /* The verdict and the replay's lines are still there, on stderr. */
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "verdict: OK (what-if replay)\n");
  free(o);
  expect_run(2, "goes with --project or --fixings",
             "replay --data %s " CAPS " --format csv", dir);
  expect_run(2, "--format must be text, json or csv",
             "replay --data %s " CAPS " --project 3.2 --index B200.A --format xml", dir);
  expect_run(2, "--project needs --index", "replay --data %s " CAPS " --project 3.2", dir);
  snprintf(args, sizeof args, "replay --data %s " CAPS " --project 3.2x --index B200.A", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 2);
  free(o);
  dir_digest(dir, after);
  assert_string_equal(before, after);
}

/*
 * A contract with no daily settlement price yet, by hand: B200.A.2027-05
 * listed without a price, its group's only fixing (2027-03-29, 2.510 USD)
 * still PROVISIONAL. Acct 1 buys 2 from acct 2 at 2510 at 10:00 on 03-30;
 * the cycle of 03-30 finds no window trade, no quotes, no previous DSP and
 * no FINAL fixing: the contract is skipped and the fill carries to the next
 * cycle (CONTRACT.md 5.6). Projected FSP 2.700: P&L = q x (2700 - 2510)
 * x 1 USD = acct 1 +380.00, acct 2 -380.00 (CONTRACT.md 4.2/4.3).
 */
static void skipped_contract_carries_its_fills(void **state) {
  (void)state;
  char d[64], *o, args[512];
  assert_non_null(util_tmpdir(d, "tools_skip"));
  hg_pipeline_t *p = start(d);
  hg_command_t c = {0};
  c.type = HG_COMMAND_LIST_INSTRUMENT;
  snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "B200.A.2027-05");
  cmdgen_book_params(&c.u.list.params, 1, 1024, 16);
  c.u.list.params.ref_price = 0;
  submit(p, &c);
  for (uint32_t a = 1; a <= 2; a++) {
    memset(&c, 0, sizeof c);
    c.type = HG_COMMAND_ADD_ACCOUNT;
    c.u.add_account.account = a;
    c.u.add_account.firm = a;
    submit(p, &c);
    cash(p, HG_COMMAND_DEPOSIT, a, 1000000000000ll);
  }
  memset(&c, 0, sizeof c);
  c.type = HG_COMMAND_PUBLISH_FIXING;
  snprintf(c.u.fixing.gpu, sizeof c.u.fixing.gpu, "B200");
  snprintf(c.u.fixing.grade, sizeof c.u.fixing.grade, "A");
  c.u.fixing.day = DAY_0330 - 1;
  c.u.fixing.value = 2510000;
  snprintf(c.u.fixing.source, sizeof c.u.fixing.source, "ext");
  submit(p, &c);
  atomic_store(&clock_ns, at(DAY_0330, 10, 0));
  order(p, 1, HG_SIDE_BUY, 2510, 2);
  order(p, 2, HG_SIDE_SELL, 2510, 2);
  atomic_store(&clock_ns, at(DAY_0330, 16, 0));
  daily(p, DAY_0330);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);

  snprintf(args, sizeof args, "replay --data %s " CAPS " --project 2.7 --index B200.A", d);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "dsp seq=");
  cli_expect(o, " day=2027-03-30 instrument=1 skipped (no price: positions and fills carry"
                " to the next cycle)\n");
  assert_null(strstr(o, "price=0"));
  cli_expect(o, "  1          B200.A.2027-05            2");
  cli_expect(o, "2.700             380.00\n");
  cli_expect(o, "2.700            -380.00\n");
  cli_expect(o, "verdict: OK (what-if replay)\n");
  free(o);
  util_rm_rf(d);
}

static void statements_written_and_compared(void **state) {
  (void)state;
  char before[65], after[65];
  dir_digest(dir, before);
  char rec[128], args[1024], path[256], *o;
  snprintf(rec, sizeof rec, "%s.rec", dir);
  snprintf(args, sizeof args, "replay --data %s " CAPS " --out %s", dir, rec);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  /* 4 accounts x (all, instrument 1) x csv/json */
  cli_expect(o, "statements 16 files written to");
  free(o);
  /* The replay's files are the statement command's output byte for byte. */
  snprintf(path, sizeof path, "%s/account-2.csv", rec);
  char *file = cli_slurp(path);
  snprintf(args, sizeof args, "statement --data %s " CAPS " --account 2", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  assert_string_equal(file, o);
  free(o);
  free(file);
  snprintf(path, sizeof path, "%s/account-3-instrument-1.json", rec);
  file = cli_slurp(path);
  snprintf(args, sizeof args,
           "statement --data %s " CAPS " --account 3 --instrument 1 --format json", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  assert_string_equal(file, o);
  free(o);
  free(file);

  expect_run(0, "0 difference(s)", "replay --data %s " CAPS " --expect %s", dir, rec);

  /* Tamper: change an amount, drop one file, add one the replay cannot make. */
  snprintf(args, sizeof args,
           "sed -i 's/WITHDRAWAL,-250000000/WITHDRAWAL,-250000001/' %s/account-2.csv && "
           "rm %s/account-3.json && cp %s/account-1.csv %s/account-99.csv",
           rec, rec, rec, rec);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args, "replay --data %s " CAPS " --expect %s", dir, rec);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  cli_expect(o, "DIFF account-2.csv\n  line 3\n    recorded: 4,10,");
  cli_expect(o, "    replayed: 4,10,");
  cli_expect(o, "WITHDRAWAL,-250000001,");
  cli_expect(o, "MISSING account-99.csv");
  cli_expect(o, "EXTRA account-3.json");
  cli_expect(o, "3 difference(s)");
  free(o);

  snprintf(args, sizeof args, "rm -rf %s", rec);
  assert_int_equal(system(args), 0);
  dir_digest(dir, after);
  assert_string_equal(before, after); /* the data directory was not touched */
}

/* Writes a fixings file for March 2027: every day at value (USD), FINAL,
 * except no_fix_day (1..31, 0 = none), which is NO_FIX. */
static void fixings_file(const char *path, const char *value, int no_fix_day) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("day,value,status\n", f);
  for (int d = 1; d <= 31; d++) {
    if (d == no_fix_day) fprintf(f, "2027-03-%02d,,NO_FIX\n", d);
    else fprintf(f, "2027-03-%02d,%s,FINAL\n", d, value);
  }
  fclose(f);
}

static void whatif_changes_statements_not_data(void **state) {
  (void)state;
  char before[65], after[65], args[1024], want[256], path[256], w[128], fx[128], *o, *file;
  dir_digest(dir, before);
  snprintf(w, sizeof w, "%s.whatif", dir);

  /* FSP 3100 instead of 3010: pos x (3100 - 3004) USD. Account 1 (+4)
   * receives 384 USD; account 4 (+2) 192, and its later deposit's balance
   * moves with it. The exchange state itself is the journal's. */
  snprintf(args, sizeof args, "replay --data %s " CAPS " --fsp 1=3.100 --out %s", dir, w);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "what-if instrument=1 fsp=3.100 (journal: 3.010)");
  cli_expect(o, "EXPIRE instrument=1 fsp=3.010 (journal's; what-if fsp=3.100 in the statements)");
  /* pos x (3100 - 3010) x 1 USD */
  cli_expect(o, "  1                   4      3.010      3.100             360.00\n"
                "  2                  -1      3.010      3.100             -90.00\n"
                "  3                  -5      3.010      3.100            -450.00\n"
                "  4                   2      3.010      3.100             180.00\n");
  snprintf(want, sizeof want, "snapshot seq=87 hash=%s matches", hash_hex);
  cli_expect(o, want);
  free(o);
  snprintf(path, sizeof path, "%s/account-1-instrument-1.csv", w);
  file = cli_slurp(path);
  cli_expect(file, ",1,1,FINAL,384000000,1000400000000,3100,4\n");
  free(file);
  snprintf(path, sizeof path, "%s/account-4.csv", w);
  file = cli_slurp(path);
  cli_expect(file, ",4,1,FINAL,192000000,1000160000000,3100,2\n");
  cli_expect(file, ",4,,DEPOSIT,5000000,1000165000000,0,0\n");
  free(file);
  snprintf(path, sizeof path, "%s/account-3.json", w);
  file = cli_slurp(path);
  cli_expect(file,
             "\"kind\":\"FINAL\",\"amount\":-480000000,\"balance\":999600000000,\"price\":3100");
  free(file);

  /* A fixings file at 3.000 every day: FSP 3000, account 1 pays 4 x 4 USD. */
  snprintf(fx, sizeof fx, "%s.fixings.csv", dir);
  fixings_file(fx, "3.000", 0);
  snprintf(args, sizeof args,
           "replay --data %s " CAPS " --fixings %s --index B200.A --out %s", dir, fx, w);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "snapshot not compared");
  cli_expect(o, "cycle seq=82 EXPIRE instrument=1 fsp=3.000 positions_closed=4");
  cli_expect(o, "orders_cancelled=0 hash=");
  cli_expect(o, " (what-if)\ncycle seq=87"); /* a what-if run labels its hashes */
  /* Cash against the journal: pos x (3000 - 3010) x 1 USD. */
  cli_expect(o, "what-if cash change per account against the journal (USD):\n");
  cli_expect(o, "  1                    1000040.00           1000000.00             -40.00\n");
  cli_expect(o, "  2                     999680.00            999690.00              10.00\n");
  cli_expect(o, "  3                    1000050.00           1000100.00              50.00\n");
  cli_expect(o, "  4                     999985.00            999965.00             -20.00\n");
  cli_expect(o, "  total                                                              0.00\n");
  snprintf(want, sizeof want, "hash=%s", hash_hex);
  assert_null(strstr(o, want)); /* another state */
  free(o);
  snprintf(args, sizeof args,
           "replay --data %s " CAPS " --fixings %s --index B200.A --format csv", dir, fx);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  assert_string_equal(o, "row,firm,account,journal_usd,whatif_usd,change_usd\n"
                         "account,1,1,1000040.00,1000000.00,-40.00\n"
                         "account,1,2,999680.00,999690.00,10.00\n"
                         "account,2,3,1000050.00,1000100.00,50.00\n"
                         "account,2,4,999985.00,999965.00,-20.00\n"
                         "total,,,,,0.00\n");
  free(o);
  snprintf(path, sizeof path, "%s/account-1.csv", w);
  file = cli_slurp(path);
  cli_expect(file, ",1,1,FINAL,-16000000,1000000000000,3000,4\n");
  free(file);

  /* One day NO_FIX: the expiry waits and says which day; nothing is paid. */
  fixings_file(fx, "3.000", 15);
  snprintf(args, sizeof args,
           "replay --data %s " CAPS " --fixings %s --index B200.A --out %s", dir, fx, w);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "expiry waits seq=82 instrument=1 day=2027-03-15 status=MISSING\n");
  assert_null(strstr(o, "EXPIRE instrument=1"));
  free(o);
  snprintf(path, sizeof path, "%s/account-1.csv", w);
  file = cli_slurp(path);
  assert_null(strstr(file, "FINAL"));
  free(file);

  /* The live directory is byte for byte what it was, and replays as before. */
  dir_digest(dir, after);
  assert_string_equal(before, after);
  snprintf(args, sizeof args, "replay --data %s " CAPS, dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  snprintf(want, sizeof want, "end seq=87 commands=87 fills=4 rejects=0 cycles=5 hash=%s\n",
           hash_hex);
  cli_expect(o, want);
  free(o);
  snprintf(args, sizeof args, "rm -rf %s %s", w, fx);
  assert_int_equal(system(args), 0);
}

static void errors_are_clear(void **state) {
  (void)state;
  char args[512], *o;
  expect_run(1, "account 9 does not exist", "statement --data %s " CAPS " --account 9", dir);
  assert_int_equal(cli_run(hgctl, "statement --data /nonexistent/x --account 1", CLI_BOTH, &o), 1);
  cli_expect(o, "does not exist or is not a directory");
  free(o);
  expect_run(2, "inside the data directory", "replay --data %s --out %s/journal", dir, dir);
  expect_run(1, "instrument 2 was never finally settled",
             "replay --data %s " CAPS " --fsp 2=3.100", dir);
  expect_run(2, "--fixings and --index go together",
             "replay --data %s " CAPS " --fixings x.csv", dir);
  expect_run(1, "cannot read fixings file",
             "replay --data %s " CAPS " --fixings /nonexistent.csv --index B200.A", dir);
  snprintf(args, sizeof args, "replay --data %s --fsp 1=x", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 2);
  free(o);
  /* Ticks typed without --raw: 3100 USD per GPU-hour is refused. */
  expect_run(2, "at most 1000 with at most 3 decimals (e.g. 1=3.100; ticks with --raw)",
             "replay --data %s " CAPS " --fsp 1=3100", dir);
  /* --raw: the change table in ticks and micro-USD too, pos x (3100 - 3010) x TV. */
  snprintf(args, sizeof args, "replay --raw --data %s " CAPS " --fsp 1=3100", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "what-if instrument=1 fsp=3100 (journal: 3010)\n"
                "what-if final settlement change per account (micro-USD; prices in ticks):\n");
  cli_expect(o, "  1                   4       3010       3100          360000000\n"
                "  2                  -1       3010       3100          -90000000\n"
                "  3                  -5       3010       3100         -450000000\n"
                "  4                   2       3010       3100          180000000\n");
  free(o);
  assert_int_equal(cli_run(hgctl, "statement --account 1", CLI_BOTH, &o), 2);
  cli_expect(o, "missing --data");
  free(o);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_replay_cli HGCTL\n");
    return 2;
  }
  hgctl = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(replay_hashes_and_snapshot),
      cmocka_unit_test(snapshot_mismatch_detected),
      cmocka_unit_test(bad_snapshot_named),
      cmocka_unit_test(statement_and_fills),
      cmocka_unit_test(replay_one_day),
      cmocka_unit_test(whatif_projection_by_hand),
      cmocka_unit_test(skipped_contract_carries_its_fills),
      cmocka_unit_test(statements_written_and_compared),
      cmocka_unit_test(whatif_changes_statements_not_data),
      cmocka_unit_test(errors_are_clear),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
