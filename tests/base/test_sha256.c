/*
 * SHA-256 against the FIPS 180-2 / NIST example vectors (empty, "abc", the
 * 448- and 896-bit messages, one million 'a'), padding-boundary lengths
 * (digests taken from an independent implementation), and streaming: every
 * split of the input into two updates gives the one-shot digest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/sha256.h"

static void hex(const uint8_t d[32], char out[65]) {
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void check(const void *data, size_t len, const char *want) {
  uint8_t d[32];
  char h[65];
  hg_sha256(data, len, d);
  hex(d, h);
  assert_string_equal(h, want);
}

static void test_nist_vectors(void **state) {
  (void)state;
  check("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  check("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  check(m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
                     "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  check(m896, strlen(m896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a(void **state) {
  (void)state;
  uint8_t chunk[1000];
  memset(chunk, 'a', sizeof chunk);
  hg_sha256_t c;
  hg_sha256_init(&c);
  for (int i = 0; i < 1000; i++) hg_sha256_update(&c, chunk, sizeof chunk);
  uint8_t d[32];
  char h[65];
  hg_sha256_final(&c, d);
  hex(d, h);
  assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_padding_boundaries(void **state) {
  (void)state;
  static const struct {
    size_t n;
    const char *hex;
  } v[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {57, "35df609437dcfea3279283ab79fd554e2bf78f8f7ae2de532d8ee300b09e8f73"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
  };
  uint8_t data[128];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 3);
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) check(data, v[i].n, v[i].hex);
}

static void test_streaming_splits(void **state) {
  (void)state;
  uint8_t data[200];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 31 + 1);
  uint8_t want[32], got[32];
  hg_sha256(data, sizeof data, want);
  for (size_t cut = 0; cut <= sizeof data; cut++) {
    hg_sha256_t c;
    hg_sha256_init(&c);
    hg_sha256_update(&c, data, cut);
    hg_sha256_update(&c, NULL, 0);
    hg_sha256_update(&c, data + cut, sizeof data - cut);
    hg_sha256_final(&c, got);
    assert_memory_equal(got, want, 32);
  }
  /* Byte at a time. */
  hg_sha256_t c;
  hg_sha256_init(&c);
  for (size_t i = 0; i < sizeof data; i++) hg_sha256_update(&c, data + i, 1);
  hg_sha256_final(&c, got);
  assert_memory_equal(got, want, 32);
}

/* A hash given up is freed by discard (the sanitizer build checks for the
 * leak), and discard after final does nothing. */
static void test_discard(void **state) {
  (void)state;
  hg_sha256_t c;
  hg_sha256_init(&c);
  hg_sha256_update(&c, "abc", 3);
  hg_sha256_discard(&c);
  assert_null(c.md);
  hg_sha256_discard(&c);
  uint8_t d[32], want[32];
  hg_sha256_init(&c);
  hg_sha256_update(&c, "abc", 3);
  hg_sha256_final(&c, d);
  hg_sha256_discard(&c);
  hg_sha256("abc", 3, want);
  assert_memory_equal(d, want, 32);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nist_vectors),
      cmocka_unit_test(test_million_a),
      cmocka_unit_test(test_padding_boundaries),
      cmocka_unit_test(test_streaming_splits),
      cmocka_unit_test(test_discard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
