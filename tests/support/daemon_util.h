/*
 * daemon_util.h - for the hourglassd integration tests and bench_cluster:
 * temporary directories, starting the daemon as a child process with its
 * log in a file, waiting for log lines, loopback HTTP requests, stopping
 * with a bounded wait. Everything is bounded in time; only 127.0.0.1 is used.
 * Children started by du_spawn are remembered (at most 16 at a time) so that
 * du_kill_all, as a cmocka teardown, never leaves a daemon running. Main
 * thread only.
 */
#ifndef HOURGLASS_TESTS_DAEMON_UTIL_H
#define HOURGLASS_TESTS_DAEMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Removes a directory tree (errors ignored). */
void du_rm_rf(const char *dir);

/* A fresh directory "<cwd>/hgtest-<tag>-XXXXXX" in the build tree (a real
 * disk). Returns buf, or NULL if it does not fit in cap or mkdtemp fails. */
char *du_tmpdir(char *buf, size_t cap, const char *tag);

/* CLOCK_MONOTONIC in seconds. */
double du_now(void);

void du_sleep_ms(int ms);

/* Starts argv[0] with argv (NULL-terminated, argv[0] included); stdout and
 * stderr appended to log. Returns the pid. For hourglassd with
 * $HG_TEST_PIPE_MODE set (the *_threads CTest registrations), "-o
 * pipeline.mode=$HG_TEST_PIPE_MODE" comes first, so later -o options win. */
pid_t du_spawn(char *const argv[], const char *log);

/* Reads the whole file into a malloc'd string ("" if missing). */
char *du_read(const char *path);

/* Waits until log contains needle; returns a malloc'd copy of the log, or
 * NULL on timeout. */
char *du_wait_log(const char *log, const char *needle, double timeout_s);

/* Value after `key=` in the last line of text containing `line_has`, up to
 * a space, newline or quote, into out (cap bytes). 0, or -1 if absent or
 * too long. */
int du_field(const char *text, const char *line_has, const char *key, char *out, size_t cap);

/* Sends raw bytes to 127.0.0.1:port and reads until the peer closes or
 * `want_responses` complete responses arrived (counted by "HTTP/1.1 "), or
 * 5 s pass. want_responses < 0: half-close after sending (the server sees
 * the end of the request stream) and read until it closes. Returns a
 * malloc'd reply ("" on connect failure). */
char *du_http_raw(int port, const char *req, size_t len, int want_responses);

/* The hourglassd a benchmark runs: given, else $HG_HOURGLASSD, else
 * bin/hourglassd of the build tree the running program is in (its
 * directory's parent). NULL when it cannot be found. */
const char *du_daemon_path(const char *given);

/* GET path with Connection: close; as du_http_raw. */
char *du_get(int port, const char *path);

/* The port that component ("http" or "gateway") of a daemon logged it
 * listens on, found in the daemon's log text; -1 if the line is absent. */
int du_listen_port(const char *log, const char *component);

/* Replaces the file at path with text; 0 or -1. */
int du_write_file(const char *path, const char *text);

/* The value of the Prometheus metric name on the daemon's HTTP port,
 * UINT64_MAX if it is absent. */
uint64_t du_metric(int port, const char *name);

/* The status code of an HTTP/1.1 response, -1 if it is not one. */
int du_status(const char *resp);

/* Forgets pid (du_kill_all will not kill it). */
void du_forget(pid_t pid);

/* Sends sig (0: none) and waits up to timeout_s; returns the exit status,
 * -1 on timeout (the child is then killed), -2 if it died of a signal. */
int du_stop(pid_t pid, int sig, double timeout_s);

/* Teardown (a cmocka setup/teardown function): kills and reaps every child
 * still running. Returns 0. */
int du_kill_all(void **state);

/* A port that was free a moment ago on 127.0.0.1, outside the kernel's
 * ephemeral range (no outgoing connection takes it before the daemon
 * binds it), never the same twice in one process; 0 if none is free. */
int du_free_port(void);

/* Runs a shell command, returns its exit status (-1 if it did not exit). */
int du_system(const char *cmd);

/* `hourglassd --scenario NAME` run twice, each on a fresh data directory
 * (tests/daemon/test_month_scenario.c, test_squeeze_scenario.c): dir[i], its
 * stdout out[i] (NULL if unreadable) and exit status rc[i]. */
typedef struct du_scenario_runs {
  char dir[2][400];
  char *out[2];
  int rc[2];
} du_scenario_runs_t;
/* Runs `bin --scenario name --scenario-dir dir > out_file 2> out_file.err`;
 * its exit status. */
int du_scenario_run(const char *bin, const char *name, const char *dir, const char *out_file);
/* Both runs; 0, or -1 when a directory or an output could not be had. */
int du_scenario_runs(du_scenario_runs_t *r, const char *bin, const char *name);
/* Frees the outputs, removes the directories and output files. */
void du_scenario_runs_free(du_scenario_runs_t *r);
/* 1 iff `bin --state-hash --upto SEQ -o data_dir=dir` prints the
 * "last_seq=SEQ state_hash=H" line found in out (a scenario's output). */
int du_scenario_hash_replays(const char *bin, const char *dir, const char *out);

/* One hourglassd of a Raft group on loopback (tests/daemon/test_cluster.c,
 * bench/bench_cluster.c). */
typedef struct du_node {
  int id; /* cluster.id, 1.. */
  int raft_port, client_port, http_port;
  int starts;     /* how many times started: names the log */
  int rebuilds;   /* rebuilds in place logged by the earlier starts */
  char dir[600];  /* data_dir */
  char log[700];  /* the current start's log */
  pid_t pid;      /* 0: not running */
} du_node_t;

/* Plans n nodes under root: ids 1..n, free ports, data directories
 * root/n<id> (not created), and writes the group's cluster.members value
 * ("id=127.0.0.1:raft/127.0.0.1:client,...") to members and the client's
 * node list ("127.0.0.1:client,...") to nodes. 0, or -1 if a path or list
 * does not fit. */
int du_cluster_plan(du_node_t *node, int n, const char *root, char *members, size_t members_cap,
                    char *nodes, size_t nodes_cap);

/* order[0..n): the nodes 0..n-1 other than leader in index order, then
 * leader: a rolling restart's order, followers first. */
void du_rolling_order(int n, int leader, int *order);

/* Writes the keys file of the cluster tests and bench_cluster at path
 * (mode 0600), every key with the secret secret_hex: 1 operator, 2 and 4
 * traders (account 1, firm 1), 3 risk viewer (firm 1). 0, or -1. */
int du_cluster_keys(const char *path, const char *secret_hex);

/* Starts hourglassd bin as node (its log root/node<id>.<starts>.log, data
 * in node->dir, listening on its client and HTTP ports, keys from
 * keys_file, TLS off, DU_SMALL_OPTS), a member of the group when members is
 * not NULL; extra is a NULL-terminated list of further "-o" values, or
 * flags such as "--demo" (what starts with "--" is passed as it is; may be
 * NULL; at most 16). Does not wait: node->pid is set, 0 if it could not be
 * started. */
void du_node_spawn(du_node_t *node, const char *bin, const char *root, const char *members,
                   const char *keys_file, const char *const *extra);

/* The value of "key":<number> in text (a /health answer); UINT64_MAX if
 * absent or text is NULL. */
uint64_t du_json_u64(const char *text, const char *key);

/* The index in node[0..n) of the running node whose /health says it takes
 * orders, asking every 50 ms for up to timeout_s; -1 if none. between (may
 * be NULL) runs before each round, e.g. to restart nodes that stopped. */
int du_cluster_leader(du_node_t *node, int n, double timeout_s, void (*between)(void));

/* The seq the node taking orders in node[0..n) says is committed, once
 * every running node has applied it and made it durable (/health), asking
 * every 100 ms for up to timeout_s; UINT64_MAX if they did not converge.
 * between (may be NULL) runs before each round. */
uint64_t du_cluster_quiesce(du_node_t *node, int n, double timeout_s, void (*between)(void));

/* du_node_spawn, then waits up to 120 s for the daemon's "ready" line.
 * 0, or -1 (it did not start or get ready: node->pid may still be set). */
int du_node_start(du_node_t *node, const char *bin, const char *root, const char *members,
                  const char *keys_file, const char *const *extra);

/* Reaps node if it exited: 0 while it runs (or node->pid is 0); -1 if it
 * exited (a node rebuilds itself in place, so any exit the test did not
 * ask for is a failure), with the end of its log on stderr. node->pid is
 * 0 afterwards. */
int du_node_reap(du_node_t *node);

/* Reaps every node of node[0..n) that exited: 0, or -1 at once when one
 * did (du_node_reap). */
int du_cluster_supervise(du_node_t *node, int n);

/* Occurrences of needle (not empty) in the file at path; 0 if unreadable. */
int du_log_count(const char *path, const char *needle);

/* How many times node rebuilt itself from the group in place (log:
 * "rebuilding this node from the group in place"), over all its starts. */
int du_node_rebuilds(const du_node_t *node);

/* du_node_rebuilds summed over node[0..n). */
int du_cluster_rebuilds(const du_node_t *node, int n);

/* Small engine sizes so that a daemon starts in a fraction of a second. */
#define DU_SMALL_OPTS                                                                  \
  "-o", "pipeline.inbound_capacity=4096", "-o", "pipeline.outbound_capacity=16384",   \
      "-o", "pipeline.staging_capacity=16384", "-o", "journal.segment_size=1M", "-o", \
      "journal.batch_bytes=256K", "-o", "limits.max_book_orders=65536", "-o",         \
      "limits.max_instruments=8", "-o", "limits.max_accounts=64"

#endif /* HOURGLASS_TESTS_DAEMON_UTIL_H */
