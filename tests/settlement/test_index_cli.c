/*
 * `hgctl index fix` end to end on the fixture in data/index_samples.csv.
 * Arguments: the hgctl binary and the data directory.
 *
 * The fixture, by hand: providers p1..p5 trade once an hour in hours 0..11 of
 * 2027-03-14 at 2.00 + 0.01 x hour USD (p1 volume 40, others 20), plus one
 * line per exclusion reason. Tier 1 keeps 61 eligible prices: M = 2.06 (index
 * 30), MAD = 0.03, so 9.99 (dev 7.93 > 4.4478 x 0.03) is the one outlier.
 * 60 samples, 5 providers, 12 hours, 1440 GPU-hours: sufficient. Cap:
 * C = floor(1440/5) = 288; p1 has 480 > 288: w = floor(40*288*2^20/480)
 * = 25165824; others 20*2^20 = 20971520. Every bucket holds one price, so the
 * value is the mean of 2.00..2.11 = 2.055 USD = 2055000 micro-USD.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "cli_run.h"

static const char *hgctl;
static const char *data;

static char *fix_args(const char *samples, const char *day, const char *extra) {
  static char a[2048];
  snprintf(a, sizeof a,
           "index fix --samples %s/%s --providers %s/index_providers.csv --gpu B200 --grade A "
           "--day %s %s",
           data, samples, data, day, extra);
  return a;
}

static void fixture_json(void **state) {
  (void)state;
  char *o;
  assert_int_equal(cli_run(hgctl, fix_args("index_samples.csv", "2027-03-14", ""), CLI_STDOUT, &o),
                   0);
  cli_expect(o, "\"index\": \"IGX-B200-A\"");
  cli_expect(o, "\"methodology\": \"v1\"");
  cli_expect(o, "\"status\": \"PROVISIONAL\"");
  cli_expect(o, "\"kind\": \"COMPUTED\"");
  cli_expect(o, "\"tier\": 1,");
  cli_expect(o, "\"value_micro_usd\": 2055000,");
  cli_expect(o, "\"value_usd\": \"2.055000\"");
  cli_expect(o, "\"sample_count\": 69,");
  cli_expect(o, "\"used_samples\": 60,");
  cli_expect(o, "\"providers\": 5,");
  cli_expect(o, "\"hours\": 12,");
  cli_expect(o, "\"volume_gpu_hours\": 1440,");
  cli_expect(o, "\"median_micro_usd\": 2060000,");
  cli_expect(o, "\"mad_micro_usd\": 30000,");
  cli_expect(o, "\"provider_cap_applied\": true,");
  cli_expect(o, "\"cap_gpu_hours\": 288,");
  cli_expect(o, "{\"hour\": 0, \"samples\": 5, \"value_micro_usd\": 2000000}");
  cli_expect(o, "{\"hour\": 11, \"samples\": 5, \"value_micro_usd\": 2110000}");
  assert_null(strstr(o, "\"hour\": 12"));
  cli_expect(o,
             "\"exclusions\": {\"OUT_OF_WINDOW\": 1, \"WRONG_GPU\": 1, \"INVALID\": 1, "
             "\"WRONG_GRADE\": 1, \"NOT_GRADED\": 1, \"TERM_TOO_LONG\": 1, \"DUPLICATE\": 1, "
             "\"QUOTE_NOT_USED\": 1, \"OUTLIER\": 1}");
  cli_expect(o, "\"rejected_lines\": []");
  free(o);

  /* The receipt names lines: the first line (p1, 40) and the second (p2, 20). */
  assert_int_equal(
      cli_run(hgctl, fix_args("index_samples.csv", "2027-03-14", "--receipt"), CLI_STDOUT, &o), 0);
  cli_expect(o, "{\"line\": 2, \"weight\": 25165824}");
  cli_expect(o, "{\"line\": 3, \"weight\": 20971520}");
  cli_expect(o, "{\"line\": 70, \"reason\": \"OUTLIER\"}");
  cli_expect(o, "{\"line\": 62, \"reason\": \"QUOTE_NOT_USED\"}");
  cli_expect(o, "{\"line\": 65, \"reason\": \"DUPLICATE\"}");
  free(o);
}

/* The next day has no data: NO_FIX, tier 0 (no history to carry from). */
static void insufficient_day_is_no_fix(void **state) {
  (void)state;
  char *o;
  assert_int_equal(cli_run(hgctl, fix_args("index_samples.csv", "2027-03-15", ""), CLI_STDOUT, &o),
                   0);
  cli_expect(o, "\"status\": \"NO_FIX\"");
  cli_expect(o, "\"tier\": 0,");
  cli_expect(o, "\"value_micro_usd\": null");
  cli_expect(o, "\"OUT_OF_WINDOW\": 69");
  free(o);
}

static void rejected_lines(void **state) {
  (void)state;
  char *o;
  assert_int_equal(
      cli_run(hgctl, fix_args("index_samples_bad.csv", "2027-03-14", ""), CLI_STDOUT, &o), 1);
  cli_expect(o,
             "\"line\": 71, \"column\": \"price_usd_per_gpu_hour\", \"reason\": \"more than 6 "
             "decimal places\"");
  cli_expect(o, "\"line\": 72, \"column\": \"kind\"");
  assert_null(strstr(o, "value_micro_usd"));
  free(o);
  assert_int_equal(
      cli_run(hgctl, fix_args("index_samples_bad.csv", "2027-03-14", ""), CLI_STDERR, &o), 1);
  cli_expect(o, "index_samples_bad.csv:71: price_usd_per_gpu_hour: more than 6 decimal places");
  cli_expect(o, "index_samples_bad.csv:72: kind: kind is neither 'trade' nor 'quote'");
  free(o);
  assert_int_equal(
      cli_run(hgctl, fix_args("index_samples_bad.csv", "2027-03-14", "--allow-rejected"),
              CLI_STDOUT, &o),
      0);
  cli_expect(o, "\"value_micro_usd\": 2055000,");
  cli_expect(o, "\"line\": 71");
  cli_expect(o, "\"line\": 72");
  free(o);
}

/* A copy of the fixture with a UTF-8 byte-order mark and then extra bad
 * lines (lines 71 and on, "x" as the price) appended; returns its path. */
static const char *bom_copy(int bad_lines) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/hg-index-bom-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *out = fdopen(fd, "w");
  assert_non_null(out);
  char src[1024], line[512];
  snprintf(src, sizeof src, "%s/index_samples.csv", data);
  FILE *in = fopen(src, "r");
  assert_non_null(in);
  fputs("\xef\xbb\xbf", out);
  while (fgets(line, sizeof line, in) != NULL) fputs(line, out);
  fclose(in);
  for (int k = 0; k < bad_lines; k++) fprintf(out, "1804982460,p%d,us,B200,A,30,x,1,trade\n", k);
  assert_int_equal(fclose(out), 0);
  return path;
}

/* `index fix` of the samples file at path for the fixture's day. */
static const char *bom_args(const char *path) {
  static char a[2048];
  snprintf(a, sizeof a,
           "index fix --samples %s --providers %s/index_providers.csv --gpu B200 --grade A "
           "--day 2027-03-14",
           path, data);
  return a;
}

/* A spreadsheet's byte-order mark is not part of the header. */
static void bom_accepted(void **state) {
  (void)state;
  char *o;
  const char *p = bom_copy(0);
  assert_int_equal(cli_run(hgctl, bom_args(p), CLI_STDOUT, &o), 0);
  cli_expect(o, "\"value_micro_usd\": 2055000,");
  cli_expect(o, "\"rejected_lines\": []");
  free(o);
  remove(p);
}

/* stderr names the first 20 rejected lines and counts the rest; the JSON
 * lists every one. */
static void rejected_lines_capped(void **state) {
  (void)state;
  char *o;
  const char *p = bom_copy(25);
  assert_int_equal(cli_run(hgctl, bom_args(p), CLI_STDERR, &o), 1);
  char want[128];
  snprintf(want, sizeof want, "%s:90: price_usd_per_gpu_hour:", p); /* the 20th: line 71 + 19 */
  cli_expect(o, want);
  snprintf(want, sizeof want, "%s:91:", p);
  assert_null(strstr(o, want));
  snprintf(want, sizeof want, "%s: and 5 more rejected line(s)\n", p);
  cli_expect(o, want);
  cli_expect(o, "25 rejected line(s)");
  free(o);
  assert_int_equal(cli_run(hgctl, bom_args(p), CLI_STDOUT, &o), 1);
  cli_expect(o, "\"line\": 95, \"column\": \"price_usd_per_gpu_hour\"");
  free(o);
  remove(p);
}

static void usage_errors(void **state) {
  (void)state;
  char *o;
  assert_int_equal(cli_run(hgctl, "", CLI_STDERR, &o), 2);
  free(o);
  assert_int_equal(cli_run(hgctl, "index", CLI_STDERR, &o), 2);
  free(o);
  assert_int_equal(cli_run(hgctl, "index nope", CLI_STDERR, &o), 2);
  free(o);
  assert_int_equal(cli_run(hgctl, "index fix --samples x.csv", CLI_STDERR, &o), 2);
  cli_expect(o, "missing --providers");
  free(o);
  assert_int_equal(cli_run(hgctl, fix_args("index_samples.csv", "2027-02-30", ""), CLI_STDERR, &o),
                   2);
  cli_expect(o, "not a valid YYYY-MM-DD");
  free(o);
  assert_int_equal(
      cli_run(hgctl, fix_args("index_samples.csv", "2027-03-14", "--bogus"), CLI_STDERR, &o), 2);
  free(o);
  assert_int_equal(
      cli_run(hgctl, fix_args("index_samples.csv", "2027-03-14", "--day"), CLI_STDERR, &o), 2);
  free(o);
  char a[2048];
  snprintf(a, sizeof a,
           "index fix --samples %s/index_samples.csv --providers %s/index_providers.csv "
           "--gpu B200 --grade Z --day 2027-03-14",
           data, data);
  assert_int_equal(cli_run(hgctl, a, CLI_STDERR, &o), 2);
  cli_expect(o, "no grade 'Z'");
  free(o);
  assert_int_equal(cli_run(hgctl, fix_args("no_such_file.csv", "2027-03-14", ""), CLI_STDERR, &o),
                   1);
  cli_expect(o, "cannot read samples");
  free(o);
  /* The registry as samples: wrong header, exit 1. */
  assert_int_equal(cli_run(hgctl, fix_args("index_providers.csv", "2027-03-14", "--allow-rejected"),
                           CLI_STDOUT, &o),
                   1);
  cli_expect(o, "header");
  free(o);
  assert_int_equal(cli_run(hgctl, "--help", CLI_STDOUT, &o), 0);
  cli_expect(o, "hgctl index fix");
  free(o);
}

/* TPX, settlement/CONTRACT.md section 6.11, computed by hand there. */
static char *tpx_args(const char *samples, const char *day, const char *extra) {
  static char a[2048];
  snprintf(a, sizeof a,
           "index fix --samples %s/%s --providers %s/tpx_providers.csv --class OW671B --grade S "
           "--day %s %s",
           data, samples, data, day, extra);
  return a;
}

static void tpx_tier1_every_reason(void **state) {
  (void)state;
  char *o;
  assert_int_equal(
      cli_run(hgctl, tpx_args("tpx_samples.csv", "2027-03-14", "--receipt"), CLI_STDOUT, &o), 0);
  cli_expect(o, "\"index\": \"TPX-OW671B-S\"");
  cli_expect(o, "\"class\": \"OW671B\"");
  cli_expect(o, "\"tier\": 1,");
  cli_expect(o, "\"value_micro_usd\": 4020000,");
  cli_expect(o, "\"sample_count\": 69,");
  cli_expect(o, "\"used_samples\": 60,");
  cli_expect(o, "\"volume_million_tokens\": 1200,");
  cli_expect(o, "\"median_micro_usd\": 4020000,");
  cli_expect(o, "\"mad_micro_usd\": 10000,");
  cli_expect(o, "\"cap_million_tokens\": 240,");
  /* V_p = C is not above C: every weight stays 20 x 2^20. */
  cli_expect(o, "{\"line\": 2, \"weight\": 20971520}");
  assert_null(strstr(o, "\"weight\": 25165824"));
  cli_expect(o,
             "\"exclusions\": {\"OUT_OF_WINDOW\": 1, \"WRONG_GPU\": 1, \"INVALID\": 1, "
             "\"WRONG_GRADE\": 1, \"NOT_GRADED\": 1, \"TERM_TOO_LONG\": 1, \"DUPLICATE\": 1, "
             "\"QUOTE_NOT_USED\": 1, \"OUTLIER\": 1}");
  cli_expect(o, "{\"line\": 62, \"reason\": \"OUTLIER\"}");
  cli_expect(o, "{\"line\": 69, \"reason\": \"DUPLICATE\"}");
  free(o);
}

static void tpx_tier2_cap_and_no_fix(void **state) {
  (void)state;
  char *o;
  assert_int_equal(cli_run(hgctl, tpx_args("tpx_samples_tier2.csv", "2027-03-15", "--receipt"),
                           CLI_STDOUT, &o),
                   0);
  cli_expect(o, "\"tier\": 2,");
  cli_expect(o, "\"value_micro_usd\": 4020000,");
  cli_expect(o, "\"cap_million_tokens\": 288,");
  cli_expect(o, "{\"line\": 2, \"weight\": 25165824}");
  cli_expect(o, "{\"line\": 3, \"weight\": 20971520}");
  cli_expect(o, "{\"tier\": 1, \"tried\": true, \"sufficient\": false, \"eligible\": 48, "
                "\"used_samples\": 48, \"providers\": 4,");
  free(o);
  /* Nothing in the window: offline there is no history to carry, NO_FIX. */
  assert_int_equal(cli_run(hgctl, tpx_args("tpx_samples.csv", "2027-03-16", ""), CLI_STDOUT, &o),
                   0);
  cli_expect(o, "\"status\": \"NO_FIX\"");
  free(o);
}

static void tpx_headers_and_grades(void **state) {
  (void)state;
  char *o;
  /* A GPU-hour samples file is not a token file: the header is refused. */
  char a[2048];
  snprintf(a, sizeof a,
           "index fix --samples %s/index_samples.csv --providers %s/tpx_providers.csv --class "
           "OW671B --grade S --day 2027-03-14",
           data, data);
  assert_int_equal(cli_run(hgctl, a, CLI_STDOUT, &o), 1);
  cli_expect(o, "samples header is wrong");
  free(o);
  snprintf(a, sizeof a,
           "index fix --samples %s/tpx_samples.csv --providers %s/tpx_providers.csv --class "
           "OW671B --grade A --day 2027-03-14",
           data, data);
  assert_int_equal(cli_run(hgctl, a, CLI_STDERR, &o), 2);
  cli_expect(o, "no grade 'A' for class 'OW671B'");
  cli_expect(o, "OW671B.S");
  free(o);
  snprintf(a, sizeof a,
           "index fix --samples %s/tpx_samples.csv --providers %s/tpx_providers.csv --class "
           "OW671B --gpu B200 --grade S --day 2027-03-14",
           data, data);
  assert_int_equal(cli_run(hgctl, a, CLI_STDERR, &o), 2);
  cli_expect(o, "not both");
  free(o);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s HGCTL DATA_DIR\n", argv[0]);
    return 2;
  }
  hgctl = argv[1];
  data = argv[2];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fixture_json),
      cmocka_unit_test(insufficient_day_is_no_fix),
      cmocka_unit_test(rejected_lines),
      cmocka_unit_test(bom_accepted),
      cmocka_unit_test(rejected_lines_capped),
      cmocka_unit_test(usage_errors),
      cmocka_unit_test(tpx_tier1_every_reason),
      cmocka_unit_test(tpx_tier2_cap_and_no_fix),
      cmocka_unit_test(tpx_headers_and_grades),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
