/* The demo market of ops/run --cluster across failovers: three hourglassd
 * --demo processes as one Raft group on loopback, one keys file holding the
 * operator and the demo trader's key (as ops/run --cluster writes it). The
 * first leader's demo lists the market and pays the demo accounts; the
 * leader is then killed twice, and each new leader's demo, once it trades,
 * pulls the quotes of the previous leader's and never sets the market up
 * again: the trader's cash stays what the set-up paid (a second set-up
 * would pay it again), logged in with the same key at whichever node
 * leads. The nodes run with small rings (pipeline.outbound_capacity 64,
 * staging_capacity 2048): a follower's demo thread, which only trades once
 * its node leads, must drain its consumer ring meanwhile, else the stage
 * fills, the follower stops applying and, elected, never takes orders.
 * Usage: test_cluster_demo <hourglassd>. */
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

#include <sys/stat.h>
#include <unistd.h>

#include "client_util.h"
#include "daemon_util.h"
#include "hourglass/client.h"
#include "test_keys.h"

typedef Hourglass__V1__Envelope env_t;
#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x

#define NODES 3
#define TRADER 3001u                          /* the demo's trader key and account */
#define SETUP_CASH ((int64_t)1000000 * 1000000) /* what the set-up pays it, micro-USD */
#define WAIT_S 120 /* how long a state the test expects is waited for (a busy machine) */

static const char *g_bin; /* hourglassd, from argv[1] */
static du_node_t g_n[NODES];
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];

static void node_start(du_node_t *n) {
  static const char *const extra[] = {"--demo", "pipeline.mode=loop",
                                      "cluster.election_timeout_ms=1000",
                                      "pipeline.outbound_capacity=64",
                                      "pipeline.staging_capacity=2048", NULL};
  if (du_node_start(n, g_bin, g_root, g_members, g_keys, extra) != 0)
    fail_msg("node %d not ready after 120 s", n->id);
}

/* A node rebuilds itself in place; any exit the test did not cause fails it. */
static void supervise(void) {
  if (du_cluster_supervise(g_n, NODES) < 0) fail_msg("a node exited unexpectedly");
}

static int find_leader(void) { return du_cluster_leader(g_n, NODES, WAIT_S, supervise); }

/* Waits (up to WAIT_S) until every running node names the leader at index
 * l and has caught up (/health): killing the leader before a restarted
 * node holds the log (it may still be loading a snapshot) would leave the
 * survivor without a majority. */
static void await_caught_up(int l) {
  char want[32];
  snprintf(want, sizeof want, "\"leader\":%d,", g_n[l].id);
  for (int i = 0; i < NODES; i++) {
    for (double end = du_now() + WAIT_S;; du_sleep_ms(100)) {
      supervise();
      if (g_n[i].pid == 0) break;
      char *h = du_get(g_n[i].http_port, "/health");
      int ok = h != NULL && strstr(h, want) != NULL && strstr(h, "\"caught_up\":true") != NULL;
      free(h);
      if (ok) break;
      if (du_now() > end) fail_msg("node %d did not catch up in %d s", g_n[i].id, WAIT_S);
    }
  }
}

/* The leader's last_seq from /health (UINT64_MAX: no answer). */
static uint64_t last_seq(int i) {
  char *h = du_get(g_n[i].http_port, "/health");
  uint64_t v = du_json_u64(h, "last_seq");
  free(h);
  return v;
}

/* Waits (up to WAIT_S) until node i has sequenced more than 50 commands
 * past from. */
static void await_demo(int i, uint64_t from) {
  for (double end = du_now() + WAIT_S; du_now() < end; du_sleep_ms(100)) {
    supervise();
    uint64_t s = last_seq(i);
    if (s != UINT64_MAX && s > from + 50) return;
  }
  fail_msg("node %d: no demo flow after %d s", g_n[i].id, WAIT_S);
}

/* The demo trader's cash, asked at node i (INT64_MIN: no answer there, e.g.
 * it does not lead any more). */
static int64_t cash_at(int i) {
  char hex[65];
  ts_key_secret_hex(TRADER, hex);
  hg_client_t *c = NULL;
  assert_int_equal(ch_node_client(g_n[i].client_port, NULL, TRADER, hex, &c), 0);
  uint64_t seq = 0;
  int64_t cash = INT64_MIN;
  if (hg_client_connect(c) == 0 && hg_client_positions(c, 0, &seq) == 0) {
    for (double end = du_now() + 30; cash == INT64_MIN && du_now() < end;) {
      const env_t *e = NULL;
      if (hg_client_recv(c, 5000, &e) != 1) break;
      if (e->body_case == BODY(POSITIONS) && e->positions->ref_seq == seq)
        cash = e->positions->cash;
    }
  }
  hg_client_destroy(c);
  return cash;
}

/* The demo trader's cash, asked at whichever node takes orders (on a busy
 * machine leadership may move between finding the leader and asking). */
static int64_t trader_cash(void) {
  for (double end = du_now() + WAIT_S; du_now() < end; du_sleep_ms(200)) {
    int i = find_leader();
    assert_true(i >= 0);
    int64_t cash = cash_at(i);
    if (cash != INT64_MIN) return cash;
  }
  fail_msg("no Positions reply from a leader within %d s", WAIT_S);
  return INT64_MIN;
}

static void demo_is_set_up_once(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "cdemo"));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  char h1[65], ht[65], keys[400];
  ts_key_secret_hex(1, h1);
  ts_key_secret_hex(TRADER, ht);
  snprintf(keys, sizeof keys, "1 operator 0 0 %s\n%u trader %u 300 %s\n", h1, TRADER, TRADER, ht);
  assert_int_equal(du_write_file(g_keys, keys), 0);
  assert_int_equal(chmod(g_keys, 0600), 0);
  assert_int_equal(du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes,
                                   sizeof g_nodes), 0);
  for (int i = 0; i < NODES; i++) node_start(&g_n[i]);
  int leader = find_leader();
  assert_true(leader >= 0);
  /* The set-up is many commands: the trader is paid once it is through.
   * Everything sequenced by then bounds the set-up's length. */
  for (double end = du_now() + WAIT_S; trader_cash() != SETUP_CASH; du_sleep_ms(200))
    if (du_now() > end) fail_msg("the demo trader was not paid within %d s", WAIT_S);
  uint64_t setup_len = last_seq(leader);
  assert_true(setup_len != UINT64_MAX);

  for (int round = 0; round < 2; round++) {
    await_caught_up(leader);
    int dead = leader;
    uint64_t before = last_seq(dead);
    kill(g_n[dead].pid, SIGKILL);
    du_stop(g_n[dead].pid, 0, 10);
    g_n[dead].pid = 0;
    leader = find_leader();
    if (leader < 0 || leader == dead) {
      for (int i = 0; i < NODES; i++) {
        char *h = g_n[i].pid != 0 ? du_get(g_n[i].http_port, "/health") : NULL;
        fprintf(stderr, "node %d: %s\n", g_n[i].id, h != NULL ? h : "(down)");
        free(h);
      }
      fail_msg("no node but the killed node %d takes orders after %d s", g_n[dead].id, WAIT_S);
    }
    /* The new leader's demo ran its first commands, as many as a set-up
     * at least, and trades on: a second set-up would have paid by now. */
    await_demo(leader, before + setup_len);
    assert_int_equal(trader_cash(), SETUP_CASH);
    node_start(&g_n[dead]);
  }
  du_rm_rf(g_root);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <hourglassd>\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(demo_is_set_up_once, du_kill_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
