/* ondevice.c - see ondevice.h. */
#include "ondevice.h"

#include "log.h"
#include "real.h"

static int logged_event, logged_stream;

/* Runs make(out) with `device` current, switching only when needed. */
static cudaError_t on_device(int device, int current, cudaError_t (*make)(void *, unsigned), void *out,
                             unsigned flags)
{
    const struct us_real_api *real = us_real();
    if (device != current) {
        cudaError_t err = real->cudaSetDevice(device);
        if (err != cudaSuccess)
            return err;
    }
    cudaError_t err = make(out, flags);
    if (device != current) {
        cudaError_t back = real->cudaSetDevice(current);
        if (err == cudaSuccess && back != cudaSuccess) {
            err = back;
        }
    }
    return err;
}

static cudaError_t make_event(void *out, unsigned flags)
{
    return us_real()->cudaEventCreateWithFlags(out, flags);
}

static cudaError_t make_stream(void *out, unsigned flags)
{
    return us_real()->cudaStreamCreateWithFlags(out, flags);
}

cudaError_t us_ondevice_event_create(int device, int current, cudaEvent_t *out)
{
    cudaEvent_t ev = NULL;
    cudaError_t err = on_device(device, current, make_event, &ev, cudaEventDisableTiming);
    if (err == cudaSuccess) {
        *out = ev;
        return err;
    }
    if (ev != NULL)
        us_real()->cudaEventDestroy(ev);
    us_log_once(&logged_event, US_LOG_WARN, "cannot create the shim's events (%s): copies go native",
                us_real_error_name(err));
    return err;
}

cudaError_t us_ondevice_stream_create(int device, int current, cudaStream_t *out)
{
    cudaStream_t s = NULL;
    cudaError_t err = on_device(device, current, make_stream, &s, cudaStreamNonBlocking);
    if (err == cudaSuccess) {
        *out = s;
        return err;
    }
    if (s != NULL)
        us_real()->cudaStreamDestroy(s);
    us_log_once(&logged_stream, US_LOG_WARN, "cannot create the shim's streams (%s): copies go native",
                us_real_error_name(err));
    return err;
}
