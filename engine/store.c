/*
 * The state store: one LMDB environment with eight named databases (see
 * store.h). LMDB gives what the store needs without code of ours: a
 * copy-on-write B-tree whose write transactions commit atomically, so a
 * snapshot is either entirely there or not at all, and readers see a
 * consistent tree. Keys are big-endian integers so LMDB's byte order is
 * numeric order (newest snapshot = last key).
 *
 * A snapshot value is a header (store.h) and the blob. The header's CRC32C
 * over header and blob is checked before a snapshot is used and while
 * pruning; the state hash it claims is compared after a restore. Checking a
 * value (check_value) never trusts a length or seq it has not compared with
 * what LMDB stored.
 *
 * Every LMDB return value passes through from_mdb() at this boundary: LMDB
 * returns positive errno values and its own negative MDB_* codes, Hourglass
 * wants -errno and HG_E* codes. Every failure also writes a one-line message
 * naming the data directory into s->msg.
 */
#include "hourglass/bytes.h"
#include "hourglass/store.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lmdb.h>

#include "hourglass/error.h"
#include "hourglass/sha256.h"
#include "hourglass/crc32c.h"

struct hg_store {
  MDB_env *env; /* owned; NULL until opened */
  MDB_dbi meta, instruments, accounts, snapshots, sessions, api_keys, fixings, ledger;
  size_t map_size;
  int rdonly; /* opened by hg_store_open_readonly: no write, no file created */
  char dir[PATH_MAX];
  char msg[PATH_MAX + 256];
};

static const char META_VERSION_KEY[] = "format_version";

static int from_mdb(int rc) {
  switch (rc) {
  case MDB_SUCCESS: return 0;
  case MDB_MAP_FULL: return HG_EMAPFULL;
  case MDB_NOTFOUND: return HG_ENOTFOUND;
  case MDB_KEYEXIST: return HG_EEXISTS;
  case MDB_INVALID:
  case MDB_CORRUPTED:
  case MDB_PAGE_NOTFOUND: return HG_ECORRUPT;
  case MDB_VERSION_MISMATCH: return HG_EVERSION;
  case MDB_DBS_FULL:
  case MDB_READERS_FULL:
  case MDB_TLS_FULL:
  case MDB_TXN_FULL:
  case MDB_CURSOR_FULL:
  case MDB_PAGE_FULL: return HG_EFULL;
  default: return rc > 0 ? -rc : -EIO;
  }
}

__attribute__((format(printf, 2, 3))) static void set_msg(hg_store_t *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->msg, sizeof s->msg, fmt, ap);
  va_end(ap);
}

/* Converts rc, records "<what> in <dir>: <reason>" and returns the code. */
static int fail(hg_store_t *s, int mdb_rc, const char *what) {
  int rc = from_mdb(mdb_rc);
  if (rc == HG_EMAPFULL)
    set_msg(s, "state store %s: %s failed: LMDB map full (map size %zu bytes); raise the map size",
            s->dir, what, s->map_size);
  else
    set_msg(s, "state store %s: %s failed: %s (%s)", s->dir, what, hg_strerror(rc),
            mdb_strerror(mdb_rc));
  return rc;
}


int hg_store_create(hg_store_t **out) {
  hg_store_t *s = calloc(1, sizeof *s);
  if (s == NULL) return -ENOMEM;
  *out = s;
  return 0;
}

const char *hg_store_errmsg(const hg_store_t *s) { return s->msg; }

/* Checks the directory ourselves first: LMDB's errors for these cases do
 * not say which path was wrong. */
static int check_dir(hg_store_t *s, const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    int e = errno;
    set_msg(s, "state store directory %s: %s", dir,
            e == ENOENT ? "does not exist (create it first)" : strerror(e));
    return -e;
  }
  if (!S_ISDIR(st.st_mode)) {
    set_msg(s, "state store directory %s: not a directory", dir);
    return -ENOTDIR;
  }
  if (access(dir, s->rdonly ? R_OK | X_OK : R_OK | W_OK | X_OK) != 0) {
    int e = errno;
    set_msg(s, "state store directory %s: not %s: %s", dir,
            s->rdonly ? "readable" : "readable and writable", strerror(e));
    return -e;
  }
  return 0;
}

static int open_tables(hg_store_t *s) {
  MDB_txn *txn;
  int rc = mdb_txn_begin(s->env, NULL, s->rdonly ? MDB_RDONLY : 0, &txn);
  if (rc != 0) return fail(s, rc, "begin");
  struct {
    const char *name;
    MDB_dbi *dbi;
  } t[] = {{"meta", &s->meta},
           {"instruments", &s->instruments},
           {"accounts", &s->accounts},
           {"snapshots", &s->snapshots},
           {"sessions", &s->sessions},
           {"api_keys", &s->api_keys},
           {"fixings", &s->fixings},
           {"ledger", &s->ledger}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    rc = mdb_dbi_open(txn, t[i].name, s->rdonly ? 0 : MDB_CREATE, t[i].dbi);
    if (rc == MDB_NOTFOUND) {
      mdb_txn_abort(txn);
      set_msg(s, "state store %s: table %s is missing", s->dir, t[i].name);
      return HG_ECORRUPT;
    }
    if (rc != 0) {
      mdb_txn_abort(txn);
      return fail(s, rc, "opening tables");
    }
  }
  MDB_val k = {.mv_size = sizeof META_VERSION_KEY - 1, .mv_data = (void *)META_VERSION_KEY};
  MDB_val v;
  rc = mdb_get(txn, s->meta, &k, &v);
  if (rc == MDB_NOTFOUND && s->rdonly) {
    mdb_txn_abort(txn);
    set_msg(s, "state store %s: no format version record", s->dir);
    return HG_ECORRUPT;
  } else if (rc == MDB_NOTFOUND) {
    uint8_t ver[4] = {HG_STORE_FORMAT_VERSION & 0xff, 0, 0, 0};
    v = (MDB_val){.mv_size = sizeof ver, .mv_data = ver};
    rc = mdb_put(txn, s->meta, &k, &v, 0);
    if (rc != 0) {
      mdb_txn_abort(txn);
      return fail(s, rc, "writing the format version");
    }
  } else if (rc != 0) {
    mdb_txn_abort(txn);
    return fail(s, rc, "reading the format version");
  } else {
    const uint8_t *p = v.mv_data;
    if (v.mv_size != 4) {
      mdb_txn_abort(txn);
      set_msg(s, "state store %s: format version record is malformed", s->dir);
      return HG_ECORRUPT;
    }
    uint32_t ver = (uint32_t)hg_ld_le(p, 4);
    if (ver != HG_STORE_FORMAT_VERSION) {
      mdb_txn_abort(txn);
      set_msg(s, "state store %s: format version %u, this build reads %u", s->dir, ver,
              HG_STORE_FORMAT_VERSION);
      return ver == 0 ? HG_ECORRUPT : HG_EVERSION;
    }
  }
  rc = mdb_txn_commit(txn);
  if (rc != 0) return fail(s, rc, "creating tables");
  return 0;
}

int hg_store_open(hg_store_t *s, const char *dir, size_t map_size) {
  s->msg[0] = '\0';
  if (s->env != NULL) {
    set_msg(s, "state store %s: already open", s->dir);
    return HG_ESTATE;
  }
  if (dir == NULL || strlen(dir) >= sizeof s->dir) {
    set_msg(s, "state store: directory name missing or too long");
    return HG_EINVAL;
  }
  int rc = check_dir(s, dir);
  if (rc != 0) return rc;
  memcpy(s->dir, dir, strlen(dir) + 1);
  MDB_env *env;
  rc = mdb_env_create(&env);
  if (rc != 0) return fail(s, rc, "creating the LMDB environment");
  s->env = env;
  rc = mdb_env_set_maxdbs(env, 16);
  s->map_size = map_size ? map_size : HG_STORE_DEFAULT_MAP_SIZE;
  if (rc == 0) rc = mdb_env_set_mapsize(env, s->map_size);
  /* MDB_NOTLS: read transactions are not tied to the thread that made them,
   * so a store handed from one owning thread to another keeps working. */
  if (rc == 0) rc = mdb_env_open(env, dir, MDB_NOTLS | (s->rdonly ? MDB_RDONLY : 0), 0640);
  if (rc != 0) {
    rc = fail(s, rc, "opening the LMDB environment");
    mdb_env_close(env);
    s->env = NULL;
    return rc;
  }
  rc = open_tables(s);
  if (rc != 0) {
    mdb_env_close(env);
    s->env = NULL;
  }
  return rc;
}

int hg_store_open_readonly(hg_store_t *s, const char *dir) {
  if (s->env != NULL) return hg_store_open(s, dir, 0); /* HG_ESTATE, as documented */
  char data[PATH_MAX + 16];
  struct stat st;
  s->rdonly = 1;
  /* LMDB would create an empty data file for a read-only open of a
   * directory without one; a reader must create nothing. */
  if (dir != NULL && strlen(dir) < sizeof s->dir) {
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && stat(data, &st) != 0) {
      int e = errno;
      set_msg(s, "state store %s: %s", dir,
              e == ENOENT ? "no store (data.mdb does not exist)" : strerror(e));
      s->rdonly = 0;
      return -e;
    }
  }
  int rc = hg_store_open(s, dir, 0);
  if (rc != 0) s->rdonly = 0;
  return rc;
}

void hg_store_close(hg_store_t *s) {
  if (s == NULL) return;
  if (s->env != NULL) mdb_env_close(s->env);
  free(s);
}

static int need_open(hg_store_t *s) {
  s->msg[0] = '\0';
  if (s->env == NULL) {
    set_msg(s, "state store: not open");
    return HG_ESTATE;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                 */
/* ------------------------------------------------------------------------ */

static uint32_t ld32(const uint8_t *p) { return (uint32_t)hg_ld_le(p, 4); }
static uint64_t ld64(const uint8_t *p) { return hg_ld_le(p, 8); }

static uint32_t header_crc(const uint8_t *hdr, const uint8_t *blob, size_t len) {
  return hg_crc32c(hg_crc32c(0, hdr, HG_STORE_SNAPSHOT_HEADER - 4), blob, len);
}

/* Writes the header of a snapshot of blob[0..len) at seq into hdr. */
static void put_header(uint8_t hdr[HG_STORE_SNAPSHOT_HEADER], uint64_t seq, const uint8_t *blob,
                       size_t len) {
  memset(hdr, 0, HG_STORE_SNAPSHOT_HEADER);
  hg_st_le(hdr, HG_STORE_SNAPSHOT_MAGIC, 4);
  hg_st_le(hdr + 4, HG_STORE_SNAPSHOT_LAYOUT, 4);
  hg_st_le(hdr + 8, seq, 8);
  hg_st_le(hdr + 16, len, 8);
  hg_sha256(blob, len, hdr + 24);
  hg_st_le(hdr + 60, header_crc(hdr, blob, len), 4);
}

/* Checks one stored snapshot. 0 and *out (if not NULL), or HG_ECORRUPT
 * with the reason in why. */
static int check_value(const MDB_val *k, const MDB_val *v, hg_store_snapshot_t *out, char *why,
                       size_t why_len) {
  const uint8_t *p = v->mv_data;
  if (k->mv_size != 8) {
    snprintf(why, why_len, "its key is %zu bytes, not 8", k->mv_size);
    return HG_ECORRUPT;
  }
  uint64_t seq = hg_ld_be64(k->mv_data);
  if (v->mv_size < HG_STORE_SNAPSHOT_HEADER || ld32(p) != HG_STORE_SNAPSHOT_MAGIC) {
    snprintf(why, why_len,
             "no snapshot header (%zu bytes: damaged)",
             v->mv_size);
    return HG_ECORRUPT;
  }
  if (ld32(p + 4) != HG_STORE_SNAPSHOT_LAYOUT) {
    snprintf(why, why_len, "header layout %" PRIu32 " (this build reads %u)", ld32(p + 4),
             HG_STORE_SNAPSHOT_LAYOUT);
    return HG_ECORRUPT;
  }
  if (ld64(p + 8) != seq) {
    snprintf(why, why_len, "its header says seq %" PRIu64 ", its key %" PRIu64, ld64(p + 8), seq);
    return HG_ECORRUPT;
  }
  size_t len = v->mv_size - HG_STORE_SNAPSHOT_HEADER;
  if (ld64(p + 16) != len) {
    snprintf(why, why_len, "its header says %" PRIu64 " bytes, %zu are stored", ld64(p + 16), len);
    return HG_ECORRUPT;
  }
  uint32_t crc = header_crc(p, p + HG_STORE_SNAPSHOT_HEADER, len);
  if (ld32(p + 60) != crc) {
    snprintf(why, why_len, "checksum mismatch (stored %08" PRIx32 ", computed %08" PRIx32 ")",
             ld32(p + 60), crc);
    return HG_ECORRUPT;
  }
  if (out != NULL) {
    out->seq = seq;
    out->blob = p + HG_STORE_SNAPSHOT_HEADER;
    out->len = len;
    memcpy(out->hash, p + 24, HG_SHA256_LEN);
  }
  return 0;
}

/* A read transaction and a cursor on the snapshots table; what names the
 * operation in the message of a failure. */
static int snapshots_read(hg_store_t *s, const char *what, MDB_txn **txn, MDB_cursor **cur) {
  int rc = need_open(s);
  if (rc != 0) return rc;
  rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, txn);
  if (rc != 0) return fail(s, rc, "begin read");
  rc = mdb_cursor_open(*txn, s->snapshots, cur);
  if (rc != 0) {
    mdb_txn_abort(*txn);
    return fail(s, rc, what);
  }
  return 0;
}

int hg_store_load_snapshot(hg_store_t *s, uint64_t seq,
                           int (*fn)(void *ctx, const hg_store_snapshot_t *snap), void *ctx) {
  MDB_txn *txn;
  MDB_cursor *cur;
  int rc = snapshots_read(s, "reading snapshots", &txn, &cur);
  if (rc != 0) return rc;
  uint8_t kb[8];
  hg_st_be64(kb, seq);
  MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
  rc = mdb_cursor_get(cur, &k, &v, seq == 0 ? MDB_LAST : MDB_SET_KEY);
  mdb_cursor_close(cur);
  if (rc == MDB_NOTFOUND) {
    mdb_txn_abort(txn);
    if (seq == 0)
      set_msg(s, "state store %s: no snapshot", s->dir);
    else
      set_msg(s, "state store %s: no snapshot at seq %" PRIu64, s->dir, seq);
    return HG_ENOTFOUND;
  }
  if (rc != 0) {
    mdb_txn_abort(txn);
    return fail(s, rc, "reading a snapshot");
  }
  hg_store_snapshot_t snap;
  char why[160];
  if (check_value(&k, &v, &snap, why, sizeof why) != 0) {
    mdb_txn_abort(txn);
    set_msg(s, "snapshot at seq %" PRIu64 " in %s is bad: %s",
            k.mv_size == 8 ? hg_ld_be64(k.mv_data) : 0, s->dir, why);
    return HG_ECORRUPT;
  }
  rc = fn(ctx, &snap);
  mdb_txn_abort(txn);
  return rc;
}

typedef struct latest_ctx {
  int (*fn)(void *ctx, uint64_t seq, const uint8_t *blob, size_t len);
  void *ctx;
} latest_ctx_t;

static int latest_cb(void *ctx, const hg_store_snapshot_t *snap) {
  latest_ctx_t *l = ctx;
  return l->fn(l->ctx, snap->seq, snap->blob, snap->len);
}

int hg_store_load_latest_snapshot(hg_store_t *s,
                                  int (*fn)(void *ctx, uint64_t seq, const uint8_t *blob,
                                            size_t len),
                                  void *ctx) {
  latest_ctx_t l = {.fn = fn, .ctx = ctx};
  return hg_store_load_snapshot(s, 0, latest_cb, &l);
}

int hg_store_list_snapshots(hg_store_t *s, uint64_t *seqs, size_t cap, size_t *n) {
  MDB_txn *txn;
  MDB_cursor *cur;
  int rc = snapshots_read(s, "listing snapshots", &txn, &cur);
  if (rc != 0) return rc;
  size_t count = 0;
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (count < cap && seqs != NULL) seqs[count] = k.mv_size == 8 ? hg_ld_be64(k.mv_data) : 0;
    count++;
  }
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  if (rc != MDB_NOTFOUND) return fail(s, rc, "listing snapshots");
  *n = count;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Whole-exchange snapshots                                                  */
/* ------------------------------------------------------------------------ */

typedef struct ref_writer {
  MDB_txn *txn;
  MDB_dbi dbi;
  int rc; /* first LMDB failure; later records are skipped */
} ref_writer_t;

static void ref_put(ref_writer_t *w, uint64_t key, const uint8_t *val, size_t len) {
  if (w->rc != 0) return;
  uint8_t kb[8];
  hg_st_be64(kb, key);
  MDB_val k = {.mv_size = 8, .mv_data = kb};
  MDB_val v = {.mv_size = len, .mv_data = (void *)val};
  w->rc = mdb_put(w->txn, w->dbi, &k, &v, 0);
}

static void put_instrument(void *ctx, const hg_exchange_instrument_info_t *in) {
  uint8_t b[2 + HG_SYMBOL_MAX + 6 * 8 + 2 * 4 + 1];
  size_t n = 0, sl = strlen(in->symbol);
  b[n++] = in->halted;
  b[n++] = (uint8_t)sl;
  memcpy(b + n, in->symbol, sl);
  n += sl;
  n += hg_st_le(b + n, (uint64_t)in->params.tick_size, 8);
  n += hg_st_le(b + n, (uint64_t)in->params.contract_unit, 8);
  n += hg_st_le(b + n, (uint64_t)in->params.min_price, 8);
  n += hg_st_le(b + n, (uint64_t)in->params.max_price, 8);
  n += hg_st_le(b + n, (uint64_t)in->params.max_order_qty, 8);
  n += hg_st_le(b + n, (uint64_t)in->params.ref_price, 8);
  n += hg_st_le(b + n, in->params.max_orders, 4);
  n += hg_st_le(b + n, in->params.max_accounts, 4);
  b[n++] = in->params.default_stp;
  ref_put(ctx, in->id, b, n);
}

static void put_account(void *ctx, const hg_exchange_account_info_t *a) {
  uint8_t b[12];
  size_t n = hg_st_le(b, a->firm, 4);
  n += hg_st_le(b + n, (uint64_t)a->cash, 8);
  ref_put(ctx, a->id, b, n);
}

static size_t put_str(uint8_t *p, const char *str, size_t cap) {
  const char *end = memchr(str, '\0', cap);
  size_t n = end != NULL ? (size_t)(end - str) : cap;
  p[0] = (uint8_t)n;
  memcpy(p + 1, str, n);
  return n + 1;
}

static void put_fixing(void *ctx, const hg_exchange_fixing_info_t *fi) {
  uint8_t b[3 + HG_INDEX_GPU_MAX + HG_INDEX_GRADE_MAX + HG_INDEX_SOURCE_MAX + 8 + 4 + 3];
  const hg_index_fixing_t *f = &fi->fixing;
  size_t n = put_str(b, fi->gpu, sizeof fi->gpu);
  n += put_str(b + n, fi->grade, sizeof fi->grade);
  n += hg_st_le(b + n, (uint64_t)f->value, 8);
  n += hg_st_le(b + n, (uint32_t)f->carried_from, 4);
  b[n++] = f->status;
  b[n++] = f->kind;
  b[n++] = f->tier;
  n += put_str(b + n, f->source, sizeof f->source);
  ref_put(ctx, ((uint64_t)fi->group << 32) | (uint32_t)f->day, b, n);
}

/* Appends the ledger entries posted since the last save (rewrites the
 * table if it holds more than the ledger: a store reused for another
 * history). */
static int put_ledger(MDB_txn *txn, MDB_dbi dbi, const hg_clearing_t *c) {
  MDB_stat st;
  int rc = mdb_stat(txn, dbi, &st);
  if (rc != 0) return rc;
  uint64_t size = hg_clearing_ledger_size(c), from = st.ms_entries;
  if (from > size) {
    rc = mdb_drop(txn, dbi, 0);
    if (rc != 0) return rc;
    from = 0;
  }
  ref_writer_t w = {.txn = txn, .dbi = dbi, .rc = 0};
  for (uint64_t i = from; i < size && w.rc == 0; i++) {
    hg_ledger_entry_t e;
    if (hg_clearing_ledger_get(c, i, &e) != 0) return EIO;
    uint8_t b[8 + 8 + 4 + 4 + 4 + 4 * 8];
    size_t n = hg_st_le(b, e.seq, 8);
    n += hg_st_le(b + n, e.ts, 8);
    n += hg_st_le(b + n, e.account, 4);
    n += hg_st_le(b + n, e.instrument, 4);
    n += hg_st_le(b + n, e.kind, 4);
    n += hg_st_le(b + n, (uint64_t)e.amount, 8);
    n += hg_st_le(b + n, (uint64_t)e.balance, 8);
    n += hg_st_le(b + n, (uint64_t)e.price, 8);
    n += hg_st_le(b + n, (uint64_t)e.qty, 8);
    ref_put(&w, i, b, n);
  }
  return w.rc;
}

/* Refuses a seq older than the newest snapshot (cursor on snapshots). */
static int check_newest(hg_store_t *s, MDB_cursor *cur, uint64_t seq) {
  MDB_val k, v;
  int rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
  if (rc == MDB_NOTFOUND) return 0;
  if (rc != 0) return fail(s, rc, "reading snapshots");
  if (k.mv_size == 8 && hg_ld_be64(k.mv_data) > seq) {
    set_msg(s, "state store %s: snapshot seq %llu is older than the newest stored (%llu)", s->dir,
            (unsigned long long)seq, (unsigned long long)hg_ld_be64(k.mv_data));
    return HG_ESTATE;
  }
  return 0;
}

/* Deletes every snapshot older than the keep-th newest good one (0 = all
 * stay). A bad snapshot newer than that one stays (store.h, pruning). */
static int prune(MDB_txn *txn, MDB_dbi dbi, MDB_cursor *cur, uint32_t keep) {
  if (keep == 0) return 0;
  MDB_stat st;
  int rc = mdb_stat(txn, dbi, &st);
  if (rc != 0) return rc;
  MDB_val k, v;
  size_t seen = 0;
  uint32_t good = 0;
  char why[160];
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_LAST); rc == 0 && good < keep;
       rc = mdb_cursor_get(cur, &k, &v, MDB_PREV)) {
    seen++;
    if (check_value(&k, &v, NULL, why, sizeof why) == 0) good++;
  }
  if (rc == MDB_NOTFOUND) return 0; /* fewer than keep good ones: all stay */
  if (rc != 0) return rc;
  size_t extra = st.ms_entries - seen;
  for (size_t i = 0; rc == 0 && i < extra; i++) {
    rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    if (rc == 0) rc = mdb_cursor_del(cur, 0);
  }
  return rc;
}

/* Opens the write transaction of a snapshot at seq and a cursor on the
 * snapshots table, refusing a seq below the newest stored one. On failure
 * nothing is left open and the store's message says why. */
static int snapshot_begin(hg_store_t *s, uint64_t seq, MDB_txn **txn, MDB_cursor **cur) {
  int rc = mdb_txn_begin(s->env, NULL, 0, txn);
  if (rc != 0) return fail(s, rc, "begin snapshot");
  rc = mdb_cursor_open(*txn, s->snapshots, cur);
  if (rc != 0) {
    mdb_txn_abort(*txn);
    return fail(s, rc, "saving snapshot");
  }
  int hg = check_newest(s, *cur, seq);
  if (hg != 0) {
    mdb_cursor_close(*cur);
    mdb_txn_abort(*txn);
    return hg;
  }
  return 0;
}

/* Ends a write transaction: aborts it when rc is a failure (named by
 * failing), else commits it (a failed commit named by committing). */
static int txn_finish(hg_store_t *s, MDB_txn *txn, int rc, const char *failing,
                      const char *committing) {
  if (rc != 0) {
    mdb_txn_abort(txn);
    return fail(s, rc, failing);
  }
  rc = mdb_txn_commit(txn);
  return rc != 0 ? fail(s, rc, committing) : 0;
}

/* Ends what snapshot_begin() started: prunes to keep (rc 0), then commits,
 * or aborts on any failure; saving and committing name the operation in
 * the failure's message. */
static int snapshot_end(hg_store_t *s, MDB_txn *txn, MDB_cursor *cur, int rc, uint32_t keep,
                        const char *saving, const char *committing) {
  if (rc == 0) rc = prune(txn, s->snapshots, cur, keep);
  mdb_cursor_close(cur);
  return txn_finish(s, txn, rc, saving, committing);
}

int hg_store_save_snapshot(hg_store_t *s, uint64_t seq, const void *blob, size_t len,
                           uint32_t keep) {
  int rc = need_open(s);
  if (rc != 0) return rc;
  if (seq == 0 || (blob == NULL && len > 0)) {
    set_msg(s, "state store %s: snapshot needs seq > 0 and data", s->dir);
    return HG_EINVAL;
  }
  MDB_txn *txn;
  MDB_cursor *cur;
  rc = snapshot_begin(s, seq, &txn, &cur);
  if (rc != 0) return rc;
  uint8_t key[8];
  hg_st_be64(key, seq);
  MDB_val k = {.mv_size = 8, .mv_data = key};
  MDB_val v = {.mv_size = HG_STORE_SNAPSHOT_HEADER + len, .mv_data = NULL};
  rc = mdb_put(txn, s->snapshots, &k, &v, MDB_RESERVE);
  if (rc == 0) {
    uint8_t *dst = v.mv_data;
    if (len > 0) memcpy(dst + HG_STORE_SNAPSHOT_HEADER, blob, len);
    put_header(dst, seq, dst + HG_STORE_SNAPSHOT_HEADER, len);
  }
  return snapshot_end(s, txn, cur, rc, keep, "saving snapshot", "committing snapshot");
}

int hg_store_save_exchange(hg_store_t *s, const hg_exchange_t *ex, uint32_t keep) {
  int rc = need_open(s);
  if (rc != 0) return rc;
  uint64_t seq = hg_exchange_last_seq(ex);
  if (seq == 0) {
    set_msg(s, "state store %s: the exchange has applied no command; nothing to snapshot", s->dir);
    return HG_EINVAL;
  }
  MDB_txn *txn;
  MDB_cursor *cur;
  rc = snapshot_begin(s, seq, &txn, &cur);
  if (rc != 0) return rc;
  /* MDB_RESERVE: LMDB makes room in the map and the exchange serializes
   * into it directly. */
  size_t len = hg_exchange_serialized_size(ex);
  uint8_t kb[8];
  hg_st_be64(kb, seq);
  MDB_val k = {.mv_size = 8, .mv_data = kb};
  MDB_val v = {.mv_size = HG_STORE_SNAPSHOT_HEADER + len, .mv_data = NULL};
  rc = mdb_put(txn, s->snapshots, &k, &v, MDB_RESERVE);
  if (rc == 0) {
    uint8_t *dst = v.mv_data;
    size_t written = 0;
    if (hg_exchange_serialize(ex, dst + HG_STORE_SNAPSHOT_HEADER, len, &written) != 0 ||
        written != len)
      rc = EIO;
    else
      put_header(dst, seq, dst + HG_STORE_SNAPSHOT_HEADER, len);
  }
  if (rc == 0) rc = mdb_drop(txn, s->instruments, 0);
  if (rc == 0) rc = mdb_drop(txn, s->accounts, 0);
  if (rc == 0) {
    ref_writer_t w = {.txn = txn, .dbi = s->instruments, .rc = 0};
    hg_exchange_foreach_instrument(ex, put_instrument, &w);
    w.dbi = s->accounts;
    hg_exchange_foreach_account(ex, put_account, &w);
    rc = w.rc;
  }
  if (rc == 0) rc = mdb_drop(txn, s->fixings, 0);
  if (rc == 0) {
    ref_writer_t w = {.txn = txn, .dbi = s->fixings, .rc = 0};
    hg_exchange_foreach_fixing(ex, put_fixing, &w);
    rc = w.rc;
  }
  if (rc == 0) rc = put_ledger(txn, s->ledger, hg_exchange_clearing(ex));
  return snapshot_end(s, txn, cur, rc, keep, "saving the exchange snapshot",
                      "committing the exchange snapshot");
}

typedef struct restore_ctx {
  hg_store_t *s;
  hg_exchange_t *ex;
  uint64_t seq;
} restore_ctx_t;

static int restore_cb(void *ctx, const hg_store_snapshot_t *snap) {
  restore_ctx_t *r = ctx;
  hg_store_t *s = r->s;
  r->seq = snap->seq;
  /* The blob's own last seq (bytes 8..15, little-endian) must be the key's:
   * checked before restoring so that a mismatch leaves ex empty. */
  uint64_t inner = snap->len >= 16 ? ld64(snap->blob + 8) : 0;
  if (inner != snap->seq) {
    set_msg(s, "snapshot at seq %" PRIu64 " in %s is bad: the state it holds is at seq %" PRIu64
               " (does not match its key)", snap->seq, s->dir, inner);
    return HG_ECORRUPT;
  }
  int rc = hg_exchange_restore(r->ex, snap->blob, snap->len);
  if (rc != 0) {
    set_msg(s, "snapshot at seq %" PRIu64 " in %s cannot be restored: %s", snap->seq, s->dir,
            hg_strerror(rc));
    return rc;
  }
  uint8_t h[HG_SHA256_LEN];
  hg_exchange_hash(r->ex, h);
  if (memcmp(h, snap->hash, sizeof h) != 0) {
    set_msg(s, "snapshot at seq %" PRIu64 " in %s is bad: the restored state does not hash to "
               "the state hash its header claims", snap->seq, s->dir);
    return HG_ECORRUPT;
  }
  return 0;
}

int hg_store_restore_snapshot(hg_store_t *s, uint64_t seq, hg_exchange_t *ex) {
  restore_ctx_t r = {.s = s, .ex = ex, .seq = 0};
  return hg_store_load_snapshot(s, seq, restore_cb, &r);
}

int hg_store_load_exchange(hg_store_t *s, hg_exchange_t *ex, uint64_t *seq) {
  restore_ctx_t r = {.s = s, .ex = ex, .seq = 0};
  int rc = hg_store_load_snapshot(s, 0, restore_cb, &r);
  if (rc == 0) *seq = r.seq;
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Reference records and sessions                                            */
/* ------------------------------------------------------------------------ */

static int table_dbi(hg_store_t *s, hg_store_table_t table, MDB_dbi *dbi) {
  switch (table) {
  case HG_STORE_INSTRUMENTS: *dbi = s->instruments; return 0;
  case HG_STORE_ACCOUNTS: *dbi = s->accounts; return 0;
  case HG_STORE_API_KEYS: *dbi = s->api_keys; return 0;
  case HG_STORE_FIXINGS: *dbi = s->fixings; return 0;
  case HG_STORE_LEDGER: *dbi = s->ledger; return 0;
  }
  set_msg(s, "state store %s: unknown table %d", s->dir, (int)table);
  return HG_EINVAL;
}

/* One put (val != NULL) or delete (val == NULL) in its own transaction. */
static int write_one(hg_store_t *s, MDB_dbi dbi, MDB_val *k, MDB_val *v, const char *what) {
  MDB_txn *txn;
  int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
  if (rc != 0) return fail(s, rc, "begin");
  rc = v != NULL ? mdb_put(txn, dbi, k, v, 0) : mdb_del(txn, dbi, k, NULL);
  return txn_finish(s, txn, rc, what, what);
}

static int read_one(hg_store_t *s, MDB_dbi dbi, MDB_val *k, void *buf, size_t cap, size_t *len,
                    const char *what) {
  MDB_txn *txn;
  int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
  if (rc != 0) return fail(s, rc, "begin read");
  MDB_val v;
  rc = mdb_get(txn, dbi, k, &v);
  if (rc != 0) {
    mdb_txn_abort(txn);
    return fail(s, rc, what);
  }
  *len = v.mv_size;
  memcpy(buf, v.mv_data, v.mv_size < cap ? v.mv_size : cap);
  mdb_txn_abort(txn);
  return v.mv_size <= cap ? 0 : HG_ERANGE;
}

int hg_store_put(hg_store_t *s, hg_store_table_t table, uint64_t key, const void *val,
                 size_t len) {
  MDB_dbi dbi;
  int rc = need_open(s);
  if (rc == 0) rc = table_dbi(s, table, &dbi);
  if (rc != 0) return rc;
  if (val == NULL && len > 0) return HG_EINVAL;
  uint8_t kb[8];
  hg_st_be64(kb, key);
  MDB_val k = {.mv_size = 8, .mv_data = kb};
  MDB_val v = {.mv_size = len, .mv_data = (void *)val};
  return write_one(s, dbi, &k, &v, "writing a record");
}

int hg_store_get(hg_store_t *s, hg_store_table_t table, uint64_t key, void *buf, size_t cap,
                 size_t *len) {
  MDB_dbi dbi;
  int rc = need_open(s);
  if (rc == 0) rc = table_dbi(s, table, &dbi);
  if (rc != 0) return rc;
  uint8_t kb[8];
  hg_st_be64(kb, key);
  MDB_val k = {.mv_size = 8, .mv_data = kb};
  return read_one(s, dbi, &k, buf, cap, len, "reading a record");
}

int hg_store_foreach(hg_store_t *s, hg_store_table_t table,
                     int (*fn)(void *ctx, uint64_t key, const void *val, size_t len), void *ctx) {
  MDB_dbi dbi;
  int rc = need_open(s);
  if (rc == 0) rc = table_dbi(s, table, &dbi);
  if (rc != 0) return rc;
  MDB_txn *txn;
  MDB_cursor *cur;
  rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
  if (rc != 0) return fail(s, rc, "begin read");
  rc = mdb_cursor_open(txn, dbi, &cur);
  if (rc != 0) {
    mdb_txn_abort(txn);
    return fail(s, rc, "opening a cursor");
  }
  MDB_val k, v;
  int out = 0;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && out == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
    if (k.mv_size == 8) out = fn(ctx, hg_ld_be64(k.mv_data), v.mv_data, v.mv_size);
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  if (out != 0) return out;
  return rc == MDB_NOTFOUND ? 0 : fail(s, rc, "walking a table");
}

int hg_store_del(hg_store_t *s, hg_store_table_t table, uint64_t key) {
  MDB_dbi dbi;
  int rc = need_open(s);
  if (rc == 0) rc = table_dbi(s, table, &dbi);
  if (rc != 0) return rc;
  uint8_t kb[8];
  hg_st_be64(kb, key);
  MDB_val k = {.mv_size = 8, .mv_data = kb};
  return write_one(s, dbi, &k, NULL, "deleting a record");
}

static int session_key(hg_store_t *s, const char *name, MDB_val *k) {
  size_t n = name != NULL ? strnlen(name, HG_STORE_SESSION_MAX + 1) : 0;
  if (n == 0 || n > HG_STORE_SESSION_MAX) {
    set_msg(s, "state store %s: session name empty or longer than %d bytes", s->dir,
            HG_STORE_SESSION_MAX);
    return HG_EINVAL;
  }
  *k = (MDB_val){.mv_size = n, .mv_data = (void *)name};
  return 0;
}

int hg_store_set_session_seq(hg_store_t *s, const char *name, uint64_t seq) {
  MDB_val k;
  int rc = need_open(s);
  if (rc == 0) rc = session_key(s, name, &k);
  if (rc != 0) return rc;
  uint8_t vb[8];
  hg_st_be64(vb, seq);
  MDB_val v = {.mv_size = 8, .mv_data = vb};
  return write_one(s, s->sessions, &k, &v, "writing a session seq");
}

int hg_store_get_session_seq(hg_store_t *s, const char *name, uint64_t *seq) {
  MDB_val k;
  int rc = need_open(s);
  if (rc == 0) rc = session_key(s, name, &k);
  if (rc != 0) return rc;
  uint8_t vb[8];
  size_t len;
  rc = read_one(s, s->sessions, &k, vb, sizeof vb, &len, "reading a session seq");
  if (rc != 0) return rc;
  if (len != 8) {
    set_msg(s, "state store %s: session record is malformed", s->dir);
    return HG_ECORRUPT;
  }
  *seq = hg_ld_be64(vb);
  return 0;
}
