/*
 * test_u64map - the gateway's open-addressing u64 -> u32 map (mirror.c:
 * linear probing, deletion by backward shift), hashed and dense, against a
 * plain array of (key, value) pairs: random puts, overwrites, gets and
 * deletes over key sets that stress each home function (ids in sequence
 * with a sliding window of live ones, as the exchange hands them out; keys
 * that share a home slot; keys at random), the load kept under one half as
 * the gateway keeps it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gateway_int.h"

#define ENTRIES 1000u /* the map's capacity is 2048 slots */

typedef struct ref {
  uint64_t key[ENTRIES];
  uint32_t val[ENTRIES];
  uint32_t n;
} ref_t;

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(uint64_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng % n;
}

static int ref_find(const ref_t *r, uint64_t k) {
  for (uint32_t i = 0; i < r->n; i++)
    if (r->key[i] == k) return (int)i;
  return -1;
}

/* Every key the reference holds maps to its value; every probe key it
 * does not hold is absent. */
static void agree(const u64map_t *m, const ref_t *r, const uint64_t *probe, size_t np) {
  for (uint32_t i = 0; i < r->n; i++) assert_int_equal(gw_map_get(m, r->key[i]), r->val[i]);
  for (size_t i = 0; i < np; i++)
    if (ref_find(r, probe[i]) < 0) assert_int_equal(gw_map_get(m, probe[i]), NONE32);
}

enum { SEQUENTIAL, SAME_HOME, RANDOM };

static uint64_t next_key(int kind, uint64_t *counter, uint32_t cap) {
  switch (kind) {
  case SEQUENTIAL: return ++*counter;                     /* ids handed out in order */
  case SAME_HOME: return 1 + rnd(64) * cap + rnd(3);      /* a few home slots only */
  default: return 1 + rnd(UINT64_MAX - 1);
  }
}

static void run(int dense, int kind) {
  u64map_t m;
  assert_int_equal(dense ? gw_map_init_dense(&m, ENTRIES) : gw_map_init(&m, ENTRIES), 0);
  uint32_t cap = m.mask + 1;
  static ref_t r;
  memset(&r, 0, sizeof r);
  uint64_t counter = 0, probe[64];
  for (int step = 0; step < 200000; step++) {
    uint64_t op = rnd(100);
    if (op < 50 && r.n < ENTRIES) { /* put a new key, or overwrite one */
      uint64_t k = next_key(kind, &counter, cap);
      uint32_t v = (uint32_t)rnd(1u << 30);
      int at = ref_find(&r, k);
      if (at < 0) {
        r.key[r.n] = k;
        r.val[r.n++] = v;
      } else {
        r.val[at] = v;
      }
      gw_map_put(&m, k, v);
    } else if (op < 60 && r.n > 0) { /* overwrite a live key */
      uint32_t i = (uint32_t)rnd(r.n);
      r.val[i] = (uint32_t)rnd(1u << 30);
      gw_map_put(&m, r.key[i], r.val[i]);
    } else if (r.n > 0) { /* delete: the oldest more often (a sliding window) */
      uint32_t i = rnd(2) == 0 ? 0 : (uint32_t)rnd(r.n);
      gw_map_del(&m, r.key[i]);
      memmove(&r.key[i], &r.key[i + 1], (r.n - i - 1) * sizeof r.key[0]);
      memmove(&r.val[i], &r.val[i + 1], (r.n - i - 1) * sizeof r.val[0]);
      r.n--;
      uint64_t absent = next_key(kind, &(uint64_t){counter + 5000}, cap);
      if (ref_find(&r, absent) < 0) gw_map_del(&m, absent); /* not held: a no-op */
    }
    if (step % 997 == 0) {
      for (size_t i = 0; i < 64; i++) probe[i] = next_key(kind, &(uint64_t){counter + i}, cap);
      agree(&m, &r, probe, 64);
    }
  }
  agree(&m, &r, probe, 0);
  /* Empty again: every slot free. */
  while (r.n > 0) gw_map_del(&m, r.key[--r.n]);
  for (uint32_t i = 0; i < cap; i++) assert_int_equal(m.keys[i], 0);
  gw_map_free(&m);
}

static void hashed_sequential(void **s) { (void)s; run(0, SEQUENTIAL); }
static void hashed_same_home(void **s) { (void)s; run(0, SAME_HOME); }
static void hashed_random(void **s) { (void)s; run(0, RANDOM); }
static void dense_sequential(void **s) { (void)s; run(1, SEQUENTIAL); }
static void dense_same_home(void **s) { (void)s; run(1, SAME_HOME); }
static void dense_random(void **s) { (void)s; run(1, RANDOM); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hashed_sequential), cmocka_unit_test(hashed_same_home),
      cmocka_unit_test(hashed_random),     cmocka_unit_test(dense_sequential),
      cmocka_unit_test(dense_same_home),   cmocka_unit_test(dense_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
