/*
 * What the scenarios share (scenario_run.h). Lock-step keeps a run
 * deterministic: one submitter, timestamps chosen by the scenario, and the
 * clock does not move until every command of a batch is DONE.
 */
#include "scenario_run.h"

#include <inttypes.h>
#include <stdarg.h>

#include "hourglass/error.h"
#include "hourglass/exchange.h"

uint64_t hg_scenario_clock(void *ctx) {
  hg_scenario_run_t *r = ctx;
  uint64_t t = atomic_load(&r->now_ns);
  if (t <= r->last_ts) t = r->last_ts + 1000;
  r->last_ts = t;
  return t;
}

void hg_scenario_set_time(hg_scenario_run_t *r, int32_t day, int hour, int minute) {
  uint64_t t = ((uint64_t)day * 86400u + (uint64_t)hour * 3600u + (uint64_t)minute * 60u) *
               1000000000u;
  atomic_store(&r->now_ns, t);
}

void hg_scenario_usd(int64_t micro, char *out, size_t cap) {
  uint64_t a = micro < 0 ? (uint64_t)0 - (uint64_t)micro : (uint64_t)micro;
  snprintf(out, cap, "%s%" PRIu64 ".%06" PRIu64, micro < 0 ? "-" : "", a / 1000000u,
           a % 1000000u);
}

void hg_scenario_fail(hg_scenario_run_t *r, const char *fmt, ...) {
  va_list ap;
  r->failed = 1;
  fprintf(r->err, "scenario: ");
  va_start(ap, fmt);
  vfprintf(r->err, fmt, ap);
  va_end(ap);
  fputc('\n', r->err);
}

/* Polls once and hands every record on; *done counts the non-events.
 * 0, or HG_EUNAVAIL for a record that is neither an event nor DONE. */
static int poll_once(hg_scenario_run_t *r, size_t *done, size_t *got) {
  size_t k = hg_pipeline_poll(r->p, r->recs, sizeof r->recs / sizeof r->recs[0]);
  int rc = 0;
  for (size_t j = 0; j < k; j++) {
    if (r->recs[j].kind != HG_PIPE_EVENT) {
      if (r->recs[j].kind != HG_PIPE_DONE) rc = HG_EUNAVAIL;
      (*done)++;
    }
    r->on_record(r->ctx, &r->recs[j]);
  }
  *got = k;
  return rc;
}

int hg_scenario_run_batch(hg_scenario_run_t *r, const hg_command_t *cmds, size_t n) {
  size_t done = 0, k;
  int rc;
  for (size_t i = 0; i < n; i++) {
    while ((rc = hg_pipeline_submit(r->p, r->origin, &cmds[i])) == HG_EBUSY) {
      /* Inbound ring full: drain what came back, then retry. */
      if ((rc = poll_once(r, &done, &k)) != 0) return rc;
      if (k == 0) hg_pipeline_wait(r->p, 1000000);
    }
    if (rc != 0) return rc;
  }
  while (done < n) {
    if ((rc = poll_once(r, &done, &k)) != 0) return rc;
    if (k == 0) {
      if ((rc = hg_pipeline_failed(r->p)) != 0) return rc;
      hg_pipeline_wait(r->p, 100000000);
    }
  }
  return 0;
}

int hg_scenario_open(hg_scenario_run_t *r, const hg_pipeline_config_t *base,
                     const char *data_dir) {
  hg_pipeline_config_t pc = *base;
  pc.data_dir = data_dir;
  pc.consumers = 1;
  pc.mode = HG_PIPE_MODE_THREADS; /* this thread submits and polls; no loop drives it */
  pc.clock = hg_scenario_clock;
  pc.clock_ctx = r;
  pc.out_notify = NULL;
  for (int i = 0; i < HG_PIPE_MAX_CONSUMERS; i++) pc.consumer_notify[i] = NULL;
  int rc = hg_pipeline_open(&pc, &r->p);
  if (rc != 0) {
    fprintf(r->err, "scenario: cannot open the pipeline in %s: %s\n", data_dir, hg_strerror(rc));
    return -1;
  }
  if (hg_exchange_last_seq(hg_pipeline_exchange(r->p)) != 0) {
    fprintf(r->err, "scenario: %s already holds an exchange; give an empty directory\n",
            data_dir);
    return -1;
  }
  if ((rc = hg_pipeline_start(r->p)) != 0) {
    fprintf(r->err, "scenario: cannot start the pipeline: %s\n", hg_strerror(rc));
    return -1;
  }
  return 0;
}

int hg_scenario_stop(hg_scenario_run_t *r, int rc) {
  int src = hg_pipeline_stop(r->p);
  size_t done = 0, k;
  do {
    (void)poll_once(r, &done, &k); /* records released by the stop */
  } while (k > 0);
  if (rc == 0) rc = src;
  if (rc != 0) fprintf(r->err, "scenario: pipeline failed: %s\n", hg_strerror(rc));
  return rc;
}

void hg_scenario_print_hash(hg_scenario_run_t *r) {
  uint8_t h[HG_SHA256_LEN];
  char hx[2 * HG_SHA256_LEN + 1];
  hg_pipeline_state_hash(r->p, h);
  for (size_t i = 0; i < sizeof h; i++) snprintf(hx + 2 * i, 3, "%02x", h[i]);
  fprintf(r->out, "last_seq=%" PRIu64 " state_hash=%s\n",
          hg_exchange_last_seq(hg_pipeline_exchange(r->p)), hx);
}
