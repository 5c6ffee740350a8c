/*
 * wire_fastdec.h - internal: the hand-written decoder for the hot Envelope
 * shapes (wire.c's hg_wire_decode tries it before protobuf-c).
 *
 * Handled: Envelope{[seq], heartbeat | new_order | cancel | replace |
 * execution_report}, in the plain encoding only: each known field at most
 * once with its own wire type, keys in their shortest form, minimal varints
 * whose value fits the field (uint32 <= 2^32-1, bool 0 or 1, enum one of
 * its declared values), every required field present, nothing unknown, one
 * body. Fields may come in any order. Anything else is "not handled" and
 * protobuf-c decides, so this path never refuses what protobuf-c accepts
 * and never makes an error of its own.
 *
 * When it handles a body the result is the one protobuf-c would build: the
 * same structs, initialised by protoc-c's *_init() (so absent optional
 * fields carry the .proto defaults), every has_x and body_case set as
 * protobuf-c sets them, no unknown fields, all allocated in the arena.
 *
 * Each handled message's descriptor is compared once with its layout table
 * (wire_layout.h); a message that no longer matches is left to protobuf-c
 * for good.
 */
#ifndef HOURGLASS_WIRE_FASTDEC_H
#define HOURGLASS_WIRE_FASTDEC_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/wire.h"

/*
 * Decodes body[0..len) into a (from a->used on; the caller resets a first)
 * when it is one of the handled shapes. Returns nonzero and sets *out
 * (valid until the next reset of a) when it did; returns 0 when it did not,
 * with *out untouched, a->high_water and a->failures unchanged and a->used
 * unspecified (reset a before decoding again). Never allocates outside a;
 * a too small for the result is "not handled". Any thread (an arena is
 * owned by one thread at a time); the one-time descriptor check is safe to
 * race.
 */
int hg_wire_decode_fast(hg_wire_arena_t *a, const uint8_t *body, size_t len,
                        Hourglass__V1__Envelope **out);

/*
 * The arena's bump allocation (16-byte aligned), without the statistics:
 * NULL when size does not fit. wire.c's allocator counts failures and the
 * high-water mark on top; the fast decoder does not, since a refusal there
 * only sends the frame to protobuf-c, which counts its own.
 */
static inline void *hg_wire__arena_take(hg_wire_arena_t *a, size_t size) {
  size_t at = (a->used + 15u) & ~(size_t)15u;
  if (at > a->cap || size > a->cap - at) return NULL;
  a->used = at + size;
  return a->base + at;
}

#endif /* HOURGLASS_WIRE_FASTDEC_H */
