/* classify.c - see classify.h. */
#include "classify.h"

#include <stdint.h>

#include "device_state.h"
#include "real.h"
#include "watch.h"

void us_classify_pointer(const void *ptr, struct us_mem *out)
{
    struct us_range range;
    out->kind = US_MEM_UNKNOWN;
    out->device = -1;
    if (ptr == NULL)
        return;
    if (us_ptrtable_lookup((uintptr_t)ptr, &range)) {
        out->kind = range.kind;
        out->device = range.kind == US_MEM_DEVICE ? range.device : -1;
        return;
    }
    /* Not allocated through an intercepted call (driver API, VMM segments,
     * plain malloc): ask the runtime. Its answer is not stored: pageable
     * memory may later be registered, and VMM ranges are not known to us. */
    const struct us_real_api *real = us_real();
    struct cudaPointerAttributes attr;
    if (real->cudaPointerGetAttributes == NULL || real->cudaPointerGetAttributes(&attr, ptr) != cudaSuccess)
        return;
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
        break;
    }
}

/* Whether [ptr, ptr+bytes) lies inside the range the table knows for ptr.
 * Pointers the runtime classified (not in the table) count as inside: the
 * runtime checks bounds itself, and the copy it refuses is refused natively. */
static bool within_known_range(const void *ptr, size_t bytes)
{
    struct us_range range;
    if (!us_ptrtable_lookup((uintptr_t)ptr, &range))
        return true;
    return bytes <= range.size - ((uintptr_t)ptr - range.base);
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

static enum us_copy_path path_of(const struct us_copy *c)
{
    const struct us_mem *s = &c->src_mem, *d = &c->dst_mem;
    bool src_host = is_host(s->kind), dst_host = is_host(d->kind);
    if ((!src_host && s->kind != US_MEM_DEVICE) || (!dst_host && d->kind != US_MEM_DEVICE))
        return US_PATH_UNKNOWN; /* unknown or managed memory */
    if (c->api == US_API_MEMCPY_PEER || c->api == US_API_MEMCPY_PEER_ASYNC) {
        /* the devices are given: they must agree with the pointers */
        if (src_host || dst_host || s->device != c->peer_src_device || d->device != c->peer_dst_device)
            return US_PATH_UNKNOWN;
    } else if (!kind_agrees(c->kind, src_host, dst_host)) {
        return US_PATH_UNKNOWN;
    }
    if (!within_known_range(c->src, c->bytes) || !within_known_range(c->dst, c->bytes))
        return US_PATH_UNKNOWN;
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

void us_classify_copy(struct us_copy *c)
{
    c->stream_kind = us_stream_kind_of(c->stream, us_copy_is_per_thread(c));

    c->path = US_PATH_UNKNOWN;
    if (c->bytes == 0 || c->dst == NULL || c->src == NULL)
        return; /* the native call answers these */
    us_classify_pointer(c->src, &c->src_mem);
    us_classify_pointer(c->dst, &c->dst_mem);
    c->path = path_of(c);
}
