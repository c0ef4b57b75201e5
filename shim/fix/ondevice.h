/* ondevice.h - the shim's own events and streams, made on a given device,
 * in the right context.
 *
 * The pool's slot events (staging.c), the lanes' streams and events
 * (lanes.c) and the pipelines all need them on a device that may not be the
 * caller's current one; this module switches to it and back, and nothing
 * else. An object on the caller's device is made in the caller's context
 * (`home`: the context the copy is issued in, primary or created), so that
 * the copy's streams may use it; one on another device in that device's
 * primary context (cudaSetDevice), after which `home` is made current again
 * (us_context_restore: a created context is not the primary one that
 * cudaSetDevice of its device would give). */
#ifndef UNSTALL_ONDEVICE_H
#define UNSTALL_ONDEVICE_H

#include <cuda_runtime_api.h>

#include "context.h"

/* An event (cudaEventDisableTiming) or a non-blocking stream made on
 * `device`, switching to it and back to `home` when they differ. A
 * failure is logged once (one message for events, one for streams). */
cudaError_t us_ondevice_event_create(int device, const struct us_ctx *home, cudaEvent_t *out);
cudaError_t us_ondevice_stream_create(int device, const struct us_ctx *home, cudaStream_t *out);

/* The same in context `in` (which may be a created context of another
 * device: pushed and popped), for a slot event recorded on a stream of it. */
cudaError_t us_ondevice_event_create_in(const struct us_ctx *in, const struct us_ctx *home, cudaEvent_t *out);

/* Switches the calling thread to `device`'s primary context for a moment
 * (cudaSetDevice) and back to `home`. */
cudaError_t us_ondevice_enter(int device, const struct us_ctx *home);
cudaError_t us_ondevice_leave(int device, const struct us_ctx *home);

#endif
