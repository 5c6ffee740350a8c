/*
 * hourglass/grow.h - a heap array that grows by doubling (grow.c), for
 * code that collects an unknown number of items: hgctl, the CSV and
 * registry readers, the daemon's text buffer. Not for the order path,
 * which allocates nothing after start-up. Any thread (the array is the
 * caller's); no state.
 */
#ifndef HOURGLASS_GROW_H
#define HOURGLASS_GROW_H

#include <stddef.h>

/* Makes room for need items of elem bytes in arr, which has room for *cap.
 * Returns arr itself when need <= *cap; otherwise arr reallocated to the
 * capacity that *cap (first when *cap is 0, 1 when both are) reaches by
 * doubling until it holds need, with *cap set to it. Returns NULL, with arr
 * untouched (still the caller's to free) and *cap unchanged, when that
 * capacity or its size in bytes would overflow size_t or realloc fails:
 * the caller reports -ENOMEM. elem > 0; need >= 1 (so NULL is never a
 * success). Typical use:
 *   T *v2 = hg_grow(v, &cap, sizeof *v, n + 1, 64);
 *   if (v2 == NULL) return -ENOMEM;
 *   v = v2; */
void *hg_grow(void *arr, size_t *cap, size_t elem, size_t need, size_t first);

#endif /* HOURGLASS_GROW_H */
