/*
 * test_levels.c - hourglass/levels.h against a model: after every random update the side
 * must equal a plain map of the levels kept, rebuilt from scratch into a
 * sorted array and cut to the capacity by dropping the worst (the overflow
 * rule), with the same truncated flag. Small price ranges and capacities
 * make evictions and drops frequent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/levels.h"

#define PRICES 64 /* prices 1..PRICES */

typedef struct model {
  int64_t qty[PRICES + 1]; /* by price; 0: not kept */
  int side;
  uint32_t cap;
  int truncated;
} model_t;

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* The kept levels, best first, rebuilt from the map. */
static uint32_t model_sorted(const model_t *m, hg_level_t *out) {
  uint32_t n = 0;
  for (int64_t i = 0; i < PRICES; i++) {
    int64_t p = m->side == HG_LEVELS_BID ? PRICES - i : i + 1;
    if (m->qty[p] > 0) out[n++] = (hg_level_t){p, m->qty[p]};
  }
  return n;
}

/* The rule of levels.h: apply, then while over capacity drop the worst. */
static int model_set(model_t *m, int64_t price, int64_t qty) {
  m->qty[price] = qty > 0 ? qty : 0;
  hg_level_t all[PRICES];
  uint32_t n = model_sorted(m, all);
  if (n <= m->cap || n > PRICES) return 0; /* n > PRICES cannot happen; it tells gcc -O3 so */
  m->qty[all[n - 1].price] = 0;
  m->truncated = 1;
  return 1;
}

static void check_equal(const hg_levels_t *l, const model_t *m) {
  hg_level_t want[PRICES];
  uint32_t n = model_sorted(m, want);
  assert_int_equal(l->n, n);
  for (uint32_t i = 0; i < n; i++) {
    assert_int_equal(l->lv[i].price, want[i].price);
    assert_int_equal(l->lv[i].qty, want[i].qty);
  }
  assert_int_equal(l->truncated, m->truncated);
}

static void run(int side, uint32_t cap, uint64_t seed, int steps) {
  hg_level_t store[PRICES];
  hg_levels_t l;
  hg_levels_init(&l, side, store, cap);
  model_t m;
  memset(&m, 0, sizeof m);
  m.side = side;
  m.cap = cap;
  uint64_t s = seed;
  for (int i = 0; i < steps; i++) {
    uint64_t r = rng(&s);
    if (r % 997 == 0) { /* now and then start over */
      hg_levels_clear(&l);
      memset(m.qty, 0, sizeof m.qty);
      m.truncated = 0;
      check_equal(&l, &m);
      continue;
    }
    int64_t price = (int64_t)(r >> 8) % PRICES + 1;
    int64_t qty = (int64_t)(r >> 20) % 8 - 2; /* -2..5: a third remove */
    int got = hg_levels_set(&l, price, qty);
    int want = model_set(&m, price, qty);
    assert_int_equal(got, want);
    check_equal(&l, &m);
  }
}

static void test_against_model(void **state) {
  (void)state;
  for (int side = 0; side < 2; side++)
    for (uint32_t cap = 1; cap <= 12; cap++) run(side, cap, 0x9e3779b97f4a7c15ull + cap, 20000);
  /* Room for every price: never truncated. */
  run(HG_LEVELS_BID, PRICES, 7, 20000);
  run(HG_LEVELS_ASK, PRICES, 8, 20000);
}

static void test_rule(void **state) {
  (void)state;
  hg_level_t store[2];
  hg_levels_t l;
  hg_levels_init(&l, HG_LEVELS_ASK, store, 2);
  assert_int_equal(hg_levels_set(&l, 10, 1), 0);
  assert_int_equal(hg_levels_set(&l, 12, 2), 0);
  assert_int_equal(hg_levels_set(&l, 13, 3), 1); /* worse than all: dropped */
  assert_true(l.truncated);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.lv[1].price, 12);
  assert_int_equal(hg_levels_set(&l, 11, 4), 1); /* better: evicts 12 */
  assert_int_equal(l.lv[0].price, 10);
  assert_int_equal(l.lv[1].price, 11);
  assert_int_equal(hg_levels_set(&l, 10, 0), 0); /* removal */
  assert_int_equal(l.n, 1);
  assert_int_equal(hg_levels_set(&l, 99, 0), 0); /* removal of a price not held */
  assert_int_equal(l.n, 1);
  assert_true(l.truncated); /* until cleared */
  hg_levels_clear(&l);
  assert_false(l.truncated);
  assert_int_equal(l.n, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rule),
      cmocka_unit_test(test_against_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
