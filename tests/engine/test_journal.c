/*
 * Journal: append, group commit, durable_seq order, roll-over, read back,
 * injected write failures, torn tails, mid-log corruption and repair, format
 * versions. Most cases run on both the io_uring path and the pwritev
 * fallback (the prestate selects the path).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "hourglass/crc32c.h"
#include "hourglass/journal.h"
#include "journal_internal.h"
#include "pipeline_util.h"

#define SEG1 "journal-00000000000000000001.hgj"

static int path_uring = 0;
static int path_fallback = 1;

/* Messages of the journal under test; owned by this file, reset per test. */
static char logbuf[16384];

static void capture(void *ctx, int level, const char *msg) {
  (void)ctx;
  size_t n = strlen(logbuf);
  snprintf(logbuf + n, sizeof logbuf - n, "[%d] %s\n", level, msg);
}

/* 1 unless dir is on tmpfs or ramfs, where the journal writes in place
 * (no io_uring: nothing to wait for). */
static int on_disk(const char *dir) {
  struct statfs fs;
  return !(statfs(dir, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC));
}

typedef struct fixture {
  char dir[64];
  int fallback;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  f->fallback = *state != NULL ? *(int *)*state : 0;
  strcpy(f->dir, "/tmp/hg_journal_test_XXXXXX");
  if (mkdtemp(f->dir) == NULL) return -1;
  logbuf[0] = '\0';
  *state = f;
  return 0;
}

/* Removes dir and the files in it; 0, or -1 if dir stays. */
static int remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d != NULL) {
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (de->d_name[0] == '.') continue;
      unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
  }
  return rmdir(dir);
}

static int teardown(void **state) {
  fixture_t *f = *state;
  remove_dir(f->dir);
  free(f);
  return 0;
}

static hg_journal_options_t small_opts(const fixture_t *f) {
  hg_journal_options_t o;
  hg_journal_options_init(&o);
  o.segment_size = 16384;
  o.batch_bytes = 4096;
  o.max_payload = 1000;
  o.force_fallback = f->fallback;
  o.log = capture;
  return o;
}

static uint32_t payload_len(uint64_t seq) { return (uint32_t)(seq % 97u) + 3u; }

static void make_payload(uint64_t seq, uint8_t *p, uint32_t len) {
  for (uint32_t i = 0; i < len; i++) p[i] = (uint8_t)(seq * 31u + i);
}

/* Appends seqs [from, to] with the deterministic payloads, committing every
 * 7 records and polling when the staging buffer is full. */
static void append_range(hg_journal_t *j, uint64_t from, uint64_t to) {
  uint8_t p[1000];
  for (uint64_t s = from; s <= to; s++) {
    uint32_t len = payload_len(s);
    make_payload(s, p, len);
    int rc;
    while ((rc = hg_journal_append(j, s, s * 1000u, p, len)) == HG_EBUSY)
      assert_int_equal(hg_journal_poll(j, -1), 0);
    assert_int_equal(rc, 0);
    if (s % 7 == 0) assert_int_equal(hg_journal_commit(j), 0);
  }
}

/* Reads [from, to] back and checks every field, then expects the end. */
static void expect_records(const char *dir, uint64_t from, uint64_t to) {
  hg_journal_reader_t *r;
  assert_int_equal(hg_journal_reader_open(dir, from, &r), 0);
  uint8_t p[1000];
  hg_journal_record_t rec;
  for (uint64_t s = from; s <= to; s++) {
    assert_int_equal(hg_journal_reader_next(r, UINT64_MAX, &rec), 0);
    assert_int_equal(rec.seq, s);
    assert_int_equal(rec.ts, s * 1000u);
    assert_int_equal(rec.len, payload_len(s));
    make_payload(s, p, rec.len);
    assert_memory_equal(rec.payload, p, rec.len);
  }
  assert_int_equal(hg_journal_reader_next(r, UINT64_MAX, &rec), HG_ENOTFOUND);
  hg_journal_reader_close(r);
}

static int count_segments(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, "journal-0", 9) == 0) n++;
  closedir(d);
  return n;
}

static void patch(const char *dir, const char *name, long off, const void *bytes, size_t n) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  int fd = open(p, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t)n);
  close(fd);
}

static void read_at(const char *dir, const char *name, long off, void *bytes, size_t n) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  int fd = open(p, O_RDONLY);
  assert_true(fd >= 0);
  assert_int_equal(pread(fd, bytes, n, off), (ssize_t)n);
  close(fd);
}

/* CRC32C over the names and contents of every file in dir, in name order:
 * equal digests mean the directory is byte-identical. */
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint32_t dir_digest(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  char *names[64];
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    assert_true(n < 64);
    names[n++] = strdup(de->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof names[0], cmp_str);
  uint32_t c = 0;
  static uint8_t buf[1 << 16];
  for (size_t i = 0; i < n; i++) {
    c = hg_crc32c(c, names[i], strlen(names[i]) + 1);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0) c = hg_crc32c(c, buf, (size_t)r);
    close(fd);
    free(names[i]);
  }
  return c;
}

/* Fixed 40-byte payloads: each record takes 72 bytes, so record k (1-based)
 * of the first segment starts at 64 + 72 * (k - 1). */
static void append_fixed(hg_journal_t *j, uint64_t from, uint64_t to) {
  uint8_t p[40];
  for (uint64_t s = from; s <= to; s++) {
    memset(p, (int)s, sizeof p);
    assert_int_equal(hg_journal_append(j, s, s, p, sizeof p), 0);
  }
}

/* ------------------------------------------------------------------------ */

static void roundtrip_across_rollover(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_int_equal(hg_journal_uses_io_uring(j), !f->fallback && on_disk(f->dir));
  assert_int_equal(hg_journal_next_seq(j), 1);
  assert_int_equal(hg_journal_durable_seq(j), 0);
  append_range(j, 1, 600);
  assert_int_equal(hg_journal_sync(j), 0);
  assert_int_equal(hg_journal_durable_seq(j), 600);
  /* ~600 * 88 bytes over 16 KiB segments */
  assert_true(count_segments(f->dir) >= 3);
  expect_records(f->dir, 1, 600);
  expect_records(f->dir, 333, 600);
  assert_int_equal(hg_journal_close(j), 0);

  /* reopen after a clean close and continue */
  logbuf[0] = '\0';
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_string_equal(logbuf, ""); /* nothing torn, nothing repaired */
  assert_int_equal(hg_journal_next_seq(j), 601);
  assert_int_equal(hg_journal_durable_seq(j), 600);
  assert_int_equal(hg_journal_append(j, 600, 0, "x", 1), HG_ERANGE);
  append_range(j, 601, 700);
  assert_int_equal(hg_journal_close(j), 0);
  expect_records(f->dir, 1, 700);

  /* a record before the first segment is gone */
  hg_journal_reader_t *r;
  assert_int_equal(hg_journal_reader_open(f->dir, 0, &r), HG_ENOTFOUND);
}

static void durable_seq_follows_batches_in_order(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  append_fixed(j, 1, 3);
  assert_int_equal(hg_journal_commit(j), 0);
  if (f->fallback) {
    assert_int_equal(hg_journal_durable_seq(j), 3); /* synchronous */
  } else {
    assert_int_equal(hg_journal_durable_seq(j), 0); /* only poll releases */
  }
  append_fixed(j, 4, 6); /* accumulates while 1..3 is in flight */
  assert_int_equal(hg_journal_commit(j), 0);
  if (f->fallback) {
    assert_int_equal(hg_journal_durable_seq(j), 6);
  } else {
    assert_int_equal(hg_journal_poll(j, -1), 0);
    assert_int_equal(hg_journal_durable_seq(j), 3); /* exactly the first batch */
    assert_int_equal(hg_journal_poll(j, -1), 0);    /* 4..6 went out on the reap */
    assert_int_equal(hg_journal_durable_seq(j), 6);
  }
  /* polling with nothing in flight is harmless */
  assert_int_equal(hg_journal_poll(j, 0), 0);
  assert_int_equal(hg_journal_poll(j, 5), 0);

  /* argument checks change nothing */
  uint8_t big[1001] = {0};
  assert_int_equal(hg_journal_append(j, 7, 0, big, 1001), HG_EINVAL);
  assert_int_equal(hg_journal_append(j, 7, 0, NULL, 5), HG_EINVAL);
  assert_int_equal(hg_journal_append(j, 8, 0, big, 5), HG_ERANGE);
  assert_int_equal(hg_journal_append(j, 7, 0, NULL, 0), 0);
  /* the staging buffer (4096 bytes) takes 3 records of 1032 bytes beside
   * the empty one (32 bytes), then is full */
  assert_int_equal(hg_journal_append(j, 8, 0, big, 1000), 0);
  assert_int_equal(hg_journal_append(j, 9, 0, big, 1000), 0);
  assert_int_equal(hg_journal_append(j, 10, 0, big, 1000), 0);
  assert_int_equal(hg_journal_append(j, 11, 0, big, 1000), HG_EBUSY);
  assert_int_equal(hg_journal_durable_seq(j), 6);
  assert_int_equal(hg_journal_sync(j), 0);
  assert_int_equal(hg_journal_durable_seq(j), 10);
  assert_int_equal(hg_journal_append(j, 11, 0, big, 1000), 0);
  assert_int_equal(hg_journal_close(j), 0);

  hg_journal_reader_t *r;
  hg_journal_record_t rec;
  assert_int_equal(hg_journal_reader_open(f->dir, 7, &r), 0);
  assert_int_equal(hg_journal_reader_next(r, UINT64_MAX, &rec), 0);
  assert_int_equal(rec.seq, 7);
  assert_int_equal(rec.len, 0);
  /* max_seq stops a reader short of data that is there */
  assert_int_equal(hg_journal_reader_next(r, 7, &rec), HG_ENOTFOUND);
  assert_int_equal(hg_journal_reader_next(r, 8, &rec), 0);
  assert_int_equal(rec.seq, 8);
  hg_journal_reader_close(r);
}

/* A reader follows a live writer up to durable_seq and picks up roll-over. */
static void reader_follows_live_writer(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  hg_journal_reader_t *r;
  hg_journal_record_t rec;
  assert_int_equal(hg_journal_reader_open(f->dir, 1, &r), 0);
  assert_int_equal(hg_journal_reader_next(r, hg_journal_durable_seq(j), &rec), HG_ENOTFOUND);
  uint64_t got = 0;
  for (uint64_t s = 1; s <= 400; s += 50) {
    append_range(j, s, s + 49);
    assert_int_equal(hg_journal_sync(j), 0);
    while (hg_journal_reader_next(r, hg_journal_durable_seq(j), &rec) == 0) assert_int_equal(rec.seq, ++got);
    assert_int_equal(got, s + 49);
  }
  hg_journal_reader_close(r);
  assert_int_equal(hg_journal_close(j), 0);
}

static void fault_case(fixture_t *f, enum hg_journal_fault fault, int want_err, const char *want_msg) {
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  append_fixed(j, 1, 5);
  assert_int_equal(hg_journal_sync(j), 0);
  assert_int_equal(hg_journal_durable_seq(j), 5);

  hg_journal__inject_fault(j, fault);
  append_fixed(j, 6, 10);
  int rc = hg_journal_commit(j);
  if (rc == 0) rc = hg_journal_poll(j, -1);
  assert_int_equal(rc, want_err);
  assert_int_equal(hg_journal_durable_seq(j), 5); /* never acknowledged */
  assert_int_equal(hg_journal_failed(j), want_err);
  const char *msg;
  assert_int_equal(hg_journal_error(j, &msg), want_err);
  assert_non_null(strstr(msg, want_msg));
  assert_non_null(strstr(msg, SEG1));
  assert_non_null(strstr(logbuf, "intake stopped"));
  /* intake stays stopped */
  uint8_t p[40] = {0};
  assert_int_equal(hg_journal_append(j, 11, 0, p, sizeof p), HG_EUNAVAIL);
  assert_int_equal(hg_journal_commit(j), want_err);
  assert_int_equal(hg_journal_poll(j, -1), want_err);
  assert_int_equal(hg_journal_sync(j), want_err);
  assert_int_equal(hg_journal_durable_seq(j), 5);
  assert_int_equal(hg_journal_close(j), want_err);

  /* Recovery: a short write left 180 of the batch's 360 bytes, i.e. seqs
   * 6 and 7 whole (never acknowledged, but intact) and 36 torn bytes. */
  logbuf[0] = '\0';
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  if (fault == HG_JOURNAL_FAULT_SHORT_WRITE) {
    assert_int_equal(hg_journal_next_seq(j), 8);
    assert_non_null(strstr(logbuf, "offset 568"));
    if (strstr(logbuf, "36 bytes truncated") == NULL) fprintf(stderr, "%s", logbuf);
    assert_non_null(strstr(logbuf, "36 bytes truncated"));
  } else {
    assert_int_equal(hg_journal_next_seq(j), 6);
    assert_string_equal(logbuf, "");
  }
  assert_int_equal(hg_journal_close(j), 0);
}

static void fault_short_write(void **state) {
  fixture_t *f = *state;
  fault_case(f, HG_JOURNAL_FAULT_SHORT_WRITE, -EIO, "short write: 180 of 360 bytes");
}

static void fault_eio(void **state) {
  fixture_t *f = *state;
  /* on io_uring the kernel really cancels the linked fdatasync */
  fault_case(f, HG_JOURNAL_FAULT_EIO, -EIO,
             f->fallback ? "Input/output error" : "Input/output error; linked fdatasync cancelled");
}

static void fault_enospc(void **state) {
  fixture_t *f = *state;
  fault_case(f, HG_JOURNAL_FAULT_ENOSPC, -ENOSPC,
             f->fallback ? "No space left on device" : "No space left on device; linked fdatasync cancelled");
}

static void write_ten_fixed(fixture_t *f) {
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  append_fixed(j, 1, 10);
  assert_int_equal(hg_journal_close(j), 0);
}

static void torn_tail_is_truncated(void **state) {
  fixture_t *f = *state;
  write_ten_fixed(f);
  /* a record header claiming 40 bytes whose payload never arrived; the end
   * of data is at 64 + 10 * 72 = 784 */
  uint8_t h[40];
  read_at(f->dir, SEG1, 64, h, sizeof h);
  h[16] = 11;
  h[19] = 0xff; /* last torn byte nonzero, so all 20 count */
  patch(f->dir, SEG1, 784, h, 20);
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_non_null(strstr(logbuf, "[2] ")); /* HG_LOG_WARN */
  assert_non_null(strstr(logbuf, "torn record at the tail, offset 784"));
  assert_non_null(strstr(logbuf, "20 bytes truncated"));
  assert_int_equal(hg_journal_next_seq(j), 11);
  uint8_t z[20];
  read_at(f->dir, SEG1, 784, z, sizeof z);
  static const uint8_t zeros[20];
  assert_memory_equal(z, zeros, sizeof z);
  append_fixed(j, 11, 12);
  assert_int_equal(hg_journal_close(j), 0);

  /* garbage after the end marker (a later page of a torn batch) */
  logbuf[0] = '\0';
  patch(f->dir, SEG1, 64 + 12 * 72 + 200, "garbage", 7);
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_non_null(strstr(logbuf, "torn write at the tail, offset 928"));
  /* the 7 bytes of data, not the 200 never-written zero bytes before them */
  assert_non_null(strstr(logbuf, "offset 928: 7 bytes truncated"));
  assert_int_equal(hg_journal_next_seq(j), 13);
  assert_int_equal(hg_journal_close(j), 0);
  logbuf[0] = '\0';
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_string_equal(logbuf, "");
  assert_int_equal(hg_journal_close(j), 0);
}

static void bad_crc_mid_log_stops_and_repair_drops(void **state) {
  fixture_t *f = *state;
  write_ten_fixed(f);
  /* one payload byte of seq 4, which starts at 64 + 3 * 72 = 280 */
  patch(f->dir, SEG1, 280 + 32 + 5, "\x7f", 1);
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j = NULL;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_null(j);
  assert_non_null(strstr(logbuf, SEG1 ": corrupt at offset 280 (bad record CRC)"));
  assert_non_null(strstr(logbuf, "repair"));
  /* the reader refuses it too */
  hg_journal_reader_t *r;
  hg_journal_record_t rec;
  assert_int_equal(hg_journal_reader_open(f->dir, 1, &r), 0);
  for (int k = 0; k < 3; k++) assert_int_equal(hg_journal_reader_next(r, UINT64_MAX, &rec), 0);
  assert_int_equal(hg_journal_reader_next(r, UINT64_MAX, &rec), HG_ECORRUPT);
  hg_journal_reader_close(r);

  logbuf[0] = '\0';
  o.repair = 1;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_non_null(strstr(logbuf, "dropped 7 records from seq 4"));
  assert_int_equal(hg_journal_next_seq(j), 4);
  append_fixed(j, 4, 5);
  assert_int_equal(hg_journal_close(j), 0);
  o.repair = 0;
  logbuf[0] = '\0';
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_string_equal(logbuf, "");
  assert_int_equal(hg_journal_next_seq(j), 6);
  assert_int_equal(hg_journal_close(j), 0);
}

/* A bad record at the end of a non-last segment is corruption even though
 * nothing follows it in its own file. */
static void bad_record_in_earlier_segment(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  append_range(j, 1, 600);
  assert_int_equal(hg_journal_close(j), 0);
  /* the second segment's name gives the first segment's last seq */
  DIR *d = opendir(f->dir);
  uint64_t second = UINT64_MAX;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    unsigned long long s;
    if (sscanf(de->d_name, "journal-%llu.hgj", &s) == 1 && s > 1 && s < second) second = s;
  }
  closedir(d);
  assert_true(second < 600);
  uint64_t last = second - 1;
  long off = 64;
  for (uint64_t s = 1; s < last; s++) off += (long)HG_JOURNAL_RECORD_SIZE(payload_len(s));
  uint8_t b;
  read_at(f->dir, SEG1, off + 32, &b, 1);
  b ^= 1;
  patch(f->dir, SEG1, off + 32, &b, 1);
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  char want[128];
  snprintf(want, sizeof want, SEG1 ": corrupt at offset %ld", off);
  assert_non_null(strstr(logbuf, want));
  assert_non_null(strstr(logbuf, "ops/restore"));

  /* Repair cuts only a torn last batch: here that would drop every record
   * of the later segment, all of them durable. Refused, nothing changes. */
  uint32_t before = dir_digest(f->dir);
  int segs = count_segments(f->dir);
  logbuf[0] = '\0';
  o.repair = 1;
  j = NULL;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_null(j);
  assert_non_null(strstr(logbuf, "repair refused"));
  assert_non_null(strstr(logbuf, "it is not in the last segment"));
  assert_non_null(strstr(logbuf, "nothing was changed"));
  assert_non_null(strstr(logbuf, "restore the data directory from a backup (ops/restore)"));
  assert_int_equal(dir_digest(f->dir), before);
  assert_int_equal(count_segments(f->dir), segs);
}

/* ------------------------------------------------------------------------ */
/* Durable floor and mark                                                    */
/* ------------------------------------------------------------------------ */

static hg_journal_options_t mark_opts(const fixture_t *f, char *mark, size_t len) {
  snprintf(mark, len, "%s/durable.mark", f->dir);
  hg_journal_options_t o = small_opts(f);
  o.mark_path = mark;
  return o;
}

static uint64_t mark_seq(const char *dir) {
  uint8_t b[48];
  read_at(dir, "durable.mark", 0, b, sizeof b);
  uint64_t v;
  memcpy(&v, b + 8, 8);
  return v;
}

static void remove_segment(const char *dir, uint64_t first) {
  char p[256];
  snprintf(p, sizeof p, "%s/journal-%020llu.hgj", dir, (unsigned long long)first);
  assert_int_equal(unlink(p), 0);
}

/* The mark follows the roll-overs (not every batch) and the close; a
 * journal that then lacks its last segment, or every segment, is refused
 * with the missing range, and nothing on disk changes. */
static void mark_refuses_missing_segments(void **state) {
  fixture_t *f = *state;
  char mark[128];
  hg_journal_options_t o = mark_opts(f, mark, sizeof mark);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_int_equal(mark_seq(f->dir), 0); /* written at open: a fresh journal */
  append_range(j, 1, 600);
  assert_int_equal(hg_journal_sync(j), 0);
  uint64_t firsts[16];
  int n = util_segment_firsts(f->dir, firsts, 16);
  assert_true(n >= 3);
  /* the last roll-over's mark: everything before the current segment */
  assert_int_equal(mark_seq(f->dir), firsts[n - 1] - 1);
  assert_int_equal(hg_journal_close(j), 0);
  assert_int_equal(mark_seq(f->dir), 600);

  remove_segment(f->dir, firsts[n - 1]);
  uint32_t before = dir_digest(f->dir);
  j = NULL;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_null(j);
  char want[512];
  snprintf(want, sizeof want, "journal: %s ends at seq %llu but seq 600 was durable (durable mark %s written 20",
           f->dir, (unsigned long long)(firsts[n - 1] - 1), mark);
  assert_non_null(strstr(logbuf, want));
  snprintf(want, sizeof want, "records %llu..600 are missing; start-up stopped, nothing was changed",
           (unsigned long long)firsts[n - 1]);
  assert_non_null(strstr(logbuf, want));
  assert_non_null(strstr(logbuf, "ops/restore"));
  /* repair does not help: the records are not torn, they are gone */
  o.repair = 1;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_int_equal(dir_digest(f->dir), before);

  for (int k = 0; k < n - 1; k++) remove_segment(f->dir, firsts[k]);
  logbuf[0] = '\0';
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_non_null(strstr(logbuf, "holds no segment but seq 600 was durable (durable mark"));
  assert_non_null(strstr(logbuf, "records up to seq 600 are missing"));
  assert_int_equal(count_segments(f->dir), 0);
  assert_int_equal(mark_seq(f->dir), 600);
}

/* A segment missing in the middle: the message names the records. */
static void middle_segment_missing_names_the_gap(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  append_range(j, 1, 600);
  assert_int_equal(hg_journal_close(j), 0);
  uint64_t firsts[16];
  int n = util_segment_firsts(f->dir, firsts, 16);
  assert_true(n >= 3);
  remove_segment(f->dir, firsts[1]);
  o.repair = 1;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  char want[160];
  snprintf(want, sizeof want, "sequence gap between segments: records %llu..%llu are missing",
           (unsigned long long)firsts[1], (unsigned long long)(firsts[2] - 1));
  assert_non_null(strstr(logbuf, want));
  assert_non_null(strstr(logbuf, "repair refused"));
  assert_int_equal(count_segments(f->dir), n - 1);
}

/* The caller's floor (the pipeline's snapshot seq) counts without a mark
 * file (a data directory of a version without marks); open writes one. */
static void durable_floor_without_mark(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  o.first_seq = 51;
  o.durable_floor = 50;
  hg_journal_t *j = NULL;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_non_null(strstr(logbuf, "holds no segment but seq 50 was durable (durable floor given at open"));
  assert_int_equal(count_segments(f->dir), 0);

  write_ten_fixed(f);
  logbuf[0] = '\0';
  o.first_seq = 1;
  o.durable_floor = 20;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_non_null(strstr(logbuf, "ends at seq 10 but seq 20 was durable"));
  assert_non_null(strstr(logbuf, "records 11..20 are missing"));

  char mark[128];
  o = mark_opts(f, mark, sizeof mark);
  o.durable_floor = 10;
  logbuf[0] = '\0';
  assert_int_equal(access(mark, F_OK), -1);
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_string_equal(logbuf, "");
  assert_int_equal(hg_journal_next_seq(j), 11);
  assert_int_equal(mark_seq(f->dir), 10);
  assert_int_equal(hg_journal_close(j), 0);
}

/* Repair never cuts a record at or below the floor, nor (next test) more
 * than one batch's worth of data: only the batch in flight can be torn. */
static void repair_refuses_durable_records(void **state) {
  fixture_t *f = *state;
  write_ten_fixed(f);
  patch(f->dir, SEG1, 280 + 32 + 5, "\x7f", 1); /* seq 4 */
  hg_journal_options_t o = small_opts(f);
  o.repair = 1;
  o.durable_floor = 5;
  uint32_t before = dir_digest(f->dir);
  hg_journal_t *j = NULL;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_non_null(strstr(logbuf, "ends at seq 3 but seq 5 was durable"));
  assert_non_null(strstr(logbuf, "records 4..5 are missing or damaged"));
  assert_int_equal(dir_digest(f->dir), before);
}

static void repair_refuses_more_than_a_batch(void **state) {
  fixture_t *f = *state;
  /* ~26 KB in one 64 KiB segment, corrupt near its start */
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  o.segment_size = 65536;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  append_range(j, 1, 300);
  assert_int_equal(hg_journal_close(j), 0);
  long off = 64 + (long)HG_JOURNAL_RECORD_SIZE(payload_len(1));
  uint8_t b;
  read_at(f->dir, SEG1, off + 32, &b, 1);
  b ^= 1;
  patch(f->dir, SEG1, off + 32, &b, 1);
  uint32_t before = dir_digest(f->dir);
  logbuf[0] = '\0';
  o.repair = 1;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_non_null(strstr(logbuf, "repair refused"));
  assert_non_null(strstr(logbuf, "more data than one batch follows it"));
  assert_int_equal(dir_digest(f->dir), before);
}

/* A "torn" tail below the mark is damage to durable records: not cut. */
static void torn_tail_below_mark_is_refused(void **state) {
  fixture_t *f = *state;
  char mark[128];
  hg_journal_options_t o = mark_opts(f, mark, sizeof mark);
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  append_fixed(j, 1, 10);
  assert_int_equal(hg_journal_close(j), 0);
  assert_int_equal(mark_seq(f->dir), 10);
  patch(f->dir, SEG1, 64 + 9 * 72 + 40, "\x01", 1); /* seq 10's payload */
  uint32_t before = dir_digest(f->dir);
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_non_null(strstr(logbuf, "ends at seq 9 but seq 10 was durable"));
  assert_null(strstr(logbuf, "truncated"));
  assert_int_equal(dir_digest(f->dir), before);

  /* a damaged mark stops start-up too */
  patch(f->dir, SEG1, 64 + 9 * 72 + 40, "\x0a", 1);
  patch(f->dir, "durable.mark", 8, "\x09", 1);
  logbuf[0] = '\0';
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_ECORRUPT);
  assert_non_null(strstr(logbuf, "durable.mark is damaged"));
}

static void newer_version_is_rejected(void **state) {
  fixture_t *f = *state;
  write_ten_fixed(f);
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  /* a record of a newer version */
  patch(f->dir, SEG1, 64 + 72 * 2 + 4, "\x02\x00", 2);
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_EVERSION);
  assert_non_null(strstr(logbuf, SEG1 " offset 208: record format version 2 is newer"));
  o.repair = 1; /* repair does not touch what it cannot read */
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_EVERSION);
  /* a segment of a newer version */
  logbuf[0] = '\0';
  patch(f->dir, SEG1, 4, "\x03\x00", 2);
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_EVERSION);
  assert_non_null(strstr(logbuf, SEG1 ": segment format version 3 is newer than this build reads (version 1)"));
  hg_journal_reader_t *r;
  assert_int_equal(hg_journal_reader_open(f->dir, 1, &r), HG_EVERSION);
}

static void missing_directory(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j = NULL;
  char p[128];
  snprintf(p, sizeof p, "%s/nope", f->dir);
  assert_int_equal(hg_journal_open(p, &o, &j), -ENOENT);
  assert_null(j);
  assert_non_null(strstr(logbuf, "cannot open directory"));
  assert_non_null(strstr(logbuf, "/nope: No such file or directory"));
  o.batch_bytes = 100; /* smaller than one max-size record */
  assert_int_equal(hg_journal_open(f->dir, &o, &j), HG_EINVAL);
}

static void falls_back_when_io_uring_init_fails(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  hg_journal_t *j;
  hg_journal__fail_next_uring_init(-ENOSYS);
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_int_equal(hg_journal_uses_io_uring(j), 0);
  assert_non_null(strstr(logbuf, "io_uring unavailable (Function not implemented); falling back"));
  append_range(j, 1, 50);
  assert_int_equal(hg_journal_sync(j), 0);
  assert_int_equal(hg_journal_durable_seq(j), 50);
  assert_int_equal(hg_journal_close(j), 0);
  /* one-shot: the next open uses io_uring again */
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_int_equal(hg_journal_uses_io_uring(j), on_disk(f->dir));
  assert_int_equal(hg_journal_close(j), 0);
  expect_records(f->dir, 1, 50);
}

static void first_seq_option(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  o.first_seq = 1000;
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_int_equal(hg_journal_durable_seq(j), 999);
  append_range(j, 1000, 1010);
  assert_int_equal(hg_journal_close(j), 0);
  expect_records(f->dir, 1000, 1010);
  expect_records(f->dir, 1005, 1010);
}

/* hg_journal_first_seq: the oldest segment's first seq, none, no directory. */
static void first_seq_of_directory(void **state) {
  fixture_t *f = *state;
  uint64_t seq = 7;
  assert_int_equal(hg_journal_first_seq(f->dir, &seq), HG_ENOTFOUND);
  assert_int_equal(seq, 7);
  char missing[sizeof f->dir + 16];
  snprintf(missing, sizeof missing, "%s/none", f->dir);
  assert_int_equal(hg_journal_first_seq(missing, &seq), -ENOENT);
  hg_journal_options_t o = small_opts(f);
  o.first_seq = 1000;
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  append_range(j, 1000, 1400);
  assert_int_equal(hg_journal_close(j), 0);
  assert_int_equal(hg_journal_first_seq(f->dir, &seq), 0);
  assert_int_equal(seq, 1000);
}

/* Bytes of path in unwritten (allocated, never written) extents, after a
 * sync; -1 if the filesystem cannot say (FIEMAP unsupported). */
static long long unwritten_bytes(const char *path) {
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  enum { N = 64 };
  struct {
    struct fiemap m;
    struct fiemap_extent e[N];
  } q;
  long long total = 0;
  uint64_t start = 0;
  for (;;) {
    memset(&q, 0, sizeof q);
    q.m.fm_start = start;
    q.m.fm_length = FIEMAP_MAX_OFFSET - start;
    q.m.fm_flags = FIEMAP_FLAG_SYNC;
    q.m.fm_extent_count = N;
    if (ioctl(fd, FS_IOC_FIEMAP, &q.m) != 0) {
      close(fd);
      return -1;
    }
    if (q.m.fm_mapped_extents == 0) break;
    const struct fiemap_extent *last = &q.e[q.m.fm_mapped_extents - 1];
    for (uint32_t i = 0; i < q.m.fm_mapped_extents; i++)
      if (q.e[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN) total += (long long)q.e[i].fe_length;
    if (last->fe_flags & FIEMAP_EXTENT_LAST) break;
    start = last->fe_logical + last->fe_length;
  }
  close(fd);
  return total;
}

/* Opens a journal in f->dir with o and no zero-fill, and says whether this
 * filesystem leaves fallocated space unwritten there (ext4, XFS), which is
 * what zero-filling avoids; removes what it made. seg and spare: the paths
 * of the first segment and of the spare (out, 256 bytes each). */
static bool leaves_unwritten(const fixture_t *f, hg_journal_options_t o, char *seg, char *spare) {
  snprintf(seg, 256, "%s/journal-%020d.hgj", f->dir, 1);
  snprintf(spare, 256, "%s/journal-spare.tmp", f->dir);
  hg_journal_t *j;
  o.no_zero_fill = 1;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_int_equal(hg_journal__zero_fills(j), 0);
  long long before = unwritten_bytes(seg);
  assert_int_equal(hg_journal_close(j), 0);
  unlink(seg);
  unlink(spare);
  return before > 0;
}

/* Segments are written with zeros before they take records, so a batch's
 * fdatasync never has to convert extents (a metadata commit): the first
 * segment at once, the spare at the pace the segment fills. Where the
 * filesystem leaves fallocated space unwritten (ext4, XFS; checked with
 * no_zero_fill first, which must show it), no part of either stays so. */
static void segments_are_zero_filled(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  o.segment_size = 256 * 1024;
  char seg[256], spare[256];
  if (!leaves_unwritten(f, o, seg, spare)) {
    skip(); /* this filesystem writes fallocated space out, or cannot tell */
  }
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_int_equal(hg_journal__zero_fills(j), 1);
  assert_int_equal(unwritten_bytes(seg), 0);
  assert_true(unwritten_bytes(spare) > 0); /* not yet: no batch has run */
  /* 2000 * ~88 bytes: more than half the 256 KiB segment, less than all */
  append_range(j, 1, 2000);
  assert_int_equal(hg_journal_sync(j), 0);
  assert_int_equal(count_segments(f->dir), 1);
  assert_int_equal(unwritten_bytes(seg), 0);
  assert_int_equal(unwritten_bytes(spare), 0);
  assert_int_equal(hg_journal_close(j), 0);
  expect_records(f->dir, 1, 2000);
}

/* Appends records from *seq on, committing every 40 (batches of about
 * 3 KB), until the first segment holds at least want bytes (*off: its
 * size in use so far, header included). */
static void fill_to(hg_journal_t *j, uint64_t *seq, uint64_t *off, uint64_t want) {
  uint8_t p[1000];
  while (*off < want) {
    for (int k = 0; k < 40; k++, ++*seq) {
      uint32_t len = payload_len(*seq);
      make_payload(*seq, p, len);
      int rc;
      while ((rc = hg_journal_append(j, *seq, *seq * 1000u, p, len)) == HG_EBUSY)
        assert_int_equal(hg_journal_poll(j, -1), 0);
      assert_int_equal(rc, 0);
      *off += HG_JOURNAL_RECORD_SIZE(len);
    }
    assert_int_equal(hg_journal_sync(j), 0);
  }
}

/* The spare is zeroed while the segment fills, in a few large pieces
 * rather than a small write after every batch (whose device writes each
 * batch's fdatasync would wait behind), and before the segment is full. */
static void spare_is_zeroed_at_the_segments_pace(void **state) {
  fixture_t *f = *state;
  hg_journal_options_t o = small_opts(f);
  const long long seg_size = 4 << 20;
  o.segment_size = (uint64_t)seg_size;
  char seg[256], spare[256];
  if (!leaves_unwritten(f, o, seg, spare)) {
    skip(); /* this filesystem writes fallocated space out, or cannot tell */
  }
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(f->dir, &o, &j), 0);
  assert_int_equal(unwritten_bytes(spare), seg_size);
  uint64_t at_open = hg_journal__zero_writes(j); /* the first segment's */
  uint64_t seq = 1, off = HG_JOURNAL_SEGMENT_HEADER_SIZE;
  fill_to(j, &seq, &off, (uint64_t)seg_size / 4);
  long long quarter = unwritten_bytes(spare);
  assert_true(quarter > 0 && quarter < seg_size); /* begun, not done */
  fill_to(j, &seq, &off, (uint64_t)seg_size * 19 / 20);
  assert_int_equal(count_segments(f->dir), 1);
  assert_int_equal(unwritten_bytes(spare), 0); /* ready before it is needed */
  /* In 1 MiB bursts of 128 KiB writes (one more where a burst straddles
   * the end), not a write per batch: about 1,200 batches went in. */
  assert_true(hg_journal__zero_writes(j) - at_open <= (uint64_t)seg_size / (128 * 1024) + 4);
  assert_int_equal(hg_journal_close(j), 0);
  expect_records(f->dir, 1, seq - 1);
}

/* A journal in memory (tmpfs) is neither zero-filled (no extents to
 * convert, no flush to shorten) nor committed through io_uring (the sync
 * has nothing to flush), so each commit is done when it returns: a copy
 * into the mapped segment. It still rolls over, reads back whole, and
 * carries on after a reopen. One run: on tmpfs the io_uring and the
 * fallback fixture take the same path. */
static void memory_journal_is_written_in_place(void **state) {
  fixture_t *f = *state;
  if (on_disk("/dev/shm")) skip(); /* no memory file system to try it on */
  char dir[64];
  strcpy(dir, "/dev/shm/hg_journal_test_XXXXXX");
  assert_non_null(mkdtemp(dir));
  hg_journal_options_t o = small_opts(f);
  o.segment_size = 64 * 1024;
  hg_journal_t *j;
  assert_int_equal(hg_journal_open(dir, &o, &j), 0);
  assert_int_equal(hg_journal__zero_fills(j), 0);
  assert_int_equal(hg_journal_uses_io_uring(j), 0);
  append_range(j, 1, 10);
  assert_int_equal(hg_journal_commit(j), 0);
  assert_int_equal(hg_journal_durable_seq(j), 10); /* no poll needed */
  assert_int_equal(hg_journal__mapped(j), 1);     /* copied, not written */
  append_range(j, 11, 2000); /* ~176 KB: across segments */
  assert_int_equal(hg_journal_sync(j), 0);
  assert_int_equal(hg_journal__mapped(j), 1); /* the new segment too */
  assert_int_equal(hg_journal_close(j), 0);
  assert_true(count_segments(dir) > 1);
  expect_records(dir, 1, 2000);
  /* Reopened, it carries on in the segment it recovered. */
  assert_int_equal(hg_journal_open(dir, &o, &j), 0);
  append_range(j, 2001, 2100);
  assert_int_equal(hg_journal_sync(j), 0);
  assert_int_equal(hg_journal__mapped(j), 1);
  assert_int_equal(hg_journal_close(j), 0);
  expect_records(dir, 1, 2100);
  assert_int_equal(remove_dir(dir), 0);
}

#define BOTH(fn)                                                   \
  cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, &path_uring), \
      cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, &path_fallback)

int main(void) {
  const struct CMUnitTest tests[] = {
      BOTH(roundtrip_across_rollover),
      BOTH(durable_seq_follows_batches_in_order),
      BOTH(reader_follows_live_writer),
      BOTH(fault_short_write),
      BOTH(fault_eio),
      BOTH(fault_enospc),
      BOTH(torn_tail_is_truncated),
      BOTH(bad_crc_mid_log_stops_and_repair_drops),
      BOTH(bad_record_in_earlier_segment),
      BOTH(mark_refuses_missing_segments),
      BOTH(middle_segment_missing_names_the_gap),
      BOTH(durable_floor_without_mark),
      BOTH(repair_refuses_durable_records),
      BOTH(repair_refuses_more_than_a_batch),
      BOTH(torn_tail_below_mark_is_refused),
      BOTH(segments_are_zero_filled),
      BOTH(spare_is_zeroed_at_the_segments_pace),
      cmocka_unit_test_prestate_setup_teardown(memory_journal_is_written_in_place, setup,
                                               teardown, &path_uring),
      cmocka_unit_test_prestate_setup_teardown(newer_version_is_rejected, setup, teardown, &path_uring),
      cmocka_unit_test_prestate_setup_teardown(missing_directory, setup, teardown, &path_uring),
      cmocka_unit_test_prestate_setup_teardown(falls_back_when_io_uring_init_fails, setup, teardown,
                                               &path_uring),
      cmocka_unit_test_prestate_setup_teardown(first_seq_option, setup, teardown, &path_uring),
      cmocka_unit_test_prestate_setup_teardown(first_seq_of_directory, setup, teardown,
                                               &path_uring),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
