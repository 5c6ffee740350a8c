/*
 * TLS 1.3 on the gateway's listener, over loopback with a real pipeline and
 * the C client library: login and an order over TLS; a client that does
 * not trust the server's CA refuses it; a server requiring client
 * certificates refuses a client without one and admits one with one; a
 * garbage ClientHello and a stalled handshake are closed (the stalled one
 * at the login timeout) while a TLS session beside them keeps trading, and
 * both count against the limits before login; a reconnect resumes its
 * session with a ticket. Certificates are made per run (tls_certs.h).
 * The fuzz target (fuzz_gateway) drives the plain listener only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client_util.h"
#include "gw_client.h"
#include "tls_certs.h"

enum { OP = 1, TA = 10, TB = 11 };
enum { ACC_A = 101, ACC_B = 102 };

static char dir[256];
static char path_cert[320], path_key[320], path_ca[320], path_other_ca[320], path_ccert[320],
    path_ckey[320];

static void tls_on(hg_gateway_config_t *cfg) {
  cfg->tls_cert = path_cert;
  cfg->tls_key = path_key;
  cfg->max_unauthenticated = 8;
  cfg->max_unauthenticated_per_address = 3;
  cfg->login_timeout_ms = 400;
}

static void tls_mutual(hg_gateway_config_t *cfg) {
  tls_on(cfg);
  cfg->tls_client_ca = path_ca;
}

static void setup_keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(s, TB, HG_ROLE_TRADER, ACC_B, 2), 0);
}

/* A TLS client for key on s, trusting ca (client certificate if given;
 * checking name, else the host). */
static hg_client_t *tls_client(const ts_server_t *s, uint64_t key, const char *ca,
                               const char *cert, const char *ckey, const char *name) {
  uint8_t sec[32];
  ts_key_secret(key, sec);
  hg_client_config_t cfg;
  hg_client_config_init(&cfg);
  cfg.port = s->port;
  cfg.key_id = key;
  cfg.secret = sec;
  cfg.secret_len = 32;
  cfg.timeout_ms = 3000;
  cfg.tls = true;
  cfg.tls_ca_file = ca;
  cfg.tls_cert = cert;
  cfg.tls_key = ckey;
  cfg.tls_server_name = name;
  hg_client_t *c = NULL;
  assert_int_equal(hg_client_create(&cfg, &c), 0);
  return c;
}

static void start(ts_server_t *s, void (*tweak)(hg_gateway_config_t *)) {
  assert_int_equal(ts_server_start(s, 1, tweak, setup_keys), 0);
}

/* Lists the contract and adds the two accounts, over TLS. */
static void market(ts_server_t *s) {
  const uint32_t acc[] = {ACC_A, ACC_B};
  const uint32_t firm[] = {1, 2};
  ch_use_tls(path_ca);
  assert_int_equal(ch_setup_market(s, OP, 1, acc, firm, 2), 0);
  ch_use_tls(NULL);
}

static hg_gateway_stats_t stats(ts_server_t *s) {
  hg_gateway_stats_t st;
  hg_gateway_stats(s->gw, &st);
  return st;
}

/* Waits (up to 3 s) until the gateway counts n connections awaiting login. */
static void wait_unauth(ts_server_t *s, uint32_t n) {
  for (int i = 0; i < 300 && stats(s).unauthenticated != n; i++) usleep(10000);
  assert_int_equal(stats(s).unauthenticated, n);
}

/* A raw TCP connection from loopback address src. */
static int raw_from(const char *src, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in me = {.sin_family = AF_INET};
  assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
  assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof me), 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  return fd;
}

/* True if the server closes fd within ms (reads EOF or a reset; whatever
 * arrives before, an alert say, is skipped). */
static bool closed_within(int fd, int ms) {
  char b[512];
  for (int waited = 0; waited < ms; waited += 10) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10) == 1) {
      ssize_t n = recv(fd, b, sizeof b, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
  }
  return false;
}

/* ----------------------------------------------------------------- tests */

static void test_login_and_order_over_tls(void **state) {
  (void)state;
  ts_server_t s;
  start(&s, tls_on);
  market(&s);
  hg_client_t *a = tls_client(&s, TA, path_ca, NULL, NULL, NULL);
  hg_client_t *b = tls_client(&s, TB, path_ca, NULL, NULL, NULL);
  assert_int_equal(hg_client_connect(a), 0);
  assert_int_equal(hg_client_connect(b), 0);
  assert_int_equal(ch_order(a, HOURGLASS__V1__SIDE__SIDE_SELL, 500, 3, 1), 0);
  assert_int_equal(ch_order(b, HOURGLASS__V1__SIDE__SIDE_BUY, 400, 2, 1), 0);
  /* A plain client speaking frames to the TLS port gets nowhere. */
  gt_client_t g;
  assert_int_equal(gt_connect(&g, s.port), 0);
  uint8_t sec[32];
  ts_key_secret(TA, sec);
  gt_send_login(&g, TA, sec, 0, 0, 0, 0);
  assert_true(gt_wait_closed(&g, 3000));
  gt_close(&g);
  /* The reconnect offers the ticket of the first connection. */
  hg_client_stats_t cs;
  hg_client_stats(a, &cs);
  assert_int_equal(cs.tls_handshakes, 1);
  assert_int_equal(cs.tls_resumed, 0);
  assert_int_equal(hg_client_logout(a, 2000), 0);
  assert_int_equal(hg_client_connect(a), 0);
  hg_client_stats(a, &cs);
  assert_int_equal(cs.tls_handshakes, 2);
  assert_int_equal(cs.tls_resumed, 1);
  assert_int_equal(ch_order(a, HOURGLASS__V1__SIDE__SIDE_SELL, 510, 1, 2), 0);
  hg_client_destroy(a);
  hg_client_destroy(b);
  /* A session the server ends gets its Terminate through TLS before the
   * close (the close_notify follows the last frame). */
  assert_int_equal(gt_use_tls(path_ca), 0);
  assert_true(gt_login(&g, s.port, TB, 0, 0) > 0);
  assert_int_equal(gt_send_raw(&g, "\0", 1), 0);
  env_t *t = gt_expect(&g, BODY(TERMINATE), 3000);
  assert_non_null(t);
  assert_int_equal(t->terminate->code, TERMC(FRAME_ZERO_LENGTH));
  assert_true(gt_wait_closed(&g, 3000));
  gt_close(&g);
  gt_use_tls(NULL);
  ts_server_stop(&s);
}

static void test_untrusted_server_refused(void **state) {
  (void)state;
  ts_server_t s;
  start(&s, tls_on);
  hg_client_t *c = tls_client(&s, TA, path_other_ca, NULL, NULL, NULL);
  assert_int_equal(hg_client_connect(c), HG_ETLS);
  hg_client_destroy(c);
  /* The name must match too: the certificate is for 127.0.0.1 and localhost. */
  c = tls_client(&s, TA, path_ca, NULL, NULL, "exchange.example");
  assert_int_equal(hg_client_connect(c), HG_ETLS);
  hg_client_destroy(c);
  assert_int_equal(stats(&s).logins, 0);
  ts_server_stop(&s);
}

static void test_mutual_tls(void **state) {
  (void)state;
  ts_server_t s;
  start(&s, tls_mutual);
  hg_client_t *c = tls_client(&s, OP, path_ca, NULL, NULL, NULL);
  assert_int_not_equal(hg_client_connect(c), 0);
  hg_client_destroy(c);
  assert_int_equal(stats(&s).logins, 0);
  assert_true(stats(&s).tls_failures >= 1);
  c = tls_client(&s, OP, path_ca, path_ccert, path_ckey, NULL);
  assert_int_equal(hg_client_connect(c), 0);
  assert_int_equal(ch_list_contract(c), 0);
  hg_client_destroy(c);
  ts_server_stop(&s);
}

/* Garbage instead of a ClientHello, and handshakes that never start, from
 * 127.0.0.2, while a TLS client from 127.0.0.1 trades on. */
static void test_bad_and_stalled_handshakes(void **state) {
  (void)state;
  ts_server_t s;
  start(&s, tls_on);
  market(&s);
  hg_client_t *a = tls_client(&s, TA, path_ca, NULL, NULL, NULL);
  assert_int_equal(hg_client_connect(a), 0);

  int g = raw_from("127.0.0.2", s.port);
  static const char junk[] = "\x16\x03\x01\x00\x05hello, this is not a ClientHello";
  assert_int_equal(send(g, junk, sizeof junk, 0), (ssize_t)sizeof junk);
  assert_true(closed_within(g, 2000));
  close(g);
  assert_true(stats(&s).tls_failures >= 1);
  assert_int_equal(ch_order(a, HOURGLASS__V1__SIDE__SIDE_SELL, 500, 1, 1), 0);

  /* Three silent connections fill the address's limit; a fourth is refused
   * (closed bare: nothing can be said before a handshake). */
  uint64_t refused0 = stats(&s).refused;
  int st[3];
  for (int i = 0; i < 3; i++) st[i] = raw_from("127.0.0.2", s.port);
  wait_unauth(&s, 3);
  int over = raw_from("127.0.0.2", s.port);
  assert_true(closed_within(over, 2000));
  close(over);
  assert_int_equal(stats(&s).refused, refused0 + 1);
  assert_int_equal(ch_order(a, HOURGLASS__V1__SIDE__SIDE_SELL, 501, 1, 2), 0);
  /* The login timeout (400 ms) closes the stalled handshakes. */
  for (int i = 0; i < 3; i++) {
    assert_true(closed_within(st[i], 3000));
    close(st[i]);
  }
  wait_unauth(&s, 0);
  assert_int_equal(ch_order(a, HOURGLASS__V1__SIDE__SIDE_SELL, 502, 1, 3), 0);
  hg_client_destroy(a);
  ts_server_stop(&s);
}

static void test_bad_server_config(void **state) {
  (void)state;
  char kd[256];
  assert_non_null(util_tmpdir(kd, "gwtls"));
  hg_gateway_config_t gc;
  hg_gateway_config_init(&gc);
  gc.key_dir = kd;
  gc.port = 0;
  gc.log = NULL;
  gc.tls_cert = path_cert;
  gc.tls_key = path_ckey; /* not the certificate's key */
  hg_gateway_t *gw = NULL;
  assert_int_equal(hg_gateway_create(&gc, &gw), HG_EINVAL);
  gc.tls_key = NULL;
  assert_int_equal(hg_gateway_create(&gc, &gw), HG_EINVAL);
  assert_null(gw);
  util_rm_rf(kd);
}

static int setup(void **state) {
  (void)state;
  if (util_tmpdir(dir, "tlscerts") == NULL || ts_tls_make(dir) != 0) return -1;
  snprintf(path_cert, sizeof path_cert, "%s/server.pem", dir);
  snprintf(path_key, sizeof path_key, "%s/server.key", dir);
  snprintf(path_ca, sizeof path_ca, "%s/ca.pem", dir);
  snprintf(path_other_ca, sizeof path_other_ca, "%s/other_ca.pem", dir);
  snprintf(path_ccert, sizeof path_ccert, "%s/client.pem", dir);
  snprintf(path_ckey, sizeof path_ckey, "%s/client.key", dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  util_rm_rf(dir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_login_and_order_over_tls),
      cmocka_unit_test(test_untrusted_server_refused),
      cmocka_unit_test(test_mutual_tls),
      cmocka_unit_test(test_bad_and_stalled_handshakes),
      cmocka_unit_test(test_bad_server_config),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
