/*
 * test_keys.h - the API keys of the test servers: key id k has the 32-byte
 * secret whose byte i is (k * 31 + i) mod 256, so any client (C, Python,
 * hgctl in a child process) can derive it. Pure functions, any thread.
 */
#ifndef HOURGLASS_TESTS_TEST_KEYS_H
#define HOURGLASS_TESTS_TEST_KEYS_H

#include <stdint.h>

/* The secret of key_id. */
void ts_key_secret(uint64_t key_id, uint8_t sec[32]);

/* The same as 64 lowercase hex digits and a NUL. */
void ts_key_secret_hex(uint64_t key_id, char hex[65]);

#endif /* HOURGLASS_TESTS_TEST_KEYS_H */
