/*
 * hourglass/hmac.h - HMAC-SHA256 (RFC 2104, FIPS 198-1), a constant-time
 * comparison and a wipe that the compiler keeps, for the gateway's login
 * proof and the secrets around it.
 *
 * Computed by OpenSSL's libcrypto (HMAC(), CRYPTO_memcmp, OPENSSL_cleanse;
 * base/crypto.c). No shared state: any thread. libcrypto wipes its own
 * intermediate key material; callers wipe their copies of secrets, MACs
 * and session keys with hg_wipe. Failure inside libcrypto stops the process
 * with a message, as for hourglass/sha256.h.
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

/* Overwrites p[0..len) with zeros in a way the compiler does not remove as
 * a dead store (OPENSSL_cleanse); p may be NULL when len is 0. */
void hg_wipe(void *p, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_HMAC_H */
