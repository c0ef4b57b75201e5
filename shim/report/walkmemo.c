/* walkmemo.c - the stack walks a thread repeats, reused while its stack still
 * holds them (walkmemo.h). */
#include "walkmemo.h"
#include "hot.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "unwinder.h"

#define ENTRIES 4 /* walks remembered per thread, and keys that missed once */

struct entry {
    struct us_walkmemo_key key;
    int rets; /* 0: empty */
    const void *ret[US_WALKMEMO_MAX_RETS];
    uintptr_t slot[US_WALKMEMO_MAX_RETS]; /* where each return address sits */
    void *frames[US_WALKMEMO_MAX_FRAMES];
    int depth;
};

struct memo {
    uintptr_t stack_lo, stack_hi; /* the thread's own stack; lo == hi: unknown */
    bool stack_asked;
    unsigned next_entry, next_missed;
    struct us_walkmemo_key missed[ENTRIES];
    struct entry entry[ENTRIES];
};

static _Thread_local struct memo *mine __attribute__((tls_model("initial-exec")));
static _Thread_local bool busy __attribute__((tls_model("initial-exec")));
static _Thread_local bool eager __attribute__((tls_model("initial-exec"))); /* us_walkmemo_learn_next */
/* each with its own model: an attribute after a declarator list is the last
 * one's, and hits++ on a memo's answer went through __tls_get_addr */
static _Thread_local unsigned long hits __attribute__((tls_model("initial-exec")));
static _Thread_local unsigned long learnt __attribute__((tls_model("initial-exec")));

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t free_at_exit;
static bool key_made;

/* At the thread's exit. Another key's destructor may still capture on this
 * thread after it (a library's clean-up calling CUDA): it finds no memo and
 * makes a new one, which the next round of destructors frees. */
static void forget(void *memo)
{
    if (mine == memo)
        mine = NULL;
    free(memo);
}

static void init(void)
{
    key_made = pthread_key_create(&free_at_exit, forget) == 0;
}

static bool same_key(const struct us_walkmemo_key *a, const struct us_walkmemo_key *b)
{
    return a->frame == b->frame && a->caller == b->caller && a->self_lo == b->self_lo && a->self_hi == b->self_hi &&
           a->max_depth == b->max_depth;
}

/* Whether the slots still hold the return addresses. They lie between the
 * capture's frame and the top of the thread's stack (checked when learnt),
 * live memory of this thread; the sanitizers would call reading another
 * frame's slot an overflow. */
__attribute__((no_sanitize_address, no_sanitize("thread"))) static bool slots_hold(const void *const *rets,
                                                                                 const uintptr_t *slot, int n)
{
    for (int i = 0; i < n; i++)
        if (*(const void *const *)slot[i] != rets[i])
            return false;
    return true;
}

US_HOT bool us_walkmemo_find(const struct us_walkmemo_key *key, void **frames, int *depth)
{
#if defined(__x86_64__)
    struct memo *m = mine;
    if (m == NULL || busy)
        return false;
    busy = true; /* a signal handler's capture walks meanwhile */
    bool found = false;
    for (unsigned i = 0; i < ENTRIES && !found; i++) {
        const struct entry *e = &m->entry[i];
        if (e->rets > 0 && same_key(&e->key, key) && slots_hold(e->ret, e->slot, e->rets)) {
            memcpy(frames, e->frames, (size_t)e->depth * sizeof *frames);
            *depth = e->depth;
            hits++;
            found = true;
        }
    }
    busy = false;
    return found;
#else
    (void)key, (void)frames, (void)depth;
    return false;
#endif
}

/* --- learning ------------------------------------------------------------------------ */

static struct memo *memo_of_thread(void)
{
    if (mine == NULL) {
        pthread_once(&once, init);
        mine = calloc(1, sizeof *mine);
        if (mine != NULL && key_made)
            (void)pthread_setspecific(free_at_exit, mine);
    }
    return mine;
}

/* The thread's own stack, asked once per thread. */
static bool stack_known(struct memo *m)
{
    if (!m->stack_asked) {
        m->stack_asked = true;
        pthread_attr_t attr;
        void *addr;
        size_t size;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
                m->stack_lo = (uintptr_t)addr;
                m->stack_hi = (uintptr_t)addr + size;
            }
            pthread_attr_destroy(&attr);
        }
    }
    return m->stack_lo < m->stack_hi;
}

void us_walkmemo_prepare(void)
{
#if defined(__x86_64__)
    /* the stack's bounds: for the main thread, where the shim usually
     * starts, glibc reads /proc/self/maps (90 us on the build machine) */
    struct memo *m = memo_of_thread();
    if (m != NULL)
        (void)stack_known(m);
#endif
}

/* The second miss of a key learns it; the first is noted. */
static bool missed_before(struct memo *m, const struct us_walkmemo_key *key)
{
    for (unsigned i = 0; i < ENTRIES; i++)
        if (same_key(&m->missed[i], key))
            return true;
    m->missed[m->next_missed++ % ENTRIES] = *key;
    return false;
}

__attribute__((noinline)) void us_walkmemo_learn(const struct us_walkmemo_key *key, void *const *rets, int n,
                                                 void *const *frames, int depth)
{
#if defined(__x86_64__)
    bool now = eager;
    eager = false;
    if (n < 1 || n > US_WALKMEMO_MAX_RETS || depth < 0 || depth > US_WALKMEMO_MAX_FRAMES || rets[0] != key->caller || busy)
        return;
    busy = true;
    struct memo *m = memo_of_thread();
    if (m == NULL || !(missed_before(m, key) || now) || !stack_known(m) || key->frame < m->stack_lo ||
        key->frame >= m->stack_hi) {
        busy = false;
        return;
    }
    uintptr_t slot[US_WALKMEMO_MAX_RETS];
    bool ok = us_unwind_slots(rets, n, slot) == n;
    for (int i = 0; ok && i < n; i++) /* above the capture's frame, in order, on this stack */
        ok = slot[i] > key->frame && slot[i] + sizeof(void *) <= m->stack_hi && (i == 0 || slot[i] > slot[i - 1]);
    if (ok && slots_hold((const void *const *)rets, slot, n)) {
        struct entry *e = &m->entry[m->next_entry++ % ENTRIES];
        e->key = *key;
        memcpy(e->ret, rets, (size_t)n * sizeof *rets);
        memcpy(e->slot, slot, (size_t)n * sizeof *slot);
        memcpy(e->frames, frames, (size_t)depth * sizeof *frames);
        e->depth = depth;
        e->rets = n;
        learnt++;
    }
    busy = false;
#else
    (void)key, (void)rets, (void)n, (void)frames, (void)depth;
#endif
}

void us_walkmemo_learn_next(void)
{
    eager = true;
}

unsigned long us_walkmemo_hits(void)
{
    return hits;
}

unsigned long us_walkmemo_learnt(void)
{
    return learnt;
}
