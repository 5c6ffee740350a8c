/*
 * hourglass/journal.h - the durable command journal of the exchange.
 *
 * Every command the sequencer stamps is appended here before the state
 * machine's results are released; a command is acknowledged only when the
 * journal says it is durable (hg_journal_durable_seq()). The payload of a
 * record is opaque bytes to the journal (the exchange puts a protobuf-encoded
 * command in it).
 *
 * ---------------------------------------------------------------------------
 * On-disk format (version 1). All integers little-endian.
 * ---------------------------------------------------------------------------
 * A journal is a directory of segment files named
 *     <dir>/journal-<first seq, 20 decimal digits>.hgj
 * Each segment is preallocated (fallocate) to the configured segment size, so
 * appends never grow the file and fdatasync never has to write a new size.
 *
 * Segment header, 64 bytes at offset 0:
 *     0  u32 magic 0x534A4748 ("HGJS")
 *     4  u16 format version (1)
 *     6  u16 header size (64)
 *     8  u64 first seq of the segment (equals the seq in the file name)
 *    16  40 bytes reserved, zero
 *    56  u32 reserved, zero
 *    60  u32 CRC32C of bytes 0..59
 * Records follow at offset 64, each starting on an 8-byte boundary:
 *     0  u32 magic 0x524A4748 ("HGJR")
 *     4  u16 format version (1)
 *     6  u16 flags, reserved, zero
 *     8  u32 payload length in bytes
 *    12  u32 CRC32C (Castagnoli) of header bytes 0..11, 16..31 and the payload
 *    16  u64 seq, exactly one more than the previous record's
 *    24  u64 ts (nanoseconds, from the sequencer; opaque to the journal)
 *    32  payload, then zero padding to the next multiple of 8
 * A zero magic (the preallocated file reads as zeros) marks the end of the
 * written data of a segment. A segment is closed when the next batch would
 * not fit; the next segment's first seq is the next record's seq.
 *
 * ---------------------------------------------------------------------------
 * Writing: group commit
 * ---------------------------------------------------------------------------
 * hg_journal_append() copies a record into the filling one of two staging
 * buffers (allocated at open; no allocation, lock or syscall per record).
 * hg_journal_commit() submits the whole filling buffer as one batch: a
 * writev linked (IOSQE_IO_LINK) to an fdatasync in one io_uring submission.
 * While that batch is in flight the other buffer fills; hg_journal_poll()
 * reaps the completions, advances durable_seq to the batch's last seq and
 * submits whatever accumulated meanwhile. At most one batch is in flight,
 * so acknowledgements are released strictly in seq order. Without io_uring
 * (option force_fallback, a journal in memory, or io_uring_queue_init
 * failing, which is logged once) a commit does pwritev + fdatasync
 * synchronously instead. A journal in memory (tmpfs, ramfs) always does,
 * and makes no fdatasync call: its write is a copy (into a shared mapping
 * of the segment when its file holds the whole segment, so no system call
 * at all) and its sync has nothing to flush (the kernel's sync of these
 * filesystems does nothing), so
 * through io_uring (whose linked fdatasync runs on a kernel worker thread)
 * the only cost left would be waking that worker and being woken by it, and
 * on the fallback path the sync would be a system call per batch that
 * changes nothing.
 *
 * Failure. A short write, a failed write or sync (-EIO, -ENOSPC, ...), or a
 * cancelled sync (-ECANCELED) puts the journal into the failed state for
 * good: durable_seq never moves again, appends return HG_EUNAVAIL and
 * hg_journal_error() gives the cause. Nothing undurable is acknowledged.
 *
 * ---------------------------------------------------------------------------
 * Recovery (hg_journal_open)
 * ---------------------------------------------------------------------------
 * Segments are scanned in seq order and every record is checked (magic,
 * version, length inside the file, CRC, seq = previous + 1). Scanning stops
 * at the first slot that is not a good record: the "stop point".
 *  - A zero magic in a segment followed by nothing but zeros is the normal
 *    end of that segment's data.
 *  - Torn tail: the stop point is in the last segment and no valid record
 *    (record magic and good CRC at any 8-byte aligned offset) follows it, in
 *    that segment or any later one. Such bytes were never acknowledged (they
 *    belong to the one batch that was in flight); they are zeroed and a
 *    warning gives the offset and the number of torn bytes found (those in
 *    8-byte words holding data: the zero stretches a torn batch leaves
 *    between the pieces that reached the disk are not counted).
 *  - Corruption: anything else, i.e. a bad record followed by a valid one, a
 *    bad record in a non-last segment, a bad segment header, or a seq gap.
 *    Open fails with HG_ECORRUPT and logs the file, the offset and the
 *    operator's options. Nothing on disk is changed.
 *  - Repair (option repair) cuts only what a crash can leave torn: a stop
 *    point at a record slot of the last segment with no more than one batch
 *    (batch_bytes) of data from there to the segment's last nonzero byte,
 *    and after the durable floor (below). The rest of that segment is
 *    zeroed and the log says how many records were dropped (the bad one
 *    plus every valid record after it, all of them part of the batch that
 *    was in flight). Any other corruption is refused as without repair:
 *    nothing changes, and the message spells out the options (restore from
 *    a backup; or, when the journal is whole from seq 1 and only the
 *    snapshots are in doubt, start from the journal alone).
 *  A crash can, rarely, persist a later page of the in-flight batch but not
 *  an earlier one; that leaves a valid (never acknowledged) record after a
 *  hole and is reported as corruption: the safe direction, repair is the
 *  remedy and drops only unacknowledged records in that case.
 *  - Missing records: the journal must reach its durable floor, the higher
 *    of the option durable_floor (the pipeline passes its latest snapshot's
 *    seq, which the journal was durable past) and the durable mark. If its
 *    last whole record is below the floor, or the directory holds no
 *    segment at all while the floor is above 0, open fails with HG_ECORRUPT
 *    and a message naming the missing range ("journal ends at seq X but seq
 *    Y was durable (...): records X+1..Y are missing"), before anything on
 *    disk changes (not even a torn tail is cut). So a seq once acknowledged
 *    is never handed out again for another command.
 *  - A segment header or record with a newer format version: HG_EVERSION,
 *    with a message naming the file and both versions.
 *
 * ---------------------------------------------------------------------------
 * Durable mark (option mark_path)
 * ---------------------------------------------------------------------------
 * The segments cannot vouch for themselves: a deleted last segment, or a
 * deleted journal directory, leaves a journal that looks whole and merely
 * shorter. The durable mark is a small file kept outside the journal
 * directory (hourglassd: <data_dir>/durable.mark) that says "every record up
 * to seq D was durable". 48 bytes, little-endian:
 *     0  u32 magic 0x4D4A4748 ("HGJM")
 *     4  u16 format version (1)
 *     6  u16 size (48)
 *     8  u64 D, the durable seq
 *    16  u64 first seq of the segment current when it was written
 *    24  u64 wall-clock time of the write, ns since the Unix epoch (for
 *            messages only)
 *    32  12 bytes reserved, zero
 *    44  u32 CRC32C of bytes 0..43
 * It is replaced (temp file "<name>.tmp", fdatasync, rename, fsync of its
 * directory, so it is always a whole old or a whole new mark) at open once
 * the recovered records are synced, after each roll-over (D = the new
 * segment's first seq - 1; written right after the new segment's first batch
 * is handed to the kernel, so it overlaps that batch's I/O: two syncs per
 * segment, none per record), and at a clean close. D never goes down. A
 * failed write leaves the older, lower mark, which is still true; it is
 * logged and retried at the next roll-over. The mark lags the journal by at
 * most one segment; the snapshot floor (durable_floor) often covers more.
 * The segment the mark names (offset 16) was renamed into place and synced
 * before the mark was written, so open also fails (HG_ECORRUPT) when that
 * segment is missing: a deleted last segment or journal directory is found
 * even after a crash, when D itself may be older than the lost records.
 * No mark file (a new data directory, or one written by a version without
 * marks): the floor is durable_floor alone, and open writes the mark. A
 * damaged mark (bad size, magic or CRC) fails open with HG_ECORRUPT; the
 * message says how to go on (move it aside once the journal is known whole;
 * open rewrites it from the journal).
 *
 * Threads. A hg_journal_t is owned by one thread at a time (the journal
 * writer thread of the pipeline, or the event loop thread that drives it;
 * ownership passes with a thread start or join): every function taking a
 * hg_journal_t * must be called from it, except hg_journal_durable_seq() and
 * hg_journal_failed(), which any thread may call. A reader (hg_journal_reader_t) is owned by the thread
 * that opened it; any number of readers may run alongside the writer.
 *
 * Messages (warnings about torn tails, corruption, repair, the mark, the
 * fallback) start with "journal: " and go to the options' log callback (an
 * hg_log_fn with hg_log_level_t levels, called on the thread that called the
 * journal function: open, commit, poll, close), or to stderr when it is NULL.
 */
#ifndef HOURGLASS_JOURNAL_H
#define HOURGLASS_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/error.h"
#include "hourglass/log.h"

#define HG_JOURNAL_FORMAT_VERSION 1u
#define HG_JOURNAL_SEGMENT_MAGIC 0x534A4748u /* "HGJS" */
#define HG_JOURNAL_RECORD_MAGIC 0x524A4748u  /* "HGJR" */
#define HG_JOURNAL_MARK_MAGIC 0x4D4A4748u    /* "HGJM" */
#define HG_JOURNAL_SEGMENT_HEADER_SIZE 64u
#define HG_JOURNAL_RECORD_HEADER_SIZE 32u

/* Bytes a record with a payload of len bytes takes in a segment. */
#define HG_JOURNAL_RECORD_SIZE(len) \
  ((((uint64_t)(len)) + HG_JOURNAL_RECORD_HEADER_SIZE + 7u) & ~(uint64_t)7u)

typedef struct hg_journal_options {
  /* Size of each segment file in bytes (preallocated). 0: 64 MiB. At least
   * HG_JOURNAL_SEGMENT_HEADER_SIZE + batch_bytes. */
  uint64_t segment_size;
  /* Largest payload hg_journal_append() accepts. 0: 64 KiB. */
  uint32_t max_payload;
  /* Capacity of each of the two staging buffers; bounds one batch.
   * 0: 4 MiB. At least HG_JOURNAL_RECORD_SIZE(max_payload). */
  uint32_t batch_bytes;
  /* Seq of the first record of an empty journal. 0: 1. */
  uint64_t first_seq;
  /* Nonzero: never use io_uring; commit with pwritev + fdatasync. */
  int force_fallback;
  /* Nonzero: segments are only preallocated (fallocate), not also written
   * with zeros before use; every fdatasync may then commit filesystem
   * metadata too (see journal.c). For comparisons; the default zero-fills. */
  int no_zero_fill;
  /* Nonzero: cut a torn last batch that is not a plain torn tail (see
   * "Recovery"); any other corruption still fails open with HG_ECORRUPT. */
  int repair;
  /* Path of the durable mark file, outside dir (see "Durable mark"); its
   * directory must exist. Copied at open. NULL: no mark. */
  const char *mark_path;
  /* A seq known to have been durable in this journal (the pipeline passes
   * its latest snapshot's seq); open fails if the journal ends before it.
   * 0: none. */
  uint64_t durable_floor;
  /* Where messages go; NULL: stderr. ctx is passed back untouched. */
  hg_log_fn log;
  void *log_ctx;
} hg_journal_options_t;

/* Opaque writer handle. */
typedef struct hg_journal hg_journal_t;

/* Fills opt with the defaults (all sizes 0 = default, no repair). */
void hg_journal_options_init(hg_journal_options_t *opt);

/*
 * Opens (recovers) the journal in directory dir, which must exist, and
 * positions it after the last good record. Creates the first segment of an
 * empty journal and preallocates a spare segment for the next roll-over.
 *   dir  path of the journal directory; copied.
 *   opt  options; NULL means defaults; copied.
 *   out  receives the handle; set only on success.
 * Errors: HG_EINVAL (bad options), HG_ECORRUPT (corruption, a repair
 * refused, records missing below the durable floor, or a damaged mark; see
 * above; what and where logged, nothing changed), HG_EVERSION (newer format), -ENOENT / -ENOTDIR /
 * -EACCES and other -errno for directory and file errors (logged),
 * -ENOMEM.
 */
int hg_journal_open(const char *dir, const hg_journal_options_t *opt, hg_journal_t **out);

/*
 * Reads the durable mark file at path (see "Durable mark") without writing
 * anything, for tools that read a data directory beside a running daemon:
 * 0 with *seq (every record up to it was durable) and, for the non-NULL
 * ones, *segment_first (the first seq of the segment that must exist, 0
 * none) and *time_ns (the mark's wall-clock time); HG_ENOTFOUND (no mark
 * file), HG_ECORRUPT (damaged), HG_EVERSION (newer format), HG_EINVAL,
 * -errno. Any thread.
 */
int hg_journal_read_mark(const char *path, uint64_t *seq, uint64_t *segment_first,
                         uint64_t *time_ns);

/*
 * Commits everything staged, waits until it is durable (or the journal has
 * failed), releases every resource and frees j.
 * Returns 0, or the journal's error if it failed (j is freed either way).
 */
int hg_journal_close(hg_journal_t *j);

/*
 * Stages one record. The payload is copied; the pointer need not stay valid.
 *   seq  must equal hg_journal_next_seq(j).
 *   ts   timestamp stored as given.
 *   payload, len  the command bytes; payload may be NULL when len is 0.
 * Errors: HG_EUNAVAIL (journal failed; nothing more is accepted),
 * HG_EINVAL (len > max_payload, or NULL payload with len > 0),
 * HG_ERANGE (seq out of order), HG_EBUSY (staging buffer full: call
 * hg_journal_poll(), then retry). No error changes the journal.
 */
int hg_journal_append(hg_journal_t *j, uint64_t seq, uint64_t ts, const void *payload, uint32_t len);

/*
 * Submits the staged records as one batch if no batch is in flight; if one
 * is, they go as soon as hg_journal_poll() reaps it. With the fallback the
 * write and sync happen here, synchronously.
 * Errors: the journal's error once it has failed (-EIO, -ENOSPC, ...).
 */
int hg_journal_commit(hg_journal_t *j);

/*
 * Reaps completions, advances durable_seq, and submits the records staged
 * meanwhile (group commit).
 *   timeout_ms  0: do not block; < 0: block until the in-flight batch
 *               completes (returns at once if none); > 0: block at most
 *               that long.
 * Errors: the journal's error once it has failed.
 */
int hg_journal_poll(hg_journal_t *j, int timeout_ms);

/*
 * Commits and polls until every staged record is durable.
 * Errors: the journal's error if it failed.
 */
int hg_journal_sync(hg_journal_t *j);

/*
 * Highest seq known durable (0 or first_seq - 1 before the first record).
 * Any thread. Acquire load: records up to the returned seq are durable and
 * readable by a reader once this returns.
 */
uint64_t hg_journal_durable_seq(const hg_journal_t *j);

/* 0 while healthy, the journal's error once it failed. Any thread. */
int hg_journal_failed(const hg_journal_t *j);

/*
 * The error of a failed journal and a message describing it (file, offset,
 * what failed). The message is owned by j and valid until hg_journal_close.
 * Returns 0 and "" when healthy.
 */
int hg_journal_error(const hg_journal_t *j, const char **msg);

/* Seq the next hg_journal_append() must carry. */
uint64_t hg_journal_next_seq(const hg_journal_t *j);

/* Nonzero when batches go through io_uring, 0 with the fallback. */
int hg_journal_uses_io_uring(const hg_journal_t *j);

/*
 * Driving the journal from an event loop instead of a thread of its own.
 * hg_journal_commit() never blocks with io_uring: it submits the batch and
 * returns. hg_journal_poll(j, 0) reaps what completed without blocking and
 * submits what was staged meanwhile. To learn when to reap without
 * polling, register an eventfd: the kernel then signals it for every
 * completion (io_uring_register_eventfd), so a loop watches fd for
 * readability, reads it (clearing the count) and calls hg_journal_poll(j,
 * 0). With the fallback the call does nothing and returns 0: the commit is
 * synchronous, durable when it returns. The caller keeps fd open until
 * hg_journal_close(). 0 or -errno (io_uring_register_eventfd).
 */
int hg_journal_set_eventfd(hg_journal_t *j, int fd);

/* ------------------------------------------------------------------------ */
/* Reading (replay, retransmission)                                          */
/* ------------------------------------------------------------------------ */

typedef struct hg_journal_reader hg_journal_reader_t;

typedef struct hg_journal_record {
  uint64_t seq;
  uint64_t ts;
  /* Points into a read-only mapping of the segment file; valid until the
   * next hg_journal_reader_next() or hg_journal_reader_close(). */
  const void *payload;
  uint32_t len;
} hg_journal_record_t;

/*
 * The first seq of the oldest segment in dir into *seq: where a reader of
 * the whole journal starts (1, or later for a journal opened with a larger
 * first_seq or trimmed). Any thread; reads only the directory.
 * Errors: HG_ENOTFOUND (dir holds no segment), -errno for directory
 * errors, -ENOMEM.
 */
int hg_journal_first_seq(const char *dir, uint64_t *seq);

/*
 * Opens a reader positioned at from_seq. The reader verifies every record's
 * CRC and seq. It may run while a writer appends to the same directory.
 *   dir       journal directory.
 *   from_seq  first seq to return.
 *   out       receives the reader; set only on success.
 * Errors: HG_ENOTFOUND (from_seq is before the first segment, i.e. no
 * longer in the journal), -errno for directory errors, -ENOMEM.
 */
int hg_journal_reader_open(const char *dir, uint64_t from_seq, hg_journal_reader_t **out);

/*
 * Returns the next record into *rec.
 *   max_seq  records with a larger seq are not returned (HG_ENOTFOUND). A
 *            reader following a live journal passes the writer's
 *            hg_journal_durable_seq(), so it never reads a batch in flight;
 *            UINT64_MAX for a closed journal.
 * Errors: HG_ENOTFOUND (no further record yet: end of the journal or
 * max_seq reached; a later call may succeed), HG_ECORRUPT (a slot at or
 * before max_seq is not a good record), HG_EVERSION, -errno on I/O errors.
 */
int hg_journal_reader_next(hg_journal_reader_t *r, uint64_t max_seq, hg_journal_record_t *rec);

/* Releases the reader; records it returned become invalid. */
void hg_journal_reader_close(hg_journal_reader_t *r);

#endif /* HOURGLASS_JOURNAL_H */
