/*
 * Hand-written encoders for the envelopes that carry almost all the wire
 * traffic: ExecutionReport (server -> client) and NewOrderRequest,
 * CancelRequest and Heartbeat (client -> server). protobuf-c's generic packer
 * walks the descriptor twice (once for the size, once to write); these write
 * each field straight from the struct in one pass.
 *
 * One pass needs the sub-message length before the sub-message, so the body
 * is written into a stack scratch buffer at an offset, and the sub-message
 * key and length, the envelope's seq and the frame's length varint are then
 * prepended backwards in front of it; the finished frame is copied to the
 * caller's buffer only when it fits, so a short buffer stays untouched as
 * with protobuf-c. Output is byte-identical to protobuf_c_message_pack: fields
 * in field-number order, optional scalars only when has_x, minimal varints,
 * enums as int32 (a negative one is a 10-byte varint), bools as one byte.
 *
 * The code is written for one version of proto/hourglass.proto. A field
 * added, renumbered or retyped there would silently be left out or written
 * wrongly, so the first call checks every handled descriptor against the
 * table of fields the encoders were written for (number, type, label, flags,
 * struct offset) and any shape that no longer matches is left to protobuf-c
 * for the life of the process. Anything unusual (unknown fields, a NULL or
 * foreign sub-message, another oneof member) is left to protobuf-c as well.
 */
#include "wire_fast.h"

#include <stdatomic.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/wire.h"

/* ------------------------------------------------------- descriptor check */

typedef struct field_spec {
  uint32_t id;
  ProtobufCType type;
  ProtobufCLabel label;
  uint32_t flags;
  size_t offset;
  size_t quantifier_offset;              /* optional fields only */
  const ProtobufCMessageDescriptor *sub; /* message fields only */
} field_spec_t;

#define REQ(T, n, ty, m)                                                                     \
  { (n), PROTOBUF_C_TYPE_##ty, PROTOBUF_C_LABEL_REQUIRED, 0, offsetof(T, m), 0, NULL }
#define OPT(T, n, ty, m)                                                                     \
  { (n), PROTOBUF_C_TYPE_##ty, PROTOBUF_C_LABEL_OPTIONAL, 0, offsetof(T, m),               \
    offsetof(T, has_##m), NULL }

typedef Hourglass__V1__ExecutionReport er_t;
static const field_spec_t er_spec[] = {
    REQ(er_t, 1, UINT32, exec_type),         REQ(er_t, 2, UINT32, instrument_id),
    OPT(er_t, 3, UINT64, order_id),          OPT(er_t, 4, UINT64, client_order_id),
    OPT(er_t, 5, UINT32, reason),            OPT(er_t, 6, UINT32, request),
    OPT(er_t, 7, ENUM, side),                OPT(er_t, 8, INT64, price),
    OPT(er_t, 9, INT64, qty),                OPT(er_t, 10, INT64, leaves),
    OPT(er_t, 11, BOOL, maker),              OPT(er_t, 12, UINT64, engine_seq),
    OPT(er_t, 13, UINT64, ts),               OPT(er_t, 14, UINT64, ref_seq),
    OPT(er_t, 15, UINT32, quote_group),      OPT(er_t, 16, UINT32, account),
    OPT(er_t, 17, BOOL, drop_copy),          OPT(er_t, 18, BOOL, priority_kept),
    OPT(er_t, 19, INT64, risk_equity),       OPT(er_t, 20, INT64, risk_initial_margin),
    OPT(er_t, 21, INT64, risk_ref_price),    OPT(er_t, 22, INT64, risk_position),
    OPT(er_t, 23, INT64, risk_low),          OPT(er_t, 24, INT64, risk_high),
};

typedef Hourglass__V1__NewOrderRequest no_t;
static const field_spec_t no_spec[] = {
    REQ(no_t, 1, UINT32, instrument_id), REQ(no_t, 2, UINT64, client_order_id),
    REQ(no_t, 3, ENUM, side),            REQ(no_t, 4, ENUM, type),
    REQ(no_t, 5, ENUM, tif),             OPT(no_t, 6, INT64, price),
    REQ(no_t, 7, INT64, qty),            OPT(no_t, 8, ENUM, stp),
    OPT(no_t, 9, BOOL, post_only),       OPT(no_t, 10, UINT32, smp_group),
};

typedef Hourglass__V1__CancelRequest cancel_t;
static const field_spec_t cancel_spec[] = {
    REQ(cancel_t, 1, UINT32, instrument_id),
    REQ(cancel_t, 2, UINT64, order_id),
};

typedef Hourglass__V1__Envelope env_t;

static int fields_match(const ProtobufCMessageDescriptor *d, size_t sizeof_message,
                        const field_spec_t *spec, unsigned n) {
  if (d == NULL || d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC) return 0;
  if (d->sizeof_message != sizeof_message || d->n_fields != n) return 0;
  for (unsigned i = 0; i < n; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const field_spec_t *s = &spec[i];
    if (f->id != s->id || f->type != s->type || f->label != s->label || f->flags != s->flags ||
        f->offset != s->offset)
      return 0;
    if (s->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset != s->quantifier_offset)
      return 0;
    if (s->type == PROTOBUF_C_TYPE_MESSAGE && f->descriptor != s->sub) return 0;
  }
  return 1;
}

/* Envelope: seq first, then only members of the one oneof (they share
 * body_case and the union's offset), with the four handled members pointing
 * at the right message types. Members the encoder does not handle may come
 * and go freely: protobuf-c writes a member only when body_case selects it. */
static int envelope_ok(const ProtobufCMessageDescriptor *d) {
  if (d == NULL || d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC) return 0;
  if (d->sizeof_message != sizeof(env_t) || d->n_fields < 1) return 0;
  static const field_spec_t seq[] = {OPT(env_t, 1, UINT64, seq)};
  const ProtobufCFieldDescriptor *f = &d->fields[0];
  if (f->id != 1 || f->type != seq[0].type || f->label != seq[0].label || f->flags != 0 ||
      f->offset != seq[0].offset || f->quantifier_offset != seq[0].quantifier_offset)
    return 0;
  static const struct {
    uint32_t id;
    const ProtobufCMessageDescriptor *sub;
  } want[] = {
      {HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT, &hourglass__v1__heartbeat__descriptor},
      {HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER, &hourglass__v1__new_order_request__descriptor},
      {HOURGLASS__V1__ENVELOPE__BODY_CANCEL, &hourglass__v1__cancel_request__descriptor},
      {HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT,
       &hourglass__v1__execution_report__descriptor},
  };
  unsigned found = 0;
  for (unsigned i = 1; i < d->n_fields; i++) {
    f = &d->fields[i];
    if (f->id <= d->fields[i - 1].id) return 0; /* packing order is field-number order */
    if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_OPTIONAL ||
        f->flags != PROTOBUF_C_FIELD_FLAG_ONEOF || f->offset != offsetof(env_t, heartbeat) ||
        f->quantifier_offset != offsetof(env_t, body_case))
      return 0;
    for (unsigned k = 0; k < sizeof want / sizeof want[0]; k++) {
      if (f->id != want[k].id) continue;
      if (f->descriptor != want[k].sub) return 0;
      found |= 1u << k;
    }
  }
  return found == (1u << (sizeof want / sizeof want[0])) - 1u;
}

int hg_wire_fast_shape_ok(hg_wire_fast_shape_t shape, const ProtobufCMessageDescriptor *d) {
  switch (shape) {
  case HG_WIRE_FAST_ENVELOPE: return envelope_ok(d);
  case HG_WIRE_FAST_EXEC_REPORT:
    return fields_match(d, sizeof(er_t), er_spec, sizeof er_spec / sizeof er_spec[0]);
  case HG_WIRE_FAST_NEW_ORDER:
    return fields_match(d, sizeof(no_t), no_spec, sizeof no_spec / sizeof no_spec[0]);
  case HG_WIRE_FAST_CANCEL:
    return fields_match(d, sizeof(cancel_t), cancel_spec,
                        sizeof cancel_spec / sizeof cancel_spec[0]);
  case HG_WIRE_FAST_HEARTBEAT:
    return fields_match(d, sizeof(Hourglass__V1__Heartbeat), NULL, 0);
  default: return 0;
  }
}

#define CHECKED (1u << 31)
/* 0 until the first check; then CHECKED | the enabled shape bits. */
static _Atomic unsigned enabled_state;

static unsigned compute_enabled(void) {
  if (!envelope_ok(&hourglass__v1__envelope__descriptor)) return 0;
  unsigned bits = 1u << HG_WIRE_FAST_ENVELOPE;
  if (hg_wire_fast_shape_ok(HG_WIRE_FAST_EXEC_REPORT, &hourglass__v1__execution_report__descriptor))
    bits |= 1u << HG_WIRE_FAST_EXEC_REPORT;
  if (hg_wire_fast_shape_ok(HG_WIRE_FAST_NEW_ORDER, &hourglass__v1__new_order_request__descriptor))
    bits |= 1u << HG_WIRE_FAST_NEW_ORDER;
  if (hg_wire_fast_shape_ok(HG_WIRE_FAST_CANCEL, &hourglass__v1__cancel_request__descriptor))
    bits |= 1u << HG_WIRE_FAST_CANCEL;
  if (hg_wire_fast_shape_ok(HG_WIRE_FAST_HEARTBEAT, &hourglass__v1__heartbeat__descriptor))
    bits |= 1u << HG_WIRE_FAST_HEARTBEAT;
  return bits;
}

unsigned hg_wire_fast_enabled(void) {
  /* relaxed: the bits are a pure function of constant descriptors, so threads
   * racing on the first call store the same value, and nothing else is
   * published through this word. */
  unsigned s = atomic_load_explicit(&enabled_state, memory_order_relaxed);
  if (s == 0) {
    s = CHECKED | compute_enabled();
    /* relaxed: see the load above. */
    atomic_store_explicit(&enabled_state, s, memory_order_relaxed);
  }
  return s & HG_WIRE_FAST_ALL;
}

/* ---------------------------------------------------------------- writers */

static inline size_t varint_len(uint64_t v) {
  /* bits needed (at least 1), 7 per byte */
  return 1u + (size_t)(63 - __builtin_clzll(v | 1u)) / 7u;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* Field keys of varint fields; ids are constants, so this folds to stores. */
static inline uint8_t *put_key(uint8_t *p, uint32_t id) {
  if (id < 16) {
    *p++ = (uint8_t)(id << 3);
    return p;
  }
  return put_varint(p, (uint64_t)id << 3);
}

static inline uint8_t *put_u32(uint8_t *p, uint32_t id, uint32_t v) {
  return put_varint(put_key(p, id), v);
}

static inline uint8_t *put_u64(uint8_t *p, uint32_t id, uint64_t v) {
  return put_varint(put_key(p, id), v);
}

static inline uint8_t *put_i64(uint8_t *p, uint32_t id, int64_t v) {
  return put_varint(put_key(p, id), (uint64_t)v);
}

/* Enums are int32 on the wire: a negative value is sign-extended to 64 bits. */
static inline uint8_t *put_enum(uint8_t *p, uint32_t id, int v) {
  return put_varint(put_key(p, id), (uint64_t)(int64_t)(int32_t)v);
}

/* protobuf_c_boolean is an int: any non-zero value is written as 1. */
static inline uint8_t *put_bool(uint8_t *p, uint32_t id, protobuf_c_boolean v) {
  p = put_key(p, id);
  *p++ = v ? 1 : 0;
  return p;
}

/* Longest bodies, bytes: ExecutionReport 216 (15 one-byte keys, 9 two-byte
 * keys, 15 ten-byte values, 6 five-byte ones, 3 bools), NewOrderRequest 91. */
#define BODY_MAX 256
/* Room in front of the body for frame length (<= 3 bytes here), seq key and
 * value (11), sub-message key (2) and length (2). */
#define FRONT 32

static uint8_t *exec_report_body(uint8_t *p, const er_t *m) {
  p = put_u32(p, 1, m->exec_type);
  p = put_u32(p, 2, m->instrument_id);
  if (m->has_order_id) p = put_u64(p, 3, m->order_id);
  if (m->has_client_order_id) p = put_u64(p, 4, m->client_order_id);
  if (m->has_reason) p = put_u32(p, 5, m->reason);
  if (m->has_request) p = put_u32(p, 6, m->request);
  if (m->has_side) p = put_enum(p, 7, (int)m->side);
  if (m->has_price) p = put_i64(p, 8, m->price);
  if (m->has_qty) p = put_i64(p, 9, m->qty);
  if (m->has_leaves) p = put_i64(p, 10, m->leaves);
  if (m->has_maker) p = put_bool(p, 11, m->maker);
  if (m->has_engine_seq) p = put_u64(p, 12, m->engine_seq);
  if (m->has_ts) p = put_u64(p, 13, m->ts);
  if (m->has_ref_seq) p = put_u64(p, 14, m->ref_seq);
  if (m->has_quote_group) p = put_u32(p, 15, m->quote_group);
  if (m->has_account) p = put_u32(p, 16, m->account);
  if (m->has_drop_copy) p = put_bool(p, 17, m->drop_copy);
  if (m->has_priority_kept) p = put_bool(p, 18, m->priority_kept);
  if (m->has_risk_equity) p = put_i64(p, 19, m->risk_equity);
  if (m->has_risk_initial_margin) p = put_i64(p, 20, m->risk_initial_margin);
  if (m->has_risk_ref_price) p = put_i64(p, 21, m->risk_ref_price);
  if (m->has_risk_position) p = put_i64(p, 22, m->risk_position);
  if (m->has_risk_low) p = put_i64(p, 23, m->risk_low);
  if (m->has_risk_high) p = put_i64(p, 24, m->risk_high);
  return p;
}

static uint8_t *new_order_body(uint8_t *p, const no_t *m) {
  p = put_u32(p, 1, m->instrument_id);
  p = put_u64(p, 2, m->client_order_id);
  p = put_enum(p, 3, (int)m->side);
  p = put_enum(p, 4, (int)m->type);
  p = put_enum(p, 5, (int)m->tif);
  if (m->has_price) p = put_i64(p, 6, m->price);
  p = put_i64(p, 7, m->qty);
  if (m->has_stp) p = put_enum(p, 8, (int)m->stp);
  if (m->has_post_only) p = put_bool(p, 9, m->post_only);
  if (m->has_smp_group) p = put_u32(p, 10, m->smp_group);
  return p;
}

static uint8_t *cancel_body(uint8_t *p, const cancel_t *m) {
  p = put_u32(p, 1, m->instrument_id);
  p = put_u64(p, 2, m->order_id);
  return p;
}

int hg_wire_fast_encode(const Hourglass__V1__Envelope *env, uint8_t *buf, size_t cap,
                        size_t *len) {
  unsigned on = hg_wire_fast_enabled();
  if (env->base.descriptor != &hourglass__v1__envelope__descriptor ||
      env->base.n_unknown_fields != 0)
    return HG_WIRE_FAST_DECLINED;
  switch (env->body_case) {
  case HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT:
  case HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER:
  case HOURGLASS__V1__ENVELOPE__BODY_CANCEL:
  case HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT: break;
  default: return HG_WIRE_FAST_DECLINED;
  }
  /* Every handled member sits at the union's one offset (checked with the
   * descriptor); protobuf-c writes nothing for a NULL member, which is rare
   * enough to leave to it. */
  const ProtobufCMessage *sub = (const ProtobufCMessage *)(const void *)env->heartbeat;
  if (sub == NULL || sub->n_unknown_fields != 0) return HG_WIRE_FAST_DECLINED;

  uint8_t tmp[FRONT + BODY_MAX];
  uint8_t *body = tmp + FRONT;
  uint8_t *end;
  uint32_t id = (uint32_t)env->body_case;
  switch (env->body_case) {
  case HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT:
    if (!(on & (1u << HG_WIRE_FAST_EXEC_REPORT)) ||
        sub->descriptor != &hourglass__v1__execution_report__descriptor)
      return HG_WIRE_FAST_DECLINED;
    end = exec_report_body(body, env->execution_report);
    break;
  case HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER:
    if (!(on & (1u << HG_WIRE_FAST_NEW_ORDER)) ||
        sub->descriptor != &hourglass__v1__new_order_request__descriptor)
      return HG_WIRE_FAST_DECLINED;
    end = new_order_body(body, env->new_order);
    break;
  case HOURGLASS__V1__ENVELOPE__BODY_CANCEL:
    if (!(on & (1u << HG_WIRE_FAST_CANCEL)) ||
        sub->descriptor != &hourglass__v1__cancel_request__descriptor)
      return HG_WIRE_FAST_DECLINED;
    end = cancel_body(body, env->cancel);
    break;
  case HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT:
    if (!(on & (1u << HG_WIRE_FAST_HEARTBEAT)) ||
        sub->descriptor != &hourglass__v1__heartbeat__descriptor)
      return HG_WIRE_FAST_DECLINED;
    end = body;
    break;
  default: return HG_WIRE_FAST_DECLINED;
  }

  /* Prepend, innermost first: sub-message length and key, seq, frame length. */
  size_t sub_len = (size_t)(end - body);
  uint8_t *p = body - varint_len(sub_len);
  put_varint(p, sub_len);
  uint64_t key = ((uint64_t)id << 3) | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
  p -= varint_len(key);
  put_varint(p, key);
  if (env->has_seq) {
    p -= 1 + varint_len(env->seq);
    put_u64(p, 1, env->seq);
  }
  size_t body_len = (size_t)(end - p); /* >= 2 (key and length), <= 250 */
  p -= varint_len(body_len);
  put_varint(p, body_len);

  size_t need = (size_t)(end - p);
  *len = need;
  if (need > cap) return HG_EFULL;
  memcpy(buf, p, need);
  return 0;
}
