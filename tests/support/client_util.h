/*
 * client_util.h - helpers for tests that drive a ts_server_t (server.h)
 * through the client library: a client for a harness key, waiting for
 * Responses, listing a contract, resting an order, setting up a market over
 * the wire as an operator, and a sequencer clock the test sets. Every wait
 * is bounded (5 s, 10 s for batches); a hg_client_t is used by one thread.
 */
#ifndef HOURGLASS_TESTS_CLIENT_UTIL_H
#define HOURGLASS_TESTS_CLIENT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/client.h"
#include "server.h"

/* A client for key_id on the server (not connected); over TLS trusting
 * ca_file after ch_use_tls(ca_file), plain again after ch_use_tls(NULL).
 * The path is kept, not copied; set it before making clients. */
int ch_client(const ts_server_t *s, uint64_t key_id, hg_client_t **out);
void ch_use_tls(const char *ca_file);

/* A client of key_id with the 32-byte secret secret_hex for a group of
 * hourglassd on loopback (tests/daemon/test_cluster*.c): it tries
 * 127.0.0.1:port first, then nodes ("127.0.0.1:P,..."), and follows the
 * leader a follower names; replies time out after 2 s; keepalive 30 s. Not connected. 0
 * or hg_client_create's error. */
int ch_node_client(int port, const char *nodes, uint64_t key_id, const char *secret_hex,
                   hg_client_t **out);

/* hg_client_connect(c) until it succeeds or timeout_s pass, 100 ms apart;
 * between (may be NULL) runs before each retry. Returns the last result. */
int ch_connect_retry(hg_client_t *c, double timeout_s, void (*between)(void));

/* Waits for the Response to request seq; returns its reason, or -1. */
int ch_response(hg_client_t *c, uint64_t seq);

/* The day number of "YYYY-MM-DD"; the test's own dates, so one that does
 * not parse is a bug in the test and aborts it. */
int32_t ch_day(const char *s);

/* A sequencer clock the test sets: pass ch_clock_read as ts_server_options_t.clock
 * and the test's _Atomic uint64_t (ns since the epoch) as clock_ctx. */
uint64_t ch_clock_read(void *ctx);

/* Sets that clock to day (days since the epoch) + secs. */
void ch_clock_set(_Atomic uint64_t *now, int32_t day, int64_t secs);

/* Operator op lists instrument 1, "B200.A.2027-02" (tick size 1000, unit
 * 1000, ticks 1..100000, at most 1000 per order, 1024 orders, 64 accounts,
 * reference price 500), and waits for the Response. Returns its reason (0:
 * listed), or -1 if it could not be sent or no Response came. */
int ch_list_contract(hg_client_t *op);

/* The same with room for max_orders orders in the book. */
int ch_list_contract_sized(hg_client_t *op, uint32_t max_orders);

/* The cluster tests' market, set up by operator op: instrument 1 as
 * ch_list_contract_sized(op, max_orders), account 1 of firm 1 with
 * 1,000,000,000,000 of cash. 0, or -1 at the first step refused. */
int ch_cluster_market(hg_client_t *op, uint32_t max_orders);

/* Sends a GTC limit order on instrument 1 and waits for the execution
 * report answering it (other messages are skipped). 0 if that report is
 * NEW; -1 if it is anything else, the order could not be sent, or the
 * receive failed or timed out (5 s). */
int ch_order(hg_client_t *c, uint32_t side, int64_t price, int64_t qty, uint64_t clordid);

/* Waits for the Responses to requests [first, last]; 0 if all said done. */
int ch_responses(hg_client_t *c, uint64_t first, uint64_t last);

/* Operator op_key lists instruments 1..n_instr ("B200.A.2027-01", ...,
 * ticks 1..100000) and adds accounts[i] in firms[i]; requests are pipelined
 * (sent at once, then every Response awaited). 0 or -1. */
int ch_setup_market(const ts_server_t *s, uint64_t op_key, uint32_t n_instr,
                    const uint32_t *accounts, const uint32_t *firms, size_t n);

/* Creates and starts a default server on s with an operator key op_key and
 * two traders: key_a on account acc_a of firm 1, key_b on acc_b of firm 2;
 * then ch_setup_market with n_instr instruments. 0, or -1 (s may be
 * created: stop it). */
int ch_two_trader_market(ts_server_t *s, uint64_t op_key, uint64_t key_a, uint32_t acc_a,
                         uint64_t key_b, uint32_t acc_b, uint32_t n_instr);

#endif /* HOURGLASS_TESTS_CLIENT_UTIL_H */
