/*
 * test_hgctl_fmt.c - hgctl's USD conversions (gateway/tools/hgctl_fmt.c): decimal
 * prices to ticks exactly, refusals for off-tick, negative, malformed and
 * overflowing input, and the printed forms of prices, money and times.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hgctl_fmt.h"
#include "hgctl_table.h"

static int64_t price_ok(const char *s) {
  int64_t v = -777;
  assert_int_equal(hgctl_decimal_parse(s, 3, 0, &v), 0);
  return v;
}

static void price_bad(const char *s, int code) {
  int64_t v = -777;
  assert_int_equal(hgctl_decimal_parse(s, 3, 0, &v), code);
  assert_int_equal(v, -777); /* untouched */
}

static void test_price_parse(void **state) {
  (void)state;
  assert_int_equal(price_ok("3.42"), 3420);
  assert_int_equal(price_ok("3.420"), 3420);
  assert_int_equal(price_ok("3.4"), 3400);
  assert_int_equal(price_ok("3"), 3000);
  assert_int_equal(price_ok("0.001"), 1);
  assert_int_equal(price_ok("007.5"), 7500);
  /* The largest price the wire carries: INT64_MAX ticks. */
  assert_int_equal(price_ok("9223372036854775.807"), INT64_MAX);
  price_bad("9223372036854775.808", HGCTL_DEC_RANGE);
  price_bad("9223372036854776", HGCTL_DEC_RANGE);
  price_bad("99999999999999999999999", HGCTL_DEC_RANGE);
  price_bad("3.4205", HGCTL_DEC_PLACES);
  price_bad("3.4200", HGCTL_DEC_PLACES);
  price_bad("-1", HGCTL_DEC_NEGATIVE);
  price_bad("-0.5", HGCTL_DEC_NEGATIVE);
  price_bad("0.000", HGCTL_DEC_NEGATIVE);
  price_bad("0", HGCTL_DEC_NEGATIVE);
  const char *const syntax[] = {"", "-", ".", "3.", ".5", "3.4.2", "1e3", "0x10", "3,42", " 3",
                                "3 ", "+3", "3420x", "--1", "abc"};
  for (size_t k = 0; k < sizeof syntax / sizeof syntax[0]; k++)
    price_bad(syntax[k], HGCTL_DEC_SYNTAX);
  price_bad(NULL, HGCTL_DEC_SYNTAX);
  int64_t v = 0;
  assert_int_equal(hgctl_decimal_parse("0", 3, 1, &v), 0);
  assert_int_equal(v, 0);
  /* Money: six places. */
  assert_int_equal(hgctl_decimal_parse("1250.5", 6, 0, &v), 0);
  assert_int_equal(v, 1250500000);
  assert_int_equal(hgctl_decimal_parse("0.000001", 6, 0, &v), 0);
  assert_int_equal(v, 1);
  assert_int_equal(hgctl_decimal_parse("0.0000001", 6, 0, &v), HGCTL_DEC_PLACES);
  assert_non_null(strstr(hgctl_decimal_error(HGCTL_DEC_PLACES, 3), "0.001 USD"));
}

static void test_format(void **state) {
  (void)state;
  char b[HGCTL_FMT_LEN];
  assert_string_equal(hgctl_fmt_price(3415, b), "3.415");
  assert_string_equal(hgctl_fmt_price(3420, b), "3.420");
  assert_string_equal(hgctl_fmt_price(5, b), "0.005");
  assert_string_equal(hgctl_fmt_price(0, b), "0.000");
  assert_string_equal(hgctl_fmt_price(-5, b), "-0.005");
  assert_string_equal(hgctl_fmt_price(INT64_MAX, b), "9223372036854775.807");
  assert_string_equal(hgctl_fmt_price(INT64_MIN, b), "-9223372036854775.808");
  /* Money: cents when exact, micro-USD otherwise; never rounded. */
  assert_string_equal(hgctl_fmt_money(1250000000, b), "1250.00");
  assert_string_equal(hgctl_fmt_money(-3000000, b), "-3.00");
  assert_string_equal(hgctl_fmt_money(10000, b), "0.01");
  assert_string_equal(hgctl_fmt_money(125, b), "0.000125");
  assert_string_equal(hgctl_fmt_money(-1000001, b), "-1.000001");
  assert_string_equal(hgctl_fmt_money(0, b), "0.00");
  assert_string_equal(hgctl_fmt_decimal(3412345, 6, b), "3.412345");
  /* --raw: the wire's integers. */
  assert_string_equal(hgctl_fmt_price_raw(3415, false, b), "3.415");
  assert_string_equal(hgctl_fmt_price_raw(3415, true, b), "3415");
  assert_string_equal(hgctl_fmt_money_raw(-3000000, false, b), "-3.00");
  assert_string_equal(hgctl_fmt_money_raw(-3000000, true, b), "-3000000");
  /* Print, parse back: the same ticks. */
  for (int64_t t = 1; t < 100000; t += 37) {
    int64_t back = 0;
    assert_int_equal(hgctl_decimal_parse(hgctl_fmt_price(t, b), 3, 0, &back), 0);
    assert_int_equal(back, t);
  }
  /* 2027-03-14 16:00:00 UTC = 1805040000 s. */
  assert_string_equal(hgctl_fmt_time(1805040000000000123ull, b), "2027-03-14T16:00:00.000000123Z");
  assert_string_equal(hgctl_fmt_time(0, b), "1970-01-01T00:00:00.000000000Z");
}

/* The tables of --format json|csv: names in order, numbers bare, text
 * quoted and escaped, a missing value null or empty, CSV quoting. */
static void test_tables(void **state) {
  (void)state;
  static const hgctl_col_t cols[] = {{"id", 0}, {"name", 1}, {"price_usd", 0}};
  hgctl_out_t f;
  assert_int_equal(hgctl_out_parse(NULL, &f), 0);
  assert_int_equal(f, HGCTL_OUT_TEXT);
  assert_int_equal(hgctl_out_parse("csv", &f), 0);
  assert_int_equal(f, HGCTL_OUT_CSV);
  assert_int_equal(hgctl_out_parse("JSON", &f), -1);
  for (int k = 0; k < 2; k++) {
    char buf[512] = "";
    FILE *m = fmemopen(buf, sizeof buf, "w");
    assert_non_null(m);
    hgctl_table_t t;
    hgctl_table_start(&t, m, k ? HGCTL_OUT_CSV : HGCTL_OUT_JSON, cols, 3);
    const char *r1[] = {"1", "a \"b\", c", "3.420"}, *r2[] = {"2", "-", NULL};
    hgctl_table_row(&t, r1);
    hgctl_table_row(&t, r2);
    hgctl_table_end(&t);
    fclose(m);
    assert_string_equal(buf, k ? "id,name,price_usd\n1,\"a \"\"b\"\", c\",3.420\n2,,\n"
                               : "[{\"id\":1,\"name\":\"a \\\"b\\\", c\",\"price_usd\":3.420},"
                                 "{\"id\":2,\"name\":null,\"price_usd\":null}]\n");
  }
  /* JSON lines (a tail): one object a line, no brackets; an empty array. */
  char buf[256] = "";
  FILE *m = fmemopen(buf, sizeof buf, "w");
  assert_non_null(m);
  hgctl_table_t t;
  hgctl_table_start(&t, m, HGCTL_OUT_JSON, cols, 3);
  t.lines = 1;
  const char *r[] = {"7", "x", "1.5"};
  hgctl_table_row(&t, r);
  hgctl_table_row(&t, r);
  hgctl_table_end(&t);
  hgctl_table_start(&t, m, HGCTL_OUT_JSON, cols, 3);
  hgctl_table_end(&t);
  fclose(m);
  assert_string_equal(buf, "{\"id\":7,\"name\":\"x\",\"price_usd\":1.5}\n"
                           "{\"id\":7,\"name\":\"x\",\"price_usd\":1.5}\n[]\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_price_parse),
      cmocka_unit_test(test_format),
      cmocka_unit_test(test_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
