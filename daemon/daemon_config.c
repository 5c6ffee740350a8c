/*
 * daemon_config.c - hourglassd's configuration file.
 *
 * One table lists every key: its name, the type of its value, the field of
 * hg_daemon_config_t it sets (by offset), its bounds and whether SIGHUP may
 * change it while running. Parsing, the diff used by reload and the
 * documentation check in the tests all walk this table, so a key cannot
 * exist in one place and be missing in another. Values are checked when
 * read (type and bounds) and the whole config once at the end (rules that
 * tie keys together); every failure names the line, the key and the reason.
 */
#include "daemon_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>

#include "hourglass/error.h"

typedef enum ktype {
  K_ADDR,       /* host:port or [v6]:port */
  K_PATH,       /* non-empty path (K_OPTPATH: may be empty) */
  K_OPTPATH,
  K_LEVEL,      /* debug|info|warn|error */
  K_SIZE64,     /* bytes, with optional K/M/G suffix (powers of 1024) */
  K_SIZE32,
  K_U32,
  K_U64,
  K_BOOL,       /* yes|no|true|false|on|off|1|0 */
  K_AUTOBOOL,   /* auto (-1) or a K_BOOL value */
  K_DURABILITY, /* durable | ack_before_durable_unsafe */
  K_WAIT,       /* block | spin N */
  K_PIPEMODE    /* loop | threads */
} ktype_t;

typedef struct key {
  const char *name;
  ktype_t type;
  size_t off;
  uint64_t min, max; /* numeric bounds, inclusive */
  int reloadable;
  int pow2;          /* value must be a power of two */
} keydef_t;

#define OFF(f) offsetof(hg_daemon_config_t, f)
#define KB ((uint64_t)1 << 10)
#define MB ((uint64_t)1 << 20)
#define GB ((uint64_t)1 << 30)

static const keydef_t KEYS[] = {
    {"listen.order_entry", K_ADDR, OFF(order_entry), 0, 0, 0, 0},
    {"listen.http", K_ADDR, OFF(http), 0, 0, 0, 0},
    {"data_dir", K_PATH, OFF(data_dir), 0, 0, 0, 0},
    {"gateway.keys_file", K_OPTPATH, OFF(keys_file), 0, 0, 0, 0},
    {"gateway.outlog_segment_size", K_SIZE64, OFF(outlog_segment_size), 64 * KB, 4 * GB, 0, 0},
    {"gateway.outlog_segments_kept", K_U32, OFF(outlog_segments_kept), 1, 100000, 0, 0},
    {"gateway.outlog_max_session_ids", K_U32, OFF(outlog_max_session_ids), 1, 1u << 28, 0, 0},
    {"gateway.max_unauthenticated", K_U32, OFF(max_unauthenticated), 1, 1000000, 0, 0},
    {"gateway.max_unauthenticated_per_address", K_U32, OFF(max_unauthenticated_per_address), 1,
     1000000, 0, 0},
    {"gateway.login_timeout_ms", K_U32, OFF(login_timeout_ms), 100, 600000, 0, 0},
    {"gateway.sessions_per_key", K_U32, OFF(sessions_per_key), 1, 1024, 0, 0},
    {"tls", K_AUTOBOOL, OFF(tls), 0, 1, 0, 0},
    {"tls.cert", K_OPTPATH, OFF(tls_cert), 0, 0, 0, 0},
    {"tls.key", K_OPTPATH, OFF(tls_key), 0, 0, 0, 0},
    {"tls.client_ca", K_OPTPATH, OFF(tls_client_ca), 0, 0, 0, 0},
    {"log.level", K_LEVEL, OFF(log_level), 0, 0, 1, 0},
    {"journal.segment_size", K_SIZE64, OFF(journal_segment_size), 1 * MB, 64 * GB, 0, 0},
    {"journal.batch_bytes", K_SIZE32, OFF(journal_batch_bytes), 64 * KB, 1 * GB, 0, 0},
    {"journal.force_fallback", K_BOOL, OFF(journal_force_fallback), 0, 1, 0, 0},
    {"snapshot.interval", K_U64, OFF(snapshot_interval), 0, UINT64_MAX, 0, 0},
    {"snapshot.keep", K_U32, OFF(snapshot_keep), 1, 1000, 0, 0},
    {"clearing.mark_interval_ms", K_U32, OFF(mark_interval_ms), 0, 86400000, 0, 0},
    {"store.map_size", K_SIZE64, OFF(store_map_size), 1 * MB, 1024 * GB, 0, 0},
    {"durability", K_DURABILITY, OFF(durability), 0, 1, 0, 0},
    {"wait", K_WAIT, OFF(wait_spin), 0, 100000000, 0, 0},
    {"threads.realtime_priority", K_U32, OFF(rt_priority), 0, 99, 0, 0},
    {"limits.max_instruments", K_U32, OFF(max_instruments), 1, 100000, 0, 0},
    {"limits.max_accounts", K_U32, OFF(max_accounts), 1, 10000000, 0, 0},
    {"limits.max_book_orders", K_U32, OFF(max_book_orders), 1, 1u << 26, 0, 0},
    {"limits.max_orders", K_U32, OFF(max_orders), 1, 1u << 26, 0, 0},
    {"limits.max_sessions", K_U32, OFF(max_sessions), 1, 1000000, 0, 0},
    {"limits.max_frame", K_SIZE32, OFF(max_frame), 512, 16 * MB, 0, 0},
    {"pipeline.inbound_capacity", K_U32, OFF(inbound_capacity), 64, 1u << 26, 0, 1},
    {"pipeline.outbound_capacity", K_U32, OFF(outbound_capacity), 64, 1u << 28, 0, 1},
    {"pipeline.staging_capacity", K_U32, OFF(staging_capacity), 64, 1u << 28, 0, 1},
    {"pipeline.mode", K_PIPEMODE, OFF(pipe_mode), 0, 1, 0, 0},
    {"throttle.rate", K_U32, OFF(throttle_rate), 1, 100000000, 0, 0},
    {"throttle.burst", K_U32, OFF(throttle_burst), 0, 100000000, 0, 0},
    {"http.max_connections", K_U32, OFF(http_max_connections), 1, 100000, 0, 0},
    {"http.max_request", K_SIZE32, OFF(http_max_request), 256, 1 * MB, 0, 0},
    {"http.keepalive", K_BOOL, OFF(http_keepalive), 0, 1, 1, 0},
    {"http.idle_timeout_ms", K_U32, OFF(http_idle_ms), 100, 3600000, 1, 0},
    {"http.max_connections_per_ip", K_U32, OFF(http_max_per_ip), 1, 100000, 0, 0},
    {"http.stream_buffer", K_SIZE32, OFF(http_stream_buffer), 64 * KB, 256 * MB, 0, 0},
    {"http.tls", K_BOOL, OFF(http_tls), 0, 1, 0, 0},
    {"http.tls_cert", K_OPTPATH, OFF(http_tls_cert), 0, 0, 0, 0},
    {"http.tls_key", K_OPTPATH, OFF(http_tls_key), 0, 0, 0, 0},
    {"market.depth_levels", K_U32, OFF(md_depth), 1, 1000, 0, 0},
    {"market.recent_trades", K_U32, OFF(md_trades), 1, 100000, 0, 0},
    {"synthetic.orders_per_sec", K_U32, OFF(synthetic_rate), 0, 1000000, 1, 0},
    {"cluster.id", K_U32, OFF(cluster_id), 0, HG_DCFG_MAX_MEMBERS, 0, 0},
    {"cluster.members", K_OPTPATH, OFF(cluster_members), 0, 0, 0, 0},
    {"cluster.dir", K_OPTPATH, OFF(cluster_dir), 0, 0, 0, 0},
    {"cluster.election_timeout_ms", K_U32, OFF(cluster_election_ms), 100, 60000, 0, 0},
    {"cluster.snapshot_entries", K_U32, OFF(cluster_snapshot_entries), 0, 1u << 30, 0, 0},
    {"cluster.snapshot_hold_ms", K_U32, OFF(cluster_snapshot_hold_ms), 0, 3600000, 0, 0},
    {"cluster.tls_cert", K_OPTPATH, OFF(cluster_tls_cert), 0, 0, 0, 0},
    {"cluster.tls_key", K_OPTPATH, OFF(cluster_tls_key), 0, 0, 0, 0},
    {"cluster.tls_ca", K_OPTPATH, OFF(cluster_tls_ca), 0, 0, 0, 0},
    {"cluster.insecure", K_BOOL, OFF(cluster_insecure), 0, 1, 0, 0},
    {"cluster.join", K_BOOL, OFF(cluster_join), 0, 1, 0, 0},
    {"cluster.listen", K_OPTPATH, OFF(cluster_listen), 0, 0, 0, 0},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

int hg_log_level_parse(const char *s) {
  for (int i = HG_LOG_DEBUG; i <= HG_LOG_ERROR; i++)
    if (strcmp(s, hg_log_level_name(i)) == 0) return i;
  return -1;
}

size_t hg_daemon_config_key_count(void) { return NKEYS; }

const char *hg_daemon_config_key_name(size_t i) { return i < NKEYS ? KEYS[i].name : NULL; }

static void set_addr(hg_dcfg_addr_t *a, const char *host, uint16_t port) {
  snprintf(a->host, sizeof a->host, "%s", host);
  a->port = port;
}

void hg_daemon_config_defaults(hg_daemon_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  set_addr(&cfg->order_entry, "127.0.0.1", 7700);
  set_addr(&cfg->http, "127.0.0.1", 7780);
  snprintf(cfg->data_dir, sizeof cfg->data_dir, "./var");
  cfg->log_level = HG_LOG_INFO;
  cfg->journal_segment_size = 64 * MB;
  cfg->journal_batch_bytes = (uint32_t)(4 * MB);
  cfg->snapshot_interval = 1000000;
  cfg->mark_interval_ms = 1000;
  cfg->snapshot_keep = 2;
  cfg->store_map_size = 1 * GB;
  cfg->durability = HG_DURABILITY_DURABLE;
  cfg->pipe_mode = HG_PIPE_MODE_LOOP;
  cfg->wait_spin = 0;
  cfg->rt_priority = 0;
  hg_exchange_config_t ex;
  hg_exchange_config_default(&ex);
  cfg->max_instruments = ex.max_instruments;
  cfg->max_accounts = ex.max_accounts;
  cfg->max_book_orders = ex.max_book_orders;
  cfg->max_orders = 1u << 18;
  cfg->max_sessions = 1024;
  cfg->max_frame = 65536;
  cfg->inbound_capacity = 65536;
  cfg->outbound_capacity = 262144;
  cfg->staging_capacity = 262144;
  cfg->throttle_rate = 10000;
  cfg->throttle_burst = 0;
  cfg->http_max_connections = 64;
  cfg->http_max_request = 8192;
  cfg->http_keepalive = 1;
  cfg->http_idle_ms = 10000;
  cfg->http_max_per_ip = 32;
  cfg->http_stream_buffer = (uint32_t)(1 * MB);
  cfg->http_tls = 1;
  cfg->md_depth = 20;
  cfg->md_trades = 100;
  cfg->synthetic_rate = 0;
  cfg->outlog_segment_size = 64 * MB;
  cfg->outlog_segments_kept = 8;
  cfg->outlog_max_session_ids = 1u << 18;
  cfg->max_unauthenticated = 64;
  cfg->max_unauthenticated_per_address = 16;
  cfg->login_timeout_ms = 5000;
  cfg->sessions_per_key = 4;
  cfg->tls = -1;
  cfg->cluster_election_ms = 300;
  cfg->cluster_snapshot_entries = 65536;
  cfg->cluster_snapshot_hold_ms = 60000;
}

/* 127.0.0.0/8 and ::1 (literals: listen addresses are never names). */
static bool is_loopback(const char *host) {
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

bool hg_daemon_config_tls(const hg_daemon_config_t *c) {
  return c->tls == 1 || (c->tls == -1 && c->tls_cert[0] != '\0');
}

/* ------------------------------------------------------------------ values */

__attribute__((format(printf, 5, 6))) static int fail(hg_dcfg_error_t *err, unsigned line,
                                                      const char *key, int rc, const char *fmt,
                                                      ...) {
  err->line = line;
  snprintf(err->key, sizeof err->key, "%s", key);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->reason, sizeof err->reason, fmt, ap);
  va_end(ap);
  return rc;
}

/* Unsigned decimal with an optional K/M/G suffix (when sized). */
static int parse_u64(const char *v, int sized, uint64_t *out) {
  if (!isdigit((unsigned char)v[0])) return -1;
  errno = 0;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno == ERANGE) return -2;
  uint64_t mul = 1;
  if (sized && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'K': case 'k': mul = KB; end++; break;
      case 'M': case 'm': mul = MB; end++; break;
      case 'G': case 'g': mul = GB; end++; break;
      default: break;
    }
  }
  if (*end != '\0') return -1;
  if (x > UINT64_MAX / mul) return -2;
  *out = (uint64_t)x * mul;
  return 0;
}

static int parse_addr(const char *v, hg_dcfg_addr_t *out) {
  char host[HG_DCFG_ADDR_MAX];
  const char *colon;
  size_t hl;
  if (v[0] == '[') {
    const char *close = strchr(v, ']');
    if (close == NULL || close[1] != ':') return -1;
    hl = (size_t)(close - v - 1);
    if (hl == 0 || hl >= sizeof host) return -1;
    memcpy(host, v + 1, hl);
    colon = close + 1;
  } else {
    colon = strrchr(v, ':');
    if (colon == NULL) return -1;
    hl = (size_t)(colon - v);
    if (hl == 0 || hl >= sizeof host) return -1;
    memcpy(host, v, hl);
  }
  host[hl] = '\0';
  unsigned char buf[16];
  int v6 = v[0] == '[';
  if (inet_pton(v6 ? AF_INET6 : AF_INET, host, buf) != 1) return -1;
  uint64_t port;
  if (parse_u64(colon + 1, 0, &port) != 0 || port > 65535) return -2;
  set_addr(out, host, (uint16_t)port);
  return 0;
}

static int parse_bool(const char *v) {
  static const char *const yes[] = {"yes", "true", "on", "1"};
  static const char *const no[] = {"no", "false", "off", "0"};
  for (size_t i = 0; i < 4; i++) {
    if (strcmp(v, yes[i]) == 0) return 1;
    if (strcmp(v, no[i]) == 0) return 0;
  }
  return -1;
}

static int set_value(hg_daemon_config_t *cfg, const keydef_t *k, const char *v, unsigned line,
                     hg_dcfg_error_t *err) {
  void *field = (char *)cfg + k->off;
  uint64_t x = 0;
  int r;
  switch (k->type) {
    case K_ADDR:
      r = parse_addr(v, field);
      if (r == -2) return fail(err, line, k->name, HG_ERANGE, "port of '%s' is not 0..65535", v);
      if (r != 0)
        return fail(err, line, k->name, HG_EINVAL,
                    "'%s' is not an address: expected IPv4:port or [IPv6]:port", v);
      return 0;
    case K_PATH:
    case K_OPTPATH:
      if (k->type == K_PATH && v[0] == '\0')
        return fail(err, line, k->name, HG_EINVAL, "%s", "must not be empty");
      if (strlen(v) >= HG_DCFG_PATH_MAX)
        return fail(err, line, k->name, HG_ERANGE, "%s", "path too long");
      snprintf(field, HG_DCFG_PATH_MAX, "%s", v);
      return 0;
    case K_LEVEL:
      r = hg_log_level_parse(v);
      if (r < 0)
        return fail(err, line, k->name, HG_EINVAL,
                    "'%s' is not a level: expected debug, info, warn or error", v);
      *(int *)field = r;
      return 0;
    case K_AUTOBOOL:
      if (strcmp(v, "auto") == 0) {
        *(int *)field = -1;
        return 0;
      }
      /* fall through */
    case K_BOOL:
      r = parse_bool(v);
      if (r < 0) return fail(err, line, k->name, HG_EINVAL, "'%s' is not yes or no", v);
      *(int *)field = r;
      return 0;
    case K_DURABILITY:
      if (strcmp(v, "durable") == 0)
        *(int *)field = HG_DURABILITY_DURABLE;
      else if (strcmp(v, "ack_before_durable_unsafe") == 0)
        *(int *)field = HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE;
      else
        return fail(err, line, k->name, HG_EINVAL,
                    "'%s' is not a mode: expected durable or ack_before_durable_unsafe", v);
      return 0;
    case K_PIPEMODE:
      if (strcmp(v, "loop") == 0)
        *(int *)field = HG_PIPE_MODE_LOOP;
      else if (strcmp(v, "threads") == 0)
        *(int *)field = HG_PIPE_MODE_THREADS;
      else
        return fail(err, line, k->name, HG_EINVAL,
                    "'%s' is not a mode: expected loop or threads", v);
      return 0;
    case K_WAIT:
      if (strcmp(v, "block") == 0) {
        *(uint32_t *)field = 0;
        return 0;
      }
      if (strncmp(v, "spin", 4) == 0 && (v[4] == ' ' || v[4] == '\t')) {
        const char *n = v + 5;
        while (*n == ' ' || *n == '\t') n++;
        if (parse_u64(n, 0, &x) == 0 && x >= 1 && x <= k->max) {
          *(uint32_t *)field = (uint32_t)x;
          return 0;
        }
        return fail(err, line, k->name, HG_ERANGE, "spin count '%s' is not 1..100000000", n);
      }
      return fail(err, line, k->name, HG_EINVAL, "'%s' is not a strategy: expected block or spin N",
                  v);
    case K_SIZE64:
    case K_SIZE32:
    case K_U32:
    case K_U64: {
      int sized = k->type == K_SIZE64 || k->type == K_SIZE32;
      r = parse_u64(v, sized, &x);
      if (r == -1)
        return sized ? fail(err, line, k->name, HG_EINVAL,
                            "'%s' is not a size: expected digits with an optional K, M or G", v)
                     : fail(err, line, k->name, HG_EINVAL, "'%s' is not a non-negative integer",
                            v);
      if (r == -2 || x < k->min || x > k->max) {
        char why[160];
        snprintf(why, sizeof why, "%s is out of range %" PRIu64 "..%" PRIu64, v, k->min, k->max);
        return fail(err, line, k->name, HG_ERANGE, "%s", why);
      }
      if (k->pow2 && (x & (x - 1)) != 0)
        return fail(err, line, k->name, HG_EINVAL, "%s is not a power of two", v);
      if (k->type == K_U64 || k->type == K_SIZE64)
        *(uint64_t *)field = x;
      else
        *(uint32_t *)field = (uint32_t)x;
      return 0;
    }
  }
  return HG_EINVAL;
}

static char *trim(char *s);

/* The host of "ip:port" (all of it without a colon) into host[cap]. */
static const char *host_of(const char *hostport, char *host, size_t cap) {
  snprintf(host, cap, "%s", hostport);
  char *colon = strrchr(host, ':');
  if (colon != NULL) *colon = '\0';
  return host;
}

/* Rules that tie keys together. */
/* cluster.tls_*: all three or none; without them every member's Raft
 * address, and cluster.listen, must be loopback unless cluster.insecure is
 * set. */
static int check_cluster_tls(const hg_daemon_config_t *c, const hg_dcfg_member_t *m, size_t n,
                             hg_dcfg_error_t *err) {
  static const char *const names[3] = {"cluster.tls_cert", "cluster.tls_key", "cluster.tls_ca"};
  const char *vals[3] = {c->cluster_tls_cert, c->cluster_tls_key, c->cluster_tls_ca};
  int set = 0;
  for (int k = 0; k < 3; k++) set += vals[k][0] != '\0';
  if (set > 0 && set < 3) {
    int k = 0;
    while (vals[k][0] != '\0') k++;
    return fail(err, 0, names[k], HG_EINVAL, "%s",
                "is required: cluster.tls_cert, cluster.tls_key and cluster.tls_ca go together");
  }
  if (set == 3 || c->cluster_insecure) return 0;
  static const char *const plain =
      "set cluster.tls_cert, cluster.tls_key and cluster.tls_ca, or cluster.insecure = yes to "
      "run Raft in plain TCP there";
  char host[HG_DCFG_PATH_MAX];
  for (size_t i = 0; i < n; i++)
    if (!is_loopback(host_of(m[i].raft, host, sizeof host)))
      return fail(err, 0, "cluster.members", HG_EINVAL,
                  "member %u's Raft address %s is not loopback: %s", m[i].id, m[i].raft, plain);
  if (host_of(c->cluster_listen, host, sizeof host)[0] != '\0' && !is_loopback(host))
    return fail(err, 0, "cluster.listen", HG_EINVAL, "%s is not loopback: %s",
                c->cluster_listen, plain);
  return 0;
}

int hg_daemon_config_check(const hg_daemon_config_t *c, hg_dcfg_error_t *err) {
  if ((strcmp(c->order_entry.host, c->http.host) == 0 && c->order_entry.port == c->http.port &&
       c->http.port != 0))
    return fail(err, 0, "listen.http", HG_EINVAL, "%s", "must differ from listen.order_entry");
  if ((c->http_tls_cert[0] == '\0') != (c->http_tls_key[0] == '\0'))
    return fail(err, 0, "http.tls_cert", HG_EINVAL, "%s", "and http.tls_key go together");
  if (!c->http_tls && c->http_tls_cert[0] != '\0')
    return fail(err, 0, "http.tls", HG_EINVAL, "%s", "is off but http.tls_cert is set");
  if (c->http_tls && c->http_tls_cert[0] == '\0' && !is_loopback(c->http.host))
    return fail(err, 0, "listen.http", HG_EINVAL, "%s",
                "is not a loopback address: set http.tls_cert and http.tls_key, "
                "or http.tls = off to serve plain HTTP there");
  if (c->journal_segment_size < (uint64_t)c->journal_batch_bytes + 64)
    return fail(err, 0, "journal.segment_size", HG_EINVAL, "%s",
                "must exceed journal.batch_bytes by the 64-byte segment header");
  if (c->max_unauthenticated_per_address > c->max_unauthenticated)
    return fail(err, 0, "gateway.max_unauthenticated_per_address", HG_EINVAL, "%s",
                "must not exceed gateway.max_unauthenticated");
  if (c->tls != 0 && (c->tls_cert[0] != '\0') != (c->tls_key[0] != '\0'))
    return fail(err, 0, c->tls_cert[0] != '\0' ? "tls.key" : "tls.cert", HG_EINVAL, "%s",
                "is required with the other: tls.cert and tls.key go together");
  if (c->tls == 1 && c->tls_cert[0] == '\0')
    return fail(err, 0, "tls", HG_EINVAL, "%s", "on needs tls.cert and tls.key");
  if (c->tls_client_ca[0] != '\0' && !hg_daemon_config_tls(c))
    return fail(err, 0, "tls.client_ca", HG_EINVAL, "%s",
                "needs TLS on (tls.cert and tls.key, and tls not off)");
  if (c->tls == -1 && !hg_daemon_config_tls(c) && !is_loopback(c->order_entry.host))
    return fail(err, 0, "tls", HG_EINVAL,
                "listen.order_entry %s is not a loopback address: set tls.cert and tls.key, or "
                "tls = off to serve plain TCP there",
                c->order_entry.host);
  if (c->cluster_id == 0 && c->cluster_members[0] != '\0')
    return fail(err, 0, "cluster.members", HG_EINVAL, "%s", "is set but cluster.id is not");
  if (c->cluster_id == 0 && c->cluster_join)
    return fail(err, 0, "cluster.join", HG_EINVAL, "%s", "is set but cluster.id is not");
  if (c->cluster_listen[0] != '\0') {
    hg_dcfg_addr_t a;
    if (c->cluster_id == 0)
      return fail(err, 0, "cluster.listen", HG_EINVAL, "%s", "is set but cluster.id is not");
    if (c->cluster_listen[0] == '[' || parse_addr(c->cluster_listen, &a) != 0 || a.port == 0)
      return fail(err, 0, "cluster.listen", HG_EINVAL, "'%.100s' is not ipv4:port",
                  c->cluster_listen);
  }
  if (c->cluster_id != 0) {
    if (c->pipe_mode != HG_PIPE_MODE_LOOP)
      return fail(err, 0, "cluster.id", HG_EINVAL, "%s", "needs pipeline.mode = loop");
    hg_dcfg_member_t m[HG_DCFG_MAX_MEMBERS];
    size_t n = 0;
    int rc = hg_daemon_config_members(c, m, &n, err);
    if (rc != 0) return rc;
    size_t i = 0;
    while (i < n && m[i].id != c->cluster_id) i++;
    if (i == n)
      return fail(err, 0, "cluster.members", HG_EINVAL, "does not list cluster.id %u",
                  c->cluster_id);
    rc = check_cluster_tls(c, m, n, err);
    if (rc != 0) return rc;
  } else if (c->cluster_tls_cert[0] != '\0' || c->cluster_tls_key[0] != '\0' ||
             c->cluster_tls_ca[0] != '\0') {
    return fail(err, 0, c->cluster_tls_cert[0] != '\0'  ? "cluster.tls_cert"
                        : c->cluster_tls_key[0] != '\0' ? "cluster.tls_key"
                                                        : "cluster.tls_ca",
                HG_EINVAL, "%s", "is set but cluster.id is not");
  }
  return 0;
}

/* One "id=raft_ip:port/client_ip:port" of cluster.members. */
static int parse_member(char *s, hg_dcfg_member_t *m) {
  char *eq = strchr(s, '='), *slash = strchr(s, '/');
  if (eq == NULL || slash == NULL || slash < eq) return -1;
  *eq = '\0';
  *slash = '\0';
  uint64_t id;
  if (parse_u64(trim(s), 0, &id) != 0 || id == 0 || id > HG_DCFG_MAX_MEMBERS) return -1;
  m->id = (uint32_t)id;
  hg_dcfg_addr_t raft;
  const char *ra = trim(eq + 1);
  if (parse_addr(ra, &raft) != 0 || ra[0] == '[' || raft.port == 0) return -1;
  snprintf(m->raft, sizeof m->raft, "%s:%u", raft.host, raft.port);
  if (parse_addr(trim(slash + 1), &m->client) != 0 || m->client.port == 0) return -1;
  return 0;
}

int hg_daemon_config_members(const hg_daemon_config_t *c, hg_dcfg_member_t *out, size_t *n,
                             hg_dcfg_error_t *err) {
  char buf[HG_DCFG_PATH_MAX];
  snprintf(buf, sizeof buf, "%s", c->cluster_members);
  *n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    if (*n == HG_DCFG_MAX_MEMBERS)
      return fail(err, 0, "cluster.members", HG_ERANGE, "more than %d members",
                  HG_DCFG_MAX_MEMBERS);
    hg_dcfg_member_t *m = &out[*n];
    char one[HG_DCFG_PATH_MAX];
    snprintf(one, sizeof one, "%s", tok);
    if (parse_member(tok, m) != 0)
      return fail(err, 0, "cluster.members", HG_EINVAL,
                  "'%.100s' is not id=raft_ipv4:port/client_ip:port (id 1..%d)", one,
                  HG_DCFG_MAX_MEMBERS);
    for (size_t i = 0; i < *n; i++)
      if (out[i].id == m->id || strcmp(out[i].raft, m->raft) == 0)
        return fail(err, 0, "cluster.members", HG_EINVAL, "member %u is listed twice", m->id);
    (*n)++;
  }
  if (*n == 0) return fail(err, 0, "cluster.members", HG_EINVAL, "%s", "lists no member");
  return 0;
}

static const keydef_t *find_key(const char *name) {
  for (size_t i = 0; i < NKEYS; i++)
    if (strcmp(KEYS[i].name, name) == 0) return &KEYS[i];
  return NULL;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = '\0';
  return s;
}

int hg_daemon_config_parse(hg_daemon_config_t *cfg, const char *text, size_t len,
                           hg_dcfg_error_t *err) {
  unsigned char seen[NKEYS];
  memset(seen, 0, sizeof seen);
  memset(err, 0, sizeof *err);
  size_t pos = 0;
  unsigned line = 0;
  char buf[2048];
  while (pos < len) {
    line++;
    size_t eol = pos;
    while (eol < len && text[eol] != '\n') eol++;
    size_t n = eol - pos;
    if (n >= sizeof buf) return fail(err, line, "", HG_EPARSE, "%s", "line longer than 2047 bytes");
    memcpy(buf, text + pos, n);
    buf[n] = '\0';
    pos = eol + 1;
    if (memchr(buf, '\0', n) != NULL)
      return fail(err, line, "", HG_EPARSE, "%s", "NUL byte in the line");
    /* A comment starts with '#' at the start or after whitespace, so a
     * value cannot contain " #". */
    for (char *h = buf; (h = strchr(h, '#')) != NULL; h++) {
      if (h == buf || h[-1] == ' ' || h[-1] == '\t') {
        *h = '\0';
        break;
      }
    }
    char *s = trim(buf);
    if (*s == '\0') continue;
    char *eq = strchr(s, '=');
    if (eq == NULL) return fail(err, line, "", HG_EPARSE, "'%s' is not `key = value`", s);
    *eq = '\0';
    char *name = trim(s), *value = trim(eq + 1);
    if (*name == '\0') return fail(err, line, "", HG_EPARSE, "%s", "missing key before '='");
    const keydef_t *k = find_key(name);
    {
      if (k == NULL) return fail(err, line, name, HG_ENOTFOUND, "%s", "unknown key");
      if (seen[k - KEYS]) return fail(err, line, name, HG_EPARSE, "%s", "key given twice");
      seen[k - KEYS] = 1;
    }
    if (*value == '\0' && k->type != K_OPTPATH)
      return fail(err, line, name, HG_EINVAL, "%s", "missing value");
    int rc = set_value(cfg, k, value, line, err);
    if (rc != 0) return rc;
  }
  return 0;
}

int hg_daemon_config_load(hg_daemon_config_t *cfg, const char *path, hg_dcfg_error_t *err) {
  memset(err, 0, sizeof *err);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    int e = -errno;
    fail(err, 0, "", e, "cannot open: %s", strerror(-e));
    return e;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  if (buf == NULL) {
    fclose(f);
    return -ENOMEM;
  }
  for (;;) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
    if (n == cap) {
      if (cap >= (1u << 22)) {
        free(buf);
        fclose(f);
        return fail(err, 0, "", HG_ERANGE, "%s", "file larger than 4 MiB");
      }
      char *nb = realloc(buf, cap * 2);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return -ENOMEM;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int rerr = ferror(f);
  fclose(f);
  if (rerr) {
    free(buf);
    return fail(err, 0, "", -EIO, "%s", "read error");
  }
  int rc = hg_daemon_config_parse(cfg, buf, n, err);
  free(buf);
  return rc != 0 ? rc : hg_daemon_config_check(cfg, err);
}

void hg_daemon_config_pipeline(const hg_daemon_config_t *cfg, hg_pipeline_config_t *out) {
  hg_pipeline_config_init(out);
  out->data_dir = cfg->data_dir;
  out->exchange.max_instruments = cfg->max_instruments;
  out->exchange.max_accounts = cfg->max_accounts;
  out->exchange.max_book_orders = cfg->max_book_orders;
  out->journal.segment_size = cfg->journal_segment_size;
  out->journal.batch_bytes = cfg->journal_batch_bytes;
  out->journal.force_fallback = cfg->journal_force_fallback;
  out->inbound_capacity = cfg->inbound_capacity;
  out->outbound_capacity = cfg->outbound_capacity;
  out->staging_capacity = cfg->staging_capacity;
  out->spin = cfg->wait_spin;
  out->rt_priority = (int)cfg->rt_priority;
  out->durability = cfg->durability;
  out->mode = cfg->pipe_mode;
  out->snapshot_every = cfg->snapshot_interval;
  out->snapshot_keep = cfg->snapshot_keep;
  out->map_size = (size_t)cfg->store_map_size;
}

static size_t field_size(ktype_t t) {
  switch (t) {
    case K_ADDR: return sizeof(hg_dcfg_addr_t);
    case K_PATH:
    case K_OPTPATH: return HG_DCFG_PATH_MAX;
    case K_LEVEL:
    case K_BOOL:
    case K_AUTOBOOL:
    case K_DURABILITY:
    case K_PIPEMODE: return sizeof(int);
    case K_SIZE64:
    case K_U64: return sizeof(uint64_t);
    case K_SIZE32:
    case K_U32:
    case K_WAIT: return sizeof(uint32_t);
  }
  return 0;
}

void hg_daemon_config_diff(const hg_daemon_config_t *a, const hg_daemon_config_t *b,
                           void (*fn)(void *ctx, const char *key, int reloadable), void *ctx) {
  for (size_t i = 0; i < NKEYS; i++) {
    const keydef_t *k = &KEYS[i];
    int differs;
    if (k->type == K_PATH || k->type == K_OPTPATH)
      differs = strcmp((const char *)a + k->off, (const char *)b + k->off) != 0;
    else if (k->type == K_ADDR) {
      const hg_dcfg_addr_t *x = (const void *)((const char *)a + k->off);
      const hg_dcfg_addr_t *y = (const void *)((const char *)b + k->off);
      differs = strcmp(x->host, y->host) != 0 || x->port != y->port;
    } else
      differs = memcmp((const char *)a + k->off, (const char *)b + k->off, field_size(k->type)) != 0;
    if (differs) fn(ctx, k->name, k->reloadable);
  }
}
