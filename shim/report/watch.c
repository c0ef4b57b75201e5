/* watch.c - see watch.h. */
#include "watch.h"
#include "hot.h"

#include "context.h"
#include "device_state.h"
#include "state.h"

US_HOT bool us_watch_begin(struct us_watch *w, enum us_rule_id rule, const char *api)
{
    w->active = us_findings_wanted();
    w->rule = rule;
    w->api = api;
    w->located = false;
    if (w->active) {
        if (rule != US_RULE_explicit_sync || us_config()->sync_site_min_us == 0 || us_findings_may_forbid(rule)) {
            us_site_capture(&w->site);
            if (us_findings_forbidden(rule, &w->site, api))
                return false;
            w->located = true;
        }
    }
    /* before the clock: a thread's first publication (its record) is not
     * part of the wait */
    us_hang_enter(&w->hang, api, NULL, false);
    if (w->active)
        w->start_ns = us_now_ns();
    return true;
}

US_HOT void us_watch_end(struct us_watch *w, cudaStream_t stream, enum us_stream_kind kind, int device, size_t bytes)
{
    us_hang_leave(&w->hang);
    if (!w->active)
        return;
    uint64_t end = us_now_ns();
    struct us_finding f = {
        .rule = w->rule,
        .api = w->api,
        .bytes = bytes,
        .path = US_PATH_UNKNOWN,
        .src_device = -1,
        .dst_device = device,
        .stream = stream,
        .stream_kind = kind,
        .start_ns = w->start_ns,
        .held_ns = end - w->start_ns,
        .fixed = false,
    };
    if (!w->located && f.held_ns < (uint64_t)us_config()->sync_site_min_us * 1000u) {
        us_findings_record_unlocated(&f);
        return;
    }
    if (!w->located)
        us_site_capture(&w->site); /* the same frames: the shim's own are dropped */
    us_findings_record(&f, &w->site);
}

US_HOT bool us_legacy_contended(enum us_stream_kind kind)
{
    if (kind != US_STREAM_LEGACY || !us_findings_wanted())
        return false;
    int device = us_current_device();
    us_device_note_legacy_use(device); /* one relaxed read once noted */
    /* one atomic read spares the per-device lookup in the common case */
    return us_device_any_blocking_streams() && us_device_blocking_streams(device) > 0;
}
