/*
 * hourglass/sha256.h - SHA-256 (FIPS 180-4).
 *
 * Used for the exchange state hash and the tools' digests (HMAC is
 * hourglass/hmac.h, also libcrypto's). Computed
 * by OpenSSL's libcrypto (EVP); these calls adapt it (base/crypto.c).
 * Streaming: init, update any number of times with any lengths, final.
 * Pure functions of their inputs; a context is owned by whichever thread
 * uses it, nothing is shared, so any thread may call these on its own
 * context.
 *
 * init allocates libcrypto's digest context and final frees it, so every
 * init must be followed by a final, or by hg_sha256_discard for a hash
 * given up. The functions cannot fail in a way the
 * caller could handle: if libcrypto cannot allocate or run the digest the
 * process stops with a message (a wrong digest would be worse).
 */
#ifndef HOURGLASS_SHA256_H
#define HOURGLASS_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HG_SHA256_DIGEST_LEN 32
#define HG_SHA256_BLOCK_LEN 64

typedef struct hg_sha256 {
  struct evp_md_ctx_st *md;           /* libcrypto's context; owned from init to final */
} hg_sha256_t;

/* Starts a new hash in ctx (caller-owned storage). */
void hg_sha256_init(hg_sha256_t *ctx);

/* Hashes data[0..len); data may be NULL when len is 0. */
void hg_sha256_update(hg_sha256_t *ctx, const void *data, size_t len);

/* Finishes: writes the 32-byte digest to out and frees the context. ctx
 * must be re-initialized before reuse. */
void hg_sha256_final(hg_sha256_t *ctx, uint8_t out[HG_SHA256_DIGEST_LEN]);

/* Frees the context of a hash that will not be finished; does nothing
 * after final (or a previous discard). */
void hg_sha256_discard(hg_sha256_t *ctx);

/* One-shot: out = SHA-256(data[0..len)). */
void hg_sha256(const void *data, size_t len, uint8_t out[HG_SHA256_DIGEST_LEN]);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_SHA256_H */
