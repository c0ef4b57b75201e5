/* spill.c - see spill.h.
 *
 * Buffers are rounded up to 2 MiB (a huge page) and listed while kept; a
 * take reuses the smallest kept buffer that is large enough, else maps a new
 * one, first unmapping kept buffers (smallest first) while the new one would
 * pass spill_max. */
#include "spill.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "config.h"
#include "log.h"

#define SPILL_ROUND ((size_t)2 << 20)

struct us_spill {
    struct us_spill *next; /* in the kept list */
    char *memory;
    size_t bytes;
};

static struct {
    pthread_mutex_t mu;
    struct us_spill *kept; /* given back, pages in: reused first */
    size_t mapped, taken;
} spills = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int logged_budget, logged_map;

static void unmap(struct us_spill *s)
{
    munmap(s->memory, s->bytes);
    spills.mapped -= s->bytes;
    free(s);
}

/* Under spills.mu: the smallest kept buffer of at least `bytes`, out of the list. */
static struct us_spill *reuse_locked(size_t bytes)
{
    struct us_spill **best = NULL;
    for (struct us_spill **at = &spills.kept; *at != NULL; at = &(*at)->next)
        if ((*at)->bytes >= bytes && (best == NULL || (*at)->bytes < (*best)->bytes))
            best = at;
    if (best == NULL)
        return NULL;
    struct us_spill *s = *best;
    *best = s->next;
    return s;
}

/* Under spills.mu: unmaps kept buffers, smallest first, until `bytes` more
 * fit spill_max; false if they cannot. */
static bool make_room_locked(size_t bytes, size_t max)
{
    if (bytes > max)
        return false;
    while (spills.mapped > max - bytes) {
        struct us_spill **smallest = NULL;
        for (struct us_spill **at = &spills.kept; *at != NULL; at = &(*at)->next)
            if (smallest == NULL || (*at)->bytes < (*smallest)->bytes)
                smallest = at;
        if (smallest == NULL)
            return false;
        struct us_spill *s = *smallest;
        *smallest = s->next;
        unmap(s);
    }
    return true;
}

static struct us_spill *map_new(size_t bytes)
{
    struct us_spill *s = malloc(sizeof *s);
    if (s == NULL)
        return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(s);
        return NULL;
    }
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    (void)madvise(p, bytes, MADV_DONTFORK);
    *s = (struct us_spill){.memory = p, .bytes = bytes};
    return s;
}

bool us_spill_take(size_t bytes, struct us_spill **out)
{
    size_t max = us_config()->spill_max;
    if (bytes == 0 || bytes > SIZE_MAX - SPILL_ROUND)
        return false;
    bytes = (bytes + SPILL_ROUND - 1) / SPILL_ROUND * SPILL_ROUND;
    pthread_mutex_lock(&spills.mu);
    struct us_spill *s = reuse_locked(bytes);
    if (s == NULL) {
        if (!make_room_locked(bytes, max)) {
            pthread_mutex_unlock(&spills.mu);
            us_log_once(&logged_budget, US_LOG_INFO,
                        "spill_max (%zu bytes) reached: a pageable H2D that its pinned slots cannot hold waits "
                        "for them (held behind the stream's queued work)",
                        max);
            return false;
        }
        spills.mapped += bytes; /* reserved; mapped outside the lock */
        pthread_mutex_unlock(&spills.mu);
        s = map_new(bytes);
        pthread_mutex_lock(&spills.mu);
        if (s == NULL) {
            spills.mapped -= bytes;
            pthread_mutex_unlock(&spills.mu);
            us_log_once(&logged_map, US_LOG_WARN,
                        "could not map %zu bytes to hold a pageable H2D's source: it waits for its pinned slots",
                        bytes);
            return false;
        }
    }
    spills.taken += s->bytes;
    pthread_mutex_unlock(&spills.mu);
    *out = s;
    return true;
}

char *us_spill_memory(const struct us_spill *spill)
{
    return spill->memory;
}

void us_spill_give(struct us_spill *spill)
{
    pthread_mutex_lock(&spills.mu);
    spills.taken -= spill->bytes;
    spill->next = spills.kept;
    spills.kept = spill;
    pthread_mutex_unlock(&spills.mu);
}

size_t us_spill_mapped_bytes(void)
{
    pthread_mutex_lock(&spills.mu);
    size_t bytes = spills.mapped;
    pthread_mutex_unlock(&spills.mu);
    return bytes;
}

size_t us_spill_taken_bytes(void)
{
    pthread_mutex_lock(&spills.mu);
    size_t bytes = spills.taken;
    pthread_mutex_unlock(&spills.mu);
    return bytes;
}

void us_spill_reset(void)
{
    pthread_mutex_lock(&spills.mu);
    while (spills.kept != NULL) {
        struct us_spill *s = spills.kept;
        spills.kept = s->next;
        unmap(s);
    }
    logged_budget = logged_map = 0;
    pthread_mutex_unlock(&spills.mu);
}
