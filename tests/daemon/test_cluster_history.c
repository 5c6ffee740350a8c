/* The sequenced history on every node of a three-node hourglassd group
 * (daemon/history.c), with cluster.snapshot_entries=8 so that the log is
 * trimmed and a late node is sent a snapshot:
 *  - orders through the leader, a rolling restart (each node stopped with
 *    SIGTERM and started again, followers first) with orders between;
 *  - a follower wiped (killed with -9, its data directory removed): it
 *    starts from the group's snapshot, its journal continues from there
 *    across another restart, and engine/history.missing names the rest.
 * After each, every node is stopped; on a node lacking records before the
 * group's snapshot, `hgctl replay` names them, and `hourglassd
 * --history-from` fills them from another node's journal (the time it
 * takes is printed); then `hgctl replay --data <node>/engine` on every
 * node gives verdict OK from seq 1 and one state hash, each node's hash
 * at its stop. Last, ops/archive copies a node's journal into an archive
 * directory (twice: the copy is replaced), and the archive replays.
 * Every wait is on a condition with a generous deadline.
 * Usage: test_cluster_history <hourglassd> <hgctl> <ops dir>. */
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

#include <unistd.h>

#include "client_util.h"
#include "daemon_util.h"
#include "hourglass/client.h"

#define NODES 3

static const char *g_bin, *g_hgctl, *g_ops;
static du_node_t g_n[NODES];
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];
static uint64_t g_clordid = 1;

static const char SECRET_HEX[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

static void node_start(int i) {
  static const char *const extra[] = {"pipeline.mode=loop", "cluster.election_timeout_ms=400",
                                      "cluster.snapshot_entries=8", NULL};
  if (du_node_start(&g_n[i], g_bin, g_root, g_members, g_keys, extra) != 0)
    fail_msg("node %d not ready after 120 s", g_n[i].id);
}

static void supervise(void) {
  if (du_cluster_supervise(g_n, NODES) < 0) fail_msg("a node exited unexpectedly");
}

static int leader_slot(void) { return du_cluster_leader(g_n, NODES, 120, supervise); }

static hg_client_t *client(uint64_t key) {
  int any = 0;
  while (g_n[any].pid == 0) any++;
  hg_client_t *c = NULL;
  assert_int_equal(ch_node_client(g_n[any].client_port, g_nodes, key, SECRET_HEX, &c), 0);
  int rc = ch_connect_retry(c, 60, supervise);
  if (rc != 0) fail_msg("no leader took the login: %d", rc);
  return c;
}

/* One resting buy, acknowledged: 0, or -1 (refused, no answer). */
static int one_order(hg_client_t *c) {
  g_clordid++;
  return ch_order(c, HOURGLASS__V1__SIDE__SIDE_BUY, 480 + (int64_t)(g_clordid % 20), 1, g_clordid);
}

/* n acknowledged orders from key 2, logging in again after a refusal or
 * a lost connection (an election on a loaded host), up to 10 times. */
static void orders(int n) {
  hg_client_t *tr = client(2);
  for (int done = 0, retries = 0; done < n;) {
    if (one_order(tr) == 0) {
      done++;
      continue;
    }
    if (++retries > 10) fail_msg("orders keep failing");
    hg_client_destroy(tr);
    tr = client(2);
  }
  hg_client_destroy(tr);
}

/* Waits until every running node has applied and made durable what the
 * leader committed; returns that seq. */
static uint64_t quiesce(void) {
  uint64_t seq = du_cluster_quiesce(g_n, NODES, 120, supervise);
  if (seq == UINT64_MAX) fail_msg("nodes did not converge");
  return seq;
}

/* Stops node i (SIGTERM); its "stopped" line's state hash into hash. */
static void stop_node(int i, char *hash, size_t cap) {
  assert_int_equal(du_stop(g_n[i].pid, SIGTERM, 60), 0);
  g_n[i].pid = 0;
  char *log = du_read(g_n[i].log), s[32];
  assert_int_equal(du_field(log, "msg=\"stopped\"", "state_hash", hash, cap), 0);
  assert_int_equal(du_field(log, "msg=\"stopped\"", "last_seq", s, sizeof s), 0);
  free(log);
}

/* `hgctl replay --data <node i>/engine` with the nodes' limits
 * (DU_SMALL_OPTS: the hash covers them): its exit status, its output in
 * text (stdout and stderr). */
static int replay(int i, char *text, size_t cap) {
  char out[700], cmd[3000];
  snprintf(out, sizeof out, "%s/replay%d.out", g_root, g_n[i].id);
  snprintf(cmd, sizeof cmd, "%s replay --data %s/engine --max-instruments 8 --max-accounts 64 "
           "--max-book-orders 65536 > %s 2>&1", g_hgctl, g_n[i].dir, out);
  int rc = du_system(cmd);
  char *t = du_read(out);
  snprintf(text, cap, "%s", t != NULL ? t : "");
  free(t);
  return rc;
}

/* The hash on a replay's "end seq=S ... hash=H" line. */
static int replay_hash(const char *text, char *hash, size_t cap) {
  const char *p = strstr(text, "end seq=");
  if (p != NULL) p = strstr(p, " hash=");
  if (p == NULL) return -1;
  p += strlen(" hash=");
  size_t n = strspn(p, "0123456789abcdef");
  if (n < 16 || n >= cap) return -1;
  memcpy(hash, p, n);
  hash[n] = '\0';
  return 0;
}

/* 1 if node i's journal lacks the records before the group's snapshot. */
static int lacks_history(int i) {
  char note[700];
  snprintf(note, sizeof note, "%s/engine/history.missing", g_n[i].dir);
  return access(note, F_OK) == 0;
}

/* Fills node i's missing history from node src's journal (the RUNBOOK's
 * procedure: `hourglassd --history-from`); prints how long it took. */
static void fill_history(int i, int src) {
  char cmd[3000], out[700];
  snprintf(out, sizeof out, "%s/fill%d.out", g_root, g_n[i].id);
  snprintf(cmd, sizeof cmd,
           "%s -o journal.segment_size=1M -o journal.batch_bytes=256K -o data_dir=%s/engine "
           "--history-from %s/engine/journal > %s 2>&1",
           g_bin, g_n[i].dir, g_n[src].dir, out);
  double t0 = du_now();
  int rc = du_system(cmd);
  char *t = du_read(out);
  if (rc != 0 || t == NULL || strstr(t, "history_filled=") == NULL)
    fail_msg("history fill of node %d from node %d: exit %d\n%s", g_n[i].id, g_n[src].id, rc,
             t != NULL ? t : "");
  printf("node %d: %s", g_n[i].id, strstr(t, "history_filled="));
  printf("node %d: history filled from node %d in %.3f s\n", g_n[i].id, g_n[src].id,
         du_now() - t0);
  free(t);
  assert_false(lacks_history(i));
}

/* Stops every node (followers first), fills the history of any that lacks
 * it from one that has it, and checks every replay: verdict OK from seq 1,
 * one hash, each node's hash at its stop. */
static void replay_all_equal(void) {
  uint64_t seq = quiesce();
  char stopped[NODES][80], text[8192], first[80] = "";
  int order[NODES];
  du_rolling_order(NODES, leader_slot(), order);
  for (int k = 0; k < NODES; k++) stop_node(order[k], stopped[order[k]], sizeof stopped[0]);
  int whole = -1;
  for (int i = 0; i < NODES; i++)
    if (!lacks_history(i)) whole = i;
  if (whole < 0) fail_msg("no node holds the history from seq 1");
  for (int i = 0; i < NODES; i++) {
    if (!lacks_history(i)) continue;
    int rc = replay(i, text, sizeof text);
    assert_int_not_equal(rc, 0);
    if (strstr(text, "records 1..") == NULL)
      fail_msg("replay on node %d does not say what is missing:\n%s", g_n[i].id, text);
    fill_history(i, whole);
  }
  for (int i = 0; i < NODES; i++) {
    int rc = replay(i, text, sizeof text);
    if (rc != 0 || strstr(text, "verdict: OK") == NULL)
      fail_msg("replay on node %d (last seq %" PRIu64 "): exit %d\n%s", g_n[i].id, seq, rc, text);
    char h[80];
    if (replay_hash(text, h, sizeof h) != 0) fail_msg("no state hash in:\n%s", text);
    if (first[0] == '\0') snprintf(first, sizeof first, "%s", h);
    if (strcmp(h, first) != 0 || strcmp(h, stopped[i]) != 0)
      fail_msg("node %d: replay hash %s, the first node's %s, at its stop %s", g_n[i].id, h,
               first, stopped[i]);
  }
  for (int i = 0; i < NODES; i++) node_start(i);
  assert_true(leader_slot() >= 0);
}

static void group_up(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "clusterhist"));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  assert_int_equal(du_cluster_keys(g_keys, SECRET_HEX), 0);
  assert_int_equal(
      du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes, sizeof g_nodes), 0);
  for (int i = 0; i < NODES; i++) node_start(i);
  assert_true(leader_slot() >= 0);
  hg_client_t *op = client(1);
  assert_int_equal(ch_cluster_market(op, 1024), 0);
  hg_client_destroy(op);
  orders(20);
}

static void restarts_keep_the_journal(void **state) {
  (void)state;
  int order[NODES];
  du_rolling_order(NODES, leader_slot(), order);
  for (int k = 0; k < NODES; k++) {
    int i = order[k];
    char h[80];
    stop_node(i, h, sizeof h);
    node_start(i);
    orders(10);
  }
  replay_all_equal();
}

static void wiped_follower_filled(void **state) {
  (void)state;
  int leader = leader_slot(), f = (leader + 1) % NODES;
  kill(g_n[f].pid, SIGKILL);
  du_stop(g_n[f].pid, 0, 10);
  g_n[f].pid = 0;
  du_rm_rf(g_n[f].dir);
  orders(30); /* the log is trimmed behind snapshots (cluster.snapshot_entries=8) */
  double t0 = du_now();
  node_start(f);
  uint64_t seq = quiesce();
  printf("wiped follower caught up to seq %" PRIu64 " in %.2f s after its start\n", seq,
         du_now() - t0);
  assert_true(lacks_history(f));
  /* Its journal continues across a restart too, still lacking the same. */
  char h[80];
  stop_node(f, h, sizeof h);
  node_start(f);
  orders(5);
  assert_true(lacks_history(f));
  replay_all_equal();
  for (int i = 0; i < NODES; i++) {
    char *log = du_read(g_n[i].log);
    assert_null(strstr(log, "cannot prepare the journal"));
    free(log);
  }
  /* ops/archive of the wiped node (filled above) into a directory, twice
   * (the second replaces the first), then replay of the archive alone. */
  char cmd[3000], arch[600], out[700], text[8192];
  snprintf(arch, sizeof arch, "%s/archive", g_root);
  snprintf(out, sizeof out, "%s/archive.out", g_root);
  snprintf(cmd, sizeof cmd,
           "%s/archive --bin %s -o journal.segment_size=1M -o journal.batch_bytes=256K "
           "-o data_dir=%s/engine "
           "--metrics-url http://127.0.0.1:%d/metrics %s > %s 2>&1",
           g_ops, g_bin, g_n[f].dir, g_n[f].http_port, arch, out);
  for (int k = 0; k < 2; k++) {
    int rc = du_system(cmd);
    char *t = du_read(out);
    if (rc != 0) fail_msg("ops/archive: exit %d\n%s", rc, t != NULL ? t : "");
    free(t);
  }
  snprintf(cmd, sizeof cmd, "%s replay --data %s --max-instruments 8 --max-accounts 64 "
           "--max-book-orders 65536 > %s 2>&1", g_hgctl, arch, out);
  int rc = du_system(cmd);
  char *t = du_read(out);
  snprintf(text, sizeof text, "%s", t != NULL ? t : "");
  free(t);
  if (rc != 0 || strstr(text, "verdict: OK") == NULL) fail_msg("replay of the archive:\n%s", text);
  if (getenv("HG_TEST_KEEP") == NULL) du_rm_rf(g_root);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <hourglassd> <hgctl> <ops dir>\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  g_hgctl = argv[2];
  g_ops = argv[3];
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(group_up),
      cmocka_unit_test(restarts_keep_the_journal),
      cmocka_unit_test(wiped_follower_filled),
  };
  return cmocka_run_group_tests(tests, NULL, du_kill_all);
}
