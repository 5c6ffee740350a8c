/*
 * test_keys.c - the test servers' key secrets (see test_keys.h).
 */
#include "test_keys.h"

#include <stdio.h>

void ts_key_secret(uint64_t key_id, uint8_t sec[32]) {
  for (int i = 0; i < 32; i++) sec[i] = (uint8_t)(key_id * 31u + (uint64_t)i);
}

void ts_key_secret_hex(uint64_t key_id, char hex[65]) {
  uint8_t sec[32];
  ts_key_secret(key_id, sec);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", sec[i]);
}
