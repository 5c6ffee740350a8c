/*
 * targets.h - the servers the load generator (loadgen.h) drives, all in
 * this process on their own threads, each on an ephemeral loopback port:
 *
 *  - the real gateway: pipeline + gateway (tests/support/server.h)
 *    with a journal in a fresh directory under `dir`, durable policy, the
 *    pipeline in loop mode unless the options ask for threads, one
 *    instrument, one trading key per session and resting sells far above
 *    the generator's IOC buys, so orders never trade;
 *  - the floor servers: one thread (a libuv loop, or for TG_EPOLL a bare
 *    epoll loop) that speaks just enough of
 *    the protocol for the generator: it answers any Login with a LoginAck
 *    (secrets are not checked), ignores every other request but
 *    NewOrderRequest, and answers each order with an ExecutionReport(NEW)
 *    carrying the fields the gateway's own NEW report carries (order id,
 *    client order id, side, price, qty, leaves, engine seq, ts = the
 *    wall clock when it is encoded, ref_seq), so its frames have that
 *    report's size (order ids start at 2^14, the gateway's magnitude after
 *    a few runs, for equal varints), then the IOC's cancel report without
 *    a ref_seq, as the gateway does.
 *      TG_ECHO: the reply is written as soon as the bytes that carried the
 *      request are decoded (one write per connection per read).
 *      TG_EPOLL: the same echo without libuv: one thread in a bare
 *      level-triggered epoll loop (epoll_wait, one read per readable
 *      socket, one write of every reply it produced; EPOLLOUT only while
 *      a write fell short), the least a server on this kernel can do.
 *      TG_COMMIT: group commit. Each order also appends a 64-byte record
 *      to a file in `dir`; the records of the orders that arrived since the
 *      last commit go to disk in one io_uring writev linked to an
 *      fdatasync, submitted from the loop at the end of the loop iteration
 *      they arrived in (uv_check) and noticed through an eventfd
 *      registered with io_uring_register_eventfd and watched by uv_poll.
 *      One commit is in flight at a time; orders arriving meanwhile form
 *      the next batch, submitted as soon as it completes. Replies are held until their batch is
 *      durable, then written. The file is zero-filled and synced before
 *      the loop starts (as the journal zero-fills its segments, so a sync
 *      flushes data only) and its records wrap around at its end.
 *
 * Threads: start, read stats and stop from one thread (the generator's); the
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
  bool tls;            /* TLS 1.3 listener (throwaway certificates) and TLS sessions */
  int threads_mode;    /* nonzero: pipeline.mode = threads; 0: loop (hourglassd's default) */
  uint32_t mark_ms;    /* nonzero: a MARK command every mark_ms through the pipeline, as
                          hourglassd's mark timer sends it (daemon/serve.c), while
                          commands were sequenced since the last; 0: none */
} tg_gateway_opts_t;

/* Starts the real gateway and logs o->sessions sessions of *f in to it
 * (lg_fleet_login); sessions 0..7 rest 50 sells each. With o->tls the
 * certificates are made (openssl CLI) in a directory of o->dir, removed
 * by tg_gateway_down. */
tg_gateway_t *tg_gateway_up(const tg_gateway_opts_t *o, lg_fleet_t *f);

/* Closes f's sessions, stops the server (and its marker, if any) and
 * removes its data directory. */
void tg_gateway_down(tg_gateway_t *g, lg_fleet_t *f);

/* The MARK commands the gateway's marker has queued so far (0 without
 * o->mark_ms). */
uint64_t tg_gateway_marks(tg_gateway_t *g);

typedef enum tg_floor_kind { TG_ECHO, TG_COMMIT, TG_EPOLL } tg_floor_kind_t;

typedef struct tg_floor tg_floor_t;

typedef struct tg_floor_stats {
  uint64_t orders;  /* orders answered */
  uint64_t commits; /* TG_COMMIT: writev + fdatasync pairs completed */
  uint64_t records; /* TG_COMMIT: records made durable */
} tg_floor_stats_t;

/* Starts a floor server and logs `sessions` sessions of *f in to it
 * (lg_fleet_login, key ids from TG_KEY_BASE). TG_COMMIT: file_bytes of
 * file in dir (rounded up to 1 MiB), gone once closed; dir and file_bytes
 * are unused for TG_ECHO. */
tg_floor_t *tg_floor_start(tg_floor_kind_t kind, const char *dir, uint64_t file_bytes,
                           uint32_t sessions, uint32_t keepalive_ms, lg_fleet_t *f);

/* Counters so far (read after a run, while the loop is idle). */
tg_floor_stats_t tg_floor_stats(const tg_floor_t *s);

/* Closes f's sessions, stops the loop thread, closes every connection and
 * the file. */
void tg_floor_stop(tg_floor_t *s, lg_fleet_t *f);

#endif /* HOURGLASS_BENCH_TARGETS_H */
