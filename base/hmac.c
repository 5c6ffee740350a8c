/*
 * HMAC-SHA256 as RFC 2104 defines it: H((K ^ opad) || H((K ^ ipad) || m)),
 * with K the key zero-padded to the 64-byte block (hashed first if longer).
 * The padded key and the inner digest are wiped with a volatile store loop
 * so the compiler cannot drop the clearing as a dead store.
 */
#include "hourglass/hmac.h"

#include <string.h>

static void wipe(void *p, size_t n) {
  volatile uint8_t *v = p;
  while (n--) *v++ = 0;
}

void hg_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    uint8_t out[HG_HMAC_SHA256_LEN]) {
  uint8_t k[HG_SHA256_BLOCK_LEN];
  uint8_t pad[HG_SHA256_BLOCK_LEN];
  uint8_t inner[HG_SHA256_DIGEST_LEN];
  memset(k, 0, sizeof k);
  if (key_len > HG_SHA256_BLOCK_LEN) {
    hg_sha256(key, key_len, k);
  } else if (key_len > 0) {
    memcpy(k, key, key_len);
  }
  hg_sha256_t ctx;
  for (size_t i = 0; i < sizeof pad; i++) pad[i] = (uint8_t)(k[i] ^ 0x36);
  hg_sha256_init(&ctx);
  hg_sha256_update(&ctx, pad, sizeof pad);
  hg_sha256_update(&ctx, msg, msg_len);
  hg_sha256_final(&ctx, inner);
  for (size_t i = 0; i < sizeof pad; i++) pad[i] = (uint8_t)(k[i] ^ 0x5c);
  hg_sha256_init(&ctx);
  hg_sha256_update(&ctx, pad, sizeof pad);
  hg_sha256_update(&ctx, inner, sizeof inner);
  hg_sha256_final(&ctx, out);
  wipe(k, sizeof k);
  wipe(pad, sizeof pad);
  wipe(inner, sizeof inner);
  wipe(&ctx, sizeof ctx);
}

int hg_ct_equal(const void *a, const void *b, size_t len) {
  const uint8_t *x = a, *y = b;
  uint8_t diff = 0;
  for (size_t i = 0; i < len; i++) diff |= (uint8_t)(x[i] ^ y[i]);
  /* Map 0 -> 1 and 1..255 -> 0 without a data-dependent branch. */
  return (int)(1u & (((unsigned)diff - 1u) >> 8));
}
