/*
 * `hgctl hedge size`, `hgctl hedge ratio` and `hgctl convert` end to end.
 * Argument: the hgctl binary. The numbers are those of the hand-computed
 * cases in tests/settlement/test_hedge.c, seen through the command line.
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
#include <unistd.h>

#include <cmocka.h>

#include "cli_run.h"

static const char *hgctl;
static char tmp[64];

static void put(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", tmp, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void hedge_size(void **state) {
  (void)state;
  char *o;
  assert_int_equal(
      cli_run(hgctl, "hedge size --gpus 11 --hours-per-month 700 --months 2027-03,2027-04",
              CLI_STDOUT, &o),
      0);
  cli_expect(o,
             "month,gpus,hours_per_gpu,exposure_gpu_hours,contracts,hedged_gpu_hours,"
             "residual_gpu_hours\n");
  cli_expect(o, "2027-03,11,700,7700,8,8000,-300\n2027-04,11,700,7700,8,8000,-300\n");
  cli_expect(o, "total,,,15400,16,16000,-600\n");
  free(o);
  assert_int_equal(
      cli_run(hgctl, "hedge size --gpus 8 --hours-per-month full --months 2028-02 --round up",
              CLI_STDOUT, &o),
      0);
  cli_expect(o, "2028-02,8,696,5568,6,6000,-432\n");
  free(o);
  assert_int_equal(
      cli_run(hgctl, "hedge size --gpus 10 --hours-per-month 730 --months 2027-04 --round down",
              CLI_BOTH, &o),
      2);
  cli_expect(o, "730 hours per GPU is more than 2027-04 has"); /* 30 days = 720 h */
  free(o);
  assert_int_equal(
      cli_run(hgctl, "hedge size --gpus 10 --hours-per-month 730 --months 2027-03 --round down",
              CLI_STDOUT, &o),
      0);
  cli_expect(o, "2027-03,10,730,7300,7,7000,300\n");
  free(o);
  /* Errors: a month that cannot hold the hours, a bad month, a bad count. */
  assert_int_equal(
      cli_run(hgctl, "hedge size --gpus 1 --hours-per-month 700 --months 2027-02", CLI_BOTH, &o),
      2);
  cli_expect(o, "700 hours per GPU is more than 2027-02 has");
  free(o);
  assert_int_equal(
      cli_run(hgctl, "hedge size --gpus 1 --hours-per-month 10 --months 2027-3", CLI_BOTH, &o), 2);
  cli_expect(o, "month '2027-3' is not YYYY-MM");
  free(o);
  assert_int_equal(
      cli_run(hgctl, "hedge size --gpus -4 --hours-per-month 10 --months 2027-03", CLI_BOTH, &o),
      2);
  cli_expect(o, "--gpus '-4' must be a whole number >= 1");
  free(o);
  assert_int_equal(cli_run(hgctl, "hedge size --gpus 4 --months 2027-03", CLI_BOTH, &o), 2);
  cli_expect(o, "missing --hours-per-month");
  free(o);
  assert_int_equal(cli_run(hgctl,
                           "hedge size --gpus 1 --hours-per-month 10 --months 2027-03,2027-04,2027-03",
                           CLI_BOTH, &o),
                   2);
  cli_expect(o, "month 2027-03 is given twice");
  free(o);
  /* A range of months, across a year end, with a single month after it:
   * 2027-11 (720 h), 2027-12 (744), 2028-01 (744), 2028-02 (696, leap). */
  assert_int_equal(cli_run(hgctl,
                           "hedge size --gpus 10 --hours-per-month full "
                           "--months 2027-11..2028-02,2028-04",
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "2027-11,10,720,7200,7,7000,200\n2027-12,10,744,7440,7,7000,440\n"
                "2028-01,10,744,7440,7,7000,440\n2028-02,10,696,6960,7,7000,-40\n"
                "2028-04,10,720,7200,7,7000,200\n"
                "total,,,36240,35,35000,1240\n");
  free(o);
  static const struct {
    const char *months, *why;
  } bad[] = {
      {"2027-06..2027-03", "range '2027-06..2027-03' must run forwards over 1 to 120 months"},
      {"2027-01..2037-02", "must run forwards over 1 to 120 months"},
      {"2027-03..", "month '2027-03..' is not YYYY-MM or a range YYYY-MM..YYYY-MM"},
      {"2027-03.2027-04", "is not YYYY-MM or a range"},
      {"2027-03..2027-05,2027-04", "month 2027-04 is given twice"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    char args[160];
    snprintf(args, sizeof args, "hedge size --gpus 1 --hours-per-month 10 --months %s",
             bad[k].months);
    assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 2);
    cli_expect(o, bad[k].why);
    free(o);
  }
}

/* With a hedge ratio, by hand: 11 GPUs x 700 h = 7,700 GPU-hours; x 0.821429
 * = 6,325.0033 GPU-hours, 6.3250033 contracts: 6 (nearest), residual
 * 325.0033; up: 7, residual -674.9967. Ratio 0.5 on 7,000: 3,500 = 3.5
 * contracts, exactly half: 4 (half up). */
static void hedge_size_with_ratio(void **state) {
  (void)state;
  char *o;
  assert_int_equal(cli_run(hgctl,
                           "hedge size --gpus 11 --hours-per-month 700 --months 2027-03 "
                           "--ratio 0.821429",
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "month,gpus,hours_per_gpu,exposure_gpu_hours,hedge_ratio,target_gpu_hours,"
                "contracts,hedged_gpu_hours,residual_gpu_hours\n"
                "2027-03,11,700,7700,0.821429,6325.003300,6,6000,325.003300\n");
  free(o);
  assert_int_equal(cli_run(hgctl,
                           "hedge size --gpus 11 --hours-per-month 700 --months 2027-03 "
                           "--ratio 0.821429 --round up",
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "2027-03,11,700,7700,0.821429,6325.003300,7,7000,-674.996700\n");
  free(o);
  assert_int_equal(cli_run(hgctl,
                           "hedge size --gpus 10 --hours-per-month 700 --months 2027-03 --ratio 0.5",
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "2027-03,10,700,7000,0.500000,3500.000000,4,4000,-500.000000\n");
  free(o);
  /* The total line stays with a ratio: the targets, contracts, hedged and
   * residuals summed (7,000 x 0.5 = 3,500 in March and April alike). */
  assert_int_equal(cli_run(hgctl,
                           "hedge size --gpus 10 --hours-per-month 700 --months 2027-03..2027-04 "
                           "--ratio 0.5",
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "2027-04,10,700,7000,0.500000,3500.000000,4,4000,-500.000000\n"
                "total,,,14000,,7000.000000,8,8000,-1000.000000\n");
  free(o);
  assert_int_equal(cli_run(hgctl,
                           "hedge size --gpus 10 --hours-per-month 700 --months 2027-03 --ratio 0",
                           CLI_BOTH, &o),
                   2);
  cli_expect(o, "--ratio '0' must be a decimal above 0");
  free(o);
}

static void hedge_ratio(void **state) {
  (void)state;
  put("rent.csv", "day,price\n2027-03-01,2.000\n2027-03-02,2.100\n2027-03-03,9.9\n"
                  "2027-03-04,2.050\n2027-03-05,2.250\n2027-03-06,7\n");
  put("index.csv", "day,value,status\n2027-03-01,1.000,FINAL\n2027-03-02,1.100,PROVISIONAL\n"
                   "2027-03-03,,NO_FIX\n2027-03-04,1.000,FINAL\n2027-03-05,1.200,FINAL\n"
                   "2027-03-07,5,FINAL\n");
  char args[512], *o;
  snprintf(args, sizeof args, "hedge ratio --rent %s/rent.csv --index %s/index.csv", tmp, tmp);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  /* 115/140 = 0.8214286; 11.5/sqrt(133) = 0.9971765; 132.25/133 = 0.9943609 */
  cli_expect(o, "days_aligned 4\nchanges 3\n");
  cli_expect(o, "rent_vol_usd 0.125831\nindex_vol_usd 0.152753\n");
  cli_expect(o, "correlation 0.997176\nhedge_ratio 0.821429\nhedge_effectiveness 0.994361\n");
  /* What was read, and how provisional days and gaps count: 03-02 is
   * PROVISIONAL, 03-03 NO_FIX; aligned 01, 02, 04, 05: one change (02 ->
   * 04) spans a gap. */
  cli_expect(o, "rent_read 6 days 2027-03-01..2027-03-06 usd_per_gpu_hour 2.000000..9.900000\n"
                "index_read 6 days 2027-03-01..2027-03-07 usd_per_gpu_hour 1.000000..5.000000\n"
                "index_provisional 1 (used as published)\nindex_no_fix 1 (skipped)\ngaps 1 ");
  free(o);
  /* micro-USD written where USD is expected: refused, saying what was read */
  put("micro.csv", "day,value,status\n2027-03-01,1000000,FINAL\n2027-03-02,3400000,FINAL\n"
                   "2027-03-04,1000000,FINAL\n");
  snprintf(args, sizeof args, "hedge ratio --rent %s/rent.csv --index %s/micro.csv", tmp, tmp);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  cli_expect(o, "2027-03-01: the value was read as 1000000.000000 USD per GPU-hour, above 1000: "
                "values must be USD per GPU-hour; if it is micro-USD, write 1.000000");
  assert_null(strstr(o, "hedge_ratio"));
  free(o);
  /* A spreadsheet's byte-order mark before the header is accepted. */
  put("bom.csv", "\xef\xbb\xbf" "day,price\n2027-03-01,2.000\n2027-03-02,2.100\n2027-03-03,9.9\n"
                 "2027-03-04,2.050\n2027-03-05,2.250\n2027-03-06,7\n");
  snprintf(args, sizeof args, "hedge ratio --rent %s/bom.csv --index %s/index.csv", tmp, tmp);
  assert_int_equal(cli_run(hgctl, args, CLI_STDOUT, &o), 0);
  cli_expect(o, "hedge_ratio 0.821429\n");
  free(o);
  put("bad.csv", "day,price\n2027-03-01,2.000\n2027-03-01,2.100\n");
  snprintf(args, sizeof args, "hedge ratio --rent %s/bad.csv --index %s/index.csv", tmp, tmp);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  cli_expect(o, "bad.csv:3: day days must be strictly ascending");
  free(o);
  put("few.csv", "day,price\n2027-03-01,2.000\n2027-03-02,2.100\n");
  snprintf(args, sizeof args, "hedge ratio --rent %s/few.csv --index %s/index.csv", tmp, tmp);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  cli_expect(o, "fewer than 3 days present in both");
  free(o);
  snprintf(args, sizeof args, "hedge ratio --rent %s/none.csv --index %s/index.csv", tmp, tmp);
  assert_int_equal(cli_run(hgctl, args, CLI_BOTH, &o), 1);
  cli_expect(o, "cannot read rent file");
  free(o);
}

static void convert(void **state) {
  (void)state;
  char *o;
  assert_int_equal(cli_run(hgctl, "convert --price 2.50 --tokens-per-second 1000", CLI_STDOUT, &o),
                   0);
  cli_expect(o, "usd_per_million_tokens 0.69(4)\nusd_per_million_tokens_rounded 0.694444\n");
  cli_expect(o, "tokens_per_second 1000\n# tokens_per_second: output tokens delivered per second "
                "per GPU after utilisation\n");
  cli_expect(o, "exact no");
  free(o);
  assert_int_equal(
      cli_run(hgctl, "convert --price 3 --tokens-per-second 7 --places 5", CLI_STDOUT, &o), 0);
  cli_expect(o, "usd_per_million_tokens 119.(047619)\nusd_per_million_tokens_rounded 119.04762\n");
  free(o);
  assert_int_equal(
      cli_run(hgctl, "convert --usd-per-million-tokens 1.1106 --tokens-per-second 250 --places 3",
              CLI_STDOUT, &o),
      0);
  cli_expect(o, "usd_per_gpu_hour 0.99954\nusd_per_gpu_hour_rounded 1.000\nexact yes\n");
  free(o);
  assert_int_equal(
      cli_run(hgctl, "convert --price 2 --usd-per-million-tokens 1 --tokens-per-second 5", CLI_BOTH,
              &o),
      2);
  cli_expect(o, "exactly one of");
  free(o);
  assert_int_equal(cli_run(hgctl, "convert --price 0 --tokens-per-second 5", CLI_BOTH, &o), 2);
  cli_expect(o, "--price '0' must be a positive decimal");
  free(o);
}

/* settlement/CONTRACT.md section 6.13 through the CLI. */
static void hedge_margin(void **state) {
  (void)state;
  char *o;
  assert_int_equal(cli_run(hgctl,
                           "hedge margin --gpus 100 --tokens-per-second 300 --months 2027-03 "
                           "--rent 3.400 --token-price 4.000",
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "2027-03,100,74400,1080000,80352.000000,74,400,80,352.000000,3.400000,4.000000,"
                "4.320000,0.920000,68448.000000\n");
  free(o);
  assert_int_equal(cli_run(hgctl,
                           "hedge margin --gpus 100 --tokens-per-gpu-hour 720000 --months "
                           "2027-03 --hours-per-month full --rent 3.4 --token-price 4",
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "2027-03,100,74400,720000,53568.000000,74,400,54,-432.000000,3.400000,4.000000,"
                "2.880000,-0.520000,-38688.000000\n");
  free(o);
  assert_int_equal(cli_run(hgctl, "hedge margin --gpus 100 --months 2027-03 --rent 3.4",
                           CLI_BOTH, &o),
                   2);
  cli_expect(o, "exactly one of --tokens-per-second and --tokens-per-gpu-hour");
  free(o);
  assert_int_equal(cli_run(hgctl,
                           "hedge margin --gpus 1 --tokens-per-second 1.2345 --months 2027-03",
                           CLI_BOTH, &o),
                   2);
  cli_expect(o, "at most 3 decimals");
  free(o);
  assert_int_equal(cli_run(hgctl,
                           "convert --usd-per-million-tokens 4.000 --tokens-per-second 200 "
                           "--rent 3.400",
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "usd_per_gpu_hour 2.88\n");
  cli_expect(o, "tokens_per_gpu_hour 720000\n");
  cli_expect(o, "margin_usd_per_gpu_hour -0.520000\n");
  free(o);
  assert_int_equal(
      cli_run(hgctl, "convert --price 3.4 --tokens-per-second 200 --rent 3.4", CLI_BOTH, &o), 2);
  cli_expect(o, "--rent goes with --usd-per-million-tokens");
  free(o);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_hedge_cli HGCTL\n");
    return 2;
  }
  hgctl = argv[1];
  snprintf(tmp, sizeof tmp, "./hgtest-hedge-XXXXXX");
  if (mkdtemp(tmp) == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hedge_size),
      cmocka_unit_test(hedge_size_with_ratio),
      cmocka_unit_test(hedge_ratio),
      cmocka_unit_test(convert),
      cmocka_unit_test(hedge_margin),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
