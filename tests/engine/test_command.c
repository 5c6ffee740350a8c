/*
 * Command schema: every command type survives encode -> decode unchanged
 * (with non-default and default optional values), and decoding refuses what
 * it must: bad enum values, missing required fields, no body, unknown fields,
 * seq 0, bad symbols, a limit order without a price, oversize and garbage
 * input. Mutated valid encodings never crash the decoder, and whatever it
 * accepts re-encodes to something it accepts identically.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass.pb-c.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"

static hg_command_t base(uint32_t type, uint64_t seq) {
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = seq;
  c.ts = 1700000000123456789ull + seq;
  c.type = type;
  return c;
}

/* Every command type, each field away from its default where it has one. */
static size_t all_commands(hg_command_t *out) {
  size_t n = 0;
  hg_command_t c = base(HG_COMMAND_NEW_ORDER, 1);
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = 7, .account = 42, .client_order_id = 9001,
                                       .smp_group = 3, .price = 123456, .qty = 17,
                                       .side = HG_SIDE_SELL, .type = HG_ORD_LIMIT,
                                       .tif = HG_TIF_DAY, .stp = HG_STP_CANCEL_BOTH,
                                       .post_only = 1, .session_scoped = 1};
  out[n++] = c;
  c = base(HG_COMMAND_NEW_ORDER, 2); /* market, defaults */
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = 7, .account = 42, .client_order_id = 1,
                                       .qty = 1, .side = HG_SIDE_BUY, .type = HG_ORD_MARKET,
                                       .tif = HG_TIF_IOC};
  out[n++] = c;
  c = base(HG_COMMAND_CANCEL, 3);
  c.u.cancel = (hg_cmd_cancel_t){.instrument_id = 7, .account = 42, .order_id = UINT64_MAX};
  out[n++] = c;
  c = base(HG_COMMAND_REPLACE, 4);
  c.u.replace = (hg_cmd_replace_t){.instrument_id = 7, .account = 42, .order_id = 1,
                                   .new_price = -5, .new_qty = INT64_MAX};
  out[n++] = c;
  c = base(HG_COMMAND_MASS_CANCEL, 5);
  c.u.mass_cancel = (hg_cmd_mass_cancel_t){.instrument_id = 7, .account = 42,
                                           .sides = HG_SIDES_SELL};
  out[n++] = c;
  c = base(HG_COMMAND_MASS_CANCEL, 6);
  c.u.mass_cancel = (hg_cmd_mass_cancel_t){.instrument_id = 0, .account = 42,
                                           .sides = HG_SIDES_BOTH};
  out[n++] = c;
  c = base(HG_COMMAND_LIST_INSTRUMENT, 7);
  strcpy(c.u.list.symbol, "B200.A.2027-03");
  c.u.list.params = (hg_book_params_t){.instrument_id = 7, .tick_size = 1000,
                                       .contract_unit = 1000, .min_price = 1,
                                       .max_price = 100000, .max_order_qty = 1000,
                                       .ref_price = 2500, .max_orders = 4096,
                                       .max_accounts = 64, .default_stp = HG_STP_NONE};
  c.u.list.leg_token_id = 12; /* a spread's legs and ratio round-trip too */
  c.u.list.leg_gpu_id = 11;
  c.u.list.ratio_token = 27;
  c.u.list.ratio_gpu = 25;
  out[n++] = c;
  c = base(HG_COMMAND_LIST_INSTRUMENT, 8); /* 31-byte symbol, optional fields absent */
  strcpy(c.u.list.symbol, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_-.09");
  c.u.list.params = (hg_book_params_t){.instrument_id = 8, .tick_size = 1, .contract_unit = 1,
                                       .min_price = 1, .max_price = 2, .max_order_qty = 1,
                                       .max_orders = 1, .max_accounts = 1};
  out[n++] = c;
  c = base(HG_COMMAND_DELIST_INSTRUMENT, 9);
  c.u.instrument.instrument_id = 7;
  out[n++] = c;
  c = base(HG_COMMAND_HALT, 10);
  c.u.instrument.instrument_id = UINT32_MAX;
  out[n++] = c;
  c = base(HG_COMMAND_RESUME, 11);
  c.u.instrument.instrument_id = 1;
  out[n++] = c;
  c = base(HG_COMMAND_END_OF_SESSION, 12);
  c.u.end_of_session.session_date = 20270315;
  out[n++] = c;
  c = base(HG_COMMAND_END_OF_SESSION, 13);
  out[n++] = c;
  c = base(HG_COMMAND_ADD_ACCOUNT, 14);
  c.u.add_account = (hg_cmd_add_account_t){.account = 42, .firm = 5};
  out[n++] = c;
  c = base(HG_COMMAND_DEPOSIT, 15);
  c.u.cash = (hg_cmd_cash_t){.account = 42, .amount = 1000000000000};
  out[n++] = c;
  c = base(HG_COMMAND_WITHDRAW, UINT64_MAX);
  c.u.cash = (hg_cmd_cash_t){.account = 42, .amount = -1};
  out[n++] = c;
  c = base(HG_COMMAND_SET_PROVIDER_GRADE, 16);
  strcpy(c.u.provider_grade.provider, "lambda labs");
  strcpy(c.u.provider_grade.gpu, "B200");
  strcpy(c.u.provider_grade.grade, "A");
  c.u.provider_grade.effective_day = 20000;
  out[n++] = c;
  c = base(HG_COMMAND_PUBLISH_SAMPLES, 17); /* the largest command: 4 samples, long strings */
  strcpy(c.u.samples.gpu, "B200");
  strcpy(c.u.samples.grade, "A");
  c.u.samples.day = HG_DAY_MAX;
  c.u.samples.n = HG_SAMPLES_PER_COMMAND;
  for (int i = 0; i < HG_SAMPLES_PER_COMMAND; i++) {
    hg_index_sample_t *x = &c.u.samples.s[i];
    x->ts = i == 0 ? INT64_MIN : INT64_MAX - i;
    x->price = i == 1 ? -1 : INT64_MAX;
    x->volume = HG_INDEX_VOLUME_MAX;
    x->term_days = i == 2 ? INT32_MIN : 31;
    x->kind = i % 2 ? HG_INDEX_QUOTE : HG_INDEX_TRADE;
    memset(x->provider, 'p', sizeof x->provider - 1);
    memset(x->region, 'r', sizeof x->region - 1);
    memset(x->gpu, 'g', sizeof x->gpu - 1);
    memset(x->grade, 'q', sizeof x->grade - 1);
  }
  out[n++] = c;
  c = base(HG_COMMAND_DISCARD_SAMPLES, 18);
  strcpy(c.u.index_day.gpu, "H100");
  strcpy(c.u.index_day.grade, "B");
  c.u.index_day.day = 0;
  out[n++] = c;
  c = base(HG_COMMAND_COMPUTE_FIXING, 19);
  strcpy(c.u.index_day.gpu, "B200");
  strcpy(c.u.index_day.grade, "C");
  c.u.index_day.day = 20526;
  out[n++] = c;
  c = base(HG_COMMAND_PUBLISH_FIXING, 20);
  strcpy(c.u.fixing.gpu, "B200");
  strcpy(c.u.fixing.grade, "A");
  c.u.fixing.day = 20526;
  c.u.fixing.value = 3456789;
  strcpy(c.u.fixing.source, "third-party index v2");
  out[n++] = c;
  c = base(HG_COMMAND_FINALIZE_FIXING, 21);
  strcpy(c.u.index_day.gpu, "B200");
  strcpy(c.u.index_day.grade, "A");
  c.u.index_day.day = 20526;
  out[n++] = c;
  c = base(HG_COMMAND_DAILY_SETTLEMENT, 22);
  c.u.daily.day = 20527;
  out[n++] = c;
  c = base(HG_COMMAND_EXPIRE, 23);
  c.u.expire.instrument_id = 77;
  out[n++] = c;
  c = base(HG_COMMAND_LIST_CURVE, 24);
  strcpy(c.u.curve.gpu, "B200");
  strcpy(c.u.curve.grade, "A");
  c.u.curve = (hg_cmd_list_curve_t){.gpu = "B200", .grade = "A", .year = 2027, .month = 3,
                                    .first_instrument_id = 100, .max_orders = 4096,
                                    .max_accounts = 64, .ref_price = 3000};
  out[n++] = c;
  c = base(HG_COMMAND_LIST_CURVE, 25); /* ref_price absent */
  c.u.curve = (hg_cmd_list_curve_t){.gpu = "H100", .grade = "Z9", .year = 9998, .month = 12,
                                    .first_instrument_id = 1, .max_orders = 1,
                                    .max_accounts = 1};
  out[n++] = c;
  c = base(HG_COMMAND_SESSIONS_ENDED, 26);
  out[n++] = c;
  c = base(HG_COMMAND_MARK, 27);
  out[n++] = c;
  c = base(HG_COMMAND_FUND_DEPOSIT, 28);
  c.u.fund.amount = 250000000000;
  out[n++] = c;
  return n;
}

static void test_round_trip_every_type(void **state) {
  (void)state;
  hg_command_t cmds[32];
  size_t n = all_commands(cmds);
  int seen[64] = {0};
  for (size_t i = 0; i < n; i++) {
    uint8_t buf[HG_COMMAND_MAX_ENCODED];
    size_t len = 0;
    assert_int_equal(hg_command_encode(&cmds[i], buf, sizeof buf, &len), 0);
    assert_true(len > 0 && len <= HG_COMMAND_MAX_ENCODED);
    hg_command_t back;
    assert_int_equal(hg_command_decode(buf, len, &back), 0);
    assert_memory_equal(&back, &cmds[i], sizeof back);
    /* Encoding is a function of the struct: same bytes every time. */
    uint8_t buf2[HG_COMMAND_MAX_ENCODED];
    size_t len2 = 0;
    assert_int_equal(hg_command_encode(&back, buf2, sizeof buf2, &len2), 0);
    assert_int_equal(len2, len);
    assert_memory_equal(buf2, buf, len);
    seen[cmds[i].type] = 1;
  }
  for (int t = HG_COMMAND_NEW_ORDER; t <= HG_COMMAND_LAST; t++)
    assert_int_equal(seen[t], t <= HG_COMMAND_LAST_SETTLEMENT || t == HG_COMMAND_SESSIONS_ENDED);
  assert_string_equal(hg_command_type_str(HG_COMMAND_SESSIONS_ENDED), "SESSIONS_ENDED");
  assert_string_equal(hg_command_type_str(HG_COMMAND_EXPIRE), "EXPIRE");
  assert_string_equal(hg_command_type_str(HG_COMMAND_DEPOSIT), "DEPOSIT");
  assert_string_equal(hg_command_type_str(99), "UNKNOWN");
}

static void test_encode_errors(void **state) {
  (void)state;
  hg_command_t cmds[32];
  all_commands(cmds);
  uint8_t buf[HG_COMMAND_MAX_ENCODED];
  size_t len = 0;
  assert_int_equal(hg_command_encode(&cmds[0], buf, 5, &len), HG_EFULL);
  hg_command_t bad = base(99, 1);
  assert_int_equal(hg_command_encode(&bad, buf, sizeof buf, &len), HG_EINVAL);
  hg_command_t sym = cmds[6];
  memset(sym.u.list.symbol, 'A', sizeof sym.u.list.symbol); /* no NUL */
  assert_int_equal(hg_command_encode(&sym, buf, sizeof buf, &len), HG_EINVAL);
}

/* Packs a hand-built protobuf message; returns its length. */
static size_t pack(const ProtobufCMessage *m, uint8_t *buf) {
  size_t need = protobuf_c_message_get_packed_size(m);
  assert_true(need <= 1024);
  return protobuf_c_message_pack(m, buf);
}

static void expect_decode(const uint8_t *buf, size_t len, int want) {
  hg_command_t out;
  memset(&out, 0xAB, sizeof out);
  assert_int_equal(hg_command_decode(buf, len, &out), want);
  if (want != 0) {
    hg_command_t zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&out, &zero, sizeof out);
  }
}

static void test_bad_enums(void **state) {
  (void)state;
  uint8_t buf[1024];
  Hourglass__V1__Command m = HOURGLASS__V1__COMMAND__INIT;
  Hourglass__V1__NewOrder no = HOURGLASS__V1__NEW_ORDER__INIT;
  m.seq = 1;
  m.body_case = HOURGLASS__V1__COMMAND__BODY_NEW_ORDER;
  m.new_order = &no;
  no.instrument_id = 1;
  no.account = 1;
  no.has_price = 1;
  no.price = 10;
  no.qty = 1;
  expect_decode(buf, pack(&m.base, buf), 0);
  no.side = (Hourglass__V1__Side)2;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  no.side = (Hourglass__V1__Side)-1;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  no.side = HOURGLASS__V1__SIDE__SIDE_SELL;
  no.type = (Hourglass__V1__OrdType)2;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  no.type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT;
  no.tif = (Hourglass__V1__TimeInForce)4;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  no.tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_FOK;
  no.has_stp = 1;
  no.stp = (Hourglass__V1__StpMode)5;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  no.stp = HOURGLASS__V1__STP_MODE__STP_NONE;
  expect_decode(buf, pack(&m.base, buf), 0);
  /* A limit order must carry its price. */
  no.has_price = 0;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);

  Hourglass__V1__MassCancel mc = HOURGLASS__V1__MASS_CANCEL__INIT;
  m.body_case = HOURGLASS__V1__COMMAND__BODY_MASS_CANCEL;
  m.mass_cancel = &mc;
  mc.has_sides = 1;
  mc.sides = (Hourglass__V1__SideFilter)3;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);

  Hourglass__V1__ListInstrument li = HOURGLASS__V1__LIST_INSTRUMENT__INIT;
  m.body_case = HOURGLASS__V1__COMMAND__BODY_LIST_INSTRUMENT;
  m.list_instrument = &li;
  li.instrument_id = 1;
  li.symbol = "B200.A.2027-03";
  expect_decode(buf, pack(&m.base, buf), 0);
  li.has_default_stp = 1;
  li.default_stp = (Hourglass__V1__StpMode)9;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  li.has_default_stp = 0;
  li.symbol = "";
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  li.symbol = "B200 A";
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  li.symbol = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456"; /* 33 bytes */
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  li.symbol = "ABCDEFGHIJKLMNOPQRSTUVWXYZ01234"; /* 31 bytes: the limit */
  expect_decode(buf, pack(&m.base, buf), 0);

  /* seq 0 is never a sequenced command. */
  m.seq = 0;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
}

/* Settlement commands: names, days, sample counts, kinds and volumes are
 * range-checked before anything reaches the state machine. */
static void test_settlement_ranges(void **state) {
  (void)state;
  uint8_t buf[HG_COMMAND_MAX_ENCODED];
  Hourglass__V1__Command m = HOURGLASS__V1__COMMAND__INIT;
  m.seq = 1;
  Hourglass__V1__PublishSamples ps = HOURGLASS__V1__PUBLISH_SAMPLES__INIT;
  Hourglass__V1__IndexSample smp[5];
  Hourglass__V1__IndexSample *ptr[5];
  for (int i = 0; i < 5; i++) {
    hourglass__v1__index_sample__init(&smp[i]);
    smp[i].provider = "p1";
    smp[i].region = "eu";
    smp[i].gpu = "B200";
    smp[i].grade = "A";
    smp[i].price = 3000000;
    smp[i].volume = 10;
    smp[i].kind = HOURGLASS__V1__SAMPLE_KIND__SAMPLE_TRADE;
    ptr[i] = &smp[i];
  }
  m.body_case = HOURGLASS__V1__COMMAND__BODY_PUBLISH_SAMPLES;
  m.publish_samples = &ps;
  ps.gpu = "B200";
  ps.grade = "A";
  ps.day = 100;
  ps.samples = ptr;
  ps.n_samples = 4;
  expect_decode(buf, pack(&m.base, buf), 0);
  ps.n_samples = 0;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  ps.n_samples = 5;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  ps.n_samples = 1;
  ps.day = -1;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  ps.day = HG_DAY_MAX + 1;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  ps.day = 100;
  ps.gpu = "B200.X"; /* an index name cannot hold a dot */
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  ps.gpu = "B200";
  smp[0].kind = HOURGLASS__V1__SAMPLE_KIND__SAMPLE_KIND_UNSPECIFIED;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  smp[0].kind = (Hourglass__V1__SampleKind)3;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  smp[0].kind = HOURGLASS__V1__SAMPLE_KIND__SAMPLE_QUOTE;
  smp[0].volume = HG_INDEX_VOLUME_MAX + 1;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  smp[0].volume = 10;
  smp[0].provider = "a,b"; /* not a CSV field */
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  smp[0].provider = "";
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  smp[0].provider = "0123456789012345678901234567890123"; /* 34 bytes */
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  smp[0].provider = "p1";
  expect_decode(buf, pack(&m.base, buf), 0);

  Hourglass__V1__ListCurve lc = HOURGLASS__V1__LIST_CURVE__INIT;
  m.body_case = HOURGLASS__V1__COMMAND__BODY_LIST_CURVE;
  m.list_curve = &lc;
  lc.gpu = "B200";
  lc.grade = "A";
  lc.year = 2027;
  lc.month = 13;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  lc.month = 0;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  lc.month = 12;
  lc.year = 1969;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  lc.year = 2027;
  expect_decode(buf, pack(&m.base, buf), 0);

  Hourglass__V1__PublishFixing pf = HOURGLASS__V1__PUBLISH_FIXING__INIT;
  m.body_case = HOURGLASS__V1__COMMAND__BODY_PUBLISH_FIXING;
  m.publish_fixing = &pf;
  pf.gpu = "B200";
  pf.grade = "A";
  pf.day = 5;
  pf.value = 1;
  pf.source = "";
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
  pf.source = "vendor";
  expect_decode(buf, pack(&m.base, buf), 0);

  Hourglass__V1__DailySettlement ds = HOURGLASS__V1__DAILY_SETTLEMENT__INIT;
  m.body_case = HOURGLASS__V1__COMMAND__BODY_DAILY_SETTLEMENT;
  m.daily_settlement = &ds;
  ds.day = -5;
  expect_decode(buf, pack(&m.base, buf), HG_ERANGE);
}

static void test_missing_fields_and_garbage(void **state) {
  (void)state;
  /* seq=1, ts=2, cancel{instrument_id=1, account=2} without order_id. */
  static const uint8_t no_order_id[] = {0x08, 0x01, 0x10, 0x02, 0x22, 0x04, 0x08, 0x01, 0x10, 0x02};
  expect_decode(no_order_id, sizeof no_order_id, HG_EPARSE);
  /* The same with order_id=3: accepted, to show the bytes above are right. */
  static const uint8_t ok[] = {0x08, 0x01, 0x10, 0x02, 0x22, 0x06, 0x08, 0x01, 0x10, 0x02, 0x18, 0x03};
  hg_command_t c;
  assert_int_equal(hg_command_decode(ok, sizeof ok, &c), 0);
  assert_int_equal(c.type, HG_COMMAND_CANCEL);
  assert_int_equal(c.u.cancel.order_id, 3);
  /* Without seq. */
  expect_decode(ok + 2, sizeof ok - 2, HG_EPARSE);
  /* No body at all. */
  expect_decode(ok, 4, HG_EPARSE);
  /* An unknown field (number 41, varint) on the Command. */
  uint8_t unk[sizeof ok + 3];
  memcpy(unk, ok, sizeof ok);
  unk[sizeof ok] = 0xC8; /* (41 << 3) | 0 = 328 = 0xC8 0x02 */
  unk[sizeof ok + 1] = 0x02;
  unk[sizeof ok + 2] = 0x01;
  expect_decode(unk, sizeof unk, HG_EPARSE);
  /* Truncated length-delimited body. */
  expect_decode(ok, sizeof ok - 1, HG_EPARSE);
  /* Garbage, empty, NULL, oversize. */
  static const uint8_t junk[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  expect_decode(junk, sizeof junk, HG_EPARSE);
  expect_decode(ok, 0, HG_EPARSE);
  expect_decode(NULL, 10, HG_EPARSE);
  uint8_t big[HG_COMMAND_MAX_ENCODED + 1];
  memset(big, 0, sizeof big);
  expect_decode(big, sizeof big, HG_EPARSE);
}

/* Deterministic xorshift so the mutations are the same on every run. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void test_mutations_never_crash(void **state) {
  (void)state;
  hg_command_t cmds[32];
  size_t n = all_commands(cmds);
  int accepted = 0, refused = 0;
  for (int iter = 0; iter < 20000; iter++) {
    uint8_t buf[HG_COMMAND_MAX_ENCODED];
    size_t len = 0;
    assert_int_equal(hg_command_encode(&cmds[iter % n], buf, sizeof buf, &len), 0);
    int flips = 1 + (int)(rnd() % 4);
    for (int f = 0; f < flips; f++) buf[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
    if (rnd() % 4 == 0) len = rnd() % len + 1;
    hg_command_t out;
    int rc = hg_command_decode(buf, len, &out);
    if (rc == 0) {
      accepted++;
      uint8_t again[HG_COMMAND_MAX_ENCODED];
      size_t alen = 0;
      assert_int_equal(hg_command_encode(&out, again, sizeof again, &alen), 0);
      hg_command_t out2;
      assert_int_equal(hg_command_decode(again, alen, &out2), 0);
      assert_memory_equal(&out2, &out, sizeof out);
    } else {
      assert_true(rc == HG_EPARSE || rc == HG_ERANGE);
      refused++;
    }
  }
  assert_true(accepted > 0 && refused > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_every_type),
      cmocka_unit_test(test_encode_errors),
      cmocka_unit_test(test_bad_enums),
      cmocka_unit_test(test_settlement_ranges),
      cmocka_unit_test(test_missing_fields_and_garbage),
      cmocka_unit_test(test_mutations_never_crash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
