/*
 * bench_cluster - hourglassd as a three-node Raft group against one
 * hourglassd alone, measured in the same run: real daemon processes on
 * 127.0.0.1 (the configuration tests/daemon/test_cluster.c starts, with the
 * daemon's default election timeout and snapshot interval and the session
 * throttle out of the way), their data
 * directories in a fresh "hgtest-bench_cluster-*" directory under the
 * current directory (a real disk; removed at exit), durable acks.
 *
 *   bench_cluster [--quick] [--daemon PATH] [--seconds S] [--window N]
 *                 [--rounds N] [--rate R] [--set KEY=VALUE]
 *
 * --set passes one configuration option to every group member (as
 * hourglassd -o does), e.g. --set cluster.snapshot_entries=8192 to see what
 * the snapshot interval does to the group's round trip.
 *
 * The daemon is --daemon, else $HG_HOURGLASSD, else bin/hourglassd of the
 * build tree this program sits in (<build>/bench/bench_cluster).
 *
 * One trader session (the C client given every node's address, so it
 * follows the leader) sends IOC limit buys, qty 1, below the reference
 * price into an empty book: each is sequenced, made durable (alone: the
 * journal's fsync; in the group: committed on a majority of the nodes'
 * Raft logs) and answered, and the book never grows. An order is acknowledged
 * by the first ExecutionReport carrying its client order id.
 *
 * RESULT cluster.single_durable_cmds_per_s, cluster.durable_cmds_per_s:
 *   orders acknowledged per second with `window` orders in flight (default
 *   256), for S seconds (default 10, 2 with --quick) after a warm-up, on one
 *   daemon and on the group's leader.
 * RESULT cluster.vs_single_ratio: the second over the first.
 * RESULT cluster.single_rtt_p50_us, _p99_us, cluster.rtt_p50_us, _p99_us:
 *   the round trip at a fixed offered rate (--rate, default 10,000 orders/s,
 *   below what either sustains on a 2-vCPU host), one daemon and the group;
 *   open loop, each order timed from its due time.
 * RESULT cluster.failover_ms_p50, cluster.failover_ms_p99: per round, from
 *   just before SIGKILL of the leader to the first order acknowledged by the
 *   new leader (the client reconnecting through its node list and resending
 *   every 10 ms); the killed node then restarts and rejoins before the next
 *   round. 10 rounds (3 with --quick; --rounds N, at most 64).
 * RESULT cluster.catchup_cmds_per_s: last, on a fresh plain group that
 *   snapshots every 256 entries: a follower killed and its directories
 *   emptied while the leader takes orders for S seconds, then started
 *   again: every command of the run over the seconds from its start until
 *   its last_seq equals the leader's (snapshot install, the rebuild in
 *   place that loads it, and the log after the snapshot).
 * RESULT cluster.tls_durable_cmds_per_s, cluster.tls_vs_plain_ratio,
 *   cluster.tls_rtt_p50_us, cluster.tls_rtt_p99_us: the same window and
 *   fixed-rate runs on a fresh group whose Raft port is TLS 1.3 with
 *   certificates both ways (cluster.tls_*, test certificates from
 *   tests/support/tls_certs.c), started after the plain group stopped; the
 *   ratio is its rate over the plain group's.
 *
 * Every wait is bounded; the daemons are killed and the directory removed
 * on every exit path: exit() runs the cleanup, and SIGINT, SIGTERM and
 * SIGHUP have a handler that does the same. Exit status 1 on any failure.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_util.h"
#include "daemon_util.h"
#include "hourglass/client.h"
#include "tls_certs.h"

#define NODES 3
#define RING 65536u /* in-flight orders tracked, by client order id */

static const char SECRET_HEX[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

static const char *g_bin;
static char g_root[512], g_keys[600], g_members[512], g_nodes[256];
static du_node_t g_n[NODES];
static du_node_t g_single; /* the daemon alone (node 1's ports, stopped before the group starts) */
static hg_client_t *g_tr; /* the trader session, owned here */
static uint64_t g_next_clid = 1;
static uint64_t g_due[RING]; /* due time (ns) of clid % RING; 0: answered */
static bool g_tls;           /* group members start with cluster.tls_* */
/* Group members snapshot every 256 entries (far more often than the
 * daemon's default) so that the catch-up includes a snapshot install in a short run;
 * only the catch-up's own group, as frequent snapshots slow the others. */
static bool g_small_snapshots;
static const char *g_set; /* --set: one more option for the group's members */

static void cleanup(void) {
  hg_client_destroy(g_tr);
  g_tr = NULL;
  du_kill_all(NULL);
  if (g_root[0] != '\0') du_rm_rf(g_root);
  g_root[0] = '\0';
}

/* SIGINT, SIGTERM, SIGHUP: only async-signal-safe calls. Kills the
 * daemons, removes the directory through rm (fork + exec) and ends. */
static void on_signal(int sig) {
  for (int i = 0; i < NODES; i++)
    if (g_n[i].pid > 0) kill(g_n[i].pid, SIGKILL);
  if (g_single.pid > 0) kill(g_single.pid, SIGKILL);
  if (g_root[0] != '\0' && fork() == 0) {
    char *const argv[] = {"rm", "-rf", g_root, NULL};
    execv("/bin/rm", argv);
    _exit(127);
  }
  _exit(128 + sig);
}

static _Noreturn __attribute__((format(printf, 1, 2))) void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "bench_cluster: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1); /* cleanup() runs */
}

static uint64_t now_ns(void) { return (uint64_t)(du_now() * 1e9); }

/* Starts n alone (clustered false) or as a member of the group, and waits
 * until it is ready. */
static void node_start(du_node_t *n, bool clustered) {
  char cert[700], key[700], ca[700];
  snprintf(cert, sizeof cert, "cluster.tls_cert=%s/node%d.pem", g_root, n->id);
  snprintf(key, sizeof key, "cluster.tls_key=%s/node%d.key", g_root, n->id);
  snprintf(ca, sizeof ca, "cluster.tls_ca=%s/ca.pem", g_root);
  const char *extra[6] = {"throttle.rate=100000000"};
  int k = 1;
  if (g_small_snapshots && clustered) extra[k++] = "cluster.snapshot_entries=256";
  else if (g_set != NULL && clustered) extra[k++] = g_set;
  if (g_tls && clustered) {
    extra[k++] = cert;
    extra[k++] = key;
    extra[k++] = ca;
  }
  du_node_spawn(n, g_bin, g_root, clustered ? g_members : NULL, g_keys, extra);
  if (n->pid == 0) die("cannot start %s", g_bin);
  char *log = du_wait_log(n->log, "msg=\"ready\"", 60);
  if (log == NULL) die("node %d not ready after 60 s (log %s)", n->id, n->log);
  free(log);
}

/* A member rebuilds itself in place to load a snapshot installed by the
 * leader or to rebuild from the group: any exit the run did not cause
 * ends it. */
static void supervise(void) {
  if (du_cluster_supervise(g_n, NODES) < 0) die("a node exited unexpectedly (its log above)");
}

/* Waits (up to timeout_s) until node i reports on /health; with leader_id
 * > 0, that it knows that leader; with 0, that it takes orders. */
static bool health_has(int i, int leader_id, double timeout_s) {
  char want[48];
  if (leader_id > 0) snprintf(want, sizeof want, "\"leader\":%d,", leader_id);
  else snprintf(want, sizeof want, "\"taking_orders\":true");
  double end = du_now() + timeout_s;
  for (;;) {
    supervise();
    char *h = g_n[i].pid != 0 ? du_get(g_n[i].http_port, "/health") : NULL;
    bool yes = h != NULL && strstr(h, want) != NULL;
    free(h);
    if (yes) return true;
    if (du_now() >= end) return false;
    du_sleep_ms(20);
  }
}

/* The member taking orders, waiting up to 30 s; -1 if none. */
static int find_leader(void) {
  double end = du_now() + 30;
  while (du_now() < end) {
    for (int i = 0; i < NODES; i++)
      if (g_n[i].pid != 0 && health_has(i, 0, 0)) return i;
    du_sleep_ms(20);
  }
  return -1;
}

static hg_client_t *client(int port, uint64_t key, const char *nodes) {
  uint8_t sec[32];
  hg_client_parse_hex(SECRET_HEX, sec, sizeof sec);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = (uint16_t)port;
  cfg.key_id = key;
  cfg.secret = sec;
  cfg.secret_len = sizeof sec;
  cfg.nodes = nodes;
  cfg.timeout_ms = 1000;
  cfg.tx_capacity = 4u << 20;
  hg_client_t *c = NULL;
  int rc = hg_client_create(&cfg, &c);
  if (rc != 0) die("client: %s", hg_strerror(rc));
  return c;
}

/* Connects c (following the leader), retrying every 10 ms for up to
 * timeout_s. */
static int connect_retry(hg_client_t *c, double timeout_s) {
  double end = du_now() + timeout_s;
  int rc;
  while ((rc = hg_client_connect(c)) != 0 && du_now() < end) {
    supervise();
    du_sleep_ms(10);
  }
  return rc;
}

/* Lists the instrument and funds the trader's account, as the operator. */
static void setup_market(int port, const char *nodes) {
  hg_client_t *op = client(port, 1, nodes);
  if (connect_retry(op, 30) != 0 || ch_cluster_market(op, 1024) != 0)
    die("market setup at port %d failed", port);
  hg_client_destroy(op);
}

static int send_order(hg_client_t *c) {
  uint64_t clid = g_next_clid++;
  hg_client_order_t o = {.instrument_id = 1,
                         .client_order_id = clid,
                         .side = HOURGLASS__V1__SIDE__SIDE_BUY,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC,
                         .has_price = true,
                         .price = 480 + (int64_t)(clid % 20), /* reference 500, empty book */
                         .qty = 1};
  uint64_t seq;
  g_due[clid % RING] = now_ns();
  return hg_client_new_order(c, &o, &seq);
}

/* Receives one message, waiting up to timeout_ms: 1 (and *rtt, the round
 * trip in ns of the order it acknowledges, or 0 if it acknowledges none), 0
 * if nothing arrived, or hg_client_recv's error. */
static int recv_ack(hg_client_t *c, int timeout_ms, int64_t *rtt, uint64_t *rejected) {
  const Hourglass__V1__Envelope *e = NULL;
  *rtt = 0;
  int rc = hg_client_recv(c, timeout_ms, &e);
  if (rc <= 0 || e->body_case != HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT) return rc;
  const Hourglass__V1__ExecutionReport *er = e->execution_report;
  uint64_t *due = &g_due[er->client_order_id % RING];
  if (er->client_order_id >= g_next_clid || *due == 0) return rc;
  if (er->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED) (*rejected)++;
  uint64_t now = now_ns();
  *rtt = now > *due ? (int64_t)(now - *due) : 1;
  *due = 0;
  return rc;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double pct(int64_t *v, size_t n, double p) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_i64);
  size_t k = (size_t)(p * (double)(n - 1) + 0.5);
  return (double)v[k];
}

/* Closed loop: keeps `window` orders in flight for `seconds`, then waits
 * (up to 5 s) for the rest. Returns orders acknowledged per second. */
static double run_window(hg_client_t *c, unsigned window, double seconds) {
  uint64_t acked = 0, sent = 0, rejected = 0;
  double end = du_now() + seconds;
  while (du_now() < end) {
    while (sent - acked < window && sent - acked < RING) {
      if (send_order(c) != 0) die("send failed");
      sent++;
    }
    hg_client_flush(c, 1000);
    int64_t rtt;
    if (recv_ack(c, 1000, &rtt, &rejected) < 0) die("connection lost");
    if (rtt > 0) acked++;
  }
  uint64_t in_time = acked;
  double drain_end = du_now() + 5;
  while (acked < sent && du_now() < drain_end) {
    int64_t rtt;
    if (recv_ack(c, 200, &rtt, &rejected) < 0) break;
    if (rtt > 0) acked++;
  }
  if (acked < sent) die("%llu orders unanswered", (unsigned long long)(sent - acked));
  if (rejected > 0) die("%llu orders rejected", (unsigned long long)rejected);
  return (double)in_time / seconds;
}

/* Open loop at `rate` orders/s for `seconds`; each round trip from the
 * order's due time, so lateness in sending counts against it. Fills p50
 * and p99 in us. Between sends it sleeps in ppoll() on the socket. */
/* Raft snapshots node i has logged taking since its start; 0 for i < 0. A
 * snapshot stalls the group's commits while libraft stores it: how many
 * fell in a fixed-rate run says what its p99 holds. */
static int snapshots_taken(int i) {
  return i >= 0 ? du_log_count(g_n[i].log, "snapshot at index") : 0;
}

static void run_rate(hg_client_t *c, double rate, double seconds, double *p50, double *p99) {
  size_t total = (size_t)(rate * seconds);
  int64_t *lat = calloc(total > 0 ? total : 1, sizeof *lat);
  if (lat == NULL) die("out of memory");
  size_t sent = 0, got = 0;
  uint64_t rejected = 0, t0 = now_ns(), give_up = t0 + (uint64_t)((seconds + 5) * 1e9);
  while (got < total) {
    uint64_t now = now_ns(), due = t0 + (uint64_t)((double)sent * 1e9 / rate);
    for (; sent < total && due <= now; due = t0 + (uint64_t)((double)sent * 1e9 / rate)) {
      if (send_order(c) != 0) die("send failed");
      g_due[(g_next_clid - 1) % RING] = due;
      sent++;
    }
    hg_client_flush(c, 1000);
    if (now > give_up) die("%zu orders unanswered", total - got);
    uint64_t wait = sent < total && due > now ? due - now : 1000000;
    struct pollfd pfd = {.fd = hg_client_fd(c), .events = POLLIN};
    struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000u),
                          .tv_nsec = (long)(wait % 1000000000u)};
    if (ppoll(&pfd, 1, &ts, NULL) <= 0) continue;
    int rc;
    int64_t rtt;
    while ((rc = recv_ack(c, 0, &rtt, &rejected)) > 0) /* every message already here */
      if (rtt > 0) lat[got++] = rtt;
    if (rc < 0) die("connection lost");
  }
  if (rejected > 0) die("%llu orders rejected", (unsigned long long)rejected);
  *p50 = pct(lat, got, 0.50) / 1e3;
  *p99 = pct(lat, got, 0.99) / 1e3;
  free(lat);
}

/* One failover: kills the leader, returns ms to the first order the new
 * leader acknowledged; restarts the killed node and waits until it follows. */
static double failover_round(int *leader) {
  int dead = *leader;
  uint64_t rejected = 0;
  double t0 = du_now();
  kill(g_n[dead].pid, SIGKILL);
  du_stop(g_n[dead].pid, 0, 10);
  g_n[dead].pid = 0;
  double end = t0 + 30, done = 0;
  while (done == 0) {
    if (du_now() > end) die("no order acknowledged within 30 s of killing node %d", dead + 1);
    if (connect_retry(g_tr, end - du_now()) != 0) continue;
    /* Resend every 10 ms until one is acknowledged on this connection. */
    double next_send = 0;
    for (;;) {
      if (du_now() >= next_send) {
        if (send_order(g_tr) != 0 || hg_client_flush(g_tr, 1000) < 0) break;
        next_send = du_now() + 0.010;
      }
      int64_t rtt;
      if (recv_ack(g_tr, 2, &rtt, &rejected) < 0 || du_now() > end) break;
      if (rtt > 0 && rejected == 0) {
        done = du_now();
        break;
      }
      rejected = 0;
    }
  }
  /* Answers to the resent orders still on the way are not waited for. */
  memset(g_due, 0, sizeof g_due);
  *leader = find_leader();
  if (*leader < 0 || *leader == dead) die("no new leader after killing node %d", dead + 1);
  node_start(&g_n[dead], true);
  if (!health_has(dead, g_n[*leader].id, 60))
    die("restarted node %d does not follow the leader", dead + 1);
  return (done - t0) * 1e3;
}

/* Catch-up: a follower is killed and its directories emptied (a replaced
 * machine), the leader takes orders for `seconds` meanwhile, then the
 * follower starts again and rebuilds from the group: the leader's
 * snapshot, installed (the node rebuilds itself once to load it), and the log
 * after it. Returns the commands the node has then applied (every command
 * of the run) over the seconds from its start until its last_seq equals
 * the leader's; *cmds gets that count, *installed whether the leader sent
 * its snapshot (it does when the log it kept does not reach back to the
 * start: cluster.snapshot_entries). */
static double catchup(int leader, unsigned window, double seconds, uint64_t *cmds,
                      bool *installed) {
  int f = (leader + 1) % NODES;
  kill(g_n[f].pid, SIGKILL);
  du_stop(g_n[f].pid, 0, 10);
  g_n[f].pid = 0;
  du_rm_rf(g_n[f].dir);
  run_window(g_tr, window, seconds);
  uint64_t target = du_metric(g_n[leader].http_port, "hourglass_last_seq");
  if (target == 0 || target == UINT64_MAX) die("cannot read the leader's last_seq");
  printf("bench_cluster: catch-up: the leader is at seq %llu, Raft index %llu\n",
         (unsigned long long)target,
         (unsigned long long)du_metric(g_n[leader].http_port, "hourglass_cluster_last_index"));
  double t0 = du_now(), end = t0 + 120;
  int rebuilds = du_node_rebuilds(&g_n[f]);
  node_start(&g_n[f], true);
  for (;;) {
    supervise();
    uint64_t at = g_n[f].pid != 0 ? du_metric(g_n[f].http_port, "hourglass_last_seq") : 0;
    if (at >= target && at != UINT64_MAX) break; /* UINT64_MAX: no answer */
    if (du_now() > end) die("node %d reached seq %llu of %llu in 120 s", f + 1,
                            (unsigned long long)at, (unsigned long long)target);
    du_sleep_ms(5);
  }
  *cmds = target;
  *installed = du_node_rebuilds(&g_n[f]) > rebuilds; /* rebuilt to load a snapshot */
  return (double)target / (du_now() - t0);
}

/* Sets up the nodes' ports and directories, the keys file and the lists. */
static void plan(void) {
  if (du_tmpdir(g_root, sizeof g_root, "bench_cluster") == NULL)
    die("cannot make a directory: %s", strerror(errno));
  snprintf(g_keys, sizeof g_keys, "%s/keys", g_root);
  if (du_cluster_keys(g_keys, SECRET_HEX) != 0)
    die("cannot write %s: %s", g_keys, strerror(errno));
  if (du_cluster_plan(g_n, NODES, g_root, g_members, sizeof g_members, g_nodes, sizeof g_nodes) != 0)
    die("the directory's path is too long");
}

/* Stops the group's members (and the trader's session) and gives them
 * fresh directories root/<tag><id> for the next group_up(). */
static void group_down(const char *tag) {
  hg_client_destroy(g_tr);
  g_tr = NULL;
  for (int i = 0; i < NODES; i++) {
    supervise();
    if (g_n[i].pid != 0 && du_stop(g_n[i].pid, SIGTERM, 30) != 0)
      die("node %d did not stop cleanly", i + 1);
    g_n[i].pid = 0;
    snprintf(g_n[i].dir, sizeof g_n[i].dir, "%s/%s%d", g_root, tag, i + 1);
  }
}

/* Starts the group (over TLS when g_tls), waits until every member knows
 * the leader, sets up the market and logs the trader g_tr in. Returns the
 * leader's index. */
static int group_up(void) {
  for (int i = 0; i < NODES; i++) node_start(&g_n[i], true);
  int leader = find_leader();
  if (leader < 0) die("no leader elected");
  for (int i = 0; i < NODES; i++)
    if (!health_has(i, g_n[leader].id, 30)) die("node %d does not know the leader", i + 1);
  setup_market(g_n[leader].client_port, g_nodes);
  g_tr = client(g_n[leader].client_port, 2, g_nodes);
  if (connect_retry(g_tr, 10) != 0) die("trader login failed");
  return leader;
}

int main(int argc, char **argv) {
  bool quick = false;
  const char *given = NULL;
  double seconds = -1, rate = 10000;
  unsigned window = 256;
  int rounds = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) quick = true;
    else if (strcmp(a, "--daemon") == 0 && v != NULL) given = argv[++i];
    else if (strcmp(a, "--seconds") == 0 && v != NULL) seconds = atof(argv[++i]);
    else if (strcmp(a, "--window") == 0 && v != NULL) window = (unsigned)atoi(argv[++i]);
    else if (strcmp(a, "--rounds") == 0 && v != NULL) rounds = atoi(argv[++i]);
    else if (strcmp(a, "--rate") == 0 && v != NULL) rate = atof(argv[++i]);
    else if (strcmp(a, "--set") == 0 && v != NULL && strchr(v, '=') != NULL) g_set = argv[++i];
    else {
      fprintf(stderr, "usage: bench_cluster [--quick] [--daemon PATH] [--seconds S] [--window N] "
                      "[--rounds N] [--rate R] [--set KEY=VALUE]\n");
      return 2;
    }
  }
  if (seconds <= 0) seconds = quick ? 2 : 10;
  if (rounds <= 0) rounds = quick ? 3 : 10;
  if (window == 0 || window > RING / 2 || rate <= 0) die("bad --window or --rate");
  g_bin = du_daemon_path(given);
  if (g_bin == NULL) die("cannot find hourglassd: use --daemon PATH");
  if (access(g_bin, X_OK) != 0) die("no hourglassd at %s: use --daemon PATH", g_bin);
  setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows through bench/run's tee */
  signal(SIGPIPE, SIG_IGN);
  atexit(cleanup);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGHUP, on_signal);
  plan();
  double warm = quick ? 0.5 : 2;

  /* One daemon alone: node 1's ports, its own directory. */
  g_single = g_n[0];
  du_node_t *single = &g_single;
  snprintf(single->dir, sizeof single->dir, "%s/single", g_root);
  single->id = 0;
  node_start(single, false);
  setup_market(single->client_port, NULL);
  g_tr = client(single->client_port, 2, NULL);
  if (connect_retry(g_tr, 10) != 0) die("trader login failed");
  run_window(g_tr, window, warm);
  double single_rate = run_window(g_tr, window, seconds);
  double s50, s99;
  run_rate(g_tr, rate, seconds, &s50, &s99);
  hg_client_destroy(g_tr);
  g_tr = NULL;
  int st = du_stop(single->pid, SIGTERM, 30);
  single->pid = 0;
  if (st != 0) die("the single daemon did not stop cleanly");
  printf("bench_cluster: single daemon, window %u, %.1f s: %.0f orders/s; at %.0f orders/s: "
         "round trip p50 %.0f us, p99 %.0f us\n", window, seconds, single_rate, rate, s50, s99);

  /* The group. */
  int leader = group_up();
  run_window(g_tr, window, warm);
  double cluster_rate = run_window(g_tr, window, seconds);
  printf("bench_cluster: 3-node group, leader node %d, window %u, %.1f s: %.0f orders/s\n",
         leader + 1, window, seconds, cluster_rate);
  double p50, p99;
  int snaps = snapshots_taken(leader);
  run_rate(g_tr, rate, seconds, &p50, &p99);
  snaps = snapshots_taken(leader) - snaps;
  printf("bench_cluster: 3-node group at %.0f orders/s, %.1f s: round trip p50 %.0f us, "
         "p99 %.0f us; %d Raft snapshots taken by the leader in that time\n", rate, seconds,
         p50, p99, snaps);

  int64_t fo[64];
  if (rounds > 64) rounds = 64;
  for (int r = 0; r < rounds; r++) {
    int was = leader;
    double ms = failover_round(&leader);
    fo[r] = (int64_t)(ms * 1000);
    printf("bench_cluster: round %d: node %d killed, node %d acknowledged an order after %.0f ms\n",
           r + 1, was + 1, leader + 1, ms);
  }

  /* The same group over TLS: stopped, fresh directories, started again. */
  group_down("tls_n");
  if (ts_tls_make(g_root) != 0) die("cannot make the test CA");
  for (int i = 0; i < NODES; i++) {
    char name[16];
    snprintf(name, sizeof name, "node%d", i + 1);
    if (ts_tls_make_node(g_root, "ca", (unsigned)i + 1, name) != 0)
      die("cannot make node %d's certificate", i + 1);
  }
  g_tls = true;
  group_up();
  run_window(g_tr, window, warm);
  double tls_rate = run_window(g_tr, window, seconds);
  double t50, t99;
  int tls_leader = find_leader();
  snaps = snapshots_taken(tls_leader);
  run_rate(g_tr, rate, seconds, &t50, &t99);
  snaps = snapshots_taken(tls_leader) - snaps;
  printf("bench_cluster: 3-node group over TLS, window %u, %.1f s: %.0f orders/s; at %.0f "
         "orders/s: round trip p50 %.0f us, p99 %.0f us; %d Raft snapshots taken by the leader"
         " in that time\n", window, seconds, tls_rate, rate, t50, t99, snaps);

  /* Catch-up on a fresh plain group with frequent snapshots. */
  group_down("cu_n");
  g_tls = false;
  g_small_snapshots = true;
  int cu_leader = group_up();
  run_window(g_tr, window, warm);
  uint64_t caught = 0;
  bool installed = false;
  double catchup_rate = catchup(cu_leader, window, seconds, &caught, &installed);
  printf("bench_cluster: a follower with empty directories rebuilt %llu commands from the group"
         " (%s) at %.0f commands/s\n", (unsigned long long)caught,
         installed ? "snapshot installed, then the log" : "the log alone", catchup_rate);

  printf("RESULT cluster.single_durable_cmds_per_s %.0f cmd/s\n", single_rate);
  printf("RESULT cluster.durable_cmds_per_s %.0f cmd/s\n", cluster_rate);
  printf("RESULT cluster.vs_single_ratio %.2f x\n",
         single_rate > 0 ? cluster_rate / single_rate : 0);
  printf("RESULT cluster.single_rtt_p50_us %.0f us\n", s50);
  printf("RESULT cluster.single_rtt_p99_us %.0f us\n", s99);
  printf("RESULT cluster.rtt_p50_us %.0f us\n", p50);
  printf("RESULT cluster.rtt_p99_us %.0f us\n", p99);
  printf("RESULT cluster.failover_ms_p50 %.0f ms\n", pct(fo, (size_t)rounds, 0.50) / 1e3);
  printf("RESULT cluster.failover_ms_p99 %.0f ms\n", pct(fo, (size_t)rounds, 0.99) / 1e3);
  printf("RESULT cluster.catchup_cmds_per_s %.0f cmd/s\n", catchup_rate);
  printf("RESULT cluster.tls_durable_cmds_per_s %.0f cmd/s\n", tls_rate);
  printf("RESULT cluster.tls_vs_plain_ratio %.2f x\n", cluster_rate > 0 ? tls_rate / cluster_rate : 0);
  printf("RESULT cluster.tls_rtt_p50_us %.0f us\n", t50);
  printf("RESULT cluster.tls_rtt_p99_us %.0f us\n", t99);
  fflush(stdout);
  return 0; /* cleanup() stops the daemons and removes the directory */
}
