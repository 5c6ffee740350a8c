/*
 * hedge.c - hedger analytics (hourglass/hedge.h).
 *
 * Sizing and the token conversion are exact: sizes are int64 with 128-bit
 * products, and the conversion keeps the value as a reduced fraction of
 * unsigned 128-bit integers and writes it by long division, so the decimal
 * it prints is the value itself (a repeating block is found by watching for
 * the remainder that starts it to come back). Only the hedge ratio uses
 * floating point: it is statistics over integer price changes, never money
 * that moves.
 */
#include "hourglass/hedge.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/civil.h"
#include "hourglass/error.h"
#include "hourglass/grow.h"
#include "hourglass/index.h"

typedef unsigned __int128 u128;

int hg_hedge_month_parse(const char *s, size_t len, unsigned *year, unsigned *month) {
  uint32_t y, m;
  if (!hg_civil_parse_month(s, len, &y, &m)) return HG_EPARSE;
  *year = y;
  *month = m;
  return 0;
}

int hg_hedge_size(int64_t gpus, int64_t hours_per_gpu, unsigned year, unsigned month, int round,
                  hg_hedge_month_t *out) {
  if (out == NULL || gpus <= 0 || hours_per_gpu < 0 || year < 1970 || year > 9999 || month < 1 ||
      month > 12 || round < HG_HEDGE_ROUND_NEAREST || round > HG_HEDGE_ROUND_UP)
    return HG_EINVAL;
  int64_t cal = 24 * (int64_t)hg_civil_month_days(year, month);
  if (hours_per_gpu > cal) return HG_ERANGE;
  int64_t h = hours_per_gpu == 0 ? cal : hours_per_gpu;
  __int128 e = (__int128)gpus * h;
  if (e > INT64_MAX) return HG_EOVERFLOW;
  int64_t exposure = (int64_t)e;
  const int64_t u = HG_HEDGE_CONTRACT_GPU_HOURS;
  int64_t c = exposure / u; /* exposure >= 0: truncation is floor */
  int64_t rem = exposure % u;
  if (round == HG_HEDGE_ROUND_UP && rem > 0) c++;
  if (round == HG_HEDGE_ROUND_NEAREST && 2 * rem >= u) c++;
  /* Rounding up can take contracts x 1000 past int64 near the top. */
  if (c > INT64_MAX / u) return HG_EOVERFLOW;
  memset(out, 0, sizeof *out);
  out->year = (uint16_t)year;
  out->month = (uint8_t)month;
  out->hours_per_gpu = h;
  out->exposure = exposure;
  out->contracts = c;
  out->hedged = c * u;
  out->residual = exposure - c * u;
  return 0;
}

/* x / d rounded as round says (x >= 0, d > 0). */
static __int128 div_round(__int128 x, __int128 d, int round) {
  if (round == HG_HEDGE_ROUND_DOWN) return x / d;
  if (round == HG_HEDGE_ROUND_UP) return (x + d - 1) / d;
  return (2 * x + d) / (2 * d);
}

#define PRICE_MAX INT64_C(1000000000000)

int hg_hedge_margin_per_gpu_hour(int64_t token_price, int64_t tokens_per_gpu_hour, int64_t rent,
                                 int64_t *revenue, int64_t *margin) {
  if (revenue == NULL || margin == NULL || tokens_per_gpu_hour <= 0 ||
      tokens_per_gpu_hour > INT64_C(1000000000000000) || rent < 0 || rent > PRICE_MAX ||
      token_price < 0 || token_price > PRICE_MAX)
    return HG_EINVAL;
  /* <= 10^12 x 10^15 / 10^6 = 10^21 would not fit: bounded by the 128-bit
   * product, then checked. */
  __int128 r = div_round((__int128)token_price * tokens_per_gpu_hour, 1000000,
                         HG_HEDGE_ROUND_NEAREST);
  if (r > INT64_MAX) return HG_EINVAL;
  *revenue = (int64_t)r;
  *margin = (int64_t)r - rent;
  return 0;
}

int hg_hedge_margin(int64_t gpus, int64_t hours_per_gpu, unsigned year, unsigned month,
                    int64_t tokens_per_gpu_hour, int64_t rent, int64_t token_price,
                    hg_hedge_margin_t *out) {
  int64_t per_h, per_margin;
  if (out == NULL) return HG_EINVAL;
  int rc = hg_hedge_margin_per_gpu_hour(token_price, tokens_per_gpu_hour, rent, &per_h,
                                        &per_margin);
  if (rc != 0) return rc;
  hg_hedge_month_t g;
  if ((rc = hg_hedge_size(gpus, hours_per_gpu, year, month, HG_HEDGE_ROUND_NEAREST, &g)) != 0)
    return rc;
  __int128 tokens = (__int128)g.exposure * tokens_per_gpu_hour;
  if (tokens > INT64_MAX) return HG_EOVERFLOW;
  /* The month in one rounding: exposure x price x K / 10^6, not exposure x
   * the rounded per-hour revenue. */
  __int128 revenue = div_round(tokens * token_price, 1000000, HG_HEDGE_ROUND_NEAREST);
  __int128 margin = revenue - (__int128)g.exposure * rent;
  if (revenue > INT64_MAX || margin < INT64_MIN || margin > INT64_MAX) return HG_EOVERFLOW;
  memset(out, 0, sizeof *out);
  out->gpu = g;
  out->tokens_per_gpu_hour = tokens_per_gpu_hour;
  out->tokens = (int64_t)tokens;
  out->token_contracts =
      (int64_t)div_round(tokens, HG_HEDGE_CONTRACT_TOKENS, HG_HEDGE_ROUND_NEAREST);
  out->token_residual = out->tokens - out->token_contracts * HG_HEDGE_CONTRACT_TOKENS;
  out->revenue_per_gpu_hour = per_h;
  out->margin_per_gpu_hour = per_margin;
  out->margin_month = (int64_t)margin;
  return 0;
}

int hg_hedge_size_ratio(int64_t exposure, int64_t ratio, int round, hg_hedge_ratio_size_t *out) {
  if (out == NULL || exposure < 0 || ratio <= 0 || ratio > 10 * 1000000 ||
      round < HG_HEDGE_ROUND_NEAREST || round > HG_HEDGE_ROUND_UP)
    return HG_EINVAL;
  const __int128 unit = (__int128)HG_HEDGE_CONTRACT_GPU_HOURS * 1000000; /* millionths */
  __int128 target = (__int128)exposure * ratio;
  __int128 c = div_round(target, unit, round);
  __int128 resid = target - c * unit;
  if (target > INT64_MAX || c * HG_HEDGE_CONTRACT_GPU_HOURS > INT64_MAX || resid > INT64_MAX ||
      resid < INT64_MIN)
    return HG_EOVERFLOW;
  out->target = (int64_t)target;
  out->contracts = (int64_t)c;
  out->hedged = (int64_t)(c * HG_HEDGE_CONTRACT_GPU_HOURS);
  out->residual = (int64_t)resid;
  return 0;
}

/* ------------------------------------------------------------ decimals */

int hg_hedge_decimal_parse(const char *s, size_t len, hg_hedge_decimal_t *out) {
  if (s == NULL || out == NULL || len == 0) return HG_EPARSE;
  uint64_t mant = 0;
  unsigned digits = 0, scale = 0;
  bool dot = false, any = false, too_many = false;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (ch == '.') {
      if (dot) return HG_EPARSE;
      dot = true;
      continue;
    }
    if (ch < '0' || ch > '9') return HG_EPARSE;
    any = true;
    if (dot) scale++;
    if (mant == 0 && ch == '0') continue; /* leading zeros are not significant */
    if (++digits > 15) {
      too_many = true;
      continue;
    }
    mant = mant * 10 + (uint64_t)(ch - '0');
  }
  if (!any || s[len - 1] == '.' || s[0] == '.') return HG_EPARSE;
  if (too_many || scale > 12 || mant == 0) return HG_ERANGE;
  out->mant = mant;
  out->scale = scale;
  return 0;
}

static u128 pow10_u128(unsigned e) {
  u128 r = 1;
  while (e--) r *= 10;
  return r;
}

static u128 gcd_u128(u128 a, u128 b) {
  while (b != 0) {
    u128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Writes v in decimal; returns the length. buf holds at least 40 bytes. */
static size_t u128_str(u128 v, char *buf) {
  char tmp[48];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + (int)(v % 10));
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
  return n;
}

/* Formats num/den (den > 0) exactly and rounded half up to places. */
static void fraction_quote(u128 num, u128 den, unsigned places, hg_hedge_quote_t *out) {
  u128 g = gcd_u128(num, den);
  if (g > 1) {
    num /= g;
    den /= g;
  }
  memset(out, 0, sizeof *out);
  u128 ip = num / den, r = num % den;

  /* Rounded: the integer part and places digits by long division, then
   * half up on what remains, with the carry run back through the digits. */
  char dig[24];
  u128 rr = r;
  for (unsigned i = 0; i < places; i++) {
    rr *= 10;
    dig[i] = (char)('0' + (int)(rr / den));
    rr %= den;
  }
  u128 rip = ip;
  if (rr != 0 && rr >= den - rr) { /* 2 rr >= den without overflow */
    int i = (int)places - 1;
    for (; i >= 0; i--) {
      if (dig[i] == '9') {
        dig[i] = '0';
      } else {
        dig[i]++;
        break;
      }
    }
    if (i < 0) rip++;
  }
  size_t n = u128_str(rip, out->rounded);
  if (places > 0) {
    out->rounded[n++] = '.';
    memcpy(out->rounded + n, dig, places);
    n += places;
  }
  out->rounded[n] = '\0';

  /* Exact: the non-repeating prefix has max(e2, e5) digits where 2^e2 and
   * 5^e5 divide the reduced denominator; after it the remainder that starts
   * the repeating block comes back after one period. */
  unsigned e2 = 0, e5 = 0;
  for (u128 d = den; d % 2 == 0; d /= 2) e2++;
  for (u128 d = den; d % 5 == 0; d /= 5) e5++;
  unsigned pre = e2 > e5 ? e2 : e5;
  char *p = out->exact;
  p += u128_str(ip, p);
  if (r == 0) {
    out->terminating = 1;
    return;
  }
  *p++ = '.';
  for (unsigned i = 0; i < pre && r != 0; i++) {
    r *= 10;
    *p++ = (char)('0' + (int)(r / den));
    r %= den;
  }
  if (r == 0) {
    *p = '\0';
    out->terminating = 1;
    return;
  }
  u128 start = r;
  char block[HG_HEDGE_PERIOD_MAX];
  unsigned len = 0;
  do {
    if (len == HG_HEDGE_PERIOD_MAX) {
      out->exact[0] = '\0';
      return;
    }
    r *= 10;
    block[len++] = (char)('0' + (int)(r / den));
    r %= den;
  } while (r != start);
  *p++ = '(';
  memcpy(p, block, len);
  p += len;
  *p++ = ')';
  *p = '\0';
}

/* Largest mantissa and scale hg_hedge_decimal_parse produces. */
static bool decimal_ok(const hg_hedge_decimal_t *d) {
  return d != NULL && d->mant > 0 && d->mant < 1000000000000000ull && d->scale <= 12;
}

int hg_hedge_usd_per_mtok(const hg_hedge_decimal_t *price_usd, const hg_hedge_decimal_t *tps,
                          unsigned places, hg_hedge_quote_t *out) {
  if (!decimal_ok(price_usd) || !decimal_ok(tps) || places > 18 || out == NULL) return HG_EINVAL;
  /* (pm / 10^ps) / ((tm / 10^ts) x 3600) x 10^6 = pm 10^ts 10^6 / (10^ps tm 3600);
   * at most 10^15 x 10^12 x 10^6 = 10^33 and 10^12 x 10^15 x 3600 < 10^37. */
  u128 num = (u128)price_usd->mant * pow10_u128(tps->scale) * 1000000u;
  u128 den = pow10_u128(price_usd->scale) * (u128)tps->mant * 3600u;
  fraction_quote(num, den, places, out);
  return 0;
}

int hg_hedge_usd_per_gpu_hour(const hg_hedge_decimal_t *usd_per_mtok,
                              const hg_hedge_decimal_t *tps, unsigned places,
                              hg_hedge_quote_t *out) {
  if (!decimal_ok(usd_per_mtok) || !decimal_ok(tps) || places > 18 || out == NULL)
    return HG_EINVAL;
  /* xm tm 3600 / (10^xs 10^ts 10^6): at most 3.6 x 10^33 over 10^30. */
  u128 num = (u128)usd_per_mtok->mant * tps->mant * 3600u;
  u128 den = pow10_u128(usd_per_mtok->scale + tps->scale) * 1000000u;
  fraction_quote(num, den, places, out);
  return 0;
}

/* ----------------------------------------------------------------- CSV */

typedef struct line_reader {
  const char *p, *end;
  uint32_t line;
} line_reader_t;

/* Next line without its terminator; false at the end of the buffer. */
static bool next_line(line_reader_t *lr, const char **s, size_t *len) {
  if (lr->p >= lr->end) return false;
  const char *nl = memchr(lr->p, '\n', (size_t)(lr->end - lr->p));
  const char *e = nl ? nl : lr->end;
  *s = lr->p;
  *len = (size_t)(e - lr->p);
  if (*len > 0 && (*s)[*len - 1] == '\r') (*len)--;
  lr->p = nl ? nl + 1 : lr->end;
  lr->line++;
  return true;
}

/* Splits s into at most max fields at commas; returns the field count. */
static size_t split(const char *s, size_t len, const char **f, size_t *fl, size_t max) {
  size_t n = 0;
  const char *start = s, *e = s + len;
  for (const char *q = s;; q++) {
    if (q == e || *q == ',') {
      if (n == max) return max + 1;
      f[n] = start;
      fl[n] = (size_t)(q - start);
      n++;
      if (q == e) break;
      start = q + 1;
    }
  }
  return n;
}

/* USD per GPU-hour with at most 6 decimals, > 0, to micro-USD. */
static int parse_usd(const char *s, size_t len, int64_t *micro) {
  hg_hedge_decimal_t d;
  int rc = hg_hedge_decimal_parse(s, len, &d);
  if (rc != 0 || d.scale > 6) return HG_EPARSE;
  u128 v = (u128)d.mant * pow10_u128(6 - d.scale);
  if (v > (u128)INT64_MAX) return HG_EPARSE;
  *micro = (int64_t)v;
  return 0;
}

static int csv_fail(hg_hedge_csv_error_t *err, uint32_t line, int column, const char *what) {
  if (err != NULL) {
    err->line = line;
    err->column = column;
    err->what = what;
  }
  return HG_EPARSE;
}

static int parse_series(const char *buf, size_t len, bool fixings, hg_hedge_obs_t **out,
                        size_t *n_out, hg_hedge_csv_error_t *err) {
  if (buf == NULL && len > 0) return HG_EINVAL;
  if (out == NULL || n_out == NULL) return HG_EINVAL;
  /* A UTF-8 byte-order mark (spreadsheets write one) is not part of the
   * header. */
  if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
    buf += 3;
    len -= 3;
  }
  line_reader_t lr = {buf, buf + len, 0};
  const char *s;
  size_t sl;
  const char *header = fixings ? "day,value,status" : "day,price";
  if (!next_line(&lr, &s, &sl)) return csv_fail(err, 1, -1, "empty file: no header");
  if (sl != strlen(header) || memcmp(s, header, sl) != 0)
    return csv_fail(err, 1, -1,
                    fixings ? "header must be exactly 'day,value,status'"
                            : "header must be exactly 'day,price'");
  size_t cap = 64, n = 0;
  hg_hedge_obs_t *v = malloc(cap * sizeof *v);
  if (v == NULL) return -ENOMEM;
  int rc = 0;
  while (next_line(&lr, &s, &sl)) {
    const char *f[3];
    size_t fl[3];
    size_t want = fixings ? 3 : 2;
    if (sl == 0 && lr.p >= lr.end) break; /* the final newline */
    if (sl == 0) {
      rc = csv_fail(err, lr.line, -1, "blank line");
      goto fail;
    }
    if (split(s, sl, f, fl, want) != want) {
      rc = csv_fail(err, lr.line, -1,
                    fixings ? "expected 3 fields: day,value,status" : "expected 2 fields: day,price");
      goto fail;
    }
    hg_hedge_obs_t o = {0};
    if (hg_index_day_parse(f[0], fl[0], &o.day) != 0) {
      rc = csv_fail(err, lr.line, 0, "day is not a valid YYYY-MM-DD date");
      goto fail;
    }
    if (n > 0 && o.day <= v[n - 1].day) {
      rc = csv_fail(err, lr.line, 0, "days must be strictly ascending (duplicate or out of order)");
      goto fail;
    }
    if (fixings) {
      if (fl[2] == 5 && memcmp(f[2], "FINAL", 5) == 0) {
        o.status = HG_HEDGE_FINAL;
      } else if (fl[2] == 11 && memcmp(f[2], "PROVISIONAL", 11) == 0) {
        o.status = HG_HEDGE_PROVISIONAL;
      } else if (fl[2] == 6 && memcmp(f[2], "NO_FIX", 6) == 0) {
        o.status = HG_HEDGE_NO_FIX;
      } else {
        rc = csv_fail(err, lr.line, 2, "status must be FINAL, PROVISIONAL or NO_FIX");
        goto fail;
      }
      if (o.status == HG_HEDGE_NO_FIX) {
        if (fl[1] != 0) {
          rc = csv_fail(err, lr.line, 1, "a NO_FIX day has an empty value");
          goto fail;
        }
      } else if (parse_usd(f[1], fl[1], &o.value) != 0) {
        rc = csv_fail(err, lr.line, 1,
                      "value must be USD per GPU-hour > 0 with at most 6 decimals");
        goto fail;
      }
    } else if (parse_usd(f[1], fl[1], &o.value) != 0) {
      rc = csv_fail(err, lr.line, 1, "price must be USD per GPU-hour > 0 with at most 6 decimals");
      goto fail;
    }
    hg_hedge_obs_t *nv = hg_grow(v, &cap, sizeof *nv, n + 1, 64);
    if (nv == NULL) {
      rc = -ENOMEM;
      goto fail;
    }
    v = nv;
    v[n++] = o;
  }
  if (n == 0) {
    rc = csv_fail(err, lr.line + 1, -1, "no data lines after the header");
    goto fail;
  }
  *out = v;
  *n_out = n;
  return 0;
fail:
  free(v);
  return rc;
}

int hg_hedge_rent_parse(const char *buf, size_t len, hg_hedge_obs_t **out, size_t *n,
                        hg_hedge_csv_error_t *err) {
  return parse_series(buf, len, false, out, n, err);
}

int hg_hedge_fixings_parse(const char *buf, size_t len, hg_hedge_obs_t **out, size_t *n,
                           hg_hedge_csv_error_t *err) {
  return parse_series(buf, len, true, out, n, err);
}

/* ------------------------------------------------------------- ratio */

int hg_hedge_ratio(const hg_hedge_obs_t *rent, size_t n_rent, const hg_hedge_obs_t *index,
                   size_t n_index, hg_hedge_ratio_t *out) {
  if (out == NULL) return HG_EINVAL;
  memset(out, 0, sizeof *out);
  out->why = "";
  if ((rent == NULL && n_rent) || (index == NULL && n_index)) {
    out->why = "missing series";
    return HG_EINVAL;
  }
  /* Pass 1: count the common days and sum the changes for the means. Both
   * series ascend strictly (the parsers enforce it), so a merge aligns them. */
  size_t i = 0, j = 0, days = 0;
  int64_t ps = 0, pf = 0;
  double sum_s = 0, sum_f = 0;
  for (int pass = 0; pass < 2; pass++) {
    double ms = 0, mf = 0, sss = 0, sff = 0, ssf = 0;
    if (pass == 1) {
      if (days < 3) {
        out->why = "fewer than 3 days present in both the rent history and the index";
        out->days = days;
        return HG_ERANGE;
      }
      ms = sum_s / (double)(days - 1);
      mf = sum_f / (double)(days - 1);
    }
    i = j = 0;
    size_t k = 0;
    while (i < n_rent && j < n_index) {
      if (rent[i].day < index[j].day) {
        i++;
      } else if (rent[i].day > index[j].day) {
        j++;
      } else {
        if (index[j].status != HG_HEDGE_NO_FIX) {
          int64_t s = rent[i].value, f = index[j].value;
          if (k > 0) {
            double ds = (double)(s - ps), df = (double)(f - pf);
            if (pass == 0) {
              sum_s += ds;
              sum_f += df;
            } else {
              sss += (ds - ms) * (ds - ms);
              sff += (df - mf) * (df - mf);
              ssf += (ds - ms) * (df - mf);
            }
          }
          ps = s;
          pf = f;
          k++;
        }
        i++;
        j++;
      }
    }
    if (pass == 0) {
      days = k;
      continue;
    }
    out->days = days;
    out->changes = days - 1;
    if (sff == 0) {
      out->why = "the index's changes have zero variance over the common days: nothing to hedge with";
      return HG_ESTATE;
    }
    if (sss == 0) {
      out->why = "the rent's changes have zero variance over the common days: correlation is undefined";
      return HG_ESTATE;
    }
    double k1 = (double)(days - 2); /* changes - 1 */
    out->rent_vol = sqrt(sss / k1) / 1e6;
    out->index_vol = sqrt(sff / k1) / 1e6;
    out->correlation = ssf / sqrt(sss * sff);
    out->ratio = out->correlation * out->rent_vol / out->index_vol;
    out->effectiveness = out->correlation * out->correlation;
  }
  return 0;
}
