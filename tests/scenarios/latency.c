/* latency.c - launch latency under a D2H loop (latency.h). */
#include "latency.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kernels.h"
#include "scenario.h"

/* What the launching thread went through during its slow launches
 * (SCN_LAT_TRACE=1): a launch that lost its CPU to another thread counts an
 * involuntary context switch, one that slept on a lock (a futex, the
 * kernel's mmap lock) a voluntary one, one that faulted pages in a minor
 * fault; a slow launch with none of them spun or worked. */
struct slow_launches {
    size_t count, preempted, slept, faulted, none;
};

struct launcher {
    double dur_ms;
    double *lat;
    size_t cap, n;
    bool trace;       /* SCN_LAT_TRACE=1: each launch over trace_ms on stderr, with when it began */
    double trace_ms;  /* SCN_LAT_TRACE_MS (1) */
    struct slow_launches slow;
};

static void thread_usage(struct rusage *u)
{
    if (getrusage(RUSAGE_THREAD, u) != 0)
        memset(u, 0, sizeof *u);
}

/* A launch of `took` ms between usage readings `before` and `after`. */
static void note_slow_launch(struct launcher *l, double t0, double took, const struct rusage *before,
                             const struct rusage *after)
{
    long preempted = after->ru_nivcsw - before->ru_nivcsw, slept = after->ru_nvcsw - before->ru_nvcsw,
         faulted = after->ru_minflt - before->ru_minflt;
    l->slow.count++;
    l->slow.preempted += preempted > 0;
    l->slow.slept += slept > 0;
    l->slow.faulted += faulted > 0;
    l->slow.none += preempted == 0 && slept == 0 && faulted == 0;
    fprintf(stderr,
            "slow launch: at %.3f ms (monotonic clock), %.3f ms; involuntary switches %ld, voluntary %ld, minor "
            "faults %ld\n",
            t0, took, preempted, slept, faulted);
}

static void *launcher_main(void *arg)
{
    struct launcher *l = arg;
    SCN_CK(cudaSetDevice(0));
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    scn_kernel_empty(s);
    SCN_CK(cudaStreamSynchronize(s));
    double end = scn_now_ms() + l->dur_ms;
    l->n = 0;
    memset(&l->slow, 0, sizeof l->slow);
    struct rusage before, after;
    if (l->trace)
        thread_usage(&before);
    while (l->n < l->cap) {
        double t0 = scn_now_ms();
        if (t0 >= end)
            break;
        scn_kernel_empty(s);
        double took = scn_now_ms() - t0;
        l->lat[l->n++] = took;
        if (l->trace) { /* read outside the timed call: the loop slows, the launches do not */
            thread_usage(&after);
            if (took > l->trace_ms)
                note_slow_launch(l, t0, took, &before, &after);
            before = after;
        }
        if (l->n % 64 == 0)
            SCN_CK(cudaStreamSynchronize(s));
    }
    SCN_CK(cudaStreamSynchronize(s));
    SCN_CK(cudaStreamDestroy(s));
    return NULL;
}

struct copier {
    struct scn_latency *l;
    bool trace; /* SCN_LAT_TRACE=1: each copy on stderr, with when it began */
    atomic_bool stop, started;
};

static void *copier_main(void *arg)
{
    struct copier *c = arg;
    struct scn_latency *l = c->l;
    SCN_CK(cudaSetDevice(0));
    cudaStream_t s;
    SCN_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    l->ok = true;
    while (!atomic_load(&c->stop)) {
        /* spoil both ends: the copy must write them again */
        l->host[0] ^= 0xFF;
        l->host[l->n - 1] ^= 0xFF;
        double t0 = scn_now_ms();
        SCN_CK(cudaMemcpyAsync(l->host, l->dsrc, l->n, cudaMemcpyDeviceToHost, s));
        double called = scn_now_ms();
        SCN_CK(cudaStreamSynchronize(s));
        l->copy_ms += scn_now_ms() - t0;
        if (c->trace)
            fprintf(stderr, "copy: at %.3f ms (monotonic clock), call %.3f ms, done %.3f ms\n", t0, called - t0,
                    scn_now_ms() - t0);
        l->copies++;
        atomic_store(&c->started, true);
        size_t edge = l->n < 64 ? l->n : 64;
        l->ok = l->ok && scn_verify(l->host, edge, l->seed) &&
                scn_verify_at(l->host + l->n - edge, edge, l->seed, l->n - edge);
        scn_sleep_ms(l->gap_ms);
    }
    l->ok = l->ok && scn_verify(l->host, l->n, l->seed);
    SCN_CK(cudaStreamDestroy(s));
    return NULL;
}

static bool run_launcher(struct launcher *l)
{
    pthread_t t;
    if (pthread_create(&t, NULL, launcher_main, l) != 0)
        return false;
    pthread_join(t, NULL);
    return true;
}

bool scn_launch_latency(struct scn_latency *l)
{
    bool trace = scn_env_long("LAT_TRACE", 0, 0) == 1;
    struct launcher b = {.cap = 4u << 20, .trace = trace, .trace_ms = scn_env_double("LAT_TRACE_MS", 1.0, 1.0)};
    b.lat = malloc(b.cap * sizeof *b.lat);
    if (b.lat == NULL || l->n == 0)
        return false;
    b.dur_ms = l->base_ms;
    if (!run_launcher(&b)) {
        free(b.lat);
        return false;
    }
    if (trace)
        fprintf(stderr, "slow launches alone: %zu over %.3f ms (preempted %zu, slept %zu, faulted %zu, none %zu)\n",
                b.slow.count, b.trace_ms, b.slow.preempted, b.slow.slept, b.slow.faulted, b.slow.none);
    l->base_launches = b.n;
    l->base_p99_ms = scn_quantile(b.lat, b.n, 0.99);
    l->base_max_ms = scn_quantile(b.lat, b.n, 1.0);

    struct copier c = {.l = l, .trace = trace};
    l->copies = 0;
    l->copy_ms = 0;
    pthread_t ct;
    if (pthread_create(&ct, NULL, copier_main, &c) != 0) {
        free(b.lat);
        return false;
    }
    while (!atomic_load(&c.started))
        scn_sleep_ms(0.1);
    b.dur_ms = l->dur_ms;
    bool ran = run_launcher(&b);
    atomic_store(&c.stop, true);
    pthread_join(ct, NULL);
    if (trace)
        fprintf(stderr,
                "slow launches beside the copies: %zu over %.3f ms (preempted %zu, slept %zu, faulted %zu, none %zu)\n",
                b.slow.count, b.trace_ms, b.slow.preempted, b.slow.slept, b.slow.faulted, b.slow.none);
    l->launches = b.n;
    l->over_1ms = 0;
    for (size_t i = 0; i < b.n; i++)
        l->over_1ms += b.lat[i] > 1.0;
    l->p50_ms = scn_quantile(b.lat, b.n, 0.5);
    l->p99_ms = scn_quantile(b.lat, b.n, 0.99);
    l->max_ms = scn_quantile(b.lat, b.n, 1.0);
    if (l->copies > 0)
        l->copy_ms /= (double)l->copies;
    free(b.lat);
    return ran;
}
