/*
 * hgctl_replay.h (internal) - the private replay hgctl_replay.c runs over a
 * data directory and the statement sets hgctl_statement.c builds from it,
 * shared by `hgctl replay` and `hgctl statement`. Main thread only.
 */
#ifndef HG_GATEWAY_HGCTL_REPLAY_H
#define HG_GATEWAY_HGCTL_REPLAY_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hourglass/clearing.h"
#include "hourglass/exchange.h"
#include "hourglass/hedge.h"
#include "hourglass/index.h"

/* A FINAL price override of one instrument (what-if). */
typedef struct fsp_override {
  uint32_t instrument;
  int64_t fsp;       /* ticks */
  int64_t recorded;  /* FSP the journal's replay paid, 0 if never settled */
} fsp_override_t;

/* Position tally per (instrument, account), open addressing. */
typedef struct pos_slot {
  uint64_t key; /* instrument << 32 | account; 0 = empty (instrument ids are > 0) */
  int64_t pos;
} pos_slot_t;

typedef struct replay {
  const char *data_dir;
  char journal_dir[PATH_MAX];
  char state_file[PATH_MAX];
  hg_exchange_config_t xcfg;
  FILE *out;   /* progress lines, NULL: quiet */
  FILE *fills; /* fills CSV, NULL: none */
  hg_exchange_t *ex;

  uint64_t commands, fills_n, cycles, rejects, dropped;
  bool cycle;              /* set by the sink, consumed after apply */
  char cycle_desc[192];

  pos_slot_t *pos;
  size_t pos_cap, pos_n;
  int pos_err;

  int snap;                /* 0 none, 1 pending, 2 matched, 3 mismatched */
  uint64_t snap_seq;
  uint8_t snap_hash[HG_SHA256_LEN];

  fsp_override_t *fsp;
  size_t n_fsp;

  /* What-if fixings of one index: rows of the fixings file (owned) and how
   * many journaled fixing commands of each row's day were rewritten. */
  char wf_gpu[HG_INDEX_GPU_MAX], wf_grade[HG_INDEX_GRADE_MAX];
  hg_hedge_obs_t *wf;
  uint8_t *wf_used;
  size_t n_wf;
} replay_t;

/* The exchange's clearing ledger inside the replay. */
static inline const hg_clearing_t *hgctl_replay_ledger(const replay_t *rp) {
  return hg_exchange_clearing(rp->ex);
}

/* Zeroes rp and sets the pipeline's default capacities (64 instruments,
 * 4096 accounts, 2^20 book orders); set data_dir and the options, then
 * run. */
void hgctl_replay_init(replay_t *rp);
/* Frees what a run and the options own (the exchange, tallies, what-ifs). */
void hgctl_replay_dispose(replay_t *rp);
/* Replays rp->data_dir's journal from an empty exchange (progress on
 * rp->out), checking the latest snapshot when check_snap. 0, or a negative
 * error, printed on stderr. */
int hgctl_replay_run(replay_t *rp, bool check_snap);
/* --max-instruments, --max-accounts, --max-book-orders (NULL: default) into
 * *x. 0, or EXIT_USAGE (2) after printing why. */
int hgctl_parse_caps(const char *cmd, const char *mi, const char *ma, const char *mo,
                     hg_exchange_config_t *x);
/* The usage text of those options. */
#define CAPS_HELP                                                                        \
  "  --max-instruments N, --max-accounts N, --max-book-orders N: the capacities the\n" \
  "  exchange ran with (defaults: the pipeline's, 64 / 4096 / 1048576). Clearing\n" \
  "  and index parameters are the defaults; a state written with others shows as\n" \
  "  a snapshot MISMATCH.\n"


/* One statement file produced in memory. */
typedef struct stmt_file {
  char name[96];
  char *data;
  size_t len;
} stmt_file_t;

typedef struct stmt_set {
  stmt_file_t *f;
  size_t n, cap;
} stmt_set_t;

void hgctl_stmt_free(stmt_set_t *s);
/* Every account's statement (all instruments, and one per instrument), CSV
 * and JSON, from the replay's ledger with the --fsp what-ifs applied. 0 or
 * an error (HG_EOVERFLOW, -ENOMEM). */
int hgctl_stmt_build(replay_t *rp, stmt_set_t *set);
/* Writes the set into dir (created if missing). 0, or -errno or -EIO
 * (printed on stderr, except a failing close). */
int hgctl_stmt_write(const stmt_set_t *set, const char *dir);
/* Compares the set with the statement files in dir, printing each
 * difference (changed, missing or extra files). The number of differences,
 * or a negative error (-errno printed on stderr, -ENOMEM). */
long hgctl_stmt_compare(const stmt_set_t *set, const char *dir);
/* Whether path resolves inside dir (refuses --out into the live data). */
bool hgctl_path_inside(const char *path, const char *dir);

#endif /* HG_GATEWAY_HGCTL_REPLAY_H */
