/* staging.h - the shim's pinned host memory, bounded by option pinned_max.
 *
 * All of it comes from cudaHostAlloc(cudaHostAllocPortable) (any device may
 * copy from and to it), is allocated on first need (by the copy itself when
 * little, else by the grower thread), reused, and never
 * freed: at exit the runtime may already be unloading (contract.md §8), so the
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
 * and takes about 0.4 ms per MiB (0.4-0.6 measured), several times as long
 * per byte as the native pageable copy it serves (registration of memory the
 * shim faulted in first: about 0.11 ms per MiB, staging.c). So the pool
 * grows by slots of a piece of the copy (us_staging_pieces: the size policy,
 * measured; 64 KiB at least, chunk_bytes at most), one allocation each: no
 * single call holds the driver much longer than the native copy would have
 * (other threads' launches get in between), a small copy never pins more
 * than 64 KiB, and large copies reach chunk_bytes slots. Slots therefore
 * differ in size; a copy uses only slots of at least its own slot size, so
 * that it is cut into a bounded number of chunks.
 *
 * Growth is off the copy's thread unless it is small (first use must not be
 * slower than native: contract.md §4). A copy that finds
 * too few ready slots pins the missing ones inside the call only when they
 * come to no more than its inline budget (us_staging_inline_budget: an eighth
 * of the copy, 64 KiB at least, 1 MiB at most). Otherwise it asks the grower
 * thread (grower.h) to add them and runs with the slots it has, cycling
 * through them (both pipelines: an H2D that waited for all of them went
 * native every time while its native copies held the driver the grower
 * waits for, so no copy claims all-or-nothing). With none
 * of its own size, an H2D runs with ready slots of half its size or more,
 * and with none of those goes native at once: exactly the native call; a D2H goes native when its
 * stream is idle (pipeline_d2h.c: ready_only, us_staging_grow_later), else
 * pins one slot inline (pin_one; of the budget when its own slot size is over it;
 * one such smaller slot pinned earlier and free again is used instead): a
 * native D2H can deadlock a program whose stream waits for another thread's
 * launch (case C's stream-0 D2H deadlock), which an idle stream cannot. The
 * next copies of that size find the grower's slots ready. The grower tops
 * the pool up to what the copy wanted, counting the slots available then
 * (free, or released with their work done), so that copies that repeat find
 * their slots and concurrent copies each get theirs, bounded by pinned_max.
 *
 * Thread-safe. The pool's mutex is never held across a call that can block
 * (allocation happens outside it); it is held across cudaEventQuery, which
 * does not block. */
#ifndef UNSTALL_STAGING_H
#define UNSTALL_STAGING_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "device_state.h"
#include "grower.h"

/* Most slots one copy claims (bounds the claimer's arrays). */
#define US_STAGING_MAX_CLAIM 64

/* Slots are between these sizes; a growth is one slot of copy bytes / 8. */
#define US_STAGING_MIN_SLOT ((size_t)64 << 10)
#define US_STAGING_GROW_DIVISOR 8

/* The pool's pinned memory is registered in pieces of at most this many
 * bytes, each ending at a multiple of it (staging.c: a registration holds
 * every other thread's CUDA calls, launches included, for as long as it
 * runs, about 55 us a MiB on an H200 host). A copy's host range must lie in
 * one registration (a copy across two, cudaMemcpy or cudaMemcpyAsync,
 * returns cudaErrorInvalidValue), so a copy to or from such a slot (pieced) is
 * issued in parts that end where a piece ends: us_staging_piece_room. */
#define US_STAGING_PIN_PIECE ((size_t)2 << 20)

/* The bytes from p to the end of its piece, at most n. */
static inline size_t us_staging_piece_room(const void *p, size_t n)
{
    size_t room = US_STAGING_PIN_PIECE - (size_t)((uintptr_t)p % US_STAGING_PIN_PIECE);
    return room < n ? room : n;
}

/* The most pinned memory a copy allocates inside its own call. Pinning costs
 * about 0.4 ms/MiB (H100 and H200, CUDA 13.0); the native pageable copies it
 * replaces cost 0.09 ms/MiB (H2D, 1 MiB in 93 us) to 0.13 ms/MiB (D2H, 1 MiB
 * in 133 us) on an idle H100. An eighth of the copy pins in 0.05 ms per MiB
 * copied: half the native copy's time or less, paid once. 1 MiB at most
 * (0.4 ms: about the longest stall native pageable copies cause other
 * threads' launches, 0.1-0.4 ms), 64 KiB at least (one smallest slot, 26 us:
 * a small first D2H must be rewritten, since a native one can deadlock
 * behind another thread's launch, and pays it once). */
#define US_STAGING_INLINE_MAX ((size_t)1 << 20)

struct us_slot {
    char *ptr;           /* `bytes` of pinned memory */
    size_t bytes;        /* US_STAGING_MIN_SLOT .. us_staging_slot_bytes() */
    int pending_ctx;     /* -1: free; else events[pending_ctx] follows its last use */
    bool claimed;
    bool lost;           /* used by the GPU without an event to tell when done: never reused */
    bool pieced;         /* registered in pieces (US_STAGING_PIN_PIECE): a copy is split where one ends */
    cudaEvent_t events[US_MAX_CONTEXTS]; /* per context (struct us_ctx's index), made on first use there */
};

/* Who owns a block of pinned memory: whose end frees it. The pool's memory
 * is allocated in the current device's primary context when it is active
 * (it lives as long as the runtime, and, registered portable, every context
 * may copy from it); else in the context the copy is issued in, which takes
 * it along when destroyed. */
struct us_pinned_owner {
    int device;          /* current at the allocation: a reset of it frees the primary's memory */
    uint64_t ctx;        /* 0: the primary context; else the created context's us_ctx id */
};

/* A block of `bytes` pinned bytes within pinned_max, for a lane's ring;
 * *owner: whose end frees it. false: over the budget or the allocation
 * failed (logged once each). */
bool us_staging_ring_alloc(size_t bytes, void **out, struct us_pinned_owner *owner);

/* Asks the grower, once a process, to fault in a ring of `bytes` ahead
 * (mapped, not registered: no driver call), so that the copy that makes the
 * first lane only registers it (us_staging_ring_alloc takes it). Nothing
 * when the budget could not register it, or once a ring was allocated.
 * Costs the requesting copy an atomic load after the first ask. */
void us_staging_ring_ahead(int device, size_t bytes);

/* The bytes of a ring faulted in ahead that no lane has taken yet; 0: none. */
size_t us_staging_ring_ahead_waiting(void);

/* A ring of `bytes` that a device reset freed leaves the budget. */
void us_staging_ring_forget(size_t bytes);

/* After cudaDeviceReset of `device`: the slots allocated in its primary
 * context leave the pool (the reset freed them: they are forgotten, never
 * freed again, and their bytes leave the budget). The pinned memory is
 * assumed freed by the reset, portable or not (the context that allocated
 * it owned it); if it survived, it is leaked, never freed twice. */
void us_staging_forget_device(int device);

/* After a context is gone (destroyed, or its device reset): the slots it
 * owned leave the pool as above, and every slot forgets its event there
 * (never destroyed: the context took it along; the index is another
 * context's next) and is free of work there (the destroy waited for it). */
void us_staging_forget_context(const struct us_ctx *gone);

/* The largest slot: chunk_bytes when the pool started. */
size_t us_staging_slot_bytes(void);

/* The size of a slot a copy of `copy_bytes` grows the pool by, and the
 * least size of a slot it uses: copy_bytes / US_STAGING_GROW_DIVISOR rounded
 * down to a power of two, within US_STAGING_MIN_SLOT .. slot_bytes.
 * us_staging_slot_bytes_for: the same with the copy cut into `pieces`. */
size_t us_staging_grow_bytes(size_t copy_bytes);
size_t us_staging_slot_bytes_for(size_t copy_bytes, unsigned pieces);

/* How many pieces a pageable copy is cut into: the size policy of the slot
 * pipelines, measured (staging.c says where and what). */
unsigned us_staging_pieces(bool to_device, size_t copy_bytes);

/* The most new pinned bytes a copy of `copy_bytes` allocates inside its own
 * call: copy_bytes / US_STAGING_GROW_DIVISOR within US_STAGING_MIN_SLOT ..
 * US_STAGING_INLINE_MAX (why: US_STAGING_INLINE_MAX). */
size_t us_staging_inline_budget(size_t copy_bytes);

/* What a copy asks of the pool. */
struct us_staging_ask {
    unsigned want;     /* most slots (<= US_STAGING_MAX_CLAIM); it stops once they hold the copy */
    size_t copy_bytes;
    int device;        /* the copy's stream device: the grower allocates with it current */
    unsigned pieces;   /* slots of copy_bytes / pieces (us_staging_pieces); 0: US_STAGING_GROW_DIVISOR */
    bool inline_only;  /* no grower: it would pin in the device's primary context, which the program
                        * never made active (a copy in a created context): pinned here, in this one */
    bool ready_only;   /* claims only slots ready now: with none, it pins nothing and asks the grower
                        * for nothing (us_staging_grow_later does); ignored with inline_only */
    bool pin_one;      /* when none is ready and the missing ones are over the budget, one slot is
                        * pinned here all the same (a D2H that must not go native) */
};

/* The slot size the ask's copy wants (us_staging_slot_bytes_for with its
 * pieces): the least it claims, and the longest chunk a slot carries. */
size_t us_staging_ask_slot_bytes(const struct us_staging_ask *ask);

/* Claims slots for a copy: up to `want` of at least
 * us_staging_slot_bytes_for(copy_bytes, pieces) into out[], stopping once they hold the
 * whole copy: free ones, and released ones whose event has completed. When
 * that is not enough and the missing slots fit the copy's inline budget, pins
 * them here, one allocation each. When they do not, asks the grower thread
 * for them (*growing = true) and returns what the copy has: its ready slots,
 * or with none, ready ones smaller than its own (pin_one: those an earlier
 * copy pinned here, else one pinned here, of the budget when the copy's own
 * slot size is over it; otherwise of half its own size or more).
 * Without a grower thread (it could not start) it
 * pins what the copy needs here. Returns how many slots it claimed; 0 means
 * decline (logged once when the budget, the allocation or the background
 * growth is the cause). */
unsigned us_staging_claim_for_copy(const struct us_staging_ask *ask, struct us_slot **out, bool *growing);

/* Pins the pool's first slots now, once per process, in one block: two of
 * each size from US_STAGING_MIN_SLOT up, doubling, within warm_pinned (and
 * half of pinned_max), at least the first. Called after the program's first
 * device allocation, usually the call that created its context. Each pinning
 * holds the driver, which other threads' CUDA calls wait for, for 0.13-0.5 ms
 * (H100 host): inside the first D2H that needed the slot, or beside it on the
 * grower thread, where the native copy waited for it, the first 4 B D2H took
 * 190-740 us against 45-125 natively, and while the grower pinned the slots
 * of the first 1-16 MiB copies those copies' worst calls were 3-6 times
 * native's; beside a device allocation it is paid once where nobody waits for
 * it. The slots' events in the current context are made then too, and one
 * DMA of up to 4 bytes from device_bytes (the allocation just made, `size`
 * bytes; read, never written) into the block, which takes off the next
 * copy's time what the pinning added to it (staging.c's first_dma). Not
 * when no copy is rewritten. */
void us_staging_warm(const void *device_bytes, size_t size);

/* Asks the grower thread for the slots the copy wants (as many as hold it,
 * up to ask->want), to be ready for the next copies. false: no grower thread
 * (it could not start, or inline_only). */
bool us_staging_grow_later(const struct us_staging_ask *ask);

/* The same, pinning whatever the copy needs inside the call (within
 * pinned_max): what us_staging_claim_for_copy does without a grower thread.
 * Tests warm the pool with it. */
unsigned us_staging_claim(unsigned want, size_t copy_bytes, struct us_slot **out);

/* The grower's side (grower.c). How many of `count` slots of at least
 * `slot_bytes` are not available now (available: not claimed, not lost, free
 * or released with their event complete); and one free slot of `slot_bytes`
 * added (false: pinned_max, or the allocation failed, logged once). */
unsigned us_staging_missing(size_t slot_bytes, unsigned count);
bool us_staging_add_free(size_t slot_bytes);
extern const struct us_grower_pool us_staging_grower_pool; /* the two above */

/* The slot's event in context `in` (the stream's), made on first use
 * (`home`: the caller's context, current again after). The slot must be
 * claimed by the caller. */
cudaError_t us_staging_slot_event(struct us_slot *slot, const struct us_ctx *in, const struct us_ctx *home,
                                  cudaEvent_t *out);

/* Gives claimed slots back. pending_ctx[i]: -1 if slot i is free now (the
 * GPU is done with it), else the index of the context whose slot event was
 * recorded after its last use; US_STAGING_LOST if the GPU may still use it and no event says
 * when (the slot is never reused). NULL: all free. */
#define US_STAGING_LOST (-2)
void us_staging_release(struct us_slot *const *slots, unsigned n, const int *pending_ctx);

/* Pinned bytes allocated so far (rings and slots). */
size_t us_staging_pinned_bytes(void);

/* Tests: forget every block and slot, after the grower thread is idle, and
 * what was logged once; their bookkeeping is freed, the pinned memory is left
 * to the runtime that allocated it (the unit tests' fake). */
void us_staging_reset(void);

#endif
