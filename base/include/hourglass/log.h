/*
 * hourglass/log.h - the one set of log levels and the log callback every
 * part of Hourglass takes. Libraries (journal, pipeline, gateway) call the
 * hg_log_fn their owner gave them, and hourglassd's log (daemon/daemon_log.h)
 * writes the line. Three write to stderr themselves: the journal and the
 * pipeline when their owner gave no hg_log_fn (a tool or a test still sees
 * why), and base/crypto.c's last line before it aborts on a libcrypto failure.
 *
 * What is logged never carries customer data (orders, positions, account
 * balances) or secrets (API secrets, HMAC proofs): ids and counts only.
 */
#ifndef HOURGLASS_LOG_H
#define HOURGLASS_LOG_H

typedef enum hg_log_level {
  HG_LOG_DEBUG = 0,
  HG_LOG_INFO = 1,
  HG_LOG_WARN = 2,
  HG_LOG_ERROR = 3
} hg_log_level_t;

/* "debug", "info", "warn", "error"; "?" for any other value. */
const char *hg_log_level_name(int level);

/* A log sink. msg is NUL-terminated, has no trailing newline and is valid
 * only during the call; level is an hg_log_level_t. Called on the thread that
 * logs; a sink shared by threads must be thread-safe. */
typedef void (*hg_log_fn)(void *ctx, int level, const char *msg);

#endif /* HOURGLASS_LOG_H */
