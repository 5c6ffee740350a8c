/*
 * test_command_fast: the fast path of hg_command_decode() against the
 * protobuf-c path (hg_command__decode_full) over random commands of every
 * kind it handles, the same messages mutated (flipped bytes, truncation,
 * inserted bytes, repeated and unknown fields, long varints), and a few
 * hand-written wire messages whose decoding is known. And the fast path of
 * hg_command_encode() against protobuf-c (hg_command__encode_full): same
 * bytes and results over random order commands and every capacity edge,
 * round trips, hand-written encodings, and the schema check that guards it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "command_internal.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"
#include "hourglass.pb-c.h"

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Values around the edges of each field's range as well as ordinary ones. */
static uint64_t any64(void) {
  switch (next() % 6) {
  case 0: return 0;
  case 1: return next() % 10;
  case 2: return UINT64_MAX - next() % 3;
  case 3: return (uint64_t)INT64_MAX + next() % 3 - 1;
  case 4: return next() % 100000;
  default: return next();
  }
}

static uint32_t any32(void) { return (uint32_t)(next() % 3 == 0 ? any64() : next() % 300); }

static uint8_t small_enum(void) { return (uint8_t)(next() % 7); } /* some out of range */

static void random_command(hg_command_t *c) {
  memset(c, 0, sizeof *c);
  c->seq = next() % 50 == 0 ? 0 : any64();
  c->ts = any64();
  switch (next() % 9) {
  case 0:
  case 1: {
    hg_cmd_new_order_t *o = &c->u.new_order;
    c->type = HG_COMMAND_NEW_ORDER;
    o->instrument_id = any32();
    o->account = any32();
    o->client_order_id = any64();
    o->smp_group = next() % 2 ? any32() : 0;
    o->price = (int64_t)any64();
    o->qty = (int64_t)any64();
    o->side = small_enum() % 3;
    o->type = small_enum() % 3;
    o->tif = small_enum() % 5;
    o->stp = small_enum();
    o->post_only = (uint8_t)(next() % 3);
    o->session_scoped = (uint8_t)(next() % 3);
    break;
  }
  case 2:
    c->type = HG_COMMAND_CANCEL;
    c->u.cancel.instrument_id = any32();
    c->u.cancel.account = any32();
    c->u.cancel.order_id = any64();
    break;
  case 3:
    c->type = HG_COMMAND_REPLACE;
    c->u.replace.instrument_id = any32();
    c->u.replace.account = any32();
    c->u.replace.order_id = any64();
    c->u.replace.new_price = (int64_t)any64();
    c->u.replace.new_qty = (int64_t)any64();
    break;
  case 4:
    c->type = HG_COMMAND_MASS_CANCEL;
    c->u.mass_cancel.instrument_id = next() % 2 ? any32() : 0;
    c->u.mass_cancel.account = any32();
    c->u.mass_cancel.sides = small_enum() % 4;
    break;
  case 5:
  case 6:
    c->type = next() % 2 ? HG_COMMAND_DEPOSIT : HG_COMMAND_WITHDRAW;
    c->u.cash.account = any32();
    c->u.cash.amount = (int64_t)any64();
    break;
  case 7:
    c->type = HG_COMMAND_DAILY_SETTLEMENT;
    c->u.daily.day = next() % 4 == 0 ? (int32_t)any64() : (int32_t)(next() % 40000);
    break;
  default: /* a command the fast path leaves alone */
    c->type = HG_COMMAND_ADD_ACCOUNT;
    c->u.add_account.account = any32();
    c->u.add_account.firm = any32();
    break;
  }
}

/* The bytes of a decoded command that hg_command__decode_prefix promises:
 * the header and the member of u its type selects (everything for types
 * outside the fast path, which it decodes in full). */
static size_t promised_bytes(const hg_command_t *c) {
  size_t h = offsetof(hg_command_t, u);
  switch (c->type) {
  case HG_COMMAND_NEW_ORDER: return h + sizeof c->u.new_order;
  case HG_COMMAND_CANCEL: return h + sizeof c->u.cancel;
  case HG_COMMAND_REPLACE: return h + sizeof c->u.replace;
  case HG_COMMAND_MASS_CANCEL: return h + sizeof c->u.mass_cancel;
  case HG_COMMAND_DEPOSIT:
  case HG_COMMAND_WITHDRAW: return h + sizeof c->u.cash;
  case HG_COMMAND_DAILY_SETTLEMENT: return h + sizeof c->u.daily;
  default: return sizeof *c;
  }
}

/* Both decoders on the same bytes: same result, same struct, byte for byte;
 * and the replay's decoder, over a dirty struct, agrees on what it promises. */
static int check_same(const uint8_t *buf, size_t len) {
  hg_command_t a, b, c;
  memset(&a, 0xa5, sizeof a);
  memset(&b, 0x5a, sizeof b);
  memset(&c, 0x3c, sizeof c);
  int ra = hg_command_decode(buf, len, &a);
  int rb = hg_command__decode_full(buf, len, &b);
  int rc = hg_command__decode_prefix(buf, len, &c);
  assert_int_equal(ra, rb);
  assert_memory_equal(&a, &b, sizeof a);
  assert_int_equal(rc, ra);
  assert_memory_equal(&c, &a, ra == 0 ? promised_bytes(&a) : sizeof a);
  return ra;
}

static void mutate(uint8_t *buf, size_t *len, size_t cap) {
  size_t n = *len;
  switch (next() % 7) {
  case 0: /* flip a byte */
    if (n) buf[next() % n] ^= (uint8_t)(1u << (next() % 8));
    break;
  case 1: /* replace a byte */
    if (n) buf[next() % n] = (uint8_t)next();
    break;
  case 2: /* truncate */
    if (n) *len = next() % n;
    break;
  case 3: /* insert a byte */
    if (n + 1 < cap) {
      size_t at = next() % (n + 1);
      memmove(buf + at + 1, buf + at, n - at);
      buf[at] = (uint8_t)next();
      *len = n + 1;
    }
    break;
  case 4: /* repeat the whole message: every field twice (protobuf merges) */
    if (2 * n < cap) {
      memcpy(buf + n, buf, n);
      *len = 2 * n;
    }
    break;
  case 5: /* append an unknown or a known top-level field */
    if (n + 3 < cap) {
      buf[n] = (uint8_t)((next() % 40) << 3); /* varint field */
      buf[n + 1] = (uint8_t)(next() % 128);
      *len = n + 2;
    }
    break;
  default: /* lengthen a varint without changing its value: 0x80 continuation */
    for (size_t i = 0; i < n && n + 1 < cap; i++) {
      if (buf[i] < 0x80 && next() % 4 == 0) {
        memmove(buf + i + 2, buf + i + 1, n - i - 1);
        buf[i] |= 0x80;
        buf[i + 1] = 0;
        *len = n + 1;
        break;
      }
    }
    break;
  }
}

static void test_random_and_mutated_commands_agree(void **state) {
  (void)state;
  int ok = 0, failed = 0;
  for (int k = 0; k < 200000; k++) {
    hg_command_t c;
    random_command(&c);
    uint8_t buf[2 * HG_COMMAND_MAX_ENCODED + 8];
    size_t len;
    assert_int_equal(hg_command_encode(&c, buf, HG_COMMAND_MAX_ENCODED, &len), 0);
    if (check_same(buf, len) == 0) ok++;
    int rounds = (int)(next() % 4);
    for (int r = 0; r < rounds; r++) {
      mutate(buf, &len, sizeof buf);
      if (check_same(buf, len) == 0) ok++;
      else failed++;
    }
  }
  /* both outcomes were exercised a lot */
  assert_true(ok > 100000);
  assert_true(failed > 50000);
}

/* Hand-written: NewOrder{instrument 2, account 300, coid 7, SELL, LIMIT, IOC,
 * price -5, qty 9, post_only} with seq 42 and ts 1000. */
static void test_hand_written_new_order(void **state) {
  (void)state;
  static const uint8_t m[] = {
      0x08, 42,                                /* seq */
      0x10, 0xe8, 0x07,                        /* ts = 1000 */
      0x1a, 28,                                /* new_order, 28 bytes */
      0x08, 2,                                 /* instrument_id */
      0x10, 0xac, 0x02,                        /* account = 300 */
      0x18, 7,                                 /* client_order_id */
      0x20, 1,                                 /* side SELL */
      0x28, 0,                                 /* type LIMIT */
      0x30, 2,                                 /* tif IOC */
      0x38, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, /* price -5 */
      0x40, 9,                                 /* qty */
      0x50, 1,                                 /* post_only */
  };
  hg_command_t c;
  assert_int_equal(hg_command_decode(m, sizeof m, &c), 0);
  assert_int_equal(c.seq, 42);
  assert_int_equal(c.ts, 1000);
  assert_int_equal(c.type, HG_COMMAND_NEW_ORDER);
  assert_int_equal(c.u.new_order.instrument_id, 2);
  assert_int_equal(c.u.new_order.account, 300);
  assert_int_equal(c.u.new_order.client_order_id, 7);
  assert_int_equal(c.u.new_order.side, HG_SIDE_SELL);
  assert_int_equal(c.u.new_order.type, HG_ORD_LIMIT);
  assert_int_equal(c.u.new_order.tif, HG_TIF_IOC);
  assert_true(c.u.new_order.price == -5);
  assert_int_equal(c.u.new_order.qty, 9);
  assert_int_equal(c.u.new_order.stp, HG_STP_DEFAULT);
  assert_int_equal(c.u.new_order.post_only, 1);
  /* No field 12, as in every journal written before it existed. */
  assert_int_equal(c.u.new_order.session_scoped, 0);
  check_same(m, sizeof m);

  /* session_scoped = true (field 12, varint 1) on both paths; a bool sent as
   * 2 is true as well (protobuf-c; the fast path leaves it to that path). */
  uint8_t sc[sizeof m + 2];
  memcpy(sc, m, sizeof m);
  sc[6] = 28 + 2;
  sc[sizeof m] = 0x60; /* (12 << 3) | 0 */
  sc[sizeof m + 1] = 1;
  assert_int_equal(hg_command_decode(sc, sizeof sc, &c), 0);
  assert_int_equal(c.u.new_order.session_scoped, 1);
  assert_int_equal(c.u.new_order.post_only, 1);
  check_same(sc, sizeof sc);
  sc[sizeof m + 1] = 2;
  assert_int_equal(hg_command_decode(sc, sizeof sc, &c), 0);
  assert_int_equal(c.u.new_order.session_scoped, 1);
  check_same(sc, sizeof sc);
  sc[sizeof m + 1] = 0; /* explicitly false */
  assert_int_equal(hg_command_decode(sc, sizeof sc, &c), 0);
  assert_int_equal(c.u.new_order.session_scoped, 0);
  check_same(sc, sizeof sc);

  /* Without the price a limit order is out of range (decode_body's rule). */
  uint8_t np[sizeof m];
  size_t n = 0;
  for (size_t i = 0; i < sizeof m; i++) {
    if (i == 20) i += 11; /* drop the price field (tag + 10 bytes) */
    np[n++] = m[i];
  }
  np[6] = 28 - 11;
  assert_int_equal(hg_command_decode(np, n, &c), HG_ERANGE);
  check_same(np, n);

  /* The same body twice: protobuf merges the two; no error either way. */
  uint8_t twice[2 * sizeof m];
  memcpy(twice, m, sizeof m);
  memcpy(twice + sizeof m, m + 5, sizeof m - 5);
  assert_int_equal(check_same(twice, sizeof m + sizeof m - 5), 0);
}

/* Daily cycle with the largest and one past the largest day. */
static void test_hand_written_daily(void **state) {
  (void)state;
  uint8_t m[16] = {0x08, 1, 0x10, 5, 0xaa, 0x01, 0, 0x08};
  size_t n = 8;
  uint32_t day = (uint32_t)HG_DAY_MAX;
  while (day >= 0x80) {
    m[n++] = (uint8_t)(day | 0x80);
    day >>= 7;
  }
  m[n++] = (uint8_t)day;
  m[6] = (uint8_t)(n - 7);
  hg_command_t c;
  assert_int_equal(hg_command_decode(m, n, &c), 0);
  assert_int_equal(c.type, HG_COMMAND_DAILY_SETTLEMENT);
  assert_int_equal(c.u.daily.day, HG_DAY_MAX);
  check_same(m, n);
  /* HG_DAY_MAX + 1: the low byte of the varint grows by one. */
  m[8]++;
  assert_int_equal(hg_command_decode(m, n, &c), HG_ERANGE);
  check_same(m, n);
}

/* SessionsEnded: field 40 of Command, an empty message. */
static void test_hand_written_sessions_ended(void **state) {
  (void)state;
  uint8_t m[] = {0x08, 3, 0x10, 4, 0xc2, 0x02, 0, 0x08, 1};
  hg_command_t c;
  assert_int_equal(hg_command_decode(m, 7, &c), 0);
  assert_int_equal(c.type, HG_COMMAND_SESSIONS_ENDED);
  assert_int_equal(c.seq, 3);
  assert_int_equal(c.ts, 4);
  check_same(m, 7);
  uint8_t out[16];
  size_t len = 0;
  assert_int_equal(hg_command_encode(&c, out, sizeof out, &len), 0);
  assert_int_equal(len, 7);
  assert_memory_equal(out, m, 7);
  /* A field inside it is unknown to this build. */
  m[6] = 2;
  assert_int_equal(hg_command_decode(m, sizeof m, &c), HG_EPARSE);
  check_same(m, sizeof m);
}

/* ------------------------------------------------------------------------ */
/* Fast encoder                                                              */
/* ------------------------------------------------------------------------ */

/* The edges of a varint and of each type as well as ordinary values. */
static uint64_t edge64(void) {
  static const uint64_t v[] = {0,
                               1,
                               127,
                               128,
                               16383,
                               16384,
                               UINT32_MAX,
                               (uint64_t)UINT32_MAX + 1,
                               (uint64_t)INT64_MAX,
                               (uint64_t)INT64_MIN,
                               (uint64_t)-1,
                               (uint64_t)-2,
                               (uint64_t)-128,
                               UINT64_MAX - 1};
  switch (next() % 4) {
  case 0: return next();
  case 1: return next() >> (next() % 64);
  default: return v[next() % (sizeof v / sizeof v[0])];
  }
}

static uint32_t edge32(void) {
  static const uint32_t v[] = {0, 1, 127, 128, 16383, 16384, 2097151, 2097152,
                               268435455, 268435456, UINT32_MAX};
  if (next() % 3 == 0) return (uint32_t)(next() >> (next() % 64));
  return v[next() % (sizeof v / sizeof v[0])];
}

/* Any uint8_t, weighted towards the enum's own values and 0/1. */
static uint8_t edge8(unsigned n_values) {
  switch (next() % 4) {
  case 0: return (uint8_t)next();
  case 1: return (uint8_t)(next() % 2);
  default: return (uint8_t)(next() % n_values);
  }
}

/* An order command with every field drawn at random, including values the
 * decoder would refuse: the encoder does not validate, so both encoders
 * must agree on those too. */
static void random_order_command(hg_command_t *c) {
  memset(c, 0, sizeof *c);
  c->seq = edge64();
  c->ts = edge64();
  switch (next() % 4) {
  case 0: {
    hg_cmd_new_order_t *o = &c->u.new_order;
    c->type = HG_COMMAND_NEW_ORDER;
    o->instrument_id = edge32();
    o->account = edge32();
    o->client_order_id = edge64();
    o->smp_group = next() % 2 ? edge32() : 0;
    o->price = (int64_t)edge64();
    o->qty = (int64_t)edge64();
    o->side = edge8(2);
    o->type = edge8(2);
    o->tif = edge8(4);
    o->stp = edge8(5);
    o->post_only = edge8(2);
    o->session_scoped = edge8(2);
    break;
  }
  case 1:
    c->type = HG_COMMAND_CANCEL;
    c->u.cancel.instrument_id = edge32();
    c->u.cancel.account = edge32();
    c->u.cancel.order_id = edge64();
    break;
  case 2:
    c->type = HG_COMMAND_REPLACE;
    c->u.replace.instrument_id = edge32();
    c->u.replace.account = edge32();
    c->u.replace.order_id = edge64();
    c->u.replace.new_price = (int64_t)edge64();
    c->u.replace.new_qty = (int64_t)edge64();
    break;
  default:
    c->type = HG_COMMAND_MASS_CANCEL;
    c->u.mass_cancel.instrument_id = next() % 2 ? edge32() : 0;
    c->u.mass_cancel.account = edge32();
    c->u.mass_cancel.sides = edge8(3);
    break;
  }
}

/* Both encoders with capacity cap into buffers pre-filled with a pattern:
 * same return code, same *len, same bytes, and nothing written past what
 * was reported (nothing at all on failure). */
static int encode_both(const hg_command_t *c, size_t cap, size_t *len) {
  uint8_t a[HG_COMMAND_MAX_ENCODED + 16], b[HG_COMMAND_MAX_ENCODED + 16];
  memset(a, 0xee, sizeof a);
  memset(b, 0xee, sizeof b);
  size_t la = 7777, lb = 7777;
  int ra = hg_command_encode(c, a, cap, &la);
  int rb = hg_command__encode_full(c, b, cap, &lb);
  assert_int_equal(ra, rb);
  assert_int_equal(la, lb);
  assert_memory_equal(a, b, sizeof a);
  uint8_t untouched[sizeof a];
  memset(untouched, 0xee, sizeof untouched);
  if (ra == 0) {
    assert_true(la <= cap);
    assert_memory_equal(a + la, untouched, sizeof a - la);
  } else {
    assert_int_equal(la, 7777);
    assert_memory_equal(a, untouched, sizeof a);
  }
  *len = la;
  return ra;
}

static void test_encoder_fast_path_is_active(void **state) {
  (void)state;
  /* Otherwise the differential tests below compare protobuf-c with itself. */
  assert_int_equal(hg_command__encode_fast_active(), 1);
  assert_int_equal(hg_command__encode_layout_ok(&hourglass__v1__command__descriptor), 1);
}

static void test_encoders_agree_on_random_order_commands(void **state) {
  (void)state;
  size_t longest = 0;
  for (int k = 0; k < 20000; k++) {
    hg_command_t c;
    random_order_command(&c);
    size_t len = 0, l2;
    assert_int_equal(encode_both(&c, HG_COMMAND_MAX_ENCODED, &len), 0);
    if (len > longest) longest = len;
    /* exact, one byte short, and around the fast path's direct-write bound */
    assert_int_equal(encode_both(&c, len, &l2), 0);
    assert_int_equal(l2, len);
    assert_int_equal(encode_both(&c, len - 1, &l2), HG_EFULL);
    assert_int_equal(encode_both(&c, 0, &l2), HG_EFULL);
    size_t cap = 85 + next() % 12;
    assert_int_equal(encode_both(&c, cap, &l2), len <= cap ? 0 : HG_EFULL);
  }
  /* The largest NewOrder: every varint at its widest, every option set. */
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = UINT64_MAX;
  c.ts = UINT64_MAX;
  c.type = HG_COMMAND_NEW_ORDER;
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = UINT32_MAX, .account = UINT32_MAX,
                                       .client_order_id = UINT64_MAX, .smp_group = UINT32_MAX,
                                       .price = -1, .qty = INT64_MIN, .side = 255, .type = 0,
                                       .tif = 255, .stp = 255, .post_only = 255,
                                       .session_scoped = 255};
  size_t len;
  assert_int_equal(encode_both(&c, HG_COMMAND_MAX_ENCODED, &len), 0);
  /* 11 + 11 + 2 + 66: a limit order's type (0) takes one byte, so the
   * bound of command.c (91, which counts two) is one more than reachable */
  assert_int_equal(len, 90);
  assert_int_equal(encode_both(&c, 90, &len), 0);
  assert_int_equal(encode_both(&c, 89, &len), HG_EFULL);
  assert_true(longest >= 80); /* the random values reached the wide varints */
}

/* Commands the decoder accepts: seq > 0, enums in range, flags 0/1, a market
 * order's price 0. They come back unchanged, through both decoders. */
static void test_fast_encoding_round_trips(void **state) {
  (void)state;
  for (int k = 0; k < 20000; k++) {
    hg_command_t c;
    random_order_command(&c);
    if (c.seq == 0) c.seq = 1;
    switch (c.type) {
    case HG_COMMAND_NEW_ORDER: {
      hg_cmd_new_order_t *o = &c.u.new_order;
      o->side %= 2;
      o->type %= 2;
      o->tif %= 4;
      o->stp %= 5;
      o->post_only %= 2;
      o->session_scoped %= 2;
      if (o->type == HG_ORD_MARKET) o->price = 0;
      break;
    }
    case HG_COMMAND_MASS_CANCEL: c.u.mass_cancel.sides %= 3; break;
    default: break;
    }
    uint8_t buf[HG_COMMAND_MAX_ENCODED];
    size_t len;
    assert_int_equal(hg_command_encode(&c, buf, sizeof buf, &len), 0);
    hg_command_t back, full;
    assert_int_equal(hg_command_decode(buf, len, &back), 0);
    assert_memory_equal(&back, &c, sizeof c);
    assert_int_equal(hg_command__decode_full(buf, len, &full), 0);
    assert_memory_equal(&full, &c, sizeof c);
  }
}

static void test_hand_written_encoding(void **state) {
  (void)state;
  /* The message of test_hand_written_new_order, from the struct. */
  static const uint8_t m[] = {
      0x08, 42, 0x10, 0xe8, 0x07, 0x1a, 28, 0x08, 2, 0x10, 0xac, 0x02, 0x18, 7, 0x20, 1,
      0x28, 0,  0x30, 2,    0x38, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
      0x40, 9,  0x50, 1,
  };
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = 42;
  c.ts = 1000;
  c.type = HG_COMMAND_NEW_ORDER;
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = 2, .account = 300, .client_order_id = 7,
                                       .price = -5, .qty = 9, .side = HG_SIDE_SELL,
                                       .type = HG_ORD_LIMIT, .tif = HG_TIF_IOC, .post_only = 1};
  uint8_t out[HG_COMMAND_MAX_ENCODED];
  size_t len = 0;
  assert_int_equal(hg_command_encode(&c, out, sizeof out, &len), 0);
  assert_int_equal(len, sizeof m);
  assert_memory_equal(out, m, sizeof m);

  /* A market order (no price even though the struct holds one) with every
   * option: stp CANCEL_BOTH, post_only 7 (written as true), smp_group 128,
   * session_scoped; seq 2^32 and ts 0. */
  static const uint8_t mk[] = {
      0x08, 0x80, 0x80, 0x80, 0x80, 0x10, /* seq = 2^32 */
      0x10, 0,                            /* ts = 0 */
      0x1a, 24,                           /* new_order, 24 bytes */
      0x08, 0x7f,                         /* instrument_id 127 */
      0x10, 0x80, 0x01,                   /* account 128 */
      0x18, 0,                            /* client_order_id 0 */
      0x20, 0,                            /* side BUY */
      0x28, 1,                            /* type MARKET */
      0x30, 3,                            /* tif FOK */
      0x40, 1,                            /* qty 1 */
      0x48, 3,                            /* stp CANCEL_BOTH */
      0x50, 1,                            /* post_only */
      0x58, 0x80, 0x01,                   /* smp_group 128 */
      0x60, 1,                            /* session_scoped */
  };
  c.seq = 1ull << 32;
  c.ts = 0;
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = 127, .account = 128, .price = 99,
                                       .qty = 1, .side = HG_SIDE_BUY, .type = HG_ORD_MARKET,
                                       .tif = HG_TIF_FOK, .stp = HG_STP_CANCEL_BOTH,
                                       .post_only = 7, .smp_group = 128, .session_scoped = 1};
  assert_int_equal(hg_command_encode(&c, out, sizeof out, &len), 0);
  assert_int_equal(len, sizeof mk);
  assert_memory_equal(out, mk, sizeof mk);

  /* MassCancel of account 5 in every instrument, both sides: only field 1;
   * then instrument 3, BUY side (0, written because it is not the default). */
  static const uint8_t mc[] = {0x08, 9, 0x10, 1, 0x32, 2, 0x08, 5};
  static const uint8_t mc2[] = {0x08, 9, 0x10, 1, 0x32, 6, 0x08, 5, 0x10, 3, 0x18, 0};
  memset(&c, 0, sizeof c);
  c.seq = 9;
  c.ts = 1;
  c.type = HG_COMMAND_MASS_CANCEL;
  c.u.mass_cancel = (hg_cmd_mass_cancel_t){.account = 5, .sides = HG_SIDES_BOTH};
  assert_int_equal(hg_command_encode(&c, out, sizeof out, &len), 0);
  assert_int_equal(len, sizeof mc);
  assert_memory_equal(out, mc, sizeof mc);
  c.u.mass_cancel = (hg_cmd_mass_cancel_t){.account = 5, .instrument_id = 3, .sides = HG_SIDES_BUY};
  assert_int_equal(hg_command_encode(&c, out, sizeof out, &len), 0);
  assert_int_equal(len, sizeof mc2);
  assert_memory_equal(out, mc2, sizeof mc2);
  /* cap one short of the 12 bytes: HG_EFULL, buffer and *len untouched */
  memset(out, 0x11, sizeof out);
  len = 4242;
  assert_int_equal(hg_command_encode(&c, out, sizeof mc2 - 1, &len), HG_EFULL);
  assert_int_equal(len, 4242);
  assert_int_equal(out[0], 0x11);
}

/* The layout check refuses a Command whose generated descriptors differ from
 * what the fast encoder writes. Each case mutates a private copy. */
typedef struct desc_copy {
  ProtobufCMessageDescriptor cmd, body;
  ProtobufCFieldDescriptor cmd_fields[64], body_fields[32];
} desc_copy_t;

/* A copy of the Command descriptor whose field body_index (2..5) points to a
 * private copy of that body's descriptor. */
static void copy_descriptors(desc_copy_t *d, unsigned body_index) {
  const ProtobufCMessageDescriptor *src = &hourglass__v1__command__descriptor;
  assert_true(src->n_fields <= 64);
  d->cmd = *src;
  memcpy(d->cmd_fields, src->fields, src->n_fields * sizeof src->fields[0]);
  d->cmd.fields = d->cmd_fields;
  const ProtobufCMessageDescriptor *b = src->fields[body_index].descriptor;
  assert_true(b->n_fields <= 32);
  d->body = *b;
  memcpy(d->body_fields, b->fields, b->n_fields * sizeof b->fields[0]);
  d->body.fields = d->body_fields;
  d->cmd_fields[body_index].descriptor = &d->body;
}

static void test_layout_check_refuses_changed_schema(void **state) {
  (void)state;
  desc_copy_t d;
  for (unsigned bi = 2; bi < 6; bi++) { /* the copy itself passes */
    copy_descriptors(&d, bi);
    assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 1);
  }
  /* NewOrder.qty int64 -> sint64 (zigzag: different bytes for negatives) */
  copy_descriptors(&d, 2);
  d.body_fields[7].type = PROTOBUF_C_TYPE_SINT64;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  /* NewOrder.price renumbered */
  copy_descriptors(&d, 2);
  d.body_fields[6].id = 13;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  /* NewOrder.tif made optional (presence would change) */
  copy_descriptors(&d, 2);
  d.body_fields[5].label = PROTOBUF_C_LABEL_OPTIONAL;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  /* a field added to Cancel */
  copy_descriptors(&d, 3);
  d.body_fields[3] = d.body_fields[2];
  d.body_fields[3].id = 4;
  d.body.n_fields = 4;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  /* Replace.new_qty fixed64 */
  copy_descriptors(&d, 4);
  d.body_fields[4].type = PROTOBUF_C_TYPE_FIXED64;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  /* MassCancel.sides uint32 -> sint32 */
  copy_descriptors(&d, 5);
  d.body_fields[2].type = PROTOBUF_C_TYPE_SINT32;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  /* Command.seq fixed64; Command.ts renumbered */
  copy_descriptors(&d, 2);
  d.cmd_fields[0].type = PROTOBUF_C_TYPE_FIXED64;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  copy_descriptors(&d, 2);
  d.cmd_fields[1].id = 64;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  /* Cancel and Replace swap field numbers */
  copy_descriptors(&d, 2);
  d.cmd_fields[3].id = 5;
  d.cmd_fields[4].id = 4;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  /* a Command field outside the oneof (it would be written too) */
  copy_descriptors(&d, 2);
  d.cmd_fields[d.cmd.n_fields - 1].flags &= ~(uint32_t)PROTOBUF_C_FIELD_FLAG_ONEOF;
  assert_int_equal(hg_command__encode_layout_ok(&d.cmd), 0);
  assert_int_equal(hg_command__encode_layout_ok(NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_and_mutated_commands_agree),
      cmocka_unit_test(test_hand_written_new_order),
      cmocka_unit_test(test_hand_written_daily),
      cmocka_unit_test(test_hand_written_sessions_ended),
      cmocka_unit_test(test_encoder_fast_path_is_active),
      cmocka_unit_test(test_encoders_agree_on_random_order_commands),
      cmocka_unit_test(test_fast_encoding_round_trips),
      cmocka_unit_test(test_hand_written_encoding),
      cmocka_unit_test(test_layout_check_refuses_changed_schema),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
