/*
 * hgctl_fmt.c - decimal USD in and out of hgctl without floating point.
 *
 * Decimal text goes through base's exact decimals (hourglass/decimal.h):
 * parsing and printing are exact inverses for every value the wire can
 * carry, so what hgctl prints can be typed back. hgctl adds its own limits
 * (at most 9 places, above zero) and its error texts.
 */
#include "hgctl_fmt.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hourglass/decimal.h"

int hgctl_decimal_parse(const char *s, int places, int allow_zero, int64_t *out) {
  if (s == NULL || places < 0 || places > 9) return HGCTL_DEC_SYNTAX;
  int64_t v;
  switch (hg_decimal_parse(s, strlen(s), places, &v)) {
  case 0: break;
  case HG_DECIMAL_PLACES: return HGCTL_DEC_PLACES;
  case HG_DECIMAL_RANGE: return HGCTL_DEC_RANGE;
  default: return HGCTL_DEC_SYNTAX;
  }
  if (v < 0 || (v == 0 && !allow_zero)) return HGCTL_DEC_NEGATIVE;
  *out = v;
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
  if (places < 0 || places > 9 || hg_decimal_format(v, places, buf, HGCTL_FMT_LEN) < 0)
    snprintf(buf, HGCTL_FMT_LEN, "%" PRId64, v);
  return buf;
}

char *hgctl_fmt_price(int64_t ticks, char *buf) { return hgctl_fmt_decimal(ticks, 3, buf); }

char *hgctl_fmt_money(int64_t micro, char *buf) {
  if (micro % 10000 == 0) return hgctl_fmt_decimal(micro / 10000, 2, buf);
  return hgctl_fmt_decimal(micro, 6, buf);
}

char *hgctl_fmt_price_raw(int64_t ticks, bool raw, char *buf) {
  if (!raw) return hgctl_fmt_price(ticks, buf);
  snprintf(buf, HGCTL_FMT_LEN, "%" PRId64, ticks);
  return buf;
}

char *hgctl_fmt_money_raw(int64_t micro, bool raw, char *buf) {
  if (!raw) return hgctl_fmt_money(micro, buf);
  snprintf(buf, HGCTL_FMT_LEN, "%" PRId64, micro);
  return buf;
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
