/* mappings.c - the libcuda functions that map or register memory at an
 * address (driver_layer.h's US_DRIVER_MAPPING_FNS): each success makes every
 * thread forget the host pages the runtime called pageable (hostpages.h).
 * Nothing else is done: these calls are not findings, and the memory they
 * make is classified by the runtime when a copy meets it. A dynamic
 * runtime's own allocations reach libcuda through these wrappers too
 * (procaddress.c), so pinned memory the program allocates either way is
 * seen. */
#include "driver_layer.h"

#include "hostpages.h"

#define DEFINE_MAPPING_WRAPPER(fn, params, args)                  \
    CUresult us_drv_wrap_##fn params                              \
    {                                                             \
        CUresult(*real) params;                                   \
        *(void **)&real = us_drv_real(US_DRV_FN_##fn);            \
        if (real == NULL)                                         \
            return CUDA_ERROR_NOT_FOUND;                          \
        CUresult rc = real args;                                  \
        if (rc == CUDA_SUCCESS)                                   \
            us_hostpages_mapping_changed();                       \
        return rc;                                                \
    }
US_DRIVER_MAPPING_FNS(DEFINE_MAPPING_WRAPPER)
#undef DEFINE_MAPPING_WRAPPER
