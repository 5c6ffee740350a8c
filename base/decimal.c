/*
 * decimal.c - exact decimal text (hourglass/decimal.h).
 *
 * The value is accumulated as a negative number, so INT64_MIN's magnitude
 * fits while the digits arrive; the sign is applied at the end.
 */
#include "hourglass/decimal.h"

#include <stdbool.h>

/* v * 10 - d into *v, or false when it would pass INT64_MIN. */
static bool push_digit(int64_t *v, int d) {
  if (*v < (INT64_MIN + d) / 10) return false;
  *v = *v * 10 - d;
  return true;
}

int hg_decimal_parse(const char *s, size_t len, int places, int64_t *out) {
  if (s == NULL || places < 0 || places > HG_DECIMAL_PLACES_MAX) return HG_DECIMAL_SYNTAX;
  size_t i = 0;
  bool neg = len > 0 && s[0] == '-';
  if (neg) i++;
  int64_t v = 0;
  int int_digits = 0, frac_digits = 0;
  bool range = false;
  for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, int_digits++)
    if (!range && !push_digit(&v, s[i] - '0')) range = true;
  if (i < len && s[i] == '.') {
    i++;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, frac_digits++)
      if (frac_digits < places && !range && !push_digit(&v, s[i] - '0')) range = true;
    if (frac_digits == 0) return HG_DECIMAL_SYNTAX;
  }
  if (i != len || int_digits == 0) return HG_DECIMAL_SYNTAX;
  if (frac_digits > places) return HG_DECIMAL_PLACES;
  for (int k = frac_digits; k < places && !range; k++)
    if (!push_digit(&v, 0)) range = true;
  if (range || (!neg && v == INT64_MIN)) return HG_DECIMAL_RANGE;
  *out = neg ? v : -v;
  return 0;
}

int hg_decimal_format(int64_t v, int places, char *out, size_t cap) {
  char tmp[48];
  size_t n = 0;
  if (places < 0 || places > HG_DECIMAL_PLACES_MAX) places = 0;
  /* Digits of |v| from the lowest, as unsigned so INT64_MIN is fine. */
  uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  for (int k = 0; k < places; k++) {
    tmp[n++] = (char)('0' + mag % 10);
    mag /= 10;
  }
  if (places > 0) tmp[n++] = '.';
  do {
    tmp[n++] = (char)('0' + mag % 10);
    mag /= 10;
  } while (mag != 0);
  if (v < 0) tmp[n++] = '-';
  if (cap < n + 1) {
    if (cap > 0) out[0] = '\0';
    return -1;
  }
  for (size_t k = 0; k < n; k++) out[k] = tmp[n - 1 - k];
  out[n] = '\0';
  return (int)n;
}
