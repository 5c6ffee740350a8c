/*
 * demo.h - the demo market a newcomer sees on `ops/run`: a year of monthly
 * B200 grade-A contracts, two market makers quoting the curve and two
 * inference producers hedging rent with strips of futures.
 *
 * The demo is a client like any other: it produces hg_command_t values that
 * the daemon submits to the pipeline, and learns its own order ids from the
 * released records (hg_demo_observe). It reads no clock (the daemon passes
 * the listing month and today's day number) and uses its own seeded
 * generator; the state machine sees only the commands. Owned by one thread
 * at a time: the daemon's main thread until it starts the demo thread, then
 * that thread.
 */
#ifndef HOURGLASS_DEMO_H
#define HOURGLASS_DEMO_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/pipeline.h"

#define HG_DEMO_MONTHS 12
#define HG_DEMO_FIRST_INSTRUMENT 1
#define HG_DEMO_MAKERS 2
#define HG_DEMO_HEDGERS 2
/* Accounts: makers 1001, 1002 (firm 100, 101); hedgers 2001, 2002 (firm 200,
 * 201); a free account 3001 (firm 300) for the person trying it out. The
 * daemon adds 3003 (firm 300) for the person's market-maker key: not part
 * of hg_demo_setup, so the month scenario's commands do not change. */
#define HG_DEMO_MAKER_ACCOUNT(i) (1001u + (i))
#define HG_DEMO_HEDGER_ACCOUNT(i) (2001u + (i))
#define HG_DEMO_USER_ACCOUNT 3001u
#define HG_DEMO_USER_MAKER_ACCOUNT 3003u

/* The live demo's token curve (hg_demo_create only): LIST_CURVE of
 * TOK.<CLASS>.<GRADE>, twelve months from the B200 curve's first, ids from
 * HG_DEMO_TOKEN_FIRST_INSTRUMENT; maker 0 quotes the first
 * HG_DEMO_TOKEN_QUOTED of them once hg_demo_observe has seen them LISTED
 * (the curve needs 12 free instrument slots). */
#define HG_DEMO_TOKEN_CLASS "OW671B"
#define HG_DEMO_TOKEN_GRADE "S"
#define HG_DEMO_TOKEN_FIRST_INSTRUMENT 101
#define HG_DEMO_TOKEN_QUOTED 3

typedef struct hg_demo hg_demo_t;

typedef struct hg_demo_instrument {
  uint32_t id;
  char symbol[HG_SYMBOL_MAX + 1];
  int year, month;
} hg_demo_instrument_t;

/*
 * Creates the demo. year/month: the current UTC month; the first listed
 * contract is the next month. seed makes the flow reproducible.
 * 0, HG_EINVAL or -ENOMEM.
 */
int hg_demo_create(int year, int month, uint64_t seed, hg_demo_t **out);
/* The same with only the first `months` (1..HG_DEMO_MONTHS) contracts listed
 * (the month scenario lists one). The flow is that of hg_demo_create for
 * months = HG_DEMO_MONTHS; hedgers' strips are min(3, months) wide. */
int hg_demo_create_months(int year, int month, int months, uint64_t seed, hg_demo_t **out);
void hg_demo_destroy(hg_demo_t *d);

/* Whether the demo lists the token curve (hg_demo_create: yes;
 * hg_demo_create_months: no), and the token curve's fair value of month j
 * (0 = first), ticks of 0.001 USD per million output tokens. */
int hg_demo_has_tokens(const hg_demo_t *d);
int64_t hg_demo_token_fair(const hg_demo_t *d, size_t j);

/* A fixed 32-bit mixing function (integer hash): the demo's and the month
 * scenario's deterministic "randomness". Pure. */
uint32_t hg_demo_mix(uint32_t x);

/* The listed contracts: HG_DEMO_MONTHS of them, or the months given to
 * hg_demo_create_months. Valid until hg_demo_destroy. */
const hg_demo_instrument_t *hg_demo_instruments(const hg_demo_t *d);

/* The commands that set the market up on an empty exchange: listings,
 * accounts, deposits. Writes at most cap, returns how many there are. */
size_t hg_demo_setup(hg_demo_t *d, hg_command_t *out, size_t cap);

/* One step of simulated flow (call every few hundred milliseconds): quotes
 * moved with the fair curve, fills replenished, now and then a hedger's
 * strip. Writes at most cap commands, returns how many were written. */
size_t hg_demo_step(hg_demo_t *d, hg_command_t *out, size_t cap);

/* Feeds a released record back, so the makers know their live orders. */
void hg_demo_observe(hg_demo_t *d, const hg_pipe_out_t *rec);

/* The current UTC day number (days since 1970-01-01). When set (> 0) the
 * setup also builds the index's last 30 daily fixings so the curve has
 * its history: grades for six providers, then per day their rentals
 * (PUBLISH_SAMPLES, one per provider an hour from 08:00 to 19:59 UTC),
 * COMPUTE_FIXING (the exchange keeps each receipt) and, but for the last
 * three days, FINALIZE_FIXING. */
void hg_demo_set_today(hg_demo_t *d, int32_t day);

/* Fair value of contract k (0-based) now, ticks; for tests and the index
 * history the daemon publishes with the demo. */
int64_t hg_demo_fair(const hg_demo_t *d, size_t k);

/*
 * The demo's daily settlement: a DAILY_SETTLEMENT command may settle day D
 * only from D 16:00 UTC on (the command's timestamp) and only after the
 * last settled day, so a demo on wall-clock time settles at most once per
 * UTC day. Given the time now (ns since the epoch) and the last settled day
 * (-1: none), writes the cycle of the latest day whose 16:00 has passed into
 * *out and returns that day, or returns last_cycle_day and writes nothing
 * when that day is already settled. Any thread; no state.
 */
int hg_demo_daily_settlement(uint64_t now_ns, int32_t last_cycle_day, hg_command_t *out);

#endif /* HOURGLASS_DEMO_H */
