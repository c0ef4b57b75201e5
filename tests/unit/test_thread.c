/* test_thread.c - the shim's own threads (thread.h): detached, every signal
 * masked, named; the caller's mask is left as it was. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "summary.h"

#include "thread.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static bool done, masked_all, detached;
static char name[16];

static void *probe_main(void *arg)
{
    (void)arg;
    sigset_t mask;
    pthread_sigmask(SIG_SETMASK, NULL, &mask);
    pthread_attr_t attr;
    int state = PTHREAD_CREATE_JOINABLE;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getdetachstate(&attr, &state);
        pthread_attr_destroy(&attr);
    }
    pthread_mutex_lock(&mu);
    masked_all = sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGTERM) == 1 &&
                 sigismember(&mask, SIGUSR1) == 1 && sigismember(&mask, SIGCHLD) == 1 &&
                 sigismember(&mask, SIGALRM) == 1;
    detached = state == PTHREAD_CREATE_DETACHED;
    /* named by the starter after pthread_create returns: wait for it (1 s at most) */
    for (int i = 0; i < 1000; i++) {
        pthread_getname_np(pthread_self(), name, sizeof name);
        if (strcmp(name, "unstall-test") == 0)
            break;
        pthread_mutex_unlock(&mu);
        nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
        pthread_mutex_lock(&mu);
    }
    done = true;
    pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void test_thread_detached_masked_named(void **state)
{
    (void)state;
    sigset_t before, after;
    pthread_sigmask(SIG_SETMASK, NULL, &before);
    assert_int_equal(sigismember(&before, SIGUSR1), 0);
    assert_int_equal(us_thread_start(probe_main, NULL, 64u << 10, "unstall-test"), 0);
    pthread_sigmask(SIG_SETMASK, NULL, &after);
    assert_int_equal(sigismember(&after, SIGUSR1), 0); /* the caller's mask is back */
    pthread_mutex_lock(&mu);
    while (!done)
        pthread_cond_wait(&done_cv, &mu);
    pthread_mutex_unlock(&mu);
    assert_true(masked_all);
    assert_true(detached);
    assert_string_equal(name, "unstall-test");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_detached_masked_named),
    };
    return US_RUN_TESTS("test_thread", tests, NULL, NULL);
}
