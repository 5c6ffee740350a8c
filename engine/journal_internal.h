/*
 * journal_internal.h - test hooks of the journal, and the recovery-progress
 * variant of open that the pipeline uses. Not part of the public API.
 */
#ifndef HOURGLASS_ENGINE_JOURNAL_INTERNAL_H
#define HOURGLASS_ENGINE_JOURNAL_INTERNAL_H

#include "hourglass/journal.h"

enum hg_journal_fault {
  HG_JOURNAL_FAULT_NONE = 0,
  HG_JOURNAL_FAULT_SHORT_WRITE, /* the next batch's write writes half its bytes */
  HG_JOURNAL_FAULT_EIO,         /* the next batch's write fails with -EIO */
  HG_JOURNAL_FAULT_ENOSPC       /* the next batch's write fails with -ENOSPC */
};

/*
 * Arms a fault for the next submitted batch, on either path. On the io_uring
 * path EIO/ENOSPC are produced by submitting the write with an unmapped
 * buffer, so the kernel really fails it and really cancels the linked
 * fdatasync (-ECANCELED); the write's result is then reported as the
 * injected errno. Writer thread only.
 */
void hg_journal__inject_fault(hg_journal_t *j, enum hg_journal_fault fault);

/* Nonzero err: the next hg_journal_open() behaves as if io_uring_queue_init
 * returned err (to test the automatic fallback). One-shot; any thread. */
void hg_journal__fail_next_uring_init(int err);

/*
 * Called by the recovery scan of hg_journal__open_progress with seq: every
 * record up to seq has passed the scan's checks (header, CRC, sequence) and
 * stays in the journal whatever the scan finds later (a torn tail or a
 * repair only ever cuts after the last record reported). Calls are made in
 * increasing seq order, every few thousand records, at the end of each
 * segment and once when the scan is complete, all on the thread that opens
 * the journal; it must be quick and must not call into the journal. seq
 * may be below the first seq of the journal (nothing checked yet).
 */
typedef void (*hg_journal_progress_fn)(void *ctx, uint64_t seq);

/*
 * hg_journal_open() that reports its recovery scan's progress, so that
 * another thread may read (hg_journal_reader_*) the records already
 * checked while the scan goes on. Same arguments, results and errors as
 * hg_journal_open(); progress may be NULL. A reader must not read past the
 * last seq reported: beyond it the scan may still truncate (torn tail,
 * repair). Any thread; the journal is owned by the caller when it returns.
 */
int hg_journal__open_progress(const char *dir, const hg_journal_options_t *opt,
                              hg_journal_progress_fn progress, void *progress_ctx,
                              hg_journal_t **out);

/*
 * Lets reader r skip the CRC of the records up to through_seq, which the
 * caller has seen pass the recovery scan (the progress of
 * hg_journal__open_progress); everything else is still checked (magic,
 * version, length, seq order). Never lowers an earlier value. Reader's
 * thread.
 */
void hg_journal__reader_trust(hg_journal_reader_t *r, uint64_t through_seq);

#endif /* HOURGLASS_ENGINE_JOURNAL_INTERNAL_H */
