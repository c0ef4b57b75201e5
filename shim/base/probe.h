/* probe.h - where a copy's time goes on the calling thread, step by step, in
 * a build made for it: make PROBE=1 BUILD=<a folder of its own> shim
 * (-DUS_PROBE). In every other build the stamps compile to nothing.
 *
 * A call of us_copy_run is one record: when it reached each step below, the
 * first time only (a pipeline's first chunk), in nanoseconds on
 * CLOCK_MONOTONIC (a read costs 20-30 ns). The first US_PROBE_RECORDS calls
 * of the process are kept and written at exit, one line each, to the file
 * UNSTALL_PROBE_OUT names (appended; default stderr):
 *   UNSTALL_PROBE pid=<p> call=<n> tid=<t> api=<name> path=<path> bytes=<n> <step>=<us since entered> ...
 * with the steps the call reached. tools/bench/probe_steps.py puts the
 * records of many processes side by side. Questions such as what a first
 * copy or a copy after the host was idle spends its time on were once
 * answered with patches made for the day; this keeps them in the tree, where
 * the code they time is. */
#ifndef UNSTALL_PROBE_H
#define UNSTALL_PROBE_H

#include <stddef.h>

/* The steps, in the order a call usually reaches them. */
#define US_PROBE_STEPS(X)                                                                       \
    X(entered)        /* us_copy_run took the call */                                           \
    X(native_begun)   /* the native call made (us_copy_native) */                               \
    X(kinds_known)    /* memory kinds and path known (classify.c) */                            \
    X(classified)     /* rules known: the legacy-stream check's too (watch.c, policy.c) */     \
    X(native_done)    /* the native call returned */                                            \
    X(pipe_begun)     /* a pipeline's checks done (capture mode, stream, devices) */             \
    X(slots_claimed)  /* its pinned slots claimed, with their events (peer: its lane, earlier errors asked) */ \
    X(workers_woken)  /* the host copy's helper threads told of a job (hostcopy.c) */           \
    X(own_parts_done) /* the caller copied its last part of that job and waits for the rest */ \
    X(host_copied)    /* H2D: the first chunk in its slot; D2H: the first chunk copied out */  \
    X(issued)         /* the first chunk's DMA and its event queued */                          \
    X(queue_known)    /* H2D short of slots: whether its stream has queued work known */          \
    X(spill_taken)    /* and, behind queued work, its spill memory taken (spill.h) */            \
    X(spilled)        /* H2D behind queued work: the bytes past its slots copied to the spill */ \
    X(fed)            /* and the first host function that feeds a slot from it queued */        \
    X(waited)         /* the first wait for a chunk's event returned */                         \
    X(pipe_done)      /* the pipeline returned */                                               \
    X(site_taken)     /* the call-site walk returned */                                         \
    X(recorded)       /* the findings recorded */                                               \
    X(left)           /* us_copy_run returns */

#define US_PROBE_STEP_ID(name) US_PROBE_##name,
enum us_probe_step { US_PROBE_STEPS(US_PROBE_STEP_ID) US_PROBE_STEP_COUNT };
#undef US_PROBE_STEP_ID

#define US_PROBE_RECORDS 4096

#ifdef US_PROBE
void us_probe_enter(void);
void us_probe_stamp(enum us_probe_step step);
void us_probe_leave(const char *api, const char *path, size_t bytes);
#define US_PROBE_ENTER() us_probe_enter()
#define US_PROBE_STAMP(step) us_probe_stamp(US_PROBE_##step)
#define US_PROBE_LEAVE(api, path, bytes) us_probe_leave(api, path, bytes)
#else
#define US_PROBE_ENTER() ((void)0)
#define US_PROBE_STAMP(step) ((void)0)
#define US_PROBE_LEAVE(api, path, bytes) ((void)0)
#endif

#endif
