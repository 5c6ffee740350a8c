/*
 * wire_fast.h - internal: hand-written encoders for the hot Envelope shapes
 * (hg_wire_encode's fast path). Not part of the public API; tests and the
 * fuzz target include it to compare the fast path with protobuf-c.
 */
#ifndef HOURGLASS_WIRE_FAST_H
#define HOURGLASS_WIRE_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes in v's minimal varint: bits needed (at least 1), 7 per byte.
 * hg_wire_varint_len() is this too. */
static inline size_t hg_wire__varint_len(uint64_t v) {
  return 1u + (size_t)(63 - __builtin_clzll(v | 1u)) / 7u;
}

/* Writes v as a minimal varint at p; returns the byte after it. The one
 * varint writer of the codec (hg_wire_varint_encode() is this too). */
static inline uint8_t *hg_wire__put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* hg_wire_fast_encode's "not handled here": the caller must use protobuf-c. */
#define HG_WIRE_FAST_DECLINED 1

/* The message shapes the fast path knows; bit (1u << shape) in
 * hg_wire_fast_enabled(). */
typedef enum hg_wire_fast_shape {
  HG_WIRE_FAST_ENVELOPE = 0, /* seq + the oneof; every other field a oneof member */
  HG_WIRE_FAST_EXEC_REPORT = 1,
  HG_WIRE_FAST_NEW_ORDER = 2,
  HG_WIRE_FAST_CANCEL = 3,
  HG_WIRE_FAST_HEARTBEAT = 4,
  HG_WIRE_FAST_NSHAPES = 5
} hg_wire_fast_shape_t;

#define HG_WIRE_FAST_ALL ((1u << HG_WIRE_FAST_NSHAPES) - 1u)

/*
 * Encodes env as one frame exactly as hg_wire_encode() does with protobuf-c
 * (same bytes, same *len, same return codes: 0, HG_EFULL with *len = bytes
 * needed and buf untouched), when env is one of the handled shapes:
 * Envelope{seq?, execution_report | new_order | cancel | heartbeat} with the
 * body pointer set, the right descriptors and no unknown fields anywhere.
 * Otherwise returns HG_WIRE_FAST_DECLINED and touches neither buf nor *len.
 * Any thread; no allocation, lock or syscall (the first call also runs the
 * descriptor check, see hg_wire_fast_enabled()).
 */
int hg_wire_fast_encode(const Hourglass__V1__Envelope *env, uint8_t *buf, size_t cap,
                        size_t *len);

/*
 * Bit set of the shapes whose descriptor still matches the encoder (every
 * field number, type, label, flag and struct offset it was written for, and
 * no other field). Computed once, on the first call from any thread; a
 * shape whose bit is clear is always left to protobuf-c, and a clear
 * HG_WIRE_FAST_ENVELOPE bit disables every shape. Any thread.
 */
unsigned hg_wire_fast_enabled(void);

/*
 * 1 if d has exactly the fields the encoder for shape was written for,
 * 0 if not (or shape is out of range). Pure; any thread. Exposed so a test
 * can show a changed descriptor is refused.
 */
int hg_wire_fast_shape_ok(hg_wire_fast_shape_t shape, const ProtobufCMessageDescriptor *d);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_WIRE_FAST_H */
