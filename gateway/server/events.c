/*
 * events.c - event routing: drains the pipeline's output, keeps the mirror up
 * to date and turns each event into execution reports, drop copies, market
 * data and responses for the streams they belong to. Loop thread.
 */
#include "gateway_int.h"

/* ----------------------------------------------------------------- events */

uint32_t gw_owner_stream(hg_gateway_t *gw, const order_t *o, uint32_t account) {
  if (o != NULL && o->stream != NONE32) return o->stream;
  account_t *a = gw_account_find(gw, account);
  return a != NULL ? a->stream : NONE32;
}

/* Sends er to the owning stream and, as a drop copy, to the subscribed risk
 * viewers of the account's firm. */
static void route_er(hg_gateway_t *gw, uint32_t stream, uint32_t account,
                     Hourglass__V1__ExecutionReport *er) {
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(EXECUTION_REPORT);
  env.execution_report = er;
  gw_stream_send_idx(gw, stream, &env);
  if (gw->n_drop == 0) return;
  account_t *a = gw_account_find(gw, account);
  if (a == NULL) return;
  PB_SET(*er, drop_copy, 1);
  PB_SET(*er, account, account);
  er->has_ref_seq = 0;
  for (uint32_t i = 0; i < gw->n_drop; i++) {
    conn_t *v = &gw->conns[gw->drop_list[i]];
    stream_t *vs = gw_conn_stream(v);
    if (vs != NULL && vs->firm == a->firm) gw_stream_send(gw, vs, &env);
  }
  er->has_drop_copy = 0;
  er->drop_copy = 0;
  er->has_account = 0;
  er->account = 0;
}

static void er_base(Hourglass__V1__ExecutionReport *er, uint32_t type,
                    const hg_exchange_event_t *ev) {
  hourglass__v1__execution_report__init(er);
  er->exec_type = type;
  er->instrument_id = ev->book.instrument_id;
  PB_SET(*er, engine_seq, ev->seq);
  PB_SET(*er, ts, ev->ts);
  if (ev->kind == HG_XBOOK_LIQUIDATION) PB_SET(*er, liquidation, 1); /* the clearing's order */
}

static void er_order(Hourglass__V1__ExecutionReport *er, uint64_t oid, uint64_t clordid,
                     int side, int64_t price, int64_t qty, int64_t leaves, uint32_t group) {
  PB_SET(*er, order_id, oid);
  PB_SET(*er, client_order_id, clordid);
  PB_SET(*er, side, (Hourglass__V1__Side)side);
  PB_SET(*er, price, price);
  PB_SET(*er, qty, qty);
  PB_SET(*er, leaves, leaves);
  er->has_quote_group = group != 0;
  er->quote_group = group;
}

static void set_ref(Hourglass__V1__ExecutionReport *er, pending_t *p) {
  if (p == NULL || p->kind == P_INTERNAL) return;
  PB_SET(*er, ref_seq, p->ref_seq);
  p->replied = 1;
}

/* An order rests: mirrored, reported, and cancelled at once when it is a
 * cancel-on-disconnect order of a gone connection or a superseded quote. */
static void book_accepted(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p) {
  const hg_book_event_t *be = &ev->book;
  Hourglass__V1__ExecutionReport er;
  /* A liquidation order is the clearing's, sent for the account within
   * the operator's MARK: its reports are the account's, not the operator's. */
  if (ev->kind == HG_XBOOK_LIQUIDATION) p = NULL;
  uint32_t stream = p != NULL ? p->stream : NONE32;
  if (stream == NONE32) stream = gw_owner_stream(gw, NULL, be->account);
  order_t *o = gw_order_add(gw, be, stream);
  if (o != NULL && p != NULL) {
    if (p->cmd.type == HG_COMMAND_NEW_ORDER && p->cmd.u.new_order.session_scoped)
      gw_order_set_scoped(gw, o);
    o->cod = p->cod;
    o->conn_gen = p->conn_gen;
    o->quote_group = p->quote_group;
  } else if (o == NULL) {
    gw_log(gw, HG_LOG_WARN, "order mirror full; an order is not tracked");
  }
  er_base(&er, EXEC(NEW), ev);
  er_order(&er, be->order_id, be->client_order_id, be->side, be->price, be->qty, be->leaves,
           p != NULL ? p->quote_group : 0);
  set_ref(&er, p);
  route_er(gw, o != NULL ? o->stream : gw_owner_stream(gw, NULL, be->account), be->account, &er);
  /* Applied from the group: the node that entered it decides about these. */
  if (o == NULL || o->stream == NONE32 || (p != NULL && p->applied)) return;
  stream_t *st = &gw->streams[o->stream];
  /* Entered by a connection that is gone (cancel-on-disconnect), or a
   * quote already superseded by a newer one: cancel it now. */
  if (o->cod && !gw_stream_gen_live(gw, st, o->conn_gen)) {
    gw_cancel_internal(gw, o);
  } else if (o->quote_group != 0 && p != NULL) {
    instr_t *in = gw_instr_find(gw, o->instrument_id);
    mmp_t *m = gw_mmp_find(st, o->quote_group, false);
    if ((in != NULL && st->quote_gen[gw_instr_slot(gw, in) * 2 + o->side] != p->quote_gen) ||
        (m != NULL && m->tripped))
      gw_cancel_internal(gw, o);
  }
}

/* The engine refused an order request. */
static void book_rejected(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p) {
  const hg_book_event_t *be = &ev->book;
  Hourglass__V1__ExecutionReport er;
  er_base(&er, EXEC(REJECTED), ev);
  er.has_order_id = be->order_id != 0;
  er.order_id = be->order_id;
  er.has_client_order_id = be->client_order_id != 0;
  er.client_order_id = be->client_order_id;
  PB_SET(er, reason, be->reason);
  PB_SET(er, request, p != NULL && p->kind == P_QUOTE ? REQ(QUOTE)
               : be->cmd == HG_CMD_CANCEL      ? REQ(CANCEL)
               : be->cmd == HG_CMD_REPLACE     ? REQ(REPLACE)
                                               : REQ(NEW_ORDER));
  er.has_quote_group = p != NULL && p->quote_group != 0;
  er.quote_group = p != NULL ? p->quote_group : 0;
  /* The request as submitted (a cancel has no price or quantity). */
  if (be->cmd == HG_CMD_NEW)
    gw_er_echo(&er, (reject_echo_t){be->side, be->price, be->qty});
  else if (be->cmd == HG_CMD_REPLACE)
    gw_er_echo(&er, (reject_echo_t){-1, be->price, be->qty});
  if (HG_CLR_IS_REJECT(be->reason)) { /* the clearing's check: its numbers */
    er.has_risk_equity = er.has_risk_initial_margin = er.has_risk_ref_price = 1;
    er.has_risk_position = er.has_risk_low = er.has_risk_high = 1;
    er.risk_equity = ev->balance;
    er.risk_initial_margin = ev->margin;
    er.risk_ref_price = ev->price;
    er.risk_position = ev->qty;
    er.risk_low = ev->lo;
    er.risk_high = ev->hi;
  }
  if (p != NULL && p->kind == P_INTERNAL) return; /* our own cancel raced a fill */
  set_ref(&er, p);
  route_er(gw, p != NULL ? p->stream : gw_owner_stream(gw, NULL, be->account), be->account, &er);
}

/* A trade: positions, a report to each party, the public trade, and the
 * mirror's leaves. */
static void book_fill(hg_gateway_t *gw, const hg_exchange_event_t *ev) {
  const hg_book_event_t *be = &ev->book;
  Hourglass__V1__ExecutionReport er;
  order_t *t = gw_order_find(gw, be->order_id);
  order_t *m = gw_order_find(gw, be->maker_order_id);
  instr_t *in = gw_instr_find(gw, be->instrument_id);
  gw_position_add(gw, be->account, be->instrument_id, be->side, be->qty, be->price);
  gw_position_add(gw, be->maker_account, be->instrument_id, be->side ^ 1, be->qty, be->price);
  /* Taker. */
  er_base(&er, EXEC(FILL), ev);
  er_order(&er, be->order_id, be->client_order_id, be->side, be->price, be->qty, be->leaves,
           t != NULL ? t->quote_group : 0);
  route_er(gw, gw_owner_stream(gw, t, be->account), be->account, &er);
  /* Maker. */
  er_base(&er, EXEC(FILL), ev);
  er_order(&er, be->maker_order_id, be->maker_client_order_id, be->side ^ 1, be->price,
           be->qty, be->maker_leaves, m != NULL ? m->quote_group : 0);
  PB_SET(er, maker, 1);
  route_er(gw, gw_owner_stream(gw, m, be->maker_account), be->maker_account, &er);
  if (in != NULL) {
    Hourglass__V1__MarketDataTrade tr = HOURGLASS__V1__MARKET_DATA_TRADE__INIT;
    tr.instrument_id = in->id;
    tr.md_seq = ++in->md_seq;
    tr.price = be->price;
    tr.qty = be->qty;
    tr.aggressor = (Hourglass__V1__Side)be->side;
    tr.ts = ev->ts;
    env_t env = HOURGLASS__V1__ENVELOPE__INIT;
    env.body_case = B(MD_TRADE);
    env.md_trade = &tr;
    gw_md_send_all(gw, in, &env);
  }
  if (t != NULL) {
    t->leaves = be->leaves;
    gw_mmp_fill(gw, t, be->qty, ev->ts);
    if (t->leaves <= 0) gw_order_remove(gw, t);
  }
  if (m != NULL) {
    m->leaves = be->maker_leaves;
    gw_mmp_fill(gw, m, be->qty, ev->ts);
    if (m->leaves <= 0) gw_order_remove(gw, m);
  }
}

static void on_book_event(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p) {
  const hg_book_event_t *be = &ev->book;
  Hourglass__V1__ExecutionReport er;
  switch (be->type) {
  case HG_EV_ACCEPTED:
    book_accepted(gw, ev, p);
    break;
  case HG_EV_REJECTED:
    book_rejected(gw, ev, p);
    break;
  case HG_EV_FILL:
    book_fill(gw, ev);
    break;
  case HG_EV_CANCELLED: {
    order_t *o = gw_order_find(gw, be->order_id);
    er_base(&er, EXEC(CANCELLED), ev);
    er_order(&er, be->order_id, be->client_order_id, be->side, be->price, be->qty, 0,
             o != NULL ? o->quote_group : 0);
    PB_SET(er, reason, be->reason);
    if (p != NULL && p->kind == P_CANCEL) set_ref(&er, p);
    route_er(gw, gw_owner_stream(gw, o, be->account), be->account, &er);
    if (o != NULL) gw_order_remove(gw, o);
    break;
  }
  case HG_EV_REPLACED: {
    order_t *o = gw_order_find(gw, be->order_id);
    if (o != NULL) {
      o->price = be->price;
      o->qty = be->qty;
      o->leaves = be->leaves;
    }
    er_base(&er, EXEC(REPLACED), ev);
    er_order(&er, be->order_id, be->client_order_id, be->side, be->price, be->qty, be->leaves,
             o != NULL ? o->quote_group : 0);
    PB_SET(er, priority_kept, be->priority_kept);
    set_ref(&er, p);
    route_er(gw, gw_owner_stream(gw, o, be->account), be->account, &er);
    break;
  }
  case HG_EV_LEVEL: {
    instr_t *in = gw_instr_find(gw, be->instrument_id);
    if (in == NULL) break;
    gw_level_set(gw, in, be->side, be->price, be->qty);
    Hourglass__V1__MarketDataLevel lv = HOURGLASS__V1__MARKET_DATA_LEVEL__INIT;
    lv.instrument_id = in->id;
    lv.md_seq = ++in->md_seq;
    lv.side = (Hourglass__V1__Side)be->side;
    lv.price = be->price;
    lv.qty = be->qty;
    env_t env = HOURGLASS__V1__ENVELOPE__INIT;
    env.body_case = B(MD_LEVEL);
    env.md_level = &lv;
    gw_md_send_all(gw, in, &env);
    break;
  }
  default:
    break;
  }
}

static void op_response(hg_gateway_t *gw, pending_t *p, const hg_exchange_event_t *ev,
                        uint32_t reason) {
  if (p == NULL || p->kind == P_INTERNAL || p->replied) return;
  Hourglass__V1__Response r = HOURGLASS__V1__RESPONSE__INIT;
  r.ref_seq = p->ref_seq;
  r.has_reason = reason != 0;
  r.reason = reason;
  PB_SET(r, engine_seq, ev->seq);
  r.has_instrument_id = ev->instrument_id != 0;
  r.instrument_id = ev->instrument_id;
  r.has_account = ev->account != 0;
  r.account = ev->account;
  r.has_amount = ev->amount != 0;
  r.amount = ev->amount;
  r.has_balance = ev->balance != 0;
  r.balance = ev->balance;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(RESPONSE);
  env.response = &r;
  gw_stream_send_idx(gw, p->stream, &env);
  p->replied = 1;
}

static void on_event(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p) {
  instr_t *in;
  gw_ledger_event(gw, ev);
  gw_settle_event(gw, ev, p);
  switch (ev->type) {
  case HG_XEV_BOOK:
    on_book_event(gw, ev, p);
    break;
  case HG_XEV_REJECTED:
    if (p != NULL && p->kind == P_MASS_CANCEL) {
      gw_send_response(gw, p->stream, p->ref_seq, ev->reason, NULL);
      p->replied = 1;
    } else {
      op_response(gw, p, ev, ev->reason);
    }
    break;
  case HG_XEV_LISTED: {
    /* The event carries the symbol and parameters, whoever listed it (an
     * operator session, the curve roll at expiry, the demo). */
    char sym[HG_SYMBOL_MAX + 1];
    memcpy(sym, ev->listed.symbol, sizeof sym);
    sym[HG_SYMBOL_MAX] = '\0';
    in = gw_instr_add(gw, ev->instrument_id, sym, &ev->listed.params, ISTATE(TRADING));
    if (in == NULL) gw_log(gw, HG_LOG_WARN, "instrument table full; market data missing");
    else gw_instr_reference(in, ev->price, ev->lo, ev->hi);
    op_response(gw, p, ev, 0);
    break;
  }
  case HG_XEV_REFERENCE:
    in = gw_instr_find(gw, ev->instrument_id);
    if (in != NULL) gw_instr_reference(in, ev->price, ev->lo, ev->hi);
    break;
  case HG_XEV_DELISTED:
  case HG_XEV_HALTED:
  case HG_XEV_RESUMED:
    in = gw_instr_find(gw, ev->instrument_id);
    if (in != NULL) {
      in->state = ev->type == HG_XEV_HALTED    ? ISTATE(HALTED)
                  : ev->type == HG_XEV_RESUMED ? ISTATE(TRADING)
                                               : ISTATE(DELISTED);
      gw_md_status(gw, in);
      if (ev->type == HG_XEV_DELISTED) {
        while (in->n_subs > 0) gw_md_unsubscribe(&gw->conns[in->subs[0]], in);
        in->id = 0;
      }
    }
    op_response(gw, p, ev, 0);
    break;
  case HG_XEV_ACCOUNT_ADDED:
    if (gw_account_add(gw, ev->account, ev->firm, 0) == NULL)
      gw_log(gw, HG_LOG_WARN, "account table full");
    op_response(gw, p, ev, 0);
    break;
  case HG_XEV_DEPOSIT:
  case HG_XEV_WITHDRAWAL: {
    account_t *a = gw_account_find(gw, ev->account);
    if (a != NULL) a->cash = ev->balance;
    op_response(gw, p, ev, 0);
    break;
  }
  default:
    op_response(gw, p, ev, 0);
    break;
  }
}

pending_t *gw_pending_of(hg_gateway_t *gw, uint64_t origin) {
  if ((origin & ~ORIGIN_MASK) != ORIGIN_TAG) return NULL;
  uint64_t k = origin & ORIGIN_MASK;
  if (k < (gw->pend_tail & ORIGIN_MASK) || k >= (gw->pend_next & ORIGIN_MASK)) return NULL;
  pending_t *p = gw_pend_at(gw, k);
  return p->origin == origin ? p : NULL;
}

void gw_retire(hg_gateway_t *gw, pending_t *p) {
  assert(!p->done && gw->pend_tail < gw->pend_next);
  p->done = 1;
  if (p->cmd.type == HG_COMMAND_NEW_ORDER) {
    assert(gw->orders_reserved > 0);
    gw->orders_reserved--;
  }
  while (gw->pend_tail < gw->pend_next && gw_pend_at(gw, gw->pend_tail)->done) {
    gw_pend_at(gw, gw->pend_tail)->origin = 0;
    gw->pend_tail++;
  }
}

/* Cluster mode: the outbound log's position for o's frames (gateway_int.h,
 * pos_seq). Records that are not the log's (UNAVAILABLE, MALFORMED: a
 * leader's own) have none. */
#define POS_STREAM (1ull << 63)
static void set_position(hg_gateway_t *gw, const hg_pipe_out_t *o) {
  uint64_t a = 0, b = 0;
  if (o->kind == HG_PIPE_EVENT || o->kind == HG_PIPE_DONE) {
    if (o->seq != gw->pos_seq) {
      gw->pos_seq = o->seq;
      gw->pos_j = 0;
    }
    a = o->seq + 1;
    b = gw->pos_j++;
  } else if (o->kind == HG_PIPE_STREAM) {
    a = o->seq + 1;
    b = POS_STREAM | o->event.seq;
  }
  hg_outlog_set_position(gw->outlog, a, b);
}

void gw_drain(hg_gateway_t *gw) {
  if (gw->pipe == NULL) return;
  assert(!gw->draining);
  gw->draining = 1;
  int outer = gw_clock_hold(gw);
  /* Results of the log, also when drained in the middle of a request. */
  int local = gw->local;
  gw->local = 0;
  for (;;) {
    size_t n = hg_pipeline_poll(gw->pipe, gw->drain, DRAIN_BATCH);
    if (n == 0) break;
    for (size_t i = 0; i < n; i++) {
      const hg_pipe_out_t *o = &gw->drain[i];
      pending_t *p = gw_pending_of(gw, o->origin);
      if (gw->hold != NULL) set_position(gw, o);
      if (o->kind == HG_PIPE_EVENT) {
        on_event(gw, &o->event, p);
      } else if (o->kind == HG_PIPE_STREAM) {
        gw_hold_release(gw);
      } else if (p != NULL && p->kind == P_SETTLE) {
        gw_settle_done(gw, p, o);
        gw_retire(gw, p);
      } else if (p != NULL) {
        if (o->kind == HG_PIPE_UNAVAILABLE) {
          uint32_t req = gw_pkind_request(p->kind);
          if (req != 0) {
            gw_send_order_reject(gw, p->stream, p->ref_seq, req, REJ(UNAVAILABLE), 0, 0, 0,
                                 p->quote_group, gw_cmd_echo(&p->cmd));
          } else if (p->kind != P_INTERNAL) {
            gw_send_response(gw, p->stream, p->ref_seq, REJ(UNAVAILABLE), NULL);
          }
        } else if (!p->replied && (p->kind == P_MASS_CANCEL || p->kind == P_OPERATOR)) {
          gw_send_response(gw, p->stream, p->ref_seq, 0, NULL);
        }
        gw_retire(gw, p);
      }
    }
  }
  if (gw->hold != NULL) hg_outlog_set_position(gw->outlog, 0, 0);
  gw->draining = 0;
  gw->local = local;
  gw_flush_dirty(gw);
  gw_clock_release(gw, outer);
}
