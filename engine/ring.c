/*
 * ring.c - bounded lock-free rings and the futex waiter (see hourglass/ring.h).
 *
 * MPSC ring. An array of slots, each carrying a sequence number (Vyukov's
 * bounded queue). Slot i starts with seq = i. A producer reads the shared
 * tail position p, and if slot p % cap has seq == p the slot is free for lap
 * p / cap: it claims it by moving tail from p to p + 1 with a CAS, copies the
 * message, and publishes with seq = p + 1. The consumer, at position h, finds
 * a message when seq == h + 1, copies it out and frees the slot for the next
 * lap with seq = h + cap. seq < p at a producer means the slot still holds
 * the message of the previous lap: the ring is full. Producers contend only
 * on tail; the consumer's head is private; every slot is padded to whole
 * cache lines so neighbouring slots written by different producers never
 * share one. Positions are 64-bit and never wrap in practice.
 *
 * SPSC ring. Two indices, each written by one side: tail by the producer,
 * head by the consumer. Each side keeps a cached copy of the other's index
 * and re-reads the shared one only when the cache says full (producer) or
 * empty (consumer), so in steady state a push or pop touches no line the
 * other side writes except for the slot itself. Each index shares a line
 * with its owner's cache; the read-only configuration sits in a third line.
 * Lengths sit in an array beside the slots, sixteen to a line, a line the
 * consumer reads while the producer writes the next lengths into it: a
 * ring of fixed-size messages (hg_spsc_ring_create_fixed) has no such
 * array, and a push then writes only its slot and, at publish, the tail.
 * The producer asks for the slot a few pushes ahead for writing
 * (PREFETCHW), so its line is already its own when the push comes.
 *
 * Waiter. A futex word: bit 0 "consumer announced sleep", bit 1 "closed",
 * bits 2.. an epoch bumped on every wake. See the protocol in ring.h; the
 * proof of no lost wake-up rests on both sides using read-modify-writes on
 * the same word, so no standalone fence is needed (and ThreadSanitizer, which
 * does not model fences, understands every edge).
 */
#include "hourglass/ring.h"
#include "map_internal.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CACHE_LINE 64u

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static int check_params(uint32_t capacity, uint32_t slot_size, const void *out) {
  if (out == NULL) return HG_EINVAL;
  if (capacity < HG_RING_MIN_CAPACITY || capacity > HG_RING_MAX_CAPACITY) return HG_EINVAL;
  if ((capacity & (capacity - 1)) != 0) return HG_EINVAL;
  if (slot_size == 0 || slot_size > HG_RING_MAX_SLOT_SIZE) return HG_EINVAL;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* MPSC                                                                     */
/* ------------------------------------------------------------------------ */

struct mpsc_slot {
  _Atomic uint64_t seq;
  uint32_t len; /* written by the claiming producer before seq is published */
  uint32_t pad;
  /* slot_size bytes of message follow */
};
#define MPSC_HDR sizeof(struct mpsc_slot)

/* Owned by whoever created it; slots owned by the ring. */
/* Slot memory (and the pipeline's stage): an anonymous mapping the kernel
 * fills with zero pages at once (MAP_POPULATE). Zeroing a heap block touched
 * every page through a page fault, and on this project's paravirtualised
 * hosts that made start-up spend over a second in faults for the default
 * rings (~200 MB); the ring still has all its pages when create returns, so
 * the order path never faults in a first lap. */
void *hg_map__populated(size_t len) {
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  return m == MAP_FAILED ? NULL : m;
}

struct hg_mpsc_ring {
  alignas(CACHE_LINE) _Atomic uint64_t tail; /* shared by all producers */
  alignas(CACHE_LINE) uint64_t head;         /* consumer's private position */
  alignas(CACHE_LINE) unsigned char *slots;  /* read-only after create */
  size_t slots_len;                          /* bytes mapped at slots */
  size_t stride;
  uint64_t mask;
  uint32_t capacity;
  uint32_t slot_size;
};

static inline struct mpsc_slot *mpsc_slot(const hg_mpsc_ring_t *r, uint64_t pos) {
  return (struct mpsc_slot *)(void *)(r->slots + (size_t)(pos & r->mask) * r->stride);
}

int hg_mpsc_ring_create(uint32_t capacity, uint32_t slot_size, hg_mpsc_ring_t **out) {
  int rc = check_params(capacity, slot_size, out);
  if (rc != 0) return rc;
  size_t stride = round_up(MPSC_HDR + slot_size, CACHE_LINE);
  if (capacity > SIZE_MAX / stride) return -ENOMEM;
  hg_mpsc_ring_t *r = aligned_alloc(CACHE_LINE, sizeof *r);
  if (r == NULL) return -ENOMEM;
  memset(r, 0, sizeof *r);
  r->slots_len = (size_t)capacity * stride;
  r->slots = hg_map__populated(r->slots_len);
  if (r->slots == NULL) {
    free(r);
    return -ENOMEM;
  }
  r->stride = stride;
  r->mask = capacity - 1u;
  r->capacity = capacity;
  r->slot_size = slot_size;
  for (uint32_t i = 0; i < capacity; i++) {
    /* relaxed: no other thread can see the ring before create returns it. */
    atomic_store_explicit(&mpsc_slot(r, i)->seq, i, memory_order_relaxed);
  }
  atomic_store_explicit(&r->tail, 0, memory_order_relaxed); /* relaxed: as above */
  r->head = 0;
  *out = r;
  return 0;
}

void hg_mpsc_ring_destroy(hg_mpsc_ring_t *r) {
  if (r == NULL) return;
  (void)munmap(r->slots, r->slots_len);
  free(r);
}

int hg_mpsc_ring_try_push(hg_mpsc_ring_t *r, const void *msg, size_t len) {
  if (len > r->slot_size || (msg == NULL && len > 0)) return HG_EINVAL;
  /* relaxed: tail is only a claim ticket; the slot's seq orders the data. */
  uint64_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
  struct mpsc_slot *s;
  for (;;) {
    s = mpsc_slot(r, pos);
    /* acquire: pairs with the consumer's release when it freed the slot, so
     * our copy cannot overwrite bytes it is still reading. */
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    int64_t diff = (int64_t)(seq - pos);
    if (diff == 0) {
      /* relaxed (both): winning the CAS only grants the slot; the acquire on
       * seq above already ordered us after the consumer's release. */
      if (atomic_compare_exchange_weak_explicit(&r->tail, &pos, pos + 1, memory_order_relaxed,
                                                memory_order_relaxed))
        break;
    } else if (diff < 0) {
      return HG_EBUSY; /* the slot still holds last lap's message */
    } else {
      /* relaxed: another producer took pos; fetch the newer ticket. */
      pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
    }
  }
  s->len = (uint32_t)len;
  if (len > 0) memcpy((unsigned char *)s + MPSC_HDR, msg, len);
  /* release: the consumer's acquire of seq must see len and the bytes. */
  atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
  return 0;
}

const void *hg_mpsc_ring_peek(hg_mpsc_ring_t *r, size_t *len_out) {
  struct mpsc_slot *s = mpsc_slot(r, r->head);
  /* acquire: pairs with the producer's release publishing the message. */
  if (atomic_load_explicit(&s->seq, memory_order_acquire) != r->head + 1) return NULL;
  if (len_out != NULL) *len_out = s->len;
  return (const unsigned char *)s + MPSC_HDR;
}

void hg_mpsc_ring_consume(hg_mpsc_ring_t *r) {
  struct mpsc_slot *s = mpsc_slot(r, r->head);
  /* relaxed: a debug check of a slot peek already acquired. */
  assert(atomic_load_explicit(&s->seq, memory_order_relaxed) == r->head + 1);
  /* release: our reads of the slot happen before a producer reuses it. */
  atomic_store_explicit(&s->seq, r->head + r->capacity, memory_order_release);
  r->head++;
}

int hg_mpsc_ring_pop(hg_mpsc_ring_t *r, void *out, size_t out_size, size_t *len_out) {
  size_t len;
  const void *p = hg_mpsc_ring_peek(r, &len);
  if (p == NULL) return -EAGAIN;
  if (len_out != NULL) *len_out = len;
  if (len > out_size) return HG_ERANGE;
  if (len > 0) memcpy(out, p, len);
  hg_mpsc_ring_consume(r);
  return 0;
}

size_t hg_mpsc_ring_pop_batch(hg_mpsc_ring_t *r, void *out, size_t max, uint32_t *lens) {
  size_t n = 0;
  unsigned char *dst = out;
  while (n < max) {
    size_t len;
    const void *p = hg_mpsc_ring_peek(r, &len);
    if (p == NULL) break;
    if (len > 0) memcpy(dst + n * r->slot_size, p, len);
    if (lens != NULL) lens[n] = (uint32_t)len;
    hg_mpsc_ring_consume(r);
    n++;
  }
  return n;
}

bool hg_mpsc_ring_empty(const hg_mpsc_ring_t *r) {
  const struct mpsc_slot *s = mpsc_slot(r, r->head);
  /* acquire: a caller that sees "not empty" goes on to read the message. */
  return atomic_load_explicit(&s->seq, memory_order_acquire) != r->head + 1;
}

/* ------------------------------------------------------------------------ */
/* SPSC                                                                     */
/* ------------------------------------------------------------------------ */

#define SPSC_AHEAD 8 /* slots the producer prefetches ahead */

/* Asks for the line in the exclusive state, as a store would: a read
 * prefetch (what __builtin_prefetch(p, 1) gives without -mprfchw) would
 * still leave the store to take it from the consumer's cache. PREFETCHW
 * is a hint: CPUs without it execute it as a no-op. */
static inline void prefetch_for_write(const void *p) {
#if defined(__x86_64__)
  __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
  __builtin_prefetch(p, 1);
#endif
}

/* Owned by whoever created it; data and lens owned by the ring. */
struct hg_spsc_ring {
  alignas(CACHE_LINE) _Atomic uint64_t tail; /* published by the producer */
  alignas(CACHE_LINE) uint64_t next;         /* producer's: tail plus the deferred messages */
  uint64_t cached_head;                      /* producer's last view of head */
  alignas(CACHE_LINE) _Atomic uint64_t head; /* written by the consumer */
  uint64_t cached_tail;                      /* consumer's last view of tail */
  alignas(CACHE_LINE) unsigned char *data;   /* read-only after create */
  size_t data_len;                           /* bytes mapped at data */
  uint32_t *lens;                            /* inside the data block; NULL: fixed size */
  size_t stride;
  uint64_t mask;
  uint32_t capacity;
  uint32_t slot_size;
};

static int spsc_create(uint32_t capacity, uint32_t slot_size, int fixed, hg_spsc_ring_t **out) {
  int rc = check_params(capacity, slot_size, out);
  if (rc != 0) return rc;
  size_t stride = round_up(slot_size, 8);
  if (capacity > (SIZE_MAX / 2) / stride) return -ENOMEM;
  size_t data_bytes = round_up((size_t)capacity * stride, CACHE_LINE);
  size_t lens_bytes = fixed ? 0 : (size_t)capacity * sizeof(uint32_t);
  size_t total = round_up(data_bytes + lens_bytes, CACHE_LINE);
  hg_spsc_ring_t *r = aligned_alloc(CACHE_LINE, sizeof *r);
  if (r == NULL) return -ENOMEM;
  memset(r, 0, sizeof *r);
  r->data_len = total;
  r->data = hg_map__populated(total);
  if (r->data == NULL) {
    free(r);
    return -ENOMEM;
  }
  r->lens = fixed ? NULL : (uint32_t *)(void *)(r->data + data_bytes);
  r->stride = stride;
  r->mask = capacity - 1u;
  r->capacity = capacity;
  r->slot_size = slot_size;
  /* relaxed (both): the ring is not shared until create returns. */
  atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
  atomic_store_explicit(&r->head, 0, memory_order_relaxed);
  r->next = 0;
  *out = r;
  return 0;
}

int hg_spsc_ring_create(uint32_t capacity, uint32_t slot_size, hg_spsc_ring_t **out) {
  return spsc_create(capacity, slot_size, 0, out);
}

int hg_spsc_ring_create_fixed(uint32_t capacity, uint32_t msg_size, hg_spsc_ring_t **out) {
  return spsc_create(capacity, msg_size, 1, out);
}

void hg_spsc_ring_destroy(hg_spsc_ring_t *r) {
  if (r == NULL) return;
  (void)munmap(r->data, r->data_len);
  free(r);
}

int hg_spsc_ring_try_push_deferred(hg_spsc_ring_t *r, const void *msg, size_t len) {
  if (len > r->slot_size || (msg == NULL && len > 0)) return HG_EINVAL;
  if (r->lens == NULL && len != r->slot_size) return HG_EINVAL;
  uint64_t t = r->next; /* only this thread writes next and tail */
  assert(t - r->cached_head <= r->capacity); /* tail never laps head */
  if (t - r->cached_head >= r->capacity) {
    /* acquire: the consumer's reads of the slots it freed happen before our
     * writes into them. */
    r->cached_head = atomic_load_explicit(&r->head, memory_order_acquire);
    if (t - r->cached_head >= r->capacity) return HG_EBUSY;
  }
  size_t i = (size_t)(t & r->mask);
  /* For writing, a few slots ahead: those the consumer freed a lap ago, so
   * the line comes over before the push that writes it waits for it. */
  uint64_t a = (t + SPSC_AHEAD) & r->mask;
  prefetch_for_write(r->data + (size_t)a * r->stride);
  if (r->lens != NULL && (a & 15u) == 0) prefetch_for_write(&r->lens[a]);
  if (len > 0) memcpy(r->data + i * r->stride, msg, len);
  if (r->lens != NULL) r->lens[i] = (uint32_t)len;
  r->next = t + 1;
  return 0;
}

void hg_spsc_ring_publish(hg_spsc_ring_t *r) {
  /* relaxed load: only this thread writes tail. release store: the
   * consumer's acquire of tail must see the bytes and lengths. */
  if (atomic_load_explicit(&r->tail, memory_order_relaxed) != r->next)
    atomic_store_explicit(&r->tail, r->next, memory_order_release);
}

int hg_spsc_ring_try_push(hg_spsc_ring_t *r, const void *msg, size_t len) {
  int rc = hg_spsc_ring_try_push_deferred(r, msg, len);
  hg_spsc_ring_publish(r); /* deferred ones too, even when full */
  return rc;
}

/* Messages available to the consumer, refreshing the cached tail only when
 * the cache shows fewer than `want`. */
static uint64_t spsc_available(hg_spsc_ring_t *r, uint64_t h, uint64_t want) {
  uint64_t avail = r->cached_tail - h;
  if (avail < want) {
    /* acquire: pairs with the producer's release of tail. */
    r->cached_tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    avail = r->cached_tail - h;
  }
  /* Debug builds: head never passes tail, tail never laps head. */
  assert(avail <= r->capacity);
  return avail;
}

const void *hg_spsc_ring_peek(hg_spsc_ring_t *r, size_t *len_out) {
  /* relaxed: only this thread writes head. */
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  if (spsc_available(r, h, 1) == 0) return NULL;
  size_t i = (size_t)(h & r->mask);
  if (len_out != NULL) *len_out = r->lens != NULL ? r->lens[i] : r->slot_size;
  return r->data + i * r->stride;
}

void hg_spsc_ring_consume(hg_spsc_ring_t *r) {
  /* relaxed: only this thread writes head. */
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  assert(h < r->cached_tail); /* only after a peek that found a message */
  /* release: our reads of the slot happen before the producer reuses it. */
  atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

int hg_spsc_ring_pop(hg_spsc_ring_t *r, void *out, size_t out_size, size_t *len_out) {
  size_t len;
  const void *p = hg_spsc_ring_peek(r, &len);
  if (p == NULL) return -EAGAIN;
  if (len_out != NULL) *len_out = len;
  if (len > out_size) return HG_ERANGE;
  if (len > 0) memcpy(out, p, len);
  hg_spsc_ring_consume(r);
  return 0;
}

size_t hg_spsc_ring_pop_batch(hg_spsc_ring_t *r, void *out, size_t max, uint32_t *lens) {
  /* relaxed: only this thread writes head. */
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t avail = spsc_available(r, h, max);
  size_t n = avail < max ? (size_t)avail : max;
  unsigned char *dst = out;
  for (size_t k = 0; k < n; k++) {
    size_t i = (size_t)((h + k) & r->mask);
    uint32_t len = r->lens != NULL ? r->lens[i] : r->slot_size;
    if (len > 0) memcpy(dst + k * r->slot_size, r->data + i * r->stride, len);
    if (lens != NULL) lens[k] = len;
  }
  /* release: our reads of all n slots happen before the producer reuses them. */
  if (n > 0) atomic_store_explicit(&r->head, h + n, memory_order_release);
  return n;
}

bool hg_spsc_ring_empty(const hg_spsc_ring_t *r) {
  /* relaxed: only the calling (consumer) thread writes head. */
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  /* acquire: a caller that sees "not empty" goes on to read the message. */
  return atomic_load_explicit(&r->tail, memory_order_acquire) == h;
}

/* ------------------------------------------------------------------------ */
/* Waiter                                                                   */
/* ------------------------------------------------------------------------ */

#define W_SLEEPING 1u
#define W_CLOSED 2u
#define W_EPOCH 4u

/* Owned by whoever created it. */
struct hg_waiter {
  alignas(CACHE_LINE) _Atomic uint32_t word; /* the futex word */
  _Atomic uint64_t wakeups;
  uint32_t spin;
};

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int hg_waiter_create(uint32_t spin, hg_waiter_t **out) {
  if (out == NULL) return HG_EINVAL;
  hg_waiter_t *w = aligned_alloc(CACHE_LINE, sizeof *w);
  if (w == NULL) return -ENOMEM;
  memset(w, 0, sizeof *w);
  w->spin = spin;
  /* relaxed (both): not shared until create returns. */
  atomic_store_explicit(&w->word, 0, memory_order_relaxed);
  atomic_store_explicit(&w->wakeups, 0, memory_order_relaxed);
  *out = w;
  return 0;
}

void hg_waiter_destroy(hg_waiter_t *w) {
  if (w == NULL) return;
  free(w);
}

void hg_waiter_notify(hg_waiter_t *w) {
  /* release: a consumer whose announce reads this value (or a later one in
   * the word's order) must also see the message pushed before the notify.
   * The RMW always reads the newest value, so an announce that came first is
   * never missed. */
  uint32_t v = atomic_fetch_or_explicit(&w->word, 0, memory_order_release);
  while (v & W_SLEEPING) {
    /* relaxed (both): the fetch_or above already released our message; this
     * only decides which producer pays for the wake. */
    if (atomic_compare_exchange_weak_explicit(&w->word, &v, (v + W_EPOCH) & ~W_SLEEPING,
                                              memory_order_relaxed, memory_order_relaxed)) {
      futex(&w->word, FUTEX_WAKE_PRIVATE, 1, NULL);
      /* relaxed: a statistics counter, ordered with nothing. */
      atomic_fetch_add_explicit(&w->wakeups, 1, memory_order_relaxed);
      return;
    }
  }
}

void hg_waiter_close(hg_waiter_t *w) {
  /* relaxed: the CAS loop below reads the newest value regardless. */
  uint32_t v = atomic_load_explicit(&w->word, memory_order_relaxed);
  /* release: whatever the closing thread wrote before closing is visible to
   * the consumer that sees the closed flag. relaxed on failure: we retry. */
  while (!atomic_compare_exchange_weak_explicit(&w->word, &v,
                                                ((v + W_EPOCH) | W_CLOSED) & ~W_SLEEPING,
                                                memory_order_release, memory_order_relaxed)) {
  }
  futex(&w->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}

bool hg_waiter_closed(const hg_waiter_t *w) {
  /* acquire: pairs with the release in close. */
  return (atomic_load_explicit(&w->word, memory_order_acquire) & W_CLOSED) != 0;
}

uint32_t hg_waiter_prepare(hg_waiter_t *w) {
  /* acquire: the re-check that follows must see every message whose notify
   * precedes this announce in the word's order (see notify). */
  return atomic_fetch_or_explicit(&w->word, W_SLEEPING, memory_order_acquire) | W_SLEEPING;
}

void hg_waiter_cancel(hg_waiter_t *w) {
  /* acquire: same as prepare, for a notify that came in meanwhile. */
  atomic_fetch_and_explicit(&w->word, ~W_SLEEPING, memory_order_acquire);
}

int hg_waiter_sleep(hg_waiter_t *w, uint32_t token, int64_t timeout_ns) {
  if (token & W_CLOSED) {
    hg_waiter_cancel(w);
    return -ECANCELED;
  }
  struct timespec ts, *tsp = NULL;
  if (timeout_ns >= 0) {
    ts.tv_sec = (time_t)(timeout_ns / 1000000000);
    ts.tv_nsec = (long)(timeout_ns % 1000000000);
    tsp = &ts;
  }
  /* Returns at once (EAGAIN) if the word moved since prepare: a notify or a
   * close came in between, which is exactly the wake-up we must not lose. */
  long rc = futex(&w->word, FUTEX_WAIT_PRIVATE, token, tsp);
  int err = rc == 0 ? 0 : errno;
  /* acquire: after waking, the caller's re-check must see the message of the
   * notify that woke us (its release heads a release sequence we read). */
  uint32_t v = atomic_fetch_and_explicit(&w->word, ~W_SLEEPING, memory_order_acquire);
  if (v & W_CLOSED) return -ECANCELED;
  if (err == ETIMEDOUT) return -ETIMEDOUT;
  return 0;
}

int hg_waiter_wait(hg_waiter_t *w, bool (*ready)(void *ctx), void *ctx, int64_t timeout_ns) {
  if (ready(ctx)) return 0;
  for (uint32_t i = 0; i < w->spin; i++) {
    cpu_relax();
    if (ready(ctx)) return 0;
  }
  int64_t deadline = timeout_ns >= 0 ? now_ns() + timeout_ns : -1;
  for (;;) {
    uint32_t token = hg_waiter_prepare(w);
    if (ready(ctx)) {
      hg_waiter_cancel(w);
      return 0;
    }
    if (token & W_CLOSED) {
      hg_waiter_cancel(w);
      return -ECANCELED;
    }
    int64_t left = -1;
    if (deadline >= 0) {
      left = deadline - now_ns();
      if (left <= 0) {
        hg_waiter_cancel(w);
        return -ETIMEDOUT;
      }
    }
    (void)hg_waiter_sleep(w, token, left); /* the loop re-checks everything */
    if (ready(ctx)) return 0;
  }
}

bool hg_waiter_sleeping(const hg_waiter_t *w) {
  /* relaxed: a snapshot that orders nothing. */
  return (atomic_load_explicit(&w->word, memory_order_relaxed) & W_SLEEPING) != 0;
}

uint64_t hg_waiter_wakeups(const hg_waiter_t *w) {
  /* relaxed: a statistics counter. */
  return atomic_load_explicit(&w->wakeups, memory_order_relaxed);
}

static bool mpsc_ready(void *ctx) { return !hg_mpsc_ring_empty(ctx); }
static bool spsc_ready(void *ctx) { return !hg_spsc_ring_empty(ctx); }

int hg_mpsc_ring_wait(hg_mpsc_ring_t *r, hg_waiter_t *w, int64_t timeout_ns) {
  return hg_waiter_wait(w, mpsc_ready, r, timeout_ns);
}

int hg_spsc_ring_wait(hg_spsc_ring_t *r, hg_waiter_t *w, int64_t timeout_ns) {
  return hg_waiter_wait(w, spsc_ready, r, timeout_ns);
}
