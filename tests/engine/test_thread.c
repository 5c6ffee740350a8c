/*
 * test_thread.c - hg_thread_start: names, scheduling policy, argument checks.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "hourglass/error.h"
#include "hourglass/thread.h"

typedef struct seen {
  int policy;
  int priority;
  pthread_barrier_t *hold; /* NULL, or the thread waits here before it ends */
} seen_t;

static void *record(void *arg) {
  seen_t *s = arg;
  struct sched_param sp;
  pthread_getschedparam(pthread_self(), &s->policy, &sp);
  s->priority = sp.sched_priority;
  if (s->hold != NULL) pthread_barrier_wait(s->hold);
  return NULL;
}

static void default_policy_and_name(void **state) {
  (void)state;
  pthread_barrier_t hold;
  pthread_barrier_init(&hold, NULL, 2);
  seen_t s = {.policy = -1, .hold = &hold};
  pthread_t t;
  assert_int_equal(hg_thread_start("hg-a-very-long-thread-name", 0, record, &s, &t), 0);
  /* The name lives in /proc while the thread does: read it before letting
   * the thread end. */
  char nm[16] = "";
  int rc = pthread_getname_np(t, nm, sizeof nm);
  pthread_barrier_wait(&hold);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&hold);
  assert_int_equal(rc, 0);
  assert_string_equal(nm, "hg-a-very-long-"); /* 15 bytes kept */
  assert_int_equal(s.policy, SCHED_OTHER);
}

static void realtime_policy_or_eperm(void **state) {
  (void)state;
  seen_t s = {.policy = -1};
  pthread_t t;
  int rc = hg_thread_start("hg-rt", 7, record, &s, &t);
  if (rc == -EPERM) {
    /* Not permitted here (no CAP_SYS_NICE, or a container forbids it): no
     * thread ran, and the caller learns exactly why. */
    assert_int_equal(s.policy, -1);
    skip();
  }
  assert_int_equal(rc, 0);
  pthread_join(t, NULL);
  assert_int_equal(s.policy, SCHED_FIFO);
  assert_int_equal(s.priority, 7);
}

static void bad_arguments(void **state) {
  (void)state;
  pthread_t t;
  seen_t s;
  assert_int_equal(hg_thread_start("x", -1, record, &s, &t), HG_EINVAL);
  assert_int_equal(hg_thread_start("x", HG_THREAD_RT_MAX + 1, record, &s, &t), HG_EINVAL);
  assert_int_equal(hg_thread_start(NULL, 0, record, &s, &t), HG_EINVAL);
  assert_int_equal(hg_thread_start("x", 0, NULL, &s, &t), HG_EINVAL);
  assert_int_equal(hg_thread_start("x", 0, record, &s, NULL), HG_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(default_policy_and_name),
      cmocka_unit_test(realtime_policy_or_eperm),
      cmocka_unit_test(bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
