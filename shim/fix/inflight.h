/* inflight.h - the device memory ranges the shim's pipelines are copying
 * now, so that a release of that memory (cudaFree, cudaFreeHost,
 * cudaHostUnregister) waits until they are done with it.
 *
 * A native copy is one call: a release in another thread (which synchronizes
 * the device) finds it queued or done. A rewritten copy issues its chunks
 * while the call runs, so without this a release could free the memory
 * between two chunks and the next chunk would read or write freed memory
 * (a release racing a copy crashed under unstall in 10 of 10 runs; native
 * survived: pipe_tests' free_during_copy).
 *
 * Only pipelines register (us_pipe_begin/us_pipe_end): the pass-through path
 * pays nothing. A release scans a small fixed table (no lock); a pipeline
 * registering takes one entry with a compare-and-swap. */
#ifndef UNSTALL_INFLIGHT_H
#define UNSTALL_INFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define US_INFLIGHT_MAX 256 /* pipelined copies at once; more go native */

/* Registers the ranges [base[i], base[i] + bytes[i]) (n <= 2; bytes 0:
 * none) as being copied. false: the table is full (the caller declines).
 * *token identifies the entry for us_inflight_end. */
bool us_inflight_begin(const uintptr_t *base, const size_t *bytes, unsigned n, unsigned *token);
void us_inflight_end(unsigned token);

/* Returns once no copy registered before the call overlaps [base, base +
 * bytes) any more. A copy that registers after the range left the pointer
 * table (the caller removes it first) is not waited for. */
void us_inflight_wait(uintptr_t base, size_t bytes);

#endif
