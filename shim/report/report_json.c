/* report_json.c - the JSON report (docs/findings.md, its schema), an
 * emitter of the report's walk (report_walk.h): every fact of the report,
 * every row, and the timeline's events and spans. */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "callsite.h"
#include "report_buf.h"
#include "state.h"
#include "report_walk.h"

struct json_out {
    struct us_buf b;
    const struct us_report *r;
};

static void json_site(struct us_buf *b, const struct us_report_row *row)
{
    const struct us_site *site = &row->site;
    us_buf_printf(b, "\"site\": {\"python\": [");
    for (int i = 0; !row->other && !row->unlocated && i < site->py_depth && i < US_SITE_PY_FRAMES; i++) {
        char file[US_SITE_PY_FILE];
        snprintf(file, sizeof file, "%s", site->py_file[i]);
        char *colon = strrchr(file, ':');
        long line = 0;
        if (colon != NULL) {
            line = strtol(colon + 1, NULL, 10);
            *colon = '\0';
        }
        us_buf_printf(b, "%s{\"file\": ", i ? ", " : "");
        us_buf_json_string(b, file);
        us_buf_printf(b, ", \"line\": %ld, \"function\": ", line);
        us_buf_json_string(b, site->py_func[i]);
        us_buf_printf(b, "}");
    }
    us_buf_printf(b, "], \"native\": [");
    for (int i = 0; !row->other && !row->unlocated && i < site->depth; i++) {
        struct us_frame fr;
        char text[512];
        us_callsite_symbolize_source(site->frames[i], &fr);
        us_buf_printf(b, "%s", i ? ", " : "");
        us_buf_json_string(b, us_callsite_frame_text(&fr, text, sizeof text));
    }
    us_buf_printf(b, "], \"native_at\": [");
    for (int i = 0; !row->other && !row->unlocated && i < site->depth; i++) {
        struct us_frame fr;
        char text[512];
        us_callsite_symbolize(site->frames[i], &fr);
        if (fr.path[0] != '\0')
            snprintf(text, sizeof text, "%s+0x%lx", fr.path, (unsigned long)fr.module_offset);
        else
            snprintf(text, sizeof text, "0x%lx", (unsigned long)fr.offset);
        us_buf_printf(b, "%s", i ? ", " : "");
        us_buf_json_string(b, text);
    }
    /* the source of each native frame where its object has debug information */
    us_buf_printf(b, "], \"native_src\": [");
    for (int i = 0; !row->other && !row->unlocated && i < site->depth; i++) {
        struct us_frame fr;
        us_callsite_symbolize_source(site->frames[i], &fr);
        us_buf_printf(b, "%s", i ? ", " : "");
        if (fr.line > 0) {
            us_buf_printf(b, "{\"file\": ");
            us_buf_json_string(b, fr.file);
            us_buf_printf(b, ", \"line\": %u}", fr.line);
        } else {
            us_buf_printf(b, "null");
        }
    }
    us_buf_printf(b, "]}");
}

static void json_begin(void *out, const struct us_report *r)
{
    struct us_buf *b = &((struct json_out *)out)->b;
    char started[64] = "";
    time_t secs = (time_t)(r->origin_real_ns / 1000000000u);
    struct tm tm;
    if (gmtime_r(&secs, &tm) != NULL)
        strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    us_buf_printf(b, "{\n  \"version\": %d,\n  \"tool\": \"unstall\",\n  \"unstall_version\": \"%s\",\n  \"pid\": %ld,\n"
                     "  \"rank\": ",
                  US_REPORT_VERSION, US_VERSION_STRING, r->pid);
    if (r->rank[0] != '\0')
        us_buf_printf(b, "%ld", strtol(r->rank, NULL, 10));
    else
        us_buf_printf(b, "null");
    us_buf_printf(b, ",\n  \"rank_from\": ");
    if (r->rank[0] != '\0' && r->rank_source != NULL)
        us_buf_json_string(b, r->rank_source);
    else
        us_buf_printf(b, "null");
    us_buf_printf(b, ",\n  \"host\": ");
    us_buf_json_string(b, r->host);
    us_buf_printf(b, ",\n  \"program\": ");
    us_buf_json_string(b, r->program);
    us_buf_printf(b, ",\n  \"cmdline\": ");
    us_buf_json_string(b, r->cmdline);
    us_buf_printf(b, ",\n  \"mode\": ");
    us_buf_json_string(b, r->mode != NULL ? r->mode : "?");
    us_buf_printf(b, ",\n  \"hooked\": %s,\n  \"cuda\": \"%s\",\n  \"started\": \"%s\",\n", r->hooked ? "true" : "false",
                  us_cuda_use_name(r->hooked ? US_CUDA_USE_RUNTIME : r->cuda.use), started);
    us_buf_printf(b, "  \"driver_layer\": ");
    if (r->driver_layer)
        us_buf_json_string(b, us_report_driver_layer_reach);
    else
        us_buf_printf(b, "null");
    us_buf_printf(b, ",\n  \"legacy_stream\": ");
    us_buf_json_string(b, r->legacy_stream != NULL ? r->legacy_stream : "keep");
    us_buf_printf(b, ",\n  \"legacy_moved\": %llu,\n", r->legacy_moved);
    us_buf_printf(b, "  \"clock\": {\"monotonic_ns\": %llu, \"realtime_ns\": %llu},\n",
                  (unsigned long long)r->origin_mono_ns, (unsigned long long)r->origin_real_ns);
    us_buf_printf(b, "  \"ended_ns\": %llu,\n", (unsigned long long)r->now_mono_ns);
    char signame[32];
    us_buf_printf(b, "  \"end\": {\"how\": \"%s\", \"signal\": ", us_report_end_name(r->end));
    if (r->end == US_REPORT_END_SIGNAL)
        us_buf_json_string(b, us_report_signal_name(r->end_signal, signame, sizeof signame));
    else
        us_buf_printf(b, "null");
    uint64_t at_real = r->origin_real_ns + (r->now_mono_ns - r->origin_mono_ns);
    us_buf_printf(b, ", \"realtime_ns\": %llu},\n", (unsigned long long)at_real);
}

static void json_part_begin(void *out, enum us_report_part part, size_t count)
{
    struct json_out *j = out;
    (void)count;
    switch (part) {
    case US_REPORT_PART_RULES: us_buf_printf(&j->b, "  \"rules\": ["); break;
    case US_REPORT_PART_FINDINGS: us_buf_printf(&j->b, "  \"findings\": ["); break;
    case US_REPORT_PART_EVENTS:
        us_buf_printf(&j->b, "  \"events_dropped\": %llu,\n  \"events\": [", (unsigned long long)j->r->events_dropped);
        break;
    case US_REPORT_PART_SPANS:
        us_buf_printf(&j->b, "  \"spans_dropped\": %llu,\n  \"spans\": [", (unsigned long long)j->r->spans_dropped);
        break;
    }
}

static void json_rule(void *out, size_t index, const struct us_report_rule_total *t)
{
    struct us_buf *b = &((struct json_out *)out)->b;
    const struct us_rule_info *info = &us_rules[t->rule];
    us_buf_printf(b, "%s\n    {\"rule\": \"%s\", \"severity\": \"%s\", \"count\": %llu, \"bytes\": %llu, "
                     "\"total_ns\": %llu, \"fixed\": %llu, \"forbidden\": %llu, \"fix\": ",
                  index ? "," : "", info->id, us_severity_name(info->severity), (unsigned long long)t->count,
                  (unsigned long long)t->bytes, (unsigned long long)t->total_ns, (unsigned long long)t->fixed,
                  (unsigned long long)t->forbidden);
    us_buf_json_string(b, info->fix);
    us_buf_printf(b, "}");
}

static void json_row(void *out, size_t i, const struct us_report_row *row)
{
    struct us_buf *b = &((struct json_out *)out)->b;
    const struct us_rule_info *info = &us_rules[row->rule];
    us_buf_printf(b, "%s\n    {\"index\": %zu, \"rule\": \"%s\", \"severity\": \"%s\", \"api\": ", i ? "," : "", i,
                  info->id, us_severity_name(info->severity));
    us_buf_json_string(b, row->api != NULL ? row->api : "?");
    us_buf_printf(b, ", \"count\": %llu, \"bytes\": %llu, \"total_ns\": %llu, \"max_ns\": %llu, \"fixed\": %llu, "
                     "\"observed\": %llu, \"forbidden\": %llu, \"first_ns\": %llu, \"last_ns\": %llu, "
                     "\"other\": %s, \"unlocated\": %s, \"streams\": [",
                  (unsigned long long)row->count, (unsigned long long)row->bytes, (unsigned long long)row->total_ns,
                  (unsigned long long)row->max_ns, (unsigned long long)row->fixed,
                  (unsigned long long)row->observed, (unsigned long long)row->forbidden,
                  (unsigned long long)row->first_ns, (unsigned long long)row->last_ns,
                  row->other ? "true" : "false", row->unlocated ? "true" : "false");
    int k = 0;
    for (int s = US_STREAM_USER; s <= US_STREAM_PER_THREAD; s++)
        if (row->stream_kinds & (1u << s))
            us_buf_printf(b, "%s\"%s\"", k++ ? ", " : "", us_report_stream_kind_name((enum us_stream_kind)s));
    us_buf_printf(b, "], \"devices\": [");
    k = 0;
    for (int d = 0; d < 64; d++)
        if (row->devices & (1ull << d))
            us_buf_printf(b, "%s%d", k++ ? ", " : "", d);
    us_buf_printf(b, "],\n     ");
    json_site(b, row);
    us_buf_printf(b, "}");
}

static void json_event(void *out, size_t i, const struct us_report_event *e)
{
    struct us_buf *b = &((struct json_out *)out)->b;
    us_buf_printf(b, "%s\n    {\"finding\": %u, \"rule\": \"%s\", \"start_ns\": %llu, \"held_ns\": %llu, "
                     "\"bytes\": %llu, \"tid\": %d, \"stream\": \"0x%lx\", \"stream_kind\": \"%s\", "
                     "\"src_device\": %d, \"dst_device\": %d, \"context\": \"0x%lx\", \"fixed\": %s}",
                  i ? "," : "", e->row, (unsigned)e->rule < US_RULE_COUNT ? us_rules[e->rule].id : "?",
                  (unsigned long long)e->start_ns, (unsigned long long)e->held_ns, (unsigned long long)e->bytes,
                  e->tid, (unsigned long)e->stream, us_report_stream_kind_name(e->stream_kind), e->src_device,
                  e->dst_device, (unsigned long)e->context, e->fixed ? "true" : "false");
}

static void json_span(void *out, size_t i, const struct us_report_span *s)
{
    struct us_buf *b = &((struct json_out *)out)->b;
    us_buf_printf(b, "%s\n    {\"name\": ", i ? "," : "");
    us_buf_json_string(b, s->name);
    us_buf_printf(b, ", \"device\": %d, \"tid\": %d, \"start_ns\": %llu, \"end_ns\": %llu, \"bytes\": %llu}",
                  s->device, s->tid, (unsigned long long)s->start_ns, (unsigned long long)s->end_ns,
                  (unsigned long long)s->bytes);
}

/* Each part's array closes on a line of its own when it has members. */
static void json_part_end(void *out, enum us_report_part part, size_t count)
{
    struct us_buf *b = &((struct json_out *)out)->b;
    us_buf_printf(b, part == US_REPORT_PART_SPANS ? "%s]\n" : "%s],\n", count ? "\n  " : "");
}

static void json_end(void *out, const struct us_report_rule_total *totals, size_t seen)
{
    (void)totals, (void)seen;
    us_buf_printf(&((struct json_out *)out)->b, "}\n");
}

static const struct us_report_emitter json_emitter = {
    .begin = json_begin,
    .part_begin = json_part_begin,
    .rule = json_rule,
    .row = json_row,
    .event = json_event,
    .span = json_span,
    .part_end = json_part_end,
    .end = json_end,
};

char *us_report_json(const struct us_report *r)
{
    struct json_out j = { .r = r };
    us_report_walk(r, &json_emitter, &j);
    return us_buf_finish(&j.b);
}
