/*
 * The gateway's outbound journal (format in outlog.h).
 *
 * Structure. Appends copy records into one staging buffer; hg_outlog_flush
 * hands the whole buffer to the kernel with one pwrite at the end of the
 * current segment. The gateway calls flush before it writes to any socket,
 * so a frame a client has seen has at least reached the page cache. Bytes
 * that fail to write stay staged and are retried by the next flush; only
 * when the buffer is full as well are records dropped (and counted).
 *
 * Keys: an open-addressing table by key id holds each key's next seq and a
 * ring of sparse index entries (seq -> segment, offset): the key's first
 * record in each segment and every index_every-th seq. A read starts at the
 * last entry at or before the wanted seq and walks forward through a read
 * window (pread in 64 KiB chunks); a cursor lets consecutive seqs continue
 * where the previous read stopped.
 *
 * Session ids: an open-addressing set of (key, sid) with the segment that
 * holds each one's record, so a roll can copy the records of segments about
 * to be deleted into the new segment (carry forward). Seq marks for every
 * key are written the same way, so numbering survives the deletion of the
 * segments that held a key's frames.
 *
 * Positions: each key keeps the last position it logged frames at and how
 * many (restored by the scan from its position records and the frames
 * after them), and how many of them were met again at the current
 * position (seen_n, valid for generation seen_gen of the position).
 *
 * Tables are sized at open (keys and ids found plus the configured room);
 * nothing is allocated per record.
 */
#include "outlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hourglass/crc32c.h"
#include "prefault.h"
#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "logline.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the outbound log stores its little-endian format with plain loads and stores"
#endif

#define SHDR HG_OUTLOG_SEGMENT_HEADER
#define RHDR HG_OUTLOG_RECORD_HEADER
#define READ_CHUNK (64u << 10)
#define POS_LEN 16u /* a position record's payload */

typedef struct ixent {
  uint64_t seq, seg, off;
} ixent_t;

typedef struct okey {
  uint64_t key;      /* 0: free */
  uint64_t next_seq;
  uint64_t last_seg; /* segment of the key's last indexed record */
  ixent_t *ix;       /* ring of index_entries, oldest at ix_head; owned here */
  uint32_t ix_head, ix_n;
  uint64_t pos_a, pos_b; /* last position frames were logged at (pos_a 0: none) */
  uint64_t pos_n;        /* frames logged at it */
  uint64_t seen_gen, seen_n;
  int pos_on;            /* the key's last position record is pos (0: none, or untracked) */
} okey_t;

typedef struct sident {
  uint64_t key;      /* 0: free */
  uint64_t seg;      /* segment holding its record */
  uint8_t sid[HG_OUTLOG_SID_LEN];
} sident_t;

typedef struct seg {
  uint64_t no;
  uint64_t size;     /* bytes in the file */
  int fd;
} seg_t;

typedef struct rec {
  uint32_t type, len;
  uint64_t key, seq;
  const uint8_t *payload;
} rec_t;

struct hg_outlog {
  hg_outlog_options_t o;
  char dir[PATH_MAX];
  seg_t *segs;        /* oldest first; the last is written to */
  uint32_t n_segs, cap_segs;
  uint8_t *stage;     /* bytes for the current segment at offset segs[last].size */
  size_t staged, stage_cap;
  okey_t *keys;
  uint32_t key_mask, n_keys, key_limit;
  sident_t *sids;
  uint32_t sid_mask, n_sids, sid_limit;
  int carry_all;      /* a drop may have lost a carried record: carry everything */
  int roll_pending;   /* a roll's carried records are not all written yet */
  int bad_newest;     /* the newest segment found has a bad header: start another */
  uint64_t delete_below;
  uint64_t drops_at_roll;
  uint8_t *rbuf;      /* read window */
  size_t rcap, rlen;
  uint64_t rseg, roff;
  uint64_t cur_key, cur_seq, cur_seg, cur_off;
  uint64_t pos_a, pos_b;   /* hg_outlog_set_position's (pos_a 0: none) */
  uint64_t last_a, last_b; /* the last position set other than none */
  uint64_t pos_gen;        /* changes with last_a, last_b */
  _Atomic uint64_t st_bytes, st_errors, st_dropped, st_corrupt;
  _Atomic uint32_t st_segments;
  _Atomic int st_last_error;
};

/* Monitoring counters order nothing else: relaxed. */
#define ST_ADD(l, f, v) atomic_fetch_add_explicit(&(l)->f, (v), memory_order_relaxed)
#define ST_SET(l, f, v) atomic_store_explicit(&(l)->f, (v), memory_order_relaxed)

static void olog(hg_outlog_t *l, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void olog(hg_outlog_t *l, int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hg_logline_v(l->o.log, l->o.log_ctx, "outlog", level, fmt, ap);
  va_end(ap);
}

static void seg_path(const hg_outlog_t *l, uint64_t no, char *out, size_t cap) {
  snprintf(out, cap, "%s/outlog-%020" PRIu64 ".hgo", l->dir, no);
}

/* ------------------------------------------------------------- records */

/* The CRC of the record at r: its header but the CRC field, then its
 * payload, which follows the header (one run from byte 16 on). */
static uint32_t rec_crc(const uint8_t *r, uint32_t len) {
  return hg_crc32c(hg_crc32c(0, r, 12), r + 16, RHDR - 16 + (size_t)len);
}

/* Encodes a record at dst (RECORD_SIZE(len) bytes). */
static void rec_put(uint8_t *dst, uint32_t type, uint64_t key, uint64_t seq, const void *p,
                    uint32_t len) {
  size_t rs = HG_OUTLOG_RECORD_SIZE(len);
  memset(dst, 0, RHDR);
  memset(dst + RHDR + len, 0, rs - RHDR - len); /* the padding; the payload is copied over */
  hg_st32(dst, HG_OUTLOG_RECORD_MAGIC);
  dst[4] = (uint8_t)type;
  hg_st32(dst + 8, len);
  hg_st64(dst + 16, key);
  hg_st64(dst + 24, seq);
  if (len > 0) memcpy(dst + RHDR, p, len);
  hg_st32(dst + 12, rec_crc(dst, len));
}

/* Checks the record at p with avail bytes up to the end of the data.
 * 0 and *r; HG_ECORRUPT; HG_EVERSION (a type this version does not know). */
static int rec_check(const hg_outlog_t *l, const uint8_t *p, uint64_t avail, rec_t *r) {
  if (avail < RHDR || hg_ld32(p) != HG_OUTLOG_RECORD_MAGIC) return HG_ECORRUPT;
  uint32_t len = hg_ld32(p + 8);
  if (len > l->o.max_frame || HG_OUTLOG_RECORD_SIZE(len) > avail) return HG_ECORRUPT;
  if (rec_crc(p, len) != hg_ld32(p + 12)) return HG_ECORRUPT;
  r->type = p[4];
  r->len = len;
  r->key = hg_ld64(p + 16);
  r->seq = hg_ld64(p + 24);
  r->payload = p + RHDR;
  if (r->type < HG_OUTLOG_FRAME || r->type > HG_OUTLOG_POSITION) return HG_EVERSION;
  if (r->key == 0 || (r->type == HG_OUTLOG_SESSION_ID && len != HG_OUTLOG_SID_LEN) ||
      (r->type == HG_OUTLOG_POSITION && len != POS_LEN))
    return HG_ECORRUPT;
  return 0;
}

/* ---------------------------------------------------------------- keys */

static okey_t *key_find(const hg_outlog_t *l, uint64_t key) {
  if (key == 0) return NULL;
  for (uint32_t i = (uint32_t)hg_mix64(key) & l->key_mask;; i = (i + 1) & l->key_mask) {
    if (l->keys[i].key == key) return &l->keys[i];
    if (l->keys[i].key == 0) return NULL;
  }
}

static int keys_resize(hg_outlog_t *l, uint32_t entries) {
  uint32_t cap = 16;
  while (cap < entries * 2u && cap < (1u << 30)) cap <<= 1;
  if (cap <= l->key_mask + 1u && l->keys != NULL) return 0;
  okey_t *nk = calloc(cap, sizeof *nk);
  if (nk == NULL) return -ENOMEM;
  for (uint32_t j = 0; l->keys != NULL && j <= l->key_mask; j++) {
    if (l->keys[j].key == 0) continue;
    uint32_t i = (uint32_t)hg_mix64(l->keys[j].key) & (cap - 1);
    while (nk[i].key != 0) i = (i + 1) & (cap - 1);
    nk[i] = l->keys[j];
  }
  free(l->keys);
  l->keys = nk;
  l->key_mask = cap - 1;
  return 0;
}

/* Adds key; grow != 0 (open only) lets the table grow. */
static int key_new(hg_outlog_t *l, uint64_t key, int grow, okey_t **out) {
  okey_t *k = key_find(l, key);
  if (k != NULL) {
    *out = k;
    return 0;
  }
  if (grow) {
    int rc = keys_resize(l, l->n_keys + 1);
    if (rc != 0) return rc;
  } else if (l->n_keys >= l->key_limit) {
    return HG_EFULL;
  }
  ixent_t *ix = calloc(l->o.index_entries, sizeof *ix);
  if (ix == NULL) return -ENOMEM;
  uint32_t i = (uint32_t)hg_mix64(key) & l->key_mask;
  while (l->keys[i].key != 0) i = (i + 1) & l->key_mask;
  k = &l->keys[i];
  memset(k, 0, sizeof *k);
  k->key = key;
  k->next_seq = 1;
  k->ix = ix;
  l->n_keys++;
  *out = k;
  return 0;
}

static ixent_t *ix_at(const hg_outlog_t *l, const okey_t *k, uint32_t i) {
  return &k->ix[(k->ix_head + i) % l->o.index_entries];
}

static void ix_add(hg_outlog_t *l, okey_t *k, uint64_t seq, uint64_t seg, uint64_t off) {
  if (k->last_seg == seg && seq % l->o.index_every != 0) return;
  k->last_seg = seg;
  if (k->ix_n == l->o.index_entries) {
    k->ix_head = (k->ix_head + 1) % l->o.index_entries;
    k->ix_n--;
  }
  ixent_t *e = ix_at(l, k, k->ix_n++);
  e->seq = seq;
  e->seg = seg;
  e->off = off;
}

/* --------------------------------------------------------- session ids */

static sident_t *sid_find(const hg_outlog_t *l, uint64_t key, const uint8_t *sid) {
  uint64_t h = hg_mix64(key ^ hg_ld64(sid) ^ hg_mix64(hg_ld64(sid + 8)));
  for (uint32_t i = (uint32_t)h & l->sid_mask;; i = (i + 1) & l->sid_mask) {
    sident_t *e = &l->sids[i];
    if (e->key == 0) return e;
    if (e->key == key && memcmp(e->sid, sid, HG_OUTLOG_SID_LEN) == 0) return e;
  }
}

static int sids_resize(hg_outlog_t *l, uint32_t entries) {
  uint32_t cap = 16;
  while (cap < entries * 2u && cap < (1u << 30)) cap <<= 1;
  if (l->sids != NULL && cap <= l->sid_mask + 1u) return 0;
  sident_t *old = l->sids;
  uint32_t oldcap = old != NULL ? l->sid_mask + 1 : 0;
  l->sids = calloc(cap, sizeof *l->sids);
  if (l->sids == NULL) {
    l->sids = old;
    return -ENOMEM;
  }
  l->sid_mask = cap - 1;
  for (uint32_t j = 0; j < oldcap; j++)
    if (old[j].key != 0) *sid_find(l, old[j].key, old[j].sid) = old[j];
  free(old);
  return 0;
}

/* -------------------------------------------------------------- segments */

static seg_t *cur_seg(hg_outlog_t *l) { return &l->segs[l->n_segs - 1]; }

static int seg_index(const hg_outlog_t *l, uint64_t no) {
  uint32_t lo = 0, hi = l->n_segs;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (l->segs[mid].no < no) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < l->n_segs && l->segs[lo].no == no ? (int)lo : -1;
}

static int segs_push(hg_outlog_t *l, uint64_t no, int fd, uint64_t size) {
  if (l->n_segs == l->cap_segs) {
    uint32_t cap = l->cap_segs * 2 + 8;
    seg_t *n = realloc(l->segs, cap * sizeof *n);
    if (n == NULL) return -ENOMEM;
    l->segs = n;
    l->cap_segs = cap;
  }
  l->segs[l->n_segs++] = (seg_t){.no = no, .size = size, .fd = fd};
  ST_SET(l, st_segments, l->n_segs);
  return 0;
}

/* Writes the staged bytes; what is not written stays staged. */
static int write_stage(hg_outlog_t *l) {
  seg_t *s = cur_seg(l);
  size_t done = 0;
  int rc = 0;
  while (done < l->staged) {
    ssize_t n = pwrite(s->fd, l->stage + done, l->staged - done, (off_t)(s->size + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      rc = n < 0 ? -errno : -ENOSPC;
      break;
    }
    done += (size_t)n;
  }
  /* Only whole records count as written: a partial one is rewritten from
   * its start, so the file never holds half a record followed by more. */
  size_t keep = done;
  if (rc != 0) {
    size_t off = 0;
    while (off < done) {
      size_t rs = off == 0 && s->size == 0 ? SHDR : HG_OUTLOG_RECORD_SIZE(hg_ld32(l->stage + off + 8));
      if (off + rs > done) break;
      off += rs;
    }
    keep = off;
  }
  s->size += keep;
  memmove(l->stage, l->stage + keep, l->staged - keep);
  l->staged -= keep;
  ST_ADD(l, st_bytes, keep);
  if (rc != 0) {
    if (atomic_load_explicit(&l->st_last_error, memory_order_relaxed) == 0)
      olog(l, HG_LOG_ERROR, "write to outlog-%020" PRIu64 ".hgo failed: %s (retrying; frames are "
           "still sent)", s->no, strerror(-rc));
    ST_ADD(l, st_errors, 1);
    ST_SET(l, st_last_error, rc);
    return rc;
  }
  if (atomic_load_explicit(&l->st_last_error, memory_order_relaxed) != 0)
    olog(l, HG_LOG_INFO, "writes to the outbound log work again");
  ST_SET(l, st_last_error, 0);
  return 0;
}

/* Once a roll's carried records are written, the segments they replace go. */
static void delete_old(hg_outlog_t *l) {
  if (!l->roll_pending) return;
  l->roll_pending = 0;
  if (atomic_load_explicit(&l->st_dropped, memory_order_relaxed) != l->drops_at_roll) {
    l->carry_all = 1; /* a carried record may be missing: keep everything, carry all next time */
    return;
  }
  l->carry_all = 0;
  uint32_t n = 0;
  while (n + 1 < l->n_segs && l->segs[n].no < l->delete_below) {
    char path[PATH_MAX + 64];
    seg_path(l, l->segs[n].no, path, sizeof path);
    close(l->segs[n].fd);
    if (unlink(path) != 0) olog(l, HG_LOG_WARN, "cannot delete %s: %s", path, strerror(errno));
    n++;
  }
  memmove(l->segs, l->segs + n, (l->n_segs - n) * sizeof *l->segs);
  l->n_segs -= n;
  ST_SET(l, st_segments, l->n_segs);
}

int hg_outlog_flush(hg_outlog_t *l) {
  if (l->staged == 0) return 0;
  int rc = write_stage(l);
  if (rc == 0) delete_old(l);
  return rc;
}

/* Copies a record into the staging buffer, writing first if it is full. */
static int stage_rec(hg_outlog_t *l, uint32_t type, uint64_t key, uint64_t seq, const void *p,
                     uint32_t len, uint64_t *off) {
  size_t rs = HG_OUTLOG_RECORD_SIZE(len);
  if (l->staged + rs > l->stage_cap) hg_outlog_flush(l);
  if (l->staged + rs > l->stage_cap) {
    ST_ADD(l, st_dropped, 1);
    return HG_EUNAVAIL;
  }
  if (off != NULL) *off = cur_seg(l)->size + l->staged;
  rec_put(l->stage + l->staged, type, key, seq, p, len);
  l->staged += rs;
  return 0;
}

static int seg_create(hg_outlog_t *l, uint64_t no) {
  char path[PATH_MAX + 64];
  seg_path(l, no, path, sizeof path);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  int rc = segs_push(l, no, fd, 0);
  if (rc != 0) {
    close(fd);
    unlink(path);
    return rc;
  }
  uint8_t *h = l->stage + l->staged;
  memset(h, 0, SHDR);
  hg_st32(h, HG_OUTLOG_SEGMENT_MAGIC);
  uint16_t v = HG_OUTLOG_VERSION, hs = SHDR;
  memcpy(h + 4, &v, 2);
  memcpy(h + 6, &hs, 2);
  hg_st64(h + 8, no);
  hg_st32(h + 28, hg_crc32c(0, h, 28));
  l->staged += SHDR;
  return 0;
}

/* Stages key's position record: (a, b) with n of its frames logged there. */
static int stage_pos(hg_outlog_t *l, uint64_t key, uint64_t a, uint64_t b, uint64_t n) {
  uint8_t p[POS_LEN];
  hg_st64(p, b);
  hg_st64(p + 8, n);
  return stage_rec(l, HG_OUTLOG_POSITION, key, a, p, POS_LEN, NULL);
}

/* Starts the next segment (the current one's bytes are all written) and
 * carries seq marks, positions and the session ids of doomed segments into
 * it. */
static int roll(hg_outlog_t *l) {
  if (hg_outlog_flush(l) != 0) return HG_EUNAVAIL;
  int rc = seg_create(l, cur_seg(l)->no + 1);
  if (rc != 0) {
    olog(l, HG_LOG_ERROR, "cannot create an outbound log segment: %s", strerror(-rc));
    ST_ADD(l, st_errors, 1);
    ST_SET(l, st_last_error, rc);
    return HG_EUNAVAIL;
  }
  uint64_t no = cur_seg(l)->no;
  l->drops_at_roll = atomic_load_explicit(&l->st_dropped, memory_order_relaxed);
  uint64_t below = l->n_segs > l->o.segments_kept ? l->segs[l->n_segs - l->o.segments_kept].no : 0;
  for (uint32_t i = 0; i <= l->key_mask; i++) {
    okey_t *k = &l->keys[i];
    if (k->key != 0 && k->next_seq > 1)
      stage_rec(l, HG_OUTLOG_SEQ_MARK, k->key, k->next_seq - 1, NULL, 0, NULL);
    if (k->key != 0 && k->pos_a != 0)
      k->pos_on = stage_pos(l, k->key, k->pos_a, k->pos_b, k->pos_n) == 0;
  }
  for (uint32_t i = 0; i <= l->sid_mask; i++) {
    sident_t *e = &l->sids[i];
    if (e->key == 0 || (!l->carry_all && e->seg >= below)) continue;
    if (stage_rec(l, HG_OUTLOG_SESSION_ID, e->key, 0, e->sid, HG_OUTLOG_SID_LEN, NULL) == 0)
      e->seg = no;
  }
  l->delete_below = below;
  l->roll_pending = 1;
  return 0;
}

/* ------------------------------------------------------------ appending */

int hg_outlog_key_add(hg_outlog_t *l, uint64_t key) {
  if (key == 0) return HG_EINVAL;
  okey_t *k;
  return key_new(l, key, 0, &k);
}

void hg_outlog_foreach_key(const hg_outlog_t *l, void (*fn)(void *ctx, uint64_t key),
                           void *ctx) {
  for (uint32_t i = 0; l->keys != NULL && i <= l->key_mask; i++)
    if (l->keys[i].key != 0) fn(ctx, l->keys[i].key);
}

uint64_t hg_outlog_next_seq(const hg_outlog_t *l, uint64_t key) {
  const okey_t *k = key_find(l, key);
  return k != NULL ? k->next_seq : 1;
}

static int pos_cmp(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return a != c ? (a < c ? -1 : 1) : b != d ? (b < d ? -1 : 1) : 0;
}

void hg_outlog_set_position(hg_outlog_t *l, uint64_t a, uint64_t b) {
  l->pos_a = a;
  l->pos_b = a == 0 ? 0 : b;
  if (a == 0 || (a == l->last_a && b == l->last_b)) return;
  l->last_a = a;
  l->last_b = b;
  l->pos_gen++;
}

int hg_outlog_logged(hg_outlog_t *l, uint64_t key) {
  if (l->pos_a == 0) return 0;
  okey_t *k = key_find(l, key);
  if (k == NULL || k->pos_a == 0) return 0;
  int c = pos_cmp(l->pos_a, l->pos_b, k->pos_a, k->pos_b);
  if (c != 0) return c < 0;
  if (k->seen_gen != l->pos_gen) {
    k->seen_gen = l->pos_gen;
    k->seen_n = 0;
  }
  if (k->seen_n >= k->pos_n) return 0;
  k->seen_n++;
  return 1;
}

/* 1 when a frame of k appended now needs a position record before it. */
static int pos_needed(const hg_outlog_t *l, const okey_t *k) {
  if (l->pos_a == 0) return k->pos_on && k->pos_a != 0;
  return !k->pos_on || k->pos_a != l->pos_a || k->pos_b != l->pos_b;
}

int hg_outlog_append(hg_outlog_t *l, uint64_t key, uint64_t seq, const void *frame, uint32_t len) {
  okey_t *k = key_find(l, key);
  if (k == NULL) return HG_ENOTFOUND;
  if (len == 0 || len > l->o.max_frame || frame == NULL || seq < k->next_seq) return HG_EINVAL;
  k->next_seq = seq + 1;
  size_t rs = HG_OUTLOG_RECORD_SIZE(len) + (pos_needed(l, k) ? HG_OUTLOG_RECORD_SIZE(POS_LEN) : 0);
  seg_t *s = cur_seg(l);
  if (s->size + l->staged + rs > l->o.segment_size && s->size + l->staged > SHDR &&
      roll(l) != 0) {
    ST_ADD(l, st_dropped, 1);
    return HG_EUNAVAIL;
  }
  if (pos_needed(l, k)) { /* asked again: a roll restages every key's position */
    int same = k->pos_a == l->pos_a && k->pos_b == l->pos_b;
    uint64_t n = same ? k->pos_n : 0;
    /* Untracked: the key's last position stays, its count stops. */
    int rc = l->pos_a == 0 ? stage_pos(l, key, 0, 0, 0) : stage_pos(l, key, l->pos_a, l->pos_b, n);
    if (rc != 0) return rc; /* the frame is not logged under another position */
    if (l->pos_a != 0) {
      k->pos_a = l->pos_a;
      k->pos_b = l->pos_b;
      k->pos_n = n;
    }
    k->pos_on = l->pos_a != 0;
  }
  uint64_t off;
  int rc = stage_rec(l, HG_OUTLOG_FRAME, key, seq, frame, len, &off);
  if (rc != 0) return rc;
  ix_add(l, k, seq, cur_seg(l)->no, off);
  if (k->pos_on) {
    k->pos_n++;
    k->seen_gen = l->pos_gen;
    k->seen_n = k->pos_n;
  }
  return 0;
}

int hg_outlog_sid_used(const hg_outlog_t *l, uint64_t key, const uint8_t *sid) {
  return sid_find(l, key, sid)->key != 0;
}

int hg_outlog_sid_add(hg_outlog_t *l, uint64_t key, const uint8_t *sid) {
  if (key == 0) return HG_EINVAL;
  sident_t *e = sid_find(l, key, sid);
  if (e->key != 0) return HG_EEXISTS;
  if (l->n_sids >= l->sid_limit) return HG_EFULL;
  e->key = key;
  memcpy(e->sid, sid, HG_OUTLOG_SID_LEN);
  e->seg = cur_seg(l)->no;
  l->n_sids++;
  int rc = stage_rec(l, HG_OUTLOG_SESSION_ID, key, 0, sid, HG_OUTLOG_SID_LEN, NULL);
  if (rc != 0) l->carry_all = 1; /* remembered; the next roll writes it */
  return rc;
}

/* -------------------------------------------------------------- reading */

/* Makes [off, off + need) of segment si readable in the window. */
static int win(hg_outlog_t *l, int si, uint64_t off, size_t need, const uint8_t **p) {
  seg_t *s = &l->segs[si];
  if (off + need > s->size) return HG_ECORRUPT;
  if (l->rseg == s->no && off >= l->roff && off + need <= l->roff + l->rlen) {
    *p = l->rbuf + (off - l->roff);
    return 0;
  }
  size_t want = need > READ_CHUNK ? need : READ_CHUNK; /* need <= rcap: checked by callers */
  if (want > s->size - off) want = (size_t)(s->size - off);
  size_t got = 0;
  while (got < want) {
    ssize_t n = pread(s->fd, l->rbuf + got, want - got, (off_t)(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    got += (size_t)n;
  }
  l->rseg = s->no;
  l->roff = off;
  l->rlen = got;
  if (got < need) return HG_ECORRUPT;
  *p = l->rbuf;
  return 0;
}

uint64_t hg_outlog_oldest(const hg_outlog_t *l, uint64_t key) {
  const okey_t *k = key_find(l, key);
  if (k == NULL || l->n_segs == 0) return 0;
  for (uint32_t i = 0; i < k->ix_n; i++) {
    const ixent_t *e = ix_at(l, k, i);
    if (e->seg >= l->segs[0].no) return e->seq;
  }
  return 0;
}

static void corrupt_at(hg_outlog_t *l, uint64_t seg, uint64_t off) {
  ST_ADD(l, st_corrupt, 1);
  olog(l, HG_LOG_ERROR, "corrupt record in outlog-%020" PRIu64 ".hgo at offset %" PRIu64, seg, off);
}

int hg_outlog_read(hg_outlog_t *l, uint64_t key, uint64_t seq, uint8_t *buf, size_t cap,
                   size_t *len) {
  okey_t *k = key_find(l, key);
  if (k == NULL) return HG_ERANGE;
  if (seq >= k->next_seq) return HG_ENOTFOUND;
  if (l->staged > 0) hg_outlog_flush(l);
  uint64_t sno, off;
  if (l->cur_key == key && l->cur_seq == seq && seg_index(l, l->cur_seg) >= 0) {
    sno = l->cur_seg;
    off = l->cur_off;
  } else {
    uint64_t oldest = hg_outlog_oldest(l, key);
    if (oldest == 0 || seq < oldest) return HG_ERANGE;
    uint32_t lo = 0, hi = k->ix_n; /* last entry with seq <= wanted */
    while (hi - lo > 1) {
      uint32_t mid = (lo + hi) / 2;
      if (ix_at(l, k, mid)->seq <= seq) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const ixent_t *e = ix_at(l, k, lo);
    if (e->seg < l->segs[0].no) return HG_ERANGE;
    sno = e->seg;
    off = e->off;
  }
  int bad = 0;
  for (;;) {
    int si = seg_index(l, sno);
    if (si < 0) return HG_ERANGE;
    seg_t *s = &l->segs[si];
    if (off + RHDR > s->size) {
      if ((uint32_t)si + 1 >= l->n_segs) return bad ? HG_ECORRUPT : HG_ENOTFOUND;
      sno = l->segs[si + 1].no;
      off = SHDR;
      continue;
    }
    const uint8_t *p;
    int rc = win(l, si, off, RHDR, &p);
    if (rc < 0 && rc != HG_ECORRUPT) return rc;
    uint32_t rlen = rc == 0 ? hg_ld32(p + 8) : 0;
    if (rc == 0 && hg_ld32(p) == HG_OUTLOG_RECORD_MAGIC && rlen <= l->o.max_frame &&
        hg_ld64(p + 16) != key && off + HG_OUTLOG_RECORD_SIZE(rlen) <= s->size) {
      off += HG_OUTLOG_RECORD_SIZE(rlen); /* another key's: its CRC is its reader's business */
      continue;
    }
    rec_t r;
    if (rc == 0 && rlen <= l->o.max_frame) rc = win(l, si, off, HG_OUTLOG_RECORD_SIZE(rlen), &p);
    if (rc == 0) rc = rec_check(l, p, s->size - off, &r);
    if (rc != 0) {
      if (rc != HG_ECORRUPT && rc != HG_EVERSION) return rc;
      if (!bad) corrupt_at(l, sno, off); /* once per read, not per step of the search */
      bad = 1;
      off += 8; /* look for the next good record */
      continue;
    }
    if (r.type == HG_OUTLOG_FRAME && r.key == key) {
      if (r.seq > seq) return bad ? HG_ECORRUPT : HG_ENOTFOUND;
      if (r.seq == seq) {
        if (buf != NULL) {
          if (r.len > cap) return -ENOBUFS;
          memcpy(buf, r.payload, r.len);
        }
        *len = r.len;
        l->cur_key = key;
        l->cur_seq = seq + 1;
        l->cur_seg = sno;
        l->cur_off = off + HG_OUTLOG_RECORD_SIZE(r.len);
        return 0;
      }
    }
    off += HG_OUTLOG_RECORD_SIZE(r.len);
  }
}

void hg_outlog_stats(const hg_outlog_t *l, hg_outlog_stats_t *out) {
#define LD(f) atomic_load_explicit(&l->f, memory_order_relaxed)
  out->bytes_written = LD(st_bytes);
  out->write_errors = LD(st_errors);
  out->dropped = LD(st_dropped);
  out->corrupt = LD(st_corrupt);
  out->segments = LD(st_segments);
  out->last_error = LD(st_last_error);
#undef LD
}

/* ------------------------------------------------------------ open, scan */

static int seg_header_ok(const uint8_t *h, uint64_t size, uint64_t no) {
  if (size < SHDR || hg_ld32(h) != HG_OUTLOG_SEGMENT_MAGIC) return HG_ECORRUPT;
  uint16_t v;
  memcpy(&v, h + 4, 2);
  if (hg_crc32c(0, h, 28) != hg_ld32(h + 28)) return HG_ECORRUPT;
  if (v != HG_OUTLOG_VERSION) return HG_EVERSION;
  if (hg_ld64(h + 8) != no) return HG_ECORRUPT;
  return 0;
}

static int apply(hg_outlog_t *l, const rec_t *r, uint64_t no, uint64_t off) {
  okey_t *k;
  int rc;
  switch (r->type) {
  case HG_OUTLOG_FRAME:
  case HG_OUTLOG_SEQ_MARK:
    rc = key_new(l, r->key, 1, &k);
    if (rc != 0) return rc;
    if (r->seq + 1 > k->next_seq) k->next_seq = r->seq + 1;
    if (r->type == HG_OUTLOG_FRAME) {
      ix_add(l, k, r->seq, no, off);
      if (k->pos_on) k->pos_n++;
    }
    return 0;
  case HG_OUTLOG_POSITION:
    rc = key_new(l, r->key, 1, &k);
    if (rc != 0) return rc;
    k->pos_on = r->seq != 0;
    if (r->seq != 0) {
      k->pos_a = r->seq;
      k->pos_b = hg_ld64(r->payload);
      k->pos_n = hg_ld64(r->payload + 8);
    }
    return 0;
  default: {
    rc = sids_resize(l, l->n_sids + 1);
    if (rc != 0) return rc;
    sident_t *e = sid_find(l, r->key, r->payload);
    if (e->key == 0) {
      e->key = r->key;
      memcpy(e->sid, r->payload, HG_OUTLOG_SID_LEN);
      l->n_sids++;
    }
    if (no > e->seg) e->seg = no;
    return 0;
  }
  }
}

/* Walks one segment; cuts a torn tail of the newest one. */
static int scan_seg(hg_outlog_t *l, uint32_t si, int newest) {
  seg_t *s = &l->segs[si];
  char path[PATH_MAX + 64];
  seg_path(l, s->no, path, sizeof path);
  if (s->size == 0) {
    if (!newest) return 0;
    /* created, header never written: write it now */
    l->staged = 0;
    uint8_t *h = l->stage;
    memset(h, 0, SHDR);
    hg_st32(h, HG_OUTLOG_SEGMENT_MAGIC);
    uint16_t v = HG_OUTLOG_VERSION, hs = SHDR;
    memcpy(h + 4, &v, 2);
    memcpy(h + 6, &hs, 2);
    hg_st64(h + 8, s->no);
    hg_st32(h + 28, hg_crc32c(0, h, 28));
    l->staged = SHDR;
    return 0;
  }
  uint8_t *m = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, s->fd, 0);
  if (m == MAP_FAILED) {
    int e = -errno;
    olog(l, HG_LOG_ERROR, "cannot map %s: %s", path, strerror(errno));
    return e;
  }
  int rc = seg_header_ok(m, s->size, s->no);
  if (rc == HG_EVERSION) {
    olog(l, HG_LOG_ERROR, "%s has a newer format version than %u", path, HG_OUTLOG_VERSION);
    munmap(m, s->size);
    return rc;
  }
  if (rc != 0) {
    corrupt_at(l, s->no, 0);
    munmap(m, s->size);
    if (newest) l->bad_newest = 1;
    return 0; /* its records cannot be trusted; later segments still count */
  }
  uint64_t off = SHDR;
  rc = 0;
  while (rc == 0 && off + RHDR <= s->size) {
    rec_t r;
    int c = rec_check(l, m + off, s->size - off, &r);
    if (c == 0) {
      rc = apply(l, &r, s->no, off);
      off += HG_OUTLOG_RECORD_SIZE(r.len);
      continue;
    }
    uint64_t bad = off, next = off + 8;
    while (next + RHDR <= s->size && rec_check(l, m + next, s->size - next, &r) != 0) next += 8;
    if (next + RHDR > s->size) break; /* nothing good after it */
    corrupt_at(l, s->no, bad);
    off = next;
  }
  if (rc == 0 && off < s->size) {
    if (newest) { /* bytes of the last batch that never fully made it */
      olog(l, HG_LOG_WARN, "%s: torn tail at offset %" PRIu64 ", %" PRIu64 " bytes cut", path, off,
           s->size - off);
      if (ftruncate(s->fd, (off_t)off) != 0) rc = -errno;
      s->size = off;
    } else {
      corrupt_at(l, s->no, off);
    }
  }
  munmap(m, s->size);
  return rc;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int scan_dir(hg_outlog_t *l) {
  DIR *d = opendir(l->dir);
  if (d == NULL) return -errno;
  uint64_t *nos = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  int rc = 0;
  while ((de = readdir(d)) != NULL) {
    uint64_t no;
    char tail[8];
    if (sscanf(de->d_name, "outlog-%20" SCNu64 ".%7s", &no, tail) != 2 || strcmp(tail, "hgo") != 0 ||
        strlen(de->d_name) != 31 || no == 0)
      continue;
    if (n == cap) {
      cap = cap * 2 + 16;
      uint64_t *nn = realloc(nos, cap * sizeof *nn);
      if (nn == NULL) {
        rc = -ENOMEM;
        break;
      }
      nos = nn;
    }
    nos[n++] = no;
  }
  closedir(d);
  if (n > 0) qsort(nos, n, sizeof *nos, cmp_u64);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    char path[PATH_MAX + 64];
    seg_path(l, nos[i], path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
      rc = -errno;
      olog(l, HG_LOG_ERROR, "cannot open %s: %s", path, strerror(errno));
      if (fd >= 0) close(fd);
      break;
    }
    rc = segs_push(l, nos[i], fd, (uint64_t)st.st_size);
    if (rc != 0) close(fd);
  }
  free(nos);
  for (uint32_t i = 0; rc == 0 && i < l->n_segs; i++) rc = scan_seg(l, i, i + 1 == l->n_segs);
  return rc;
}

void hg_outlog_close(hg_outlog_t *l) {
  if (l == NULL) return;
  if (l->n_segs > 0) {
    hg_outlog_flush(l);
    if (fdatasync(cur_seg(l)->fd) != 0)
      olog(l, HG_LOG_WARN, "fdatasync of the outbound log: %s", strerror(errno));
  }
  for (uint32_t i = 0; i < l->n_segs; i++) close(l->segs[i].fd);
  if (l->keys != NULL)
    for (uint32_t i = 0; i <= l->key_mask; i++) free(l->keys[i].ix);
  free(l->keys);
  free(l->sids);
  free(l->segs);
  free(l->stage);
  free(l->rbuf);
  free(l);
}

int hg_outlog_open(const char *dir, const hg_outlog_options_t *opt, hg_outlog_t **out) {
  if (dir == NULL || out == NULL || strlen(dir) >= PATH_MAX - 64) return HG_EINVAL;
  hg_outlog_t *l = calloc(1, sizeof *l);
  if (l == NULL) return -ENOMEM;
  if (opt != NULL) l->o = *opt;
#define DEF(f, v) \
  if (l->o.f == 0) l->o.f = (v)
  DEF(segment_size, 64u << 20);
  DEF(segments_kept, 8);
  DEF(max_frame, 1u << 20);
  DEF(max_keys, 2048);
  DEF(max_session_ids, 1u << 18);
  DEF(index_every, 32);
  DEF(index_entries, 1024);
#undef DEF
  snprintf(l->dir, sizeof l->dir, "%s", dir);
  int rc = 0;
  if (l->o.segment_size < 4096 || l->o.segment_size > (4ull << 30) ||
      l->o.max_keys > (1u << 28) || l->o.max_session_ids > (1u << 28))
    rc = HG_EINVAL;
  if (rc == 0 && mkdir(dir, 0755) != 0 && errno != EEXIST) rc = -errno;
  if (rc == 0) {
    l->stage_cap = (size_t)HG_OUTLOG_RECORD_SIZE(l->o.max_frame) * 2 + (1u << 20);
    l->rcap = (size_t)HG_OUTLOG_RECORD_SIZE(l->o.max_frame) + READ_CHUNK;
    l->stage = malloc(l->stage_cap);
    l->rbuf = malloc(l->rcap);
    if (l->stage == NULL || l->rbuf == NULL) rc = -ENOMEM;
    hg_prefault(l->stage, l->stage_cap); /* a busy loop iteration stages far into it */
  }
  if (rc == 0) rc = keys_resize(l, 8);
  if (rc == 0) rc = sids_resize(l, 8);
  if (rc == 0) rc = scan_dir(l);
  if (rc == 0 && l->n_segs == 0) rc = seg_create(l, 1);
  if (rc == 0 && l->bad_newest) rc = seg_create(l, cur_seg(l)->no + 1);
  if (rc == 0) rc = keys_resize(l, l->n_keys + l->o.max_keys);
  if (rc == 0) rc = sids_resize(l, l->n_sids + l->o.max_session_ids);
  if (rc != 0) {
    if (rc != HG_EINVAL)
      olog(l, HG_LOG_ERROR, "cannot open the outbound log in %s: %s", dir, hg_strerror(rc));
    l->staged = 0;
    hg_outlog_close(l);
    return rc;
  }
  l->key_limit = l->n_keys + l->o.max_keys;
  l->sid_limit = l->n_sids + l->o.max_session_ids;
  (void)hg_outlog_flush(l);
  olog(l, HG_LOG_INFO, "outbound log: %u segments, %u keys, %u session ids", l->n_segs, l->n_keys,
       l->n_sids);
  *out = l;
  return 0;
}
