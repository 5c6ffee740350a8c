/*
 * test_replica.c - a Raft group of real replicas in one process: three (and
 * a fourth joining) hg_replica_t on one libuv loop, talking TCP on 127.0.0.1
 * and keeping their files in temporary directories.
 *
 * Each node's state machine is a hash chain: digest = SHA-256(digest ||
 * index || entry), so two nodes agree on the digest only if they applied the
 * same entries at the same indexes in the same order. A snapshot is the
 * 8-byte index and the 32-byte digest.
 *
 * The TLS tests run the same groups over the TLS transport with
 * certificates made by tests/support/tls_certs.c, and talk to a node's
 * Raft port as a stranger (garbage, a certificate that names another node).
 *
 * Every wait is bounded (run_until); a test that cannot reach its state fails
 * instead of hanging. The bounds are generous and nothing asserts how long
 * a step took: the tests must pass on a busy machine, where the process may
 * not run for a second at a time (hence an election timeout well above
 * such a pause, so that the leader does not change under a test's feet).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "hourglass/replica.h"
#include "hourglass/sha256.h"
#include "tls_certs.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#define ELECTION_MS 3000 /* randomized by libraft to 1x..2x */
#define WAIT_MS 60000    /* how long a test waits for a state it expects */
#define MAX_NODES 4
#define MAX_DONE 4096

typedef struct node {
  uint64_t id;
  char dir[256];
  char address[32];
  hg_replica_t *r;           /* NULL when not open */
  uint8_t digest[HG_SHA256_DIGEST_LEN];
  uint64_t applied;          /* last index applied or restored */
  uint64_t n_applied;        /* apply calls since open */
  unsigned restores;         /* restore calls since open */
  uint8_t snap[8 + HG_SHA256_DIGEST_LEN];
  int snap_held;             /* taken and not yet released */
  unsigned snaps_taken;
  int order_errors;          /* apply with an index not above the last */
  char cert[300], key[300], ca[300]; /* TLS files; "" = plain TCP */
} node_t;

typedef struct cluster {
  uv_loop_t loop;
  uv_timer_t tick;
  char root[128];
  node_t nodes[MAX_NODES];
  hg_replica_member_t members[3];
  unsigned snapshot_threshold;
  unsigned snapshot_trailing;
  /* Proposal outcomes, by proposal number. */
  int status[MAX_DONE];
  uint64_t index[MAX_DONE];
  bool done[MAX_DONE];
  unsigned n_proposed, n_done, n_ok;
  unsigned closes;
} cluster_t;

typedef struct proposal {
  cluster_t *c;
  unsigned n;
} proposal_t;

static proposal_t proposals[MAX_DONE];

static void test_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  if (level >= HG_LOG_WARN || getenv("HG_TEST_VERBOSE") != NULL)
    fprintf(stderr, "[%s] %s\n", hg_log_level_name(level), msg);
}

/* ---- the hash-chain state machine ------------------------------------- */

static int sm_apply(void *ctx, uint64_t index, const void *data, size_t len) {
  node_t *n = ctx;
  if (index <= n->applied) n->order_errors++;
  uint8_t le[8];
  hg_st64(le, index);
  hg_sha256_t h;
  hg_sha256_init(&h);
  hg_sha256_update(&h, n->digest, sizeof n->digest);
  hg_sha256_update(&h, le, sizeof le);
  hg_sha256_update(&h, data, len);
  hg_sha256_final(&h, n->digest);
  n->applied = index;
  n->n_applied++;
  return 0;
}

static int sm_take(void *ctx, uint64_t index, const void **data, size_t *len) {
  node_t *n = ctx;
  if (n->snap_held) return HG_EBUSY;
  /* libraft's own entries (configuration changes) take indexes too: the
   * snapshot index may be past the last entry this machine saw. */
  assert_true(index >= n->applied);
  hg_st64(n->snap, index);
  memcpy(n->snap + 8, n->digest, sizeof n->digest);
  n->snap_held = 1;
  n->snaps_taken++;
  *data = n->snap;
  *len = sizeof n->snap;
  return 0;
}

static void sm_release(void *ctx, const void *data, size_t len) {
  node_t *n = ctx;
  assert_ptr_equal(data, n->snap);
  assert_int_equal(len, sizeof n->snap);
  n->snap_held = 0;
}

static int sm_restore(void *ctx, uint64_t index, const void *data, size_t len) {
  node_t *n = ctx;
  if (len != sizeof n->snap || hg_ld64(data) != index) return HG_ECORRUPT;
  memcpy(n->digest, (const uint8_t *)data + 8, sizeof n->digest);
  n->applied = index;
  n->restores++;
  return 0;
}

/* ---- cluster plumbing ---------------------------------------------------- */

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t alen = sizeof a;
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
  close(fd);
  return ntohs(a.sin_port);
}

static void on_tick(uv_timer_t *t) { (void)t; }

static cluster_t *cluster_new(unsigned threshold, unsigned trailing) {
  cluster_t *c = calloc(1, sizeof *c);
  assert_non_null(c);
  assert_int_equal(uv_loop_init(&c->loop), 0);
  assert_int_equal(uv_timer_init(&c->loop, &c->tick), 0);
  /* Wakes uv_run(UV_RUN_ONCE) so run_until can check its deadline. */
  assert_int_equal(uv_timer_start(&c->tick, on_tick, 10, 10), 0);
  snprintf(c->root, sizeof c->root, "/tmp/hg_replica_XXXXXX");
  assert_non_null(mkdtemp(c->root));
  c->snapshot_threshold = threshold;
  c->snapshot_trailing = trailing;
  for (unsigned i = 0; i < MAX_NODES; i++) {
    node_t *n = &c->nodes[i];
    n->id = i + 1;
    snprintf(n->dir, sizeof n->dir, "%s/n%u", c->root, i + 1);
    assert_int_equal(mkdir(n->dir, 0700), 0);
    snprintf(n->address, sizeof n->address, "127.0.0.1:%d", free_port());
    if (i < 3) c->members[i] = (hg_replica_member_t){n->id, n->address};
  }
  return c;
}

/* Opens node i with a fresh (empty) state machine; joiner: no member list. */
static void node_open(cluster_t *c, unsigned i, bool joiner) {
  node_t *n = &c->nodes[i];
  assert_null(n->r);
  memset(n->digest, 0, sizeof n->digest);
  n->applied = n->n_applied = 0;
  n->restores = 0;
  hg_replica_config_t cfg = {
      .id = n->id,
      .dir = n->dir,
      .address = n->address,
      .members = joiner ? NULL : c->members,
      .n_members = joiner ? 0 : 3,
      .election_timeout_ms = ELECTION_MS,
      .heartbeat_timeout_ms = ELECTION_MS / 10,
      .snapshot_threshold = c->snapshot_threshold,
      .snapshot_trailing = c->snapshot_trailing,
      .apply = sm_apply,
      .snapshot_take = sm_take,
      .snapshot_release = sm_release,
      .snapshot_restore = sm_restore,
      .ctx = n,
      .log = test_log,
  };
  if (n->cert[0] != '\0') {
    cfg.tls_cert = n->cert;
    cfg.tls_key = n->key;
    cfg.tls_ca = n->ca;
  }
  int rc = hg_replica_open(&c->loop, &cfg, &n->r);
  assert_int_equal(rc, 0);
  assert_non_null(n->r);
}

static void on_closed(void *ctx, int status) {
  cluster_t *c = ctx;
  assert_int_equal(status, 0);
  c->closes++;
}

static bool run_until(cluster_t *c, bool (*pred)(cluster_t *, void *), void *arg,
                      unsigned timeout_ms) {
  uv_update_time(&c->loop);
  uint64_t deadline = uv_now(&c->loop) + timeout_ms;
  while (!pred(c, arg)) {
    if (uv_now(&c->loop) >= deadline) return false;
    uv_run(&c->loop, UV_RUN_ONCE);
  }
  return true;
}

static bool closes_reached(cluster_t *c, void *arg) {
  return c->closes >= *(unsigned *)arg;
}

static void node_close(cluster_t *c, unsigned i) {
  node_t *n = &c->nodes[i];
  assert_non_null(n->r);
  unsigned want = c->closes + 1;
  hg_replica_close(n->r, on_closed, c);
  n->r = NULL;
  assert_true(run_until(c, closes_reached, &want, WAIT_MS));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void cluster_free(cluster_t *c) {
  for (unsigned i = 0; i < MAX_NODES; i++)
    if (c->nodes[i].r != NULL) node_close(c, i);
  uv_close((uv_handle_t *)&c->tick, NULL);
  uv_run(&c->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&c->loop), 0);
  for (unsigned i = 0; i < MAX_NODES; i++) assert_int_equal(c->nodes[i].order_errors, 0);
  assert_int_equal(nftw(c->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
  free(c);
}

/* The one node that says it leads, or -1 (none, or more than one). */
static int leader_of(cluster_t *c) {
  int found = -1;
  for (unsigned i = 0; i < MAX_NODES; i++) {
    if (c->nodes[i].r == NULL || hg_replica_role(c->nodes[i].r) != HG_REPLICA_LEADER)
      continue;
    if (found >= 0) return -1;
    found = (int)i;
  }
  return found;
}

static bool has_leader(cluster_t *c, void *arg) {
  (void)arg;
  return leader_of(c) >= 0;
}

static int wait_leader(cluster_t *c) {
  assert_true(run_until(c, has_leader, NULL, WAIT_MS));
  return leader_of(c);
}

static void on_done(void *ctx, int status, uint64_t index) {
  proposal_t *p = ctx;
  cluster_t *c = p->c;
  assert_false(c->done[p->n]);
  c->done[p->n] = true;
  c->status[p->n] = status;
  c->index[p->n] = index;
  c->n_done++;
  if (status == 0) c->n_ok++;
}

/* Entry k: 64..319 bytes, content a function of k. */
static size_t make_entry(unsigned k, uint8_t *buf) {
  size_t len = 64 + (k * 37u) % 256;
  for (size_t j = 0; j < len; j++) buf[j] = (uint8_t)(k * 131u + j * 7u);
  return len;
}

static int propose_one(cluster_t *c, int leader) {
  assert_true(c->n_proposed < MAX_DONE);
  uint8_t buf[320];
  unsigned k = c->n_proposed;
  size_t len = make_entry(k, buf);
  proposals[k] = (proposal_t){c, k};
  int rc = hg_replica_propose(c->nodes[leader].r, buf, len, on_done, &proposals[k]);
  if (rc == 0) c->n_proposed++;
  return rc;
}

static bool all_done(cluster_t *c, void *arg) {
  (void)arg;
  return c->n_done == c->n_proposed;
}

/* Proposes n entries on the leader and waits for all to commit. */
static void propose_and_commit(cluster_t *c, int leader, unsigned n) {
  unsigned first = c->n_proposed;
  for (unsigned i = 0; i < n; i++) assert_int_equal(propose_one(c, leader), 0);
  assert_true(run_until(c, all_done, NULL, 60000));
  for (unsigned k = first; k < c->n_proposed; k++) {
    assert_int_equal(c->status[k], 0);
    if (k > 0) assert_true(c->index[k] > c->index[k - 1]);
  }
}

/* Every open node has applied up to the leader's applied index. */
static bool converged(cluster_t *c, void *arg) {
  (void)arg;
  int l = leader_of(c);
  if (l < 0) return false;
  uint64_t target = hg_replica_applied_index(c->nodes[l].r);
  for (unsigned i = 0; i < MAX_NODES; i++)
    if (c->nodes[i].r != NULL && c->nodes[i].applied < target) return false;
  return true;
}

static void assert_same_state(cluster_t *c) {
  assert_true(run_until(c, converged, NULL, WAIT_MS));
  int l = leader_of(c);
  for (unsigned i = 0; i < MAX_NODES; i++) {
    node_t *n = &c->nodes[i];
    if (n->r == NULL) continue;
    assert_int_equal(n->applied, c->nodes[l].applied);
    assert_memory_equal(n->digest, c->nodes[l].digest, HG_SHA256_DIGEST_LEN);
    assert_true(hg_replica_applied_index(n->r) >= n->applied);
  }
}

/* The leader's progress rows say every member has the last proposal. The
 * leader learns a follower's match index from its append result, which may
 * arrive after the follower has applied: so this is waited for. */
static bool progress_caught_up(cluster_t *c, void *arg) {
  unsigned want = *(unsigned *)arg;
  int l = leader_of(c);
  if (l < 0) return false;
  hg_replica_progress_t prog[MAX_NODES];
  size_t n = hg_replica_progress(c->nodes[l].r, prog, MAX_NODES);
  if (n != want) return false;
  for (size_t i = 0; i < n; i++)
    if (!prog[i].voter || prog[i].match_index < c->index[c->n_proposed - 1]) return false;
  return true;
}

static void open_three(cluster_t *c) {
  for (unsigned i = 0; i < 3; i++) node_open(c, i, false);
}

/* Three nodes that have elected a leader (*leader) and all applied n
 * entries. */
static cluster_t *group_with_entries(unsigned threshold, unsigned trailing,
                                     unsigned n, int *leader) {
  cluster_t *c = cluster_new(threshold, trailing);
  open_three(c);
  *leader = wait_leader(c);
  propose_and_commit(c, *leader, n);
  assert_same_state(c);
  return c;
}

/* ---- tests ---------------------------------------------------------------- */

static void on_transfer(void *ctx, int status) {
  int *out = ctx;
  *out = status;
}

static bool int_set(cluster_t *c, void *arg) {
  (void)c;
  return *(int *)arg != 1;
}

/* Elect, replicate 1,000 entries, fail the leader over, restart it on its
 * directory, hand leadership back to it. */
static void test_replicate_failover_restart(void **state) {
  (void)state;
  cluster_t *c = cluster_new(0, 0);
  open_three(c);
  int l = wait_leader(c);
  assert_true(hg_replica_term(c->nodes[l].r) >= 1);

  propose_and_commit(c, l, 1000);
  assert_same_state(c);
  for (unsigned i = 0; i < 3; i++) {
    assert_int_equal(c->nodes[i].n_applied, 1000);
    assert_true(hg_replica_commit_index(c->nodes[i].r) >= c->index[999]);
  }
  assert_int_equal(c->nodes[l].applied, hg_replica_last_index(c->nodes[l].r));

  /* A follower refuses and names the leader. */
  int f = (l + 1) % 3;
  uint8_t one = 1;
  proposals[0] = (proposal_t){c, 0};
  assert_int_equal(hg_replica_propose(c->nodes[f].r, &one, 1, on_done, &proposals[0]),
                   HG_EPERM);
  uint64_t lid = 0;
  const char *laddr = NULL;
  hg_replica_leader(c->nodes[f].r, &lid, &laddr);
  assert_int_equal(lid, c->nodes[l].id);
  assert_non_null(laddr);
  assert_string_equal(laddr, c->nodes[l].address);

  /* Leader progress: every member has everything. */
  unsigned three = 3;
  assert_true(run_until(c, progress_caught_up, &three, WAIT_MS));
  hg_replica_progress_t prog[4];
  assert_int_equal(hg_replica_progress(c->nodes[f].r, prog, 4), 3);
  assert_int_equal(prog[0].match_index, 0);

  /* Stop the leader: another takes over and the group goes on. */
  int old = l;
  uint64_t old_term = hg_replica_term(c->nodes[l].r);
  node_close(c, (unsigned)old);
  l = wait_leader(c);
  assert_true(l != old);
  assert_true(hg_replica_term(c->nodes[l].r) > old_term);
  propose_and_commit(c, l, 200);
  assert_same_state(c);

  /* The old leader restarts on its directory and catches up. */
  node_open(c, (unsigned)old, false);
  assert_same_state(c);
  assert_true(c->nodes[old].applied >= c->index[c->n_proposed - 1]);

  /* Hand leadership back to it. */
  int st = 1;
  assert_int_equal(hg_replica_transfer(c->nodes[l].r, c->nodes[old].id, on_transfer, &st), 0);
  assert_int_equal(hg_replica_transfer(c->nodes[l].r, c->nodes[old].id, on_transfer, &st),
                   HG_EBUSY);
  assert_true(run_until(c, int_set, &st, WAIT_MS));
  assert_int_equal(st, 0);
  assert_true(run_until(c, has_leader, NULL, WAIT_MS));
  assert_int_equal(leader_of(c), old);
  propose_and_commit(c, old, 50);
  assert_same_state(c);

  cluster_free(c);
}

static void on_change(void *ctx, int status) {
  int *out = ctx;
  *out = status;
}

/* A fourth node, added after the log was compacted, catches up by snapshot
 * install and becomes a voter; then it is removed again. */
static void test_snapshot_install_new_member(void **state) {
  (void)state;
  int l;
  cluster_t *c = group_with_entries(64, 8, 400, &l);
  assert_true(c->nodes[l].snaps_taken > 0);

  node_open(c, 3, true);
  assert_int_equal(hg_replica_role(c->nodes[3].r), HG_REPLICA_FOLLOWER);
  int st = 1;
  assert_int_equal(hg_replica_add(c->nodes[3].r, 4, c->nodes[3].address, on_change, &st),
                   HG_EPERM);
  assert_int_equal(hg_replica_add(c->nodes[l].r, 4, c->nodes[3].address, on_change, &st), 0);
  assert_int_equal(hg_replica_add(c->nodes[l].r, 4, c->nodes[3].address, on_change, &st),
                   HG_EBUSY);
  assert_true(run_until(c, int_set, &st, WAIT_MS));
  assert_int_equal(st, 0);
  l = leader_of(c);
  assert_true(l >= 0 && l < 3);
  propose_and_commit(c, l, 100);
  assert_same_state(c);
  assert_true(c->nodes[3].restores >= 1);  /* came by snapshot, not by log */
  assert_true(c->nodes[3].n_applied < c->n_proposed);

  unsigned four = 4;
  assert_true(run_until(c, progress_caught_up, &four, WAIT_MS));
  hg_replica_progress_t prog[4];

  st = 1;
  assert_int_equal(hg_replica_remove(c->nodes[l].r, 4, on_change, &st), 0);
  assert_true(run_until(c, int_set, &st, WAIT_MS));
  assert_int_equal(st, 0);
  assert_int_equal(hg_replica_progress(c->nodes[l].r, prog, 4), 3);
  cluster_free(c);
}

static bool snap_released(cluster_t *c, void *arg) {
  return !c->nodes[*(int *)arg].snap_held;
}

/* hg_replica_set_snapshot_threshold: the next snapshot comes when the new
 * threshold says, and the old one holds again once it is set back. */
static void test_snapshot_threshold_changes(void **state) {
  (void)state;
  int l;
  cluster_t *c = group_with_entries(100000, 8, 20, &l);
  node_t *n = &c->nodes[l];
  assert_int_equal(n->snaps_taken, 0);
  hg_replica_set_snapshot_threshold(n->r, 1); /* ask after the next entry */
  propose_and_commit(c, l, 1);
  assert_int_equal(n->snaps_taken, 1);
  assert_true(run_until(c, snap_released, &l, WAIT_MS));
  hg_replica_set_snapshot_threshold(n->r, 100000);
  propose_and_commit(c, l, 30);
  assert_int_equal(n->snaps_taken, 1);
  hg_replica_set_snapshot_threshold(n->r, 0); /* 0 is 1 */
  propose_and_commit(c, l, 1);
  assert_int_equal(n->snaps_taken, 2);
  assert_same_state(c);
  cluster_free(c);
}

/* Node *arg no longer leads and every proposal is done. */
static bool stepped_down(cluster_t *c, void *arg) {
  node_t *n = &c->nodes[*(int *)arg];
  return hg_replica_role(n->r) != HG_REPLICA_LEADER && c->n_done == c->n_proposed;
}

/* A leader cut off from both followers never reports a proposal committed,
 * and steps down. */
static void test_minority_never_commits(void **state) {
  (void)state;
  int l;
  cluster_t *c = group_with_entries(0, 0, 10, &l);
  for (unsigned i = 0; i < 3; i++)
    if ((int)i != l) node_close(c, i);
  uint64_t commit = hg_replica_commit_index(c->nodes[l].r);

  unsigned first = c->n_proposed;
  unsigned accepted = 0;
  for (unsigned i = 0; i < 20; i++)
    if (propose_one(c, l) == 0) accepted++;
  assert_true(accepted > 0);  /* it still believed it led */

  /* Nothing commits; after an election timeout the leader steps down, which
   * fails every pending proposal as "outcome unknown". */
  assert_true(run_until(c, stepped_down, &l, WAIT_MS));
  assert_int_equal(c->n_done, c->n_proposed);
  for (unsigned k = first; k < c->n_proposed; k++)
    assert_int_equal(c->status[k], HG_EUNAVAIL);
  assert_int_equal(hg_replica_commit_index(c->nodes[l].r), commit);
  assert_int_not_equal(hg_replica_role(c->nodes[l].r), HG_REPLICA_LEADER);
  proposals[0] = (proposal_t){c, 0};
  uint8_t one = 1;
  assert_int_equal(hg_replica_propose(c->nodes[l].r, &one, 1, on_done, &proposals[0]),
                   HG_EPERM);

  cluster_free(c);
}

/* Node 1's config for open to judge: the three members, no log, no TLS. */
static hg_replica_config_t node1_config(cluster_t *c) {
  node_t *n = &c->nodes[0];
  return (hg_replica_config_t){
      .id = 1,
      .dir = n->dir,
      .address = n->address,
      .members = c->members,
      .n_members = 3,
      .apply = sm_apply,
      .snapshot_take = sm_take,
      .snapshot_restore = sm_restore,
      .ctx = n,
  };
}

static void test_open_rejects_bad_config(void **state) {
  (void)state;
  cluster_t *c = cluster_new(0, 0);
  node_t *n = &c->nodes[0];
  hg_replica_t *r = (hg_replica_t *)1;
  hg_replica_config_t cfg = node1_config(c);
  cfg.id = 9; /* not in the member list */
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), HG_EINVAL);
  assert_null(r);
  cfg.id = 1;
  cfg.apply = NULL;
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), HG_EINVAL);
  cfg.apply = sm_apply;
  hg_replica_member_t dup[2] = {{1, n->address}, {2, n->address}};
  cfg.members = dup;
  cfg.n_members = 2;
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), HG_EINVAL);
  cfg.members = c->members;
  cfg.n_members = 3;
  char missing[300];
  snprintf(missing, sizeof missing, "%s/absent", c->root);
  cfg.dir = missing;
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), -ENOENT);
  assert_null(r);

  /* Someone else listens on the address: open fails and releases
   * everything once the loop runs (cluster_free checks the loop closes). */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)atoi(strchr(n->address, ':') + 1));
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(fd, 1), 0);
  cfg.dir = n->dir;
  int rc = hg_replica_open(&c->loop, &cfg, &r);
  assert_int_equal(rc, -EIO);
  assert_null(r);
  uv_run(&c->loop, UV_RUN_NOWAIT);
  close(fd);
  cluster_free(c);
}

/* ---- TLS ------------------------------------------------------------------ */

/* Gives node i the certificate <cert>.pem/.key in the cluster's root and
 * trusts <ca>.pem. */
static void node_tls(cluster_t *c, unsigned i, const char *cert, const char *ca) {
  node_t *n = &c->nodes[i];
  snprintf(n->cert, sizeof n->cert, "%s/%s.pem", c->root, cert);
  snprintf(n->key, sizeof n->key, "%s/%s.key", c->root, cert);
  snprintf(n->ca, sizeof n->ca, "%s/%s.pem", c->root, ca);
}

/* A CA ("ca"), an unrelated one ("other_ca") and certificates "node1".."node4"
 * signed by ca, every node set to use its own. */
static cluster_t *tls_cluster(void) {
  cluster_t *c = cluster_new(0, 0);
  assert_int_equal(ts_tls_make(c->root), 0);
  for (unsigned i = 0; i < MAX_NODES; i++) {
    char name[16];
    snprintf(name, sizeof name, "node%u", i + 1);
    assert_int_equal(ts_tls_make_node(c->root, "ca", i + 1, name), 0);
    node_tls(c, i, name, "ca");
  }
  return c;
}

/* Proposes entries of len bytes (content a function of the proposal
 * number) on the leader and waits for them to commit. */
static void propose_big(cluster_t *c, int leader, unsigned n, size_t len) {
  unsigned first = c->n_proposed;
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  for (unsigned i = 0; i < n; i++) {
    unsigned k = c->n_proposed;
    assert_true(k < MAX_DONE);
    for (size_t j = 0; j < len; j++) buf[j] = (uint8_t)(k * 29u + j * 13u + (j >> 12));
    proposals[k] = (proposal_t){c, k};
    assert_int_equal(hg_replica_propose(c->nodes[leader].r, buf, len, on_done, &proposals[k]), 0);
    c->n_proposed++;
  }
  free(buf);
  assert_true(run_until(c, all_done, NULL, 60000));
  for (unsigned k = first; k < c->n_proposed; k++) assert_int_equal(c->status[k], 0);
}

/* Three nodes over TLS elect, commit (entries of a few hundred bytes, and
 * 256 KiB ones: many TLS records and pump reads per message), fail over and
 * take a restarted node back; nothing is counted as a TLS failure. */
static void test_tls_group(void **state) {
  (void)state;
  cluster_t *c = tls_cluster();
  open_three(c);
  int l = wait_leader(c);
  propose_and_commit(c, l, 300);
  propose_big(c, l, 4, 256u << 10);
  assert_same_state(c);
  for (unsigned i = 0; i < 3; i++) assert_int_equal(c->nodes[i].n_applied, 304);

  node_close(c, (unsigned)l);
  int l2 = wait_leader(c);
  assert_int_not_equal(l2, l);
  propose_and_commit(c, l2, 100);
  node_open(c, (unsigned)l, false);
  assert_same_state(c);
  assert_int_equal(c->nodes[l].n_applied, 404);
  for (unsigned i = 0; i < 3; i++) assert_int_equal(hg_replica_tls_failures(c->nodes[i].r), 0);
  cluster_free(c);
}

static bool failures_reached(cluster_t *c, void *arg) {
  uint64_t want = *(uint64_t *)arg;
  uint64_t sum = 0;
  for (unsigned i = 0; i < MAX_NODES; i++)
    if (c->nodes[i].r != NULL) sum += hg_replica_tls_failures(c->nodes[i].r);
  return sum >= want;
}

static void run_for(cluster_t *c, unsigned ms) {
  uv_update_time(&c->loop);
  uint64_t end = uv_now(&c->loop) + ms;
  while (uv_now(&c->loop) < end) uv_run(&c->loop, UV_RUN_ONCE);
}

static bool refused_both_ways(cluster_t *c, void *arg) {
  (void)arg;
  return hg_replica_tls_failures(c->nodes[0].r) + hg_replica_tls_failures(c->nodes[1].r) > 0 &&
         hg_replica_tls_failures(c->nodes[2].r) > 0;
}

/* Node 3's certificate is signed by another CA: nodes 1 and 2 refuse it
 * both ways, so it never receives an entry and never leads, while 1 and 2
 * commit. */
static void test_tls_foreign_ca_cannot_join(void **state) {
  (void)state;
  cluster_t *c = tls_cluster();
  assert_int_equal(ts_tls_make_node(c->root, "other_ca", 3, "stranger3"), 0);
  node_tls(c, 2, "stranger3", "ca");
  open_three(c);
  int l = wait_leader(c);
  assert_true(l == 0 || l == 1);
  propose_and_commit(c, l, 50);
  /* Until both sides have refused the other (node 3 tries to be elected,
   * the leader tries to send it entries). */
  assert_true(run_until(c, refused_both_ways, NULL, WAIT_MS));
  /* Node 3 never leads (nodes 1 and 2 may have held an election meanwhile
   * on a busy machine: a leader among them, or none at this instant). */
  assert_true(leader_of(c) != 2);
  assert_int_not_equal(hg_replica_role(c->nodes[2].r), HG_REPLICA_LEADER);
  assert_int_equal(c->nodes[2].n_applied, 0);
  /* Only the bootstrap configuration entry: nothing from the leader. */
  assert_int_equal(hg_replica_last_index(c->nodes[2].r), 1);
  assert_true(hg_replica_tls_failures(c->nodes[0].r) + hg_replica_tls_failures(c->nodes[1].r) > 0);
  assert_true(hg_replica_tls_failures(c->nodes[2].r) > 0);
  cluster_free(c);
}

static int connect_to(const char *address) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)atoi(strchr(address, ':') + 1));
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
  return fd;
}

/* The node closed fd: reading gives end of file or a reset. */
static bool peer_closed(cluster_t *c, void *arg) {
  (void)c;
  char b[512];
  ssize_t n = recv(*(int *)arg, b, sizeof b, 0);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* A client speaking HTTP to the Raft port, one presenting a valid
 * certificate for node 2 while claiming to be node 3, and one beyond 64
 * silent connections: all are refused and counted. */
static void test_tls_strangers_refused(void **state) {
  (void)state;
  cluster_t *c = tls_cluster();
  node_open(c, 0, false);

  int fd = connect_to(c->nodes[0].address);
  const char junk[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(send(fd, junk, sizeof junk - 1, 0), (ssize_t)(sizeof junk - 1));
  uint64_t want = 1;
  assert_true(run_until(c, failures_reached, &want, WAIT_MS));
  assert_true(run_until(c, peer_closed, &fd, WAIT_MS));
  close(fd);

  /* A real TLS client, driven without blocking between loop runs. */
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  assert_non_null(ctx);
  assert_int_equal(SSL_CTX_use_certificate_chain_file(ctx, c->nodes[1].cert), 1);
  assert_int_equal(SSL_CTX_use_PrivateKey_file(ctx, c->nodes[1].key, SSL_FILETYPE_PEM), 1);
  assert_int_equal(SSL_CTX_load_verify_locations(ctx, c->nodes[0].ca, NULL), 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  fd = connect_to(c->nodes[0].address);
  SSL *ssl = SSL_new(ctx);
  assert_non_null(ssl);
  assert_int_equal(SSL_set_fd(ssl, fd), 1);
  assert_int_equal(SSL_set1_host(ssl, "hourglass-node-1"), 1);
  uv_update_time(&c->loop);
  uint64_t deadline = uv_now(&c->loop) + 5000;
  int r;
  while ((r = SSL_connect(ssl)) != 1) {
    assert_int_equal(SSL_get_error(ssl, r), SSL_ERROR_WANT_READ);
    assert_true(uv_now(&c->loop) < deadline);
    uv_run(&c->loop, UV_RUN_ONCE);
  }
  /* The preamble: magic, version, id 3 (the certificate names node 2). */
  uint8_t pre[20 + 9];
  hg_st32(pre, 0x54524748u);
  hg_st32(pre + 4, 1);
  hg_st64(pre + 8, 3);
  hg_st32(pre + 16, 9);
  memcpy(pre + 20, "127.0.0.1", 9);
  assert_int_equal(SSL_write(ssl, pre, sizeof pre), (int)sizeof pre);
  want = 2;
  assert_true(run_until(c, failures_reached, &want, WAIT_MS));
  /* No acknowledgement: the connection ends instead. */
  uint8_t ack;
  deadline = uv_now(&c->loop) + 5000;
  while ((r = SSL_read(ssl, &ack, 1)) <= 0 && SSL_get_error(ssl, r) == SSL_ERROR_WANT_READ) {
    assert_true(uv_now(&c->loop) < deadline);
    uv_run(&c->loop, UV_RUN_ONCE);
  }
  assert_true(r <= 0);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ERR_clear_error();
  close(fd);
  assert_int_equal(hg_replica_tls_failures(c->nodes[0].r), 2);

  /* At most 64 connections in their handshake: one more is refused. */
  int silent[64];
  for (unsigned i = 0; i < 64; i++) silent[i] = connect_to(c->nodes[0].address);
  run_for(c, 300);
  assert_int_equal(hg_replica_tls_failures(c->nodes[0].r), 2);
  fd = connect_to(c->nodes[0].address);
  want = 3;
  assert_true(run_until(c, failures_reached, &want, WAIT_MS));
  assert_true(run_until(c, peer_closed, &fd, WAIT_MS));
  /* Refused for the bound, not timed out: the 64 are still in their
   * handshake (a timeout would have counted them first). */
  assert_int_equal(hg_replica_tls_failures(c->nodes[0].r), 3);
  close(fd);
  for (unsigned i = 0; i < 64; i++) close(silent[i]);
  cluster_free(c);
}

/* Open refuses TLS files that are partial, missing, mismatched or name
 * another node. */
static void test_tls_open_errors(void **state) {
  (void)state;
  cluster_t *c = tls_cluster();
  node_t *n = &c->nodes[0];
  hg_replica_t *r = (hg_replica_t *)1;
  hg_replica_config_t cfg = node1_config(c);
  cfg.tls_cert = n->cert;
  cfg.tls_key = n->key;
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), HG_EINVAL); /* no CA */
  assert_null(r);
  char missing[320];
  snprintf(missing, sizeof missing, "%s/absent.pem", c->root);
  cfg.tls_ca = missing;
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), -ENOENT);
  cfg.tls_ca = n->ca;
  cfg.tls_key = c->nodes[1].key; /* another certificate's key */
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), HG_EINVAL);
  cfg.tls_cert = c->nodes[1].cert; /* a valid pair, for node 2 */
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), HG_EINVAL);
  cfg.tls_cert = n->ca; /* not a key's certificate at all */
  cfg.tls_key = n->key;
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), HG_EINVAL);
  assert_null(r);
  cfg.tls_cert = n->cert;
  assert_int_equal(hg_replica_open(&c->loop, &cfg, &r), 0);
  assert_int_equal(hg_replica_tls_failures(r), 0);
  n->r = r;
  cluster_free(c);
}

int main(void) {
  /* A peer that closes makes a write fail with EPIPE, not kill the test. */
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_rejects_bad_config),
      cmocka_unit_test(test_replicate_failover_restart),
      cmocka_unit_test(test_snapshot_install_new_member),
      cmocka_unit_test(test_snapshot_threshold_changes),
      cmocka_unit_test(test_minority_never_commits),
      cmocka_unit_test(test_tls_open_errors),
      cmocka_unit_test(test_tls_group),
      cmocka_unit_test(test_tls_foreign_ca_cannot_join),
      cmocka_unit_test(test_tls_strangers_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
