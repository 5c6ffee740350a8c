/*
 * pipeline_util.h - shared by the pipeline and crash tests: temporary data
 * directories, a quiet logger, and a consumer that waits for a command's
 * DONE marker.
 */
#ifndef HOURGLASS_TESTS_PIPELINE_UTIL_H
#define HOURGLASS_TESTS_PIPELINE_UTIL_H

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hourglass/pipeline.h"

static inline int util_rm_entry(const char *path, const struct stat *st, int flag,
                                struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Removes a directory tree. */
static inline void util_rm_rf(const char *dir) {
  nftw(dir, util_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* First seqs of the journal segments in dir (journal-<seq>.hgj), sorted;
 * up to max into out; returns how many. */
static inline int util_segment_firsts(const char *dir, uint64_t *out, int max) {
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    unsigned long long s;
    if (sscanf(de->d_name, "journal-%llu.hgj", &s) == 1 && n < max) out[n++] = s;
  }
  closedir(d);
  for (int a = 1; a < n; a++)
    for (int b = a; b > 0 && out[b - 1] > out[b]; b--) {
      uint64_t t = out[b];
      out[b] = out[b - 1];
      out[b - 1] = t;
    }
  return n;
}

/* Makes a fresh directory under the build tree's working directory (a real
 * disk, so fdatasync means something). buf must hold 64 bytes. */
static inline const char *util_tmpdir(char *buf, const char *tag) {
  snprintf(buf, 64, "./hgtest-%s-XXXXXX", tag);
  return mkdtemp(buf);
}

/* Keeps the last message for assertions; prints nothing unless asked. */
typedef struct util_log {
  char last[512];
  int errors;
  int verbose;
} util_log_t;

static inline void util_log_fn(void *ctx, int level, const char *msg) {
  util_log_t *l = ctx;
  snprintf(l->last, sizeof l->last, "%s", msg);
  if (level >= HG_PIPE_LOG_ERROR) l->errors++;
  if (l->verbose) fprintf(stderr, "[log %d] %s\n", level, msg);
}

static inline void util_null_sink(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

/* For tests about sessions, routing, isolation or tooling, not money: the
 * clearing runs with no band and no margin so that any price passes the
 * pre-trade check (the money rules have their own tests). */
static inline void util_no_risk_config(hg_clearing_config_t *c) {
  hg_clearing_config_default(c);
  c->band_bps = 0;
  c->im_rate_bps = 0;
  c->im_rate_delivery_bps = 0;
}

static inline const hg_clearing_config_t *util_no_risk(void) {
  static hg_clearing_config_t c;
  util_no_risk_config(&c);
  return &c;
}

static inline void util_config(hg_pipeline_config_t *cfg, const char *dir, util_log_t *log) {
  hg_pipeline_config_init(cfg);
  cfg->data_dir = dir;
  cfg->exchange.max_instruments = 4;
  cfg->exchange.max_accounts = 64;
  cfg->exchange.max_book_orders = 1u << 16;
  /* Small rings: creating them touches every page, and tests start many. */
  cfg->inbound_capacity = 4096;
  cfg->outbound_capacity = 16384;
  cfg->staging_capacity = 16384;
  cfg->journal.segment_size = 4u << 20;
  cfg->journal.batch_bytes = 1u << 20;
  cfg->log = util_log_fn;
  cfg->log_ctx = log;
}

#endif /* HOURGLASS_TESTS_PIPELINE_UTIL_H */
