/* device.c - exported device-wide functions: peer access (the state that
 * decides whether a cross-GPU copy is staged), device synchronization, and
 * device reset (the shim's streams, events and pinned memory of that device
 * die with its context). */
#include "device_state.h"
#include "context.h"
#include "export.h"
#include "lanes.h"
#include "staging.h"

US_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    const struct us_real_api *real = us_real();
    if (real->cudaDeviceEnablePeerAccess == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaDeviceEnablePeerAccess(peerDevice, flags);
    if ((err == cudaSuccess || err == cudaErrorPeerAccessAlreadyEnabled) && !us_passthrough())
        us_device_note_peer(us_current_device(), peerDevice, true);
    return err;
}

US_EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
    const struct us_real_api *real = us_real();
    if (real->cudaDeviceDisablePeerAccess == NULL)
        return US_ERR_NO_REAL;
    cudaError_t err = real->cudaDeviceDisablePeerAccess(peerDevice);
    if ((err == cudaSuccess || err == cudaErrorPeerAccessNotEnabled) && !us_passthrough())
        us_device_note_peer(us_current_device(), peerDevice, false);
    return err;
}

US_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t (*real_fn)(void) = us_real()->cudaDeviceSynchronize;
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn() : US_ERR_NO_REAL;
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_explicit_sync, __func__))
        return US_ERR_FORBIDDEN;
    us_state_enter(); /* its cuCtxSynchronize passes the driver layer straight through */
    cudaError_t err = real_fn();
    us_state_leave();
    us_watch_end(&w, NULL, US_STREAM_USER, us_current_device(), 0);
    return err;
}

/* The reset destroys the current device's primary context: every stream,
 * event and allocation of it, the shim's included. The shim forgets its own
 * (never destroying or freeing them again: they are gone) and makes them
 * again on next use; peer access from and to the device is off. A copy the
 * shim is issuing on another thread during the reset fails, as the native
 * one would. */
US_EXPORT cudaError_t cudaDeviceReset(void)
{
    cudaError_t (*real_fn)(void) = us_real()->cudaDeviceReset;
    if (!us_entry_acts(real_fn != NULL))
        return real_fn != NULL ? real_fn() : US_ERR_NO_REAL;
    int device = us_current_device();
    /* the primary context's entry leaves the lookups first (context.h) */
    struct us_ctx gone;
    bool known = us_context_retire_primary(device, &gone);
    cudaError_t err = real_fn();
    if (known)
        us_context_forget_gone(&gone);
    if (err == cudaSuccess && device >= 0 && device < US_MAX_DEVICES) {
        us_lanes_forget_device(device);
        us_staging_forget_device(device);
        for (int peer = 0; peer < US_MAX_DEVICES; peer++) {
            us_device_note_peer(device, peer, false);
            us_device_note_peer(peer, device, false);
        }
    }
    return err;
}
