/*
 * Start-up recovery and journal replay of the pipeline (pipeline_int.h).
 *
 * hg_pipeline_open() recovers before any thread starts: the newest snapshot
 * that passes its checks, then the journal from the record after it. The
 * journal's recovery scan and the replay overlap (the scan feeds each record
 * it has checked to the applier), and a replay outside start-up
 * (hg_pipeline_replay_journal, hg_pipeline_recover_readonly) reads the
 * journal on a feeder thread while the caller applies. Everything here runs
 * on the owner thread except the feeder and the scan thread it starts and
 * joins.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hourglass/error.h"
#include "hourglass/thread.h"
#include "command_internal.h"
#include "journal_internal.h"
#include "pipeline_int.h"
#include "pipeline_internal.h"

static void discard_sink(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

/* ------------------------------------------------------------------------ */
/* Recovery                                                                  */
/* ------------------------------------------------------------------------ */

/* The journal's messages name themselves ("journal: ..."); the prefix is
 * added only to one that does not. */
static void journal_log(void *ctx, int level, const char *msg) {
  if (strncmp(msg, "journal: ", 9) == 0)
    logf_((hg_pipeline_t *)ctx, level, "%s", msg);
  else
    logf_((hg_pipeline_t *)ctx, level, "journal: %s", msg);
}

/* Notes a snapshot refused by recovery (seq, the store's reason). */
static void note_refused(hg_pipeline_t *p, uint64_t seq, const char *why) {
  size_t used = strlen(p->snap_refused_list);
  if (used < sizeof p->snap_refused_list)
    snprintf(p->snap_refused_list + used, sizeof p->snap_refused_list - used, "%s%s",
             p->snap_refused ? "; " : "", why);
  p->snap_refused++;
  if (seq > p->snap_refused_newest) p->snap_refused_newest = seq;
}

/*
 * Restores into p->ex the newest snapshot that passes every check
 * (hg_store_restore_snapshot: CRC, seq, state hash), trying them newest
 * first. A snapshot that is bad (HG_ECORRUPT, or HG_EVERSION: a blob this
 * build cannot read) is logged with its seq, the state directory and the
 * reason, and skipped: the journal, which recovery replays from the
 * snapshot used, reproduces the same state. Any other failure (capacities
 * too small, no memory, I/O) stops start-up as it is. Sets *snap_seq to the
 * snapshot's seq, 0 if none is usable (replay from seq 1).
 */
static int load_snapshot(hg_pipeline_t *p, uint64_t *snap_seq) {
  *snap_seq = 0;
  size_t n = 0;
  int rc = hg_store_list_snapshots(p->store, NULL, 0, &n);
  uint64_t *seqs = n > 0 ? malloc(n * sizeof *seqs) : NULL;
  if (rc == 0 && n > 0 && seqs == NULL) rc = -ENOMEM;
  if (rc == 0 && n > 0) rc = hg_store_list_snapshots(p->store, seqs, n, &n);
  if (rc != 0) {
    logf_(p, HG_LOG_ERROR, "state store %s: %s", p->state_dir, hg_store_errmsg(p->store));
    free(seqs);
    return rc;
  }
  for (size_t i = n; i-- > 0;) {
    if (seqs[i] == 0) {
      /* A key that is not a seq (listed as 0, which would mean "newest"). */
      logf_(p, HG_LOG_ERROR, "state store %s: a snapshot key is malformed; skipped",
            p->state_dir);
      note_refused(p, 0, "a malformed snapshot key");
      continue;
    }
    rc = hg_store_restore_snapshot(p->store, seqs[i], p->ex);
    if (rc == 0) {
      *snap_seq = seqs[i];
      break;
    }
    logf_(p, HG_LOG_ERROR, "%s", hg_store_errmsg(p->store));
    if (rc != HG_ECORRUPT && rc != HG_EVERSION) break;
    note_refused(p, seqs[i], hg_store_errmsg(p->store));
    if (i > 0)
      logf_(p, HG_LOG_WARN, "snapshot at seq %llu skipped; trying the one at seq %llu",
            (unsigned long long)seqs[i], (unsigned long long)seqs[i - 1]);
    else
      logf_(p, HG_LOG_WARN,
            "snapshot at seq %llu skipped; no older snapshot: replaying journal %s from seq 1",
            (unsigned long long)seqs[i], p->journal_dir);
    /* A restore that failed its hash check leaves its state behind. */
    hg_exchange_destroy(p->ex);
    p->ex = NULL;
    rc = hg_exchange_create(&p->cfg.exchange, discard_sink, NULL, &p->ex);
    if (rc != 0) {
      logf_(p, HG_LOG_ERROR, "exchange config rejected: %s", hg_strerror(rc));
      break;
    }
  }
  free(seqs);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Journal replay                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Replay runs on two threads: a feeder reads, CRC-checks and decodes
 * records into batches of hg_command_t, and the calling thread applies them
 * in order. The batches form a bounded single-producer, single-consumer
 * ring; the commands are applied in journal order by one thread, so the
 * state is exactly that of a sequential replay. A decode or read error ends
 * the feed after the last good record; the applier applies everything before
 * it and reports the same error and message the sequential loop would. If
 * the feeder thread cannot be started, the same code runs sequentially.
 */
#define FEED_BATCH 64u  /* commands per batch: one wake-up per batch at most */
#define FEED_SLOTS 64u  /* batches in the ring (64 x 64 x ~0.5 KiB): a sleeping feeder is woken once per 32 */
#define FEED_SPIN 200u  /* waiter re-checks before sleeping */
#define CMD_AHEAD 8u    /* commands between the applier's prefetch and use */

typedef struct feed_batch {
  uint32_t n;   /* commands in cmd[] */
  int end;      /* 0: more follow; 1: the feed ends after this batch */
  hg_command_t cmd[FEED_BATCH];
} feed_batch_t;

/* Shared by the feeder and the applier. The reader, rc, why and the
 * producer's fields belong to the feeder until it publishes its last batch
 * (end = 1); the release store of head hands them to the applier. The
 * feeder is a thread of its own (replay: feeder_main reads the journal) or
 * the recovery scan, which pushes each record it has checked (feed_push). */
typedef struct feed {
  const char *dir;
  hg_journal_reader_t *rd; /* NULL when the recovery scan pushes */
  uint64_t from_seq, max_seq;
  uint64_t decoded; /* feeder: records decoded */
  feed_batch_t *cur; /* feed_push: the batch being filled, NULL between batches */
  int ended;        /* feed_push: the last batch is published */
  int rc;           /* feeder's result, read by the applier after end */
  char why[512];
  feed_batch_t *b;  /* FEED_SLOTS batches; owned by the replay call */
  hg_waiter_t *feeder_w, *applier_w;
  alignas(64) _Atomic uint64_t head; /* batches published by the feeder */
  alignas(64) _Atomic uint64_t tail; /* batches released by the applier */
  alignas(64) atomic_int stop;       /* the applier gave up: the feeder stops */
} feed_t;

/* Decodes one record into cmd: 0, or 1 with f->rc and f->why set. */
static int feed_decode(feed_t *f, uint64_t seq, uint64_t ts, const uint8_t *payload,
                       uint32_t len, hg_command_t *cmd) {
  int rc = hg_command__decode_prefix(payload, len, cmd);
  if (rc != 0 || cmd->seq != seq) {
    snprintf(f->why, sizeof f->why, "journal record seq %llu does not decode: %s",
             (unsigned long long)seq, hg_strerror(rc ? rc : HG_ECORRUPT));
    f->rc = rc ? rc : HG_ECORRUPT;
    return 1;
  }
  cmd->ts = ts;
  f->decoded++;
  return 0;
}

/* Reads and decodes up to FEED_BATCH records into b. Returns 1 at the end
 * of the journal or on an error (f->rc, f->why set), else 0. */
static int feed_fill(feed_t *f, feed_batch_t *b) {
  uint32_t n = 0;
  int end = 0;
  hg_journal_record_t rec;
  while (n < FEED_BATCH) {
    int rc = hg_journal_reader_next(f->rd, f->max_seq, &rec);
    if (rc == HG_ENOTFOUND) {
      end = 1;
      break;
    }
    if (rc != 0) {
      snprintf(f->why, sizeof f->why, "journal %s unreadable after seq %llu: %s", f->dir,
               (unsigned long long)(f->from_seq + f->decoded - 1), hg_strerror(rc));
      f->rc = rc;
      end = 1;
      break;
    }
    if (feed_decode(f, rec.seq, rec.ts, rec.payload, rec.len, &b->cmd[n])) {
      end = 1;
      break;
    }
    n++;
  }
  b->n = n;
  b->end = end;
  return end;
}

static bool feed_has_room(void *ctx) {
  feed_t *f = ctx;
  /* acquire: the applier is done reading the slots it released */
  uint64_t tail = atomic_load_explicit(&f->tail, memory_order_acquire);
  uint64_t head = atomic_load_explicit(&f->head, memory_order_relaxed); /* feeder's own */
  /* Half the ring free before the feeder resumes, so a fast feeder sleeps
   * and wakes once per FEED_SLOTS / 2 batches, not once per batch. */
  return head - tail <= FEED_SLOTS / 2 || atomic_load(&f->stop);
}

/* The feeder's next slot, once free; NULL if the applier gave up. */
static feed_batch_t *feed_slot(feed_t *f) {
  uint64_t head = atomic_load_explicit(&f->head, memory_order_relaxed); /* feeder's own */
  if (head - atomic_load_explicit(&f->tail, memory_order_acquire) == FEED_SLOTS &&
      hg_waiter_wait(f->feeder_w, feed_has_room, f, -1) != 0)
    return NULL;
  if (atomic_load(&f->stop)) return NULL;
  return &f->b[head % FEED_SLOTS];
}

/* Hands the feeder's current slot (filled, n and end set) to the applier. */
static void feed_publish(feed_t *f) {
  uint64_t head = atomic_load_explicit(&f->head, memory_order_relaxed); /* feeder's own */
  /* release: the batch (and on the last one rc and why) before its index */
  atomic_store_explicit(&f->head, head + 1, memory_order_release);
  hg_waiter_notify(f->applier_w);
}

static void *feeder_main(void *arg) {
  feed_t *f = arg;
  for (;;) {
    feed_batch_t *b = feed_slot(f);
    if (b == NULL) break;
    int end = feed_fill(f, b);
    feed_publish(f);
    if (end) break;
  }
  return NULL;
}

/* A pushed feed's batch being filled, started in the next slot if none
 * is; NULL if the applier gave up (it reads nothing more). */
static feed_batch_t *feed_cur(feed_t *f) {
  if (f->cur == NULL && (f->cur = feed_slot(f)) != NULL) {
    f->cur->n = 0;
    f->cur->end = 0;
  }
  return f->cur;
}

/* Ends a pushed feed: what is pending goes out as the last batch. Once. */
static void feed_end(feed_t *f) {
  if (f->ended) return;
  f->ended = 1;
  feed_batch_t *b = feed_cur(f);
  if (b == NULL) return;
  b->end = 1;
  feed_publish(f);
  f->cur = NULL;
}

/* Feeds one record, in journal order (the recovery scan's callback). The
 * first record fed must be from_seq: a journal that starts later cannot
 * continue the snapshot. */
static void feed_push(feed_t *f, uint64_t seq, uint64_t ts, const uint8_t *payload,
                      uint32_t len) {
  if (f->ended || seq < f->from_seq) return;
  feed_batch_t *b = feed_cur(f);
  if (b == NULL) {
    f->ended = 1;
    return;
  }
  if (seq != f->from_seq + f->decoded) {
    snprintf(f->why, sizeof f->why, "cannot read journal %s from seq %llu: %s", f->dir,
             (unsigned long long)(f->from_seq + f->decoded), hg_strerror(HG_ENOTFOUND));
    f->rc = HG_ENOTFOUND;
    feed_end(f);
    return;
  }
  if (feed_decode(f, seq, ts, payload, len, &b->cmd[b->n])) {
    feed_end(f);
    return;
  }
  if (++b->n == FEED_BATCH) {
    feed_publish(f);
    f->cur = NULL;
  }
}

static bool feed_has_batch(void *ctx) {
  feed_t *f = ctx;
  /* acquire: pairs with the feeder's release of head */
  return atomic_load_explicit(&f->head, memory_order_acquire) !=
         atomic_load_explicit(&f->tail, memory_order_relaxed); /* applier's own */
}

/* Applies batch b; returns 0, or the apply error with why set. */
static int apply_batch(hg_exchange_t *ex, const feed_batch_t *b, uint64_t *count, char *why,
                       size_t why_len) {
  for (uint32_t i = 0; i < b->n; i++) {
    /* The feeder wrote this batch on the other core: ask for the first two
     * lines of a command (header and the order fields) well before it is
     * needed, or each command costs the applier a cross-core miss. */
    if (i + CMD_AHEAD < b->n) {
      __builtin_prefetch(&b->cmd[i + CMD_AHEAD], 0);
      __builtin_prefetch((const char *)&b->cmd[i + CMD_AHEAD] + 64, 0);
    }
    /* Hints only (hg_exchange_prefetch): the orders the next two name. */
    if (i + 2 < b->n) hg_exchange_prefetch(ex, &b->cmd[i + 2], 0);
    if (i + 1 < b->n) hg_exchange_prefetch(ex, &b->cmd[i + 1], 1);
    int rc = hg_exchange_apply(ex, &b->cmd[i]);
    if (rc != 0) {
      snprintf(why, why_len, "journal record seq %llu cannot be applied: %s",
               (unsigned long long)b->cmd[i].seq, hg_strerror(rc));
      return rc;
    }
    (*count)++;
  }
  return 0;
}

static int replay_sequential(feed_t *f, hg_exchange_t *ex, uint64_t *count, char *why,
                             size_t why_len) {
  for (;;) {
    int end = feed_fill(f, &f->b[0]);
    int rc = apply_batch(ex, &f->b[0], count, why, why_len);
    if (rc != 0) return rc;
    if (end) break;
  }
  if (f->rc != 0) snprintf(why, why_len, "%s", f->why);
  return f->rc;
}

static void feed_init(feed_t *f, const char *dir, uint64_t from_seq, uint64_t max_seq) {
  memset(f, 0, sizeof *f);
  f->dir = dir;
  f->from_seq = from_seq;
  f->max_seq = max_seq;
}

/* A feed of FEED_SLOTS batches with its two waiters, or NULL. */
static feed_t *feed_new(const char *dir, uint64_t from_seq, uint64_t max_seq) {
  feed_t *f = aligned_alloc(alignof(feed_t), sizeof *f);
  if (f == NULL) return NULL;
  feed_init(f, dir, from_seq, max_seq);
  f->b = malloc(FEED_SLOTS * sizeof *f->b);
  if (f->b == NULL || hg_waiter_create(FEED_SPIN, &f->feeder_w) != 0) {
    free(f->b);
    free(f);
    return NULL;
  }
  if (hg_waiter_create(FEED_SPIN, &f->applier_w) != 0) {
    hg_waiter_destroy(f->feeder_w);
    free(f->b);
    free(f);
    return NULL;
  }
  return f;
}

static void feed_free(feed_t *f) {
  hg_waiter_destroy(f->feeder_w);
  hg_waiter_destroy(f->applier_w);
  free(f->b);
  free(f);
}

/* The applier's side: applies batches until the feed's last one or an
 * apply error (then the feeder is told to stop). Returns 0 or the error,
 * why set. */
static int apply_feed(feed_t *f, hg_exchange_t *ex, uint64_t *count, char *why, size_t why_len) {
  int rc = 0, end = 0;
  while (!end) {
    hg_waiter_wait(f->applier_w, feed_has_batch, f, -1); /* never closed: returns ready */
    uint64_t tail = atomic_load_explicit(&f->tail, memory_order_relaxed); /* applier's own */
    const feed_batch_t *b = &f->b[tail % FEED_SLOTS];
    end = b->end;
    rc = apply_batch(ex, b, count, why, why_len);
    /* release: done with the slot before the feeder may refill it */
    atomic_store_explicit(&f->tail, tail + 1, memory_order_release);
    if (rc != 0) {
      atomic_store(&f->stop, 1);
      hg_waiter_notify(f->feeder_w);
      return rc;
    }
    /* A sleeping feeder resumes only with half the ring free (feed_has_room);
     * waking it earlier just puts it back to sleep, a futex round trip per
     * batch. A stale head only makes the gap look smaller, i.e. wakes more,
     * never fewer. acquire: pairs with the feeder's release of head. */
    if (atomic_load_explicit(&f->head, memory_order_acquire) - (tail + 1) <= FEED_SLOTS / 2)
      hg_waiter_notify(f->feeder_w);
  }
  /* The last batch's release of head published rc and why. */
  if (f->rc != 0) snprintf(why, why_len, "%s", f->why);
  return f->rc;
}

/* Applies journal records from from_seq up to max_seq to ex: a feeder
 * thread reads and decodes, this thread applies; sequential if the thread
 * or the ring cannot be had. */
static int replay_into(const char *dir, hg_exchange_t *ex, uint64_t from_seq, uint64_t max_seq,
                       uint64_t *count, char *why, size_t why_len) {
  *count = 0;
  hg_journal_reader_t *rd = NULL;
  int rc = hg_journal_reader_open(dir, from_seq, &rd);
  if (rc != 0) {
    snprintf(why, why_len, "cannot read journal %s from seq %llu: %s", dir,
             (unsigned long long)from_seq, hg_strerror(rc));
    return rc;
  }
  feed_t *f = feed_new(dir, from_seq, max_seq);
  pthread_t thr;
  if (f != NULL) {
    f->rd = rd;
    if (hg_thread_start("hg-replay-feed", 0, feeder_main, f, &thr) == 0) {
      rc = apply_feed(f, ex, count, why, why_len);
      pthread_join(thr, NULL);
      feed_free(f);
      hg_journal_reader_close(rd);
      return rc;
    }
    feed_free(f);
  }
  /* One batch is enough for the sequential loop. */
  feed_t seq;
  feed_init(&seq, dir, from_seq, max_seq);
  seq.rd = rd;
  seq.b = malloc(sizeof *seq.b);
  if (seq.b == NULL) {
    hg_journal_reader_close(rd);
    return -ENOMEM;
  }
  rc = replay_sequential(&seq, ex, count, why, why_len);
  free(seq.b);
  hg_journal_reader_close(rd);
  return rc;
}

int hg_pipeline_replay_journal(const char *journal_dir, hg_exchange_t *ex, uint64_t max_seq,
                               uint64_t *last_seq) {
  char why[512];
  uint64_t n = 0;
  int rc = replay_into(journal_dir, ex, hg_exchange_last_seq(ex) + 1, max_seq, &n, why,
                       sizeof why);
  if (rc == HG_ENOTFOUND) rc = 0; /* empty journal */
  *last_seq = hg_exchange_last_seq(ex);
  return rc;
}

/*
 * Read-only recovery: what hg_pipeline_open() recovers, computed without
 * writing anything, so that it may run beside the daemon that owns the
 * directory. The snapshot comes from the store opened read-only (through
 * hg_store_load_exchange, with its checks), the tail from journal readers
 * (read-only mappings); the journal is never opened for writing, so no spare
 * segment is touched and no torn tail is cut.
 */
int hg_pipeline_recover_readonly(const hg_pipeline_config_t *cfg, hg_exchange_t *ex,
                                 uint64_t *snap_seq, uint64_t *last_seq) {
  if (cfg == NULL || cfg->data_dir == NULL || ex == NULL || snap_seq == NULL || last_seq == NULL)
    return HG_EINVAL;
  const char *dir = cfg->data_dir;
  char jdir[PATH_MAX], sdir[PATH_MAX], data[PATH_MAX + 16];
  struct stat st;
  if (stat(dir, &st) != 0) {
    int e = errno;
    hg_pipe__log(cfg, HG_LOG_ERROR, "data directory %s: %s", dir, strerror(e));
    return -e;
  }
  if (!S_ISDIR(st.st_mode)) {
    hg_pipe__log(cfg, HG_LOG_ERROR, "data directory %s is not a directory", dir);
    return -ENOTDIR;
  }
  if ((size_t)snprintf(jdir, sizeof jdir, "%s/journal", dir) >= sizeof jdir ||
      (size_t)snprintf(sdir, sizeof sdir, "%s/state", dir) >= sizeof sdir) {
    hg_pipe__log(cfg, HG_LOG_ERROR, "data directory path too long");
    return HG_EINVAL;
  }
  /* No store yet (a daemon that never got that far): replay everything. */
  uint64_t snap = 0;
  snprintf(data, sizeof data, "%s/data.mdb", sdir);
  int rc = 0;
  if (stat(data, &st) == 0) {
    hg_store_t *s = NULL;
    if ((rc = hg_store_create(&s)) != 0) return rc;
    rc = hg_store_open_readonly(s, sdir);
    if (rc == 0) rc = hg_store_load_exchange(s, ex, &snap);
    if (rc == HG_ENOTFOUND) rc = 0;
    if (rc != 0) hg_pipe__log(cfg, HG_LOG_ERROR, "%s", hg_store_errmsg(s));
    hg_store_close(s);
    if (rc != 0) return rc;
  }
  *snap_seq = snap;
  /* The journal must hold the snapshot's own record, or start right after
   * it (a data directory seeded from a snapshot, as a cluster node's is):
   * a journal that ends (or starts) elsewhere does not continue it (as
   * recover_finish checks). */
  if (snap > 0) {
    hg_journal_reader_t *rd;
    hg_journal_record_t rec;
    rc = hg_journal_reader_open(jdir, snap, &rd);
    if (rc == 0) {
      rc = hg_journal_reader_next(rd, snap, &rec);
      hg_journal_reader_close(rd);
    } else if (rc == HG_ENOTFOUND && hg_journal_reader_open(jdir, snap + 1, &rd) == 0) {
      hg_journal_reader_close(rd); /* its first segment starts at snap + 1 */
      rc = 0;
    }
    if (rc != 0) {
      hg_pipe__log(cfg, HG_LOG_ERROR,
              "journal %s does not continue the snapshot at seq %llu: %s", jdir,
              (unsigned long long)snap, hg_strerror(rc));
      return rc == HG_ENOTFOUND ? HG_ECORRUPT : rc;
    }
  }
  /* The durable mark, read only: a journal that ends before it has lost
   * records the daemon's start-up would refuse to do without. */
  uint64_t mark = 0;
  char mpath[PATH_MAX + 16];
  snprintf(mpath, sizeof mpath, "%s/durable.mark", dir);
  uint64_t mark_seg = 0;
  rc = hg_journal_read_mark(mpath, &mark, &mark_seg, NULL);
  if (rc == HG_ENOTFOUND) rc = 0;
  if (rc != 0) {
    hg_pipe__log(cfg, HG_LOG_ERROR, "durable mark %s cannot be used: %s", mpath, hg_strerror(rc));
    return rc;
  }
  char why[512] = "";
  uint64_t n = 0;
  rc = replay_into(jdir, ex, snap + 1, UINT64_MAX, &n, why, sizeof why);
  *last_seq = hg_exchange_last_seq(ex);
  if (rc == 0 && *last_seq < mark) {
    hg_pipe__log(cfg, HG_LOG_ERROR,
            "journal %s ends at seq %llu but seq %llu was durable (durable mark %s): records "
            "%llu..%llu are missing", jdir, (unsigned long long)*last_seq,
            (unsigned long long)mark, mpath, (unsigned long long)*last_seq + 1,
            (unsigned long long)mark);
    return HG_ECORRUPT;
  }
  char seg[PATH_MAX + 48];
  snprintf(seg, sizeof seg, "%s/journal-%020llu.hgj", jdir, (unsigned long long)mark_seg);
  if (mark_seg > 0 && stat(seg, &st) != 0) {
    hg_pipe__log(cfg, HG_LOG_ERROR,
            "%s is missing, but it held the newest records (durable mark %s names it): records "
            "from seq %llu on are lost", seg, mpath, (unsigned long long)mark_seg);
    return HG_ECORRUPT;
  }
  if (rc == HG_ECORRUPT && why[0] != '\0') {
    if (*last_seq < mark)
      hg_pipe__log(cfg, HG_LOG_ERROR,
              "%s: the journal ends in a record that is not good, but seq %llu was durable "
              "(durable mark %s): records %llu..%llu are damaged; the state read is at seq %llu",
              why, (unsigned long long)mark, mpath, (unsigned long long)*last_seq + 1,
              (unsigned long long)mark, (unsigned long long)*last_seq);
    else
      hg_pipe__log(cfg, HG_LOG_ERROR,
              "%s: the journal ends in a record that is not good (a batch a running daemon is "
              "still writing, a torn tail the daemon's start-up cuts, or corruption); the state "
              "read is at seq %llu", why, (unsigned long long)*last_seq);
    return rc;
  }
  if (rc != 0) {
    hg_pipe__log(cfg, HG_LOG_ERROR, "read-only recovery of %s failed: %s", dir,
            why[0] ? why : hg_strerror(rc));
    return rc == HG_ENOTFOUND ? HG_ECORRUPT : rc;
  }
  hg_pipe__log(cfg, HG_LOG_INFO,
          "read %s without writing: seq %llu (snapshot %llu + %llu journal records)", dir,
          (unsigned long long)*last_seq, (unsigned long long)snap, (unsigned long long)n);
  return 0;
}

static int make_dir(hg_pipeline_t *p, const char *path) {
  if (mkdir(path, 0750) != 0 && errno != EEXIST) {
    int e = errno;
    logf_(p, HG_LOG_ERROR, "cannot create %s: %s", path, strerror(e));
    return -e;
  }
  return 0;
}

/*
 * Recovery checks and replays the journal in one pass: a thread opens the
 * journal, and its recovery scan (which checks every record's CRC and the
 * sequence, and cuts a torn tail) hands each record it has passed to the
 * feed (feed_push), decoded while the bytes are still in cache; this thread
 * applies the batches. The scan only ever cuts after the last record it
 * passed, so the replay applies exactly what a scan-then-replay start-up
 * would; any other finding of the scan stops start-up as before. With the
 * repair option, which may delete segments, the scan runs first (recover()).
 */
typedef struct scan_job {
  hg_pipeline_t *p;
  const hg_journal_options_t *jo;
  feed_t *f;
  hg_journal_t *journal; /* the scanning thread's result, read after join */
  int rc;
} scan_job_t;

static void scan_record(void *ctx, uint64_t seq, uint64_t ts, const uint8_t *payload,
                        uint32_t len) {
  feed_push(ctx, seq, ts, payload, len);
}

static void *scan_main(void *arg) {
  scan_job_t *job = arg;
  job->rc = hg_journal__open_scan(job->p->journal_dir, job->jo, scan_record, job->f,
                                  &job->journal);
  feed_end(job->f);
  return NULL;
}

static int recover_finish(hg_pipeline_t *p, uint64_t snap_seq);

/* Returns 1 if the scanning thread could not be started (nothing done),
 * else recover()'s result. */
static int recover_overlapped(hg_pipeline_t *p, const hg_journal_options_t *jo,
                              uint64_t snap_seq) {
  scan_job_t *job = aligned_alloc(alignof(scan_job_t), sizeof *job);
  if (job == NULL) return 1;
  memset(job, 0, sizeof *job);
  job->p = p;
  job->jo = jo;
  job->f = feed_new(p->journal_dir, snap_seq + 1, UINT64_MAX);
  if (job->f == NULL) {
    free(job);
    return 1;
  }
  pthread_t thr;
  if (hg_thread_start("hg-recov-scan", 0, scan_main, job, &thr) != 0) {
    feed_free(job->f);
    free(job);
    return 1;
  }
  char why[512] = "";
  p->replayed = 0;
  int rrc = apply_feed(job->f, p->ex, &p->replayed, why, sizeof why);
  pthread_join(thr, NULL);
  feed_free(job->f);
  int rc = job->rc;
  p->journal = job->journal;
  free(job);
  if (rc != 0) {
    /* The scan's finding, as a scan-then-replay start-up reports it. */
    logf_(p, HG_LOG_ERROR, "journal %s cannot be opened: %s", p->journal_dir, hg_strerror(rc));
    return rc;
  }
  if (hg_journal_next_seq(p->journal) > snap_seq + 1) {
    if (rrc != 0) {
      logf_(p, HG_LOG_ERROR, "recovery failed: %s", why);
      return rrc == HG_ENOTFOUND ? HG_ECORRUPT : rrc;
    }
  } else if (p->replayed != 0) {
    /* Cannot happen: the replay reads only records the scan kept. */
    logf_(p, HG_LOG_ERROR, "recovery failed: replayed past the end of journal %s",
          p->journal_dir);
    return HG_ECORRUPT;
  }
  return recover_finish(p, snap_seq);
}

static int recover(hg_pipeline_t *p) {
  int rc;
  const char *dir = p->cfg.data_dir;
  struct stat st;
  if (stat(dir, &st) != 0) {
    int e = errno;
    logf_(p, HG_LOG_ERROR, "data directory %s: %s", dir, strerror(e));
    return -e;
  }
  if (!S_ISDIR(st.st_mode)) {
    logf_(p, HG_LOG_ERROR, "data directory %s is not a directory", dir);
    return -ENOTDIR;
  }
  if ((size_t)snprintf(p->journal_dir, sizeof p->journal_dir, "%s/journal", dir) >=
          sizeof p->journal_dir ||
      (size_t)snprintf(p->state_dir, sizeof p->state_dir, "%s/state", dir) >= sizeof p->state_dir ||
      (size_t)snprintf(p->mark_path, sizeof p->mark_path, "%s/durable.mark", dir) >=
          sizeof p->mark_path) {
    logf_(p, HG_LOG_ERROR, "data directory path too long");
    return HG_EINVAL;
  }
  if ((rc = make_dir(p, p->journal_dir)) != 0 || (rc = make_dir(p, p->state_dir)) != 0) return rc;

  if ((rc = hg_store_create(&p->store)) != 0) return rc;
  rc = hg_store_open(p->store, p->state_dir, p->cfg.map_size ? p->cfg.map_size : (size_t)1 << 30);
  if (rc != 0) {
    logf_(p, HG_LOG_ERROR, "state store %s: %s", p->state_dir, hg_store_errmsg(p->store));
    return rc;
  }
  rc = hg_exchange_create(&p->cfg.exchange, discard_sink, NULL, &p->ex);
  if (rc != 0) {
    logf_(p, HG_LOG_ERROR, "exchange config rejected: %s", hg_strerror(rc));
    return rc;
  }
  uint64_t snap_seq = 0;
  rc = load_snapshot(p, &snap_seq);
  if (rc != 0) return rc;
  p->snap_seq_taken = snap_seq;

  hg_journal_options_t jo = p->cfg.journal;
  jo.first_seq = snap_seq + 1;
  jo.mark_path = p->mark_path;   /* see pipeline.h, "Recovery" */
  jo.durable_floor = snap_seq;   /* stored only once the journal was durable past it */
  jo.log = journal_log;
  jo.log_ctx = p;
  if (!jo.repair) {
    rc = recover_overlapped(p, &jo, snap_seq);
    if (rc != 1) return rc;
    /* 1: no scanning thread; scan first, then replay */
  }
  rc = hg_journal_open(p->journal_dir, &jo, &p->journal);
  if (rc != 0) {
    logf_(p, HG_LOG_ERROR, "journal %s cannot be opened: %s", p->journal_dir, hg_strerror(rc));
    return rc;
  }
  uint64_t jnext = hg_journal_next_seq(p->journal);
  if (jnext > snap_seq + 1) {
    char why[512] = "";
    rc = replay_into(p->journal_dir, p->ex, snap_seq + 1, UINT64_MAX, &p->replayed, why,
                     sizeof why);
    if (rc != 0) {
      logf_(p, HG_LOG_ERROR, "recovery failed: %s", why);
      return rc == HG_ENOTFOUND ? HG_ECORRUPT : rc;
    }
  }
  return recover_finish(p, snap_seq);
}

static int recover_finish(hg_pipeline_t *p, uint64_t snap_seq) {
  p->last_seq = hg_exchange_last_seq(p->ex);
  if (hg_journal_next_seq(p->journal) != p->last_seq + 1) {
    logf_(p, HG_LOG_ERROR,
          "journal %s ends before seq %llu but the state is at seq %llu: the journal does not "
          "continue the snapshot", p->journal_dir,
          (unsigned long long)hg_journal_next_seq(p->journal), (unsigned long long)p->last_seq);
    return HG_ECORRUPT;
  }
  logf_(p, HG_LOG_INFO, "recovered to seq %llu (snapshot %llu + %llu journal records, %s)",
        (unsigned long long)p->last_seq, (unsigned long long)snap_seq,
        (unsigned long long)p->replayed,
        hg_journal_uses_io_uring(p->journal) ? "io_uring" : "pwritev fallback");
  atomic_store(&p->stat_last, p->last_seq);
  atomic_store(&p->stat_released, p->last_seq);
  return 0;
}

/*
 * recover(), and when it skipped a bad snapshot, the check that the journal
 * reproduced a state at least as new as that snapshot: a snapshot only ever
 * covers durable commands, so a journal that ends before it has lost
 * commands, and starting there would quietly undo them. A refused start
 * names every snapshot skipped and why.
 */
int hg_pipe__recover(hg_pipeline_t *p) {
  int rc = recover(p);
  if (rc == 0 && p->snap_refused && hg_exchange_last_seq(p->ex) < p->snap_refused_newest) {
    logf_(p, HG_LOG_ERROR,
          "journal %s ends at seq %llu, before the bad snapshot at seq %llu: the commands up to "
          "it cannot be recovered",
          p->journal_dir, (unsigned long long)hg_exchange_last_seq(p->ex),
          (unsigned long long)p->snap_refused_newest);
    rc = HG_ECORRUPT;
  }
  if (rc != 0 && p->snap_refused)
    logf_(p, HG_LOG_ERROR,
          "start refused: %u bad snapshot(s) in %s skipped (%s), and the journal does not "
          "reproduce the state without them",
          p->snap_refused, p->state_dir, p->snap_refused_list);
  return rc;
}
