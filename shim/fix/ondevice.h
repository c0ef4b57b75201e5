/* ondevice.h - the shim's own events and streams, made on a given device.
 *
 * The pool's slot events (staging.c), the lanes' streams and events
 * (lanes.c) and the pipelines all need them on a device that may not be the
 * caller's current one; this module switches to it and back, and nothing
 * else. */
#ifndef UNSTALL_ONDEVICE_H
#define UNSTALL_ONDEVICE_H

#include <cuda_runtime_api.h>

/* An event (cudaEventDisableTiming) or a non-blocking stream made on
 * `device`, switching to it and back to `current` when they differ. A
 * failure is logged once (one message for events, one for streams). */
cudaError_t us_ondevice_event_create(int device, int current, cudaEvent_t *out);
cudaError_t us_ondevice_stream_create(int device, int current, cudaStream_t *out);

#endif
