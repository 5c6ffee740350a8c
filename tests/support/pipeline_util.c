/*
 * pipeline_util.c - data directories, logging and configuration for tests
 * that run a pipeline (see pipeline_util.h).
 */
#include "pipeline_util.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmdgen.h"
#include "hourglass/error.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void util_rm_rf(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

int util_segment_firsts(const char *dir, uint64_t *out, int max) {
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

const char *util_tmpdir(char *buf, const char *tag) {
  snprintf(buf, 64, "./hgtest-%s-XXXXXX", tag);
  return mkdtemp(buf);
}

void util_log_fn(void *ctx, int level, const char *msg) {
  util_log_t *l = ctx;
  snprintf(l->last, sizeof l->last, "%s", msg);
  if (level >= HG_LOG_ERROR) l->errors++;
  if (l->verbose) fprintf(stderr, "[log %d] %s\n", level, msg);
}

void util_null_sink(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

void util_no_risk_config(hg_clearing_config_t *c) {
  hg_clearing_config_default(c);
  c->band_bps = 0;
  c->im_rate_bps = 0;
  c->im_rate_delivery_bps = 0;
}

const hg_clearing_config_t *util_no_risk(void) {
  static hg_clearing_config_t c;
  util_no_risk_config(&c);
  return &c;
}

void util_config(hg_pipeline_config_t *cfg, const char *dir, util_log_t *log) {
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

int util_run_cmdgen(hg_pipeline_t *p, uint64_t from, uint64_t to, uint64_t seed) {
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

int util_submit_wait(hg_pipeline_t *p, const hg_command_t *c, uint64_t *submitted,
                     uint64_t *done) {
  int rc;
  while ((rc = hg_pipeline_submit(p, *submitted, c)) == HG_EBUSY) {
  }
  if (rc != 0) return rc;
  (*submitted)++;
  while (*done < *submitted) {
    hg_pipe_out_t out[64];
    size_t n = hg_pipeline_poll(p, out, 64);
    for (size_t i = 0; i < n; i++) *done += out[i].kind == HG_PIPE_DONE;
    if (n == 0 && (rc = hg_pipeline_wait(p, 5000000000ll)) != 0) return rc;
  }
  return 0;
}
