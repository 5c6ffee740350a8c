/*
 * The layout tables of the hot wire messages and their one-time check
 * against protoc-c's descriptors (see wire_layout.h). Each table is indexed
 * by field number; wire_fastdec.c reads into the structs through it and
 * wire_fast.c writes from them through it, so the two directions cannot
 * disagree about a message.
 *
 * Ownership: the tables are constant; the per-message verdicts of the check
 * are the only shared state (process-wide, written at most a few times,
 * with the same value whoever writes them).
 */
#include "wire_layout.h"

#include <stdatomic.h>
#include <stdbool.h>

_Static_assert(sizeof(Hourglass__V1__Side) == sizeof(int), "enum size");
_Static_assert(sizeof(protobuf_c_boolean) == sizeof(int), "bool size");

#define REQ(kind_, type_, member_) \
  { kind_, 0, (uint16_t)offsetof(type_, member_), -1, NULL }
#define OPT(kind_, type_, member_) \
  { kind_, 0, (uint16_t)offsetof(type_, member_), (int16_t)offsetof(type_, has_##member_), NULL }
#define REQ_ENUM(max_, ed_, type_, member_) \
  { HG_WK_ENUM, max_, (uint16_t)offsetof(type_, member_), -1, &ed_ }
#define OPT_ENUM(max_, ed_, type_, member_) \
  { HG_WK_ENUM, max_, (uint16_t)offsetof(type_, member_), \
    (int16_t)offsetof(type_, has_##member_), &ed_ }

typedef Hourglass__V1__NewOrderRequest nor_t;
static const hg_wire_field_t new_order_fields[11] = {
  [1] = REQ(HG_WK_U32, nor_t, instrument_id),
  [2] = REQ(HG_WK_U64, nor_t, client_order_id),
  [3] = REQ_ENUM(1, hourglass__v1__side__descriptor, nor_t, side),
  [4] = REQ_ENUM(1, hourglass__v1__ord_type__descriptor, nor_t, type),
  [5] = REQ_ENUM(3, hourglass__v1__time_in_force__descriptor, nor_t, tif),
  [6] = OPT(HG_WK_I64, nor_t, price),
  [7] = REQ(HG_WK_I64, nor_t, qty),
  [8] = OPT_ENUM(4, hourglass__v1__stp_mode__descriptor, nor_t, stp),
  [9] = OPT(HG_WK_BOOL, nor_t, post_only),
  [10] = OPT(HG_WK_U32, nor_t, smp_group),
};

typedef Hourglass__V1__CancelRequest cxr_t;
static const hg_wire_field_t cancel_fields[3] = {
  [1] = REQ(HG_WK_U32, cxr_t, instrument_id),
  [2] = REQ(HG_WK_U64, cxr_t, order_id),
};

typedef Hourglass__V1__ReplaceRequest rpr_t;
static const hg_wire_field_t replace_fields[5] = {
  [1] = REQ(HG_WK_U32, rpr_t, instrument_id),
  [2] = REQ(HG_WK_U64, rpr_t, order_id),
  [3] = REQ(HG_WK_I64, rpr_t, new_price),
  [4] = REQ(HG_WK_I64, rpr_t, new_qty),
};

static const hg_wire_field_t heartbeat_fields[1] = {{HG_WK_NONE, 0, 0, 0, NULL}};

typedef Hourglass__V1__ExecutionReport er_t;
static const hg_wire_field_t exec_report_fields[26] = {
  [1] = REQ(HG_WK_U32, er_t, exec_type),
  [2] = REQ(HG_WK_U32, er_t, instrument_id),
  [3] = OPT(HG_WK_U64, er_t, order_id),
  [4] = OPT(HG_WK_U64, er_t, client_order_id),
  [5] = OPT(HG_WK_U32, er_t, reason),
  [6] = OPT(HG_WK_U32, er_t, request),
  [7] = OPT_ENUM(1, hourglass__v1__side__descriptor, er_t, side),
  [8] = OPT(HG_WK_I64, er_t, price),
  [9] = OPT(HG_WK_I64, er_t, qty),
  [10] = OPT(HG_WK_I64, er_t, leaves),
  [11] = OPT(HG_WK_BOOL, er_t, maker),
  [12] = OPT(HG_WK_U64, er_t, engine_seq),
  [13] = OPT(HG_WK_U64, er_t, ts),
  [14] = OPT(HG_WK_U64, er_t, ref_seq),
  [15] = OPT(HG_WK_U32, er_t, quote_group),
  [16] = OPT(HG_WK_U32, er_t, account),
  [17] = OPT(HG_WK_BOOL, er_t, drop_copy),
  [18] = OPT(HG_WK_BOOL, er_t, priority_kept),
  [19] = OPT(HG_WK_I64, er_t, risk_equity),
  [20] = OPT(HG_WK_I64, er_t, risk_initial_margin),
  [21] = OPT(HG_WK_I64, er_t, risk_ref_price),
  [22] = OPT(HG_WK_I64, er_t, risk_position),
  [23] = OPT(HG_WK_I64, er_t, risk_low),
  [24] = OPT(HG_WK_I64, er_t, risk_high),
  [25] = OPT(HG_WK_BOOL, er_t, liquidation),
};

/* Indexes of specs[] and verdicts[]; 0 is the Envelope itself. */
enum { M_ENVELOPE, M_HEARTBEAT, M_NEW_ORDER, M_CANCEL, M_REPLACE, M_EXEC_REPORT, M_COUNT };

static const hg_wire_msg_t specs[M_COUNT] = {
  [M_ENVELOPE] = {&hourglass__v1__envelope__descriptor, sizeof(Hourglass__V1__Envelope), 0, 0, 0,
                  NULL},
  [M_HEARTBEAT] = {&hourglass__v1__heartbeat__descriptor, sizeof(Hourglass__V1__Heartbeat), 0, 0,
                   0, heartbeat_fields},
  [M_NEW_ORDER] = {&hourglass__v1__new_order_request__descriptor, sizeof(nor_t), 10, 10,
                   (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4) | (1u << 5) | (1u << 7),
                   new_order_fields},
  [M_CANCEL] = {&hourglass__v1__cancel_request__descriptor, sizeof(cxr_t), 2, 2,
                (1u << 1) | (1u << 2), cancel_fields},
  [M_REPLACE] = {&hourglass__v1__replace_request__descriptor, sizeof(rpr_t), 4, 4,
                 (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4), replace_fields},
  [M_EXEC_REPORT] = {&hourglass__v1__execution_report__descriptor, sizeof(er_t), 25, 25,
                     (1u << 1) | (1u << 2), exec_report_fields},
};

/* The Envelope members handled, by body field number. */
typedef struct body_spec {
  uint32_t id;
  int m; /* index into specs[] */
} body_spec_t;

static const body_spec_t bodies[] = {
  {HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT, M_HEARTBEAT},
  {HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER, M_NEW_ORDER},
  {HOURGLASS__V1__ENVELOPE__BODY_CANCEL, M_CANCEL},
  {HOURGLASS__V1__ENVELOPE__BODY_REPLACE, M_REPLACE},
  {HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT, M_EXEC_REPORT},
};

/* ------------------------------------------------------ descriptor check */

static bool enum_matches(const ProtobufCEnumDescriptor *ed, const hg_wire_field_t *fs) {
  if (ed != fs->ed || ed->magic != PROTOBUF_C__ENUM_DESCRIPTOR_MAGIC) return false;
  if (ed->n_values != (unsigned)fs->enum_max + 1u) return false;
  /* values[] is sorted by value: dense 0..max means values[i] == i. */
  for (unsigned i = 0; i < ed->n_values; i++)
    if (ed->values[i].value != (int)i) return false;
  return true;
}

static bool type_matches(ProtobufCType t, uint8_t kind) {
  switch (kind) {
  case HG_WK_U32: return t == PROTOBUF_C_TYPE_UINT32;
  case HG_WK_U64: return t == PROTOBUF_C_TYPE_UINT64;
  case HG_WK_I64: return t == PROTOBUF_C_TYPE_INT64;
  case HG_WK_BOOL: return t == PROTOBUF_C_TYPE_BOOL;
  case HG_WK_ENUM: return t == PROTOBUF_C_TYPE_ENUM;
  default: return false;
  }
}

static bool body_check(const hg_wire_msg_t *m, const ProtobufCMessageDescriptor *d) {
  if (d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC || d->sizeof_message != m->size ||
      d->n_fields != m->n_fields || d->message_init == NULL)
    return false;
  uint64_t required = 0;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->id == 0 || f->id > m->max_field) return false;
    /* protobuf-c packs in the order of fields[], the encoder in number order */
    if (i > 0 && f->id <= d->fields[i - 1].id) return false;
    const hg_wire_field_t *fs = &m->fields[f->id];
    /* Deprecation changes nothing on the wire; any other flag does. */
    if ((f->flags & ~(uint32_t)PROTOBUF_C_FIELD_FLAG_DEPRECATED) != 0) return false;
    if (!type_matches(f->type, fs->kind) || f->offset != fs->off) return false;
    if (fs->kind == HG_WK_ENUM && !enum_matches(f->descriptor, fs)) return false;
    if (f->label == PROTOBUF_C_LABEL_REQUIRED) {
      if (fs->has_off != -1) return false;
      required |= (uint64_t)1 << f->id;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
      if (fs->has_off < 0 || f->quantifier_offset != (unsigned)fs->has_off) return false;
    } else {
      return false;
    }
  }
  /* n_fields distinct ids all in the table and as many table entries as
   * fields: the two describe the same set. */
  unsigned entries = 0;
  for (unsigned n = 0; n <= m->max_field; n++) entries += m->fields[n].kind != HG_WK_NONE;
  return entries == d->n_fields && required == m->required;
}

static bool envelope_check(const ProtobufCMessageDescriptor *d) {
  if (d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC ||
      d->sizeof_message != sizeof(Hourglass__V1__Envelope) || d->message_init == NULL)
    return false;
  const unsigned case_off = offsetof(Hourglass__V1__Envelope, body_case);
  const unsigned body_off = offsetof(Hourglass__V1__Envelope, new_order);
  bool seq_ok = false;
  unsigned handled = 0;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (i > 0 && f->id <= d->fields[i - 1].id) return false; /* packing order */
    if (f->id == 1) {
      seq_ok = f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type == PROTOBUF_C_TYPE_UINT64 &&
               f->quantifier_offset == offsetof(Hourglass__V1__Envelope, has_seq) &&
               f->offset == offsetof(Hourglass__V1__Envelope, seq) &&
               (f->flags & ~(uint32_t)PROTOBUF_C_FIELD_FLAG_DEPRECATED) == 0;
      if (!seq_ok) return false;
      continue;
    }
    /* Every other field must be a member of the one oneof: then nothing
     * else can be required and a body is stored as one pointer. */
    if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || f->label == PROTOBUF_C_LABEL_REQUIRED ||
        f->quantifier_offset != case_off)
      return false;
    for (size_t k = 0; k < sizeof bodies / sizeof bodies[0]; k++) {
      if (bodies[k].id != f->id) continue;
      if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->offset != body_off ||
          f->descriptor != specs[bodies[k].m].desc)
        return false;
      handled++;
    }
  }
  return seq_ok && handled == sizeof bodies / sizeof bodies[0];
}

/* 0: not checked yet, 1: matches, 2: use protobuf-c. */
static _Atomic int verdicts[M_COUNT];

static bool usable(int m) {
  /* relaxed: the verdict is a pure function of constant descriptors and
   * publishes nothing else; a thread that sees 0 computes the same answer. */
  int v = atomic_load_explicit(&verdicts[m], memory_order_relaxed);
  if (v == 0) {
    const ProtobufCMessageDescriptor *d = specs[m].desc;
    bool ok = m == M_ENVELOPE ? envelope_check(d) : body_check(&specs[m], d);
    v = ok ? 1 : 2;
    /* relaxed: as above. */
    atomic_store_explicit(&verdicts[m], v, memory_order_relaxed);
  }
  return v == 1;
}

int hg_wire__layout_ok(const ProtobufCMessageDescriptor *expected, const ProtobufCMessageDescriptor *d) {
  if (d == NULL) return 0;
  for (int m = 0; m < M_COUNT; m++)
    if (specs[m].desc == expected)
      return m == M_ENVELOPE ? envelope_check(d) : body_check(&specs[m], d);
  return 0;
}

const hg_wire_msg_t *hg_wire__body_layout(uint32_t body_case) {
  if (!usable(M_ENVELOPE)) return NULL;
  for (size_t k = 0; k < sizeof bodies / sizeof bodies[0]; k++)
    if (bodies[k].id == body_case) return usable(bodies[k].m) ? &specs[bodies[k].m] : NULL;
  return NULL;
}

int hg_wire__envelope_usable(void) { return usable(M_ENVELOPE); }
