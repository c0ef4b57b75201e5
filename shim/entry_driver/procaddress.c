/* procaddress.c - cuGetProcAddress and cuGetProcAddress_v2, wrapped.
 *
 * The real resolver answers first, with the caller's name, version and
 * flags; the pointer it hands out is then identified by its exported name
 * (symbols.c) and the wrapper of that name handed back. The runtime looks
 * cuGetProcAddress up through itself (version 11030: the 4-argument form,
 * 12000 and later: _v2), so that answer is identified too. A failure, a
 * function the layer does not wrap, or the layer off: the real answer. */
#include "driver_layer.h"

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

CUresult us_drv_wrap_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    getproc_fn real;
    *(void **)&real = us_drv_real(US_DRV_FN_cuGetProcAddress);
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(symbol, pfn, version, flags);
    if (rc == CUDA_SUCCESS && pfn != NULL)
        *pfn = us_drv_substitute(*pfn);
    return rc;
}

CUresult us_drv_wrap_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status)
{
    getproc_v2_fn real;
    *(void **)&real = us_drv_real(US_DRV_FN_cuGetProcAddress_v2);
    if (real == NULL)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(symbol, pfn, version, flags, status);
    if (rc == CUDA_SUCCESS && pfn != NULL)
        *pfn = us_drv_substitute(*pfn);
    return rc;
}
