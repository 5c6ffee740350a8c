/*
 * State store: snapshots saved, pruned to the newest N and loaded back
 * (surviving a reopen); reference records and session seqs; and the failure
 * cases with their messages: missing directory, a file instead of a
 * directory, files that are not LMDB, a store from a newer format version,
 * and a full LMDB map (which must leave the earlier snapshot intact and the
 * store usable).
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
  /* Rewrite the version record as a newer build would. */
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
  assert_non_null(strstr(hg_store_errmsg(s), "format version 2"));
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_snapshots_prune_and_reload, setup, teardown),
      cmocka_unit_test_setup_teardown(test_records_and_sessions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_and_bad_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_an_lmdb_store, setup, teardown),
      cmocka_unit_test_setup_teardown(test_newer_format_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_map_full, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
