/*
 * hourglass/hmac.h - HMAC-SHA256 (RFC 2104, FIPS 198-1) and a constant-time
 * comparison, for the gateway's login proof.
 *
 * Pure functions of their inputs, no allocation, no shared state: any thread.
 * Intermediate key material lives on the caller's stack and is wiped before
 * returning, so a secret leaves no copy behind.
 */
#ifndef HOURGLASS_HMAC_H
#define HOURGLASS_HMAC_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/sha256.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HG_HMAC_SHA256_LEN HG_SHA256_DIGEST_LEN

/*
 * out = HMAC-SHA256(key[0..key_len), msg[0..msg_len)). A key longer than
 * the SHA-256 block (64 bytes) is hashed first, as RFC 2104 says. key and
 * msg may be NULL when their length is 0.
 */
void hg_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    uint8_t out[HG_HMAC_SHA256_LEN]);

/*
 * Returns 1 if a[0..len) equals b[0..len), 0 otherwise, in time that depends
 * only on len (never on where the first difference is), so a verifier does
 * not leak how much of a guessed MAC was right.
 */
int hg_ct_equal(const void *a, const void *b, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_HMAC_H */
