/*
 * hourglass/pipeline.h - the exchange core: sequencer, journal writer, state
 * machine, snapshots and crash recovery, wired together with lock-free rings.
 *
 * Threads mode (below; "Loop mode" and "Cluster mode" further down run the
 * same stages on the owner's event loop instead of the two threads):
 *
 *   producers --hg_pipeline_submit()--> inbound MPSC ring
 *     engine thread: stamps seq + ts, encodes the command, hands the record
 *     to the journal thread (SPSC ring), applies it to the state machine and
 *     stages its events
 *     engine thread: moves staged events into the outbound SPSC rings at
 *     once, durable or not
 *     journal thread: group commit (hg_journal), advances durable_seq and
 *     wakes the consumers itself (no engine wake-up on the way back)
 *   consumer <--hg_pipeline_poll()-- outbound SPSC ring, read only up to
 *     durable_seq (the durability gate sits on the consumer's side)
 *
 * Durability. By default (HG_DURABILITY_DURABLE) no event of command N leaves
 * the pipeline before the journal is durable up to N, so anything a client
 * was told survives a crash. HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE releases
 * events as soon as the state machine produced them: a crash may then lose
 * commands whose results were already reported. Use it only if you accept
 * that risk (for example a throwaway test market); the name says so on
 * purpose.
 *
 * Recovery (hg_pipeline_open). The data directory holds `journal/` (segments,
 * hourglass/journal.h) and `state/` (LMDB, hourglass/store.h). Open loads the
 * newest snapshot that passes its checks (hg_store_restore_snapshot: the
 * CRC over header and blob, its seq, and the restored state's hash against
 * the one its header claims), replays the journal after the snapshot's seq,
 * and checks that the journal continues exactly where the replay stopped.
 * A bad snapshot is logged ("snapshot at seq S in DIR/state is bad: ...")
 * and skipped for the one before it, and with none left the journal is
 * replayed from seq 1. The start is refused (HG_ECORRUPT, with a line
 * naming every snapshot skipped and why) if the journal cannot do that: it
 * does not start at seq 1, or it ends before the newest bad snapshot (whose
 * commands a snapshot only ever holds once durable, so they are lost). The
 * state hash after open equals that of a replay of the whole journal from
 * an empty exchange. Snapshots are taken every snapshot_every commands on the engine
 * thread (a serialization into a reusable buffer) and written to LMDB by a
 * snapshot thread once the journal is durable past their seq, so a snapshot
 * never holds a command the journal could lose. A final snapshot is written
 * by hg_pipeline_stop().
 *
 * Acknowledged commands never vanish with a missing journal tail. A snapshot
 * at seq S proves the journal was durable up to S, and the journal keeps a
 * durable mark in `<data_dir>/durable.mark`, outside `journal/`
 * (hourglass/journal.h, "Durable mark"; rewritten at open, at each segment
 * roll-over on the journal thread, and at close). Open passes S to the
 * journal as its durable floor and the mark path; a journal that ends
 * before the higher of the two (a deleted last segment, a deleted
 * `journal/` with `state/` still there) fails open with HG_ECORRUPT and the
 * missing range in the log, so no acknowledged seq is ever reused for
 * another command. A data directory without the mark file (new, or written
 * by a version without marks) starts with the snapshot floor alone and gets
 * its mark at that open. With cfg.journal.repair set, the journal still cuts
 * only a torn last batch above the floor (journal.h, "Recovery").
 *
 * Journal failure. When the journal fails (EIO, ENOSPC, a short write) intake
 * stops for good: hg_pipeline_submit() returns HG_EUNAVAIL, commands already
 * queued come back as HG_PIPE_UNAVAILABLE records, and no event of a command
 * that is not durable is ever released. Restart after fixing the disk;
 * recovery keeps exactly the durable prefix.
 *
 * Threads. hg_pipeline_open/start/stop/close and the state queries are
 * called by the owner thread. hg_pipeline_submit() may be called from any
 * number of threads at once. hg_pipeline_poll() and hg_pipeline_wait() belong
 * to one consumer thread. The exchange itself is owned by the engine thread
 * while the pipeline runs and by the owner thread otherwise.
 *
 * Loop mode (cfg.mode = HG_PIPE_MODE_LOOP). There is no engine thread and
 * no journal thread: the thread that runs an event loop (the gateway's)
 * sequences and journals itself, so an order costs no thread hand-off.
 *
 * Which mode. Both give the same records, state, journal and snapshot
 * bytes, and pass the same tests (the *_threads test registrations).
 * Loop mode is hourglassd's default: on a machine with few cores (or
 * shared ones) every hand-off is a wake-up that waits for a CPU, and the
 * floor benchmark (bench_floor) shows the loop closer to an echo server's
 * latency and cheaper in CPU per order. Threads mode overlaps decoding,
 * matching and the disk on separate threads: choose it on a machine with
 * idle cores for the engine and journal threads (rt_priority applies to
 * them only), or for an owner with no event loop (a tool or test that
 * submits and polls from plain threads; hg_pipeline_config_init's
 * default, since loop mode needs an owner that drives it).
 *  - hg_pipeline_execute(p, origin, cmd) does for one command what the
 *    engine thread does: stamps seq and ts, encodes the record and appends
 *    it to the journal's filling batch, applies it and stages its events.
 *    No allocation, lock or syscall (except when a whole batch_bytes batch
 *    fills while the previous one is in flight: it then waits for that).
 *  - hg_pipeline_loop_commit(p), once per loop iteration after the reads
 *    (libuv: a uv_check and a uv_prepare handle), sequences what other
 *    threads queued, moves staged records to the consumers' rings and
 *    submits the accumulated batch through io_uring if none is in flight
 *    (one submission per batch; the next batch accumulates meanwhile).
 *  - hg_pipeline_loop_fd(p) is an eventfd that becomes readable when a
 *    commit completed (io_uring_register_eventfd) or another thread queued
 *    a command (hg_pipeline_submit / hg_pipeline_kick); on readability the
 *    loop calls hg_pipeline_loop_reap(p, 0), which reaps the completion,
 *    advances durable_seq, submits the next batch and wakes consumers
 *    1..n-1 (futex waiter and consumer_notify) when durability moved.
 *  - Both return nonzero when consumer 0 (the loop owner) has records to
 *    hg_pipeline_poll(): durable ones, or any in the unsafe mode. Consumer 0
 *    is never notified otherwise (out_notify is not called in loop mode).
 * The state machine, the journal and snapshot bytes, recovery, durability
 * and journal failure are as in threads mode: a failure stops intake
 * (execute and submit return HG_EUNAVAIL, queued commands come back
 * UNAVAILABLE) and nothing undurable is released. Snapshots are serialized
 * on the loop thread and written by the snapshot thread. The loop owner
 * owns the exchange, the stage and the journal between hg_pipeline_start()
 * and the moment its loop stops calling in (before hg_pipeline_stop(),
 * which then finishes on the owner thread: queued commands are sequenced,
 * everything is made durable and released). The owner may call execute
 * before its loop runs (the calls then happen on the thread that starts
 * the loop, before it starts).
 *  - Overflow. Consumer 0 cannot poll from outside while the loop owner is
 *    inside a command, so a command whose events do not fit in the stage
 *    (staging_capacity) and consumer 0's ring together (a mass cancel of a
 *    very large book, a settlement over many positions) drains in the
 *    middle: the pipeline makes everything staged durable (one
 *    hg_journal_sync, the current command's record included), then calls
 *    cfg.loop_drain, which polls consumer 0 as the loop would, and carries
 *    on. The same happens before a command when the stage lacks
 *    1024 free slots, so execute refuses nothing for event volume.
 *    Inside cfg.loop_drain, hg_pipeline_execute() queues the command (as
 *    hg_pipeline_submit_nowake) and the loop's next commit sequences it;
 *    commit and reap return 0 there. Without cfg.loop_drain, execute
 *    returns HG_EBUSY when the stage is short and consumer 0 loses a
 *    command's excess events (logged once).
 * With the journal's fallback (force_fallback) the commit is synchronous
 * and loop_commit returns with the batch durable.
 *
 * Cluster mode (loop mode with cfg.replicate set; hourglass/replica.h is
 * the group). The pipeline does not talk to the group itself: the loop
 * owner glues the two.
 *  - Writable (hg_pipeline_set_writable(p, 1): the leader, once it has
 *    applied every entry of earlier terms). Execute sequences, journals
 *    and applies as in loop mode, and each record also joins a batch
 *    (the format below); loop_commit and loop_reap hand the batch to
 *    cfg.replicate(ctx, batch, len, last_seq) before they release, one
 *    call per loop iteration (or when HG_PIPE_BATCH_BYTES fill).
 *  - Not writable (a follower, a candidate, a leader that has not caught
 *    up): execute returns HG_EPERM and commands other threads queued come
 *    back UNAVAILABLE.
 *  - Every node (leader included) passes every committed batch, in log
 *    order, to hg_pipeline_apply_batch(): records up to the node's last
 *    seq are skipped (the leader applied them when it sequenced them),
 *    the others are journaled locally and applied with the seq and ts they
 *    carry, their events staged with the origin cfg.route_in gave (0
 *    without one). The position of the batch's last record (its seq, or
 *    a stream record's (S, k), below) is then committed; when
 *    apply_batch returns HG_EBUSY, the records before the one it stopped
 *    at are committed already (the group holds the whole batch).
 *  - Release: a record leaves once its seq is committed (the group holds
 *    it on a majority of disks), whatever cfg.durability says; a stream
 *    record once its position is. The local
 *    journal is still written and synced as in loop mode, but not waited
 *    for: a cluster node rebuilds its state from the group at every start,
 *    so the local copy's durability adds nothing the majority does not
 *    hold (the journal serves the tools that read a data directory). A
 *    leader therefore executes ahead of the commit but reports nothing
 *    before it.
 *  - A refused proposal (cfg.replicate returned an error) or one the group
 *    lost (the loop owner calls hg_pipeline_fail()) leaves the state with
 *    commands the group may never hold: the pipeline fails as on a journal
 *    failure (intake stops, nothing more is released) and the node must
 *    be rebuilt from the group (hourglassd: restart; it starts from the
 *    group's snapshot and log).
 * Batch format (host byte order, the cluster's machines alike): u32 magic
 * HG_PIPE_BATCH_MAGIC, u32 record count, then per record u64 seq, u64 ts,
 * u32 len, u32 rlen, rlen bytes of route (0 or HG_PIPE_ROUTE_BYTES), len
 * bytes of the encoded command (the journal record's payload) and zero
 * padding to a multiple of 8. A batch of zero records is valid (a
 * leader's barrier). Batches of the first format (HG_PIPE_BATCH_MAGIC_V1,
 * rlen always 0) are still applied. The route is not journaled: the
 * journal's records are the same bytes with or without it.
 *  - Routes. With cfg.route_out set, the node that sequences a record asks
 *    it, when the batch is handed to the group (normally at the end of
 *    the loop iteration; earlier only when the batch fills), for the
 *    record's route:
 *    HG_PIPE_ROUTE_BYTES opaque bytes saying where the command's results
 *    go (hourglassd's gateway: the entering key, the ref_seq, ...). A node
 *    that applies the record from the group (a follower) hands the route
 *    and the decoded command to cfg.route_in, which returns the origin its
 *    events are staged with (0: none), as if that node's own submitter had
 *    executed it; HG_PIPE_ROUTE_BUSY makes hg_pipeline_apply_batch()
 *    return HG_EBUSY before the record, with the records before it
 *    released. So every node's consumer 0 sees every result with an
 *    origin that routes it the same way.
 *  - Stream records. hg_pipeline_stream_add(p, bytes, len) on the writable
 *    leader adds opaque bytes (hourglassd's gateway: a frame it decided
 *    itself, such as a query's reply, for one key's stream) to the batch
 *    as a record of its own, at position (S, k): after command S = the
 *    last seq, the k-th since it. It is no command: nothing is journaled
 *    or applied, no seq is taken. Consumer 0 (only) receives an
 *    HG_PIPE_STREAM record for it in log order, once the group committed
 *    it, on the leader and, through cfg.stream_in, on every node that
 *    applies it; so each node handles the same bytes at the same place
 *    among the results. In the batch: seq = S, ts = k, len, the route
 *    length's field = 0x80000000, len bytes, padding to 8.
 */
#ifndef HOURGLASS_PIPELINE_H
#define HOURGLASS_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "hourglass/exchange.h"
#include "hourglass/journal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hg_durability {
  HG_DURABILITY_DURABLE = 0,                  /* default: release only durable results */
  HG_DURABILITY_ACK_BEFORE_DURABLE_UNSAFE = 1 /* release at once; a crash may lose acked commands */
} hg_durability_t;

/* Who runs the sequencer and the journal (see "Loop mode" above). */
typedef enum hg_pipe_mode {
  HG_PIPE_MODE_THREADS = 0, /* an engine thread and a journal thread (config_init's) */
  HG_PIPE_MODE_LOOP = 1     /* the owner's event loop: hg_pipeline_execute()
                               (hourglassd's default; see "Which mode") */
} hg_pipe_mode_t;

/* Cluster mode batches ("Cluster mode" above). */
#define HG_PIPE_BATCH_MAGIC 0x32424748u    /* "HGB2": records with routes */
#define HG_PIPE_BATCH_MAGIC_V1 0x31424748u /* "HGB1": no routes (still applied) */
#define HG_PIPE_ROUTE_BYTES 48u            /* a record's route slot (cfg.route_out) */
#define HG_PIPE_ROUTE_BUSY UINT64_MAX      /* cfg.route_in: no room yet */
#define HG_PIPE_STREAM_MAX (256u << 10)    /* most bytes in one stream record */
#define HG_PIPE_BATCH_HEADER 8u
#define HG_PIPE_BATCH_BYTES (1u << 20) /* most bytes in one batch */

/* Most consumers of the outbound record stream (gateway, market-data view, ...). */
#define HG_PIPE_MAX_CONSUMERS 4

typedef struct hg_pipeline_config {
  const char *data_dir;         /* must exist; journal/ and state/ are created inside */
  hg_exchange_config_t exchange;
  hg_journal_options_t journal; /* dir-independent options; log fields are overridden */
  uint32_t inbound_capacity;    /* commands, power of two; 0: 65536 */
  uint32_t outbound_capacity;   /* records, power of two; 0: 262144 */
  uint32_t staging_capacity;    /* events awaiting durability, power of two; 0: 262144 */
  uint32_t spin;                /* waiter spin count before sleeping; 0: block at once */
  int rt_priority;              /* 0: default scheduling; 1..99: the engine and journal
                                   threads run under SCHED_FIFO at this priority
                                   (hourglass/thread.h; start fails with -EPERM if the
                                   process may not); unused in loop mode */
  int durability;               /* hg_durability_t */
  int mode;                     /* hg_pipe_mode_t; 0: threads */
  uint64_t snapshot_every;      /* commands between snapshots; 0: only at stop */
  uint32_t snapshot_keep;       /* good snapshots kept in LMDB; below 2: 2 (a
                                   bad newest one needs one to fall back to) */
  size_t map_size;              /* LMDB map size, bytes; 0: 1 GiB */
  /* Timestamp source of the sequencer (ns since the Unix epoch); NULL:
   * CLOCK_REALTIME. Only the sequencer reads it, never the state machine. */
  uint64_t (*clock)(void *ctx);
  void *clock_ctx;
  /* Called when records became pollable (once per batch), e.g. to
   * uv_async_send() the consumer's loop: on the journal thread when a batch
   * became durable, on the engine thread when it pushed records that already
   * were (and in the unsafe mode). May be called from either of those two
   * threads, also concurrently; may occasionally find nothing to poll. Must
   * be cheap and must not block; NULL: none (use hg_pipeline_wait()). Not
   * called in loop mode (consumer 0 is the loop owner, see "Loop mode"). */
  void (*out_notify)(void *ctx);
  void *out_notify_ctx;
  /* Loop mode: consumer 0's drain (see "Loop mode", Overflow), called on
   * the loop owner's thread from inside hg_pipeline_execute(),
   * hg_pipeline_loop_commit() or hg_pipeline_loop_reap() when consumer 0's
   * ring is full, after everything it holds is durable. It must poll
   * consumer 0 (hg_pipeline_poll) until that returns 0 and handle the
   * records as the loop does; it may call hg_pipeline_execute() (queued)
   * but not the other loop calls. NULL: none. Unused in threads mode. */
  void (*loop_drain)(void *ctx);
  void *loop_drain_ctx;
  /* Number of consumers, each with its own outbound ring of
   * outbound_capacity records and its own release cursor; 0: 1. Consumer 0
   * is the one hg_pipeline_poll() serves and out_notify wakes; consumer k > 0
   * uses hg_pipeline_poll_consumer(p, k, ...) and consumer_notify[k]. Every
   * consumer receives every record, except UNAVAILABLE records, which go to
   * consumer 0 (the submitters' side) only. */
  uint32_t consumers;
  void (*consumer_notify[HG_PIPE_MAX_CONSUMERS])(void *ctx);
  void *consumer_notify_ctx[HG_PIPE_MAX_CONSUMERS];
  /* Messages (recovery, snapshots, failures) at hg_log_level_t levels,
   * called on the thread that logs (hourglass/log.h); NULL: stderr. No
   * customer data. */
  hg_log_fn log;
  void *log_ctx;
  /* Cluster mode (loop mode only; see "Cluster mode"): called on the loop
   * owner's thread with each batch of records this node sequenced; the
   * bytes are valid during the call only. Returns 0 once the batch is
   * handed to the group, or an error: the pipeline then fails. NULL: a
   * single node. */
  int (*replicate)(void *ctx, const void *batch, size_t len, uint64_t last_seq);
  void *replicate_ctx;
  /* Cluster mode, optional, both on the loop owner's thread (see "Routes"
   * under "Cluster mode"). route_out writes the route of the record this
   * node sequenced with origin into out (HG_PIPE_ROUTE_BYTES, zeroed);
   * it is called when the batch is handed to cfg.replicate, so what the
   * submitter records about the command after hg_pipeline_execute()
   * returns, in the same loop iteration, is in it. route_in receives the
   * route of a record applied from the group and the command, and returns
   * the origin to stage its events with (0: none), or HG_PIPE_ROUTE_BUSY.
   * NULL: batches carry no routes and applied records have origin 0. */
  void (*route_out)(void *ctx, uint64_t origin, uint8_t *out);
  uint64_t (*route_in)(void *ctx, const uint8_t *route, size_t len, const hg_command_t *cmd);
  /* Cluster mode, optional, the loop owner's thread: receives the bytes of
   * a stream record applied from the group ("Stream records"; valid
   * during the call only) before its HG_PIPE_STREAM record is staged.
   * Returns 0, or nonzero when it has no room yet (apply_batch then
   * returns HG_EBUSY before it). NULL: such records are skipped. */
  int (*stream_in)(void *ctx, const uint8_t *bytes, size_t len);
  void *route_ctx; /* ctx of route_out, route_in and stream_in */
} hg_pipeline_config_t;

/* What a consumer receives. */
typedef enum hg_pipe_kind {
  HG_PIPE_EVENT = 1,       /* .event is an event of command .seq */
  HG_PIPE_DONE = 2,        /* command .seq is fully processed (after its events) */
  HG_PIPE_UNAVAILABLE = 3, /* the command was not processed: the journal failed */
  HG_PIPE_MALFORMED = 4,   /* the command cannot be journaled (unknown type, bad
                              symbol); it got no seq and changed nothing */
  HG_PIPE_STREAM = 5       /* cluster mode, consumer 0 only: the next stream record
                              ("Stream records"), committed; .seq is the seq it
                              follows, .event.seq its place after it (1, 2, ...) */
} hg_pipe_kind_t;

typedef struct hg_pipe_out {
  uint64_t origin;           /* the submitter's tag, as given to hg_pipeline_submit() */
  uint64_t seq;              /* seq of the command; for UNAVAILABLE and MALFORMED
                                the last seq sequenced before it */
  uint32_t kind;             /* hg_pipe_kind_t */
  uint32_t pad_;
  hg_exchange_event_t event; /* HG_PIPE_EVENT only */
} hg_pipe_out_t;

typedef struct hg_pipeline_stats {
  uint64_t commands;      /* sequenced since start */
  uint64_t last_seq;      /* last sequenced */
  uint64_t durable_seq;   /* journal durable up to */
  uint64_t released_seq;  /* events released up to */
  uint64_t snapshots;     /* written since open */
  uint64_t replayed;      /* commands replayed by recovery */
  uint64_t busy_rejects;  /* submits refused because the inbound ring was full */
  uint64_t committed_seq; /* cluster mode: committed by the group up to; else 0 */
} hg_pipeline_stats_t;

typedef struct hg_pipeline hg_pipeline_t;

/* Fills cfg with defaults (data_dir NULL, durable mode, small exchange). */
void hg_pipeline_config_init(hg_pipeline_config_t *cfg);

/*
 * Opens the data directory and recovers: newest good snapshot + journal tail.
 * Threads are not started. Returns 0 and *out, or: -ENOENT/-ENOTDIR/-EACCES
 * (data_dir), HG_ECORRUPT (bad journal or mark, a journal that does not
 * continue the snapshot or ends before a seq known durable, or bad
 * snapshots the journal cannot stand in for; see Recovery above),
 * HG_EVERSION, HG_EMAPFULL, HG_EINVAL (config),
 * -ENOMEM. Every failure is also logged with the reason.
 */
int hg_pipeline_open(const hg_pipeline_config_t *cfg, hg_pipeline_t **out);

/* Starts the engine, journal and snapshot threads (loop mode: the snapshot
 * thread only). 0, HG_ESTATE, -EPERM (cfg.rt_priority set and real-time
 * scheduling not permitted), other -errno. */
int hg_pipeline_start(hg_pipeline_t *p);

/*
 * Queues one command (its seq and ts are assigned by the sequencer). Any
 * thread. Returns 0, HG_EBUSY (inbound ring full: nothing queued; back off
 * or reject) or HG_EUNAVAIL (stopping, not started, or journal failed).
 */
int hg_pipeline_submit(hg_pipeline_t *p, uint64_t origin, const hg_command_t *cmd);

/*
 * Batched submission: the same as hg_pipeline_submit() (same returns, any
 * thread) except that a sleeping engine thread is not woken. The command
 * waits in the inbound ring until this thread (or any other submitter) calls
 * hg_pipeline_kick() or hg_pipeline_submit(), or until the engine wakes for
 * another reason. A producer that queues several commands at once (the
 * gateway, for the frames of one socket read) submits them with this and
 * kicks once, so the batch costs one wake-up instead of one per command.
 * Every successful hg_pipeline_submit_nowake() must be followed by a
 * hg_pipeline_kick() from the same thread; otherwise the command may wait
 * indefinitely (hg_pipeline_stop() still processes it).
 */
int hg_pipeline_submit_nowake(hg_pipeline_t *p, uint64_t origin, const hg_command_t *cmd);

/* Wakes the engine thread if it sleeps; it then sees every command pushed
 * before the call (no lost wake-up). One atomic read-modify-write when the
 * engine is awake, a futex wake when it sleeps. Any thread; cannot fail.
 * In loop mode submit and kick signal the loop's eventfd (a write per call:
 * meant for threads other than the loop's, off the order path). */
void hg_pipeline_kick(hg_pipeline_t *p);

/* cfg.mode of p. Any thread. */
int hg_pipeline_mode(const hg_pipeline_t *p);

/*
 * Loop mode: sequences, journals (into the filling batch, not yet
 * submitted), applies and stages one command at once; its events are
 * released once hg_pipeline_loop_commit() / hg_pipeline_loop_reap() saw it
 * durable. The loop owner's thread only (see "Loop mode"). It may call
 * cfg.loop_drain (before the command, or in the middle of it). Called from
 * inside cfg.loop_drain it only queues the command. Returns 0 (also for a
 * command the journal cannot hold: it comes back MALFORMED), HG_EBUSY
 * (without cfg.loop_drain: the stage lacks room for another command's
 * events until the consumers poll; inside the drain: the inbound ring is
 * full; nothing done), HG_EUNAVAIL (not started, stopping, or the journal
 * failed, possibly during a drain: nothing done) or HG_EINVAL (threads
 * mode).
 */
int hg_pipeline_execute(hg_pipeline_t *p, uint64_t origin, const hg_command_t *cmd);

/* Loop mode: the eventfd to watch for readability (-1 in threads mode).
 * Owned by p; valid until hg_pipeline_close(). Any thread. */
int hg_pipeline_loop_fd(const hg_pipeline_t *p);

/* Loop mode, the loop owner's thread, once per loop iteration: see "Loop
 * mode". Returns nonzero when consumer 0 has records to poll. Does nothing
 * (0) in threads mode or when not running. Journal errors are not
 * returned: they stop intake (hg_pipeline_failed()). */
int hg_pipeline_loop_commit(hg_pipeline_t *p);

/* Loop mode, the loop owner's thread, when the loop fd is readable (or to
 * wait for durability: timeout_ms as hg_journal_poll(), < 0 blocks until the
 * batch in flight completes). Returns as hg_pipeline_loop_commit(). */
int hg_pipeline_loop_reap(hg_pipeline_t *p, int timeout_ms);

/* Cluster mode, the loop owner's thread: whether this node sequences
 * (see "Cluster mode"). Starts at 0. */
void hg_pipeline_set_writable(hg_pipeline_t *p, int writable);

/* Cluster mode, the loop owner's thread: adds a stream record of len
 * bytes (1..HG_PIPE_STREAM_MAX; copied) to the batch and stages it for
 * consumer 0 (see "Stream records"). 0; HG_EPERM (not writable);
 * HG_EBUSY (the stage is full: nothing added); HG_EUNAVAIL (failed or not
 * running); HG_EINVAL (not cluster mode, bad len). */
int hg_pipeline_stream_add(hg_pipeline_t *p, const void *bytes, size_t len);

/* Cluster mode, the loop owner's thread: applies one committed batch (see
 * "Cluster mode"). Returns 0; HG_EBUSY when the stage lacks room for the
 * next record's events (the records before it are applied: let consumer 0
 * poll and call again with the same batch); HG_ECORRUPT (not a batch, or a
 * seq that does not follow this node's last); HG_EBUSY also when
 * cfg.route_in returned HG_PIPE_ROUTE_BUSY; HG_EINVAL (not cluster
 * mode); the failure of a failed pipeline; a decode error. */
int hg_pipeline_apply_batch(hg_pipeline_t *p, const void *batch, size_t len);

/* Fails the pipeline with err (0: HG_EUNAVAIL) as a journal failure does:
 * intake stops and nothing not yet releasable is ever released. The first
 * failure is kept and logged. The loop owner's thread (or the owner's,
 * while the loop does not run). */
void hg_pipeline_fail(hg_pipeline_t *p, int err);

/* Pops up to max released records of consumer 0 into out: in the default
 * mode only those of commands the journal is durable for (records beyond a
 * failed journal's durable seq are dropped here, unsent). Consumer 0's
 * thread. Returns the count. After hg_pipeline_stop() keep polling until it returns
 * 0: records the ring had no room for are served from the stage. */
size_t hg_pipeline_poll(hg_pipeline_t *p, hg_pipe_out_t *out, size_t max);

/* Blocks until released records are available, the pipeline stops, or timeout_ns
 * passes (< 0: no limit). Consumer 0's thread. 0, -ETIMEDOUT or -ECANCELED.
 * In loop mode consumer 0 is the loop owner, which drives durability
 * itself: it must not wait here while the pipeline runs. */
int hg_pipeline_wait(hg_pipeline_t *p, int64_t timeout_ns);

/* The same for consumer k (0 <= k < consumers), on that consumer's thread.
 * poll returns 0 and wait HG_EINVAL for a k out of range. */
size_t hg_pipeline_poll_consumer(hg_pipeline_t *p, uint32_t consumer, hg_pipe_out_t *out,
                                  size_t max);
int hg_pipeline_wait_consumer(hg_pipeline_t *p, uint32_t consumer, int64_t timeout_ns);

/*
 * Stops intake, processes everything queued, waits until it is durable and
 * released, stops the threads and writes a final snapshot. Records not yet
 * polled stay pollable. Returns 0 or the journal's / store's error.
 * A queued command is sequenced only when the staging FIFO has room for its
 * events, so when more may be queued than the stage and the consumers'
 * rings hold, each consumer must keep polling (on its own thread) until
 * this returns; otherwise it waits for them indefinitely. hourglassd keeps
 * a consumer polling during the stop for this reason.
 */
int hg_pipeline_stop(hg_pipeline_t *p);

/* Stops if needed and frees everything. NULL is a no-op. */
void hg_pipeline_close(hg_pipeline_t *p);

/* Owner thread, while not running (before start or after stop); in loop
 * and cluster mode also the loop owner while running, between its
 * hg_pipeline_execute / hg_pipeline_apply_batch calls: it then sees every
 * executed or applied command, durable, committed or not, and its queries
 * run on the loop (keep them O(an account), not O(the book)). */
const hg_exchange_t *hg_pipeline_exchange(const hg_pipeline_t *p);
void hg_pipeline_state_hash(const hg_pipeline_t *p, uint8_t out[HG_SHA256_LEN]);

/* Counters; any thread (values may be slightly stale). */
void hg_pipeline_stats(const hg_pipeline_t *p, hg_pipeline_stats_t *out);

/* 0 while the journal is healthy, its error once it failed. Any thread. */
int hg_pipeline_failed(const hg_pipeline_t *p);

/*
 * Replays the journal in dir from an empty exchange (no snapshot) into ex,
 * stopping after max_seq (UINT64_MAX: everything). For verification and the
 * replay tools. Returns 0 and *last_seq, or the journal's / decoder's error.
 */
int hg_pipeline_replay_journal(const char *journal_dir, hg_exchange_t *ex, uint64_t max_seq,
                               uint64_t *last_seq);

/*
 * Recovers the state of cfg->data_dir into ex (the newest snapshot, then
 * the journal after it) with the checks of hg_pipeline_open(), but writes
 * nothing: the store is opened read-only (hg_store_open_readonly) and the
 * journal only through readers, never for writing, so the directory may
 * belong to a running daemon. The durable mark is read too: a journal that
 * ends before its seq, or lacks the segment it names, is HG_ECORRUPT.
 * Unlike hg_pipeline_open() it neither creates missing directories nor cuts
 * a torn tail: a journal whose last record is not good (a batch still being
 * written, a tail torn by a crash, or corruption) is HG_ECORRUPT; and it
 * does not fall back past a bad newest snapshot: that is HG_ECORRUPT too
 * (hg_pipeline_open() on a copy shows which snapshot it would use). Of cfg
 * only data_dir, log and log_ctx are used.
 *   ex        just created (hg_exchange_create with cfg->exchange), empty;
 *             owned by the caller; on success it holds the state at
 *             *last_seq, on failure whatever was applied before the error.
 *   snap_seq  the seq of the snapshot used (0: none).
 *   last_seq  the seq of the last command applied (also set on failure).
 * Returns 0, -ENOENT/-ENOTDIR/-EACCES (data_dir, state or journal),
 * HG_ECORRUPT (bad or unfinished journal record, a bad newest snapshot, a
 * journal that does not continue the snapshot or falls short of the durable
 * mark), HG_EVERSION,
 * HG_EINVAL, -ENOMEM, the exchange's apply errors. Every failure is logged
 * through cfg->log with the reason. Any thread; ex is the caller's until it
 * returns.
 */
int hg_pipeline_recover_readonly(const hg_pipeline_config_t *cfg, hg_exchange_t *ex,
                                 uint64_t *snap_seq, uint64_t *last_seq);

#ifdef __cplusplus
}
#endif
#endif /* HOURGLASS_PIPELINE_H */
