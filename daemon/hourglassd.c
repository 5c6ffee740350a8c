/*
 * hourglassd - the exchange daemon: one process hosting the engine pipeline
 * (sequencer, journal, state machine, snapshots), the client gateway (order
 * entry and market data on listen.order_entry) and an HTTP port for health,
 * metrics and public market data. This file parses the command line and
 * the configuration and picks the mode; serve.c runs the exchange
 * (hourglassd.h lists the other files).
 *
 * Threads and what each owns:
 *  - main: configuration, start-up and shutdown order, signals (all blocked
 *    in every thread and taken synchronously with sigtimedwait, so no
 *    async-signal-safety puzzles), reload;
 *  - the pipeline's snapshot thread, and with pipeline.mode = threads its
 *    engine and journal threads (pipeline.h);
 *  - the gateway's loop thread: the pipeline's consumer 0, routing
 *    execution reports and market data to sessions (gateway.h); with
 *    pipeline.mode = loop (the default) it also sequences, applies and
 *    journals the commands itself (pipeline.h, "Loop mode"); with
 *    cluster.id set it also runs the Raft replica and its role timer
 *    (cluster.c: batches proposed, committed batches applied, order entry
 *    on the leader only; the pipeline's data is then data_dir/engine,
 *    rebuilt from the group at every start, its journal kept: history.c);
 *  - hg-marketdata: consumer 1, feeds the market-data view the HTTP port
 *    serves (mdview.h), on its own ring so a slow web reader never holds
 *    the gateway back; after a batch that changed the view it wakes the
 *    HTTP thread's event stream (hg_http_wake, never blocking);
 *  - hg-demo (with --demo): consumer 2, the demo market's flow (demo.h);
 *  - a drain thread, only at shutdown: consumer 0 once the gateway has
 *    stopped, so the pipeline can drain;
 *  - http: libmicrohttpd run from one thread (http.h); it reads the view's
 *    published copy and seqlocks, the pipeline's counters and the health
 *    state, never the engine's memory, and encodes each market event once
 *    for every /api/v1/stream watcher;
 *  - hg-synthetic (optional, synthetic.orders_per_sec > 0): a deterministic
 *    order generator for load tests and demos, submitting like a client.
 *
 * Health: "starting" -> "recovering" (the HTTP port answers 503 while the
 * journal replays) -> "ready" -> "stopping"; a journal failure turns ready
 * into "journal failed: <cause>" for good (the pipeline refuses intake).
 * A cluster node is "ready" on every role (a follower answers 200) while
 * it can write its Raft log (503 naming cluster.dir when it cannot) and
 * has caught up ("catching up", 503, while it has not yet applied what the
 * group had committed when it first heard from a leader, and after a
 * rebuild until it has); one
 * that must be rebuilt from the group (it was sent the leader's snapshot,
 * or it lost leadership with commands the group may not hold) stops
 * everything as at a stop and starts again in the same process, keeping
 * the data directory's lock (serve.c, "rebuilding this node from the
 * group in place"); meanwhile its ports close and reopen.
 *
 * The data directory lock. data_dir/LOCK (created if missing, never
 * deleted) is held with flock(LOCK_EX) by every process that writes the
 * data directory: the daemon, from before it opens anything in it until it
 * exits, --scenario on its own directory, and --state-hash --repair. Each
 * writes its pid into the file. A second writer does not wait: it exits
 * with EXIT_LOCKED (4) and "data directory in use by a running hourglassd"
 * naming the directory and that pid. The kernel drops the lock when the
 * holder exits, however it exits, so a stale LOCK file never blocks a start.
 * The read-only tools take no lock and write nothing in the data directory
 * (--state-hash without --repair, the --backup-* modes, hgctl replay and
 * statement), so they may run beside the daemon.
 *
 * Tool modes (same binary, so a deploy carries its own tools):
 *   --check-config        parse the config and exit (0 ok, 2 bad);
 *   --state-hash [--upto N]
 *                         read the data directory without writing anything
 *                         (latest good snapshot + journal, or the journal
 *                         from empty up to N) and print last_seq and the
 *                         state hash; safe while the daemon runs;
 *   --state-hash --repair recover as the daemon does, writing: also cuts a
 *                         torn last journal batch (never a durable record;
 *                         hourglass/journal.h); takes the lock, so it
 *                         refuses while a daemon uses the directory;
 *   --backup-state DEST   consistent copy of the LMDB store (mdb_env_copy2,
 *                         safe while the daemon runs);
 *   --backup-keys DEST    the same for the gateway's key store (data_dir/keys);
 *   --backup-journal DEST [--max-seq N]
 *                         copies the journal records up to N (the daemon's
 *                         durable seq) into a fresh journal in DEST, from
 *                         its first record (seq 1, or later in a cluster
 *                         node's journal that starts after the group's
 *                         snapshot it was seeded from: --history-from);
 *   --history-from DIR    fills the records before the first seq of
 *                         data_dir/journal (a cluster node's engine
 *                         directory started from the group's snapshot:
 *                         engine/history.missing) from the journal in DIR
 *                         (another node's engine/journal, or a backup's or
 *                         archive's), checking every record (history.h);
 *   --scenario month|squeeze [--scenario-dir DIR]
 *                         runs a contract's whole life (month) or a 60%
 *                         squeeze through the clearing guarantee (squeeze) in
 *                         simulated time on a fresh data directory
 *                         (scenario.h) and exits.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_log.h"
#include "hourglass/civil.h"
#include "hourglassd.h"

/* ----------------------------------------------------------- configuration */

int daemon_load_config(const char *path, char **ovr, int novr, hg_daemon_config_t *cfg) {
  hg_dcfg_error_t err;
  hg_daemon_config_defaults(cfg);
  if (path != NULL && hg_daemon_config_load(cfg, path, &err) != 0) {
    hg_dlog(HG_LOG_ERROR, "config", "bad configuration", "file=%s line=%u key=%s reason=\"%s\"",
            path, err.line, err.key[0] ? err.key : "-", err.reason);
    return -1;
  }
  for (int i = 0; i < novr; i++) {
    if (hg_daemon_config_parse(cfg, ovr[i], strlen(ovr[i]), &err) != 0) {
      hg_dlog(HG_LOG_ERROR, "config", "bad configuration", "option=-o index=%d key=%s reason=\"%s\"",
              i + 1, err.key[0] ? err.key : "-", err.reason);
      return -1;
    }
  }
  if (hg_daemon_config_check(cfg, &err) != 0) {
    hg_dlog(HG_LOG_ERROR, "config", "bad configuration", "key=%s reason=\"%s\"", err.key,
            err.reason);
    return -1;
  }
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: hourglassd [-c FILE] [-o key=value]... [MODE]\n"
          "  -c FILE             configuration (ops/hourglass.conf documents every key);\n"
          "                      without it every key has its default\n"
          "  -o key=value        override one key (after the file)\n"
          "  --demo              serve with the demo market (twelve B200 months, makers,\n"
          "                      hedgers, a banner of lines to paste (keys, address,\n"
          "                      CA, PATH) printed once ready; a daily\n"
          "                      settlement cycle at start and at each 16:00 UTC)\n"
          "modes (default: serve until SIGTERM/SIGINT; SIGHUP reloads):\n"
          "  --check-config      parse and exit: 0 valid, 2 invalid\n"
          "  --print-data-dir    print data_dir as configured\n"
          "  --state-hash [--upto SEQ]\n"
          "                      read data_dir without writing to it (safe while the\n"
          "                      daemon runs) and print last_seq and the state hash;\n"
          "                      --upto replays the journal from empty up to SEQ\n"
          "  --state-hash --repair\n"
          "                      recover data_dir as the daemon does, writing: also cuts\n"
          "                      a torn last journal batch (never a durable record);\n"
          "                      refused with exit 4 while a daemon holds data_dir/LOCK\n"
          "  --backup-state DEST copy the LMDB store (safe while running)\n"
          "  --backup-keys DEST  copy the gateway's key store (safe while running)\n"
          "  --backup-journal DEST [--max-seq SEQ]\n"
          "  --history-from DIR   fill data_dir/journal's records before its first seq\n"
          "                       from the journal in DIR (a cluster node's history)\n"
          "                      copy journal records up to SEQ (the durable seq)\n"
          "  --scenario month [--scenario-dir DIR]\n"
          "                      run one contract (B200.A.2027-03) from listing through\n"
          "                      expiry in simulated time on the full pipeline, print\n"
          "                      its settlement summary and exit: 0 when the cash sums\n"
          "                      to zero, 1 when a check fails; DIR (default: a new\n"
          "                      directory under $TMPDIR) must be empty and receives\n"
          "                      the journal, the state and the statements\n"
          "  --scenario squeeze [--scenario-dir DIR]\n"
          "                      a 60%% squeeze in a week against a short producer\n"
          "                      and a thin maker: marks, calls, liquidation, a\n"
          "                      bankruptcy, the insurance fund; ends with one\n"
          "                      'squeeze: ...' line; statements and fills.csv in DIR\n"
          "  --version\n"
          "data_dir/LOCK: the daemon, --scenario and --state-hash --repair hold it\n"
          "(flock) while they write the directory; a second one exits 4, naming the\n"
          "holder's pid. The other modes only read the data directory.\n");
}

int main(int argc, char **argv) {
  static daemon_t d; /* large; lives for the process */
  const char *mode = "serve", *dest = NULL, *scenario = NULL, *scenario_dir = NULL;
  int repair = 0;
  uint64_t upto = 0, max_seq = UINT64_MAX;
  char **ovr = calloc((size_t)argc, sizeof *ovr);
  if (ovr == NULL) return EXIT_START;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (strcmp(a, "-c") == 0 && has) {
      d.conf_path = argv[++i];
    } else if (strcmp(a, "-o") == 0 && has) {
      ovr[d.noverrides++] = argv[++i];
    } else if (strcmp(a, "--check-config") == 0 || strcmp(a, "--state-hash") == 0 ||
               strcmp(a, "--print-data-dir") == 0) {
      mode = a + 2;
    } else if ((strcmp(a, "--backup-state") == 0 || strcmp(a, "--backup-journal") == 0 ||
                strcmp(a, "--backup-keys") == 0 || strcmp(a, "--history-from") == 0) &&
               has) {
      mode = a + 2;
      dest = argv[++i];
    } else if (strcmp(a, "--demo") == 0) {
      time_t now = time(NULL);
      int32_t today = hg_civil_day_of_ns((uint64_t)now * 1000000000u);
      hg_civil_t cd = hg_civil_from_day(today);
      if (d.demo == NULL && hg_demo_create(cd.year, (int)cd.month, (uint64_t)now, &d.demo) != 0) {
        fprintf(stderr, "hourglassd: cannot create the demo market\n");
        return EXIT_START;
      }
      hg_demo_set_today(d.demo, today);
    } else if (strcmp(a, "--scenario") == 0 && has) {
      mode = "scenario";
      scenario = argv[++i];
    } else if (strcmp(a, "--scenario-dir") == 0 && has) {
      scenario_dir = argv[++i];
    } else if (strcmp(a, "--repair") == 0) {
      repair = 1;
    } else if ((strcmp(a, "--upto") == 0 || strcmp(a, "--max-seq") == 0) && has) {
      char *end;
      unsigned long long v = strtoull(argv[++i], &end, 10);
      if (*end != '\0' || v == 0) {
        fprintf(stderr, "hourglassd: %s needs a positive seq\n", a);
        return EXIT_CONFIG;
      }
      if (a[2] == 'u')
        upto = v;
      else
        max_seq = v;
    } else if (strcmp(a, "--version") == 0) {
      printf("hourglassd %s\n", HG_VERSION);
      return 0;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return EXIT_CONFIG;
    }
  }
  if (repair && upto != 0) {
    fprintf(stderr, "hourglassd: --repair recovers the whole directory; it does not go with --upto\n");
    return EXIT_CONFIG;
  }
  d.overrides = ovr;
  hg_dlog_init(2, HG_LOG_INFO);
  if (daemon_load_config(d.conf_path, ovr, d.noverrides, &d.cfg) != 0) return EXIT_CONFIG;
  hg_dlog_init(2, d.cfg.log_level);

  int rc;
  if (strcmp(mode, "check-config") == 0) {
    printf("configuration ok\n");
    rc = 0;
  } else if (strcmp(mode, "print-data-dir") == 0) {
    printf("%s\n", d.cfg.data_dir);
    rc = 0;
  } else if (strcmp(mode, "state-hash") == 0) {
    rc = daemon_state_hash(&d.cfg, repair, upto);
  } else if (strcmp(mode, "backup-state") == 0) {
    rc = daemon_backup_lmdb(&d.cfg, "state", dest);
  } else if (strcmp(mode, "backup-keys") == 0) {
    rc = daemon_backup_lmdb(&d.cfg, "keys", dest);
  } else if (strcmp(mode, "backup-journal") == 0) {
    rc = daemon_backup_journal(&d.cfg, dest, max_seq);
  } else if (strcmp(mode, "history-from") == 0) {
    rc = daemon_history_from(&d.cfg, dest);
  } else if (strcmp(mode, "scenario") == 0) {
    rc = daemon_scenario(&d.cfg, scenario, scenario_dir);
  } else {
    /* Block the signals in every thread (they inherit the mask); main
     * takes them with sigtimedwait. SIGPIPE: a closed socket is an error
     * return, not a death. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = daemon_serve(&d);
  }
  hg_demo_destroy(d.demo);
  free(ovr);
  return rc;
}

