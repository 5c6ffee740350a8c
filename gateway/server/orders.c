/*
 * orders.c - order entry: submitting commands to the pipeline (the pending
 * ring), the gateway's own rejects, new order, cancel, replace, mass cancel,
 * order status, mass quotes with market-maker protection, and the internal
 * cancels (cancel-on-disconnect, quote pulls). Loop thread.
 */
#include "gateway_int.h"

/* ------------------------------------------------------------ submitting */

pending_t *gw_pend_at(hg_gateway_t *gw, uint64_t counter) {
  return &gw->pend[counter & (gw->cfg.pending_capacity - 1)];
}

/* Queues cmd for the engine (in loop mode: executes it, its results come
 * once durable). Returns 0, REJ_BUSY (our ring or the
 * pipeline's is full) or REJ_UNAVAILABLE. The pending entry is recorded
 * before the pipeline sees the command: in loop mode a drain in the middle
 * of it (hg_gateway_drain) handles its events before execute returns. */
uint32_t gw_submit(hg_gateway_t *gw, const hg_command_t *cmd, uint32_t kind, uint32_t stream,
                   conn_t *c, uint64_t ref_seq, pending_t **out) {
  if (gw->pend_next - gw->pend_tail >= gw->cfg.pending_capacity) {
    STAT_ADD(gw, st_busy);
    return REJ(BUSY);
  }
  uint64_t counter = gw->pend_next;
  uint64_t origin = ORIGIN_TAG | (counter & ORIGIN_MASK);
  pending_t *p = gw_pend_at(gw, counter);
  memset(p, 0, sizeof *p);
  p->origin = origin;
  p->ref_seq = ref_seq;
  p->stream = stream;
  p->conn_gen = c != NULL ? c->gen : UINT32_MAX;
  p->kind = kind;
  p->cod = c != NULL ? c->cod : 0;
  p->cmd = *cmd;
  gw->pend_next++;
  assert(gw->pend_next - gw->pend_tail <= gw->cfg.pending_capacity);
  if (cmd->type == HG_COMMAND_NEW_ORDER) gw->orders_reserved++;
  /* Loop mode, while the pipeline's output is handled (gw_drain): queued
   * for the loop's next commit, so that a drain never runs inside one. */
  int rc = gw->loop_mode && !gw->draining ? hg_pipeline_execute(gw->pipe, origin, cmd)
           : gw->in_read || gw->loop_mode ? hg_pipeline_submit_nowake(gw->pipe, origin, cmd)
                                          : hg_pipeline_submit(gw->pipe, origin, cmd);
  if (rc == 0 && gw->in_read && !gw->loop_mode) gw->kick_due = 1;
  if (rc != 0) {
    /* Nothing will come for it. Commands a drain queued meanwhile sit
     * after it, so only the newest entry is taken back outright. */
    if (gw->pend_next == counter + 1) {
      gw->pend_next = counter;
      p->origin = 0;
      if (cmd->type == HG_COMMAND_NEW_ORDER) gw->orders_reserved--;
    } else {
      gw_retire(gw, p);
    }
    if (rc != HG_EBUSY) return REJ(UNAVAILABLE);
    STAT_ADD(gw, st_busy);
    return REJ(BUSY);
  }
  STAT_ADD(gw, st_submitted);
  if (out != NULL) *out = p;
  return 0;
}

void gw_send_response(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, uint32_t reason,
                      const char *text) {
  Hourglass__V1__Response r = HOURGLASS__V1__RESPONSE__INIT;
  r.ref_seq = ref_seq;
  r.has_reason = reason != 0;
  r.reason = reason;
  r.text = (char *)text;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(RESPONSE);
  env.response = &r;
  gw_stream_send_idx(gw, stream, &env);
}

void gw_er_echo(Hourglass__V1__ExecutionReport *er, reject_echo_t x) {
  if (x.side >= 0) {
    PB_SET(*er, side, (Hourglass__V1__Side)x.side);
  }
  if (x.side >= 0 || x.price != 0 || x.qty != 0) {
    er->has_price = er->has_qty = 1;
    er->price = x.price;
    er->qty = x.qty;
  }
}

/* The echo of a new order request (no side when the side is out of range). */
reject_echo_t gw_new_order_echo(const Hourglass__V1__NewOrderRequest *r) {
  return (reject_echo_t){r->side == 0 || r->side == 1 ? (int)r->side : -1,
                         r->has_price ? r->price : 0, r->qty};
}

/* The echo of a journal command (new order or replace; cancels echo nothing). */
reject_echo_t gw_cmd_echo(const hg_command_t *cmd) {
  if (cmd->type == HG_COMMAND_NEW_ORDER)
    return (reject_echo_t){cmd->u.new_order.side, cmd->u.new_order.price, cmd->u.new_order.qty};
  if (cmd->type == HG_COMMAND_REPLACE)
    return (reject_echo_t){-1, cmd->u.replace.new_price, cmd->u.replace.new_qty};
  return NO_ECHO;
}

/* ExecutionReport(REJECTED) for a request the gateway refused itself. */
void gw_send_order_reject(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, uint32_t req,
                          uint32_t reason, uint32_t instrument, uint64_t order_id,
                          uint64_t clordid, uint32_t quote_group, reject_echo_t echo) {
  Hourglass__V1__ExecutionReport er = HOURGLASS__V1__EXECUTION_REPORT__INIT;
  er.exec_type = EXEC(REJECTED);
  er.instrument_id = instrument;
  er.has_order_id = order_id != 0;
  er.order_id = order_id;
  er.has_client_order_id = clordid != 0;
  er.client_order_id = clordid;
  PB_SET(er, reason, reason);
  PB_SET(er, request, req);
  PB_SET(er, ref_seq, ref_seq);
  er.has_quote_group = quote_group != 0;
  er.quote_group = quote_group;
  gw_er_echo(&er, echo);
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(EXECUTION_REPORT);
  env.execution_report = &er;
  gw_stream_send_idx(gw, stream, &env);
}

/* Internal cancel (cancel-on-disconnect, quote pull, stale quote). */
uint32_t gw_cancel_internal(hg_gateway_t *gw, order_t *o) {
  if (o->cancel_sent) return 0;
  hg_command_t cmd;
  memset(&cmd, 0, sizeof cmd);
  cmd.type = HG_COMMAND_CANCEL;
  cmd.u.cancel.instrument_id = o->instrument_id;
  cmd.u.cancel.account = o->account;
  cmd.u.cancel.order_id = o->order_id;
  uint32_t r = gw_submit(gw, &cmd, P_INTERNAL, o->stream, NULL, 0, NULL);
  if (r == 0) o->cancel_sent = 1;
  return r;
}

/* Cancels the flagged live orders of st that connections no longer
 * logged in entered (the key's other sessions keep theirs). Returns how
 * many could not be submitted (retried from the timer). */
uint32_t gw_cod_cancel(hg_gateway_t *gw, stream_t *st) {
  uint32_t left = 0;
  for (uint32_t i = st->orders; i != NONE32;) {
    order_t *o = &gw->orders[i];
    i = o->next;
    if (o->cod && !o->cancel_sent && !gw_stream_gen_live(gw, st, o->conn_gen) &&
        gw_cancel_internal(gw, o) != 0)
      left++;
  }
  return left;
}

void gw_release_stream_side(conn_t *c) {
  hg_gateway_t *gw = c->gw;
  stream_t *st = gw_conn_stream(c);
  if (c->n_md > 0) gw_md_unsubscribe_all(c);
  if (c->drop_copy) {
    for (uint32_t i = 0; i < gw->n_drop; i++)
      if (gw->drop_list[i] == c->idx) {
        gw->drop_list[i] = gw->drop_list[--gw->n_drop];
        break;
      }
    c->drop_copy = 0;
  }
  if (st == NULL) return;
  /* At a stop the engine stops next and the reports of these cancels would
   * never be drained; the orders are session-scoped, so the next start's
   * SessionsEnded cancels them and their reports reach this stream then. */
  gw_stream_detach(gw, st, c); /* the seq needs no commit: the journal holds it */
  if (c->cod && !gw->stopping) st->cod_retry = gw_cod_cancel(gw, st);
  c->stream = NONE32;
}

/* ---------------------------------------------------------------- requests */

bool gw_role_allows(uint32_t role, uint32_t body) {
  switch (body) {
  case B(NEW_ORDER):
  case B(CANCEL):
  case B(REPLACE):
  case B(MASS_CANCEL):
  case B(ORDER_STATUS_REQUEST):
    return role == HG_ROLE_TRADER || role == HG_ROLE_MARKET_MAKER;
  case B(MASS_QUOTE):
  case B(QUOTE_GROUP_RESET):
    return role == HG_ROLE_MARKET_MAKER;
  case B(POSITIONS_REQUEST):
  case B(STATEMENT_REQUEST):
  case B(OPEN_ORDERS_REQUEST):
    return role != HG_ROLE_OPERATOR;
  case B(INSTRUMENTS_REQUEST):
  case B(MD_SUBSCRIBE):
  case B(MD_UNSUBSCRIBE):
    return true;
  case B(DROP_COPY_SUBSCRIBE):
    return role == HG_ROLE_RISK_VIEWER;
  case B(SET_PROVIDER_GRADE):
  case B(PUBLISH_SAMPLES):
  case B(DISCARD_SAMPLES):
  case B(COMPUTE_FIXING):
  case B(PUBLISH_FIXING):
  case B(FINALIZE_FIXING):
  case B(DAILY_SETTLEMENT):
  case B(EXPIRE):
  case B(LIST_CURVE):
  case B(MARK):
  case B(FUND_DEPOSIT):
  case B(CLUSTER_REQUEST):
    return role == HG_ROLE_OPERATOR;
  default:
    return role == HG_ROLE_OPERATOR && body >= B(LIST_INSTRUMENT) && body <= B(ADD_API_KEY);
  }
}

/* The wire's enums carry the book's values (copied as they are below). */
_Static_assert(HOURGLASS__V1__SIDE__SIDE_SELL == (int)HG_SIDE_SELL, "Side");
_Static_assert(HOURGLASS__V1__ORD_TYPE__ORD_TYPE_MARKET == (int)HG_ORD_MARKET, "OrdType");
_Static_assert(HOURGLASS__V1__TIME_IN_FORCE__TIF_FOK == (int)HG_TIF_FOK, "TimeInForce");
_Static_assert(HOURGLASS__V1__STP_MODE__STP_NONE == (int)HG_STP_NONE, "StpMode");

/* New order -> command; returns 0 or a RejectReason. */
static uint32_t build_new_order(const Hourglass__V1__NewOrderRequest *r, uint32_t account,
                                hg_command_t *cmd) {
  if (r->base.n_unknown_fields != 0 || r->instrument_id == 0 ||
      (r->client_order_id & QUOTE_CLORDID_BIT) != 0 || r->side < 0 || r->side > (int)HG_SIDE_SELL ||
      r->type < 0 || r->type > (int)HG_ORD_MARKET || r->tif < 0 || r->tif > (int)HG_TIF_FOK ||
      (r->has_stp && (r->stp < 0 || r->stp > (int)HG_STP_NONE)) ||
      (r->type == HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT && !r->has_price))
    return REJ(INVALID_REQUEST);
  memset(cmd, 0, sizeof *cmd);
  cmd->type = HG_COMMAND_NEW_ORDER;
  hg_cmd_new_order_t *n = &cmd->u.new_order;
  n->instrument_id = r->instrument_id;
  n->account = account;
  n->client_order_id = r->client_order_id;
  n->smp_group = r->has_smp_group ? r->smp_group : 0;
  n->price = r->type == HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT ? r->price : 0;
  n->qty = r->qty;
  n->side = (uint8_t)r->side;
  n->type = (uint8_t)r->type;
  n->tif = (uint8_t)r->tif;
  n->stp = r->has_stp ? (uint8_t)r->stp : 0;
  n->post_only = r->has_post_only && r->post_only ? 1 : 0;
  return 0;
}

void gw_handle_new_order(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__NewOrderRequest *r = env->new_order;
  hg_command_t cmd;
  uint32_t rej = build_new_order(r, st->account, &cmd);
  /* A cancel-on-disconnect session's order dies with the session, also
   * across a restart (see hg_gateway_start). */
  if (rej == 0) cmd.u.new_order.session_scoped = c->cod ? 1 : 0;
  if (rej == 0 && !hg_throttle_take(&c->thr, gw_clock(gw))) {
    rej = REJ(THROTTLED);
    STAT_ADD(gw, st_throttled);
  }
  /* Every accepted order may need a mirror slot until it is gone. */
  if (rej == 0 && gw->n_orders + gw->orders_reserved >= gw->cfg.max_orders)
    rej = REJ(GATEWAY_FULL);
  if (rej == 0) rej = gw_submit(gw, &cmd, P_NEW, si, c, env->seq, NULL);
  if (rej != 0)
    gw_send_order_reject(gw, si, env->seq, REQ(NEW_ORDER), rej, r->instrument_id, 0,
                         r->client_order_id, 0, gw_new_order_echo(r));
}

void gw_handle_cancel(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__CancelRequest *r = env->cancel;
  uint32_t rej = r->base.n_unknown_fields != 0 || r->order_id == 0 ? REJ(INVALID_REQUEST) : 0;
  if (rej == 0) {
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = HG_COMMAND_CANCEL;
    cmd.u.cancel.instrument_id = r->instrument_id;
    cmd.u.cancel.account = st->account;
    cmd.u.cancel.order_id = r->order_id;
    rej = gw_submit(gw, &cmd, P_CANCEL, si, c, env->seq, NULL);
  }
  if (rej != 0)
    gw_send_order_reject(gw, si, env->seq, REQ(CANCEL), rej, r->instrument_id, r->order_id, 0, 0,
                         NO_ECHO);
}

void gw_handle_replace(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__ReplaceRequest *r = env->replace;
  uint32_t rej = r->base.n_unknown_fields != 0 || r->order_id == 0 ? REJ(INVALID_REQUEST) : 0;
  if (rej == 0 && !hg_throttle_take(&c->thr, gw_clock(gw))) {
    rej = REJ(THROTTLED);
    STAT_ADD(gw, st_throttled);
  }
  if (rej == 0) {
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = HG_COMMAND_REPLACE;
    cmd.u.replace.instrument_id = r->instrument_id;
    cmd.u.replace.account = st->account;
    cmd.u.replace.order_id = r->order_id;
    cmd.u.replace.new_price = r->new_price;
    cmd.u.replace.new_qty = r->new_qty;
    rej = gw_submit(gw, &cmd, P_REPLACE, si, c, env->seq, NULL);
  }
  if (rej != 0)
    gw_send_order_reject(gw, si, env->seq, REQ(REPLACE), rej, r->instrument_id, r->order_id, 0, 0,
                         (reject_echo_t){-1, r->new_price, r->new_qty});
}

void gw_handle_mass_cancel(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__MassCancelRequest *r = env->mass_cancel;
  uint32_t rej = 0;
  if (r->base.n_unknown_fields != 0 || (r->has_sides && (r->sides < 0 || r->sides > 2)))
    rej = REJ(INVALID_REQUEST);
  if (rej == 0) {
    hg_command_t cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.type = HG_COMMAND_MASS_CANCEL;
    cmd.u.mass_cancel.account = st->account;
    cmd.u.mass_cancel.instrument_id = r->has_instrument_id ? r->instrument_id : 0;
    cmd.u.mass_cancel.sides = r->has_sides ? (uint8_t)r->sides : HG_SIDES_BOTH;
    rej = gw_submit(gw, &cmd, P_MASS_CANCEL, si, c, env->seq, NULL);
  }
  if (rej != 0) gw_send_response(gw, si, env->seq, rej, NULL);
}

void gw_handle_order_status(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__OrderStatusRequest *r = env->order_status_request;
  order_t *o = gw_order_find(gw, r->order_id);
  /* Another account's order answers exactly like an unknown id. */
  if (o != NULL && (o->account != st->account || o->instrument_id != r->instrument_id)) o = NULL;
  Hourglass__V1__OrderStatus m = HOURGLASS__V1__ORDER_STATUS__INIT;
  m.ref_seq = env->seq;
  m.instrument_id = r->instrument_id;
  m.order_id = r->order_id;
  m.live = o != NULL;
  if (o != NULL) {
    PB_SET(m, client_order_id, o->client_order_id);
    PB_SET(m, side, (Hourglass__V1__Side)o->side);
    PB_SET(m, price, o->price);
    PB_SET(m, qty, o->qty);
    PB_SET(m, leaves, o->leaves);
    m.has_quote_group = o->quote_group != 0;
    m.quote_group = o->quote_group;
  }
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(ORDER_STATUS);
  out.order_status = &m;
  gw_stream_send_idx(gw, si, &out);
}

mmp_t *gw_mmp_find(stream_t *st, uint32_t group, bool create) {
  mmp_t *free_slot = NULL;
  for (int i = 0; i < MAX_MMP_GROUPS; i++) {
    if (st->mmp[i].group == group) return &st->mmp[i];
    if (st->mmp[i].group == 0 && free_slot == NULL) free_slot = &st->mmp[i];
  }
  if (!create || free_slot == NULL) return NULL;
  memset(free_slot, 0, sizeof *free_slot);
  free_slot->group = group;
  return free_slot;
}

/* Pulls every live quote of a group (or of every group with group 0 and
 * instrument set: the key's quotes in that instrument). Returns how many. */
static uint32_t pull_quotes(hg_gateway_t *gw, stream_t *st, uint32_t group, uint32_t instrument) {
  uint32_t n = 0;
  for (uint32_t i = st->orders; i != NONE32;) {
    order_t *o = &gw->orders[i];
    i = o->next;
    if (o->quote_group == 0 || o->cancel_sent) continue;
    if (group != 0 && o->quote_group != group) continue;
    if (instrument != 0 && o->instrument_id != instrument) continue;
    if (gw_cancel_internal(gw, o) == 0) n++;
  }
  return n;
}

void gw_handle_mass_quote(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__MassQuote *q = env->mass_quote;
  Hourglass__V1__QuoteEntryReject rj[MAX_QUOTE_ENTRIES * 2];
  Hourglass__V1__QuoteEntryReject *rjp[MAX_QUOTE_ENTRIES * 2];
  size_t nrj = 0;
  uint32_t reason = 0;
  if (q->base.n_unknown_fields != 0 || q->quote_group == 0 || q->n_entries == 0 ||
      q->n_entries > MAX_QUOTE_ENTRIES || (q->has_mmp_qty && q->mmp_qty <= 0) ||
      (q->has_mmp_window_ms && q->mmp_window_ms == 0))
    reason = REJ(INVALID_REQUEST);
  for (size_t i = 0; reason == 0 && i < q->n_entries; i++) {
    const Hourglass__V1__QuoteEntry *e = q->entries[i];
    if (e->base.n_unknown_fields != 0 || e->bid_qty < 0 || e->ask_qty < 0 ||
        (e->bid_qty > 0 && e->bid_price <= 0) || (e->ask_qty > 0 && e->ask_price <= 0))
      reason = REJ(INVALID_REQUEST);
    for (size_t j = 0; j < i && reason == 0; j++)
      if (q->entries[j]->instrument_id == e->instrument_id) reason = REJ(INVALID_REQUEST);
  }
  mmp_t *m = NULL;
  if (reason == 0) {
    m = gw_mmp_find(st, q->quote_group, true);
    if (m == NULL) reason = REJ(GATEWAY_FULL);
  }
  if (reason == 0 && m->tripped) reason = REJ(MMP_TRIPPED);
  if (reason == 0 && !hg_throttle_take(&c->thr, gw_clock(gw))) {
    reason = REJ(THROTTLED);
    STAT_ADD(gw, st_throttled);
  }
  if (reason == 0) {
    m->limit = q->has_mmp_qty ? q->mmp_qty : (m->limit != 0 ? m->limit : gw->cfg.mmp_qty);
    if (q->has_mmp_window_ms) {
      m->window_ns = (uint64_t)q->mmp_window_ms * 1000000u;
    } else if (m->window_ns == 0) {
      m->window_ns = (uint64_t)gw->cfg.mmp_window_ms * 1000000u;
    }
    for (size_t i = 0; i < q->n_entries; i++) {
      const Hourglass__V1__QuoteEntry *e = q->entries[i];
      instr_t *in = gw_instr_find(gw, e->instrument_id);
      uint32_t er = 0;
      if (in == NULL) er = REJ(UNKNOWN_INSTRUMENT);
      if (er == 0) {
        /* The previous quote of this key in the instrument goes first; a
         * quote still in flight is caught by its generation on acceptance. */
        uint32_t slot = gw_instr_slot(gw, in);
        st->quote_gen[slot * 2]++;
        st->quote_gen[slot * 2 + 1]++;
        pull_quotes(gw, st, 0, e->instrument_id);
        for (int side = 0; side < 2 && er == 0; side++) {
          int64_t qty = side == 0 ? e->bid_qty : e->ask_qty;
          if (qty == 0) continue;
          if (gw->n_orders + gw->orders_reserved >= gw->cfg.max_orders) {
            er = REJ(GATEWAY_FULL);
            break;
          }
          hg_command_t cmd;
          memset(&cmd, 0, sizeof cmd);
          cmd.type = HG_COMMAND_NEW_ORDER;
          hg_cmd_new_order_t *n = &cmd.u.new_order;
          n->instrument_id = e->instrument_id;
          n->account = st->account;
          n->client_order_id = QUOTE_CLORDID_BIT | st->next_quote_id++;
          n->price = side == 0 ? e->bid_price : e->ask_price;
          n->qty = qty;
          n->side = (uint8_t)side;
          n->type = HG_ORD_LIMIT;
          n->tif = HG_TIF_GTC;
          n->post_only = 1;
          n->session_scoped = 1; /* a quote never outlives the process */
          pending_t *p = NULL;
          er = gw_submit(gw, &cmd, P_QUOTE, si, c, env->seq, &p);
          if (er == 0) {
            p->quote_group = q->quote_group;
            p->quote_gen = st->quote_gen[slot * 2 + side];
          }
        }
      }
      if (er != 0 && nrj < MAX_QUOTE_ENTRIES * 2) {
        hourglass__v1__quote_entry_reject__init(&rj[nrj]);
        rj[nrj].index = (uint32_t)i;
        rj[nrj].reason = er;
        rjp[nrj] = &rj[nrj];
        nrj++;
      }
    }
  }
  Hourglass__V1__MassQuoteAck ack = HOURGLASS__V1__MASS_QUOTE_ACK__INIT;
  ack.ref_seq = env->seq;
  ack.quote_group = q->quote_group;
  ack.has_reason = reason != 0;
  ack.reason = reason;
  ack.n_rejects = nrj;
  ack.rejects = rjp;
  env_t out = HOURGLASS__V1__ENVELOPE__INIT;
  out.body_case = B(MASS_QUOTE_ACK);
  out.mass_quote_ack = &ack;
  gw_stream_send_idx(gw, si, &out);
}

void gw_handle_quote_reset(conn_t *c, stream_t *st, uint32_t si, const env_t *env) {
  mmp_t *m = gw_mmp_find(st, env->quote_group_reset->quote_group, false);
  if (m != NULL) {
    m->tripped = 0;
    m->filled = 0;
    m->window_start = 0;
  }
  gw_send_response(c->gw, si, env->seq, m != NULL ? 0 : REJ(INVALID_REQUEST), NULL);
}

/* Fill of a quote order: counts towards its group's protection. */
void gw_mmp_fill(hg_gateway_t *gw, order_t *o, int64_t qty, uint64_t ts) {
  if (o->quote_group == 0 || o->stream == NONE32) return;
  stream_t *st = &gw->streams[o->stream];
  mmp_t *m = gw_mmp_find(st, o->quote_group, false);
  if (m == NULL || m->tripped) return;
  if (m->window_start == 0 || ts - m->window_start > m->window_ns) {
    m->window_start = ts;
    m->filled = 0;
  }
  m->filled += qty;
  if (m->filled <= m->limit) return;
  m->tripped = 1;
  uint32_t pulled = pull_quotes(gw, st, m->group, 0);
  Hourglass__V1__MmpTriggered t = HOURGLASS__V1__MMP_TRIGGERED__INIT;
  t.quote_group = m->group;
  t.filled_qty = m->filled;
  t.quotes_pulled = pulled;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(MMP_TRIGGERED);
  env.mmp_triggered = &t;
  /* This key's protection state, decided here: held like a reply. */
  int local = gw->local;
  gw->local = 1;
  gw_stream_send(gw, st, &env);
  gw->local = local;
}
