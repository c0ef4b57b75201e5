/* entrypoint.c - the runtime's door to the driver: cudaGetDriverEntryPoint
 * and cudaGetDriverEntryPointByVersion (and their _ptsz variants) hand out
 * libcuda functions; what they hand out is identified as cuGetProcAddress's
 * answers are (symbols.c), so a program that calls the driver's copies
 * through them is seen too. A dynamic runtime already got its resolver from
 * the layer, so its answer may be a wrapper already: handed back as is. */
#include "driver_layer.h"

#include "real.h"

static cudaError_t substituted(cudaError_t err, void **funcPtr)
{
    if (err == cudaSuccess && funcPtr != NULL)
        *funcPtr = us_drv_substitute(*funcPtr);
    return err;
}

US_DRIVER_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const struct us_real_api *real = us_real();
    if (real->cudaGetDriverEntryPoint == NULL)
        return US_ERR_NO_REAL;
    return substituted(real->cudaGetDriverEntryPoint(symbol, funcPtr, flags, driverStatus), funcPtr);
}

US_DRIVER_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                                          enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const struct us_real_api *real = us_real();
    if (real->cudaGetDriverEntryPoint_ptsz == NULL)
        return US_ERR_NO_REAL;
    return substituted(real->cudaGetDriverEntryPoint_ptsz(symbol, funcPtr, flags, driverStatus), funcPtr);
}

US_DRIVER_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                                              unsigned int cudaVersion, unsigned long long flags,
                                                              enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const struct us_real_api *real = us_real();
    if (real->cudaGetDriverEntryPointByVersion == NULL)
        return US_ERR_NO_REAL;
    return substituted(real->cudaGetDriverEntryPointByVersion(symbol, funcPtr, cudaVersion, flags, driverStatus),
                       funcPtr);
}

US_DRIVER_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
                                                                   unsigned int cudaVersion, unsigned long long flags,
                                                                   enum cudaDriverEntryPointQueryResult *driverStatus)
{
    const struct us_real_api *real = us_real();
    if (real->cudaGetDriverEntryPointByVersion_ptsz == NULL)
        return US_ERR_NO_REAL;
    return substituted(
        real->cudaGetDriverEntryPointByVersion_ptsz(symbol, funcPtr, cudaVersion, flags, driverStatus), funcPtr);
}
