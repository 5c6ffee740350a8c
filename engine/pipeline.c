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
 *
 * Loop mode (pipeline.h, "Loop mode"). The same sequence_one() runs on
 * the loop owner's thread (hg_pipeline_execute), which hands the record
 * straight to hg_journal_append() instead of the journal ring; the loop
 * submits each iteration's batch (hg_journal_commit) and reaps it
 * (hg_journal_poll(j, 0)) when the eventfd registered with the journal's
 * io_uring turns readable. No engine or journal thread runs; the engine's
 * waiter serves only the rare waits for another consumer's ring room, and
 * the eventfd is also how other threads' submits and a consumer that was
 * blocked reach the loop. Consumer 0 is the loop owner: it is told what it
 * can poll by the loop calls' return, never notified. When consumer 0's
 * ring is full inside a command (or the stage is short before one), the
 * owner cannot poll from outside, so the pipeline syncs the journal and
 * calls cfg.loop_drain there (loop_drain()); a command the drain executes
 * is queued in the inbound ring for the next commit, never nested.
 *
 * Start-up recovery and journal replay are in pipeline_recover.c; the
 * layout both files share is pipeline_int.h.
 */
#include "hourglass/pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hourglass/bytes.h"
#include "hourglass/error.h"
#include "hourglass/thread.h"
#include "command_internal.h"
#include "journal_internal.h"
#include "map_internal.h"
#include "pipeline_int.h"
#include "pipeline_internal.h"

/* ------------------------------------------------------------------------ */

void hg_pipe__log(const hg_pipeline_config_t *cfg, int level, const char *fmt, ...) {
  char msg[1536]; /* the journal's refusals spell out the operator's options */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cfg->log != NULL) {
    cfg->log(cfg->log_ctx, level, msg);
  } else {
    fprintf(stderr, "hourglass pipeline %s: %s\n", hg_log_level_name(level), msg);
  }
}

static uint64_t default_clock(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

void hg_pipeline_config_init(hg_pipeline_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  hg_exchange_config_default(&cfg->exchange);
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
  /* Cluster mode: committed means stored on a majority of disks; the local
   * journal is not waited for (see "Cluster mode" in pipeline.h). */
  if (p->cfg.replicate != NULL) return atomic_load(&((hg_pipeline_t *)p)->committed_seq);
  return p->cfg.durability == HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE
             ? UINT64_MAX
             : hg_journal_durable_seq(p->journal);
}

/* Whether a record within the durable limit may leave: a stream record
 * (S, k) only once the group committed it, i.e. its position is at or
 * before the committed one (pipeline.h, "Stream records"). */
static int out_committed(const hg_pipeline_t *p, const hg_pipe_out_t *m) {
  if (m->kind != HG_PIPE_STREAM) return 1;
  uint64_t c = atomic_load(&((hg_pipeline_t *)p)->committed_seq);
  return m->seq < c || (m->seq == c && m->event.seq <= p->committed_k);
}

static int loop_mode(const hg_pipeline_t *p) { return p->cfg.mode == HG_PIPE_MODE_LOOP; }

/* Tells whoever runs the sequencer that a command was queued or ring room
 * freed: the engine thread's waiter, or in loop mode the loop's eventfd
 * (a syscall, but only for submits from threads other than the loop's and
 * for a consumer that was blocked). */
static void wake_engine(hg_pipeline_t *p) {
  if (loop_mode(p)) {
    uint64_t one = 1;
    ssize_t w = write(p->loop_fd, &one, sizeof one);
    (void)w; /* EAGAIN: the counter is saturated, so the loop wakes anyway */
  } else {
    hg_waiter_notify(p->engine_w);
  }
}

static void journal_note_failure(hg_pipeline_t *p);
static void wake_durable(hg_pipeline_t *p);

static void wake_consumer(consumer_t *c) {
  hg_waiter_notify(c->w);
  if (c->notify != NULL) c->notify(c->notify_ctx);
}

/* Moves staged records to every consumer's ring, durable or not, and frees
 * what all of them have (an empty stage starts over at its first slot).
 * Returns how many records moved in all.
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
      if (o->kind == HG_PIPE_STREAM && k != 0) { /* consumer 0's alone */
        c->cursor++;
        continue;
      }
      if (hg_spsc_ring_try_push_deferred(c->ring, o, sizeof *o) != 0) {
        c->blocked = 1;
        atomic_store(&c->want_room, 1);
        break;
      }
      last = o->seq;
      c->cursor++;
      moved++;
    }
    if (moved) {
      hg_spsc_ring_publish(c->ring); /* one store for the whole batch */
      atomic_thread_fence(memory_order_seq_cst);
      if (last <= durable_limit(p)) wake_consumer(c);
    }
    if (c->cursor < low) low = c->cursor;
    n += moved;
  }
  p->stage_head = low;
  if (low == p->stage_tail && low != 0) {
    /* Every consumer has everything: start over at slot 0, so that the
     * records of the next commands reuse the same few slots, still in the
     * cache, instead of sweeping the whole capacity (a cache miss per
     * record). Nothing else holds a stage index: the consumers read the
     * stage only once the engine has stopped (threads_done). */
    p->stage_head = p->stage_tail = 0;
    for (uint32_t k = 0; k < p->ncons; k++) p->cons[k].cursor = 0;
  }
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

/* Loop mode: makes staged records and consumer 0's ring durable, then has
 * the loop owner poll consumer 0 through cfg.loop_drain, from inside the
 * command (pipeline.h, "Loop mode"). A command the drain submits meanwhile
 * is queued (hg_pipeline_execute). Returns whether consumer 0 made room. */
static int loop_drain(hg_pipeline_t *p) {
  if (p->cfg.loop_drain == NULL || !p->loop_calling || p->loop_draining) return 0;
  if (p->cfg.durability == HG_DURABILITY_DURABLE &&
      hg_journal_durable_seq(p->journal) < p->last_seq) {
    hg_journal_sync(p->journal);
    journal_note_failure(p);
    if (atomic_load(&p->failed)) return 0;
    p->loop_durable = hg_journal_durable_seq(p->journal);
    wake_durable(p);
  }
  p->loop_draining = 1;
  p->cfg.loop_drain(p->cfg.loop_drain_ctx);
  p->loop_draining = 0;
  atomic_store(&p->cons[0].want_room, 0); /* the owner polled; nobody sleeps on it */
  return release(p) > 0;
}

/* Loop mode: a consumer other than 0 is full. Makes everything durable and
 * waits (bounded) for one of them to poll. Returns 0 when none is full. */
static int loop_wait_others(hg_pipeline_t *p) {
  int others = 0;
  for (uint32_t k = 1; k < p->ncons; k++) others |= p->cons[k].blocked;
  if (atomic_load(&p->failed) || !others) return 0;
  hg_journal_commit(p->journal);
  hg_journal_poll(p->journal, -1);
  journal_note_failure(p);
  wake_durable(p);
  uint32_t tok = hg_waiter_prepare(p->engine_w);
  if (stage_releasable(p)) hg_waiter_cancel(p->engine_w);
  else hg_waiter_sleep(p->engine_w, tok, 1000000);
  return 1;
}

/* Loop mode: the stage has no room and release() moved nothing. Consumer
 * 0 (the loop owner) drains from inside the command when cfg.loop_drain is
 * set; another consumer that is full is waited for (once its records are
 * durable it polls); without a drain, consumer 0 loses its oldest record
 * (logged; pipeline.h, "Loop mode"). After a journal failure nothing
 * staged will be released, so the oldest record is dropped for all. */
static void loop_make_room(hg_pipeline_t *p) {
  if (!atomic_load(&p->failed) && p->cons[0].blocked && loop_drain(p)) return;
  if (loop_wait_others(p)) return;
  if (!atomic_load(&p->failed) && p->loop_dropped++ == 0)
    logf_(p, HG_LOG_ERROR, "command seq %llu has more events than the stage and consumer 0's "
          "ring hold and no drain is set; consumer 0 loses the excess",
          (unsigned long long)p->last_seq);
  if (p->cons[0].cursor == p->stage_head) p->cons[0].cursor++;
  uint64_t low = p->stage_tail;
  for (uint32_t k = 0; k < p->ncons; k++) {
    if (atomic_load(&p->failed) && p->cons[k].cursor == p->stage_head) p->cons[k].cursor++;
    if (p->cons[k].cursor < low) low = p->cons[k].cursor;
  }
  p->stage_head = low;
}

static void stage_make_room(hg_pipeline_t *p) {
  while (stage_free(p) == 0) {
    if (loop_mode(p)) {
      if (!release(p)) loop_make_room(p);
      continue;
    }
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
    logf_(p, HG_LOG_WARN, "snapshot at seq %llu skipped: %s",
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
      logf_(p, HG_LOG_WARN, "snapshot at seq %llu not written: %s %s",
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

/* Hands one record to the journal: through the journal ring to its thread,
 * or in loop mode straight into the journal's filling batch. 0, 1 (the
 * journal ring is full) or HG_EUNAVAIL (loop mode: the journal failed). In
 * both cases nothing was done. */
static int hand_record(hg_pipeline_t *p, const jrec_t *rec) {
  if (loop_mode(p)) {
    hg_journal_t *j = p->journal;
    int rc = hg_journal_append(j, rec->seq, rec->ts, rec->bytes, rec->len);
    while (rc == HG_EBUSY && !hg_journal_failed(j)) {
      /* A whole batch filled while the previous one is in flight: wait for
       * that one (a blocking wait, but once per batch_bytes of records). */
      hg_journal_poll(j, -1);
      rc = hg_journal_append(j, rec->seq, rec->ts, rec->bytes, rec->len);
    }
    if (rc == 0) return 0;
    journal_note_failure(p);
    return HG_EUNAVAIL;
  }
  if (hg_spsc_ring_try_push(p->jring, rec, offsetof(jrec_t, bytes) + rec->len) != 0) {
    atomic_store(&p->jring_full, 1);
    return 1;
  }
  return 0;
}

static void rbatch_add(hg_pipeline_t *p, uint64_t origin, const jrec_t *rec);

/* Journals and applies one stamped command (rec holds its encoding); in
 * cluster mode a command this node sequenced (propose) also joins the
 * batch to replicate. Returns 0, or hand_record's refusal (nothing done). */
static int apply_record(hg_pipeline_t *p, uint64_t origin, const jrec_t *rec,
                        const hg_command_t *cmd, int propose) {
  int hrc = hand_record(p, rec);
  if (hrc != 0) return hrc;
  if (propose && p->cfg.replicate != NULL) rbatch_add(p, origin, rec);
  p->last_seq = cmd->seq;
  p->cur_origin = origin;
  int rc = hg_exchange_apply(p->ex, cmd);
  if (rc != 0) {
    /* Only a broken pipeline gets here (out of memory listing a book). */
    logf_(p, HG_LOG_ERROR, "command seq %llu failed to apply: %s; intake stopped",
          (unsigned long long)cmd->seq, hg_strerror(rc));
    atomic_store(&p->failed, rc);
    atomic_store(&p->accepting, 0);
  }
  stage_push(p, HG_PIPE_DONE, origin, cmd->seq, NULL);
  atomic_fetch_add_explicit(&p->stat_commands, 1, memory_order_relaxed); /* statistic */
  atomic_store_explicit(&p->stat_last, cmd->seq, memory_order_relaxed);   /* statistic */
  if (p->cfg.snapshot_every && p->last_seq - p->snap_seq_taken >= p->cfg.snapshot_every)
    take_snapshot(p);
  return 0;
}

/* Sequences, journals and applies one command. Returns 0, or hand_record's
 * refusal (nothing done; retry after the journal drains). */
static int sequence_one(hg_pipeline_t *p, uint64_t origin, const hg_command_t *in) {
  jrec_t rec;
  hg_command_t cmd = *in;
  cmd.seq = p->last_seq + 1;
  cmd.ts = p->cfg.clock(p->cfg.clock_ctx);
  size_t len = 0;
  if (hg_command_encode(&cmd, rec.bytes, sizeof rec.bytes, &len) != 0) {
    /* Not a command the journal can hold: refused before it gets a seq. */
    stage_push(p, HG_PIPE_MALFORMED, origin, p->last_seq, NULL);
    return 0;
  }
  rec.seq = cmd.seq;
  rec.ts = cmd.ts;
  rec.len = (uint32_t)len;
  rec.pad_ = 0;
  return apply_record(p, origin, &rec, &cmd, 1);
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
        if (sequence_one(p, m->origin, &m->cmd) != 0) break; /* journal ring full */
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
  logf_(p, HG_LOG_ERROR, "journal failed (%s): %s; intake stopped, nothing after seq %llu "
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
  if (p->loop_fd >= 0) close(p->loop_fd); /* after the journal unregistered it */
  if (p->stage != NULL) munmap(p->stage, (size_t)(p->stage_mask + 1) * sizeof *p->stage);
  free(p->ser_buf);
  free(p->snap_buf);
  free(p->rbatch);
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
       c.durability != HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE) ||
      (c.mode != HG_PIPE_MODE_THREADS && c.mode != HG_PIPE_MODE_LOOP) ||
      (c.replicate != NULL && c.mode != HG_PIPE_MODE_LOOP))
    return HG_EINVAL;
  if (c.clock == NULL) c.clock = default_clock;

  hg_pipeline_t *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  p->cfg = c;
  p->loop_fd = -1;
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
    rc = hg_spsc_ring_create_fixed(c.outbound_capacity, sizeof(hg_pipe_out_t), &cn->ring);
    if (rc == 0) rc = hg_waiter_create(c.spin, &cn->w);
    cn->notify = k == 0 ? c.out_notify : c.consumer_notify[k];
    if (k == 0 && c.mode == HG_PIPE_MODE_LOOP) cn->notify = NULL; /* the loop owner */
    cn->notify_ctx = k == 0 ? c.out_notify_ctx : c.consumer_notify_ctx[k];
  }
  if (rc == 0) rc = hg_waiter_create(c.spin, &p->engine_w);
  if (rc == 0) rc = hg_waiter_create(c.spin, &p->journal_w);
  if (rc == 0 && c.mode == HG_PIPE_MODE_LOOP) {
    p->loop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->loop_fd < 0) rc = -errno;
  }
  if (rc == 0 && c.replicate != NULL) {
    p->rbatch_cap = HG_PIPE_BATCH_BYTES;
    p->rbatch = malloc(p->rbatch_cap);
    if (p->rbatch == NULL) rc = -ENOMEM;
    else hg_st32(p->rbatch, HG_PIPE_BATCH_MAGIC);
    p->rbatch_len = HG_PIPE_BATCH_HEADER;
  }
  if (rc == 0) rc = hg_pipe__recover(p);
  /* A pipeline opened on a journal with commands has them committed. */
  atomic_store(&p->committed_seq, p->last_seq);
  if (rc == 0 && c.mode == HG_PIPE_MODE_LOOP) {
    rc = hg_journal_set_eventfd(p->journal, p->loop_fd);
    if (rc != 0) logf_(p, HG_LOG_ERROR, "cannot register the loop's eventfd with io_uring: %s",
                       hg_strerror(rc));
    p->loop_durable = hg_journal_durable_seq(p->journal);
  }
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
  if (loop_mode(p)) {
    p->running = 1;
    atomic_store(&p->accepting, 1);
    return 0;
  }
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
      if (wake) wake_engine(p);
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

void hg_pipeline_kick(hg_pipeline_t *p) { wake_engine(p); }

/* ------------------------------------------------------------------------ */
/* Loop mode: the sequencer and the journal driven by the owner's loop       */
/* ------------------------------------------------------------------------ */

int hg_pipeline_mode(const hg_pipeline_t *p) { return p->cfg.mode; }

int hg_pipeline_loop_fd(const hg_pipeline_t *p) { return p->loop_fd; }

/* Sequences what other threads queued (hg_pipeline_submit in loop mode),
 * while the stage has room; after a journal failure refuses it instead. */
static void loop_take_queued(hg_pipeline_t *p) {
  const inmsg_t *m;
  if (p->cfg.replicate != NULL && !p->writable) {
    refuse_queued(p); /* a follower sequences nothing of its own */
    return;
  }
  while (!atomic_load(&p->failed) && (m = hg_mpsc_ring_peek(p->in, NULL)) != NULL) {
    if (stage_free(p) < STAGE_RESERVE) {
      release(p);
      if (stage_free(p) < STAGE_RESERVE) return; /* taken once consumers make room */
    }
    if (sequence_one(p, m->origin, &m->cmd) != 0) break;
    hg_mpsc_ring_consume(p->in);
  }
  if (atomic_load(&p->failed)) refuse_queued(p);
}

/* The tail of both loop calls: what other threads queued sequenced,
 * staged records to the rings, the batch to the kernel, consumers woken
 * when durability moved. Returns whether consumer 0 has something to poll. */
static bool consumer_ready(void *ctx);
static void rbatch_flush(hg_pipeline_t *p);
static int loop_settle(hg_pipeline_t *p) {
  p->loop_calling = 1;
  if (!hg_mpsc_ring_empty(p->in)) loop_take_queued(p);
  p->loop_calling = 0;
  if (p->rbatch_n != 0) rbatch_flush(p);
  release(p);
  if (!atomic_load(&p->failed)) {
    hg_journal_commit(p->journal);
    journal_note_failure(p);
  }
  uint64_t d = hg_journal_durable_seq(p->journal);
  if (d != p->loop_durable || atomic_load(&p->failed)) {
    p->loop_durable = d;
    wake_durable(p);
  }
  return consumer_ready(&p->cons[0]);
}

int hg_pipeline_execute(hg_pipeline_t *p, uint64_t origin, const hg_command_t *cmd) {
  if (!loop_mode(p)) return HG_EINVAL;
  if (!atomic_load(&p->accepting)) return HG_EUNAVAIL;
  if (p->cfg.replicate != NULL && !p->writable) return HG_EPERM;
  /* From inside cfg.loop_drain: the command being applied is not finished,
   * so this one waits in the inbound ring for the loop's next commit. */
  if (p->loop_draining) return submit(p, origin, cmd, 0);
  int outer = p->loop_calling, rc = 0;
  p->loop_calling = 1;
  while (stage_free(p) < STAGE_RESERVE) {
    if (release(p)) continue;
    if (atomic_load(&p->failed)) {
      rc = HG_EUNAVAIL;
      break;
    }
    if (p->cons[0].blocked && loop_drain(p)) continue;
    if (loop_wait_others(p)) continue;
    atomic_fetch_add_explicit(&p->stat_busy, 1, memory_order_relaxed); /* statistic */
    rc = HG_EBUSY;
    break;
  }
  if (rc == 0 && sequence_one(p, origin, cmd) != 0) rc = HG_EUNAVAIL;
  p->loop_calling = outer;
  return rc;
}

int hg_pipeline_loop_commit(hg_pipeline_t *p) {
  if (!loop_mode(p) || !p->running || p->loop_draining) return 0;
  return loop_settle(p);
}

int hg_pipeline_loop_reap(hg_pipeline_t *p, int timeout_ms) {
  if (!loop_mode(p) || !p->running || p->loop_draining) return 0;
  uint64_t n;
  ssize_t r = read(p->loop_fd, &n, sizeof n);
  (void)r; /* EAGAIN: nothing signalled; the reap below looks anyway */
  if (!atomic_load(&p->failed)) {
    hg_journal_poll(p->journal, timeout_ms);
    journal_note_failure(p);
  }
  return loop_settle(p);
}

/* hg_pipeline_stop() in loop mode, on the owner thread once the loop no
 * longer calls in: sequences what other threads queued, makes everything
 * durable and moves it to the consumers' rings (as far as they have room;
 * the rest is polled from the stage after the stop). */
static void loop_finish(hg_pipeline_t *p) {
  for (;;) {
    loop_take_queued(p);
    if (!atomic_load(&p->failed)) {
      hg_journal_sync(p->journal);
      journal_note_failure(p);
    }
    release(p);
    p->loop_durable = hg_journal_durable_seq(p->journal);
    wake_durable(p);
    if (hg_mpsc_ring_empty(p->in)) return;
    /* Queued commands wait for stage or ring room: the consumers poll. */
    uint32_t tok = hg_waiter_prepare(p->engine_w);
    hg_waiter_sleep(p->engine_w, tok, 1000000);
  }
}

/* ------------------------------------------------------------------------ */
/* Cluster mode: batches out to the group, committed batches in             */
/* ------------------------------------------------------------------------ */

#define BATCH_REC_HEADER 24u /* seq, ts, len, route length or BATCH_STREAM */
#define BATCH_STREAM 0x80000000u /* in the route length's place: a stream record */

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Bytes a record takes in the batch: header, route slot, command. */
static size_t rec_bytes(const hg_pipeline_t *p, size_t len) {
  return BATCH_REC_HEADER + (p->cfg.route_out != NULL ? HG_PIPE_ROUTE_BYTES : 0) + pad8(len);
}

/* The batch so far goes to cfg.replicate; a refusal leaves commands
 * applied here that the group will never hold, so the pipeline fails. */
static void rbatch_flush(hg_pipeline_t *p) {
  hg_st32(p->rbatch + 4, p->rbatch_n);
  if (p->cfg.route_out != NULL) {
    /* Each route slot holds its record's origin (rbatch_add): ask for the route. */
    for (size_t off = HG_PIPE_BATCH_HEADER; off < p->rbatch_len;) {
      uint8_t *d = p->rbatch + off;
      uint32_t len = hg_ld32(d + 16);
      if (hg_ld32(d + 20) == BATCH_STREAM) { /* a stream record: no route */
        off += BATCH_REC_HEADER + pad8(len);
        continue;
      }
      uint8_t *slot = d + BATCH_REC_HEADER;
      uint64_t origin = hg_ld64(slot);
      memset(slot, 0, HG_PIPE_ROUTE_BYTES);
      p->cfg.route_out(p->cfg.route_ctx, origin, slot);
      off += rec_bytes(p, len);
    }
  }
  int rc = p->cfg.replicate(p->cfg.replicate_ctx, p->rbatch, p->rbatch_len, p->rbatch_last);
  p->rbatch_len = HG_PIPE_BATCH_HEADER;
  p->rbatch_n = 0;
  if (rc != 0) {
    logf_(p, HG_LOG_ERROR, "batch up to seq %llu not replicated: %s; intake stopped",
          (unsigned long long)p->rbatch_last, hg_strerror(rc));
    hg_pipeline_fail(p, rc);
  }
}

/* Appends a record to the batch, which has room for it: the header (a, b,
 * len, rword), rlen bytes of route slot holding origin, len bytes and zero
 * padding to a multiple of 8. */
static void rbatch_put(hg_pipeline_t *p, uint64_t a, uint64_t b, uint32_t rword, uint32_t rlen,
                       uint64_t origin, const void *bytes, uint32_t len) {
  uint8_t *d = p->rbatch + p->rbatch_len;
  hg_st64(d, a);
  hg_st64(d + 8, b);
  hg_st32(d + 16, len);
  hg_st32(d + 20, rword);
  d += BATCH_REC_HEADER;
  if (rlen != 0) {
    memset(d, 0, rlen);
    hg_st64(d, origin);
    d += rlen;
  }
  memcpy(d, bytes, len);
  memset(d + len, 0, pad8(len) - len);
  p->rbatch_len += BATCH_REC_HEADER + rlen + pad8(len);
  p->rbatch_n++;
}

/* Appends rec to the batch (sending the batch first if rec does not fit).
 * With cfg.route_out the record's route slot holds its origin until
 * rbatch_flush() asks for the route (the submitter may still be filling in
 * what the route says while the command executes). */
static void rbatch_add(hg_pipeline_t *p, uint64_t origin, const jrec_t *rec) {
  if (p->rbatch_len + rec_bytes(p, rec->len) > p->rbatch_cap) rbatch_flush(p);
  uint32_t rlen = p->cfg.route_out != NULL ? HG_PIPE_ROUTE_BYTES : 0;
  rbatch_put(p, rec->seq, rec->ts, rlen, rlen, origin, rec->bytes, rec->len);
  p->rbatch_last = rec->seq;
}

/* Stages stream record (after, k) for consumer 0. */
static void stage_stream(hg_pipeline_t *p, uint64_t after, uint64_t k) {
  hg_exchange_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.seq = k;
  stage_push(p, HG_PIPE_STREAM, 0, after, &ev);
  p->stream_after = after;
  p->stream_k = k;
}

int hg_pipeline_stream_add(hg_pipeline_t *p, const void *bytes, size_t len) {
  if (!loop_mode(p) || p->cfg.replicate == NULL || len == 0 || len > HG_PIPE_STREAM_MAX)
    return HG_EINVAL;
  if (!atomic_load(&p->accepting) || atomic_load(&p->failed)) return HG_EUNAVAIL;
  if (!p->writable) return HG_EPERM;
  if (stage_free(p) == 0) release(p);
  if (stage_free(p) == 0) return HG_EBUSY;
  if (p->rbatch_len + BATCH_REC_HEADER + pad8(len) > p->rbatch_cap) rbatch_flush(p);
  if (atomic_load(&p->failed)) return HG_EUNAVAIL;
  uint64_t after = p->last_seq;
  uint64_t k = p->stream_after == after ? p->stream_k + 1 : 1;
  rbatch_put(p, after, k, BATCH_STREAM, 0, 0, bytes, (uint32_t)len);
  stage_stream(p, after, k);
  return 0;
}

void hg_pipeline_set_writable(hg_pipeline_t *p, int writable) { p->writable = writable; }

void hg_pipeline_fail(hg_pipeline_t *p, int err) {
  int expected = 0;
  if (err == 0) err = HG_EUNAVAIL;
  /* failed before accepting, as journal_note_failure() orders them. */
  if (atomic_compare_exchange_strong(&p->failed, &expected, err))
    logf_(p, HG_LOG_ERROR, "pipeline failed: %s; intake stopped, nothing after seq %llu "
          "is released", hg_strerror(err), (unsigned long long)durable_limit(p));
  atomic_store(&p->accepting, 0);
}

/* The records of a committed batch up to seq are committed: released to
 * the consumers from now on. */
static void commit_upto(hg_pipeline_t *p, uint64_t seq, uint64_t k) {
  uint64_t c = atomic_load(&p->committed_seq);
  if (seq < c || (seq == c && k <= p->committed_k)) return;
  p->committed_k = k;
  atomic_store(&p->committed_seq, seq);
  release(p);
  wake_durable(p);
}

/* Applies stream record (after, k) of a committed batch: skipped when this
 * node staged it (it added it, or applied it before), else handed to
 * cfg.stream_in and staged. 0, 1 (skipped), HG_EBUSY, HG_ECORRUPT. */
static int apply_stream(hg_pipeline_t *p, uint64_t after, uint64_t k, const uint8_t *bytes,
                        uint32_t len) {
  if (after < p->stream_after || (after == p->stream_after && k <= p->stream_k)) return 1;
  /* Positions only grow; k need not start at 1 (after a restart from a
   * snapshot the records before it in the same place are not replayed). */
  if (after != p->last_seq || k == 0 || len > HG_PIPE_STREAM_MAX) return HG_ECORRUPT;
  if (p->cfg.stream_in == NULL) { /* nobody to hand it to: its place is kept */
    p->stream_after = after;
    p->stream_k = k;
    return 0;
  }
  if (stage_free(p) == 0) release(p);
  if (stage_free(p) == 0) return HG_EBUSY;
  int rc = p->cfg.stream_in(p->cfg.route_ctx, bytes, len);
  if (rc != 0) return HG_EBUSY;
  stage_stream(p, after, k);
  return 0;
}

int hg_pipeline_apply_batch(hg_pipeline_t *p, const void *batch, size_t len) {
  if (!loop_mode(p) || p->cfg.replicate == NULL) return HG_EINVAL;
  const uint8_t *b = batch;
  if (len < HG_PIPE_BATCH_HEADER) return HG_ECORRUPT;
  uint32_t magic = hg_ld32(b);
  if (magic != HG_PIPE_BATCH_MAGIC && magic != HG_PIPE_BATCH_MAGIC_V1) return HG_ECORRUPT;
  uint32_t n = hg_ld32(b + 4);
  size_t off = HG_PIPE_BATCH_HEADER;
  uint64_t last = 0, last_k = 0; /* position of the last record applied or skipped */
  for (uint32_t i = 0; i < n; i++) {
    if (len - off < BATCH_REC_HEADER) return HG_ECORRUPT;
    jrec_t rec;
    rec.seq = hg_ld64(b + off);
    rec.ts = hg_ld64(b + off + 8);
    rec.len = hg_ld32(b + off + 16);
    uint32_t rlen = hg_ld32(b + off + 20);
    rec.pad_ = 0;
    if (magic == HG_PIPE_BATCH_MAGIC && rlen == BATCH_STREAM) {
      if (rec.len == 0 || len - off - BATCH_REC_HEADER < pad8(rec.len)) return HG_ECORRUPT;
      int rc = apply_stream(p, rec.seq, rec.ts, b + off + BATCH_REC_HEADER, rec.len);
      if (rc == HG_EBUSY) commit_upto(p, last, last_k);
      if (rc < 0) return rc;
      off += BATCH_REC_HEADER + pad8(rec.len);
      last = rec.seq;
      last_k = rec.ts;
      continue;
    }
    if (rec.len == 0 || rec.len > HG_COMMAND_MAX_ENCODED ||
        (magic == HG_PIPE_BATCH_MAGIC_V1 && rlen != 0) || rlen > HG_PIPE_ROUTE_BYTES ||
        rlen % 8 != 0 || len - off - BATCH_REC_HEADER < rlen + pad8(rec.len))
      return HG_ECORRUPT;
    const uint8_t *route = b + off + BATCH_REC_HEADER;
    const uint8_t *payload = route + rlen;
    size_t next_off = off + BATCH_REC_HEADER + rlen + pad8(rec.len);
    if (rec.seq <= p->last_seq) { /* this node sequenced it */
      off = next_off;
      last = rec.seq;
      last_k = 0;
      continue;
    }
    if (rec.seq != p->last_seq + 1) return HG_ECORRUPT;
    int rc = atomic_load(&p->failed);
    if (rc != 0) return rc;
    if (stage_free(p) < STAGE_RESERVE) {
      /* The records before this one are committed too: let them out. */
      commit_upto(p, last, last_k);
      release(p);
      if (stage_free(p) < STAGE_RESERVE) return HG_EBUSY;
    }
    hg_command_t cmd;
    rc = hg_command_decode(payload, rec.len, &cmd);
    if (rc != 0 || cmd.seq != rec.seq) return rc != 0 ? rc : HG_ECORRUPT;
    cmd.ts = rec.ts;
    uint64_t origin = 0;
    if (p->cfg.route_in != NULL && rlen != 0) {
      origin = p->cfg.route_in(p->cfg.route_ctx, route, rlen, &cmd);
      if (origin == HG_PIPE_ROUTE_BUSY) {
        commit_upto(p, last, last_k);
        return HG_EBUSY;
      }
    }
    memcpy(rec.bytes, payload, rec.len);
    rc = apply_record(p, origin, &rec, &cmd, 0);
    if (rc != 0) return rc;
    off = next_off;
    last = rec.seq;
    last_k = 0;
  }
  if (off != len) return HG_ECORRUPT;
  if (n > 0) commit_upto(p, last, last_k);
  return 0;
}

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
    if (m->seq <= durable && !out_committed(p, m)) break;
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
  if ((n || dropped) && atomic_load(&c->want_room) && atomic_exchange(&c->want_room, 0)) {
    hg_waiter_notify(p->engine_w);
    if (loop_mode(p) && consumer != 0) wake_engine(p);
  }
  if (n < max && atomic_load(&p->threads_done) && hg_spsc_ring_empty(c->ring)) {
    /* The engine thread has exited: what it left staged is read from here
     * (the join in hg_pipeline_stop() ordered its writes before
     * threads_done). Each consumer reads through its own cursor. */
    durable = durable_limit(p);
    while (n < max && c->cursor != p->stage_tail &&
           p->stage[c->cursor & p->stage_mask].seq <= durable &&
           out_committed(p, &p->stage[c->cursor & p->stage_mask])) {
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
  if (m != NULL)
    return (m->seq <= durable_limit(p) && out_committed(p, m)) ||
           hg_journal_failed(p->journal) != 0;
  return atomic_load(&p->threads_done) && c->cursor != p->stage_tail &&
         p->stage[c->cursor & p->stage_mask].seq <= durable_limit(p) &&
         out_committed(p, &p->stage[c->cursor & p->stage_mask]);
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
    if (loop_mode(p)) {
      loop_finish(p);
    } else {
      atomic_store(&p->engine_stop, 1);
      hg_waiter_notify(p->engine_w);
      pthread_join(p->engine_thr, NULL);
      atomic_store(&p->journal_stop, 1);
      hg_waiter_notify(p->journal_w);
      pthread_join(p->journal_thr, NULL);
    }
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
      logf_(p, HG_LOG_ERROR, "final snapshot at seq %llu not written: %s %s",
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
  out->committed_seq = p->cfg.replicate != NULL ? atomic_load(&q->committed_seq) : 0;
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
