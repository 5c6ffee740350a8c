/*
 * test_readme_tour.c - the quick starts as a new user follows them, taken
 * from the files themselves: README.md's "A short tour" (its sh blocks,
 * every line as printed) and the command lines and program of
 * gateway/python/README.md's "Use", run against `hourglassd --demo` set up
 * the way ops/run sets it up (ops/lib.sh's hg_demo_cert and hg_demo_keys:
 * TLS 1.3 with a self-signed certificate in var/tls/, the demo's keys in
 * var/demo-keys) in a directory laid out like a clone (var/, and
 * build/release/bin holding hgctl). The only thing the test adds is the
 * port (ephemeral; the README relies on the default 7700, which another
 * exchange on this machine may hold) and a bound on the commands that run
 * until Ctrl-C (ladder, executions --follow, dropcopy: three seconds, then
 * they must still be running). Each step must exit 0, `orders` must show the
 * order the step before placed, and the order above the offers must trade.
 *
 * Usage: test_readme_tour <hourglassd> <source tree> <python3 | -> <package dir | ->
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sys/stat.h>
#include <unistd.h>

#include "daemon_util.h"

static const char *g_bin, *g_src, *g_python, *g_pypkg;
static char g_root[512], g_log[600];
static int g_port;

/* The text between the line starting with `from` and the next line starting
 * with `until` (or the end), malloc'd. */
static char *section(const char *text, const char *from, const char *until) {
  const char *a = strstr(text, from);
  if (a == NULL) fail_msg("no '%s'", from);
  const char *b = strstr(a + strlen(from), until);
  size_t n = b != NULL ? (size_t)(b - a) : strlen(a);
  char *s = malloc(n + 1);
  assert_non_null(s);
  memcpy(s, a, n);
  s[n] = '\0';
  return s;
}

/* Appends every fenced block of language lang ("```sh") in text to out. */
static void blocks(const char *text, const char *lang, char *out, size_t cap) {
  char open[32];
  snprintf(open, sizeof open, "```%s\n", lang);
  for (const char *p = strstr(text, open); p != NULL; p = strstr(p, open)) {
    p += strlen(open);
    const char *e = strstr(p, "```");
    assert_non_null(e);
    size_t used = strlen(out);
    assert_true(used + (size_t)(e - p) + 1 < cap);
    memcpy(out + used, p, (size_t)(e - p));
    out[used + (size_t)(e - p)] = '\0';
    p = e + 3;
  }
}

/* Runs script with bash in the clone's directory; returns its output (stdout
 * and stderr), failing the test with it unless it exits 0. */
static char *run_script(const char *name, const char *script) {
  char path[700], cmd[2400];
  snprintf(path, sizeof path, "%s/%s", g_root, name);
  assert_int_equal(du_write_file(path, script), 0);
  snprintf(path, sizeof path, "%s/%s.out", g_root, name);
  snprintf(cmd, sizeof cmd, "cd '%s' && bash '%s/%s' >'%s' 2>&1", g_root, g_root, name, path);
  int rc = du_system(cmd);
  char *out = du_read(path);
  if (rc != 0) {
    fprintf(stderr, "%s\n", out); /* whole: cmocka's message is short */
    fail_msg("%s exited %d (its output above)", name, rc);
  }
  return out;
}

/* The environment a fresh terminal has: none of the client's variables,
 * but the daemon's port; and the commands that run until Ctrl-C bounded. */
static void prelude(char *out, size_t cap) {
  snprintf(out, cap,
           "set -e\n"
           "unset HG_HOST HG_TLS HG_CA HG_TLS_NAME HG_KEY_ID HG_SECRET HG_NODES\n"
           "export HG_PORT=%d\n"
           "hgctl() {\n"
           "  echo \"== hgctl $*\"\n"
           "  case \" $* \" in\n"
           "  ' ladder '*|*' --follow '*|' dropcopy '*)\n"
           "    local rc=0; timeout 3 hgctl \"$@\" || rc=$?; [ $rc -eq 124 ] ;;\n"
           "  *) command hgctl \"$@\" ;;\n"
           "  esac\n"
           "}\n",
           g_port);
}

/* Appends printf-style text to the script in buf (cap bytes). */
static void script_add(char *buf, size_t cap, const char *fmt, ...) {
  size_t n = strlen(buf);
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + n, cap - n, fmt, ap);
  va_end(ap);
  assert_true(k >= 0 && (size_t)k < cap - n);
}

static int setup(void **state) {
  (void)state;
  assert_non_null(du_tmpdir(g_root, sizeof g_root, "tour"));
  char cmd[4096], bindir[512];
  snprintf(bindir, sizeof bindir, "%s", g_bin);
  *strrchr(bindir, '/') = '\0';
  /* ops/run's own set-up of the certificate and the keys. */
  snprintf(cmd, sizeof cmd,
           "bash -c 'source \"%s/ops/lib.sh\" && hg_demo_cert \"%s/var/tls\" 2>/dev/null && "
           "hg_demo_keys \"%s/var/demo-keys\"' && mkdir -p '%s/build/release' && "
           "ln -s '%s' '%s/build/release/bin'",
           g_src, g_root, g_root, g_root, bindir, g_root);
  assert_int_equal(du_system(cmd), 0);
  char data[700], keys[700], cert[700], key[700];
  snprintf(g_log, sizeof g_log, "%s/d.log", g_root);
  snprintf(data, sizeof data, "data_dir=%s/var", g_root);
  snprintf(keys, sizeof keys, "gateway.keys_file=%s/var/demo-keys", g_root);
  snprintf(cert, sizeof cert, "tls.cert=%s/var/tls/demo.pem", g_root);
  snprintf(key, sizeof key, "tls.key=%s/var/tls/demo.key", g_root);
  char *argv[] = {(char *)g_bin, "--demo", "-o", data, "-o", keys, "-o", cert, "-o", key,
                  "-o", "listen.http=127.0.0.1:0", "-o", "listen.order_entry=127.0.0.1:0",
                  "-o", "pipeline.inbound_capacity=4096", "-o", "pipeline.outbound_capacity=16384",
                  "-o", "pipeline.staging_capacity=16384", "-o", "journal.segment_size=4M", "-o",
                  "journal.batch_bytes=256K", "-o", "limits.max_instruments=16", "-o",
                  "limits.max_accounts=64", NULL};
  du_spawn(argv, g_log);
  char *b = du_wait_log(g_log, "Then: hgctl instruments", 120);
  if (b == NULL) fail_msg("no demo banner after 120 s:\n%s", du_read(g_log));
  g_port = du_listen_port(b, "gateway");
  assert_true(g_port > 0);
  free(b);
  /* The makers' first quotes are in the book before the tour starts. */
  char script[2048];
  prelude(script, sizeof script);
  script_add(script, sizeof script,
           "export PATH=$PWD/build/release/bin:$PATH HG_TLS=1 HG_CA=$PWD/var/tls/demo.pem\n"
           "export HG_KEY_ID=3001 HG_SECRET=$(awk '$1==3001{print $5}' var/demo-keys)\n"
           "for i in $(seq 240); do\n"
           "  command hgctl ladder B200.A.2027-03 --once --depth 1 | grep -q '[0-9]' && exit 0\n"
           "  sleep 0.5\n"
           "done\n"
           "exit 1\n");
  free(run_script("wait_quotes.sh", script));
  return 0;
}

static int teardown(void **state) {
  du_kill_all(state);
  du_rm_rf(g_root);
  return 0;
}

/* The part of out from the marker line "== hgctl <what>" to the next marker. */
static char *step_output(const char *out, const char *what) {
  char marker[200];
  snprintf(marker, sizeof marker, "== hgctl %s\n", what);
  return section(out, marker, "\n== hgctl ");
}

/* README.md's tour, both of its sh blocks, as printed. */
static void readme_tour_runs_as_printed(void **state) {
  (void)state;
  char path[600];
  snprintf(path, sizeof path, "%s/README.md", g_src);
  char *readme = du_read(path);
  char *tour = section(readme, "## A short tour", "\n## ");
  char *sub = strstr(tour, "\n### "); /* its subsections are not the tour */
  if (sub != NULL) *sub = '\0';
  static char script[16384];
  prelude(script, sizeof script);
  blocks(tour, "sh", script, sizeof script);
  char *out = run_script("tour.sh", script);
  /* The order that rests is in `orders`; the one above the offers trades. */
  char *orders = step_output(out, "orders");
  if (strstr(orders, "B200.A.2027-03") == NULL || strstr(orders, "3.300") == NULL)
    fail_msg("orders does not show the resting order:\n%s", orders);
  free(orders);
  char *trade = step_output(
      out, "order new --instrument B200.A.2027-03 --side buy --qty 2 --price 3.500");
  if (strstr(trade, "FILL") == NULL) fail_msg("the order above the offers did not trade:\n%s", trade);
  free(trade);
  char *pos = step_output(out, "positions");
  if (strstr(pos, "B200.A.2027-03") == NULL) fail_msg("no position after the trade:\n%s", pos);
  free(pos);
  free(out);
  free(tour);
  free(readme);
}

/* The indented lines of text that start with prefix, one per line,
 * appended to out. */
static void indented_lines(const char *text, const char *prefix, char *out, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\n    %s", prefix);
  for (const char *p = strstr(text, pat); p != NULL; p = strstr(p, pat)) {
    p += 5;
    const char *e = strchr(p, '\n');
    assert_non_null(e);
    size_t used = strlen(out);
    assert_true(used + (size_t)(e - p) + 2 < cap);
    memcpy(out + used, p, (size_t)(e - p) + 1);
    out[used + (size_t)(e - p) + 1] = '\0';
  }
}

/* The terminal of the tour (its exports) with python3 the interpreter that
 * has Debian's protobuf and the built package on its path, as after the
 * README's venv install. */
static void python_prelude(char *out, size_t cap) {
  prelude(out, cap);
  script_add(out, cap,
           "export PATH=$PWD/build/release/bin:$PATH HG_TLS=1 HG_CA=$PWD/var/tls/demo.pem\n"
           "export HG_KEY_ID=3001 HG_SECRET=$(awk '$1==3001{print $5}' var/demo-keys)\n"
           "export PYTHONPATH='%s'\n"
           "python3() { echo \"== python3 $*\"; '%s' -s \"$@\"; }\n",
           g_pypkg, g_python);
}

/* gateway/python/README.md's "Use": its program and its command lines. */
static void python_readme_runs_as_printed(void **state) {
  (void)state;
  if (strcmp(g_python, "-") == 0) skip();
  char path[600];
  snprintf(path, sizeof path, "%s/gateway/python/README.md", g_src);
  char *readme = du_read(path);
  char *use = section(readme, "## Use", "\n## ");
  static char prog[8192], script[16384];
  prog[0] = '\0';
  blocks(use, "python", prog, sizeof prog);
  assert_true(strlen(prog) > 0);
  char ppath[700];
  snprintf(ppath, sizeof ppath, "%s/use.py", g_root);
  assert_int_equal(du_write_file(ppath, prog), 0);
  python_prelude(script, sizeof script);
  script_add(script, sizeof script, "python3 use.py\n");
  indented_lines(use, "python3 -m hgclient ", script, sizeof script);
  char *out = run_script("python.sh", script);
  /* The program: symbols and USD, the order answered, the positions. */
  const char *want[] = {"B200.A.2027-01 0.001", "new B200.A.2027-03 3.300 1 1",
                        "'cash_usd': Decimal('1000000.00')",
                        /* the command lines: a table, an order, CSV, the book in USD */
                        "1   B200.A.2027-01  A      2027-01  0.001",
                        "NEW B200.A.2027-03 order_id=", "price=3.300 qty=3 leaves=3",
                        "account,symbol,net,bought,sold,avg_price,settle_usd,pnl_usd\n",
                        "snapshot B200.A.2027-03 md_seq="};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (strstr(out, want[i]) == NULL) fail_msg("no '%s' in:\n%s", want[i], out);
  assert_null(strstr(out, "exec_type:")); /* no protobuf text */
  free(out);
  free(use);
  free(readme);
}

/* The Python command line's errors: one line on stderr and a non-zero exit
 * status, never a traceback. */
static void python_errors_are_one_line(void **state) {
  (void)state;
  if (strcmp(g_python, "-") == 0) skip();
  static char script[8192];
  python_prelude(script, sizeof script);
  script_add(script, sizeof script,
           "one() { local want=$1; shift; local rc=0; \"$@\" 2>err >/dev/null || rc=$?\n"
           "  cat err; [ $rc -eq $want ] && [ $(wc -l <err) -eq 1 ] && ! grep -q Traceback err; }\n"
           "one 1 env HG_SECRET=00ff '%s' -s -m hgclient positions\n"
           "one 1 env HG_TLS= HG_CA= '%s' -s -m hgclient instruments\n"
           "one 2 '%s' -s -m hgclient order --instrument B200.A.2027-03 --side buy --qty 1 "
           "--price 3420\n"
           "one 2 '%s' -s -m hgclient order --instrument B200.A.2027-03 --side buy --qty 1 "
           "--price 3.4205\n"
           "one 1 '%s' -s -m hgclient order --instrument B200.A.2099-01 --side buy --qty 1 "
           "--price 3.4\n",
           g_python, g_python, g_python, g_python, g_python);
  char *out = run_script("pyerr.sh", script);
  const char *want[] = {
      "hgclient positions: login refused: authentication failed (unknown key or wrong secret)",
      "connection closed by the server (if the port speaks TLS: --tls --ca FILE, or HG_TLS=1 "
      "HG_CA=FILE)",
      "price '3420' is 3420 USD per GPU-hour: did you mean 3.420?",
      "price '3.4205' is not on the tick: prices are on a tick of 0.001 USD per GPU-hour",
      "no instrument 'B200.A.2099-01'"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (strstr(out, want[i]) == NULL) fail_msg("no '%s' in:\n%s", want[i], out);
  free(out);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s HOURGLASSD SOURCE_TREE PYTHON3|- PACKAGE_DIR|-\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  g_src = argv[2];
  g_python = argv[3];
  g_pypkg = argv[4];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(readme_tour_runs_as_printed),
      cmocka_unit_test(python_readme_runs_as_printed),
      cmocka_unit_test(python_errors_are_one_line),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
