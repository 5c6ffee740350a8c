/*
 * tools_main.c - hourglassd's tool modes: --state-hash (read-only, or
 * --repair under the lock), --backup-state, --backup-keys, --backup-journal
 * and --scenario. Each runs on the main thread and returns the process's
 * exit status; hourglassd.c's top comment says what each does.
 */
#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_log.h"
#include "hourglass/error.h"
#include "hourglass/journal.h"
#include "history.h"
#include "hourglassd.h"
#include "scenario.h"

static void null_sink(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

int daemon_state_hash(const hg_daemon_config_t *cfg, int repair, uint64_t upto) {
  uint8_t h[HG_SHA256_LEN];
  char hx[2 * HG_SHA256_LEN + 1];
  uint64_t last = 0;
  if (upto != 0) {
    hg_exchange_config_t ec = {.max_instruments = cfg->max_instruments,
                               .max_accounts = cfg->max_accounts,
                               .max_book_orders = cfg->max_book_orders};
    hg_exchange_t *ex;
    int rc = hg_exchange_create(&ec, null_sink, NULL, &ex);
    char dir[HG_DCFG_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/journal", cfg->data_dir);
    if (rc == 0) rc = hg_pipeline_replay_journal(dir, ex, upto, &last);
    if (rc != 0) {
      hg_dlog(HG_LOG_ERROR, "tool", "replay failed", "dir=%s err=%s", dir, hg_strerror(rc));
      hg_exchange_destroy(ex);
      return 1;
    }
    hg_exchange_hash(ex, h);
    hg_exchange_destroy(ex);
  } else if (!repair) {
    /* Read-only: safe beside a running daemon. */
    hg_pipeline_config_t pc;
    hg_daemon_config_pipeline(cfg, &pc);
    pc.log = hg_dlog_pipe_cb;
    pc.log_ctx = "pipeline";
    hg_exchange_t *ex = NULL;
    uint64_t snap = 0;
    int rc = hg_exchange_create(&pc.exchange, null_sink, NULL, &ex);
    if (rc == 0) rc = hg_pipeline_recover_readonly(&pc, ex, &snap, &last);
    if (rc != 0) {
      hg_dlog(HG_LOG_ERROR, "tool", "recovery failed; see the message above", "data_dir=%s err=%s",
              cfg->data_dir, hg_strerror(rc));
      hg_exchange_destroy(ex);
      return 1;
    }
    hg_exchange_hash(ex, h);
    hg_exchange_destroy(ex);
  } else {
    /* --repair writes, as the daemon's start-up does: only with the lock. */
    int lrc = daemon_lock_data_dir(cfg->data_dir);
    if (lrc != 0) return lrc;
    hg_pipeline_config_t pc;
    hg_daemon_config_pipeline(cfg, &pc);
    pc.journal.repair = repair;
    pc.log = hg_dlog_pipe_cb;
    pc.log_ctx = "pipeline";
    hg_pipeline_t *p;
    int rc = hg_pipeline_open(&pc, &p);
    if (rc != 0) {
      hg_dlog(HG_LOG_ERROR, "tool", "recovery failed", "data_dir=%s err=%s", cfg->data_dir,
              hg_strerror(rc));
      return 1;
    }
    hg_pipeline_state_hash(p, h);
    last = hg_exchange_last_seq(hg_pipeline_exchange(p));
    hg_pipeline_close(p);
  }
  daemon_hex(h, sizeof h, hx);
  printf("last_seq=%" PRIu64 " state_hash=%s\n", last, hx);
  return 0;
}

/* Copies the LMDB environment data_dir/<sub> ("state": snapshots; "keys":
 * the gateway's API keys and sessions) into dest. */
int daemon_backup_lmdb(const hg_daemon_config_t *cfg, const char *sub, const char *dest) {
  char dir[HG_DCFG_PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/%s", cfg->data_dir, sub);
  MDB_env *env;
  int rc = mdb_env_create(&env);
  if (rc == 0) rc = mdb_env_set_maxdbs(env, 8);
  if (rc == 0) rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOTLS, 0640);
  /* A read transaction inside the copy pins one consistent version of the
   * store while the daemon keeps writing. */
  if (rc == 0) rc = mdb_env_copy2(env, dest, MDB_CP_COMPACT);
  mdb_env_close(env);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "tool", "store copy failed", "from=%s to=%s err=\"%s\"", dir, dest,
            mdb_strerror(rc));
    return 1;
  }
  printf("state_copied=%s\n", dest);
  return 0;
}

int daemon_backup_journal(const hg_daemon_config_t *cfg, const char *dest, uint64_t max_seq) {
  char dir[HG_DCFG_PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/journal", cfg->data_dir);
  /* From the first record: seq 1, or later in a journal seeded from a
   * snapshot (a cluster node starting from the group's). No segment: 1. */
  uint64_t first = 1;
  if (hg_journal_first_seq(dir, &first) != 0) first = 1;
  hg_journal_reader_t *r;
  int rc = hg_journal_reader_open(dir, first, &r);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "tool", "cannot read journal", "dir=%s err=%s", dir, hg_strerror(rc));
    return 1;
  }
  hg_journal_options_t opt;
  hg_journal_options_init(&opt);
  opt.segment_size = cfg->journal_segment_size;
  opt.batch_bytes = cfg->journal_batch_bytes;
  opt.log = hg_dlog_pipe_cb;
  opt.log_ctx = "journal";
  opt.first_seq = first;
  hg_journal_t *j;
  rc = hg_journal_open(dest, &opt, &j);
  if (rc != 0) {
    hg_journal_reader_close(r);
    hg_dlog(HG_LOG_ERROR, "tool", "cannot create journal copy", "dir=%s err=%s", dest,
            hg_strerror(rc));
    return 1;
  }
  uint64_t last = 0;
  hg_journal_record_t rec;
  for (;;) {
    rc = hg_journal_reader_next(r, max_seq, &rec);
    if (rc == HG_ENOTFOUND) {
      rc = 0;
      break;
    }
    if (rc == HG_ECORRUPT && max_seq == UINT64_MAX) {
      /* Without a durable bound the tail may be a batch in flight. */
      hg_dlog(HG_LOG_WARN, "tool", "journal copy stops at an unfinished record", "after=%" PRIu64,
              last);
      rc = 0;
      break;
    }
    if (rc != 0) break;
    while ((rc = hg_journal_append(j, rec.seq, rec.ts, rec.payload, rec.len)) == HG_EBUSY) {
      hg_journal_commit(j);
      hg_journal_poll(j, 100);
    }
    if (rc != 0) break;
    last = rec.seq;
  }
  hg_journal_reader_close(r);
  int crc = hg_journal_close(j);
  if (rc == 0) rc = crc;
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "tool", "journal copy failed", "err=%s after=%" PRIu64, hg_strerror(rc),
            last);
    return 1;
  }
  printf("journal_last_seq=%" PRIu64 "\n", last);
  return 0;
}

/* --scenario: a fresh data directory (given, or a new one under $TMPDIR),
 * named on stderr so that stdout is the scenario's alone. */
int daemon_scenario(const hg_daemon_config_t *cfg, const char *name, const char *dir) {
  if (strcmp(name, "month") != 0 && strcmp(name, "squeeze") != 0) {
    fprintf(stderr, "hourglassd: unknown scenario '%s' (known: month, squeeze)\n", name);
    return EXIT_CONFIG;
  }
  char path[HG_DCFG_PATH_MAX];
  if (dir != NULL) {
    snprintf(path, sizeof path, "%s", dir);
    int rc = daemon_mkdir_p(path);
    if (rc != 0) {
      fprintf(stderr, "hourglassd: cannot create %s: %s\n", path, hg_strerror(rc));
      return EXIT_START;
    }
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/hourglass-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
             name);
    if (mkdtemp(path) == NULL) {
      fprintf(stderr, "hourglassd: cannot create a data directory: %s\n", strerror(errno));
      return EXIT_START;
    }
  }
  fprintf(stderr, "hourglassd: scenario %s, data dir %s\n", name, path);
  int lrc = daemon_lock_data_dir(path);
  if (lrc != 0) return lrc;
  hg_pipeline_config_t pc;
  hg_daemon_config_pipeline(cfg, &pc);
  pc.log = hg_dlog_pipe_cb;
  pc.log_ctx = "pipeline";
  int rc = strcmp(name, "squeeze") == 0 ? hg_scenario_squeeze(&pc, path, stdout, stderr)
                                         : hg_scenario_month(&pc, path, stdout, stderr);
  if (rc == HG_SCENARIO_OK) fprintf(stderr, "hourglassd: statements in %s/statements\n", path);
  return rc;
}


int daemon_history_from(const hg_daemon_config_t *cfg, const char *from) {
  char dir[HG_DCFG_PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/journal", cfg->data_dir);
  hg_journal_options_t opt;
  hg_journal_options_init(&opt);
  opt.segment_size = cfg->journal_segment_size;
  opt.batch_bytes = cfg->journal_batch_bytes;
  uint64_t filled = 0;
  char msg[1024];
  int rc = daemon_history_fill(dir, from, &opt, &filled, msg, sizeof msg);
  if (rc != 0) {
    hg_dlog(HG_LOG_ERROR, "tool", "cannot fill the journal's history", "dir=%s err=%s why=\"%s\"",
            dir, hg_strerror(rc), msg);
    return 1;
  }
  printf("history_filled=%" PRIu64 "\n", filled);
  return 0;
}
