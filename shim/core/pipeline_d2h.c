/* pipeline_d2h.c - case C: a device-to-host copy into pageable memory, which
 * the driver does holding a lock that other threads' launches wait for (a
 * program where the copy waits for work another thread must launch hangs:
 * seed 004).
 *
 * Default: chunks go device-to-pinned with cudaMemcpyAsync on the user stream
 * (stream order by construction), each followed by its slot's event; the host
 * waits for each chunk's event with us_pipe_wait (polling cudaEventQuery, see
 * pipeline_common.h), and copies it out with us_hostcopy while the next
 * `slots` chunks are in flight. The call returns with the data in place, as
 * native does. 3 calls per chunk.
 *
 * Deferred (option d2h_deferred, asynchronous APIs only): the call returns at
 * once; the chunks go to pinned slots and a host function on the user stream
 * copies them out in stream order, so that any later synchronization of the
 * stream, of an event recorded after the copy, or of the device, and
 * cudaStreamQuery, observe the data in place. The slots stay claimed until
 * the host function ran: their events are recorded after it. A copy larger
 * than its slots goes in batches (D2H x k, host function, D2H x k, ...). */
#include "pipeline.h"

#include <stdlib.h>

#include "config.h"
#include "hostcopy.h"
#include "log.h"
#include "pipeline_common.h"

static int logged_job;

/* D2H of chunk i into slot k, then the slot's event. *issued: the D2H was. */
static cudaError_t issue_chunk(const struct us_pipe *p, struct us_pipe_slots *s, size_t chunk, size_t i,
                               unsigned k, bool *issued)
{
    const struct us_copy *c = p->copy;
    size_t off = i * chunk, len = us_pipe_chunk_len(c->bytes, chunk, i);
    cudaError_t err = p->real->cudaMemcpyAsync(s->slot[k]->ptr, (const char *)c->src + off, len,
                                               cudaMemcpyDeviceToHost, p->stream);
    if (err != cudaSuccess)
        return err;
    *issued = true;
    err = p->real->cudaEventRecord(s->event[k], p->stream);
    s->pending[k] = err == cudaSuccess ? p->stream_device : US_STAGING_LOST;
    return err;
}

/* The default: returns with the data in place. *issued: whether any chunk was. */
static cudaError_t copy_now(const struct us_pipe *p, struct us_pipe_slots *s, size_t chunk, size_t n,
                            bool *issued)
{
    const struct us_copy *c = p->copy;
    cudaError_t err = cudaSuccess;
    size_t queued = 0;
    *issued = false;
    while (err == cudaSuccess && queued < s->n && queued < n) {
        err = issue_chunk(p, s, chunk, queued, (unsigned)queued, issued);
        queued++;
    }
    for (size_t i = 0; i < n && err == cudaSuccess; i++) {
        unsigned k = (unsigned)(i % s->n);
        err = us_pipe_wait(p->real, s->event[k]);
        if (err != cudaSuccess)
            break;
        s->pending[k] = -1;
        us_hostcopy((char *)c->dst + i * chunk, s->slot[k]->ptr, us_pipe_chunk_len(c->bytes, chunk, i));
        if (queued < n)
            err = issue_chunk(p, s, chunk, queued++, k, issued);
    }
    return err;
}

/* What a host function copies out: `n` chunks from pinned slots. */
struct d2h_job {
    unsigned n;
    struct {
        void *dst;
        const void *src;
        size_t len;
    } part[];
};

/* Runs on the runtime's host-function thread, in stream order: no CUDA call. */
static void copy_out(void *arg)
{
    struct d2h_job *job = arg;
    for (unsigned i = 0; i < job->n; i++)
        us_hostcopy(job->part[i].dst, job->part[i].src, job->part[i].len);
    free(job);
}

/* Deferred mode: batches of D2H chunks, each followed by a host function that
 * copies them out; the slots' events after the last one. */
static cudaError_t copy_deferred(const struct us_pipe *p, struct us_pipe_slots *s, size_t chunk, size_t n,
                                 bool *issued)
{
    const struct us_real_api *real = p->real;
    const struct us_copy *c = p->copy;
    cudaError_t err = cudaSuccess;
    unsigned used = 0; /* slots with a D2H issued into them */
    *issued = false;
    for (size_t first = 0; first < n && err == cudaSuccess; first += s->n) {
        unsigned m = n - first < s->n ? (unsigned)(n - first) : s->n;
        struct d2h_job *job = malloc(sizeof *job + m * sizeof job->part[0]);
        if (job == NULL) {
            us_log_once(&logged_job, US_LOG_WARN, "out of memory for a deferred copy");
            err = cudaErrorMemoryAllocation;
            break;
        }
        job->n = m;
        for (unsigned k = 0; k < m && err == cudaSuccess; k++) {
            size_t i = first + k, off = i * chunk, len = us_pipe_chunk_len(c->bytes, chunk, i);
            err = real->cudaMemcpyAsync(s->slot[k]->ptr, (const char *)c->src + off, len, cudaMemcpyDeviceToHost,
                                        p->stream);
            if (err == cudaSuccess) {
                *issued = true;
                used = k + 1 > used ? k + 1 : used;
                job->part[k].dst = (char *)c->dst + off;
                job->part[k].src = s->slot[k]->ptr;
                job->part[k].len = len;
            }
        }
        if (err == cudaSuccess)
            err = real->cudaLaunchHostFunc(p->stream, copy_out, job);
        if (err != cudaSuccess)
            free(job);
    }
    /* the slots are free once the last host function (or what failed) is done */
    for (unsigned k = 0; k < used; k++) {
        cudaError_t rec = real->cudaEventRecord(s->event[k], p->stream);
        s->pending[k] = rec == cudaSuccess ? p->stream_device : US_STAGING_LOST;
        err = us_pipe_first(err, rec);
    }
    return err;
}

bool us_pipeline_d2h(const struct us_copy *c, cudaError_t *result)
{
    struct us_pipe p;
    if (!us_pipe_begin(&p, c))
        return false;
    bool deferred = us_config()->d2h_deferred && !us_copy_is_sync(c);
    size_t chunk = us_staging_slot_bytes(), n = us_pipe_chunks(c->bytes, chunk);
    unsigned want = deferred ? us_pipe_claim_cap() : us_config()->slots;
    struct us_pipe_slots s;
    if (!us_pipe_claim(&p, n < want ? (unsigned)n : want, &s)) {
        us_pipe_end(&p, NULL, -1);
        return false;
    }
    bool issued;
    cudaError_t err = deferred ? copy_deferred(&p, &s, chunk, n, &issued) : copy_now(&p, &s, chunk, n, &issued);
    us_pipe_release(&s);
    if (!issued) { /* the first chunk was refused: the native call gives the native error */
        us_pipe_end(&p, NULL, -1);
        return false;
    }
    *result = err;
    us_pipe_end(&p, deferred ? "pageable_d2h_deferred" : "pageable_d2h", c->src_mem.device);
    return true;
}
