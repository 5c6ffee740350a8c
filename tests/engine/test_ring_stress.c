/* Rings, waiter and seqlock under real concurrency. Run in the release build
 * and under ThreadSanitizer (label concurrency); `--slow` multiplies the
 * message counts for a soak.
 *
 *  - 4 producers into one MPSC consumer: every message arrives exactly once
 *    and each producer's messages arrive in the order sent.
 *  - SPSC: one producer, one consumer, same checks.
 *  - Blocking consumer (spin 0) fed in bursts with pauses, so it really goes
 *    to sleep many times: no wake-up is lost (a wait that times out while
 *    the ring holds data fails the test), and close ends it after draining.
 *  - Seqlock: a writer publishes values whose fields are all functions of
 *    one counter; readers check every copy is internally consistent and the
 *    version never goes backwards. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "hourglass/ring.h"
#include "hourglass/seqlock.h"

static uint64_t scale = 1; /* --slow: x50 */

enum { NPROD = 4, SLOT = 64 };

/* A message: producer id, its sequence, and a payload derived from both so
 * a torn or mixed-up copy is caught. Length varies with seq. */
typedef struct msg {
  uint32_t producer;
  uint32_t len;
  uint64_t seq;
  uint64_t check[6];
} msg_t;

static size_t msg_len(uint64_t seq) { return 16 + 8 * (size_t)(1 + seq % 6); }

static uint64_t mix(uint32_t p, uint64_t seq, int k) {
  return (seq * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)p << 56) ^ (uint64_t)k;
}

static void fill(msg_t *m, uint32_t p, uint64_t seq) {
  m->producer = p;
  m->seq = seq;
  m->len = (uint32_t)msg_len(seq);
  for (int k = 0; k < 6; k++) m->check[k] = mix(p, seq, k);
}

/* Returns 0 if m, received with length len, is the next message expected
 * from its producer; advances the expectation. */
static int check_msg(const msg_t *m, size_t len, uint64_t *next) {
  if (m->producer >= NPROD) return -1;
  if (len != m->len || len != msg_len(m->seq)) return -2;
  if (m->seq != next[m->producer]) return -3; /* loss, duplicate or reorder */
  size_t words = (len - 16) / 8;
  for (size_t k = 0; k < words; k++)
    if (m->check[k] != mix(m->producer, m->seq, (int)k)) return -4;
  next[m->producer]++;
  return 0;
}

/* ---- MPSC, 4 producers ---- */

typedef struct prod_arg {
  hg_mpsc_ring_t *mpsc;
  hg_spsc_ring_t *spsc;
  hg_waiter_t *w; /* NULL: consumer polls */
  uint32_t id;
  uint64_t n;
  int bursty;
  int fixed;     /* SPSC: a fixed-size ring; every message is pushed whole (SLOT) */
  uint64_t busy; /* pushes refused as full */
} prod_arg_t;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static void *mpsc_producer(void *arg) {
  prod_arg_t *a = arg;
  msg_t m;
  uint64_t seq = 0;
  while (seq < a->n) {
    /* bursty: 1..32 messages, then a pause long enough for the consumer to
     * drain and go to sleep */
    uint64_t burst = a->bursty ? 1 + (seq * 7 + a->id) % 32 : a->n;
    for (uint64_t b = 0; b < burst && seq < a->n; b++) {
      fill(&m, a->id, seq);
      int rc;
      while ((rc = hg_mpsc_ring_try_push(a->mpsc, &m, m.len)) == HG_EBUSY) {
        /* a message published without a notify yet may be the one the
         * consumer is missing: flush before waiting for room */
        if (a->w != NULL) hg_waiter_notify(a->w);
        a->busy++;
        sched_yield();
      }
      if (rc != 0) return (void *)(intptr_t)rc;
      seq++;
      if (a->w != NULL && (b % 2 == 0 || !a->bursty)) hg_waiter_notify(a->w);
    }
    if (a->w != NULL) hg_waiter_notify(a->w); /* covers the odd ones skipped */
    if (a->bursty) pause_us(20 + (long)(seq % 5) * 40);
  }
  return NULL;
}

static void mpsc_four_producers(void **state) {
  (void)state;
  const uint64_t n = 100000 * scale;
  hg_mpsc_ring_t *r;
  assert_int_equal(hg_mpsc_ring_create(256, SLOT, &r), 0);
  prod_arg_t a[NPROD];
  pthread_t t[NPROD];
  for (uint32_t i = 0; i < NPROD; i++) {
    a[i] = (prod_arg_t){.mpsc = r, .id = i, .n = n};
    assert_int_equal(pthread_create(&t[i], NULL, mpsc_producer, &a[i]), 0);
  }
  uint64_t next[NPROD] = {0}, total = 0;
  unsigned char batch[16 * SLOT];
  uint32_t lens[16];
  while (total < NPROD * n) {
    /* rotate through the three ways of consuming */
    switch (total % 3) {
    case 0: {
      msg_t m;
      size_t len;
      if (hg_mpsc_ring_pop(r, &m, sizeof m, &len) == 0) {
        assert_int_equal(check_msg(&m, len, next), 0);
        total++;
        continue;
      }
      break;
    }
    case 1: {
      size_t got = hg_mpsc_ring_pop_batch(r, batch, 16, lens);
      for (size_t k = 0; k < got; k++) {
        msg_t m;
        memcpy(&m, batch + k * SLOT, sizeof m);
        assert_int_equal(check_msg(&m, lens[k], next), 0);
      }
      total += got;
      if (got > 0) continue;
      break;
    }
    default: {
      size_t len;
      const void *p = hg_mpsc_ring_peek(r, &len);
      if (p != NULL) {
        msg_t m;
        memcpy(&m, p, sizeof m);
        assert_int_equal(check_msg(&m, len, next), 0);
        hg_mpsc_ring_consume(r);
        total++;
        continue;
      }
      break;
    }
    }
    sched_yield(); /* empty: 2 cores, let producers run */
  }
  for (int i = 0; i < NPROD; i++) {
    void *ret;
    pthread_join(t[i], &ret);
    assert_null(ret);
    assert_int_equal(next[i], n);
  }
  assert_true(hg_mpsc_ring_empty(r));
  hg_mpsc_ring_destroy(r);
}

/* ---- SPSC ---- */

/* bursty: messages go out deferred and are published in batches of 1 to
 * 7 (or when the ring is full), as the pipeline hands on a command's
 * events. */
static void *spsc_producer(void *arg) {
  prod_arg_t *a = arg;
  msg_t m;
  uint64_t batch = 1, held = 0; /* bursty: this batch's size; deferred, not yet published */
  for (uint64_t seq = 0; seq < a->n; seq++) {
    fill(&m, 0, seq);
    int rc;
    if (a->bursty) {
      while ((rc = hg_spsc_ring_try_push_deferred(a->spsc, &m, a->fixed ? SLOT : m.len)) ==
             HG_EBUSY) {
        hg_spsc_ring_publish(a->spsc);
        held = 0;
        a->busy++;
        sched_yield();
      }
      if (rc == 0 && (++held == batch || seq + 1 == a->n)) {
        hg_spsc_ring_publish(a->spsc);
        held = 0;
        batch = batch % 7 + 1;
      }
    } else {
      while ((rc = hg_spsc_ring_try_push(a->spsc, &m, a->fixed ? SLOT : m.len)) == HG_EBUSY) {
        a->busy++;
        sched_yield();
      }
    }
    if (rc != 0) return (void *)(intptr_t)rc;
    if (a->w != NULL) hg_waiter_notify(a->w);
  }
  return NULL;
}

/* state: NULL, or names "deferred" (the producer publishes in batches)
 * and/or "fixed" (a fixed-size ring: whole messages, no lengths kept). */
static void spsc_one_to_one(void **state) {
  const uint64_t n = 300000 * scale;
  const char *how = *state != NULL ? *state : "";
  int fixed = strstr(how, "fixed") != NULL;
  hg_spsc_ring_t *r;
  assert_int_equal(fixed ? hg_spsc_ring_create_fixed(128, SLOT, &r)
                         : hg_spsc_ring_create(128, SLOT, &r), 0);
  prod_arg_t a = {.spsc = r, .n = n, .bursty = strstr(how, "deferred") != NULL, .fixed = fixed};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, spsc_producer, &a), 0);
  uint64_t next[NPROD] = {0}, total = 0;
  unsigned char batch[32 * SLOT];
  uint32_t lens[32];
  while (total < n) {
    size_t got;
    if (total % 2 == 0) {
      got = hg_spsc_ring_pop_batch(r, batch, 1 + total % 32, lens);
      for (size_t k = 0; k < got; k++) {
        msg_t m;
        memcpy(&m, batch + k * SLOT, sizeof m);
        if (fixed) assert_int_equal(lens[k], SLOT);
        assert_int_equal(check_msg(&m, fixed ? m.len : lens[k], next), 0);
      }
    } else {
      size_t len;
      const void *p = hg_spsc_ring_peek(r, &len);
      got = p != NULL;
      if (p != NULL) {
        msg_t m;
        memcpy(&m, p, sizeof m);
        if (fixed) assert_int_equal(len, SLOT);
        assert_int_equal(check_msg(&m, fixed ? m.len : len, next), 0);
        hg_spsc_ring_consume(r);
      }
    }
    total += got;
    if (got == 0) sched_yield();
  }
  void *ret;
  pthread_join(t, &ret);
  assert_null(ret);
  assert_int_equal(next[0], n);
  hg_spsc_ring_destroy(r);
}

/* ---- blocking consumer ---- */

static void blocking_consumer_loses_no_wakeup(void **state) {
  (void)state;
  const uint64_t n = 10000 * scale;
  enum { BPROD = 2 };
  hg_mpsc_ring_t *r;
  hg_waiter_t *w;
  assert_int_equal(hg_mpsc_ring_create(64, SLOT, &r), 0);
  assert_int_equal(hg_waiter_create(0, &w), 0);
  prod_arg_t a[BPROD];
  pthread_t t[BPROD];
  for (uint32_t i = 0; i < BPROD; i++) {
    a[i] = (prod_arg_t){.mpsc = r, .w = w, .id = i, .n = n, .bursty = 1};
    assert_int_equal(pthread_create(&t[i], NULL, mpsc_producer, &a[i]), 0);
  }
  uint64_t next[NPROD] = {0}, total = 0;
  int producers_joined = 0;
  for (;;) {
    /* Producers never pause for more than 200 us, so a wait that lasts
     * 2 s slept through a notify: that is a lost wake-up (the wait then
     * finds the data only when its timeout expires). */
    int64_t t0 = now_ns();
    int rc = hg_mpsc_ring_wait(r, w, 2000000000LL);
    assert_true(now_ns() - t0 < 2000000000LL);
    if (rc == -ECANCELED) break;
    assert_int_equal(rc, 0);
    msg_t m;
    size_t len;
    while (hg_mpsc_ring_pop(r, &m, sizeof m, &len) == 0) {
      assert_int_equal(check_msg(&m, len, next), 0);
      total++;
    }
    if (total == BPROD * n && !producers_joined) {
      for (int i = 0; i < BPROD; i++) pthread_join(t[i], NULL);
      producers_joined = 1;
      hg_waiter_close(w); /* shutdown path: the next wait returns -ECANCELED */
    }
  }
  assert_true(producers_joined);
  assert_int_equal(total, BPROD * n);
  for (int i = 0; i < BPROD; i++) assert_int_equal(next[i], n);
  /* The pauses let the consumer fall asleep many times; each wake is one
   * syscall, and there are far fewer than messages since a notify to an
   * awake consumer is free. */
  uint64_t wakes = hg_waiter_wakeups(w);
  assert_true(wakes > 10);
  assert_true(wakes < total);
  hg_waiter_destroy(w);
  hg_mpsc_ring_destroy(r);
}

/* ---- seqlock ---- */

typedef struct tob_shared {
  hg_seqlock_t lock;
  _Atomic int done;
  uint64_t updates;
} tob_shared_t;

static void tob_for(uint64_t k, hg_tob_t *v) {
  v->version = k;
  v->bid_px = (int64_t)(1000 + k % 977);
  v->ask_px = v->bid_px + 1 + (int64_t)(k % 5);
  v->bid_qty = (int64_t)(k * 3 + 1);
  v->ask_qty = -(int64_t)k;
  v->last_px = v->bid_px + v->ask_px;
  v->last_qty = (int64_t)(k ^ 0x5555555555ull);
}

static void *tob_writer(void *arg) {
  tob_shared_t *s = arg;
  hg_tob_t v;
  for (uint64_t k = 1; k <= s->updates; k++) {
    tob_for(k, &v);
    hg_seqlock_write(&s->lock, &v);
  }
  /* release: readers that see done also see the last write. */
  atomic_store_explicit(&s->done, 1, memory_order_release);
  return NULL;
}

typedef struct reader_res {
  tob_shared_t *s;
  uint64_t reads, torn, backwards, last;
} reader_res_t;

static void *tob_reader(void *arg) {
  reader_res_t *r = arg;
  hg_tob_t v, want;
  for (;;) {
    /* acquire: pairs with the writer's release of done. */
    int done = atomic_load_explicit(&r->s->done, memory_order_acquire);
    hg_seqlock_read(&r->s->lock, &v);
    r->reads++;
    if (v.version != 0) {
      tob_for(v.version, &want);
      if (memcmp(&v, &want, sizeof v) != 0) r->torn++;
    } else if (v.bid_px != 0 || v.ask_qty != 0 || v.last_qty != 0) {
      r->torn++;
    }
    if (v.version < r->last) r->backwards++;
    r->last = v.version;
    if (done) break;
  }
  return NULL;
}

static void seqlock_readers_never_see_torn_values(void **state) {
  (void)state;
  static tob_shared_t s;
  hg_seqlock_init(&s.lock);
  atomic_store(&s.done, 0);
  s.updates = 300000 * scale;
  enum { NREAD = 2 };
  reader_res_t res[NREAD];
  pthread_t rt[NREAD], wt;
  for (int i = 0; i < NREAD; i++) {
    res[i] = (reader_res_t){.s = &s};
    assert_int_equal(pthread_create(&rt[i], NULL, tob_reader, &res[i]), 0);
  }
  assert_int_equal(pthread_create(&wt, NULL, tob_writer, &s), 0);
  pthread_join(wt, NULL);
  for (int i = 0; i < NREAD; i++) {
    pthread_join(rt[i], NULL);
    assert_int_equal(res[i].torn, 0);
    assert_int_equal(res[i].backwards, 0);
    assert_int_equal(res[i].last, s.updates); /* the final read sees the final write */
    assert_true(res[i].reads > 0);
  }
  /* try_read succeeds when no write is in flight */
  hg_tob_t v;
  assert_true(hg_seqlock_try_read(&s.lock, &v));
  assert_int_equal(v.version, s.updates);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--slow") == 0) scale = 50;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mpsc_four_producers),
      cmocka_unit_test(spsc_one_to_one),
      cmocka_unit_test_prestate(spsc_one_to_one, (void *)"deferred"),
      cmocka_unit_test_prestate(spsc_one_to_one, (void *)"fixed"),
      cmocka_unit_test_prestate(spsc_one_to_one, (void *)"fixed deferred"),
      cmocka_unit_test(blocking_consumer_loses_no_wakeup),
      cmocka_unit_test(seqlock_readers_never_see_torn_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
