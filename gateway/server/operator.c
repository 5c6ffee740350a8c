/*
 * operator.c - operator requests (listing, halts, accounts, cash, API keys,
 * the cluster's membership) and the nine settlement commands with the
 * SettlementResult that answers them. Loop thread.
 *
 * In cluster mode an AddApiKey is checked here, then handed to the cluster
 * (replicate_key), which proposes it to the group; every node stores it
 * when it is committed (hg_gateway_apply_key) and the leader answers it
 * then (hg_gateway_key_reply). A ClusterRequest is checked for its fields
 * and handed to the cluster (cluster_request), which answers it with
 * hg_gateway_cluster_reply().
 */
#include "gateway_int.h"

static bool symbol_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > HG_SYMBOL_MAX) return false;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

static void handle_settlement(conn_t *c, uint32_t si, const env_t *env);

/* The RejectReason of an AddApiKey's outcome. */
static uint32_t key_reason(int rc) {
  return rc == 0               ? 0
         : rc == HG_EINVAL     ? REJ(INVALID_REQUEST)
         : rc == HG_EEXISTS    ? REJ(KEY_EXISTS)
         : rc == HG_EPERM      ? REJ(NOT_LEADER)
                               : REJ(UNAVAILABLE);
}

void hg_gateway_key_reply(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, int status) {
  gw_send_response(gw, stream, ref_seq, key_reason(status), NULL);
}

/* ---------------------------------------------------- cluster membership */

/* "host:port" with a port 1..65535 and a host of [0-9A-Za-z.-], as
 * cluster.members writes them. */
static bool address_ok(const char *s) {
  const char *colon = s != NULL ? strrchr(s, ':') : NULL;
  if (colon == NULL || colon == s || strlen(s) >= 64) return false;
  for (const char *p = s; p < colon; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          *p == '.' || *p == '-'))
      return false;
  unsigned long port = 0;
  const char *p = colon + 1;
  if (*p == '\0') return false;
  for (; *p != '\0'; p++) {
    if (*p < '0' || *p > '9') return false;
    port = port * 10 + (unsigned long)(*p - '0');
    if (port > 65535) return false;
  }
  return port > 0;
}

static void cluster_refuse(hg_gateway_t *gw, uint32_t si, uint64_t ref_seq, int status,
                           const char *text) {
  hg_gateway_cluster_reply_t r;
  memset(&r, 0, sizeof r);
  r.status = status;
  r.text = text;
  hg_gateway_cluster_reply(gw, si, ref_seq, &r);
}

static void handle_cluster(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  const Hourglass__V1__ClusterRequest *q = env->cluster_request;
  hg_gateway_cluster_req_t req = {.op = (int)q->op, .id = q->has_id ? q->id : 0};
  bool add = q->op == HG_GW_CLUSTER_ADD;
  bool ok = q->op >= HG_GW_CLUSTER_STATUS && q->op <= HG_GW_CLUSTER_TRANSFER;
  if (ok && (add || q->op == HG_GW_CLUSTER_REMOVE)) ok = req.id >= 1 && req.id <= 16;
  if (ok && q->op == HG_GW_CLUSTER_TRANSFER) ok = req.id <= 16;
  if (ok && add) ok = address_ok(q->raft_address) && address_ok(q->client_address);
  if (ok && !add) ok = q->raft_address == NULL && q->client_address == NULL;
  if (!ok) {
    cluster_refuse(gw, si, env->seq, HG_EINVAL,
                   "op 1..4; id 1..16 (add, remove); add needs raft_address and "
                   "client_address as host:port");
    return;
  }
  if (gw->cfg.cluster_request == NULL) {
    cluster_refuse(gw, si, env->seq, HG_EINVAL, "not a cluster node");
    return;
  }
  if (add) {
    req.raft_address = q->raft_address;
    req.client_address = q->client_address;
  }
  gw->cfg.cluster_request(gw->cfg.cluster_ctx, &req, si, env->seq);
}

static uint32_t cluster_reason(int status) {
  switch (status) {
  case 0: return 0;
  case HG_EPERM: return REJ(NOT_LEADER);
  case HG_EBUSY: return REJ(CHANGE_IN_PROGRESS);
  case HG_ENOTFOUND: return REJ(UNKNOWN_MEMBER);
  case HG_EEXISTS: return REJ(MEMBER_EXISTS);
  case HG_ESTATE: return REJ(MEMBER_IS_LEADER);
  case HG_EINVAL: return REJ(INVALID_REQUEST);
  default: return REJ(CHANGE_FAILED);
  }
}

void hg_gateway_cluster_reply(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq,
                              const hg_gateway_cluster_reply_t *rep) {
  enum { MAXM = 16 };
  Hourglass__V1__ClusterStatus st = HOURGLASS__V1__CLUSTER_STATUS__INIT;
  Hourglass__V1__ClusterMember mm[MAXM], *mp[MAXM];
  st.ref_seq = ref_seq;
  uint32_t reason = cluster_reason(rep->status);
  PB_SET(st, reason, reason);
  st.text = (char *)rep->text;
  if (rep->node_id != 0) {
    PB_SET(st, node_id, rep->node_id);
    PB_SET(st, leader_id, rep->leader_id);
    PB_SET(st, term, rep->term);
    PB_SET(st, commit_index, rep->commit_index);
    PB_SET(st, applied_index, rep->applied_index);
  }
  size_t n = rep->n_members < MAXM ? rep->n_members : MAXM;
  for (size_t i = 0; i < n; i++) {
    const hg_gateway_cluster_member_t *m = &rep->members[i];
    hourglass__v1__cluster_member__init(&mm[i]);
    mm[i].id = m->id;
    mm[i].raft_address = (char *)m->raft_address;
    if (m->client_address[0] != '\0') mm[i].client_address = (char *)m->client_address;
    PB_SET(mm[i], voter, m->voter != 0);
    PB_SET(mm[i], match_index, m->match_index);
    PB_SET(mm[i], lag, m->lag);
    mp[i] = &mm[i];
  }
  st.n_members = n;
  st.members = mp;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(CLUSTER_STATUS);
  env.cluster_status = &st;
  gw_stream_send_idx(gw, stream, &env);
}

void gw_handle_operator(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  hg_command_t cmd;
  memset(&cmd, 0, sizeof cmd);
  uint32_t reason = 0;
  if ((env->body_case >= B(SET_PROVIDER_GRADE) && env->body_case <= B(LIST_CURVE)) ||
      env->body_case == B(MARK) || env->body_case == B(FUND_DEPOSIT)) {
    handle_settlement(c, si, env);
    return;
  }
  switch (env->body_case) {
  case B(LIST_INSTRUMENT): {
    const Hourglass__V1__ListInstrument *l = env->list_instrument;
    if (l->base.n_unknown_fields != 0 || !symbol_ok(l->symbol) ||
        (l->has_default_stp && (l->default_stp < 0 || l->default_stp > 4))) {
      reason = REJ(INVALID_REQUEST);
      break;
    }
    cmd.type = HG_COMMAND_LIST_INSTRUMENT;
    snprintf(cmd.u.list.symbol, sizeof cmd.u.list.symbol, "%s", l->symbol);
    hg_book_params_t *bp = &cmd.u.list.params;
    bp->instrument_id = l->instrument_id;
    bp->tick_size = l->tick_size;
    bp->contract_unit = l->contract_unit;
    bp->min_price = l->min_price;
    bp->max_price = l->max_price;
    bp->max_order_qty = l->max_order_qty;
    bp->ref_price = l->has_ref_price ? l->ref_price : 0;
    bp->max_orders = l->max_orders;
    bp->max_accounts = l->max_accounts;
    bp->default_stp = l->has_default_stp ? (uint8_t)l->default_stp : 0;
    /* a spread's legs and ratio (settlement/CONTRACT.md 7.4) */
    cmd.u.list.leg_token_id = l->has_leg_token_id ? l->leg_token_id : 0;
    cmd.u.list.leg_gpu_id = l->has_leg_gpu_id ? l->leg_gpu_id : 0;
    cmd.u.list.ratio_token = l->has_ratio_token ? l->ratio_token : 0;
    cmd.u.list.ratio_gpu = l->has_ratio_gpu ? l->ratio_gpu : 0;
    break;
  }
  case B(DELIST_INSTRUMENT):
    cmd.type = HG_COMMAND_DELIST_INSTRUMENT;
    cmd.u.instrument.instrument_id = env->delist_instrument->instrument_id;
    break;
  case B(HALT):
    cmd.type = HG_COMMAND_HALT;
    cmd.u.instrument.instrument_id = env->halt->instrument_id;
    break;
  case B(RESUME):
    cmd.type = HG_COMMAND_RESUME;
    cmd.u.instrument.instrument_id = env->resume->instrument_id;
    break;
  case B(END_OF_SESSION):
    cmd.type = HG_COMMAND_END_OF_SESSION;
    cmd.u.end_of_session.session_date =
        env->end_of_session->has_session_date ? env->end_of_session->session_date : 0;
    break;
  case B(ADD_ACCOUNT):
    cmd.type = HG_COMMAND_ADD_ACCOUNT;
    cmd.u.add_account.account = env->add_account->account;
    cmd.u.add_account.firm = env->add_account->firm;
    break;
  case B(DEPOSIT):
    cmd.type = HG_COMMAND_DEPOSIT;
    cmd.u.cash.account = env->deposit->account;
    cmd.u.cash.amount = env->deposit->amount;
    break;
  case B(WITHDRAW):
    cmd.type = HG_COMMAND_WITHDRAW;
    cmd.u.cash.account = env->withdraw->account;
    cmd.u.cash.amount = env->withdraw->amount;
    break;
  case B(ADD_API_KEY): {
    const Hourglass__V1__AddApiKey *k = env->add_api_key;
    hg_key_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.key_id = k->key_id;
    rec.role = k->role;
    rec.account = k->has_account ? k->account : 0;
    rec.firm = k->has_firm ? k->firm : 0;
    /* A trading key must name an account the exchange knows, of the firm
     * given: drop copies and risk views follow the key's firm. */
    bool trades = rec.role == HG_ROLE_TRADER || rec.role == HG_ROLE_MARKET_MAKER;
    account_t *a = trades ? gw_account_find(gw, rec.account) : NULL;
    if (k->secret.len >= HG_WIRE_SECRET_MIN && k->secret.len <= HG_WIRE_SECRET_MAX)
      rec.secret_len = (uint8_t)k->secret.len;
    if (k->base.n_unknown_fields != 0 || hg_key_record_check(&rec) != 0) {
      reason = REJ(INVALID_REQUEST);
    } else if (trades && a == NULL) {
      reason = REJ(UNKNOWN_ACCOUNT);
    } else if (trades && a->firm != rec.firm) {
      reason = REJ(FIRM_MISMATCH);
    } else {
      memcpy(rec.secret, k->secret.data, k->secret.len);
      /* Cluster mode stores it when the group commits it (hg_gateway_apply_key). */
      int rc = gw->cfg.replicate_key != NULL ? gw_key_absent(gw, rec.key_id)
                                              : gw_key_store(gw, &rec, 0);
      if (rc == 0 && gw->cfg.replicate_key != NULL) {
        hg_gateway_key_t key = {.key_id = rec.key_id, .role = rec.role, .account = rec.account,
                                .firm = rec.firm, .secret = rec.secret,
                                .secret_len = rec.secret_len};
        rc = gw->cfg.replicate_key(gw->cfg.cluster_ctx, &key, si, env->seq);
        hg_wipe(&rec, sizeof rec);
        hg_wipe(k->secret.data, k->secret.len);
        if (rc != 0) hg_gateway_key_reply(gw, si, env->seq, rc);
        return; /* answered once committed */
      }
      reason = key_reason(rc);
      hg_wipe(&rec, sizeof rec);
    }
    /* The decoded copy of the secret (in the frame arena) goes too. */
    hg_wipe(k->secret.data, k->secret.len);
    gw_send_response(gw, si, env->seq, reason, NULL);
    return;
  }
  case B(CLUSTER_REQUEST):
    handle_cluster(c, si, env);
    return;
  default:
    reason = REJ(INVALID_REQUEST);
  }
  if (reason == 0) reason = gw_submit(gw, &cmd, P_OPERATOR, si, c, env->seq, NULL);
  if (reason != 0) gw_send_response(gw, si, env->seq, reason, NULL);
}

/* ------------------------------------------------- settlement commands
 *
 * The nine settlement commands reach the journal as the state machine's own
 * messages. Each request is checked by encoding it as a journal Command and
 * decoding that with hg_command_decode(), so the gateway accepts exactly
 * what the journal would (strings, days, kinds, ranges). PublishSamples is
 * journaled HG_SAMPLES_PER_COMMAND samples at a time: its parts are pending
 * entries in a row, every one checked before the first is submitted, and
 * one SettlementResult answers the whole request after the last part. */

#define SETTLE_CMD_OFFSET (B(SET_PROVIDER_GRADE) - HOURGLASS__V1__COMMAND__BODY_SET_PROVIDER_GRADE)
/* Samples in one PublishSamples request: bounds the pending entries one
 * request takes (the client splits bigger files). */
#define MAX_SAMPLES_PER_REQUEST 1024u

/* A SettlementResult's text: the longest message (samples refused, with two
 * 10-digit numbers) is under 60 bytes. */
#define SETTLE_TEXT_MAX 96

/* env's settlement body (samples [from, from + n) for PublishSamples) as a
 * journal command. Returns 0 or REJ_INVALID_REQUEST. */
static uint32_t settle_build(const env_t *env, size_t from, size_t n, hg_command_t *cmd) {
  Hourglass__V1__Command m = HOURGLASS__V1__COMMAND__INIT;
  Hourglass__V1__PublishSamples ps;
  m.seq = 1; /* checked by the decoder only; the sequencer stamps the real one */
  m.ts = 0;
  m.body_case = (Hourglass__V1__Command__BodyCase)(env->body_case - SETTLE_CMD_OFFSET);
  switch (env->body_case) {
  case B(MARK): /* numbered after the others on the envelope */
    m.body_case = HOURGLASS__V1__COMMAND__BODY_MARK;
    m.mark = env->mark;
    break;
  case B(FUND_DEPOSIT):
    m.body_case = HOURGLASS__V1__COMMAND__BODY_FUND_DEPOSIT;
    m.fund_deposit = env->fund_deposit;
    break;
  case B(SET_PROVIDER_GRADE): m.set_provider_grade = env->set_provider_grade; break;
  case B(PUBLISH_SAMPLES):
    ps = *env->publish_samples;
    if (ps.base.n_unknown_fields != 0) return REJ(INVALID_REQUEST);
    ps.samples = env->publish_samples->samples + from;
    ps.n_samples = n;
    m.publish_samples = &ps;
    break;
  case B(DISCARD_SAMPLES): m.discard_samples = env->discard_samples; break;
  case B(COMPUTE_FIXING): m.compute_fixing = env->compute_fixing; break;
  case B(PUBLISH_FIXING): m.publish_fixing = env->publish_fixing; break;
  case B(FINALIZE_FIXING): m.finalize_fixing = env->finalize_fixing; break;
  case B(DAILY_SETTLEMENT): m.daily_settlement = env->daily_settlement; break;
  case B(EXPIRE): m.expire = env->expire; break;
  case B(LIST_CURVE): m.list_curve = env->list_curve; break;
  default: return REJ(INVALID_REQUEST);
  }
  uint8_t buf[HG_COMMAND_MAX_ENCODED];
  if (hourglass__v1__command__get_packed_size(&m) > sizeof buf) return REJ(INVALID_REQUEST);
  size_t len = hourglass__v1__command__pack(&m, buf);
  memset(cmd, 0, sizeof *cmd);
  return hg_command_decode(buf, len, cmd) == 0 ? 0 : REJ(INVALID_REQUEST);
}

/* A SettlementResult for a request refused before anything was submitted. */
static void settle_refuse(hg_gateway_t *gw, uint32_t stream, uint64_t ref_seq, uint32_t command,
                          uint32_t reason, const char *text) {
  Hourglass__V1__SettlementResult r = HOURGLASS__V1__SETTLEMENT_RESULT__INIT;
  r.ref_seq = ref_seq;
  PB_SET(r, reason, reason);
  PB_SET(r, command, command);
  r.text = (char *)text;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(SETTLEMENT_RESULT);
  env.settlement_result = &r;
  gw_stream_send_idx(gw, stream, &env);
}

static void handle_settlement(conn_t *c, uint32_t si, const env_t *env) {
  hg_gateway_t *gw = c->gw;
  uint32_t command = env->body_case == B(MARK) ? HG_COMMAND_MARK
                     : env->body_case == B(FUND_DEPOSIT)
                         ? HG_COMMAND_FUND_DEPOSIT
                         : (uint32_t)env->body_case - SETTLE_CMD_OFFSET;
  size_t total = 1, per = 1;
  if (env->body_case == B(PUBLISH_SAMPLES)) {
    total = env->publish_samples->n_samples;
    per = HG_SAMPLES_PER_COMMAND;
    if (total == 0 || total > MAX_SAMPLES_PER_REQUEST) {
      settle_refuse(gw, si, env->seq, command, REJ(INVALID_REQUEST),
                    total == 0 ? "no samples" : "more than 1024 samples in one request");
      return;
    }
  }
  uint32_t parts = (uint32_t)((total + per - 1) / per);
  hg_command_t cmd;
  for (uint32_t k = 0; k < parts; k++) {
    size_t from = (size_t)k * per, n = total - from < per ? total - from : per;
    if (settle_build(env, from, n, &cmd) != 0) {
      char text[SETTLE_TEXT_MAX];
      if (parts > 1) {
        snprintf(text, sizeof text, "invalid field among samples %zu..%zu (0-based)", from,
                 from + n - 1);
      } else {
        snprintf(text, sizeof text, "a field is missing or out of range");
      }
      settle_refuse(gw, si, env->seq, command, REJ(INVALID_REQUEST), text);
      return;
    }
  }
  if (gw->pend_next - gw->pend_tail + parts > gw->cfg.pending_capacity) {
    STAT_ADD(gw, st_busy);
    settle_refuse(gw, si, env->seq, command, REJ(BUSY), NULL);
    return;
  }
  pending_t *last = NULL;
  for (uint32_t k = 0; k < parts; k++) {
    size_t from = (size_t)k * per, n = total - from < per ? total - from : per;
    settle_build(env, from, n, &cmd);
    pending_t *p = NULL;
    uint32_t reason = gw_submit(gw, &cmd, P_SETTLE, si, c, env->seq, &p);
    if (reason != 0) {
      if (last == NULL) {
        settle_refuse(gw, si, env->seq, command, reason, NULL);
        return;
      }
      /* The parts already queued are answered by the last of them. */
      last->refused = reason;
      break;
    }
    p->replied = 1; /* the generic Response paths stay silent: settle_done answers */
    p->part = k;
    p->parts = parts;
    last = p;
  }
  if (last != NULL) last->parts = last->part + 1;
}

/* The accumulator of p's request, reset when a new request's events start. */
static settle_acc_t *settle_acc(hg_gateway_t *gw, const pending_t *p) {
  settle_acc_t *a = &gw->sacc;
  uint64_t first = p->origin - p->part;
  if (a->owner != first) {
    Hourglass__V1__ContractDsp *dsp = a->dsp, **dspp = a->dspp;
    memset(a, 0, sizeof *a);
    a->dsp = dsp;
    a->dspp = dspp;
    a->owner = first;
    a->command = p->cmd.type;
  }
  return a;
}

/* Mirror upkeep for settlement events, whoever caused them, and the
 * gathering of a settlement request's result. */
void gw_settle_event(hg_gateway_t *gw, const hg_exchange_event_t *ev, pending_t *p) {
  switch (ev->type) {
  case HG_XEV_CASH: /* the guarantee's cash: fees, fund cover, loss sharing */
    if (ev->account != HG_CLR_FUND_ACCOUNT) {
      account_t *ac = gw_account_find(gw, ev->account);
      if (ac != NULL) ac->cash = ev->balance;
    }
    break;
  case HG_XEV_VM:
  case HG_XEV_FINAL_SETTLEMENT: {
    account_t *ac = gw_account_find(gw, ev->account);
    if (ac != NULL) ac->cash = ev->balance;
    if (ev->type == HG_XEV_FINAL_SETTLEMENT && ev->qty != 0)
      gw_position_add(gw, ev->account, ev->instrument_id, ev->qty > 0 ? HG_SIDE_SELL : HG_SIDE_BUY,
                      ev->qty > 0 ? ev->qty : -ev->qty, ev->price);
    break;
  }
  case HG_XEV_DSP:
    if (ev->tier != 0) gw_positions_settled(gw, ev->instrument_id);
    break;
  case HG_XEV_EXPIRED: {
    instr_t *in = gw_instr_find(gw, ev->instrument_id);
    if (in != NULL) {
      in->state = ISTATE(DELISTED);
      gw_md_status(gw, in);
      while (in->n_subs > 0) gw_md_unsubscribe(&gw->conns[in->subs[0]], in);
      in->id = 0;
    }
    break;
  }
  default:
    break;
  }
  if (p == NULL || p->kind != P_SETTLE) return;
  settle_acc_t *a = settle_acc(gw, p);
  switch (ev->type) {
  case HG_XEV_REJECTED:
    if (a->reason == 0) {
      a->reason = ev->reason;
      if (ev->reason == HG_XREJ_SETTLEMENT_FAILED) a->error = (int32_t)ev->amount;
      if (p->cmd.type == HG_COMMAND_PUBLISH_SAMPLES) {
        a->reject_from = p->part * HG_SAMPLES_PER_COMMAND;
        a->reject_to = a->reject_from + p->cmd.u.samples.n - 1;
      }
    }
    break;
  case HG_XEV_GRADE_SET:
    a->day = ev->day;
    a->has_day = 1;
    break;
  case HG_XEV_SAMPLES:
    a->samples_accepted += (uint32_t)ev->amount;
    a->samples_staged = (uint32_t)ev->balance;
    a->day = ev->day;
    a->has_day = 1;
    break;
  case HG_XEV_SAMPLES_DISCARDED:
    a->samples_discarded = (uint32_t)ev->amount;
    a->day = ev->day;
    a->has_day = 1;
    break;
  case HG_XEV_FIXING:
    a->day = ev->day;
    a->has_day = 1;
    a->has_fixing = 1;
    a->fixing_value = ev->price;
    a->fixing_tier = ev->tier;
    a->fixing_status = ev->status;
    a->fixing_kind = ev->kind;
    a->fixing_outcome = ev->outcome;
    a->fixing_inputs = (uint32_t)ev->amount;
    break;
  case HG_XEV_DSP:
    if (a->n_dsp < gw->cfg.max_instruments) {
      Hourglass__V1__ContractDsp *d = &a->dsp[a->n_dsp++];
      hourglass__v1__contract_dsp__init(d);
      d->instrument_id = ev->instrument_id;
      d->dsp = ev->price;
      d->tier = ev->tier;
    }
    a->dsp_total++;
    break;
  case HG_XEV_CYCLE:
    a->cycle = 1;
    a->day = ev->day;
    a->has_day = 1;
    a->vm_sum = ev->amount;
    a->vm_paid = ev->lo;
    a->vm_received = ev->hi;
    a->day_orders = ev->qty;
    a->vm_entries = (uint32_t)ev->balance;
    break;
  case HG_XEV_FIXING_MISSING:
    if (a->n_missing < SACC_MISSING) {
      a->missing_day[a->n_missing] = ev->day;
      a->missing_status[a->n_missing++] = ev->status;
    }
    break;
  case HG_XEV_FINAL_SETTLEMENT:
    a->final_sum += ev->amount;
    a->fsp = ev->price;
    break;
  case HG_XEV_EXPIRED:
    a->expired = 1;
    a->instrument_id = ev->instrument_id;
    a->fsp = ev->price;
    a->positions_closed = (uint32_t)ev->amount;
    a->orders_cancelled = ev->qty;
    break;
  case HG_XEV_LISTED:
    if (a->n_listed < SACC_LISTED) a->listed[a->n_listed++] = ev->instrument_id;
    break;
  default:
    break;
  }
}

/* A part of a settlement request is done (or was never processed); after the
 * last part, the request's SettlementResult goes out. */
void gw_settle_done(hg_gateway_t *gw, pending_t *p, const hg_pipe_out_t *o) {
  settle_acc_t *a = settle_acc(gw, p);
  if (o->kind == HG_PIPE_DONE) {
    a->engine_seq = o->seq;
  } else if (a->reason == 0) {
    a->reason = o->kind == HG_PIPE_UNAVAILABLE ? REJ(UNAVAILABLE) : REJ(INVALID_REQUEST);
  }
  if (p->part + 1 < p->parts) return;
  if (a->reason == 0 && p->refused != 0) a->reason = p->refused;
  Hourglass__V1__SettlementResult r = HOURGLASS__V1__SETTLEMENT_RESULT__INIT;
  Hourglass__V1__MissingDay md[SACC_MISSING];
  Hourglass__V1__MissingDay *mdp[SACC_MISSING];
  char text[SETTLE_TEXT_MAX];
  r.ref_seq = p->ref_seq;
  r.has_reason = a->reason != 0;
  r.reason = a->reason;
  PB_SET(r, command, p->cmd.type);
  r.has_engine_seq = a->engine_seq != 0;
  r.engine_seq = a->engine_seq;
  r.has_error = a->error != 0;
  r.error = a->error;
  r.has_day = a->has_day;
  r.day = a->day;
  switch (p->cmd.type) {
  case HG_COMMAND_SET_PROVIDER_GRADE:
    PB_SET(r, day, p->cmd.u.provider_grade.effective_day);
    break;
  case HG_COMMAND_PUBLISH_SAMPLES:
    PB_SET(r, samples_accepted, a->samples_accepted);
    PB_SET(r, samples_staged, a->samples_staged);
    PB_SET(r, day, p->cmd.u.samples.day);
    if (a->reason != 0 && a->reject_to >= a->reject_from && a->reject_to != 0) {
      snprintf(text, sizeof text, "samples %u..%u (0-based) refused", a->reject_from,
               a->reject_to);
      r.text = text;
    } else if (p->refused != 0) {
      snprintf(text, sizeof text, "only the first %u samples were queued",
               (p->part + 1) * HG_SAMPLES_PER_COMMAND);
      r.text = text;
    }
    break;
  case HG_COMMAND_DISCARD_SAMPLES:
    PB_SET(r, samples_discarded, a->samples_discarded);
    break;
  case HG_COMMAND_DAILY_SETTLEMENT:
    PB_SET(r, day, p->cmd.u.daily.day);
    if (a->reason == REJ(NOT_IN_STATE) || a->reason == REJ(ALREADY_SETTLED)) {
      char d[11];
      hg_index_day_format(p->cmd.u.daily.day, d);
      if (a->reason == REJ(ALREADY_SETTLED))
        snprintf(text, sizeof text,
                 "%s is already settled: one cycle per day, in day order", d);
      else
        snprintf(text, sizeof text, "%s is not the next cycle: not before 16:00 UTC that day",
                 d);
      r.text = text;
    }
    if (a->cycle) {
      PB_SET(r, contracts_settled, a->dsp_total);
      PB_SET(r, vm_sum, a->vm_sum);
      PB_SET(r, vm_paid, a->vm_paid);
      PB_SET(r, vm_received, a->vm_received);
      PB_SET(r, vm_entries, a->vm_entries);
      PB_SET(r, day_orders_expired, a->day_orders);
    }
    break;
  case HG_COMMAND_EXPIRE:
    PB_SET(r, instrument_id, p->cmd.u.expire.instrument_id);
    if (a->expired) {
      PB_SET(r, fsp, a->fsp);
      PB_SET(r, positions_closed, a->positions_closed);
      PB_SET(r, final_sum, a->final_sum);
      PB_SET(r, orders_cancelled, a->orders_cancelled);
    }
    break;
  default:
    break;
  }
  if (a->has_fixing) {
    PB_SET(r, fixing_value, a->fixing_value);
    PB_SET(r, fixing_tier, a->fixing_tier);
    PB_SET(r, fixing_status, a->fixing_status);
    PB_SET(r, fixing_kind, a->fixing_kind);
    PB_SET(r, fixing_outcome, a->fixing_outcome);
    r.has_fixing_inputs = a->fixing_inputs != 0;
    r.fixing_inputs = a->fixing_inputs;
  }
  r.n_contracts = a->n_dsp;
  for (size_t i = 0; i < r.n_contracts; i++) a->dspp[i] = &a->dsp[i];
  r.contracts = a->dspp;
  for (uint32_t i = 0; i < a->n_missing; i++) {
    hourglass__v1__missing_day__init(&md[i]);
    md[i].day = a->missing_day[i];
    md[i].status = a->missing_status[i];
    mdp[i] = &md[i];
  }
  r.n_missing = a->n_missing;
  r.missing = mdp;
  r.n_listed = a->n_listed;
  r.listed = a->listed;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = B(SETTLEMENT_RESULT);
  env.settlement_result = &r;
  gw_stream_send_idx(gw, p->stream, &env);
  a->owner = 0;
}
