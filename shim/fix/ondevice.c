/* ondevice.c - see ondevice.h. */
#include "ondevice.h"

#include "log.h"
#include "real.h"

static int logged_event, logged_stream;

cudaError_t us_ondevice_enter(int device, const struct us_ctx *home)
{
    return device == home->device ? cudaSuccess : us_real()->cudaSetDevice(device);
}

cudaError_t us_ondevice_leave(int device, const struct us_ctx *home)
{
    return device == home->device ? cudaSuccess : us_context_restore(home);
}

/* Runs make(out) with `device` current, switching only when needed. */
static cudaError_t on_device(int device, const struct us_ctx *home, cudaError_t (*make)(void *, unsigned), void *out,
                             unsigned flags)
{
    cudaError_t err = us_ondevice_enter(device, home);
    if (err != cudaSuccess)
        return err;
    err = make(out, flags);
    cudaError_t back = us_ondevice_leave(device, home);
    return err == cudaSuccess ? back : err;
}

static cudaError_t make_event(void *out, unsigned flags)
{
    return us_real()->cudaEventCreateWithFlags(out, flags);
}

static cudaError_t make_stream(void *out, unsigned flags)
{
    return us_real()->cudaStreamCreateWithFlags(out, flags);
}

/* Runs make(out) in context `in`, pushed when it is not `home`. */
static cudaError_t in_context(const struct us_ctx *in, const struct us_ctx *home,
                              cudaError_t (*make)(void *, unsigned), void *out, unsigned flags)
{
    if (in == home || in->handle == NULL)
        return on_device(in->device, home, make, out, flags);
    bool pushed = false;
    if (!us_context_push(in->handle, &pushed))
        return cudaErrorInvalidResourceHandle;
    cudaError_t err = make(out, flags);
    us_context_leave_primary(pushed);
    return err;
}

static cudaError_t event_made(cudaError_t err, cudaEvent_t ev, cudaEvent_t *out)
{
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

cudaError_t us_ondevice_event_create_in(const struct us_ctx *in, const struct us_ctx *home, cudaEvent_t *out)
{
    cudaEvent_t ev = NULL;
    cudaError_t err = in_context(in, home, make_event, &ev, cudaEventDisableTiming);
    return event_made(err, ev, out);
}

cudaError_t us_ondevice_event_create(int device, const struct us_ctx *home, cudaEvent_t *out)
{
    cudaEvent_t ev = NULL;
    cudaError_t err = on_device(device, home, make_event, &ev, cudaEventDisableTiming);
    return event_made(err, ev, out);
}

cudaError_t us_ondevice_stream_create(int device, const struct us_ctx *home, cudaStream_t *out)
{
    cudaStream_t s = NULL;
    cudaError_t err = on_device(device, home, make_stream, &s, cudaStreamNonBlocking);
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
