/*
 * bench_replica - committed entries per second of a three-node Raft group
 * (replication/, libraft) on one host: three hg_replica_t on one libuv loop,
 * TCP on 127.0.0.1, each node's log in its own directory under $TMPDIR (or
 * /tmp), every entry durable (fsync'd by libraft) on a majority before it
 * counts. The leader keeps WINDOW proposals of 1,000 bytes in flight.
 *
 *   bench_replica [--quick]
 *
 * RESULT cluster.raw_commit_entries_per_s: entries committed and applied on
 * the leader per second of wall time, after a warm-up.
 */
#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/replica.h"

#define NODES 3
#define ENTRY_BYTES 1000
#define WINDOW 256

typedef struct bench {
  uv_loop_t loop;
  hg_replica_t *r[NODES];
  char dir[NODES][200];
  char addr[NODES][32];
  uint8_t snap[8];
  uint8_t entry[ENTRY_BYTES];
  uint64_t proposed, committed, failed, target;
  int leader;
  unsigned closed;
} bench_t;

/* Both the apply and the restore of a state machine that keeps nothing. */
static int ignore(void *ctx, uint64_t index, const void *data, size_t len) {
  (void)ctx;
  (void)index;
  (void)data;
  (void)len;
  return 0;
}

static int nop_take(void *ctx, uint64_t index, const void **data, size_t *len) {
  bench_t *b = ctx;
  memcpy(b->snap, &index, sizeof index);
  *data = b->snap;
  *len = sizeof b->snap;
  return 0;
}

static void bench_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  if (level >= HG_LOG_WARN) fprintf(stderr, "bench_replica: %s\n", msg);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int any_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
    perror("bench_replica: port");
    exit(1);
  }
  close(fd);
  return ntohs(a.sin_port);
}

static void fill(bench_t *b);

static void on_done(void *ctx, int status, uint64_t index) {
  bench_t *b = ctx;
  (void)index;
  if (status == 0) b->committed++;
  else b->failed++;
  fill(b);
}

/* Keeps WINDOW proposals outstanding until target have been proposed. */
static void fill(bench_t *b) {
  while (b->proposed < b->target && b->proposed - b->committed - b->failed < WINDOW) {
    memcpy(b->entry, &b->proposed, sizeof b->proposed);
    if (hg_replica_propose(b->r[b->leader], b->entry, sizeof b->entry, on_done, b) != 0)
      return;
    b->proposed++;
  }
}

static void on_closed(void *ctx, int status) {
  (void)status;
  ((bench_t *)ctx)->closed++;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Runs the loop until all of the first `want` proposals completed. */
static bool run_to(bench_t *b, uint64_t want, double timeout_s) {
  double end = now_s() + timeout_s;
  b->target = want;
  fill(b);
  while (b->committed + b->failed < want) {
    if (now_s() > end) return false;
    uv_run(&b->loop, UV_RUN_ONCE);
    fill(b);
  }
  return b->failed == 0;
}

int main(int argc, char **argv) {
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  uint64_t warm = quick ? 500 : 2000, measured = quick ? 5000 : 50000;
  signal(SIGPIPE, SIG_IGN);
  static bench_t b;
  uv_loop_init(&b.loop);
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char root[160];
  snprintf(root, sizeof root, "%s/bench_replica_XXXXXX", tmp);
  if (mkdtemp(root) == NULL) {
    perror("bench_replica: mkdtemp");
    return 1;
  }
  hg_replica_member_t members[NODES];
  for (int i = 0; i < NODES; i++) {
    snprintf(b.dir[i], sizeof b.dir[i], "%s/n%d", root, i + 1);
    mkdir(b.dir[i], 0700);
    snprintf(b.addr[i], sizeof b.addr[i], "127.0.0.1:%d", any_port());
    members[i] = (hg_replica_member_t){(uint64_t)i + 1, b.addr[i]};
  }
  for (int i = 0; i < NODES; i++) {
    hg_replica_config_t cfg = {
        .id = (uint64_t)i + 1, .dir = b.dir[i], .address = b.addr[i],
        .members = members, .n_members = NODES,
        .election_timeout_ms = 1000, .heartbeat_timeout_ms = 100,
        .snapshot_threshold = 16384, .snapshot_trailing = 4096,
        .apply = ignore, .snapshot_take = nop_take, .snapshot_restore = ignore,
        .ctx = &b, .log = bench_log};
    int rc = hg_replica_open(&b.loop, &cfg, &b.r[i]);
    if (rc != 0) {
      fprintf(stderr, "bench_replica: open node %d: %d %s\n", i + 1, rc,
              b.r[i] ? hg_replica_errmsg(b.r[i]) : "");
      return 1;
    }
  }
  b.leader = -1;
  double end = now_s() + 20;
  while (b.leader < 0 && now_s() < end) {
    uv_run(&b.loop, UV_RUN_NOWAIT);
    for (int i = 0; i < NODES; i++)
      if (hg_replica_role(b.r[i]) == HG_REPLICA_LEADER) b.leader = i;
    usleep(1000);
  }
  int rc = 1;
  if (b.leader < 0) {
    fprintf(stderr, "bench_replica: no leader elected\n");
  } else if (!run_to(&b, warm, 60)) {
    fprintf(stderr, "bench_replica: warm-up failed\n");
  } else {
    double t0 = now_s();
    if (run_to(&b, warm + measured, 300)) {
      double secs = now_s() - t0;
      printf("bench_replica: %llu entries of %d bytes, window %d, %.3f s, dir %s\n",
             (unsigned long long)measured, ENTRY_BYTES, WINDOW, secs, tmp);
      printf("RESULT cluster.raw_commit_entries_per_s %.0f entries/s\n",
             (double)measured / secs);
      rc = 0;
    } else {
      fprintf(stderr, "bench_replica: %llu failed proposals\n", (unsigned long long)b.failed);
    }
  }
  for (int i = 0; i < NODES; i++) hg_replica_close(b.r[i], on_closed, &b);
  while (b.closed < NODES) uv_run(&b.loop, UV_RUN_ONCE);
  uv_run(&b.loop, UV_RUN_DEFAULT);
  uv_loop_close(&b.loop);
  nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return rc;
}
