/*
 * targets.h - the server the load generator (loadgen.h) drives, in
 * this process on its own threads, on an ephemeral loopback port:
 *
 *  - the real gateway: pipeline + gateway (tests/gateway/client_harness.h)
 *    with a journal in a fresh directory under `dir`, durable policy, one
 *    instrument, one trading key per session and resting sells far above
 *    the generator's IOC buys, so orders never trade.
 *
 * Threads: create and stop from one thread (the generator's); the
 * servers' own threads are internal. Errors: these are benchmark fixtures,
 * so a setup failure or a failed write/sync exits the program through
 * lg_die() with the reason.
 */
#ifndef HOURGLASS_BENCH_TARGETS_H
#define HOURGLASS_BENCH_TARGETS_H

#include <stdbool.h>
#include <stdint.h>

#include "loadgen.h"

#define TG_OP_KEY 1u       /* the operator key that sets up the market */
#define TG_KEY_BASE 1000u  /* trading key of session i: TG_KEY_BASE + i */

typedef struct tg_gateway tg_gateway_t;

typedef struct tg_gateway_opts {
  const char *dir;     /* where the data directory is made */
  uint32_t sessions;   /* trading keys (and accounts) to create */
  int journal_direct;  /* journal.force_fallback: pwritev + fdatasync */
  int rt_priority;     /* SCHED_FIFO for the server threads; 0: off */
  uint32_t keepalive_ms; /* of the sessions; 0: 5000 */
} tg_gateway_opts_t;

/* Starts the real gateway and logs o->sessions sessions of *f in to it
 * (lg_fleet_login); sessions 0..7 rest 50 sells each. */
tg_gateway_t *tg_gateway_up(const tg_gateway_opts_t *o, lg_fleet_t *f);

/* Closes f's sessions, stops the server and removes its data directory. */
void tg_gateway_down(tg_gateway_t *g, lg_fleet_t *f);

#endif /* HOURGLASS_BENCH_TARGETS_H */
