/*
 * refbook.h - a deliberately simple reference order book for tests.
 *
 * The reference book implements the contract written in hourglass/book.h
 * (validation order, matching, self-match prevention, event order and event
 * fields) in the most direct way possible, so that it can be read against the
 * header line by line and trusted as an oracle. The differential test feeds
 * the same commands to it and to hg_book_* and compares every event and the
 * resulting state; bench_engine uses it as a slow baseline.
 *
 * It is slow on purpose: live orders sit in one array in time-priority order
 * and every operation is a linear scan. It allocates freely (each command may
 * grow the array), which the real book must never do.
 *
 * Every function has the same meaning, parameters and events as its hg_book_
 * counterpart in hourglass/book.h. Only the differences are documented here.
 *
 * Threads: a ref_book_t is owned by one thread, like hg_book_t.
 * Depends only on the types of hourglass/book.h and the codes of
 * hourglass/error.h (no link dependency on the engine).
 */
#ifndef HOURGLASS_TESTS_REFBOOK_H
#define HOURGLASS_TESTS_REFBOOK_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/book.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ref_book ref_book_t;

/*
 * Creates a reference book. Returns 0 and sets *out, HG_EINVAL for bad params
 * (the same ranges as hg_book_create) or a NULL sink, -ENOMEM if malloc fails.
 * Capacity (max_orders, max_accounts) is enforced by rule, not by storage.
 */
int ref_book_create(const hg_book_params_t *params, hg_book_sink_fn sink, void *sink_ctx,
                    ref_book_t **out);
/* Frees everything. NULL is a no-op. */
void ref_book_destroy(ref_book_t *book);

/*
 * Commands. If growing the order array fails (malloc), the process aborts:
 * the reference is a test oracle and must never silently diverge.
 */
void ref_book_submit(ref_book_t *book, const hg_order_new_t *order);
void ref_book_cancel(ref_book_t *book, hg_oid_t order_id, hg_account_t account, uint64_t ts);
void ref_book_replace(ref_book_t *book, hg_oid_t order_id, hg_account_t account,
                      hg_price_t new_price, hg_qty_t new_qty, uint64_t ts);
/* A sides value other than HG_SIDES_BUY/SELL/BOTH cancels nothing (as book.c). */
uint32_t ref_book_mass_cancel(ref_book_t *book, hg_account_t account, int sides, uint64_t ts);
uint32_t ref_book_expire_day(ref_book_t *book, uint64_t ts);

/* Queries: O(n) or worse in the number of live orders. */
int ref_book_best(const ref_book_t *book, hg_side_t side, hg_price_t *price, hg_qty_t *qty);
hg_qty_t ref_book_qty_at(const ref_book_t *book, hg_side_t side, hg_price_t price);
size_t ref_book_depth(const ref_book_t *book, hg_side_t side, hg_book_level_t *out, size_t n);
uint32_t ref_book_order_count(const ref_book_t *book);
/* Time-priority order, oldest first; o is valid only during the call. */
void ref_book_foreach(const ref_book_t *book, void (*fn)(void *ctx, const hg_book_order_t *o),
                      void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_TESTS_REFBOOK_H */
