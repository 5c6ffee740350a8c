/*
 * daemon_log.h - hourglassd's structured log: one line per record,
 *   <ts> <level> <component> msg="<text>" key=value ...
 * ts is UTC with microseconds (2026-12-02T09:00:00.123456Z). Internal to the
 * daemon.
 *
 * What goes in: operational facts (addresses, seqs, counts, durations,
 * errors). What never goes in: API secrets, account ids, order details,
 * cash; callers pass only aggregates and their own messages, and the
 * pipeline's messages carry no customer data by its contract.
 *
 * Threads: any thread may log; each record is one write(2) of at most
 * HG_LOG_LINE_MAX bytes, so concurrent records never interleave. The level
 * may be changed at any time (SIGHUP reload).
 */
#ifndef HOURGLASS_DAEMON_LOG_H
#define HOURGLASS_DAEMON_LOG_H

#include "daemon_config.h"

#define HG_LOG_LINE_MAX 1024

/* Sets where records go (default 2, stderr) and the lowest level written. */
void hg_dlog_init(int fd, int level);
void hg_dlog_set_level(int level);

/*
 * Writes one record if level is enabled. msg is escaped (quotes, control
 * bytes); kvfmt (may be NULL) is a printf format for the `key=value` pairs,
 * written as given. Longer records are cut at HG_LOG_LINE_MAX.
 */
void hg_dlog(int level, const char *component, const char *msg, const char *kvfmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Adapter for the pipeline's, the journal's and the gateway's log callbacks
 * (hg_log_fn): ctx is the component name (a static string); the level is an
 * hg_log_level_t, passed through. */
void hg_dlog_pipe_cb(void *ctx, int level, const char *msg);

#endif /* HOURGLASS_DAEMON_LOG_H */
