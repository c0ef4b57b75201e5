/* lifecycle.c - see lifecycle.h. */
#include "lifecycle.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* One phase's hooks: written under the mutex before the count that
 * publishes them, read without a lock (a fork's child handler cannot take
 * one another thread may have held at the fork). */
struct hooks {
    void (*fn[US_LIFECYCLE_HOOKS])(void);
    _Atomic unsigned count;
};

static pthread_mutex_t register_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hooks start_hooks, fork_child_hooks;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
_Atomic bool us_lifecycle_in_forked_child;

static bool add(struct hooks *h, void (*fn)(void))
{
    pthread_mutex_lock(&register_lock);
    unsigned n = atomic_load_explicit(&h->count, memory_order_relaxed);
    bool ok = n < US_LIFECYCLE_HOOKS;
    if (ok) {
        h->fn[n] = fn;
        atomic_store_explicit(&h->count, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&register_lock);
    return ok;
}

static void run(struct hooks *h)
{
    unsigned n = atomic_load_explicit(&h->count, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        h->fn[i]();
}

static void in_fork_child(void)
{
    atomic_store_explicit(&us_lifecycle_in_forked_child, true, memory_order_relaxed);
    run(&fork_child_hooks);
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, in_fork_child);
}

bool us_lifecycle_on_start(void (*fn)(void))
{
    return add(&start_hooks, fn);
}

void us_lifecycle_watch_forks(void)
{
    pthread_once(&atfork_once, register_atfork);
}

bool us_lifecycle_on_fork_child(void (*fn)(void))
{
    us_lifecycle_watch_forks();
    return add(&fork_child_hooks, fn);
}

void us_lifecycle_run_start(void)
{
    run(&start_hooks);
}
