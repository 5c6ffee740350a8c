/*
 * `hgctl statement` and `hgctl replay` end to end on a small data directory
 * written by the real pipeline (journal + snapshot). Argument: the hgctl
 * binary.
 *
 * The scenario, by hand (seq: command):
 *   1 list instrument 1;  2-5 add accounts 1..4 (firms 1,1,2,2);
 *   6-9 deposit 1,000,000 USD into each;  10 account 2 withdraws 250 USD;
 *   11 account 1 buys 10 @ 3000 (rests);  12 account 2 sells 4 @ 3000: fill 4;
 *   13 end of session;  14 account 3 sells 6 @ 2999: fill 6 @ 3000 against
 *   account 1's remaining 6;  15 account 4 deposits 5 USD;  16 end of session.
 * So 2 fills, 2 cycles; positions 1:+10, 2:-4, 3:-6. Ledger (global index):
 *   0-3 deposits of accounts 1..4, 4 account 2's withdrawal, 5 account 4's
 *   deposit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "hourglass/error.h"
#include "hourglass/pipeline.h"
#include "hourglass/sha256.h"

#include "../engine/pipeline_util.h"

static const char *hgctl;
static char dir[64];
static char hash_hex[65];

static uint64_t fake_clock(void *ctx) {
  uint64_t *t = ctx;
  return *t += 1000;
}

static void submit(hg_pipeline_t *p, hg_command_t *c) {
  int rc;
  while ((rc = hg_pipeline_submit(p, 0, c)) == HG_EBUSY) {
    hg_pipe_out_t out[64];
    hg_pipeline_poll(p, out, 64);
  }
  assert_int_equal(rc, 0);
}

static void order(hg_pipeline_t *p, uint32_t acct, int side, int64_t price, int64_t qty) {
  hg_command_t c = {0};
  c.type = HG_COMMAND_NEW_ORDER;
  c.u.new_order.instrument_id = 1;
  c.u.new_order.account = acct;
  c.u.new_order.client_order_id = 1;
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

static void hex(const uint8_t *h, char *out) {
  for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", h[i]);
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

/* Writes the scenario into directory d, account 4's last deposit being
 * last_deposit micro-USD, and the final state hash (hex) into hx. */
static void build(const char *d, int64_t last_deposit, char *hx) {
  util_log_t log = {0};
  hg_pipeline_config_t cfg;
  util_config(&cfg, d, &log);
  static uint64_t clock_ns = 1806537600000000000ull; /* 2027-03-31 00:00 UTC */
  cfg.clock = fake_clock;
  cfg.clock_ctx = &clock_ns;
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);

  hg_command_t c = {0};
  c.type = HG_COMMAND_LIST_INSTRUMENT;
  snprintf(c.u.list.symbol, sizeof c.u.list.symbol, "B200.A.2027-03");
  hg_book_params_t *bp = &c.u.list.params;
  bp->instrument_id = 1;
  bp->tick_size = 1000;
  bp->contract_unit = 1000;
  bp->min_price = 1;
  bp->max_price = 100000;
  bp->max_order_qty = 1000;
  bp->ref_price = 3000;
  bp->band_bps = 2000;
  bp->max_orders = 1024;
  bp->max_accounts = 16;
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
  session_end(p, 20270301);
  order(p, 3, HG_SIDE_SELL, 2999, 6);
  cash(p, HG_COMMAND_DEPOSIT, 4, last_deposit);
  session_end(p, 20270302);
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

/* Runs hgctl with args; returns its exit status and its stdout (with stderr
 * when both) in a malloc'd string. */
static int run(const char *args, bool both, char **out) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s %s %s", hgctl, args, both ? "2>&1" : "2>/dev/null");
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
    n += r;
    if (n + 1 == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      assert_non_null(buf);
    }
  }
  buf[n] = '\0';
  int st = pclose(p);
  *out = buf;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect(const char *hay, const char *needle) {
  if (strstr(hay, needle) == NULL) fail_msg("missing '%s' in:\n%s", needle, hay);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) fail_msg("cannot open %s", path);
  char *b = calloc(1, 1 << 20);
  assert_non_null(b);
  size_t n = fread(b, 1, (1 << 20) - 1, f);
  b[n] = '\0';
  fclose(f);
  return b;
}

static void replay_hashes_and_snapshot(void **state) {
  (void)state;
  char *o, args[512], want[256];
  snprintf(args, sizeof args, "replay --data %s --max-instruments 4 --max-accounts 64 "
                              "--max-book-orders 65536", dir);
  assert_int_equal(run(args, true, &o), 0);
  expect(o, "cycle seq=13 SESSION_END expired_day_orders=0 hash=");
  expect(o, "cycle seq=16 SESSION_END");
  snprintf(want, sizeof want, "snapshot seq=16 hash=%s matches", hash_hex);
  expect(o, want);
  snprintf(want, sizeof want, "end seq=16 commands=16 fills=2 cycles=2 hash=%s\n", hash_hex);
  expect(o, want);
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
  snprintf(args, sizeof args, "replay --data %s --max-accounts 64", other);
  assert_int_equal(run(args, true, &o), 1);
  char want[160];
  snprintf(want, sizeof want, "snapshot seq=16 hash=%s MISMATCH", other_hash);
  expect(o, want);
  snprintf(want, sizeof want, "end seq=16 commands=16 fills=2 cycles=2 hash=%s", hash_hex);
  expect(o, want);
  free(o);
  util_rm_rf(other);
}

static void statement_and_fills(void **state) {
  (void)state;
  char *o, args[512];
  snprintf(args, sizeof args, "statement --data %s --max-accounts 64 --account 2", dir);
  assert_int_equal(run(args, false, &o), 0);
  expect(o, "index,seq,ts,account,instrument,kind,amount,balance,price,qty\n");
  expect(o, "1,7,");
  expect(o, ",2,,DEPOSIT,1000000000000,1000000000000,0,0\n4,10,");
  expect(o, ",2,,WITHDRAWAL,-250000000,999750000000,0,0\n");
  assert_null(strstr(o, ",1,,DEPOSIT")); /* only account 2 */
  free(o);
  snprintf(args, sizeof args, "statement --data %s --max-accounts 64 --account 4 --format json",
           dir);
  assert_int_equal(run(args, false, &o), 0);
  expect(o, "{\"account\":4,\"instrument\":null,\"entries\":[{\"index\":3,\"seq\":9,");
  expect(o, "\"kind\":\"DEPOSIT\",\"amount\":5000000,\"balance\":1000005000000");
  expect(o, "],\"total\":1000005000000}\n");
  free(o);

  char fills[128];
  snprintf(fills, sizeof fills, "%s.fills.csv", dir);
  snprintf(args, sizeof args, "replay --quiet --data %s --max-accounts 64 --fills %s", dir, fills);
  assert_int_equal(run(args, true, &o), 0);
  free(o);
  o = slurp(fills);
  assert_string_equal(o, "seq,instrument,price,qty,buyer,seller,buyer_position,seller_position\n"
                         "12,1,3000,4,1,2,4,-4\n"
                         "14,1,3000,6,1,3,10,-6\n");
  free(o);
  remove(fills);
}

static void statements_written_and_compared(void **state) {
  (void)state;
  char before[65], after[65];
  dir_digest(dir, before);
  char rec[128], args[1024], path[256], *o;
  snprintf(rec, sizeof rec, "%s.rec", dir);
  snprintf(args, sizeof args, "replay --data %s --max-accounts 64 --out %s", dir, rec);
  assert_int_equal(run(args, true, &o), 0);
  expect(o, "statements 8 files written to"); /* 4 accounts x csv/json, no instrument entries */
  free(o);
  /* The replay's files are the statement command's output byte for byte. */
  snprintf(path, sizeof path, "%s/account-2.csv", rec);
  char *file = slurp(path);
  snprintf(args, sizeof args, "statement --data %s --max-accounts 64 --account 2", dir);
  assert_int_equal(run(args, false, &o), 0);
  assert_string_equal(file, o);
  free(o);
  free(file);

  snprintf(args, sizeof args, "replay --data %s --max-accounts 64 --expect %s", dir, rec);
  assert_int_equal(run(args, true, &o), 0);
  expect(o, "0 difference(s)");
  free(o);

  /* Tamper: change an amount, drop one file, add one the replay cannot make. */
  snprintf(args, sizeof args,
           "sed -i 's/WITHDRAWAL,-250000000/WITHDRAWAL,-250000001/' %s/account-2.csv && "
           "rm %s/account-3.json && cp %s/account-1.csv %s/account-99.csv",
           rec, rec, rec, rec);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args, "replay --data %s --max-accounts 64 --expect %s", dir, rec);
  assert_int_equal(run(args, true, &o), 1);
  expect(o, "DIFF account-2.csv\n  line 3\n    recorded: 4,10,");
  expect(o, "WITHDRAWAL,-250000001,");
  expect(o, "MISSING account-99.csv");
  expect(o, "EXTRA account-3.json");
  expect(o, "3 difference(s)");
  free(o);

  snprintf(args, sizeof args, "rm -rf %s", rec);
  assert_int_equal(system(args), 0);
  dir_digest(dir, after);
  assert_string_equal(before, after); /* the data directory was not touched */
}

static void errors_are_clear(void **state) {
  (void)state;
  char args[512], *o;
  snprintf(args, sizeof args, "statement --data %s --max-accounts 64 --account 9", dir);
  assert_int_equal(run(args, true, &o), 1);
  expect(o, "account 9 does not exist");
  free(o);
  assert_int_equal(run("statement --data /nonexistent/x --account 1", true, &o), 1);
  expect(o, "does not exist or is not a directory");
  free(o);
  snprintf(args, sizeof args, "replay --data %s --out %s/journal", dir, dir);
  assert_int_equal(run(args, true, &o), 2);
  expect(o, "inside the data directory");
  free(o);
  snprintf(args, sizeof args, "replay --data %s --max-accounts 64 --fsp 1=3100", dir);
  assert_int_equal(run(args, true, &o), 1);
  expect(o, "instrument 1 was never finally settled");
  free(o);
  snprintf(args, sizeof args, "replay --data %s --fsp 1=x", dir);
  assert_int_equal(run(args, true, &o), 2);
  free(o);
  assert_int_equal(run("statement --account 1", true, &o), 2);
  expect(o, "missing --data");
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
      cmocka_unit_test(statement_and_fills),
      cmocka_unit_test(statements_written_and_compared),
      cmocka_unit_test(errors_are_clear),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
