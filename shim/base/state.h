/* state.h - whether the shim acts at all, per process and per thread.
 *
 * The shim steps aside (pure pass-through) when disabled by configuration, in
 * a forked child (CUDA is undefined there until exec), and on a thread that is
 * already inside the shim (a runtime call that re-enters an exported hook).
 * us_passthrough() is the first thing every exported hook asks: one
 * thread-local read and one relaxed atomic read once initialised. */
#ifndef UNSTALL_STATE_H
#define UNSTALL_STATE_H

/* The release (the repository's VERSION file, through the Makefile). */
#ifdef US_VERSION
#define US_VERSION_STRING US_VERSION
#else
#define US_VERSION_STRING "unknown"
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

bool us_state_init_slow(void); /* loads the configuration once; returns "pass through" */

extern _Atomic int us_state_bypass; /* -1 before init, 0 active, 1 pass through */
/* initial-exec: the shim is preloaded, so its TLS is in the static block,
 * and every hook reads this first (no __tls_get_addr call) */
extern _Thread_local int us_state_depth __attribute__((tls_model("initial-exec")));

/* The re-entry depth is read first: a re-entry during the start (on the
 * thread running it) passes through instead of waiting in pthread_once for
 * itself. */
static inline bool us_passthrough(void)
{
    if (us_state_depth > 0)
        return true;
    int bypass = atomic_load_explicit(&us_state_bypass, memory_order_relaxed);
    if (__builtin_expect(bypass < 0, 0))
        return us_state_init_slow();
    return bypass != 0;
}

/* Bracket the shim's own work on a thread so re-entry passes through. */
static inline void us_state_enter(void) { us_state_depth++; }
static inline void us_state_leave(void) { us_state_depth--; }

/* Whether any hook was reached (the report says so when none was: a program
 * that links the runtime statically is invisible to a runtime-layer preload).
 * A read before the one write keeps the cache line shared. */
extern _Atomic int us_state_hooked;
static inline void us_state_note_call(void)
{
    if (!atomic_load_explicit(&us_state_hooked, memory_order_relaxed))
        atomic_store_explicit(&us_state_hooked, 1, memory_order_relaxed);
}
static inline bool us_state_was_hooked(void) { return atomic_load_explicit(&us_state_hooked, memory_order_relaxed) != 0; }

/* Whether a call reached the driver layer and was handled there, not passed
 * through (the report then says what that layer cannot reach). */
extern _Atomic int us_state_driver_layer;
static inline void us_state_note_driver_layer(void)
{
    if (!__atomic_load_n((int *)&us_state_driver_layer, __ATOMIC_RELAXED))
        __atomic_store_n((int *)&us_state_driver_layer, 1, __ATOMIC_RELAXED);
}
static inline bool us_state_driver_layer_used(void)
{
    return atomic_load_explicit(&us_state_driver_layer, memory_order_relaxed) != 0;
}

/* Calls legacy_stream moved off the legacy default stream (the report says
 * how many, and under which choice). */
extern _Atomic unsigned long long us_state_legacy_moved;
static inline void us_state_note_legacy_moved(void)
{
    atomic_fetch_add_explicit(&us_state_legacy_moved, 1, memory_order_relaxed);
}
static inline unsigned long long us_state_legacy_moved_count(void)
{
    return atomic_load_explicit(&us_state_legacy_moved, memory_order_relaxed);
}

static inline uint64_t us_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
