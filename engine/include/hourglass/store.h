/*
 * hourglass/store.h - the durable state store (LMDB).
 *
 * One LMDB environment in a data directory holds:
 *   meta         the store's format version (and nothing else yet),
 *   instruments  reference records keyed by instrument id,
 *   accounts     reference records keyed by account id,
 *   snapshots    serializations of the whole exchange state machine (books
 *                included, hg_exchange_serialize()), keyed by the journal seq
 *                they cover, big-endian so that key order is seq order,
 *   sessions     the last sequence number of each gateway session, by name,
 *   api_keys     the gateway's API keys, by key id.
 * A restart loads the latest snapshot and replays the journal after its seq.
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
 * Threads. A store is used by one thread at a time (the engine thread, or a
 * snapshot writer that owns it); it is not locked. Separate processes must
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

/* Format of the store's layout; a store written by a newer one is refused. */
#define HG_STORE_FORMAT_VERSION 1u

/* Default LMDB map size (the most the store may grow to), bytes. */
#define HG_STORE_DEFAULT_MAP_SIZE ((size_t)1 << 30)

/* Longest session name, bytes. */
#define HG_STORE_SESSION_MAX 64

typedef enum hg_store_table {
  HG_STORE_INSTRUMENTS = 1,
  HG_STORE_ACCOUNTS = 2,
  HG_STORE_API_KEYS = 3, /* the gateway's API keys, by key id (layout in gateway.h) */
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
 * Stores blob[0..len) as the snapshot covering journal seq (> 0) and deletes
 * the oldest snapshots so that at most keep remain (keep 0 = keep all), in
 * one transaction. Errors (nothing written): HG_EINVAL (seq 0, blob NULL
 * with len > 0), HG_ESTATE (not open, or seq below the newest stored
 * snapshot; the same seq overwrites), HG_EMAPFULL, -errno.
 */
int hg_store_save_snapshot(hg_store_t *s, uint64_t seq, const void *blob, size_t len,
                           uint32_t keep);

/*
 * Calls fn with the newest snapshot and returns what fn returns. blob points
 * into the LMDB map and is valid only during the call: restore from it
 * (hg_exchange_restore) or copy it. HG_ENOTFOUND if there is no snapshot
 * (fn is not called), HG_ESTATE (not open), -errno.
 */
int hg_store_load_latest_snapshot(hg_store_t *s,
                                  int (*fn)(void *ctx, uint64_t seq, const uint8_t *blob,
                                            size_t len),
                                  void *ctx);

/* Seqs of the stored snapshots, oldest first: up to cap into seqs, total
 * count in *n. HG_ESTATE (not open), -errno. */
int hg_store_list_snapshots(hg_store_t *s, uint64_t *seqs, size_t cap, size_t *n);

/*
 * Writes the whole state of ex in one transaction: the snapshot
 * (hg_exchange_serialize(), written straight into the LMDB map, no copy) at
 * seq hg_exchange_last_seq(ex), the instruments and accounts tables
 * rewritten from ex (records below), and the pruning to keep snapshots as in
 * hg_store_save_snapshot(). Errors (nothing written): HG_EINVAL (ex has
 * applied no command), HG_ESTATE, HG_EMAPFULL, -errno. Call it on the thread
 * that owns ex, between two commands.
 *
 * Record layouts (little-endian), for tools that read the tables:
 *   instrument (key id): u8 halted, u8 symbol_len, symbol bytes, i64
 *     tick_size, contract_unit, min_price, max_price, max_order_qty,
 *     ref_price, u32 band_bps, max_orders, max_accounts, u8 default_stp.
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
 * Restores the newest snapshot into ex (just created and empty, see
 * hg_exchange_restore()) and sets *seq to the journal seq it covers: replay
 * the journal from *seq + 1. HG_ENOTFOUND (no snapshot: start from an empty
 * exchange and replay everything), HG_ECORRUPT (snapshot does not match its
 * key or is malformed), and hg_exchange_restore()'s errors; on failure ex is
 * empty. HG_ESTATE (store not open, or ex not empty), -errno.
 */
int hg_store_load_exchange(hg_store_t *s, hg_exchange_t *ex, uint64_t *seq);

/*
 * Reference records (instruments, accounts): opaque bytes under a numeric
 * key, each put or delete its own transaction. get copies up to cap bytes
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
