/*
 * session.h (internal) - the session layer as pure data: the per-connection
 * state machine, the login check and the throttle. No I/O and no clock: the
 * caller passes "now" in, so unit tests and the fuzz target drive it with a
 * fake clock. Owned by the gateway's loop thread (one per connection).
 */
#ifndef HG_GATEWAY_SESSION_H
#define HG_GATEWAY_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hourglass/wire.h"

/* Token bucket: `rate` tokens per second, at most `burst` stored. Time in ns.
 * rate 0 means unlimited. Integer arithmetic only. */
typedef struct hg_throttle {
  uint32_t rate;
  uint32_t burst;
  uint64_t tokens_milli; /* tokens x 1000, so fractional refills accumulate */
  uint64_t last_ns;
} hg_throttle_t;

void hg_throttle_init(hg_throttle_t *t, uint32_t rate, uint32_t burst, uint64_t now_ns);
/* Takes one token: true if there was one (the message may pass). */
bool hg_throttle_take(hg_throttle_t *t, uint64_t now_ns);

/* The API key as the gateway keeps it. */
typedef struct hg_key_record {
  uint64_t key_id;
  uint32_t role;    /* Hourglass__V1__Role */
  uint32_t account;
  uint32_t firm;
  uint8_t secret_len;
  uint8_t secret[HG_WIRE_SECRET_MAX];
} hg_key_record_t;

/* Encoded size of a key record in the store (v1). */
#define HG_KEY_RECORD_SIZE (1 + 8 + 4 + 4 + 4 + 1 + HG_WIRE_SECRET_MAX)
void hg_key_record_encode(const hg_key_record_t *k, uint8_t out[HG_KEY_RECORD_SIZE]);
int hg_key_record_decode(const uint8_t *buf, size_t len, hg_key_record_t *out);
/* 0 if role/account/firm/secret are consistent, HG_EINVAL otherwise. */
int hg_key_record_check(const hg_key_record_t *k);

/*
 * Verifies a Login against its key (NULL: unknown key). now_ns is the
 * server's wall clock. Returns 0 or a LoginRejectCode. Checks, in order:
 * field shapes (LOGIN_INVALID), key known and MAC right (LOGIN_AUTH_FAILED,
 * the same code for both, compared in constant time), timestamp within
 * skew_ns of now (LOGIN_TIMESTAMP_SKEW). Session-id reuse and limits are the
 * caller's (they need the store and the session table).
 */
uint32_t hg_login_verify(const Hourglass__V1__Login *login, const hg_key_record_t *key,
                         uint64_t now_ns, uint64_t skew_ns);

typedef enum hg_sess_state {
  HG_SESS_AWAIT_LOGIN = 0,
  HG_SESS_ACTIVE = 1,
  HG_SESS_CLOSED = 2
} hg_sess_state_t;

/* What the caller must do with a received frame. */
typedef enum hg_sess_verdict {
  HG_SV_LOGIN = 1,       /* a Login to verify (state AWAIT_LOGIN) */
  HG_SV_SESSION = 2,     /* a session message (heartbeat, logout, retransmit request) */
  HG_SV_APP = 3,         /* an application message, in sequence: process it */
  HG_SV_APP_GAP = 4,     /* in-order after a gap: send SequenceGap, then process */
  HG_SV_DUPLICATE = 5,   /* repeated seq: ignore */
  HG_SV_TERMINATE = 6    /* protocol violation: send Terminate(code), close */
} hg_sess_verdict_t;

typedef enum hg_sess_tick {
  HG_ST_NONE = 0,
  HG_ST_HEARTBEAT = 1,   /* we sent nothing for an interval: send a Heartbeat */
  HG_ST_WARN = 2,        /* nothing received for an interval: send Warning */
  HG_ST_TERMINATE = 3    /* login timeout or keepalive lapse: Terminate(code) */
} hg_sess_tick_t;

typedef struct hg_session {
  uint32_t state;          /* hg_sess_state_t */
  uint32_t keepalive_ms;
  uint64_t opened_ns;      /* monotonic */
  uint64_t login_timeout_ns;
  uint64_t last_rx_ns;
  uint64_t last_tx_ns;
  uint64_t next_in_seq;    /* expected client seq */
  uint64_t gap_expected;   /* set with HG_SV_APP_GAP: what we expected */
  uint32_t warned;         /* a lapse warning was sent for the current silence */
  uint32_t retransmitting; /* a retransmission is being served */
  uint64_t duplicates;     /* ignored repeated seqs */
} hg_session_t;

void hg_sess_init(hg_session_t *s, uint64_t now_ns, uint64_t login_timeout_ns);

/* Login accepted: ACTIVE with the keepalive in force. */
void hg_sess_activate(hg_session_t *s, uint32_t keepalive_ms, uint64_t now_ns);

/*
 * Classifies a decoded frame. Updates last_rx and, for application
 * messages, the expected seq. On HG_SV_TERMINATE *term is the TerminateCode.
 */
hg_sess_verdict_t hg_sess_on_frame(hg_session_t *s, const Hourglass__V1__Envelope *env,
                                   uint64_t now_ns, uint32_t *term);

/* Checks the timers; on HG_ST_TERMINATE *term is the code. Sets warned. */
hg_sess_tick_t hg_sess_tick(hg_session_t *s, uint64_t now_ns, uint32_t *term);

/* Records that we sent a frame (resets the heartbeat timer). */
static inline void hg_sess_sent(hg_session_t *s, uint64_t now_ns) { s->last_tx_ns = now_ns; }

#endif /* HG_GATEWAY_SESSION_H */
