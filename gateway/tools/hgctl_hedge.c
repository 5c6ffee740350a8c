/*
 * hgctl_hedge.c - the hedger's tools: hedge size, hedge ratio and convert,
 * thin shells over hourglass/hedge.h (declared in hgctl_tools.h). Pure
 * computations on the command line and CSV files; no network, no data
 * directory.
 */
#include "hgctl_args.h"
#include "hgctl_tools.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/hedge.h"
#include "hourglass/index.h"

#define EXIT_INPUT 1
#define EXIT_USAGE 2

/* -------------------------------------------------------- hedge size */

static void hedge_size_usage(FILE *o) {
  fputs("usage: hgctl hedge size --gpus N --hours-per-month H|full --months YYYY-MM[,YYYY-MM...]\n"
        "                        [--round nearest|down|up]\n"
        "  Contracts to buy per delivery month to hedge N GPUs used H hours each per\n"
        "  month ('full' = every calendar hour of the month). One contract is 1,000\n"
        "  GPU-hours; contracts = N x H / 1000 rounded to the nearest whole contract\n"
        "  (exactly half rounds up) by default, down (never over-hedge) or up (never\n"
        "  under-hedge). residual = exposure - contracts x 1000 GPU-hours: positive is\n"
        "  left unhedged, negative is over-hedged.\n",
        o);
}

int hgctl_hedge_size(int argc, char **argv) {
  const char *gpus_s = NULL, *hours_s = NULL, *months_s = NULL, *round_s = NULL;
  const hgctl_opt_t opts[] = {{"--gpus", &gpus_s, NULL},
                        {"--hours-per-month", &hours_s, NULL},
                        {"--months", &months_s, NULL},
                        {"--round", &round_s, NULL}};
  int rc = hgctl_parse_opts("hedge size", argc, argv, opts, 4, hedge_size_usage);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if (!gpus_s || !hours_s || !months_s) {
    fprintf(stderr, "hgctl hedge size: missing %s\n",
            !gpus_s ? "--gpus" : !hours_s ? "--hours-per-month" : "--months");
    hedge_size_usage(stderr);
    return EXIT_USAGE;
  }
  int64_t gpus, hours = 0;
  if (!hgctl_parse_i64(gpus_s, 1, INT64_MAX, &gpus)) {
    fprintf(stderr, "hgctl hedge size: --gpus '%s' must be a whole number >= 1\n", gpus_s);
    return EXIT_USAGE;
  }
  if (strcmp(hours_s, "full") != 0 && !hgctl_parse_i64(hours_s, 1, 744, &hours)) {
    fprintf(stderr,
            "hgctl hedge size: --hours-per-month '%s' must be 'full' or a whole number of hours "
            "per GPU, 1..744\n",
            hours_s);
    return EXIT_USAGE;
  }
  int round = HG_HEDGE_ROUND_NEAREST;
  if (round_s != NULL) {
    if (strcmp(round_s, "nearest") == 0) round = HG_HEDGE_ROUND_NEAREST;
    else if (strcmp(round_s, "down") == 0) round = HG_HEDGE_ROUND_DOWN;
    else if (strcmp(round_s, "up") == 0) round = HG_HEDGE_ROUND_UP;
    else {
      fprintf(stderr, "hgctl hedge size: --round must be nearest, down or up\n");
      return EXIT_USAGE;
    }
  }
  /* Validate every month before printing anything. */
  size_t nm = 1;
  for (const char *p = months_s; *p; p++) nm += *p == ',';
  hg_hedge_month_t *rows = calloc(nm, sizeof *rows);
  if (rows == NULL) return EXIT_INPUT;
  const char *p = months_s;
  for (size_t k = 0; k < nm; k++) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    unsigned y, m;
    if (hg_hedge_month_parse(p, len, &y, &m) != 0) {
      fprintf(stderr, "hgctl hedge size: month '%.*s' is not YYYY-MM\n", (int)len, p);
      free(rows);
      return EXIT_USAGE;
    }
    rc = hg_hedge_size(gpus, hours, y, m, round, &rows[k]);
    if (rc == HG_ERANGE) {
      fprintf(stderr, "hgctl hedge size: %" PRId64 " hours per GPU is more than %.*s has\n", hours,
              (int)len, p);
      free(rows);
      return EXIT_USAGE;
    }
    if (rc != 0) {
      fprintf(stderr, "hgctl hedge size: %.*s: %s\n", (int)len, p, hg_strerror(rc));
      free(rows);
      return EXIT_USAGE;
    }
    p = c ? c + 1 : p + len;
  }
  printf("# contracts = gpus x hours / %d GPU-hours, rounded %s; residual = exposure - hedged\n",
         HG_HEDGE_CONTRACT_GPU_HOURS,
         round == HG_HEDGE_ROUND_NEAREST ? "to nearest (half up)"
         : round == HG_HEDGE_ROUND_DOWN  ? "down"
                                         : "up");
  printf("month,gpus,hours_per_gpu,exposure_gpu_hours,contracts,hedged_gpu_hours,"
         "residual_gpu_hours\n");
  __int128 te = 0, tc = 0, tr = 0;
  for (size_t k = 0; k < nm; k++) {
    const hg_hedge_month_t *r = &rows[k];
    printf("%04u-%02u,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "\n",
           r->year, r->month, gpus, r->hours_per_gpu, r->exposure, r->contracts, r->hedged,
           r->residual);
    te += r->exposure;
    tc += r->contracts;
    tr += r->residual;
  }
  if (te <= INT64_MAX)
    printf("total,,,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "\n", (int64_t)te, (int64_t)tc,
           (int64_t)(tc * HG_HEDGE_CONTRACT_GPU_HOURS), (int64_t)tr);
  free(rows);
  return fflush(stdout) == 0 ? 0 : EXIT_INPUT;
}

/* ------------------------------------------------------- hedge ratio */

static void hedge_ratio_usage(FILE *o) {
  fputs("usage: hgctl hedge ratio --rent RENT.csv --index FIXINGS.csv\n"
        "  Minimum-variance hedge ratio of your rent against the index:\n"
        "  correlation x rent volatility / index volatility, over the day-to-day price\n"
        "  CHANGES of the days present in both files (index NO_FIX days skipped), and\n"
        "  the hedge effectiveness (correlation squared). Volatilities are sample\n"
        "  standard deviations of those changes, USD per GPU-hour per interval.\n"
        "  Computed in double precision, printed with 6 decimals (nearest).\n"
        "  RENT.csv:     header 'day,price', lines YYYY-MM-DD,<USD per GPU-hour>\n"
        "  FIXINGS.csv:  header 'day,value,status', lines YYYY-MM-DD,<USD>,FINAL|PROVISIONAL\n"
        "                or YYYY-MM-DD,,NO_FIX\n"
        "  Days strictly ascending; prices > 0 with at most 6 decimals.\n",
        o);
}

int hgctl_load_series(const char *what, const char *path, bool fixings, hg_hedge_obs_t **v,
                      size_t *n) {
  char *buf;
  size_t len;
  int rc = hgctl_read_file(path, &buf, &len);
  if (rc != 0) {
    fprintf(stderr, "hgctl: cannot read %s file '%s': %s\n", what, path, hg_strerror(rc));
    return rc;
  }
  hg_hedge_csv_error_t e = {0};
  rc = fixings ? hg_hedge_fixings_parse(buf, len, v, n, &e) : hg_hedge_rent_parse(buf, len, v, n, &e);
  free(buf);
  if (rc == HG_EPARSE) {
    static const char *const rent_cols[] = {"day", "price"};
    static const char *const fix_cols[] = {"day", "value", "status"};
    const char *col = e.column < 0 ? NULL : fixings ? fix_cols[e.column] : rent_cols[e.column];
    fprintf(stderr, "hgctl: %s:%" PRIu32 ":%s%s %s\n", path, e.line, col ? " " : "", col ? col : "",
            e.what);
  } else if (rc != 0) {
    fprintf(stderr, "hgctl: %s file '%s': %s\n", what, path, hg_strerror(rc));
  }
  return rc;
}

int hgctl_hedge_ratio(int argc, char **argv) {
  const char *rent_s = NULL, *index_s = NULL;
  const hgctl_opt_t opts[] = {{"--rent", &rent_s, NULL}, {"--index", &index_s, NULL}};
  int rc = hgctl_parse_opts("hedge ratio", argc, argv, opts, 2, hedge_ratio_usage);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if (!rent_s || !index_s) {
    fprintf(stderr, "hgctl hedge ratio: missing %s\n", !rent_s ? "--rent" : "--index");
    hedge_ratio_usage(stderr);
    return EXIT_USAGE;
  }
  hg_hedge_obs_t *rent = NULL, *idx = NULL;
  size_t nr = 0, ni = 0;
  int status = EXIT_INPUT;
  if (hgctl_load_series("rent", rent_s, false, &rent, &nr) != 0) goto out;
  if (hgctl_load_series("index", index_s, true, &idx, &ni) != 0) goto out;
  hg_hedge_ratio_t r;
  rc = hg_hedge_ratio(rent, nr, idx, ni, &r);
  if (rc != 0) {
    fprintf(stderr, "hgctl hedge ratio: %s (%zu common days)\n", r.why, r.days);
    goto out;
  }
  printf("days_aligned %zu\nchanges %zu\nrent_vol_usd %.6f\nindex_vol_usd %.6f\n"
         "correlation %.6f\nhedge_ratio %.6f\nhedge_effectiveness %.6f\n",
         r.days, r.changes, r.rent_vol, r.index_vol, r.correlation, r.ratio, r.effectiveness);
  status = fflush(stdout) == 0 ? 0 : EXIT_INPUT;
out:
  free(rent);
  free(idx);
  return status;
}

/* ----------------------------------------------------------- convert */

static void convert_usage(FILE *o) {
  fputs("usage: hgctl convert --price USD_PER_GPU_HOUR --tokens-per-second T [--places N]\n"
        "       hgctl convert --usd-per-million-tokens X --tokens-per-second T [--places N]\n"
        "  USD per million output tokens = price / (T x 3600) x 1,000,000, and back:\n"
        "  price = X x T x 3600 / 1,000,000. T is output tokens per second per GPU.\n"
        "  Prints the exact value (a repeating block in parentheses: 0.69(4) is\n"
        "  0.694444...; omitted if longer than 64 digits) and the value rounded half\n"
        "  up to N decimals (default 6). Inputs: positive decimals, at most 15\n"
        "  significant digits and 12 decimals.\n",
        o);
}

int hgctl_convert(int argc, char **argv) {
  const char *price_s = NULL, *mtok_s = NULL, *tps_s = NULL, *places_s = NULL;
  const hgctl_opt_t opts[] = {{"--price", &price_s, NULL},
                        {"--usd-per-million-tokens", &mtok_s, NULL},
                        {"--tokens-per-second", &tps_s, NULL},
                        {"--places", &places_s, NULL}};
  int rc = hgctl_parse_opts("convert", argc, argv, opts, 4, convert_usage);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if ((price_s == NULL) == (mtok_s == NULL) || tps_s == NULL) {
    fprintf(stderr, "hgctl convert: give --tokens-per-second and exactly one of --price and "
                    "--usd-per-million-tokens\n");
    convert_usage(stderr);
    return EXIT_USAGE;
  }
  int64_t places = 6;
  if (places_s && !hgctl_parse_i64(places_s, 0, 18, &places)) {
    fprintf(stderr, "hgctl convert: --places must be 0..18\n");
    return EXIT_USAGE;
  }
  const char *in_s = price_s ? price_s : mtok_s;
  const char *in_name = price_s ? "--price" : "--usd-per-million-tokens";
  hg_hedge_decimal_t in, tps;
  if ((rc = hg_hedge_decimal_parse(in_s, strlen(in_s), &in)) != 0) {
    fprintf(stderr, "hgctl convert: %s '%s' must be a positive decimal (at most 15 digits, 12 "
                    "decimals)\n", in_name, in_s);
    return EXIT_USAGE;
  }
  if ((rc = hg_hedge_decimal_parse(tps_s, strlen(tps_s), &tps)) != 0) {
    fprintf(stderr, "hgctl convert: --tokens-per-second '%s' must be a positive decimal (at most "
                    "15 digits, 12 decimals)\n", tps_s);
    return EXIT_USAGE;
  }
  hg_hedge_quote_t q;
  rc = price_s ? hg_hedge_usd_per_mtok(&in, &tps, (unsigned)places, &q)
               : hg_hedge_usd_per_gpu_hour(&in, &tps, (unsigned)places, &q);
  if (rc != 0) {
    fprintf(stderr, "hgctl convert: %s\n", hg_strerror(rc));
    return EXIT_INPUT;
  }
  const char *name = price_s ? "usd_per_million_tokens" : "usd_per_gpu_hour";
  printf("%s %s\n", price_s ? "usd_per_gpu_hour" : "usd_per_million_tokens", in_s);
  printf("tokens_per_second %s\n", tps_s);
  printf("%s %s\n", name, q.exact[0] ? q.exact : "(repeating block longer than 64 digits)");
  printf("%s_rounded %s\n", name, q.rounded);
  printf("exact %s\n", q.terminating ? "yes" : "no (parenthesized digits repeat forever)");
  return fflush(stdout) == 0 ? 0 : EXIT_INPUT;
}
