/*
 * The market web page in a real browser. Starts hourglassd with the demo
 * market, waits until the demo has traded, loads http://.../ in headless
 * Chromium (Debian's package), and checks from the rendered DOM that the
 * page shows the demo's market: every listed month in the curve table with a
 * bid and an ask within a few ticks of what /api/v1/instruments says, and a
 * depth ladder with prices on both sides. Saves a screenshot as
 * web_page.png in the working directory (the build tree).
 *
 *   test_web_page HOURGLASSD
 * Skipped (exit 0 with a message) when /usr/bin/chromium is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon_util.h"

#define CHROMIUM "/usr/bin/chromium"
#define CHROMIUM_FLAGS                                                                     \
  "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "                   \
  "--disable-background-networking --disable-component-update --disable-sync "             \
  "--window-size=1280,1400 --virtual-time-budget=5000"

/* Counts occurrences of needle in hay. */
static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

/* The bid of instrument `symbol` in /api/v1/instruments JSON, USD (0 if none). */
static double json_bid(const char *json, const char *symbol) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"symbol\":\"%s\"", symbol);
  const char *p = strstr(json, pat);
  if (p == NULL) return 0;
  const char *b = strstr(p, "\"bid\":{\"price\":");
  const char *next = strstr(p + 1, "\"symbol\":");
  if (b == NULL || (next != NULL && b > next)) return 0;
  return atof(b + strlen("\"bid\":{\"price\":")) / 1000.0;
}

/* The bid cell of the curve-table row of `symbol` in the DOM, USD. The row is
 * <tr><td>SYMBOL</td><td>settle</td><td>BID × QTY</td>... */
static double dom_bid(const char *dom, const char *symbol) {
  char pat[64];
  snprintf(pat, sizeof pat, "<td>%s</td>", symbol);
  const char *p = strstr(dom, pat);
  if (p == NULL) return 0;
  p = strstr(p + strlen(pat), "<td>"); /* settle */
  if (p == NULL) return 0;
  p = strstr(p + 4, "<td>"); /* bid */
  return p == NULL ? 0 : atof(p + 4);
}

/* The settle cell of the curve-table row of `symbol`, USD (0 if empty). */
static double dom_settle(const char *dom, const char *symbol) {
  char pat[64];
  snprintf(pat, sizeof pat, "<td>%s</td>", symbol);
  const char *p = strstr(dom, pat);
  if (p == NULL) return 0;
  p = strstr(p + strlen(pat), "<td>");
  return p == NULL ? 0 : atof(p + 4);
}

/* The "dsp" of instrument `symbol` in /api/v1/instruments JSON, USD (0 if none). */
static double json_dsp(const char *json, const char *symbol) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"symbol\":\"%s\"", symbol);
  const char *p = strstr(json, pat);
  if (p == NULL) return 0;
  const char *b = strstr(p, "\"dsp\":");
  const char *next = strstr(p + 1, "\"symbol\":");
  if (b == NULL || (next != NULL && b > next)) return 0;
  return atof(b + strlen("\"dsp\":")) / 1000.0;
}

static void page_shows_the_demo_market(void **state) {
  (void)state;
  if (access(CHROMIUM, X_OK) != 0) {
    print_message("skipped: %s not installed (ops/setup installs it)\n", CHROMIUM);
    return;
  }
  char dir[256], data[300], log[300], shot[300];
  assert_non_null(du_tmpdir(dir, sizeof dir, "web"));
  snprintf(data, sizeof data, "data_dir=%s/var", dir);
  snprintf(log, sizeof log, "%s/daemon.log", dir);
  char *argv[] = {(char *)g_bin, "--demo", "-o", data, "-o", "listen.http=127.0.0.1:0",
                  "-o", "listen.order_entry=127.0.0.1:0", "-o",
                  "listen.market_data=127.0.0.1:0", "-o", "pipeline.inbound_capacity=4096", "-o",
                  "pipeline.outbound_capacity=16384", "-o", "pipeline.staging_capacity=16384",
                  "-o", "journal.segment_size=4M", "-o", "journal.batch_bytes=256K", "-o",
                  "limits.max_instruments=16", "-o",
                  "limits.max_accounts=64", NULL};
  pid_t pid = du_spawn(argv, log);
  char *l = du_wait_log(log, "msg=\"ready\"", 120);
  if (l == NULL) fail_msg("daemon not ready after 120 s");
  const char *h = strstr(l, "http msg=\"listening\" addr=127.0.0.1:");
  assert_non_null(h);
  int port = atoi(h + strlen("http msg=\"listening\" addr=127.0.0.1:"));
  free(l);

  /* The demo lists its months and starts quoting at once; wait for a trade. */
  char *ins = NULL;
  for (int i = 0; i < 300; i++) {
    free(ins);
    ins = du_get(port, "/api/v1/instruments");
    if (ins != NULL && strstr(ins, "\"trades\":0,") != NULL && count(ins, "\"trades\":0,") == 12) {
      du_sleep_ms(100);
      continue;
    }
    /* The demo's first daily cycle follows its first quotes. */
    if (ins != NULL && count(ins, "\"bid\":{") == 12 && count(ins, "\"dsp\":") == 12) break;
    du_sleep_ms(100);
  }
  assert_non_null(ins);
  assert_int_equal(count(ins, "\"symbol\":\"B200.A."), 12);

  char cmd[1024];
  snprintf(shot, sizeof shot, "web_page.png");
  snprintf(cmd, sizeof cmd,
           CHROMIUM " " CHROMIUM_FLAGS " --user-data-dir=%s/chr1 --screenshot=%s "
                    "http://127.0.0.1:%d/ >/dev/null 2>&1",
           dir, shot, port);
  assert_int_equal(du_system(cmd), 0);
  snprintf(cmd, sizeof cmd,
           CHROMIUM " " CHROMIUM_FLAGS " --user-data-dir=%s/chr2 --dump-dom "
                    "http://127.0.0.1:%d/ > %s/dom.html 2>/dev/null",
           dir, port, dir);
  assert_int_equal(du_system(cmd), 0);
  char path[300];
  snprintf(path, sizeof path, "%s/dom.html", dir);
  char *dom = du_read(path);
  assert_non_null(dom);
  free(ins);
  ins = du_get(port, "/api/v1/instruments");

  /* The page ran its script against the live exchange. */
  assert_non_null(strstr(dom, "data-ready=\"1\""));
  /* The curve: every month, each bid close to the exchange's (the makers
   * move a few ticks a step while the page loads). */
  assert_int_equal(count(dom, "<td>B200.A."), 12);
  const char *p = ins;
  for (int k = 0; k < 12; k++) {
    p = strstr(p, "\"symbol\":\"");
    assert_non_null(p);
    p += strlen("\"symbol\":\"");
    char sym[32];
    size_t n = strcspn(p, "\"");
    assert_true(n < sizeof sym);
    memcpy(sym, p, n);
    sym[n] = 0;
    double want = json_bid(ins, sym), got = dom_bid(dom, sym);
    assert_true(want > 1.0);
    if (got < want - 0.05 || got > want + 0.05)
      fail_msg("%s: page shows bid %.3f, exchange %.3f", sym, got, want);
    /* The settle column: the DSP of the demo's start-up cycle (the makers'
     * midpoint, near the bid), the same on the page as on the exchange
     * (only a 16:00 UTC cycle between the two reads could move it). */
    double dsp = json_dsp(ins, sym), shown = dom_settle(dom, sym);
    assert_true(dsp > want - 0.05 && dsp < want + 0.05);
    if (shown < dsp - 0.0005 || shown > dsp + 0.0005) fail_msg("%s: page shows settle %.3f, exchange %.3f", sym, shown, dsp);
  }
  /* The index history the demo publishes: finalized days and the last
   * three provisional ones, in the fixings table. */
  assert_true(count(dom, "<td>FINAL</td>") >= 10);
  assert_true(count(dom, "<td>PROVISIONAL</td>") >= 1);
  /* The index by name, not by the exchange's internal number. */
  assert_true(count(dom, "<td>IGX B200.A</td>") >= 10);
  assert_null(strstr(dom, "IGX #"));
  /* The ladder: price rows on both sides around a spread row. */
  assert_non_null(strstr(dom, "spread "));
  assert_true(count(dom, "<td class=\"ask\">") >= 8);
  assert_true(count(dom, "<td class=\"bid\">") >= 8);
  /* Public data only: no account of the demo appears. */
  assert_null(strstr(dom, "1001"));
  assert_null(strstr(dom, "2001"));
  free(dom);
  free(ins);
  assert_int_equal(du_stop(pid, SIGTERM, 60), 0);
  du_rm_rf(dir);
  print_message("screenshot: web_page.png\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_web_page HOURGLASSD\n");
    return 2;
  }
  g_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(page_shows_the_demo_market, du_kill_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
