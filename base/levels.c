/*
 * levels.c - one side of a depth-of-book mirror (hourglass/levels.h).
 *
 * A sorted array, best first: a price is found by binary search on a key
 * that ascends on both sides (the negated price on the bid side), and a
 * level comes or goes with one memmove. Books hold few levels near the top
 * where nearly all events land, so the memmoves stay short in practice.
 */
#include "hourglass/levels.h"

#include <assert.h>
#include <string.h>

/* Ascending key: best first on both sides. */
static int64_t key(const hg_levels_t *l, int64_t price) {
  return l->side == HG_LEVELS_BID ? -price : price;
}

void hg_levels_init(hg_levels_t *l, int side, hg_level_t *storage, uint32_t cap) {
  assert(storage != NULL && cap >= 1);
  assert(side == HG_LEVELS_BID || side == HG_LEVELS_ASK);
  l->lv = storage;
  l->cap = cap;
  l->side = (uint8_t)side;
  hg_levels_clear(l);
}

void hg_levels_clear(hg_levels_t *l) {
  l->n = 0;
  l->truncated = 0;
}

/* The levels around position i are in order (strictly better first). */
static void check_around(const hg_levels_t *l, uint32_t i) {
  (void)l;
  (void)i;
  assert(l->n <= l->cap);
  assert(i >= l->n || l->lv[i].qty > 0);
  assert(i == 0 || i >= l->n || key(l, l->lv[i - 1].price) < key(l, l->lv[i].price));
  assert(i + 1 >= l->n || key(l, l->lv[i].price) < key(l, l->lv[i + 1].price));
}

int hg_levels_set(hg_levels_t *l, int64_t price, int64_t qty) {
  hg_level_t *a = l->lv;
  uint32_t n = l->n, lo = 0, hi = n;
  int64_t k = key(l, price);
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (key(l, a[mid].price) < k) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < n && a[lo].price == price) {
    if (qty > 0) {
      a[lo].qty = qty;
    } else {
      memmove(&a[lo], &a[lo + 1], (n - lo - 1) * sizeof *a);
      l->n = n - 1;
    }
    check_around(l, lo);
    return 0;
  }
  if (qty <= 0) return 0;
  int overflow = 0;
  if (n == l->cap) {
    l->truncated = 1;
    overflow = 1;
    if (lo == n) return overflow; /* worse than every level kept: dropped */
    n--;                          /* the worst level makes room */
  }
  memmove(&a[lo + 1], &a[lo], (n - lo) * sizeof *a);
  a[lo].price = price;
  a[lo].qty = qty;
  l->n = n + 1;
  check_around(l, lo);
  return overflow;
}
