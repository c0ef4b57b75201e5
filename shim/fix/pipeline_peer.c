/* pipeline_peer.c - case A: a copy between two devices without peer access,
 * which the driver would stage through the host holding the caller (and
 * queue behind every other staged copy on the machine).
 *
 * Through the lane of (user stream, source, destination) (lanes.h):
 *
 *   user stream:  ... record(start) .................................. wait(done) ...
 *   D2H (src):        wait(start) [wait(prev done)] [wait(gate)] | [wait(freed[k])] D2H chunk->ring[k] record(filled[k]) | ...
 *   H2D (dst):                                      | wait(filled[k]) H2D ring[k]->chunk [record(freed[k])] | ... record(done)
 *   legacy stream of the other device (user stream legacy only):
 *                     record(gate) ..................................... wait(done) ...
 *
 * Every wait is GPU-side; the host never waits on the asynchronous path. The
 * ring has `slots` slots of chunk_bytes; a large copy moves in larger chunks
 * (several slots each, at most half the ring) so that it is cut into at most
 * US_PEER_MAX_CHUNKS chunks: 5 calls per chunk (6 once the ring wraps) plus 4
 * per copy keep the host time in the call bounded. */
#include "pipeline.h"

#include "config.h"

#include "lanes.h"
#include "log.h"
#include "ondevice.h"
#include "pipeline_common.h"
#include "probe.h"

#define US_PEER_MAX_CHUNKS 16

static int logged_start, logged_broken;

/* An asynchronous failure of an earlier copy through the lane, which the
 * runtime reports from later calls; cudaSuccess when there was none. */
static cudaError_t lane_error(const struct us_real_api *real, const struct us_lane *l)
{
    cudaError_t errs[2] = {real->cudaStreamQuery(l->d2h), real->cudaStreamQuery(l->h2d)};
    for (int i = 0; i < 2; i++)
        if (errs[i] != cudaSuccess && errs[i] != cudaErrorNotReady)
            return errs[i];
    return cudaSuccess;
}

/* A copy on the legacy stream (cudaMemcpy, cudaMemcpyPeer, stream 0 or
 * cudaStreamLegacy of the plain entries) is serialized with the legacy
 * streams, hence the blocking streams, of the source and destination devices
 * too, whichever is current (contract.md §1; pipe_tests' cross_device_*): the
 * D2H stream waits for their earlier work, and their later work waits for the
 * copy. The user stream is the current device's legacy stream: `start` and the
 * final wait cover that one. Fills `devices` (and their gate events) with the
 * others; returns how many. */
static int legacy_others(const struct us_pipe *p, const struct us_lane *l, int devices[2], cudaEvent_t gates[2])
{
    int n = 0;
    if (p->stream != cudaStreamLegacy) /* us_copy_stream made "0" of a plain entry explicit */
        return 0;
    if (l->key.src_device != p->stream_device) {
        devices[n] = l->key.src_device;
        gates[n++] = l->gate_src;
    }
    if (l->key.dst_device != p->stream_device && l->key.dst_device != l->key.src_device) {
        devices[n] = l->key.dst_device;
        gates[n++] = l->gate_dst;
    }
    return n;
}

/* The D2H stream waits for the earlier work of the other devices' legacy streams. */
static cudaError_t gate_on_legacy(const struct us_pipe *p, const struct us_lane *l)
{
    const struct us_real_api *real = p->real;
    int devices[2];
    cudaEvent_t gates[2];
    int n = legacy_others(p, l, devices, gates);
    cudaError_t err = cudaSuccess;
    for (int i = 0; i < n && err == cudaSuccess; i++) {
        err = us_ondevice_enter(devices[i], p->home);
        if (err != cudaSuccess)
            break;
        err = real->cudaEventRecord(gates[i], cudaStreamLegacy);
        err = us_pipe_first(err, us_ondevice_leave(devices[i], p->home));
        if (err == cudaSuccess)
            err = real->cudaStreamWaitEvent(l->d2h, gates[i], 0);
    }
    return err;
}

/* The other devices' legacy streams wait for the copy before their later
 * work (GPU-side: the host never waits). */
static cudaError_t legacy_follows(const struct us_pipe *p, const struct us_lane *l)
{
    const struct us_real_api *real = p->real;
    int devices[2];
    cudaEvent_t gates[2];
    int n = legacy_others(p, l, devices, gates);
    cudaError_t err = cudaSuccess;
    for (int i = 0; i < n && err == cudaSuccess; i++) {
        err = us_ondevice_enter(devices[i], p->home);
        if (err != cudaSuccess)
            break;
        err = real->cudaStreamWaitEvent(cudaStreamLegacy, l->done, 0);
        err = us_pipe_first(err, us_ondevice_leave(devices[i], p->home));
    }
    return err;
}

/* Orders the D2H stream after the user stream (and after the lane's previous
 * copy, which used the same ring). false: nothing the copy needs was issued. */
static bool gate(const struct us_pipe *p, struct us_lane *l)
{
    const struct us_real_api *real = p->real;
    cudaError_t err = real->cudaEventRecord(l->start, p->stream);
    if (err == cudaSuccess)
        err = real->cudaStreamWaitEvent(l->d2h, l->start, 0);
    if (err == cudaSuccess && l->used)
        err = real->cudaStreamWaitEvent(l->d2h, l->done, 0);
    if (err == cudaSuccess)
        err = gate_on_legacy(p, l);
    if (err != cudaSuccess)
        us_log_once(&logged_start, US_LOG_INFO, "cannot order the shim's streams after the copy's stream (%s): "
                    "the copy goes native", us_real_error_name(err));
    return err == cudaSuccess;
}

/* The chunks. Returns the first error; *issued: whether any chunk was. */
static cudaError_t chunks(const struct us_pipe *p, struct us_lane *l, bool *issued)
{
    const struct us_real_api *real = p->real;
    const struct us_copy *c = p->copy;
    size_t chunk = us_pipe_peer_chunk(c->bytes, l->ring_bytes / l->nslots, l->ring_bytes, US_PEER_MAX_CHUNKS);
    size_t places = l->ring_bytes / chunk;
    if (places > l->nslots)
        places = l->nslots; /* one pair of events per place */
    size_t n = us_pipe_chunks(c->bytes, chunk);
    cudaError_t err = cudaSuccess;
    *issued = false;
    for (size_t i = 0; i < n && err == cudaSuccess; i++) {
        size_t k = i % places, off = i * chunk, len = us_pipe_chunk_len(c->bytes, chunk, i);
        char *slot = l->ring + k * chunk;
        if (i >= places)
            err = real->cudaStreamWaitEvent(l->d2h, l->freed[k], 0);
        if (err == cudaSuccess)
            err = real->cudaMemcpyAsync(slot, (const char *)c->src + off, len, cudaMemcpyDeviceToHost, l->d2h);
        if (err != cudaSuccess)
            break;
        if (!*issued)
            US_PROBE_STAMP(issued);
        *issued = true;
        err = real->cudaEventRecord(l->filled[k], l->d2h);
        if (err == cudaSuccess)
            err = real->cudaStreamWaitEvent(l->h2d, l->filled[k], 0);
        if (err == cudaSuccess)
            err = real->cudaMemcpyAsync((char *)c->dst + off, slot, len, cudaMemcpyHostToDevice, l->h2d);
        if (err == cudaSuccess && i + places < n)
            err = real->cudaEventRecord(l->freed[k], l->h2d);
    }
    return err;
}

/* Under l->mu. false: declined, nothing issued that the user stream waits on. */
static bool issue(const struct us_pipe *p, struct us_lane *l, cudaError_t *result)
{
    const struct us_real_api *real = p->real;
    if (l->broken) {
        us_log_once(&logged_broken, US_LOG_INFO, "a lane failed earlier: its copies go native");
        return false;
    }
    if (l->used) {
        cudaError_t earlier = lane_error(real, l);
        if (earlier != cudaSuccess) {
            *result = earlier;
            return true;
        }
    }
    US_PROBE_STAMP(slots_claimed);
    if (!gate(p, l))
        return false;

    bool issued;
    cudaError_t err = chunks(p, l, &issued);
    /* the lane's next copy waits for everything issued here, failed or not */
    cudaError_t done = real->cudaEventRecord(l->done, l->h2d);
    if (done != cudaSuccess)
        l->broken = true;
    else
        l->used = true;
    if (!issued)
        return false; /* the first chunk was refused: the native call gives the native error */
    err = us_pipe_first(err, done);
    if (err == cudaSuccess)
        err = real->cudaStreamWaitEvent(p->stream, l->done, 0);
    if (err == cudaSuccess)
        err = legacy_follows(p, l);
    /* On a failure the user stream is not made to wait: the call failed, as
     * the native one would have, and no event it waits for is left unrecorded. */
    *result = err;
    return true;
}

static int logged_idle_native;

bool us_pipeline_peer(const struct us_copy *c, const struct us_ctx *home, cudaError_t *result)
{
    struct us_pipe p;
    if (!us_pipe_begin(&p, c, home))
        return false;
    us_lane_peer_ahead(p.stream_device);
    /* on an idle stream the driver's staged copy starts at once and queues
     * behind nothing of its stream, so it holds no other copy up either */
    if (us_pipe_native_when_idle(&p, us_config()->peer_idle_native_bytes, &logged_idle_native,
                                 "a staged cross-GPU copy of up to peer_idle_native_bytes on a stream with no work "
                                 "queued went native: the driver's staging is as fast or faster then"))
        return false;
    int src = c->src_mem.device, dst = c->dst_mem.device;
    struct us_lane *l = us_lane_peer(p.stream, p.stream_device, src, dst, home);
    if (l == NULL) {
        us_pipe_end(&p);
        return false;
    }
    pthread_mutex_lock(&l->mu);
    bool done = issue(&p, l, result);
    pthread_mutex_unlock(&l->mu);
    if (!done) {
        us_pipe_end(&p);
        return false;
    }
    if (*result == cudaSuccess && us_copy_is_sync(c)) {
        /* native semantics: returns when the copy is done */
        *result = p.real->cudaStreamSynchronize(p.stream);
        if (*result == cudaSuccess)
            *result = lane_error(p.real, l);
    }
    us_pipe_end(&p);
    return true;
}
