/* walkmemo.h - the stack walks a thread repeats, reused while its stack still
 * holds them.
 *
 * A program copies from the same few places, in loops: each copy's finding
 * walks the same frames again. On an H200 host the walk took 0.35 us between
 * two small copies and 2.8 us after the host slept 2 ms (its caches cold),
 * where a small native copy takes 5-20 us (tools/bench/probe.sh).
 *
 * A walk's return addresses each sit in a stack slot: on x86-64 the call
 * instruction stores it just below the caller's frame (at the callee's
 * canonical frame address less 8). The memo keeps, for each return address
 * from the capture's caller up to the last frame the site keeps, the slot it
 * sits in (learnt with a second walk, libgcc_s's, which says each frame's
 * canonical frame address: unwinder.h). A later capture from the same frame (the same
 * stack pointer in the capture, the same caller) whose slots still hold the
 * same return addresses has the same frames: each frame is laid out by the
 * function its return address is in, so the first frame that differs puts
 * another return address in its slot. A frame whose size varies from call to
 * call (alloca, a variable-length array) could move a slot while an old
 * return address stays where it was; a different chain would then need the
 * capture's own frame at the very same address too. The price of such a
 * coincidence is a finding counted at a call site the program used before,
 * never a change to what a call does.
 *
 * Only the calling thread's own stack is read, between the capture's frame
 * and the stack's top (pthread_getattr_np): a capture on another stack (a
 * signal's alternate stack, a coroutine's) walks every time. A key is learnt
 * the second time it misses, so a call site met once costs no second walk.
 * x86-64 with libgcc_s only (elsewhere, and where only backtrace(3) is
 * there, every capture walks). */
#ifndef UNSTALL_WALKMEMO_H
#define UNSTALL_WALKMEMO_H

#include <stdbool.h>
#include <stdint.h>

/* Return addresses a remembered walk checks, and frames a site keeps, at
 * most. */
#define US_WALKMEMO_MAX_RETS 48
#define US_WALKMEMO_MAX_FRAMES 32

/* What a capture is remembered by: the frame it walked from (the address
 * of the capturing function's frame), the return address into its caller,
 * and what decided which frames the site kept. */
struct us_walkmemo_key {
    uintptr_t frame;
    const void *caller;
    uintptr_t self_lo, self_hi; /* the shim's own range, dropped from sites */
    int max_depth;
};

/* Makes the calling thread's memo and asks its stack's bounds, at the
 * shim's start: for the main thread glibc reads /proc/self/maps there (90 us
 * on the build machine), which a first learning would otherwise pay inside
 * a copy. */
void us_walkmemo_prepare(void);

/* Whether the calling thread remembers a walk for key that its stack still
 * holds: then the site's frames into frames[0..*depth). */
bool us_walkmemo_find(const struct us_walkmemo_key *key, void **frames, int *depth);

/* After a walk for key that us_walkmemo_find did not answer, called from the
 * frame the walk was made in (the stack unchanged): rets[0..n) the walk's
 * return addresses from the caller's (rets[0] == key->caller) to the last one
 * that decided the site's frames, frames[0..depth) the site's. Remembered the
 * second time the key misses. */
void us_walkmemo_learn(const struct us_walkmemo_key *key, void *const *rets, int n, void *const *frames, int depth);

/* The calling thread's next learning does not wait for a second miss. */
void us_walkmemo_learn_next(void);

/* For tests: captures the calling thread answered from its memo, and walks
 * it learnt. */
unsigned long us_walkmemo_hits(void);
unsigned long us_walkmemo_learnt(void);

#endif
