/*
 * libFuzzer target over the keys file parser (hg_gateway_key_line_parse in
 * gateway/server/keys.c, which hg_gateway_load_keys runs on each line). The
 * input is a keys file; it is cut into lines as the loader cuts it (fgets()
 * into a 512-byte buffer; a longer line only when the rest is comment),
 * each line NUL-terminated in an exact-size allocation (a read past it is
 * an ASan report). Checked: a verdict is 0
 * (a key), 1 (blank or comment) or HG_EPARSE; an accepted line has a known
 * role, a secret of 1..64 bytes, and is written strictly: every field the
 * parser read is plain decimal (ids) or hex digits (the secret), so a typo
 * never becomes a different key; and a round trip: the key written back as a
 * canonical line parses to the same key and secret.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/error.h"
#include "hourglass/gateway.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *role_name(uint32_t role) {
  switch (role) {
  case HG_ROLE_TRADER: return "trader";
  case HG_ROLE_MARKET_MAKER: return "market_maker";
  case HG_ROLE_RISK_VIEWER: return "risk_viewer";
  case HG_ROLE_OPERATOR: return "operator";
  default: abort();
  }
}

/* The line as given (before the parser cut it at '#'): its fields are
 * decimal, decimal, decimal and hex where the parser took them as such. */
static void strict_fields(const char *line) {
  char f[5][512];
  char extra;
  if (sscanf(line, "%511s %511s %511s %511s %511s %c", f[0], f[1], f[2], f[3], f[4], &extra) != 5)
    abort();
  static const int field[4] = {0, 2, 3, 4};
  for (int i = 0; i < 4; i++) {
    const char *s = f[field[i]];
    for (; *s != '\0'; s++)
      if (i < 3 ? !isdigit((unsigned char)*s) : !isxdigit((unsigned char)*s)) abort();
  }
}

static void one_line(const char *piece, size_t n) {
  char *line = malloc(n + 1);
  char *orig = malloc(n + 1);
  if (line == NULL || orig == NULL) abort();
  memcpy(line, piece, n);
  line[n] = '\0';
  memcpy(orig, line, n + 1);
  char *hash = strchr(orig, '#');
  if (hash != NULL) *hash = '\0'; /* what the parser reads */
  hg_gateway_key_t k;
  uint8_t sec[64];
  int rc = hg_gateway_key_line_parse(line, &k, sec);
  if (rc == 1 || rc == HG_EPARSE) {
    free(line);
    free(orig);
    return;
  }
  if (rc != 0) abort();
  if (k.secret != sec || k.secret_len == 0 || k.secret_len > 64) abort();
  strict_fields(orig);
  char canon[256];
  int cl = snprintf(canon, sizeof canon, "%" PRIu64 " %s %" PRIu32 " %" PRIu32 " ", k.key_id,
                    role_name(k.role), k.account, k.firm);
  for (size_t i = 0; i < k.secret_len; i++)
    cl += snprintf(canon + cl, sizeof canon - (size_t)cl, "%02x", sec[i]);
  snprintf(canon + cl, sizeof canon - (size_t)cl, " # again\n");
  hg_gateway_key_t k2;
  uint8_t sec2[64];
  if (hg_gateway_key_line_parse(canon, &k2, sec2) != 0) abort();
  if (k2.key_id != k.key_id || k2.role != k.role || k2.account != k.account ||
      k2.firm != k.firm || k2.secret_len != k.secret_len || memcmp(sec, sec2, k.secret_len) != 0)
    abort();
  free(line);
  free(orig);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = (const char *)data, *end = p + size;
  while (p < end) {
    /* fgets(buf, 512): up to 511 bytes, through the first '\n'. A NUL ends
     * the string the loader sees. */
    size_t n = 0;
    while (p + n < end && n < 511) {
      if (p[n++] == '\n') break;
    }
    const char *nul = memchr(p, '\0', n);
    size_t sl = nul ? (size_t)(nul - p) : n;
    size_t skip = n;
    if (p[n - 1] != '\n' && p + n < end) {
      /* Longer than the buffer: the rest must be comment, and is skipped. */
      if (memchr(p, '#', sl) == NULL) break; /* HG_EPARSE */
      const char *nl = memchr(p + n, '\n', (size_t)(end - p - n));
      skip = nl ? (size_t)(nl + 1 - p) : (size_t)(end - p);
    }
    one_line(p, sl);
    p += skip;
  }
  return 0;
}
