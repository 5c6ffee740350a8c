/* hourglassd's configuration: defaults, every key, every kind of error with
 * its line and key, cross-key rules, the reload diff, and that the shipped
 * file and the documentation cover every key. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon_config.h"
#include "hourglass/error.h"

static int parse(hg_daemon_config_t *c, const char *text, hg_dcfg_error_t *e) {
  hg_daemon_config_defaults(c);
  int rc = hg_daemon_config_parse(c, text, strlen(text), e);
  return rc != 0 ? rc : hg_daemon_config_check(c, e);
}

static void defaults_are_documented_values(void **state) {
  (void)state;
  hg_daemon_config_t c;
  hg_daemon_config_defaults(&c);
  assert_string_equal(c.order_entry.host, "127.0.0.1");
  assert_int_equal(c.order_entry.port, 7700);
  assert_int_equal(c.http.port, 7780);
  assert_string_equal(c.data_dir, "./var");
  assert_int_equal(c.log_level, HG_LOG_INFO);
  assert_int_equal(c.journal_segment_size, 64u << 20);
  assert_int_equal(c.journal_batch_bytes, 4u << 20);
  assert_int_equal(c.snapshot_interval, 1000000);
  assert_int_equal(c.snapshot_keep, 2);
  assert_int_equal(c.mark_interval_ms, 1000);
  assert_int_equal(c.durability, HG_DURABILITY_DURABLE);
  assert_int_equal(c.pipe_mode, HG_PIPE_MODE_LOOP);
  assert_int_equal(c.wait_spin, 0);
  assert_int_equal(c.rt_priority, 0);
  assert_int_equal(c.max_instruments, 64);
  assert_int_equal(c.http_keepalive, 1);
  assert_int_equal(c.synthetic_rate, 0);
  hg_dcfg_error_t e;
  assert_int_equal(hg_daemon_config_check(&c, &e), 0);
}

/* listen.market_data never shipped: market data is served on the one
 * gateway listener, and the key is unknown. */
static void no_market_data_key(void **state) {
  (void)state;
  hg_daemon_config_t c;
  hg_dcfg_error_t e;
  assert_int_equal(parse(&c, "listen.market_data = 127.0.0.1:7700\n", &e), HG_ENOTFOUND);
  assert_string_equal(e.key, "listen.market_data");
}

/* A non-loopback order-entry address needs TLS or an explicit tls = off;
 * the refusal names the key. */
static void tls_rules(void **state) {
  (void)state;
  hg_daemon_config_t c;
  hg_dcfg_error_t e;
  assert_int_equal(parse(&c, "listen.order_entry = 0.0.0.0:7700\n", &e), HG_EINVAL);
  assert_string_equal(e.key, "tls");
  assert_non_null(strstr(e.reason, "tls = off"));
  assert_int_equal(parse(&c, "listen.order_entry = 0.0.0.0:7700\ntls = off\n", &e), 0);
  assert_false(hg_daemon_config_tls(&c));
  assert_int_equal(parse(&c, "listen.order_entry = [::]:7700\ntls.cert = a.pem\ntls.key = k.pem\n",
                         &e), 0);
  assert_true(hg_daemon_config_tls(&c));
  assert_int_equal(parse(&c, "listen.order_entry = [::1]:7700\n", &e), 0);
  assert_false(hg_daemon_config_tls(&c));
  assert_int_equal(parse(&c, "tls.cert = a.pem\n", &e), HG_EINVAL);
  assert_string_equal(e.key, "tls.key");
  assert_int_equal(parse(&c, "tls = on\n", &e), HG_EINVAL);
  assert_string_equal(e.key, "tls");
  assert_int_equal(parse(&c, "tls.client_ca = ca.pem\n", &e), HG_EINVAL);
  assert_string_equal(e.key, "tls.client_ca");
  assert_int_equal(parse(&c, "tls = maybe\n", &e), HG_EINVAL);
}

static void every_key_is_set(void **state) {
  (void)state;
  const char *text =
      "listen.order_entry = 10.0.0.1:9000\n"
      "listen.http = [::1]:9001\n"
      "data_dir = /srv/hg data\n"
      "gateway.keys_file = /etc/hg/keys\n"
      "log.level = debug\n"
      "journal.segment_size = 2M\n"
      "journal.batch_bytes = 512K\n"
      "journal.force_fallback = yes\n"
      "snapshot.interval = 0\n"
      "snapshot.keep = 7\n"
      "clearing.mark_interval_ms = 0\n"
      "store.map_size = 2G\n"
      "durability = ack_before_durable_unsafe\n"
      "wait = spin 500\n"
      "threads.realtime_priority = 20\n"
      "limits.max_instruments = 12\n"
      "limits.max_accounts = 99\n"
      "limits.max_book_orders = 1000\n"
      "limits.max_orders = 2000\n"
      "limits.max_sessions = 3\n"
      "limits.max_frame = 4096\n"
      "pipeline.inbound_capacity = 1024\n"
      "pipeline.outbound_capacity = 2048\n"
      "pipeline.staging_capacity = 4096\n"
      "pipeline.mode = threads\n"
      "throttle.rate = 50\n"
      "throttle.burst = 75\n"
      "http.max_connections = 5\n"
      "http.max_request = 1k\n"
      "http.keepalive = off\n"
      "http.idle_timeout_ms = 250\n"
      "market.depth_levels = 5\n"
      "market.recent_trades = 9\n"
      "synthetic.orders_per_sec = 123\n"
      "gateway.max_unauthenticated = 40\n"
      "gateway.max_unauthenticated_per_address = 5\n"
      "gateway.login_timeout_ms = 750\n"
      "tls = on\n"
      "tls.cert = /etc/hg/cert.pem\n"
      "tls.key = /etc/hg/key.pem\n"
      "tls.client_ca = /etc/hg/clients.pem\n";
  hg_daemon_config_t c;
  hg_dcfg_error_t e;
  assert_int_equal(parse(&c, text, &e), 0);
  assert_string_equal(c.order_entry.host, "10.0.0.1");
  assert_int_equal(c.order_entry.port, 9000);
  assert_string_equal(c.http.host, "::1");
  assert_int_equal(c.http.port, 9001);
  assert_string_equal(c.data_dir, "/srv/hg data");
  assert_string_equal(c.keys_file, "/etc/hg/keys");
  assert_int_equal(c.log_level, HG_LOG_DEBUG);
  assert_int_equal(c.journal_segment_size, 2097152);
  assert_int_equal(c.journal_batch_bytes, 524288);
  assert_int_equal(c.journal_force_fallback, 1);
  assert_int_equal(c.snapshot_interval, 0);
  assert_int_equal(c.snapshot_keep, 7);
  assert_int_equal(c.mark_interval_ms, 0);
  assert_int_equal(c.store_map_size, 2147483648u);
  assert_int_equal(c.durability, HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE);
  assert_int_equal(c.wait_spin, 500);
  assert_int_equal(c.rt_priority, 20);
  assert_int_equal(c.max_instruments, 12);
  assert_int_equal(c.max_accounts, 99);
  assert_int_equal(c.max_book_orders, 1000);
  assert_int_equal(c.max_orders, 2000);
  assert_int_equal(c.max_sessions, 3);
  assert_int_equal(c.max_frame, 4096);
  assert_int_equal(c.inbound_capacity, 1024);
  assert_int_equal(c.outbound_capacity, 2048);
  assert_int_equal(c.staging_capacity, 4096);
  assert_int_equal(c.throttle_rate, 50);
  assert_int_equal(c.throttle_burst, 75);
  assert_int_equal(c.http_max_connections, 5);
  assert_int_equal(c.http_max_request, 1024);
  assert_int_equal(c.http_keepalive, 0);
  assert_int_equal(c.http_idle_ms, 250);
  assert_int_equal(c.md_depth, 5);
  assert_int_equal(c.md_trades, 9);
  assert_int_equal(c.synthetic_rate, 123);
  assert_int_equal(c.max_unauthenticated, 40);
  assert_int_equal(c.max_unauthenticated_per_address, 5);
  assert_int_equal(c.login_timeout_ms, 750);

  /* The pipeline gets what the keys say. */
  hg_pipeline_config_t pc;
  hg_daemon_config_pipeline(&c, &pc);
  assert_string_equal(pc.data_dir, "/srv/hg data");
  assert_int_equal(pc.exchange.max_instruments, 12);
  assert_int_equal(pc.exchange.max_accounts, 99);
  assert_int_equal(pc.exchange.max_book_orders, 1000);
  assert_int_equal(pc.journal.segment_size, 2097152);
  assert_int_equal(pc.journal.batch_bytes, 524288);
  assert_int_equal(pc.journal.force_fallback, 1);
  assert_int_equal(pc.spin, 500);
  assert_int_equal(pc.durability, HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE);
  assert_int_equal(pc.mode, HG_PIPE_MODE_THREADS);
  assert_int_equal(pc.snapshot_every, 0);
  assert_int_equal(pc.snapshot_keep, 7);
  assert_int_equal(pc.map_size, 2147483648u);
  assert_int_equal(pc.inbound_capacity, 1024);
}

static void comments_blank_lines_and_spacing(void **state) {
  (void)state;
  hg_daemon_config_t c;
  hg_dcfg_error_t e;
  assert_int_equal(parse(&c,
                         "# a comment\n\n   \t\n"
                         "snapshot.keep=3   # trailing comment\n"
                         "\tdata_dir =  /a#b  \r\n"
                         "log.level = warn",
                         &e),
                   0);
  assert_int_equal(c.snapshot_keep, 3);
  assert_string_equal(c.data_dir, "/a#b"); /* '#' not after a space is data */
  assert_int_equal(c.log_level, HG_LOG_WARN);
}

typedef struct bad_case {
  const char *text;
  int rc;
  unsigned line;
  const char *key;
  const char *reason_has;
} bad_case_t;

static void bad_input_names_line_key_and_reason(void **state) {
  (void)state;
  static const bad_case_t cases[] = {
      {"log.level = info\nno.such.key = 1\n", HG_ENOTFOUND, 2, "no.such.key", "unknown key"},
      {"# c\n\nsnapshot.keep = 0\n", HG_ERANGE, 3, "snapshot.keep", "out of range 1..1000"},
      {"snapshot.keep = many\n", HG_EINVAL, 1, "snapshot.keep", "not a non-negative integer"},
      {"snapshot.interval = -5\n", HG_EINVAL, 1, "snapshot.interval", "-5"},
      {"snapshot.interval = 99999999999999999999999\n", HG_ERANGE, 1, "snapshot.interval",
       "out of range"},
      {"journal.segment_size = 12Q\n", HG_EINVAL, 1, "journal.segment_size", "not a size"},
      {"journal.segment_size = 512K\n", HG_ERANGE, 1, "journal.segment_size", "out of range"},
      {"listen.http = 127.0.0.1:70000\n", HG_ERANGE, 1, "listen.http", "0..65535"},
      {"listen.http = localhost:7780\n", HG_EINVAL, 1, "listen.http", "not an address"},
      {"listen.http = 127.0.0.1\n", HG_EINVAL, 1, "listen.http", "not an address"},
      {"listen.http = [::1:7780\n", HG_EINVAL, 1, "listen.http", "not an address"},
      {"log.level = loud\n", HG_EINVAL, 1, "log.level", "debug, info, warn or error"},
      {"http.keepalive = maybe\n", HG_EINVAL, 1, "http.keepalive", "yes or no"},
      {"durability = fast\n", HG_EINVAL, 1, "durability", "ack_before_durable_unsafe"},
      {"pipeline.mode = fibers\n", HG_EINVAL, 1, "pipeline.mode", "loop or threads"},
      {"wait = spin\n", HG_EINVAL, 1, "wait", "block or spin N"},
      {"wait = spin 0\n", HG_ERANGE, 1, "wait", "spin count"},
      {"wait = busy\n", HG_EINVAL, 1, "wait", "block or spin N"},
      {"threads.realtime_priority = 100\n", HG_ERANGE, 1, "threads.realtime_priority",
       "out of range"},
      {"pipeline.inbound_capacity = 1000\n", HG_EINVAL, 1, "pipeline.inbound_capacity",
       "power of two"},
      {"data_dir =\n", HG_EINVAL, 1, "data_dir", "missing value"},
      {"log.level = info\njust words\n", HG_EPARSE, 2, "", "key = value"},
      {" = 5\n", HG_EPARSE, 1, "", "missing key"},
      {"snapshot.keep = 1\nsnapshot.keep = 2\n", HG_EPARSE, 2, "snapshot.keep", "twice"},
      /* cross-key rules: line 0 */
      {"listen.http = 127.0.0.1:7700\n", HG_EINVAL, 0, "listen.http", "must differ"},
      {"journal.segment_size = 1M\njournal.batch_bytes = 1M\n", HG_EINVAL, 0,
       "journal.segment_size", "batch_bytes"},
      {"gateway.max_unauthenticated = 8\n", HG_EINVAL, 0,
       "gateway.max_unauthenticated_per_address", "must not exceed gateway.max_unauthenticated"},
      {"gateway.login_timeout_ms = 50\n", HG_ERANGE, 1, "gateway.login_timeout_ms",
       "out of range 100..600000"},
      /* HTTPS: off loopback only with a certificate or http.tls = no */
      {"listen.http = 0.0.0.0:7780\n", HG_EINVAL, 0, "listen.http", "not a loopback address"},
      {"listen.http = [::]:7780\n", HG_EINVAL, 0, "listen.http", "http.tls = off"},
      {"listen.http = 10.0.0.1:7780\nhttp.tls_cert = /c.pem\n", HG_EINVAL, 0, "http.tls_cert",
       "go together"},
      {"http.tls = no\nhttp.tls_cert = /c.pem\nhttp.tls_key = /k.pem\n", HG_EINVAL, 0, "http.tls",
       "is off"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    hg_daemon_config_t c;
    hg_dcfg_error_t e;
    int rc = parse(&c, cases[i].text, &e);
    if (rc != cases[i].rc || e.line != cases[i].line || strcmp(e.key, cases[i].key) != 0 ||
        strstr(e.reason, cases[i].reason_has) == NULL)
      fail_msg("case %zu (%s): rc %d line %u key '%s' reason '%s'", i, cases[i].text, rc, e.line,
               e.key, e.reason);
  }
}

/* What the HTTPS rule accepts: loopback without a certificate, any
 * address with one, any address with http.tls = no. */
static void http_tls_rule_accepts(void **state) {
  (void)state;
  static const char *ok[] = {
      "listen.http = 127.255.0.1:7780\n",
      "listen.http = [::1]:7780\n",
      "listen.http = 0.0.0.0:7780\nhttp.tls_cert = /c.pem\nhttp.tls_key = /k.pem\n",
      "listen.http = 0.0.0.0:7780\nhttp.tls = no\n",
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    hg_daemon_config_t c;
    hg_dcfg_error_t e;
    if (parse(&c, ok[i], &e) != 0) fail_msg("%s: key '%s' %s", ok[i], e.key, e.reason);
  }
}

/* cluster.*: the member list parsed with both addresses, and the rules
 * that tie it to cluster.id, pipeline.mode and the Raft port's TLS. */
static void cluster_keys(void **state) {
  (void)state;
  hg_daemon_config_t c;
  hg_dcfg_error_t e;
  const char *ok = "pipeline.mode = loop\ncluster.id = 2\ncluster.election_timeout_ms = 300\n"
                   "cluster.insecure = yes\n"
                   "cluster.members = 1=127.0.0.1:7301/127.0.0.1:7001, "
                   "2=127.0.0.1:7302/[::1]:7002,3=10.0.0.3:7303/10.0.0.3:7700\n";
  assert_int_equal(parse(&c, ok, &e), 0);
  assert_int_equal(c.cluster_id, 2);
  assert_int_equal(c.cluster_election_ms, 300);
  assert_int_equal(c.cluster_snapshot_hold_ms, 60000);
  assert_int_equal(parse(&c, "cluster.snapshot_hold_ms = 0\n", &e), 0);
  assert_int_equal(c.cluster_snapshot_hold_ms, 0);
  assert_int_not_equal(parse(&c, "cluster.snapshot_hold_ms = 3600001\n", &e), 0);
  assert_string_equal(e.key, "cluster.snapshot_hold_ms");
  assert_int_equal(parse(&c, ok, &e), 0);
  hg_dcfg_member_t m[HG_DCFG_MAX_MEMBERS];
  size_t n = 0;
  assert_int_equal(hg_daemon_config_members(&c, m, &n, &e), 0);
  assert_int_equal(n, 3);
  assert_int_equal(m[1].id, 2);
  assert_string_equal(m[1].raft, "127.0.0.1:7302");
  assert_string_equal(m[1].client.host, "::1");
  assert_int_equal(m[1].client.port, 7002);
  assert_string_equal(m[2].raft, "10.0.0.3:7303");
  assert_int_equal(c.cluster_join, 0);
  assert_int_equal(parse(&c, "pipeline.mode = loop\ncluster.id = 4\ncluster.join = yes\n"
                             "cluster.members = 4=127.0.0.1:7304/127.0.0.1:7004\n", &e), 0);
  assert_int_equal(c.cluster_join, 1);
  assert_string_equal(c.cluster_listen, "");
  assert_int_equal(parse(&c, "pipeline.mode = loop\ncluster.id = 1\ncluster.listen = 0.0.0.0:7301\n"
                             "cluster.insecure = yes\n"
                             "cluster.members = 1=10.0.0.1:7301/10.0.0.1:7001\n", &e), 0);
  assert_string_equal(c.cluster_listen, "0.0.0.0:7301");
  static const struct {
    const char *text, *key, *reason_has;
  } bad[] = {
      {"pipeline.mode = threads\ncluster.id = 1\n"
       "cluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n",
       "cluster.id", "pipeline.mode = loop"},
      {"pipeline.mode = loop\ncluster.id = 1\n", "cluster.members", "lists no member"},
      {"pipeline.mode = loop\ncluster.id = 4\n"
       "cluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n", "cluster.members",
       "does not list cluster.id 4"},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.members = 1=127.0.0.1:7301\n",
       "cluster.members", "is not id=raft_ipv4:port/client_ip:port"},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.members = 1=[::1]:7301/[::1]:7001\n",
       "cluster.members", "is not id="},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.members = "
       "1=127.0.0.1:7301/127.0.0.1:7001,1=127.0.0.1:7302/127.0.0.1:7002\n",
       "cluster.members", "listed twice"},
      {"cluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n", "cluster.members",
       "cluster.id is not"},
      /* Plain Raft off loopback needs cluster.insecure. */
      {"pipeline.mode = loop\ncluster.id = 1\n"
       "cluster.members = 1=127.0.0.1:7301/127.0.0.1:7001,2=10.0.0.2:7301/10.0.0.2:7001\n",
       "cluster.members", "member 2's Raft address 10.0.0.2:7301 is not loopback"},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.tls_cert = /n1.pem\n"
       "cluster.tls_ca = /ca.pem\ncluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n",
       "cluster.tls_key", "go together"},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.tls_cert = /n1.pem\n"
       "cluster.tls_key = /n1.key\ncluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n",
       "cluster.tls_ca", "go together"},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.tls_key = /n1.key\n"
       "cluster.tls_ca = /ca.pem\ncluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n",
       "cluster.tls_cert", "go together"},
      {"cluster.tls_ca = /ca.pem\n", "cluster.tls_ca", "cluster.id is not"},
      {"cluster.join = yes\n", "cluster.join", "cluster.id is not"},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.listen = localhost:7301\n"
       "cluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n", "cluster.listen",
       "is not ipv4:port"},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.listen = [::1]:7301\n"
       "cluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n", "cluster.listen",
       "is not ipv4:port"},
      {"cluster.listen = 0.0.0.0:7301\n", "cluster.listen", "cluster.id is not"},
      {"pipeline.mode = loop\ncluster.id = 1\ncluster.listen = 0.0.0.0:7301\n"
       "cluster.members = 1=127.0.0.1:7301/127.0.0.1:7001\n", "cluster.listen",
       "0.0.0.0:7301 is not loopback"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = parse(&c, bad[i].text, &e);
    if (rc == 0 || strcmp(e.key, bad[i].key) != 0 || strstr(e.reason, bad[i].reason_has) == NULL)
      fail_msg("case %zu: rc %d key '%s' reason '%s'", i, rc, e.key, e.reason);
  }
  assert_int_equal(parse(&c, "cluster.id = 17\n", &e), HG_ERANGE);
  /* With the three TLS files, members off loopback need nothing else. */
  const char *tls = "pipeline.mode = loop\ncluster.id = 1\ncluster.tls_cert = /n1.pem\n"
                    "cluster.tls_key = /n1.key\ncluster.tls_ca = /ca.pem\n"
                    "cluster.members = 1=10.0.0.1:7301/10.0.0.1:7700,2=10.0.0.2:7301/10.0.0.2:7700\n";
  if (parse(&c, tls, &e) != 0) fail_msg("key '%s' %s", e.key, e.reason);
  assert_string_equal(c.cluster_tls_ca, "/ca.pem");
  assert_int_equal(c.cluster_insecure, 0);
}

static void nul_byte_and_long_line_are_refused(void **state) {
  (void)state;
  hg_daemon_config_t c;
  hg_dcfg_error_t e;
  hg_daemon_config_defaults(&c);
  const char text[] = "log.level = info\nlog\0.level = debug\n";
  assert_int_equal(hg_daemon_config_parse(&c, text, sizeof text - 1, &e), HG_EPARSE);
  assert_int_equal(e.line, 2);
  char *big = malloc(5000);
  memset(big, 'a', 4999);
  big[4999] = '\0';
  assert_int_equal(hg_daemon_config_parse(&c, big, 4999, &e), HG_EPARSE);
  assert_int_equal(e.line, 1);
  free(big);
}

static void load_missing_file_is_errno(void **state) {
  (void)state;
  hg_daemon_config_t c;
  hg_dcfg_error_t e;
  hg_daemon_config_defaults(&c);
  assert_int_equal(hg_daemon_config_load(&c, "/nonexistent/hourglass.conf", &e), -ENOENT);
  assert_non_null(strstr(e.reason, "cannot open"));
}

typedef struct diff_rec {
  char keys[8][64];
  int reloadable[8];
  int n;
} diff_rec_t;

static void rec(void *ctx, const char *key, int reloadable) {
  diff_rec_t *d = ctx;
  if (d->n < 8) {
    snprintf(d->keys[d->n], 64, "%s", key);
    d->reloadable[d->n] = reloadable;
  }
  d->n++;
}

static void reload_diff_says_what_applies(void **state) {
  (void)state;
  hg_daemon_config_t a, b;
  hg_dcfg_error_t e;
  assert_int_equal(parse(&a, "log.level = info\n", &e), 0);
  assert_int_equal(parse(&b,
                         "log.level = error\ndata_dir = /elsewhere\nthrottle.rate = 7\n"
                         "listen.http = 127.0.0.1:9999\n",
                         &e),
                   0);
  diff_rec_t d = {0};
  hg_daemon_config_diff(&a, &b, rec, &d);
  assert_int_equal(d.n, 4);
  /* table order: listen.http, data_dir, log.level, throttle.rate */
  assert_string_equal(d.keys[0], "listen.http");
  assert_int_equal(d.reloadable[0], 0);
  assert_string_equal(d.keys[1], "data_dir");
  assert_int_equal(d.reloadable[1], 0);
  assert_string_equal(d.keys[2], "log.level");
  assert_int_equal(d.reloadable[2], 1);
  assert_string_equal(d.keys[3], "throttle.rate");
  assert_int_equal(d.reloadable[3], 0);
  d.n = 0;
  hg_daemon_config_diff(&a, &a, rec, &d);
  assert_int_equal(d.n, 0);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = '\0';
  fclose(f);
  return b;
}

static void shipped_file_and_docs_cover_every_key(void **state) {
  (void)state;
  char *conf = slurp(HG_SOURCE_DIR "/ops/hourglass.conf");
  char *doc = slurp(HG_SOURCE_DIR "/ops/README.md");
  for (size_t i = 0; i < hg_daemon_config_key_count(); i++) {
    const char *k = hg_daemon_config_key_name(i);
    char pat[96];
    snprintf(pat, sizeof pat, "\n%s = ", k);
    if (strstr(conf, pat) == NULL) fail_msg("ops/hourglass.conf lacks key %s", k);
    snprintf(pat, sizeof pat, "| `%s` |", k);
    if (strstr(doc, pat) == NULL) fail_msg("ops/README.md does not document key %s", k);
  }
  /* The shipped file states exactly the defaults. */
  hg_daemon_config_t c, def;
  hg_dcfg_error_t e;
  hg_daemon_config_defaults(&def);
  hg_daemon_config_defaults(&c); /* a file applies onto defaults, as the daemon loads it */
  assert_int_equal(hg_daemon_config_load(&c, HG_SOURCE_DIR "/ops/hourglass.conf", &e) == 0 ? 0 : -1,
                   0);
  diff_rec_t d = {0};
  hg_daemon_config_diff(&def, &c, rec, &d);
  if (d.n != 0) fail_msg("ops/hourglass.conf differs from the defaults at %s", d.keys[0]);
  free(conf);
  free(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defaults_are_documented_values),
      cmocka_unit_test(every_key_is_set),
      cmocka_unit_test(tls_rules),
      cmocka_unit_test(no_market_data_key),
      cmocka_unit_test(comments_blank_lines_and_spacing),
      cmocka_unit_test(bad_input_names_line_key_and_reason),
      cmocka_unit_test(http_tls_rule_accepts),
      cmocka_unit_test(cluster_keys),
      cmocka_unit_test(nul_byte_and_long_line_are_refused),
      cmocka_unit_test(load_missing_file_is_errno),
      cmocka_unit_test(reload_diff_says_what_applies),
      cmocka_unit_test(shipped_file_and_docs_cover_every_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
