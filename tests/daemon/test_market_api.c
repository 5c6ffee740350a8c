/* The public market API (daemon/market_api.c) on a seeded view: instruments
 * by id and by contract symbol, the refusals, and the stream's events (one
 * when something changed, none otherwise). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "market_api.h"
#include "market_fixture.h"

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

static void stream_sends_changes_once(void **state) {
  (void)state;
  hg_market_stream_t *st = calloc(1, sizeof *st);
  hg_sbuf_t out = {0};
  hg_market_stream(g_view, st, &out);
  assert_non_null(out.p);
  assert_true(strncmp(out.p, "event: market\ndata: {\"instruments\":[{\"id\":1,", 44) == 0);
  assert_non_null(strstr(out.p, "\"books\":[{\"instrument\":1,"));
  assert_non_null(strstr(out.p, "{\"instrument\":7,\"symbol\":\"H100.B.2027-04\""));
  assert_non_null(strstr(out.p, "\"trades\":[]}"));
  assert_string_equal(out.p + out.len - 4, "]}\n\n");
  /* one data line: no newline inside the JSON */
  const char *data = strstr(out.p, "data: ");
  assert_ptr_equal(strchr(data, '\n'), out.p + out.len - 2);
  hg_sbuf_free(&out);
  hg_market_stream(g_view, st, &out); /* nothing changed */
  assert_int_equal(out.len, 0);
  hg_sbuf_free(&out);
  free(st);
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
      cmocka_unit_test(stream_sends_changes_once),
      cmocka_unit_test(query_get),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  hg_mdview_destroy(g_view);
  return rc;
}
