/* state.c - process state: configuration loaded once at the start, the
 * pass-through decision, a forked child. The whole life of the process, and
 * which module does what in it: lifecycle.h. */
#include "state.h"

#include <pthread.h>
#include <stdatomic.h>

#include "config.h"
#include "lifecycle.h"
#include "log.h"
#include "prefault.h"
#include "ptrtable.h"

_Atomic int us_state_bypass = -1;
_Thread_local int us_state_depth __attribute__((tls_model("initial-exec")));
_Atomic int us_state_hooked;
_Atomic int us_state_driver_layer;
_Atomic unsigned long long us_state_legacy_moved;
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
    us_lifecycle_on_fork_child(after_fork_in_child);
    us_log(US_LOG_INFO, "loaded unstall %s (mode %d, fix %d)", US_VERSION_STRING, cfg->mode, cfg->fix);
    /* the shim's data and code mapped in now, not page by page inside the
     * program's first copies (prefault.h) */
    if (!cfg->disable)
        (void)us_prefault_self();
    if (!cfg->disable)
        us_lifecycle_run_start();
    atomic_store(&us_state_bypass, cfg->disable ? 1 : 0);
    us_state_depth--;
}

bool us_state_init_slow(void)
{
    pthread_once(&init_once, init_once_body);
    return atomic_load(&us_state_bypass) != 0;
}
