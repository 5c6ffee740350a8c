/*
 * hourglass/ring.h - bounded lock-free rings between threads, and a waiter
 * that lets an idle consumer sleep instead of spinning.
 *
 * Two rings carry every message that crosses a thread boundary in Hourglass:
 *
 *   hg_mpsc_ring_t  many producers, one consumer. Gateway threads push
 *                   decoded commands; the sequencer pops them.
 *   hg_spsc_ring_t  one producer, one consumer. The sequencer pushes records
 *                   to the journal writer, and the pipeline pushes released
 *                   events to each of its consumers (pipeline.h: the gateway,
 *                   and in hourglassd the market view and the demo).
 *
 * Both are bounded with a power-of-two number of fixed-size slots. The slot
 * size is chosen at create; a message is any byte string up to that size and
 * is copied in on push and out on pop (or read in place with peek/consume).
 * A push into a full ring returns HG_EBUSY at once: it never blocks and never
 * drops; the caller decides (reject, retry, apply back-pressure). All memory
 * is allocated at create; nothing on push or pop allocates, locks or makes a
 * system call.
 *
 * Waking. A consumer with nothing to do sleeps on an hg_waiter_t. Producers
 * call hg_waiter_notify() after pushing; it costs one atomic read-modify-write
 * and enters the kernel only when the consumer has announced that it is going
 * to sleep. The waiter is separate from the rings so that one consumer can
 * sleep on several sources (an inbound ring and journal completions, say).
 *
 * Errors. Functions return 0 on success and a negative value on failure:
 * HG_E* codes from hourglass/error.h, or -errno from the system.
 *
 * Threads. Each function states who may call it. "Consumer" means the one
 * thread that owns the consuming side; it may change over the ring's life
 * only with a happens-before hand-over (a mutex, a thread join). create and
 * destroy are called by the ring's owner while no other thread uses it.
 */
#ifndef HOURGLASS_RING_H
#define HOURGLASS_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hourglass/error.h"

/* Bounds on create parameters. */
#define HG_RING_MIN_CAPACITY 2u            /* slots */
#define HG_RING_MAX_CAPACITY (1u << 30)    /* slots */
#define HG_RING_MAX_SLOT_SIZE (1u << 20)   /* bytes per message */

/* ------------------------------------------------------------------------ */
/* MPSC ring                                                                */
/* ------------------------------------------------------------------------ */

typedef struct hg_mpsc_ring hg_mpsc_ring_t;

/*
 * Creates a ring of `capacity` slots of `slot_size` bytes each.
 *   capacity   a power of two in [HG_RING_MIN_CAPACITY, HG_RING_MAX_CAPACITY].
 *   slot_size  the largest message in bytes, in [1, HG_RING_MAX_SLOT_SIZE].
 *   out        receives the ring; untouched on failure.
 * Each slot occupies a whole number of 64-byte cache lines (slot_size plus a
 * 16-byte header, rounded up) so that producers writing neighbouring slots do
 * not share a line.
 * Returns 0, HG_EINVAL (out NULL, capacity not a power of two or out of
 * range, slot_size 0 or too large) or -ENOMEM.
 */
int hg_mpsc_ring_create(uint32_t capacity, uint32_t slot_size, hg_mpsc_ring_t **out);

/* Frees the ring and every slot. Any thread, once no other thread uses it.
 * NULL is a no-op. Pointers from hg_mpsc_ring_peek() become invalid. */
void hg_mpsc_ring_destroy(hg_mpsc_ring_t *r);

/*
 * Copies `len` bytes from `msg` into the next free slot and publishes it.
 * Any number of threads may push at once (lock-free: a stalled producer
 * never stops others from claiming other slots, though the consumer sees
 * messages in slot order and waits at a slot that is claimed but not yet
 * published). Messages from one producer are popped in the order pushed.
 *   msg  may be NULL when len is 0.
 * Returns 0, HG_EBUSY (ring full: nothing written, try again later) or
 * HG_EINVAL (len > slot_size, or msg NULL with len > 0).
 */
int hg_mpsc_ring_try_push(hg_mpsc_ring_t *r, const void *msg, size_t len);

/*
 * Copies the oldest message into `out` and frees its slot. Consumer only.
 *   out       buffer of out_size bytes (out_size >= slot_size always fits).
 *   len_out   receives the message length; may be NULL.
 * Returns 0, -EAGAIN (ring empty) or HG_ERANGE (message longer than
 * out_size: it stays in the ring, *len_out still receives its length).
 */
int hg_mpsc_ring_pop(hg_mpsc_ring_t *r, void *out, size_t out_size, size_t *len_out);

/*
 * Pops up to `max` messages. Message i is copied to out + i * slot_size (out
 * must hold max * slot_size bytes) and its length stored in lens[i] (lens may
 * be NULL). Consumer only. Returns the number popped, 0 when empty.
 */
size_t hg_mpsc_ring_pop_batch(hg_mpsc_ring_t *r, void *out, size_t max, uint32_t *lens);

/*
 * In-place reading. peek returns a pointer to the oldest message and its
 * length in *len_out (len_out may be NULL), or NULL when the ring is empty.
 * The pointer stays valid, and the message unchanged, until consume (which
 * frees the slot) or destroy. Calling peek again without consume returns
 * the same message. consume must follow a peek that returned non-NULL.
 * Consumer only.
 */
const void *hg_mpsc_ring_peek(hg_mpsc_ring_t *r, size_t *len_out);
void hg_mpsc_ring_consume(hg_mpsc_ring_t *r);

/* True when the consumer would find no message now. Consumer only. */
bool hg_mpsc_ring_empty(const hg_mpsc_ring_t *r);

/* ------------------------------------------------------------------------ */
/* SPSC ring                                                                */
/* ------------------------------------------------------------------------ */

typedef struct hg_spsc_ring hg_spsc_ring_t;

/* As hg_mpsc_ring_create(), same parameters and errors. Slots are packed
 * (slot_size rounded up to 8 bytes), lengths are kept in a separate array. */
int hg_spsc_ring_create(uint32_t capacity, uint32_t slot_size, hg_spsc_ring_t **out);

/* A ring whose every message is exactly msg_size bytes (a push of any
 * other length: HG_EINVAL; a pop reports msg_size). It keeps no lengths,
 * so the two sides share no line but the slot and the indices: the
 * engine's event records and reports. Parameters and errors as above. */
#define HG_SPSC_RING_FIXED 1
int hg_spsc_ring_create_fixed(uint32_t capacity, uint32_t msg_size, hg_spsc_ring_t **out);
void hg_spsc_ring_destroy(hg_spsc_ring_t *r);

/* As hg_mpsc_ring_try_push(), same errors, but only the one producer thread
 * may call it. The message is visible to the consumer when it returns. */
int hg_spsc_ring_try_push(hg_spsc_ring_t *r, const void *msg, size_t len);

/* Batched publication, producer only. try_push_deferred copies the message
 * into its slot (same errors as try_push; a full ring counts the deferred
 * messages) but the consumer sees nothing until hg_spsc_ring_publish(),
 * which makes every deferred message visible with one store. A producer
 * that pushes several messages per unit of work (a command's events)
 * publishes once at its end: the line holding the published index then
 * moves between the cores once per batch instead of once per message.
 * hg_spsc_ring_try_push() publishes the deferred messages too. A producer
 * must publish before it waits for room or wakes the consumer. */
#define HG_SPSC_RING_DEFERRED 1
int hg_spsc_ring_try_push_deferred(hg_spsc_ring_t *r, const void *msg, size_t len);
void hg_spsc_ring_publish(hg_spsc_ring_t *r);

/* As the hg_mpsc_ring_ functions of the same name; consumer only.
 * pop_batch frees all its slots with a single index update. */
int hg_spsc_ring_pop(hg_spsc_ring_t *r, void *out, size_t out_size, size_t *len_out);
size_t hg_spsc_ring_pop_batch(hg_spsc_ring_t *r, void *out, size_t max, uint32_t *lens);
const void *hg_spsc_ring_peek(hg_spsc_ring_t *r, size_t *len_out);
void hg_spsc_ring_consume(hg_spsc_ring_t *r);
bool hg_spsc_ring_empty(const hg_spsc_ring_t *r);

/* ------------------------------------------------------------------------ */
/* Waiter                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * A waiter puts one consumer thread to sleep until a producer has something
 * for it. It is built on a Linux futex: a 32-bit word holding an "about to
 * sleep" flag, a "closed" flag and an epoch. The futex was chosen over an
 * eventfd for the default path because it needs no file descriptor, its wait
 * compares the word inside the kernel (so a wake between the consumer's last
 * check and its sleep is never lost), and waking needs no read to reset it.
 *
 * Protocol (an event count). The consumer checks for work; finding none, it
 * announces sleep (prepare), checks again, and either cancels (work arrived)
 * or sleeps (sleep) until a producer's notify changes the word. A producer
 * publishes its message first, then notifies. Both the announce and the
 * notify are read-modify-writes on the same word, so either the notify sees
 * the announcement and wakes the consumer, or the consumer's second check
 * sees the message. hg_waiter_wait() wraps all of this around a predicate.
 *
 * Threads. One consumer thread per waiter calls prepare/cancel/sleep/wait;
 * any thread may call notify and close.
 */
typedef struct hg_waiter hg_waiter_t;

/*
 * Creates a waiter.
 *   spin   how many times hg_waiter_wait() re-checks its predicate, pausing
 *          the CPU between checks, before it sleeps. 0 (the default for
 *          Hourglass) sleeps at once; a latency-tuned deployment with spare
 *          cores may spin.
 *   out    receives the waiter; untouched on failure.
 * Returns 0, HG_EINVAL (out NULL) or -ENOMEM.
 */
int hg_waiter_create(uint32_t spin, hg_waiter_t **out);

/* Frees the waiter. Once no thread uses it; NULL is a no-op. */
void hg_waiter_destroy(hg_waiter_t *w);

/*
 * Wakes the consumer if it has announced sleep; otherwise does nothing but
 * one atomic read-modify-write. Call after a successful push (or once after
 * a batch of pushes). Any thread; never blocks.
 * A producer that batches its notifies must notify before it retries a push
 * that returned HG_EBUSY: the consumer may be asleep on a full ring, waiting
 * for exactly the message not yet announced.
 */
void hg_waiter_notify(hg_waiter_t *w);

/*
 * Shuts the waiter: wakes the consumer now, and makes every later wait or
 * sleep return -ECANCELED instead of sleeping. Any thread; idempotent.
 */
void hg_waiter_close(hg_waiter_t *w);

/* True once hg_waiter_close() has been called. Any thread. */
bool hg_waiter_closed(const hg_waiter_t *w);

/*
 * Sleeps until `ready(ctx)` is true, then returns 0. ready is first checked
 * at once, then `spin` more times, then around each sleep as in the protocol
 * above. The consumer's own work is always checked before the closed flag:
 * after close, wait keeps returning 0 while ready() is true, and -ECANCELED
 * once it is false, so a consumer drains before it stops.
 *   timeout_ns  longest total wait, or a negative value for no limit.
 * Returns 0, -ECANCELED (closed and not ready) or -ETIMEDOUT.
 * Consumer only; ready runs on the calling thread.
 */
int hg_waiter_wait(hg_waiter_t *w, bool (*ready)(void *ctx), void *ctx, int64_t timeout_ns);

/*
 * The protocol in steps, for a consumer that checks several sources between
 * its announcement and its sleep (the pipeline's engine thread). prepare
 * announces sleep and returns a token; the consumer must then re-check all
 * its sources and call cancel if it found work, or sleep(token). cancel
 * withdraws the announcement.
 * sleep blocks until a notify or close after prepare, a timeout
 * (timeout_ns < 0: none) or a signal, withdraws the announcement and returns
 * 0, -ETIMEDOUT or -ECANCELED (closed). A return of 0 may be spurious: the
 * caller re-checks its sources. Consumer only.
 */
uint32_t hg_waiter_prepare(hg_waiter_t *w);
void hg_waiter_cancel(hg_waiter_t *w);
int hg_waiter_sleep(hg_waiter_t *w, uint32_t token, int64_t timeout_ns);

/* True while the consumer has announced sleep (between prepare and the end
 * of its sleep or cancel) and no notify has taken the announcement yet. A
 * snapshot, for metrics ("consumer idle") and tests. Any thread. */
bool hg_waiter_sleeping(const hg_waiter_t *w);

/* Number of times a producer found the consumer asleep and woke it (each
 * one a futex system call). For metrics and tests. Any thread. */
uint64_t hg_waiter_wakeups(const hg_waiter_t *w);

/* Helpers: wait on the waiter until the ring has data. Consumer only; same
 * returns as hg_waiter_wait(). */
int hg_mpsc_ring_wait(hg_mpsc_ring_t *r, hg_waiter_t *w, int64_t timeout_ns);
int hg_spsc_ring_wait(hg_spsc_ring_t *r, hg_waiter_t *w, int64_t timeout_ns);

#endif /* HOURGLASS_RING_H */
