/*
 * The exchange state machine.
 *
 * Structure: two arrays kept sorted by id, instruments (each owning its
 * hg_book_t) and accounts, searched by binary search. Sorted arrays give the
 * canonical iteration order (by id) for free, never depend on hash layout,
 * and cost a memmove only on listing, delisting and account creation, which
 * are operator commands; orders only search. Both arrays are allocated at
 * create from the config, so no order allocates.
 *
 * Every book is created with this file's book_sink and the exchange as its
 * context. While a command is applied, ex->cur holds its seq, ts and type so
 * that the sink can stamp book events into exchange events, and so that a
 * delisting can relabel the cancels it causes.
 *
 * The order path has two seams for the clearing library:
 *   risk_check_new_order / risk_check_replace  before the book,
 *   book_fills                                 for every fill the book emits,
 *   risk_check_withdraw                        before a withdrawal.
 * Today they implement the minimal rule set of the internal account table
 * (cash only, no margin); the settlement work replaces their bodies.
 *
 * Canonical serialization goes through one writer that either counts bytes,
 * copies them to a buffer, or feeds SHA-256 through a small staging buffer,
 * so the size, the blob and the hash can never disagree.
 */
#include "hourglass/exchange.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/sha256.h"

#define FORMAT_MAGIC 0x53584748u /* "HGXS" little-endian */

typedef struct instrument {
  uint32_t id;
  uint8_t halted;
  char symbol[HG_SYMBOL_MAX + 1];
  hg_book_t *book; /* owned by the exchange */
} instrument_t;

typedef struct account {
  hg_account_t id;
  uint32_t firm;
  int64_t cash; /* micro-USD */
} account_t;

/* A live order's identity, collected before a delisting cancels it. */
typedef struct order_ref {
  hg_oid_t order_id;
  hg_account_t account;
} order_ref_t;

typedef struct current {
  uint64_t seq;
  uint64_t ts;
  uint32_t type;
  int delisting;
} current_t;

struct hg_exchange {
  hg_exchange_config_t cfg;
  hg_exchange_sink_fn sink;
  void *sink_ctx;
  instrument_t *instr; /* owned; cfg.max_instruments slots, n_instr used, by id */
  uint32_t n_instr;
  account_t *acct;     /* owned; cfg.max_accounts slots, n_acct used, by id */
  uint32_t n_acct;
  order_ref_t *scratch; /* owned; cfg.max_book_orders slots, delisting only */
  uint32_t scratch_n;
  uint64_t last_seq;
  uint64_t last_ts;
  uint64_t sessions;          /* END_OF_SESSION commands applied */
  uint32_t last_session_date; /* date of the last one */
  current_t cur;
};

/* ------------------------------------------------------------------------ */
/* Lookup                                                                    */
/* ------------------------------------------------------------------------ */

/* Index of id, or of where it would be inserted (with *found = 0). */
static uint32_t instr_pos(const hg_exchange_t *ex, uint32_t id, int *found) {
  uint32_t lo = 0, hi = ex->n_instr;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ex->instr[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  *found = lo < ex->n_instr && ex->instr[lo].id == id;
  return lo;
}

static instrument_t *instr_find(const hg_exchange_t *ex, uint32_t id) {
  int found;
  uint32_t i = instr_pos(ex, id, &found);
  return found ? &ex->instr[i] : NULL;
}

static uint32_t acct_pos(const hg_exchange_t *ex, hg_account_t id, int *found) {
  uint32_t lo = 0, hi = ex->n_acct;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ex->acct[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  *found = lo < ex->n_acct && ex->acct[lo].id == id;
  return lo;
}

static account_t *acct_find(const hg_exchange_t *ex, hg_account_t id) {
  int found;
  uint32_t i = acct_pos(ex, id, &found);
  return found ? &ex->acct[i] : NULL;
}

static int symbol_ok(const char *s, size_t cap) {
  const char *end = memchr(s, '\0', cap);
  if (end == NULL || end == s || (size_t)(end - s) > HG_SYMBOL_MAX) return 0;
  for (const char *p = s; p < end; p++) {
    char c = *p;
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '-' || c == '_';
    if (!ok) return 0;
  }
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

static void event_init(const hg_exchange_t *ex, hg_exchange_event_t *ev, uint16_t type) {
  memset(ev, 0, sizeof *ev);
  ev->seq = ex->cur.seq;
  ev->ts = ex->cur.ts;
  ev->type = type;
  ev->command = (uint16_t)ex->cur.type;
}

static void emit_simple(hg_exchange_t *ex, uint16_t type, uint32_t instrument_id,
                        hg_account_t account) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, type);
  ev.instrument_id = instrument_id;
  ev.account = account;
  ex->sink(ex->sink_ctx, &ev);
}

static void emit_reject(hg_exchange_t *ex, uint16_t reason, uint32_t instrument_id,
                        hg_account_t account) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_REJECTED);
  ev.reason = reason;
  ev.instrument_id = instrument_id;
  ev.account = account;
  ex->sink(ex->sink_ctx, &ev);
}

/* An exchange-level reject of an order command, shaped like the book's own
 * rejects so that the gateway answers every order reject the same way. */
static void emit_order_reject(hg_exchange_t *ex, uint8_t cmd, uint16_t reason,
                              uint32_t instrument_id, hg_account_t account, hg_oid_t order_id,
                              uint64_t client_order_id, uint8_t side, hg_price_t price,
                              hg_qty_t qty) {
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_BOOK);
  ev.instrument_id = instrument_id;
  ev.account = account;
  ev.book.type = HG_EV_REJECTED;
  ev.book.cmd = cmd;
  ev.book.reason = reason;
  ev.book.instrument_id = instrument_id;
  ev.book.account = account;
  ev.book.order_id = order_id;
  ev.book.client_order_id = client_order_id;
  ev.book.side = side;
  ev.book.price = price;
  ev.book.qty = qty;
  ev.book.ts = ex->cur.ts;
  ex->sink(ex->sink_ctx, &ev);
}

/* ------------------------------------------------------------------------ */
/* Clearing seams                                                            */
/* ------------------------------------------------------------------------ */

/* Pre-trade check of a new order that passed the exchange checks (listed,
 * trading, known account). Returns 0 to accept or an hg_xreject_t. The
 * internal account table holds cash only, so there is nothing more to check;
 * the clearing library's margin and position-limit check goes here. */
static uint16_t risk_check_new_order(hg_exchange_t *ex, const instrument_t *inst,
                                     const account_t *acct, const hg_cmd_new_order_t *c) {
  (void)ex;
  (void)inst;
  (void)acct;
  (void)c;
  return 0;
}

/* Pre-trade check of a replace (its quantity may grow). Same contract. */
static uint16_t risk_check_replace(hg_exchange_t *ex, const instrument_t *inst,
                                   const account_t *acct, const hg_cmd_replace_t *c) {
  (void)ex;
  (void)inst;
  (void)acct;
  (void)c;
  return 0;
}

/* Books one fill the book just emitted (positions, open quantities, today's
 * sums). Called from the book sink, before the fill event leaves, so the
 * clearing state is current when the sink's consumer sees it. Nothing to
 * book in the cash-only account table. */
static void book_fills(hg_exchange_t *ex, const hg_book_event_t *fill) {
  (void)ex;
  (void)fill;
}

/* Whether acct may withdraw amount (> 0): 0 or an hg_xreject_t. With cash
 * only, equity is cash and initial margin is 0. */
static uint16_t risk_check_withdraw(const hg_exchange_t *ex, const account_t *acct,
                                    int64_t amount) {
  (void)ex;
  const int64_t initial_margin = 0;
  if (acct->cash - amount < initial_margin) return HG_XREJ_INSUFFICIENT_FUNDS;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Book sink                                                                 */
/* ------------------------------------------------------------------------ */

static void book_sink(void *ctx, const hg_book_event_t *bev) {
  hg_exchange_t *ex = ctx;
  if (bev->type == HG_EV_FILL) book_fills(ex, bev);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_BOOK);
  ev.instrument_id = bev->instrument_id;
  ev.account = bev->account;
  ev.book = *bev;
  if (ex->cur.delisting && bev->type == HG_EV_CANCELLED && bev->reason == HG_CXL_USER)
    ev.book.reason = HG_XCXL_DELISTED;
  ex->sink(ex->sink_ctx, &ev);
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                          */
/* ------------------------------------------------------------------------ */

int hg_exchange_create(const hg_exchange_config_t *cfg, hg_exchange_sink_fn sink, void *sink_ctx,
                       hg_exchange_t **out) {
  if (cfg == NULL || sink == NULL || out == NULL || cfg->max_instruments == 0 ||
      cfg->max_accounts == 0 || cfg->max_book_orders == 0)
    return HG_EINVAL;
  hg_exchange_t *ex = calloc(1, sizeof *ex);
  if (ex == NULL) return -ENOMEM;
  ex->cfg = *cfg;
  ex->sink = sink;
  ex->sink_ctx = sink_ctx;
  ex->instr = calloc(cfg->max_instruments, sizeof *ex->instr);
  ex->acct = calloc(cfg->max_accounts, sizeof *ex->acct);
  ex->scratch = calloc(cfg->max_book_orders, sizeof *ex->scratch);
  if (ex->instr == NULL || ex->acct == NULL || ex->scratch == NULL) {
    free(ex->instr);
    free(ex->acct);
    free(ex->scratch);
    free(ex);
    return -ENOMEM;
  }
  *out = ex;
  return 0;
}

/* Back to the just-created state. */
static void reset(hg_exchange_t *ex) {
  for (uint32_t i = 0; i < ex->n_instr; i++) hg_book_destroy(ex->instr[i].book);
  memset(ex->instr, 0, (size_t)ex->cfg.max_instruments * sizeof *ex->instr);
  memset(ex->acct, 0, (size_t)ex->cfg.max_accounts * sizeof *ex->acct);
  ex->n_instr = 0;
  ex->n_acct = 0;
  ex->last_seq = 0;
  ex->last_ts = 0;
  ex->sessions = 0;
  ex->last_session_date = 0;
  memset(&ex->cur, 0, sizeof ex->cur);
}

void hg_exchange_destroy(hg_exchange_t *ex) {
  if (ex == NULL) return;
  for (uint32_t i = 0; i < ex->n_instr; i++) hg_book_destroy(ex->instr[i].book);
  free(ex->instr);
  free(ex->acct);
  free(ex->scratch);
  free(ex);
}

void hg_exchange_set_sink(hg_exchange_t *ex, hg_exchange_sink_fn sink, void *sink_ctx) {
  ex->sink = sink;
  ex->sink_ctx = sink_ctx;
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

static void do_new_order(hg_exchange_t *ex, const hg_cmd_new_order_t *c) {
  hg_oid_t oid = ex->cur.seq;
  /* A market order's price means nothing and is not journaled; zero it so
   * that applying the struct and replaying its encoding emit the same. */
  hg_price_t price = c->type == HG_ORD_MARKET ? 0 : c->price;
  uint16_t rej = 0;
  instrument_t *inst = instr_find(ex, c->instrument_id);
  account_t *acct = NULL;
  if (inst == NULL) rej = HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (inst->halted) rej = HG_XREJ_INSTRUMENT_HALTED;
  else if ((acct = acct_find(ex, c->account)) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else rej = risk_check_new_order(ex, inst, acct, c);
  if (rej != 0) {
    emit_order_reject(ex, HG_CMD_NEW, rej, c->instrument_id, c->account, oid, c->client_order_id,
                      c->side, price, c->qty);
    return;
  }
  hg_order_new_t o = {
      .order_id = oid,
      .client_order_id = c->client_order_id,
      .account = c->account,
      .smp_group = c->smp_group,
      .price = price,
      .qty = c->qty,
      .side = c->side,
      .type = c->type,
      .tif = c->tif,
      .stp = c->stp,
      .post_only = c->post_only,
      .ts = ex->cur.ts,
  };
  hg_book_submit(inst->book, &o);
}

static void do_cancel(hg_exchange_t *ex, const hg_cmd_cancel_t *c) {
  instrument_t *inst = instr_find(ex, c->instrument_id);
  uint16_t rej = 0;
  if (inst == NULL) rej = HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (acct_find(ex, c->account) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  if (rej != 0) {
    emit_order_reject(ex, HG_CMD_CANCEL, rej, c->instrument_id, c->account, c->order_id, 0, 0, 0,
                      0);
    return;
  }
  hg_book_cancel(inst->book, c->order_id, c->account, ex->cur.ts);
}

static void do_replace(hg_exchange_t *ex, const hg_cmd_replace_t *c) {
  instrument_t *inst = instr_find(ex, c->instrument_id);
  account_t *acct = NULL;
  uint16_t rej = 0;
  if (inst == NULL) rej = HG_XREJ_UNKNOWN_INSTRUMENT;
  else if (inst->halted) rej = HG_XREJ_INSTRUMENT_HALTED;
  else if ((acct = acct_find(ex, c->account)) == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else rej = risk_check_replace(ex, inst, acct, c);
  if (rej != 0) {
    emit_order_reject(ex, HG_CMD_REPLACE, rej, c->instrument_id, c->account, c->order_id, 0, 0,
                      c->new_price, c->new_qty);
    return;
  }
  hg_book_replace(inst->book, c->order_id, c->account, c->new_price, c->new_qty, ex->cur.ts);
}

static void do_mass_cancel(hg_exchange_t *ex, const hg_cmd_mass_cancel_t *c) {
  if (c->sides > HG_SIDES_BOTH) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, c->instrument_id, c->account);
    return;
  }
  if (acct_find(ex, c->account) == NULL) {
    emit_reject(ex, HG_XREJ_UNKNOWN_ACCOUNT, c->instrument_id, c->account);
    return;
  }
  if (c->instrument_id != 0) {
    instrument_t *inst = instr_find(ex, c->instrument_id);
    if (inst == NULL) {
      emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, c->instrument_id, c->account);
      return;
    }
    hg_book_mass_cancel(inst->book, c->account, c->sides, ex->cur.ts);
    return;
  }
  for (uint32_t i = 0; i < ex->n_instr; i++)
    hg_book_mass_cancel(ex->instr[i].book, c->account, c->sides, ex->cur.ts);
}

static int do_list(hg_exchange_t *ex, const hg_cmd_list_instrument_t *c) {
  uint32_t id = c->params.instrument_id;
  if (id == 0 || !symbol_ok(c->symbol, sizeof c->symbol)) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  int found;
  uint32_t pos = instr_pos(ex, id, &found);
  for (uint32_t i = 0; i < ex->n_instr && !found; i++)
    if (strcmp(ex->instr[i].symbol, c->symbol) == 0) found = 1;
  if (found) {
    emit_reject(ex, HG_XREJ_INSTRUMENT_EXISTS, id, 0);
    return 0;
  }
  if (ex->n_instr == ex->cfg.max_instruments || c->params.max_orders > ex->cfg.max_book_orders ||
      c->params.max_accounts > ex->cfg.max_accounts) {
    emit_reject(ex, HG_XREJ_CAPACITY, id, 0);
    return 0;
  }
  hg_book_t *book = NULL;
  int rc = hg_book_create(&c->params, book_sink, ex, &book);
  if (rc == -ENOMEM) return rc;
  if (rc != 0) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, id, 0);
    return 0;
  }
  memmove(&ex->instr[pos + 1], &ex->instr[pos], (size_t)(ex->n_instr - pos) * sizeof *ex->instr);
  instrument_t *inst = &ex->instr[pos];
  memset(inst, 0, sizeof *inst);
  inst->id = id;
  memcpy(inst->symbol, c->symbol, strlen(c->symbol) + 1);
  inst->book = book;
  ex->n_instr++;
  emit_simple(ex, HG_XEV_LISTED, id, 0);
  return 0;
}

static void collect_order(void *ctx, const hg_book_order_t *o) {
  hg_exchange_t *ex = ctx;
  /* A book never holds more than its max_orders, which listing capped at
   * the scratch size; the check keeps a broken invariant from writing past. */
  if (ex->scratch_n < ex->cfg.max_book_orders)
    ex->scratch[ex->scratch_n++] = (order_ref_t){o->order_id, o->account};
}

static void do_delist(hg_exchange_t *ex, uint32_t id) {
  int found;
  uint32_t pos = instr_pos(ex, id, &found);
  if (!found) {
    emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, id, 0);
    return;
  }
  instrument_t *inst = &ex->instr[pos];
  ex->scratch_n = 0;
  hg_book_foreach(inst->book, collect_order, ex);
  ex->cur.delisting = 1;
  for (uint32_t i = 0; i < ex->scratch_n; i++)
    hg_book_cancel(inst->book, ex->scratch[i].order_id, ex->scratch[i].account, ex->cur.ts);
  ex->cur.delisting = 0;
  uint32_t cancelled = ex->scratch_n;
  ex->scratch_n = 0;
  hg_book_destroy(inst->book);
  memmove(&ex->instr[pos], &ex->instr[pos + 1],
          (size_t)(ex->n_instr - pos - 1) * sizeof *ex->instr);
  ex->n_instr--;
  memset(&ex->instr[ex->n_instr], 0, sizeof *ex->instr);
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_DELISTED);
  ev.instrument_id = id;
  ev.amount = cancelled;
  ex->sink(ex->sink_ctx, &ev);
}

static void do_halt(hg_exchange_t *ex, uint32_t id, int halt) {
  instrument_t *inst = instr_find(ex, id);
  if (inst == NULL) {
    emit_reject(ex, HG_XREJ_UNKNOWN_INSTRUMENT, id, 0);
    return;
  }
  if (inst->halted == (halt ? 1 : 0)) {
    emit_reject(ex, HG_XREJ_NOT_IN_STATE, id, 0);
    return;
  }
  inst->halted = halt ? 1 : 0;
  emit_simple(ex, halt ? HG_XEV_HALTED : HG_XEV_RESUMED, id, 0);
}

static void do_end_of_session(hg_exchange_t *ex, const hg_cmd_end_of_session_t *c) {
  int64_t expired = 0;
  for (uint32_t i = 0; i < ex->n_instr; i++) expired += hg_book_expire_day(ex->instr[i].book, ex->cur.ts);
  ex->sessions++;
  ex->last_session_date = c->session_date;
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_SESSION_END);
  ev.amount = expired;
  ex->sink(ex->sink_ctx, &ev);
}

static void do_add_account(hg_exchange_t *ex, const hg_cmd_add_account_t *c) {
  if (c->account == 0 || c->firm == 0) {
    emit_reject(ex, HG_XREJ_INVALID_PARAMS, 0, c->account);
    return;
  }
  int found;
  uint32_t pos = acct_pos(ex, c->account, &found);
  if (found) {
    emit_reject(ex, HG_XREJ_ACCOUNT_EXISTS, 0, c->account);
    return;
  }
  if (ex->n_acct == ex->cfg.max_accounts) {
    emit_reject(ex, HG_XREJ_CAPACITY, 0, c->account);
    return;
  }
  memmove(&ex->acct[pos + 1], &ex->acct[pos], (size_t)(ex->n_acct - pos) * sizeof *ex->acct);
  ex->acct[pos] = (account_t){.id = c->account, .firm = c->firm, .cash = 0};
  ex->n_acct++;
  hg_exchange_event_t ev;
  event_init(ex, &ev, HG_XEV_ACCOUNT_ADDED);
  ev.account = c->account;
  ev.firm = c->firm;
  ex->sink(ex->sink_ctx, &ev);
}

static void do_cash(hg_exchange_t *ex, const hg_cmd_cash_t *c, int deposit) {
  account_t *acct = acct_find(ex, c->account);
  uint16_t rej = 0;
  if (acct == NULL) rej = HG_XREJ_UNKNOWN_ACCOUNT;
  else if (c->amount <= 0) rej = HG_XREJ_INVALID_AMOUNT;
  else if (deposit && acct->cash > INT64_MAX - c->amount) rej = HG_XREJ_INVALID_AMOUNT;
  else if (!deposit) rej = risk_check_withdraw(ex, acct, c->amount);
  if (rej != 0) {
    hg_exchange_event_t ev;
    event_init(ex, &ev, HG_XEV_REJECTED);
    ev.reason = rej;
    ev.account = c->account;
    ev.amount = c->amount;
    ev.balance = acct != NULL ? acct->cash : 0;
    ex->sink(ex->sink_ctx, &ev);
    return;
  }
  acct->cash += deposit ? c->amount : -c->amount;
  hg_exchange_event_t ev;
  event_init(ex, &ev, deposit ? HG_XEV_DEPOSIT : HG_XEV_WITHDRAWAL);
  ev.account = c->account;
  ev.firm = acct->firm;
  ev.amount = c->amount;
  ev.balance = acct->cash;
  ex->sink(ex->sink_ctx, &ev);
}

int hg_exchange_apply(hg_exchange_t *ex, const hg_command_t *cmd) {
  if (cmd->seq == 0 || cmd->seq <= ex->last_seq) return HG_ESTATE;
  if (cmd->type < HG_COMMAND_NEW_ORDER || cmd->type > HG_COMMAND_WITHDRAW) return HG_EINVAL;
  ex->cur = (current_t){.seq = cmd->seq, .ts = cmd->ts, .type = cmd->type, .delisting = 0};
  int rc = 0;
  switch ((hg_command_type_t)cmd->type) {
  case HG_COMMAND_NEW_ORDER: do_new_order(ex, &cmd->u.new_order); break;
  case HG_COMMAND_CANCEL: do_cancel(ex, &cmd->u.cancel); break;
  case HG_COMMAND_REPLACE: do_replace(ex, &cmd->u.replace); break;
  case HG_COMMAND_MASS_CANCEL: do_mass_cancel(ex, &cmd->u.mass_cancel); break;
  case HG_COMMAND_LIST_INSTRUMENT: rc = do_list(ex, &cmd->u.list); break;
  case HG_COMMAND_DELIST_INSTRUMENT: do_delist(ex, cmd->u.instrument.instrument_id); break;
  case HG_COMMAND_HALT: do_halt(ex, cmd->u.instrument.instrument_id, 1); break;
  case HG_COMMAND_RESUME: do_halt(ex, cmd->u.instrument.instrument_id, 0); break;
  case HG_COMMAND_END_OF_SESSION: do_end_of_session(ex, &cmd->u.end_of_session); break;
  case HG_COMMAND_ADD_ACCOUNT: do_add_account(ex, &cmd->u.add_account); break;
  case HG_COMMAND_DEPOSIT: do_cash(ex, &cmd->u.cash, 1); break;
  case HG_COMMAND_WITHDRAW: do_cash(ex, &cmd->u.cash, 0); break;
  /* Settlement commands (types 15..39: index fixing, daily cycle, expiry
   * and final settlement) get their cases here, and their range in the
   * type check above. */
  }
  if (rc != 0) return rc;
  ex->last_seq = cmd->seq;
  ex->last_ts = cmd->ts;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

uint64_t hg_exchange_last_seq(const hg_exchange_t *ex) { return ex->last_seq; }

const hg_book_t *hg_exchange_book(const hg_exchange_t *ex, uint32_t instrument_id) {
  const instrument_t *inst = instr_find(ex, instrument_id);
  return inst != NULL ? inst->book : NULL;
}

int hg_exchange_instrument_status(const hg_exchange_t *ex, uint32_t instrument_id, int *halted) {
  const instrument_t *inst = instr_find(ex, instrument_id);
  if (inst == NULL) return HG_ENOTFOUND;
  *halted = inst->halted;
  return 0;
}

int hg_exchange_instrument_symbol(const hg_exchange_t *ex, uint32_t instrument_id, char *sym) {
  const instrument_t *inst = instr_find(ex, instrument_id);
  if (inst == NULL) return HG_ENOTFOUND;
  memcpy(sym, inst->symbol, sizeof inst->symbol);
  return 0;
}

uint32_t hg_exchange_instrument_count(const hg_exchange_t *ex) { return ex->n_instr; }

int hg_exchange_account(const hg_exchange_t *ex, hg_account_t account, int64_t *cash,
                        uint32_t *firm) {
  const account_t *a = acct_find(ex, account);
  if (a == NULL) return HG_ENOTFOUND;
  *cash = a->cash;
  *firm = a->firm;
  return 0;
}

void hg_exchange_foreach_instrument(const hg_exchange_t *ex,
                                    void (*fn)(void *ctx,
                                               const hg_exchange_instrument_info_t *info),
                                    void *ctx) {
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    const instrument_t *inst = &ex->instr[i];
    hg_exchange_instrument_info_t info;
    memset(&info, 0, sizeof info);
    info.id = inst->id;
    info.halted = inst->halted;
    memcpy(info.symbol, inst->symbol, sizeof info.symbol);
    info.params = *hg_book_params(inst->book);
    info.orders = hg_book_order_count(inst->book);
    fn(ctx, &info);
  }
}

void hg_exchange_foreach_account(const hg_exchange_t *ex,
                                 void (*fn)(void *ctx, const hg_exchange_account_info_t *info),
                                 void *ctx) {
  for (uint32_t i = 0; i < ex->n_acct; i++) {
    hg_exchange_account_info_t info = {ex->acct[i].id, ex->acct[i].firm, ex->acct[i].cash};
    fn(ctx, &info);
  }
}

const char *hg_xreject_str(int reason) {
  switch (reason) {
#define HG_XREJECT_STR(name, num, msg) \
  case num:                            \
    return msg;
    HG_XREJECT_MAP(HG_XREJECT_STR)
#undef HG_XREJECT_STR
  default:
    return hg_reject_str(reason);
  }
}

/* ------------------------------------------------------------------------ */
/* Canonical serialization                                                   */
/* ------------------------------------------------------------------------ */

typedef struct writer {
  uint8_t *buf;     /* copy mode when non-NULL */
  hg_sha256_t *sha; /* hash mode when non-NULL */
  size_t len;       /* bytes written so far, every mode */
  uint8_t stage[512];
  size_t staged;
} writer_t;

static void w_bytes(writer_t *w, const void *p, size_t n) {
  if (w->buf != NULL) {
    memcpy(w->buf + w->len, p, n);
  } else if (w->sha != NULL) {
    if (w->staged + n > sizeof w->stage) {
      hg_sha256_update(w->sha, w->stage, w->staged);
      w->staged = 0;
    }
    if (n > sizeof w->stage) {
      hg_sha256_update(w->sha, p, n);
    } else {
      memcpy(w->stage + w->staged, p, n);
      w->staged += n;
    }
  }
  w->len += n;
}

static void w_u64(writer_t *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  w_bytes(w, b, 8);
}

static void w_u32(writer_t *w, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  w_bytes(w, b, 4);
}

static void w_u8(writer_t *w, uint8_t v) { w_bytes(w, &v, 1); }
static void w_i64(writer_t *w, int64_t v) { w_u64(w, (uint64_t)v); }

static void w_order(void *ctx, const hg_book_order_t *o) {
  writer_t *w = ctx;
  w_u64(w, o->order_id);
  w_u64(w, o->client_order_id);
  w_u32(w, o->account);
  w_u32(w, o->smp_group);
  w_i64(w, o->price);
  w_i64(w, o->qty);
  w_i64(w, o->leaves);
  w_u64(w, o->ts);
  w_u8(w, o->side);
  w_u8(w, o->tif);
  w_u8(w, o->stp);
  w_u8(w, o->post_only);
}

/*
 * Layout (all integers little-endian):
 *   u32 magic "HGXS", u32 version,
 *   u64 last_seq, u64 last_ts, u64 sessions, u32 last_session_date,
 *   u32 n_instruments, then per instrument by id:
 *     u32 id, u8 halted, u8 symbol_len, symbol bytes,
 *     params: i64 tick_size, contract_unit, min_price, max_price,
 *             max_order_qty, ref_price; u32 band_bps, max_orders,
 *             max_accounts; u8 default_stp,
 *     u32 n_orders, then per order in time priority: u64 order_id,
 *       u64 client_order_id, u32 account, u32 smp_group, i64 price, i64 qty,
 *       i64 leaves, u64 ts, u8 side, tif, stp, post_only,
 *   u32 n_accounts, then per account by id: u32 id, u32 firm, i64 cash.
 */
static void write_state(const hg_exchange_t *ex, writer_t *w) {
  w_u32(w, FORMAT_MAGIC);
  w_u32(w, HG_EXCHANGE_FORMAT_VERSION);
  w_u64(w, ex->last_seq);
  w_u64(w, ex->last_ts);
  w_u64(w, ex->sessions);
  w_u32(w, ex->last_session_date);
  w_u32(w, ex->n_instr);
  for (uint32_t i = 0; i < ex->n_instr; i++) {
    const instrument_t *inst = &ex->instr[i];
    const hg_book_params_t *p = hg_book_params(inst->book);
    size_t sl = strlen(inst->symbol);
    w_u32(w, inst->id);
    w_u8(w, inst->halted);
    w_u8(w, (uint8_t)sl);
    w_bytes(w, inst->symbol, sl);
    w_i64(w, p->tick_size);
    w_i64(w, p->contract_unit);
    w_i64(w, p->min_price);
    w_i64(w, p->max_price);
    w_i64(w, p->max_order_qty);
    w_i64(w, p->ref_price);
    w_u32(w, p->band_bps);
    w_u32(w, p->max_orders);
    w_u32(w, p->max_accounts);
    w_u8(w, p->default_stp);
    w_u32(w, hg_book_order_count(inst->book));
    hg_book_foreach(inst->book, w_order, w);
  }
  w_u32(w, ex->n_acct);
  for (uint32_t i = 0; i < ex->n_acct; i++) {
    w_u32(w, ex->acct[i].id);
    w_u32(w, ex->acct[i].firm);
    w_i64(w, ex->acct[i].cash);
  }
}

size_t hg_exchange_serialized_size(const hg_exchange_t *ex) {
  writer_t w = {0};
  write_state(ex, &w);
  return w.len;
}

int hg_exchange_serialize(const hg_exchange_t *ex, uint8_t *buf, size_t cap, size_t *len) {
  size_t need = hg_exchange_serialized_size(ex);
  *len = need;
  if (need > cap) return HG_EFULL;
  writer_t w = {0};
  w.buf = buf;
  write_state(ex, &w);
  return 0;
}

void hg_exchange_hash(const hg_exchange_t *ex, uint8_t out[HG_SHA256_LEN]) {
  hg_sha256_t sha;
  hg_sha256_init(&sha);
  writer_t w = {0};
  w.sha = &sha;
  write_state(ex, &w);
  hg_sha256_update(&sha, w.stage, w.staged);
  hg_sha256_final(&sha, out);
}

/* ------------------------------------------------------------------------ */
/* Restore                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct reader {
  const uint8_t *p;
  size_t left;
  int bad; /* sticky: a read past the end */
} reader_t;

static void r_bytes(reader_t *r, void *out, size_t n) {
  if (r->bad || n > r->left) {
    r->bad = 1;
    memset(out, 0, n);
    return;
  }
  memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
}

static uint64_t r_u64(reader_t *r) {
  uint8_t b[8];
  r_bytes(r, b, 8);
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
  return v;
}

static uint32_t r_u32(reader_t *r) {
  uint8_t b[4];
  r_bytes(r, b, 4);
  return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

static uint8_t r_u8(reader_t *r) {
  uint8_t b;
  r_bytes(r, &b, 1);
  return b;
}

static int64_t r_i64(reader_t *r) { return (int64_t)r_u64(r); }

static int restore_instruments(hg_exchange_t *ex, reader_t *r) {
  uint32_t n = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  if (n > ex->cfg.max_instruments) return HG_EFULL;
  for (uint32_t i = 0; i < n; i++) {
    instrument_t *inst = &ex->instr[i];
    inst->id = r_u32(r);
    uint8_t halted = r_u8(r);
    uint8_t sl = r_u8(r);
    if (r->bad || inst->id == 0 || halted > 1 || sl == 0 || sl > HG_SYMBOL_MAX) return HG_ECORRUPT;
    if (i > 0 && inst->id <= ex->instr[i - 1].id) return HG_ECORRUPT;
    inst->halted = halted;
    r_bytes(r, inst->symbol, sl);
    inst->symbol[sl] = '\0';
    if (r->bad || !symbol_ok(inst->symbol, sizeof inst->symbol)) return HG_ECORRUPT;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(ex->instr[j].symbol, inst->symbol) == 0) return HG_ECORRUPT;
    hg_book_params_t p;
    memset(&p, 0, sizeof p);
    p.instrument_id = inst->id;
    p.tick_size = r_i64(r);
    p.contract_unit = r_i64(r);
    p.min_price = r_i64(r);
    p.max_price = r_i64(r);
    p.max_order_qty = r_i64(r);
    p.ref_price = r_i64(r);
    p.band_bps = r_u32(r);
    p.max_orders = r_u32(r);
    p.max_accounts = r_u32(r);
    p.default_stp = r_u8(r);
    uint32_t n_orders = r_u32(r);
    if (r->bad) return HG_ECORRUPT;
    if (p.max_orders > ex->cfg.max_book_orders || p.max_accounts > ex->cfg.max_accounts)
      return HG_EFULL;
    if (n_orders > p.max_orders) return HG_ECORRUPT;
    int rc = hg_book_create(&p, book_sink, ex, &inst->book);
    if (rc == -ENOMEM) return rc;
    if (rc != 0) return HG_ECORRUPT;
    ex->n_instr = i + 1; /* from here on reset() frees the book */
    for (uint32_t k = 0; k < n_orders; k++) {
      hg_book_order_t o;
      memset(&o, 0, sizeof o);
      o.order_id = r_u64(r);
      o.client_order_id = r_u64(r);
      o.account = r_u32(r);
      o.smp_group = r_u32(r);
      o.price = r_i64(r);
      o.qty = r_i64(r);
      o.leaves = r_i64(r);
      o.ts = r_u64(r);
      o.side = r_u8(r);
      o.tif = r_u8(r);
      o.stp = r_u8(r);
      o.post_only = r_u8(r);
      if (r->bad || o.order_id == 0 || o.order_id > ex->last_seq) return HG_ECORRUPT;
      if (hg_book_restore(inst->book, &o) != 0) return HG_ECORRUPT;
    }
  }
  return 0;
}

static int restore_accounts(hg_exchange_t *ex, reader_t *r) {
  uint32_t n = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  if (n > ex->cfg.max_accounts) return HG_EFULL;
  for (uint32_t i = 0; i < n; i++) {
    account_t a;
    a.id = r_u32(r);
    a.firm = r_u32(r);
    a.cash = r_i64(r);
    if (r->bad || a.id == 0 || a.firm == 0) return HG_ECORRUPT;
    if (i > 0 && a.id <= ex->acct[i - 1].id) return HG_ECORRUPT;
    ex->acct[i] = a;
    ex->n_acct = i + 1;
  }
  return 0;
}

static int restore_all(hg_exchange_t *ex, reader_t *r) {
  uint32_t magic = r_u32(r);
  uint32_t version = r_u32(r);
  if (r->bad || magic != FORMAT_MAGIC || version == 0) return HG_ECORRUPT;
  if (version > HG_EXCHANGE_FORMAT_VERSION) return HG_EVERSION;
  ex->last_seq = r_u64(r);
  ex->last_ts = r_u64(r);
  ex->sessions = r_u64(r);
  ex->last_session_date = r_u32(r);
  if (r->bad) return HG_ECORRUPT;
  int rc = restore_instruments(ex, r);
  if (rc == 0) rc = restore_accounts(ex, r);
  if (rc == 0 && (r->bad || r->left != 0)) rc = HG_ECORRUPT;
  return rc;
}

int hg_exchange_restore(hg_exchange_t *ex, const uint8_t *blob, size_t len) {
  if (ex->n_instr != 0 || ex->n_acct != 0 || ex->last_seq != 0) return HG_ESTATE;
  if (blob == NULL) return HG_ECORRUPT;
  reader_t r = {.p = blob, .left = len, .bad = 0};
  int rc = restore_all(ex, &r);
  if (rc != 0) reset(ex);
  return rc;
}
