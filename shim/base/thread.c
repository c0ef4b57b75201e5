/* thread.c - the shim's own threads (see thread.h). */
#include "thread.h"

#include <pthread.h>
#include <signal.h>

int us_thread_start(void *(*fn)(void *), void *arg, size_t stack_bytes, const char *name)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, stack_bytes);
    /* the thread inherits this mask */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        pthread_setname_np(t, name);
    return rc;
}
