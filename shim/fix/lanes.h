/* lanes.h - the shim's own streams and events for staged peer copies.
 *
 * A lane belongs to one (user stream, device of that stream, source device,
 * destination device): a non-blocking D2H stream on the source device, a
 * non-blocking H2D stream on the destination device, the events that chain
 * them, and a pinned ring of `slots` x chunk_bytes that only this lane uses.
 * Copies on different user streams therefore never queue behind each other
 * inside the shim, and a slot's free event never depends on another user
 * stream's work (case A's stall of an independent copy, and the deadlocks a
 * shared stream could make). The per-thread default stream is a different
 * stream on every thread, so its lanes are per thread as well.
 *
 * Lanes are made on first use with the right device current (the caller's
 * is restored), live for the process (never destroyed: contract.md §8), and
 * serialize the copies issued through them with their own mutex, held only
 * across calls that do not block. A new lane's ring is had before its
 * streams and events are made: when pinned_max leaves no room for it, an
 * idle lane of the same devices is taken over, or the copy goes native,
 * and nothing is made and destroyed per copy. */
#ifndef UNSTALL_LANES_H
#define UNSTALL_LANES_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <uthash.h>

#include "context.h"
#include "staging.h"

#define US_LANE_MAX_SLOTS 64 /* option slots is at most 64 */

struct us_lane_key {
    uint64_t ctx;           /* the issuing context's us_ctx id: its streams and events live there */
    cudaStream_t stream;    /* explicit handle (us_copy_stream) */
    pthread_t thread;       /* the per-thread default stream's thread; else 0 */
    int stream_device, src_device, dst_device;
};

struct us_lane {
    struct us_lane_key key;
    UT_hash_handle hh;
    pthread_mutex_t mu;      /* held while a copy issues through the lane */
    cudaStream_t d2h;        /* on src_device */
    cudaStream_t h2d;        /* on dst_device */
    cudaEvent_t start;       /* stream_device: recorded on the user stream */
    cudaEvent_t gate_src;    /* src_device: its legacy stream (copies on the legacy stream) */
    cudaEvent_t gate_dst;    /* dst_device: its legacy stream (copies on the legacy stream) */
    cudaEvent_t done;        /* dst_device: after the last H2D of a copy */
    cudaEvent_t filled[US_LANE_MAX_SLOTS]; /* src_device: chunk in the ring */
    cudaEvent_t freed[US_LANE_MAX_SLOTS];  /* dst_device: chunk out of the ring */
    unsigned nslots;
    char *ring;              /* nslots * slot_bytes, pinned, portable */
    size_t ring_bytes;
    struct us_pinned_owner ring_owner; /* whose end frees the ring */
    bool used;               /* done has been recorded */
    bool broken;             /* its state is unknown after a failure: not used again */
};

/* The lane for copies from src_device to dst_device ordered with `stream`
 * (which belongs to stream_device), issued in context `home`. Made on first
 * use: its streams and events on home's device in home, those on other
 * devices in their primary contexts (ondevice.h). NULL when its streams,
 * events or ring cannot be had (the reason logged once): decline. The
 * caller locks lane->mu around its use. */
struct us_lane *us_lane_peer(cudaStream_t stream, int stream_device, int src_device, int dst_device,
                             const struct us_ctx *home);

/* A staged copy from `device` was seen: the first lane's ring is faulted in
 * ahead in the background (staging.h's us_staging_ring_ahead), so that the
 * copy that makes it only registers it (a spare ring, rare, goes first).
 * Cheap on every staged copy: an atomic load once asked. */
void us_lane_peer_ahead(int device);

/* After a context is gone (destroyed, or its device reset): its lanes are
 * forgotten, never used again (a later context at the same address has
 * another id), none of their handles called: those in the context went with
 * it; those on other devices are left (a few streams and events per lane).
 * A ring the context did not own is kept for the next lane. */
void us_lanes_forget_context(const struct us_ctx *gone);

/* After cudaDeviceReset of `device`: every lane with a stream or event on
 * it, or a ring allocated while it was current, is forgotten (its handles
 * are dead: never destroyed, never used again); a surviving ring of such a
 * lane is kept for the next lane. Lanes are made again on next use. */
void us_lanes_forget_device(int device);

/* Lanes in the table (tests). */
unsigned us_lanes_count(void);

/* Tests: forget every lane; the lanes are freed, their streams, events and
 * rings are left to the runtime that made them (the unit tests' fake). */
void us_lanes_reset(void);

#endif
