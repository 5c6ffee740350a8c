/*
 * inbound.c - the inbound session layer: Login (key check, session id reuse,
 * stream attachment), RetransmitRequest, and the dispatch of every decoded
 * frame to its handler after the role check. Loop thread.
 */
#include "gateway_int.h"

/* The stream of a key: found, or created (its seq continues from the store). */
stream_t *gw_stream_get(hg_gateway_t *gw, const hg_key_record_t *k, uint32_t *idx) {
  uint32_t i = gw_map_get(&gw->stream_map, k->key_id);
  if (i == NONE32) {
    if (gw->n_streams == gw->cfg.max_streams) return NULL;
    i = gw->n_streams;
    stream_t *st = &gw->streams[i];
    st->log = malloc(gw->cfg.retransmit_bytes);
    st->ent = calloc(gw->cfg.retransmit_frames, sizeof *st->ent);
    st->quote_gen = calloc((size_t)gw->cfg.max_instruments * 2, sizeof *st->quote_gen);
    if (st->log == NULL || st->ent == NULL || st->quote_gen == NULL) {
      free(st->log);
      free(st->ent);
      free(st->quote_gen);
      st->log = NULL;
      st->ent = NULL;
      st->quote_gen = NULL;
      return NULL;
    }
    /* Once per key, at its first login: both are rings every frame goes through. */
    hg_prefault(st->log, gw->cfg.retransmit_bytes);
    hg_prefault(st->ent, (size_t)gw->cfg.retransmit_frames * sizeof *st->ent);
    char name[SEQ_NAME_LEN];
    gw_seq_name(name, k->key_id);
    uint64_t last = 0;
    if (hg_store_get_session_seq(gw->store, name, &last) != 0) last = 0;
    int rc = hg_outlog_key_add(gw->outlog, k->key_id);
    if (rc != 0) /* the key still trades; only its durable retransmission is lost */
      gw_log(gw, HG_LOG_ERROR, "outbound journal: key table: %s", hg_strerror(rc));
    uint64_t jn = hg_outlog_next_seq(gw->outlog, k->key_id);
    st->key_id = k->key_id;
    st->next_seq = last + 1 > jn ? last + 1 : jn;
    st->first_seq = st->next_seq;
    st->orders = NONE32;
    st->next_quote_id = 1;
    gw->n_streams++;
    gw_map_put(&gw->stream_map, k->key_id, i);
  }
  stream_t *st = &gw->streams[i];
  st->role = k->role;
  st->account = k->account;
  st->firm = k->firm;
  if (k->account != 0) {
    account_t *a = gw_account_find(gw, k->account);
    if (a != NULL && a->stream == NONE32) a->stream = i;
  }
  *idx = i;
  return st;
}

static void login_reject_at(conn_t *c, uint32_t code, const char *text, const char *leader) {
  Hourglass__V1__LoginReject r = HOURGLASS__V1__LOGIN_REJECT__INIT;
  r.code = code;
  r.text = (char *)text;
  r.leader = (char *)leader;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(LOGIN_REJECT);
  env.login_reject = &r;
  gw_conn_send(c, &env);
  STAT_ADD(c->gw, st_login_rejects);
  if (!c->used) return;
  gw_conn_end(c);
}

static void login_reject(conn_t *c, uint32_t code, const char *text) {
  login_reject_at(c, code, text, NULL);
}

static void handle_login(conn_t *c, const Hourglass__V1__Login *lg) {
  hg_gateway_t *gw = c->gw;
  hg_key_record_t key;
  int rc = gw_key_load(gw, lg->key_id, &key);
  if (rc != 0 && rc != HG_ENOTFOUND) {
    gw_log(gw, HG_LOG_ERROR, "key store: %s", hg_strerror(rc));
    login_reject(c, LREJ(UNAVAILABLE), "key store unavailable");
    return;
  }
  uint32_t code = hg_login_verify(lg, rc == 0 ? &key : NULL, gw_now_wall(gw),
                                  (uint64_t)gw->cfg.login_skew_ms * 1000000u);
  hg_wipe(key.secret, sizeof key.secret);
  if (code != 0) {
    login_reject(c, code, code == LREJ(AUTH_FAILED)       ? "authentication failed"
                          : code == LREJ(TIMESTAMP_SKEW) ? "timestamp outside the allowed skew"
                                                         : "invalid login");
    return;
  }
  if (gw->cfg.order_entry_leader != NULL && key.role != HG_ROLE_RISK_VIEWER) {
    const char *leader = gw->cfg.order_entry_leader(gw->cfg.cluster_ctx);
    if (leader != NULL) {
      login_reject_at(c, LREJ(NOT_LEADER),
                      leader[0] != '\0' ? "not the leader: log in at the leader"
                                        : "not the leader: no leader elected yet",
                      leader[0] != '\0' ? leader : NULL);
      return;
    }
  }
  if (gw->n_sessions >= gw->cfg.max_sessions) {
    login_reject(c, LREJ(TOO_MANY_SESSIONS), "session limit reached");
    return;
  }
  uint32_t si = gw_map_get(&gw->stream_map, lg->key_id);
  if (si != NONE32 && gw->streams[si].n_conns >= gw->cfg.sessions_per_key) {
    char text[80];
    snprintf(text, sizeof text, "the key has %" PRIu32 " live sessions, the most it may have",
             gw->streams[si].n_conns);
    login_reject(c, LREJ(ALREADY_ACTIVE), text);
    return;
  }
  /* Used ids: the journal's in-memory set, then (read only, no commit) ids
   * an earlier version recorded in the key store. */
  char name[USED_NAME_LEN];
  gw_used_name(name, lg->key_id, lg->session_id.data);
  uint64_t dummy;
  rc = hg_outlog_sid_used(gw->outlog, lg->key_id, lg->session_id.data)
           ? 0
           : hg_store_get_session_seq(gw->store, name, &dummy);
  if (rc == 0) {
    login_reject(c, LREJ(SESSION_ID_REUSED), "session id used before");
    return;
  }
  if (rc == HG_ENOTFOUND) {
    rc = hg_outlog_sid_add(gw->outlog, lg->key_id, lg->session_id.data);
    if (rc == HG_EUNAVAIL) rc = 0; /* remembered; written once the disk takes it */
  }
  if (rc != 0) {
    gw_log(gw, HG_LOG_ERROR, "session id check: %s", hg_strerror(rc));
    login_reject(c, LREJ(UNAVAILABLE), "key store unavailable");
    return;
  }
  stream_t *st = gw_stream_get(gw, &key, &si);
  if (st == NULL) {
    login_reject(c, LREJ(TOO_MANY_SESSIONS), "stream table full");
    return;
  }
  uint32_t ka = lg->has_keepalive_ms ? lg->keepalive_ms : 1000;
  if (ka < gw->cfg.keepalive_min_ms) ka = gw->cfg.keepalive_min_ms;
  if (ka > gw->cfg.keepalive_max_ms) ka = gw->cfg.keepalive_max_ms;
  uint64_t now = now_mono();
  hg_sess_activate(&c->sess, ka, now);
  hg_throttle_init(&c->thr, gw->cfg.throttle_rate, gw->cfg.throttle_burst, now);
  c->logged_in = 1;
  c->cod = lg->has_cancel_on_disconnect && lg->cancel_on_disconnect;
  c->stream = si;
  /* Replies go to every session of the key: a session that joins others
   * gets its own range of ref_seqs (its request seqs plus the base), so
   * each session tells its replies apart. A key's only session keeps base
   * 0, and so the ref_seqs of the protocol without several sessions. The
   * 32-bit counter skips 0 when it wraps: base 0 is that first session's
   * range, never a joining one's. */
  if (st->n_conns != 0 && ++st->ref_bases == 0) st->ref_bases = 1;
  c->ref_base = st->n_conns == 0 ? 0 : (uint64_t)st->ref_bases << 32;
  gw_stream_attach(gw, st, c);
  gw_unauth_release(gw, c);
  gw->n_sessions++;
  STAT_SET(gw, st_sessions, gw->n_sessions);
  STAT_SET(gw, st_unauth, gw->n_unauth);
  STAT_ADD(gw, st_logins);

  Hourglass__V1__LoginAck ack = HOURGLASS__V1__LOGIN_ACK__INIT;
  ack.session_id = lg->session_id;
  ack.role = st->role;
  ack.account = st->account;
  ack.firm = st->firm;
  ack.keepalive_ms = ka;
  ack.next_seq = st->next_seq;
  ack.server_time_ns = gw_now_wall(gw);
  PB_SET(ack, cancel_on_disconnect, c->cod);
  PB_SET(ack, epoch, gw->epoch);
  if (c->ref_base != 0) PB_SET(ack, ref_seq_base, c->ref_base);
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(LOGIN_ACK);
  env.login_ack = &ack;
  gw_conn_send(c, &env);
}

/* ------------------------------------------------------------- dispatch */

/* A range (partly) older than the byte ring: every journal frame of it must
 * read back intact before the Retransmission promises `count` frames. The
 * count is bounded (retransmit_max), so these preads on the loop are too. */
static uint32_t rt_check_file(hg_gateway_t *gw, stream_t *st, uint64_t from, uint32_t count) {
  uint64_t oldest = hg_outlog_oldest(gw->outlog, st->key_id);
  if (oldest == 0 || from < oldest) return REJ(RETRANSMIT_EXPIRED);
  uint64_t end = from + count;
  if (st->n_ent > 0 && end > st->first_seq) end = st->first_seq;
  for (uint64_t s = from; s < end; s++) {
    size_t len;
    int rc = hg_outlog_read(gw->outlog, st->key_id, s, NULL, 0, &len);
    if (rc == HG_ECORRUPT) return REJ(RETRANSMIT_CORRUPT);
    if (rc == HG_ERANGE) return REJ(RETRANSMIT_EXPIRED);
    if (rc != 0) {
      gw_log(gw, HG_LOG_WARN, "retransmission: frame missing from the outbound journal: %s",
             hg_strerror(rc));
      return REJ(RETRANSMIT_RANGE);
    }
  }
  return 0;
}

static void handle_retransmit(conn_t *c, stream_t *st, const Hourglass__V1__RetransmitRequest *r) {
  hg_gateway_t *gw = c->gw;
  Hourglass__V1__Retransmission m = HOURGLASS__V1__RETRANSMISSION__INIT;
  m.from_seq = r->from_seq;
  m.count = r->count;
  uint32_t reason = 0;
  if (r->base.n_unknown_fields != 0 || r->count == 0 || r->count > gw->cfg.retransmit_max ||
      r->from_seq == 0) {
    reason = REJ(INVALID_REQUEST);
  } else if (r->from_seq + r->count > st->next_seq) {
    reason = REJ(RETRANSMIT_RANGE);
  } else if (st->n_ent == 0 || r->from_seq < st->first_seq) {
    reason = rt_check_file(gw, st, r->from_seq, r->count);
  }
  if (reason != 0) {
    PB_SET(m, reason, reason);
  }
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(RETRANSMISSION);
  env.retransmission = &m;
  gw_conn_send(c, &env);
  if (reason != 0 || !c->used) return;
  c->rt_next = r->from_seq;
  c->rt_end = r->from_seq + r->count;
  c->sess.retransmitting = 1;
  gw_rt_pump(c);
}

static void send_gap(conn_t *c, uint64_t expected, uint64_t received) {
  Hourglass__V1__SequenceGap g = HOURGLASS__V1__SEQUENCE_GAP__INIT;
  g.expected = expected;
  g.received = received;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(SEQUENCE_GAP);
  env.sequence_gap = &g;
  gw_conn_send(c, &env);
}

static void handle_frame(conn_t *c, const uint8_t *body, size_t len);

/* Frames sent while a request is handled are the gateway's own (in
 * cluster mode held until committed: group.c). */
void gw_handle_frame(conn_t *c, const uint8_t *body, size_t len) {
  c->gw->local = 1;
  handle_frame(c, body, len);
  c->gw->local = 0;
}

static void handle_frame(conn_t *c, const uint8_t *body, size_t len) {
  hg_gateway_t *gw = c->gw;
  env_t *env = NULL;
  if (hg_wire_decode(&gw->arena, body, len, &env) != 0) {
    gw_conn_terminate(c, TERM(DECODE_FAILED), "frame is not a valid Envelope");
    return;
  }
  uint32_t code = 0;
  hg_sess_verdict_t v = hg_sess_on_frame(&c->sess, env, gw_clock(gw), &code);
  switch (v) {
  case HG_SV_TERMINATE:
    gw_conn_terminate(c, code, NULL);
    return;
  case HG_SV_LOGIN:
    handle_login(c, env->login);
    return;
  case HG_SV_DUPLICATE:
    return;
  case HG_SV_SESSION:
    if (env->body_case == B(LOGOUT)) {
      gw_conn_terminate(c, TERM(LOGOUT), NULL);
    } else if (env->body_case == B(RETRANSMIT_REQUEST)) {
      handle_retransmit(c, gw_conn_stream(c), env->retransmit_request);
    }
    return; /* a heartbeat only refreshed the receive timer */
  case HG_SV_APP_GAP:
    send_gap(c, c->sess.gap_expected, env->seq);
    break;
  case HG_SV_APP:
    break;
  }
  /* From here the request's seq is its ref_seq in every reply. */
  env->seq += c->ref_base;
  stream_t *st = gw_conn_stream(c);
  /* Cluster mode: a key that trades has one stream in the group, which
   * only the leader extends; a session left on a node that lost the
   * leadership ends and logs in at the new leader. */
  if (gw->hold != NULL && st->role != HG_ROLE_RISK_VIEWER &&
      gw->cfg.order_entry_leader(gw->cfg.cluster_ctx) != NULL) {
    gw_conn_terminate(c, TERM(NOT_LEADER), "not the leader: log in at the leader");
    return;
  }
  uint32_t si = c->stream;
  uint32_t body_case = (uint32_t)env->body_case;
  if (!gw_role_allows(st->role, body_case)) {
    uint32_t req = gw_pkind_request(body_case == B(NEW_ORDER) ? P_NEW
                                    : body_case == B(CANCEL)  ? P_CANCEL
                                    : body_case == B(REPLACE) ? P_REPLACE
                                                              : 0);
    if (req != 0) {
      reject_echo_t echo = body_case == B(NEW_ORDER) ? gw_new_order_echo(env->new_order)
                           : body_case == B(REPLACE)
                               ? (reject_echo_t){-1, env->replace->new_price, env->replace->new_qty}
                               : NO_ECHO;
      gw_send_order_reject(gw, si, env->seq, req, REJ(NOT_PERMITTED), 0, 0, 0, 0, echo);
    } else {
      gw_send_response(gw, si, env->seq, REJ(NOT_PERMITTED), NULL);
    }
    return;
  }
  switch (env->body_case) {
  case B(NEW_ORDER): gw_handle_new_order(c, st, si, env); break;
  case B(CANCEL): gw_handle_cancel(c, st, si, env); break;
  case B(REPLACE): gw_handle_replace(c, st, si, env); break;
  case B(MASS_CANCEL): gw_handle_mass_cancel(c, st, si, env); break;
  case B(ORDER_STATUS_REQUEST): gw_handle_order_status(c, st, si, env); break;
  case B(MASS_QUOTE): gw_handle_mass_quote(c, st, si, env); break;
  case B(QUOTE_GROUP_RESET): gw_handle_quote_reset(c, st, si, env); break;
  case B(POSITIONS_REQUEST): gw_handle_positions(c, st, si, env); break;
  case B(INSTRUMENTS_REQUEST): gw_handle_instruments(c, si, env); break;
  case B(MD_SUBSCRIBE): gw_handle_md_subscribe(c, si, env); break;
  case B(MD_UNSUBSCRIBE): gw_handle_md_unsubscribe(c, si, env); break;
  case B(DROP_COPY_SUBSCRIBE): gw_handle_drop_copy(c, si, env); break;
  case B(STATEMENT_REQUEST): gw_handle_statement(c, st, si, env); break;
  case B(OPEN_ORDERS_REQUEST): gw_handle_open_orders(c, st, si, env); break;
  default: gw_handle_operator(c, si, env); break;
  }
}
