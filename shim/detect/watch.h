/* watch.h - one rule around one native call, for the entries that are not
 * copies (syncs, allocations, launches on the legacy stream): capture the
 * site, apply strict mode, time the call, record the finding. */
#ifndef UNSTALL_WATCH_H
#define UNSTALL_WATCH_H

#include "findings.h"

struct us_watch {
    bool active; /* false: mode off, nothing captured or recorded */
    enum us_rule_id rule;
    const char *api;
    uint64_t start_ns;
    struct us_site site;
};

/* Returns false when strict mode forbids the call: return US_ERR_FORBIDDEN. */
bool us_watch_begin(struct us_watch *w, enum us_rule_id rule, const char *api);

/* After the native call. device -1 where not known. */
void us_watch_end(struct us_watch *w, cudaStream_t stream, enum us_stream_kind kind, int device, size_t bytes);

/* What a stream handle means, for a plain (per_thread false) or a _ptsz entry. */
enum us_stream_kind us_stream_kind_of(cudaStream_t stream, bool per_thread);

/* True when the stream is the legacy default stream and the current device
 * (whose legacy stream it is) has blocking streams alive; notes the legacy
 * stream's use on that device either way. */
bool us_legacy_contended(enum us_stream_kind kind);

/* Whether either pointer is host memory (pinned, registered or pageable), as
 * classify.c sees it: a synchronous copy that touches the host holds the
 * caller (sync_memcpy). */
bool us_touches_host(const void *dst, const void *src);

/* The current device, or -1. */
int us_current_device(void);

#endif
