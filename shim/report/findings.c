/* findings.c - what the program did that implicitly synchronizes (see
 * findings.h): aggregation per (rule, call site), the timeline's rings, warn
 * lines, strict mode and its allow-list, and the report at exit.
 *
 * This is the finding path, not the pass-through path: it takes a mutex and
 * may allocate, but only within fixed bounds (SITES_MAX rows, then one
 * "other sites" row per rule; rings of EVENTS_MAX findings and SPANS_MAX
 * spans). Symbolizing (dladdr) happens outside the lock, only for a warn
 * line, a strict-mode message, an allow-list pattern or the report. */
#include "findings.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "callsite.h"
#include "config.h"
#include "log.h"
#include "report.h"
#include "state.h"

#define SITES_MAX 4096   /* distinct (rule, site) rows; then "other sites" */
#define EVENTS_MAX 10000 /* the timeline keeps the latest findings */
#define SPANS_MAX 10000  /* and the latest pipeline spans */
#define ALLOW_MAX 64     /* allow-list entries */

/* --- state --------------------------------------------------------------------------- */

struct row_key {
    uint64_t hash;
    uint32_t rule;
    uint32_t zero; /* no padding with unknown bytes in the key */
};

struct row {
    struct row_key key;
    UT_hash_handle hh;
    struct us_report_row r;
    unsigned allow_gen; /* the allow-list generation 'allowed' is valid for; 0: none */
    bool allowed;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct row *rows;                        /* by key, in creation order */
static uint32_t row_count;
static struct row other_rows[US_RULE_COUNT];    /* past SITES_MAX, per rule */
static struct us_report_event *events;          /* ring, allocated at first use */
static uint64_t event_total;
static bool warned[US_RULE_COUNT];
static uint64_t warn_last_ns[US_RULE_COUNT];
static uint64_t warn_skipped[US_RULE_COUNT];    /* new sites not announced since */

static pthread_mutex_t span_lock = PTHREAD_MUTEX_INITIALIZER;
static struct us_report_span *spans;
static uint64_t span_total;

static atomic_bool reported;

/* One instant on both clocks, taken at load: the timeline's events carry
 * CLOCK_MONOTONIC times, which the tool places on the wall clock with it. */
static uint64_t origin_mono_ns, origin_real_ns;

__attribute__((constructor)) static void take_origin(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    origin_mono_ns = us_now_ns();
    origin_real_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int thread_id(void)
{
    static _Thread_local int tid;
    if (tid == 0)
        tid = (int)syscall(SYS_gettid);
    return tid;
}

bool us_findings_wanted(void) { return us_config()->mode != US_MODE_OFF; }

void us_findings_prepare(void) { us_callsite_prepare(); }

/* The row of (rule, site), made if new; the rule's "other sites" row when
 * the table is full or memory is short. Called with lock held. */
static struct row *row_get(enum us_rule_id rule, uint64_t hash, const struct us_site *site, const char *api,
                           bool *created)
{
    struct row_key key = { .hash = hash, .rule = (uint32_t)rule };
    struct row *row;
    *created = false;
    HASH_FIND(hh, rows, &key, sizeof key, row);
    if (row != NULL)
        return row;
    if (row_count < SITES_MAX && (row = calloc(1, sizeof *row)) != NULL) {
        row->key = key;
        row->r.id = row_count++;
        row->r.site = *site;
        HASH_ADD(hh, rows, key, sizeof key, row);
        *created = true;
    } else {
        row = &other_rows[rule];
        row->r.id = SITES_MAX + (uint32_t)rule;
        row->r.other = true;
        *created = row->r.count == 0 && row->r.forbidden == 0;
    }
    row->r.rule = rule;
    if (row->r.api == NULL)
        row->r.api = api;
    return row;
}

/* --- warn mode ------------------------------------------------------------------------ */

static void warn_line(const struct us_finding *f, const struct us_site *site, uint64_t skipped)
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

/* --- recording ------------------------------------------------------------------------ */

void us_findings_record(const struct us_finding *f, const struct us_site *site)
{
    if (f == NULL || site == NULL || (unsigned)f->rule >= US_RULE_COUNT)
        return;
    const struct us_config *cfg = us_config();
    if (cfg->mode == US_MODE_OFF)
        return;
    uint64_t hash = us_callsite_hash(site);
    int tid = thread_id();
    bool announce = false;
    uint64_t skipped = 0;

    pthread_mutex_lock(&lock);
    bool created;
    struct row *row = row_get(f->rule, hash, site, f->api, &created);
    struct us_report_row *r = &row->r;
    /* a row made by strict mode has no finding yet: this is its first */
    bool first = r->count == 0;
    r->count++;
    r->bytes += f->bytes;
    r->total_ns += f->held_ns;
    if (f->held_ns > r->max_ns)
        r->max_ns = f->held_ns;
    if (f->fixed)
        r->fixed++;
    else
        r->observed++;
    if (first)
        r->first_ns = f->start_ns;
    r->last_ns = f->start_ns;
    r->stream_kinds |= 1u << f->stream_kind;
    if (f->src_device >= 0 && f->src_device < 64)
        r->devices |= 1ull << f->src_device;
    if (f->dst_device >= 0 && f->dst_device < 64)
        r->devices |= 1ull << f->dst_device;

    if (events == NULL)
        events = calloc(EVENTS_MAX, sizeof *events);
    if (events != NULL) {
        events[event_total % EVENTS_MAX] = (struct us_report_event){
            .row = r->id,
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
        };
        event_total++;
    }

    if (first && !r->other && cfg->mode == US_MODE_WARN) {
        uint64_t now = us_now_ns();
        uint64_t interval = (uint64_t)cfg->warn_interval_ms * 1000000u;
        if (!warned[f->rule] || now - warn_last_ns[f->rule] >= interval) {
            warned[f->rule] = true;
            warn_last_ns[f->rule] = now;
            announce = true;
            skipped = warn_skipped[f->rule];
            warn_skipped[f->rule] = 0;
        } else {
            warn_skipped[f->rule]++;
        }
    }
    pthread_mutex_unlock(&lock);
    (void)created;

    if (announce)
        warn_line(f, site, skipped);
}

void us_findings_span(const char *name, int device, uint64_t start_ns, uint64_t end_ns, size_t bytes)
{
    if (us_config()->mode == US_MODE_OFF)
        return;
    int tid = thread_id();
    pthread_mutex_lock(&span_lock);
    if (spans == NULL)
        spans = calloc(SPANS_MAX, sizeof *spans);
    if (spans != NULL) {
        struct us_report_span *s = &spans[span_total % SPANS_MAX];
        snprintf(s->name, sizeof s->name, "%s", name != NULL ? name : "span");
        s->device = device;
        s->tid = tid;
        s->start_ns = start_ns;
        s->end_ns = end_ns;
        s->bytes = bytes;
        span_total++;
    }
    pthread_mutex_unlock(&span_lock);
}

/* --- strict mode and the allow-list ---------------------------------------------------- */

struct allow_entry {
    int rule; /* -1: every rule ("*") */
    char pattern[US_CONFIG_STRING_MAX]; /* "": the whole rule */
};

static pthread_mutex_t allow_lock = PTHREAD_MUTEX_INITIALIZER;
static char allow_text[US_CONFIG_STRING_MAX];
static struct allow_entry allow_list[ALLOW_MAX];
static int allow_count;
static unsigned allow_gen; /* 0: never parsed */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* "rule_id", "rule_id@pattern", "*@pattern" (and "*"), comma separated. An
 * unknown rule id is warned about and skipped. Called with allow_lock held. */
static void allow_parse(const char *text)
{
    char copy[US_CONFIG_STRING_MAX];
    snprintf(copy, sizeof copy, "%s", text);
    allow_count = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        tok = trim(tok);
        if (*tok == '\0')
            continue;
        char *pattern = strchr(tok, '@');
        if (pattern != NULL) {
            *pattern++ = '\0';
            pattern = trim(pattern);
            tok = trim(tok);
        }
        int rule = strcmp(tok, "*") == 0 ? -1 : us_rule_find(tok);
        if (rule < 0 && strcmp(tok, "*") != 0) {
            us_log(US_LOG_WARN, "allow: unknown rule \"%s\" ignored (the rule ids are in docs/rules.md)", tok);
            continue;
        }
        if (allow_count == ALLOW_MAX) {
            us_log(US_LOG_WARN, "allow: more than %d entries; the rest are ignored", ALLOW_MAX);
            break;
        }
        struct allow_entry *e = &allow_list[allow_count++];
        e->rule = rule;
        snprintf(e->pattern, sizeof e->pattern, "%s", pattern != NULL ? pattern : "");
    }
}

/* The allow-list's generation for the configured text, parsed again only
 * when the text changed (tests change it; a process sets it once). */
static unsigned allow_refresh(const struct us_config *cfg)
{
    pthread_mutex_lock(&allow_lock);
    if (allow_gen == 0 || strcmp(allow_text, cfg->allow) != 0) {
        snprintf(allow_text, sizeof allow_text, "%s", cfg->allow);
        allow_parse(allow_text);
        allow_gen++;
    }
    unsigned gen = allow_gen;
    pthread_mutex_unlock(&allow_lock);
    return gen;
}

static bool match(const char *pattern, const char *text) { return fnmatch(pattern, text, 0) == 0; }

/* Whether a pattern names the site: any Python "path:line" (also as
 * "file:line"), or any native "module!function" (also with the raw symbol). */
static bool site_matches(const char *pattern, const struct us_site *site, int depth)
{
    for (int i = 0; i < site->py_depth && i < US_SITE_PY_FRAMES; i++) {
        const char *file = site->py_file[i];
        const char *base = strrchr(file, '/');
        if (match(pattern, file) || (base != NULL && match(pattern, base + 1)))
            return true;
    }
    for (int i = 0; i < site->depth && i < depth; i++) {
        struct us_frame fr;
        char key[512];
        us_callsite_symbolize(site->frames[i], &fr);
        if (match(pattern, us_callsite_frame_key(&fr, key, sizeof key)))
            return true;
        if (fr.symbol[0] != '\0' && strcmp(fr.symbol, fr.function) != 0) {
            snprintf(key, sizeof key, "%s!%s", fr.module, fr.symbol);
            if (match(pattern, key))
                return true;
        }
    }
    return false;
}

static bool allow_match(enum us_rule_id rule, const struct us_site *site, int depth)
{
    struct allow_entry list[ALLOW_MAX];
    pthread_mutex_lock(&allow_lock);
    int count = allow_count;
    memcpy(list, allow_list, (size_t)count * sizeof list[0]);
    pthread_mutex_unlock(&allow_lock);
    for (int i = 0; i < count; i++) {
        if (list[i].rule >= 0 && list[i].rule != (int)rule)
            continue;
        if (list[i].pattern[0] == '\0' || site_matches(list[i].pattern, site, depth))
            return true;
    }
    return false;
}

/* A pattern that names this site, for the message: the innermost Python
 * line, else the innermost native function, else its module. */
static char *suggest_pattern(const struct us_site *site, char *out, size_t size)
{
    if (site->py_depth > 0) {
        const char *base = strrchr(site->py_file[0], '/');
        snprintf(out, size, "*%s", base != NULL ? base : site->py_file[0]);
        return out;
    }
    for (int i = 0; i < site->depth; i++) {
        struct us_frame fr;
        us_callsite_symbolize(site->frames[i], &fr);
        if (fr.function[0] != '\0' || i == site->depth - 1)
            return us_callsite_frame_key(&fr, out, size);
    }
    snprintf(out, size, "*");
    return out;
}

static void strict_message(enum us_rule_id rule, const struct us_site *site, const char *api, bool abort_now)
{
    const struct us_rule_info *info = &us_rules[rule];
    char where[640], pattern[320];
    us_callsite_line(site, 3, where, sizeof where);
    suggest_pattern(site, pattern, sizeof pattern);
    us_log(US_LOG_ERROR, "strict mode: %s (%s severity) in %s at %s", info->id, us_severity_name(info->severity),
           api != NULL ? api : "?", where);
    us_log(US_LOG_ERROR, "  %s: %s", info->what, info->why);
    us_log(US_LOG_ERROR, "  fix: %s", info->fix);
    if (abort_now)
        us_log(US_LOG_ERROR, "  to allow it: UNSTALL_ALLOW=%s (everywhere) or UNSTALL_ALLOW='%s@%s' (this site); "
               "aborting (strict_action=abort)", info->id, info->id, pattern);
    else
        us_log(US_LOG_ERROR, "  to allow it: UNSTALL_ALLOW=%s (everywhere) or UNSTALL_ALLOW='%s@%s' (this site); "
               "the call returns cudaErrorNotPermitted without doing it (once per site)", info->id, info->id, pattern);
}

bool us_findings_forbidden(enum us_rule_id rule, const struct us_site *site, const char *api)
{
    const struct us_config *cfg = us_config();
    if (cfg->mode != US_MODE_STRICT || (unsigned)rule >= US_RULE_COUNT || site == NULL)
        return false;
    if ((int)us_rules[rule].severity < cfg->strict_severity)
        return false;
    unsigned gen = allow_refresh(cfg);
    uint64_t hash = us_callsite_hash(site);

    pthread_mutex_lock(&lock);
    bool created;
    struct row *row = row_get(rule, hash, site, api, &created);
    bool known = !row->r.other && row->allow_gen == gen;
    bool allowed = row->allowed;
    pthread_mutex_unlock(&lock);

    if (!known) {
        allowed = allow_match(rule, site, (int)cfg->callsite_depth);
        if (!row->r.other) {
            pthread_mutex_lock(&lock);
            row->allow_gen = gen;
            row->allowed = allowed;
            pthread_mutex_unlock(&lock);
        }
    }
    if (allowed)
        return false;
    pthread_mutex_lock(&lock);
    bool first = row->r.forbidden++ == 0;
    pthread_mutex_unlock(&lock);
    if (cfg->strict_action == US_STRICT_ABORT) {
        strict_message(rule, site, api, true);
        abort();
    }
    if (first)
        strict_message(rule, site, api, false);
    return true;
}

/* --- the report ------------------------------------------------------------------------- */

static void read_text_file(const char *path, char *out, size_t size, bool nul_to_space)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, size - 1);
    close(fd);
    if (n <= 0)
        return;
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\0'))
        out[--n] = '\0';
    if (nul_to_space)
        for (ssize_t i = 0; i < n; i++)
            if (out[i] == '\0')
                out[i] = ' ';
}

static const char *mode_name(int mode)
{
    static const char *const names[] = { "off", "report", "warn", "strict" };
    return mode >= 0 && mode < 4 ? names[mode] : "?";
}

struct us_report *us_findings_collect(void)
{
    struct us_report *r = calloc(1, sizeof *r);
    uint32_t *index = calloc(SITES_MAX + US_RULE_COUNT, sizeof *index);
    if (r == NULL || index == NULL)
        goto fail;
    r->pid = (long)getpid();
    read_text_file("/proc/self/comm", r->program, sizeof r->program, false);
    if (r->program[0] == '\0')
        snprintf(r->program, sizeof r->program, "%s", program_invocation_short_name);
    read_text_file("/proc/self/cmdline", r->cmdline, sizeof r->cmdline, true);
    const char *rank = us_config_rank();
    snprintf(r->rank, sizeof r->rank, "%s", rank != NULL ? rank : "");
    r->rank_source = us_config_rank_source();
    snprintf(r->host, sizeof r->host, "%s", us_config_host());
    r->mode = mode_name(us_config()->mode);
    r->hooked = us_state_was_hooked();
    r->origin_mono_ns = origin_mono_ns;
    r->origin_real_ns = origin_real_ns;
    r->now_mono_ns = us_now_ns();

    pthread_mutex_lock(&lock);
    size_t n = row_count;
    for (int i = 0; i < US_RULE_COUNT; i++)
        n += other_rows[i].r.count > 0 || other_rows[i].r.forbidden > 0;
    size_t ev = event_total < EVENTS_MAX ? (size_t)event_total : EVENTS_MAX;
    r->rows = calloc(n > 0 ? n : 1, sizeof *r->rows);
    r->events = calloc(ev > 0 ? ev : 1, sizeof *r->events);
    if (r->rows == NULL || r->events == NULL) {
        pthread_mutex_unlock(&lock);
        goto fail;
    }
    struct row *row, *tmp;
    HASH_ITER(hh, rows, row, tmp)
        r->rows[r->row_count++] = row->r;
    for (int i = 0; i < US_RULE_COUNT; i++)
        if (other_rows[i].r.count > 0 || other_rows[i].r.forbidden > 0)
            r->rows[r->row_count++] = other_rows[i].r;
    if (events != NULL)
        for (uint64_t k = event_total - ev; k < event_total; k++)
            r->events[r->event_count++] = events[k % EVENTS_MAX];
    r->events_dropped = event_total - ev;
    pthread_mutex_unlock(&lock);

    pthread_mutex_lock(&span_lock);
    size_t sp = span_total < SPANS_MAX ? (size_t)span_total : SPANS_MAX;
    r->spans = calloc(sp > 0 ? sp : 1, sizeof *r->spans);
    if (r->spans != NULL && spans != NULL)
        for (uint64_t k = span_total - sp; k < span_total; k++)
            r->spans[r->span_count++] = spans[k % SPANS_MAX];
    r->spans_dropped = span_total - sp;
    pthread_mutex_unlock(&span_lock);
    if (r->spans == NULL)
        goto fail;

    us_report_sort(r->rows, r->row_count);
    for (size_t i = 0; i < r->row_count; i++)
        if (r->rows[i].id < SITES_MAX + US_RULE_COUNT)
            index[r->rows[i].id] = (uint32_t)i;
    for (size_t i = 0; i < r->event_count; i++)
        r->events[i].row = r->events[i].row < SITES_MAX + US_RULE_COUNT ? index[r->events[i].row] : 0;
    free(index);
    return r;

fail:
    free(index);
    us_report_free(r);
    return NULL;
}

void us_findings_report(void)
{
    const struct us_config *cfg = us_config();
    if (cfg->mode == US_MODE_OFF || atomic_exchange(&reported, true))
        return;
    struct us_report *r = us_findings_collect();
    if (r == NULL) {
        us_log(US_LOG_WARN, "report: out of memory; no report");
        return;
    }
    if (cfg->report[0] != '\0') {
        char path[sizeof r->json_path], not_written[512];
        char *json = NULL;
        const char *why = NULL;
        enum us_report_save_result saved = US_REPORT_FAILED;
        if (!us_expand_path(cfg->report, us_config_rank(), us_config_host(), path, sizeof path))
            why = "the expanded path is too long";
        else if ((json = us_report_json(r)) == NULL)
            why = "out of memory";
        else if ((saved = us_report_save(path, json, us_report_content_of(r), r->origin_real_ns, not_written,
                                         sizeof not_written)) == US_REPORT_FAILED)
            why = strerror(errno);
        if (saved == US_REPORT_SAVED)
            snprintf(r->json_path, sizeof r->json_path, "%s", path);
        else if (why == NULL)
            us_log(US_LOG_WARN, "report: not written to \"%s\": %s", path, not_written);
        else
            us_log(US_LOG_WARN, "report: cannot write \"%s\" (%s)", cfg->report, why);
        free(json);
    }
    char *text = us_report_text(r, cfg->report_top);
    if (text != NULL)
        us_log_raw(text);
    else
        us_log(US_LOG_WARN, "report: out of memory; no report");
    free(text);
    us_report_free(r);
}

void us_findings_reset(void)
{
    pthread_mutex_lock(&lock);
    struct row *row, *tmp;
    HASH_ITER(hh, rows, row, tmp) {
        HASH_DEL(rows, row);
        free(row);
    }
    row_count = 0;
    memset(other_rows, 0, sizeof other_rows);
    free(events);
    events = NULL;
    event_total = 0;
    memset(warned, 0, sizeof warned);
    memset(warn_last_ns, 0, sizeof warn_last_ns);
    memset(warn_skipped, 0, sizeof warn_skipped);
    pthread_mutex_unlock(&lock);
    pthread_mutex_lock(&span_lock);
    free(spans);
    spans = NULL;
    span_total = 0;
    pthread_mutex_unlock(&span_lock);
    atomic_store(&reported, false);
}
