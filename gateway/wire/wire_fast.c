/*
 * Hand-written encoders for the envelopes that carry almost all the wire
 * traffic: ExecutionReport (server -> client) and NewOrderRequest,
 * CancelRequest and Heartbeat (client -> server). protobuf-c's generic packer
 * walks the descriptor twice (once for the size, once to write); here each
 * field is written straight from the struct in one pass, through the
 * message's layout table (wire_layout.h), which the decoder uses too.
 *
 * One pass needs the sub-message length before the sub-message, so the body
 * is written into a stack scratch buffer at an offset, and the sub-message
 * key and length, the envelope's seq and the frame's length varint are then
 * prepended backwards in front of it; the finished frame is copied to the
 * caller's buffer only when it fits, so a short buffer stays untouched as
 * with protobuf-c. Output is byte-identical to protobuf_c_message_pack: fields
 * in field-number order (the layout check makes sure protobuf-c's order is
 * that too), optional scalars only when has_x, minimal varints, enums as
 * int32 (a negative one is a 10-byte varint), bools as one byte 0 or 1.
 * A message whose descriptor no longer matches its table, and anything
 * unusual (unknown fields, a NULL or foreign sub-message, another oneof
 * member), is left to protobuf-c.
 */
#include "wire_fast.h"

#include <string.h>

#include "hourglass/error.h"
#include "hourglass/wire.h"
#include "wire_layout.h"

/* The encoder's shapes: the Envelope and the bodies it writes by hand. */
static const struct {
  hg_wire_fast_shape_t shape;
  uint32_t body_case; /* 0: the Envelope itself */
  const ProtobufCMessageDescriptor *desc;
} shapes[] = {
    {HG_WIRE_FAST_ENVELOPE, 0, &hourglass__v1__envelope__descriptor},
    {HG_WIRE_FAST_EXEC_REPORT, HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT,
     &hourglass__v1__execution_report__descriptor},
    {HG_WIRE_FAST_NEW_ORDER, HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER,
     &hourglass__v1__new_order_request__descriptor},
    {HG_WIRE_FAST_CANCEL, HOURGLASS__V1__ENVELOPE__BODY_CANCEL,
     &hourglass__v1__cancel_request__descriptor},
    {HG_WIRE_FAST_HEARTBEAT, HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT,
     &hourglass__v1__heartbeat__descriptor},
};

int hg_wire_fast_shape_ok(hg_wire_fast_shape_t shape, const ProtobufCMessageDescriptor *d) {
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    if (shapes[i].shape == shape) return hg_wire__layout_ok(shapes[i].desc, d);
  return 0;
}

unsigned hg_wire_fast_enabled(void) {
  if (!hg_wire__envelope_usable()) return 0;
  unsigned bits = 1u << HG_WIRE_FAST_ENVELOPE;
  for (size_t i = 1; i < sizeof shapes / sizeof shapes[0]; i++)
    if (hg_wire__body_layout(shapes[i].body_case) != NULL) bits |= 1u << shapes[i].shape;
  return bits;
}

/* ---------------------------------------------------------------- writers */

/* A field's key: (id << 3) with wire type 0 (varint), one byte below 16. */
static inline uint8_t *put_key(uint8_t *p, uint32_t id) {
  if (id < 16) {
    *p++ = (uint8_t)(id << 3);
    return p;
  }
  return hg_wire__put_varint(p, (uint64_t)id << 3);
}

/* Longest bodies, bytes: ExecutionReport 219 (15 one-byte keys, 10 two-byte
 * keys, 15 ten-byte values, 6 five-byte ones, 4 bools), NewOrderRequest 91. */
#define BODY_MAX 256
/* Room in front of the body for frame length (<= 3 bytes here), seq key and
 * value (11), sub-message key (2) and length (2). */
#define FRONT 32

/* A body through its layout table: present fields in field-number order. */
static uint8_t *put_body(uint8_t *p, const hg_wire_msg_t *m, const void *msg) {
  const uint8_t *src = msg;
  for (uint32_t id = 1; id <= m->max_field; id++) {
    const hg_wire_field_t *f = &m->fields[id];
    if (f->kind == HG_WK_NONE) continue;
    if (f->has_off >= 0 && !*(const protobuf_c_boolean *)(const void *)(src + f->has_off)) continue;
    const void *at = src + f->off;
    uint64_t v;
    switch (f->kind) {
    case HG_WK_U32: v = *(const uint32_t *)at; break;
    case HG_WK_U64: v = *(const uint64_t *)at; break;
    case HG_WK_I64: v = (uint64_t) * (const int64_t *)at; break;
    /* protobuf_c_boolean is an int: any non-zero value is written as 1 */
    case HG_WK_BOOL: v = *(const protobuf_c_boolean *)at != 0; break;
    /* enums are int32 on the wire: a negative one is sign-extended */
    default: v = (uint64_t)(int64_t) * (const int *)at; break;
    }
    p = hg_wire__put_varint(put_key(p, id), v);
  }
  return p;
}

int hg_wire_fast_encode(const Hourglass__V1__Envelope *env, uint8_t *buf, size_t cap,
                        size_t *len) {
  if (env->base.descriptor != &hourglass__v1__envelope__descriptor ||
      env->base.n_unknown_fields != 0)
    return HG_WIRE_FAST_DECLINED;
  uint32_t id = (uint32_t)env->body_case;
  size_t i = 1;
  while (i < sizeof shapes / sizeof shapes[0] && shapes[i].body_case != id) i++;
  if (i == sizeof shapes / sizeof shapes[0]) return HG_WIRE_FAST_DECLINED;
  const hg_wire_msg_t *m = hg_wire__body_layout(id);
  /* Every member sits at the union's one offset (checked with the
   * descriptor); protobuf-c writes nothing for a NULL member, which is rare
   * enough to leave to it. */
  const ProtobufCMessage *sub = (const ProtobufCMessage *)(const void *)env->heartbeat;
  if (m == NULL || sub == NULL || sub->descriptor != m->desc || sub->n_unknown_fields != 0)
    return HG_WIRE_FAST_DECLINED;

  uint8_t tmp[FRONT + BODY_MAX];
  uint8_t *body = tmp + FRONT;
  uint8_t *end = put_body(body, m, sub);

  /* Prepend, innermost first: sub-message length and key, seq, frame length. */
  size_t sub_len = (size_t)(end - body);
  uint8_t *p = body - hg_wire__varint_len(sub_len);
  hg_wire__put_varint(p, sub_len);
  uint64_t key = ((uint64_t)id << 3) | PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
  p -= hg_wire__varint_len(key);
  hg_wire__put_varint(p, key);
  if (env->has_seq) {
    p -= 1 + hg_wire__varint_len(env->seq);
    hg_wire__put_varint(put_key(p, 1), env->seq);
  }
  size_t body_len = (size_t)(end - p); /* >= 2 (key and length), <= 250 */
  p -= hg_wire__varint_len(body_len);
  hg_wire__put_varint(p, body_len);

  size_t need = (size_t)(end - p);
  *len = need;
  if (need > cap) return HG_EFULL;
  memcpy(buf, p, need);
  return 0;
}
