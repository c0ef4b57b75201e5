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
 * program's global-mode capture, contract 7). It is detached, never joined,
 * and starts no allocation once the process is exiting (contract 8); in a
 * forked child it does not exist and requests are refused (the child passes
 * through anyway).
 *
 * Requests are merged by slot size in a small queue; a full queue drops the
 * request (the next short copy asks again). Thread-safe; the requesting copy
 * takes the grower's own mutex for a few instructions, never the pool's, and
 * never waits for an allocation. */
#ifndef UNSTALL_GROWER_H
#define UNSTALL_GROWER_H

#include <stdbool.h>
#include <stddef.h>

/* Asks for `count` slots of `slot_bytes` to be available (free, or released
 * with their work done) in the pool, allocating those missing with `device`
 * current. Returns at once (count 0: nothing to do, true). false: there is
 * no grower (its thread could not be started, or this is a forked child):
 * the caller decides without it. */
bool us_grower_request(int device, size_t slot_bytes, unsigned count);

/* Tests: waits until every request so far has been worked through. */
void us_grower_wait_idle(void);

/* Tests: how many requests the grower worked through, and how many slots it
 * added, since the process started. */
unsigned long us_grower_requests_done(void);
unsigned long us_grower_slots_added(void);

#endif
