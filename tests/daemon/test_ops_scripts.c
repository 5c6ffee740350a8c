/* ops/deploy and ops/backup + ops/restore, driven as an operator would,
 * with temporary prefixes and data directories and loopback ports only.
 * Usage: test_ops_scripts <hourglassd> deploy|backup (two CTest entries, so
 * that they run in parallel). */
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

#include "daemon_util.h"

static const char *g_bin; /* hourglassd, from argv[1] */

#define OPS HG_SOURCE_DIR "/ops"

/* The pid file of the daemon ops/deploy started (not our child). */
static char g_pidfile[700];

static int kill_deployed(void **state) {
  (void)state;
  char *pid = du_read(g_pidfile);
  pid_t p = (pid_t)atoi(pid);
  free(pid);
  if (p > 0 && kill(p, 0) == 0) kill(p, SIGKILL);
  return 0;
}

static void write_exec(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  chmod(path, 0755);
}

static void current_is(const char *prefix, const char *want) {
  char link[700], target[256];
  snprintf(link, sizeof link, "%s/current", prefix);
  ssize_t n = readlink(link, target, sizeof target - 1);
  assert_true(n > 0);
  target[n] = '\0';
  assert_string_equal(target, want);
}

static void deploy_rolls_back_a_version_that_fails_its_health_check(void **state) {
  (void)state;
  char dir[512], prefix[600], conf[600], bad[600], hang[600], cmd[4096], url[128];
  assert_non_null(du_tmpdir(dir, sizeof dir, "deploy"));
  snprintf(prefix, sizeof prefix, "%s/opt", dir);
  snprintf(conf, sizeof conf, "%s/h.conf", dir);
  snprintf(bad, sizeof bad, "%s/bad", dir);
  snprintf(hang, sizeof hang, "%s/hang", dir);
  int port = du_free_port();
  snprintf(url, sizeof url, "http://127.0.0.1:%d/health", port);
  FILE *f = fopen(conf, "w");
  fprintf(f,
          "data_dir = %s/var\nlisten.http = 127.0.0.1:%d\nlisten.order_entry = 127.0.0.1:0\n"
          "pipeline.inbound_capacity = 4096\n"
          "pipeline.outbound_capacity = 16384\npipeline.staging_capacity = 16384\n"
          "journal.segment_size = 1M\njournal.batch_bytes = 256K\n",
          dir, port);
  fclose(f);
  /* A version that dies at once, and one that runs but never gets healthy. */
  snprintf(g_pidfile, sizeof g_pidfile, "%s/run/hourglassd.pid", prefix);
  write_exec(bad, "#!/bin/sh\necho 'broken build' >&2\nexit 1\n");
  write_exec(hang, "#!/bin/sh\nexec sleep 30\n");
#define DEPLOY(bin, ver, timeout)                                                              \
  (snprintf(cmd, sizeof cmd,                                                                 \
            OPS "/deploy --prefix %s --no-systemd --config %s --health-url %s --timeout %d "   \
                "--rollback-timeout 120 --bin %s --version %s >>%s/deploy.log 2>&1",         \
            prefix, conf, url, timeout, bin, ver, dir),                                      \
   du_system(cmd))

  /* A first version with nothing to fall back to: stopped, exit 3. */
  assert_int_equal(DEPLOY(bad, "v0", 5), 3);
  char link[700];
  snprintf(link, sizeof link, "%s/current", prefix);
  struct stat st;
  assert_int_not_equal(lstat(link, &st), 0);

  assert_int_equal(DEPLOY(g_bin, "v1", 120), 0);
  current_is(prefix, "releases/v1");
  char *h = du_get(port, "/health");
  assert_int_equal(du_status(h), 200);
  free(h);

  /* The broken build: rolled back by itself, v1 serving again. */
  assert_int_equal(DEPLOY(bad, "v2", 60), 1); /* dies at once: no wait */
  current_is(prefix, "releases/v1");
  h = du_get(port, "/health");
  assert_int_equal(du_status(h), 200);
  free(h);

  /* The hanging build: health never answers; stopped and rolled back. */
  assert_int_equal(DEPLOY(g_bin, "v1", 5), 2); /* same version twice is refused */
  assert_int_equal(DEPLOY(hang, "v3", 2), 1);
  current_is(prefix, "releases/v1");
  h = du_get(port, "/health");
  assert_int_equal(du_status(h), 200);
  free(h);

  char logpath[700];
  snprintf(logpath, sizeof logpath, "%s/deploy.log", dir);
  char *log = du_read(logpath);
  assert_non_null(strstr(log, "v2 failed its health check"));
  assert_non_null(strstr(log, "rolled back to v1: healthy"));
  assert_non_null(strstr(log, "no previous release to roll back to"));
  free(log);

  /* Key rotation: only the named key's secret changes; mode 0600. */
  char keys[700];
  snprintf(keys, sizeof keys, "%s/keys", dir);
  f = fopen(keys, "w");
  fputs("# keys\n7 trader 1 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
        "8 operator 0 0 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n",
        f);
  fclose(f);
  snprintf(cmd, sizeof cmd, OPS "/rotate-key %s 7 >%s/secret 2>/dev/null", keys, dir);
  assert_int_equal(du_system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/secret", dir);
  char *secret = du_read(cmd);
  assert_int_equal(strlen(secret), 65); /* 64 hex digits and a newline */
  secret[64] = '\0';
  char *kf = du_read(keys);
  char want[200];
  snprintf(want, sizeof want, "\n7 trader 1 1 %s\n", secret);
  assert_non_null(strstr(kf, want));
  assert_non_null(strstr(kf, "\n8 operator 0 0 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n"));
  assert_non_null(strstr(kf, "# keys\n"));
  free(kf);
  free(secret);
  struct stat kst;
  assert_int_equal(stat(keys, &kst), 0);
  assert_int_equal(kst.st_mode & 0777, 0600);
  snprintf(cmd, sizeof cmd, OPS "/rotate-key %s 9 >/dev/null 2>&1", keys);
  assert_int_equal(du_system(cmd), 1); /* unknown key: nothing written */

  /* Stop what the deploy started. */
  char pidpath[700];
  snprintf(pidpath, sizeof pidpath, "%s/run/hourglassd.pid", prefix);
  char *pid = du_read(pidpath);
  pid_t p = (pid_t)atoi(pid);
  free(pid);
  assert_true(p > 0);
  kill(p, SIGTERM);
  double end = du_now() + 120;
  while (kill(p, 0) == 0 && du_now() < end) du_sleep_ms(20);
  assert_int_not_equal(kill(p, 0), 0);
  du_rm_rf(dir);
}

/* A backup whose journal got damaged: ops/restore exits 1 and shows the
 * recovery's own error (file, offset, the options), not just a status. */
static void restore_of_a_damaged_backup_says_why(const char *dir, const char *bk,
                                                 const char *small) {
  char cmd[4096], seg[800];
  snprintf(cmd, sizeof cmd, "cp -a %s %s/bk-damaged", bk, dir);
  assert_int_equal(du_system(cmd), 0);
  snprintf(seg, sizeof seg, "%s/bk-damaged/journal/journal-00000000000000000001.hgj", dir);
  FILE *fp = fopen(seg, "r+b");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, 64 + 32 + 1, SEEK_SET), 0); /* seq 1's payload */
  int c = fgetc(fp);
  assert_int_equal(fseek(fp, 64 + 32 + 1, SEEK_SET), 0);
  fputc(c ^ 0x40, fp);
  fclose(fp);
  snprintf(cmd, sizeof cmd, OPS "/restore --bin %s %s %s/bk-damaged %s/rs-damaged >%s/rd.out 2>&1",
           g_bin, small, dir, dir, dir);
  assert_int_equal(du_system(cmd), 1);
  snprintf(cmd, sizeof cmd, "%s/rd.out", dir);
  char *out = du_read(cmd);
  if (strstr(out, "corrupt at offset 64 (bad record CRC) after seq 0") == NULL) fprintf(stderr, "%s", out);
  assert_non_null(strstr(out, "journal-00000000000000000001.hgj: corrupt at offset 64 (bad record CRC) after seq 0"));
  assert_non_null(strstr(out, "ops/restore: the restored copy in"));
  assert_null(strstr(out, "journal: journal:"));
  free(out);
}

static void backup_while_running_restores_to_the_same_state_hash(void **state) {
  (void)state;
  char dir[512], data[600], log[600], bk[600], rs[600], opt_data[700], opt_http[64], cmd[4096];
  assert_non_null(du_tmpdir(dir, sizeof dir, "backup"));
  snprintf(data, sizeof data, "%s/var", dir);
  snprintf(log, sizeof log, "%s/d.log", dir);
  snprintf(bk, sizeof bk, "%s/backup", dir);
  snprintf(rs, sizeof rs, "%s/restored", dir);
  snprintf(opt_data, sizeof opt_data, "data_dir=%s", data);
  int port = du_free_port();
  snprintf(opt_http, sizeof opt_http, "listen.http=127.0.0.1:%d", port);
  char *argv[] = {(char *)g_bin, "-o", opt_data, "-o", opt_http, "-o",
                  "listen.order_entry=127.0.0.1:0", "-o",
                  "synthetic.orders_per_sec=4000", "-o", "snapshot.interval=700", DU_SMALL_OPTS,
                  NULL};
  pid_t pid = du_spawn(argv, log);
  char *l = du_wait_log(log, "msg=\"ready\"", 120); /* slow under sanitizers */
  assert_non_null(l);
  free(l);
  du_sleep_ms(700); /* several snapshots and journal batches */

  const char *small =
      "-o journal.segment_size=1M -o journal.batch_bytes=256K -o pipeline.inbound_capacity=4096 "
      "-o pipeline.outbound_capacity=16384 -o pipeline.staging_capacity=16384 "
      /* the capacities are part of the state (and of its hash): as the daemon ran */
      "-o limits.max_book_orders=65536 -o limits.max_instruments=8 -o limits.max_accounts=64";
  snprintf(cmd, sizeof cmd,
           OPS "/backup --bin %s -o %s %s --metrics-url http://127.0.0.1:%d/metrics %s "
               ">%s/backup.out 2>>%s/backup.log",
           g_bin, opt_data, small, port, bk, dir, dir);
  assert_int_equal(du_system(cmd), 0);
  /* Still running and still taking commands after the copy. */
  du_sleep_ms(200);
  assert_int_equal(kill(pid, 0), 0);
  assert_int_equal(du_stop(pid, SIGTERM, 120), 0);

  char mpath[700];
  snprintf(mpath, sizeof mpath, "%s/MANIFEST", bk);
  char *manifest = du_read(mpath);
  char seq[32], hash[80];
  assert_int_equal(du_field(manifest, "last_seq=", "last_seq", seq, sizeof seq), 0);
  assert_int_equal(du_field(manifest, "state_hash=", "state_hash", hash, sizeof hash), 0);
  free(manifest);
  uint64_t s = strtoull(seq, NULL, 10);
  assert_true(s > 0);
  l = du_read(log);
  char stopped[32];
  assert_int_equal(du_field(l, "msg=\"stopped\"", "last_seq", stopped, sizeof stopped), 0);
  free(l);
  assert_true(strtoull(stopped, NULL, 10) > s); /* the copy was taken mid-stream */

  /* The gateway's key store (present when the gateway is built in) is in
   * the backup too. */
  char kp[700];
  struct stat kst;
  snprintf(kp, sizeof kp, "%s/keys/data.mdb", data);
  if (stat(kp, &kst) == 0) {
    snprintf(kp, sizeof kp, "%s/keys/data.mdb", bk);
    assert_int_equal(stat(kp, &kst), 0);
  }

  /* Restore into an empty directory: verified against the manifest. */
  snprintf(cmd, sizeof cmd, OPS "/restore --bin %s %s %s %s >%s/restore.out 2>&1", g_bin, small, bk,
           rs, dir);
  assert_int_equal(du_system(cmd), 0);
  /* The original at the same seq, replayed from its journal alone. */
  snprintf(cmd, sizeof cmd,
           "%s -o %s %s --state-hash --upto %s 2>/dev/null | grep -q 'state_hash=%s$'", g_bin,
           opt_data, small, seq, hash);
  assert_int_equal(du_system(cmd), 0);
  /* And the restored directory on its own. */
  snprintf(cmd, sizeof cmd,
           "%s -o data_dir=%s %s --state-hash 2>/dev/null | grep -q 'last_seq=%s state_hash=%s$'",
           g_bin, rs, small, seq, hash);
  assert_int_equal(du_system(cmd), 0);

  restore_of_a_damaged_backup_says_why(dir, bk, small);

  /* Restore refuses a non-empty target and a non-backup. */
  snprintf(cmd, sizeof cmd, OPS "/restore --bin %s %s %s >/dev/null 2>&1", g_bin, bk, rs);
  assert_int_equal(du_system(cmd), 2);
  snprintf(cmd, sizeof cmd, OPS "/restore --bin %s %s %s/other >/dev/null 2>&1", g_bin, dir, dir);
  assert_int_equal(du_system(cmd), 2);
  /* Backup refuses an existing destination, and a running-daemon backup
   * without a reachable /metrics (no durable bound). */
  snprintf(cmd, sizeof cmd, OPS "/backup --bin %s -o %s %s >/dev/null 2>&1", g_bin, opt_data, bk);
  assert_int_equal(du_system(cmd), 2);
  snprintf(cmd, sizeof cmd,
           OPS "/backup --bin %s -o %s --metrics-url http://127.0.0.1:%d/metrics %s/b2 "
               ">/dev/null 2>&1",
           g_bin, opt_data, du_free_port(), dir);
  assert_int_not_equal(du_system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/b2", dir);
  struct stat st;
  assert_int_not_equal(stat(cmd, &st), 0); /* a failed backup leaves nothing */
  du_rm_rf(dir);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <hourglassd> deploy|backup\n", argv[0]);
    return 2;
  }
  g_bin = argv[1];
  const struct CMUnitTest deploy[] = {
      cmocka_unit_test_teardown(deploy_rolls_back_a_version_that_fails_its_health_check,
                                kill_deployed),
  };
  const struct CMUnitTest backup[] = {
      cmocka_unit_test_teardown(backup_while_running_restores_to_the_same_state_hash, du_kill_all),
  };
  if (strcmp(argv[2], "deploy") == 0) return cmocka_run_group_tests(deploy, NULL, NULL);
  return cmocka_run_group_tests(backup, NULL, NULL);
}
