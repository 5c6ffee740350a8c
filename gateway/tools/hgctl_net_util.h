/*
 * hgctl_net_util.h (internal) - what hgctl's network commands (hgctl_trade.c,
 * hgctl_op.c, hgctl_risk.c) share, defined in hgctl_net.c: option parsing,
 * the units values are typed and printed in, the session with the gateway,
 * waiting for a request's reply, and names of the wire's codes.
 *
 * Main thread only: the option and unit state is process-global (one command
 * runs per process). Functions that print an error print it on stderr as
 * "hgctl CMD: why" and return the exit status to give: EXIT_USAGE for bad
 * input, EXIT_FAIL for a refusal, a lost connection or a timeout.
 */
#ifndef HG_GATEWAY_HGCTL_NET_UTIL_H
#define HG_GATEWAY_HGCTL_NET_UTIL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hgctl_args.h" /* the exit statuses */
#include "hgctl_table.h"
#include "hourglass/client.h"

typedef Hourglass__V1__Envelope env_t;
#define BODY(x) HOURGLASS__V1__ENVELOPE__BODY_##x

/* ------------------------------------------------------------- options */

/* One option of a command: val for "--name value", flag for "--name". */
typedef struct opt {
  const char *name;  /* without "--" */
  const char **val;  /* option with a value */
  bool *flag;        /* option without one */
} opt_t;

/* The connection options as typed (NULL: not given). */
typedef struct conn {
  const char *host, *port, *key_id, *secret, *timeout;
  const char *nodes;                               /* --nodes: a cluster's other nodes */
  const char *ca, *tls_name, *tls_cert, *tls_key; /* TLS files and name */
  bool tls;                                        /* --tls */
} conn_t;

extern conn_t net_conn;
/* --raw: prices in ticks, money in micro-USD, times in ns, in and out. */
extern bool net_raw;
/* The reply timeout, from --timeout once net_open_session has run. */
extern int net_timeout_ms;
/* Set by net_on_signal (SIGINT, SIGTERM) to end a command that follows a
 * stream. */
extern volatile sig_atomic_t net_stop;

/* The options every network command takes; put first in its opt_t table. */
#define CONN_OPTS                                                                        \
  {"host", &net_conn.host, NULL}, {"port", &net_conn.port, NULL},                        \
      {"key-id", &net_conn.key_id, NULL}, {"secret", &net_conn.secret, NULL},            \
      {"timeout", &net_conn.timeout, NULL}, {"raw", NULL, &net_raw},                     \
      {"tls", NULL, &net_conn.tls}, {"ca", &net_conn.ca, NULL},                          \
      {"tls-name", &net_conn.tls_name, NULL}, {"tls-cert", &net_conn.tls_cert, NULL},    \
      {"tls-key", &net_conn.tls_key, NULL}, {"nodes", &net_conn.nodes, NULL}
#define CONN_NOPTS 12

/* Parses --name value / --name=value / --flag; positional arguments go to
 * pos[0..npos). --help prints usage and exits 0. Returns 0, or EXIT_USAGE
 * after printing why and the usage. */
int net_parse(const char *cmd, int argc, char **argv, const opt_t *opts, size_t n,
              const char **pos, size_t npos, const char *usage);

/* Strict decimal integers in [lo, hi] / [0, hi]; false for anything else. */
bool net_num(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool net_unum(const char *s, uint64_t hi, uint64_t *out);

/* The value of option --name (s, NULL when not given: required) as an
 * integer in [lo, hi]. 0 or EXIT_USAGE. */
int net_need_num(const char *cmd, const char *name, const char *s, int64_t lo, int64_t hi,
                 int64_t *out);
/* A price in USD per GPU-hour ("3.42"), above zero; ticks from lo up with
 * --raw. 0 or EXIT_USAGE. */
int net_need_price(const char *cmd, const char *name, const char *s, int64_t lo, int64_t *out);
/* Money in USD ("1250.50", up to 6 decimals), or micro-USD with --raw;
 * above zero. 0 or EXIT_USAGE. */
int net_need_money(const char *cmd, const char *name, const char *s, int64_t *out);

/* Printed forms of a price (ticks), money and an index value (micro-USD per
 * GPU-hour, six decimals), or the integer with --raw. Each result is in one
 * of eight rotating static buffers, so one printf may show several: valid
 * until eight more calls. */
const char *net_px(int64_t ticks);
const char *net_usd(int64_t micro);
const char *net_index_usd(int64_t micro);

/* Builds the client from the connection options (and environment) and logs
 * in. 0 and *out (close with net_close_session), EXIT_USAGE for a bad
 * option, EXIT_FAIL when the connection or login fails. While a cluster
 * elects its leader (LOGIN_NOT_LEADER naming none, or, with a node list,
 * nodes that do not answer) the login is tried again every 50 ms within
 * --timeout. */
int net_open_session(const char *cmd, hg_client_t **out);
/* Logs out (1 s at most) and destroys c. */
void net_close_session(hg_client_t *c);

/* Lower-case wire names of reject and cancel reasons and fixing statuses
 * (hourglass.proto), "other" for a value the schema lacks. Each returns its
 * own static buffer, valid until its next call. */
const char *net_reject_name(uint32_t r);
const char *net_cancel_name(uint32_t r);
const char *net_fixing_status_name(uint32_t s);
/* The settlement command a SettlementResult answers: the name of its field
 * in Command's body ("daily_settlement"). Static string. */
const char *net_command_name(uint32_t c);
/* Names of a fixing's kind and outcome; static strings. */
const char *net_fixing_kind_name(uint32_t k);
const char *net_fixing_outcome_name(uint32_t k);
/* "trading", "halted", "delisted" or "?". */
const char *net_state_name(uint32_t s);

/* Prints an ExecutionReport as one "TYPE key=value ..." line on stdout. */
void net_print_exec(const env_t *e);
/* Receives until a frame answers request seq (its ref_seq). Returns 0 and
 * *e (valid until the next receive on c), or EXIT_FAIL after printing why
 * (timeout, lost connection, the gateway ended the session). */
int net_await_reply(const char *cmd, hg_client_t *c, uint64_t seq, const env_t **e);
/* A Response's verdict: 0 unless e is a Response with a reason, then
 * EXIT_FAIL after printing the refusal. */
int net_response_status(const char *cmd, const env_t *e);
/* For a command that follows a stream, after hg_client_recv returned r
 * (not 0, not -EINTR) and e: true, after printing why, when the connection
 * is lost (r < 0) or the gateway ended the session (a Terminate). */
bool net_stream_ended(const char *cmd, int r, const env_t *e);
/* For a command that follows a stream: true when hg_client_recv's r and e
 * say the session ended for a failover (the connection lost, or
 * TERM_NOT_LEADER from a node that no longer takes orders), which
 * net_reconnect() may repair. */
bool net_stream_lost(int r, const env_t *e);
/* Logs c in again (at the new leader, through the node list), trying for
 * --timeout while the cluster elects one; says so on stderr. 0, or
 * EXIT_FAIL after printing why. r: what ended the stream (see above). */
int net_reconnect(const char *cmd, hg_client_t *c, int r);
/* Prints every report of this order (or of this request) that arrives
 * within settle_ms, e.g. the fills after a NEW. */
void net_print_followers(hg_client_t *c, uint64_t seq, uint64_t order_id, int settle_ms);
/* Waits for the Response to operator command seq and prints
 * "OK VERB engine_seq=..." (with amount and balance when present). 0 or
 * EXIT_FAIL. */
int net_op_reply(const char *cmd, const char *verb, hg_client_t *c, uint64_t seq);

/* An instrument given as an id or a symbol (looked up in the instrument
 * list). 0 and *id, or EXIT_FAIL after printing why. */
int net_resolve_instrument(const char *cmd, hg_client_t *c, const char *val, uint32_t *id);
/* `hgctl instruments` and `hgctl op list`: the whole command, cmd naming it. */
int net_list_instruments(const char *cmd, int argc, char **argv);

/* A --format value (text, json, csv; NULL: text) into *out; EXIT_USAGE
 * after saying what it may be. */
int net_need_format(const char *cmd, const char *s, hgctl_out_t *out);

/* Symbols of the listed instruments, fetched before a reply that names
 * instruments by id (a reply lives only until the next receive). At most
 * SYMS_MAX are kept. */
#define SYMS_MAX 1024
typedef struct syms {
  uint32_t n;
  uint32_t id[SYMS_MAX];
  char sym[SYMS_MAX][40];
} syms_t;
/* 0, or EXIT_FAIL after printing why. */
int net_fetch_symbols(const char *cmd, hg_client_t *c, syms_t *t);
/* The symbol of id, "-" if not listed. */
const char *net_symbol_of(const syms_t *t, uint32_t id);

/* Execution reports as a table for scripts (--format json|csv): the
 * columns, then one row per report. */
const hgctl_col_t *net_exec_cols(size_t *n);
void net_table_exec(hgctl_table_t *t, const env_t *e, const syms_t *syms);

/* A signal handler that sets net_stop. */
void net_on_signal(int sig);

#endif /* HG_GATEWAY_HGCTL_NET_UTIL_H */
