/* latency.c - launch latency under a D2H loop (latency.h). */
#include "latency.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "scenario.h"

struct launcher {
    double dur_ms;
    double *lat;
    size_t cap, n;
    bool trace; /* SCN_LAT_TRACE=1: each launch over 1 ms on stderr, with when it began */
};

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
    while (l->n < l->cap) {
        double t0 = scn_now_ms();
        if (t0 >= end)
            break;
        scn_kernel_empty(s);
        double took = scn_now_ms() - t0;
        l->lat[l->n++] = took;
        if (took > 1.0 && l->trace) /* when, to be set beside what else ran then */
            fprintf(stderr, "launch over 1 ms: at %.3f ms (monotonic clock), %.3f ms\n", t0, took);
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
    struct launcher b = {.cap = 4u << 20, .trace = trace};
    b.lat = malloc(b.cap * sizeof *b.lat);
    if (b.lat == NULL || l->n == 0)
        return false;
    b.dur_ms = l->base_ms;
    if (!run_launcher(&b)) {
        free(b.lat);
        return false;
    }
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
