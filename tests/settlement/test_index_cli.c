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

static const char *hgctl;
static const char *data;

/* Runs hgctl with args; returns its exit status and its stdout (or stderr
 * when want_stderr) in a malloc'd string. */
static int run(const char *args, bool want_stderr, char **out) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s %s %s", hgctl, args, want_stderr ? "2>&1 >/dev/null" : "2>/dev/null");
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
  if (strstr(hay, needle) == NULL) fail_msg("missing %s in:\n%s", needle, hay);
}

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
  assert_int_equal(run(fix_args("index_samples.csv", "2027-03-14", ""), false, &o), 0);
  expect(o, "\"index\": \"IGX-B200-A\"");
  expect(o, "\"methodology\": \"v1\"");
  expect(o, "\"status\": \"PROVISIONAL\"");
  expect(o, "\"kind\": \"COMPUTED\"");
  expect(o, "\"tier\": 1,");
  expect(o, "\"value_micro_usd\": 2055000,");
  expect(o, "\"value_usd\": \"2.055000\"");
  expect(o, "\"sample_count\": 69,");
  expect(o, "\"used_samples\": 60,");
  expect(o, "\"providers\": 5,");
  expect(o, "\"hours\": 12,");
  expect(o, "\"volume_gpu_hours\": 1440,");
  expect(o, "\"median_micro_usd\": 2060000,");
  expect(o, "\"mad_micro_usd\": 30000,");
  expect(o, "\"provider_cap_applied\": true,");
  expect(o, "\"cap_gpu_hours\": 288,");
  expect(o, "{\"hour\": 0, \"samples\": 5, \"value_micro_usd\": 2000000}");
  expect(o, "{\"hour\": 11, \"samples\": 5, \"value_micro_usd\": 2110000}");
  assert_null(strstr(o, "\"hour\": 12"));
  expect(o, "\"exclusions\": {\"OUT_OF_WINDOW\": 1, \"WRONG_GPU\": 1, \"INVALID\": 1, "
            "\"WRONG_GRADE\": 1, \"NOT_GRADED\": 1, \"TERM_TOO_LONG\": 1, \"DUPLICATE\": 1, "
            "\"QUOTE_NOT_USED\": 1, \"OUTLIER\": 1}");
  expect(o, "\"rejected_lines\": []");
  free(o);

  /* The receipt names lines: the first line (p1, 40) and the second (p2, 20). */
  assert_int_equal(run(fix_args("index_samples.csv", "2027-03-14", "--receipt"), false, &o), 0);
  expect(o, "{\"line\": 2, \"weight\": 25165824}");
  expect(o, "{\"line\": 3, \"weight\": 20971520}");
  expect(o, "{\"line\": 70, \"reason\": \"OUTLIER\"}");
  expect(o, "{\"line\": 62, \"reason\": \"QUOTE_NOT_USED\"}");
  expect(o, "{\"line\": 65, \"reason\": \"DUPLICATE\"}");
  free(o);
}

/* The next day has no data: NO_FIX, tier 0 (no history to carry from). */
static void insufficient_day_is_no_fix(void **state) {
  (void)state;
  char *o;
  assert_int_equal(run(fix_args("index_samples.csv", "2027-03-15", ""), false, &o), 0);
  expect(o, "\"status\": \"NO_FIX\"");
  expect(o, "\"tier\": 0,");
  expect(o, "\"value_micro_usd\": null");
  expect(o, "\"OUT_OF_WINDOW\": 69");
  free(o);
}

static void rejected_lines(void **state) {
  (void)state;
  char *o;
  assert_int_equal(run(fix_args("index_samples_bad.csv", "2027-03-14", ""), false, &o), 1);
  expect(o, "\"line\": 71, \"column\": \"price_usd_per_gpu_hour\", \"reason\": \"more than 6 "
            "decimal places\"");
  expect(o, "\"line\": 72, \"column\": \"kind\"");
  assert_null(strstr(o, "value_micro_usd"));
  free(o);
  assert_int_equal(run(fix_args("index_samples_bad.csv", "2027-03-14", ""), true, &o), 1);
  expect(o, "index_samples_bad.csv:71: price_usd_per_gpu_hour: more than 6 decimal places");
  expect(o, "index_samples_bad.csv:72: kind: kind is neither 'trade' nor 'quote'");
  free(o);
  assert_int_equal(
      run(fix_args("index_samples_bad.csv", "2027-03-14", "--allow-rejected"), false, &o), 0);
  expect(o, "\"value_micro_usd\": 2055000,");
  expect(o, "\"line\": 71");
  expect(o, "\"line\": 72");
  free(o);
}

static void usage_errors(void **state) {
  (void)state;
  char *o;
  assert_int_equal(run("", true, &o), 2);
  free(o);
  assert_int_equal(run("index", true, &o), 2);
  free(o);
  assert_int_equal(run("index nope", true, &o), 2);
  free(o);
  assert_int_equal(run("index fix --samples x.csv", true, &o), 2);
  expect(o, "missing --providers");
  free(o);
  assert_int_equal(run(fix_args("index_samples.csv", "2027-02-30", ""), true, &o), 2);
  expect(o, "not a valid YYYY-MM-DD");
  free(o);
  assert_int_equal(run(fix_args("index_samples.csv", "2027-03-14", "--bogus"), true, &o), 2);
  free(o);
  assert_int_equal(run(fix_args("index_samples.csv", "2027-03-14", "--day"), true, &o), 2);
  free(o);
  char a[2048];
  snprintf(a, sizeof a,
           "index fix --samples %s/index_samples.csv --providers %s/index_providers.csv "
           "--gpu B200 --grade Z --day 2027-03-14",
           data, data);
  assert_int_equal(run(a, true, &o), 2);
  expect(o, "no grade 'Z'");
  free(o);
  assert_int_equal(run(fix_args("no_such_file.csv", "2027-03-14", ""), true, &o), 1);
  expect(o, "cannot read samples");
  free(o);
  /* The registry as samples: wrong header, exit 1. */
  assert_int_equal(run(fix_args("index_providers.csv", "2027-03-14", "--allow-rejected"), false, &o),
                   1);
  expect(o, "header");
  free(o);
  assert_int_equal(run("--help", false, &o), 0);
  expect(o, "hgctl index fix");
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
      cmocka_unit_test(usage_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
