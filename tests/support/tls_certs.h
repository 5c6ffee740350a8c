/*
 * tls_certs.h - throwaway TLS material for the tests and the benchmark,
 * made with the openssl command line (P-256 keys, valid for a day) in a
 * directory the caller owns and removes:
 *   ca.pem, ca.key            a CA
 *   server.pem, server.key    signed by it, for 127.0.0.1 and localhost
 *   client.pem, client.key    signed by it, a client certificate
 *   other_ca.pem, other_ca.key  an unrelated CA (signs nothing here)
 * Runs child processes; any thread, one call at a time per directory.
 */
#ifndef HOURGLASS_TESTS_TLS_CERTS_H
#define HOURGLASS_TESTS_TLS_CERTS_H

/* Writes the files above into dir (existing). 0, or -1 if openssl failed
 * (its output goes to stderr). */
int ts_tls_make(const char *dir);

/* Writes name.pem and name.key in dir: a certificate for Raft member id
 * (subject CN and DNS subjectAltName "hourglass-node-<id>", extended key
 * usage serverAuth and clientAuth) signed by ca.pem / ca.key there, e.g.
 * "ca" or "other_ca" from ts_tls_make. name: letters, digits, '_' only.
 * 0, or -1 if openssl failed. */
int ts_tls_make_node(const char *dir, const char *ca, unsigned id, const char *name);

#endif /* HOURGLASS_TESTS_TLS_CERTS_H */
