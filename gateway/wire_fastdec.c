/*
 * The fast decoder for the hot Envelope shapes (see wire_fastdec.h).
 *
 * protobuf-c's generic unpacker looks every field up in the descriptor,
 * collects the scanned fields into a slab, then parses them in a second
 * pass; for a ten-field order that is most of the gateway's decode time.
 * Here each handled message is a small table indexed by field number
 * (value kind, offset of the value, offset of its has_ flag), written by
 * hand from the .proto and checked against protoc-c's descriptor once, and
 * the body is read in a single pass straight into the struct that the
 * message's generated *_init() prepared. Whatever falls outside the plain
 * encoding makes the decoder give up without a trace (arena statistics
 * restored) so that protobuf-c alone decides every odd case and every error.
 *
 * Ownership: the decoded Envelope and its body live in the caller's arena
 * (owned by the thread decoding into it) and are released by its reset; the
 * body pointer stored in the Envelope points into that same arena. The
 * tables are constant; the per-message verdicts of the descriptor check are
 * the only shared state (process-wide, written at most a few times, with
 * the same value whoever writes them).
 */
#include "wire_fastdec.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Enums are stored as int: protoc-c forces them to int size. */
_Static_assert(sizeof(Hourglass__V1__Side) == sizeof(int), "enum size");
_Static_assert(sizeof(protobuf_c_boolean) == sizeof(int), "bool size");

enum kind { K_NONE = 0, K_U32, K_U64, K_I64, K_BOOL, K_ENUM };

typedef struct fspec {
  uint8_t kind;                     /* enum kind; K_NONE: no such field */
  uint8_t enum_max;                 /* K_ENUM: values are 0..enum_max */
  uint16_t off;                     /* offset of the value */
  int16_t has_off;                  /* offset of has_x; -1 for required */
  const ProtobufCEnumDescriptor *ed; /* K_ENUM: the enum it must be */
} fspec_t;

typedef struct mspec {
  const ProtobufCMessageDescriptor *desc;
  size_t size;           /* sizeof the generated struct */
  uint32_t max_field;    /* highest field number */
  uint32_t n_fields;
  uint64_t required;     /* bit n: field n is required */
  const fspec_t *fields; /* indexed by field number, max_field + 1 entries */
} mspec_t;

#define REQ(kind_, type_, member_) \
  { kind_, 0, (uint16_t)offsetof(type_, member_), -1, NULL }
#define OPT(kind_, type_, member_) \
  { kind_, 0, (uint16_t)offsetof(type_, member_), (int16_t)offsetof(type_, has_##member_), NULL }
#define REQ_ENUM(max_, ed_, type_, member_) \
  { K_ENUM, max_, (uint16_t)offsetof(type_, member_), -1, &ed_ }
#define OPT_ENUM(max_, ed_, type_, member_) \
  { K_ENUM, max_, (uint16_t)offsetof(type_, member_), \
    (int16_t)offsetof(type_, has_##member_), &ed_ }

typedef Hourglass__V1__NewOrderRequest nor_t;
static const fspec_t new_order_fields[11] = {
  [1] = REQ(K_U32, nor_t, instrument_id),
  [2] = REQ(K_U64, nor_t, client_order_id),
  [3] = REQ_ENUM(1, hourglass__v1__side__descriptor, nor_t, side),
  [4] = REQ_ENUM(1, hourglass__v1__ord_type__descriptor, nor_t, type),
  [5] = REQ_ENUM(3, hourglass__v1__time_in_force__descriptor, nor_t, tif),
  [6] = OPT(K_I64, nor_t, price),
  [7] = REQ(K_I64, nor_t, qty),
  [8] = OPT_ENUM(4, hourglass__v1__stp_mode__descriptor, nor_t, stp),
  [9] = OPT(K_BOOL, nor_t, post_only),
  [10] = OPT(K_U32, nor_t, smp_group),
};

typedef Hourglass__V1__CancelRequest cxr_t;
static const fspec_t cancel_fields[3] = {
  [1] = REQ(K_U32, cxr_t, instrument_id),
  [2] = REQ(K_U64, cxr_t, order_id),
};

typedef Hourglass__V1__ReplaceRequest rpr_t;
static const fspec_t replace_fields[5] = {
  [1] = REQ(K_U32, rpr_t, instrument_id),
  [2] = REQ(K_U64, rpr_t, order_id),
  [3] = REQ(K_I64, rpr_t, new_price),
  [4] = REQ(K_I64, rpr_t, new_qty),
};

static const fspec_t heartbeat_fields[1] = {{K_NONE, 0, 0, 0, NULL}};

typedef Hourglass__V1__ExecutionReport er_t;
static const fspec_t exec_report_fields[25] = {
  [1] = REQ(K_U32, er_t, exec_type),
  [2] = REQ(K_U32, er_t, instrument_id),
  [3] = OPT(K_U64, er_t, order_id),
  [4] = OPT(K_U64, er_t, client_order_id),
  [5] = OPT(K_U32, er_t, reason),
  [6] = OPT(K_U32, er_t, request),
  [7] = OPT_ENUM(1, hourglass__v1__side__descriptor, er_t, side),
  [8] = OPT(K_I64, er_t, price),
  [9] = OPT(K_I64, er_t, qty),
  [10] = OPT(K_I64, er_t, leaves),
  [11] = OPT(K_BOOL, er_t, maker),
  [12] = OPT(K_U64, er_t, engine_seq),
  [13] = OPT(K_U64, er_t, ts),
  [14] = OPT(K_U64, er_t, ref_seq),
  [15] = OPT(K_U32, er_t, quote_group),
  [16] = OPT(K_U32, er_t, account),
  [17] = OPT(K_BOOL, er_t, drop_copy),
  [18] = OPT(K_BOOL, er_t, priority_kept),
  [19] = OPT(K_I64, er_t, risk_equity),
  [20] = OPT(K_I64, er_t, risk_initial_margin),
  [21] = OPT(K_I64, er_t, risk_ref_price),
  [22] = OPT(K_I64, er_t, risk_position),
  [23] = OPT(K_I64, er_t, risk_low),
  [24] = OPT(K_I64, er_t, risk_high),
};

/* Indexes of specs[] and verdicts[]; 0 is the Envelope itself. */
enum { M_ENVELOPE, M_HEARTBEAT, M_NEW_ORDER, M_CANCEL, M_REPLACE, M_EXEC_REPORT, M_COUNT };

static const mspec_t specs[M_COUNT] = {
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
  [M_EXEC_REPORT] = {&hourglass__v1__execution_report__descriptor, sizeof(er_t), 24, 24,
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

static bool enum_matches(const ProtobufCEnumDescriptor *ed, const fspec_t *fs) {
  if (ed != fs->ed || ed->magic != PROTOBUF_C__ENUM_DESCRIPTOR_MAGIC) return false;
  if (ed->n_values != (unsigned)fs->enum_max + 1u) return false;
  /* values[] is sorted by value: dense 0..max means values[i] == i. */
  for (unsigned i = 0; i < ed->n_values; i++)
    if (ed->values[i].value != (int)i) return false;
  return true;
}

static bool type_matches(ProtobufCType t, uint8_t kind) {
  switch (kind) {
  case K_U32: return t == PROTOBUF_C_TYPE_UINT32;
  case K_U64: return t == PROTOBUF_C_TYPE_UINT64;
  case K_I64: return t == PROTOBUF_C_TYPE_INT64;
  case K_BOOL: return t == PROTOBUF_C_TYPE_BOOL;
  case K_ENUM: return t == PROTOBUF_C_TYPE_ENUM;
  default: return false;
  }
}

static bool body_check(const mspec_t *m, const ProtobufCMessageDescriptor *d) {
  if (d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC || d->sizeof_message != m->size ||
      d->n_fields != m->n_fields || d->message_init == NULL)
    return false;
  uint64_t required = 0;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->id == 0 || f->id > m->max_field) return false;
    const fspec_t *fs = &m->fields[f->id];
    /* Deprecation changes nothing on the wire; any other flag does. */
    if ((f->flags & ~(uint32_t)PROTOBUF_C_FIELD_FLAG_DEPRECATED) != 0) return false;
    if (!type_matches(f->type, fs->kind) || f->offset != fs->off) return false;
    if (fs->kind == K_ENUM && !enum_matches(f->descriptor, fs)) return false;
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
  for (unsigned n = 0; n <= m->max_field; n++) entries += m->fields[n].kind != K_NONE;
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

int hg_wire_decode_fast_layout_ok(const ProtobufCMessageDescriptor *expected,
                                  const ProtobufCMessageDescriptor *d) {
  for (int m = 0; m < M_COUNT; m++)
    if (specs[m].desc == expected)
      return m == M_ENVELOPE ? envelope_check(d) : body_check(&specs[m], d);
  return 0;
}

/* ------------------------------------------------------------- decoding */

/* The arena's bump, without counting a refusal as a failure: a refusal here
 * only sends the frame to protobuf-c, which counts its own. Same 16-byte
 * alignment as wire.c's allocator. */
static void *take(hg_wire_arena_t *a, size_t size) {
  size_t at = (a->used + 15u) & ~(size_t)15u;
  if (at > a->cap || size > a->cap - at) return NULL;
  a->used = at + size;
  return a->base + at;
}

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

static bool decode_body(const mspec_t *m, const uint8_t *p, const uint8_t *end, uint8_t *dst) {
  uint64_t seen = 0;
  while (p < end) {
    uint32_t k = key(&p, end);
    uint32_t num = k >> 3;
    if (k == 0 || (k & 7) != PROTOBUF_C_WIRE_TYPE_VARINT || num > m->max_field) return false;
    const fspec_t *fs = &m->fields[num];
    uint64_t bit = (uint64_t)1 << num;
    if (fs->kind == K_NONE || (seen & bit)) return false;
    seen |= bit;
    uint64_t v;
    if (!varint(&p, end, &v)) return false;
    void *at = dst + fs->off;
    switch (fs->kind) {
    case K_U32:
      if (v > UINT32_MAX) return false; /* protobuf-c would truncate */
      *(uint32_t *)at = (uint32_t)v;
      break;
    case K_U64: *(uint64_t *)at = v; break;
    case K_I64: *(int64_t *)at = (int64_t)v; break;
    case K_BOOL:
      if (v > 1) return false; /* protobuf-c reads any nonzero as true */
      *(protobuf_c_boolean *)at = (protobuf_c_boolean)v;
      break;
    default: /* K_ENUM */
      if (v > fs->enum_max) return false; /* protobuf-c keeps unknown values */
      *(int *)at = (int)v;
      break;
    }
    if (fs->has_off >= 0) *(protobuf_c_boolean *)(void *)(dst + fs->has_off) = 1;
  }
  return (seen & m->required) == m->required;
}

static int body_index(uint32_t id) {
  switch (id) {
  case HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT: return M_HEARTBEAT;
  case HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER: return M_NEW_ORDER;
  case HOURGLASS__V1__ENVELOPE__BODY_CANCEL: return M_CANCEL;
  case HOURGLASS__V1__ENVELOPE__BODY_REPLACE: return M_REPLACE;
  case HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT: return M_EXEC_REPORT;
  default: return -1;
  }
}

int hg_wire_decode_fast(hg_wire_arena_t *a, const uint8_t *body, size_t len,
                        Hourglass__V1__Envelope **out) {
  if (!usable(M_ENVELOPE)) return 0;
  const uint8_t *p = body, *end = body + len;
  Hourglass__V1__Envelope *e = take(a, sizeof *e);
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
    int m = body_index(k >> 3);
    uint64_t n;
    if (m < 0 || !usable(m) || !varint(&p, end, &n) || n > (uint64_t)(end - p)) return 0;
    const mspec_t *ms = &specs[m];
    uint8_t *sub = take(a, ms->size);
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
