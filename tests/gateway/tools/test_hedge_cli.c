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
      cmocka_unit_test(hedge_ratio),
      cmocka_unit_test(convert),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
