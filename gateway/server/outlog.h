/*
 * outlog.h - the gateway's outbound journal (internal to the gateway).
 *
 * Every sequenced server -> client frame of every API key stream, plus each
 * session id a key has logged in with, is appended to an append-only,
 * segmented, CRC32C-checked log. It makes retransmission survive a gateway
 * restart and keeps each key's outbound seq continuous across restarts. It
 * is not the source of truth for trading (the engine journal is), so it is
 * written without fdatasync per batch; see proto/README.md for what
 * survives a crash and what a clean stop.
 *
 * ---------------------------------------------------------------------------
 * On-disk format (version 1), all integers little-endian
 * ---------------------------------------------------------------------------
 * A directory of segments named <dir>/outlog-<segment number, 20 digits>.hgo,
 * numbered from 1 up, never reused. Segment header, 32 bytes:
 *     0  u32 magic 0x534F4748 ("HGOS")
 *     4  u16 format version (1)
 *     6  u16 header size (32)
 *     8  u64 segment number (equals the one in the name)
 *    16  u64 reserved, zero
 *    24  u32 reserved, zero
 *    28  u32 CRC32C of bytes 0..27
 * Records follow, each on an 8-byte boundary:
 *     0  u32 magic 0x524F4748 ("HGOR")
 *     4  u8  type: 1 frame, 2 session id, 3 seq mark, 4 position
 *     5  u8  reserved, zero;  6  u16 reserved, zero
 *     8  u32 payload length
 *    12  u32 CRC32C of bytes 0..11, 16..31 and the payload
 *    16  u64 API key id (> 0)
 *    24  u64 frame: its stream seq; seq mark: the last seq used; session id: 0;
 *        position: its first half (0: none)
 *    32  payload, zero padded to a multiple of 8. Frame: the encoded frame
 *        exactly as sent (length prefix included). Session id: 16 bytes.
 *        Seq mark: empty. Position: u64 second half, u64 frames of the key
 *        logged at the position before this record.
 * Positions (cluster mode, hg_outlog_set_position): the key's frames after
 * a position record, up to its next one, were appended at that position
 * (none: no position). In a log without position records no frame has a
 * position.
 * Versions that predate the type skip such records as unknown (counted as
 * corrupt) and read everything else.
 * A segment ends where its file ends. When a segment rolls, the new one
 * starts with a seq mark for every key and with the session ids whose
 * records live in segments about to be deleted, so deleting old segments
 * loses neither a key's numbering nor the used-session-id rule; the new
 * segment also starts with each key's position record, so the frames a key
 * logged at its last position stay counted.
 *
 * Threads: an hg_outlog_t is owned by one thread (the gateway loop thread);
 * every function must be called from it, except hg_outlog_stats (any
 * thread, relaxed counters).
 */
#ifndef HOURGLASS_GATEWAY_OUTLOG_H
#define HOURGLASS_GATEWAY_OUTLOG_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/log.h"

#define HG_OUTLOG_VERSION 1u
#define HG_OUTLOG_SEGMENT_MAGIC 0x534F4748u /* "HGOS" */
#define HG_OUTLOG_RECORD_MAGIC 0x524F4748u  /* "HGOR" */
#define HG_OUTLOG_SEGMENT_HEADER 32u
#define HG_OUTLOG_RECORD_HEADER 32u
#define HG_OUTLOG_SID_LEN 16u
/* Bytes a record with a payload of len bytes takes in a segment. */
#define HG_OUTLOG_RECORD_SIZE(len) \
  ((((uint64_t)(len)) + HG_OUTLOG_RECORD_HEADER + 7u) & ~(uint64_t)7u)

enum {
  HG_OUTLOG_FRAME = 1,
  HG_OUTLOG_SESSION_ID = 2,
  HG_OUTLOG_SEQ_MARK = 3,
  HG_OUTLOG_POSITION = 4
};

typedef struct hg_outlog_options {
  uint64_t segment_size;  /* a segment rolls before passing it; 0: 64 MiB; 4 KiB .. 4 GiB */
  uint32_t segments_kept; /* older segments are deleted; 0: 8 */
  uint32_t max_frame;     /* largest frame appended (bytes, prefix included); 0: 1 MiB */
  uint32_t max_keys;      /* keys that may be added after open; 0: 2048 */
  uint32_t max_session_ids; /* session ids that may be added after open; 0: 1 << 18 */
  uint32_t index_every;   /* a key's index gets every n-th seq; 0: 32 */
  uint32_t index_entries; /* index entries per key (older ones drop out); 0: 1024 */
  void (*log)(void *ctx, int level, const char *msg); /* hg_log_level_t levels; NULL: stderr */
  void *log_ctx;
} hg_outlog_options_t;

typedef struct hg_outlog_stats {
  uint64_t bytes_written;   /* since open */
  uint64_t write_errors;    /* failed or short writes */
  uint64_t dropped;         /* records not written (staging full while writes failed) */
  uint64_t corrupt;         /* bad records met (scan at open or reads) */
  uint32_t segments;        /* on disk now */
  int last_error;           /* -errno of the last failed write; 0 after a good one */
} hg_outlog_stats_t;

typedef struct hg_outlog hg_outlog_t;

/*
 * Opens (creating dir if missing) and scans the log: restores each key's
 * next seq, its sparse index and the used session ids. A bad record is
 * logged with file and offset, counted and skipped (the scan resumes at the
 * next good record); bad bytes at the end of the newest segment with no
 * good record after them (a torn tail) are cut off. Allocates everything
 * here except each added key's index (hg_outlog_key_add) and the segment
 * table's growth when a roll adds a segment (at most segments_kept + 1 are
 * open). Returns 0 and *out, HG_EINVAL (options), HG_EVERSION (a newer
 * format), -ENOMEM or -errno of directory and file calls.
 */
int hg_outlog_open(const char *dir, const hg_outlog_options_t *opt, hg_outlog_t **out);

/* Writes what is staged, fdatasyncs the newest segment, frees. NULL: no-op. */
void hg_outlog_close(hg_outlog_t *log);

/*
 * Makes room for key (its index is allocated here, not on the order path).
 * 0, HG_EFULL (max_keys added since open), -ENOMEM.
 */
int hg_outlog_key_add(hg_outlog_t *log, uint64_t key);

/*
 * Calls fn once for every key the log knows (found by the scan at open or
 * added since), in no particular order. fn must not add keys.
 */
void hg_outlog_foreach_key(const hg_outlog_t *log, void (*fn)(void *ctx, uint64_t key),
                           void *ctx);

/* The seq after the last one the log knows for key (1 if none). */
uint64_t hg_outlog_next_seq(const hg_outlog_t *log, uint64_t key);

/*
 * Stages a frame record (a memcpy; a write happens only when the staging
 * buffer is full, else at hg_outlog_flush), after a position record when
 * the key's position changed. seq must be above the key's
 * last one. 0, HG_ENOTFOUND (key not added), HG_EINVAL (len 0 or above
 * max_frame, or seq not increasing), HG_EUNAVAIL (dropped: writes are
 * failing and the staging buffer is full; counted, the log keeps going).
 */
int hg_outlog_append(hg_outlog_t *log, uint64_t key, uint64_t seq, const void *frame, uint32_t len);

/*
 * Positions: where the frames appended next come from, as a pair (a, b)
 * ordered by a, then b; a = 0: nowhere in particular (the default). A
 * cluster node's gateway sets the place in the replicated log of the
 * result it is routing, so that after a restart, when the node applies
 * entries it had applied before, it can tell the frames it already logged
 * (hg_outlog_logged) from new ones. Cheap when unchanged: a position
 * record is staged only before a key's first frame at a new position.
 */
void hg_outlog_set_position(hg_outlog_t *log, uint64_t a, uint64_t b);

/*
 * 1 when the next frame of key at the current position is one the log
 * already holds (and counts it as met): the current position is before
 * the key's last logged one, or equal to it and fewer of the key's frames
 * were met at it since it was set (setting none in between and the same
 * position again does not count anew) than the log holds. 0
 * otherwise, and always with no position set. A frame it calls logged is
 * not to be appended (nor sequenced) again.
 */
int hg_outlog_logged(hg_outlog_t *log, uint64_t key);

/* 1 when (key, sid) was recorded before, else 0. sid: HG_OUTLOG_SID_LEN bytes. */
int hg_outlog_sid_used(const hg_outlog_t *log, uint64_t key, const uint8_t *sid);

/*
 * Records (key, sid) as used: in memory at once (so hg_outlog_sid_used
 * sees it) and staged for the next write. 0, HG_EEXISTS, HG_EFULL (table
 * full), HG_EUNAVAIL (as for append; it stays remembered in memory).
 */
int hg_outlog_sid_add(hg_outlog_t *log, uint64_t key, const uint8_t *sid);

/*
 * Writes everything staged with one pwrite (two if a roll falls in
 * between). On failure the bytes stay staged for the next call and the
 * error is counted and returned (-errno). 0 when nothing was staged.
 */
int hg_outlog_flush(hg_outlog_t *log);

/* The oldest seq of key still readable (0: none). */
uint64_t hg_outlog_oldest(const hg_outlog_t *log, uint64_t key);

/*
 * Reads the frame of (key, seq) into buf. Consecutive seqs of one key are
 * read sequentially (a cursor is kept); others start from the index.
 * 0 and *len; HG_ERANGE (before the oldest kept record, see
 * hg_outlog_oldest); HG_ENOTFOUND (not in the log: never written, or lost
 * to a failed write); HG_ECORRUPT (a bad record met on the way and the
 * frame not found after it; logged with file and offset); -ENOBUFS (the
 * frame is longer than cap; nothing consumed); -errno of pread.
 * buf NULL: only checks that the frame reads back intact (*len set).
 */
int hg_outlog_read(hg_outlog_t *log, uint64_t key, uint64_t seq, uint8_t *buf, size_t cap,
                   size_t *len);

/* Counters; any thread (relaxed, may be slightly stale). */
void hg_outlog_stats(const hg_outlog_t *log, hg_outlog_stats_t *out);

#endif /* HOURGLASS_GATEWAY_OUTLOG_H */
