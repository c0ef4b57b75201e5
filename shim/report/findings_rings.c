/* findings_rings.c - the timeline's rings of events and spans (see
 * findings_rings.h). */
#include "findings_rings.h"
#include "hot.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"

#define EVENTS_MAX US_FINDINGS_EVENTS_MAX
#define SPANS_MAX US_FINDINGS_SPANS_MAX

/* An event and its number in the ring: the slot holds the event pushed as
 * number seq - 1 (0: none, or one being written). The writer zeroes seq,
 * writes the fields and sets seq, the fields with release stores (plain
 * moves on x86-64) so that no field is seen changed before the zero; the
 * report reads seq, the fields with acquire loads, and seq again, and keeps
 * the event only if both said its number. A writer the ring lapped (10000
 * events pushed while it wrote one) may leave its older event in the slot:
 * the report then counts the newer one as let go. */
struct event_slot {
    struct us_report_event event;
    uint64_t seq;
};

static struct event_slot *events; /* ring, allocated at load (a reset unmaps it) */
static uint64_t event_total;      /* atomic: events pushed so far */

static pthread_mutex_t span_lock = PTHREAD_MUTEX_INITIALIZER;
static struct us_report_span *spans;
static uint64_t span_total;

/* A ring: a mapping of its own, zeroed and mapped in when made
 * (MAP_POPULATE). Touched a page at a time, its first pass faulted a page
 * in every 28 findings or 85 spans, inside the calls that recorded them: on
 * H200 hosts, whose VM makes a fault cost microseconds, the shim's slow
 * small copies came in bursts (docs/performance.md, session 25). NULL when
 * the mapping fails. */
static void *ring_map(size_t count, size_t size)
{
    void *ring = mmap(NULL, count * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return ring != MAP_FAILED ? ring : NULL;
}

static void ring_unmap(void *ring, size_t count, size_t size)
{
    if (ring != NULL)
        munmap(ring, count * size);
}

US_HOT int us_findings_thread_id(void)
{
    static _Thread_local int tid __attribute__((tls_model("initial-exec")));
    if (tid == 0)
        tid = (int)syscall(SYS_gettid);
    return tid;
}

/* Both rings are made at load: the first rewritten copy of a process must
 * not pay for a ring of its own. After a reset, on first use (tests: no
 * other thread records meanwhile). */
static void events_prepare(void)
{
    if (__atomic_load_n(&events, __ATOMIC_ACQUIRE) == NULL)
        __atomic_store_n(&events, ring_map(EVENTS_MAX, sizeof *events), __ATOMIC_RELEASE);
}

/* Under span_lock. */
static void spans_prepare_locked(void)
{
    if (spans == NULL)
        spans = ring_map(SPANS_MAX, sizeof *spans);
}

void us_findings_rings_prepare(void)
{
    events_prepare();
    pthread_mutex_lock(&span_lock);
    spans_prepare_locked();
    pthread_mutex_unlock(&span_lock);
}

#define EVENT_FIELDS(X) X(row) X(rule) X(fixed) X(stream_kind) X(tid) X(src_device) X(dst_device) X(stream) \
    X(context) X(start_ns) X(held_ns) X(bytes)
#define EV_STORE(field) __atomic_store_n(&slot->field, event->field, __ATOMIC_RELEASE);
#define EV_LOAD(field) out->field = __atomic_load_n(&slot->field, __ATOMIC_ACQUIRE);

static inline void event_store(struct us_report_event *slot, const struct us_report_event *event)
{
    EVENT_FIELDS(EV_STORE)
}

static inline void event_load(struct us_report_event *out, const struct us_report_event *slot)
{
    EVENT_FIELDS(EV_LOAD)
}

US_HOT void us_findings_event_push(const struct us_report_event *event)
{
    events_prepare();
    struct event_slot *ring = __atomic_load_n(&events, __ATOMIC_ACQUIRE);
    if (ring == NULL)
        return;
    uint64_t k = __atomic_fetch_add(&event_total, 1, __ATOMIC_RELAXED);
    struct event_slot *slot = &ring[k % EVENTS_MAX];
    __atomic_store_n(&slot->seq, 0, __ATOMIC_RELAXED);
    event_store(&slot->event, event);
    __atomic_store_n(&slot->seq, k + 1, __ATOMIC_RELEASE);
}

size_t us_findings_events_held(void)
{
    uint64_t total = __atomic_load_n(&event_total, __ATOMIC_RELAXED);
    return total < EVENTS_MAX ? (size_t)total : EVENTS_MAX;
}

size_t us_findings_events_copy(struct us_report_event *out, size_t cap, uint64_t *dropped)
{
    struct event_slot *ring = __atomic_load_n(&events, __ATOMIC_ACQUIRE);
    uint64_t total = __atomic_load_n(&event_total, __ATOMIC_ACQUIRE);
    size_t n = 0;
    uint64_t from = total > cap ? total - cap : 0;
    if (ring != NULL)
        for (uint64_t k = from; k < total; k++) {
            const struct event_slot *slot = &ring[k % EVENTS_MAX];
            if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != k + 1)
                continue; /* being written, or overwritten */
            event_load(&out[n], &slot->event);
            if (__atomic_load_n(&slot->seq, __ATOMIC_RELAXED) == k + 1) /* after the acquire loads */
                n++;
        }
    *dropped = total - n;
    return n;
}

US_HOT void us_findings_span(const char *name, int device, uint64_t start_ns, uint64_t end_ns, size_t bytes)
{
    if (us_config()->mode == US_MODE_OFF)
        return;
    int tid = us_findings_thread_id();
    pthread_mutex_lock(&span_lock);
    spans_prepare_locked();
    if (spans != NULL) {
        struct us_report_span *s = &spans[span_total % SPANS_MAX];
        s->name = name != NULL ? name : "span";
        s->device = device;
        s->tid = tid;
        s->start_ns = start_ns;
        s->end_ns = end_ns;
        s->bytes = bytes;
        span_total++;
    }
    pthread_mutex_unlock(&span_lock);
}

bool us_findings_spans_copy(struct us_report *r)
{
    pthread_mutex_lock(&span_lock);
    size_t sp = span_total < SPANS_MAX ? (size_t)span_total : SPANS_MAX;
    r->spans = calloc(sp > 0 ? sp : 1, sizeof *r->spans);
    if (r->spans != NULL && spans != NULL)
        for (uint64_t k = span_total - sp; k < span_total; k++)
            r->spans[r->span_count++] = spans[k % SPANS_MAX];
    r->spans_dropped = span_total - sp;
    pthread_mutex_unlock(&span_lock);
    return r->spans != NULL;
}

void us_findings_events_reset(void)
{
    ring_unmap(events, EVENTS_MAX, sizeof *events);
    __atomic_store_n(&events, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&event_total, 0, __ATOMIC_RELAXED);
}

void us_findings_spans_reset(void)
{
    pthread_mutex_lock(&span_lock);
    ring_unmap(spans, SPANS_MAX, sizeof *spans);
    spans = NULL;
    span_total = 0;
    pthread_mutex_unlock(&span_lock);
}
