/*
 * test_cluster_deploy - the runbook's rolling upgrade of a three-node group
 * with ops/deploy, as an operator runs it (ops/RUNBOOK.md, "Cluster"):
 * every node installed and started by ops/deploy --no-systemd from its own
 * prefix and configuration file; then, while a trader keeps sending
 * orders through the client's node list, each node upgraded in turn to a
 * new release, followers first and the leader last, waiting after each
 * until the node follows the leader again with the leader's last seq.
 * Checks: every deploy exits 0 with the new release current; a leader takes
 * orders at the end; the trader's orders kept being acknowledged, with no
 * pause longer than a few election timeouts (the leader's switch); and,
 * once the nodes are stopped, every node's state hash and last seq are
 * equal (hourglassd --state-hash on each data directory).
 *
 * Usage: test_cluster_deploy <hourglassd>. Loopback ports only; every wait
 * is bounded; the daemons are killed on any exit path (teardown).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"
#include "daemon_util.h"
#include "hourglass/client.h"

#define NODES 3
#define OPS HG_SOURCE_DIR "/ops"
#define ELECTION_MS 500

static const char *g_bin;
static const char SECRET_HEX[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
static du_node_t g_n[NODES];
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];
static char g_prefix[NODES][700], g_conf[NODES][700];

/* The pid ops/deploy recorded for node i, 0 if none. */
static pid_t deployed_pid(int i) {
  char path[800];
  snprintf(path, sizeof path, "%s/run/hourglassd.pid", g_prefix[i]);
  char *s = du_read(path);
  pid_t p = s != NULL ? (pid_t)atoi(s) : 0;
  free(s);
  return p;
}

static int kill_deployed(void **state) {
  (void)state;
  for (int i = 0; i < NODES; i++) {
    pid_t p = deployed_pid(i);
    if (p > 0 && kill(p, 0) == 0) kill(p, SIGKILL);
  }
  return 0;
}

/* ops/deploy of bin as version ver on node i; its exit status. */
static int deploy(int i, const char *ver) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           OPS "/deploy --prefix %s --no-systemd --config %s --health-url "
               "http://127.0.0.1:%d/health --timeout 120 --stop-timeout 120 --bin %s --version %s "
               ">>%s/deploy%d.log 2>&1",
           g_prefix[i], g_conf[i], g_n[i].http_port, g_bin, ver, g_root, i + 1);
  return du_system(cmd);
}

/* The node taking orders, waiting up to 60 s; -1 if none. (The nodes are
 * ops/deploy's children, not this process's: du_cluster_leader, which
 * skips nodes it did not start, does not apply.) */
static int find_leader(void) {
  double end = du_now() + 60;
  while (du_now() < end) {
    for (int i = 0; i < NODES; i++) {
      char *h = du_get(g_n[i].http_port, "/health");
      int yes = h != NULL && strstr(h, "\"taking_orders\":true") != NULL;
      free(h);
      if (yes) return i;
    }
    du_sleep_ms(50);
  }
  return -1;
}

/* Waits (up to 120 s) until node i follows a leader taking orders and has
 * applied that leader's last seq as read when the wait began. */
static void await_caught_up(int i) {
  double end = du_now() + 120;
  int leader = find_leader();
  assert_true(leader >= 0);
  char *lh = du_get(g_n[leader].http_port, "/health");
  uint64_t want = du_json_u64(lh, "last_seq");
  free(lh);
  assert_true(want != UINT64_MAX);
  for (;;) {
    char *h = du_get(g_n[i].http_port, "/health");
    uint64_t at = du_json_u64(h, "last_seq");
    int leads = du_json_u64(h, "leader") != 0 && du_json_u64(h, "leader") != UINT64_MAX;
    free(h);
    if (leads && at != UINT64_MAX && at >= want) return;
    if (du_now() > end)
      fail_msg("node %d did not catch up with seq %llu in 120 s", i + 1, (unsigned long long)want);
    du_sleep_ms(50);
  }
}

static hg_client_t *client(uint64_t key) {
  hg_client_t *c = NULL;
  assert_int_equal(ch_node_client(g_n[0].client_port, g_nodes, key, SECRET_HEX, &c), 0);
  return c;
}

static int connect_retry(hg_client_t *c, double timeout_s) {
  return ch_connect_retry(c, timeout_s, NULL);
}

/* The trader: one IOC buy at a time (an empty book: each is answered
 * CANCELED or NEW + CANCELED), resent on a new connection after a failure.
 * Counts acknowledgements and keeps the longest time without one. */
typedef struct trader {
  pthread_t th;
  atomic_int stop;
  _Atomic uint64_t acked; /* read by the main thread while it trades */
  double longest_pause_s;
  int failed; /* no connection for 60 s */
} trader_t;

static void *trader_main(void *arg) {
  trader_t *t = arg;
  hg_client_t *c = NULL;
  if (ch_node_client(g_n[0].client_port, g_nodes, 2, SECRET_HEX, &c) != 0) {
    t->failed = 1;
    return NULL;
  }
  uint64_t clid = 1;
  double last_ack = du_now();
  int connected = 0;
  while (!atomic_load(&t->stop)) {
    if (!connected) {
      if (connect_retry(c, 60) != 0) {
        t->failed = 1;
        break;
      }
      connected = 1;
    }
    hg_client_order_t o = {.instrument_id = 1,
                           .client_order_id = clid,
                           .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                           .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                           .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC,
                           .has_price = true,
                           .price = 480,
                           .qty = 1};
    uint64_t seq;
    if (hg_client_new_order(c, &o, &seq) != 0 || hg_client_flush(c, 1000) < 0) {
      connected = 0;
      continue;
    }
    /* Its first report, or a broken connection (resend on the next one). */
    double give_up = du_now() + 5;
    int answered = 0;
    while (!answered && du_now() < give_up) {
      const Hourglass__V1__Envelope *e = NULL;
      int rc = hg_client_recv(c, 100, &e);
      if (rc < 0) break;
      if (rc > 0 && e->body_case == HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT &&
          e->execution_report->client_order_id == clid &&
          e->execution_report->exec_type != HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED)
        answered = 1;
    }
    if (!answered) {
      connected = 0;
      hg_client_close(c);
      continue;
    }
    double now = du_now();
    if (now - last_ack > t->longest_pause_s) t->longest_pause_s = now - last_ack;
    last_ack = now;
    t->acked++;
    clid++;
    du_sleep_ms(2);
  }
  hg_client_destroy(c);
  return NULL;
}

static void write_config(int i) {
  snprintf(g_prefix[i], sizeof g_prefix[i], "%s/opt%d", g_root, i + 1);
  snprintf(g_conf[i], sizeof g_conf[i], "%s/node%d.conf", g_root, i + 1);
  char text[8192];
  snprintf(text, sizeof text,
           "data_dir = %s\n"
           "listen.order_entry = 127.0.0.1:%d\n"
           "listen.http = 127.0.0.1:%d\n"
           "gateway.keys_file = %s\n"
           "tls = off\n"
           "throttle.rate = 100000\n"
           "pipeline.mode = loop\n"
           "pipeline.inbound_capacity = 4096\n"
           "pipeline.outbound_capacity = 16384\n"
           "pipeline.staging_capacity = 16384\n"
           "journal.segment_size = 1M\n"
           "journal.batch_bytes = 256K\n"
           "limits.max_book_orders = 65536\n"
           "cluster.id = %d\n"
           "cluster.members = %s\n"
           "cluster.election_timeout_ms = %d\n",
           g_n[i].dir, g_n[i].client_port, g_n[i].http_port, g_keys, g_n[i].id, g_members,
           ELECTION_MS);
  assert_int_equal(du_write_file(g_conf[i], text), 0);
}

static void current_is(int i, const char *ver) {
  /* gcc -O3 bounds g_prefix[i] by the whole array, not one row. */
  char link[sizeof g_prefix + 16], target[256];
  snprintf(link, sizeof link, "%s/current", g_prefix[i]);
  ssize_t n = readlink(link, target, sizeof target - 1);
  assert_true(n > 0);
  target[n] = '\0';
  char want[64];
  snprintf(want, sizeof want, "releases/%s", ver);
  assert_string_equal(target, want);
}

/* last_seq and the state hash of node i's data directory (stopped). */
static void state_hash(int i, char *out, size_t cap) {
  char cmd[4096], path[700];
  snprintf(path, sizeof path, "%s/hash%d", g_root, i + 1);
  snprintf(cmd, sizeof cmd, "%s -c %s -o data_dir=%s/engine --state-hash >%s 2>&1", g_bin,
           g_conf[i], g_n[i].dir, path);
  assert_int_equal(du_system(cmd), 0);
  char *s = du_read(path);
  assert_non_null(s);
  const char *p = strstr(s, "last_seq");
  assert_non_null(p);
  snprintf(out, cap, "%s", p);
  free(s);
}

static void rolling_upgrade_with_ops_deploy(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "cluster_deploy"));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  assert_int_equal(du_cluster_keys(g_keys, SECRET_HEX), 0);
  assert_int_equal(du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes,
                                   sizeof g_nodes), 0);
  for (int i = 0; i < NODES; i++) write_config(i);

  /* Bootstrap: the three first deploys at once (a node alone has no
   * majority, but it answers /health, so each deploy sees it healthy). */
  static char cmd[16384];
  int off = snprintf(cmd, sizeof cmd, "st=0; ");
  for (int i = 0; i < NODES; i++)
    off += snprintf(cmd + off, sizeof cmd - (size_t)off,
                    OPS "/deploy --prefix %s --no-systemd --config %s --health-url "
                        "http://127.0.0.1:%d/health --timeout 120 --bin %s --version v1 "
                        ">>%s/deploy%d.log 2>&1 & p%d=$!; ",
                    g_prefix[i], g_conf[i], g_n[i].http_port, g_bin, g_root, i + 1, i);
  snprintf(cmd + off, sizeof cmd - (size_t)off,
           "wait $p0 || st=1; wait $p1 || st=1; wait $p2 || st=1; exit $st");
  assert_int_equal(du_system(cmd), 0);
  for (int i = 0; i < NODES; i++) current_is(i, "v1");
  int leader = find_leader();
  assert_true(leader >= 0);

  hg_client_t *op = client(1);
  assert_int_equal(connect_retry(op, 60), 0);
  assert_int_equal(ch_cluster_market(op, 1024), 0);
  hg_client_destroy(op);

  static trader_t t;
  memset(&t, 0, sizeof t);
  assert_int_equal(pthread_create(&t.th, NULL, trader_main, &t), 0);
  du_sleep_ms(500);

  /* The upgrade: followers first, the leader last; each caught up before
   * the next goes down, so two of three always hold the log. */
  int order[NODES];
  du_rolling_order(NODES, leader, order);
  for (int k = 0; k < NODES; k++) {
    int i = order[k];
    uint64_t before = t.acked;
    assert_int_equal(deploy(i, "v2"), 0);
    current_is(i, "v2");
    await_caught_up(i);
    fprintf(stderr, "node %d%s upgraded; %llu orders acknowledged meanwhile\n", i + 1,
            i == leader ? " (the leader)" : "", (unsigned long long)(t.acked - before));
  }
  int now_leader = find_leader();
  assert_true(now_leader >= 0);
  assert_true(now_leader != leader); /* the old leader handed over at its stop */
  uint64_t before = t.acked;
  double end = du_now() + 30;
  while (t.acked < before + 20 && du_now() < end) du_sleep_ms(20);
  atomic_store(&t.stop, 1);
  pthread_join(t.th, NULL);
  fprintf(stderr, "%llu orders acknowledged in all; longest pause %.0f ms\n",
          (unsigned long long)t.acked, t.longest_pause_s * 1e3);
  assert_false(t.failed);
  assert_true(t.acked >= before + 20); /* the new leader takes orders */
  assert_true(t.longest_pause_s < 20 * ELECTION_MS / 1000.0);

  /* Every node applies the last committed batch (a follower learns that
   * it is committed from the leader's next message), then every node is
   * stopped, followers first, and their states compared. */
  for (end = du_now() + 30;;) {
    uint64_t seqs[NODES];
    for (int i = 0; i < NODES; i++) {
      char *h = du_get(g_n[i].http_port, "/health");
      seqs[i] = du_json_u64(h, "last_seq");
      free(h);
    }
    if (seqs[0] != UINT64_MAX && seqs[0] == seqs[1] && seqs[1] == seqs[2]) break;
    if (du_now() > end) fail_msg("the nodes stay at different seqs");
    du_sleep_ms(50);
  }
  for (int k = 0; k < NODES; k++) {
    int i = (now_leader + 1 + k) % NODES;
    pid_t p = deployed_pid(i);
    assert_true(p > 0);
    kill(p, SIGTERM);
    double until = du_now() + 120;
    while (kill(p, 0) == 0 && du_now() < until) du_sleep_ms(20);
    assert_int_not_equal(kill(p, 0), 0);
  }
  char h[NODES][256];
  for (int i = 0; i < NODES; i++) state_hash(i, h[i], sizeof h[i]);
  fprintf(stderr, "state: %s", h[0]);
  assert_string_equal(h[0], h[1]);
  assert_string_equal(h[0], h[2]);
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
      cmocka_unit_test_teardown(rolling_upgrade_with_ops_deploy, kill_deployed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
