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

/* 1 if the journal writes zeros into its segments before they take
 * records (not asked not to, and not in memory: tmpfs, ramfs), else 0. */
int hg_journal__zero_fills(const hg_journal_t *j);

/* Zero-fill writes into spare segments so far (each at most 128 KiB). */
uint64_t hg_journal__zero_writes(const hg_journal_t *j);

/* 1 if the current segment is mapped and batches are copied into it (a
 * journal in memory, once its segment took a batch), else 0. */
int hg_journal__mapped(const hg_journal_t *j);

/* Nonzero err: the next hg_journal_open() behaves as if io_uring_queue_init
 * returned err (to test the automatic fallback). One-shot; any thread. */
void hg_journal__fail_next_uring_init(int err);

/*
 * Called by the recovery scan of hg_journal__open_scan for each record that
 * has passed the scan's checks (header, CRC, sequence), in seq order, on the
 * thread that opens the journal. Such a record stays in the journal whatever
 * the scan finds later: a torn tail or a repair only ever cuts after the
 * last record passed. payload (len bytes, the encoded command) is valid only
 * during the call; the callback must not call into the journal.
 */
typedef void (*hg_journal_record_fn)(void *ctx, uint64_t seq, uint64_t ts, const uint8_t *payload,
                                     uint32_t len);

/*
 * hg_journal_open() that hands each record its recovery scan checks to
 * record (may be NULL), so that recovery can decode and replay the journal
 * during the one pass that checks it. Same arguments, results and errors as
 * hg_journal_open(). Any thread; the journal is owned by the caller when it
 * returns.
 */
int hg_journal__open_scan(const char *dir, const hg_journal_options_t *opt,
                          hg_journal_record_fn record, void *record_ctx, hg_journal_t **out);

#endif /* HOURGLASS_ENGINE_JOURNAL_INTERNAL_H */
