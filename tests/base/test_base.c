/*
 * test_base.c - base/'s dates, names and decimals against simpler models:
 * day numbers against a day-by-day walk of the calendar, text forms against
 * snprintf/strtol, decimals round-tripped through their own printer; array
 * growth's capacities and its refusal of sizes that overflow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/civil.h"
#include "hourglass/decimal.h"
#include "hourglass/grow.h"
#include "hourglass/log.h"
#include "hourglass/names.h"

/* Every day from 1600-03-01 to 9999-12-31, walked one at a time with the
 * month lengths: the closed form agrees both ways on each. */
static void civil_matches_a_day_by_day_walk(void **state) {
  (void)state;
  int32_t y = 1600;
  uint32_t m = 3, d = 1;
  int32_t day = hg_civil_to_day(1600, 3, 1);
  int32_t epoch = hg_civil_to_day(1970, 1, 1);
  assert_int_equal(epoch, 0);
  assert_int_equal(hg_civil_to_day(2000, 3, 1), 11017);
  for (;;) {
    assert_int_equal(hg_civil_to_day(y, m, d), day);
    hg_civil_t c = hg_civil_from_day(day);
    assert_int_equal(c.year, y);
    assert_int_equal(c.month, m);
    assert_int_equal(c.day, d);
    if (y == 9999 && m == 12 && d == 31) break;
    day++;
    if (++d > hg_civil_month_days(y, m)) {
      d = 1;
      if (++m > 12) {
        m = 1;
        y++;
      }
    }
  }
  assert_int_equal(day, 2932896); /* 9999-12-31 */
}

static void civil_leap_rules(void **state) {
  (void)state;
  assert_true(hg_civil_leap(2000));
  assert_false(hg_civil_leap(1900));
  assert_true(hg_civil_leap(2028));
  assert_false(hg_civil_leap(2027));
  assert_int_equal(hg_civil_month_days(2028, 2), 29);
  assert_int_equal(hg_civil_month_days(2100, 2), 28);
  assert_int_equal(hg_civil_month_days(2027, 13), 0);
  assert_int_equal(hg_civil_day_of_ns(HG_NS_PER_DAY * 3 - 1), 2);
}

static void civil_text_forms(void **state) {
  (void)state;
  int32_t day = -1;
  assert_true(hg_civil_parse_date("2027-03-14", 10, &day));
  assert_int_equal(day, hg_civil_to_day(2027, 3, 14));
  char buf[11];
  hg_civil_format_date(day, buf);
  assert_string_equal(buf, "2027-03-14");
  assert_true(hg_civil_parse_date("2028-02-29", 10, &day));
  const char *bad[] = {"2027-02-29", "2027-13-01", "2027-00-10", "1969-12-31", "2027-3-14",
                       "2027/03/14", "2027-03-1x", "2027-04-31", "+027-03-14"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    day = 42;
    assert_false(hg_civil_parse_date(bad[i], strlen(bad[i]), &day));
    assert_int_equal(day, 42);
  }
  assert_false(hg_civil_parse_date("2027-03-14", 9, &day));
  uint32_t y = 0, m = 0;
  assert_true(hg_civil_parse_month("9999-12", 7, &y, &m));
  assert_int_equal(y, 9999);
  assert_int_equal(m, 12);
  assert_false(hg_civil_parse_month("2027-00", 7, &y, &m));
  assert_false(hg_civil_parse_month("2027-03-", 8, &y, &m));
  /* Every day of 1970..2200 prints as snprintf would and parses back. */
  for (int32_t dd = 0; dd < hg_civil_to_day(2200, 1, 1); dd++) {
    hg_civil_t c = hg_civil_from_day(dd);
    char want[32];
    snprintf(want, sizeof want, "%04d-%02u-%02u", (int)c.year, (unsigned)c.month, (unsigned)c.day);
    hg_civil_format_date(dd, buf);
    assert_string_equal(buf, want);
    int32_t back = -1;
    assert_true(hg_civil_parse_date(buf, 10, &back));
    assert_int_equal(back, dd);
  }
}

static void names_and_symbols(void **state) {
  (void)state;
  char a[8] = "B200";
  assert_true(hg_name_ok(a, sizeof a));
  char full[8] = {'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H'}; /* no NUL inside */
  assert_false(hg_name_ok(full, sizeof full));
  assert_false(hg_name_ok("", 8));
  assert_false(hg_name_ok("B-200", 8));
  assert_true(hg_name_ok("ABCDEFG", 8));
  /* Symbol characters: one rule for commands, listings and snapshots. */
  assert_true(hg_symbol_ok("B200.A.2027-03", 32));
  assert_true(hg_symbol_ok("x_y", 4));
  assert_false(hg_symbol_ok("x_yz", 4)); /* no NUL inside cap */
  assert_false(hg_symbol_ok("", 32));
  assert_false(hg_symbol_ok("B200 A", 32));
  assert_false(hg_symbol_ok("B200/A", 32));
  char prov[32] = "Acme Cloud Inc";
  assert_true(hg_text_ok(prov, sizeof prov));
  assert_false(hg_text_ok("Acme, Inc", 32));
  assert_false(hg_text_ok("say \"hi\"", 32));
  assert_false(hg_text_ok("tab\there", 32));
  char gpu[16], grade[8];
  uint32_t y, m;
  assert_true(hg_symbol_parse("B200.A.2027-03", gpu, sizeof gpu, grade, sizeof grade, &y, &m));
  assert_string_equal(gpu, "B200");
  assert_string_equal(grade, "A");
  assert_int_equal(y, 2027);
  assert_int_equal(m, 3);
  const char *bad[] = {"B200.A.2027-3",    "B200..2027-03",  ".A.2027-03",    "B200.A",
                       "B200.A.2027-03.x", "B200.AB CD.2027-03", "B200.ABCDEFGH.2027-03",
                       "B200.A.1969-12",   "B200.A.2027-13", "B2_0.A.2027-03"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_false(hg_symbol_parse(bad[i], gpu, sizeof gpu, grade, sizeof grade, &y, &m));
  /* Token contracts (settlement/CONTRACT.md 7.3): the class in gpu. */
  bool tok = false;
  assert_true(hg_symbol_parse_product("TOK.OW671B.S.2027-03", &tok, gpu, sizeof gpu, grade,
                                      sizeof grade, &y, &m));
  assert_true(tok);
  assert_string_equal(gpu, "OW671B");
  assert_string_equal(grade, "S");
  assert_int_equal(m, 3);
  assert_true(hg_symbol_parse("TOK.OW671B.S.2027-03", gpu, sizeof gpu, grade, sizeof grade, &y,
                              &m));
  assert_string_equal(gpu, "OW671B");
  /* A GPU named TOK keeps the three-part form. */
  assert_true(hg_symbol_parse_product("TOK.A.2027-03", &tok, gpu, sizeof gpu, grade, sizeof grade,
                                      &y, &m));
  assert_false(tok);
  assert_string_equal(gpu, "TOK");
  assert_true(hg_symbol_parse_product("B200.A.2027-03", &tok, gpu, sizeof gpu, grade,
                                      sizeof grade, &y, &m));
  assert_false(tok);
  const char *bad_tok[] = {"TOK.OW671B.S.2027-3", "TOK..S.2027-03", "TOK.OW671B..2027-03",
                           "TOK.OW671B.S.2027-03.x", "TOK.OW-671B.S.2027-03",
                           "tok.OW671B.S.2027-03", "TOK.OW671B.ABCDEFGH.2027-03"};
  for (size_t i = 0; i < sizeof bad_tok / sizeof bad_tok[0]; i++)
    assert_false(hg_symbol_parse_product(bad_tok[i], &tok, gpu, sizeof gpu, grade, sizeof grade,
                                         &y, &m));
}

static void decimal_parse_cases(void **state) {
  (void)state;
  int64_t v = 7;
  assert_int_equal(hg_decimal_parse("3.4", 3, 3, &v), 0);
  assert_int_equal(v, 3400);
  assert_int_equal(hg_decimal_parse("-0.001", 6, 3, &v), 0);
  assert_int_equal(v, -1);
  assert_int_equal(hg_decimal_parse("12", 2, 0, &v), 0);
  assert_int_equal(v, 12);
  assert_int_equal(hg_decimal_parse("9223372036854775807", 19, 0, &v), 0);
  assert_int_equal(v, INT64_MAX);
  assert_int_equal(hg_decimal_parse("-9223372036854775808", 20, 0, &v), 0);
  assert_true(v == INT64_MIN);
  v = 7;
  assert_int_equal(hg_decimal_parse("9223372036854775808", 19, 0, &v), HG_DECIMAL_RANGE);
  assert_int_equal(hg_decimal_parse("9223372036854775.808", 20, 3, &v), HG_DECIMAL_RANGE);
  assert_int_equal(hg_decimal_parse("1.0001", 6, 3, &v), HG_DECIMAL_PLACES);
  const char *syn[] = {"", "-", ".", "5.", ".5", "1.2.3", "1e3", " 1", "1 ", "+1", "--1"};
  for (size_t i = 0; i < sizeof syn / sizeof syn[0]; i++)
    assert_int_equal(hg_decimal_parse(syn[i], strlen(syn[i]), 3, &v), HG_DECIMAL_SYNTAX);
  assert_int_equal(v, 7);
  /* len bounds the text: the digits after it are not read. */
  assert_int_equal(hg_decimal_parse("1.25xyz", 4, 3, &v), 0);
  assert_int_equal(v, 1250);
}

/* format then parse is the identity for every places and many values,
 * the extremes included; the printed text matches a snprintf model. */
static void decimal_round_trip(void **state) {
  (void)state;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    int places = (int)(x % 10);
    int64_t v = (int64_t)x >> (x % 60);
    if (i == 0) v = INT64_MIN;
    if (i == 1) v = INT64_MAX;
    if (i == 2) v = 0;
    char buf[48];
    int n = hg_decimal_format(v, places, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(buf));
    int64_t back = 0;
    assert_int_equal(hg_decimal_parse(buf, (size_t)n, places, &back), 0);
    assert_true(back == v);
    if (places == 3 && v > -1000000000 && v < 1000000000) {
      char want[48];
      long long a = v < 0 ? -(long long)v : (long long)v;
      snprintf(want, sizeof want, "%s%lld.%03lld", v < 0 ? "-" : "", a / 1000, a % 1000);
      assert_string_equal(buf, want);
    }
  }
  char small[4];
  assert_int_equal(hg_decimal_format(12345, 3, small, sizeof small), -1);
  assert_string_equal(small, "");
}

static void log_level_names(void **state) {
  (void)state;
  assert_string_equal(hg_log_level_name(HG_LOG_DEBUG), "debug");
  assert_string_equal(hg_log_level_name(HG_LOG_ERROR), "error");
  assert_string_equal(hg_log_level_name(9), "?");
}

/* Capacities double from first (or the current one) to hold need; the
 * items kept survive; a size past SIZE_MAX is refused with the array and
 * its capacity untouched. */
static void grow_doubles_and_refuses_overflow(void **state) {
  (void)state;
  size_t cap = 0;
  uint32_t *v = hg_grow(NULL, &cap, sizeof *v, 1, 16);
  assert_non_null(v);
  assert_int_equal(cap, 16);
  for (uint32_t i = 0; i < 16; i++) v[i] = i;
  assert_ptr_equal(hg_grow(v, &cap, sizeof *v, 16, 16), v); /* room already */
  assert_int_equal(cap, 16);
  uint32_t *w = hg_grow(v, &cap, sizeof *v, 17, 16);
  assert_non_null(w);
  assert_int_equal(cap, 32);
  v = w;
  w = hg_grow(v, &cap, sizeof *v, 200, 16);
  assert_non_null(w);
  assert_int_equal(cap, 256);
  v = w;
  for (uint32_t i = 0; i < 16; i++) assert_int_equal(v[i], i);
  /* More items than size_t can count bytes for: refused, nothing lost. */
  assert_null(hg_grow(v, &cap, sizeof *v, SIZE_MAX / sizeof *v + 1, 16));
  assert_int_equal(cap, 256);
  /* A capacity that cannot double again: refused. */
  assert_null(hg_grow(v, &cap, 1, SIZE_MAX, 16));
  assert_int_equal(cap, 256);
  assert_int_equal(v[15], 15);
  free(v);
  /* first 0: starts at one item. */
  cap = 0;
  v = hg_grow(NULL, &cap, sizeof *v, 3, 0);
  assert_non_null(v);
  assert_int_equal(cap, 4);
  free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(civil_matches_a_day_by_day_walk),
      cmocka_unit_test(civil_leap_rules),
      cmocka_unit_test(civil_text_forms),
      cmocka_unit_test(names_and_symbols),
      cmocka_unit_test(decimal_parse_cases),
      cmocka_unit_test(decimal_round_trip),
      cmocka_unit_test(log_level_names),
      cmocka_unit_test(grow_doubles_and_refuses_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
