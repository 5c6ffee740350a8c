/*
 * hourglass/decimal.h - exact decimal text to scaled integers and back.
 *
 * Money in Hourglass is an integer count of a fixed fraction (prices in
 * ticks of 0.001 USD, index prices and cash in micro-USD): decimal text
 * "12.345" with places 3 is 12345. No floating point anywhere, so what is
 * printed can be typed back and compares equal.
 *
 * Pure functions: no state, no allocation, any thread.
 */
#ifndef HOURGLASS_DECIMAL_H
#define HOURGLASS_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

/* Results of hg_decimal_parse (0 is success). */
enum {
  HG_DECIMAL_SYNTAX = -1, /* not [-]digits[.digits] (a lone '.' or "5." or "" too) */
  HG_DECIMAL_PLACES = -2, /* more decimals than places */
  HG_DECIMAL_RANGE = -3   /* the scaled value does not fit int64 */
};

/* Most places hg_decimal_parse and hg_decimal_format take. */
#define HG_DECIMAL_PLACES_MAX 18

/* Parses len bytes of s, "[-]digits[.digits]" with at most places decimals
 * (0..18), into the value times 10^places. Overflow is checked at every
 * digit, INT64_MIN included. Returns 0 and sets *out, or one of the errors
 * above with *out untouched. */
int hg_decimal_parse(const char *s, size_t len, int places, int64_t *out);

/* Writes v / 10^places with exactly places decimals ("-1.500" for -1500,
 * places 3; no '.' when places is 0) and a NUL into out (cap bytes; 22 +
 * places is always enough). Returns the length written, or -1 when cap is
 * too small (out then holds "" if cap > 0). */
int hg_decimal_format(int64_t v, int places, char *out, size_t cap);

#endif /* HOURGLASS_DECIMAL_H */
