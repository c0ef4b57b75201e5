/* grower.c - see grower.h.
 *
 * One thread, a queue of at most GROWER_QUEUE requests under the grower's
 * mutex, a condition variable to wake the thread and one to tell a test it
 * is idle. The thread works a request outside the mutex: it asks the pool
 * how many slots are missing (counted once, so that copies claiming the new
 * slots while it works never make it grow without end), then adds them one
 * allocation at a time. */
#include "grower.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lifecycle.h"
#include "log.h"
#include "real.h"
#include "state.h"
#include "thread.h"

#define GROWER_QUEUE 8
#define GROWER_STACK_BYTES (256u << 10)

struct grow_request {
    const struct us_grower_pool *pool;
    int device;
    size_t slot_bytes;
    unsigned count;
};

enum grower_state { GROWER_NOT_STARTED, GROWER_RUNNING, GROWER_FAILED };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the thread waits here for a request */
    pthread_cond_t idle; /* tests wait here for the queue to drain */
    struct grow_request queue[GROWER_QUEUE];
    unsigned queued;
    bool working; /* a request is being worked, outside mu */
    enum grower_state state;
} grower = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
};

static atomic_bool exiting;   /* the process is exiting: allocate nothing more */
static atomic_ulong requests_done, slots_added;
static atomic_uint copies_issuing; /* us_grower_yield_begin/_end */
static _Atomic uint64_t last_copy_end_ns; /* when the last one ended (us_now_ns); 0: none yet */

/* Longest a slot's allocation waits for copies being issued, and how often
 * it looks: a program that copies without pause still gets its pool. */
#define GROWER_YIELD_MAX_US 5000
#define GROWER_YIELD_STEP_US 50
/* How long after a pageable H2D a slot's allocation waits (us_grower_wait_quiet). */
#define GROWER_QUIET_US 1000

void us_grower_yield_begin(void)
{
    atomic_fetch_add_explicit(&copies_issuing, 1, memory_order_relaxed);
}

void us_grower_yield_end(void)
{
    atomic_store_explicit(&last_copy_end_ns, us_now_ns(), memory_order_relaxed);
    atomic_fetch_sub_explicit(&copies_issuing, 1, memory_order_relaxed);
}

/* Waits, GROWER_YIELD_MAX_US at most, while copies are being issued or,
 * with quiet_ns, while the last one ended less than that long ago. */
static void wait_for_copies(uint64_t quiet_ns)
{
    struct timespec step = {0, GROWER_YIELD_STEP_US * 1000L};
    for (unsigned waited = 0; waited < GROWER_YIELD_MAX_US; waited += GROWER_YIELD_STEP_US) {
        bool issuing = atomic_load_explicit(&copies_issuing, memory_order_relaxed) > 0;
        uint64_t ended = atomic_load_explicit(&last_copy_end_ns, memory_order_relaxed);
        if (!issuing && (quiet_ns == 0 || ended == 0 || us_now_ns() - ended >= quiet_ns))
            return;
        nanosleep(&step, NULL);
    }
}

void us_grower_yield_to_copies(void)
{
    wait_for_copies(0);
}

void us_grower_wait_quiet(void)
{
    wait_for_copies(GROWER_QUIET_US * 1000ull);
}
static int logged_start, logged_set_device;

/* The runtime may be unloading once exit has begun (contract.md §8): a request
 * in progress finishes its current allocation and starts no other. */
__attribute__((destructor)) static void grower_at_exit(void)
{
    atomic_store(&exiting, true);
}

/* The longest exit waits for the allocation in progress: one slot (8 MiB
 * by default) registers in about 1-3 ms. */
#define GROWER_EXIT_WAIT_MS 200

/* At exit, before the runtime unloads: a thread inside cudaHostRegister while
 * the driver tears down crashes the process (seen on an H100: a program that
 * returned from main right after its first small D2H, whose slot the grower
 * was registering, ended in a segmentation fault). Registered with atexit
 * when the thread starts, after the runtime initialized, so that it runs
 * before the runtime's own teardown (atexit handlers run last registered
 * first; the driver's destructors run after them). Nothing new starts, and
 * the allocation in progress is waited for, within GROWER_EXIT_WAIT_MS. */
static void grower_quiesce_at_exit(void)
{
    atomic_store(&exiting, true);
    if (atomic_load(&us_lifecycle_in_forked_child))
        return; /* a forked child has no grower thread, whatever its copy of the state says */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += (long)GROWER_EXIT_WAIT_MS * 1000000L;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&grower.mu);
    while (grower.working && pthread_cond_timedwait(&grower.idle, &grower.mu, &deadline) == 0)
        ;
    pthread_mutex_unlock(&grower.mu);
}

/* On the grower thread: `device` current and relaxed capture mode, set
 * before its first allocation and whenever a request names another device.
 * cudaSetDevice first: the copy's device has a context already, so nothing
 * is created on a device the program does not use. */
static bool prepare(int device, int *current, bool *relaxed)
{
    const struct us_real_api *real = us_real();
    if (device != *current) {
        cudaError_t err = real->cudaSetDevice(device);
        if (err != cudaSuccess) {
            us_log_once(&logged_set_device, US_LOG_WARN,
                        "staging grower: cudaSetDevice(%d) failed (%s): the pool does not grow in the background",
                        device, us_real_error_name(err));
            return false;
        }
        *current = device;
    }
    if (!*relaxed) {
        enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
        if (real->cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess)
            return false; /* an allocation now could invalidate a program's capture */
        *relaxed = true;
    }
    return true;
}

static void work(const struct grow_request *r, int *current, bool *relaxed)
{
    if (atomic_load(&exiting) || !prepare(r->device, current, relaxed))
        return;
    unsigned missing = r->pool->missing(r->slot_bytes, r->count);
    for (unsigned i = 0; i < missing && !atomic_load(&exiting); i++) {
        us_grower_wait_quiet();
        if (!r->pool->add_free(r->slot_bytes))
            break; /* pinned_max or a failed allocation, logged once by the pool */
        atomic_fetch_add(&slots_added, 1);
    }
}

static void *grower_main(void *arg)
{
    (void)arg;
    us_state_enter(); /* for good: the shim's hooks pass through on this thread */
    int current = -1;
    bool relaxed = false;
    pthread_mutex_lock(&grower.mu);
    for (;;) {
        while (grower.queued == 0) {
            grower.working = false;
            pthread_cond_broadcast(&grower.idle);
            pthread_cond_wait(&grower.wake, &grower.mu);
        }
        struct grow_request r = grower.queue[0];
        memmove(grower.queue, grower.queue + 1, --grower.queued * sizeof grower.queue[0]);
        if (atomic_load(&exiting))
            continue; /* the queue drains without work, and the thread idles */
        grower.working = true;
        pthread_mutex_unlock(&grower.mu);
        work(&r, &current, &relaxed);
        atomic_fetch_add(&requests_done, 1);
        pthread_mutex_lock(&grower.mu);
    }
    return NULL;
}

/* Under grower.mu: starts the thread. */
static bool start_locked(void)
{
    us_lifecycle_watch_forks();
    if (atexit(grower_quiesce_at_exit) != 0)
        return false; /* without it an exit could crash the process: copies grow the pool themselves */
    int rc = us_thread_start(grower_main, NULL, GROWER_STACK_BYTES, "unstall-grow");
    if (rc != 0) {
        us_log_once(&logged_start, US_LOG_WARN,
                    "staging grower: cannot start a thread (%s): copies grow the pool themselves", strerror(rc));
        return false;
    }
    return true;
}

/* Under grower.mu: whether the thread runs, started now if it never was. */
static bool running_locked(void)
{
    if (grower.state == GROWER_NOT_STARTED)
        grower.state = start_locked() ? GROWER_RUNNING : GROWER_FAILED;
    return grower.state == GROWER_RUNNING;
}

bool us_grower_start(void)
{
    if (atomic_load(&us_lifecycle_in_forked_child))
        return false;
    pthread_mutex_lock(&grower.mu);
    bool running = running_locked();
    pthread_mutex_unlock(&grower.mu);
    return running;
}

bool us_grower_request(const struct us_grower_pool *pool, int device, size_t slot_bytes, unsigned count)
{
    if (atomic_load(&us_lifecycle_in_forked_child))
        return false;
    if (count == 0)
        return true; /* nothing to add */
    pthread_mutex_lock(&grower.mu);
    bool running = running_locked();
    if (running) {
        unsigned i = 0;
        while (i < grower.queued && (grower.queue[i].slot_bytes != slot_bytes || grower.queue[i].pool != pool))
            i++;
        if (i < grower.queued) { /* the same pool and size asked again: the larger count, the latest device */
            if (count > grower.queue[i].count)
                grower.queue[i].count = count;
            grower.queue[i].device = device;
        } else if (grower.queued < GROWER_QUEUE) {
            grower.queue[grower.queued++] = (struct grow_request){pool, device, slot_bytes, count};
        } /* else dropped: the next copy that finds the pool short asks again */
        pthread_cond_signal(&grower.wake);
    }
    pthread_mutex_unlock(&grower.mu);
    return running;
}

void us_grower_wait_idle(void)
{
    pthread_mutex_lock(&grower.mu);
    while (grower.state == GROWER_RUNNING && (grower.queued > 0 || grower.working))
        pthread_cond_wait(&grower.idle, &grower.mu);
    pthread_mutex_unlock(&grower.mu);
}

unsigned long us_grower_requests_done(void)
{
    return atomic_load(&requests_done);
}

unsigned long us_grower_slots_added(void)
{
    return atomic_load(&slots_added);
}
