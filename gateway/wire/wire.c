/*
 * The wire codec: varint frame headers checked before any body byte is
 * buffered, frames encoded straight into the caller's buffer, and a bump
 * arena that protobuf-c allocates decoded messages from (reset per frame, so
 * decoding never mallocs and a hostile frame can use at most the arena).
 */
#include "hourglass/bytes.h"
#include "hourglass/wire.h"

#include <errno.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/hmac.h"
#include "wire_fast.h"
#include "wire_fastdec.h"

int hg_wire_frame_parse(const uint8_t *buf, size_t len, uint32_t max_frame,
                        hg_wire_frame_t *out) {
  uint64_t v = 0;
  for (size_t i = 0; i < HG_WIRE_VARINT_MAX; i++) {
    if (i >= len) return -EAGAIN;
    uint8_t b = buf[i];
    /* The tenth byte may only carry bit 63. */
    if (i == HG_WIRE_VARINT_MAX - 1 && b > 1) return HG_EPARSE;
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (b & 0x80) continue;
    if (i > 0 && b == 0) return HG_EPARSE; /* non-minimal */
    if (v == 0) return HG_EINVAL;
    if (v > max_frame) return HG_ERANGE;
    out->hdr_len = (uint32_t)(i + 1);
    out->body_len = (uint32_t)v;
    return 0;
  }
  return HG_EPARSE; /* continuation bit on the tenth byte */
}

uint32_t hg_wire_frame_error_code(int err) {
  switch (err) {
  case HG_EPARSE: return HOURGLASS__V1__TERMINATE_CODE__TERM_FRAME_BAD_VARINT;
  case HG_EINVAL: return HOURGLASS__V1__TERMINATE_CODE__TERM_FRAME_ZERO_LENGTH;
  case HG_ERANGE: return HOURGLASS__V1__TERMINATE_CODE__TERM_FRAME_TOO_LARGE;
  default: return HOURGLASS__V1__TERMINATE_CODE__TERM_DECODE_FAILED;
  }
}

size_t hg_wire_varint_encode(uint64_t v, uint8_t out[HG_WIRE_VARINT_MAX]) {
  return (size_t)(hg_wire__put_varint(out, v) - out);
}

size_t hg_wire_varint_len(uint64_t v) { return hg_wire__varint_len(v); }

int hg_wire_encode(const Hourglass__V1__Envelope *env, uint8_t *buf, size_t cap, size_t *len) {
  /* The hot shapes are written by hand (wire_fast.c); the rest, and those
   * whenever the schema no longer matches that code, by protobuf-c. */
  int rc = hg_wire_fast_encode(env, buf, cap, len);
  if (rc != HG_WIRE_FAST_DECLINED) return rc;
  size_t body = protobuf_c_message_get_packed_size(&env->base);
  if (body == 0 || body > HG_WIRE_MAX_FRAME_LIMIT) return HG_ERANGE;
  size_t need = hg_wire_varint_len(body) + body;
  *len = need;
  if (need > cap) return HG_EFULL;
  size_t h = hg_wire_varint_encode(body, buf);
  protobuf_c_message_pack(&env->base, buf + h);
  return 0;
}

/* ------------------------------------------------------------------- arena */

static void *arena_alloc(void *ctx, size_t size) {
  hg_wire_arena_t *a = ctx;
  void *p = hg_wire__arena_take(a, size == 0 ? 1 : size);
  if (p == NULL) {
    a->failures++;
    return NULL;
  }
  if (a->used > a->high_water) a->high_water = a->used;
  return p;
}

static void arena_free(void *ctx, void *p) {
  (void)ctx;
  (void)p;
}

void hg_wire_arena_init(hg_wire_arena_t *a, void *buf, size_t cap) {
  memset(a, 0, sizeof *a);
  a->allocator.alloc = arena_alloc;
  a->allocator.free = arena_free;
  a->allocator.allocator_data = a;
  a->base = buf;
  a->cap = cap;
}

void hg_wire_arena_reset(hg_wire_arena_t *a) { a->used = 0; }

int hg_wire_decode(hg_wire_arena_t *a, const uint8_t *body, size_t len,
                   Hourglass__V1__Envelope **out) {
  hg_wire_arena_reset(a);
  /* The hot shapes in their plain encoding take the hand-written path;
   * everything else, and every error, is protobuf-c's. */
  if (hg_wire_decode_fast(a, body, len, out)) return 0;
  hg_wire_arena_reset(a);
  Hourglass__V1__Envelope *e = hourglass__v1__envelope__unpack(&a->allocator, len, body);
  if (e == NULL) return HG_EPARSE;
  *out = e;
  return 0;
}

int hg_wire_has_unknown(const ProtobufCMessage *m) {
  if (m == NULL) return 0;
  if (m->n_unknown_fields != 0) return 1;
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
    const uint8_t *base = (const uint8_t *)m;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(const void *)(base + f->quantifier_offset);
      ProtobufCMessage *const *arr = *(ProtobufCMessage *const *const *)(const void *)(base + f->offset);
      for (size_t k = 0; k < n; k++)
        if (hg_wire_has_unknown(arr[k])) return 1;
    } else {
      /* A oneof member is stored only when it is the chosen case. */
      if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
          *(const uint32_t *)(const void *)(base + f->quantifier_offset) != f->id)
        continue;
      const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(const void *)(base + f->offset);
      if (hg_wire_has_unknown(sub)) return 1;
    }
  }
  return 0;
}

int hg_wire_envelope_has_unknown(const Hourglass__V1__Envelope *env) {
  if (env->base.n_unknown_fields != 0) return 1;
  if (env->body_case == HOURGLASS__V1__ENVELOPE__BODY__NOT_SET) return 0;
  /* Besides the body, an Envelope holds only scalars (seq): the body's
   * field is the one a walk of every member of the oneof would reach. */
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(env->base.descriptor, (unsigned)env->body_case);
  if (f == NULL || f->type != PROTOBUF_C_TYPE_MESSAGE) return hg_wire_has_unknown(&env->base);
  const uint8_t *base = (const uint8_t *)env;
  return hg_wire_has_unknown(*(ProtobufCMessage *const *)(const void *)(base + f->offset));
}

/* ------------------------------------------------------------ body ranges */

static bool in_range(uint32_t c, int first, int last) {
  return c >= (uint32_t)first && c <= (uint32_t)last;
}

int hg_wire_body_from_client(uint32_t c) {
  if (in_range(c, HOURGLASS__V1__BODY_RANGE__BODY_CLIENT_SESSION_FIRST,
               HOURGLASS__V1__BODY_RANGE__BODY_CLIENT_SESSION_LAST) ||
      hg_wire_body_is_request(c))
    return 1;
  if (in_range(c, HOURGLASS__V1__BODY_RANGE__BODY_SERVER_SESSION_FIRST,
               HOURGLASS__V1__BODY_RANGE__BODY_SERVER_SESSION_LAST) ||
      in_range(c, HOURGLASS__V1__BODY_RANGE__BODY_SERVER_APP_FIRST,
               HOURGLASS__V1__BODY_RANGE__BODY_SERVER_APP_LAST))
    return 0;
  return -1;
}

bool hg_wire_body_is_request(uint32_t c) {
  return in_range(c, HOURGLASS__V1__BODY_RANGE__BODY_CLIENT_REQUEST_FIRST,
                  HOURGLASS__V1__BODY_RANGE__BODY_CLIENT_REQUEST_LAST);
}

/* -------------------------------------------------------------- login proof */

void hg_wire_login_mac(const uint8_t *secret, size_t secret_len, uint64_t timestamp_ns,
                       const uint8_t session_id[HG_WIRE_SESSION_ID_LEN], uint64_t key_id,
                       uint8_t out[HG_WIRE_MAC_LEN]) {
  uint8_t m[HG_WIRE_LOGIN_MSG_LEN];
  memcpy(m, "HGv1", 4);
  hg_st_be64(m + 4, timestamp_ns);
  memcpy(m + 12, session_id, HG_WIRE_SESSION_ID_LEN);
  hg_st_be64(m + 28, key_id);
  hg_hmac_sha256(secret, secret_len, m, sizeof m, out);
}
