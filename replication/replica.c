/*
 * replica.c - one libraft server on a caller-owned libuv loop.
 *
 * Design. hg_replica_t embeds everything libraft needs for one server: the
 * struct raft, the raft_io (raft_uv, files in cfg->dir), the transport
 * (raft_uv_tcp, or the TLS transport of transport_tls.c when cfg->tls_cert
 * is set) and the raft_fsm whose three functions forward to the
 * caller's apply/snapshot/restore callbacks. libraft calls fsm->apply for
 * committed RAFT_COMMAND entries in log order and advances its last_applied
 * only after the call returns, so the entry's index is last_applied + 1.
 *
 * Proposals come from a fixed pool of requests (max_pending) threaded on a
 * free list; a request holds the raft_apply libraft fills in and the caller's
 * done callback, and goes back to the pool when libraft completes it.
 * Snapshots use the raft_fsm version 2 contract: libraft does not free
 * snapshot buffers but calls snapshot_finalize when it is done with them, so
 * the caller's blob is written as it is (behind a 16-byte header in a second
 * buffer) and released through snapshot_release without a copy.
 *
 * Log writes: raft_io's append and close are wrapped (append_hook,
 * close_hook) to see a failed write, stop writing after it, and keep a
 * leader's failed write from libraft 0.15's core ("log writes" below).
 * A write's wrapper goes back to a free list when it completes, so the
 * list grows to the most writes ever in flight at once and the steady
 * path allocates none.
 *
 * The leader's commit index: raft_io's start is wrapped (start_hook) so
 * that every message libraft receives passes recv_hook first, which keeps
 * the highest commit index an AppendEntries from a leader carried: a
 * follower far behind learns how far it has to go (libraft's own commit
 * index only follows the entries it has stored).
 *
 * Closing: raft_close() stops the server and closes the raft_io; its callback
 * releases raft_uv's and the transport's memory, then ours.
 */
#include "hourglass/replica.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>
#include <raft/uv.h>

#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "transport_tls.h"

/* libraft's wire and disk encoding requires every entry's length to be a
 * multiple of 8 (it pads nothing itself; with an odd length a follower decodes
 * the following entries from the wrong offsets). So an entry is
 *     u32 payload length, u32 format (1), payload, zero padding to 8 bytes
 * and a snapshot is
 *     u32 magic "HGSP", u32 blob length, u64 index, blob, zero padding. */
#define ENTRY_HEADER 8
#define ENTRY_FORMAT 1u
#define SNAPSHOT_MAGIC 0x50534748u
#define SNAPSHOT_HEADER 16

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

typedef struct request {
  struct raft_apply apply;    /* first: libraft's pointer is ours */
  hg_replica_t *owner;
  hg_replica_done_fn done;
  void *ctx;
  struct request *next_free;
} request_t;

/* Bytes of one snapshot being written: the header and the caller's blob. */
typedef struct snapshot_bufs {
  struct raft_buffer bufs[3];
  uint8_t header[SNAPSHOT_HEADER];
  uint8_t pad[8];
} snapshot_bufs_t;

/* A log write in flight: raft_uv sees `inner`; libraft's core gave
 * `outer` and `cb`, called back through append_done (raft_io_append has no
 * room for a second callback). */
typedef struct append_wrap {
  struct raft_io_append inner; /* first: raft_uv's pointer is ours */
  struct raft_io_append *outer;
  raft_io_append_cb cb;
  hg_replica_t *owner;
  struct append_wrap *next; /* in held, or in wrap_free */
} append_wrap_t;

typedef int (*io_append_fn)(struct raft_io *io, struct raft_io_append *req,
                            const struct raft_entry entries[], unsigned n,
                            raft_io_append_cb cb);

struct hg_replica {
  struct raft raft;
  struct raft_io io;
  io_append_fn uv_append;      /* raft_uv's; io.append is append_hook */
  void (*uv_close)(struct raft_io *io, raft_io_close_cb cb); /* io.close: close_hook */
  int (*uv_start)(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                  raft_io_recv_cb recv);   /* io.start: start_hook */
  raft_io_recv_cb raft_recv;   /* libraft's, behind recv_hook */
  uint64_t leader_commit;      /* highest leader_commit received (0: none) */
  append_wrap_t *held;         /* a leader's failed writes, not reported (owned) */
  append_wrap_t *wrap_free;    /* wrappers of completed writes, reused (owned) */
  int log_status;              /* the last log write: 0 or its error */
  char log_errmsg[RAFT_ERRMSG_BUF_SIZE];
  struct raft_uv_transport transport;
  struct raft_fsm fsm;
  uv_loop_t *loop;
  hg_replica_config_t cfg;     /* callbacks and numbers; strings below */
  char address[HG_REPLICA_ADDRESS_MAX];
  char errmsg[2 * RAFT_ERRMSG_BUF_SIZE];
  request_t *pool;             /* max_pending requests, owned */
  request_t *free_list;
  unsigned pending;            /* requests out of the pool */
  struct raft_change change;   /* the one membership change in flight */
  bool change_busy;
  bool change_promote;         /* add: the spare still has to become a voter */
  uint64_t change_id;
  hg_replica_cb change_cb;
  void *change_ctx;
  struct raft_transfer transfer;
  bool transfer_busy;
  uint64_t transfer_to;
  hg_replica_cb transfer_cb;
  void *transfer_ctx;
  bool tls;                    /* transport is transport_tls.c's */
  bool raft_inited;            /* raft_init succeeded: close through raft */
  bool closing;
  hg_replica_cb close_cb;
  void *close_ctx;
};

static void logf_(const hg_replica_t *r, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void logf_(const hg_replica_t *r, int level, const char *fmt, ...) {
  if (r->cfg.log == NULL) return;
  char msg[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->cfg.log(r->cfg.log_ctx, level, msg);
}

/* libraft's positive codes to ours. */
static int from_raft(int rv) {
  switch (rv) {
  case 0: return 0;
  case RAFT_NOMEM: return -ENOMEM;
  case RAFT_BADID:
  case RAFT_BADROLE:
  case RAFT_INVALID: return HG_EINVAL;
  case RAFT_DUPLICATEID:
  case RAFT_DUPLICATEADDRESS: return HG_EEXISTS;
  case RAFT_MALFORMED:
  case RAFT_CORRUPT: return HG_ECORRUPT;
  case RAFT_NOTLEADER: return HG_EPERM;
  case RAFT_LEADERSHIPLOST: return HG_EUNAVAIL;
  case RAFT_SHUTDOWN:
  case RAFT_CANCELED: return -ECANCELED;
  case RAFT_CANTBOOTSTRAP: return HG_ESTATE;
  case RAFT_CANTCHANGE:
  case RAFT_BUSY: return HG_EBUSY;
  case RAFT_NAMETOOLONG: return -ENAMETOOLONG;
  case RAFT_TOOBIG: return -E2BIG;
  case RAFT_NOCONNECTION: return -ENOTCONN;
  case RAFT_IOERR: return -EIO;
  case RAFT_NOTFOUND: return -ENOENT;
  case RAFT_UNAUTHORIZED: return -EACCES;
  case RAFT_NOSPACE: return -ENOSPC;
  case RAFT_TOOMANY: return HG_EFULL;
  default: return -EIO;
  }
}

static void keep_errmsg(hg_replica_t *r, const char *what, int rv) {
  const char *msg = r->raft_inited ? raft_errmsg(&r->raft) : r->io.errmsg;
  if (msg == NULL || msg[0] == '\0') msg = raft_strerror(rv);
  snprintf(r->errmsg, sizeof r->errmsg, "%s: %s", what, msg);
}

/* ---- state machine ------------------------------------------------------ */

/* A state machine callback returned rc: log it, and fail libraft's call. */
static int callback_failed(const hg_replica_t *r, int level, const char *what,
                           uint64_t index, int rc) {
  logf_(r, level, "replica %llu: %s at index %llu failed: %s",
        (unsigned long long)r->cfg.id, what, (unsigned long long)index,
        hg_strerror(rc));
  return RAFT_INVALID;
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf,
                     void **result) {
  hg_replica_t *r = fsm->data;
  uint64_t index = raft_last_applied(&r->raft) + 1;
  *result = NULL;
  const uint8_t *p = buf->base;
  size_t len = buf->len >= ENTRY_HEADER ? hg_ld32(p) : 0;
  if (buf->len < ENTRY_HEADER || hg_ld32(p + 4) != ENTRY_FORMAT ||
      pad8(ENTRY_HEADER + len) != buf->len) {
    logf_(r, HG_LOG_ERROR, "replica %llu: entry %llu of %zu bytes is malformed",
          (unsigned long long)r->cfg.id, (unsigned long long)index, buf->len);
    return RAFT_MALFORMED;
  }
  int rc = r->cfg.apply(r->cfg.ctx, index, p + ENTRY_HEADER, len);
  /* HG_EUNAVAIL: the state machine stopped taking entries on purpose. */
  return rc == 0 ? 0
                 : callback_failed(r, rc == HG_EUNAVAIL ? HG_LOG_DEBUG : HG_LOG_ERROR, "apply",
                                   index, rc);
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                        unsigned *n_bufs) {
  hg_replica_t *r = fsm->data;
  uint64_t index = raft_last_applied(&r->raft);
  snapshot_bufs_t *s = malloc(sizeof *s);
  if (s == NULL) return RAFT_NOMEM;
  const void *data = NULL;
  size_t len = 0;
  int rc = r->cfg.snapshot_take(r->cfg.ctx, index, &data, &len);
  if (rc != 0) {
    free(s);
    /* HG_EBUSY: not now (the caller's state is ahead of what was applied). */
    return callback_failed(r, rc == HG_EBUSY ? HG_LOG_DEBUG : HG_LOG_WARN, "snapshot", index,
                           rc);
  }
  if (len > UINT32_MAX) {
    if (r->cfg.snapshot_release != NULL) r->cfg.snapshot_release(r->cfg.ctx, data, len);
    free(s);
    logf_(r, HG_LOG_ERROR, "replica %llu: snapshot of %zu bytes is too large",
          (unsigned long long)r->cfg.id, len);
    return RAFT_TOOBIG;
  }
  hg_st32(s->header, SNAPSHOT_MAGIC);
  hg_st32(s->header + 4, (uint32_t)len);
  hg_st64(s->header + 8, index);
  memset(s->pad, 0, sizeof s->pad);
  s->bufs[0].base = s->header;
  s->bufs[0].len = SNAPSHOT_HEADER;
  s->bufs[1].base = (void *)data; /* read only by libraft until finalize */
  s->bufs[1].len = len;
  s->bufs[2].base = s->pad;
  s->bufs[2].len = pad8(len) - len;
  *bufs = s->bufs;
  *n_bufs = 3;
  logf_(r, HG_LOG_INFO, "replica %llu: snapshot at index %llu, %zu bytes",
        (unsigned long long)r->cfg.id, (unsigned long long)index, len);
  return 0;
}

static int fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                                 unsigned *n_bufs) {
  hg_replica_t *r = fsm->data;
  /* bufs points at the first member of a snapshot_bufs_t. */
  snapshot_bufs_t *s = (snapshot_bufs_t *)(void *)*bufs;
  if (*n_bufs == 3 && r->cfg.snapshot_release != NULL)
    r->cfg.snapshot_release(r->cfg.ctx, s->bufs[1].base, s->bufs[1].len);
  free(s);
  *bufs = NULL;
  *n_bufs = 0;
  return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf) {
  hg_replica_t *r = fsm->data;
  const uint8_t *p = buf->base;
  size_t len = buf->len >= SNAPSHOT_HEADER ? hg_ld32(p + 4) : 0;
  if (buf->len < SNAPSHOT_HEADER || hg_ld32(p) != SNAPSHOT_MAGIC ||
      SNAPSHOT_HEADER + pad8(len) != buf->len) {
    logf_(r, HG_LOG_ERROR, "replica %llu: snapshot of %zu bytes is malformed",
          (unsigned long long)r->cfg.id, buf->len);
    return RAFT_CORRUPT;
  }
  uint64_t index = hg_ld64(p + 8);
  int rc = r->cfg.snapshot_restore(r->cfg.ctx, index, p + SNAPSHOT_HEADER, len);
  if (rc != 0) return callback_failed(r, HG_LOG_ERROR, "restore", index, rc);
  logf_(r, HG_LOG_INFO, "replica %llu: restored snapshot at index %llu, %zu bytes",
        (unsigned long long)r->cfg.id, (unsigned long long)index, len);
  /* On success the FSM owns the buffer. */
  raft_free(buf->base);
  return 0;
}

/* ---- log writes --------------------------------------------------------- */

/* The replica whose raft_io is io. */
static hg_replica_t *of_io(struct raft_io *io) {
  return (hg_replica_t *)(void *)((char *)io - offsetof(hg_replica_t, io));
}

/* A wrapper for a new write: a completed one's, or a new one (NULL: no
 * memory). */
static append_wrap_t *wrap_get(hg_replica_t *r) {
  append_wrap_t *w = r->wrap_free;
  if (w == NULL) return malloc(sizeof *w);
  r->wrap_free = w->next;
  return w;
}

static void wrap_put(hg_replica_t *r, append_wrap_t *w) {
  w->next = r->wrap_free;
  r->wrap_free = w;
}

/* Every append goes through here so that a failing disk is seen, and so
 * that nothing is written after a failed write. libraft 0.15 keeps the
 * entries of a failed write in its in-memory log and appends only later
 * ones when the leader sends them again; raft_uv would store those after
 * the last entry it did store, under the wrong indexes (on the next start
 * the node applies the wrong batches). So after one failed write every
 * append fails until the process restarts and reloads what was stored. */
static void append_done(struct raft_io_append *req, int status) {
  append_wrap_t *w = (append_wrap_t *)req;
  hg_replica_t *r = w->owner;
  struct raft_io_append *outer = w->outer;
  raft_io_append_cb cb = w->cb;
  if (status != 0 && status != RAFT_CANCELED) {
    if (r->log_status == 0)
      logf_(r, HG_LOG_ERROR, "replica %llu: writing the log failed: %s",
            (unsigned long long)r->cfg.id,
            r->io.errmsg[0] != '\0' ? r->io.errmsg : raft_strerror(status));
    r->log_status = from_raft(status);
    snprintf(r->log_errmsg, sizeof r->log_errmsg, "%s",
             r->io.errmsg[0] != '\0' ? r->io.errmsg : raft_strerror(status));
    /* libraft 0.15's leader answers a failed write by dropping its entries
     * from the in-memory log, which the followers may already hold, and
     * then crashes on their replies. So the leader is not told: the write
     * is held (reported as canceled at close), the entries stay in memory
     * and commit on the other voters, nothing more is appended, and the
     * caller hands leadership over (hg_replica_log_error). */
    if (raft_state(&r->raft) == RAFT_LEADER) {
      w->next = r->held;
      r->held = w;
      return;
    }
  }
  wrap_put(r, w);
  cb(outer, status);
}

/* Held writes are reported before raft_uv closes, as it reports its own. */
static void close_hook(struct raft_io *io, raft_io_close_cb cb) {
  hg_replica_t *r = of_io(io);
  while (r->held != NULL) {
    append_wrap_t *w = r->held;
    r->held = w->next;
    struct raft_io_append *outer = w->outer;
    raft_io_append_cb done = w->cb;
    wrap_put(r, w);
    done(outer, RAFT_CANCELED);
  }
  r->uv_close(io, cb);
}

static int append_hook(struct raft_io *io, struct raft_io_append *req,
                       const struct raft_entry entries[], unsigned n,
                       raft_io_append_cb cb) {
  hg_replica_t *r = of_io(io);
  if (r->log_status != 0) return RAFT_IOERR;
  append_wrap_t *w = wrap_get(r);
  if (w == NULL) return RAFT_NOMEM;
  w->inner.data = NULL;
  w->outer = req;
  w->cb = cb;
  w->owner = r;
  req->cb = cb;
  int rv = r->uv_append(io, &w->inner, entries, n, append_done);
  if (rv != 0) wrap_put(r, w);
  return rv;
}

/* ---- messages received ------------------------------------------------- */

static void recv_hook(struct raft_io *io, struct raft_message *msg) {
  hg_replica_t *r = of_io(io);
  if (msg->type == RAFT_IO_APPEND_ENTRIES &&
      msg->append_entries.term >= r->raft.current_term &&
      msg->append_entries.leader_commit > r->leader_commit)
    r->leader_commit = msg->append_entries.leader_commit;
  r->raft_recv(io, msg);
}

static int start_hook(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                      raft_io_recv_cb recv) {
  hg_replica_t *r = of_io(io);
  r->raft_recv = recv;
  return r->uv_start(io, msecs, tick, recv_hook);
}

uint64_t hg_replica_leader_commit(const hg_replica_t *r) {
  if (raft_state((struct raft *)&r->raft) == RAFT_LEADER) return r->raft.commit_index;
  return r->leader_commit;
}

int hg_replica_log_error(const hg_replica_t *r, const char **msg) {
  if (msg != NULL) *msg = r->log_status != 0 ? r->log_errmsg : "";
  return r->log_status;
}

/* ---- open / close ------------------------------------------------------- */

static int check_config(const hg_replica_config_t *cfg) {
  if (cfg == NULL || cfg->id == 0 || cfg->dir == NULL || cfg->address == NULL ||
      cfg->apply == NULL || cfg->snapshot_take == NULL ||
      cfg->snapshot_restore == NULL)
    return HG_EINVAL;
  if (strlen(cfg->address) >= HG_REPLICA_ADDRESS_MAX) return HG_EINVAL;
  if ((cfg->tls_cert != NULL) != (cfg->tls_key != NULL) ||
      (cfg->tls_cert != NULL) != (cfg->tls_ca != NULL))
    return HG_EINVAL;
  if (cfg->n_members > HG_REPLICA_MAX_MEMBERS) return HG_EINVAL;
  if (cfg->n_members > 0 && cfg->members == NULL) return HG_EINVAL;
  bool self = cfg->n_members == 0;
  for (size_t i = 0; i < cfg->n_members; i++) {
    const hg_replica_member_t *m = &cfg->members[i];
    if (m->id == 0 || m->address == NULL ||
        strlen(m->address) >= HG_REPLICA_ADDRESS_MAX)
      return HG_EINVAL;
    if (m->id == cfg->id) {
      if (strcmp(m->address, cfg->address) != 0) return HG_EINVAL;
      self = true;
    }
    for (size_t j = 0; j < i; j++)
      if (cfg->members[j].id == m->id ||
          strcmp(cfg->members[j].address, m->address) == 0)
        return HG_EINVAL;
  }
  return self ? 0 : HG_EINVAL;
}

static void release_transport(hg_replica_t *r) {
  if (r->tls) rtls_release(&r->transport);
  else raft_uv_tcp_close(&r->transport);
}

static void free_replica(hg_replica_t *r) {
  while (r->wrap_free != NULL) {
    append_wrap_t *w = r->wrap_free;
    r->wrap_free = w->next;
    free(w);
  }
  free(r->pool);
  free(r);
}

/* After raft_close: libraft no longer touches io or transport. */
static void raft_closed(struct raft *raft) {
  hg_replica_t *r = raft->data;
  raft_uv_close(&r->io);
  release_transport(r);
  hg_replica_cb cb = r->close_cb;
  void *ctx = r->close_ctx;
  logf_(r, HG_LOG_INFO, "replica %llu: closed", (unsigned long long)r->cfg.id);
  free_replica(r);
  if (cb != NULL) cb(ctx, 0);
}

static int bootstrap(hg_replica_t *r) {
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  int rv = 0;
  for (size_t i = 0; i < r->cfg.n_members && rv == 0; i++)
    rv = raft_configuration_add(&conf, r->cfg.members[i].id,
                                r->cfg.members[i].address, RAFT_VOTER);
  if (rv == 0) rv = raft_bootstrap(&r->raft, &conf);
  raft_configuration_close(&conf);
  if (rv == 0) {
    logf_(r, HG_LOG_INFO, "replica %llu: bootstrapped a group of %zu members",
          (unsigned long long)r->cfg.id, r->cfg.n_members);
  } else if (rv == RAFT_CANTBOOTSTRAP) {
    rv = 0; /* dir already holds state: the group exists */
  } else {
    keep_errmsg(r, "bootstrap", rv);
  }
  return rv;
}

int hg_replica_open(uv_loop_t *loop, const hg_replica_config_t *cfg,
                    hg_replica_t **out) {
  if (out == NULL) return HG_EINVAL;
  *out = NULL;
  if (loop == NULL) return HG_EINVAL;
  int rc = check_config(cfg);
  if (rc != 0) return rc;

  hg_replica_t *r = calloc(1, sizeof *r);
  if (r == NULL) return -ENOMEM;
  r->loop = loop;
  r->cfg = *cfg;
  r->cfg.members = NULL; /* only bootstrap reads them, during open */
  snprintf(r->address, sizeof r->address, "%s", cfg->address);
  r->cfg.address = r->address;
  r->cfg.dir = NULL;
  r->cfg.bind_address = NULL;
  if (r->cfg.max_pending == 0) r->cfg.max_pending = 4096;
  r->pool = calloc(r->cfg.max_pending, sizeof *r->pool);
  if (r->pool == NULL) {
    free(r);
    return -ENOMEM;
  }
  for (unsigned i = 0; i < r->cfg.max_pending; i++) {
    r->pool[i].owner = r;
    r->pool[i].next_free = i + 1 < r->cfg.max_pending ? &r->pool[i + 1] : NULL;
  }
  r->free_list = &r->pool[0];

  r->fsm.version = 2;
  r->fsm.data = r;
  r->fsm.apply = fsm_apply;
  r->fsm.snapshot = fsm_snapshot;
  r->fsm.restore = fsm_restore;
  r->fsm.snapshot_finalize = fsm_snapshot_finalize;

  int rv = 0;
  if (cfg->tls_cert != NULL) {
    rtls_config_t tc = {.cert = cfg->tls_cert,
                        .key = cfg->tls_key,
                        .ca = cfg->tls_ca,
                        .bind_address = cfg->bind_address,
                        .self_id = cfg->id,
                        .log = cfg->log,
                        .log_ctx = cfg->log_ctx};
    char err[sizeof r->errmsg - 8];
    rc = rtls_init(&r->transport, loop, &tc, err, sizeof err);
    if (rc != 0) {
      snprintf(r->errmsg, sizeof r->errmsg, "TLS: %s", err);
      logf_(r, HG_LOG_ERROR, "replica %llu: open failed: %s", (unsigned long long)cfg->id,
            r->errmsg);
      free_replica(r);
      return rc;
    }
    r->tls = true;
  } else {
    rv = raft_uv_tcp_init(&r->transport, loop);
  }
  if (rv != 0) {
    snprintf(r->errmsg, sizeof r->errmsg, "transport: %s", raft_strerror(rv));
    goto fail_free;
  }
  if (!r->tls && cfg->bind_address != NULL) {
    rv = raft_uv_tcp_set_bind_address(&r->transport, cfg->bind_address);
    if (rv != 0) {
      snprintf(r->errmsg, sizeof r->errmsg, "bind address %s: %s",
               cfg->bind_address, raft_strerror(rv));
      goto fail_transport;
    }
  }
  rv = raft_uv_init(&r->io, loop, cfg->dir, &r->transport);
  if (rv != 0) {
    keep_errmsg(r, cfg->dir, rv);
    goto fail_transport;
  }
  r->uv_append = r->io.append;
  r->io.append = append_hook;
  r->uv_close = r->io.close;
  r->io.close = close_hook;
  r->uv_start = r->io.start;
  r->io.start = start_hook;
  rv = raft_init(&r->raft, &r->io, &r->fsm, cfg->id, cfg->address);
  if (rv != 0) {
    snprintf(r->errmsg, sizeof r->errmsg, "init: %s", r->raft.errmsg);
    raft_uv_close(&r->io);
    goto fail_transport;
  }
  r->raft_inited = true;
  r->raft.data = r;
  raft_set_election_timeout(&r->raft, cfg->election_timeout_ms ? cfg->election_timeout_ms : 1000);
  raft_set_heartbeat_timeout(&r->raft, cfg->heartbeat_timeout_ms ? cfg->heartbeat_timeout_ms : 100);
  raft_set_snapshot_threshold(&r->raft, cfg->snapshot_threshold ? cfg->snapshot_threshold : 1024);
  raft_set_snapshot_trailing(&r->raft, cfg->snapshot_trailing ? cfg->snapshot_trailing : 128);
  raft_set_pre_vote(&r->raft, true);

  if (cfg->n_members > 0) {
    r->cfg.members = cfg->members;
    rv = bootstrap(r);
    r->cfg.members = NULL;
    if (rv != 0) goto fail_raft;
  }
  rv = raft_start(&r->raft);
  if (rv != 0) {
    keep_errmsg(r, "start", rv);
    goto fail_raft;
  }
  logf_(r, HG_LOG_INFO, "replica %llu: open at %s, dir %s, term %llu, last index %llu",
        (unsigned long long)cfg->id, cfg->address, cfg->dir,
        (unsigned long long)r->raft.current_term,
        (unsigned long long)raft_last_index(&r->raft));
  *out = r;
  return 0;

fail_raft:
  logf_(r, HG_LOG_ERROR, "replica %llu: open failed: %s",
        (unsigned long long)cfg->id, r->errmsg);
  rc = from_raft(rv);
  r->closing = true;
  raft_close(&r->raft, raft_closed);
  return rc;
fail_transport:
  logf_(r, HG_LOG_ERROR, "replica %llu: open failed: %s",
        (unsigned long long)cfg->id, r->errmsg);
  release_transport(r);
fail_free:
  free_replica(r);
  return from_raft(rv);
}

void hg_replica_close(hg_replica_t *r, hg_replica_cb cb, void *ctx) {
  r->closing = true;
  r->close_cb = cb;
  r->close_ctx = ctx;
  logf_(r, HG_LOG_INFO, "replica %llu: closing at applied index %llu",
        (unsigned long long)r->cfg.id,
        (unsigned long long)raft_last_applied(&r->raft));
  raft_close(&r->raft, raft_closed);
}

/* ---- proposals ---------------------------------------------------------- */

static void apply_done(struct raft_apply *req, int status, void *result) {
  (void)result;
  request_t *q = (request_t *)req;
  hg_replica_t *r = q->owner;
  hg_replica_done_fn done = q->done;
  void *ctx = q->ctx;
  uint64_t index = req->index;
  q->next_free = r->free_list;
  r->free_list = q;
  r->pending--;
  done(ctx, from_raft(status), index);
}

int hg_replica_propose(hg_replica_t *r, const void *data, size_t len,
                       hg_replica_done_fn done, void *ctx) {
  if (r->closing) return HG_ESTATE;
  if (data == NULL || len == 0 || len > HG_REPLICA_MAX_ENTRY || done == NULL)
    return HG_EINVAL;
  if (raft_state(&r->raft) != RAFT_LEADER) return HG_EPERM;
  request_t *q = r->free_list;
  if (q == NULL) return HG_EBUSY;
  struct raft_buffer buf = {.len = pad8(ENTRY_HEADER + len)};
  buf.base = raft_malloc(buf.len);
  if (buf.base == NULL) return -ENOMEM;
  uint8_t *p = buf.base;
  hg_st32(p, (uint32_t)len);
  hg_st32(p + 4, ENTRY_FORMAT);
  memcpy(p + ENTRY_HEADER, data, len);
  memset(p + ENTRY_HEADER + len, 0, buf.len - ENTRY_HEADER - len);
  q->done = done;
  q->ctx = ctx;
  q->apply.data = q;
  int rv = raft_apply(&r->raft, &q->apply, &buf, 1, apply_done);
  if (rv != 0) {
    raft_free(buf.base);
    keep_errmsg(r, "propose", rv);
    return from_raft(rv);
  }
  r->free_list = q->next_free;
  r->pending++;
  return 0;
}

/* ---- status ------------------------------------------------------------- */

hg_replica_role_t hg_replica_role(const hg_replica_t *r) {
  switch (raft_state((struct raft *)&r->raft)) {
  case RAFT_FOLLOWER: return HG_REPLICA_FOLLOWER;
  case RAFT_CANDIDATE: return HG_REPLICA_CANDIDATE;
  case RAFT_LEADER: return HG_REPLICA_LEADER;
  default: return HG_REPLICA_UNAVAILABLE;
  }
}

uint64_t hg_replica_term(const hg_replica_t *r) { return r->raft.current_term; }
uint64_t hg_replica_commit_index(const hg_replica_t *r) { return r->raft.commit_index; }
uint64_t hg_replica_applied_index(const hg_replica_t *r) {
  return raft_last_applied((struct raft *)&r->raft);
}

uint64_t hg_replica_last_index(const hg_replica_t *r) {
  return raft_last_index((struct raft *)&r->raft);
}

void hg_replica_set_snapshot_threshold(hg_replica_t *r, unsigned entries) {
  raft_set_snapshot_threshold(&r->raft, entries != 0 ? entries : 1);
}

void hg_replica_leader(const hg_replica_t *r, uint64_t *id, const char **address) {
  raft_id lid = 0;
  const char *addr = NULL;
  raft_leader((struct raft *)&r->raft, &lid, &addr);
  if (id != NULL) *id = lid;
  if (address != NULL) *address = addr;
}

size_t hg_replica_progress(const hg_replica_t *r, hg_replica_progress_t *out,
                           size_t cap) {
  const struct raft_configuration *c = &r->raft.configuration;
  bool leader = raft_state((struct raft *)&r->raft) == RAFT_LEADER &&
                r->raft.leader_state.progress != NULL;
  for (unsigned i = 0; i < c->n && i < cap; i++) {
    hg_replica_progress_t *p = &out[i];
    p->id = c->servers[i].id;
    snprintf(p->address, sizeof p->address, "%s", c->servers[i].address);
    p->voter = c->servers[i].role == RAFT_VOTER;
    /* progress[] is indexed like configuration.servers[]. */
    p->match_index = !leader ? 0
                     : c->servers[i].id == r->cfg.id ? r->raft.last_stored
                     : r->raft.leader_state.progress[i].match_index;
  }
  return c->n;
}

const char *hg_replica_errmsg(const hg_replica_t *r) { return r->errmsg; }

uint64_t hg_replica_tls_failures(const hg_replica_t *r) {
  return r->tls ? rtls_failures(&r->transport) : 0;
}

/* ---- leadership and membership ----------------------------------------- */

static void transfer_done(struct raft_transfer *req) {
  hg_replica_t *r = req->data;
  raft_id lid = 0;
  const char *addr = NULL;
  raft_leader(&r->raft, &lid, &addr);
  bool ok = r->transfer_to != 0 ? lid == r->transfer_to : lid != 0 && lid != r->cfg.id;
  logf_(r, ok ? HG_LOG_INFO : HG_LOG_WARN,
        "replica %llu: leadership transfer to %llu %s; leader now %llu",
        (unsigned long long)r->cfg.id, (unsigned long long)r->transfer_to,
        ok ? "done" : "failed", (unsigned long long)lid);
  r->transfer_busy = false;
  if (r->transfer_cb != NULL) r->transfer_cb(r->transfer_ctx, ok ? 0 : HG_EUNAVAIL);
}

int hg_replica_transfer(hg_replica_t *r, uint64_t to_id, hg_replica_cb cb,
                        void *ctx) {
  if (r->closing) return HG_ESTATE;
  if (raft_state(&r->raft) != RAFT_LEADER) return HG_EPERM;
  if (r->transfer_busy) return HG_EBUSY;
  if (to_id == r->cfg.id) return HG_EINVAL;
  memset(&r->transfer, 0, sizeof r->transfer);
  r->transfer.data = r;
  r->transfer_to = to_id;
  r->transfer_cb = cb;
  r->transfer_ctx = ctx;
  int rv = raft_transfer(&r->raft, &r->transfer, to_id, transfer_done);
  if (rv != 0) {
    keep_errmsg(r, "transfer", rv);
    return rv == RAFT_BADID || rv == RAFT_NOTFOUND ? HG_EINVAL : from_raft(rv);
  }
  r->transfer_busy = true;
  logf_(r, HG_LOG_INFO, "replica %llu: transferring leadership to %llu",
        (unsigned long long)r->cfg.id, (unsigned long long)to_id);
  return 0;
}

static void change_finish(hg_replica_t *r, int status) {
  logf_(r, status == 0 ? HG_LOG_INFO : HG_LOG_WARN,
        "replica %llu: membership change for %llu: %s",
        (unsigned long long)r->cfg.id, (unsigned long long)r->change_id,
        status == 0 ? "committed" : hg_strerror(status));
  r->change_busy = false;
  if (r->change_cb != NULL) r->change_cb(r->change_ctx, status);
}

static void change_done(struct raft_change *req, int status) {
  hg_replica_t *r = req->data;
  if (status == 0 && r->change_promote && !r->closing) {
    r->change_promote = false;
    int rv = raft_assign(&r->raft, &r->change, r->change_id, RAFT_VOTER, change_done);
    if (rv == 0) return;
    keep_errmsg(r, "promote", rv);
    status = rv;
  }
  change_finish(r, status == RAFT_NOCONNECTION ? -ETIMEDOUT : from_raft(status));
}

static int change_begin(hg_replica_t *r, uint64_t id, hg_replica_cb cb, void *ctx) {
  if (r->closing) return HG_ESTATE;
  if (id == 0) return HG_EINVAL;
  if (raft_state(&r->raft) != RAFT_LEADER) return HG_EPERM;
  if (r->change_busy) return HG_EBUSY;
  memset(&r->change, 0, sizeof r->change);
  r->change.data = r;
  r->change_id = id;
  r->change_cb = cb;
  r->change_ctx = ctx;
  return 0;
}

int hg_replica_add(hg_replica_t *r, uint64_t id, const char *address,
                   hg_replica_cb cb, void *ctx) {
  if (address == NULL || strlen(address) >= HG_REPLICA_ADDRESS_MAX) return HG_EINVAL;
  int rc = change_begin(r, id, cb, ctx);
  if (rc != 0) return rc;
  int rv = raft_add(&r->raft, &r->change, id, address, change_done);
  if (rv != 0) {
    keep_errmsg(r, "add", rv);
    return rv == RAFT_DUPLICATEID || rv == RAFT_DUPLICATEADDRESS ? HG_EINVAL
                                                                   : from_raft(rv);
  }
  r->change_busy = true;
  r->change_promote = true;
  logf_(r, HG_LOG_INFO, "replica %llu: adding %llu at %s",
        (unsigned long long)r->cfg.id, (unsigned long long)id, address);
  return 0;
}

int hg_replica_remove(hg_replica_t *r, uint64_t id, hg_replica_cb cb, void *ctx) {
  int rc = change_begin(r, id, cb, ctx);
  if (rc != 0) return rc;
  int rv = raft_remove(&r->raft, &r->change, id, change_done);
  if (rv != 0) {
    keep_errmsg(r, "remove", rv);
    return rv == RAFT_BADID ? HG_EINVAL : from_raft(rv);
  }
  r->change_busy = true;
  r->change_promote = false;
  logf_(r, HG_LOG_INFO, "replica %llu: removing %llu",
        (unsigned long long)r->cfg.id, (unsigned long long)id);
  return 0;
}

int hg_replica_promote(hg_replica_t *r, uint64_t id, hg_replica_cb cb, void *ctx) {
  int rc = change_begin(r, id, cb, ctx);
  if (rc != 0) return rc;
  int rv = raft_assign(&r->raft, &r->change, id, RAFT_VOTER, change_done);
  if (rv != 0) {
    keep_errmsg(r, "promote", rv);
    return rv == RAFT_NOTFOUND || rv == RAFT_BADROLE || rv == RAFT_BADID ? HG_EINVAL
                                                                          : from_raft(rv);
  }
  r->change_busy = true;
  r->change_promote = false;
  logf_(r, HG_LOG_INFO, "replica %llu: promoting %llu to voter",
        (unsigned long long)r->cfg.id, (unsigned long long)id);
  return 0;
}
