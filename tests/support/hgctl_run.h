/*
 * hgctl_run.h - runs the hgctl binary from a test, as a user would: a child
 * process with the key in its environment and its output captured. For the
 * hgctl tests (cmocka: failures to start or reap the child are test
 * failures); each test sets hgctl_path (the binary) and hgctl_port. Main
 * thread only.
 */
#ifndef HOURGLASS_TESTS_HGCTL_RUN_H
#define HOURGLASS_TESTS_HGCTL_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

extern const char *hgctl_path; /* the hgctl binary */
extern char hgctl_port[16];    /* the gateway's port, for --port */
extern bool hgctl_port_from_env; /* set: hgctl_spawn adds no --port */
/* set: the child's stderr goes into its stdout (text), in the order a
 * terminal shows them; err stays empty */
extern bool hgctl_merge_stderr;

typedef struct hgctl_out {
  char text[65536]; /* stdout, NUL-terminated (truncated if longer) */
  char err[4096];   /* stderr, likewise */
  int status;       /* exit status */
} hgctl_out_t;

/* Reads fd to its end (or until buf, cap bytes, is full) and
 * NUL-terminates. */
void hgctl_read_all(int fd, char *buf, size_t cap);

/* Reads fd into buf (appending at *len) until needle appears or timeout_ms
 * passes; true if it appeared. For a child that prints as things happen. */
bool hgctl_read_until(int fd, char *buf, size_t cap, size_t *len, const char *needle,
                      int timeout_ms);

/* Starts hgctl with args (NULL-terminated); stdout and stderr piped. key 0:
 * no key and no --port (offline commands); otherwise the key's id and secret
 * (secret_hex, or the harness's secret for key when NULL: ts_key_secret_hex)
 * in the environment and --port hgctl_port unless args name a port. */
pid_t hgctl_spawn(uint64_t key, const char *secret_hex, const char *const *args, int *out_fd,
                  int *err_fd);

/* Reads the rest of a spawned hgctl's output into o (after the len bytes
 * of o->text already read, e.g. by hgctl_read_until), reaps it and keeps its
 * exit status. To stop one that runs until told, kill it with SIGTERM first. */
void hgctl_collect(pid_t pid, int fo, int fe, hgctl_out_t *o, size_t len);

/* Runs hgctl to the end (see hgctl_spawn) and keeps its output and exit
 * status. */
void hgctl_run_as(hgctl_out_t *o, uint64_t key, const char *secret_hex, const char *const *args);

#endif /* HOURGLASS_TESTS_HGCTL_RUN_H */
