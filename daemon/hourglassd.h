/*
 * hourglassd.h (internal) - what the parts of the hourglassd program share:
 * the daemon's state (daemon_t) and the functions each file gives the
 * others. hourglassd.c parses the command line and picks a mode; serve.c
 * runs the exchange (start-up, threads, signals, reload, shutdown);
 * http_api.c answers the HTTP port; data_dir.c creates, locks and diagnoses
 * the data directory; tools_main.c holds the tool modes (--state-hash,
 * --backup-*, --scenario); cluster.c runs a node of a Raft group
 * (cluster.h). The rest have their own headers: daemon_config.h, daemon_log.h,
 * http.h, market_api.h, mdview.h, demo.h, scenario.h. The threads and the lock are described at the
 * top of hourglassd.c.
 */
#ifndef HG_DAEMON_HOURGLASSD_H
#define HG_DAEMON_HOURGLASSD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "daemon_config.h"
#include "demo.h"
#include "hourglass/gateway.h"
#include "hourglass/pipeline.h"
#include "http.h"
#include "mdview.h"

#ifndef HG_VERSION
#define HG_VERSION "dev"
#endif

/* Exit statuses of hourglassd. */
#define EXIT_START 1
#define EXIT_CONFIG 2
#define EXIT_LOCKED 4 /* the data directory is locked by another process */

typedef struct daemon {
  hg_daemon_config_t cfg; /* main thread; readers use the atomics below */
  const char *conf_path;  /* NULL: defaults only */
  char **overrides;       /* -o key=value, argv-owned */
  int noverrides;
  hg_pipeline_t *pipe;
  hg_mdview_t *view;
  struct hg_market_stream *mstream; /* what the event stream sent (HTTP thread) */
  hg_http_t *http;
  hg_gateway_t *gw;
  struct daemon_cluster *cluster; /* cluster.id set: this node of the group (cluster.h) */
  pthread_t consumer, synth, md, demo_thr;
  int consumer_running, synth_running, md_running, demo_running;
  hg_demo_t *demo;        /* --demo: owned by the demo thread while it runs */
  int demo_setup;         /* the data dir was empty: the demo lists its market */
  int32_t demo_cycle_day; /* last settled day, -1: none (demo thread once it runs) */
  _Atomic int stop_demo;
  _Atomic int stop_consumer;
  _Atomic int stop_synth;
  _Atomic uint32_t synth_rate;
  _Atomic uint64_t synth_submitted, synth_busy;
  int synth_setup;       /* setup commands the generator must send first */
  /* Set (once, by main) after pipe, view, gw and http are assigned; the
   * HTTP thread touches those pointers only after seeing it. They stay
   * valid until the HTTP thread is joined. */
  _Atomic int published;
  /* Health: the state and, when not ready, a static reason. */
  _Atomic int ready;
  _Atomic(const char *) reason;
  char fail_reason[160]; /* written once by main before reason points at it */
  _Atomic uint64_t reloads, reload_failures;
  _Atomic uint64_t rebuilds; /* cluster: serving cycles ended to rebuild from the group */
  uint64_t start_ns;
} daemon_t;

/* Wall-clock time in ns since the epoch (logs, metrics, the generators;
 * never the state machine). */
static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Health as /health reports it; why must be a static string (or
 * d->fail_reason, written before). Main thread. */
static inline void set_health(daemon_t *d, int ready, const char *why) {
  atomic_store(&d->reason, why);
  atomic_store(&d->ready, ready);
}

/* n bytes as 2n lower-case hex digits and a NUL into out. */
static inline void daemon_hex(const uint8_t *h, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[h[i] >> 4];
    out[2 * i + 1] = digits[h[i] & 15];
  }
  out[2 * n] = '\0';
}

/* hourglassd.c: the defaults, then the file at path (NULL: none), then the
 * -o overrides, then the cross-key checks. 0, or -1 after logging why. */
int daemon_load_config(const char *path, char **ovr, int novr, hg_daemon_config_t *cfg);

/* serve.c: runs the exchange until SIGTERM or SIGINT (blocked in every
 * thread by the caller; SIGHUP reloads). 0, EXIT_START or EXIT_LOCKED, every
 * failure logged. Main thread, once. */
int daemon_serve(daemon_t *d);

/* http_api.c: the HTTP handler (hg_http_handler_fn, ctx the daemon_t) for
 * /health, /metrics, /api/v1/ and the web page. HTTP thread. */
void daemon_http_handler(void *ctx, const char *path, const char *query, hg_http_response_t *r);

/* The market's Server-Sent Events: DAEMON_STREAM_PATH answers them;
 * daemon_http_snapshot (hg_http_snapshot_fn) gives a new watcher the
 * market as sent so far, and daemon_http_stream (hg_http_encode_fn) the
 * changes since the previous events (market_api.h's hg_market_stream).
 * ctx the daemon_t. HTTP thread. */
#define DAEMON_STREAM_PATH "/api/v1/stream"
void daemon_http_stream(void *ctx, hg_sbuf_t *out);
int daemon_http_snapshot(void *ctx, const char *query, hg_sbuf_t *out, uint32_t *topic);

/* data_dir.c */
/* mkdir -p with mode 0750. 0 or -errno. */
int daemon_mkdir_p(const char *path);
/* When rc is -ENOSPC or -EDQUOT, logs which disk holds data_dir (mount
 * point, bytes free) and returns 1; 0 otherwise. */
int daemon_disk_full(const char *data_dir, int rc);
/* Takes data_dir/LOCK for the rest of the process's life (hourglassd.c
 * describes the lock). 0, EXIT_LOCKED or EXIT_START, every failure logged. */
int daemon_lock_data_dir(const char *data_dir);

/* tools_main.c: the tool modes; each returns the exit status. */
int daemon_state_hash(const hg_daemon_config_t *cfg, int repair, uint64_t upto);
int daemon_backup_lmdb(const hg_daemon_config_t *cfg, const char *sub, const char *dest);
int daemon_backup_journal(const hg_daemon_config_t *cfg, const char *dest, uint64_t max_seq);
/* --history-from: daemon_history_fill on cfg->data_dir/journal. Exit status. */
int daemon_history_from(const hg_daemon_config_t *cfg, const char *from);
int daemon_scenario(const hg_daemon_config_t *cfg, const char *name, const char *dir);

#endif /* HG_DAEMON_HOURGLASSD_H */
