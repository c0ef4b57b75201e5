/* passthrough.c - the cost the shim adds to calls it passes through: a
 * million intercepted calls that cost the simulated runtime almost nothing,
 * timed in one process. tools/bench/passthrough.sh runs it without the shim
 * and with LD_PRELOAD and prints the two side by side.
 *
 * Calls (each PT_CALLS times, default 1000000, best of PT_REPS, default 5):
 *   memcpy_async_0B        cudaMemcpyAsync of 0 bytes, pinned -> device (a no-op copy)
 *   memcpy_async_pinned    cudaMemcpyAsync of 64 bytes, pinned -> device, on a
 *                          non-blocking stream (classified, passed through)
 *   memcpy_async_d2d       cudaMemcpyAsync of 64 bytes, device -> device, same device
 *   stream_query           cudaStreamQuery of an idle stream
 *   event_record           cudaEventRecord on a non-blocking stream
 *   launch_empty           cudaLaunchKernel of an empty kernel
 * Queued calls (copies, event records, launches) run PT_QUEUED_CALLS times
 * (default 10000) in batches of 256; only the calls are timed, the stream
 * is synchronized between batches. The simulated runtime's workers run the
 * work meanwhile and compete for the CPU, so these figures are noisier than
 * the no-op copy's and the stream query's. Output: "PASSTHROUGH call=<name> calls=<n> ns_per_call=<x>".
 * Build: see passthrough.sh (gcc, against the simulated runtime). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "fakecuda.h"

#define CK(call)                                                                                         \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "passthrough: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static void empty_kernel(void **args)
{
    (void)args;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long env_long(const char *name, long def)
{
    const char *t = getenv(name);
    return t != NULL && *t != '\0' ? strtol(t, NULL, 10) : def;
}

static void *pinned, *dev, *dev2;
static cudaStream_t stream;
static cudaEvent_t event;

enum call { MEMCPY_0B, MEMCPY_PINNED, MEMCPY_D2D, STREAM_QUERY, EVENT_RECORD, LAUNCH_EMPTY, NCALLS };
static const char *const names[NCALLS] = {"memcpy_async_0B", "memcpy_async_pinned", "memcpy_async_d2d",
                                          "stream_query", "event_record", "launch_empty"};
static const int queued[NCALLS] = {0, 1, 1, 0, 1, 1};

/* ns per call of n calls; queued calls are issued in batches of 256 and the
 * stream is synchronized between batches, outside the timed part. */
static double run(enum call c, long n)
{
    dim3 one = {1, 1, 1};
    long batch = queued[c] ? 256 : n;
    double total = 0;
    CK(cudaStreamSynchronize(stream));
    for (long done = 0; done < n; done += batch) {
        long k = n - done < batch ? n - done : batch;
        double t0 = now_ns();
        for (long i = 0; i < k; i++) {
            switch (c) {
            case MEMCPY_0B: CK(cudaMemcpyAsync(dev, pinned, 0, cudaMemcpyHostToDevice, stream)); break;
            case MEMCPY_PINNED: CK(cudaMemcpyAsync(dev, pinned, 64, cudaMemcpyHostToDevice, stream)); break;
            case MEMCPY_D2D: CK(cudaMemcpyAsync(dev2, dev, 64, cudaMemcpyDeviceToDevice, stream)); break;
            case STREAM_QUERY: CK(cudaStreamQuery(stream)); break;
            case EVENT_RECORD: CK(cudaEventRecord(event, stream)); break;
            case LAUNCH_EMPTY: CK(cudaLaunchKernel((const void *)empty_kernel, one, one, NULL, 0, stream)); break;
            case NCALLS: break;
            }
        }
        total += now_ns() - t0;
        if (queued[c])
            CK(cudaStreamSynchronize(stream));
    }
    return total / (double)n;
}

int main(int argc, char **argv)
{
    long calls = env_long("PT_CALLS", 1000000);
    long qcalls = env_long("PT_QUEUED_CALLS", 10000);
    long reps = env_long("PT_REPS", 5);
    if (calls < 1 || qcalls < 1 || reps < 1) {
        fprintf(stderr, "passthrough: PT_CALLS, PT_QUEUED_CALLS and PT_REPS must be positive\n");
        return 2;
    }
    CK(cudaSetDevice(0));
    CK(cudaMallocHost(&pinned, 4096));
    CK(cudaMalloc(&dev, 4096));
    CK(cudaMalloc(&dev2, 4096));
    memset(pinned, 1, 4096);
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    fakecuda_register_kernel((const void *)empty_kernel, 0, NULL);

    for (int c = 0; c < NCALLS; c++) {
        if (argc > 1) { /* only the calls named on the command line */
            int wanted = 0;
            for (int i = 1; i < argc; i++)
                wanted |= strcmp(argv[i], names[c]) == 0;
            if (!wanted)
                continue;
        }
        long n = queued[c] ? qcalls : calls;
        run((enum call)c, n / 10 + 1); /* warm-up: workers started, tables filled */
        double best = 1e30;
        for (long r = 0; r < reps; r++) {
            double ns = run((enum call)c, n);
            if (ns < best)
                best = ns;
        }
        printf("PASSTHROUGH call=%s calls=%ld ns_per_call=%.1f\n", names[c], n, best);
        fflush(stdout);
    }
    CK(cudaEventDestroy(event));
    CK(cudaStreamDestroy(stream));
    CK(cudaFree(dev));
    CK(cudaFree(dev2));
    CK(cudaFreeHost(pinned));
    return 0;
}
