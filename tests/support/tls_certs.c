/*
 * tls_certs.c - see tls_certs.h. One shell command line per file set, so
 * a failure names the openssl step in its stderr.
 */
#include "tls_certs.h"

#include <stdio.h>
#include <stdlib.h>

static int run(const char *dir, const char *script) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd '%s' && { %s ; } >/dev/null 2>tls_certs.err || { cat tls_certs.err >&2; exit 1; }",
           dir, script);
  return system(cmd) == 0 ? 0 : -1;
}

#define KEY(name) "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out " name ".key"
#define CA(name, cn)                                                                            \
  KEY(name) " && openssl req -x509 -new -key " name ".key -days 1 -subj '/CN=" cn "' -out " name \
            ".pem"
#define LEAF(name, cn, ext)                                                                     \
  KEY(name) " && openssl req -new -key " name ".key -subj '/CN=" cn "' -out " name ".csr"       \
            " && printf '" ext "' > " name ".ext"                                                \
            " && openssl x509 -req -in " name ".csr -CA ca.pem -CAkey ca.key -CAcreateserial"    \
            " -days 1 -extfile " name ".ext -out " name ".pem"

int ts_tls_make(const char *dir) {
  if (run(dir, CA("ca", "hourglass test CA")) != 0) return -1;
  if (run(dir, CA("other_ca", "unrelated test CA")) != 0) return -1;
  if (run(dir, LEAF("server", "localhost",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n")) != 0)
    return -1;
  if (run(dir, LEAF("client", "test client", "extendedKeyUsage=clientAuth\\n")) != 0) return -1;
  return 0;
}

int ts_tls_make_node(const char *dir, const char *ca, unsigned id, const char *name) {
  char script[1536];
  snprintf(script, sizeof script,
           KEY("%2$s") " && openssl req -new -key %2$s.key -subj '/CN=hourglass-node-%3$u'"
           " -out %2$s.csr"
           " && printf 'subjectAltName=DNS:hourglass-node-%3$u\\nextendedKeyUsage=serverAuth,"
           "clientAuth\\n' > %2$s.ext"
           " && openssl x509 -req -in %2$s.csr -CA %1$s.pem -CAkey %1$s.key -CAcreateserial"
           " -days 1 -extfile %2$s.ext -out %2$s.pem",
           ca, name, id);
  return run(dir, script);
}
