/* signal.c - exported sigaction and signal: the program's actions for the
 * termination signals the shim holds (endings.h) are recorded and its
 * handler kept in front of them, so that a report is written when such a
 * signal ends the process; every other call goes to the C library as it is. */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "endings.h"
#include "export.h"

US_EXPORT US_ENDINGS_BEFORE_SANITIZERS int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int result;
    if (us_endings_sigaction(sig, act, old, &result))
        return result;
    us_sigaction_fn real = us_endings_real_sigaction();
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real(sig, act, old);
}

/* glibc's signal(): BSD semantics, the handler stays and calls restart. */
US_EXPORT US_ENDINGS_BEFORE_SANITIZERS __sighandler_t signal(int sig, __sighandler_t handler)
{
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, sig);
    act.sa_flags = SA_RESTART;
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}
