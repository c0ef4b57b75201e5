/* fc.c - process state of the simulation: start-up, the clock, the calling
 * thread's current device and last error, error names and versions. */
#include "fc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fc_global fc_g = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool forked_child; /* set in the child of a fork() after first use */
static __thread int tls_device;
static __thread struct fc_ctx *tls_ctx; /* NULL: the primary context of tls_device */
static __thread cudaError_t tls_last_error;

static struct timespec to_timespec(double t_us)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(t_us / 1e6);
    ts.tv_nsec = (long)((t_us - (double)ts.tv_sec * 1e6) * 1e3);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

void fc_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

bool fc_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, double t_us)
{
    struct timespec ts = to_timespec(t_us);
    return pthread_cond_timedwait(cond, mu, &ts) != ETIMEDOUT;
}

static void atfork_child(void)
{
    forked_child = true;
}

static void init(void)
{
    /* fc_g.done is statically initialized for the realtime clock: make it
     * wait on CLOCK_MONOTONIC, like fc_now_us. Nothing waited on it yet. */
    pthread_cond_destroy(&fc_g.done);
    fc_cond_init(&fc_g.done);

    pthread_atfork(NULL, NULL, atfork_child);
    fc_config_load(-1);
    fc_faults_from_env();
    pthread_mutex_lock(&fc_g.mu);
    fc_g.ndev = fc_cfg()->devices;
    for (int d = 0; d < fc_g.ndev; d++) {
        fc_g.primary[d] = (struct fc_ctx){.device = d, .primary = true, .live = true, .id = (unsigned long long)d + 1};
        fc_g.dev[d].legacy = fc_stream_new_locked(FC_STREAM_LEGACY, d, 0, 0);
        fc_g.dev[d].legacy->ctx = &fc_g.primary[d];
        fc_g.primary[d].legacy = fc_g.dev[d].legacy;
    }
    pthread_mutex_unlock(&fc_g.mu);
}

void fc_init(void)
{
    pthread_once(&init_once, init);
}

bool fc_enter(void)
{
    fc_init();
    return !forked_child;
}

void fakecuda_reload_config(void)
{
    fc_init();
    fc_config_load(fc_g.ndev);
    fc_faults_from_env();
}

double fc_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void fc_sleep_until_us(double t_us)
{
    struct timespec ts = to_timespec(t_us);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void fakecuda_sleep_us(double us)
{
    fc_init();
    if (us > 0)
        fc_sleep_until_us(fc_now_us() + us * fc_cfg()->time_scale);
}

cudaError_t fc_ret(cudaError_t err)
{
    if (err != cudaSuccess && err != cudaErrorNotReady)
        tls_last_error = err;
    return err;
}

int fc_current_device(void)
{
    return tls_ctx != NULL ? tls_ctx->device : tls_device;
}

struct fc_ctx *fc_current_ctx(void)
{
    if (tls_ctx != NULL)
        return tls_ctx;
    struct fc_ctx *primary = &fc_g.primary[tls_device];
    if (!__atomic_load_n(&primary->used, __ATOMIC_RELAXED))
        __atomic_store_n(&primary->used, true, __ATOMIC_RELAXED); /* active from now on */
    return primary;
}

void fc_set_current_ctx(struct fc_ctx *ctx)
{
    if (ctx != NULL && ctx->primary) {
        tls_device = ctx->device;
        ctx = NULL;
    }
    tls_ctx = ctx;
}

/* --- devices: selection and versions ---------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (count == NULL)
        return fc_ret(cudaErrorInvalidValue);
    *count = fc_g.ndev;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (device == NULL)
        return fc_ret(cudaErrorInvalidValue);
    *device = fc_current_device();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (device < 0 || device >= fc_g.ndev)
        return fc_ret(cudaErrorInvalidDevice);
    fc_set_current_ctx(&fc_g.primary[device]); /* the runtime works in primary contexts */
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    if (version == NULL)
        return fc_ret(cudaErrorInvalidValue);
    *version = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (version == NULL)
        return fc_ret(cudaErrorInvalidValue);
    *version = 13000;
    return cudaSuccess;
}

/* --- errors ------------------------------------------------------------------------------------ */

struct fc_error_row {
    int code;
    const char *name, *text;
};

static const struct fc_error_row errors[] = {
#define FC_ERROR(code, name, text) {code, #name, text},
#include "errors_table.h"
#undef FC_ERROR
};

static const struct fc_error_row *error_row(cudaError_t err)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)err)
            return &errors[i];
    return NULL;
}

const char *cudaGetErrorName(cudaError_t err)
{
    const struct fc_error_row *r = error_row(err);
    return r != NULL ? r->name : "unrecognized error code";
}

const char *cudaGetErrorString(cudaError_t err)
{
    const struct fc_error_row *r = error_row(err);
    return r != NULL ? r->text : "unrecognized error code";
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t err = tls_last_error;
    tls_last_error = cudaSuccess;
    return err;
}

cudaError_t cudaPeekAtLastError(void)
{
    return tls_last_error;
}

bool fc_error_from_name(const char *name, cudaError_t *out)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (strcmp(errors[i].name, name) == 0) {
            *out = (cudaError_t)errors[i].code;
            return true;
        }
    }
    return false;
}
