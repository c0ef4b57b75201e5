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

static struct us_report_event *events; /* ring, allocated at first use; under us_findings_lock */
static uint64_t event_total;

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
 * not pay for a ring of its own. After a reset, on first use. */
static void events_prepare(void)
{
    if (events == NULL)
        events = ring_map(EVENTS_MAX, sizeof *events);
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

US_HOT void us_findings_event_push(const struct us_report_event *event)
{
    events_prepare();
    if (events != NULL) {
        events[event_total % EVENTS_MAX] = *event;
        event_total++;
    }
}

size_t us_findings_events_held(uint64_t *dropped)
{
    size_t ev = event_total < EVENTS_MAX ? (size_t)event_total : EVENTS_MAX;
    *dropped = event_total - ev;
    return ev;
}

size_t us_findings_events_copy(struct us_report_event *out)
{
    uint64_t dropped;
    size_t ev = us_findings_events_held(&dropped);
    size_t n = 0;
    if (events != NULL)
        for (uint64_t k = event_total - ev; k < event_total; k++)
            out[n++] = events[k % EVENTS_MAX];
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
    events = NULL;
    event_total = 0;
}

void us_findings_spans_reset(void)
{
    pthread_mutex_lock(&span_lock);
    ring_unmap(spans, SPANS_MAX, sizeof *spans);
    spans = NULL;
    span_total = 0;
    pthread_mutex_unlock(&span_lock);
}
