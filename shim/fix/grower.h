/* grower.h - the thread that grows the staging pool off the program's
 * threads (staging.h says when a copy asks it).
 *
 * Pinning memory holds the driver and costs about 0.4 ms per MiB (H100/H200):
 * a copy that had to pin its own slots inline would be slower than the native
 * copy it replaces. So a copy that needs more than a little new pinned memory
 * hands the growth to this thread and goes native meanwhile; the next copies
 * find the slots ready.
 *
 * The thread is started on the first request (a process that never copies
 * has no such thread), with every signal blocked and the shim's re-entry
 * guard set (any CUDA hook it reaches passes through). Before its first
 * allocation it makes the requesting copy's device current (cudaSetDevice:
 * never a primary context on a device the program does not use) and sets
 * its capture mode to relaxed (its cudaHostAlloc never invalidates a
 * program's global-mode capture, contract.md §7). It is detached, never joined,
 * and starts no allocation once the process is exiting (contract.md §8); in a
 * forked child it does not exist and requests are refused (the child passes
 * through anyway).
 *
 * Requests are merged by pool and slot size in a small queue; a full queue drops the
 * request (the next short copy asks again). Thread-safe; the requesting copy
 * takes the grower's own mutex for a few instructions, never the pool's, and
 * never waits for an allocation. */
#ifndef UNSTALL_GROWER_H
#define UNSTALL_GROWER_H

#include <stdbool.h>
#include <stddef.h>

/* The pool the grower fills (staging.h's us_staging_grower_pool): passed in,
 * so the grower knows nothing of the pool's insides. */
struct us_grower_pool {
    unsigned (*missing)(size_t slot_bytes, unsigned count); /* how many of count to add */
    bool (*add_free)(size_t slot_bytes);                    /* pins one more; false: stop */
};

/* Starts the thread now if it is not running (the pool's first pinning,
 * us_staging_warm), so that a process's first copy that asks for slots
 * does not pay its start (thread creation, 0.1-0.2 ms inside a first
 * H2D on an H200 host). false: there is no grower (as below). */
bool us_grower_start(void);

/* Asks for `count` slots of `slot_bytes` to be available (free, or released
 * with their work done) in the pool, allocating those missing with `device`
 * current. Returns at once (count 0: nothing to do, true). false: there is
 * no grower (its thread could not be started, or this is a forked child):
 * the caller decides without it. */
bool us_grower_request(const struct us_grower_pool *pool, int device, size_t slot_bytes, unsigned count);

/* Brackets a copy being issued (a pageable H2D's pipeline): the grower
 * starts no allocation meanwhile, for 5 ms at most per slot. Its allocation
 * holds the driver, which each of the copy's CUDA calls then waits for, and
 * faults in fresh pages, as the copy's spill does (spill.h): measured on an
 * H100 host, a process's first 16 MiB copy behind a kernel, with the grower
 * pinning 8 MiB slots beside it, spent 0.5 ms in its capture checks and 1.5
 * ms in one stream query, and spilled 248 MiB at 8.6 GB/s where new memory
 * takes 19.7 GB/s on 8 threads (tools/bench/freshcopy.c). Two relaxed
 * atomics per copy. */
void us_grower_yield_begin(void);
void us_grower_yield_end(void);

/* Before a step of background work that competes with a copy being issued
 * (a registration's next piece, staging.c): lets the copies being issued
 * now finish issuing first, 5 ms at most. */
void us_grower_yield_to_copies(void);

/* Before starting a larger piece of background work (a slot's allocation
 * here; a step of the spill's warming, spill.c): the same, and until no
 * pageable H2D has ended for 1 ms, 5 ms at most. A program's copies often
 * come in runs (the first copy, then the same behind a kernel): the work a
 * copy asked for starts in the pause after the run, not beside its next
 * copy, which waited for the registration in progress (a process's second
 * 16 MiB copy on an H200 host spent 0.37 ms in its first driver calls). */
void us_grower_wait_quiet(void);

/* Tests: waits until every request so far has been worked through. */
void us_grower_wait_idle(void);

/* Tests: how many requests the grower worked through, and how many slots it
 * added, since the process started. */
unsigned long us_grower_requests_done(void);
unsigned long us_grower_slots_added(void);

#endif
