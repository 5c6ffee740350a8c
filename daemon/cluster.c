/*
 * cluster.c - hourglassd as one node of a Raft group (cluster.id set): the
 * glue between the replica (hourglass/replica.h), the pipeline in cluster
 * mode (hourglass/pipeline.h, "Cluster mode") and the gateway, all on the
 * gateway's loop thread.
 *
 *  - The pipeline hands each iteration's batch of sequenced records to
 *    cluster_replicate(), which proposes it as one Raft entry.
 *  - Every committed entry, on every node, goes through cluster_apply() to
 *    hg_pipeline_apply_batch(): followers apply it, the leader (which
 *    executed it when it sequenced it) only learns it is committed, and the
 *    results are released to clients from then on.
 *  - A timer polls the replica (libraft 0.15 has no role callback): a new
 *    leader proposes an empty batch (a barrier) and takes orders once that
 *    is committed, i.e. once it has applied every entry of earlier terms,
 *    and its gateway has routed their results; any other role takes none.
 *    Its first command then (if any order is session-scoped) is the
 *    gateway's SESSIONS_ENDED: every session was on the previous leader.
 *    The timer also publishes role, term, indexes and per-member progress
 *    for /health and /metrics.
 *  - Every record of a batch carries its route (the gateway's
 *    hg_gateway_route_out / hg_gateway_route_in, pipeline.h "Routes"), so
 *    every node sequences each result into the same key's stream.
 *  - A proposal the group lost (done with an error) leaves this node with
 *    commands applied that the group may not hold: the pipeline fails and
 *    the daemon exits (serve.c); a restart rebuilds the node from the group.
 *
 * A clean stop of the leader (SIGTERM) first transfers leadership to the
 * most up-to-date follower (bounded by two election timeouts), then closes.
 *
 * Snapshots. Every cluster.snapshot_entries applied entries libraft asks
 * for one: the exchange's serialization (as in the LMDB snapshots), taken
 * on the loop thread when the state is exactly the applied entries (not
 * on a leader with commands executed ahead of the commit: it is asked
 * again after the next entry). libraft keeps it in the Raft directory,
 * trims the log to cluster.snapshot_entries entries behind it and sends
 * it to a follower further behind than that.
 *
 * The node's state is rebuilt at every start: the pipeline's directory
 * (data_dir/engine) is emptied; the newest Raft snapshot, if any, is
 * written to data_dir/engine/state before the pipeline opens (which
 * recovers from it, so the gateway and the market view are seeded from
 * it), and libraft re-applies the committed entries after it. A snapshot
 * installed while the node runs cannot replace the state under the
 * gateway: the node stops (exit 1) and its restart loads it. Threads: everything here runs on the gateway's loop thread
 * except daemon_cluster_create/open/destroy (main thread, loop not
 * running) and daemon_cluster_status (any thread: atomics and a mutex).
 */
#include "cluster.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_log.h"
#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "hourglass/journal.h"
#include "hourglass/store.h"
#include "hourglassd.h"

#define TICK_MS 20

struct daemon_cluster {
  hg_dcfg_member_t members[HG_DCFG_MAX_MEMBERS];
  size_t n_members;
  uint32_t self;
  char raft_dir[HG_DCFG_PATH_MAX + 8];
  char engine_dir[HG_DCFG_PATH_MAX + 8];
  unsigned election_ms, snapshot_entries;
  char tls_cert[HG_DCFG_PATH_MAX]; /* cluster.tls_*; "" = plain TCP */
  char tls_key[HG_DCFG_PATH_MAX];
  char tls_ca[HG_DCFG_PATH_MAX];
  uint8_t *boot;      /* the snapshot restored at open (owned), NULL: none */
  size_t boot_len;

  /* Loop thread (the main thread before the loop runs). */
  hg_pipeline_t *pipe; /* not owned */
  hg_gateway_t *gw;    /* not owned */
  hg_replica_t *r;     /* owned; NULL once closed */
  uv_timer_t timer;
  _Atomic int writable; /* also read by the demo thread */
  int barrier_pending;
  uint64_t barrier_term;      /* term of the barrier proposed (0: none) */
  uint64_t barrier_done_term; /* term whose barrier is committed */
  uint64_t leader_id;
  int stopping;          /* loop_stop ran: close once no transfer is pending */
  int transfer_pending;
  uint64_t stop_deadline; /* uv_now() after which the transfer is not waited for */
  char leader_client[HG_DCFG_ADDR_MAX + 8];

  /* Published for other threads. */
  _Atomic int role;
  _Atomic uint64_t term, commit, applied, last, leader, tls_failures;
  _Atomic int failed, closed;
  pthread_mutex_t mu; /* guards prog, n_prog */
  hg_replica_progress_t prog[HG_DCFG_MAX_MEMBERS];
  size_t n_prog;
};

static void logf_c(int level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_c(int level, const char *msg, const char *fmt, ...) {
  char kv[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(kv, sizeof kv, fmt, ap);
  va_end(ap);
  hg_dlog(level, "cluster", msg, "%s", kv);
}

static void replica_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  hg_dlog(level, "cluster", msg, NULL);
}

/* ------------------------------------------------------------- data dirs */

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  (void)type;
  (void)ftw;
  return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

/* Empties dir (removes it and everything under it). 0 or -errno. */
static int remove_tree(const char *dir) {
  if (access(dir, F_OK) != 0) return errno == ENOENT ? 0 : -errno;
  return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -errno;
}

int daemon_cluster_create(const hg_daemon_config_t *cfg, daemon_cluster_t **out) {
  daemon_cluster_t *c = calloc(1, sizeof *c);
  if (c == NULL) return -ENOMEM;
  hg_dcfg_error_t err;
  int rc = hg_daemon_config_members(cfg, c->members, &c->n_members, &err);
  if (rc != 0) {
    free(c);
    return rc;
  }
  c->self = cfg->cluster_id;
  c->election_ms = cfg->cluster_election_ms;
  c->snapshot_entries = cfg->cluster_snapshot_entries;
  snprintf(c->tls_cert, sizeof c->tls_cert, "%s", cfg->cluster_tls_cert);
  snprintf(c->tls_key, sizeof c->tls_key, "%s", cfg->cluster_tls_key);
  snprintf(c->tls_ca, sizeof c->tls_ca, "%s", cfg->cluster_tls_ca);
  if (cfg->cluster_dir[0] != '\0')
    snprintf(c->raft_dir, sizeof c->raft_dir, "%s", cfg->cluster_dir);
  else
    snprintf(c->raft_dir, sizeof c->raft_dir, "%s/raft", cfg->data_dir);
  snprintf(c->engine_dir, sizeof c->engine_dir, "%s/engine", cfg->data_dir);
  pthread_mutex_init(&c->mu, NULL);
  rc = remove_tree(c->engine_dir);
  if (rc == 0) rc = daemon_mkdir_p(c->engine_dir);
  if (rc == 0) rc = daemon_mkdir_p(c->raft_dir);
  if (rc != 0) {
    logf_c(HG_LOG_ERROR, "cannot prepare the directories", "raft=%s engine=%s err=%s",
           c->raft_dir, c->engine_dir, hg_strerror(rc));
    pthread_mutex_destroy(&c->mu);
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

const char *daemon_cluster_engine_dir(const daemon_cluster_t *c) { return c->engine_dir; }

/* ------------------------------------------------------------ the group */

static const hg_dcfg_member_t *member(const daemon_cluster_t *c, uint64_t id) {
  for (size_t i = 0; i < c->n_members; i++)
    if (c->members[i].id == id) return &c->members[i];
  return NULL;
}

static void discard_event(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

static void fail(daemon_cluster_t *c, int rc, const char *why) {
  if (atomic_exchange(&c->failed, 1) == 0)
    logf_c(HG_LOG_ERROR, "this node must be rebuilt from the group: restart it",
           "reason=\"%s\" err=%s", why, hg_strerror(rc));
  c->writable = 0;
  hg_pipeline_set_writable(c->pipe, 0);
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

static int apply(void *ctx, uint64_t index, const void *data, size_t len) {
  daemon_cluster_t *c = ctx;
  int rc = hg_pipeline_apply_batch(c->pipe, data, len);
  /* The stage is full: let the consumers take what is released, then go
   * on from the first record not applied (the batch skips applied seqs). */
  for (int tries = 0; rc == HG_EBUSY && tries < 5000; tries++) {
    if (c->gw != NULL) hg_gateway_drain(c->gw);
    rc = hg_pipeline_apply_batch(c->pipe, data, len);
    if (rc == HG_EBUSY) usleep(1000);
  }
  atomic_store(&c->applied, index);
  if (rc != 0) fail(c, rc, "a committed batch could not be applied");
  return rc;
}

/* The exchange's serialization (what the LMDB snapshots hold), when it
 * is the state after the entries applied: not on a leader that executed
 * commands not yet committed (libraft asks again after the next entry). */
static int snapshot_take(void *ctx, uint64_t index, const void **data, size_t *len) {
  daemon_cluster_t *c = ctx;
  (void)index;
  if (c->pipe == NULL) return HG_ESTATE;
  hg_pipeline_stats_t st;
  hg_pipeline_stats(c->pipe, &st);
  if (st.last_seq != st.committed_seq) return HG_EBUSY;
  /* The loop thread owns the exchange in loop mode. */
  const hg_exchange_t *ex = hg_pipeline_exchange(c->pipe);
  size_t need = hg_exchange_serialized_size(ex), n = 0;
  uint8_t *b = malloc(need);
  if (b == NULL) return -ENOMEM;
  int rc = hg_exchange_serialize(ex, b, need, &n);
  if (rc != 0) {
    free(b);
    return rc;
  }
  *data = b;
  *len = n;
  return 0;
}

static void snapshot_release(void *ctx, const void *data, size_t len) {
  (void)ctx;
  (void)len;
  free((void *)data);
}

/* At open the snapshot is kept for daemon_cluster_seed(). A snapshot
 * installed while the node runs cannot replace the state under the
 * gateway's mirror: the node stops, and its restart loads it. */
static int snapshot_restore(void *ctx, uint64_t index, const void *data, size_t len) {
  daemon_cluster_t *c = ctx;
  if (c->pipe != NULL) {
    fail(c, HG_ESTATE, "a snapshot was installed from the leader: a restart loads it");
    return HG_ESTATE;
  }
  free(c->boot);
  c->boot = malloc(len);
  if (c->boot == NULL) return -ENOMEM;
  memcpy(c->boot, data, len);
  c->boot_len = len;
  logf_c(HG_LOG_INFO, "snapshot to start from", "index=%" PRIu64 " bytes=%zu", index, len);
  return 0;
}

int daemon_cluster_seed(daemon_cluster_t *c, const hg_pipeline_config_t *pc) {
  if (c->boot == NULL) return 0;
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
  /* The journal starts after the snapshot: an empty segment at its seq + 1
   * (the pipeline refuses a snapshot whose journal holds no segment). */
  char jdir[HG_DCFG_PATH_MAX + 16];
  snprintf(jdir, sizeof jdir, "%s/journal", c->engine_dir);
  if (rc == 0) rc = daemon_mkdir_p(jdir);
  if (rc == 0) {
    hg_journal_options_t jo = pc->journal;
    jo.first_seq = hg_exchange_last_seq(ex) + 1;
    jo.durable_floor = 0;
    jo.mark_path = NULL;
    jo.log = NULL;
    hg_journal_t *j = NULL;
    rc = hg_journal_open(jdir, &jo, &j);
    if (rc == 0) rc = hg_journal_close(j);
  }
  if (rc != 0)
    logf_c(HG_LOG_ERROR, "cannot write the group's snapshot to the state store",
           "dir=%s err=%s %s", state, hg_strerror(rc), s != NULL ? hg_store_errmsg(s) : "");
  else
    logf_c(HG_LOG_INFO, "state store seeded from the group's snapshot", "last_seq=%" PRIu64,
           hg_exchange_last_seq(ex));
  hg_store_close(s);
  hg_exchange_destroy(ex);
  free(c->boot);
  c->boot = NULL;
  return rc;
}

/* A leader takes orders once its barrier is committed (every entry of
 * earlier terms is applied) and the gateway has routed every result up to
 * there (its mirror answers order status and positions for all of them). */
static void maybe_writable(daemon_cluster_t *c) {
  if (c->writable || c->barrier_done_term == 0 || c->barrier_done_term != c->barrier_term)
    return;
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
    logf_c(HG_LOG_WARN, "new leader: cannot submit SESSIONS_ENDED yet", "err=%s",
           hg_strerror(rc));
    return;
  }
  c->writable = 1;
  logf_c(HG_LOG_INFO, "leader: taking orders",
         "term=%" PRIu64 " applied_index=%" PRIu64 " last_seq=%" PRIu64, c->barrier_term,
         hg_replica_applied_index(c->r), st.last_seq);
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
    logf_c(HG_LOG_INFO, "role changed", "role=%s term=%" PRIu64 " commit_index=%" PRIu64
           " last_index=%" PRIu64, daemon_cluster_role_name(role), hg_replica_term(r),
           hg_replica_commit_index(r), hg_replica_last_index(r));
  atomic_store(&c->role, role);
  atomic_store(&c->term, hg_replica_term(r));
  atomic_store(&c->commit, hg_replica_commit_index(r));
  atomic_store(&c->applied, hg_replica_applied_index(r));
  atomic_store(&c->last, hg_replica_last_index(r));
  atomic_store(&c->tls_failures, hg_replica_tls_failures(r));
  uint64_t id = 0;
  const char *addr = NULL;
  hg_replica_leader(r, &id, &addr);
  atomic_store(&c->leader, id);
  if (id != c->leader_id) {
    c->leader_id = id;
    const hg_dcfg_member_t *m = member(c, id);
    if (m != NULL)
      snprintf(c->leader_client, sizeof c->leader_client, "%s:%u", m->client.host,
               m->client.port);
    else
      c->leader_client[0] = '\0';
    logf_c(HG_LOG_INFO, "leader changed", "leader=%" PRIu64 " term=%" PRIu64, id,
           hg_replica_term(r));
  }
  pthread_mutex_lock(&c->mu);
  c->n_prog = hg_replica_progress(r, c->prog, HG_DCFG_MAX_MEMBERS);
  if (c->n_prog > HG_DCFG_MAX_MEMBERS) c->n_prog = HG_DCFG_MAX_MEMBERS;
  pthread_mutex_unlock(&c->mu);
}

static void replica_closed(void *ctx, int status);

/* Stopping: once the leadership transfer (if any) is over, or took too
 * long, the timer and the replica close (not from a replica callback). */
static void close_when_done(daemon_cluster_t *c) {
  if (c->transfer_pending && uv_now(c->timer.loop) < c->stop_deadline) return;
  uv_close((uv_handle_t *)&c->timer, NULL);
  hg_replica_t *r = c->r;
  c->r = NULL;
  hg_replica_close(r, replica_closed, c);
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
  int leader = hg_replica_role(c->r) == HG_REPLICA_LEADER;
  uint64_t term = hg_replica_term(c->r);
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
    logf_c(HG_LOG_WARN, "leadership lost: not taking orders", "term=%" PRIu64, term);
  }
}

int daemon_cluster_writable(daemon_cluster_t *c) { return atomic_load(&c->writable); }

const char *daemon_cluster_leader(void *ctx) {
  daemon_cluster_t *c = ctx;
  if (c->writable) return NULL;
  return c->leader_client;
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
  rc.members = m;
  rc.n_members = c->n_members;
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
  rc.log = replica_log;
  if (c->tls_cert[0] != '\0') {
    rc.tls_cert = c->tls_cert;
    rc.tls_key = c->tls_key;
    rc.tls_ca = c->tls_ca;
  }
  int err = hg_replica_open(hg_gateway_loop(gw), &rc, &c->r);
  if (err != 0) {
    logf_c(HG_LOG_ERROR, "cannot open the replica", "dir=%s address=%s err=%s", c->raft_dir,
           self_addr, hg_strerror(err));
    return err;
  }
  logf_c(HG_LOG_INFO, "replica open", "id=%u address=%s members=%zu dir=%s tls=%s", c->self,
         self_addr, c->n_members, c->raft_dir, c->tls_cert[0] != '\0' ? "on" : "off");
  return 0;
}

void daemon_cluster_start(daemon_cluster_t *c, hg_pipeline_t *pipe) {
  c->pipe = pipe;
  uv_loop_t *loop = hg_gateway_loop(c->gw);
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
  uv_timer_start(&c->timer, on_tick, TICK_MS, TICK_MS);
}

static void replica_closed(void *ctx, int status) {
  daemon_cluster_t *c = ctx;
  (void)status;
  atomic_store(&c->closed, 1);
  hg_gateway_close_handles(c->gw);
}

static void transfer_done(void *ctx, int status) {
  daemon_cluster_t *c = ctx;
  c->transfer_pending = 0;
  logf_c(status == 0 ? HG_LOG_INFO : HG_LOG_WARN, "leadership transfer at stop",
         "result=%s", status == 0 ? "done" : hg_strerror(status));
}

void daemon_cluster_loop_stop(void *ctx) {
  daemon_cluster_t *c = ctx;
  hg_pipeline_set_writable(c->pipe, 0);
  c->writable = 0;
  c->stopping = 1;
  /* A leader that stops hands leadership to the most up-to-date follower
   * first, so that order entry pauses for a transfer, not an election. */
  if (!atomic_load(&c->failed) && hg_replica_role(c->r) == HG_REPLICA_LEADER &&
      hg_replica_transfer(c->r, 0, transfer_done, c) == 0) {
    c->transfer_pending = 1;
    c->stop_deadline = uv_now(c->timer.loop) + 2u * c->election_ms + 100u;
  }
}

void daemon_cluster_status(daemon_cluster_t *c, daemon_cluster_status_t *out) {
  memset(out, 0, sizeof *out);
  out->id = c->self;
  out->role = atomic_load(&c->role);
  out->term = atomic_load(&c->term);
  out->commit_index = atomic_load(&c->commit);
  out->applied_index = atomic_load(&c->applied);
  out->last_index = atomic_load(&c->last);
  out->leader = atomic_load(&c->leader);
  out->failed = atomic_load(&c->failed);
  out->tls_failures = atomic_load(&c->tls_failures);
  pthread_mutex_lock(&c->mu);
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
  free(c->boot);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
