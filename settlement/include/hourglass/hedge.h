/*
 * hourglass/hedge.h - offline analytics for hedgers: how many contracts to
 * hedge, the minimum-variance hedge ratio against the index, and the
 * conversion between USD per GPU-hour and USD per million output tokens.
 *
 * These are tools, not exchange state: nothing here is ever journaled or
 * hashed. Sizing and conversion are exact integer arithmetic (128-bit
 * intermediates); the hedge ratio uses double precision statistics over
 * integer price changes (see hg_hedge_ratio for the rounding).
 *
 * Units. Prices are micro-USD per GPU-hour (int64), as in index fixings and
 * settlement/CONTRACT.md section 3. A contract is HG_HEDGE_CONTRACT_GPU_HOURS
 * GPU-hours (settlement/CONTRACT.md section 1). Days are day numbers of
 * hg_index_day_parse().
 *
 * Threads. Every function is pure (no global state) and may be called from
 * any thread. Errors: 0 or a negative code of hourglass/error.h.
 */
#ifndef HOURGLASS_HEDGE_H
#define HOURGLASS_HEDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GPU-hours per contract. */
#define HG_HEDGE_CONTRACT_GPU_HOURS 1000

/* ------------------------------------------------------------------------ */
/* Hedge size                                                               */
/* ------------------------------------------------------------------------ */

/* How a fractional number of contracts becomes a whole one. */
typedef enum hg_hedge_round {
  HG_HEDGE_ROUND_NEAREST = 0, /* nearest, exactly half a contract rounds up (default) */
  HG_HEDGE_ROUND_DOWN = 1,    /* never over-hedge */
  HG_HEDGE_ROUND_UP = 2       /* never under-hedge */
} hg_hedge_round_t;

typedef struct hg_hedge_month {
  uint16_t year;
  uint8_t month;          /* 1..12 */
  int64_t hours_per_gpu;  /* GPU-hours used per GPU in the month */
  int64_t exposure;       /* gpus x hours_per_gpu, GPU-hours */
  int64_t contracts;      /* contracts to buy */
  int64_t hedged;         /* contracts x HG_HEDGE_CONTRACT_GPU_HOURS */
  int64_t residual;       /* exposure - hedged: > 0 unhedged, < 0 over-hedged */
} hg_hedge_month_t;

/*
 * Contracts to hedge gpus GPUs used hours_per_gpu hours each in delivery
 * month (year, month). hours_per_gpu 0 means "all month": 24 x the month's
 * calendar days. contracts = exposure / 1000 rounded as round says; the
 * residual is what stays unhedged (negative: over-hedged).
 * Errors (out untouched): HG_EINVAL (gpus <= 0, hours_per_gpu < 0, year not
 * 1970..9999, month not 1..12, round unknown), HG_ERANGE (hours_per_gpu
 * above the month's calendar hours), HG_EOVERFLOW (exposure, or the hedged
 * contracts x 1000 GPU-hours, beyond int64).
 */
int hg_hedge_size(int64_t gpus, int64_t hours_per_gpu, unsigned year, unsigned month, int round,
                  hg_hedge_month_t *out);

/* A month's hedge scaled by a hedge ratio (hg_hedge_ratio's, in
 * millionths), exact in millionths of a GPU-hour. */
typedef struct hg_hedge_ratio_size {
  int64_t target;    /* exposure x ratio, millionths of a GPU-hour */
  int64_t contracts; /* target / 1000 GPU-hours, rounded as asked */
  int64_t hedged;    /* contracts x HG_HEDGE_CONTRACT_GPU_HOURS, GPU-hours */
  int64_t residual;  /* target - hedged, millionths: > 0 unhedged, < 0 over-hedged */
} hg_hedge_ratio_size_t;

/*
 * Contracts for exposure GPU-hours (hg_hedge_month_t.exposure) hedged at
 * ratio millionths (0 < ratio <= 10,000,000: at most 10x): target =
 * exposure x ratio, contracts = target / (1000 GPU-hours) rounded as round
 * says (nearest: exactly half rounds up). Errors (out untouched): HG_EINVAL
 * (exposure < 0, ratio out of range, round unknown), HG_EOVERFLOW (a field
 * beyond int64).
 */
int hg_hedge_size_ratio(int64_t exposure, int64_t ratio, int round, hg_hedge_ratio_size_t *out);

/* "YYYY-MM" (exactly 7 characters, year 1970..9999) to year and month.
 * 0 or HG_EPARSE. */
int hg_hedge_month_parse(const char *s, size_t len, unsigned *year, unsigned *month);

/* ------------------------------------------------------------------------ */
/* Price series (CSV) and the minimum-variance hedge ratio                  */
/* ------------------------------------------------------------------------ */

/* Status values of an index series row (the fixings file), as index.h. */
#define HG_HEDGE_PROVISIONAL 1
#define HG_HEDGE_FINAL 2
#define HG_HEDGE_NO_FIX 3

typedef struct hg_hedge_obs {
  int32_t day;   /* day number */
  uint8_t status;/* rent series: 0; fixings: HG_HEDGE_* */
  int64_t value; /* micro-USD per GPU-hour; 0 for NO_FIX */
} hg_hedge_obs_t;

/* Where a CSV parse failed: line (1-based, the header is line 1), column
 * (0-based, -1 for the whole line) and a static description. */
typedef struct hg_hedge_csv_error {
  uint32_t line;
  int column;
  const char *what;
} hg_hedge_csv_error_t;

/*
 * Parses a rent history: header `day,price` then one line per observation,
 * `YYYY-MM-DD,<USD per GPU-hour, at most 6 decimals, > 0>`, days strictly
 * ascending. A UTF-8 byte-order mark before the header, CRLF and a missing
 * final newline are accepted; blank lines are not. On success returns 0 and *out (malloc'd; free() it) with *n entries
 * (at least one). Errors: HG_EPARSE with *err describing the first bad line
 * (header, day, price, order, column count), -ENOMEM. Nothing is allocated
 * on failure.
 */
int hg_hedge_rent_parse(const char *buf, size_t len, hg_hedge_obs_t **out, size_t *n,
                        hg_hedge_csv_error_t *err);

/*
 * Parses a fixings file: header `day,value,status` then
 * `YYYY-MM-DD,<USD per GPU-hour, at most 6 decimals, > 0>,FINAL|PROVISIONAL`
 * or `YYYY-MM-DD,,NO_FIX` (empty value), days strictly ascending.
 * Otherwise as hg_hedge_rent_parse.
 */
int hg_hedge_fixings_parse(const char *buf, size_t len, hg_hedge_obs_t **out, size_t *n,
                           hg_hedge_csv_error_t *err);

typedef struct hg_hedge_ratio {
  size_t days;          /* days present in both series (NO_FIX index days skipped) */
  size_t changes;       /* days - 1: price changes used */
  double rent_vol;      /* sample standard deviation of the rent's changes, USD/GPU-hour */
  double index_vol;     /* same for the index */
  double correlation;   /* of the two change series */
  double ratio;         /* correlation x rent_vol / index_vol */
  double effectiveness; /* correlation squared */
  const char *why;      /* static reason when the call failed, "" on success */
} hg_hedge_ratio_t;

/*
 * Minimum-variance hedge ratio of a rent series against an index series.
 * The two are aligned on the days present in both (index NO_FIX days are
 * skipped); on consecutive aligned days the price CHANGES dS = S_t - S_{t-1}
 * and dF = F_t - F_{t-1} are taken (exact int64 micro-USD differences), since
 * a futures hedge pays per GPU-hour the change in price, not a return.
 * Then, in double precision with two-pass (mean-centred) sums:
 *   rent_vol = sqrt(sum (dS - mean dS)^2 / (k - 1)), index_vol likewise,
 *   correlation = sum (dS - mS)(dF - mF) / sqrt(sum (dS - mS)^2 sum (dF - mF)^2),
 *   ratio = correlation x rent_vol / index_vol (= cov / var(dF)),
 *   effectiveness = correlation^2.
 * Results are IEEE doubles, not rounded here (the CLI prints 6 decimals).
 * Errors (out->why says which): HG_EINVAL (NULL), HG_ERANGE (fewer than 3
 * common days, so fewer than 2 changes), HG_ESTATE (the changes of the index
 * or of the rent have zero variance: correlation undefined).
 */
int hg_hedge_ratio(const hg_hedge_obs_t *rent, size_t n_rent, const hg_hedge_obs_t *index,
                   size_t n_index, hg_hedge_ratio_t *out);

/* ------------------------------------------------------------------------ */
/* Inference margin: both legs (settlement/CONTRACT.md sections 6.13, 7.3)  */
/* ------------------------------------------------------------------------ */

/* Output tokens per token contract: 1,000 million (CONTRACT.md 7.3). */
#define HG_HEDGE_CONTRACT_TOKENS INT64_C(1000000000)

typedef struct hg_hedge_margin {
  hg_hedge_month_t gpu;         /* GPU-hour leg (hg_hedge_size, nearest): contracts to buy */
  int64_t tokens_per_gpu_hour;  /* throughput, output tokens per GPU-hour */
  int64_t tokens;               /* gpu.exposure x tokens_per_gpu_hour: output tokens */
  int64_t token_contracts;      /* tokens / 10^9 rounded half up: contracts to sell */
  int64_t token_residual;       /* tokens - token_contracts x 10^9: > 0 unhedged */
  /* At the given prices (all 0 when both prices are 0): */
  int64_t revenue_per_gpu_hour; /* token_price x tokens_per_gpu_hour / 10^6, half up, micro-USD */
  int64_t margin_per_gpu_hour;  /* revenue_per_gpu_hour - rent, micro-USD (signed) */
  int64_t margin_month;         /* exposure x token_price x tph / 10^6 (half up) - exposure x rent */
} hg_hedge_margin_t;

/* The margin of one GPU-hour: *revenue = token_price (micro-USD per million
 * output tokens) x tokens_per_gpu_hour / 10^6 rounded half up, *margin =
 * *revenue - rent (micro-USD per GPU-hour). HG_EINVAL (tokens_per_gpu_hour
 * <= 0 or above 10^15, a price < 0 or above 10^12). */
int hg_hedge_margin_per_gpu_hour(int64_t token_price, int64_t tokens_per_gpu_hour, int64_t rent,
                                 int64_t *revenue, int64_t *margin);

/*
 * Sizes the inference-margin hedge of gpus GPUs used hours_per_gpu hours
 * (0: the whole month) in (year, month), producing tokens_per_gpu_hour
 * output tokens per GPU-hour: the GPU-hour leg (bought, as hg_hedge_size
 * rounds to nearest) and the token leg (sold, 10^9 tokens a contract,
 * rounded half up), and the margin at rent (micro-USD per GPU-hour) and
 * token_price (micro-USD per million output tokens). Worked example:
 * settlement/CONTRACT.md section 6.13. Errors (out untouched): those of
 * hg_hedge_size and of hg_hedge_margin_per_gpu_hour, HG_EOVERFLOW (tokens or
 * a money figure beyond int64).
 */
int hg_hedge_margin(int64_t gpus, int64_t hours_per_gpu, unsigned year, unsigned month,
                    int64_t tokens_per_gpu_hour, int64_t rent, int64_t token_price,
                    hg_hedge_margin_t *out);

/* ------------------------------------------------------------------------ */
/* Exact decimal conversion: USD per GPU-hour <-> USD per million tokens    */
/* ------------------------------------------------------------------------ */

/* A positive decimal value = mant / 10^scale. */
typedef struct hg_hedge_decimal {
  uint64_t mant;  /* 1 .. 10^15 - 1 */
  uint32_t scale; /* 0 .. 12 */
} hg_hedge_decimal_t;

/* Parses "123", "0.25", "12.500" (digits with at most one '.', at most 15
 * significant digits, at most 12 decimals, > 0). 0, HG_EPARSE (syntax) or
 * HG_ERANGE (zero, too many digits or decimals). */
int hg_hedge_decimal_parse(const char *s, size_t len, hg_hedge_decimal_t *out);

/* Longest repeating block written in hg_hedge_quote_t.exact. */
#define HG_HEDGE_PERIOD_MAX 64

typedef struct hg_hedge_quote {
  /* Exact value: integer part, then the fractional digits, a repeating
   * block in parentheses ("0.69(4)" is 0.69444...). "" when the repeating
   * block would be longer than HG_HEDGE_PERIOD_MAX digits. */
  char exact[192];
  /* Rounded half up to the requested number of decimals. */
  char rounded[96];
  int terminating; /* 1 if exact has no repeating block */
} hg_hedge_quote_t;

/*
 * USD per million output tokens of a GPU-hour priced price_usd (USD per
 * GPU-hour) serving tps tokens per second: price / (tps x 3600) x 10^6,
 * exactly. places (0..18) is the rounding of out->rounded. 0 or HG_EINVAL.
 */
int hg_hedge_usd_per_mtok(const hg_hedge_decimal_t *price_usd, const hg_hedge_decimal_t *tps,
                          unsigned places, hg_hedge_quote_t *out);

/* The reverse: USD per GPU-hour = usd_per_mtok x tps x 3600 / 10^6 (always a
 * terminating decimal). 0 or HG_EINVAL. */
int hg_hedge_usd_per_gpu_hour(const hg_hedge_decimal_t *usd_per_mtok,
                              const hg_hedge_decimal_t *tps, unsigned places,
                              hg_hedge_quote_t *out);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_HEDGE_H */
