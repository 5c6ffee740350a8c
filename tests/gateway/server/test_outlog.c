/*
 * The outbound journal on its own: records read back byte for byte across a
 * reopen, seq and session-id recovery, segment roll and retention with the
 * exact layout computed by hand, the before-retention answer, a corrupt
 * record in the middle, a torn tail, and a write that fails (file size limit
 * standing in for a full disk) without losing what is staged. Positions: a
 * hand-written case, and a property test against a plain list of every
 * frame appended (a restart that applies entries again from an earlier
 * point meets exactly the frames logged before it, across rolls and
 * deleted segments).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hourglass/error.h"
#include "outlog.h"
#include "pipeline_util.h"

#define KEY 7
#define LEN 100 /* payload bytes: a record takes 32 + 100 -> 136 bytes */

static int warnings;
static void quiet(void *ctx, int level, const char *msg) {
  (void)ctx;
  if (level >= HG_LOG_WARN) warnings++;
  if (getenv("GT_VERBOSE") != NULL) fprintf(stderr, "[outlog %d] %s\n", level, msg);
}

static void frame(uint64_t seq, uint8_t *out) {
  for (int i = 0; i < LEN; i++) out[i] = (uint8_t)(seq * 7 + (uint64_t)i);
}

static hg_outlog_t *open_log(const char *dir, uint64_t seg, uint32_t kept) {
  hg_outlog_options_t o = {.segment_size = seg, .segments_kept = kept, .max_frame = 4096,
                           .log = quiet};
  hg_outlog_t *l = NULL;
  assert_int_equal(hg_outlog_open(dir, &o, &l), 0);
  return l;
}

static void append_range(hg_outlog_t *l, uint64_t from, uint64_t to) {
  uint8_t f[LEN];
  for (uint64_t s = from; s <= to; s++) {
    frame(s, f);
    assert_int_equal(hg_outlog_append(l, KEY, s, f, LEN), 0);
  }
}

static void expect_frame(hg_outlog_t *l, uint64_t seq) {
  uint8_t want[LEN], got[4096];
  size_t len = 0;
  frame(seq, want);
  assert_int_equal(hg_outlog_read(l, KEY, seq, got, sizeof got, &len), 0);
  assert_int_equal(len, LEN);
  assert_memory_equal(got, want, LEN);
}

static int count_segments(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += strncmp(e->d_name, "outlog-", 7) == 0;
  closedir(d);
  return n;
}

static void seg_file(const char *dir, uint64_t no, char *out, size_t cap) {
  snprintf(out, cap, "%s/outlog-%020llu.hgo", dir, (unsigned long long)no);
}

static off_t file_size(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return st.st_size;
}

static const uint8_t SID_A[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t SID_B[16] = {16, 15, 14};

static void test_reopen(void **state) {
  (void)state;
  char dir[64];
  assert_non_null(util_tmpdir(dir, "outlog"));
  hg_outlog_t *l = open_log(dir, 0, 0);
  assert_int_equal(hg_outlog_append(l, KEY, 1, "x", 1), HG_ENOTFOUND); /* key not added */
  assert_int_equal(hg_outlog_key_add(l, KEY), 0);
  assert_int_equal(hg_outlog_next_seq(l, KEY), 1);
  append_range(l, 1, 100);
  assert_int_equal(hg_outlog_append(l, KEY, 100, "x", 1), HG_EINVAL); /* not increasing */
  assert_int_equal(hg_outlog_sid_add(l, KEY, SID_A), 0);
  assert_int_equal(hg_outlog_sid_add(l, KEY, SID_A), HG_EEXISTS);
  assert_true(hg_outlog_sid_used(l, KEY, SID_A));
  assert_false(hg_outlog_sid_used(l, KEY + 1, SID_A)); /* ids are per key */
  expect_frame(l, 50);  /* staged bytes are written before reading */
  expect_frame(l, 51);  /* the cursor path */
  expect_frame(l, 3);   /* the index path */
  size_t len;
  assert_int_equal(hg_outlog_read(l, KEY, 101, NULL, 0, &len), HG_ENOTFOUND);
  uint8_t small[10];
  assert_int_equal(hg_outlog_read(l, KEY, 7, small, sizeof small, &len), -ENOBUFS);
  hg_outlog_close(l);
  /* one segment: header + 100 frames + one session id record */
  char path[128];
  seg_file(dir, 1, path, sizeof path);
  assert_int_equal(file_size(path), 32 + 100 * 136 + 48);

  l = open_log(dir, 0, 0);
  assert_int_equal(hg_outlog_next_seq(l, KEY), 101);
  assert_int_equal(hg_outlog_next_seq(l, KEY + 1), 1);
  assert_true(hg_outlog_sid_used(l, KEY, SID_A));
  assert_false(hg_outlog_sid_used(l, KEY, SID_B));
  assert_int_equal(hg_outlog_oldest(l, KEY), 1);
  for (uint64_t s = 1; s <= 100; s++) expect_frame(l, s);
  for (int s = 100; s >= 1; s -= 9) expect_frame(l, (uint64_t)s); /* backwards: index each time */
  /* appending continues after the restored seq */
  assert_int_equal(hg_outlog_key_add(l, KEY), 0);
  append_range(l, 101, 101);
  expect_frame(l, 101);
  hg_outlog_stats_t st;
  hg_outlog_stats(l, &st);
  assert_int_equal(st.corrupt, 0);
  assert_int_equal(st.segments, 1);
  hg_outlog_close(l);
  util_rm_rf(dir);
}

/* segment_size 4096, 2 kept, 200 frames of 136 bytes. Segment 1: header
 * (32) + session id (48) + 29 frames (3944) = 4024, one more would pass
 * 4096: seqs 1..29. Every later segment starts with a seq mark (32); the
 * session id is carried into segments 3, 5, 7 (when the one holding it is
 * about to go), so segments hold 29 frames each: 2: 30..58, 3: 59..87,
 * 4: 88..116, 5: 117..145, 6: 146..174, 7: 175..200. Kept: 6 and 7. */
static void test_retention(void **state) {
  (void)state;
  char dir[64];
  assert_non_null(util_tmpdir(dir, "outlog"));
  hg_outlog_t *l = open_log(dir, 4096, 2);
  assert_int_equal(hg_outlog_key_add(l, KEY), 0);
  assert_int_equal(hg_outlog_sid_add(l, KEY, SID_A), 0);
  append_range(l, 1, 29);
  assert_int_equal(count_segments(dir), 1);
  append_range(l, 30, 30);
  assert_int_equal(count_segments(dir), 2);
  append_range(l, 31, 200);
  assert_int_equal(hg_outlog_flush(l), 0);
  assert_int_equal(count_segments(dir), 2);
  char path[128];
  seg_file(dir, 6, path, sizeof path);
  assert_int_equal(file_size(path), 32 + 32 + 29 * 136);
  seg_file(dir, 7, path, sizeof path);
  assert_int_equal(file_size(path), 32 + 32 + 48 + 26 * 136);
  assert_int_equal(hg_outlog_oldest(l, KEY), 146);
  size_t len;
  assert_int_equal(hg_outlog_read(l, KEY, 145, NULL, 0, &len), HG_ERANGE);
  assert_int_equal(hg_outlog_read(l, KEY, 1, NULL, 0, &len), HG_ERANGE);
  expect_frame(l, 146);
  expect_frame(l, 174);
  expect_frame(l, 175); /* across the segment boundary, by cursor */
  expect_frame(l, 200);
  hg_outlog_close(l);
  /* The session id's record from segment 1 survived in segment 7, and the
   * numbering in the frames (and seq marks) of what is kept. */
  l = open_log(dir, 4096, 2);
  assert_true(hg_outlog_sid_used(l, KEY, SID_A));
  assert_int_equal(hg_outlog_next_seq(l, KEY), 201);
  assert_int_equal(hg_outlog_oldest(l, KEY), 146);
  expect_frame(l, 160);
  hg_outlog_close(l);
  util_rm_rf(dir);
}

static void flip(const char *path, off_t at) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  uint8_t b;
  assert_int_equal(pread(fd, &b, 1, at), 1);
  b ^= 0x40;
  assert_int_equal(pwrite(fd, &b, 1, at), 1);
  close(fd);
}

static void test_corrupt_and_torn(void **state) {
  (void)state;
  char dir[64], path[128];
  assert_non_null(util_tmpdir(dir, "outlog"));
  hg_outlog_t *l = open_log(dir, 0, 0);
  assert_int_equal(hg_outlog_key_add(l, KEY), 0);
  append_range(l, 1, 10);
  hg_outlog_close(l);
  seg_file(dir, 1, path, sizeof path);
  /* A payload byte of seq 5's record (the 5th after the 32-byte header). */
  flip(path, 32 + 4 * 136 + 32 + 10);
  warnings = 0;
  l = open_log(dir, 0, 0);
  hg_outlog_stats_t st;
  hg_outlog_stats(l, &st);
  assert_int_equal(st.corrupt, 1);
  assert_true(warnings >= 1);
  assert_int_equal(hg_outlog_next_seq(l, KEY), 11); /* records after it still count */
  size_t len;
  expect_frame(l, 4);
  assert_int_equal(hg_outlog_read(l, KEY, 5, NULL, 0, &len), HG_ECORRUPT);
  expect_frame(l, 6); /* found past the bad record */
  expect_frame(l, 10);
  hg_outlog_close(l);

  /* Torn tail: seq 10's record cut in half is dropped at open, not counted
   * as corruption, and the file ends where seq 9 does. */
  assert_int_equal(truncate(path, 32 + 9 * 136 + 60), 0);
  l = open_log(dir, 0, 0);
  hg_outlog_stats(l, &st);
  assert_int_equal(st.corrupt, 1); /* seq 5 again, nothing more */
  assert_int_equal(hg_outlog_next_seq(l, KEY), 10);
  assert_int_equal(file_size(path), 32 + 9 * 136);
  assert_int_equal(hg_outlog_read(l, KEY, 10, NULL, 0, &len), HG_ENOTFOUND);
  hg_outlog_close(l);
  /* A bad segment header: its records are not trusted (counted), and new
   * records go to a fresh segment rather than after it. */
  flip(path, 9);
  l = open_log(dir, 0, 0);
  hg_outlog_stats(l, &st);
  assert_int_equal(st.corrupt, 1);
  assert_int_equal(st.segments, 2);
  assert_int_equal(hg_outlog_next_seq(l, KEY), 1);
  hg_outlog_close(l);
  util_rm_rf(dir);
}

/* A write that fails part way (RLIMIT_FSIZE: EFBIG, like a full disk) keeps
 * whole records only, keeps the rest staged and reports it; once there is
 * room again the next flush writes everything and the error clears. */
static void test_write_failure(void **state) {
  (void)state;
  char dir[64], path[128];
  assert_non_null(util_tmpdir(dir, "outlog"));
  hg_outlog_t *l = open_log(dir, 0, 0);
  assert_int_equal(hg_outlog_key_add(l, KEY), 0);
  seg_file(dir, 1, path, sizeof path);
  assert_int_equal(file_size(path), 32);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 32 + 200;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  append_range(l, 1, 10);
  assert_int_equal(hg_outlog_flush(l), -EFBIG);
  hg_outlog_stats_t st;
  hg_outlog_stats(l, &st);
  assert_int_equal(st.write_errors, 1);
  assert_int_equal(st.last_error, -EFBIG);
  assert_int_equal(st.dropped, 0);
  assert_int_equal(hg_outlog_sid_add(l, KEY, SID_B), 0); /* still staged fine */
  assert_true(hg_outlog_sid_used(l, KEY, SID_B));
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  assert_int_equal(hg_outlog_flush(l), 0);
  hg_outlog_stats(l, &st);
  assert_int_equal(st.last_error, 0);
  assert_int_equal(file_size(path), 32 + 10 * 136 + 48);
  for (uint64_t s = 1; s <= 10; s++) expect_frame(l, s);
  hg_outlog_close(l);
  l = open_log(dir, 0, 0);
  hg_outlog_stats(l, &st);
  assert_int_equal(st.corrupt, 0);
  assert_true(hg_outlog_sid_used(l, KEY, SID_B));
  hg_outlog_close(l);
  util_rm_rf(dir);
}

static void test_sid_table_full(void **state) {
  (void)state;
  char dir[64];
  assert_non_null(util_tmpdir(dir, "outlog"));
  hg_outlog_options_t o = {.max_session_ids = 1, .log = quiet};
  hg_outlog_t *l = NULL;
  assert_int_equal(hg_outlog_open(dir, &o, &l), 0);
  assert_int_equal(hg_outlog_sid_add(l, KEY, SID_A), 0);
  assert_int_equal(hg_outlog_sid_add(l, KEY, SID_B), HG_EFULL);
  assert_false(hg_outlog_sid_used(l, KEY, SID_B));
  hg_outlog_close(l);
  /* reopened: the one found plus room for one more */
  assert_int_equal(hg_outlog_open(dir, &o, &l), 0);
  assert_int_equal(hg_outlog_sid_add(l, KEY, SID_B), 0);
  hg_outlog_close(l);
  util_rm_rf(dir);
}

/* Appends the next frame of key (seq: its next). */
static void append_key(hg_outlog_t *l, uint64_t key) {
  uint8_t f[LEN];
  uint64_t seq = hg_outlog_next_seq(l, key);
  frame(seq, f);
  assert_int_equal(hg_outlog_append(l, key, seq, f, LEN), 0);
}

/* Key A logs two frames at (1, 0), B one at (1, 1), A one with no
 * position, then one at (2, 0). After a reopen the frames met again at
 * each position are exactly those; the untracked frame counts nowhere. */
static void test_positions(void **state) {
  (void)state;
  enum { A = 11, B = 12 };
  char dir[64];
  assert_non_null(util_tmpdir(dir, "outlog"));
  hg_outlog_t *l = open_log(dir, 1u << 20, 4);
  assert_int_equal(hg_outlog_key_add(l, A), 0);
  assert_int_equal(hg_outlog_key_add(l, B), 0);
  assert_false(hg_outlog_logged(l, A)); /* no position: never */
  hg_outlog_set_position(l, 1, 0);
  assert_false(hg_outlog_logged(l, A));
  append_key(l, A);
  assert_false(hg_outlog_logged(l, A)); /* a second frame at the same place is new */
  append_key(l, A);
  hg_outlog_set_position(l, 1, 1);
  append_key(l, B);
  hg_outlog_set_position(l, 0, 0);
  append_key(l, A);
  hg_outlog_set_position(l, 2, 0);
  append_key(l, A);
  hg_outlog_close(l);

  l = open_log(dir, 1u << 20, 4);
  assert_int_equal(hg_outlog_next_seq(l, A), 5);
  assert_false(hg_outlog_logged(l, A));
  hg_outlog_set_position(l, 1, 0);
  assert_true(hg_outlog_logged(l, A));
  assert_true(hg_outlog_logged(l, A));
  assert_true(hg_outlog_logged(l, B)); /* before B's last position: all logged */
  hg_outlog_set_position(l, 1, 1);
  assert_true(hg_outlog_logged(l, A)); /* before A's last position */
  assert_true(hg_outlog_logged(l, B));
  assert_false(hg_outlog_logged(l, B));
  hg_outlog_set_position(l, 2, 0);
  assert_true(hg_outlog_logged(l, A));
  assert_false(hg_outlog_logged(l, A));
  append_key(l, A); /* continues at (2, 0): now two there */
  hg_outlog_set_position(l, 3, 0);
  assert_false(hg_outlog_logged(l, A));
  assert_false(hg_outlog_logged(l, B));
  hg_outlog_close(l);

  l = open_log(dir, 1u << 20, 4);
  hg_outlog_set_position(l, 2, 0);
  assert_true(hg_outlog_logged(l, A));
  assert_true(hg_outlog_logged(l, A));
  assert_false(hg_outlog_logged(l, A));
  hg_outlog_stats_t st;
  hg_outlog_stats(l, &st);
  assert_int_equal(st.corrupt, 0);
  hg_outlog_close(l);
  util_rm_rf(dir);
}

/* One frame of a script: key, and its position (a 0: none). */
typedef struct pev {
  uint64_t key, a, b;
} pev_t;

/* Property: a random script of frames (3 keys, positions in order, 1..4
 * frames of a key at a place, some with no position) runs up to a random
 * point M, in 4 KiB segments of which 2 are kept (rolls carry positions;
 * old segments go). A reopen then replays the script from a random place
 * boundary R <= M, as a restarted node applies entries again from its
 * snapshot: a tracked frame is met as logged exactly when it is before M
 * (and is not appended again), an untracked one is not replayed before M
 * (it came from no entry). At the end every key's next seq is one past
 * its frames in the whole script, as in a run that never stopped. */
static void test_positions_property(void **state) {
  (void)state;
  enum { EVENTS = 600, KEYS = 3 };
  static pev_t ev[EVENTS];
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 40; round++) {
    size_t n = 0;
    uint64_t a = 1, b = 0;
    while (n < EVENTS) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      uint32_t r = (uint32_t)(seed >> 33);
      if (r % 5 == 0) b++;
      else if (r % 5 == 1) a++, b = 0;
      uint64_t key = 1 + (r >> 8) % KEYS;
      int untracked = (r >> 12) % 13 == 0;
      for (uint32_t f = 0; f < 1 + (r >> 16) % 4 && n < EVENTS; f++)
        ev[n++] = (pev_t){key, untracked ? 0 : a, untracked ? 0 : b};
    }
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    size_t m = (size_t)(seed >> 33) % (EVENTS + 1);
    /* R: the first tracked event at or after a random place before M whose
     * place differs from the tracked event before it (a place boundary). */
    size_t rr = m == 0 ? 0 : (size_t)(seed >> 20) % m;
    while (rr > 0 && rr < m) {
      size_t prev = rr;
      while (prev > 0 && ev[prev - 1].a == 0) prev--;
      if (ev[rr].a != 0 && (prev == 0 || ev[prev - 1].a != ev[rr].a || ev[prev - 1].b != ev[rr].b))
        break;
      rr++;
    }
    if (rr >= m) rr = 0;
    char dir[64];
    assert_non_null(util_tmpdir(dir, "outlog"));
    hg_outlog_t *l = open_log(dir, 4096, 2);
    for (uint64_t k = 1; k <= KEYS; k++) assert_int_equal(hg_outlog_key_add(l, k), 0);
    for (size_t i = 0; i < m; i++) {
      hg_outlog_set_position(l, ev[i].a, ev[i].b);
      assert_false(hg_outlog_logged(l, ev[i].key));
      append_key(l, ev[i].key);
    }
    hg_outlog_close(l);
    l = open_log(dir, 4096, 2);
    for (uint64_t k = 1; k <= KEYS; k++) assert_int_equal(hg_outlog_key_add(l, k), 0);
    for (size_t i = rr; i < EVENTS; i++) {
      if (ev[i].a == 0 && i < m) continue;
      hg_outlog_set_position(l, ev[i].a, ev[i].b);
      int logged = hg_outlog_logged(l, ev[i].key);
      if (logged != (ev[i].a != 0 && i < m))
        fail_msg("round %d: event %zu of %d (M %zu, R %zu): logged %d", round, i, EVENTS, m, rr,
                 logged);
      if (!logged) append_key(l, ev[i].key);
    }
    for (uint64_t k = 1; k <= KEYS; k++) {
      uint64_t want = 1;
      for (size_t i = 0; i < EVENTS; i++) want += ev[i].key == k;
      assert_int_equal(hg_outlog_next_seq(l, k), want);
    }
    hg_outlog_stats_t st;
    hg_outlog_stats(l, &st);
    assert_int_equal(st.corrupt, 0);
    assert_true(st.segments <= 3);
    hg_outlog_close(l);
    util_rm_rf(dir);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reopen),           cmocka_unit_test(test_retention),
      cmocka_unit_test(test_corrupt_and_torn), cmocka_unit_test(test_write_failure),
      cmocka_unit_test(test_sid_table_full),   cmocka_unit_test(test_positions),
      cmocka_unit_test(test_positions_property),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
