/*
 * server.h - a real exchange server in this process, for the gateway,
 * client and hgctl tests and the gateway benchmark: a pipeline on a data
 * directory, the gateway on an ephemeral loopback port, and API keys (the
 * secrets of test_keys.h).
 *
 * Life cycle: ts_server_create -> ts_server_add_key... -> ts_server_run ->
 * ts_server_halt (keeps the data directory, which a later create with
 * data_dir reopens) or ts_server_stop (removes it). ts_server_start and
 * ts_server_reopen do create, keys and run in one call with the "small
 * gateway" settings of the wire-level tests.
 *
 * New data directories go under $TMPDIR (else /tmp) unless base_dir says
 * otherwise, never into the working directory; ts_server_stop removes them.
 * Pipeline mode: loop by default, as hourglassd's; HG_TEST_PIPE_MODE=threads
 * in the environment runs every server of the test in threads mode (the
 * *_threads CTest registrations do), and pipe_mode sets it for one server.
 * Threads: the calling thread owns the ts_server_t; the pipeline's and
 * gateway's own threads run between run and halt.
 */
#ifndef HOURGLASS_TESTS_SERVER_H
#define HOURGLASS_TESTS_SERVER_H

#include <stdint.h>

#include "hourglass/gateway.h"
#include "pipeline_util.h"
#include "test_keys.h"

typedef struct ts_server_options {
  const char *base_dir;      /* where the data directory is made; NULL: $TMPDIR or /tmp */
  const char *data_dir;      /* reopen this data directory (halt left it); NULL: a new one */
  int durable;               /* 1: HG_DURABILITY_DURABLE, 0: ack before durable */
  int small_gateway;         /* the wire tests' gateway: 16 unauthenticated connections,
                                16384 orders, 256 accounts, 4096 positions and pending
                                requests, 1 MiB output cap (128 KiB high water), a
                                64 KiB / 1024-frame retransmit window */
  void (*tweak)(hg_gateway_config_t *cfg); /* changes the gateway config last; NULL: none */
  uint32_t max_sessions;     /* 0: 64 */
  uint32_t max_instruments;  /* exchange slots; 0: 4 */
  uint32_t max_accounts;     /* 0: 64 */
  uint32_t max_book_orders;  /* 0: 1 << 16 */
  uint32_t throttle_rate;    /* per session; 0: gateway default */
  uint32_t ring_capacity;    /* pipeline rings, power of two; 0: 16384 */
  uint32_t staging_capacity; /* the pipeline's stage (power of two, >= 2048); 0: as
                                ring_capacity sets it */
  uint32_t outbound_capacity;/* each consumer's ring (power of two); 0: as
                                ring_capacity sets it */
  uint64_t segment_size;     /* journal segment bytes; 0: 4 MiB (tests) */
  int verbose;               /* server logs to stderr */
  int quiet;                 /* not even the gateway's errors to stderr */
  uint64_t (*clock)(void *ctx); /* the sequencer's clock; NULL: the wall clock */
  void *clock_ctx;
  int journal_direct;        /* journal.force_fallback: pwritev + fdatasync, no io_uring */
  int rt_priority;           /* SCHED_FIFO for the engine, journal and gateway threads; 0: off */
  const hg_clearing_config_t *clearing; /* NULL: no band and no margin (util_no_risk) */
  int pipe_mode;             /* 0: from $HG_TEST_PIPE_MODE ("loop" or "threads"; unset:
                                loop); else HG_PIPE_MODE_* + 1 */
} ts_server_options_t;

typedef struct ts_server {
  char dir[256];    /* the data directory */
  char keys[300];   /* its key store, dir/keys */
  util_log_t plog;  /* the pipeline's log */
  hg_pipeline_t *p;
  hg_gateway_t *gw;
  uint16_t port;    /* after run */
  int verbose;
  int quiet;
} ts_server_t;

/* Creates the server (not started): the data directory (new, or o->data_dir),
 * the gateway, the pipeline, attached. Call ts_server_add_key, then
 * ts_server_run. 0 or a negative error (then ts_server_halt releases what
 * was made). */
int ts_server_create(ts_server_t *s, const ts_server_options_t *o);

/* ts_server_create with default options and TLS 1.3 on order entry, with
 * throwaway certificates made in dir (tls_certs.h: a client trusts
 * dir/ca.pem and connects to 127.0.0.1 or localhost). One such server at
 * a time per process (the certificate paths are kept in statics). 0, -1 if
 * the certificates could not be made, or ts_server_create's error. */
int ts_server_create_tls(ts_server_t *s, const char *dir);

/* Adds key id with the harness secret (ts_key_secret). 0 or the gateway's
 * error. */
int ts_server_add_key(ts_server_t *s, uint64_t id, uint32_t role, uint32_t account,
                      uint32_t firm);

/* The pipeline mode o asks for (pipe_mode, else $HG_TEST_PIPE_MODE). */
int ts_pipe_mode(const ts_server_options_t *o);

/* Starts the pipeline and the gateway; sets s->port. 0 or an error. */
int ts_server_run(ts_server_t *s);

/* Stops and closes the server but keeps its data directory (and key store)
 * for a ts_server_create with data_dir, or ts_server_reopen. */
void ts_server_halt(ts_server_t *s);

/* Stops and closes the server and removes its data directory. */
void ts_server_stop(ts_server_t *s);

/* A small-gateway server (durable unless unsafe) on a fresh data directory,
 * running: tweak changes the gateway config before create, keys (may be
 * NULL) adds keys before start. Quiet, or verbose when the environment sets
 * GT_VERBOSE. 0 or an error. */
int ts_server_start(ts_server_t *s, int unsafe, void (*tweak)(hg_gateway_config_t *cfg),
                    void (*keys)(ts_server_t *s));

/* The same on the existing s->dir (after ts_server_halt, or s->dir set by
 * the caller). */
int ts_server_reopen(ts_server_t *s, int unsafe, void (*tweak)(hg_gateway_config_t *cfg),
                     void (*keys)(ts_server_t *s));

#endif /* HOURGLASS_TESTS_SERVER_H */
