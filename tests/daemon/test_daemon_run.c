/* hourglassd as a process: start on a temporary data directory, /health and
 * /metrics and the market endpoints over loopback (instruments by id and by
 * symbol, the event stream), bad HTTP input, SIGHUP
 * reload, SIGTERM clean exit with a final snapshot, and a restart in the
 * other pipeline mode that recovers the same state hash; TLS on both ports
 * of a whole daemon (HTTPS and the event stream verified against the CA,
 * order entry's handshake, failures on /metrics). Usage: test_daemon_run
 * <hourglassd> (the default mode, loop; threads with
 * HG_TEST_PIPE_MODE=threads). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "daemon_util.h"
#include "hourglass/client.h"
#include "tls_certs.h"

static const char *g_bin; /* hourglassd, from argv[1] */

typedef struct run {
  char dir[512], data[600], log[600], conf[600], opt_data[700];
  pid_t pid;
  int port;
} run_t;

/* A thread of process pid has a name containing name. */
static int has_thread(pid_t pid, const char *name) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "grep -qs '%s' /proc/%d/task/*/comm", name, (int)pid);
  return du_system(cmd) == 0;
}

/* Starts the daemon with conf file r->conf and extra options (mode: the
 * pipeline.mode, NULL: the default); waits for "ready" and reads the HTTP
 * port from the log. */
static void start(run_t *r, const char *rate, const char *mode) {
  char opt_rate[64], opt_mode[64];
  snprintf(opt_rate, sizeof opt_rate, "synthetic.orders_per_sec=%s", rate);
  snprintf(opt_mode, sizeof opt_mode, "pipeline.mode=%s", mode != NULL ? mode : "loop");
  char *argv[] = {(char *)g_bin, "-c", r->conf, "-o", r->opt_data, "-o", "listen.http=127.0.0.1:0",
                  "-o", "listen.order_entry=127.0.0.1:0",
                  "-o", opt_rate, "-o", "snapshot.interval=500", DU_SMALL_OPTS,
                  mode != NULL ? "-o" : NULL, opt_mode, NULL};
  remove(r->log);
  r->pid = du_spawn(argv, r->log);
  /* Generous: sanitizer builds on a loaded machine start slowly. */
  char *log = du_wait_log(r->log, "msg=\"ready\"", 120);
  if (log == NULL) fail_msg("daemon not ready after 120 s");
  r->port = du_listen_port(log, "http");
  assert_true(r->port > 0);
  free(log);
}

/* Opens /api/v1/stream and reads until `until` appears (and the event it is
 * in has ended) or 10 s pass; the text read so far, malloc'd. */
static char *read_stream(int port, const char *until) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t cap = 1 << 20, n = 0;
  char *buf = calloc(1, cap);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char req[] = "GET /api/v1/stream?book=SYN.T.2099-12 HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(send(fd, req, sizeof req - 1, 0), (ssize_t)(sizeof req - 1));
  double end = du_now() + 10;
  while (du_now() < end && n + 1 < cap) {
    ssize_t k = recv(fd, buf + n, cap - n - 1, 0);
    if (k == 0) break;
    if (k > 0) n += (size_t)k;
    buf[n] = '\0';
    const char *hit = strstr(buf, until);
    if (hit != NULL && strstr(hit, "\n\n") != NULL) break;
  }
  close(fd);
  return buf;
}

static void daemon_serves_stops_and_recovers(void **state) {
  (void)state;
  run_t r = {0};
  assert_non_null(du_tmpdir(r.dir, sizeof r.dir, "daemon"));
  snprintf(r.data, sizeof r.data, "%s/var", r.dir);
  snprintf(r.log, sizeof r.log, "%s/d.log", r.dir);
  snprintf(r.conf, sizeof r.conf, "%s/h.conf", r.dir);
  snprintf(r.opt_data, sizeof r.opt_data, "data_dir=%s", r.data);
  assert_int_equal(du_write_file(r.conf, "# test\nlog.level = info\n"), 0);
  /* The default mode, loop (threads in the *_threads registration): in
   * loop mode the gateway's loop runs the sequencer and the journal. */
  const char *env = getenv("HG_TEST_PIPE_MODE");
  int threads = env != NULL && strcmp(env, "threads") == 0;
  start(&r, "3000", NULL);
  assert_true(has_thread(r.pid, "hg-gateway"));
  assert_int_equal(has_thread(r.pid, "hg-engine"), threads);
  assert_int_equal(has_thread(r.pid, "hg-journal"), threads);

  /* /health */
  char *h = du_get(r.port, "/health");
  assert_int_equal(du_status(h), 200);
  assert_non_null(strstr(h, "\"status\":\"ready\""));
  free(h);

  /* Commands flow: wait for some trades. */
  double end = du_now() + 60;
  uint64_t v;
  while (((v = du_metric(r.port, "hourglass_snapshots_total")) == UINT64_MAX || v < 2) &&
         du_now() < end)
    du_sleep_ms(50);
  assert_true(v >= 2 && v != UINT64_MAX); /* snapshot.interval=500: seq >= 1000 */
  v = du_metric(r.port, "hourglass_last_seq");
  assert_true(v >= 1000 && v != UINT64_MAX);

  char *m = du_get(r.port, "/metrics");
  assert_int_equal(du_status(m), 200);
  assert_non_null(strstr(m, "Content-Type: text/plain; version=0.0.4"));
  assert_non_null(strstr(m, "# TYPE hourglass_durable_lag gauge\nhourglass_durable_lag "));
  assert_non_null(strstr(m, "# TYPE hourglass_release_latency_seconds histogram"));
  assert_non_null(strstr(m, "hourglass_release_latency_seconds_bucket{le=\"+Inf\"} "));
  /* The listing event names the contract, so the live listing shows its symbol. */
  assert_non_null(
      strstr(m, "hourglass_instrument_trades_total{instrument=\"SYN.T.2099-12\",id=\"1\"} "));
  assert_non_null(strstr(m, "hourglass_snapshots_total "));
  /* The clearing guarantee's figures, without accounts. */
  assert_non_null(strstr(m, "# TYPE hourglass_insurance_fund_micro_usd gauge\n"
                            "hourglass_insurance_fund_micro_usd "));
  assert_non_null(strstr(m, "\nhourglass_bankruptcies_total "));
  assert_non_null(strstr(m, "\nhourglass_socialized_loss_micro_usd_total "));
  assert_null(strstr(m, "account")); /* aggregates only */
  free(m);
  assert_int_equal(du_metric(r.port, "hourglass_journal_failed"), 0);

  /* Market endpoints. */
  char *b = du_get(r.port, "/api/v1/book?instrument=1");
  assert_int_equal(du_status(b), 200);
  /* Either side may be empty for a moment (the generator mass-cancels). */
  assert_non_null(strstr(b, "\"bids\":["));
  assert_non_null(strstr(b, "\"asks\":["));
  assert_null(strstr(b, "\"seq\":0,"));
  free(b);
  b = du_get(r.port, "/api/v1/trades?instrument=1");
  assert_int_equal(du_status(b), 200);
  assert_non_null(strstr(b, "\"aggressor\":"));
  free(b);
  b = du_get(r.port, "/api/v1/tob?instrument=1");
  assert_int_equal(du_status(b), 200);
  free(b);
  b = du_get(r.port, "/api/v1/book?instrument=999");
  assert_int_equal(du_status(b), 404);
  free(b);
  b = du_get(r.port, "/api/v1/book?instrument=abc");
  assert_int_equal(du_status(b), 400);
  free(b);
  b = du_get(r.port, "/nope");
  assert_int_equal(du_status(b), 404);
  free(b);
  /* Contract symbols wherever an id is accepted (the unit test,
   * test_market_api, covers the refusals in detail). */
  static const struct {
    const char *path;
    int status;
    const char *has;
  } sym[] = {
      {"/api/v1/book?instrument=SYN.T.2099-12", 200,
       "{\"instrument\":1,\"symbol\":\"SYN.T.2099-12\""},
      {"/api/v1/trades?instrument=SYN.T.2099-12&x=1", 200, "{\"instrument\":1,\"trades\":["},
      {"/api/v1/tob?instrument=SYN.T.2099-12", 200, "{\"instrument\":1,"},
      {"/api/v1/tob?instrument=B200.A.2027-03", 404, "unknown instrument"}, /* not listed */
      {"/api/v1/tob?instrument=SYN.T.2099-13", 400, "expected"},            /* month 13 */
      {"/api/v1/tob?instrument=1x", 400, "expected"},
  };
  for (size_t i = 0; i < sizeof sym / sizeof sym[0]; i++) {
    b = du_get(r.port, sym[i].path);
    if (du_status(b) != sym[i].status || strstr(b, sym[i].has) == NULL)
      fail_msg("%s: %s", sym[i].path, b);
    free(b);
  }
  /* The event stream: a snapshot with the book asked for. */
  b = read_stream(r.port, "\"book\":{");
  assert_true(strncmp(b, "HTTP/1.0 200 ", 13) == 0); /* no chunked framing */
  assert_non_null(strstr(b, "Content-Type: text/event-stream"));
  assert_non_null(strstr(b, "\r\n\r\nretry: 1000\n\n"));
  assert_non_null(strstr(b, "\nevent: snapshot\ndata: {\"instruments\":[{\"id\":1,"));
  assert_non_null(strstr(b, "\"symbol\":\"SYN.T.2099-12\""));
  assert_non_null(strstr(b, "\"book\":{\"instrument\":1,\"bids\":["));
  free(b);

  /* Bad HTTP input: specific answers, and the server lives on. */
  const char post[] = "POST /health HTTP/1.1\r\nHost: x\r\n\r\n";
  b = du_http_raw(r.port, post, sizeof post - 1, 0);
  assert_int_equal(du_status(b), 405);
  assert_non_null(strstr(b, "Allow: GET"));
  free(b);
  const char junk[] = "\x01\x02garbage\r\n\r\n";
  b = du_http_raw(r.port, junk, sizeof junk - 1, 0);
  assert_true(du_status(b) == 400 || b[0] == '\0'); /* libmicrohttpd may just close */
  free(b);
  const char body[] = "GET /health HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  b = du_http_raw(r.port, body, sizeof body - 1, 0);
  assert_int_equal(du_status(b), 400);
  free(b);
  const char ver[] = "GET /health HTTP/2.0\r\n\r\n";
  b = du_http_raw(r.port, ver, sizeof ver - 1, 0);
  assert_int_equal(du_status(b), 505);
  free(b);
  char *big = malloc(20000);
  memcpy(big, "GET /", 5);
  memset(big + 5, 'a', 20000 - 5);
  b = du_http_raw(r.port, big, 20000, 0);
  assert_true(du_status(b) == 414 || du_status(b) == 431);
  free(b);
  free(big);
  /* Two pipelined requests on one kept-alive connection: two answers. */
  const char two[] =
      "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  b = du_http_raw(r.port, two, sizeof two - 1, 2);
  const char *second = strstr(b + 1, "HTTP/1.1 200");
  assert_int_equal(du_status(b), 200);
  assert_non_null(second);
  assert_non_null(strstr(second, "hourglass_ready 1"));
  free(b);
  h = du_get(r.port, "/health");
  assert_int_equal(du_status(h), 200);
  free(h);
  /* The POST and the body reach the daemon's handler; libmicrohttpd
   * refuses the others before a request exists. */
  assert_true(du_metric(r.port, "hourglass_http_bad_requests_total") >= 2);
  assert_true(du_metric(r.port, "hourglass_http_stream_events_total") >= 1);

  /* Random bytes, some shaped like a request: every answer is a status
   * line or nothing, and the server lives on. */
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < 300; i++) {
    char req[700];
    x = x * 6364136223846793005u + 1442695040888963407u;
    size_t n = 8 + (size_t)(x >> 33) % 600;
    for (size_t k = 0; k < n; k++) {
      x = x * 6364136223846793005u + 1442695040888963407u;
      req[k] = (char)(x >> 56);
      if (i % 4 == 1 && (x >> 40) % 8 == 0) req[k] = (x >> 48) % 2 ? '\n' : ' ';
    }
    if (i % 3 == 0) memcpy(req, "GET /", 5);
    if (i % 2 == 0) memcpy(req + n - 4, "\r\n\r\n", 4);
    char *resp = du_http_raw(r.port, req, n, -1);
    if (resp[0] != '\0' && strncmp(resp, "HTTP/1.1 ", 9) != 0)
      fail_msg("request %d: reply is not HTTP: %.40s", i, resp);
    free(resp);
  }
  h = du_get(r.port, "/health");
  assert_int_equal(du_status(h), 200);
  free(h);

  /* SIGHUP: one reloadable change, one that needs a restart. */
  assert_int_equal(du_write_file(r.conf, "log.level = warn\nthrottle.rate = 5\n"), 0);
  kill(r.pid, SIGHUP);
  char *log = du_wait_log(r.log, "msg=\"reloaded\"", 60);
  assert_non_null(log);
  assert_non_null(strstr(log, "msg=\"applied changed key\" key=log.level"));
  assert_non_null(strstr(log, "msg=\"changed key not applied: restart required\" key=throttle.rate"));
  free(log);
  /* A bad file is refused whole. */
  assert_int_equal(du_write_file(r.conf, "log.level = shouty\n"), 0);
  kill(r.pid, SIGHUP);
  log = du_wait_log(r.log, "reload refused", 60);
  assert_non_null(log);
  assert_non_null(strstr(log, "line=1 key=log.level"));
  free(log);
  assert_int_equal(du_metric(r.port, "hourglass_config_reload_failures_total"), 1);
  assert_int_equal(du_write_file(r.conf, "log.level = info\n"), 0);
  kill(r.pid, SIGHUP);
  end = du_now() + 60;
  while (du_metric(r.port, "hourglass_config_reloads_total") != 2 && du_now() < end) du_sleep_ms(20);
  assert_int_equal(du_metric(r.port, "hourglass_config_reloads_total"), 2);

  /* SIGTERM: exit 0, final snapshot, hash logged. */
  assert_int_equal(du_stop(r.pid, SIGTERM, 120), 0);
  log = du_read(r.log);
  char hash1[80], seq1[32];
  assert_int_equal(du_field(log, "msg=\"stopped\"", "state_hash", hash1, sizeof hash1), 0);
  assert_int_equal(du_field(log, "msg=\"stopped\"", "last_seq", seq1, sizeof seq1), 0);
  char dur1[32];
  assert_int_equal(du_field(log, "msg=\"stopped\"", "durable_seq", dur1, sizeof dur1), 0);
  assert_string_equal(seq1, dur1); /* drained and durable */
  free(log);
  assert_true(strtoull(seq1, NULL, 10) >= 1000);

  /* Restart without load in the other pipeline mode: recovers from the
   * final snapshot alone (the data directory is the same in both). */
  start(&r, "0", threads ? "loop" : "threads");
  assert_int_equal(has_thread(r.pid, "hg-engine"), !threads);
  log = du_read(r.log);
  char want[128];
  snprintf(want, sizeof want, "recovered to seq %s (snapshot %s + 0 journal records", seq1, seq1);
  assert_non_null(strstr(log, want));
  char hash2[80];
  assert_int_equal(du_field(log, "msg=\"recovered\"", "state_hash", hash2, sizeof hash2), 0);
  assert_string_equal(hash1, hash2);
  free(log);
  /* The seeded view knows the symbol now. */
  b = du_get(r.port, "/api/v1/instruments");
  assert_non_null(strstr(b, "\"symbol\":\"SYN.T.2099-12\""));
  free(b);
  assert_int_equal(du_stop(r.pid, SIGINT, 120), 0);

  /* The offline tool agrees with the daemon. */
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s -o data_dir=%s --state-hash 2>/dev/null | grep -q 'state_hash=%s'",
           g_bin, r.data, hash1);
  assert_int_equal(du_system(cmd), 0);
  du_rm_rf(r.dir);
}

static void bad_configuration_stops_start_up(void **state) {
  (void)state;
  char dir[512], log[600], conf[600];
  assert_non_null(du_tmpdir(dir, sizeof dir, "badconf"));
  snprintf(log, sizeof log, "%s/d.log", dir);
  snprintf(conf, sizeof conf, "%s/h.conf", dir);
  FILE *f = fopen(conf, "w");
  fputs("# fine\nlog.level = info\nsnapshot.keep = lots\n", f);
  fclose(f);
  char *argv1[] = {(char *)g_bin, "-c", conf, NULL};
  assert_int_equal(du_stop(du_spawn(argv1, log), 0, 60), 2);
  char *b = du_read(log);
  assert_non_null(strstr(b, "line=3 key=snapshot.keep"));
  assert_non_null(strstr(b, "not a non-negative integer"));
  free(b);
  remove(log);
  char *argv2[] = {(char *)g_bin, "-o", "no.such = 1", NULL};
  assert_int_equal(du_stop(du_spawn(argv2, log), 0, 60), 2);
  b = du_read(log);
  assert_non_null(strstr(b, "key=no.such reason=\"unknown key\""));
  free(b);
  du_rm_rf(dir);
}

/* The demo's banner names the addresses the listeners really have: with
 * ephemeral ports, the ports the log says they listen on, and the exports
 * hgctl reads; and a key for each role. */
static void demo_prints_real_addresses(void **state) {
  (void)state;
  char dir[512], log[600], data[600];
  assert_non_null(du_tmpdir(dir, sizeof dir, "demoaddr"));
  snprintf(log, sizeof log, "%s/d.log", dir);
  snprintf(data, sizeof data, "data_dir=%s/var", dir);
  char *argv[] = {(char *)g_bin, "--demo", "-o", data, "-o", "listen.http=127.0.0.1:0",
                  "-o", "listen.order_entry=127.0.0.1:0",
                  "-o", "pipeline.inbound_capacity=4096", "-o", "pipeline.outbound_capacity=16384",
                  "-o", "pipeline.staging_capacity=16384", "-o", "journal.segment_size=4M", "-o",
                  "journal.batch_bytes=256K", "-o", "limits.max_instruments=16", "-o",
                  "limits.max_accounts=64", NULL};
  pid_t pid = du_spawn(argv, log);
  char *b = du_wait_log(log, "Then: hgctl instruments", 120);
  if (b == NULL) fail_msg("no demo banner after 120 s");
  int gw_port = du_listen_port(b, "gateway");
  int http_port = du_listen_port(b, "http");
  assert_true(gw_port > 0 && http_port > 0);
  char want[600];
  snprintf(want, sizeof want, "  export HG_HOST=127.0.0.1 HG_PORT=%d\n", gw_port);
  if (strstr(b, want) == NULL) fprintf(stderr, "want:\n%s\nlog:\n%s\n", want, b);
  assert_non_null(strstr(b, want));
  snprintf(want, sizeof want, "Market page: http://127.0.0.1:%d/\n", http_port);
  assert_non_null(strstr(b, want));
  /* hgctl beside the daemon: the line that puts it on PATH. */
  char bindir[512];
  snprintf(bindir, sizeof bindir, "%s", g_bin);
  *strrchr(bindir, '/') = '\0';
  snprintf(want, sizeof want, "  export PATH=%s:$PATH\n", bindir);
  assert_non_null(strstr(b, want));
  /* Without a keys file the keys are new; the banner follows "ready". */
  assert_non_null(strstr(b, "one key per terminal (new at every start)"));
  assert_true(strstr(b, "Demo market:") > strstr(b, "msg=\"ready\""));
  /* A key for every role: the trader, the firm's risk viewer, a market
   * maker of the same firm (hgctl quote), the operator. */
  assert_non_null(strstr(b, "  trader, account 3001       export HG_KEY_ID=3001 HG_SECRET="));
  assert_non_null(strstr(b, "  risk viewer, firm 300      export HG_KEY_ID=3002 HG_SECRET="));
  assert_non_null(strstr(b, "  market maker, account 3003 export HG_KEY_ID=3003 HG_SECRET="));
  assert_non_null(strstr(b, "  operator                   export HG_KEY_ID=1 HG_SECRET="));
  free(b);
  assert_int_equal(du_stop(pid, SIGTERM, 60), 0);
  du_rm_rf(dir);
}

/* The demo with a keys file that defines key 1 (as ops/run --cluster gives
 * every node one operator key): the file's key stays, the banner says so,
 * and it logs in with the file's secret; the demo's other keys are new. */
static void demo_keeps_a_key_of_the_keys_file(void **state) {
  (void)state;
  static const char SECRET[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  char dir[512], log[600], data[600], keys[600], okeys[700], line[200];
  assert_non_null(du_tmpdir(dir, sizeof dir, "demokeys"));
  snprintf(log, sizeof log, "%s/d.log", dir);
  snprintf(data, sizeof data, "data_dir=%s/var", dir);
  snprintf(keys, sizeof keys, "%s/keys", dir);
  snprintf(okeys, sizeof okeys, "gateway.keys_file=%s", keys);
  snprintf(line, sizeof line, "1 operator 0 0 %s\n", SECRET);
  assert_int_equal(du_write_file(keys, line), 0);
  assert_int_equal(chmod(keys, 0600), 0);
  char *argv[] = {(char *)g_bin, "--demo", "-o", data, "-o", okeys, "-o", "tls=off", "-o",
                  "listen.http=127.0.0.1:0", "-o", "listen.order_entry=127.0.0.1:0", "-o",
                  "pipeline.inbound_capacity=4096", "-o", "pipeline.outbound_capacity=16384", "-o",
                  "pipeline.staging_capacity=16384", "-o", "journal.segment_size=4M", "-o",
                  "journal.batch_bytes=256K", "-o", "limits.max_instruments=16", "-o",
                  "limits.max_accounts=64", NULL};
  pid_t pid = du_spawn(argv, log);
  char *b = du_wait_log(log, "Then: hgctl instruments", 120);
  if (b == NULL) fail_msg("no demo banner after 120 s");
  /* The file's key reads its secret from the file: a line that pastes as
   * it is and keeps working across restarts; the secret is never shown. */
  char want[800];
  snprintf(want, sizeof want,
           "  operator                   export HG_KEY_ID=1 HG_SECRET=$(awk '$1==1{print $5}' "
           "%s)\n", keys);
  assert_non_null(strstr(b, want));
  assert_null(strstr(b, SECRET));
  assert_non_null(strstr(b, "  trader, account 3001       export HG_KEY_ID=3001 HG_SECRET="));
  int gw_port = du_listen_port(b, "gateway");
  free(b);
  uint8_t sec[32];
  assert_int_equal(hg_client_parse_hex(SECRET, sec, sizeof sec), 32);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = (uint16_t)gw_port;
  cfg.key_id = 1;
  cfg.secret = sec;
  cfg.secret_len = sizeof sec;
  hg_client_t *c = NULL;
  assert_int_equal(hg_client_create(&cfg, &c), 0);
  assert_int_equal(hg_client_connect(c), 0);
  hg_client_destroy(c);
  assert_int_equal(du_stop(pid, SIGTERM, 60), 0);
  du_rm_rf(dir);
}

/* Runs cmd through the shell; its whole output (malloc'd, NUL-ended). */
static char *output_of(const char *cmd) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 1 << 16, n = 0;
  char *out = calloc(1, cap);
  size_t k;
  while (n + 1 < cap && (k = fread(out + n, 1, cap - n - 1, p)) > 0) n += k;
  out[n] = '\0';
  pclose(p);
  return out;
}

/* A daemon with TLS on order entry and on HTTP, as a deployment off
 * loopback runs it (here on 127.0.0.1 with a test CA): /health, /metrics,
 * the API and the event stream over HTTPS verified against the CA; plain
 * HTTP on that port gets no answer; order entry completes a TLS 1.3
 * handshake verified against the CA; a garbage ClientHello is closed and
 * counted in hourglass_gateway_tls_failures_total. */
static void daemon_over_tls(void **state) {
  (void)state;
  if (access("/usr/bin/openssl", X_OK) != 0 || access("/usr/bin/curl", X_OK) != 0) skip();
  char dir[512], log[600], data[600], cert[640], key[640], ca[600], o_cert[700], o_key[700],
      h_cert[700], h_key[700], cmd[2048];
  assert_non_null(du_tmpdir(dir, sizeof dir, "daemontls"));
  assert_int_equal(ts_tls_make(dir), 0);
  snprintf(log, sizeof log, "%s/d.log", dir);
  snprintf(data, sizeof data, "data_dir=%s/var", dir);
  snprintf(cert, sizeof cert, "%s/server.pem", dir);
  snprintf(key, sizeof key, "%s/server.key", dir);
  snprintf(ca, sizeof ca, "%s/ca.pem", dir);
  snprintf(o_cert, sizeof o_cert, "tls.cert=%s", cert);
  snprintf(o_key, sizeof o_key, "tls.key=%s", key);
  snprintf(h_cert, sizeof h_cert, "http.tls_cert=%s", cert);
  snprintf(h_key, sizeof h_key, "http.tls_key=%s", key);
  char *argv[] = {(char *)g_bin, "-o", data, "-o", "listen.http=127.0.0.1:0", "-o",
                  "listen.order_entry=127.0.0.1:0", "-o",
                  o_cert, "-o", o_key, "-o", h_cert, "-o", h_key, DU_SMALL_OPTS, NULL};
  pid_t pid = du_spawn(argv, log);
  char *b = du_wait_log(log, "msg=\"ready\"", 120);
  if (b == NULL) fail_msg("daemon not ready after 120 s");
  int http = du_listen_port(b, "http"), gw = du_listen_port(b, "gateway");
  assert_true(http > 0 && gw > 0);
  free(b);

  snprintf(cmd, sizeof cmd,
           "curl -s --max-time 10 --cacert %s -w ' code=%%{http_code}' https://127.0.0.1:%d/health",
           ca, http);
  char *out = output_of(cmd);
  assert_non_null(strstr(out, "code=200"));
  free(out);
  snprintf(cmd, sizeof cmd, "curl -s --max-time 10 --cacert %s https://localhost:%d/api/v1/instruments",
           ca, http);
  out = output_of(cmd);
  assert_non_null(strstr(out, "\"instruments\""));
  free(out);
  /* The pushed stream opens over HTTPS (no market yet: headers only). */
  snprintf(cmd, sizeof cmd,
           "curl -sN -D - --max-time 2 --cacert %s https://127.0.0.1:%d/api/v1/stream", ca, http);
  out = output_of(cmd);
  if (strstr(out, " 200") == NULL || strcasestr(out, "content-type: text/event-stream") == NULL)
    fail_msg("stream over HTTPS:\n%s", out);
  free(out);
  snprintf(cmd, sizeof cmd,
           "curl -s --max-time 5 -o /dev/null -w '%%{http_code}' http://127.0.0.1:%d/health", http);
  out = output_of(cmd);
  assert_string_equal(out, "000");
  free(out);

  snprintf(cmd, sizeof cmd,
           "openssl s_client -connect 127.0.0.1:%d -CAfile %s -verify_return_error "
           "-verify_ip 127.0.0.1 </dev/null 2>&1",
           gw, ca);
  out = output_of(cmd);
  if (strstr(out, "Verify return code: 0 (ok)") == NULL || strstr(out, "TLSv1.3") == NULL)
    fail_msg("order entry handshake:\n%s", out);
  free(out);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)gw)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  static const char junk[] = "\x16\x03\x01\x00\x05not a ClientHello";
  assert_int_equal(send(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char sink[256];
  while (recv(fd, sink, sizeof sink, 0) > 0) /* an alert, then the close */
    ;
  close(fd);
  uint64_t failures = 0;
  for (int i = 0; i < 100 && failures == 0; i++) {
    snprintf(cmd, sizeof cmd,
             "curl -s --max-time 10 --cacert %s https://127.0.0.1:%d/metrics | "
             "sed -n 's/^hourglass_gateway_tls_failures_total //p'",
             ca, http);
    out = output_of(cmd);
    failures = strtoull(out, NULL, 10);
    free(out);
    if (failures == 0) du_sleep_ms(50);
  }
  assert_true(failures >= 1);
  assert_int_equal(du_stop(pid, SIGTERM, 60), 0);
  du_rm_rf(dir);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <hourglassd>\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(daemon_serves_stops_and_recovers, du_kill_all),
      cmocka_unit_test_teardown(bad_configuration_stops_start_up, du_kill_all),
      cmocka_unit_test_teardown(demo_prints_real_addresses, du_kill_all),
      cmocka_unit_test_teardown(demo_keeps_a_key_of_the_keys_file, du_kill_all),
      cmocka_unit_test_teardown(daemon_over_tls, du_kill_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
