/*
 * The session layer without I/O. A connection starts in AWAIT_LOGIN, where
 * only a Login is legal; a verified Login makes it ACTIVE; anything illegal
 * ends it with a specific TerminateCode. Timers are plain timestamps compared
 * against the "now" the caller passes, so the same code runs under libuv,
 * under a fake clock in the unit tests and in the fuzz target.
 */
#include "session.h"

#include <assert.h>
#include <string.h>

#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "hourglass/hmac.h"

/* ---------------------------------------------------------------- throttle */

void hg_throttle_init(hg_throttle_t *t, uint32_t rate, uint32_t burst, uint64_t now_ns) {
  t->rate = rate;
  t->burst = burst == 0 ? 1 : burst;
  t->tokens_milli = (uint64_t)t->burst * 1000u;
  t->last_ns = now_ns;
}

bool hg_throttle_take(hg_throttle_t *t, uint64_t now_ns) {
  if (t->rate == 0) return true;
  uint64_t cap = (uint64_t)t->burst * 1000u;
  if (now_ns > t->last_ns) {
    uint64_t dt = now_ns - t->last_ns;
    uint64_t missing = cap - t->tokens_milli;
    /* missing <= 2^32 * 1000, so missing * 1e6 < 2^64; dt * rate below
     * full_ns * rate stays under 2^63 as well. */
    uint64_t full_ns = missing * 1000000u / t->rate + 1;
    if (dt >= full_ns) {
      t->tokens_milli = cap;
      t->last_ns = now_ns;
    } else {
      uint64_t gain = dt * t->rate / 1000000u;
      t->tokens_milli += gain;
      /* Advance only by the time converted, so remainders keep accruing. */
      t->last_ns += gain * 1000000u / t->rate;
    }
  }
  if (t->tokens_milli < 1000u) return false;
  t->tokens_milli -= 1000u;
  return true;
}

/* ------------------------------------------------------------- key records */

void hg_key_record_encode(const hg_key_record_t *k, uint8_t out[HG_KEY_RECORD_SIZE]) {
  memset(out, 0, HG_KEY_RECORD_SIZE);
  out[0] = 1; /* record version */
  hg_st_le(out + 1, k->key_id, 8);
  hg_st_le(out + 9, k->role, 4);
  hg_st_le(out + 13, k->account, 4);
  hg_st_le(out + 17, k->firm, 4);
  out[21] = k->secret_len;
  memcpy(out + 22, k->secret, k->secret_len <= 64 ? k->secret_len : 64);
}

int hg_key_record_decode(const uint8_t *buf, size_t len, hg_key_record_t *out) {
  if (len != HG_KEY_RECORD_SIZE || buf[0] != 1) return HG_ECORRUPT;
  hg_key_record_t k;
  memset(&k, 0, sizeof k);
  k.key_id = hg_ld_le(buf + 1, 8);
  k.role = (uint32_t)hg_ld_le(buf + 9, 4);
  k.account = (uint32_t)hg_ld_le(buf + 13, 4);
  k.firm = (uint32_t)hg_ld_le(buf + 17, 4);
  k.secret_len = buf[21];
  if (k.secret_len > 64) return HG_ECORRUPT;
  memcpy(k.secret, buf + 22, k.secret_len);
  if (hg_key_record_check(&k) != 0) return HG_ECORRUPT;
  *out = k;
  return 0;
}

int hg_key_record_check(const hg_key_record_t *k) {
  if (k->key_id == 0 || k->secret_len < 16 || k->secret_len > 64) return HG_EINVAL;
  switch (k->role) {
  case HOURGLASS__V1__ROLE__ROLE_TRADER:
  case HOURGLASS__V1__ROLE__ROLE_MARKET_MAKER:
    return k->account != 0 && k->firm != 0 ? 0 : HG_EINVAL;
  case HOURGLASS__V1__ROLE__ROLE_RISK_VIEWER:
    return k->firm != 0 && k->account == 0 ? 0 : HG_EINVAL;
  case HOURGLASS__V1__ROLE__ROLE_OPERATOR:
    return k->account == 0 ? 0 : HG_EINVAL;
  default:
    return HG_EINVAL;
  }
}

/* ------------------------------------------------------------------- login */

uint32_t hg_login_verify(const Hourglass__V1__Login *login, const hg_key_record_t *key,
                         uint64_t now_ns, uint64_t skew_ns) {
  if (login->session_id.len != HG_WIRE_SESSION_ID_LEN || login->hmac.len != HG_WIRE_MAC_LEN ||
      login->key_id == 0 || login->base.n_unknown_fields != 0 ||
      (login->has_keepalive_ms && login->keepalive_ms == 0))
    return HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_INVALID;
  /* An unknown key still pays for one MAC so timing does not tell them apart. */
  static const uint8_t dummy[32];
  uint8_t mac[HG_WIRE_MAC_LEN];
  const uint8_t *secret = key != NULL ? key->secret : dummy;
  size_t secret_len = key != NULL ? key->secret_len : sizeof dummy;
  hg_wire_login_mac(secret, secret_len, login->timestamp_ns, login->session_id.data, login->key_id,
                    mac);
  int ok = hg_ct_equal(mac, login->hmac.data, HG_WIRE_MAC_LEN);
  hg_wipe(mac, sizeof mac);
  if (key == NULL || key->key_id != login->key_id || !ok)
    return HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_AUTH_FAILED;
  uint64_t ts = login->timestamp_ns;
  uint64_t d = ts > now_ns ? ts - now_ns : now_ns - ts;
  if (d > skew_ns) return HOURGLASS__V1__LOGIN_REJECT_CODE__LOGIN_TIMESTAMP_SKEW;
  return 0;
}

/* ----------------------------------------------------------- state machine */

int hg_sess_body_direction(uint32_t c) {
  if (c >= 10 && c <= 13) return 1;
  if (c >= 20 && c <= 25) return 0;
  if (c >= 30 && c <= 41) return 1;
  if (c >= 50 && c <= 71) return 1;
  if (c >= 80 && c <= 93) return 0;
  return -1;
}

bool hg_sess_body_is_app(uint32_t c) { return (c >= 30 && c <= 41) || (c >= 50 && c <= 71); }

void hg_sess_init(hg_session_t *s, uint64_t now_ns, uint64_t login_timeout_ns) {
  memset(s, 0, sizeof *s);
  s->state = HG_SESS_AWAIT_LOGIN;
  s->opened_ns = now_ns;
  s->last_rx_ns = now_ns;
  s->last_tx_ns = now_ns;
  s->login_timeout_ns = login_timeout_ns;
  s->next_in_seq = 1;
}

void hg_sess_activate(hg_session_t *s, uint32_t keepalive_ms, uint64_t now_ns) {
  s->state = HG_SESS_ACTIVE;
  s->keepalive_ms = keepalive_ms;
  s->last_rx_ns = now_ns;
  s->last_tx_ns = now_ns;
  s->warned = 0;
}

static hg_sess_verdict_t term(uint32_t *out, uint32_t code) {
  *out = code;
  return HG_SV_TERMINATE;
}

hg_sess_verdict_t hg_sess_on_frame(hg_session_t *s, const Hourglass__V1__Envelope *env,
                                   uint64_t now_ns, uint32_t *t) {
  s->last_rx_ns = now_ns;
  s->warned = 0;
  uint32_t c = (uint32_t)env->body_case;
  int dir = hg_sess_body_direction(c);
  if (env->base.n_unknown_fields != 0 || dir < 0)
    return term(t, HOURGLASS__V1__TERMINATE_CODE__TERM_UNKNOWN_MESSAGE);
  if (dir == 0) return term(t, HOURGLASS__V1__TERMINATE_CODE__TERM_WRONG_DIRECTION);
  if (hg_wire_envelope_has_unknown(env))
    return term(t, HOURGLASS__V1__TERMINATE_CODE__TERM_INVALID_FIELD);
  if (s->state != HG_SESS_ACTIVE) {
    if (c != HOURGLASS__V1__ENVELOPE__BODY_LOGIN)
      return term(t, HOURGLASS__V1__TERMINATE_CODE__TERM_NOT_LOGGED_IN);
    return HG_SV_LOGIN;
  }
  if (c == HOURGLASS__V1__ENVELOPE__BODY_LOGIN)
    return term(t, HOURGLASS__V1__TERMINATE_CODE__TERM_ALREADY_LOGGED_IN);
  if (!hg_sess_body_is_app(c)) {
    if (c == HOURGLASS__V1__ENVELOPE__BODY_RETRANSMIT_REQUEST && s->retransmitting)
      return term(t, HOURGLASS__V1__TERMINATE_CODE__TERM_RETRANSMIT_IN_PROGRESS);
    return HG_SV_SESSION;
  }
  if (!env->has_seq || env->seq == 0)
    return term(t, HOURGLASS__V1__TERMINATE_CODE__TERM_MISSING_SEQ);
  if (env->seq < s->next_in_seq) {
    s->duplicates++;
    return HG_SV_DUPLICATE;
  }
  hg_sess_verdict_t v = HG_SV_APP;
  if (env->seq > s->next_in_seq) {
    s->gap_expected = s->next_in_seq;
    v = HG_SV_APP_GAP;
  }
  uint64_t prev = s->next_in_seq;
  s->next_in_seq = env->seq == UINT64_MAX ? UINT64_MAX : env->seq + 1;
  assert(s->next_in_seq >= prev); /* the expected client seq only moves forward */
  (void)prev;
  return v;
}

hg_sess_tick_t hg_sess_tick(hg_session_t *s, uint64_t now_ns, uint32_t *t) {
  if (s->state == HG_SESS_CLOSED) return HG_ST_NONE;
  if (s->state == HG_SESS_AWAIT_LOGIN) {
    if (now_ns - s->opened_ns >= s->login_timeout_ns) {
      *t = HOURGLASS__V1__TERMINATE_CODE__TERM_LOGIN_TIMEOUT;
      return HG_ST_TERMINATE;
    }
    return HG_ST_NONE;
  }
  uint64_t ka = (uint64_t)s->keepalive_ms * 1000000u;
  uint64_t quiet = now_ns > s->last_rx_ns ? now_ns - s->last_rx_ns : 0;
  if (quiet >= 2 * ka) {
    *t = HOURGLASS__V1__TERMINATE_CODE__TERM_KEEPALIVE_LAPSED;
    return HG_ST_TERMINATE;
  }
  if (quiet >= ka && !s->warned) {
    s->warned = 1;
    return HG_ST_WARN;
  }
  if (now_ns - s->last_tx_ns >= ka) return HG_ST_HEARTBEAT;
  return HG_ST_NONE;
}
