/*
 * hourglass/index.h - the rental index IGX-<GPU>-<GRADE> and the token-price
 * index TPX-<CLASS>-<GRADE> (daily fixings), methodology v1 as written in
 * settlement/CONTRACT.md sections 2, 3, 7.1 and 7.2: one computation, two
 * products (hg_index_product_t).
 *
 * Pure library: no clock, no random source, no floating point, no I/O.
 * Prices are int64 micro-USD per GPU-hour, volumes int64 GPU-hours, days are
 * int32 counts of UTC days since 1970-01-01, timestamps int64 UTC seconds.
 *
 * Pieces:
 *  - the grade registry (data: default grades A, B, C and their attributes);
 *  - samples: parsed from CSV (hg_index_samples_parse) or filled in memory;
 *  - the provider registry (provider -> grade with effective dates);
 *  - hg_index_fix(): steps 1-6 and 8 for one day, producing a fixing record
 *    and its receipt; reads (never writes) the fixing history for carry-forward;
 *  - the fixing history: step 7 (PROVISIONAL -> FINAL, restatement), operator
 *    published external fixings. Records are plain integers and fixed-size
 *    strings so that they can be stored byte for byte (the exchange snapshot
 *    and the store's fixings table, hourglass/store.h).
 *
 * Threads: nothing here is shared or locked. Every object belongs to the thread
 * that created it; const inputs may be read by several threads at once.
 * Memory: functions that allocate say so and name the matching dispose call.
 */
#ifndef HOURGLASS_INDEX_H
#define HOURGLASS_INDEX_H

#include <stddef.h>
#include <stdint.h>

#define HG_INDEX_METHODOLOGY "v1"

/* Fixed string capacities, NUL included: a CSV field longer than the capacity
 * minus one is rejected (HG_INDEX_CSV_TOO_LONG). */
#define HG_INDEX_PROVIDER_MAX 32
#define HG_INDEX_REGION_MAX 32
#define HG_INDEX_GPU_MAX 16
#define HG_INDEX_GRADE_MAX 8
#define HG_INDEX_SOURCE_MAX 48

/* Input limits that keep every sum inside int64 (volume x count < 2^63) and
 * every sample index inside uint32. A volume above the limit is a parse error
 * (HG_INDEX_CSV_RANGE) or, for in-memory samples, makes hg_index_fix fail. */
#define HG_INDEX_VOLUME_MAX INT64_C(1000000000000) /* 10^12 GPU-hours */
#define HG_INDEX_SAMPLES_MAX (UINT32_C(1) << 23)

#define HG_INDEX_HOURS 24
#define HG_INDEX_TICK_MICRO_USD 1000

/* ---------------------------------------------------------------- grades */

/* One grade (settlement/CONTRACT.md section 2). A zero numeric limit means
 * the contract sets none for that grade (settlement/CONTRACT.md section 5.5). */
typedef struct hg_grade {
  char gpu[HG_INDEX_GPU_MAX];    /* GPU model, e.g. "B200" */
  char code[HG_INDEX_GRADE_MAX]; /* "A", "B", "C" */
  uint32_t min_uptime_bp;        /* minimum uptime SLA, basis points */
  uint8_t rdma_required;
  uint32_t min_allreduce_gbps;   /* minimum all-reduce bandwidth, GB/s */
  uint8_t attestation_required;  /* e.g. SOC 2 Type II */
  uint8_t tenant_isolation;      /* tenant-isolated network and monitoring */
  uint8_t health_checks;         /* active+passive checks with automatic drain */
  uint8_t tenant_metrics;        /* tenant-visible GPU metrics */
  uint32_t max_provisioning_h;   /* maximum provisioning time, hours (0: none) */
  uint32_t burn_in_h;            /* burn-in hours before listing */
} hg_grade_t;

/* The default grade table (A, B, C for B200). The pointer is static and
 * valid for the life of the process; *n receives the entry count. */
const hg_grade_t *hg_index_grades_default(size_t *n);

/* Finds grade `code` of GPU model `gpu` in the default table. Returns the
 * static entry or NULL when there is none. */
const hg_grade_t *hg_index_grade_find(const char *gpu, const char *code);

/* ---------------------------------------------------------- token grades */

/* One output grade (settlement/CONTRACT.md section 7.1): what makes token
 * offers of different providers the same thing. */
typedef struct hg_token_grade {
  char cls[HG_INDEX_GPU_MAX];    /* model class, e.g. "OW671B" */
  char code[HG_INDEX_GRADE_MAX]; /* "S", "F" */
  const char *family;            /* the model family, in words */
  uint32_t input_tokens;         /* I: input tokens per request */
  uint32_t output_tokens;        /* O: output tokens per request */
  uint32_t p50_tps_floor;        /* P50 output tokens per second per request */
  uint32_t min_availability_bp;  /* successful requests, basis points */
} hg_token_grade_t;

/* The default output grade table (OW70B and OW671B, grades S and F). The
 * pointer is static; *n receives the entry count. */
const hg_token_grade_t *hg_index_token_grades_default(size_t *n);

/* Finds grade `code` of model class `cls` in the default table, or NULL. */
const hg_token_grade_t *hg_index_token_grade_find(const char *cls, const char *code);

/* ------------------------------------------------------------- products */

/*
 * What an index prices. Both are computed by hg_index_fix, one code path
 * (settlement/CONTRACT.md sections 3 and 7.2); the product decides only the
 * CSV headers, the grade table and the index name. For HG_INDEX_TOKENS a
 * sample's `gpu` field holds the model class, its price is micro-USD per
 * million output tokens (all-in, section 7.2) and its volume is million
 * output tokens.
 */
typedef enum hg_index_product {
  HG_INDEX_GPU_HOURS = 0, /* IGX-<GPU>-<GRADE>, USD per GPU-hour */
  HG_INDEX_TOKENS = 1     /* TPX-<CLASS>-<GRADE>, USD per million output tokens */
} hg_index_product_t;

/* "IGX" or "TPX"; NULL for an unknown product. */
const char *hg_index_product_prefix(hg_index_product_t product);

/* The samples header of the product (exactly as the parser requires) and
 * the name of its volume column ("volume_gpu_hours" /
 * "volume_million_tokens"). NULL for an unknown product. */
const char *hg_index_product_header(hg_index_product_t product);
const char *hg_index_product_volume_name(hg_index_product_t product);

/* True when (underlying, code) is a grade of the product's default table:
 * hg_index_grade_find for GPU-hours, hg_index_token_grade_find for tokens. */
int hg_index_product_grade_known(hg_index_product_t product, const char *underlying,
                                 const char *code);

/* --------------------------------------------------------------- samples */

enum { HG_INDEX_TRADE = 1, HG_INDEX_QUOTE = 2 };

/* One input sample. All strings NUL-terminated within their arrays. */
typedef struct hg_index_sample {
  int64_t ts;     /* UTC seconds */
  int64_t price;  /* micro-USD per GPU-hour */
  int64_t volume; /* GPU-hours */
  int32_t term_days;
  uint8_t kind; /* HG_INDEX_TRADE or HG_INDEX_QUOTE */
  char provider[HG_INDEX_PROVIDER_MAX];
  char region[HG_INDEX_REGION_MAX];
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
} hg_index_sample_t;

/* Why a CSV line was rejected. */
#define HG_INDEX_CSV_REASONS(XX)                                     \
  XX(HEADER, "header does not match the expected header")            \
  XX(FIELD_COUNT, "wrong number of fields")                          \
  XX(EMPTY_LINE, "empty line")                                       \
  XX(EMPTY_FIELD, "empty field")                                     \
  XX(BAD_NUMBER, "not a valid number")                               \
  XX(TOO_MANY_DECIMALS, "more than 6 decimal places")                \
  XX(OVERFLOW, "number out of the 64-bit (or 32-bit) range")         \
  XX(RANGE, "value above the allowed maximum")                       \
  XX(UNKNOWN_KIND, "kind is neither 'trade' nor 'quote'")            \
  XX(TOO_LONG, "field longer than allowed")                          \
  XX(BAD_CHAR, "control character or quote in field")                \
  XX(BAD_DATE, "not a valid YYYY-MM-DD date")                        \
  XX(DUPLICATE_ROW, "same provider, gpu and effective_from twice")   \
  XX(TOO_MANY, "too many lines")

enum {
  HG_INDEX_CSV_OK = 0,
#define HG_INDEX_CSV_ENUM(name, msg) HG_INDEX_CSV_##name,
  HG_INDEX_CSV_REASONS(HG_INDEX_CSV_ENUM)
#undef HG_INDEX_CSV_ENUM
};

/* One rejected line: 1-based physical line number (the header is line 1),
 * the reason and the 0-based column it concerns (-1 for the whole line). */
typedef struct hg_index_csv_error {
  uint32_t line;
  int32_t column;
  int reason;
} hg_index_csv_error_t;

/* Static message for a HG_INDEX_CSV_* reason ("unknown" otherwise). */
const char *hg_index_csv_reason_str(int reason);

/* The result of parsing a samples file. samples[i] came from line lines[i].
 * Owned by the caller; release with hg_index_samples_dispose(). */
typedef struct hg_index_sample_set {
  hg_index_sample_t *samples;
  uint32_t *lines;
  size_t n, cap;
  hg_index_csv_error_t *errors;
  size_t n_errors, cap_errors;
} hg_index_sample_set_t;

/*
 * Parses a samples CSV held in buf[0..len). The first line must be exactly
 * ts,provider,region,gpu,grade,term_days,price_usd_per_gpu_hour,volume_gpu_hours,kind
 * A UTF-8 byte-order mark before the header is skipped. A trailing "\r" is
 * removed from every line. Every other line becomes a
 * sample or an entry in out->errors; nothing is skipped. Fields are not
 * quoted ('"' is rejected). Numbers: ts, term_days and volume are decimal
 * integers with an optional leading '-'; price is [-]digits[.digits] with at
 * most 6 decimals, converted exactly to micro-USD.
 * A bad header is recorded as an error for line 1 and nothing else is parsed.
 * Returns 0 (line errors are data, not failures), -ENOMEM, or HG_EINVAL for a
 * NULL argument. On failure *out is left empty and owns nothing.
 */
int hg_index_samples_parse(const char *buf, size_t len, hg_index_sample_set_t *out);

/* hg_index_samples_parse for either product: the header required is
 * hg_index_product_header(product) (for HG_INDEX_TOKENS
 * ts,provider,region,class,grade,term_days,price_usd_per_million_tokens,volume_million_tokens,kind);
 * every other rule is the same. HG_EINVAL also for an unknown product. */
int hg_index_samples_parse_product(const char *buf, size_t len, hg_index_product_t product,
                                   hg_index_sample_set_t *out);

/* Frees what hg_index_samples_parse allocated; safe on a zeroed set. */
void hg_index_samples_dispose(hg_index_sample_set_t *set);

/* ------------------------------------------------------ provider registry */

typedef struct hg_index_reg_row {
  char provider[HG_INDEX_PROVIDER_MAX];
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  int32_t effective_from; /* day number */
} hg_index_reg_row_t;

/* Provider registry; rows sorted by (provider, gpu, effective_from) after
 * parse/add. Owned by the caller; release with hg_index_registry_dispose(). */
typedef struct hg_index_registry {
  hg_index_reg_row_t *rows;
  size_t n, cap;
  hg_index_csv_error_t *errors;
  size_t n_errors, cap_errors;
} hg_index_registry_t;

/* Parses `provider,gpu,grade,effective_from` CSV (header required, same line
 * rules as the samples parser). Two rows with the same provider, gpu and
 * effective_from are an error (HG_INDEX_CSV_DUPLICATE_ROW) on the later line.
 * Returns 0, -ENOMEM or HG_EINVAL. */
int hg_index_registry_parse(const char *buf, size_t len, hg_index_registry_t *out);

/* hg_index_registry_parse for either product: HG_INDEX_TOKENS requires the
 * header `provider,class,grade,effective_from` (the class is stored in the
 * row's `gpu` field). HG_EINVAL also for an unknown product. */
int hg_index_registry_parse_product(const char *buf, size_t len, hg_index_product_t product,
                                    hg_index_registry_t *out);

/* Adds one row (for in-memory registries). Returns 0, -ENOMEM, HG_EINVAL
 * (string too long or empty), HG_EEXISTS (same provider, gpu and date). */
int hg_index_registry_add(hg_index_registry_t *reg, const char *provider, const char *gpu,
                          const char *grade, int32_t effective_from);

/* The grade of provider for gpu on `day`: the row with the latest
 * effective_from <= day. Returns the row's grade string (valid until the
 * registry is next modified or disposed) or NULL if none applies. */
const char *hg_index_registry_grade(const hg_index_registry_t *reg, const char *provider,
                                    const char *gpu, int32_t day);

void hg_index_registry_dispose(hg_index_registry_t *reg);

/* ---------------------------------------------------------------- dates */

/* "YYYY-MM-DD" (exactly 10 chars, proleptic Gregorian, years 1970-9999) to a
 * day number (hg_civil_parse_date of hourglass/civil.h). Returns 0 or
 * HG_EPARSE. */
int hg_index_day_parse(const char *s, size_t len, int32_t *day);
/* Writes "YYYY-MM-DD" and a NUL into buf (at least 11 bytes); a day outside
 * the years 0000..9999 is written with year 0000. */
void hg_index_day_format(int32_t day, char buf[11]);

/* -------------------------------------------------------------- fixings */

/* Eligibility and filter reason codes (0 = sample used). */
#define HG_INDEX_REASONS(XX) \
  XX(OUT_OF_WINDOW)          \
  XX(WRONG_GPU)              \
  XX(INVALID)                \
  XX(WRONG_GRADE)            \
  XX(NOT_GRADED)             \
  XX(TERM_TOO_LONG)          \
  XX(DUPLICATE)              \
  XX(QUOTE_NOT_USED)         \
  XX(OUTLIER)

enum {
  HG_INDEX_USED = 0,
#define HG_INDEX_REASON_ENUM(name) HG_INDEX_##name,
  HG_INDEX_REASONS(HG_INDEX_REASON_ENUM)
#undef HG_INDEX_REASON_ENUM
  HG_INDEX_REASON_COUNT
};

/* "OUT_OF_WINDOW", ...; "USED" for 0; "UNKNOWN" otherwise. Static strings. */
const char *hg_index_reason_str(int reason);

/* Status of a day's fixing. NO_FIX: the day has no value and needs an operator. */
enum { HG_INDEX_PROVISIONAL = 1, HG_INDEX_FINAL = 2, HG_INDEX_NO_FIX = 3 };
/* Where the value came from. */
enum { HG_INDEX_NONE = 0, HG_INDEX_COMPUTED = 1, HG_INDEX_CARRIED = 2, HG_INDEX_EXTERNAL = 3 };

/* One day's fixing as stored in the history: plain integers and a fixed
 * string, serializable byte for byte (no pointers). */
typedef struct hg_index_fixing {
  int64_t value;        /* micro-USD per GPU-hour; 0 when status is NO_FIX */
  int32_t day;
  int32_t carried_from; /* CARRIED: day of the FINAL fixing carried; else -1 */
  uint8_t status;       /* HG_INDEX_PROVISIONAL, _FINAL or _NO_FIX */
  uint8_t kind;         /* HG_INDEX_COMPUTED, _CARRIED, _EXTERNAL or _NONE */
  uint8_t tier;         /* 1 trades, 2 trades and quotes, 0 neither */
  uint8_t pad;
  char source[HG_INDEX_SOURCE_MAX]; /* EXTERNAL: who computed it; else "" */
} hg_index_fixing_t;

const char *hg_index_status_str(int status); /* "PROVISIONAL", "FINAL", "NO_FIX" */
const char *hg_index_kind_str(int kind);     /* "NONE", "COMPUTED", "CARRIED", "EXTERNAL" */

/* Methodology parameters; hg_index_config_default() gives the defaults of
 * settlement/CONTRACT.md section 3 (each default is configuration, section 0). */
typedef struct hg_index_config {
  int32_t max_term_days;      /* 31 */
  int64_t outlier_k_num;      /* 44478: exclude when 10000*|p-M| > k*MAD */
  int64_t outlier_k_den;      /* 10000 */
  uint32_t cap_divisor;       /* 5: C = floor(V / 5) */
  uint32_t cap_min_providers; /* 5: cap applied only with this many providers */
  uint32_t min_providers;     /* 5 */
  uint32_t min_hours;         /* 12 */
  int64_t min_volume;         /* 1000 GPU-hours */
  uint32_t max_carry_days;    /* 3 */
  int64_t restate_min_move;   /* 1000 micro-USD (one tick) */
} hg_index_config_t;

void hg_index_config_default(hg_index_config_t *cfg);

/* Per-tier statistics, kept in the receipt for both tiers tried. */
typedef struct hg_index_tier_stats {
  uint8_t tried;
  uint8_t sufficient;
  uint8_t cap_applied;
  uint32_t eligible;  /* samples passing step 1 */
  uint32_t used;      /* samples left after step 2 */
  uint32_t providers; /* distinct providers after step 2 */
  uint32_t hours;     /* non-empty hours after step 2 */
  int64_t volume;     /* GPU-hours after step 2 */
  int64_t median;     /* M, micro-USD (0 if no eligible sample) */
  int64_t mad;        /* MAD, micro-USD */
  int64_t cap;        /* C when cap_applied, else 0 */
  int64_t value;      /* I_d of this tier (0 when no bucket) */
  int64_t bucket[HG_INDEX_HOURS];   /* bucket values; 0 where empty */
  uint32_t bucket_n[HG_INDEX_HOURS]; /* samples per bucket */
  uint32_t bucket_sample[HG_INDEX_HOURS]; /* sample whose price is the bucket value */
  uint32_t reason_count[HG_INDEX_REASON_COUNT];
} hg_index_tier_stats_t;

typedef struct hg_index_exclusion {
  uint32_t sample; /* index into the samples passed to hg_index_fix */
  uint32_t reason; /* HG_INDEX_* reason */
} hg_index_exclusion_t;

typedef struct hg_index_weight {
  uint32_t sample;
  uint32_t pad;
  int64_t weight; /* step 3 weight, units of 2^-20 GPU-hour */
} hg_index_weight_t;

/*
 * The receipt (step 8) plus the fixing. The receipt's exclusions and weights
 * are those of the tier that produced the value; for a CARRIED or NO_FIX day
 * they are those of tier 2, the last computation tried. Arrays are allocated
 * by hg_index_fix and owned by the result; release with hg_index_result_dispose.
 */
typedef struct hg_index_result {
  hg_index_fixing_t fixing;
  char methodology[4];       /* "v1" */
  char gpu[HG_INDEX_GPU_MAX];
  char grade[HG_INDEX_GRADE_MAX];
  uint32_t input_count;      /* samples given */
  uint8_t receipt_tier;      /* tier whose exclusions/weights are below (1 or 2) */
  hg_index_tier_stats_t tier[2]; /* [0] tier 1, [1] tier 2 */
  hg_index_exclusion_t *exclusions; /* in sample order */
  size_t n_exclusions;
  hg_index_weight_t *weights;       /* every used sample, in sample order */
  size_t n_weights;
} hg_index_result_t;

/* Read-only view of earlier fixings (see hg_index_history_t below). */
struct hg_index_history;

/*
 * Computes the fixing of IGX-<gpu>-<grade> for `day` from samples[0..n).
 * Steps 1-6 of settlement/CONTRACT.md section 3; the result is a PROVISIONAL
 * fixing (COMPUTED tier 1 or 2, or CARRIED tier 0), or NO_FIX tier 0.
 * Carry-forward reads `history` (may be NULL: then there is nothing to carry
 * and an insufficient day is NO_FIX). The history is not modified; publish
 * the result with hg_index_history_publish().
 *
 * cfg may be NULL (defaults). reg is the provider registry (must not be NULL;
 * an empty registry grades nobody). Returns 0 with *out filled (dispose it),
 * or HG_EINVAL (NULL argument, gpu/grade empty or too long, a sample string
 * not NUL-terminated, a sample kind other than trade/quote), HG_ERANGE (a
 * sample volume above HG_INDEX_VOLUME_MAX or n above HG_INDEX_SAMPLES_MAX),
 * -ENOMEM. On failure *out owns nothing.
 */
int hg_index_fix(const hg_index_config_t *cfg, const hg_index_registry_t *reg,
                 const struct hg_index_history *history, const char *gpu, const char *grade,
                 int32_t day, const hg_index_sample_t *samples, size_t n,
                 hg_index_result_t *out);

void hg_index_result_dispose(hg_index_result_t *res);

/* --------------------------------------------------------------- history */

/*
 * Fixing history of one index: records sorted by day in caller-provided
 * storage (fixed capacity chosen at start-up). The caller owns `storage`;
 * the history only borrows it. Not thread-safe: one owner thread.
 */
typedef struct hg_index_history {
  hg_index_fixing_t *rec;
  size_t n, cap;
} hg_index_history_t;

void hg_index_history_init(hg_index_history_t *h, hg_index_fixing_t *storage, size_t cap);

/* The record for `day` or NULL. Valid until the history is next modified. */
const hg_index_fixing_t *hg_index_history_get(const hg_index_history_t *h, int32_t day);

/* What hg_index_history_publish did. */
enum {
  HG_INDEX_PUBLISHED = 1,  /* first fixing of the day, stored */
  HG_INDEX_RESTATED = 2,   /* replaced a PROVISIONAL / NO_FIX record */
  HG_INDEX_UNCHANGED = 3,  /* restatement moved the value < restate_min_move: not published */
};

/*
 * Stores f (status must be PROVISIONAL or NO_FIX) as the fixing of f->day.
 * A day with no record: stored (PUBLISHED). A PROVISIONAL or NO_FIX record:
 * a restatement. When both old and new carry a value and
 * |new - old| < cfg->restate_min_move the old record stays (UNCHANGED);
 * otherwise the new record replaces it (RESTATED). A NO_FIX result never
 * replaces a record that has a value (UNCHANGED): losing a published value is
 * not a correction. A FINAL record never changes: HG_ESTATE.
 * cfg may be NULL (defaults). *outcome (may be NULL) receives the outcome.
 * Returns 0, HG_ESTATE, HG_EFULL (capacity), HG_EINVAL.
 */
int hg_index_history_publish(hg_index_history_t *h, const hg_index_config_t *cfg,
                             const hg_index_fixing_t *f, int *outcome);

/* Operator finalization: PROVISIONAL -> FINAL. Returns 0 (also when already
 * FINAL), HG_ENOTFOUND (no record), HG_ESTATE (a NO_FIX day cannot be final). */
int hg_index_history_finalize(hg_index_history_t *h, int32_t day);

/*
 * Builds a PROVISIONAL EXTERNAL fixing (an operator-published value computed
 * elsewhere) for publication with hg_index_history_publish(); it is then used
 * exactly like a computed one (restatement, finalization, carry-forward).
 * Returns 0 or HG_EINVAL (value <= 0, source empty or too long).
 */
int hg_index_fixing_external(int32_t day, int64_t value, const char *source,
                             hg_index_fixing_t *out);

#endif /* HOURGLASS_INDEX_H */
