/* The cluster procedures of ops/RUNBOOK.md ("Cluster"), performed as an
 * operator performs them: hourglassd processes on loopback, hgctl run as a
 * child process (tests/support/hgctl_run.h), every wait bounded. In order,
 * on one group:
 *  1. bootstrap: three nodes from one cluster.members; `hgctl op cluster
 *     status` lists them with their client addresses, one leader;
 *  2. planned leader switch: `hgctl op cluster transfer` while a trader
 *     sends one order after another; order entry pauses only for the
 *     switch, the old leader keeps running, every acknowledged order is
 *     live at the new leader;
 *  3. an API key added by an operator on the leader is stored on every
 *     node; after another transfer it logs in at the new leader and trades;
 *  4. replacing a dead node: a follower is killed (SIGKILL), `op cluster
 *     remove` drops it, a new node (new id, new addresses, cluster.join)
 *     is added with `op cluster add`, joins by snapshot install (rebuilding
 *     itself in place once to load it), learns the members' client addresses and holds the
 *     key added in step 3;
 *  5. leadership transferred to the new member by id: a trader's stream
 *     numbers on there from where it was (the snapshot's seqs); the others name
 *     its client address, learnt from the group; a bootstrap node restarted
 *     with its original cluster.members follows the group's configuration;
 *  6. backup from a follower: ops/backup of a follower's engine directory
 *     (one seeded from the group's snapshot), ops/restore of it, and its
 *     state hash equals the group's;
 * and at the end every node stops with the same last seq and state hash.
 * Usage: test_cluster_ops <hourglassd> <hgctl> <ops dir>. */
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

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_util.h"
#include "daemon_util.h"
#include "hgctl_run.h"
#include "hourglass/client.h"

static const char *g_bin, *g_ops; /* hourglassd; the ops/ directory */

#define SLOTS 4 /* ids 1..3 bootstrap the group; 4 replaces a dead one */

static du_node_t g_n[SLOTS];
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];
static int g_gone = -1;      /* the slot of the node replaced in step 4 */
static int g_restarted = -1; /* a bootstrap node restarted after it */

static const char SECRET_HEX[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
/* The key an operator adds in step 3: id 20, trader on account 1. */
static const char NEW_SECRET_HEX[] = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf";
#define NEW_KEY 20

/* Starts slot i: a member of the group (slots 0..2, cluster.members of
 * the three), or the joining node (cluster.join, only its own entry). */
static void node_start(int i) {
  static const char *const extra[] = {"pipeline.mode=loop", "cluster.election_timeout_ms=400",
                                      "cluster.snapshot_entries=8", NULL};
  static const char *const join[] = {"pipeline.mode=loop", "cluster.election_timeout_ms=400",
                                     "cluster.snapshot_entries=8", "cluster.join=yes", NULL};
  du_node_t *n = &g_n[i];
  char own[128];
  snprintf(own, sizeof own, "%d=127.0.0.1:%d/127.0.0.1:%d", n->id, n->raft_port, n->client_port);
  if (du_node_start(n, g_bin, g_root, i < 3 ? g_members : own, g_keys, i < 3 ? extra : join) != 0)
    fail_msg("node %d not ready after 120 s", n->id);
}

/* A node rebuilds itself in place to load a snapshot installed by the
 * leader; any exit the test did not cause fails it. */
static void supervise(void) {
  if (du_cluster_supervise(g_n, SLOTS) < 0) fail_msg("a node exited unexpectedly");
}

/* The slot taking orders, waiting up to 30 s; -1 if none. */
static int leader_slot(void) { return du_cluster_leader(g_n, SLOTS, 120, supervise); }

/* Runs `hgctl op cluster ARGS...` as key 1 (the operator), following the
 * leader from the node list; o keeps its output and status. */
static void op_cluster(hgctl_out_t *o, const char *a1, const char *a2, const char *a3) {
  char port[16];
  int any = 0;
  while (g_n[any].pid == 0) any++;
  snprintf(port, sizeof port, "%d", g_n[any].client_port);
  const char *args[] = {"op",    "cluster",   a1,        "--port", port, "--nodes", g_nodes,
                        "--timeout", "10000", a2, a3, NULL};
  if (a2 == NULL) args[9] = NULL;
  if (a3 == NULL) args[10] = NULL;
  hgctl_run_as(o, 1, SECRET_HEX, args);
}

/* A client of key that starts at a running node and follows the leader. */
static hg_client_t *client(uint64_t key, const char *secret_hex) {
  int any = 0;
  while (g_n[any].pid == 0) any++;
  hg_client_t *c = NULL;
  assert_int_equal(ch_node_client(g_n[any].client_port, g_nodes, key, secret_hex, &c), 0);
  return c;
}

/* Connects, following the leader, for up to 30 s. */
static void connect_leader(hg_client_t *c) {
  int rc = ch_connect_retry(c, 30, supervise);
  if (rc != 0) fail_msg("no leader took the login: %d", rc);
}

/* The order ids acknowledged so far (all resting buys that never cross). */
static uint64_t g_acked[4096];
static size_t g_n_acked;
static uint64_t g_clordid = 1;

/* One resting buy; its order id is recorded when it is acknowledged.
 * 0 acknowledged, -1 refused or no answer. */
static int one_order(hg_client_t *c) {
  hg_client_order_t o = {.instrument_id = 1,
                         .client_order_id = g_clordid++,
                         .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC,
                         .has_price = true,
                         .price = 480 + (int64_t)(g_clordid % 20),
                         .qty = 1};
  uint64_t seq;
  if (hg_client_new_order(c, &o, &seq) != 0) return -1;
  for (;;) {
    const Hourglass__V1__Envelope *e = NULL;
    if (hg_client_recv(c, 3000, &e) <= 0) return -1;
    if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT ||
        e->execution_report->client_order_id != o.client_order_id)
      continue;
    if (e->execution_report->exec_type != HOURGLASS__V1__EXEC_TYPE__EXEC_NEW) return -1;
    assert_true(g_n_acked < sizeof g_acked / sizeof g_acked[0]);
    g_acked[g_n_acked++] = e->execution_report->order_id;
    return 0;
  }
}

/* n acknowledged orders from key 2; a refusal or a lost connection (a
 * leader change: elections happen on a loaded host) logs in again at the
 * leader, up to 5 times. */
static void orders(int n) {
  hg_client_t *tr = client(2, SECRET_HEX);
  connect_leader(tr);
  for (int done = 0, retries = 0; done < n;) {
    if (one_order(tr) == 0) {
      done++;
      continue;
    }
    if (++retries > 5) fail_msg("orders keep failing");
    hg_client_destroy(tr);
    tr = client(2, SECRET_HEX);
    connect_leader(tr);
  }
  hg_client_destroy(tr);
}

/* Every acknowledged order is live where c is logged in. */
static void check_live(hg_client_t *c) {
  for (size_t i = 0; i < g_n_acked; i++) {
    uint64_t seq;
    assert_int_equal(hg_client_order_status(c, 1, g_acked[i], &seq), 0);
    const Hourglass__V1__Envelope *e = NULL;
    do assert_true(hg_client_recv(c, 5000, &e) > 0);
    while (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_ORDER_STATUS ||
           e->order_status->ref_seq != seq);
    if (!e->order_status->live) fail_msg("acknowledged order %" PRIu64 " is missing", g_acked[i]);
  }
}

/* ---------------------------------------------------------------- steps */

static void bootstrap(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "clusterops"));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  assert_int_equal(du_cluster_keys(g_keys, SECRET_HEX), 0);
  char all[512];
  assert_int_equal(du_cluster_plan(g_n, SLOTS, g_root, all, sizeof all, g_nodes, sizeof g_nodes),
                   0);
  /* cluster.members of the first three. */
  snprintf(g_members, sizeof g_members, "%s", all);
  *strstr(g_members, ",4=") = '\0';
  for (int i = 0; i < 3; i++) node_start(i);
  int leader = leader_slot();
  assert_true(leader >= 0);
  hgctl_out_t o;
  op_cluster(&o, "status", NULL, NULL);
  if (o.status != 0) fail_msg("op cluster status: %d %s %s", o.status, o.text, o.err);
  char want[160];
  snprintf(want, sizeof want, "leader=%d ", g_n[leader].id);
  assert_non_null(strstr(o.text, want));
  for (int i = 0; i < 3; i++) {
    snprintf(want, sizeof want, "MEMBER id=%d raft=127.0.0.1:%d client=127.0.0.1:%d role=%s",
             g_n[i].id, g_n[i].raft_port, g_n[i].client_port, i == leader ? "leader" : "voter");
    if (strstr(o.text, want) == NULL) fail_msg("no '%s' in:\n%s", want, o.text);
  }
  hg_client_t *op = client(1, SECRET_HEX);
  connect_leader(op);
  assert_int_equal(ch_cluster_market(op, 1024), 0);
  hg_client_destroy(op);
}

static void planned_leader_switch(void **state) {
  (void)state;
  orders(20);
  int old = leader_slot();
  assert_true(old >= 0);
  hg_client_t *tr = client(2, SECRET_HEX);
  connect_leader(tr);
  /* The transfer runs beside the trader's stream of orders. When the
   * chosen node does not win its election in time the answer is
   * change_failed (147) and the old leader takes orders again (RUNBOOK):
   * the operator asks again, here up to three times. */
  char port[16];
  snprintf(port, sizeof port, "%d", g_n[old].client_port);
  const char *args[] = {"op", "cluster", "transfer", "--port", port, "--timeout", "10000", NULL};
  int fo, fe, asked = 1;
  pid_t pid = hgctl_spawn(1, SECRET_HEX, args, &fo, &fe);
  static hgctl_out_t o;
  size_t got = 0;
  double last_ack = du_now(), longest = 0, looked = du_now();
  int refused = 0, after = 0;
  while (after < 20) {
    if (after == 0 && du_now() - looked > 0.1) {
      looked = du_now();
      if (hgctl_read_until(fo, o.text, sizeof o.text, &got, "change_failed", 1)) {
        hgctl_collect(pid, fo, fe, &o, got);
        if (asked == 3) fail_msg("op cluster transfer failed 3 times: %s", o.text);
        fprintf(stderr, "transfer %d: change_failed; asking again\n", asked++);
        got = 0;
        pid = hgctl_spawn(1, SECRET_HEX, args, &fo, &fe);
      }
    }
    if (one_order(tr) == 0) {
      double now = du_now();
      if (now - last_ack > longest) longest = now - last_ack;
      last_ack = now;
      char at[64], was[64];
      hg_client_address(tr, at, sizeof at);
      snprintf(was, sizeof was, "127.0.0.1:%d", g_n[old].client_port);
      after += strcmp(at, was) != 0;
      continue;
    }
    /* Refused (the old leader stopped taking orders) or cut off: log in
     * again, at whichever node leads now. */
    refused++;
    hg_client_destroy(tr);
    tr = client(2, SECRET_HEX);
    connect_leader(tr);
    if (du_now() - last_ack > 20) fail_msg("order entry paused for 20 s");
  }
  hgctl_collect(pid, fo, fe, &o, got);
  if (o.status != 0) fail_msg("op cluster transfer: %d %s %s", o.status, o.text, o.err);
  int now = leader_slot();
  assert_true(now >= 0 && now != old);
  char want[32];
  snprintf(want, sizeof want, "leader=%d ", g_n[now].id);
  assert_non_null(strstr(o.text, want));
  /* The old leader answered: it no longer knows what each member stores. */
  assert_non_null(strstr(o.text, "match_index=- lag=-"));
  assert_null(strstr(o.text, "match_index=0"));
  assert_true(g_n[old].pid != 0 && du_node_reap(&g_n[old]) == 0); /* still running */
  char *log = du_read(g_n[old].log);
  assert_null(strstr(log, "must be rebuilt"));
  free(log);
  check_live(tr);
  fprintf(stderr, "transfer: node %d -> %d; %d orders refused during the switch; longest gap "
          "between acknowledgements %.0f ms\n", g_n[old].id, g_n[now].id, refused,
          longest * 1000);
  assert_true(longest < 5.0);
  hg_client_destroy(tr);
}

/* `hgctl op add-key NEW_KEY trader 1 1 --secret-file FILE` as key 1, at
 * the leader (following it from the node list). */
static void add_key(hgctl_out_t *o) {
  char file[700], port[16];
  snprintf(file, sizeof file, "%s/new-key.secret", g_root);
  assert_int_equal(du_write_file(file, NEW_SECRET_HEX), 0);
  assert_int_equal(chmod(file, 0600), 0);
  int any = 0;
  while (g_n[any].pid == 0) any++;
  snprintf(port, sizeof port, "%d", g_n[any].client_port);
  /* The connection options before the command, as ops/run's banner shows. */
  const char *args[] = {"--nodes", g_nodes, "--port", port,    "op", "add-key", "20",
                        "trader",  "1",     "1",      "--secret-file", file,   NULL};
  hgctl_run_as(o, 1, SECRET_HEX, args);
}

/* Node slot checks the MAC of a login with NEW_KEY: it takes it (the
 * leader) or names the leader (a follower), rather than refusing it as an
 * unknown key. Waits up to 30 s (the node may be rebuilding itself to load
 * a snapshot). */
static void knows_key(int slot) {
  for (double end = du_now() + 30;; du_sleep_ms(100)) {
    supervise();
    hg_client_t *c = NULL;
    assert_int_equal(ch_node_client(g_n[slot].client_port, NULL, NEW_KEY, NEW_SECRET_HEX, &c), 0);
    int rc = g_n[slot].pid != 0 ? hg_client_connect(c) : -1;
    hg_client_destroy(c);
    if (rc == 0) return;
    if (du_now() > end) fail_msg("node %d does not know key %d", g_n[slot].id, NEW_KEY);
  }
}

static void key_added_then_used_at_new_leader(void **state) {
  (void)state;
  hgctl_out_t o;
  add_key(&o);
  if (o.status != 0) fail_msg("op add-key: %d %s %s", o.status, o.text, o.err);
  assert_non_null(strstr(o.text, "OK add-key key_id=20 role=trader"));
  /* A second AddApiKey of the same id is refused: the key is there. */
  add_key(&o);
  assert_int_not_equal(o.status, 0);
  assert_non_null(strstr(o.err, "key_exists (137)"));
  /* Every node stored it from the group (none has it in its file). */
  for (int i = 0; i < 3; i++) knows_key(i);
  int old = leader_slot();
  op_cluster(&o, "transfer", NULL, NULL);
  if (o.status != 0) fail_msg("op cluster transfer: %d %s %s", o.status, o.text, o.err);
  int now = leader_slot();
  assert_true(now >= 0 && now != old);
  hg_client_t *tr = client(NEW_KEY, NEW_SECRET_HEX);
  connect_leader(tr);
  char at[64], was[64];
  hg_client_address(tr, at, sizeof at);
  snprintf(was, sizeof was, "127.0.0.1:%d", g_n[now].client_port);
  assert_string_equal(at, was);
  assert_int_equal(one_order(tr), 0);
  hg_client_destroy(tr);
}

static void replace_dead_node(void **state) {
  (void)state;
  int leader = leader_slot();
  assert_true(leader >= 0);
  g_gone = (leader + 1) % 3;
  kill(g_n[g_gone].pid, SIGKILL);
  du_stop(g_n[g_gone].pid, 0, 10);
  g_n[g_gone].pid = 0;
  char id[8], addrs[96];
  hgctl_out_t o;
  /* Refusals first: the leader cannot remove itself, an unknown id. */
  snprintf(id, sizeof id, "%d", g_n[leader].id);
  op_cluster(&o, "remove", id, NULL);
  assert_int_not_equal(o.status, 0);
  assert_non_null(strstr(o.err, "member_is_leader (146)"));
  op_cluster(&o, "remove", "9", NULL);
  assert_non_null(strstr(o.err, "unknown_member (144)"));
  snprintf(id, sizeof id, "%d", g_n[g_gone].id);
  op_cluster(&o, "remove", id, NULL);
  if (o.status != 0) fail_msg("op cluster remove: %d %s %s", o.status, o.text, o.err);
  char gone[32];
  snprintf(gone, sizeof gone, "MEMBER id=%d ", g_n[g_gone].id);
  assert_null(strstr(o.text, gone));
  /* The group trades on with two members, so the new node has a snapshot
   * and log to catch up on. */
  orders(20);
  /* The new machine: id 4, new addresses, empty directories. */
  node_start(3);
  snprintf(id, sizeof id, "%d", g_n[3].id);
  snprintf(addrs, sizeof addrs, "127.0.0.1:%d/127.0.0.1:%d", g_n[3].raft_port,
           g_n[3].client_port);
  /* The add waits until the node votes; meanwhile it rebuilds itself in
   * place once to load the leader's snapshot. */
  char port[16];
  snprintf(port, sizeof port, "%d", g_n[leader].client_port);
  const char *args[] = {"op", "cluster", "add", id, addrs, "--port", port, "--nodes", g_nodes,
                        "--timeout", "90000", NULL};
  int fo, fe;
  pid_t pid = hgctl_spawn(1, SECRET_HEX, args, &fo, &fe);
  struct pollfd pf = {.fd = fo, .events = POLLIN};
  for (double end = du_now() + 90; poll(&pf, 1, 100) == 0 && du_now() < end;) supervise();
  hgctl_collect(pid, fo, fe, &o, 0);
  if (o.status != 0) fail_msg("op cluster add: %d %s %s", o.status, o.text, o.err);
  char want[160];
  snprintf(want, sizeof want, "MEMBER id=%d raft=127.0.0.1:%d client=127.0.0.1:%d role=voter",
           g_n[3].id, g_n[3].raft_port, g_n[3].client_port);
  if (strstr(o.text, want) == NULL) fail_msg("no '%s' in:\n%s", want, o.text);
  /* Adding it again is refused. */
  op_cluster(&o, "add", id, addrs);
  assert_non_null(strstr(o.err, "member_exists (145)"));
  orders(5);
  hg_client_t *tr = NULL;
  /* It installs the leader's snapshot (rebuilding itself once to load it) and
   * catches up: same committed seq, and it names the leader's client
   * address to a trader, learnt from the group. */
  leader = leader_slot();
  double end = du_now() + 60;
  for (;;) {
    supervise();
    char *l = du_get(g_n[leader].http_port, "/health"), *h = du_get(g_n[3].http_port, "/health");
    int same = du_json_u64(l, "committed_seq") != UINT64_MAX &&
               du_json_u64(l, "committed_seq") == du_json_u64(h, "last_seq") &&
               du_json_u64(h, "leader") == (uint64_t)g_n[leader].id;
    free(l);
    free(h);
    if (same) break;
    if (du_now() > end) fail_msg("the new node did not catch up");
    du_sleep_ms(100);
  }
  /* The snapshot carried the group's member addresses and its five keys
   * (1 to 4 of the keys file, NEW_KEY added through the log). */
  char *log = du_read(g_n[3].log), nkeys[8], members[8];
  assert_non_null(strstr(log, "state store seeded from the group's snapshot"));
  assert_true(du_node_rebuilds(&g_n[3]) >= 1); /* without exiting */
  uint64_t rebuilt = du_metric(g_n[3].http_port, "hourglass_cluster_rebuilds_total");
  assert_true(rebuilt >= 1 && rebuilt != UINT64_MAX);
  assert_int_equal(du_field(log, "snapshot to start from", "keys", nkeys, sizeof nkeys), 0);
  assert_int_equal(du_field(log, "snapshot to start from", "members", members, sizeof members), 0);
  free(log);
  assert_string_equal(nkeys, "5");
  assert_string_equal(members, "yes");
  /* No node list: the client only knows node 4, which names the leader. */
  assert_int_equal(ch_node_client(g_n[3].client_port, NULL, 2, SECRET_HEX, &tr), 0);
  assert_int_equal(hg_client_connect(tr), 0);
  char at[64];
  hg_client_address(tr, at, sizeof at);
  snprintf(want, sizeof want, "127.0.0.1:%d", g_n[leader].client_port);
  assert_string_equal(at, want);
  hg_client_destroy(tr);
  /* Node 4 knows the key added in step 3, committed before the snapshot it
   * started from. */
  knows_key(3);
}

/* Leadership moves to the new member by id; the others learnt its client
 * address from the group (none has it in its cluster.members) and name it
 * to traders. A bootstrap node restarted with its original cluster.members
 * (which lists the removed node and not the new one) follows the group's
 * configuration and says so. */
static uint64_t key2_next_seq(int slot) {
  hg_client_t *tr = NULL;
  assert_int_equal(ch_node_client(g_n[slot].client_port, NULL, 2, SECRET_HEX, &tr), 0);
  assert_int_equal(ch_connect_retry(tr, 30, supervise), 0);
  uint64_t next = hg_client_session(tr)->login_next_seq;
  hg_client_destroy(tr);
  return next;
}

static void transfer_to_new_member(void **state) {
  (void)state;
  hgctl_out_t o;
  char id[8];
  /* Node 4 started from the leader's snapshot and never sequenced the
   * frames before it: it numbers key 2's stream on from the snapshot's. */
  uint64_t next2 = key2_next_seq(leader_slot());
  assert_true(next2 > 1);
  snprintf(id, sizeof id, "%d", g_n[3].id);
  op_cluster(&o, "transfer", id, NULL);
  if (o.status != 0) fail_msg("op cluster transfer %s: %d %s %s", id, o.status, o.text, o.err);
  assert_int_equal(leader_slot(), 3);
  assert_int_equal(key2_next_seq(3), next2);
  g_restarted = 0;
  while (g_restarted == g_gone) g_restarted++;
  hg_client_t *tr = NULL;
  assert_int_equal(ch_node_client(g_n[g_restarted].client_port, NULL, 2, SECRET_HEX, &tr), 0);
  assert_int_equal(ch_connect_retry(tr, 30, supervise), 0);
  char at[64], want[64];
  hg_client_address(tr, at, sizeof at);
  snprintf(want, sizeof want, "127.0.0.1:%d", g_n[3].client_port);
  assert_string_equal(at, want);
  hg_client_destroy(tr);
  assert_int_equal(du_stop(g_n[g_restarted].pid, SIGTERM, 60), 0);
  g_n[g_restarted].pid = 0;
  node_start(g_restarted);
  char *log = du_read(g_n[g_restarted].log);
  if (strstr(log, "cluster.members differs from the group's committed configuration") == NULL)
    fail_msg("node %d did not say it follows the group:\n%s", g_n[g_restarted].id, log);
  free(log);
  op_cluster(&o, "status", NULL, NULL);
  if (o.status != 0) fail_msg("op cluster status: %d %s %s", o.status, o.text, o.err);
  char gone[32];
  snprintf(gone, sizeof gone, "MEMBER id=%d ", g_n[g_gone].id);
  assert_null(strstr(o.text, gone));
  for (int i = 0; i < SLOTS; i++) {
    if (i == g_gone) continue;
    snprintf(want, sizeof want, "MEMBER id=%d raft=127.0.0.1:%d client=127.0.0.1:%d role=%s",
             g_n[i].id, g_n[i].raft_port, g_n[i].client_port, i == 3 ? "leader" : "voter");
    if (strstr(o.text, want) == NULL) fail_msg("no '%s' in:\n%s", want, o.text);
  }
}

/* The committed seq every running member has applied, waiting for it. */
static uint64_t quiesce(void) {
  uint64_t seq = du_cluster_quiesce(g_n, SLOTS, 30, supervise);
  if (seq == UINT64_MAX) fail_msg("nodes did not converge");
  return seq;
}

static void backup_from_follower(void **state) {
  (void)state;
  uint64_t seq = quiesce();
  /* The node restarted last: its engine directory was seeded from the
   * group's snapshot, so its journal starts after seq 1. */
  int leader = leader_slot(), f = g_restarted;
  while (f == leader || g_n[f].pid == 0) f = (f + 1) % SLOTS;
  char cmd[6000], dest[600], restored[600], out[700], mf[700];
  snprintf(dest, sizeof dest, "%s/backup", g_root);
  snprintf(restored, sizeof restored, "%s/restored", g_root);
  snprintf(out, sizeof out, "%s/backup.out", g_root);
  /* The node's configuration as the operator passes it (-c FILE): the
   * engine's sizes are part of the state its hash covers. */
  static const char *const small[] = {DU_SMALL_OPTS};
  char opts[1024] = "";
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
    snprintf(opts + strlen(opts), sizeof opts - strlen(opts), "%s ", small[i]);
  snprintf(cmd, sizeof cmd,
           "%s/backup --bin %s %s-o data_dir=%s/engine --metrics-url "
           "http://127.0.0.1:%d/metrics %s > %s 2>&1 && %s/restore --bin %s %s%s %s >> %s 2>&1",
           g_ops, g_bin, opts, g_n[f].dir, g_n[f].http_port, dest, out, g_ops, g_bin, opts, dest,
           restored, out);
  int rc = du_system(cmd);
  char *text = du_read(out);
  if (rc != 0) fail_msg("backup from node %d: exit %d:\n%s", g_n[f].id, rc, text);
  free(text);
  /* The restored copy's seq and hash, against every node's at the stop. */
  snprintf(mf, sizeof mf, "%s/MANIFEST", dest);
  char *manifest = du_read(mf);
  char mseq[32], mhash[80];
  assert_int_equal(du_field(manifest, "seq=", "seq", mseq, sizeof mseq), 0);
  assert_int_equal(du_field(manifest, "state_hash=", "state_hash", mhash, sizeof mhash), 0);
  free(manifest);
  assert_int_equal(strtoull(mseq, NULL, 10), seq);
  for (int i = 0; i < SLOTS; i++) {
    if (g_n[i].pid == 0) continue;
    assert_int_equal(du_stop(g_n[i].pid, SIGTERM, 60), 0);
    g_n[i].pid = 0;
    char *log = du_read(g_n[i].log), s[32], h[80];
    assert_int_equal(du_field(log, "msg=\"stopped\"", "last_seq", s, sizeof s), 0);
    assert_int_equal(du_field(log, "msg=\"stopped\"", "state_hash", h, sizeof h), 0);
    free(log);
    assert_string_equal(s, mseq);
    assert_string_equal(h, mhash);
  }
  du_rm_rf(g_root);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <hourglassd> <hgctl> <ops dir>\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  hgctl_path = argv[2];
  g_ops = argv[3];
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bootstrap),
      cmocka_unit_test(planned_leader_switch),
      cmocka_unit_test(key_added_then_used_at_new_leader),
      cmocka_unit_test(replace_dead_node),
      cmocka_unit_test(transfer_to_new_member),
      cmocka_unit_test(backup_from_follower),
  };
  return cmocka_run_group_tests(tests, NULL, du_kill_all);
}
