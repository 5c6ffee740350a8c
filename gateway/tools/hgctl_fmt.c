/*
 * hgctl_fmt.c - decimal USD in and out of hgctl without floating point.
 *
 * A decimal string is read digit by digit into an int64 scaled by
 * 10^places, with overflow checked at every step; printing divides by the
 * same power of ten. The two are exact inverses for every value the wire can
 * carry, so what hgctl prints can be typed back.
 */
#include "hgctl_fmt.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

static const int64_t POW10[] = {1,      10,      100,      1000,      10000,
                                100000, 1000000, 10000000, 100000000, 1000000000};

int hgctl_decimal_parse(const char *s, int places, int allow_zero, int64_t *out) {
  if (s == NULL || places < 0 || places > 9) return HGCTL_DEC_SYNTAX;
  const char *p = s;
  bool neg = *p == '-';
  if (neg) p++;
  /* Magnitude as a negative number, so INT64_MIN fits while digits arrive. */
  int64_t v = 0;
  int int_digits = 0, frac_digits = 0;
  bool range = false;
  for (; *p >= '0' && *p <= '9'; p++, int_digits++) {
    int d = *p - '0';
    if (v < (INT64_MIN + d) / 10) range = true;
    else v = v * 10 - d;
  }
  if (*p == '.') {
    p++;
    for (; *p >= '0' && *p <= '9'; p++, frac_digits++) {
      if (frac_digits >= places) continue; /* counted, refused below */
      int d = *p - '0';
      if (v < (INT64_MIN + d) / 10) range = true;
      else v = v * 10 - d;
    }
    if (frac_digits == 0) return HGCTL_DEC_SYNTAX;
  }
  if (*p != '\0' || int_digits == 0) return HGCTL_DEC_SYNTAX;
  if (frac_digits > places) return HGCTL_DEC_PLACES;
  for (int k = frac_digits; k < places && !range; k++) {
    if (v < INT64_MIN / 10) range = true;
    else v *= 10;
  }
  if (range) return HGCTL_DEC_RANGE;
  if (!neg && v == INT64_MIN) return HGCTL_DEC_RANGE;
  int64_t r = neg ? v : -v;
  if (r < 0 || (r == 0 && !allow_zero)) return HGCTL_DEC_NEGATIVE;
  *out = r;
  return 0;
}

const char *hgctl_decimal_error(int code, int places) {
  switch (code) {
  case HGCTL_DEC_PLACES:
    return places == 3 ? "has more than 3 decimals: prices are on a tick of 0.001 USD per "
                         "GPU-hour"
                       : "has more decimals than micro-USD (6)";
  case HGCTL_DEC_RANGE: return "is too large";
  case HGCTL_DEC_NEGATIVE: return "must be above zero";
  default:
    return places == 3 ? "is not a price in USD per GPU-hour (e.g. 3.42)"
                       : "is not an amount in USD (e.g. 1250.50)";
  }
}

char *hgctl_fmt_decimal(int64_t v, int places, char *buf) {
  if (places <= 0 || places > 9) {
    snprintf(buf, HGCTL_FMT_LEN, "%" PRId64, v);
    return buf;
  }
  uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  uint64_t p = (uint64_t)POW10[places];
  snprintf(buf, HGCTL_FMT_LEN, "%s%" PRIu64 ".%0*" PRIu64, v < 0 ? "-" : "", a / p, places, a % p);
  return buf;
}

char *hgctl_fmt_price(int64_t ticks, char *buf) { return hgctl_fmt_decimal(ticks, 3, buf); }

char *hgctl_fmt_money(int64_t micro, char *buf) {
  if (micro % 10000 == 0) return hgctl_fmt_decimal(micro / 10000, 2, buf);
  return hgctl_fmt_decimal(micro, 6, buf);
}

char *hgctl_fmt_time(uint64_t ns, char *buf) {
  time_t sec = (time_t)(ns / 1000000000u);
  struct tm tm;
  if (gmtime_r(&sec, &tm) == NULL) {
    snprintf(buf, HGCTL_FMT_LEN, "%" PRIu64 "ns", ns);
    return buf;
  }
  snprintf(buf, HGCTL_FMT_LEN, "%04d-%02d-%02dT%02d:%02d:%02d.%09" PRIu64 "Z", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ns % 1000000000u);
  return buf;
}
