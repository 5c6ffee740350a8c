/*
 * wire_layout.h - internal: the layout of the hot wire messages, shared by
 * the hand-written encoder (wire_fast.c) and decoder (wire_fastdec.c).
 *
 * One table per handled message, indexed by field number: the value's kind,
 * its offset in the protoc-c struct and the offset of its has_ flag. The
 * tables are written by hand from proto/hourglass.proto and compared once
 * with protoc-c's descriptors (field numbers in increasing order, types,
 * labels, offsets, flags, enum values, struct size; for the Envelope: seq,
 * the handled bodies at the oneof's one offset, and no field outside the
 * oneof). A message whose descriptor no longer matches is left to
 * protobuf-c for good, in both directions.
 */
#ifndef HOURGLASS_WIRE_LAYOUT_H
#define HOURGLASS_WIRE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass.pb-c.h"

/* Value kinds; enums and bools are stored as int by protoc-c. */
enum hg_wire_kind { HG_WK_NONE = 0, HG_WK_U32, HG_WK_U64, HG_WK_I64, HG_WK_BOOL, HG_WK_ENUM };

typedef struct hg_wire_field {
  uint8_t kind;                      /* enum hg_wire_kind; NONE: no such field */
  uint8_t enum_max;                  /* ENUM: declared values are 0..enum_max */
  uint16_t off;                      /* offset of the value */
  int16_t has_off;                   /* offset of has_x; -1 for required */
  const ProtobufCEnumDescriptor *ed; /* ENUM: the enum it must be */
} hg_wire_field_t;

typedef struct hg_wire_msg {
  const ProtobufCMessageDescriptor *desc;
  size_t size;                   /* sizeof the generated struct */
  uint32_t max_field;            /* highest field number */
  uint32_t n_fields;
  uint64_t required;             /* bit n: field n is required */
  const hg_wire_field_t *fields; /* indexed by field number, max_field + 1 entries */
} hg_wire_msg_t;

/*
 * The layout of the Envelope body in oneof member body_case (heartbeat,
 * new_order, cancel, replace or execution_report), or NULL when that member
 * is not handled or when its descriptor, or the Envelope's, no longer
 * matches the tables. The first call per message runs the check; threads
 * may race on it (the verdict is a pure function of constant data). Any
 * thread.
 */
const hg_wire_msg_t *hg_wire__body_layout(uint32_t body_case);

/* 1 when the Envelope's descriptor matches (see above). Any thread. */
int hg_wire__envelope_usable(void);

/*
 * The one-time check, for tests: nonzero if descriptor d has the layout the
 * tables give for the handled message whose generated descriptor is
 * expected (the Envelope or a handled body); 0 if it differs, if d is NULL
 * or if expected is not handled. Pure; any thread.
 */
int hg_wire__layout_ok(const ProtobufCMessageDescriptor *expected, const ProtobufCMessageDescriptor *d);

#endif /* HOURGLASS_WIRE_LAYOUT_H */
