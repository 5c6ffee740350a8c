/*
 * test_replay: hg_pipeline_replay_journal() (a feeder thread decodes while
 * the caller applies) reproduces exactly what applying the same commands
 * directly produces: the same state hash and the same event stream, also
 * when stopped at a max_seq inside a batch and resumed, and when the journal
 * holds a bad record (everything before it is applied, nothing after, and
 * the error is the reader's or the decoder's). Recovery (hg_pipeline_open,
 * which replays while the journal's recovery scan is still running) reaches
 * the same state, and keeps the scan's verdicts: a torn tail is cut with a
 * warning, a bad record elsewhere stops start-up naming file and offset,
 * and the repair option truncates there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmdgen.h"
#include "hourglass/error.h"
#include "hourglass/journal.h"
#include "journal_internal.h"
#include "pipeline_util.h"

#define N_CMDS 20000u /* a few hundred feeder batches */
#define SEED 7u

typedef struct evhash {
  uint64_t h, n;
} evhash_t;

/* FNV-1a over every event's bytes (events are built from a zeroed struct). */
static void hash_sink(void *ctx, const hg_exchange_event_t *ev) {
  evhash_t *e = ctx;
  const uint8_t *p = (const uint8_t *)ev;
  for (size_t i = 0; i < sizeof *ev; i++) e->h = (e->h ^ p[i]) * 0x100000001b3ull;
  e->n++;
}

static const hg_exchange_config_t XCFG = {
    .max_instruments = 4, .max_accounts = 64, .max_book_orders = 1u << 16};

static void command_at(uint64_t i, hg_command_t *c) {
  cmdgen_command(i, SEED, c);
  c->seq = i + 1;
  c->ts = 1800000000000000000ull + i * 1000u;
}

/* Writes commands 0..n-1 into segments of seg_size bytes (0: default);
 * command bad (if < n) is written as bytes that pass the record CRC but do
 * not decode. */
static void write_journal_seg(const char *jdir, uint64_t n, uint64_t bad, uint64_t seg_size) {
  assert_int_equal(mkdir(jdir, 0750), 0);
  hg_journal_options_t jo;
  hg_journal_options_init(&jo);
  jo.force_fallback = 1;
  if (seg_size != 0) {
    jo.segment_size = seg_size;
    jo.batch_bytes = 64u << 10;
    jo.max_payload = 8192;
  }
  hg_journal_t *j = NULL;
  assert_int_equal(hg_journal_open(jdir, &jo, &j), 0);
  uint8_t buf[HG_COMMAND_MAX_ENCODED];
  for (uint64_t i = 0; i < n; i++) {
    hg_command_t c;
    command_at(i, &c);
    size_t len;
    assert_int_equal(hg_command_encode(&c, buf, sizeof buf, &len), 0);
    if (i == bad) {
      buf[0] = 0xff; /* field 31, wire type 7: not protobuf */
      len = 3;
    }
    int rc;
    while ((rc = hg_journal_append(j, c.seq, c.ts, buf, (uint32_t)len)) == HG_EBUSY) {
      assert_int_equal(hg_journal_commit(j), 0);
      assert_int_equal(hg_journal_poll(j, -1), 0);
    }
    assert_int_equal(rc, 0);
  }
  assert_int_equal(hg_journal_close(j), 0);
}

static void write_journal(const char *jdir, uint64_t n, uint64_t bad) {
  write_journal_seg(jdir, n, bad, 0);
}

/* The reference: commands 0..n-1 applied directly, in order. */
static void direct(uint64_t n, uint8_t hash[HG_SHA256_LEN], evhash_t *ev) {
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&XCFG, hash_sink, ev, &ex), 0);
  for (uint64_t i = 0; i < n; i++) {
    hg_command_t c;
    command_at(i, &c);
    assert_int_equal(hg_exchange_apply(ex, &c), 0);
  }
  hg_exchange_hash(ex, hash);
  hg_exchange_destroy(ex);
}

static void test_replay_equals_direct_apply(void **state) {
  (void)state;
  char dir[64], jdir[128];
  assert_non_null(util_tmpdir(dir, "replay"));
  snprintf(jdir, sizeof jdir, "%s/journal", dir);
  write_journal(jdir, N_CMDS, UINT64_MAX);

  uint8_t want[HG_SHA256_LEN], got[HG_SHA256_LEN];
  evhash_t ew = {0xcbf29ce484222325ull, 0}, eg = {0xcbf29ce484222325ull, 0};
  direct(N_CMDS, want, &ew);

  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&XCFG, hash_sink, &eg, &ex), 0);
  uint64_t last = 0;
  /* Stop inside a feeder batch, then resume from there: 1000 % 64 != 0. */
  assert_int_equal(hg_pipeline_replay_journal(jdir, ex, 1000, &last), 0);
  assert_int_equal(last, 1000);
  assert_int_equal(hg_pipeline_replay_journal(jdir, ex, UINT64_MAX, &last), 0);
  assert_int_equal(last, N_CMDS);
  /* Nothing left: a second full replay applies nothing. */
  assert_int_equal(hg_pipeline_replay_journal(jdir, ex, UINT64_MAX, &last), 0);
  assert_int_equal(last, N_CMDS);
  hg_exchange_hash(ex, got);
  hg_exchange_destroy(ex);
  assert_memory_equal(got, want, sizeof want);
  assert_int_equal(eg.n, ew.n);
  assert_true(eg.h == ew.h);
  assert_true(ew.n > N_CMDS); /* the stream did trade */
  util_rm_rf(dir);
}

/* Flips one payload byte of the record of seq in the segment file seg
 * whose first record is first. */
static void flip_record(const char *seg, uint64_t first, uint64_t seq) {
  FILE *fp = fopen(seg, "r+b");
  assert_non_null(fp);
  uint64_t off = HG_JOURNAL_SEGMENT_HEADER_SIZE;
  for (uint64_t s = first; s < seq; s++) {
    uint32_t len;
    assert_int_equal(fseek(fp, (long)(off + 8), SEEK_SET), 0);
    assert_int_equal(fread(&len, sizeof len, 1, fp), 1);
    off += HG_JOURNAL_RECORD_SIZE(len);
  }
  uint8_t b;
  assert_int_equal(fseek(fp, (long)(off + HG_JOURNAL_RECORD_HEADER_SIZE + 1), SEEK_SET), 0);
  assert_int_equal(fread(&b, 1, 1, fp), 1);
  b ^= 0x40;
  assert_int_equal(fseek(fp, (long)(off + HG_JOURNAL_RECORD_HEADER_SIZE + 1), SEEK_SET), 0);
  assert_int_equal(fwrite(&b, 1, 1, fp), 1);
  assert_int_equal(fclose(fp), 0);
}

/* Replays the journal in jdir from empty and expects it to stop with rc
 * after seq `upto`, in the state (and having emitted the events) of
 * applying the first `upto` commands directly. */
static void expect_replay_stops(const char *jdir, uint64_t upto, int rc) {
  uint8_t want[HG_SHA256_LEN], got[HG_SHA256_LEN];
  evhash_t ew = {0xcbf29ce484222325ull, 0}, eg = {0xcbf29ce484222325ull, 0};
  direct(upto, want, &ew);
  hg_exchange_t *ex = NULL;
  assert_int_equal(hg_exchange_create(&XCFG, hash_sink, &eg, &ex), 0);
  uint64_t last = 0;
  assert_int_equal(hg_pipeline_replay_journal(jdir, ex, UINT64_MAX, &last), rc);
  assert_int_equal(last, upto);
  hg_exchange_hash(ex, got);
  hg_exchange_destroy(ex);
  assert_memory_equal(got, want, sizeof want);
  assert_true(eg.h == ew.h);
}

/* A record that passes its CRC but does not decode: the replay stops right
 * before it with the decoder's error and the state of the commands before. */
static void test_replay_stops_at_undecodable_record(void **state) {
  (void)state;
  char dir[64], jdir[128];
  assert_non_null(util_tmpdir(dir, "replay"));
  snprintf(jdir, sizeof jdir, "%s/journal", dir);
  const uint64_t bad = 5000; /* seq 5001 */
  write_journal(jdir, 6000, bad);
  expect_replay_stops(jdir, bad, HG_EPARSE);
  util_rm_rf(dir);
}

/* A record whose bytes changed after it was written (bad CRC): the reader's
 * HG_ECORRUPT, with every record before it applied. */
static void test_replay_stops_at_corrupt_record(void **state) {
  (void)state;
  char dir[64], jdir[128], seg[256];
  assert_non_null(util_tmpdir(dir, "replay"));
  snprintf(jdir, sizeof jdir, "%s/journal", dir);
  write_journal(jdir, 6000, UINT64_MAX);
  snprintf(seg, sizeof seg, "%s/journal-%020u.hgj", jdir, 1u);
  flip_record(seg, 1, 3001);
  expect_replay_stops(jdir, 3000, HG_ECORRUPT);
  util_rm_rf(dir);
}

/* Every message of a pipeline, one per line. */
typedef struct loglines {
  char text[8192];
  size_t len;
  int warns, errors;
} loglines_t;

static void lines_fn(void *ctx, int level, const char *msg) {
  loglines_t *l = ctx;
  if (level == HG_LOG_WARN) l->warns++;
  if (level >= HG_LOG_ERROR) l->errors++;
  int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%s\n", msg);
  if (n > 0 && (size_t)n < sizeof l->text - l->len) l->len += (size_t)n;
}

#define REC_CMDS 30000u /* several progress reports and segments */
#define REC_SEG (256u << 10)

/* Opens a pipeline on dir (no snapshot): its result, and on success the
 * state hash and the records replayed. */
static int open_pipeline(const char *dir, int repair, loglines_t *log,
                         uint8_t hash[HG_SHA256_LEN], uint64_t *replayed) {
  hg_pipeline_config_t cfg;
  util_log_t unused;
  util_config(&cfg, dir, &unused);
  cfg.log = lines_fn;
  cfg.log_ctx = log;
  cfg.journal.repair = repair;
  cfg.journal.force_fallback = 1;
  cfg.journal.segment_size = REC_SEG;
  cfg.journal.batch_bytes = 64u << 10;
  cfg.journal.max_payload = 8192;
  hg_pipeline_t *p = NULL;
  int rc = hg_pipeline_open(&cfg, &p);
  if (rc != 0) return rc;
  hg_pipeline_state_hash(p, hash);
  hg_pipeline_stats_t st;
  hg_pipeline_stats(p, &st);
  *replayed = st.replayed;
  hg_pipeline_close(p);
  return 0;
}

static void make_recovery_dir(char dir[64], char jdir[128], uint64_t bad) {
  assert_non_null(util_tmpdir(dir, "recover"));
  snprintf(jdir, 128, "%s/journal", dir);
  write_journal_seg(jdir, REC_CMDS, bad, REC_SEG);
}

/* Segment file holding seq: the one with the largest first seq <= seq. */
static void segment_of(const char *jdir, uint64_t seq, char *out, size_t cap, uint64_t *first) {
  *first = 0;
  for (uint64_t f = seq; f >= 1 && *first == 0; f--) {
    char path[256];
    snprintf(path, sizeof path, "%s/journal-%020llu.hgj", jdir, (unsigned long long)f);
    struct stat st;
    if (stat(path, &st) == 0) {
      snprintf(out, cap, "%s", path);
      *first = f;
    }
  }
  assert_true(*first != 0);
}

/* Recovers dir (journal of commands 0..n-1, no snapshot): the state of
 * applying them directly, every one replayed, no warning or error. */
static void expect_recovery_equals_direct(const char *dir, uint64_t n) {
  uint8_t want[HG_SHA256_LEN], got[HG_SHA256_LEN];
  evhash_t ew = {0xcbf29ce484222325ull, 0};
  direct(n, want, &ew);
  loglines_t log = {0};
  uint64_t replayed = 0;
  assert_int_equal(open_pipeline(dir, 0, &log, got, &replayed), 0);
  assert_int_equal(replayed, n);
  assert_memory_equal(got, want, sizeof want);
  assert_int_equal(log.warns + log.errors, 0);
}

static void test_recovery_equals_direct_apply(void **state) {
  (void)state;
  char dir[64], jdir[128];
  make_recovery_dir(dir, jdir, UINT64_MAX);
  char seg[256];
  uint64_t first;
  segment_of(jdir, REC_CMDS, seg, sizeof seg, &first);
  assert_true(first > 1); /* the journal spans several segments */
  expect_recovery_equals_direct(dir, REC_CMDS);
  util_rm_rf(dir);
}

/* A journal of whole batches (a multiple of the feed's 64 commands) long
 * enough to wrap the feed's ring (64 batches) twice: the last batch the
 * scan publishes is empty and must not carry a previous round's commands. */
static void test_recovery_of_whole_batches(void **state) {
  (void)state;
  const uint64_t n = 64u * 160u;
  char dir[64], jdir[128];
  assert_non_null(util_tmpdir(dir, "recover"));
  snprintf(jdir, sizeof jdir, "%s/journal", dir);
  write_journal_seg(jdir, n, UINT64_MAX, REC_SEG);
  expect_recovery_equals_direct(dir, n);
  util_rm_rf(dir);
}

/* The last record is damaged and nothing valid follows: a torn tail. It is
 * cut with a warning and recovery ends one record earlier. */
static void test_recovery_cuts_torn_tail(void **state) {
  (void)state;
  char dir[64], jdir[128], seg[256];
  make_recovery_dir(dir, jdir, UINT64_MAX);
  uint64_t first;
  segment_of(jdir, REC_CMDS, seg, sizeof seg, &first);
  flip_record(seg, first, REC_CMDS);
  uint8_t want[HG_SHA256_LEN], got[HG_SHA256_LEN];
  evhash_t ew = {0xcbf29ce484222325ull, 0};
  direct(REC_CMDS - 1, want, &ew);
  loglines_t log = {0};
  uint64_t replayed = 0;
  assert_int_equal(open_pipeline(dir, 0, &log, got, &replayed), 0);
  assert_int_equal(replayed, REC_CMDS - 1);
  assert_memory_equal(got, want, sizeof want);
  assert_int_equal(log.warns, 1);
  assert_non_null(strstr(log.text, "torn record at the tail"));
  util_rm_rf(dir);
}

/* A bad record in the middle stops start-up, naming file and offset, even
 * though the replay had applied the records before it meanwhile. The repair
 * option refuses it too: thousands of durable records follow it, so it is
 * not a torn last batch, and cutting there would lose them. */
static void test_recovery_stops_at_corrupt_record_repair_refuses(void **state) {
  (void)state;
  char dir[64], jdir[128], seg[256];
  make_recovery_dir(dir, jdir, UINT64_MAX);
  const uint64_t bad_seq = 12001;
  uint64_t first;
  segment_of(jdir, bad_seq, seg, sizeof seg, &first);
  flip_record(seg, first, bad_seq);
  loglines_t log = {0};
  uint8_t got[HG_SHA256_LEN];
  uint64_t replayed = 0;
  assert_int_equal(open_pipeline(dir, 0, &log, got, &replayed), HG_ECORRUPT);
  const char *name = strrchr(seg, '/') + 1;
  assert_non_null(strstr(log.text, name));
  assert_non_null(strstr(log.text, "corrupt at offset"));
  assert_non_null(strstr(log.text, "bad record CRC"));
  assert_non_null(strstr(log.text, "after seq 12000"));
  assert_null(strstr(log.text, "recovery failed"));

  memset(&log, 0, sizeof log);
  assert_int_equal(open_pipeline(dir, 1, &log, got, &replayed), HG_ECORRUPT);
  assert_non_null(strstr(log.text, "repair refused"));
  assert_non_null(strstr(log.text, "nothing was changed"));
  assert_null(strstr(log.text, "repair: truncated"));
  /* still there, still refused */
  memset(&log, 0, sizeof log);
  assert_int_equal(open_pipeline(dir, 0, &log, got, &replayed), HG_ECORRUPT);
  assert_non_null(strstr(log.text, "after seq 12000"));
  util_rm_rf(dir);
}

/* A record that passes the scan but does not decode: the scan succeeds, the
 * replay stops there and start-up fails with the decoder's error. */
static void test_recovery_stops_at_undecodable_record(void **state) {
  (void)state;
  char dir[64], jdir[128];
  make_recovery_dir(dir, jdir, 20000);
  loglines_t log = {0};
  uint8_t got[HG_SHA256_LEN];
  uint64_t replayed = 0;
  assert_int_equal(open_pipeline(dir, 0, &log, got, &replayed), HG_EPARSE);
  assert_non_null(strstr(log.text, "recovery failed: journal record seq 20001 does not decode"));
  util_rm_rf(dir);
}


/* A journal whose first segment is gone starts after what the (empty)
 * state covers: the scan accepts it as a journal, but recovery must not
 * skip the missing commands; start-up stops naming the first one. */
static void test_recovery_stops_at_missing_start(void **state) {
  (void)state;
  char dir[64], jdir[128], seg[256];
  make_recovery_dir(dir, jdir, UINT64_MAX);
  uint64_t first;
  segment_of(jdir, 1, seg, sizeof seg, &first);
  assert_int_equal(first, 1);
  assert_int_equal(unlink(seg), 0);
  loglines_t log = {0};
  uint8_t got[HG_SHA256_LEN];
  uint64_t replayed = 0;
  assert_int_equal(open_pipeline(dir, 0, &log, got, &replayed), HG_ECORRUPT);
  assert_non_null(strstr(log.text, "recovery failed: cannot read journal"));
  assert_non_null(strstr(log.text, "from seq 1:"));
  util_rm_rf(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replay_equals_direct_apply),
      cmocka_unit_test(test_replay_stops_at_undecodable_record),
      cmocka_unit_test(test_replay_stops_at_corrupt_record),
      cmocka_unit_test(test_recovery_equals_direct_apply),
      cmocka_unit_test(test_recovery_of_whole_batches),
      cmocka_unit_test(test_recovery_cuts_torn_tail),
      cmocka_unit_test(test_recovery_stops_at_corrupt_record_repair_refuses),
      cmocka_unit_test(test_recovery_stops_at_undecodable_record),
      cmocka_unit_test(test_recovery_stops_at_missing_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
