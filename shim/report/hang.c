/* hang.c - see hang.h.
 *
 * A thread's record is written only by that thread, the watchdog reads it.
 * Entering a call costs a few stores: the call's number (`seq`), its stream
 * and api; the watchdog notes when it first saw each call number inside a
 * call, so that no clock is read on the way of a call (since when is known
 * to a watch period). With hang_sites, the thread also captures its call
 * site and the time: `gen` is odd while it rewrites them, so a reader that
 * sees it change (or odd) skips that record this round. Host-function records live
 * in a list that only grows; one whose function returned is taken again by
 * a later launch (compare-and-swap on its state), so a program launching
 * host functions in a loop keeps a handful. */
#include "hang.h"
#include "hot.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "callsite.h"
#include "config.h"
#include "log.h"
#include "real.h"
#include "state.h"
#include "thread.h"

/* How often the watchdog looks: 200 ms for a limit of up to 10 s, else 1 s
 * (the default limit, 60 s, needs no finer look). */
#define WATCH_PERIOD_MS(limit_s) ((limit_s) <= 10 ? 200 : 1000)

struct hang_thread {
    _Atomic(const char *) api; /* NULL: not inside a call */
    _Atomic uint64_t seq;      /* calls entered: which call api is about */
    _Atomic(cudaStream_t) stream;
    _Atomic bool legacy;
    /* hang_sites: */
    _Atomic uint64_t since_ns;
    _Atomic unsigned gen; /* odd while the site changes */
    struct us_site site;
    long tid;
    /* the watchdog's own: the call it last saw this thread in, and since when */
    uint64_t seen_seq, seen_since_ns;
    struct hang_thread *next;
};

enum { HOST_FN_FREE, HOST_FN_QUEUED, HOST_FN_RUNNING };

struct hang_host_fn {
    _Atomic int state;
    cudaHostFn_t fn;
    void *data;
    cudaStream_t stream;
    _Atomic uint64_t started_ns;
    struct us_site site; /* where it was launched */
    struct hang_host_fn *next;
};

static _Atomic(struct hang_thread *) threads;
static _Atomic(struct hang_host_fn *) host_fns;
static __thread struct hang_thread *self __attribute__((tls_model("initial-exec")));
static atomic_int armed = -1; /* -1: not read from the configuration yet */
static bool sites;             /* hang_sites, read when armed */
static unsigned limit_s;       /* hang_report_s, read when armed: the watchdog reads no option */
static pthread_once_t watchdog_once = PTHREAD_ONCE_INIT;

static pthread_once_t arm_once = PTHREAD_ONCE_INIT;

static void arm(void)
{
    const struct us_config *cfg = us_config();
    sites = cfg->hang_sites;
    limit_s = cfg->hang_report_s;
    atomic_store_explicit(&armed, cfg->hang_report_s > 0 && cfg->mode != US_MODE_OFF, memory_order_release);
}

US_HOT bool us_hang_on(void)
{
    int a = atomic_load_explicit(&armed, memory_order_acquire); /* sites and limit_s with it */
    if (__builtin_expect(a < 0, 0)) {
        pthread_once(&arm_once, arm);
        a = atomic_load_explicit(&armed, memory_order_acquire);
    }
    return a != 0;
}

/* --- the report ------------------------------------------------------------------------- */

static int append(char *out, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append(char *out, size_t size, size_t *len, const char *fmt, ...)
{
    if (*len >= size)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
    return n;
}

static const char *stream_text(cudaStream_t s, bool legacy, char *buf, size_t size)
{
    if (legacy)
        snprintf(buf, size, "the legacy default stream");
    else if (s == cudaStreamPerThread)
        snprintf(buf, size, "the per-thread default stream");
    else if (s == NULL)
        snprintf(buf, size, "no stream");
    else
        snprintf(buf, size, "stream %p", (void *)s);
    return buf;
}

void us_hang_describe(uint64_t hung_for_ns, char *out, size_t size)
{
    size_t len = 0;
    uint64_t now = us_now_ns();
    out[0] = '\0';
    append(out, size, &len,
           "hang: a CUDA call has not returned for %.1f s (hang_report_s). Threads inside CUDA calls that unstall "
           "intercepts (copies, synchronizations, allocations, kernel launches; a thread blocked in another one, "
           "cudaSetDevice for one, is not listed):\n",
           (double)hung_for_ns / 1e9);
    bool legacy_waiter = false, launch_waiter = false;
    for (struct hang_thread *t = atomic_load(&threads); t != NULL; t = t->next) {
        unsigned g0 = atomic_load_explicit(&t->gen, memory_order_acquire);
        const char *api = atomic_load_explicit(&t->api, memory_order_acquire);
        uint64_t seq = atomic_load_explicit(&t->seq, memory_order_acquire);
        if (api == NULL || (g0 & 1u) != 0)
            continue;
        uint64_t since = sites ? atomic_load_explicit(&t->since_ns, memory_order_acquire)
                         : seq == t->seen_seq ? t->seen_since_ns : now;
        char site[1024] = "", stream[64];
        if (sites)
            us_callsite_line_source(&t->site, 6, site, sizeof site);
        cudaStream_t s = atomic_load_explicit(&t->stream, memory_order_relaxed);
        bool legacy = atomic_load_explicit(&t->legacy, memory_order_relaxed);
        if (atomic_load_explicit(&t->gen, memory_order_acquire) != g0 ||
            atomic_load_explicit(&t->seq, memory_order_acquire) != seq)
            continue; /* it left the call meanwhile */
        append(out, size, &len, "  thread %ld: %s on %s, for %.1f s%s%s\n", t->tid, api,
               stream_text(s, legacy, stream, sizeof stream), (double)(now - since) / 1e9, sites ? ", at " : "",
               site);
        legacy_waiter |= legacy;
        launch_waiter |= strstr(api, "Launch") != NULL;
    }
    int running = 0;
    for (struct hang_host_fn *h = atomic_load(&host_fns); h != NULL; h = h->next) {
        if (atomic_load(&h->state) != HOST_FN_RUNNING)
            continue;
        running++;
        struct us_frame fr;
        char fn[300], site[1024], stream[64];
        /* the lookup takes return addresses (it looks one byte back): the
         * function's first byte is what names it */
        us_callsite_symbolize_source((const char *)(uintptr_t)h->fn + 1, &fr);
        fr.offset = 0; /* the function itself, not a place in it */
        us_callsite_frame_text(&fr, fn, sizeof fn);
        site[0] = '\0';
        if (sites)
            us_callsite_line_source(&h->site, 6, site, sizeof site);
        if (running == 1)
            append(out, size, &len, "Host functions running (cudaLaunchHostFunc):\n");
        append(out, size, &len, "  %s on %s, running for %.1f s%s%s\n", fn,
               stream_text(h->stream, false, stream, sizeof stream),
               (double)(now - atomic_load(&h->started_ns)) / 1e9, sites ? ", launched at " : "", site);
    }
    append(out, size, &len, "Likely cause: ");
    if (running > 0) {
        append(out, size, &len,
               "a host function has been running and waits for something, and every stream queued behind it waits "
               "too: its own stream, streams that wait for an event recorded after it%s.%s\n",
               legacy_waiter ? ", and the legacy default stream, which waits for every blocking stream of its device"
                             : "",
               launch_waiter ? " A kernel launch is stuck as well: a kernel's first launch loads its module (lazy "
                               "loading), which can wait for the device's work in flight."
                             : "");
        append(out, size, &len,
               "Fix: a host function must not wait for work another thread has yet to submit to CUDA: signal what it "
               "waits for before launching it, or wait on the host outside CUDA; use non-blocking streams "
               "(cudaStreamNonBlocking) so that the legacy stream does not join the wait%s.",
               launch_waiter ? "; set eager_modules=1 (CUDA_MODULE_LOADING=EAGER) so that a first launch loads nothing"
                             : "");
    } else if (legacy_waiter) {
        append(out, size, &len,
               "a call on the legacy default stream waits for every blocking stream of its device, and one of them "
               "does not finish.\nFix: find what that stream waits for (an event never recorded, a kernel that "
               "spins); use non-blocking streams so that the legacy stream does not join the wait.");
    } else {
        append(out, size, &len,
               "the GPU work these calls wait for does not finish (a kernel that spins, an event waited for that is "
               "never recorded, another process holding the device).\nFix: compute-sanitizer or cuda-gdb show what "
               "runs on the device.");
    }
    append(out, size, &len, "\n");
}

/* --- the watchdog ----------------------------------------------------------------------- */

static void *watchdog(void *arg)
{
    (void)arg;
    uint64_t limit = (uint64_t)limit_s * 1000000000ull;
    struct timespec period = {WATCH_PERIOD_MS(limit_s) / 1000, (WATCH_PERIOD_MS(limit_s) % 1000) * 1000000L};
    for (;;) {
        nanosleep(&period, NULL);
        uint64_t now = us_now_ns(), oldest = 0;
        for (struct hang_thread *t = atomic_load(&threads); t != NULL; t = t->next) {
            uint64_t seq = atomic_load_explicit(&t->seq, memory_order_acquire);
            if (atomic_load_explicit(&t->api, memory_order_acquire) == NULL)
                continue;
            if (seq != t->seen_seq) { /* a call not seen before: it began within the last period */
                t->seen_seq = seq;
                t->seen_since_ns = now;
            }
            uint64_t since = sites ? atomic_load_explicit(&t->since_ns, memory_order_acquire) : t->seen_since_ns;
            if (now > since && now - since > oldest)
                oldest = now - since;
        }
        if (oldest < limit)
            continue;
        char *text = malloc(16384);
        if (text == NULL)
            return NULL;
        us_hang_describe(oldest, text, 16384);
        for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n"))
            us_log(US_LOG_WARN, "%s", line);
        free(text);
        return NULL; /* once per process */
    }
}

/* The explanation names call sites with file:line, and libdw's line-table
 * reading takes much stack (a 256 KiB stack overflowed in it under TSan): as
 * much as the report at exit has on the main thread's, reserved, not used. */
#define WATCHDOG_STACK_BYTES ((size_t)8 << 20)

static void start_watchdog(void)
{
    if (us_thread_start(watchdog, NULL, WATCHDOG_STACK_BYTES, "unstall-hang") != 0)
        us_log(US_LOG_WARN, "hang_report_s: the watchdog thread could not start; no hang will be explained");
}

/* --- publication ------------------------------------------------------------------------ */

void us_hang_start(void)
{
    if (us_hang_on())
        pthread_once(&watchdog_once, start_watchdog);
}

static struct hang_thread *my_record(void)
{
    if (self != NULL)
        return self;
    struct hang_thread *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->tid = (long)syscall(SYS_gettid);
    struct hang_thread *head = atomic_load(&threads);
    do
        t->next = head;
    while (!atomic_compare_exchange_weak(&threads, &head, t));
    self = t;
    return t;
}

US_HOT void us_hang_enter(struct us_hang_mark *m, const char *api, cudaStream_t stream, bool legacy)
{
    m->on = false;
    if (!us_hang_on())
        return;
    struct hang_thread *t = self;
    if (__builtin_expect(t == NULL, 0)) { /* this thread's first watched call */
        pthread_once(&watchdog_once, start_watchdog);
        t = my_record();
    }
    if (t == NULL || atomic_load_explicit(&t->api, memory_order_relaxed) != NULL)
        return; /* nested (a copy inside a watched call): the outer call stands */
    atomic_store_explicit(&t->stream, stream, memory_order_relaxed);
    atomic_store_explicit(&t->legacy, legacy, memory_order_relaxed);
    atomic_store_explicit(&t->seq, atomic_load_explicit(&t->seq, memory_order_relaxed) + 1, memory_order_relaxed);
    if (sites) {
        atomic_fetch_add_explicit(&t->gen, 1, memory_order_acq_rel); /* odd: changing */
        us_site_capture(&t->site);
        atomic_store_explicit(&t->since_ns, us_now_ns(), memory_order_release);
        atomic_fetch_add_explicit(&t->gen, 1, memory_order_acq_rel); /* even: readable */
    }
    atomic_store_explicit(&t->api, api, memory_order_release);
    m->on = true;
}

US_HOT void us_hang_leave(struct us_hang_mark *m)
{
    if (!m->on)
        return;
    atomic_store_explicit(&self->api, NULL, memory_order_release);
    m->on = false;
}

/* --- host functions --------------------------------------------------------------------- */

static void CUDART_CB host_fn_trampoline(void *arg)
{
    struct hang_host_fn *h = arg;
    cudaHostFn_t fn = h->fn;
    void *data = h->data;
    atomic_store(&h->started_ns, us_now_ns());
    atomic_store(&h->state, HOST_FN_RUNNING);
    fn(data);
    atomic_store(&h->state, HOST_FN_FREE);
}

bool us_hang_wrap_host_fn(cudaHostFn_t fn, void *data, cudaStream_t stream, cudaHostFn_t *out_fn, void **out_data)
{
    if (!us_hang_on() || fn == NULL)
        return false;
    /* a captured host function runs at every replay of its graph: not ours to track */
    const struct us_real_api *real = us_real();
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (real->cudaStreamIsCapturing == NULL || real->cudaStreamIsCapturing(stream, &st) != cudaSuccess ||
        st != cudaStreamCaptureStatusNone)
        return false;
    struct hang_host_fn *h = NULL;
    for (struct hang_host_fn *r = atomic_load(&host_fns); r != NULL && h == NULL; r = r->next) {
        int expected = HOST_FN_FREE;
        if (atomic_compare_exchange_strong(&r->state, &expected, HOST_FN_QUEUED))
            h = r;
    }
    if (h == NULL) {
        h = calloc(1, sizeof *h);
        if (h == NULL)
            return false;
        atomic_store(&h->state, HOST_FN_QUEUED);
        struct hang_host_fn *head = atomic_load(&host_fns);
        do
            h->next = head;
        while (!atomic_compare_exchange_weak(&host_fns, &head, h));
    }
    h->fn = fn;
    h->data = data;
    h->stream = stream;
    if (sites)
        us_site_capture(&h->site);
    *out_fn = host_fn_trampoline;
    *out_data = h;
    return true;
}

void us_hang_unwrap_host_fn(void *wrapped_data)
{
    struct hang_host_fn *h = wrapped_data;
    atomic_store(&h->state, HOST_FN_FREE);
}
