/*
 * link_proxy.h - a TCP relay between the Raft ports of a group of
 * hourglassd nodes on loopback, that the fault tests cut and heal link by
 * link (tests/daemon/test_cluster_faults.c).
 *
 * Node i (1..n) advertises 127.0.0.1:front[i-1] in cluster.members and
 * binds 127.0.0.1:back[i-1] (cluster.listen); the proxy listens on every
 * front port and relays each connection to the back port. A connection's
 * first 16 bytes are libraft's handshake (u64 protocol, u64 sender id, both
 * little-endian), so the proxy knows which link, sender to receiver, each
 * connection belongs to: plain Raft only (not with cluster.tls_*).
 *
 * A cut link is a black hole, as a lost network is: the bytes of its open
 * connections are read and dropped in both directions (the senders see no
 * error), and new connections on it are accepted and treated the same.
 * Healing a link closes its black-holed connections (their streams lost
 * bytes), so the nodes reconnect and start clean streams.
 *
 * Threads: the relay runs on its own thread, started by lp_start and joined
 * by lp_stop; lp_cut may be called from any thread. Everything is bounded:
 * at most LP_MAX_CONNS connections at a time (more are closed at accept).
 */
#ifndef HOURGLASS_TESTS_LINK_PROXY_H
#define HOURGLASS_TESTS_LINK_PROXY_H

#define LP_MAX_NODES 8
#define LP_MAX_CONNS 128

typedef struct lp_proxy lp_proxy_t;

/* Listens on 127.0.0.1:front[i] for node i + 1 (i < n <= LP_MAX_NODES) and
 * starts the relay thread. 0, or -errno (a front port is taken, ...). */
int lp_start(int n, const int *front, const int *back, lp_proxy_t **out);

/* Cuts (cut != 0) or heals both directions between nodes a and b (ids
 * 1..n). a == 0 means every node other than b: lp_cut(p, 0, L, 1)
 * isolates node L from the rest. */
void lp_cut(lp_proxy_t *p, int a, int b, int cut);

/* Stops the thread, closes every socket, frees p. NULL: no-op. */
void lp_stop(lp_proxy_t *p);

#endif /* HOURGLASS_TESTS_LINK_PROXY_H */
