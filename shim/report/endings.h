/* endings.h - the report survives the way a process ends.
 *
 * Jobs seldom return from main: a scheduler sends SIGTERM at the time limit,
 * a launcher SIGTERMs the other ranks when one fails, a user presses Ctrl-C,
 * and Python ends a program that a KeyboardInterrupt stopped by re-raising
 * SIGINT with its default action. The report at exit (at_exit.c) runs in
 * none of these. So:
 *
 *  - For SIGTERM, SIGINT, SIGHUP and SIGQUIT (option report_on_signal), the
 *    shim's handler stands in front of whatever the program sets, through
 *    the exported sigaction and signal (entry_runtime/signal.c): a handler the
 *    program installed, before the shim started or after, runs first, with
 *    its own flags and mask, and decides as natively. Where the program's
 *    action is the default one (the process ends), the handler only wakes the
 *    ending thread (a write to a pipe: async-signal-safe) and returns; that
 *    thread writes the report, complete up to then, restores the default
 *    action and raises the signal again, so that the process ends exactly as
 *    it would have (same signal, same wait status, a core dump for SIGQUIT
 *    where the system makes one). A second such signal, a forked child, or
 *    no ending thread: the default action at once. Signals the program
 *    ignores are left alone.
 *  - The same thread rewrites the JSON report every report_interval_s
 *    seconds, marked a snapshot (us_findings_snapshot), so that SIGKILL, the
 *    OOM killer or a crash lose at most that much.
 *
 * Nothing but the pipe write and sigaction runs inside the handler: the
 * report (symbolizing, formatting, writing) runs on the ending thread. */
#ifndef UNSTALL_ENDINGS_H
#define UNSTALL_ENDINGS_H

#include <signal.h>
#include <stdbool.h>

/* At the shim's start (the report layer's start hook): takes the signals
 * (report_on_signal) and starts the ending thread where there is anything
 * for it to do. Once. */
void us_endings_start(void);

/* A sanitizer's runtime, preloaded first, calls sigaction while it
 * initializes, which reaches the shim's export before the sanitizer can
 * record anything: the code on that path is left uninstrumented. */
#define US_ENDINGS_BEFORE_SANITIZERS __attribute__((no_sanitize("address", "thread", "undefined")))

/* The program's sigaction(sig, act, old) for a signal the shim holds: the
 * program's action is recorded (old gets the one it had set), the shim's
 * handler stays in front, mirroring its flags and mask, or, for SIG_IGN, the
 * program's action goes to the kernel as it is. false: the shim does not
 * hold sig (the caller makes the real call). *result: what sigaction
 * returns (-1 with errno set on a bad argument). */
bool us_endings_sigaction(int sig, const struct sigaction *act, struct sigaction *old, int *result);

/* The C library's sigaction, found without the shim's own. */
typedef int (*us_sigaction_fn)(int, const struct sigaction *, struct sigaction *);
us_sigaction_fn us_endings_real_sigaction(void);

/* At exit (at_exit.c's destructor): a termination signal is being reported
 * by the ending thread, which ends the process with it; the exit waits for
 * that (10 s at most) rather than end it with another status. */
void us_endings_at_exit(void);

#endif
