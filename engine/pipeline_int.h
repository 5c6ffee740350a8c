/*
 * pipeline_int.h - the pipeline's layout, shared by pipeline.c (the engine,
 * journal and snapshot threads, consumers, lifecycle) and pipeline_recover.c
 * (start-up recovery, journal replay, read-only recovery). Not installed;
 * tests use pipeline_internal.h.
 */
#ifndef HOURGLASS_ENGINE_PIPELINE_INT_H
#define HOURGLASS_ENGINE_PIPELINE_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hourglass/pipeline.h"
#include "hourglass/ring.h"
#include "hourglass/store.h"


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

  hg_exchange_t *ex;    /* owner thread, engine thread while running (loop mode: the loop's) */
  hg_journal_t *journal;/* owner thread, journal thread while running (loop mode: the loop's) */
  hg_store_t *store;    /* owner thread, snapshot thread while running */

  hg_mpsc_ring_t *in;   /* producers -> engine */
  hg_spsc_ring_t *jring;/* engine -> journal */
  hg_waiter_t *engine_w, *journal_w;
  consumer_t cons[HG_PIPE_MAX_CONSUMERS];
  uint32_t ncons;

  /* Staging FIFO, engine thread only (loop mode: the loop owner's). */
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

  /* Loop mode (cfg.mode HG_PIPE_MODE_LOOP): an eventfd, signalled by the
   * journal's io_uring completions and by other threads' submits; -1 in
   * threads mode. Owned here. */
  int loop_fd;
  uint64_t loop_durable;    /* durable seq the consumers were last woken for; loop owner */
  uint64_t loop_dropped;    /* records consumer 0 lost to a full ring (see pipeline.h) */
  int loop_calling;         /* inside execute / loop_commit / loop_reap: cfg.loop_drain
                               may be called (never from hg_pipeline_stop) */
  int loop_draining;        /* inside cfg.loop_drain: execute queues, commit and
                               reap return 0 */

  /* Cluster mode (cfg.replicate set; pipeline.h, "Cluster mode"): the
   * records sequenced since the last proposal, as one batch (rbatch, owned
   * here, rbatch_cap bytes), whether this node may sequence (loop owner),
   * and the seq known committed by the group (written by the loop owner,
   * read by consumers). */
  uint8_t *rbatch;
  size_t rbatch_len, rbatch_cap;
  uint32_t rbatch_n;
  uint64_t rbatch_last;
  int writable;
  _Atomic uint64_t committed_seq;
  /* Stream records (pipeline.h, "Stream records"), loop owner: the
   * position (after seq, k) of the last one staged, and the k of the
   * committed position (committed_seq, committed_k). */
  uint64_t stream_after, stream_k, committed_k;

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

/* One message to cfg's log callback, or to stderr without one (pipeline.c). */
__attribute__((format(printf, 3, 4))) void hg_pipe__log(const hg_pipeline_config_t *cfg,
                                                        int level, const char *fmt, ...);

/* The same for an open pipeline. */
#define logf_(p, ...) hg_pipe__log(&(p)->cfg, __VA_ARGS__)

/* Start-up recovery of an opening pipeline (pipeline_recover.c): creates the
 * data directory's journal/ and state/, opens the store, restores the newest
 * good snapshot into p->ex, opens the journal and replays it. Returns 0 or
 * the error, every failure logged. Owner thread, before any thread runs. */
int hg_pipe__recover(hg_pipeline_t *p);

#endif
