/* unwinder.h - the stack walk that call sites are captured with.
 *
 * libunwind's unw_backtrace with a per-thread cache (40-80 ns a walk once
 * its cache knows the return addresses), loaded at run time and never
 * linked: the copy the build put beside the shim first (a private copy,
 * tools/bundle-unwind.sh), then the system's (Debian/Ubuntu package
 * libunwind8); glibc's backtrace(3) where neither is, or under
 * ThreadSanitizer. In the private copy the signal masking libunwind does
 * around its locks (two system calls a lock, most of the cost of a return
 * address met for the first time) is turned off: no one else can load that
 * copy, and the shim never walks from a signal handler (a walk begun on a
 * thread already walking returns no frames). */
#ifndef UNSTALL_UNWINDER_H
#define UNSTALL_UNWINDER_H

#include <stdint.h>

enum us_unwinder_kind {
    US_UNWINDER_BACKTRACE,        /* glibc's backtrace(3) */
    US_UNWINDER_LIBUNWIND,        /* a libunwind others may share: its signal masking kept */
    US_UNWINDER_LIBUNWIND_PRIVATE /* the bundled copy under its own soname: masking off */
};

/* The soname tools/bundle-unwind.sh gives the bundled copy, as long as
 * libunwind's own ("libunwind.so.8") so that it is patched in place. */
#define US_UNWIND_PRIVATE_SONAME "libunwind-us.8"

/* The return addresses of the calling thread's stack, innermost first:
 * frames[0] is in us_unwind itself. At most max; returns how many. 0 when
 * the thread is already inside a walk (a signal handler that interrupted
 * one): libunwind's locks may be held then. */
int us_unwind(void **frames, int max);

/* The stack slots rets[0..n) sit in, rets being return addresses a walk
 * from a caller of this function found, consecutive and innermost first:
 * slots[i] the address that holds rets[i]. Returns how many it found in
 * order from rets[0] (n: all), 0 where only backtrace(3) is there or off
 * x86-64. libunwind's step by step walk, whose cache the fast walk shares:
 * about 2 us for a dozen frames it knows. */
int us_unwind_slots(void *const *rets, int n, uintptr_t *slots);

/* Which unwinder us_unwind uses (chooses it on the first call). */
enum us_unwinder_kind us_unwinder_kind(void);

/* Choose again, the bundled copy taken from `bundled_path` (NULL: none,
 * the system's then) instead of beside the shim: for tests and
 * make bench-costs, which are not the shim. */
void us_unwinder_choose_from(const char *bundled_path);

/* For tests. The signal-mask calls the private copy made on this thread
 * and the shim answered without a system call. */
unsigned long us_unwinder_masks_skipped(void);
/* Called from inside the private copy's signal-mask call, where a signal
 * handler could interrupt it: lets a test walk there. NULL: none. */
void us_unwinder_on_mask_for_test(void (*fn)(void));

#endif
