/*
 * transport_tls.h (internal) - a libraft transport (struct raft_uv_transport)
 * that carries the Raft RPCs over TLS 1.3 with mutual authentication.
 *
 * Each connection is TCP plus a TLS session driven through memory BIOs on
 * the loop (no threads, OpenSSL never sees a socket). After the handshake
 * the connecting node sends a preamble naming its id and Raft address; the
 * accepting node checks that the client certificate names that id and
 * answers with one acknowledgement byte. Only then does libraft get a
 * stream: one end of a socketpair (a uv_pipe_t allocated with raft_malloc,
 * which libraft closes and frees), while this module pumps bytes between
 * the other end and the TLS session.
 *
 * Identity: every node's certificate is signed by the cluster CA (the file
 * tls_ca, which may hold several CAs during a rotation) and names the node
 * as "hourglass-node-<id>": a DNS subjectAltName, or the subject CN when the
 * certificate has no DNS subjectAltName (OpenSSL's host check). Extended key
 * usage, if present, must allow both serverAuth and clientAuth: each node is
 * a server to some peers and a client to others. A client checks the
 * server's name against the id libraft connects to; a server checks the
 * client's against the id in its preamble.
 *
 * Threads: everything runs on the loop's thread, like libraft.
 * Memory: the transport's state is allocated by rtls_init and released by
 * rtls_release, which may be called only after the close callback libraft
 * passed to transport->close has run (or if listen was never called and
 * close never started). Each connection owns its handles, its TLS session
 * and its buffers and is freed in the last handle's close callback.
 * Errors: connect and listen return libraft codes (RAFT_NOMEM, RAFT_IOERR,
 * RAFT_NOCONNECTION). A connection that fails in TCP connect is not a TLS
 * failure; one that fails in or right after the handshake (bad certificate,
 * wrong name, garbage, bad preamble, handshake timeout, peer closed during
 * the handshake) is counted (rtls_failures) and logged with the peer's
 * address and OpenSSL's reason only, at most about once a second.
 * Limits: RTLS_HANDSHAKE_MS to finish the handshake and preamble; at most
 * RTLS_MAX_HANDSHAKES inbound connections in their handshake at once (one
 * more is closed and counted); a peer's unsent data is bounded by pausing
 * the reading side above RTLS_HIGH_WATER bytes queued for writing. Each
 * connection holds two 64 KiB buffers besides OpenSSL's state.
 */
#ifndef HG_REPLICATION_TRANSPORT_TLS_H
#define HG_REPLICATION_TRANSPORT_TLS_H

#include <stddef.h>
#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "hourglass/log.h"

#define RTLS_HANDSHAKE_MS 5000u
#define RTLS_MAX_HANDSHAKES 64u
#define RTLS_HIGH_WATER (1u << 20)
#define RTLS_LOW_WATER (256u << 10)

typedef struct rtls_config {
  const char *cert;         /* PEM chain: this node's certificate first */
  const char *key;          /* PEM private key of cert */
  const char *ca;           /* PEM CA(s) that sign the members' certificates */
  const char *bind_address; /* "ip:port" to listen on; NULL: the Raft address */
  uint64_t self_id;         /* this node: cert must name it; log lines */
  hg_log_fn log;            /* may be NULL */
  void *log_ctx;
} rtls_config_t;

/* Sets up t (which libraft then drives through its function pointers) on
 * loop: loads and checks the certificate, key and CA. Returns 0, -errno of
 * a file it cannot read (-ENOENT: it does not exist, -EACCES), HG_EINVAL (a
 * file missing from cfg or that cannot be loaded, the key does not match
 * the certificate, a certificate that does not name self_id, a bad bind
 * address) or -ENOMEM; on failure
 * nothing is left to release and err holds the reason (file names and
 * OpenSSL's text, never key material). */
int rtls_init(struct raft_uv_transport *t, uv_loop_t *loop, const rtls_config_t *cfg,
              char *err, size_t err_len);

/* Frees what rtls_init allocated; see Memory above. */
void rtls_release(struct raft_uv_transport *t);

/* TLS failures counted since rtls_init. */
uint64_t rtls_failures(const struct raft_uv_transport *t);

#endif
