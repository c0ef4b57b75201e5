/* capture_conform.c - stream capture, CUDA graphs and stream-ordered
 * allocation: what the runtime answers, one line per case, deterministic.
 *
 * The same source is built twice: over the simulated runtime (CI,
 * build/capture/capture_conform) and over the real one (make gpu-test,
 * build/gpu/capture_conform). Each build runs natively and under the shim;
 * every run must print exactly tests/capture/expected.txt, which was taken
 * from the GPU (H100, CUDA 13.0). So the simulated runtime is checked against
 * the GPU, and the shim against native, on both.
 *
 * A line: "case: call=code ... [data=ok|bad]", codes as numbers (the names
 * differ in nothing but spelling). A case that needs a second thread starts
 * it and joins it inside the capture window, so the order is fixed.
 *
 * Usage: capture_conform [case-name-prefix]   (all cases without argument) */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define N_BYTES (256u * 1024u) /* pageable copies small enough to stay simple natively */

static const char *only;
static int failures; /* a setup call that failed (not an outcome) */

/* A call whose result is part of the line. */
#define OUT(line, name, call) out(line, sizeof line, name, (int)(call))
/* A call that must succeed for the case to mean anything. */
#define SETUP(call) setup((call), #call, __LINE__)

static void out(char *line, size_t cap, const char *name, int code)
{
    size_t len = strlen(line);
    snprintf(line + len, cap - len, " %s=%d", name, code);
}

static void outs(char *line, size_t cap, const char *name, const char *value)
{
    size_t len = strlen(line);
    snprintf(line + len, cap - len, " %s=%s", name, value);
}

static bool setup(cudaError_t err, const char *what, int at)
{
    if (err == cudaSuccess)
        return true;
    fprintf(stderr, "capture_conform:%d: %s failed: %d\n", at, what, (int)err);
    failures++;
    return false;
}

static bool wanted(const char *name)
{
    return only == NULL || strncmp(name, only, strlen(only)) == 0;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 9));
}

static int capture_status(cudaStream_t s)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamIsCapturing(s, &st);
    return err == cudaSuccess ? (int)st : -(int)err;
}

/* --- graphMemoryNodes, reduced -------------------------------------------------------- */

/* NVIDIA's graphMemoryNodes sample without kernels: a non-blocking s1
 * captures in global mode; inside, s2 and three events are made, s2 forks
 * from s1, cudaMallocAsync, a pageable H2D on s1, a pageable D2H on s2, the
 * join back, cudaFreeAsync. `destroy_inside`: s2 and the events are destroyed
 * before cudaStreamEndCapture, as the sample does. Then the graph is launched
 * twice with new source bytes each time: a captured copy reads its source at
 * launch, not at capture. */
static void case_memory_nodes(const char *name, bool destroy_inside)
{
    if (!wanted(name))
        return;
    char line[512];
    snprintf(line, sizeof line, "%s:", name);
    unsigned char *in = malloc(N_BYTES), *back = malloc(N_BYTES);
    cudaStream_t s1, s2 = NULL;
    cudaEvent_t forked, copied, joined;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    void *dev = NULL;
    if (!SETUP(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking)))
        goto out;
    fill(in, N_BYTES, 1);
    memset(back, 0, N_BYTES);

    OUT(line, "begin", cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    OUT(line, "create_s2", cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    OUT(line, "create_events", cudaEventCreate(&forked) | cudaEventCreate(&copied) | cudaEventCreate(&joined));
    OUT(line, "malloc_async", cudaMallocAsync(&dev, N_BYTES, s1));
    outs(line, sizeof line, "ptr", dev != NULL ? "set" : "null");
    OUT(line, "h2d", cudaMemcpyAsync(dev, in, N_BYTES, cudaMemcpyHostToDevice, s1));
    OUT(line, "fork", cudaEventRecord(copied, s1) | cudaStreamWaitEvent(s2, copied, 0));
    OUT(line, "s2_status", capture_status(s2));
    OUT(line, "d2h", cudaMemcpyAsync(back, dev, N_BYTES, cudaMemcpyDeviceToHost, s2));
    OUT(line, "join", cudaEventRecord(joined, s2) | cudaStreamWaitEvent(s1, joined, 0));
    OUT(line, "free_async", cudaFreeAsync(dev, s1));
    if (destroy_inside) {
        OUT(line, "destroy_s2", cudaStreamDestroy(s2));
        OUT(line, "destroy_events", cudaEventDestroy(forked) | cudaEventDestroy(copied) | cudaEventDestroy(joined));
        OUT(line, "status", capture_status(s1));
    }
    OUT(line, "end", cudaStreamEndCapture(s1, &graph));
    outs(line, sizeof line, "untouched", back[0] == 0 && back[N_BYTES - 1] == 0 ? "yes" : "no");
    if (!destroy_inside) {
        OUT(line, "s2_after", capture_status(s2));
        SETUP(cudaStreamDestroy(s2));
        SETUP(cudaEventDestroy(forked));
        SETUP(cudaEventDestroy(copied));
        SETUP(cudaEventDestroy(joined));
    }
    if (graph == NULL)
        goto out;
    OUT(line, "instantiate", cudaGraphInstantiate(&exec, graph, 0));
    OUT(line, "graph_destroy", cudaGraphDestroy(graph));
    bool same = true;
    for (unsigned round = 2; round <= 3 && exec != NULL; round++) {
        fill(in, N_BYTES, round); /* read at launch */
        memset(back, 0, N_BYTES);
        cudaError_t err = cudaGraphLaunch(exec, s1);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(s1);
        if (round == 2)
            OUT(line, "launch", err);
        same = same && err == cudaSuccess && memcmp(in, back, N_BYTES) == 0;
    }
    if (exec != NULL) {
        outs(line, sizeof line, "data", same ? "ok" : "bad");
        OUT(line, "exec_destroy", cudaGraphExecDestroy(exec));
    }
out:
    printf("%s\n", line);
    cudaStreamDestroy(s1);
    free(in);
    free(back);
}

/* --- which calls a capture forbids ----------------------------------------------------- */

enum probe {
    P_MALLOC, P_HOST_ALLOC, P_STREAM_QUERY_OTHER, P_STREAM_SYNC_OTHER, P_EVENT_QUERY_OTHER,
    P_EVENT_SYNC_OTHER, P_DEVICE_SYNC, P_STREAM_QUERY_CAPTURING, P_STREAM_SYNC_CAPTURING,
    P_EVENT_QUERY_CAPTURED, P_GET_FLAGS_CAPTURING, P_GET_DEVICE_CAPTURING, P_GET_FLAGS_JOINED,
    P_GET_DEVICE_JOINED, P_POINTER_ATTRS, P_STREAM_CREATE, P_EVENT_CREATE_DESTROY,
    P_WAIT_OUTSIDE_EVENT, P_DESTROY_UNJOINED,
};

struct probe_ctx {
    enum probe probe;
    cudaStream_t capturing, joined, other;
    cudaEvent_t captured, other_event;
    unsigned char *pageable;
    enum cudaStreamCaptureMode caller_mode; /* the calling thread's mode for the call */
    int code;
};

static void *run_probe(void *arg)
{
    struct probe_ctx *p = arg;
    enum cudaStreamCaptureMode mode = p->caller_mode;
    cudaThreadExchangeStreamCaptureMode(&mode);
    void *ptr = NULL;
    unsigned flags;
    int device;
    struct cudaPointerAttributes attr;
    cudaStream_t s;
    cudaEvent_t e;
    switch (p->probe) {
    case P_MALLOC:
        p->code = cudaMalloc(&ptr, 4096);
        if (p->code == cudaSuccess)
            cudaFree(ptr); /* still in the caller's mode: allowed wherever the malloc was */
        break;
    case P_HOST_ALLOC:
        p->code = cudaHostAlloc(&ptr, 4096, cudaHostAllocPortable);
        if (p->code == cudaSuccess)
            cudaFreeHost(ptr);
        break;
    case P_STREAM_QUERY_OTHER: p->code = cudaStreamQuery(p->other); break;
    case P_STREAM_SYNC_OTHER: p->code = cudaStreamSynchronize(p->other); break;
    case P_EVENT_QUERY_OTHER: p->code = cudaEventQuery(p->other_event); break;
    case P_EVENT_SYNC_OTHER: p->code = cudaEventSynchronize(p->other_event); break;
    case P_DEVICE_SYNC: p->code = cudaDeviceSynchronize(); break;
    case P_STREAM_QUERY_CAPTURING: p->code = cudaStreamQuery(p->capturing); break;
    case P_STREAM_SYNC_CAPTURING: p->code = cudaStreamSynchronize(p->capturing); break;
    case P_EVENT_QUERY_CAPTURED: p->code = cudaEventQuery(p->captured); break;
    case P_GET_FLAGS_CAPTURING: p->code = cudaStreamGetFlags(p->capturing, &flags); break;
    case P_GET_DEVICE_CAPTURING: p->code = cudaStreamGetDevice(p->capturing, &device); break;
    case P_GET_FLAGS_JOINED: p->code = cudaStreamGetFlags(p->joined, &flags); break;
    case P_GET_DEVICE_JOINED: p->code = cudaStreamGetDevice(p->joined, &device); break;
    case P_POINTER_ATTRS: p->code = cudaPointerGetAttributes(&attr, p->pageable); break;
    case P_STREAM_CREATE:
        p->code = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (p->code == cudaSuccess)
            p->code = cudaStreamDestroy(s);
        break;
    case P_EVENT_CREATE_DESTROY:
        p->code = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
        if (p->code == cudaSuccess)
            p->code = cudaEventDestroy(e);
        break;
    case P_WAIT_OUTSIDE_EVENT: p->code = cudaStreamWaitEvent(p->capturing, p->other_event, 0); break;
    case P_DESTROY_UNJOINED: p->code = cudaStreamDestroy(p->joined); break;
    }
    cudaThreadExchangeStreamCaptureMode(&mode);
    return NULL;
}

/* One capture on a non-blocking stream in `capture_mode`, with a joined
 * second stream (work on it, joined back unless the probe is about an
 * unjoined one); the probe runs on this thread or another, in `caller_mode`.
 * Prints the probe's code, the capture status after it, and what
 * cudaStreamEndCapture returns. */
static void case_probe(const char *name, enum probe probe, enum cudaStreamCaptureMode capture_mode,
                       bool other_thread, enum cudaStreamCaptureMode caller_mode)
{
    if (!wanted(name))
        return;
    char line[256];
    snprintf(line, sizeof line, "%s:", name);
    struct probe_ctx p = {.probe = probe, .caller_mode = caller_mode};
    void *dev = NULL;
    cudaEvent_t fork_event, join_event;
    cudaGraph_t graph = NULL;
    p.pageable = malloc(4096);
    if (!SETUP(cudaStreamCreateWithFlags(&p.capturing, cudaStreamNonBlocking)) ||
        !SETUP(cudaStreamCreateWithFlags(&p.joined, cudaStreamNonBlocking)) ||
        !SETUP(cudaStreamCreateWithFlags(&p.other, cudaStreamNonBlocking)) ||
        !SETUP(cudaEventCreateWithFlags(&p.captured, cudaEventDisableTiming)) ||
        !SETUP(cudaEventCreateWithFlags(&p.other_event, cudaEventDisableTiming)) ||
        !SETUP(cudaEventCreateWithFlags(&fork_event, cudaEventDisableTiming)) ||
        !SETUP(cudaEventCreateWithFlags(&join_event, cudaEventDisableTiming)) || !SETUP(cudaMalloc(&dev, 4096)) ||
        !SETUP(cudaMemsetAsync(dev, 0, 4096, p.other)) || !SETUP(cudaEventRecord(p.other_event, p.other)) ||
        !SETUP(cudaStreamSynchronize(p.other)))
        goto out;

    OUT(line, "begin", cudaStreamBeginCapture(p.capturing, capture_mode));
    SETUP(cudaMemsetAsync(dev, 1, 1024, p.capturing));
    SETUP(cudaEventRecord(fork_event, p.capturing));
    SETUP(cudaStreamWaitEvent(p.joined, fork_event, 0));
    SETUP(cudaMemsetAsync((char *)dev + 1024, 2, 1024, p.joined));
    SETUP(cudaEventRecord(p.captured, p.capturing));
    if (probe != P_DESTROY_UNJOINED) {
        SETUP(cudaEventRecord(join_event, p.joined));
        SETUP(cudaStreamWaitEvent(p.capturing, join_event, 0));
    }
    if (other_thread) {
        pthread_t t;
        pthread_create(&t, NULL, run_probe, &p);
        pthread_join(t, NULL);
    } else {
        run_probe(&p);
    }
    OUT(line, "call", p.code);
    OUT(line, "status", capture_status(p.capturing));
    OUT(line, "end", cudaStreamEndCapture(p.capturing, &graph));
    if (graph != NULL)
        SETUP(cudaGraphDestroy(graph));
out:
    printf("%s\n", line);
    cudaStreamSynchronize(p.other);
    if (probe != P_DESTROY_UNJOINED)
        cudaStreamDestroy(p.joined);
    cudaStreamDestroy(p.capturing);
    cudaStreamDestroy(p.other);
    cudaEventDestroy(p.captured);
    cudaEventDestroy(p.other_event);
    cudaEventDestroy(fork_event);
    cudaEventDestroy(join_event);
    cudaFree(dev);
    free(p.pageable);
}

/* --- replay ------------------------------------------------------------------------------ */

static int host_calls;
static void count_host_call(void *arg)
{
    (void)arg;
    host_calls++;
}

/* Nothing captured runs during capture; each launch replays everything in
 * order: memsets on two streams (fork and join), a host function, copies
 * between device and pinned memory. Three launches. */
static void case_replay(void)
{
    const char *name = "replay_order";
    if (!wanted(name))
        return;
    char line[256];
    snprintf(line, sizeof line, "%s:", name);
    cudaStream_t s1, s2;
    cudaEvent_t fork_event, join_event;
    unsigned char *dev = NULL, *pinned = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (!SETUP(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking)) ||
        !SETUP(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking)) ||
        !SETUP(cudaEventCreateWithFlags(&fork_event, cudaEventDisableTiming)) ||
        !SETUP(cudaEventCreateWithFlags(&join_event, cudaEventDisableTiming)) ||
        !SETUP(cudaMalloc((void **)&dev, 8192)) || !SETUP(cudaMallocHost((void **)&pinned, 8192)) ||
        !SETUP(cudaMemset(dev, 0, 8192)) || !SETUP(cudaDeviceSynchronize()))
        goto out;
    memset(pinned, 0xee, 8192);
    host_calls = 0;
    OUT(line, "begin", cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    SETUP(cudaMemsetAsync(dev, 0x11, 4096, s1));
    SETUP(cudaEventRecord(fork_event, s1));
    SETUP(cudaStreamWaitEvent(s2, fork_event, 0));
    SETUP(cudaMemsetAsync(dev + 4096, 0x22, 4096, s2)); /* in parallel with the next */
    SETUP(cudaLaunchHostFunc(s1, count_host_call, NULL));
    SETUP(cudaEventRecord(join_event, s2));
    SETUP(cudaStreamWaitEvent(s1, join_event, 0));
    SETUP(cudaMemcpyAsync(pinned, dev, 8192, cudaMemcpyDeviceToHost, s1));
    SETUP(cudaMemcpyAsync(dev, pinned + 4096, 16, cudaMemcpyHostToDevice, s1)); /* after the D2H */
    OUT(line, "end", cudaStreamEndCapture(s1, &graph));
    SETUP(cudaStreamSynchronize(s1));
    outs(line, sizeof line, "ran_during_capture", host_calls != 0 || pinned[0] != 0xee ? "yes" : "no");
    if (graph == NULL)
        goto out;
    OUT(line, "instantiate", cudaGraphInstantiate(&exec, graph, 0));
    bool ok = true;
    for (int round = 0; round < 3 && exec != NULL; round++) {
        memset(pinned, 0xee, 8192);
        ok = ok && cudaGraphLaunch(exec, s1) == cudaSuccess && cudaStreamSynchronize(s1) == cudaSuccess;
        for (int i = 0; i < 8192 && ok; i++)
            ok = pinned[i] == (i < 4096 ? 0x11 : 0x22);
        unsigned char head[16];
        ok = ok && cudaMemcpy(head, dev, 16, cudaMemcpyDeviceToHost) == cudaSuccess && head[0] == 0x22 &&
             head[15] == 0x22;
    }
    OUT(line, "host_calls", host_calls);
    outs(line, sizeof line, "data", ok ? "ok" : "bad");
    SETUP(cudaGraphExecDestroy(exec));
    SETUP(cudaGraphDestroy(graph));
out:
    printf("%s\n", line);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
    cudaEventDestroy(fork_event);
    cudaEventDestroy(join_event);
    cudaFree(dev);
    cudaFreeHost(pinned);
}

/* --- stream-ordered allocation ----------------------------------------------------------- */

/* Outside a capture: cudaMallocAsync gives device memory at once (pointer
 * attributes say so), usable in stream order, freed in stream order. */
static void case_malloc_async(void)
{
    const char *name = "malloc_async_plain";
    if (!wanted(name))
        return;
    char line[256];
    snprintf(line, sizeof line, "%s:", name);
    cudaStream_t s;
    unsigned char *dev = NULL, *in = malloc(N_BYTES), *back = malloc(N_BYTES);
    if (!SETUP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
        goto out;
    fill(in, N_BYTES, 9);
    OUT(line, "malloc", cudaMallocAsync((void **)&dev, N_BYTES, s));
    struct cudaPointerAttributes attr;
    OUT(line, "attrs", cudaPointerGetAttributes(&attr, dev));
    OUT(line, "type", attr.type);
    OUT(line, "h2d", cudaMemcpyAsync(dev, in, N_BYTES, cudaMemcpyHostToDevice, s));
    OUT(line, "d2h", cudaMemcpyAsync(back, dev, N_BYTES, cudaMemcpyDeviceToHost, s));
    OUT(line, "free", cudaFreeAsync(dev, s));
    OUT(line, "sync", cudaStreamSynchronize(s));
    outs(line, sizeof line, "data", memcmp(in, back, N_BYTES) == 0 ? "ok" : "bad");
out:
    printf("%s\n", line);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    free(in);
    free(back);
}

/* A graph allocation that the graph does not free outlives the launch (the
 * sample's d_negSquare_out): its pointer, returned during capture, holds the
 * replayed bytes after the launch; the graph cannot be launched again while
 * the allocation lives; after cudaFreeAsync it can. */
static void case_unfreed_graph_alloc(void)
{
    const char *name = "graph_alloc_outlives_launch";
    if (!wanted(name))
        return;
    char line[256];
    snprintf(line, sizeof line, "%s:", name);
    cudaStream_t s;
    unsigned char *dev = NULL, *in = malloc(4096), *back = malloc(4096);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (!SETUP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
        goto out;
    fill(in, 4096, 5);
    OUT(line, "begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    OUT(line, "malloc", cudaMallocAsync((void **)&dev, 4096, s));
    OUT(line, "h2d", cudaMemcpyAsync(dev, in, 4096, cudaMemcpyHostToDevice, s));
    OUT(line, "end", cudaStreamEndCapture(s, &graph));
    if (graph == NULL)
        goto out;
    OUT(line, "instantiate", cudaGraphInstantiate(&exec, graph, 0));
    OUT(line, "launch", cudaGraphLaunch(exec, s));
    OUT(line, "sync", cudaStreamSynchronize(s));
    OUT(line, "d2h", cudaMemcpy(back, dev, 4096, cudaMemcpyDeviceToHost));
    outs(line, sizeof line, "data", memcmp(in, back, 4096) == 0 ? "ok" : "bad");
    OUT(line, "relaunch", cudaGraphLaunch(exec, s));
    cudaGetLastError();
    OUT(line, "free", cudaFreeAsync(dev, s));
    OUT(line, "sync2", cudaStreamSynchronize(s));
    OUT(line, "relaunch_after_free", cudaGraphLaunch(exec, s));
    OUT(line, "sync3", cudaStreamSynchronize(s));
    OUT(line, "free2", cudaFreeAsync(dev, s));
    OUT(line, "sync4", cudaStreamSynchronize(s));
    SETUP(cudaGraphExecDestroy(exec));
    SETUP(cudaGraphDestroy(graph));
out:
    printf("%s\n", line);
    cudaGetLastError();
    cudaStreamDestroy(s);
    free(in);
    free(back);
}

/* Copies on another thread (its own stream) while this thread captures in
 * global mode: pageable in both directions, the copies the shim rewrites.
 * Natively they are stream work and leave the capture alone; under the
 * shim, whatever its pipelines call (event queries, pinned allocation) must
 * too. */
struct copier {
    unsigned char *in, *back;
    void *dev; /* allocated before the capture began */
    size_t bytes;
    int h2d, d2h, sync;
    bool ok;
};

static void *copy_on_other_thread(void *arg)
{
    struct copier *c = arg;
    cudaStream_t s;
    void *dev = c->dev;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return NULL;
    c->h2d = cudaMemcpyAsync(dev, c->in, c->bytes, cudaMemcpyHostToDevice, s);
    c->d2h = cudaMemcpyAsync(c->back, dev, c->bytes, cudaMemcpyDeviceToHost, s);
    c->ok = memcmp(c->in, c->back, c->bytes) == 0; /* a pageable D2H returns with the data */
    cudaStreamDestroy(s);
    return NULL;
}

static void case_other_thread_copies(void)
{
    const char *name = "other_thread_pageable_copies";
    if (!wanted(name))
        return;
    char line[256];
    snprintf(line, sizeof line, "%s:", name);
    const size_t bytes = 8u << 20; /* large enough for the shim's pipelines */
    struct copier c = {.in = malloc(bytes), .back = malloc(bytes), .bytes = bytes};
    cudaStream_t s;
    void *dev = NULL, *scratch = NULL;
    cudaGraph_t graph = NULL;
    if (!SETUP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) || !SETUP(cudaMalloc(&dev, bytes)) ||
        !SETUP(cudaMalloc(&scratch, 4096)))
        goto out;
    fill(c.in, bytes, 3);
    c.dev = dev;
    OUT(line, "begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    SETUP(cudaMemsetAsync(scratch, 0, 4096, s));
    pthread_t t;
    pthread_create(&t, NULL, copy_on_other_thread, &c);
    pthread_join(t, NULL);
    OUT(line, "h2d", c.h2d);
    OUT(line, "d2h", c.d2h);
    outs(line, sizeof line, "data", c.ok ? "ok" : "bad");
    OUT(line, "end", cudaStreamEndCapture(s, &graph));
    if (graph != NULL)
        SETUP(cudaGraphDestroy(graph));
out:
    printf("%s\n", line);
    cudaStreamDestroy(s);
    cudaFree(dev);
    cudaFree(scratch);
    free(c.in);
    free(c.back);
}

int main(int argc, char **argv)
{
    only = argc > 1 ? argv[1] : NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!SETUP(cudaFree(NULL)))
        return 2;
    const enum cudaStreamCaptureMode G = cudaStreamCaptureModeGlobal, T = cudaStreamCaptureModeThreadLocal,
                                     R = cudaStreamCaptureModeRelaxed;

    /* first: the shim's first rewritten copies (pinned pool allocation,
     * event queries) happen while this thread captures */
    case_other_thread_copies();
    case_memory_nodes("memory_nodes_destroy_after_end", false);
    case_memory_nodes("memory_nodes_destroy_inside", true);

    /* allocation during a capture: the measured rule */
    case_probe("global_other_thread_malloc", P_MALLOC, G, true, G);
    case_probe("global_other_thread_relaxed_malloc", P_MALLOC, G, true, R);
    case_probe("global_same_thread_malloc", P_MALLOC, G, false, G);
    case_probe("global_same_thread_relaxed_malloc", P_MALLOC, G, false, R);
    case_probe("threadlocal_other_thread_malloc", P_MALLOC, T, true, G);
    case_probe("threadlocal_same_thread_malloc", P_MALLOC, T, false, G);
    case_probe("relaxed_same_thread_malloc", P_MALLOC, R, false, G);
    case_probe("global_other_thread_host_alloc", P_HOST_ALLOC, G, true, G);
    case_probe("global_other_thread_relaxed_host_alloc", P_HOST_ALLOC, G, true, R);
    /* synchronization and queries */
    case_probe("global_same_thread_sync_capturing", P_STREAM_SYNC_CAPTURING, G, false, G);
    case_probe("global_same_thread_query_capturing", P_STREAM_QUERY_CAPTURING, G, false, G);
    case_probe("relaxed_mode_query_capturing", P_STREAM_QUERY_CAPTURING, G, false, R);
    case_probe("global_same_thread_query_captured_event", P_EVENT_QUERY_CAPTURED, G, false, G);
    case_probe("global_other_thread_query_other_stream", P_STREAM_QUERY_OTHER, G, true, G);
    case_probe("global_other_thread_sync_other_stream", P_STREAM_SYNC_OTHER, G, true, G);
    case_probe("global_other_thread_query_other_event", P_EVENT_QUERY_OTHER, G, true, G);
    case_probe("global_other_thread_relaxed_query_other_event", P_EVENT_QUERY_OTHER, G, true, R);
    case_probe("global_other_thread_sync_other_event", P_EVENT_SYNC_OTHER, G, true, G);
    case_probe("global_same_thread_query_other_event", P_EVENT_QUERY_OTHER, G, false, G);
    case_probe("global_same_thread_device_sync", P_DEVICE_SYNC, G, false, G);
    case_probe("global_other_thread_device_sync", P_DEVICE_SYNC, G, true, G);
    /* what the shim called on stream creation and destruction */
    case_probe("global_get_flags_capturing", P_GET_FLAGS_CAPTURING, G, false, G);
    case_probe("global_get_device_capturing", P_GET_DEVICE_CAPTURING, G, false, G);
    case_probe("global_get_flags_joined", P_GET_FLAGS_JOINED, G, false, G);
    case_probe("global_get_device_joined", P_GET_DEVICE_JOINED, G, false, G);
    case_probe("global_pointer_attributes", P_POINTER_ATTRS, G, false, G);
    case_probe("global_stream_create_destroy", P_STREAM_CREATE, G, false, G);
    case_probe("global_event_create_destroy", P_EVENT_CREATE_DESTROY, G, false, G);
    /* joins */
    case_probe("global_wait_outside_event", P_WAIT_OUTSIDE_EVENT, G, false, G);
    case_probe("global_destroy_unjoined", P_DESTROY_UNJOINED, G, false, G);

    case_replay();
    case_malloc_async();
    case_unfreed_graph_alloc();
    if (failures > 0)
        fprintf(stderr, "capture_conform: %d setup call(s) failed\n", failures);
    return failures > 0 ? 1 : 0;
}
