/*
 * grow.c - doubling growth of heap arrays (hourglass/grow.h). The size
 * checks come before realloc, so an overflowing request fails cleanly
 * instead of allocating a wrapped-around size.
 */
#include "hourglass/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *hg_grow(void *arr, size_t *cap, size_t elem, size_t need, size_t first) {
  if (need <= *cap) return arr;
  size_t nc = *cap != 0 ? *cap : first != 0 ? first : 1;
  while (nc < need) {
    if (nc > SIZE_MAX / 2) return NULL;
    nc *= 2;
  }
  if (nc > SIZE_MAX / elem) return NULL;
  void *p = realloc(arr, nc * elem);
  if (p == NULL) return NULL;
  *cap = nc;
  return p;
}
