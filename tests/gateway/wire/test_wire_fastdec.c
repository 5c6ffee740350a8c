/*
 * The fast Envelope decoder against protobuf-c. One hand-built
 * NewOrderRequest frame checked field by field; then a differential
 * property test: random envelopes of every handled shape, every field set
 * or not at random (driven by the descriptors, so a field added later is
 * covered too), packed by protobuf-c, decoded as packed and after each of a
 * set of mutations (byte flips, truncations, unknown fields, duplicates,
 * reordering, non-minimal varints, wrong wire types, missing required
 * fields, values protobuf-c accepts but the fast path must leave to it).
 * hg_wire_decode, the fast path alone and plain protobuf-c must agree on
 * success, on every field and has_ flag, on the packed bytes, on unknown
 * fields and on body_case; the fast path must take every plain input and
 * must leave every odd one to protobuf-c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/error.h"
#include "hourglass/wire.h"
#include "wire_fastdec.h"
#include "wire_layout.h"

#define ARENA_CAP HG_WIRE_ARENA_SIZE(4096)
static uint8_t arena_a[ARENA_CAP], arena_f[ARENA_CAP], arena_p[ARENA_CAP];

/* ------------------------------------------------------------ hand-built */

static void test_hand_built_new_order(void **state) {
  (void)state;
  /* Envelope{seq 7, new_order{instrument_id 3, client_order_id 300,
   * side SELL, type LIMIT, tif IOC, price -5, qty 10, post_only true}};
   * stp and smp_group absent. */
  static const uint8_t frame[] = {
    0x08, 0x07,             /* seq = 7 */
    0xf2, 0x01, 0x1a,       /* field 30, length 26 */
    0x08, 0x03,             /* instrument_id = 3 */
    0x10, 0xac, 0x02,       /* client_order_id = 300 */
    0x18, 0x01,             /* side = SELL */
    0x20, 0x00,             /* type = LIMIT */
    0x28, 0x02,             /* tif = IOC */
    0x30, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* price = -5 */
    0x38, 0x0a,             /* qty = 10 */
    0x48, 0x01,             /* post_only = true */
  };
  hg_wire_arena_t a;
  hg_wire_arena_init(&a, arena_f, sizeof arena_f);
  Hourglass__V1__Envelope *e = NULL;
  assert_true(hg_wire_decode_fast(&a, frame, sizeof frame, &e));
  for (int pass = 0; pass < 2; pass++) {
    assert_non_null(e);
    assert_ptr_equal(e->base.descriptor, &hourglass__v1__envelope__descriptor);
    assert_int_equal(e->base.n_unknown_fields, 0);
    assert_true(e->has_seq);
    assert_int_equal(e->seq, 7);
    assert_int_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER);
    const Hourglass__V1__NewOrderRequest *o = e->new_order;
    assert_ptr_equal(o->base.descriptor, &hourglass__v1__new_order_request__descriptor);
    assert_int_equal(o->base.n_unknown_fields, 0);
    assert_null(o->base.unknown_fields);
    assert_int_equal(o->instrument_id, 3);
    assert_int_equal(o->client_order_id, 300);
    assert_int_equal(o->side, HOURGLASS__V1__SIDE__SIDE_SELL);
    assert_int_equal(o->type, HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT);
    assert_int_equal(o->tif, HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC);
    assert_true(o->has_price);
    assert_true(o->price == -5);
    assert_int_equal(o->qty, 10);
    assert_false(o->has_stp);
    assert_int_equal(o->stp, HOURGLASS__V1__STP_MODE__STP_DEFAULT);
    assert_true(o->has_post_only);
    assert_int_equal(o->post_only, 1);
    assert_false(o->has_smp_group);
    assert_int_equal(o->smp_group, 0);
    /* The same through the public entry. */
    assert_int_equal(hg_wire_decode(&a, frame, sizeof frame, &e), 0);
  }
  /* The arena's statistics count what it took. */
  assert_true(a.used >= sizeof(Hourglass__V1__Envelope) + sizeof(Hourglass__V1__NewOrderRequest));
  assert_int_equal(a.high_water, a.used);
  assert_int_equal(a.failures, 0);
}

/* Too small an arena: the fast path leaves the frame to protobuf-c, which
 * fails and counts the failure exactly as before. */
static void test_small_arena_falls_back(void **state) {
  (void)state;
  static const uint8_t frame[] = {0x08, 0x01, 0xfa, 0x01, 0x04, 0x08, 0x02, 0x10, 0x03};
  uint8_t small[sizeof(Hourglass__V1__Envelope) + 8];
  hg_wire_arena_t a;
  hg_wire_arena_init(&a, small, sizeof small);
  Hourglass__V1__Envelope *e = NULL;
  assert_false(hg_wire_decode_fast(&a, frame, sizeof frame, &e));
  assert_null(e);
  assert_int_equal(a.failures, 0);
  assert_int_equal(a.high_water, 0);
  assert_int_equal(hg_wire_decode(&a, frame, sizeof frame, &e), HG_EPARSE);
  assert_int_equal(a.failures, 1);
  /* With room it decodes: Envelope{seq 1, cancel{2, 3}}. */
  hg_wire_arena_init(&a, arena_f, sizeof arena_f);
  assert_true(hg_wire_decode_fast(&a, frame, sizeof frame, &e));
  assert_int_equal(e->body_case, HOURGLASS__V1__ENVELOPE__BODY_CANCEL);
  assert_int_equal(e->cancel->instrument_id, 2);
  assert_int_equal(e->cancel->order_id, 3);
}

/* ------------------------------------------------------ random envelopes */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

static uint64_t below(uint64_t n) { return rnd() % n; }

/* Values of every width, with the edges more likely than uniform. */
static uint64_t rnd_value(void) {
  switch (below(6)) {
  case 0: return 0;
  case 1: return below(128);
  case 2: return below(1u << 14);
  case 3: return rnd() & 0xffffffffu;
  case 4: return (uint64_t) - (int64_t)(1 + below(1000));
  default: return rnd();
  }
}

static void rnd_field(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
  uint8_t *base = (uint8_t *)m;
  void *at = base + f->offset;
  switch (f->type) {
  case PROTOBUF_C_TYPE_UINT32:
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_SFIXED32: *(uint32_t *)at = (uint32_t)rnd_value(); break;
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_SFIXED64: *(uint64_t *)at = rnd_value(); break;
  case PROTOBUF_C_TYPE_BOOL: *(protobuf_c_boolean *)at = (protobuf_c_boolean)below(2); break;
  case PROTOBUF_C_TYPE_ENUM: {
    const ProtobufCEnumDescriptor *ed = f->descriptor;
    *(int *)at = ed->values[below(ed->n_values)].value;
    break;
  }
  default: fail_msg("field %s: type %d is not randomised by this test", f->name, (int)f->type);
  }
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
    *(protobuf_c_boolean *)(void *)(base + f->quantifier_offset) = 1;
}

static const struct {
  uint32_t id;
  const ProtobufCMessageDescriptor *d;
} shapes[] = {
  {HOURGLASS__V1__ENVELOPE__BODY_HEARTBEAT, &hourglass__v1__heartbeat__descriptor},
  {HOURGLASS__V1__ENVELOPE__BODY_NEW_ORDER, &hourglass__v1__new_order_request__descriptor},
  {HOURGLASS__V1__ENVELOPE__BODY_CANCEL, &hourglass__v1__cancel_request__descriptor},
  {HOURGLASS__V1__ENVELOPE__BODY_REPLACE, &hourglass__v1__replace_request__descriptor},
  {HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT,
   &hourglass__v1__execution_report__descriptor},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* Packs a random envelope of shape k into out; returns its length. */
static size_t rnd_envelope(size_t k, uint8_t *out, size_t cap) {
  const ProtobufCMessageDescriptor *d = shapes[k].d;
  _Alignas(16) uint8_t body[1024];
  assert_true(d->sizeof_message <= sizeof body);
  ProtobufCMessage *m = (ProtobufCMessage *)(void *)body;
  d->message_init(m);
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->label == PROTOBUF_C_LABEL_REQUIRED || below(2)) rnd_field(m, f);
  }
  Hourglass__V1__Envelope env = HOURGLASS__V1__ENVELOPE__INIT;
  if (below(5) != 0) {
    env.has_seq = 1;
    env.seq = rnd_value();
  }
  env.body_case = (Hourglass__V1__Envelope__BodyCase)shapes[k].id;
  env.new_order = (Hourglass__V1__NewOrderRequest *)(void *)m;
  size_t n = protobuf_c_message_get_packed_size(&env.base);
  assert_true(n <= cap);
  assert_int_equal(protobuf_c_message_pack(&env.base, out), n);
  return n;
}

/* ------------------------------------------------------------ comparison */

static size_t scalar_size(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return 8;
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES:
  case PROTOBUF_C_TYPE_MESSAGE: return 0;
  default: return 4;
  }
}

/* Every scalar field and every has_/case word equal, nested bodies too. */
static void assert_same_fields(const ProtobufCMessage *x, const ProtobufCMessage *y) {
  assert_ptr_equal(x->descriptor, y->descriptor);
  assert_int_equal(x->n_unknown_fields, y->n_unknown_fields);
  const ProtobufCMessageDescriptor *d = x->descriptor;
  const uint8_t *bx = (const uint8_t *)x, *by = (const uint8_t *)y;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->label == PROTOBUF_C_LABEL_REPEATED) continue;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      uint32_t cx = *(const uint32_t *)(const void *)(bx + f->quantifier_offset);
      uint32_t cy = *(const uint32_t *)(const void *)(by + f->quantifier_offset);
      assert_int_equal(cx, cy);
      if (cx != f->id) continue;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && scalar_size(f->type) != 0) {
      assert_int_equal(*(const int *)(const void *)(bx + f->quantifier_offset),
                       *(const int *)(const void *)(by + f->quantifier_offset));
    }
    size_t sz = scalar_size(f->type);
    if (sz != 0) {
      assert_memory_equal(bx + f->offset, by + f->offset, sz);
    } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
      const ProtobufCMessage *sx = *(ProtobufCMessage *const *)(const void *)(bx + f->offset);
      const ProtobufCMessage *sy = *(ProtobufCMessage *const *)(const void *)(by + f->offset);
      assert_true((sx == NULL) == (sy == NULL));
      if (sx != NULL) assert_same_fields(sx, sy);
    }
  }
}

static uint8_t pk1[8192], pk2[8192];

static void assert_same(const Hourglass__V1__Envelope *x, const Hourglass__V1__Envelope *y) {
  assert_int_equal(x->body_case, y->body_case);
  assert_int_equal(hg_wire_has_unknown(&x->base), hg_wire_has_unknown(&y->base));
  size_t n1 = protobuf_c_message_get_packed_size(&x->base);
  size_t n2 = protobuf_c_message_get_packed_size(&y->base);
  assert_int_equal(n1, n2);
  assert_true(n1 <= sizeof pk1);
  assert_int_equal(protobuf_c_message_pack(&x->base, pk1), n1);
  assert_int_equal(protobuf_c_message_pack(&y->base, pk2), n2);
  assert_memory_equal(pk1, pk2, n1);
  assert_same_fields(&x->base, &y->base);
}

enum expect { ANY, HANDLED, FALLBACK };

static struct {
  unsigned handled, fell_back, pb_failed;
} tally;

/* Decodes buf both ways (and through hg_wire_decode) and checks they agree. */
static void check(const uint8_t *buf, size_t len, enum expect ex) {
  hg_wire_arena_t aa, af, ap;
  hg_wire_arena_init(&aa, arena_a, sizeof arena_a);
  hg_wire_arena_init(&af, arena_f, sizeof arena_f);
  hg_wire_arena_init(&ap, arena_p, sizeof arena_p);
  Hourglass__V1__Envelope *ea = NULL, *ef = NULL;
  int ra = hg_wire_decode(&aa, buf, len, &ea);
  int handled = hg_wire_decode_fast(&af, buf, len, &ef);
  Hourglass__V1__Envelope *ep = hourglass__v1__envelope__unpack(&ap.allocator, len, buf);
  assert_int_equal(ra == 0, ep != NULL);
  if (ex == HANDLED) assert_true(handled);
  if (ex == FALLBACK) assert_false(handled);
  if (handled) {
    tally.handled++;
    assert_non_null(ep); /* never accept what protobuf-c refuses */
    assert_same(ef, ep);
  } else {
    tally.fell_back++;
    assert_null(ef);
  }
  if (ep == NULL) tally.pb_failed++;
  else assert_same(ea, ep);
}

/* ------------------------------------------------- structure for mutation */

typedef struct fld {
  uint8_t b[24]; /* key then value, as on the wire */
  size_t n;
  size_t klen;   /* key bytes */
  uint32_t num;
  uint32_t wt;
} fld_t;

/* An Envelope of a handled shape taken apart: top-level varint fields,
 * the body (its key and the fields inside it) placed among them. */
typedef struct shape {
  fld_t top[8];
  size_t ntop;
  size_t body_at;            /* the body goes before top[body_at] */
  uint8_t body_key[4];
  size_t body_klen;
  int len_extra;             /* extra bytes in the body's length varint */
  int body_twice;            /* the body field written twice */
  fld_t in[64];
  size_t nin;
} shape_t;

static size_t read_varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (size_t i = 0; i < 10 && p + i < end; i++) {
    r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) {
      *v = r;
      return i + 1;
    }
  }
  fail_msg("bad varint in a canonical encoding");
  return 0;
}

static void take_apart(const uint8_t *buf, size_t len, shape_t *s) {
  memset(s, 0, sizeof *s);
  const uint8_t *p = buf, *end = buf + len;
  while (p < end) {
    uint64_t k = 0;
    size_t kl = read_varint(p, end, &k);
    if ((k & 7) == 2) {
      s->body_at = s->ntop;
      memcpy(s->body_key, p, kl);
      s->body_klen = kl;
      p += kl;
      uint64_t n = 0;
      p += read_varint(p, end, &n);
      const uint8_t *ie = p + n;
      while (p < ie) {
        fld_t *f = &s->in[s->nin++];
        uint64_t ik = 0, v = 0;
        f->klen = read_varint(p, ie, &ik);
        f->n = f->klen + read_varint(p + f->klen, ie, &v);
        memcpy(f->b, p, f->n);
        f->num = (uint32_t)(ik >> 3);
        f->wt = (uint32_t)(ik & 7);
        p += f->n;
      }
      continue;
    }
    fld_t *f = &s->top[s->ntop++];
    uint64_t v;
    f->klen = kl;
    f->n = kl + read_varint(p + kl, end, &v);
    memcpy(f->b, p, f->n);
    f->num = (uint32_t)(k >> 3);
    f->wt = (uint32_t)(k & 7);
    p += f->n;
  }
}

static size_t put_together(const shape_t *s, uint8_t *out) {
  uint8_t inner[1024];
  size_t ni = 0;
  for (size_t i = 0; i < s->nin; i++) {
    memcpy(inner + ni, s->in[i].b, s->in[i].n);
    ni += s->in[i].n;
  }
  size_t n = 0;
  for (size_t t = 0; t <= s->ntop; t++) {
    if (t == s->body_at) {
      for (int rep = 0; rep <= s->body_twice; rep++) {
        memcpy(out + n, s->body_key, s->body_klen);
        n += s->body_klen;
        size_t ln = hg_wire_varint_encode(ni, out + n);
        if (s->len_extra) { /* the same length, one byte longer */
          out[n + ln - 1] |= 0x80;
          out[n + ln++] = 0x00;
        }
        n += ln;
        memcpy(out + n, inner, ni);
        n += ni;
      }
    }
    if (t < s->ntop) {
      memcpy(out + n, s->top[t].b, s->top[t].n);
      n += s->top[t].n;
    }
  }
  return n;
}

static fld_t make_field(uint32_t num, uint32_t wt, const uint8_t *val, size_t vlen) {
  fld_t f;
  memset(&f, 0, sizeof f);
  f.klen = hg_wire_varint_encode(((uint64_t)num << 3) | wt, f.b);
  memcpy(f.b + f.klen, val, vlen);
  f.n = f.klen + vlen;
  f.num = num;
  f.wt = wt;
  return f;
}

static fld_t varint_field(uint32_t num, uint64_t v) {
  uint8_t b[10];
  size_t n = hg_wire_varint_encode(v, b);
  return make_field(num, 0, b, n);
}

static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *d, uint32_t n) {
  return protobuf_c_message_descriptor_get_field(d, n);
}

enum mutation {
  MU_FLIP, MU_TRUNCATE, MU_UNKNOWN_TOP, MU_UNKNOWN_INNER, MU_DUPLICATE, MU_REORDER,
  MU_NONMINIMAL, MU_WIRE_TYPE, MU_MISSING, MU_BAD_VALUE, MU_LONG_VARINT, MU_TWO_BODIES,
  MU_COUNT
};

static unsigned per_mutation[MU_COUNT];

static void shuffle(fld_t *f, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = below(i);
    fld_t t = f[i - 1];
    f[i - 1] = f[j];
    f[j] = t;
  }
}

/* Applies mutation mu to the canonical buf of shape k; checks the result. */
static void mutate_and_check(const uint8_t *buf, size_t len, size_t k, enum mutation mu) {
  static uint8_t out[4096];
  const ProtobufCMessageDescriptor *d = shapes[k].d;
  shape_t s;
  take_apart(buf, len, &s);
  enum expect ex = FALLBACK;
  size_t n = 0;
  switch (mu) {
  case MU_FLIP:
    memcpy(out, buf, len);
    out[below(len)] ^= (uint8_t)(1 + below(255));
    n = len;
    ex = ANY;
    break;
  case MU_TRUNCATE:
    n = below(len);
    memcpy(out, buf, n);
    break;
  case MU_UNKNOWN_TOP: {
    /* An undefined number, or a defined one outside the handled shapes. */
    static const uint32_t nums[] = {2, 9, 100, 1000, 2047, 4096, 13, 20};
    uint8_t v[4] = {0x01, 0x00, 0x00, 0x00};
    uint32_t num = nums[below(sizeof nums / sizeof nums[0])];
    uint32_t wt = num == 13 || num == 20 ? 2 : (uint32_t)(below(2) ? 0 : 5);
    fld_t f = wt == 2 ? make_field(num, 2, (const uint8_t[]){0x00}, 1)
                      : make_field(num, wt, v, wt == 0 ? 1 : 4);
    s.top[s.ntop] = f;
    size_t at = below(s.ntop + 1);
    fld_t t = s.top[at];
    s.top[at] = s.top[s.ntop];
    s.top[s.ntop++] = t;
    n = put_together(&s, out);
    break;
  }
  case MU_UNKNOWN_INNER: {
    uint32_t last = d->n_fields ? d->fields[d->n_fields - 1].id : 0;
    uint32_t num = last + 1 + (uint32_t)below(3);
    if (below(2)) num = 99 + (uint32_t)below(2000);
    s.in[s.nin++] = varint_field(num, rnd_value());
    shuffle(s.in, s.nin);
    n = put_together(&s, out);
    break;
  }
  case MU_DUPLICATE:
    if (s.nin > 0 && (s.ntop == 0 || below(3))) {
      s.in[s.nin] = s.in[below(s.nin)];
      if (below(2)) { /* a different value the second time */
        fld_t *f = &s.in[s.nin];
        const ProtobufCFieldDescriptor *fd = field_of(d, f->num);
        uint64_t v = fd->type == PROTOBUF_C_TYPE_BOOL ? below(2)
                     : fd->type == PROTOBUF_C_TYPE_ENUM
                       ? (uint64_t)((const ProtobufCEnumDescriptor *)fd->descriptor)->values[0].value
                       : rnd_value() & 0xffff;
        *f = varint_field(f->num, v);
      }
      s.nin++;
      shuffle(s.in, s.nin);
    } else if (s.ntop > 0) {
      s.top[s.ntop++] = s.top[0];
    } else {
      s.body_twice = 1;
    }
    n = put_together(&s, out);
    break;
  case MU_REORDER:
    shuffle(s.in, s.nin);
    s.body_at = below(s.ntop + 1);
    n = put_together(&s, out);
    ex = HANDLED;
    break;
  case MU_NONMINIMAL: {
    /* Value or key of one field, or the body's length, one byte longer. */
    size_t pick = below(s.nin + s.ntop + 1);
    if (pick == s.nin + s.ntop) {
      s.len_extra = 1;
    } else {
      fld_t *f = pick < s.nin ? &s.in[pick] : &s.top[pick - s.nin];
      if (below(2) && f->n < 20 && f->n - f->klen < 10) {
        f->b[f->n - 1] |= 0x80;
        f->b[f->n++] = 0x00;
      } else {
        memmove(f->b + f->klen + 1, f->b + f->klen, f->n - f->klen);
        f->b[f->klen - 1] |= 0x80;
        f->b[f->klen] = 0x00;
        f->klen++;
        f->n++;
      }
    }
    n = put_together(&s, out);
    break;
  }
  case MU_WIRE_TYPE: {
    size_t pick = below(s.nin + s.ntop + 1);
    uint32_t wt = (uint32_t)(1 + below(5)); /* 1..5: never the varint type */
    if (pick == s.nin + s.ntop) {
      s.body_key[0] = (uint8_t)((s.body_key[0] & ~7u) | (wt == 2 ? 0u : wt));
    } else {
      fld_t *f = pick < s.nin ? &s.in[pick] : &s.top[pick - s.nin];
      f->b[0] = (uint8_t)((f->b[0] & ~7u) | wt);
    }
    n = put_together(&s, out);
    break;
  }
  case MU_MISSING: {
    size_t req[64], nreq = 0;
    for (size_t i = 0; i < s.nin; i++)
      if (field_of(d, s.in[i].num)->label == PROTOBUF_C_LABEL_REQUIRED) req[nreq++] = i;
    if (nreq == 0) return; /* nothing required in this shape */
    size_t i = req[below(nreq)];
    memmove(&s.in[i], &s.in[i + 1], (s.nin - i - 1) * sizeof s.in[0]);
    s.nin--;
    n = put_together(&s, out);
    break;
  }
  case MU_BAD_VALUE: {
    /* Values protobuf-c takes in its own way: enums outside the enum,
     * uint32 above 2^32-1 (truncated), bools other than 0 and 1. */
    size_t cand[64], nc = 0;
    for (size_t i = 0; i < s.nin; i++) {
      ProtobufCType t = field_of(d, s.in[i].num)->type;
      if (t == PROTOBUF_C_TYPE_ENUM || t == PROTOBUF_C_TYPE_UINT32 || t == PROTOBUF_C_TYPE_BOOL)
        cand[nc++] = i;
    }
    if (nc == 0) return;
    fld_t *f = &s.in[cand[below(nc)]];
    const ProtobufCFieldDescriptor *fd = field_of(d, f->num);
    uint64_t v;
    if (fd->type == PROTOBUF_C_TYPE_ENUM)
      v = below(2) ? (uint64_t)(int64_t) - (int64_t)(1 + below(3)) : 5 + below(100);
    else if (fd->type == PROTOBUF_C_TYPE_UINT32)
      v = ((uint64_t)1 << 32) + below(1u << 20) + (below(2) ? 0 : rnd() << 33);
    else
      v = 2 + below(200);
    *f = varint_field(f->num, v);
    n = put_together(&s, out);
    break;
  }
  case MU_LONG_VARINT: {
    /* A 10-byte varint whose last byte carries more than bit 63. */
    if (s.nin + s.ntop == 0) return;
    size_t pick = below(s.nin + s.ntop);
    fld_t *f = pick < s.nin ? &s.in[pick] : &s.top[pick - s.nin];
    uint8_t v[10];
    memset(v, 0xff, 9);
    v[9] = (uint8_t)(2 + below(126));
    *f = make_field(f->num, 0, v, 10);
    n = put_together(&s, out);
    break;
  }
  case MU_TWO_BODIES:
    s.body_twice = 1;
    n = put_together(&s, out);
    break;
  default: fail();
  }
  per_mutation[mu]++;
  check(out, n, ex);
}

static void test_differential(void **state) {
  (void)state;
  static uint8_t buf[4096];
  memset(&tally, 0, sizeof tally);
  memset(per_mutation, 0, sizeof per_mutation);
  unsigned per_shape[N_SHAPES] = {0};
  const unsigned rounds = 10000;
  for (unsigned r = 0; r < rounds; r++) {
    size_t k = below(N_SHAPES);
    size_t len = rnd_envelope(k, buf, sizeof buf);
    check(buf, len, HANDLED);
    per_shape[k]++;
    for (int mu = 0; mu < MU_COUNT; mu++) mutate_and_check(buf, len, k, (enum mutation)mu);
  }
  for (size_t k = 0; k < N_SHAPES; k++) assert_true(per_shape[k] > rounds / N_SHAPES / 2);
  for (int mu = 0; mu < MU_COUNT; mu++) assert_true(per_mutation[mu] > rounds / 8);
  /* Both outcomes of protobuf-c occurred, and odd inputs it accepts. */
  assert_true(tally.pb_failed > rounds);
  assert_true(tally.fell_back > tally.pb_failed);
  print_message("handled %u, fell back %u (protobuf-c refused %u)\n", tally.handled,
                tally.fell_back, tally.pb_failed);
}

/* The cases protobuf-c accepts but the fast path leaves to it, by hand. */
static void test_odd_but_valid(void **state) {
  (void)state;
  static const struct {
    uint8_t b[24];
    size_t n;
  } cases[] = {
    /* heartbeat written twice (protobuf-c merges) */
    {{0x62, 0x00, 0x62, 0x00}, 4},
    /* seq twice (last wins) */
    {{0x08, 0x01, 0x08, 0x02, 0x62, 0x00}, 6},
    /* seq non-minimal */
    {{0x08, 0x81, 0x00, 0x62, 0x00}, 5},
    /* cancel with instrument_id 2^32 + 1 (truncated by protobuf-c) */
    {{0xfa, 0x01, 0x08, 0x08, 0x81, 0x80, 0x80, 0x80, 0x10, 0x10, 0x03}, 11},
    /* new order, side = 7 (outside the enum: kept by protobuf-c) */
    {{0xf2, 0x01, 0x0c, 0x08, 0x01, 0x10, 0x01, 0x18, 0x07, 0x20, 0x00, 0x28, 0x00, 0x38, 0x01},
     15},
    /* execution report, maker = 2 */
    {{0x82, 0x05, 0x06, 0x08, 0x01, 0x10, 0x01, 0x58, 0x02}, 9},
    /* seq only: no body */
    {{0x08, 0x05}, 2},
    /* heartbeat then cancel: the second body replaces the first */
    {{0x62, 0x00, 0xfa, 0x01, 0x04, 0x08, 0x01, 0x10, 0x01}, 9},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hg_wire_arena_t ap;
    hg_wire_arena_init(&ap, arena_p, sizeof arena_p);
    assert_non_null(hourglass__v1__envelope__unpack(&ap.allocator, cases[i].n, cases[i].b));
    check(cases[i].b, cases[i].n, FALLBACK);
  }
}

/* ------------------------------------------------------ descriptor guard */

static ProtobufCFieldDescriptor fields_copy[64];
static ProtobufCMessageDescriptor desc_copy;

/* A copy of d (fields too) to doctor. */
static ProtobufCMessageDescriptor *copy_of(const ProtobufCMessageDescriptor *d) {
  assert_true(d->n_fields < 63);
  if (d->n_fields != 0) memcpy(fields_copy, d->fields, d->n_fields * sizeof d->fields[0]);
  desc_copy = *d;
  desc_copy.fields = fields_copy;
  return &desc_copy;
}

static ProtobufCFieldDescriptor *field_in_copy(uint32_t id) {
  for (unsigned i = 0; i < desc_copy.n_fields; i++)
    if (fields_copy[i].id == id) return &fields_copy[i];
  fail_msg("no field %u", id);
  return NULL;
}

static void test_layout_guard(void **state) {
  (void)state;
  const ProtobufCMessageDescriptor *no = &hourglass__v1__new_order_request__descriptor;
  const ProtobufCMessageDescriptor *env = &hourglass__v1__envelope__descriptor;
  const ProtobufCMessageDescriptor *er = &hourglass__v1__execution_report__descriptor;
  const ProtobufCMessageDescriptor *hb = &hourglass__v1__heartbeat__descriptor;
  /* The generated descriptors match, copied ones too. */
  for (size_t k = 0; k < N_SHAPES; k++) {
    assert_true(hg_wire__layout_ok(shapes[k].d, shapes[k].d));
    assert_true(hg_wire__layout_ok(shapes[k].d, copy_of(shapes[k].d)));
  }
  assert_true(hg_wire__layout_ok(env, env));
  assert_true(hg_wire__layout_ok(env, copy_of(env)));
  /* Not a handled message, or the wrong one. */
  assert_false(hg_wire__layout_ok(&hourglass__v1__login__descriptor,
                                             &hourglass__v1__login__descriptor));
  assert_false(hg_wire__layout_ok(no, &hourglass__v1__cancel_request__descriptor));

  /* An optional field made required. */
  copy_of(no);
  field_in_copy(8)->label = PROTOBUF_C_LABEL_REQUIRED;
  assert_false(hg_wire__layout_ok(no, &desc_copy));
  /* A required field made optional. */
  copy_of(no);
  field_in_copy(7)->label = PROTOBUF_C_LABEL_OPTIONAL;
  assert_false(hg_wire__layout_ok(no, &desc_copy));
  /* A type changed (int64 to sint64: another encoding of the same C type). */
  copy_of(no);
  field_in_copy(6)->type = PROTOBUF_C_TYPE_SINT64;
  assert_false(hg_wire__layout_ok(no, &desc_copy));
  /* A field renumbered. */
  copy_of(er);
  field_in_copy(24)->id = 25;
  assert_false(hg_wire__layout_ok(er, &desc_copy));
  /* A field added. */
  copy_of(no);
  fields_copy[desc_copy.n_fields] = fields_copy[desc_copy.n_fields - 1];
  fields_copy[desc_copy.n_fields].id = 11;
  desc_copy.n_fields++;
  assert_false(hg_wire__layout_ok(no, &desc_copy));
  /* A field added to the empty Heartbeat. */
  copy_of(hb);
  fields_copy[0] = no->fields[0];
  desc_copy.n_fields = 1;
  assert_false(hg_wire__layout_ok(hb, &desc_copy));
  /* Packed flag set. */
  copy_of(no);
  field_in_copy(1)->flags |= PROTOBUF_C_FIELD_FLAG_PACKED;
  assert_false(hg_wire__layout_ok(no, &desc_copy));
  /* An enum with a value more than the decoder knows. */
  static ProtobufCEnumDescriptor side;
  side = hourglass__v1__side__descriptor;
  side.n_values++;
  copy_of(no);
  field_in_copy(3)->descriptor = &side;
  assert_false(hg_wire__layout_ok(no, &desc_copy));
  /* Envelope: seq's type changed; a member moved out of the oneof; a
   * handled body of another message type. */
  copy_of(env);
  field_in_copy(1)->type = PROTOBUF_C_TYPE_INT64;
  assert_false(hg_wire__layout_ok(env, &desc_copy));
  copy_of(env);
  field_in_copy(10)->flags &= ~(uint32_t)PROTOBUF_C_FIELD_FLAG_ONEOF;
  assert_false(hg_wire__layout_ok(env, &desc_copy));
  copy_of(env);
  field_in_copy(30)->descriptor = &hourglass__v1__cancel_request__descriptor;
  assert_false(hg_wire__layout_ok(env, &desc_copy));
  copy_of(env);
  field_in_copy(10)->label = PROTOBUF_C_LABEL_REQUIRED;
  assert_false(hg_wire__layout_ok(env, &desc_copy));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_hand_built_new_order),
    cmocka_unit_test(test_small_arena_falls_back),
    cmocka_unit_test(test_odd_but_valid),
    cmocka_unit_test(test_differential),
    cmocka_unit_test(test_layout_guard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
