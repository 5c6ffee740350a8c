/*
 * thread.c - named, optionally real-time threads (see hourglass/thread.h).
 *
 * The policy goes into the creation attributes with PTHREAD_EXPLICIT_SCHED,
 * so a thread never runs a single instruction under the wrong policy and a
 * refused policy fails the creation instead of leaving a thread behind that
 * would have to be stopped again.
 */
#include "hourglass/thread.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#include "hourglass/error.h"

int hg_thread_start(const char *name, int rt_priority, void *(*fn)(void *), void *arg,
                    pthread_t *out) {
  if (name == NULL || fn == NULL || out == NULL || rt_priority < 0 ||
      rt_priority > HG_THREAD_RT_MAX)
    return HG_EINVAL;
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc != 0) return -rc;
  if (rt_priority > 0) {
    struct sched_param sp;
    memset(&sp, 0, sizeof sp);
    sp.sched_priority = rt_priority;
    rc = pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
    if (rc == 0) rc = pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
    if (rc == 0) rc = pthread_attr_setschedparam(&attr, &sp);
  }
  pthread_t t;
  if (rc == 0) rc = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (rc != 0) return -rc;
  char nm[16];
  strncpy(nm, name, sizeof nm - 1);
  nm[sizeof nm - 1] = '\0';
  (void)pthread_setname_np(t, nm); /* only a label: a failure changes nothing */
  *out = t;
  return 0;
}
