/* report_text.c - the text report, an emitter of the report's walk
 * (report_walk.h): every line "unstall[pid]: ..." and newline-terminated: a
 * header, time held per rule, the top rows with their call sites, the fixes
 * of the rules seen. */
#include "report.h"

#include <stdio.h>
#include <string.h>

#include "callsite.h"
#include "report_buf.h"
#include "report_walk.h"

struct text_out {
    struct us_buf b;
    const struct us_report *r;
    unsigned top;
    bool listing; /* rules and rows are shown: CUDA calls reached the shim and it found something */
    char pre[40];
};

static void text_begin(void *out, const struct us_report *r)
{
    struct text_out *t = out;
    struct us_buf *b = &t->b;
    const char *pre = t->pre;
    char held[32], signame[32];
    const char *who = r->cmdline[0] != '\0' ? r->cmdline : r->program;
    char rank[128] = "";
    if (r->rank[0] != '\0')
        snprintf(rank, sizeof rank, ", rank %s", r->rank);
    if (r->host[0] != '\0')
        snprintf(rank + strlen(rank), sizeof rank - strlen(rank), ", host %s", r->host);
    uint64_t ran = r->now_mono_ns > r->origin_mono_ns ? r->now_mono_ns - r->origin_mono_ns : 0;
    char end[64] = "";
    if (r->end == US_REPORT_END_SIGNAL)
        snprintf(end, sizeof end, ", ended by %s", us_report_signal_name(r->end_signal, signame, sizeof signame));
    else if (r->end == US_REPORT_END_SNAPSHOT)
        snprintf(end, sizeof end, ", still running (snapshot)");
    us_buf_printf(b, "%s---- unstall report: %s (pid %ld%s), mode %s, ran %s%s ----\n", pre, who, r->pid, rank,
                  r->mode != NULL ? r->mode : "?", us_report_time(ran, held, sizeof held), end);

    if (r->driver_layer)
        us_buf_printf(b, "%s%s\n", pre, us_report_driver_layer_reach);
    if (r->legacy_moved > 0)
        us_buf_printf(b, "%slegacy_stream=%s moved %llu calls off the legacy default stream (docs/findings.md, case E)\n",
                      pre, r->legacy_stream != NULL ? r->legacy_stream : "?", r->legacy_moved);
    if (!r->hooked) {
        switch (r->cuda.use) {
        case US_CUDA_USE_RUNTIME_IDLE:
            /* torchrun's own process after `import torch`: nothing to fix */
            us_buf_printf(b, "%sunstall saw no CUDA runtime call: the process loaded the CUDA runtime (%s) but "
                             "called none of it (a launcher such as torchrun, or a process that did not use the "
                             "GPU); nothing to report\n", pre, r->cuda.runtime);
            break;
        case US_CUDA_USE_DRIVER_ONLY:
            us_buf_printf(b, "%sunstall saw no CUDA runtime call, but the process used the CUDA driver without "
                             "libcudart: the program links the CUDA runtime statically (nvcc's default) or calls the "
                             "driver API, which a runtime-layer preload cannot see; build with -cudart shared\n", pre);
            break;
        case US_CUDA_USE_DRIVER_LOADED:
            us_buf_printf(b, "%sunstall saw no CUDA runtime call; libcuda.so.1 is loaded but no libcudart: if the "
                             "program used CUDA, it links the CUDA runtime statically (nvcc's default) or calls the "
                             "driver API, which a runtime-layer preload cannot see; build with -cudart shared\n", pre);
            break;
        default:
            us_buf_printf(b, "%sunstall saw no CUDA runtime call: if the program links the CUDA runtime statically "
                             "(nvcc's default), a runtime-layer preload cannot see it; build with -cudart shared\n",
                          pre);
        }
    } else if (r->row_count == 0) {
        us_buf_printf(b, "%sno implicit synchronization seen\n", pre);
    }
}

static void text_part_begin(void *out, enum us_report_part part, size_t count)
{
    struct text_out *t = out;
    (void)count;
    if (t->listing && part == US_REPORT_PART_RULES)
        us_buf_printf(&t->b, "%stime the calls held the caller, by rule:\n", t->pre);
}

static void text_rule(void *out, size_t index, const struct us_report_rule_total *total)
{
    struct text_out *t = out;
    (void)index;
    if (!t->listing)
        return;
    struct us_buf *b = &t->b;
    char held[32], amount[32];
    const struct us_rule_info *info = &us_rules[total->rule];
    us_buf_printf(b, "%s  %-18s %-6s %10s in %llu call%s", t->pre, info->id, us_severity_name(info->severity),
                  us_report_time(total->total_ns, held, sizeof held), (unsigned long long)total->count,
                  total->count == 1 ? "" : "s");
    if (total->bytes > 0)
        us_buf_printf(b, ", %s", us_report_bytes(total->bytes, amount, sizeof amount));
    if (total->fixed > 0)
        us_buf_printf(b, ", %llu fixed", (unsigned long long)total->fixed);
    if (total->forbidden > 0)
        us_buf_printf(b, ", %llu forbidden", (unsigned long long)total->forbidden);
    us_buf_printf(b, "\n");
}

static void text_row(void *out, size_t index, const struct us_report_row *row)
{
    struct text_out *t = out;
    if (!t->listing || index >= t->top)
        return;
    struct us_buf *b = &t->b;
    char held[32], amount[32], max[32], fixed[48], where[2048];
    const struct us_rule_info *info = &us_rules[row->rule];
    snprintf(fixed, sizeof fixed, "%llu/%llu", (unsigned long long)row->fixed, (unsigned long long)row->observed);
    us_buf_printf(b, "%s%4zu  %-18s %-6s %8llu %10s %10s %10s %11s  %s", t->pre, index + 1, info->id,
                  us_severity_name(info->severity), (unsigned long long)row->count,
                  row->bytes > 0 ? us_report_bytes(row->bytes, amount, sizeof amount) : "-",
                  row->count > 0 ? us_report_time(row->total_ns, held, sizeof held) : "-",
                  row->count > 0 ? us_report_time(row->max_ns, max, sizeof max) : "-", fixed,
                  row->api != NULL ? row->api : "?");
    if (row->forbidden > 0)
        us_buf_printf(b, ", %llu forbidden", (unsigned long long)row->forbidden);
    us_buf_printf(b, "\n");
    if (row->other)
        snprintf(where, sizeof where, "(other sites: the table of call sites is full)");
    else if (row->unlocated)
        snprintf(where, sizeof where, "(short waits: counted, not located by call site; option sync_site_min_us)");
    else
        us_callsite_line_source(&row->site, 3, where, sizeof where);
    us_buf_printf(b, "%s        at %s\n", t->pre, where);
}

static void text_part_end(void *out, enum us_report_part part, size_t count)
{
    struct text_out *t = out;
    if (!t->listing)
        return;
    struct us_buf *b = &t->b;
    if (part == US_REPORT_PART_RULES) {
        us_buf_printf(b, "%s\n", t->pre);
        us_buf_printf(b, "%s%4s  %-18s %-6s %8s %10s %10s %10s %11s  %s\n", t->pre, "#", "rule", "sev", "count",
                      "bytes", "total", "max", "fixed/obs", "api");
    } else if (part == US_REPORT_PART_FINDINGS && count > t->top) {
        size_t more = count - t->top;
        us_buf_printf(b, "%s  ... %zu more row%s (option report_top; all of them in the JSON report, option report)\n",
                      t->pre, more, more == 1 ? "" : "s");
    }
}

static void text_end(void *out, const struct us_report_rule_total *totals, size_t seen)
{
    struct text_out *t = out;
    struct us_buf *b = &t->b;
    const struct us_report *r = t->r;
    if (t->listing) {
        us_buf_printf(b, "%s\n%show to fix them:\n", t->pre, t->pre);
        for (size_t i = 0; i < seen; i++)
            us_buf_printf(b, "%s  %-18s %s\n", t->pre, us_rules[totals[i].rule].id, us_rules[totals[i].rule].fix);
        if (r->events_dropped > 0)
            us_buf_printf(b, "%sthe timeline keeps the last %zu findings (%llu older ones dropped)\n", t->pre,
                          r->event_count, (unsigned long long)r->events_dropped);
    }
    if (r->json_path[0] != '\0')
        us_buf_printf(b, "%sJSON report: %s (tools/unstall-report renders and merges it)\n", t->pre, r->json_path);
    us_buf_printf(b, "%s---- end of unstall report ----\n", t->pre);
}

static const struct us_report_emitter text_emitter = {
    .begin = text_begin,
    .part_begin = text_part_begin,
    .rule = text_rule,
    .row = text_row,
    .part_end = text_part_end,
    .end = text_end,
};

char *us_report_text(const struct us_report *r, unsigned top)
{
    struct text_out t = { .r = r, .top = top, .listing = r->hooked && r->row_count > 0 };
    snprintf(t.pre, sizeof t.pre, "unstall[%ld]: ", r->pid);
    us_report_walk(r, &text_emitter, &t);
    return us_buf_finish(&t.b);
}
