/*
 * book_internal.h - debugging hooks of the order book, for tests only.
 */
#ifndef HOURGLASS_BOOK_INTERNAL_H
#define HOURGLASS_BOOK_INTERNAL_H

#include "hourglass/book.h"

/*
 * Walks every internal structure of the book (levels, bitmaps, best prices,
 * FIFOs, per-account lists, id tables, free-slot stack, each slot's count
 * of displaced orders) and checks that they agree. Returns 0, a negative
 * number naming the first broken invariant (see book.c), or -ENOMEM if it
 * could not get its scratch array (4 bytes a pool slot, freed before it
 * returns: this hook, unlike the book, allocates). Cost is linear in the
 * price range and the pool. Same thread rules as every other book function.
 */
int hg_book_check(const hg_book_t *book);

/*
 * On a book just created (no order yet): the preferred range starts at 2
 * slots and the id tables at 16 entries, instead of START_RANGE each
 * (book.c), so that a test of a few hundred orders makes them double many
 * times (pref_grow, tables_grow).
 */
void hg_book__start_small(hg_book_t *book);

#endif /* HOURGLASS_BOOK_INTERNAL_H */
