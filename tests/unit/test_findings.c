/* test_findings.c - findings: aggregation per (rule, site), sorting, the site
 * cap, the timeline rings, warn lines and their rate limit, strict mode (the
 * severity threshold, the allow-list, error once per site, abort), the report
 * at exit (text, JSON, no CUDA seen, mode off). What one finding costs:
 * make bench-costs (tools/bench/costs.c). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "summary.h"

#include "callsite.h"
#include "config.h"
#include "findings.h"
#include "findings_local.h"
#include "findings_rows.h"
#include "watch.h"
#include "log.h"
#include "report.h"
#include "state.h"

#define SITES_MAX 4096   /* as findings_rows.h and docs/findings.md say */
#define EVENTS_MAX 10000

/* --- captured log ---------------------------------------------------------------------- */

#define MAX_LINES 256
static char lines[MAX_LINES][1100];
static int line_count;
static char *raw; /* everything, lines and raw text, newline-joined */
static size_t raw_len;

static void capture(enum us_log_level level, const char *line, void *arg)
{
    (void)level;
    (void)arg;
    if (line_count < MAX_LINES)
        snprintf(lines[line_count], sizeof lines[0], "%s", line);
    line_count++;
    size_t n = strlen(line);
    char *p = realloc(raw, raw_len + n + 2);
    assert_non_null(p);
    raw = p;
    memcpy(raw + raw_len, line, n);
    raw_len += n;
    raw[raw_len++] = '\n';
    raw[raw_len] = '\0';
}

static int lines_containing(const char *needle)
{
    int n = 0;
    for (int i = 0; i < line_count && i < MAX_LINES; i++)
        n += strstr(lines[i], needle) != NULL;
    return n;
}

static const char *captured(void) { return raw != NULL ? raw : ""; }

static struct us_config defaults;
static struct us_config cfg;

static void use_config(void) { us_config_set(&cfg); }

static int setup(void **state)
{
    (void)state;
    us_config_load(&defaults, NULL, NULL, NULL, NULL);
    cfg = defaults;
    cfg.mode = US_MODE_REPORT;
    use_config();
    line_count = 0;
    free(raw);
    raw = NULL;
    raw_len = 0;
    us_log_set_sink(capture, NULL);
    us_findings_reset();
    us_callsite_set_self_range(0, 0);
    us_state_hooked = 1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    us_config_set(&defaults);
    us_log_set_sink(NULL, NULL);
    us_findings_reset();
    return 0;
}

/* --- sites and findings by hand -------------------------------------------------------- */

static struct us_site site_at(uintptr_t base)
{
    struct us_site s = { .depth = 3 };
    for (int i = 0; i < 3; i++)
        s.frames[i] = (void *)(base + 0x10 * (uintptr_t)i);
    return s;
}

static struct us_finding finding(enum us_rule_id rule, size_t bytes, uint64_t held_ns, bool fixed)
{
    struct us_finding f = {
        .rule = rule,
        .api = "cudaMemcpyAsync",
        .bytes = bytes,
        .path = US_PATH_UNKNOWN,
        .src_device = -1,
        .dst_device = 0,
        .stream = NULL,
        .stream_kind = US_STREAM_USER,
        .start_ns = 1000,
        .held_ns = held_ns,
        .fixed = fixed,
    };
    return f;
}

static void record(enum us_rule_id rule, const struct us_site *site, size_t bytes, uint64_t held_ns, bool fixed)
{
    struct us_finding f = finding(rule, bytes, held_ns, fixed);
    us_findings_record(&f, site);
}

static const struct us_report_row *find_row(const struct us_report *r, enum us_rule_id rule, const struct us_site *s)
{
    for (size_t i = 0; i < r->row_count; i++)
        if (r->rows[i].rule == rule && !r->rows[i].other &&
            us_callsite_hash(&r->rows[i].site) == us_callsite_hash(s))
            return &r->rows[i];
    return NULL;
}

/* --- mode off ---------------------------------------------------------------------------- */

static void test_findings_mode_off_records_nothing(void **state)
{
    (void)state;
    cfg.mode = US_MODE_OFF;
    use_config();
    assert_false(us_findings_wanted());
    struct us_site a = site_at(0x1000);
    record(US_RULE_pageable_h2d, &a, 100, 10, false);
    us_findings_span("h2d", 0, 1, 2, 3);
    assert_false(us_findings_forbidden(US_RULE_pageable_d2h, &a, "cudaMemcpy"));
    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    assert_int_equal(r->row_count, 0);
    assert_int_equal(r->event_count, 0);
    assert_int_equal(r->span_count, 0);
    us_report_free(r);
    us_findings_report();
    assert_int_equal(line_count, 0); /* no report in mode off */

    cfg.mode = US_MODE_REPORT;
    use_config();
    assert_true(us_findings_wanted());
}

/* --- aggregation ---------------------------------------------------------------------------- */

static void test_findings_aggregate_per_rule_and_site(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000), b = site_at(0x2000);
    struct us_finding f = finding(US_RULE_pageable_h2d, 100, 10, false);
    f.start_ns = 5000;
    us_findings_record(&f, &a);
    f.held_ns = 30;
    f.fixed = true;
    f.start_ns = 6000;
    f.stream_kind = US_STREAM_LEGACY;
    f.src_device = 1;
    us_findings_record(&f, &a);
    f.held_ns = 20;
    f.fixed = false;
    f.start_ns = 7000;
    us_findings_record(&f, &a);
    record(US_RULE_pageable_h2d, &b, 7, 5, false);  /* another site */
    record(US_RULE_pageable_d2h, &a, 9, 1, false);  /* another rule, same site */

    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    assert_int_equal(r->row_count, 3);
    const struct us_report_row *row = find_row(r, US_RULE_pageable_h2d, &a);
    assert_non_null(row);
    assert_int_equal(row->count, 3);
    assert_int_equal(row->bytes, 300);
    assert_int_equal(row->total_ns, 60);
    assert_int_equal(row->max_ns, 30);
    assert_int_equal(row->fixed, 1);
    assert_int_equal(row->observed, 2);
    assert_int_equal(row->first_ns, 5000);
    assert_int_equal(row->last_ns, 7000);
    assert_int_equal(row->stream_kinds, (1u << US_STREAM_USER) | (1u << US_STREAM_LEGACY));
    assert_int_equal(row->devices, 0x3); /* devices 0 and 1 */
    assert_string_equal(row->api, "cudaMemcpyAsync");
    assert_int_equal(row->site.depth, 3);
    assert_ptr_equal(row->site.frames[0], a.frames[0]);
    row = find_row(r, US_RULE_pageable_h2d, &b);
    assert_non_null(row);
    assert_int_equal(row->count, 1);
    row = find_row(r, US_RULE_pageable_d2h, &a);
    assert_non_null(row);
    assert_int_equal(row->count, 1);
    assert_int_equal(row->bytes, 9);
    assert_int_equal(r->event_count, 5);
    us_report_free(r);
}

/* A call's findings at one site, recorded at once: each rule's row and
 * event as separate records would make, each new row announced in warn mode;
 * an unknown rule is skipped, a bad count records nothing. */
static void test_findings_record_call_records_each_rule(void **state)
{
    (void)state;
    cfg.mode = US_MODE_WARN;
    cfg.warn_interval_ms = 0;
    use_config();
    struct us_site a = site_at(0x1000);
    struct us_finding both[3] = { finding(US_RULE_pageable_h2d, 100, 10, false),
                                  finding((enum us_rule_id)US_RULE_COUNT, 1, 1, false),
                                  finding(US_RULE_legacy_stream, 100, 10, false) };
    both[2].stream_kind = US_STREAM_LEGACY;
    us_findings_record_call(both, 3, &a);
    assert_int_equal(line_count, 2);
    us_findings_record_call(both, 3, &a);
    assert_int_equal(line_count, 2); /* the rows are not new */
    us_findings_record_call(both, 0, &a);
    us_findings_record_call(both, US_FINDINGS_PER_CALL_MAX + 1, &a);
    us_findings_record_call(NULL, 1, &a);
    us_findings_record_call(both, 1, NULL);

    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    assert_int_equal(r->row_count, 2);
    const struct us_report_row *h2d = find_row(r, US_RULE_pageable_h2d, &a);
    const struct us_report_row *legacy = find_row(r, US_RULE_legacy_stream, &a);
    assert_non_null(h2d);
    assert_non_null(legacy);
    assert_int_equal(h2d->count, 2);
    assert_int_equal(h2d->bytes, 200);
    assert_int_equal(legacy->count, 2);
    assert_int_equal(legacy->stream_kinds, 1u << US_STREAM_LEGACY);
    assert_int_equal(r->event_count, 4);
    us_report_free(r);
}

static void test_findings_rows_sorted_by_time_held(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000), b = site_at(0x2000), c = site_at(0x3000);
    record(US_RULE_explicit_sync, &a, 0, 5, false);
    record(US_RULE_pageable_d2h, &b, 0, 500, false);
    record(US_RULE_sync_memcpy, &c, 0, 50, false);
    record(US_RULE_sync_memcpy, &c, 0, 50, false);
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, 3);
    assert_int_equal(r->rows[0].rule, US_RULE_pageable_d2h);
    assert_int_equal(r->rows[1].rule, US_RULE_sync_memcpy);
    assert_int_equal(r->rows[1].total_ns, 100);
    assert_int_equal(r->rows[2].rule, US_RULE_explicit_sync);
    /* events name their row by its index in the sorted rows */
    for (size_t i = 0; i < r->event_count; i++)
        assert_int_equal(r->rows[r->events[i].row].rule, r->events[i].rule);
    us_report_free(r);
}

static void test_findings_site_cap_counts_into_other_row(void **state)
{
    (void)state;
    for (uintptr_t i = 0; i < SITES_MAX + 10; i++) {
        struct us_site s = site_at(0x100000 + i * 0x100);
        record(US_RULE_legacy_stream, &s, 0, 1, false);
    }
    struct us_site s = site_at(0x50);
    record(US_RULE_sync_memset, &s, 0, 1, false); /* another rule: also past the cap */
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, SITES_MAX + 2);
    const struct us_report_row *other = NULL;
    int others = 0;
    for (size_t i = 0; i < r->row_count; i++)
        if (r->rows[i].other) {
            others++;
            if (r->rows[i].rule == US_RULE_legacy_stream)
                other = &r->rows[i];
        }
    assert_int_equal(others, 2);
    assert_non_null(other);
    assert_int_equal(other->count, 10);
    assert_ptr_equal(&r->rows[0], other); /* 10 ns: the most time */
    us_report_free(r);
    /* a site already in the table still gets its own row */
    struct us_site first = site_at(0x100000);
    record(US_RULE_legacy_stream, &first, 0, 1, false);
    r = us_findings_collect();
    const struct us_report_row *row = find_row(r, US_RULE_legacy_stream, &first);
    assert_non_null(row);
    assert_int_equal(row->count, 2);
    us_report_free(r);
}

static void test_findings_event_ring_keeps_the_latest(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    for (uint64_t i = 0; i < EVENTS_MAX + 5; i++) {
        struct us_finding f = finding(US_RULE_explicit_sync, 0, 1, false);
        f.start_ns = i;
        us_findings_record(&f, &a);
    }
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->event_count, EVENTS_MAX);
    assert_int_equal(r->events_dropped, 5);
    assert_int_equal(r->events[0].start_ns, 5);
    assert_int_equal(r->events[EVENTS_MAX - 1].start_ns, EVENTS_MAX + 4);
    assert_int_equal(r->rows[0].count, EVENTS_MAX + 5);
    us_report_free(r);
}

static long minor_faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_minflt;
}

/* The rings are mapped in when they are made: recording into them takes no
 * page fault (the first pass through a ring that was only allocated took one
 * every 28 findings or 85 spans, inside the calls that recorded them). */
static void test_findings_rings_take_no_page_fault(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    struct us_finding f = finding(US_RULE_explicit_sync, 0, 1, false);
    us_findings_record(&f, &a); /* the rings, made after the setup's reset */
    us_findings_span("d2h", 0, 1, 2, 4);
    long before = minor_faults();
    for (int i = 0; i < 3000; i++) {
        us_findings_record(&f, &a);
        us_findings_span("d2h", 0, 1, 2, 4);
    }
    long faults = minor_faults() - before;
    /* a sanitizer's shadow memory faults in as the rings are first written */
    if (getenv("TEST_SANITIZER") != NULL)
        return;
    assert_true(faults <= 2); /* 3000 events and spans: 80 pages, 80 faults without MAP_POPULATE */
}

static void test_findings_spans_recorded(void **state)
{
    (void)state;
    us_findings_span("peer d2h", 1, 100, 200, 8 << 20);
    us_findings_span(NULL, 0, 300, 400, 1);
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->span_count, 2);
    assert_string_equal(r->spans[0].name, "peer d2h");
    assert_int_equal(r->spans[0].device, 1);
    assert_int_equal(r->spans[0].start_ns, 100);
    assert_int_equal(r->spans[0].end_ns, 200);
    assert_int_equal(r->spans[0].bytes, 8 << 20);
    assert_int_equal(r->spans[0].tid, gettid());
    assert_string_equal(r->spans[1].name, "span");
    us_report_free(r);
}

#define THREADS 8
#define PER_THREAD 5000

/* Each thread's findings take held times 1..PER_THREAD plus a tenth of the
 * thread's index, so the sums and the largest are known. */
struct many_arg {
    const struct us_site *site;
    uint64_t offset;
};

static void *record_many(void *arg)
{
    const struct many_arg *m = arg;
    for (int i = 1; i <= PER_THREAD; i++)
        record(US_RULE_pageable_d2h, m->site, 1, (uint64_t)i * 10 + m->offset, (i & 1) != 0);
    return NULL;
}

static void test_findings_threads_aggregate(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    pthread_t t[THREADS];
    struct many_arg arg[THREADS];
    for (int i = 0; i < THREADS; i++) {
        arg[i] = (struct many_arg){.site = &a, .offset = (uint64_t)i};
        assert_int_equal(pthread_create(&t[i], NULL, record_many, &arg[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, 1);
    const uint64_t n = (uint64_t)THREADS * PER_THREAD;
    assert_int_equal(r->rows[0].count, n);
    assert_int_equal(r->rows[0].bytes, n);
    assert_int_equal(r->rows[0].fixed, n / 2);
    assert_int_equal(r->rows[0].observed, n / 2);
    /* sum over threads of sum(10 i + offset) */
    uint64_t total = 0;
    for (uint64_t k = 0; k < THREADS; k++)
        total += 10 * (uint64_t)PER_THREAD * (PER_THREAD + 1) / 2 + k * PER_THREAD;
    assert_int_equal(r->rows[0].total_ns, total);
    assert_int_equal(r->rows[0].max_ns, (uint64_t)PER_THREAD * 10 + THREADS - 1);
    /* every finding is on the timeline or counted as let go; a writer the
     * ring lapped may leave its older event (findings_rings.c) */
    assert_true(r->event_count > EVENTS_MAX - THREADS && r->event_count <= EVENTS_MAX);
    assert_int_equal(r->event_count + r->events_dropped, n);
    for (size_t i = 0; i < r->event_count; i++)
        assert_int_equal(r->events[i].row, 0);
    us_report_free(r);
}

/* Spans from many threads at once, without a lock (findings_rings.c): each
 * one kept whole (no field of another span's), or counted as let go. */
static void *span_many(void *arg)
{
    const struct many_arg *m = arg;
    for (int i = 1; i <= PER_THREAD; i++)
        us_findings_span("d2h", (int)m->offset, (uint64_t)i, (uint64_t)i + m->offset, m->offset * 1000 + 7);
    return NULL;
}

static void test_findings_spans_from_threads(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    struct many_arg arg[THREADS];
    for (int i = 0; i < THREADS; i++) {
        arg[i] = (struct many_arg){.offset = (uint64_t)i};
        assert_int_equal(pthread_create(&t[i], NULL, span_many, &arg[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    struct us_report *r = us_findings_collect();
    const uint64_t n = (uint64_t)THREADS * PER_THREAD;
    assert_true(r->span_count > US_FINDINGS_SPANS_MAX - THREADS && r->span_count <= US_FINDINGS_SPANS_MAX);
    assert_int_equal(r->span_count + r->spans_dropped, n);
    for (size_t i = 0; i < r->span_count; i++) {
        const struct us_report_span *sp = &r->spans[i];
        uint64_t thread = (uint64_t)sp->device;
        assert_true(thread < THREADS);
        assert_string_equal(sp->name, "d2h");
        assert_int_equal(sp->end_ns, sp->start_ns + thread);
        assert_int_equal(sp->bytes, thread * 1000 + 7);
        assert_true(sp->tid > 0);
    }
    us_report_free(r);
}

/* A thread counts a finding at a row it met before without the rows' lock:
 * it records while another thread holds it. */
struct twice_arg {
    struct us_site site;
    bool learnt; /* set by the recording thread, cleared by the one that took the lock */
};

static void *record_twice(void *arg)
{
    struct twice_arg *a = arg;
    record(US_RULE_pageable_h2d, &a->site, 4, 1, false);
    __atomic_store_n(&a->learnt, true, __ATOMIC_RELEASE);
    while (__atomic_load_n(&a->learnt, __ATOMIC_ACQUIRE))
        sched_yield();
    record(US_RULE_pageable_h2d, &a->site, 4, 1, false);
    struct us_finding f = finding(US_RULE_explicit_sync, 0, 1, false);
    us_findings_record_unlocated(&f); /* a row it has not met: waits for the lock */
    return NULL;
}

/* The pageable_h2d row's count as the report reads it. Lock held. */
static uint64_t h2d_count_locked(void)
{
    size_t n = us_findings_rows_held();
    struct us_report_row *rows = calloc(n + 1, sizeof *rows);
    assert_non_null(rows);
    size_t got = us_findings_rows_copy(rows);
    us_findings_local_add_to(rows, got);
    uint64_t count = 0;
    for (size_t k = 0; k < got; k++)
        if (rows[k].rule == US_RULE_pageable_h2d)
            count = rows[k].count;
    free(rows);
    return count;
}

static void test_findings_known_row_takes_no_lock(void **state)
{
    (void)state;
    struct twice_arg arg = {.site = site_at(0x7000)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, record_twice, &arg), 0);
    while (!__atomic_load_n(&arg.learnt, __ATOMIC_ACQUIRE))
        sched_yield();
    us_findings_lock();
    __atomic_store_n(&arg.learnt, false, __ATOMIC_RELEASE);
    uint64_t count = 0;
    for (int ms = 0; ms < 2000 && (count = h2d_count_locked()) < 2; ms++) /* the second, added meanwhile */
        usleep(1000);
    us_findings_unlock();
    pthread_join(t, NULL);
    assert_int_equal(count, 2);
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, 2); /* and the unlocated one, once the lock was free */
    us_report_free(r);
}

/* A thread meets more rows than it keeps slots for: a row that loses its
 * slot takes its sums along, and every finding is counted once. */
static void test_findings_rows_past_the_threads_slots(void **state)
{
    (void)state;
    enum { SITES = 40, ROUNDS = 6 };
    for (int round = 0; round < ROUNDS; round += 2)
        for (uintptr_t i = 0; i < SITES; i++) { /* twice in a row: the second counted in the slot */
            struct us_site s = site_at(0x100000 + i * 0x1000);
            for (int twice = 0; twice < 2; twice++) {
                record(US_RULE_pageable_d2h, &s, 10, 2, false);
                record(US_RULE_sync_memcpy, &s, 1, 1, true); /* two rules at one site */
            }
        }
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, 2 * SITES);
    for (size_t i = 0; i < r->row_count; i++) {
        assert_int_equal(r->rows[i].count, ROUNDS);
        bool d2h = r->rows[i].rule == US_RULE_pageable_d2h;
        assert_int_equal(r->rows[i].bytes, d2h ? 10 * ROUNDS : ROUNDS);
        assert_int_equal(r->rows[i].total_ns, d2h ? 2 * ROUNDS : ROUNDS);
        assert_int_equal(r->rows[i].fixed, d2h ? 0 : ROUNDS);
    }
    assert_int_equal(r->event_count, 2 * SITES * ROUNDS);
    us_report_free(r);
}

/* A reset frees the rows: a thread's remembered ones are forgotten with them. */
static void test_findings_reset_forgets_known_rows(void **state)
{
    (void)state;
    struct us_site a = site_at(0x9000);
    record(US_RULE_sync_memcpy, &a, 8, 5, false);
    record(US_RULE_sync_memcpy, &a, 8, 5, false);
    us_findings_reset();
    struct us_finding f = finding(US_RULE_sync_memcpy, 8, 7, false);
    f.start_ns = 4242;
    us_findings_record(&f, &a);
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, 1);
    assert_int_equal(r->rows[0].count, 1);
    assert_int_equal(r->rows[0].first_ns, 4242); /* a new row's first finding */
    assert_int_equal(r->event_count, 1);
    us_report_free(r);
}

static void test_findings_real_capture_aggregates(void **state)
{
    (void)state;
    volatile int n = 3;
    for (int i = 0; i < n; i++) {
        struct us_site s;
        us_site_capture(&s);
        record(US_RULE_sync_memcpy, &s, 1, 1, false);
    }
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, 1);
    assert_int_equal(r->rows[0].count, 3);
    us_report_free(r);
}

/* --- warn mode ------------------------------------------------------------------------------ */

static void test_findings_warn_line_format(void **state)
{
    (void)state;
    cfg.mode = US_MODE_WARN;
    use_config();
    struct us_site a = site_at(0x1000);
    struct us_finding f = finding(US_RULE_pageable_d2h, 64u << 20, 12300000, true);
    f.path = US_PATH_D2H_PAGEABLE;
    f.src_device = 0;
    f.dst_device = -1;
    f.stream = cudaStreamLegacy;
    f.stream_kind = US_STREAM_LEGACY;
    us_findings_record(&f, &a);
    assert_int_equal(line_count, 1);
    char expected[512];
    snprintf(expected, sizeof expected,
             "unstall[%ld]: warning: pageable_d2h: cudaMemcpyAsync 64.0 MiB D2H pageable device 0 on stream 0x1 "
             "(legacy) held 12.3 ms [fixed] at 0x1000 <- 0x1010 <- 0x1020",
             (long)getpid());
    assert_string_equal(lines[0], expected);

    /* no copy, no stream: only what there is */
    struct us_site b = site_at(0x2000);
    f = finding(US_RULE_explicit_sync, 0, 1500, false);
    f.api = "cudaDeviceSynchronize";
    f.dst_device = -1;
    us_findings_record(&f, &b);
    assert_int_equal(line_count, 2);
    snprintf(expected, sizeof expected,
             "unstall[%ld]: warning: explicit_sync: cudaDeviceSynchronize held 1.5 us at 0x2000 <- 0x2010 <- 0x2020",
             (long)getpid());
    assert_string_equal(lines[1], expected);
}

static void test_findings_warn_once_per_new_site(void **state)
{
    (void)state;
    cfg.mode = US_MODE_WARN;
    cfg.warn_interval_ms = 0;
    use_config();
    struct us_site a = site_at(0x1000), b = site_at(0x2000);
    record(US_RULE_pageable_h2d, &a, 1, 1, false);
    record(US_RULE_pageable_h2d, &a, 1, 1, false);
    record(US_RULE_pageable_h2d, &a, 1, 1, false);
    assert_int_equal(line_count, 1);
    record(US_RULE_pageable_h2d, &b, 1, 1, false);
    assert_int_equal(line_count, 2);
    record(US_RULE_pageable_d2h, &a, 1, 1, false); /* a new (rule, site) */
    assert_int_equal(line_count, 3);
    record(US_RULE_pageable_d2h, &a, 1, 1, false);
    record(US_RULE_pageable_h2d, &b, 1, 1, false);
    assert_int_equal(line_count, 3);
    assert_int_equal(lines_containing("pageable_h2d:"), 2);
    assert_int_equal(lines_containing("pageable_d2h:"), 1);

    /* mode report: silent */
    cfg.mode = US_MODE_REPORT;
    use_config();
    struct us_site c = site_at(0x3000);
    record(US_RULE_pageable_h2d, &c, 1, 1, false);
    assert_int_equal(line_count, 3);
}

static void test_findings_warn_rate_limited_per_rule(void **state)
{
    (void)state;
    cfg.mode = US_MODE_WARN;
    cfg.warn_interval_ms = 200;
    use_config();
    struct us_site s[4] = { site_at(0x1000), site_at(0x2000), site_at(0x3000), site_at(0x4000) };
    record(US_RULE_pageable_h2d, &s[0], 1, 1, false);
    record(US_RULE_pageable_h2d, &s[1], 1, 1, false); /* within the interval: not shown */
    record(US_RULE_pageable_h2d, &s[2], 1, 1, false); /* nor this */
    record(US_RULE_sync_memcpy, &s[0], 1, 1, false);  /* another rule has its own interval */
    assert_int_equal(line_count, 2);
    assert_int_equal(lines_containing("pageable_h2d:"), 1);
    assert_int_equal(lines_containing("sync_memcpy:"), 1);
    struct timespec pause = { 0, 250 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    record(US_RULE_pageable_h2d, &s[3], 1, 1, false);
    assert_int_equal(line_count, 3);
    assert_non_null(strstr(lines[2], "at 0x4000"));
    assert_non_null(strstr(lines[2], "(2 earlier new sites of this rule not shown: warn_interval_ms)"));
    /* the sites not announced are in the report all the same */
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, 5);
    us_report_free(r);
}

/* --- strict mode ------------------------------------------------------------------------------ */

static void strict(enum us_severity severity, const char *allow)
{
    cfg.mode = US_MODE_STRICT;
    cfg.strict_severity = severity;
    cfg.strict_action = US_STRICT_ERROR;
    size_t n = strlen(allow);
    assert_true(n < sizeof cfg.allow);
    memcpy(cfg.allow, allow, n + 1);
    use_config();
}

static void test_findings_forbidden_only_in_strict_mode(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    assert_false(us_findings_forbidden(US_RULE_pageable_d2h, &a, "cudaMemcpy"));
    cfg.mode = US_MODE_WARN;
    use_config();
    assert_false(us_findings_forbidden(US_RULE_pageable_d2h, &a, "cudaMemcpy"));
    strict(US_SEVERITY_LOW, "");
    assert_true(us_findings_forbidden(US_RULE_pageable_d2h, &a, "cudaMemcpy"));
    assert_int_equal(US_ERR_FORBIDDEN, cudaErrorNotPermitted);
}

static void test_findings_strict_severity_threshold(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    strict(US_SEVERITY_MEDIUM, ""); /* the default */
    assert_true(us_findings_forbidden(US_RULE_pageable_d2h, &a, "x"));   /* high */
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));   /* medium */
    assert_false(us_findings_forbidden(US_RULE_explicit_sync, &a, "x")); /* low */
    strict(US_SEVERITY_HIGH, "");
    assert_true(us_findings_forbidden(US_RULE_staged_peer, &a, "x"));
    assert_false(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    strict(US_SEVERITY_LOW, "");
    assert_true(us_findings_forbidden(US_RULE_explicit_sync, &a, "x"));
    assert_true(us_findings_forbidden(US_RULE_blocking_stream, &a, "x"));
}

static void test_findings_allow_by_rule_id(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    strict(US_SEVERITY_LOW, "pageable_h2d");
    assert_false(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    assert_true(us_findings_forbidden(US_RULE_pageable_d2h, &a, "x"));
    strict(US_SEVERITY_LOW, " pageable_d2h , sync_memcpy,,");
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    assert_false(us_findings_forbidden(US_RULE_pageable_d2h, &a, "x"));
    assert_false(us_findings_forbidden(US_RULE_sync_memcpy, &a, "x"));
    strict(US_SEVERITY_LOW, "*");
    assert_false(us_findings_forbidden(US_RULE_staged_peer, &a, "x"));
}

static void test_findings_allow_unknown_rule_warns(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    strict(US_SEVERITY_LOW, "pageable_h2x,sync_memcpy");
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    assert_false(us_findings_forbidden(US_RULE_sync_memcpy, &a, "x"));
    assert_int_equal(lines_containing("allow: unknown rule \"pageable_h2x\""), 1);
    /* parsed once: no second warning */
    assert_true(us_findings_forbidden(US_RULE_pageable_d2h, &a, "x"));
    assert_int_equal(lines_containing("allow: unknown rule"), 1);
}

static void test_findings_allow_python_pattern(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    a.py_depth = 2;
    snprintf(a.py_file[0], sizeof a.py_file[0], "/home/u/model/train.py:42");
    snprintf(a.py_func[0], sizeof a.py_func[0], "step");
    snprintf(a.py_file[1], sizeof a.py_file[1], "/home/u/model/run.py:7");
    snprintf(a.py_func[1], sizeof a.py_func[1], "main");
    strict(US_SEVERITY_LOW, "pageable_h2d@*train.py:42");
    assert_false(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    assert_true(us_findings_forbidden(US_RULE_pageable_d2h, &a, "x")); /* the pattern is for h2d */
    strict(US_SEVERITY_LOW, "pageable_h2d@train.py:42"); /* the file name alone */
    assert_false(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    strict(US_SEVERITY_LOW, "pageable_h2d@run.py:*"); /* an outer frame */
    assert_false(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    strict(US_SEVERITY_LOW, "pageable_h2d@train.py:43");
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    strict(US_SEVERITY_LOW, "*@/home/u/model/*");
    assert_false(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    assert_false(us_findings_forbidden(US_RULE_staged_peer, &a, "x"));
    struct us_site b = site_at(0x2000); /* no Python frame */
    assert_true(us_findings_forbidden(US_RULE_staged_peer, &b, "x"));
}

static void test_findings_allow_native_pattern(void **state)
{
    (void)state;
    void *fn = dlsym(RTLD_DEFAULT, "fnmatch");
    assert_non_null(fn);
    struct us_site a = { .depth = 2 };
    a.frames[0] = (void *)0x40;                /* nothing there */
    a.frames[1] = (char *)fn + 8;              /* libc.so.6!<function> */
    struct us_frame fr;
    us_callsite_symbolize(a.frames[1], &fr);
    char key[200], allow[240];
    us_callsite_frame_key(&fr, key, sizeof key);
    snprintf(allow, sizeof allow, "pageable_h2d@%s", key);
    strict(US_SEVERITY_LOW, allow);
    assert_false(us_findings_forbidden(US_RULE_pageable_h2d, &a, "x"));
    strict(US_SEVERITY_LOW, "*@libc.so*");
    assert_false(us_findings_forbidden(US_RULE_pageable_d2h, &a, "x"));
    strict(US_SEVERITY_LOW, "*@libcuda*");
    assert_true(us_findings_forbidden(US_RULE_pageable_d2h, &a, "x"));
    /* frames past callsite_depth are not looked at */
    strict(US_SEVERITY_LOW, "*@libc.so*");
    cfg.callsite_depth = 1;
    use_config();
    struct us_site b = a;
    b.frames[0] = (void *)0x80; /* another site: no cached answer */
    assert_true(us_findings_forbidden(US_RULE_pageable_d2h, &b, "x"));
}

static void test_findings_error_message_once_per_site(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000), b = site_at(0x2000);
    strict(US_SEVERITY_MEDIUM, "");
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &a, "cudaMemcpyAsync"));
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &a, "cudaMemcpyAsync"));
    assert_int_equal(lines_containing("strict mode:"), 1);
    assert_int_equal(lines_containing("error: strict mode: pageable_h2d (medium severity) in cudaMemcpyAsync at "
                                      "0x1000 <- 0x1010 <- 0x1020"),
                     1);
    assert_int_equal(lines_containing(us_rules[US_RULE_pageable_h2d].fix), 1);
    assert_int_equal(lines_containing("UNSTALL_ALLOW=pageable_h2d (everywhere)"), 1);
    assert_int_equal(lines_containing("returns cudaErrorNotPermitted"), 1);
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &b, "cudaMemcpyAsync"));
    assert_int_equal(lines_containing("strict mode:"), 2);
    /* the report counts them */
    struct us_report *r = us_findings_collect();
    const struct us_report_row *row = find_row(r, US_RULE_pageable_h2d, &a);
    assert_non_null(row);
    assert_int_equal(row->forbidden, 2);
    assert_int_equal(row->count, 0);
    us_report_free(r);
}

/* A harness in the program (tools/pytest_unstall.py) asks how many calls
 * strict mode failed and which was the latest: every forbidden call counts,
 * not only the first at a site (which alone prints), an allowed one does not. */
static void test_findings_forbidden_total_and_latest(void **state)
{
    (void)state;
    char latest[512];
    memset(latest, 'x', sizeof latest);
    assert_int_equal(us_findings_forbidden_total(latest, sizeof latest), 0);
    assert_string_equal(latest, "");
    struct us_site a = site_at(0x1000), b = site_at(0x2000);
    b.py_depth = 1;
    snprintf(b.py_file[0], sizeof b.py_file[0], "/home/u/tests/test_io.py:17");
    snprintf(b.py_func[0], sizeof b.py_func[0], "test_cpu");
    strict(US_SEVERITY_MEDIUM, "explicit_sync");
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &a, "cudaMemcpyAsync"));
    assert_true(us_findings_forbidden(US_RULE_pageable_h2d, &a, "cudaMemcpyAsync"));
    assert_false(us_findings_forbidden(US_RULE_explicit_sync, &a, "cudaStreamSynchronize"));
    assert_int_equal(us_findings_forbidden_total(NULL, 0), 2);
    assert_true(us_findings_forbidden(US_RULE_pageable_d2h, &b, "cudaMemcpy"));
    assert_int_equal(us_findings_forbidden_total(latest, sizeof latest), 3);
    assert_string_equal(latest, "pageable_d2h (high severity) in cudaMemcpy at /home/u/tests/test_io.py:17 (test_cpu) <- "
                                "0x2000 <- 0x2010 <- 0x2020");
    /* a short buffer gets a terminated prefix */
    char small[8];
    assert_int_equal(us_findings_forbidden_total(small, sizeof small), 3);
    assert_string_equal(small, "pageabl");
    /* not in strict mode: nothing is forbidden, nothing counts */
    cfg.mode = US_MODE_WARN;
    use_config();
    assert_false(us_findings_forbidden(US_RULE_pageable_d2h, &b, "cudaMemcpy"));
    assert_int_equal(us_findings_forbidden_total(NULL, 0), 3);
    us_findings_reset();
    assert_int_equal(us_findings_forbidden_total(latest, sizeof latest), 0);
    assert_string_equal(latest, "");
}

static void test_findings_allowed_finding_is_recorded(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000);
    strict(US_SEVERITY_LOW, "explicit_sync");
    assert_false(us_findings_forbidden(US_RULE_explicit_sync, &a, "cudaDeviceSynchronize"));
    record(US_RULE_explicit_sync, &a, 0, 77, false);
    struct us_report *r = us_findings_collect();
    assert_int_equal(r->row_count, 1);
    assert_int_equal(r->rows[0].count, 1);
    assert_int_equal(r->rows[0].forbidden, 0);
    assert_int_equal(r->rows[0].total_ns, 77);
    us_report_free(r);
    assert_int_equal(line_count, 0);
}

static void test_findings_strict_abort(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        us_log_set_sink(NULL, NULL); /* to the configured destination: stderr */
        strict(US_SEVERITY_MEDIUM, "");
        cfg.strict_action = US_STRICT_ABORT;
        use_config();
        struct us_site a = site_at(0x1000);
        a.py_depth = 1;
        snprintf(a.py_file[0], sizeof a.py_file[0], "/x/train.py:9");
        us_findings_forbidden(US_RULE_pageable_h2d, &a, "cudaMemcpyAsync");
        _exit(3); /* not reached */
    }
    close(fds[1]);
    char out[8192];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof out - 1 && (n = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(out, "error: strict mode: pageable_h2d (medium severity) in cudaMemcpyAsync at "
                                "/x/train.py:9"));
    assert_non_null(strstr(out, us_rules[US_RULE_pageable_h2d].fix));
    assert_non_null(strstr(out, "UNSTALL_ALLOW='pageable_h2d@*/train.py:9' (this site)"));
    assert_non_null(strstr(out, "aborting (strict_action=abort)"));
}

/* --- short explicit waits (option sync_site_min_us) --------------------------------------------- */

/* One explicit wait through the watch, holding the caller about `us`. */
static void wait_watched(const char *api, unsigned us)
{
    struct us_watch w;
    assert_true(us_watch_begin(&w, US_RULE_explicit_sync, api));
    if (us > 0)
        usleep(us);
    us_watch_end(&w, NULL, US_STREAM_USER, -1, 0);
}

static size_t count_rows(const struct us_report *r, bool unlocated)
{
    size_t n = 0;
    for (size_t i = 0; i < r->row_count; i++)
        n += r->rows[i].rule == US_RULE_explicit_sync && r->rows[i].unlocated == unlocated;
    return n;
}

static void test_findings_short_waits_counted_without_site(void **state)
{
    (void)state;
    cfg.sync_site_min_us = 50;
    use_config();
    for (int i = 0; i < 3; i++)
        wait_watched("cudaStreamSynchronize", 0);
    wait_watched("cudaEventSynchronize", 0);
    wait_watched("cudaStreamSynchronize", 2000); /* long: located */
    struct us_report *r = us_findings_collect();
    assert_non_null(r);
    assert_int_equal(count_rows(r, true), 2); /* one per API */
    assert_int_equal(count_rows(r, false), 1);
    for (size_t i = 0; i < r->row_count; i++) {
        const struct us_report_row *row = &r->rows[i];
        if (row->unlocated && strcmp(row->api, "cudaStreamSynchronize") == 0)
            assert_int_equal(row->count, 3);
        else if (row->unlocated)
            assert_string_equal(row->api, "cudaEventSynchronize");
        else {
            assert_true(row->site.depth > 0);
            assert_true(row->max_ns >= 2000000u);
        }
    }
    assert_int_equal(r->event_count, 5); /* every wait on the timeline */
    us_report_free(r);
    us_findings_report();
    assert_non_null(strstr(captured(), "explicit_sync      low  "));
    assert_non_null(strstr(captured(), " in 5 calls"));
    assert_non_null(strstr(captured(), "(short waits: counted, not located by call site; option sync_site_min_us)"));
}

/* 0 locates every wait; strict mode locates every wait it may refuse */
static void test_findings_short_waits_located_when_asked_or_strict(void **state)
{
    (void)state;
    cfg.sync_site_min_us = 0;
    use_config();
    wait_watched("cudaStreamSynchronize", 0);
    struct us_report *r = us_findings_collect();
    assert_int_equal(count_rows(r, true), 0);
    assert_int_equal(count_rows(r, false), 1);
    us_report_free(r);
    us_findings_reset();

    cfg.sync_site_min_us = 50;
    strict(US_SEVERITY_LOW, "explicit_sync"); /* refusable, allowed by rule */
    wait_watched("cudaStreamSynchronize", 0);
    r = us_findings_collect();
    assert_int_equal(count_rows(r, true), 0);
    assert_int_equal(count_rows(r, false), 1);
    us_report_free(r);
    us_findings_reset();

    strict(US_SEVERITY_MEDIUM, ""); /* explicit_sync (low) cannot be refused: short ones unlocated */
    wait_watched("cudaStreamSynchronize", 0);
    r = us_findings_collect();
    assert_int_equal(count_rows(r, true), 1);
    us_report_free(r);
}

/* --- the report -------------------------------------------------------------------------------- */

static void test_findings_report_text_rows(void **state)
{
    (void)state;
    struct us_site a = site_at(0x1000), b = site_at(0x2000);
    a.py_depth = 1;
    snprintf(a.py_file[0], sizeof a.py_file[0], "train.py:42");
    snprintf(a.py_func[0], sizeof a.py_func[0], "step");
    record(US_RULE_pageable_d2h, &a, 64u << 20, 12300000, true);
    record(US_RULE_pageable_d2h, &a, 64u << 20, 2000000, false);
    record(US_RULE_explicit_sync, &b, 0, 1000000, false);
    us_findings_report();
    const char *text = captured();
    char pre[64];
    snprintf(pre, sizeof pre, "unstall[%ld]: ", (long)getpid());
    assert_non_null(strstr(text, "---- unstall report: "));
    assert_non_null(strstr(text, "mode report"));
    assert_non_null(strstr(text, "pageable_d2h       high      14.3 ms in 2 calls, 128.0 MiB, 1 fixed"));
    assert_non_null(strstr(text, "explicit_sync      low        1.0 ms in 1 call"));
    assert_non_null(strstr(text, "   1  pageable_d2h       high          2  128.0 MiB    14.3 ms    12.3 ms         "
                                 "1/1  cudaMemcpyAsync"));
    assert_non_null(strstr(text, "        at train.py:42 (step) <- 0x1000 <- 0x1010 <- 0x1020"));
    assert_non_null(strstr(text, "   2  explicit_sync      low           1          -     1.0 ms     1.0 ms"));
    assert_non_null(strstr(text, us_rules[US_RULE_pageable_d2h].fix));
    assert_non_null(strstr(text, "---- end of unstall report ----"));
    /* every line carries the prefix */
    for (const char *l = text; *l != '\0'; l = strchr(l, '\n') + 1)
        if (*l != '\n') /* the sink's own separator */
            assert_memory_equal(l, pre, strlen(pre));
    /* once */
    size_t before = raw_len;
    us_findings_report();
    assert_int_equal(raw_len, before);
}

static void test_findings_report_top(void **state)
{
    (void)state;
    cfg.report_top = 1;
    use_config();
    struct us_site a = site_at(0x1000), b = site_at(0x2000), c = site_at(0x3000);
    record(US_RULE_pageable_d2h, &a, 1, 30, false);
    record(US_RULE_pageable_d2h, &b, 1, 20, false);
    record(US_RULE_pageable_d2h, &c, 1, 10, false);
    us_findings_report();
    const char *text = captured();
    assert_non_null(strstr(text, "at 0x1000"));
    assert_null(strstr(text, "at 0x2000"));
    assert_non_null(strstr(text, "... 2 more rows (option report_top"));
}

static void test_findings_report_no_cuda_seen(void **state)
{
    (void)state;
    us_state_hooked = 0;
    us_findings_report();
    assert_non_null(strstr(captured(), "unstall saw no CUDA runtime call: if the program links the CUDA runtime "
                                       "statically (nvcc's default), a runtime-layer preload cannot see it; build "
                                       "with -cudart shared"));
    us_state_hooked = 1;
}

static void test_findings_report_nothing_found(void **state)
{
    (void)state;
    us_findings_report();
    assert_non_null(strstr(captured(), "no implicit synchronization seen"));
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

static void test_findings_report_json_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/unstall-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(cfg.report, sizeof cfg.report, "%s/report-%%p.json", dir);
    use_config();
    struct us_site a = site_at(0x1000);
    a.py_depth = 1;
    snprintf(a.py_file[0], sizeof a.py_file[0], "/x/\"odd\".py:3");
    snprintf(a.py_func[0], sizeof a.py_func[0], "f");
    record(US_RULE_pageable_h2d, &a, 4096, 1234, false);
    us_findings_span("h2d", 0, 10, 20, 4096);
    us_findings_report();
    char path[512];
    snprintf(path, sizeof path, "%s/report-%ld.json", dir, (long)getpid());
    char *json = read_file(path);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"version\": 1"));
    char pid[64];
    snprintf(pid, sizeof pid, "\"pid\": %ld", (long)getpid());
    assert_non_null(strstr(json, pid));
    assert_non_null(strstr(json, "\"mode\": \"report\""));
    assert_non_null(strstr(json, "\"hooked\": true"));
    assert_non_null(strstr(json, "\"rule\": \"pageable_h2d\", \"severity\": \"medium\", \"api\": \"cudaMemcpyAsync\", "
                                 "\"count\": 1, \"bytes\": 4096, \"total_ns\": 1234, \"max_ns\": 1234, \"fixed\": 0, "
                                 "\"observed\": 1"));
    assert_non_null(strstr(json, "\"python\": [{\"file\": \"/x/\\\"odd\\\".py\", \"line\": 3, \"function\": \"f\"}]"));
    assert_non_null(strstr(json, "\"native\": [\"0x1000\", \"0x1010\", \"0x1020\"]"));
    assert_non_null(strstr(json, "{\"finding\": 0, \"rule\": \"pageable_h2d\""));
    assert_non_null(strstr(json, "{\"name\": \"h2d\", \"device\": 0"));
    /* the text report says where the JSON went; no temporary file is left */
    assert_non_null(strstr(captured(), path));
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    /* valid JSON, when python3 is here to say so */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s 2>/dev/null", path);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) != 127)
        assert_int_equal(WEXITSTATUS(rc), 0);
    unlink(path);
    rmdir(dir);
}

static void test_findings_report_json_unwritable(void **state)
{
    (void)state;
    snprintf(cfg.report, sizeof cfg.report, "/nonexistent-dir-unstall/r.json");
    use_config();
    us_findings_report();
    assert_int_equal(lines_containing("report: cannot write \"/nonexistent-dir-unstall/r.json\""), 1);
    assert_non_null(strstr(captured(), "---- end of unstall report ----")); /* the text all the same */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_findings_mode_off_records_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_aggregate_per_rule_and_site, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_record_call_records_each_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_rows_sorted_by_time_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_site_cap_counts_into_other_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_event_ring_keeps_the_latest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_rings_take_no_page_fault, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_spans_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_threads_aggregate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_spans_from_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_known_row_takes_no_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_reset_forgets_known_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_rows_past_the_threads_slots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_real_capture_aggregates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_warn_line_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_warn_once_per_new_site, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_warn_rate_limited_per_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_forbidden_only_in_strict_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_strict_severity_threshold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_allow_by_rule_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_allow_unknown_rule_warns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_allow_python_pattern, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_allow_native_pattern, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_error_message_once_per_site, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_forbidden_total_and_latest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_allowed_finding_is_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_strict_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_report_text_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_report_top, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_report_no_cuda_seen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_report_nothing_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_short_waits_counted_without_site, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_short_waits_located_when_asked_or_strict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_report_json_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_findings_report_json_unwritable, setup, teardown),
    };
    return US_RUN_TESTS("test_findings", tests, NULL, NULL);
}
