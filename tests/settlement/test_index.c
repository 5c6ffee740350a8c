/*
 * The rental index, methodology v1 (settlement/CONTRACT.md section 3): every
 * rule gets a hand-computed case. Samples are built in memory; CSV parsing
 * has its own cases with line numbers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/error.h"
#include "hourglass/index.h"

#define H 3600
#define ONE (INT64_C(1) << 20)

static int32_t D;  /* 2027-03-14 */
static int64_t T0; /* its first second */

static int32_t day_of(const char *s) {
  int32_t d = 0;
  assert_int_equal(hg_index_day_parse(s, strlen(s), &d), 0);
  return d;
}

static hg_index_sample_t S(int64_t ts, const char *prov, const char *gpu, const char *grade,
                           int32_t term, int64_t price, int64_t vol, int kind) {
  hg_index_sample_t s;
  memset(&s, 0, sizeof s);
  s.ts = ts;
  snprintf(s.provider, sizeof s.provider, "%s", prov);
  snprintf(s.region, sizeof s.region, "us-east");
  snprintf(s.gpu, sizeof s.gpu, "%s", gpu);
  snprintf(s.grade, sizeof s.grade, "%s", grade);
  s.term_days = term;
  s.price = price;
  s.volume = vol;
  s.kind = (uint8_t)kind;
  return s;
}

/* A plain eligible trade. */
static hg_index_sample_t T(int64_t ts, const char *prov, int64_t price, int64_t vol) {
  return S(ts, prov, "B200", "A", 30, price, vol, HG_INDEX_TRADE);
}

/* Registry grading each named provider A for B200 since 2027-01-01. */
static void reg_all_a(hg_index_registry_t *reg, const char *const *provs, size_t n) {
  memset(reg, 0, sizeof *reg);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(hg_index_registry_add(reg, provs[i], "B200", "A", day_of("2027-01-01")), 0);
}

static const char *const PROVS[] = {"p1", "p2", "p3", "p4", "p5", "p6", "a", "B", "ab", "b"};
#define NPROVS (sizeof PROVS / sizeof PROVS[0])

/* Config with sufficiency thresholds of 1, so tier 1 produces the value. */
static hg_index_config_t loose(void) {
  hg_index_config_t c;
  hg_index_config_default(&c);
  c.min_providers = 1;
  c.min_hours = 1;
  c.min_volume = 1;
  return c;
}

static int reason_of(const hg_index_result_t *r, uint32_t idx) {
  for (size_t k = 0; k < r->n_exclusions; k++)
    if (r->exclusions[k].sample == idx) return (int)r->exclusions[k].reason;
  for (size_t k = 0; k < r->n_weights; k++)
    if (r->weights[k].sample == idx) return HG_INDEX_USED;
  fail_msg("sample %u neither excluded nor weighted", idx);
  return -1;
}

static int64_t weight_of(const hg_index_result_t *r, uint32_t idx) {
  for (size_t k = 0; k < r->n_weights; k++)
    if (r->weights[k].sample == idx) return r->weights[k].weight;
  fail_msg("sample %u has no weight", idx);
  return -1;
}

static void fix(const hg_index_config_t *cfg, const hg_index_registry_t *reg,
                const hg_index_history_t *h, int32_t day, const hg_index_sample_t *s, size_t n,
                hg_index_result_t *r) {
  assert_int_equal(hg_index_fix(cfg, reg, h, "B200", "A", day, s, n, r), 0);
}

static int setup(void **state) {
  (void)state;
  D = day_of("2027-03-14");
  T0 = (int64_t)D * 86400;
  return 0;
}

/* ------------------------------------------------------------- step 1 */

static void each_eligibility_reason(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  assert_int_equal(hg_index_registry_add(&reg, "gb", "B200", "B", day_of("2027-01-01")), 0);
  hg_index_sample_t s[] = {
      T(T0, "p1", 2000000, 10),                                        /* 0 used: first second */
      T(T0 + 86399, "p2", 2000000, 10),                                /* 1 used: last second */
      T(T0 - 1, "p1", 2000000, 10),                                    /* 2 OUT_OF_WINDOW */
      T(T0 + 86400, "p1", 2000000, 10),                                /* 3 OUT_OF_WINDOW */
      S(T0 + 5, "p1", "H100", "A", 30, 2000000, 10, HG_INDEX_TRADE),   /* 4 WRONG_GPU */
      T(T0 + 6, "p1", 0, 10),                                          /* 5 INVALID price 0 */
      T(T0 + 7, "p1", 2000000, 0),                                     /* 6 INVALID volume 0 */
      T(T0 + 8, "p1", -5, 10),                                         /* 7 INVALID price < 0 */
      S(T0 + 9, "p1", "B200", "B", 30, 2000000, 10, HG_INDEX_TRADE),   /* 8 WRONG_GRADE */
      T(T0 + 10, "nobody", 2000000, 10),                               /* 9 NOT_GRADED */
      T(T0 + 11, "gb", 2000000, 10),                                   /* 10 NOT_GRADED (grade B) */
      S(T0 + 12, "p1", "B200", "A", 32, 2000000, 10, HG_INDEX_TRADE),  /* 11 TERM_TOO_LONG */
      S(T0 + 13, "p1", "B200", "A", 31, 2000000, 10, HG_INDEX_TRADE),  /* 12 used: 31 days ok */
      T(T0, "p1", 2000000, 10),                                        /* 13 DUPLICATE of 0 */
      S(T0 + 14, "p3", "B200", "A", 1, 2000000, 10, HG_INDEX_QUOTE),   /* 14 QUOTE_NOT_USED */
  };
  size_t n = sizeof s / sizeof s[0];
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, n, &r);
  assert_int_equal(r.receipt_tier, 1);
  static const int want[] = {
      HG_INDEX_USED,        HG_INDEX_USED,        HG_INDEX_OUT_OF_WINDOW, HG_INDEX_OUT_OF_WINDOW,
      HG_INDEX_WRONG_GPU,   HG_INDEX_INVALID,     HG_INDEX_INVALID,       HG_INDEX_INVALID,
      HG_INDEX_WRONG_GRADE, HG_INDEX_NOT_GRADED,  HG_INDEX_NOT_GRADED,    HG_INDEX_TERM_TOO_LONG,
      HG_INDEX_USED,        HG_INDEX_DUPLICATE,   HG_INDEX_QUOTE_NOT_USED};
  for (size_t i = 0; i < n; i++) {
    if (reason_of(&r, (uint32_t)i) != want[i])
      fail_msg("sample %zu: %s, want %s", i, hg_index_reason_str(reason_of(&r, (uint32_t)i)),
               hg_index_reason_str(want[i]));
  }
  assert_int_equal(r.input_count, n);
  assert_int_equal(r.tier[0].reason_count[HG_INDEX_INVALID], 3);
  assert_int_equal(r.tier[0].reason_count[HG_INDEX_USED], 3);
  assert_string_equal(r.methodology, "v1");
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* A sample failing several checks gets the first in the stated order. */
static void eligibility_order(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {
      S(T0 - 1, "p1", "H100", "A", 30, 2000000, 10, HG_INDEX_TRADE),     /* window < gpu */
      S(T0 + 1, "p1", "H100", "A", 30, 0, 10, HG_INDEX_TRADE),           /* gpu < invalid */
      S(T0 + 2, "p1", "B200", "B", 30, 2000000, -1, HG_INDEX_TRADE),     /* invalid < grade */
      S(T0 + 3, "nobody", "B200", "B", 30, 2000000, 1, HG_INDEX_TRADE),  /* grade < not graded */
      S(T0 + 4, "nobody", "B200", "A", 99, 2000000, 1, HG_INDEX_TRADE),  /* not graded < term */
      S(T0 + 5, "p1", "B200", "A", 30, 2000000, 10, HG_INDEX_TRADE),     /* 5 used */
      S(T0 + 5, "p1", "B200", "A", 99, 2000000, 10, HG_INDEX_TRADE),     /* term < duplicate */
      S(T0 + 6, "p2", "B200", "A", 30, 2000000, 10, HG_INDEX_QUOTE),     /* 7 quote */
      S(T0 + 6, "p2", "B200", "A", 30, 2000000, 10, HG_INDEX_QUOTE),     /* duplicate < quote */
  };
  static const int want[] = {HG_INDEX_OUT_OF_WINDOW, HG_INDEX_WRONG_GPU,     HG_INDEX_INVALID,
                             HG_INDEX_WRONG_GRADE,   HG_INDEX_NOT_GRADED,    HG_INDEX_USED,
                             HG_INDEX_TERM_TOO_LONG, HG_INDEX_QUOTE_NOT_USED, HG_INDEX_DUPLICATE};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 9, &r);
  assert_int_equal(r.receipt_tier, 1);
  for (uint32_t i = 0; i < 9; i++) assert_int_equal(reason_of(&r, i), want[i]);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* DUPLICATE: same (provider, ts, price, volume, kind) as any earlier line,
 * whatever became of it; region and term do not matter; kind does. */
static void duplicate_rule(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {
      S(T0 + 100, "p1", "H100", "A", 30, 2000000, 10, HG_INDEX_TRADE), /* 0 WRONG_GPU */
      T(T0 + 100, "p1", 2000000, 10),                                  /* 1 DUPLICATE of 0 */
      S(T0 + 200, "p2", "B200", "C", 30, 2000000, 10, HG_INDEX_TRADE), /* 2 WRONG_GRADE */
      S(T0 + 200, "p2", "B200", "A", 5, 2000000, 10, HG_INDEX_TRADE),  /* 3 DUPLICATE of 2 */
      T(T0 + 300, "p3", 2000000, 10),                                  /* 4 used */
      S(T0 + 300, "p3", "B200", "A", 30, 2000000, 10, HG_INDEX_QUOTE), /* 5 kind differs: quote */
      T(T0 + 300, "p3", 2000001, 10),                                  /* 6 price differs: used */
      T(T0 + 300, "p3", 2000000, 11),                                  /* 7 volume differs: used */
      T(T0 + 301, "p3", 2000000, 10),                                  /* 8 ts differs: used */
      T(T0 + 300, "p4", 2000000, 10),                                  /* 9 provider differs: used */
      T(T0 + 300, "p3", 2000000, 10),                                  /* 10 DUPLICATE of 4 */
  };
  s[3].region[0] = 'X';
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  /* Tier 2 receipt, so the quote's own fate is visible (used, not a duplicate). */
  cfg.min_providers = 100;
  fix(&cfg, &reg, NULL, D, s, 11, &r);
  assert_int_equal(r.receipt_tier, 2);
  static const int want[] = {HG_INDEX_WRONG_GPU, HG_INDEX_DUPLICATE, HG_INDEX_WRONG_GRADE,
                             HG_INDEX_DUPLICATE, HG_INDEX_USED,      HG_INDEX_USED,
                             HG_INDEX_USED,      HG_INDEX_USED,      HG_INDEX_USED,
                             HG_INDEX_USED,      HG_INDEX_DUPLICATE};
  for (uint32_t i = 0; i < 11; i++) assert_int_equal(reason_of(&r, i), want[i]);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* ------------------------------------------------------------- step 2 */

/* Prices 1.0 1.1 1.2 1.3 1.4 5.0 (n = 6): M is the lower middle 1.2, not 1.25
 * or 1.3. |p - M| = .2 .1 0 .1 .2 3.8 -> sorted 0 .1 .1 .2 .2 3.8, MAD = .1.
 * Excluded when 10000 x dev > 44478 x 100000, i.e. dev > 444780: only 5.0. */
static void outliers_even_count(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {T(T0 + 1, "p1", 1000000, 10), T(T0 + 2, "p1", 1100000, 10),
                           T(T0 + 3, "p1", 1200000, 10), T(T0 + 4, "p1", 1300000, 10),
                           T(T0 + 5, "p1", 1400000, 10), T(T0 + 6, "p1", 5000000, 10)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 6, &r);
  assert_int_equal(r.tier[0].median, 1200000);
  assert_int_equal(r.tier[0].mad, 100000);
  for (uint32_t i = 0; i < 5; i++) assert_int_equal(reason_of(&r, i), HG_INDEX_USED);
  assert_int_equal(reason_of(&r, 5), HG_INDEX_OUTLIER);
  assert_int_equal(r.tier[0].used, 5);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* Sorted 555219 .8 .9 1.0 1.0 1.1 1.2 1444780 (n = 8): M = 1000000 (index 3);
 * devs 0 0 .1 .1 .2 .2 444780 444781 -> MAD = 100000. 444780 is exactly on the
 * boundary (4447800000 > 4447800000 is false): kept; 444781 excluded. */
static void outlier_boundary(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {T(T0 + 1, "p1", 800000, 10),  T(T0 + 2, "p1", 900000, 10),
                           T(T0 + 3, "p1", 1000000, 10), T(T0 + 4, "p1", 1000000, 11),
                           T(T0 + 5, "p1", 1100000, 10), T(T0 + 6, "p1", 1200000, 10),
                           T(T0 + 7, "p1", 1444780, 10), T(T0 + 8, "p1", 555219, 10)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 8, &r);
  assert_int_equal(r.tier[0].median, 1000000);
  assert_int_equal(r.tier[0].mad, 100000);
  assert_int_equal(reason_of(&r, 6), HG_INDEX_USED);
  assert_int_equal(reason_of(&r, 7), HG_INDEX_OUTLIER);
  assert_int_equal(r.tier[0].reason_count[HG_INDEX_OUTLIER], 1);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* MAD = 0 (more than half the prices equal): nothing is excluded. */
static void outlier_mad_zero(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {T(T0 + 1, "p1", 1000000, 10), T(T0 + 2, "p2", 1000000, 10),
                           T(T0 + 3, "p3", 1000000, 10), T(T0 + 4, "p4", 99000000, 10),
                           T(T0 + 5, "p5", 1, 10)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 5, &r);
  assert_int_equal(r.tier[0].median, 1000000);
  assert_int_equal(r.tier[0].mad, 0);
  assert_int_equal(r.n_exclusions, 0);
  assert_int_equal(r.tier[0].used, 5);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* ------------------------------------------------------------- step 3 */

/* 5 providers: V = 100, C = 20. p1 (25 + 35 = 60 > 20) is capped:
 * floor(25*20*2^20/60) = floor(524288000/60) = 8738133,
 * floor(35*20*2^20/60) = floor(734003200/60) = 12233386.
 * p2 has exactly C = 20: not above it, so w = 20 * 2^20. */
static void provider_cap_applied(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {T(T0 + 1, "p1", 1000000, 25), T(T0 + 2, "p1", 1000000, 35),
                           T(T0 + 3, "p2", 1000000, 20), T(T0 + 4, "p3", 1000000, 10),
                           T(T0 + 5, "p4", 1000000, 5),  T(T0 + 6, "p5", 1000000, 5)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 6, &r);
  assert_true(r.tier[0].cap_applied);
  assert_int_equal(r.tier[0].cap, 20);
  assert_int_equal(weight_of(&r, 0), 8738133);
  assert_int_equal(weight_of(&r, 1), 12233386);
  assert_int_equal(weight_of(&r, 2), 20 * ONE);
  assert_int_equal(weight_of(&r, 3), 10 * ONE);
  assert_int_equal(weight_of(&r, 4), 5 * ONE);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* 4 providers: no cap even though p1 has 60% of the volume. */
static void provider_cap_needs_five(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {T(T0 + 1, "p1", 1000000, 25), T(T0 + 2, "p1", 1000000, 35),
                           T(T0 + 3, "p2", 1000000, 20), T(T0 + 4, "p3", 1000000, 10),
                           T(T0 + 5, "p4", 1000000, 10)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 5, &r);
  assert_false(r.tier[0].cap_applied);
  assert_int_equal(weight_of(&r, 0), 25 * ONE);
  assert_int_equal(weight_of(&r, 1), 35 * ONE);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* Volumes of 10^12: v*C*2^20 = 10^12 * 1.2*10^12 * 2^20 needs 128 bits.
 * V = 6*10^12, C = 1.2*10^12, p1 has 2*10^12: w = 0.6*10^12 * 2^20. */
static void provider_cap_128bit(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  const int64_t T12 = INT64_C(1000000000000);
  hg_index_sample_t s[] = {T(T0 + 1, "p1", 1000000, T12), T(T0 + 2, "p1", 1000000, T12),
                           T(T0 + 3, "p2", 1000000, T12), T(T0 + 4, "p3", 1000000, T12),
                           T(T0 + 5, "p4", 1000000, T12), T(T0 + 6, "p5", 1000000, T12)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 6, &r);
  assert_int_equal(r.tier[0].cap, INT64_C(1200000000000));
  assert_int_equal(weight_of(&r, 0), INT64_C(629145600000000000));
  assert_int_equal(weight_of(&r, 2), INT64_C(1048576000000000000));
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* ------------------------------------------------------------- step 4 */

static void hourly_weighted_median(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {
      /* hour 0: 1,2,3 with equal weight: 2*cum >= 3 first at price 2 */
      T(T0 + 1, "p1", 1000000, 1), T(T0 + 2, "p1", 3000000, 1), T(T0 + 3, "p1", 2000000, 1),
      /* hour 1: 1 and 2, equal weight: 2*1 >= 2 at price 1 (the lower) */
      T(T0 + H + 1, "p1", 2000000, 1), T(T0 + H + 2, "p1", 1000000, 1),
      /* hour 2: 1 (v 1) and 2 (v 3): 2*1 < 4, then 2*4 >= 4: price 2 */
      T(T0 + 2 * H + 1, "p1", 1000000, 1), T(T0 + 2 * H + 2, "p1", 2000000, 3),
      /* hour 23: one sample (dev 3000000 <= 4.4478 x MAD 1000000: kept) */
      T(T0 + 23 * H + 3599, "p1", 5000000, 5)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 8, &r);
  assert_int_equal(r.n_exclusions, 0);
  assert_int_equal(r.tier[0].hours, 4);
  assert_int_equal(r.tier[0].bucket[0], 2000000);
  assert_int_equal(r.tier[0].bucket[1], 1000000);
  assert_int_equal(r.tier[0].bucket[2], 2000000);
  assert_int_equal(r.tier[0].bucket[23], 5000000);
  assert_int_equal(r.tier[0].bucket_n[0], 3);
  assert_int_equal(r.tier[0].bucket_n[5], 0);
  assert_int_equal(r.tier[0].median, 2000000);
  assert_int_equal(r.tier[0].mad, 1000000);
  /* (2+1+2+5)/4 = 2.5 USD exactly */
  assert_int_equal(r.fixing.value, 2500000);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* Ties on price are ordered by provider bytes ("B" 0x42 < "a" 0x61 < "ab" <
 * "b"), then ts; equal weights make the first item of the order the median. */
static void hourly_tie_break(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[] = {
      /* hour 0: "b","ab","a","B" at one price, weights 3,1,1,1 -> total 6;
       * order B, a, ab, b: 2*1 < 6, 2*2 < 6, 2*3 >= 6 -> "ab" (index 1) */
      T(T0 + 1, "b", 1000000, 3), T(T0 + 2, "ab", 1000000, 1), T(T0 + 3, "a", 1000000, 1),
      T(T0 + 4, "B", 1000000, 1),
      /* hour 1: same provider and price, ts 200 before 100 in input: ts 100
       * (index 5) comes first and alone reaches half */
      T(T0 + H + 200, "a", 1000000, 1), T(T0 + H + 100, "a", 1000000, 1),
      /* hour 2: "a" vs "B", equal weights: "B" (index 7) first */
      T(T0 + 2 * H, "a", 1000000, 1), T(T0 + 2 * H, "B", 1000000, 1)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 8, &r);
  assert_int_equal(r.tier[0].providers, 4);
  assert_int_equal(r.tier[0].bucket_sample[0], 1);
  assert_int_equal(r.tier[0].bucket_sample[1], 5);
  assert_int_equal(r.tier[0].bucket_sample[2], 7);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

/* ------------------------------------------------------------- step 5 */

static int64_t value_of_buckets(const int64_t *b, size_t n) {
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[HG_INDEX_HOURS];
  for (size_t h = 0; h < n; h++) s[h] = T(T0 + (int64_t)h * H, "p1", b[h], 1);
  hg_index_config_t cfg = loose();
  cfg.outlier_k_num = INT64_C(1) << 40; /* keep every bucket */
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, n, &r);
  assert_int_equal(r.tier[0].hours, n);
  int64_t v = r.fixing.value;
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
  return v;
}

static void mean_rounds_half_up(void **state) {
  (void)state;
  /* 1000001.5 -> 1000002 (half goes up) */
  assert_int_equal(value_of_buckets((int64_t[]){1000001, 1000002}, 2), 1000002);
  /* 1000000.333 -> 1000000 (down) */
  assert_int_equal(value_of_buckets((int64_t[]){1000000, 1000000, 1000001}, 3), 1000000);
  /* 1000000.667 -> 1000001 (up) */
  assert_int_equal(value_of_buckets((int64_t[]){1000000, 1000001, 1000001}, 3), 1000001);
  /* 2.5 -> 3 with tiny values: floor((2*5 + 2) / 4) */
  assert_int_equal(value_of_buckets((int64_t[]){2, 3}, 2), 3);
}

/* ------------------------------------------------------------ step 6, 7 */

/* A day of trades: `provs` providers x `hours` hours, one sample each, of
 * volume `vol`, all at 2.000000 except a provider-dependent cent. */
static size_t make_day(hg_index_sample_t *s, int32_t day, int provs, int hours, int64_t vol,
                       int kind) {
  size_t n = 0;
  for (int h = 0; h < hours; h++)
    for (int p = 0; p < provs; p++)
      s[n++] = S((int64_t)day * 86400 + h * H + p, PROVS[p], "B200", "A", 30,
                 2000000 + 10000 * p, vol, kind);
  return n;
}

static void tier1_sufficient_at_thresholds(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[400];
  /* 5 providers x 12 hours x 17 = 1020 GPU-hours; plus quotes (tier 1 ignores) */
  size_t n = make_day(s, D, 5, 12, 17, HG_INDEX_TRADE);
  n += make_day(s + n, D, 1, 12, 1000, HG_INDEX_QUOTE);
  hg_index_result_t r;
  fix(NULL, &reg, NULL, D, s, n, &r);
  assert_int_equal(r.fixing.tier, 1);
  assert_int_equal(r.fixing.kind, HG_INDEX_COMPUTED);
  assert_int_equal(r.fixing.status, HG_INDEX_PROVISIONAL);
  assert_false(r.tier[1].tried);
  /* buckets: lower weighted median of 2.00..2.04 equal weights -> 2.02 */
  assert_int_equal(r.fixing.value, 2020000);
  assert_int_equal(r.tier[0].reason_count[HG_INDEX_QUOTE_NOT_USED], 12);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

static void tier1_insufficient_uses_tier2(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_sample_t s[400];
  hg_index_result_t r;
  /* 4 trading providers; a 5th only quotes: tier 2 has 5 providers. */
  size_t n = make_day(s, D, 4, 12, 30, HG_INDEX_TRADE);
  for (int h = 0; h < 12; h++)
    s[n++] = S(T0 + h * H + 30, "p5", "B200", "A", 30, 2040000, 30, HG_INDEX_QUOTE);
  fix(NULL, &reg, NULL, D, s, n, &r);
  assert_int_equal(r.tier[0].providers, 4);
  assert_false(r.tier[0].sufficient);
  assert_int_equal(r.fixing.tier, 2);
  assert_int_equal(r.receipt_tier, 2);
  assert_int_equal(r.tier[1].providers, 5);
  assert_int_equal(r.fixing.value, 2020000);
  /* The receipt holds tier 2's exclusions: the quotes are used. */
  assert_int_equal(r.n_exclusions, 0);
  assert_int_equal(r.n_weights, n);
  hg_index_result_dispose(&r);

  /* 11 hours fails both tiers; 999 GPU-hours fails both tiers. */
  n = make_day(s, D, 5, 11, 30, HG_INDEX_TRADE);
  fix(NULL, &reg, NULL, D, s, n, &r);
  assert_int_equal(r.tier[1].hours, 11);
  assert_int_equal(r.fixing.status, HG_INDEX_NO_FIX);
  assert_int_equal(r.fixing.tier, 0);
  hg_index_result_dispose(&r);
  n = make_day(s, D, 5, 12, 16, HG_INDEX_TRADE); /* 960 */
  s[0].volume += 39;                             /* 999 */
  fix(NULL, &reg, NULL, D, s, n, &r);
  assert_int_equal(r.tier[1].volume, 999);
  assert_int_equal(r.fixing.status, HG_INDEX_NO_FIX);
  hg_index_result_dispose(&r);
  s[0].volume += 1; /* 1000 */
  fix(NULL, &reg, NULL, D, s, n, &r);
  assert_int_equal(r.fixing.tier, 1);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

static void publish(hg_index_history_t *h, const hg_index_fixing_t *f, int want) {
  int outcome = 0;
  assert_int_equal(hg_index_history_publish(h, NULL, f, &outcome), 0);
  assert_int_equal(outcome, want);
}

static void carry_forward_three_days_then_no_fix(void **state) {
  (void)state;
  hg_index_registry_t reg;
  reg_all_a(&reg, PROVS, NPROVS);
  hg_index_fixing_t store[16];
  hg_index_history_t h;
  hg_index_history_init(&h, store, 16);
  hg_index_sample_t s[400];
  hg_index_result_t r;

  /* Day D-1 computed, then finalized. */
  size_t n = make_day(s, D - 1, 5, 12, 20, HG_INDEX_TRADE);
  fix(NULL, &reg, &h, D - 1, s, n, &r);
  assert_int_equal(r.fixing.value, 2020000);
  publish(&h, &r.fixing, HG_INDEX_PUBLISHED);
  hg_index_result_dispose(&r);

  /* Without a FINAL fixing there is nothing to carry. */
  n = make_day(s, D, 3, 12, 20, HG_INDEX_TRADE);
  fix(NULL, &reg, &h, D, s, n, &r);
  assert_int_equal(r.fixing.status, HG_INDEX_NO_FIX);
  hg_index_result_dispose(&r);
  /* Without any history (the CLI) neither. */
  fix(NULL, &reg, NULL, D, s, n, &r);
  assert_int_equal(r.fixing.status, HG_INDEX_NO_FIX);
  assert_int_equal(r.fixing.tier, 0);
  hg_index_result_dispose(&r);

  assert_int_equal(hg_index_history_finalize(&h, D - 1), 0);
  for (int k = 0; k < 3; k++) {
    n = make_day(s, D + k, 3, 12, 20, HG_INDEX_TRADE);
    fix(NULL, &reg, &h, D + k, s, n, &r);
    assert_int_equal(r.fixing.status, HG_INDEX_PROVISIONAL);
    assert_int_equal(r.fixing.kind, HG_INDEX_CARRIED);
    assert_int_equal(r.fixing.tier, 0);
    assert_int_equal(r.fixing.value, 2020000);
    assert_int_equal(r.fixing.carried_from, D - 1);
    publish(&h, &r.fixing, HG_INDEX_PUBLISHED);
    hg_index_result_dispose(&r);
  }
  /* Fourth day: NO_FIX; and it stays NO_FIX until an operator acts. */
  for (int k = 3; k < 5; k++) {
    n = make_day(s, D + k, 3, 12, 20, HG_INDEX_TRADE);
    fix(NULL, &reg, &h, D + k, s, n, &r);
    assert_int_equal(r.fixing.status, HG_INDEX_NO_FIX);
    assert_int_equal(r.fixing.kind, HG_INDEX_NONE);
    assert_int_equal(r.fixing.value, 0);
    publish(&h, &r.fixing, HG_INDEX_PUBLISHED);
    hg_index_result_dispose(&r);
  }
  /* The operator publishes an external fixing for D+5 and finalizes it:
   * the next insufficient day carries it. */
  hg_index_fixing_t ext;
  assert_int_equal(hg_index_fixing_external(D + 5, 2500000, "thirdparty", &ext), 0);
  publish(&h, &ext, HG_INDEX_PUBLISHED);
  assert_int_equal(hg_index_history_finalize(&h, D + 5), 0);
  assert_string_equal(hg_index_history_get(&h, D + 5)->source, "thirdparty");
  assert_int_equal(hg_index_history_get(&h, D + 5)->kind, HG_INDEX_EXTERNAL);
  n = make_day(s, D + 6, 3, 12, 20, HG_INDEX_TRADE);
  fix(NULL, &reg, &h, D + 6, s, n, &r);
  assert_int_equal(r.fixing.kind, HG_INDEX_CARRIED);
  assert_int_equal(r.fixing.value, 2500000);
  assert_int_equal(r.fixing.carried_from, D + 5);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

static void restatement_and_final(void **state) {
  (void)state;
  hg_index_fixing_t store[2];
  hg_index_history_t h;
  hg_index_history_init(&h, store, 2);
  hg_index_fixing_t f = {.day = D, .value = 2000000, .status = HG_INDEX_PROVISIONAL,
                         .kind = HG_INDEX_COMPUTED, .tier = 1, .carried_from = -1};
  publish(&h, &f, HG_INDEX_PUBLISHED);
  f.value = 2000999; /* moves 999 < one tick: not published */
  f.tier = 2;
  publish(&h, &f, HG_INDEX_UNCHANGED);
  assert_int_equal(hg_index_history_get(&h, D)->value, 2000000);
  assert_int_equal(hg_index_history_get(&h, D)->tier, 1);
  f.value = 1999001; /* 999 down: not published */
  publish(&h, &f, HG_INDEX_UNCHANGED);
  f.value = 2001000; /* exactly one tick: published */
  publish(&h, &f, HG_INDEX_RESTATED);
  assert_int_equal(hg_index_history_get(&h, D)->value, 2001000);
  assert_int_equal(hg_index_history_get(&h, D)->tier, 2);
  f.value = 2000000; /* one tick down */
  publish(&h, &f, HG_INDEX_RESTATED);
  /* A NO_FIX result never erases a published value. */
  hg_index_fixing_t nofix = {.day = D, .status = HG_INDEX_NO_FIX, .carried_from = -1};
  publish(&h, &nofix, HG_INDEX_UNCHANGED);
  assert_int_equal(hg_index_history_get(&h, D)->status, HG_INDEX_PROVISIONAL);

  assert_int_equal(hg_index_history_finalize(&h, D), 0);
  assert_int_equal(hg_index_history_finalize(&h, D), 0);
  f.value = 3000000;
  assert_int_equal(hg_index_history_publish(&h, NULL, &f, NULL), HG_ESTATE);
  hg_index_fixing_t ext;
  assert_int_equal(hg_index_fixing_external(D, 3000000, "src", &ext), 0);
  assert_int_equal(hg_index_history_publish(&h, NULL, &ext, NULL), HG_ESTATE);
  assert_int_equal(hg_index_history_get(&h, D)->value, 2000000);
  assert_int_equal(hg_index_history_get(&h, D)->status, HG_INDEX_FINAL);

  /* NO_FIX then a value: restated; a NO_FIX day cannot be finalized. */
  nofix.day = D - 1;
  publish(&h, &nofix, HG_INDEX_PUBLISHED);
  assert_int_equal(hg_index_history_finalize(&h, D - 1), HG_ESTATE);
  assert_int_equal(hg_index_history_finalize(&h, D + 9), HG_ENOTFOUND);
  assert_int_equal(hg_index_fixing_external(D - 1, 1000, "src", &ext), 0);
  publish(&h, &ext, HG_INDEX_RESTATED);
  assert_int_equal(hg_index_history_get(&h, D - 1)->value, 1000);
  /* Sorted by day, and full at capacity 2. */
  assert_int_equal(h.rec[0].day, D - 1);
  assert_int_equal(h.rec[1].day, D);
  f.day = D + 1;
  assert_int_equal(hg_index_history_publish(&h, NULL, &f, NULL), HG_EFULL);
  /* Argument checks. */
  assert_int_equal(hg_index_fixing_external(D, 0, "src", &ext), HG_EINVAL);
  assert_int_equal(hg_index_fixing_external(D, 1, "", &ext), HG_EINVAL);
  f.status = HG_INDEX_FINAL;
  assert_int_equal(hg_index_history_publish(&h, NULL, &f, NULL), HG_EINVAL);
}

/* ------------------------------------------------------------ registries */

static void registry_effective_dates(void **state) {
  (void)state;
  static const char csv[] = "provider,gpu,grade,effective_from\n"
                            "p1,B200,B,2027-03-15\n"
                            "p1,B200,A,2027-03-10\n"
                            "p1,H100,A,2027-01-01\n"
                            "p2,B200,A,2028-02-29\n"
                            "p2,B200,A,2027-02-29\n"
                            "p2,B200,C,2028-02-29\n"
                            "p3,B200,A,2027-3-01\n"
                            "p3,B200,,2027-03-01\n"
                            "p3,B200,A\n";
  hg_index_registry_t reg;
  assert_int_equal(hg_index_registry_parse(csv, sizeof csv - 1, &reg), 0);
  assert_int_equal(reg.n, 4);
  assert_int_equal(reg.n_errors, 5);
  static const uint32_t lines[] = {6, 7, 8, 9, 10};
  static const int reasons[] = {HG_INDEX_CSV_BAD_DATE, HG_INDEX_CSV_DUPLICATE_ROW,
                                HG_INDEX_CSV_BAD_DATE, HG_INDEX_CSV_EMPTY_FIELD,
                                HG_INDEX_CSV_FIELD_COUNT};
  for (int k = 0; k < 5; k++) {
    assert_int_equal(reg.errors[k].line, lines[k]);
    assert_int_equal(reg.errors[k].reason, reasons[k]);
  }
  assert_null(hg_index_registry_grade(&reg, "p1", "B200", day_of("2027-03-09")));
  assert_string_equal(hg_index_registry_grade(&reg, "p1", "B200", day_of("2027-03-10")), "A");
  assert_string_equal(hg_index_registry_grade(&reg, "p1", "B200", day_of("2027-03-14")), "A");
  assert_string_equal(hg_index_registry_grade(&reg, "p1", "B200", day_of("2027-03-15")), "B");
  assert_string_equal(hg_index_registry_grade(&reg, "p1", "H100", day_of("2027-03-15")), "A");
  assert_null(hg_index_registry_grade(&reg, "p0", "B200", day_of("2027-03-15")));
  assert_null(hg_index_registry_grade(&reg, "p3", "B200", day_of("2027-03-15")));

  /* The change to B on 03-15 leaves 03-14's fixing as it was. */
  hg_index_sample_t s[] = {T(T0 + 1, "p1", 1000000, 10),
                           T(T0 + 86400 + 1, "p1", 1000000, 10)};
  hg_index_config_t cfg = loose();
  hg_index_result_t r;
  fix(&cfg, &reg, NULL, D, s, 2, &r);
  assert_int_equal(reason_of(&r, 0), HG_INDEX_USED);
  hg_index_result_dispose(&r);
  fix(&cfg, &reg, NULL, D + 1, s, 2, &r);
  assert_int_equal(reason_of(&r, 1), HG_INDEX_NOT_GRADED);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

static void grade_table(void **state) {
  (void)state;
  size_t n = 0;
  const hg_grade_t *g = hg_index_grades_default(&n);
  assert_int_equal(n, 3);
  const hg_grade_t *a = hg_index_grade_find("B200", "A");
  assert_non_null(a);
  assert_ptr_equal(a, &g[0]);
  assert_int_equal(a->min_uptime_bp, 9950);
  assert_true(a->rdma_required && a->attestation_required && a->tenant_isolation &&
              a->health_checks && a->tenant_metrics);
  assert_int_equal(a->max_provisioning_h, 24);
  assert_int_equal(a->burn_in_h, 48);
  const hg_grade_t *b = hg_index_grade_find("B200", "B");
  assert_int_equal(b->min_uptime_bp, 9900);
  assert_true(b->rdma_required);
  const hg_grade_t *c = hg_index_grade_find("B200", "C");
  assert_int_equal(c->min_uptime_bp, 9500);
  assert_false(c->rdma_required);
  assert_null(hg_index_grade_find("B200", "D"));
  assert_null(hg_index_grade_find("H100", "A"));
}

/* Output grades and the token product (settlement/CONTRACT.md 7.1, 7.2). */
static void token_grade_table(void **state) {
  (void)state;
  size_t n = 0;
  const hg_token_grade_t *g = hg_index_token_grades_default(&n);
  assert_int_equal(n, 4);
  const hg_token_grade_t *s = hg_index_token_grade_find("OW671B", "S");
  assert_non_null(s);
  assert_ptr_equal(s, &g[2]);
  assert_int_equal(s->input_tokens, 8000);
  assert_int_equal(s->output_tokens, 1000);
  assert_int_equal(s->p50_tps_floor, 100);
  assert_int_equal(s->min_availability_bp, 9950);
  assert_int_equal(hg_index_token_grade_find("OW70B", "F")->p50_tps_floor, 200);
  assert_null(hg_index_token_grade_find("OW671B", "A"));
  assert_null(hg_index_token_grade_find("B200", "S"));
  assert_true(hg_index_product_grade_known(HG_INDEX_TOKENS, "OW671B", "S"));
  assert_false(hg_index_product_grade_known(HG_INDEX_TOKENS, "B200", "A"));
  assert_true(hg_index_product_grade_known(HG_INDEX_GPU_HOURS, "B200", "A"));
  assert_false(hg_index_product_grade_known((hg_index_product_t)7, "B200", "A"));
  assert_string_equal(hg_index_product_prefix(HG_INDEX_GPU_HOURS), "IGX");
  assert_string_equal(hg_index_product_prefix(HG_INDEX_TOKENS), "TPX");
  assert_null(hg_index_product_prefix((hg_index_product_t)7));
}

/* One parser, two headers: each product refuses the other's file, and a
 * token sample computes through hg_index_fix like a GPU-hour sample. */
static void token_samples_one_code_path(void **state) {
  (void)state;
  static const char tok[] =
      "ts,provider,region,class,grade,term_days,price_usd_per_million_tokens,"
      "volume_million_tokens,kind\n"
      "1804982460,p1,us-east,OW671B,S,30,4.02,20,trade\n";
  static const char gpu[] =
      "ts,provider,region,gpu,grade,term_days,price_usd_per_gpu_hour,volume_gpu_hours,kind\n"
      "1804982460,p1,us-east,B200,A,30,4.02,20,trade\n";
  hg_index_sample_set_t a, b;
  assert_int_equal(hg_index_samples_parse_product(tok, sizeof tok - 1, HG_INDEX_TOKENS, &a), 0);
  assert_int_equal(a.n, 1);
  assert_int_equal(a.n_errors, 0);
  assert_string_equal(a.samples[0].gpu, "OW671B");
  assert_int_equal(a.samples[0].price, 4020000);
  assert_int_equal(a.samples[0].volume, 20);
  assert_int_equal(hg_index_samples_parse_product(gpu, sizeof gpu - 1, HG_INDEX_TOKENS, &b), 0);
  assert_int_equal(b.n, 0);
  assert_int_equal(b.errors[0].reason, HG_INDEX_CSV_HEADER);
  hg_index_samples_dispose(&b);
  assert_int_equal(hg_index_samples_parse(tok, sizeof tok - 1, &b), 0);
  assert_int_equal(b.errors[0].reason, HG_INDEX_CSV_HEADER);
  hg_index_samples_dispose(&b);
  assert_int_equal(hg_index_samples_parse_product(tok, sizeof tok - 1, (hg_index_product_t)2, &b),
                   HG_EINVAL);
  assert_string_equal(hg_index_product_header(HG_INDEX_GPU_HOURS),
                      "ts,provider,region,gpu,grade,term_days,price_usd_per_gpu_hour,"
                      "volume_gpu_hours,kind");
  assert_string_equal(hg_index_product_volume_name(HG_INDEX_TOKENS), "volume_million_tokens");

  static const char reg_csv[] = "provider,class,grade,effective_from\np1,OW671B,S,2027-01-01\n";
  hg_index_registry_t reg;
  assert_int_equal(
      hg_index_registry_parse_product(reg_csv, sizeof reg_csv - 1, HG_INDEX_TOKENS, &reg), 0);
  assert_int_equal(reg.n, 1);
  assert_string_equal(hg_index_registry_grade(&reg, "p1", "OW671B", 20891), "S");
  hg_index_result_t res;
  assert_int_equal(hg_index_fix(NULL, &reg, NULL, "OW671B", "S", 20891, a.samples, a.n, &res), 0);
  /* One provider: not sufficient, nothing to carry offline. */
  assert_int_equal(res.fixing.status, HG_INDEX_NO_FIX);
  assert_int_equal(res.tier[0].eligible, 1);
  assert_int_equal(res.tier[0].value, 4020000);
  hg_index_result_dispose(&res);
  hg_index_registry_dispose(&reg);
  static const char reg_gpu[] = "provider,gpu,grade,effective_from\np1,OW671B,S,2027-01-01\n";
  assert_int_equal(
      hg_index_registry_parse_product(reg_gpu, sizeof reg_gpu - 1, HG_INDEX_TOKENS, &reg), 0);
  assert_int_equal(reg.n_errors, 1);
  assert_int_equal(reg.errors[0].reason, HG_INDEX_CSV_HEADER);
  hg_index_registry_dispose(&reg);
  hg_index_samples_dispose(&a);
}

/* ------------------------------------------------------------------ CSV */

#define HDR "ts,provider,region,gpu,grade,term_days,price_usd_per_gpu_hour,volume_gpu_hours,kind\n"

static void csv_samples_and_errors(void **state) {
  (void)state;
  static const char csv[] =
      HDR "1804982400,p1,us,B200,A,30,2.5,100,trade\r\n"          /* 2 ok, CRLF */
          "1804982401,p1,us,B200,A,30,2.5,100\n"                  /* 3 field count */
          "18049824x0,p1,us,B200,A,30,2.5,100,trade\n"            /* 4 bad number ts */
          "1804982400,p1,us,B200,A,30,2.1234567,100,trade\n"      /* 5 too many decimals */
          "99999999999999999999,p1,us,B200,A,30,2.5,100,trade\n"  /* 6 overflow */
          "1804982400,p1,us,B200,A,30,2.5,100,sell\n"             /* 7 unknown kind */
          "1804982400,,us,B200,A,30,2.5,100,trade\n"              /* 8 empty field */
          "\n"                                                     /* 9 empty line */
          "1804982400,p1,us,B200,A,30,0.000001,1,quote\n"         /* 10 ok */
          "1804982400,p1,us,B200,A,30,12,1,trade\n"               /* 11 ok */
          "1804982400,p1,us,B200,A,30,-1.5,1,trade\n"             /* 12 ok (INVALID later) */
          "1804982400,p1,us,B200,A,30,1.,1,trade\n"               /* 13 bad number */
          "1804982400,p1,us,B200,A,30,.5,1,trade\n"               /* 14 bad number */
          "1804982400,p1,us,B200,A,99999999999,1.5,1,trade\n"     /* 15 overflow (int32) */
          "1804982400,p1,us,B200,A,30,1.5,1000000000001,trade\n"  /* 16 range */
          "1804982400,p123456789012345678901234567890123,us,B200,A,30,1.5,1,trade\n" /* 17 */
          "1804982400,\"p1\",us,B200,A,30,1.5,1,trade\n"          /* 18 quote char */
          "1804982400,p1,us,B200,A,30,9223372036854.775807,1,trade\n" /* 19 ok: INT64_MAX */
          "1804982400,p1,us,B200,A,30,9223372036854.775808,1,trade\n" /* 20 overflow */
          "1804982400,p1,us,B200,A,30,1.5,1 ,trade\n"             /* 21 bad number */
          "-5,p1,us,B200,A,-3,1.5,-7,trade";                      /* 22 ok, no final newline */
  hg_index_sample_set_t set;
  assert_int_equal(hg_index_samples_parse(csv, sizeof csv - 1, &set), 0);
  static const struct {
    uint32_t line;
    int32_t col;
    int reason;
  } want[] = {
      {3, -1, HG_INDEX_CSV_FIELD_COUNT},  {4, 0, HG_INDEX_CSV_BAD_NUMBER},
      {5, 6, HG_INDEX_CSV_TOO_MANY_DECIMALS}, {6, 0, HG_INDEX_CSV_OVERFLOW},
      {7, 8, HG_INDEX_CSV_UNKNOWN_KIND},  {8, 1, HG_INDEX_CSV_EMPTY_FIELD},
      {9, -1, HG_INDEX_CSV_EMPTY_LINE},   {13, 6, HG_INDEX_CSV_BAD_NUMBER},
      {14, 6, HG_INDEX_CSV_BAD_NUMBER},   {15, 5, HG_INDEX_CSV_OVERFLOW},
      {16, 7, HG_INDEX_CSV_RANGE},        {17, 1, HG_INDEX_CSV_TOO_LONG},
      {18, 1, HG_INDEX_CSV_BAD_CHAR},     {20, 6, HG_INDEX_CSV_OVERFLOW},
      {21, 7, HG_INDEX_CSV_BAD_NUMBER},
  };
  size_t nw = sizeof want / sizeof want[0];
  assert_int_equal(set.n_errors, nw);
  for (size_t k = 0; k < nw; k++) {
    if (set.errors[k].line != want[k].line || set.errors[k].column != want[k].col ||
        set.errors[k].reason != want[k].reason)
      fail_msg("error %zu: line %u col %d %s", k, set.errors[k].line, set.errors[k].column,
               hg_index_csv_reason_str(set.errors[k].reason));
  }
  assert_int_equal(set.n, 6);
  static const uint32_t lines[] = {2, 10, 11, 12, 19, 22};
  for (size_t k = 0; k < 6; k++) assert_int_equal(set.lines[k], lines[k]);
  assert_int_equal(set.samples[0].price, 2500000);
  assert_int_equal(set.samples[0].ts, INT64_C(1804982400));
  assert_int_equal(set.samples[0].volume, 100);
  assert_int_equal(set.samples[0].term_days, 30);
  assert_int_equal(set.samples[0].kind, HG_INDEX_TRADE);
  assert_string_equal(set.samples[0].provider, "p1");
  assert_string_equal(set.samples[0].region, "us");
  assert_string_equal(set.samples[0].gpu, "B200");
  assert_string_equal(set.samples[0].grade, "A");
  assert_string_equal(set.samples[0].provider, "p1");
  assert_int_equal(set.samples[1].price, 1);
  assert_int_equal(set.samples[1].kind, HG_INDEX_QUOTE);
  assert_int_equal(set.samples[2].price, 12000000);
  assert_int_equal(set.samples[3].price, -1500000);
  assert_int_equal(set.samples[4].price, INT64_MAX);
  assert_int_equal(set.samples[5].ts, -5);
  assert_int_equal(set.samples[5].term_days, -3);
  assert_int_equal(set.samples[5].volume, -7);
  hg_index_samples_dispose(&set);

  /* A wrong header: one error on line 1, nothing parsed. */
  static const char bad[] = "ts,provider,region,gpu,grade,term_days,price,volume,kind\n"
                            "1804982400,p1,us,B200,A,30,2.5,100,trade\n";
  assert_int_equal(hg_index_samples_parse(bad, sizeof bad - 1, &set), 0);
  assert_int_equal(set.n, 0);
  assert_int_equal(set.n_errors, 1);
  assert_int_equal(set.errors[0].line, 1);
  assert_int_equal(set.errors[0].reason, HG_INDEX_CSV_HEADER);
  hg_index_samples_dispose(&set);
  assert_int_equal(hg_index_samples_parse("", 0, &set), 0);
  assert_int_equal(set.n_errors, 1);
  hg_index_samples_dispose(&set);
  assert_string_equal(hg_index_csv_reason_str(HG_INDEX_CSV_TOO_MANY_DECIMALS),
                      "more than 6 decimal places");
}

static void days_and_arguments(void **state) {
  (void)state;
  assert_int_equal(day_of("1970-01-01"), 0);
  assert_int_equal(day_of("2027-03-14"), 20891); /* 1804982400 / 86400 */
  assert_int_equal(day_of("2000-03-01"), 11017);
  int32_t d;
  assert_int_equal(hg_index_day_parse("2027-02-29", 10, &d), HG_EPARSE);
  assert_int_equal(hg_index_day_parse("2027-13-01", 10, &d), HG_EPARSE);
  assert_int_equal(hg_index_day_parse("2027-03-1", 9, &d), HG_EPARSE);
  char buf[11];
  for (int32_t x = 0; x < 40000; x += 37) {
    hg_index_day_format(x, buf);
    assert_int_equal(day_of(buf), x);
  }
  hg_index_day_format(day_of("2028-02-29"), buf);
  assert_string_equal(buf, "2028-02-29");

  hg_index_registry_t reg = {0};
  hg_index_result_t r;
  hg_index_sample_t s = T(T0, "p1", 1, 1);
  s.kind = 7;
  assert_int_equal(hg_index_fix(NULL, &reg, NULL, "B200", "A", D, &s, 1, &r), HG_EINVAL);
  s = T(T0, "p1", 1, HG_INDEX_VOLUME_MAX + 1);
  assert_int_equal(hg_index_fix(NULL, &reg, NULL, "B200", "A", D, &s, 1, &r), HG_ERANGE);
  s = T(T0, "p1", 1, 1);
  memset(s.provider, 'x', sizeof s.provider);
  assert_int_equal(hg_index_fix(NULL, &reg, NULL, "B200", "A", D, &s, 1, &r), HG_EINVAL);
  assert_int_equal(hg_index_fix(NULL, &reg, NULL, "", "A", D, &s, 1, &r), HG_EINVAL);
  assert_int_equal(hg_index_fix(NULL, NULL, NULL, "B200", "A", D, &s, 1, &r), HG_EINVAL);
  assert_int_equal(hg_index_registry_add(&reg, "p1", "B200", "A", 5), 0);
  assert_int_equal(hg_index_registry_add(&reg, "p1", "B200", "B", 5), HG_EEXISTS);
  assert_int_equal(hg_index_registry_add(&reg, "", "B200", "B", 5), HG_EINVAL);
  /* No samples at all: NO_FIX, nothing to report. */
  assert_int_equal(hg_index_fix(NULL, &reg, NULL, "B200", "A", D, NULL, 0, &r), 0);
  assert_int_equal(r.fixing.status, HG_INDEX_NO_FIX);
  assert_int_equal(r.n_exclusions + r.n_weights, 0);
  hg_index_result_dispose(&r);
  hg_index_registry_dispose(&reg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_eligibility_reason),
      cmocka_unit_test(eligibility_order),
      cmocka_unit_test(duplicate_rule),
      cmocka_unit_test(outliers_even_count),
      cmocka_unit_test(outlier_boundary),
      cmocka_unit_test(outlier_mad_zero),
      cmocka_unit_test(provider_cap_applied),
      cmocka_unit_test(provider_cap_needs_five),
      cmocka_unit_test(provider_cap_128bit),
      cmocka_unit_test(hourly_weighted_median),
      cmocka_unit_test(hourly_tie_break),
      cmocka_unit_test(mean_rounds_half_up),
      cmocka_unit_test(tier1_sufficient_at_thresholds),
      cmocka_unit_test(tier1_insufficient_uses_tier2),
      cmocka_unit_test(carry_forward_three_days_then_no_fix),
      cmocka_unit_test(restatement_and_final),
      cmocka_unit_test(registry_effective_dates),
      cmocka_unit_test(grade_table),
      cmocka_unit_test(token_grade_table),
      cmocka_unit_test(token_samples_one_code_path),
      cmocka_unit_test(csv_samples_and_errors),
      cmocka_unit_test(days_and_arguments),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
