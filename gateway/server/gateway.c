/*
 * The gateway server. One libuv loop thread owns everything below; other
 * threads only call hg_gateway_notify() (an atomic flag and uv_async_send)
 * and read the counters.
 *
 * Structures, all allocated at create/attach and never per message:
 *  - conns: a pool of connections (max_sessions + max_unauthenticated). Each
 *    has an input buffer of max_frame + 16 bytes (the frame header is
 *    checked before the body is read, so a frame never needs more), two
 *    output buffers of out_hard_cap bytes (one being written by libuv, one
 *    being filled), and the pure session state (session.c).
 *  - peers: unauthenticated connections per source address (open
 *    addressing, linear probing, keyed by the 16-byte IPv6 form of the
 *    address, at least twice as many slots as max_unauthenticated, so it
 *    never fills), and refusals: a few bare TCP handles through which a
 *    connection over the global limit is accepted, sent its Terminate and
 *    closed (one over its address's limit holds a connection slot for
 *    that). See "Admission" in hourglass/gateway.h.
 *  - streams: one per API key that has logged in since start, and one per
 *    account that held live orders at attach (its home key, opened by
 *    hg_gateway_start before any output is drained). A stream is
 *    the key's recoverable server -> client sequence: it survives
 *    reconnects, holds the retransmission log (a byte ring of encoded
 *    frames with an index ring by seq), the key's quote and market-maker
 *    protection state and the list of its live orders. Frames for a key
 *    with no connection are still sequenced and logged. Every sequenced
 *    frame also goes to the outbound journal (outlog.c), written once per
 *    flush before any socket write; a retransmission older than the byte
 *    ring is read back from it, and it restores seqs after a restart.
 *  - pending: a ring of commands in flight, indexed by the origin tag given
 *    to hg_pipeline_submit(). The pipeline answers our commands in submit
 *    order (one producer thread, a FIFO sequencer), so the DONE markers
 *    retire entries from the tail.
 *  - mirror: live orders (open-addressing hash by order id -> pool entry,
 *    linked into their stream), instruments with their price levels
 *    (sorted arrays, one slot per possible resting order, so they cannot
 *    overflow), accounts and positions. Maintained from the event stream;
 *    queries read it, never the engine.
 *  - ledger: a copy of the clearing ledger for statements (an array in
 *    ledger order, each account's entries chained through ledger_next),
 *    seeded at attach and appended from cash and settlement events.
 *
 * Routing: an order's events go to the stream that entered it (seeded and
 * foreign orders: the account's stream, its home key's when it held orders
 * at attach, else its first to log in), a reject to the
 * stream that sent the request, fills to both parties separately, drop
 * copies to the subscribed risk viewers of the account's firm, and public
 * market data (no account, no order id) to subscribers.
 */
#include "hourglass/gateway.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "hourglass/error.h"
#include "hourglass/index.h"
#include "hourglass/store.h"
#include "hourglass/thread.h"
#include "hourglass/wire.h"
#include "outlog.h"
#include "prefault.h"
#include "session.h"

/* Short names for the generated protobuf-c identifiers. */
typedef Hourglass__V1__Envelope env_t;
#define B(x) HOURGLASS__V1__ENVELOPE__BODY_##x
#define TERM(x) HOURGLASS__V1__TERMINATE_CODE__TERM_##x
#define LREJ(x) HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_##x
#define REJ(x) HOURGLASS__V1__REJECT_REASON__REJ_##x
#define EXEC(x) HOURGLASS__V1__EXEC_TYPE__EXEC_##x
#define REQ(x) HOURGLASS__V1__REQUEST_KIND__REQ_##x
#define ISTATE(x) HOURGLASS__V1__INSTRUMENT_STATE__STATE_##x

#define ORIGIN_TAG (0x47ull << 56) /* 'G': origins of our own submissions */
#define ORIGIN_MASK ((1ull << 56) - 1)
#define NONE32 UINT32_MAX
#define QUOTE_CLORDID_BIT (1ull << 63)
#define MAX_QUOTE_ENTRIES 64
#define MAX_MMP_GROUPS 8
#define MAX_MD_DEPTH 50
#define SCRATCH_SIZE (1u << 20)

/* ------------------------------------------------------------------ types */

typedef enum pkind {
  P_NEW = 1,
  P_CANCEL,
  P_REPLACE,
  P_MASS_CANCEL,
  P_QUOTE,      /* one side of a mass quote entry */
  P_OPERATOR,   /* list, delist, halt, resume, end of session, account, cash */
  P_INTERNAL,   /* cancel-on-disconnect, quote pulls: no request to answer */
  P_SETTLE      /* settlement command (one part of a request): SettlementResult */
} pkind_t;

typedef struct pending {
  uint64_t origin;    /* 0: free */
  uint64_t ref_seq;   /* client seq of the request */
  uint32_t stream;    /* NONE32: none */
  uint32_t conn_gen;  /* generation of the connection that sent it */
  uint32_t kind;      /* pkind_t */
  uint32_t quote_group;
  uint32_t quote_gen;
  uint8_t cod;
  uint8_t replied;
  uint8_t done;
  uint32_t part, parts;  /* P_SETTLE: this command's index among its request's */
  uint32_t refused;      /* P_SETTLE, last part: RejectReason for parts never submitted */
  hg_command_t cmd;
} pending_t;

typedef struct order {
  uint64_t order_id;       /* 0: free */
  uint64_t client_order_id;
  int64_t price, qty, leaves;
  uint32_t instrument_id;
  uint32_t account;
  uint32_t stream;         /* NONE32: not entered through a stream we know */
  uint32_t conn_gen;
  uint32_t quote_group;    /* 0: not a quote */
  uint32_t prev, next;     /* the stream's list; NONE32 ends */
  uint8_t side, cod, cancel_sent, pad_;
} order_t;

typedef struct level {
  int64_t price;
  int64_t qty;
} level_t;

typedef struct instr {
  uint32_t id;             /* 0: free slot */
  uint32_t state;          /* InstrumentState */
  char symbol[HG_SYMBOL_MAX + 1];
  hg_book_params_t params;
  /* The clearing's reference price and inclusive band (ticks; 0: none), as
   * the engine last published them (listing, fixings, daily cycles). */
  int64_t ref_price, band_low, band_high;
  uint64_t md_seq;
  level_t *lv[2];          /* [side], best first; capacity cap_lv */
  uint32_t n_lv[2];
  uint32_t cap_lv;
  uint32_t *subs;          /* conn indexes; capacity = number of conns */
  uint32_t n_subs;
} instr_t;

typedef struct account {
  uint32_t id;             /* 0: free */
  uint32_t firm;
  int64_t cash;
  uint32_t stream;         /* first stream of this account; NONE32 */
  uint64_t lhead, ltail;   /* its ledger entries (index + 1 in gw->ledger; 0: none) */
  /* Attach to start only: the account held live orders at attach, and the
   * key whose stream hg_gateway_start() opens for their reports (0: none). */
  uint8_t recovered;
  uint64_t home_key;
} account_t;

typedef struct position {
  uint64_t key;            /* account << 32 | instrument; 0: free */
  int64_t bought, sold;
} position_t;

typedef struct mmp {
  uint32_t group;          /* 0: free */
  uint32_t tripped;
  int64_t limit;
  uint64_t window_ns;
  uint64_t window_start;
  int64_t filled;
} mmp_t;

typedef struct logent {
  uint64_t pos;            /* byte position (monotonic) of the frame in the ring */
  uint32_t len;
} logent_t;

typedef struct stream {
  uint64_t key_id;         /* 0: free */
  uint32_t role, account, firm;
  uint32_t conn;           /* conn index + 1; 0: none */
  uint32_t conn_gen;
  uint64_t next_seq;       /* seq of the next frame */
  /* retransmission log: frames [first_seq, next_seq) */
  uint8_t *log;
  uint64_t log_head;       /* bytes ever written */
  logent_t *ent;
  uint64_t first_seq;
  uint32_t n_ent;          /* entries held, the last n_ent before next_seq */
  uint32_t orders;         /* head of the live order list; NONE32 */
  uint32_t *quote_gen;     /* [instrument slot * 2 + side] */
  uint64_t next_quote_id;
  mmp_t mmp[MAX_MMP_GROUPS];
  uint32_t cod_retry;      /* cancel-on-disconnect cancels still to submit */
  uint32_t cod_gen;        /* ... for the connection of this generation */
} stream_t;

typedef struct conn {
  uv_tcp_t tcp;            /* first: the handle's data points back to us */
  uv_write_t wreq;
  struct hg_gateway *gw;
  uint32_t idx;
  uint32_t gen;
  uint8_t used, closing, reading, writing, dirty, drop_copy, logged_in, cod;
  uint8_t unauth;          /* counted in n_unauth and in its peer's entry */
  uint8_t peer[16];        /* source address, IPv6 form (IPv4-mapped for IPv4) */
  uint32_t stream;         /* NONE32 until login */
  hg_session_t sess;
  hg_throttle_t thr;
  uint8_t *in;
  size_t in_len;
  uint8_t *out[2];
  size_t out_len[2];
  int fill;                /* buffer being filled */
  uint64_t closing_since;
  uint64_t rt_next, rt_end;/* retransmission being served */
  uint32_t n_md;           /* instruments subscribed */
  uint32_t dirty_next;
} conn_t;

/* Unauthenticated connections from one source address. */
typedef struct peer_count {
  uint8_t addr[16];
  uint32_t n;              /* 0: free slot */
} peer_count_t;

/* A connection refused over the global limit, between accept and close. */
typedef struct refusal {
  uv_tcp_t tcp;            /* data points back to us */
  struct hg_gateway *gw;
  uint32_t next;           /* free list; NONE32 ends */
} refusal_t;

#define N_REFUSALS 32      /* refusals closing at once; beyond, accepting waits */

typedef struct u64map {
  uint64_t *keys;          /* 0: empty */
  uint32_t *vals;
  uint32_t mask;
} u64map_t;

/* What a settlement request's events said, gathered until its last command
 * is done. One suffices: the pipeline answers in submit order and a
 * request's commands are submitted back to back, so their events arrive
 * together. */
#define SACC_MISSING 31
#define SACC_LISTED 16
typedef struct settle_acc {
  uint64_t owner;          /* origin of the request's first command; 0: none */
  uint64_t engine_seq;
  uint32_t command, reason, samples_accepted, samples_staged, samples_discarded;
  int32_t error, day;
  int64_t fixing_value;
  uint8_t fixing_tier, fixing_status, fixing_kind, fixing_outcome, has_day, has_fixing;
  uint32_t fixing_inputs;
  uint32_t reject_from, reject_to; /* samples of the first refused part */
  Hourglass__V1__ContractDsp *dsp; /* cfg.max_instruments entries */
  Hourglass__V1__ContractDsp **dspp; /* pointers to them, for the reply */
  uint32_t n_dsp, dsp_total;
  int64_t vm_sum, vm_paid, vm_received, day_orders;
  uint32_t vm_entries;
  uint8_t cycle, expired;
  uint32_t instrument_id, positions_closed;
  int64_t fsp, final_sum, orders_cancelled;
  int32_t missing_day[SACC_MISSING];
  uint32_t missing_status[SACC_MISSING];
  uint32_t n_missing;
  uint32_t listed[SACC_LISTED];
  uint32_t n_listed;
} settle_acc_t;

struct hg_gateway {
  hg_gateway_config_t cfg;
  char host[64];
  hg_store_t *store;
  hg_outlog_t *outlog;     /* owned; loop thread once started */
  hg_pipeline_t *pipe;
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t wake;
  uv_async_t stop_async;
  uv_timer_t timer;
  pthread_t thread;
  int attached, started, stopped, loop_open;
  int stopping;            /* loop thread: on_stop is closing the sessions */
  uint64_t epoch;          /* this start's exchange epoch (LoginAck.epoch); set at start */
  /* Loop thread: inside on_read, submits defer the engine's wake-up to one
   * hg_pipeline_kick() at the end of the read (kick_due says one is owed),
   * so the frames of one read cost one engine wake-up, not one each. */
  int in_read, kick_due;
  uint16_t port;
  atomic_int live;         /* notify may call uv_async_send */
  atomic_int notifying;    /* notifies in progress */

  conn_t *conns;
  uint32_t n_conns;
  uint32_t free_conn;      /* free list through dirty_next; NONE32 */
  uint32_t dirty_head;
  uint32_t n_sessions, n_unauth;
  uint32_t gen_counter;    /* connection generations, unique across slots */
  peer_count_t *peers;     /* unauthenticated connections per address */
  uint32_t peers_mask;
  refusal_t *refusals;     /* N_REFUSALS */
  uint32_t free_refusal;   /* free list; NONE32 */
  int accept_waiting;      /* a connection was left unaccepted: the listener waits */
  uint8_t busy_frame[96];  /* Terminate(TERM_SERVER_BUSY), encoded at create */
  size_t busy_len;
  uint32_t *drop_list;     /* conn indexes of subscribed risk viewers */
  uint32_t n_drop;

  stream_t *streams;
  u64map_t stream_map;     /* key id -> stream */
  uint32_t n_streams;

  pending_t *pend;
  uint64_t pend_next;      /* next origin counter */
  uint64_t pend_tail;      /* oldest in flight */

  order_t *orders;
  u64map_t order_map;
  uint32_t free_order;     /* free list through next */
  uint32_t n_orders;
  uint32_t orders_reserved;/* new orders in flight (may each need a slot) */
  /* Session-scoped orders the recovered books held at attach: their sessions
   * died with the previous process, so hg_gateway_start() journals one
   * SESSIONS_ENDED for them. Owner thread until start. */
  uint64_t scoped_at_attach;

  instr_t *instr;
  account_t *accounts;
  u64map_t account_map;
  position_t *positions;
  u64map_t position_map;
  uint32_t n_positions;

  settle_acc_t sacc;       /* the settlement request whose events are arriving */

  /* The gateway's copy of the clearing ledger (statements): seeded at attach,
   * appended from the cash, VM and final-settlement events. Owned by the
   * loop thread; grows by doubling, only on those (settlement) events. */
  hg_ledger_entry_t *ledger;
  uint64_t *ledger_next;   /* per entry: the account's next entry, index + 1; 0 ends */
  uint64_t n_ledger, cap_ledger;
  uint64_t cycle_tod_ns;   /* time of day the daily cycle stamps VM entries with */
  int ledger_lost;         /* an entry could not be kept: statements unavailable */

  hg_wire_arena_t arena;
  uint8_t *arena_buf;
  uint8_t *scratch;        /* encode buffer */
  hg_pipe_out_t drain[256];

  _Atomic uint64_t st_connections, st_logins, st_login_rejects, st_terminations, st_frames_in,
      st_frames_out, st_submitted, st_busy, st_throttled, st_refused;
  _Atomic uint32_t st_sessions, st_unauth;
};

/* Counters are read by other threads for monitoring only and order nothing
 * else: relaxed is enough (for both macros). */
#define STAT_ADD(gw, f) atomic_fetch_add_explicit(&(gw)->f, 1, memory_order_relaxed)
#define STAT_SET(gw, f, v) atomic_store_explicit(&(gw)->f, (v), memory_order_relaxed)

static void gw_log(hg_gateway_t *gw, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void gw_log(hg_gateway_t *gw, int level, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (gw->cfg.log != NULL) {
    gw->cfg.log(gw->cfg.log_ctx, level, buf);
  } else {
    fprintf(stderr, "gateway: %s\n", buf);
  }
}

static uint64_t now_mono(void) { return uv_hrtime(); }

static uint64_t now_wall(hg_gateway_t *gw) {
  if (gw->cfg.wall_clock != NULL) return gw->cfg.wall_clock(gw->cfg.clock_ctx);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------- u64 -> u32 */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static int map_init(u64map_t *m, uint32_t entries) {
  uint32_t cap = 16;
  while (cap < entries * 2u && cap < (1u << 30)) cap <<= 1;
  m->keys = calloc(cap, sizeof *m->keys);
  m->vals = calloc(cap, sizeof *m->vals);
  m->mask = cap - 1;
  if (m->keys == NULL || m->vals == NULL) return -ENOMEM;
  hg_prefault(m->keys, cap * sizeof *m->keys); /* probes land anywhere */
  hg_prefault(m->vals, cap * sizeof *m->vals);
  return 0;
}

static void map_free(u64map_t *m) {
  free(m->keys);
  free(m->vals);
}

static uint32_t map_get(const u64map_t *m, uint64_t k) {
  for (uint32_t i = (uint32_t)mix64(k) & m->mask;; i = (i + 1) & m->mask) {
    if (m->keys[i] == k) return m->vals[i];
    if (m->keys[i] == 0) return NONE32;
  }
}

/* The caller keeps the load under one half (tables are sized for it). */
static void map_put(u64map_t *m, uint64_t k, uint32_t v) {
  uint32_t i = (uint32_t)mix64(k) & m->mask;
  while (m->keys[i] != 0 && m->keys[i] != k) i = (i + 1) & m->mask;
  m->keys[i] = k;
  m->vals[i] = v;
}

/* Linear probing delete with backward shift, so no tombstones build up. */
static void map_del(u64map_t *m, uint64_t k) {
  uint32_t i = (uint32_t)mix64(k) & m->mask;
  while (m->keys[i] != k) {
    if (m->keys[i] == 0) return;
    i = (i + 1) & m->mask;
  }
  for (;;) {
    m->keys[i] = 0;
    uint32_t j = i;
    for (;;) {
      j = (j + 1) & m->mask;
      if (m->keys[j] == 0) return;
      uint32_t home = (uint32_t)mix64(m->keys[j]) & m->mask;
      /* Move j back to i unless home lies cyclically in (i, j]. */
      bool stay = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stay) break;
    }
    m->keys[i] = m->keys[j];
    m->vals[i] = m->vals[j];
    i = j;
  }
}

/* ------------------------------------------------------------ instruments */

static instr_t *instr_find(hg_gateway_t *gw, uint32_t id) {
  if (id == 0) return NULL;
  for (uint32_t i = 0; i < gw->cfg.max_instruments; i++)
    if (gw->instr[i].id == id) return &gw->instr[i];
  return NULL;
}

static uint32_t instr_slot(hg_gateway_t *gw, const instr_t *in) {
  return (uint32_t)(in - gw->instr);
}

static void instr_reference(instr_t *in, int64_t ref, int64_t lo, int64_t hi) {
  in->ref_price = ref;
  in->band_low = lo;
  in->band_high = hi;
}

/* Adds an instrument (listing or seed); its level arrays hold one level per
 * possible resting order. NULL when the table is full or memory is short. */
static instr_t *instr_add(hg_gateway_t *gw, uint32_t id, const char *symbol,
                          const hg_book_params_t *params, uint32_t state) {
  instr_t *in = instr_find(gw, id);
  if (in == NULL) {
    for (uint32_t i = 0; i < gw->cfg.max_instruments && in == NULL; i++)
      if (gw->instr[i].id == 0) in = &gw->instr[i];
    if (in == NULL) return NULL;
  }
  uint32_t cap = params->max_orders > 0 ? params->max_orders : 1;
  if (in->cap_lv < cap) {
    level_t *b = calloc(cap, sizeof *b), *a = calloc(cap, sizeof *a);
    if (b == NULL || a == NULL) {
      free(b);
      free(a);
      return NULL;
    }
    free(in->lv[0]);
    free(in->lv[1]);
    in->lv[0] = b;
    in->lv[1] = a;
    in->cap_lv = cap;
  }
  in->id = id;
  in->state = state;
  snprintf(in->symbol, sizeof in->symbol, "%s", symbol);
  in->params = *params;
  in->n_lv[0] = in->n_lv[1] = 0;
  in->n_subs = 0;
  /* md_seq continues across a relisting of the same id so subscribers of the
   * old one see a jump rather than a repeat. */
  uint32_t slot = instr_slot(gw, in);
  for (uint32_t s = 0; s < gw->cfg.max_streams; s++)
    if (gw->streams[s].quote_gen != NULL) {
      gw->streams[s].quote_gen[slot * 2] = 0;
      gw->streams[s].quote_gen[slot * 2 + 1] = 0;
    }
  return in;
}

/* Sets the aggregate at (side, price); qty 0 removes the level. Bids are
 * kept descending, asks ascending, so index 0 is the best. */
static void level_set(instr_t *in, int side, int64_t price, int64_t qty) {
  level_t *lv = in->lv[side];
  uint32_t n = in->n_lv[side];
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    bool before = side == HG_SIDE_BUY ? lv[mid].price > price : lv[mid].price < price;
    if (before) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  bool found = lo < n && lv[lo].price == price;
  if (qty == 0) {
    if (found) {
      memmove(&lv[lo], &lv[lo + 1], (n - lo - 1) * sizeof *lv);
      in->n_lv[side] = n - 1;
    }
  } else if (found) {
    lv[lo].qty = qty;
  } else if (n < in->cap_lv) {
    memmove(&lv[lo + 1], &lv[lo], (n - lo) * sizeof *lv);
    lv[lo].price = price;
    lv[lo].qty = qty;
    in->n_lv[side] = n + 1;
  }
}

/* ----------------------------------------------------------------- orders */

static order_t *order_find(hg_gateway_t *gw, uint64_t id) {
  uint32_t i = map_get(&gw->order_map, id);
  return i == NONE32 ? NULL : &gw->orders[i];
}

static void order_link(hg_gateway_t *gw, uint32_t i) {
  order_t *o = &gw->orders[i];
  o->prev = NONE32;
  o->next = NONE32;
  if (o->stream == NONE32) return;
  stream_t *st = &gw->streams[o->stream];
  o->next = st->orders;
  if (st->orders != NONE32) gw->orders[st->orders].prev = i;
  st->orders = i;
}

static order_t *order_add(hg_gateway_t *gw, const hg_book_event_t *be, uint32_t stream) {
  if (gw->free_order == NONE32) return NULL;
  uint32_t i = gw->free_order;
  order_t *o = &gw->orders[i];
  gw->free_order = o->next;
  memset(o, 0, sizeof *o);
  o->order_id = be->order_id;
  o->client_order_id = be->client_order_id;
  o->price = be->price;
  o->qty = be->qty;
  o->leaves = be->leaves;
  o->instrument_id = be->instrument_id;
  o->account = be->account;
  o->side = be->side;
  o->stream = stream;
  order_link(gw, i);
  map_put(&gw->order_map, o->order_id, i);
  gw->n_orders++;
  return o;
}

static void order_remove(hg_gateway_t *gw, order_t *o) {
  uint32_t i = (uint32_t)(o - gw->orders);
  if (o->stream != NONE32) {
    stream_t *st = &gw->streams[o->stream];
    if (o->prev != NONE32) {
      gw->orders[o->prev].next = o->next;
    } else {
      st->orders = o->next;
    }
    if (o->next != NONE32) gw->orders[o->next].prev = o->prev;
  }
  map_del(&gw->order_map, o->order_id);
  o->order_id = 0;
  o->next = gw->free_order;
  gw->free_order = i;
  gw->n_orders--;
}

/* ------------------------------------------------------ accounts, positions */

static account_t *account_find(hg_gateway_t *gw, uint32_t id) {
  uint32_t i = map_get(&gw->account_map, id);
  return i == NONE32 ? NULL : &gw->accounts[i];
}

static account_t *account_add(hg_gateway_t *gw, uint32_t id, uint32_t firm, int64_t cash) {
  account_t *a = account_find(gw, id);
  if (a == NULL) {
    uint32_t i;
    for (i = 0; i < gw->cfg.max_accounts; i++)
      if (gw->accounts[i].id == 0) break;
    if (i == gw->cfg.max_accounts) return NULL;
    a = &gw->accounts[i];
    a->stream = NONE32;
    map_put(&gw->account_map, id, i);
  }
  a->id = id;
  a->firm = firm;
  a->cash = cash;
  return a;
}

static void position_add(hg_gateway_t *gw, uint32_t account, uint32_t instrument, int side,
                         int64_t qty) {
  uint64_t k = (uint64_t)account << 32 | instrument;
  uint32_t i = map_get(&gw->position_map, k);
  if (i == NONE32) {
    if (gw->n_positions == gw->cfg.max_positions) {
      gw_log(gw, HG_LOG_WARN, "position table full (%u); positions incomplete",
             gw->cfg.max_positions);
      return;
    }
    i = gw->n_positions++;
    gw->positions[i].key = k;
    map_put(&gw->position_map, k, i);
  }
  if (side == HG_SIDE_BUY) {
    gw->positions[i].bought += qty;
  } else {
    gw->positions[i].sold += qty;
  }
}

/* ------------------------------------------------------------- connections */

static void conn_close(conn_t *c);
static void conn_flush(conn_t *c);
static void rt_pump(conn_t *c);

static size_t conn_queued(const conn_t *c) { return c->out_len[0] + c->out_len[1]; }

static void mark_dirty(conn_t *c) {
  if (c->dirty) return;
  c->dirty = 1;
  c->dirty_next = c->gw->dirty_head;
  c->gw->dirty_head = c->idx;
}

static void flush_dirty(hg_gateway_t *gw) {
  hg_outlog_flush(gw->outlog); /* first: a frame on the wire is in the journal */
  while (gw->dirty_head != NONE32) {
    conn_t *c = &gw->conns[gw->dirty_head];
    gw->dirty_head = c->dirty_next;
    c->dirty = 0;
    if (c->used) conn_flush(c);
  }
}

/* Queues raw frame bytes. Past the hard cap the session ends (slow
 * consumer); above the high-water mark reading pauses until it drains. */
static bool conn_send_raw(conn_t *c, const uint8_t *bytes, size_t len) {
  hg_gateway_t *gw = c->gw;
  if (!c->used || c->closing) return false;
  if (conn_queued(c) + len > gw->cfg.out_hard_cap) {
    gw_log(gw, HG_LOG_WARN, "connection %u: slow consumer, outbound queue at %zu bytes",
           c->idx, conn_queued(c));
    STAT_ADD(gw, st_terminations);
    conn_close(c);
    return false;
  }
  memcpy(c->out[c->fill] + c->out_len[c->fill], bytes, len);
  c->out_len[c->fill] += len;
  STAT_ADD(gw, st_frames_out);
  hg_sess_sent(&c->sess, now_mono());
  mark_dirty(c);
  if (c->reading && conn_queued(c) > gw->cfg.out_high_water) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
  return true;
}

/* Encodes env into the scratch buffer; returns its length or 0. */
static size_t encode(hg_gateway_t *gw, const env_t *env) {
  size_t len = 0;
  int rc = hg_wire_encode(env, gw->scratch, SCRATCH_SIZE, &len);
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "cannot encode a message (body %d): %s", (int)env->body_case,
           hg_strerror(rc));
    return 0;
  }
  return len;
}

/* Unsequenced message to one connection (session messages, market data). */
static void conn_send(conn_t *c, const env_t *env) {
  if (!c->used || c->closing) return;
  size_t n = encode(c->gw, env);
  if (n > 0) conn_send_raw(c, c->gw->scratch, n);
}

/* Ends the session with a Terminate, then closes once it is written. */
static void conn_terminate(conn_t *c, uint32_t code, const char *text) {
  if (!c->used || c->closing) return;
  Hourglass__V1__Terminate t = HOURGLASS__V1__TERMINATE__INIT;
  t.code = code;
  t.text = (char *)text;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(TERMINATE);
  env.terminate = &t;
  conn_send(c, &env);
  if (code != TERM(LOGOUT)) STAT_ADD(c->gw, st_terminations);
  if (!c->used) return; /* the send itself closed it */
  c->closing = 1;
  c->closing_since = now_mono();
  if (c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
  if (conn_queued(c) == 0) conn_close(c);
}

/* ----------------------------------------------------------------- streams */

static stream_t *conn_stream(conn_t *c) {
  return c->stream == NONE32 ? NULL : &c->gw->streams[c->stream];
}

static conn_t *stream_conn(hg_gateway_t *gw, stream_t *st) {
  if (st->conn == 0) return NULL;
  conn_t *c = &gw->conns[st->conn - 1];
  return c->used && !c->closing ? c : NULL;
}

/* Appends a frame to the stream's retransmission log, evicting the oldest
 * frames until it fits. */
static void log_append(hg_gateway_t *gw, stream_t *st, const uint8_t *f, size_t len) {
  uint64_t cap = gw->cfg.retransmit_bytes;
  uint32_t ecap = gw->cfg.retransmit_frames;
  if (len > cap) { /* cannot be kept: the log restarts after it */
    st->n_ent = 0;
    st->first_seq = st->next_seq;
    return;
  }
  while (st->n_ent > 0) {
    logent_t *old = &st->ent[st->first_seq % ecap];
    if (st->n_ent < ecap && st->log_head + len - old->pos <= cap) break;
    st->first_seq++;
    st->n_ent--;
  }
  if (st->n_ent == 0) st->first_seq = st->next_seq - 1;
  uint64_t at = st->log_head % cap;
  size_t first = len < cap - at ? len : (size_t)(cap - at);
  memcpy(st->log + at, f, first);
  memcpy(st->log, f + first, len - first);
  logent_t *e = &st->ent[(st->next_seq - 1) % ecap];
  e->pos = st->log_head;
  e->len = (uint32_t)len;
  st->log_head += len;
  st->n_ent++;
}

/* Sequenced message to a key's stream: logged for retransmission and sent
 * if the key is connected. */
static void stream_send(hg_gateway_t *gw, stream_t *st, env_t *env) {
  env->has_seq = 1;
  env->seq = st->next_seq++;
  size_t n = encode(gw, env);
  if (n == 0) return;
  log_append(gw, st, gw->scratch, n);
  hg_outlog_append(gw->outlog, st->key_id, env->seq, gw->scratch, (uint32_t)n);
  conn_t *c = stream_conn(gw, st);
  if (c != NULL) conn_send_raw(c, gw->scratch, n);
}

static void stream_send_idx(hg_gateway_t *gw, uint32_t s, env_t *env) {
  if (s != NONE32 && s < gw->cfg.max_streams && gw->streams[s].key_id != 0)
    stream_send(gw, &gw->streams[s], env);
}

/* Reads frame rt_next from the journal into the connection. 1: done, 0:
 * no room yet, -1: cannot be read (logged). */
static int rt_from_file(conn_t *c, stream_t *st) {
  hg_gateway_t *gw = c->gw;
  size_t len = 0;
  size_t room = gw->cfg.out_hard_cap - conn_queued(c);
  int rc = hg_outlog_read(gw->outlog, st->key_id, c->rt_next, c->out[c->fill] + c->out_len[c->fill],
                          room, &len);
  if (rc == -ENOBUFS) return 0;
  if (rc != 0) {
    gw_log(gw, HG_LOG_WARN, "retransmission from the outbound journal ended: %s",
           hg_strerror(rc));
    return -1;
  }
  c->out_len[c->fill] += len;
  STAT_ADD(gw, st_frames_out);
  mark_dirty(c);
  c->rt_next++;
  return 1;
}

/* Copies log frames [rt_next, rt_end) into the connection while it has room
 * below the high-water mark; the rest follows as writes complete. */
static void rt_pump(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  stream_t *st = conn_stream(c);
  if (st == NULL || !c->sess.retransmitting) return;
  uint64_t cap = gw->cfg.retransmit_bytes;
  while (c->rt_next < c->rt_end && c->used && !c->closing &&
         conn_queued(c) < gw->cfg.out_high_water / 2) {
    if (c->rt_next < st->first_seq) { /* older than the ring: from the journal */
      int r = rt_from_file(c, st);
      if (r > 0) continue;
      if (r < 0) c->rt_next = c->rt_end; /* lost meanwhile: the client asks again */
      break;
    }
    logent_t *e = &st->ent[c->rt_next % gw->cfg.retransmit_frames];
    if (conn_queued(c) + e->len > gw->cfg.out_hard_cap) break;
    uint64_t at = e->pos % cap;
    size_t first = e->len < cap - at ? e->len : (size_t)(cap - at);
    uint8_t *dst = c->out[c->fill] + c->out_len[c->fill];
    memcpy(dst, st->log + at, first);
    memcpy(dst + first, st->log, e->len - first);
    c->out_len[c->fill] += e->len;
    STAT_ADD(gw, st_frames_out);
    mark_dirty(c);
    c->rt_next++;
  }
  if (c->rt_next >= c->rt_end) c->sess.retransmitting = 0;
}

/* ------------------------------------------------------------ conn I/O */

static void on_write(uv_write_t *req, int status);
static void process_input(conn_t *c);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

/* One write per connection per loop iteration (flush_dirty). The common case
 * goes straight to the socket with uv_try_write: a uv_write that completes at
 * once still costs a deferred callback and, in libuv, an epoll_ctl to drop
 * the POLLOUT interest it never needed - a syscall per flush. Only what the
 * socket does not take, and connections whose write completion drives more
 * (closing, retransmitting, reading paused), take the uv_write path. */
static void conn_flush(conn_t *c) {
  if (c->writing || c->out_len[c->fill] == 0) return;
  int w = c->fill;
  uv_buf_t b = uv_buf_init((char *)c->out[w], (unsigned)c->out_len[w]);
  if (c->reading && !c->closing && !c->sess.retransmitting) {
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == (int)b.len) {
      c->out_len[w] = 0;
      return;
    }
    if (n < 0 && n != UV_EAGAIN) {
      c->out_len[w] = 0;
      conn_close(c);
      return;
    }
    if (n > 0) b = uv_buf_init(b.base + n, b.len - (unsigned)n);
  }
  c->fill ^= 1;
  int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write);
  if (rc != 0) {
    c->out_len[w] = 0;
    conn_close(c);
    return;
  }
  c->writing = 1;
}

static void on_write(uv_write_t *req, int status) {
  conn_t *c = req->data;
  hg_gateway_t *gw = c->gw;
  c->writing = 0;
  c->out_len[c->fill ^ 1] = 0;
  if (!c->used) return;
  if (status < 0) {
    conn_close(c);
    return;
  }
  if (c->closing) {
    if (conn_queued(c) == 0) {
      conn_close(c);
    } else {
      conn_flush(c);
    }
    return;
  }
  rt_pump(c);
  conn_flush(c);
  if (!c->reading && !c->closing && conn_queued(c) <= gw->cfg.out_high_water / 2) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) {
      c->reading = 1;
      process_input(c);
      flush_dirty(gw);
    }
  }
}

static void release_stream_side(conn_t *c);
static void admit(hg_gateway_t *gw);

static void on_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  hg_gateway_t *gw = c->gw;
  c->used = 0;
  c->dirty_next = gw->free_conn;
  gw->free_conn = c->idx;
  if (gw->accept_waiting) admit(gw);
}

/* ------------------------------------------------- admission before login */

static uint32_t peer_home(const hg_gateway_t *gw, const uint8_t a[16]) {
  uint64_t hi, lo;
  memcpy(&hi, a, 8);
  memcpy(&lo, a + 8, 8);
  return (uint32_t)mix64(hi ^ mix64(lo)) & gw->peers_mask;
}

/* The entry of address a, or with add a free slot holding a (count 0: the
 * caller counts). NULL if absent, or with add if the table is full (never,
 * at the size create gives it: each entry is a counted connection and
 * there are twice as many slots as max_unauthenticated). */
static peer_count_t *peer_find(hg_gateway_t *gw, const uint8_t a[16], bool add) {
  uint32_t i = peer_home(gw, a);
  for (uint32_t k = 0; k <= gw->peers_mask; k++, i = (i + 1) & gw->peers_mask) {
    peer_count_t *e = &gw->peers[i];
    if (e->n == 0) {
      if (!add) return NULL;
      memcpy(e->addr, a, 16);
      return e;
    }
    if (memcmp(e->addr, a, 16) == 0) return e;
  }
  return NULL;
}

/* One connection of e's address fewer; the last one frees the slot (linear
 * probing delete with backward shift, as map_del). */
static void peer_drop(hg_gateway_t *gw, peer_count_t *e) {
  if (--e->n != 0) return;
  uint32_t m = gw->peers_mask;
  uint32_t i = (uint32_t)(e - gw->peers);
  for (;;) {
    uint32_t j = i;
    for (;;) {
      j = (j + 1) & m;
      if (gw->peers[j].n == 0) return;
      uint32_t home = peer_home(gw, gw->peers[j].addr);
      bool stay = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stay) break;
    }
    gw->peers[i] = gw->peers[j];
    gw->peers[j].n = 0;
    i = j;
  }
}

/* The peer's address in IPv6 form (IPv4 as ::ffff:a.b.c.d). 0 or a libuv
 * error (the peer is already gone). */
static int peer_addr(uv_tcp_t *t, uint8_t out[16]) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  int rc = uv_tcp_getpeername(t, (struct sockaddr *)&ss, &len);
  if (rc != 0) return rc;
  memset(out, 0, 16);
  if (ss.ss_family == AF_INET) {
    out[10] = out[11] = 0xff;
    memcpy(out + 12, &((const struct sockaddr_in *)&ss)->sin_addr, 4);
    return 0;
  }
  if (ss.ss_family == AF_INET6) {
    memcpy(out, &((const struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    return 0;
  }
  return UV_EINVAL;
}

/* The connection no longer awaits login (it logged in, or it closes). */
static void unauth_release(hg_gateway_t *gw, conn_t *c) {
  if (!c->unauth) return;
  c->unauth = 0;
  gw->n_unauth--;
  peer_count_t *e = peer_find(gw, c->peer, false);
  if (e != NULL) peer_drop(gw, e);
}

/* Closes the socket; the slot is released in the close callback. Everything
 * the connection meant to the gateway (stream attachment, subscriptions,
 * cancel-on-disconnect) is undone here, at once. */
static void conn_close(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  if (!c->used || uv_is_closing((uv_handle_t *)&c->tcp)) return;
  c->closing = 1;
  if (c->logged_in) {
    release_stream_side(c);
    gw->n_sessions--;
  } else {
    unauth_release(gw, c);
  }
  STAT_SET(gw, st_sessions, gw->n_sessions);
  STAT_SET(gw, st_unauth, gw->n_unauth);
  c->logged_in = 0;
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  conn_t *c = h->data;
  size_t cap = c->gw->cfg.max_frame + 16;
  *buf = uv_buf_init((char *)c->in + c->in_len, (unsigned)(cap - c->in_len));
}

static void handle_frame(conn_t *c, const uint8_t *body, size_t len);
static void process_input(conn_t *c);

/* Handles every complete frame buffered (reading may pause in between). */
static void process_input(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  size_t off = 0;
  while (c->used && !c->closing && c->reading) {
    hg_wire_frame_t f;
    int rc = hg_wire_frame_parse(c->in + off, c->in_len - off, gw->cfg.max_frame, &f);
    if (rc == -EAGAIN) break;
    if (rc != 0) {
      conn_terminate(c, hg_wire_frame_error_code(rc), "bad frame header");
      break;
    }
    if (c->in_len - off < (size_t)f.hdr_len + f.body_len) break;
    STAT_ADD(gw, st_frames_in);
    handle_frame(c, c->in + off + f.hdr_len, f.body_len);
    off += f.hdr_len + f.body_len;
  }
  if (c->used && off > 0) {
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
  }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  conn_t *c = s->data;
  hg_gateway_t *gw = c->gw;
  if (nread < 0) {
    conn_close(c);
  } else {
    c->in_len += (size_t)nread;
    gw->in_read = 1;
    process_input(c);
    gw->in_read = 0;
    if (gw->kick_due) {
      gw->kick_due = 0;
      hg_pipeline_kick(gw->pipe);
    }
  }
  flush_dirty(gw);
}

/* ------------------------------------------------------------------ login */

static void hex_into(char *dst, const uint8_t *b, size_t n) {
  static const char H[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    dst[2 * i] = H[b[i] >> 4];
    dst[2 * i + 1] = H[b[i] & 15];
  }
  dst[2 * n] = 0;
}

static void key_be(uint8_t out[8], uint64_t v) {
  for (int i = 7; i >= 0; i--) {
    out[i] = (uint8_t)v;
    v >>= 8;
  }
}

/* Store names: "u<key><session id>" marks a used session id,
 * "o<key>" holds a stream's last sequenced seq. */
static void used_name(char *out, uint64_t key_id, const uint8_t *sid) {
  uint8_t k[8];
  key_be(k, key_id);
  out[0] = 'u';
  hex_into(out + 1, k, 8);
  hex_into(out + 17, sid, HG_WIRE_SESSION_ID_LEN);
}

static void seq_name(char *out, uint64_t key_id) {
  uint8_t k[8];
  key_be(k, key_id);
  out[0] = 'o';
  hex_into(out + 1, k, 8);
}

static int key_load(hg_gateway_t *gw, uint64_t key_id, hg_key_record_t *out) {
  uint8_t buf[HG_KEY_RECORD_SIZE];
  size_t len = 0;
  int rc = hg_store_get(gw->store, HG_STORE_API_KEYS, key_id, buf, sizeof buf, &len);
  if (rc == HG_ERANGE) rc = HG_ECORRUPT;
  if (rc == 0) rc = hg_key_record_decode(buf, len, out);
  memset(buf, 0, sizeof buf);
  return rc;
}

static int key_store(hg_gateway_t *gw, const hg_key_record_t *k, int replace) {
  if (hg_key_record_check(k) != 0) return HG_EINVAL;
  if (!replace) {
    hg_key_record_t old;
    int rc = key_load(gw, k->key_id, &old);
    memset(&old, 0, sizeof old);
    if (rc == 0) return HG_EEXISTS;
    if (rc != HG_ENOTFOUND) return rc;
  }
  uint8_t buf[HG_KEY_RECORD_SIZE];
  hg_key_record_encode(k, buf);
  int rc = hg_store_put(gw->store, HG_STORE_API_KEYS, k->key_id, buf, sizeof buf);
  memset(buf, 0, sizeof buf);
  return rc;
}

/* The stream of a key: found, or created (its seq continues from the store). */
static stream_t *stream_get(hg_gateway_t *gw, const hg_key_record_t *k, uint32_t *idx) {
  uint32_t i = map_get(&gw->stream_map, k->key_id);
  if (i == NONE32) {
    if (gw->n_streams == gw->cfg.max_streams) return NULL;
    i = gw->n_streams;
    stream_t *st = &gw->streams[i];
    st->log = malloc(gw->cfg.retransmit_bytes);
    st->ent = calloc(gw->cfg.retransmit_frames, sizeof *st->ent);
    st->quote_gen = calloc((size_t)gw->cfg.max_instruments * 2, sizeof *st->quote_gen);
    if (st->log == NULL || st->ent == NULL || st->quote_gen == NULL) {
      free(st->log);
      free(st->ent);
      free(st->quote_gen);
      st->log = NULL;
      st->ent = NULL;
      st->quote_gen = NULL;
      return NULL;
    }
    /* Once per key, at its first login: both are rings every frame goes through. */
    hg_prefault(st->log, gw->cfg.retransmit_bytes);
    hg_prefault(st->ent, (size_t)gw->cfg.retransmit_frames * sizeof *st->ent);
    char name[20];
    seq_name(name, k->key_id);
    uint64_t last = 0;
    if (hg_store_get_session_seq(gw->store, name, &last) != 0) last = 0;
    int rc = hg_outlog_key_add(gw->outlog, k->key_id);
    if (rc != 0) /* the key still trades; only its durable retransmission is lost */
      gw_log(gw, HG_LOG_ERROR, "outbound journal: key table: %s", hg_strerror(rc));
    uint64_t jn = hg_outlog_next_seq(gw->outlog, k->key_id);
    st->key_id = k->key_id;
    st->next_seq = last + 1 > jn ? last + 1 : jn;
    st->first_seq = st->next_seq;
    st->orders = NONE32;
    st->next_quote_id = 1;
    gw->n_streams++;
    map_put(&gw->stream_map, k->key_id, i);
  }
  stream_t *st = &gw->streams[i];
  st->role = k->role;
  st->account = k->account;
  st->firm = k->firm;
  if (k->account != 0) {
    account_t *a = account_find(gw, k->account);
    if (a != NULL && a->stream == NONE32) a->stream = i;
  }
  *idx = i;
  return st;
}

static void login_reject(conn_t *c, uint32_t code, const char *text) {
  Hourglass__V1__LoginReject r = HOURGLASS__V1__LOGIN_REJECT__INIT;
  r.code = code;
  r.text = (char *)text;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(LOGIN_REJECT);
  env.login_reject = &r;
  conn_send(c, &env);
  STAT_ADD(c->gw, st_login_rejects);
  if (!c->used) return;
  c->closing = 1;
  c->closing_since = now_mono();
  if (c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
  if (conn_queued(c) == 0) conn_close(c);
}

static void handle_login(conn_t *c, const Hourglass__V1__Login *lg) {
  hg_gateway_t *gw = c->gw;
  hg_key_record_t key;
  int rc = key_load(gw, lg->key_id, &key);
  if (rc != 0 && rc != HG_ENOTFOUND) {
    gw_log(gw, HG_LOG_ERROR, "key store: %s", hg_strerror(rc));
    login_reject(c, LREJ(UNAVAILABLE), "key store unavailable");
    return;
  }
  uint32_t code = hg_login_verify(lg, rc == 0 ? &key : NULL, now_wall(gw),
                                  (uint64_t)gw->cfg.login_skew_ms * 1000000u);
  memset(key.secret, 0, sizeof key.secret);
  if (code != 0) {
    login_reject(c, code, code == LREJ(AUTH_FAILED)       ? "authentication failed"
                          : code == LREJ(TIMESTAMP_SKEW) ? "timestamp outside the allowed skew"
                                                         : "invalid login");
    return;
  }
  if (gw->n_sessions >= gw->cfg.max_sessions) {
    login_reject(c, LREJ(TOO_MANY_SESSIONS), "session limit reached");
    return;
  }
  uint32_t si = map_get(&gw->stream_map, lg->key_id);
  if (si != NONE32 && stream_conn(gw, &gw->streams[si]) != NULL) {
    login_reject(c, LREJ(ALREADY_ACTIVE), "key already has a live session");
    return;
  }
  /* Used ids: the journal's in-memory set, then (read only, no commit) ids
   * an earlier version recorded in the key store. */
  char name[1 + 16 + 32 + 1];
  used_name(name, lg->key_id, lg->session_id.data);
  uint64_t dummy;
  rc = hg_outlog_sid_used(gw->outlog, lg->key_id, lg->session_id.data)
           ? 0
           : hg_store_get_session_seq(gw->store, name, &dummy);
  if (rc == 0) {
    login_reject(c, LREJ(SESSION_ID_REUSED), "session id used before");
    return;
  }
  if (rc == HG_ENOTFOUND) {
    rc = hg_outlog_sid_add(gw->outlog, lg->key_id, lg->session_id.data);
    if (rc == HG_EUNAVAIL) rc = 0; /* remembered; written once the disk takes it */
  }
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "session id check: %s", hg_strerror(rc));
    login_reject(c, LREJ(UNAVAILABLE), "key store unavailable");
    return;
  }
  stream_t *st = stream_get(gw, &key, &si);
  if (st == NULL) {
    login_reject(c, LREJ(TOO_MANY_SESSIONS), "stream table full");
    return;
  }
  uint32_t ka = lg->has_keepalive_ms ? lg->keepalive_ms : 1000;
  if (ka < gw->cfg.keepalive_min_ms) ka = gw->cfg.keepalive_min_ms;
  if (ka > gw->cfg.keepalive_max_ms) ka = gw->cfg.keepalive_max_ms;
  uint64_t now = now_mono();
  hg_sess_activate(&c->sess, ka, now);
  hg_throttle_init(&c->thr, gw->cfg.throttle_rate, gw->cfg.throttle_burst, now);
  c->logged_in = 1;
  c->cod = lg->has_cancel_on_disconnect && lg->cancel_on_disconnect;
  c->stream = si;
  st->conn = c->idx + 1;
  st->conn_gen = c->gen;
  unauth_release(gw, c);
  gw->n_sessions++;
  STAT_SET(gw, st_sessions, gw->n_sessions);
  STAT_SET(gw, st_unauth, gw->n_unauth);
  STAT_ADD(gw, st_logins);

  Hourglass__V1__LoginAck ack = HOURGLASS__V1__LOGIN_ACK__INIT;
  ack.session_id = lg->session_id;
  ack.role = st->role;
  ack.account = st->account;
  ack.firm = st->firm;
  ack.keepalive_ms = ka;
  ack.next_seq = st->next_seq;
  ack.server_time_ns = now_wall(gw);
  ack.has_cancel_on_disconnect = 1;
  ack.cancel_on_disconnect = c->cod;
  ack.has_epoch = 1;
  ack.epoch = gw->epoch;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(LOGIN_ACK);
  env.login_ack = &ack;
  conn_send(c, &env);
}

/* ------------------------------------------------------------ submitting */

static pending_t *pend_at(hg_gateway_t *gw, uint64_t counter) {
  return &gw->pend[counter & (gw->cfg.pending_capacity - 1)];
}

/* Queues cmd for the engine. Returns 0, REJ_BUSY (our ring or the
 * pipeline's is full) or REJ_UNAVAILABLE. */
static uint32_t submit(hg_gateway_t *gw, const hg_command_t *cmd, uint32_t kind, uint32_t stream,
                       conn_t *c, uint64_t ref_seq, pending_t **out) {
  if (gw->pend_next - gw->pend_tail >= gw->cfg.pending_capacity) {
    STAT_ADD(gw, st_busy);
    return REJ(BUSY);
  }
  uint64_t origin = ORIGIN_TAG | (gw->pend_next & ORIGIN_MASK);
  int rc = gw->in_read ? hg_pipeline_submit_nowake(gw->pipe, origin, cmd)
                       : hg_pipeline_submit(gw->pipe, origin, cmd);
  if (rc == 0 && gw->in_read) gw->kick_due = 1;
  if (rc == HG_EBUSY) {
    STAT_ADD(gw, st_busy);
    return REJ(BUSY);
  }
  if (rc != 0) return REJ(UNAVAILABLE);
  pending_t *p = pend_at(gw, gw->pend_next);
  memset(p, 0, sizeof *p);
  p->origin = origin;
  p->ref_seq = ref_seq;
  p->stream = stream;
  p->conn_gen = c != NULL ? c->gen : UINT32_MAX;
  p->kind = kind;
  p->cod = c != NULL ? c->cod : 0;
  p->cmd = *cmd;
  gw->pend_next++;
  if (cmd->type == HG_COMMAND_NEW_ORDER) gw->orders_reserved++;
  STAT_ADD(gw, st_submitted);
  if (out != NULL) *out = p;
  return 0;
}

static void send_response(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, uint32_t reason,
                          const char *text) {
  Hourglass__V1__Response r = HOURGLASS__V1__RESPONSE__INIT;
  r.ref_seq = ref_seq;
  r.has_reason = reason != 0;
  r.reason = reason;
  r.text = (char *)text;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(RESPONSE);
  env.response = &r;
  stream_send_idx(gw, stream, &env);
}

/* What a REJECTED report echoes of the refused request: side (new orders
 * only, -1 none), price and quantity as submitted (new_price and new_qty
 * for a replace; nothing for a cancel). */
typedef struct reject_echo {
  int side;
  int64_t price, qty;
} reject_echo_t;

static const reject_echo_t NO_ECHO = {-1, 0, 0};

static void er_echo(Hourglass__V1__ExecutionReport *er, reject_echo_t x) {
  if (x.side >= 0) {
    er->has_side = 1;
    er->side = (Hourglass__V1__Side)x.side;
  }
  if (x.side >= 0 || x.price != 0 || x.qty != 0) {
    er->has_price = er->has_qty = 1;
    er->price = x.price;
    er->qty = x.qty;
  }
}

/* The echo of a new order request (no side when the side is out of range). */
static reject_echo_t new_order_echo(const Hourglass__V1__NewOrderRequest *r) {
  return (reject_echo_t){r->side == 0 || r->side == 1 ? (int)r->side : -1,
                         r->has_price ? r->price : 0, r->qty};
}

/* The echo of a journal command (new order or replace; cancels echo nothing). */
static reject_echo_t cmd_echo(const hg_command_t *cmd) {
  if (cmd->type == HG_COMMAND_NEW_ORDER)
    return (reject_echo_t){cmd->u.new_order.side, cmd->u.new_order.price, cmd->u.new_order.qty};
  if (cmd->type == HG_COMMAND_REPLACE)
    return (reject_echo_t){-1, cmd->u.replace.new_price, cmd->u.replace.new_qty};
  return NO_ECHO;
}

/* ExecutionReport(REJECTED) for a request the gateway refused itself. */
static void send_order_reject(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, uint32_t req,
                              uint32_t reason, uint32_t instrument, uint64_t order_id,
                              uint64_t clordid, uint32_t quote_group, reject_echo_t echo) {
  Hourglass__V1__ExecutionReport er = HOURGLASS__V1__EXECUTION_REPORT__INIT;
  er.exec_type = EXEC(REJECTED);
  er.instrument_id = instrument;
  er.has_order_id = order_id != 0;
  er.order_id = order_id;
  er.has_client_order_id = clordid != 0;
  er.client_order_id = clordid;
  er.has_reason = 1;
  er.reason = reason;
  er.has_request = 1;
  er.request = req;
  er.has_ref_seq = 1;
  er.ref_seq = ref_seq;
  er.has_quote_group = quote_group != 0;
  er.quote_group = quote_group;
  er_echo(&er, echo);
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(EXECUTION_REPORT);
  env.execution_report = &er;
  stream_send_idx(gw, stream, &env);
}

/* Internal cancel (cancel-on-disconnect, quote pull, stale quote). */
static uint32_t cancel_internal(hg_gateway_t *gw, order_t *o) {
  if (o->cancel_sent) return 0;
  hg_command_t cmd;
  memset(&cmd, 0, sizeof cmd);
  cmd.type = HG_COMMAND_CANCEL;
  cmd.u.cancel.instrument_id = o->instrument_id;
  cmd.u.cancel.account = o->account;
  cmd.u.cancel.order_id = o->order_id;
  uint32_t r = submit(gw, &cmd, P_INTERNAL, o->stream, NULL, 0, NULL);
  if (r == 0) o->cancel_sent = 1;
  return r;
}

/* Cancels the flagged live orders the connection (stream, gen) entered.
 * Returns how many could not be submitted (retried from the timer). */
static uint32_t cod_cancel(hg_gateway_t *gw, stream_t *st, uint32_t gen) {
  uint32_t left = 0;
  for (uint32_t i = st->orders; i != NONE32;) {
    order_t *o = &gw->orders[i];
    i = o->next;
    if (o->cod && o->conn_gen == gen && !o->cancel_sent && cancel_internal(gw, o) != 0) left++;
  }
  return left;
}

static void md_unsubscribe_all(conn_t *c);

static void release_stream_side(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  stream_t *st = conn_stream(c);
  if (c->n_md > 0) md_unsubscribe_all(c);
  if (c->drop_copy) {
    for (uint32_t i = 0; i < gw->n_drop; i++)
      if (gw->drop_list[i] == c->idx) {
        gw->drop_list[i] = gw->drop_list[--gw->n_drop];
        break;
      }
    c->drop_copy = 0;
  }
  if (st == NULL) return;
  /* At a stop the engine stops next and the reports of these cancels would
   * never be drained; the orders are session-scoped, so the next start's
   * SessionsEnded cancels them and their reports reach this stream then. */
  if (c->cod && !gw->stopping) {
    st->cod_gen = c->gen;
    st->cod_retry = cod_cancel(gw, st, c->gen);
  }
  st->conn = 0; /* the seq needs no commit: the journal holds it */
  c->stream = NONE32;
}

/* ------------------------------------------------------------ market data */

static void md_send_all(hg_gateway_t *gw, instr_t *in, env_t *env) {
  if (in->n_subs == 0) return;
  size_t n = encode(gw, env);
  if (n == 0) return;
  /* A send may close a slow subscriber, which removes it from subs. */
  for (uint32_t k = in->n_subs; k-- > 0;) {
    if (k >= in->n_subs) continue;
    conn_send_raw(&gw->conns[in->subs[k]], gw->scratch, n);
  }
}

static void md_status(hg_gateway_t *gw, instr_t *in) {
  Hourglass__V1__MarketDataStatus m = HOURGLASS__V1__MARKET_DATA_STATUS__INIT;
  m.instrument_id = in->id;
  m.md_seq = ++in->md_seq;
  m.state = in->state;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(MD_STATUS);
  env.md_status = &m;
  md_send_all(gw, in, &env);
}

static bool md_unsubscribe(conn_t *c, instr_t *in) {
  for (uint32_t k = 0; k < in->n_subs; k++)
    if (in->subs[k] == c->idx) {
      in->subs[k] = in->subs[--in->n_subs];
      c->n_md--;
      return true;
    }
  return false;
}

static void md_unsubscribe_all(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  for (uint32_t i = 0; i < gw->cfg.max_instruments && c->n_md > 0; i++)
    if (gw->instr[i].id != 0) md_unsubscribe(c, &gw->instr[i]);
  c->n_md = 0;
}

static void md_snapshot(conn_t *c, instr_t *in, uint32_t depth, uint64_t ref_seq) {
  hg_gateway_t *gw = c->gw;
  Hourglass__V1__PriceLevel lv[2][MAX_MD_DEPTH];
  Hourglass__V1__PriceLevel *ptr[2][MAX_MD_DEPTH];
  size_t n[2];
  for (int s = 0; s < 2; s++) {
    n[s] = in->n_lv[s] < depth ? in->n_lv[s] : depth;
    for (size_t k = 0; k < n[s]; k++) {
      hourglass__v1__price_level__init(&lv[s][k]);
      lv[s][k].price = in->lv[s][k].price;
      lv[s][k].qty = in->lv[s][k].qty;
      ptr[s][k] = &lv[s][k];
    }
  }
  Hourglass__V1__MarketDataSnapshot m = HOURGLASS__V1__MARKET_DATA_SNAPSHOT__INIT;
  m.instrument_id = in->id;
  m.md_seq = in->md_seq;
  m.state = in->state;
  m.n_bids = n[0];
  m.bids = ptr[0];
  m.n_asks = n[1];
  m.asks = ptr[1];
  m.has_ref_seq = 1;
  m.ref_seq = ref_seq;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(MD_SNAPSHOT);
  env.md_snapshot = &m;
  (void)gw;
  conn_send(c, &env);
}

/* ---------------------------------------------------------------- requests */

static bool role_allows(uint32_t role, uint32_t body) {
  switch (body) {
  case B(NEW_ORDER):
  case B(CANCEL):
  case B(REPLACE):
  case B(MASS_CANCEL):
  case B(ORDER_STATUS_REQUEST):
    return role == HG_ROLE_TRADER || role == HG_ROLE_MARKET_MAKER;
  case B(MASS_QUOTE):
  case B(QUOTE_GROUP_RESET):
    return role == HG_ROLE_MARKET_MAKER;
  case B(POSITIONS_REQUEST):
  case B(STATEMENT_REQUEST):
    return role != HG_ROLE_OPERATOR;
  case B(INSTRUMENTS_REQUEST):
  case B(MD_SUBSCRIBE):
  case B(MD_UNSUBSCRIBE):
    return true;
  case B(DROP_COPY_SUBSCRIBE):
    return role == HG_ROLE_RISK_VIEWER;
  case B(SET_PROVIDER_GRADE):
  case B(PUBLISH_SAMPLES):
  case B(DISCARD_SAMPLES):
  case B(COMPUTE_FIXING):
  case B(PUBLISH_FIXING):
  case B(FINALIZE_FIXING):
  case B(DAILY_SETTLEMENT):
  case B(EXPIRE):
  case B(LIST_CURVE):
    return role == HG_ROLE_OPERATOR;
  default:
    return role == HG_ROLE_OPERATOR && body >= B(LIST_INSTRUMENT) && body <= B(ADD_API_KEY);
  }
}

/* New order -> command; returns 0 or a RejectReason. */
static uint32_t build_new_order(const Hourglass__V1__NewOrderRequest *r, uint32_t account,
                                hg_command_t *cmd) {
  if (r->base.n_unknown_fields != 0 || r->instrument_id == 0 ||
      (r->client_order_id & QUOTE_CLORDID_BIT) != 0 || r->side < 0 || r->side > 1 ||
      r->type < 0 || r->type > 1 || r->tif < 0 || r->tif > 3 ||
      (r->has_stp && (r->stp < 0 || r->stp > 4)) ||
      (r->type == HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT && !r->has_price))
    return REJ(INVALID_REQUEST);
  memset(cmd, 0, sizeof *cmd);
  cmd->type = HG_COMMAND_NEW_ORDER;
  hg_cmd_new_order_t *n = &cmd->u.new_order;
  n->instrument_id = r->instrument_id;
  n->account = account;
  n->client_order_id = r->client_order_id;
  n->smp_group = r->has_smp_group ? r->smp_group : 0;
  n->price = r->type == HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT ? r->price : 0;
  n->qty = r->qty;
  n->side = (uint8_t)r->side;
  n->type = (uint8_t)r->type;
  n->tif = (uint8_t)r->tif;
  n->stp = r->has_stp ? (uint8_t)r->stp : 0;
  n->post_only = r->has_post_only && r->post_only ? 1 : 0;
  return 0;
}

static void handle_new_order(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__NewOrderRequest *r = env->new_order;
  hg_command_t cmd;
  uint32_t rej = build_new_order(r, st->account, &cmd);
  /* A cancel-on-disconnect session's order dies with the session, also
   * across a restart (see hg_gateway_start). */
  if (rej == 0) cmd.u.new_order.session_scoped = c->cod ? 1 : 0;
  if (rej == 0 && !hg_throttle_take(&c->thr, now_mono())) {
    rej = REJ(THROTTLED);
    STAT_ADD(gw, st_throttled);
  }
  /* Every accepted order may need a mirror slot until it is gone. */
  if (rej == 0 && gw->n_orders + gw->orders_reserved >= gw->cfg.max_orders)
    rej = REJ(GATEWAY_FULL);
  if (rej == 0) rej = submit(gw, &cmd, P_NEW, si, c, env->seq, NULL);
  if (rej != 0)
    send_order_reject(gw, si, env->seq, REQ(NEW_ORDER), rej, r->instrument_id, 0,
                      r->client_order_id, 0, new_order_echo(r));
}

static void handle_cancel(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__CancelRequest *r = env->cancel;
  uint32_t rej = r->base.n_unknown_fields != 0 || r->order_id == 0 ? REJ(INVALID_REQUEST) : 0;
  if (rej == 0) {
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = HG_COMMAND_CANCEL;
    cmd.u.cancel.instrument_id = r->instrument_id;
    cmd.u.cancel.account = st->account;
    cmd.u.cancel.order_id = r->order_id;
    rej = submit(gw, &cmd, P_CANCEL, si, c, env->seq, NULL);
  }
  if (rej != 0)
    send_order_reject(gw, si, env->seq, REQ(CANCEL), rej, r->instrument_id, r->order_id, 0, 0,
                      NO_ECHO);
}

static void handle_replace(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__ReplaceRequest *r = env->replace;
  uint32_t rej = r->base.n_unknown_fields != 0 || r->order_id == 0 ? REJ(INVALID_REQUEST) : 0;
  if (rej == 0 && !hg_throttle_take(&c->thr, now_mono())) {
    rej = REJ(THROTTLED);
    STAT_ADD(gw, st_throttled);
  }
  if (rej == 0) {
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = HG_COMMAND_REPLACE;
    cmd.u.replace.instrument_id = r->instrument_id;
    cmd.u.replace.account = st->account;
    cmd.u.replace.order_id = r->order_id;
    cmd.u.replace.new_price = r->new_price;
    cmd.u.replace.new_qty = r->new_qty;
    rej = submit(gw, &cmd, P_REPLACE, si, c, env->seq, NULL);
  }
  if (rej != 0)
    send_order_reject(gw, si, env->seq, REQ(REPLACE), rej, r->instrument_id, r->order_id, 0, 0,
                      (reject_echo_t){-1, r->new_price, r->new_qty});
}

static void handle_mass_cancel(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__MassCancelRequest *r = env->mass_cancel;
  uint32_t rej = 0;
  if (r->base.n_unknown_fields != 0 || (r->has_sides && (r->sides < 0 || r->sides > 2)))
    rej = REJ(INVALID_REQUEST);
  if (rej == 0) {
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = HG_COMMAND_MASS_CANCEL;
    cmd.u.mass_cancel.account = st->account;
    cmd.u.mass_cancel.instrument_id = r->has_instrument_id ? r->instrument_id : 0;
    cmd.u.mass_cancel.sides = r->has_sides ? (uint8_t)r->sides : HG_SIDES_BOTH;
    rej = submit(gw, &cmd, P_MASS_CANCEL, si, c, env->seq, NULL);
  }
  if (rej != 0) send_response(gw, si, env->seq, rej, NULL);
}

static void handle_order_status(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__OrderStatusRequest *r = env->order_status_request;
  order_t *o = order_find(gw, r->order_id);
  /* Another account's order answers exactly like an unknown id. */
  if (o != NULL && (o->account != st->account || o->instrument_id != r->instrument_id)) o = NULL;
  Hourglass__V1__OrderStatus m = HOURGLASS__V1__ORDER_STATUS__INIT;
  m.ref_seq = env->seq;
  m.instrument_id = r->instrument_id;
  m.order_id = r->order_id;
  m.live = o != NULL;
  if (o != NULL) {
    m.has_client_order_id = 1;
    m.client_order_id = o->client_order_id;
    m.has_side = 1;
    m.side = (Hourglass__V1__Side)o->side;
    m.has_price = 1;
    m.price = o->price;
    m.has_qty = 1;
    m.qty = o->qty;
    m.has_leaves = 1;
    m.leaves = o->leaves;
    m.has_quote_group = o->quote_group != 0;
    m.quote_group = o->quote_group;
  }
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(ORDER_STATUS);
  out.order_status = &m;
  stream_send_idx(gw, si, &out);
}

static mmp_t *mmp_find(stream_t *st, uint32_t group, bool create) {
  mmp_t *free_slot = NULL;
  for (int i = 0; i < MAX_MMP_GROUPS; i++) {
    if (st->mmp[i].group == group) return &st->mmp[i];
    if (st->mmp[i].group == 0 && free_slot == NULL) free_slot = &st->mmp[i];
  }
  if (!create || free_slot == NULL) return NULL;
  memset(free_slot, 0, sizeof *free_slot);
  free_slot->group = group;
  return free_slot;
}

/* Pulls every live quote of a group (or of every group with group 0 and
 * instrument set: the key's quotes in that instrument). Returns how many. */
static uint32_t pull_quotes(hg_gateway_t *gw, stream_t *st, uint32_t group, uint32_t instrument) {
  uint32_t n = 0;
  for (uint32_t i = st->orders; i != NONE32;) {
    order_t *o = &gw->orders[i];
    i = o->next;
    if (o->quote_group == 0 || o->cancel_sent) continue;
    if (group != 0 && o->quote_group != group) continue;
    if (instrument != 0 && o->instrument_id != instrument) continue;
    if (cancel_internal(gw, o) == 0) n++;
  }
  return n;
}

static void handle_mass_quote(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__MassQuote *q = env->mass_quote;
  Hourglass__V1__QuoteEntryReject rj[MAX_QUOTE_ENTRIES * 2];
  Hourglass__V1__QuoteEntryReject *rjp[MAX_QUOTE_ENTRIES * 2];
  size_t nrj = 0;
  uint32_t reason = 0;
  if (q->base.n_unknown_fields != 0 || q->quote_group == 0 || q->n_entries == 0 ||
      q->n_entries > MAX_QUOTE_ENTRIES || (q->has_mmp_qty && q->mmp_qty <= 0) ||
      (q->has_mmp_window_ms && q->mmp_window_ms == 0))
    reason = REJ(INVALID_REQUEST);
  for (size_t i = 0; reason == 0 && i < q->n_entries; i++) {
    const Hourglass__V1__QuoteEntry *e = q->entries[i];
    if (e->base.n_unknown_fields != 0 || e->bid_qty < 0 || e->ask_qty < 0 ||
        (e->bid_qty > 0 && e->bid_price <= 0) || (e->ask_qty > 0 && e->ask_price <= 0))
      reason = REJ(INVALID_REQUEST);
    for (size_t j = 0; j < i && reason == 0; j++)
      if (q->entries[j]->instrument_id == e->instrument_id) reason = REJ(INVALID_REQUEST);
  }
  mmp_t *m = NULL;
  if (reason == 0) {
    m = mmp_find(st, q->quote_group, true);
    if (m == NULL) reason = REJ(GATEWAY_FULL);
  }
  if (reason == 0 && m->tripped) reason = REJ(MMP_TRIPPED);
  if (reason == 0 && !hg_throttle_take(&c->thr, now_mono())) {
    reason = REJ(THROTTLED);
    STAT_ADD(gw, st_throttled);
  }
  if (reason == 0) {
    m->limit = q->has_mmp_qty ? q->mmp_qty : (m->limit != 0 ? m->limit : gw->cfg.mmp_qty);
    if (q->has_mmp_window_ms) {
      m->window_ns = (uint64_t)q->mmp_window_ms * 1000000u;
    } else if (m->window_ns == 0) {
      m->window_ns = (uint64_t)gw->cfg.mmp_window_ms * 1000000u;
    }
    for (size_t i = 0; i < q->n_entries; i++) {
      const Hourglass__V1__QuoteEntry *e = q->entries[i];
      instr_t *in = instr_find(gw, e->instrument_id);
      uint32_t er = 0;
      if (in == NULL) er = REJ(UNKNOWN_INSTRUMENT);
      if (er == 0) {
        /* The previous quote of this key in the instrument goes first; a
         * quote still in flight is caught by its generation on acceptance. */
        uint32_t slot = instr_slot(gw, in);
        st->quote_gen[slot * 2]++;
        st->quote_gen[slot * 2 + 1]++;
        pull_quotes(gw, st, 0, e->instrument_id);
        for (int side = 0; side < 2 && er == 0; side++) {
          int64_t qty = side == 0 ? e->bid_qty : e->ask_qty;
          if (qty == 0) continue;
          if (gw->n_orders + gw->orders_reserved >= gw->cfg.max_orders) {
            er = REJ(GATEWAY_FULL);
            break;
          }
          hg_command_t cmd;
          memset(&cmd, 0, sizeof cmd);
          cmd.type = HG_COMMAND_NEW_ORDER;
          hg_cmd_new_order_t *n = &cmd.u.new_order;
          n->instrument_id = e->instrument_id;
          n->account = st->account;
          n->client_order_id = QUOTE_CLORDID_BIT | st->next_quote_id++;
          n->price = side == 0 ? e->bid_price : e->ask_price;
          n->qty = qty;
          n->side = (uint8_t)side;
          n->type = HG_ORD_LIMIT;
          n->tif = HG_TIF_GTC;
          n->post_only = 1;
          n->session_scoped = 1; /* a quote never outlives the process */
          pending_t *p = NULL;
          er = submit(gw, &cmd, P_QUOTE, si, c, env->seq, &p);
          if (er == 0) {
            p->quote_group = q->quote_group;
            p->quote_gen = st->quote_gen[slot * 2 + side];
          }
        }
      }
      if (er != 0 && nrj < MAX_QUOTE_ENTRIES * 2) {
        hourglass__v1__quote_entry_reject__init(&rj[nrj]);
        rj[nrj].index = (uint32_t)i;
        rj[nrj].reason = er;
        rjp[nrj] = &rj[nrj];
        nrj++;
      }
    }
  }
  Hourglass__V1__MassQuoteAck ack = HOURGLASS__V1__MASS_QUOTE_ACK__INIT;
  ack.ref_seq = env->seq;
  ack.quote_group = q->quote_group;
  ack.has_reason = reason != 0;
  ack.reason = reason;
  ack.n_rejects = nrj;
  ack.rejects = rjp;
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(MASS_QUOTE_ACK);
  out.mass_quote_ack = &ack;
  stream_send_idx(gw, si, &out);
}

static void handle_quote_reset(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  mmp_t *m = mmp_find(st, env->quote_group_reset->quote_group, false);
  if (m != NULL) {
    m->tripped = 0;
    m->filled = 0;
    m->window_start = 0;
  }
  send_response(c->gw, si, env->seq, m != NULL ? 0 : REJ(INVALID_REQUEST), NULL);
}

/* Fill of a quote order: counts towards its group's protection. */
static void mmp_fill(hg_gateway_t *gw, order_t *o, int64_t qty, uint64_t ts) {
  if (o->quote_group == 0 || o->stream == NONE32) return;
  stream_t *st = &gw->streams[o->stream];
  mmp_t *m = mmp_find(st, o->quote_group, false);
  if (m == NULL || m->tripped) return;
  if (m->window_start == 0 || ts - m->window_start > m->window_ns) {
    m->window_start = ts;
    m->filled = 0;
  }
  m->filled += qty;
  if (m->filled <= m->limit) return;
  m->tripped = 1;
  uint32_t pulled = pull_quotes(gw, st, m->group, 0);
  Hourglass__V1__MmpTriggered t = HOURGLASS__V1__MMP_TRIGGERED__INIT;
  t.quote_group = m->group;
  t.filled_qty = m->filled;
  t.quotes_pulled = pulled;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(MMP_TRIGGERED);
  env.mmp_triggered = &t;
  stream_send(gw, st, &env);
}

/* The account's positions as messages, in instrument order, at most cap
 * (pos holds them, pp points at them); open_only skips flat ones. */
static size_t fill_positions(const hg_gateway_t *gw, uint32_t acct, int open_only,
                             Hourglass__V1__Position *pos, Hourglass__V1__Position **pp,
                             size_t cap) {
  size_t n = 0;
  for (uint32_t i = 0; i < gw->cfg.max_instruments && n < cap; i++) {
    if (gw->instr[i].id == 0) continue;
    uint32_t k = map_get(&gw->position_map, (uint64_t)acct << 32 | gw->instr[i].id);
    if (k == NONE32) continue;
    const position_t *q = &gw->positions[k];
    if (open_only && q->bought == q->sold) continue;
    hourglass__v1__position__init(&pos[n]);
    pos[n].instrument_id = gw->instr[i].id;
    pos[n].bought_qty = q->bought;
    pos[n].sold_qty = q->sold;
    pos[n].net_qty = q->bought - q->sold;
    pp[n] = &pos[n];
    n++;
  }
  return n;
}

static void handle_positions(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__PositionsRequest *r = env->positions_request;
  uint32_t acct = st->account;
  account_t *a = NULL;
  uint32_t reason = 0;
  if (st->role == HG_ROLE_RISK_VIEWER) {
    acct = r->has_account ? r->account : 0;
    a = account_find(gw, acct);
    /* Another firm's account answers like one that does not exist. */
    if (a == NULL || a->firm != st->firm) reason = REJ(UNKNOWN_ACCOUNT);
  } else {
    if (r->has_account && r->account != 0 && r->account != acct) {
      reason = REJ(UNKNOWN_ACCOUNT);
    } else {
      a = account_find(gw, acct);
      if (a == NULL) reason = REJ(UNKNOWN_ACCOUNT);
    }
  }
  Hourglass__V1__Position pos[256];
  Hourglass__V1__Position *pp[256];
  size_t n = reason == 0 ? fill_positions(gw, acct, 0, pos, pp, 256) : 0;
  Hourglass__V1__Positions m = HOURGLASS__V1__POSITIONS__INIT;
  m.ref_seq = env->seq;
  m.account = reason == 0 ? acct : 0;
  m.cash = a != NULL && reason == 0 ? a->cash : 0;
  m.n_positions = n;
  m.positions = pp;
  m.has_reason = reason != 0;
  m.reason = reason;
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(POSITIONS);
  out.positions = &m;
  stream_send_idx(gw, si, &out);
}

/* -------------------------------------------------------------- statements */

/* Entries of one Statement page: bounded so that a page with every position
 * fits the default frame (an entry encodes in at most 104 bytes, a
 * position in 48). */
#define STMT_PAGE_MAX 256u
#define STMT_POS_MAX 256u

/* Appends e to the ledger copy and to its account's chain. */
static void ledger_append(hg_gateway_t *gw, const hg_ledger_entry_t *e) {
  if (gw->ledger_lost) return;
  if (gw->n_ledger == gw->cap_ledger) {
    uint64_t ncap = gw->cap_ledger ? gw->cap_ledger * 2 : 4096;
    hg_ledger_entry_t *nl = realloc(gw->ledger, ncap * sizeof *nl);
    if (nl != NULL) gw->ledger = nl;
    uint64_t *nn = nl != NULL ? realloc(gw->ledger_next, ncap * sizeof *nn) : NULL;
    if (nn == NULL) {
      gw->ledger_lost = 1;
      gw_log(gw, HG_LOG_WARN, "ledger copy: out of memory; statements unavailable");
      return;
    }
    gw->ledger_next = nn;
    gw->cap_ledger = ncap;
  }
  uint64_t i = gw->n_ledger++;
  gw->ledger[i] = *e;
  gw->ledger[i].index = i;
  gw->ledger_next[i] = 0;
  account_t *a = account_find(gw, e->account);
  if (a == NULL) return; /* not in the account table: kept, never shown */
  if (a->ltail != 0) gw->ledger_next[a->ltail - 1] = i + 1;
  else a->lhead = i + 1;
  a->ltail = i + 1;
}

/* The events that post ledger entries, one entry each and in the order the
 * clearing posted them, so the copy's indexes are the ledger's. */
static void ledger_event(hg_gateway_t *gw, const hg_exchange_event_t *ev) {
  hg_ledger_entry_t e;
  memset(&e, 0, sizeof e);
  e.seq = ev->seq;
  e.ts = ev->ts;
  e.account = ev->account;
  e.balance = ev->balance;
  switch (ev->type) {
  case HG_XEV_DEPOSIT:
  case HG_XEV_WITHDRAWAL:
    e.kind = ev->type == HG_XEV_DEPOSIT ? HG_LEDGER_DEPOSIT : HG_LEDGER_WITHDRAWAL;
    e.instrument = HG_CLR_NO_INSTRUMENT;
    e.amount = ev->type == HG_XEV_DEPOSIT ? ev->amount : -ev->amount;
    break;
  case HG_XEV_VM:
  case HG_XEV_FINAL_SETTLEMENT:
    e.kind = ev->type == HG_XEV_VM ? HG_LEDGER_VM : HG_LEDGER_FINAL;
    e.instrument = ev->instrument_id;
    e.amount = ev->amount;
    e.price = ev->price;
    e.qty = ev->qty;
    /* The cycle posts VM at the 16:00 of its day, not at the command's ts. */
    if (ev->type == HG_XEV_VM) e.ts = (uint64_t)ev->day * HG_CLR_NS_PER_DAY + gw->cycle_tod_ns;
    break;
  default:
    return;
  }
  ledger_append(gw, &e);
}

/* Copies the recovered ledger; before the pipeline threads start. */
static int seed_ledger(hg_gateway_t *gw, const hg_clearing_t *clr) {
  hg_clearing_config_t d;
  hg_clearing_config_default(&d);
  gw->cycle_tod_ns = d.cycle_time_of_day_ns;
  uint64_t n = hg_clearing_ledger_size(clr);
  for (uint64_t i = 0; i < n; i++) {
    hg_ledger_entry_t e;
    int rc = hg_clearing_ledger_get(clr, i, &e);
    if (rc != 0) return rc;
    /* A recovered cycle shows the time of day this exchange was set up with. */
    if (e.kind == HG_LEDGER_VM) gw->cycle_tod_ns = e.ts % HG_CLR_NS_PER_DAY;
    ledger_append(gw, &e);
    if (gw->ledger_lost) return -ENOMEM;
  }
  return 0;
}

static void handle_statement(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__StatementRequest *r = env->statement_request;
  Hourglass__V1__Statement m = HOURGLASS__V1__STATEMENT__INIT;
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(STATEMENT);
  out.statement = &m;
  m.ref_seq = env->seq;
  uint32_t acct = st->account;
  if (st->role == HG_ROLE_RISK_VIEWER) acct = r->has_account ? r->account : 0;
  else if (r->has_account && r->account != 0 && r->account != acct) acct = 0;
  account_t *a = acct != 0 ? account_find(gw, acct) : NULL;
  /* Another firm's account, or another account of a trader, answers like
   * one that does not exist. */
  if (a == NULL || (st->role == HG_ROLE_RISK_VIEWER && a->firm != st->firm)) {
    m.has_reason = 1;
    m.reason = REJ(UNKNOWN_ACCOUNT);
    stream_send_idx(gw, si, &out);
    return;
  }
  if (r->base.n_unknown_fields != 0 || r->instrument_id == HG_CLR_NO_INSTRUMENT ||
      gw->ledger_lost) {
    m.has_reason = 1;
    m.reason = gw->ledger_lost ? REJ(UNAVAILABLE) : REJ(INVALID_REQUEST);
    stream_send_idx(gw, si, &out);
    return;
  }
  /* A smaller configured frame gets smaller pages (never below one entry). */
  uint32_t page = STMT_PAGE_MAX, fixed = 512 + STMT_POS_MAX * 48;
  if (gw->cfg.max_frame < fixed + STMT_PAGE_MAX * 104)
    page = gw->cfg.max_frame > fixed + 104 ? (gw->cfg.max_frame - fixed) / 104 : 1;
  size_t per = sizeof(Hourglass__V1__LedgerEntry) + sizeof(void *);
  size_t pos_need = STMT_POS_MAX * (sizeof(Hourglass__V1__Position) + sizeof(void *));
  /* Taken from the frame arena after the request it answers. */
  uint8_t *mem = gw->arena.allocator.alloc(gw->arena.allocator.allocator_data,
                                           pos_need + page * per);
  if (mem == NULL) {
    m.has_reason = 1;
    m.reason = REJ(GATEWAY_FULL);
    stream_send_idx(gw, si, &out);
    return;
  }
  Hourglass__V1__Position *pos = (void *)mem;
  Hourglass__V1__Position **pp = (void *)(pos + STMT_POS_MAX);
  Hourglass__V1__LedgerEntry *le = (void *)(pp + STMT_POS_MAX);
  Hourglass__V1__LedgerEntry **lp = (void *)(le + page);
  size_t n = 0;
  uint32_t inst = r->instrument_id;
  for (uint64_t k = a->lhead; k != 0; k = gw->ledger_next[k - 1]) {
    const hg_ledger_entry_t *x = &gw->ledger[k - 1];
    if (x->index < r->from_index || (inst != 0 && x->instrument != inst)) continue;
    if (n == page) {
      m.has_next_index = 1;
      m.next_index = x->index;
      break;
    }
    hourglass__v1__ledger_entry__init(&le[n]);
    le[n].index = x->index;
    le[n].seq = x->seq;
    le[n].ts = x->ts;
    le[n].kind = x->kind;
    le[n].has_instrument_id = x->instrument != HG_CLR_NO_INSTRUMENT;
    le[n].instrument_id = le[n].has_instrument_id ? x->instrument : 0;
    le[n].amount = x->amount;
    le[n].balance = x->balance;
    le[n].has_price = x->price != 0;
    le[n].price = x->price;
    le[n].has_qty = x->qty != 0;
    le[n].qty = x->qty;
    lp[n] = &le[n];
    n++;
  }
  size_t np = fill_positions(gw, acct, 1, pos, pp, STMT_POS_MAX);
  m.has_account = 1;
  m.account = acct;
  m.has_instrument_id = inst != 0;
  m.instrument_id = inst;
  m.n_entries = n;
  m.entries = lp;
  m.has_cash = 1;
  m.cash = a->cash;
  m.n_positions = np;
  m.positions = pp;
  stream_send_idx(gw, si, &out);
}

/* "GPU.GRADE.YYYY-MM": grade and delivery month, when the symbol has them. */
static void split_symbol(const char *sym, char *grade, size_t gcap, char *month, size_t mcap) {
  grade[0] = month[0] = 0;
  const char *d1 = strchr(sym, '.');
  const char *d2 = d1 != NULL ? strchr(d1 + 1, '.') : NULL;
  if (d1 == NULL || d2 == NULL) return;
  snprintf(grade, gcap, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
  snprintf(month, mcap, "%s", d2 + 1);
}

static void handle_instruments(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  uint32_t cap = gw->cfg.max_instruments;
  /* Sized by max_instruments, so taken from the frame arena (after the
   * request it answers, which stays valid) rather than the stack. */
  size_t need = cap * (sizeof(Hourglass__V1__InstrumentInfo) + sizeof(void *) +
                       2 * (HG_SYMBOL_MAX + 1));
  uint8_t *mem = gw->arena.allocator.alloc(gw->arena.allocator.allocator_data, need);
  if (mem == NULL) {
    send_response(gw, si, env->seq, REJ(GATEWAY_FULL), NULL);
    return;
  }
  Hourglass__V1__InstrumentInfo *info = (void *)mem;
  Hourglass__V1__InstrumentInfo **ptr = (void *)(info + cap);
  char (*grade)[HG_SYMBOL_MAX + 1] = (void *)(ptr + cap);
  char (*month)[HG_SYMBOL_MAX + 1] = (void *)(grade + cap);
  size_t n = 0;
  for (uint32_t i = 0; i < cap; i++) {
    instr_t *in = &gw->instr[i];
    if (in->id == 0 || in->state == ISTATE(DELISTED)) continue;
    hourglass__v1__instrument_info__init(&info[n]);
    info[n].instrument_id = in->id;
    info[n].symbol = in->symbol;
    split_symbol(in->symbol, grade[n], sizeof grade[n], month[n], sizeof month[n]);
    info[n].grade = grade[n][0] ? grade[n] : NULL;
    info[n].delivery_month = month[n][0] ? month[n] : NULL;
    info[n].tick_size = in->params.tick_size;
    info[n].contract_unit = in->params.contract_unit;
    info[n].min_price = in->params.min_price;
    info[n].max_price = in->params.max_price;
    info[n].max_order_qty = in->params.max_order_qty;
    info[n].state = in->state;
    info[n].has_ref_price = info[n].has_band_low = info[n].has_band_high = 1;
    info[n].ref_price = in->ref_price;
    info[n].band_low = in->band_low;
    info[n].band_high = in->band_high;
    ptr[n] = &info[n];
    n++;
  }
  Hourglass__V1__InstrumentList m = HOURGLASS__V1__INSTRUMENT_LIST__INIT;
  m.ref_seq = env->seq;
  m.n_instruments = n;
  m.instruments = ptr;
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(INSTRUMENT_LIST);
  out.instrument_list = &m;
  stream_send_idx(gw, si, &out);
}

static void handle_md_subscribe(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__MarketDataSubscribe *r = env->md_subscribe;
  uint32_t depth = r->has_depth ? r->depth : 10;
  instr_t *in = instr_find(gw, r->instrument_id);
  uint32_t reason = 0;
  if (depth == 0 || depth > MAX_MD_DEPTH) reason = REJ(INVALID_REQUEST);
  else if (in == NULL || in->state == ISTATE(DELISTED)) reason = REJ(UNKNOWN_INSTRUMENT);
  if (reason != 0) {
    send_response(gw, si, env->seq, reason, NULL);
    return;
  }
  bool already = false;
  for (uint32_t k = 0; k < in->n_subs; k++) already |= in->subs[k] == c->idx;
  if (!already) {
    in->subs[in->n_subs++] = c->idx;
    c->n_md++;
  }
  md_snapshot(c, in, depth, env->seq);
}

static void handle_md_unsubscribe(conn_t *c, uint32_t si, const env_t *env) {
  instr_t *in = instr_find(c->gw, env->md_unsubscribe->instrument_id);
  uint32_t reason = in == NULL || in->state == ISTATE(DELISTED) ? REJ(UNKNOWN_INSTRUMENT)
                    : !md_unsubscribe(c, in)                     ? REJ(NOT_SUBSCRIBED)
                                                                 : 0;
  send_response(c->gw, si, env->seq, reason, NULL);
}

static void handle_drop_copy(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  if (!c->drop_copy) {
    c->drop_copy = 1;
    gw->drop_list[gw->n_drop++] = c->idx;
  }
  send_response(gw, si, env->seq, 0, NULL);
}

static bool symbol_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > HG_SYMBOL_MAX) return false;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

static void handle_settlement(conn_t *c, uint32_t si, const env_t *env);

static void handle_operator(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  hg_command_t cmd;
  memset(&cmd, 0, sizeof cmd);
  uint32_t reason = 0;
  if (env->body_case >= B(SET_PROVIDER_GRADE) && env->body_case <= B(LIST_CURVE)) {
    handle_settlement(c, si, env);
    return;
  }
  switch (env->body_case) {
  case B(LIST_INSTRUMENT): {
    const Hourglass__V1__ListInstrument *l = env->list_instrument;
    if (l->base.n_unknown_fields != 0 || !symbol_ok(l->symbol) ||
        (l->has_default_stp && (l->default_stp < 0 || l->default_stp > 4))) {
      reason = REJ(INVALID_REQUEST);
      break;
    }
    cmd.type = HG_COMMAND_LIST_INSTRUMENT;
    snprintf(cmd.u.list.symbol, sizeof cmd.u.list.symbol, "%s", l->symbol);
    hg_book_params_t *bp = &cmd.u.list.params;
    bp->instrument_id = l->instrument_id;
    bp->tick_size = l->tick_size;
    bp->contract_unit = l->contract_unit;
    bp->min_price = l->min_price;
    bp->max_price = l->max_price;
    bp->max_order_qty = l->max_order_qty;
    bp->ref_price = l->has_ref_price ? l->ref_price : 0;
    bp->band_bps = l->has_band_bps ? l->band_bps : 0;
    bp->max_orders = l->max_orders;
    bp->max_accounts = l->max_accounts;
    bp->default_stp = l->has_default_stp ? (uint8_t)l->default_stp : 0;
    break;
  }
  case B(DELIST_INSTRUMENT):
    cmd.type = HG_COMMAND_DELIST_INSTRUMENT;
    cmd.u.instrument.instrument_id = env->delist_instrument->instrument_id;
    break;
  case B(HALT):
    cmd.type = HG_COMMAND_HALT;
    cmd.u.instrument.instrument_id = env->halt->instrument_id;
    break;
  case B(RESUME):
    cmd.type = HG_COMMAND_RESUME;
    cmd.u.instrument.instrument_id = env->resume->instrument_id;
    break;
  case B(END_OF_SESSION):
    cmd.type = HG_COMMAND_END_OF_SESSION;
    cmd.u.end_of_session.session_date =
        env->end_of_session->has_session_date ? env->end_of_session->session_date : 0;
    break;
  case B(ADD_ACCOUNT):
    cmd.type = HG_COMMAND_ADD_ACCOUNT;
    cmd.u.add_account.account = env->add_account->account;
    cmd.u.add_account.firm = env->add_account->firm;
    break;
  case B(DEPOSIT):
    cmd.type = HG_COMMAND_DEPOSIT;
    cmd.u.cash.account = env->deposit->account;
    cmd.u.cash.amount = env->deposit->amount;
    break;
  case B(WITHDRAW):
    cmd.type = HG_COMMAND_WITHDRAW;
    cmd.u.cash.account = env->withdraw->account;
    cmd.u.cash.amount = env->withdraw->amount;
    break;
  case B(ADD_API_KEY): {
    const Hourglass__V1__AddApiKey *k = env->add_api_key;
    hg_key_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.key_id = k->key_id;
    rec.role = k->role;
    rec.account = k->has_account ? k->account : 0;
    rec.firm = k->has_firm ? k->firm : 0;
    /* A trading key must name an account the exchange knows, of the firm
     * given: drop copies and risk views follow the key's firm. */
    bool trades = rec.role == HG_ROLE_TRADER || rec.role == HG_ROLE_MARKET_MAKER;
    account_t *a = trades ? account_find(gw, rec.account) : NULL;
    if (k->secret.len >= 16 && k->secret.len <= 64) rec.secret_len = (uint8_t)k->secret.len;
    if (k->base.n_unknown_fields != 0 || hg_key_record_check(&rec) != 0) {
      reason = REJ(INVALID_REQUEST);
    } else if (trades && a == NULL) {
      reason = REJ(UNKNOWN_ACCOUNT);
    } else if (trades && a->firm != rec.firm) {
      reason = REJ(FIRM_MISMATCH);
    } else {
      memcpy(rec.secret, k->secret.data, k->secret.len);
      int rc = key_store(gw, &rec, 0);
      reason = rc == 0               ? 0
               : rc == HG_EINVAL     ? REJ(INVALID_REQUEST)
               : rc == HG_EEXISTS    ? REJ(KEY_EXISTS)
                                     : REJ(UNAVAILABLE);
      memset(&rec, 0, sizeof rec);
    }
    send_response(gw, si, env->seq, reason, NULL);
    return;
  }
  default:
    reason = REJ(INVALID_REQUEST);
  }
  if (reason == 0) reason = submit(gw, &cmd, P_OPERATOR, si, c, env->seq, NULL);
  if (reason != 0) send_response(gw, si, env->seq, reason, NULL);
}

/* ------------------------------------------------- settlement commands
 *
 * The nine settlement commands reach the journal as the state machine's own
 * messages. Each request is checked by encoding it as a journal Command and
 * decoding that with hg_command_decode(), so the gateway accepts exactly
 * what the journal would (strings, days, kinds, ranges). PublishSamples is
 * journaled HG_SAMPLES_PER_COMMAND samples at a time: its parts are pending
 * entries in a row, every one checked before the first is submitted, and
 * one SettlementResult answers the whole request after the last part. */

#define SETTLE_CMD_OFFSET (B(SET_PROVIDER_GRADE) - HOURGLASS__V1__COMMAND__BODY_SET_PROVIDER_GRADE)
/* Samples in one PublishSamples request: bounds the pending entries one
 * request takes (the client splits bigger files). */
#define MAX_SAMPLES_PER_REQUEST 1024u

/* env's settlement body (samples [from, from + n) for PublishSamples) as a
 * journal command. Returns 0 or REJ_INVALID_REQUEST. */
static uint32_t settle_build(const env_t *env, size_t from, size_t n, hg_command_t *cmd) {
  Hourglass__V1__Command m = HOURGLASS__V1__COMMAND__INIT;
  Hourglass__V1__PublishSamples ps;
  m.seq = 1; /* checked by the decoder only; the sequencer stamps the real one */
  m.ts = 0;
  m.body_case = (Hourglass__V1__Command__BodyCase)(env->body_case - SETTLE_CMD_OFFSET);
  switch (env->body_case) {
  case B(SET_PROVIDER_GRADE): m.set_provider_grade = env->set_provider_grade; break;
  case B(PUBLISH_SAMPLES):
    ps = *env->publish_samples;
    if (ps.base.n_unknown_fields != 0) return REJ(INVALID_REQUEST);
    ps.samples = env->publish_samples->samples + from;
    ps.n_samples = n;
    m.publish_samples = &ps;
    break;
  case B(DISCARD_SAMPLES): m.discard_samples = env->discard_samples; break;
  case B(COMPUTE_FIXING): m.compute_fixing = env->compute_fixing; break;
  case B(PUBLISH_FIXING): m.publish_fixing = env->publish_fixing; break;
  case B(FINALIZE_FIXING): m.finalize_fixing = env->finalize_fixing; break;
  case B(DAILY_SETTLEMENT): m.daily_settlement = env->daily_settlement; break;
  case B(EXPIRE): m.expire = env->expire; break;
  case B(LIST_CURVE): m.list_curve = env->list_curve; break;
  default: return REJ(INVALID_REQUEST);
  }
  uint8_t buf[HG_COMMAND_MAX_ENCODED];
  if (hourglass__v1__command__get_packed_size(&m) > sizeof buf) return REJ(INVALID_REQUEST);
  size_t len = hourglass__v1__command__pack(&m, buf);
  memset(cmd, 0, sizeof *cmd);
  return hg_command_decode(buf, len, cmd) == 0 ? 0 : REJ(INVALID_REQUEST);
}

/* A SettlementResult for a request refused before anything was submitted. */
static void settle_refuse(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, uint32_t command,
                          uint32_t reason, const char *text) {
  Hourglass__V1__SettlementResult r = HOURGLASS__V1__SETTLEMENT_RESULT__INIT;
  r.ref_seq = ref_seq;
  r.has_reason = 1;
  r.reason = reason;
  r.has_command = 1;
  r.command = command;
  r.text = (char *)text;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(SETTLEMENT_RESULT);
  env.settlement_result = &r;
  stream_send_idx(gw, stream, &env);
}

static void handle_settlement(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  uint32_t command = (uint32_t)env->body_case - SETTLE_CMD_OFFSET;
  size_t total = 1, per = 1;
  if (env->body_case == B(PUBLISH_SAMPLES)) {
    total = env->publish_samples->n_samples;
    per = HG_SAMPLES_PER_COMMAND;
    if (total == 0 || total > MAX_SAMPLES_PER_REQUEST) {
      settle_refuse(gw, si, env->seq, command, REJ(INVALID_REQUEST),
                    total == 0 ? "no samples" : "more than 1024 samples in one request");
      return;
    }
  }
  uint32_t parts = (uint32_t)((total + per - 1) / per);
  hg_command_t cmd;
  for (uint32_t k = 0; k < parts; k++) {
    size_t from = (size_t)k * per, n = total - from < per ? total - from : per;
    if (settle_build(env, from, n, &cmd) != 0) {
      char text[96];
      if (parts > 1) {
        snprintf(text, sizeof text, "invalid field among samples %zu..%zu (0-based)", from,
                 from + n - 1);
      } else {
        snprintf(text, sizeof text, "a field is missing or out of range");
      }
      settle_refuse(gw, si, env->seq, command, REJ(INVALID_REQUEST), text);
      return;
    }
  }
  if (gw->pend_next - gw->pend_tail + parts > gw->cfg.pending_capacity) {
    STAT_ADD(gw, st_busy);
    settle_refuse(gw, si, env->seq, command, REJ(BUSY), NULL);
    return;
  }
  pending_t *last = NULL;
  for (uint32_t k = 0; k < parts; k++) {
    size_t from = (size_t)k * per, n = total - from < per ? total - from : per;
    settle_build(env, from, n, &cmd);
    pending_t *p = NULL;
    uint32_t reason = submit(gw, &cmd, P_SETTLE, si, c, env->seq, &p);
    if (reason != 0) {
      if (last == NULL) {
        settle_refuse(gw, si, env->seq, command, reason, NULL);
        return;
      }
      /* The parts already queued are answered by the last of them. */
      last->refused = reason;
      break;
    }
    p->replied = 1; /* the generic Response paths stay silent: settle_done answers */
    p->part = k;
    p->parts = parts;
    last = p;
  }
  if (last != NULL) last->parts = last->part + 1;
}

/* The accumulator of p's request, reset when a new request's events start. */
static settle_acc_t *settle_acc(hg_gateway_t *gw, const pending_t *p) {
  settle_acc_t *a = &gw->sacc;
  uint64_t first = p->origin - p->part;
  if (a->owner != first) {
    Hourglass__V1__ContractDsp *dsp = a->dsp, **dspp = a->dspp;
    memset(a, 0, sizeof *a);
    a->dsp = dsp;
    a->dspp = dspp;
    a->owner = first;
    a->command = p->cmd.type;
  }
  return a;
}

/* Mirror upkeep for settlement events, whoever caused them, and the
 * gathering of a settlement request's result. */
static void settle_event(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p) {
  switch (ev->type) {
  case HG_XEV_VM:
  case HG_XEV_FINAL_SETTLEMENT: {
    account_t *ac = account_find(gw, ev->account);
    if (ac != NULL) ac->cash = ev->balance;
    if (ev->type == HG_XEV_FINAL_SETTLEMENT && ev->qty != 0)
      position_add(gw, ev->account, ev->instrument_id, ev->qty > 0 ? HG_SIDE_SELL : HG_SIDE_BUY,
                   ev->qty > 0 ? ev->qty : -ev->qty);
    break;
  }
  case HG_XEV_EXPIRED: {
    instr_t *in = instr_find(gw, ev->instrument_id);
    if (in != NULL) {
      in->state = ISTATE(DELISTED);
      md_status(gw, in);
      while (in->n_subs > 0) md_unsubscribe(&gw->conns[in->subs[0]], in);
      in->id = 0;
    }
    break;
  }
  default:
    break;
  }
  if (p == NULL || p->kind != P_SETTLE) return;
  settle_acc_t *a = settle_acc(gw, p);
  switch (ev->type) {
  case HG_XEV_REJECTED:
    if (a->reason == 0) {
      a->reason = ev->reason;
      if (ev->reason == HG_XREJ_SETTLEMENT_FAILED) a->error = (int32_t)ev->amount;
      if (p->cmd.type == HG_COMMAND_PUBLISH_SAMPLES) {
        a->reject_from = p->part * HG_SAMPLES_PER_COMMAND;
        a->reject_to = a->reject_from + p->cmd.u.samples.n - 1;
      }
    }
    break;
  case HG_XEV_GRADE_SET:
    a->day = ev->day;
    a->has_day = 1;
    break;
  case HG_XEV_SAMPLES:
    a->samples_accepted += (uint32_t)ev->amount;
    a->samples_staged = (uint32_t)ev->balance;
    a->day = ev->day;
    a->has_day = 1;
    break;
  case HG_XEV_SAMPLES_DISCARDED:
    a->samples_discarded = (uint32_t)ev->amount;
    a->day = ev->day;
    a->has_day = 1;
    break;
  case HG_XEV_FIXING:
    a->day = ev->day;
    a->has_day = 1;
    a->has_fixing = 1;
    a->fixing_value = ev->price;
    a->fixing_tier = ev->tier;
    a->fixing_status = ev->status;
    a->fixing_kind = ev->kind;
    a->fixing_outcome = ev->outcome;
    a->fixing_inputs = (uint32_t)ev->amount;
    break;
  case HG_XEV_DSP:
    if (a->n_dsp < gw->cfg.max_instruments) {
      Hourglass__V1__ContractDsp *d = &a->dsp[a->n_dsp++];
      hourglass__v1__contract_dsp__init(d);
      d->instrument_id = ev->instrument_id;
      d->dsp = ev->price;
      d->tier = ev->tier;
    }
    a->dsp_total++;
    break;
  case HG_XEV_CYCLE:
    a->cycle = 1;
    a->day = ev->day;
    a->has_day = 1;
    a->vm_sum = ev->amount;
    a->vm_paid = ev->lo;
    a->vm_received = ev->hi;
    a->day_orders = ev->qty;
    a->vm_entries = (uint32_t)ev->balance;
    break;
  case HG_XEV_FIXING_MISSING:
    if (a->n_missing < SACC_MISSING) {
      a->missing_day[a->n_missing] = ev->day;
      a->missing_status[a->n_missing++] = ev->status;
    }
    break;
  case HG_XEV_FINAL_SETTLEMENT:
    a->final_sum += ev->amount;
    a->fsp = ev->price;
    break;
  case HG_XEV_EXPIRED:
    a->expired = 1;
    a->instrument_id = ev->instrument_id;
    a->fsp = ev->price;
    a->positions_closed = (uint32_t)ev->amount;
    a->orders_cancelled = ev->qty;
    break;
  case HG_XEV_LISTED:
    if (a->n_listed < SACC_LISTED) a->listed[a->n_listed++] = ev->instrument_id;
    break;
  default:
    break;
  }
}

/* A part of a settlement request is done (or was never processed); after the
 * last part, the request's SettlementResult goes out. */
static void settle_done(hg_gateway_t *gw, pending_t *p, const hg_pipe_out_t *o) {
  settle_acc_t *a = settle_acc(gw, p);
  if (o->kind == HG_PIPE_DONE) {
    a->engine_seq = o->seq;
  } else if (a->reason == 0) {
    a->reason = o->kind == HG_PIPE_UNAVAILABLE ? REJ(UNAVAILABLE) : REJ(INVALID_REQUEST);
  }
  if (p->part + 1 < p->parts) return;
  if (a->reason == 0 && p->refused != 0) a->reason = p->refused;
  Hourglass__V1__SettlementResult r = HOURGLASS__V1__SETTLEMENT_RESULT__INIT;
  Hourglass__V1__MissingDay md[SACC_MISSING];
  Hourglass__V1__MissingDay *mdp[SACC_MISSING];
  char text[96];
  r.ref_seq = p->ref_seq;
  r.has_reason = a->reason != 0;
  r.reason = a->reason;
  r.has_command = 1;
  r.command = p->cmd.type;
  r.has_engine_seq = a->engine_seq != 0;
  r.engine_seq = a->engine_seq;
  r.has_error = a->error != 0;
  r.error = a->error;
  r.has_day = a->has_day;
  r.day = a->day;
  switch (p->cmd.type) {
  case HG_COMMAND_SET_PROVIDER_GRADE:
    r.has_day = 1;
    r.day = p->cmd.u.provider_grade.effective_day;
    break;
  case HG_COMMAND_PUBLISH_SAMPLES:
    r.has_samples_accepted = 1;
    r.samples_accepted = a->samples_accepted;
    r.has_samples_staged = 1;
    r.samples_staged = a->samples_staged;
    r.has_day = 1;
    r.day = p->cmd.u.samples.day;
    if (a->reason != 0 && a->reject_to >= a->reject_from && a->reject_to != 0) {
      snprintf(text, sizeof text, "samples %u..%u (0-based) refused", a->reject_from,
               a->reject_to);
      r.text = text;
    } else if (p->refused != 0) {
      snprintf(text, sizeof text, "only the first %u samples were queued",
               (p->part + 1) * HG_SAMPLES_PER_COMMAND);
      r.text = text;
    }
    break;
  case HG_COMMAND_DISCARD_SAMPLES:
    r.has_samples_discarded = 1;
    r.samples_discarded = a->samples_discarded;
    break;
  case HG_COMMAND_DAILY_SETTLEMENT:
    r.has_day = 1;
    r.day = p->cmd.u.daily.day;
    if (a->reason == REJ(NOT_IN_STATE) || a->reason == REJ(ALREADY_SETTLED)) {
      char d[11];
      hg_index_day_format(p->cmd.u.daily.day, d);
      if (a->reason == REJ(ALREADY_SETTLED))
        snprintf(text, sizeof text,
                 "%s is already settled: one cycle per day, in day order", d);
      else
        snprintf(text, sizeof text, "%s is not the next cycle: not before 16:00 UTC that day",
                 d);
      r.text = text;
    }
    if (a->cycle) {
      r.has_contracts_settled = 1;
      r.contracts_settled = a->dsp_total;
      r.has_vm_sum = 1;
      r.vm_sum = a->vm_sum;
      r.has_vm_paid = 1;
      r.vm_paid = a->vm_paid;
      r.has_vm_received = 1;
      r.vm_received = a->vm_received;
      r.has_vm_entries = 1;
      r.vm_entries = a->vm_entries;
      r.has_day_orders_expired = 1;
      r.day_orders_expired = a->day_orders;
    }
    break;
  case HG_COMMAND_EXPIRE:
    r.has_instrument_id = 1;
    r.instrument_id = p->cmd.u.expire.instrument_id;
    if (a->expired) {
      r.has_fsp = 1;
      r.fsp = a->fsp;
      r.has_positions_closed = 1;
      r.positions_closed = a->positions_closed;
      r.has_final_sum = 1;
      r.final_sum = a->final_sum;
      r.has_orders_cancelled = 1;
      r.orders_cancelled = a->orders_cancelled;
    }
    break;
  default:
    break;
  }
  if (a->has_fixing) {
    r.has_fixing_value = 1;
    r.fixing_value = a->fixing_value;
    r.has_fixing_tier = 1;
    r.fixing_tier = a->fixing_tier;
    r.has_fixing_status = 1;
    r.fixing_status = a->fixing_status;
    r.has_fixing_kind = 1;
    r.fixing_kind = a->fixing_kind;
    r.has_fixing_outcome = 1;
    r.fixing_outcome = a->fixing_outcome;
    r.has_fixing_inputs = a->fixing_inputs != 0;
    r.fixing_inputs = a->fixing_inputs;
  }
  r.n_contracts = a->n_dsp;
  for (size_t i = 0; i < r.n_contracts; i++) a->dspp[i] = &a->dsp[i];
  r.contracts = a->dspp;
  for (uint32_t i = 0; i < a->n_missing; i++) {
    hourglass__v1__missing_day__init(&md[i]);
    md[i].day = a->missing_day[i];
    md[i].status = a->missing_status[i];
    mdp[i] = &md[i];
  }
  r.n_missing = a->n_missing;
  r.missing = mdp;
  r.n_listed = a->n_listed;
  r.listed = a->listed;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(SETTLEMENT_RESULT);
  env.settlement_result = &r;
  stream_send_idx(gw, p->stream, &env);
  a->owner = 0;
}

/* ------------------------------------------------------------- dispatch */

/* A range (partly) older than the byte ring: every journal frame of it must
 * read back intact before the Retransmission promises `count` frames. The
 * count is bounded (retransmit_max), so these preads on the loop are too. */
static uint32_t rt_check_file(hg_gateway_t *gw, stream_t *st, uint64_t from, uint32_t count) {
  uint64_t oldest = hg_outlog_oldest(gw->outlog, st->key_id);
  if (oldest == 0 || from < oldest) return REJ(RETRANSMIT_EXPIRED);
  uint64_t end = from + count;
  if (st->n_ent > 0 && end > st->first_seq) end = st->first_seq;
  for (uint64_t s = from; s < end; s++) {
    size_t len;
    int rc = hg_outlog_read(gw->outlog, st->key_id, s, NULL, 0, &len);
    if (rc == HG_ECORRUPT) return REJ(RETRANSMIT_CORRUPT);
    if (rc == HG_ERANGE) return REJ(RETRANSMIT_EXPIRED);
    if (rc != 0) {
      gw_log(gw, HG_LOG_WARN, "retransmission: frame missing from the outbound journal: %s",
             hg_strerror(rc));
      return REJ(RETRANSMIT_RANGE);
    }
  }
  return 0;
}

static void handle_retransmit(conn_t *c, stream_t *st, const Hourglass__V1__RetransmitRequest *r) {
  hg_gateway_t *gw = c->gw;
  Hourglass__V1__Retransmission m = HOURGLASS__V1__RETRANSMISSION__INIT;
  m.from_seq = r->from_seq;
  m.count = r->count;
  uint32_t reason = 0;
  if (r->base.n_unknown_fields != 0 || r->count == 0 || r->count > gw->cfg.retransmit_max ||
      r->from_seq == 0) {
    reason = REJ(INVALID_REQUEST);
  } else if (r->from_seq + r->count > st->next_seq) {
    reason = REJ(RETRANSMIT_RANGE);
  } else if (st->n_ent == 0 || r->from_seq < st->first_seq) {
    reason = rt_check_file(gw, st, r->from_seq, r->count);
  }
  if (reason != 0) {
    m.has_reason = 1;
    m.reason = reason;
  }
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(RETRANSMISSION);
  env.retransmission = &m;
  conn_send(c, &env);
  if (reason != 0 || !c->used) return;
  c->rt_next = r->from_seq;
  c->rt_end = r->from_seq + r->count;
  c->sess.retransmitting = 1;
  rt_pump(c);
}

static void send_gap(conn_t *c, uint64_t expected, uint64_t received) {
  Hourglass__V1__SequenceGap g = HOURGLASS__V1__SEQUENCE_GAP__INIT;
  g.expected = expected;
  g.received = received;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(SEQUENCE_GAP);
  env.sequence_gap = &g;
  conn_send(c, &env);
}

static void handle_frame(conn_t *c, const uint8_t *body, size_t len) {
  hg_gateway_t *gw = c->gw;
  env_t *env = NULL;
  if (hg_wire_decode(&gw->arena, body, len, &env) != 0) {
    conn_terminate(c, TERM(DECODE_FAILED), "frame is not a valid Envelope");
    return;
  }
  uint32_t code = 0;
  hg_sess_verdict_t v = hg_sess_on_frame(&c->sess, env, now_mono(), &code);
  switch (v) {
  case HG_SV_TERMINATE:
    conn_terminate(c, code, NULL);
    return;
  case HG_SV_LOGIN:
    handle_login(c, env->login);
    return;
  case HG_SV_DUPLICATE:
    return;
  case HG_SV_SESSION:
    if (env->body_case == B(LOGOUT)) {
      conn_terminate(c, TERM(LOGOUT), NULL);
    } else if (env->body_case == B(RETRANSMIT_REQUEST)) {
      handle_retransmit(c, conn_stream(c), env->retransmit_request);
    }
    return; /* a heartbeat only refreshed the receive timer */
  case HG_SV_APP_GAP:
    send_gap(c, c->sess.gap_expected, env->seq);
    break;
  case HG_SV_APP:
    break;
  }
  stream_t *st = conn_stream(c);
  uint32_t si = c->stream;
  uint32_t body_case = (uint32_t)env->body_case;
  if (!role_allows(st->role, body_case)) {
    uint32_t req = body_case == B(NEW_ORDER) ? REQ(NEW_ORDER)
                   : body_case == B(CANCEL)  ? REQ(CANCEL)
                   : body_case == B(REPLACE) ? REQ(REPLACE)
                                             : 0;
    if (req != 0) {
      reject_echo_t echo = body_case == B(NEW_ORDER) ? new_order_echo(env->new_order)
                           : body_case == B(REPLACE)
                               ? (reject_echo_t){-1, env->replace->new_price, env->replace->new_qty}
                               : NO_ECHO;
      send_order_reject(gw, si, env->seq, req, REJ(NOT_PERMITTED), 0, 0, 0, 0, echo);
    } else {
      send_response(gw, si, env->seq, REJ(NOT_PERMITTED), NULL);
    }
    return;
  }
  switch (env->body_case) {
  case B(NEW_ORDER): handle_new_order(c, st, si, env); break;
  case B(CANCEL): handle_cancel(c, st, si, env); break;
  case B(REPLACE): handle_replace(c, st, si, env); break;
  case B(MASS_CANCEL): handle_mass_cancel(c, st, si, env); break;
  case B(ORDER_STATUS_REQUEST): handle_order_status(c, st, si, env); break;
  case B(MASS_QUOTE): handle_mass_quote(c, st, si, env); break;
  case B(QUOTE_GROUP_RESET): handle_quote_reset(c, st, si, env); break;
  case B(POSITIONS_REQUEST): handle_positions(c, st, si, env); break;
  case B(INSTRUMENTS_REQUEST): handle_instruments(c, si, env); break;
  case B(MD_SUBSCRIBE): handle_md_subscribe(c, si, env); break;
  case B(MD_UNSUBSCRIBE): handle_md_unsubscribe(c, si, env); break;
  case B(DROP_COPY_SUBSCRIBE): handle_drop_copy(c, si, env); break;
  case B(STATEMENT_REQUEST): handle_statement(c, st, si, env); break;
  default: handle_operator(c, si, env); break;
  }
}

/* ----------------------------------------------------------------- events */

static uint32_t owner_stream(hg_gateway_t *gw, const order_t *o, uint32_t account) {
  if (o != NULL && o->stream != NONE32) return o->stream;
  account_t *a = account_find(gw, account);
  return a != NULL ? a->stream : NONE32;
}

/* Sends er to the owning stream and, as a drop copy, to the subscribed risk
 * viewers of the account's firm. */
static void route_er(hg_gateway_t *gw, uint32_t stream, uint32_t account,
                     Hourglass__V1__ExecutionReport *er) {
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(EXECUTION_REPORT);
  env.execution_report = er;
  stream_send_idx(gw, stream, &env);
  if (gw->n_drop == 0) return;
  account_t *a = account_find(gw, account);
  if (a == NULL) return;
  er->has_drop_copy = 1;
  er->drop_copy = 1;
  er->has_account = 1;
  er->account = account;
  er->has_ref_seq = 0;
  for (uint32_t i = 0; i < gw->n_drop; i++) {
    conn_t *v = &gw->conns[gw->drop_list[i]];
    stream_t *vs = conn_stream(v);
    if (vs != NULL && vs->firm == a->firm) stream_send(gw, vs, &env);
  }
  er->has_drop_copy = 0;
  er->drop_copy = 0;
  er->has_account = 0;
  er->account = 0;
}

static void er_base(Hourglass__V1__ExecutionReport *er, uint32_t type,
                    const hg_exchange_event_t *ev) {
  hourglass__v1__execution_report__init(er);
  er->exec_type = type;
  er->instrument_id = ev->book.instrument_id;
  er->has_engine_seq = 1;
  er->engine_seq = ev->seq;
  er->has_ts = 1;
  er->ts = ev->ts;
}

static void er_order(Hourglass__V1__ExecutionReport *er, uint64_t oid, uint64_t clordid,
                     int side, int64_t price, int64_t qty, int64_t leaves, uint32_t group) {
  er->has_order_id = 1;
  er->order_id = oid;
  er->has_client_order_id = 1;
  er->client_order_id = clordid;
  er->has_side = 1;
  er->side = (Hourglass__V1__Side)side;
  er->has_price = 1;
  er->price = price;
  er->has_qty = 1;
  er->qty = qty;
  er->has_leaves = 1;
  er->leaves = leaves;
  er->has_quote_group = group != 0;
  er->quote_group = group;
}

static void set_ref(Hourglass__V1__ExecutionReport *er, pending_t *p) {
  if (p == NULL || p->kind == P_INTERNAL) return;
  er->has_ref_seq = 1;
  er->ref_seq = p->ref_seq;
  p->replied = 1;
}

static void on_book_event(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p) {
  const hg_book_event_t *be = &ev->book;
  Hourglass__V1__ExecutionReport er;
  switch (be->type) {
  case HG_EV_ACCEPTED: {
    uint32_t stream = p != NULL ? p->stream : NONE32;
    order_t *o = order_add(gw, be, stream == NONE32 ? owner_stream(gw, NULL, be->account) : stream);
    if (o != NULL && p != NULL) {
      o->cod = p->cod;
      o->conn_gen = p->conn_gen;
      o->quote_group = p->quote_group;
    } else if (o == NULL) {
      gw_log(gw, HG_LOG_WARN, "order mirror full; an order is not tracked");
    }
    er_base(&er, EXEC(NEW), ev);
    er_order(&er, be->order_id, be->client_order_id, be->side, be->price, be->qty, be->leaves,
             p != NULL ? p->quote_group : 0);
    set_ref(&er, p);
    route_er(gw, o != NULL ? o->stream : owner_stream(gw, NULL, be->account), be->account, &er);
    if (o == NULL || o->stream == NONE32) break;
    stream_t *st = &gw->streams[o->stream];
    conn_t *live = stream_conn(gw, st);
    /* Entered by a connection that is gone (cancel-on-disconnect), or a
     * quote already superseded by a newer one: cancel it now. */
    if (o->cod && (live == NULL || live->gen != o->conn_gen)) {
      cancel_internal(gw, o);
    } else if (o->quote_group != 0 && p != NULL) {
      instr_t *in = instr_find(gw, o->instrument_id);
      mmp_t *m = mmp_find(st, o->quote_group, false);
      if ((in != NULL && st->quote_gen[instr_slot(gw, in) * 2 + o->side] != p->quote_gen) ||
          (m != NULL && m->tripped))
        cancel_internal(gw, o);
    }
    break;
  }
  case HG_EV_REJECTED: {
    er_base(&er, EXEC(REJECTED), ev);
    er.has_order_id = be->order_id != 0;
    er.order_id = be->order_id;
    er.has_client_order_id = be->client_order_id != 0;
    er.client_order_id = be->client_order_id;
    er.has_reason = 1;
    er.reason = be->reason;
    er.has_request = 1;
    er.request = p != NULL && p->kind == P_QUOTE ? REQ(QUOTE)
                 : be->cmd == HG_CMD_CANCEL      ? REQ(CANCEL)
                 : be->cmd == HG_CMD_REPLACE     ? REQ(REPLACE)
                                                 : REQ(NEW_ORDER);
    er.has_quote_group = p != NULL && p->quote_group != 0;
    er.quote_group = p != NULL ? p->quote_group : 0;
    /* The request as submitted (a cancel has no price or quantity). */
    if (be->cmd == HG_CMD_NEW)
      er_echo(&er, (reject_echo_t){be->side, be->price, be->qty});
    else if (be->cmd == HG_CMD_REPLACE)
      er_echo(&er, (reject_echo_t){-1, be->price, be->qty});
    if (HG_CLR_IS_REJECT(be->reason)) { /* the clearing's check: its numbers */
      er.has_risk_equity = er.has_risk_initial_margin = er.has_risk_ref_price = 1;
      er.has_risk_position = er.has_risk_low = er.has_risk_high = 1;
      er.risk_equity = ev->balance;
      er.risk_initial_margin = ev->margin;
      er.risk_ref_price = ev->price;
      er.risk_position = ev->qty;
      er.risk_low = ev->lo;
      er.risk_high = ev->hi;
    }
    if (p != NULL && p->kind == P_INTERNAL) break; /* our own cancel raced a fill */
    set_ref(&er, p);
    route_er(gw, p != NULL ? p->stream : owner_stream(gw, NULL, be->account), be->account, &er);
    break;
  }
  case HG_EV_FILL: {
    order_t *t = order_find(gw, be->order_id);
    order_t *m = order_find(gw, be->maker_order_id);
    instr_t *in = instr_find(gw, be->instrument_id);
    position_add(gw, be->account, be->instrument_id, be->side, be->qty);
    position_add(gw, be->maker_account, be->instrument_id, be->side ^ 1, be->qty);
    /* Taker. */
    er_base(&er, EXEC(FILL), ev);
    er_order(&er, be->order_id, be->client_order_id, be->side, be->price, be->qty, be->leaves,
             t != NULL ? t->quote_group : 0);
    route_er(gw, owner_stream(gw, t, be->account), be->account, &er);
    /* Maker. */
    er_base(&er, EXEC(FILL), ev);
    er_order(&er, be->maker_order_id, be->maker_client_order_id, be->side ^ 1, be->price,
             be->qty, be->maker_leaves, m != NULL ? m->quote_group : 0);
    er.has_maker = 1;
    er.maker = 1;
    route_er(gw, owner_stream(gw, m, be->maker_account), be->maker_account, &er);
    if (in != NULL) {
      Hourglass__V1__MarketDataTrade tr = HOURGLASS__V1__MARKET_DATA_TRADE__INIT;
      tr.instrument_id = in->id;
      tr.md_seq = ++in->md_seq;
      tr.price = be->price;
      tr.qty = be->qty;
      tr.aggressor = (Hourglass__V1__Side)be->side;
      tr.ts = ev->ts;
      env_t env = HOURGLASS__V1__ENVELOPE__INIT;
      env.body_case = B(MD_TRADE);
      env.md_trade = &tr;
      md_send_all(gw, in, &env);
    }
    if (t != NULL) {
      t->leaves = be->leaves;
      mmp_fill(gw, t, be->qty, ev->ts);
      if (t->leaves <= 0) order_remove(gw, t);
    }
    if (m != NULL) {
      m->leaves = be->maker_leaves;
      mmp_fill(gw, m, be->qty, ev->ts);
      if (m->leaves <= 0) order_remove(gw, m);
    }
    break;
  }
  case HG_EV_CANCELLED: {
    order_t *o = order_find(gw, be->order_id);
    er_base(&er, EXEC(CANCELLED), ev);
    er_order(&er, be->order_id, be->client_order_id, be->side, be->price, be->qty, 0,
             o != NULL ? o->quote_group : 0);
    er.has_reason = 1;
    er.reason = be->reason;
    if (p != NULL && p->kind == P_CANCEL) set_ref(&er, p);
    route_er(gw, owner_stream(gw, o, be->account), be->account, &er);
    if (o != NULL) order_remove(gw, o);
    break;
  }
  case HG_EV_REPLACED: {
    order_t *o = order_find(gw, be->order_id);
    if (o != NULL) {
      o->price = be->price;
      o->qty = be->qty;
      o->leaves = be->leaves;
    }
    er_base(&er, EXEC(REPLACED), ev);
    er_order(&er, be->order_id, be->client_order_id, be->side, be->price, be->qty, be->leaves,
             o != NULL ? o->quote_group : 0);
    er.has_priority_kept = 1;
    er.priority_kept = be->priority_kept;
    set_ref(&er, p);
    route_er(gw, owner_stream(gw, o, be->account), be->account, &er);
    break;
  }
  case HG_EV_LEVEL: {
    instr_t *in = instr_find(gw, be->instrument_id);
    if (in == NULL) break;
    level_set(in, be->side, be->price, be->qty);
    Hourglass__V1__MarketDataLevel lv = HOURGLASS__V1__MARKET_DATA_LEVEL__INIT;
    lv.instrument_id = in->id;
    lv.md_seq = ++in->md_seq;
    lv.side = (Hourglass__V1__Side)be->side;
    lv.price = be->price;
    lv.qty = be->qty;
    env_t env = HOURGLASS__V1__ENVELOPE__INIT;
    env.body_case = B(MD_LEVEL);
    env.md_level = &lv;
    md_send_all(gw, in, &env);
    break;
  }
  default:
    break;
  }
}

static void op_response(hg_gateway_t *gw, pending_t *p, const hg_exchange_event_t *ev,
                        uint32_t reason) {
  if (p == NULL || p->kind == P_INTERNAL || p->replied) return;
  Hourglass__V1__Response r = HOURGLASS__V1__RESPONSE__INIT;
  r.ref_seq = p->ref_seq;
  r.has_reason = reason != 0;
  r.reason = reason;
  r.has_engine_seq = 1;
  r.engine_seq = ev->seq;
  r.has_instrument_id = ev->instrument_id != 0;
  r.instrument_id = ev->instrument_id;
  r.has_account = ev->account != 0;
  r.account = ev->account;
  r.has_amount = ev->amount != 0;
  r.amount = ev->amount;
  r.has_balance = ev->balance != 0;
  r.balance = ev->balance;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(RESPONSE);
  env.response = &r;
  stream_send_idx(gw, p->stream, &env);
  p->replied = 1;
}

static void settle_event(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p);
static void settle_done(hg_gateway_t *gw, pending_t *p, const hg_pipe_out_t *o);

static void on_event(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p) {
  instr_t *in;
  ledger_event(gw, ev);
  settle_event(gw, ev, p);
  switch (ev->type) {
  case HG_XEV_BOOK:
    on_book_event(gw, ev, p);
    break;
  case HG_XEV_REJECTED:
    if (p != NULL && p->kind == P_MASS_CANCEL) {
      send_response(gw, p->stream, p->ref_seq, ev->reason, NULL);
      p->replied = 1;
    } else {
      op_response(gw, p, ev, ev->reason);
    }
    break;
  case HG_XEV_LISTED: {
    /* The event carries the symbol and parameters, whoever listed it (an
     * operator session, the curve roll at expiry, the demo). */
    char sym[HG_SYMBOL_MAX + 1];
    memcpy(sym, ev->listed.symbol, sizeof sym);
    sym[HG_SYMBOL_MAX] = '\0';
    in = instr_add(gw, ev->instrument_id, sym, &ev->listed.params, ISTATE(TRADING));
    if (in == NULL) gw_log(gw, HG_LOG_WARN, "instrument table full; market data missing");
    else instr_reference(in, ev->price, ev->lo, ev->hi);
    op_response(gw, p, ev, 0);
    break;
  }
  case HG_XEV_REFERENCE:
    in = instr_find(gw, ev->instrument_id);
    if (in != NULL) instr_reference(in, ev->price, ev->lo, ev->hi);
    break;
  case HG_XEV_DELISTED:
  case HG_XEV_HALTED:
  case HG_XEV_RESUMED:
    in = instr_find(gw, ev->instrument_id);
    if (in != NULL) {
      in->state = ev->type == HG_XEV_HALTED    ? ISTATE(HALTED)
                  : ev->type == HG_XEV_RESUMED ? ISTATE(TRADING)
                                               : ISTATE(DELISTED);
      md_status(gw, in);
      if (ev->type == HG_XEV_DELISTED) {
        while (in->n_subs > 0) md_unsubscribe(&gw->conns[in->subs[0]], in);
        in->id = 0;
      }
    }
    op_response(gw, p, ev, 0);
    break;
  case HG_XEV_ACCOUNT_ADDED:
    if (account_add(gw, ev->account, ev->firm, 0) == NULL)
      gw_log(gw, HG_LOG_WARN, "account table full");
    op_response(gw, p, ev, 0);
    break;
  case HG_XEV_DEPOSIT:
  case HG_XEV_WITHDRAWAL: {
    account_t *a = account_find(gw, ev->account);
    if (a != NULL) a->cash = ev->balance;
    op_response(gw, p, ev, 0);
    break;
  }
  default:
    op_response(gw, p, ev, 0);
    break;
  }
}

static pending_t *pending_of(hg_gateway_t *gw, uint64_t origin) {
  if ((origin & ~ORIGIN_MASK) != ORIGIN_TAG) return NULL;
  uint64_t k = origin & ORIGIN_MASK;
  if (k < (gw->pend_tail & ORIGIN_MASK) || k >= (gw->pend_next & ORIGIN_MASK)) return NULL;
  pending_t *p = pend_at(gw, k);
  return p->origin == origin ? p : NULL;
}

static void retire(hg_gateway_t *gw, pending_t *p) {
  p->done = 1;
  if (p->cmd.type == HG_COMMAND_NEW_ORDER) gw->orders_reserved--;
  while (gw->pend_tail < gw->pend_next && pend_at(gw, gw->pend_tail)->done) {
    pend_at(gw, gw->pend_tail)->origin = 0;
    gw->pend_tail++;
  }
}

static void drain(hg_gateway_t *gw) {
  if (gw->pipe == NULL) return;
  for (;;) {
    size_t n = hg_pipeline_poll(gw->pipe, gw->drain, sizeof gw->drain / sizeof gw->drain[0]);
    if (n == 0) break;
    for (size_t i = 0; i < n; i++) {
      const hg_pipe_out_t *o = &gw->drain[i];
      pending_t *p = pending_of(gw, o->origin);
      if (o->kind == HG_PIPE_EVENT) {
        on_event(gw, &o->event, p);
      } else if (p != NULL && p->kind == P_SETTLE) {
        settle_done(gw, p, o);
        retire(gw, p);
      } else if (p != NULL) {
        if (o->kind == HG_PIPE_UNAVAILABLE) {
          if (p->kind == P_NEW || p->kind == P_CANCEL || p->kind == P_REPLACE ||
              p->kind == P_QUOTE) {
            uint32_t req = p->kind == P_NEW      ? REQ(NEW_ORDER)
                           : p->kind == P_CANCEL ? REQ(CANCEL)
                           : p->kind == P_QUOTE  ? REQ(QUOTE)
                                                 : REQ(REPLACE);
            send_order_reject(gw, p->stream, p->ref_seq, req, REJ(UNAVAILABLE), 0, 0, 0,
                              p->quote_group, cmd_echo(&p->cmd));
          } else if (p->kind != P_INTERNAL) {
            send_response(gw, p->stream, p->ref_seq, REJ(UNAVAILABLE), NULL);
          }
        } else if (!p->replied && (p->kind == P_MASS_CANCEL || p->kind == P_OPERATOR)) {
          send_response(gw, p->stream, p->ref_seq, 0, NULL);
        }
        retire(gw, p);
      }
    }
  }
  flush_dirty(gw);
}

/* ------------------------------------------------------------ loop handles */

static void on_wake(uv_async_t *a) { drain(a->data); }

static void on_tick(uv_timer_t *t) {
  hg_gateway_t *gw = t->data;
  uint64_t now = now_mono();
  for (uint32_t i = 0; i < gw->n_conns; i++) {
    conn_t *c = &gw->conns[i];
    if (!c->used || uv_is_closing((uv_handle_t *)&c->tcp)) continue;
    if (c->closing) {
      /* A peer that does not read its Terminate is cut off after a second. */
      if (now - c->closing_since > 1000000000ull) conn_close(c);
      continue;
    }
    uint32_t code = 0;
    switch (hg_sess_tick(&c->sess, now, &code)) {
    case HG_ST_HEARTBEAT: {
      Hourglass__V1__Heartbeat hb = HOURGLASS__V1__HEARTBEAT__INIT;
      env_t env = HOURGLASS__V1__ENVELOPE__INIT;
      env.body_case = B(HEARTBEAT);
      env.heartbeat = &hb;
      conn_send(c, &env);
      break;
    }
    case HG_ST_WARN: {
      Hourglass__V1__Warning w = HOURGLASS__V1__WARNING__INIT;
      w.code = HOURGLASS__V1__WARNING_CODE__WARN_KEEPALIVE_LAPSED;
      w.text = "nothing received for one keepalive interval";
      env_t env = HOURGLASS__V1__ENVELOPE__INIT;
      env.body_case = B(WARNING);
      env.warning = &w;
      conn_send(c, &env);
      break;
    }
    case HG_ST_TERMINATE:
      conn_terminate(c, code, NULL);
      break;
    case HG_ST_NONE:
      break;
    }
  }
  for (uint32_t s = 0; s < gw->n_streams; s++) {
    stream_t *st = &gw->streams[s];
    if (st->cod_retry != 0) st->cod_retry = cod_cancel(gw, st, st->cod_gen);
  }
  flush_dirty(gw);
}

static const char *refusal_text(uint32_t code) {
  return code == TERM(ADDRESS_LIMIT) ? "too many connections awaiting login from this address"
                                     : "too many connections awaiting login";
}

static void on_refusal_closed(uv_handle_t *h) {
  refusal_t *r = h->data;
  hg_gateway_t *gw = r->gw;
  r->next = gw->free_refusal;
  gw->free_refusal = (uint32_t)(r - gw->refusals);
  if (gw->accept_waiting) admit(gw);
}

/* Over the global limit: accept through a refusal handle, write the
 * TERM_SERVER_BUSY frame encoded at create (a fresh socket's empty send
 * buffer takes it whole; if it did not, the close is bare) and close. */
static void refuse_busy(hg_gateway_t *gw) {
  refusal_t *r = &gw->refusals[gw->free_refusal];
  gw->free_refusal = r->next;
  uv_tcp_init(&gw->loop, &r->tcp);
  r->tcp.data = r;
  if (uv_accept((uv_stream_t *)&gw->listener, (uv_stream_t *)&r->tcp) == 0) {
    STAT_ADD(gw, st_connections);
    STAT_ADD(gw, st_refused);
    uv_buf_t b = uv_buf_init((char *)gw->busy_frame, (unsigned)gw->busy_len);
    (void)uv_try_write((uv_stream_t *)&r->tcp, &b, 1);
  }
  uv_close((uv_handle_t *)&r->tcp, on_refusal_closed);
}

/* Takes the connection the listener holds (see "Admission" in
 * hourglass/gateway.h). Without what it needs (a refusal handle over the
 * global limit, else a connection slot) it leaves the connection unaccepted,
 * which pauses libuv's accepting, and sets accept_waiting: the close that
 * frees one calls back here. A slot is then always on its way back: every
 * slot not held by a session or by a connection awaiting login (fewer than
 * max_sessions and max_unauthenticated) is closing. */
static void admit(hg_gateway_t *gw) {
  gw->accept_waiting = 0;
  if (uv_is_closing((uv_handle_t *)&gw->listener)) return;
  if (gw->n_unauth >= gw->cfg.max_unauthenticated) {
    if (gw->free_refusal == NONE32) {
      gw->accept_waiting = 1;
      return;
    }
    refuse_busy(gw);
    return;
  }
  if (gw->free_conn == NONE32) {
    gw->accept_waiting = 1;
    return;
  }
  conn_t *c = &gw->conns[gw->free_conn];
  gw->free_conn = c->dirty_next;
  uint32_t idx = c->idx;
  uint8_t *in = c->in, *o0 = c->out[0], *o1 = c->out[1];
  memset(c, 0, sizeof *c);
  c->idx = idx;
  c->in = in;
  c->out[0] = o0;
  c->out[1] = o1;
  c->gw = gw;
  c->used = 1;
  c->gen = ++gw->gen_counter;
  c->stream = NONE32;
  c->dirty_next = NONE32;
  c->wreq.data = c;
  uv_tcp_init(&gw->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept((uv_stream_t *)&gw->listener, (uv_stream_t *)&c->tcp) != 0 ||
      peer_addr(&c->tcp, c->peer) != 0) {
    conn_close(c);
    return;
  }
  STAT_ADD(gw, st_connections);
  uv_tcp_nodelay(&c->tcp, 1);
  if (gw->cfg.socket_sndbuf != 0) {
    int v = (int)gw->cfg.socket_sndbuf;
    uv_send_buffer_size((uv_handle_t *)&c->tcp, &v);
  }
  hg_sess_init(&c->sess, now_mono(), (uint64_t)gw->cfg.login_timeout_ms * 1000000u);
  peer_count_t *e = peer_find(gw, c->peer, true);
  if (e == NULL || e->n >= gw->cfg.max_unauthenticated_per_address) {
    /* Refused through its slot: it never counts as awaiting login. */
    uint32_t code = e == NULL ? TERM(SERVER_BUSY) : TERM(ADDRESS_LIMIT);
    STAT_ADD(gw, st_refused);
    conn_terminate(c, code, refusal_text(code));
    flush_dirty(gw);
    return;
  }
  e->n++;
  c->unauth = 1;
  gw->n_unauth++;
  STAT_SET(gw, st_unauth, gw->n_unauth);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
    conn_close(c);
    return;
  }
  c->reading = 1;
}

static void on_connection(uv_stream_t *server, int status) {
  if (status < 0) return;
  admit(server->data);
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* How long a stop waits for the results of commands already submitted. */
#define STOP_SETTLE_NS (2000ull * 1000000ull)
#define STOP_WAIT_NS (10ll * 1000000ll)

/* At a stop, before the sessions end: the results of every command already
 * submitted (the engine applies them whatever happens next) are drained
 * into the keys' streams and sent, so that no order the exchange keeps is
 * missing from its key's stream. Bounded; the loop reads no socket
 * meanwhile, so only internal cancels can add commands. Loop thread. */
static void settle_in_flight(hg_gateway_t *gw) {
  uint64_t deadline = now_mono() + STOP_SETTLE_NS;
  drain(gw);
  while (gw->pend_tail != gw->pend_next) {
    uint64_t now = now_mono();
    if (now >= deadline) {
      gw_log(gw, HG_LOG_WARN,
             "stop: %" PRIu64 " commands still unanswered after %llu ms; their reports are "
             "not sequenced", gw->pend_next - gw->pend_tail,
             (unsigned long long)(STOP_SETTLE_NS / 1000000u));
      return;
    }
    /* Short waits: a wake-up that went to the loop's async handle instead
     * costs at most one of them. */
    if (hg_pipeline_wait(gw->pipe, STOP_WAIT_NS) == -ECANCELED) {
      drain(gw);
      return; /* the pipeline stopped first: nothing more will come */
    }
    drain(gw);
  }
}

static void on_stop(uv_async_t *a) {
  hg_gateway_t *gw = a->data;
  settle_in_flight(gw);
  gw->stopping = 1;
  for (uint32_t i = 0; i < gw->n_conns; i++) {
    conn_t *c = &gw->conns[i];
    if (c->used && !c->closing) conn_terminate(c, TERM(SERVER_SHUTDOWN), NULL);
  }
  flush_dirty(gw);
  for (uint32_t i = 0; i < gw->n_conns; i++) conn_close(&gw->conns[i]);
  /* Streams that sequenced frames while disconnected keep their numbering. */
  for (uint32_t s = 0; s < gw->n_streams; s++) {
    char name[20];
    seq_name(name, gw->streams[s].key_id);
    int rc = hg_store_set_session_seq(gw->store, name, gw->streams[s].next_seq - 1);
    if (rc != 0) gw_log(gw, HG_LOG_ERROR, "saving a stream seq: %s", hg_strerror(rc));
  }
  uv_walk(&gw->loop, close_walk, NULL);
}

static void *loop_main(void *arg) {
  hg_gateway_t *gw = arg;
  /* Every socket write happens on this thread. A client that closes while we
   * write to it must cost that write an EPIPE, never the process a SIGPIPE,
   * whatever the embedding program does with the signal; blocked here, the
   * synchronous SIGPIPE of a write stays pending on this thread, unseen. */
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
  uv_run(&gw->loop, UV_RUN_DEFAULT);
  return NULL;
}

/* --------------------------------------------------------------- lifecycle */

void hg_gateway_config_init(hg_gateway_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
}

static void apply_defaults(hg_gateway_config_t *c) {
#define DEF(f, v) \
  if (c->f == 0) c->f = (v)
  DEF(key_map_size, (size_t)64 << 20);
  DEF(max_frame, HG_WIRE_DEFAULT_MAX_FRAME);
  DEF(max_sessions, 1024);
  DEF(max_unauthenticated, 64);
  DEF(max_unauthenticated_per_address, c->max_unauthenticated < 16 ? c->max_unauthenticated : 16);
  DEF(max_streams, 2 * c->max_sessions);
  DEF(login_timeout_ms, 5000);
  DEF(login_skew_ms, 5000);
  DEF(keepalive_min_ms, 50);
  DEF(keepalive_max_ms, 60000);
  DEF(tick_ms, 10);
  DEF(throttle_rate, 10000);
  DEF(throttle_burst, c->throttle_rate);
  DEF(out_high_water, 256u << 10);
  DEF(out_hard_cap, 4u << 20);
  DEF(retransmit_bytes, 256u << 10);
  DEF(retransmit_frames, 4096);
  DEF(retransmit_max, 1000);
  DEF(max_orders, 1u << 18);
  DEF(max_instruments, 64);
  DEF(max_accounts, 4096);
  DEF(max_positions, 1u << 16);
  DEF(pending_capacity, 16384);
  DEF(mmp_qty, 1000);
  DEF(mmp_window_ms, 1000);
#undef DEF
}

static void free_all(hg_gateway_t *gw) {
  if (gw->conns != NULL)
    for (uint32_t i = 0; i < gw->n_conns; i++) {
      free(gw->conns[i].in);
      free(gw->conns[i].out[0]);
      free(gw->conns[i].out[1]);
    }
  free(gw->conns);
  if (gw->streams != NULL)
    for (uint32_t i = 0; i < gw->cfg.max_streams; i++) {
      free(gw->streams[i].log);
      free(gw->streams[i].ent);
      free(gw->streams[i].quote_gen);
    }
  free(gw->streams);
  if (gw->instr != NULL)
    for (uint32_t i = 0; i < gw->cfg.max_instruments; i++) {
      free(gw->instr[i].lv[0]);
      free(gw->instr[i].lv[1]);
      free(gw->instr[i].subs);
    }
  free(gw->instr);
  free(gw->drop_list);
  free(gw->pend);
  free(gw->orders);
  free(gw->accounts);
  free(gw->positions);
  free(gw->ledger);
  free(gw->ledger_next);
  free(gw->sacc.dsp);
  free(gw->sacc.dspp);
  free(gw->peers);
  free(gw->refusals);
  map_free(&gw->stream_map);
  map_free(&gw->order_map);
  map_free(&gw->account_map);
  map_free(&gw->position_map);
  free(gw->arena_buf);
  free(gw->scratch);
  hg_outlog_close(gw->outlog);
  hg_store_close(gw->store);
  free(gw);
}

int hg_gateway_create(const hg_gateway_config_t *cfg_in, hg_gateway_t **out) {
  if (cfg_in == NULL || out == NULL || cfg_in->key_dir == NULL) return HG_EINVAL;
  hg_gateway_config_t cfg = *cfg_in;
  apply_defaults(&cfg);
  if (cfg.max_frame > HG_WIRE_MAX_FRAME_LIMIT || (cfg.pending_capacity & (cfg.pending_capacity - 1)) ||
      cfg.out_high_water >= cfg.out_hard_cap || cfg.out_hard_cap < cfg.max_frame * 2u ||
      cfg.keepalive_min_ms > cfg.keepalive_max_ms || cfg.retransmit_bytes < 1024 ||
      cfg.max_orders > (1u << 28) || cfg.max_accounts > (1u << 28) ||
      cfg.max_positions > (1u << 28) || cfg.rt_priority < 0 || cfg.rt_priority > HG_THREAD_RT_MAX ||
      cfg.max_unauthenticated > (1u << 24) ||
      cfg.max_unauthenticated_per_address > cfg.max_unauthenticated)
    return HG_EINVAL;
  hg_gateway_t *gw = calloc(1, sizeof *gw);
  if (gw == NULL) return -ENOMEM;
  gw->cfg = cfg;
  snprintf(gw->host, sizeof gw->host, "%s", cfg.host != NULL ? cfg.host : "127.0.0.1");
  gw->cfg.host = gw->host;
  gw->cfg.key_dir = NULL; /* not kept: the caller's string */
  int rc = hg_store_create(&gw->store);
  if (rc == 0) rc = hg_store_open(gw->store, cfg.key_dir, cfg.key_map_size);
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "key store: %s", hg_store_errmsg(gw->store));
    free_all(gw);
    return rc;
  }
  char odir[4096];
  snprintf(odir, sizeof odir, "%s/outlog", cfg_in->key_dir);
  hg_outlog_options_t oo = {
      .segment_size = cfg.outlog_segment_size,
      .segments_kept = cfg.outlog_segments_kept,
      .max_frame = SCRATCH_SIZE,
      .max_keys = cfg.max_streams,
      .max_session_ids = cfg.outlog_max_session_ids,
      .log = cfg.log,
      .log_ctx = cfg.log_ctx,
  };
  rc = hg_outlog_open(cfg.outlog_dir != NULL ? cfg.outlog_dir : odir, &oo, &gw->outlog);
  gw->cfg.outlog_dir = NULL; /* not kept: the caller's string */
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "outbound journal: %s", hg_strerror(rc));
    free_all(gw);
    return rc;
  }
  gw->n_conns = cfg.max_sessions + cfg.max_unauthenticated;
  gw->conns = calloc(gw->n_conns, sizeof *gw->conns);
  gw->streams = calloc(cfg.max_streams, sizeof *gw->streams);
  gw->instr = calloc(cfg.max_instruments, sizeof *gw->instr);
  gw->drop_list = calloc(gw->n_conns, sizeof *gw->drop_list);
  gw->pend = calloc(cfg.pending_capacity, sizeof *gw->pend);
  gw->orders = calloc(cfg.max_orders, sizeof *gw->orders);
  gw->accounts = calloc(cfg.max_accounts, sizeof *gw->accounts);
  gw->positions = calloc(cfg.max_positions, sizeof *gw->positions);
  size_t arena = HG_WIRE_ARENA_SIZE(cfg.max_frame);
  gw->arena_buf = malloc(arena);
  gw->scratch = malloc(SCRATCH_SIZE);
  gw->sacc.dsp = calloc(cfg.max_instruments, sizeof *gw->sacc.dsp);
  gw->sacc.dspp = calloc(cfg.max_instruments, sizeof *gw->sacc.dspp);
  uint32_t pcap = 16;
  while (pcap < 2u * cfg.max_unauthenticated) pcap <<= 1;
  gw->peers = calloc(pcap, sizeof *gw->peers);
  gw->peers_mask = pcap - 1;
  gw->refusals = calloc(N_REFUSALS, sizeof *gw->refusals);
  bool ok = gw->conns && gw->streams && gw->instr && gw->drop_list && gw->pend && gw->orders &&
            gw->accounts && gw->positions && gw->arena_buf && gw->scratch && gw->sacc.dsp && gw->sacc.dspp &&
            gw->peers && gw->refusals &&
            map_init(&gw->stream_map, cfg.max_streams) == 0 &&
            map_init(&gw->order_map, cfg.max_orders) == 0 &&
            map_init(&gw->account_map, cfg.max_accounts) == 0 &&
            map_init(&gw->position_map, cfg.max_positions) == 0;
  for (uint32_t i = 0; ok && i < gw->n_conns; i++) {
    conn_t *c = &gw->conns[i];
    c->idx = i;
    c->dirty_next = i + 1 < gw->n_conns ? i + 1 : NONE32;
    c->in = malloc(cfg.max_frame + 16);
    c->out[0] = malloc(cfg.out_hard_cap);
    c->out[1] = malloc(cfg.out_hard_cap);
    ok = c->in && c->out[0] && c->out[1];
  }
  for (uint32_t i = 0; ok && i < cfg.max_instruments; i++) {
    gw->instr[i].subs = calloc(gw->n_conns, sizeof *gw->instr[i].subs);
    ok = gw->instr[i].subs != NULL;
  }
  if (!ok) {
    free_all(gw);
    return -ENOMEM;
  }
  hg_prefault(gw->pend, (size_t)cfg.pending_capacity * sizeof *gw->pend); /* a ring: one lap */
  hg_prefault(gw->positions, (size_t)cfg.max_positions * sizeof *gw->positions);
  gw->free_conn = 0;
  gw->dirty_head = NONE32;
  for (uint32_t i = 0; i < N_REFUSALS; i++) {
    gw->refusals[i].gw = gw;
    gw->refusals[i].next = i + 1 < N_REFUSALS ? i + 1 : NONE32;
  }
  gw->free_refusal = 0;
  Hourglass__V1__Terminate busy = HOURGLASS__V1__TERMINATE__INIT;
  busy.code = TERM(SERVER_BUSY);
  busy.text = (char *)refusal_text(busy.code);
  env_t busy_env = HOURGLASS__V1__ENVELOPE__INIT;
  busy_env.body_case = B(TERMINATE);
  busy_env.terminate = &busy;
  rc = hg_wire_encode(&busy_env, gw->busy_frame, sizeof gw->busy_frame, &gw->busy_len);
  if (rc != 0) {
    free_all(gw);
    return rc;
  }
  for (uint32_t i = 0; i < cfg.max_orders; i++)
    gw->orders[i].next = i + 1 < cfg.max_orders ? i + 1 : NONE32;
  gw->free_order = 0;
  for (uint32_t i = 0; i < cfg.max_accounts; i++) gw->accounts[i].stream = NONE32;
  hg_wire_arena_init(&gw->arena, gw->arena_buf, arena);

  rc = uv_loop_init(&gw->loop);
  if (rc != 0) {
    free_all(gw);
    return rc;
  }
  gw->loop_open = 1;
  uv_tcp_init(&gw->loop, &gw->listener);
  gw->listener.data = gw;
  uv_async_init(&gw->loop, &gw->wake, on_wake);
  gw->wake.data = gw;
  uv_async_init(&gw->loop, &gw->stop_async, on_stop);
  gw->stop_async.data = gw;
  uv_timer_init(&gw->loop, &gw->timer);
  gw->timer.data = gw;
  struct sockaddr_storage addr;
  rc = uv_ip4_addr(gw->host, cfg.port, (struct sockaddr_in *)&addr);
  if (rc != 0) rc = uv_ip6_addr(gw->host, cfg.port, (struct sockaddr_in6 *)&addr);
  if (rc == 0) rc = uv_tcp_bind(&gw->listener, (const struct sockaddr *)&addr, 0);
  if (rc == 0) rc = uv_listen((uv_stream_t *)&gw->listener, 511, on_connection);
  if (rc == 0) {
    struct sockaddr_storage bound;
    int len = sizeof bound;
    rc = uv_tcp_getsockname(&gw->listener, (struct sockaddr *)&bound, &len);
    if (rc == 0)
      gw->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                  : ((struct sockaddr_in6 *)&bound)->sin6_port);
  }
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "listen on %s:%u: %s", gw->host, cfg.port, uv_strerror(rc));
    hg_gateway_destroy(gw);
    return rc;
  }
  atomic_store(&gw->live, 1);
  *out = gw;
  return 0;
}

void hg_gateway_notify(void *ctx) {
  hg_gateway_t *gw = ctx;
  atomic_fetch_add(&gw->notifying, 1);
  if (atomic_load(&gw->live)) uv_async_send(&gw->wake);
  atomic_fetch_sub(&gw->notifying, 1);
}

typedef struct seed_ctx {
  hg_gateway_t *gw;
  const hg_exchange_t *ex;
  uint32_t instrument; /* being seeded */
  int rc;
  uint64_t orders;     /* live unscoped orders seen */
  uint64_t scoped;     /* live session-scoped orders seen */
  int orders_full;     /* the mirror could not hold them all */
} seed_ctx_t;

/* A recovered resting order. Session-scoped ones (COD orders, quotes) are
 * not mirrored: their sessions are gone and hg_gateway_start() cancels them;
 * their cancels then route like those of any order the mirror never saw (to
 * the account's stream, which hg_gateway_start() opens: see open_recovered). */
static void seed_order(void *ctx, const hg_book_order_t *o) {
  seed_ctx_t *s = ctx;
  account_t *a = account_find(s->gw, o->account);
  if (a != NULL) a->recovered = 1;
  if (o->session_scoped) {
    s->scoped++;
    return;
  }
  s->orders++;
  if (s->orders_full) return;
  hg_book_event_t be;
  memset(&be, 0, sizeof be);
  be.order_id = o->order_id;
  be.client_order_id = o->client_order_id;
  be.account = o->account;
  be.price = o->price;
  be.qty = o->qty;
  be.leaves = o->leaves;
  be.side = o->side;
  be.instrument_id = s->instrument;
  if (order_add(s->gw, &be, owner_stream(s->gw, NULL, o->account)) == NULL) {
    s->orders_full = 1;
    s->rc = HG_EFULL;
  }
}

static void seed_instrument(void *ctx, const hg_exchange_instrument_info_t *info) {
  seed_ctx_t *s = ctx;
  hg_gateway_t *gw = s->gw;
  instr_t *in = instr_add(gw, info->id, info->symbol, &info->params,
                          info->halted ? ISTATE(HALTED) : ISTATE(TRADING));
  if (in == NULL) {
    s->rc = HG_EFULL;
    return;
  }
  instr_reference(in, info->ref_price, info->band_low, info->band_high);
  const hg_book_t *book = hg_exchange_book(s->ex, info->id);
  if (book == NULL) return;
  /* hg_book_depth writes hg_book_level_t: bounce through the arena, idle
   * before the loop runs. */
  size_t maxn = gw->arena.cap / sizeof(hg_book_level_t);
  hg_book_level_t *tmp = (hg_book_level_t *)(void *)gw->arena_buf;
  for (int side = 0; side < 2; side++) {
    size_t n = hg_book_depth(book, (hg_side_t)side, tmp, maxn < in->cap_lv ? maxn : in->cap_lv);
    for (size_t k = 0; k < n; k++) {
      in->lv[side][k].price = tmp[k].price;
      in->lv[side][k].qty = tmp[k].qty;
    }
    in->n_lv[side] = (uint32_t)n;
  }
  s->instrument = info->id;
  hg_book_foreach(book, seed_order, s);
}

static void seed_account(void *ctx, const hg_exchange_account_info_t *info) {
  seed_ctx_t *s = ctx;
  if (account_add(s->gw, info->id, info->firm, info->cash) == NULL) s->rc = HG_EFULL;
}

/* The position each account holds at attach (recovered state), carried as
 * bought (long) or sold (short): the mirror otherwise counts only fills it
 * sees, and a restarted gateway must not answer a position query with
 * nothing for an account that holds contracts. */
static void seed_positions(hg_gateway_t *gw, const hg_clearing_t *clr) {
  for (uint32_t a = 0; a < gw->cfg.max_accounts; a++) {
    if (gw->accounts[a].id == 0) continue;
    for (uint32_t i = 0; i < gw->cfg.max_instruments; i++) {
      if (gw->instr[i].id == 0) continue;
      hg_clearing_position_t cp;
      if (hg_clearing_position(clr, gw->accounts[a].id, gw->instr[i].id, &cp) != 0 || cp.pos == 0)
        continue;
      position_add(gw, gw->accounts[a].id, gw->instr[i].id, cp.pos > 0 ? HG_SIDE_BUY : HG_SIDE_SELL,
                   cp.pos > 0 ? cp.pos : -cp.pos);
    }
  }
}

int hg_gateway_attach(hg_gateway_t *gw, hg_pipeline_t *p) {
  if (gw->pipe != NULL || gw->started || p == NULL) return HG_ESTATE;
  const hg_exchange_t *ex = hg_pipeline_exchange(p);
  seed_ctx_t s = {.gw = gw, .ex = ex, .rc = 0};
  hg_exchange_foreach_account(ex, seed_account, &s);
  if (s.rc == 0) hg_exchange_foreach_instrument(ex, seed_instrument, &s);
  if (s.rc == 0) seed_positions(gw, hg_exchange_clearing(ex));
  if (s.rc == 0) s.rc = seed_ledger(gw, hg_exchange_clearing(ex));
  if (s.orders_full)
    gw_log(gw, HG_LOG_ERROR,
           "the recovered books hold %" PRIu64 " live orders but the order mirror holds at "
           "most %" PRIu32 " (max_orders): refusing to start rather than not track some",
           s.orders, gw->cfg.max_orders);
  if (s.rc != 0) return s.rc;
  gw->scoped_at_attach = s.scoped;
  gw->pipe = p;
  gw->attached = 1;
  return 0;
}

int hg_gateway_add_key(hg_gateway_t *gw, const hg_gateway_key_t *key, int replace) {
  if (gw->started || key == NULL || key->secret == NULL || key->secret_len > 64) return HG_EINVAL;
  hg_key_record_t k;
  memset(&k, 0, sizeof k);
  k.key_id = key->key_id;
  k.role = key->role;
  k.account = key->account;
  k.firm = key->firm;
  k.secret_len = (uint8_t)key->secret_len;
  memcpy(k.secret, key->secret, key->secret_len);
  int rc = key_store(gw, &k, replace);
  memset(&k, 0, sizeof k);
  return rc;
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Hex digits only (no sign, prefix or space: a typo must not become a
 * different secret). */
static int unhex(const char *s, uint8_t *out, size_t cap, size_t *n) {
  size_t len = strlen(s);
  if (len % 2 != 0 || len / 2 > cap) return HG_EPARSE;
  for (size_t i = 0; i < len / 2; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return HG_EPARSE;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  *n = len / 2;
  return 0;
}

/* Plain decimal digits, at most max (no sign, no wrap-around). */
static int decimal(const char *s, uint64_t max, uint64_t *out) {
  uint64_t v = 0;
  if (*s == '\0') return HG_EPARSE;
  for (; *s != '\0'; s++) {
    if (*s < '0' || *s > '9') return HG_EPARSE;
    uint64_t d = (uint64_t)(*s - '0');
    if (v > (max - d) / 10) return HG_EPARSE;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int hg_gateway_key_line_parse(char *line, hg_gateway_key_t *key, uint8_t secret_out[64]) {
  char *hash = strchr(line, '#');
  if (hash != NULL) *hash = 0;
  /* Blank-separated fields, whole (a width limit would split a long field
   * in two and so accept a line missing a separator). */
  char *f[5], *save = NULL;
  size_t nf = 0;
  for (char *t = strtok_r(line, " \t\n\v\f\r", &save); t != NULL;
       t = strtok_r(NULL, " \t\n\v\f\r", &save)) {
    if (nf == 5) return HG_EPARSE;
    f[nf++] = t;
  }
  if (nf == 0) return 1;
  uint64_t id, acct, firm;
  if (nf != 5 || decimal(f[0], UINT64_MAX, &id) != 0 || decimal(f[2], UINT32_MAX, &acct) != 0 ||
      decimal(f[3], UINT32_MAX, &firm) != 0)
    return HG_EPARSE;
  const char *role = f[1], *secret = f[4];
  hg_gateway_key_t k = {.key_id = id, .account = (uint32_t)acct, .firm = (uint32_t)firm};
  k.role = strcmp(role, "trader") == 0         ? HG_ROLE_TRADER
           : strcmp(role, "market_maker") == 0 ? HG_ROLE_MARKET_MAKER
           : strcmp(role, "risk_viewer") == 0  ? HG_ROLE_RISK_VIEWER
           : strcmp(role, "operator") == 0     ? HG_ROLE_OPERATOR
                                               : 0;
  size_t slen = 0;
  if (k.role == 0 || unhex(secret, secret_out, 64, &slen) != 0) return HG_EPARSE;
  k.secret = secret_out;
  k.secret_len = slen;
  *key = k;
  return 0;
}

int hg_gateway_load_keys(hg_gateway_t *gw, const char *path, unsigned *line) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -errno;
  char buf[512];
  unsigned ln = 0;
  int rc = 0;
  while (rc == 0 && fgets(buf, sizeof buf, f) != NULL) {
    ln++;
    if (strchr(buf, '\n') == NULL && !feof(f)) {
      /* Longer than the buffer: fine only if what is cut off is comment
       * (which is then skipped), never read as a line of its own. */
      if (strchr(buf, '#') == NULL) {
        rc = HG_EPARSE;
        break;
      }
      int ch;
      while ((ch = fgetc(f)) != EOF && ch != '\n') {
      }
    }
    hg_gateway_key_t k;
    uint8_t sec[64];
    rc = hg_gateway_key_line_parse(buf, &k, sec);
    if (rc == 1) {
      rc = 0;
      continue;
    }
    if (rc == 0) rc = hg_gateway_add_key(gw, &k, 1);
    memset(sec, 0, sizeof sec);
  }
  memset(buf, 0, sizeof buf);
  fclose(f);
  if (rc != 0 && line != NULL) *line = ln;
  return rc;
}

/* Store name of the exchange epoch (sessions table; no key's name starts
 * with 'e'). */
#define EPOCH_NAME "epoch"

/* One more than the epoch of the previous start on this key store,
 * committed before a client can be told it. */
static int bump_epoch(hg_gateway_t *gw) {
  uint64_t e = 0;
  int rc = hg_store_get_session_seq(gw->store, EPOCH_NAME, &e);
  if (rc == HG_ENOTFOUND) {
    e = 0;
    rc = 0;
  }
  if (rc == 0 && e == UINT64_MAX) {
    gw_log(gw, HG_LOG_ERROR, "key store: the stored exchange epoch is at its maximum");
    return HG_ECORRUPT;
  }
  if (rc == 0) rc = hg_store_set_session_seq(gw->store, EPOCH_NAME, e + 1);
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "key store: cannot record the exchange epoch: %s",
           hg_store_errmsg(gw->store));
    return rc;
  }
  gw->epoch = e + 1;
  gw_log(gw, HG_LOG_INFO, "exchange epoch %" PRIu64, gw->epoch);
  return 0;
}

/* For each account holding recovered orders, the lowest-numbered trader or
 * market-maker key of it among the keys with frames in the outbound journal
 * (every key that ever entered an order: each order gets a report). */
static void home_key_of(void *ctx, uint64_t key) {
  hg_gateway_t *gw = ctx;
  if (hg_outlog_next_seq(gw->outlog, key) <= 1) return;
  hg_key_record_t k;
  int rc = key_load(gw, key, &k);
  memset(k.secret, 0, sizeof k.secret);
  if (rc != 0 || (k.role != HG_ROLE_TRADER && k.role != HG_ROLE_MARKET_MAKER)) return;
  account_t *a = account_find(gw, k.account);
  if (a != NULL && a->recovered && (a->home_key == 0 || key < a->home_key)) a->home_key = key;
}

/* Opens the stream of each account's home key before the pipeline's output
 * is drained, so that the reports of recovered orders (the restart's
 * SessionsEnded cancels first of all, then fills and cancels of orders that
 * rest on) are sequenced into that key's stream and its outbound journal
 * whether or not the key has logged in since the start. Owner thread,
 * before the loop runs (stream_get allocates the stream's rings). */
static void open_recovered(hg_gateway_t *gw) {
  hg_outlog_foreach_key(gw->outlog, home_key_of, gw);
  uint32_t opened = 0, keyless = 0, full = 0;
  for (uint32_t i = 0; i < gw->cfg.max_accounts; i++) {
    account_t *a = &gw->accounts[i];
    if (a->id == 0 || !a->recovered) continue;
    hg_key_record_t k;
    uint32_t si;
    if (a->home_key == 0 || key_load(gw, a->home_key, &k) != 0) {
      keyless++;
    } else if (stream_get(gw, &k, &si) == NULL) {
      full++;
    } else {
      opened++;
    }
    memset(k.secret, 0, sizeof k.secret);
    a->recovered = 0;
    a->home_key = 0;
  }
  if (opened > 0)
    gw_log(gw, HG_LOG_INFO, "restart: %" PRIu32 " accounts hold recovered orders; their "
           "reports go to one stream each", opened);
  if (keyless > 0)
    gw_log(gw, HG_LOG_WARN, "restart: %" PRIu32 " accounts hold recovered orders but no "
           "trading key of theirs is in the outbound journal: those reports are not sequenced "
           "into any stream", keyless);
  if (full > 0)
    gw_log(gw, HG_LOG_ERROR, "restart: %" PRIu32 " accounts hold recovered orders but the "
           "stream table is full (max_streams %" PRIu32 "): those reports are not sequenced "
           "into any stream", full, gw->cfg.max_streams);
}

int hg_gateway_start(hg_gateway_t *gw) {
  if (gw->pipe == NULL || gw->started) return HG_ESTATE;
  int rc = bump_epoch(gw);
  if (rc != 0) return rc;
  open_recovered(gw);
  if (gw->scoped_at_attach > 0) {
    /* Sequenced before anything a client can send: no new quote can meet a
     * quote of the previous process, no order a dead COD session's order. */
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = HG_COMMAND_SESSIONS_ENDED;
    if (submit(gw, &cmd, P_INTERNAL, NONE32, NULL, 0, NULL) != 0) {
      gw_log(gw, HG_LOG_ERROR,
             "cannot submit SESSIONS_ENDED for %" PRIu64 " recovered session-scoped orders",
             gw->scoped_at_attach);
      return HG_EBUSY;
    }
    gw_log(gw, HG_LOG_INFO,
           "restart: cancelling %" PRIu64
           " session-scoped orders (cancel-on-disconnect orders and quotes) of sessions "
           "that ended with the previous process",
           gw->scoped_at_attach);
    gw->scoped_at_attach = 0;
  }
  rc = uv_timer_start(&gw->timer, on_tick, gw->cfg.tick_ms, gw->cfg.tick_ms);
  if (rc != 0) return rc;
  rc = hg_thread_start("hg-gateway", gw->cfg.rt_priority, loop_main, gw, &gw->thread);
  if (rc != 0) {
    uv_timer_stop(&gw->timer);
    return rc;
  }
  gw->started = 1;
  /* Output released before the loop ran (notify coalesced into nothing). */
  uv_async_send(&gw->wake);
  return 0;
}

uint16_t hg_gateway_port(const hg_gateway_t *gw) { return gw->port; }

void hg_gateway_stop(hg_gateway_t *gw) {
  if (gw == NULL || gw->stopped) return;
  gw->stopped = 1;
  /* No notify may touch the wake handle once the loop starts closing it:
   * turn notifies off and wait out any in progress first. */
  atomic_store(&gw->live, 0);
  while (atomic_load(&gw->notifying) != 0) sched_yield();
  if (gw->started) {
    uv_async_send(&gw->stop_async);
    pthread_join(gw->thread, NULL);
  }
}

void hg_gateway_destroy(hg_gateway_t *gw) {
  if (gw == NULL) return;
  hg_gateway_stop(gw);
  if (gw->loop_open) {
    /* Not started (or stopped): close whatever is still open and let the
     * close callbacks run. */
    uv_walk(&gw->loop, close_walk, NULL);
    uv_run(&gw->loop, UV_RUN_DEFAULT);
    uv_loop_close(&gw->loop);
  }
  free_all(gw);
}

void hg_gateway_stats(const hg_gateway_t *gw, hg_gateway_stats_t *out) {
  /* Monitoring reads: relaxed, as for STAT_ADD. */
#define LD(f) atomic_load_explicit(&gw->f, memory_order_relaxed)
  out->connections = LD(st_connections);
  out->logins = LD(st_logins);
  out->login_rejects = LD(st_login_rejects);
  out->terminations = LD(st_terminations);
  out->frames_in = LD(st_frames_in);
  out->frames_out = LD(st_frames_out);
  out->submitted = LD(st_submitted);
  out->busy = LD(st_busy);
  out->throttled = LD(st_throttled);
  out->refused = LD(st_refused);
  out->sessions = LD(st_sessions);
  out->unauthenticated = LD(st_unauth);
#undef LD
  hg_outlog_stats_t os = {0};
  if (gw->outlog != NULL) hg_outlog_stats(gw->outlog, &os);
  out->outlog_write_errors = os.write_errors;
  out->outlog_dropped = os.dropped;
  out->outlog_corrupt = os.corrupt;
  out->outlog_segments = os.segments;
  out->outlog_failing = os.last_error != 0;
}
