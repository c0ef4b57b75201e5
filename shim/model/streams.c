/* streams.c - see streams.h. */
#include "streams.h"

#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

#include "device_state.h"

struct known_stream {
    cudaStream_t handle;
    int device;
    bool blocking;
    UT_hash_handle hh;
};

static struct {
    pthread_mutex_t mu;
    struct known_stream *table;
    unsigned count;
} streams = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Under streams.mu: takes `handle` out of the table and uncounts it. */
static void forget_locked(cudaStream_t handle)
{
    struct known_stream *s;
    HASH_FIND_PTR(streams.table, &handle, s);
    if (s == NULL)
        return;
    HASH_DEL(streams.table, s);
    streams.count--;
    us_device_note_stream_destroyed(s->device, s->blocking);
    free(s);
}

void us_streams_note_created(cudaStream_t stream, int device, bool blocking)
{
    struct known_stream *s = malloc(sizeof *s);
    pthread_mutex_lock(&streams.mu);
    forget_locked(stream);
    if (s != NULL) { /* out of memory: not counted, as a stream made before us */
        s->handle = stream;
        s->device = device;
        s->blocking = blocking;
        HASH_ADD_PTR(streams.table, handle, s);
        streams.count++;
        us_device_note_stream_created(device, blocking);
    }
    pthread_mutex_unlock(&streams.mu);
}

void us_streams_note_destroyed(cudaStream_t stream)
{
    pthread_mutex_lock(&streams.mu);
    forget_locked(stream);
    pthread_mutex_unlock(&streams.mu);
}

int us_streams_is_blocking(cudaStream_t stream)
{
    pthread_mutex_lock(&streams.mu);
    struct known_stream *s;
    HASH_FIND_PTR(streams.table, &stream, s);
    int blocking = s == NULL ? -1 : s->blocking;
    pthread_mutex_unlock(&streams.mu);
    return blocking;
}

unsigned us_streams_blocking_on(int device, cudaStream_t *out, unsigned max)
{
    unsigned n = 0;
    pthread_mutex_lock(&streams.mu);
    struct known_stream *s, *tmp;
    HASH_ITER(hh, streams.table, s, tmp) {
        if (s->device != device || !s->blocking)
            continue;
        if (n < max)
            out[n] = s->handle;
        n++;
    }
    pthread_mutex_unlock(&streams.mu);
    return n;
}

unsigned us_streams_count(void)
{
    pthread_mutex_lock(&streams.mu);
    unsigned n = streams.count;
    pthread_mutex_unlock(&streams.mu);
    return n;
}

void us_streams_reset(void)
{
    pthread_mutex_lock(&streams.mu);
    struct known_stream *s, *tmp;
    HASH_ITER(hh, streams.table, s, tmp) {
        HASH_DEL(streams.table, s);
        free(s);
    }
    streams.count = 0;
    pthread_mutex_unlock(&streams.mu);
}
