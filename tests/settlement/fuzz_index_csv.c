/*
 * libFuzzer target over the rental index's CSV readers (settlement/index_csv.c):
 * the samples file and the provider registry, as hgctl and the daemon's
 * operator commands read them. The first input byte selects the reader; the
 * rest is the file. Checked on the way: the parser never crashes, leaks or
 * reads outside the buffer (ASan, with the file copied into an exact-size
 * allocation); every error has a known reason and every sample a line
 * after the header; strings are NUL-terminated within their arrays; each
 * registry row is what the registry answers on its own day; and a
 * round trip: the accepted samples (registry rows) written back as CSV parse
 * to the same samples (rows) with no error.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A growable text buffer; aborts on allocation failure (a fuzz target). */
typedef struct text {
  char *p;
  size_t len, cap;
} text_t;

static void put(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_t *t, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) abort();
    if (t->p && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap + (size_t)n + 1) * 2;
    char *p = realloc(t->p, cap);
    if (p == NULL) abort();
    t->p = p;
    t->cap = cap;
  }
}

static void nul_within(const char *s, size_t cap) {
  if (memchr(s, '\0', cap) == NULL) abort();
}

/* Decimal micro-USD as the CSV writes it: [-]units.micros. */
static void put_micro(text_t *t, int64_t v) {
  uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  put(t, "%s%" PRIu64 ".%06" PRIu64, v < 0 ? "-" : "", a / 1000000u, a % 1000000u);
}

static void fuzz_samples(const char *buf, size_t len) {
  hg_index_sample_set_t set;
  memset(&set, 0, sizeof set);
  int rc = hg_index_samples_parse(buf, len, &set);
  if (rc != 0) {
    if (set.samples != NULL || set.errors != NULL) abort();
    return;
  }
  for (size_t i = 0; i < set.n_errors; i++)
    if (strcmp(hg_index_csv_reason_str(set.errors[i].reason), "unknown") == 0) abort();
  text_t t = {0};
  put(&t, "ts,provider,region,gpu,grade,term_days,price_usd_per_gpu_hour,volume_gpu_hours,kind\n");
  for (size_t i = 0; i < set.n; i++) {
    const hg_index_sample_t *s = &set.samples[i];
    nul_within(s->provider, sizeof s->provider);
    nul_within(s->region, sizeof s->region);
    nul_within(s->gpu, sizeof s->gpu);
    nul_within(s->grade, sizeof s->grade);
    if (set.lines[i] < 2) abort();
    put(&t, "%" PRId64 ",%s,%s,%s,%s,%" PRId32 ",", s->ts, s->provider, s->region, s->gpu,
        s->grade, s->term_days);
    put_micro(&t, s->price);
    put(&t, ",%" PRId64 ",%s\n", s->volume, s->kind == HG_INDEX_TRADE ? "trade" : "quote");
  }
  hg_index_sample_set_t again;
  memset(&again, 0, sizeof again);
  if (hg_index_samples_parse(t.p, t.len, &again) != 0) abort();
  if (again.n_errors != 0 || again.n != set.n) abort();
  for (size_t i = 0; i < set.n; i++) {
    const hg_index_sample_t *a = &set.samples[i], *b = &again.samples[i];
    if (a->ts != b->ts || a->price != b->price || a->volume != b->volume ||
        a->term_days != b->term_days || a->kind != b->kind || strcmp(a->provider, b->provider) ||
        strcmp(a->region, b->region) || strcmp(a->gpu, b->gpu) || strcmp(a->grade, b->grade))
      abort();
  }
  hg_index_samples_dispose(&again);
  hg_index_samples_dispose(&set);
  free(t.p);
}

static void fuzz_registry(const char *buf, size_t len) {
  hg_index_registry_t reg;
  memset(&reg, 0, sizeof reg);
  int rc = hg_index_registry_parse(buf, len, &reg);
  if (rc != 0) {
    if (reg.rows != NULL || reg.errors != NULL) abort();
    return;
  }
  for (size_t i = 0; i < reg.n_errors; i++)
    if (strcmp(hg_index_csv_reason_str(reg.errors[i].reason), "unknown") == 0) abort();
  text_t t = {0};
  put(&t, "provider,gpu,grade,effective_from\n");
  for (size_t i = 0; i < reg.n; i++) {
    const hg_index_reg_row_t *r = &reg.rows[i];
    nul_within(r->provider, sizeof r->provider);
    nul_within(r->gpu, sizeof r->gpu);
    nul_within(r->grade, sizeof r->grade);
    char day[11];
    hg_index_day_format(r->effective_from, day);
    put(&t, "%s,%s,%s,%s\n", r->provider, r->gpu, r->grade, day);
    /* Every row is what the registry answers on its own day. */
    const char *g = hg_index_registry_grade(&reg, r->provider, r->gpu, r->effective_from);
    if (g == NULL || strcmp(g, r->grade) != 0) abort();
  }
  hg_index_registry_t again;
  memset(&again, 0, sizeof again);
  if (hg_index_registry_parse(t.p, t.len, &again) != 0) abort();
  if (again.n_errors != 0 || again.n != reg.n) abort();
  for (size_t i = 0; i < reg.n; i++) {
    const hg_index_reg_row_t *a = &reg.rows[i], *b = &again.rows[i];
    if (a->effective_from != b->effective_from || strcmp(a->provider, b->provider) ||
        strcmp(a->gpu, b->gpu) || strcmp(a->grade, b->grade))
      abort();
  }
  hg_index_registry_dispose(&again);
  hg_index_registry_dispose(&reg);
  free(t.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int registry = data[0] & 1;
  size_t len = size - 1;
  /* An exact-size copy: a read past the end is an ASan report. */
  char *buf = malloc(len ? len : 1);
  if (buf == NULL) abort();
  memcpy(buf, data + 1, len);
  if (registry)
    fuzz_registry(buf, len);
  else
    fuzz_samples(buf, len);
  free(buf);
  return 0;
}
