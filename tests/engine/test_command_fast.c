/*
 * test_command_fast: the fast path of hg_command_decode() against the
 * protobuf-c path (hg_command__decode_full) over random commands of every
 * kind it handles, the same messages mutated (flipped bytes, truncation,
 * inserted bytes, repeated and unknown fields, long varints), and a few
 * hand-written wire messages whose decoding is known.
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_and_mutated_commands_agree),
      cmocka_unit_test(test_hand_written_new_order),
      cmocka_unit_test(test_hand_written_daily),
      cmocka_unit_test(test_hand_written_sessions_ended),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
