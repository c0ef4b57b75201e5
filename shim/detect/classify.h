/* classify.h - what kind of memory each pointer is, which device, which path
 * a copy takes. Classified from the pointers, the stream and the peer state,
 * never from the `kind` argument alone (cudaMemcpyDefault is common, and a
 * DeviceToDevice copy between two devices is a cross-GPU copy). Anything not
 * known with certainty comes out US_PATH_UNKNOWN: the native call. */
#ifndef UNSTALL_CLASSIFY_H
#define UNSTALL_CLASSIFY_H

#include "copy.h"

/* Pointer: the shim's table first, then cudaPointerGetAttributes. */
void us_classify_pointer(const void *ptr, struct us_mem *out);

/* Fills c->src_mem, c->dst_mem, c->path and c->stream_kind. */
void us_classify_copy(struct us_copy *c);

#endif
