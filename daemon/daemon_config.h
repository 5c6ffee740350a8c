/*
 * daemon_config.h - hourglassd's configuration: the `key = value` file
 * (ops/hourglass.conf documents every key), its defaults, and the mapping
 * onto the pipeline's configuration. Internal to the daemon.
 *
 * Threads: a config is plain data owned by whoever filled it (the daemon's
 * main thread); nothing here is shared.
 */
#ifndef HOURGLASS_DAEMON_CONFIG_H
#define HOURGLASS_DAEMON_CONFIG_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "hourglass/log.h"
#include "hourglass/pipeline.h"

#define HG_DCFG_ADDR_MAX 64
#define HG_DCFG_PATH_MAX 1024


/* One listen address, split; host is an IPv4 or IPv6 literal. */
typedef struct hg_dcfg_addr {
  char host[HG_DCFG_ADDR_MAX];
  uint16_t port;
} hg_dcfg_addr_t;

typedef struct hg_daemon_config {
  hg_dcfg_addr_t order_entry;  /* listen.order_entry, 127.0.0.1:7700 */
  hg_dcfg_addr_t http;         /* listen.http, 127.0.0.1:7780 */
  char data_dir[HG_DCFG_PATH_MAX]; /* data_dir, ./var */
  char keys_file[HG_DCFG_PATH_MAX]; /* gateway.keys_file, "" = none */
  int log_level;               /* log.level, info */
  uint64_t journal_segment_size; /* journal.segment_size, 64M */
  uint32_t journal_batch_bytes;  /* journal.batch_bytes, 4M */
  int journal_force_fallback;    /* journal.force_fallback, no */
  uint64_t snapshot_interval;  /* snapshot.interval (commands), 1000000 */
  uint32_t snapshot_keep;      /* snapshot.keep, 2 */
  uint32_t mark_interval_ms;   /* clearing.mark_interval_ms, 1000; 0 = no MARK timer */
  uint64_t store_map_size;     /* store.map_size, 1G */
  int durability;              /* durability, durable */
  int pipe_mode;               /* pipeline.mode: loop (HG_PIPE_MODE_LOOP, the default) | threads */
  uint32_t wait_spin;          /* wait = block (0) | spin N */
  uint32_t rt_priority;        /* threads.realtime_priority, 0 = off; 1..99 SCHED_FIFO */
  uint32_t max_instruments;    /* limits.max_instruments, 64 */
  uint32_t max_accounts;       /* limits.max_accounts, 4096 */
  uint32_t max_book_orders;    /* limits.max_book_orders, 1048576 */
  uint32_t max_orders;         /* limits.max_orders (gateway's live orders), 262144 */
  uint32_t max_sessions;       /* limits.max_sessions, 1024 */
  uint32_t max_frame;          /* limits.max_frame, 65536 */
  uint32_t inbound_capacity;   /* pipeline.inbound_capacity, 65536 */
  uint32_t outbound_capacity;  /* pipeline.outbound_capacity, 262144 */
  uint32_t staging_capacity;   /* pipeline.staging_capacity, 262144 */
  uint32_t throttle_rate;      /* throttle.rate, 10000 per session per second */
  uint32_t throttle_burst;     /* throttle.burst, 0 = rate */
  uint32_t http_max_connections; /* http.max_connections, 64 */
  uint32_t http_max_request;   /* http.max_request, 8192 */
  int http_keepalive;          /* http.keepalive, yes */
  uint32_t http_idle_ms;       /* http.idle_timeout_ms, 10000 */
  uint32_t http_max_per_ip;    /* http.max_connections_per_ip, 32 */
  uint32_t http_stream_buffer; /* http.stream_buffer, 1M */
  int http_tls;                /* http.tls, yes: HTTPS with a certificate, required off loopback */
  char http_tls_cert[HG_DCFG_PATH_MAX]; /* http.tls_cert, "" = none (PEM file) */
  char http_tls_key[HG_DCFG_PATH_MAX];  /* http.tls_key, "" = none (PEM file) */
  uint32_t md_depth;           /* market.depth_levels, 20 */
  uint32_t md_trades;          /* market.recent_trades, 100 */
  uint32_t synthetic_rate;     /* synthetic.orders_per_sec, 0 (off) */
  uint64_t outlog_segment_size; /* gateway.outlog_segment_size, 64M */
  uint32_t outlog_segments_kept; /* gateway.outlog_segments_kept, 8 */
  uint32_t outlog_max_session_ids; /* gateway.outlog_max_session_ids, 262144 */
  uint32_t max_unauthenticated;  /* gateway.max_unauthenticated, 64 */
  uint32_t max_unauthenticated_per_address; /* gateway.max_unauthenticated_per_address, 16 */
  uint32_t login_timeout_ms;     /* gateway.login_timeout_ms, 5000 */
  uint32_t sessions_per_key;     /* gateway.sessions_per_key, 4 */
  /* TLS on listen.order_entry: tls (on 1 | off 0 | auto -1, the default:
   * on if tls.cert is set), tls.cert and tls.key (PEM), tls.client_ca (PEM CAs
   * whose client certificates are required: mutual TLS). A non-loopback
   * listen.order_entry without TLS is refused unless tls = off is set. */
  int tls;
  char tls_cert[HG_DCFG_PATH_MAX];
  char tls_key[HG_DCFG_PATH_MAX];
  char tls_client_ca[HG_DCFG_PATH_MAX];
  /* Cluster mode (hourglassd.h, "Cluster"): cluster.id (0: a single node),
   * cluster.members ("id=raft_ip:port/client_ip:port,..."), cluster.dir
   * ("" = data_dir/raft), cluster.election_timeout_ms (300),
   * cluster.snapshot_entries (65536; 0: never), cluster.snapshot_hold_ms
   * (60000: how long a lagging voter holds the leader's next snapshot
   * back), cluster.join (no: a node
   * with an empty Raft directory bootstraps the group from cluster.members;
   * yes: it waits to be added by the leader), cluster.listen ("ipv4:port"
   * the Raft port binds; "" = this member's address in cluster.members).
   * The Raft port's TLS:
   * cluster.tls_cert, cluster.tls_key, cluster.tls_ca (PEM; all three or
   * none); without them a member's Raft address that is not loopback is
   * refused unless cluster.insecure = yes. */
  uint32_t cluster_id;
  char cluster_members[HG_DCFG_PATH_MAX];
  char cluster_dir[HG_DCFG_PATH_MAX];
  uint32_t cluster_election_ms;
  uint32_t cluster_snapshot_entries;
  uint32_t cluster_snapshot_hold_ms;
  char cluster_tls_cert[HG_DCFG_PATH_MAX];
  char cluster_tls_key[HG_DCFG_PATH_MAX];
  char cluster_tls_ca[HG_DCFG_PATH_MAX];
  int cluster_insecure;
  int cluster_join;
  char cluster_listen[HG_DCFG_PATH_MAX];
} hg_daemon_config_t;

/* Most members in cluster.members (ids are 1..this). */
#define HG_DCFG_MAX_MEMBERS 16

/* One member of cluster.members: its id, the address its peers reach it
 * at ("ip:port", IPv4) and the order-entry address clients reach it at. */
typedef struct hg_dcfg_member {
  uint32_t id;
  char raft[HG_DCFG_ADDR_MAX + 8];
  hg_dcfg_addr_t client;
} hg_dcfg_member_t;

/* Where parsing failed: the line (1-based, 0 for a file-level error), the
 * key ("" if none) and the reason. */
typedef struct hg_dcfg_error {
  unsigned line;
  char key[64];
  char reason[192];
} hg_dcfg_error_t;

/* Fills cfg with every default. Cannot fail. */
void hg_daemon_config_defaults(hg_daemon_config_t *cfg);

/*
 * Applies the text text[0..len) (the file's contents) on top of cfg. Lines
 * are `key = value`, `#` starts a comment (outside a value only at the
 * start of a line or after whitespace), blank lines are ignored. Returns 0,
 * or HG_EPARSE (a line without `=`, a duplicate key), HG_ENOTFOUND (unknown
 * key) or HG_ERANGE / HG_EINVAL (bad value), with *err filled; cfg may then
 * hold part of the file and must not be used. Rules that tie keys together
 * are checked by hg_daemon_config_check(), not here, so that several texts
 * (a file, then overrides) can be applied before it.
 */
int hg_daemon_config_parse(hg_daemon_config_t *cfg, const char *text, size_t len,
                           hg_dcfg_error_t *err);

/* Checks the rules that tie keys together (listen.http differs from
 * listen.order_entry, journal.segment_size exceeds journal.batch_bytes + 64,
 * tls.cert and tls.key go together, and a non-loopback listen.order_entry
 * has TLS or an explicit tls = off; cluster.id needs pipeline.mode = loop
 * and a cluster.members that lists it, cluster.join needs cluster.id;
 * cluster.tls_* come all three together and only with cluster.id, and
 * without them every member's Raft address is loopback unless
 * cluster.insecure = yes; http.tls_cert and http.tls_key come
 * together, not with http.tls = off, and a non-loopback listen.http needs
 * them unless http.tls = off). 0 or HG_EINVAL with *err (line 0,
 * naming the key). */
int hg_daemon_config_check(const hg_daemon_config_t *cfg, hg_dcfg_error_t *err);

/* Parses cfg->cluster_members into out[0..HG_DCFG_MAX_MEMBERS) and *n.
 * 0, or HG_EINVAL / HG_ERANGE with *err (a malformed member, a duplicate
 * id or raft address, none at all, too many). */
int hg_daemon_config_members(const hg_daemon_config_t *cfg, hg_dcfg_member_t *out, size_t *n,
                             hg_dcfg_error_t *err);

/* Whether listen.order_entry serves TLS: tls = on, or tls not set and
 * tls.cert set. */
bool hg_daemon_config_tls(const hg_daemon_config_t *cfg);

/* Reads path, parses it as above onto cfg (start from
 * hg_daemon_config_defaults) and checks it; -errno (with reason) if it
 * cannot be read. */
int hg_daemon_config_load(hg_daemon_config_t *cfg, const char *path, hg_dcfg_error_t *err);

/* Fills the pipeline configuration (data_dir points into cfg; callbacks are
 * left to the caller). */
void hg_daemon_config_pipeline(const hg_daemon_config_t *cfg, hg_pipeline_config_t *out);

/* The level named s ("info", as hg_log_level_name writes it); -1 if none. */
int hg_log_level_parse(const char *s);

/* Number of keys and the i-th key's name (for documentation checks). */
size_t hg_daemon_config_key_count(void);
const char *hg_daemon_config_key_name(size_t i);

/*
 * Compares two configs key by key; for each key whose value differs calls
 * fn(ctx, key, reloadable). Reloadable keys are those SIGHUP applies:
 * log.level, synthetic.orders_per_sec, http.keepalive, http.idle_timeout_ms.
 */
void hg_daemon_config_diff(const hg_daemon_config_t *a, const hg_daemon_config_t *b,
                           void (*fn)(void *ctx, const char *key, int reloadable), void *ctx);

#endif /* HOURGLASS_DAEMON_CONFIG_H */
