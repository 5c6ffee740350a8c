/*
 * Isolation property test: many accounts in two firms trade at random over
 * the gateway (new orders of every TIF, cancels, replaces and status queries
 * aimed at anyone's order ids, mass cancels, position, statement and
 * open-orders queries for anyone's account), with a drop
 * copy risk viewer per firm and a market data subscriber. Every frame every
 * session receives is checked: a trader's frames concern only its own
 * account (client order ids come from per-account ranges, so any foreign
 * report is detectable; fills and live statuses name only own orders), a
 * risk viewer sees only its own firm's accounts, and another account's order
 * id always gets exactly the reply an unknown id gets. The scenario runs
 * twice: over plain TCP, then with every session over TLS.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gw_client.h"
#include "pipeline_util.h"
#include "tls_certs.h"

#define N_TRADERS 6
#define N_STEPS 600
#define MAX_OIDS 8192

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

typedef struct trader {
  gt_client_t c;
  uint32_t account, firm;
  uint64_t next_clordid;
  uint64_t own[MAX_OIDS];
  size_t n_own;
  int frames;
  int foreign_unknown_replies; /* UNKNOWN_ORDER replies to ids of others */
  /* Every request gets a direct reply naming its client seq (ref_seq);
   * requests are seqs first_seq+1 .. c.seq. replied[] marks the answered
   * ones, so the test can wait for all of them. */
  uint64_t first_seq;
  int answered;
  bool replied[N_STEPS + 1];
} trader_t;

static trader_t tr[N_TRADERS];
static uint64_t all_oids[MAX_OIDS];
static uint32_t all_owner[MAX_OIDS];
static size_t n_all;

static uint64_t base_of(uint32_t account) { return (uint64_t)account * 1000000u; }

static bool owns(const trader_t *t, uint64_t oid) {
  for (size_t i = 0; i < t->n_own; i++)
    if (t->own[i] == oid) return true;
  return false;
}

static uint32_t owner_of(uint64_t oid) {
  for (size_t i = 0; i < n_all; i++)
    if (all_oids[i] == oid) return all_owner[i];
  return 0;
}

static int n_own_statements, n_refused_statements, n_own_open, n_refused_open;

static void note_reply(trader_t *t, uint64_t ref_seq) {
  if (ref_seq == 0) return; /* not a direct reply (a fill of a resting order) */
  /* A reply only ever names a request this session sent. */
  assert_true(ref_seq > t->first_seq && ref_seq <= t->c.seq);
  uint64_t i = ref_seq - t->first_seq;
  assert_true(i <= N_STEPS);
  if (!t->replied[i]) {
    t->replied[i] = true;
    t->answered++;
  }
}

static bool all_answered(void) {
  for (int i = 0; i < N_TRADERS; i++)
    if ((uint64_t)tr[i].answered != tr[i].c.seq - tr[i].first_seq) return false;
  return true;
}

static void check_trader_frame(trader_t *t, env_t *e) {
  t->frames++;
  switch (e->body_case) {
  case BODY(EXECUTION_REPORT): {
    const Hourglass__V1__ExecutionReport *er = e->execution_report;
    note_reply(t, er->ref_seq);
    assert_false(er->drop_copy);
    assert_false(er->has_account);
    if (er->client_order_id != 0) {
      assert_true(er->client_order_id >= base_of(t->account) &&
                  er->client_order_id < base_of(t->account) + 1000000u);
    }
    if (er->exec_type == EXEC(NEW)) {
      assert_true(t->n_own < MAX_OIDS && n_all < MAX_OIDS);
      t->own[t->n_own++] = er->order_id;
      all_oids[n_all] = er->order_id;
      all_owner[n_all++] = t->account;
    } else if (er->exec_type == EXEC(REJECTED)) {
      /* A reject names only what this session asked about. */
      assert_true(er->has_ref_seq);
      if (er->order_id != 0 && !owns(t, er->order_id)) {
        if (owner_of(er->order_id) != 0) t->foreign_unknown_replies++;
        assert_int_equal(er->reason, REJ(UNKNOWN_ORDER));
      }
    } else {
      assert_true(owns(t, er->order_id));
    }
    break;
  }
  case BODY(ORDER_STATUS):
    note_reply(t, e->order_status->ref_seq);
    if (e->order_status->live) {
      assert_true(owns(t, e->order_status->order_id));
    } else {
      assert_false(e->order_status->has_client_order_id);
      assert_false(e->order_status->has_leaves);
    }
    break;
  case BODY(POSITIONS):
    note_reply(t, e->positions->ref_seq);
    /* Own positions, or for another account exactly the unknown-account
     * reply: no account, no cash, no positions. */
    if (e->positions->reason == 0) {
      assert_int_equal(e->positions->account, t->account);
    } else {
      assert_int_equal(e->positions->reason, REJ(UNKNOWN_ACCOUNT));
      assert_int_equal(e->positions->account, 0);
      assert_int_equal(e->positions->cash, 0);
      assert_int_equal(e->positions->n_positions, 0);
    }
    break;
  case BODY(STATEMENT): {
    /* Own statement, or for any other account exactly the unknown-account
     * reply: no account, no cash, no entries, no positions. */
    const Hourglass__V1__Statement *st = e->statement;
    note_reply(t, st->ref_seq);
    if (st->reason == 0) {
      assert_int_equal(st->account, t->account);
      n_own_statements++;
    } else {
      assert_int_equal(st->reason, REJ(UNKNOWN_ACCOUNT));
      assert_false(st->has_account);
      assert_false(st->has_cash);
      assert_int_equal(st->n_entries, 0);
      assert_int_equal(st->n_positions, 0);
      assert_false(st->has_next_index);
      n_refused_statements++;
    }
    break;
  }
  case BODY(OPEN_ORDERS): {
    /* Own live orders only (ids this trader was acknowledged), or for any
     * other account exactly the unknown-account reply. */
    const Hourglass__V1__OpenOrders *oo = e->open_orders;
    note_reply(t, oo->ref_seq);
    if (oo->reason == 0) {
      assert_int_equal(oo->account, t->account);
      for (size_t k = 0; k < oo->n_orders; k++) {
        assert_int_equal(oo->orders[k]->account, t->account);
        assert_true(owns(t, oo->orders[k]->order_id));
      }
      n_own_open++;
    } else {
      assert_int_equal(oo->reason, REJ(UNKNOWN_ACCOUNT));
      assert_false(oo->has_account || oo->has_next_account || oo->has_next_order_id);
      assert_int_equal(oo->n_orders, 0);
      n_refused_open++;
    }
    break;
  }
  case BODY(RESPONSE):
    note_reply(t, e->response->ref_seq);
    break;
  case BODY(HEARTBEAT):
  case BODY(SEQUENCE_GAP):
    break;
  default:
    fail_msg("unexpected body %d for a trader", (int)e->body_case);
  }
}

static void drain_all(gt_client_t *viewers, uint32_t *viewer_firm, int n_viewers,
                      gt_client_t *md, int *md_frames, int wait_ms) {
  bool any = true;
  while (any) {
    any = false;
    for (int i = 0; i < N_TRADERS; i++) {
      env_t *e;
      while ((e = gt_recv(&tr[i].c, 0)) != NULL) {
        check_trader_frame(&tr[i], e);
        any = true;
      }
    }
    for (int v = 0; v < n_viewers; v++) {
      env_t *e;
      while ((e = gt_recv(&viewers[v], 0)) != NULL) {
        any = true;
        if (e->body_case != BODY(EXECUTION_REPORT)) continue;
        const Hourglass__V1__ExecutionReport *er = e->execution_report;
        assert_true(er->drop_copy);
        assert_true(er->has_account);
        /* Accounts 201.. alternate between firms 1 and 2. */
        assert_int_equal(1 + (er->account - 201) % 2, viewer_firm[v]);
        if (er->client_order_id != 0)
          assert_true(er->client_order_id >= base_of(er->account) &&
                      er->client_order_id < base_of(er->account) + 1000000u);
      }
    }
    env_t *e;
    while ((e = gt_recv(md, 0)) != NULL) {
      any = true;
      (*md_frames)++;
      uint32_t b = (uint32_t)e->body_case;
      assert_true(b == BODY(MD_SNAPSHOT) || b == BODY(MD_LEVEL) || b == BODY(MD_TRADE) ||
                  b == BODY(MD_STATUS) || b == BODY(HEARTBEAT));
    }
    if (!any && wait_ms > 0) {
      usleep((useconds_t)wait_ms * 1000);
      wait_ms = 0;
      any = true;
    }
  }
}

/* Drains until every request sent so far has its reply. The walk picks the
 * ids it cancels, replaces and asks about from the acknowledgements it has
 * read, and the checks at the end count replies: neither may depend on how
 * far behind a loaded machine is, so wait for the replies themselves (at
 * most 30 s), not for a fixed time. */
static void wait_answered(gt_client_t *viewers, uint32_t *viewer_firm, int n_viewers,
                          gt_client_t *md, int *md_frames) {
  for (uint64_t end = gt_now_ns() + 30000000000ull; !all_answered() && gt_now_ns() < end;)
    drain_all(viewers, viewer_firm, n_viewers, md, md_frames, 5);
  for (int i = 0; i < N_TRADERS; i++)
    if ((uint64_t)tr[i].answered != tr[i].c.seq - tr[i].first_seq)
      fail_msg("trader %d: %d of %llu requests answered after 30 s", i, tr[i].answered,
               (unsigned long long)(tr[i].c.seq - tr[i].first_seq));
}

static void keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, 1, HG_ROLE_OPERATOR, 0, 0), 0);
  for (int i = 0; i < N_TRADERS; i++)
    assert_int_equal(ts_server_add_key(s, 20 + (uint64_t)i, HG_ROLE_TRADER, 201 + (uint32_t)i,
                                1 + (uint32_t)i % 2),
                     0);
  assert_int_equal(ts_server_add_key(s, 30, HG_ROLE_RISK_VIEWER, 0, 1), 0);
  assert_int_equal(ts_server_add_key(s, 31, HG_ROLE_RISK_VIEWER, 0, 2), 0);
  assert_int_equal(ts_server_add_key(s, 32, HG_ROLE_TRADER, 250, 9), 0);
}

static char tls_cert[320], tls_key[320];

static void tls_on(hg_gateway_config_t *cfg) {
  cfg->tls_cert = tls_cert;
  cfg->tls_key = tls_key;
}

static void run_isolation(void (*tweak)(hg_gateway_config_t *)) {
  memset(tr, 0, sizeof tr);
  n_all = 0;
  n_own_statements = n_refused_statements = n_own_open = n_refused_open = 0;
  ts_server_t s;
  assert_int_equal(ts_server_start(&s, 1, tweak, keys), 0);
  uint32_t acc[N_TRADERS + 1], firm[N_TRADERS + 1];
  for (int i = 0; i < N_TRADERS; i++) {
    acc[i] = 201 + (uint32_t)i;
    firm[i] = 1 + (uint32_t)i % 2;
  }
  acc[N_TRADERS] = 250;
  firm[N_TRADERS] = 9;
  assert_int_equal(gt_setup_market(&s, 1, 2, acc, firm, N_TRADERS + 1), 0);
  for (int i = 0; i < N_TRADERS; i++) {
    tr[i].account = 201 + (uint32_t)i;
    tr[i].firm = 1 + (uint32_t)i % 2;
    tr[i].next_clordid = base_of(tr[i].account) + 1;
    assert_true(gt_login(&tr[i].c, s.port, 20 + (uint64_t)i, (int)(i % 2), 60000) > 0);
    tr[i].first_seq = tr[i].c.seq;
  }
  gt_client_t viewers[2];
  uint32_t vfirm[2] = {1, 2};
  for (int v = 0; v < 2; v++) {
    assert_true(gt_login(&viewers[v], s.port, 30 + (uint64_t)v, 0, 60000) > 0);
    Hourglass__V1__DropCopySubscribe dc = HOURGLASS__V1__DROP_COPY_SUBSCRIBE__INIT;
    env_t q = HOURGLASS__V1__ENVELOPE__INIT;
    q.body_case = BODY(DROP_COPY_SUBSCRIBE);
    q.drop_copy_subscribe = &dc;
    gt_send(&viewers[v], &q);
    assert_int_equal(gt_response_reason(&viewers[v]), 0);
  }
  /* Market data subscriber (account 250, firm 9: trades nothing). */
  gt_client_t md;
  assert_true(gt_login(&md, s.port, 32, 0, 60000) > 0);
  for (uint32_t i = 1; i <= 2; i++) {
    Hourglass__V1__MarketDataSubscribe ms = HOURGLASS__V1__MARKET_DATA_SUBSCRIBE__INIT;
    ms.instrument_id = i;
    env_t q = HOURGLASS__V1__ENVELOPE__INIT;
    q.body_case = BODY(MD_SUBSCRIBE);
    q.md_subscribe = &ms;
    gt_send(&md, &q);
  }
  int md_frames = 0;
  for (int step = 0; step < N_STEPS; step++) {
    trader_t *t = &tr[rnd() % N_TRADERS];
    uint32_t instr = 1 + (uint32_t)(rnd() % 2);
    uint64_t any_oid = n_all > 0 ? all_oids[rnd() % n_all] : 1;
    switch (rnd() % 10) {
    case 0: case 1: case 2: case 3: {
      static const int tifs[] = {0, 0, 1, 2, 3};
      gt_new_order(&t->c, instr, t->next_clordid++, (int)(rnd() % 2), 95 + (int64_t)(rnd() % 11),
                   1 + (int64_t)(rnd() % 5), tifs[rnd() % 5]);
      break;
    }
    case 4: case 5:
      gt_cancel(&t->c, instr, any_oid);
      break;
    case 6:
      gt_replace(&t->c, instr, any_oid, 95 + (int64_t)(rnd() % 11), 1 + (int64_t)(rnd() % 5));
      break;
    case 7:
      gt_status(&t->c, instr, any_oid);
      break;
    case 8: {
      Hourglass__V1__MassCancelRequest mc = HOURGLASS__V1__MASS_CANCEL_REQUEST__INIT;
      mc.has_sides = 1;
      mc.sides = (Hourglass__V1__SideFilter)(rnd() % 3);
      env_t q = HOURGLASS__V1__ENVELOPE__INIT;
      q.body_case = BODY(MASS_CANCEL);
      q.mass_cancel = &mc;
      gt_send(&t->c, &q);
      break;
    }
    case 9:
      if (rnd() % 2) {
        Hourglass__V1__StatementRequest sr = HOURGLASS__V1__STATEMENT_REQUEST__INIT;
        if (rnd() % 4 != 0) {
          sr.has_account = 1;
          sr.account = 201 + (uint32_t)(rnd() % (N_TRADERS + 1)); /* 207: no such account */
        }
        env_t q = HOURGLASS__V1__ENVELOPE__INIT;
        q.body_case = BODY(STATEMENT_REQUEST);
        q.statement_request = &sr;
        gt_send(&t->c, &q);
        break;
      }
      /* fall through */
    default: {
      if (rnd() % 2) {
        Hourglass__V1__OpenOrdersRequest orq = HOURGLASS__V1__OPEN_ORDERS_REQUEST__INIT;
        if (rnd() % 2) {
          orq.has_account = 1;
          orq.account = 201 + (uint32_t)(rnd() % (N_TRADERS + 1)); /* 207: no such account */
        }
        env_t q = HOURGLASS__V1__ENVELOPE__INIT;
        q.body_case = BODY(OPEN_ORDERS_REQUEST);
        q.open_orders_request = &orq;
        gt_send(&t->c, &q);
        break;
      }
      Hourglass__V1__PositionsRequest pr = HOURGLASS__V1__POSITIONS_REQUEST__INIT;
      if (rnd() % 2) {
        pr.has_account = 1;
        pr.account = 201 + (uint32_t)(rnd() % N_TRADERS);
      }
      env_t q = HOURGLASS__V1__ENVELOPE__INIT;
      q.body_case = BODY(POSITIONS_REQUEST);
      q.positions_request = &pr;
      gt_send(&t->c, &q);
      break;
    }
    }
    if (step % 20 == 19) wait_answered(viewers, vfirm, 2, &md, &md_frames);
  }
  wait_answered(viewers, vfirm, 2, &md, &md_frames);
  drain_all(viewers, vfirm, 2, &md, &md_frames, 300); /* and what trails the replies */
  int foreign = 0, frames = 0;
  for (int i = 0; i < N_TRADERS; i++) {
    foreign += tr[i].foreign_unknown_replies;
    frames += tr[i].frames;
  }
  /* The random walk did exercise what it checks. */
  assert_true(n_all > 100);
  assert_true(foreign > 10);
  assert_true(md_frames > 100);
  assert_true(frames > N_STEPS);
  assert_true(n_own_statements > 5);
  assert_true(n_refused_statements > 5);
  assert_true(n_own_open > 2);
  assert_true(n_refused_open > 2);
  for (int i = 0; i < N_TRADERS; i++) gt_close(&tr[i].c);
  gt_close(&viewers[0]);
  gt_close(&viewers[1]);
  gt_close(&md);
  ts_server_stop(&s);
}

static void test_isolation(void **state) {
  (void)state;
  run_isolation(NULL);
}

static void test_isolation_tls(void **state) {
  (void)state;
  char dir[256];
  assert_non_null(util_tmpdir(dir, "isotls"));
  assert_int_equal(ts_tls_make(dir), 0);
  snprintf(tls_cert, sizeof tls_cert, "%s/server.pem", dir);
  snprintf(tls_key, sizeof tls_key, "%s/server.key", dir);
  char ca[320];
  snprintf(ca, sizeof ca, "%s/ca.pem", dir);
  assert_int_equal(gt_use_tls(ca), 0);
  run_isolation(tls_on);
  gt_use_tls(NULL);
  util_rm_rf(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_isolation),
                                     cmocka_unit_test(test_isolation_tls)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
