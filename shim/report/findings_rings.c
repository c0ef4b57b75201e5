/* findings_rings.c - the timeline's rings of events and spans (see
 * findings_rings.h). */
#include "findings_rings.h"
#include "hot.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"

#define EVENTS_MAX US_FINDINGS_EVENTS_MAX
#define SPANS_MAX US_FINDINGS_SPANS_MAX

/* Both rings take pushes from any thread without a lock; a slot holds an
 * entry and its number in the ring: the entry pushed as number seq - 1 (0:
 * none, or one being written). The writer takes a number (one atomic add),
 * zeroes seq, writes the fields and sets seq, the fields with release
 * stores (plain moves on x86-64) so that no field is seen changed before the
 * zero; the report reads seq, the fields with acquire loads, and seq again,
 * and keeps the entry only if both said its number. A writer the ring lapped
 * (10000 pushes while it wrote one) may leave its older entry in the slot:
 * the report then counts the newer one as let go. The span ring had a mutex
 * of its own, taken by every rewritten copy; it no longer has. */
#define RING_STORE(field) __atomic_store_n(&slot->field, entry->field, __ATOMIC_RELEASE);
#define RING_LOAD(field) out->field = __atomic_load_n(&slot->field, __ATOMIC_ACQUIRE);

/* A ring of `max` slots of `type`, whose fields FIELDS(X) lists: defines
 * name##_ring, name##_total, name##_push, name##_held and name##_copy. */
#define SEQ_RING(name, type, max, FIELDS)                                                           \
    struct name##_slot {                                                                             \
        type entry;                                                                                  \
        uint64_t seq;                                                                                \
    };                                                                                               \
    static struct name##_slot *name##_ring; /* allocated at load (a reset unmaps it) */              \
    static uint64_t name##_total;           /* atomic: entries pushed so far */                      \
                                                                                                     \
    static inline void name##_store(type *slot, const type *entry) { FIELDS(RING_STORE) }            \
    static inline void name##_load(type *out, const type *slot) { FIELDS(RING_LOAD) }                \
                                                                                                     \
    static inline void name##_push(struct name##_slot *ring, const type *entry)                      \
    {                                                                                                \
        uint64_t k = __atomic_fetch_add(&name##_total, 1, __ATOMIC_RELAXED);                         \
        struct name##_slot *slot = &ring[k % (max)];                                                 \
        __atomic_store_n(&slot->seq, 0, __ATOMIC_RELAXED);                                           \
        name##_store(&slot->entry, entry);                                                           \
        __atomic_store_n(&slot->seq, k + 1, __ATOMIC_RELEASE);                                       \
    }                                                                                                \
                                                                                                     \
    /* the entries the ring holds: every one pushed, up to its size */                              \
    static size_t name##_held(void)                                                                  \
    {                                                                                                \
        uint64_t total = __atomic_load_n(&name##_total, __ATOMIC_RELAXED);                           \
        return total < (max) ? (size_t)total : (max);                                                \
    }                                                                                                \
                                                                                                     \
    /* the latest entries, at most cap, oldest first; *dropped: pushed and not copied */             \
    static size_t name##_copy(type *out, size_t cap, uint64_t *dropped)                              \
    {                                                                                                \
        struct name##_slot *ring = __atomic_load_n(&name##_ring, __ATOMIC_ACQUIRE);                  \
        uint64_t total = __atomic_load_n(&name##_total, __ATOMIC_ACQUIRE);                           \
        size_t n = 0;                                                                                \
        uint64_t from = total > cap ? total - cap : 0;                                               \
        if (ring != NULL)                                                                            \
            for (uint64_t k = from; k < total; k++) {                                                \
                const struct name##_slot *slot = &ring[k % (max)];                                   \
                if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != k + 1)                          \
                    continue; /* being written, or overwritten */                                    \
                name##_load(&out[n], &slot->entry);                                                  \
                if (__atomic_load_n(&slot->seq, __ATOMIC_RELAXED) == k + 1) /* after the acquire loads */ \
                    n++;                                                                             \
            }                                                                                        \
        *dropped = total - n;                                                                        \
        return n;                                                                                    \
    }

#define EVENT_FIELDS(X) X(row) X(rule) X(fixed) X(stream_kind) X(tid) X(src_device) X(dst_device) X(stream) \
    X(context) X(start_ns) X(held_ns) X(bytes)
#define SPAN_FIELDS(X) X(name) X(device) X(tid) X(start_ns) X(end_ns) X(bytes)

SEQ_RING(events, struct us_report_event, EVENTS_MAX, EVENT_FIELDS)
SEQ_RING(spans, struct us_report_span, SPANS_MAX, SPAN_FIELDS)

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
 * not pay for a ring of its own. After a reset (tests), or a mapping that
 * failed, on first use: the first ring made is kept. */
#define RING_PREPARE(name, max)                                                                       \
    static struct name##_slot *name##_prepared(void)                                                 \
    {                                                                                                \
        struct name##_slot *ring = __atomic_load_n(&name##_ring, __ATOMIC_ACQUIRE);                  \
        if (ring != NULL)                                                                            \
            return ring;                                                                             \
        struct name##_slot *made = ring_map((max), sizeof *made);                                    \
        if (made != NULL && !__atomic_compare_exchange_n(&name##_ring, &ring, made, false,           \
                                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {      \
            ring_unmap(made, (max), sizeof *made); /* another thread's came first */                \
            return ring;                                                                             \
        }                                                                                            \
        return made;                                                                                 \
    }
RING_PREPARE(events, EVENTS_MAX)
RING_PREPARE(spans, SPANS_MAX)

void us_findings_rings_prepare(void)
{
    (void)events_prepared();
    (void)spans_prepared();
}

US_HOT void us_findings_event_push(const struct us_report_event *event)
{
    struct events_slot *ring = events_prepared();
    if (ring != NULL)
        events_push(ring, event);
}

size_t us_findings_events_held(void)
{
    return events_held();
}

size_t us_findings_events_copy(struct us_report_event *out, size_t cap, uint64_t *dropped)
{
    return events_copy(out, cap, dropped);
}

US_HOT void us_findings_span(const char *name, int device, uint64_t start_ns, uint64_t end_ns, size_t bytes)
{
    if (us_config()->mode == US_MODE_OFF)
        return;
    struct spans_slot *ring = spans_prepared();
    if (ring == NULL)
        return;
    struct us_report_span span = {
        .name = name != NULL ? name : "span",
        .device = device,
        .tid = us_findings_thread_id(),
        .start_ns = start_ns,
        .end_ns = end_ns,
        .bytes = bytes,
    };
    spans_push(ring, &span);
}

bool us_findings_spans_copy(struct us_report *r)
{
    size_t held = spans_held();
    r->spans = calloc(held > 0 ? held : 1, sizeof *r->spans);
    if (r->spans == NULL)
        return false;
    r->span_count = spans_copy(r->spans, held, &r->spans_dropped);
    return true;
}

#define RING_RESET(name, max)                                                                        \
    do {                                                                                            \
        ring_unmap(name##_ring, (max), sizeof *name##_ring);                                        \
        __atomic_store_n(&name##_ring, NULL, __ATOMIC_RELEASE);                                     \
        __atomic_store_n(&name##_total, 0, __ATOMIC_RELAXED);                                       \
    } while (0)

void us_findings_events_reset(void)
{
    RING_RESET(events, EVENTS_MAX);
}

void us_findings_spans_reset(void)
{
    RING_RESET(spans, SPANS_MAX);
}
