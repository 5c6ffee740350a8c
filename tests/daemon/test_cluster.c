/* Three hourglassd processes as one Raft group on loopback: a leader is
 * elected and takes orders, followers refuse order entry naming it (and
 * serve a risk viewer), /health and /metrics show the roles, and in each
 * round the leader is killed (SIGKILL) while a burst of orders is in
 * flight: every order acknowledged before the kill is live on the new
 * leader, the C client (and hgctl, and the Python client) follows the
 * leader from its list of nodes and trades on (a one-shot hgctl started
 * during the election tries again until it is taken; `hgctl executions
 * --follow` and `hgctl ladder` log in again at the new leader and go on,
 * each report printed once; no node refuses a login naming itself as the
 * leader; the exchange epoch rises at each new leader), the killed node restarts
 * (the last time with empty directories, as a replaced machine) and
 * catches up from the group's snapshot (taken every 8 entries) and log,
 * rebuilding itself in place (no exit) when the leader installs a
 * snapshot; at the end a clean stop of the leader transfers leadership,
 * and all three nodes hold the same state hash at the same last seq.
 * A second case runs the group with TLS on the Raft port (cluster.tls_*):
 * bad certificate files stop a node with a message naming them, the
 * group elects and commits over TLS, and a stranger on a Raft port is
 * counted in hourglass_cluster_tls_failures_total.
 * Usage: test_cluster <hourglassd> [rounds] (CI: 5, slow: 50). */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_util.h"
#include "daemon_util.h"
#include "hgctl_run.h"
#include "hourglass/client.h"
#include "hourglass/error.h"
#include "tls_certs.h"

static const char *g_bin; /* hourglassd, from argv[1] */
static int g_rounds = 5; /* CI; test_cluster_slow runs 50 */

#define NODES 3
#define INSTR 1
#define BURST 40

static du_node_t g_n[NODES];
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];

/* Keys: 1 operator, 2 and 4 traders (account 1), 3 risk viewer (firm 1). */
static const char SECRET_HEX[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/* The Raft port's TLS options of every node started, or all NULL. */
static char g_tls_opts[3][700];
static int g_tls;

static void node_start(du_node_t *n) {
  const char *extra[] = {"pipeline.mode=loop", "cluster.election_timeout_ms=400",
                         "cluster.snapshot_entries=8", NULL, NULL, NULL, NULL};
  for (int k = 0; g_tls && k < 3; k++) extra[3 + k] = g_tls_opts[k];
  if (du_node_start(n, g_bin, g_root, g_members, g_keys, extra) != 0)
    fail_msg("node %d not ready after 120 s", n->id);
}

/* A node that received a snapshot from the leader, or whose proposal the
 * group lost (a leader deposed under load), rebuilds itself in place: any
 * exit the test did not cause fails it. */
static void supervise(void) {
  if (du_cluster_supervise(g_n, NODES) < 0) fail_msg("a node exited unexpectedly");
}

/* The node taking orders, waiting up to 30 s; -1 if none. */
static int find_leader(void) { return du_cluster_leader(g_n, NODES, 120, supervise); }

static hg_client_t *client(int node, uint64_t key) {
  hg_client_t *c = NULL;
  assert_int_equal(ch_node_client(g_n[node].client_port, g_nodes, key, SECRET_HEX, &c), 0);
  return c;
}

/* Connects (following the leader), retrying for up to 30 s. */
static void connect_retry(hg_client_t *c) {
  int rc = ch_connect_retry(c, 30, supervise);
  if (rc != 0) fail_msg("no leader took the login: %d", rc);
}

static void setup_market(int leader) {
  hg_client_t *op = client(leader, 1);
  connect_retry(op);
  assert_int_equal(ch_cluster_market(op, 1024), 0);
  hg_client_destroy(op);
}

typedef struct acked {
  uint64_t order_id[4096];
  size_t n;
} acked_t;

/* Reads execution reports until every clordid in [first, next) is answered
 * or the connection fails; records the acknowledged (NEW) ones. Returns
 * how many were answered; fails the test after 30 s of other frames. */
static uint64_t collect(hg_client_t *c, uint64_t first, uint64_t next, acked_t *a) {
  uint64_t answered = 0;
  double end = du_now() + 30;
  while (answered < next - first) {
    if (du_now() > end)
      fail_msg("execution reports for clordids %" PRIu64 "..%" PRIu64 ": %" PRIu64
               " answered in 30 s", first, next - 1, answered);
    const Hourglass__V1__Envelope *e = NULL;
    int rc = hg_client_recv(c, 3000, &e);
    if (rc <= 0) break;
    if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT) continue;
    const Hourglass__V1__ExecutionReport *er = e->execution_report;
    if (er->client_order_id < first || er->client_order_id >= next) continue;
    answered++;
    if (er->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_NEW) {
      assert_true(a->n < sizeof a->order_id / sizeof a->order_id[0]);
      a->order_id[a->n++] = er->order_id;
    }
  }
  return answered;
}

/* Sends clordids [*next, *next + n): resting buys that never cross. */
static void send_burst(hg_client_t *c, uint64_t *next, int n) {
  for (int i = 0; i < n; i++, (*next)++) {
    hg_client_order_t o = {.instrument_id = INSTR,
                           .client_order_id = *next,
                           .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                           .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                           .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC,
                           .has_price = true,
                           .price = 480 + (int64_t)(*next % 20), /* near the reference price, 500 */
                           .qty = 1};
    uint64_t seq;
    if (hg_client_new_order(c, &o, &seq) != 0) return;
  }
}

/* Every acknowledged order is live at the node c is logged in to (each
 * reply awaited for up to 10 s). */
static void check_live(hg_client_t *c, const acked_t *a) {
  for (size_t i = 0; i < a->n; i++) {
    uint64_t seq;
    assert_int_equal(hg_client_order_status(c, INSTR, a->order_id[i], &seq), 0);
    double end = du_now() + 10;
    for (;;) {
      if (du_now() > end)
        fail_msg("no OrderStatus for order %" PRIu64 " (request %" PRIu64 ") within 10 s",
                 a->order_id[i], seq);
      const Hourglass__V1__Envelope *e = NULL;
      assert_true(hg_client_recv(c, 5000, &e) > 0);
      if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_ORDER_STATUS ||
          e->order_status->ref_seq != seq)
        continue;
      if (!e->order_status->live) {
        char at[64];
        hg_client_address(c, at, sizeof at);
        fail_msg("acknowledged order %" PRIu64 " is missing after failover (asked %s)",
                 a->order_id[i], at);
      }
      break;
    }
  }
}

/* Waits until a node just started knows the leader (it has heard from
 * it) and has caught up (/health "caught_up"), failing if a node exits. */
static void await_leader(int node, int leader) {
  char want_leader[32];
  snprintf(want_leader, sizeof want_leader, "\"leader\":%d,", g_n[leader].id);
  double end = du_now() + 120;
  for (;;) {
    supervise();
    char *h = du_get(g_n[node].http_port, "/health");
    int known = h != NULL && strstr(h, want_leader) != NULL &&
                strstr(h, "\"caught_up\":true") != NULL;
    free(h);
    if (known) return;
    if (du_now() > end) fail_msg("node %d does not know leader %d", node + 1, leader + 1);
    du_sleep_ms(50);
  }
}

/* A follower refuses the trader, naming the leader's address, and takes
 * the risk viewer. */
static void check_follower(int follower, int leader) {
  await_leader(follower, leader);
  uint8_t sec[32];
  assert_int_equal(hg_client_parse_hex(SECRET_HEX, sec, sizeof sec), 32);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = (uint16_t)g_n[follower].client_port;
  cfg.key_id = 4; /* 2 may be logged in at the leader already */
  cfg.secret = sec;
  cfg.secret_len = sizeof sec;
  hg_client_t *c = NULL;
  assert_int_equal(hg_client_create(&cfg, &c), 0);
  /* Without a node list the client still follows the named leader. */
  int rc = hg_client_connect(c);
  if (rc != 0) {
    uint32_t code = 0;
    bool term = false;
    char text[128];
    hg_client_login_reject(c, &code, &term, text, sizeof text);
    char *h = du_get(g_n[follower].http_port, "/health");
    fail_msg("connect at node %d: %d code %u%s %s leader '%s' health %s", follower + 1, rc, code,
             term ? " (terminate)" : "", text, hg_client_login_leader(c), h);
  }
  char at[64], want[64];
  hg_client_address(c, at, sizeof at);
  snprintf(want, sizeof want, "127.0.0.1:%d", g_n[leader].client_port);
  assert_string_equal(at, want);
  hg_client_destroy(c);
  cfg.key_id = 3;
  assert_int_equal(hg_client_create(&cfg, &c), 0);
  assert_int_equal(hg_client_connect(c), 0); /* risk viewer: served here */
  hg_client_address(c, at, sizeof at);
  snprintf(want, sizeof want, "127.0.0.1:%d", g_n[follower].client_port);
  assert_string_equal(at, want);
  hg_client_destroy(c);
}

/* hgctl (next to hourglassd) and the Python client, given the dead node
 * and --nodes, reach the leader: the dead one refuses the connection, a
 * follower redirects. */
static void hgctl_finds_leader(int dead) {
  char cmd[2048], out[700];
  snprintf(out, sizeof out, "%s/hgctl.out", g_root);
  snprintf(cmd, sizeof cmd,
           "\"$(dirname '%s')/hgctl\" op list --port %d --nodes %s --key-id 1 --secret %s "
           "--timeout 2000 > %s 2>&1",
           g_bin, g_n[dead].client_port, g_nodes, SECRET_HEX, out);
  int rc = du_system(cmd);
  char *text = du_read(out);
  if (rc != 0) fail_msg("hgctl --nodes: exit %d: %s", rc, text != NULL ? text : "");
  assert_non_null(strstr(text, "B200.A.2027-02"));
  free(text);
#ifdef HG_PY_PATH
  /* The Python client does the same. */
  snprintf(cmd, sizeof cmd,
           "PYTHONPATH=%s %s -m hgclient --port %d --nodes %s "
           "--key-id 1 --secret %s instruments > %s 2>&1",
           HG_PY_PATH, HG_PYTHON3, g_n[dead].client_port, g_nodes, SECRET_HEX, out);
  rc = du_system(cmd);
  text = du_read(out);
  if (rc != 0) fail_msg("hgclient.py --nodes: exit %d: %s", rc, text != NULL ? text : "");
  assert_non_null(strstr(text, "B200.A.2027-02"));
  free(text);
#endif
}

/* During the election after node `dead` was killed: a trader (key 4) logs in at
 * each other node in turn (no node list; a named leader is followed) until
 * one takes the login, up to 120 s. Returns how many refusals named the
 * refusing node itself as the leader: none should (a new leader that does
 * not take orders yet names no leader), else a client that follows the
 * name spins on that node. */
static int self_redirects(int dead) {
  int self = 0;
  for (double end = du_now() + 120; du_now() < end; du_sleep_ms(1)) {
    supervise();
    for (int i = 0; i < NODES; i++) {
      if (i == dead || g_n[i].pid == 0) continue;
      hg_client_t *c = NULL;
      assert_int_equal(ch_node_client(g_n[i].client_port, NULL, 4, SECRET_HEX, &c), 0);
      int rc = hg_client_connect(c);
      char at[64];
      hg_client_address(c, at, sizeof at);
      if (rc == HG_EAUTH && strcmp(hg_client_login_leader(c), at) == 0) self++;
      hg_client_destroy(c);
      if (rc == 0) return self;
    }
  }
  fail_msg("no node took a trader's login within 120 s of killing node %d", dead + 1);
  return self;
}

/* An hgctl that follows a stream through the node list (stderr merged
 * into out). */
typedef struct follower_cmd {
  pid_t pid;
  int out, err;
  size_t len;
  char buf[65536];
} follower_cmd_t;

static void follower_cmd_start(follower_cmd_t *f, const char *const *args) {
  hgctl_merge_stderr = true;
  f->len = 0;
  f->pid = hgctl_spawn(2, SECRET_HEX, args, &f->out, &f->err);
  hgctl_merge_stderr = false;
  assert_true(f->pid > 0);
}

/* Reads f's output until needle appears (120 s at most). */
static void follower_cmd_await(follower_cmd_t *f, const char *needle) {
  if (!hgctl_read_until(f->out, f->buf, sizeof f->buf, &f->len, needle, 120000))
    fail_msg("hgctl did not print \"%s\"; its output:\n%s", needle, f->buf);
}

static void follower_cmd_stop(follower_cmd_t *f) {
  kill(f->pid, SIGTERM);
  static hgctl_out_t o;
  hgctl_collect(f->pid, f->out, f->err, &o, 0);
}

/* Waits until every running node has applied what the leader committed,
 * then stops them all (SIGTERM) and compares last_seq and state hash. */
static void stop_and_compare(void) {
  int leader = find_leader();
  assert_true(leader >= 0);
  double end = du_now() + 30;
  for (;;) {
    char *h = du_get(g_n[leader].http_port, "/health");
    uint64_t want = du_json_u64(h, "committed_seq");
    free(h);
    int equal = want != UINT64_MAX;
    for (int i = 0; i < NODES; i++) await_leader(i, leader); /* rebuilt if it had to */
    for (int i = 0; i < NODES && equal; i++) {
      char *f = du_get(g_n[i].http_port, "/health");
      equal = du_json_u64(f, "committed_seq") == want && du_json_u64(f, "last_seq") == want;
      free(f);
    }
    if (equal) break;
    if (du_now() > end) fail_msg("nodes did not converge");
    du_sleep_ms(100);
  }
  char seq[NODES][32], hash[NODES][80];
  /* A clean stop of the leader hands leadership over first: another node
   * takes orders (within an election timeout, not after an election). */
  double t0 = du_now();
  assert_int_equal(du_stop(g_n[leader].pid, SIGTERM, 60), 0);
  g_n[leader].pid = 0;
  char *log = du_read(g_n[leader].log);
  assert_non_null(strstr(log, "msg=\"leadership transfer at stop\" result=done"));
  free(log);
  int next = find_leader();
  assert_true(next >= 0 && next != leader);
  fprintf(stderr, "leader stopped: node %d takes orders %.0f ms after the stop began\n",
          g_n[next].id, (du_now() - t0) * 1000);
  for (int i = 0; i < NODES; i++) {
    if (g_n[i].pid != 0) assert_int_equal(du_stop(g_n[i].pid, SIGTERM, 60), 0);
    g_n[i].pid = 0;
    log = du_read(g_n[i].log);
    assert_non_null(log);
    assert_int_equal(du_field(log, "msg=\"stopped\"", "last_seq", seq[i], sizeof seq[i]), 0);
    assert_int_equal(du_field(log, "msg=\"stopped\"", "state_hash", hash[i], sizeof hash[i]), 0);
    free(log);
  }
  for (int i = 1; i < NODES; i++) {
    assert_string_equal(seq[i], seq[0]);
    assert_string_equal(hash[i], hash[0]);
  }
  assert_true(strtoull(seq[0], NULL, 10) > 3);
}

static void leader_killed_under_orders(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "cluster"));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  assert_int_equal(du_cluster_keys(g_keys, SECRET_HEX), 0);
  assert_int_equal(du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes,
                                   sizeof g_nodes), 0);
  for (int i = 0; i < NODES; i++) node_start(&g_n[i]);
  int leader = find_leader();
  assert_true(leader >= 0);
  await_leader((leader + 1) % NODES, leader);
  char *h = du_get(g_n[(leader + 1) % NODES].http_port, "/health");
  assert_int_equal(du_status(h), 200);
  assert_non_null(strstr(h, "\"role\":\"follower\""));
  free(h);
  char *m = du_get(g_n[leader].http_port, "/metrics");
  assert_non_null(strstr(m, "hourglass_cluster_role{role=\"leader\"} 1"));
  assert_non_null(strstr(m, "hourglass_cluster_follower_lag{member="));
  free(m);
  setup_market(leader);
  check_follower((leader + 1) % NODES, leader);

  static acked_t acked;
  memset(&acked, 0, sizeof acked);
  uint64_t next = 1;
  hg_client_t *tr = client(leader, 2);
  connect_retry(tr);
  /* One order at a time: one entry each, so that every node has taken a
   * snapshot (every 8 entries) before the first kill. */
  for (int i = 0; i < 12; i++) {
    uint64_t first = next;
    send_burst(tr, &next, 1);
    assert_int_equal(collect(tr, first, next, &acked), 1);
  }
  assert_int_equal(acked.n, 12);
  /* Every follower holds what the leader committed before the first kill
   * (one that started last may still be loading the leader's snapshot:
   * with the leader killed then, the survivor would have no majority
   * until it is back). */
  for (int i = 0; i < NODES; i++)
    if (i != leader) await_leader(i, leader);
  /* The exchange epoch is the group's: the same at a follower, higher at
   * each new leader. */
  uint64_t epoch = hg_client_session(tr)->epoch;
  assert_true(epoch > 0);
  /* hgctl following the trader's executions and the ladder through the
   * node list, logged in at the leader before the first kill: each prints
   * something once it is (the tail the last report so far, the ladder the
   * book), and only then is the leader killed. A tail still logging in at
   * the kill (a slow start on a loaded machine) would find the new leader
   * through its node list as a first login, with nothing to log in again. */
  static char hgctl_bin[700];
  snprintf(hgctl_bin, sizeof hgctl_bin, "%s", g_bin);
  char *slash = strrchr(hgctl_bin, '/');
  assert_non_null(slash);
  snprintf(slash + 1, sizeof hgctl_bin - (size_t)(slash + 1 - hgctl_bin), "hgctl");
  hgctl_path = hgctl_bin;
  char lport[16];
  snprintf(lport, sizeof lport, "%d", g_n[leader].client_port);
  const char *ex_args[] = {"executions", "--follow", "--last", "1", "--port", lport, "--nodes",
                           g_nodes, "--timeout", "60000", NULL};
  const char *ld_args[] = {"ladder", "1", "--depth", "3", "--port", lport, "--nodes", g_nodes,
                           "--timeout", "60000", NULL};
  static follower_cmd_t ex, ld;
  follower_cmd_start(&ex, ex_args);
  follower_cmd_start(&ld, ld_args);
  char last[48];
  snprintf(last, sizeof last, " clordid=%" PRIu64 " ", next - 1);
  follower_cmd_await(&ex, last);
  follower_cmd_await(&ld, "(id 1)");
  size_t total = 0; /* acknowledged in earlier rounds (then cancelled) */
  for (int round = 0; round < g_rounds; round++) {
    /* Steady flow first, then a burst in flight as the leader dies. */
    uint64_t first = next;
    size_t had = acked.n;
    send_burst(tr, &next, BURST);
    assert_int_equal(collect(tr, first, next, &acked), BURST);
    assert_int_equal(acked.n - had, BURST); /* all accepted */
    first = next;
    send_burst(tr, &next, BURST);
    hg_client_flush(tr, 1000);
    usleep((useconds_t)(round * 1300 % 4000)); /* a different moment in each round */
    kill(g_n[leader].pid, SIGKILL);
    du_stop(g_n[leader].pid, 0, 10);
    int dead = leader;
    g_n[dead].pid = 0;
    /* A one-shot hgctl started during the election, at the dead node: it
     * tries again within its --timeout until the new leader takes it. */
    char dport[16];
    snprintf(dport, sizeof dport, "%d", g_n[dead].client_port);
    const char *pos_args[] = {"positions", "--port", dport, "--nodes", g_nodes,
                              "--timeout", "60000", NULL};
    int po, pe;
    pid_t one_shot = round == 0 ? hgctl_spawn(4, SECRET_HEX, pos_args, &po, &pe) : 0;
    if (round == 0) assert_int_equal(self_redirects(dead), 0);
    size_t before = acked.n;
    collect(tr, first, next, &acked); /* what was acknowledged before it died */
    fprintf(stderr, "round %d: node %d killed, %zu of the %d orders in flight acknowledged, "
            "%zu acknowledged in all\n", round + 1, g_n[leader].id, acked.n - before, BURST,
            total + acked.n);
    if (one_shot > 0) {
      static hgctl_out_t o;
      hgctl_collect(one_shot, po, pe, &o, 0);
      if (o.status != 0) fail_msg("hgctl positions during the election: exit %d: %s%s", o.status,
                                  o.text, o.err);
    }
    /* The client finds the new leader from its node list. */
    connect_retry(tr);
    leader = find_leader();
    assert_true(leader >= 0 && leader != dead);
    uint64_t new_epoch = hg_client_session(tr)->epoch;
    if (new_epoch <= epoch)
      fail_msg("epoch %" PRIu64 " at the new leader after %" PRIu64, new_epoch, epoch);
    epoch = new_epoch;
    char at[64], want[64];
    hg_client_address(tr, at, sizeof at);
    snprintf(want, sizeof want, "127.0.0.1:%d", g_n[leader].client_port);
    assert_string_equal(at, want);
    check_live(tr, &acked);
    if (round == 0) hgctl_finds_leader(dead);
    /* Checked: cancel them, so that fifty rounds stay inside the book's
     * 1,024 orders (each round rests up to 85). */
    uint64_t seq;
    assert_int_equal(hg_client_mass_cancel(tr, INSTR, HOURGLASS__V1__SIDE_FILTER__SIDES_BOTH, &seq), 0);
    assert_int_equal(ch_response(tr, seq), 0);
    total += acked.n;
    acked.n = 0;
    /* The new leader takes orders. */
    first = next;
    had = acked.n;
    send_burst(tr, &next, 5);
    assert_int_equal(collect(tr, first, next, &acked), 5);
    assert_int_equal(acked.n - had, 5);
    if (round == 0) {
      /* The hgctl streams logged in again at the new leader: the ladder
       * drew the book anew, the executions tail printed the new orders,
       * each report once. */
      follower_cmd_await(&ld, "logged in again");
      ld.len = 0;
      follower_cmd_await(&ld, "(id 1)");
      follower_cmd_stop(&ld);
      /* The tail logged in again, and then printed the new leader's
       * reports (stderr and stdout share its pipe, stdout flushed a line
       * at a time). */
      snprintf(last, sizeof last, " clordid=%" PRIu64 " ", next - 1);
      follower_cmd_await(&ex, last);
      follower_cmd_stop(&ex);
      const char *again = strstr(ex.buf, "logged in again");
      if (again == NULL || strstr(again, last) == NULL)
        fail_msg("hgctl executions did not log in again before printing%s; its output:\n%s",
                 last, ex.buf);
      for (uint64_t k = 1; k < next; k++) {
        char id[48];
        snprintf(id, sizeof id, " clordid=%" PRIu64 " ", k);
        int news = 0;
        for (const char *p = ex.buf; (p = strstr(p, "NEW seq=")) != NULL; p++) {
          const char *eol = strchr(p, '\n');
          const char *hit = strstr(p, id);
          if (hit != NULL && (eol == NULL || hit < eol)) news++;
        }
        if (news > 1) fail_msg("hgctl executions printed clordid %" PRIu64 " %d times", k, news);
      }
    }
    /* The dead node comes back, rebuilds from the group, and redirects; in
     * the last round as a replaced machine, with empty directories. */
    if (round == g_rounds - 1) du_rm_rf(g_n[dead].dir);
    node_start(&g_n[dead]);
    check_follower(dead, leader);
  }
  hg_client_destroy(tr);
  /* Snapshots were taken (every 8 entries) and starts began from them. */
  int from_snapshot = 0;
  for (int i = 0; i < NODES; i++) {
    char *log = du_read(g_n[i].log);
    from_snapshot |= log != NULL && strstr(log, "state store seeded from the group's snapshot");
    free(log);
  }
  assert_true(from_snapshot);
  stop_and_compare();
  fprintf(stderr, "%d rebuilds in place (a snapshot installed by the leader, a lost proposal)\n",
          du_cluster_rebuilds(g_n, NODES));
  du_rm_rf(g_root);
}

/* Starts node with extra options that must stop it: its log must say
 * want_in_log and it must exit nonzero. */
static void start_refused(du_node_t *n, const char *const *extra, const char *want_in_log) {
  du_node_spawn(n, g_bin, g_root, g_members, g_keys, extra);
  assert_true(n->pid > 0);
  int st = 0;
  double end = du_now() + 60;
  while (waitpid(n->pid, &st, WNOHANG) != n->pid) {
    if (du_now() > end) fail_msg("node %d did not stop", n->id);
    du_sleep_ms(20);
  }
  du_forget(n->pid);
  n->pid = 0;
  char *log = du_read(n->log);
  if (!WIFEXITED(st) || WEXITSTATUS(st) == 0 || log == NULL || strstr(log, want_in_log) == NULL)
    fail_msg("node %d: expected a refusal with '%s', log:\n%s", n->id, want_in_log,
             log != NULL ? log : "(none)");
  free(log);
}

static void tls_raft_port(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "clustls"));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  assert_int_equal(du_cluster_keys(g_keys, SECRET_HEX), 0);
  assert_int_equal(du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes,
                                   sizeof g_nodes), 0);
  assert_int_equal(ts_tls_make(g_root), 0);
  char name[16];
  for (int i = 0; i < NODES; i++) {
    snprintf(name, sizeof name, "node%d", i + 1);
    assert_int_equal(ts_tls_make_node(g_root, "ca", (unsigned)i + 1, name), 0);
  }

  /* Bad files: each stops the node with its own message. */
  char cert[700], key[700], ca[700], missing[700], wrong[700];
  snprintf(cert, sizeof cert, "cluster.tls_cert=%s/node1.pem", g_root);
  snprintf(key, sizeof key, "cluster.tls_key=%s/node1.key", g_root);
  snprintf(ca, sizeof ca, "cluster.tls_ca=%s/ca.pem", g_root);
  snprintf(missing, sizeof missing, "cluster.tls_ca=%s/absent.pem", g_root);
  snprintf(wrong, sizeof wrong, "cluster.tls_cert=%s/node2.pem", g_root);
  const char *no_cert[] = {"pipeline.mode=loop", key, ca, NULL};
  start_refused(&g_n[0], no_cert, "key=cluster.tls_cert reason=\"is required");
  const char *no_ca_file[] = {"pipeline.mode=loop", cert, key, missing, NULL};
  start_refused(&g_n[0], no_ca_file, "absent.pem: No such file or directory");
  const char *other_node[] = {"pipeline.mode=loop", wrong, key, ca, NULL};
  start_refused(&g_n[0], other_node, "key values mismatch");
  snprintf(key, sizeof key, "cluster.tls_key=%s/node2.key", g_root);
  start_refused(&g_n[0], other_node, "does not name hourglass-node-1");

  /* The group over TLS: elected, commits (the market setup is a command). */
  g_tls = 1;
  for (int i = 0; i < NODES; i++) {
    snprintf(g_tls_opts[0], sizeof g_tls_opts[0], "cluster.tls_cert=%s/node%d.pem", g_root, i + 1);
    snprintf(g_tls_opts[1], sizeof g_tls_opts[1], "cluster.tls_key=%s/node%d.key", g_root, i + 1);
    snprintf(g_tls_opts[2], sizeof g_tls_opts[2], "cluster.tls_ca=%s/ca.pem", g_root);
    node_start(&g_n[i]);
  }
  int leader = find_leader();
  assert_true(leader >= 0);
  for (int i = 0; i < NODES; i++) await_leader(i, leader);
  hg_client_t *op = client(leader, 1);
  connect_retry(op);
  assert_int_equal(ch_list_contract(op), 0);
  hg_client_destroy(op);
  assert_int_equal(du_metric(g_n[leader].http_port, "hourglass_cluster_tls_failures_total"), 0);

  /* A stranger on the leader's Raft port is refused and counted. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_n[leader].raft_port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
  assert_int_equal(send(fd, junk, sizeof junk - 1, 0), (ssize_t)(sizeof junk - 1));
  struct timeval tmo = {.tv_sec = 10};
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof tmo), 0);
  char buf[256];
  double closed_by = du_now() + 10;
  ssize_t got;
  while ((got = recv(fd, buf, sizeof buf, 0)) > 0 && du_now() < closed_by) {
  }
  if (got > 0 || (got < 0 && errno != ECONNRESET)) /* a reset is a close too */
    fail_msg("the leader did not close the stranger's Raft connection within 10 s");
  close(fd);
  double end = du_now() + 10;
  while (du_metric(g_n[leader].http_port, "hourglass_cluster_tls_failures_total") != 1) {
    if (du_now() > end) fail_msg("the stranger was not counted");
    du_sleep_ms(50);
  }
  char *log = du_read(g_n[leader].log);
  assert_non_null(strstr(log, "Raft TLS from 127.0.0.1:"));
  free(log);
  for (int i = 0; i < NODES; i++) {
    assert_int_equal(du_stop(g_n[i].pid, SIGTERM, 60), 0);
    g_n[i].pid = 0;
  }
  g_tls = 0;
  du_rm_rf(g_root);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <hourglassd> [rounds]\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  if (argc > 2) g_rounds = atoi(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(leader_killed_under_orders, du_kill_all),
      cmocka_unit_test_teardown(tls_raft_port, du_kill_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
