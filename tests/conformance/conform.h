/* conform.h - what the conformance programs share (tests/conformance/README.md).
 *
 * Each program checks ONE ordering or synchronization rule that the simulated
 * runtime (tests/fakecuda) models, and prints one line
 *     CONFORM <rule> <observed outcome>
 * where <rule> is the program's name with its arguments joined by '.'
 * (xdev_copy_before memcpy cur1 -> xdev_copy_before.memcpy.cur1). The
 * outcome is deterministic: long kernels against flags and data written by
 * kernels, not timing thresholds. A program that needs more devices than
 * there are prints "CONFORM <rule> SKIP". The same source builds against
 * fakecuda (kernels_fake.c) and the real runtime (kernels.cu, nvcc); run.sh
 * compares the lines with expected.txt, which is what the real GPU gives. */
#ifndef CF_CONFORM_H
#define CF_CONFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define CF_HD __host__ __device__
#else
#define CF_HD
#endif

/* The words kernels and the host write: a hash of (index, seed). */
static inline CF_HD uint32_t cf_word(size_t i, uint32_t seed)
{
    uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)(z ^ (z >> 31));
}

/* --- kernels (kernels.cu on a GPU, kernels_fake.c on fakecuda) --------------------- */

/* Occupies the stream `ms` milliseconds, then stores `value` into *flag
 * (host-mapped pinned memory from cf_flags, visible to every device). */
void cf_set_flag_after(cudaStream_t s, int *flag, int value, double ms);
/* When it runs: *out = *flag. */
void cf_copy_flag(cudaStream_t s, const int *flag, int *out);
/* Occupies the stream `ms` milliseconds. */
void cf_sleep(cudaStream_t s, double ms);
/* Occupies every SM of the stream's device `ms` milliseconds (enough blocks
 * of 1024 threads to fill every SM's thread slots; on fakecuda a grid of one
 * block per SM): no copy kernel finds room beside it (case D). The blocks
 * leave together, at one deadline; the first to leave stores `value` into
 * *flag (host-mapped, from cf_flags; NULL: none). One at a time per device. */
void cf_occupy(cudaStream_t s, double ms, int *flag, int value);
/* Every kernel above launched once on every device (cf_begin does it): a
 * kernel's first launch loads its module, which waits for work in flight. */
void cf_warm_kernels(void);
/* Occupies the stream `ms` milliseconds, then p[i] = cf_word(i, seed) for i < n
 * (p: device memory of the stream's device). */
void cf_fill(cudaStream_t s, uint32_t *p, size_t n, uint32_t seed, double ms);

/* --- the program -------------------------------------------------------------------- */

/* A failed call prints "CONFORM <rule> ERROR <call>=<error name>" and exits 1. */
#define CF_CK(call) cf_ck((call), #call, __FILE__, __LINE__)
void cf_ck(cudaError_t err, const char *what, const char *file, int line);

/* Names the rule (program name from argv[0], arguments joined with '.'),
 * makes device 0 current and arms a watchdog (60 s: "CONFORM <rule> HANG"). */
void cf_begin(int argc, char **argv);
/* Only names the rule (and takes the arguments): no CUDA call, for a parent
 * that forks before it uses CUDA (host_memory_fault). */
void cf_name(int argc, char **argv);
/* Whether argument `name` was given. */
bool cf_arg(const char *name);
/* Prints "CONFORM <rule> SKIP" and exits 0 when fewer devices exist. */
void cf_need_devices(int n);
/* Prints "CONFORM <rule> <outcome>" (printf format); the program then returns 0. */
void cf_result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* `n` ints of host-mapped, portable pinned memory, zeroed: flags kernels on
 * any device and the host read and write. */
int *cf_flags(int n);
/* A blocking (cudaStreamCreate) or non-blocking stream made on `device`;
 * `device` is current afterwards. */
cudaStream_t cf_stream(int device, bool blocking);
/* `n` words of device memory on `device` (device current afterwards). */
uint32_t *cf_words(int device, size_t n);
/* Synchronizes every device, then counts the words of device buffer p that
 * are cf_word(i, seed). Leaves device 0 current. */
size_t cf_words_right(const uint32_t *p, size_t n, uint32_t seed);
/* Synchronizes every device; leaves device 0 current. */
void cf_sync_all(void);
/* The ordering probe: with `wdev` current a writer kernel on `writer` spins
 * 200 ms then sets a flag; right after, with `rdev` current, a reader kernel
 * on `reader` copies the flag. Returns what the reader saw once everything is
 * done: 1 = the reader ran after the writer (ordered), 0 = it did not wait.
 * Stream handle 0 means the legacy stream of the device current then. */
int cf_reader_saw(int wdev, cudaStream_t writer, int rdev, cudaStream_t reader);

#ifdef __cplusplus
}
#endif

#endif
