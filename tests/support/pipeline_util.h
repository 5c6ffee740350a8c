/*
 * pipeline_util.h - for tests (and benchmarks) that run a pipeline:
 * temporary data directories, a quiet logger that keeps the last message, a
 * clearing configuration without risk limits, a small pipeline
 * configuration, a runner that feeds cmdgen's stream through a pipeline,
 * and a lister of journal segments. Not thread-safe beyond what each
 * function says; tests call them from their main thread.
 */
#ifndef HOURGLASS_TESTS_PIPELINE_UTIL_H
#define HOURGLASS_TESTS_PIPELINE_UTIL_H

#include <stdint.h>

#include "hourglass/pipeline.h"

/* Removes a directory tree (errors ignored). */
void util_rm_rf(const char *dir);

/* First seqs of the journal segments in dir (journal-<seq>.hgj), sorted;
 * up to max into out; returns how many. */
int util_segment_firsts(const char *dir, uint64_t *out, int max);

/* Makes a fresh directory "./hgtest-<tag>-XXXXXX" under the working
 * directory (ctest runs tests in the build tree: a real disk, so fdatasync
 * means something). buf must hold 64 bytes. Returns buf, or NULL (errno). */
const char *util_tmpdir(char *buf, const char *tag);

/* Keeps the last message for assertions; prints nothing unless asked. */
typedef struct util_log {
  char last[512];
  int errors;  /* messages at HG_LOG_ERROR or above */
  int verbose; /* also print every message to stderr */
} util_log_t;

/* A hg_pipeline_config_t.log function; ctx is a util_log_t. Called on the
 * pipeline's threads: one pipeline per util_log_t, and read it after stop. */
void util_log_fn(void *ctx, int level, const char *msg);

/* An event sink that drops everything. */
void util_null_sink(void *ctx, const hg_exchange_event_t *ev);

/* For tests about sessions, routing, isolation or tooling, not money: the
 * clearing runs with no band and no margin so that any price passes the
 * pre-trade check (the money rules have their own tests). */
void util_no_risk_config(hg_clearing_config_t *c);

/* The same, in static storage (filled on each call; same contents always). */
const hg_clearing_config_t *util_no_risk(void);

/* A pipeline on dir with small sizes (4 instruments, 64 accounts, 65536
 * book orders, small rings and 4 MiB journal segments), logging to log. */
void util_config(hg_pipeline_config_t *cfg, const char *dir, util_log_t *log);

/* Submits c with origin *submitted (then incremented), waiting while the
 * inbound ring is full, and polls until *done (DONE records counted) has
 * caught up, so that a clock the caller sets next is not read for c. 0, or
 * the error of submit or wait (-ETIMEDOUT after 5 s without output). */
int util_submit_wait(hg_pipeline_t *p, const hg_command_t *c, uint64_t *submitted,
                     uint64_t *done);

/* Submits commands [from, to) of cmdgen's stream with seed (origin = the
 * index), polling the output while the inbound ring is full, then waits
 * until seq `to` is released. For a pipeline whose last seq is `from`, so
 * that each command's seq is its index + 1. 0, or the first error of
 * submit or wait (-ETIMEDOUT after 5 s without output). */
int util_run_cmdgen(hg_pipeline_t *p, uint64_t from, uint64_t to, uint64_t seed);

#endif /* HOURGLASS_TESTS_PIPELINE_UTIL_H */
