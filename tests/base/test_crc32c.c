/* CRC32C: published check values, chaining, and both implementations agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/crc32c.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void check_vectors(crc_fn f) {
  uint8_t buf[32];
  assert_int_equal(f(0, "123456789", 9), 0xE3069283u);
  assert_int_equal(f(0, "", 0), 0u);
  assert_int_equal(f(0, "a", 1), 0xC1D04330u);
  /* RFC 3720 (iSCSI) appendix B.4 */
  memset(buf, 0, sizeof buf);
  assert_int_equal(f(0, buf, 32), 0x8A9136AAu);
  memset(buf, 0xff, sizeof buf);
  assert_int_equal(f(0, buf, 32), 0x62A8AB43u);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
  assert_int_equal(f(0, buf, 32), 0x46DD794Eu);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
  assert_int_equal(f(0, buf, 32), 0x113FDB5Cu);
}

static void software_vectors(void **state) {
  (void)state;
  check_vectors(hg_crc32c_sw);
}

static void dispatched_vectors(void **state) {
  (void)state;
  check_vectors(hg_crc32c);
  if (hg_crc32c_hw_available()) check_vectors(hg_crc32c_hw);
}

/* Every length 0..300 at every alignment 0..7: chained halves equal the whole,
 * and the table and instruction paths agree. */
static void chaining_and_paths_agree(void **state) {
  (void)state;
  static uint8_t data[320];
  uint32_t x = 12345;
  for (size_t i = 0; i < sizeof data; i++) {
    x = x * 1103515245u + 12345u;
    data[i] = (uint8_t)(x >> 16);
  }
  for (size_t a = 0; a < 8; a++) {
    for (size_t n = 0; n <= 300; n++) {
      uint32_t whole = hg_crc32c_sw(0, data + a, n);
      size_t h = n / 3;
      assert_int_equal(hg_crc32c_sw(hg_crc32c_sw(0, data + a, h), data + a + h, n - h), whole);
      assert_int_equal(hg_crc32c(0, data + a, n), whole);
      if (hg_crc32c_hw_available()) assert_int_equal(hg_crc32c_hw(0, data + a, n), whole);
    }
  }
  /* a single flipped bit changes the CRC */
  uint32_t before = hg_crc32c(0, data, 100);
  data[50] ^= 0x10;
  assert_int_not_equal(hg_crc32c(0, data, 100), before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(software_vectors),
      cmocka_unit_test(dispatched_vectors),
      cmocka_unit_test(chaining_and_paths_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
