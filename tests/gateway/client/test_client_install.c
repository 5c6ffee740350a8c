/*
 * test_client_install.c - the C client as a user outside the tree gets it:
 * `cmake --install --component client` into a fresh prefix, then the
 * example program of gateway/client/README.md (its first ```c block, taken
 * from the file itself) compiled with nothing but
 * `cc $(pkg-config --cflags --libs hourglass-client)` on that prefix's
 * PKG_CONFIG_PATH, and run against a test server: it logs in and places an
 * order, which the exchange acknowledges (and a second one, out of the
 * price band, it rejects). The compile flags must name the prefix and
 * neither the build nor the source tree.
 *
 * Arguments: cmake, the build tree, CMAKE_INSTALL_LIBDIR, the README, the
 * C compiler, the source tree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_run.h"
#include "client_util.h"
#include "test_keys.h"

#define OP 1u
#define TA 10u
#define ACC_A 100u

static char **g_argv;
static char g_prefix[256];
static ts_server_t g_srv;
static int server_made;

static int teardown(void **state) {
  (void)state;
  if (server_made) ts_server_stop(&g_srv);
  server_made = 0;
  if (g_prefix[0]) {
    char *out = NULL;
    (void)cli_run("rm -rf", g_prefix, CLI_BOTH, &out);
    free(out);
  }
  return 0;
}

/* Runs a shell command line; fails the test with its output unless it
 * exits 0. Returns the output (stdout and stderr), malloc'd. */
static char *sh_ok(const char *cmd) {
  char *out = NULL;
  char line[2100];
  snprintf(line, sizeof line, "(%s)", cmd);
  int rc = cli_run(line, "", CLI_BOTH, &out);
  if (rc != 0) fail_msg("exit %d: %s\n%s", rc, cmd, out);
  return out;
}

static void test_install_compile_run(void **state) {
  (void)state;
  const char *cmake = g_argv[1], *build = g_argv[2], *libdir = g_argv[3];
  const char *readme = g_argv[4], *cc = g_argv[5], *src = g_argv[6];
  const char *tmp = getenv("TMPDIR");
  snprintf(g_prefix, sizeof g_prefix, "%s/hg_client_install.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(g_prefix));

  /* Everything that forks before the server's threads start. */
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' --install '%s' --component client --prefix '%s'", cmake, build,
           g_prefix);
  free(sh_ok(cmd));
  snprintf(cmd, sizeof cmd, "PKG_CONFIG_PATH='%s/%s/pkgconfig' pkg-config --cflags --libs hourglass-client",
           g_prefix, libdir);
  char *flags = sh_ok(cmd);
  cli_expect(flags, g_prefix);
  cli_expect(flags, "-lhourglass-client");
  assert_null(strstr(flags, build));
  assert_null(strstr(flags, src));
  free(flags);
  snprintf(cmd, sizeof cmd,
           "cd '%s' && awk '/^```c$/{f=1;next} /^```$/{if(f)exit} f' '%s' > first_order.c && "
           "grep -q hg_client_new_order first_order.c && "
           "'%s' -std=c17 -Wall -Wextra -Werror -o first_order first_order.c "
           "$(PKG_CONFIG_PATH='%s/%s/pkgconfig' pkg-config --cflags --libs hourglass-client)",
           g_prefix, readme, cc, g_prefix, libdir);
  free(sh_ok(cmd));

  ts_server_options_t o = {0};
  server_made = 1;
  assert_int_equal(ts_server_create(&g_srv, &o), 0);
  assert_int_equal(ts_server_add_key(&g_srv, OP, HG_ROLE_OPERATOR, 0, 0), 0);
  assert_int_equal(ts_server_add_key(&g_srv, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_run(&g_srv), 0);
  const uint32_t acc[] = {ACC_A}, firm[] = {1};
  assert_int_equal(ch_setup_market(&g_srv, OP, 1, acc, firm, 1), 0);

  char hex[65];
  ts_key_secret_hex(TA, hex);
  snprintf(cmd, sizeof cmd, "HG_HOST=127.0.0.1 HG_PORT=%u HG_KEY_ID=%u HG_SECRET=%s '%s/first_order'",
           (unsigned)g_srv.port, TA, hex, g_prefix);
  char *out = NULL;
  assert_int_equal(cli_run(cmd, "1 buy 500 3", CLI_BOTH, &out), 0);
  cli_expect(out, "logged in: account 100");
  cli_expect(out, "EXEC_NEW order ");
  cli_expect(out, "price 500 qty 3 leaves 3 reason 0");
  free(out);
  /* Unknown instrument: the example prints the reject, with its reason. */
  assert_int_equal(cli_run(cmd, "77 sell 500 1", CLI_BOTH, &out), 0);
  cli_expect(out, "EXEC_REJECTED order ");
  free(out);
  /* A wrong secret: login refused, exit 1. */
  snprintf(cmd, sizeof cmd, "HG_PORT=%u HG_KEY_ID=%u HG_SECRET=00ff '%s/first_order'",
           (unsigned)g_srv.port, TA, g_prefix);
  assert_int_equal(cli_run(cmd, "1 buy 500 1", CLI_BOTH, &out), 1);
  cli_expect(out, "login: authentication failed");
  free(out);
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s CMAKE BUILD_DIR LIBDIR README CC SOURCE_DIR\n", argv[0]);
    return 2;
  }
  g_argv = argv;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_install_compile_run, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
