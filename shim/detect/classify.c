/* classify.c - see classify.h. */
#include "classify.h"
#include "hot.h"

#include <stdint.h>

#include "device_state.h"
#include "hostpages.h"
#include "log.h"
#include "real.h"

/* Returns the bytes from ptr to the end of the range the table knows for
 * it; SIZE_MAX for a pointer the runtime classified (it checks bounds itself,
 * and the copy it refuses is refused natively); 0 when unknown.
 * may_remember: a page the runtime called pageable before may be taken as
 * pageable without asking (hostpages.h). unlisted: the table was asked about
 * ptr in this call and did not know it. */
US_HOT static size_t classify_pointer(const void *ptr, bool may_remember, bool unlisted, struct us_mem *out)
{
    struct us_range range;
    out->kind = US_MEM_UNKNOWN;
    out->device = -1;
    out->remembered = false;
    if (ptr == NULL)
        return 0;
    if (!unlisted && us_ptrtable_lookup((uintptr_t)ptr, &range)) {
        out->kind = range.kind;
        out->device = range.kind == US_MEM_DEVICE ? range.device : -1;
        return range.size - ((uintptr_t)ptr - range.base);
    }
    /* Not allocated through an intercepted call (driver API, VMM segments,
     * plain malloc): ask the runtime, unless it called this page pageable
     * since memory was last mapped (hostpages.h). No other answer is kept:
     * VMM ranges and memory pinned unseen are not known to the table. */
    if (may_remember && us_hostpages_pageable(ptr)) {
        out->kind = US_MEM_PAGEABLE;
        out->remembered = true;
        return SIZE_MAX;
    }
    const struct us_real_api *real = us_real();
    struct cudaPointerAttributes attr;
    uint64_t asked_in = us_hostpages_generation();
    if (real->cudaPointerGetAttributes == NULL || real->cudaPointerGetAttributes(&attr, ptr) != cudaSuccess)
        return 0;
    switch (attr.type) {
    case cudaMemoryTypeDevice:
        out->kind = US_MEM_DEVICE;
        out->device = attr.device;
        break;
    case cudaMemoryTypeHost:
        out->kind = US_MEM_PINNED;
        break;
    case cudaMemoryTypeManaged:
        out->kind = US_MEM_MANAGED;
        break;
    case cudaMemoryTypeUnregistered:
        out->kind = US_MEM_PAGEABLE;
        us_hostpages_learn_pageable(ptr, asked_in);
        break;
    }
    return SIZE_MAX;
}

void us_classify_pointer(const void *ptr, struct us_mem *out)
{
    classify_pointer(ptr, false, false, out);
}

static int logged_refuted;

US_HOT bool us_classify_confirm_pageable(const void *ptr)
{
    struct us_mem mem;
    classify_pointer(ptr, false, false, &mem);
    if (mem.kind == US_MEM_PAGEABLE)
        return true;
    us_hostpages_forget(ptr);
    us_log_once(&logged_refuted, US_LOG_INFO,
                "host memory the runtime had called pageable was pinned or mapped by a call the shim did not see: "
                "a copy about to be rewritten went native instead");
    return false;
}

static bool is_host(enum us_mem_kind kind)
{
    return kind == US_MEM_PINNED || kind == US_MEM_REGISTERED || kind == US_MEM_PAGEABLE;
}

static bool kind_agrees(enum cudaMemcpyKind kind, bool src_host, bool dst_host)
{
    switch (kind) {
    case cudaMemcpyDefault: return true;
    case cudaMemcpyHostToHost: return src_host && dst_host;
    case cudaMemcpyHostToDevice: return src_host && !dst_host;
    case cudaMemcpyDeviceToHost: return !src_host && dst_host;
    case cudaMemcpyDeviceToDevice: return !src_host && !dst_host;
    default: return false;
    }
}

/* src_room, dst_room: what classify_pointer returned for each. */
static enum us_copy_path path_of(const struct us_copy *c, size_t src_room, size_t dst_room)
{
    const struct us_mem *s = &c->src_mem, *d = &c->dst_mem;
    bool src_host = is_host(s->kind), dst_host = is_host(d->kind);
    if ((!src_host && s->kind != US_MEM_DEVICE) || (!dst_host && d->kind != US_MEM_DEVICE))
        return US_PATH_UNKNOWN; /* unknown or managed memory */
    if (us_copy_is_peer(c)) {
        /* the devices are given: they must agree with the pointers */
        if (src_host || dst_host || s->device != c->peer_src_device || d->device != c->peer_dst_device)
            return US_PATH_UNKNOWN;
    } else if (!kind_agrees(c->kind, src_host, dst_host)) {
        return US_PATH_UNKNOWN;
    }
    if (c->bytes > src_room || c->bytes > dst_room)
        return US_PATH_UNKNOWN; /* runs past the end of a range the table knows */
    if (src_host && dst_host)
        return US_PATH_H2H;
    if (src_host)
        return s->kind == US_MEM_PAGEABLE ? US_PATH_H2D_PAGEABLE : US_PATH_H2D_PINNED;
    if (dst_host)
        return d->kind == US_MEM_PAGEABLE ? US_PATH_D2H_PAGEABLE : US_PATH_D2H_PINNED;
    if (s->device == d->device)
        return US_PATH_D2D_SAME;
    return us_device_peer_enabled(s->device, d->device) ? US_PATH_D2D_PEER : US_PATH_D2D_STAGED;
}

US_HOT void us_classify_copy(struct us_copy *c, bool may_remember)
{
    c->stream_kind = us_stream_kind_of(c->stream, us_copy_is_per_thread(c));

    c->path = US_PATH_UNKNOWN;
    if (c->bytes == 0 || c->dst == NULL || c->src == NULL) {
        /* the native call answers these; a legacy_stream finding on one
         * names no device (not the 0 of the entry's initializer) */
        c->src_mem = c->dst_mem = (struct us_mem){ .kind = US_MEM_UNKNOWN, .device = -1 };
        return;
    }
    size_t src_room = classify_pointer(c->src, may_remember, c->src_unlisted, &c->src_mem);
    size_t dst_room = classify_pointer(c->dst, may_remember, c->dst_unlisted, &c->dst_mem);
    c->path = path_of(c, src_room, dst_room);
}

static bool known(const void *ptr)
{
    return ptr != NULL && us_ptrtable_lookup((uintptr_t)ptr, NULL);
}

US_HOT bool us_classify_host_unknown(struct us_copy *c)
{
    switch (c->kind) {
    case cudaMemcpyHostToDevice: return c->src_unlisted = !known(c->src);
    case cudaMemcpyDeviceToHost: return c->dst_unlisted = !known(c->dst);
    case cudaMemcpyHostToHost:
        c->src_unlisted = !known(c->src);
        c->dst_unlisted = !known(c->dst);
        return c->src_unlisted || c->dst_unlisted;
    default: return false;
    }
}

US_HOT enum us_stream_kind us_stream_kind_of(cudaStream_t stream, bool per_thread)
{
    if (stream == NULL)
        return per_thread ? US_STREAM_PER_THREAD : US_STREAM_LEGACY;
    if (stream == cudaStreamLegacy)
        return US_STREAM_LEGACY;
    if (stream == cudaStreamPerThread)
        return US_STREAM_PER_THREAD;
    return US_STREAM_USER;
}

bool us_touches_host(const void *dst, const void *src)
{
    struct us_mem mem;
    classify_pointer(dst, true, false, &mem);
    if (is_host(mem.kind))
        return true;
    classify_pointer(src, true, false, &mem);
    return is_host(mem.kind);
}
