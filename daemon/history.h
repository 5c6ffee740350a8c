/*
 * history.h - a cluster node's sequenced history across its starts (see
 * history.c for the design). Main thread, while no pipeline is open.
 */
#ifndef HG_DAEMON_HISTORY_H
#define HG_DAEMON_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/journal.h"

/* The note daemon_history_continue() leaves in the engine directory while
 * the journal does not start at seq 1 (text, one paragraph). */
#define HG_HISTORY_MISSING_FILE "history.missing"

/*
 * Empties engine_dir except its journal (engine_dir/journal): the state
 * store and the durable mark are rebuilt from the group at every start.
 * Creates engine_dir if absent. 0 or -errno.
 */
int daemon_history_prepare(const char *engine_dir);

/*
 * Makes engine_dir/journal end exactly at snap_seq, the seq of the state
 * the pipeline is about to recover from (0: an empty exchange), so that
 * the records the group applies after it continue it:
 *  - a journal whose records run, CRC- and seq-checked, from its first seq
 *    (at most snap_seq + 1) through snap_seq is kept, and every record after
 *    snap_seq (never committed, or re-applied by the group right after) is
 *    cut;
 *  - any other journal (none, starting after snap_seq + 1, ending before
 *    snap_seq, unreadable) is removed and a new one starts at snap_seq + 1.
 * jo: the pipeline's journal options (segment size; first_seq, the durable
 * floor and the mark are set here). Writes engine_dir/history.missing
 * naming the records before the journal's first seq when it is above 1,
 * removes it otherwise. *first_out (may be NULL): the journal's first seq.
 * 0 or the error (the caller logs it).
 */
int daemon_history_continue(const char *engine_dir, uint64_t snap_seq,
                            const hg_journal_options_t *jo, uint64_t *first_out);

/*
 * Fills the records before journal_dir's first seq F (a cluster node's
 * data_dir/engine/journal started from the group's snapshot) from the
 * journal in from_dir (another node's data_dir/engine/journal, a backup's
 * or an archive's journal, which must start at seq 1 and reach F - 1):
 * every record's CRC and seq are checked as it is copied into new
 * segments (jo's sizes) beside journal_dir, then those segments are renamed
 * into it, newest first, so the journal is always a run of whole segments;
 * the engine directory's history.missing is removed. Nothing in
 * journal_dir changes before every record is copied. Safe beside the
 * running node (its journal only writes at its end). *filled: the records
 * added (0: the journal already starts at seq 1). 0, HG_ENOTFOUND (from_dir
 * lacks some of them; msg says which), or another error.
 */
int daemon_history_fill(const char *journal_dir, const char *from_dir,
                        const hg_journal_options_t *jo, uint64_t *filled, char *msg,
                        size_t msg_cap);

#endif /* HG_DAEMON_HISTORY_H */
