/*
 * hg_gw_testserver: a pipeline and a gateway on a data directory, for
 * client development and interop tests until the daemon exists.
 *
 *   hg_gw_testserver --dir DIR [--keys FILE] [--port N] [--port-file FILE]
 *                    [--unsafe]
 *
 * DIR is created if missing (journal/, state/ and keys/ inside). --keys
 * bootstraps API keys from FILE (see hg_gateway_load_keys). --port 0 (the
 * default) picks a free port; the chosen one is printed on stdout as
 * "port N" and written to --port-file if given. --unsafe releases results
 * before they are durable (fast, for throwaway markets). Stops on SIGINT or
 * SIGTERM. Exit status: 0 after a clean stop, 1 on a start-up error.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hourglass/error.h"
#include "hourglass/gateway.h"
#include "pipeline_util.h"

static int mkdir_p(const char *d) { return mkdir(d, 0700) == 0 || errno == EEXIST ? 0 : -errno; }

int main(int argc, char **argv) {
  const char *dir = NULL, *keys = NULL, *port_file = NULL;
  int port = 0, unsafe = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
      keys = argv[++i];
    } else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      port = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--port-file") == 0 && i + 1 < argc) {
      port_file = argv[++i];
    } else if (strcmp(argv[i], "--unsafe") == 0) {
      unsafe = 1;
    } else {
      fprintf(stderr, "usage: %s --dir DIR [--keys FILE] [--port N] [--port-file FILE] [--unsafe]\n",
              argv[0]);
      return 2;
    }
  }
  if (dir == NULL || port < 0 || port > 65535) {
    fprintf(stderr, "%s: --dir is required and --port must be 0..65535\n", argv[0]);
    return 2;
  }
  /* Every thread inherits this mask; the main thread takes the signals. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  char keydir[4096];
  snprintf(keydir, sizeof keydir, "%s/keys", dir);
  if (mkdir_p(dir) != 0 || mkdir_p(keydir) != 0) {
    fprintf(stderr, "%s: cannot create %s: %s\n", argv[0], keydir, strerror(errno));
    return 1;
  }
  hg_gateway_config_t gc;
  hg_gateway_config_init(&gc);
  gc.key_dir = keydir;
  gc.port = (uint16_t)port;
  hg_gateway_t *gw = NULL;
  int rc = hg_gateway_create(&gc, &gw);
  if (rc != 0) {
    fprintf(stderr, "%s: gateway: %s\n", argv[0], hg_strerror(rc));
    return 1;
  }
  hg_pipeline_config_t pc;
  hg_pipeline_config_init(&pc);
  pc.data_dir = dir;
  pc.exchange.max_instruments = 64;
  pc.exchange.max_accounts = 4096;
  pc.exchange.max_book_orders = 1u << 16;
  /* A development server: no band and no margin, any price passes. */
  pc.exchange.clearing = util_no_risk();
  pc.durability = unsafe ? HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE : HG_DURABILITY_DURABLE;
  pc.out_notify = hg_gateway_notify;
  pc.out_notify_ctx = gw;
  pc.loop_drain = hg_gateway_drain;
  pc.loop_drain_ctx = gw;
  hg_pipeline_t *p = NULL;
  rc = hg_pipeline_open(&pc, &p);
  if (rc == 0) rc = hg_gateway_attach(gw, p);
  unsigned line = 0;
  if (rc == 0 && keys != NULL) {
    rc = hg_gateway_load_keys(gw, keys, &line);
    if (rc != 0) fprintf(stderr, "%s: keys %s line %u: %s\n", argv[0], keys, line, hg_strerror(rc));
  }
  if (rc == 0) rc = hg_pipeline_start(p);
  if (rc == 0) rc = hg_gateway_start(gw);
  if (rc != 0) {
    fprintf(stderr, "%s: start: %s\n", argv[0], hg_strerror(rc));
    hg_gateway_stop(gw);
    hg_pipeline_close(p);
    hg_gateway_destroy(gw);
    return 1;
  }
  printf("port %u\n", hg_gateway_port(gw));
  fflush(stdout);
  if (port_file != NULL) {
    FILE *f = fopen(port_file, "w");
    if (f != NULL) {
      fprintf(f, "%u\n", hg_gateway_port(gw));
      fclose(f);
    }
  }
  int sig = 0;
  sigwait(&sigs, &sig);
  hg_gateway_stop(gw);
  rc = hg_pipeline_stop(p);
  hg_pipeline_close(p);
  hg_gateway_destroy(gw);
  return rc == 0 ? 0 : 1;
}
