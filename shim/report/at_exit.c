/* at_exit.c - the report at exit, and the report layer's work at the shim's
 * start (state.h runs it once the configuration is loaded): call-site
 * capture set up, and the report's other endings taken (endings.h). */
#include <dlfcn.h>
#include <stdatomic.h>

#include "endings.h"
#include "findings.h"
#include "hang.h"
#include "lifecycle.h"
#include "log.h"
#include "resolve.h"
#include "state.h"

/* Call-site capture's one-time set-up at the start rather than inside the
 * first finding's CUDA call. A hook reached before this constructor ran
 * (another library's constructor calling CUDA) only moves that set-up to the
 * first capture. */
static void start_findings(void)
{
    if (us_findings_wanted())
        us_findings_prepare();
    us_endings_start();
    us_hang_start();
}

__attribute__((constructor)) static void register_start(void) { us_lifecycle_on_start(start_findings); }

/* The report at exit. Calls no CUDA function: the runtime may already be
 * unloading (contract.md §8). Nothing to report when the shim never started, was
 * disabled, or this is a forked child. */
__attribute__((destructor)) static void report_at_exit(void)
{
    int bypass = atomic_load(&us_state_bypass);
    if (bypass < 0) {
        /* No hook was reached. Stay silent in the many processes that are not
         * CUDA programs (children inherit LD_PRELOAD), but speak up where the
         * driver is loaded: the program used CUDA without the shim seeing it. */
        if (!us_resolve_is_loaded("libcuda.so.1"))
            return;
        bypass = us_state_init_slow() ? 1 : 0;
    }
    if (bypass != 0)
        return;
    us_endings_at_exit(); /* a termination signal's report ends the process with it */
    us_state_depth++;
    us_findings_report();
    us_log_at_exit();
    us_state_depth--;
}
