/* real_driver.h - libcuda's own functions for the pipelines' per-chunk work.
 *
 * A rewritten copy makes its stream and event calls itself: the capture
 * mode's exchange and restore, the capture check, the stream's context, each
 * chunk's copy, its event's record and the wait for it: seven calls for a
 * 4 B D2H. Through the runtime each cost about 60 ns more than the same
 * driver function on an H200 host (a 4 B
 * D2H's rewrite 8.50 us through the runtime against 8.00 through the driver,
 * native 8.41, in one process). The runtime's function does the driver's call after checks of its
 * own; the pipelines take the driver's directly where the stream is in the
 * current context (pipeline_common.h), and make the runtime's call again
 * when a driver call fails, so that the error a program sees is the
 * runtime's own.
 *
 * Resolved from the libcuda the runtime loaded (never loaded here), through
 * resolve.h (the C library's dlsym: the shim's own, shim/entry_driver/dlsym.c,
 * hands out its wrappers of libcuda's copies). */
#ifndef UNSTALL_REAL_DRIVER_H
#define UNSTALL_REAL_DRIVER_H

#include <cuda.h>

struct us_real_driver {
#define US_REAL_DRV(name, params, args) CUresult(*name) params;
#include "real_driver.def"
#undef US_REAL_DRV
};

/* The table, resolved on first use; NULL where libcuda is not loaded or
 * lacks one of them (the runtime's calls then), and while a unit test's
 * runtime table is installed without a driver table (us_real_install). */
const struct us_real_driver *us_real_driver(void);

/* Tests: the table to use; NULL: none (the runtime's calls only). */
void us_real_driver_install(const struct us_real_driver *drv);

/* Tests: resolve libcuda's again (us_real_install(NULL) does). */
void us_real_driver_resolve(void);

#endif
