/*
 * loadgen.h - the open-loop load generator the gateway benchmarks share.
 *
 * A fleet is N client-library sessions (hg_client, non-blocking sends)
 * logged in to one server on a loopback port; lg_run() drives some of them
 * from the calling thread through one epoll set. The request is an IOC
 * limit buy on instrument 1 at 1000..1049 ticks, qty 1; its reply is the
 * first ExecutionReport whose ref_seq names the request's seq (later
 * reports of the same request are ignored). Any server that logs the
 * sessions in and answers so can be driven: the real gateway, or the floor
 * servers of targets.h.
 *
 * Offered load is open loop: request k of a run is due at t0 + k / rate
 * whatever the replies do, sessions take turns, and a request's round trip
 * is measured from its due time (not from when the generator got round to
 * sending it) to the reply, so generator lag counts against the result
 * (no coordinated omission). The round trip is also split at the server's
 * timestamp carried back in ExecutionReport.ts (CLOCK_REALTIME, offset
 * against CLOCK_MONOTONIC once per run): "in" is due -> stamped, "out" is
 * stamped -> received (lg_print calls the stamp "sequenced", which it is
 * for the gateway).
 *
 * Batching (lg_fleet_t.batch, the default): each session is corked
 * (hg_client_cork) for the run, sessions take turns per generator tick
 * instead of per request, and the requests due at one tick (up to
 * LG_BATCH_MAX, then the next session) leave in one write; the round trip
 * still counts from each request's own due time. batch = false: one send
 * per request, sessions taking turns per request.
 *
 * Threads: a fleet belongs to the thread that calls lg_run() (the clients
 * are not thread-safe). Errors: lg_fleet_login() returns 0 or the first
 * login error (a negative hg/errno code); a session lost during a run is
 * reported on stderr, marked dead and skipped from then on. Memory: a run
 * allocates its latency log (rate x seconds entries) before it starts and
 * frees it before it returns.
 */
#ifndef HOURGLASS_BENCH_LOADGEN_H
#define HOURGLASS_BENCH_LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hourglass/client.h"

#define LG_RING 8192u     /* outstanding requests per session tracked */
#define LG_BATCH_MAX 64u  /* requests one session sends in one tick at most */

typedef struct lg_sess {
  hg_client_t *c;        /* owned by the session */
  uint64_t due[LG_RING]; /* due time of request seq (index seq % LG_RING); 0: answered */
  uint64_t sent, answered, rejected;
  uint64_t clid;
  bool dead;
} lg_sess_t;

typedef struct lg_fleet {
  lg_sess_t *sess; /* n sessions, owned by the fleet */
  uint32_t n;
  bool batch;      /* corked per-tick sends (default true) */
} lg_fleet_t;

typedef struct lg_result {
  double offered, achieved;
  uint64_t sent, answered, late_unanswered, rejected;
  double p50, p99, p999, max; /* round trip, us */
  /* The round trip split at the server's stamp (ExecutionReport.ts):
   * in = due -> stamped, out = stamped -> received, us. */
  double in_p50, in_p99, out_p50, out_p99;
  double slow_in, slow_out; /* mean legs of the round trips at or above p99 */
  uint32_t alive;
} lg_result_t;

/* CLOCK_MONOTONIC, ns. */
uint64_t lg_now_ns(void);

/* qsort comparator for uint64_t. */
int lg_cmp_u64(const void *a, const void *b);

/* The p-quantile (0..1) of sorted v[0..n), ns, returned in us; 0 if n is 0. */
double lg_pct(const uint64_t *v, size_t n, double p);

/* Prints "<prog>: what: <error>" to stderr and exits 1. */
_Noreturn void lg_die(const char *what, int err);

/* The program name lg_die() prints (default "bench"). */
void lg_set_prog(const char *name);

/* The 32-byte secret of a key id (tests/support/test_keys.h's ts_key_secret). */
typedef void lg_secret_fn(uint64_t key_id, uint8_t sec[32]);

/*
 * Logs n sessions in to 127.0.0.1:port with key ids key_base .. key_base +
 * n - 1, the secrets secret() gives and keepalive_ms (the server ends a
 * session silent for two of them; a fleet only heartbeats while it runs),
 * keeping the earlier ones alive while later ones log in; f->batch is set
 * to true. On failure the
 * sessions made so far are destroyed and *f is left empty.
 */
int lg_fleet_login(lg_fleet_t *f, uint16_t port, uint64_t key_base, uint32_t n,
                   lg_secret_fn *secret, uint32_t keepalive_ms);

/* The same over TLS 1.3, trusting the CAs in tls_ca (PEM); NULL: plain. */
int lg_fleet_login_tls(lg_fleet_t *f, uint16_t port, uint64_t key_base, uint32_t n,
                       lg_secret_fn *secret, uint32_t keepalive_ms, const char *tls_ca);

/* Destroys every session (closing its socket, without a Logout). */
void lg_fleet_close(lg_fleet_t *f);

/*
 * Offers `rate` requests/s for `seconds` spread over sessions [0, nsess)
 * of f, then waits up to 2 s for the stragglers. nsess <= f->n.
 */
lg_result_t lg_run(lg_fleet_t *f, uint32_t nsess, double rate, double seconds);

/* Prints a run's line (and its legs line) with the 1-minute load average. */
void lg_print(const char *label, const lg_result_t *r);

/* Throughput kept up: everything answered, nothing refused, answers at
 * >= 95% of the offered rate, and no runaway queue (p99 under a second). */
bool lg_sustained(const lg_result_t *r);

#endif /* HOURGLASS_BENCH_LOADGEN_H */
