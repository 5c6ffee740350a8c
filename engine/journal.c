/*
 * The durable command journal: append-only, preallocated segment files of
 * CRC32C-checked records (format in hourglass/journal.h).
 *
 * Structure. The writer (hg_journal_t) owns two staging buffers. Appends
 * copy records into the filling one; a commit hands that buffer to the
 * kernel as one batch (io_uring writev linked to fdatasync, one submission)
 * and the other buffer starts filling. Only one batch is ever in flight, so
 * completions arrive in seq order by construction and durable_seq is simply
 * the last seq of the most recent batch whose write was complete and whose
 * sync returned 0. A batch never spans segments: when it would not fit, the
 * current segment is left (its data is already durable, since nothing is in
 * flight) and the spare segment, preallocated ahead of time, is activated
 * by writing its header, syncing it and renaming it into place.
 *
 * Zero-filled segments. fallocate alone leaves "unwritten" extents (ext4,
 * XFS): the first write into each block must convert its extent, a
 * metadata change, so every fdatasync would also commit the filesystem's
 * own journal. Segments are therefore written with zeros before they take
 * records (as database write-ahead logs do), and fdatasync then only
 * flushes data, which shortens the durable round trip (bench_gateway's
 * durable step measures it). The first segment of a new
 * journal is zero-filled when it is created; each spare at the pace the
 * current segment fills (zero_spare_pace), after a batch is handed to the
 * kernel (while io_uring works on it), in pieces of ZERO_BURST with
 * writeback started at once, so activation finds little left to write. A
 * journal in memory (tmpfs, ramfs) has no extents to convert and nothing
 * to flush: its segments are not filled, which would only copy zeros into
 * the pages the records then overwrite, and its batches are written in
 * place, not through io_uring, with no fdatasync after them: copied into
 * a shared mapping of the segment when its file holds the whole segment
 * (fallocate reserved it), else by pwritev (hourglass/journal.h says why).
 *
 * Why one batch in flight: chains do not span submit calls and separate
 * chains may complete out of order; with one chain at a time there is no
 * reordering to undo, and the batch size adapts to the sync latency on its
 * own (records that arrive during one sync all go in the next batch).
 *
 * Recovery maps each segment read-only and walks its records; see the
 * header for how a torn tail is told apart from corruption. Readers use the
 * same record check on their own mappings.
 */
#include "hourglass/journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <liburing.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/crc32c.h"
#include "hourglass/bytes.h"
#include "journal_internal.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the journal stores its little-endian format with plain loads and stores"
#endif

#define SHDR HG_JOURNAL_SEGMENT_HEADER_SIZE
#define RHDR HG_JOURNAL_RECORD_HEADER_SIZE
#define SPARE_NAME "journal-spare.tmp"
#define MARK_SIZE 48u
#define NAME_LEN 64
#define RING_ENTRIES 8

#define DEFAULT_SEGMENT_SIZE (64u * 1024u * 1024u)
#define DEFAULT_MAX_PAYLOAD (64u * 1024u)
#define DEFAULT_BATCH_BYTES (4u * 1024u * 1024u)
#define ZERO_CHUNK (128u * 1024u) /* largest zero-fill write */
#define ZERO_BURST (1024u * 1024u) /* zero-fill credit written at once (see zero_spare_pace) */

static _Atomic int fail_next_uring_init;

/* ------------------------------------------------------------------------ */
/* Little helpers                                                            */
/* ------------------------------------------------------------------------ */


static void seg_name(char out[NAME_LEN], uint64_t first_seq) {
  snprintf(out, NAME_LEN, "journal-%020" PRIu64 ".hgj", first_seq);
}

/* Parses "journal-<20 digits>.hgj"; returns 0 and the seq, or -1. */
static int parse_seg_name(const char *name, uint64_t *seq) {
  if (strlen(name) != 8 + 20 + 4 || strncmp(name, "journal-", 8) != 0 ||
      strcmp(name + 28, ".hgj") != 0)
    return -1;
  uint64_t v = 0;
  for (int i = 8; i < 28; i++) {
    if (name[i] < '0' || name[i] > '9') return -1;
    unsigned d = (unsigned)(name[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *seq = v;
  return 0;
}

__attribute__((format(printf, 3, 4))) static void jlog(const hg_journal_options_t *opt, int level,
                                                       const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (opt != NULL && opt->log != NULL)
    opt->log(opt->log_ctx, level, msg);
  else
    fprintf(stderr, "%s\n", msg);
}

static uint32_t record_crc(const uint8_t *hdr, const uint8_t *payload, uint32_t len) {
  uint32_t c = hg_crc32c(0, hdr, 12);
  c = hg_crc32c(c, hdr + 16, RHDR - 16);
  return hg_crc32c(c, payload, len);
}

static void build_seg_header(uint8_t out[SHDR], uint64_t first_seq) {
  memset(out, 0, SHDR);
  hg_st32(out, HG_JOURNAL_SEGMENT_MAGIC);
  hg_st16(out + 4, HG_JOURNAL_FORMAT_VERSION);
  hg_st16(out + 6, SHDR);
  hg_st64(out + 8, first_seq);
  hg_st32(out + 60, hg_crc32c(0, out, 60));
}

/* ------------------------------------------------------------------------ */
/* Segment mappings and record checks (shared by recovery and readers)       */
/* ------------------------------------------------------------------------ */

typedef struct seg_map {
  int fd;              /* owned by the mapping's user; -1 when closed */
  const uint8_t *base; /* read-only shared mapping; NULL when size is 0 */
  uint64_t size;
  uint64_t first_seq;
  char name[NAME_LEN];
} seg_map_t;

static void unmap_segment(seg_map_t *m) {
  if (m->base != NULL) munmap((void *)(uintptr_t)m->base, m->size);
  if (m->fd >= 0) close(m->fd);
  m->base = NULL;
  m->fd = -1;
  m->size = 0;
}

static int map_segment(int dirfd, uint64_t first_seq, int flags, seg_map_t *m) {
  m->fd = -1;
  m->base = NULL;
  m->size = 0;
  m->first_seq = first_seq;
  seg_name(m->name, first_seq);
  int fd = openat(dirfd, m->name, flags | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  m->fd = fd;
  m->size = (uint64_t)st.st_size;
  if (m->size > 0) {
    void *p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = -errno;
      close(fd);
      m->fd = -1;
      return e;
    }
    m->base = p;
  }
  return 0;
}

enum { HDR_OK, HDR_BAD, HDR_NEWER };

static int check_seg_header(const seg_map_t *m, const char **why, unsigned *version) {
  if (m->size < SHDR) {
    *why = "segment shorter than its header";
    return HDR_BAD;
  }
  if (hg_ld32(m->base) != HG_JOURNAL_SEGMENT_MAGIC) {
    *why = "bad segment magic";
    return HDR_BAD;
  }
  *version = hg_ld16(m->base + 4);
  if (*version > HG_JOURNAL_FORMAT_VERSION) return HDR_NEWER;
  if (*version == 0 || hg_ld16(m->base + 6) != SHDR) {
    *why = "bad segment header fields";
    return HDR_BAD;
  }
  if (hg_crc32c(0, m->base, 60) != hg_ld32(m->base + 60)) {
    *why = "bad segment header CRC";
    return HDR_BAD;
  }
  if (hg_ld64(m->base + 8) != m->first_seq) {
    *why = "segment header seq differs from the file name";
    return HDR_BAD;
  }
  return HDR_OK;
}

enum { REC_OK, REC_END, REC_BAD, REC_NEWER };

typedef struct rec_view {
  uint64_t seq, ts;
  uint32_t len;
  unsigned version;
  const uint8_t *payload;
  const char *why; /* for REC_BAD */
} rec_view_t;

/* Checks the slot at off (8-aligned, off <= size). REC_END: zero magic or
 * no room for a header. */
static int check_record(const uint8_t *base, uint64_t size, uint64_t off, rec_view_t *v) {
  if (size - off < RHDR) return REC_END;
  const uint8_t *h = base + off;
  uint32_t magic = hg_ld32(h);
  if (magic == 0) return REC_END;
  if (magic != HG_JOURNAL_RECORD_MAGIC) {
    v->why = "bad record magic";
    return REC_BAD;
  }
  v->version = hg_ld16(h + 4);
  if (v->version > HG_JOURNAL_FORMAT_VERSION) return REC_NEWER;
  v->len = hg_ld32(h + 8);
  if (v->version == 0 || v->len > size - off - RHDR) {
    v->why = "bad record header";
    return REC_BAD;
  }
  v->seq = hg_ld64(h + 16);
  if (record_crc(h, h + RHDR, v->len) != hg_ld32(h + 12)) {
    v->why = "bad record CRC";
    return REC_BAD;
  }
  v->ts = hg_ld64(h + 24);
  v->payload = h + RHDR;
  return REC_OK;
}

/* Counts valid records at 8-byte aligned offsets from off onwards, skipping
 * over each one found. */
static uint64_t count_valid_from(const uint8_t *base, uint64_t size, uint64_t off) {
  uint64_t n = 0;
  off = (off + 7u) & ~(uint64_t)7u;
  while (off < size && size - off >= RHDR) {
    rec_view_t v;
    if (hg_ld32(base + off) == HG_JOURNAL_RECORD_MAGIC && check_record(base, size, off, &v) == REC_OK) {
      n++;
      off += HG_JOURNAL_RECORD_SIZE(v.len);
    } else {
      off += 8;
    }
  }
  return n;
}

/* End (exclusive) of the last nonzero byte at or after off; off if none. */
static uint64_t nonzero_end(const uint8_t *base, uint64_t size, uint64_t off) {
  uint64_t end = off;
  uint64_t i = off;
  for (; i < size && (i & 7u) != 0; i++)
    if (base[i] != 0) end = i + 1;
  for (; i + 8 <= size; i += 8) {
    uint64_t w = hg_ld64(base + i);
    if (w != 0) end = i + 8 - (uint64_t)(__builtin_clzll(w) / 8); /* last nonzero byte (LE) */
  }
  for (; i < size; i++)
    if (base[i] != 0) end = i + 1;
  return end;
}

static int zero_range(int fd, uint64_t off, uint64_t len) {
  if (len > 0 && fallocate(fd, FALLOC_FL_ZERO_RANGE, (off_t)off, (off_t)len) != 0) {
    if (errno != EOPNOTSUPP) return -errno;
    static const uint8_t zeros[65536];
    while (len > 0) {
      size_t n = len < sizeof zeros ? (size_t)len : sizeof zeros;
      ssize_t w = pwrite(fd, zeros, n, (off_t)off);
      if (w < 0) {
        if (errno == EINTR) continue;
        return -errno;
      }
      off += (uint64_t)w;
      len -= (uint64_t)w;
    }
  }
  return fdatasync(fd) != 0 ? -errno : 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Lists the segment files of dirfd sorted by first seq; *out is malloc'd. */
static int list_segments(int dirfd, uint64_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  int fd = dup(dirfd);
  if (fd < 0) return -errno;
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    int e = -errno;
    close(fd);
    return e;
  }
  rewinddir(d);
  size_t cap = 0;
  uint64_t *v = NULL;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    uint64_t seq;
    if (parse_seg_name(de->d_name, &seq) != 0) continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      uint64_t *nv = realloc(v, cap * sizeof *v);
      if (nv == NULL) {
        free(v);
        closedir(d);
        return -ENOMEM;
      }
      v = nv;
    }
    v[(*n)++] = seq;
  }
  closedir(d);
  if (*n > 1) qsort(v, *n, sizeof *v, cmp_u64);
  *out = v;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct batch {
  uint8_t *buf; /* staging memory of opt.batch_bytes; owned by the journal */
  size_t len;
  uint64_t first_seq, last_seq;
  uint64_t file_off;
  int fd; /* segment the batch was written to; owned by the journal */
  int cqes;
  int write_res, sync_res;
  enum hg_journal_fault fault;
  struct iovec iov; /* must stay put while in flight */
} batch_t;

struct hg_journal {
  hg_journal_options_t opt;
  char dir[PATH_MAX];
  int dirfd;
  int fd;            /* current segment; owned here */
  uint64_t seg_first;
  uint64_t seg_cap;  /* size of the current segment file */
  uint64_t write_off;
  char seg_name[NAME_LEN];
  int spare_fd;      /* preallocated next segment, or -1; owned here */
  uint64_t spare_zeroed; /* spare bytes written with zeros so far (see top) */
  uint64_t zero_credit;  /* spare bytes due to be zeroed, not written yet */
  uint64_t zero_writes;  /* zero-fill writes into spares (hg_journal__zero_writes) */
  int zero_fill;     /* spares are zero-filled: not opt.no_zero_fill, nor in memory */
  int in_memory;     /* tmpfs or ramfs: a batch's write is all there is (no fdatasync) */
  /* In memory: the current segment mapped shared (seg_cap bytes), so a
   * batch is a copy into the page cache, not a system call; NULL until the
   * first batch of a segment maps it, or when it cannot be (map_tried). */
  uint8_t *map;
  int map_tried;
  batch_t b[2];
  int fill;          /* index of the filling batch */
  int inflight;      /* nonzero when b[fill ^ 1] is with the kernel */
  uint64_t next_seq;
  _Atomic uint64_t durable_seq;
  _Atomic int err;
  char errmsg[512];
  int use_uring;
  struct io_uring ring;
  enum hg_journal_fault fault;
  /* Durable mark (see the header): -1 when opt.mark_path is NULL; owned here */
  int mark_dirfd;
  char mark_path[PATH_MAX];
  char mark_name[NAME_MAX + 1], mark_tmp[NAME_MAX + 1];
  uint64_t mark_seq;  /* value of the mark file as last read or written */
  uint64_t mark_seg;  /* the segment it names (current when written), 0 none */
  uint64_t mark_time; /* its wall-clock time (ns), for messages */
  int mark_due;       /* a roll-over happened: rewrite the mark after its batch is submitted */
};

void hg_journal_options_init(hg_journal_options_t *opt) {
  memset(opt, 0, sizeof *opt);
  opt->segment_size = DEFAULT_SEGMENT_SIZE;
  opt->max_payload = DEFAULT_MAX_PAYLOAD;
  opt->batch_bytes = DEFAULT_BATCH_BYTES;
  opt->first_seq = 1;
}

void hg_journal__inject_fault(hg_journal_t *j, enum hg_journal_fault fault) { j->fault = fault; }

void hg_journal__fail_next_uring_init(int err) {
  atomic_store(&fail_next_uring_init, err);
}

__attribute__((format(printf, 3, 4))) static void fail(hg_journal_t *j, int err, const char *fmt, ...) {
  if (atomic_load_explicit(&j->err, memory_order_relaxed) != 0) return; /* first cause wins; own thread */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(j->errmsg, sizeof j->errmsg, fmt, ap);
  va_end(ap);
  /* release: a thread that sees err also sees errmsg */
  atomic_store_explicit(&j->err, err, memory_order_release);
  jlog(&j->opt, HG_LOG_ERROR, "journal: %s; intake stopped", j->errmsg);
}

static int create_spare(hg_journal_t *j) {
  int fd = openat(j->dirfd, SPARE_NAME, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  if (fallocate(fd, 0, 0, (off_t)j->opt.segment_size) != 0) {
    int e = errno;
    if (e != EOPNOTSUPP || ftruncate(fd, (off_t)j->opt.segment_size) != 0) {
      if (e == EOPNOTSUPP) e = errno;
      close(fd);
      unlinkat(j->dirfd, SPARE_NAME, 0);
      return -e;
    }
  }
  j->spare_fd = fd;
  j->spare_zeroed = j->zero_fill ? 0 : j->opt.segment_size;
  j->zero_credit = 0;
  return 0;
}

int hg_journal__zero_fills(const hg_journal_t *j) { return j->zero_fill; }

int hg_journal__mapped(const hg_journal_t *j) { return j->map != NULL; }

uint64_t hg_journal__zero_writes(const hg_journal_t *j) { return j->zero_writes; }

/* Writes zeros over the next len bytes at most of the spare and starts
 * their writeback. Only an optimisation (the space is already allocated
 * and reads as zeros either way), so a failure just ends it, with a log
 * line, and the spare stays merely preallocated. */
static void zero_spare_step(hg_journal_t *j, uint64_t len) {
  static const uint8_t zeros[ZERO_CHUNK];
  while (len > 0 && j->spare_fd >= 0 && j->spare_zeroed < j->opt.segment_size) {
    uint64_t off = j->spare_zeroed;
    size_t n = ZERO_CHUNK;
    if (j->opt.segment_size - off < n) n = (size_t)(j->opt.segment_size - off);
    if (len < n) n = (size_t)len;
    ssize_t w = pwrite(j->spare_fd, zeros, n, (off_t)off);
    j->zero_writes++;
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      jlog(&j->opt, HG_LOG_WARN, "journal: %s/%s: cannot zero-fill at offset %" PRIu64
           " (%s); the segment stays preallocated only", j->dir, SPARE_NAME, off,
           hg_strerror(w < 0 ? -errno : -EIO));
      j->spare_zeroed = j->opt.segment_size;
      return;
    }
    (void)sync_file_range(j->spare_fd, (off_t)off, w, SYNC_FILE_RANGE_WRITE);
    j->spare_zeroed += (uint64_t)w;
    len -= (uint64_t)w;
  }
}

/* Zero-fills the spare at the pace the current segment fills, after a
 * batch of len bytes: the spare's bytes still to zero, shared over the
 * segment's room left, plus a quarter of len so the spare is ready a
 * little before it is needed. The credit is written ZERO_BURST at a time:
 * a few large writes instead of a small one per batch, whose device
 * writes every batch's fdatasync would otherwise wait behind (bench_floor's
 * gateway.durable_p50_floor_ratio measures the durable round trip). */
static void zero_spare_pace(hg_journal_t *j, uint64_t len) {
  if (j->spare_fd < 0 || j->spare_zeroed >= j->opt.segment_size) return;
  uint64_t left = j->opt.segment_size - j->spare_zeroed;
  uint64_t room = j->seg_cap > j->write_off ? j->seg_cap - j->write_off : 0;
  j->zero_credit +=
      room == 0 ? left : (uint64_t)((unsigned __int128)len * left / room) + len / 4 + 1;
  if (j->zero_credit < ZERO_BURST && j->zero_credit < left) return;
  uint64_t n = j->zero_credit < left ? j->zero_credit : left;
  j->zero_credit = 0;
  zero_spare_step(j, n);
}

/* ------------------------------------------------------------------------ */
/* Durable mark (format in the header)                                       */
/* ------------------------------------------------------------------------ */

static void fmt_time(char out[32], uint64_t ns) {
  time_t t = (time_t)(ns / 1000000000u);
  struct tm tm;
  if (ns == 0 || gmtime_r(&t, &tm) == NULL || strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf(out, 32, "at an unknown time");
}

/* Reads the mark file name (relative to dirfd): 0 with *seq and *time_ns,
 * HG_ENOTFOUND (no file), HG_EVERSION (newer format), HG_ECORRUPT (bad
 * size, magic or CRC) or -errno, with why set for the last three. */
static int mark_parse(int dirfd, const char *name, uint64_t *seq, uint64_t *seg,
                      uint64_t *time_ns, char *why, size_t why_len) {
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return HG_ENOTFOUND;
    int rc = -errno;
    snprintf(why, why_len, "cannot be read: %s", hg_strerror(rc));
    return rc;
  }
  uint8_t b[MARK_SIZE + 1];
  ssize_t n = pread(fd, b, sizeof b, 0);
  int e = n < 0 ? -errno : 0;
  close(fd);
  if (e != 0) {
    snprintf(why, why_len, "cannot be read: %s", hg_strerror(e));
    return e;
  }
  if (n >= 8 && hg_ld32(b) == HG_JOURNAL_MARK_MAGIC && hg_ld16(b + 4) > HG_JOURNAL_FORMAT_VERSION) {
    snprintf(why, why_len,
             "has format version %u, newer than this build reads (version %u); open it with "
             "a newer Hourglass", hg_ld16(b + 4), HG_JOURNAL_FORMAT_VERSION);
    return HG_EVERSION;
  }
  if (n != MARK_SIZE || hg_ld32(b) != HG_JOURNAL_MARK_MAGIC || hg_ld16(b + 4) == 0 ||
      hg_ld16(b + 6) != MARK_SIZE || hg_crc32c(0, b, 44) != hg_ld32(b + 44)) {
    snprintf(why, why_len,
             "is damaged (%zd bytes, bad magic, size or CRC); start-up stopped, nothing was "
             "changed. Check the disk; if the journal is known to be complete, move the mark file "
             "aside and start again (it is rewritten from the journal)", n);
    return HG_ECORRUPT;
  }
  *seq = hg_ld64(b + 8);
  *seg = hg_ld64(b + 16);
  *time_ns = hg_ld64(b + 24);
  return 0;
}

/* Opens the directory of opt.mark_path and reads the mark, if any: 0 with
 * j->mark_seq (0 when there is no file), or an error (logged). */
static int read_mark(hg_journal_t *j) {
  const char *path = j->opt.mark_path;
  const char *slash = strrchr(path, '/');
  const char *base = slash != NULL ? slash + 1 : path;
  char dir[PATH_MAX];
  if (slash == path)
    strcpy(dir, "/");
  else if (slash != NULL)
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  else
    strcpy(dir, ".");
  if (*base == '\0' || strlen(base) + 5 > NAME_MAX) {
    jlog(&j->opt, HG_LOG_ERROR, "journal: invalid durable mark path %s", path);
    return HG_EINVAL;
  }
  strcpy(j->mark_name, base);
  snprintf(j->mark_tmp, sizeof j->mark_tmp, "%s.tmp", base);
  j->mark_dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (j->mark_dirfd < 0) {
    int rc = -errno;
    jlog(&j->opt, HG_LOG_ERROR, "journal: cannot open directory %s of the durable mark: %s",
         dir, hg_strerror(rc));
    return rc;
  }
  unlinkat(j->mark_dirfd, j->mark_tmp, 0); /* left by a crash while writing it */
  char why[256];
  int rc = mark_parse(j->mark_dirfd, base, &j->mark_seq, &j->mark_seg, &j->mark_time, why,
                      sizeof why);
  if (rc == HG_ENOTFOUND) return 0; /* new data directory, or written by a version without it */
  if (rc != 0) jlog(&j->opt, HG_LOG_ERROR, "journal: durable mark %s %s", path, why);
  return rc;
}

int hg_journal_read_mark(const char *path, uint64_t *seq, uint64_t *segment_first,
                         uint64_t *time_ns) {
  if (path == NULL || seq == NULL) return HG_EINVAL;
  uint64_t t = 0, g = 0;
  char why[256];
  int rc = mark_parse(AT_FDCWD, path, seq, &g, &t, why, sizeof why);
  if (segment_first != NULL) *segment_first = g;
  if (time_ns != NULL) *time_ns = t;
  return rc;
}

/* Replaces the mark file with one saying seq (never lower than the mark
 * already written) is durable: temp file, fdatasync, rename, directory
 * fsync, so the file always holds a whole old or a whole new mark. */
static int write_mark(hg_journal_t *j, uint64_t seq) {
  if (j->mark_dirfd < 0) return 0;
  if (seq < j->mark_seq) seq = j->mark_seq;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); /* for messages only */
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  uint8_t b[MARK_SIZE];
  memset(b, 0, sizeof b);
  hg_st32(b, HG_JOURNAL_MARK_MAGIC);
  hg_st16(b + 4, HG_JOURNAL_FORMAT_VERSION);
  hg_st16(b + 6, MARK_SIZE);
  hg_st64(b + 8, seq);
  hg_st64(b + 16, j->seg_first);
  hg_st64(b + 24, now);
  hg_st32(b + 44, hg_crc32c(0, b, 44));
  int fd = openat(j->mark_dirfd, j->mark_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  int rc = 0;
  ssize_t w = pwrite(fd, b, sizeof b, 0);
  if (w < 0)
    rc = -errno;
  else if ((size_t)w != sizeof b)
    rc = -EIO;
  else if (fdatasync(fd) != 0)
    rc = -errno;
  close(fd);
  if (rc == 0 && renameat(j->mark_dirfd, j->mark_tmp, j->mark_dirfd, j->mark_name) != 0) rc = -errno;
  if (rc == 0 && fsync(j->mark_dirfd) != 0) rc = -errno;
  if (rc != 0) {
    unlinkat(j->mark_dirfd, j->mark_tmp, 0);
    return rc;
  }
  j->mark_seq = seq;
  j->mark_time = now;
  return 0;
}

/* The mark after a roll-over: everything before the new segment is durable
 * (nothing was in flight when it was activated). A failure leaves the older,
 * lower mark in place, which is still true; it is retried at the next
 * roll-over and at close. */
static void roll_mark(hg_journal_t *j) {
  j->mark_due = 0;
  int rc = write_mark(j, j->seg_first - 1);
  if (rc != 0)
    jlog(&j->opt, HG_LOG_WARN,
         "journal: cannot update the durable mark %s to seq %" PRIu64 ": %s; it stays at seq %" PRIu64,
         j->opt.mark_path, j->seg_first - 1, hg_strerror(rc), j->mark_seq);
}

/* Forgets the current segment's mapping (the segment changes). */
static void seg_unmap(hg_journal_t *j) {
  if (j->map != NULL) munmap(j->map, j->seg_cap);
  j->map = NULL;
  j->map_tried = 0;
}

/* In memory, once per segment: maps the current segment shared when the
 * file holds all of seg_cap (fallocate reserved it, so a store can never
 * meet a missing page: no SIGBUS). Otherwise batches go through pwritev. */
static void seg_map(hg_journal_t *j) {
  j->map_tried = 1;
  struct stat st;
  if (fstat(j->fd, &st) != 0 || (uint64_t)st.st_size < j->seg_cap) return;
  void *p = mmap(NULL, j->seg_cap, PROT_READ | PROT_WRITE, MAP_SHARED, j->fd, 0);
  if (p != MAP_FAILED) j->map = p;
}

/* Makes the spare the current segment, starting at first_seq. Called only
 * with nothing in flight, so the old segment's data is already durable. */
static int activate_spare(hg_journal_t *j, uint64_t first_seq) {
  int rc;
  if (j->spare_fd < 0 && (rc = create_spare(j)) != 0) return rc;
  zero_spare_step(j, UINT64_MAX); /* what the batches have not done yet */
  uint8_t hdr[SHDR];
  build_seg_header(hdr, first_seq);
  char name[NAME_LEN];
  seg_name(name, first_seq);
  if (pwrite(j->spare_fd, hdr, SHDR, 0) != (ssize_t)SHDR) return errno ? -errno : -EIO;
  if (fdatasync(j->spare_fd) != 0) return -errno;
  if (renameat(j->dirfd, SPARE_NAME, j->dirfd, name) != 0) return -errno;
  if (fsync(j->dirfd) != 0) return -errno;
  seg_unmap(j);
  if (j->fd >= 0) close(j->fd);
  j->fd = j->spare_fd;
  j->spare_fd = -1;
  j->seg_first = first_seq;
  j->seg_cap = j->opt.segment_size;
  j->write_off = SHDR;
  memcpy(j->seg_name, name, NAME_LEN);
  j->mark_due = 1;
  /* Preallocate the next segment now, well before it is needed. A failure
   * here is retried at the next roll-over, where it then counts. */
  if ((rc = create_spare(j)) != 0)
    jlog(&j->opt, HG_LOG_WARN, "journal: %s/%s: cannot preallocate the next segment yet: %s",
         j->dir, SPARE_NAME, hg_strerror(rc));
  return 0;
}

static void finish_batch(hg_journal_t *j, batch_t *b) {
  if (b->fault == HG_JOURNAL_FAULT_EIO && b->write_res == -EFAULT) b->write_res = -EIO;
  if (b->fault == HG_JOURNAL_FAULT_ENOSPC && b->write_res == -EFAULT) b->write_res = -ENOSPC;
  if (b->write_res < 0)
    fail(j, b->write_res, "write of %zu bytes (seq %" PRIu64 "..%" PRIu64 ") at %s/%s offset %" PRIu64
         " failed: %s%s", b->len, b->first_seq, b->last_seq, j->dir, j->seg_name, b->file_off,
         hg_strerror(b->write_res), b->sync_res == -ECANCELED ? "; linked fdatasync cancelled" : "");
  else if ((size_t)b->write_res != b->len)
    fail(j, -EIO, "short write: %d of %zu bytes (seq %" PRIu64 "..%" PRIu64 ") at %s/%s offset %" PRIu64
         "%s", b->write_res, b->len, b->first_seq, b->last_seq, j->dir, j->seg_name, b->file_off,
         b->sync_res == -ECANCELED ? "; linked fdatasync cancelled" : "");
  else if (b->sync_res != 0)
    fail(j, b->sync_res, "fdatasync of %s/%s after seq %" PRIu64 " failed: %s", j->dir, j->seg_name,
         b->last_seq, hg_strerror(b->sync_res));
  else
    /* release: a thread that reads this seq as durable also sees the
     * batch's bytes in the page cache (readers map the same file) */
    atomic_store_explicit(&j->durable_seq, b->last_seq, memory_order_release);
  b->len = 0;
}

static int submit(hg_journal_t *j) {
  batch_t *b = &j->b[j->fill];
  int rc;
  if (j->seg_cap - j->write_off < b->len && (rc = activate_spare(j, b->first_seq)) != 0) {
    fail(j, rc, "roll-over to a new segment at seq %" PRIu64 " in %s failed: %s", b->first_seq, j->dir,
         hg_strerror(rc));
    return rc;
  }
  b->fd = j->fd;
  b->file_off = j->write_off;
  b->fault = j->fault;
  j->fault = HG_JOURNAL_FAULT_NONE;
  b->iov.iov_base = b->buf;
  b->iov.iov_len = b->len;
  if (b->fault == HG_JOURNAL_FAULT_SHORT_WRITE) b->iov.iov_len = b->len / 2;
  j->write_off += b->len;

  if (j->use_uring) {
    /* An unmapped buffer makes the kernel fail the write for real. */
    if (b->fault == HG_JOURNAL_FAULT_EIO || b->fault == HG_JOURNAL_FAULT_ENOSPC) b->iov.iov_base = NULL;
    struct io_uring_sqe *w = io_uring_get_sqe(&j->ring);
    struct io_uring_sqe *s = io_uring_get_sqe(&j->ring);
    if (w == NULL || s == NULL) {
      fail(j, -EBUSY, "io_uring submission queue unexpectedly full");
      return -EBUSY;
    }
    uint64_t tag = (uint64_t)j->fill << 1;
    io_uring_prep_writev(w, b->fd, &b->iov, 1, b->file_off);
    w->flags |= IOSQE_IO_LINK;
    io_uring_sqe_set_data64(w, tag);
    io_uring_prep_fsync(s, b->fd, IORING_FSYNC_DATASYNC);
    io_uring_sqe_set_data64(s, tag | 1u);
    b->cqes = 0;
    b->write_res = b->sync_res = 0;
    for (;;) {
      rc = io_uring_submit(&j->ring);
      if (rc != -EINTR && rc != -EAGAIN) break;
    }
    if (rc < 0) {
      fail(j, rc, "io_uring_submit failed: %s", hg_strerror(rc));
      return rc;
    }
    j->inflight = 1;
    j->fill ^= 1;
    if (j->mark_due) roll_mark(j); /* while the kernel works on the batch */
    zero_spare_pace(j, b->len);
    return 0;
  }

  ssize_t w;
  if (j->in_memory && !j->map_tried) seg_map(j);
  if (b->fault == HG_JOURNAL_FAULT_EIO)
    w = -EIO;
  else if (b->fault == HG_JOURNAL_FAULT_ENOSPC)
    w = -ENOSPC;
  else if (j->map != NULL && b->fault == HG_JOURNAL_FAULT_NONE) {
    memcpy(j->map + b->file_off, b->buf, b->len); /* the page cache, as pwritev would */
    w = (ssize_t)b->len;
  } else
    do
      w = pwritev(b->fd, &b->iov, 1, (off_t)b->file_off);
    while (w < 0 && errno == EINTR);
  if (w < 0 && b->fault == HG_JOURNAL_FAULT_NONE) w = -errno;
  b->write_res = (int)w;
  b->sync_res = 0;
  if ((size_t)w == b->len && !j->in_memory && fdatasync(b->fd) != 0) b->sync_res = -errno;
  size_t done = b->len; /* finish_batch clears it */
  finish_batch(j, b);
  if (j->mark_due) roll_mark(j);
  zero_spare_pace(j, done);
  return atomic_load_explicit(&j->err, memory_order_relaxed); /* own thread */
}

int hg_journal_append(hg_journal_t *j, uint64_t seq, uint64_t ts, const void *payload, uint32_t len) {
  if (atomic_load_explicit(&j->err, memory_order_relaxed) != 0) return HG_EUNAVAIL; /* own thread */
  if (len > j->opt.max_payload || (payload == NULL && len > 0)) return HG_EINVAL;
  if (seq != j->next_seq) return HG_ERANGE;
  batch_t *b = &j->b[j->fill];
  size_t need = (size_t)HG_JOURNAL_RECORD_SIZE(len);
  if (need > j->opt.batch_bytes - b->len) return HG_EBUSY;
  uint8_t *h = b->buf + b->len;
  hg_st32(h, HG_JOURNAL_RECORD_MAGIC);
  hg_st16(h + 4, HG_JOURNAL_FORMAT_VERSION);
  hg_st16(h + 6, 0);
  hg_st32(h + 8, len);
  hg_st64(h + 16, seq);
  hg_st64(h + 24, ts);
  if (len > 0) memcpy(h + RHDR, payload, len);
  memset(h + RHDR + len, 0, need - RHDR - len);
  hg_st32(h + 12, record_crc(h, h + RHDR, len));
  if (b->len == 0) b->first_seq = seq;
  b->last_seq = seq;
  b->len += need;
  j->next_seq++;
  return 0;
}

int hg_journal_commit(hg_journal_t *j) {
  int err = atomic_load_explicit(&j->err, memory_order_relaxed); /* own thread */
  if (err != 0) return err;
  if (!j->inflight && j->b[j->fill].len > 0) return submit(j);
  return 0;
}

static int reap_one(hg_journal_t *j, int timeout_ms) {
  struct io_uring_cqe *cqe = NULL;
  int rc;
  do {
    if (timeout_ms == 0) {
      rc = io_uring_peek_cqe(&j->ring, &cqe);
    } else if (timeout_ms < 0) {
      rc = io_uring_wait_cqe(&j->ring, &cqe);
    } else {
      struct __kernel_timespec ts = {.tv_sec = timeout_ms / 1000,
                                     .tv_nsec = (long long)(timeout_ms % 1000) * 1000000};
      rc = io_uring_wait_cqe_timeout(&j->ring, &cqe, &ts);
    }
  } while (rc == -EINTR);
  if (rc == -EAGAIN || rc == -ETIME) return 0;
  if (rc < 0) {
    fail(j, rc, "waiting for io_uring completions failed: %s", hg_strerror(rc));
    return rc;
  }
  uint64_t tag = io_uring_cqe_get_data64(cqe);
  batch_t *b = &j->b[(tag >> 1) & 1u];
  if (tag & 1u)
    b->sync_res = cqe->res;
  else
    b->write_res = cqe->res;
  io_uring_cqe_seen(&j->ring, cqe);
  if (++b->cqes == 2) {
    j->inflight = 0;
    finish_batch(j, b);
  }
  return 1;
}

int hg_journal_poll(hg_journal_t *j, int timeout_ms) {
  int err = atomic_load_explicit(&j->err, memory_order_relaxed); /* own thread */
  if (err != 0) return err;
  while (j->inflight) {
    int rc = reap_one(j, timeout_ms);
    if (rc <= 0) return rc;
  }
  return hg_journal_commit(j);
}

int hg_journal_sync(hg_journal_t *j) {
  for (;;) {
    int rc = hg_journal_commit(j);
    if (rc != 0) return rc;
    if (!j->inflight) return 0; /* nothing staged is left */
    if ((rc = hg_journal_poll(j, -1)) != 0) return rc;
  }
}

uint64_t hg_journal_durable_seq(const hg_journal_t *j) {
  /* acquire: pairs with the release in finish_batch */
  return atomic_load_explicit(&j->durable_seq, memory_order_acquire);
}

int hg_journal_failed(const hg_journal_t *j) {
  /* acquire: pairs with the release in fail(), so errmsg is complete */
  return atomic_load_explicit(&j->err, memory_order_acquire);
}

int hg_journal_error(const hg_journal_t *j, const char **msg) {
  int err = hg_journal_failed(j);
  if (msg != NULL) *msg = err != 0 ? j->errmsg : "";
  return err;
}

uint64_t hg_journal_next_seq(const hg_journal_t *j) { return j->next_seq; }

int hg_journal_uses_io_uring(const hg_journal_t *j) { return j->use_uring; }

int hg_journal_set_eventfd(hg_journal_t *j, int fd) {
  if (!j->use_uring) return 0;
  return io_uring_register_eventfd(&j->ring, fd);
}

/* ------------------------------------------------------------------------ */
/* Recovery                                                                  */
/* ------------------------------------------------------------------------ */

/* Positions the writer at the end of the good data of segment m, taking
 * over its fd. */
static void position_at(hg_journal_t *j, seg_map_t *m, uint64_t off) {
  seg_unmap(j);
  if (j->fd >= 0) close(j->fd);
  j->fd = m->fd;
  m->fd = -1;
  j->seg_first = m->first_seq;
  j->seg_cap = m->size;
  j->write_off = off;
  memcpy(j->seg_name, m->name, NAME_LEN);
}

/* Bytes in [off, end) lying in 8-byte words that hold data: what a torn
 * batch left of its records, without the never-written (zero) stretches
 * between the pieces that did reach the disk. off is 8-aligned. */
static uint64_t torn_bytes(const uint8_t *base, uint64_t off, uint64_t end) {
  uint64_t n = 0;
  for (uint64_t w = off; w < end; w += 8) {
    uint64_t hi = end - w < 8 ? end : w + 8;
    for (uint64_t k = w; k < hi; k++)
      if (base[k] != 0) {
        n += hi - w;
        break;
      }
  }
  return n;
}

/* What an operator can do when the journal cannot be opened as it is. */
#define RECOVERY_OPTIONS                                                                          \
  "Options: restore the data directory from a backup (ops/restore); or, when the journal is "     \
  "whole from seq 1 and only state/ is in doubt, move state/ aside and start from the journal " \
  "alone (ops/RUNBOOK.md)"

/* Where the floor a journal must reach came from, for messages. */
static void floor_source(const hg_journal_t *j, uint64_t floor, char *out, size_t len) {
  if (j->mark_seq >= floor && j->mark_dirfd >= 0) {
    char when[32];
    fmt_time(when, j->mark_time);
    snprintf(out, len, "durable mark %s written %s", j->opt.mark_path, when);
  } else {
    snprintf(out, len, "durable floor given at open, the latest snapshot's seq");
  }
}

/* Recovery at open: list the segments, check that they run on without a
 * gap, scan each record (CRC, seq), cut a torn last batch when allowed, and
 * check the end against the durable floor and the mark's segment. It is
 * one function of about 200 lines on purpose: each step either refuses the
 * start with a message naming the range, the file and the options, or hands
 * the next step what it found, and read top to bottom it is the decision
 * journal.h's "Recovery" section describes, in that order. */
static int recover(hg_journal_t *j, uint64_t floor, hg_journal_record_fn record, void *record_ctx) {
  uint64_t *firsts;
  size_t n;
  int rc = list_segments(j->dirfd, &firsts, &n);
  if (rc != 0) {
    jlog(&j->opt, HG_LOG_ERROR, "journal: cannot list %s: %s", j->dir, hg_strerror(rc));
    return rc;
  }
  uint64_t expected = n > 0 ? firsts[0] : j->opt.first_seq;
  seg_map_t m = {.fd = -1};
  uint64_t bad_off = 0, tail_end = 0;
  const char *why = NULL;
  const char *torn = NULL; /* "torn write" or "torn record" when the scan ends in a torn tail */
  char gap[128];
  size_t i;
  int corrupt = 0;
  /* The scan decides; nothing on disk changes until every check passed. */
  for (i = 0; i < n; i++) {
    unmap_segment(&m);
    rc = map_segment(j->dirfd, firsts[i], O_RDWR, &m);
    if (rc != 0) {
      jlog(&j->opt, HG_LOG_ERROR, "journal: cannot open %s/%s: %s", j->dir, m.name,
           hg_strerror(rc));
      goto out;
    }
    unsigned version = 0;
    int h = check_seg_header(&m, &why, &version);
    if (h == HDR_NEWER) {
      jlog(&j->opt, HG_LOG_ERROR,
           "journal: %s/%s: segment format version %u is newer than this build reads (version %u); "
           "open it with a newer Hourglass",
           j->dir, m.name, version, HG_JOURNAL_FORMAT_VERSION);
      rc = HG_EVERSION;
      goto out;
    }
    if (h == HDR_BAD || (i > 0 && m.first_seq != expected)) {
      if (h != HDR_BAD && m.first_seq > expected) {
        snprintf(gap, sizeof gap, "sequence gap between segments: records %" PRIu64 "..%" PRIu64
                 " are missing", expected, m.first_seq - 1);
        why = gap;
      } else if (h != HDR_BAD) {
        why = "segment overlaps the previous one";
      }
      bad_off = 0;
      corrupt = 1;
      break;
    }
    uint64_t off = SHDR;
    rec_view_t v = {0};
    int r;
    for (;;) {
      r = check_record(m.base, m.size, off, &v);
      if (r != REC_OK || v.seq != expected) break;
      /* Whatever follows (end marker, torn tail, corruption) is cut after
       * this record at the earliest. */
      if (record != NULL) record(record_ctx, v.seq, v.ts, v.payload, v.len);
      expected++;
      off += HG_JOURNAL_RECORD_SIZE(v.len);
    }
    if (r == REC_NEWER) {
      jlog(&j->opt, HG_LOG_ERROR,
           "journal: %s/%s offset %" PRIu64 ": record format version %u is newer than this build "
           "reads (version %u); open it with a newer Hourglass",
           j->dir, m.name, off, v.version, HG_JOURNAL_FORMAT_VERSION);
      rc = HG_EVERSION;
      goto out;
    }
    int last = i + 1 == n;
    bad_off = off;
    if (r == REC_END) {
      uint64_t nz = nonzero_end(m.base, m.size, off);
      if (nz == off) {
        if (last) position_at(j, &m, off);
        continue;
      }
      if (last && count_valid_from(m.base, m.size, off) == 0) {
        torn = "torn write";
        why = NULL;
        tail_end = nz;
        break;
      }
      why = "data after the end-of-data marker";
      corrupt = 1;
      break;
    }
    if (r == REC_OK) why = "record seq out of order";
    else why = v.why;
    if (r == REC_BAD && last && count_valid_from(m.base, m.size, off + 8) == 0) {
      torn = "torn record";
      tail_end = nonzero_end(m.base, m.size, off);
      break;
    }
    corrupt = 1;
    break;
  }
  uint64_t end = expected - 1; /* last record kept */

  if (corrupt && !j->opt.repair) {
    jlog(&j->opt, HG_LOG_ERROR,
         "journal: %s/%s: corrupt at offset %" PRIu64 " (%s) after seq %" PRIu64
         "; start-up stopped, nothing was changed. The repair option cuts only a torn last batch. "
         RECOVERY_OPTIONS, j->dir, m.name, bad_off, why, end);
    rc = HG_ECORRUPT;
    goto out;
  }
  if (floor > 0 && (n == 0 || end < floor)) {
    char src[PATH_MAX + 64];
    floor_source(j, floor, src, sizeof src);
    if (n == 0)
      jlog(&j->opt, HG_LOG_ERROR,
           "journal: %s holds no segment but seq %" PRIu64 " was durable (%s): records up to seq %"
           PRIu64 " are missing; start-up stopped, nothing was changed. If the journal was moved, put it "
           "back. " RECOVERY_OPTIONS, j->dir, floor, src, floor);
    else if (corrupt)
      jlog(&j->opt, HG_LOG_ERROR,
           "journal: %s/%s: corrupt at offset %" PRIu64 " (%s) after seq %" PRIu64
           ": the journal ends at seq %" PRIu64 " but seq %" PRIu64 " was durable (%s): records %"
           PRIu64 "..%" PRIu64 " are missing or damaged; start-up stopped, nothing was changed. "
           RECOVERY_OPTIONS,
           j->dir, m.name, bad_off, why, end, end, floor, src, end + 1, floor);
    else
      jlog(&j->opt, HG_LOG_ERROR,
           "journal: %s ends at seq %" PRIu64 " but seq %" PRIu64 " was durable (%s): records %"
           PRIu64 "..%" PRIu64 " are missing%s; start-up stopped, nothing was changed. If segments "
           "were moved, put them back. " RECOVERY_OPTIONS,
           j->dir, end, floor, src, end + 1, floor, torn != NULL ? " or damaged" : "");
    rc = HG_ECORRUPT;
    goto out;
  }

  /* The segment the mark names was whole on disk (renamed and synced)
   * before the mark was written: without it the journal lost its newest
   * records, however many of them the mark's seq can vouch for. */
  if (j->mark_seg > 0) {
    size_t k = 0;
    while (k < n && firsts[k] != j->mark_seg) k++;
    if (k == n) {
      char src[PATH_MAX + 64], name[NAME_LEN];
      floor_source(j, j->mark_seq, src, sizeof src);
      seg_name(name, j->mark_seg);
      jlog(&j->opt, HG_LOG_ERROR,
           "journal: %s/%s is missing, but it held the newest records (%s names it): records "
           "from seq %" PRIu64 " on are lost; start-up stopped, nothing was changed. If the "
           "journal or its segments were moved, put them back. " RECOVERY_OPTIONS,
           j->dir, name, src, j->mark_seg);
      rc = HG_ECORRUPT;
      goto out;
    }
  }
  if (corrupt) {
    /* Repair cuts only what a crash can leave torn: part of the one batch
     * that was in flight, at the end of the last segment. */
    uint64_t data_end = bad_off > 0 ? nonzero_end(m.base, m.size, bad_off) : 0;
    const char *refused = NULL;
    if (i + 1 != n)
      refused = "it is not in the last segment";
    else if (bad_off == 0)
      refused = "the segment header is bad (a header is synced before its segment is used)";
    else if (data_end - bad_off > j->opt.batch_bytes)
      refused = "more data than one batch follows it";
    if (refused != NULL) {
      jlog(&j->opt, HG_LOG_ERROR,
           "journal: repair refused: %s/%s corrupt at offset %" PRIu64 " (%s) after seq %" PRIu64
           ", and %s: cutting there could drop acknowledged records; nothing was changed. "
           RECOVERY_OPTIONS, j->dir, m.name, bad_off, why, end, refused);
      rc = HG_ECORRUPT;
      goto out;
    }
    int bad_is_record = hg_ld32(m.base + bad_off) == HG_JOURNAL_RECORD_MAGIC;
    rec_view_t v;
    uint64_t dropped;
    if (bad_is_record && check_record(m.base, m.size, bad_off, &v) == REC_OK)
      dropped = count_valid_from(m.base, m.size, bad_off);
    else
      dropped = (uint64_t)bad_is_record + count_valid_from(m.base, m.size, bad_off + 8);
    if ((rc = zero_range(m.fd, bad_off, m.size - bad_off)) != 0) goto zero_failed;
    position_at(j, &m, bad_off);
    jlog(&j->opt, HG_LOG_WARN,
         "journal: repair: truncated %s/%s at offset %" PRIu64 " (%s): dropped %" PRIu64
         " records from seq %" PRIu64 " on (never acknowledged: a torn last batch)",
         j->dir, m.name, bad_off, why, dropped, expected);
  } else if (torn != NULL) {
    char what[sizeof gap + 8] = ""; /* " (" why ")": why is at most gap's text */
    if (why != NULL) snprintf(what, sizeof what, " (%s)", why);
    jlog(&j->opt, HG_LOG_WARN,
         "journal: %s/%s: %s at the tail, offset %" PRIu64 "%s: %" PRIu64
         " bytes truncated (never acknowledged); journal ends at seq %" PRIu64,
         j->dir, m.name, torn, bad_off, what, torn_bytes(m.base, bad_off, tail_end), end);
    if ((rc = zero_range(m.fd, bad_off, m.size - bad_off)) != 0) goto zero_failed;
    position_at(j, &m, bad_off);
  }
  j->next_seq = expected;
  atomic_store_explicit(&j->durable_seq, expected - 1, memory_order_relaxed); /* not yet shared */
  rc = 0;
  goto out;
zero_failed:
  jlog(&j->opt, HG_LOG_ERROR, "journal: cannot truncate %s/%s: %s", j->dir, m.name,
       hg_strerror(rc));
out:
  unmap_segment(&m);
  free(firsts);
  return rc;
}

static void destroy(hg_journal_t *j) {
  if (j->use_uring) io_uring_queue_exit(&j->ring);
  seg_unmap(j);
  if (j->fd >= 0) close(j->fd);
  if (j->spare_fd >= 0) {
    close(j->spare_fd);
    unlinkat(j->dirfd, SPARE_NAME, 0);
  }
  if (j->dirfd >= 0) close(j->dirfd);
  if (j->mark_dirfd >= 0) close(j->mark_dirfd);
  free(j->b[0].buf);
  free(j->b[1].buf);
  free(j);
}

int hg_journal_open(const char *dir, const hg_journal_options_t *opt, hg_journal_t **out) {
  return hg_journal__open_scan(dir, opt, NULL, NULL, out);
}

int hg_journal__open_scan(const char *dir, const hg_journal_options_t *opt,
                          hg_journal_record_fn record, void *record_ctx, hg_journal_t **out) {
  hg_journal_options_t o;
  hg_journal_options_init(&o);
  if (opt != NULL) {
    o = *opt;
    if (o.segment_size == 0) o.segment_size = DEFAULT_SEGMENT_SIZE;
    if (o.max_payload == 0) o.max_payload = DEFAULT_MAX_PAYLOAD;
    if (o.batch_bytes == 0) o.batch_bytes = DEFAULT_BATCH_BYTES;
    if (o.first_seq == 0) o.first_seq = 1;
  }
  if (dir == NULL || out == NULL || strlen(dir) >= PATH_MAX ||
      o.batch_bytes < HG_JOURNAL_RECORD_SIZE(o.max_payload) ||
      o.segment_size < (uint64_t)SHDR + o.batch_bytes || o.max_payload > UINT32_MAX - 64u) {
    jlog(&o, HG_LOG_ERROR,
         "journal: invalid options (need batch_bytes >= record size of max_payload and "
         "segment_size >= %u + batch_bytes)", SHDR);
    return HG_EINVAL;
  }
  hg_journal_t *j = calloc(1, sizeof *j);
  if (j == NULL) return -ENOMEM;
  j->opt = o;
  j->opt.mark_path = NULL; /* set below to the copy */
  j->fd = j->spare_fd = j->mark_dirfd = -1;
  strcpy(j->dir, dir);
  j->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc;
  if (j->dirfd < 0) {
    rc = -errno;
    jlog(&o, HG_LOG_ERROR, "journal: cannot open directory %s: %s", dir, hg_strerror(rc));
    goto fail;
  }
  struct statfs fs;
  int in_memory = fstatfs(j->dirfd, &fs) == 0 &&
                  (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
  j->zero_fill = !o.no_zero_fill && !in_memory;
  j->in_memory = in_memory;
  for (int k = 0; k < 2; k++) {
    j->b[k].buf = aligned_alloc(4096, ((size_t)o.batch_bytes + 4095u) & ~(size_t)4095u);
    if (j->b[k].buf == NULL) {
      rc = -ENOMEM;
      goto fail;
    }
    memset(j->b[k].buf, 0, o.batch_bytes); /* fault the pages in now, not on the hot path */
  }
  unlinkat(j->dirfd, SPARE_NAME, 0); /* a spare left by a crash; a new one is made below */
  if (o.mark_path != NULL) {
    if (strlen(o.mark_path) >= PATH_MAX) {
      rc = HG_EINVAL;
      goto fail;
    }
    strcpy(j->mark_path, o.mark_path);
    j->opt.mark_path = j->mark_path;
    if ((rc = read_mark(j)) != 0) goto fail;
  }
  uint64_t floor = o.durable_floor > j->mark_seq ? o.durable_floor : j->mark_seq;
  if ((rc = recover(j, floor, record, record_ctx)) != 0) goto fail;
  if (j->fd < 0) {
    if ((rc = activate_spare(j, j->next_seq)) != 0) {
      jlog(&o, HG_LOG_ERROR, "journal: cannot create the first segment in %s: %s", dir,
           hg_strerror(rc));
      goto fail;
    }
  } else if ((rc = create_spare(j)) != 0) {
    jlog(&o, HG_LOG_WARN, "journal: %s/%s: cannot preallocate the next segment yet: %s", dir,
         SPARE_NAME, hg_strerror(rc));
  }
  if (j->mark_dirfd >= 0) {
    /* Records a crashed process left in the page cache are made durable
     * before the mark (and anything new) counts on them. */
    if (fdatasync(j->fd) != 0) {
      rc = -errno;
      jlog(&o, HG_LOG_ERROR, "journal: cannot sync %s/%s: %s", dir, j->seg_name,
           hg_strerror(rc));
      goto fail;
    }
    j->mark_due = 0; /* a first segment created above is covered by this write */
    if ((rc = write_mark(j, j->next_seq - 1)) != 0)
      jlog(&o, HG_LOG_WARN,
           "journal: cannot write the durable mark %s at seq %" PRIu64 ": %s; it stays at seq %" PRIu64,
           j->mark_path, j->next_seq - 1, hg_strerror(rc), j->mark_seq);
  }
  if (!o.force_fallback && !in_memory) {
    int e = atomic_exchange(&fail_next_uring_init, 0);
    if (e == 0) e = io_uring_queue_init(RING_ENTRIES, &j->ring, 0);
    if (e == 0)
      j->use_uring = 1;
    else
      jlog(&o, HG_LOG_WARN,
           "journal: io_uring unavailable (%s); falling back to pwritev + fdatasync", hg_strerror(e));
  }
  *out = j;
  return 0;
fail:
  destroy(j);
  return rc;
}

int hg_journal_close(hg_journal_t *j) {
  if (j == NULL) return 0;
  int rc = hg_journal_sync(j);
  while (j->use_uring && j->inflight && reap_one(j, -1) > 0) {
  }
  if (rc == 0 && j->mark_dirfd >= 0) {
    int e = write_mark(j, hg_journal_durable_seq(j));
    if (e != 0)
      jlog(&j->opt, HG_LOG_WARN,
           "journal: cannot update the durable mark %s at close: %s; it stays at seq %" PRIu64,
           j->mark_path, hg_strerror(e), j->mark_seq);
  }
  destroy(j);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

struct hg_journal_reader {
  int dirfd;
  seg_map_t m;       /* current segment; base NULL when none is open yet */
  uint64_t off;      /* next slot in m */
  uint64_t expected; /* seq of the next slot */
  uint64_t from;
};

/* Switches to the segment starting at r->expected. 1: done; 0: none yet. */
static int reader_enter(hg_journal_reader_t *r) {
  seg_map_t m;
  int rc = map_segment(r->dirfd, r->expected, O_RDONLY, &m);
  if (rc == -ENOENT) return 0;
  if (rc != 0) return rc;
  const char *why;
  unsigned version;
  int h = check_seg_header(&m, &why, &version);
  if (h != HDR_OK) {
    unmap_segment(&m);
    return h == HDR_NEWER ? HG_EVERSION : HG_ECORRUPT;
  }
  unmap_segment(&r->m);
  r->m = m;
  r->off = SHDR;
  return 1;
}

int hg_journal_first_seq(const char *dir, uint64_t *seq) {
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return -errno;
  uint64_t *firsts;
  size_t n;
  int rc = list_segments(dirfd, &firsts, &n);
  close(dirfd);
  if (rc != 0) return rc;
  if (n == 0) rc = HG_ENOTFOUND;
  else *seq = firsts[0];
  free(firsts);
  return rc;
}

int hg_journal_reader_open(const char *dir, uint64_t from_seq, hg_journal_reader_t **out) {
  hg_journal_reader_t *r = calloc(1, sizeof *r);
  if (r == NULL) return -ENOMEM;
  r->m.fd = -1;
  r->from = from_seq;
  r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc;
  if (r->dirfd < 0) {
    rc = -errno;
    free(r);
    return rc;
  }
  uint64_t *firsts;
  size_t n;
  if ((rc = list_segments(r->dirfd, &firsts, &n)) != 0) goto fail;
  size_t k = n;
  for (size_t i = 0; i < n && firsts[i] <= from_seq; i++) k = i;
  if (n > 0 && k == n) {
    free(firsts);
    rc = HG_ENOTFOUND;
    goto fail;
  }
  r->expected = n > 0 ? firsts[k] : from_seq;
  free(firsts);
  if (n > 0 && (rc = reader_enter(r)) != 1) {
    if (rc == 0) rc = HG_ENOTFOUND; /* deleted between listing and opening */
    goto fail;
  }
  *out = r;
  return 0;
fail:
  unmap_segment(&r->m);
  close(r->dirfd);
  free(r);
  return rc;
}

int hg_journal_reader_next(hg_journal_reader_t *r, uint64_t max_seq, hg_journal_record_t *rec) {
  for (;;) {
    if (r->expected > max_seq) return HG_ENOTFOUND;
    int rc;
    if (r->m.base == NULL) {
      if ((rc = reader_enter(r)) <= 0) return rc == 0 ? HG_ENOTFOUND : rc;
    }
    rec_view_t v;
    int st = check_record(r->m.base, r->m.size, r->off, &v);
    if (st == REC_NEWER) return HG_EVERSION;
    if (st == REC_BAD || (st == REC_OK && v.seq != r->expected)) return HG_ECORRUPT;
    if (st == REC_END) {
      if (r->m.first_seq == r->expected) return HG_ENOTFOUND; /* the next segment is this one */
      if ((rc = reader_enter(r)) <= 0) return rc == 0 ? HG_ENOTFOUND : rc;
      continue;
    }
    r->off += HG_JOURNAL_RECORD_SIZE(v.len);
    r->expected++;
    if (v.seq < r->from) continue;
    rec->seq = v.seq;
    rec->ts = v.ts;
    rec->payload = v.payload;
    rec->len = v.len;
    return 0;
  }
}

void hg_journal_reader_close(hg_journal_reader_t *r) {
  if (r == NULL) return;
  unmap_segment(&r->m);
  close(r->dirfd);
  free(r);
}
