/*
 * hgctl_hedge.c - the hedger's tools: hedge size, hedge ratio and convert,
 * thin shells over hourglass/hedge.h (declared in hgctl_tools.h), and
 * `index fixings`, which exports an index's fixings from a data directory
 * (a replay, hgctl_replay.h) in the file format hedge ratio and replay
 * --fixings read. The hedge commands are pure computations on the command
 * line and CSV files; no network, no data directory.
 *
 * Units: every price in those files is USD per GPU-hour. A value above
 * HEDGE_USD_MAX is refused as a unit mistake (micro-USD pasted as USD),
 * naming the line's day and what it was read as.
 */
#include "hgctl_args.h"
#include "hgctl_fmt.h"
#include "hgctl_replay.h"
#include "hgctl_tools.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/hedge.h"
#include "hourglass/index.h"


#define HEDGE_USD_MAX ((int64_t)HGCTL_USD_PER_GPU_HOUR_MAX * 1000000) /* micro-USD */

/* -------------------------------------------------------- hedge size */

/* Months one FIRST..LAST range of --months may span. */
#define HEDGE_RANGE_MAX 120

static void hedge_size_usage(FILE *o) {
  fprintf(o, "usage: hgctl hedge size --gpus N --hours-per-month H|full --months MONTHS\n"
        "                        [--round nearest|down|up] [--ratio R]\n"
        "  MONTHS: YYYY-MM[,YYYY-MM...], each item a month or a range of months\n"
        "  FIRST..LAST (2027-03..2027-06: March to June, at most %d months).\n"
        "  Contracts to buy per delivery month to hedge N GPUs used H hours each per\n"
        "  month ('full' = every calendar hour of the month). One contract is 1,000\n"
        "  GPU-hours; contracts = N x H / 1000 rounded to the nearest whole contract\n"
        "  (exactly half rounds up) by default, down (never over-hedge) or up (never\n"
        "  under-hedge). residual = exposure - contracts x 1000 GPU-hours: positive is\n"
        "  left unhedged, negative is over-hedged. Each month once.\n"
        "  --ratio R      hedge R x the exposure (R from `hgctl hedge ratio`, 0 < R <= 10,\n"
        "                 at most 6 decimals): contracts = N x H x R / 1000, rounded as\n"
        "                 above; the columns hedge_ratio and target_gpu_hours (N x H x R)\n"
        "                 are added and residual = target - hedged.\n"
        "  The last line, total, sums the months' columns.\n",
        HEDGE_RANGE_MAX);
}

static const char *round_name(int round) {
  return round == HG_HEDGE_ROUND_NEAREST ? "to nearest (half up)"
         : round == HG_HEDGE_ROUND_DOWN  ? "down"
                                         : "up";
}

/* The table with a hedge ratio (millionths): the target is exposure x ratio
 * GPU-hours, exact in millionths; contracts = target / 1000 rounded. */
static int hedge_size_ratio(const hg_hedge_month_t *rows, size_t nm, int64_t gpus, int64_t ratio,
                            int round) {
  char rb[HGCTL_FMT_LEN], tb[HGCTL_FMT_LEN], sb[HGCTL_FMT_LEN];
  __int128 te = 0, tt = 0, tc = 0, th = 0, tr = 0;
  printf("# contracts = gpus x hours x ratio / %d GPU-hours, rounded %s; residual = target - "
         "hedged\n",
         HG_HEDGE_CONTRACT_GPU_HOURS, round_name(round));
  printf("month,gpus,hours_per_gpu,exposure_gpu_hours,hedge_ratio,target_gpu_hours,contracts,"
         "hedged_gpu_hours,residual_gpu_hours\n");
  for (size_t k = 0; k < nm; k++) {
    const hg_hedge_month_t *r = &rows[k];
    hg_hedge_ratio_size_t z;
    int rc = hg_hedge_size_ratio(r->exposure, ratio, round, &z);
    if (rc != 0) {
      fprintf(stderr, "hgctl hedge size: %04u-%02u: %s\n", r->year, r->month, hg_strerror(rc));
      return EXIT_INPUT;
    }
    printf("%04u-%02u,%" PRId64 ",%" PRId64 ",%" PRId64 ",%s,%s,%" PRId64 ",%" PRId64 ",%s\n",
           r->year, r->month, gpus, r->hours_per_gpu, r->exposure,
           hgctl_fmt_decimal(ratio, 6, rb), hgctl_fmt_decimal(z.target, 6, tb), z.contracts,
           z.hedged, hgctl_fmt_decimal(z.residual, 6, sb));
    te += r->exposure;
    tt += z.target;
    tc += z.contracts;
    th += z.hedged;
    tr += z.residual;
  }
  /* The months' sums; the ratio column stays empty (one ratio for all). */
  if (tt <= INT64_MAX && tt >= INT64_MIN && te <= INT64_MAX && th <= INT64_MAX &&
      tr <= INT64_MAX && tr >= INT64_MIN)
    printf("total,,,%" PRId64 ",,%s,%" PRId64 ",%" PRId64 ",%s\n", (int64_t)te,
           hgctl_fmt_decimal((int64_t)tt, 6, tb), (int64_t)tc, (int64_t)th,
           hgctl_fmt_decimal((int64_t)tr, 6, sb));
  return fflush(stdout) == 0 ? 0 : EXIT_INPUT;
}

int hgctl_hedge_size(int argc, char **argv) {
  const char *gpus_s = NULL, *hours_s = NULL, *months_s = NULL, *round_s = NULL, *ratio_s = NULL;
  const hgctl_opt_t opts[] = {{"--gpus", &gpus_s, NULL},
                        {"--hours-per-month", &hours_s, NULL},
                        {"--months", &months_s, NULL},
                        {"--round", &round_s, NULL},
                        {"--ratio", &ratio_s, NULL}};
  int rc = hgctl_parse_opts("hedge size", argc, argv, opts, 5, hedge_size_usage);
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
  int64_t ratio = 0; /* millionths */
  if (ratio_s != NULL && (hgctl_decimal_parse(ratio_s, 6, 0, &ratio) != 0 || ratio > 10000000)) {
    fprintf(stderr, "hgctl hedge size: --ratio '%s' must be a decimal above 0 and at most 10, with "
                    "at most 6 decimals (e.g. 0.821429)\n", ratio_s);
    return EXIT_USAGE;
  }
  /* Validate every month before printing anything: the items, each a
   * month or a FIRST..LAST range, expanded into months. */
  size_t nitems = hgctl_list_count(months_s), nm = 0, cap = nitems;
  hg_hedge_month_t *rows = calloc(cap, sizeof *rows);
  if (rows == NULL) return EXIT_INPUT;
  const char *next = months_s;
  for (size_t k = 0; k < nitems; k++) {
    size_t len;
    const char *p = hgctl_list_next(&next, &len);
    unsigned y, m, ly, lm;
    const char *dots = memchr(p, '.', len);
    size_t first_len = dots != NULL ? (size_t)(dots - p) : len;
    int bad = hg_hedge_month_parse(p, first_len, &y, &m) != 0;
    ly = y;
    lm = m;
    if (!bad && dots != NULL)
      bad = len < first_len + 3 || dots[1] != '.' ||
            hg_hedge_month_parse(dots + 2, len - first_len - 2, &ly, &lm) != 0;
    if (bad) {
      fprintf(stderr, "hgctl hedge size: month '%.*s' is not YYYY-MM or a range YYYY-MM..YYYY-MM\n",
              (int)len, p);
      free(rows);
      return EXIT_USAGE;
    }
    long span = ((long)ly * 12 + lm) - ((long)y * 12 + m) + 1;
    if (span < 1 || span > HEDGE_RANGE_MAX) {
      fprintf(stderr, "hgctl hedge size: range '%.*s' must run forwards over 1 to %d months\n",
              (int)len, p, HEDGE_RANGE_MAX);
      free(rows);
      return EXIT_USAGE;
    }
    if (nm + (size_t)span > cap) {
      cap = nm + (size_t)span + nitems;
      hg_hedge_month_t *grown = realloc(rows, cap * sizeof *rows);
      if (grown == NULL) {
        free(rows);
        return EXIT_INPUT;
      }
      rows = grown;
    }
    for (long i = 0; i < span; i++, m = m == 12 ? 1 : m + 1, y += m == 1) {
      for (size_t j = 0; j < nm; j++)
        if (rows[j].year == y && rows[j].month == m) {
          fprintf(stderr, "hgctl hedge size: month %04u-%02u is given twice; each month once\n",
                  y, m);
          free(rows);
          return EXIT_USAGE;
        }
      rc = hg_hedge_size(gpus, hours, y, m, round, &rows[nm]);
      if (rc == HG_ERANGE) {
        fprintf(stderr, "hgctl hedge size: %" PRId64 " hours per GPU is more than %04u-%02u has\n",
                hours, y, m);
        free(rows);
        return EXIT_USAGE;
      }
      if (rc != 0) {
        fprintf(stderr, "hgctl hedge size: %04u-%02u: %s\n", y, m, hg_strerror(rc));
        free(rows);
        return EXIT_USAGE;
      }
      nm++;
    }
  }
  if (ratio_s != NULL) {
    int status = hedge_size_ratio(rows, nm, gpus, ratio, round);
    free(rows);
    return status;
  }
  printf("# contracts = gpus x hours / %d GPU-hours, rounded %s; residual = exposure - hedged\n",
         HG_HEDGE_CONTRACT_GPU_HOURS, round_name(round));
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

/* ------------------------------------------------------ hedge margin */

/* One month of a --months list. */
typedef struct ym {
  unsigned year, month;
} ym_t;

/* The --months list of `hgctl <cmd>`: YYYY-MM items, each month once. 0 with
 * *out (malloc'd, the caller frees) and *n, or an exit status with the
 * reason printed. */
static int parse_months(const char *cmd, const char *months_s, ym_t **out, size_t *n) {
  size_t nm = hgctl_list_count(months_s);
  ym_t *ym = calloc(nm, sizeof *ym);
  if (ym == NULL) return EXIT_INPUT;
  const char *next = months_s;
  for (size_t k = 0; k < nm; k++) {
    size_t len;
    const char *p = hgctl_list_next(&next, &len);
    if (hg_hedge_month_parse(p, len, &ym[k].year, &ym[k].month) != 0) {
      fprintf(stderr, "hgctl %s: month '%.*s' is not YYYY-MM\n", cmd, (int)len, p);
      free(ym);
      return EXIT_USAGE;
    }
    for (size_t j = 0; j < k; j++)
      if (ym[j].year == ym[k].year && ym[j].month == ym[k].month) {
        fprintf(stderr, "hgctl %s: month %.*s is given twice; each month once\n", cmd, (int)len,
                p);
        free(ym);
        return EXIT_USAGE;
      }
  }
  *out = ym;
  *n = nm;
  return 0;
}

static void hedge_margin_usage(FILE *o) {
  fputs("usage: hgctl hedge margin --gpus N (--tokens-per-second T | --tokens-per-gpu-hour K)\n"
        "                          --months YYYY-MM[,YYYY-MM...] [--hours-per-month H|full]\n"
        "                          [--rent USD_PER_GPU_HOUR --token-price USD_PER_MTOK]\n"
        "  Sizes the two legs that hedge an inference producer's margin\n"
        "  (token price x tokens per GPU-hour - rent; settlement/CONTRACT.md 6.13, 7.3):\n"
        "  buy the GPU-hour leg, gpus x hours / 1,000 GPU-hours a contract, and sell\n"
        "  the token leg, gpus x hours x K / 10^9 output tokens a contract, each\n"
        "  rounded to the nearest whole contract (exactly half rounds up). T is the\n"
        "  throughput in output tokens per second per GPU after utilisation (at most\n"
        "  3 decimals); K = T x 3,600 tokens per GPU-hour. Hours default to 'full'\n"
        "  (every calendar hour). With --rent and --token-price (USD, at most 6\n"
        "  decimals; today's curve prices of the two contracts) it adds the margin\n"
        "  per GPU-hour and for the month: revenue = token price x K / 10^6.\n",
        o);
}

int hgctl_hedge_margin(int argc, char **argv) {
  const char *gpus_s = NULL, *tps_s = NULL, *tph_s = NULL, *months_s = NULL, *hours_s = NULL,
             *rent_s = NULL, *tok_s = NULL;
  const hgctl_opt_t opts[] = {{"--gpus", &gpus_s, NULL},
                              {"--tokens-per-second", &tps_s, NULL},
                              {"--tokens-per-gpu-hour", &tph_s, NULL},
                              {"--months", &months_s, NULL},
                              {"--hours-per-month", &hours_s, NULL},
                              {"--rent", &rent_s, NULL},
                              {"--token-price", &tok_s, NULL}};
  int rc = hgctl_parse_opts("hedge margin", argc, argv, opts, 7, hedge_margin_usage);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if (!gpus_s || !months_s || (tps_s == NULL) == (tph_s == NULL) ||
      (rent_s == NULL) != (tok_s == NULL)) {
    fprintf(stderr, "hgctl hedge margin: give --gpus, --months, exactly one of "
                    "--tokens-per-second and --tokens-per-gpu-hour, and --rent with "
                    "--token-price or neither\n");
    hedge_margin_usage(stderr);
    return EXIT_USAGE;
  }
  int64_t gpus, hours = 0, tph, rent = 0, tok = 0;
  if (!hgctl_parse_i64(gpus_s, 1, INT64_MAX, &gpus)) {
    fprintf(stderr, "hgctl hedge margin: --gpus '%s' must be a whole number >= 1\n", gpus_s);
    return EXIT_USAGE;
  }
  if (hours_s && strcmp(hours_s, "full") != 0 && !hgctl_parse_i64(hours_s, 1, 744, &hours)) {
    fprintf(stderr, "hgctl hedge margin: --hours-per-month '%s' must be 'full' or 1..744\n",
            hours_s);
    return EXIT_USAGE;
  }
  if (tps_s) {
    int64_t milli; /* thousandths of a token per second */
    if (hgctl_decimal_parse(tps_s, 3, 0, &milli) != 0 || milli > INT64_C(1000000000000)) {
      fprintf(stderr, "hgctl hedge margin: --tokens-per-second '%s' must be a decimal above 0, "
                      "at most 3 decimals and 10^9\n", tps_s);
      return EXIT_USAGE;
    }
    tph = (milli * 3600 + 500) / 1000; /* tokens per GPU-hour, half up */
  } else if (!hgctl_parse_i64(tph_s, 1, INT64_C(1000000000000000), &tph)) {
    fprintf(stderr, "hgctl hedge margin: --tokens-per-gpu-hour '%s' must be a whole number "
                    ">= 1\n", tph_s);
    return EXIT_USAGE;
  }
  if (rent_s && (hgctl_decimal_parse(rent_s, 6, 1, &rent) != 0 || rent > HEDGE_USD_MAX ||
                 hgctl_decimal_parse(tok_s, 6, 1, &tok) != 0 || tok > HEDGE_USD_MAX)) {
    fprintf(stderr, "hgctl hedge margin: --rent and --token-price are USD (0 to %d, at most 6 "
                    "decimals)\n", HGCTL_USD_PER_GPU_HOUR_MAX);
    return EXIT_USAGE;
  }
  ym_t *ym;
  size_t nm;
  if ((rc = parse_months("hedge margin", months_s, &ym, &nm)) != 0) return rc;
  hg_hedge_margin_t *rows = calloc(nm, sizeof *rows);
  if (rows == NULL) {
    free(ym);
    return EXIT_INPUT;
  }
  for (size_t k = 0; k < nm; k++) {
    rc = hg_hedge_margin(gpus, hours, ym[k].year, ym[k].month, tph, rent, tok, &rows[k]);
    if (rc != 0) {
      fprintf(stderr, "hgctl hedge margin: %04u-%02u: %s\n", ym[k].year, ym[k].month,
              rc == HG_ERANGE ? "more hours per GPU than the month has" : hg_strerror(rc));
      free(rows);
      free(ym);
      return EXIT_USAGE;
    }
  }
  free(ym);
  printf("# buy gpu_contracts (1,000 GPU-hours each), sell token_contracts (10^9 output tokens "
         "each); nearest, half up\n");
  printf("month,gpus,gpu_hours,tokens_per_gpu_hour,million_tokens,gpu_contracts_buy,"
         "gpu_residual_gpu_hours,token_contracts_sell,token_residual_million_tokens%s\n",
         rent_s ? ",rent_usd_per_gpu_hour,token_usd_per_million,revenue_usd_per_gpu_hour,"
                  "margin_usd_per_gpu_hour,margin_usd_month"
                : "");
  for (size_t k = 0; k < nm; k++) {
    const hg_hedge_margin_t *r = &rows[k];
    char mt[HGCTL_FMT_LEN], res[HGCTL_FMT_LEN];
    printf("%04u-%02u,%" PRId64 ",%" PRId64 ",%" PRId64 ",%s,%" PRId64 ",%" PRId64 ",%" PRId64
           ",%s",
           r->gpu.year, r->gpu.month, gpus, r->gpu.exposure, r->tokens_per_gpu_hour,
           hgctl_fmt_decimal(r->tokens, 6, mt), r->gpu.contracts, r->gpu.residual,
           r->token_contracts, hgctl_fmt_decimal(r->token_residual, 6, res));
    if (rent_s) {
      char a[HGCTL_FMT_LEN], b[HGCTL_FMT_LEN], c[HGCTL_FMT_LEN], d[HGCTL_FMT_LEN],
          e[HGCTL_FMT_LEN];
      printf(",%s,%s,%s,%s,%s", hgctl_fmt_decimal(rent, 6, a), hgctl_fmt_decimal(tok, 6, b),
             hgctl_fmt_decimal(r->revenue_per_gpu_hour, 6, c),
             hgctl_fmt_decimal(r->margin_per_gpu_hour, 6, d),
             hgctl_fmt_decimal(r->margin_month, 6, e));
    }
    putchar('\n');
  }
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
        "  Days strictly ascending; prices > 0 with at most 6 decimals, in USD per\n"
        "  GPU-hour: a value above 1000 is refused as another unit (3400000 is\n"
        "  micro-USD; write 3.400000). `hgctl index fixings` writes FIXINGS.csv.\n"
        "  Provisional days are used as published (a restatement may change them);\n"
        "  NO_FIX days and days missing from either file are gaps: the change is\n"
        "  taken between the aligned days around a gap, as one change. The output\n"
        "  first says what was read: days, range, PROVISIONAL and NO_FIX days, gaps.\n",
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

/* Refuses a series whose values are not plausibly USD per GPU-hour. */
static int check_units(const char *what, const char *path, const hg_hedge_obs_t *v, size_t n) {
  char day[11], b[HGCTL_FMT_LEN], m[HGCTL_FMT_LEN];
  for (size_t k = 0; k < n; k++) {
    if (v[k].status == HG_HEDGE_NO_FIX || v[k].value <= HEDGE_USD_MAX) continue;
    hg_index_day_format(v[k].day, day);
    /* Read as micro-USD, the written number is value / 10^6 USD. */
    fprintf(stderr,
            "hgctl hedge ratio: %s file '%s', %s: the value was read as %s USD per GPU-hour, "
            "above %" PRId64 ": values must be USD per GPU-hour; if it is micro-USD, write %s; "
            "nothing computed\n",
            what, path, day, hgctl_fmt_decimal(v[k].value, 6, b), HEDGE_USD_MAX / 1000000,
            hgctl_fmt_decimal(v[k].value / 1000000, 6, m));
    return EXIT_INPUT;
  }
  return 0;
}

/* What was read: days, first and last, the value range. */
static void print_read(const char *what, const hg_hedge_obs_t *v, size_t n) {
  char d0[11], d1[11], lo_s[HGCTL_FMT_LEN], hi_s[HGCTL_FMT_LEN];
  int64_t lo = INT64_MAX, hi = 0;
  for (size_t k = 0; k < n; k++) {
    if (v[k].status == HG_HEDGE_NO_FIX) continue;
    if (v[k].value < lo) lo = v[k].value;
    if (v[k].value > hi) hi = v[k].value;
  }
  hg_index_day_format(v[0].day, d0);
  hg_index_day_format(v[n - 1].day, d1);
  printf("%s_read %zu days %s..%s usd_per_gpu_hour %s..%s\n", what, n, d0, d1,
         lo == INT64_MAX ? "-" : hgctl_fmt_decimal(lo, 6, lo_s),
         lo == INT64_MAX ? "-" : hgctl_fmt_decimal(hi, 6, hi_s));
}

/* Aligned days (both files, index NO_FIX skipped) more than one calendar
 * day apart: each such change spans a gap. */
static size_t count_gaps(const hg_hedge_obs_t *r, size_t nr, const hg_hedge_obs_t *x, size_t nx) {
  size_t i = 0, j = 0, gaps = 0;
  int32_t prev = INT32_MIN;
  while (i < nr && j < nx) {
    if (r[i].day < x[j].day) i++;
    else if (r[i].day > x[j].day) j++;
    else {
      if (x[j].status != HG_HEDGE_NO_FIX) {
        if (prev != INT32_MIN && r[i].day - prev > 1) gaps++;
        prev = r[i].day;
      }
      i++;
      j++;
    }
  }
  return gaps;
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
  if (check_units("rent", rent_s, rent, nr) != 0 || check_units("index", index_s, idx, ni) != 0)
    goto out;
  size_t prov = 0, nofix = 0;
  for (size_t k = 0; k < ni; k++) {
    prov += idx[k].status == HG_HEDGE_PROVISIONAL;
    nofix += idx[k].status == HG_HEDGE_NO_FIX;
  }
  print_read("rent", rent, nr);
  print_read("index", idx, ni);
  printf("index_provisional %zu (used as published)\nindex_no_fix %zu (skipped)\n"
         "gaps %zu (changes across days missing from either file or NO_FIX, each taken as one "
         "change)\n",
         prov, nofix, count_gaps(rent, nr, idx, ni));
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
        "  price = X x T x 3600 / 1,000,000. T is the throughput: output tokens\n"
        "  delivered per second per GPU, averaged over the hours you pay for, so\n"
        "  after utilisation (idle time, batching, failed requests taken out), not a\n"
        "  benchmark's peak.\n"
        "  Prints the exact value (a repeating block in parentheses: 0.69(4) is\n"
        "  0.694444...; omitted if longer than 64 digits) and the value rounded half\n"
        "  up to N decimals (default 6). Inputs: positive decimals, at most 15\n"
        "  significant digits and 12 decimals.\n"
        "  --rent R (with --usd-per-million-tokens): also prints the inference margin\n"
        "  at these prices, token price x T x 3,600 / 10^6 - R USD per GPU-hour\n"
        "  (settlement/CONTRACT.md 6.13): give today's curve prices of the token and\n"
        "  GPU-hour contracts; then X and R take at most 6 decimals, T at most 3.\n",
        o);
}

/* The margin line of `convert --rent`: integer micro-USD, the rule of
 * hg_hedge_margin_per_gpu_hour. */
static int convert_margin(const char *mtok_s, const char *tps_s, const char *rent_s) {
  int64_t tok, rent, milli, revenue, margin;
  if (hgctl_decimal_parse(mtok_s, 6, 0, &tok) != 0 || tok > HEDGE_USD_MAX ||
      hgctl_decimal_parse(rent_s, 6, 1, &rent) != 0 || rent > HEDGE_USD_MAX ||
      hgctl_decimal_parse(tps_s, 3, 0, &milli) != 0 || milli > INT64_C(1000000000000)) {
    fprintf(stderr, "hgctl convert: with --rent, --usd-per-million-tokens and --rent are USD "
                    "with at most 6 decimals (at most %d) and --tokens-per-second has at most 3 "
                    "decimals\n", HGCTL_USD_PER_GPU_HOUR_MAX);
    return EXIT_USAGE;
  }
  int64_t tph = (milli * 3600 + 500) / 1000;
  if (hg_hedge_margin_per_gpu_hour(tok, tph, rent, &revenue, &margin) != 0) {
    fprintf(stderr, "hgctl convert: the margin is out of range\n");
    return EXIT_USAGE;
  }
  char a[HGCTL_FMT_LEN], b[HGCTL_FMT_LEN], c[HGCTL_FMT_LEN];
  printf("tokens_per_gpu_hour %" PRId64 "\n", tph);
  printf("rent_usd_per_gpu_hour %s\n", hgctl_fmt_decimal(rent, 6, a));
  printf("revenue_usd_per_gpu_hour %s\n", hgctl_fmt_decimal(revenue, 6, b));
  printf("margin_usd_per_gpu_hour %s\n", hgctl_fmt_decimal(margin, 6, c));
  return 0;
}

int hgctl_convert(int argc, char **argv) {
  const char *price_s = NULL, *mtok_s = NULL, *tps_s = NULL, *places_s = NULL, *rent_s = NULL;
  const hgctl_opt_t opts[] = {{"--price", &price_s, NULL},
                        {"--usd-per-million-tokens", &mtok_s, NULL},
                        {"--tokens-per-second", &tps_s, NULL},
                        {"--places", &places_s, NULL},
                        {"--rent", &rent_s, NULL}};
  int rc = hgctl_parse_opts("convert", argc, argv, opts, 5, convert_usage);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if ((price_s == NULL) == (mtok_s == NULL) || tps_s == NULL) {
    fprintf(stderr, "hgctl convert: give --tokens-per-second and exactly one of --price and "
                    "--usd-per-million-tokens\n");
    convert_usage(stderr);
    return EXIT_USAGE;
  }
  if (rent_s && mtok_s == NULL) {
    fprintf(stderr, "hgctl convert: --rent goes with --usd-per-million-tokens (the margin of a "
                    "token price against a rent)\n");
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
  printf("# tokens_per_second: output tokens delivered per second per GPU after utilisation\n");
  printf("%s %s\n", name, q.exact[0] ? q.exact : "(repeating block longer than 64 digits)");
  printf("%s_rounded %s\n", name, q.rounded);
  printf("exact %s\n", q.terminating ? "yes" : "no (parenthesized digits repeat forever)");
  if (rent_s && (rc = convert_margin(mtok_s, tps_s, rent_s)) != 0) return rc;
  return fflush(stdout) == 0 ? 0 : EXIT_INPUT;
}

/* ---------------------------------------------------- index fixings */

static void index_fixings_usage(FILE *o) {
  fputs("usage: hgctl index fixings --data DIR --index GPU.GRADE [--from YYYY-MM-DD]\n"
        "                           [--to YYYY-MM-DD] [capacities]\n"
        "  Replays DIR's journal (read-only) and prints the index's fixings as the\n"
        "  CSV that `hgctl hedge ratio --index` and `hgctl replay --fixings` read:\n"
        "  header day,value,status; value in USD per GPU-hour with 6 decimals;\n"
        "  status FINAL, PROVISIONAL, or NO_FIX with an empty value. Days with no\n"
        "  fixing at all are not written (a gap). A CARRIED fixing is written with\n"
        "  its status and the value carried.\n" CAPS_HELP,
        o);
}

typedef struct fix_export {
  const replay_t *rp;
  int32_t from, to;
  size_t n;
} fix_export_t;

static void export_fixing(void *ctx, const hg_exchange_fixing_info_t *info) {
  fix_export_t *x = ctx;
  const hg_index_fixing_t *f = &info->fixing;
  if (strcmp(info->gpu, x->rp->wf_gpu) != 0 || strcmp(info->grade, x->rp->wf_grade) != 0) return;
  if (f->day < x->from || f->day > x->to) return;
  char day[11], v[HGCTL_FMT_LEN];
  if (x->n == 0) printf("day,value,status\n");
  hg_index_day_format(f->day, day);
  if (f->status == HG_INDEX_NO_FIX) printf("%s,,NO_FIX\n", day);
  else printf("%s,%s,%s\n", day, hgctl_fmt_decimal(f->value, 6, v), hg_index_status_str(f->status));
  x->n++;
}

int hgctl_index_fixings(int argc, char **argv) {
  const char *data = NULL, *index = NULL, *from = NULL, *to = NULL, *mi = NULL, *ma = NULL,
             *mo = NULL;
  const hgctl_opt_t opts[] = {{"--data", &data, NULL},
                              {"--index", &index, NULL},
                              {"--from", &from, NULL},
                              {"--to", &to, NULL},
                              {"--max-instruments", &mi, NULL},
                              {"--max-accounts", &ma, NULL},
                              {"--max-book-orders", &mo, NULL}};
  int rc = hgctl_parse_opts("index fixings", argc, argv, opts, 7, index_fixings_usage);
  if (rc != 0) return rc < 0 ? 0 : rc;
  if (!data || !index) {
    fprintf(stderr, "hgctl index fixings: missing %s\n", !data ? "--data" : "--index");
    index_fixings_usage(stderr);
    return EXIT_USAGE;
  }
  replay_t rp;
  hgctl_replay_init(&rp);
  rp.data_dir = data;
  fix_export_t x = {.rp = &rp, .from = INT32_MIN, .to = INT32_MAX};
  if (!hgctl_replay_set_index(&rp, index)) {
    fprintf(stderr, "hgctl index fixings: --index must be GPU.GRADE, e.g. B200.A\n");
    return EXIT_USAGE;
  }
  if ((from && hg_index_day_parse(from, strlen(from), &x.from) != 0) ||
      (to && hg_index_day_parse(to, strlen(to), &x.to) != 0)) {
    fprintf(stderr, "hgctl index fixings: --from and --to are YYYY-MM-DD dates\n");
    return EXIT_USAGE;
  }
  if ((rc = hgctl_parse_caps("index fixings", mi, ma, mo, &rp.xcfg)) != 0) return rc;
  int status = EXIT_INPUT;
  if (hgctl_replay_run(&rp, false) != 0) goto out;
  hg_exchange_foreach_fixing(rp.ex, export_fixing, &x);
  if (x.n == 0) {
    fprintf(stderr, "hgctl index fixings: %s has no fixing of %s%s\n", data, index,
            from || to ? " in that range" : "");
    goto out;
  }
  status = fflush(stdout) == 0 ? 0 : EXIT_INPUT;
out:
  hgctl_replay_dispose(&rp);
  return status;
}
