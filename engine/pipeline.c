/*
 * The exchange core: three threads and four rings around one state machine.
 *
 * Engine thread (owns the exchange, the staging FIFO and the sequence
 * counter). It peeks commands from the inbound MPSC ring, stamps seq and ts,
 * encodes each into a journal record pushed to the journal SPSC ring, applies
 * the command, and appends its events (and a DONE marker) to the staging
 * FIFO, and moves staged records to the outbound SPSC rings at once. The
 * record is handed to the journal before the command is applied, so a
 * command whose events are staged is always on its way to disk.
 *
 * The durability gate is the consumer's read: hg_pipeline_poll_consumer()
 * takes a ring's records only while their seq is <= the journal's durable
 * seq, so in the default mode nothing leaves before it got to disk. Putting
 * the gate there (rather than having the engine release durable records)
 * takes the engine off the way back: a durable batch costs one wake-up
 * (journal -> consumer) instead of two (journal -> engine -> consumer).
 *
 * Journal thread (owns the hg_journal_t while running). It moves records from
 * its ring into the journal's staging buffer, commits them as one batch and
 * waits for the batch; whatever arrived meanwhile forms the next batch (group
 * commit). Each time durable_seq advances it wakes the consumers that hold
 * records; it wakes the engine only when the engine waits for ring room or
 * the journal failed.
 *
 * Snapshot thread (owns the LMDB store while running). The engine thread
 * serializes the state every snapshot_every commands into a buffer it then
 * swaps, under a mutex (not the order path), with the snapshot thread's
 * buffer; the snapshot thread waits until the journal is durable past the
 * snapshot's seq and writes it in one LMDB transaction. If a snapshot is
 * still being written, the next one is skipped rather than queued.
 *
 * Idle threads sleep on futex waiters (hourglass/ring.h): the engine on
 * engine_w (notified by producers, the consumer and, for ring room or a
 * failure, the journal thread), the
 * journal thread on journal_w, each consumer on its own waiter.
 *
 * Consumers. Each of the configured consumers (the gateway, the daemon's
 * market-data view, ...) has its own outbound SPSC ring and its own release
 * cursor into the staging FIFO; a staged record is freed once every consumer
 * has it. A consumer whose ring is full holds back only itself until the
 * stage fills, then everyone (bounded memory, no silent drop).
 *
 * The staging FIFO and the outbound rings bound the events that wait for
 * durability (or for a slow consumer). A command
 * that produces more events than fit (a mass cancel of a large book) does
 * not grow it: the sink waits, in place, for the journal to make the current
 * command durable and for the consumer to make room, then carries on.
 */
#include "hourglass/pipeline.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "hourglass/error.h"
#include "hourglass/ring.h"
#include "hourglass/thread.h"
#include "hourglass/store.h"
#include "command_internal.h"
#include "journal_internal.h"
#include "map_internal.h"
#include "pipeline_internal.h"

/* Free staging slots required before a new command is sequenced. */
#define STAGE_RESERVE 1024u
/* Commands sequenced per engine iteration before events are released. */
#define ENGINE_BATCH 256u

typedef struct inmsg {
  uint64_t origin;
  hg_command_t cmd;
} inmsg_t;

typedef struct jrec {
  uint64_t seq;
  uint64_t ts;
  uint32_t len;
  uint32_t pad_;
  uint8_t bytes[HG_COMMAND_MAX_ENCODED];
} jrec_t;

typedef struct consumer {
  struct hg_pipeline *p;/* back pointer for the wait predicate */
  hg_spsc_ring_t *ring; /* engine -> this consumer */
  hg_waiter_t *w;       /* the consumer sleeps here */
  uint64_t cursor;      /* next stage index to release; engine thread */
  int blocked;          /* engine thread: the last push found the ring full */
  _Atomic int want_room;/* set by the engine when blocked; the consumer's next
                           poll clears it and wakes the engine (only then) */
  void (*notify)(void *ctx);
  void *notify_ctx;
} consumer_t;

struct hg_pipeline {
  hg_pipeline_config_t cfg;
  char journal_dir[PATH_MAX];
  char mark_path[PATH_MAX];  /* <data_dir>/durable.mark (journal.h, "Durable mark") */
  char state_dir[PATH_MAX];

  hg_exchange_t *ex;    /* owner thread, engine thread while running */
  hg_journal_t *journal;/* owner thread, journal thread while running */
  hg_store_t *store;    /* owner thread, snapshot thread while running */

  hg_mpsc_ring_t *in;   /* producers -> engine */
  hg_spsc_ring_t *jring;/* engine -> journal */
  hg_waiter_t *engine_w, *journal_w;
  consumer_t cons[HG_PIPE_MAX_CONSUMERS];
  uint32_t ncons;

  /* Staging FIFO, engine thread only. */
  hg_pipe_out_t *stage;
  uint64_t stage_mask, stage_head, stage_tail;
  uint64_t cur_origin;
  uint64_t last_seq;        /* last sequenced; engine thread while running */
  uint64_t snap_seq_taken;  /* seq of the last snapshot taken; engine thread */

  /* Engine-side serialization buffer, swapped with snap_buf. */
  uint8_t *ser_buf;
  size_t ser_cap;

  pthread_mutex_t snap_mu;
  pthread_cond_t snap_cv;
  uint8_t *snap_buf; /* owned by the snapshot thread while snap_pending */
  size_t snap_cap, snap_len;
  uint64_t snap_seq;
  int snap_pending, snap_stop;

  pthread_t engine_thr, journal_thr, snap_thr;
  int running, stopped;

  atomic_int accepting;       /* submit allowed */
  atomic_int inflight_submits;/* producers between the accepting check and the push */
  atomic_int engine_stop;
  atomic_int journal_stop;
  atomic_int failed;          /* journal error, sticky */
  atomic_int threads_done;    /* set by stop() after joining the threads */
  atomic_int jring_full;      /* engine found the journal ring full; the journal
                                 thread clears it and wakes the engine */
  atomic_int hold_journal;    /* test hook: the journal thread parks */
  atomic_int journal_parked;  /* test hook: it is parked (owns nothing in flight) */
  atomic_uint_fast64_t stat_commands, stat_last, stat_released, stat_snapshots, stat_busy;
  uint64_t replayed;

  /* Recovery, owner thread: the snapshots refused (newest first) and the
   * highest seq among them, for the checks and message of a refused start. */
  uint32_t snap_refused;
  uint64_t snap_refused_newest;
  char snap_refused_list[512];
};

/* ------------------------------------------------------------------------ */

/* One message to cfg's log callback, or to stderr without one. */
__attribute__((format(printf, 3, 4))) static void cfg_log(const hg_pipeline_config_t *cfg,
                                                          int level, const char *fmt, ...) {
  char msg[1536]; /* the journal's refusals spell out the operator's options */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cfg->log != NULL) {
    cfg->log(cfg->log_ctx, level, msg);
  } else {
    static const char *names[] = {"info", "warn", "error"};
    fprintf(stderr, "hourglass pipeline %s: %s\n", names[level < 0 || level > 2 ? 2 : level], msg);
  }
}

/* The same for an open pipeline. */
#define logf_(p, ...) cfg_log(&(p)->cfg, __VA_ARGS__)

static uint64_t default_clock(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

void hg_pipeline_config_init(hg_pipeline_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->exchange.max_instruments = 64;
  cfg->exchange.max_accounts = 4096;
  cfg->exchange.max_book_orders = 1u << 20;
  hg_journal_options_init(&cfg->journal);
  cfg->durability = HG_DURABILITY_DURABLE;
}

/* ------------------------------------------------------------------------ */
/* Staging and release (engine thread)                                       */
/* ------------------------------------------------------------------------ */

static uint64_t stage_free(const hg_pipeline_t *p) {
  return p->stage_mask + 1 - (p->stage_tail - p->stage_head);
}

static uint64_t durable_limit(const hg_pipeline_t *p) {
  if (p->cfg.durability == HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE) return UINT64_MAX;
  return hg_journal_durable_seq(p->journal);
}

static void wake_consumer(consumer_t *c) {
  hg_waiter_notify(c->w);
  if (c->notify != NULL) c->notify(c->notify_ctx);
}

/* Moves staged records to every consumer's ring, durable or not, and frees
 * what all of them have. Returns how many records moved in all.
 *
 * The durability gate is on the consumer's side (poll_consumer reads a ring
 * only up to the journal's durable seq), so a batch becoming durable needs
 * no engine wake-up: the journal thread wakes the consumers itself. The
 * engine wakes a consumer only when what it just pushed is already durable
 * (a consumer that was full catching up, or the unsafe mode). The two sides
 * form a store-buffering pair: engine "push; fence; load durable" against
 * journal "store durable; fence; load ring tail" (wake_durable), so at least
 * one of them sees the other and wakes the consumer. */
static uint64_t release(hg_pipeline_t *p) {
  uint64_t n = 0, low = p->stage_tail;
  for (uint32_t k = 0; k < p->ncons; k++) {
    consumer_t *c = &p->cons[k];
    uint64_t moved = 0, last = 0;
    c->blocked = 0;
    while (c->cursor != p->stage_tail) {
      const hg_pipe_out_t *o = &p->stage[c->cursor & p->stage_mask];
      if (hg_spsc_ring_try_push(c->ring, o, sizeof *o) != 0) {
        c->blocked = 1;
        atomic_store(&c->want_room, 1);
        break;
      }
      last = o->seq;
      c->cursor++;
      moved++;
    }
    if (moved) {
      atomic_thread_fence(memory_order_seq_cst);
      if (last <= durable_limit(p)) wake_consumer(c);
    }
    if (c->cursor < low) low = c->cursor;
    n += moved;
  }
  p->stage_head = low;
  return n;
}

/* Something could be released now: a consumer not known to be full has a
 * staged record waiting. */
static int stage_releasable(const hg_pipeline_t *p) {
  for (uint32_t k = 0; k < p->ncons; k++) {
    const consumer_t *c = &p->cons[k];
    if (!c->blocked && c->cursor != p->stage_tail) return 1;
  }
  return 0;
}

/* The staging FIFO is full in the middle of a command: wait until the
 * journal and the consumer make room. The command's record is already in
 * the journal ring, so durability of everything staged will come. */
static void stage_make_room(hg_pipeline_t *p) {
  while (stage_free(p) == 0) {
    hg_waiter_notify(p->journal_w);
    if (release(p)) continue;
    if (atomic_load(&p->failed)) {
      /* Nothing staged will ever be released; drop the oldest undurable
       * record so the command can finish. None of it is sent. */
      p->stage_head++;
      for (uint32_t k = 0; k < p->ncons; k++)
        if (p->cons[k].cursor < p->stage_head) p->cons[k].cursor = p->stage_head;
      continue;
    }
    uint32_t tok = hg_waiter_prepare(p->engine_w);
    if (stage_releasable(p)) {
      hg_waiter_cancel(p->engine_w);
      continue;
    }
    /* Woken by a consumer making room (it polls once the journal made its
     * ring's records durable) or by a failure; the timeout only
     * bounds the cost of a missed notification. */
    hg_waiter_sleep(p->engine_w, tok, 1000000);
  }
}

static void stage_push(hg_pipeline_t *p, uint32_t kind, uint64_t origin, uint64_t seq,
                       const hg_exchange_event_t *ev) {
  if (stage_free(p) == 0) stage_make_room(p);
  hg_pipe_out_t *o = &p->stage[p->stage_tail & p->stage_mask];
  o->origin = origin;
  o->seq = seq;
  o->kind = kind;
  o->pad_ = 0;
  if (ev != NULL) o->event = *ev;
  else memset(&o->event, 0, sizeof o->event);
  p->stage_tail++;
}

static void stage_sink(void *ctx, const hg_exchange_event_t *ev) {
  hg_pipeline_t *p = ctx;
  stage_push(p, HG_PIPE_EVENT, p->cur_origin, ev->seq, ev);
}

static void discard_sink(void *ctx, const hg_exchange_event_t *ev) {
  (void)ctx;
  (void)ev;
}

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                 */
/* ------------------------------------------------------------------------ */

/* Serializes the exchange into p->ser_buf, growing it (snapshots are taken
 * every snapshot_every commands, never per message). */
static int serialize_state(hg_pipeline_t *p, size_t *len) {
  size_t need = hg_exchange_serialized_size(p->ex);
  if (need > p->ser_cap) {
    size_t cap = need + need / 4 + 4096;
    uint8_t *b = realloc(p->ser_buf, cap);
    if (b == NULL) return -ENOMEM;
    p->ser_buf = b;
    p->ser_cap = cap;
  }
  return hg_exchange_serialize(p->ex, p->ser_buf, p->ser_cap, len);
}

/* At least two, so that a bad newest snapshot has a good one to fall back on. */
static uint32_t snapshot_keep(const hg_pipeline_t *p) {
  return p->cfg.snapshot_keep > 2 ? p->cfg.snapshot_keep : 2;
}

/* Engine thread: take a snapshot and hand it over, unless one is pending. */
static void take_snapshot(hg_pipeline_t *p) {
  pthread_mutex_lock(&p->snap_mu);
  int busy = p->snap_pending;
  pthread_mutex_unlock(&p->snap_mu);
  if (busy) return;
  size_t len = 0;
  int rc = serialize_state(p, &len);
  if (rc != 0) {
    logf_(p, HG_PIPE_LOG_WARN, "snapshot at seq %llu skipped: %s",
          (unsigned long long)p->last_seq, hg_strerror(rc));
    return;
  }
  pthread_mutex_lock(&p->snap_mu);
  uint8_t *b = p->snap_buf;
  size_t cap = p->snap_cap;
  p->snap_buf = p->ser_buf;
  p->snap_cap = p->ser_cap;
  p->snap_len = len;
  p->snap_seq = p->last_seq;
  p->snap_pending = 1;
  p->ser_buf = b;
  p->ser_cap = cap;
  pthread_cond_signal(&p->snap_cv);
  pthread_mutex_unlock(&p->snap_mu);
  p->snap_seq_taken = p->last_seq;
}

static void *snapshot_main(void *arg) {
  hg_pipeline_t *p = arg;
  pthread_mutex_lock(&p->snap_mu);
  for (;;) {
    while (!p->snap_pending && !p->snap_stop) pthread_cond_wait(&p->snap_cv, &p->snap_mu);
    if (!p->snap_pending) break;
    uint64_t seq = p->snap_seq;
    pthread_mutex_unlock(&p->snap_mu);
    /* A snapshot may only cover durable commands. */
    while (hg_journal_durable_seq(p->journal) < seq && !atomic_load(&p->failed)) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    int rc = atomic_load(&p->failed) ? HG_EUNAVAIL
                                     : hg_store_save_snapshot(p->store, seq, p->snap_buf,
                                                              p->snap_len, snapshot_keep(p));
    if (rc == 0) {
      atomic_fetch_add_explicit(&p->stat_snapshots, 1, memory_order_relaxed); /* statistic */
    } else {
      logf_(p, HG_PIPE_LOG_WARN, "snapshot at seq %llu not written: %s %s",
            (unsigned long long)seq, hg_strerror(rc), hg_store_errmsg(p->store));
    }
    pthread_mutex_lock(&p->snap_mu);
    p->snap_pending = 0;
  }
  pthread_mutex_unlock(&p->snap_mu);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Engine thread                                                             */
/* ------------------------------------------------------------------------ */

/* Sequences, journals and applies one command. Returns 0, or 1 when the
 * journal ring is full (nothing done; retry after the journal drains). */
static int sequence_one(hg_pipeline_t *p, const inmsg_t *m) {
  jrec_t rec;
  hg_command_t cmd = m->cmd;
  cmd.seq = p->last_seq + 1;
  cmd.ts = p->cfg.clock(p->cfg.clock_ctx);
  size_t len = 0;
  if (hg_command_encode(&cmd, rec.bytes, sizeof rec.bytes, &len) != 0) {
    /* Not a command the journal can hold: refused before it gets a seq. */
    stage_push(p, HG_PIPE_MALFORMED, m->origin, p->last_seq, NULL);
    return 0;
  }
  rec.seq = cmd.seq;
  rec.ts = cmd.ts;
  rec.len = (uint32_t)len;
  rec.pad_ = 0;
  if (hg_spsc_ring_try_push(p->jring, &rec, offsetof(jrec_t, bytes) + len) != 0) {
    atomic_store(&p->jring_full, 1);
    return 1;
  }
  p->last_seq = cmd.seq;
  p->cur_origin = m->origin;
  int rc = hg_exchange_apply(p->ex, &cmd);
  if (rc != 0) {
    /* Only a broken pipeline gets here (out of memory listing a book). */
    logf_(p, HG_PIPE_LOG_ERROR, "command seq %llu failed to apply: %s; intake stopped",
          (unsigned long long)cmd.seq, hg_strerror(rc));
    atomic_store(&p->failed, rc);
    atomic_store(&p->accepting, 0);
  }
  stage_push(p, HG_PIPE_DONE, m->origin, cmd.seq, NULL);
  atomic_fetch_add_explicit(&p->stat_commands, 1, memory_order_relaxed); /* statistic */
  atomic_store_explicit(&p->stat_last, cmd.seq, memory_order_relaxed);   /* statistic */
  if (p->cfg.snapshot_every && p->last_seq - p->snap_seq_taken >= p->cfg.snapshot_every)
    take_snapshot(p);
  return 0;
}

/* Journal failed: every queued command comes back UNAVAILABLE. */
static int refuse_queued(hg_pipeline_t *p) {
  int did = 0;
  const inmsg_t *m;
  while (stage_free(p) > 0 && (m = hg_mpsc_ring_peek(p->in, NULL)) != NULL) {
    hg_pipe_out_t o;
    memset(&o, 0, sizeof o);
    o.origin = m->origin;
    o.kind = HG_PIPE_UNAVAILABLE;
    if (hg_spsc_ring_try_push(p->cons[0].ring, &o, sizeof o) != 0) break;
    hg_mpsc_ring_consume(p->in);
    did = 1;
  }
  if (did) {
    hg_waiter_notify(p->cons[0].w);
    if (p->cons[0].notify != NULL) p->cons[0].notify(p->cons[0].notify_ctx);
  }
  return did;
}

static int engine_has_work(hg_pipeline_t *p) {
  if (stage_releasable(p)) return 1;
  if (!hg_mpsc_ring_empty(p->in) && stage_free(p) >= STAGE_RESERVE) return 1;
  return 0;
}

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The configured wait strategy ("wait = spin N"): re-check up to cfg.spin
 * times before announcing sleep. The default (0) blocks at once, which is
 * what a machine with fewer cores than busy threads needs. Returns 1 when
 * work turned up. */
static int spin_for(hg_pipeline_t *p, int (*ready)(hg_pipeline_t *p)) {
  for (uint32_t i = 0; i < p->cfg.spin; i++) {
    cpu_pause();
    if (ready(p)) return 1;
  }
  return 0;
}

static int engine_spin_ready(hg_pipeline_t *p) {
  return engine_has_work(p) || atomic_load(&p->engine_stop);
}

static int journal_spin_ready(hg_pipeline_t *p) {
  return !hg_spsc_ring_empty(p->jring) || atomic_load(&p->journal_stop);
}

static void *engine_main(void *arg) {
  hg_pipeline_t *p = arg;
  for (;;) {
    int did = release(p) > 0;
    if (atomic_load(&p->failed)) {
      did |= refuse_queued(p);
    } else {
      int pushed = 0;
      for (uint32_t k = 0; k < ENGINE_BATCH && stage_free(p) >= STAGE_RESERVE; k++) {
        const inmsg_t *m = hg_mpsc_ring_peek(p->in, NULL);
        if (m == NULL) break;
        if (sequence_one(p, m) != 0) break; /* journal ring full */
        hg_mpsc_ring_consume(p->in);
        pushed = 1;
      }
      if (pushed) {
        hg_waiter_notify(p->journal_w);
        did = 1;
      }
    }
    if (did) continue;
    /* Stopping: done once everything sequenced is durable (or can never
     * be). Records the consumer has no room for yet stay staged; after the
     * threads are joined hg_pipeline_poll() takes them from the stage. */
    if (atomic_load(&p->engine_stop) && hg_mpsc_ring_empty(p->in) &&
        (p->last_seq <= durable_limit(p) || atomic_load(&p->failed)))
      break;
    if (spin_for(p, engine_spin_ready)) continue;
    uint32_t tok = hg_waiter_prepare(p->engine_w);
    if (engine_has_work(p) || atomic_load(&p->engine_stop)) {
      hg_waiter_cancel(p->engine_w);
      if (atomic_load(&p->engine_stop) && !engine_has_work(p)) {
        /* Stopping but waiting for durability or the consumer: nap briefly. */
        hg_waiter_sleep(p->engine_w, hg_waiter_prepare(p->engine_w), 1000000);
      }
      continue;
    }
    /* A consumer that was full frees room and notifies; if that notify
     * came between its pop and our prepare it is not seen, so while any
     * consumer is blocked the sleep is bounded (1 ms) instead of endless. */
    int blocked = 0;
    for (uint32_t k = 0; k < p->ncons; k++) blocked |= p->cons[k].blocked;
    hg_waiter_sleep(p->engine_w, tok, blocked ? 1000000 : -1);
  }
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Journal thread                                                            */
/* ------------------------------------------------------------------------ */

static void journal_note_failure(hg_pipeline_t *p) {
  int err = hg_journal_failed(p->journal);
  if (err == 0 || atomic_load(&p->failed)) return;
  const char *msg = "";
  hg_journal_error(p->journal, &msg);
  logf_(p, HG_PIPE_LOG_ERROR, "journal failed (%s): %s; intake stopped, nothing after seq %llu "
        "is acknowledged", hg_strerror(err), msg,
        (unsigned long long)hg_journal_durable_seq(p->journal));
  /* failed before accepting (both seq_cst): a submitter refused with
   * HG_EUNAVAIL then always reads the reason in hg_pipeline_failed(). */
  atomic_store(&p->failed, err);
  atomic_store(&p->accepting, 0);
}

/* Durability moved: wake every consumer that holds records (the engine wakes
 * those it pushes to later; see release()). */
static void wake_durable(hg_pipeline_t *p) {
  atomic_thread_fence(memory_order_seq_cst);
  for (uint32_t k = 0; k < p->ncons; k++)
    if (!hg_spsc_ring_empty(p->cons[k].ring)) wake_consumer(&p->cons[k]);
}

static void *journal_main(void *arg) {
  hg_pipeline_t *p = arg;
  hg_journal_t *j = p->journal;
  for (;;) {
    if (atomic_load_explicit(&p->hold_journal, memory_order_relaxed)) { /* test hook; re-read below */
      atomic_store(&p->journal_parked, 1);
      while (atomic_load(&p->hold_journal) && !atomic_load(&p->journal_stop)) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
      }
      atomic_store(&p->journal_parked, 0);
    }
    int moved = 0;
    size_t len;
    const jrec_t *r;
    while ((r = hg_spsc_ring_peek(p->jring, &len)) != NULL) {
      int rc = hg_journal_append(j, r->seq, r->ts, r->bytes, r->len);
      if (rc == HG_EBUSY) {
        hg_journal_commit(j);
        hg_journal_poll(j, -1);
        if (!hg_journal_failed(j)) continue;
        rc = hg_journal_failed(j);
      }
      if (rc != 0) journal_note_failure(p); /* the record is dropped: never acked */
      hg_spsc_ring_consume(p->jring);
      moved = 1;
    }
    uint64_t before = hg_journal_durable_seq(j);
    if (moved) {
      /* The engine waits for room only when it found the ring full; any other
       * wake here would only make it run once more before durability moves. */
      if (atomic_load(&p->jring_full) && atomic_exchange(&p->jring_full, 0))
        hg_waiter_notify(p->engine_w);
      hg_journal_commit(j);
    }
    if (!hg_journal_failed(j) && hg_journal_durable_seq(j) + 1 < hg_journal_next_seq(j))
      hg_journal_poll(j, -1);
    journal_note_failure(p);
    if (hg_journal_durable_seq(j) != before) wake_durable(p);
    if (atomic_load(&p->failed)) {
      hg_waiter_notify(p->engine_w); /* to refuse what is queued */
      wake_durable(p);               /* to drop what never will be durable */
    }
    int caught_up = hg_journal_failed(j) || hg_journal_durable_seq(j) + 1 >= hg_journal_next_seq(j);
    if (!moved && caught_up) {
      if (atomic_load(&p->journal_stop) && hg_spsc_ring_empty(p->jring)) break;
      if (spin_for(p, journal_spin_ready)) continue;
      uint32_t tok = hg_waiter_prepare(p->journal_w);
      if (!hg_spsc_ring_empty(p->jring) || atomic_load(&p->journal_stop) ||
          atomic_load(&p->hold_journal)) {
        hg_waiter_cancel(p->journal_w);
        continue;
      }
      hg_waiter_sleep(p->journal_w, tok, -1);
    }
  }
  return NULL;
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
    logf_(p, HG_PIPE_LOG_ERROR, "state store %s: %s", p->state_dir, hg_store_errmsg(p->store));
    free(seqs);
    return rc;
  }
  for (size_t i = n; i-- > 0;) {
    if (seqs[i] == 0) {
      /* A key that is not a seq (listed as 0, which would mean "newest"). */
      logf_(p, HG_PIPE_LOG_ERROR, "state store %s: a snapshot key is malformed; skipped",
            p->state_dir);
      note_refused(p, 0, "a malformed snapshot key");
      continue;
    }
    rc = hg_store_restore_snapshot(p->store, seqs[i], p->ex);
    if (rc == 0) {
      *snap_seq = seqs[i];
      break;
    }
    logf_(p, HG_PIPE_LOG_ERROR, "%s", hg_store_errmsg(p->store));
    if (rc != HG_ECORRUPT && rc != HG_EVERSION) break;
    note_refused(p, seqs[i], hg_store_errmsg(p->store));
    if (i > 0)
      logf_(p, HG_PIPE_LOG_WARN, "snapshot at seq %llu skipped; trying the one at seq %llu",
            (unsigned long long)seqs[i], (unsigned long long)seqs[i - 1]);
    else
      logf_(p, HG_PIPE_LOG_WARN,
            "snapshot at seq %llu skipped; no older snapshot: replaying journal %s from seq 1",
            (unsigned long long)seqs[i], p->journal_dir);
    /* A restore that failed its hash check leaves its state behind. */
    hg_exchange_destroy(p->ex);
    p->ex = NULL;
    rc = hg_exchange_create(&p->cfg.exchange, discard_sink, NULL, &p->ex);
    if (rc != 0) {
      logf_(p, HG_PIPE_LOG_ERROR, "exchange config rejected: %s", hg_strerror(rc));
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
  if (f->b == NULL || hg_waiter_create(FEED_SPIN, 0, &f->feeder_w) != 0) {
    free(f->b);
    free(f);
    return NULL;
  }
  if (hg_waiter_create(FEED_SPIN, 0, &f->applier_w) != 0) {
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
    cfg_log(cfg, HG_PIPE_LOG_ERROR, "data directory %s: %s", dir, strerror(e));
    return -e;
  }
  if (!S_ISDIR(st.st_mode)) {
    cfg_log(cfg, HG_PIPE_LOG_ERROR, "data directory %s is not a directory", dir);
    return -ENOTDIR;
  }
  if ((size_t)snprintf(jdir, sizeof jdir, "%s/journal", dir) >= sizeof jdir ||
      (size_t)snprintf(sdir, sizeof sdir, "%s/state", dir) >= sizeof sdir) {
    cfg_log(cfg, HG_PIPE_LOG_ERROR, "data directory path too long");
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
    if (rc != 0) cfg_log(cfg, HG_PIPE_LOG_ERROR, "%s", hg_store_errmsg(s));
    hg_store_close(s);
    if (rc != 0) return rc;
  }
  *snap_seq = snap;
  /* The journal must hold the snapshot's own record: a journal that ends
   * (or starts) elsewhere does not continue it (as recover_finish checks). */
  if (snap > 0) {
    hg_journal_reader_t *rd;
    hg_journal_record_t rec;
    rc = hg_journal_reader_open(jdir, snap, &rd);
    if (rc == 0) {
      rc = hg_journal_reader_next(rd, snap, &rec);
      hg_journal_reader_close(rd);
    }
    if (rc != 0) {
      cfg_log(cfg, HG_PIPE_LOG_ERROR,
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
    cfg_log(cfg, HG_PIPE_LOG_ERROR, "durable mark %s cannot be used: %s", mpath, hg_strerror(rc));
    return rc;
  }
  char why[512] = "";
  uint64_t n = 0;
  rc = replay_into(jdir, ex, snap + 1, UINT64_MAX, &n, why, sizeof why);
  *last_seq = hg_exchange_last_seq(ex);
  if (rc == 0 && *last_seq < mark) {
    cfg_log(cfg, HG_PIPE_LOG_ERROR,
            "journal %s ends at seq %llu but seq %llu was durable (durable mark %s): records "
            "%llu..%llu are missing", jdir, (unsigned long long)*last_seq,
            (unsigned long long)mark, mpath, (unsigned long long)*last_seq + 1,
            (unsigned long long)mark);
    return HG_ECORRUPT;
  }
  char seg[PATH_MAX + 48];
  snprintf(seg, sizeof seg, "%s/journal-%020llu.hgj", jdir, (unsigned long long)mark_seg);
  if (mark_seg > 0 && stat(seg, &st) != 0) {
    cfg_log(cfg, HG_PIPE_LOG_ERROR,
            "%s is missing, but it held the newest records (durable mark %s names it): records "
            "from seq %llu on are lost", seg, mpath, (unsigned long long)mark_seg);
    return HG_ECORRUPT;
  }
  if (rc == HG_ECORRUPT && why[0] != '\0') {
    if (*last_seq < mark)
      cfg_log(cfg, HG_PIPE_LOG_ERROR,
              "%s: the journal ends in a record that is not good, but seq %llu was durable "
              "(durable mark %s): records %llu..%llu are damaged; the state read is at seq %llu",
              why, (unsigned long long)mark, mpath, (unsigned long long)*last_seq + 1,
              (unsigned long long)mark, (unsigned long long)*last_seq);
    else
      cfg_log(cfg, HG_PIPE_LOG_ERROR,
              "%s: the journal ends in a record that is not good (a batch a running daemon is "
              "still writing, a torn tail the daemon's start-up cuts, or corruption); the state "
              "read is at seq %llu", why, (unsigned long long)*last_seq);
    return rc;
  }
  if (rc != 0) {
    cfg_log(cfg, HG_PIPE_LOG_ERROR, "read-only recovery of %s failed: %s", dir,
            why[0] ? why : hg_strerror(rc));
    return rc == HG_ENOTFOUND ? HG_ECORRUPT : rc;
  }
  cfg_log(cfg, HG_PIPE_LOG_INFO,
          "read %s without writing: seq %llu (snapshot %llu + %llu journal records)", dir,
          (unsigned long long)*last_seq, (unsigned long long)snap, (unsigned long long)n);
  return 0;
}

static int make_dir(hg_pipeline_t *p, const char *path) {
  if (mkdir(path, 0750) != 0 && errno != EEXIST) {
    int e = errno;
    logf_(p, HG_PIPE_LOG_ERROR, "cannot create %s: %s", path, strerror(e));
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
    logf_(p, HG_PIPE_LOG_ERROR, "journal %s cannot be opened: %s", p->journal_dir, hg_strerror(rc));
    return rc;
  }
  if (hg_journal_next_seq(p->journal) > snap_seq + 1) {
    if (rrc != 0) {
      logf_(p, HG_PIPE_LOG_ERROR, "recovery failed: %s", why);
      return rrc == HG_ENOTFOUND ? HG_ECORRUPT : rrc;
    }
  } else if (p->replayed != 0) {
    /* Cannot happen: the replay reads only records the scan kept. */
    logf_(p, HG_PIPE_LOG_ERROR, "recovery failed: replayed past the end of journal %s",
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
    logf_(p, HG_PIPE_LOG_ERROR, "data directory %s: %s", dir, strerror(e));
    return -e;
  }
  if (!S_ISDIR(st.st_mode)) {
    logf_(p, HG_PIPE_LOG_ERROR, "data directory %s is not a directory", dir);
    return -ENOTDIR;
  }
  if ((size_t)snprintf(p->journal_dir, sizeof p->journal_dir, "%s/journal", dir) >=
          sizeof p->journal_dir ||
      (size_t)snprintf(p->state_dir, sizeof p->state_dir, "%s/state", dir) >= sizeof p->state_dir ||
      (size_t)snprintf(p->mark_path, sizeof p->mark_path, "%s/durable.mark", dir) >=
          sizeof p->mark_path) {
    logf_(p, HG_PIPE_LOG_ERROR, "data directory path too long");
    return HG_EINVAL;
  }
  if ((rc = make_dir(p, p->journal_dir)) != 0 || (rc = make_dir(p, p->state_dir)) != 0) return rc;

  if ((rc = hg_store_create(&p->store)) != 0) return rc;
  rc = hg_store_open(p->store, p->state_dir, p->cfg.map_size ? p->cfg.map_size : (size_t)1 << 30);
  if (rc != 0) {
    logf_(p, HG_PIPE_LOG_ERROR, "state store %s: %s", p->state_dir, hg_store_errmsg(p->store));
    return rc;
  }
  rc = hg_exchange_create(&p->cfg.exchange, discard_sink, NULL, &p->ex);
  if (rc != 0) {
    logf_(p, HG_PIPE_LOG_ERROR, "exchange config rejected: %s", hg_strerror(rc));
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
    logf_(p, HG_PIPE_LOG_ERROR, "journal %s cannot be opened: %s", p->journal_dir, hg_strerror(rc));
    return rc;
  }
  uint64_t jnext = hg_journal_next_seq(p->journal);
  if (jnext > snap_seq + 1) {
    char why[512] = "";
    rc = replay_into(p->journal_dir, p->ex, snap_seq + 1, UINT64_MAX, &p->replayed, why,
                     sizeof why);
    if (rc != 0) {
      logf_(p, HG_PIPE_LOG_ERROR, "recovery failed: %s", why);
      return rc == HG_ENOTFOUND ? HG_ECORRUPT : rc;
    }
  }
  return recover_finish(p, snap_seq);
}

static int recover_finish(hg_pipeline_t *p, uint64_t snap_seq) {
  p->last_seq = hg_exchange_last_seq(p->ex);
  if (hg_journal_next_seq(p->journal) != p->last_seq + 1) {
    logf_(p, HG_PIPE_LOG_ERROR,
          "journal %s ends before seq %llu but the state is at seq %llu: the journal does not "
          "continue the snapshot", p->journal_dir,
          (unsigned long long)hg_journal_next_seq(p->journal), (unsigned long long)p->last_seq);
    return HG_ECORRUPT;
  }
  logf_(p, HG_PIPE_LOG_INFO, "recovered to seq %llu (snapshot %llu + %llu journal records, %s)",
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
static int recover_checked(hg_pipeline_t *p) {
  int rc = recover(p);
  if (rc == 0 && p->snap_refused && hg_exchange_last_seq(p->ex) < p->snap_refused_newest) {
    logf_(p, HG_PIPE_LOG_ERROR,
          "journal %s ends at seq %llu, before the bad snapshot at seq %llu: the commands up to "
          "it cannot be recovered",
          p->journal_dir, (unsigned long long)hg_exchange_last_seq(p->ex),
          (unsigned long long)p->snap_refused_newest);
    rc = HG_ECORRUPT;
  }
  if (rc != 0 && p->snap_refused)
    logf_(p, HG_PIPE_LOG_ERROR,
          "start refused: %u bad snapshot(s) in %s skipped (%s), and the journal does not "
          "reproduce the state without them",
          p->snap_refused, p->state_dir, p->snap_refused_list);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */
/* ------------------------------------------------------------------------ */

static void free_all(hg_pipeline_t *p) {
  if (p->journal != NULL) hg_journal_close(p->journal);
  hg_store_close(p->store);
  hg_exchange_destroy(p->ex);
  hg_mpsc_ring_destroy(p->in);
  hg_spsc_ring_destroy(p->jring);
  for (uint32_t k = 0; k < HG_PIPE_MAX_CONSUMERS; k++) {
    hg_spsc_ring_destroy(p->cons[k].ring);
    hg_waiter_destroy(p->cons[k].w);
  }
  hg_waiter_destroy(p->engine_w);
  hg_waiter_destroy(p->journal_w);
  if (p->stage != NULL) munmap(p->stage, (size_t)(p->stage_mask + 1) * sizeof *p->stage);
  free(p->ser_buf);
  free(p->snap_buf);
  pthread_mutex_destroy(&p->snap_mu);
  pthread_cond_destroy(&p->snap_cv);
  free(p);
}

int hg_pipeline_open(const hg_pipeline_config_t *cfg, hg_pipeline_t **out) {
  if (cfg == NULL || out == NULL || cfg->data_dir == NULL) return HG_EINVAL;
  hg_pipeline_config_t c = *cfg;
  if (c.inbound_capacity == 0) c.inbound_capacity = 1u << 16;
  if (c.outbound_capacity == 0) c.outbound_capacity = 1u << 18;
  if (c.staging_capacity == 0) c.staging_capacity = 1u << 18;
  if (c.consumers == 0) c.consumers = 1;
  if (c.consumers > HG_PIPE_MAX_CONSUMERS || c.rt_priority < 0 ||
      c.rt_priority > HG_THREAD_RT_MAX)
    return HG_EINVAL;
  if (!is_pow2(c.inbound_capacity) || !is_pow2(c.outbound_capacity) ||
      !is_pow2(c.staging_capacity) || c.staging_capacity < 2 * STAGE_RESERVE ||
      (c.durability != HG_DURABILITY_DURABLE &&
       c.durability != HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE))
    return HG_EINVAL;
  if (c.clock == NULL) c.clock = default_clock;

  hg_pipeline_t *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  p->cfg = c;
  pthread_mutex_init(&p->snap_mu, NULL);
  pthread_cond_init(&p->snap_cv, NULL);
  int rc = 0;
  /* Backed at once, as the rings are: a lazily zeroed stage faulted a page
   * in every ~17 records of its first lap, on the engine thread. */
  p->stage = hg_map__populated((size_t)c.staging_capacity * sizeof *p->stage);
  p->stage_mask = c.staging_capacity - 1;
  if (p->stage == NULL) rc = -ENOMEM;
  if (rc == 0) rc = hg_mpsc_ring_create(c.inbound_capacity, sizeof(inmsg_t), &p->in);
  if (rc == 0) rc = hg_spsc_ring_create(c.inbound_capacity, sizeof(jrec_t), &p->jring);
  p->ncons = c.consumers;
  for (uint32_t k = 0; rc == 0 && k < p->ncons; k++) {
    consumer_t *cn = &p->cons[k];
    cn->p = p;
    rc = hg_spsc_ring_create(c.outbound_capacity, sizeof(hg_pipe_out_t), &cn->ring);
    if (rc == 0) rc = hg_waiter_create(c.spin, 0, &cn->w);
    cn->notify = k == 0 ? c.out_notify : c.consumer_notify[k];
    cn->notify_ctx = k == 0 ? c.out_notify_ctx : c.consumer_notify_ctx[k];
  }
  if (rc == 0) rc = hg_waiter_create(c.spin, 0, &p->engine_w);
  if (rc == 0) rc = hg_waiter_create(c.spin, 0, &p->journal_w);
  if (rc == 0) rc = recover_checked(p);
  if (rc != 0) {
    free_all(p);
    return rc;
  }
  hg_exchange_set_sink(p->ex, stage_sink, p);
  *out = p;
  return 0;
}

int hg_pipeline_start(hg_pipeline_t *p) {
  if (p->running || p->stopped) return HG_ESTATE;
  int rc = hg_thread_start("hg-snapshot", 0, snapshot_main, p, &p->snap_thr);
  if (rc != 0) return rc;
  rc = hg_thread_start("hg-journal", p->cfg.rt_priority, journal_main, p, &p->journal_thr);
  if (rc == 0) {
    rc = hg_thread_start("hg-engine", p->cfg.rt_priority, engine_main, p, &p->engine_thr);
    if (rc != 0) {
      atomic_store(&p->journal_stop, 1);
      hg_waiter_notify(p->journal_w);
      pthread_join(p->journal_thr, NULL);
    }
  }
  if (rc != 0) {
    pthread_mutex_lock(&p->snap_mu);
    p->snap_stop = 1;
    pthread_cond_signal(&p->snap_cv);
    pthread_mutex_unlock(&p->snap_mu);
    pthread_join(p->snap_thr, NULL);
    return rc;
  }
  p->running = 1;
  atomic_store(&p->accepting, 1);
  return 0;
}

static int submit(hg_pipeline_t *p, uint64_t origin, const hg_command_t *cmd, int wake) {
  /* The in-flight count lets stop() wait for producers that passed the
   * accepting check, so a command is either refused or processed. */
  atomic_fetch_add(&p->inflight_submits, 1);
  int rc;
  if (!atomic_load(&p->accepting)) {
    rc = HG_EUNAVAIL;
  } else {
    inmsg_t m;
    m.origin = origin;
    m.cmd = *cmd;
    rc = hg_mpsc_ring_try_push(p->in, &m, sizeof m);
    if (rc == 0) {
      if (wake) hg_waiter_notify(p->engine_w);
    } else {
      atomic_fetch_add_explicit(&p->stat_busy, 1, memory_order_relaxed); /* statistic */
    }
  }
  atomic_fetch_sub(&p->inflight_submits, 1);
  return rc;
}

int hg_pipeline_submit(hg_pipeline_t *p, uint64_t origin, const hg_command_t *cmd) {
  return submit(p, origin, cmd, 1);
}

/* The push above published the command (the ring's release store); the kick
 * is the same notify hg_pipeline_submit() makes, only later: its RMW reads
 * the waiter word's newest value, so an engine that announced sleep before
 * it is woken, and one that announces after it re-checks the ring and sees
 * every command pushed before the kick. Deferring the notify therefore
 * delays the engine at most until the kick, never loses the command. */
int hg_pipeline_submit_nowake(hg_pipeline_t *p, uint64_t origin, const hg_command_t *cmd) {
  return submit(p, origin, cmd, 0);
}

void hg_pipeline_kick(hg_pipeline_t *p) { hg_waiter_notify(p->engine_w); }

/* Consumer 0's DONE records count as released (a statistic). */
static inline void note_released(hg_pipeline_t *p, uint32_t consumer, const hg_pipe_out_t *o) {
  if (consumer == 0 && o->kind == HG_PIPE_DONE)
    atomic_store_explicit(&p->stat_released, o->seq, memory_order_relaxed); /* statistic */
}

size_t hg_pipeline_poll_consumer(hg_pipeline_t *p, uint32_t consumer, hg_pipe_out_t *out,
                                  size_t max) {
  if (consumer >= p->ncons) return 0;
  consumer_t *c = &p->cons[consumer];
  size_t n = 0, dropped = 0;
  size_t len;
  const hg_pipe_out_t *m;
  uint64_t durable = durable_limit(p);
  while (n < max && (m = hg_spsc_ring_peek(c->ring, &len)) != NULL) {
    if (m->seq > durable) {
      /* The durability gate (release() pushes records before they are
       * durable). Once the journal failed its durable seq is final and what
       * lies beyond it is dropped unsent; UNAVAILABLE records (seq 0) behind
       * it then come through. */
      if (!hg_journal_failed(p->journal)) break;
      durable = durable_limit(p);
      if (m->seq > durable) {
        hg_spsc_ring_consume(c->ring);
        dropped++;
        continue;
      }
    }
    memcpy(&out[n], m, sizeof *out);
    hg_spsc_ring_consume(c->ring);
    note_released(p, consumer, &out[n++]);
  }
  /* Only an engine that found this ring full waits for room; waking it on
   * every poll would cost it a futex wake-up and a context switch per batch.
   * A flag set between our pop and this load is caught by the engine's
   * bounded (1 ms) sleep while a consumer is blocked. */
  if ((n || dropped) && atomic_load(&c->want_room) && atomic_exchange(&c->want_room, 0))
    hg_waiter_notify(p->engine_w);
  if (n < max && atomic_load(&p->threads_done) && hg_spsc_ring_empty(c->ring)) {
    /* The engine thread has exited: what it left staged is read from here
     * (the join in hg_pipeline_stop() ordered its writes before
     * threads_done). Each consumer reads through its own cursor. */
    durable = durable_limit(p);
    while (n < max && c->cursor != p->stage_tail &&
           p->stage[c->cursor & p->stage_mask].seq <= durable) {
      out[n] = p->stage[c->cursor++ & p->stage_mask];
      note_released(p, consumer, &out[n++]);
    }
  }
  return n;
}

size_t hg_pipeline_poll(hg_pipeline_t *p, hg_pipe_out_t *out, size_t max) {
  return hg_pipeline_poll_consumer(p, 0, out, max);
}

/* A poll would return something: the ring's head is durable (or the journal
 * failed, so it will be dropped), or the engine has exited and left records
 * staged. Consumer thread. */
static bool consumer_ready(void *ctx) {
  consumer_t *c = ctx;
  hg_pipeline_t *p = c->p;
  size_t len;
  const hg_pipe_out_t *m = hg_spsc_ring_peek(c->ring, &len);
  if (m != NULL) return m->seq <= durable_limit(p) || hg_journal_failed(p->journal) != 0;
  return atomic_load(&p->threads_done) && c->cursor != p->stage_tail &&
         p->stage[c->cursor & p->stage_mask].seq <= durable_limit(p);
}

int hg_pipeline_wait_consumer(hg_pipeline_t *p, uint32_t consumer, int64_t timeout_ns) {
  if (consumer >= p->ncons) return HG_EINVAL;
  return hg_waiter_wait(p->cons[consumer].w, consumer_ready, &p->cons[consumer], timeout_ns);
}

int hg_pipeline_wait(hg_pipeline_t *p, int64_t timeout_ns) {
  return hg_pipeline_wait_consumer(p, 0, timeout_ns);
}

int hg_pipeline_stop(hg_pipeline_t *p) {
  if (p->stopped) return atomic_load(&p->failed);
  if (p->running) {
    atomic_store(&p->accepting, 0);
    while (atomic_load(&p->inflight_submits) != 0) sched_yield();
    atomic_store(&p->engine_stop, 1);
    hg_waiter_notify(p->engine_w);
    pthread_join(p->engine_thr, NULL);
    atomic_store(&p->journal_stop, 1);
    hg_waiter_notify(p->journal_w);
    pthread_join(p->journal_thr, NULL);
    pthread_mutex_lock(&p->snap_mu);
    p->snap_stop = 1;
    pthread_cond_signal(&p->snap_cv);
    pthread_mutex_unlock(&p->snap_mu);
    pthread_join(p->snap_thr, NULL);
    p->running = 0;
    atomic_store(&p->threads_done, 1);
  }
  p->stopped = 1;
  int rc = atomic_load(&p->failed);
  if (rc == 0) rc = hg_journal_sync(p->journal);
  if (rc == 0 && p->last_seq > 0) {
    /* Restart then needs no journal replay at all. This one also rewrites
     * the store's instrument and account tables, for tools that read them. */
    rc = hg_store_save_exchange(p->store, p->ex, snapshot_keep(p));
    if (rc != 0)
      logf_(p, HG_PIPE_LOG_ERROR, "final snapshot at seq %llu not written: %s %s",
            (unsigned long long)p->last_seq, hg_strerror(rc), hg_store_errmsg(p->store));
    else
      atomic_fetch_add(&p->stat_snapshots, 1);
  }
  for (uint32_t k = 0; k < p->ncons; k++) hg_waiter_close(p->cons[k].w);
  return rc;
}

void hg_pipeline_close(hg_pipeline_t *p) {
  if (p == NULL) return;
  if (p->running) hg_pipeline_stop(p);
  free_all(p);
}

const hg_exchange_t *hg_pipeline_exchange(const hg_pipeline_t *p) { return p->ex; }

void hg_pipeline_state_hash(const hg_pipeline_t *p, uint8_t out[HG_SHA256_LEN]) {
  hg_exchange_hash(p->ex, out);
}

void hg_pipeline_stats(const hg_pipeline_t *p, hg_pipeline_stats_t *out) {
  hg_pipeline_t *q = (hg_pipeline_t *)p;
  memset(out, 0, sizeof *out);
  /* Relaxed loads: statistics, no ordering with other data needed. */
  out->commands = atomic_load_explicit(&q->stat_commands, memory_order_relaxed);
  out->last_seq = atomic_load_explicit(&q->stat_last, memory_order_relaxed);
  out->durable_seq = hg_journal_durable_seq(p->journal);
  out->released_seq = atomic_load_explicit(&q->stat_released, memory_order_relaxed);
  out->snapshots = atomic_load_explicit(&q->stat_snapshots, memory_order_relaxed);
  out->busy_rejects = atomic_load_explicit(&q->stat_busy, memory_order_relaxed);
  out->replayed = p->replayed;
}

int hg_pipeline_failed(const hg_pipeline_t *p) {
  return atomic_load(&((hg_pipeline_t *)p)->failed);
}

hg_journal_t *hg_pipeline__journal(hg_pipeline_t *p) { return p->journal; }

void hg_pipeline__hold_journal(hg_pipeline_t *p, int hold) {
  atomic_store(&p->hold_journal, hold);
  hg_waiter_notify(p->journal_w);
  while (hold && !atomic_load(&p->journal_parked)) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

int hg_pipeline__engine_asleep(hg_pipeline_t *p) { return hg_waiter_sleeping(p->engine_w); }

int hg_pipeline__outbound_empty(hg_pipeline_t *p, uint32_t consumer) {
  return hg_spsc_ring_empty(p->cons[consumer].ring);
}

int hg_pipeline__threads_asleep(hg_pipeline_t *p) {
  return hg_waiter_sleeping(p->engine_w) && hg_waiter_sleeping(p->journal_w);
}
