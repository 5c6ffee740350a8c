/*
 * gw_client.h - a small blocking test client that speaks the wire protocol
 * over loopback TCP through hourglass/wire.h, for the gateway tests that
 * need exact frames (bad logins, raw bytes, sequence numbers): connect, log
 * in with the harness secrets (test_keys.h), send requests, and receive
 * frames with a timeout. One gt_client_t per thread, and gt_send from one
 * thread at a time (it encodes into one static buffer); every wait is bounded.
 * After gt_use_tls(ca) every gt_connect runs TLS 1.3 (verifying the server
 * against ca) before anything is sent, for the tests that repeat a plain
 * scenario over TLS.
 */
#ifndef HOURGLASS_TESTS_GW_CLIENT_H
#define HOURGLASS_TESTS_GW_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hourglass/wire.h"
#include "server.h"

#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x
#define TERMC(x) HOURGLASS__V1__TERMINATE_CODE__TERM_##x
#define LREJ(x) HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_##x
#define REJ(x) HOURGLASS__V1__REJECT_REASON__REJ_##x
#define EXEC(x) HOURGLASS__V1__EXEC_TYPE__EXEC_##x

typedef Hourglass__V1__Envelope env_t;

/* CLOCK_REALTIME in ns (login timestamps). */
uint64_t gt_now_ns(void);

typedef struct gt_client {
  int fd;
  uint64_t seq; /* last client seq sent */
  uint64_t key_id;
  uint8_t *in;
  size_t in_len;
  size_t in_off; /* consumed bytes at the front of in */
  size_t in_cap;
  uint8_t *arena_buf;
  hg_wire_arena_t arena;
  uint8_t sid[16];
  uint32_t sid_counter;
  int eof;
  struct ssl_st *ssl; /* TLS (gt_use_tls); NULL: plain */
  /* The frame gt_recv returned last, as received (length prefix
   * included): in + last_off, last_len bytes, until the next gt_recv. */
  size_t last_off, last_len;
} gt_client_t;

/* From now on gt_connect uses TLS and trusts the CAs in ca_file (PEM);
 * NULL: plain TCP again. The path is kept, not copied. Not thread-safe:
 * call it before the clients are made. 0, or -1 if the file cannot be read. */
int gt_use_tls(const char *ca_file);

/* Connects to 127.0.0.1:port (TCP_NODELAY) and allocates the buffers; 0 or
 * -errno. */
int gt_connect(gt_client_t *c, uint16_t port);

/* Closes the socket and frees the buffers. */
void gt_close(gt_client_t *c);

/* Sends n raw bytes; 0 or -errno. */
int gt_send_raw(gt_client_t *c, const void *b, size_t n);

/* Sends env; application messages get the next seq (unless has_seq set). */
int gt_send(gt_client_t *c, env_t *env);

/* Next frame within timeout_ms; NULL on timeout or EOF (c->eof set). The
 * envelope is valid until the next gt_recv. */
env_t *gt_recv(gt_client_t *c, int timeout_ms);

/* Next frame of body case `want`, skipping heartbeats, warnings and market
 * data (unless wanted). */
env_t *gt_expect(gt_client_t *c, uint32_t want, int timeout_ms);

/* Waits until the server closes the connection. */
bool gt_wait_closed(gt_client_t *c, int timeout_ms);

/* Sends a Login (fresh session id unless reuse) with timestamp ts (0: now). */
int gt_send_login(gt_client_t *c, uint64_t key_id, const uint8_t *secret, uint64_t ts, int cod,
                  uint32_t keepalive_ms, int reuse_sid);

/* Connects and logs in; returns the LoginAck's next_seq or 0 on failure.
 * keepalive_ms 0 means 30 s: tests that are not about heartbeats must not
 * depend on how fast a loaded (sanitized) machine runs them. */
uint64_t gt_login(gt_client_t *c, uint16_t port, uint64_t key_id, int cod, uint32_t keepalive_ms);

int gt_new_order(gt_client_t *c, uint32_t instr, uint64_t clordid, int side, int64_t price,
                 int64_t qty, int tif);

int gt_cancel(gt_client_t *c, uint32_t instr, uint64_t oid);

int gt_replace(gt_client_t *c, uint32_t instr, uint64_t oid, int64_t px, int64_t qty);

int gt_status(gt_client_t *c, uint32_t instr, uint64_t oid);

/* Sends RetransmitRequest{from, count}. */
int gt_retransmit(gt_client_t *c, uint64_t from, uint32_t count);

/* Operator: list an instrument with a wide range and no band. */
int gt_list(gt_client_t *c, uint32_t id, const char *sym);

int gt_add_account(gt_client_t *c, uint32_t account, uint32_t firm);

/* Sends a request and returns its Response's reason (-1: none arrived). */
int gt_response_reason(gt_client_t *c);

/* Operator session setting up instruments 1..n_instr and accounts. */
int gt_setup_market(const ts_server_t *s, uint64_t op_key, uint32_t n_instr,
                    const uint32_t *accounts, const uint32_t *firms, size_t n);

#endif /* HOURGLASS_TESTS_GW_CLIENT_H */
