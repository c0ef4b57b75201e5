/* legacy_stream.h - the opt-in remedy of case E (option legacy_stream): the
 * program's work on the legacy default stream (stream 0 in a plain build,
 * cudaStreamLegacy anywhere) is issued on another stream, so that it no
 * longer waits for the earlier work of every blocking stream of its device.
 *
 * Stream 0 orders three ways: (1) its work waits for the earlier work of
 * every blocking stream, (2) later work of every blocking stream waits for
 * it, (3) every thread's stream-0 work is one sequence. (1) is the stall.
 *
 * ordered     one non-blocking stream of the shim's per context takes every
 *             thread's moved work (3 kept); after each moved operation the
 *             legacy stream waits for it through an event, so later work of
 *             blocking streams, of the legacy stream (a library's, unseen)
 *             and of per-thread streams comes after it (2 kept). Dropped:
 *             (1), and the order of a moved operation after legacy-stream
 *             work the shim does not see (a library launching on stream 0
 *             through libcuda): safe only where every stream-0 operation
 *             comes through a call the shim wraps.
 * per_thread  the calling thread's per-thread default stream, as if the
 *             program had been built with nvcc --default-stream per-thread:
 *             that stream waits for the legacy stream's earlier work and the
 *             legacy stream for its, so the thread's own order holds with any
 *             legacy work, seen or not. Dropped: (1), (2) and (3) across
 *             threads: a blocking stream's later work may run before it.
 *
 * Host waits on stream 0 (cudaStreamSynchronize, cudaStreamQuery) are not
 * moved: the legacy stream includes the moved work in both modes, so they
 * wait for what they waited for before. Which calls move: docs/findings.md. */
#ifndef UNSTALL_LEGACY_STREAM_H
#define UNSTALL_LEGACY_STREAM_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

struct ordered_target;

struct us_legacy_move {
    bool ordered; /* us_legacy_move_end records and makes the legacy stream wait */
    cudaStream_t to;
    struct ordered_target *target; /* ordered: the context's stream and event */
};

/* The stream to issue a call on that names `stream` (per_thread: whether 0
 * means the per-thread stream in this API): `stream` itself, unless it is
 * the legacy stream and legacy_stream moves it. One load when the option is
 * off. Call us_legacy_move_end after issuing, whatever the result.
 * via_driver: the call came in at the driver layer (a static runtime's or a
 * driver-API program's). ordered moves none of those: such a program's
 * kernel launches, memsets and event waits on stream 0 reach libcuda through
 * functions the shim does not wrap, and a moved copy would pass them (a
 * kernel writing a buffer, then the copy reading it). */
cudaStream_t us_legacy_move_begin(cudaStream_t stream, bool per_thread, bool via_driver, struct us_legacy_move *m);

/* After the moved call (issued: it succeeded and put work on the stream):
 * ordered, the legacy stream waits for it. */
void us_legacy_move_end(const struct us_legacy_move *m, bool issued);

/* A call with no stream argument that runs on the legacy stream (cudaMemcpy,
 * cudaMemset): true when its per-thread variant (_ptds) should be called
 * instead (legacy_stream=per_thread). Under ordered it stays: it holds the
 * caller until done, and the legacy stream comes after the moved work. */
bool us_legacy_streamless_to_per_thread(bool per_thread);

#endif
