/*
 * crc32c.h - CRC32C (Castagnoli, reflected polynomial 0x82F63B78), shared
 * by the journal, the state store and the outbound journal for record,
 * segment and snapshot checksums.
 *
 * hg_crc32c(0, buf, n) is the standard CRC32C of buf (pre- and post-inverted),
 * and calls chain: hg_crc32c(hg_crc32c(0, a, na), b, nb) equals the CRC of
 * a followed by b. Thread-safe; the implementation (SSE4.2 instruction when
 * the CPU has it, slicing-by-8 tables otherwise) is chosen once at first use.
 */
#ifndef HOURGLASS_CRC32C_H
#define HOURGLASS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t hg_crc32c(uint32_t crc, const void *buf, size_t len);

/* The two implementations, exposed so tests can compare them. hg_crc32c_hw
 * must only be called when hg_crc32c_hw_available() returns nonzero. */
uint32_t hg_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t hg_crc32c_hw(uint32_t crc, const void *buf, size_t len);
int hg_crc32c_hw_available(void);

#endif /* HOURGLASS_CRC32C_H */
