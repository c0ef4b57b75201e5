/* lanes.c - see lanes.h.
 *
 * The table is a uthash keyed by struct us_lane_key under one mutex, held for
 * lookups and inserts only: a lane is made outside it (its pinned ring
 * synchronizes the device, which may wait for work another thread has yet to
 * issue). Two threads that make the same lane at once both succeed; the
 * loser's lane waits among the spares for the next lane of the same devices. */
#include "lanes.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "ondevice.h"
#include "real.h"
#include "staging.h"

static struct {
    pthread_mutex_t mu;
    struct us_lane *table;
    struct us_lane *spares; /* linked through hh.next: made, not in the table */
    struct us_lane *retired; /* dropped by a device reset or broken, linked through hh.next:
                              * kept, never freed (a copy or its streams may still hold one),
                              * and reachable */
    unsigned count;
    void *spare_ring;       /* a ring whose lane could not be made */
    size_t spare_ring_bytes;
    struct us_pinned_owner spare_ring_owner;
} lanes = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int logged_oom;

static void make_key(struct us_lane_key *key, uint64_t ctx, cudaStream_t stream, int stream_device, int src, int dst)
{
    memset(key, 0, sizeof *key); /* padding is hashed too */
    key->ctx = ctx;
    key->stream = stream;
    key->thread = stream == cudaStreamPerThread ? pthread_self() : 0;
    key->stream_device = stream_device;
    key->src_device = src;
    key->dst_device = dst;
}

static bool same_devices(const struct us_lane_key *a, const struct us_lane_key *b)
{
    return a->ctx == b->ctx && a->stream_device == b->stream_device && a->src_device == b->src_device &&
           a->dst_device == b->dst_device;
}

/* Destroys what a lane that could not be completed made (no ring yet). */
static void discard(struct us_lane *l)
{
    const struct us_real_api *real = us_real();
    cudaEvent_t *events[] = {&l->start, &l->gate_src, &l->gate_dst, &l->done};
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        if (*events[i] != NULL)
            real->cudaEventDestroy(*events[i]);
    for (unsigned i = 0; i < l->nslots; i++) {
        if (l->filled[i] != NULL)
            real->cudaEventDestroy(l->filled[i]);
        if (l->freed[i] != NULL)
            real->cudaEventDestroy(l->freed[i]);
    }
    if (l->d2h != NULL)
        real->cudaStreamDestroy(l->d2h);
    if (l->h2d != NULL)
        real->cudaStreamDestroy(l->h2d);
    free(l);
}

static bool make_events(struct us_lane *l, const struct us_ctx *home)
{
    const struct us_lane_key *k = &l->key;
    struct {
        int device;
        cudaEvent_t *event;
    } todo[4 + 2 * US_LANE_MAX_SLOTS] = {
        {k->stream_device, &l->start}, {k->src_device, &l->gate_src},
        {k->dst_device, &l->gate_dst}, {k->dst_device, &l->done},
    };
    unsigned n = 4;
    for (unsigned i = 0; i < l->nslots; i++) {
        todo[n].device = k->src_device;
        todo[n++].event = &l->filled[i];
        todo[n].device = k->dst_device;
        todo[n++].event = &l->freed[i];
    }
    cudaError_t err = cudaSuccess;
    for (unsigned i = 0; i < n && err == cudaSuccess; i++)
        err = us_ondevice_event_create(todo[i].device, home, todo[i].event); /* logs a failure */
    return err == cudaSuccess;
}

static unsigned cfg_slots(void)
{
    unsigned slots = us_config()->slots;
    return slots < US_LANE_MAX_SLOTS ? slots : US_LANE_MAX_SLOTS;
}

/* A lane with streams and events, not yet a ring; NULL (logged) on failure. */
static struct us_lane *make_lane(const struct us_lane_key *key, const struct us_ctx *home)
{
    struct us_lane *l = calloc(1, sizeof *l);
    if (l == NULL) {
        us_log_once(&logged_oom, US_LOG_WARN, "out of memory for the shim's lanes: copies go native");
        return NULL;
    }
    l->key = *key;
    l->nslots = cfg_slots();
    pthread_mutex_init(&l->mu, NULL);
    cudaError_t err = us_ondevice_stream_create(key->src_device, home, &l->d2h);
    if (err == cudaSuccess)
        err = us_ondevice_stream_create(key->dst_device, home, &l->h2d);
    if (err != cudaSuccess) { /* logged by us_ondevice_stream_create */
        discard(l);
        return NULL;
    }
    if (!make_events(l, home)) {
        discard(l);
        return NULL;
    }
    return l;
}

/* Under lanes.mu: a lane of the same devices nobody uses now and whose last
 * copy is complete, taken out of the table; or NULL. Only non-blocking calls. */
static struct us_lane *take_idle_locked(const struct us_lane_key *key)
{
    const struct us_real_api *real = us_real();
    struct us_lane *l, *tmp;
    HASH_ITER(hh, lanes.table, l, tmp) {
        if (!same_devices(&l->key, key) || pthread_mutex_trylock(&l->mu) != 0)
            continue;
        bool idle = !l->broken && (!l->used || (real->cudaEventQuery(l->done) == cudaSuccess &&
                                                real->cudaStreamQuery(l->d2h) == cudaSuccess));
        pthread_mutex_unlock(&l->mu);
        if (idle) {
            HASH_DEL(lanes.table, l);
            lanes.count--;
            return l;
        }
    }
    return NULL;
}

static struct us_lane *take_spare_locked(const struct us_lane_key *key)
{
    for (struct us_lane **p = &lanes.spares; *p != NULL; p = (struct us_lane **)&(*p)->hh.next) {
        struct us_lane *l = *p;
        if (same_devices(&l->key, key)) {
            *p = l->hh.next;
            return l;
        }
    }
    return NULL;
}

/* Under lanes.mu: `l` enters the table under `key`, unless a lane for the key
 * got there first: then `l` becomes a spare and that lane is returned. */
static struct us_lane *insert_locked(struct us_lane *l, const struct us_lane_key *key)
{
    struct us_lane *found;
    HASH_FIND(hh, lanes.table, key, sizeof *key, found);
    if (found != NULL) {
        l->hh.next = lanes.spares;
        lanes.spares = l;
        return found;
    }
    l->key = *key; /* a taken-over lane keeps `used`: its done event still gates its next copy */
    HASH_ADD(hh, lanes.table, key, sizeof l->key, l);
    lanes.count++;
    return l;
}

/* A ring whose lane could not be made (its streams or events failed): kept
 * for the next lane rather than freed (freeing pinned memory synchronizes). */
static void keep_spare_ring_locked(void *ring, size_t bytes, struct us_pinned_owner owner)
{
    if (lanes.spare_ring == NULL) {
        lanes.spare_ring = ring;
        lanes.spare_ring_bytes = bytes;
        lanes.spare_ring_owner = owner;
    } /* else leaked: a second one while one waits is not worth a list */
}

static void keep_spare_ring(void *ring, size_t bytes, struct us_pinned_owner owner)
{
    pthread_mutex_lock(&lanes.mu);
    keep_spare_ring_locked(ring, bytes, owner);
    pthread_mutex_unlock(&lanes.mu);
}

static void *take_spare_ring(size_t bytes, struct us_pinned_owner *owner)
{
    pthread_mutex_lock(&lanes.mu);
    void *ring = NULL;
    if (lanes.spare_ring != NULL && lanes.spare_ring_bytes == bytes) {
        ring = lanes.spare_ring;
        *owner = lanes.spare_ring_owner;
        lanes.spare_ring = NULL;
    }
    pthread_mutex_unlock(&lanes.mu);
    return ring;
}

static size_t ring_bytes_now(void)
{
    return (size_t)cfg_slots() * us_config()->chunk_bytes;
}

void us_lane_peer_ahead(int device)
{
    us_staging_ring_ahead(device, ring_bytes_now());
}

struct us_lane *us_lane_peer(cudaStream_t stream, int stream_device, int src_device, int dst_device,
                             const struct us_ctx *home)
{
    struct us_lane_key key;
    make_key(&key, home->id, stream, stream_device, src_device, dst_device);

    pthread_mutex_lock(&lanes.mu);
    struct us_lane *l;
    HASH_FIND(hh, lanes.table, &key, sizeof key, l);
    if (l != NULL && l->broken) {
        HASH_DEL(lanes.table, l); /* retired, not freed: its streams may still hold work */
        lanes.count--;
        l->hh.next = lanes.retired;
        lanes.retired = l;
        l = NULL;
    }
    if (l == NULL && (l = take_spare_locked(&key)) != NULL)
        l = insert_locked(l, &key);
    pthread_mutex_unlock(&lanes.mu);
    if (l != NULL)
        return l;

    /* The ring first: past pinned_max nothing is made that would be
     * destroyed again (a copy used to make and destroy 2 streams and 12
     * events); an idle lane of the same devices is taken over, or the copy
     * goes native. */
    size_t ring_bytes = ring_bytes_now();
    struct us_pinned_owner ring_owner = {-1, 0};
    void *ring = take_spare_ring(ring_bytes, &ring_owner);
    if (ring == NULL && !us_staging_ring_alloc(ring_bytes, &ring, &ring_owner)) {
        pthread_mutex_lock(&lanes.mu);
        l = take_idle_locked(&key);
        if (l != NULL)
            l = insert_locked(l, &key);
        pthread_mutex_unlock(&lanes.mu);
        return l;
    }
    l = make_lane(&key, home);
    if (l == NULL) {
        keep_spare_ring(ring, ring_bytes, ring_owner); /* the next lane takes it: pinned memory is never freed */
        return NULL;
    }
    l->ring = ring;
    l->ring_bytes = ring_bytes;
    l->ring_owner = ring_owner;
    pthread_mutex_lock(&lanes.mu);
    l = insert_locked(l, &key);
    pthread_mutex_unlock(&lanes.mu);
    return l;
}

static bool lane_on_device(const struct us_lane *l, int device)
{
    const struct us_lane_key *k = &l->key;
    return k->stream_device == device || k->src_device == device || k->dst_device == device ||
           (l->ring_owner.ctx == 0 && l->ring_owner.device == device);
}

/* What went: a device's primary context (reset), or a context by id. */
struct gone {
    int device;   /* -1: none */
    uint64_t ctx; /* 0: none */
};

static bool lane_gone(const struct us_lane *l, const struct gone *g)
{
    return g->ctx != 0 ? l->key.ctx == g->ctx : lane_on_device(l, g->device);
}

static bool ring_gone(const struct us_pinned_owner *o, const struct gone *g)
{
    return g->ctx != 0 ? o->ctx == g->ctx : o->ctx == 0 && o->device == g->device;
}

/* Under lanes.mu: a lane dropped; its ring kept when it survived. */
static void drop_lane_locked(struct us_lane *l, const struct gone *g)
{
    l->hh.next = lanes.retired;
    lanes.retired = l;
    if (l->ring == NULL)
        return;
    if (ring_gone(&l->ring_owner, g))
        us_staging_ring_forget(l->ring_bytes);
    else
        keep_spare_ring_locked(l->ring, l->ring_bytes, l->ring_owner);
}

static void forget(const struct gone *g)
{
    pthread_mutex_lock(&lanes.mu);
    struct us_lane *l, *tmp;
    HASH_ITER(hh, lanes.table, l, tmp) {
        if (lane_gone(l, g)) {
            HASH_DEL(lanes.table, l); /* retired, not freed: a copy may still hold it */
            lanes.count--;
            drop_lane_locked(l, g);
        }
    }
    for (struct us_lane **p = &lanes.spares; *p != NULL;) {
        l = *p;
        if (lane_gone(l, g)) {
            *p = l->hh.next; /* before drop_lane_locked links it to the retired */
            drop_lane_locked(l, g);
        } else {
            p = (struct us_lane **)&l->hh.next;
        }
    }
    if (lanes.spare_ring != NULL && ring_gone(&lanes.spare_ring_owner, g)) {
        us_staging_ring_forget(lanes.spare_ring_bytes);
        lanes.spare_ring = NULL;
    }
    pthread_mutex_unlock(&lanes.mu);
}

void us_lanes_forget_device(int device)
{
    struct gone g = {device, 0};
    forget(&g);
}

void us_lanes_forget_context(const struct us_ctx *gone)
{
    struct gone g = {-1, gone->id};
    forget(&g);
}

unsigned us_lanes_count(void)
{
    pthread_mutex_lock(&lanes.mu);
    unsigned n = lanes.count;
    pthread_mutex_unlock(&lanes.mu);
    return n;
}

void us_lanes_reset(void)
{
    pthread_mutex_lock(&lanes.mu);
    /* the lanes' memory goes; their streams, events and rings are the (fake)
     * runtime's to free */
    struct us_lane *l, *tmp;
    HASH_ITER(hh, lanes.table, l, tmp) {
        HASH_DEL(lanes.table, l);
        pthread_mutex_destroy(&l->mu);
        free(l);
    }
    for (int list = 0; list < 2; list++) {
        for (l = list == 0 ? lanes.spares : lanes.retired; l != NULL; l = tmp) {
            tmp = l->hh.next;
            pthread_mutex_destroy(&l->mu);
            free(l);
        }
    }
    lanes.spares = NULL;
    lanes.retired = NULL;
    lanes.spare_ring = NULL;
    lanes.count = 0;
    pthread_mutex_unlock(&lanes.mu);
}
