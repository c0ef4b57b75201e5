/* findings_warn.c - warn mode's lines (see findings_warn.h). */
#include "findings_warn.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "report.h"
#include "state.h"

static bool warned[US_RULE_COUNT];
static uint64_t warn_last_ns[US_RULE_COUNT];
static uint64_t warn_skipped[US_RULE_COUNT]; /* new sites not announced since */

bool us_findings_warn_due(enum us_rule_id rule, uint64_t interval_ns, uint64_t *skipped)
{
    uint64_t now = us_now_ns();
    if (!warned[rule] || now - warn_last_ns[rule] >= interval_ns) {
        warned[rule] = true;
        warn_last_ns[rule] = now;
        *skipped = warn_skipped[rule];
        warn_skipped[rule] = 0;
        return true;
    }
    warn_skipped[rule]++;
    return false;
}

void us_findings_warn_line(const struct us_finding *f, const struct us_site *site, uint64_t skipped)
{
    char text[768], where[640], amount[32], held[32];
    size_t len = 0;
#define ADD(...)                                                                                     \
    do {                                                                                             \
        int n_ = snprintf(text + len, sizeof text - len, __VA_ARGS__);                               \
        if (n_ > 0)                                                                                  \
            len = (size_t)n_ < sizeof text - len ? len + (size_t)n_ : sizeof text - 1;               \
    } while (0)
    ADD("%s: %s", us_rules[f->rule].id, f->api != NULL ? f->api : "?");
    if (f->bytes > 0)
        ADD(" %s", us_report_bytes(f->bytes, amount, sizeof amount));
    if (f->path != US_PATH_UNKNOWN)
        ADD(" %s", us_copy_path_name(f->path));
    if (f->src_device >= 0 && f->dst_device >= 0 && f->src_device != f->dst_device)
        ADD(" device %d -> %d", f->src_device, f->dst_device);
    else if (f->dst_device >= 0 || f->src_device >= 0)
        ADD(" device %d", f->dst_device >= 0 ? f->dst_device : f->src_device);
    if (f->stream != NULL && f->stream_kind == US_STREAM_USER)
        ADD(" on stream %p", (void *)f->stream);
    else if (f->stream != NULL)
        ADD(" on stream %p (%s)", (void *)f->stream, us_report_stream_kind_name(f->stream_kind));
    else if (f->stream_kind != US_STREAM_USER)
        ADD(" on the %s default stream", us_report_stream_kind_name(f->stream_kind));
    if (f->context != NULL)
        ADD(" in context %p", f->context);
    ADD(" %s %s%s at %s", f->rule == US_RULE_busy_engine_d2d ? "started late by" : "held",
        us_report_time(f->held_ns, held, sizeof held), f->fixed ? " [fixed]" : "",
        us_callsite_line(site, 3, where, sizeof where));
    if (skipped > 0)
        ADD(" (%llu earlier new site%s of this rule not shown: warn_interval_ms)", (unsigned long long)skipped,
            skipped == 1 ? "" : "s");
#undef ADD
    us_log(US_LOG_WARN, "%s", text);
}

void us_findings_warn_reset(void)
{
    memset(warned, 0, sizeof warned);
    memset(warn_last_ns, 0, sizeof warn_last_ns);
    memset(warn_skipped, 0, sizeof warn_skipped);
}
