/*
 * TLS 1.3 on the gateway's listener, over loopback with a real pipeline and
 * the C client library: login and an order over TLS; a client that does
 * not trust the server's CA refuses it; a server requiring client
 * certificates refuses a client without one and admits one with one; a
 * garbage ClientHello and a stalled handshake are closed (the stalled one
 * at the login timeout) while a TLS session beside them keeps trading, and
 * both count against the limits before login; a reconnect resumes its
 * session with a ticket; fuzzed input at each layer of a TLS connection
 * (mutated ClientHellos, garbage records after the handshake, mutated frame
 * streams inside sessions with and without a login) never stops the server
 * or the session trading beside it, and leaves no connection behind.
 * Certificates are made per run (tls_certs.h). The libFuzzer target
 * (fuzz_gateway) drives the same frame path without sockets.
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

#include <openssl/ssl.h>

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

/* ------------------------------------------------------- fuzzed streams */

/* A fixed-seed generator: the same run every time (xorshift64). */
static uint64_t fz_state = 0x9e3779b97f4a7c15ull;
static uint32_t fz(uint32_t n) {
  fz_state ^= fz_state << 13;
  fz_state ^= fz_state >> 7;
  fz_state ^= fz_state << 17;
  return (uint32_t)(fz_state % n);
}

/* Mutates b[0..*n) in place (cap bytes of room): flips, overwrites,
 * inserts, truncates or duplicates, one to four times. */
static void mutate(uint8_t *b, size_t *n, size_t cap) {
  for (uint32_t k = 1 + fz(4); k-- > 0 && *n > 0;) {
    size_t at = fz((uint32_t)*n);
    switch (fz(5)) {
    case 0: b[at] ^= (uint8_t)(1u << fz(8)); break;
    case 1: b[at] = (uint8_t)fz(256); break;
    case 2:
      if (*n < cap) {
        memmove(b + at + 1, b + at, *n - at);
        b[at] = (uint8_t)fz(256);
        (*n)++;
      }
      break;
    case 3: *n = at + 1; break;
    default: {
      size_t len = 1 + fz((uint32_t)(*n - at));
      if (*n + len <= cap) {
        memmove(b + at + len, b + at, *n - at);
        (*n) += len;
      }
    }
    }
  }
}

/* The first flight of a TLS 1.3 client (its ClientHello), from OpenSSL
 * over memory BIOs; its length. */
static size_t client_hello(uint8_t *out, size_t cap) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  assert_non_null(ctx);
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL *ssl = SSL_new(ctx);
  BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rb, wb);
  SSL_set_connect_state(ssl);
  assert_int_equal(SSL_do_handshake(ssl), -1); /* wants the server's answer */
  int n = BIO_read(wb, out, (int)cap);
  assert_true(n > 0);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return (size_t)n;
}

/* Reads the seed frames of fuzz_gateway (each file: a selector byte, then
 * frames) into seeds; their count. */
static int load_seeds(uint8_t seeds[][512], size_t *lens, int max) {
  static const char *names[] = {"before_login.bin", "orders.bin", "report.bin"};
  int n = 0;
  for (size_t i = 0; i < sizeof names / sizeof *names && n < max; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", HG_FUZZ_SEEDS, names[i]);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t buf[513];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(got > 1 && got <= 512);
    memcpy(seeds[n], buf + 1, got - 1);
    lens[n++] = got - 1;
  }
  return n;
}

/* Reads whatever the server says to fd for up to ms, stopping at its close;
 * true if it closed. */
static bool drain_for(int fd, int ms) {
  char b[4096];
  for (int waited = 0; waited < ms; waited += 5) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 5) == 1) {
      ssize_t n = recv(fd, b, sizeof b, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
  }
  return false;
}

/* The trader's session answers a new order with a report that is not a
 * reject (fuzzed orders of the other account may trade with it): 0, or -1. */
static int still_trading(hg_client_t *c, uint64_t clordid) {
  hg_client_order_t o = {.instrument_id = 1,
                         .client_order_id = clordid,
                         .side = HOURGLASS__V1__SIDE__SIDE_SELL,
                         .type = HOURGLASS__V1__ORD_TYPE__ORD_TYPE_LIMIT,
                         .tif = HOURGLASS__V1__TIME_IN_FORCE__TIF_IOC,
                         .has_price = true,
                         .price = 600,
                         .qty = 1};
  uint64_t seq = 0;
  if (hg_client_new_order(c, &o, &seq) != 0) return -1;
  for (;;) {
    const Hourglass__V1__Envelope *e = NULL;
    if (hg_client_recv(c, 5000, &e) != 1) return -1;
    if (e->body_case == HOURGLASS__V1__ENVELOPE__BODY_EXECUTION_REPORT &&
        e->execution_report->ref_seq == seq)
      return e->execution_report->exec_type == HOURGLASS__V1__EXEC_TYPE__EXEC_REJECTED ? -1 : 0;
  }
}

/* Every layer of a TLS connection fed fuzzed input, from one fixed seed,
 * while a TLS session trades beside it: the server answers or closes each
 * connection, counts the broken handshakes and records as TLS failures,
 * keeps the trader's session working, and ends with no connection left
 * awaiting login. */
static void test_fuzzed_streams_over_tls(void **state) {
  (void)state;
  enum { HELLOS = 150, RECORDS = 60, STREAMS = 200 };
  ts_server_t s;
  start(&s, tls_on);
  market(&s);
  hg_client_t *a = tls_client(&s, TA, path_ca, NULL, NULL, NULL);
  assert_int_equal(hg_client_connect(a), 0);
  uint64_t clordid = 1;

  /* 1. Mutated ClientHellos on raw TCP. */
  uint8_t hello[4096], b[8192];
  size_t hello_len = client_hello(hello, sizeof hello);
  uint64_t fail0 = stats(&s).tls_failures;
  for (int i = 0; i < HELLOS; i++) {
    size_t n = hello_len;
    memcpy(b, hello, n);
    mutate(b, &n, sizeof b);
    int fd = raw_from("127.0.0.1", s.port);
    (void)send(fd, b, n, MSG_NOSIGNAL);
    drain_for(fd, 20); /* an alert and a close, a ServerHello, or silence */
    close(fd);
    hg_client_tick(a); /* the trader keeps its session alive meanwhile */
    if (i % 25 == 24) {
      wait_unauth(&s, 0);
      assert_int_equal(still_trading(a, clordid++), 0);
    }
  }
  assert_true(stats(&s).tls_failures > fail0);

  /* 2. Garbage records after a complete handshake: the record layer
   * refuses them (a bad record MAC or type) and closes. */
  assert_int_equal(gt_use_tls(path_ca), 0);
  uint64_t fail1 = stats(&s).tls_failures;
  for (int i = 0; i < RECORDS; i++) {
    gt_client_t g;
    assert_int_equal(gt_connect(&g, s.port), 0);
    size_t n = 5 + 1 + fz(300);
    b[0] = (uint8_t)(fz(4) == 0 ? fz(256) : 0x17); /* mostly application data */
    b[1] = 0x03;
    b[2] = 0x03;
    b[3] = (uint8_t)((n - 5) >> 8);
    b[4] = (uint8_t)(n - 5);
    for (size_t k = 5; k < n; k++) b[k] = (uint8_t)fz(256);
    (void)send(g.fd, b, n, MSG_NOSIGNAL);
    assert_true(closed_within(g.fd, 3000));
    gt_close(&g);
    hg_client_tick(a);
  }
  assert_true(stats(&s).tls_failures >= fail1 + RECORDS);

  /* 3. Mutated frame streams inside TLS sessions, half of them after a
   * login (key TB): the protocol layer answers, rejects or terminates;
   * none of it is a TLS failure. */
  uint8_t seeds[3][512];
  size_t seed_len[3];
  int n_seeds = load_seeds(seeds, seed_len, 3);
  uint64_t fail2 = stats(&s).tls_failures, logins0 = stats(&s).logins;
  for (int i = 0; i < STREAMS; i++) {
    gt_client_t g;
    int with_login = (i & 1) != 0;
    if (with_login) {
      if (gt_login(&g, s.port, TB, 0, 0) == 0) continue; /* the last one still closing */
    } else {
      assert_int_equal(gt_connect(&g, s.port), 0);
    }
    int k = (int)fz((uint32_t)n_seeds);
    size_t n = seed_len[k];
    memcpy(b, seeds[k], n);
    mutate(b, &n, sizeof b);
    (void)gt_send_raw(&g, b, n); /* the server may have closed already */
    for (env_t *e = gt_recv(&g, 20); e != NULL; e = gt_recv(&g, 20))
      ;
    gt_close(&g);
    hg_client_tick(a);
    if (i % 40 == 39) {
      wait_unauth(&s, 0);
      assert_int_equal(still_trading(a, clordid++), 0);
    }
  }
  assert_int_equal(stats(&s).tls_failures, fail2);
  assert_true(stats(&s).logins - logins0 >= STREAMS / 4); /* the ACTIVE state was reached */

  wait_unauth(&s, 0);
  assert_int_equal(still_trading(a, clordid++), 0);
  hg_client_destroy(a);
  gt_use_tls(NULL);
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
      cmocka_unit_test(test_fuzzed_streams_over_tls),
      cmocka_unit_test(test_bad_server_config),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
