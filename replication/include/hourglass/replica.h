/*
 * hourglass/replica.h - one node of a Raft group that replicates opaque
 * entries (one sequenced command batch each) to a deterministic state machine.
 *
 * Consensus, the replicated log, its storage and the transport are libraft's
 * (Debian libraft-dev 0.15: raft_uv keeps the log, term, vote and snapshots in
 * a directory; raft_uv_tcp carries the RPCs over TCP, or this module's own
 * transport carries them over mutually authenticated TLS 1.3, see "TLS"
 * below). This module wraps one
 * libraft server: it bootstraps a fresh group, turns proposals into log
 * entries, hands committed entries to the caller's apply function in log order
 * with their index, maps snapshots onto an opaque blob the caller produces and
 * consumes, and reports roles, indexes and per-follower progress.
 *
 * ---------------------------------------------------------------------------
 * Threads and ownership
 * ---------------------------------------------------------------------------
 * A replica lives on a libuv loop the caller owns and runs. Every function
 * here must be called on the loop's thread, and every callback (apply,
 * snapshot, done, change, transfer, close, log) runs on that thread, from
 * inside uv_run(). libraft uses the loop's thread pool and kernel AIO for
 * disk writes internally; none of that calls back on another thread. Several
 * replicas may share one loop (the tests run a whole group on one loop).
 *
 * The hg_replica_t is allocated by hg_replica_open() and released by
 * hg_replica_close() once its callback has run. Strings and arrays in the
 * config are copied by open; the caller may free them when open returns.
 *
 * ---------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------------
 * Functions return 0 or a negative code (hourglass/error.h): -errno for
 * system errors (-ENOMEM, -EIO, -ENOSPC, -ENOENT for a missing directory,
 * -ECANCELED for work stopped by close), HG_E* for the rest. libraft's own
 * codes are converted at the boundary; hg_replica_errmsg() gives libraft's
 * text for the last failed call. As in libuv, when a call that takes a
 * callback fails, that callback is never called.
 *   HG_EPERM     not the leader (propose, add, remove, transfer). The leader
 *                this node knows, if any, is given by hg_replica_leader().
 *   HG_EUNAVAIL  leadership was lost before the entry committed. The outcome
 *                is unknown: a new leader may still commit it.
 *   HG_EBUSY     a membership change or transfer is already in progress, or
 *                max_pending proposals are outstanding.
 *   HG_EINVAL    bad argument (id 0, duplicate ids, empty entry, ...).
 *   HG_ESTATE    the replica is closing.
 *
 * ---------------------------------------------------------------------------
 * The state machine contract
 * ---------------------------------------------------------------------------
 * apply(ctx, index, data, len) is called on every node for every committed
 * entry, in strictly increasing index order, exactly once per process
 * lifetime for each index after the state the node last restored. Indexes are
 * libraft's log indexes: they are not contiguous in the apply calls, because
 * libraft's own configuration and barrier entries take indexes too. data is
 * valid only during the call. apply must be deterministic; a nonzero return
 * stops this node's applying (libraft offers the same entry again later), so
 * treat it as fatal: logged as an error, except HG_EUNAVAIL (the state
 * machine stopped taking entries on purpose, e.g. until the node is reopened;
 * debug level).
 *
 * Restart. libraft does not know how far a durable state machine got, so
 * after hg_replica_open() the caller's state must be the empty state: the
 * node restores its latest snapshot (snapshot_restore) if it has one and then
 * re-applies every committed entry after it. A new or lagging node that is
 * further behind than the leader's retained log receives the leader's latest
 * snapshot (install) and restores it the same way.
 *
 * Snapshots. Every snapshot_threshold applied entries libraft asks for a
 * snapshot: snapshot_take(ctx, index, &data, &len) must describe the state
 * after every entry applied so far; index is libraft's last applied index,
 * which may be past the last entry apply saw (a configuration entry). The bytes stay owned by the caller and
 * must stay valid and unchanged until snapshot_release(ctx, data, len), which
 * libraft triggers once they are written (or the write failed). The module
 * prefixes them with a 16-byte header (magic, index) before they reach disk
 * or a follower. snapshot_take may refuse with HG_EBUSY when its state cannot
 * be described now (logged at debug level; libraft asks again after the next
 * applied entry); any other error is logged as a warning.
 * snapshot_restore(ctx, index, data, len) replaces the whole
 * state with a snapshot taken at index (the next apply has a higher index); data is valid during the call only.
 * A snapshot installed by the leader is stored in dir (replacing the log)
 * before snapshot_restore is called, and the leader goes on from its index
 * once the call returns 0. A state machine that cannot replace its state
 * while it runs returns 0 all the same, refuses every apply with
 * HG_EUNAVAIL and reopens the replica: open restores the stored snapshot.
 * (An error from snapshot_restore is answered to the leader as a refusal;
 * libraft 0.15's leader then waits its install-snapshot timeout, 30 s,
 * before it sends this node anything again.)
 *
 * ---------------------------------------------------------------------------
 * TLS
 * ---------------------------------------------------------------------------
 * With tls_cert, tls_key and tls_ca set (all three or none), every Raft
 * connection is TLS 1.3 with certificates on both sides. A peer is accepted
 * only with a certificate that chains to a CA in tls_ca and names the
 * member: the DNS subjectAltName "hourglass-node-<id>" (or, when the
 * certificate has no DNS subjectAltName, that subject CN), where <id> is
 * the id this node connects to, or the id a connecting node declares right
 * after the handshake. The address is not part of the identity, so a node
 * can move without a new certificate. Extended key usage, if the
 * certificate has one, must include serverAuth and clientAuth. Open checks
 * that this node's own certificate names it. The files are read once, at
 * open: a new certificate takes effect at the next open.
 * Connections that fail the handshake or the identity check, send garbage,
 * do not finish within 5 s, or arrive while 64 others are in their
 * handshake are closed and counted
 * (hg_replica_tls_failures) and logged as warnings with the peer address
 * and OpenSSL's reason, at most about one line a second. TLS costs a copy
 * through a socketpair per message and direction besides the encryption.
 * Without TLS the RPCs are plain TCP without authentication: anyone who
 * reaches the port can join the protocol, so use it only on one machine
 * or a network only the members reach.
 *
 * ---------------------------------------------------------------------------
 * Limits
 * ---------------------------------------------------------------------------
 *  - One entry per proposal, at most HG_REPLICA_MAX_ENTRY bytes; propose
 *    copies the bytes (libraft owns the copy) and libraft allocates per entry.
 *  - At most max_pending proposals outstanding on a node (fixed pool).
 *  - One membership change and one leadership transfer at a time.
 *  - Do not call hg_replica_close() from inside a replica callback.
 *  - Writes to a peer that has gone raise SIGPIPE: the process must ignore
 *    it, or block it on the loop's thread (hourglassd ignores it).
 *  - Without TLS the transport has no authentication: peers are trusted
 *    hosts.
 */
#ifndef HOURGLASS_REPLICA_H
#define HOURGLASS_REPLICA_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "hourglass/log.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HG_REPLICA_MAX_ENTRY (64u << 20)  /* bytes in one proposed entry */
#define HG_REPLICA_MAX_MEMBERS 16          /* members in a bootstrap list */
#define HG_REPLICA_ADDRESS_MAX 64          /* "ip:port", NUL included */

typedef struct hg_replica hg_replica_t;

typedef enum hg_replica_role {
  HG_REPLICA_UNAVAILABLE = 0,  /* starting, closing or failed */
  HG_REPLICA_FOLLOWER = 1,
  HG_REPLICA_CANDIDATE = 2,
  HG_REPLICA_LEADER = 3
} hg_replica_role_t;

/* A member of the group: id > 0, address "a.b.c.d:port" (IPv4). */
typedef struct hg_replica_member {
  uint64_t id;
  const char *address;
} hg_replica_member_t;

/* Calls into the state machine; see "The state machine contract" above. */
typedef int (*hg_replica_apply_fn)(void *ctx, uint64_t index, const void *data,
                                   size_t len);
typedef int (*hg_replica_snapshot_take_fn)(void *ctx, uint64_t index,
                                           const void **data, size_t *len);
typedef void (*hg_replica_snapshot_release_fn)(void *ctx, const void *data,
                                               size_t len);
typedef int (*hg_replica_snapshot_restore_fn)(void *ctx, uint64_t index,
                                              const void *data, size_t len);

/* Completion of a proposal. status 0: the entry is committed (durable on a
 * majority) and has been applied on this node at index. Otherwise index is
 * the index the entry was given (0 if none) and status is HG_EUNAVAIL
 * (leadership lost, outcome unknown), -ECANCELED (close) or another error. */
typedef void (*hg_replica_done_fn)(void *ctx, int status, uint64_t index);

/* Completion of a membership change, a transfer or a close. */
typedef void (*hg_replica_cb)(void *ctx, int status);

typedef struct hg_replica_config {
  uint64_t id;                 /* this node, > 0 */
  const char *dir;             /* existing directory, raft_uv's files */
  const char *address;         /* this node as the others reach it */
  const char *bind_address;    /* "ip:port" to listen on; NULL: address */
  /* The group to bootstrap when dir holds no Raft state: every member votes,
   * and this node must be among them. Ignored when dir has state. Zero
   * members: never bootstrap; the node waits to be added by the leader. */
  const hg_replica_member_t *members;
  size_t n_members;
  unsigned election_timeout_ms;   /* 0: 1000; randomized to 1x..2x */
  unsigned heartbeat_timeout_ms;  /* 0: 100 */
  unsigned snapshot_threshold;    /* 0: 1024 applied entries per snapshot */
  unsigned snapshot_trailing;     /* 0: 128 entries kept after a snapshot */
  unsigned max_pending;           /* 0: 4096 outstanding proposals */
  hg_replica_apply_fn apply;                    /* required */
  hg_replica_snapshot_take_fn snapshot_take;    /* required */
  hg_replica_snapshot_release_fn snapshot_release; /* may be NULL */
  hg_replica_snapshot_restore_fn snapshot_restore; /* required */
  void *ctx;                                    /* passed to the four above */
  hg_log_fn log;               /* may be NULL */
  void *log_ctx;
  /* TLS on the Raft port (see "TLS"): PEM files, all three or all NULL. */
  const char *tls_cert;        /* this node's certificate chain */
  const char *tls_key;         /* its private key */
  const char *tls_ca;          /* CA(s) that sign the members' certificates */
} hg_replica_config_t;

/* Opens node cfg->id on loop: loads dir, bootstraps the group from
 * cfg->members if dir is empty, restores the latest local snapshot (calling
 * snapshot_restore before returning), listens on the bind address and starts
 * the election timer. The node reaches the others as the loop runs.
 * Errors: HG_EINVAL (missing callback, id 0, this node not in members, a
 * duplicate id or address, an address too long, only some of the TLS files,
 * a TLS file that does not load, a key that does not match its certificate,
 * a certificate that does not name this node), -ENOENT (no such dir, or a
 * TLS file missing; -EACCES: a TLS file not readable),
 * HG_ECORRUPT (unreadable Raft files), -EIO (also: the bind address is in
 * use), -ENOMEM. On failure *out is NULL; handles libraft opened
 * may still be closing, so run the loop before closing it. */
int hg_replica_open(uv_loop_t *loop, const hg_replica_config_t *cfg,
                    hg_replica_t **out);

/* Starts an orderly stop: leadership is dropped without a transfer, pending
 * proposals complete with -ECANCELED or HG_EUNAVAIL, files and sockets are
 * closed. cb(ctx, 0) runs once r's memory is released; r is invalid from
 * then. Must not be called twice or from inside a replica callback. */
void hg_replica_close(hg_replica_t *r, hg_replica_cb cb, void *ctx);

/* Proposes one entry (data[0..len), 1 <= len <= HG_REPLICA_MAX_ENTRY),
 * copied before return. Leader only. done(ctx, status, index) runs exactly
 * once if this returns 0, never if it fails. done may propose again.
 * Errors: HG_EPERM (not leader), HG_EBUSY (max_pending outstanding),
 * HG_EINVAL, HG_ESTATE (closing), -ENOMEM. */
int hg_replica_propose(hg_replica_t *r, const void *data, size_t len,
                       hg_replica_done_fn done, void *ctx);

/* This node's view. Cheap; no I/O. */
hg_replica_role_t hg_replica_role(const hg_replica_t *r);
uint64_t hg_replica_term(const hg_replica_t *r);
uint64_t hg_replica_commit_index(const hg_replica_t *r);   /* known committed */
uint64_t hg_replica_applied_index(const hg_replica_t *r);  /* last applied,
                                         libraft's own entries included */
uint64_t hg_replica_last_index(const hg_replica_t *r);     /* last in log */

/* How far the group has committed, as this node last heard: on the leader
 * its commit index; elsewhere the highest commit index an AppendEntries
 * from a leader carried since open (0: none heard yet). A follower whose
 * applied index is below it is catching up. */
uint64_t hg_replica_leader_commit(const hg_replica_t *r);

/* Applied entries after the newest snapshot that ask the state machine for
 * the next one (snapshot_take), from now on: cfg->snapshot_threshold until
 * changed; 1 asks after the next entry. 0 is taken as 1. */
void hg_replica_set_snapshot_threshold(hg_replica_t *r, unsigned entries);

/* The leader this node knows: *id (0 if none) and *address (NULL if none;
 * valid until the loop runs again). On the leader, itself. */
void hg_replica_leader(const hg_replica_t *r, uint64_t *id, const char **address);

/* One row per member of the current configuration. */
typedef struct hg_replica_progress {
  uint64_t id;
  char address[HG_REPLICA_ADDRESS_MAX];
  int voter;             /* 1 voter, 0 standby or spare */
  uint64_t match_index;  /* leader only: highest index known replicated
                            there (for the leader itself, its last stored
                            index); 0 on other nodes */
} hg_replica_progress_t;

/* Fills out[0..cap) with the members in configuration order and returns
 * their number (which may exceed cap: then only cap rows are written). */
size_t hg_replica_progress(const hg_replica_t *r, hg_replica_progress_t *out,
                           size_t cap);

/* Asks the leader to hand leadership to voter to_id (0: the most up-to-date
 * voter). cb(ctx, 0) when to_id (or some other node, for 0) has become
 * leader, cb(ctx, HG_EUNAVAIL) when it did not within an election timeout.
 * Errors: HG_EPERM (not leader), HG_EINVAL (to_id is not a voter or is this
 * node), HG_EBUSY (a transfer is in progress), HG_ESTATE. */
int hg_replica_transfer(hg_replica_t *r, uint64_t to_id, hg_replica_cb cb,
                        void *ctx);

/* Adds node id at address as a voter: it joins as a spare, the leader brings
 * its log up to date (by snapshot install if it is far behind), then makes it
 * a voter. cb(ctx, 0) once the voter configuration is committed. The new
 * node is opened with zero members and an empty dir. Errors: HG_EPERM,
 * HG_EBUSY (a change in progress), HG_EINVAL (bad or duplicate id/address),
 * HG_ESTATE, -ENOMEM. cb may get HG_EUNAVAIL (leadership lost) or
 * -ETIMEDOUT (the node did not catch up in time). */
int hg_replica_add(hg_replica_t *r, uint64_t id, const char *address,
                   hg_replica_cb cb, void *ctx);

/* Removes member id (it may be this node, the leader: it steps down once the
 * change commits). Same errors as hg_replica_add. */
int hg_replica_remove(hg_replica_t *r, uint64_t id, hg_replica_cb cb, void *ctx);

/* Makes member id, a spare (an add whose catch-up timed out: the node was
 * down or restarting), a voter once the leader has brought it up to date.
 * cb(ctx, 0) once the voter configuration is committed; -ETIMEDOUT again
 * if it still does not catch up. Errors: HG_EPERM, HG_EBUSY, HG_EINVAL (no
 * such member, or it votes already), HG_ESTATE. */
int hg_replica_promote(hg_replica_t *r, uint64_t id, hg_replica_cb cb, void *ctx);
/* 0 while every write to this node's Raft log has succeeded; after one
 * failed, its error (-ENOSPC for a full disk, -EIO, ...) with raft_uv's text
 * in *msg (valid until the loop runs again; "" when 0; msg may be NULL).
 * From then on every append fails (libraft 0.15 would otherwise store later
 * entries under the wrong indexes), until the process restarts: the node
 * stays a follower that stores nothing (libraft rejects the entries, the
 * group commits without it), and a restart after space is freed reloads
 * what was stored and catches up. A leader whose writes fail commits only
 * with every other voter: hand leadership over (hg_replica_transfer). The
 * first failure is logged. */
int hg_replica_log_error(const hg_replica_t *r, const char **msg);

/* libraft's description of the last failure on r ("" if none); valid until
 * the next call on r. */
const char *hg_replica_errmsg(const hg_replica_t *r);

/* Raft connections refused or broken by TLS since open (handshake or
 * certificate failures, a wrong name, garbage, a handshake timeout); 0
 * without TLS. */
uint64_t hg_replica_tls_failures(const hg_replica_t *r);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_REPLICA_H */
