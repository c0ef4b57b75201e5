/* watch.h - one rule around one native call, for the entries that are not
 * copies (syncs, allocations, launches on the legacy stream): capture the
 * site, apply strict mode, time the call, record the finding. */
#ifndef UNSTALL_WATCH_H
#define UNSTALL_WATCH_H

#include "findings.h"
#include "hang.h"

struct us_watch {
    bool active; /* false: mode off, nothing captured or recorded */
    bool located; /* the site was captured before the call (else: after it, if the wait was long) */
    enum us_rule_id rule;
    const char *api;
    uint64_t start_ns;
    struct us_site site;
    struct us_hang_mark hang; /* the hang explainer's publication of the call */
};

/* Returns false when strict mode forbids the call: return US_ERR_FORBIDDEN
 * (nothing to end then). An explicit wait (explicit_sync) that strict mode
 * cannot refuse is located after the call, and only when it waited at least
 * sync_site_min_us: a shorter one is counted without a site (capturing one
 * costs about as much as such a wait). */
bool us_watch_begin(struct us_watch *w, enum us_rule_id rule, const char *api);

/* After the native call. device -1 where not known. */
void us_watch_end(struct us_watch *w, cudaStream_t stream, enum us_stream_kind kind, int device, size_t bytes);

/* True when the stream is the legacy default stream and the current device
 * (whose legacy stream it is) has blocking streams alive; notes the legacy
 * stream's use on that device either way. */
bool us_legacy_contended(enum us_stream_kind kind);

#endif
