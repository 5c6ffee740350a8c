/* A key's outbound stream is the same on every node of a Raft group: three
 * hourglassd processes on loopback; a trader without cancel-on-disconnect
 * enters orders that rest and fill, asks for an order's status and sends a
 * request the gateway refuses itself (held until committed, then
 * sequenced by every node at the same place); a second trader with
 * cancel-on-disconnect holds resting orders. The leader is killed
 * (SIGKILL) right after the last frame arrived. At the new leader the
 * first trader's LoginAck.next_seq is the seq after the last one it
 * received, and a retransmission from seq 1 returns every frame byte for
 * byte as the old leader sent it; the second trader's resting orders are
 * cancelled (its session ended with the old leader) with the reports in
 * its stream, and the first trader's orders rest on; so is the order of a
 * third trader of the first one's account, with cancel-on-disconnect. The killed node then
 * comes back (it rebuilds its state from the group and applies again the
 * entries whose results its outbound log already holds), the first trader
 * trades on, and leadership is transferred to the restarted node: there
 * the trader resumes with the next seq it expects and a retransmission
 * from seq 1 returns every frame byte for byte, none sequenced twice; the
 * third trader's cancel, applied there on top of a snapshot that held its
 * order, is in the third trader's stream as on the other nodes.
 * Usage: test_cluster_stream <hourglassd>. */
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
#include "gw_client.h"
#include "hourglass/client.h"
#include "test_keys.h"

static const char *g_bin; /* hourglassd, from argv[1] */

#define NODES 3
#define INSTR 1
#define MAX_FRAMES 256

static du_node_t g_n[NODES];
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];

/* The frames of one key's stream as received, by seq. */
typedef struct seen {
  uint8_t *frame[MAX_FRAMES];
  size_t len[MAX_FRAMES];
  uint64_t last; /* highest seq received */
} seen_t;

static void node_start(du_node_t *n) {
  /* Snapshots every 8 entries: a restart starts from one, with orders
   * resting in it. */
  static const char *const extra[] = {"pipeline.mode=loop", "cluster.election_timeout_ms=400",
                                      "cluster.snapshot_entries=8", NULL};
  if (du_node_start(n, g_bin, g_root, g_members, g_keys, extra) != 0)
    fail_msg("node %d not ready after 120 s", n->id);
}

/* A node rebuilds itself in place to load a snapshot installed by the
 * leader; any exit the test did not cause fails it. */
static void supervise(void) {
  if (du_cluster_supervise(g_n, NODES) < 0) fail_msg("a node exited unexpectedly");
}

/* The node taking orders, waiting up to 30 s; -1 if none. */
static int find_leader(void) { return du_cluster_leader(g_n, NODES, 120, supervise); }

static void setup_market(int leader) {
  uint8_t sec[32];
  ts_key_secret(1, sec);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = (uint16_t)g_n[leader].client_port;
  cfg.key_id = 1;
  cfg.secret = sec;
  cfg.secret_len = sizeof sec;
  cfg.timeout_ms = 5000;
  hg_client_t *op = NULL;
  assert_int_equal(hg_client_create(&cfg, &op), 0);
  assert_int_equal(hg_client_connect(op), 0);
  assert_int_equal(ch_list_contract(op), 0);
  for (uint32_t a = 1; a <= 2; a++) {
    uint64_t seq;
    assert_int_equal(hg_client_add_account(op, a, 1, &seq), 0);
    assert_int_equal(ch_response(op, seq), 0);
    assert_int_equal(hg_client_cash(op, a, 1000000000000ll, false, &seq), 0);
    assert_int_equal(ch_response(op, seq), 0);
  }
  hg_client_destroy(op);
}

/* Keeps a copy of c's last frame if it is sequenced; returns its seq (0:
 * none). Seqs arrive in order, without gaps. */
static uint64_t keep(gt_client_t *c, const env_t *e, seen_t *s) {
  if (!e->has_seq) return 0;
  assert_true(e->seq < MAX_FRAMES);
  assert_int_equal(e->seq, s->last + 1);
  s->frame[e->seq] = malloc(c->last_len);
  assert_non_null(s->frame[e->seq]);
  memcpy(s->frame[e->seq], c->in + c->last_off, c->last_len);
  s->len[e->seq] = c->last_len;
  s->last = e->seq;
  return e->seq;
}

/* Receives (keeping sequenced frames) until an execution report of
 * client order id clordid and exec type exec arrives; returns its order id. */
static uint64_t await_er(gt_client_t *c, seen_t *s, uint64_t clordid, int exec) {
  for (;;) {
    env_t *e = gt_recv(c, 5000);
    if (e == NULL) fail_msg("no report %d for clordid %" PRIu64, exec, clordid);
    keep(c, e, s);
    if (e->body_case == BODY(EXECUTION_REPORT) &&
        e->execution_report->client_order_id == clordid &&
        (int)e->execution_report->exec_type == exec)
      return e->execution_report->order_id;
  }
}

/* Receives (keeping sequenced frames) until a frame of body case want. */
static env_t *await_body(gt_client_t *c, seen_t *s, uint32_t want) {
  for (;;) {
    env_t *e = gt_recv(c, 5000);
    if (e == NULL) fail_msg("no frame of body %u", want);
    keep(c, e, s);
    if ((uint32_t)e->body_case == want) return e;
  }
}

/* Asks for frames 1..s->last and checks each byte for byte against s. */
static void expect_replay(gt_client_t *c, const seen_t *s) {
  assert_int_equal(gt_retransmit(c, 1, (uint32_t)s->last), 0);
  env_t *e = gt_expect(c, BODY(RETRANSMISSION), 5000);
  assert_non_null(e);
  assert_false(e->retransmission->has_reason && e->retransmission->reason != 0);
  for (uint64_t want = 1; want <= s->last; want++) {
    e = gt_recv(c, 5000);
    assert_non_null(e);
    if (!e->has_seq) { /* heartbeats may interleave */
      want--;
      continue;
    }
    assert_int_equal(e->seq, want);
    assert_int_equal(c->last_len, s->len[want]);
    assert_memory_equal(c->in + c->last_off, s->frame[want], s->len[want]);
  }
}

/* Logs c in as key at port and makes s the key's whole stream so far, as
 * the node retransmits it. */
static void capture(gt_client_t *c, uint16_t port, uint64_t key, seen_t *s) {
  uint64_t next = gt_login(c, port, key, 0, 0);
  assert_true(next >= 1);
  for (uint64_t i = 0; i < MAX_FRAMES; i++) {
    free(s->frame[i]);
    s->frame[i] = NULL;
  }
  s->last = 0;
  if (next == 1) return;
  assert_int_equal(gt_retransmit(c, 1, (uint32_t)(next - 1)), 0);
  env_t *e = gt_expect(c, BODY(RETRANSMISSION), 5000);
  assert_non_null(e);
  while (s->last < next - 1) {
    e = gt_recv(c, 5000);
    assert_non_null(e);
    keep(c, e, s);
  }
}

/* Waits up to 30 s until node index i has applied what the leader at
 * index leader had committed when asked; meanwhile node i's /health
 * never shows an applied index ahead of its commit index. */
static void await_caught_up(int i, int leader) {
  char *h = du_get(g_n[leader].http_port, "/health");
  uint64_t want = du_json_u64(h, "commit_index");
  free(h);
  assert_true(want != UINT64_MAX);
  for (double end = du_now() + 30;;) {
    h = du_get(g_n[i].http_port, "/health");
    uint64_t got = du_json_u64(h, "applied_index");
    uint64_t commit = du_json_u64(h, "commit_index");
    free(h);
    /* Every entry a node applied is committed, and /health says so even
     * between two of the node's status ticks. */
    if (got != UINT64_MAX && got > commit)
      fail_msg("node %d: /health applied_index %" PRIu64 " > commit_index %" PRIu64, g_n[i].id,
               got, commit);
    if (got != UINT64_MAX && got >= want) return;
    if (du_now() > end) fail_msg("node %d applied %" PRIu64 " of %" PRIu64 " after 30 s", g_n[i].id,
                                 got, want);
    supervise();
    du_sleep_ms(100);
  }
}

/* Leadership to node index to, asked of the leader at index from (the
 * operator's ClusterRequest; answered once a new leader is elected). */
static void transfer(int from, int to) {
  static gt_client_t op;
  assert_true(gt_login(&op, (uint16_t)g_n[from].client_port, 1, 0, 0) >= 1);
  Hourglass__V1__ClusterRequest cr = HOURGLASS__V1__CLUSTER_REQUEST__INIT;
  cr.op = HOURGLASS__V1__CLUSTER_OP__CLUSTER_TRANSFER;
  cr.has_id = 1;
  cr.id = (uint32_t)g_n[to].id;
  env_t env = HOURGLASS__V1__ENVELOPE__INIT;
  env.body_case = BODY(CLUSTER_REQUEST);
  env.cluster_request = &cr;
  assert_int_equal(gt_send(&op, &env), 0);
  env_t *e = gt_expect(&op, BODY(CLUSTER_STATUS), 30000);
  assert_non_null(e);
  if (e->cluster_status->reason != 0)
    fail_msg("transfer to node %d: %u %s", g_n[to].id, e->cluster_status->reason,
             e->cluster_status->text != NULL ? e->cluster_status->text : "");
  gt_close(&op);
}

/* Whether order oid rests at the node c is logged in to. */
static bool order_live(gt_client_t *c, uint64_t oid) {
  assert_int_equal(gt_status(c, INSTR, oid), 0);
  env_t *e = gt_expect(c, BODY(ORDER_STATUS), 5000);
  assert_non_null(e);
  assert_int_equal(e->order_status->order_id, oid);
  return e->order_status->live;
}

static void stream_survives_failover(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "cstream"));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  char h1[65], h2[65], h3[65], h4[65], h5[65], keys[600];
  ts_key_secret_hex(1, h1);
  ts_key_secret_hex(2, h2);
  ts_key_secret_hex(3, h3);
  ts_key_secret_hex(4, h4);
  ts_key_secret_hex(5, h5);
  snprintf(keys, sizeof keys,
           "1 operator 0 0 %s\n2 trader 1 1 %s\n3 trader 2 1 %s\n4 trader 1 1 %s\n"
           "5 trader 1 1 %s\n", h1, h2, h3, h4, h5);
  assert_int_equal(du_write_file(g_keys, keys), 0);
  assert_int_equal(chmod(g_keys, 0600), 0);
  assert_int_equal(du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes,
                                   sizeof g_nodes), 0);
  for (int i = 0; i < NODES; i++) node_start(&g_n[i]);
  int leader = find_leader();
  assert_true(leader >= 0);
  setup_market(leader);

  static seen_t s2, s3, s4, s5;
  static gt_client_t t2, t3, t4, t5;
  uint16_t port = (uint16_t)g_n[leader].client_port;
  /* Key 4 (account 1, as key 2) rests a buy that fills only at the end. */
  assert_int_equal(gt_login(&t4, port, 4, 0, 0), 1);
  assert_int_equal(gt_new_order(&t4, INSTR, 41, 0, 485, 2, 1), 0);
  uint64_t o41 = await_er(&t4, &s4, 41, EXEC(NEW));
  gt_close(&t4);
  /* Key 5 (account 1 too, cancel-on-disconnect) rests a buy that the
   * next leader's SessionsEnded cancels. */
  assert_int_equal(gt_login(&t5, port, 5, 1, 0), 1);
  assert_int_equal(gt_new_order(&t5, INSTR, 51, 0, 470, 1, 1), 0);
  uint64_t o51 = await_er(&t5, &s5, 51, EXEC(NEW));
  assert_int_equal(gt_login(&t2, port, 2, 0, 0), 1); /* no cancel-on-disconnect */
  assert_int_equal(gt_login(&t3, port, 3, 1, 0), 1); /* cancel-on-disconnect */
  /* Key 2 rests two buys; key 3 sells into one and rests two sells. */
  assert_int_equal(gt_new_order(&t2, INSTR, 21, 0, 490, 5, 1), 0);
  uint64_t o21 = await_er(&t2, &s2, 21, EXEC(NEW));
  assert_int_equal(gt_new_order(&t2, INSTR, 22, 0, 495, 3, 1), 0);
  uint64_t o22 = await_er(&t2, &s2, 22, EXEC(NEW));
  assert_int_equal(gt_new_order(&t3, INSTR, 31, 1, 495, 2, 1), 0);
  await_er(&t3, &s3, 31, EXEC(FILL));
  assert_int_equal(gt_new_order(&t3, INSTR, 32, 1, 520, 4, 1), 0);
  uint64_t o32 = await_er(&t3, &s3, 32, EXEC(NEW));
  assert_int_equal(gt_new_order(&t3, INSTR, 33, 1, 530, 1, 1), 0);
  uint64_t o33 = await_er(&t3, &s3, 33, EXEC(NEW));
  await_er(&t2, &s2, 22, EXEC(FILL)); /* key 2's maker fill */
  /* Frames the gateway decides itself: a query's reply and a refusal. */
  assert_int_equal(gt_status(&t2, INSTR, o21), 0);
  env_t *e = await_body(&t2, &s2, BODY(ORDER_STATUS));
  assert_true(e->order_status->live);
  assert_int_equal(gt_new_order(&t2, 0, 23, 0, 490, 1, 1), 0); /* instrument 0: refused */
  e = await_body(&t2, &s2, BODY(EXECUTION_REPORT));
  assert_int_equal(e->execution_report->exec_type, EXEC(REJECTED));
  assert_int_equal(e->execution_report->reason, REJ(INVALID_REQUEST));
  /* And one the engine refuses (an unknown order). */
  assert_int_equal(gt_cancel(&t2, INSTR, 999999), 0);
  e = await_body(&t2, &s2, BODY(EXECUTION_REPORT));
  assert_int_equal(e->execution_report->exec_type, EXEC(REJECTED));
  assert_true(s2.last >= 6);
  uint64_t last3 = s3.last;

  /* Every node holds the whole log before the leader dies (on a loaded
   * machine a slow follower could otherwise need the new leader's
   * snapshot, and lack the frames before it). */
  for (int i = 0; i < NODES; i++)
    if (i != leader) await_caught_up(i, leader);
  /* The leader dies with both sessions on it. */
  kill(g_n[leader].pid, SIGKILL);
  du_stop(g_n[leader].pid, 0, 10);
  int dead = leader;
  g_n[dead].pid = 0;
  gt_close(&t2);
  gt_close(&t3);
  gt_close(&t5);
  leader = find_leader();
  assert_true(leader >= 0 && leader != dead);
  port = (uint16_t)g_n[leader].client_port;

  /* Key 2 resumes with the next seq it expects; every frame the old
   * leader sent comes back byte for byte. */
  assert_int_equal(gt_login(&t2, port, 2, 0, 0), s2.last + 1);
  expect_replay(&t2, &s2);
  /* Key 2's orders rest on. */
  assert_true(order_live(&t2, o21));
  assert_true(order_live(&t2, o22));

  /* Key 3's session ended with the old leader: its resting orders are
   * cancelled, the reports in its stream right after the last frame it
   * saw (sent before the login, or live if the login came first). */
  uint64_t next3 = gt_login(&t3, port, 3, 0, 0);
  assert_true(next3 > last3 && next3 <= last3 + 3);
  if (next3 > last3 + 1) {
    assert_int_equal(gt_retransmit(&t3, last3 + 1, (uint32_t)(next3 - 1 - last3)), 0);
    e = gt_expect(&t3, BODY(RETRANSMISSION), 5000);
    assert_non_null(e);
    assert_false(e->retransmission->has_reason && e->retransmission->reason != 0);
  }
  uint64_t cancelled[2] = {0, 0};
  for (int got = 0; got < 2;) {
    e = gt_recv(&t3, 5000);
    assert_non_null(e);
    if (!e->has_seq) continue;
    assert_true(e->seq == last3 + 1 || e->seq == last3 + 2);
    assert_int_equal(e->body_case, BODY(EXECUTION_REPORT));
    assert_int_equal(e->execution_report->exec_type, EXEC(CANCELLED));
    assert_int_equal(cancelled[e->seq - last3 - 1], 0);
    cancelled[e->seq - last3 - 1] = e->execution_report->order_id;
    got++;
  }
  assert_true((cancelled[0] == o32 && cancelled[1] == o33) ||
              (cancelled[0] == o33 && cancelled[1] == o32));
  assert_false(order_live(&t3, o32));
  gt_close(&t2);
  gt_close(&t3);
  /* Key 5's order was cancelled by the same SessionsEnded: the report is
   * the last frame of key 5's stream. */
  capture(&t5, port, 5, &s5);
  assert_int_equal(s5.last, 2);
  assert_int_equal(gt_retransmit(&t5, 2, 1), 0);
  assert_non_null(gt_expect(&t5, BODY(RETRANSMISSION), 5000));
  e = gt_expect(&t5, BODY(EXECUTION_REPORT), 5000);
  assert_non_null(e);
  assert_int_equal(e->seq, 2);
  assert_int_equal(e->execution_report->exec_type, EXEC(CANCELLED));
  assert_int_equal(e->execution_report->order_id, o51);
  gt_close(&t5);

  /* The killed node comes back and applies the group's entries again;
   * key 2 trades on at the second leader. */
  node_start(&g_n[dead]);
  capture(&t2, port, 2, &s2);
  assert_int_equal(gt_new_order(&t2, INSTR, 24, 0, 480, 1, 1), 0);
  await_er(&t2, &s2, 24, EXEC(NEW));
  gt_close(&t2);
  /* The restarted node leads: key 2's stream there is the same. */
  await_caught_up(dead, leader);
  transfer(leader, dead);
  int now = -1;
  for (int tries = 0; tries < 100 && (now = find_leader()) != dead; tries++) usleep(100000);
  assert_int_equal(now, dead);
  port = (uint16_t)g_n[dead].client_port;
  assert_int_equal(gt_login(&t2, port, 2, 0, 0), s2.last + 1);
  expect_replay(&t2, &s2);
  gt_close(&t2);
  /* Its snapshot held key 5's session-scoped order too: the cancel it
   * applied from the second leader's SessionsEnded went to key 5, which
   * entered the order, as on every other node. */
  assert_int_equal(gt_login(&t5, port, 5, 0, 0), s5.last + 1);
  expect_replay(&t5, &s5);
  gt_close(&t5);
  /* The restarted node started from a snapshot holding key 4's order: a
   * sell through the book fills it, and the report goes to key 4, which
   * entered it, as on every other node (not to account 1's first key). */
  assert_true(gt_login(&t3, port, 3, 0, 0) >= 1);
  assert_int_equal(gt_new_order(&t3, INSTR, 34, 1, 485, 8, 1), 0);
  (void)gt_expect(&t3, BODY(EXECUTION_REPORT), 5000);
  gt_close(&t3);
  assert_true(gt_login(&t4, port, 4, 0, 0) > s4.last + 1);
  assert_int_equal(gt_retransmit(&t4, s4.last + 1, 1), 0);
  e = gt_expect(&t4, BODY(RETRANSMISSION), 5000);
  assert_non_null(e);
  assert_false(e->retransmission->has_reason && e->retransmission->reason != 0);
  e = gt_expect(&t4, BODY(EXECUTION_REPORT), 5000);
  assert_non_null(e);
  assert_int_equal(e->seq, s4.last + 1);
  assert_int_equal(e->execution_report->order_id, o41);
  assert_int_equal(e->execution_report->exec_type, EXEC(FILL));
  gt_close(&t4);
  for (uint64_t i = 0; i < MAX_FRAMES; i++) {
    free(s2.frame[i]);
    free(s3.frame[i]);
    free(s4.frame[i]);
    free(s5.frame[i]);
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
      cmocka_unit_test_teardown(stream_survives_failover, du_kill_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
