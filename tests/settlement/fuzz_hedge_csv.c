/*
 * libFuzzer target over hgctl's CSV inputs (settlement/hedge.c): the rent
 * history and the fixings file that `hgctl hedge-ratio` and `hgctl replay
 * --whatif-fixings` read. The first input byte selects the reader; the rest
 * is the file, copied into an exact-size allocation (a read past its end is
 * an ASan report). Checked: no crash, leak or UB; a failure is HG_EPARSE
 * with a line, a column hgctl can name (-1 or a column of the file) and a
 * message, or -ENOMEM, and allocates nothing; a success has at least one
 * observation, days strictly ascending, values in range; and a round trip:
 * the observations written back as CSV parse to the same observations.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/hedge.h"
#include "hourglass/index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int parse(int fixings, const char *buf, size_t len, hg_hedge_obs_t **v, size_t *n,
                 hg_hedge_csv_error_t *e) {
  return fixings ? hg_hedge_fixings_parse(buf, len, v, n, e) : hg_hedge_rent_parse(buf, len, v, n, e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int fixings = data[0] & 1;
  size_t len = size - 1;
  char *buf = malloc(len ? len : 1);
  if (buf == NULL) abort();
  memcpy(buf, data + 1, len);
  hg_hedge_obs_t *v = NULL;
  size_t n = 0;
  hg_hedge_csv_error_t e = {0, 0, NULL};
  int rc = parse(fixings, buf, len, &v, &n, &e);
  free(buf);
  if (rc != 0) {
    if (v != NULL) abort();
    if (rc == HG_EPARSE) {
      /* hgctl names the column from these tables. */
      if (e.what == NULL || e.line == 0 || e.column < -1 || e.column > (fixings ? 2 : 1))
        abort();
    } else if (rc != -ENOMEM) {
      abort();
    }
    return 0;
  }
  if (v == NULL || n == 0) abort();
  size_t cap = 64 + n * 64;
  char *out = malloc(cap);
  if (out == NULL) abort();
  size_t ol = (size_t)snprintf(out, cap, "%s\n", fixings ? "day,value,status" : "day,price");
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && v[i].day <= v[i - 1].day) abort();
    char day[11];
    hg_index_day_format(v[i].day, day);
    if (fixings && v[i].status == HG_HEDGE_NO_FIX) {
      if (v[i].value != 0) abort();
      ol += (size_t)snprintf(out + ol, cap - ol, "%s,,NO_FIX\n", day);
      continue;
    }
    if (v[i].value <= 0) abort();
    if (fixings && v[i].status != HG_HEDGE_FINAL && v[i].status != HG_HEDGE_PROVISIONAL) abort();
    if (!fixings && v[i].status != 0) abort();
    /* The shortest form: trailing zeros of the fraction count as digits
     * against hg_hedge_decimal_parse's 15. */
    char frac[8];
    snprintf(frac, sizeof frac, ".%06" PRId64, v[i].value % 1000000);
    size_t fl = strlen(frac);
    while (fl > 1 && frac[fl - 1] == '0') fl--;
    if (fl == 1) fl = 0;
    frac[fl] = '\0';
    ol += (size_t)snprintf(out + ol, cap - ol, "%s,%" PRId64 "%s%s\n", day, v[i].value / 1000000,
                           frac,
                           !fixings                        ? ""
                           : v[i].status == HG_HEDGE_FINAL ? ",FINAL"
                                                           : ",PROVISIONAL");
  }
  if (ol >= cap) abort();
  hg_hedge_obs_t *w = NULL;
  size_t m = 0;
  if (parse(fixings, out, ol, &w, &m, &e) != 0 || m != n) abort();
  for (size_t i = 0; i < n; i++)
    if (w[i].day != v[i].day || w[i].status != v[i].status || w[i].value != v[i].value) abort();
  free(w);
  free(v);
  free(out);
  return 0;
}
