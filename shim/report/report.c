/* report.c - the report at exit as text and JSON (see report.h). */
#include "report.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "callsite.h"

/* --- a growing buffer ----------------------------------------------------------------- */

struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static bool buf_reserve(struct buf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the well-formed UTF-8 sequence at c (1-4), or 0 if it is not
 * one: a stray continuation byte, a sequence cut short, an overlong form, a
 * surrogate or a code point past U+10FFFF (RFC 3629). */
static int utf8_sequence_length(const unsigned char *c)
{
    if (c[0] < 0x80)
        return 1;
    int len;
    unsigned min, cp;
    if ((c[0] & 0xe0) == 0xc0) {
        len = 2, min = 0x80, cp = c[0] & 0x1f;
    } else if ((c[0] & 0xf0) == 0xe0) {
        len = 3, min = 0x800, cp = c[0] & 0x0f;
    } else if ((c[0] & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, cp = c[0] & 0x07;
    } else {
        return 0;
    }
    for (int i = 1; i < len; i++) {
        if ((c[i] & 0xc0) != 0x80) /* the terminating NUL included */
            return 0;
        cp = cp << 6 | (c[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* A JSON string of s. The report must be valid UTF-8 whatever the program
 * path or arguments hold: a byte that is not part of a well-formed UTF-8
 * sequence is written as \ufffd (U+FFFD, the replacement character). */
static void buf_json_string(struct buf *b, const char *s)
{
    buf_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        switch (*c) {
        case '"': buf_printf(b, "\\\""); break;
        case '\\': buf_printf(b, "\\\\"); break;
        case '\n': buf_printf(b, "\\n"); break;
        case '\t': buf_printf(b, "\\t"); break;
        case '\r': buf_printf(b, "\\r"); break;
        default:
            if (*c < 0x20) {
                buf_printf(b, "\\u%04x", *c);
            } else if (*c < 0x80) {
                buf_printf(b, "%c", *c);
            } else {
                int len = utf8_sequence_length(c);
                if (len == 0) {
                    buf_printf(b, "\\ufffd");
                } else {
                    buf_printf(b, "%.*s", len, (const char *)c);
                    c += len - 1;
                }
            }
        }
    }
    buf_printf(b, "\"");
}

static char *buf_finish(struct buf *b)
{
    if (b->oom || !buf_reserve(b, 0)) {
        free(b->p);
        return NULL;
    }
    b->p[b->len] = '\0';
    return b->p;
}

/* --- small helpers ---------------------------------------------------------------------- */

char *us_report_bytes(uint64_t bytes, char *out, size_t size)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
    if (bytes < 1024) {
        snprintf(out, size, "%llu B", (unsigned long long)bytes);
        return out;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, size, "%.1f %s", v, units[u]);
    return out;
}

char *us_report_time(uint64_t ns, char *out, size_t size)
{
    if (ns < 1000)
        snprintf(out, size, "%llu ns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(out, size, "%.1f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(out, size, "%.1f ms", (double)ns / 1e6);
    else
        snprintf(out, size, "%.2f s", (double)ns / 1e9);
    return out;
}

const char *us_report_stream_kind_name(enum us_stream_kind kind)
{
    switch (kind) {
    case US_STREAM_LEGACY: return "legacy";
    case US_STREAM_PER_THREAD: return "per-thread";
    default: return "user";
    }
}

static int compare_rows(const void *a, const void *b)
{
    const struct us_report_row *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->forbidden != y->forbidden)
        return x->forbidden > y->forbidden ? -1 : 1;
    if (x->rule != y->rule)
        return x->rule < y->rule ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void us_report_sort(struct us_report_row *rows, size_t count)
{
    if (count > 1)
        qsort(rows, count, sizeof *rows, compare_rows);
}

void us_report_free(struct us_report *r)
{
    if (r == NULL)
        return;
    free(r->rows);
    free(r->events);
    free(r->spans);
    free(r);
}

/* Per-rule totals, for the header and the JSON. */
struct rule_total {
    uint64_t count, bytes, total_ns, fixed, forbidden;
    int rule;
};

static int compare_totals(const void *a, const void *b)
{
    const struct rule_total *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->rule - y->rule;
}

/* Rules seen (count or forbidden), most time first; returns how many. */
static int rule_totals(const struct us_report *r, struct rule_total t[US_RULE_COUNT])
{
    memset(t, 0, sizeof(struct rule_total) * US_RULE_COUNT);
    for (int i = 0; i < US_RULE_COUNT; i++)
        t[i].rule = i;
    for (size_t i = 0; i < r->row_count; i++) {
        const struct us_report_row *row = &r->rows[i];
        if ((unsigned)row->rule >= US_RULE_COUNT)
            continue;
        struct rule_total *x = &t[row->rule];
        x->count += row->count;
        x->bytes += row->bytes;
        x->total_ns += row->total_ns;
        x->fixed += row->fixed;
        x->forbidden += row->forbidden;
    }
    qsort(t, US_RULE_COUNT, sizeof t[0], compare_totals);
    int n = 0;
    while (n < US_RULE_COUNT && (t[n].count > 0 || t[n].forbidden > 0))
        n++;
    return n; /* sorted by time: rules only forbidden (time 0) come last */
}

const char us_report_driver_layer_reach[] =
    "the driver layer saw the copies the program made through libcuda (functions taken with dlsym, "
    "cuGetProcAddress or cudaGetDriverEntryPoint, or called directly by a program linked with -lcuda); out of "
    "its reach: functions a program takes with dlvsym, and a libcuda loaded in another linker namespace (dlmopen)";

/* --- text ------------------------------------------------------------------------------- */

/* "SIGTERM", or the number where the C library has no name for it. */
static const char *sigabbrev_or_number(int sig, char *out, size_t size)
{
    const char *name = sigabbrev_np(sig);
    if (name != NULL)
        snprintf(out, size, "SIG%s", name);
    else
        snprintf(out, size, "signal %d", sig);
    return out;
}

const char *us_report_end_name(enum us_report_end_how how)
{
    switch (how) {
    case US_REPORT_END_SIGNAL: return "signal";
    case US_REPORT_END_SNAPSHOT: return "snapshot";
    case US_REPORT_END_EXIT: break;
    }
    return "exit";
}

char *us_report_text(const struct us_report *r, unsigned top)
{
    struct buf b = { 0 };
    char pre[40], held[32], amount[32], max[32];
    snprintf(pre, sizeof pre, "unstall[%ld]: ", r->pid);
    const char *who = r->cmdline[0] != '\0' ? r->cmdline : r->program;
    char rank[128] = "";
    if (r->rank[0] != '\0')
        snprintf(rank, sizeof rank, ", rank %s", r->rank);
    if (r->host[0] != '\0')
        snprintf(rank + strlen(rank), sizeof rank - strlen(rank), ", host %s", r->host);
    uint64_t ran = r->now_mono_ns > r->origin_mono_ns ? r->now_mono_ns - r->origin_mono_ns : 0;
    char end[64] = "";
    if (r->end == US_REPORT_END_SIGNAL)
        snprintf(end, sizeof end, ", ended by %s", sigabbrev_or_number(r->end_signal, amount, sizeof amount));
    else if (r->end == US_REPORT_END_SNAPSHOT)
        snprintf(end, sizeof end, ", still running (snapshot)");
    buf_printf(&b, "%s---- unstall report: %s (pid %ld%s), mode %s, ran %s%s ----\n", pre, who, r->pid, rank,
               r->mode != NULL ? r->mode : "?", us_report_time(ran, held, sizeof held), end);

    if (r->driver_layer)
        buf_printf(&b, "%s%s\n", pre, us_report_driver_layer_reach);
    if (r->legacy_moved > 0)
        buf_printf(&b, "%slegacy_stream=%s moved %llu calls off the legacy default stream (docs/findings.md, case E)\n",
                   pre, r->legacy_stream != NULL ? r->legacy_stream : "?", r->legacy_moved);
    if (!r->hooked) {
        switch (r->cuda.use) {
        case US_CUDA_USE_RUNTIME_IDLE:
            /* torchrun's own process after `import torch`: nothing to fix */
            buf_printf(&b, "%sunstall saw no CUDA runtime call: the process loaded the CUDA runtime (%s) but called "
                           "none of it (a launcher such as torchrun, or a process that did not use the GPU); "
                           "nothing to report\n", pre, r->cuda.runtime);
            break;
        case US_CUDA_USE_DRIVER_ONLY:
            buf_printf(&b, "%sunstall saw no CUDA runtime call, but the process used the CUDA driver without "
                           "libcudart: the program links the CUDA runtime statically (nvcc's default) or calls the "
                           "driver API, which a runtime-layer preload cannot see; build with -cudart shared\n", pre);
            break;
        case US_CUDA_USE_DRIVER_LOADED:
            buf_printf(&b, "%sunstall saw no CUDA runtime call; libcuda.so.1 is loaded but no libcudart: if the "
                           "program used CUDA, it links the CUDA runtime statically (nvcc's default) or calls the "
                           "driver API, which a runtime-layer preload cannot see; build with -cudart shared\n", pre);
            break;
        default:
            buf_printf(&b, "%sunstall saw no CUDA runtime call: if the program links the CUDA runtime statically "
                           "(nvcc's default), a runtime-layer preload cannot see it; build with -cudart shared\n", pre);
        }
    } else if (r->row_count == 0) {
        buf_printf(&b, "%sno implicit synchronization seen\n", pre);
    } else {
        struct rule_total t[US_RULE_COUNT];
        int seen = rule_totals(r, t);
        buf_printf(&b, "%stime the calls held the caller, by rule:\n", pre);
        for (int i = 0; i < seen; i++) {
            const struct us_rule_info *info = &us_rules[t[i].rule];
            buf_printf(&b, "%s  %-18s %-6s %10s in %llu call%s", pre, info->id, us_severity_name(info->severity),
                       us_report_time(t[i].total_ns, held, sizeof held), (unsigned long long)t[i].count,
                       t[i].count == 1 ? "" : "s");
            if (t[i].bytes > 0)
                buf_printf(&b, ", %s", us_report_bytes(t[i].bytes, amount, sizeof amount));
            if (t[i].fixed > 0)
                buf_printf(&b, ", %llu fixed", (unsigned long long)t[i].fixed);
            if (t[i].forbidden > 0)
                buf_printf(&b, ", %llu forbidden", (unsigned long long)t[i].forbidden);
            buf_printf(&b, "\n");
        }
        buf_printf(&b, "%s\n", pre);
        buf_printf(&b, "%s%4s  %-18s %-6s %8s %10s %10s %10s %11s  %s\n", pre, "#", "rule", "sev", "count", "bytes",
                   "total", "max", "fixed/obs", "api");
        size_t shown = r->row_count < top ? r->row_count : top;
        for (size_t i = 0; i < shown; i++) {
            const struct us_report_row *row = &r->rows[i];
            const struct us_rule_info *info = &us_rules[row->rule];
            char fixed[48], where[2048];
            snprintf(fixed, sizeof fixed, "%llu/%llu", (unsigned long long)row->fixed,
                     (unsigned long long)row->observed);
            buf_printf(&b, "%s%4zu  %-18s %-6s %8llu %10s %10s %10s %11s  %s", pre, i + 1, info->id,
                       us_severity_name(info->severity), (unsigned long long)row->count,
                       row->bytes > 0 ? us_report_bytes(row->bytes, amount, sizeof amount) : "-",
                       row->count > 0 ? us_report_time(row->total_ns, held, sizeof held) : "-",
                       row->count > 0 ? us_report_time(row->max_ns, max, sizeof max) : "-",
                       fixed, row->api != NULL ? row->api : "?");
            if (row->forbidden > 0)
                buf_printf(&b, ", %llu forbidden", (unsigned long long)row->forbidden);
            buf_printf(&b, "\n");
            if (row->other)
                snprintf(where, sizeof where, "(other sites: the table of call sites is full)");
            else if (row->unlocated)
                snprintf(where, sizeof where, "(short waits: counted, not located by call site; option sync_site_min_us)");
            else
                us_callsite_line_source(&row->site, 3, where, sizeof where);
            buf_printf(&b, "%s        at %s\n", pre, where);
        }
        if (shown < r->row_count)
            buf_printf(&b, "%s  ... %zu more row%s (option report_top; all of them in the JSON report, option report)\n",
                       pre, r->row_count - shown, r->row_count - shown == 1 ? "" : "s");
        buf_printf(&b, "%s\n%show to fix them:\n", pre, pre);
        for (int i = 0; i < seen; i++)
            buf_printf(&b, "%s  %-18s %s\n", pre, us_rules[t[i].rule].id, us_rules[t[i].rule].fix);
        if (r->events_dropped > 0)
            buf_printf(&b, "%sthe timeline keeps the last %zu findings (%llu older ones dropped)\n", pre,
                       r->event_count, (unsigned long long)r->events_dropped);
    }
    if (r->json_path[0] != '\0')
        buf_printf(&b, "%sJSON report: %s (tools/unstall-report renders and merges it)\n", pre, r->json_path);
    buf_printf(&b, "%s---- end of unstall report ----\n", pre);
    return buf_finish(&b);
}

/* --- JSON -------------------------------------------------------------------------------- */

static void json_site(struct buf *b, const struct us_report_row *row)
{
    const struct us_site *site = &row->site;
    buf_printf(b, "\"site\": {\"python\": [");
    for (int i = 0; !row->other && !row->unlocated && i < site->py_depth && i < US_SITE_PY_FRAMES; i++) {
        char file[US_SITE_PY_FILE];
        snprintf(file, sizeof file, "%s", site->py_file[i]);
        char *colon = strrchr(file, ':');
        long line = 0;
        if (colon != NULL) {
            line = strtol(colon + 1, NULL, 10);
            *colon = '\0';
        }
        buf_printf(b, "%s{\"file\": ", i ? ", " : "");
        buf_json_string(b, file);
        buf_printf(b, ", \"line\": %ld, \"function\": ", line);
        buf_json_string(b, site->py_func[i]);
        buf_printf(b, "}");
    }
    buf_printf(b, "], \"native\": [");
    for (int i = 0; !row->other && !row->unlocated && i < site->depth; i++) {
        struct us_frame fr;
        char text[512];
        us_callsite_symbolize_source(site->frames[i], &fr);
        buf_printf(b, "%s", i ? ", " : "");
        buf_json_string(b, us_callsite_frame_text(&fr, text, sizeof text));
    }
    buf_printf(b, "], \"native_at\": [");
    for (int i = 0; !row->other && !row->unlocated && i < site->depth; i++) {
        struct us_frame fr;
        char text[512];
        us_callsite_symbolize(site->frames[i], &fr);
        if (fr.path[0] != '\0')
            snprintf(text, sizeof text, "%s+0x%lx", fr.path, (unsigned long)fr.module_offset);
        else
            snprintf(text, sizeof text, "0x%lx", (unsigned long)fr.offset);
        buf_printf(b, "%s", i ? ", " : "");
        buf_json_string(b, text);
    }
    /* the source of each native frame where its object has debug information */
    buf_printf(b, "], \"native_src\": [");
    for (int i = 0; !row->other && !row->unlocated && i < site->depth; i++) {
        struct us_frame fr;
        us_callsite_symbolize_source(site->frames[i], &fr);
        buf_printf(b, "%s", i ? ", " : "");
        if (fr.line > 0) {
            buf_printf(b, "{\"file\": ");
            buf_json_string(b, fr.file);
            buf_printf(b, ", \"line\": %u}", fr.line);
        } else {
            buf_printf(b, "null");
        }
    }
    buf_printf(b, "]}");
}

char *us_report_json(const struct us_report *r)
{
    struct buf b = { 0 };
    char started[64] = "";
    time_t secs = (time_t)(r->origin_real_ns / 1000000000u);
    struct tm tm;
    if (gmtime_r(&secs, &tm) != NULL)
        strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    buf_printf(&b, "{\n  \"version\": %d,\n  \"tool\": \"unstall\",\n  \"unstall_version\": \"%s\",\n  \"pid\": %ld,\n"
                   "  \"rank\": ",
               US_REPORT_VERSION, US_VERSION_STRING, r->pid);
    if (r->rank[0] != '\0')
        buf_printf(&b, "%ld", strtol(r->rank, NULL, 10));
    else
        buf_printf(&b, "null");
    buf_printf(&b, ",\n  \"rank_from\": ");
    if (r->rank[0] != '\0' && r->rank_source != NULL)
        buf_json_string(&b, r->rank_source);
    else
        buf_printf(&b, "null");
    buf_printf(&b, ",\n  \"host\": ");
    buf_json_string(&b, r->host);
    buf_printf(&b, ",\n  \"program\": ");
    buf_json_string(&b, r->program);
    buf_printf(&b, ",\n  \"cmdline\": ");
    buf_json_string(&b, r->cmdline);
    buf_printf(&b, ",\n  \"mode\": ");
    buf_json_string(&b, r->mode != NULL ? r->mode : "?");
    buf_printf(&b, ",\n  \"hooked\": %s,\n  \"cuda\": \"%s\",\n  \"started\": \"%s\",\n", r->hooked ? "true" : "false",
               us_cuda_use_name(r->hooked ? US_CUDA_USE_RUNTIME : r->cuda.use), started);
    buf_printf(&b, "  \"driver_layer\": ");
    if (r->driver_layer)
        buf_json_string(&b, us_report_driver_layer_reach);
    else
        buf_printf(&b, "null");
    buf_printf(&b, ",\n  \"legacy_stream\": ");
    buf_json_string(&b, r->legacy_stream != NULL ? r->legacy_stream : "keep");
    buf_printf(&b, ",\n  \"legacy_moved\": %llu,\n", r->legacy_moved);
    buf_printf(&b, "  \"clock\": {\"monotonic_ns\": %llu, \"realtime_ns\": %llu},\n",
               (unsigned long long)r->origin_mono_ns, (unsigned long long)r->origin_real_ns);
    buf_printf(&b, "  \"ended_ns\": %llu,\n", (unsigned long long)r->now_mono_ns);
    char signame[32];
    buf_printf(&b, "  \"end\": {\"how\": \"%s\", \"signal\": ", us_report_end_name(r->end));
    if (r->end == US_REPORT_END_SIGNAL)
        buf_json_string(&b, sigabbrev_or_number(r->end_signal, signame, sizeof signame));
    else
        buf_printf(&b, "null");
    uint64_t at_real = r->origin_real_ns + (r->now_mono_ns - r->origin_mono_ns);
    buf_printf(&b, ", \"realtime_ns\": %llu},\n", (unsigned long long)at_real);

    struct rule_total t[US_RULE_COUNT];
    int seen = rule_totals(r, t);
    buf_printf(&b, "  \"rules\": [");
    for (int i = 0; i < seen; i++) {
        const struct us_rule_info *info = &us_rules[t[i].rule];
        buf_printf(&b, "%s\n    {\"rule\": \"%s\", \"severity\": \"%s\", \"count\": %llu, \"bytes\": %llu, "
                       "\"total_ns\": %llu, \"fixed\": %llu, \"forbidden\": %llu, \"fix\": ",
                   i ? "," : "", info->id, us_severity_name(info->severity), (unsigned long long)t[i].count,
                   (unsigned long long)t[i].bytes, (unsigned long long)t[i].total_ns, (unsigned long long)t[i].fixed,
                   (unsigned long long)t[i].forbidden);
        buf_json_string(&b, info->fix);
        buf_printf(&b, "}");
    }
    buf_printf(&b, "%s],\n  \"findings\": [", seen ? "\n  " : "");
    for (size_t i = 0; i < r->row_count; i++) {
        const struct us_report_row *row = &r->rows[i];
        const struct us_rule_info *info = &us_rules[row->rule];
        buf_printf(&b, "%s\n    {\"index\": %zu, \"rule\": \"%s\", \"severity\": \"%s\", \"api\": ", i ? "," : "", i,
                   info->id, us_severity_name(info->severity));
        buf_json_string(&b, row->api != NULL ? row->api : "?");
        buf_printf(&b, ", \"count\": %llu, \"bytes\": %llu, \"total_ns\": %llu, \"max_ns\": %llu, \"fixed\": %llu, "
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
                buf_printf(&b, "%s\"%s\"", k++ ? ", " : "", us_report_stream_kind_name((enum us_stream_kind)s));
        buf_printf(&b, "], \"devices\": [");
        k = 0;
        for (int d = 0; d < 64; d++)
            if (row->devices & (1ull << d))
                buf_printf(&b, "%s%d", k++ ? ", " : "", d);
        buf_printf(&b, "],\n     ");
        json_site(&b, row);
        buf_printf(&b, "}");
    }
    buf_printf(&b, "%s],\n  \"events_dropped\": %llu,\n  \"events\": [", r->row_count ? "\n  " : "",
               (unsigned long long)r->events_dropped);
    for (size_t i = 0; i < r->event_count; i++) {
        const struct us_report_event *e = &r->events[i];
        buf_printf(&b, "%s\n    {\"finding\": %u, \"rule\": \"%s\", \"start_ns\": %llu, \"held_ns\": %llu, "
                       "\"bytes\": %llu, \"tid\": %d, \"stream\": \"0x%lx\", \"stream_kind\": \"%s\", "
                       "\"src_device\": %d, \"dst_device\": %d, \"context\": \"0x%lx\", \"fixed\": %s}",
                   i ? "," : "", e->row, (unsigned)e->rule < US_RULE_COUNT ? us_rules[e->rule].id : "?",
                   (unsigned long long)e->start_ns, (unsigned long long)e->held_ns, (unsigned long long)e->bytes,
                   e->tid, (unsigned long)e->stream, us_report_stream_kind_name(e->stream_kind), e->src_device,
                   e->dst_device, (unsigned long)e->context, e->fixed ? "true" : "false");
    }
    buf_printf(&b, "%s],\n  \"spans_dropped\": %llu,\n  \"spans\": [", r->event_count ? "\n  " : "",
               (unsigned long long)r->spans_dropped);
    for (size_t i = 0; i < r->span_count; i++) {
        const struct us_report_span *s = &r->spans[i];
        buf_printf(&b, "%s\n    {\"name\": ", i ? "," : "");
        buf_json_string(&b, s->name);
        buf_printf(&b, ", \"device\": %d, \"tid\": %d, \"start_ns\": %llu, \"end_ns\": %llu, \"bytes\": %llu}",
                   s->device, s->tid, (unsigned long long)s->start_ns, (unsigned long long)s->end_ns,
                   (unsigned long long)s->bytes);
    }
    buf_printf(&b, "%s]\n}\n", r->span_count ? "\n  " : "");
    return buf_finish(&b);
}

/* --- the file -------------------------------------------------------------------------- */

enum us_report_content us_report_content_of(const struct us_report *r)
{
    if (r->row_count > 0)
        return US_REPORT_HAS_FINDINGS;
    return r->hooked ? US_REPORT_NO_FINDINGS : US_REPORT_SAW_NOTHING;
}

static const char *file_kind(mode_t mode)
{
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* What the unstall report at path holds, and its pid. Opened without
 * following a link and without blocking, then checked to be a regular file
 * (it could have changed since the caller looked). A file that is not an
 * unstall report holds nothing worth keeping. */
static enum us_report_content existing_content(const char *path, long *pid)
{
    static const size_t head_max = 64 * 1024; /* the findings key comes after a few KiB */
    *pid = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return US_REPORT_SAW_NOTHING;
    struct stat st;
    char *head = NULL;
    size_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (head = malloc(head_max + 1)) != NULL) {
        ssize_t n;
        while (got < head_max && ((n = read(fd, head + got, head_max - got)) > 0 || (n < 0 && errno == EINTR)))
            got += n > 0 ? (size_t)n : 0;
        head[got] = '\0';
    }
    close(fd);
    enum us_report_content content = US_REPORT_SAW_NOTHING;
    /* the keys as us_report_json writes them; inside a JSON string a quote
     * is escaped, so these cannot match a string's contents */
    if (head != NULL && strstr(head, "\n  \"tool\": \"unstall\",\n") != NULL) {
        const char *p = strstr(head, "\n  \"pid\": ");
        if (p != NULL)
            *pid = strtol(p + 10, NULL, 10);
        const char *findings = strstr(head, "\n  \"findings\": [");
        if (findings != NULL && findings[16] != ']')
            content = US_REPORT_HAS_FINDINGS;
        else if (strstr(head, "\n  \"hooked\": true,") != NULL)
            content = US_REPORT_NO_FINDINGS;
    }
    free(head);
    return content;
}

/* The text into a new file beside path; its name into tmp. */
static bool write_temporary(const char *path, const char *text, char *tmp, size_t tmp_size)
{
    int n = snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= tmp_size) {
        errno = ENAMETOOLONG;
        return false;
    }
    /* O_EXCL: never through a link or into a file someone left there */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) /* a stale one of a reused pid */
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return false;
    size_t len = strlen(text);
    const char *p = text;
    int saved;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto close_tmp;
        p += w;
        len -= (size_t)w;
    }
    if (close(fd) != 0)
        goto remove_tmp;
    return true;

close_tmp:
    if (errno == 0)
        errno = EIO;
    saved = errno;
    close(fd);
    errno = saved;
remove_tmp:
    saved = errno;
    unlink(tmp);
    errno = saved;
    return false;
}

/* tmp to path where nothing is at path: fails with EEXIST if something came. */
static int rename_no_replace(const char *tmp, const char *path)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    /* a file system without RENAME_NOREPLACE: link(2) does not replace either */
    if (link(tmp, path) == 0) {
        unlink(tmp);
        return 0;
    }
    if (errno != EPERM && errno != ENOTSUP)
        return -1;
    return rename(tmp, path); /* no hard links (vfat): the last resort */
}

enum us_report_save_result us_report_save(const char *path, const char *text, enum us_report_content content,
                                          uint64_t started_real_ns, char *why, size_t why_size)
{
    char tmp[4200];
    why[0] = '\0';
    for (int attempt = 0; attempt < 2; attempt++) {
        struct stat st;
        bool exists = lstat(path, &st) == 0;
        if (!exists && errno != ENOENT)
            return US_REPORT_FAILED;
        if (exists && !S_ISREG(st.st_mode)) {
            snprintf(why, why_size, "it is %s; unstall writes its report only to a regular file or a new one",
                     file_kind(st.st_mode));
            return US_REPORT_NOT_REGULAR;
        }
        uint64_t modified_ns = exists ? (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec : 0;
        if (exists && content < US_REPORT_HAS_FINDINGS && modified_ns >= started_real_ns) {
            /* written while this process ran: another process of the same
             * job under the same name (a launcher and its rank 0) */
            long pid;
            enum us_report_content there = existing_content(path, &pid);
            if (there > content) {
                snprintf(why, why_size, "it holds the report of pid %ld, written while this process ran, with %s; "
                         "this process saw %s", pid, there == US_REPORT_HAS_FINDINGS ? "findings" : "CUDA calls",
                         content == US_REPORT_SAW_NOTHING ? "no CUDA call" : "no finding");
                return US_REPORT_KEPT_OTHER;
            }
        }
        if (!write_temporary(path, text, tmp, sizeof tmp))
            return US_REPORT_FAILED;
        /* a regular file is replaced in one step (rename does not follow a
         * link at path; a FIFO put there since lstat would be replaced, a race
         * only someone who can write the directory can run); where there was
         * nothing, nothing that appears meanwhile is replaced */
        if ((exists ? rename(tmp, path) : rename_no_replace(tmp, path)) == 0)
            return US_REPORT_SAVED;
        int saved = errno;
        unlink(tmp);
        errno = saved;
        if (exists || errno != EEXIST)
            return US_REPORT_FAILED;
        /* something appeared at path: look again */
    }
    errno = EEXIST;
    return US_REPORT_FAILED;
}
