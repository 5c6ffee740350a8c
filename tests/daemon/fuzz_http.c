/*
 * libFuzzer target over the daemon's HTTP request parser (daemon/http.c):
 * the input is what a client sends on one connection (after a first byte
 * that sets the server's keep-alive setting). Heads are cut as the server
 * cuts them (hg_http_head_len; a head holding a NUL is refused before
 * parsing) and each is copied into an exact-size allocation, so a read past
 * it is an ASan report. Checked: a verdict is 0, 400 or 405 with a message
 * for the refusals; an accepted request's target is printable ASCII starting
 * with '/', its query lies inside it; keep-alive is never granted when the
 * server has it off; and a round trip: the accepted path and query written
 * as a canonical request (HTTP/1.1, Connection: close or keep-alive) parse
 * to the same path, query and keep-alive.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const hg_http_request_t *r, int keepalive) {
  if (r->msg != NULL || r->target[0] != '/') abort();
  size_t tl = strnlen(r->target, sizeof r->target);
  if (tl == sizeof r->target) abort();
  for (size_t i = 0; i < tl; i++)
    if ((unsigned char)r->target[i] <= 0x20 || (unsigned char)r->target[i] >= 0x7f ||
        r->target[i] == '?')
      abort();
  if (r->query[0] != '\0' && (r->query <= r->target || r->query >= r->target + sizeof r->target))
    abort();
  if (r->keep && !keepalive) abort();
}

static void round_trip(const hg_http_request_t *r, int keepalive) {
  char req[2200];
  int n = snprintf(req, sizeof req, "GET %s%s%s HTTP/1.1\r\nHost: x\r\nConnection: %s\r\n\r\n",
                   r->target, r->query[0] ? "?" : "", r->query, r->keep ? "keep-alive" : "close");
  if (n < 0 || (size_t)n >= sizeof req) abort();
  size_t hlen = hg_http_head_len(req, (size_t)n);
  if (hlen != (size_t)n) abort();
  hg_http_request_t again;
  hg_http_parse_request(req, hlen, keepalive, &again);
  if (again.status != 0 || strcmp(again.target, r->target) != 0 ||
      strcmp(again.query, r->query) != 0 || again.keep != r->keep)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int keepalive = data[0] & 1;
  data++;
  size--;
  size_t off = 0;
  while (off < size) {
    size_t hlen = hg_http_head_len((const char *)data + off, size - off);
    if (hlen == 0) break; /* the server waits for more (or answers 431) */
    if (hlen > size - off) abort();
    if (memchr(data + off, '\0', hlen) != NULL) break; /* 400 before parsing; closes */
    char *head = malloc(hlen);
    if (head == NULL) abort();
    memcpy(head, data + off, hlen);
    off += hlen;
    hg_http_request_t r;
    hg_http_parse_request(head, hlen, keepalive, &r);
    free(head);
    if (r.status != 0) {
      if ((r.status != 400 && r.status != 405) || r.msg == NULL) abort();
      break; /* a refusal closes the connection */
    }
    check_accepted(&r, keepalive);
    round_trip(&r, keepalive);
    if (!r.keep) break;
  }
  return 0;
}
