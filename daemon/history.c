/*
 * history.c - a cluster node keeps its sequenced history across restarts.
 *
 * Design. Every node of a group journals the same records: the leader as
 * it sequences a batch, the followers as they apply the committed entry
 * that carries it (same seqs, timestamps and payloads). A start (or an
 * in-place rebuild) recovers the node's state from the newest Raft
 * snapshot (its seq S; 0 without one) and lets libraft re-apply the
 * committed entries after it. So the journal is a continuation of that
 * state exactly when it holds seq S and no gap before it; the records
 * after S are either re-applied by the group at once (and written again,
 * identically) or were never committed (a leader's batches executed ahead
 * of a commit that did not come). Hence, at every start:
 *  1. daemon_history_prepare() empties data_dir/engine except its journal
 *     (the state store and the durable mark are rebuilt from the group);
 *  2. daemon_history_continue(S) reads the journal from its first seq F
 *     through S with the journal's own reader (CRC and seq of every
 *     record), cuts every record after S (later segments unlinked, the
 *     rest of S's segment zeroed and synced) and the pipeline continues it.
 *     When F > S + 1, or the journal ends before S, or is unreadable, it
 *     is removed and a new one starts at S + 1.
 * Records up to S are never changed: S is the seq of a state the group
 * committed (a snapshot is taken only when the state is exactly the
 * applied entries), and any record a leader wrote ahead of a lost commit
 * is above the snapshot it rebuilds from, so it is cut.
 *
 * A node that has not got seq 1 (a wiped follower, or one that was sent a
 * snapshot because it fell too far behind) starts its journal at S + 1;
 * engine/history.missing then names the records 1..F-1 it lacks, and
 * `hgctl replay` prints that note instead of failing bare. Every other
 * node of the group holds those records in its own journal, in the same
 * files' format, and ops/RUNBOOK.md ("Cluster history") gives the copy.
 */
#include "history.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hourglass/error.h"
#include "hourglassd.h"

#define SEG_HEADER 64u
#define REC_HEADER 32u
#define REC_MAGIC 0x524A4748u
#define PATH_CAP 4096

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Removes path and everything under it. 0 or -errno. */
static int remove_all(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -errno;
  if (!S_ISDIR(st.st_mode)) return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
  DIR *d = opendir(path);
  if (d == NULL) return -errno;
  int rc = 0;
  struct dirent *e;
  char sub[PATH_CAP];
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= sizeof sub)
      rc = -ENAMETOOLONG;
    else
      rc = remove_all(sub);
  }
  closedir(d);
  if (rc == 0 && rmdir(path) != 0 && errno != ENOENT) rc = -errno;
  return rc;
}

int daemon_history_prepare(const char *engine_dir) {
  int rc = daemon_mkdir_p(engine_dir);
  if (rc != 0) return rc;
  DIR *d = opendir(engine_dir);
  if (d == NULL) return -errno;
  struct dirent *e;
  char sub[PATH_CAP];
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
        strcmp(e->d_name, "journal") == 0)
      continue;
    if ((size_t)snprintf(sub, sizeof sub, "%s/%s", engine_dir, e->d_name) >= sizeof sub)
      rc = -ENAMETOOLONG;
    else
      rc = remove_all(sub);
  }
  closedir(d);
  return rc;
}

/* The last seq readable from first through upto (stops at the first
 * missing or bad record). */
static uint64_t readable_upto(const char *jdir, uint64_t first, uint64_t upto) {
  if (upto < first) return first - 1;
  hg_journal_reader_t *r = NULL;
  if (hg_journal_reader_open(jdir, first, &r) != 0) return first - 1;
  uint64_t last = first - 1;
  hg_journal_record_t rec;
  while (last < upto && hg_journal_reader_next(r, upto, &rec) == 0) last = rec.seq;
  hg_journal_reader_close(r);
  return last;
}

/* Zeroes seg_path from the end of record upto on (upto is in this
 * segment, which starts at seg_first) and syncs it. 0 or an error. */
static int cut_segment(const char *seg_path, uint64_t seg_first, uint64_t upto) {
  int fd = open(seg_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  int rc = fstat(fd, &st) == 0 ? 0 : -errno;
  off_t off = SEG_HEADER;
  uint8_t h[REC_HEADER];
  for (uint64_t seq = seg_first; rc == 0 && seq <= upto; seq++) {
    if (pread(fd, h, sizeof h, off) != (ssize_t)sizeof h || rd32(h) != REC_MAGIC ||
        rd64(h + 16) != seq) {
      rc = HG_ECORRUPT; /* the reader vouched for it: changed under us */
      break;
    }
    off += (off_t)((REC_HEADER + (uint64_t)rd32(h + 8) + 7u) & ~(uint64_t)7u);
  }
  static const uint8_t zeros[65536];
  while (rc == 0 && off < st.st_size) {
    size_t n = st.st_size - off < (off_t)sizeof zeros ? (size_t)(st.st_size - off) : sizeof zeros;
    ssize_t w = pwrite(fd, zeros, n, off);
    if (w <= 0) rc = w < 0 ? -errno : -EIO;
    else off += w;
  }
  if (rc == 0 && fdatasync(fd) != 0) rc = -errno;
  close(fd);
  return rc;
}

/* Unlinks every segment after the one holding upto and cuts that one after
 * upto. 0 or an error. */
static int cut_after(const char *jdir, uint64_t upto) {
  DIR *d = opendir(jdir);
  if (d == NULL) return -errno;
  uint64_t keep = 0; /* first seq of the segment holding upto */
  struct dirent *e;
  unsigned long long f;
  char tail[8];
  while ((e = readdir(d)) != NULL)
    if (sscanf(e->d_name, "journal-%20llu.%4s", &f, tail) == 2 && strcmp(tail, "hgj") == 0 &&
        f <= upto && f > keep)
      keep = f;
  rewinddir(d);
  int rc = 0;
  char path[PATH_CAP];
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (sscanf(e->d_name, "journal-%20llu.%4s", &f, tail) != 2 || strcmp(tail, "hgj") != 0)
      continue;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", jdir, e->d_name) >= sizeof path)
      rc = -ENAMETOOLONG;
    else if (f > upto && unlink(path) != 0) rc = -errno;
    else if (f == keep) rc = cut_segment(path, keep, upto);
  }
  closedir(d);
  if (rc == 0) {
    int dfd = open(jdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      if (fsync(dfd) != 0) rc = -errno;
      close(dfd);
    }
  }
  return rc;
}

static int write_note(const char *engine_dir, uint64_t first, uint64_t snap_seq) {
  char path[PATH_CAP], tmp[PATH_CAP];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", engine_dir, HG_HISTORY_MISSING_FILE) >=
          sizeof path - 4)
    return -ENAMETOOLONG;
  if (first <= 1) return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) return -ENAMETOOLONG;
  FILE *f = fopen(tmp, "w");
  if (f == NULL) return -errno;
  fprintf(f,
          "records 1..%" PRIu64 " of the sequenced history are not on this node: it started "
          "from the group's snapshot at seq %" PRIu64 " (a wiped node, or one sent a "
          "snapshot). Every node that held them holds them in its data_dir/engine/journal; "
          "ops/RUNBOOK.md \"Cluster history\" gives the copy.\n",
          first - 1, snap_seq);
  int rc = fclose(f) == 0 ? 0 : -errno;
  if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
  return rc;
}

int daemon_history_continue(const char *engine_dir, uint64_t snap_seq,
                            const hg_journal_options_t *jo, uint64_t *first_out) {
  char jdir[PATH_CAP];
  if ((size_t)snprintf(jdir, sizeof jdir, "%s/journal", engine_dir) >= sizeof jdir)
    return -ENAMETOOLONG;
  uint64_t first = 0;
  int rc = hg_journal_first_seq(jdir, &first);
  int keep = rc == 0 && first <= snap_seq + 1 && readable_upto(jdir, first, snap_seq) == snap_seq;
  if (keep) {
    rc = cut_after(jdir, snap_seq);
    if (rc != 0) return rc;
    /* Nothing left (the journal started at snap_seq + 1): start it anew. */
    if (hg_journal_first_seq(jdir, &first) != 0) keep = 0;
  }
  if (!keep) {
    rc = remove_all(jdir);
    if (rc == 0) rc = daemon_mkdir_p(jdir);
    if (rc != 0) return rc;
    hg_journal_options_t o = *jo;
    o.first_seq = snap_seq + 1;
    o.durable_floor = 0;
    o.mark_path = NULL;
    o.log = NULL;
    hg_journal_t *j = NULL;
    rc = hg_journal_open(jdir, &o, &j);
    if (rc == 0) rc = hg_journal_close(j);
    if (rc != 0) return rc;
    first = snap_seq + 1;
  }
  if (first_out != NULL) *first_out = first;
  return write_note(engine_dir, first, snap_seq);
}

int daemon_history_fill(const char *journal_dir, const char *from_dir,
                        const hg_journal_options_t *jo, uint64_t *filled, char *msg,
                        size_t msg_cap) {
  *filled = 0;
  msg[0] = '\0';
  uint64_t first = 0;
  int rc = hg_journal_first_seq(journal_dir, &first);
  if (rc != 0) {
    snprintf(msg, msg_cap, "%s holds no journal segment", journal_dir);
    return rc;
  }
  if (first <= 1) return 0;
  char tmp[PATH_CAP], engine[PATH_CAP];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.fill", journal_dir) >= sizeof tmp) return -ENAMETOOLONG;
  snprintf(engine, sizeof engine, "%s", journal_dir);
  char *slash = strrchr(engine, '/');
  if (slash != NULL) *slash = '\0';
  else snprintf(engine, sizeof engine, ".");
  hg_journal_reader_t *r = NULL;
  rc = hg_journal_reader_open(from_dir, 1, &r);
  if (rc != 0) {
    snprintf(msg, msg_cap, "%s does not start at seq 1: %s", from_dir, hg_strerror(rc));
    return rc;
  }
  rc = remove_all(tmp);
  if (rc == 0) rc = daemon_mkdir_p(tmp);
  hg_journal_options_t o = *jo;
  o.first_seq = 1;
  o.durable_floor = 0;
  o.mark_path = NULL;
  o.log = NULL;
  hg_journal_t *j = NULL;
  if (rc == 0) rc = hg_journal_open(tmp, &o, &j);
  uint64_t last = 0;
  hg_journal_record_t rec;
  while (rc == 0 && last < first - 1) {
    rc = hg_journal_reader_next(r, first - 1, &rec);
    if (rc != 0) break;
    while ((rc = hg_journal_append(j, rec.seq, rec.ts, rec.payload, rec.len)) == HG_EBUSY) {
      hg_journal_commit(j);
      hg_journal_poll(j, 100);
    }
    if (rc == 0) last = rec.seq;
  }
  hg_journal_reader_close(r);
  if (j != NULL) {
    int crc = hg_journal_close(j);
    if (rc == 0) rc = crc;
  }
  if (rc == 0 && last != first - 1) rc = HG_ENOTFOUND;
  if (rc != 0) {
    snprintf(msg, msg_cap, "%s yields records 1..%" PRIu64 " of the 1..%" PRIu64 " missing: %s",
             from_dir, last, first - 1, hg_strerror(rc));
    (void)remove_all(tmp);
    return rc;
  }
  /* Newest segment first: the journal stays a run of whole segments. */
  for (;;) {
    DIR *d = opendir(tmp);
    if (d == NULL) return -errno;
    unsigned long long f, best = 0;
    char tail[8], name[64] = "";
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      if (sscanf(e->d_name, "journal-%20llu.%4s", &f, tail) == 2 && strcmp(tail, "hgj") == 0 &&
          f >= best && strlen(e->d_name) < sizeof name) {
        best = f;
        memcpy(name, e->d_name, strlen(e->d_name) + 1);
      }
    closedir(d);
    if (name[0] == '\0') break;
    char from[PATH_CAP], to[PATH_CAP];
    if ((size_t)snprintf(from, sizeof from, "%s/%s", tmp, name) >= sizeof from ||
        (size_t)snprintf(to, sizeof to, "%s/%s", journal_dir, name) >= sizeof to)
      return -ENAMETOOLONG;
    if (rename(from, to) != 0) return -errno;
  }
  int dfd = open(journal_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    if (fsync(dfd) != 0) rc = -errno;
    close(dfd);
  }
  (void)remove_all(tmp);
  if (rc == 0 && readable_upto(journal_dir, 1, first) < first - 1) {
    snprintf(msg, msg_cap, "%s does not read from seq 1 after the fill", journal_dir);
    return HG_ECORRUPT;
  }
  if (rc == 0) rc = write_note(engine, 1, 0);
  if (rc == 0) *filled = first - 1;
  return rc;
}
