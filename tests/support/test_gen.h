/*
 * test_gen.h - two small things the property and snapshot tests all need,
 * header-only so that any test can include it without linking a support
 * library: a seeded xorshift64 generator (the same stream on every machine,
 * so a failing seed replays exactly) and a growing byte buffer that
 * receives a serialization through the libraries' write callbacks
 * (hg_clearing_write_fn, hg_exchange_serialize's writer).
 */
#ifndef HG_TEST_GEN_H
#define HG_TEST_GEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The generator's state; set it to a non-zero seed before the first draw. */
static uint64_t rng;

static inline uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* A draw in [lo, hi], both inclusive (hi - lo small next to 2^64). */
static inline int64_t rnd(int64_t lo, int64_t hi) {
  return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1));
}

/* Bytes written through put(); free(p) when done. */
typedef struct buf {
  unsigned char *p;
  size_t n, cap;
} buf_t;

/* A write callback appending to the buf_t at ctx: 0, or -1 when memory
 * runs out (the serialization then stops with that value). */
static inline int put(void *ctx, const void *d, size_t len) {
  buf_t *b = ctx;
  if (b->n + len > b->cap) {
    size_t cap = (b->n + len) * 2;
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL) return -1;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, d, len);
  b->n += len;
  return 0;
}

#endif /* HG_TEST_GEN_H */
