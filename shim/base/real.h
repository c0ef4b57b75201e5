/* real.h - the native CUDA runtime functions, resolved at run time.
 *
 * The shim never links against libcudart: it finds whichever runtime the
 * program loaded (PyTorch ships its own) on first use. All of the shim's own
 * CUDA calls go through this table, never through its exported hooks, and unit
 * tests replace the table with fakes (us_real_install). */
#ifndef UNSTALL_REAL_H
#define UNSTALL_REAL_H

#include <cuda_runtime_api.h>

struct us_real_api {
#define US_REAL(ret, name, params, args, rewrite) ret(*name) params;
#include "real_api.def"
#undef US_REAL
};

/* The table, resolved on first use (thread-safe). Entries the loaded runtime
 * lacks are NULL; callers check before calling. Never returns NULL. */
const struct us_real_api *us_real(void);

/* Replace the table (unit tests). NULL restores run-time resolution. A
 * table installed leaves no driver route (real_driver.h) until the test
 * installs one; NULL resolves libcuda's again. */
void us_real_install(const struct us_real_api *api);

/* NULL if api has every function the copy rewrites call (column rewrite of
 * real_api.def), else the name of the first it lacks. */
const char *us_real_missing_for_rewrite(const struct us_real_api *api);

/* The error an exported hook returns when the runtime lacks its function. */
#define US_ERR_NO_REAL cudaErrorSharedObjectSymbolNotFound

/* Name of a CUDA error for messages; safe before the runtime is found. */
const char *us_real_error_name(cudaError_t err);

#endif
