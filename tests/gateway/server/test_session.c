/*
 * The session layer as pure data, driven by a fake clock: the state
 * machine's verdict for every kind of frame in every state, sequence
 * handling (duplicate, gap), timers (login timeout, heartbeat, one-interval
 * warning, two-interval lapse), login verification failures, key records,
 * and the token bucket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/error.h"
#include "session.h"

#define MS 1000000ull
#define T0 1700000000000000000ull

/* ---------------------------------------------------------------- throttle */

static void test_throttle(void **state) {
  (void)state;
  hg_throttle_t t;
  hg_throttle_init(&t, 10, 5, 1000); /* 10/s, burst 5 */
  for (int i = 0; i < 5; i++) assert_true(hg_throttle_take(&t, 1000));
  assert_false(hg_throttle_take(&t, 1000));
  /* 99.9 ms: not yet a whole token (one takes 100 ms). */
  assert_false(hg_throttle_take(&t, 1000 + 99999999));
  assert_true(hg_throttle_take(&t, 1000 + 100 * MS));
  assert_false(hg_throttle_take(&t, 1000 + 100 * MS));
  /* Fractions accumulate: two 50 ms steps make one token. */
  assert_false(hg_throttle_take(&t, 1000 + 150 * MS));
  assert_true(hg_throttle_take(&t, 1000 + 200 * MS));
  /* A long idle refills only up to the burst. */
  uint64_t later = 1000 + 200 * MS + 3600000 * MS;
  for (int i = 0; i < 5; i++) assert_true(hg_throttle_take(&t, later));
  assert_false(hg_throttle_take(&t, later));
  /* Rate 0 means unlimited. */
  hg_throttle_init(&t, 0, 0, 0);
  for (int i = 0; i < 1000; i++) assert_true(hg_throttle_take(&t, 0));
  /* A huge rate does not overflow. */
  hg_throttle_init(&t, UINT32_MAX, UINT32_MAX, 0);
  assert_true(hg_throttle_take(&t, UINT64_MAX / 2));
}

/* ------------------------------------------------------------------- login */

static hg_key_record_t key(void) {
  hg_key_record_t k;
  memset(&k, 0, sizeof k);
  k.key_id = 42;
  k.role = HOURGLASS__V1__ROLE__ROLE_TRADER;
  k.account = 7;
  k.firm = 3;
  k.secret_len = 32;
  for (int i = 0; i < 32; i++) k.secret[i] = (uint8_t)(i * 3);
  return k;
}

typedef struct login_buf {
  Hourglass__V1__Login lg;
  uint8_t sid[16];
  uint8_t mac[32];
} login_buf_t;

static void make_login(login_buf_t *b, const hg_key_record_t *k, uint64_t ts) {
  hourglass__v1__login__init(&b->lg);
  for (int i = 0; i < 16; i++) b->sid[i] = (uint8_t)(0xa0 + i);
  hg_wire_login_mac(k->secret, k->secret_len, ts, b->sid, k->key_id, b->mac);
  b->lg.key_id = k->key_id;
  b->lg.session_id.data = b->sid;
  b->lg.session_id.len = 16;
  b->lg.timestamp_ns = ts;
  b->lg.hmac.data = b->mac;
  b->lg.hmac.len = 32;
}

static void test_login_verify(void **state) {
  (void)state;
  hg_key_record_t k = key();
  login_buf_t b;
  const uint64_t skew = 5000 * MS;
  make_login(&b, &k, T0);
  assert_int_equal(hg_login_verify(&b.lg, &k, T0, skew), 0);
  /* Skew: exactly 5 s either way passes, one ns more fails. */
  assert_int_equal(hg_login_verify(&b.lg, &k, T0 + skew, skew), 0);
  assert_int_equal(hg_login_verify(&b.lg, &k, T0 - skew, skew), 0);
  assert_int_equal(hg_login_verify(&b.lg, &k, T0 + skew + 1, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_TIMESTAMP_SKEW);
  assert_int_equal(hg_login_verify(&b.lg, &k, T0 - skew - 1, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_TIMESTAMP_SKEW);
  /* Unknown key and wrong MAC give the same code. */
  assert_int_equal(hg_login_verify(&b.lg, NULL, T0, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_AUTH_FAILED);
  b.mac[31] ^= 1;
  assert_int_equal(hg_login_verify(&b.lg, &k, T0, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_AUTH_FAILED);
  b.mac[31] ^= 1;
  /* The MAC covers the timestamp, the session id and the key id. */
  b.lg.timestamp_ns = T0 + 1;
  assert_int_equal(hg_login_verify(&b.lg, &k, T0, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_AUTH_FAILED);
  b.lg.timestamp_ns = T0;
  b.sid[0] ^= 1;
  assert_int_equal(hg_login_verify(&b.lg, &k, T0, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_AUTH_FAILED);
  b.sid[0] ^= 1;
  hg_key_record_t other = k;
  other.key_id = 43;
  assert_int_equal(hg_login_verify(&b.lg, &other, T0, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_AUTH_FAILED);
  /* Bad shapes. */
  b.lg.session_id.len = 15;
  assert_int_equal(hg_login_verify(&b.lg, &k, T0, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_INVALID);
  b.lg.session_id.len = 16;
  b.lg.hmac.len = 31;
  assert_int_equal(hg_login_verify(&b.lg, &k, T0, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_INVALID);
  b.lg.hmac.len = 32;
  b.lg.has_keepalive_ms = 1;
  b.lg.keepalive_ms = 0;
  assert_int_equal(hg_login_verify(&b.lg, &k, T0, skew),
                   HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_INVALID);
}

static void test_key_record(void **state) {
  (void)state;
  hg_key_record_t k = key(), back;
  uint8_t buf[HG_KEY_RECORD_SIZE];
  hg_key_record_encode(&k, buf);
  assert_int_equal(hg_key_record_decode(buf, sizeof buf, &back), 0);
  assert_memory_equal(&k, &back, sizeof k);
  assert_int_equal(hg_key_record_decode(buf, sizeof buf - 1, &back), HG_ECORRUPT);
  buf[0] = 2;
  assert_int_equal(hg_key_record_decode(buf, sizeof buf, &back), HG_ECORRUPT);
  /* Role consistency. */
  hg_key_record_t r = k;
  r.account = 0;
  assert_int_equal(hg_key_record_check(&r), HG_EINVAL); /* trader needs an account */
  r = k;
  r.role = HOURGLASS__V1__ROLE__ROLE_RISK_VIEWER;
  assert_int_equal(hg_key_record_check(&r), HG_EINVAL); /* viewer has no account */
  r.account = 0;
  assert_int_equal(hg_key_record_check(&r), 0);
  r.role = 9;
  assert_int_equal(hg_key_record_check(&r), HG_EINVAL);
  r = k;
  r.secret_len = 15;
  assert_int_equal(hg_key_record_check(&r), HG_EINVAL);
  r = k;
  r.role = HOURGLASS__V1__ROLE__ROLE_OPERATOR;
  r.account = 0;
  r.firm = 0;
  assert_int_equal(hg_key_record_check(&r), 0);
}

/* ----------------------------------------------------------- state machine */

static Hourglass__V1__Envelope envelope(uint32_t body, uint64_t seq) {
  Hourglass__V1__Envelope e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = (Hourglass__V1__Envelope__BodyCase)body;
  if (seq != 0) {
    e.has_seq = 1;
    e.seq = seq;
  }
  return e;
}

#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x
#define TERM(x) HOURGLASS__V1__TERMINATE_CODE__TERM_##x

static void test_before_login(void **state) {
  (void)state;
  hg_session_t s;
  uint32_t t = 0;
  hg_sess_init(&s, 0, 5000 * MS);
  Hourglass__V1__Envelope e = envelope(BODY(NEW_ORDER), 1);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(NOT_LOGGED_IN));
  e = envelope(BODY(HEARTBEAT), 0);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(NOT_LOGGED_IN));
  e = envelope(BODY(LOGIN_ACK), 0);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(WRONG_DIRECTION));
  e = envelope(0, 0); /* no body: an unknown or empty message */
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(UNKNOWN_MESSAGE));
  e = envelope(BODY(LOGIN), 0);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_LOGIN);
  /* Unknown fields next to a known body are refused as well. */
  e.base.n_unknown_fields = 1;
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(UNKNOWN_MESSAGE));
}

/* Every client request of the Envelope is a known client-to-server
 * application message, the operator's MARK and FUND_DEPOSIT (70, 71)
 * included. */
static void test_client_requests_known(void **state) {
  (void)state;
  const uint32_t req[] = {BODY(NEW_ORDER), BODY(STATEMENT_REQUEST), BODY(CLUSTER_REQUEST),
                          BODY(MARK), BODY(FUND_DEPOSIT)};
  for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
    assert_int_equal(hg_wire_body_from_client(req[i]), 1);
    assert_true(hg_wire_body_is_request(req[i]));
  }
}

static void test_sequencing(void **state) {
  (void)state;
  hg_session_t s;
  uint32_t t = 0;
  hg_sess_init(&s, 0, 5000 * MS);
  hg_sess_activate(&s, 1000, 0);
  Hourglass__V1__Envelope e = envelope(BODY(LOGIN), 0);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(ALREADY_LOGGED_IN));
  e = envelope(BODY(NEW_ORDER), 0);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(MISSING_SEQ));
  e = envelope(BODY(CANCEL), 1);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_APP);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_DUPLICATE);
  assert_int_equal(s.duplicates, 1);
  e = envelope(BODY(CANCEL), 5);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_APP_GAP);
  assert_int_equal(s.gap_expected, 2);
  e = envelope(BODY(CANCEL), 3); /* behind the gap: already skipped */
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_DUPLICATE);
  e = envelope(BODY(CANCEL), 6);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_APP);
  /* Session messages need no seq. */
  e = envelope(BODY(HEARTBEAT), 0);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_SESSION);
  e = envelope(BODY(RETRANSMIT_REQUEST), 0);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_SESSION);
  s.retransmitting = 1;
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(RETRANSMIT_IN_PROGRESS));
  e = envelope(BODY(EXECUTION_REPORT), 7);
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(WRONG_DIRECTION));
  /* A body number this version does not know arrives as an unknown field. */
  e = envelope(0, 7);
  e.base.n_unknown_fields = 1;
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(UNKNOWN_MESSAGE));
  e = envelope(200, 7); /* in no range of the schema's BodyRange */
  assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_TERMINATE);
  assert_int_equal(t, TERM(UNKNOWN_MESSAGE));
}

/* A request added to the schema in 70..79 ("free for further client
 * requests") is sequenced like any other, by the same definition the C and
 * Python clients use (BodyRange); and every body the schema has falls in a
 * range. */
static void test_body_ranges_from_the_schema(void **state) {
  (void)state;
  hg_session_t s;
  uint32_t t = 0;
  hg_sess_init(&s, 0, 5000 * MS);
  hg_sess_activate(&s, 1000, 0);
  for (uint32_t body = 70; body <= 79; body++) {
    Hourglass__V1__Envelope e = envelope(body, body - 69);
    assert_int_equal(hg_sess_on_frame(&s, &e, 1, &t), HG_SV_APP);
    assert_true(hg_wire_body_is_request(body));
  }
  const ProtobufCMessageDescriptor *d = &hourglass__v1__envelope__descriptor;
  unsigned bodies = 0;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) continue;
    bodies++;
    int from_client = hg_wire_body_from_client(f->id);
    if (from_client < 0) fail_msg("body %s (%u) is in no BodyRange", f->name, f->id);
    /* Requests are what the schema lists between 30 and 79. */
    assert_int_equal(hg_wire_body_is_request(f->id), f->id >= 30 && f->id < 80);
  }
  assert_true(bodies > 40);
  assert_int_equal(hg_wire_body_from_client(HOURGLASS__V1__ENVELOPE__BODY_LOGIN), 1);
  assert_int_equal(hg_wire_body_from_client(HOURGLASS__V1__ENVELOPE__BODY_LOGIN_ACK), 0);
  assert_int_equal(hg_wire_body_from_client(HOURGLASS__V1__ENVELOPE__BODY_CLUSTER_STATUS), 0);
  assert_false(hg_wire_body_is_request(HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT));
}

static void test_timers(void **state) {
  (void)state;
  hg_session_t s;
  uint32_t t = 0;
  hg_sess_init(&s, 100, 5000 * MS);
  assert_int_equal(hg_sess_tick(&s, 100 + 4999 * MS, &t), HG_ST_NONE);
  assert_int_equal(hg_sess_tick(&s, 100 + 5000 * MS, &t), HG_ST_TERMINATE);
  assert_int_equal(t, TERM(LOGIN_TIMEOUT));

  hg_sess_init(&s, 0, 5000 * MS);
  hg_sess_activate(&s, 100, 0);
  hg_sess_sent(&s, 50 * MS);
  assert_int_equal(hg_sess_tick(&s, 99 * MS, &t), HG_ST_NONE);
  /* 100 ms of silence from the peer: one warning, once. */
  assert_int_equal(hg_sess_tick(&s, 100 * MS, &t), HG_ST_WARN);
  assert_int_equal(hg_sess_tick(&s, 120 * MS, &t), HG_ST_NONE);
  /* We sent nothing for 100 ms: heartbeat. */
  assert_int_equal(hg_sess_tick(&s, 150 * MS, &t), HG_ST_HEARTBEAT);
  hg_sess_sent(&s, 150 * MS);
  /* Two intervals: the session ends. */
  assert_int_equal(hg_sess_tick(&s, 199 * MS, &t), HG_ST_NONE);
  assert_int_equal(hg_sess_tick(&s, 200 * MS, &t), HG_ST_TERMINATE);
  assert_int_equal(t, TERM(KEEPALIVE_LAPSED));
  /* Anything received resets both the lapse and the warning. */
  hg_sess_init(&s, 0, 5000 * MS);
  hg_sess_activate(&s, 100, 0);
  assert_int_equal(hg_sess_tick(&s, 100 * MS, &t), HG_ST_WARN);
  Hourglass__V1__Envelope e = envelope(BODY(HEARTBEAT), 0);
  assert_int_equal(hg_sess_on_frame(&s, &e, 150 * MS, &t), HG_SV_SESSION);
  assert_int_equal(hg_sess_tick(&s, 200 * MS, &t), HG_ST_HEARTBEAT);
  hg_sess_sent(&s, 200 * MS);
  assert_int_equal(hg_sess_tick(&s, 250 * MS, &t), HG_ST_WARN);
  assert_int_equal(hg_sess_tick(&s, 349 * MS, &t), HG_ST_HEARTBEAT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_client_requests_known),
      cmocka_unit_test(test_throttle),     cmocka_unit_test(test_login_verify),
      cmocka_unit_test(test_key_record),   cmocka_unit_test(test_before_login),
      cmocka_unit_test(test_sequencing),   cmocka_unit_test(test_timers),
      cmocka_unit_test(test_body_ranges_from_the_schema),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
