/*
 * hourglass/bytes.h - unaligned loads and stores of fixed-width integers in
 * on-disk records (the journal, the gateway's outbound journal). Host byte
 * order, which the record formats define as little-endian: the build targets
 * x86-64. memcpy compiles to one move and is free of alignment and
 * strict-aliasing traps. Any thread; no state.
 */
#ifndef HOURGLASS_BYTES_H
#define HOURGLASS_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint16_t hg_ld16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline uint32_t hg_ld32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline uint64_t hg_ld64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void hg_st16(uint8_t *p, uint16_t v) { memcpy(p, &v, sizeof v); }
static inline void hg_st32(uint8_t *p, uint32_t v) { memcpy(p, &v, sizeof v); }
static inline void hg_st64(uint8_t *p, uint64_t v) { memcpy(p, &v, sizeof v); }

#endif
