/*
 * book_int.h - the order book's layout (see the design comment in book.c),
 * shared by book.c (everything the book does) and book_check.c (the
 * consistency check). Not installed; tests use book_internal.h.
 *
 * The lookups here are static inline so that the order path, in book.c,
 * keeps them inlined.
 */
#ifndef HOURGLASS_BOOK_INT_H
#define HOURGLASS_BOOK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hourglass/book.h"

#define NIL UINT32_MAX
#define BM_MAX_DEPTH 5
#define HASH_MUL 0x9E3779B97F4A7C15ull
#define HASH_MUL2 0xC2B2AE3D27D4EB4Full

#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* What matching, cancel and replace read: one 64-byte line per order. */
typedef struct order {
  hg_oid_t id; /* 0 = free slot */
  uint64_t clid;
  hg_qty_t leaves;
  hg_account_t account;
  uint32_t smp;
  uint32_t lvl;          /* price - min_price */
  uint32_t lprev, lnext; /* level FIFO */
  uint32_t aprev, anext; /* account list */
  uint32_t acct;         /* account record index */
  uint8_t side, tif, stp, post_only;
  uint8_t stacked; /* the slot is on the free stack (live orders too: see pool_take) */
  uint8_t scoped;  /* 1: session-scoped (hg_book_cancel_scoped); in a spare byte of
                      the hot line, which resting and replacing write and read anyway */
  uint16_t displaced; /* of the slot, not of its occupant: see order_find */
} order_t;

/* What only queries, snapshots and the daily expiry read, in a parallel array. */
typedef struct order_cold {
  uint64_t seq; /* entry number: time priority across the whole book */
  hg_qty_t qty;
  uint64_t ts;
  uint64_t pad_;
} order_cold_t;

/* A live order and its time priority, for sorting. */
typedef struct seq_slot {
  uint64_t seq;
  uint32_t slot;
  uint32_t pad_;
} seq_slot_t;

/* Working memory of the time-ordered walks (expire_day, foreach), owned by
 * the book but not part of its state, so the const foreach may use it. */
typedef struct walk {
  seq_slot_t *a, *b; /* max_orders entries each */
  bool busy;         /* a walk is using a[] */
} walk_t;

/* head and tail are meaningful only while count > 0, so the level arrays
 * need no initialisation beyond zero. */
typedef struct level {
  hg_qty_t qty;
  uint32_t head, tail;
  uint32_t count;
  uint32_t pad_;
} level_t;

typedef struct acct {
  hg_account_t account;
  uint32_t head, tail; /* time-ordered list of the account's orders */
  uint32_t count;      /* live orders; 0 = record free, head links the free list */
  uint32_t indexed;    /* 1 = its orders are in the client-order-id table */
  uint64_t clid_hi;    /* >= every live order's client_order_id (see clid_live) */
} acct_t;

/* Entry of both id tables: the slot of the order and a 32-bit tag of its key.
 * The tag alone decides the entry's home, so moving entries on erase never
 * needs the order itself; a tag match is confirmed against the pool. */
typedef struct id_ent {
  uint32_t tag;
  uint32_t slot1; /* slot + 1; 0 = empty, so a fresh zero page is an empty table */
} id_ent_t;

typedef struct acct_ent {
  hg_account_t account;
  uint32_t rec; /* NIL = empty */
} acct_ent_t;

typedef struct bitmap {
  uint64_t *w[BM_MAX_DEPTH]; /* w[0] one bit per level, w[k+1] one bit per word of w[k] */
  uint32_t nwords[BM_MAX_DEPTH];
  int depth;
} bitmap_t;

/* A big array of the book: mapped (len > 0) or from aligned_alloc (len 0). */
typedef struct region {
  void *base;
  size_t len;
} region_t;
#define MAX_REGIONS 8

struct hg_book {
  hg_book_params_t params;
  hg_book_sink_fn sink;
  void *sink_ctx; /* owned by the caller */
  hg_book_event_t *evbuf; /* where events are built; NULL: on the stack */
  uint8_t stp_default;
  uint32_t nlevels;
  int64_t best[2]; /* level index of the best price, -1 = side empty */
  level_t *levels[2];
  bitmap_t bm[2];

  order_t *pool;
  order_cold_t *cold;
  uint32_t nslots;      /* pool: a power of two >= 2 * max_orders (max_orders if > 2^30) */
  uint32_t slot_mask;   /* preferred slot = order id & slot_mask (grows: pref_grow) */
  uint32_t pref_max;    /* what slot_mask + 1 may grow to */
  uint32_t *free_stack; /* nslots entries: every free slot below fresh, and some live ones */
  uint32_t free_top;
  uint32_t fresh; /* see pool_take */
  uint32_t count;
  uint64_t next_seq;
  hg_oid_t oid_hi; /* >= every live order id (see oid_live) */
  walk_t *walk;

  id_ent_t *oid_tab;
  id_ent_t *clid_tab;
  uint64_t id_mask;     /* entries in use in both tables - 1 (grows: tables_grow) */
  uint64_t id_max_mask; /* entries allocated - 1 */
  uint64_t oid_used, clid_used; /* entries held */

  acct_t *accts;
  uint32_t acct_free;
  uint32_t acct_count;
  acct_ent_t *acct_tab;
  uint64_t acct_mask;
  int acct_shift;

  region_t regions[MAX_REGIONS]; /* the arrays from arr_alloc */
  int nregions;
};

/* The order being matched: a new order or a replaced one re-entering. */
struct taker {
  hg_oid_t id;
  uint64_t clid;
  hg_account_t account;
  uint32_t smp;
  hg_price_t price; /* limit (band edge for a market order) */
  hg_qty_t qty;
  hg_qty_t leaves;
  uint64_t ts;
  uint8_t side, tif, stp, post_only;
  uint8_t mode;   /* stp resolved against the book default */
  uint8_t scoped; /* 0 or 1, stored in the order if it rests */
};

/* ------------------------------------------------------------------------ */
/* Lookups                                                                    */

static inline bool bm_test(const bitmap_t *b, uint64_t i) {
  return (b->w[0][i >> 6] >> (i & 63)) & 1u;
}

/* Lowest set bit >= i of b, or -1 (book.c's bitmap search, for the check). */
int64_t hg_book__bm_next(const bitmap_t *b, uint64_t i);

/*
 * Both id tables map a key to a 32-bit tag, a hash whose low bits are the
 * home entry (tag & id_mask, so moving entries is cheap). Keys are hashed
 * in blocks of ID_BLOCK consecutive values: the block number goes through
 * the multiplicative hash, the key's low bits pick the entry inside the
 * block. Keys are usually handed out in sequence, so consecutive keys share
 * a cache line (eight 8-byte entries) instead of costing one miss each,
 * while unrelated blocks still spread evenly. 8-byte entries keep the
 * tables small enough to stay in cache for pools of a few hundred thousand
 * orders.
 */
#define ID_BLOCK_BITS 3
#define ID_BLOCK_MASK ((1u << ID_BLOCK_BITS) - 1)

static inline uint32_t oid_tag(hg_oid_t id) {
  return ((uint32_t)(((id >> ID_BLOCK_BITS) * HASH_MUL) >> 32) & ~ID_BLOCK_MASK) |
         ((uint32_t)id & ID_BLOCK_MASK);
}

static inline uint32_t clid_tag(hg_account_t account, uint64_t clid) {
  uint64_t k = ((clid >> ID_BLOCK_BITS) * HASH_MUL) ^ ((uint64_t)account * HASH_MUL2);
  return ((uint32_t)((k * HASH_MUL) >> 32) & ~ID_BLOCK_MASK) | ((uint32_t)clid & ID_BLOCK_MASK);
}

static inline uint64_t tag_home(const hg_book_t *b, uint32_t tag) {
  return tag & b->id_mask;
}

static inline uint64_t acct_home(const hg_book_t *b, hg_account_t account) {
  return ((uint64_t)account * HASH_MUL) >> b->acct_shift;
}

static inline uint32_t oid_find(const hg_book_t *b, hg_oid_t id) {
  uint32_t tag = oid_tag(id);
  for (uint64_t i = tag_home(b, tag);; i = (i + 1) & b->id_mask) {
    const id_ent_t *e = &b->oid_tab[i];
    if (e->slot1 == 0) return NIL;
    if (e->tag == tag && b->pool[e->slot1 - 1].id == id) return e->slot1 - 1;
  }
}

static inline uint32_t clid_find(const hg_book_t *b, hg_account_t account, uint64_t clid) {
  uint32_t tag = clid_tag(account, clid);
  for (uint64_t i = tag_home(b, tag);; i = (i + 1) & b->id_mask) {
    const id_ent_t *e = &b->clid_tab[i];
    if (e->slot1 == 0) return NIL;
    const order_t *o = &b->pool[e->slot1 - 1];
    if (e->tag == tag && o->clid == clid && o->account == account) return e->slot1 - 1;
  }
}

static inline uint32_t acct_find(const hg_book_t *b, hg_account_t account) {
  for (uint64_t i = acct_home(b, account);; i = (i + 1) & b->acct_mask) {
    const acct_ent_t *e = &b->acct_tab[i];
    if (e->rec == NIL) return NIL;
    if (e->account == account) return e->rec;
  }
}

/*
 * The slot an order id would like: its low bits. Ids are usually handed out
 * in sequence, so this is where an order most often lives, and then a
 * cancel finds it with one load instead of a table probe followed by a
 * load. Only orders placed elsewhere (their preferred slot was taken) are
 * in the order-id table.
 */
static inline uint32_t pref_slot(const hg_book_t *b, hg_oid_t id) {
  return (uint32_t)id & b->slot_mask;
}

/*
 * Each slot counts the live orders that prefer it but rest elsewhere (their
 * preferred slot was taken when they came). The count belongs to the slot
 * and outlives its occupants (order_rest and order_remove never clear it),
 * and it sits in the line a lookup loads anyway; so when the preferred slot
 * does not hold the id and its count is 0 - a cancel or replace of an order
 * that has already gone, or a new id's duplicate check - the answer is known
 * without probing the order-id table, a random line that usually misses.
 * A count that reaches DISP_STUCK stays there (the table is then always
 * probed for that slot): only ids colliding 65535 times modulo the pool size
 * get there, and it only costs them the probe.
 */
#define DISP_STUCK UINT16_MAX

static inline void disp_inc(hg_book_t *b, uint32_t pref) {
  uint16_t *d = &b->pool[pref].displaced;
  if (*d != DISP_STUCK) ++*d;
}

static inline void disp_dec(hg_book_t *b, uint32_t pref) {
  uint16_t *d = &b->pool[pref].displaced;
  if (*d != DISP_STUCK) --*d;
}

/* Every live order rests below this slot: at its preferred slot (below
 * the preferred range) or at one taken from the stack or fresh (below
 * fresh). What a walk over the live orders reads. */
static inline uint32_t live_end(const hg_book_t *b) {
  return b->fresh > b->slot_mask ? b->fresh : b->slot_mask + 1;
}

/* The slot of live order id, or NIL. */
static inline uint32_t order_find(const hg_book_t *b, hg_oid_t id) {
  uint32_t s = pref_slot(b, id);
  const order_t *o = &b->pool[s];
  if (o->id == id && id != 0) return s;
  if (o->displaced == 0) return NIL;
  return oid_find(b, id);
}

#endif /* HOURGLASS_BOOK_INT_H */
