/*
 * idhint.h - direct-indexed id -> slot hints.
 *
 * The exchange and the clearing find accounts and instruments by id on
 * every order, several times per command. Operators number both from 1
 * upwards, so a table indexed by id gives the slot with one load where a
 * binary search or a hash probe would take several. The table is only a
 * hint: it covers ids below a bound derived from the capacity, an entry may
 * be stale (the slot moved or now holds another id), and the caller always
 * confirms that the slot holds the id, falling back to its own search
 * otherwise. A hint therefore costs time when wrong, never correctness.
 *
 * Not thread-safe; the owner of the structure it indexes owns it.
 */
#ifndef HOURGLASS_IDHINT_H
#define HOURGLASS_IDHINT_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#define HG_IDHINT_NONE UINT32_MAX

typedef struct hg_idhint {
  uint32_t *slot1; /* slot + 1 by id; 0 = no hint. Owned. */
  uint32_t n;      /* ids below n have an entry */
} hg_idhint_t;

/* Allocates the table for a structure of cap slots: ids up to four times
 * the capacity plus 1024 (at most 4M entries, 16 MiB). 0 or -ENOMEM. */
static inline int hg_idhint_init(hg_idhint_t *h, uint32_t cap) {
  h->n = cap > (1u << 20) ? (1u << 22) : cap * 4 + 1024;
  h->slot1 = calloc(h->n, sizeof *h->slot1);
  return h->slot1 != NULL ? 0 : -ENOMEM;
}

/* Frees the table; h may be zeroed or initialised. */
static inline void hg_idhint_free(hg_idhint_t *h) {
  free(h->slot1);
  h->slot1 = NULL;
  h->n = 0;
}

/* The hinted slot of id, or HG_IDHINT_NONE. The caller must check it. */
static inline uint32_t hg_idhint_get(const hg_idhint_t *h, uint64_t id) {
  return id < h->n ? h->slot1[id] - 1 : HG_IDHINT_NONE; /* 0 - 1 wraps to NONE */
}

/* Records that id is at slot (ids beyond the table are not hinted). */
static inline void hg_idhint_set(hg_idhint_t *h, uint64_t id, uint32_t slot) {
  if (id < h->n) h->slot1[id] = slot + 1;
}

#endif
