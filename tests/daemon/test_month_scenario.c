/*
 * test_month_scenario - `hourglassd --scenario month` end to end, as a user
 * runs it: the binary, its stdout and its exit status. The group setup runs
 * the scenario twice on two fresh data directories; the tests then check the
 * printed summary against settlement/CONTRACT.md by hand-written rules
 * (cash sums to zero, each account's final settlement is
 * pos x (FSP - last DSP) x TV, the FSP is the rounded mean of the printed
 * FINAL fixings), the statements
 * written to the data directory against the summary, the two runs for
 * byte-identical output, the journal's replay for the printed state hash,
 * and the refusals of a bad scenario name and of a used data directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon_util.h"

static const char *g_bin; /* hourglassd, from argv[1] */

#define SYMBOL "B200.A.2027-03"
#define NROWS 5

typedef struct row {
  unsigned account;
  char name[32];
  long long pos;
  int64_t vm, fin, fees, net; /* micro-USD */
} row_t;

static du_scenario_runs_t g_runs;
#define g_dir g_runs.dir
#define g_out g_runs.out
#define g_rc g_runs.rc

/* "-12.345678" -> micro-USD; fails the test on anything else. */
static int64_t micro(const char *s) {
  int neg = *s == '-';
  if (neg) s++;
  const char *dot = strchr(s, '.');
  assert_non_null(dot);
  assert_int_equal(strlen(dot + 1), 6);
  int64_t v = strtoll(s, NULL, 10) * 1000000 + strtoll(dot + 1, NULL, 10);
  return neg ? -v : v;
}

/* The summary table's rows, in print order. */
static void parse_rows(const char *out, row_t rows[NROWS]) {
  const char *p = strstr(out, "\naccount name");
  assert_non_null(p);
  p = strchr(p + 1, '\n') + 1;
  for (int i = 0; i < NROWS; i++) {
    char vm[32], fin[32], fees[32], net[32];
    assert_int_equal(sscanf(p, "%u %31s %lld %31s %31s %31s %31s", &rows[i].account, rows[i].name,
                            &rows[i].pos, vm, fin, fees, net),
                     7);
    rows[i].vm = micro(vm);
    rows[i].fin = micro(fin);
    rows[i].fees = micro(fees);
    rows[i].net = micro(net);
    p = strchr(p, '\n') + 1;
  }
  assert_int_equal(strncmp(p, "total", 5), 0);
}

static long long field_ll(const char *out, const char *key) {
  const char *p = strstr(out, key);
  assert_non_null(p);
  return strtoll(p + strlen(key), NULL, 10);
}

static int run_scenario(const char *dir, const char *out_file) {
  return du_scenario_run(g_bin, "month", dir, out_file);
}

static int setup(void **state) {
  (void)state;
  return du_scenario_runs(&g_runs, g_bin, "month");
}

static int teardown(void **state) {
  (void)state;
  du_scenario_runs_free(&g_runs);
  return 0;
}

static void exits_zero_and_cash_sums_to_zero(void **state) {
  (void)state;
  assert_int_equal(g_rc[0], 0);
  const char *out = g_out[0];
  row_t r[NROWS];
  parse_rows(out, r);
  int64_t total = 0;
  long long pos = 0, open = 0;
  for (int i = 0; i < NROWS; i++) {
    assert_int_equal(r[i].vm + r[i].fin + r[i].fees, r[i].net);
    total += r[i].net;
    pos += r[i].pos;
    open += r[i].pos < 0 ? -r[i].pos : r[i].pos;
  }
  assert_int_equal(total, 0);
  assert_int_equal(pos, 0);  /* longs and shorts match */
  assert_true(open > 0);     /* something was actually settled */
  assert_non_null(strstr(out, "\nsum of all cash flows: 0.000000 (zero: ok)\n"));
  /* Demo names only; the makers ended short of the hedgers (they sold them). */
  assert_string_equal(r[0].name, "maker-1");
  assert_int_equal(r[0].account, 1001);
  assert_string_equal(r[2].name, "hedger-1");
  assert_true(r[2].pos + r[3].pos > 0);
  /* The life of the contract, in the order settlement/CONTRACT.md section 1
   * gives it. */
  const char *a = strstr(out, "listed " SYMBOL);
  const char *b = strstr(out, "2027-03-31 16:00 last trading day");
  const char *c = strstr(out, "2027-03-31 16:30 an order after the last trading day is refused");
  const char *d = strstr(out, "2027-04-01 01:00 expiry waits for FINAL fixings of 2027-03-30 2027-03-31\n");
  const char *e = strstr(out, "2027-04-03 01:00 expiry: every fixing of the month is FINAL");
  assert_true(a && b && c && d && e && a < b && b < c && c < d && d < e);
  /* One cycle per calendar day from listing (2027-02-01) to 2027-03-31. */
  assert_int_equal(field_ll(out, "daily cycles: "), 28 + 31);
  assert_true(field_ll(out, "DSP tiers: vwap ") > 0);
}

/* settlement/CONTRACT.md section 4.3: FSP = mean of the FINAL daily fixings
 * of every calendar day of the month, rounded half up to a tick; final settlement
 * pays pos x (FSP - last DSP) x TV with TV = 1,000,000 micro-USD. */
static void fsp_and_final_settlement_follow_the_fixings(void **state) {
  (void)state;
  const char *out = g_out[0];
  int64_t sum = 0;
  int n = 0, prev = 0;
  for (const char *p = out; (p = strstr(p, "\n  fixing 2027-03-")) != NULL; p++) {
    int day = atoi(p + strlen("\n  fixing 2027-03-"));
    char v[32], status[16];
    assert_int_equal(sscanf(p + strlen("\n  fixing 2027-03-00 "), "%31s %15s", v, status), 2);
    assert_string_equal(status, "FINAL");
    assert_int_equal(day, prev + 1);
    prev = day;
    sum += micro(v);
    n++;
  }
  assert_int_equal(n, 31);
  int64_t fsp = (2 * sum + (int64_t)n * 1000) / (2 * (int64_t)n * 1000);
  assert_int_equal(field_ll(out, "\nFSP "), fsp);
  long long last_dsp = field_ll(out, "\nlast DSP ");
  assert_true(last_dsp > 0);
  row_t r[NROWS];
  parse_rows(out, r);
  for (int i = 0; i < NROWS; i++) assert_int_equal(r[i].fin, r[i].pos * (fsp - last_dsp) * 1000000);
}

static int64_t csv_total(const char *csv, long long *final_qty) {
  const char *p = strchr(csv, '\n');
  assert_non_null(p);
  assert_int_equal(strncmp(csv, "index,seq,ts,account,instrument,kind,amount,balance,price,qty", 61), 0);
  int64_t t = 0;
  *final_qty = 0;
  for (p++; *p; p = strchr(p, '\n') + 1) {
    char kind[16];
    long long amount, qty;
    assert_int_equal(sscanf(p, "%*[^,],%*[^,],%*[^,],%*[^,],%*[^,],%15[^,],%lld,%*[^,],%*[^,],%lld",
                            kind, &amount, &qty),
                     3);
    t += amount;
    if (strcmp(kind, "FINAL") == 0) *final_qty = qty;
  }
  return t;
}

static void statements_match_the_summary(void **state) {
  (void)state;
  row_t r[NROWS];
  parse_rows(g_out[0], r);
  for (int i = 0; i < NROWS; i++) {
    char path[1200];
    snprintf(path, sizeof path, "%s/statements/%u-" SYMBOL ".json", g_dir[0], r[i].account);
    char *json = du_read(path);
    assert_non_null(json);
    assert_int_equal(field_ll(json, "\"total\":"), r[i].net);
    free(json);
    snprintf(path, sizeof path, "%s/statements/%u-" SYMBOL ".csv", g_dir[0], r[i].account);
    char *csv = du_read(path);
    assert_non_null(csv);
    long long fq;
    assert_int_equal(csv_total(csv, &fq), r[i].net);
    assert_int_equal(fq, r[i].pos); /* the FINAL line closes the printed position */
    free(csv);
  }
}

static void second_run_is_byte_identical(void **state) {
  (void)state;
  assert_int_equal(g_rc[1], 0);
  assert_string_equal(g_out[0], g_out[1]);
}

static void journal_replay_gives_the_printed_state_hash(void **state) {
  (void)state;
  assert_true(du_scenario_hash_replays(g_bin, g_dir[0], g_out[0]));
}

static void refuses_bad_name_and_used_directory(void **state) {
  (void)state;
  char cmd[3000], out[1100];
  snprintf(out, sizeof out, "%s.again", g_dir[1]);
  snprintf(cmd, sizeof cmd, "%s --scenario year > %s 2>&1", g_bin, out);
  assert_int_equal(du_system(cmd), 2);
  char *msg = du_read(out);
  assert_non_null(msg);
  assert_non_null(strstr(msg, "unknown scenario 'year' (known: month, squeeze)"));
  free(msg);
  /* The second run's directory holds an exchange: refused, left as it was. */
  assert_int_equal(run_scenario(g_dir[1], out), 3);
  snprintf(cmd, sizeof cmd, "%s.err", out);
  msg = du_read(cmd);
  assert_non_null(msg);
  assert_non_null(strstr(msg, "already holds an exchange"));
  free(msg);
  remove(cmd);
  remove(out);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_month_scenario HOURGLASSD\n");
    return 2;
  }
  g_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(exits_zero_and_cash_sums_to_zero),
      cmocka_unit_test(fsp_and_final_settlement_follow_the_fixings),
      cmocka_unit_test(statements_match_the_summary),
      cmocka_unit_test(second_run_is_byte_identical),
      cmocka_unit_test(journal_replay_gives_the_printed_state_hash),
      cmocka_unit_test(refuses_bad_name_and_used_directory),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
