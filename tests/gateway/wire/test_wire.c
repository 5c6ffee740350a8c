/*
 * The wire codec: frame headers (every rejection decided from the header
 * alone), varint encoding, frame encoding, decoding through the arena
 * (no malloc, bounded, reusable) and the login MAC against a vector
 * computed independently (Python's hmac module).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/clearing.h"
#include "hourglass/error.h"
#include "hourglass/wire.h"

static int parse(const uint8_t *b, size_t n, uint32_t max, hg_wire_frame_t *f) {
  return hg_wire_frame_parse(b, n, max, f);
}

static void test_frame_header(void **state) {
  (void)state;
  hg_wire_frame_t f = {0, 0};
  assert_int_equal(parse(NULL, 0, 100, &f), -EAGAIN);
  const uint8_t one[] = {0x05};
  assert_int_equal(parse(one, 1, 100, &f), 0);
  assert_int_equal(f.hdr_len, 1);
  assert_int_equal(f.body_len, 5);
  const uint8_t three00[] = {0xac, 0x02};
  assert_int_equal(parse(three00, 1, 1000, &f), -EAGAIN);
  assert_int_equal(parse(three00, 2, 1000, &f), 0);
  assert_int_equal(f.hdr_len, 2);
  assert_int_equal(f.body_len, 300);
  /* Exactly the maximum is fine, one above is not, decided without a body. */
  assert_int_equal(parse(three00, 2, 300, &f), 0);
  assert_int_equal(parse(three00, 2, 299, &f), HG_ERANGE);
  const uint8_t zero[] = {0x00};
  assert_int_equal(parse(zero, 1, 100, &f), HG_EINVAL);
  /* Non-minimal: 5 written in two bytes, 0 written in two bytes. */
  const uint8_t nm1[] = {0x85, 0x00};
  assert_int_equal(parse(nm1, 2, 100, &f), HG_EPARSE);
  const uint8_t nm0[] = {0x80, 0x00};
  assert_int_equal(parse(nm0, 2, 100, &f), HG_EPARSE);
  /* Over-long: eleven bytes with continuation bits; a tenth byte above 1. */
  uint8_t lng[11];
  memset(lng, 0x80, sizeof lng);
  assert_int_equal(parse(lng, 9, 100, &f), -EAGAIN);
  assert_int_equal(parse(lng, 10, 100, &f), HG_EPARSE);
  uint8_t big[10];
  memset(big, 0xff, 9);
  big[9] = 0x02;
  assert_int_equal(parse(big, 10, 100, &f), HG_EPARSE);
  big[9] = 0x01; /* 2^64 - 1: a valid varint, far too large */
  assert_int_equal(parse(big, 10, 100, &f), HG_ERANGE);
  /* The error leaves *out alone. */
  assert_int_equal(f.body_len, 300);
  assert_int_equal(hg_wire_frame_error_code(HG_EPARSE),
                   HOURGLASS__V1__TERMINATE_CODE__TERM_FRAME_BAD_VARINT);
  assert_int_equal(hg_wire_frame_error_code(HG_EINVAL),
                   HOURGLASS__V1__TERMINATE_CODE__TERM_FRAME_ZERO_LENGTH);
  assert_int_equal(hg_wire_frame_error_code(HG_ERANGE),
                   HOURGLASS__V1__TERMINATE_CODE__TERM_FRAME_TOO_LARGE);
}

static void test_varint(void **state) {
  (void)state;
  uint8_t b[10];
  const uint64_t vals[] = {1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX};
  const size_t lens[] = {1, 1, 2, 2, 3, 5, 10};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    size_t n = hg_wire_varint_encode(vals[i], b);
    assert_int_equal(n, lens[i]);
    assert_int_equal(hg_wire_varint_len(vals[i]), lens[i]);
    hg_wire_frame_t f;
    int rc = hg_wire_frame_parse(b, n, UINT32_MAX, &f);
    if (vals[i] <= UINT32_MAX) {
      assert_int_equal(rc, 0);
      assert_int_equal(f.hdr_len, n);
      assert_int_equal(f.body_len, vals[i]);
    } else {
      assert_int_equal(rc, HG_ERANGE);
    }
  }
}

static void fill_order(Hourglass__V1__Envelope *env, Hourglass__V1__NewOrderRequest *no) {
  hourglass__v1__envelope__init(env);
  hourglass__v1__new_order_request__init(no);
  no->instrument_id = 7;
  no->client_order_id = 99;
  no->side = HOURGLASS__V1__SIDE__SIDE_SELL;
  no->type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT;
  no->tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC;
  no->has_price = 1;
  no->price = 12345;
  no->qty = 10;
  env->has_seq = 1;
  env->seq = 3;
  env->body_case = HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER;
  env->new_order = no;
}

static void test_encode_decode(void **state) {
  (void)state;
  Hourglass__V1__Envelope env;
  Hourglass__V1__NewOrderRequest no;
  fill_order(&env, &no);
  uint8_t buf[256];
  size_t len = 0;
  assert_int_equal(hg_wire_encode(&env, buf, 3, &len), HG_EFULL);
  size_t need = len;
  assert_true(need > 3);
  assert_int_equal(hg_wire_encode(&env, buf, sizeof buf, &len), 0);
  assert_int_equal(len, need);
  hg_wire_frame_t f;
  assert_int_equal(hg_wire_frame_parse(buf, len, 1000, &f), 0);
  assert_int_equal(f.hdr_len + f.body_len, len);
  static uint8_t arena_buf[4096];
  hg_wire_arena_t a;
  hg_wire_arena_init(&a, arena_buf, sizeof arena_buf);
  Hourglass__V1__Envelope *d = NULL;
  assert_int_equal(hg_wire_decode(&a, buf + f.hdr_len, f.body_len, &d), 0);
  assert_int_equal(d->body_case, HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER);
  assert_int_equal(d->seq, 3);
  assert_int_equal(d->new_order->price, 12345);
  assert_int_equal(d->new_order->side, HOURGLASS__V1__SIDE__SIDE_SELL);
  assert_true(a.used > 0);
  size_t used = a.used;
  /* The arena is reset per frame: decoding again takes the same room. */
  assert_int_equal(hg_wire_decode(&a, buf + f.hdr_len, f.body_len, &d), 0);
  assert_int_equal(a.used, used);
  /* Truncated body and garbage fail cleanly. */
  assert_int_equal(hg_wire_decode(&a, buf + f.hdr_len, f.body_len - 1, &d), HG_EPARSE);
  const uint8_t junk[] = {0xff, 0xff, 0xff};
  assert_int_equal(hg_wire_decode(&a, junk, sizeof junk, &d), HG_EPARSE);
  /* Unknown fields, top level or nested, are found. */
  assert_false(hg_wire_has_unknown(&d->base));
  assert_false(hg_wire_envelope_has_unknown(d));
  uint8_t nested[64];
  size_t nl = 0;
  memcpy(nested, buf + f.hdr_len, f.body_len);
  nl = f.body_len;
  /* Append field 99 (varint 1) inside the NewOrderRequest: its length byte
   * follows the 0xf2 0x01 tag of field 30. */
  assert_int_equal(nested[0], 0x08); /* seq */
  assert_int_equal(nested[2], 0xf2);
  nested[4] = (uint8_t)(nested[4] + 3);
  nested[nl++] = 0x98;
  nested[nl++] = 0x06;
  nested[nl++] = 0x01;
  assert_int_equal(hg_wire_decode(&a, nested, nl, &d), 0);
  assert_int_equal(d->base.n_unknown_fields, 0);
  assert_int_equal(d->new_order->base.n_unknown_fields, 1);
  assert_true(hg_wire_has_unknown(&d->base));
  assert_true(hg_wire_envelope_has_unknown(d));
  /* At the top level too (field 99 after the body), and none in a body
   * that has no message of its own (a heartbeat). */
  memcpy(nested, buf + f.hdr_len, f.body_len);
  nl = f.body_len;
  nested[nl++] = 0x98;
  nested[nl++] = 0x06;
  nested[nl++] = 0x01;
  assert_int_equal(hg_wire_decode(&a, nested, nl, &d), 0);
  assert_int_equal(d->base.n_unknown_fields, 1);
  assert_true(hg_wire_has_unknown(&d->base));
  assert_true(hg_wire_envelope_has_unknown(d));
  const uint8_t hb[] = {0x08, 0x05, 0x62, 0x00}; /* seq 5, heartbeat {} */
  assert_int_equal(hg_wire_decode(&a, hb, sizeof hb, &d), 0);
  assert_int_equal(d->body_case, HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT);
  assert_false(hg_wire_envelope_has_unknown(d));
  const uint8_t none[] = {0x08, 0x05}; /* seq alone, no body */
  assert_int_equal(hg_wire_decode(&a, none, sizeof none, &d), 0);
  assert_false(hg_wire_envelope_has_unknown(d));
  /* An empty Envelope encodes to no bytes: not a frame. */
  Hourglass__V1__Envelope empty = HOURGLASS__V1__ENVELOPE__INIT;
  assert_int_equal(hg_wire_encode(&empty, buf, sizeof buf, &len), HG_ERANGE);
}

static void test_arena_bounds(void **state) {
  (void)state;
  Hourglass__V1__Envelope env;
  Hourglass__V1__NewOrderRequest no;
  fill_order(&env, &no);
  uint8_t buf[256];
  size_t len;
  assert_int_equal(hg_wire_encode(&env, buf, sizeof buf, &len), 0);
  /* Too small an arena: a clean decode failure, counted. */
  uint8_t small[64];
  hg_wire_arena_t a;
  hg_wire_arena_init(&a, small, sizeof small);
  Hourglass__V1__Envelope *d = NULL;
  assert_int_equal(hg_wire_decode(&a, buf + 1, len - 1, &d), HG_EPARSE);
  assert_true(a.failures > 0);
  assert_true(a.used <= sizeof small);
}

/* The worst shapes a max-size frame can take still decode within
 * HG_WIRE_ARENA_SIZE: many empty quote entries, and many unknown fields. */
static void test_arena_worst_case(void **state) {
  (void)state;
  const uint32_t max = HG_WIRE_DEFAULT_MAX_FRAME;
  size_t cap = HG_WIRE_ARENA_SIZE(max);
  uint8_t *arena = malloc(cap), *body = malloc(max);
  assert_non_null(arena);
  hg_wire_arena_t a;
  hg_wire_arena_init(&a, arena, cap);
  /* MassQuote holding the most entries that fit, each with only the
   * required instrument_id (4 bytes encoded, ~100 bytes decoded). */
  size_t nent = (max - 8) / 4;
  Hourglass__V1__QuoteEntry *ents = calloc(nent, sizeof *ents);
  Hourglass__V1__QuoteEntry **ptrs = calloc(nent, sizeof *ptrs);
  for (size_t k = 0; k < nent; k++) {
    hourglass__v1__quote_entry__init(&ents[k]);
    ents[k].instrument_id = 1;
    ptrs[k] = &ents[k];
  }
  Hourglass__V1__MassQuote mq = HOURGLASS__V1__MASS_QUOTE__INIT;
  mq.quote_group = 1;
  mq.n_entries = nent;
  mq.entries = ptrs;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_MASS_QUOTE;
  env.mass_quote = &mq;
  uint8_t *frame = malloc(max + 16);
  size_t flen = 0;
  assert_int_equal(hg_wire_encode(&env, frame, max + 16, &flen), 0);
  hg_wire_frame_t f;
  assert_int_equal(hg_wire_frame_parse(frame, flen, max, &f), 0);
  Hourglass__V1__Envelope *d = NULL;
  assert_int_equal(hg_wire_decode(&a, frame + f.hdr_len, f.body_len, &d), 0);
  assert_int_equal(d->mass_quote->n_entries, nent);
  free(ents);
  free(ptrs);
  free(frame);
  size_t n;
  int rc;
  /* Unknown varint fields (field 100 = 0), 3 bytes each. */
  n = 0;
  while (n + 3 <= max) {
    body[n++] = 0xa0;
    body[n++] = 0x06;
    body[n++] = 0x00;
  }
  rc = hg_wire_decode(&a, body, n, &d);
  assert_int_equal(rc, 0);
  assert_true(d->base.n_unknown_fields > 20000);
  assert_true(a.high_water <= cap);
  free(arena);
  free(body);
}

static void test_login_mac_vector(void **state) {
  (void)state;
  uint8_t sec[32], sid[16], mac[32];
  for (int i = 0; i < 32; i++) sec[i] = (uint8_t)i;
  for (int i = 0; i < 16; i++) sid[i] = (uint8_t)(100 + i);
  hg_wire_login_mac(sec, 32, 1700000000123456789ull, sid, 42, mac);
  char h[65];
  for (int i = 0; i < 32; i++) snprintf(h + 2 * i, 3, "%02x", mac[i]);
  assert_string_equal(h, "f19fdbd37f635775290783febcc99dce736261cb7c83fccdf7d069bc4c71a992");
}

/* The clearing's reject codes and the wire's REJ_RISK_* values are one
 * table in two places: every clearing code has the wire value of the same
 * number and name, so clients and hgctl name exactly what the engine sent. */
static void test_risk_codes_match_clearing(void **state) {
  (void)state;
  const ProtobufCEnumDescriptor *d = &hourglass__v1__reject_reason__descriptor;
  int n = 0;
#define CHECK(code, num, msg)                                                       \
  if ((num) != 0) {                                                                 \
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(d, (num));    \
    if (v == NULL || strcmp(v->name, "REJ_RISK_" #code) != 0)                         \
      fail_msg("clearing code %d (%s) is %s on the wire", (num), #code,             \
               v != NULL ? v->name : "missing");                                     \
    n++;                                                                            \
  }
  HG_CLR_REJECT_MAP(CHECK)
#undef CHECK
  assert_int_equal(n, 14);
  /* And no wire value in the clearing's range that it does not have. */
  for (int c = HG_CLR_REJECT_FIRST; c < HG_CLR_REJECT_END; c++) {
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(d, c);
    if (v != NULL) assert_string_not_equal(hg_clearing_reject_str(c), "unknown reason");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_risk_codes_match_clearing),
      cmocka_unit_test(test_frame_header),    cmocka_unit_test(test_varint),
      cmocka_unit_test(test_encode_decode),   cmocka_unit_test(test_arena_bounds),
      cmocka_unit_test(test_arena_worst_case), cmocka_unit_test(test_login_mac_vector),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
