/*
 * libFuzzer target over snapshot restore (hg_exchange_restore, engine/
 * exchange.c and the clearing's part in settlement/clearing_snap.c). The
 * first input byte selects the mode:
 *  - even: the rest is a snapshot blob from anywhere (a damaged or crafted
 *    state file). Restore never crashes, leaks or reads outside the blob
 *    (copied into an exact-size allocation); it returns 0 or a documented
 *    error and leaves the exchange empty on failure (a second restore of
 *    the same blob then gives the same verdict). A blob it accepts
 *    serializes back to a blob that restores and serializes to itself, and
 *    a blob in the current version serializes back to exactly its own bytes
 *    (the serialization is canonical).
 *  - odd: the rest drives a small market (two contracts, four accounts;
 *    each 4 bytes an order, a cancel, a replace, a mass cancel or a
 *    halt/resume) to a state, which is serialized and restored into a fresh
 *    exchange: restore then serialize gives the same bytes and hash, and
 *    the same next command applied to both leaves them with equal hashes.
 * The seeds hold blobs of such states (even) and command streams (odd).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hourglass/clearing.h"
#include "hourglass/error.h"
#include "hourglass/exchange.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

static hg_exchange_t *make(void) {
  hg_clearing_config_t cc;
  hg_clearing_config_default(&cc);
  cc.band_bps = 0; /* any price passes: the state, not risk, is under test */
  cc.im_rate_bps = 0;
  cc.im_rate_delivery_bps = 0;
  cc.max_positions = 256;
  cc.ledger_initial = 64;
  cc.max_firms = 16;
  cc.max_groups = 8;
  hg_exchange_config_t cfg = {.max_instruments = 4, .max_accounts = 16, .max_book_orders = 256,
                              .clearing = &cc, .max_indexes = 4, .max_fixing_days = 64,
                              .max_staged_samples = 256};
  hg_exchange_t *ex = NULL;
  if (hg_exchange_create(&cfg, sink, NULL, &ex) != 0) abort();
  return ex;
}

static uint8_t *serialize(const hg_exchange_t *ex, size_t *len) {
  size_t n = hg_exchange_serialized_size(ex);
  uint8_t *b = malloc(n ? n : 1);
  if (b == NULL) abort();
  if (hg_exchange_serialize(ex, b, n, len) != 0 || *len != n) abort();
  return b;
}

/* Restores blob into a fresh exchange, serializes it: must give blob. */
static void restores_to_itself(const uint8_t *blob, size_t len, const hg_exchange_t *from) {
  hg_exchange_t *ex = make();
  if (hg_exchange_restore(ex, blob, len) != 0) abort();
  size_t l2;
  uint8_t *b2 = serialize(ex, &l2);
  if (l2 != len || memcmp(blob, b2, len) != 0) abort();
  uint8_t h1[HG_SHA256_LEN], h2[HG_SHA256_LEN];
  hg_exchange_hash(ex, h2);
  if (from != NULL) {
    hg_exchange_hash(from, h1);
    if (memcmp(h1, h2, sizeof h1) != 0) abort();
  }
  free(b2);
  hg_exchange_destroy(ex);
}

static void fuzz_blob(const uint8_t *data, size_t size) {
  uint8_t *blob = malloc(size ? size : 1);
  if (blob == NULL) abort();
  memcpy(blob, data, size);
  hg_exchange_t *ex = make();
  int rc = hg_exchange_restore(ex, blob, size);
  if (rc != 0) {
    if (rc != HG_EVERSION && rc != HG_ECORRUPT && rc != HG_EFULL && rc != -ENOMEM) abort();
    /* Empty again: the same blob gets the same verdict. */
    if (hg_exchange_restore(ex, blob, size) != rc) abort();
  } else {
    size_t len;
    uint8_t *again = serialize(ex, &len);
    restores_to_itself(again, len, ex);
    /* The version follows the 4-byte magic, little-endian. */
    uint32_t version = (uint32_t)blob[4] | (uint32_t)blob[5] << 8 | (uint32_t)blob[6] << 16 |
                       (uint32_t)blob[7] << 24;
    if (version == HG_EXCHANGE_FORMAT_VERSION && (size != len || memcmp(blob, again, len) != 0))
      abort();
    free(again);
  }
  hg_exchange_destroy(ex);
  free(blob);
}

static uint64_t seq;

static hg_command_t mk(uint32_t type) {
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.seq = ++seq;
  c.ts = 1800000000000000000ull + c.seq * 1000u;
  c.type = type;
  return c;
}

static void apply(hg_exchange_t *ex, const hg_command_t *c) {
  int rc = hg_exchange_apply(ex, c);
  if (rc != 0 && rc != HG_EFULL && rc != -ENOMEM) abort();
}

static void setup_market(hg_exchange_t *ex) {
  static const char *const sym[2] = {"H100.A.2027-06", "B200.A.2027-06"};
  for (uint32_t i = 1; i <= 2; i++) {
    hg_command_t c = mk(HG_COMMAND_LIST_INSTRUMENT);
    strcpy(c.u.list.symbol, sym[i - 1]);
    c.u.list.params = (hg_book_params_t){.instrument_id = i, .tick_size = 1000,
                                         .contract_unit = 1000, .min_price = 1,
                                         .max_price = 4000, .max_order_qty = 100,
                                         .ref_price = 2000, .max_orders = 64,
                                         .max_accounts = 8};
    apply(ex, &c);
  }
  for (hg_account_t a = 1; a <= 4; a++) {
    hg_command_t c = mk(HG_COMMAND_ADD_ACCOUNT);
    c.u.add_account = (hg_cmd_add_account_t){a, 1 + (a & 1)};
    apply(ex, &c);
    c = mk(HG_COMMAND_DEPOSIT);
    c.u.cash = (hg_cmd_cash_t){a, 1000000000000};
    apply(ex, &c);
  }
}

/* One command from 4 input bytes. */
static hg_command_t step(const uint8_t b[4]) {
  uint32_t inst = 1 + (b[0] >> 7);
  hg_account_t acct = 1 + ((b[0] >> 5) & 3);
  switch (b[0] & 7) {
  default: { /* 0..3: a limit order */
    hg_command_t c = mk(HG_COMMAND_NEW_ORDER);
    c.u.new_order = (hg_cmd_new_order_t){
        .instrument_id = inst, .account = acct, .client_order_id = c.seq,
        .price = 1990 + (b[1] % 21), .qty = 1 + b[2] % 20, .side = (uint8_t)(1 + (b[3] & 1)),
        .type = HG_ORD_LIMIT, .tif = (uint8_t)((b[3] >> 1) % 3),
        .post_only = (uint8_t)((b[3] >> 3) & 1), .session_scoped = (uint8_t)((b[3] >> 4) & 1),
        .smp_group = (b[3] >> 5) & 1};
    return c;
  }
  case 4: {
    hg_command_t c = mk(HG_COMMAND_CANCEL);
    c.u.cancel = (hg_cmd_cancel_t){inst, acct, 9u + ((uint64_t)b[1] << 8 | b[2]) % seq};
    return c;
  }
  case 5: {
    hg_command_t c = mk(HG_COMMAND_REPLACE);
    c.u.replace = (hg_cmd_replace_t){inst, acct, 9u + (uint64_t)b[1] % seq, 1990 + (b[2] % 21),
                                     1 + b[3] % 20};
    return c;
  }
  case 6: {
    hg_command_t c = mk(HG_COMMAND_MASS_CANCEL);
    c.u.mass_cancel = (hg_cmd_mass_cancel_t){(b[1] & 1) ? inst : 0, acct, (uint8_t)(1 + b[2] % 3)};
    return c;
  }
  case 7: {
    hg_command_t c = mk((b[1] & 1) ? HG_COMMAND_HALT : HG_COMMAND_RESUME);
    c.u.instrument.instrument_id = inst;
    if (b[1] & 2) {
      c = mk(HG_COMMAND_SESSIONS_ENDED);
    }
    return c;
  }
  }
}

static void fuzz_market(const uint8_t *data, size_t size) {
  seq = 0;
  hg_exchange_t *ex = make();
  setup_market(ex);
  size_t i = 0;
  for (; i + 4 <= size && i < 4 * 200; i += 4) {
    hg_command_t c = step(data + i);
    apply(ex, &c);
  }
  size_t len;
  uint8_t *blob = serialize(ex, &len);
  restores_to_itself(blob, len, ex);
  /* The next command, applied to both, keeps them equal. */
  static const uint8_t next[4] = {0x01, 10, 7, 0x02};
  hg_exchange_t *ex2 = make();
  if (hg_exchange_restore(ex2, blob, len) != 0) abort();
  uint64_t s = seq;
  hg_command_t c = step(next);
  apply(ex, &c);
  seq = s;
  c = step(next);
  apply(ex2, &c);
  uint8_t h1[HG_SHA256_LEN], h2[HG_SHA256_LEN];
  hg_exchange_hash(ex, h1);
  hg_exchange_hash(ex2, h2);
  if (memcmp(h1, h2, sizeof h1) != 0) abort();
  hg_exchange_destroy(ex2);
  hg_exchange_destroy(ex);
  free(blob);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1)
    fuzz_market(data + 1, size - 1);
  else
    fuzz_blob(data + 1, size - 1);
  return 0;
}
