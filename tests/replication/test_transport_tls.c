/*
 * test_transport_tls.c - the TLS transport (replication/transport_tls.h)
 * driven as libraft drives it, two transports on one loop: a connection
 * delivers the connecting node's id and address to the accepting side and
 * carries bytes intact; a receiver that does not read holds the sender's
 * write back (the pump does not buffer without bound); close cancels a
 * connect still in its handshake before the transport's close callback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_util.h"
#include "tls_certs.h"
#include "transport_tls.h"

#define BIG (64u << 20) /* more than every buffer between the two ends */

typedef struct side {
  struct raft_uv_transport t;
  char address[32];
  char cert[300], key[300], ca[300];
  bool closed;
} side_t;

static struct {
  uv_loop_t loop;
  uv_timer_t tick;
  char root[128];
  side_t a, b;
  uv_stream_t *accepted; /* libraft's end on a */
  uint64_t accepted_id;
  char accepted_address[64];
  uv_stream_t *connected; /* libraft's end on b */
  int connect_status;
  int connect_calls;
  int connect_calls_at_close; /* on b's close callback */
  bool write_done;
  int write_status;
  size_t got;
  size_t bad; /* bytes received that differ from the pattern */
  bool eof;
} g;

static uint8_t pattern(size_t i) { return (uint8_t)(i * 7u + (i >> 16)); }

static void on_tick(uv_timer_t *t) { (void)t; }

static bool run_until(bool *flag, unsigned timeout_ms) {
  uv_update_time(&g.loop);
  uint64_t end = uv_now(&g.loop) + timeout_ms;
  while (!*flag && uv_now(&g.loop) < end) uv_run(&g.loop, UV_RUN_ONCE);
  return *flag;
}

static void side_init(side_t *s, unsigned id) {
  snprintf(s->address, sizeof s->address, "127.0.0.1:%d", du_free_port());
  char name[16];
  snprintf(name, sizeof name, "node%u", id);
  assert_int_equal(ts_tls_make_node(g.root, "ca", id, name), 0);
  snprintf(s->cert, sizeof s->cert, "%s/%s.pem", g.root, name);
  snprintf(s->key, sizeof s->key, "%s/%s.key", g.root, name);
  snprintf(s->ca, sizeof s->ca, "%s/ca.pem", g.root);
  rtls_config_t cfg = {.cert = s->cert, .key = s->key, .ca = s->ca, .self_id = id};
  char err[256];
  memset(&s->t, 0, sizeof s->t);
  if (rtls_init(&s->t, &g.loop, &cfg, err, sizeof err) != 0) fail_msg("rtls_init: %s", err);
  assert_int_equal(s->t.init(&s->t, id, s->address), 0);
}

static void on_accept(struct raft_uv_transport *t, raft_id id, const char *address,
                      uv_stream_t *stream) {
  (void)t;
  g.accepted = stream;
  g.accepted_id = id;
  snprintf(g.accepted_address, sizeof g.accepted_address, "%s", address);
}

static void on_connect(struct raft_uv_connect *req, uv_stream_t *stream, int status) {
  (void)req;
  g.connect_calls++;
  g.connect_status = status;
  g.connected = stream;
}

static void on_write(uv_write_t *req, int status) {
  (void)req;
  g.write_done = true;
  g.write_status = status;
}

static char rbuf[1 << 16];

static void on_alloc(uv_handle_t *h, size_t n, uv_buf_t *buf) {
  (void)h;
  (void)n;
  *buf = uv_buf_init(rbuf, sizeof rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)s;
  if (n < 0) {
    g.eof = true;
    return;
  }
  for (ssize_t i = 0; i < n; i++)
    if ((uint8_t)buf->base[i] != pattern(g.got + (size_t)i)) g.bad++;
  g.got += (size_t)n;
}

static void free_stream(uv_handle_t *h) { raft_free(h); }

static void on_closed(struct raft_uv_transport *t) {
  side_t *s = t == &g.a.t ? &g.a : &g.b;
  if (s == &g.b) g.connect_calls_at_close = g.connect_calls;
  s->closed = true;
}

static bool accepted_and_connected(void) { return g.accepted != NULL && g.connected != NULL; }

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void test_carries_and_holds_back(void **state) {
  (void)state;
  memset(&g, 0, sizeof g);
  assert_int_equal(uv_loop_init(&g.loop), 0);
  assert_int_equal(uv_timer_init(&g.loop, &g.tick), 0);
  assert_int_equal(uv_timer_start(&g.tick, on_tick, 10, 10), 0);
  snprintf(g.root, sizeof g.root, "/tmp/hg_rtls_XXXXXX");
  assert_non_null(mkdtemp(g.root));
  assert_int_equal(ts_tls_make(g.root), 0);
  side_init(&g.a, 1);
  side_init(&g.b, 2);
  assert_int_equal(g.a.t.listen(&g.a.t, on_accept), 0);

  /* b connects to a: a learns b's id and address. */
  struct raft_uv_connect req = {0};
  assert_int_equal(g.b.t.connect(&g.b.t, &req, 1, g.a.address, on_connect), 0);
  uv_update_time(&g.loop);
  uint64_t end = uv_now(&g.loop) + 5000;
  while (!accepted_and_connected() && uv_now(&g.loop) < end) uv_run(&g.loop, UV_RUN_ONCE);
  assert_true(accepted_and_connected());
  assert_int_equal(g.connect_status, 0);
  assert_int_equal(g.accepted_id, 2);
  assert_string_equal(g.accepted_address, g.b.address);

  /* 64 MiB written while a's reader reads nothing: the write cannot
   * complete, the pumps stop taking bytes they cannot pass on. */
  uint8_t *big = malloc(BIG);
  assert_non_null(big);
  for (size_t i = 0; i < BIG; i++) big[i] = pattern(i);
  uv_write_t wr;
  uv_buf_t b = uv_buf_init((char *)big, BIG);
  assert_int_equal(uv_write(&wr, g.connected, &b, 1, on_write), 0);
  bool never = false;
  run_until(&never, 1500);
  assert_false(g.write_done);
  assert_true(uv_stream_get_write_queue_size(g.connected) > BIG / 2);

  /* Reading drains it all, intact. */
  assert_int_equal(uv_read_start(g.accepted, on_alloc, on_read), 0);
  assert_true(run_until(&g.write_done, 30000));
  assert_int_equal(g.write_status, 0);
  uv_update_time(&g.loop);
  end = uv_now(&g.loop) + 10000;
  while (g.got < BIG && uv_now(&g.loop) < end) uv_run(&g.loop, UV_RUN_ONCE);
  assert_int_equal(g.got, BIG);
  assert_int_equal(g.bad, 0);
  free(big);

  /* b's stream closed: a's reader sees the end of the stream. */
  uv_close((uv_handle_t *)g.connected, free_stream);
  assert_true(run_until(&g.eof, 5000));
  uv_close((uv_handle_t *)g.accepted, free_stream);

  /* A connect stuck in its handshake (the listener never answers) is
   * cancelled by close, before the transport's close callback. */
  int silent = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(silent, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(silent, 4), 0);
  socklen_t slen = sizeof sa;
  assert_int_equal(getsockname(silent, (struct sockaddr *)&sa, &slen), 0);
  char silent_addr[32];
  snprintf(silent_addr, sizeof silent_addr, "127.0.0.1:%u", ntohs(sa.sin_port));
  struct raft_uv_connect req2 = {0};
  g.connected = NULL;
  g.connect_calls = 0;
  assert_int_equal(g.b.t.connect(&g.b.t, &req2, 3, silent_addr, on_connect), 0);
  run_until(&never, 300);
  assert_int_equal(g.connect_calls, 0);
  g.b.t.close(&g.b.t, on_closed);
  g.a.t.close(&g.a.t, on_closed);
  assert_true(run_until(&g.b.closed, 5000));
  assert_int_equal(g.connect_calls_at_close, 1);
  assert_int_equal(g.connect_status, RAFT_CANCELED);
  assert_null(g.connected);
  assert_true(run_until(&g.a.closed, 5000));
  assert_int_equal(rtls_failures(&g.a.t), 0);
  rtls_release(&g.a.t);
  rtls_release(&g.b.t);
  close(silent);
  uv_close((uv_handle_t *)&g.tick, NULL);
  uv_run(&g.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&g.loop), 0);
  assert_int_equal(nftw(g.root, rm_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_carries_and_holds_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
