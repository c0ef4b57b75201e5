/* scenario.h - what the scenario programs (tests/scenarios/case_*.c) share:
 * checked CUDA calls, the clock, RESULT lines, SCN_* knobs from the
 * environment, data patterns on host and device, and a watchdog.
 *
 * Each program prints machine-readable lines
 *     RESULT case=<A-E|clean> test=<name> key=value ... ok=1|0
 * (times in ms with 3 decimals, GB/s with 1) and nothing else on stdout
 * except lines starting with '#'. docs/scenarios.md lists every key.
 *
 * Plain C11 over the CUDA runtime API: the same source builds against the
 * real runtime (kernels.cu) and the simulated one (kernels_fake.c). */
#ifndef SCN_SCENARIO_H
#define SCN_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SCN_MIB ((size_t)1 << 20)

/* Every CUDA call of a scenario goes through this: on failure it prints
 * "RESULT case=.. test=.. error=<name> ok=0", a line on stderr, and exits 1. */
#define SCN_CK(call) scn_ck((call), #call, __FILE__, __LINE__)
void scn_ck(cudaError_t err, const char *what, const char *file, int line);

/* Starts a program: names its case, reads the tests to run (argv[1..], or
 * SCN_TESTS as a comma or space separated list; none: all), makes stdout
 * line buffered, and starts the watchdog. */
void scn_begin(const char *case_id, int argc, char **argv);
/* Whether the test was asked for (argv/SCN_TESTS), and whether the test
 * is run by default when none was named (tests that end the process, like
 * a deadlock probe, are still run by default but should run last). */
bool scn_want(const char *test);
/* A test starts: names it in later error and watchdog lines and arms the
 * watchdog for `timeout_s` seconds (<= 0: SCN_TIMEOUT_S, default 120, 60
 * with SCN_QUICK). On expiry the watchdog prints
 * "RESULT case=.. test=.. <extra> deadlock=1 ok=0" and _exit(3)s. */
void scn_test(const char *test, double timeout_s);
/* Extra key=value text for the watchdog's line of the current test. */
void scn_watchdog_extra(const char *text);
/* The test ended in time. */
void scn_test_end(void);
/* Ends the program: 0 when every RESULT line so far said ok=1. */
int scn_end(void);

/* Prints "RESULT case=<case> test=<test> " then the formatted rest, which
 * must end with "ok=%d". Records a failure when the line says ok=0. */
void scn_result(const char *test, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A free-form comment line ("# ..."), for humans. */
void scn_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- knobs --------------------------------------------------------------------------- */
bool scn_quick(void); /* SCN_QUICK=1: CI sizes on the simulated runtime */
/* SCN_<name> from the environment: a size with an optional k/m/g suffix,
 * a number, an integer; `def`, or `quick_def` with SCN_QUICK=1, when unset.
 * A bad value is an error (message, exit 2). */
size_t scn_env_size(const char *name, size_t def, size_t quick_def);
double scn_env_double(const char *name, double def, double quick_def);
long scn_env_long(const char *name, long def, long quick_def);

/* --- time ------------------------------------------------------------------------------ */
double scn_now_ms(void);          /* CLOCK_MONOTONIC */
void scn_sleep_ms(double ms);
/* Polls cudaEventQuery every ~50 us until the event completes; returns the
 * time it was seen done (scn_now_ms). */
double scn_poll_event(cudaEvent_t ev);
/* Polls several events together; done_ms[i] is when event i was first seen
 * done (scn_now_ms), so each time is as exact as the polling allows. */
void scn_poll_events(int n, const cudaEvent_t *evs, double *done_ms);
double scn_gbps(size_t bytes, double ms);
/* The best of `reps` copies of n bytes (call + synchronize on s), after one
 * more that is not timed (a pinned buffer's first copy also maps what the
 * driver needs): milliseconds. */
double scn_best_copy_ms(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, int reps);

/* --- data -------------------------------------------------------------------------------- */
/* The pattern: byte i of a buffer filled with `seed` is a function of
 * (seed, offset + i); any two seeds differ almost everywhere. */
void scn_fill_at(void *p, size_t n, uint64_t seed, size_t offset);
bool scn_verify_at(const void *p, size_t n, uint64_t seed, size_t offset);
static inline void scn_fill(void *p, size_t n, uint64_t seed) { scn_fill_at(p, n, seed, 0); }
static inline bool scn_verify(const void *p, size_t n, uint64_t seed) { return scn_verify_at(p, n, seed, 0); }
/* Device memory of `device`, filled or checked through a pinned buffer on a
 * non-blocking stream of the scenario's own (so that the shim leaves these
 * copies alone); they synchronize that stream only. */
void scn_device_fill(int device, void *dptr, size_t n, uint64_t seed);
bool scn_device_verify(int device, const void *dptr, size_t n, uint64_t seed);
/* The device count, and whether the two-device tests can run. */
int scn_device_count(void);

/* --- small statistics ---------------------------------------------------------------------- */
/* Sorts v (n values) in place; returns the q-quantile (0..1). */
double scn_quantile(double *v, size_t n, double q);

#ifdef __cplusplus
}
#endif

#endif
