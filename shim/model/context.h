/* context.h - the contexts the shim works in: a table with an entry per
 * context it has met, which keys the resources it makes there, and the
 * calling thread's current device, which the table answers. What the driver
 * says of contexts (current, primary, push and pop, whether two compete for
 * the compute engine) is context_driver.h. */
#ifndef UNSTALL_CONTEXT_H
#define UNSTALL_CONTEXT_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "context_driver.h"

/* The calling thread's current device (the runtime's ordinal), or -1: its
 * current context's, from the table below; cudaGetDevice's answer when no
 * context is current or the table cannot say. In a process that sees one
 * device, 0 without a driver call: every context is then on device 0, and
 * cudaGetDevice answers 0 with none current. The two calls the table needs
 * (cuCtxGetCurrent, cuCtxGetId) were the largest step of a small pass-through
 * copy after the host was idle 2 ms: 1.0 us of the shim's own 3.9 on an H200
 * host (every legacy-stream copy, launch and memset asks; tools/bench/probe.sh
 * times the steps). The driver is asked the device count once. */
int us_current_device(void);

/* --- the contexts the shim works in ------------------------------------------
 *
 * Every resource the shim makes for a copy (lanes, slot events, timing
 * events) belongs to the context the copy is issued in: a stream or event of
 * another context of the same device is an invalid handle there. The table
 * below gives each context the shim has met an entry: a process-unique id
 * that keys the resources (a context made later at the address of a
 * destroyed one gets another id, so nothing of the old one is ever found
 * again), and a small index for per-context arrays (slot events).
 *
 * Lookups are lock-free (a scan of the entries in use; a process has a few
 * contexts); an insert takes a mutex (once per context). A rewritten copy
 * pays one cuCtxGetCurrent and one cuCtxGetId (its current context's id: a
 * context destroyed behind the shim's back, by a cuCtxDestroy it cannot see,
 * and made again at the same address is found stale here). */

#define US_MAX_CONTEXTS 64

struct us_ctx {
    CUcontext handle;             /* NULL: no driver to ask; stands for `device`'s primary context */
    uint64_t id;                  /* unique in the process */
    unsigned long long driver_id; /* cuCtxGetId at first sight; 0: unknown */
    unsigned index;               /* < US_MAX_CONTEXTS */
    int device;
    bool primary;
};

/* Called with a copy of an entry whose context is gone (destroyed, or found
 * stale), after it left the lookups and before its index is used again: the
 * fix layer forgets what it made there (chain.c registers it). */
typedef void (*us_context_forget_fn)(const struct us_ctx *gone);
void us_context_on_forget(us_context_forget_fn fn);

/* The entry of the calling thread's current context, made on first sight.
 * NULL: no context is current yet (the runtime will make one at the native
 * call), the table is full, or the device is out of range: decline. Without
 * a driver to ask (unit tests) the entry of the current device's primary
 * context. */
const struct us_ctx *us_context_this(void);

/* The entry of `device`'s primary context, when it is active (NULL when
 * not): the context of a stream of another device than the caller's. */
const struct us_ctx *us_context_primary(int device);

/* Whether the primary context of ctx's device is active: ctx is it, or the
 * program made it active too. Where it is not, the shim allocates nothing in
 * it (the staging pool's memory lives there: staging.h). */
bool us_context_primary_active(const struct us_ctx *ctx);

/* Makes `ctx` current again on the calling thread after a cudaSetDevice
 * switched to another device's primary context: cudaSetDevice back for a
 * primary context, cuCtxSetCurrent for a created one. */
cudaError_t us_context_restore(const struct us_ctx *ctx);

/* cuCtxDestroy of `handle` (the driver layer), or cudaDeviceReset of a
 * device (its primary context): the entry leaves the lookups before the real
 * call (a context made meanwhile at the same address gets a new entry), then
 * us_context_forget_gone after it. false: the shim never worked there. */
bool us_context_retire(CUcontext handle, struct us_ctx *gone);
bool us_context_retire_primary(int device, struct us_ctx *gone);
void us_context_forget_gone(const struct us_ctx *gone);

/* Entries in use (tests). */
unsigned us_context_count(void);

/* Replace the driver functions (tests); NULL: resolve from libcuda again.
 * Also forgets the primary contexts remembered and the table. */
void us_context_install(const struct us_driver_api *api);

#endif
