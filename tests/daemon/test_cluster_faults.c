/* Faults of a three-node hourglassd Raft group on loopback, each under a
 * steady order stream (a client on its own thread, one order at a time,
 * following the leader from its node list), with every Raft link through a
 * relay the test can cut (tests/support/link_proxy.h):
 *  - partition: the leader is cut off from both followers; it stops
 *    acknowledging, the two elect a new leader and trade on, and every
 *    acknowledgement the client got is an order the majority holds; after
 *    the heal the old leader rejoins (rebuilt in place if it had executed
 *    batches the group did not commit), drops its uncommitted tail and
 *    converges;
 *  - rolling restart: each node stopped with SIGTERM and started again,
 *    followers first, the leader last; nothing acknowledged is lost (the
 *    longest pause in acknowledgements is printed: bench_cluster bounds
 *    failover times, not this test);
 *  - a follower's Raft disk is full (its cluster.dir a small tmpfs with
 *    less free than one 8 MB log segment; not root, in a user and mount
 *    namespace, or skipped with the reason when there are none): the
 *    other two take orders on, /health on that node names
 *    the disk, and once space is freed and it is started again it catches
 *    up; then a follower killed with -9 does not stop the other two;
 *  - a follower wiped (killed, its data directory removed) after the log
 *    was trimmed behind a snapshot: it installs the leader's snapshot once,
 *    rebuilds itself in place once and catches up from the log, with no
 *    error-level line in any node's log.
 * Every test ends with all three nodes at the same last seq and state hash.
 * Usage: test_cluster_faults <hourglassd> [rounds] (CI: 1, slow: 3). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_util.h"
#include "daemon_util.h"
#include "hourglass/client.h"
#include "link_proxy.h"

#define NODES 3
#define INSTR 1
#define ELECTION_MS 400
#define HOLD_MS 20000 /* cluster.snapshot_hold_ms: above a node's rebuild under ASan */
#define SKIPPED 77 /* the exit status when a test skipped itself and none failed */

static const char *g_bin; /* hourglassd, from argv[1] */
static int g_rounds = 1;

static du_node_t g_n[NODES];
static int g_back[NODES];            /* the port each node's Raft listener binds */
static char g_raft_dir[NODES][640];  /* cluster.dir when not under data_dir */
static lp_proxy_t *g_proxy;
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];
static char g_mnt[640]; /* a mounted tmpfs, for the teardown */
static const char *g_node_bin[NODES]; /* NULL: g_bin */
static pid_t g_ns;                    /* not root: holds node 3's namespaces */
static char g_wrap[700];              /* not root: hourglassd entering them */
static int g_skipped;                 /* a test skipped itself: exit SKIPPED if none failed */

/* Keys: 1 operator, 2 and 4 traders (account 1: 2 streams orders, 4 asks
 * their status), 3 risk viewer (firm 1). */
static const char SECRET_HEX[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/* ------------------------------------------------------------ the group */

static void node_spawn(int i) {
  char listen[64], dir[700];
  snprintf(listen, sizeof listen, "cluster.listen=127.0.0.1:%d", g_back[i]);
  snprintf(dir, sizeof dir, "cluster.dir=%s", g_raft_dir[i]);
  char election[64];
  snprintf(election, sizeof election, "cluster.election_timeout_ms=%d", ELECTION_MS);
  char hold[64];
  snprintf(hold, sizeof hold, "cluster.snapshot_hold_ms=%d", HOLD_MS);
  const char *extra[] = {"pipeline.mode=loop", election, "cluster.snapshot_entries=64", hold,
                         listen, g_raft_dir[i][0] != '\0' ? dir : NULL, NULL};
  du_node_spawn(&g_n[i], g_node_bin[i] != NULL ? g_node_bin[i] : g_bin, g_root, g_members, g_keys,
                extra);
}

static void node_start(int i) {
  node_spawn(i);
  char *log = du_wait_log(g_n[i].log, "msg=\"ready\"", 120);
  if (log == NULL) fail_msg("node %d not ready after 120 s", i + 1);
  free(log);
}

/* A node that must be rebuilt from the group (a deposed leader with
 * batches the group may not hold, or a snapshot installed from the
 * leader) rebuilds itself in place: any exit the test did not cause fails
 * it. */
static void supervise(void) {
  if (du_cluster_supervise(g_n, NODES) < 0) fail_msg("a node exited unexpectedly");
}

static char *health(int i) { return du_get(g_n[i].http_port, "/health"); }

/* A node other than `not` taking orders, within 120 s; -1 if none. */
static int find_leader(int not) {
  double end = du_now() + 120;
  while (du_now() < end) {
    supervise();
    for (int i = 0; i < NODES; i++) {
      if (g_n[i].pid == 0 || i == not) continue;
      char *h = health(i);
      int yes = strstr(h, "\"taking_orders\":true") != NULL;
      free(h);
      if (yes) return i;
    }
    du_sleep_ms(50);
  }
  return -1;
}

/* Plans the group with a relay in front of every Raft port, starts it and
 * returns the leader (not node `not`, -1: any). Node i's cluster.dir is
 * g_raft_dir[i] if set. */
static int group_start(const char *tag, int not) {
  if (g_root[0] == '\0') assert_non_null(du_tmpdir(g_root, sizeof g_root, tag));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  assert_int_equal(du_cluster_keys(g_keys, SECRET_HEX), 0);
  assert_int_equal(du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes,
                                   sizeof g_nodes), 0);
  int front[NODES];
  for (int i = 0; i < NODES; i++) {
    front[i] = g_n[i].raft_port;
    g_back[i] = du_free_port();
  }
  assert_int_equal(lp_start(NODES, front, g_back, &g_proxy), 0);
  for (int i = 0; i < NODES; i++) node_spawn(i);
  for (int i = 0; i < NODES; i++) {
    char *log = du_wait_log(g_n[i].log, "msg=\"ready\"", 120);
    if (log == NULL) fail_msg("node %d not ready after 120 s", i + 1);
    free(log);
  }
  int leader = find_leader(not);
  assert_true(leader >= 0);
  return leader;
}

static hg_client_t *client(int node, uint64_t key, const char *nodes) {
  hg_client_t *c = NULL;
  assert_int_equal(ch_node_client(g_n[node].client_port, nodes, key, SECRET_HEX, &c), 0);
  return c;
}

static void setup_market(int leader) {
  hg_client_t *op = client(leader, 1, NULL);
  assert_int_equal(hg_client_connect(op), 0);
  assert_int_equal(ch_cluster_market(op, 65536), 0); /* DU_SMALL_OPTS' book limit */
  hg_client_destroy(op);
}

/* Waits until node i knows `leader` as the leader and holds everything
 * the leader committed, failing if a node exits (supervise). */
static void await_caught_up(int i, int leader) {
  char want[32];
  snprintf(want, sizeof want, "\"leader\":%d,", g_n[leader].id);
  double end = du_now() + 120;
  for (;;) {
    supervise();
    char *l = health(leader), *h = health(i);
    uint64_t c = du_json_u64(l, "committed_seq");
    int ok = strstr(h, want) != NULL && c != UINT64_MAX && du_json_u64(h, "last_seq") >= c;
    free(l);
    free(h);
    if (ok) return;
    if (du_now() > end) fail_msg("node %d did not catch up with leader %d", i + 1, leader + 1);
    du_sleep_ms(50);
  }
}

/* ------------------------------------------------------- the order stream */

/* A trader on its own thread: one resting buy at a time (they never
 * cross), each waited for; on a timeout or a closed connection it logs in
 * again through the node list. Records the acknowledged orders, at which
 * node and when, and the longest time between two acknowledgements. */
typedef struct ack {
  uint64_t order_id;
  int port;  /* the node that acknowledged it */
  double at; /* du_now() */
} ack_t;

typedef struct stream {
  pthread_t thread;
  hg_client_t *c;
  atomic_int stop;
  atomic_size_t n; /* acks[0..n) are written */
  ack_t *acks;
  size_t cap;
  double longest_pause, pause_from;
  unsigned reconnects;
} stream_t;

static int stream_port(hg_client_t *c) {
  char at[64];
  hg_client_address(c, at, sizeof at);
  const char *colon = strrchr(at, ':');
  return colon != NULL ? atoi(colon + 1) : -1;
}

static void stream_reconnect(stream_t *s) {
  s->reconnects++;
  while (!atomic_load(&s->stop) && hg_client_connect(s->c) != 0) du_sleep_ms(50);
}

static void *stream_main(void *arg) {
  stream_t *s = arg;
  uint64_t clordid = 1;
  double last = du_now();
  stream_reconnect(s);
  while (!atomic_load(&s->stop)) {
    hg_client_order_t o = {.instrument_id = INSTR,
                           .client_order_id = clordid,
                           .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                           .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                           .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_GTC,
                           .has_price = true,
                           .price = 480 + (int64_t)(clordid % 20),
                           .qty = 1};
    uint64_t seq;
    int answered = 0;
    if (hg_client_new_order(s->c, &o, &seq) == 0 && hg_client_flush(s->c, 2000) == 0) {
      double end = du_now() + 2.0;
      while (!answered && du_now() < end) {
        const Hourglass__V1__Envelope *e = NULL;
        if (hg_client_recv(s->c, 200, &e) < 0) break;
        if (e == NULL || e->body_case != HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT ||
            e->execution_report->client_order_id != clordid)
          continue;
        answered = 1;
        if (e->execution_report->exec_type != HOURGLASS__V1__EXEC_TYPE__EXEC_NEW) continue;
        double now = du_now();
        if (now - last > s->longest_pause) {
          s->longest_pause = now - last;
          s->pause_from = last;
        }
        last = now;
        size_t n = atomic_load(&s->n);
        if (n < s->cap) {
          s->acks[n] = (ack_t){e->execution_report->order_id, stream_port(s->c), now};
          atomic_store(&s->n, n + 1);
        }
      }
    }
    clordid++;
    if (!answered) stream_reconnect(s);
    else du_sleep_ms(3);
  }
  return NULL;
}

static void stream_start(stream_t *s, int node) {
  memset(s, 0, sizeof *s);
  s->cap = 1 << 17;
  s->acks = calloc(s->cap, sizeof *s->acks);
  assert_non_null(s->acks);
  s->c = client(node, 2, g_nodes);
  assert_int_equal(pthread_create(&s->thread, NULL, stream_main, s), 0);
}

/* Waits until the stream has `more` acknowledgements beyond `from`. */
static void stream_await(stream_t *s, size_t from, size_t more, double timeout_s) {
  double end = du_now() + timeout_s;
  while (atomic_load(&s->n) < from + more) {
    supervise();
    if (du_now() > end)
      fail_msg("the stream has %zu acknowledgements, not %zu, after %.0f s", atomic_load(&s->n),
               from + more, timeout_s);
    du_sleep_ms(20);
  }
}

static void stream_stop(stream_t *s) {
  atomic_store(&s->stop, 1);
  pthread_join(s->thread, NULL);
  hg_client_destroy(s->c);
}

/* Every order in acks[0..n) is live at node i (no order ever trades). */
static void check_live(int i, const ack_t *acks, size_t n) {
  hg_client_t *c = client(i, 4, NULL);
  assert_int_equal(hg_client_connect(c), 0);
  for (size_t k = 0; k < n; k++) {
    uint64_t seq;
    assert_int_equal(hg_client_order_status(c, INSTR, acks[k].order_id, &seq), 0);
    double end = du_now() + 5;
    for (;;) {
      const Hourglass__V1__Envelope *e = NULL;
      if (du_now() > end || hg_client_recv(c, 1000, &e) < 0)
        fail_msg("no status for order %" PRIu64 " at node %d", acks[k].order_id, i + 1);
      if (e == NULL) continue;
      if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_ORDER_STATUS ||
          e->order_status->ref_seq != seq)
        continue;
      if (!e->order_status->live)
        fail_msg("order %" PRIu64 ", acknowledged by the node on port %d, is not live at node %d",
                 acks[k].order_id, acks[k].port, i + 1);
      break;
    }
  }
  hg_client_destroy(c);
}

/* All three at the leader's committed seq, then stopped (SIGTERM) and
 * compared: the same last seq and state hash everywhere. */
static void stop_and_compare(void) {
  int leader = find_leader(-1);
  assert_true(leader >= 0);
  for (int i = 0; i < NODES; i++) await_caught_up(i, leader);
  char seq[NODES][32], hash[NODES][80];
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < NODES; i++) {
      if ((i == leader) != (pass == 1)) continue; /* followers first: no election */
      assert_int_equal(du_stop(g_n[i].pid, SIGTERM, 60), 0);
      g_n[i].pid = 0;
      char *log = du_read(g_n[i].log);
      assert_int_equal(du_field(log, "msg=\"stopped\"", "last_seq", seq[i], sizeof seq[i]), 0);
      assert_int_equal(du_field(log, "msg=\"stopped\"", "state_hash", hash[i], sizeof hash[i]),
                       0);
      free(log);
    }
  }
  for (int i = 1; i < NODES; i++) {
    assert_string_equal(seq[i], seq[0]);
    assert_string_equal(hash[i], hash[0]);
  }
  fprintf(stderr, "all three at last_seq %s, state hash %s\n", seq[0], hash[0]);
}

static int teardown(void **state) {
  du_kill_all(state);
  lp_stop(g_proxy);
  g_proxy = NULL;
  if (g_mnt[0] != '\0') umount2(g_mnt, MNT_DETACH);
  g_mnt[0] = '\0';
  memset(g_raft_dir, 0, sizeof g_raft_dir);
  memset(g_node_bin, 0, sizeof g_node_bin);
  g_ns = 0; /* killed by du_kill_all */
  g_root[0] = '\0';
  return 0;
}

/* The group started, the market set up on the leader (not node `not`)
 * and the stream trading there; returns the leader. */
static int trading_start(const char *tag, int not, stream_t *s) {
  int leader = group_start(tag, not);
  setup_market(leader);
  stream_start(s, leader);
  stream_await(s, 0, 30, 30);
  return leader;
}

/* Stops the stream, checks every acknowledged order at the leader, then
 * the nodes against each other (stop_and_compare), and cleans up. */
static void trading_end(stream_t *s) {
  stream_stop(s);
  size_t n = atomic_load(&s->n);
  int leader = find_leader(-1);
  assert_true(leader >= 0);
  check_live(leader, s->acks, n);
  fprintf(stderr,
          "%zu orders acknowledged, %u client logins, %d rebuilds in place, "
          "longest pause %.0f ms\n",
          n, s->reconnects, du_cluster_rebuilds(g_n, NODES), s->longest_pause * 1000);
  free(s->acks);
  stop_and_compare();
  lp_stop(g_proxy);
  g_proxy = NULL;
  if (g_mnt[0] != '\0') umount2(g_mnt, MNT_DETACH);
  g_mnt[0] = '\0';
  if (getenv("HG_TEST_KEEP") == NULL) du_rm_rf(g_root); /* HG_TEST_KEEP: for a look */
  g_root[0] = '\0';
}

/* ------------------------------------------------------------ the tests */

static void leader_partitioned(void **state) {
  (void)state;
  static stream_t s;
  int leader = trading_start("faults-part", -1, &s);
  for (int round = 0; round < g_rounds; round++) {
    int old = leader;
    size_t before = atomic_load(&s.n);
    double t_cut = du_now();
    lp_cut(g_proxy, 0, g_n[old].id, 1);
    leader = find_leader(old);
    if (leader < 0) fail_msg("no new leader after the partition");
    double t_new = du_now();
    /* The majority trades on. */
    stream_await(&s, atomic_load(&s.n), 30, 30);
    /* Cut off, the old leader learns of no commit: no acknowledgement from
     * it a second after the cut (nor ever one the majority lacks, below). */
    size_t n = atomic_load(&s.n), late = 0;
    for (size_t k = before; k < n; k++)
      late += s.acks[k].port == g_n[old].client_port && s.acks[k].at > t_cut + 1.0;
    fprintf(stderr,
            "round %d: node %d cut off; node %d takes orders after %.0f ms; the old leader "
            "acknowledged %zu orders after the cut\n",
            round + 1, g_n[old].id, g_n[leader].id, (t_new - t_cut) * 1000, late);
    assert_int_equal(late, 0);
    /* No acknowledgement the majority does not hold. */
    check_live(leader, s.acks, n);
    /* The old leader is not taking orders; after the heal it rejoins (it
     * may have rebuilt itself from the group) and catches up. */
    for (double end = du_now() + 10;;) {
      char *h = health(old);
      int claims = strstr(h, "\"taking_orders\":true") != NULL;
      free(h);
      if (!claims) break;
      if (du_now() > end) fail_msg("node %d, cut off, still takes orders", old + 1);
      du_sleep_ms(50);
    }
    lp_cut(g_proxy, 0, g_n[old].id, 0);
    await_caught_up(old, leader);
    stream_await(&s, atomic_load(&s.n), 20, 30);
  }
  trading_end(&s);
}

/* Followers first, the leader last, each stopped with SIGTERM (the leader
 * hands leadership over first) and started again once the stream has gone
 * on without it. */
static void rolling_restart(void **state) {
  (void)state;
  static stream_t s;
  int leader = trading_start("faults-roll", -1, &s);
  for (int round = 0; round < g_rounds; round++) {
    int order[NODES];
    du_rolling_order(NODES, leader, order);
    for (int k = 0; k < NODES; k++) {
      int i = order[k];
      double t0 = du_now();
      assert_int_equal(du_stop(g_n[i].pid, SIGTERM, 60), 0);
      g_n[i].pid = 0;
      if (i == leader) {
        char *log = du_read(g_n[i].log);
        assert_non_null(strstr(log, "msg=\"leadership transfer at stop\" result=done"));
        free(log);
        leader = find_leader(i);
        assert_true(leader >= 0);
      }
      stream_await(&s, atomic_load(&s.n), 10, 30);
      node_start(i);
      await_caught_up(i, leader);
      fprintf(stderr, "round %d: node %d restarted in %.0f ms%s\n", round + 1, i + 1,
              (du_now() - t0) * 1000, k == NODES - 1 ? " (was the leader)" : "");
      stream_await(&s, atomic_load(&s.n), 10, 30);
    }
  }
  trading_end(&s); /* prints the longest pause of order entry (bench_cluster bounds it) */
}

/* Error-level lines in node i's log. */
static int log_errors(int i) { return du_log_count(g_n[i].log, "Z error "); }

/* A follower's data directory is wiped (kill -9, then removed) after the
 * leader's log was trimmed behind a snapshot: started again, it is sent
 * the leader's snapshot, accepts it, rebuilds itself in place once to load
 * it and catches up from the leader's log: one snapshot, one rebuild, no
 * error-level line on the way, /health 200 and "caught_up" at the end. */
static void follower_wiped(void **state) {
  (void)state;
  static stream_t s;
  int leader = trading_start("faults-wipe", -1, &s);
  /* Far more entries than cluster.snapshot_entries (64): snapshots taken,
   * the log trimmed behind them. */
  stream_await(&s, atomic_load(&s.n), 400, 120);
  int victim = (leader + 1) % NODES;
  kill(g_n[victim].pid, SIGKILL);
  du_stop(g_n[victim].pid, 0, 10);
  g_n[victim].pid = 0;
  du_rm_rf(g_n[victim].dir);
  assert_int_equal(mkdir(g_n[victim].dir, 0700), 0);
  stream_await(&s, atomic_load(&s.n), 50, 60);
  int before = du_node_rebuilds(&g_n[victim]);
  node_start(victim);
  await_caught_up(victim, leader);
  int rebuilt = du_node_rebuilds(&g_n[victim]) - before;
  int installs = du_log_count(g_n[victim].log, "msg=\"snapshot installed from the leader\"");
  fprintf(stderr, "node %d wiped: %d snapshot installed, %d rebuilds in place\n", victim + 1,
          installs, rebuilt);
  assert_int_equal(installs, 1);
  assert_int_equal(rebuilt, 1);
  /* Caught up: /health says so. */
  for (double end = du_now() + 120;; du_sleep_ms(50)) {
    supervise();
    char *h = health(victim);
    int ok = du_status(h) == 200 && strstr(h, "\"caught_up\":true") != NULL;
    free(h);
    if (ok) break;
    if (du_now() > end) fail_msg("node %d: /health does not say it caught up", victim + 1);
  }
  stream_await(&s, atomic_load(&s.n), 50, 60);
  for (int i = 0; i < NODES; i++)
    if (log_errors(i) != 0) fail_msg("node %d logged %d error-level lines", i + 1, log_errors(i));
  trading_end(&s);
}

/* Waits until node i's /health answers 503 naming the Raft log and the
 * full disk, and its metrics say so. */
static void await_log_failing(int i) {
  double end = du_now() + 30;
  for (;;) {
    char *h = health(i);
    int named = du_status(h) == 503 && strstr(h, "the Raft log (cluster.dir) cannot be written") &&
                strstr(h, "space") != NULL;
    if (named) {
      const char *body = strstr(h, "\r\n\r\n");
      fprintf(stderr, "node %d /health: %s", i + 1, body != NULL ? body + 4 : h);
    }
    free(h);
    if (named && du_metric(g_n[i].http_port, "hourglass_cluster_log_write_failing") == 1) return;
    if (du_now() > end) fail_msg("node %d's /health does not name its full disk", i + 1);
    du_sleep_ms(100);
  }
}

/* Node i's cluster.dir on a 40 MB tmpfs of which a file takes 36 MB, too
 * little for libraft's 8 MB log segments: mounted here as root; otherwise
 * in a user and mount namespace held by an `unshare -rm` child that
 * deletes the file when asked (small_fs_free), node i started inside it
 * (nsenter, through a wrapper script). 0, or -1 when neither is possible. */
static int small_fs(int i) {
  const char *dir = g_raft_dir[i];
  char script[4096], filler[700];
  snprintf(filler, sizeof filler, "%s/filler", dir);
  if (geteuid() == 0) {
    if (mount("tmpfs", dir, "tmpfs", 0, "size=40m") != 0)
      fail_msg("mount tmpfs on %s: %s", dir, strerror(errno));
    snprintf(g_mnt, sizeof g_mnt, "%s", dir);
    snprintf(script, sizeof script, "head -c 36m /dev/zero > '%s'", filler);
    assert_int_equal(du_system(script), 0);
    return 0;
  }
  if (du_system("unshare -rm true >/dev/null 2>&1") != 0) return -1;
  char log[700];
  snprintf(log, sizeof log, "%s/ns.log", g_root);
  snprintf(script, sizeof script,
           "mount -t tmpfs -o size=40m tmpfs '%s' && head -c 36m /dev/zero > '%s' && "
           "echo full > '%s/ns.state' && while [ ! -e '%s/ns.free' ]; do sleep 0.05; done && "
           "rm '%s' && echo freed > '%s/ns.state' && exec sleep 3600",
           dir, filler, g_root, g_root, filler, g_root);
  char *argv[] = {"/usr/bin/unshare", "-rm", "/bin/sh", "-c", script, NULL};
  g_ns = du_spawn(argv, log);
  snprintf(filler, sizeof filler, "%s/ns.state", g_root);
  char *ok = du_wait_log(filler, "full", 20);
  if (ok == NULL) fail_msg("the namespace with a tmpfs did not come up: see %s", log);
  free(ok);
  snprintf(g_wrap, sizeof g_wrap, "%s/ns", g_root);
  assert_int_equal(mkdir(g_wrap, 0700), 0);
  snprintf(g_wrap, sizeof g_wrap, "%s/ns/hourglassd", g_root);
  snprintf(script, sizeof script,
           "#!/bin/sh\nexec nsenter --preserve-credentials -U -m -t %d -- '%s' \"$@\"\n",
           (int)g_ns, g_bin);
  assert_int_equal(du_write_file(g_wrap, script), 0);
  assert_int_equal(chmod(g_wrap, 0700), 0);
  g_node_bin[i] = g_wrap;
  return 0;
}

/* Deletes the file filling node i's tmpfs: space freed. */
static void small_fs_free(int i) {
  char path[700];
  if (g_ns == 0) {
    snprintf(path, sizeof path, "%s/filler", g_raft_dir[i]);
    assert_int_equal(unlink(path), 0);
    return;
  }
  snprintf(path, sizeof path, "%s/ns.free", g_root);
  assert_int_equal(du_write_file(path, "free\n"), 0);
  snprintf(path, sizeof path, "%s/ns.state", g_root);
  char *ok = du_wait_log(path, "freed", 20);
  if (ok == NULL) fail_msg("the file filling the tmpfs was not deleted");
  free(ok);
}

/* Node 3's cluster.dir is nearly full (small_fs): the node starts but
 * cannot store an entry. The two others trade on; /health on node 3 names
 * the disk; space is freed, node 3 restarted, and it catches up. Then a
 * follower is killed with -9: the other two trade on; it returns after
 * the leader stopped keeping its log for it, and catches up by a snapshot. */
static void follower_disk_full(void **state) {
  (void)state;
  const int f = 2; /* node 3 */
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "faults-disk"));
  snprintf(g_raft_dir[f], sizeof g_raft_dir[f], "%s/raft3", g_root);
  assert_int_equal(mkdir(g_raft_dir[f], 0700), 0);
  if (small_fs(f) != 0) {
    fprintf(stderr, "not root and no user namespaces (unshare -rm): no small tmpfs for the "
                    "full disk; skipped\n");
    du_rm_rf(g_root);
    g_skipped = 1;
    skip();
  }
  static stream_t s;
  int leader = trading_start("faults-disk", f, &s); /* node 3 stores nothing: it cannot lead */
  await_log_failing(f);
  stream_await(&s, atomic_load(&s.n), 50, 30); /* still trading */
  /* Space freed: the tmpfs grows; node 3 restarted catches up. */
  small_fs_free(f);
  assert_int_equal(du_stop(g_n[f].pid, SIGTERM, 60), 0);
  g_n[f].pid = 0;
  node_start(f);
  leader = find_leader(-1);
  await_caught_up(f, leader);
  char *h = health(f);
  assert_int_equal(du_status(h), 200);
  free(h);
  /* A follower killed with -9 does not stop the other two. */
  int victim = (leader + 1) % NODES;
  kill(g_n[victim].pid, SIGKILL);
  du_stop(g_n[victim].pid, 0, 10);
  g_n[victim].pid = 0;
  stream_await(&s, atomic_load(&s.n), 50, 30);
  assert_int_equal(find_leader(-1), leader);
  /* Down for longer than the leader holds its log for it: it returns to a
   * newer snapshot, accepts it, rebuilds itself in place once to load it
   * and catches up from the log the leader keeps for it meanwhile, however
   * many entries its rebuild took. */
  du_sleep_ms(HOLD_MS + 2000);
  stream_await(&s, atomic_load(&s.n), 50, 30);
  int before = du_node_rebuilds(&g_n[victim]);
  node_start(victim);
  await_caught_up(victim, leader);
  int rebuilt = du_node_rebuilds(&g_n[victim]) - before;
  fprintf(stderr, "node %d back after %d s down: %d rebuilds in place to load a snapshot\n",
          victim + 1, HOLD_MS / 1000 + 2, rebuilt);
  assert_int_equal(rebuilt, 1);
  trading_end(&s);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <hourglassd> [rounds]\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  if (argc > 2) g_rounds = atoi(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  /* HG_TEST_FILTER=name (cmocka's pattern): run only that test. */
  if (getenv("HG_TEST_FILTER") != NULL) cmocka_set_test_filter(getenv("HG_TEST_FILTER"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(leader_partitioned, teardown),
      cmocka_unit_test_teardown(rolling_restart, teardown),
      cmocka_unit_test_teardown(follower_disk_full, teardown),
      cmocka_unit_test_teardown(follower_wiped, teardown),
  };
  /* CTest reports SKIPPED (SKIP_RETURN_CODE) only when no test failed. */
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  return failed == 0 && g_skipped ? SKIPPED : failed;
}
