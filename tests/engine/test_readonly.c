/*
 * Read-only access to a data directory (hg_store_open_readonly,
 * hg_pipeline_recover_readonly): it recovers the state a full open would,
 * beside a running pipeline, and changes no file: the journal's segments and
 * its spare keep their inode, size, mtime and bytes, across the writer's
 * later roll-overs too. A journal whose last record is bad is reported, not
 * cut; a directory without a store or journal stays empty.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmdgen.h"
#include "hourglass/error.h"
#include "hourglass/sha256.h"
#include "hourglass/store.h"
#include "pipeline_util.h"

#define SEED 7u

typedef struct fixture {
  char dir[64];
  util_log_t log;
  hg_pipeline_config_t cfg;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (f == NULL || util_tmpdir(f->dir, "rdonly") == NULL) return -1;
  util_config(&f->cfg, f->dir, &f->log);
  /* Small segments: a few thousand commands roll over. */
  f->cfg.journal.segment_size = 256u << 10;
  f->cfg.journal.batch_bytes = 96u << 10;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  util_rm_rf(f->dir);
  free(f);
  return 0;
}

/* Submits commands [from, to) and waits until the last one is DONE. */
static void run_commands(hg_pipeline_t *p, uint64_t from, uint64_t to) {
  assert_int_equal(util_run_cmdgen(p, from, to, SEED), 0);
}

/* Every file of dir/journal and dir/state/data.mdb: name, inode, size,
 * mtime and a hash of the bytes. malloc'd. */
static char *fingerprint(const char *dir) {
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  char path[512];
  snprintf(path, sizeof path, "%s/journal", dir);
  struct dirent **ents;
  int n = scandir(path, &ents, NULL, alphasort);
  assert_true(n > 2);
  for (int i = 0; i <= n; i++) {
    if (i < n && ents[i]->d_name[0] == '.') {
      free(ents[i]);
      continue;
    }
    if (i < n) {
      snprintf(path, sizeof path, "%s/journal/%s", dir, ents[i]->d_name);
      free(ents[i]);
    } else {
      snprintf(path, sizeof path, "%s/state/data.mdb", dir);
    }
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *bytes = malloc((size_t)st.st_size + 1);
    assert_int_equal(fread(bytes, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    uint8_t h[HG_SHA256_LEN];
    hg_sha256(bytes, (size_t)st.st_size, h);
    free(bytes);
    fprintf(out, "%s ino=%llu size=%lld mtime=%lld.%09ld sha=", path, (unsigned long long)st.st_ino,
            (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    for (size_t k = 0; k < 8; k++) fprintf(out, "%02x", h[k]);
    fputc('\n', out);
  }
  free(ents);
  fclose(out);
  return buf;
}

static int count_segments(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/journal", dir);
  DIR *d = opendir(path);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, "journal-0", 9) == 0;
  closedir(d);
  return n;
}

/* Read-only recovery into a fresh exchange: returns its rc, hash and seqs. */
static int recover_ro(fixture_t *f, uint8_t h[HG_SHA256_LEN], uint64_t *snap, uint64_t *last) {
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&f->cfg.exchange, util_null_sink, NULL, &ex), 0);
  int rc = hg_pipeline_recover_readonly(&f->cfg, ex, snap, last);
  hg_exchange_hash(ex, h);
  hg_exchange_destroy(ex);
  return rc;
}

static void beside_a_running_pipeline(void **state) {
  fixture_t *f = *state;
  f->cfg.snapshot_every = 500;
  hg_pipeline_t *p = NULL;
  if (hg_pipeline_open(&f->cfg, &p) != 0) fail_msg("open: %s", f->log.last);
  assert_int_equal(hg_pipeline_start(p), 0);
  run_commands(p, 0, 1200);
  /* The snapshot thread writes once the journal is durable: wait for at
   * least one, and until it has written all it will (the count holds still
   * for 200 ms), so that the files change only if the reader writes. */
  hg_pipeline_stats_t st;
  uint64_t seen = 0;
  for (int i = 0, still = 0; i < 1000 && still < 20; i++) {
    hg_pipeline_stats(p, &st);
    still = st.snapshots >= 1 && st.snapshots == seen ? still + 1 : 0;
    seen = st.snapshots;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  assert_true(st.snapshots >= 1);
  char *before = fingerprint(f->dir);
  assert_non_null(strstr(before, "journal-spare.tmp"));

  uint8_t h[HG_SHA256_LEN], want[HG_SHA256_LEN];
  uint64_t snap = 0, last = 0;
  assert_int_equal(recover_ro(f, h, &snap, &last), 0);
  assert_int_equal(last, 1200);
  /* a snapshot at a batch boundary after every 500 commands */
  if (snap < 500 || snap > 1200) fail_msg("snap=%llu", (unsigned long long)snap);
  /* The same state as a replay of the whole journal from empty. */
  char jdir[128];
  snprintf(jdir, sizeof jdir, "%s/journal", f->dir);
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&f->cfg.exchange, util_null_sink, NULL, &ex), 0);
  assert_int_equal(hg_pipeline_replay_journal(jdir, ex, UINT64_MAX, &last), 0);
  assert_int_equal(last, 1200);
  hg_exchange_hash(ex, want);
  hg_exchange_destroy(ex);
  assert_memory_equal(h, want, sizeof h);
  char *after = fingerprint(f->dir);
  assert_string_equal(before, after);
  free(before);
  free(after);

  /* The writer rolls over twice afterwards without a failure. */
  int segs = count_segments(f->dir);
  uint64_t n = 1200;
  while (count_segments(f->dir) < segs + 2) {
    run_commands(p, n, n + 1000);
    n += 1000;
    assert_int_equal(hg_pipeline_failed(p), 0);
    assert_true(n < 200000);
  }
  assert_int_equal(hg_pipeline_stop(p), 0);
  assert_int_equal(hg_pipeline_failed(p), 0);
  hg_pipeline_state_hash(p, want);
  hg_pipeline_close(p);
  assert_int_equal(recover_ro(f, h, &snap, &last), 0);
  assert_int_equal(last, n);
  assert_int_equal(snap, n); /* the final snapshot */
  assert_memory_equal(h, want, sizeof h);
}

/* Offset of record `seq` in the first segment (all records there). */
static uint64_t record_offset(const char *jdir, uint64_t seq) {
  hg_journal_reader_t *r;
  assert_int_equal(hg_journal_reader_open(jdir, 1, &r), 0);
  uint64_t off = HG_JOURNAL_SEGMENT_HEADER_SIZE;
  hg_journal_record_t rec;
  for (uint64_t s = 1; s < seq; s++) {
    assert_int_equal(hg_journal_reader_next(r, UINT64_MAX, &rec), 0);
    off += HG_JOURNAL_RECORD_SIZE(rec.len);
  }
  hg_journal_reader_close(r);
  return off;
}

static void bad_last_record_is_reported_not_cut(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  if (hg_pipeline_open(&f->cfg, &p) != 0) fail_msg("open: %s", f->log.last);
  assert_int_equal(hg_pipeline_start(p), 0);
  run_commands(p, 0, 300);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
  /* Without the final snapshot (at 300) the recovery replays the journal
   * from seq 1 up to its tail. */
  char path[256], jdir[128];
  snprintf(jdir, sizeof jdir, "%s/journal", f->dir);
  snprintf(path, sizeof path, "%s/state", f->dir);
  util_rm_rf(path);
  /* A torn last record: one payload byte flipped. */
  snprintf(path, sizeof path, "%s/journal-00000000000000000001.hgj", jdir);
  uint64_t off = record_offset(jdir, 300) + HG_JOURNAL_RECORD_HEADER_SIZE;
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  uint8_t b;
  assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
  b ^= 0x5a;
  assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
  close(fd);
  /* An empty store in its place. */
  snprintf(path, sizeof path, "%s/state", f->dir);
  assert_int_equal(mkdir(path, 0750), 0);
  hg_store_t *s;
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, path, 0), 0);
  hg_store_close(s);
  char *before = fingerprint(f->dir);

  uint8_t h[HG_SHA256_LEN];
  uint64_t snap = 9, last = 0;
  assert_int_equal(recover_ro(f, h, &snap, &last), HG_ECORRUPT);
  assert_int_equal(snap, 0);
  assert_int_equal(last, 299);
  assert_non_null(strstr(f->log.last, "not good, but seq 300 was durable"));
  char *after = fingerprint(f->dir);
  assert_string_equal(before, after); /* not cut */
  free(after);
  /* A full open refuses it too: the durable mark says seq 300 was durable,
   * so this is a damaged record, not a torn tail. */
  assert_int_not_equal(hg_pipeline_open(&f->cfg, &p), 0);
  char *again = fingerprint(f->dir);
  assert_string_equal(before, again);
  free(again);
  /* Without a mark vouching for it (a crash before any mark was written),
   * a full open cuts it, as its recovery does after a crash. */
  snprintf(path, sizeof path, "%s/durable.mark", f->dir);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), 299);
  hg_pipeline_close(p);
  free(before);
}

/* A journal that lost its last segment: the read-only recovery refuses, as
 * the daemon's start-up does, instead of printing the hash of an older
 * state (the durable mark says how far the journal was durable). */
static void missing_segment_is_refused(void **state) {
  fixture_t *f = *state;
  hg_pipeline_t *p = NULL;
  if (hg_pipeline_open(&f->cfg, &p) != 0) fail_msg("open: %s", f->log.last);
  assert_int_equal(hg_pipeline_start(p), 0);
  run_commands(p, 0, 12000);
  assert_int_equal(hg_pipeline_stop(p), 0);
  hg_pipeline_close(p);
  char path[512], jdir[128];
  snprintf(jdir, sizeof jdir, "%s/journal", f->dir);
  assert_true(count_segments(f->dir) >= 2);
  /* From the journal alone, so that no snapshot stands in the way. */
  snprintf(path, sizeof path, "%s/state", f->dir);
  util_rm_rf(path);
  uint8_t h[HG_SHA256_LEN];
  uint64_t snap = 0, last = 0;
  assert_int_equal(recover_ro(f, h, &snap, &last), 0);
  assert_int_equal(last, 12000);
  /* The newest segment gone. */
  DIR *d = opendir(jdir);
  assert_non_null(d);
  char newest[256] = "";
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "journal-0", 9) == 0 && strcmp(e->d_name, newest) > 0)
      snprintf(newest, sizeof newest, "%s", e->d_name);
  closedir(d);
  snprintf(path, sizeof path, "%s/%s", jdir, newest);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(recover_ro(f, h, &snap, &last), HG_ECORRUPT);
  assert_true(last < 12000);
  assert_non_null(strstr(f->log.last, "but seq 12000 was durable"));
}

static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void creates_nothing(void **state) {
  fixture_t *f = *state;
  uint8_t h[HG_SHA256_LEN];
  uint64_t snap, last;
  /* An empty directory: no journal to read, and it stays empty. */
  assert_int_equal(recover_ro(f, h, &snap, &last), -ENOENT);
  assert_int_equal(dir_entries(f->dir), 0);
  /* A missing one. */
  char missing[128];
  snprintf(missing, sizeof missing, "%s/nope", f->dir);
  hg_pipeline_config_t c = f->cfg;
  c.data_dir = missing;
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&c.exchange, util_null_sink, NULL, &ex), 0);
  assert_int_equal(hg_pipeline_recover_readonly(&c, ex, &snap, &last), -ENOENT);
  hg_exchange_destroy(ex);

  /* The store: no data file is created, and writes are refused. */
  hg_store_t *s;
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open_readonly(s, f->dir), -ENOENT);
  assert_non_null(strstr(hg_store_errmsg(s), "data.mdb"));
  assert_int_equal(dir_entries(f->dir), 0);
  hg_store_close(s);
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open(s, f->dir, 0), 0);
  assert_int_equal(hg_store_put(s, HG_STORE_ACCOUNTS, 5, "abc", 3), 0);
  hg_store_close(s);
  assert_int_equal(hg_store_create(&s), 0);
  assert_int_equal(hg_store_open_readonly(s, f->dir), 0);
  char buf[8];
  size_t len = 0;
  assert_int_equal(hg_store_get(s, HG_STORE_ACCOUNTS, 5, buf, sizeof buf, &len), 0);
  assert_int_equal(len, 3);
  assert_memory_equal(buf, "abc", 3);
  assert_int_equal(hg_store_put(s, HG_STORE_ACCOUNTS, 6, "x", 1), -EACCES);
  assert_int_equal(hg_store_save_snapshot(s, 1, "x", 1, 0), -EACCES);
  assert_int_equal(hg_store_open_readonly(s, f->dir), HG_ESTATE);
  hg_store_close(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(beside_a_running_pipeline, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_last_record_is_reported_not_cut, setup, teardown),
      cmocka_unit_test_setup_teardown(creates_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_segment_is_refused, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
