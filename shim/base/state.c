/* state.c - process state: configuration loaded once, fork handling. */
#include "state.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include "config.h"
#include "findings.h"
#include "log.h"
#include "ptrtable.h"

_Atomic int us_state_bypass = -1;
_Thread_local int us_state_depth;
_Atomic int us_state_hooked;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* CUDA is undefined in a forked child until exec: the child only passes
 * through. Its copy of the table is dropped so nothing stale is trusted. */
static void after_fork_in_child(void)
{
    atomic_store(&us_state_bypass, 1);
    us_ptrtable_clear();
}

static void init_once_body(void)
{
    /* depth guards against the config loader's own logging re-entering */
    us_state_depth++;
    const struct us_config *cfg = us_config();
    pthread_atfork(NULL, NULL, after_fork_in_child);
    us_log(US_LOG_INFO, "loaded (mode %d, fix %d)", cfg->mode, cfg->fix);
    if (!cfg->disable && us_findings_wanted())
        us_findings_prepare();
    atomic_store(&us_state_bypass, cfg->disable ? 1 : 0);
    us_state_depth--;
}

bool us_state_init_slow(void)
{
    pthread_once(&init_once, init_once_body);
    return atomic_load(&us_state_bypass) != 0;
}

/* The report at exit. Calls no CUDA function: the runtime may already be
 * unloading (contract 8). Nothing to report when the shim never started, was
 * disabled, or this is a forked child. */
__attribute__((destructor)) static void report_at_exit(void)
{
    int bypass = atomic_load(&us_state_bypass);
    if (bypass < 0) {
        /* No hook was reached. Stay silent in the many processes that are not
         * CUDA programs (children inherit LD_PRELOAD), but speak up where the
         * driver is loaded: the program used CUDA without the shim seeing it. */
        void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (driver == NULL)
            return;
        dlclose(driver);
        bypass = us_state_init_slow() ? 1 : 0;
    }
    if (bypass != 0)
        return;
    us_state_depth++;
    us_findings_report();
    us_log_at_exit();
    us_state_depth--;
}
