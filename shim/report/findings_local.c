/* findings_local.c - a thread's findings at rows it met before, counted in
 * its own memory (see findings_local.h). */
#include "findings_local.h"
#include "hot.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* Slots a thread has: the rows it met last, one per slot (direct-mapped). */
#define LOCAL_SLOTS 16

/* A slot's sums have one writer, its thread, and the report reads them
 * meanwhile: both with atomic loads and stores, which are plain moves on
 * x86-64 (no read-modify-write: nobody else writes them). */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

struct us_findings_local {
    /* the key and the row: written under us_findings_lock by the slot's
     * thread, read by it without the lock and by the report with it */
    uint64_t hash;
    const char *unlocated_api;
    struct us_findings_row *row; /* NULL: empty */
    uint32_t rule;
    uint32_t row_id;
    unsigned gen;
    /* findings counted since the row was learnt (or its sums folded) */
    uint64_t count, bytes, total_ns, max_ns, fixed, observed, last_ns, devices;
    unsigned stream_kinds;
};

struct thread_rows {
    struct us_findings_local slot[LOCAL_SLOTS];
    struct thread_rows *prev, *next; /* every thread's, under the lock */
};

static _Thread_local struct thread_rows *mine __attribute__((tls_model("initial-exec")));
static struct thread_rows *threads; /* under us_findings_lock */
static unsigned local_gen = 1;      /* read atomically; changed under the lock (a reset) */

static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static bool exit_key_made;

static inline unsigned slot_of(enum us_rule_id rule, uint64_t hash, const char *unlocated_api)
{
    uint64_t k = hash ^ (uint64_t)(uintptr_t)unlocated_api ^ ((uint64_t)rule * 0x9e3779b97f4a7c15ull);
    return (unsigned)(k ^ (k >> 29)) % LOCAL_SLOTS;
}

static bool slot_live(const struct us_findings_local *s)
{
    return s->row != NULL && s->gen == __atomic_load_n(&local_gen, __ATOMIC_RELAXED);
}

US_HOT struct us_findings_local *us_findings_local_find(enum us_rule_id rule, uint64_t hash, const char *unlocated_api)
{
    struct thread_rows *t = mine;
    if (t == NULL)
        return NULL;
    struct us_findings_local *s = &t->slot[slot_of(rule, hash, unlocated_api)];
    if (s->hash != hash || s->rule != (uint32_t)rule || s->unlocated_api != unlocated_api || !slot_live(s))
        return NULL;
    return s;
}

US_HOT void us_findings_local_add(struct us_findings_local *s, const struct us_finding *f)
{
    /* the thread reads its own sums plainly: only it writes them */
    STORE(s->count, s->count + 1);
    STORE(s->bytes, s->bytes + f->bytes);
    STORE(s->total_ns, s->total_ns + f->held_ns);
    if (f->held_ns > s->max_ns)
        STORE(s->max_ns, f->held_ns);
    if (f->fixed)
        STORE(s->fixed, s->fixed + 1);
    else
        STORE(s->observed, s->observed + 1);
    STORE(s->last_ns, f->start_ns);
    unsigned kind = 1u << f->stream_kind;
    if ((s->stream_kinds & kind) == 0)
        STORE(s->stream_kinds, s->stream_kinds | kind);
    uint64_t devices = s->devices | us_finding_device_bits(f);
    if (devices != s->devices)
        STORE(s->devices, devices);
}

uint32_t us_findings_local_row_id(const struct us_findings_local *s) { return s->row_id; }

/* A slot's sums added to a row (the row itself, or the report's copy). */
static void sums_into(struct us_report_row *r, const struct us_findings_local *s)
{
    uint64_t count = LOAD(s->count);
    if (count == 0)
        return;
    r->count += count;
    r->bytes += LOAD(s->bytes);
    r->total_ns += LOAD(s->total_ns);
    uint64_t max = LOAD(s->max_ns), last = LOAD(s->last_ns);
    if (max > r->max_ns)
        r->max_ns = max;
    if (last > r->last_ns)
        r->last_ns = last;
    r->fixed += LOAD(s->fixed);
    r->observed += LOAD(s->observed);
    r->stream_kinds |= LOAD(s->stream_kinds);
    r->devices |= LOAD(s->devices);
}

/* The slot's sums into its row, and the slot emptied. Lock held, on the
 * slot's thread. */
static void fold(struct us_findings_local *s)
{
    if (slot_live(s))
        sums_into(&s->row->r, s);
    *s = (struct us_findings_local){0};
}

/* A thread that ends: its sums into the rows. */
static void thread_ends(void *arg)
{
    struct thread_rows *t = arg;
    us_findings_lock();
    for (int i = 0; i < LOCAL_SLOTS; i++)
        fold(&t->slot[i]);
    if (t->prev != NULL)
        t->prev->next = t->next;
    else
        threads = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    us_findings_unlock();
    mine = NULL; /* a finding in a later destructor makes a new one */
    free(t);
}

static void make_exit_key(void) { exit_key_made = pthread_key_create(&exit_key, thread_ends) == 0; }

/* The calling thread's slots, made and listed on first use. Lock held. */
static struct thread_rows *thread_rows_locked(void)
{
    if (mine != NULL)
        return mine;
    pthread_once(&exit_key_once, make_exit_key);
    if (!exit_key_made)
        return NULL; /* its sums could not be kept past its end */
    struct thread_rows *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    if (pthread_setspecific(exit_key, t) != 0) {
        free(t);
        return NULL;
    }
    t->next = threads;
    if (threads != NULL)
        threads->prev = t;
    threads = t;
    mine = t;
    return t;
}

void us_findings_local_learn(struct us_findings_row *row, enum us_rule_id rule, uint64_t hash,
                             const char *unlocated_api)
{
    struct thread_rows *t = thread_rows_locked();
    if (t == NULL)
        return;
    struct us_findings_local *s = &t->slot[slot_of(rule, hash, unlocated_api)];
    fold(s);
    *s = (struct us_findings_local){
        .hash = hash,
        .unlocated_api = unlocated_api,
        .row = row,
        .rule = (uint32_t)rule,
        .row_id = row->r.id,
        .gen = __atomic_load_n(&local_gen, __ATOMIC_RELAXED),
    };
}

void us_findings_local_add_to(struct us_report_row *rows, size_t n)
{
    if (threads == NULL)
        return;
    uint32_t *index = malloc(US_FINDINGS_ROW_IDS * sizeof *index); /* row id -> its copy, n when none */
    if (index == NULL)
        return;
    for (size_t i = 0; i < US_FINDINGS_ROW_IDS; i++)
        index[i] = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        if (rows[i].id < US_FINDINGS_ROW_IDS)
            index[rows[i].id] = (uint32_t)i;
    for (const struct thread_rows *t = threads; t != NULL; t = t->next)
        for (int k = 0; k < LOCAL_SLOTS; k++) {
            const struct us_findings_local *s = &t->slot[k];
            if (slot_live(s) && s->row_id < US_FINDINGS_ROW_IDS && index[s->row_id] < n)
                sums_into(&rows[index[s->row_id]], s);
        }
    free(index);
}

void us_findings_local_reset(void) { __atomic_fetch_add(&local_gen, 1, __ATOMIC_RELAXED); }
