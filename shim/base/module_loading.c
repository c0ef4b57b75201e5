/* module_loading.c - option eager_modules (case E).
 *
 * With lazy module loading (CUDA's default), a kernel's first launch loads its
 * module, and loading may wait for a context synchronization; when the
 * program's own host function blocks a stream until that very launch is done
 * (case C's stream-0 D2H deadlock as a user wrote it: the other thread's
 * kernel launched for the first time), the process deadlocks, natively and
 * under any rewrite of its copies. CUDA_MODULE_LOADING=EAGER loads every
 * module when the driver initialises, so no launch loads anything later. The
 * driver reads the variable at cuInit, on the program's first CUDA call:
 * setting it from this constructor, before main, is in time. A value the user
 * set wins. */
#include <stdlib.h>

#include "config.h"
#include "log.h"

__attribute__((constructor)) static void module_loading_start(void)
{
    const struct us_config *cfg = us_config();
    if (cfg->disable || !cfg->eager_modules)
        return;
    const char *set = getenv("CUDA_MODULE_LOADING"); /* CUDA's variable, not an option of ours */
    if (set != NULL) {
        us_log(US_LOG_INFO, "eager_modules: CUDA_MODULE_LOADING=%s is set already; left as it is", set);
        return;
    }
    if (setenv("CUDA_MODULE_LOADING", "EAGER", 0) == 0)
        us_log(US_LOG_INFO, "eager_modules: CUDA_MODULE_LOADING=EAGER for this process and its children");
}
