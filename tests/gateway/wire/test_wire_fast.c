/*
 * The hand-written envelope encoders (gateway/wire/wire_fast.c) against
 * protobuf-c: random envelopes of every handled shape with every field of
 * the body set or unset at random (driven by the descriptors, so a field the
 * .proto gains is randomised too), one frame written out byte by byte, the
 * shapes the fast path must leave to protobuf-c, the schema guard, and the
 * first call racing on several threads.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/error.h"
#include "hourglass/wire.h"
#include "wire_fast.h"

/* ------------------------------------------------------------- generator */

typedef struct rng {
  uint64_t s;
} rng_t;

static uint64_t next(rng_t *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}

/* Values at the varint length boundaries and the extremes of each type. */
static uint64_t value(rng_t *r) {
  static const uint64_t edge[] = {
      0,           1,           127,         128,        16383,       16384,
      0x7fffffffu, 0x80000000u, 0xffffffffu, 1ull << 32, INT64_MAX,   (uint64_t)INT64_MIN,
      UINT64_MAX,  (uint64_t)-1, (uint64_t)-128, (uint64_t)-129, 1ull << 63, 300,
  };
  uint64_t k = next(r) % 4;
  if (k == 0) return next(r) >> (next(r) % 64); /* any length */
  return edge[next(r) % (sizeof edge / sizeof edge[0])];
}

/* Sets or clears every field of m from its descriptor. An absent optional
 * field still gets a value: the encoder must not write it. Fails on a field
 * kind the hot messages do not have (so the test is revisited with them). */
static void fill(rng_t *r, ProtobufCMessage *m) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  uint8_t *base = (uint8_t *)m;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
      protobuf_c_boolean *has = (protobuf_c_boolean *)(void *)(base + f->quantifier_offset);
      uint64_t k = next(r) % 8;
      *has = k < 3 ? 0 : (k == 7 ? 2 : 1); /* protobuf-c takes any non-zero as set */
    } else if (f->label != PROTOBUF_C_LABEL_REQUIRED) {
      fail_msg("field %s: label %d not generated", f->name, (int)f->label);
    }
    uint64_t v = value(r);
    void *at = base + f->offset;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM: *(int32_t *)at = (int32_t)(uint32_t)v; break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: *(uint32_t *)at = (uint32_t)v; break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: *(uint64_t *)at = v; break;
    case PROTOBUF_C_TYPE_BOOL: {
      static const protobuf_c_boolean b[] = {0, 1, 2, -1};
      *(protobuf_c_boolean *)at = b[next(r) % 4];
      break;
    }
    default: fail_msg("field %s: type %d not generated", f->name, (int)f->type);
    }
  }
}

typedef struct sample {
  Hourglass__V1__Envelope env;
  Hourglass__V1__ExecutionReport er;
  Hourglass__V1__NewOrderRequest no;
  Hourglass__V1__CancelRequest cancel;
  Hourglass__V1__Heartbeat hb;
} sample_t;

/* kind: 0 ExecutionReport, 1 NewOrderRequest, 2 CancelRequest, 3 Heartbeat. */
static void random_envelope_of(rng_t *r, sample_t *s, unsigned kind) {
  hourglass__v1__envelope__init(&s->env);
  hourglass__v1__execution_report__init(&s->er);
  hourglass__v1__new_order_request__init(&s->no);
  hourglass__v1__cancel_request__init(&s->cancel);
  hourglass__v1__heartbeat__init(&s->hb);
  s->env.has_seq = (protobuf_c_boolean)(next(r) % 4); /* 0, or a non-zero "set" */
  s->env.seq = value(r);
  switch (kind) {
  case 0:
    fill(r, &s->er.base);
    s->env.body_case = HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT;
    s->env.execution_report = &s->er;
    break;
  case 1:
    fill(r, &s->no.base);
    s->env.body_case = HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER;
    s->env.new_order = &s->no;
    break;
  case 2:
    fill(r, &s->cancel.base);
    s->env.body_case = HOURGLASS__V1__ENVELOPE__BODY_CANCEL;
    s->env.cancel = &s->cancel;
    break;
  default:
    fill(r, &s->hb.base);
    s->env.body_case = HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT;
    s->env.heartbeat = &s->hb;
    break;
  }
}

static void random_envelope(rng_t *r, sample_t *s) {
  random_envelope_of(r, s, (unsigned)(next(r) % 4));
}

/* protobuf-c's frame without cmocka asserts (usable off the main thread);
 * 0 if it does not fit. */
static size_t pack_frame(const Hourglass__V1__Envelope *env, uint8_t *out, size_t cap) {
  size_t body = protobuf_c_message_get_packed_size(&env->base);
  size_t h = hg_wire_varint_len(body);
  if (body == 0 || h + body > cap) return 0;
  hg_wire_varint_encode(body, out);
  if (protobuf_c_message_pack(&env->base, out + h) != body) return 0;
  return h + body;
}

/* The frame protobuf-c writes: length varint, then protobuf_c_message_pack. */
static size_t reference(const Hourglass__V1__Envelope *env, uint8_t *out, size_t cap) {
  size_t body = protobuf_c_message_get_packed_size(&env->base);
  assert_true(body > 0);
  size_t h = hg_wire_varint_len(body);
  assert_true(h + body <= cap);
  hg_wire_varint_encode(body, out);
  assert_int_equal(protobuf_c_message_pack(&env->base, out + h), body);
  return h + body;
}

/* The fast path takes env, writes protobuf-c's bytes, and keeps
 * hg_wire_encode's contract for a buffer one byte short and exactly full. */
static void check_same(const Hourglass__V1__Envelope *env) {
  uint8_t ref[1024], out[1024];
  size_t need = reference(env, ref, sizeof ref);
  size_t len = 0;
  memset(out, 0xa5, sizeof out);
  assert_int_equal(hg_wire_fast_encode(env, out, sizeof out, &len), 0);
  assert_int_equal(len, need);
  assert_memory_equal(out, ref, need);
  assert_int_equal(out[need], 0xa5);

  memset(out, 0xa5, sizeof out);
  len = 0;
  assert_int_equal(hg_wire_encode(env, out, need - 1, &len), HG_EFULL);
  assert_int_equal(len, need);
  for (size_t i = 0; i < need; i++) assert_int_equal(out[i], 0xa5);
  len = 0;
  assert_int_equal(hg_wire_encode(env, out, need, &len), 0);
  assert_int_equal(len, need);
  assert_memory_equal(out, ref, need);
  assert_int_equal(out[need], 0xa5);
  assert_int_equal(hg_wire_encode(env, NULL, 0, &len), HG_EFULL);
  assert_int_equal(len, need);
}

/* ------------------------------------------------------------------ tests */

typedef struct race {
  uint64_t seed;
  int mismatches;
} race_t;

static void *race_thread(void *arg) {
  race_t *t = arg;
  rng_t r = {t->seed};
  sample_t s;
  for (int i = 0; i < 2000; i++) {
    random_envelope(&r, &s);
    uint8_t ref[1024], out[1024];
    size_t need = pack_frame(&s.env, ref, sizeof ref), len = 0;
    if (need == 0 || hg_wire_encode(&s.env, out, sizeof out, &len) != 0 || len != need ||
        memcmp(out, ref, need) != 0)
      t->mismatches++;
  }
  return NULL;
}

/* Runs first: four threads make the first calls (and the descriptor check)
 * at once; under ThreadSanitizer this shows the check is race-free. */
static void test_first_use_race(void **state) {
  (void)state;
  pthread_t th[4];
  race_t t[4];
  for (int i = 0; i < 4; i++) {
    t[i].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    t[i].mismatches = 0;
    assert_int_equal(pthread_create(&th[i], NULL, race_thread, &t[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(t[i].mismatches, 0);
  }
  assert_int_equal(hg_wire_fast_enabled(), HG_WIRE_FAST_ALL);
}

static void test_differential(void **state) {
  (void)state;
  rng_t r = {0x2545f4914f6cdd1dull};
  sample_t s;
  unsigned seen[4] = {0};
  for (int i = 0; i < 20000; i++) {
    random_envelope(&r, &s);
    check_same(&s.env);
    switch (s.env.body_case) {
    case HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT: seen[0]++; break;
    case HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER: seen[1]++; break;
    case HOURGLASS__V1__ENVELOPE__BODY_CANCEL: seen[2]++; break;
    default: seen[3]++; break;
    }
  }
  for (int k = 0; k < 4; k++) assert_true(seen[k] > 4000);
}

/* Every field at once, each at its longest encoding: the fast path's
 * scratch bound must hold, and the bytes still match. */
static void test_longest(void **state) {
  (void)state;
  sample_t s;
  rng_t r = {1};
  random_envelope(&r, &s);
  hourglass__v1__execution_report__init(&s.er);
  const ProtobufCMessageDescriptor *d = s.er.base.descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    uint8_t *at = (uint8_t *)&s.er + f->offset;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
      *(protobuf_c_boolean *)(void *)((uint8_t *)&s.er + f->quantifier_offset) = 1;
    if (f->type == PROTOBUF_C_TYPE_UINT32) *(uint32_t *)(void *)at = UINT32_MAX;
    else if (f->type == PROTOBUF_C_TYPE_ENUM) *(int32_t *)(void *)at = INT32_MIN;
    else if (f->type == PROTOBUF_C_TYPE_BOOL) *(protobuf_c_boolean *)(void *)at = 1;
    else *(uint64_t *)(void *)at = UINT64_MAX;
  }
  s.env.has_seq = 1;
  s.env.seq = UINT64_MAX;
  s.env.body_case = HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT;
  s.env.execution_report = &s.er;
  check_same(&s.env);
  uint8_t out[512];
  size_t len = 0;
  assert_int_equal(hg_wire_encode(&s.env, out, sizeof out, &len), 0);
  /* 219-byte report + key 2 + length 2 + seq 11 = 234-byte body, 2-byte header. */
  assert_int_equal(len, 236);
}

/* One ExecutionReport envelope, its bytes worked out from the encoding rules. */
static void test_hand_built(void **state) {
  (void)state;
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  Hourglass__V1__ExecutionReport er = HOURGLASS__V1__EXECUTION_REPORT__INIT;
  er.exec_type = 2;
  er.instrument_id = 1;
  er.has_order_id = 1;
  er.order_id = 300;
  er.has_client_order_id = 0;
  er.client_order_id = 77; /* not set: must not appear */
  er.has_side = 1;
  er.side = HOURGLASS__V1__SIDE__SIDE_SELL;
  er.has_price = 1;
  er.price = -1;
  er.has_qty = 1;
  er.qty = 10;
  er.has_maker = 1;
  er.maker = 1;
  er.has_account = 1;
  er.account = 7;
  er.has_risk_initial_margin = 1;
  er.risk_initial_margin = 150;
  env.has_seq = 1;
  env.seq = 5;
  env.body_case = HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT;
  env.execution_report = &er;
  static const uint8_t want[] = {
      0x24,                   /* frame: 36-byte body */
      0x08, 0x05,             /* seq = 5 */
      0x82, 0x05, 0x1f,       /* field 80 (642 = 0x82 0x05), length 31 */
      0x08, 0x02,             /* exec_type 2 */
      0x10, 0x01,             /* instrument_id 1 */
      0x18, 0xac, 0x02,       /* order_id 300 */
      0x38, 0x01,             /* side SELL */
      0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* price -1 */
      0x48, 0x0a,             /* qty 10 */
      0x58, 0x01,             /* maker */
      0x80, 0x01, 0x07,       /* account (field 16: two-byte key) 7 */
      0xa0, 0x01, 0x96, 0x01, /* risk_initial_margin (field 20) 150 */
  };
  uint8_t out[128];
  size_t len = 0;
  assert_int_equal(hg_wire_fast_encode(&env, out, sizeof out, &len), 0);
  assert_int_equal(len, sizeof want);
  assert_memory_equal(out, want, sizeof want);
  check_same(&env);

  /* A heartbeat without seq: key 12, length 0, nothing else. */
  Hourglass__V1__Heartbeat hb = HOURGLASS__V1__HEARTBEAT__INIT;
  Hourglass__V1__Envelope e2 = HOURGLASS__V1__ENVELOPE__INIT;
  e2.body_case = HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT;
  e2.heartbeat = &hb;
  static const uint8_t want_hb[] = {0x02, 0x62, 0x00};
  assert_int_equal(hg_wire_fast_encode(&e2, out, sizeof out, &len), 0);
  assert_int_equal(len, sizeof want_hb);
  assert_memory_equal(out, want_hb, sizeof want_hb);
  /* A negative enum is a ten-byte varint: NewOrderRequest side = -1. */
  Hourglass__V1__NewOrderRequest no = HOURGLASS__V1__NEW_ORDER_REQUEST__INIT;
  no.side = (Hourglass__V1__Side)-1;
  Hourglass__V1__Envelope e3 = HOURGLASS__V1__ENVELOPE__INIT;
  e3.body_case = HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER;
  e3.new_order = &no;
  static const uint8_t want_no[] = {
      0x18, 0xf2, 0x01, 0x15, /* frame 24; field 30 (0xf2 0x01), length 21 */
      0x08, 0x00, 0x10, 0x00, /* instrument_id 0, client_order_id 0 */
      0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* side -1 */
      0x20, 0x00, 0x28, 0x00, 0x38, 0x00, /* type, tif (enum defaults 0), qty 0 */
  };
  no.type = 0;
  no.tif = 0;
  assert_int_equal(hg_wire_fast_encode(&e3, out, sizeof out, &len), 0);
  assert_int_equal(len, sizeof want_no);
  assert_memory_equal(out, want_no, sizeof want_no);
  check_same(&e3);
}

/* What the fast path must leave to protobuf-c; hg_wire_encode still gives
 * protobuf-c's bytes for each. */
static void test_declined(void **state) {
  (void)state;
  rng_t r = {42};
  sample_t s;
  uint8_t ref[1024], out[1024];
  size_t len = 0, need;
  uint8_t unknown_data[1] = {1};
  ProtobufCMessageUnknownField uf = {.tag = 99, .wire_type = PROTOBUF_C_WIRE_TYPE_VARINT,
                                     .len = 1, .data = unknown_data};

  for (int round = 0; round < 4; round++) {
    /* Unknown fields on the envelope. */
    random_envelope_of(&r, &s, (unsigned)round);
    s.env.base.n_unknown_fields = 1;
    s.env.base.unknown_fields = &uf;
    len = 12345;
    assert_int_equal(hg_wire_fast_encode(&s.env, out, sizeof out, &len), HG_WIRE_FAST_DECLINED);
    assert_int_equal(len, 12345);
    need = reference(&s.env, ref, sizeof ref);
    assert_int_equal(hg_wire_encode(&s.env, out, sizeof out, &len), 0);
    assert_int_equal(len, need);
    assert_memory_equal(out, ref, need);
    /* Unknown fields on the body. */
    s.env.base.n_unknown_fields = 0;
    s.env.base.unknown_fields = NULL;
    ProtobufCMessage *sub = (ProtobufCMessage *)(void *)s.env.heartbeat;
    sub->n_unknown_fields = 1;
    sub->unknown_fields = &uf;
    assert_int_equal(hg_wire_fast_encode(&s.env, out, sizeof out, &len), HG_WIRE_FAST_DECLINED);
    need = reference(&s.env, ref, sizeof ref);
    assert_int_equal(hg_wire_encode(&s.env, out, sizeof out, &len), 0);
    assert_int_equal(len, need);
    assert_memory_equal(out, ref, need);
    sub->n_unknown_fields = 0;
    sub->unknown_fields = NULL;
    /* A body case set with a NULL body: protobuf-c writes only the seq. */
    s.env.heartbeat = NULL;
    s.env.has_seq = 1;
    assert_int_equal(hg_wire_fast_encode(&s.env, out, sizeof out, &len), HG_WIRE_FAST_DECLINED);
    need = reference(&s.env, ref, sizeof ref);
    assert_int_equal(hg_wire_encode(&s.env, out, sizeof out, &len), 0);
    assert_int_equal(len, need);
    assert_memory_equal(out, ref, need);
  }

  /* A body of another type, and the empty envelope (HG_ERANGE as before). */
  Hourglass__V1__ReplaceRequest rep = HOURGLASS__V1__REPLACE_REQUEST__INIT;
  rep.order_id = 9;
  Hourglass__V1__Envelope e = HOURGLASS__V1__ENVELOPE__INIT;
  e.body_case = HOURGLASS__V1__ENVELOPE__BODY_REPLACE;
  e.replace = &rep;
  assert_int_equal(hg_wire_fast_encode(&e, out, sizeof out, &len), HG_WIRE_FAST_DECLINED);
  need = reference(&e, ref, sizeof ref);
  assert_int_equal(hg_wire_encode(&e, out, sizeof out, &len), 0);
  assert_int_equal(len, need);
  assert_memory_equal(out, ref, need);
  Hourglass__V1__Envelope empty = HOURGLASS__V1__ENVELOPE__INIT;
  assert_int_equal(hg_wire_fast_encode(&empty, out, sizeof out, &len), HG_WIRE_FAST_DECLINED);
  assert_int_equal(hg_wire_encode(&empty, out, sizeof out, &len), HG_ERANGE);
  /* A body whose descriptor is not the member's type. */
  Hourglass__V1__CancelRequest c = HOURGLASS__V1__CANCEL_REQUEST__INIT;
  e.body_case = HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER;
  e.new_order = (Hourglass__V1__NewOrderRequest *)(void *)&c;
  assert_int_equal(hg_wire_fast_encode(&e, out, sizeof out, &len), HG_WIRE_FAST_DECLINED);
}

/* The guard accepts the real descriptors and refuses changed copies. */
static void test_guard(void **state) {
  (void)state;
  assert_int_equal(hg_wire_fast_enabled(), HG_WIRE_FAST_ALL);
  assert_true(hg_wire_fast_shape_ok(HG_WIRE_FAST_ENVELOPE, &hourglass__v1__envelope__descriptor));
  assert_true(hg_wire_fast_shape_ok(HG_WIRE_FAST_EXEC_REPORT,
                                    &hourglass__v1__execution_report__descriptor));
  assert_true(hg_wire_fast_shape_ok(HG_WIRE_FAST_NEW_ORDER,
                                    &hourglass__v1__new_order_request__descriptor));
  assert_true(hg_wire_fast_shape_ok(HG_WIRE_FAST_CANCEL, &hourglass__v1__cancel_request__descriptor));
  assert_true(hg_wire_fast_shape_ok(HG_WIRE_FAST_HEARTBEAT, &hourglass__v1__heartbeat__descriptor));
  /* The wrong message for a shape, and no shape at all. */
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_CANCEL, &hourglass__v1__replace_request__descriptor));
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_HEARTBEAT, &hourglass__v1__cancel_request__descriptor));
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_NSHAPES, &hourglass__v1__heartbeat__descriptor));
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_EXEC_REPORT, NULL));

  const ProtobufCMessageDescriptor *real = &hourglass__v1__execution_report__descriptor;
  ProtobufCFieldDescriptor fields[64];
  assert_true(real->n_fields + 1 <= 64);
  ProtobufCMessageDescriptor fake;
  /* A field retyped (int64 price -> sint64: same C type, other bytes). */
  memcpy(&fake, real, sizeof fake);
  memcpy(fields, real->fields, real->n_fields * sizeof fields[0]);
  fake.fields = fields;
  assert_true(hg_wire_fast_shape_ok(HG_WIRE_FAST_EXEC_REPORT, &fake));
  assert_int_equal(fields[7].id, 8);
  fields[7].type = PROTOBUF_C_TYPE_SINT64;
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_EXEC_REPORT, &fake));
  /* A field renumbered. */
  memcpy(fields, real->fields, real->n_fields * sizeof fields[0]);
  fields[3].id = 40;
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_EXEC_REPORT, &fake));
  /* Optional made required. */
  memcpy(fields, real->fields, real->n_fields * sizeof fields[0]);
  fields[4].label = PROTOBUF_C_LABEL_REQUIRED;
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_EXEC_REPORT, &fake));
  /* A field added at the end. */
  memcpy(fields, real->fields, real->n_fields * sizeof fields[0]);
  fields[real->n_fields] = fields[real->n_fields - 1];
  fields[real->n_fields].id = 25;
  fake.n_fields = real->n_fields + 1;
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_EXEC_REPORT, &fake));

  /* Envelope: a plain (non-oneof) field added, or a handled member retargeted. */
  const ProtobufCMessageDescriptor *renv = &hourglass__v1__envelope__descriptor;
  ProtobufCFieldDescriptor efields[128];
  assert_true(renv->n_fields <= 128);
  ProtobufCMessageDescriptor fenv;
  memcpy(&fenv, renv, sizeof fenv);
  memcpy(efields, renv->fields, renv->n_fields * sizeof efields[0]);
  fenv.fields = efields;
  assert_true(hg_wire_fast_shape_ok(HG_WIRE_FAST_ENVELOPE, &fenv));
  efields[1].flags = 0;
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_ENVELOPE, &fenv));
  memcpy(efields, renv->fields, renv->n_fields * sizeof efields[0]);
  unsigned er_at = 0;
  for (unsigned i = 0; i < renv->n_fields; i++)
    if (efields[i].id == HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT) er_at = i;
  assert_true(er_at > 0);
  efields[er_at].descriptor = &hourglass__v1__response__descriptor;
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_ENVELOPE, &fenv));
  memcpy(efields, renv->fields, renv->n_fields * sizeof efields[0]);
  efields[0].type = PROTOBUF_C_TYPE_INT64;
  assert_false(hg_wire_fast_shape_ok(HG_WIRE_FAST_ENVELOPE, &fenv));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_use_race), /* must run first */
      cmocka_unit_test(test_differential),   cmocka_unit_test(test_longest),
      cmocka_unit_test(test_hand_built),     cmocka_unit_test(test_declined),
      cmocka_unit_test(test_guard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
