/*
 * journal_internal.h - test hooks of the journal. Not part of the public
 * API; only tests include it.
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

#endif /* HOURGLASS_ENGINE_JOURNAL_INTERNAL_H */
