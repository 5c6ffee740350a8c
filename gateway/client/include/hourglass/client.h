/*
 * hourglass/client.h - a small client library for the gateway's wire
 * protocol (hourglass.v1 over varint-delimited frames, proto/README.md),
 * used by hgctl, the tests and the load generator, and installed for
 * programs outside the tree (gateway/client/README.md): this header is the
 * one a program includes; it brings hourglass/error.h (HG_E* codes,
 * hg_strerror()), hourglass/wire.h and the generated hourglass.pb-c.h (the
 * hourglass.v1 messages) with it. Link flags: pkg-config hourglass-client.
 *
 * What it does:
 *  - connects over TCP (poll-based, with a timeout) or takes an already
 *    connected socket, and logs in: a fresh random 16-byte session id, the
 *    wall-clock timestamp and HMAC-SHA256 over them with the key's secret
 *    (hg_wire_login_mac());
 *  - sends application messages with the session's request sequence
 *    numbers (1, 2, ... per login, as the server expects), and Heartbeats
 *    whenever nothing was sent for one keepalive interval;
 *  - receives and decodes frames (hourglass/wire.h's framing and per-frame arena:
 *    no malloc per frame) and tracks the server's recoverable stream: every
 *    sequenced frame is delivered once and in order. A frame whose seq is
 *    below the next expected one (a duplicate) is dropped; one above it (a
 *    gap, typically after a reconnect: LoginAck.next_seq is past the last
 *    frame this client saw) is held back (dropped) and the library sends a
 *    RetransmitRequest for the missing range (at most retransmit_max per
 *    request, one request at a time, as the server requires), then delivers
 *    the resent frames in order. Frames a range no longer holds are counted
 *    in stats.lost and skipped.
 *
 * Storage. hg_client_create() allocates every buffer once (receive buffer,
 * decode arena, send buffer); nothing else allocates, except
 * hg_client_publish_samples() (its message, freed before it returns). A decoded frame lives
 * in the arena until the next hg_client_recv() or hg_client_connect().
 * With TLS, OpenSSL allocates its context at create and a connection's
 * state at each connect.
 *
 * TLS. With config.tls the connection runs TLS 1.3 (OpenSSL) before the
 * Login: the server's certificate must chain to tls_ca_file (or the system
 * store) and carry tls_server_name (or host); otherwise connect fails with
 * HG_ETLS and nothing is sent. A server requiring client certificates
 * needs tls_cert and tls_key; without them (or with one it does not trust)
 * the server closes the connection at the handshake's end, and connect
 * returns HG_ETLS or a closed-connection error. The library keeps the
 * session ticket of the last connection and offers it at the next
 * connect (resumption; stats.tls_resumed). The socket stays non-blocking;
 * the handshake is bounded by timeout_ms like the rest of connect.
 *
 * Blocking. Sockets are non-blocking underneath; the calls wait with poll()
 * up to their timeouts. With config.nonblocking_send set, a send never
 * waits: what the socket does not take stays in the send buffer (see
 * hg_client_flush(), hg_client_tx_pending()), which is what an event loop
 * (the load generator) wants.
 *
 * Clusters. A node that does not take orders answers the login of a key
 * that may enter them with LOGIN_NOT_LEADER and the leader's address
 * (proto/README.md, "Cluster"); hg_client_connect() then connects there
 * and logs in again (a few hops at most), and from then on host and port
 * are the leader's. With config.nodes it also tries each listed node in
 * turn when the current one does not answer or knows no leader, so a
 * client given every node's address finds the leader after a failover by
 * calling hg_client_connect() again. A refusal for any other reason ends
 * the search (the same key is refused everywhere).
 *
 * Threads. A client object is owned by one thread at a time; different
 * clients are independent.
 *
 * Errors: 0 or a positive count on success; negative on failure: -errno of
 * the socket calls (-ECONNREFUSED, -ECONNRESET for a peer that closed,
 * -ETIMEDOUT, -ENOTCONN when not connected), HG_EINVAL (bad argument),
 * HG_EAUTH (login rejected: hg_client_login_reject() says why), HG_EPARSE
 * (the server sent a malformed frame; the connection is closed), HG_EFULL
 * (the send buffer cannot take the frame), HG_ESTATE (not allowed now, e.g.
 * a second retransmit request while one runs).
 */
#ifndef HOURGLASS_CLIENT_H
#define HOURGLASS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hourglass/error.h"
#include "hourglass/index.h"
#include "hourglass/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HG_CLIENT_DEFAULT_HOST "127.0.0.1"
#define HG_CLIENT_DEFAULT_PORT 7700

typedef struct hg_client_config {
  const char *host;            /* numeric address or name; NULL: 127.0.0.1 (copied) */
  uint16_t port;               /* 0: 7700 */
  uint64_t key_id;             /* > 0 */
  const uint8_t *secret;       /* 1 .. HG_WIRE_SECRET_MAX (64) bytes; copied */
  size_t secret_len;
  bool cancel_on_disconnect;   /* asked for at login */
  uint32_t keepalive_ms;       /* asked for at login (the server clamps); 0: 1000 */
  uint32_t max_frame;          /* largest body accepted from the server; 0: 64 KiB */
  uint32_t tx_capacity;        /* send buffer bytes; 0: 256 KiB */
  uint32_t timeout_ms;         /* connect + login, and a blocking send; 0: 5000 */
  uint32_t retransmit_max;     /* largest count per RetransmitRequest; 0: 1000 */
  bool nonblocking_send;       /* sends never wait (event-loop use) */
  /* Wall clock for the login timestamp, ns since the epoch; NULL: CLOCK_REALTIME. */
  uint64_t (*wall_clock)(void *ctx);
  void *clock_ctx;
  /* TLS 1.3 (see "TLS" above). Files are read at create (not kept). */
  bool tls;                    /* connect with TLS */
  const char *tls_ca_file;     /* PEM CAs to trust; NULL: the system's store */
  const char *tls_server_name; /* name (or IP literal) the certificate must carry, also
                                  sent as SNI when a name; NULL: host */
  const char *tls_cert;        /* client certificate for mutual TLS (PEM); NULL: none */
  const char *tls_key;         /* its key (PEM); required with tls_cert */
  /* A cluster's other nodes, "host:port,host:port,..." ([v6]:port for IPv6
   * literals; copied, at most 1023 bytes): see "Clusters". NULL: none. */
  const char *nodes;
} hg_client_config_t;

/* What the LoginAck said; valid until the next connect. */
typedef struct hg_client_session {
  uint8_t session_id[HG_WIRE_SESSION_ID_LEN];
  uint32_t role;               /* hourglass.v1.Role */
  uint32_t account;
  uint32_t firm;
  uint32_t keepalive_ms;       /* the interval in force */
  uint64_t server_time_ns;
  uint64_t login_next_seq;     /* the server's next stream seq at login */
  bool cancel_on_disconnect;
  /* The exchange epoch (LoginAck.epoch): it goes up at every start of the
   * exchange. 0: the server did not send one. */
  uint64_t epoch;
  /* The epoch differs from the one of this client's previous login: the
   * exchange restarted in between (its session-scoped orders are cancelled
   * and the cancels are in the stream; other orders may have changed: ask
   * OrderStatus for the ones kept). false at the first login. */
  bool restarted;
  /* LoginAck.ref_seq_base: the replies to this session's requests carry
   * ref_seq = request seq + this (0 unless the key had another live
   * session at login; proto/README.md, "Several sessions of one key").
   * hg_client_send() returns the sum. */
  uint64_t ref_seq_base;
} hg_client_session_t;

typedef struct hg_client_stats {
  uint64_t frames_in;          /* decoded frames received */
  uint64_t frames_out;         /* frames sent (queued) */
  uint64_t heartbeats_out;
  uint64_t duplicates;         /* sequenced frames dropped as already seen */
  uint64_t held_back;          /* sequenced frames dropped because of a gap (re-requested) */
  uint64_t retransmit_requests;/* sent by the library or the caller */
  uint64_t lost;               /* stream frames the server could not resend */
  uint64_t tls_handshakes;     /* completed TLS handshakes */
  uint64_t tls_resumed;        /* ... of which resumed a previous session (ticket) */
} hg_client_stats_t;

/* A new order (NewOrderRequest). Enum fields take hourglass.v1 values. */
typedef struct hg_client_order {
  uint32_t instrument_id;
  uint64_t client_order_id;    /* < 2^63 */
  uint32_t side;               /* HOURGLASS__V1__SIDE__SIDE_BUY / _SELL */
  uint32_t type;               /* ORD_TYPE_LIMIT / _MARKET */
  uint32_t tif;                /* TIF_GTC / _DAY / _IOC / _FOK */
  bool has_price;              /* required for limit orders */
  int64_t price;               /* ticks */
  int64_t qty;
  uint32_t stp;                /* StpMode; STP_DEFAULT (0) is not sent */
  bool post_only;
  uint32_t smp_group;          /* 0 is not sent */
} hg_client_order_t;

typedef struct hg_client hg_client_t;

/* Fills cfg with the defaults above (no key). */
void hg_client_config_init(hg_client_config_t *cfg);

/* Allocates a client (not connected). 0 and *out, HG_EINVAL (key_id 0, secret
 * missing or longer than 64 bytes, max_frame above HG_WIRE_MAX_FRAME_LIMIT),
 * HG_ETLS (a TLS file cannot be read, or a key without its certificate),
 * -ENOMEM. */
int hg_client_create(const hg_client_config_t *cfg, hg_client_t **out);

/* Closes the connection (no Logout) and frees everything. NULL is a no-op. */
void hg_client_destroy(hg_client_t *c);

/*
 * Connects to config host:port and logs in (following a cluster's leader,
 * see "Clusters"); waits up to config.timeout_ms for each LoginAck. Closes
 * a previous connection first (without Logout), keeping the stream
 * position: a reconnect then recovers missed frames by retransmission. Returns 0, HG_EAUTH (LoginReject or a Terminate instead of
 * an ack; see hg_client_login_reject), HG_ETLS (TLS handshake failed: see
 * "TLS"), -ETIMEDOUT, the socket's -errno (-ECONNREFUSED, ...), HG_EINVAL
 * (host does not resolve), HG_EPARSE.
 */
int hg_client_connect(hg_client_t *c);

/* Like hg_client_connect over an already connected stream socket fd, which
 * the client now owns (closed on failure too). For tests and Unix sockets. */
int hg_client_login_fd(hg_client_t *c, int fd);

/*
 * After HG_EAUTH: the LoginRejectCode (or, with *terminated set, the
 * TerminateCode) and the server's text ("" if none). text may be NULL.
 * Returns 0 if the last connect was refused that way, HG_ESTATE otherwise.
 */
int hg_client_login_reject(const hg_client_t *c, uint32_t *code, bool *terminated,
                           char *text, size_t text_cap);

/* After a LOGIN_NOT_LEADER refusal: the leader's address it named
 * ("host:port"), "" if none. Valid until the next connect. */
const char *hg_client_login_leader(const hg_client_t *c);

/* The address the client connects to now ("host:port"; after a connect that
 * followed a leader, the leader's). */
void hg_client_address(const hg_client_t *c, char *out, size_t cap);

/* The current session (NULL when not logged in). */
const hg_client_session_t *hg_client_session(const hg_client_t *c);

/* The socket (-1 when not connected): poll it for POLLIN (and POLLOUT while
 * hg_client_tx_pending()). */
int hg_client_fd(const hg_client_t *c);

/* Closes the socket without Logout (cancel-on-disconnect then applies).
 * The stream position is kept for a later reconnect. */
void hg_client_close(hg_client_t *c);

/* Sends Logout and waits up to timeout_ms for the server's Terminate, then
 * closes. 0, -ETIMEDOUT (closed anyway), -ENOTCONN. */
int hg_client_logout(hg_client_t *c, int timeout_ms);

/*
 * Sends one Envelope. For a client application message (body case 30..79)
 * the next request seq is put in env->seq (the caller's env is modified)
 * and *seq (may be NULL) is set to the ref_seq its replies will carry: that
 * seq plus the session's ref_seq_base (the seq itself for a key's only
 * session); session messages go without seq. Returns 0, -ENOTCONN,
 * HG_EFULL, HG_ERANGE (encodes to more than the frame limit), a socket
 * -errno, or -ETIMEDOUT (blocking send: the socket took nothing for
 * timeout_ms; the frame stays queued).
 */
int hg_client_send(hg_client_t *c, Hourglass__V1__Envelope *env, uint64_t *seq);

/* Builders: one application message each, sent with hg_client_send(). */
int hg_client_new_order(hg_client_t *c, const hg_client_order_t *o, uint64_t *seq);
int hg_client_cancel(hg_client_t *c, uint32_t instrument_id, uint64_t order_id, uint64_t *seq);
int hg_client_replace(hg_client_t *c, uint32_t instrument_id, uint64_t order_id, int64_t new_price,
                      int64_t new_qty, uint64_t *seq);
/* instrument_id 0: every instrument; sides: hourglass.v1.SideFilter. */
int hg_client_mass_cancel(hg_client_t *c, uint32_t instrument_id, uint32_t sides, uint64_t *seq);
int hg_client_order_status(hg_client_t *c, uint32_t instrument_id, uint64_t order_id,
                           uint64_t *seq);
/* account 0: the own account. */
int hg_client_positions(hg_client_t *c, uint32_t account, uint64_t *seq);
/* Answered by InstrumentList; each InstrumentInfo carries the reference
 * price and price band the pre-trade check applies (ref_price, band_low,
 * band_high, ticks). */
int hg_client_instruments(hg_client_t *c, uint64_t *seq);
/* depth 0: the server default (10). Answered by MarketDataSnapshot, or a
 * Response refusing it (REJ_INVALID_REQUEST, REJ_UNKNOWN_INSTRUMENT). */
int hg_client_md_subscribe(hg_client_t *c, uint32_t instrument_id, uint32_t depth, uint64_t *seq);
/* Answered by a Response: 0, REJ_NOT_SUBSCRIBED or REJ_UNKNOWN_INSTRUMENT. */
int hg_client_md_unsubscribe(hg_client_t *c, uint32_t instrument_id, uint64_t *seq);

/*
 * Operator settlement commands (proto/README.md, "Settlement commands").
 * Each is one request answered by one SettlementResult with its ref_seq;
 * days are UTC day numbers (hg_index_day_parse()). Strings are copied into
 * the frame; they are checked by the server (REJ_INVALID_REQUEST).
 */
int hg_client_provider_grade(hg_client_t *c, const char *provider, const char *gpu,
                             const char *grade, int32_t effective_day, uint64_t *seq);
/*
 * Sends one PublishSamples with samples s[0 .. *taken) of s[0..n): as many
 * as fit one frame (config.max_frame, less a margin) and at most
 * HG_CLIENT_SAMPLES_MAX. Call again with s + *taken for the rest. Returns
 * 0, HG_EINVAL (n 0, or one sample alone does not fit a frame) or
 * hg_client_send's errors.
 */
#define HG_CLIENT_SAMPLES_MAX 1024
int hg_client_publish_samples(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                              const hg_index_sample_t *s, size_t n, size_t *taken,
                              uint64_t *seq);
/* DISCARD_SAMPLES, COMPUTE_FIXING, FINALIZE_FIXING of (gpu, grade, day). */
int hg_client_discard_samples(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                              uint64_t *seq);
int hg_client_compute_fixing(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                             uint64_t *seq);
int hg_client_finalize_fixing(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                              uint64_t *seq);
/* An externally computed fixing: value micro-USD per GPU-hour, source 1..47 bytes. */
int hg_client_publish_fixing(hg_client_t *c, const char *gpu, const char *grade, int32_t day,
                             int64_t value, const char *source, uint64_t *seq);
int hg_client_daily_settlement(hg_client_t *c, int32_t day, uint64_t *seq);
/* A mark round of the clearing guarantee (settlement/CONTRACT.md 4.6), and a
 * deposit of amount micro-USD (> 0) into the insurance fund (4.7); both
 * answered by a SettlementResult. */
int hg_client_mark(hg_client_t *c, uint64_t *seq);
int hg_client_fund_deposit(hg_client_t *c, int64_t amount, uint64_t *seq);
int hg_client_expire(hg_client_t *c, uint32_t instrument_id, uint64_t *seq);
/* Twelve monthly contracts from (year, month), ids first_id .. first_id + 11;
 * ref_price 0: none. */
int hg_client_list_curve(hg_client_t *c, const char *gpu, const char *grade, uint32_t year,
                         uint32_t month, uint32_t first_id, uint32_t max_orders,
                         uint32_t max_accounts, int64_t ref_price, uint64_t *seq);
/* Existing operator commands. */
int hg_client_halt(hg_client_t *c, uint32_t instrument_id, bool resume, uint64_t *seq);
/* DelistInstrument: cancels the instrument's orders and removes it. */
int hg_client_delist(hg_client_t *c, uint32_t instrument_id, uint64_t *seq);
/* EndOfSession: every DAY order expires; session_date YYYYMMDD or 0 (informational). */
int hg_client_end_of_session(hg_client_t *c, uint32_t session_date, uint64_t *seq);
int hg_client_add_account(hg_client_t *c, uint32_t account, uint32_t firm, uint64_t *seq);
/* Operators: AddApiKey for key_id (role a Role value; account and firm as
 * proto/README.md requires them per role; 0: absent) with the secret
 * secret[0..len), 16..64 bytes (encoded into the frame sent; the caller
 * wipes its own copy); answered by a Response, which never echoes it.
 * Returns hg_client_send's errors, or HG_EINVAL for a secret of another
 * length. */
int hg_client_add_api_key(hg_client_t *c, uint64_t key_id, uint32_t role, uint32_t account,
                          uint32_t firm, const uint8_t *secret, size_t len, uint64_t *seq);
/* Operators, cluster mode: a ClusterRequest (op a ClusterOp: status, add,
 * remove, transfer; raft_address and client_address for add only, else
 * NULL), answered by ClusterStatus (proto/README.md, "Cluster
 * membership"). Returns hg_client_send's errors. */
int hg_client_cluster(hg_client_t *c, uint32_t op, uint32_t id, const char *raft_address,
                      const char *client_address, uint64_t *seq);
/* withdraw false: Deposit; true: Withdraw. amount micro-USD > 0. */
int hg_client_cash(hg_client_t *c, uint32_t account, int64_t amount, bool withdraw,
                   uint64_t *seq);
/* Market makers: a MassQuote of n entries (1..64) in quote_group; mmp_qty 0
 * and mmp_window_ms 0 leave the gateway's protection defaults. */
int hg_client_mass_quote(hg_client_t *c, uint32_t quote_group,
                         const Hourglass__V1__QuoteEntry *const *entries, size_t n,
                         int64_t mmp_qty, uint32_t mmp_window_ms, uint64_t *seq);
int hg_client_quote_group_reset(hg_client_t *c, uint32_t quote_group, uint64_t *seq);
/* Risk viewers: start the firm's drop copy. */
int hg_client_drop_copy(hg_client_t *c, uint64_t *seq);
/*
 * StatementRequest: one page of an account's ledger entries (oldest first,
 * those with ledger index >= from_index; instrument_id 0: every entry),
 * answered by one Statement with this request's ref_seq. account 0: the own
 * account (traders, market makers); risk viewers name an account of their
 * firm. A Statement with next_index != 0 has more: ask again with
 * from_index = next_index. Returns hg_client_send's errors.
 */
int hg_client_statement(hg_client_t *c, uint32_t account, uint32_t instrument_id,
                        uint64_t from_index, uint64_t *seq);
/*
 * OpenOrdersRequest: one page of live orders (by account, then order id,
 * from from_account/from_order_id; instrument_id 0: every instrument; at
 * most limit, 1..1000, 0: 1000), answered by one OpenOrders with this
 * request's ref_seq. account 0: the own account (traders, market makers),
 * the whole firm (risk viewers, who may also name an account of it). An
 * OpenOrders with next_order_id != 0 has more: ask again with from_account
 * = next_account and from_order_id = next_order_id. Returns
 * hg_client_send's errors.
 */
int hg_client_open_orders(hg_client_t *c, uint32_t account, uint32_t instrument_id,
                          uint32_t from_account, uint64_t from_order_id, uint32_t limit,
                          uint64_t *seq);

/*
 * Asks the server to resend its stream frames [from_seq, from_seq + count)
 * (count 1 .. config.retransmit_max). The Retransmission header and the
 * resent frames are all delivered by hg_client_recv(), even those seen
 * before. Returns 0, HG_EINVAL, HG_ESTATE (one is already running), or
 * hg_client_send's errors.
 */
int hg_client_retransmit(hg_client_t *c, uint64_t from_seq, uint32_t count);

/* Sends a Heartbeat if nothing was sent for the keepalive interval. Call it
 * at least that often from an event loop; hg_client_recv() calls it too. */
int hg_client_tick(hg_client_t *c);

/* Writes queued bytes, waiting up to timeout_ms (0: not at all, < 0: no
 * limit). 0 when nothing is left, -EAGAIN if bytes remain, -errno. */
int hg_client_flush(hg_client_t *c, int timeout_ms);

/*
 * Batching. After hg_client_cork(c), sends (requests, heartbeats) are only
 * encoded into the send buffer; nothing is written until hg_client_flush()
 * or hg_client_uncork(), so a burst of requests leaves in one write (one
 * system call, one TCP segment where it fits) instead of one each. The seq
 * of each request is assigned when it is queued, as without corking.
 * hg_client_recv() does not write while corked. If a frame does not fit in
 * the send buffer (config.tx_capacity), what is queued is written first: as
 * much as the socket takes for a nonblocking_send client (HG_EFULL if that
 * still leaves no room), all of it within timeout_ms otherwise (-ETIMEDOUT).
 * A corked client that never flushes sends nothing: call hg_client_flush()
 * at the end of every burst (hg_client_logout() writes everything queued,
 * corked or not). Cork is kept across reconnects until
 * hg_client_uncork(). Owner thread; cannot fail.
 */
void hg_client_cork(hg_client_t *c);

/* Ends corking and writes what is queued like an uncorked send would: what
 * the socket takes for a nonblocking_send client, all of it within
 * config.timeout_ms otherwise. 0, -ETIMEDOUT, -ENOTCONN (bytes queued but no
 * connection), -errno of the socket. Owner thread. */
int hg_client_uncork(hg_client_t *c);

/* Bytes queued but not yet written. */
size_t hg_client_tx_pending(const hg_client_t *c);

/*
 * Receives the next frame to deliver, waiting up to timeout_ms (0: only what
 * has arrived, < 0: no limit); sends due heartbeats meanwhile. Returns 1 and
 * *env (valid until the next hg_client_recv or connect on c), 0 if nothing
 * arrived in time, -ECONNRESET (the server closed; any Terminate it sent was
 * delivered before), -ENOTCONN, HG_EPARSE (malformed frame: closed), or a
 * gap-fill request's send error. Heartbeats from the server are delivered
 * like any frame; the caller ignores what it does not need.
 */
int hg_client_recv(hg_client_t *c, int timeout_ms, const Hourglass__V1__Envelope **env);

/* The seq the client expects next on the server's stream (0: none yet). */
uint64_t hg_client_rx_next_seq(const hg_client_t *c);

/* The seq the next application request will carry. */
uint64_t hg_client_tx_next_seq(const hg_client_t *c);

void hg_client_stats(const hg_client_t *c, hg_client_stats_t *out);

/* Parses a hex string (even length, 2..128 digits) into out[0..cap);
 * returns the byte count or HG_EINVAL. For secrets given on command lines. */
int hg_client_parse_hex(const char *hex, uint8_t *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_CLIENT_H */
