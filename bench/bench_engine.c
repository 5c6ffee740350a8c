/*
 * bench_engine - throughput and per-message latency of the order book
 * (engine/book.c) on seeded, realistic one-day workloads, and its speed
 * against the reference book (tests/support/refbook.c).
 *
 * Headline: consumer mode, the book as a venue runs it. Each scenario is
 * generated again with the harness mix (mix_harness) and its order ids
 * renamed by a seeded random permutation; the book's thread is pinned to
 * CPU 0 and its sink copies every event as a 64-byte report into an SPSC
 * ring (hourglass/ring.h) that a thread pinned to CPU 1 drains, counting and
 * checksumming; a message's reports are published together once it is
 * applied (hg_spsc_ring_publish), as a venue's engine hands on a command's
 * events. Timed: first command to the last report drained, median of
 * the runs, alternating a book sized for the peak live count with one sized
 * for 1M orders (creation and hg_book_prefault outside the span, as a venue
 * sets a book up at listing), and
 * the book thread's on-CPU time without its waits on a full ring at both
 * capacities. deep_static also counts cache misses of the book's thread per message
 * (perf_event_open, where the host provides the counter) and splits its
 * on-CPU time: ids in sequence, ids permuted, events to the ring. Both
 * modes give the book the prefetch hints the engine gives it.
 *
 * Design. A workload is a flat array of commands generated before anything is
 * timed. The generator drives a private, untimed book of its own so that its
 * cancels and replaces name orders that are really live, its takers cross the
 * real best prices, and its quotes follow a scripted fair-value path; the book
 * is deterministic, so replaying the same array into a fresh book reproduces
 * the same events. The in-order runs (mix_day, ids in sequence, events
 * counted on the book's thread) replay each scenario:
 *  - several times with only a clock read around the whole loop: throughput
 *    (the median run is reported);
 *  - once with every message timed by the TSC (lfence; rdtsc on both sides;
 *    this CPU has no rdtscp), calibrated against CLOCK_MONOTONIC, with the
 *    median cost of an empty timed region subtracted: latency percentiles;
 *  - a prefix through the reference book and the same prefix through the real
 *    book, both with a sink that hashes every event field: the speed ratio
 *    and an event-for-event agreement check.
 * Sinks count and touch every event so no work can be optimised away.
 * Floating point and clocks are fine here: this is a benchmark, not state.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#include "hourglass/book.h"
#include "hourglass/exchange.h"
#include "hourglass/ring.h"
/* Weak: an engine tree older than hg_book_prefault (A/B runs) leaves it NULL. */
extern int hg_book_prefault(hg_book_t *book) __attribute__((weak));
#ifndef HG_SPSC_RING_DEFERRED /* an engine tree older than batched publication (A/B runs) */
#define hg_spsc_ring_try_push_deferred hg_spsc_ring_try_push
#define hg_spsc_ring_publish(r) ((void)(r))
#endif
#ifndef HG_SPSC_RING_FIXED /* older than fixed-size rings (A/B runs) */
#define hg_spsc_ring_create_fixed hg_spsc_ring_create
#endif
#include "refbook.h"

/* ------------------------------------------------------------------------ */
/* Instrument                                                               */

#define MIN_PRICE 1
#define MAX_PRICE 100000
#define START_PRICE 3000.0 /* 3.000 USD per GPU-hour */
#define MAX_ORDER_QTY 1000
#define MAX_ACCOUNTS 64
#define N_MAKERS 8      /* accounts 1..8 quote around the mid */
#define N_TAKERS 40     /* accounts 101..140 cross the spread */
#define TAKER_BASE 101u
#define REF_MOVE 0.005  /* re-reference when the fair price moved 0.5% */

/* ------------------------------------------------------------------------ */
/* Commands                                                                 */

enum { M_NEW, M_CANCEL, M_REPLACE, M_MASS, M_REF, M_EXPIRE, M_KINDS };
static const char *const kind_name[M_KINDS] = {"new", "cancel", "replace", "mass cancel",
                                               "reference", "expire day"};

/* One command of a workload; 32 bytes so 2M of them are 64 MB. */
typedef struct msg {
  uint64_t oid;     /* new, cancel, replace */
  int32_t price;    /* limit, new price, or reference price */
  int32_t qty;      /* order qty or new qty */
  uint32_t account; /* new, cancel, replace, mass cancel */
  uint8_t kind;
  uint8_t side;     /* hg_side_t; for a mass cancel HG_SIDES_* */
  uint8_t type;
  uint8_t tif;
  uint8_t post_only;
  uint8_t pad_[3];
} msg_t;

/* What a workload's orders do. Cuts are per mille of new orders: below
 * ioc_end IOC, then FOK up to fok_end, market up to market_end, takers'
 * resting limits up to taker_end, makers' quotes above. */
typedef struct mix {
  const char *name;
  double cancel_gain;  /* cancel share of commands at the target live count */
  double replace_p;    /* replace share of commands */
  uint16_t ioc_end, fok_end, market_end, taker_end;
  int random_ids;      /* order ids a seeded random permutation, not in sequence */
} mix_t;

/* The trading-day mix the in-order runs have always used. */
static const mix_t mix_day = {"day", 0.45, 0.07, 167, 177, 197, 297, 0};
/* The outside harness's mix (15% IOC, 20% modified, 95% cancelled), as near
 * as this generator gets: IOC 15% of new orders, no FOK, market or takers'
 * resting limits; replaces ~20% of new orders; cancels pushed harder, so
 * ~70% of the orders that could rest are cancelled by their owner (most of
 * the rest fill, or are the live book the scenario keeps at the close: 95%
 * would thin the book); ids in random order. */
static const mix_t mix_harness = {"harness", 0.75, 0.12, 163, 163, 163, 163, 1};

typedef struct workload {
  msg_t *m;
  size_t n;
  const mix_t *mix;
  uint32_t peak_live; /* most live resting orders at any time */
  uint32_t pool;      /* max_orders of the books that replay it */
  uint32_t band_bps;
  hg_price_t ref0;
  size_t count[M_KINDS];
  size_t ioc, fok, market, post_only, day;
} workload_t;

/* Timestamps are synthetic and deterministic: 100 ns apart from 09:00. */
static inline uint64_t msg_ts(size_t i) { return 32400000000000ull + (uint64_t)i * 100u; }

#define DEFINE_APPLY(fn, book_type, pfx)                                             \
  static inline void fn(book_type *b, const msg_t *m, uint64_t ts) {                 \
    switch (m->kind) {                                                               \
    case M_NEW: {                                                                    \
      hg_order_new_t o = {.order_id = m->oid, .client_order_id = m->oid,             \
                          .account = m->account, .price = m->price, .qty = m->qty,   \
                          .side = m->side, .type = m->type, .tif = m->tif,           \
                          .post_only = m->post_only, .ts = ts};                      \
      pfx##_book_submit(b, &o);                                                      \
      break;                                                                         \
    }                                                                                \
    case M_CANCEL: pfx##_book_cancel(b, m->oid, m->account, ts); break;              \
    case M_REPLACE: pfx##_book_replace(b, m->oid, m->account, m->price, m->qty, ts); \
      break;                                                                         \
    case M_MASS: (void)pfx##_book_mass_cancel(b, m->account, m->side, ts); break;    \
    case M_REF: break; /* the band is the clearing's: nothing for the book */       \
    case M_EXPIRE: (void)pfx##_book_expire_day(b, ts); break;                        \
    default: break;                                                                  \
    }                                                                                \
  }
DEFINE_APPLY(apply_hg, hg_book_t, hg)
DEFINE_APPLY(apply_ref, ref_book_t, ref)

/* What the engine does with the batch it holds (see hg_book_prefetch_order
 * in book.h): before message i, start loading the index line of the order
 * message i + HINT_INDEX names (where an id out of sequence is found), the
 * line of the order that message i + HINT_ORDER names, the neighbours of the one message
 * i + HINT_LINKS names (its line has had a command's time to land), and
 * what message i + 1 will touch if it is a new order. Hints only: same
 * events. Distances 4/2 (and 6/3, 8/4) were tried again on 2026-12-02 with
 * both books in one process, alternating 50k-message blocks: deep_static
 * 0.86-1.07x, normal_day 0.89-0.94x (block medians) against 2/1, so 2/1
 * stays. */
#define HINT_INDEX 3
#define HINT_ORDER 2
#define HINT_LINKS 1
static inline void hint_hg(const hg_book_t *b, const msg_t *m, size_t i, size_t n) {
#ifdef HG_BOOK_PREFETCH_INDEX /* an engine tree older than the index stage (A/B runs) */
  /* Ids out of sequence are found through the order-id table: its line
   * first, a command before the order's own (see book.h). */
  if (i + HINT_INDEX < n && m[i + HINT_INDEX].kind <= M_REPLACE)
    hg_book_prefetch_index(b, m[i + HINT_INDEX].oid);
#endif
  if (i + HINT_ORDER < n && m[i + HINT_ORDER].kind <= M_REPLACE)
    hg_book_prefetch_order(b, m[i + HINT_ORDER].oid);
  if (i + HINT_LINKS < n &&
      (m[i + HINT_LINKS].kind == M_CANCEL || m[i + HINT_LINKS].kind == M_REPLACE))
    hg_book_prefetch_links(b, m[i + HINT_LINKS].oid);
  if (i + 1 < n) {
    const msg_t *x = &m[i + 1];
    if (x->kind == M_NEW) {
      hg_order_new_t o = {.order_id = x->oid, .client_order_id = x->oid,
                          .account = x->account, .price = x->price, .qty = x->qty,
                          .side = x->side, .type = x->type, .tif = x->tif};
      hg_book_prefetch_new(b, &o);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Randomness (seeded, for the generator only)                              */

typedef struct rng { uint64_t s; } rng_t;

static uint64_t rng_next(rng_t *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double rng_unit(rng_t *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
static uint32_t rng_below(rng_t *r, uint32_t n) { return (uint32_t)(((rng_next(r) >> 32) * n) >> 32); }
static double rng_expo(rng_t *r, double mean) { return -mean * log(1.0 - rng_unit(r)); }
static double rng_normal(rng_t *r) {
  double u = rng_unit(r), v = rng_unit(r);
  return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* ------------------------------------------------------------------------ */
/* Scenarios                                                                */

enum { PATH_STATIC, PATH_REVERT, PATH_DRIFT, PATH_CRASH };

typedef struct scenario {
  const char *name;
  const char *what;
  int path;
  uint32_t band_bps;
  double noise;       /* stationary std-dev of the mean-reverting noise, ticks */
  double quote_mean;  /* mean quote distance from fair, ticks */
  double wide_frac;   /* share of quotes placed uniformly up to wide_max ticks out */
  uint32_t wide_max;
  uint32_t target_live; /* resting orders the makers aim to keep (2M-message run) */
} scenario_t;

static const scenario_t scenarios[] = {
    {"deep_static", "deep book around a fixed 3.000, ~1000 levels, ~150 orders a level",
     PATH_STATIC, 0, 0.0, 20.0, 0.4, 500, 150000},
    {"normal_day", "mean-reverting walk around 3.000 (sd ~1.5%), band 20%", PATH_REVERT, 2000,
     45.0, 8.0, 0.05, 200, 20000},
    {"drift40", "price drifts up 40% over the day, band 20% re-referenced", PATH_DRIFT, 2000,
     30.0, 8.0, 0.05, 200, 20000},
    {"crash_recover", "crash 35% in a tenth of the day, then recover, band 20%", PATH_CRASH,
     2000, 30.0, 8.0, 0.05, 200, 20000},
};
#define N_SCENARIOS (sizeof scenarios / sizeof scenarios[0])

/* The scripted centre of the fair price at time t in [0, 1]. */
static double path_mean(int path, double t) {
  switch (path) {
  case PATH_DRIFT: return START_PRICE * (1.0 + 0.4 * t);
  case PATH_CRASH:
    if (t < 0.2) return START_PRICE;
    if (t < 0.3) return START_PRICE * (1.0 - 0.35 * (t - 0.2) / 0.1);
    if (t < 0.5) return START_PRICE * 0.65;
    if (t < 0.8) return START_PRICE * (0.65 + 0.35 * (t - 0.5) / 0.3);
    return START_PRICE;
  default: return START_PRICE;
  }
}

/* ------------------------------------------------------------------------ */
/* Generator                                                                */

enum { OS_NONE, OS_PENDING, OS_LIVE, OS_GONE };

typedef struct gen {
  rng_t rng;
  hg_book_t *book;
  size_t cap;       /* order ids below cap */
  uint8_t *state;   /* OS_* by order id */
  uint8_t *side;
  uint32_t *pos;    /* index in live[] when OS_LIVE */
  uint32_t *acct;
  int32_t *price;
  int32_t *leaves;
  uint32_t *live;   /* live resting order ids, unordered */
  uint32_t nlive, peak_live;
  uint64_t next_oid;
} gen_t;

static void live_remove(gen_t *g, uint64_t oid) {
  if (oid >= g->cap) return;
  if (g->state[oid] == OS_LIVE) {
    uint32_t p = g->pos[oid], last = g->live[--g->nlive];
    g->live[p] = last;
    g->pos[last] = p;
  }
  if (g->state[oid] != OS_NONE) g->state[oid] = OS_GONE;
}

static void gen_sink(void *ctx, const hg_book_event_t *ev) {
  gen_t *g = ctx;
  switch (ev->type) {
  case HG_EV_ACCEPTED:
    if (ev->order_id < g->cap) {
      g->state[ev->order_id] = OS_PENDING;
      g->leaves[ev->order_id] = (int32_t)ev->leaves;
    }
    break;
  case HG_EV_FILL:
    if (ev->maker_leaves == 0) live_remove(g, ev->maker_order_id);
    else if (ev->maker_order_id < g->cap) g->leaves[ev->maker_order_id] = (int32_t)ev->maker_leaves;
    if (ev->leaves == 0) live_remove(g, ev->order_id);
    else if (ev->order_id < g->cap) g->leaves[ev->order_id] = (int32_t)ev->leaves;
    break;
  case HG_EV_CANCELLED: live_remove(g, ev->order_id); break;
  case HG_EV_REPLACED:
    if (ev->order_id < g->cap) {
      g->price[ev->order_id] = (int32_t)ev->price;
      g->leaves[ev->order_id] = (int32_t)ev->leaves;
    }
    break;
  default: break;
  }
}

static int32_t clamp_band(const workload_t *w, hg_price_t ref, int64_t p) {
  if (w->band_bps && ref > 0) {
    int64_t lo = (ref * (10000 - (int64_t)w->band_bps) + 9999) / 10000;
    int64_t hi = ref * (10000 + (int64_t)w->band_bps) / 10000;
    if (p < lo) p = lo;
    if (p > hi) p = hi;
  }
  if (p < MIN_PRICE) p = MIN_PRICE;
  if (p > MAX_PRICE) p = MAX_PRICE;
  return (int32_t)p;
}

static hg_book_params_t book_params(const workload_t *w, uint32_t max_orders) {
  hg_book_params_t p = {.instrument_id = 1, .tick_size = 1000, .contract_unit = 1000,
                        .min_price = MIN_PRICE, .max_price = MAX_PRICE,
                        .max_order_qty = MAX_ORDER_QTY, .ref_price = w->ref0,
                        .max_orders = max_orders,
                        .max_accounts = MAX_ACCOUNTS, .default_stp = 0};
  return p;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (!p) {
    fprintf(stderr, "bench_engine: out of memory (%zu x %zu)\n", n, size);
    exit(1);
  }
  return p;
}

/* A maker's quote distance from fair, in ticks (>= 1). */
static int64_t quote_offset(gen_t *g, const scenario_t *sc) {
  if (rng_unit(&g->rng) < sc->wide_frac) return 1 + (int64_t)rng_below(&g->rng, sc->wide_max);
  return 1 + (int64_t)rng_expo(&g->rng, sc->quote_mean);
}

/* A maker's price on side: a distance from fair, kept passive (one tick inside
 * the best opposite price at most), then inside the band. */
static int32_t maker_price(gen_t *g, const scenario_t *sc, const workload_t *w, hg_price_t ref,
                           int64_t mid, uint8_t side) {
  int64_t off = quote_offset(g, sc);
  hg_price_t best;
  hg_qty_t q;
  int64_t p;
  if (side == HG_SIDE_BUY) {
    p = mid - off;
    if (hg_book_best(g->book, HG_SIDE_SELL, &best, &q) == 0 && p >= best) p = best - 1;
  } else {
    p = mid + off;
    if (hg_book_best(g->book, HG_SIDE_BUY, &best, &q) == 0 && p <= best) p = best + 1;
  }
  return clamp_band(w, ref, p);
}

/* Mostly small; one in a hundred is a block of 50..500 that sweeps levels. */
static int32_t taker_qty(gen_t *g) {
  if (rng_below(&g->rng, 100) == 0) return 50 + (int32_t)rng_below(&g->rng, 451);
  int64_t q = 1 + (int64_t)rng_expo(&g->rng, 6.0);
  return (int32_t)(q > MAX_ORDER_QTY ? MAX_ORDER_QTY : q);
}

static int32_t maker_qty(gen_t *g) {
  int64_t q = 1 + (int64_t)rng_expo(&g->rng, 10.0);
  return (int32_t)(q > MAX_ORDER_QTY ? MAX_ORDER_QTY : q);
}

/* Renames order ids 1..next_oid-1 by a permutation seeded from seed, in every
 * command that names one: the book then sees ids in no order, as a venue
 * whose clients choose them does. Client order ids follow (apply_* sets them
 * to the order id). Ids never issued (a race's cancel may name next_oid)
 * keep their number, which stays outside the permuted range's values. */
static void permute_ids(workload_t *w, uint64_t next_oid, uint64_t seed) {
  uint64_t *perm = xcalloc(next_oid + 1, sizeof *perm);
  for (uint64_t i = 0; i <= next_oid; i++) perm[i] = i;
  rng_t r = {seed * 0x9e3779b97f4a7c15ull + 0xc0ffeeu};
  for (uint64_t i = next_oid - 1; i > 1; i--) { /* Fisher-Yates over 1..next_oid-1 */
    uint64_t j = 1 + rng_next(&r) % i;
    uint64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (size_t k = 0; k < w->n; k++) {
    msg_t *m = &w->m[k];
    if (m->kind <= M_REPLACE && m->oid <= next_oid) m->oid = perm[m->oid];
  }
  free(perm);
}

/*
 * Builds the workload: n commands of one scenario, the last an end-of-day
 * expiry. mix_day aims at: new ~62% of commands, of which ~1/6 IOC, ~2%
 * market, ~1% FOK, ~10% takers' resting limits and the rest makers' quotes
 * (20% post-only, 10% DAY); cancels ~half as many as new orders (fed back on
 * the live count, each cancelling the farther from fair of two random live
 * orders; 2% name an order already gone, as races do); replaces ~a tenth of
 * new orders (35% shrink in place, 65% re-price); ~20 mass cancels a day.
 * mix_harness: see its definition; print_mix shows what each run got.
 * The generator's own book always sees ids in sequence; random_ids renames
 * them afterwards (permute_ids), which changes no outcome but the ids.
 */
static int generate(const scenario_t *sc, const mix_t *mix, size_t n, uint64_t seed,
                    workload_t *w) {
  memset(w, 0, sizeof *w);
  w->n = n;
  w->mix = mix;
  w->m = xcalloc(n, sizeof *w->m);
  w->band_bps = sc->band_bps;
  w->ref0 = sc->band_bps ? (hg_price_t)START_PRICE : 0;

  gen_t g = {.rng = {seed * 0x2545f4914f6cdd1dull + 0x1234567u}, .cap = n + 2, .next_oid = 1};
  g.state = xcalloc(g.cap, 1);
  g.side = xcalloc(g.cap, 1);
  g.pos = xcalloc(g.cap, sizeof *g.pos);
  g.acct = xcalloc(g.cap, sizeof *g.acct);
  g.price = xcalloc(g.cap, sizeof *g.price);
  g.leaves = xcalloc(g.cap, sizeof *g.leaves);
  g.live = xcalloc(g.cap, sizeof *g.live);
  uint32_t target = sc->target_live;
  if (target > n / 10) target = (uint32_t)(n / 10);
  if (target < 100) target = 100;
  /* The generator's pool: three times what the makers aim for, never full.
   * The replaying books get the peak live count plus a quarter: as neither
   * pool ever fills, both see the same events (HG_REJ_BOOK_FULL is the only
   * outcome max_orders decides). */
  hg_book_params_t bp = book_params(w, 3 * target + 4096);
  int rc = hg_book_create(&bp, gen_sink, &g, &g.book);
  if (rc != 0) {
    fprintf(stderr, "bench_engine: hg_book_create failed: %d\n", rc);
    return rc;
  }

  const double dt = 1.0 / (double)n;
  const double theta = 2.0; /* the noise mean-reverts about twice a day */
  const double sig_step = sc->noise * sqrt(2.0 * theta) * sqrt(dt);
  const double p_mass = 6.0 / (double)n;
  double noise = 0.0;
  hg_price_t ref = w->ref0;
  int opening = 1; /* makers build the book before takers arrive */

  for (size_t i = 0; i + 1 < n; i++) {
    msg_t *m = &w->m[i];
    double t = (double)i * dt;
    noise += -theta * noise * dt + sig_step * rng_normal(&g.rng);
    double fair = path_mean(sc->path, t) + noise;
    int64_t mid = llround(fair);
    if (opening && (g.nlive >= target / 2 || i > n / 4)) opening = 0;

    if (sc->band_bps && fabs(fair - (double)ref) > (double)ref * REF_MOVE) {
      ref = mid;
      m->kind = M_REF;
      m->price = (int32_t)ref;
    } else if (!opening && rng_unit(&g.rng) < p_mass) {
      m->kind = M_MASS;
      m->account = 1 + rng_below(&g.rng, N_MAKERS);
      uint32_t r = rng_below(&g.rng, 10);
      m->side = r < 6 ? HG_SIDES_BOTH : r < 8 ? HG_SIDES_BUY : HG_SIDES_SELL;
    } else {
      double ratio = (double)g.nlive / (double)target;
      if (ratio < 0.3) ratio = 0.3;
      if (ratio > 2.0) ratio = 2.0;
      double p_cancel = opening ? 0.0 : mix->cancel_gain * ratio;
      double p_replace = opening ? 0.0 : mix->replace_p;
      double u = rng_unit(&g.rng);
      if (g.nlive > 0 && u < p_cancel) {
        m->kind = M_CANCEL;
        if (rng_below(&g.rng, 100) < 2) {
          m->oid = 1 + rng_below(&g.rng, (uint32_t)g.next_oid);
          m->account = m->oid < g.cap && g.acct[m->oid] ? g.acct[m->oid] : 1;
        } else {
          uint32_t a = g.live[rng_below(&g.rng, g.nlive)];
          uint32_t b = g.live[rng_below(&g.rng, g.nlive)];
          m->oid = fabs(g.price[a] - fair) >= fabs(g.price[b] - fair) ? a : b;
          m->account = g.acct[m->oid];
        }
      } else if (g.nlive > 0 && u < p_cancel + p_replace) {
        uint32_t o = g.live[rng_below(&g.rng, g.nlive)];
        m->kind = M_REPLACE;
        m->oid = o;
        m->account = g.acct[o];
        if (g.leaves[o] > 1 && rng_below(&g.rng, 100) < 35) {
          m->price = g.price[o];
          m->qty = 1 + (int32_t)rng_below(&g.rng, (uint32_t)g.leaves[o] - 1);
        } else {
          m->price = maker_price(&g, sc, w, ref, mid, g.side[o]);
          m->qty = g.leaves[o] > 0 ? g.leaves[o] : maker_qty(&g);
        }
      } else {
        m->kind = M_NEW;
        m->oid = g.next_oid++;
        m->tif = HG_TIF_GTC;
        m->type = HG_ORD_LIMIT;
        uint32_t r = opening ? 999 : rng_below(&g.rng, 1000);
        if (r < mix->taker_end) { /* takers lean towards the fair price, which moves the book */
          hg_price_t bb, ba;
          hg_qty_t q;
          double lean = 0.0;
          if (hg_book_best(g.book, HG_SIDE_BUY, &bb, &q) == 0 &&
              hg_book_best(g.book, HG_SIDE_SELL, &ba, &q) == 0)
            lean = (fair - 0.5 * (double)(bb + ba)) / 20.0;
          lean = lean < -0.4 ? -0.4 : lean > 0.4 ? 0.4 : lean;
          m->side = rng_unit(&g.rng) < 0.5 + lean ? HG_SIDE_BUY : HG_SIDE_SELL;
          m->account = TAKER_BASE + rng_below(&g.rng, N_TAKERS);
          m->qty = taker_qty(&g);
        } else { /* makers quote both sides evenly */
          m->side = (uint8_t)rng_below(&g.rng, 2);
          m->account = 1 + rng_below(&g.rng, N_MAKERS);
          m->qty = maker_qty(&g);
        }
        if (r < mix->fok_end) { /* IOC or FOK: cross the best opposite price */
          hg_price_t best;
          hg_qty_t bq;
          hg_side_t opp = m->side == HG_SIDE_BUY ? HG_SIDE_SELL : HG_SIDE_BUY;
          int64_t k = rng_below(&g.rng, 4);
          int64_t p;
          if (hg_book_best(g.book, opp, &best, &bq) == 0)
            p = m->side == HG_SIDE_BUY ? best + k : best - k;
          else
            p = m->side == HG_SIDE_BUY ? mid + 2 : mid - 2;
          m->tif = r < mix->ioc_end ? HG_TIF_IOC : HG_TIF_FOK;
          m->price = clamp_band(w, ref, p);
        } else if (r < mix->market_end) { /* market */
          m->type = HG_ORD_MARKET;
          m->tif = HG_TIF_IOC;
          /* capped at the band's edge, as the exchange caps it */
          m->price = clamp_band(w, ref, m->side == HG_SIDE_BUY ? MAX_PRICE : MIN_PRICE);
        } else if (r < mix->taker_end) { /* a taker's resting limit near the mid, may cross */
          int64_t off = (int64_t)rng_below(&g.rng, 10) - 1;
          m->price = clamp_band(w, ref, m->side == HG_SIDE_BUY ? mid - off : mid + off);
          if (rng_below(&g.rng, 10) == 0) m->tif = HG_TIF_DAY;
        } else { /* a maker's quote */
          m->price = maker_price(&g, sc, w, ref, mid, m->side);
          m->post_only = rng_below(&g.rng, 5) == 0;
          if (rng_below(&g.rng, 10) == 0) m->tif = HG_TIF_DAY;
        }
        g.side[m->oid] = m->side;
        g.acct[m->oid] = m->account;
        g.price[m->oid] = m->price;
      }
    }
    apply_hg(g.book, m, msg_ts(i));
    if (m->kind == M_NEW && g.state[m->oid] == OS_PENDING) {
      if (m->tif == HG_TIF_GTC || m->tif == HG_TIF_DAY) {
        g.state[m->oid] = OS_LIVE;
        g.pos[m->oid] = g.nlive;
        g.live[g.nlive++] = (uint32_t)m->oid;
        if (g.nlive > g.peak_live) g.peak_live = g.nlive;
      } else {
        g.state[m->oid] = OS_GONE;
      }
    }
    w->count[m->kind]++;
    if (m->kind == M_NEW) {
      w->ioc += m->tif == HG_TIF_IOC;
      w->fok += m->tif == HG_TIF_FOK;
      w->market += m->type == HG_ORD_MARKET;
      w->post_only += m->post_only;
      w->day += m->tif == HG_TIF_DAY;
    }
  }
  w->m[n - 1].kind = M_EXPIRE;
  w->count[M_EXPIRE]++;
  w->peak_live = g.peak_live;
  w->pool = g.peak_live + g.peak_live / 4 + 1024;
  if (mix->random_ids) permute_ids(w, g.next_oid, seed);

  hg_book_destroy(g.book);
  free(g.state);
  free(g.side);
  free(g.pos);
  free(g.acct);
  free(g.price);
  free(g.leaves);
  free(g.live);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Sinks                                                                    */

typedef struct counts {
  uint64_t ev[8];
  uint64_t touch;   /* folds a few fields of every event */
  uint64_t volume;  /* traded contracts */
  uint64_t notional; /* sum of price * qty over fills, ticks x contracts */
} counts_t;

static void count_sink(void *ctx, const hg_book_event_t *ev) {
  counts_t *c = ctx;
  c->ev[ev->type & 7]++;
  c->touch += ev->order_id ^ (uint64_t)ev->qty ^ (uint64_t)ev->price;
  if (ev->type == HG_EV_FILL) {
    c->volume += (uint64_t)ev->qty;
    c->notional += (uint64_t)ev->qty * (uint64_t)ev->price;
  }
}

typedef struct hashsink { uint64_t h, n; } hashsink_t;

static inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0x100000001b3ull;
}

static void hash_sink(void *ctx, const hg_book_event_t *ev) {
  hashsink_t *s = ctx;
  uint64_t h = s->h;
  h = mix(h, (uint64_t)ev->type | (uint64_t)ev->side << 8 | (uint64_t)ev->cmd << 16 |
                 (uint64_t)ev->priority_kept << 24 | (uint64_t)ev->reason << 32);
  h = mix(h, (uint64_t)ev->instrument_id << 32 | ev->account);
  h = mix(h, ev->maker_account);
  h = mix(h, ev->order_id);
  h = mix(h, ev->client_order_id);
  h = mix(h, ev->maker_order_id);
  h = mix(h, ev->maker_client_order_id);
  h = mix(h, (uint64_t)ev->price);
  h = mix(h, (uint64_t)ev->qty);
  h = mix(h, (uint64_t)ev->leaves);
  h = mix(h, (uint64_t)ev->maker_leaves);
  h = mix(h, ev->ts);
  s->h = h;
  s->n++;
}

/* ------------------------------------------------------------------------ */
/* Clocks and memory                                                        */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t tick(void) {
#if HAVE_TSC
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

static double ns_per_tick = 1.0;
static double timer_overhead_ticks = 0.0;

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void calibrate_timer(void) {
#if HAVE_TSC
  double v[3];
  for (int r = 0; r < 3; r++) { /* the middle of three 50 ms windows */
    double s0 = now_s();
    uint64_t t0 = tick();
    while (now_s() - s0 < 0.05) {
    }
    double s1 = now_s();
    uint64_t t1 = tick();
    v[r] = (s1 - s0) * 1e9 / (double)(t1 - t0);
  }
  qsort(v, 3, sizeof v[0], cmp_double);
  ns_per_tick = v[1];
#endif
  enum { N = 20000 };
  static uint32_t d[N];
  for (int i = 0; i < N; i++) {
    uint64_t a = tick();
    uint64_t b = tick();
    d[i] = (uint32_t)(b - a);
  }
  qsort(d, N, sizeof d[0], cmp_u32);
  timer_overhead_ticks = d[N / 2];
}

static long rss_kib_now(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2) res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static long maxrss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static size_t heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

/* ------------------------------------------------------------------------ */
/* Runs                                                                     */

static hg_book_t *make_book(const workload_t *w, uint32_t max_orders, hg_book_sink_fn fn,
                            void *ctx) {
  hg_book_params_t p = book_params(w, max_orders);
  hg_book_t *b = NULL;
  int rc = hg_book_create(&p, fn, ctx, &b);
  if (rc != 0) {
    fprintf(stderr, "bench_engine: hg_book_create failed: %d\n", rc);
    exit(1);
  }
  return b;
}

static uint32_t pool_size(const workload_t *w) { return w->pool; }

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whole-loop timing; returns wall seconds and sets *cpu to the thread's CPU
 * seconds over the same loop (which leaves out time other processes had the
 * core: on a shared machine it is the steadier of the two). */
static double run_throughput(const workload_t *w, counts_t *c, double *cpu) {
  memset(c, 0, sizeof *c);
  hg_book_t *b = make_book(w, pool_size(w), count_sink, c);
  double c0 = cpu_s(), t0 = now_s();
  for (size_t i = 0; i < w->n; i++) {
    hint_hg(b, w->m, i, w->n);
    apply_hg(b, &w->m[i], msg_ts(i));
  }
  double t1 = now_s(), c1 = cpu_s();
  hg_book_destroy(b);
  *cpu = c1 - c0;
  return t1 - t0;
}

typedef struct latency {
  double p50, p99, p999, p9999, max, mean; /* ns, timer overhead subtracted */
  size_t book_alloc;                /* bytes the book allocated at create */
  long book_rss_kib;                /* resident growth over create + run */
} latency_t;

static double pct_ns(const uint32_t *sorted, size_t n, double q) {
  size_t k = (size_t)(q * (double)(n - 1));
  double t = (double)sorted[k] - timer_overhead_ticks;
  return t < 0 ? 0 : t * ns_per_tick;
}

static void run_latency(const workload_t *w, latency_t *out) {
  uint32_t *lat = xcalloc(w->n, sizeof *lat);
  for (size_t i = 0; i < w->n; i += 1024) lat[i] = 1; /* fault the pages in now */
  counts_t c = {0};
  long rss0 = rss_kib_now();
  size_t h0 = heap_in_use();
  hg_book_t *b = make_book(w, pool_size(w), count_sink, &c);
  out->book_alloc = heap_in_use() - h0;
  /* Backed before the first message, as a venue sets a book up at listing:
   * a first touch of a huge page is tens of microseconds of zeroing, which
   * the tail percentiles would otherwise count. */
  if (hg_book_prefault != NULL) (void)hg_book_prefault(b);
  double sum = 0;
  for (size_t i = 0; i < w->n; i++) {
    uint64_t t0 = tick();
    hint_hg(b, w->m, i, w->n);
    apply_hg(b, &w->m[i], msg_ts(i));
    uint64_t t1 = tick();
    lat[i] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
    sum += (double)(t1 - t0);
  }
  out->book_rss_kib = rss_kib_now() - rss0;
  hg_book_destroy(b);
  qsort(lat, w->n, sizeof *lat, cmp_u32);
  out->p50 = pct_ns(lat, w->n, 0.50);
  out->p99 = pct_ns(lat, w->n, 0.99);
  out->p999 = pct_ns(lat, w->n, 0.999);
  out->p9999 = pct_ns(lat, w->n, 0.9999);
  out->max = pct_ns(lat, w->n, 1.0);
  out->mean = (sum / (double)w->n - timer_overhead_ticks) * ns_per_tick;
  free(lat);
}

typedef struct refcmp {
  size_t prefix;          /* messages both books ran */
  double ref_ns, book_ns; /* per message */
  int same;               /* identical event streams over the prefix */
  uint64_t events;
} refcmp_t;

/* Records events with the index of the message that caused them. */
typedef struct recsink {
  hg_book_event_t *ev;
  size_t *msg;
  size_t n, cap, cur;
} recsink_t;

static void rec_sink(void *ctx, const hg_book_event_t *ev) {
  recsink_t *r = ctx;
  if (r->n == r->cap) return;
  r->ev[r->n] = *ev;
  r->msg[r->n++] = r->cur;
}

static int same_event(const hg_book_event_t *a, const hg_book_event_t *b) {
  return a->type == b->type && a->side == b->side && a->cmd == b->cmd &&
         a->priority_kept == b->priority_kept && a->reason == b->reason &&
         a->instrument_id == b->instrument_id && a->account == b->account &&
         a->maker_account == b->maker_account && a->order_id == b->order_id &&
         a->client_order_id == b->client_order_id && a->maker_order_id == b->maker_order_id &&
         a->maker_client_order_id == b->maker_client_order_id && a->price == b->price &&
         a->qty == b->qty && a->leaves == b->leaves && a->maker_leaves == b->maker_leaves &&
         a->ts == b->ts;
}

static void print_event(const char *who, const hg_book_event_t *e) {
  printf("    %-9s type %u side %u cmd %u reason %u kept %u acct %u maker_acct %u oid %" PRIu64
         " maker_oid %" PRIu64 " price %" PRId64 " qty %" PRId64 " leaves %" PRId64
         " maker_leaves %" PRId64 "\n",
         who, e->type, e->side, e->cmd, e->reason, e->priority_kept, e->account,
         e->maker_account, e->order_id, e->maker_order_id, e->price, e->qty, e->leaves,
         e->maker_leaves);
}

/* Reruns a prefix through both books, recording, and prints the first event
 * where they part, with the message that caused it. */
static void explain_difference(const workload_t *w, size_t prefix, uint64_t nevents) {
  hg_book_params_t p = book_params(w, pool_size(w));
  recsink_t a = {0}, b = {0};
  a.cap = b.cap = (size_t)nevents + 16;
  a.ev = xcalloc(a.cap, sizeof *a.ev);
  a.msg = xcalloc(a.cap, sizeof *a.msg);
  b.ev = xcalloc(b.cap, sizeof *b.ev);
  b.msg = xcalloc(b.cap, sizeof *b.msg);
  hg_book_t *hb = make_book(w, p.max_orders, rec_sink, &a);
  ref_book_t *rb = NULL;
  if (ref_book_create(&p, rec_sink, &b, &rb) == 0) {
    for (size_t i = 0; i < prefix; i++) {
      a.cur = b.cur = i;
      apply_hg(hb, &w->m[i], msg_ts(i));
      apply_ref(rb, &w->m[i], msg_ts(i));
    }
    size_t k = 0;
    while (k < a.n && k < b.n && same_event(&a.ev[k], &b.ev[k])) k++;
    if (k < a.n || k < b.n) {
      size_t mi = k < a.n ? a.msg[k] : b.msg[k];
      const msg_t *m = &w->m[mi];
      printf("  first difference at event %zu, from message %zu (%s oid %" PRIu64
             " acct %u side %u type %u tif %u price %d qty %d post_only %u):\n",
             k, mi, kind_name[m->kind], m->oid, m->account, m->side, m->type, m->tif, m->price,
             m->qty, m->post_only);
      if (k < a.n) print_event("book", &a.ev[k]);
      else printf("    book      (no more events)\n");
      if (k < b.n) print_event("reference", &b.ev[k]);
      else printf("    reference (no more events)\n");
    }
    ref_book_destroy(rb);
  }
  hg_book_destroy(hb);
  free(a.ev);
  free(a.msg);
  free(b.ev);
  free(b.msg);
}

/* The reference book on a prefix, stopped after budget_s; then the real book
 * on exactly that prefix, best of five. */
static void run_reference(const workload_t *w, size_t max_prefix, double budget_s,
                          refcmp_t *out) {
  size_t n = w->n < max_prefix ? w->n : max_prefix;
  hg_book_params_t p = book_params(w, pool_size(w));
  hashsink_t hr = {0, 0};
  ref_book_t *rb = NULL;
  int rc = ref_book_create(&p, hash_sink, &hr, &rb);
  if (rc != 0) {
    fprintf(stderr, "bench_engine: ref_book_create failed: %d\n", rc);
    exit(1);
  }
  double t0 = now_s();
  size_t i = 0;
  while (i < n) {
    apply_ref(rb, &w->m[i], msg_ts(i));
    i++;
    if ((i & 255) == 0 && now_s() - t0 > budget_s) break;
  }
  double t1 = now_s();
  ref_book_destroy(rb);
  out->prefix = i;
  out->ref_ns = (t1 - t0) * 1e9 / (double)i;

  double best = 0;
  hashsink_t hb = {0, 0};
  for (int r = 0; r < 5; r++) {
    hb.h = hb.n = 0;
    hg_book_t *b = make_book(w, pool_size(w), hash_sink, &hb);
    double s0 = now_s();
    for (size_t k = 0; k < out->prefix; k++) apply_hg(b, &w->m[k], msg_ts(k));
    double s = now_s() - s0;
    hg_book_destroy(b);
    if (r == 0 || s < best) best = s;
  }
  out->book_ns = best * 1e9 / (double)out->prefix;
  out->same = hb.h == hr.h && hb.n == hr.n;
  out->events = hb.n;
  if (!out->same) explain_difference(w, out->prefix, hb.n > hr.n ? hb.n : hr.n);
}

/* ------------------------------------------------------------------------ */
/* Consumer runs: every event leaves the book's thread through a ring       */

#define CAP_1M 1000000u   /* the large capacity the consumer runs also try */
#define RING_SLOTS 16384u /* 1 MiB of 64-byte reports, backed at create */
#define BOOK_CPU 0
#define CONSUMER_CPU 1

/* What the book's thread sends on for each event: one cache line. */
typedef struct report {
  uint8_t type, side, cmd, priority_kept;
  uint16_t reason, pad_;
  hg_account_t account, maker_account;
  hg_oid_t order_id, maker_order_id;
  hg_price_t price;
  hg_qty_t qty, leaves;
  uint64_t ts;
} report_t;
_Static_assert(sizeof(report_t) == 64, "a report is one cache line");

/* Busy-wait step; on a shared machine give the CPU away now and then so a
 * descheduled peer can run. */
static void relax(unsigned *n) {
#if HAVE_TSC
  _mm_pause();
#endif
  if (++*n % 1024 == 0) sched_yield();
}

static int pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The draining thread. ring's consumer side is its own from start to join.
 * What the producer writes (stop) and what the consumer writes (consumed,
 * its results) sit in lines of their own, and neither shares a line with
 * the producer's counters (producer_t): on one line, every report's
 * counting on CPU 1 took the line the book's thread wrote per event on
 * CPU 0 away from it. */
typedef struct consumer {
  alignas(64) hg_spsc_ring_t *ring;
  atomic_int stop;
  alignas(64) _Atomic uint64_t consumed;
  counts_t c; /* a checksum of every report; written once, read after the join */
  int pin_rc; /* pthread_setaffinity_np's result */
} consumer_t;

/* Reads the ring in batches of up to 64 reports, as an outside harness's
 * drainer does, counting and folding each into a checksum in registers. */
static void *consumer_main(void *arg) {
  consumer_t *c = arg;
  c->pin_rc = pin_self(CONSUMER_CPU);
  report_t batch[64];
  unsigned idle = 0;
  uint64_t done = 0, ev[8] = {0}, touch = 0, volume = 0;
  for (;;) {
    size_t n = hg_spsc_ring_pop_batch(c->ring, batch, 64, NULL);
    if (n == 0) {
      /* acquire: the producer's last push happens before its stop. */
      if (atomic_load_explicit(&c->stop, memory_order_acquire) && hg_spsc_ring_empty(c->ring))
        break;
      relax(&idle);
      continue;
    }
    for (size_t k = 0; k < n; k++) {
      const report_t *r = &batch[k];
      ev[r->type & 7]++;
      touch = mix(touch, (r->order_id ^ r->maker_order_id << 1 ^ r->ts) +
                             ((uint64_t)r->price << 32 ^ (uint64_t)r->qty ^
                              (uint64_t)r->leaves << 16 ^ r->type ^ (uint64_t)r->reason << 8));
      volume += r->type == HG_EV_FILL ? (uint64_t)r->qty : 0;
    }
    done += n;
    /* relaxed: a progress count only; the results are read after the join. */
    atomic_store_explicit(&c->consumed, done, memory_order_relaxed);
  }
  memcpy(c->c.ev, ev, sizeof ev);
  c->c.touch = touch;
  c->c.volume = volume;
  return NULL;
}

/* The book's side: each event becomes a report pushed into the ring; a full
 * ring is waited out (never dropped), and counted. A line of its own (see
 * consumer_t). */
typedef struct producer {
  alignas(64) hg_spsc_ring_t *ring;
  uint64_t pushed, full;
  double full_cpu; /* thread CPU seconds spent waiting on a full ring */
} producer_t;

static void push_report(producer_t *p, const report_t *r) {
  if (hg_spsc_ring_try_push_deferred(p->ring, r, sizeof *r) != 0) {
    unsigned n = 0;
    double c0 = cpu_s();
    p->full++;
    while (hg_spsc_ring_try_push(p->ring, r, sizeof *r) != 0) relax(&n);
    p->full_cpu += cpu_s() - c0;
  }
  p->pushed++;
}

static void ring_sink(void *ctx, const hg_book_event_t *ev) {
  report_t r = {.type = ev->type, .side = ev->side, .cmd = ev->cmd,
                .priority_kept = ev->priority_kept, .reason = ev->reason,
                .account = ev->account, .maker_account = ev->maker_account,
                .order_id = ev->order_id, .maker_order_id = ev->maker_order_id,
                .price = ev->price, .qty = ev->qty, .leaves = ev->leaves, .ts = ev->ts};
  push_report(ctx, &r);
}

typedef struct crun {
  double secs;  /* first command to the consumer's last report */
  double cpu;   /* the book thread's CPU seconds over the same span */
  double full_cpu; /* of cpu, waiting on a full ring */
  uint64_t full;
  counts_t c;
  int pin_rc;
} crun_t;

/* Messages whose reports are published together (one store of the ring's
 * tail, so the line holding it crosses to the consumer once per batch), as
 * the engine hands on the events of the commands it took from its ring in
 * one batch. */
#define PUBLISH_EVERY 16u

/* One replay into a fresh book of max_orders with a fresh consumer thread;
 * max_orders 0: no book, one acceptance report a message (the ring's own
 * cost: ring_only). Book creation, its prefault and the thread's start are
 * outside the timed span. perf_fd, when >= 0, counts only the command loop. */
static void run_consumer(const workload_t *w, uint32_t max_orders, hg_spsc_ring_t *ring,
                         int perf_fd, crun_t *out) {
  consumer_t c;
  memset(&c, 0, sizeof c);
  c.ring = ring;
  atomic_init(&c.stop, 0);
  atomic_init(&c.consumed, 0);
  producer_t p = {.ring = ring};
  hg_book_t *b = NULL;
  if (max_orders > 0) {
    b = make_book(w, max_orders, ring_sink, &p);
    if (hg_book_prefault != NULL && hg_book_prefault(b) != 0)
      fprintf(stderr, "bench_engine: hg_book_prefault failed; pages back on first touch\n");
  }
  pthread_t th;
  int rc = pthread_create(&th, NULL, consumer_main, &c);
  if (rc != 0) {
    fprintf(stderr, "bench_engine: pthread_create: %s\n", strerror(rc));
    exit(1);
  }
  if (perf_fd >= 0) (void)ioctl(perf_fd, PERF_EVENT_IOC_ENABLE, 0);
  double c0 = cpu_s(), t0 = now_s();
  if (b != NULL) {
    for (size_t i = 0; i < w->n; i++) {
      hint_hg(b, w->m, i, w->n);
      apply_hg(b, &w->m[i], msg_ts(i));
      if (i % PUBLISH_EVERY == PUBLISH_EVERY - 1) hg_spsc_ring_publish(ring);
    }
  } else {
    for (size_t i = 0; i < w->n; i++) {
      const msg_t *m = &w->m[i];
      report_t r = {.type = HG_EV_ACCEPTED, .side = m->side, .account = m->account,
                    .order_id = m->oid, .price = m->price, .qty = m->qty, .leaves = m->qty,
                    .ts = msg_ts(i)};
      push_report(&p, &r);
      if (i % PUBLISH_EVERY == PUBLISH_EVERY - 1) hg_spsc_ring_publish(ring);
    }
  }
  hg_spsc_ring_publish(ring);
  if (perf_fd >= 0) (void)ioctl(perf_fd, PERF_EVENT_IOC_DISABLE, 0);
  unsigned n = 0;
  /* relaxed: only a count is compared; the join orders everything else. */
  while (atomic_load_explicit(&c.consumed, memory_order_relaxed) != p.pushed) relax(&n);
  double t1 = now_s(), c1 = cpu_s();
  /* release: every push happens before the consumer sees stop. */
  atomic_store_explicit(&c.stop, 1, memory_order_release);
  pthread_join(th, NULL);
  hg_book_destroy(b);
  out->secs = t1 - t0;
  out->cpu = c1 - c0;
  out->full = p.full;
  out->full_cpu = p.full_cpu;
  out->c = c.c;
  out->pin_rc = c.pin_rc;
}

/* A counter of last-level cache misses of the calling thread, user space
 * only, created disabled; -1 with the reason in why when the kernel or the
 * virtual machine offers none. */
static int perf_open_misses(char *why, size_t len) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_HARDWARE;
  a.size = sizeof a;
  a.config = PERF_COUNT_HW_CACHE_MISSES;
  a.disabled = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0ul);
  if (fd < 0) {
    snprintf(why, len, "perf_event_open: %s", strerror(errno));
    return -1;
  }
  return (int)fd;
}

/* The count, scaled up if the kernel multiplexed the counter; -1 if it
 * never ran. */
static double perf_read_misses(int fd, char *why, size_t len) {
  uint64_t v[3];
  if (read(fd, v, sizeof v) != (ssize_t)sizeof v) {
    snprintf(why, len, "perf counter read: %s", strerror(errno));
    return -1;
  }
  if (v[2] == 0) {
    snprintf(why, len, "perf counter never ran");
    return -1;
  }
  return (double)v[0] * (double)v[1] / (double)v[2];
}

/* ------------------------------------------------------------------------ */
/* Report                                                                   */

typedef struct result {
  const char *name;
  double mmsgs, ns_msg, cpu_mmsgs;
  latency_t lat;
  refcmp_t ref;
  /* consumer mode: throughput at peak-live capacity and at CAP_1M, on-CPU
   * throughput at peak, cache misses per message (-1: not measured) */
  double c_mmsgs, c_mmsgs_1m, c_cpu_mmsgs, c_misses;
  latency_t c_lat;   /* harness mix, ids in random order, events on the book's thread */
  double ring_only;  /* Mmsg/s of the ring alone: one acceptance a message, no book */
  double ring_only_cpu; /* the producer's on-CPU Mmsg/s over the same runs */
} result_t;

typedef struct options {
  int quick, demo;
  const char *scenario;
  size_t messages;
  uint64_t seed;
  int reps;
  size_t ref_prefix;
  double ref_budget;
} options_t;

static void print_mix(const workload_t *w, const counts_t *c) {
  size_t nn = w->count[M_NEW];
  printf("  mix: %zu new (IOC %.1f%%, FOK %.1f%%, market %.1f%%, post-only %.1f%%, DAY %.1f%%),"
         " %zu cancel (%.0f%% of new), %zu replace (%.0f%% of new), %zu mass cancel,"
         " %zu reference, %zu expiry\n",
         nn, 100.0 * (double)w->ioc / (double)nn, 100.0 * (double)w->fok / (double)nn,
         100.0 * (double)w->market / (double)nn, 100.0 * (double)w->post_only / (double)nn,
         100.0 * (double)w->day / (double)nn, w->count[M_CANCEL],
         100.0 * (double)w->count[M_CANCEL] / (double)nn, w->count[M_REPLACE],
         100.0 * (double)w->count[M_REPLACE] / (double)nn, w->count[M_MASS], w->count[M_REF],
         w->count[M_EXPIRE]);
  printf("  events: %" PRIu64 " accepted, %" PRIu64 " rejected, %" PRIu64 " fills (%" PRIu64
         " contracts), %" PRIu64 " cancelled, %" PRIu64 " replaced, %" PRIu64
         " level updates; peak %u resting orders\n",
         c->ev[HG_EV_ACCEPTED], c->ev[HG_EV_REJECTED], c->ev[HG_EV_FILL], c->volume,
         c->ev[HG_EV_CANCELLED], c->ev[HG_EV_REPLACED], c->ev[HG_EV_LEVEL], w->peak_live);
}

static int run_scenario(const scenario_t *sc, const options_t *o, result_t *r) {
  workload_t w;
  double g0 = now_s();
  int rc = generate(sc, &mix_day, o->messages, o->seed, &w);
  if (rc != 0) return rc;
  double gen_s = now_s() - g0;
  printf("\n== %s: %s\n", sc->name, sc->what);
  printf("  %zu messages, seed %" PRIu64 ", generated in %.2f s (not timed)\n", w.n, o->seed,
         gen_s);

  double secs[16], cpus[16];
  counts_t c = {0};
  for (int k = 0; k < o->reps; k++) secs[k] = run_throughput(&w, &c, &cpus[k]);
  print_mix(&w, &c);
  qsort(secs, (size_t)o->reps, sizeof secs[0], cmp_double);
  qsort(cpus, (size_t)o->reps, sizeof cpus[0], cmp_double);
  double med = secs[o->reps / 2];
  r->name = sc->name;
  r->mmsgs = (double)w.n / med / 1e6;
  r->ns_msg = med * 1e9 / (double)w.n;
  r->cpu_mmsgs = (double)w.n / cpus[o->reps / 2] / 1e6;
  printf("  throughput: %.2f Mmsg/s, %.1f ns/msg (wall clock, median of %d runs; min %.1f,"
         " max %.1f ns/msg); on-CPU time only: %.2f Mmsg/s\n",
         r->mmsgs, r->ns_msg, o->reps, secs[0] * 1e9 / (double)w.n,
         secs[o->reps - 1] * 1e9 / (double)w.n, r->cpu_mmsgs);

  run_latency(&w, &r->lat);
  printf("  latency per message: p50 %.0f ns, p99 %.0f ns, p99.9 %.0f ns, p99.99 %.0f ns,"
         " max %.0f ns, mean %.0f ns\n",
         r->lat.p50, r->lat.p99, r->lat.p999, r->lat.p9999, r->lat.max, r->lat.mean);
  printf("  memory: book allocated %.1f MiB for %u orders, resident growth %.1f MiB;"
         " process peak RSS %.1f MiB (includes the %.0f MiB workload)\n",
         (double)r->lat.book_alloc / 1048576.0, pool_size(&w),
         (double)r->lat.book_rss_kib / 1024.0, (double)maxrss_kib() / 1024.0,
         (double)(w.n * sizeof(msg_t)) / 1048576.0);

  run_reference(&w, o->ref_prefix, o->ref_budget, &r->ref);
  printf("  reference book: first %zu messages, %.0f ns/msg vs %.1f ns/msg: %.1fx faster;"
         " events %s (%" PRIu64 ")\n",
         r->ref.prefix, r->ref.ref_ns, r->ref.book_ns, r->ref.ref_ns / r->ref.book_ns,
         r->ref.same ? "identical" : "DIFFER", r->ref.events);
  printf("RESULT engine.%s_mmsgs %.2f Mmsg/s\n", sc->name, r->mmsgs);
  free(w.m);
  return r->ref.same ? 0 : 1;
}

/* Median on-CPU Mmsg/s of the book's thread over o->reps in-thread runs. */
static double cpu_mmsgs_median(const workload_t *w, const options_t *o) {
  double cpus[16];
  counts_t c;
  for (int k = 0; k < o->reps; k++) (void)run_throughput(w, &c, &cpus[k]);
  qsort(cpus, (size_t)o->reps, sizeof cpus[0], cmp_double);
  return (double)w->n / cpus[o->reps / 2] / 1e6;
}

/* Where the consumer mode's time goes, in on-CPU time of the book's thread
 * (the steadier measure on a shared machine): the harness workload with ids
 * in sequence and with ids permuted, events counted on the book's thread,
 * against the consumer runs' figure. */
static void breakdown(const scenario_t *sc, const options_t *o, const workload_t *w,
                      double ring_cpu_mmsgs) {
  mix_t in_order = *w->mix;
  in_order.random_ids = 0;
  workload_t seq;
  if (generate(sc, &in_order, o->messages, o->seed, &seq) != 0) return;
  double a = cpu_mmsgs_median(&seq, o), b = cpu_mmsgs_median(w, o);
  printf("  where the time goes (on-CPU Mmsg/s of the book's thread, peak capacity): ids in"
         " sequence, events counted on the thread %.2f; ids in random order, same %.2f;"
         " ids in random order, events to the ring %.2f\n",
         a, b, ring_cpu_mmsgs);
  free(seq.m);
}

/* The consumer runs of one scenario: the harness mix with ids in random
 * order, replayed alternately into a book sized for the peak live count and
 * one sized for CAP_1M orders; medians of o->reps each. */
static int run_scenario_consumer(const scenario_t *sc, const options_t *o, hg_spsc_ring_t *ring,
                                 result_t *r) {
  workload_t w;
  int rc = generate(sc, &mix_harness, o->messages, o->seed, &w);
  if (rc != 0) return rc;
  uint32_t big = w.pool > CAP_1M ? w.pool : CAP_1M;
  printf("  consumer mode: %s mix, order ids in random order, every event copied as a %zu-byte"
         " report into an SPSC ring drained on CPU %d; book on CPU %d\n",
         w.mix->name, sizeof(report_t), CONSUMER_CPU, BOOK_CPU);

  int fd = -1;
  char why[160] = "";
  if (!strcmp(sc->name, "deep_static")) fd = perf_open_misses(why, sizeof why);
  double peak[16], large[16], cpus[16], busy[16], busy1m[16], alone[16], alone_cpu[16];
  crun_t cr, first = {0};
  uint64_t full = 0;
  int same = 1;
  for (int k = 0; k < o->reps; k++) {
    run_consumer(&w, w.pool, ring, fd, &cr);
    if (k == 0) first = cr;
    same &= cr.c.touch == first.c.touch;
    peak[k] = cr.secs;
    cpus[k] = cr.cpu;
    busy[k] = cr.cpu - cr.full_cpu;
    full += cr.full;
    run_consumer(&w, big, ring, -1, &cr);
    same &= cr.c.touch == first.c.touch;
    large[k] = cr.secs;
    busy1m[k] = cr.cpu - cr.full_cpu;
    full += cr.full;
    run_consumer(&w, 0, ring, -1, &cr); /* the same ring and consumer, no book */
    alone[k] = cr.secs;
    alone_cpu[k] = cr.cpu - cr.full_cpu;
  }
  size_t nn = w.count[M_NEW], resting = nn - w.ioc - w.fok - w.market;
  print_mix(&w, &first.c);
  printf("  harness mix check: IOC %.1f%% of new orders; cancel commands %.0f%% of the orders"
         " that could rest; replace commands %.0f%% of new orders\n",
         100.0 * (double)w.ioc / (double)nn,
         100.0 * (double)w.count[M_CANCEL] / (double)resting,
         100.0 * (double)w.count[M_REPLACE] / (double)nn);
  qsort(peak, (size_t)o->reps, sizeof peak[0], cmp_double);
  qsort(large, (size_t)o->reps, sizeof large[0], cmp_double);
  qsort(cpus, (size_t)o->reps, sizeof cpus[0], cmp_double);
  qsort(busy, (size_t)o->reps, sizeof busy[0], cmp_double);
  qsort(busy1m, (size_t)o->reps, sizeof busy1m[0], cmp_double);
  qsort(alone, (size_t)o->reps, sizeof alone[0], cmp_double);
  qsort(alone_cpu, (size_t)o->reps, sizeof alone_cpu[0], cmp_double);
  r->ring_only = (double)w.n / alone[o->reps / 2] / 1e6;
  r->ring_only_cpu = (double)w.n / alone_cpu[o->reps / 2] / 1e6;
  r->c_mmsgs = (double)w.n / peak[o->reps / 2] / 1e6;
  r->c_mmsgs_1m = (double)w.n / large[o->reps / 2] / 1e6;
  r->c_cpu_mmsgs = (double)w.n / cpus[o->reps / 2] / 1e6;
  printf("  consumer throughput: %.2f Mmsg/s with %u orders of capacity, %.2f Mmsg/s with %u"
         " (wall clock to the last report drained, median of %d each, alternated); on-CPU"
         " time of the book's thread only: %.2f Mmsg/s, and without its waits on a full ring"
         " %.2f\n",
         r->c_mmsgs, w.pool, r->c_mmsgs_1m, big, o->reps, r->c_cpu_mmsgs,
         (double)w.n / busy[o->reps / 2] / 1e6);
  /* On-CPU figures without the ring waits depend least on what else the
   * machine runs (the consumer's CPU is shared): the ones to compare
   * builds by on a busy host. */
  printf("  consumer on-CPU without ring waits: %.2f Mmsg/s with %u orders of capacity,"
         " %.2f with %u (1M/peak %.2fx)\n",
         (double)w.n / busy[o->reps / 2] / 1e6, w.pool, (double)w.n / busy1m[o->reps / 2] / 1e6,
         big, busy[o->reps / 2] / busy1m[o->reps / 2]);
  printf("  ring alone (no book, one acceptance report a message, same ring and consumer):"
         " %.2f Mmsg/s, producer on-CPU without ring waits %.2f Mmsg/s\n",
         r->ring_only, r->ring_only_cpu);
  run_latency(&w, &r->c_lat);
  printf("  latency per message, this mix with ids in random order, events counted on the"
         " book's thread: p50 %.0f ns, p99 %.0f ns, p99.9 %.0f ns, p99.99 %.0f ns, max %.0f ns\n",
         r->c_lat.p50, r->c_lat.p99, r->c_lat.p999, r->c_lat.p9999, r->c_lat.max);
  printf("  %" PRIu64 " events per run, reports checksum %016" PRIx64 " (%s in every run);"
         " ring full %" PRIu64 " times in all; book memory backed before the timed span"
         " (hg_book_prefault)\n",
         first.c.ev[1] + first.c.ev[2] + first.c.ev[3] + first.c.ev[4] + first.c.ev[5] +
             first.c.ev[6],
         first.c.touch, same ? "the same" : "DIFFERENT", full);
  if (first.pin_rc != 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2)
    printf("  # consumer not pinned to CPU %d (%s): it shares the book's CPU\n", CONSUMER_CPU,
           first.pin_rc ? strerror(first.pin_rc) : "one CPU online");
  r->c_misses = -1;
  if (!strcmp(sc->name, "deep_static")) {
    breakdown(sc, o, &w, r->c_cpu_mmsgs);
    if (fd >= 0) {
      double total = perf_read_misses(fd, why, sizeof why);
      if (total >= 0) r->c_misses = total / ((double)o->reps * (double)w.n);
      close(fd);
    }
    if (r->c_misses < 0)
      printf("# cache misses: unavailable (%s)\n", why);
    else
      printf("  cache misses (PERF_COUNT_HW_CACHE_MISSES, book thread, user space, command"
             " loop of the %d peak-capacity runs): %.2f per message\n",
             o->reps, r->c_misses);
  }
  printf("RESULT engine.%s_mmsgs_consumer %.2f Mmsg/s\n", sc->name, r->c_mmsgs);
  printf("RESULT engine.%s_mmsgs_consumer_cap1m %.2f Mmsg/s\n", sc->name, r->c_mmsgs_1m);
  if (r->c_misses >= 0)
    printf("RESULT engine.%s_cache_misses_per_msg %.2f misses/msg\n", sc->name, r->c_misses);
  free(w.m);
  return same ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* Demo                                                                     */

typedef struct demo {
  counts_t c;
  uint64_t seen;
  int printed, want;
  int64_t hi, lo;
} demo_t;

static void usd(char *buf, size_t len, int64_t ticks) {
  snprintf(buf, len, "%" PRId64 ".%03" PRId64, ticks / 1000, ticks % 1000);
}

static void demo_sink(void *ctx, const hg_book_event_t *ev) {
  demo_t *d = ctx;
  count_sink(&d->c, ev);
  d->seen++;
  if (ev->type == HG_EV_FILL) {
    if (d->hi == 0 || ev->price > d->hi) d->hi = ev->price;
    if (d->lo == 0 || ev->price < d->lo) d->lo = ev->price;
  }
  /* The first ten events; then, every 30000 events, the next one of the
   * type whose turn it is, so every kind of event shows up. */
  static const uint8_t turn[] = {HG_EV_FILL, HG_EV_CANCELLED, HG_EV_REPLACED, HG_EV_FILL,
                                 HG_EV_REJECTED, HG_EV_ACCEPTED};
  if (d->seen > 10) {
    if (d->seen % 30000 == 0 && d->printed < 24) d->want = 1;
    if (!d->want || ev->type != turn[d->printed % sizeof turn]) return;
    d->want = 0;
    if (d->printed++ == 0) printf("  ...\n");
  }
  char p[32];
  usd(p, sizeof p, ev->price);
  const char *sd = ev->side == HG_SIDE_BUY ? "buy " : "sell";
  printf("  %8" PRIu64 "  ", d->seen);
  switch (ev->type) {
  case HG_EV_ACCEPTED:
    printf("ACCEPTED  order %" PRIu64 " acct %u %s %" PRId64 " @ %s\n", ev->order_id,
           ev->account, sd, ev->qty, p);
    break;
  case HG_EV_REJECTED:
    printf("REJECTED  order %" PRIu64 " acct %u: %s\n", ev->order_id, ev->account,
           hg_reject_str(ev->reason));
    break;
  case HG_EV_FILL:
    printf("FILL      %s %" PRId64 " @ %s  taker %" PRIu64 " (acct %u) maker %" PRIu64
           " (acct %u)\n",
           sd, ev->qty, p, ev->order_id, ev->account, ev->maker_order_id, ev->maker_account);
    break;
  case HG_EV_CANCELLED:
    printf("CANCELLED order %" PRIu64 " acct %u %" PRId64 " @ %s: %s\n", ev->order_id,
           ev->account, ev->qty, p, hg_cancel_reason_str(ev->reason));
    break;
  case HG_EV_REPLACED:
    printf("REPLACED  order %" PRIu64 " -> %" PRId64 " @ %s (%s priority)\n", ev->order_id,
           ev->leaves, p, ev->priority_kept ? "keeps" : "loses");
    break;
  case HG_EV_LEVEL:
    printf("LEVEL     %s %s now %" PRId64 "\n", ev->side == HG_SIDE_BUY ? "bid" : "ask", p,
           ev->qty);
    break;
  default: printf("event type %u\n", ev->type); break;
  }
}

static void print_ladder(const hg_book_t *b, size_t after) {
  hg_book_level_t bids[5], asks[5];
  size_t nb = hg_book_depth(b, HG_SIDE_BUY, bids, 5);
  size_t na = hg_book_depth(b, HG_SIDE_SELL, asks, 5);
  char p[32];
  printf("\n  book after %zu messages (%u resting orders):\n", after, hg_book_order_count(b));
  printf("           price (USD/GPU-h)   contracts  orders\n");
  for (size_t k = na; k-- > 0;) {
    usd(p, sizeof p, asks[k].price);
    printf("    ask    %10s          %9" PRId64 "  %6u\n", p, asks[k].qty, asks[k].orders);
  }
  if (nb && na)
    printf("    ------ spread %" PRId64 " tick%s ------\n", asks[0].price - bids[0].price,
           asks[0].price - bids[0].price == 1 ? "" : "s");
  for (size_t k = 0; k < nb; k++) {
    usd(p, sizeof p, bids[k].price);
    printf("    bid    %10s          %9" PRId64 "  %6u\n", p, bids[k].qty, bids[k].orders);
  }
}

static int run_demo(const options_t *o) {
  const scenario_t *sc = &scenarios[1];
  workload_t w;
  printf("Hourglass matching engine demo: one seeded trading day of B200 GPU-hour futures\n");
  printf("(%s: %s)\n", sc->name, sc->what);
  if (generate(sc, &mix_day, o->messages, o->seed, &w) != 0) return 1;
  printf("instrument: ticks of 0.001 USD/GPU-hour, prices 0.001..100.000, start 3.000,"
         " band +-%u bps, max order %d contracts\n",
         w.band_bps, MAX_ORDER_QTY);
  printf("%zu messages (seed %" PRIu64 "): %zu new, %zu cancel, %zu replace, %zu mass cancel,"
         " %zu reference updates, end-of-day expiry; %d makers, %d takers\n",
         w.n, o->seed, w.count[M_NEW], w.count[M_CANCEL], w.count[M_REPLACE], w.count[M_MASS],
         w.count[M_REF], N_MAKERS, N_TAKERS);

  printf("\na sample of the event stream (event number, event):\n");
  demo_t d;
  memset(&d, 0, sizeof d);
  hg_book_t *b = make_book(&w, pool_size(&w), demo_sink, &d);
  for (size_t i = 0; i < w.n; i++) apply_hg(b, &w.m[i], msg_ts(i));
  hg_book_destroy(b);

  /* the ladders, on a quiet second pass so they are not lost in the events */
  counts_t c2;
  memset(&c2, 0, sizeof c2);
  b = make_book(&w, pool_size(&w), count_sink, &c2);
  size_t marks[4] = {w.n / 4, w.n / 2, 3 * w.n / 4, w.n - 1};
  size_t next = 0;
  for (size_t i = 0; i < w.n; i++) {
    if (next < 4 && i == marks[next]) {
      print_ladder(b, i);
      if (next == 3) printf("    (then the end-of-day expiry cancels every DAY order)\n");
      next++;
    }
    apply_hg(b, &w.m[i], msg_ts(i));
  }
  printf("  at the close: %u resting orders\n", hg_book_order_count(b));
  hg_book_destroy(b);

  char vw[32], hi[32], lo[32];
  /* VWAP in 1/10 of a tick, rounded: USD per GPU-hour with four decimals */
  uint64_t vwap10 = d.c.volume ? (d.c.notional * 10 + d.c.volume / 2) / d.c.volume : 0;
  snprintf(vw, sizeof vw, "%" PRIu64 ".%04" PRIu64, vwap10 / 10000, vwap10 % 10000);
  usd(hi, sizeof hi, d.hi);
  usd(lo, sizeof lo, d.lo);
  printf("\ntrades: %" PRIu64 " fills, %" PRIu64 " contracts, VWAP %s USD/GPU-hour"
         " (high %s, low %s)\n",
         d.c.ev[HG_EV_FILL], d.c.volume, vw, hi, lo);
  printf("events: %" PRIu64 " in all (%" PRIu64 " rejected, %" PRIu64 " cancelled)\n", d.seen,
         d.c.ev[HG_EV_REJECTED], d.c.ev[HG_EV_CANCELLED]);

  double secs[5], cpu;
  counts_t c;
  for (int k = 0; k < 5; k++) secs[k] = run_throughput(&w, &c, &cpu);
  qsort(secs, 5, sizeof secs[0], cmp_double);
  latency_t lat;
  run_latency(&w, &lat);
  refcmp_t rc;
  run_reference(&w, 100000, 1.0, &rc);
  printf("\nfigures (this machine, now):\n");
  printf("  throughput %.2f Mmsg/s (%.0f ns/msg, median of 5)\n", (double)w.n / secs[2] / 1e6,
         secs[2] * 1e9 / (double)w.n);
  printf("  latency per message p50 %.0f ns, p99 %.0f ns, p99.9 %.0f ns (timer cost %.0f ns"
         " subtracted)\n",
         lat.p50, lat.p99, lat.p999, timer_overhead_ticks * ns_per_tick);
  printf("  book memory %.1f MiB allocated; reference book %.1fx slower on the first %zu"
         " messages, events %s\n",
         (double)lat.book_alloc / 1048576.0, rc.ref_ns / rc.book_ns, rc.prefix,
         rc.same ? "identical" : "DIFFER");
  printf("\nfull benchmark: bench/run engine\n");
  free(w.m);
  return rc.same ? 0 : 1;
}

/* ------------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_engine [--quick] [--scenario NAME] [--messages N] [--seed S] [--demo]\n"
          "  --quick         200k messages per scenario (about ten seconds in all)\n"
          "  --scenario NAME run one scenario:");
  for (size_t i = 0; i < N_SCENARIOS; i++) fprintf(f, " %s", scenarios[i].name);
  fprintf(f, "\n  --messages N    messages per scenario (default 2000000)\n"
             "  --seed S        workload seed (default 1)\n"
             "  --demo          a short human-readable tour of one trading day\n");
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-') return -1;
  *out = v;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Spread orders through the exchange (settlement/CONTRACT.md 7.4)           */
/* ------------------------------------------------------------------------ */

typedef struct spread_count {
  uint64_t events, fills, rejects;
} spread_count_t;

static void spread_sink(void *ctx, const hg_exchange_event_t *ev) {
  spread_count_t *n = ctx;
  n->events++;
  if (ev->type == HG_XEV_BOOK && ev->book.type == HG_EV_FILL) n->fills++;
  if (ev->type == HG_XEV_BOOK && ev->book.type == HG_EV_REJECTED &&
      ev->book.reason != HG_REJ_UNKNOWN_ORDER)
    n->rejects++;
}

/* The same command stream (limit orders around a mid, two cancels in five)
 * applied to a plain contract and to the 27:25 spread of section 6.14, each
 * through hg_exchange_apply on a fresh exchange; returns Mmsg/s, and the
 * events per message in *evs. Margin, band and limits are off so that no
 * message is a risk reject: what is measured is the book and the booking
 * of fills (two legs, four leg events per spread fill). */
static double spread_run(int spread, size_t n, uint64_t seed, spread_count_t *cnt) {
  hg_clearing_config_t ccfg;
  hg_clearing_config_default(&ccfg);
  ccfg.band_bps = 0;
  ccfg.im_rate_bps = ccfg.im_rate_delivery_bps = 0;
  ccfg.position_limit = ccfg.position_limit_delivery = HG_CLR_QTY_MAX;
  ccfg.max_positions = 1024;
  hg_exchange_config_t cfg = {.max_instruments = 4, .max_accounts = 64, .max_book_orders = 1 << 16,
                              .clearing = &ccfg};
  spread_count_t events = {0};
  hg_exchange_t *ex = NULL;
  int crc = hg_exchange_create(&cfg, spread_sink, &events, &ex);
  if (crc != 0) {
    fprintf(stderr, "bench_engine: spread exchange: %d\n", crc);
    return 0;
  }
  hg_command_t *cmds = xcalloc(n + 64, sizeof *cmds);
  size_t k = 0;
  uint64_t seq = 0;
  hg_book_params_t bp = {.tick_size = 1000, .contract_unit = 1000, .min_price = 1,
                         .max_price = 100000, .max_order_qty = 30, .max_orders = 1 << 16,
                         .max_accounts = 64};
  const char *syms[3] = {"B200.A.2027-03", "TOK.OW671B.S.2027-03", "MARGIN.OW671B.S.2027-03"};
  for (uint32_t i = 0; i < 3; i++) {
    hg_command_t *c = &cmds[k++];
    c->seq = ++seq;
    c->type = HG_COMMAND_LIST_INSTRUMENT;
    snprintf(c->u.list.symbol, sizeof c->u.list.symbol, "%s", syms[i]);
    c->u.list.params = bp;
    c->u.list.params.instrument_id = i + 1;
    c->u.list.params.ref_price = i == 0 ? 3400 : i == 1 ? 4000 : 0;
    if (i == 2) {
      c->u.list.leg_token_id = 2;
      c->u.list.leg_gpu_id = 1;
      c->u.list.ratio_token = 27;
      c->u.list.ratio_gpu = 25;
    }
  }
  for (hg_account_t a = 1; a <= 32; a++) {
    hg_command_t *c = &cmds[k++];
    c->seq = ++seq;
    c->type = HG_COMMAND_ADD_ACCOUNT;
    c->u.add_account = (hg_cmd_add_account_t){a, a};
  }
  size_t setup = k;
  rng_t r = {seed};
  uint32_t id = spread ? 3 : 1;
  int64_t mid = spread ? 920 : 3400;
  uint64_t recent[64] = {0}; /* the last orders; a cancel takes the oldest */
  size_t nrecent = 0;
  for (size_t i = 0; i < n; i++) {
    hg_command_t *c = &cmds[k++];
    c->seq = ++seq;
    c->ts = msg_ts(i);
    uint64_t x = rng_next(&r);
    if (i % 5 >= 3) {
      uint64_t old = recent[nrecent % 64]; /* 64 orders back */
      c->type = HG_COMMAND_CANCEL;
      c->u.cancel = (hg_cmd_cancel_t){id, (hg_account_t)(1 + old % 32), old};
      continue;
    }
    c->type = HG_COMMAND_NEW_ORDER;
    int side = (x >> 8) & 1 ? HG_SIDE_SELL : HG_SIDE_BUY;
    int64_t off = (int64_t)((x >> 16) % 7) - 3;
    c->u.new_order = (hg_cmd_new_order_t){.instrument_id = id,
                                          .account = (hg_account_t)(1 + c->seq % 32),
                                          .client_order_id = c->seq,
                                          .price = side == HG_SIDE_BUY ? mid - off : mid + off,
                                          .qty = 1 + (int64_t)((x >> 32) % 3),
                                          .side = (uint8_t)side,
                                          .type = HG_ORD_LIMIT,
                                          .tif = HG_TIF_GTC,
                                          .stp = HG_STP_NONE};
    recent[nrecent++ % 64] = c->seq;
  }
  for (size_t i = 0; i < setup; i++) (void)hg_exchange_apply(ex, &cmds[i]);
  events = (spread_count_t){0};
  double t0 = now_s();
  for (size_t i = setup; i < k; i++) (void)hg_exchange_apply(ex, &cmds[i]);
  double t = now_s() - t0;
  hg_exchange_destroy(ex);
  free(cmds);
  *cnt = events;
  return t > 0 ? (double)n / t / 1e6 : 0;
}

static void run_spread_bench(const options_t *o) {
  size_t n = o->messages < 400000 ? o->messages : 400000;
  double best_s = 0, best_p = 0;
  spread_count_t cp, cs;
  for (int rep = 0; rep < 3; rep++) {
    double p = spread_run(0, n, o->seed + (uint64_t)rep, &cp);
    double s = spread_run(1, n, o->seed + (uint64_t)rep, &cs);
    if (p > best_p) best_p = p;
    if (s > best_s) best_s = s;
  }
  printf("\n== spread orders through the exchange: %zu messages, the same stream on a plain"
         " contract and on a 27:25 MARGIN spread (best of 3)\n", n);
  printf("  plain %.2f Mmsg/s (%" PRIu64 " fills, %" PRIu64 " events, %" PRIu64
         " rejects), spread %.2f Mmsg/s (%" PRIu64 " fills, %" PRIu64 " events, %" PRIu64
         " rejects)\n",
         best_p, cp.fills, cp.events, cp.rejects, best_s, cs.fills, cs.events, cs.rejects);
  printf("RESULT engine.spread_mmsgs %.2f Mmsg/s\n", best_s);
  printf("RESULT engine.spread_vs_plain_ratio %.2f x\n", best_s / best_p);
}

int main(int argc, char **argv) {
  options_t o = {.messages = 0, .seed = 1, .reps = 5, .ref_prefix = 200000, .ref_budget = 4.0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    uint64_t v;
    if (!strcmp(a, "--quick")) {
      o.quick = 1;
    } else if (!strcmp(a, "--demo")) {
      o.demo = 1;
    } else if (!strcmp(a, "--scenario") && i + 1 < argc) {
      o.scenario = argv[++i];
    } else if (!strcmp(a, "--messages") && i + 1 < argc && !parse_u64(argv[++i], &v) &&
               v >= 1000 && v < (1ull << 31)) {
      o.messages = v;
    } else if (!strcmp(a, "--seed") && i + 1 < argc && !parse_u64(argv[++i], &v)) {
      o.seed = v;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "bench_engine: bad argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  calibrate_timer();
  if (o.scenario && !strcmp(o.scenario, "spread")) { /* the spread bench alone */
    if (!o.messages) o.messages = 400000;
    run_spread_bench(&o);
    return 0;
  }
  if (o.demo) {
    if (!o.messages) o.messages = 300000;
    return run_demo(&o);
  }
  if (o.quick) {
    o.reps = 3;
    o.ref_prefix = 50000;
    o.ref_budget = 0.5;
  }
  if (!o.messages) o.messages = o.quick ? 200000 : 2000000;

  printf("bench_engine: order book throughput and latency, %zu messages per scenario%s\n",
         o.messages, o.quick ? " (--quick)" : "");
  printf("timer: %s, %.4f ns/tick, overhead %.1f ns per timed region (subtracted)\n",
         HAVE_TSC ? "TSC (lfence+rdtsc) calibrated against CLOCK_MONOTONIC" : "CLOCK_MONOTONIC",
         ns_per_tick, timer_overhead_ticks * ns_per_tick);

  hg_spsc_ring_t *ring = NULL;
  int rc = hg_spsc_ring_create_fixed(RING_SLOTS, sizeof(report_t), &ring);
  if (rc != 0) {
    fprintf(stderr, "bench_engine: hg_spsc_ring_create_fixed failed: %d\n", rc);
    return 1;
  }
  cpu_set_t cpus;
  int have_mask = pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0;
  result_t res[N_SCENARIOS];
  size_t nres = 0;
  int bad = 0;
  for (size_t s = 0; s < N_SCENARIOS; s++) {
    if (o.scenario && strcmp(o.scenario, scenarios[s].name)) continue;
    result_t *r = &res[nres++];
    bad |= run_scenario(&scenarios[s], &o, r);
    rc = pin_self(BOOK_CPU);
    if (rc != 0) printf("  # book thread not pinned to CPU %d: %s\n", BOOK_CPU, strerror(rc));
    bad |= run_scenario_consumer(&scenarios[s], &o, ring, r);
    if (have_mask) (void)pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  }
  hg_spsc_ring_destroy(ring);
  if (!o.scenario) run_spread_bench(&o);
  if (!nres) {
    fprintf(stderr, "bench_engine: no scenario named '%s'\n", o.scenario);
    usage(stderr);
    return 2;
  }

  size_t cw = 0, cw1m = 0;
  printf("\n== summary, consumer mode (headline): harness mix, ids in random order, events"
         " to CPU %d through a ring\n", CONSUMER_CPU);
  printf("  %-14s %12s %12s %9s %12s\n", "scenario", "peak Mmsg/s", "1M Mmsg/s", "1M/peak",
         "cpu-only");
  for (size_t k = 0; k < nres; k++) {
    const result_t *r = &res[k];
    printf("  %-14s %12.2f %12.2f %8.2fx %12.2f\n", r->name, r->c_mmsgs, r->c_mmsgs_1m,
           r->c_mmsgs_1m / r->c_mmsgs, r->c_cpu_mmsgs);
    if (r->c_mmsgs < res[cw].c_mmsgs) cw = k;
    if (r->c_mmsgs_1m < res[cw1m].c_mmsgs_1m) cw1m = k;
  }
  printf("RESULT engine.worst_mmsgs_consumer %.2f Mmsg/s\n", res[cw].c_mmsgs);
  printf("RESULT engine.worst_mmsgs_consumer_cap1m %.2f Mmsg/s\n", res[cw1m].c_mmsgs_1m);
  printf("RESULT engine.cap1m_vs_peak_ratio %.2f x\n", res[cw1m].c_mmsgs_1m / res[cw].c_mmsgs);
  /* The ring's own rate beside the book's: what the consumer could drain. */
  printf("RESULT engine.ring_only_mmsgs %.2f Mmsg/s\n", res[0].ring_only);

  size_t worst = 0;
  double worst_p99 = 0, worst_p9999 = 0, worst_ratio = 0;
  printf("\n== summary, ids in order, events kept on the book's thread (targets: worst >= 10"
         " Mmsg/s, p99 < 1000 ns)\n");
  printf("  %-14s %9s %8s %9s %8s %8s %9s %9s\n", "scenario", "Mmsg/s", "ns/msg", "cpu-only",
         "p50 ns", "p99 ns", "p99.9 ns", "vs ref");
  for (size_t k = 0; k < nres; k++) {
    const result_t *r = &res[k];
    double ratio = r->ref.ref_ns / r->ref.book_ns;
    printf("  %-14s %9.2f %8.1f %9.2f %8.0f %8.0f %9.0f %8.1fx\n", r->name, r->mmsgs,
           r->ns_msg, r->cpu_mmsgs, r->lat.p50, r->lat.p99, r->lat.p999, ratio);
    if (r->mmsgs < res[worst].mmsgs) worst = k;
    if (r->lat.p99 > worst_p99) worst_p99 = r->lat.p99;
    if (r->lat.p9999 > worst_p9999) worst_p9999 = r->lat.p9999;
    if (r->c_lat.p9999 > worst_p9999) worst_p9999 = r->c_lat.p9999;
    if (k == 0 || ratio < worst_ratio) worst_ratio = ratio;
  }
  printf("  worst scenario: %s, %.2f Mmsg/s (%s); worst p99 %.0f ns (%s)\n", res[worst].name,
         res[worst].mmsgs, res[worst].mmsgs >= 10.0 ? "meets target" : "BELOW target",
         worst_p99, worst_p99 < 1000.0 ? "meets target" : "ABOVE target");
  printf("RESULT engine.worst_mmsgs %.2f Mmsg/s\n", res[worst].mmsgs);
  printf("RESULT engine.worst_p99_ns %.0f ns\n", worst_p99);
  /* Of both mixes (ids in order, ids in random order): no order's tail. */
  printf("RESULT engine.worst_p9999_ns %.0f ns\n", worst_p9999);
  printf("RESULT engine.ref_speed_ratio %.1f x\n", worst_ratio);
  if (bad) printf("bench_engine: the book and the reference book DISAGREE (see above)\n");
  return bad ? 1 : 0;
}
