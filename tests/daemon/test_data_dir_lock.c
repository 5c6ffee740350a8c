/* The data directory lock and the read-only tools, against a live daemon.
 *
 * tools_beside_a_live_daemon: a daemon trades (the synthetic generator) on a
 * data directory with 1 MiB journal segments; while it is paused, every
 * offline tool runs against its directory: the read-only ones (--state-hash,
 * --state-hash --upto, the three --backup-* modes, hgctl replay and
 * statement) succeed and leave journal/, the stores' data files and LOCK
 * exactly as they were (names, sizes, inodes, mtimes); the writing ones
 * (--state-hash --repair, a second daemon) are refused with exit 4, naming
 * the directory and the daemon's pid. Then the daemon trades across two
 * segment roll-overs with /health 200, a healthy journal and every command
 * released.
 *
 * full_disk_names_the_disk: a restart (and a first start) on a full
 * filesystem says that the disk holding the data directory is full, not
 * that the keys file is bad. Needs a small tmpfs, so root; skipped
 * otherwise.
 *
 * Usage: test_data_dir_lock <hourglassd> <hgctl>. */
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
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>
#include <sys/mount.h>

#include "daemon_util.h"

static const char *g_bin; /* hourglassd, from argv[1] */

static const char *g_hgctl;

typedef struct run {
  char dir[512], data[600], log[600], conf[600], opt_data[700], out[600];
  pid_t pid;
  int port;
  char *before; /* listing() the tools must leave as it is; NULL: none */
} run_t;

static char *listing(const char *data);

static void start(run_t *r) {
  char *argv[] = {(char *)g_bin, "-c", r->conf, "-o", r->opt_data, "-o", "listen.http=127.0.0.1:0",
                  "-o", "listen.order_entry=127.0.0.1:0",
                  "-o", "snapshot.interval=3000", DU_SMALL_OPTS, NULL};
  remove(r->log);
  r->pid = du_spawn(argv, r->log);
  char *log = du_wait_log(r->log, "msg=\"ready\"", 120);
  if (log == NULL) fail_msg("daemon not ready after 120 s");
  r->port = du_listen_port(log, "http");
  assert_true(r->port > 0);
  free(log);
}

/* Sets the generator's rate through the config file and SIGHUP; waits
 * until the daemon has applied reload number `nth`. */
static void set_rate(run_t *r, unsigned rate, uint64_t nth) {
  char text[128];
  snprintf(text, sizeof text, "log.level = info\nsynthetic.orders_per_sec = %u\n", rate);
  assert_int_equal(du_write_file(r->conf, text), 0);
  kill(r->pid, SIGHUP);
  double end = du_now() + 60;
  while (du_metric(r->port, "hourglass_config_reloads_total") != nth && du_now() < end)
    du_sleep_ms(20);
  assert_int_equal(du_metric(r->port, "hourglass_config_reloads_total"), nth);
}

/* Waits until nothing moves: last_seq unchanged for 500 ms and everything
 * durable and released. Returns last_seq. */
static uint64_t quiesce(run_t *r) {
  double end = du_now() + 60;
  uint64_t prev = UINT64_MAX;
  for (;;) {
    uint64_t last = du_metric(r->port, "hourglass_last_seq");
    if (last == prev && du_metric(r->port, "hourglass_durable_seq") == last &&
        du_metric(r->port, "hourglass_released_seq") == last)
      return last;
    if (du_now() > end) fail_msg("the daemon did not settle");
    prev = last;
    du_sleep_ms(500);
  }
}

/* One line per file: name, size, inode and mtime in ns. */
static void describe(const char *path, const char *name, FILE *out) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(out, "%s missing\n", name);
    return;
  }
  fprintf(out, "%s size=%lld ino=%llu mtime=%lld.%09ld\n", name, (long long)st.st_size,
          (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* What a tool must not change: every file in journal/, the two stores'
 * data files and LOCK. Returns a malloc'd listing. */
static char *listing(const char *data) {
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  char path[1024];
  snprintf(path, sizeof path, "%s/journal", data);
  struct dirent **ents;
  int n = scandir(path, &ents, NULL, by_name);
  assert_true(n > 2);
  for (int i = 0; i < n; i++) {
    if (ents[i]->d_name[0] != '.') {
      snprintf(path, sizeof path, "%s/journal/%s", data, ents[i]->d_name);
      describe(path, ents[i]->d_name, out);
    }
    free(ents[i]);
  }
  free(ents);
  const char *more[] = {"state/data.mdb", "keys/data.mdb", "LOCK"};
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", data, more[i]);
    describe(path, more[i], out);
  }
  fclose(out);
  return buf;
}

/* Journal segments in data/journal (the spare not counted), and the first
 * seq of the newest. */
static int segments(const char *data, uint64_t *newest_first) {
  char path[1024];
  snprintf(path, sizeof path, "%s/journal", data);
  DIR *d = opendir(path);
  assert_non_null(d);
  int n = 0;
  *newest_first = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    unsigned long long first;
    if (sscanf(e->d_name, "journal-%20llu.hgj", &first) != 1) continue;
    n++;
    if (first > *newest_first) *newest_first = first;
  }
  closedir(d);
  return n;
}

/* Runs a shell command with its stdout and stderr into r->out; fails the
 * test with the output unless it exits with want. Returns the output
 * (malloc'd). */
static char *expect_exit(run_t *r, const char *args, int want) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "%s >%s 2>&1", args, r->out);
  int st = du_system(cmd);
  char *text = du_read(r->out);
  if (st != want) fail_msg("exit %d, not %d: %s\n%s", st, want, args, text);
  if (r->before != NULL) {
    char *now = listing(r->data);
    if (strcmp(now, r->before) != 0)
      fail_msg("%s\nchanged the daemon's files:\nbefore:\n%safter:\n%s", args, r->before, now);
    free(now);
  }
  return text;
}

/* Copies the word after the first `want` in text into out. 0 or -1. */
static int after_text(const char *text, const char *want, char *out, size_t cap) {
  const char *p = strstr(text, want);
  if (p == NULL) return -1;
  p += strlen(want);
  size_t n = strcspn(p, " \n");
  if (n == 0 || n >= cap) return -1;
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

static void tools_beside_a_live_daemon(void **state) {
  (void)state;
  run_t r = {0};
  assert_non_null(du_tmpdir(r.dir, sizeof r.dir, "dirlock"));
  snprintf(r.data, sizeof r.data, "%s/var", r.dir);
  snprintf(r.log, sizeof r.log, "%s/d.log", r.dir);
  snprintf(r.conf, sizeof r.conf, "%s/h.conf", r.dir);
  snprintf(r.out, sizeof r.out, "%s/tool.out", r.dir);
  snprintf(r.opt_data, sizeof r.opt_data, "data_dir=%s", r.data);
  /* No mark timer: a MARK journaled a second after the last order would
   * change the daemon's files under the tools this test watches. */
  assert_int_equal(du_write_file(r.conf, "log.level = info\nsynthetic.orders_per_sec = 4000\n"
                                         "clearing.mark_interval_ms = 0\n"),
                   0);
  start(&r);

  /* Trade past a snapshot, so the read-only recovery starts from one. */
  double end = du_now() + 120;
  while ((du_metric(r.port, "hourglass_snapshots_total") < 1 ||
          du_metric(r.port, "hourglass_last_seq") < 4000) &&
         du_now() < end)
    du_sleep_ms(50);
  assert_true(du_metric(r.port, "hourglass_snapshots_total") >= 1);
  set_rate(&r, 0, 1);
  uint64_t last = quiesce(&r);
  r.before = listing(r.data);
  assert_non_null(strstr(r.before, "journal-spare.tmp"));

  char cmd[4096], want[128], *out;
  /* The tools run with the daemon's configuration, as an operator's -c does. */
  char b[1024];
  snprintf(b, sizeof b,
           "%s -o limits.max_book_orders=65536 -o limits.max_instruments=8 "
           "-o limits.max_accounts=64 -o journal.segment_size=1M -o journal.batch_bytes=256K",
           g_bin);
  /* Read-only: the state the daemon is at, computed beside it. */
  snprintf(cmd, sizeof cmd, "%s -o data_dir=%s --state-hash", b, r.data);
  out = expect_exit(&r, cmd, 0);
  snprintf(want, sizeof want, "last_seq=%llu state_hash=", (unsigned long long)last);
  char hash[65];
  if (after_text(out, want, hash, sizeof hash) != 0) fail_msg("--state-hash: %s", out);
  free(out);
  snprintf(cmd, sizeof cmd, "%s -o data_dir=%s --state-hash --upto %llu", b, r.data,
           (unsigned long long)last);
  out = expect_exit(&r, cmd, 0);
  if (strstr(out, hash) == NULL) fail_msg("--state-hash --upto: %s (want %s)", out, hash);
  free(out);

  /* Writers are refused, naming the directory and the daemon's pid. */
  char pidf[64];
  snprintf(pidf, sizeof pidf, "pid=%d ", (int)r.pid);
  snprintf(cmd, sizeof cmd, "%s -o data_dir=%s --state-hash --repair", b, r.data);
  out = expect_exit(&r, cmd, 4);
  assert_non_null(strstr(out, "data directory in use by a running hourglassd"));
  assert_non_null(strstr(out, pidf));
  assert_non_null(strstr(out, r.data));
  assert_null(strstr(out, "last_seq="));
  free(out);
  snprintf(cmd, sizeof cmd,
           "%s -c %s -o data_dir=%s -o listen.http=127.0.0.1:0 -o listen.order_entry=127.0.0.1:0",
           b, r.conf, r.data);
  out = expect_exit(&r, cmd, 4);
  assert_non_null(strstr(out, "data directory in use by a running hourglassd"));
  assert_non_null(strstr(out, pidf));
  assert_null(strstr(out, "msg=\"listening\""));
  free(out);

  /* The backups and hgctl's replay and statement, all from the live one. */
  char bk[700];
  snprintf(bk, sizeof bk, "%s/backup", r.dir);
  assert_int_equal(mkdir(bk, 0750), 0);
  const char *modes[][2] = {{"--backup-state", "state"}, {"--backup-keys", "keys"}};
  for (size_t i = 0; i < 2; i++) {
    snprintf(cmd, sizeof cmd, "%s -o data_dir=%s %s %s/%s", b, r.data, modes[i][0], bk,
             modes[i][1]);
    char sub[800];
    snprintf(sub, sizeof sub, "%s/%s", bk, modes[i][1]);
    assert_int_equal(mkdir(sub, 0750), 0);
    out = expect_exit(&r, cmd, 0);
    free(out);
  }
  char jbk[800];
  snprintf(jbk, sizeof jbk, "%s/journal", bk);
  assert_int_equal(mkdir(jbk, 0750), 0);
  snprintf(cmd, sizeof cmd, "%s -o data_dir=%s --backup-journal %s/journal --max-seq %llu", b,
           r.data, bk, (unsigned long long)last);
  out = expect_exit(&r, cmd, 0);
  free(out);
  const char *caps = "--max-instruments 8 --max-accounts 64 --max-book-orders 65536";
  snprintf(cmd, sizeof cmd, "%s replay --data %s %s", g_hgctl, r.data, caps);
  out = expect_exit(&r, cmd, 0);
  snprintf(want, sizeof want, "end seq=%llu ", (unsigned long long)last);
  if (strstr(out, want) == NULL || strstr(out, hash) == NULL) fail_msg("hgctl replay: %s", out);
  free(out);
  snprintf(cmd, sizeof cmd, "%s statement --data %s --account 1 %s", g_hgctl, r.data, caps);
  out = expect_exit(&r, cmd, 0);
  free(out);

  /* Each tool above left the daemon's files as they were (expect_exit). */
  free(r.before);
  r.before = NULL;
  /* The backup is the state the daemon is at. */
  snprintf(cmd, sizeof cmd, "%s -o data_dir=%s --state-hash", b, bk);
  out = expect_exit(&r, cmd, 0);
  if (strstr(out, hash) == NULL) fail_msg("--state-hash of the backup: %s", out);
  free(out);

  /* Trading goes on across two segment roll-overs. */
  uint64_t newest;
  int segs0 = segments(r.data, &newest);
  set_rate(&r, 4000, 2);
  end = du_now() + 240;
  for (;;) {
    char *h = du_get(r.port, "/health");
    if (du_status(h) != 200) fail_msg("/health while trading: %s", h);
    free(h);
    assert_int_equal(du_metric(r.port, "hourglass_journal_failed"), 0);
    if (segments(r.data, &newest) >= segs0 + 2) break;
    if (du_now() > end) fail_msg("no two roll-overs in 240 s");
    du_sleep_ms(100);
  }
  /* Past the second roll-over: commands in the newest segment are durable
   * and their results released. */
  end = du_now() + 60;
  while (du_metric(r.port, "hourglass_released_seq") <= newest && du_now() < end) du_sleep_ms(50);
  assert_true(du_metric(r.port, "hourglass_released_seq") > newest);
  set_rate(&r, 0, 3);
  uint64_t last2 = quiesce(&r);
  assert_true(last2 > newest);
  char *hh = du_get(r.port, "/health");
  assert_int_equal(du_status(hh), 200);
  free(hh);
  assert_int_equal(du_metric(r.port, "hourglass_journal_failed"), 0);
  assert_int_equal(du_stop(r.pid, SIGTERM, 120), 0);
  char *log = du_read(r.log);
  assert_null(strstr(log, "roll-over"));
  assert_null(strstr(log, "journal failed"));
  char seq[32];
  assert_int_equal(du_field(log, "msg=\"stopped\"", "last_seq", seq, sizeof seq), 0);
  assert_int_equal(strtoull(seq, NULL, 10), last2);
  free(log);

  /* Stopped: the lock is free again (the file stays) and --repair runs. */
  snprintf(cmd, sizeof cmd, "%s -o data_dir=%s --state-hash --repair", b, r.data);
  out = expect_exit(&r, cmd, 0);
  snprintf(want, sizeof want, "last_seq=%llu ", (unsigned long long)last2);
  if (strstr(out, want) == NULL) fail_msg("--state-hash --repair after stop: %s", out);
  free(out);
  du_rm_rf(r.dir);
}

/* --------------------------------------------------------- full disk */

static char g_mnt[600]; /* mounted tmpfs, for the teardown */

static int unmount_all(void **state) {
  du_kill_all(state);
  if (g_mnt[0] != '\0') umount2(g_mnt, MNT_DETACH);
  g_mnt[0] = '\0';
  return 0;
}

/* Fills the filesystem holding dir: a file of zeros until ENOSPC. */
static void fill(const char *dir) {
  char path[700];
  snprintf(path, sizeof path, "%s/fill", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  assert_true(fd >= 0);
  static char zeros[4096];
  while (write(fd, zeros, sizeof zeros) > 0) {
  }
  assert_int_equal(errno, ENOSPC);
  close(fd);
}

static void full_disk_names_the_disk(void **state) {
  (void)state;
  run_t r = {0};
  assert_non_null(du_tmpdir(r.dir, sizeof r.dir, "fulldisk"));
  snprintf(g_mnt, sizeof g_mnt, "%s/mnt", r.dir);
  assert_int_equal(mkdir(g_mnt, 0750), 0);
  if (mount("tmpfs", g_mnt, "tmpfs", 0, "size=12m") != 0) {
    g_mnt[0] = '\0';
    du_rm_rf(r.dir);
    skip(); /* not root: no small filesystem to fill */
  }
  assert_true(snprintf(r.data, sizeof r.data, "%s/var", g_mnt) < (int)sizeof r.data);
  snprintf(r.log, sizeof r.log, "%s/d.log", r.dir);
  snprintf(r.conf, sizeof r.conf, "%s/h.conf", r.dir);
  snprintf(r.opt_data, sizeof r.opt_data, "data_dir=%s", r.data);
  char keys[700], text[800];
  snprintf(keys, sizeof keys, "%s/keys.txt", r.dir);
  snprintf(text, sizeof text, "7 trader 1 1 %064x\n", 5);
  assert_int_equal(du_write_file(keys, text), 0);
  snprintf(text, sizeof text, "log.level = info\ngateway.keys_file = %s\n", keys);
  assert_int_equal(du_write_file(r.conf, text), 0);
  char *argv[] = {(char *)g_bin, "-c", r.conf, "-o", r.opt_data, "-o", "listen.http=127.0.0.1:0",
                  "-o", "listen.order_entry=127.0.0.1:0",
                  "-o", "gateway.outlog_segment_size=64K", DU_SMALL_OPTS, NULL};
  /* A data directory that has run once, on a disk that has filled since. */
  r.pid = du_spawn(argv, r.log);
  char *log = du_wait_log(r.log, "msg=\"ready\"", 120);
  assert_non_null(log);
  free(log);
  assert_int_equal(du_stop(r.pid, SIGTERM, 60), 0);
  fill(g_mnt);
  remove(r.log);
  assert_int_equal(du_stop(du_spawn(argv, r.log), 0, 60), 1);
  log = du_read(r.log);
  char want[800];
  int wn = snprintf(want, sizeof want,
                    "msg=\"no space left on the disk holding the data directory\" data_dir=%s "
                    "mount=%s ",
                    r.data, g_mnt);
  assert_true(wn < (int)sizeof want);
  if (strstr(log, want) == NULL) fail_msg("restart on a full disk: %s", log);
  assert_null(strstr(log, "cannot load keys"));
  free(log);

  /* A first start on a full disk: the same message, and no crash. */
  char path[700];
  snprintf(path, sizeof path, "%s/fill", g_mnt);
  remove(path);
  du_rm_rf(r.data);
  fill(g_mnt);
  remove(r.log);
  assert_int_equal(du_stop(du_spawn(argv, r.log), 0, 60), 1);
  log = du_read(r.log);
  if (strstr(log, want) == NULL) fail_msg("first start on a full disk: %s", log);
  free(log);
  umount2(g_mnt, MNT_DETACH);
  g_mnt[0] = '\0';
  du_rm_rf(r.dir);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <hourglassd> <hgctl>\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  g_hgctl = argv[2];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(tools_beside_a_live_daemon, du_kill_all),
      cmocka_unit_test_teardown(full_disk_names_the_disk, unmount_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
