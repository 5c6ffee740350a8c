/*
 * hourglass/wire.h - the gateway's wire codec, shared by the server and by
 * clients: framing, the per-frame decode arena, encoding and the login proof.
 *
 * Framing. Each frame is a varint (protobuf base-128, little-endian groups)
 * giving the body length, then the body: one hourglass.v1.Envelope. This is
 * the protobuf "delimited" convention, so any protobuf runtime can speak it.
 * A frame header is a protocol violation when its varint is over-long (more
 * than 10 bytes, or a value that does not fit 64 bits), non-minimal (a final
 * byte of 0x00 after the first: the same number written longer than
 * needed), its length is zero, or its length exceeds the configured maximum.
 * hg_wire_frame_parse() decides all of that from the header bytes alone, so
 * a receiver never buffers the body of a frame it will refuse.
 *
 * Decoding. protobuf-c allocates every nested message, repeated array and
 * string of a decoded message through the allocator it is given.
 * hg_wire_arena_t is such an allocator over a caller-owned fixed buffer:
 * allocation is a pointer bump, free does nothing, and the arena is reset
 * before each frame, so decoding never calls malloc. A frame whose decoded
 * form does not fit the arena fails to decode (HG_EPARSE). Size the arena
 * with HG_WIRE_ARENA_SIZE(max_frame). Decoding checks the protobuf
 * encoding only: protobuf-c does not range-check enums and keeps unknown
 * fields, so the receiver must validate every field it uses (the gateway
 * does; see proto/README.md).
 *
 * Login proof. A client proves it holds its key's secret with
 * HMAC-SHA256(secret, "HGv1" || be64(timestamp_ns) || session_id[16] ||
 * be64(key_id)); hg_wire_login_mac() computes it for either side.
 *
 * Threads. Everything here is a pure function of its arguments or works on
 * caller-owned storage (an arena is owned by one thread at a time). Nothing
 * allocates.
 */
#ifndef HOURGLASS_WIRE_H
#define HOURGLASS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hourglass.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest varint, bytes. */
#define HG_WIRE_VARINT_MAX 10
/* Default and largest accepted maximum body length, bytes. */
#define HG_WIRE_DEFAULT_MAX_FRAME (64u * 1024u)
#define HG_WIRE_MAX_FRAME_LIMIT (16u * 1024u * 1024u)
/* Login session id length, bytes. */
#define HG_WIRE_SESSION_ID_LEN 16
#define HG_WIRE_MAC_LEN 32
/* An API key's secret: HG_WIRE_SECRET_MIN..HG_WIRE_SECRET_MAX bytes when a
 * key is made (AddApiKey, keys files); a client logs in with up to MAX. */
#define HG_WIRE_SECRET_MIN 16
#define HG_WIRE_SECRET_MAX 64
/* Arena bytes that always hold the decoded form of a body of up to
 * max_frame bytes (protobuf-c's in-memory structs are at most about 12x the
 * encoded size for our schema: a 2-byte empty QuoteEntry becomes a
 * 72-byte struct plus an 8-byte pointer). */
#define HG_WIRE_ARENA_SIZE(max_frame) ((size_t)(max_frame) * 48u + 4096u)

/* ------------------------------------------------------------------ framing */

typedef struct hg_wire_frame {
  uint32_t hdr_len;  /* bytes of the length varint */
  uint32_t body_len; /* bytes of the body that follows, 1 .. max_frame */
} hg_wire_frame_t;

/*
 * Parses the frame header at buf[0..len). Returns:
 *   0          header complete: *out set; the whole frame is available when
 *              len >= out->hdr_len + out->body_len;
 *   -EAGAIN    the header is not complete yet (read more); not a violation;
 *   HG_EPARSE  over-long or non-minimal varint;
 *   HG_EINVAL  zero length;
 *   HG_ERANGE  length above max_frame.
 * On an error *out is untouched. Any thread.
 */
int hg_wire_frame_parse(const uint8_t *buf, size_t len, uint32_t max_frame, hg_wire_frame_t *out);

/* The TerminateCode (hourglass.v1) a frame error of hg_wire_frame_parse()
 * maps to; TERM_DECODE_FAILED for any other value. */
uint32_t hg_wire_frame_error_code(int err);

/* Writes v as a minimal varint into out; returns its length (1..10). */
size_t hg_wire_varint_encode(uint64_t v, uint8_t out[HG_WIRE_VARINT_MAX]);

/* Length of v as a minimal varint (1..10). */
size_t hg_wire_varint_len(uint64_t v);

/* ---------------------------------------------------------------- encoding */

/*
 * Encodes env as one frame (length varint + body) into buf[0..cap).
 * Returns 0 and *len (total frame bytes), HG_EFULL (cap too small; *len is
 * set to the size needed and buf is untouched) or HG_ERANGE (the body would
 * be empty or longer than HG_WIRE_MAX_FRAME_LIMIT). Does not allocate.
 */
int hg_wire_encode(const Hourglass__V1__Envelope *env, uint8_t *buf, size_t cap, size_t *len);

/* ------------------------------------------------------------------- arena */

typedef struct hg_wire_arena {
  ProtobufCAllocator allocator; /* hand &allocator to protobuf-c */
  uint8_t *base;                /* caller-owned buffer (not freed here) */
  size_t cap;
  size_t used;
  size_t high_water;            /* most bytes any frame used */
  uint64_t failures;            /* allocations refused for lack of room */
} hg_wire_arena_t;

/* Sets up a over buf[0..cap) (buf must stay valid while a is used). */
void hg_wire_arena_init(hg_wire_arena_t *a, void *buf, size_t cap);

/* Forgets every allocation: messages decoded from a become invalid. */
void hg_wire_arena_reset(hg_wire_arena_t *a);

/*
 * Resets a and decodes body[0..len) as an Envelope allocated in a. Returns 0
 * and *out (valid until the next reset or decode on a), or HG_EPARSE (not a
 * valid Envelope, or it does not fit the arena). Any field may still be out
 * of range: validate before use. Never frees with protobuf-c's unpack_free;
 * resetting the arena releases everything.
 */
int hg_wire_decode(hg_wire_arena_t *a, const uint8_t *body, size_t len,
                   Hourglass__V1__Envelope **out);

/*
 * Nonzero if m or any message nested in it carries fields this schema does
 * not define (protobuf-c keeps them as unknown fields). The gateway refuses
 * such messages: it never forwards bytes it did not validate. The schema
 * has no recursive messages, so the walk is bounded by its depth.
 */
int hg_wire_has_unknown(const ProtobufCMessage *m);

/* hg_wire_has_unknown() for an Envelope, without walking every member of
 * its body oneof: the envelope's own unknown fields, then its body's. The
 * same answer, at the cost of one body instead of the whole schema. */
int hg_wire_envelope_has_unknown(const Hourglass__V1__Envelope *env);

/* ------------------------------------------------------------ body ranges */

/*
 * Who sends an Envelope body (its body_case, the field number), from the
 * schema's BodyRange: 1 a client, 0 the server, -1 no range (not a body).
 * Any thread.
 */
int hg_wire_body_from_client(uint32_t body_case);

/* Whether a body is a client request: an application message that carries
 * a seq (BODY_CLIENT_REQUEST_FIRST..LAST). Any thread. */
bool hg_wire_body_is_request(uint32_t body_case);

/* -------------------------------------------------------------- login proof */

/* Length of the signed login string: "HGv1" + 8 + 16 + 8. */
#define HG_WIRE_LOGIN_MSG_LEN 36

/*
 * out = HMAC-SHA256(secret[0..secret_len), "HGv1" || be64(timestamp_ns) ||
 * session_id[0..16) || be64(key_id)). Any thread.
 */
void hg_wire_login_mac(const uint8_t *secret, size_t secret_len, uint64_t timestamp_ns,
                       const uint8_t session_id[HG_WIRE_SESSION_ID_LEN], uint64_t key_id,
                       uint8_t out[HG_WIRE_MAC_LEN]);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_WIRE_H */
