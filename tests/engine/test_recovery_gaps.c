/*
 * Recovery of a data directory that lost part of its journal, or whose
 * journal is damaged: the pipeline refuses to start rather than hand out an
 * acknowledged seq again (the durable mark and the snapshot floor), repair
 * cuts only a torn last batch, and the log says what is missing and what to
 * do. Each case is one procedure of ops/RUNBOOK.md ("Journal and snapshot
 * damage"): missing journal or segment, corrupt journal record, missing
 * snapshot (start from the journal alone), a torn tail after a crash, and a
 * full disk.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmdgen.h"
#include "hourglass/crc32c.h"
#include "hourglass/error.h"
#include "hourglass/journal.h"
#include "journal_internal.h"
#include "pipeline_internal.h"
#include "pipeline_util.h"

#define SEED 7u
#define N_CMDS 3000u

/* Every message of the pipeline under test; owned by the fixture. */
typedef struct fixture {
  char dir[64];
  char text[32768];
  hg_pipeline_config_t cfg;
} fixture_t;

static void capture(void *ctx, int level, const char *msg) {
  (void)level;
  fixture_t *f = ctx;
  size_t n = strlen(f->text);
  snprintf(f->text + n, sizeof f->text - n, "%s\n", msg);
}

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (f == NULL || util_tmpdir(f->dir, "gaps") == NULL) return -1;
  util_config(&f->cfg, f->dir, NULL);
  f->cfg.log = capture;
  f->cfg.log_ctx = f;
  /* several segments for N_CMDS commands */
  f->cfg.journal.segment_size = 64u * 1024u;
  f->cfg.journal.batch_bytes = 16u * 1024u;
  f->cfg.journal.max_payload = 4096;
  f->cfg.snapshot_every = 1000;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  util_rm_rf(f->dir);
  free(f);
  return 0;
}

static void drain(hg_pipeline_t *p) {
  hg_pipe_out_t out[256];
  while (hg_pipeline_poll(p, out, 256) > 0) {
  }
}

/* Opens the data directory, submits generated commands [from, to) and
 * stops cleanly (everything durable, a final snapshot). */
static void run(fixture_t *f, uint64_t from, uint64_t to) {
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  assert_int_equal(hg_pipeline_start(p), 0);
  assert_int_equal(util_run_cmdgen(p, from, to, SEED), 0);
  assert_int_equal(hg_pipeline_stop(p), 0);
  drain(p);
  hg_pipeline_close(p);
}

/* Opens, expects success at last_seq, returns the state hash. */
static void open_at(fixture_t *f, uint64_t last_seq, uint8_t hash[HG_SHA256_LEN]) {
  hg_pipeline_t *p = NULL;
  int rc = hg_pipeline_open(&f->cfg, &p);
  if (rc != 0) fprintf(stderr, "%s", f->text);
  assert_int_equal(rc, 0);
  assert_int_equal(hg_exchange_last_seq(hg_pipeline_exchange(p)), last_seq);
  if (hash != NULL) hg_pipeline_state_hash(p, hash);
  hg_pipeline_close(p);
}

static void path_of(const fixture_t *f, const char *rel, char *out, size_t len) {
  snprintf(out, len, "%s/%s", f->dir, rel);
}

/* Segment first seqs of the journal, sorted; returns how many. */
static int segments(const fixture_t *f, uint64_t *out, int max) {
  char jdir[128];
  path_of(f, "journal", jdir, sizeof jdir);
  return util_segment_firsts(jdir, out, max);
}

static void seg_path(const fixture_t *f, uint64_t first, char *out, size_t len) {
  snprintf(out, len, "%s/journal/journal-%020llu.hgj", f->dir, (unsigned long long)first);
}

/* CRC32C of every file under the data directory but LMDB's lock file, in
 * name order: equal digests mean nothing that matters changed. */
static uint32_t digest_dir(const char *dir, uint32_t c) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  assert_true(n >= 0);
  static uint8_t buf[1 << 16];
  for (int i = 0; i < n; i++) {
    const char *nm = names[i]->d_name;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, nm);
    struct stat st;
    if (nm[0] != '.' && strcmp(nm, "lock.mdb") != 0 && lstat(p, &st) == 0) {
      c = hg_crc32c(c, nm, strlen(nm) + 1);
      if (S_ISDIR(st.st_mode)) {
        c = digest_dir(p, c);
      } else {
        int fd = open(p, O_RDONLY);
        assert_true(fd >= 0);
        ssize_t r;
        while ((r = read(fd, buf, sizeof buf)) > 0) c = hg_crc32c(c, buf, (size_t)r);
        close(fd);
      }
    }
    free(names[i]);
  }
  free(names);
  return c;
}

/* Offset of the end of the records of segment path (first record first). */
static long records_end(const char *path) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  long off = HG_JOURNAL_SEGMENT_HEADER_SIZE;
  for (;;) {
    uint32_t h[3];
    assert_int_equal(fseek(fp, off, SEEK_SET), 0);
    if (fread(h, sizeof h, 1, fp) != 1 || h[0] != HG_JOURNAL_RECORD_MAGIC) break;
    off += (long)HG_JOURNAL_RECORD_SIZE(h[2]);
  }
  fclose(fp);
  return off;
}

static void write_at(const char *path, long off, const void *b, size_t n) {
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, b, n, off), (ssize_t)n);
  close(fd);
}

static void read_at(const char *path, long off, void *b, size_t n) {
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  assert_int_equal(pread(fd, b, n, off), (ssize_t)n);
  close(fd);
}

/* The refusals name the range, say nothing changed, and the journal's own
 * "journal: " prefix appears once. */
static void expect_refusal(fixture_t *f, const char *what) {
  if (strstr(f->text, what) == NULL) fprintf(stderr, "%s", f->text);
  assert_non_null(strstr(f->text, what));
  assert_non_null(strstr(f->text, "nothing was changed"));
  assert_non_null(strstr(f->text, "ops/restore"));
  assert_null(strstr(f->text, "journal: journal:"));
}

/* RUNBOOK "Journal records missing": journal/ deleted, state/ kept. Today's
 * start would begin at the snapshot's seq and reuse 1..N for new commands. */
static void whole_journal_deleted(void **state) {
  fixture_t *f = *state;
  run(f, 0, N_CMDS);
  char jdir[128], mark[128];
  path_of(f, "journal", jdir, sizeof jdir);
  path_of(f, "durable.mark", mark, sizeof mark);
  util_rm_rf(jdir);
  hg_pipeline_t *p = NULL;
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  assert_null(p);
  expect_refusal(f, "/journal holds no segment but seq 3000 was durable (durable mark ");
  assert_non_null(strstr(f->text, "records up to seq 3000 are missing"));

  /* A data directory of a version without the mark: the snapshot alone. */
  assert_int_equal(unlink(mark), 0);
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  expect_refusal(f, "holds no segment but seq 3000 was durable (durable floor given at open, the "
                    "latest snapshot's seq)");
}

/* A crash (SIGKILL) right after commands [from, to) were acknowledged: no
 * clean close rewrites the mark and no snapshot is taken, so the mark's seq
 * is older than the acknowledged commands. Runs in a child process. */
static void run_and_crash(fixture_t *f, uint64_t from, uint64_t to) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    f->cfg.snapshot_every = 0; /* only at a clean stop, which never comes */
    hg_pipeline_t *p = NULL;
    if (hg_pipeline_open(&f->cfg, &p) != 0 || hg_pipeline_start(p) != 0) _exit(2);
    if (util_run_cmdgen(p, from, to, SEED) != 0) _exit(3);
    kill(getpid(), SIGKILL);
    _exit(4);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* After a crash the mark's seq may be older than what was acknowledged, but
 * the segment it names must still be there: a journal deleted whole, or its
 * newest segment, is refused even when no snapshot and no roll-over since
 * the start vouch for the lost records. */
static void crash_then_journal_or_segment_deleted(void **state) {
  fixture_t *f = *state;
  char jdir[128], aside[128];
  path_of(f, "journal", jdir, sizeof jdir);
  path_of(f, "journal.aside", aside, sizeof aside);
  /* 1. A fresh directory, 200 acknowledged commands, no roll-over. */
  run_and_crash(f, 0, 200);
  assert_int_equal(rename(jdir, aside), 0);
  hg_pipeline_t *p = NULL;
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  expect_refusal(f, "journal-00000000000000000001.hgj is missing, but it held the newest records");
  assert_non_null(strstr(f->text, "records from seq 1 on are lost"));
  util_rm_rf(jdir);
  assert_int_equal(rename(aside, jdir), 0);
  open_at(f, 200, NULL); /* everything back; a clean start writes a new mark */

  /* 2. Several roll-overs, then the newest segment deleted after a crash. */
  run_and_crash(f, 200, N_CMDS);
  uint64_t firsts[64];
  int n = segments(f, firsts, 64);
  assert_true(n >= 3);
  char last[256], saved[256], want[160];
  seg_path(f, firsts[n - 1], last, sizeof last);
  path_of(f, "saved.hgj", saved, sizeof saved);
  assert_int_equal(rename(last, saved), 0);
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  snprintf(want, sizeof want, "records from seq %llu on are lost", (unsigned long long)firsts[n - 1]);
  expect_refusal(f, want);
  assert_int_equal(rename(saved, last), 0);
  open_at(f, N_CMDS, NULL);
}

/* A data directory of a version without the mark starts as before and gets
 * its mark at that start; a new directory starts with none to check. */
static void directory_without_mark_starts(void **state) {
  fixture_t *f = *state;
  char mark[128];
  path_of(f, "durable.mark", mark, sizeof mark);
  run(f, 0, 500);
  assert_int_equal(unlink(mark), 0);
  f->text[0] = '\0';
  open_at(f, 500, NULL);
  assert_null(strstr(f->text, "durable"));
  uint8_t b[48];
  read_at(mark, 0, b, sizeof b);
  uint64_t seq;
  memcpy(&seq, b + 8, 8);
  assert_int_equal(seq, 500);
}

/* RUNBOOK "Journal records missing": the last segment deleted while the
 * latest snapshot is older than it (as after a crash). Refused by the mark,
 * with state/ or without; with the segment back, both start-ups reach the
 * same state. */
static void last_segment_deleted(void **state) {
  fixture_t *f = *state;
  char st[128], st_old[128], st_aside[128], cmd[512];
  path_of(f, "state", st, sizeof st);
  path_of(f, "state.1000", st_old, sizeof st_old);
  path_of(f, "state.aside", st_aside, sizeof st_aside);
  run(f, 0, 1000);
  snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", st, st_old);
  assert_int_equal(system(cmd), 0);
  run(f, 1000, N_CMDS);
  util_rm_rf(st);
  assert_int_equal(rename(st_old, st), 0); /* the latest snapshot is at seq 1000 */
  uint64_t firsts[64];
  int n = segments(f, firsts, 64);
  assert_true(n >= 3);
  char last[256], saved[256];
  seg_path(f, firsts[n - 1], last, sizeof last);
  path_of(f, "saved.hgj", saved, sizeof saved);
  assert_int_equal(rename(last, saved), 0);
  char want[512];
  snprintf(want, sizeof want, "ends at seq %llu but seq 3000 was durable",
           (unsigned long long)(firsts[n - 1] - 1));
  hg_pipeline_t *p = NULL;
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  expect_refusal(f, want);
  assert_non_null(strstr(f->text, "was durable (durable mark "));
  snprintf(want, sizeof want, "records %llu..3000 are missing", (unsigned long long)firsts[n - 1]);
  assert_non_null(strstr(f->text, want));
  assert_true(firsts[n - 1] > 1000);

  /* Moving state/ aside does not help either. */
  assert_int_equal(rename(st, st_aside), 0);
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  expect_refusal(f, "was durable (durable mark ");

  /* RUNBOOK "Snapshot corrupt or missing": the journal is whole from seq 1,
   * so it alone recovers everything, to the state the snapshot had. */
  assert_int_equal(rename(saved, last), 0);
  uint8_t alone[HG_SHA256_LEN], with_snap[HG_SHA256_LEN];
  open_at(f, N_CMDS, alone);
  util_rm_rf(st);
  assert_int_equal(rename(st_aside, st), 0);
  open_at(f, N_CMDS, with_snap);
  assert_memory_equal(alone, with_snap, sizeof alone);
}

/* RUNBOOK "Corrupt journal record": a bad record far below the mark. Start
 * and repair are both refused, and the data directory stays byte-identical. */
static void corrupt_record_repair_refused(void **state) {
  fixture_t *f = *state;
  run(f, 0, N_CMDS);
  uint64_t firsts[64];
  int n = segments(f, firsts, 64);
  assert_true(n >= 3);
  char seg[256];
  seg_path(f, firsts[1], seg, sizeof seg);
  uint8_t b;
  read_at(seg, HG_JOURNAL_SEGMENT_HEADER_SIZE + HG_JOURNAL_RECORD_HEADER_SIZE, &b, 1);
  b ^= 0x20;
  write_at(seg, HG_JOURNAL_SEGMENT_HEADER_SIZE + HG_JOURNAL_RECORD_HEADER_SIZE, &b, 1);
  uint32_t before = digest_dir(f->dir, 0);
  hg_pipeline_t *p = NULL;
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  char want[512];
  snprintf(want, sizeof want, "corrupt at offset 64 (bad record CRC) after seq %llu",
           (unsigned long long)(firsts[1] - 1));
  expect_refusal(f, want);
  assert_int_equal(digest_dir(f->dir, 0), before);

  f->cfg.journal.repair = 1;
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  assert_null(p);
  /* records below the snapshot and the mark: refused before anything else */
  snprintf(want, sizeof want, "records %llu..3000 are missing or damaged",
           (unsigned long long)firsts[1]);
  expect_refusal(f, want);
  assert_null(strstr(f->text, "truncated"));
  assert_int_equal(digest_dir(f->dir, 0), before);
}

/* RUNBOOK "Torn tail after a crash": what a crash leaves of the batch in
 * flight is cut at start-up (a plain torn tail) or by repair (a later page
 * of the batch persisted after a hole), and start-up goes on from there. */
static void torn_tail_after_crash(void **state) {
  fixture_t *f = *state;
  run(f, 0, N_CMDS);
  uint64_t firsts[64];
  int n = segments(f, firsts, 64);
  char seg[256];
  seg_path(f, firsts[n - 1], seg, sizeof seg);
  long end = records_end(seg);
  /* 7 bytes of a batch's later page, 200 bytes past the end of data */
  write_at(seg, end + 200, "garbage", 7);
  f->text[0] = '\0';
  uint8_t h0[HG_SHA256_LEN], h1[HG_SHA256_LEN];
  open_at(f, N_CMDS, h0);
  char want[512];
  snprintf(want, sizeof want, "journal: %s/journal/journal-%020llu.hgj: torn write at the tail, "
           "offset %ld: 7 bytes truncated (never acknowledged); journal ends at seq 3000",
           f->dir, (unsigned long long)firsts[n - 1], end);
  if (strstr(f->text, want) == NULL) fprintf(stderr, "%s", f->text);
  assert_non_null(strstr(f->text, want));
  assert_null(strstr(f->text, "journal: journal:"));

  /* A whole record (seq 3002) after a hole where 3001 should be. */
  uint8_t rec[HG_JOURNAL_RECORD_HEADER_SIZE + 8];
  memset(rec, 0, sizeof rec);
  uint32_t magic = HG_JOURNAL_RECORD_MAGIC, len = 8;
  uint16_t version = 1;
  uint64_t seq = N_CMDS + 2, ts = 1;
  memcpy(rec, &magic, 4);
  memcpy(rec + 4, &version, 2);
  memcpy(rec + 8, &len, 4);
  memcpy(rec + 16, &seq, 8);
  memcpy(rec + 24, &ts, 8);
  memset(rec + 32, 0x5a, 8);
  uint32_t crc = hg_crc32c(hg_crc32c(hg_crc32c(0, rec, 12), rec + 16, 16), rec + 32, 8);
  memcpy(rec + 12, &crc, 4);
  write_at(seg, end + 256, rec, sizeof rec);
  hg_pipeline_t *p = NULL;
  f->text[0] = '\0';
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), HG_ECORRUPT);
  assert_non_null(strstr(f->text, "(data after the end-of-data marker) after seq 3000"));
  f->cfg.journal.repair = 1;
  f->text[0] = '\0';
  open_at(f, N_CMDS, h1);
  assert_non_null(strstr(f->text, "dropped 1 records from seq 3001 on"));
  assert_memory_equal(h0, h1, sizeof h0);
  f->cfg.journal.repair = 0;
  run(f, N_CMDS, N_CMDS + 10); /* seq 3001 goes to the next command */
  open_at(f, N_CMDS + 10, NULL);
}

/* RUNBOOK "Disk full": a journal write fails with ENOSPC; intake stops, no
 * result of an undurable command is released; after a restart (space freed)
 * the durable prefix is all there and new commands are taken again. */
static void disk_full_stops_then_restart(void **state) {
  fixture_t *f = *state;
  run(f, 0, 100);
  hg_pipeline_t *p = NULL;
  assert_int_equal(hg_pipeline_open(&f->cfg, &p), 0);
  hg_journal__inject_fault(hg_pipeline__journal(p), HG_JOURNAL_FAULT_ENOSPC);
  assert_int_equal(hg_pipeline_start(p), 0);
  int rc = 0;
  uint64_t i = 100;
  for (int tries = 0; tries < 100000; tries++) {
    hg_command_t cmd;
    cmdgen_command(i, SEED, &cmd);
    rc = hg_pipeline_submit(p, i, &cmd);
    if (rc == HG_EUNAVAIL) break;
    if (rc == 0) i++;
    else usleep(100);
    drain(p);
  }
  assert_int_equal(rc, HG_EUNAVAIL);
  assert_int_equal(hg_pipeline_failed(p), -ENOSPC);
  assert_non_null(strstr(f->text, "No space left on device"));
  assert_non_null(strstr(f->text, "intake stopped"));
  hg_pipeline_stats_t st;
  hg_pipeline_stats(p, &st);
  assert_int_equal(st.durable_seq, 100);
  assert_int_equal(hg_pipeline_stop(p), -ENOSPC);
  drain(p);
  hg_pipeline_close(p);
  open_at(f, 100, NULL);
  run(f, 100, 200);
  open_at(f, 200, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(directory_without_mark_starts, setup, teardown),
      cmocka_unit_test_setup_teardown(whole_journal_deleted, setup, teardown),
      cmocka_unit_test_setup_teardown(last_segment_deleted, setup, teardown),
      cmocka_unit_test_setup_teardown(crash_then_journal_or_segment_deleted, setup, teardown),
      cmocka_unit_test_setup_teardown(corrupt_record_repair_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(torn_tail_after_crash, setup, teardown),
      cmocka_unit_test_setup_teardown(disk_full_stops_then_restart, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
