/* The public market API (daemon/market_api.c) on a seeded view: instruments
 * by id and by contract symbol, the refusals, the stream's snapshot and
 * change events, candles and settlements, and the OpenAPI description the
 * daemon serves (daemon/web/openapi.json) against the API's paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "market_api.h"
#include "market_fixture.h"
#include "web_assets.h"

static hg_mdview_t *g_view;

/* GET path?query; the status, with the body in *body (caller frees). */
static int get(const char *path, const char *query, char **body) {
  hg_http_response_t r = {200, "text/plain; charset=utf-8", {0}};
  hg_market_api(g_view, path, query, &r);
  assert_false(r.body.oom);
  assert_string_equal(r.content_type, "application/json");
  *body = r.body.p;
  return r.status;
}

static void instruments_by_id_and_symbol(void **state) {
  (void)state;
  static const char *paths[] = {"/api/v1/book", "/api/v1/tob", "/api/v1/trades"};
  for (size_t i = 0; i < 3; i++) {
    char *by_id, *by_sym;
    assert_int_equal(get(paths[i], "instrument=7", &by_id), 200);
    assert_int_equal(get(paths[i], "x=1&instrument=H100.B.2027-04&y", &by_sym), 200);
    assert_string_equal(by_id, by_sym); /* the same answer */
    assert_non_null(strstr(by_id, "{\"instrument\":7,"));
    free(by_id);
    free(by_sym);
  }
  char *b;
  assert_int_equal(get("/api/v1/book", "instrument=B200.A.2027-03", &b), 200);
  assert_non_null(strstr(b, "\"symbol\":\"B200.A.2027-03\""));
  free(b);
}

static void refusals(void **state) {
  (void)state;
  static const struct {
    const char *path, *query;
    int status;
  } cases[] = {
      {"/api/v1/book", "", 400},
      {"/api/v1/book", "instrument=", 400},
      {"/api/v1/book", "instrument=0", 400},
      {"/api/v1/book", "instrument=4294967296", 400},
      {"/api/v1/book", "instrument=7x", 400},
      {"/api/v1/book", "instrument=B200.A.2027-13", 400},   /* month 13 */
      {"/api/v1/book", "instrument=b200..2027-03", 400},    /* empty grade */
      {"/api/v1/book", "instrument=B200.A.2027-04", 404},   /* well-formed, not listed */
      {"/api/v1/tob", "instrument=2", 404},
      {"/api/v1/trades", "instrument=H100.B.2027-04x", 400},
      {"/api/v1/nothing", "instrument=1", 404},
      {"/api/v1/nothing", "", 404}, /* an unknown path before any query check */
      {"/api/v1/bookx", "instrument=", 404},
      {"/api/v1/fixings/receipt", "index=B200.A", 400},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *b;
    int st = get(cases[i].path, cases[i].query, &b);
    if (st != cases[i].status) fail_msg("%s?%s: %d %s", cases[i].path, cases[i].query, st, b);
    assert_non_null(strstr(b, "{\"error\":"));
    free(b);
  }
}

/* The event text of each frame hg_http_stream_event wrote to out, with
 * its topic, into ev[] (up to 8); how many. */
typedef struct frame_text {
  uint32_t topic;
  char *text;
} frame_text_t;

static size_t frames(const hg_sbuf_t *out, frame_text_t *ev) {
  size_t n = 0;
  for (size_t at = 0; at + 8 <= out->len && n < 8; n++) {
    uint32_t hdr[2];
    memcpy(hdr, out->p + at, 8);
    at += 8;
    assert_true(hdr[1] <= out->len - at);
    ev[n].topic = hdr[0];
    ev[n].text = strndup(out->p + at, hdr[1]);
    at += hdr[1];
  }
  return n;
}

/* A watcher's snapshot is the state the stream sent; the events after it
 * carry only what changed (nothing when nothing did); ?book= picks the
 * book, an unknown one is refused. */
static void stream_snapshot_then_changes(void **state) {
  (void)state;
  hg_market_stream_t *st;
  assert_int_equal(hg_market_stream_create(g_view, &st), 0);
  hg_sbuf_t out = {0};
  hg_market_stream(st, &out); /* the first: every instrument is new */
  frame_text_t ev[8];
  size_t n = frames(&out, ev);
  assert_int_equal(n, 1); /* the delta; the books are empty: no book event */
  assert_int_equal(ev[0].topic, 0);
  static const char delta[] = "event: delta\ndata: {\"instruments\":[{\"id\":1,";
  assert_true(strncmp(ev[0].text, delta, sizeof delta - 1) == 0);
  assert_non_null(strstr(ev[0].text, "\"last_trading_day\":\"2027-03-31\""));
  assert_null(strstr(ev[0].text, "\"seq\":"));
  free(ev[0].text);
  hg_sbuf_free(&out);
  hg_market_stream(st, &out); /* nothing changed */
  assert_int_equal(out.len, 0);
  uint32_t topic = 99;
  assert_int_equal(hg_market_stream_snapshot(st, "book=H100.B.2027-04", &out, &topic), 0);
  assert_int_equal(topic, 7);
  static const char snap[] = "event: snapshot\ndata: {\"instruments\":[{\"id\":1,";
  assert_true(strncmp(out.p, snap, sizeof snap - 1) == 0);
  assert_non_null(strstr(out.p, "{\"id\":7,\"symbol\":\"H100.B.2027-04\""));
  assert_non_null(
      strstr(out.p, "\"book\":{\"instrument\":7,\"bids\":[],\"asks\":[],\"trades\":[]}"));
  assert_string_equal(out.p + out.len - 3, "}\n\n");
  /* one data line: no newline inside the JSON */
  const char *data = strstr(out.p, "data: ");
  assert_ptr_equal(strchr(data, '\n'), out.p + out.len - 2);
  hg_sbuf_free(&out);
  assert_int_equal(hg_market_stream_snapshot(st, "", &out, &topic), 0);
  assert_int_equal(topic, 0);
  assert_non_null(strstr(out.p, "\"book\":null}"));
  hg_sbuf_free(&out);
  assert_int_equal(hg_market_stream_snapshot(st, "book=B200.A.2027-04", &out, &topic), 404);
  hg_sbuf_free(&out);
  assert_int_equal(hg_market_stream_snapshot(st, "book=x", &out, &topic), 400);
  hg_sbuf_free(&out);
  hg_market_stream_destroy(st);
}

/* Candles and settlements: known instruments answer (empty before any
 * trade or cycle), the interval is checked. */
static void history_endpoints(void **state) {
  (void)state;
  char *b;
  assert_int_equal(get("/api/v1/candles", "instrument=1&interval=1h", &b), 200);
  assert_string_equal(b, "{\"instrument\":1,\"interval_s\":3600,\"candles\":[]}\n");
  free(b);
  assert_int_equal(get("/api/v1/candles", "instrument=1&interval=5m", &b), 400);
  free(b);
  assert_int_equal(get("/api/v1/candles", "instrument=1", &b), 400);
  free(b);
  assert_int_equal(get("/api/v1/candles", "instrument=2&interval=1m", &b), 404);
  free(b);
  assert_int_equal(get("/api/v1/settlements", "instrument=H100.B.2027-04", &b), 200);
  assert_string_equal(b, "{\"instrument\":7,\"settlements\":[]}\n");
  free(b);
}

/* Paths the daemon answers itself, not hg_market_api (daemon/http_api.c);
 * test_web_page asks the running daemon for them. */
static const char *const daemon_paths[] = {"/health", "/metrics", "/api/v1/stream",
                                           "/api/v1/openapi.json"};

static int is_daemon_path(const char *p) {
  for (size_t i = 0; i < sizeof daemon_paths / sizeof daemon_paths[0]; i++)
    if (strcmp(p, daemon_paths[i]) == 0) return 1;
  return 0;
}

/* The served description, as "path<TAB>query from the examples<TAB>
 * statuses" lines (python3's json module reads it). */
static char *describe_openapi(void) {
  const hg_web_asset_t *a = hg_web_asset_find("/openapi.json");
  assert_non_null(a);
  char path[] = "/tmp/hg_openapi_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, a->data, a->len), (ssize_t)a->len);
  close(fd);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys\n"
           "d = json.load(open(sys.argv[1]))\n"
           "assert d[\"openapi\"].startswith(\"3.\")\n"
           "for p, o in d[\"paths\"].items():\n"
           "  g = o[\"get\"]\n"
           "  q = \"&\".join(x[\"name\"] + \"=\" + x[\"example\"] for x in g[\"parameters\"] if "
           "x[\"required\"])\n"
           "  print(p, q, \",\".join(g[\"responses\"]), sep=\"\\t\")' %s",
           path);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  hg_sbuf_t out = {0};
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) hg_sbuf_puts(&out, line);
  assert_int_equal(pclose(f), 0);
  unlink(path);
  assert_non_null(out.p);
  return out.p;
}

/* Every path the description lists answers with a status it documents
 * (hg_market_api's here, with the description's examples; the daemon's
 * own in test_web_page), and every path the API answers is listed. */
static void openapi_matches_the_server(void **state) {
  (void)state;
  if (access("/usr/bin/python3", X_OK) != 0) skip();
  char *lines = describe_openapi();
  size_t listed = 0;
  for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l != NULL;
       l = strtok_r(NULL, "\n", &save), listed++) {
    char *q = strchr(l, '\t');
    assert_non_null(q);
    *q++ = '\0';
    char *codes = strchr(q, '\t');
    assert_non_null(codes);
    *codes++ = '\0';
    if (is_daemon_path(l)) continue;
    size_t k = 0;
    while (hg_market_api_paths[k] != NULL && strcmp(hg_market_api_paths[k], l) != 0) k++;
    if (hg_market_api_paths[k] == NULL) fail_msg("%s is listed but not answered", l);
    char *b;
    int st = get(l, q, &b);
    char code[8];
    snprintf(code, sizeof code, "%d", st);
    if (strstr(codes, code) == NULL) fail_msg("%s?%s answers %d, not in %s: %s", l, q, st, codes, b);
    free(b);
  }
  free(lines);
  lines = describe_openapi();
  for (size_t k = 0; hg_market_api_paths[k] != NULL; k++) {
    char want[128];
    snprintf(want, sizeof want, "%s\t", hg_market_api_paths[k]);
    if (strstr(lines, want) == NULL)
      fail_msg("%s is answered but not listed", hg_market_api_paths[k]);
  }
  for (size_t k = 0; k < sizeof daemon_paths / sizeof daemon_paths[0]; k++) {
    char want[128];
    snprintf(want, sizeof want, "%s\t", daemon_paths[k]);
    if (strstr(lines, want) == NULL) fail_msg("%s is answered but not listed", daemon_paths[k]);
  }
  free(lines);
  assert_true(listed >= 12);
}

static void query_get(void **state) {
  (void)state;
  char v[8];
  assert_int_equal(hg_http_query_get("a=1&ab=22&b=3", "ab", v, sizeof v), 0);
  assert_string_equal(v, "22");
  assert_int_equal(hg_http_query_get("xa=1&a=2", "a", v, sizeof v), 0);
  assert_string_equal(v, "2");
  assert_int_equal(hg_http_query_get("a=1&a=2", "a", v, sizeof v), 0);
  assert_string_equal(v, "1");
  assert_int_equal(hg_http_query_get("a=&b=1", "a", v, sizeof v), -1);
  assert_int_equal(hg_http_query_get("a", "a", v, sizeof v), -1);
  assert_int_equal(hg_http_query_get("a=12345678", "a", v, sizeof v), -1);
  assert_int_equal(hg_http_query_get("", "a", v, sizeof v), -1);
}

int main(void) {
  g_view = market_fixture();
  if (g_view == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(instruments_by_id_and_symbol),
      cmocka_unit_test(refusals),
      cmocka_unit_test(stream_snapshot_then_changes),
      cmocka_unit_test(history_endpoints),
      cmocka_unit_test(openapi_matches_the_server),
      cmocka_unit_test(query_get),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hg_mdview_destroy(g_view);
  return rc;
}
