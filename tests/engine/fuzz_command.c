/*
 * libFuzzer target over journal record decoding (engine/command.c): the
 * input is one record's payload, as hg_journal hands it to recovery and
 * replay. Checked: hg_command_decode never crashes, leaks or reads outside
 * the record (the bytes are copied into an exact-size allocation), and on
 * failure returns HG_EPARSE or HG_ERANGE with *out zeroed; its fast path
 * agrees with the protobuf-c path (hg_command__decode_full: same verdict,
 * same command) and so does the replay variant on a zeroed command; and the
 * round trip: a decoded command encodes (fast encoder and protobuf-c alike,
 * same bytes), the encoding decodes to the same command, and encoding that
 * again gives the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "command_internal.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int is_zero(const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0) return 0;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *rec = malloc(size ? size : 1);
  if (rec == NULL) abort();
  memcpy(rec, data, size);
  hg_command_t c1, full, prefix, c2;
  int rc = hg_command_decode(rec, size, &c1);
  int rf = hg_command__decode_full(rec, size, &full);
  memset(&prefix, 0, sizeof prefix);
  int rp = hg_command__decode_prefix(rec, size, &prefix);
  free(rec);
  if (rc != rf || rc != rp) abort();
  if (rc != 0) {
    if (rc != HG_EPARSE && rc != HG_ERANGE) abort();
    if (!is_zero(&c1, sizeof c1) || !is_zero(&full, sizeof full)) abort();
    return 0;
  }
  if (memcmp(&c1, &full, sizeof c1) != 0 || memcmp(&c1, &prefix, sizeof c1) != 0) abort();
  uint8_t b1[HG_COMMAND_MAX_ENCODED], b2[HG_COMMAND_MAX_ENCODED], bf[HG_COMMAND_MAX_ENCODED];
  size_t l1 = 0, l2 = 0, lf = 0;
  if (hg_command_encode(&c1, b1, sizeof b1, &l1) != 0) abort();
  if (hg_command__encode_full(&c1, bf, sizeof bf, &lf) != 0) abort();
  if (l1 != lf || memcmp(b1, bf, l1) != 0) abort();
  if (hg_command_decode(b1, l1, &c2) != 0) abort();
  if (memcmp(&c1, &c2, sizeof c1) != 0) abort();
  if (hg_command_encode(&c2, b2, sizeof b2, &l2) != 0) abort();
  if (l1 != l2 || memcmp(b1, b2, l1) != 0) abort();
  return 0;
}
