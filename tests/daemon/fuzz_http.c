/*
 * libFuzzer target over the market API's handling of what a client puts in
 * a URL (daemon/market_api.c, hg_http_query_get): the input's first byte
 * picks an endpoint (or, past the list, the input's first line is the path),
 * the rest is the query string, copied into an exact-size allocation so a
 * read past it is an ASan report. The view is seeded with two contracts
 * (market_fixture.h). Checked: the status is 200, 400 or 404; the body is
 * one line of JSON (strings closed, brackets balanced, ending in "}\n");
 * a 200 for book/tob/trades names an instrument the query names, by id or
 * symbol, and the same query with that value as the numeric id gets the
 * same body; hg_http_query_get's value lies in the query after "name=",
 * holds no '&' and fits the buffer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "market_api.h"
#include "market_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hg_mdview_t *g_view;

/* One line of JSON: strings closed, brackets balanced, "}\n" at the end. */
static void check_json(const char *b, size_t n) {
  if (n < 3 || b[0] != '{' || b[n - 2] != '}' || b[n - 1] != '\n') abort();
  int depth = 0, in_str = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    char c = b[i];
    if ((unsigned char)c < 0x20) abort();
    if (in_str) {
      if (c == '\\') i++;
      else if (c == '"') in_str = 0;
      continue;
    }
    if (c == '"') in_str = 1;
    else if (c == '{' || c == '[') depth++;
    else if (c == '}' || c == ']') {
      if (--depth < 0) abort();
    }
  }
  if (in_str || depth != 0) abort();
}

static void check_query_get(const char *query) {
  static const char *names[] = {"instrument", "index", "day", "a"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    char v[16];
    if (hg_http_query_get(query, names[k], v, sizeof v) != 0) continue;
    size_t vl = strnlen(v, sizeof v);
    if (vl == 0 || vl == sizeof v || strchr(v, '&') != NULL) abort();
    char pat[40];
    snprintf(pat, sizeof pat, "%s=%s", names[k], v);
    if (strstr(query, pat) == NULL) abort();
  }
}

static int answer(const char *path, const char *query, hg_http_response_t *r) {
  *r = (hg_http_response_t){200, "text/plain; charset=utf-8", {0}};
  hg_market_api(g_view, path, query, r);
  if (r->body.oom) abort();
  if (r->status != 200 && r->status != 400 && r->status != 404) abort();
  check_json(r->body.p, r->body.len);
  return r->status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *paths[] = {"/api/v1/book",    "/api/v1/tob",
                                "/api/v1/trades",  "/api/v1/instruments",
                                "/api/v1/fixings", "/api/v1/fixings/receipt"};
  enum { NPATHS = sizeof paths / sizeof paths[0] };
  if (g_view == NULL && (g_view = market_fixture()) == NULL) abort();
  if (size == 0) return 0;
  char path[256];
  size_t pick = data[0];
  data++, size--;
  if (pick < 3 * NPATHS) {
    snprintf(path, sizeof path, "%s", paths[pick % NPATHS]);
  } else { /* the path from the input's first line */
    const uint8_t *nl = memchr(data, '\n', size);
    size_t pl = nl ? (size_t)(nl - data) : size;
    if (pl >= sizeof path || memchr(data, '\0', pl) != NULL) return 0;
    memcpy(path, data, pl);
    path[pl] = '\0';
    if (nl == NULL) return 0;
    data += pl + 1, size -= pl + 1;
  }
  if (memchr(data, '\0', size) != NULL) return 0;
  char *query = malloc(size + 1);
  if (query == NULL) abort();
  memcpy(query, data, size);
  query[size] = '\0';
  check_query_get(query);
  hg_http_response_t r;
  int st = answer(path, query, &r);
  int per_instrument = strcmp(path, paths[0]) == 0 || strcmp(path, paths[1]) == 0 ||
                       strcmp(path, paths[2]) == 0;
  if (st == 200 && per_instrument) {
    char v[32], id[40];
    if (hg_http_query_get(query, "instrument", v, sizeof v) != 0) abort();
    const char *ip = strstr(r.body.p, "{\"instrument\":");
    if (ip != r.body.p) abort();
    unsigned n = (unsigned)strtoul(ip + 14, NULL, 10);
    if (n != 1 && n != 7) abort();
    /* The same request by numeric id gets the same answer. */
    snprintf(id, sizeof id, "instrument=%u", n);
    hg_http_response_t again;
    if (answer(path, id, &again) != 200 || strcmp(again.body.p, r.body.p) != 0) abort();
    hg_sbuf_free(&again.body);
  }
  hg_sbuf_free(&r.body);
  free(query);
  return 0;
}
