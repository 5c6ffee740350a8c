/* The error table: every code has a distinct value, a name and a message. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "hourglass/error.h"

static void codes_are_distinct_and_named(void **state) {
  (void)state;
  static const int codes[] = {
#define X(name, off, msg) HG_E##name,
      HG_ERRNO_MAP(X)
#undef X
  };
  size_t n = sizeof codes / sizeof codes[0];
  for (size_t i = 0; i < n; i++) {
    assert_true(codes[i] < HG_ERRNO_BASE);
    assert_string_not_equal(hg_strerror(codes[i]), "unknown error");
    assert_string_not_equal(hg_err_name(codes[i]), "UNKNOWN");
    for (size_t j = i + 1; j < n; j++) assert_int_not_equal(codes[i], codes[j]);
  }
  assert_string_equal(hg_err_name(HG_EFULL), "HG_EFULL");
}

static void errno_values_pass_through(void **state) {
  (void)state;
  assert_string_equal(hg_strerror(0), "ok");
  assert_string_equal(hg_err_name(-ENOSPC), "ENOSPC");
  assert_string_equal(hg_strerror(-ENOSPC), "No space left on device");
  assert_string_equal(hg_strerror(HG_ERRNO_BASE - 9999), "unknown error");
  assert_string_equal(hg_strerror(12345), "unknown error");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(codes_are_distinct_and_named),
      cmocka_unit_test(errno_values_pass_through),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
