/*
 * crypto.c - SHA-256, HMAC-SHA256, constant-time comparison and wiping,
 * all from OpenSSL's libcrypto (EVP digests, HMAC(), CRYPTO_memcmp,
 * OPENSSL_cleanse). This file only adapts the calls to hg_sha256_* and
 * hg_hmac_* (hourglass/sha256.h, hourglass/hmac.h), so callers keep their
 * void, caller-storage API.
 *
 * libcrypto allocates a digest context and may, in principle, fail to. A
 * hash that silently came out wrong would make the state hash disagree
 * between replicas, so a failure here stops the process with a message
 * (it takes an out-of-memory condition or a broken libcrypto install).
 */
#include "hourglass/hmac.h"
#include "hourglass/sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>

static _Noreturn void crypto_fail(const char *what) {
  fprintf(stderr, "hourglass: libcrypto %s failed\n", what);
  abort();
}

/* libcrypto wants non-NULL pointers even for empty input. */
static const void *nonnull(const void *p) {
  static const unsigned char empty[1];
  return p != NULL ? p : empty;
}

void hg_sha256_init(hg_sha256_t *ctx) {
  ctx->md = EVP_MD_CTX_new();
  if (ctx->md == NULL || EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL) != 1)
    crypto_fail("SHA-256 init");
}

void hg_sha256_update(hg_sha256_t *ctx, const void *data, size_t len) {
  if (len == 0) return;
  if (EVP_DigestUpdate(ctx->md, data, len) != 1) crypto_fail("SHA-256 update");
}

void hg_sha256_final(hg_sha256_t *ctx, uint8_t out[HG_SHA256_DIGEST_LEN]) {
  unsigned n = 0;
  int ok = EVP_DigestFinal_ex(ctx->md, out, &n);
  EVP_MD_CTX_free(ctx->md);
  ctx->md = NULL;
  if (ok != 1 || n != HG_SHA256_DIGEST_LEN) crypto_fail("SHA-256 final");
}

void hg_sha256_discard(hg_sha256_t *ctx) {
  EVP_MD_CTX_free(ctx->md);
  ctx->md = NULL;
}

void hg_sha256(const void *data, size_t len, uint8_t out[HG_SHA256_DIGEST_LEN]) {
  unsigned n = 0;
  if (EVP_Digest(nonnull(data), len, out, &n, EVP_sha256(), NULL) != 1 ||
      n != HG_SHA256_DIGEST_LEN)
    crypto_fail("SHA-256");
}

void hg_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    uint8_t out[HG_HMAC_SHA256_LEN]) {
  unsigned n = 0;
  if (key_len > (size_t)INT32_MAX) crypto_fail("HMAC-SHA256 (key length)");
  if (HMAC(EVP_sha256(), nonnull(key), (int)key_len, nonnull(msg), msg_len, out, &n) == NULL ||
      n != HG_HMAC_SHA256_LEN)
    crypto_fail("HMAC-SHA256");
}

int hg_ct_equal(const void *a, const void *b, size_t len) {
  return len == 0 || CRYPTO_memcmp(a, b, len) == 0;
}

void hg_wipe(void *p, size_t len) {
  if (len > 0) OPENSSL_cleanse(p, len);
}
