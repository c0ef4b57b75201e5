/* staging.h - the shim's pinned host memory, bounded by option pinned_max.
 *
 * All of it comes from cudaHostAlloc(cudaHostAllocPortable) (any device may
 * copy from and to it), is allocated on first need, in whole blocks (an
 * allocation synchronizes the device: never one per copy), reused, and never
 * freed: at exit the runtime may already be unloading (contract 8), so the
 * OS takes it back.
 *
 * Two kinds of users:
 *  - rings: one contiguous block a peer lane owns for good (lanes.c);
 *  - slots: the shared pool the pageable pipelines claim for the length of
 *    one copy. A claimed slot belongs to its claimer alone; released, it
 *    keeps the event recorded after its last GPU use and is claimed again
 *    only once that event has completed (cudaEventQuery), so nobody ever
 *    waits for another stream's work through a slot.
 *
 * Growth follows the copies, in small steps. An allocation of pinned memory
 * holds the driver (a first cudaHostAlloc of 32 MiB stalled another thread's
 * kernel launch 10-15 ms on an H200; the native pageable copies, 0.1-0.4 ms),
 * and takes about 8 times as long per byte as the pageable copy it serves.
 * So the pool grows by slots of an eighth of the copy (US_STAGING_GROW_DIVISOR;
 * 64 KiB at least, chunk_bytes at most), one cudaHostAlloc each, as many as
 * the copy needs: no single call holds the driver much longer than the native
 * copy would have (other threads' launches get in between), a small copy
 * never pins more than 64 KiB, and large copies reach chunk_bytes slots.
 * Slots therefore differ in size; a copy uses only slots of at least its own
 * growth size, so that it is cut into a bounded number of chunks.
 *
 * Thread-safe. The pool's mutex is never held across a call that can block
 * (allocation happens outside it); it is held across cudaEventQuery, which
 * does not block. */
#ifndef UNSTALL_STAGING_H
#define UNSTALL_STAGING_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

#include "device_state.h"

/* Most slots one copy claims (bounds the claimer's arrays). */
#define US_STAGING_MAX_CLAIM 64

/* Slots are between these sizes; a growth is one slot of copy bytes / 8. */
#define US_STAGING_MIN_SLOT ((size_t)64 << 10)
#define US_STAGING_GROW_DIVISOR 8

struct us_slot {
    char *ptr;           /* `bytes` of pinned memory */
    size_t bytes;        /* US_STAGING_MIN_SLOT .. us_staging_slot_bytes() */
    int pending_device;  /* -1: free; else events[pending_device] follows its last use */
    bool claimed;
    bool lost;           /* used by the GPU without an event to tell when done: never reused */
    cudaEvent_t events[US_MAX_DEVICES]; /* made on first use on each device */
};

/* A block of `bytes` pinned bytes within pinned_max, for a lane's ring;
 * *device: the device current at the allocation, whose reset frees it.
 * false: over the budget or the allocation failed (logged once each). */
bool us_staging_ring_alloc(size_t bytes, void **out, int *device);

/* A ring of `bytes` that a device reset freed leaves the budget. */
void us_staging_ring_forget(size_t bytes);

/* After cudaDeviceReset of `device`: the slots allocated while it was
 * current leave the pool (the reset freed them: they are forgotten, never
 * freed again, and their bytes leave the budget), and every other slot
 * forgets its event on that device (made again on next use). The pinned
 * memory is assumed freed by the reset, portable or not (the context that
 * allocated it owned it); if it survived, it is leaked, never freed twice. */
void us_staging_forget_device(int device);

/* The largest slot: chunk_bytes when the pool started. */
size_t us_staging_slot_bytes(void);

/* The size of a slot a copy of `copy_bytes` grows the pool by, and the
 * least size of a slot it uses: copy_bytes / US_STAGING_GROW_DIVISOR rounded
 * down to a power of two, within US_STAGING_MIN_SLOT .. slot_bytes. */
size_t us_staging_grow_bytes(size_t copy_bytes);

/* Claims, for a copy of `copy_bytes`, up to `want` (<= US_STAGING_MAX_CLAIM)
 * slots of at least us_staging_grow_bytes(copy_bytes) into out[], stopping
 * once they hold the whole copy: free ones, and released ones whose event has
 * completed. When that is not enough, grows the pool by such slots, one
 * allocation each, as far as pinned_max allows. Returns how many
 * it claimed; 0 means none could be had without waiting (logged once when
 * the budget or the allocation is the cause): decline. */
unsigned us_staging_claim(unsigned want, size_t copy_bytes, struct us_slot **out);

/* The slot's event on `device`, made on first use (`current`: the caller's
 * device, restored). The slot must be claimed by the caller. */
cudaError_t us_staging_slot_event(struct us_slot *slot, int device, int current, cudaEvent_t *out);

/* Gives claimed slots back. pending_device[i]: -1 if slot i is free now (the
 * GPU is done with it), else the device whose slot event was recorded after
 * its last use; US_STAGING_LOST if the GPU may still use it and no event says
 * when (the slot is never reused). NULL: all free. */
#define US_STAGING_LOST (-2)
void us_staging_release(struct us_slot *const *slots, unsigned n, const int *pending_device);

/* Pinned bytes allocated so far (rings and slots). */
size_t us_staging_pinned_bytes(void);

/* Tests: forget every block and slot; their bookkeeping is freed, the pinned
 * memory is left to the runtime that allocated it (the unit tests' fake). */
void us_staging_reset(void);

#endif
