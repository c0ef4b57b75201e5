/* findings.c - what the program did that implicitly synchronizes (see
 * findings.h): the finding path's entry. A finding is added to its row
 * (findings_rows.c), to the timeline's ring (findings_rings.c) and, in warn
 * mode, may be announced (findings_warn.c); strict mode is
 * findings_strict.c, the report findings_collect.c.
 *
 * A finding at a (rule, site) the thread met before is counted in the
 * thread's own memory, without a lock (findings_local.h): most copies
 * repeat, and each has a finding or two. At a new one the path takes a mutex
 * and may allocate, but only within fixed bounds (the rows, then one "other
 * sites" row per rule; rings of fixed size). Symbolizing (dladdr) happens
 * outside the lock, only for a warn line, a strict-mode message, an
 * allow-list pattern or the report. */
#include "findings.h"
#include "hot.h"
#include "findings_rings.h"

#include "config.h"
#include "findings_local.h"
#include "findings_rows.h"
#include "findings_warn.h"

US_HOT bool us_findings_wanted(void) { return us_config()->mode != US_MODE_OFF; }

void us_findings_prepare(void)
{
    us_callsite_prepare();
    us_findings_rings_prepare();
}

void us_findings_prepare_thread(void)
{
    (void)us_findings_thread_id();
}

/* The finding on the timeline, its row's id given. */
US_HOT static void push_event(uint32_t row_id, const struct us_finding *f, int tid)
{
    us_findings_event_push(&(struct us_report_event){
        .row = row_id,
        .rule = f->rule,
        .fixed = f->fixed,
        .stream_kind = f->stream_kind,
        .tid = tid,
        .src_device = f->src_device,
        .dst_device = f->dst_device,
        .stream = (uintptr_t)f->stream,
        .context = (uintptr_t)f->context,
        .start_ns = f->start_ns,
        .held_ns = f->held_ns,
        .bytes = f->bytes,
    });
}

US_HOT void us_findings_record_call(const struct us_finding *f, int count, const struct us_site *site)
{
    if (f == NULL || site == NULL || count <= 0 || count > US_FINDINGS_PER_CALL_MAX)
        return;
    const struct us_config *cfg = us_config();
    if (cfg->mode == US_MODE_OFF)
        return;
    uint64_t hash = us_callsite_hash(site);
    int tid = us_findings_thread_id();

    /* rows this thread met: counted in its own memory, no lock */
    struct us_findings_local *known[US_FINDINGS_PER_CALL_MAX];
    int k = 0;
    while (k < count && (unsigned)f[k].rule < US_RULE_COUNT &&
           (known[k] = us_findings_local_find(f[k].rule, hash, NULL)) != NULL)
        k++;
    if (k == count) {
        for (int i = 0; i < count; i++) {
            us_findings_local_add(known[i], &f[i]);
            push_event(us_findings_local_row_id(known[i]), &f[i], tid);
        }
        return;
    }

    bool announce[US_FINDINGS_PER_CALL_MAX] = { false };
    uint64_t skipped[US_FINDINGS_PER_CALL_MAX] = { 0 };
    us_findings_lock();
    for (int i = 0; i < count; i++) {
        if ((unsigned)f[i].rule >= US_RULE_COUNT)
            continue;
        struct us_findings_row *row = us_findings_row_get(f[i].rule, hash, site, f[i].api);
        bool first = us_findings_row_add(row, &f[i]);
        push_event(row->r.id, &f[i], tid);
        us_findings_local_learn(row, f[i].rule, hash, NULL);
        if (first && !row->r.other && cfg->mode == US_MODE_WARN)
            announce[i] = us_findings_warn_due(f[i].rule, (uint64_t)cfg->warn_interval_ms * 1000000u, &skipped[i]);
    }
    us_findings_unlock();

    for (int i = 0; i < count; i++)
        if (announce[i])
            us_findings_warn_line(&f[i], site, skipped[i]);
}

void us_findings_record(const struct us_finding *f, const struct us_site *site)
{
    us_findings_record_call(f, 1, site);
}

US_HOT void us_findings_record_unlocated(const struct us_finding *f)
{
    if (f == NULL || (unsigned)f->rule >= US_RULE_COUNT || us_config()->mode == US_MODE_OFF)
        return;
    int tid = us_findings_thread_id();
    struct us_findings_local *known = us_findings_local_find(f->rule, 0, f->api);
    if (known != NULL) {
        us_findings_local_add(known, f);
        push_event(us_findings_local_row_id(known), f, tid);
        return;
    }
    us_findings_lock();
    struct us_findings_row *row = us_findings_row_unlocated(f->rule, f->api);
    us_findings_row_add(row, f);
    push_event(row->r.id, f, tid);
    us_findings_local_learn(row, f->rule, 0, f->api);
    us_findings_unlock();
}

void us_findings_reset(void)
{
    us_findings_lock();
    us_findings_rows_reset();
    us_findings_local_reset();
    us_findings_events_reset();
    us_findings_warn_reset();
    us_findings_unlock();
    us_findings_spans_reset();
    us_findings_report_rearm();
    us_findings_forbidden_reset();
}
