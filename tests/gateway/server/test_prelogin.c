/*
 * Admission before login, over loopback TCP with a real pipeline: one
 * source address holding idle connections is refused beyond its own limit
 * (TERM_ADDRESS_LIMIT) while a client from another address logs in and
 * trades; the global limit answers TERM_SERVER_BUSY, also to a burst of
 * refusals larger than the gateway's refusal handles; the login timeout is
 * configurable and frees the address's count. The whole of 127.0.0.0/8 is
 * loopback on Linux, so client sockets bound to 127.0.0.2.. are distinct
 * source addresses reaching the gateway on 127.0.0.1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "gw_client.h"

enum { OP = 1, TA = 10, TB = 11 };
enum { ACC_A = 101, ACC_B = 102 };

static void quiet_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  (void)level;
  (void)msg;
}

static void setup_keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_add_key(s, TB, HG_ROLE_TRADER, ACC_B, 2), 0);
}

static void start_market(ts_server_t *s, void (*tweak)(hg_gateway_config_t *)) {
  assert_int_equal(ts_server_start(s, 1, tweak, setup_keys), 0);
  const uint32_t acc[] = {ACC_A, ACC_B};
  const uint32_t firm[] = {1, 2};
  assert_int_equal(gt_setup_market(s, OP, 1, acc, firm, 2), 0);
}

/* gt_connect from the loopback address src (bound before connect). */
static void connect_from(gt_client_t *c, const char *src, uint16_t port) {
  memset(c, 0, sizeof *c);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(c->fd >= 0);
  struct sockaddr_in me = {.sin_family = AF_INET};
  assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
  assert_int_equal(bind(c->fd, (struct sockaddr *)&me, sizeof me), 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
  c->in_cap = 1u << 20;
  c->in = malloc(c->in_cap);
  size_t acap = HG_WIRE_ARENA_SIZE(HG_WIRE_DEFAULT_MAX_FRAME);
  c->arena_buf = malloc(acap);
  assert_non_null(c->in);
  assert_non_null(c->arena_buf);
  hg_wire_arena_init(&c->arena, c->arena_buf, acap);
}

/* The server's next frame is Terminate(code), then it closes. */
static void expect_refused(gt_client_t *c, uint32_t code) {
  env_t *e = gt_expect(c, BODY(TERMINATE), 3000);
  assert_non_null(e);
  assert_int_equal(e->terminate->code, code);
  assert_non_null(e->terminate->text);
  assert_true(gt_wait_closed(c, 3000));
}

/* Still open, nothing received: an accepted connection awaiting login. */
static void expect_waiting(gt_client_t *c) {
  assert_null(gt_recv(c, 0));
  assert_false(c->eof);
}

/* Waits (up to 3 s) until the gateway counts n connections awaiting login. */
static void wait_unauth(ts_server_t *s, uint32_t n) {
  hg_gateway_stats_t st;
  for (int i = 0; i < 300; i++) {
    hg_gateway_stats(s->gw, &st);
    if (st.unauthenticated == n) return;
    usleep(10000);
  }
  fail_msg("unauthenticated: %u, wanted %u", st.unauthenticated, n);
}

static uint64_t refused(ts_server_t *s) {
  hg_gateway_stats_t st;
  hg_gateway_stats(s->gw, &st);
  return st.refused;
}

static env_t *expect_er(gt_client_t *c, uint32_t type) {
  env_t *e = gt_expect(c, BODY(EXECUTION_REPORT), 3000);
  assert_non_null(e);
  assert_int_equal(e->execution_report->exec_type, type);
  return e;
}

/* ------------------------------------------------- one address floods */

#define GLOBAL 16
#define PER_ADDR 4

static void limits(hg_gateway_config_t *cfg) {
  cfg->max_unauthenticated = GLOBAL;
  cfg->max_unauthenticated_per_address = PER_ADDR;
  cfg->login_timeout_ms = 30000; /* the flood stays for the whole test */
}

/* 127.0.0.2 opens as many idle connections as the global limit: the first
 * PER_ADDR wait for a login, the rest are refused with TERM_ADDRESS_LIMIT.
 * Meanwhile two clients from 127.0.0.1 log in and trade. */
static void test_one_address_cannot_lock_out_others(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, limits);
  gt_client_t flood[GLOBAL];
  for (int i = 0; i < PER_ADDR; i++) connect_from(&flood[i], "127.0.0.2", s.port);
  wait_unauth(&s, PER_ADDR);
  for (int i = PER_ADDR; i < GLOBAL; i++) {
    connect_from(&flood[i], "127.0.0.2", s.port);
    expect_refused(&flood[i], TERMC(ADDRESS_LIMIT));
  }
  assert_int_equal(refused(&s), GLOBAL - PER_ADDR);
  for (int i = 0; i < PER_ADDR; i++) expect_waiting(&flood[i]);

  /* Another address logs in and trades while the flood is held. */
  gt_client_t a, b;
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  assert_true(gt_login(&b, s.port, TB, 0, 0) > 0);
  wait_unauth(&s, PER_ADDR); /* logged in: no longer counted */
  assert_int_equal(gt_new_order(&a, 1, 1, 0, 500, 10, 0), 0); /* buy 10 @ 500 GTC */
  env_t *e = expect_er(&a, EXEC(NEW));
  assert_int_equal(e->execution_report->ref_seq, a.seq);
  assert_int_equal(e->execution_report->leaves, 10);
  assert_int_equal(gt_new_order(&b, 1, 2, 1, 500, 4, 0), 0); /* sell 4 @ 500 */
  e = expect_er(&b, EXEC(NEW));
  e = expect_er(&b, EXEC(FILL));
  assert_int_equal(e->execution_report->qty, 4);
  assert_int_equal(e->execution_report->price, 500);
  assert_int_equal(e->execution_report->leaves, 0);
  e = expect_er(&a, EXEC(FILL));
  assert_int_equal(e->execution_report->qty, 4);
  assert_int_equal(e->execution_report->price, 500);
  assert_int_equal(e->execution_report->leaves, 6);

  /* The flood is still refused; one of its connections closing makes room
   * for exactly one more from that address, which can log in; once it has,
   * it no longer counts either. */
  gt_close(&flood[PER_ADDR]);
  connect_from(&flood[PER_ADDR], "127.0.0.2", s.port);
  expect_refused(&flood[PER_ADDR], TERMC(ADDRESS_LIMIT));
  gt_close(&flood[0]);
  wait_unauth(&s, PER_ADDR - 1);
  gt_client_t c;
  connect_from(&c, "127.0.0.2", s.port);
  wait_unauth(&s, PER_ADDR);
  gt_close(&flood[PER_ADDR + 1]);
  connect_from(&flood[PER_ADDR + 1], "127.0.0.2", s.port);
  expect_refused(&flood[PER_ADDR + 1], TERMC(ADDRESS_LIMIT));
  uint8_t sec[32];
  ts_key_secret(OP, sec);
  assert_int_equal(gt_send_login(&c, OP, sec, 0, 0, 30000, 0), 0);
  assert_non_null(gt_expect(&c, BODY(LOGIN_ACK), 3000));
  wait_unauth(&s, PER_ADDR - 1);
  connect_from(&flood[0], "127.0.0.2", s.port);
  wait_unauth(&s, PER_ADDR);
  expect_waiting(&flood[0]);
  assert_int_equal(refused(&s), GLOBAL - PER_ADDR + 2);

  for (int i = 0; i < GLOBAL; i++) gt_close(&flood[i]);
  gt_close(&c);
  gt_close(&a);
  gt_close(&b);
  ts_server_stop(&s);
}

/* ------------------------------------------------------- the global limit */

/* A wall clock that can hold the gateway's loop thread (it reads the clock
 * on login) while the test fills the listen backlog. */
static atomic_int g_hold, g_held;

static uint64_t holding_clock(void *ctx) {
  (void)ctx;
  if (atomic_load(&g_hold)) {
    atomic_store(&g_held, 1);
    for (int i = 0; i < 500 && atomic_load(&g_hold); i++) usleep(10000);
  }
  return gt_now_ns();
}

static void small_global(hg_gateway_config_t *cfg) {
  cfg->max_unauthenticated = 2 * PER_ADDR;
  cfg->max_unauthenticated_per_address = PER_ADDR;
  cfg->login_timeout_ms = 30000;
  cfg->wall_clock = holding_clock;
}

#define BURST 40 /* more than the gateway's refusal handles (32) */

/* Two addresses at their limit fill the global one: a third address gets
 * TERM_SERVER_BUSY. Then, while the loop thread is held in a login, a burst
 * of BURST connections waits in the backlog: the login frees one place,
 * which the first of them takes, and every other one is answered
 * TERM_SERVER_BUSY, although they outnumber the refusal handles. */
static void test_global_limit_answers_busy(void **state) {
  (void)state;
  ts_server_t s;
  start_market(&s, small_global);
  gt_client_t held[2 * PER_ADDR];
  for (int i = 0; i < 2 * PER_ADDR; i++)
    connect_from(&held[i], i < PER_ADDR ? "127.0.0.2" : "127.0.0.3", s.port);
  wait_unauth(&s, 2 * PER_ADDR);
  gt_client_t c;
  connect_from(&c, "127.0.0.4", s.port);
  expect_refused(&c, TERMC(SERVER_BUSY));
  gt_close(&c);
  assert_int_equal(refused(&s), 1);

  uint8_t sec[32];
  ts_key_secret(TB, sec);
  atomic_store(&g_hold, 1);
  assert_int_equal(gt_send_login(&held[0], TB, sec, 0, 0, 30000, 0), 0);
  for (int i = 0; i < 300 && !atomic_load(&g_held); i++) usleep(10000);
  assert_true(atomic_load(&g_held));
  gt_client_t *burst = calloc(BURST, sizeof *burst);
  assert_non_null(burst);
  for (int i = 0; i < BURST; i++) connect_from(&burst[i], "127.0.0.1", s.port);
  atomic_store(&g_hold, 0);
  assert_non_null(gt_expect(&held[0], BODY(LOGIN_ACK), 3000));
  for (int i = 1; i < BURST; i++) {
    expect_refused(&burst[i], TERMC(SERVER_BUSY));
    gt_close(&burst[i]);
  }
  expect_waiting(&burst[0]);
  wait_unauth(&s, 2 * PER_ADDR);
  assert_int_equal(refused(&s), BURST);

  /* One of 127.0.0.3 leaves: 127.0.0.1 logs in and trades. */
  for (int i = 1; i < 2 * PER_ADDR; i++) expect_waiting(&held[i]);
  gt_close(&held[PER_ADDR]);
  wait_unauth(&s, 2 * PER_ADDR - 1);
  gt_client_t a;
  assert_true(gt_login(&a, s.port, TA, 0, 0) > 0);
  assert_int_equal(gt_new_order(&a, 1, 1, 0, 500, 1, 0), 0);
  env_t *e = expect_er(&a, EXEC(NEW));
  assert_int_equal(e->execution_report->leaves, 1);
  gt_close(&a);
  gt_close(&burst[0]);
  free(burst);
  for (int i = 0; i < 2 * PER_ADDR; i++) gt_close(&held[i]);
  ts_server_stop(&s);
}

/* ------------------------------------------------------- the login timeout */

static void short_timeout(hg_gateway_config_t *cfg) {
  cfg->max_unauthenticated = GLOBAL;
  cfg->max_unauthenticated_per_address = PER_ADDR;
  cfg->login_timeout_ms = 150;
}

/* A short login timeout ends idle connections with TERM_LOGIN_TIMEOUT, and
 * their address may connect again. */
static void test_login_timeout_frees_the_address(void **state) {
  (void)state;
  ts_server_t s;
  assert_int_equal(ts_server_start(&s, 1, short_timeout, setup_keys), 0);
  gt_client_t c[PER_ADDR];
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < PER_ADDR; i++) connect_from(&c[i], "127.0.0.2", s.port);
    for (int i = 0; i < PER_ADDR; i++) {
      env_t *e = gt_expect(&c[i], BODY(TERMINATE), 3000);
      assert_non_null(e);
      assert_int_equal(e->terminate->code, TERMC(LOGIN_TIMEOUT));
      assert_true(gt_wait_closed(&c[i], 3000));
      gt_close(&c[i]);
    }
    wait_unauth(&s, 0);
  }
  assert_int_equal(refused(&s), 0);
  ts_server_stop(&s);
}

/* Per-address limit above the global one: refused at create. */
static void test_bad_config(void **state) {
  (void)state;
  ts_server_t s;
  memset(&s, 0, sizeof s);
  assert_non_null(util_tmpdir(s.dir, "gw"));
  hg_gateway_config_t gc;
  hg_gateway_config_init(&gc);
  gc.key_dir = s.dir;
  gc.max_unauthenticated = 8;
  gc.max_unauthenticated_per_address = 9;
  gc.log = quiet_log;
  hg_gateway_t *gw = NULL;
  assert_int_equal(hg_gateway_create(&gc, &gw), HG_EINVAL);
  assert_null(gw);
  util_rm_rf(s.dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_address_cannot_lock_out_others),
      cmocka_unit_test(test_global_limit_answers_busy),
      cmocka_unit_test(test_login_timeout_frees_the_address),
      cmocka_unit_test(test_bad_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
