/*
 * hgctl_fmt.h (internal) - the units hgctl speaks to people (hgctl_fmt.c).
 *
 * The wire carries prices in int64 ticks, money in int64 micro-USD and times
 * in uint64 nanoseconds since the Unix epoch (proto/README.md). People read
 * and type:
 *   - prices in USD per GPU-hour with three decimals ("3.415"): one tick is
 *     0.001 USD per GPU-hour (the contract's tick, HG_INDEX_TICK_MICRO_USD);
 *   - money in USD with two decimals ("1250.00"), six when the amount is not a
 *     whole number of cents ("0.000125"): never rounded;
 *   - index values (micro-USD per GPU-hour) in USD with six decimals;
 *   - times in UTC ISO-8601 ("2027-03-14T16:00:00.000000123Z").
 * Conversions use integers only (hourglass/decimal.h), never floating
 * point.
 *
 * All functions are pure, thread-safe and allocate nothing; each formatter
 * writes into the caller's buffer (at least HGCTL_FMT_LEN bytes) and
 * returns it.
 */
#ifndef HG_GATEWAY_HGCTL_FMT_H
#define HG_GATEWAY_HGCTL_FMT_H

#include <stdbool.h>
#include <stdint.h>

#define HGCTL_FMT_LEN 64

/* What `replay` and `op settle` print for a contract a daily cycle could
 * set no price for (tier 0): it is skipped, not settled at 0. */
#define HGCTL_DSP_SKIPPED "skipped (no price: positions and fills carry to the next cycle)"

/* The largest USD price per GPU-hour hgctl takes from a person or a file
 * (an index fixing, an FSP, a rent): no GPU-hour rents for more, so a
 * larger value is a unit mistake (micro-USD or cents pasted as USD). */
#define HGCTL_USD_PER_GPU_HOUR_MAX 1000

/* Errors of hgctl_decimal_parse (negative; 0 is success). */
#define HGCTL_DEC_SYNTAX -1   /* not a decimal number ("", "3.", "1e3", "0x10", "3,42") */
#define HGCTL_DEC_PLACES -2   /* more decimals than the unit has (a price off the tick) */
#define HGCTL_DEC_RANGE -3    /* the scaled value overflows int64 */
#define HGCTL_DEC_NEGATIVE -4 /* below zero (or zero where allow_zero is false) */

/* Parses s, a decimal "[-]DIGITS[.DIGITS]" with at most places decimals
 * (0..9), into *out = value * 10^places exactly: ("3.42", 3) -> 3420,
 * ("3.420", 3) -> 3420, ("3", 3) -> 3000. Trailing zeros beyond places are
 * still refused ("3.4200" with 3 places): the user typed a precision the
 * unit does not have. Returns 0, or an HGCTL_DEC_* code; *out is untouched
 * on error. Values must be above zero unless allow_zero (then >= 0). */
int hgctl_decimal_parse(const char *s, int places, int allow_zero, int64_t *out);

/* A one-line reason for an HGCTL_DEC_* code, given the number of places
 * ("has more than 3 decimals: prices are on a tick of 0.001 USD" for 3). */
const char *hgctl_decimal_error(int code, int places);

/* v / 10^places as a decimal with exactly places decimals ("-0.005"). */
char *hgctl_fmt_decimal(int64_t v, int places, char *buf);

/* A price in ticks as USD per GPU-hour, three decimals. */
char *hgctl_fmt_price(int64_t ticks, char *buf);

/* Money in micro-USD as USD: two decimals, six if not whole cents. */
char *hgctl_fmt_money(int64_t micro, char *buf);

/* As hgctl_fmt_price and hgctl_fmt_money, or when raw (--raw) the bare
 * integer the wire carries (ticks, micro-USD). */
char *hgctl_fmt_price_raw(int64_t ticks, bool raw, char *buf);
char *hgctl_fmt_money_raw(int64_t micro, bool raw, char *buf);

/* Nanoseconds since the epoch as UTC ISO-8601 with nanoseconds. */
char *hgctl_fmt_time(uint64_t ns, char *buf);

#endif /* HG_GATEWAY_HGCTL_FMT_H */
