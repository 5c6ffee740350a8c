/*
 * CRC32C (Castagnoli). Two implementations behind one entry point:
 *  - slicing-by-8: eight 256-entry tables let the loop fold 8 input bytes per
 *    step with 8 independent lookups instead of 8 dependent ones;
 *  - SSE4.2 crc32 instruction (x86-64), 8 bytes per instruction, used when
 *    the CPU reports SSE4.2 at run time.
 * The tables are built and the choice is made once, under pthread_once, so
 * the first call from any thread is safe. The journal checksums every record
 * with this, so the hardware path matters for throughput.
 */
#include "hourglass/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "crc32c.c folds 8 bytes at a time as a little-endian word"
#endif

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_hw;

static void init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ POLY : c >> 1;
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int k = 1; k < 8; k++)
      table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xffu];
#if defined(__x86_64__)
  __builtin_cpu_init();
  have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t hg_crc32c_sw(uint32_t crc, const void *buf, size_t len) {
  pthread_once(&once, init);
  const unsigned char *p = buf;
  crc = ~crc;
  while (len > 0 && ((uintptr_t)p & 7u) != 0) {
    crc = table[0][(crc ^ *p++) & 0xffu] ^ (crc >> 8);
    len--;
  }
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    w ^= crc;
    crc = table[7][w & 0xffu] ^ table[6][(w >> 8) & 0xffu] ^ table[5][(w >> 16) & 0xffu] ^
          table[4][(w >> 24) & 0xffu] ^ table[3][(w >> 32) & 0xffu] ^
          table[2][(w >> 40) & 0xffu] ^ table[1][(w >> 48) & 0xffu] ^ table[0][w >> 56];
    p += 8;
    len -= 8;
  }
  while (len > 0) {
    crc = table[0][(crc ^ *p++) & 0xffu] ^ (crc >> 8);
    len--;
  }
  return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t hg_crc32c_hw(uint32_t crc, const void *buf, size_t len) {
  const unsigned char *p = buf;
  uint64_t c = ~crc;
  while (len > 0 && ((uintptr_t)p & 7u) != 0) {
    c = _mm_crc32_u8((uint32_t)c, *p++);
    len--;
  }
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    len -= 8;
  }
  while (len > 0) {
    c = _mm_crc32_u8((uint32_t)c, *p++);
    len--;
  }
  return ~(uint32_t)c;
}
#else
uint32_t hg_crc32c_hw(uint32_t crc, const void *buf, size_t len) {
  return hg_crc32c_sw(crc, buf, len);
}
#endif

int hg_crc32c_hw_available(void) {
  pthread_once(&once, init);
  return have_hw;
}

uint32_t hg_crc32c(uint32_t crc, const void *buf, size_t len) {
  pthread_once(&once, init);
  return have_hw ? hg_crc32c_hw(crc, buf, len) : hg_crc32c_sw(crc, buf, len);
}
