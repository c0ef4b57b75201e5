/* endings.c - see endings.h.
 *
 * The program's action per held signal lives in three slots: two that the
 * program's sigaction calls fill in turn (under a mutex), and a third that
 * always holds the default action (a handler with SA_RESETHAND falls back to
 * it from inside the signal handler, where no mutex may be taken); an atomic
 * index names the current one, so that the handler reads a whole action. */
#include "endings.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "findings_collect.h"
#include "log.h"
#include "resolve.h"
#include "state.h"
#include "thread.h"

#define ENDINGS_SIGNALS 4
static const int held_signals[ENDINGS_SIGNALS] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

#define DEFAULT_SLOT 2
struct held_signal {
    atomic_bool held;             /* the shim's handler is the kernel's action */
    atomic_int current;           /* slot of the program's action: 0, 1 or DEFAULT_SLOT */
    struct sigaction program[3];
};

static struct held_signal held[ENDINGS_SIGNALS];
static pthread_mutex_t program_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic us_sigaction_fn real_sigaction;
static int wake_pipe[2] = {-1, -1};
static atomic_bool thread_running;
static atomic_int ending;         /* the signal being reported, 0: none */
static pid_t owner;               /* the process the ending thread belongs to */

#define ENDING_EXIT_WAIT_MS 10000
#define ENDING_STACK_BYTES (256u << 10)

US_ENDINGS_BEFORE_SANITIZERS us_sigaction_fn us_endings_real_sigaction(void)
{
    us_sigaction_fn fn = atomic_load_explicit(&real_sigaction, memory_order_acquire);
    if (fn == NULL) {
        *(void **)&fn = us_resolve_next("sigaction");
        atomic_store_explicit(&real_sigaction, fn, memory_order_release);
    }
    return fn;
}

US_ENDINGS_BEFORE_SANITIZERS static int index_of(int sig)
{
    for (int i = 0; i < ENDINGS_SIGNALS; i++)
        if (held_signals[i] == sig)
            return i;
    return -1;
}

static bool is_handler(const struct sigaction *a)
{
    return (a->sa_flags & SA_SIGINFO) != 0 || (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN);
}

/* The kernel's action for sig back to the default (async-signal-safe: the
 * C library's sigaction, resolved before any handler was installed). */
static void restore_default(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    us_sigaction_fn real = atomic_load_explicit(&real_sigaction, memory_order_acquire);
    if (real != NULL)
        (void)real(sig, &dfl, NULL);
}

/* The default action now, from inside a handler: the signal, blocked while
 * the handler runs, is delivered when it returns. */
static void end_now(int sig)
{
    restore_default(sig);
    (void)raise(sig);
}

static void on_signal(int sig, siginfo_t *info, void *context)
{
    int saved_errno = errno;
    int i = index_of(sig);
    if (i < 0) {
        errno = saved_errno;
        return;
    }
    struct held_signal *h = &held[i];
    struct sigaction program = h->program[atomic_load_explicit(&h->current, memory_order_acquire)];
    if (is_handler(&program)) {
        if (program.sa_flags & SA_RESETHAND)
            atomic_store_explicit(&h->current, DEFAULT_SLOT, memory_order_release);
        if (program.sa_flags & SA_SIGINFO)
            program.sa_sigaction(sig, info, context);
        else
            program.sa_handler(sig);
    } else if (program.sa_handler == SIG_DFL) {
        /* the process ends: the report first, on the ending thread */
        int expected = 0;
        if (getpid() != owner || !atomic_load(&thread_running) ||
            !atomic_compare_exchange_strong(&ending, &expected, sig))
            end_now(sig);
        else if (write(wake_pipe[1], "x", 1) != 1)
            end_now(sig);
    }
    errno = saved_errno;
}

/* The kernel's action for a held signal whose program action is `program`:
 * the shim's handler with the program's flags and mask, or SIG_IGN. */
static int install(int sig, const struct sigaction *program)
{
    us_sigaction_fn real = us_endings_real_sigaction();
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (!is_handler(program) && program->sa_handler == SIG_IGN)
        return real(sig, program, NULL);
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_signal;
    ours.sa_mask = program->sa_mask;
    /* the program's own restart and stack choices (a Python program relies
     * on EINTR to see Ctrl-C); with the default action, restart */
    ours.sa_flags = SA_SIGINFO | (is_handler(program) ? program->sa_flags & (SA_RESTART | SA_ONSTACK) : SA_RESTART);
    return real(sig, &ours, NULL);
}

US_ENDINGS_BEFORE_SANITIZERS bool us_endings_sigaction(int sig, const struct sigaction *act, struct sigaction *old,
                                                       int *result)
{
    int i = index_of(sig);
    if (i < 0 || !atomic_load(&held[i].held))
        return false;
    struct held_signal *h = &held[i];
    pthread_mutex_lock(&program_mu);
    int cur = atomic_load(&h->current);
    struct sigaction previous = h->program[cur];
    *result = 0;
    if (act != NULL) {
        int next = cur == 0 ? 1 : 0;
        h->program[next] = *act;
        if (install(sig, act) != 0) {
            *result = -1;
        } else {
            atomic_store_explicit(&h->current, next, memory_order_release);
        }
    }
    pthread_mutex_unlock(&program_mu);
    if (*result == 0 && old != NULL)
        *old = previous;
    return true;
}

/* On the ending thread: the report written, the signal's default action
 * restored and the signal raised again, here, where it is not blocked. */
static void end_with(int sig)
{
    us_findings_report_ended(sig);
    restore_default(sig);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    pthread_sigmask(SIG_UNBLOCK, &only, NULL);
    raise(sig);
    _exit(128 + sig); /* not reached where the default action ends the process */
}

static void *ending_main(void *arg)
{
    (void)arg;
    us_state_enter(); /* for good: the shim's hooks pass through on this thread */
    unsigned interval = us_config()->report_interval_s;
    bool snapshots = interval > 0 && us_config()->report[0] != '\0';
    for (;;) {
        struct pollfd p = {.fd = wake_pipe[0], .events = POLLIN};
        int n = poll(&p, 1, snapshots ? (int)(interval * 1000u) : -1);
        if (n == 0) {
            (void)us_findings_snapshot();
            continue;
        }
        if (n < 0) {
            if (errno != EINTR) /* the pipe is gone: nothing more to wait for */
                return NULL;
            continue;
        }
        char byte;
        (void)read(wake_pipe[0], &byte, 1);
        int sig = atomic_load(&ending);
        if (sig != 0)
            end_with(sig);
    }
}

/* Holds a signal whose action is not SIG_IGN now: the current action becomes
 * the program's, the shim's handler the kernel's. */
static void hold(int i)
{
    us_sigaction_fn real = us_endings_real_sigaction();
    struct held_signal *h = &held[i];
    struct sigaction now;
    if (real == NULL || real(held_signals[i], NULL, &now) != 0)
        return;
    if (!is_handler(&now) && now.sa_handler == SIG_IGN)
        return; /* ignored (nohup): the process does not end by it */
    memset(&h->program[DEFAULT_SLOT], 0, sizeof h->program[DEFAULT_SLOT]);
    h->program[DEFAULT_SLOT].sa_handler = SIG_DFL;
    sigemptyset(&h->program[DEFAULT_SLOT].sa_mask);
    pthread_mutex_lock(&program_mu);
    h->program[0] = now;
    atomic_store(&h->current, 0);
    if (install(held_signals[i], &now) == 0)
        atomic_store(&h->held, true);
    pthread_mutex_unlock(&program_mu);
}

void us_endings_start(void)
{
    static atomic_bool started;
    if (atomic_exchange(&started, true))
        return;
    const struct us_config *cfg = us_config();
    bool signals = cfg->report_on_signal && cfg->mode != US_MODE_OFF;
    bool snapshots = cfg->report_interval_s > 0 && cfg->report[0] != '\0' && cfg->mode != US_MODE_OFF;
    if (!signals && !snapshots)
        return;
    owner = getpid();
    if (pipe2(wake_pipe, O_CLOEXEC) != 0) {
        us_log(US_LOG_WARN, "report: no pipe for the ending thread (%s): a termination signal ends the process "
                            "without a report, and no snapshot is written", strerror(errno));
        return;
    }
    if (us_thread_start(ending_main, NULL, ENDING_STACK_BYTES, "unstall-ending") != 0) {
        us_log(US_LOG_WARN, "report: the ending thread could not start: a termination signal ends the process "
                            "without a report, and no snapshot is written");
        return;
    }
    atomic_store(&thread_running, true);
    if (signals)
        for (int i = 0; i < ENDINGS_SIGNALS; i++)
            hold(i);
}

void us_endings_at_exit(void)
{
    if (atomic_load(&ending) == 0 || getpid() != owner)
        return;
    struct timespec step = {0, 10 * 1000000L};
    for (int waited = 0; waited < ENDING_EXIT_WAIT_MS; waited += 10)
        nanosleep(&step, NULL); /* the ending thread ends the process */
}
