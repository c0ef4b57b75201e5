/* lifecycle.h - the process's life as the shim sees it, in one place: what
 * runs at the shim's start, in a forked child and at exit, and which module
 * does it. A module of a higher layer registers its part here as a function
 * (base calls nothing above it); what a phase does is listed below, so that
 * a reader finds the whole life of the process on one page.
 *
 * Load (constructors, in no order the shim relies on): the clocks' common
 *   instant for the timeline (report/findings_collect.c), the pointer table's
 *   owner process (base/ptrtable.c), CUDA_MODULE_LOADING for eager_modules
 *   (base/module_loading.c), the report layer's start hook registered
 *   (report/at_exit.c).
 * Start (us_state_init_slow: once, at the first intercepted call): the
 *   configuration loaded (config.c), the fork hook of state.c registered, the
 *   shim's own pages mapped in (prefault.c), then the start hooks in the order
 *   registered: the report layer's (call-site capture set up, the endings'
 *   thread and signal actions, the hang watchdog). Only when the shim is
 *   active (not disabled).
 * Fork, in the child: us_lifecycle_in_forked_child is set, then the fork
 *   hooks run in the order registered: state.c's (the child passes through,
 *   CUDA being undefined in it until exec; the pointer table dropped). The
 *   grower and the host-copy workers read the flag: their threads do not
 *   exist in the child. Nothing runs in the parent.
 * Exit: the grower's atexit handler (registered when its thread starts) lets
 *   the allocation in progress finish and starts no other (fix/grower.c: the
 *   runtime may be unloading); the destructors then: the report at exit
 *   (report/at_exit.c; no CUDA call), the grower's exiting flag, a probe
 *   build's step records (base/probe.c). A termination signal's report is
 *   written by the endings' thread instead, which then ends the process with
 *   that signal (report/endings.c, docs/findings.md). */
#ifndef UNSTALL_LIFECYCLE_H
#define UNSTALL_LIFECYCLE_H

/* Run fn at the shim's start, after the hooks registered before it. At most
 * US_LIFECYCLE_HOOKS per phase; false when full (said in the log). */
#define US_LIFECYCLE_HOOKS 8
_Bool us_lifecycle_on_start(void (*fn)(void));

/* Run fn in the child of every later fork, after the hooks registered
 * before it. */
_Bool us_lifecycle_on_fork_child(void (*fn)(void));

/* True in the child of a fork made after the first us_lifecycle_watch_forks
 * or us_lifecycle_on_fork_child (state.c calls it at the shim's start): the
 * shim's threads do not exist there. One relaxed load for the hot paths. */
extern _Atomic _Bool us_lifecycle_in_forked_child;

/* Set us_lifecycle_in_forked_child in the child of every later fork (once;
 * a module that starts threads calls it before its first). */
void us_lifecycle_watch_forks(void);

/* The start hooks, in order (state.c, at the start). */
void us_lifecycle_run_start(void);

#endif
