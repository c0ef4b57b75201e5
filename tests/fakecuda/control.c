/* control.c - the test controls: fault sites (environment and
 * fakecuda_set_fault), armed stream errors, statistics, and the process-wide
 * API lock of case C with the figures tests read about it. */
#include "fc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fakecuda_stats fc_stats_now;
pthread_mutex_t fc_stats_mu = PTHREAD_MUTEX_INITIALIZER;

/* --- fault sites --------------------------------------------------------------------------- */

struct fc_fault_site {
    unsigned long nth;   /* 0: disarmed */
    unsigned long count; /* 0: every call from the nth on */
    unsigned long calls; /* counted since armed */
    cudaError_t err;
};

static const struct {
    const char *env;
    cudaError_t def;
} site_info[FAKECUDA_FAULT_SITES] = {
    [FAKECUDA_FAULT_HOST_ALLOC] = {"FAKECUDA_FAULT_HOST_ALLOC", cudaErrorMemoryAllocation},
    [FAKECUDA_FAULT_HOST_REGISTER] = {"FAKECUDA_FAULT_HOST_REGISTER", cudaErrorMemoryAllocation},
    [FAKECUDA_FAULT_EVENT_CREATE] = {"FAKECUDA_FAULT_EVENT_CREATE", cudaErrorMemoryAllocation},
    [FAKECUDA_FAULT_STREAM_CREATE] = {"FAKECUDA_FAULT_STREAM_CREATE", cudaErrorMemoryAllocation},
    [FAKECUDA_FAULT_MALLOC] = {"FAKECUDA_FAULT_MALLOC", cudaErrorMemoryAllocation},
    [FAKECUDA_FAULT_ASYNC] = {"FAKECUDA_FAULT_ASYNC", cudaErrorLaunchFailure},
};

static struct fc_fault_site sites[FAKECUDA_FAULT_SITES];
static pthread_mutex_t faults_mu = PTHREAD_MUTEX_INITIALIZER;

static void arm(enum fakecuda_fault_site site, unsigned long nth, unsigned long count, cudaError_t err)
{
    pthread_mutex_lock(&faults_mu);
    sites[site] = (struct fc_fault_site){
        .nth = nth,
        .count = count,
        .err = err != cudaSuccess ? err : site_info[site].def,
    };
    pthread_mutex_unlock(&faults_mu);
}

cudaError_t fc_fault(enum fakecuda_fault_site site)
{
    pthread_mutex_lock(&faults_mu);
    struct fc_fault_site *f = &sites[site];
    bool hit = false;
    if (f->nth != 0) {
        unsigned long n = ++f->calls;
        hit = n >= f->nth && (f->count == 0 || n - f->nth < f->count);
    }
    cudaError_t err = hit ? f->err : cudaSuccess;
    pthread_mutex_unlock(&faults_mu);
    if (hit)
        fc_stat_add(faults_injected, 1);
    return err;
}

int fakecuda_set_fault(enum fakecuda_fault_site site, unsigned long nth, unsigned long count, cudaError_t err)
{
    fc_init(); /* the environment is read first, then replaced here */
    if ((unsigned)site >= FAKECUDA_FAULT_SITES)
        return -1;
    arm(site, nth, count, err);
    return 0;
}

static bool parse_ulong(const char *text, char **end, unsigned long *out)
{
    errno = 0;
    if (*text < '0' || *text > '9')
        return false;
    *out = strtoul(text, end, 10);
    return errno == 0;
}

/* "N", "N:COUNT" or "N:COUNT:ERROR" (ERROR: a cudaError name or number). */
static bool parse_fault(const char *text, unsigned long *nth, unsigned long *count, cudaError_t *err)
{
    char *end;
    *count = 0;
    *err = cudaSuccess;
    if (!parse_ulong(text, &end, nth))
        return false;
    if (*end == '\0')
        return true;
    if (*end != ':' || !parse_ulong(end + 1, &end, count))
        return false;
    if (*end == '\0')
        return true;
    if (*end != ':')
        return false;
    const char *name = end + 1;
    unsigned long code;
    if (parse_ulong(name, &end, &code) && *end == '\0') {
        *err = (cudaError_t)code;
        return true;
    }
    return fc_error_from_name(name, err);
}

void fc_faults_from_env(void)
{
    for (int site = 0; site < FAKECUDA_FAULT_SITES; site++) {
        const char *text = getenv(site_info[site].env);
        unsigned long nth = 0, count = 0;
        cudaError_t err = cudaSuccess;
        if (text != NULL && *text != '\0' && !parse_fault(text, &nth, &count, &err)) {
            fprintf(stderr, "fakecuda: ignoring %s=\"%s\": expected N[:COUNT[:ERROR]]\n", site_info[site].env, text);
            nth = 0;
        }
        arm((enum fakecuda_fault_site)site, nth, count, err);
    }
}

cudaError_t fakecuda_fail_stream(cudaStream_t stream, cudaError_t err)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    pthread_mutex_lock(&fc_g.mu);
    struct fc_stream *s;
    cudaError_t rc = fc_stream_get(stream, false, &s);
    if (rc == cudaSuccess)
        s->armed = err != cudaSuccess ? err : cudaErrorLaunchFailure;
    pthread_mutex_unlock(&fc_g.mu);
    return rc;
}

void fakecuda_reset_faults(void)
{
    if (!fc_enter())
        return;
    for (int site = 0; site < FAKECUDA_FAULT_SITES; site++)
        arm((enum fakecuda_fault_site)site, 0, 0, cudaSuccess);
    pthread_mutex_lock(&fc_g.mu);
    for (size_t i = 0; i < fc_g.nall; i++) {
        fc_g.all[i]->armed = cudaSuccess;
        fc_g.all[i]->sticky = cudaSuccess;
    }
    pthread_mutex_unlock(&fc_g.mu);
}

/* --- statistics ------------------------------------------------------------------------------ */

void fakecuda_stats(struct fakecuda_stats *out)
{
    pthread_mutex_lock(&fc_stats_mu);
    *out = fc_stats_now;
    pthread_mutex_unlock(&fc_stats_mu);
}

void fakecuda_reset_stats(void)
{
    pthread_mutex_lock(&fc_stats_mu);
    int running = fc_stats_now.workers_running; /* a gauge, not a count */
    memset(&fc_stats_now, 0, sizeof fc_stats_now);
    fc_stats_now.workers_running = running;
    pthread_mutex_unlock(&fc_stats_mu);
}

/* --- the API lock (case C) ----------------------------------------------------------------- */

static pthread_mutex_t api_mu = PTHREAD_MUTEX_INITIALIZER;
static double api_taken_at; /* guarded by api_mu */

void fc_api_lock(void)
{
    if (pthread_mutex_trylock(&api_mu) != 0) {
        double t0 = fc_now_us();
        pthread_mutex_lock(&api_mu);
        double waited = fc_now_us() - t0;
        fc_stat_add(api_lock_waits, 1);
        fc_stat_max(api_lock_max_wait_us, waited);
    }
    api_taken_at = fc_now_us();
}

void fc_api_unlock(void)
{
    double held = fc_now_us() - api_taken_at;
    pthread_mutex_unlock(&api_mu);
    fc_stat_max(api_lock_max_hold_us, held);
}

void fc_api_touch(void)
{
    fc_api_lock();
    fc_api_unlock();
}
