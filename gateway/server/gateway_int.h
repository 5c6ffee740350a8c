/*
 * gateway_int.h (internal) - the gateway server's shared state: the one
 * struct every file of gateway/server works on, its parts and who touches them,
 * and the functions the files call across. Not installed; the public
 * manual is hourglass/gateway.h.
 *
 * Threads. The libuv loop thread (started by hg_gateway_start) owns
 * everything in struct hg_gateway except:
 *  - before start, the owner thread (create, attach, add_key, load_keys,
 *    start itself) has it all: the loop does not run yet;
 *  - `live` and `notifying` (atomics) are touched by hg_gateway_notify()
 *    from any thread (the pipeline's), and by hg_gateway_stop();
 *  - the st_* counters (relaxed atomics) are read by hg_gateway_stats()
 *    from any thread;
 *  - port, set at create, is read from any thread;
 *  - after hg_gateway_stop() has joined the loop thread, the owner thread
 *    has it all again (destroy).
 * Nothing here is locked: data reaches the loop only through the pipeline's
 * output ring (drained in events.c) and the sockets. With the pipeline in
 * loop mode the loop thread also owns the pipeline's sequencer, exchange
 * and journal while it runs (hourglass/pipeline.h, "Loop mode"): gw_submit
 * executes commands at once and the loop's check/prepare/poll handles
 * commit and reap the journal's batches (gateway.c). A command with more
 * events than the pipeline's stage and ring hold is drained in the middle
 * (hg_gateway_drain, the pipeline's loop_drain): gw_drain then runs inside
 * gw_submit, and the commands it submits (internal cancels) are queued by
 * the pipeline for the loop's next commit.
 *
 * Memory. Allocated at create (sized by the configuration): connections
 * with their input buffer (max_frame + 16 bytes: the frame header is
 * checked before the body is read) and two output buffers of out_hard_cap
 * bytes, the per-address table, the refusal handles, the pending ring,
 * the order pool and the hash maps, the instrument, account and position
 * tables, the frame arena and the encode scratch; on a TLS listener also
 * the TLS context, the shared ciphertext read buffer and each connection's
 * cipher buffer (tls.c). Allocated later:
 *  - a stream's retransmission rings and quote generations, when its key
 *    first logs in (or, for recovered orders, in hg_gateway_start);
 *  - an instrument's level arrays, when it is listed (seed or LISTED);
 *  - with TLS, OpenSSL's per-connection state (SSL, memory BIOs and their
 *    buffers) at accept, freed in the close callback;
 *  - the ledger copy, which grows by doubling (realloc) as cash, VM and
 *    final-settlement entries arrive; when a realloc fails the copy stops
 *    (ledger_lost) and Statement requests are answered REJ_UNAVAILABLE.
 * No frame or order allocates (with TLS, OpenSSL's memory BIOs grow to
 * their largest burst once: about one read, TLS_IN_SIZE, in and one cipher
 * buffer, TLS_CBUF_SIZE, out).
 *
 * The parts:
 *  - conns: a pool (max_sessions + max_unauthenticated), free list through
 *    dirty_next; each holds the pure session state (session.c).
 *  - peers: unauthenticated connections per source address (open
 *    addressing, linear probing, keyed by the 16-byte IPv6 form of the
 *    address, at least twice as many slots as max_unauthenticated, so it
 *    never fills), and refusals: N_REFUSALS bare TCP handles through which
 *    a connection over the global limit is accepted, sent its Terminate and
 *    closed (one over its address's limit holds a connection slot for that).
 *    See "Admission" in hourglass/gateway.h.
 *  - streams: one per API key that has logged in since start, and one per
 *    account that held live orders at attach (its home key, opened by
 *    hg_gateway_start before any output is drained). A stream is the key's
 *    recoverable server -> client sequence: it survives reconnects, holds
 *    the retransmission log (a byte ring of encoded frames with an index
 *    ring by seq), the key's quote and market-maker protection state and
 *    the list of its live orders. A key may have up to sessions_per_key
 *    connections at once; each receives every frame of the stream (same
 *    seqs, same bytes) and serves its own retransmissions. Frames for a
 *    key with no connection are still sequenced and logged. Every
 *    sequenced frame also goes to the outbound journal (outlog.c), written
 *    once per flush before any socket write; a retransmission older than
 *    the byte ring is read back from it, and it restores seqs after a
 *    restart.
 *  - pending: a ring of commands in flight, indexed by the origin tag given
 *    to hg_pipeline_submit(). The pipeline answers our commands in submit
 *    order (one producer thread, a FIFO sequencer), so the DONE markers
 *    retire entries from the tail. In cluster mode a node that applies a
 *    command from the group gets an entry for it from its route (group.c),
 *    marked applied: routed like ours, but no action of this node follows
 *    from it (cancel-on-disconnect, stale quotes).
 *  - hold (cluster mode, group.c): frames the gateway decided itself,
 *    waiting for the group to commit them.
 *  - mirror (mirror.c): live orders (open-addressing hash by order id ->
 *    pool entry, linked into their stream), instruments with their price
 *    levels (hourglass/levels.h, one level per possible resting order, so
 *    the overflow rule never applies while the engine's book limit holds),
 *    accounts and positions. Seeded at attach, then maintained from the
 *    event stream; queries read it, never the engine.
 *  - ledger: a copy of the clearing ledger for statements (an array in
 *    ledger order, each account's entries chained through ledger_next).
 *
 * Routing (events.c, with group.c in cluster mode): an order's events go
 * to the stream that entered it (seeded and foreign orders: the account's
 * stream, its home key's when it held orders at attach, else its first to
 * log in), a reject to the stream that sent the request, fills to both
 * parties separately, drop copies to the subscribed risk viewers of the
 * account's firm, and public market data (no account, no order id) to
 * subscribers.
 *
 * Names: functions shared between the files are gw_*; file-local ones are
 * static without prefix.
 */

#ifndef HG_GATEWAY_INT_H
#define HG_GATEWAY_INT_H

#include "hourglass/gateway.h"

#include <assert.h>
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

#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "hourglass/hmac.h"
#include "hourglass/index.h"
#include "hourglass/levels.h"
#include "hourglass/store.h"
#include "hourglass/thread.h"
#include "hourglass/wire.h"
#include "logline.h"
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
/* Sets an optional protobuf-c field of message m (a struct, not a pointer). */
#define PB_SET(m, f, v) ((m).has_##f = 1, (m).f = (v))

#define ORIGIN_TAG (0x47ull << 56) /* 'G': origins of our own submissions */
#define ORIGIN_MASK ((1ull << 56) - 1)
#define NONE32 UINT32_MAX
#define QUOTE_CLORDID_BIT (1ull << 63)
#define MAX_QUOTE_ENTRIES 64
#define MAX_MMP_GROUPS 8
#define MAX_MD_DEPTH 50
#define SCRATCH_SIZE (1u << 20)
#define HOLD_BYTES (4u << 20)

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

/* The RequestKind an order request's reject names, by its pending kind;
 * 0 for a kind that is not an order request (answered by a Response). */
static inline uint32_t gw_pkind_request(uint32_t kind) {
  switch (kind) {
  case P_NEW: return REQ(NEW_ORDER);
  case P_CANCEL: return REQ(CANCEL);
  case P_REPLACE: return REQ(REPLACE);
  case P_QUOTE: return REQ(QUOTE);
  default: return 0;
  }
}

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
  uint8_t applied;    /* created from a route (hg_gateway_route_in), not submitted here */
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
  /* The account's list (OpenOrdersRequest), ascending order id: aslot is
   * the account's slot, NONE32 when not linked (account not in the table). */
  uint32_t aslot, aprev, anext;
  uint8_t side, cod, cancel_sent;
  uint8_t scoped;          /* session-scoped (COD order or quote): SESSIONS_ENDED cancels it */
} order_t;

typedef struct instr {
  uint32_t id;             /* 0: free slot */
  uint32_t state;          /* InstrumentState */
  char symbol[HG_SYMBOL_MAX + 1];
  hg_book_params_t params;
  /* The clearing's reference price and inclusive band (ticks; 0: none), as
   * the engine last published them (listing, fixings, daily cycles). */
  int64_t ref_price, band_low, band_high;
  uint64_t md_seq;
  /* Price levels per side (hourglass/levels.h), storage owned here: one
   * level per possible resting order (params.max_orders), so the overflow
   * rule applies only if the engine rests more orders than it was listed
   * with; lv_truncated_logged says the warning went out for this listing. */
  hg_levels_t lv[2];
  uint8_t lv_truncated_logged;
  uint32_t *subs;          /* conn indexes; capacity = number of conns */
  uint32_t n_subs;
} instr_t;

typedef struct account {
  uint32_t id;             /* 0: free */
  uint32_t firm;
  int64_t cash;
  uint32_t stream;         /* first stream of this account; NONE32 */
  uint64_t lhead, ltail;   /* its ledger entries (index + 1 in gw->ledger; 0: none) */
  uint32_t ohead, otail;   /* its live orders (order_t.aprev/anext), by id; NONE32 */
  /* Attach to start only: the account held live orders at attach, and the
   * key whose stream hg_gateway_start() opens for their reports (0: none). */
  uint8_t recovered;
  uint64_t home_key;
} account_t;

typedef struct position {
  uint64_t key;            /* account << 32 | instrument; 0: free */
  int64_t bought, sold;
  /* The fills since the instrument's last daily settlement (reset by its
   * DSP event): sum of signed qty and of signed qty x price (ticks),
   * saturated; the clearing's own sums, seeded at attach. */
  int64_t day_q, day_qp;
  /* The open position's entry value (ticks x contracts, signed like the
   * position), average cost: a reduction keeps the average price (rounded
   * toward zero), a flip starts over at the fill's price. cost_known 0:
   * recovered at attach with entry prices the gateway never saw. */
  int64_t cost;
  uint8_t cost_known;
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
  /* The key's logged-in connections (at most cfg.sessions_per_key), a list
   * through conn_t.stream_next: the first one's index + 1; 0: none. Every
   * one of them receives every frame of the stream. */
  uint32_t conn;
  uint32_t n_conns;
  uint32_t ref_bases;      /* LoginAck.ref_seq_base values handed out (see inbound.c) */
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
  uint32_t stream_next;    /* the key's next connection: index + 1; 0 ends */
  uint64_t ref_base;       /* added to this session's request seqs in replies (ref_seq) */
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
  /* TLS (tls.c; NULL on a plain listener). ssl owns rbio (ciphertext in)
   * and wbio (ciphertext out); created at accept, freed in the close
   * callback. Plaintext flows through in and out[0] as on a plain
   * connection (fill stays 0); cbuf (allocated at create) holds the
   * ciphertext of the write in flight, cb_len bytes. */
  struct ssl_st *ssl;
  struct bio_st *rbio, *wbio;
  uint8_t hs_done;         /* handshake complete: frames may flow */
  uint8_t tls_shut;        /* close_notify queued */
  uint8_t *cbuf;
  size_t cb_len;
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
/* The encoded Terminate(TERM_SERVER_BUSY) with its text: the 1-byte length
 * prefix, envelope tag and length (4), code (2) and the text's tag, length
 * and 35 bytes come to under 50; create fails if it ever outgrows this. */
#define BUSY_FRAME_MAX 96
/* TLS: ciphertext read per uv_read (one buffer, shared: a read is
 * consumed before the next), a connection's cipher buffer (two full
 * records and their overhead), and how much plaintext goes into one
 * SSL_write (a record). */
#define TLS_IN_SIZE (64u << 10)
#define TLS_CBUF_SIZE (2u * (16384u + 256u))
#define TLS_RECORD 16384u
/* Pipeline records taken per hg_pipeline_poll(): drain loops until the ring
 * is empty, so this sets only how many one poll copies. */
#define DRAIN_BATCH 256
/* Store name of a stream's last seq: 'o', 16 hex digits of the key, NUL. */
#define SEQ_NAME_LEN (1 + 16 + 1)
/* Store name of a used session id: 'u', the key and the id in hex, NUL. */
#define USED_NAME_LEN (1 + 16 + 2 * HG_WIRE_SESSION_ID_LEN + 1)

typedef struct u64map {
  uint64_t *keys;          /* 0: empty */
  uint32_t *vals;
  uint32_t mask;
  /* 1: a key's home slot is its low bits (gw_map_init_dense), for keys
   * handed out in sequence (the exchange's order ids), so that orders
   * entered together share cache lines instead of missing once each;
   * 0: hg_mix64 of the key (ids and key numbers far from sequential). */
  uint32_t dense;
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

/* The gateway. Every field belongs to the owner thread until
 * hg_gateway_start and to the loop thread from then until the loop exits
 * (joined by hg_gateway_stop), except where a field says otherwise. */
struct hg_gateway {
  hg_gateway_config_t cfg; /* read only after create */
  char host[64];
  hg_store_t *store;
  hg_outlog_t *outlog;     /* owned; loop thread once started */
  hg_pipeline_t *pipe;
  uv_loop_t loop;
  uv_tcp_t listener;
  struct ssl_ctx_st *tls;  /* NULL: plain TCP; built at create (tls.c), read only after */
  uint8_t *tls_in;         /* TLS_IN_SIZE: ciphertext of the current read (loop thread) */
  uint64_t tls_log_ns;     /* loop thread: when a TLS failure was last logged ... */
  uint32_t tls_log_quiet;  /* ... and how many went unlogged since (one line a second) */
  uv_async_t wake;
  uv_async_t stop_async;
  uv_timer_t timer;
  /* Pipeline in loop mode (hourglass/pipeline.h, "Loop mode"): this loop
   * sequences and journals itself. pipe_poll watches the pipeline's loop fd
   * (commit completions, other threads' submits); pipe_check and
   * pipe_prepare submit each iteration's batch. Set up by hg_gateway_start. */
  int loop_mode;
  uv_poll_t pipe_poll;
  uv_check_t pipe_check;
  uv_prepare_t pipe_prepare;
  pthread_t thread;        /* owner thread: started and joined there */
  int attached, started, stopped, loop_open; /* owner thread */
  int stopping;            /* loop thread: on_stop is closing the sessions */
  uint64_t epoch;          /* this start's exchange epoch (LoginAck.epoch); set at start */
  /* Loop thread: inside on_read, submits defer the engine's wake-up to one
   * hg_pipeline_kick() at the end of the read (kick_due says one is owed),
   * so the frames of one read cost one engine wake-up, not one each. */
  int in_read, kick_due;
  /* Loop thread: the monotonic clock read once at the start of a read
   * callback or a drain (clock_ns, valid while clock_held), for the
   * per-frame bookkeeping of everything handled in it (receive and send
   * times of the sessions, throttling): frames of one read arrived
   * together, and one clock read per frame cost more than the rest of the
   * session's bookkeeping. gw_clock() reads it. */
  uint64_t clock_ns;
  int clock_held;
  /* Inside gw_drain: in loop mode gw_submit queues instead of executing
   * (a command executed there could need a drain of its own). */
  int draining;
  uint16_t port;           /* set at create; any thread reads it */
  atomic_int live;         /* notify may call uv_async_send; any thread */
  atomic_int notifying;    /* notifies in progress; any thread */

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
  uint8_t busy_frame[BUSY_FRAME_MAX]; /* Terminate(TERM_SERVER_BUSY), encoded at create */
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
  /* Mirrored session-scoped orders (order_t.scoped), the recovered ones
   * included: their sessions died with the previous process, so
   * hg_gateway_start() journals one SESSIONS_ENDED when it finds any; in
   * cluster mode the next leader does (hg_gateway_sessions_ended). */
  uint32_t n_scoped;

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
  /* Cluster mode (group.c): frames the gateway decided itself (replies,
   * refusals) for keys that trade, held until the group commits them,
   * in log order: a byte ring of HOLD_BYTES (allocated at create; NULL in
   * single-node mode) of records u32 length, u64 key id, the frame's
   * Envelope without seq; head and tail are byte counts. local: the loop
   * is handling a client's request (not the pipeline's output), so a
   * frame sent now is such a frame. */
  uint8_t *hold;
  uint64_t hold_head, hold_tail;
  int local;
  uint64_t unrouted;       /* results of keys this node does not know (group.c) */
  /* Cluster mode: the place in the log of the result being routed, set as
   * the outbound log's position (events.c; outlog.h "Positions"): command
   * seq + 1 and the result's index among the command's, or stream record
   * (S, k) as S + 1 and POS_STREAM | k. After a restart, frames of results
   * the node had routed before are met again and not sequenced twice. */
  uint64_t pos_seq, pos_j;
  uint64_t relogged;       /* such frames met since start */
  hg_pipe_out_t drain[DRAIN_BATCH]; /* one hg_pipeline_poll() batch */

  /* Counters: written by the loop thread, read by hg_gateway_stats on any. */
  _Atomic uint64_t st_connections, st_logins, st_login_rejects, st_terminations, st_frames_in,
      st_frames_out, st_submitted, st_busy, st_throttled, st_refused, st_tls_failures;
  _Atomic uint32_t st_sessions, st_unauth;
};

/* Counters are read by other threads for monitoring only and order nothing
 * else: relaxed is enough (for both macros). */
#define STAT_ADD(gw, f) atomic_fetch_add_explicit(&(gw)->f, 1, memory_order_relaxed)
#define STAT_SET(gw, f, v) atomic_store_explicit(&(gw)->f, (v), memory_order_relaxed)

/* Monotonic time, ns (libuv's clock; loop thread). */
static inline uint64_t now_mono(void) { return uv_hrtime(); }

/* The loop's clock for per-frame bookkeeping: the time taken at the start
 * of the read callback or drain in progress (gw_clock_hold), else now. */
static inline uint64_t gw_clock(const struct hg_gateway *gw) {
  return gw->clock_held ? gw->clock_ns : now_mono();
}

/* Takes the clock for what follows unless an outer callback holds it
 * already; returns what gw_clock_release() needs to restore. */
static inline int gw_clock_hold(struct hg_gateway *gw) {
  int outer = gw->clock_held;
  if (!outer) {
    gw->clock_ns = now_mono();
    gw->clock_held = 1;
  }
  return outer;
}

static inline void gw_clock_release(struct hg_gateway *gw, int outer) { gw->clock_held = outer; }

/* v clamped to the int64 range. */
static inline int64_t gw_sat64(__int128 v) {
  return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

/* What a REJECTED report echoes of the refused request: side (new orders
 * only, -1 none), price and quantity as submitted (new_price and new_qty
 * for a replace; nothing for a cancel). */
typedef struct reject_echo {
  int side;
  int64_t price, qty;
} reject_echo_t;

#define NO_ECHO ((reject_echo_t){-1, 0, 0})

/* gateway.c: lifecycle and the loop thread. */
void gw_log(hg_gateway_t *gw, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t gw_now_wall(hg_gateway_t *gw);

/* mirror.c: the engine-state mirror (hash map, instruments and levels,
 * orders, accounts, positions, ledger copy). */
int gw_map_init(u64map_t *m, uint32_t entries);
int gw_map_init_dense(u64map_t *m, uint32_t entries); /* see u64map_t.dense */
void gw_map_free(u64map_t *m);
uint32_t gw_map_get(const u64map_t *m, uint64_t k);
void gw_map_put(u64map_t *m, uint64_t k, uint32_t v);
void gw_map_del(u64map_t *m, uint64_t k);
instr_t *gw_instr_find(hg_gateway_t *gw, uint32_t id);
uint32_t gw_instr_slot(hg_gateway_t *gw, const instr_t *in);
void gw_instr_reference(instr_t *in, int64_t ref, int64_t lo, int64_t hi);
instr_t *gw_instr_add(hg_gateway_t *gw, uint32_t id, const char *symbol,
                      const hg_book_params_t *params, uint32_t state);
void gw_level_set(hg_gateway_t *gw, instr_t *in, int side, int64_t price, int64_t qty);
order_t *gw_order_find(hg_gateway_t *gw, uint64_t id);
order_t *gw_order_add(hg_gateway_t *gw, const hg_book_event_t *be, uint32_t stream);
void gw_order_remove(hg_gateway_t *gw, order_t *o);
/* Flags o session-scoped, counted in n_scoped until it is removed. */
void gw_order_set_scoped(hg_gateway_t *gw, order_t *o);
/* Moves o to stream's list of orders (NONE32: none), in place. */
void gw_order_move(hg_gateway_t *gw, order_t *o, uint32_t stream);
/* The account's first live order with id >= from (NONE32: none); O(1)
 * when from is live in that account (a page's cursor), else a walk of the
 * account's own orders. Follow order_t.anext from there. */
uint32_t gw_account_orders_from(hg_gateway_t *gw, const account_t *a, uint64_t from);
account_t *gw_account_find(hg_gateway_t *gw, uint32_t id);
account_t *gw_account_add(hg_gateway_t *gw, uint32_t id, uint32_t firm, int64_t cash);
/* A fill (or a final settlement's closing) of qty at price (ticks). */
void gw_position_add(hg_gateway_t *gw, uint32_t account, uint32_t instrument, int side,
                     int64_t qty, int64_t price);
/* The instrument's daily settlement price was set: the day's sums restart. */
void gw_positions_settled(hg_gateway_t *gw, uint32_t instrument);
void gw_ledger_event(hg_gateway_t *gw, const hg_exchange_event_t *ev);

/* conn.c: connection I/O and framing, streams, admission. */
void gw_flush_dirty(hg_gateway_t *gw);
bool gw_conn_send_raw(conn_t *c, const uint8_t *bytes, size_t len);
size_t gw_encode(hg_gateway_t *gw, const env_t *env);
void gw_conn_send(conn_t *c, const env_t *env);
void gw_conn_terminate(conn_t *c, uint32_t code, const char *text);
/* Its last frame is queued: reads no more and closes once the queue is
 * written (or a second later: the timer cuts off a peer that does not
 * read). */
void gw_conn_end(conn_t *c);
stream_t *gw_conn_stream(conn_t *c);
/* Whether the connection of generation gen is logged in to st and not
 * closing. */
bool gw_stream_gen_live(hg_gateway_t *gw, const stream_t *st, uint32_t gen);
/* Attaches a logged-in connection to its key's stream / detaches it. */
void gw_stream_attach(hg_gateway_t *gw, stream_t *st, conn_t *c);
void gw_stream_detach(hg_gateway_t *gw, stream_t *st, conn_t *c);
void gw_stream_send(hg_gateway_t *gw, stream_t *st, env_t *env);
/* The frame of n bytes in gw->scratch carries seq, st's next one (taken):
 * logged for retransmission, journaled and sent to the key's sessions. */
void gw_stream_emit(hg_gateway_t *gw, stream_t *st, uint64_t seq, size_t n);
/* True when st's next frame is one the outbound log holds already (a
 * result applied again after a restart, outlog.h "Positions"): it is
 * neither sequenced nor sent. */
bool gw_relogged(hg_gateway_t *gw, const stream_t *st);
void gw_stream_send_idx(hg_gateway_t *gw, uint32_t s, env_t *env);
void gw_rt_pump(conn_t *c);
void gw_unauth_release(hg_gateway_t *gw, conn_t *c);
void gw_conn_close(conn_t *c);
void gw_on_connection(uv_stream_t *server, int status);
const char *gw_refusal_text(uint32_t code);

/* tls.c: the TLS context and a connection's TLS state. */
int gw_tls_create(hg_gateway_t *gw, const hg_gateway_config_t *cfg);
void gw_tls_destroy(hg_gateway_t *gw);
int gw_tls_accept(conn_t *c);
void gw_tls_free(conn_t *c);

/* keys.c: the API key store and the keys file. */
void gw_used_name(char *out, uint64_t key_id, const uint8_t *sid);
void gw_seq_name(char *out, uint64_t key_id);
int gw_key_load(hg_gateway_t *gw, uint64_t key_id, hg_key_record_t *out);
/* 0 when no key has key_id, HG_EEXISTS when one has, or the store's error. */
int gw_key_absent(hg_gateway_t *gw, uint64_t key_id);
int gw_key_store(hg_gateway_t *gw, const hg_key_record_t *k, int replace);

/* inbound.c: login, retransmission requests, frame dispatch. */
stream_t *gw_stream_get(hg_gateway_t *gw, const hg_key_record_t *k, uint32_t *idx);
void gw_handle_frame(conn_t *c, const uint8_t *body, size_t len);

/* orders.c: submitting, the gateway's own rejects, order entry, quotes. */
pending_t *gw_pend_at(hg_gateway_t *gw, uint64_t counter);
uint32_t gw_submit(hg_gateway_t *gw, const hg_command_t *cmd, uint32_t kind, uint32_t stream,
                   conn_t *c, uint64_t ref_seq, pending_t **out);
void gw_send_response(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, uint32_t reason,
                      const char *text);
void gw_er_echo(Hourglass__V1__ExecutionReport *er, reject_echo_t x);
reject_echo_t gw_new_order_echo(const Hourglass__V1__NewOrderRequest *r);
reject_echo_t gw_cmd_echo(const hg_command_t *cmd);
void gw_send_order_reject(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, uint32_t req,
                          uint32_t reason, uint32_t instrument, uint64_t order_id,
                          uint64_t clordid, uint32_t quote_group, reject_echo_t echo);
uint32_t gw_cancel_internal(hg_gateway_t *gw, order_t *o);
uint32_t gw_cod_cancel(hg_gateway_t *gw, stream_t *st);
void gw_release_stream_side(conn_t *c);
bool gw_role_allows(uint32_t role, uint32_t body);
void gw_handle_new_order(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_handle_cancel(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_handle_replace(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_handle_mass_cancel(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_handle_order_status(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
mmp_t *gw_mmp_find(stream_t *st, uint32_t group, bool create);
void gw_handle_mass_quote(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_handle_quote_reset(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_mmp_fill(hg_gateway_t *gw, order_t *o, int64_t qty, uint64_t ts);

/* query.c: market data, positions, statements, instruments. */
void gw_md_send_all(hg_gateway_t *gw, instr_t *in, env_t *env);
void gw_md_status(hg_gateway_t *gw, instr_t *in);
bool gw_md_unsubscribe(conn_t *c, instr_t *in);
void gw_md_unsubscribe_all(conn_t *c);
void gw_handle_positions(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_handle_statement(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_handle_open_orders(conn_t *c, stream_t *st, uint32_t si, const env_t *env);
void gw_handle_instruments(conn_t *c, uint32_t si, const env_t *env);
void gw_handle_md_subscribe(conn_t *c, uint32_t si, const env_t *env);
void gw_handle_md_unsubscribe(conn_t *c, uint32_t si, const env_t *env);
void gw_handle_drop_copy(conn_t *c, uint32_t si, const env_t *env);

/* operator.c: operator and settlement requests. */
void gw_handle_operator(conn_t *c, uint32_t si, const env_t *env);
void gw_settle_event(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p);
void gw_settle_done(hg_gateway_t *gw, pending_t *p, const hg_pipe_out_t *o);

/* group.c: cluster mode's routes and held frames (see hold above). */
/* The stream of key_id, opened if this node has none yet; NONE32 for key
 * 0 or a key this node does not know. */
uint32_t gw_stream_of_key(hg_gateway_t *gw, uint64_t key_id);
/* Whether a frame for st sent now waits for the group: cluster mode, a
 * key that trades or operates (a risk viewer's stream is its node's own),
 * sent while handling a request. */
bool gw_hold_applies(const hg_gateway_t *gw, const stream_t *st);
/* Holds the encoded Envelope (without seq) of a frame for st and hands it
 * to the pipeline as a stream record; logged and dropped if it cannot. */
void gw_hold_frame(hg_gateway_t *gw, stream_t *st, const uint8_t *frame, size_t len);
/* The oldest held frame is committed: sequence it into its key's stream. */
void gw_hold_release(hg_gateway_t *gw);

/* events.c: routing of the pipeline's output. */
uint32_t gw_owner_stream(hg_gateway_t *gw, const order_t *o, uint32_t account);
void gw_drain(hg_gateway_t *gw);
/* The pending entry of origin, NULL if origin is none of ours. */
pending_t *gw_pending_of(hg_gateway_t *gw, uint64_t origin);
/* Marks p answered and frees the ring's answered head. */
void gw_retire(hg_gateway_t *gw, pending_t *p);

#endif /* HG_GATEWAY_INT_H */
