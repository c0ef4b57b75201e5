/* streams.h - the program's streams that the shim saw created: their device
 * and whether they are blocking, remembered at creation so that destroying a
 * stream asks the runtime nothing. A query of a stream that takes part in a
 * graph capture may invalidate the capture (NVIDIA's graphMemoryNodes sample
 * destroys a joined stream before cudaStreamEndCapture), so the destroy hook
 * calls only the real cudaStreamDestroy.
 *
 * Keeps the count of blocking streams per device (device_state.h) in step.
 * One mutex: creation and destruction are not on any hot path. */
#ifndef UNSTALL_STREAMS_H
#define UNSTALL_STREAMS_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

/* A stream the program created on `device` (the current device at
 * creation); counted when blocking. A handle seen again (the runtime reused
 * it without us seeing the destroy) replaces the old entry. */
void us_streams_note_created(cudaStream_t stream, int device, bool blocking);
/* The program destroyed `stream`: forgotten and uncounted. A stream never
 * seen created (made before the shim loaded, or through another path) is
 * ignored. */
void us_streams_note_destroyed(cudaStream_t stream);
/* Whether the program created `stream` blocking: 1, non-blocking: 0, never
 * seen created: -1. */
int us_streams_is_blocking(cudaStream_t stream);
/* The blocking streams the program created on `device`: how many there are,
 * the first `max` of them into out. */
unsigned us_streams_blocking_on(int device, cudaStream_t *out, unsigned max);
/* Streams remembered (tests). */
unsigned us_streams_count(void);
void us_streams_reset(void); /* tests */

#endif
