/*
 * HMAC-SHA256 against all seven RFC 4231 test cases (case 5 truncated to
 * 128 bits as the RFC gives it), including keys longer than the block, and
 * the constant-time comparison.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/hmac.h"

static void check(const uint8_t *key, size_t klen, const void *msg, size_t mlen, const char *want) {
  uint8_t d[32];
  char h[65];
  hg_hmac_sha256(key, klen, msg, mlen, d);
  for (int i = 0; i < 32; i++) snprintf(h + 2 * i, 3, "%02x", d[i]);
  assert_memory_equal(h, want, strlen(want));
}

static void test_rfc4231(void **state) {
  (void)state;
  uint8_t k[131];
  uint8_t m[50];
  memset(k, 0x0b, 20);
  check(k, 20, "Hi There", 8, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  check((const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  memset(k, 0xaa, 20);
  memset(m, 0xdd, 50);
  check(k, 20, m, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  for (int i = 0; i < 25; i++) k[i] = (uint8_t)(i + 1);
  memset(m, 0xcd, 50);
  check(k, 25, m, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  memset(k, 0x0c, 20);
  check(k, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b");
  memset(k, 0xaa, 131);
  const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  check(k, 131, m6, strlen(m6), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  const char *m7 = "This is a test using a larger than block-size key and a larger than block-size "
                   "data. The key needs to be hashed before being used by the HMAC algorithm.";
  check(k, 131, m7, strlen(m7), "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

static void test_block_sized_key_not_hashed(void **state) {
  (void)state;
  /* A 64-byte key is used as is; hashing it first would give another MAC. */
  uint8_t k[64], hk[32], a[32], b[32];
  memset(k, 0x11, sizeof k);
  hg_hmac_sha256(k, 64, "x", 1, a);
  hg_sha256(k, 64, hk);
  hg_hmac_sha256(hk, 32, "x", 1, b);
  assert_memory_not_equal(a, b, 32);
  /* A 65-byte key is hashed: equal to using its digest. */
  uint8_t k65[65];
  memset(k65, 0x11, sizeof k65);
  hg_sha256(k65, 65, hk);
  hg_hmac_sha256(k65, 65, "x", 1, a);
  hg_hmac_sha256(hk, 32, "x", 1, b);
  assert_memory_equal(a, b, 32);
}

static void test_ct_equal(void **state) {
  (void)state;
  uint8_t a[32], b[32];
  memset(a, 7, sizeof a);
  memcpy(b, a, sizeof b);
  assert_int_equal(hg_ct_equal(a, b, 32), 1);
  assert_int_equal(hg_ct_equal(a, b, 0), 1);
  for (int i = 0; i < 32; i++) {
    for (int bit = 0; bit < 8; bit++) {
      b[i] ^= (uint8_t)(1u << bit);
      assert_int_equal(hg_ct_equal(a, b, 32), 0);
      b[i] ^= (uint8_t)(1u << bit);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rfc4231),
      cmocka_unit_test(test_block_sized_key_not_hashed),
      cmocka_unit_test(test_ct_equal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
