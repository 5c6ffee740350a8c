/*
 * The keys file (hg_gateway_load_keys, hg_gateway_key_line_parse): the
 * format, and lines that must be refused rather than read as some other
 * key: a secret with a non-hex character (sscanf's %x would take "9;" as
 * 0x09), signs and wrap-around in the ids, an id run into the role; and
 * comments longer than the loader's line buffer.
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

#include "hourglass/error.h"
#include "hourglass/gateway.h"
#include "pipeline_util.h"

static const char *SECRET = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

typedef struct fx {
  char dir[64];
  char keys_dir[128];
  char file[128];
  hg_gateway_t *gw;
} fx_t;

static void quiet(void *ctx, int level, const char *msg) {
  (void)ctx;
  (void)level;
  (void)msg;
}

static int setup(void **state) {
  fx_t *f = calloc(1, sizeof *f);
  if (f == NULL || util_tmpdir(f->dir, "keys") == NULL) return -1;
  snprintf(f->keys_dir, sizeof f->keys_dir, "%s/store", f->dir);
  snprintf(f->file, sizeof f->file, "%s/keys.txt", f->dir);
  if (mkdir(f->keys_dir, 0700) != 0) return -1;
  hg_gateway_config_t gc;
  hg_gateway_config_init(&gc);
  gc.key_dir = f->keys_dir;
  gc.log = quiet;
  if (hg_gateway_create(&gc, &f->gw) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx_t *f = *state;
  hg_gateway_destroy(f->gw);
  util_rm_rf(f->dir);
  free(f);
  return 0;
}

/* Writes text as the keys file and loads it; *line as the loader sets it. */
static int load(fx_t *f, const char *text, unsigned *line) {
  FILE *fp = fopen(f->file, "w");
  assert_non_null(fp);
  assert_int_equal(fputs(text, fp) >= 0, 1);
  assert_int_equal(fclose(fp), 0);
  *line = 0;
  return hg_gateway_load_keys(f->gw, f->file, line);
}

static void test_good_file(void **state) {
  fx_t *f = *state;
  char text[512];
  snprintf(text, sizeof text,
           "# key_id role account firm secret\n"
           "\n"
           "1 trader 101 1 %s\n"
           "2\tmarket_maker\t102\t2\t%s   # desk\n"
           "3 risk_viewer 0 1 DEADBEEFdeadbeefDEADBEEFdeadbeef\n"
           "18446744073709551615 operator 0 4294967295 0f0e0d0c0b0a09080706050403020100\n",
           SECRET, SECRET);
  unsigned line;
  assert_int_equal(load(f, text, &line), 0);
}

/* A comment longer than the loader's line buffer is skipped whole, on its
 * own line or after a key; a key line that long is refused. */
static void test_long_lines(void **state) {
  fx_t *f = *state;
  char text[4096];
  char pad[1200];
  memset(pad, 'x', sizeof pad - 1);
  pad[sizeof pad - 1] = '\0';
  snprintf(text, sizeof text, "# %s 7 trader 1 1 00\n1 trader 101 1 %s # %s 8 operator\n"
           "2 trader 102 1 %s\n", pad, SECRET, pad, SECRET);
  unsigned line;
  assert_int_equal(load(f, text, &line), 0);
  snprintf(text, sizeof text, "1 trader 101 1 %s\n2 trader 102 1 %s%s\n", SECRET, SECRET, pad);
  assert_int_equal(load(f, text, &line), HG_EPARSE);
  assert_int_equal(line, 2);
}

/* Each bad line is refused with HG_EPARSE and its line number. */
static void test_bad_lines(void **state) {
  fx_t *f = *state;
  static const char *const bad[] = {
      "5 trader 101 1 0011223344556677889;aabbccddeeff\n",   /* ';' in the secret */
      "5 trader 101 1 -1112233445566778899aabbccddeeff\n",   /* '-' in the secret */
      "5 trader 101 1 0x112233445566778899aabbccddeeff\n",   /* '0x' in the secret */
      "5 trader 101 1  +112233445566778899aabbccddeeff\n",   /* '+' in the secret */
      "5 trader -1 1 00112233445566778899aabbccddeeff\n",    /* account -1 (was 4294967295) */
      "5 trader 101 4294967296 00112233445566778899aabbccddeeff\n", /* firm beyond 32 bits */
      "-5 trader 101 1 00112233445566778899aabbccddeeff\n",  /* key id -5 */
      "+5 trader 101 1 00112233445566778899aabbccddeeff\n",  /* key id +5 */
      "18446744073709551616 trader 101 1 00112233445566778899aabbccddeeff\n", /* 2^64 */
      "5trader 101 1 1 00112233445566778899aabbccddeeff\n",  /* id run into the role */
      "5 trader 101 00000000000000100112233445566778899aabbccddeeff\n", /* firm and secret run
                                                                        together */
      "5 trader 101 1 0011223344556677889\n",                /* odd number of digits */
      "5 trader 101 1\n",                                    /* no secret */
      "5 banker 101 1 00112233445566778899aabbccddeeff\n",   /* no such role */
      "5 trader 101 1 00112233445566778899aabbccddeeff x\n", /* a sixth field */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, "# first line\n1 trader 101 1 %s\n%s", SECRET, bad[i]);
    unsigned line;
    int rc = load(f, text, &line);
    if (rc != HG_EPARSE || line != 3) print_error("line: %s", bad[i]);
    assert_int_equal(rc, HG_EPARSE);
    assert_int_equal(line, 3);
  }
}

/* The line parser on its own: the key, the decoded secret, the verdicts. */
static void test_line_parse(void **state) {
  (void)state;
  char line[256];
  hg_gateway_key_t k;
  uint8_t sec[64];
  snprintf(line, sizeof line, "  42 market_maker 7 3 a0B1c2D3e4F5a6b7c8d9e0f1a2b3c4d5 # mm\n");
  assert_int_equal(hg_gateway_key_line_parse(line, &k, sec), 0);
  assert_int_equal(k.key_id, 42);
  assert_int_equal(k.role, HG_ROLE_MARKET_MAKER);
  assert_int_equal(k.account, 7);
  assert_int_equal(k.firm, 3);
  assert_ptr_equal(k.secret, sec);
  assert_int_equal(k.secret_len, 16);
  static const uint8_t want[16] = {0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5, 0xa6, 0xb7,
                                   0xc8, 0xd9, 0xe0, 0xf1, 0xa2, 0xb3, 0xc4, 0xd5};
  assert_memory_equal(sec, want, 16);
  snprintf(line, sizeof line, "   # only a comment\n");
  assert_int_equal(hg_gateway_key_line_parse(line, &k, sec), 1);
  snprintf(line, sizeof line, "\r\n");
  assert_int_equal(hg_gateway_key_line_parse(line, &k, sec), 1);
  snprintf(line, sizeof line, "42 trader 7 3 a0b1#c2\n"); /* the comment cuts the secret */
  assert_int_equal(hg_gateway_key_line_parse(line, &k, sec), 0);
  assert_int_equal(k.secret_len, 2);
  snprintf(line, sizeof line, "42 trader 7 3 a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7"
                              "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a0b1c2d3e4f5a6b7c8d9e0f1\n");
  assert_int_equal(hg_gateway_key_line_parse(line, &k, sec), HG_EPARSE); /* 65 bytes */
}

/* The one binary encoding of a key (store records, cluster entries): a
 * round trip, and the shapes it refuses. */
static void test_key_encoding(void **state) {
  (void)state;
  uint8_t secret[HG_WIRE_SECRET_MAX], back[HG_WIRE_SECRET_MAX], buf[HG_GATEWAY_KEY_BYTES];
  for (size_t i = 0; i < sizeof secret; i++) secret[i] = (uint8_t)(i * 7 + 1);
  hg_gateway_key_t k = {.key_id = 0x0102030405060708ull, .role = HG_ROLE_TRADER,
                        .account = 7, .firm = 3, .secret = secret, .secret_len = 20};
  hg_gateway_key_encode(&k, buf);
  assert_int_equal(buf[0], 1);    /* version */
  assert_int_equal(buf[1], 0x08); /* key id, little-endian */
  hg_gateway_key_t d;
  assert_int_equal(hg_gateway_key_decode(buf, sizeof buf, &d, back), 0);
  assert_int_equal(d.key_id, k.key_id);
  assert_int_equal(d.role, k.role);
  assert_int_equal(d.account, 7);
  assert_int_equal(d.firm, 3);
  assert_int_equal(d.secret_len, 20);
  assert_ptr_equal(d.secret, back);
  assert_memory_equal(back, secret, 20);
  assert_int_equal(hg_gateway_key_decode(buf, sizeof buf - 1, &d, back), HG_ECORRUPT);
  buf[0] = 2;
  assert_int_equal(hg_gateway_key_decode(buf, sizeof buf, &d, back), HG_ECORRUPT);
  k.secret_len = HG_WIRE_SECRET_MIN - 1; /* too short a secret */
  hg_gateway_key_encode(&k, buf);
  assert_int_equal(hg_gateway_key_decode(buf, sizeof buf, &d, back), HG_ECORRUPT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_good_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_lines, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_lines, setup, teardown),
      cmocka_unit_test(test_line_parse),
      cmocka_unit_test(test_key_encoding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
