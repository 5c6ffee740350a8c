/*
 * The fast decoder for the hot Envelope shapes (see wire_fastdec.h).
 *
 * protobuf-c's generic unpacker looks every field up in the descriptor,
 * collects the scanned fields into a slab, then parses them in a second
 * pass; for a ten-field order that is most of the gateway's decode time.
 * Here the body is read in a single pass, through the message's layout
 * table (wire_layout.h: value kind, offset of the value, offset of its has_
 * flag, checked against protoc-c's descriptor once), straight into the
 * struct that the message's generated *_init() prepared. Whatever falls outside the plain
 * encoding makes the decoder give up without a trace (arena statistics
 * restored) so that protobuf-c alone decides every odd case and every error.
 *
 * Ownership: the decoded Envelope and its body live in the caller's arena
 * (owned by the thread decoding into it) and are released by its reset; the
 * body pointer stored in the Envelope points into that same arena.
 */
#include "wire_fastdec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire_layout.h"

/* ------------------------------------------------------------- decoding */

/* A minimal varint of at most 10 bytes within [*pp, end); false otherwise. */
static inline bool varint(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
  const uint8_t *p = *pp;
  if (p == end) return false;
  uint64_t v = *p++;
  if (v >= 0x80) {
    v &= 0x7f;
    for (unsigned shift = 7;; shift += 7) {
      if (p == end) return false;
      uint64_t b = *p++;
      if (shift == 63) {
        if (b != 1) return false; /* only bit 63 left; 0 would be non-minimal */
        v |= b << 63;
        break;
      }
      v |= (b & 0x7f) << shift;
      if (b < 0x80) {
        if (b == 0) return false;
        break;
      }
    }
  }
  *pp = p;
  *out = v;
  return true;
}

/* A key in its shortest form (one or two bytes covers field numbers up to
 * 2047, beyond anything handled); 0 when it is anything else. */
static inline uint32_t key(const uint8_t **pp, const uint8_t *end) {
  const uint8_t *p = *pp;
  uint32_t k = *p++;
  if (k & 0x80) {
    if (p == end || *p == 0 || (*p & 0x80)) return 0;
    k = (k & 0x7f) | ((uint32_t)*p++ << 7);
  }
  *pp = p;
  return k;
}

static bool decode_body(const hg_wire_msg_t *m, const uint8_t *p, const uint8_t *end, uint8_t *dst) {
  uint64_t seen = 0;
  while (p < end) {
    uint32_t k = key(&p, end);
    uint32_t num = k >> 3;
    if (k == 0 || (k & 7) != PROTOBUF_C_WIRE_TYPE_VARINT || num > m->max_field) return false;
    const hg_wire_field_t *fs = &m->fields[num];
    uint64_t bit = (uint64_t)1 << num;
    if (fs->kind == HG_WK_NONE || (seen & bit)) return false;
    seen |= bit;
    uint64_t v;
    if (!varint(&p, end, &v)) return false;
    void *at = dst + fs->off;
    switch (fs->kind) {
    case HG_WK_U32:
      if (v > UINT32_MAX) return false; /* protobuf-c would truncate */
      *(uint32_t *)at = (uint32_t)v;
      break;
    case HG_WK_U64: *(uint64_t *)at = v; break;
    case HG_WK_I64: *(int64_t *)at = (int64_t)v; break;
    case HG_WK_BOOL:
      if (v > 1) return false; /* protobuf-c reads any nonzero as true */
      *(protobuf_c_boolean *)at = (protobuf_c_boolean)v;
      break;
    default: /* HG_WK_ENUM */
      if (v > fs->enum_max) return false; /* protobuf-c keeps unknown values */
      *(int *)at = (int)v;
      break;
    }
    if (fs->has_off >= 0) *(protobuf_c_boolean *)(void *)(dst + fs->has_off) = 1;
  }
  return (seen & m->required) == m->required;
}

int hg_wire_decode_fast(hg_wire_arena_t *a, const uint8_t *body, size_t len,
                        Hourglass__V1__Envelope **out) {
  if (!hg_wire__envelope_usable()) return 0;
  const uint8_t *p = body, *end = body + len;
  Hourglass__V1__Envelope *e = hg_wire__arena_take(a, sizeof *e);
  if (e == NULL) return 0;
  hourglass__v1__envelope__init(e);
  bool have_seq = false;
  while (p < end) {
    uint32_t k = key(&p, end);
    if (k == ((1u << 3) | PROTOBUF_C_WIRE_TYPE_VARINT)) {
      if (have_seq || !varint(&p, end, &e->seq)) return 0;
      have_seq = true;
      e->has_seq = 1;
      continue;
    }
    if ((k & 7) != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED ||
        e->body_case != HOURGLASS__V1__ENVELOPE__BODY__NOT_SET)
      return 0;
    const hg_wire_msg_t *ms = hg_wire__body_layout(k >> 3);
    uint64_t n;
    if (ms == NULL || !varint(&p, end, &n) || n > (uint64_t)(end - p)) return 0;
    uint8_t *sub = hg_wire__arena_take(a, ms->size);
    if (sub == NULL) return 0;
    ms->desc->message_init((ProtobufCMessage *)(void *)sub);
    if (!decode_body(ms, p, p + n, sub)) return 0;
    p += n;
    e->body_case = (Hourglass__V1__Envelope__BodyCase)(k >> 3);
    /* Every member of the body union is a message pointer at one offset
     * (checked against the descriptor). */
    e->new_order = (Hourglass__V1__NewOrderRequest *)(void *)sub;
  }
  if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY__NOT_SET) return 0;
  if (a->used > a->high_water) a->high_water = a->used;
  *out = e;
  return 1;
}
