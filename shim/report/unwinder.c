/* unwinder.c - the stack walk call sites are captured with (unwinder.h).
 *
 * Two unwinders are on nearly every Linux system, each taken as the system
 * ships it: nothing is copied beside the shim, patched, or rewritten in
 * memory, so whatever build of either a user has is used the way its
 * authors meant.
 *
 * libunwind's unw_backtrace, its cache per thread, walks through return
 * addresses it has met in 0.1-0.2 us for 16 frames (make bench-costs). A
 * return address it has not met costs more: it reads that object's tables
 * under its locks, and around each lock blocks every signal and restores the
 * mask (two rt_sigprocmask system calls a lock), about 3 us for a walk
 * through one new address on the 2-core build machine. That masking keeps a
 * signal handler that walks with the same library from deadlocking on a lock
 * the interrupted walk holds; libunwind may be shared with the program, so
 * it stays.
 *
 * libgcc_s's _Unwind_Backtrace (what C++ exceptions and glibc's backtrace(3)
 * use) blocks no signal and, with glibc 2.35 or later and GCC 12 or later,
 * finds a frame's tables through _dl_find_object, without a lock (a lock
 * only where a JIT registered its own tables). It keeps nothing between
 * walks: every frame's tables are read again, 2-3 us for 16 frames on the
 * build machine, against 3 us for libunwind's walk through one new address
 * and 0.1-0.2 us for a known one. libunwind first, then: most walks a
 * program makes meet only addresses met before, and a repeated capture from
 * the same frame is answered by the walk memo without a walk (walkmemo.h).
 * libgcc_s where libunwind is missing (GPU hosts often lack it).
 *
 * The walk memo's second walk, which needs each frame's stack address, is
 * libgcc_s's whichever walks first: _Unwind_GetCFA is part of its ABI, where
 * libunwind's step-by-step cursor is an opaque block whose size depends on
 * the build.
 *
 * A walk ends at the first frame without unwind information (code without
 * CFI, a JIT's code it did not register): libgcc_s stops there; libunwind
 * falls back on the frame pointer chain, as its authors ship it. The shim
 * walks only on its callers' threads, never from a signal handler, and a
 * walk begun on a thread already walking (a signal handler that interrupted
 * one) returns no frames. */
#include "unwinder.h"
#include "log.h"
#include "resolve.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unwind.h>

typedef int (*walk_fn)(void **frames, int max);
typedef _Unwind_Reason_Code (*gcc_backtrace_fn)(_Unwind_Trace_Fn trace, void *arg);
typedef _Unwind_Ptr (*gcc_get_fn)(struct _Unwind_Context *context);

#if defined(__x86_64__)
#define UNW_PREFIX "_ULx86_64_"
#elif defined(__aarch64__)
#define UNW_PREFIX "_ULaarch64_"
#else
#define UNW_PREFIX "_UL_unknown_" /* the default global cache then */
#endif
#define UNW_CACHE_PER_THREAD 2 /* libunwind.h's value: no lock between threads */
#define SLOT_STEPS 256         /* frames the slots walk goes through at most */

static struct {
    pthread_mutex_t lock; /* choosing only; a walk takes none */
    atomic_bool chosen;
    enum us_unwinder_kind kind;
    walk_fn walk; /* libunwind's or backtrace(3); libgcc_s's is called in place */
    bool gcc_loaded; /* libgcc_s, once loaded, stays: the slots walk's */
    gcc_backtrace_fn gcc_backtrace;
    gcc_get_fn gcc_ip, gcc_cfa;
    enum us_unwinder_kind first; /* a test's or the bench's choice */
} unwinder = {
    .lock = PTHREAD_MUTEX_INITIALIZER, .kind = US_UNWINDER_BACKTRACE, .walk = backtrace, .first = US_UNWINDER_LIBUNWIND};

struct gcc_walk {
    void **frames;
    int n, max;
};

static int logged_unwinder;
static _Thread_local bool walking __attribute__((tls_model("initial-exec")));

/* --- choosing --------------------------------------------------------------------------- */

static bool load_libgcc(void)
{
    if (unwinder.gcc_loaded)
        return true;
    void *lib = us_resolve_load("libgcc_s.so.1");
    if (lib == NULL)
        return false;
    *(void **)&unwinder.gcc_backtrace = us_resolve_in(lib, "_Unwind_Backtrace");
    *(void **)&unwinder.gcc_ip = us_resolve_in(lib, "_Unwind_GetIP");
    *(void **)&unwinder.gcc_cfa = us_resolve_in(lib, "_Unwind_GetCFA");
    unwinder.gcc_loaded = unwinder.gcc_backtrace != NULL && unwinder.gcc_ip != NULL && unwinder.gcc_cfa != NULL;
    return unwinder.gcc_loaded;
}

static _Unwind_Reason_Code gcc_collect(struct _Unwind_Context *context, void *arg);

/* One walk with libgcc_s now, at the shim's start: its first one runs code
 * the process never ran (page faults), 13 us on the build machine, which a
 * finding's walk memo learning paid otherwise. */
static void warm_libgcc(void)
{
    void *frames[8];
    struct gcc_walk w = {.frames = frames, .max = 8};
    unwinder.gcc_backtrace(gcc_collect, &w);
}

static walk_fn load_libunwind(void)
{
    void *lib = us_resolve_load("libunwind.so.8");
    if (lib == NULL)
        return NULL;
    walk_fn fast;
    *(void **)&fast = us_resolve_in(lib, "unw_backtrace");
    int (*set_caching)(void *, int);
    *(void **)&set_caching = us_resolve_in(lib, UNW_PREFIX "set_caching_policy");
    void **space = us_resolve_in(lib, UNW_PREFIX "local_addr_space");
    /* its public API, in the form libunwind.h gives it: the cache per
     * thread, so that walks on two threads share no lock */
    if (fast != NULL && set_caching != NULL && space != NULL)
        set_caching(*space, UNW_CACHE_PER_THREAD);
    return fast;
}

static void choose_locked(void)
{
    bool have_gcc = load_libgcc();
    if (have_gcc)
        warm_libgcc();
    /* Under ThreadSanitizer, libunwind's per-thread cache destructor runs at
     * thread exit after TSan tore the thread's state down, and crashes the
     * program (seen in make sanitize): libgcc_s there. */
    bool tsan = us_resolve_global("__tsan_init") != NULL;
    walk_fn fast = !tsan && (unwinder.first == US_UNWINDER_LIBUNWIND || !have_gcc) ? load_libunwind() : NULL;
    if (fast != NULL && unwinder.first != US_UNWINDER_BACKTRACE) {
        unwinder.kind = US_UNWINDER_LIBUNWIND;
        unwinder.walk = fast;
        us_log_once(&logged_unwinder, US_LOG_INFO, "call sites are captured with libunwind (libunwind.so.8)");
    } else if (have_gcc && unwinder.first != US_UNWINDER_BACKTRACE) {
        unwinder.kind = US_UNWINDER_LIBGCC;
        unwinder.walk = backtrace;
        us_log_once(&logged_unwinder, US_LOG_INFO,
                    "call sites are captured with libgcc_s's _Unwind_Backtrace%s, 2-3 us a walk "
                    "(install libunwind8 for 0.1-0.2 us)",
                    tsan ? " (ThreadSanitizer present)" : "");
    } else {
        unwinder.kind = US_UNWINDER_BACKTRACE;
        unwinder.walk = backtrace;
        us_log_once(&logged_unwinder, US_LOG_INFO,
                    "neither libunwind.so.8 nor libgcc_s.so.1 loads: call sites are captured with backtrace(3)");
    }
}

static void choose_slow(void)
{
    pthread_mutex_lock(&unwinder.lock);
    if (!atomic_load_explicit(&unwinder.chosen, memory_order_relaxed)) {
        choose_locked();
        atomic_store_explicit(&unwinder.chosen, true, memory_order_release);
    }
    pthread_mutex_unlock(&unwinder.lock);
}

/* The unwinder chosen, on the first call: one load after that. */
static inline void choose(void)
{
    if (!atomic_load_explicit(&unwinder.chosen, memory_order_acquire))
        choose_slow();
}

/* --- walking ---------------------------------------------------------------------------- */

static _Unwind_Reason_Code gcc_collect(struct _Unwind_Context *context, void *arg)
{
    struct gcc_walk *w = arg;
    if (w->n >= w->max)
        return _URC_END_OF_STACK;
    uintptr_t ip = unwinder.gcc_ip(context);
    if (ip == 0)
        return _URC_END_OF_STACK;
    w->frames[w->n++] = (void *)ip;
    return _URC_NO_REASON;
}

int us_unwind(void **frames, int max)
{
    if (walking || max < 1)
        return 0;
    walking = true;
    choose();
    int n;
    if (unwinder.kind == US_UNWINDER_LIBGCC) {
        /* called here, so that its first frame is in us_unwind, as
         * unw_backtrace's and backtrace(3)'s are */
        struct gcc_walk w = {.frames = frames, .max = max};
        unwinder.gcc_backtrace(gcc_collect, &w);
        n = w.n;
    } else {
        n = unwinder.walk(frames, max);
    }
    walking = false;
    return n;
}

struct slots_walk {
    void *const *rets;
    uintptr_t *slots;
    int n, found, steps;
};

/* A frame's context gives the return address into it and the canonical
 * frame address of the frame it was called from: on x86-64 the call
 * instruction stored the return address just below that. */
static _Unwind_Reason_Code gcc_slot(struct _Unwind_Context *context, void *arg)
{
    struct slots_walk *w = arg;
    if (w->found >= w->n || ++w->steps > SLOT_STEPS)
        return _URC_END_OF_STACK;
    uintptr_t ip = unwinder.gcc_ip(context);
    if (ip == (uintptr_t)w->rets[w->found])
        w->slots[w->found++] = unwinder.gcc_cfa(context) - sizeof(void *);
    else if (w->found > 0)
        return _URC_END_OF_STACK; /* not in the walk's order */
    return _URC_NO_REASON;
}

int us_unwind_slots(void *const *rets, int n, uintptr_t *slots)
{
#if defined(__x86_64__)
    choose();
    if (walking || !unwinder.gcc_loaded || n < 1)
        return 0;
    walking = true;
    struct slots_walk w = {.rets = rets, .slots = slots, .n = n};
    unwinder.gcc_backtrace(gcc_slot, &w);
    walking = false;
    return w.found;
#else
    (void)rets, (void)n, (void)slots;
    return 0;
#endif
}

enum us_unwinder_kind us_unwinder_kind(void)
{
    choose();
    return unwinder.kind;
}

void us_unwinder_prefer(enum us_unwinder_kind first)
{
    pthread_mutex_lock(&unwinder.lock);
    unwinder.first = first;
    atomic_store_explicit(&unwinder.chosen, false, memory_order_release);
    pthread_mutex_unlock(&unwinder.lock);
}
