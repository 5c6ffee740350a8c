/* Hedger analytics: sizing, CSV series, hedge ratio and the token conversion,
 * each checked against values computed by hand in the comments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/hedge.h"
#include "hourglass/index.h"

static void test_size_rounding(void **state) {
  (void)state;
  hg_hedge_month_t m;
  /* 64 GPUs x 500 h = 32,000 GPU-hours = 32 contracts exactly. */
  assert_int_equal(hg_hedge_size(64, 500, 2027, 3, HG_HEDGE_ROUND_NEAREST, &m), 0);
  assert_int_equal(m.exposure, 32000);
  assert_int_equal(m.contracts, 32);
  assert_int_equal(m.residual, 0);
  /* 10 x 730 = 7,300: nearest 7 (300 unhedged), up 8 (700 over), down 7. */
  assert_int_equal(hg_hedge_size(10, 730, 2027, 3, HG_HEDGE_ROUND_NEAREST, &m), 0);
  assert_int_equal(m.contracts, 7);
  assert_int_equal(m.hedged, 7000);
  assert_int_equal(m.residual, 300);
  assert_int_equal(hg_hedge_size(10, 730, 2027, 3, HG_HEDGE_ROUND_UP, &m), 0);
  assert_int_equal(m.contracts, 8);
  assert_int_equal(m.residual, -700);
  assert_int_equal(hg_hedge_size(10, 730, 2027, 3, HG_HEDGE_ROUND_DOWN, &m), 0);
  assert_int_equal(m.contracts, 7);
  /* 3 x 500 = 1,500: exactly half rounds up to 2, 500 over-hedged. */
  assert_int_equal(hg_hedge_size(3, 500, 2027, 4, HG_HEDGE_ROUND_NEAREST, &m), 0);
  assert_int_equal(m.contracts, 2);
  assert_int_equal(m.residual, -500);
  /* 3 x 499 = 1,497: below half, 1 contract, 497 unhedged. */
  assert_int_equal(hg_hedge_size(3, 499, 2027, 4, HG_HEDGE_ROUND_NEAREST, &m), 0);
  assert_int_equal(m.contracts, 1);
  assert_int_equal(m.residual, 497);
}

static void test_size_ratio(void **state) {
  (void)state;
  hg_hedge_ratio_size_t z;
  /* 7,300 GPU-hours at ratio 0.85 = 6,205 GPU-hours: 6.205 contracts ->
   * nearest 6 (205 unhedged), up 7 (795 over), down 6. */
  assert_int_equal(hg_hedge_size_ratio(7300, 850000, HG_HEDGE_ROUND_NEAREST, &z), 0);
  assert_int_equal(z.target, 6205000000);
  assert_int_equal(z.contracts, 6);
  assert_int_equal(z.hedged, 6000);
  assert_int_equal(z.residual, 205000000);
  assert_int_equal(hg_hedge_size_ratio(7300, 850000, HG_HEDGE_ROUND_UP, &z), 0);
  assert_int_equal(z.contracts, 7);
  assert_int_equal(z.residual, -795000000);
  assert_int_equal(hg_hedge_size_ratio(7300, 850000, HG_HEDGE_ROUND_DOWN, &z), 0);
  assert_int_equal(z.contracts, 6);
  /* 1,000 GPU-hours at 0.5 = 500: exactly half a contract rounds up to 1,
   * 500 over-hedged; at 0.499999 it rounds to 0, all of it unhedged. */
  assert_int_equal(hg_hedge_size_ratio(1000, 500000, HG_HEDGE_ROUND_NEAREST, &z), 0);
  assert_int_equal(z.contracts, 1);
  assert_int_equal(z.residual, -500000000);
  assert_int_equal(hg_hedge_size_ratio(1000, 499999, HG_HEDGE_ROUND_NEAREST, &z), 0);
  assert_int_equal(z.contracts, 0);
  assert_int_equal(z.residual, 499999000);
  /* 999,999 GPU-hours x 1.000001 = 999,999.999999: 1,000 contracts, one
   * millionth of a GPU-hour over-hedged, kept exactly. */
  assert_int_equal(hg_hedge_size_ratio(999999, 1000001, HG_HEDGE_ROUND_NEAREST, &z), 0);
  assert_int_equal(z.target, 999999999999);
  assert_int_equal(z.contracts, 1000);
  assert_int_equal(z.residual, -1);
  /* Refusals: ratio 0 or above 10, a negative exposure, an unknown
   * rounding, a target beyond int64 (out untouched). */
  memset(&z, 0x5a, sizeof z);
  hg_hedge_ratio_size_t before = z;
  assert_int_equal(hg_hedge_size_ratio(1000, 0, HG_HEDGE_ROUND_NEAREST, &z), HG_EINVAL);
  assert_int_equal(hg_hedge_size_ratio(1000, 10000001, HG_HEDGE_ROUND_NEAREST, &z), HG_EINVAL);
  assert_int_equal(hg_hedge_size_ratio(-1, 1000000, HG_HEDGE_ROUND_NEAREST, &z), HG_EINVAL);
  assert_int_equal(hg_hedge_size_ratio(1000, 1000000, 3, &z), HG_EINVAL);
  assert_int_equal(hg_hedge_size_ratio(INT64_MAX / 2, 10000000, HG_HEDGE_ROUND_NEAREST, &z),
                   HG_EOVERFLOW);
  assert_memory_equal(&z, &before, sizeof z);
}

static void test_size_full_month_and_errors(void **state) {
  (void)state;
  hg_hedge_month_t m;
  /* February 2028 is a leap month: 29 x 24 = 696 h; 8 GPUs = 5,568 -> 6, -432. */
  assert_int_equal(hg_hedge_size(8, 0, 2028, 2, HG_HEDGE_ROUND_NEAREST, &m), 0);
  assert_int_equal(m.hours_per_gpu, 696);
  assert_int_equal(m.exposure, 5568);
  assert_int_equal(m.contracts, 6);
  assert_int_equal(m.residual, -432);
  /* February 2027 has 672 hours; 673 per GPU is impossible. */
  assert_int_equal(hg_hedge_size(1, 672, 2027, 2, 0, &m), 0);
  assert_int_equal(hg_hedge_size(1, 673, 2027, 2, 0, &m), HG_ERANGE);
  assert_int_equal(hg_hedge_size(0, 10, 2027, 2, 0, &m), HG_EINVAL);
  assert_int_equal(hg_hedge_size(1, -1, 2027, 2, 0, &m), HG_EINVAL);
  assert_int_equal(hg_hedge_size(1, 1, 2027, 13, 0, &m), HG_EINVAL);
  assert_int_equal(hg_hedge_size(1, 1, 2027, 1, 7, &m), HG_EINVAL);
  assert_int_equal(hg_hedge_size(INT64_MAX / 100, 744, 2027, 1, 0, &m), HG_EOVERFLOW);

  unsigned y, mo;
  assert_int_equal(hg_hedge_month_parse("2027-03", 7, &y, &mo), 0);
  assert_int_equal(y, 2027);
  assert_int_equal(mo, 3);
  assert_int_equal(hg_hedge_month_parse("2027-13", 7, &y, &mo), HG_EPARSE);
  assert_int_equal(hg_hedge_month_parse("2027-3", 6, &y, &mo), HG_EPARSE);
  assert_int_equal(hg_hedge_month_parse("2027/03", 7, &y, &mo), HG_EPARSE);
}

static void test_series_parse(void **state) {
  (void)state;
  hg_hedge_obs_t *v = NULL;
  size_t n = 0;
  hg_hedge_csv_error_t e;
  const char *ok = "day,price\r\n2027-03-01,2.5\r\n2027-03-02,2.000001\n";
  assert_int_equal(hg_hedge_rent_parse(ok, strlen(ok), &v, &n, &e), 0);
  assert_int_equal(n, 2);
  assert_int_equal(v[0].value, 2500000);
  assert_int_equal(v[1].value, 2000001);
  int32_t d;
  hg_index_day_parse("2027-03-02", 10, &d);
  assert_int_equal(v[1].day, d);
  free(v);

  struct {
    const char *csv;
    uint32_t line;
    int column;
  } bad[] = {
      {"", 1, -1},
      {"day,value\n2027-03-01,2\n", 1, -1},
      {"day,price\n", 2, -1},
      {"day,price\n2027-03-01,2\n2027-03-01,3\n", 3, 0},
      {"day,price\n2027-03-02,2\n2027-03-01,3\n", 3, 0},
      {"day,price\n2027-02-30,2\n", 2, 0},
      {"day,price\n2027-03-01,2.1234567\n", 2, 1},
      {"day,price\n2027-03-01,0\n", 2, 1},
      {"day,price\n2027-03-01,-1\n", 2, 1},
      {"day,price\n2027-03-01,2,3\n", 2, -1},
      {"day,price\n2027-03-01,2\n\n2027-03-02,2\n", 3, -1},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    v = NULL;
    memset(&e, 0, sizeof e);
    assert_int_equal(hg_hedge_rent_parse(bad[k].csv, strlen(bad[k].csv), &v, &n, &e), HG_EPARSE);
    assert_null(v);
    assert_int_equal(e.line, bad[k].line);
    assert_int_equal(e.column, bad[k].column);
    assert_non_null(e.what);
  }

  const char *fx = "day,value,status\n2027-03-01,1.5,FINAL\n2027-03-02,,NO_FIX\n"
                   "2027-03-03,1.6,PROVISIONAL";
  assert_int_equal(hg_hedge_fixings_parse(fx, strlen(fx), &v, &n, &e), 0);
  assert_int_equal(n, 3);
  assert_int_equal(v[0].status, HG_HEDGE_FINAL);
  assert_int_equal(v[1].status, HG_HEDGE_NO_FIX);
  assert_int_equal(v[1].value, 0);
  assert_int_equal(v[2].status, HG_HEDGE_PROVISIONAL);
  assert_int_equal(v[2].value, 1600000);
  free(v);
  const char *fbad1 = "day,value,status\n2027-03-01,1.5,CARRIED\n";
  assert_int_equal(hg_hedge_fixings_parse(fbad1, strlen(fbad1), &v, &n, &e), HG_EPARSE);
  assert_int_equal(e.column, 2);
  const char *fbad2 = "day,value,status\n2027-03-01,1.5,NO_FIX\n";
  assert_int_equal(hg_hedge_fixings_parse(fbad2, strlen(fbad2), &v, &n, &e), HG_EPARSE);
  assert_int_equal(e.column, 1);
}

static hg_hedge_obs_t obs(const char *day, int64_t micro, uint8_t status) {
  hg_hedge_obs_t o = {0};
  hg_index_day_parse(day, 10, &o.day);
  o.value = micro;
  o.status = status;
  return o;
}

static void test_ratio_hand_case(void **state) {
  (void)state;
  /* Common days 01, 02, 04, 05 (03 is NO_FIX in the index, 06 is rent only,
   * 07 index only). Rent 2.000 2.100 2.050 2.250, index 1.000 1.100 1.000
   * 1.200: changes dS = .10 -.05 .20, dF = .10 -.10 .20 USD.
   * In units of 0.01 USD: Sxy = 55 - 25*20/3 = 115/3, Sff = 60 - 400/3 * ... :
   * sum dF^2 = 600, (sum dF)^2 / 3 = 400/3 -> Sff = 1400/3; sum dS^2 = 525,
   * (sum dS)^2 / 3 = 625/3 -> Sss = 950/3. ratio = Sxy / Sff = 115 / 140 =
   * 0.8214285714; correlation = 115 / sqrt(950 x 140) = 115 / sqrt(133000)
   * ... = 11.5 / sqrt(133) = 0.9971764; effectiveness = 132.25 / 133 =
   * 0.9943609; rent_vol = sqrt(950/3/2) x 0.01 = 0.1258306,
   * index_vol = sqrt(1400/6) x 0.01 = 0.1527525. */
  hg_hedge_obs_t rent[] = {obs("2027-03-01", 2000000, 0), obs("2027-03-02", 2100000, 0),
                           obs("2027-03-03", 9900000, 0), obs("2027-03-04", 2050000, 0),
                           obs("2027-03-05", 2250000, 0), obs("2027-03-06", 7000000, 0)};
  hg_hedge_obs_t idx[] = {obs("2027-03-01", 1000000, 2), obs("2027-03-02", 1100000, 1),
                          obs("2027-03-03", 0, 3),       obs("2027-03-04", 1000000, 2),
                          obs("2027-03-05", 1200000, 2), obs("2027-03-07", 5000000, 2)};
  hg_hedge_ratio_t r;
  assert_int_equal(hg_hedge_ratio(rent, 6, idx, 6, &r), 0);
  assert_int_equal(r.days, 4);
  assert_int_equal(r.changes, 3);
  assert_true(fabs(r.ratio - 115.0 / 140.0) < 1e-12);
  assert_true(fabs(r.correlation - 11.5 / sqrt(133.0)) < 1e-12);
  assert_true(fabs(r.effectiveness - 132.25 / 133.0) < 1e-12);
  assert_true(fabs(r.rent_vol - 0.01 * sqrt(950.0 / 6.0)) < 1e-12);
  assert_true(fabs(r.index_vol - 0.01 * sqrt(1400.0 / 6.0)) < 1e-12);
  assert_string_equal(r.why, "");

  /* Perfectly proportional rent (2 x the index changes): ratio 2, rho 1. */
  hg_hedge_obs_t r2[] = {obs("2027-03-01", 3000000, 0), obs("2027-03-02", 3200000, 0),
                         obs("2027-03-04", 3000000, 0), obs("2027-03-05", 3400000, 0)};
  assert_int_equal(hg_hedge_ratio(r2, 4, idx, 6, &r), 0);
  assert_true(fabs(r.ratio - 2.0) < 1e-12);
  assert_true(fabs(r.correlation - 1.0) < 1e-12);
}

static void test_ratio_errors(void **state) {
  (void)state;
  hg_hedge_obs_t rent[] = {obs("2027-03-01", 2000000, 0), obs("2027-03-02", 2100000, 0),
                           obs("2027-03-03", 2300000, 0)};
  hg_hedge_obs_t flat[] = {obs("2027-03-01", 1000000, 2), obs("2027-03-02", 1000000, 2),
                           obs("2027-03-03", 1000000, 2)};
  hg_hedge_obs_t two[] = {obs("2027-03-01", 1000000, 2), obs("2027-03-03", 1100000, 2)};
  hg_hedge_ratio_t r;
  assert_int_equal(hg_hedge_ratio(rent, 3, two, 2, &r), HG_ERANGE);
  assert_int_equal(r.days, 2);
  assert_true(strlen(r.why) > 0);
  assert_int_equal(hg_hedge_ratio(rent, 3, flat, 3, &r), HG_ESTATE);
  assert_non_null(strstr(r.why, "index"));
  assert_int_equal(hg_hedge_ratio(flat, 3, rent, 3, &r), HG_ESTATE);
  assert_non_null(strstr(r.why, "rent"));
  assert_int_equal(hg_hedge_ratio(NULL, 3, rent, 3, &r), HG_EINVAL);
}

static hg_hedge_decimal_t dec(const char *s) {
  hg_hedge_decimal_t d = {0};
  assert_int_equal(hg_hedge_decimal_parse(s, strlen(s), &d), 0);
  return d;
}

static void test_decimal_parse(void **state) {
  (void)state;
  hg_hedge_decimal_t d = dec("0.05");
  assert_int_equal(d.mant, 5);
  assert_int_equal(d.scale, 2);
  d = dec("1200");
  assert_int_equal(d.mant, 1200);
  assert_int_equal(d.scale, 0);
  d = dec("2.500");
  assert_int_equal(d.mant, 2500);
  assert_int_equal(d.scale, 3);
  assert_int_equal(hg_hedge_decimal_parse("0", 1, &d), HG_ERANGE);
  assert_int_equal(hg_hedge_decimal_parse("0.0000000000001", 15, &d), HG_ERANGE); /* 13 places */
  assert_int_equal(hg_hedge_decimal_parse("1234567890123456", 16, &d), HG_ERANGE);
  assert_int_equal(hg_hedge_decimal_parse("1.2.3", 5, &d), HG_EPARSE);
  assert_int_equal(hg_hedge_decimal_parse("-1", 2, &d), HG_EPARSE);
  assert_int_equal(hg_hedge_decimal_parse("1e3", 3, &d), HG_EPARSE);
  assert_int_equal(hg_hedge_decimal_parse("5.", 2, &d), HG_EPARSE);
  assert_int_equal(hg_hedge_decimal_parse("", 0, &d), HG_EPARSE);
}

static void test_convert(void **state) {
  (void)state;
  hg_hedge_quote_t q;
  /* 2.50 USD/GPU-h at 1,000 tok/s: 2.5 / 3.6e6 x 1e6 = 2.5/3.6 = 0.69444... */
  hg_hedge_decimal_t p = dec("2.50"), t = dec("1000");
  assert_int_equal(hg_hedge_usd_per_mtok(&p, &t, 6, &q), 0);
  assert_string_equal(q.exact, "0.69(4)");
  assert_string_equal(q.rounded, "0.694444");
  assert_int_equal(q.terminating, 0);
  assert_int_equal(hg_hedge_usd_per_mtok(&p, &t, 2, &q), 0);
  assert_string_equal(q.rounded, "0.69");
  /* 1.8 at 1,000 tok/s is exactly 0.5; at 0 places half rounds up to 1. */
  p = dec("1.8");
  assert_int_equal(hg_hedge_usd_per_mtok(&p, &t, 0, &q), 0);
  assert_string_equal(q.exact, "0.5");
  assert_string_equal(q.rounded, "1");
  assert_int_equal(q.terminating, 1);
  /* 0.9 at 1 tok/s: 0.9 / 3600 x 1e6 = 250. */
  p = dec("0.9");
  t = dec("1");
  assert_int_equal(hg_hedge_usd_per_mtok(&p, &t, 3, &q), 0);
  assert_string_equal(q.exact, "250");
  assert_string_equal(q.rounded, "250.000");
  /* 3 at 7 tok/s: 3e6 / 25200 = 2500/21 = 119.047619 047619 ... */
  p = dec("3");
  t = dec("7");
  assert_int_equal(hg_hedge_usd_per_mtok(&p, &t, 5, &q), 0);
  assert_string_equal(q.exact, "119.(047619)");
  assert_string_equal(q.rounded, "119.04762");
  /* Fractional throughput: 2.5 at 1000.5 tok/s = 2.5e6 / 3601800 =
   * 12500/18009, whose repeating block is longer than 64 digits: no exact
   * form is printed, only the rounded one. */
  p = dec("2.5");
  t = dec("1000.5");
  assert_int_equal(hg_hedge_usd_per_mtok(&p, &t, 9, &q), 0);
  assert_string_equal(q.exact, "");
  assert_string_equal(q.rounded, "0.694097396"); /* 0.694097395 746... */

  /* Reverse: 0.5 USD per M tokens at 1,000 tok/s = 0.5 x 1000 x 3600 / 1e6 = 1.8. */
  hg_hedge_decimal_t x = dec("0.5");
  t = dec("1000");
  assert_int_equal(hg_hedge_usd_per_gpu_hour(&x, &t, 3, &q), 0);
  assert_string_equal(q.exact, "1.8");
  assert_string_equal(q.rounded, "1.800");
  /* 1.1106 at 250 tok/s = 1.1106 x 0.9 = 0.99954 -> 1.000 at 3 places (carry). */
  x = dec("1.1106");
  t = dec("250");
  assert_int_equal(hg_hedge_usd_per_gpu_hour(&x, &t, 3, &q), 0);
  assert_string_equal(q.exact, "0.99954");
  assert_string_equal(q.rounded, "1.000");
  assert_int_equal(hg_hedge_usd_per_gpu_hour(&(hg_hedge_decimal_t){0, 0}, &t, 3, &q), HG_EINVAL);
  assert_int_equal(hg_hedge_usd_per_mtok(&p, &t, 19, &q), HG_EINVAL);
}

/* settlement/CONTRACT.md section 6.13: same rent, 200 vs 300 tokens/s. */
static void test_margin_hand_case(void **state) {
  (void)state;
  hg_hedge_margin_t m;
  assert_int_equal(hg_hedge_margin(100, 0, 2027, 3, 1080000, 3400000, 4000000, &m), 0);
  assert_int_equal(m.gpu.exposure, 74400);
  assert_int_equal(m.gpu.contracts, 74);
  assert_int_equal(m.gpu.residual, 400);
  assert_int_equal(m.tokens, INT64_C(80352000000));
  assert_int_equal(m.token_contracts, 80);
  assert_int_equal(m.token_residual, INT64_C(352000000));
  assert_int_equal(m.revenue_per_gpu_hour, 4320000);
  assert_int_equal(m.margin_per_gpu_hour, 920000);
  assert_int_equal(m.margin_month, INT64_C(68448000000));
  assert_int_equal(hg_hedge_margin(100, 0, 2027, 3, 720000, 3400000, 4000000, &m), 0);
  assert_int_equal(m.token_contracts, 54); /* 53.568 rounds up */
  assert_int_equal(m.token_residual, -INT64_C(432000000));
  assert_int_equal(m.margin_per_gpu_hour, -520000);
  assert_int_equal(m.margin_month, -INT64_C(38688000000));
  /* Exactly half a token contract rounds up: 1 GPU x 1 hour x 5 x 10^8. */
  assert_int_equal(hg_hedge_margin(1, 1, 2027, 3, 500000000, 0, 0, &m), 0);
  assert_int_equal(m.token_contracts, 1);
  assert_int_equal(hg_hedge_margin(1, 1, 2027, 3, 499999999, 0, 0, &m), 0);
  assert_int_equal(m.token_contracts, 0);
  /* Per-hour revenue rounds half up; the month rounds once from the exact
   * product: 1 micro-USD per million x 500,000 tokens = 0.5 -> 1 per hour,
   * and 744 hours x 0.5 = 372 for the month (not 744 x 1). */
  int64_t rev, mar;
  assert_int_equal(hg_hedge_margin_per_gpu_hour(1, 500000, 0, &rev, &mar), 0);
  assert_int_equal(rev, 1);
  assert_int_equal(hg_hedge_margin(1, 0, 2027, 3, 500000, 0, 1, &m), 0);
  assert_int_equal(m.revenue_per_gpu_hour, 1);
  assert_int_equal(m.margin_month, 372);
  /* Errors change nothing. */
  memset(&m, 0x5a, sizeof m);
  hg_hedge_margin_t before = m;
  assert_int_equal(hg_hedge_margin(100, 0, 2027, 3, 0, 1, 1, &m), HG_EINVAL);
  assert_int_equal(hg_hedge_margin(100, 0, 2027, 3, 1, -1, 1, &m), HG_EINVAL);
  assert_int_equal(hg_hedge_margin(0, 0, 2027, 3, 1, 1, 1, &m), HG_EINVAL);
  assert_int_equal(hg_hedge_margin(1, 745, 2027, 3, 1, 1, 1, &m), HG_ERANGE);
  assert_int_equal(hg_hedge_margin(INT64_MAX / 744, 0, 2027, 3, 1000000, 0, 0, &m), HG_EOVERFLOW);
  /* The exposure fits int64 but rounding up to whole contracts would not:
   * (INT64_MAX / 744) x 744 GPU-hours end in 800, more than half a contract. */
  hg_hedge_month_t hm;
  assert_int_equal(hg_hedge_size(INT64_MAX / 744, 0, 2027, 3, HG_HEDGE_ROUND_NEAREST, &hm),
                   HG_EOVERFLOW);
  assert_int_equal(hg_hedge_size(INT64_MAX / 744, 0, 2027, 3, HG_HEDGE_ROUND_DOWN, &hm), 0);
  assert_int_equal(hm.contracts, (INT64_MAX / 744) * 744 / 1000);
  assert_memory_equal(&m, &before, sizeof m);
  assert_int_equal(hg_hedge_margin_per_gpu_hour(1, 1, 0, NULL, &mar), HG_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_rounding),     cmocka_unit_test(test_size_full_month_and_errors),
      cmocka_unit_test(test_size_ratio),
      cmocka_unit_test(test_series_parse),      cmocka_unit_test(test_ratio_hand_case),
      cmocka_unit_test(test_ratio_errors),      cmocka_unit_test(test_decimal_parse),
      cmocka_unit_test(test_convert),           cmocka_unit_test(test_margin_hand_case),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
