/* A follower that applies committed entries slower than the group commits
 * them keeps serving its loop: three hourglassd processes on loopback,
 * the third with the smallest pipeline rings (pipeline.outbound_capacity
 * 64, pipeline.staging_capacity 2048), so that the entries of a burst of
 * orders at the leader find its stage full over and over (its market-data
 * thread takes 64 records at a time) and wait in its apply queue. While
 * the burst is applied a risk viewer logs in at that follower again and
 * again: every login is answered, and logins are answered while committed
 * entries wait in its apply queue (/health's apply_queued before and after
 * the login): the follower's loop serves clients instead of waiting for
 * room. No node changes term (no election), the follower's /metrics shows
 * entries that were queued, and the group ends with the same state hash at
 * the same last seq on every node. Nothing here bounds a duration (the
 * longest login is printed): the test holds on a busy machine.
 * Usage: test_cluster_apply <hourglassd>. */
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

#include "client_util.h"
#include "daemon_util.h"
#include "hourglass/client.h"

#define NODES 3
#define SLOW 2         /* the follower with small rings */
#define INSTR 1
#define ORDERS 60000   /* the burst */
#define CHUNK 4000     /* orders sent before their reports are read */
/* Well above a pause of a loaded machine: no election during the test. */
#define ELECTION "cluster.election_timeout_ms=2000"
#define WAIT_S 120 /* how long a state the test expects is waited for */

static const char *g_bin;
static du_node_t g_n[NODES];
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];
static const char SECRET_HEX[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

static void node_start(du_node_t *n, int slow) {
  /* No throttle: every order of the burst is sequenced. */
  const char *fast[] = {"pipeline.mode=loop", ELECTION, "throttle.rate=100000000", NULL};
  const char *small[] = {"pipeline.mode=loop", ELECTION,
                         "throttle.rate=100000000", "pipeline.outbound_capacity=64",
                         "pipeline.staging_capacity=2048", NULL};
  if (du_node_start(n, g_bin, g_root, g_members, g_keys, slow ? small : fast) != 0)
    fail_msg("node %d not ready after 120 s", n->id);
}

static hg_client_t *client_at(int node, uint64_t key) {
  uint8_t sec[32];
  assert_int_equal(hg_client_parse_hex(SECRET_HEX, sec, sizeof sec), 32);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = (uint16_t)g_n[node].client_port;
  cfg.key_id = key;
  cfg.secret = sec;
  cfg.secret_len = sizeof sec;
  cfg.timeout_ms = 10000;
  hg_client_t *c = NULL;
  assert_int_equal(hg_client_create(&cfg, &c), 0);
  return c;
}

static uint64_t health_u64(int node, const char *key) {
  char *h = du_get(g_n[node].http_port, "/health");
  uint64_t v = du_json_u64(h, key);
  free(h);
  return v;
}

/* The prober: logs a risk viewer in at the slow follower until told to
 * stop, counting logins, those answered while entries waited in its apply
 * queue before and after, and keeping the longest (printed only). */
typedef struct probe {
  hg_client_config_t cfg;
  uint8_t sec[32];
  _Atomic int stop;
  double max_ms;
  int logins, failures, while_queued;
} probe_t;

/* The slow follower's apply_queued from /health (0 if no answer). */
static uint64_t slow_queued(void) {
  uint64_t q = health_u64(SLOW, "apply_queued");
  return q == UINT64_MAX ? 0 : q;
}

static void *probe_main(void *arg) {
  probe_t *p = arg;
  while (!atomic_load(&p->stop)) {
    hg_client_t *c = NULL;
    if (hg_client_create(&p->cfg, &c) != 0) {
      p->failures++;
      break;
    }
    uint64_t before = slow_queued();
    double t0 = du_now();
    int rc = hg_client_connect(c);
    double ms = (du_now() - t0) * 1000;
    uint64_t after = slow_queued();
    hg_client_destroy(c);
    if (rc != 0) p->failures++;
    else p->logins++;
    if (rc == 0 && before > 0 && after > 0) p->while_queued++;
    if (ms > p->max_ms) p->max_ms = ms;
    du_sleep_ms(10);
  }
  return NULL;
}

/* Sends IOC buys that find no seller (each is answered and leaves the
 * book empty) in chunks, reading every chunk's reports. */
static void burst(hg_client_t *c) {
  uint64_t next = 1;
  for (int sent = 0; sent < ORDERS; sent += CHUNK) {
    for (int i = 0; i < CHUNK; i++, next++) {
      hg_client_order_t o = {.instrument_id = INSTR,
                             .client_order_id = next,
                             .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                             .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                             .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC,
                             .has_price = true,
                             .price = 480 + (int64_t)(next % 20),
                             .qty = 1};
      uint64_t seq;
      assert_int_equal(hg_client_new_order(c, &o, &seq), 0);
    }
    int answered = 0;
    double end = du_now() + WAIT_S;
    while (answered < CHUNK) {
      if (du_now() > end) fail_msg("%d of %d orders answered in %d s", answered, CHUNK, WAIT_S);
      const Hourglass__V1__Envelope *e = NULL;
      int rc = hg_client_recv(c, 1000, &e);
      assert_true(rc >= 0);
      if (rc == 0) continue; /* a busy machine: until the deadline above */
      if (e->body_case != HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT) continue;
      uint64_t id = e->execution_report->client_order_id;
      if (id + CHUNK >= next && id < next &&
          e->execution_report->exec_type != HOURGLASS__V1__EXEC_TYPE__EXEC_NEW)
        answered++;
    }
  }
}

static void slow_follower_keeps_serving(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "capply"));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  assert_int_equal(du_cluster_keys(g_keys, SECRET_HEX), 0);
  assert_int_equal(du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes,
                                   sizeof g_nodes), 0);
  /* The two others elect a leader first: the slow node follows. */
  node_start(&g_n[0], 0);
  node_start(&g_n[1], 0);
  int leader = du_cluster_leader(g_n, 2, WAIT_S, NULL);
  assert_true(leader >= 0);
  node_start(&g_n[SLOW], 1);
  hg_client_t *op = client_at(leader, 1);
  assert_int_equal(hg_client_connect(op), 0);
  assert_int_equal(ch_cluster_market(op, 1024), 0);
  hg_client_destroy(op);
  /* The slow follower has the market: it knows the leader and applied it. */
  double end = du_now() + WAIT_S;
  uint64_t want = health_u64(leader, "committed_seq");
  uint64_t term[NODES];
  for (;;) {
    for (int i = 0; i < NODES; i++) term[i] = health_u64(i, "term");
    if (health_u64(SLOW, "committed_seq") == want && health_u64(SLOW, "last_seq") == want &&
        term[0] != UINT64_MAX && term[0] == term[1] && term[1] == term[2])
      break;
    if (du_now() > end) fail_msg("the slow follower did not catch up");
    du_sleep_ms(50);
  }

  static probe_t p;
  assert_int_equal(hg_client_parse_hex(SECRET_HEX, p.sec, sizeof p.sec), 32);
  hg_client_config_init(&p.cfg);
  p.cfg.port = (uint16_t)g_n[SLOW].client_port;
  p.cfg.key_id = 3; /* the risk viewer: served at a follower */
  p.cfg.secret = p.sec;
  p.cfg.secret_len = sizeof p.sec;
  p.cfg.timeout_ms = 10000;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, probe_main, &p), 0);

  hg_client_t *t = client_at(leader, 2);
  assert_int_equal(hg_client_connect(t), 0);
  double t0 = du_now();
  burst(t);
  double burst_ms = (du_now() - t0) * 1000;
  hg_client_destroy(t);

  /* Until the slow follower has applied the whole burst. */
  want = health_u64(leader, "committed_seq");
  end = du_now() + WAIT_S;
  for (;;) {
    uint64_t q = health_u64(SLOW, "apply_queued"); /* absent: checked below */
    if (health_u64(SLOW, "last_seq") == want && (q == 0 || q == UINT64_MAX)) break;
    if (du_now() > end) fail_msg("the slow follower did not apply the burst in %d s", WAIT_S);
    du_sleep_ms(20);
  }
  double applied_ms = (du_now() - t0) * 1000;
  atomic_store(&p.stop, 1);
  assert_int_equal(pthread_join(th, NULL), 0);
  uint64_t queued = du_metric(g_n[SLOW].http_port, "hourglass_cluster_apply_queued_entries_total");
  fprintf(stderr,
          "burst of %d orders: %.0f ms at the leader, applied by the slow follower after %.0f ms; "
          "%d logins there (%d while entries were queued), the longest %.1f ms; %" PRIu64
          " entries queued\n",
          ORDERS, burst_ms, applied_ms, p.logins, p.while_queued, p.max_ms, queued);
  assert_int_equal(p.failures, 0);
  assert_true(p.logins > 0);
  /* A loop that waited for room in the pipeline would queue nothing, and
   * would answer no login while entries are queued. */
  if (p.while_queued == 0)
    fail_msg("no login at the slow follower was answered while entries waited in its apply "
             "queue (%d logins)", p.logins);
  for (int i = 0; i < NODES; i++) assert_int_equal(health_u64(i, "term"), term[i]);
  /* The queue was used (else this test proves nothing). */
  assert_true(queued != UINT64_MAX && queued > 0);

  /* The same state at the same seq everywhere. */
  want = health_u64(leader, "committed_seq");
  for (int i = 0; i < NODES; i++) {
    end = du_now() + WAIT_S;
    while (health_u64(i, "last_seq") != want) {
      if (du_now() > end) fail_msg("node %d did not reach seq %" PRIu64, i + 1, want);
      du_sleep_ms(20);
    }
  }
  char seq[NODES][32], hash[NODES][80];
  for (int k = 0; k < NODES; k++) {
    int i = (leader + 1 + k) % NODES; /* the leader last: no transfer to wait for */
    assert_int_equal(du_stop(g_n[i].pid, SIGTERM, 60), 0);
    g_n[i].pid = 0;
    char *log = du_read(g_n[i].log);
    assert_non_null(log);
    assert_int_equal(du_field(log, "msg=\"stopped\"", "last_seq", seq[i], sizeof seq[i]), 0);
    assert_int_equal(du_field(log, "msg=\"stopped\"", "state_hash", hash[i], sizeof hash[i]), 0);
    free(log);
  }
  for (int i = 1; i < NODES; i++) {
    assert_string_equal(seq[i], seq[0]);
    assert_string_equal(hash[i], hash[0]);
  }
  if (strtoull(seq[0], NULL, 10) < ORDERS) fail_msg("last_seq %s", seq[0]);
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
      cmocka_unit_test_teardown(slow_follower_keeps_serving, du_kill_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
