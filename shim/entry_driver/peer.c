/* peer.c - peer access enabled and disabled through the driver.
 *
 * Whether a pair of devices has peer access decides whether a cross-GPU copy
 * is staged by the driver (and rewritten by the shim) or goes direct over the
 * link (left alone). The runtime export cudaDeviceEnablePeerAccess notes it
 * for a program with a dynamic runtime; a static runtime's
 * cudaDeviceEnablePeerAccess and a driver-API program reach the driver's
 * cuCtxEnablePeerAccess instead, which this layer wraps, so that their direct
 * copies are not taken for staged ones (a staged rewrite moves 50 GB/s where
 * the link moves 390, measured on the 2 x H200 machine). Noted even while the
 * shim is at work on this thread (the dynamic runtime's own call arrives
 * marked): the state is the same fact, whoever set it. */
#include "driver_layer.h"

#include "device_state.h"

static void note(CUcontext peer, bool enabled)
{
    int device = us_drv_context_device(NULL), peer_device = us_drv_context_device(peer);
    if (device >= 0 && peer_device >= 0)
        us_device_note_peer(device, peer_device, enabled);
}

CUresult us_drv_wrap_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    CUresult (*real)(CUcontext, unsigned int);
    *(void **)&real = us_drv_real(US_DRV_FN_cuCtxEnablePeerAccess);
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(peer, flags);
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        note(peer, true);
    return rc;
}

CUresult us_drv_wrap_cuCtxDisablePeerAccess(CUcontext peer)
{
    CUresult (*real)(CUcontext);
    *(void **)&real = us_drv_real(US_DRV_FN_cuCtxDisablePeerAccess);
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(peer);
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
        note(peer, false);
    return rc;
}
