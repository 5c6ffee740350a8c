/*
 * hgctl_tools.h - the hedger, statement and replay commands of hgctl and
 * `index fixings` (hgctl_hedge.c, hgctl_statement.c, hgctl_replay.c,
 * hgctl_whatif.c), called from hgctl.c's command table.
 *
 * Each takes the arguments after its command name and returns the process
 * exit status: 0 success, 1 input error or (replay) differences found,
 * 2 usage error. They print results on stdout and errors on stderr. Main
 * thread only.
 */
#ifndef HOURGLASS_HGCTL_TOOLS_H
#define HOURGLASS_HGCTL_TOOLS_H

#include <stdbool.h>
#include <stdio.h>

#include "hourglass/clearing.h"
#include "hourglass/hedge.h"

int hgctl_hedge_size(int argc, char **argv);
int hgctl_hedge_ratio(int argc, char **argv);
int hgctl_hedge_margin(int argc, char **argv);
/* `hgctl index fixings`: an index's fixings from a data directory, as the
 * CSV hedge ratio reads (hgctl_hedge.c). */
int hgctl_index_fixings(int argc, char **argv);
int hgctl_convert(int argc, char **argv);
int hgctl_statement(int argc, char **argv);
int hgctl_replay(int argc, char **argv);

/* Reads a rent (fixings false: day,price) or fixings (day,value,status) CSV
 * file into *v (n rows, malloc'd; the caller frees) for hedge ratio and
 * replay's what-if fixings; what names the file in errors ("rent"). 0, or
 * the error after printing "hgctl: ..." on stderr. Defined in
 * hgctl_hedge.c. */
int hgctl_load_series(const char *what, const char *path, bool fixings, hg_hedge_obs_t **v,
                      size_t *n);

/* Prints account's statement from entries e[0..n) (instrument
 * HG_CLR_NO_INSTRUMENT: all of them) in the format of
 * hg_clearing_statement_csv/_json. 0, HG_EOVERFLOW, -ENOMEM or -EIO. */
int hgctl_statement_print(const hg_ledger_entry_t *e, size_t n, uint32_t account,
                          uint32_t instrument, bool json, FILE *out);

/* The same statement for people and notebooks (--usd): CSV or JSON rows
 * (hgctl_table.h) with the columns index,seq,time_utc,account,instrument,
 * symbol,kind,amount_usd,balance_usd,price_usd,qty: money in USD, prices in
 * USD per GPU-hour, times in UTC, the instrument's symbol from sym(ctx, id)
 * (NULL: none known). Never compared byte for byte: the ledger's units stay
 * the default. 0 or -EIO. */
int hgctl_statement_print_usd(const hg_ledger_entry_t *e, size_t n, uint32_t account,
                              uint32_t instrument, bool json,
                              const char *(*sym)(const void *ctx, uint32_t id), const void *ctx,
                              FILE *out);

#endif /* HOURGLASS_HGCTL_TOOLS_H */
