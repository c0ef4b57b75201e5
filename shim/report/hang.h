/* hang.h - the hang explainer (options hang_report_s, hang_sites): when a CUDA
 * call the shim intercepted has not returned for that many seconds, the log
 * says once which threads are inside which CUDA calls, since when and from
 * where, which host functions are running, and the likely cause and fix.
 *
 * On by default (60 s). Off, it costs a call one load. On, each thread
 * publishes its current call in a record of its own (registered once in a
 * list that only grows): a few stores, no clock read; with hang_sites also
 * the call's site and start. A watchdog thread, started with the shim
 * (us_hang_start), reads the records. No lock on the way of a call. */
#ifndef UNSTALL_HANG_H
#define UNSTALL_HANG_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

/* One call's publication, from us_hang_enter to us_hang_leave. */
struct us_hang_mark {
    bool on;
};

/* Whether the explainer is on (hang_report_s > 0, mode not off). */
bool us_hang_on(void);

/* At the shim's start: the watchdog started now where the explainer is on,
 * so that no program call pays for it (the first watched call starts it
 * otherwise). */
void us_hang_start(void);

/* Around a CUDA call that may block: api names it; stream, where the call
 * has one (legacy is true for the legacy default stream). */
void us_hang_enter(struct us_hang_mark *m, const char *api, cudaStream_t stream, bool legacy);
void us_hang_leave(struct us_hang_mark *m);

/* cudaLaunchHostFunc while on: the function to pass to the real call and
 * its argument, a trampoline that notes when the program's host function
 * runs (the report names running ones). false: pass the program's own. */
bool us_hang_wrap_host_fn(cudaHostFn_t fn, void *data, cudaStream_t stream, cudaHostFn_t *out_fn,
                          void **out_data);

/* The real launch failed: the record taken for it is free again. */
void us_hang_unwrap_host_fn(void *wrapped_data);

/* Tests: the report text now, as the watchdog would print it (hung_for_ns:
 * the longest call considered hung), into out. */
void us_hang_describe(uint64_t hung_for_ns, char *out, size_t size);

#endif
