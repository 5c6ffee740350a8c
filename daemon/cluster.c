/*
 * cluster.c - hourglassd as one node of a Raft group (cluster.id set): the
 * glue between the replica (hourglass/replica.h), the pipeline in cluster
 * mode (hourglass/pipeline.h, "Cluster mode") and the gateway, all on the
 * gateway's loop thread.
 *
 *  - The pipeline hands each iteration's batch of sequenced records to
 *    cluster_replicate(), which proposes it as one Raft entry.
 *  - Every committed entry, on every node, goes through apply() to
 *    hg_pipeline_apply_batch(): followers apply it, the leader (which
 *    executed it when it sequenced it) only learns it is committed, and the
 *    results are released to clients from then on. The loop never waits
 *    for room in the pipeline: an entry it has none for waits in the apply
 *    queue with every later one, retried from the loop ("apply queue"
 *    below; bounded, shown on /metrics).
 *  - A timer polls the replica (libraft 0.15 has no role callback): a new
 *    leader proposes an empty batch (a barrier) and takes orders once that
 *    is committed, i.e. once it has applied every entry of earlier terms,
 *    and its gateway has routed their results; any other role takes none.
 *    Its first command then (if any order is session-scoped) is the
 *    gateway's SESSIONS_ENDED: every session was on the previous leader.
 *    The timer also publishes role, term, indexes, per-member progress and
 *    the last failed write to the Raft log (a full cluster.dir) for
 *    /health and /metrics.
 *  - Every record of a batch carries its route (the gateway's
 *    hg_gateway_route_out / hg_gateway_route_in, pipeline.h "Routes"), so
 *    every node sequences each result into the same key's stream.
 *  - A proposal the group lost (done with an error) leaves this node with
 *    commands applied that the group may not hold: the pipeline fails and
 *    the daemon rebuilds the node from the group in place (serve.c: it
 *    stops everything, as at a stop, and starts again in the same process).
 *  - Two other entry types, told from the batches by their first u32: the
 *    member address table (ENTRY_MEMBERS, "member table" below) and an
 *    operator's API key (ENTRY_KEY: every node stores it in its gateway's
 *    key store; the leader answers the AddApiKey once it is committed).
 *  - Operators add and remove members and transfer leadership through the
 *    gateway ("operator requests" below), one request at a time.
 *  - A node started with cluster.join and an empty Raft directory does not
 *    bootstrap: it waits for the leader to add it.
 *
 * A clean stop of the leader (SIGTERM) takes no more orders, waits until
 * the batches it executed are committed (up to an election timeout: a
 * proposal during a transfer is refused), transfers leadership to the most
 * up-to-date follower (bounded by two election timeouts), then closes.
 * So does a leader whose writes to its Raft log fail (a full cluster.dir),
 * without stopping. A node whose write failed stores nothing more until it
 * is restarted (hg_replica_log_error); /health answers 503 naming the disk,
 * the group goes on without it, and a restart after space is freed catches
 * up from what it had stored.
 *
 * Snapshots. libraft asks for one every cluster.snapshot_entries applied
 * entries, or at the next entry once those since the newest snapshot hold
 * SNAPSHOT_BYTES (apply() lowers libraft's threshold; snapshot_take()
 * restores it), which bounds the log a restart replays. Each costs the
 * group a stall of its commits while libraft stores it (files created,
 * synced and unlinked in the Raft directory, on the disk the log is
 * appended to): tens of ms on a virtual disk, hence a default of 65536
 * entries. A snapshot is the exchange's serialization (as in the LMDB
 * snapshots), with
 * the member table, the key store's keys and the gateway's route state
 * (hg_gateway_route_state: streams' next seqs, home keys, orders'
 * entering keys) behind it (SNAP_MAGIC), taken on the loop thread when
 * the state is exactly the applied entries (not on a leader with commands
 * executed ahead of the commit: it is asked again after the next entry).
 * libraft keeps it in the Raft directory, trims the log to
 * cluster.snapshot_entries entries behind it and sends it to a follower
 * further behind than that. The leader holds a snapshot back while a
 * voter lags further than that, for up to cluster.snapshot_hold_ms and
 * SNAPSHOT_HOLD_BYTES of entries: a node that rebuilds itself to load an
 * installed snapshot comes back behind by the entries of its rebuild, and
 * must find them in the log (were it sent the next snapshot, it would
 * rebuild forever). The bound is a time, not a count of entries: how many
 * entries a rebuild misses is the order rate times the rebuild's length,
 * and neither is the group's to choose. A voter down for longer than that
 * gets the snapshot; at most one more snapshot is sent to a node whose
 * rebuild straddled a hold's end, as the hold after it starts afresh.
 *
 * The node's state is rebuilt at every start (and every rebuild): the pipeline's directory
 * (data_dir/engine) is emptied except its journal, which is cut back to
 * the seq of the state the node starts from and continues (history.c: the
 * node keeps the sequenced history from seq 1); the newest Raft snapshot,
 * if any, is written to data_dir/engine/state before the pipeline opens (which
 * recovers from it, so the gateway and the market view are seeded from
 * it; the snapshot's member table and keys take effect at once), and
 * libraft re-applies the committed entries after it (the gateway's
 * outbound journal tells the frames of results it had sequenced before
 * from new ones: outlog.h "Positions"). A snapshot installed while the
 * node runs cannot replace the state under the gateway: the node accepts
 * it (libraft stored it; the leader goes on from its index), applies
 * nothing more, and its rebuild in place (serve.c) loads it and catches
 * up from the leader's log ("snapshot_restore" below). /health says
 * "catching up" until the node has applied what a leader said was
 * committed (publish()).
 *
 * Threads: everything here runs on the gateway's loop thread
 * except daemon_cluster_create/open/destroy (main thread, loop not
 * running) and daemon_cluster_status (any thread: atomics and a mutex).
 */
#include "cluster.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_log.h"
#include "history.h"
#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "hourglass/hmac.h"
#include "hourglass/journal.h"
#include "hourglass/store.h"
#include "hourglassd.h"

#define TICK_MS 5 /* the role poll: a new leader proposes its barrier within it */
#define APPLY_RETRY_MS 1 /* the apply queue's retry period */
/* Bytes of committed entries the apply queue holds at most (see "apply
 * queue"): beyond them the node fails and is rebuilt from the group. */
#define APPLY_QUEUE_MAX ((size_t)64 << 20)
#define SNAPSHOT_HOLD_BYTES (256u << 20) /* of entries a lagging voter may hold back */
#define SNAPSHOT_BYTES (64u << 20) /* of entries since the newest snapshot: take the next */

/* Entries other than the pipeline's batches, told apart by their first
 * u32 (host byte order, as the batches). */
#define ENTRY_MEMBERS 0x314d4748u /* "HGM1": the member address table */
#define ENTRY_KEY 0x314b4748u     /* "HGK1": an API key */
#define ADDR_LEN 64               /* an address field in ENTRY_MEMBERS, NUL-padded */
#define MEMBER_BYTES (8 + 2 * ADDR_LEN)
#define KEY_BYTES HG_GATEWAY_KEY_BYTES /* one key in ENTRY_KEY */

/* A member's addresses: its Raft address and its order-entry address as
 * clients reach it ("host:port"). */
typedef struct cmember {
  uint32_t id;
  char raft[ADDR_LEN];
  char client[ADDR_LEN];
} cmember_t;

/* The operator request under way (one at a time). */
typedef enum {
  OP_NONE,
  OP_ADD_TABLE,     /* add: the member table with the new member is proposed */
  OP_ADD,           /* add: libraft adds (or promotes) it */
  OP_ADD_RETRY,     /* add: it did not catch up yet; promote again at the next tick */
  OP_REMOVE,
  OP_TRANSFER_WAIT, /* transfer: order entry stopped, waiting for the commit */
  OP_TRANSFER
} op_state_t;

/* A committed entry this node has not applied yet (the apply queue): its
 * bytes, copied from libraft's buffer. */
typedef struct qentry {
  struct qentry *next;
  uint64_t index;
  size_t len;
  uint8_t data[]; /* len bytes */
} qentry_t;

/* How long an add keeps bringing a new member up to date: long enough for
 * it to rebuild itself once to load the leader's snapshot. */
#define ADD_CATCHUP_MS 60000u

struct daemon_cluster {
  cmember_t members[HG_DCFG_MAX_MEMBERS]; /* loop thread once open */
  size_t n_members;
  uint32_t self;
  int join;
  char raft_dir[HG_DCFG_PATH_MAX + 8];
  char engine_dir[HG_DCFG_PATH_MAX + 8];
  char listen[HG_DCFG_PATH_MAX]; /* cluster.listen; "": the member's raft address */
  unsigned election_ms, snapshot_entries, hold_ms;
  char tls_cert[HG_DCFG_PATH_MAX]; /* cluster.tls_*; "" = plain TCP */
  char tls_key[HG_DCFG_PATH_MAX];
  char tls_ca[HG_DCFG_PATH_MAX];
  uint64_t snap_index; /* of the newest snapshot taken or restored here */
  uint64_t hold_since; /* uv_now() a lagging voter first held a snapshot back; 0: none */
  uint64_t snap_bytes; /* of the entries applied since the newest snapshot */
  uint8_t *boot;      /* the snapshot restored at open (owned), NULL: none */
  size_t boot_len;
  uint8_t *routes;    /* its gateway route state (owned), NULL: none */
  size_t routes_len;

  /* Loop thread (the main thread before the loop runs). */
  hg_pipeline_t *pipe; /* not owned */
  hg_gateway_t *gw;    /* not owned */
  hg_replica_t *r;     /* owned; NULL once closed */
  uv_timer_t timer;
  uv_timer_t retry;        /* runs while the apply queue holds entries */
  qentry_t *q_head, *q_tail; /* the apply queue, in log order (owned) */
  uint64_t applied_index;  /* the last entry really applied (see applied_now) */
  uint64_t drain_deadline; /* stopping: uv_now() after which the queue is dropped */
  _Atomic int writable; /* also read by the demo thread */
  int barrier_pending;
  uint64_t barrier_term;      /* term of the barrier proposed (0: none) */
  uint64_t barrier_done_term; /* term whose barrier is committed */
  uint64_t leader_id;
  int stopping;          /* loop_stop ran: close once no transfer is pending */
  int transfer_pending;
  int transfer_wanted;      /* stopping leader: transfer once its batches commit */
  uint64_t settle_deadline; /* uv_now() after which it transfers regardless */
  uint64_t stop_deadline; /* uv_now() after which the transfer is not waited for */
  char leader_client[HG_DCFG_ADDR_MAX + 8];
  char cfg_members[HG_DCFG_PATH_MAX]; /* cluster.members as configured, for the log */
  cmember_t conf[HG_DCFG_MAX_MEMBERS]; /* and parsed */
  size_t n_conf;
  struct {
    op_state_t state;
    uint32_t id, stream;
    uint64_t ref_seq;
    uint64_t deadline; /* uv_now(): add stops retrying, transfer stops waiting */
    int promote;       /* add: the member is a spare already */
    cmember_t m;       /* add: the new member */
  } op;

  /* Published for other threads. */
  _Atomic int role;
  _Atomic uint64_t term, commit, applied, last, leader, tls_failures;
  /* The apply queue's entries and bytes now, and entries ever queued:
   * written by the loop thread only. */
  _Atomic uint64_t q_entries, q_bytes, q_total;
  _Atomic int failed;
  _Atomic uint64_t leader_commit; /* hg_replica_leader_commit at the last tick */
  _Atomic int caught_up; /* once applied up to catchup_target (or taking orders) */
  uint64_t catchup_target; /* the first leader commit index heard (0: none yet) */
  pthread_mutex_t mu; /* guards prog, n_prog, log_error, log_errmsg */
  int log_error;
  char log_errmsg[256];
  hg_replica_progress_t prog[HG_DCFG_MAX_MEMBERS];
  size_t n_prog;
};

/* A record of the "cluster" component (daemon_log.h). */
#define CLOG(level, msg, ...) hg_dlog((level), "cluster", (msg), __VA_ARGS__)

/* ------------------------------------------------------------- data dirs */

/* The replica's members into p[0..HG_DCFG_MAX_MEMBERS); returns the rows
 * written (at most HG_DCFG_MAX_MEMBERS). */
static size_t progress(const hg_replica_t *r, hg_replica_progress_t p[HG_DCFG_MAX_MEMBERS]) {
  size_t n = hg_replica_progress(r, p, HG_DCFG_MAX_MEMBERS);
  return n < HG_DCFG_MAX_MEMBERS ? n : HG_DCFG_MAX_MEMBERS;
}

static const cmember_t *member_row(const daemon_cluster_t *c, uint64_t id) {
  for (size_t i = 0; i < c->n_members; i++)
    if (c->members[i].id == id) return &c->members[i];
  return NULL;
}

/* ------------------------------------------------------- member table
 *
 * The member addresses every node knows (for LoginReject.leader and the
 * operator's status): cluster.members at first, then each ENTRY_MEMBERS
 * the group commits, which replaces the whole table. The last one applied
 * is kept in <raft dir>/members, so that a restart whose log no longer
 * holds it (trimmed behind a snapshot) still knows the members added at
 * run time. Format of the entry and the file: u32 ENTRY_MEMBERS, u32 n,
 * then per member u32 id, u32 zero, raft and client address, ADDR_LEN
 * bytes each, NUL-padded. */

static size_t table_encode(const cmember_t *m, size_t n, uint8_t *out) {
  hg_st32(out, ENTRY_MEMBERS);
  hg_st32(out + 4, (uint32_t)n);
  uint8_t *p = out + 8;
  for (size_t i = 0; i < n; i++, p += MEMBER_BYTES) {
    memset(p, 0, MEMBER_BYTES);
    hg_st32(p, m[i].id);
    memcpy(p + 8, m[i].raft, strnlen(m[i].raft, ADDR_LEN - 1));
    memcpy(p + 8 + ADDR_LEN, m[i].client, strnlen(m[i].client, ADDR_LEN - 1));
  }
  return (size_t)(p - out);
}

static int table_decode(const uint8_t *b, size_t len, cmember_t *m, size_t *n) {
  if (len < 8 || hg_ld32(b) != ENTRY_MEMBERS) return HG_ECORRUPT;
  uint32_t k = hg_ld32(b + 4);
  if (k == 0 || k > HG_DCFG_MAX_MEMBERS || len < 8 + (size_t)k * MEMBER_BYTES) return HG_ECORRUPT;
  const uint8_t *p = b + 8;
  for (uint32_t i = 0; i < k; i++, p += MEMBER_BYTES) {
    m[i].id = hg_ld32(p);
    memcpy(m[i].raft, p + 8, ADDR_LEN);
    memcpy(m[i].client, p + 8 + ADDR_LEN, ADDR_LEN);
    m[i].raft[ADDR_LEN - 1] = m[i].client[ADDR_LEN - 1] = '\0';
    if (m[i].id == 0 || m[i].id > HG_DCFG_MAX_MEMBERS) return HG_ECORRUPT;
  }
  *n = k;
  return 0;
}

/* Writes the table to <raft dir>/members (a new file renamed over the old
 * one, synced). 0 or -errno. */
static int table_save(const daemon_cluster_t *c) {
  uint8_t buf[8 + HG_DCFG_MAX_MEMBERS * MEMBER_BYTES];
  size_t len = table_encode(c->members, c->n_members, buf);
  char path[sizeof c->raft_dir + 16], tmp[sizeof c->raft_dir + 16];
  snprintf(path, sizeof path, "%s/members", c->raft_dir);
  snprintf(tmp, sizeof tmp, "%s/members.new", c->raft_dir);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  int rc = write(fd, buf, len) == (ssize_t)len ? 0 : -EIO;
  if (rc == 0 && fsync(fd) != 0) rc = -errno;
  close(fd);
  if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
  return rc;
}

/* Loads <raft dir>/members over the configured table. 1 loaded, 0 no
 * file, or an error. */
static int table_load(daemon_cluster_t *c) {
  char path[sizeof c->raft_dir + 16];
  snprintf(path, sizeof path, "%s/members", c->raft_dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : -errno;
  uint8_t buf[8 + HG_DCFG_MAX_MEMBERS * MEMBER_BYTES];
  ssize_t len = read(fd, buf, sizeof buf);
  close(fd);
  cmember_t m[HG_DCFG_MAX_MEMBERS];
  size_t n = 0;
  if (len < 0 || table_decode(buf, (size_t)len, m, &n) != 0) return HG_ECORRUPT;
  memcpy(c->members, m, n * sizeof m[0]);
  c->n_members = n;
  return 1;
}

/* "id=raft/client,..." of the table, for the log. */
static void table_text(const cmember_t *m, size_t n, char *out, size_t cap) {
  size_t at = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n && at < cap; i++) {
    int w = snprintf(out + at, cap - at, "%s%u=%s/%s", i ? "," : "", m[i].id, m[i].raft,
                     m[i].client);
    if (w < 0) break;
    at += (size_t)w;
  }
}

int daemon_cluster_create(const hg_daemon_config_t *cfg, daemon_cluster_t **out) {
  daemon_cluster_t *c = calloc(1, sizeof *c);
  if (c == NULL) return -ENOMEM;
  hg_dcfg_error_t err;
  hg_dcfg_member_t cm[HG_DCFG_MAX_MEMBERS];
  int rc = hg_daemon_config_members(cfg, cm, &c->n_members, &err);
  if (rc != 0) {
    free(c);
    return rc;
  }
  for (size_t i = 0; i < c->n_members; i++) {
    c->members[i].id = cm[i].id;
    /* IP literals with a port always fit; refuse rather than cut one. */
    int wr = snprintf(c->members[i].raft, ADDR_LEN, "%s", cm[i].raft);
    int wc = snprintf(c->members[i].client, ADDR_LEN, "%s:%u", cm[i].client.host,
                      cm[i].client.port);
    if (wr < 0 || wr >= ADDR_LEN || wc < 0 || wc >= ADDR_LEN) {
      CLOG(HG_LOG_ERROR, "a member's address is too long", "id=%u max=%d", cm[i].id,
             ADDR_LEN - 1);
      free(c);
      return HG_EINVAL;
    }
  }
  snprintf(c->cfg_members, sizeof c->cfg_members, "%s", cfg->cluster_members);
  c->join = cfg->cluster_join;
  c->self = cfg->cluster_id;
  c->election_ms = cfg->cluster_election_ms;
  c->snapshot_entries = cfg->cluster_snapshot_entries;
  c->hold_ms = cfg->cluster_snapshot_hold_ms;
  snprintf(c->tls_cert, sizeof c->tls_cert, "%s", cfg->cluster_tls_cert);
  snprintf(c->tls_key, sizeof c->tls_key, "%s", cfg->cluster_tls_key);
  snprintf(c->tls_ca, sizeof c->tls_ca, "%s", cfg->cluster_tls_ca);
  snprintf(c->listen, sizeof c->listen, "%s", cfg->cluster_listen);
  if (cfg->cluster_dir[0] != '\0')
    snprintf(c->raft_dir, sizeof c->raft_dir, "%s", cfg->cluster_dir);
  else
    snprintf(c->raft_dir, sizeof c->raft_dir, "%s/raft", cfg->data_dir);
  snprintf(c->engine_dir, sizeof c->engine_dir, "%s/engine", cfg->data_dir);
  pthread_mutex_init(&c->mu, NULL);
  rc = daemon_history_prepare(c->engine_dir); /* keeps the journal: history.c */
  if (rc == 0) rc = daemon_mkdir_p(c->raft_dir);
  if (rc != 0) {
    CLOG(HG_LOG_ERROR, "cannot prepare the directories", "raft=%s engine=%s err=%s",
           c->raft_dir, c->engine_dir, hg_strerror(rc));
    pthread_mutex_destroy(&c->mu);
    free(c);
    return rc;
  }
  size_t n_cfg = c->n_members;
  cmember_t *conf = c->conf;
  memcpy(conf, c->members, sizeof c->conf);
  c->n_conf = n_cfg;
  rc = table_load(c);
  if (rc < 0) {
    CLOG(HG_LOG_WARN, "the saved member table is unreadable: using cluster.members",
           "dir=%s err=%s", c->raft_dir, hg_strerror(rc));
  } else if (rc == 1 && (c->n_members != n_cfg ||
                         memcmp(conf, c->members, n_cfg * sizeof c->conf[0]) != 0)) {
    char group[HG_DCFG_MAX_MEMBERS * (2 * ADDR_LEN + 8)];
    table_text(c->members, c->n_members, group, sizeof group);
    CLOG(HG_LOG_WARN, "cluster.members differs from the group's member addresses: following the group",
           "configured=\"%s\" group=\"%s\"", c->cfg_members, group);
  }
  /* This node's own addresses come from its configuration. */
  if (member_row(c, c->self) == NULL && c->n_members < HG_DCFG_MAX_MEMBERS) {
    for (size_t i = 0; i < n_cfg; i++)
      if (conf[i].id == c->self) c->members[c->n_members++] = conf[i];
  }
  *out = c;
  return 0;
}

const char *daemon_cluster_engine_dir(const daemon_cluster_t *c) { return c->engine_dir; }

/* ------------------------------------------------------------ the group */


static void discard_event(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

/* The node stops applying and taking orders: it must be rebuilt from the
 * group (serve.c does it in place once daemon_cluster_must_rebuild() says
 * so). Logged once, at level. */
static void must_rebuild(daemon_cluster_t *c, int level, int rc, const char *why) {
  if (atomic_exchange(&c->failed, 1) == 0 && rc != 0)
    CLOG(level, "this node must be rebuilt from the group", "reason=\"%s\" err=%s", why,
         hg_strerror(rc));
  else if (rc == 0)
    CLOG(level, "this node must be rebuilt from the group", "reason=\"%s\"", why);
  c->writable = 0;
  hg_pipeline_set_writable(c->pipe, 0);
}

/* The same for an error: the pipeline fails too (nothing more released). */
static void fail(daemon_cluster_t *c, int rc, const char *why) {
  must_rebuild(c, HG_LOG_ERROR, rc, why);
  hg_pipeline_fail(c->pipe, rc);
}

static void proposal_done(void *ctx, int status, uint64_t index) {
  daemon_cluster_t *c = ctx;
  if (status != 0 && status != -ECANCELED) {
    (void)index;
    fail(c, status, "a proposed batch was not committed");
  }
}

int daemon_cluster_replicate(void *ctx, const void *batch, size_t len, uint64_t last_seq) {
  daemon_cluster_t *c = ctx;
  (void)last_seq;
  if (c->r == NULL) return HG_ESTATE;
  return hg_replica_propose(c->r, batch, len, proposal_done, c);
}

/* ENTRY_MEMBERS: the table replaces this node's, and is saved. */
static int apply_members(daemon_cluster_t *c, uint64_t index, const uint8_t *b, size_t len) {
  cmember_t m[HG_DCFG_MAX_MEMBERS];
  size_t n = 0;
  if (table_decode(b, len, m, &n) != 0) {
    CLOG(HG_LOG_ERROR, "a member table entry is malformed: ignored", "index=%" PRIu64, index);
    return 0;
  }
  memcpy(c->members, m, n * sizeof m[0]);
  c->n_members = n;
  c->leader_id = 0; /* publish() looks the leader's client address up again */
  int rc = table_save(c);
  char text[HG_DCFG_MAX_MEMBERS * (2 * ADDR_LEN + 8)];
  table_text(m, n, text, sizeof text);
  CLOG(rc == 0 ? HG_LOG_INFO : HG_LOG_WARN, "member addresses from the group",
         "index=%" PRIu64 " members=\"%s\" saved=%s", index, text,
         rc == 0 ? "yes" : hg_strerror(rc));
  return 0;
}

/* ENTRY_KEY: u32 magic, u32 n, then n keys of KEY_BYTES, each as
 * hg_gateway_key_encode writes it. Every node stores them (replacing keys
 * with their ids). */

/* Stores the n keys at b (KEY_BYTES each). 0, or the key store's error. */
static int store_keys(daemon_cluster_t *c, uint64_t index, const uint8_t *b, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *p = b + (size_t)i * KEY_BYTES;
    uint8_t secret[HG_WIRE_SECRET_MAX];
    hg_gateway_key_t k = {.key_id = hg_ld_le(p + 1, 8)}; /* named in the log if malformed */
    int rc = hg_gateway_key_decode(p, KEY_BYTES, &k, secret) != 0 ? HG_EINVAL
                                                                  : hg_gateway_apply_key(c->gw, &k);
    hg_wipe(secret, sizeof secret);
    if (rc == HG_EINVAL)
      CLOG(HG_LOG_ERROR, "an API key from the group is malformed: ignored",
             "index=%" PRIu64 " key_id=%" PRIu64, index, k.key_id);
    else if (rc != 0)
      return rc;
    else if (n == 1)
      CLOG(HG_LOG_INFO, "API key stored from the group",
             "index=%" PRIu64 " key_id=%" PRIu64 " role=%u", index, k.key_id, k.role);
  }
  return 0;
}

static int apply_key(daemon_cluster_t *c, uint64_t index, const uint8_t *b, size_t len) {
  uint32_t n = len >= 8 ? hg_ld32(b + 4) : 0;
  if (n == 0 || (len - 8) / KEY_BYTES < n) {
    CLOG(HG_LOG_ERROR, "an API key entry is malformed: ignored", "index=%" PRIu64, index);
    return 0;
  }
  int rc = store_keys(c, index, b + 8, n);
  if (rc != 0) fail(c, rc, "an API key from the group could not be stored");
  return rc;
}

/* ------------------------------------------------------------ apply queue
 *
 * libraft calls apply() on the loop thread for every committed entry and
 * takes a return of 0 as "applied". A batch the pipeline has no room for
 * (hg_pipeline_apply_batch() returns HG_EBUSY: the stage is full because
 * a consumer such as the market view lags, or the gateway's pending table
 * is) is not waited for on the loop, which must go on answering clients
 * and Raft: the rest of the entry is copied into the apply queue, and so
 * is every later entry (of any type) while the queue holds one, so that
 * entries are applied strictly in log order. The retry timer applies the
 * queue every APPLY_RETRY_MS (and apply() first, on each new entry) until
 * it is empty; a batch applied again skips the records it applied before
 * (pipeline.h, "Cluster mode"). c->applied_index is the last entry really
 * applied, which /health, /metrics and the operator's status show; it
 * trails libraft's applied index while the queue holds entries. Meanwhile
 * the state is not libraft's applied index: no snapshot is taken, and a
 * new leader does not take orders before the queue is empty
 * (maybe_writable). A writable leader never queues: every batch committed
 * then is its own (skipped records), and the keys it proposes apply at
 * once. The queue holds at most APPLY_QUEUE_MAX bytes; beyond that the
 * node fails (this node must be rebuilt from the group) as a batch that
 * cannot be applied does. A stop waits for the queue to drain (as long as
 * a transfer, bounded); what is left then is dropped, and the next start
 * rebuilds the node from the group. */

/* The index this node's state holds: libraft's applied index unless
 * entries are queued. */
static uint64_t applied_now(const daemon_cluster_t *c) {
  if (c->q_head != NULL || c->r == NULL) return c->applied_index;
  return hg_replica_applied_index(c->r);
}

/* Records that the state holds every entry up to index. The commit index
 * is published first: an applied entry is committed, and a reader that
 * loads applied before commit (daemon_cluster_status) never sees the
 * applied index ahead of the commit index, between two ticks of
 * publish(). */
static void set_applied(daemon_cluster_t *c, uint64_t index) {
  uint64_t commit = c->r != NULL ? hg_replica_commit_index(c->r) : 0;
  if (commit < index) commit = index;
  if (commit > atomic_load(&c->commit)) atomic_store(&c->commit, commit);
  c->applied_index = index;
  atomic_store(&c->applied, index);
}

/* Applies one entry. 0 (applied), HG_EBUSY (a batch the pipeline has no
 * room for yet: the records before the one it stopped at are applied), or
 * the error that failed the node. */
static int apply_entry(daemon_cluster_t *c, uint64_t index, const void *data, size_t len) {
  uint32_t magic = len >= 4 ? hg_ld32(data) : 0;
  int rc;
  if (magic == ENTRY_MEMBERS) {
    rc = apply_members(c, index, data, len);
  } else if (magic == ENTRY_KEY) {
    rc = apply_key(c, index, data, len);
  } else {
    rc = hg_pipeline_apply_batch(c->pipe, data, len);
    /* The stage is full: let the gateway take what is released, then go
     * on from the first record not applied (the batch skips applied seqs). */
    if (rc == HG_EBUSY && c->gw != NULL) {
      hg_gateway_drain(c->gw);
      rc = hg_pipeline_apply_batch(c->pipe, data, len);
    }
    if (rc == HG_EBUSY) return rc;
    if (rc != 0) fail(c, rc, "a committed batch could not be applied");
  }
  set_applied(c, index);
  return rc;
}

static void queue_clear(daemon_cluster_t *c) {
  while (c->q_head != NULL) {
    qentry_t *e = c->q_head;
    c->q_head = e->next;
    free(e);
  }
  c->q_tail = NULL;
  atomic_store(&c->q_entries, 0);
  atomic_store(&c->q_bytes, 0);
}

/* Applies queued entries in order until one is refused for room or the
 * queue is empty (the retry timer then stops). */
static void queue_run(daemon_cluster_t *c) {
  while (c->q_head != NULL && !atomic_load(&c->failed)) {
    qentry_t *e = c->q_head;
    if (apply_entry(c, e->index, e->data, e->len) == HG_EBUSY) break;
    c->q_head = e->next;
    if (c->q_head == NULL) c->q_tail = NULL;
    atomic_fetch_sub(&c->q_bytes, e->len);
    atomic_fetch_sub(&c->q_entries, 1);
    free(e);
  }
  if (atomic_load(&c->failed)) queue_clear(c); /* the node is rebuilt from the group */
  if (c->q_head == NULL) uv_timer_stop(&c->retry);
}

static void on_retry(uv_timer_t *t) { queue_run(t->data); }

/* Queues what apply_entry() could not apply (yet) of entry index. 0, or
 * the error that failed the node (the queue is full, no memory). */
static int queue_push(daemon_cluster_t *c, uint64_t index, const void *data, size_t len) {
  uint64_t queued = atomic_load(&c->q_bytes);
  if (len > APPLY_QUEUE_MAX - queued) {
    CLOG(HG_LOG_ERROR, "committed entries wait to be applied beyond the apply queue's bound",
         "index=%" PRIu64 " applied_index=%" PRIu64 " queued_entries=%" PRIu64
         " queued_bytes=%" PRIu64 " max_bytes=%zu",
         index, c->applied_index, atomic_load(&c->q_entries), queued,
         (size_t)APPLY_QUEUE_MAX);
    fail(c, HG_EFULL, "this node applies committed entries slower than the group commits them");
    queue_clear(c);
    return HG_EFULL;
  }
  qentry_t *e = malloc(sizeof *e + len);
  if (e == NULL) {
    fail(c, -ENOMEM, "a committed entry could not be queued");
    queue_clear(c);
    return -ENOMEM;
  }
  if (c->q_head == NULL) {
    /* libraft applied every entry before this one (replica.c: index is
     * its last applied + 1): the state holds them. */
    set_applied(c, index - 1);
  }
  e->next = NULL;
  e->index = index;
  e->len = len;
  memcpy(e->data, data, len);
  if (c->q_tail != NULL) c->q_tail->next = e;
  else c->q_head = e;
  c->q_tail = e;
  atomic_fetch_add(&c->q_bytes, len);
  atomic_fetch_add(&c->q_entries, 1);
  atomic_fetch_add(&c->q_total, 1);
  if (!uv_is_active((uv_handle_t *)&c->retry))
    uv_timer_start(&c->retry, on_retry, APPLY_RETRY_MS, APPLY_RETRY_MS);
  return 0;
}

static int apply(void *ctx, uint64_t index, const void *data, size_t len) {
  daemon_cluster_t *c = ctx;
  if (atomic_load(&c->failed)) return HG_EUNAVAIL;
  /* The entry that reaches SNAPSHOT_BYTES: libraft asks after it. */
  if (c->snap_bytes < SNAPSHOT_BYTES && c->snap_bytes + len >= SNAPSHOT_BYTES &&
      c->snapshot_entries != 0 && c->r != NULL)
    hg_replica_set_snapshot_threshold(c->r, 1);
  c->snap_bytes += len;
  if (c->q_head != NULL) queue_run(c);
  if (c->q_head == NULL) {
    int rc = apply_entry(c, index, data, len);
    if (rc != HG_EBUSY) return rc;
  }
  return queue_push(c, index, data, len);
}

/* A Raft snapshot: u32 SNAP_MAGIC, u32 zero, u64 length L, the exchange's
 * serialization (what the LMDB snapshots hold; L bytes, zero-padded to a
 * multiple of 8), then the member table (ENTRY_MEMBERS), every key of the
 * key store (ENTRY_KEY, n may be 0) and the gateway's route state
 * (hourglass/gateway.h, HG_GATEWAY_ROUTES_MAGIC; absent in earlier
 * snapshots, and ignored by versions before it): a node that starts from
 * it has the state, the members' addresses, the API keys the group
 * committed up to its index and routes results as the other nodes do. A
 * snapshot that is the exchange's serialization alone (an earlier format)
 * is read as well. */
#define SNAP_MAGIC 0x31534748u /* "HGS1" */

typedef struct snap_keys {
  uint8_t *buf;
  size_t len, cap;
} snap_keys_t;

static int snap_key(void *ctx, const hg_gateway_key_t *key) {
  snap_keys_t *k = ctx;
  /* Grown by copy and wipe, not realloc: the old buffer holds secrets. */
  if (k->len + KEY_BYTES > k->cap) {
    size_t cap = k->cap * 2 + 64 * KEY_BYTES;
    uint8_t *b = malloc(cap);
    if (b == NULL) return -ENOMEM;
    if (k->buf != NULL) memcpy(b, k->buf, k->len);
    if (k->buf != NULL) hg_wipe(k->buf, k->len);
    free(k->buf);
    k->buf = b;
    k->cap = cap;
  }
  hg_gateway_key_encode(key, k->buf + k->len);
  k->len += KEY_BYTES;
  return 0;
}

/* 1 when a voter other than this leader lags further than the entries a
 * snapshot at index keeps behind it. */
static int voter_lags(daemon_cluster_t *c, uint64_t index) {
  hg_replica_progress_t p[HG_DCFG_MAX_MEMBERS];
  size_t n = progress(c->r, p);
  for (size_t i = 0; i < n; i++)
    if (p[i].id != c->self && p[i].voter && p[i].match_index + c->snapshot_entries < index)
      return 1;
  return 0;
}

/* 1 while the leader should not trim its log: a voter lags (it would be
 * sent the snapshot, rebuild itself to load it, and come back behind by
 * the entries of its rebuild: sent another, it would never catch up), for
 * cluster.snapshot_hold_ms from the first time it held one back, while
 * the entries since the last snapshot stay under SNAPSHOT_HOLD_BYTES (a
 * member down for longer than that gets the snapshot). */
static int hold_snapshot(daemon_cluster_t *c, uint64_t index) {
  if (c->r == NULL || hg_replica_role(c->r) != HG_REPLICA_LEADER) {
    c->hold_since = 0; /* a hold is a leader's: the next term's starts afresh */
    return 0;
  }
  if (c->snap_bytes >= SNAPSHOT_HOLD_BYTES || !voter_lags(c, index)) return 0;
  uint64_t now = uv_now(c->timer.loop);
  if (c->hold_since == 0) c->hold_since = now != 0 ? now : 1;
  return now - c->hold_since < c->hold_ms;
}

/* Taken when the state is the entries applied: not on a leader that
 * executed commands not yet committed, nor while entries wait in the apply
 * queue, nor while hold_snapshot() says so (libraft asks again after the
 * next entry). */
static int snapshot_take(void *ctx, uint64_t index, const void **data, size_t *len) {
  daemon_cluster_t *c = ctx;
  if (c->pipe == NULL) return HG_ESTATE;
  if (atomic_load(&c->failed)) return HG_EBUSY; /* the state is not the applied entries' */
  if (c->q_head != NULL) return HG_EBUSY;
  hg_pipeline_stats_t st;
  hg_pipeline_stats(c->pipe, &st);
  if (st.last_seq != st.committed_seq) return HG_EBUSY;
  if (hold_snapshot(c, index)) return HG_EBUSY;
  /* The route state is the applied entries' once every result is routed. */
  if (c->gw != NULL) hg_gateway_drain(c->gw);
  hg_pipeline_stats(c->pipe, &st);
  if (st.released_seq < st.last_seq) return HG_EBUSY;
  snap_keys_t keys = {0};
  int rc = hg_gateway_keys_foreach(c->gw, snap_key, &keys);
  /* The loop thread owns the exchange in loop mode. */
  const hg_exchange_t *ex = hg_pipeline_exchange(c->pipe);
  size_t xlen = hg_exchange_serialized_size(ex), n = 0;
  size_t table = 8 + c->n_members * MEMBER_BYTES;
  size_t routes = c->gw != NULL ? hg_gateway_route_state(c->gw, NULL, 0) : 0;
  size_t need = 16 + ((xlen + 7) & ~(size_t)7) + table + 8 + keys.len + routes;
  uint8_t *b = rc == 0 ? calloc(1, need) : NULL;
  if (rc == 0 && b == NULL) rc = -ENOMEM;
  if (rc == 0) rc = hg_exchange_serialize(ex, b + 16, xlen, &n);
  if (rc == 0) {
    hg_st32(b, SNAP_MAGIC);
    hg_st64(b + 8, n);
    uint8_t *p = b + 16 + ((n + 7) & ~(size_t)7);
    p += table_encode(c->members, c->n_members, p);
    hg_st32(p, ENTRY_KEY);
    hg_st32(p + 4, (uint32_t)(keys.len / KEY_BYTES));
    if (keys.len != 0) memcpy(p + 8, keys.buf, keys.len);
    p += 8 + keys.len;
    if (routes != 0) p += hg_gateway_route_state(c->gw, p, routes);
    *data = b;
    *len = (size_t)(p - b);
    c->snap_index = index;
    c->hold_since = 0;
    c->snap_bytes = 0;
    /* Back to every cluster.snapshot_entries, had SNAPSHOT_BYTES lowered it. */
    if (c->r != NULL && c->snapshot_entries != 0)
      hg_replica_set_snapshot_threshold(c->r, c->snapshot_entries);
  } else {
    free(b);
  }
  if (keys.buf != NULL) hg_wipe(keys.buf, keys.len);
  free(keys.buf);
  return rc;
}

static void snapshot_release(void *ctx, const void *data, size_t len) {
  (void)ctx;
  hg_wipe((void *)data, len); /* the API keys' secrets */
  free((void *)data);
}

/* Splits a snapshot: the exchange's bytes, and the member table, keys and
 * route state (NULL for an earlier snapshot). HG_ECORRUPT if it does not
 * parse. */
static int snapshot_split(const uint8_t *b, size_t len, const uint8_t **ex, size_t *ex_len,
                          const uint8_t **table, size_t *table_len, const uint8_t **keys,
                          uint32_t *n_keys, const uint8_t **routes, size_t *routes_len) {
  *table = *keys = *routes = NULL;
  *n_keys = 0;
  *routes_len = 0;
  if (len < 16 || hg_ld32(b) != SNAP_MAGIC) {
    *ex = b;
    *ex_len = len;
    return 0;
  }
  uint64_t xl = hg_ld64(b + 8);
  size_t at = 16 + (size_t)((xl + 7) & ~(uint64_t)7);
  if (xl > len || at + 8 > len) return HG_ECORRUPT;
  *ex = b + 16;
  *ex_len = (size_t)xl;
  uint32_t nm = hg_ld32(b + at + 4);
  *table = b + at;
  *table_len = 8 + (size_t)nm * MEMBER_BYTES;
  at += *table_len;
  if (nm > HG_DCFG_MAX_MEMBERS || at + 8 > len || hg_ld32(b + at) != ENTRY_KEY) return HG_ECORRUPT;
  *n_keys = hg_ld32(b + at + 4);
  *keys = b + at + 8;
  if ((len - at - 8) / KEY_BYTES < *n_keys) return HG_ECORRUPT;
  at += 8 + (size_t)*n_keys * KEY_BYTES;
  if (len - at >= 4 && hg_ld32(b + at) == HG_GATEWAY_ROUTES_MAGIC) {
    *routes = b + at;
    *routes_len = len - at;
  }
  return 0;
}

/* At open the exchange's part is kept for daemon_cluster_seed(), and the
 * member table and keys take effect at once. A snapshot installed while
 * the node runs cannot replace the state under the gateway's mirror, but
 * libraft has stored it already (replica.h, "Snapshots"): it is accepted,
 * so that the leader goes on from its index at once (a refusal would make
 * libraft 0.15's leader wait its 30 s install-snapshot timeout, then send
 * another snapshot), this node applies nothing more (apply() refuses) and
 * rebuilds itself in place, which restores it from the Raft directory and
 * catches up from the leader's log. */
static int snapshot_restore(void *ctx, uint64_t index, const void *data, size_t len) {
  daemon_cluster_t *c = ctx;
  if (c->pipe != NULL) {
    CLOG(HG_LOG_INFO, "snapshot installed from the leader", "index=%" PRIu64 " bytes=%zu",
         index, len);
    must_rebuild(c, HG_LOG_INFO, 0,
                 "a snapshot was installed from the leader: the rebuild loads it");
    return 0;
  }
  const uint8_t *ex, *table, *keys, *routes;
  size_t ex_len = 0, table_len = 0, routes_len = 0;
  uint32_t n_keys = 0;
  int rc = snapshot_split(data, len, &ex, &ex_len, &table, &table_len, &keys, &n_keys, &routes,
                          &routes_len);
  if (rc != 0) {
    CLOG(HG_LOG_ERROR, "the group's snapshot is malformed", "index=%" PRIu64, index);
    return rc;
  }
  if (table != NULL) (void)apply_members(c, index, table, table_len);
  if (keys != NULL && (rc = store_keys(c, index, keys, n_keys)) != 0) {
    CLOG(HG_LOG_ERROR, "cannot store the API keys of the group's snapshot", "err=%s",
           hg_strerror(rc));
    return rc;
  }
  free(c->boot);
  c->boot = malloc(ex_len);
  if (c->boot == NULL) return -ENOMEM;
  memcpy(c->boot, ex, ex_len);
  c->boot_len = ex_len;
  free(c->routes);
  c->routes = NULL;
  c->routes_len = 0;
  if (routes != NULL) {
    c->routes = malloc(routes_len);
    if (c->routes == NULL) return -ENOMEM;
    memcpy(c->routes, routes, routes_len);
    c->routes_len = routes_len;
  }
  c->snap_index = index;
  CLOG(HG_LOG_INFO, "snapshot to start from",
         "index=%" PRIu64 " bytes=%zu members=%s keys=%u routes=%s", index, ex_len,
         table != NULL ? "yes" : "no", n_keys, routes != NULL ? "yes" : "no");
  return 0;
}

int daemon_cluster_seed(daemon_cluster_t *c, const hg_pipeline_config_t *pc) {
  uint64_t first = 0;
  if (c->boot == NULL) { /* an empty exchange: the group re-applies from entry 1 */
    int rc = daemon_history_continue(c->engine_dir, 0, &pc->journal, &first);
    if (rc != 0)
      CLOG(HG_LOG_ERROR, "cannot prepare the journal", "dir=%s err=%s", c->engine_dir,
           hg_strerror(rc));
    return rc;
  }
  char state[HG_DCFG_PATH_MAX + 16];
  snprintf(state, sizeof state, "%s/state", c->engine_dir);
  hg_exchange_t *ex = NULL;
  hg_store_t *s = NULL;
  int rc = daemon_mkdir_p(state);
  if (rc == 0) rc = hg_exchange_create(&pc->exchange, discard_event, NULL, &ex);
  if (rc == 0) rc = hg_exchange_restore(ex, c->boot, c->boot_len);
  if (rc == 0) rc = hg_store_create(&s);
  if (rc == 0) rc = hg_store_open(s, state, pc->map_size ? pc->map_size : (size_t)1 << 30);
  if (rc == 0) rc = hg_store_save_exchange(s, ex, 2);
  /* The journal ends at the snapshot's seq (history.c): the pipeline
   * refuses a snapshot whose journal holds no segment. */
  uint64_t snap_seq = ex != NULL ? hg_exchange_last_seq(ex) : 0;
  if (rc == 0) rc = daemon_history_continue(c->engine_dir, snap_seq, &pc->journal, &first);
  if (rc != 0)
    CLOG(HG_LOG_ERROR, "cannot write the group's snapshot to the state store",
           "dir=%s err=%s %s", state, hg_strerror(rc), s != NULL ? hg_store_errmsg(s) : "");
  else if (first > 1)
    CLOG(HG_LOG_WARN,
         "state store seeded from the group's snapshot; the history before the journal is not on "
         "this node",
         "last_seq=%" PRIu64 " journal_first_seq=%" PRIu64 " note=engine/" HG_HISTORY_MISSING_FILE,
         snap_seq, first);
  else
    CLOG(HG_LOG_INFO, "state store seeded from the group's snapshot; the journal continues",
           "last_seq=%" PRIu64, snap_seq);
  hg_store_close(s);
  hg_exchange_destroy(ex);
  free(c->boot);
  c->boot = NULL;
  return rc;
}

/* A leader takes orders once its barrier is committed and every entry of
 * earlier terms is applied (libraft calls barrier_done() once it handed
 * the barrier to apply(), which may have queued it: then the tick asks
 * again until the apply queue is empty) and the gateway has routed every
 * result up to there (its mirror answers order status and positions for
 * all of them). */
static void maybe_writable(daemon_cluster_t *c) {
  if (c->writable || c->barrier_done_term == 0 || c->barrier_done_term != c->barrier_term)
    return;
  if (c->q_head != NULL) return;
  if (c->op.state == OP_TRANSFER_WAIT || c->op.state == OP_TRANSFER) return; /* handing over */
  /* Everything committed is routed (stream records after the last
   * command too), so a login sees each key's whole stream. */
  hg_gateway_drain(c->gw);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(c->pipe, &st);
  if (st.released_seq < st.last_seq) return; /* the local journal or the drain lags */
  hg_pipeline_set_writable(c->pipe, 1);
  /* The sessions of the previous leader ended: their session-scoped
   * orders are cancelled through the log before any order is taken. */
  int rc = hg_gateway_sessions_ended(c->gw);
  if (rc != 0) {
    hg_pipeline_set_writable(c->pipe, 0);
    CLOG(HG_LOG_WARN, "new leader: cannot submit SESSIONS_ENDED yet", "err=%s",
           hg_strerror(rc));
    return;
  }
  c->writable = 1;
  CLOG(HG_LOG_INFO, "leader: taking orders",
         "term=%" PRIu64 " applied_index=%" PRIu64 " last_seq=%" PRIu64, c->barrier_term,
         applied_now(c), st.last_seq);
}

static void barrier_done(void *ctx, int status, uint64_t index) {
  daemon_cluster_t *c = ctx;
  (void)index;
  c->barrier_pending = 0;
  if (c->r == NULL || atomic_load(&c->failed)) return;
  if (status == 0 && hg_replica_role(c->r) == HG_REPLICA_LEADER &&
      hg_replica_term(c->r) == c->barrier_term) {
    c->barrier_done_term = c->barrier_term;
    maybe_writable(c);
  } else {
    c->barrier_term = 0; /* try again on the next tick if still leader */
  }
}

static void publish(daemon_cluster_t *c) {
  hg_replica_t *r = c->r;
  int role = hg_replica_role(r);
  if (role != atomic_load(&c->role))
    CLOG(HG_LOG_INFO, "role changed", "role=%s term=%" PRIu64 " commit_index=%" PRIu64
           " last_index=%" PRIu64, daemon_cluster_role_name(role), hg_replica_term(r),
           hg_replica_commit_index(r), hg_replica_last_index(r));
  atomic_store(&c->role, role);
  atomic_store(&c->term, hg_replica_term(r));
  /* The exchange epoch is the group's: its Raft term, raised by every
   * election (each new leader ends every session), never lower on any
   * node (a term only rises, and a leader's is above every earlier
   * leader's). */
  hg_gateway_set_epoch(c->gw, hg_replica_term(r));
  atomic_store(&c->commit, hg_replica_commit_index(r));
  atomic_store(&c->applied, applied_now(c));
  atomic_store(&c->last, hg_replica_last_index(r));
  atomic_store(&c->tls_failures, hg_replica_tls_failures(r));
  uint64_t id = 0;
  const char *addr = NULL;
  hg_replica_leader(r, &id, &addr);
  atomic_store(&c->leader, id);
  if (id != c->leader_id) {
    c->leader_id = id;
    const cmember_t *m = member_row(c, id);
    if (m != NULL)
      snprintf(c->leader_client, sizeof c->leader_client, "%s", m->client);
    else
      c->leader_client[0] = '\0';
    CLOG(HG_LOG_INFO, "leader changed", "leader=%" PRIu64 " term=%" PRIu64, id,
           hg_replica_term(r));
  }
  /* Caught up once the state holds what the group had committed when a
   * leader was first heard from (a follower: the latest commit index heard
   * runs ahead of what is stored while entries keep coming), or once taking
   * orders (a leader): /health says "catching up" before that. */
  uint64_t lc = hg_replica_leader_commit(r);
  atomic_store(&c->leader_commit, lc);
  if (c->catchup_target == 0) c->catchup_target = lc;
  if (!atomic_load(&c->caught_up) && !atomic_load(&c->failed) &&
      ((role == HG_REPLICA_LEADER && c->writable) ||
       (role == HG_REPLICA_FOLLOWER && c->catchup_target != 0 &&
        applied_now(c) >= c->catchup_target))) {
    atomic_store(&c->caught_up, 1);
    CLOG(HG_LOG_INFO, "caught up with the group",
         "applied_index=%" PRIu64 " leader_commit=%" PRIu64, applied_now(c), lc);
  }
  const char *why = NULL;
  int log_error = hg_replica_log_error(r, &why);
  pthread_mutex_lock(&c->mu);
  c->log_error = log_error;
  snprintf(c->log_errmsg, sizeof c->log_errmsg, "%s", why);
  c->n_prog = progress(r, c->prog);
  pthread_mutex_unlock(&c->mu);
}

static void replica_closed(void *ctx, int status);

static void transfer_done(void *ctx, int status);

/* Stopping: once the leadership transfer (if any) is over, or took too
 * long, the timer and the replica close (not from a replica callback). */
static void close_when_done(daemon_cluster_t *c) {
  if (c->transfer_wanted) {
    /* Batches executed before the stop are proposed and committed first
     * (their results released): libraft refuses proposals during a
     * transfer, and such a batch would fail the pipeline. */
    hg_pipeline_stats_t st;
    hg_pipeline_stats(c->pipe, &st);
    uint64_t now = uv_now(c->timer.loop);
    int settled = st.committed_seq == st.last_seq;
    if (!settled && !atomic_load(&c->failed) && now < c->settle_deadline) return;
    c->transfer_wanted = 0;
    if (!atomic_load(&c->failed) && hg_replica_role(c->r) == HG_REPLICA_LEADER &&
        hg_replica_transfer(c->r, 0, transfer_done, c) == 0) {
      c->transfer_pending = 1;
      c->stop_deadline = now + 2u * c->election_ms + 100u;
    }
  }
  if (c->transfer_pending && uv_now(c->timer.loop) < c->stop_deadline) return;
  /* Committed entries still queued are applied first, for a bounded time
   * (the gateway may have stopped taking results); the next start rebuilds
   * the node from the group anyway. */
  if (c->q_head != NULL && !atomic_load(&c->failed) && uv_now(c->timer.loop) < c->drain_deadline)
    return;
  if (c->q_head != NULL)
    CLOG(HG_LOG_WARN,
         "stopping with committed entries not applied here: the next start applies them",
         "applied_index=%" PRIu64 " queued_entries=%" PRIu64 " queued_bytes=%" PRIu64,
         c->applied_index, atomic_load(&c->q_entries), atomic_load(&c->q_bytes));
  queue_clear(c);
  uv_close((uv_handle_t *)&c->retry, NULL);
  uv_close((uv_handle_t *)&c->timer, NULL);
  hg_replica_t *r = c->r;
  c->r = NULL;
  hg_replica_close(r, replica_closed, c);
}

static void transfer_step(daemon_cluster_t *c);
static void add_retry(daemon_cluster_t *c);
static void handed_over(void *ctx, int status) {
  daemon_cluster_t *c = ctx;
  c->transfer_pending = 0;
  CLOG(status == 0 ? HG_LOG_INFO : HG_LOG_WARN,
         "leadership handed over: this node cannot write its Raft log", "result=%s",
         status == 0 ? "done" : hg_strerror(status));
}

static void on_tick(uv_timer_t *t) {
  daemon_cluster_t *c = t->data;
  if (c->r == NULL) return;
  if (c->stopping) {
    close_when_done(c);
    return;
  }
  publish(c);
  if (atomic_load(&c->failed)) return;
  if (c->op.state == OP_TRANSFER_WAIT) transfer_step(c);
  else if (c->op.state == OP_ADD_RETRY) add_retry(c);
  int leader = hg_replica_role(c->r) == HG_REPLICA_LEADER;
  uint64_t term = hg_replica_term(c->r);
  /* A leader that cannot store entries (its disk is full) commits only
   * with both others and never its own barrier: a member that can leads. */
  if (leader && hg_replica_log_error(c->r, NULL) != 0 && !c->transfer_pending &&
      hg_replica_transfer(c->r, 0, handed_over, c) == 0)
    c->transfer_pending = 1;
  if (leader && !c->writable && !c->barrier_pending && c->barrier_term != term) {
    uint8_t empty[HG_PIPE_BATCH_HEADER];
    hg_st32(empty, HG_PIPE_BATCH_MAGIC);
    hg_st32(empty + 4, 0);
    if (hg_replica_propose(c->r, empty, sizeof empty, barrier_done, c) == 0) {
      c->barrier_pending = 1;
      c->barrier_term = term;
    }
  } else if (leader && !c->writable) {
    maybe_writable(c);
  } else if (c->writable && (!leader || term != c->barrier_term)) {
    c->writable = 0;
    hg_pipeline_set_writable(c->pipe, 0);
    CLOG(HG_LOG_WARN, "leadership lost: not taking orders", "term=%" PRIu64, term);
  }
}

/* ----------------------------------------------------- operator requests
 *
 * hgctl op cluster (proto/README.md, "Cluster membership"), on the leader,
 * one at a time:
 *  - add: the member table with the new member is committed first (every
 *    node then knows its client address), then libraft adds it as a spare,
 *    brings it up to date and makes it a voter; while the new member does
 *    not answer (it rebuilds itself once to load the leader's snapshot) the
 *    promotion is tried again, for ADD_CATCHUP_MS. Then the table is
 *    proposed once more (the new member has it from the snapshot, or from
 *    the log, already: this records the add's outcome in the log). An add of a spare
 *    at the same address (an earlier add that gave up) promotes it.
 *  - remove: libraft removes it (not the leader: transfer first), then the
 *    table without it is committed.
 *  - transfer: order entry stops, the commands executed so far commit,
 *    then libraft hands leadership over (the target, or the most
 *    up-to-date voter); if it fails, this node takes orders again. */

static void reply(daemon_cluster_t *c, uint32_t stream, uint64_t ref_seq, int status,
                  const char *text) {
  hg_gateway_cluster_member_t mm[HG_DCFG_MAX_MEMBERS];
  hg_gateway_cluster_reply_t r;
  memset(&r, 0, sizeof r);
  memset(mm, 0, sizeof mm);
  r.status = status;
  r.text = text;
  r.members = mm;
  if (c->r != NULL) {
    uint64_t lid = 0;
    hg_replica_leader(c->r, &lid, NULL);
    r.node_id = c->self;
    r.leader_id = (uint32_t)lid;
    r.term = hg_replica_term(c->r);
    r.commit_index = hg_replica_commit_index(c->r);
    r.applied_index = applied_now(c);
    hg_replica_progress_t p[HG_DCFG_MAX_MEMBERS];
    size_t n = progress(c->r, p);
    uint64_t last = hg_replica_last_index(c->r);
    int leader = hg_replica_role(c->r) == HG_REPLICA_LEADER;
    for (size_t i = 0; i < n; i++) {
      const cmember_t *m = member_row(c, p[i].id);
      mm[i].id = (uint32_t)p[i].id;
      snprintf(mm[i].raft_address, sizeof mm[i].raft_address, "%s", p[i].address);
      if (m != NULL) snprintf(mm[i].client_address, sizeof mm[i].client_address, "%s", m->client);
      mm[i].voter = p[i].voter;
      mm[i].match_index = p[i].match_index;
      mm[i].lag = leader && p[i].id != c->self && last > p[i].match_index
                      ? last - p[i].match_index
                      : 0;
    }
    r.n_members = n;
  }
  hg_gateway_cluster_reply(c->gw, stream, ref_seq, &r);
}

static void op_finish(daemon_cluster_t *c, int status, const char *text) {
  uint32_t stream = c->op.stream;
  uint64_t ref_seq = c->op.ref_seq;
  uint32_t id = c->op.id;
  c->op.state = OP_NONE;
  CLOG(status == 0 ? HG_LOG_INFO : HG_LOG_WARN, "operator cluster request done",
         "member=%u result=%s text=\"%s\"", id, status == 0 ? "ok" : hg_strerror(status),
         text != NULL ? text : "");
  if (!c->stopping) reply(c, stream, ref_seq, status, text);
}

static void ignore_done(void *ctx, int status, uint64_t index) {
  (void)ctx;
  (void)index;
  if (status != 0 && status != -ECANCELED)
    CLOG(HG_LOG_WARN, "a member table or API key entry was not committed", "err=%s",
           hg_strerror(status));
}

/* Proposes the table with member m set (id != 0) or member drop removed. */
static int propose_table(daemon_cluster_t *c, const cmember_t *m, uint32_t drop,
                         hg_replica_done_fn done) {
  cmember_t t[HG_DCFG_MAX_MEMBERS];
  size_t n = 0;
  for (size_t i = 0; i < c->n_members; i++)
    if (c->members[i].id != drop && (m == NULL || c->members[i].id != m->id))
      t[n++] = c->members[i];
  if (m != NULL) {
    if (n == HG_DCFG_MAX_MEMBERS) return HG_EFULL;
    t[n++] = *m;
  }
  uint8_t buf[8 + HG_DCFG_MAX_MEMBERS * MEMBER_BYTES];
  size_t len = table_encode(t, n, buf);
  return hg_replica_propose(c->r, buf, len, done, c);
}

static void add_done(void *ctx, int status) {
  daemon_cluster_t *c = ctx;
  /* A new member that installs the leader's snapshot rebuilds itself once
   * to load it: libraft gives up the catch-up meanwhile; it is a spare. */
  if (status == -ETIMEDOUT && c->r != NULL && !c->stopping &&
      uv_now(c->timer.loop) < c->op.deadline) {
    c->op.state = OP_ADD_RETRY;
    CLOG(HG_LOG_INFO, "the new member is not up to date yet: trying again", "member=%u",
           c->op.id);
    return;
  }
  if (status == 0 && c->r != NULL && !c->stopping) (void)propose_table(c, NULL, 0, ignore_done);
  op_finish(c, status,
            status == 0           ? "member added: a voter, up to date"
            : status == -ETIMEDOUT ? "the new member did not catch up in time; it stays a "
                                     "non-voting spare: add it again once it runs"
                                   : "the change did not commit (leadership lost?)");
}

static void add_table_done(void *ctx, int status, uint64_t index) {
  daemon_cluster_t *c = ctx;
  (void)index;
  if (c->op.state != OP_ADD_TABLE) return;
  if (status == 0 && (c->r == NULL || c->stopping)) status = -ECANCELED;
  if (status == 0 && c->op.promote)
    status = hg_replica_promote(c->r, c->op.id, add_done, c);
  else if (status == 0)
    status = hg_replica_add(c->r, c->op.id, c->op.m.raft, add_done, c);
  if (status == HG_EINVAL) status = HG_EEXISTS; /* libraft: a duplicate id or address */
  if (status != 0) {
    op_finish(c, status, "the member could not be added");
    return;
  }
  c->op.state = OP_ADD;
}

static void remove_done(void *ctx, int status) {
  daemon_cluster_t *c = ctx;
  if (status == 0 && c->r != NULL && !c->stopping)
    (void)propose_table(c, NULL, c->op.id, ignore_done);
  op_finish(c, status, status == 0 ? "member removed" : "the change did not commit");
}

static void op_transfer_done(void *ctx, int status) {
  daemon_cluster_t *c = ctx;
  op_finish(c, status,
            status == 0 ? "leadership transferred"
                        : "no other node took over in time: this node takes orders again");
}

/* An add whose new member is not up to date yet, from the tick. */
static void add_retry(daemon_cluster_t *c) {
  if (hg_replica_role(c->r) != HG_REPLICA_LEADER) {
    op_finish(c, HG_EPERM, "leadership was lost while the member caught up");
    return;
  }
  int rc = hg_replica_promote(c->r, c->op.id, add_done, c);
  if (rc == 0) c->op.state = OP_ADD;
  else if (rc != HG_EBUSY) op_finish(c, rc, "the new member could not be made a voter");
}

/* The transfer's first step, from the tick: once every command executed
 * here is committed, hand leadership over. */
static void transfer_step(daemon_cluster_t *c) {
  if (hg_replica_role(c->r) != HG_REPLICA_LEADER) {
    op_finish(c, HG_EPERM, "leadership was lost before the transfer");
    return;
  }
  hg_pipeline_stats_t st;
  hg_pipeline_stats(c->pipe, &st);
  if (st.committed_seq < st.last_seq) {
    if (uv_now(c->timer.loop) > c->op.deadline)
      op_finish(c, HG_EUNAVAIL, "commands executed here did not commit in time");
    return;
  }
  int rc = hg_replica_transfer(c->r, c->op.id, op_transfer_done, c);
  if (rc != 0) {
    op_finish(c, rc == HG_EINVAL ? HG_ENOTFOUND : rc, "the transfer could not start");
    return;
  }
  c->op.state = OP_TRANSFER;
}

void daemon_cluster_request(void *ctx, const hg_gateway_cluster_req_t *req, uint32_t stream,
                            uint64_t ref_seq) {
  daemon_cluster_t *c = ctx;
  if (req->op == HG_GW_CLUSTER_STATUS) {
    reply(c, stream, ref_seq, 0, NULL);
    return;
  }
  int rc = 0;
  const char *text = NULL;
  char why[sizeof c->leader_client + 40];
  hg_replica_progress_t p[HG_DCFG_MAX_MEMBERS];
  size_t n = 0, at = HG_DCFG_MAX_MEMBERS;
  if (c->r == NULL || c->stopping || atomic_load(&c->failed)) {
    rc = HG_EUNAVAIL;
    text = "this node is stopping";
  } else if (c->op.state != OP_NONE) {
    rc = HG_EBUSY;
    text = "another cluster request is under way";
  } else if (hg_replica_role(c->r) != HG_REPLICA_LEADER) {
    rc = HG_EPERM;
    snprintf(why, sizeof why, "not the leader; the leader is %s",
             c->leader_client[0] != '\0' ? c->leader_client : "unknown");
    text = why;
  } else {
    n = progress(c->r, p);
    for (size_t i = 0; i < n; i++)
      if (p[i].id == req->id) at = i;
  }
  int promote = 0; /* add of a spare at the same address: make it a voter */
  if (rc == 0 && req->op == HG_GW_CLUSTER_ADD) {
    promote = at < n && !p[at].voter && strcmp(p[at].address, req->raft_address) == 0;
    for (size_t i = 0; i < n && !promote; i++)
      if (strcmp(p[i].address, req->raft_address) == 0) at = i;
    if (at < n && !promote) {
      rc = HG_EEXISTS;
      text = "the id or the Raft address is a member's";
    }
  } else if (rc == 0 && req->op == HG_GW_CLUSTER_REMOVE) {
    if (at == n || at == HG_DCFG_MAX_MEMBERS) rc = HG_ENOTFOUND, text = "no member has that id";
    else if (req->id == c->self) rc = HG_ESTATE, text = "this node leads: transfer leadership first";
  } else if (rc == 0 && req->op == HG_GW_CLUSTER_TRANSFER && req->id != 0) {
    if (at == n || at == HG_DCFG_MAX_MEMBERS || !p[at].voter)
      rc = HG_ENOTFOUND, text = "no voting member has that id";
    else if (req->id == c->self) rc = HG_EINVAL, text = "this node is the leader already";
  }
  if (rc != 0) {
    reply(c, stream, ref_seq, rc, text);
    return;
  }
  c->op.id = req->id;
  c->op.stream = stream;
  c->op.ref_seq = ref_seq;
  CLOG(HG_LOG_INFO, "operator cluster request",
         "op=%s member=%u raft=%s client=%s",
         req->op == HG_GW_CLUSTER_ADD      ? "add"
         : req->op == HG_GW_CLUSTER_REMOVE ? "remove"
                                           : "transfer",
         req->id, req->raft_address != NULL ? req->raft_address : "-",
         req->client_address != NULL ? req->client_address : "-");
  if (req->op == HG_GW_CLUSTER_ADD) {
    memset(&c->op.m, 0, sizeof c->op.m);
    c->op.m.id = req->id;
    snprintf(c->op.m.raft, ADDR_LEN, "%s", req->raft_address);
    snprintf(c->op.m.client, ADDR_LEN, "%s", req->client_address);
    c->op.deadline = uv_now(c->timer.loop) + ADD_CATCHUP_MS;
    c->op.promote = promote;
    c->op.state = OP_ADD_TABLE;
    rc = propose_table(c, &c->op.m, 0, add_table_done);
  } else if (req->op == HG_GW_CLUSTER_REMOVE) {
    c->op.state = OP_REMOVE;
    rc = hg_replica_remove(c->r, req->id, remove_done, c);
    if (rc == HG_EINVAL) rc = HG_ENOTFOUND;
  } else {
    /* Order entry stops now; the tick hands over once the rest commits. */
    c->op.state = OP_TRANSFER_WAIT;
    c->writable = 0;
    hg_pipeline_set_writable(c->pipe, 0);
    c->op.deadline = uv_now(c->timer.loop) + 2u * c->election_ms;
    transfer_step(c);
    return;
  }
  if (rc != 0) op_finish(c, rc, "the change could not start");
}

typedef struct key_req {
  daemon_cluster_t *c;
  uint32_t stream;
  uint64_t ref_seq;
} key_req_t;

static void key_done(void *ctx, int status, uint64_t index) {
  key_req_t *q = ctx;
  (void)index;
  if (!q->c->stopping) hg_gateway_key_reply(q->c->gw, q->stream, q->ref_seq, status);
  free(q);
}

int daemon_cluster_replicate_key(void *ctx, const hg_gateway_key_t *key, uint32_t stream,
                                 uint64_t ref_seq) {
  daemon_cluster_t *c = ctx;
  if (c->r == NULL || c->stopping) return HG_EUNAVAIL;
  if (!c->writable) return HG_EPERM;
  if (key->secret_len > HG_WIRE_SECRET_MAX) return HG_EINVAL;
  key_req_t *q = malloc(sizeof *q);
  if (q == NULL) return -ENOMEM;
  *q = (key_req_t){c, stream, ref_seq};
  uint8_t buf[8 + KEY_BYTES];
  hg_st32(buf, ENTRY_KEY);
  hg_st32(buf + 4, 1);
  hg_gateway_key_encode(key, buf + 8);
  int rc = hg_replica_propose(c->r, buf, sizeof buf, key_done, q);
  hg_wipe(buf, sizeof buf);
  if (rc != 0) free(q);
  return rc;
}

int daemon_cluster_writable(daemon_cluster_t *c) { return atomic_load(&c->writable); }

int daemon_cluster_must_rebuild(daemon_cluster_t *c) { return atomic_load(&c->failed); }

const char *daemon_cluster_leader(void *ctx) {
  daemon_cluster_t *c = ctx;
  if (c->writable) return NULL;
  /* Asked of libraft now, not at the last tick: a client is never sent to
   * a leader that is gone, nor to this node while it leads but does not
   * take orders yet (it applies what earlier leaders committed): no
   * leader field, the client tries again shortly. */
  uint64_t id = 0;
  if (c->r != NULL) hg_replica_leader(c->r, &id, NULL);
  const cmember_t *m = id != 0 && id != c->self ? member_row(c, id) : NULL;
  return m != NULL ? m->client : "";
}

int daemon_cluster_open(daemon_cluster_t *c, hg_gateway_t *gw) {
  c->gw = gw;
  hg_replica_member_t m[HG_DCFG_MAX_MEMBERS];
  const char *self_addr = NULL;
  for (size_t i = 0; i < c->n_members; i++) {
    m[i].id = c->members[i].id;
    m[i].address = c->members[i].raft;
    if (c->members[i].id == c->self) self_addr = c->members[i].raft;
  }
  hg_replica_config_t rc;
  memset(&rc, 0, sizeof rc);
  rc.id = c->self;
  rc.dir = c->raft_dir;
  rc.address = self_addr;
  rc.bind_address = c->listen[0] != '\0' ? c->listen : NULL;
  rc.members = m;
  rc.n_members = c->join ? 0 : c->n_members; /* join: wait to be added */
  rc.election_timeout_ms = c->election_ms;
  rc.heartbeat_timeout_ms = c->election_ms / 10 > 0 ? c->election_ms / 10 : 10;
  rc.snapshot_threshold = c->snapshot_entries != 0 ? c->snapshot_entries : UINT_MAX;
  /* As many entries kept behind a snapshot as between two: a follower
   * further behind than that gets the snapshot. */
  rc.snapshot_trailing = c->snapshot_entries != 0 ? c->snapshot_entries : 0;
  rc.apply = apply;
  rc.snapshot_take = snapshot_take;
  rc.snapshot_release = snapshot_release;
  rc.snapshot_restore = snapshot_restore;
  rc.ctx = c;
  rc.log = hg_dlog_pipe_cb;
  rc.log_ctx = "cluster";
  if (c->tls_cert[0] != '\0') {
    rc.tls_cert = c->tls_cert;
    rc.tls_key = c->tls_key;
    rc.tls_ca = c->tls_ca;
  }
  int err = hg_replica_open(hg_gateway_loop(gw), &rc, &c->r);
  if (err != 0) {
    CLOG(HG_LOG_ERROR, "cannot open the replica", "dir=%s address=%s err=%s", c->raft_dir,
           self_addr, hg_strerror(err));
    return err;
  }
  /* The configuration committed in the Raft log is the group's truth: a
   * cluster.members that differs (a member added or removed at run time)
   * does not change it. */
  hg_replica_progress_t p[HG_DCFG_MAX_MEMBERS];
  size_t np = progress(c->r, p);
  char committed[HG_DCFG_MAX_MEMBERS * (ADDR_LEN + 16)];
  size_t at = 0, same = np == c->n_conf;
  committed[0] = '\0';
  for (size_t i = 0; i < np; i++) {
    const cmember_t *cm = NULL;
    for (size_t k = 0; k < c->n_conf; k++)
      if (c->conf[k].id == p[i].id) cm = &c->conf[k];
    same = same && cm != NULL && strcmp(cm->raft, p[i].address) == 0;
    int w = snprintf(committed + at, sizeof committed - at, "%s%" PRIu64 "=%s%s", i ? "," : "",
                     p[i].id, p[i].address, p[i].voter ? "" : "(spare)");
    if (w > 0 && (size_t)w < sizeof committed - at) at += (size_t)w;
  }
  if (np == 0)
    CLOG(HG_LOG_INFO, "waiting to be added to the group (cluster.join)",
           "id=%u address=%s", c->self, self_addr);
  else if (!same)
    CLOG(HG_LOG_WARN, "cluster.members differs from the group's committed configuration: following the group",
           "configured=\"%s\" committed=\"%s\"", c->cfg_members, committed);
  CLOG(HG_LOG_INFO, "replica open", "id=%u address=%s listen=%s members=%zu dir=%s tls=%s",
         c->self, self_addr, c->listen[0] != '\0' ? c->listen : self_addr, np, c->raft_dir,
         c->tls_cert[0] != '\0' ? "on" : "off");
  return 0;
}

void daemon_cluster_start(daemon_cluster_t *c, hg_pipeline_t *pipe) {
  c->pipe = pipe;
  if (c->routes != NULL) {
    int rc = hg_gateway_seed_routes(c->gw, c->routes, c->routes_len);
    if (rc != 0) /* reports then go where a single node's restart sends them */
      CLOG(HG_LOG_ERROR, "the snapshot's route state is not usable: ignored", "err=%s",
             hg_strerror(rc));
    free(c->routes);
    c->routes = NULL;
  }
  hg_gateway_set_epoch(c->gw, hg_replica_term(c->r));
  uv_loop_t *loop = hg_gateway_loop(c->gw);
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
  uv_timer_init(loop, &c->retry);
  c->retry.data = c;
  uv_timer_start(&c->timer, on_tick, TICK_MS, TICK_MS);
}

static void replica_closed(void *ctx, int status) {
  daemon_cluster_t *c = ctx;
  (void)status;
  hg_gateway_close_handles(c->gw);
}

static void transfer_done(void *ctx, int status) {
  daemon_cluster_t *c = ctx;
  c->transfer_pending = 0;
  CLOG(status == 0 ? HG_LOG_INFO : HG_LOG_WARN, "leadership transfer at stop",
         "result=%s", status == 0 ? "done" : hg_strerror(status));
}

void daemon_cluster_loop_stop(void *ctx) {
  daemon_cluster_t *c = ctx;
  hg_pipeline_set_writable(c->pipe, 0);
  c->writable = 0;
  c->stopping = 1;
  c->drain_deadline = uv_now(c->timer.loop) + 2u * c->election_ms + 100u;
  /* A leader that stops hands leadership to the most up-to-date follower
   * first, so that order entry pauses for a transfer, not an election;
   * once what it executed is committed (close_when_done, within an
   * election timeout). */
  if (!atomic_load(&c->failed) && hg_replica_role(c->r) == HG_REPLICA_LEADER) {
    c->transfer_wanted = 1;
    c->settle_deadline = uv_now(c->timer.loop) + c->election_ms;
  }
}

void daemon_cluster_status(daemon_cluster_t *c, daemon_cluster_status_t *out) {
  memset(out, 0, sizeof *out);
  out->id = c->self;
  out->role = atomic_load(&c->role);
  out->term = atomic_load(&c->term);
  /* Applied before commit: set_applied() and publish() store the commit
   * index first, so applied <= commit in what this returns. */
  out->applied_index = atomic_load(&c->applied);
  out->commit_index = atomic_load(&c->commit);
  out->last_index = atomic_load(&c->last);
  out->leader = atomic_load(&c->leader);
  out->tls_failures = atomic_load(&c->tls_failures);
  out->apply_queued = atomic_load(&c->q_entries);
  out->apply_queued_bytes = atomic_load(&c->q_bytes);
  out->apply_queued_total = atomic_load(&c->q_total);
  out->leader_commit = atomic_load(&c->leader_commit);
  out->caught_up = atomic_load(&c->caught_up);
  pthread_mutex_lock(&c->mu);
  out->log_error = c->log_error;
  snprintf(out->log_errmsg, sizeof out->log_errmsg, "%s", c->log_errmsg);
  out->n_members = c->n_prog;
  memcpy(out->members, c->prog, c->n_prog * sizeof c->prog[0]);
  pthread_mutex_unlock(&c->mu);
}

const char *daemon_cluster_role_name(int role) {
  switch (role) {
    case HG_REPLICA_FOLLOWER: return "follower";
    case HG_REPLICA_CANDIDATE: return "candidate";
    case HG_REPLICA_LEADER: return "leader";
    default: return "unavailable";
  }
}

void daemon_cluster_destroy(daemon_cluster_t *c) {
  if (c == NULL) return;
  queue_clear(c);
  free(c->boot);
  free(c->routes);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
