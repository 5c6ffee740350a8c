/*
 * hourglass/gateway.h - the client gateway: a libuv TCP server that speaks
 * the hourglass.v1 wire protocol (hourglass/wire.h, proto/README.md) and
 * connects authenticated sessions to the exchange pipeline.
 *
 * What it does, on its own loop thread:
 *  - accepts connections, reads varint-delimited frames (length checked
 *    before buffering), decodes them through one per-frame arena, runs the
 *    session layer (login with HMAC-SHA256, sequence numbers, heartbeats,
 *    retransmission, terminate codes) and validates every field;
 *  - turns requests into hg_command_t and hg_pipeline_submit()s them, with
 *    the key's account (a client never names an account for trading);
 *  - drains the pipeline's output after each out_notify (uv_async_send;
 *    coalesced wake-ups, so it drains until the ring is empty) and routes
 *    every event: execution reports to the stream of the key that owns the
 *    order, drop copies to the firm's subscribed risk viewers, anonymous
 *    market data to subscribers.
 *
 * Pipeline in loop mode (hg_pipeline_config_t.mode = HG_PIPE_MODE_LOOP,
 * hourglass/pipeline.h "Loop mode"; hourglassd's default). The loop thread
 * then runs the order path to completion itself: each decoded command is
 * hg_pipeline_execute()d at once (sequenced, journaled into the filling
 * batch, applied, its events staged); a uv_check handle (after the
 * iteration's reads) and a uv_prepare handle (before the loop blocks)
 * submit the batch through io_uring with hg_pipeline_loop_commit(); a
 * uv_poll handle on hg_pipeline_loop_fd() reaps the completion
 * (hg_pipeline_loop_reap()), and the now durable results are drained and
 * routed at once, with no wake-up of another thread. out_notify is not
 * used; commands of other threads (the daemon's demo and synthetic
 * generators) reach the loop through the pipeline's inbound ring. While
 * the gateway runs, its loop thread owns the pipeline's sequencer,
 * exchange and journal, so hg_gateway_stop() must come before
 * hg_pipeline_stop() (which then finishes on the owner thread). A command
 * refused because the pipeline's stage is full is answered REJ_BUSY, as a
 * full inbound ring is in threads mode.
 *
 * State it keeps (owned by the loop thread once started): a mirror of live
 * orders (owner, leaves, cancel-on-disconnect flag), per-instrument price
 * levels for market data snapshots, accounts (firm, cash), positions and a
 * copy of the clearing ledger (for statements), all seeded from the exchange
 * by hg_gateway_attach() (pipeline not yet started) and then maintained from
 * the event stream. Queries are answered from this mirror, so the gateway
 * never reads the engine's memory while the engine thread runs; the one
 * exception is a Positions reply's margin fields, read from the clearing
 * in loop mode only (the loop then owns the exchange) and absent in
 * threads mode. A position is what the clearing held at attach, carried as
 * bought (long) or sold (short), plus every fill and final settlement seen
 * since.
 *
 * Limits: the tables are sized by the configuration below. Past max_orders
 * new orders are refused (REJ_GATEWAY_FULL); past max_positions new
 * (account, instrument) pairs are not tracked (logged: positions
 * incomplete); past max_instruments or max_accounts new listings and
 * accounts are missing from the mirror (logged). An instrument keeps one
 * price level per order it may rest (its max_orders), the best ones if ever
 * more (hourglass/levels.h; logged).
 *
 * Memory: allocated at create, sized by the configuration: connections
 * with their buffers (max_frame + 16 in, 2 x out_hard_cap out), the order,
 * account, position and instrument tables, the pending ring, the frame
 * arena. Allocated later, never per message: a key's stream (its
 * retransmission rings and quote state, about retransmit_bytes + 16 x
 * retransmit_frames bytes) when the key first logs in or at
 * hg_gateway_start, the outbound journal's index for a new key, and an
 * instrument's price levels when it is listed. The ledger copy grows by
 * doubling as cash, VM and final-settlement entries arrive (realloc on
 * those events only); if that fails the copy stops and statements are
 * answered REJ_UNAVAILABLE from then on (logged).
 *
 * API keys live in an LMDB store (hourglass/store.h, table
 * HG_STORE_API_KEYS) in key_dir, separate from the pipeline's store. The
 * record holds what HMAC verification needs: the secret itself (HMAC is a
 * symmetric proof, so the verifier needs the key), plus role, account,
 * firm. The secret is never logged, never sent and never leaves the
 * process. Used session ids and every sequenced outbound frame go to the
 * outbound journal (outlog_dir), which also restores each key's next seq at
 * create; the key store's sessions table keeps each key's last seq at a
 * clean stop, the exchange epoch (counted up at every hg_gateway_start)
 * and, read only, session ids recorded by earlier versions.
 *
 * Lifecycle (owner thread):
 *   hg_gateway_config_init -> hg_gateway_create -> (pipeline config:
 *   out_notify = hg_gateway_notify, out_notify_ctx = gw; mode loop or
 *   threads; in loop mode loop_drain = hg_gateway_drain, loop_drain_ctx =
 *   gw; in cluster mode route_out / route_in = hg_gateway_route_out /
 *   hg_gateway_route_in, route_ctx = gw) -> hg_pipeline_open
 *   -> hg_gateway_attach -> hg_gateway_add_key / hg_gateway_load_keys ->
 *   hg_pipeline_start -> hg_gateway_start -> ... -> hg_gateway_stop ->
 *   hg_pipeline_stop / hg_pipeline_close -> hg_gateway_destroy.
 *
 * Cluster mode (a replica on the gateway's loop, hg_gateway_loop(); the
 * pipeline in cluster mode, hourglass/pipeline.h): logins of keys that may
 * enter orders are refused on a node that is not the leader
 * (order_entry_leader, LOGIN_NOT_LEADER with the leader's address); risk
 * viewers and market data are served on every node, from the committed
 * stream each node applies. Every node builds each trading key's stream
 * from the log (hg_gateway_route_out / hg_gateway_route_in /
 * hg_gateway_stream_in): results are routed as on the node that took the
 * request, and the frames the gateway decides itself are held until the
 * group commits them. A request of a trading or operator session on a node
 * that does not take orders (a leader that lost leadership) ends the
 * session (TERM_NOT_LEADER). A new leader ends the previous leader's
 * sessions (hg_gateway_sessions_ended). An operator's AddApiKey goes to
 * the group (replicate_key) and every node stores it once committed
 * (hg_gateway_apply_key); a ClusterRequest goes to the cluster
 * (cluster_request), which answers it (hg_gateway_cluster_reply).
 *
 * Admission (before login): a connection counts as unauthenticated from
 * accept until its Login succeeds or it closes, and has login_timeout_ms to
 * log in. At most max_unauthenticated_per_address of them may come from one
 * source address (IPv4 and IPv6 alike; an IPv4-mapped IPv6 address is the
 * IPv4 address) and at most max_unauthenticated in all. A connection over
 * the address limit is accepted, sent Terminate(TERM_ADDRESS_LIMIT) and
 * closed; one over the global limit gets Terminate(TERM_SERVER_BUSY). So
 * one host holding idle connections delays nobody else's login unless it
 * fills the global limit, which takes max_unauthenticated /
 * max_unauthenticated_per_address addresses. The counting is a table sized
 * at create (no allocation per connection). When refusals come faster than
 * closes complete, accepting pauses for a loop iteration (the kernel's
 * backlog holds the connections meanwhile).
 *
 * TLS: with tls_cert and tls_key the listener speaks TLS 1.3 only
 * (OpenSSL over memory BIOs on the loop thread; the frames inside are the
 * same). The handshake is part of the time before login: a connection
 * mid-handshake counts against both unauthenticated limits and is closed
 * at login_timeout_ms like any other. Nothing is sent before the
 * handshake completes, so on a TLS listener refusals and timeouts before
 * it close the connection without a Terminate; a failed handshake (a bad
 * ClientHello, a missing or untrusted client certificate) closes that
 * connection only (counted in tls_failures). Sessions resume with TLS 1.3
 * tickets (two per full handshake, valid until the gateway restarts).
 * Certificates are read at create: new ones take a restart. OpenSSL
 * allocates per connection (its SSL object and BIO buffers) at accept; the
 * cipher buffer of each connection is allocated at create.
 */
#ifndef HOURGLASS_GATEWAY_H
#define HOURGLASS_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "hourglass/pipeline.h"
#include "hourglass/wire.h" /* HG_WIRE_SECRET_MAX */

#ifdef __cplusplus
extern "C" {
#endif

/* Roles (equal to hourglass.v1.Role). */
enum {
  HG_ROLE_TRADER = 1,
  HG_ROLE_MARKET_MAKER = 2,
  HG_ROLE_RISK_VIEWER = 3,
  HG_ROLE_OPERATOR = 4
};

struct hg_gateway_cluster_req;
struct hg_gateway_key;

typedef struct hg_gateway_config {
  const char *host;              /* listen address; NULL: "127.0.0.1" */
  uint16_t port;                 /* 0: an ephemeral port (see hg_gateway_port) */
  const char *key_dir;           /* existing directory for the key store (required) */
  /* TLS 1.3 on the listener (see "TLS" above): PEM files, read at create
   * (not kept). tls_cert (chain, leaf first) and tls_key together turn it
   * on; tls_client_ca also requires every client to present a certificate
   * signed by one of its CAs (mutual TLS; HMAC login still applies). All
   * NULL: plain TCP. */
  const char *tls_cert;
  const char *tls_key;
  const char *tls_client_ca;
  size_t key_map_size;           /* LMDB map size; 0: 64 MiB */
  uint32_t max_frame;            /* largest body accepted, bytes; 0: 64 KiB */
  uint32_t max_sessions;         /* logged-in sessions at once; 0: 1024 */
  uint32_t sessions_per_key;     /* logged-in sessions of one API key at once (each
                                    receives the key's whole stream); 0: 4 */
  uint32_t max_unauthenticated;  /* connections not yet logged in, all addresses; 0: 64 */
  uint32_t max_unauthenticated_per_address; /* ... from one source address; 0: 16, or
                                    max_unauthenticated if lower (see "Admission" below) */
  uint32_t max_streams;          /* distinct keys served since start (logged in, or holding
                                    recovered orders: see hg_gateway_start); 0: 2 * max_sessions */
  uint32_t login_timeout_ms;     /* a connection with no Login by then is terminated
                                    (TERM_LOGIN_TIMEOUT); 0: 5000 */
  uint32_t login_skew_ms;        /* 0: 5000 */
  uint32_t keepalive_min_ms;     /* 0: 50 */
  uint32_t keepalive_max_ms;     /* 0: 60000 */
  uint32_t tick_ms;              /* timer resolution; 0: 10 */
  uint32_t throttle_rate;        /* new orders + replaces + quotes per second per session; 0: 10000 */
  uint32_t throttle_burst;       /* 0: throttle_rate */
  uint32_t out_high_water;       /* queued bytes at which reading stops; 0: 256 KiB */
  uint32_t out_hard_cap;         /* queued bytes at which the session ends; 0: 4 MiB */
  uint32_t socket_sndbuf;        /* SO_SNDBUF of client sockets, bytes; 0: the kernel's
                                    (which may buffer megabytes before the queue counts) */
  uint32_t retransmit_bytes;     /* per key, bytes of past frames kept; 0: 256 KiB */
  uint32_t retransmit_frames;    /* per key, frames kept; 0: 4096 */
  uint32_t retransmit_max;       /* largest RetransmitRequest.count; 0: 1000 */
  uint32_t max_orders;           /* live orders tracked; 0: 1 << 18 */
  uint32_t max_instruments;      /* 0: 64; also bounds a Positions reply's entries */
  uint32_t max_accounts;         /* 0: 4096 */
  uint32_t max_positions;        /* (account, instrument) pairs; 0: 1 << 16 (see "Limits") */
  uint32_t pending_capacity;     /* commands in flight, power of two; 0: 16384 */
  int64_t mmp_qty;               /* default quote-group protection qty; 0: 1000 */
  uint32_t mmp_window_ms;        /* default window; 0: 1000 */
  int rt_priority;               /* 0: default scheduling; 1..99: the loop thread runs
                                    under SCHED_FIFO at this priority (hourglass/thread.h;
                                    hg_gateway_start fails with -EPERM if not permitted) */
  /* Outbound journal (every sequenced frame and used session id, for
   * retransmission across restarts; see proto/README.md). */
  const char *outlog_dir;        /* created if missing; NULL: <key_dir>/outlog */
  uint64_t outlog_segment_size;  /* a segment rolls before passing it; 0: 64 MiB */
  uint32_t outlog_segments_kept; /* older segments are deleted; 0: 8 */
  uint32_t outlog_max_session_ids; /* logins remembered beyond those found at start; 0: 1 << 18 */
  /* Wall clock for login timestamps (ns since the epoch); NULL: CLOCK_REALTIME. */
  uint64_t (*wall_clock)(void *ctx);
  void *clock_ctx;
  /* Operational messages (no customer data, never secrets; at most 511
   * bytes) with a level HG_LOG_* (hourglass/log.h); called on the thread of the gateway
   * call that logs (the owner's) or on the loop thread. NULL: stderr. */
  void (*log)(void *ctx, int level, const char *msg);
  void *log_ctx;
  /* Cluster mode (see "Cluster mode" above): called on the loop thread
   * when a key that may enter orders (trader, market maker, operator) has
   * passed authentication. NULL return: this node takes orders. Otherwise
   * the leader's order-entry address ("host:port", "" if none is known,
   * valid until the loop runs again): the login is refused with
   * LOGIN_NOT_LEADER naming it. NULL: a single node. */
  const char *(*order_entry_leader)(void *ctx);
  /* Cluster mode: called on the loop thread by hg_gateway_stop() once the
   * sessions have ended, instead of closing every handle on the loop: the
   * replica closes its own handles first (asynchronously), then calls
   * hg_gateway_close_handles(). NULL: the gateway closes them at once. */
  void (*loop_stop)(void *ctx);
  /* Cluster mode: an operator's ClusterRequest (proto/README.md, "Cluster
   * membership"), checked for its fields, on the loop thread. The cluster
   * answers it exactly once, at once or later (a membership change takes
   * until it commits), with hg_gateway_cluster_reply(gw, stream, ref_seq,
   * ...). req's strings are valid during the call only. NULL: the request
   * is refused REJ_INVALID_REQUEST (not a cluster node). */
  void (*cluster_request)(void *ctx, const struct hg_gateway_cluster_req *req, uint32_t stream,
                          uint64_t ref_seq);
  /* Cluster mode: an operator's AddApiKey that passed the gateway's checks,
   * on the loop thread (the key's secret is valid during the call only).
   * The cluster proposes it to the group; every node's apply stores it
   * with hg_gateway_apply_key(), and the node that proposed it answers with
   * hg_gateway_key_reply() once it is committed (or failed). 0: proposed;
   * otherwise an HG_E* code, answered at once as hg_gateway_key_reply()
   * maps it. NULL: the key is stored in this node's key store at once. */
  int (*replicate_key)(void *ctx, const struct hg_gateway_key *key, uint32_t stream,
                       uint64_t ref_seq);
  void *cluster_ctx;
} hg_gateway_config_t;

/* An operator's ClusterRequest (the ClusterOp values). */
typedef enum hg_gateway_cluster_op {
  HG_GW_CLUSTER_STATUS = 1,
  HG_GW_CLUSTER_ADD = 2,      /* id, raft_address, client_address */
  HG_GW_CLUSTER_REMOVE = 3,   /* id */
  HG_GW_CLUSTER_TRANSFER = 4  /* id, 0: the most up-to-date voter */
} hg_gateway_cluster_op_t;

typedef struct hg_gateway_cluster_req {
  int op;                      /* hg_gateway_cluster_op_t */
  uint32_t id;
  const char *raft_address;    /* CLUSTER_ADD: "ip:port"; otherwise NULL */
  const char *client_address;  /* CLUSTER_ADD: "host:port"; otherwise NULL */
} hg_gateway_cluster_req_t;

typedef struct hg_gateway_cluster_member {
  uint32_t id;
  char raft_address[64];
  char client_address[64];     /* "" if unknown */
  int voter;
  uint64_t match_index, lag;
} hg_gateway_cluster_member_t;

/* The answer to a ClusterRequest. status 0, or the refusal as an HG_E*
 * code, sent as a RejectReason: HG_EPERM REJ_NOT_LEADER, HG_EBUSY
 * REJ_CHANGE_IN_PROGRESS, HG_ENOTFOUND REJ_UNKNOWN_MEMBER, HG_EEXISTS
 * REJ_MEMBER_EXISTS, HG_ESTATE REJ_MEMBER_IS_LEADER, HG_EINVAL
 * REJ_INVALID_REQUEST, anything else REJ_CHANGE_FAILED. */
typedef struct hg_gateway_cluster_reply {
  int status;
  const char *text;            /* NULL: none */
  uint32_t node_id, leader_id;
  uint64_t term, commit_index, applied_index;
  size_t n_members;
  const hg_gateway_cluster_member_t *members;
} hg_gateway_cluster_reply_t;

typedef struct hg_gateway_key {
  uint64_t key_id;        /* > 0 */
  uint32_t role;          /* HG_ROLE_* */
  uint32_t account;       /* trader, market maker: > 0; others: 0 */
  uint32_t firm;          /* > 0 except for operators (may be 0) */
  const uint8_t *secret;  /* HG_WIRE_SECRET_MIN..MAX (16..64) bytes; copied */
  size_t secret_len;
} hg_gateway_key_t;

typedef struct hg_gateway_stats {
  uint64_t connections;   /* accepted since start */
  uint64_t logins;        /* successful */
  uint64_t login_rejects;
  uint64_t terminations;  /* sessions ended by a Terminate other than logout (and the
                             refusals at accept that hold a connection slot) */
  uint64_t frames_in;
  uint64_t frames_out;
  uint64_t submitted;     /* commands submitted to the pipeline */
  uint64_t busy;          /* submits refused with HG_EBUSY */
  uint64_t throttled;
  uint64_t refused;       /* connections refused at accept (TERM_ADDRESS_LIMIT, TERM_SERVER_BUSY) */
  uint64_t tls_failures;  /* connections closed for a failed TLS handshake or record */
  uint32_t sessions;      /* logged in now */
  uint32_t unauthenticated;
  /* Outbound journal health (no customer data). */
  uint64_t outlog_write_errors;  /* failed writes (e.g. disk full); frames are still sent */
  uint64_t outlog_dropped;       /* records never written (staging full while failing) */
  uint64_t outlog_corrupt;       /* bad records met at start-up or by a retransmission */
  uint32_t outlog_segments;
  int outlog_failing;            /* 1 while the last write failed */
} hg_gateway_stats_t;

typedef struct hg_gateway hg_gateway_t;

/* Fills cfg with the defaults above (key_dir NULL). */
void hg_gateway_config_init(hg_gateway_config_t *cfg);

/*
 * Creates the gateway: opens the key store and the outbound journal (its
 * start-up scan restores each key's seq and the used session ids; bad
 * records are logged and skipped), allocates the tables sized by cfg (see
 * "Memory") and binds the listening socket (not yet accepting). Owner thread. Returns 0 and *out,
 * HG_EINVAL (config, e.g. max_unauthenticated_per_address above
 * max_unauthenticated; or a TLS certificate, key or CA file that cannot be
 * loaded, or a key that does not match its certificate: logged with the
 * file's name), the store's errors, HG_EVERSION (a journal segment of
 * a newer format), -errno of the journal's directory and files or of
 * bind/listen (e.g. -EADDRINUSE), or -ENOMEM. On failure nothing is left
 * allocated.
 */
int hg_gateway_create(const hg_gateway_config_t *cfg, hg_gateway_t **out);

/*
 * Pipeline out_notify callback: ctx is the gateway. Any thread; cheap and
 * non-blocking (an atomic check and uv_async_send). Does nothing once the
 * gateway is stopping.
 */
void hg_gateway_notify(void *ctx);

/*
 * Pipeline loop_drain callback (loop mode): ctx is the gateway. Called by
 * the pipeline on the gateway's loop thread in the middle of a command
 * whose events overflow the stage; delivers every record consumer 0 can
 * poll to the sessions, as the loop does, so none is lost. Does nothing
 * before hg_gateway_attach. The cluster's apply calls it too, from another
 * handle's callback on the loop, when hg_pipeline_apply_batch() needs room.
 */
void hg_gateway_drain(void *ctx);

/*
 * Pipeline route callbacks (cluster mode: cfg.route_out / cfg.route_in,
 * route_ctx = gw; hourglass/pipeline.h, "Routes"), on the gateway's loop
 * thread. hg_gateway_route_out writes where the results of the command
 * this node submitted with origin go: the entering key, the request's
 * ref_seq (with the session's ref_seq_base), the kind of request, whether
 * the entering session had cancel-on-disconnect, the quote group and the
 * settlement part (zeros for a command the gateway did not submit).
 * hg_gateway_route_in turns such a route, on a node that applies the
 * command from the group, into a pending entry as if this gateway had
 * submitted it (opening the key's stream if needed) and returns its
 * origin; 0 for a zero route; HG_PIPE_ROUTE_BUSY while the pending ring is
 * full. So every node routes every result into the same key's stream
 * with the same frame (see "Cluster" in proto/README.md).
 */
void hg_gateway_route_out(void *ctx, uint64_t origin, uint8_t *out);
/* Pipeline stream_in callback (cluster mode, ctx the gateway): holds a
 * frame the leader's gateway decided, until the pipeline releases it. */
int hg_gateway_stream_in(void *ctx, const uint8_t *bytes, size_t len);
uint64_t hg_gateway_route_in(void *ctx, const uint8_t *route, size_t len,
                             const hg_command_t *cmd);

/*
 * Binds the gateway to an opened, not yet started pipeline and seeds its
 * mirror from the exchange (instruments, levels, live orders, accounts,
 * positions, the clearing ledger).
 * Session-scoped orders (cancel-on-disconnect orders and quotes of a previous
 * process) are not mirrored: hg_gateway_start() cancels them. Notes which
 * accounts hold recovered orders (hg_gateway_start opens their streams).
 * Owner thread,
 * before hg_gateway_start. 0, HG_ESTATE (already attached or started),
 * HG_EFULL (the exchange holds more instruments, orders or accounts than the
 * gateway's tables, or an instrument's price levels could not be allocated;
 * for orders an error is logged with both numbers: raise max_orders, the
 * gateway does not start with orders it cannot track), -ENOMEM (the ledger
 * copy), or the clearing's error reading its ledger. Positions beyond
 * max_positions are logged and left out, not an error.
 */
int hg_gateway_attach(hg_gateway_t *gw, hg_pipeline_t *p);

/*
 * Adds (or with replace != 0 overwrites) an API key in the key store. Owner
 * thread before start (afterwards keys are added by operators over the
 * wire). 0, HG_EINVAL (inconsistent key, a secret over 64 bytes, or called
 * after start), HG_EEXISTS, store errors.
 */
int hg_gateway_add_key(hg_gateway_t *gw, const hg_gateway_key_t *key, int replace);

/*
 * Bootstraps keys from a text file, one per line:
 *   <key_id> <trader|market_maker|risk_viewer|operator> <account> <firm> <secret_hex>
 * fields separated by blanks; ids plain decimal (key_id 64-bit, account and
 * firm 32-bit), the secret hex digits only (an even number, at most 128).
 * '#' starts a comment (of any length; a line is otherwise at most 511
 * bytes with its newline). Existing keys with the same id are replaced. Owner
 * thread before start. 0, -errno (file), HG_EPARSE (a bad line; *line set,
 * nothing added from the bad line on), or hg_gateway_add_key's errors.
 */
int hg_gateway_load_keys(hg_gateway_t *gw, const char *path, unsigned *line);

/* One line of a keys file (format above; the NUL-terminated line, cut at
 * its '#' and split into fields in place; the caller wipes it): 0 and *key (key->secret points into secret, which
 * receives the decoded bytes), 1 for a blank or comment-only line, HG_EPARSE
 * for a bad line. Checks the syntax only (hg_gateway_add_key checks the
 * key). Pure; any thread. */
int hg_gateway_key_line_parse(char *line, hg_gateway_key_t *key,
                              uint8_t secret[HG_WIRE_SECRET_MAX]);

/* An API key as bytes, the one encoding of a key wherever one is kept (the
 * key store's records, a cluster's replicated key entries and snapshots):
 * u8 version 1, u64 key id, u32 role, account, firm (little-endian), u8
 * secret length, the secret zero-padded to HG_WIRE_SECRET_MAX bytes. */
#define HG_GATEWAY_KEY_BYTES (1 + 8 + 4 + 4 + 4 + 1 + HG_WIRE_SECRET_MAX)

/* Encodes key (its secret_len at most HG_WIRE_SECRET_MAX) into out. Pure. */
void hg_gateway_key_encode(const hg_gateway_key_t *key, uint8_t out[HG_GATEWAY_KEY_BYTES]);

/* Decodes buf[0..len) into *key, whose secret then points into secret.
 * 0, or HG_ECORRUPT (another length or version, or a key whose role,
 * account, firm or secret length do not go together). Pure. */
int hg_gateway_key_decode(const uint8_t *buf, size_t len, hg_gateway_key_t *key,
                          uint8_t secret[HG_WIRE_SECRET_MAX]);

/* Starts accepting, on a new loop thread (in loop mode, with the
 * pipeline's handles on that loop: see above). First, on the owner thread:
 *  - records the next exchange epoch in the key store (one more than the
 *    last start's; sent in every LoginAck, proto/README.md);
 *  - opens the stream of each account that held live orders at attach (the
 *    account's lowest-numbered trader or market-maker key with frames in the
 *    outbound journal; allocated here, counted in max_streams), so that the
 *    reports of recovered orders are sequenced and kept in that key's stream
 *    whether or not it logs in; accounts with no such key, or beyond
 *    max_streams, are logged and their reports reach no stream;
 *  - if the exchange held session-scoped orders at attach (their sessions
 *    ended with the previous process), submits one
 *    HG_COMMAND_SESSIONS_ENDED, so that it is sequenced before any client
 *    request, and logs the count.
 * The pipeline must be started. 0, HG_ESTATE (not attached, or started
 * before), the key store's errors (the epoch could not be recorded: nothing
 * started), HG_EBUSY (that command could not be submitted: nothing started),
 * -EPERM (cfg.rt_priority set and real-time scheduling not permitted), -errno. */
int hg_gateway_start(hg_gateway_t *gw);

/*
 * Cluster snapshots (loop thread, once every released result is drained:
 * the state is then exactly the applied entries). hg_gateway_route_state
 * writes where this gateway routes, in cap bytes at buf, and returns the
 * bytes it takes (nothing written when above cap): each stream's key and
 * next seq, each account's home key (the stream of reports of orders no
 * key is known to have entered), each mirrored order's entering key,
 * quote group and cancel-on-disconnect flag. Host byte order (the
 * cluster's machines alike): u32 HG_GATEWAY_ROUTES_MAGIC, u32 streams,
 * u32 accounts, u32 orders; per stream u64 key, u64 next seq; per account
 * u32 account, u32 zero, u64 key; per order u64 order id, u64 key (0:
 * none), u32 quote group, u8 cod, 3 zero bytes.
 * hg_gateway_seed_routes (owner thread, after hg_gateway_attach and the
 * keys, before hg_gateway_start) takes such bytes from the snapshot the
 * node starts from: a stream's next seq rises to the snapshot's (a node
 * that starts from a snapshot installed from the leader never sequenced
 * the frames before it, and numbers on as the others do), accounts get
 * their home keys and recovered orders their entering keys, so their
 * reports go where they go on every other node. Keys this node does not
 * know and orders it does not mirror are skipped. 0, HG_ECORRUPT (does
 * not parse; nothing applied), HG_ESTATE (not attached, or started).
 */
#define HG_GATEWAY_ROUTES_MAGIC 0x31524748u /* "HGR1" */
size_t hg_gateway_route_state(hg_gateway_t *gw, uint8_t *buf, size_t cap);
int hg_gateway_seed_routes(hg_gateway_t *gw, const uint8_t *b, size_t len);

/* Cluster mode, the loop thread, when this node has just become the
 * leader that takes orders (its pipeline writable, nothing of this term
 * submitted yet): every session counts as ended with the previous
 * leader (sessions live on the leader only), so
 * if the exchange holds session-scoped orders (cancel-on-disconnect orders
 * and quotes: mirrored ones, and those recovered at attach) it submits one
 * HG_COMMAND_SESSIONS_ENDED through the log, before any client request.
 * Their reports go to the keys that entered them. 0 (also when there is
 * nothing to cancel), HG_EBUSY or HG_EUNAVAIL (not submitted: call again). */
int hg_gateway_sessions_ended(hg_gateway_t *gw);

/* Cluster mode (cfg.order_entry_leader set): the exchange epoch LoginAck
 * carries from now on, the group's rather than this node's count of starts
 * (hg_gateway_start does not count them in cluster mode). The owner thread
 * before start, then the loop thread. */
void hg_gateway_set_epoch(hg_gateway_t *gw, uint64_t epoch);

/* The bound port (useful with port 0). Any thread after create. */
uint16_t hg_gateway_port(const hg_gateway_t *gw);

/* The gateway's libuv loop, for a replica (hourglass/replica.h) that runs
 * on the same thread. Valid from create to destroy; run by the loop thread
 * between hg_gateway_start() and hg_gateway_stop(). Owner thread. */
uv_loop_t *hg_gateway_loop(hg_gateway_t *gw);

/* Closes every handle on the loop that is not closing yet, so that the
 * loop thread exits (see loop_stop). The loop thread only. */
void hg_gateway_close_handles(hg_gateway_t *gw);

/* Sends the answer to the ClusterRequest ref_seq (cluster_request above)
 * into the key stream stream. Loop thread. */
void hg_gateway_cluster_reply(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq,
                              const hg_gateway_cluster_reply_t *rep);

/* Stores an API key the group committed (cluster mode), on every node;
 * an existing key with its id is replaced (the group's record wins over a
 * keys file's). Loop thread once started, owner thread before. 0,
 * HG_EINVAL (inconsistent key) or the key store's errors. */
int hg_gateway_apply_key(hg_gateway_t *gw, const hg_gateway_key_t *key);

/* Calls fn(ctx, key) for every key in the key store, in id order (key and
 * its secret valid during the call only); a nonzero return stops the walk
 * and is returned. For a cluster to hand its keys to a new member. 0 or
 * the key store's errors. Loop thread once started, owner thread before. */
int hg_gateway_keys_foreach(hg_gateway_t *gw, int (*fn)(void *ctx, const hg_gateway_key_t *key),
                            void *ctx);

/* Answers the AddApiKey ref_seq that replicate_key proposed: status 0
 * (committed), HG_EEXISTS (REJ_KEY_EXISTS), HG_EINVAL
 * (REJ_INVALID_REQUEST), HG_EPERM (REJ_NOT_LEADER: this node is not the
 * leader), anything else REJ_UNAVAILABLE (the outcome is unknown when
 * leadership was lost: the group may still commit it). Loop thread. */
void hg_gateway_key_reply(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, int status);

/*
 * Stops: the loop reads no more requests and waits (up to 2 s) for the
 * results of the commands it already submitted, which are sequenced into the
 * keys' streams and sent; then every session gets
 * Terminate(TERM_SERVER_SHUTDOWN), connections close, the loop thread exits
 * (joined before returning). Pipeline output after this is not drained (call
 * it before hg_pipeline_stop: a stopped pipeline answers nothing more, and
 * commands left unanswered are logged). Cancel-on-disconnect does not
 * fire for the sessions closed here: their orders are session-scoped and the
 * next start's SESSIONS_ENDED cancels them, into the keys' streams. Owner
 * thread. Idempotent.
 */
void hg_gateway_stop(hg_gateway_t *gw);

/* Stops if needed and frees everything. Call after the pipeline is stopped
 * (it may still call hg_gateway_notify until then). NULL is a no-op. */
void hg_gateway_destroy(hg_gateway_t *gw);

/* Counters; any thread (relaxed reads, may be slightly stale). */
void hg_gateway_stats(const hg_gateway_t *gw, hg_gateway_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_GATEWAY_H */
