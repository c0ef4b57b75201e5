/* unwinder.h - the stack walk that call sites are captured with.
 *
 * Loaded at run time and never linked, each library used as the system
 * ships it (nothing copied, patched or rewritten): the distribution's
 * libunwind (libunwind.so.8, Debian/Ubuntu package libunwind8) where it
 * loads, for its per-thread cache (a walk through return addresses it knows
 * in 0.1-0.2 us); else libgcc_s's _Unwind_Backtrace, which every glibc
 * system has (no cache: every frame's tables read again, 2-3 us for 16
 * frames); glibc's backtrace(3) where neither loads. Under ThreadSanitizer,
 * libgcc_s. unwinder.c says what each costs and why this order. */
#ifndef UNSTALL_UNWINDER_H
#define UNSTALL_UNWINDER_H

#include <stdint.h>

enum us_unwinder_kind {
    US_UNWINDER_BACKTRACE, /* glibc's backtrace(3): neither library loaded */
    US_UNWINDER_LIBGCC,    /* libgcc_s's _Unwind_Backtrace */
    US_UNWINDER_LIBUNWIND  /* the distribution's libunwind.so.8, as it is */
};

/* The return addresses of the calling thread's stack, innermost first:
 * frames[0] is in us_unwind itself. At most max; returns how many. 0 when
 * the thread is already inside a walk (a signal handler that interrupted
 * one): the unwinder's locks may be held then. A walk ends, safely, at the
 * first frame without unwind information (hand-written code without CFI,
 * code a JIT did not register). */
int us_unwind(void **frames, int max);

/* The stack slots rets[0..n) sit in, rets being return addresses a walk
 * from a caller of this function found, consecutive and innermost first:
 * slots[i] the address that holds rets[i]. Returns how many it found in
 * order from rets[0] (n: all), 0 where libgcc_s is missing or off x86-64.
 * libgcc_s's walk, which says each frame's canonical frame address (the
 * return address sits just below it), whichever unwinder us_unwind uses. */
int us_unwind_slots(void *const *rets, int n, uintptr_t *slots);

/* Which unwinder us_unwind uses (chooses it on the first call). */
enum us_unwinder_kind us_unwinder_kind(void);

/* Choose again, `first` taken where it loads and the usual order after it
 * otherwise: for tests and make bench-costs, which compare them. */
void us_unwinder_prefer(enum us_unwinder_kind first);

#endif
