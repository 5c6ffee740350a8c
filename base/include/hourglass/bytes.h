/*
 * hourglass/bytes.h - unaligned loads and stores of fixed-width integers in
 * on-disk records (the journal, the gateway's outbound journal), and a
 * 64-bit mixer for hash tables. Host byte order, which the record formats
 * define as little-endian: the build targets x86-64; big-endian forms
 * where a format says so; little-endian forms of any width for the
 * formats written field by field (the exchange's and the clearing's
 * snapshots, the state store's records, the gateway's key records). memcpy
 * compiles to one move and is free of alignment and strict-aliasing traps.
 * Any thread; no state.
 */
#ifndef HOURGLASS_BYTES_H
#define HOURGLASS_BYTES_H

#include <stddef.h>
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

/* Big-endian (network order) forms, for the formats that define it: LMDB
 * keys that must sort by number (the state store), the login proof's
 * message (hourglass/wire.h), SHA-256's words. */
static inline uint64_t hg_ld_be64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
  return v;
}
static inline uint32_t hg_ld_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}
static inline void hg_st_be64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
static inline void hg_st_be32(uint8_t *p, uint32_t v) {
  for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

/* Little-endian whatever the host: the low n (1..8) bytes of v, least
 * significant first. hg_st_le returns n, so stores chain (off +=
 * hg_st_le(p + off, v, 4)). */
static inline size_t hg_st_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
  return (size_t)n;
}
static inline uint64_t hg_ld_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* A 64-bit finalising mixer (every input bit affects every output bit): the
 * hash of the gateway's and the outbound journal's open-addressing tables,
 * whose keys (ids, sequence numbers) are far from random. */
static inline uint64_t hg_mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

#endif
