/*
 * hourglass/store.h - the durable state store (LMDB).
 *
 * One LMDB environment in a data directory holds eight tables:
 *   meta         the store's format version (and nothing else yet),
 *   instruments  reference records keyed by instrument id,
 *   accounts     reference records keyed by account id,
 *   snapshots    serializations of the whole exchange state machine (books
 *                included, hg_exchange_serialize()), keyed by the journal seq
 *                they cover, big-endian so that key order is seq order, each
 *                behind a checked header (below),
 *   sessions     the last sequence number of each gateway session, by name,
 *   api_keys     the gateway's API keys, by key id,
 *   fixings      the index fixings, by (group, day),
 *   ledger       the clearing ledger's cash movements, by index.
 * instruments, accounts, fixings and ledger are copies for tools, written by
 * hg_store_save_exchange(); the snapshot alone is what a restart uses.
 * A restart loads the newest snapshot that passes its checks and replays the
 * journal after its seq.
 *
 * Snapshot integrity. LMDB checks its pages' structure but keeps no checksum
 * of values, so a flipped bit inside a snapshot would otherwise restore as a
 * slightly different state (a price, a balance) with no warning. Every
 * snapshot value is a header of HG_STORE_SNAPSHOT_HEADER bytes followed by
 * the blob, written in the same transaction (little-endian):
 *    0  u32 magic HG_STORE_SNAPSHOT_MAGIC
 *    4  u32 header layout, HG_STORE_SNAPSHOT_LAYOUT
 *    8  u64 seq, equal to the key
 *   16  u64 blob length, equal to the value's length minus the header
 *   24  32 bytes: the state hash claimed, SHA-256 of the blob, which for an
 *       hg_exchange_serialize() blob is hg_exchange_hash() of its state
 *   56  u32 zero
 *   60  u32 CRC32C of bytes 0..59 followed by the blob
 * Two checks, for two failures. The CRC is the storage check: it covers
 * every byte of header and blob and detects every flip of up to 32 bits in
 * a row (so every single-bit flip), and being cheap (one pass at memory
 * speed) it is also run when pruning. The state hash is the end-to-end
 * check: hg_store_restore_snapshot() recomputes hg_exchange_hash() of the
 * restored exchange and compares, which also catches a restore that would
 * rebuild something other than what was saved; and hgctl replay compares
 * the same hash with a replay of the journal. A value that fails any check
 * (no header, an unknown layout, seq or length not matching, CRC) is "bad":
 * it is never handed to a caller, and hg_store_errmsg() names its seq and
 * the reason.
 *
 * Pruning keeps the newest keep GOOD snapshots: it walks from the newest,
 * checking each one's CRC, and deletes only what is older than the keep-th
 * good one. A bad snapshot newer than that stays for the operator (hgctl
 * replay names it) until keep good snapshots newer than it exist; pruning
 * can thus never leave fewer than min(keep, good ones stored) good
 * snapshots.
 *
 * Lifecycle, as LMDB's: hg_store_create -> hg_store_open -> ... ->
 * hg_store_close (also after a failed open). Every write is one LMDB write
 * transaction: it commits whole or not at all, so a crash or a full map never
 * leaves a half-written snapshot.
 *
 * Errors: 0 or negative. System errors are -errno; LMDB's own codes are
 * converted here: MDB_MAP_FULL -> HG_EMAPFULL, MDB_NOTFOUND -> HG_ENOTFOUND,
 * MDB_INVALID / MDB_CORRUPTED / MDB_PAGE_NOTFOUND -> HG_ECORRUPT,
 * MDB_VERSION_MISMATCH -> HG_EVERSION, the *_FULL limits -> HG_EFULL, any
 * other LMDB code -> -EIO. After any failure hg_store_errmsg() describes it
 * in one line naming the data directory, suitable for an operator.
 *
 * Threads. A store is used by one thread at a time (in the pipeline: the
 * owner thread during recovery, then the snapshot thread while the pipeline
 * runs); it is not locked. Separate processes must
 * not open the same directory for writing (hourglassd holds data_dir/LOCK for
 * this); any number may open it with hg_store_open_readonly() meanwhile.
 */
#ifndef HOURGLASS_STORE_H
#define HOURGLASS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/exchange.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Format of the store's layout, written when the store is made; a store of
 * another format is refused (HG_EVERSION). */
#define HG_STORE_FORMAT_VERSION 2u

/* The snapshot header (layout above). */
#define HG_STORE_SNAPSHOT_HEADER 64u
#define HG_STORE_SNAPSHOT_MAGIC 0x50534748u /* "HGSP" */
#define HG_STORE_SNAPSHOT_LAYOUT 1u

/* Default LMDB map size (the most the store may grow to), bytes. */
#define HG_STORE_DEFAULT_MAP_SIZE ((size_t)1 << 30)

/* Longest session name, bytes. */
#define HG_STORE_SESSION_MAX 64

typedef enum hg_store_table {
  HG_STORE_INSTRUMENTS = 1,
  HG_STORE_ACCOUNTS = 2,
  HG_STORE_API_KEYS = 3, /* the gateway's API keys, by key id (layout:
                            hg_key_record_encode, gateway/server/session.h) */
  HG_STORE_FIXINGS = 4,  /* index fixings, written by hg_store_save_exchange */
  HG_STORE_LEDGER = 5    /* the clearing ledger (cash movements), same */
} hg_store_table_t;

typedef struct hg_store hg_store_t;

/* Allocates an unopened store. 0 and *out, or -ENOMEM. */
int hg_store_create(hg_store_t **out);

/*
 * Opens (creating the LMDB files and tables if needed) the store in the
 * existing directory dir, with an LMDB map of map_size bytes (0 = default;
 * rounded up by LMDB to whole pages). Errors, each with hg_store_errmsg():
 * -ENOENT (dir does not exist), -ENOTDIR (dir is not a directory), -EACCES
 * (dir not readable and writable), HG_ECORRUPT (the files are not an LMDB
 * store), HG_EVERSION (written by a newer format), HG_EMAPFULL (no room even
 * for the tables), HG_ESTATE (already open), HG_EINVAL (dir NULL or too
 * long), other -errno. After a failure the store stays unopened; close it.
 */
int hg_store_open(hg_store_t *s, const char *dir, size_t map_size);

/*
 * Opens the existing store in dir for reading only, alongside a process that
 * may be writing it (a running hourglassd): LMDB's MDB_RDONLY, so the data
 * file is never written and no table or file is created; the one write is
 * this process's reader slot in dir/lock.mdb, which is how LMDB readers and
 * the writer coexist (the writer never reuses pages a reader still sees).
 * Only the read functions work on such a store; every write returns -EACCES.
 * Errors, each with hg_store_errmsg(): -ENOENT (dir or dir/data.mdb does not
 * exist), -ENOTDIR, -EACCES (dir not readable), HG_ECORRUPT (not an
 * hourglass store, or a table is missing), HG_EVERSION, HG_ESTATE (already
 * open), HG_EINVAL (dir NULL or too long), other -errno.
 */
int hg_store_open_readonly(hg_store_t *s, const char *dir);

/* Closes and frees the store (open or not). NULL is a no-op. */
void hg_store_close(hg_store_t *s);

/* One-line description of the last failure ("" if none). Valid until the
 * next call on s. */
const char *hg_store_errmsg(const hg_store_t *s);

/*
 * Stores blob[0..len) as the snapshot covering journal seq (> 0), behind its
 * header (the state hash is SHA-256 of blob, computed here on the calling
 * thread), and prunes to the newest keep good snapshots (keep 0 = keep
 * all), in one transaction. Errors (nothing written): HG_EINVAL (seq 0, blob
 * NULL with len > 0), HG_ESTATE (not open, or seq below the newest stored
 * snapshot; the same seq overwrites), HG_EMAPFULL, -errno.
 */
int hg_store_save_snapshot(hg_store_t *s, uint64_t seq, const void *blob, size_t len,
                           uint32_t keep);

/* A snapshot that passed its checks, as handed to a callback. blob points
 * into the LMDB map and is valid only during the call. */
typedef struct hg_store_snapshot {
  uint64_t seq;                /* the journal seq it covers (its key) */
  const uint8_t *blob;         /* the serialized state, without the header */
  size_t len;
  uint8_t hash[HG_SHA256_LEN]; /* the state hash its header claims */
} hg_store_snapshot_t;

/*
 * Checks the snapshot at seq (0: the newest) and, if it is good, calls fn
 * with it and returns what fn returns. HG_ENOTFOUND (no such snapshot, or
 * none at all), HG_ECORRUPT (the snapshot is bad; fn is not called;
 * hg_store_errmsg() says "snapshot at seq S in DIR is bad: REASON"),
 * HG_ESTATE (not open), -errno.
 */
int hg_store_load_snapshot(hg_store_t *s, uint64_t seq,
                           int (*fn)(void *ctx, const hg_store_snapshot_t *snap), void *ctx);

/*
 * The newest snapshot, as hg_store_load_snapshot(s, 0, ...) with fn given
 * only seq and the blob (restore from it with hg_exchange_restore, or copy
 * it). A bad newest snapshot is HG_ECORRUPT: this does not fall back.
 */
int hg_store_load_latest_snapshot(hg_store_t *s,
                                  int (*fn)(void *ctx, uint64_t seq, const uint8_t *blob,
                                            size_t len),
                                  void *ctx);

/* Seqs of the stored snapshots (good or bad), oldest first: up to cap into
 * seqs (NULL with cap 0 just counts; a malformed key lists as 0), total
 * count in *n. HG_ESTATE (not open), -errno. */
int hg_store_list_snapshots(hg_store_t *s, uint64_t *seqs, size_t cap, size_t *n);

/*
 * Restores the snapshot at seq (0: the newest) into ex (just created and
 * empty, see hg_exchange_restore()) after every check: the header and CRC,
 * the blob's own seq equal to the key, and, once restored, hg_exchange_hash()
 * of ex equal to the hash the header claims. Errors, each with
 * hg_store_errmsg() naming the snapshot's seq, the directory and the reason:
 * HG_ENOTFOUND (no such snapshot), HG_ECORRUPT (bad, malformed, or hashing
 * differently once restored), hg_exchange_restore()'s errors (HG_EVERSION,
 * HG_EFULL: ex's capacities are too small, -ENOMEM), HG_ESTATE (not open, or
 * ex not empty), -errno. After a failure ex is empty except after the
 * hash comparison failed: then it holds the restored state, so a caller
 * that tries another snapshot must start from a fresh exchange.
 */
int hg_store_restore_snapshot(hg_store_t *s, uint64_t seq, hg_exchange_t *ex);

/*
 * Writes the whole state of ex in one transaction: the snapshot
 * (hg_exchange_serialize(), written straight into the LMDB map, no copy) at
 * seq hg_exchange_last_seq(ex) behind its header, the instruments, accounts
 * and fixings tables rewritten from ex and the ledger table appended to
 * (records below), and the pruning to keep good snapshots as in
 * hg_store_save_snapshot(). Errors (nothing written): HG_EINVAL (ex has
 * applied no command), HG_ESTATE, HG_EMAPFULL, -errno. Call it on the
 * thread that owns ex, between two commands.
 *
 * Record layouts (little-endian), for tools that read the tables:
 *   instrument (key id): u8 halted, u8 symbol_len, symbol bytes, i64
 *     tick_size, contract_unit, min_price, max_price, max_order_qty,
 *     ref_price, u32 max_orders, max_accounts, u8 default_stp.
 *   account (key id): u32 firm, i64 cash (micro-USD).
 *   fixing (key group << 32 | day, group the index id 1.., day the UTC day
 *     number): u8 gpu_len, gpu, u8 grade_len, grade, i64 value (micro-USD
 *     per GPU-hour), i32 carried_from, u8 status, u8 kind, u8 tier, u8
 *     source_len, source (hourglass/index.h values). Rewritten each save.
 *   ledger entry (key its index from 0): u64 seq, u64 ts, u32 account, u32
 *     instrument, u32 kind, i64 amount, i64 balance, i64 price, i64 qty
 *     (hg_ledger_entry_t). The ledger is append-only: each save appends
 *     the entries posted since the previous one.
 */
int hg_store_save_exchange(hg_store_t *s, const hg_exchange_t *ex, uint32_t keep);

/*
 * hg_store_restore_snapshot() of the newest snapshot, setting *seq to the
 * journal seq it covers: replay the journal from *seq + 1. HG_ENOTFOUND (no
 * snapshot: start from an empty exchange and replay everything), and the
 * errors of hg_store_restore_snapshot(). This does not fall back to an older
 * snapshot; recovery (hourglass/pipeline.h) does.
 */
int hg_store_load_exchange(hg_store_t *s, hg_exchange_t *ex, uint64_t *seq);

/*
 * Records of the numbered tables (hg_store_table_t): opaque bytes under a
 * numeric key, each put or delete its own transaction. get copies up to cap bytes
 * and sets *len to the record's full length (HG_ERANGE if cap was short).
 * HG_ENOTFOUND (get or del of a missing key), HG_EINVAL (bad table),
 * HG_ESTATE (not open), HG_EMAPFULL (put), -errno.
 */
int hg_store_put(hg_store_t *s, hg_store_table_t table, uint64_t key, const void *val,
                 size_t len);
int hg_store_get(hg_store_t *s, hg_store_table_t table, uint64_t key, void *buf, size_t cap,
                 size_t *len);
int hg_store_del(hg_store_t *s, hg_store_table_t table, uint64_t key);

/*
 * Calls fn(ctx, key, val, len) for every record of table in key order,
 * inside one read transaction (val is valid during the call only; fn must
 * not write to the store). A nonzero return from fn stops the walk and is
 * returned. 0, HG_EINVAL (bad table), HG_ESTATE (not open), -errno.
 */
int hg_store_foreach(hg_store_t *s, hg_store_table_t table,
                     int (*fn)(void *ctx, uint64_t key, const void *val, size_t len), void *ctx);

/*
 * Session sequence numbers (for the gateway): the last seq of session name
 * (NUL-terminated, 1..HG_STORE_SESSION_MAX bytes). get gives HG_ENOTFOUND
 * for a session never set. HG_EINVAL (name), HG_ESTATE, HG_EMAPFULL, -errno.
 */
int hg_store_set_session_seq(hg_store_t *s, const char *name, uint64_t seq);
int hg_store_get_session_seq(hg_store_t *s, const char *name, uint64_t *seq);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_STORE_H */
