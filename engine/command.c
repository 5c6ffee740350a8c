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
 * Only fully validated values reach *out.
 */
#include "hourglass/error.h"
#include "hourglass/exchange.h"

#include <stdalign.h>
#include <string.h>

#include "hourglass.pb-c.h"

/* ------------------------------------------------------------------------ */
/* Stack arena for protobuf-c                                                */
/* ------------------------------------------------------------------------ */

/* Comfortably above what a 256-byte message can unpack into (the Command,
 * one body message, a symbol), with room for protobuf-c's unknown-field
 * bookkeeping so that such input fails validation rather than allocation. */
#define ARENA_BYTES 8192

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

int hg_command_encode(const hg_command_t *cmd, uint8_t *buf, size_t cap, size_t *len) {
  Hourglass__V1__Command m = HOURGLASS__V1__COMMAND__INIT;
  Hourglass__V1__NewOrder no = HOURGLASS__V1__NEW_ORDER__INIT;
  Hourglass__V1__Cancel cx = HOURGLASS__V1__CANCEL__INIT;
  Hourglass__V1__Replace rp = HOURGLASS__V1__REPLACE__INIT;
  Hourglass__V1__MassCancel mc = HOURGLASS__V1__MASS_CANCEL__INIT;
  Hourglass__V1__ListInstrument li = HOURGLASS__V1__LIST_INSTRUMENT__INIT;
  Hourglass__V1__DelistInstrument dl = HOURGLASS__V1__DELIST_INSTRUMENT__INIT;
  Hourglass__V1__Halt ha = HOURGLASS__V1__HALT__INIT;
  Hourglass__V1__Resume re = HOURGLASS__V1__RESUME__INIT;
  Hourglass__V1__EndOfSession eos = HOURGLASS__V1__END_OF_SESSION__INIT;
  Hourglass__V1__AddAccount aa = HOURGLASS__V1__ADD_ACCOUNT__INIT;
  Hourglass__V1__Deposit de = HOURGLASS__V1__DEPOSIT__INIT;
  Hourglass__V1__Withdraw wi = HOURGLASS__V1__WITHDRAW__INIT;

  m.seq = cmd->seq;
  m.ts = cmd->ts;
  switch (cmd->type) {
  case HG_COMMAND_NEW_ORDER: {
    const hg_cmd_new_order_t *c = &cmd->u.new_order;
    no.instrument_id = c->instrument_id;
    no.account = c->account;
    no.client_order_id = c->client_order_id;
    no.side = (Hourglass__V1__Side)c->side;
    no.type = (Hourglass__V1__OrdType)c->type;
    no.tif = (Hourglass__V1__TimeInForce)c->tif;
    no.has_price = c->type == HG_ORD_LIMIT;
    no.price = no.has_price ? c->price : 0;
    no.qty = c->qty;
    no.has_stp = c->stp != HG_STP_DEFAULT;
    no.stp = (Hourglass__V1__StpMode)c->stp;
    no.has_post_only = c->post_only != 0;
    no.post_only = c->post_only != 0;
    no.has_smp_group = c->smp_group != 0;
    no.smp_group = c->smp_group;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_NEW_ORDER;
    m.new_order = &no;
    break;
  }
  case HG_COMMAND_CANCEL:
    cx.instrument_id = cmd->u.cancel.instrument_id;
    cx.account = cmd->u.cancel.account;
    cx.order_id = cmd->u.cancel.order_id;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_CANCEL;
    m.cancel = &cx;
    break;
  case HG_COMMAND_REPLACE:
    rp.instrument_id = cmd->u.replace.instrument_id;
    rp.account = cmd->u.replace.account;
    rp.order_id = cmd->u.replace.order_id;
    rp.new_price = cmd->u.replace.new_price;
    rp.new_qty = cmd->u.replace.new_qty;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_REPLACE;
    m.replace = &rp;
    break;
  case HG_COMMAND_MASS_CANCEL:
    mc.account = cmd->u.mass_cancel.account;
    mc.has_instrument_id = cmd->u.mass_cancel.instrument_id != 0;
    mc.instrument_id = cmd->u.mass_cancel.instrument_id;
    mc.has_sides = cmd->u.mass_cancel.sides != HG_SIDES_BOTH;
    mc.sides = (Hourglass__V1__SideFilter)cmd->u.mass_cancel.sides;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_MASS_CANCEL;
    m.mass_cancel = &mc;
    break;
  case HG_COMMAND_LIST_INSTRUMENT: {
    const hg_cmd_list_instrument_t *c = &cmd->u.list;
    if (memchr(c->symbol, '\0', sizeof c->symbol) == NULL) return HG_EINVAL;
    li.instrument_id = c->params.instrument_id;
    li.symbol = (char *)c->symbol; /* protobuf-c only reads it when packing */
    li.tick_size = c->params.tick_size;
    li.contract_unit = c->params.contract_unit;
    li.min_price = c->params.min_price;
    li.max_price = c->params.max_price;
    li.max_order_qty = c->params.max_order_qty;
    li.has_ref_price = c->params.ref_price != 0;
    li.ref_price = c->params.ref_price;
    li.has_band_bps = c->params.band_bps != 0;
    li.band_bps = c->params.band_bps;
    li.max_orders = c->params.max_orders;
    li.max_accounts = c->params.max_accounts;
    li.has_default_stp = c->params.default_stp != 0;
    li.default_stp = (Hourglass__V1__StpMode)c->params.default_stp;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_LIST_INSTRUMENT;
    m.list_instrument = &li;
    break;
  }
  case HG_COMMAND_DELIST_INSTRUMENT:
    dl.instrument_id = cmd->u.instrument.instrument_id;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_DELIST_INSTRUMENT;
    m.delist_instrument = &dl;
    break;
  case HG_COMMAND_HALT:
    ha.instrument_id = cmd->u.instrument.instrument_id;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_HALT;
    m.halt = &ha;
    break;
  case HG_COMMAND_RESUME:
    re.instrument_id = cmd->u.instrument.instrument_id;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_RESUME;
    m.resume = &re;
    break;
  case HG_COMMAND_END_OF_SESSION:
    eos.has_session_date = cmd->u.end_of_session.session_date != 0;
    eos.session_date = cmd->u.end_of_session.session_date;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_END_OF_SESSION;
    m.end_of_session = &eos;
    break;
  case HG_COMMAND_ADD_ACCOUNT:
    aa.account = cmd->u.add_account.account;
    aa.firm = cmd->u.add_account.firm;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_ADD_ACCOUNT;
    m.add_account = &aa;
    break;
  case HG_COMMAND_DEPOSIT:
    de.account = cmd->u.cash.account;
    de.amount = cmd->u.cash.amount;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_DEPOSIT;
    m.deposit = &de;
    break;
  case HG_COMMAND_WITHDRAW:
    wi.account = cmd->u.cash.account;
    wi.amount = cmd->u.cash.amount;
    m.body_case = HOURGLASS__V1__COMMAND__BODY_WITHDRAW;
    m.withdraw = &wi;
    break;
  default:
    return HG_EINVAL;
  }
  size_t need = protobuf_c_message_get_packed_size(&m.base);
  if (need > cap) return HG_EFULL;
  *len = protobuf_c_message_pack(&m.base, buf);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Decode                                                                    */
/* ------------------------------------------------------------------------ */

static int symbol_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > HG_SYMBOL_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '-' || c == '_';
    if (!ok) return 0;
  }
  return 1;
}

/* Enum values arrive as raw ints: protobuf-c does not range-check them. */
static int enum_ok(int v, int max) { return v >= 0 && v <= max; }

static int decode_body(const Hourglass__V1__Command *m, hg_command_t *out) {
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
  case HOURGLASS__V1__COMMAND__BODY_LIST_INSTRUMENT: {
    const Hourglass__V1__ListInstrument *b = m->list_instrument;
    if (b->base.n_unknown_fields) return HG_EPARSE;
    if (b->symbol == NULL || !symbol_ok(b->symbol)) return HG_ERANGE;
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
    c->params.band_bps = b->has_band_bps ? b->band_bps : 0;
    c->params.max_orders = b->max_orders;
    c->params.max_accounts = b->max_accounts;
    c->params.default_stp = b->has_default_stp ? (uint8_t)b->default_stp : 0;
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
  default:
    return HG_EPARSE; /* no body, or one this build does not know */
  }
}

int hg_command_decode(const uint8_t *buf, size_t len, hg_command_t *out) {
  memset(out, 0, sizeof *out);
  if (buf == NULL || len == 0 || len > HG_COMMAND_MAX_ENCODED) return HG_EPARSE;
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
  default: return "UNKNOWN";
  }
}
