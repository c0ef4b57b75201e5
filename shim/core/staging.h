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
 *  - slots: the shared pool of chunk_bytes slots the pageable pipelines
 *    claim for the length of one copy. A claimed slot belongs to its claimer
 *    alone; released, it keeps the event recorded after its last GPU use and
 *    is claimed again only once that event has completed (cudaEventQuery), so
 *    nobody ever waits for another stream's work through a slot.
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

struct us_slot {
    char *ptr;           /* us_staging_slot_bytes() of pinned memory */
    int pending_device;  /* -1: free; else events[pending_device] follows its last use */
    bool claimed;
    bool lost;           /* used by the GPU without an event to tell when done: never reused */
    cudaEvent_t events[US_MAX_DEVICES]; /* made on first use on each device */
};

/* A block of `bytes` pinned bytes within pinned_max, for a lane's ring. The
 * current device must be a valid one (it is synchronized). false: over the
 * budget or the allocation failed (logged once each). */
bool us_staging_ring_alloc(size_t bytes, void **out);

/* The size of every slot: chunk_bytes when the pool started. */
size_t us_staging_slot_bytes(void);

/* Claims up to `want` (<= US_STAGING_MAX_CLAIM) slots into out[]: free ones,
 * and released ones whose event has completed; grows the pool by one block
 * when that is not enough and pinned_max allows. Returns how many it claimed;
 * 0 means none could be had without waiting (logged once when the budget or
 * the allocation is the cause): decline. */
unsigned us_staging_claim(unsigned want, struct us_slot **out);

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
