/*
 * hourglass/thread.h - starting Hourglass's long-lived threads: named, and
 * optionally under real-time scheduling.
 *
 * Every thread the exchange runs for its whole life (engine, journal,
 * gateway loop, snapshot writer, ...) is started here, so each carries a
 * name that `top -H`, `ps -L` and `perf` show (at most 15 bytes), and the
 * threads on the order path can be given SCHED_FIFO: on a machine where
 * other processes compete for the cores, a woken real-time thread runs at
 * once instead of waiting out another process's time slice, which is what
 * sets the tail of the order round trip on a small host (bench/README.md,
 * bench_gateway). Real-time threads of ours block when idle, so they do not
 * starve the machine; the kernel's real-time throttling
 * (/proc/sys/kernel/sched_rt_runtime_us) bounds them as well.
 */
#ifndef HOURGLASS_THREAD_H
#define HOURGLASS_THREAD_H

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Highest real-time priority accepted (SCHED_FIFO's range is 1..99). */
#define HG_THREAD_RT_MAX 99

/*
 * Starts fn(arg) on a new joinable thread named name (truncated to 15
 * bytes). rt_priority 0 keeps the default policy (SCHED_OTHER, inherited
 * from the caller); 1..HG_THREAD_RT_MAX runs the thread under SCHED_FIFO at
 * that priority from its first instruction.
 *
 * Returns 0 and stores the thread in *out; HG_EINVAL for a priority out of
 * range or a NULL argument; -EPERM when the process may not use real-time
 * scheduling (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO at least the
 * priority, e.g. LimitRTPRIO= in a systemd unit); other -errno from
 * pthread_create. On failure no thread was started.
 *
 * Any thread may call it.
 */
int hg_thread_start(const char *name, int rt_priority, void *(*fn)(void *), void *arg,
                    pthread_t *out);

#ifdef __cplusplus
}
#endif

#endif
