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

/* Fills c->src_mem, c->dst_mem, c->path and c->stream_kind. may_remember:
 * host pages the runtime called pageable before are taken as pageable
 * without asking it again (hostpages.h; the mem's `remembered` says so). */
void us_classify_copy(struct us_copy *c, bool may_remember);

/* Asks the runtime whether ptr is pageable memory after all (a copy about to
 * be rewritten on a remembered answer); when it is not, its page is
 * forgotten. */
bool us_classify_confirm_pageable(const void *ptr);

/* Whether the copy's host side, as its kind says (the source of a
 * host-to-device copy, the destination of a device-to-host one, either of a
 * host-to-host one), is memory the shim's table does not know: pageable, or
 * pinned by calls the shim did not see. Classifying it asks the runtime.
 * False for any other kind. A side found missing is marked so in c
 * (src_unlisted, dst_unlisted): us_classify_copy does not look it up again. */
bool us_classify_host_unknown(struct us_copy *c);

/* What a stream handle means, for a plain (per_thread false) or a _ptsz entry. */
enum us_stream_kind us_stream_kind_of(cudaStream_t stream, bool per_thread);

/* Whether either pointer is host memory (pinned, registered or pageable), as
 * classify.c sees it: a synchronous copy that touches the host holds the
 * caller (sync_memcpy). */
bool us_touches_host(const void *dst, const void *src);

#endif
