/*
 * Touching a table's pages when it is created, so that the order path does
 * not take its first-use page faults. calloc'd and malloc'd tables are
 * backed lazily; on this project's paravirtualised hosts a fault costs
 * several microseconds, and the first seconds of a busy session took
 * thousands of them on the gateway loop thread (the pending table, the
 * id maps, the outbound log's staging buffer), with round-trip p99 of tens
 * of milliseconds until every page had been seen once.
 */
#ifndef HOURGLASS_GATEWAY_PREFAULT_H
#define HOURGLASS_GATEWAY_PREFAULT_H

#include <stddef.h>
#include <stdint.h>

/* Writes a zero byte into every page of [p, p + n); p may be NULL. Only
 * for memory that is zero already or whose contents do not matter yet. */
static inline void hg_prefault(void *p, size_t n) {
  volatile uint8_t *b = p;
  if (b == NULL || n == 0) return;
  for (size_t off = 0; off < n; off += 4096) b[off] = 0;
  b[n - 1] = 0;
}

#endif
