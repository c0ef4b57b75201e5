/* context.c - see context.h: the table of the contexts the shim works in,
 * and the calling thread's current device, which it answers. What the driver
 * says of contexts (current, primary, push and pop) is context_driver.c. */
#include "context.h"
#include "hot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "device_state.h"
#include "log.h"
#include "real.h"

enum { ENTRY_FREE, ENTRY_LIVE, ENTRY_RETIRED };

static struct {
    pthread_mutex_t mu;           /* inserts, retires, index reuse */
    _Atomic unsigned used;        /* entries [0, used) have been handed out at least once */
    _Atomic int state[US_MAX_CONTEXTS];
    struct us_ctx entry[US_MAX_CONTEXTS]; /* written under mu before state becomes LIVE */
    uint64_t next_id;
    us_context_forget_fn forget;
} table = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

void us_context_on_forget(us_context_forget_fn fn)
{
    pthread_mutex_lock(&table.mu);
    table.forget = fn;
    pthread_mutex_unlock(&table.mu);
}

US_HOT static const struct us_ctx *find(CUcontext handle, int device)
{
    unsigned used = atomic_load_explicit(&table.used, memory_order_acquire);
    for (unsigned i = 0; i < used; i++) {
        if (atomic_load_explicit(&table.state[i], memory_order_acquire) != ENTRY_LIVE)
            continue;
        const struct us_ctx *e = &table.entry[i];
        if (e->handle == handle && (handle != NULL || e->device == device))
            return e;
    }
    return NULL;
}

/* Under table.mu: entry i leaves the lookups; *gone: what it was. */
static void retire_locked(unsigned i, struct us_ctx *gone)
{
    atomic_store_explicit(&table.state[i], ENTRY_RETIRED, memory_order_release);
    *gone = table.entry[i];
}

void us_context_forget_gone(const struct us_ctx *gone)
{
    pthread_mutex_lock(&table.mu);
    us_context_forget_fn forget = table.forget;
    pthread_mutex_unlock(&table.mu);
    if (forget != NULL)
        forget(gone); /* outside the mutex: the fix layer takes its own locks */
    pthread_mutex_lock(&table.mu);
    if (atomic_load(&table.state[gone->index]) == ENTRY_RETIRED && table.entry[gone->index].id == gone->id)
        atomic_store_explicit(&table.state[gone->index], ENTRY_FREE, memory_order_release);
    pthread_mutex_unlock(&table.mu);
}

/* Under table.mu: when the table is full, entries whose context is gone
 * (cuCtxGetId fails or names another context: destroyed behind the shim's
 * back) are retired into gone[]; returns how many. Asking about a handle
 * that may be stale is what the driver answers CUDA_ERROR_INVALID_CONTEXT
 * to; this runs only when the table is full. */
static unsigned sweep_locked(const struct us_driver_api *api, struct us_ctx *gone, unsigned max)
{
    unsigned n = 0;
    if (api->cuCtxGetId == NULL)
        return 0;
    for (unsigned i = 0; i < US_MAX_CONTEXTS && n < max; i++) {
        struct us_ctx *e = &table.entry[i];
        if (atomic_load(&table.state[i]) != ENTRY_LIVE || e->handle == NULL || e->primary)
            continue;
        unsigned long long id = 0;
        if (api->cuCtxGetId(e->handle, &id) != CUDA_SUCCESS || id != e->driver_id)
            retire_locked(i, &gone[n++]);
    }
    return n;
}

/* A new entry; NULL when the table is full. */
static const struct us_ctx *insert(const struct us_driver_api *api, CUcontext handle, int device, bool primary,
                                   unsigned long long driver_id)
{
    struct us_ctx gone[US_MAX_CONTEXTS];
    unsigned ngone = 0;
    const struct us_ctx *made = NULL;
    pthread_mutex_lock(&table.mu);
    const struct us_ctx *known = find(handle, device);
    if (known != NULL && known->driver_id == driver_id) {
        pthread_mutex_unlock(&table.mu);
        return known; /* another thread made it */
    }
    for (int attempt = 0; attempt < 2 && made == NULL; attempt++) {
        for (unsigned i = 0; i < US_MAX_CONTEXTS; i++) {
            if (atomic_load(&table.state[i]) != ENTRY_FREE)
                continue;
            table.entry[i] = (struct us_ctx){.handle = handle, .id = table.next_id++, .driver_id = driver_id,
                                             .index = i, .device = device, .primary = primary};
            atomic_store_explicit(&table.state[i], ENTRY_LIVE, memory_order_release);
            if (i + 1 > atomic_load(&table.used))
                atomic_store_explicit(&table.used, i + 1, memory_order_release);
            made = &table.entry[i];
            break;
        }
        if (made == NULL && attempt == 0)
            ngone = sweep_locked(api, gone, US_MAX_CONTEXTS);
        if (ngone == 0)
            break;
        /* the swept entries' indices are free only once forgotten: outside the mutex */
        pthread_mutex_unlock(&table.mu);
        for (unsigned i = 0; i < ngone; i++)
            us_context_forget_gone(&gone[i]);
        ngone = 0;
        pthread_mutex_lock(&table.mu);
    }
    pthread_mutex_unlock(&table.mu);
    return made;
}

static int logged_full;

US_HOT const struct us_ctx *us_context_this(void)
{
    const struct us_driver_api *api = us_context_driver();
    const struct us_real_api *real = us_real();
    int device = -1;
    CUcontext cur = NULL;
    if (api->cuCtxGetCurrent == NULL) {
        /* no driver to ask: the runtime's current device, its primary context */
        if (real->cudaGetDevice == NULL || real->cudaGetDevice(&device) != cudaSuccess || device < 0 ||
            device >= US_MAX_DEVICES)
            return NULL;
        const struct us_ctx *e = find(NULL, device);
        return e != NULL ? e : insert(api, NULL, device, true, 0);
    }
    if (api->cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur == NULL)
        return NULL;
    unsigned long long id = 0;
    if (api->cuCtxGetId != NULL && api->cuCtxGetId(NULL, &id) != CUDA_SUCCESS)
        id = 0;
    const struct us_ctx *e = find(cur, -1);
    if (e != NULL && e->driver_id == id)
        return e;
    if (e != NULL) {
        /* the context at this address is not the one the entry was made for */
        struct us_ctx gone;
        bool retired = false;
        pthread_mutex_lock(&table.mu);
        if (atomic_load(&table.state[e->index]) == ENTRY_LIVE && table.entry[e->index].handle == cur &&
            table.entry[e->index].driver_id != id) {
            retire_locked(e->index, &gone);
            retired = true;
        }
        pthread_mutex_unlock(&table.mu);
        if (retired)
            us_context_forget_gone(&gone);
    }
    if (real->cudaGetDevice == NULL || real->cudaGetDevice(&device) != cudaSuccess || device < 0 ||
        device >= US_MAX_DEVICES)
        return NULL;
    bool primary = us_context_primary_handle(api, device) == cur;
    e = insert(api, cur, device, primary, id);
    if (e == NULL)
        us_log_once(&logged_full, US_LOG_INFO,
                    "more than %d CUDA contexts at once: copies in the others go native", US_MAX_CONTEXTS);
    return e;
}

/* What the driver said of the device count: 0 not asked (or asked before
 * cuInit), 1 one device, 2 more or unknown. Written once per state: a
 * race asks twice and writes the same answer. */
static _Atomic int devices_seen;

static bool only_one_device(const struct us_driver_api *api)
{
    int seen = atomic_load_explicit(&devices_seen, memory_order_relaxed);
    if (seen != 0)
        return seen == 1;
    int count = 0;
    CUresult rc = api->cuDeviceGetCount != NULL ? api->cuDeviceGetCount(&count) : CUDA_ERROR_NOT_FOUND;
    if (rc == CUDA_ERROR_NOT_INITIALIZED)
        return false; /* asked again later */
    seen = rc == CUDA_SUCCESS && count == 1 ? 1 : 2;
    atomic_store_explicit(&devices_seen, seen, memory_order_relaxed);
    return seen == 1;
}

/* After the host slept 2 ms cudaGetDevice took 2.0-2.2 us on an H200 host,
 * against 0.45-0.5 us for cuCtxGetCurrent (back to back 0.16-0.18 against
 * 0.10-0.11), and a small pass-through copy
 * on the legacy stream asks at every call (legacy_stream's contention): the
 * context table answers, which asks the device once per context. Only where
 * the driver has cuCtxGetId: without it an entry cannot tell a context
 * destroyed unseen from a new one made at its address, perhaps on another
 * device, and the device of a new allocation (entry_runtime/alloc.c) must be right. */
US_HOT int us_current_device(void)
{
    if (only_one_device(us_context_driver()))
        return 0;
    const struct us_ctx *ctx = us_context_driver()->cuCtxGetId != NULL ? us_context_this() : NULL;
    if (ctx != NULL)
        return ctx->device;
    const struct us_real_api *real = us_real();
    int device = -1;
    if (real->cudaGetDevice == NULL || real->cudaGetDevice(&device) != cudaSuccess)
        return -1;
    return device;
}

bool us_context_primary_active(const struct us_ctx *ctx)
{
    return ctx->primary || us_context_primary(ctx->device) != NULL;
}

const struct us_ctx *us_context_primary(int device)
{
    const struct us_driver_api *api = us_context_driver();
    if (device < 0 || device >= US_MAX_DEVICES)
        return NULL;
    if (api->cuCtxGetCurrent == NULL) {
        const struct us_ctx *e = find(NULL, device);
        return e != NULL ? e : insert(api, NULL, device, true, 0);
    }
    CUcontext handle = us_context_primary_handle(api, device);
    if (handle == NULL)
        return NULL;
    unsigned long long id = 0;
    if (api->cuCtxGetId != NULL && api->cuCtxGetId(handle, &id) != CUDA_SUCCESS)
        id = 0;
    const struct us_ctx *e = find(handle, -1);
    if (e != NULL && e->driver_id == id)
        return e;
    if (e != NULL) {
        struct us_ctx gone;
        if (us_context_retire(handle, &gone))
            us_context_forget_gone(&gone);
    }
    return insert(api, handle, device, true, id);
}

cudaError_t us_context_restore(const struct us_ctx *ctx)
{
    const struct us_driver_api *api = us_context_driver();
    if (ctx->primary || ctx->handle == NULL || api->cuCtxSetCurrent == NULL)
        return us_real()->cudaSetDevice(ctx->device);
    return api->cuCtxSetCurrent(ctx->handle) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

bool us_context_retire(CUcontext handle, struct us_ctx *gone)
{
    bool found = false;
    pthread_mutex_lock(&table.mu);
    for (unsigned i = 0; i < US_MAX_CONTEXTS && !found; i++)
        if (atomic_load(&table.state[i]) == ENTRY_LIVE && table.entry[i].handle == handle && handle != NULL) {
            retire_locked(i, gone);
            found = true;
        }
    pthread_mutex_unlock(&table.mu);
    return found;
}

bool us_context_retire_primary(int device, struct us_ctx *gone)
{
    bool found = false;
    pthread_mutex_lock(&table.mu);
    for (unsigned i = 0; i < US_MAX_CONTEXTS && !found; i++)
        if (atomic_load(&table.state[i]) == ENTRY_LIVE && table.entry[i].primary &&
            table.entry[i].device == device) {
            retire_locked(i, gone);
            found = true;
        }
    pthread_mutex_unlock(&table.mu);
    us_context_forget_primary_handle(device); /* a reset primary context may come back at another address */
    return found;
}

unsigned us_context_count(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < US_MAX_CONTEXTS; i++)
        n += atomic_load(&table.state[i]) == ENTRY_LIVE;
    return n;
}

void us_context_install(const struct us_driver_api *api)
{
    pthread_mutex_lock(&table.mu);
    for (unsigned i = 0; i < US_MAX_CONTEXTS; i++)
        atomic_store(&table.state[i], ENTRY_FREE);
    atomic_store(&table.used, 0);
    pthread_mutex_unlock(&table.mu);
    us_context_driver_install(api);
    atomic_store(&devices_seen, 0);
}
