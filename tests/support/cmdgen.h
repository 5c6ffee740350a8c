/*
 * cmdgen.h - a deterministic command stream for pipeline, crash and recovery
 * tests and benchmarks: command i is a pure function of (i, seed), so a test
 * can regenerate what it sent and compare it with what the journal holds.
 *
 * Commands 0..CMDGEN_SETUP-1 list one instrument, add CMDGEN_ACCOUNTS accounts
 * and fund them; later commands are new orders, cancels, replaces and mass
 * cancels around a slowly moving price. Order ids are the seq of the command
 * that created the order, and a stream submitted from seq 1 gives command i
 * seq i + 1, so cancels aim at recent orders by index.
 *
 * The builders below (cmdgen_mix, cmdgen_book_params, cmdgen_new_order, ...)
 * are the pieces the stream is made of; a generator with another mix of
 * commands (bench_replay's) composes them too. Pure functions, any thread.
 */
#ifndef HOURGLASS_TESTS_CMDGEN_H
#define HOURGLASS_TESTS_CMDGEN_H

#include <stdint.h>

#include "hourglass/exchange.h"

#define CMDGEN_ACCOUNTS 8u
#define CMDGEN_SETUP (1u + 2u * CMDGEN_ACCOUNTS)
#define CMDGEN_INSTRUMENT 1u

/* A 64-bit mixing function (splitmix64's finaliser): the stream's only
 * source of variety. */
uint64_t cmdgen_mix(uint64_t x);

/* Book parameters of the generated instruments: tick size and contract unit
 * 1000, ticks 1..100000, at most 1000 per order, reference price 3000, band
 * 20%; id, max_orders and max_accounts as given. Zeroes the rest. */
void cmdgen_book_params(hg_book_params_t *bp, uint32_t instrument_id, uint32_t max_orders,
                        uint32_t max_accounts);

/* cmdgen_book_params for CMDGEN_INSTRUMENT, 65536 orders, 64 accounts. */
void cmdgen_instrument_params(hg_book_params_t *bp);

/* Sets *c (already zeroed) to a limit order drawn from r: side from bit 16,
 * time in force from bits 40.. (1 in 8 IOC, 1 in 8 DAY, else GTC), price
 * mid -/+ ((r >> 24) % spread - cross) (buy -/sell +, so a negative offset
 * crosses), quantity 1..20 from bits 32.. . */
void cmdgen_new_order(hg_command_t *c, uint32_t instrument, hg_account_t account,
                      uint64_t client_order_id, uint64_t r, int64_t mid, uint32_t spread,
                      int64_t cross);

/* Sets *c (already zeroed) to a cancel of order oid. */
void cmdgen_cancel(hg_command_t *c, uint32_t instrument, hg_account_t account, hg_oid_t oid);

/* Sets *c (already zeroed) to a replace of order oid drawn from r: price
 * mid - 4 .. mid + 4 (bits 24..), quantity 1..20 (bits 32..). */
void cmdgen_replace(hg_command_t *c, uint32_t instrument, hg_account_t account, hg_oid_t oid,
                    uint64_t r, int64_t mid);

/* Sets *c (already zeroed) to a mass cancel of both sides. */
void cmdgen_mass_cancel(hg_command_t *c, uint32_t instrument, hg_account_t account);

/* Fills *c with command i of the stream (seq and ts left 0). */
void cmdgen_command(uint64_t i, uint64_t seed, hg_command_t *c);

#endif /* HOURGLASS_TESTS_CMDGEN_H */
