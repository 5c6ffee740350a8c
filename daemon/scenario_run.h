/*
 * scenario_run.h - what the scenarios (scenario.h) share: a simulated clock
 * for the sequencer, lock-step batches on the pipeline, the opening and
 * stopping of a fresh data directory, and micro-USD printing. Internal to
 * hourglassd; one thread (the scenario's) calls all of it.
 */
#ifndef HOURGLASS_SCENARIO_RUN_H
#define HOURGLASS_SCENARIO_RUN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hourglass/pipeline.h"

typedef struct hg_scenario_run {
  hg_pipeline_t *p;
  FILE *out, *err;
  _Atomic uint64_t now_ns; /* set by the scenario thread between batches */
  uint64_t last_ts;        /* engine thread only (the clock hook) */
  int failed;              /* a check failed (hg_scenario_fail) */
  uint64_t origin;         /* the submitter's origin in every command */
  /* Called for every record polled (events and DONE alike), in order. */
  void (*on_record)(void *ctx, const hg_pipe_out_t *r);
  void *ctx;
  hg_pipe_out_t recs[1024];
} hg_scenario_run_t;

/* The sequencer's clock (hg_pipeline_config_t.clock, ctx = the run): the
 * scenario's time, kept strictly increasing (1 us apart within a batch) so
 * that every command has its own stamp. */
uint64_t hg_scenario_clock(void *ctx);

/* Sets the time of the next batch: UTC day number, hour, minute. */
void hg_scenario_set_time(hg_scenario_run_t *r, int32_t day, int hour, int minute);

/* micro-USD as a signed decimal USD amount with six places. */
void hg_scenario_usd(int64_t micro, char *out, size_t cap);

/* Prints "scenario: <message>" on r->err and marks the run failed. */
__attribute__((format(printf, 2, 3))) void hg_scenario_fail(hg_scenario_run_t *r,
                                                            const char *fmt, ...);

/* Submits cmds[0..n) at the current simulated time and consumes until all of
 * them are processed. 0, or a pipeline error. */
int hg_scenario_run_batch(hg_scenario_run_t *r, const hg_command_t *cmds, size_t n);

/* Opens the pipeline of base on data_dir (one consumer, threads mode, the
 * scenario's clock), refuses a directory that holds an exchange, starts it.
 * 0, or -1 with the reason on r->err (r->p may then be set: close it). */
int hg_scenario_open(hg_scenario_run_t *r, const hg_pipeline_config_t *base,
                     const char *data_dir);

/* Stops the pipeline and hands the records the stop released to
 * on_record. rc: the run's result so far; returns it, or the stop's error
 * (then printed on r->err). */
int hg_scenario_stop(hg_scenario_run_t *r, int rc);

/* Prints "last_seq=N state_hash=H" of the (stopped) pipeline on r->out:
 * what `hourglassd --state-hash --upto N` reproduces from the journal. */
void hg_scenario_print_hash(hg_scenario_run_t *r);

#endif /* HOURGLASS_SCENARIO_RUN_H */
