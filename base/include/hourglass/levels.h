/*
 * hourglass/levels.h - one side of a depth-of-book mirror: price levels
 * (price, aggregate quantity) kept sorted best first and updated one level
 * at a time from the engine's level events, which carry the new aggregate
 * quantity at a price (0 when the level is gone). The gateway's market data
 * (gateway/server/mirror.c) and the daemon's market view (daemon/mdview.c)
 * keep their books in it, and so does hgctl's ladder (gateway/tools).
 *
 * Storage. The caller owns the array (cap levels) and keeps it alive while
 * the side is used; nothing here allocates. A bid side keeps prices
 * descending, an ask side ascending, so lv[0] is the best on both.
 *
 * Overflow: the best cap levels are kept. A new price that arrives while
 * all cap slots hold levels evicts the worst level kept if it is better
 * than that level, and is dropped if it is not. Either way `truncated` is
 * set and stays set until hg_levels_clear(): the consumer reports it. Every
 * level kept carries its exact quantity (events give aggregates, not
 * deltas); what a truncated side may lack are levels that were evicted or
 * dropped and have had no event since.
 *
 * Threads: none of its own; a side belongs to whoever owns its storage.
 */
#ifndef HOURGLASS_LEVELS_H
#define HOURGLASS_LEVELS_H

#include <stdint.h>

/* Sides (equal to hg_side_t's HG_SIDE_BUY and HG_SIDE_SELL). */
enum { HG_LEVELS_BID = 0, HG_LEVELS_ASK = 1 };

typedef struct hg_level {
  int64_t price; /* ticks */
  int64_t qty;   /* aggregate quantity, > 0 */
} hg_level_t;

typedef struct hg_levels {
  hg_level_t *lv;    /* the caller's storage, cap entries; [0, n) best first */
  uint32_t n;        /* levels held */
  uint32_t cap;      /* >= 1 */
  uint8_t side;      /* HG_LEVELS_BID or HG_LEVELS_ASK */
  uint8_t truncated; /* the overflow rule evicted or dropped a level since init or clear */
} hg_levels_t;

/* An empty side over storage (cap >= 1 levels). */
void hg_levels_init(hg_levels_t *l, int side, hg_level_t *storage, uint32_t cap);

/* Empties the side and clears `truncated`. */
void hg_levels_clear(hg_levels_t *l);

/* Sets the aggregate at price: qty > 0 inserts or updates the level, qty
 * <= 0 removes it (a price not held is then ignored). Returns 1 when the
 * overflow rule evicted a level or dropped this one (truncated is then
 * set), else 0. O(log n) to find the price, O(n) memmove to insert or
 * remove. */
int hg_levels_set(hg_levels_t *l, int64_t price, int64_t qty);

#endif /* HOURGLASS_LEVELS_H */
