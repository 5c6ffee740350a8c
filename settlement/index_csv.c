/*
 * CSV readers for the rental index: the samples file and the provider
 * registry file, plus UTC day numbers.
 *
 * The readers work on a caller-supplied buffer (no I/O here). A line is split
 * on ',' only (no quoting), each field is checked and converted exactly
 * (prices to micro-USD by integer arithmetic), and a line that fails any
 * check becomes one error record naming its line, column and reason. Lines are
 * never dropped without a record: that is what makes the rejected_lines list
 * of the CLI complete. Arrays grow by doubling (hg_grow); this is offline
 * input handling, not the order path.
 */
#include "hourglass/civil.h"
#include "hourglass/decimal.h"
#include "hourglass/error.h"
#include "hourglass/grow.h"
#include "hourglass/index.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Headers per product (hg_index_product_t): the columns are the same, only
 * their names and units differ (settlement/CONTRACT.md sections 3 and 7.2). */
static const char *const SAMPLES_HEADER[] = {
    "ts,provider,region,gpu,grade,term_days,price_usd_per_gpu_hour,volume_gpu_hours,kind",
    "ts,provider,region,class,grade,term_days,price_usd_per_million_tokens,volume_million_tokens,"
    "kind"};
static const char *const REGISTRY_HEADER[] = {"provider,gpu,grade,effective_from",
                                              "provider,class,grade,effective_from"};
static const char *const VOLUME_NAME[] = {"volume_gpu_hours", "volume_million_tokens"};

static bool product_ok(hg_index_product_t p) {
  return p == HG_INDEX_GPU_HOURS || p == HG_INDEX_TOKENS;
}

const char *hg_index_product_header(hg_index_product_t product) {
  return product_ok(product) ? SAMPLES_HEADER[product] : NULL;
}

const char *hg_index_product_volume_name(hg_index_product_t product) {
  return product_ok(product) ? VOLUME_NAME[product] : NULL;
}

#define MAX_FIELDS 16

typedef struct field {
  const char *p;
  size_t len;
} field_t;

const char *hg_index_csv_reason_str(int reason) {
  switch (reason) {
  case HG_INDEX_CSV_OK:
    return "ok";
#define HG_INDEX_CSV_STR(name, msg) \
  case HG_INDEX_CSV_##name:         \
    return msg;
    HG_INDEX_CSV_REASONS(HG_INDEX_CSV_STR)
#undef HG_INDEX_CSV_STR
  default:
    return "unknown";
  }
}

static int add_error(hg_index_csv_error_t **errs, size_t *n, size_t *cap, uint32_t line,
                     int32_t column, int reason) {
  hg_index_csv_error_t *ne = hg_grow(*errs, cap, sizeof *ne, *n + 1, 64);
  if (ne == NULL) return -ENOMEM;
  *errs = ne;
  (*errs)[*n] = (hg_index_csv_error_t){.line = line, .column = column, .reason = reason};
  (*n)++;
  return 0;
}

/* Splits [p, p+len) on ','. Returns the field count, or MAX_FIELDS+1 if more. */
static size_t split(const char *p, size_t len, field_t *f) {
  size_t nf = 0;
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || p[i] == ',') {
      if (nf == MAX_FIELDS) return MAX_FIELDS + 1;
      f[nf].p = p + start;
      f[nf].len = i - start;
      nf++;
      start = i + 1;
    }
  }
  return nf;
}

/* [-]digits[.digits] with at most places decimals (hourglass/decimal.h),
 * scaled to an integer; the decimal parser's errors as CSV reasons. */
static int parse_scaled(const field_t *f, int places, int64_t *out) {
  switch (hg_decimal_parse(f->p, f->len, places, out)) {
  case 0: return 0;
  case HG_DECIMAL_PLACES:
    return places > 0 ? HG_INDEX_CSV_TOO_MANY_DECIMALS : HG_INDEX_CSV_BAD_NUMBER;
  case HG_DECIMAL_RANGE: return HG_INDEX_CSV_OVERFLOW;
  default: return HG_INDEX_CSV_BAD_NUMBER;
  }
}

/* [-]digits. */
static int parse_i64(const field_t *f, int64_t *out) { return parse_scaled(f, 0, out); }

/* [-]digits[.digits], at most 6 decimals, exactly to micro-units. */
static int parse_micro(const field_t *f, int64_t *out) { return parse_scaled(f, 6, out); }

static int copy_str(const field_t *f, char *dst, size_t cap) {
  if (f->len == 0) return HG_INDEX_CSV_EMPTY_FIELD;
  if (f->len >= cap) return HG_INDEX_CSV_TOO_LONG;
  memcpy(dst, f->p, f->len);
  dst[f->len] = '\0';
  return 0;
}

/* Rejects control bytes (NUL included) and quotes anywhere in the line. */
static int check_chars(const field_t *f, size_t nf, int32_t *col) {
  for (size_t k = 0; k < nf; k++) {
    for (size_t i = 0; i < f[k].len; i++) {
      unsigned char c = (unsigned char)f[k].p[i];
      if (c < 0x20 || c == 0x7f || c == '"') {
        *col = (int32_t)k;
        return HG_INDEX_CSV_BAD_CHAR;
      }
    }
  }
  return 0;
}

/* Iterates lines: returns false at end. A final line without '\n' counts;
 * a buffer ending in '\n' has no extra empty line after it. */
typedef struct line_iter {
  const char *buf;
  size_t len, pos;
  uint32_t no;
} line_iter_t;

static bool next_line(line_iter_t *it, field_t *line) {
  if (it->pos >= it->len) return false;
  const char *s = it->buf + it->pos;
  const char *nl = memchr(s, '\n', it->len - it->pos);
  size_t l = nl ? (size_t)(nl - s) : it->len - it->pos;
  it->pos += l + (nl ? 1 : 0);
  if (l > 0 && s[l - 1] == '\r') l--;
  line->p = s;
  line->len = l;
  it->no++;
  return true;
}

static int sample_from_fields(const field_t *f, hg_index_sample_t *s, int32_t *col) {
  int r;
  memset(s, 0, sizeof *s);
  for (int k = 0; k < 9; k++) {
    if (f[k].len == 0) {
      *col = k;
      return HG_INDEX_CSV_EMPTY_FIELD;
    }
  }
  *col = 0;
  if ((r = parse_i64(&f[0], &s->ts))) return r;
  *col = 1;
  if ((r = copy_str(&f[1], s->provider, sizeof s->provider))) return r;
  *col = 2;
  if ((r = copy_str(&f[2], s->region, sizeof s->region))) return r;
  *col = 3;
  if ((r = copy_str(&f[3], s->gpu, sizeof s->gpu))) return r;
  *col = 4;
  if ((r = copy_str(&f[4], s->grade, sizeof s->grade))) return r;
  *col = 5;
  int64_t term;
  if ((r = parse_i64(&f[5], &term))) return r;
  if (term < INT32_MIN || term > INT32_MAX) return HG_INDEX_CSV_OVERFLOW;
  s->term_days = (int32_t)term;
  *col = 6;
  if ((r = parse_micro(&f[6], &s->price))) return r;
  *col = 7;
  if ((r = parse_i64(&f[7], &s->volume))) return r;
  if (s->volume > HG_INDEX_VOLUME_MAX) return HG_INDEX_CSV_RANGE;
  *col = 8;
  if (f[8].len == 5 && memcmp(f[8].p, "trade", 5) == 0) {
    s->kind = HG_INDEX_TRADE;
  } else if (f[8].len == 5 && memcmp(f[8].p, "quote", 5) == 0) {
    s->kind = HG_INDEX_QUOTE;
  } else {
    return HG_INDEX_CSV_UNKNOWN_KIND;
  }
  return 0;
}

static bool is_header(const field_t *line, const char *hdr) {
  size_t hl = strlen(hdr);
  return line->len == hl && memcmp(line->p, hdr, hl) == 0;
}

/* A CSV file: the header line, then data rows of nfields fields each. Empty
 * lines, a wrong field count and control bytes or quotes are the reader's
 * own rejects; row() decides the rest: it returns 0 (row taken), a reason
 * (> 0, *col the field or -1; the line is recorded as rejected) or a
 * negative error, which ends the parse. Returns 0 or that error (or
 * -ENOMEM recording a reject). */
static int parse_csv(const char *buf, size_t len, const char *header, size_t nfields,
                     int (*row)(void *ctx, const field_t *f, uint32_t line, int32_t *col),
                     void *ctx, hg_index_csv_error_t **errs, size_t *n_errs, size_t *cap_errs) {
  /* A UTF-8 byte-order mark (spreadsheets write one) is not part of the
   * header. */
  if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
    buf += 3;
    len -= 3;
  }
  line_iter_t it = {.buf = buf, .len = len};
  field_t line;
  if (!next_line(&it, &line) || !is_header(&line, header))
    return add_error(errs, n_errs, cap_errs, 1, -1, HG_INDEX_CSV_HEADER);
  while (next_line(&it, &line)) {
    field_t f[MAX_FIELDS];
    int32_t col = -1;
    int reason;
    if (line.len == 0) reason = HG_INDEX_CSV_EMPTY_LINE;
    else if (split(line.p, line.len, f) != nfields) reason = HG_INDEX_CSV_FIELD_COUNT;
    else if ((reason = check_chars(f, nfields, &col)) == 0) reason = row(ctx, f, it.no, &col);
    if (reason < 0) return reason;
    if (reason > 0) {
      int rc = add_error(errs, n_errs, cap_errs, it.no, col, reason);
      if (rc) return rc;
    }
  }
  return 0;
}

static int sample_row(void *ctx, const field_t *f, uint32_t line, int32_t *col) {
  hg_index_sample_set_t *out = ctx;
  hg_index_sample_t s;
  int rc = sample_from_fields(f, &s, col);
  if (rc) return rc;
  if (out->n >= HG_INDEX_SAMPLES_MAX) {
    *col = -1;
    return HG_INDEX_CSV_TOO_MANY;
  }
  size_t cap = out->cap;
  hg_index_sample_t *ns = hg_grow(out->samples, &cap, sizeof s, out->n + 1, 64);
  if (ns == NULL) return -ENOMEM;
  out->samples = ns;
  if (cap != out->cap) {
    size_t lcap = out->cap;
    uint32_t *nl = hg_grow(out->lines, &lcap, sizeof *nl, cap, 64);
    if (nl == NULL) return -ENOMEM;
    out->lines = nl;
    out->cap = cap;
  }
  out->samples[out->n] = s;
  out->lines[out->n] = line;
  out->n++;
  return 0;
}

int hg_index_samples_parse_product(const char *buf, size_t len, hg_index_product_t product,
                                   hg_index_sample_set_t *out) {
  if (out == NULL || (buf == NULL && len > 0) || !product_ok(product)) return HG_EINVAL;
  memset(out, 0, sizeof *out);
  int rc = parse_csv(buf, len, SAMPLES_HEADER[product], 9, sample_row, out, &out->errors,
                     &out->n_errors, &out->cap_errors);
  if (rc) hg_index_samples_dispose(out);
  return rc;
}

int hg_index_samples_parse(const char *buf, size_t len, hg_index_sample_set_t *out) {
  return hg_index_samples_parse_product(buf, len, HG_INDEX_GPU_HOURS, out);
}

void hg_index_samples_dispose(hg_index_sample_set_t *set) {
  if (set == NULL) return;
  free(set->samples);
  free(set->lines);
  free(set->errors);
  memset(set, 0, sizeof *set);
}

/* ---------------------------------------------------------------- dates */

int hg_index_day_parse(const char *s, size_t len, int32_t *day) {
  if (day == NULL || !hg_civil_parse_date(s, len, day)) return HG_EPARSE;
  return 0;
}

void hg_index_day_format(int32_t day, char buf[11]) {
  hg_civil_t c = hg_civil_from_day(day);
  /* Outside the formattable years: the same month and day in year 0000. */
  if (c.year < 0 || c.year > 9999) day = hg_civil_to_day(0, c.month, c.day);
  hg_civil_format_date(day, buf);
}

/* ------------------------------------------------------ provider registry */

static int row_cmp(const hg_index_reg_row_t *a, const char *provider, const char *gpu,
                   int32_t day) {
  int c = strcmp(a->provider, provider);
  if (c) return c;
  c = strcmp(a->gpu, gpu);
  if (c) return c;
  return (a->effective_from > day) - (a->effective_from < day);
}

/* First row not less than (provider, gpu, day). */
static size_t lower_bound(const hg_index_registry_t *reg, const char *provider, const char *gpu,
                          int32_t day) {
  size_t lo = 0, hi = reg->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (row_cmp(&reg->rows[mid], provider, gpu, day) < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static int reg_insert(hg_index_registry_t *reg, const hg_index_reg_row_t *row) {
  size_t at = lower_bound(reg, row->provider, row->gpu, row->effective_from);
  if (at < reg->n && row_cmp(&reg->rows[at], row->provider, row->gpu, row->effective_from) == 0)
    return HG_EEXISTS;
  hg_index_reg_row_t *nr = hg_grow(reg->rows, &reg->cap, sizeof *nr, reg->n + 1, 64);
  if (nr == NULL) return -ENOMEM;
  reg->rows = nr;
  memmove(&reg->rows[at + 1], &reg->rows[at], (reg->n - at) * sizeof *reg->rows);
  reg->rows[at] = *row;
  reg->n++;
  return 0;
}

int hg_index_registry_add(hg_index_registry_t *reg, const char *provider, const char *gpu,
                          const char *grade, int32_t effective_from) {
  if (reg == NULL || provider == NULL || gpu == NULL || grade == NULL) return HG_EINVAL;
  hg_index_reg_row_t row;
  memset(&row, 0, sizeof row);
  field_t f[3] = {{provider, strlen(provider)}, {gpu, strlen(gpu)}, {grade, strlen(grade)}};
  if (copy_str(&f[0], row.provider, sizeof row.provider) ||
      copy_str(&f[1], row.gpu, sizeof row.gpu) || copy_str(&f[2], row.grade, sizeof row.grade))
    return HG_EINVAL;
  row.effective_from = effective_from;
  return reg_insert(reg, &row);
}

static int registry_row(void *ctx, const field_t *f, uint32_t line, int32_t *col) {
  (void)line;
  hg_index_reg_row_t row;
  memset(&row, 0, sizeof row);
  char *dst[3] = {row.provider, row.gpu, row.grade};
  size_t cap[3] = {sizeof row.provider, sizeof row.gpu, sizeof row.grade};
  for (int k = 0; k < 3; k++) {
    *col = k;
    int reason = copy_str(&f[k], dst[k], cap[k]);
    if (reason) return reason;
  }
  *col = 3;
  if (f[3].len == 0) return HG_INDEX_CSV_EMPTY_FIELD;
  if (hg_index_day_parse(f[3].p, f[3].len, &row.effective_from)) return HG_INDEX_CSV_BAD_DATE;
  int rc = reg_insert(ctx, &row);
  if (rc == HG_EEXISTS) {
    *col = -1;
    return HG_INDEX_CSV_DUPLICATE_ROW;
  }
  return rc;
}

int hg_index_registry_parse_product(const char *buf, size_t len, hg_index_product_t product,
                                    hg_index_registry_t *out) {
  if (out == NULL || (buf == NULL && len > 0) || !product_ok(product)) return HG_EINVAL;
  memset(out, 0, sizeof *out);
  int rc = parse_csv(buf, len, REGISTRY_HEADER[product], 4, registry_row, out, &out->errors,
                     &out->n_errors, &out->cap_errors);
  if (rc) hg_index_registry_dispose(out);
  return rc;
}

int hg_index_registry_parse(const char *buf, size_t len, hg_index_registry_t *out) {
  return hg_index_registry_parse_product(buf, len, HG_INDEX_GPU_HOURS, out);
}

const char *hg_index_registry_grade(const hg_index_registry_t *reg, const char *provider,
                                    const char *gpu, int32_t day) {
  if (reg == NULL || reg->n == 0 || provider == NULL || gpu == NULL) return NULL;
  /* The last row <= (provider, gpu, day) applies if it is for this provider/gpu. */
  size_t at = lower_bound(reg, provider, gpu, day);
  if (at < reg->n && row_cmp(&reg->rows[at], provider, gpu, day) == 0) return reg->rows[at].grade;
  if (at == 0) return NULL;
  const hg_index_reg_row_t *r = &reg->rows[at - 1];
  if (strcmp(r->provider, provider) != 0 || strcmp(r->gpu, gpu) != 0) return NULL;
  return r->grade;
}

void hg_index_registry_dispose(hg_index_registry_t *reg) {
  if (reg == NULL) return;
  free(reg->rows);
  free(reg->errors);
  memset(reg, 0, sizeof *reg);
}
