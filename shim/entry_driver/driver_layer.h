/* driver_layer.h - the driver-layer entry: what the files of
 * shim/entry_driver/ share.
 *
 * Programs built with the static runtime (nvcc's default) and driver-API
 * programs never call the runtime's exports: they dlopen libcuda.so.1, take
 * cuGetProcAddress[_v2] with dlsym and every other driver function from it.
 * This layer interposes dlsym (dlsym.c) and wraps cuGetProcAddress[_v2]
 * (procaddress.c): a function handed out by libcuda is identified by the
 * exported name its address has (symbols.c), and the wrapper of exactly that
 * name is handed out instead, so the version and the per-thread flag the
 * caller asked for are kept by construction. The copy wrappers (copies.c)
 * fill a struct us_copy and run the one chain (chain.h), as the runtime
 * exports do; the runtime's own calls into the driver (a dynamic runtime
 * reaches it the same way) arrive with the re-entry mark set and pass
 * straight through, so each copy is handled once. */
#ifndef UNSTALL_DRIVER_LAYER_H
#define UNSTALL_DRIVER_LAYER_H

#include <cuda.h>
#include <stdbool.h>

#include "chain.h"
#include "copy.h"

#define US_DRIVER_EXPORT __attribute__((visibility("default")))

/* The libcuda functions the layer wraps besides the copies (copy.h's
 * US_DRIVER_COPY_APIS): detection of the explicit device-wide and stream
 * waits (and busy_engine_d2d's reading at a stream's), peer
 * access, the end of a context (what the shim made there is forgotten), and
 * the resolvers, so that what they hand out is identified too. */
#define US_DRIVER_OTHER_FNS(X)                                                                 \
    X(cuCtxSynchronize) X(cuCtxSynchronize_v2) X(cuCtxEnablePeerAccess) X(cuCtxDisablePeerAccess) \
    X(cuCtxDestroy) X(cuCtxDestroy_v2) X(cuGetProcAddress) X(cuGetProcAddress_v2)                \
    X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz)

/* The libcuda functions that map or register memory at an address: each
 * success makes every thread forget the host pages the runtime called
 * pageable (hostpages.h), since such a page may now be pinned or mapped
 * memory. Name, parameters, arguments (mappings.c). Not the stream-ordered
 * allocations (cuMemAllocAsync, cuMemAllocFromPoolAsync): a program may make
 * one per tensor, and their pools map within address ranges reserved for
 * them. */
#define US_DRIVER_MAPPING_FNS(X)                                                                             \
    X(cuMemHostAlloc, (void **pp, size_t bytes, unsigned int flags), (pp, bytes, flags))                     \
    X(cuMemAllocHost_v2, (void **pp, size_t bytes), (pp, bytes))                                             \
    X(cuMemHostRegister, (void *p, size_t bytes, unsigned int flags), (p, bytes, flags))                     \
    X(cuMemHostRegister_v2, (void *p, size_t bytes, unsigned int flags), (p, bytes, flags))                  \
    X(cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytes, unsigned int flags), (dptr, bytes, flags))       \
    X(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytes), (dptr, bytes))                                      \
    X(cuMemAllocPitch_v2,                                                                                    \
      (CUdeviceptr * dptr, size_t *pitch, size_t width, size_t height, unsigned int element_bytes),          \
      (dptr, pitch, width, height, element_bytes))                                                           \
    X(cuMemAddressReserve,                                                                                   \
      (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags),        \
      (ptr, size, alignment, addr, flags))                                                                   \
    X(cuMemMap,                                                                                              \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,                     \
       unsigned long long flags),                                                                            \
      (ptr, size, offset, handle, flags))                                                                    \
    X(cuIpcOpenMemHandle_v2, (CUdeviceptr * dptr, CUipcMemHandle handle, unsigned int flags),                \
      (dptr, handle, flags))                                                                                 \
    X(cuMemPoolImportPointer, (CUdeviceptr * dptr, CUmemoryPool pool, CUmemPoolPtrExportData *data),         \
      (dptr, pool, data))

enum us_drv_fn {
#define US_DRV_FN_COPY(id, fn, sync, per_thread, shape) US_DRV_FN_##fn,
#define US_DRV_FN_OTHER(fn) US_DRV_FN_##fn,
#define US_DRV_FN_MAPPING(fn, params, args) US_DRV_FN_##fn,
    US_DRIVER_COPY_APIS(US_DRV_FN_COPY) US_DRIVER_OTHER_FNS(US_DRV_FN_OTHER)
    US_DRIVER_MAPPING_FNS(US_DRV_FN_MAPPING)
#undef US_DRV_FN_COPY
#undef US_DRV_FN_OTHER
#undef US_DRV_FN_MAPPING
    US_DRV_FN_COUNT
};

/* The wrappers (copies.c, procaddress.c), one per wrapped exported name. */
#define US_DRV_WRAPPER_DECL(id, fn, sync, per_thread, shape) CUresult us_drv_wrap_##fn(US_DRV_PARAMS_##shape);
US_DRIVER_COPY_APIS(US_DRV_WRAPPER_DECL)
#undef US_DRV_WRAPPER_DECL
CUresult us_drv_wrap_cuCtxSynchronize(void);
CUresult us_drv_wrap_cuCtxSynchronize_v2(CUcontext ctx);
CUresult us_drv_wrap_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags);
CUresult us_drv_wrap_cuCtxDisablePeerAccess(CUcontext peer);
CUresult us_drv_wrap_cuStreamSynchronize(CUstream stream);
CUresult us_drv_wrap_cuStreamSynchronize_ptsz(CUstream stream);
CUresult us_drv_wrap_cuCtxDestroy(CUcontext ctx);
CUresult us_drv_wrap_cuCtxDestroy_v2(CUcontext ctx);
#define US_DRV_MAPPING_DECL(fn, params, args) CUresult us_drv_wrap_##fn params;
US_DRIVER_MAPPING_FNS(US_DRV_MAPPING_DECL)
#undef US_DRV_MAPPING_DECL
CUresult us_drv_wrap_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult us_drv_wrap_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status);

/* copies.c: the device of a context (NULL: the current one); -2 when it
 * cannot be told. */
int us_drv_context_device(CUcontext ctx);

/* symbols.c: the real function of a wrapped name, from the libcuda the
 * layer identified; before that, libcuda is identified from the next
 * definition of that name after the shim (a direct call, exports.c). NULL:
 * no libcuda. */
void *us_drv_real(enum us_drv_fn fn);

/* symbols.c: the layer is on (driver_layer, not disabled). */
bool us_drv_layer_on(void);

/* symbols.c: p, or the wrapper of the libcuda function p is (identified by
 * its exported name) when the layer is on. Any other pointer, and anything
 * while the layer is off, comes back unchanged. */
void *us_drv_substitute(void *p);

/* symbols.c: what dlsym(handle, name) returned, or its wrapper: only for a
 * name the layer wraps and an address in libcuda. */
void *us_drv_substitute_symbol(const char *name, void *sym);

/* symbols.c: a driver function the layer itself calls (not wrapped), from the
 * identified libcuda; NULL when it has none or none was identified yet. */
void *us_drv_lookup(const char *name);

/* symbols.c: the path of the identified libcuda ("" before). */
const char *us_drv_libcuda_path(void);

/* dlsym.c: the C library's dlsym, never this library's (NULL until found). */
void *us_drv_real_dlsym(void *handle, const char *name);

/* runtime.c: true when a CUDA runtime is there for the shim's own work
 * (classification, pipelines): the program's, or one the shim loaded for a
 * program that brings none (static runtime, driver API). Loads it on first
 * call; logged once. */
bool us_drv_runtime_ready(void);

/* runtime.c: whether a return address lies in that runtime. A copy the
 * program's dynamic runtime makes inside one of its own calls that the
 * shim's runtime layer did not take (cudaMemcpyToSymbol, a cudaMemcpyAsync
 * the program took with dlsym) passes through: rewriting it would re-enter
 * the runtime from inside its own call, which it does not promise to allow. */
bool us_drv_inside_runtime(const void *address);

#endif
