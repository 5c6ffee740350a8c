/*
 * test_command_encode_race: the first calls of hg_command_encode() in a
 * process decide, once, whether its fast encoder may be used. Several
 * threads make their first encode at the same moment here and must all get
 * the protobuf-c bytes; run under ThreadSanitizer too (label concurrency),
 * which would flag an unsynchronized check.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "command_internal.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"

#define THREADS 4
#define ROUNDS 2000

static atomic_int ready;

typedef struct worker {
  pthread_t thr;
  uint32_t id;
  int mismatches;
} worker_t;

static void make_command(uint32_t id, uint32_t i, hg_command_t *c) {
  memset(c, 0, sizeof *c);
  c->seq = ((uint64_t)id << 40) + i + 1;
  c->ts = (uint64_t)i * 1000003u;
  c->type = HG_COMMAND_NEW_ORDER + (id + i) % 4;
  switch (c->type) {
  case HG_COMMAND_NEW_ORDER:
    c->u.new_order = (hg_cmd_new_order_t){.instrument_id = id, .account = i, .client_order_id = i,
                                          .price = -(int64_t)i, .qty = i, .type = (uint8_t)(i % 2),
                                          .stp = (uint8_t)(i % 5), .smp_group = i % 3};
    break;
  case HG_COMMAND_CANCEL:
    c->u.cancel =
        (hg_cmd_cancel_t){.instrument_id = id, .account = i, .order_id = (uint64_t)i << 33};
    break;
  case HG_COMMAND_REPLACE:
    c->u.replace = (hg_cmd_replace_t){.instrument_id = id, .account = i, .order_id = i,
                                      .new_price = INT64_MIN + i, .new_qty = i};
    break;
  default:
    c->u.mass_cancel =
        (hg_cmd_mass_cancel_t){.account = i, .instrument_id = i % 2, .sides = (uint8_t)(i % 3)};
    break;
  }
}

static void *work(void *arg) {
  worker_t *w = arg;
  atomic_fetch_add(&ready, 1);
  while (atomic_load(&ready) < THREADS) {
  }
  for (uint32_t i = 0; i < ROUNDS; i++) {
    hg_command_t c;
    make_command(w->id, i, &c);
    uint8_t a[HG_COMMAND_MAX_ENCODED], b[HG_COMMAND_MAX_ENCODED];
    size_t la = 0, lb = 0;
    int ra = hg_command_encode(&c, a, sizeof a, &la);
    int rb = hg_command__encode_full(&c, b, sizeof b, &lb);
    if (ra != 0 || rb != 0 || la != lb || memcmp(a, b, la) != 0) w->mismatches++;
  }
  return NULL;
}

static void test_first_encodes_race(void **state) {
  (void)state;
  worker_t w[THREADS];
  for (uint32_t k = 0; k < THREADS; k++) {
    w[k] = (worker_t){.id = k + 1};
    assert_int_equal(pthread_create(&w[k].thr, NULL, work, &w[k]), 0);
  }
  for (uint32_t k = 0; k < THREADS; k++) {
    assert_int_equal(pthread_join(w[k].thr, NULL), 0);
    assert_int_equal(w[k].mismatches, 0);
  }
  /* and the decision the racing threads made is the fast one */
  assert_int_equal(hg_command__encode_fast_active(), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_encodes_race),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
