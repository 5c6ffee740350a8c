/*
 * test_client_install.c - the C client as a user outside the tree gets it:
 * `cmake --install --component client` into a fresh prefix, then the
 * example program of gateway/client/README.md (its first ```c block, taken
 * from the file itself) compiled with nothing but
 * `cc $(pkg-config --cflags --libs hourglass-client)` on that prefix's
 * PKG_CONFIG_PATH, and run against a test server: it logs in and places an
 * order, which the exchange acknowledges (and a second one, out of the
 * price band, it rejects); and against a TLS server with HG_TLS and HG_CA
 * set as ops/run's banner sets them. The compile flags must name the prefix and
 * neither the build nor the source tree.
 *
 * The Python client the same way: the hgclient package installed twice,
 * by `cmake --install --component python` and by an offline
 * `pip install --no-build-isolation --no-index --no-deps --target`, each
 * then imported by Debian's python3 with only its directory on the path,
 * which runs test_client_install.py (login, an order, a trade seen through
 * the market-data helper) and `python3 -m hgclient instruments`; and
 * `python3 -m hgclient md` prints the (empty) book.
 *
 * Arguments: cmake, the build tree, CMAKE_INSTALL_LIBDIR, the README, the
 * C compiler, the source tree; then python3, the assembled package
 * directory, the package's install directory relative to the prefix and
 * the script (all four "-" without the Python client: that test is skipped).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <cmocka.h>

#include "cli_run.h"
#include "client_util.h"
#include "pipeline_util.h"
#include "test_keys.h"

#define OP 1u
#define TA 10u
#define TB 11u
#define ACC_A 100u
#define ACC_B 200u

static char **g_argv;
static char g_prefix[256];
static ts_server_t g_srv;
static int server_made;

static int teardown(void **state) {
  (void)state;
  if (server_made) ts_server_stop(&g_srv);
  server_made = 0;
  if (g_prefix[0]) util_rm_rf(g_prefix);
  g_prefix[0] = '\0';
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

/* A fresh prefix under $TMPDIR (or /tmp), outside the build and source trees. */
static void make_prefix(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_prefix, sizeof g_prefix, "%s/hg_client_install.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(g_prefix));
}

/* The server: operator OP, traders TA (account ACC_A) and TB (ACC_B), one
 * instrument. */
static void start_server(void) {
  server_made = 1;
  assert_int_equal(ch_two_trader_market(&g_srv, OP, TA, ACC_A, TB, ACC_B, 1), 0);
}

static void test_c_install(void **state) {
  (void)state;
  const char *cmake = g_argv[1], *build = g_argv[2], *libdir = g_argv[3];
  const char *readme = g_argv[4], *cc = g_argv[5], *src = g_argv[6];
  make_prefix();

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

  start_server();
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
  /* Over TLS, from HG_TLS and HG_CA as ops/run's banner sets them: a
   * second server with throwaway certificates. */
  char tdir[300];
  snprintf(tdir, sizeof tdir, "%s/tls", g_prefix);
  assert_int_equal(mkdir(tdir, 0700), 0);
  ts_server_t tls_srv;
  assert_int_equal(ts_server_create_tls(&tls_srv, tdir), 0);
  assert_int_equal(ts_server_add_key(&tls_srv, TA, HG_ROLE_TRADER, ACC_A, 1), 0);
  assert_int_equal(ts_server_run(&tls_srv), 0);
  snprintf(cmd, sizeof cmd, "HG_PORT=%u HG_KEY_ID=%u HG_SECRET=%s HG_TLS=1 HG_CA='%s/ca.pem' "
           "'%s/first_order'", (unsigned)tls_srv.port, TA, hex, tdir, g_prefix);
  int rc = cli_run(cmd, "1 buy 500 1", CLI_BOTH, &out);
  ts_server_stop(&tls_srv);
  if (rc != 0) fail_msg("first_order over TLS: exit %d: %s", rc, out);
  cli_expect(out, "logged in: account 100");
  free(out);
  /* A wrong secret: login refused, exit 1. */
  snprintf(cmd, sizeof cmd, "HG_PORT=%u HG_KEY_ID=%u HG_SECRET=00ff '%s/first_order'",
           (unsigned)g_srv.port, TA, g_prefix);
  assert_int_equal(cli_run(cmd, "1 buy 500 1", CLI_BOTH, &out), 1);
  cli_expect(out, "login: authentication failed");
  free(out);
}

static void test_python_install(void **state) {
  (void)state;
  const char *cmake = g_argv[1], *build = g_argv[2], *src = g_argv[6];
  const char *py = g_argv[7], *pkg = g_argv[8], *sitedir = g_argv[9], *script = g_argv[10];
  if (strcmp(py, "-") == 0) skip();
  make_prefix();
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' --install '%s' --component python --prefix '%s/cm'", cmake, build,
           g_prefix);
  free(sh_ok(cmd));
  /* pip builds in the directory it installs from: a copy, not the build
   * tree, without what an earlier pip run there left (build/, egg-info). */
  snprintf(cmd, sizeof cmd,
           "cp -r '%s' '%s/pkg' && cd '%s' && rm -rf pkg/build pkg/*.egg-info && "
           "'%s' -m pip install -q --no-build-isolation "
           "--no-index --no-deps --target '%s/pip' '%s/pkg'",
           pkg, g_prefix, g_prefix, py, g_prefix, g_prefix);
  free(sh_ok(cmd));

  start_server();
  char hex[65];
  ts_key_secret_hex(TA, hex);
  const char *where[] = {"cm/", "pip"};
  for (size_t i = 0; i < 2; i++) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s%s", g_prefix, where[i], i == 0 ? sitedir : "");
    /* -s: no user site directory; the working directory is the prefix. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && PYTHONPATH='%s' '%s' -s '%s' %u %u %u %u '%s' '%s' '%s'",
             g_prefix, dir, py, script, (unsigned)g_srv.port, TA, ACC_A, TB, dir, build, src);
    char *out = sh_ok(cmd);
    cli_expect(out, "python client install: all checks passed");
    free(out);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && PYTHONPATH='%s' '%s' -s -m hgclient --port %u --key-id %u --secret %s "
             "instruments",
             g_prefix, dir, py, (unsigned)g_srv.port, TA, hex);
    out = sh_ok(cmd);
    cli_expect(out, "B200.A.2027-01  A      2027-01  0.001");
    free(out);
  }
  /* The command line's market data: the snapshot, then a second of quiet. */
  snprintf(cmd, sizeof cmd,
           "cd '%s' && PYTHONPATH='%s/pip' HG_PORT=%u HG_KEY_ID=%u HG_SECRET=%s '%s' -s -m hgclient "
           "md --instrument 1 --idle 0.5",
           g_prefix, g_prefix, (unsigned)g_srv.port, TA, hex, py);
  char *out = sh_ok(cmd);
  cli_expect(out, "snapshot B200.A.2027-01 md_seq=");
  cli_expect(out, "bid - ask -");
  free(out);
}

int main(int argc, char **argv) {
  if (argc != 11) {
    fprintf(stderr,
            "usage: %s CMAKE BUILD_DIR LIBDIR README CC SOURCE_DIR PYTHON3|- PACKAGE|- "
            "SITEDIR|- SCRIPT|-\n",
            argv[0]);
    return 2;
  }
  g_argv = argv;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_c_install, teardown),
      cmocka_unit_test_teardown(test_python_install, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
