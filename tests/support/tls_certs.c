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

/* name.key and name.pem in dir: a certificate with subject CN cn and the
 * extensions ext (printf text: each line ends in a backslash-n), signed
 * by ca.pem / ca.key there. */
static int leaf(const char *dir, const char *ca, const char *name, const char *cn,
                const char *ext) {
  char script[1536];
  snprintf(script, sizeof script,
           KEY("%2$s") " && openssl req -new -key %2$s.key -subj '/CN=%3$s' -out %2$s.csr"
                       " && printf '%4$s' > %2$s.ext"
                       " && openssl x509 -req -in %2$s.csr -CA %1$s.pem -CAkey %1$s.key"
                       " -CAcreateserial -days 1 -extfile %2$s.ext -out %2$s.pem",
           ca, name, cn, ext);
  return run(dir, script);
}

int ts_tls_make(const char *dir) {
  if (run(dir, CA("ca", "hourglass test CA")) != 0) return -1;
  if (run(dir, CA("other_ca", "unrelated test CA")) != 0) return -1;
  if (leaf(dir, "ca", "server", "localhost",
           "subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n") != 0)
    return -1;
  if (leaf(dir, "ca", "client", "test client", "extendedKeyUsage=clientAuth\\n") != 0) return -1;
  return 0;
}

int ts_tls_make_node(const char *dir, const char *ca, unsigned id, const char *name) {
  char cn[32], ext[128];
  snprintf(cn, sizeof cn, "hourglass-node-%u", id);
  snprintf(ext, sizeof ext, "subjectAltName=DNS:%s\\nextendedKeyUsage=serverAuth,clientAuth\\n", cn);
  return leaf(dir, ca, name, cn, ext);
}
