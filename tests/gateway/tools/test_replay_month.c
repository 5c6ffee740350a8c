/*
 * `hgctl replay` on the data directory of `hourglassd --scenario month`
 * (daemon/scenario.h): a month of trading, 31 daily cycles and an expiry.
 * Arguments: the hgctl and hourglassd binaries.
 *
 * - `--expect DIR/statements` matches the scenario's own statement files
 *   (<account>-<SYMBOL>.csv/.json) with no difference, and finds one changed
 *   line;
 * - every tier-1 daily settlement price the replay prints is recomputed
 *   from the `--fills` export alone: the VWAP of the fills stamped in
 *   [15:55, 16:00) UTC of that day, rounded half up to a tick
 *   (settlement/CONTRACT.md section 4.2 and 5.6);
 * - `index fixings` exports the fixings in the format `hedge ratio` reads.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_run.h"
#include "pipeline_util.h"

static const char *hgctl, *hourglassd;
static char dir[64];
static char *scenario_out; /* what the scenario printed */

static int setup(void **state) {
  (void)state;
  assert_non_null(util_tmpdir(dir, "month"));
  char *o;
  char args[256];
  snprintf(args, sizeof args, "--scenario month --scenario-dir %s", dir);
  assert_int_equal(cli_run(hourglassd, args, CLI_BOTH, &o), 0);
  scenario_out = o;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  util_rm_rf(dir);
  free(scenario_out);
  return 0;
}

static void expect_matches_scenario_statements(void **state) {
  (void)state;
  char args[1024], copy[80], *o;
  snprintf(args, sizeof args, "replay --quiet --data %s --expect %s/statements", dir, dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  cli_expect(o, "statements compared with ");
  cli_expect(o, ": 0 difference(s)\nverdict: OK\n");
  free(o);
  /* One amount changed in a copy: one DIFF, the verdict says why. */
  snprintf(copy, sizeof copy, "%s.stmts", dir);
  snprintf(args, sizeof args,
           "rm -rf %s && cp -r %s/statements %s && "
           "sed -i '2s/,VM,47000000,/,VM,47000001,/' %s/1001-B200.A.2027-03.csv",
           copy, dir, copy, copy);
  assert_int_equal(system(args), 0);
  snprintf(args, sizeof args, "replay --quiet --data %s --expect %s", dir, copy);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  cli_expect(o, "DIFF 1001-B200.A.2027-03.csv\n  line 2\n");
  cli_expect(o, ": 1 difference(s)\nverdict: FAILED (1 statement difference(s))\n");
  free(o);
  snprintf(args, sizeof args, "rm -rf %s", copy);
  assert_int_equal(system(args), 0);
}

/* "3.398" -> 3398 ticks. */
static int64_t ticks(const char *usd) {
  int64_t whole = 0, frac = 0;
  assert_int_equal(sscanf(usd, "%" SCNd64 ".%3" SCNd64, &whole, &frac), 2);
  return whole * 1000 + frac;
}

static void dsp_recomputed_from_fills(void **state) {
  (void)state;
  char args[512], fills[128], *o;
  snprintf(fills, sizeof fills, "%s.fills.csv", dir);
  snprintf(args, sizeof args, "replay --data %s --fills %s", dir, fills);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  FILE *f = fopen(fills, "r");
  assert_non_null(f);
  char line[512];
  assert_non_null(fgets(line, sizeof line, f));
  assert_string_equal(line, "seq,trade_id,time_utc,instrument,symbol,price_usd,qty,aggressor,"
                            "buyer,seller,buyer_position,seller_position,liquidated\n");
  /* Per day of February and March ([month - 2][day]), the window's sum of
   * qty and of qty x price. */
  int64_t q[2][32] = {{0}}, qp[2][32] = {{0}};
  unsigned rows = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    char time[40], sym[32], px[16], side[8];
    unsigned long long seq;
    unsigned inst;
    long long qty;
    char id[32];
    assert_int_equal(sscanf(line, "%llu,%31[^,],%39[^,],%u,%31[^,],%15[^,],%lld,%7[^,],", &seq, id,
                            time, &inst, sym, px, &qty, side),
                     8);
    assert_true(strcmp(side, "buy") == 0 || strcmp(side, "sell") == 0);
    rows++;
    int mon, day, hh, mm;
    assert_int_equal(sscanf(time, "2027-%d-%dT%d:%d:", &mon, &day, &hh, &mm), 4);
    assert_true((mon == 2 || mon == 3) && day >= 1 && day <= 31);
    if (hh == 15 && mm >= 55) {
      q[mon - 2][day] += qty;
      qp[mon - 2][day] += qty * ticks(px);
    }
  }
  fclose(f);
  remove(fills);
  assert_true(rows > 100);
  unsigned checked = 0;
  for (const char *p = o; (p = strstr(p, "dsp seq=")) != NULL; p++) {
    int mon, day;
    unsigned inst, tier;
    long long price;
    unsigned long long seq;
    char usd[16];
    assert_int_equal(sscanf(p, "dsp seq=%llu day=2027-%d-%d instrument=%u price=%15s tier=%u", &seq,
                            &mon, &day, &inst, usd, &tier),
                     6);
    price = ticks(usd);
    assert_true((mon == 2 || mon == 3) && day >= 1 && day <= 31);
    if (tier != 1) continue;
    int64_t Q = q[mon - 2][day], P = qp[mon - 2][day];
    assert_true(Q > 0);
    /* VWAP rounded half up in one step: floor((2 x sum qp + Q) / (2 Q)). */
    int64_t dsp = (2 * P + Q) / (2 * Q);
    if (dsp != price)
      fail_msg("2027-%02d-%02d: fills give %lld, replay %lld", mon, day, (long long)dsp, price);
    checked++;
  }
  assert_true(checked >= 30); /* 36 tier-1 days in the scenario */
  free(o);
}

/*
 * `index fixings` writes what `hedge ratio` reads: the scenario's fixings
 * (as it printed them) come back; a rent of exactly twice the index moves
 * twice as much, so the hedge ratio is 2 and the correlation 1.
 */
static void fixings_export_round_trip(void **state) {
  (void)state;
  char args[512], fx[128], rent[128], *o, *r;
  snprintf(fx, sizeof fx, "%s.fixings.csv", dir);
  snprintf(rent, sizeof rent, "%s.rent.csv", dir);
  snprintf(args, sizeof args, "index fixings --data %s --index B200.A --from 2027-03-01 > %s", dir,
           fx);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 0);
  free(o);
  char *f = NULL;
  {
    FILE *in = fopen(fx, "r");
    assert_non_null(in);
    f = calloc(1, 1 << 16);
    assert_non_null(f);
    assert_true(fread(f, 1, (1 << 16) - 1, in) > 0);
    fclose(in);
  }
  static const char head[] = "day,value,status\n2027-03-01,";
  assert_true(strncmp(f, head, sizeof head - 1) == 0);
  /* Each "  fixing 2027-03-DD V FINAL tier T" line of the scenario is a row. */
  unsigned seen = 0;
  for (const char *p = scenario_out; (p = strstr(p, "  fixing 2027-03-")) != NULL; p++) {
    char day[11], val[16], st[16], row[64];
    assert_int_equal(sscanf(p, "  fixing %10s %15s %15s", day, val, st), 3);
    snprintf(row, sizeof row, "\n%s,%s,%s\n", day, val, st);
    cli_expect(f, row);
    seen++;
  }
  assert_int_equal(seen, 31);
  /* rent = 2 x index, every day of the export */
  FILE *rf = fopen(rent, "w");
  assert_non_null(rf);
  fputs("day,price\n", rf);
  for (const char *p = strchr(f, '\n') + 1; *p; p = strchr(p, '\n') + 1) {
    char day[11];
    long long w, frac;
    assert_int_equal(sscanf(p, "%10[^,],%lld.%lld,", day, &w, &frac), 3);
    long long micro = 2 * (w * 1000000 + frac);
    fprintf(rf, "%s,%lld.%06lld\n", day, micro / 1000000, micro % 1000000);
  }
  fclose(rf);
  snprintf(args, sizeof args, "hedge ratio --rent %s --index %s", rent, fx);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &r), 0);
  cli_expect(r, "index_read 33 days 2027-03-01..2027-04-02 usd_per_gpu_hour 3.3");
  cli_expect(r, "index_provisional 2 (used as published)\nindex_no_fix 0 (skipped)\ngaps 0 ");
  cli_expect(r, "days_aligned 33\n");
  cli_expect(r, "correlation 1.000000\nhedge_ratio 2.000000\nhedge_effectiveness 1.000000\n");
  free(r);
  /* The same file as a what-if of replay: the journal's own fixings, so the
   * expiry pays the journal's FSP and no account's cash changes. */
  snprintf(args, sizeof args, "replay --data %s --fixings %s --index B200.A", dir, fx);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &r), 0);
  cli_expect(r, "EXPIRE instrument=1 fsp=3.407 ");
  cli_expect(r, "  total                                                              0.00\n");
  /* Every row of the table (after its two header lines, up to the total)
   * ends in a change of 0.00. */
  const char *p = strstr(r, "what-if cash change");
  assert_non_null(p);
  p = strchr(strchr(p, '\n') + 1, '\n') + 1;
  unsigned rows = 0;
  for (; strncmp(p, "  total", 7) != 0; p = strchr(p, '\n') + 1, rows++) {
    size_t l = strcspn(p, "\n");
    assert_true(l > 5 && strncmp(p + l - 5, " 0.00", 5) == 0);
  }
  assert_int_equal(rows, 5);
  free(r);
  free(f);
  remove(fx);
  remove(rent);
  snprintf(args, sizeof args, "index fixings --data %s --index B200.B", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  cli_expect(o, "has no fixing of B200.B\n");
  assert_null(strstr(o, "day,value,status"));
  free(o);
  snprintf(args, sizeof args, "index fixings --data %s --index B200", dir);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 2);
  cli_expect(o, "--index must be GPU.GRADE");
  free(o);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_replay_month HGCTL HOURGLASSD\n");
    return 2;
  }
  hgctl = argv[1];
  hourglassd = argv[2];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(expect_matches_scenario_statements),
      cmocka_unit_test(dsp_recomputed_from_fills),
      cmocka_unit_test(fixings_export_round_trip),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
