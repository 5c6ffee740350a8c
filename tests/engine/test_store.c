/*
 * State store: snapshots saved, pruned to the newest N and loaded back
 * (surviving a reopen); reference records and session seqs; and the failure
 * cases with their messages: missing directory, a file instead of a
 * directory, files that are not LMDB, a store from a newer format version,
 * and a full LMDB map (which must leave the earlier snapshot intact and the
 * store usable). Whole-exchange snapshots: saved with their reference
 * records in one transaction, restored after a reopen to the same state
 * hash, and refused when they do not match their key. Snapshot checks: a
 * changed byte anywhere in the stored value, a header that does not match
 * its key or length, or a value without a header is refused by name; and
 * pruning keeps the newest good snapshots, never only bad ones.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <lmdb.h>

#include "hourglass/error.h"
#include "hourglass/exchange.h"
#include "hourglass/store.h"

typedef struct fixture {
  char dir[64];
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  strcpy(f->dir, "/tmp/hg_test_store_XXXXXX");
  if (mkdtemp(f->dir) == NULL) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  int rc = system(cmd);
  free(f);
  return rc == 0 ? 0 : -1;
}

static hg_store_t *open_ok(const char *dir, size_t map) {
  hg_store_t *s = NULL;
  assert_int_equal(hg_store_create(&s), 0);
  int rc = hg_store_open(s, dir, map);
  if (rc != 0) fprintf(stderr, "%s\n", hg_store_errmsg(s));
  assert_int_equal(rc, 0);
  return s;
}

typedef struct loaded {
  uint64_t seq;
  uint8_t data[64];
  size_t len;
} loaded_t;

static int keep_copy(void *ctx, uint64_t seq, const uint8_t *blob, size_t len) {
  loaded_t *l = ctx;
  l->seq = seq;
  l->len = len;
  memcpy(l->data, blob, len < sizeof l->data ? len : sizeof l->data);
  return 7; /* proves the callback's value is returned */
}

static void test_snapshots_prune_and_reload(void **state) {
  fixture_t *f = *state;
  hg_store_t *s = open_ok(f->dir, 0);
  loaded_t l = {0};
  assert_int_equal(hg_store_load_latest_snapshot(s, keep_copy, &l), HG_ENOTFOUND);
  /* Seqs above 255 check that keys sort numerically (big-endian). */
  assert_int_equal(hg_store_save_snapshot(s, 10, "ten", 3, 2), 0);
  assert_int_equal(hg_store_save_snapshot(s, 256, "two-five-six", 12, 2), 0);
  assert_int_equal(hg_store_save_snapshot(s, 300, "three hundred", 13, 2), 0);
  uint64_t seqs[4];
  size_t n = 0;
  assert_int_equal(hg_store_list_snapshots(s, seqs, 4, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(seqs[0], 256);
  assert_int_equal(seqs[1], 300);
  assert_int_equal(hg_store_load_latest_snapshot(s, keep_copy, &l), 7);
  assert_int_equal(l.seq, 300);
  assert_int_equal(l.len, 13);
  assert_memory_equal(l.data, "three hundred", 13);
  /* Older than the newest: refused; the same seq overwrites. */
  assert_int_equal(hg_store_save_snapshot(s, 299, "x", 1, 2), HG_ESTATE);
  assert_non_null(strstr(hg_store_errmsg(s), "older"));
  assert_int_equal(hg_store_save_snapshot(s, 300, "again", 5, 2), 0);
  assert_int_equal(hg_store_save_snapshot(s, 0, "x", 1, 2), HG_EINVAL);
  hg_store_close(s);

  s = open_ok(f->dir, 0);
  assert_int_equal(hg_store_load_latest_snapshot(s, keep_copy, &l), 7);
  assert_int_equal(l.seq, 300);
  assert_memory_equal(l.data, "again", 5);
  /* keep 0 keeps everything. */
  assert_int_equal(hg_store_save_snapshot(s, 400, "a", 1, 0), 0);
  assert_int_equal(hg_store_save_snapshot(s, 500, "b", 1, 0), 0);
  assert_int_equal(hg_store_list_snapshots(s, seqs, 1, &n), 0);
  assert_int_equal(n, 4);
  assert_int_equal(seqs[0], 256);
  hg_store_close(s);
}

/* Rewrites snapshot seq's stored value with LMDB directly, one byte XORed
 * with x at off (as a flipped disk bit would), or the bare blob (no
 * header) if off is SIZE_MAX. */
static void tamper(const char *dir, uint64_t seq, size_t off, uint8_t x) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  assert_int_equal(mdb_env_create(&env), 0);
  assert_int_equal(mdb_env_set_maxdbs(env, 16), 0);
  assert_int_equal(mdb_env_open(env, dir, 0, 0640), 0);
  assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
  assert_int_equal(mdb_dbi_open(txn, "snapshots", 0, &dbi), 0);
  uint8_t kb[8];
  for (int i = 0; i < 8; i++) kb[i] = (uint8_t)(seq >> (56 - 8 * i));
  MDB_val k = {.mv_size = 8, .mv_data = kb}, v;
  assert_int_equal(mdb_get(txn, dbi, &k, &v), 0);
  uint8_t buf[256];
  assert_true(v.mv_size <= sizeof buf);
  memcpy(buf, v.mv_data, v.mv_size);
  MDB_val nv = {.mv_size = v.mv_size, .mv_data = buf};
  if (off == SIZE_MAX) {
    nv.mv_size -= HG_STORE_SNAPSHOT_HEADER;
    nv.mv_data = buf + HG_STORE_SNAPSHOT_HEADER;
  } else {
    buf[off] ^= x;
  }
  assert_int_equal(mdb_put(txn, dbi, &k, &nv, 0), 0);
  assert_int_equal(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

static int count_cb(void *ctx, const hg_store_snapshot_t *snap) {
  loaded_t *l = ctx;
  l->seq = snap->seq;
  l->len = snap->len;
  memcpy(l->data, snap->blob, snap->len < sizeof l->data ? snap->len : sizeof l->data);
  return 0;
}

/* The stored value is the header and the blob; a flipped bit anywhere in
 * it, or a value without the header, is refused by name; pruning keeps
 * the newest two GOOD snapshots, so a bad one never costs the fallback. */
static void test_snapshot_checks_and_pruning(void **state) {
  fixture_t *f = *state;
  hg_store_t *s = open_ok(f->dir, 0);
  assert_int_equal(hg_store_save_snapshot(s, 10, "ten", 3, 2), 0);
  assert_int_equal(hg_store_save_snapshot(s, 20, "twenty", 6, 2), 0);
  assert_int_equal(hg_store_save_snapshot(s, 30, "thirty", 6, 2), 0);
  hg_store_close(s);
  tamper(f->dir, 30, HG_STORE_SNAPSHOT_HEADER + 2, 0x10); /* "thirty" -> "thRrty" */
  s = open_ok(f->dir, 0);
  loaded_t l = {0};
  assert_int_equal(hg_store_load_snapshot(s, 0, count_cb, &l), HG_ECORRUPT);
  assert_non_null(strstr(hg_store_errmsg(s), "snapshot at seq 30 in "));
  assert_non_null(strstr(hg_store_errmsg(s), "checksum mismatch"));
  assert_non_null(strstr(hg_store_errmsg(s), f->dir));
  assert_int_equal(hg_store_load_latest_snapshot(s, keep_copy, &l), HG_ECORRUPT);
  assert_int_equal(l.seq, 0); /* never handed over */
  assert_int_equal(hg_store_load_snapshot(s, 20, count_cb, &l), 0);
  assert_int_equal(l.seq, 20);
  assert_int_equal(l.len, 6);
  assert_memory_equal(l.data, "twenty", 6);
  assert_int_equal(hg_store_load_snapshot(s, 25, count_cb, &l), HG_ENOTFOUND);

  /* 40: 40 and 20 are the two good ones, 30 (bad, between) stays. */
  assert_int_equal(hg_store_save_snapshot(s, 40, "forty", 5, 2), 0);
  uint64_t seqs[4];
  size_t n = 0;
  assert_int_equal(hg_store_list_snapshots(s, seqs, 4, &n), 0);
  assert_int_equal(n, 3);
  assert_int_equal(seqs[0], 20);
  assert_int_equal(seqs[1], 30);
  assert_int_equal(seqs[2], 40);
  /* 50: two good ones newer than 30, which goes with 20. */
  assert_int_equal(hg_store_save_snapshot(s, 50, "fifty", 5, 2), 0);
  assert_int_equal(hg_store_list_snapshots(s, seqs, 4, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(seqs[0], 40);
  assert_int_equal(seqs[1], 50);
  hg_store_close(s);

  /* Header fields: the seq (must be the key's), the length, the magic. */
  tamper(f->dir, 50, 8, 0x01);
  s = open_ok(f->dir, 0);
  assert_int_equal(hg_store_load_snapshot(s, 50, count_cb, &l), HG_ECORRUPT);
  assert_non_null(strstr(hg_store_errmsg(s), "header says seq 51, its key 50"));
  hg_store_close(s);
  tamper(f->dir, 40, 16, 0x02);
  s = open_ok(f->dir, 0);
  assert_int_equal(hg_store_load_snapshot(s, 40, count_cb, &l), HG_ECORRUPT);
  assert_non_null(strstr(hg_store_errmsg(s), "header says 7 bytes, 5 are stored"));
  hg_store_close(s);
  /* A value with no header: no checksum, not trusted. */
  s = open_ok(f->dir, 0);
  assert_int_equal(hg_store_save_snapshot(s, 60, "a blob of sixty", 15, 0), 0);
  hg_store_close(s);
  tamper(f->dir, 60, SIZE_MAX, 0);
  s = open_ok(f->dir, 0);
  assert_int_equal(hg_store_load_snapshot(s, 60, count_cb, &l), HG_ECORRUPT);
  assert_non_null(strstr(hg_store_errmsg(s), "no snapshot header"));
  hg_store_close(s);
}

/* hg_store_foreach: keys in order, and a callback's nonzero stops it. */
typedef struct walk {
  uint64_t keys[8];
  size_t n, stop_after;
} walk_t;

static int walk_cb(void *ctx, uint64_t key, const void *val, size_t len) {
  walk_t *w = ctx;
  assert_int_equal(len, 1);
  assert_int_equal(*(const char *)val, (char)('a' + key % 26));
  w->keys[w->n++] = key;
  return w->n == w->stop_after ? 42 : 0;
}

static void test_records_and_sessions(void **state) {
  fixture_t *f = *state;
  hg_store_t *s = open_ok(f->dir, 0);
  assert_int_equal(hg_store_put(s, HG_STORE_INSTRUMENTS, 7, "B200.A.2027-03", 14), 0);
  assert_int_equal(hg_store_put(s, HG_STORE_ACCOUNTS, 7, "acct", 4), 0);
  char buf[32];
  size_t len = 0;
  assert_int_equal(hg_store_get(s, HG_STORE_INSTRUMENTS, 7, buf, sizeof buf, &len), 0);
  assert_int_equal(len, 14);
  assert_memory_equal(buf, "B200.A.2027-03", 14);
  assert_int_equal(hg_store_get(s, HG_STORE_ACCOUNTS, 7, buf, 2, &len), HG_ERANGE);
  assert_int_equal(len, 4);
  assert_int_equal(hg_store_get(s, HG_STORE_ACCOUNTS, 8, buf, sizeof buf, &len), HG_ENOTFOUND);
  assert_int_equal(hg_store_del(s, HG_STORE_ACCOUNTS, 7), 0);
  assert_int_equal(hg_store_del(s, HG_STORE_ACCOUNTS, 7), HG_ENOTFOUND);
  assert_int_equal(hg_store_put(s, (hg_store_table_t)9, 1, "x", 1), HG_EINVAL);
  walk_t w = {.n = 0};
  assert_int_equal(hg_store_foreach(s, HG_STORE_API_KEYS, walk_cb, &w), 0);
  assert_int_equal(w.n, 0);
  const uint64_t ids[] = {300, 2, 70000};
  for (size_t i = 0; i < 3; i++) {
    char v = (char)('a' + ids[i] % 26);
    assert_int_equal(hg_store_put(s, HG_STORE_API_KEYS, ids[i], &v, 1), 0);
  }
  assert_int_equal(hg_store_foreach(s, HG_STORE_API_KEYS, walk_cb, &w), 0);
  assert_int_equal(w.n, 3);
  assert_int_equal(w.keys[0], 2);
  assert_int_equal(w.keys[1], 300);
  assert_int_equal(w.keys[2], 70000);
  w = (walk_t){.stop_after = 2};
  assert_int_equal(hg_store_foreach(s, HG_STORE_API_KEYS, walk_cb, &w), 42);
  assert_int_equal(w.n, 2);
  assert_int_equal(hg_store_foreach(s, (hg_store_table_t)9, walk_cb, &w), HG_EINVAL);

  uint64_t seq = 0;
  assert_int_equal(hg_store_get_session_seq(s, "mm-1", &seq), HG_ENOTFOUND);
  assert_int_equal(hg_store_set_session_seq(s, "mm-1", 12345678901ull), 0);
  assert_int_equal(hg_store_get_session_seq(s, "mm-1", &seq), 0);
  assert_int_equal(seq, 12345678901ull);
  assert_int_equal(hg_store_set_session_seq(s, "", 1), HG_EINVAL);
  char longname[HG_STORE_SESSION_MAX + 2];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  assert_int_equal(hg_store_set_session_seq(s, longname, 1), HG_EINVAL);
  hg_store_close(s);
}

static void test_missing_and_bad_directory(void **state) {
  fixture_t *f = *state;
  char path[128];
  snprintf(path, sizeof path, "%s/does-not-exist", f->dir);
  hg_store_t *s = NULL;
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, path, 0), -ENOENT);
  assert_non_null(strstr(hg_store_errmsg(s), path));
  assert_non_null(strstr(hg_store_errmsg(s), "does not exist"));
  /* Unopened store: every call says so. */
  assert_int_equal(hg_store_save_snapshot(s, 1, "x", 1, 1), HG_ESTATE);

  snprintf(path, sizeof path, "%s/plainfile", f->dir);
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  fclose(fp);
  assert_int_equal(hg_store_open(s, path, 0), -ENOTDIR);
  assert_non_null(strstr(hg_store_errmsg(s), path));
  hg_store_close(s);
}

static void test_not_an_lmdb_store(void **state) {
  fixture_t *f = *state;
  char path[128];
  snprintf(path, sizeof path, "%s/data.mdb", f->dir);
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  for (int i = 0; i < 16384; i++) fputc("garbage!"[i % 8], fp);
  fclose(fp);
  hg_store_t *s = NULL;
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, f->dir, 0), HG_ECORRUPT);
  assert_non_null(strstr(hg_store_errmsg(s), f->dir));
  hg_store_close(s);
}

static void test_newer_format_version(void **state) {
  fixture_t *f = *state;
  hg_store_close(open_ok(f->dir, 0));
  /* Rewrite the version record as a newer build would, then as an older
   * one: both are refused. */
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  assert_int_equal(mdb_env_create(&env), 0);
  assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
  assert_int_equal(mdb_env_open(env, f->dir, 0, 0640), 0);
  assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
  assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
  uint8_t ver[4] = {HG_STORE_FORMAT_VERSION + 1, 0, 0, 0};
  MDB_val k = {.mv_size = 14, .mv_data = "format_version"};
  MDB_val v = {.mv_size = 4, .mv_data = ver};
  assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
  assert_int_equal(mdb_txn_commit(txn), 0);
  mdb_env_close(env);

  hg_store_t *s = NULL;
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, f->dir, 0), HG_EVERSION);
  char want[32];
  snprintf(want, sizeof want, "format version %u", HG_STORE_FORMAT_VERSION + 1);
  assert_non_null(strstr(hg_store_errmsg(s), want));
  hg_store_close(s);
  ver[0] = HG_STORE_FORMAT_VERSION - 1;
  assert_int_equal(mdb_env_create(&env), 0);
  assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
  assert_int_equal(mdb_env_open(env, f->dir, 0, 0640), 0);
  assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
  assert_int_equal(mdb_dbi_open(txn, "meta", 0, &dbi), 0);
  assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
  assert_int_equal(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, f->dir, 0), HG_EVERSION);
  hg_store_close(s);
}

static void test_map_full(void **state) {
  fixture_t *f = *state;
  /* 64 KiB: room for the tables and a small snapshot, not for 1 MiB. */
  hg_store_t *s = open_ok(f->dir, 64 * 1024);
  assert_int_equal(hg_store_save_snapshot(s, 1, "small", 5, 3), 0);
  size_t big = 1 << 20;
  uint8_t *blob = calloc(1, big);
  assert_non_null(blob);
  assert_int_equal(hg_store_save_snapshot(s, 2, blob, big, 3), HG_EMAPFULL);
  assert_non_null(strstr(hg_store_errmsg(s), "map full"));
  assert_non_null(strstr(hg_store_errmsg(s), f->dir));
  free(blob);
  /* Nothing of the failed transaction remains; the store still works. */
  loaded_t l = {0};
  assert_int_equal(hg_store_load_latest_snapshot(s, keep_copy, &l), 7);
  assert_int_equal(l.seq, 1);
  assert_memory_equal(l.data, "small", 5);
  assert_int_equal(hg_store_save_snapshot(s, 3, "next", 4, 3), 0);
  hg_store_close(s);
}

/* ------------------------------------------------------------------------ */
/* Whole-exchange snapshots                                                  */
/* ------------------------------------------------------------------------ */

static const hg_exchange_config_t XCFG = {
    .max_instruments = 4, .max_accounts = 8, .max_book_orders = 4096};

static void null_sink(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

static uint64_t xseq;

static void apply(hg_exchange_t *ex, hg_command_t c) {
  c.seq = ++xseq;
  c.ts = 5000 + c.seq;
  assert_int_equal(hg_exchange_apply(ex, &c), 0);
}

static hg_command_t cmd(uint32_t type) {
  hg_command_t c;
  memset(&c, 0, sizeof c);
  c.type = type;
  return c;
}

static void list(hg_exchange_t *ex, uint32_t id, const char *sym) {
  hg_command_t c = cmd(HG_COMMAND_LIST_INSTRUMENT);
  strcpy(c.u.list.symbol, sym);
  c.u.list.params = (hg_book_params_t){.instrument_id = id, .tick_size = 1000,
                                       .contract_unit = 1000, .min_price = 1,
                                       .max_price = 10000, .max_order_qty = 1000,
                                       .ref_price = 2500, .max_orders = 4096, .max_accounts = 8};
  apply(ex, c);
}

static void rest(hg_exchange_t *ex, uint32_t inst, hg_account_t a, int side, hg_price_t px) {
  hg_command_t c = cmd(HG_COMMAND_NEW_ORDER);
  c.u.new_order = (hg_cmd_new_order_t){.instrument_id = inst, .account = a,
                                       .client_order_id = xseq + 1, .price = px, .qty = 1,
                                       .side = (uint8_t)side, .tif = HG_TIF_GTC};
  apply(ex, c);
}

/* These tests are about storage: no band and no margin, so that any order
 * rests; every exchange here has the same clearing configuration, so any
 * snapshot fits any of them. */
static int create_ex(hg_exchange_t **ex) {
  hg_clearing_config_t ccfg;
  hg_clearing_config_default(&ccfg);
  ccfg.band_bps = 0;
  ccfg.im_rate_bps = 0;
  ccfg.im_rate_delivery_bps = 0;
  ccfg.max_positions = 1024;
  ccfg.ledger_initial = 256;
  hg_exchange_config_t xcfg = XCFG;
  xcfg.clearing = &ccfg;
  return hg_exchange_create(&xcfg, null_sink, NULL, ex);
}

static hg_exchange_t *build_exchange(void) {
  hg_exchange_t *ex = NULL;
  assert_int_equal(create_ex(&ex), 0);
  list(ex, 1, "B200.A.2027-03");
  list(ex, 2, "B200.A.2027-04");
  hg_command_t c = cmd(HG_COMMAND_ADD_ACCOUNT);
  c.u.add_account = (hg_cmd_add_account_t){10, 3};
  apply(ex, c);
  c = cmd(HG_COMMAND_DEPOSIT);
  c.u.cash = (hg_cmd_cash_t){10, 7000000};
  apply(ex, c);
  rest(ex, 1, 10, HG_SIDE_BUY, 100);
  rest(ex, 1, 10, HG_SIDE_SELL, 200);
  rest(ex, 2, 10, HG_SIDE_BUY, 150);
  c = cmd(HG_COMMAND_PUBLISH_FIXING);
  c.u.fixing = (hg_cmd_publish_fixing_t){.gpu = "B200", .grade = "A", .day = 20000,
                                         .value = 3000000, .source = "ext"};
  apply(ex, c);
  c = cmd(HG_COMMAND_HALT);
  c.u.instrument.instrument_id = 2;
  apply(ex, c);
  return ex;
}

static void test_save_and_load_exchange(void **state) {
  fixture_t *f = *state;
  hg_store_t *s = open_ok(f->dir, 0);
  hg_exchange_t *ex = build_exchange();
  hg_exchange_t *empty = NULL;
  assert_int_equal(create_ex(&empty), 0);
  uint64_t seq = 0;
  assert_int_equal(hg_store_load_exchange(s, empty, &seq), HG_ENOTFOUND);
  assert_int_equal(hg_store_save_exchange(s, empty, 3), HG_EINVAL);
  assert_int_equal(hg_store_save_exchange(s, ex, 3), 0);

  /* Reference records written in the same transaction. */
  uint8_t rec[128];
  size_t len = 0;
  assert_int_equal(hg_store_get(s, HG_STORE_INSTRUMENTS, 2, rec, sizeof rec, &len), 0);
  assert_int_equal(rec[0], 1); /* halted */
  assert_int_equal(rec[1], 14);
  assert_memory_equal(rec + 2, "B200.A.2027-04", 14);
  assert_int_equal(len, 2 + 14 + 48 + 8 + 1);
  assert_int_equal(rec[2 + 14 + 40], 2500 & 0xff); /* ref_price, little-endian */
  assert_int_equal(rec[2 + 14 + 41], 2500 >> 8);
  assert_int_equal(hg_store_get(s, HG_STORE_ACCOUNTS, 10, rec, sizeof rec, &len), 0);
  assert_int_equal(len, 12);
  static const uint8_t acct[12] = {3, 0, 0, 0, 0xC0, 0xCF, 0x6A, 0, 0, 0, 0, 0}; /* 7,000,000 = 0x6ACFC0 */
  assert_memory_equal(rec, acct, 12);
  /* Fixings (key group << 32 | day) and the ledger (key entry index). */
  assert_int_equal(hg_store_get(s, HG_STORE_FIXINGS, ((uint64_t)1 << 32) | 20000, rec, sizeof rec,
                                &len),
                   0);
  assert_int_equal(len, 1 + 4 + 1 + 1 + 8 + 4 + 3 + 1 + 3);
  assert_memory_equal(rec, "\x04" "B200" "\x01" "A", 7);
  assert_int_equal(rec[7] | rec[8] << 8 | rec[9] << 16, 3000000);
  assert_int_equal(rec[7 + 8 + 4], HG_INDEX_PROVISIONAL);
  assert_int_equal(rec[7 + 8 + 4 + 1], HG_INDEX_EXTERNAL);
  assert_int_equal(hg_store_get(s, HG_STORE_LEDGER, 0, rec, sizeof rec, &len), 0);
  assert_int_equal(len, 60);
  assert_int_equal(rec[16] | rec[17] << 8, 10);                   /* account */
  assert_int_equal(rec[24], HG_LEDGER_DEPOSIT);                    /* kind */
  assert_int_equal(rec[28] | rec[29] << 8 | rec[30] << 16, 7000000); /* amount */
  assert_int_equal(hg_store_get(s, HG_STORE_LEDGER, 1, rec, sizeof rec, &len), HG_ENOTFOUND);
  hg_store_close(s);

  s = open_ok(f->dir, 0);
  assert_int_equal(hg_store_load_exchange(s, empty, &seq), 0);
  assert_int_equal(seq, hg_exchange_last_seq(ex));
  uint8_t h1[32], h2[32];
  hg_exchange_hash(ex, h1);
  hg_exchange_hash(empty, h2);
  assert_memory_equal(h1, h2, 32);
  /* Not empty any more. */
  assert_int_equal(hg_store_load_exchange(s, empty, &seq), HG_ESTATE);
  assert_true(strlen(hg_store_errmsg(s)) > 0);

  /* Delisting removes the instrument's record at the next snapshot. */
  hg_command_t c = cmd(HG_COMMAND_DELIST_INSTRUMENT);
  c.u.instrument.instrument_id = 1;
  apply(ex, c);
  assert_int_equal(hg_store_save_exchange(s, ex, 3), 0);
  assert_int_equal(hg_store_get(s, HG_STORE_INSTRUMENTS, 1, rec, sizeof rec, &len), HG_ENOTFOUND);
  assert_int_equal(hg_store_get(s, HG_STORE_INSTRUMENTS, 2, rec, sizeof rec, &len), 0);

  /* A blob filed under the wrong seq is refused before anything is built. */
  size_t need = hg_exchange_serialized_size(ex);
  uint8_t *blob = malloc(need);
  assert_int_equal(hg_exchange_serialize(ex, blob, need, &len), 0);
  assert_int_equal(hg_store_save_snapshot(s, hg_exchange_last_seq(ex) + 10, blob, len, 3), 0);
  free(blob);
  hg_exchange_t *other = NULL;
  assert_int_equal(create_ex(&other), 0);
  assert_int_equal(hg_store_load_exchange(s, other, &seq), HG_ECORRUPT);
  assert_non_null(strstr(hg_store_errmsg(s), "does not match"));
  assert_int_equal(hg_exchange_instrument_count(other), 0);

  hg_exchange_destroy(other);
  hg_exchange_destroy(empty);
  hg_exchange_destroy(ex);
  hg_store_close(s);
}

static void test_save_exchange_map_full(void **state) {
  fixture_t *f = *state;
  hg_store_t *s = open_ok(f->dir, 64 * 1024);
  hg_exchange_t *ex = build_exchange();
  assert_int_equal(hg_store_save_exchange(s, ex, 2), 0);
  uint64_t small_seq = hg_exchange_last_seq(ex);
  /* 3,000 resting orders: about 200 KB of snapshot. */
  for (int i = 0; i < 3000; i++) rest(ex, 1, 10, HG_SIDE_BUY, 1 + i % 99);
  assert_int_equal(hg_store_save_exchange(s, ex, 2), HG_EMAPFULL);
  assert_non_null(strstr(hg_store_errmsg(s), "map full"));
  uint64_t seqs[4];
  size_t n = 0;
  assert_int_equal(hg_store_list_snapshots(s, seqs, 4, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(seqs[0], small_seq);
  hg_exchange_destroy(ex);
  hg_store_close(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_snapshots_prune_and_reload, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_checks_and_pruning, setup, teardown),
      cmocka_unit_test_setup_teardown(test_records_and_sessions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_and_bad_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_an_lmdb_store, setup, teardown),
      cmocka_unit_test_setup_teardown(test_newer_format_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_map_full, setup, teardown),
      cmocka_unit_test_setup_teardown(test_save_and_load_exchange, setup, teardown),
      cmocka_unit_test_setup_teardown(test_save_exchange_map_full, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
