/*
 * bench_index: time one day's index fixing over 1,000,000 generated samples
 * (100,000 with --quick). Samples come from a seeded xorshift generator: 400
 * providers, every hour of the day, prices around 2.50 USD with a few outliers,
 * 10% quotes, a sprinkling of other GPUs, grades and exact duplicates, so that
 * every stage of the methodology does real work. Prints
 *   RESULT index.fix_1m_samples_s <seconds> s      (or fix_100k_samples_s)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hourglass/index.h"

#define PROVIDERS 400

static uint64_t rng = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  size_t n = quick ? 100000 : 1000000;
  int32_t day;
  if (hg_index_day_parse("2027-03-14", 10, &day)) return 1;
  int64_t t0 = (int64_t)day * 86400;

  hg_index_registry_t reg = {0};
  char name[HG_INDEX_PROVIDER_MAX];
  for (int p = 0; p < PROVIDERS; p++) {
    snprintf(name, sizeof name, "provider-%03d", p);
    if (hg_index_registry_add(&reg, name, "B200", p % 10 == 9 ? "B" : "A", day - 30)) return 1;
  }
  hg_index_sample_t *s = calloc(n, sizeof *s);
  if (s == NULL) return 1;
  for (size_t i = 0; i < n; i++) {
    uint64_t r = next();
    if (i > 0 && r % 500 == 0) { /* exact repeat of the previous line */
      s[i] = s[i - 1];
      continue;
    }
    hg_index_sample_t *x = &s[i];
    /* Skewed provider mix so the cap binds for the largest ones. */
    uint64_t p = (r >> 8) % PROVIDERS;
    if ((r >> 40) % 4 == 0) p %= 5;
    snprintf(x->provider, sizeof x->provider, "provider-%03u", (unsigned)p);
    memcpy(x->region, "us-east", 8);
    memcpy(x->gpu, (r >> 20) % 100 == 0 ? "H100" : "B200", 5);
    memcpy(x->grade, (r >> 27) % 50 == 0 ? "C" : "A", 2);
    x->ts = t0 + (int64_t)(next() % 86400);
    x->price = 2500000 + (int64_t)(next() % 400001) - 200000;
    if ((r >> 33) % 1000 == 0) x->price *= 4;
    x->volume = 1 + (int64_t)(next() % 64);
    x->term_days = (r >> 45) % 20 == 0 ? 90 : 30;
    x->kind = (r >> 50) % 10 == 0 ? HG_INDEX_QUOTE : HG_INDEX_TRADE;
  }
  hg_index_result_t res;
  double best = 1e9;
  int reps = quick ? 3 : 3;
  for (int k = 0; k < reps; k++) {
    double a = now();
    int rc = hg_index_fix(NULL, &reg, NULL, "B200", "A", day, s, n, &res);
    double b = now();
    if (rc) {
      fprintf(stderr, "hg_index_fix failed: %d\n", rc);
      return 1;
    }
    if (b - a < best) best = b - a;
    if (k + 1 < reps) hg_index_result_dispose(&res);
  }
  fprintf(stderr, "tier %u value %lld providers %u hours %u used %u excluded %zu\n",
          res.fixing.tier, (long long)res.fixing.value, res.tier[0].providers, res.tier[0].hours,
          res.tier[0].used, res.n_exclusions);
  printf("RESULT index.%s %.3f s\n", quick ? "fix_100k_samples_s" : "fix_1m_samples_s", best);
  hg_index_result_dispose(&res);
  hg_index_registry_dispose(&reg);
  free(s);
  return 0;
}
