/*
 * cluster.h (internal) - hourglassd as one node of a Raft group: the
 * replica on the gateway's loop, the pipeline's batches proposed as Raft
 * entries, committed entries applied on every node, order entry only on
 * the leader, and the status /health and /metrics report. cluster.c
 * describes the design.
 *
 * Lifecycle (main thread): daemon_cluster_create (before the pipeline
 * opens: it empties data_dir/engine, which the pipeline then uses) ->
 * gateway config order_entry_leader = daemon_cluster_leader, loop_stop
 * = daemon_cluster_loop_stop, cluster_request = daemon_cluster_request
 * and replicate_key = daemon_cluster_replicate_key, ctx the cluster ->
 * hg_gateway_create ->
 * daemon_cluster_open (the replica on the gateway's loop; restores the
 * newest Raft snapshot) -> pipeline config replicate =
 * daemon_cluster_replicate -> daemon_cluster_seed -> hg_pipeline_open ->
 * hg_gateway_attach -> hg_pipeline_start -> daemon_cluster_start ->
 * hg_gateway_start -> ... -> hg_gateway_stop (closes the replica on the
 * loop) -> daemon_cluster_destroy.
 */
#ifndef HG_DAEMON_CLUSTER_H
#define HG_DAEMON_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "daemon_config.h"
#include "hourglass/gateway.h"
#include "hourglass/pipeline.h"
#include "hourglass/replica.h"

typedef struct daemon_cluster daemon_cluster_t;

/* What /health and /metrics show; any thread. */
typedef struct daemon_cluster_status {
  uint32_t id;
  int role;                /* hg_replica_role_t */
  uint64_t term, commit_index, applied_index, last_index, leader;
  uint64_t tls_failures;   /* Raft connections refused by TLS (hg_replica_tls_failures) */
  uint64_t apply_queued;       /* committed entries waiting to be applied here */
  uint64_t apply_queued_bytes; /* their bytes */
  uint64_t apply_queued_total; /* entries ever queued (a counter) */
  uint64_t leader_commit;  /* the group's commit index as last heard (0: not yet) */
  int caught_up;           /* 1 once applied up to leader_commit (or taking orders) */
  int log_error;           /* 0, or why the last write to cluster.dir failed */
  char log_errmsg[256];    /* its text ("" when log_error is 0) */
  size_t n_members;
  hg_replica_progress_t members[HG_DCFG_MAX_MEMBERS];
} daemon_cluster_status_t;

/* Parses the members, empties data_dir/engine and creates the Raft
 * directory (cluster.dir, or data_dir/raft); the member addresses the
 * group last committed (saved in the Raft directory) replace
 * cluster.members' (logged when they differ). 0 or -errno / HG_EINVAL
 * (logged). Main thread. */
int daemon_cluster_create(const hg_daemon_config_t *cfg, daemon_cluster_t **out);

/* The pipeline's data directory in cluster mode (data_dir/engine, empty at
 * start: the state comes from the group). Valid until destroy. */
const char *daemon_cluster_engine_dir(const daemon_cluster_t *c);

/* Opens the replica on the gateway's loop (which must not run yet); a
 * Raft snapshot it restores is kept for daemon_cluster_seed(). 0 or the
 * replica's error (logged). Main thread. */
int daemon_cluster_open(daemon_cluster_t *c, hg_gateway_t *gw);

/* Writes the snapshot daemon_cluster_open() restored, if any, as the
 * newest snapshot of data_dir/engine/state (with pc's exchange limits and
 * map size), for hg_pipeline_open() to recover from. 0 or the error
 * (logged). Main thread, before the pipeline opens. */
int daemon_cluster_seed(daemon_cluster_t *c, const hg_pipeline_config_t *pc);

/* Gives the cluster the started pipeline and starts the role timer. Main
 * thread, before hg_gateway_start(). */
void daemon_cluster_start(daemon_cluster_t *c, hg_pipeline_t *pipe);

/* hg_pipeline_config_t.replicate (ctx: the cluster). Loop thread. */
int daemon_cluster_replicate(void *ctx, const void *batch, size_t len, uint64_t last_seq);

/* hg_gateway_config_t.order_entry_leader and .loop_stop. Loop thread. */
const char *daemon_cluster_leader(void *ctx);
void daemon_cluster_loop_stop(void *ctx);

/* hg_gateway_config_t.cluster_request: an operator's status, add, remove
 * or transfer (cluster.c, "operator requests"), answered with
 * hg_gateway_cluster_reply() at once or when the change completes. Loop
 * thread. */
void daemon_cluster_request(void *ctx, const hg_gateway_cluster_req_t *req, uint32_t stream,
                            uint64_t ref_seq);

/* hg_gateway_config_t.replicate_key: proposes an operator's API key to the
 * group (every node stores it when committed); HG_EPERM when this node
 * does not take orders. Loop thread. */
int daemon_cluster_replicate_key(void *ctx, const hg_gateway_key_t *key, uint32_t stream,
                                 uint64_t ref_seq);

void daemon_cluster_status(daemon_cluster_t *c, daemon_cluster_status_t *out);

/* 1 while this node takes orders (the leader, caught up). Any thread. */
int daemon_cluster_writable(daemon_cluster_t *c);

/* 1 once this node must be rebuilt from the group (a snapshot installed
 * from the leader, or a failure): serve.c then rebuilds it in place. Any
 * thread. */
int daemon_cluster_must_rebuild(daemon_cluster_t *c);

/* "leader", "follower", "candidate" or "unavailable". */
const char *daemon_cluster_role_name(int role);

/* After the gateway's loop has stopped. NULL: no-op. */
void daemon_cluster_destroy(daemon_cluster_t *c);

#endif
