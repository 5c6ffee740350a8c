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
