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
#include "hgctl_table.h"

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
  __int128 day_qp; /* sum of signed qty x price (ticks) of the fills since the
                    * instrument's last DSP: what the next VM settles */
} pos_slot_t;

/* One fill seen from one account (statement --trades). */
typedef struct trade {
  uint64_t seq;
  uint32_t k;          /* trade id: seq.k */
  uint64_t ts;
  uint32_t instrument;
  uint8_t side;        /* the account's: HG_SIDE_BUY or HG_SIDE_SELL */
  bool aggressor;      /* the account's order took liquidity */
  int64_t price;       /* ticks */
  int64_t qty;
  int64_t pos_after;
} trade_t;

/* An instrument's symbol, kept after it is delisted or expires. */
/* An account under a call or liquidating, as the replay last printed it. */
typedef struct call_slot {
  hg_account_t account;
  uint8_t status;   /* hg_clr_standing_t */
  bool seen;        /* named by the current mark round or cycle */
  int64_t amount;   /* the call */
  uint64_t due;     /* cycle count it is due at */
} call_slot_t;

typedef struct sym_slot {
  uint32_t id;
  char symbol[HG_SYMBOL_MAX + 1];
} sym_slot_t;

typedef struct replay {
  const char *data_dir;
  char journal_dir[PATH_MAX];
  char state_file[PATH_MAX];
  hg_exchange_config_t xcfg;
  FILE *out;   /* progress lines, NULL: quiet */
  FILE *fills; /* fills CSV, NULL: none */
  bool raw;    /* fills CSV in ticks and nanoseconds instead of USD and UTC */
  hg_exchange_t *ex;

  /* --until/--day: commands stamped before from_ns replay without progress
   * lines or fills rows; the replay stops before the first one stamped at or
   * after until_ns (UINT64_MAX: the whole journal). */
  uint64_t from_ns, until_ns;
  bool stopped;   /* a command at or after until_ns was reached */
  FILE *out_all;  /* out, kept while lines are held back */
  bool show;      /* this command's lines and fills are printed */

  sym_slot_t *syms; /* every instrument ever listed (owned) */
  size_t n_syms, cap_syms;

  /* Fills are named by trade id "<seq>.<k>": the k-th fill (from 1) of the
   * command with that seq. */
  uint32_t fill_k;
  /* trades_of != 0: every fill of that account is kept in trades (owned). */
  hg_account_t trades_of;
  trade_t *trades;
  size_t n_trades, cap_trades;

  uint64_t commands, fills_n, cycles, rejects, dropped;
  bool cycle;              /* set by the sink, consumed after apply */
  char cycle_desc[320];

  pos_slot_t *pos;
  size_t pos_cap, pos_n;
  int pos_err;

  int snap;                /* 0 none, 1 pending, 2 matched, 3 mismatched */
  uint64_t snap_seq;
  uint8_t snap_hash[HG_SHA256_LEN];

  fsp_override_t *fsp;
  size_t n_fsp;

  /* The clearing guarantee: the calls as last printed (a call line only
   * when an account's standing or call changes), cleared when a mark round
   * or cycle no longer names the account; what the replay saw. */
  call_slot_t *calls;
  size_t n_calls, cap_calls, call_hint;
  uint64_t call_lines, liq_fills, bankrupt_cycles;

  /* What-if fixings of one index: rows of the fixings file (owned) and how
   * many journaled fixing commands of each row's day were rewritten. */
  char wf_gpu[HG_INDEX_GPU_MAX], wf_grade[HG_INDEX_GRADE_MAX];
  hg_hedge_obs_t *wf;
  uint8_t *wf_used;
  size_t n_wf;
} replay_t;

/* Sum of q x p (signed qty, ticks) of acct's fills in inst since inst's
 * last DSP, as the replay tallied them. */
__int128 hgctl_replay_day_qp(const replay_t *rp, uint32_t inst, hg_account_t acct);

/* Account ids, in id order. */
typedef struct acct_list {
  hg_account_t *id; /* owned: free() */
  size_t n, cap;
  int err;
} acct_list_t;

/* Every account of the replayed exchange into *out (zeroed first). 0, or
 * -ENOMEM with *out empty. */
int hgctl_replay_accounts(const replay_t *rp, acct_list_t *out);

/* "GPU.GRADE" (e.g. B200.A) into rp->wf_gpu and rp->wf_grade; false if it
 * is not of that form. */
bool hgctl_replay_set_index(replay_t *rp, const char *index);

/* The symbol instrument id had when listed, or NULL. */
const char *hgctl_replay_symbol(const replay_t *rp, uint32_t id);

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
/*
 * What-if "the rest of the month fixes at value" (hgctl_whatif.c), on the
 * state the replay reached: for every contract still open of the index
 * rp->wf_gpu.rp->wf_grade, the days of its delivery month without a FINAL
 * fixing take value (micro-USD per GPU-hour), the FSP follows
 * (settlement/CONTRACT.md section 4.3, one rounding) and each account's P&L
 * from now to final settlement, positions held, is printed on o as a table:
 * TV x (pos_prev x (FSP - last DSP) + FSP x q - sum q x p) over the fills
 * since the last DSP (section 5.6), USD (raw: ticks and micro-USD), then
 * the P&L per firm. fmt JSON or CSV: one table on o instead (hgctl_table.h;
 * column `row`: "account" per account and contract, "firm" per firm,
 * "total"), the per-contract notes on stderr. Changes nothing. 0, or
 * HG_ENOTFOUND (no open contract of the index; printed).
 */
int hgctl_whatif_project(const replay_t *rp, int64_t value, bool raw, hgctl_out_t fmt, FILE *o);

/* Each account's cash in the what-if replay wf against the journal's
 * replay base, as a table on o (USD; raw: micro-USD), with the total (fmt
 * JSON or CSV: hgctl_table.h, column `row` "account" or "total"). 0 or
 * -ENOMEM. */
int hgctl_whatif_cash_table(const replay_t *wf, const replay_t *base, bool raw, hgctl_out_t fmt,
                            FILE *o);

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
 * difference (changed, missing or extra files). dir may hold the set's
 * names or the month scenario's <account>-<SYMBOL>.csv/.json, which stand
 * for account-<A>-instrument-<I> (the symbol's id in rp's replay; an
 * account without entries there has an empty statement); with only the
 * latter, the set's all-instrument files are not expected. The number of
 * differences, or a negative error (-errno printed on stderr, -ENOMEM). */
long hgctl_stmt_compare(const replay_t *rp, const stmt_set_t *set, const char *dir);
/* Whether path resolves inside dir (refuses --out into the live data). */
bool hgctl_path_inside(const char *path, const char *dir);

#endif /* HG_GATEWAY_HGCTL_REPLAY_H */
