/* device.c - exported device-wide functions: peer access (the state that
 * decides whether a cross-GPU copy is staged) and device synchronization. */
#include "device_state.h"
#include "export.h"

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
    const struct us_real_api *real = us_real();
    if (real->cudaDeviceSynchronize == NULL)
        return US_ERR_NO_REAL;
    if (us_passthrough())
        return real->cudaDeviceSynchronize();
    us_state_note_call();
    struct us_watch w;
    if (!us_watch_begin(&w, US_RULE_explicit_sync, "cudaDeviceSynchronize"))
        return US_ERR_FORBIDDEN;
    cudaError_t err = real->cudaDeviceSynchronize();
    us_watch_end(&w, NULL, US_STREAM_USER, us_current_device(), 0);
    return err;
}
