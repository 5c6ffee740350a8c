/*
 * hourglass/civil.h - UTC calendar dates as day numbers, integer only.
 *
 * A day number counts days since 1970-01-01 (day 0) in the proleptic
 * Gregorian calendar; every date in Hourglass (listing months, settlement
 * days, index fixings, statements) is one. The conversions are closed-form
 * (no loop over years) and exact for every year the int32 range of day
 * numbers covers; the text forms accept years 1970..9999 only, the range
 * contract symbols and files use.
 *
 * Pure functions: no state, no allocation, no clock, any thread. The state
 * machine uses them, so nothing here reads the time of day.
 */
#ifndef HOURGLASS_CIVIL_H
#define HOURGLASS_CIVIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HG_NS_PER_DAY 86400000000000ull /* nanoseconds in a UTC day */
#define HG_CIVIL_YEAR_MIN 1970
#define HG_CIVIL_YEAR_MAX 9999

/* A calendar date; month 1..12, day 1..31. */
typedef struct hg_civil {
  int32_t year;
  uint32_t month;
  uint32_t day;
} hg_civil_t;

bool hg_civil_leap(int64_t year);

/* Days in month (1..12) of year; 0 for a month out of range. */
uint32_t hg_civil_month_days(int64_t year, uint32_t month);

/* Day number of year-month-day. The caller passes a valid date (month
 * 1..12, day 1..month length); the result for any other input is the same
 * arithmetic continued (day 0 of March is the last of February) and is never
 * undefined behaviour for |year| < 5,000,000. */
int32_t hg_civil_to_day(int64_t year, uint32_t month, uint32_t day);

/* The date of a day number; inverse of hg_civil_to_day for every int32 day. */
hg_civil_t hg_civil_from_day(int32_t day);

/* Day number of a timestamp in nanoseconds since the epoch (UTC). */
static inline int32_t hg_civil_day_of_ns(uint64_t ts_ns) {
  return (int32_t)(ts_ns / HG_NS_PER_DAY);
}

/* "YYYY-MM-DD": exactly 10 bytes of s (no NUL needed), a real date, year
 * 1970..9999. Returns true and sets *day; false (day untouched) otherwise. */
bool hg_civil_parse_date(const char *s, size_t len, int32_t *day);

/* "YYYY-MM": exactly 7 bytes, year 1970..9999, month 01..12. Returns true
 * and sets *year and *month; false (both untouched) otherwise. */
bool hg_civil_parse_month(const char *s, size_t len, uint32_t *year, uint32_t *month);

/* Writes "YYYY-MM-DD" and a NUL (11 bytes). Years outside 0..9999 are
 * written modulo 10000 so the width never changes. */
void hg_civil_format_date(int32_t day, char out[11]);

#endif /* HOURGLASS_CIVIL_H */
