/*
 * pipeline_util.h - shared by the pipeline and crash tests: temporary data
 * directories, a quiet logger, a consumer that waits for a command's DONE
 * marker, a runner that feeds cmdgen's stream through a pipeline, and a
 * lister of journal segments.
 */
#ifndef HOURGLASS_TESTS_PIPELINE_UTIL_H
#define HOURGLASS_TESTS_PIPELINE_UTIL_H

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmdgen.h"
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

/* Submits commands [from, to) of cmdgen's stream with seed (origin = the
 * index), polling the output while the inbound ring is full, then waits
 * until seq `to` is released. For a pipeline whose last seq is `from`, so
 * that each command's seq is its index + 1. 0, or the first error of
 * submit or wait (-ETIMEDOUT after 5 s without output). */
static inline int util_run_cmdgen(hg_pipeline_t *p, uint64_t from, uint64_t to, uint64_t seed) {
  hg_pipe_out_t out[256];
  uint64_t done = from;
  for (uint64_t i = from; i < to;) {
    hg_command_t cmd;
    cmdgen_command(i, seed, &cmd);
    int rc = hg_pipeline_submit(p, i, &cmd);
    if (rc == 0)
      i++;
    else if (rc != HG_EBUSY)
      return rc;
    size_t n = hg_pipeline_poll(p, out, 256);
    for (size_t k = 0; k < n; k++)
      if (out[k].kind == HG_PIPE_DONE) done = out[k].seq;
  }
  while (done < to) {
    size_t n = hg_pipeline_poll(p, out, 256);
    for (size_t k = 0; k < n; k++)
      if (out[k].kind == HG_PIPE_DONE) done = out[k].seq;
    int rc = n == 0 ? hg_pipeline_wait(p, 5000000000ll) : 0;
    if (rc != 0) return rc;
  }
  return 0;
}
