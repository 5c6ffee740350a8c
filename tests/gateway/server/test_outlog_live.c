/*
 * The outbound journal through the gateway, over loopback TCP with a real
 * pipeline: frames sent before a clean restart come back byte for byte and
 * numbering continues; a range older than retention gets
 * REJ_RETRANSMIT_EXPIRED while a kept one older than the in-memory ring is
 * read from disk; a corrupt record gets REJ_RETRANSMIT_CORRUPT and is
 * counted; a session id used before a restart is refused after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <fcntl.h>

#include "gw_client.h"

enum { OP = 1, TA = 10 };
enum { ACC_A = 101 };

static void setup_keys(ts_server_t *s) {
  assert_int_equal(ts_server_add_key(s, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(s, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
}

/* A tiny in-memory ring, so that anything but the newest frames must come
 * from the journal. */
static void tiny_ring(hg_gateway_config_t *cfg) {
  cfg->retransmit_bytes = 1024;
  cfg->retransmit_frames = 2;
}

static void tiny_ring_small_segments(hg_gateway_config_t *cfg) {
  tiny_ring(cfg);
  cfg->outlog_segment_size = 4096;
  cfg->outlog_segments_kept = 2;
}

static void start(ts_server_t *s, int unsafe, void (*tweak)(hg_gateway_config_t *)) {
  assert_int_equal(ts_server_start(s, unsafe, tweak, setup_keys), 0);
  const uint32_t acc[] = {ACC_A};
  const uint32_t firm[] = {1};
  assert_int_equal(gt_setup_market(s, OP, 1, acc, firm, 1), 0);
}

/* Next frame with its raw bytes (the client's buffer never compacts in these
 * short tests, so the frame sits where reading started). */
typedef struct raw {
  uint8_t b[512];
  size_t n;
  uint64_t seq;
} raw_t;

static env_t *recv_raw(gt_client_t *c, uint32_t want, raw_t *out) {
  for (;;) {
    size_t before = c->in_off;
    env_t *e = gt_recv(c, 2000);
    assert_non_null(e);
    if (e->body_case == BODY(HEARTBEAT)) continue;
    assert_int_equal(e->body_case, want);
    size_t n = c->in_off - before;
    assert_true(n <= sizeof out->b);
    memcpy(out->b, c->in + before, n);
    out->n = n;
    out->seq = e->seq;
    return e;
  }
}

static env_t *retransmit(gt_client_t *c, uint64_t from, uint32_t count) {
  gt_retransmit(c, from, count);
  env_t *e = gt_expect(c, BODY(RETRANSMISSION), 2000);
  assert_non_null(e);
  return e;
}

static void test_retransmit_across_restart(void **state) {
  (void)state;
  ts_server_t s;
  start(&s, 0, tiny_ring);
  gt_client_t a;
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 1);
  raw_t before[5];
  for (int i = 0; i < 5; i++) {
    gt_new_order(&a, 1, 100 + (uint64_t)i, 1, 700 + i, 1, 0);
    recv_raw(&a, BODY(EXECUTION_REPORT), &before[i]);
    assert_int_equal(before[i].seq, (uint64_t)i + 1);
  }
  gt_close(&a);
  ts_server_halt(&s);

  assert_int_equal(ts_server_reopen(&s, 0, tiny_ring, NULL), 0);
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 6); /* numbering continues */
  env_t *e = retransmit(&a, 1, 5);
  assert_int_equal(e->retransmission->reason, 0);
  for (int i = 0; i < 5; i++) {
    raw_t r;
    recv_raw(&a, BODY(EXECUTION_REPORT), &r);
    assert_int_equal(r.seq, (uint64_t)i + 1);
    assert_int_equal(r.n, before[i].n);
    assert_memory_equal(r.b, before[i].b, r.n); /* byte-identical */
  }
  /* A range running past what was sent is refused as before. */
  e = retransmit(&a, 4, 3);
  assert_int_equal(e->retransmission->reason, REJ(RETRANSMIT_RANGE));
  /* New frames take the next seq, and a second restart keeps both. */
  gt_new_order(&a, 1, 200, 1, 800, 1, 0);
  raw_t six;
  recv_raw(&a, BODY(EXECUTION_REPORT), &six);
  assert_int_equal(six.seq, 6);
  gt_close(&a);
  ts_server_halt(&s);
  assert_int_equal(ts_server_reopen(&s, 0, tiny_ring, NULL), 0);
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 7);
  e = retransmit(&a, 5, 2);
  assert_int_equal(e->retransmission->reason, 0);
  raw_t r;
  recv_raw(&a, BODY(EXECUTION_REPORT), &r);
  assert_memory_equal(r.b, before[4].b, r.n);
  recv_raw(&a, BODY(EXECUTION_REPORT), &r);
  assert_int_equal(r.n, six.n);
  assert_memory_equal(r.b, six.b, r.n);
  gt_close(&a);
  ts_server_stop(&s);
}

static void test_expired(void **state) {
  (void)state;
  ts_server_t s;
  start(&s, 1, tiny_ring_small_segments);
  gt_client_t a;
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 1);
  /* Each report is well under 100 bytes, so 200 of them fill several 4 KiB
   * segments; with two segments kept the first reports are gone. */
  for (int i = 0; i < 200; i++) {
    gt_new_order(&a, 1, 1000 + (uint64_t)i, 1, 700 + (i % 50), 1, 0);
    env_t *e = gt_expect(&a, BODY(EXECUTION_REPORT), 2000);
    assert_non_null(e);
    assert_int_equal(e->seq, (uint64_t)i + 1);
  }
  env_t *e = retransmit(&a, 1, 3);
  assert_int_equal(e->retransmission->reason, REJ(RETRANSMIT_EXPIRED));
  /* 190..197 are older than the 2-frame ring but still in the kept segment. */
  e = retransmit(&a, 190, 8);
  assert_int_equal(e->retransmission->reason, 0);
  for (uint64_t q = 190; q < 198; q++) {
    e = gt_expect(&a, BODY(EXECUTION_REPORT), 2000);
    assert_non_null(e);
    assert_int_equal(e->seq, q);
    assert_int_equal(e->execution_report->client_order_id, 1000 + q - 1);
  }
  hg_gateway_stats_t st;
  hg_gateway_stats(s.gw, &st);
  assert_true(st.outlog_segments >= 2 && st.outlog_segments <= 3);
  assert_int_equal(st.outlog_write_errors, 0);
  gt_close(&a);
  ts_server_stop(&s);
}

/* Finds the frame record of (key, seq) in a segment and flips a payload byte. */
static int corrupt_record(const char *path, uint64_t key, uint64_t seq) {
  int fd = open(path, O_RDWR);
  if (fd < 0) return -1;
  struct stat st;
  fstat(fd, &st);
  uint8_t *m = malloc((size_t)st.st_size);
  int found = -1;
  if (pread(fd, m, (size_t)st.st_size, 0) == st.st_size) {
    for (off_t off = 32; off + 32 <= st.st_size;) {
      uint32_t len;
      uint64_t k, q;
      memcpy(&len, m + off + 8, 4);
      memcpy(&k, m + off + 16, 8);
      memcpy(&q, m + off + 24, 8);
      if (m[off + 4] == 1 && k == key && q == seq) {
        uint8_t b = m[off + 32 + 3] ^ 0x20;
        found = pwrite(fd, &b, 1, off + 32 + 3) == 1 ? 0 : -1;
        break;
      }
      off += (off_t)((len + 32 + 7) & ~7u);
    }
  }
  free(m);
  close(fd);
  return found;
}

static void test_corrupt_record(void **state) {
  (void)state;
  ts_server_t s;
  start(&s, 0, tiny_ring);
  gt_client_t a;
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 1);
  for (int i = 0; i < 5; i++) {
    gt_new_order(&a, 1, 300 + (uint64_t)i, 1, 700, 1, 0);
    assert_non_null(gt_expect(&a, BODY(EXECUTION_REPORT), 2000));
  }
  gt_close(&a);
  ts_server_halt(&s);
  char path[sizeof s.keys + 64];
  snprintf(path, sizeof path, "%s/outlog/outlog-%020u.hgo", s.keys, 1u);
  assert_int_equal(corrupt_record(path, TA, 2), 0);

  assert_int_equal(ts_server_reopen(&s, 0, tiny_ring, NULL), 0);
  hg_gateway_stats_t st;
  hg_gateway_stats(s.gw, &st);
  assert_int_equal(st.outlog_corrupt, 1); /* found by the start-up scan */
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 6);
  env_t *e = retransmit(&a, 1, 3);
  assert_int_equal(e->retransmission->reason, REJ(RETRANSMIT_CORRUPT));
  /* The session goes on, and the frames around the bad one still come back. */
  e = retransmit(&a, 3, 2);
  assert_int_equal(e->retransmission->reason, 0);
  for (uint64_t q = 3; q <= 4; q++) {
    e = gt_expect(&a, BODY(EXECUTION_REPORT), 2000);
    assert_non_null(e);
    assert_int_equal(e->seq, q);
  }
  e = retransmit(&a, 1, 1);
  assert_int_equal(e->retransmission->reason, 0);
  e = gt_expect(&a, BODY(EXECUTION_REPORT), 2000);
  assert_non_null(e);
  assert_int_equal(e->seq, 1);
  gt_close(&a);
  ts_server_stop(&s);
}

static void test_session_id_across_restart(void **state) {
  (void)state;
  ts_server_t s;
  start(&s, 1, NULL);
  gt_client_t a;
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 1);
  uint8_t sid[16];
  memcpy(sid, a.sid, sizeof sid);
  gt_close(&a);
  ts_server_halt(&s);
  assert_int_equal(ts_server_reopen(&s, 1, NULL, NULL), 0);
  uint8_t sec[32];
  ts_key_secret(TA, sec);
  assert_int_equal(gt_connect(&a, s.port), 0);
  memcpy(a.sid, sid, sizeof sid);
  assert_int_equal(gt_send_login(&a, TA, sec, 0, 0, 30000, 1), 0);
  env_t *e = gt_expect(&a, BODY(LOGIN_REJECT), 2000);
  assert_non_null(e);
  assert_int_equal(e->login_reject->code, LREJ(SESSION_ID_REUSED));
  gt_close(&a);
  /* A fresh id is fine. */
  assert_int_equal(gt_login(&a, s.port, TA, 0, 0), 1);
  gt_close(&a);
  ts_server_stop(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_retransmit_across_restart),
      cmocka_unit_test(test_expired),
      cmocka_unit_test(test_corrupt_record),
      cmocka_unit_test(test_session_id_across_restart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
