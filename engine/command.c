/*
 * Commands: hg_command_t <-> hourglass.v1.Command protobuf.
 *
 * The C struct is what the engine applies; the protobuf is what the journal
 * stores. Encoding builds the generated message on the stack, pointing into
 * the caller's struct, and packs it into the caller's buffer: no allocation.
 * Decoding treats the bytes as hostile: a size cap, protobuf-c unpack through
 * a fixed stack arena (so a crafted message can exhaust only the arena, never
 * the heap), then every check protobuf-c does not make itself: unknown
 * fields, a body present, enum values in range, symbol syntax, seq > 0.
 * Only fully validated values reach *out. In front of protobuf-c sits a
 * direct reader of the wire bytes for the frequent commands (see "Fast
 * path"), which hands everything but the plain case to protobuf-c. The
 * encoder has a direct writer too, for the order commands (see "Fast
 * encoder"): same bytes as protobuf-c, without its descriptor walk.
 */
#include "hourglass/error.h"
#include "hourglass/exchange.h"
#include "hourglass/names.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <string.h>

#include "command_internal.h"
#include "hourglass.pb-c.h"

/* ------------------------------------------------------------------------ */
/* Stack arena for protobuf-c                                                */
/* ------------------------------------------------------------------------ */

/* Comfortably above what a 1 KiB message can unpack into (the Command, one
 * body message, up to four samples with their strings), with room for protobuf-c's unknown-field
 * bookkeeping so that such input fails validation rather than allocation. */
#define ARENA_BYTES 16384

typedef struct arena {
  alignas(max_align_t) uint8_t mem[ARENA_BYTES];
  size_t used;
} arena_t;

static void *arena_alloc(void *data, size_t size) {
  arena_t *a = data;
  size_t align = alignof(max_align_t);
  size_t start = (a->used + align - 1) & ~(align - 1);
  if (size > ARENA_BYTES || start > ARENA_BYTES - size) return NULL;
  a->used = start + size;
  return a->mem + start;
}

static void arena_free(void *data, void *ptr) {
  (void)data;
  (void)ptr; /* the whole arena dies with the decode call */
}

/* ------------------------------------------------------------------------ */
/* Encode                                                                    */
/* ------------------------------------------------------------------------ */

/* A fixed-size string field holds its NUL. */
#define STR_TERM(a) (memchr((a), '\0', sizeof(a)) != NULL)

/* Returned by the per-family encoders and decoders for a command (or body)
 * of another family; every real result is 0 or negative. */
#define NOT_MINE 1

/* The message bodies encode_full() may point its Command at; they live in
 * its frame while protobuf-c packs. */
typedef struct enc_bodies {
  Hourglass__V1__NewOrder no;
  Hourglass__V1__Cancel cx;
  Hourglass__V1__Replace rp;
  Hourglass__V1__MassCancel mc;
  Hourglass__V1__ListInstrument li;
  Hourglass__V1__DelistInstrument dl;
  Hourglass__V1__Halt ha;
  Hourglass__V1__Resume re;
  Hourglass__V1__EndOfSession eos;
  Hourglass__V1__AddAccount aa;
  Hourglass__V1__Deposit de;
  Hourglass__V1__Withdraw wi;
  Hourglass__V1__ProviderGrade pg;
  Hourglass__V1__PublishSamples ps;
  Hourglass__V1__IndexSample smp[HG_SAMPLES_PER_COMMAND];
  Hourglass__V1__IndexSample *smp_ptr[HG_SAMPLES_PER_COMMAND];
  Hourglass__V1__IndexDay idd;
  Hourglass__V1__PublishFixing pf;
  Hourglass__V1__DailySettlement ds;
  Hourglass__V1__Expire ep;
  Hourglass__V1__ListCurve lc;
  Hourglass__V1__SessionsEnded se;
  Hourglass__V1__Mark mk;
  Hourglass__V1__FundDeposit fd;
} enc_bodies_t;

/* Order commands into m. 0, HG_EINVAL, or NOT_MINE for another family's command. */
static int encode_order(const hg_command_t *cmd, Hourglass__V1__Command *m, enc_bodies_t *b) {
  switch (cmd->type) {
  case HG_COMMAND_NEW_ORDER: {
    const hg_cmd_new_order_t *c = &cmd->u.new_order;
    b->no.instrument_id = c->instrument_id;
    b->no.account = c->account;
    b->no.client_order_id = c->client_order_id;
    b->no.side = (Hourglass__V1__Side)c->side;
    b->no.type = (Hourglass__V1__OrdType)c->type;
    b->no.tif = (Hourglass__V1__TimeInForce)c->tif;
    b->no.has_price = c->type == HG_ORD_LIMIT;
    b->no.price = b->no.has_price ? c->price : 0;
    b->no.qty = c->qty;
    b->no.has_stp = c->stp != HG_STP_DEFAULT;
    b->no.stp = (Hourglass__V1__StpMode)c->stp;
    b->no.has_post_only = c->post_only != 0;
    b->no.post_only = c->post_only != 0;
    b->no.has_smp_group = c->smp_group != 0;
    b->no.smp_group = c->smp_group;
    b->no.has_session_scoped = c->session_scoped != 0;
    b->no.session_scoped = c->session_scoped != 0;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_NEW_ORDER;
    m->new_order = &b->no;
    break;
  }
  case HG_COMMAND_CANCEL:
    b->cx.instrument_id = cmd->u.cancel.instrument_id;
    b->cx.account = cmd->u.cancel.account;
    b->cx.order_id = cmd->u.cancel.order_id;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_CANCEL;
    m->cancel = &b->cx;
    break;
  case HG_COMMAND_REPLACE:
    b->rp.instrument_id = cmd->u.replace.instrument_id;
    b->rp.account = cmd->u.replace.account;
    b->rp.order_id = cmd->u.replace.order_id;
    b->rp.new_price = cmd->u.replace.new_price;
    b->rp.new_qty = cmd->u.replace.new_qty;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_REPLACE;
    m->replace = &b->rp;
    break;
  case HG_COMMAND_MASS_CANCEL:
    b->mc.account = cmd->u.mass_cancel.account;
    b->mc.has_instrument_id = cmd->u.mass_cancel.instrument_id != 0;
    b->mc.instrument_id = cmd->u.mass_cancel.instrument_id;
    b->mc.has_sides = cmd->u.mass_cancel.sides != HG_SIDES_BOTH;
    b->mc.sides = (Hourglass__V1__SideFilter)cmd->u.mass_cancel.sides;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_MASS_CANCEL;
    m->mass_cancel = &b->mc;
    break;
  default:
    return NOT_MINE;
  }
  return 0;
}

/* Operator commands (listing, halts, sessions, accounts, cash) into m. 0, HG_EINVAL, or NOT_MINE for another family's command. */
static int encode_admin(const hg_command_t *cmd, Hourglass__V1__Command *m, enc_bodies_t *b) {
  switch (cmd->type) {
  case HG_COMMAND_LIST_INSTRUMENT: {
    const hg_cmd_list_instrument_t *c = &cmd->u.list;
    if (memchr(c->symbol, '\0', sizeof c->symbol) == NULL) return HG_EINVAL;
    b->li.instrument_id = c->params.instrument_id;
    b->li.symbol = (char *)c->symbol; /* protobuf-c only reads it when packing */
    b->li.tick_size = c->params.tick_size;
    b->li.contract_unit = c->params.contract_unit;
    b->li.min_price = c->params.min_price;
    b->li.max_price = c->params.max_price;
    b->li.max_order_qty = c->params.max_order_qty;
    b->li.has_ref_price = c->params.ref_price != 0;
    b->li.ref_price = c->params.ref_price;
    b->li.max_orders = c->params.max_orders;
    b->li.max_accounts = c->params.max_accounts;
    b->li.has_default_stp = c->params.default_stp != 0;
    b->li.default_stp = (Hourglass__V1__StpMode)c->params.default_stp;
    b->li.has_leg_token_id = c->leg_token_id != 0;
    b->li.leg_token_id = c->leg_token_id;
    b->li.has_leg_gpu_id = c->leg_gpu_id != 0;
    b->li.leg_gpu_id = c->leg_gpu_id;
    b->li.has_ratio_token = c->ratio_token != 0;
    b->li.ratio_token = c->ratio_token;
    b->li.has_ratio_gpu = c->ratio_gpu != 0;
    b->li.ratio_gpu = c->ratio_gpu;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_LIST_INSTRUMENT;
    m->list_instrument = &b->li;
    break;
  }
  case HG_COMMAND_DELIST_INSTRUMENT:
    b->dl.instrument_id = cmd->u.instrument.instrument_id;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_DELIST_INSTRUMENT;
    m->delist_instrument = &b->dl;
    break;
  case HG_COMMAND_HALT:
    b->ha.instrument_id = cmd->u.instrument.instrument_id;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_HALT;
    m->halt = &b->ha;
    break;
  case HG_COMMAND_RESUME:
    b->re.instrument_id = cmd->u.instrument.instrument_id;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_RESUME;
    m->resume = &b->re;
    break;
  case HG_COMMAND_END_OF_SESSION:
    b->eos.has_session_date = cmd->u.end_of_session.session_date != 0;
    b->eos.session_date = cmd->u.end_of_session.session_date;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_END_OF_SESSION;
    m->end_of_session = &b->eos;
    break;
  case HG_COMMAND_ADD_ACCOUNT:
    b->aa.account = cmd->u.add_account.account;
    b->aa.firm = cmd->u.add_account.firm;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_ADD_ACCOUNT;
    m->add_account = &b->aa;
    break;
  case HG_COMMAND_DEPOSIT:
    b->de.account = cmd->u.cash.account;
    b->de.amount = cmd->u.cash.amount;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_DEPOSIT;
    m->deposit = &b->de;
    break;
  case HG_COMMAND_WITHDRAW:
    b->wi.account = cmd->u.cash.account;
    b->wi.amount = cmd->u.cash.amount;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_WITHDRAW;
    m->withdraw = &b->wi;
    break;
  case HG_COMMAND_SESSIONS_ENDED:
    m->body_case = HOURGLASS__V1__COMMAND__BODY_SESSIONS_ENDED;
    m->sessions_ended = &b->se;
    break;
  default:
    return NOT_MINE;
  }
  return 0;
}

/* Settlement commands (grades, samples, fixings, cycle, expiry, curve) into m. 0, HG_EINVAL, or NOT_MINE for another family's command. */
static int encode_settlement(const hg_command_t *cmd, Hourglass__V1__Command *m, enc_bodies_t *b) {
  switch (cmd->type) {
  case HG_COMMAND_SET_PROVIDER_GRADE: {
    const hg_cmd_provider_grade_t *c = &cmd->u.provider_grade;
    if (!STR_TERM(c->provider) || !STR_TERM(c->gpu) || !STR_TERM(c->grade)) return HG_EINVAL;
    b->pg.provider = (char *)c->provider;
    b->pg.gpu = (char *)c->gpu;
    b->pg.grade = (char *)c->grade;
    b->pg.effective_day = c->effective_day;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_SET_PROVIDER_GRADE;
    m->set_provider_grade = &b->pg;
    break;
  }
  case HG_COMMAND_PUBLISH_SAMPLES: {
    const hg_cmd_samples_t *c = &cmd->u.samples;
    if (!STR_TERM(c->gpu) || !STR_TERM(c->grade) || c->n > HG_SAMPLES_PER_COMMAND)
      return HG_EINVAL;
    for (uint32_t i = 0; i < c->n; i++) {
      const hg_index_sample_t *x = &c->s[i];
      if (!STR_TERM(x->provider) || !STR_TERM(x->region) || !STR_TERM(x->gpu) ||
          !STR_TERM(x->grade))
        return HG_EINVAL;
      hourglass__v1__index_sample__init(&b->smp[i]);
      b->smp[i].ts = x->ts;
      b->smp[i].provider = (char *)x->provider;
      b->smp[i].region = (char *)x->region;
      b->smp[i].gpu = (char *)x->gpu;
      b->smp[i].grade = (char *)x->grade;
      b->smp[i].term_days = x->term_days;
      b->smp[i].price = x->price;
      b->smp[i].volume = x->volume;
      b->smp[i].kind = (Hourglass__V1__SampleKind)x->kind;
      b->smp_ptr[i] = &b->smp[i];
    }
    b->ps.gpu = (char *)c->gpu;
    b->ps.grade = (char *)c->grade;
    b->ps.day = c->day;
    b->ps.n_samples = c->n;
    b->ps.samples = b->smp_ptr;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_PUBLISH_SAMPLES;
    m->publish_samples = &b->ps;
    break;
  }
  case HG_COMMAND_DISCARD_SAMPLES:
  case HG_COMMAND_COMPUTE_FIXING:
  case HG_COMMAND_FINALIZE_FIXING: {
    const hg_cmd_index_day_t *c = &cmd->u.index_day;
    if (!STR_TERM(c->gpu) || !STR_TERM(c->grade)) return HG_EINVAL;
    b->idd.gpu = (char *)c->gpu;
    b->idd.grade = (char *)c->grade;
    b->idd.day = c->day;
    if (cmd->type == HG_COMMAND_DISCARD_SAMPLES) {
      m->body_case = HOURGLASS__V1__COMMAND__BODY_DISCARD_SAMPLES;
      m->discard_samples = &b->idd;
    } else if (cmd->type == HG_COMMAND_COMPUTE_FIXING) {
      m->body_case = HOURGLASS__V1__COMMAND__BODY_COMPUTE_FIXING;
      m->compute_fixing = &b->idd;
    } else {
      m->body_case = HOURGLASS__V1__COMMAND__BODY_FINALIZE_FIXING;
      m->finalize_fixing = &b->idd;
    }
    break;
  }
  case HG_COMMAND_PUBLISH_FIXING: {
    const hg_cmd_publish_fixing_t *c = &cmd->u.fixing;
    if (!STR_TERM(c->gpu) || !STR_TERM(c->grade) || !STR_TERM(c->source)) return HG_EINVAL;
    b->pf.gpu = (char *)c->gpu;
    b->pf.grade = (char *)c->grade;
    b->pf.day = c->day;
    b->pf.value = c->value;
    b->pf.source = (char *)c->source;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_PUBLISH_FIXING;
    m->publish_fixing = &b->pf;
    break;
  }
  case HG_COMMAND_DAILY_SETTLEMENT:
    b->ds.day = cmd->u.daily.day;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_DAILY_SETTLEMENT;
    m->daily_settlement = &b->ds;
    break;
  case HG_COMMAND_EXPIRE:
    b->ep.instrument_id = cmd->u.expire.instrument_id;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_EXPIRE;
    m->expire = &b->ep;
    break;
  case HG_COMMAND_MARK:
    m->body_case = HOURGLASS__V1__COMMAND__BODY_MARK;
    m->mark = &b->mk;
    break;
  case HG_COMMAND_FUND_DEPOSIT:
    b->fd.amount = cmd->u.fund.amount;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_FUND_DEPOSIT;
    m->fund_deposit = &b->fd;
    break;
  case HG_COMMAND_LIST_CURVE: {
    const hg_cmd_list_curve_t *c = &cmd->u.curve;
    if (!STR_TERM(c->gpu) || !STR_TERM(c->grade)) return HG_EINVAL;
    b->lc.gpu = (char *)c->gpu;
    b->lc.grade = (char *)c->grade;
    b->lc.year = c->year;
    b->lc.month = c->month;
    b->lc.first_instrument_id = c->first_instrument_id;
    b->lc.max_orders = c->max_orders;
    b->lc.max_accounts = c->max_accounts;
    b->lc.has_ref_price = c->ref_price != 0;
    b->lc.ref_price = c->ref_price;
    m->body_case = HOURGLASS__V1__COMMAND__BODY_LIST_CURVE;
    m->list_curve = &b->lc;
    break;
  }
  default:
    return NOT_MINE;
  }
  return 0;
}

/* The protobuf-c path: any command. */
static int encode_full(const hg_command_t *cmd, uint8_t *buf, size_t cap, size_t *len) {
  Hourglass__V1__Command m = HOURGLASS__V1__COMMAND__INIT;
  /* smp[] and smp_ptr[] are zeroed too (the rest of a designated
   * initializer); only PUBLISH_SAMPLES fills them. */
  enc_bodies_t bd = {
      .no = HOURGLASS__V1__NEW_ORDER__INIT,
      .cx = HOURGLASS__V1__CANCEL__INIT,
      .rp = HOURGLASS__V1__REPLACE__INIT,
      .mc = HOURGLASS__V1__MASS_CANCEL__INIT,
      .li = HOURGLASS__V1__LIST_INSTRUMENT__INIT,
      .dl = HOURGLASS__V1__DELIST_INSTRUMENT__INIT,
      .ha = HOURGLASS__V1__HALT__INIT,
      .re = HOURGLASS__V1__RESUME__INIT,
      .eos = HOURGLASS__V1__END_OF_SESSION__INIT,
      .aa = HOURGLASS__V1__ADD_ACCOUNT__INIT,
      .de = HOURGLASS__V1__DEPOSIT__INIT,
      .wi = HOURGLASS__V1__WITHDRAW__INIT,
      .pg = HOURGLASS__V1__PROVIDER_GRADE__INIT,
      .ps = HOURGLASS__V1__PUBLISH_SAMPLES__INIT,
      .idd = HOURGLASS__V1__INDEX_DAY__INIT,
      .pf = HOURGLASS__V1__PUBLISH_FIXING__INIT,
      .ds = HOURGLASS__V1__DAILY_SETTLEMENT__INIT,
      .ep = HOURGLASS__V1__EXPIRE__INIT,
      .lc = HOURGLASS__V1__LIST_CURVE__INIT,
      .se = HOURGLASS__V1__SESSIONS_ENDED__INIT,
      .mk = HOURGLASS__V1__MARK__INIT,
      .fd = HOURGLASS__V1__FUND_DEPOSIT__INIT,
  };
  m.seq = cmd->seq;
  m.ts = cmd->ts;
  int rc = encode_order(cmd, &m, &bd);
  if (rc == NOT_MINE) rc = encode_admin(cmd, &m, &bd);
  if (rc == NOT_MINE) rc = encode_settlement(cmd, &m, &bd);
  if (rc != 0) return rc == NOT_MINE ? HG_EINVAL : rc;
  size_t need = protobuf_c_message_get_packed_size(&m.base);
  if (need > cap) return HG_EFULL;
  *len = protobuf_c_message_pack(&m.base, buf);
  return 0;
}

int hg_command__encode_full(const hg_command_t *cmd, uint8_t *buf, size_t cap, size_t *len) {
  return encode_full(cmd, buf, cap, len);
}

/* ------------------------------------------------------------------------ */
/* Fast encoder                                                              */
/* ------------------------------------------------------------------------ */

/*
 * The sequencer encodes every order command for the journal; protobuf-c
 * walks the descriptors twice for that (size, then pack). Here the four order
 * commands are written directly, field by field in field-number order, with
 * exactly the presence encode_full() gives them, so the journal's bytes do
 * not change. What makes the bytes equal is protobuf-c's wire format for
 * these types: uint32/uint64 and int64 as plain varints (a negative int64 as
 * ten bytes, since int64 is not zigzag-encoded), enums as int32 varints (ours
 * come from uint8_t fields, so never negative), bool as one byte 0/1, a body
 * as tag, one-byte length, bytes. The layout this assumes is checked once
 * against the generated descriptors (layout_ok()); if the .proto ever
 * disagrees, every command takes encode_full().
 *
 * Bounds on the output: NewOrder body 12 one-byte tags + 5+5+10+2+2+2+10+10+
 * 2+1+5+1 value bytes = 67 (66 is reached: type takes two bytes only when it
 * is not LIMIT, and then there is no price); Replace 5 + 40 = 45; Cancel
 * 3 + 20 = 23; MassCancel 3 + 12 = 15. Command: seq 11 + ts 11 + tag 1 +
 * length 1 + 67 = 91.
 */
#define FAST_BODY_MAX 67u
#define FAST_MAX 91u
_Static_assert(FAST_BODY_MAX < 0x80, "a fast body's length is a one-byte varint");
_Static_assert(FAST_MAX <= HG_COMMAND_MAX_ENCODED, "fast output fits the documented bound");

static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80u) {
    *p++ = (uint8_t)(v | 0x80u);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* Varint fields only: tag (field << 3 | 0) fits one byte for fields 1..15. */
static inline uint8_t *put_field(uint8_t *p, uint8_t field, uint64_t v) {
  *p++ = (uint8_t)(field << 3);
  return put_varint(p, v);
}

/* int64 is sign-extended to 64 bits before the varint (protobuf's int64). */
static inline uint8_t *put_i64(uint8_t *p, uint8_t field, int64_t v) {
  return put_field(p, field, (uint64_t)v);
}

static uint8_t *put_new_order(uint8_t *p, const hg_cmd_new_order_t *c) {
  p = put_field(p, 1, c->instrument_id);
  p = put_field(p, 2, c->account);
  p = put_field(p, 3, c->client_order_id);
  p = put_field(p, 4, c->side);
  p = put_field(p, 5, c->type);
  p = put_field(p, 6, c->tif);
  if (c->type == HG_ORD_LIMIT) p = put_i64(p, 7, c->price);
  p = put_i64(p, 8, c->qty);
  if (c->stp != HG_STP_DEFAULT) p = put_field(p, 9, c->stp);
  if (c->post_only != 0) p = put_field(p, 10, 1);
  if (c->smp_group != 0) p = put_field(p, 11, c->smp_group);
  if (c->session_scoped != 0) p = put_field(p, 12, 1);
  return p;
}

static uint8_t *put_cancel(uint8_t *p, const hg_cmd_cancel_t *c) {
  p = put_field(p, 1, c->instrument_id);
  p = put_field(p, 2, c->account);
  return put_field(p, 3, c->order_id);
}

static uint8_t *put_replace(uint8_t *p, const hg_cmd_replace_t *c) {
  p = put_field(p, 1, c->instrument_id);
  p = put_field(p, 2, c->account);
  p = put_field(p, 3, c->order_id);
  p = put_i64(p, 4, c->new_price);
  return put_i64(p, 5, c->new_qty);
}

static uint8_t *put_mass_cancel(uint8_t *p, const hg_cmd_mass_cancel_t *c) {
  p = put_field(p, 1, c->account);
  if (c->instrument_id != 0) p = put_field(p, 2, c->instrument_id);
  if (c->sides != HG_SIDES_BOTH) p = put_field(p, 3, c->sides);
  return p;
}

/* cmd->type is one of the four; out has FAST_MAX bytes. Returns the length. */
static size_t encode_fast(const hg_command_t *cmd, uint8_t *out) {
  uint8_t *p = put_field(out, 1, cmd->seq);
  p = put_field(p, 2, cmd->ts);
  *p++ = (uint8_t)(cmd->type << 3 | 2); /* the body's field number is its type */
  uint8_t *body = p + 1;
  uint8_t *end;
  switch (cmd->type) {
  case HG_COMMAND_NEW_ORDER: end = put_new_order(body, &cmd->u.new_order); break;
  case HG_COMMAND_CANCEL: end = put_cancel(body, &cmd->u.cancel); break;
  case HG_COMMAND_REPLACE: end = put_replace(body, &cmd->u.replace); break;
  default: end = put_mass_cancel(body, &cmd->u.mass_cancel); break;
  }
  *p = (uint8_t)(end - body);
  return (size_t)(end - out);
}

/* One field of a message as the fast encoder writes it. */
typedef struct field_spec {
  uint32_t id;
  ProtobufCLabel label;
  ProtobufCType type;
} field_spec_t;

#define REQ PROTOBUF_C_LABEL_REQUIRED
#define OPT PROTOBUF_C_LABEL_OPTIONAL
static const field_spec_t NEW_ORDER_SPEC[] = {
    {1, REQ, PROTOBUF_C_TYPE_UINT32}, {2, REQ, PROTOBUF_C_TYPE_UINT32},
    {3, REQ, PROTOBUF_C_TYPE_UINT64}, {4, REQ, PROTOBUF_C_TYPE_ENUM},
    {5, REQ, PROTOBUF_C_TYPE_ENUM},   {6, REQ, PROTOBUF_C_TYPE_ENUM},
    {7, OPT, PROTOBUF_C_TYPE_INT64},  {8, REQ, PROTOBUF_C_TYPE_INT64},
    {9, OPT, PROTOBUF_C_TYPE_ENUM},   {10, OPT, PROTOBUF_C_TYPE_BOOL},
    {11, OPT, PROTOBUF_C_TYPE_UINT32}, {12, OPT, PROTOBUF_C_TYPE_BOOL},
};
static const field_spec_t CANCEL_SPEC[] = {
    {1, REQ, PROTOBUF_C_TYPE_UINT32},
    {2, REQ, PROTOBUF_C_TYPE_UINT32},
    {3, REQ, PROTOBUF_C_TYPE_UINT64},
};
static const field_spec_t REPLACE_SPEC[] = {
    {1, REQ, PROTOBUF_C_TYPE_UINT32}, {2, REQ, PROTOBUF_C_TYPE_UINT32},
    {3, REQ, PROTOBUF_C_TYPE_UINT64}, {4, REQ, PROTOBUF_C_TYPE_INT64},
    {5, REQ, PROTOBUF_C_TYPE_INT64},
};
static const field_spec_t MASS_CANCEL_SPEC[] = {
    {1, REQ, PROTOBUF_C_TYPE_UINT32},
    {2, OPT, PROTOBUF_C_TYPE_UINT32},
    {3, OPT, PROTOBUF_C_TYPE_ENUM},
};
#undef REQ
#undef OPT

/* protobuf-c packs fields in the order of d->fields, so the order matters as
 * much as the numbers and types; a oneof inside a body would change presence. */
static int body_ok(const ProtobufCMessageDescriptor *d, const field_spec_t *want, size_t n) {
  if (d == NULL || d->n_fields != n) return 0;
  for (size_t i = 0; i < n; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->id != want[i].id || f->label != want[i].label || f->type != want[i].type ||
        (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
      return 0;
  }
  return 1;
}

int hg_command__encode_layout_ok(const struct ProtobufCMessageDescriptor *d) {
  static const struct {
    const field_spec_t *spec;
    size_t n;
  } bodies[4] = {
      {NEW_ORDER_SPEC, sizeof NEW_ORDER_SPEC / sizeof NEW_ORDER_SPEC[0]},
      {CANCEL_SPEC, sizeof CANCEL_SPEC / sizeof CANCEL_SPEC[0]},
      {REPLACE_SPEC, sizeof REPLACE_SPEC / sizeof REPLACE_SPEC[0]},
      {MASS_CANCEL_SPEC, sizeof MASS_CANCEL_SPEC / sizeof MASS_CANCEL_SPEC[0]},
  };
  if (d == NULL || d->n_fields < 6) return 0;
  const ProtobufCFieldDescriptor *f = d->fields;
  for (unsigned i = 0; i < 2; i++) { /* seq = 1, ts = 2 */
    if (f[i].id != i + 1 || f[i].label != PROTOBUF_C_LABEL_REQUIRED ||
        f[i].type != PROTOBUF_C_TYPE_UINT64 || (f[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
      return 0;
  }
  /* Every other field is a member of the body oneof, so only the selected
   * one is written, right after ts: fields 3..6 are the four bodies. */
  for (unsigned i = 2; i < d->n_fields; i++) {
    if (f[i].id <= f[i - 1].id || !(f[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
        f[i].quantifier_offset != f[2].quantifier_offset ||
        f[i].type != PROTOBUF_C_TYPE_MESSAGE)
      return 0;
  }
  for (unsigned i = 0; i < 4; i++) {
    if (f[2 + i].id != HG_COMMAND_NEW_ORDER + i ||
        !body_ok(f[2 + i].descriptor, bodies[i].spec, bodies[i].n))
      return 0;
  }
  return 1;
}

/* 1: the generated layout is the one the fast encoder writes. Decided once;
 * threads racing on the first call compute the same answer. */
static int fast_encode_ok(void) {
  static atomic_int state; /* 0 not yet checked, 1 fast, 2 protobuf-c only */
  /* relaxed: the flag publishes no other data, and its value is a pure
   * function of constant descriptors, so any thread may (re)compute it */
  int s = atomic_load_explicit(&state, memory_order_relaxed);
  if (s == 0) {
    s = hg_command__encode_layout_ok(&hourglass__v1__command__descriptor) ? 1 : 2;
    /* relaxed: as for the load above */
    atomic_store_explicit(&state, s, memory_order_relaxed);
  }
  return s == 1;
}

int hg_command__encode_fast_active(void) { return fast_encode_ok(); }

int hg_command_encode(const hg_command_t *cmd, uint8_t *buf, size_t cap, size_t *len) {
  uint32_t t = cmd->type;
  if (t >= HG_COMMAND_NEW_ORDER && t <= HG_COMMAND_MASS_CANCEL && fast_encode_ok()) {
    if (cap >= FAST_MAX) {
      *len = encode_fast(cmd, buf);
      return 0;
    }
    /* A small buffer: as encode_full(), nothing is written unless it fits. */
    uint8_t tmp[FAST_MAX];
    size_t n = encode_fast(cmd, tmp);
    if (n > cap) return HG_EFULL;
    memcpy(buf, tmp, n);
    *len = n;
    return 0;
  }
  return encode_full(cmd, buf, cap, len);
}

/* ------------------------------------------------------------------------ */
/* Decode                                                                    */
/* ------------------------------------------------------------------------ */


/* Enum values arrive as raw ints: protobuf-c does not range-check them. */
static int enum_ok(int v, int max) { return v >= 0 && v <= max; }

static int day_ok(int32_t d) { return d >= 0 && d <= HG_DAY_MAX; }

static void copy_str(char *dst, size_t cap, const char *src) {
  memset(dst, 0, cap);
  memcpy(dst, src, strlen(src) + 1); /* length checked by hg_name_ok/hg_text_ok */
}

static int decode_index_day(const Hourglass__V1__IndexDay *b, uint32_t type, hg_command_t *out) {
  if (b->base.n_unknown_fields) return HG_EPARSE;
  if (!hg_name_ok(b->gpu, HG_INDEX_GPU_MAX) || !hg_name_ok(b->grade, HG_INDEX_GRADE_MAX) ||
      !day_ok(b->day))
    return HG_ERANGE;
  out->type = type;
  copy_str(out->u.index_day.gpu, sizeof out->u.index_day.gpu, b->gpu);
  copy_str(out->u.index_day.grade, sizeof out->u.index_day.grade, b->grade);
  out->u.index_day.day = b->day;
  return 0;
}

static int decode_samples(const Hourglass__V1__PublishSamples *b, hg_command_t *out) {
  if (b->base.n_unknown_fields) return HG_EPARSE;
  if (!hg_name_ok(b->gpu, HG_INDEX_GPU_MAX) || !hg_name_ok(b->grade, HG_INDEX_GRADE_MAX) ||
      !day_ok(b->day) || b->n_samples == 0 || b->n_samples > HG_SAMPLES_PER_COMMAND)
    return HG_ERANGE;
  hg_cmd_samples_t *c = &out->u.samples;
  for (size_t i = 0; i < b->n_samples; i++) {
    const Hourglass__V1__IndexSample *x = b->samples[i];
    if (x->base.n_unknown_fields) return HG_EPARSE;
    if (!hg_text_ok(x->provider, HG_INDEX_PROVIDER_MAX) || !hg_text_ok(x->region, HG_INDEX_REGION_MAX) ||
        !hg_text_ok(x->gpu, HG_INDEX_GPU_MAX) || !hg_text_ok(x->grade, HG_INDEX_GRADE_MAX) ||
        (x->kind != HOURGLASS__V1__SAMPLE_KIND__SAMPLE_TRADE &&
         x->kind != HOURGLASS__V1__SAMPLE_KIND__SAMPLE_QUOTE) ||
        x->volume > HG_INDEX_VOLUME_MAX)
      return HG_ERANGE;
    hg_index_sample_t *d = &c->s[i];
    d->ts = x->ts;
    d->price = x->price;
    d->volume = x->volume;
    d->term_days = x->term_days;
    d->kind = x->kind == HOURGLASS__V1__SAMPLE_KIND__SAMPLE_TRADE ? HG_INDEX_TRADE : HG_INDEX_QUOTE;
    copy_str(d->provider, sizeof d->provider, x->provider);
    copy_str(d->region, sizeof d->region, x->region);
    copy_str(d->gpu, sizeof d->gpu, x->gpu);
    copy_str(d->grade, sizeof d->grade, x->grade);
  }
  out->type = HG_COMMAND_PUBLISH_SAMPLES;
  copy_str(c->gpu, sizeof c->gpu, b->gpu);
  copy_str(c->grade, sizeof c->grade, b->grade);
  c->day = b->day;
  c->n = (uint32_t)b->n_samples;
  return 0;
}

/* Order bodies. 0, an error, or NOT_MINE for another family's body. */
static int decode_order(const Hourglass__V1__Command *m, hg_command_t *out) {
  switch (m->body_case) {
  case HOURGLASS__V1__COMMAND__BODY_NEW_ORDER: {
    const Hourglass__V1__NewOrder *b = m->new_order;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    if (!enum_ok(b->side, HG_SIDE_SELL) || !enum_ok(b->type, HG_ORD_MARKET) ||
        !enum_ok(b->tif, HG_TIF_FOK) || (b->has_stp && !enum_ok(b->stp, HG_STP_NONE)))
      return HG_ERANGE;
    if ((int)b->type == HG_ORD_LIMIT && !b->has_price) return HG_ERANGE;
    hg_cmd_new_order_t *c = &out->u.new_order;
    out->type = HG_COMMAND_NEW_ORDER;
    c->instrument_id = b->instrument_id;
    c->account = b->account;
    c->client_order_id = b->client_order_id;
    c->smp_group = b->has_smp_group ? b->smp_group : 0;
    c->price = (int)b->type == HG_ORD_LIMIT ? b->price : 0;
    c->qty = b->qty;
    c->side = (uint8_t)b->side;
    c->type = (uint8_t)b->type;
    c->tif = (uint8_t)b->tif;
    c->stp = b->has_stp ? (uint8_t)b->stp : HG_STP_DEFAULT;
    c->post_only = b->has_post_only && b->post_only ? 1 : 0;
    c->session_scoped = b->has_session_scoped && b->session_scoped ? 1 : 0;
    return 0;
  }
  case HOURGLASS__V1__COMMAND__BODY_CANCEL: {
    const Hourglass__V1__Cancel *b = m->cancel;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_CANCEL;
    out->u.cancel.instrument_id = b->instrument_id;
    out->u.cancel.account = b->account;
    out->u.cancel.order_id = b->order_id;
    return 0;
  }
  case HOURGLASS__V1__COMMAND__BODY_REPLACE: {
    const Hourglass__V1__Replace *b = m->replace;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_REPLACE;
    out->u.replace.instrument_id = b->instrument_id;
    out->u.replace.account = b->account;
    out->u.replace.order_id = b->order_id;
    out->u.replace.new_price = b->new_price;
    out->u.replace.new_qty = b->new_qty;
    return 0;
  }
  case HOURGLASS__V1__COMMAND__BODY_MASS_CANCEL: {
    const Hourglass__V1__MassCancel *b = m->mass_cancel;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    if (b->has_sides && !enum_ok(b->sides, HG_SIDES_BOTH)) return HG_ERANGE;
    out->type = HG_COMMAND_MASS_CANCEL;
    out->u.mass_cancel.account = b->account;
    out->u.mass_cancel.instrument_id = b->has_instrument_id ? b->instrument_id : 0;
    out->u.mass_cancel.sides = b->has_sides ? (uint8_t)b->sides : HG_SIDES_BOTH;
    return 0;
  }
  default:
    return NOT_MINE;
  }
}

/* Operator bodies. 0, an error, or NOT_MINE for another family's body. */
static int decode_admin(const Hourglass__V1__Command *m, hg_command_t *out) {
  switch (m->body_case) {
  case HOURGLASS__V1__COMMAND__BODY_LIST_INSTRUMENT: {
    const Hourglass__V1__ListInstrument *b = m->list_instrument;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    if (b->symbol == NULL || !hg_symbol_ok(b->symbol, HG_SYMBOL_MAX + 1)) return HG_ERANGE;
    if (b->has_default_stp && !enum_ok(b->default_stp, HG_STP_NONE)) return HG_ERANGE;
    hg_cmd_list_instrument_t *c = &out->u.list;
    out->type = HG_COMMAND_LIST_INSTRUMENT;
    memcpy(c->symbol, b->symbol, strlen(b->symbol) + 1);
    c->params.instrument_id = b->instrument_id;
    c->params.tick_size = b->tick_size;
    c->params.contract_unit = b->contract_unit;
    c->params.min_price = b->min_price;
    c->params.max_price = b->max_price;
    c->params.max_order_qty = b->max_order_qty;
    c->params.ref_price = b->has_ref_price ? b->ref_price : 0;
    c->params.max_orders = b->max_orders;
    c->params.max_accounts = b->max_accounts;
    c->params.default_stp = b->has_default_stp ? (uint8_t)b->default_stp : 0;
    c->leg_token_id = b->has_leg_token_id ? b->leg_token_id : 0;
    c->leg_gpu_id = b->has_leg_gpu_id ? b->leg_gpu_id : 0;
    c->ratio_token = b->has_ratio_token ? b->ratio_token : 0;
    c->ratio_gpu = b->has_ratio_gpu ? b->ratio_gpu : 0;
    return 0;
  }
  case HOURGLASS__V1__COMMAND__BODY_DELIST_INSTRUMENT:
    if (m->delist_instrument->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_DELIST_INSTRUMENT;
    out->u.instrument.instrument_id = m->delist_instrument->instrument_id;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_HALT:
    if (m->halt->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_HALT;
    out->u.instrument.instrument_id = m->halt->instrument_id;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_RESUME:
    if (m->resume->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_RESUME;
    out->u.instrument.instrument_id = m->resume->instrument_id;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_END_OF_SESSION:
    if (m->end_of_session->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_END_OF_SESSION;
    out->u.end_of_session.session_date =
        m->end_of_session->has_session_date ? m->end_of_session->session_date : 0;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_ADD_ACCOUNT:
    if (m->add_account->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_ADD_ACCOUNT;
    out->u.add_account.account = m->add_account->account;
    out->u.add_account.firm = m->add_account->firm;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_DEPOSIT:
    if (m->deposit->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_DEPOSIT;
    out->u.cash.account = m->deposit->account;
    out->u.cash.amount = m->deposit->amount;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_WITHDRAW:
    if (m->withdraw->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_WITHDRAW;
    out->u.cash.account = m->withdraw->account;
    out->u.cash.amount = m->withdraw->amount;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_SESSIONS_ENDED:
    if (m->sessions_ended->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_SESSIONS_ENDED;
    return 0;
  default:
    return NOT_MINE;
  }
}

/* Settlement bodies. 0, an error, or NOT_MINE for another family's body. */
static int decode_settlement(const Hourglass__V1__Command *m, hg_command_t *out) {
  switch (m->body_case) {
  case HOURGLASS__V1__COMMAND__BODY_SET_PROVIDER_GRADE: {
    const Hourglass__V1__ProviderGrade *b = m->set_provider_grade;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    if (!hg_text_ok(b->provider, HG_INDEX_PROVIDER_MAX) || !hg_name_ok(b->gpu, HG_INDEX_GPU_MAX) ||
        !hg_name_ok(b->grade, HG_INDEX_GRADE_MAX) || !day_ok(b->effective_day))
      return HG_ERANGE;
    hg_cmd_provider_grade_t *c = &out->u.provider_grade;
    out->type = HG_COMMAND_SET_PROVIDER_GRADE;
    copy_str(c->provider, sizeof c->provider, b->provider);
    copy_str(c->gpu, sizeof c->gpu, b->gpu);
    copy_str(c->grade, sizeof c->grade, b->grade);
    c->effective_day = b->effective_day;
    return 0;
  }
  case HOURGLASS__V1__COMMAND__BODY_PUBLISH_SAMPLES:
    return decode_samples(m->publish_samples, out);
  case HOURGLASS__V1__COMMAND__BODY_DISCARD_SAMPLES:
    return decode_index_day(m->discard_samples, HG_COMMAND_DISCARD_SAMPLES, out);
  case HOURGLASS__V1__COMMAND__BODY_COMPUTE_FIXING:
    return decode_index_day(m->compute_fixing, HG_COMMAND_COMPUTE_FIXING, out);
  case HOURGLASS__V1__COMMAND__BODY_FINALIZE_FIXING:
    return decode_index_day(m->finalize_fixing, HG_COMMAND_FINALIZE_FIXING, out);
  case HOURGLASS__V1__COMMAND__BODY_PUBLISH_FIXING: {
    const Hourglass__V1__PublishFixing *b = m->publish_fixing;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    if (!hg_name_ok(b->gpu, HG_INDEX_GPU_MAX) || !hg_name_ok(b->grade, HG_INDEX_GRADE_MAX) ||
        !day_ok(b->day) || !hg_text_ok(b->source, HG_INDEX_SOURCE_MAX))
      return HG_ERANGE;
    hg_cmd_publish_fixing_t *c = &out->u.fixing;
    out->type = HG_COMMAND_PUBLISH_FIXING;
    copy_str(c->gpu, sizeof c->gpu, b->gpu);
    copy_str(c->grade, sizeof c->grade, b->grade);
    copy_str(c->source, sizeof c->source, b->source);
    c->day = b->day;
    c->value = b->value;
    return 0;
  }
  case HOURGLASS__V1__COMMAND__BODY_DAILY_SETTLEMENT:
    if (m->daily_settlement->base.n_unknown_fields) return HG_EPARSE;
    if (!day_ok(m->daily_settlement->day)) return HG_ERANGE;
    out->type = HG_COMMAND_DAILY_SETTLEMENT;
    out->u.daily.day = m->daily_settlement->day;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_EXPIRE:
    if (m->expire->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_EXPIRE;
    out->u.expire.instrument_id = m->expire->instrument_id;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_MARK:
    if (m->mark->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_MARK;
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_FUND_DEPOSIT:
    if (m->fund_deposit->base.n_unknown_fields) return HG_EPARSE;
    out->type = HG_COMMAND_FUND_DEPOSIT;
    out->u.fund.amount = m->fund_deposit->amount; /* the state machine checks > 0 */
    return 0;
  case HOURGLASS__V1__COMMAND__BODY_LIST_CURVE: {
    const Hourglass__V1__ListCurve *b = m->list_curve;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    if (!hg_name_ok(b->gpu, HG_INDEX_GPU_MAX) || !hg_name_ok(b->grade, HG_INDEX_GRADE_MAX) ||
        b->year < HG_CURVE_YEAR_MIN || b->year > HG_CURVE_YEAR_MAX || b->month < 1 ||
        b->month > 12)
      return HG_ERANGE;
    hg_cmd_list_curve_t *c = &out->u.curve;
    out->type = HG_COMMAND_LIST_CURVE;
    copy_str(c->gpu, sizeof c->gpu, b->gpu);
    copy_str(c->grade, sizeof c->grade, b->grade);
    c->year = (uint16_t)b->year;
    c->month = (uint8_t)b->month;
    c->first_instrument_id = b->first_instrument_id;
    c->max_orders = b->max_orders;
    c->max_accounts = b->max_accounts;
    c->ref_price = b->has_ref_price ? b->ref_price : 0;
    return 0;
  }
  default:
    return NOT_MINE;
  }
}

static int decode_body(const Hourglass__V1__Command *m, hg_command_t *out) {
  int rc = decode_order(m, out);
  if (rc == NOT_MINE) rc = decode_admin(m, out);
  if (rc == NOT_MINE) rc = decode_settlement(m, out);
  return rc == NOT_MINE ? HG_EPARSE : rc; /* no body, or one this build does not know */
}

/* ------------------------------------------------------------------------ */
/* Fast path                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Journal replay decodes millions of commands, nearly all of them orders,
 * cancels, replaces, mass cancels, cash movements and daily cycles. For
 * those, a direct reading of the same protobuf wire bytes. It only accepts
 * the plain case: each known field at most once with its declared wire type,
 * every required field present, varints no longer than their type needs,
 * values inside the ranges decode_body() checks. Anything else (unknown or
 * repeated fields, merged or several bodies, other commands, any error)
 * returns 0 and the caller runs the protobuf-c path, which then gives the
 * exact result or error. So on what it accepts it must agree with protobuf-c
 * plus decode_body() bit for bit (tests/engine/test_command.c checks that
 * over random and mutated messages).
 */

typedef struct wire {
  const uint8_t *p, *end;
} wire_t;

/* A varint of at most max_bytes bytes (10: any 64-bit value; a 10th byte
 * above 1 would set bits protobuf-c drops, so it is refused too). */
static int w_varint(wire_t *w, unsigned max_bytes, uint64_t *v) {
  uint64_t r = 0;
  for (unsigned i = 0; i < max_bytes; i++) {
    if (w->p == w->end) return 0;
    uint8_t b = *w->p++;
    if (i == 9 && b > 1) return 0;
    r |= (uint64_t)(b & 0x7fu) << (7u * i);
    if ((b & 0x80u) == 0) {
      *v = r;
      return 1;
    }
  }
  return 0;
}

/* Field number and wire type; tags of the fields read here fit 2 bytes. */
static int w_tag(wire_t *w, uint32_t *field, uint32_t *wt) {
  uint64_t t;
  if (!w_varint(w, 2, &t)) return 0;
  *field = (uint32_t)(t >> 3);
  *wt = (uint32_t)(t & 7u);
  return *field != 0;
}

static int w_u32(wire_t *w, uint32_t *v) {
  uint64_t x;
  if (!w_varint(w, 5, &x) || x > UINT32_MAX) return 0;
  *v = (uint32_t)x;
  return 1;
}

/* An enum value in [0, max] (negative values take 10 bytes: refused). */
static int w_enum(wire_t *w, uint32_t max, uint8_t *v) {
  uint64_t x;
  if (!w_varint(w, 5, &x) || x > max) return 0;
  *v = (uint8_t)x;
  return 1;
}

static int w_u64(wire_t *w, uint64_t *v) { return w_varint(w, 10, v); }

static int w_i64(wire_t *w, int64_t *v) {
  uint64_t x;
  if (!w_varint(w, 10, &x)) return 0;
  *v = (int64_t)x;
  return 1;
}

/* Walks the fields of one body message. Each field number 1..max_field may
 * appear once, as a varint; read(field) consumes its value. Returns the bit
 * set of the fields seen (bit f), or 0 on anything else. */
#define BODY_LOOP(w, max_field, seen, READ)                                    \
  do {                                                                         \
    while ((w)->p < (w)->end) {                                                \
      uint32_t f_, wt_;                                                        \
      if (!w_tag((w), &f_, &wt_) || wt_ != 0 || f_ > (max_field) ||            \
          ((seen) & (1u << f_)))                                               \
        return 0;                                                              \
      (seen) |= 1u << f_;                                                      \
      int ok_ = 0;                                                             \
      READ                                                                     \
      if (!ok_) return 0;                                                      \
    }                                                                          \
  } while (0)

static int fast_new_order(wire_t *w, hg_command_t *out) {
  hg_cmd_new_order_t *c = &out->u.new_order;
  uint32_t seen = 0;
  int64_t price = 0;
  uint8_t post_only = 0, scoped = 0;
  BODY_LOOP(w, 12, seen, {
    switch (f_) {
    case 1: ok_ = w_u32(w, &c->instrument_id); break;
    case 2: ok_ = w_u32(w, &c->account); break;
    case 3: ok_ = w_u64(w, &c->client_order_id); break;
    case 4: ok_ = w_enum(w, HG_SIDE_SELL, &c->side); break;
    case 5: ok_ = w_enum(w, HG_ORD_MARKET, &c->type); break;
    case 6: ok_ = w_enum(w, HG_TIF_FOK, &c->tif); break;
    case 7: ok_ = w_i64(w, &price); break;
    case 8: ok_ = w_i64(w, &c->qty); break;
    case 9: ok_ = w_enum(w, HG_STP_NONE, &c->stp); break;
    case 10: ok_ = w_enum(w, 1, &post_only); break;
    case 11: ok_ = w_u32(w, &c->smp_group); break;
    case 12: ok_ = w_enum(w, 1, &scoped); break;
    default: break;
    }
  });
  const uint32_t req = 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 8;
  if ((seen & req) != req) return 0;
  if (c->type == HG_ORD_LIMIT && !(seen & 1u << 7)) return 0;
  c->price = c->type == HG_ORD_LIMIT ? price : 0;
  c->post_only = post_only;
  c->session_scoped = scoped;
  out->type = HG_COMMAND_NEW_ORDER;
  return 1;
}

static int fast_cancel(wire_t *w, hg_command_t *out) {
  hg_cmd_cancel_t *c = &out->u.cancel;
  uint32_t seen = 0;
  BODY_LOOP(w, 3, seen, {
    switch (f_) {
    case 1: ok_ = w_u32(w, &c->instrument_id); break;
    case 2: ok_ = w_u32(w, &c->account); break;
    case 3: ok_ = w_u64(w, &c->order_id); break;
    default: break;
    }
  });
  if (seen != (1u << 1 | 1u << 2 | 1u << 3)) return 0;
  out->type = HG_COMMAND_CANCEL;
  return 1;
}

static int fast_replace(wire_t *w, hg_command_t *out) {
  hg_cmd_replace_t *c = &out->u.replace;
  uint32_t seen = 0;
  BODY_LOOP(w, 5, seen, {
    switch (f_) {
    case 1: ok_ = w_u32(w, &c->instrument_id); break;
    case 2: ok_ = w_u32(w, &c->account); break;
    case 3: ok_ = w_u64(w, &c->order_id); break;
    case 4: ok_ = w_i64(w, &c->new_price); break;
    case 5: ok_ = w_i64(w, &c->new_qty); break;
    default: break;
    }
  });
  if (seen != (1u << 1 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5)) return 0;
  out->type = HG_COMMAND_REPLACE;
  return 1;
}

static int fast_mass_cancel(wire_t *w, hg_command_t *out) {
  hg_cmd_mass_cancel_t *c = &out->u.mass_cancel;
  uint32_t seen = 0;
  c->sides = HG_SIDES_BOTH;
  BODY_LOOP(w, 3, seen, {
    switch (f_) {
    case 1: ok_ = w_u32(w, &c->account); break;
    case 2: ok_ = w_u32(w, &c->instrument_id); break;
    case 3: ok_ = w_enum(w, HG_SIDES_BOTH, &c->sides); break;
    default: break;
    }
  });
  if (!(seen & 1u << 1)) return 0;
  out->type = HG_COMMAND_MASS_CANCEL;
  return 1;
}

static int fast_cash(wire_t *w, uint32_t type, hg_command_t *out) {
  uint32_t seen = 0;
  BODY_LOOP(w, 2, seen, {
    switch (f_) {
    case 1: ok_ = w_u32(w, &out->u.cash.account); break;
    case 2: ok_ = w_i64(w, &out->u.cash.amount); break;
    default: break;
    }
  });
  if (seen != (1u << 1 | 1u << 2)) return 0;
  out->type = type;
  return 1;
}

static int fast_daily(wire_t *w, hg_command_t *out) {
  uint32_t seen = 0, day = 0;
  BODY_LOOP(w, 1, seen, {
    if (f_ == 1) ok_ = w_u32(w, &day);
  });
  if (seen != 1u << 1 || day > (uint32_t)HG_DAY_MAX) return 0;
  out->u.daily.day = (int32_t)day;
  out->type = HG_COMMAND_DAILY_SETTLEMENT;
  return 1;
}

static int decode_full(const uint8_t *buf, size_t len, hg_command_t *out);

/* 1: *out holds the decoded command; 0: use the protobuf-c path. */
static int decode_fast(const uint8_t *buf, size_t len, hg_command_t *out) {
  wire_t w = {buf, buf + len};
  uint64_t seq = 0, ts = 0;
  uint32_t seen = 0;
  wire_t body = {NULL, NULL};
  uint32_t body_field = 0;
  while (w.p < w.end) {
    uint32_t f, wt;
    if (!w_tag(&w, &f, &wt) || f > 31 || (seen & 1u << f)) return 0;
    seen |= 1u << f;
    if (f == 1 || f == 2) {
      if (wt != 0 || !w_u64(&w, f == 1 ? &seq : &ts)) return 0;
      continue;
    }
    if (wt != 2 || body_field != 0) return 0;
    uint64_t n;
    if (!w_varint(&w, 5, &n) || n > (uint64_t)(w.end - w.p)) return 0;
    body = (wire_t){w.p, w.p + n};
    body_field = f;
    w.p += n;
  }
  if (!(seen & 1u << 1) || !(seen & 1u << 2) || seq == 0) return 0;
  int ok;
  switch (body_field) {
  case 3: ok = fast_new_order(&body, out); break;
  case 4: ok = fast_cancel(&body, out); break;
  case 5: ok = fast_replace(&body, out); break;
  case 6: ok = fast_mass_cancel(&body, out); break;
  case 13: ok = fast_cash(&body, HG_COMMAND_DEPOSIT, out); break;
  case 14: ok = fast_cash(&body, HG_COMMAND_WITHDRAW, out); break;
  case 21: ok = fast_daily(&body, out); break;
  default: ok = 0; break;
  }
  if (!ok) return 0;
  out->seq = seq;
  out->ts = ts;
  return 1;
}

int hg_command_decode(const uint8_t *buf, size_t len, hg_command_t *out) {
  memset(out, 0, sizeof *out);
  if (buf == NULL || len == 0 || len > HG_COMMAND_MAX_ENCODED) return HG_EPARSE;
  if (decode_fast(buf, len, out)) return 0;
  memset(out, 0, sizeof *out); /* the fast path may have written some fields */
  return decode_full(buf, len, out);
}

/* The fast path writes nothing past the first FAST_BYTES of a command. */
#define FAST_BYTES 128u
_Static_assert(offsetof(hg_command_t, u) + sizeof(hg_cmd_new_order_t) <= FAST_BYTES &&
                   offsetof(hg_command_t, u) + sizeof(hg_cmd_cancel_t) <= FAST_BYTES &&
                   offsetof(hg_command_t, u) + sizeof(hg_cmd_replace_t) <= FAST_BYTES &&
                   offsetof(hg_command_t, u) + sizeof(hg_cmd_mass_cancel_t) <= FAST_BYTES &&
                   offsetof(hg_command_t, u) + sizeof(hg_cmd_cash_t) <= FAST_BYTES &&
                   offsetof(hg_command_t, u) + sizeof(hg_cmd_daily_settlement_t) <= FAST_BYTES,
               "the fast path's commands fit FAST_BYTES");

int hg_command__decode_prefix(const uint8_t *buf, size_t len, hg_command_t *out) {
  if (buf != NULL && len != 0 && len <= HG_COMMAND_MAX_ENCODED) {
    /* A fixed-size clear compiles to a few vector stores; the whole
     * command's memset was a rep stos whose stores the decoder's own
     * read-backs then waited on. */
    memset(out, 0, FAST_BYTES);
    if (decode_fast(buf, len, out)) return 0;
  }
  return hg_command_decode(buf, len, out);
}

int hg_command__decode_full(const uint8_t *buf, size_t len, hg_command_t *out) {
  memset(out, 0, sizeof *out);
  if (buf == NULL || len == 0 || len > HG_COMMAND_MAX_ENCODED) return HG_EPARSE;
  return decode_full(buf, len, out);
}

/* The protobuf-c path: any command, any valid encoding, every error. out is
 * zeroed. */
static int decode_full(const uint8_t *buf, size_t len, hg_command_t *out) {
  arena_t arena;
  arena.used = 0;
  ProtobufCAllocator alloc = {.alloc = arena_alloc, .free = arena_free, .allocator_data = &arena};
  Hourglass__V1__Command *m = hourglass__v1__command__unpack(&alloc, len, buf);
  if (m == NULL) return HG_EPARSE;
  int rc;
  if (m->base.n_unknown_fields) {
    rc = HG_EPARSE;
  } else if (m->seq == 0) {
    rc = HG_ERANGE;
  } else {
    rc = decode_body(m, out);
  }
  if (rc != 0) {
    memset(out, 0, sizeof *out);
    return rc;
  }
  out->seq = m->seq;
  out->ts = m->ts;
  return 0;
}

const char *hg_command_type_str(uint32_t type) {
  switch (type) {
  case HG_COMMAND_NEW_ORDER: return "NEW_ORDER";
  case HG_COMMAND_CANCEL: return "CANCEL";
  case HG_COMMAND_REPLACE: return "REPLACE";
  case HG_COMMAND_MASS_CANCEL: return "MASS_CANCEL";
  case HG_COMMAND_LIST_INSTRUMENT: return "LIST_INSTRUMENT";
  case HG_COMMAND_DELIST_INSTRUMENT: return "DELIST_INSTRUMENT";
  case HG_COMMAND_HALT: return "HALT";
  case HG_COMMAND_RESUME: return "RESUME";
  case HG_COMMAND_END_OF_SESSION: return "END_OF_SESSION";
  case HG_COMMAND_ADD_ACCOUNT: return "ADD_ACCOUNT";
  case HG_COMMAND_DEPOSIT: return "DEPOSIT";
  case HG_COMMAND_WITHDRAW: return "WITHDRAW";
  case HG_COMMAND_SET_PROVIDER_GRADE: return "SET_PROVIDER_GRADE";
  case HG_COMMAND_PUBLISH_SAMPLES: return "PUBLISH_SAMPLES";
  case HG_COMMAND_DISCARD_SAMPLES: return "DISCARD_SAMPLES";
  case HG_COMMAND_COMPUTE_FIXING: return "COMPUTE_FIXING";
  case HG_COMMAND_PUBLISH_FIXING: return "PUBLISH_FIXING";
  case HG_COMMAND_FINALIZE_FIXING: return "FINALIZE_FIXING";
  case HG_COMMAND_DAILY_SETTLEMENT: return "DAILY_SETTLEMENT";
  case HG_COMMAND_EXPIRE: return "EXPIRE";
  case HG_COMMAND_LIST_CURVE: return "LIST_CURVE";
  case HG_COMMAND_MARK: return "MARK";
  case HG_COMMAND_FUND_DEPOSIT: return "FUND_DEPOSIT";
  case HG_COMMAND_SESSIONS_ENDED: return "SESSIONS_ENDED";
  default: return "UNKNOWN";
  }
}
