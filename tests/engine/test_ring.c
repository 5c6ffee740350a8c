/* Rings and waiter, single-threaded behaviour (plus two small threaded
 * wake-up checks): bounds, full/empty, wrap-around, lengths, batch drain,
 * parameter validation, and the waiter's announce/notify/close rules. The
 * ring tests run against both the MPSC and the SPSC ring through one table. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hourglass/ring.h"
#include "hourglass/seqlock.h"

/* ---- one table for both ring kinds ---- */

typedef struct ops {
  const char *name;
  int (*create)(uint32_t cap, uint32_t slot, void **out);
  void (*destroy)(void *r);
  int (*push)(void *r, const void *msg, size_t len);
  int (*pop)(void *r, void *out, size_t out_size, size_t *len);
  size_t (*pop_batch)(void *r, void *out, size_t max, uint32_t *lens);
  const void *(*peek)(void *r, size_t *len);
  void (*consume)(void *r);
  bool (*empty)(void *r);
} ops_t;

#define WRAP(P)                                                                            \
  static int P##_create(uint32_t c, uint32_t s, void **out) {                              \
    hg_##P##_ring_t *r = (hg_##P##_ring_t *)(uintptr_t)0x5a5a;                             \
    int rc = hg_##P##_ring_create(c, s, out == NULL ? NULL : &r);                          \
    if (out != NULL) *out = r;                                                             \
    return rc;                                                                             \
  }                                                                                        \
  static void P##_destroy(void *r) { hg_##P##_ring_destroy(r); }                           \
  static int P##_push(void *r, const void *m, size_t l) { return hg_##P##_ring_try_push(r, m, l); } \
  static int P##_pop(void *r, void *o, size_t n, size_t *l) { return hg_##P##_ring_pop(r, o, n, l); } \
  static size_t P##_pop_batch(void *r, void *o, size_t m, uint32_t *l) {                   \
    return hg_##P##_ring_pop_batch(r, o, m, l);                                            \
  }                                                                                        \
  static const void *P##_peek(void *r, size_t *l) { return hg_##P##_ring_peek(r, l); }     \
  static void P##_consume(void *r) { hg_##P##_ring_consume(r); }                           \
  static bool P##_empty(void *r) { return hg_##P##_ring_empty(r); }                        \
  static const ops_t P##_ops = {#P,        P##_create,  P##_destroy, P##_push,             \
                                P##_pop,   P##_pop_batch, P##_peek,  P##_consume,          \
                                P##_empty};

WRAP(mpsc)
WRAP(spsc)

/* The SPSC ring in its fixed-size form: the tests below that push only
 * whole slots (8-byte values into 8-byte slots) hold for it unchanged. */
static int spsc_fixed_create(uint32_t c, uint32_t s, void **out) {
  hg_spsc_ring_t *r = (hg_spsc_ring_t *)(uintptr_t)0x5a5a;
  int rc = hg_spsc_ring_create_fixed(c, s, out == NULL ? NULL : &r);
  if (out != NULL) *out = r;
  return rc;
}
static const ops_t spsc_fixed_ops = {"spsc_fixed", spsc_fixed_create, spsc_destroy, spsc_push,
                                     spsc_pop,     spsc_pop_batch,    spsc_peek,    spsc_consume,
                                     spsc_empty};

static void *make(const ops_t *o, uint32_t cap, uint32_t slot) {
  void *r = NULL;
  assert_int_equal(o->create(cap, slot, &r), 0);
  assert_non_null(r);
  return r;
}

static void push_u64(const ops_t *o, void *r, uint64_t v) {
  assert_int_equal(o->push(r, &v, sizeof v), 0);
}

static uint64_t pop_u64(const ops_t *o, void *r) {
  uint64_t v = 0;
  size_t len = 0;
  assert_int_equal(o->pop(r, &v, sizeof v, &len), 0);
  assert_int_equal(len, sizeof v);
  return v;
}

/* ---- ring tests ---- */

static void create_rejects_bad_params(void **state) {
  const ops_t *o = *state;
  static const uint32_t bad_caps[] = {0, 1, 3, 6, 100, (1u << 30) + 1, 1u << 31, UINT32_MAX};
  for (size_t i = 0; i < sizeof bad_caps / sizeof bad_caps[0]; i++) {
    void *r = NULL;
    assert_int_equal(o->create(bad_caps[i], 8, &r), HG_EINVAL);
    assert_true(r == (void *)(uintptr_t)0x5a5a); /* out untouched on failure */
  }
  void *r = NULL;
  assert_int_equal(o->create(8, 0, &r), HG_EINVAL);
  assert_int_equal(o->create(8, HG_RING_MAX_SLOT_SIZE + 1, &r), HG_EINVAL);
  assert_int_equal(o->create(8, 8, NULL), HG_EINVAL);
  /* smallest legal values */
  r = make(o, 2, 1);
  assert_true(o->empty(r));
  o->destroy(r);
  o->destroy(NULL);
}

static void empty_ring_reports_empty(void **state) {
  const ops_t *o = *state;
  void *r = make(o, 4, 8);
  unsigned char buf[32];
  size_t len = 77;
  assert_true(o->empty(r));
  assert_int_equal(o->pop(r, buf, sizeof buf, &len), -EAGAIN);
  assert_int_equal(len, 77); /* untouched when empty */
  assert_null(o->peek(r, &len));
  assert_int_equal(o->pop_batch(r, buf, 4, NULL), 0);
  push_u64(o, r, 42);
  assert_false(o->empty(r));
  assert_int_equal(pop_u64(o, r), 42);
  assert_true(o->empty(r));
  o->destroy(r);
}

static void busy_exactly_at_capacity(void **state) {
  const ops_t *o = *state;
  void *r = make(o, 8, 8);
  for (uint64_t i = 0; i < 8; i++) push_u64(o, r, 100 + i);
  uint64_t v = 999;
  assert_int_equal(o->push(r, &v, sizeof v), HG_EBUSY);
  assert_int_equal(o->push(r, &v, sizeof v), HG_EBUSY); /* still full, nothing lost */
  assert_int_equal(pop_u64(o, r), 100);
  push_u64(o, r, 108); /* exactly one slot came free */
  assert_int_equal(o->push(r, &v, sizeof v), HG_EBUSY);
  for (uint64_t i = 1; i <= 8; i++) assert_int_equal(pop_u64(o, r), 100 + i);
  assert_true(o->empty(r));
  o->destroy(r);
}

/* Positions run many laps around a 4-slot ring with a changing fill level,
 * so every slot is reused at every offset. */
static void wraps_around_in_order(void **state) {
  const ops_t *o = *state;
  void *r = make(o, 4, 8);
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 500; round++) {
    int pushes = 1 + round % 4, pops = 1 + (round * 7) % 4;
    for (int i = 0; i < pushes; i++) {
      uint64_t v = next_in;
      int rc = o->push(r, &v, sizeof v);
      if (next_in - next_out == 4) {
        assert_int_equal(rc, HG_EBUSY);
      } else {
        assert_int_equal(rc, 0);
        next_in++;
      }
    }
    for (int i = 0; i < pops && next_out < next_in; i++) assert_int_equal(pop_u64(o, r), next_out++);
  }
  while (next_out < next_in) assert_int_equal(pop_u64(o, r), next_out++);
  assert_true(next_in > 1000);
  assert_true(o->empty(r));
  o->destroy(r);
}

static void slot_size_and_lengths(void **state) {
  const ops_t *o = *state;
  void *r = make(o, 4, 5); /* deliberately not a multiple of 8 */
  const unsigned char five[5] = {1, 2, 3, 4, 5};
  unsigned char six[6] = {0};
  assert_int_equal(o->push(r, six, 6), HG_EINVAL);
  assert_int_equal(o->push(r, NULL, 1), HG_EINVAL);
  assert_true(o->empty(r)); /* rejected pushes left nothing behind */
  assert_int_equal(o->push(r, five, 5), 0);
  assert_int_equal(o->push(r, NULL, 0), 0);
  assert_int_equal(o->push(r, five + 2, 2), 0);

  unsigned char out[8];
  size_t len = 0;
  /* a buffer too small keeps the message in the ring and reports its size */
  assert_int_equal(o->pop(r, out, 4, &len), HG_ERANGE);
  assert_int_equal(len, 5);
  memset(out, 0xee, sizeof out);
  assert_int_equal(o->pop(r, out, sizeof out, &len), 0);
  assert_int_equal(len, 5);
  assert_memory_equal(out, five, 5);
  assert_int_equal(out[5], 0xee); /* nothing copied past the message */

  memset(out, 0xee, sizeof out);
  assert_int_equal(o->pop(r, out, 0, &len), 0); /* empty message fits anything */
  assert_int_equal(len, 0);
  assert_int_equal(out[0], 0xee);

  assert_int_equal(o->pop(r, out, 2, NULL), 0);
  assert_int_equal(out[0], 3);
  assert_int_equal(out[1], 4);
  assert_true(o->empty(r));
  o->destroy(r);
}

/* Fixed size: a push of any other length is refused and leaves nothing;
 * every pop, batch and peek reports the size. */
static void spsc_fixed_lengths(void **state) {
  (void)state;
  hg_spsc_ring_t *r;
  assert_int_equal(hg_spsc_ring_create_fixed(4, 12, &r), 0);
  unsigned char m[12], out[4 * 12];
  memset(m, 7, sizeof m);
  assert_int_equal(hg_spsc_ring_try_push(r, m, 11), HG_EINVAL);
  assert_int_equal(hg_spsc_ring_try_push(r, m, 13), HG_EINVAL);
  assert_int_equal(hg_spsc_ring_try_push(r, NULL, 0), HG_EINVAL);
  assert_true(hg_spsc_ring_empty(r));
  for (int i = 0; i < 3; i++) {
    m[0] = (unsigned char)i;
    assert_int_equal(hg_spsc_ring_try_push(r, m, sizeof m), 0);
  }
  size_t len = 0;
  const unsigned char *p = hg_spsc_ring_peek(r, &len);
  assert_non_null(p);
  assert_int_equal(len, 12);
  assert_int_equal(p[0], 0);
  hg_spsc_ring_consume(r);
  uint32_t lens[4] = {0};
  assert_int_equal(hg_spsc_ring_pop_batch(r, out, 4, lens), 2);
  assert_int_equal(lens[0], 12);
  assert_int_equal(lens[1], 12);
  assert_int_equal(out[0], 1);
  assert_int_equal(out[12], 2);
  assert_int_equal(out[13], 7);
  assert_true(hg_spsc_ring_empty(r));
  hg_spsc_ring_destroy(r);
}

static void batch_drain(void **state) {
  const ops_t *o = *state;
  enum { SLOT = 12 };
  void *r = make(o, 8, SLOT);
  unsigned char msg[SLOT];
  for (int i = 0; i < 5; i++) {
    memset(msg, 'a' + i, sizeof msg);
    assert_int_equal(o->push(r, msg, (size_t)(3 + i)), 0);
  }
  unsigned char out[10 * SLOT];
  uint32_t lens[10];
  memset(out, 0, sizeof out);
  assert_int_equal(o->pop_batch(r, out, 3, lens), 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(lens[i], 3 + i);
    for (int k = 0; k < 3 + i; k++) assert_int_equal(out[i * SLOT + k], 'a' + i);
    assert_int_equal(out[i * SLOT + 3 + i], 0); /* only len bytes copied */
  }
  /* the batch freed its slots: 3 more fit beside the 2 left plus 3 new */
  for (int i = 0; i < 6; i++) {
    memset(msg, 'A' + i, sizeof msg);
    assert_int_equal(o->push(r, msg, SLOT), 0);
  }
  assert_int_equal(o->push(r, msg, SLOT), HG_EBUSY);
  assert_int_equal(o->pop_batch(r, out, 10, lens), 8);
  assert_int_equal(lens[0], 6);
  assert_int_equal(out[0], 'd');
  assert_int_equal(lens[1], 7);
  assert_int_equal(out[SLOT], 'e');
  for (int i = 2; i < 8; i++) {
    assert_int_equal(lens[i], SLOT);
    assert_int_equal(out[i * SLOT + SLOT - 1], 'A' + i - 2);
  }
  assert_int_equal(o->pop_batch(r, out, 10, NULL), 0);
  assert_int_equal(o->pop_batch(r, out, 0, NULL), 0);
  o->destroy(r);
}

static void peek_consume_in_place(void **state) {
  const ops_t *o = *state;
  void *r = make(o, 2, 8);
  push_u64(o, r, 7);
  push_u64(o, r, 8);
  size_t len = 0;
  const void *p1 = o->peek(r, &len);
  assert_non_null(p1);
  assert_int_equal(len, 8);
  const void *p2 = o->peek(r, NULL);
  assert_ptr_equal(p1, p2); /* peek does not advance */
  uint64_t v;
  memcpy(&v, p1, sizeof v);
  assert_int_equal(v, 7);
  uint64_t x = 9;
  assert_int_equal(o->push(r, &x, sizeof x), HG_EBUSY); /* peeked slot not yet free */
  o->consume(r);
  assert_int_equal(o->push(r, &x, sizeof x), 0);
  const void *p3 = o->peek(r, &len);
  memcpy(&v, p3, sizeof v);
  assert_int_equal(v, 8);
  o->consume(r);
  assert_int_equal(pop_u64(o, r), 9);
  assert_null(o->peek(r, NULL));
  o->destroy(r);
}

/* ---- waiter ---- */

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void waiter_create_params(void **state) {
  (void)state;
  hg_waiter_t *w = (hg_waiter_t *)(uintptr_t)0x5a5a;
  assert_int_equal(hg_waiter_create(0, NULL), HG_EINVAL);
  assert_true(w == (hg_waiter_t *)(uintptr_t)0x5a5a);
  assert_int_equal(hg_waiter_create(0, &w), 0);
  assert_false(hg_waiter_closed(w));
  hg_waiter_destroy(w);
  hg_waiter_destroy(NULL);
}

static void notify_costs_nothing_without_sleeper(void **state) {
  (void)state;
  hg_waiter_t *w;
  assert_int_equal(hg_waiter_create(0, &w), 0);
  for (int i = 0; i < 100; i++) hg_waiter_notify(w);
  assert_int_equal(hg_waiter_wakeups(w), 0);
  /* announced then withdrawn: still no wake */
  (void)hg_waiter_prepare(w);
  hg_waiter_cancel(w);
  hg_waiter_notify(w);
  assert_int_equal(hg_waiter_wakeups(w), 0);
  hg_waiter_destroy(w);
}

static void notify_after_announce_is_not_lost(void **state) {
  (void)state;
  hg_waiter_t *w;
  assert_int_equal(hg_waiter_create(0, &w), 0);
  assert_false(hg_waiter_sleeping(w));
  uint32_t tok = hg_waiter_prepare(w);
  assert_true(hg_waiter_sleeping(w));
  hg_waiter_notify(w); /* lands between the re-check and the sleep */
  assert_false(hg_waiter_sleeping(w)); /* the notify took the announcement */
  hg_waiter_notify(w); /* the announcement was taken: no second wake */
  assert_int_equal(hg_waiter_wakeups(w), 1);
  int64_t t0 = mono_ns();
  assert_int_equal(hg_waiter_sleep(w, tok, 5000000000LL), 0);
  assert_true(mono_ns() - t0 < 1000000000LL); /* returned at once, not after 5 s */
  /* the next sleep really sleeps (token is fresh) and times out */
  tok = hg_waiter_prepare(w);
  t0 = mono_ns();
  assert_int_equal(hg_waiter_sleep(w, tok, 20000000), -ETIMEDOUT);
  assert_true(mono_ns() - t0 >= 20000000);
  hg_waiter_notify(w); /* sleep withdrew the announcement */
  assert_int_equal(hg_waiter_wakeups(w), 1);
  hg_waiter_destroy(w);
}

typedef struct counter {
  int calls;
  int true_at; /* 0: never */
} counter_t;

static bool count_ready(void *ctx) {
  counter_t *c = ctx;
  c->calls++;
  return c->true_at != 0 && c->calls >= c->true_at;
}

static void wait_spins_then_checks_around_sleep(void **state) {
  (void)state;
  hg_waiter_t *w;
  assert_int_equal(hg_waiter_create(3, &w), 0);
  counter_t c = {0, 4}; /* initial check + 3 spins: true on the last spin */
  assert_int_equal(hg_waiter_wait(w, count_ready, &c, -1), 0);
  assert_int_equal(c.calls, 4);
  hg_waiter_notify(w);
  assert_int_equal(hg_waiter_wakeups(w), 0); /* never announced sleep */
  hg_waiter_destroy(w);

  assert_int_equal(hg_waiter_create(2, &w), 0);
  c = (counter_t){0, 0};
  /* timeout 0: initial + 2 spins + the re-check after announcing, then out */
  assert_int_equal(hg_waiter_wait(w, count_ready, &c, 0), -ETIMEDOUT);
  assert_int_equal(c.calls, 4);
  hg_waiter_notify(w);
  assert_int_equal(hg_waiter_wakeups(w), 0); /* timing out withdrew the announce */
  hg_waiter_destroy(w);

  assert_int_equal(hg_waiter_create(0, &w), 0);
  c = (counter_t){0, 2}; /* spin 0: the second check is the one after announce */
  assert_int_equal(hg_waiter_wait(w, count_ready, &c, -1), 0);
  assert_int_equal(c.calls, 2);
  hg_waiter_destroy(w);
}

static void ring_wait_times_out_when_empty(void **state) {
  (void)state;
  hg_mpsc_ring_t *r;
  hg_waiter_t *w;
  assert_int_equal(hg_mpsc_ring_create(4, 8, &r), 0);
  assert_int_equal(hg_waiter_create(0, &w), 0);
  int64_t t0 = mono_ns();
  assert_int_equal(hg_mpsc_ring_wait(r, w, 30000000), -ETIMEDOUT);
  assert_true(mono_ns() - t0 >= 30000000);
  uint64_t v = 1;
  assert_int_equal(hg_mpsc_ring_try_push(r, &v, sizeof v), 0);
  assert_int_equal(hg_mpsc_ring_wait(r, w, 0), 0);
  hg_waiter_destroy(w);
  hg_mpsc_ring_destroy(r);
}

typedef struct sleeper {
  hg_spsc_ring_t *ring;
  hg_waiter_t *w;
  int rc;
  uint64_t got;
} sleeper_t;

static void *sleeper_main(void *arg) {
  sleeper_t *s = arg;
  s->rc = hg_spsc_ring_wait(s->ring, s->w, 10000000000LL);
  if (s->rc == 0) {
    size_t len;
    (void)hg_spsc_ring_pop(s->ring, &s->got, sizeof s->got, &len);
  }
  return NULL;
}

static void wakes_a_sleeping_consumer(void **state) {
  (void)state;
  sleeper_t s = {0};
  assert_int_equal(hg_spsc_ring_create(4, 8, &s.ring), 0);
  assert_int_equal(hg_waiter_create(0, &s.w), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, sleeper_main, &s), 0);
  /* wait (bounded) until the consumer has announced sleep, so the notify
   * below must take the wake path */
  for (int i = 0; i < 10000 && !hg_waiter_sleeping(s.w); i++) usleep(1000);
  assert_true(hg_waiter_sleeping(s.w));
  usleep(10000); /* and very likely entered the futex */
  uint64_t v = 0xabcdef;
  int64_t t0 = mono_ns();
  assert_int_equal(hg_spsc_ring_try_push(s.ring, &v, sizeof v), 0);
  hg_waiter_notify(s.w);
  pthread_join(t, NULL);
  assert_int_equal(s.rc, 0); /* woken, not timed out after 10 s */
  assert_true(mono_ns() - t0 < 5000000000LL);
  assert_int_equal(s.got, 0xabcdef);
  assert_int_equal(hg_waiter_wakeups(s.w), 1); /* it was asleep: one syscall */
  assert_false(hg_waiter_sleeping(s.w));
  hg_waiter_destroy(s.w);
  hg_spsc_ring_destroy(s.ring);
}

static void close_wakes_and_drains_first(void **state) {
  (void)state;
  sleeper_t s = {0};
  assert_int_equal(hg_spsc_ring_create(4, 8, &s.ring), 0);
  assert_int_equal(hg_waiter_create(0, &s.w), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, sleeper_main, &s), 0);
  usleep(20000);
  hg_waiter_close(s.w);
  pthread_join(t, NULL);
  assert_int_equal(s.rc, -ECANCELED);
  assert_true(hg_waiter_closed(s.w));
  hg_waiter_close(s.w); /* idempotent */

  /* closed but work pending: wait says 0 until drained, then -ECANCELED */
  uint64_t v = 5;
  assert_int_equal(hg_spsc_ring_try_push(s.ring, &v, sizeof v), 0);
  assert_int_equal(hg_spsc_ring_wait(s.ring, s.w, -1), 0);
  assert_int_equal(hg_spsc_ring_pop(s.ring, &v, sizeof v, NULL), 0);
  assert_int_equal(hg_spsc_ring_wait(s.ring, s.w, -1), -ECANCELED);
  uint32_t tok = hg_waiter_prepare(s.w);
  assert_int_equal(hg_waiter_sleep(s.w, tok, -1), -ECANCELED);
  hg_waiter_destroy(s.w);
  hg_spsc_ring_destroy(s.ring);
}

/* ---- seqlock, single thread ---- */

static void seqlock_publishes_whole_value(void **state) {
  (void)state;
  hg_seqlock_t s;
  hg_seqlock_init(&s);
  hg_tob_t v;
  memset(&v, 0xff, sizeof v);
  assert_true(hg_seqlock_try_read(&s, &v));
  assert_int_equal(v.bid_px, 0);
  assert_int_equal(v.version, 0);
  const hg_tob_t a = {.bid_px = 101, .bid_qty = 5, .ask_px = 103, .ask_qty = 7,
                      .last_px = 102, .last_qty = -1, .version = UINT64_MAX};
  hg_seqlock_write(&s, &a);
  assert_int_equal(atomic_load(&s.seq), 2); /* one write: odd then even */
  hg_seqlock_read(&s, &v);
  assert_memory_equal(&v, &a, sizeof v);
  /* a write in flight (odd sequence) makes a reader retry */
  atomic_store(&s.seq, 3);
  assert_false(hg_seqlock_try_read(&s, &v));
  atomic_store(&s.seq, 4);
  assert_true(hg_seqlock_try_read(&s, &v));
  assert_int_equal(v.last_qty, -1);
}

/* Deferred pushes stay invisible until publish; they count toward a full
 * ring; try_push publishes them with its own message, even when full. */
static void spsc_deferred_publication(void **state) {
  (void)state;
  hg_spsc_ring_t *r;
  assert_int_equal(hg_spsc_ring_create(4, 8, &r), 0);
  uint64_t v = 1, out = 0;
  size_t len = 0;
  assert_int_equal(hg_spsc_ring_try_push_deferred(r, &v, sizeof v), 0);
  v = 2;
  assert_int_equal(hg_spsc_ring_try_push_deferred(r, &v, sizeof v), 0);
  assert_true(hg_spsc_ring_empty(r));
  assert_int_equal(hg_spsc_ring_pop(r, &out, sizeof out, &len), -EAGAIN);
  hg_spsc_ring_publish(r);
  hg_spsc_ring_publish(r); /* nothing new: no-op */
  assert_false(hg_spsc_ring_empty(r));
  assert_int_equal(hg_spsc_ring_pop(r, &out, sizeof out, &len), 0);
  assert_int_equal(out, 1);
  /* one published message left; three deferred fill the ring */
  for (v = 3; v <= 5; v++) assert_int_equal(hg_spsc_ring_try_push_deferred(r, &v, sizeof v), 0);
  assert_int_equal(hg_spsc_ring_try_push_deferred(r, &v, sizeof v), HG_EBUSY);
  /* a failing try_push still publishes what was deferred */
  assert_int_equal(hg_spsc_ring_try_push(r, &v, sizeof v), HG_EBUSY);
  for (uint64_t want = 2; want <= 5; want++) {
    assert_int_equal(hg_spsc_ring_pop(r, &out, sizeof out, &len), 0);
    assert_int_equal(out, want);
  }
  assert_true(hg_spsc_ring_empty(r));
  assert_int_equal(hg_spsc_ring_try_push_deferred(r, NULL, 9), HG_EINVAL);
  v = 6;
  assert_int_equal(hg_spsc_ring_try_push(r, &v, sizeof v), 0); /* visible at once */
  assert_int_equal(hg_spsc_ring_pop(r, &out, sizeof out, &len), 0);
  assert_int_equal(out, 6);
  hg_spsc_ring_destroy(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_prestate(create_rejects_bad_params, (void *)&mpsc_ops),
      cmocka_unit_test_prestate(create_rejects_bad_params, (void *)&spsc_ops),
      cmocka_unit_test_prestate(create_rejects_bad_params, (void *)&spsc_fixed_ops),
      cmocka_unit_test_prestate(empty_ring_reports_empty, (void *)&mpsc_ops),
      cmocka_unit_test_prestate(empty_ring_reports_empty, (void *)&spsc_ops),
      cmocka_unit_test_prestate(empty_ring_reports_empty, (void *)&spsc_fixed_ops),
      cmocka_unit_test_prestate(busy_exactly_at_capacity, (void *)&mpsc_ops),
      cmocka_unit_test_prestate(busy_exactly_at_capacity, (void *)&spsc_ops),
      cmocka_unit_test_prestate(busy_exactly_at_capacity, (void *)&spsc_fixed_ops),
      cmocka_unit_test_prestate(wraps_around_in_order, (void *)&mpsc_ops),
      cmocka_unit_test_prestate(wraps_around_in_order, (void *)&spsc_ops),
      cmocka_unit_test_prestate(wraps_around_in_order, (void *)&spsc_fixed_ops),
      cmocka_unit_test_prestate(slot_size_and_lengths, (void *)&mpsc_ops),
      cmocka_unit_test_prestate(slot_size_and_lengths, (void *)&spsc_ops),
      cmocka_unit_test_prestate(batch_drain, (void *)&mpsc_ops),
      cmocka_unit_test_prestate(batch_drain, (void *)&spsc_ops),
      cmocka_unit_test_prestate(peek_consume_in_place, (void *)&mpsc_ops),
      cmocka_unit_test_prestate(peek_consume_in_place, (void *)&spsc_ops),
      cmocka_unit_test_prestate(peek_consume_in_place, (void *)&spsc_fixed_ops),
      cmocka_unit_test(spsc_deferred_publication),
      cmocka_unit_test(spsc_fixed_lengths),
      cmocka_unit_test(waiter_create_params),
      cmocka_unit_test(notify_costs_nothing_without_sleeper),
      cmocka_unit_test(notify_after_announce_is_not_lost),
      cmocka_unit_test(wait_spins_then_checks_around_sleep),
      cmocka_unit_test(ring_wait_times_out_when_empty),
      cmocka_unit_test(wakes_a_sleeping_consumer),
      cmocka_unit_test(close_wakes_and_drains_first),
      cmocka_unit_test(seqlock_publishes_whole_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
