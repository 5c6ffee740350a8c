/*
 * hourglass/seqlock.h - the published top-of-book of one instrument, written
 * by one thread and read by any thread without a lock. In hourglassd the
 * writer is the market-data view's pipeline consumer thread (daemon/mdview.c),
 * which rebuilds top of book from the released events; the engine thread
 * never writes one.
 *
 * A sequence lock: the writer makes the sequence odd, writes the payload,
 * and makes it even again; a reader reads the sequence, the payload, and the
 * sequence again, and keeps the copy only if both reads saw the same even
 * value. Readers never write shared memory, never block the writer, and never
 * return a torn value; a reader racing a write retries.
 *
 * Memory model. A classic seqlock reads the payload with plain loads, which
 * is a data race in C17 (undefined, and reported by ThreadSanitizer). Here
 * every payload word is an _Atomic int64_t. The writer stores each word with
 * release order, so the odd sequence it stored first is visible to any
 * reader that sees any new word; a reader loads each word with acquire order,
 * so its closing read of the sequence cannot move above the payload loads.
 * No standalone fences are used (ThreadSanitizer does not model them). On
 * x86-64 both orders compile to plain moves, so this costs nothing over the
 * fence-based form; on AArch64 they become ldar/stlr.
 *
 * The whole lock is one 64-byte cache line: the sequence and seven words.
 *
 * Storage belongs to the caller (embed it in the structure that keeps the
 * value). Threads: exactly one writer thread, any number of readers.
 */
#ifndef HOURGLASS_SEQLOCK_H
#define HOURGLASS_SEQLOCK_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Top of book as published. Prices in ticks, quantities in contracts; 0
 * quantity means that side is empty (its price is then meaningless). */
typedef struct hg_tob {
  int64_t bid_px;
  int64_t bid_qty;
  int64_t ask_px;
  int64_t ask_qty;
  int64_t last_px;  /* price of the last trade, 0 before any */
  int64_t last_qty; /* quantity of the last trade, 0 before any */
  uint64_t version; /* set by the writer: the market-data view uses the seq
                       of the last event it applied to this instrument */
} hg_tob_t;

#define HG_TOB_WORDS 7

typedef struct hg_seqlock {
  alignas(64) _Atomic uint64_t seq; /* even: stable; odd: write in progress */
  _Atomic int64_t w[HG_TOB_WORDS];
} hg_seqlock_t;

/* Sets the published value to all zeros, sequence 0. Call before sharing
 * the lock with any reader. Cannot fail. */
static inline void hg_seqlock_init(hg_seqlock_t *s) {
  /* relaxed (all): the lock is not shared yet; publishing it to readers is
   * the caller's job and carries its own ordering. */
  atomic_store_explicit(&s->seq, 0, memory_order_relaxed);
  for (int i = 0; i < HG_TOB_WORDS; i++) atomic_store_explicit(&s->w[i], 0, memory_order_relaxed);
}

/* Publishes *v. The one writer thread only. Wait-free; cannot fail. */
static inline void hg_seqlock_write(hg_seqlock_t *s, const hg_tob_t *v) {
  const int64_t words[HG_TOB_WORDS] = {v->bid_px,  v->bid_qty,  v->ask_px,          v->ask_qty,
                                       v->last_px, v->last_qty, (int64_t)v->version};
  /* relaxed: this thread is the only writer of seq. */
  uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
  /* relaxed: the release stores below keep this store ahead of them. */
  atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
  for (int i = 0; i < HG_TOB_WORDS; i++) {
    /* release: a reader that acquires this new word also sees seq odd (or
     * later), so its closing check fails and it retries. */
    atomic_store_explicit(&s->w[i], words[i], memory_order_release);
  }
  /* release: a reader that acquires the new even seq sees the whole payload. */
  atomic_store_explicit(&s->seq, q + 2, memory_order_release);
}

/* One attempt: copies the value into *out and returns true if no write
 * overlapped the copy; returns false (and *out is garbage) otherwise. Any
 * thread; never blocks. */
static inline bool hg_seqlock_try_read(const hg_seqlock_t *s, hg_tob_t *out) {
  int64_t words[HG_TOB_WORDS];
  /* acquire: pairs with the writer's final release, so the payload we then
   * load is at least as new as this sequence. */
  uint64_t s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
  if (s1 & 1u) return false;
  for (int i = 0; i < HG_TOB_WORDS; i++) {
    /* acquire: keeps the closing seq load below every payload load, and
     * synchronises with the writer's release of a newer word. */
    words[i] = atomic_load_explicit(&s->w[i], memory_order_acquire);
  }
  /* relaxed: ordered after the payload loads by their acquire. */
  uint64_t s2 = atomic_load_explicit(&s->seq, memory_order_relaxed);
  if (s1 != s2) return false;
  out->bid_px = words[0];
  out->bid_qty = words[1];
  out->ask_px = words[2];
  out->ask_qty = words[3];
  out->last_px = words[4];
  out->last_qty = words[5];
  out->version = (uint64_t)words[6];
  return true;
}

/* Copies a consistent value into *out, retrying while the writer is busy.
 * Any thread. Lock-free: it retries only while writes keep overlapping, and
 * a write is a handful of stores. Cannot fail. */
static inline void hg_seqlock_read(const hg_seqlock_t *s, hg_tob_t *out) {
  while (!hg_seqlock_try_read(s, out)) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

#endif /* HOURGLASS_SEQLOCK_H */
