/*
 * civil.c - day numbers and calendar dates (hourglass/civil.h).
 *
 * The conversion counts in years that begin on March 1st, so the leap day is
 * the last day of its year and each month's offset within the year is one
 * linear formula: a March-based year y has 365 days plus the Gregorian leap
 * rule's y/4 - y/100 + y/400 before it, counted from a 400-year era.
 */
#include "hourglass/civil.h"

/* Day number of 0000-03-01 in the March-based count below. */
#define DAYS_0000_03_01_TO_EPOCH 719468

bool hg_civil_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

uint32_t hg_civil_month_days(int64_t y, uint32_t m) {
  static const uint8_t len[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12) return 0;
  return m == 2 && hg_civil_leap(y) ? 29u : len[m - 1];
}

/* Floor division by a positive divisor. */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int32_t hg_civil_to_day(int64_t y, uint32_t m, uint32_t d) {
  /* January and February belong to the previous March-based year. */
  int64_t my = m <= 2 ? y - 1 : y;
  int64_t mm = m <= 2 ? (int64_t)m + 9 : (int64_t)m - 3; /* 0 = March .. 11 = February */
  int64_t era = floor_div(my, 400);
  int64_t yoe = my - era * 400;                         /* 0..399 */
  int64_t doy = (153 * mm + 2) / 5 + (int64_t)d - 1;    /* 0..365 */
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;  /* 0..146096 */
  return (int32_t)(era * 146097 + doe - DAYS_0000_03_01_TO_EPOCH);
}

hg_civil_t hg_civil_from_day(int32_t day) {
  int64_t z = (int64_t)day + DAYS_0000_03_01_TO_EPOCH;
  int64_t era = floor_div(z, 146097);
  int64_t doe = z - era * 146097;                                      /* 0..146096 */
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* 0..399 */
  int64_t doy = doe - (yoe * 365 + yoe / 4 - yoe / 100);               /* 0..365 */
  int64_t mm = (5 * doy + 2) / 153;                                    /* 0..11 */
  hg_civil_t c;
  c.day = (uint32_t)(doy - (153 * mm + 2) / 5 + 1);
  c.month = (uint32_t)(mm < 10 ? mm + 3 : mm - 9);
  c.year = (int32_t)(yoe + era * 400 + (c.month <= 2));
  return c;
}

static bool digits(const char *s, size_t n, uint32_t *out) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (uint32_t)(s[i] - '0');
  }
  *out = v;
  return true;
}

bool hg_civil_parse_month(const char *s, size_t len, uint32_t *year, uint32_t *month) {
  uint32_t y, m;
  if (s == NULL || len != 7 || s[4] != '-' || !digits(s, 4, &y) || !digits(s + 5, 2, &m))
    return false;
  if (y < HG_CIVIL_YEAR_MIN || y > HG_CIVIL_YEAR_MAX || m < 1 || m > 12) return false;
  *year = y;
  *month = m;
  return true;
}

bool hg_civil_parse_date(const char *s, size_t len, int32_t *day) {
  uint32_t y, m, d;
  if (s == NULL || len != 10 || s[7] != '-' || !hg_civil_parse_month(s, 7, &y, &m) ||
      !digits(s + 8, 2, &d))
    return false;
  if (d < 1 || d > hg_civil_month_days(y, m)) return false;
  *day = hg_civil_to_day(y, m, d);
  return true;
}

void hg_civil_format_date(int32_t day, char out[11]) {
  hg_civil_t c = hg_civil_from_day(day);
  uint32_t y = (uint32_t)(((c.year % 10000) + 10000) % 10000);
  out[0] = (char)('0' + y / 1000);
  out[1] = (char)('0' + y / 100 % 10);
  out[2] = (char)('0' + y / 10 % 10);
  out[3] = (char)('0' + y % 10);
  out[4] = '-';
  out[5] = (char)('0' + c.month / 10);
  out[6] = (char)('0' + c.month % 10);
  out[7] = '-';
  out[8] = (char)('0' + c.day / 10);
  out[9] = (char)('0' + c.day % 10);
  out[10] = '\0';
}
