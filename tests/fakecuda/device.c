/* device.c - what a program asks about devices: attributes, properties, PCI
 * bus ids and peer access (FAKECUDA_PEER_MATRIX says which pairs are capable
 * and how enabling behaves; FAKECUDA_P2P_* give the P2P attributes). The
 * simulated device looks like an H100 where a value is needed at all. */
#include "fc.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static bool valid_device(int d)
{
    return d >= 0 && d < fc_g.ndev;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (value == NULL)
        return fc_ret(cudaErrorInvalidValue);
    if (!valid_device(device))
        return fc_ret(cudaErrorInvalidDevice);
    int v = 0; /* attributes not listed: 0 (documented) */
    switch (attr) {
    case cudaDevAttrClockRate: v = 1980000; break; /* kHz */
    case cudaDevAttrMemoryClockRate: v = 2619000; break;
    case cudaDevAttrConcurrentManagedAccess: v = 0; break; /* managed memory is not modelled */
    case cudaDevAttrManagedMemory: v = 0; break;
    case cudaDevAttrPageableMemoryAccess: v = 0; break;
    case cudaDevAttrMultiProcessorCount: v = FC_SM_COUNT; break;
    case cudaDevAttrComputeCapabilityMajor: v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: v = 0; break;
    case cudaDevAttrMaxThreadsPerBlock: v = 1024; break;
    case cudaDevAttrWarpSize: v = 32; break;
    case cudaDevAttrUnifiedAddressing: v = 1; break;
    case cudaDevAttrCanMapHostMemory: v = 1; break;
    case cudaDevAttrAsyncEngineCount: v = 2; break;
    case cudaDevAttrConcurrentKernels: v = 1; break;
    case cudaDevAttrHostRegisterSupported: v = 1; break;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: v = 1; break;
    case cudaDevAttrPciBusId: v = device + 1; break;
    case cudaDevAttrPciDeviceId: v = 0; break;
    case cudaDevAttrPciDomainId: v = 0; break;
    case cudaDevAttrMemoryPoolsSupported: v = 0; break;
    default: break;
    }
    *value = v;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (prop == NULL)
        return fc_ret(cudaErrorInvalidValue);
    if (!valid_device(device))
        return fc_ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "fakecuda device %d", device);
    prop->uuid.bytes[0] = (char)0xfc;
    prop->uuid.bytes[15] = (char)device;
    prop->totalGlobalMem = (size_t)80 << 30;
    prop->sharedMemPerBlock = 48 << 10;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->memPitch = (size_t)2147483647;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->totalConstMem = 64 << 10;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = FC_SM_COUNT;
    prop->canMapHostMemory = 1;
    prop->concurrentKernels = 1;
    prop->pciBusID = device + 1;
    prop->asyncEngineCount = 2;
    prop->unifiedAddressing = 1;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->streamPrioritiesSupported = 1;
    prop->canUseHostPointerForRegisteredMem = 1;
    prop->hostRegisterSupported = 1;
    prop->hostNumaId = -1;
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (can == NULL)
        return fc_ret(cudaErrorInvalidValue);
    if (!valid_device(device) || !valid_device(peer))
        return fc_ret(cudaErrorInvalidDevice);
    *can = fc_cfg()->peer_capable[device][peer] ? 1 : 0; /* the diagonal is 0 */
    return cudaSuccess;
}

/* Device d sits on PCI bus d + 1 (as pciBusID says), domain 0, device 0. */
cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (bus_id == NULL || len < 13)
        return fc_ret(cudaErrorInvalidValue);
    if (!valid_device(device))
        return fc_ret(cudaErrorInvalidDevice);
    snprintf(bus_id, (size_t)len, "0000:%02x:00.0", (unsigned)(device + 1) & 0xffu);
    return cudaSuccess;
}

/* A capable pair: access supported, array access, native atomics per
 * FAKECUDA_P2P_ATOMICS, rank FAKECUDA_P2P_RANK; a pair that is not: all 0.
 * The same device twice is cudaErrorInvalidDevice, as the real runtime says. */
cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int src, int dst)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (value == NULL)
        return fc_ret(cudaErrorInvalidValue);
    if (!valid_device(src) || !valid_device(dst) || src == dst)
        return fc_ret(cudaErrorInvalidDevice);
    const struct fc_config *c = fc_cfg();
    bool capable = c->peer_capable[src][dst];
    switch (attr) {
    case cudaDevP2PAttrPerformanceRank: *value = capable ? c->p2p_rank : 0; break;
    case cudaDevP2PAttrAccessSupported: *value = capable; break;
    case cudaDevP2PAttrNativeAtomicSupported: *value = capable && c->p2p_atomics; break;
    case cudaDevP2PAttrCudaArrayAccessSupported: *value = capable; break;
    default: return fc_ret(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (flags != 0)
        return fc_ret(cudaErrorInvalidValue);
    if (!valid_device(peer))
        return fc_ret(cudaErrorInvalidDevice);
    int dev = fc_current_device();
    const struct fc_config *c = fc_cfg();
    if (c->peer_capable[dev][peer] && c->peer_enable[dev][peer] == FC_PEER_ENABLE_HANGS)
        for (;;)
            pause(); /* the caller never comes back; only a signal ends the process */
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&fc_g.mu);
    if (!c->peer_capable[dev][peer] || /* the device itself included, as measured */
        c->peer_enable[dev][peer] == FC_PEER_ENABLE_REFUSED)
        err = cudaErrorPeerAccessUnsupported;
    else if (fc_g.dev[dev].peer_enabled[peer])
        err = cudaErrorPeerAccessAlreadyEnabled;
    else
        fc_g.dev[dev].peer_enabled[peer] = true;
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    if (!valid_device(peer))
        return fc_ret(cudaErrorInvalidDevice);
    int dev = fc_current_device();
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&fc_g.mu);
    if (!fc_g.dev[dev].peer_enabled[peer])
        err = cudaErrorPeerAccessNotEnabled;
    else
        fc_g.dev[dev].peer_enabled[peer] = false;
    pthread_mutex_unlock(&fc_g.mu);
    return fc_ret(err);
}

/* Destroys the current device's primary context, as the real call does:
 * after its work drained, its streams and events are invalid handles
 * (cudaErrorInvalidResourceHandle), its device memory and the pinned memory
 * allocated while it was current are freed (stale pointers fault), and peer
 * access from and to it is off. Later calls make a fresh context: the legacy
 * and per-thread streams and new allocations work. */
cudaError_t cudaDeviceReset(void)
{
    if (!fc_enter())
        return fc_ret(cudaErrorInitializationError);
    int dev = fc_current_device();
    pthread_mutex_lock(&fc_g.mu);
    (void)fc_device_sync_locked(dev); /* an asynchronous error dies with the context */
    struct fc_stream *s, *stmp;
    HASH_ITER(hh, fc_g.handles, s, stmp) {
        if (s->device == dev) {
            HASH_DEL(fc_g.handles, s);
            s->live = false;
        }
    }
    for (size_t i = 0; i < fc_g.nall; i++)
        if (fc_g.all[i]->device == dev)
            fc_g.all[i]->sticky = cudaSuccess;
    struct fc_event *e, *etmp;
    HASH_ITER(hh, fc_g.events, e, etmp) {
        if (e->device == dev) {
            HASH_DEL(fc_g.events, e);
            e->gen++;
            e->next_free = fc_g.free_events;
            fc_g.free_events = e;
        }
    }
    for (int d = 0; d < fc_g.ndev; d++) {
        fc_g.dev[dev].peer_enabled[d] = false;
        fc_g.dev[d].peer_enabled[dev] = false;
    }
    pthread_mutex_unlock(&fc_g.mu);
    fc_mem_reset_device(dev);
    return cudaSuccess;
}
