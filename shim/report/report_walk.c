/* report_walk.c - see report_walk.h. */
#include "report_walk.h"

#include <stdlib.h>
#include <string.h>

static int compare_totals(const void *a, const void *b)
{
    const struct us_report_rule_total *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return (int)x->rule - (int)y->rule;
}

/* Rules seen (count or forbidden), most time first; returns how many. */
static size_t rule_totals(const struct us_report *r, struct us_report_rule_total t[US_RULE_COUNT])
{
    memset(t, 0, sizeof(struct us_report_rule_total) * US_RULE_COUNT);
    for (int i = 0; i < US_RULE_COUNT; i++)
        t[i].rule = (enum us_rule_id)i;
    for (size_t i = 0; i < r->row_count; i++) {
        const struct us_report_row *row = &r->rows[i];
        if ((unsigned)row->rule >= US_RULE_COUNT)
            continue;
        struct us_report_rule_total *x = &t[row->rule];
        x->count += row->count;
        x->bytes += row->bytes;
        x->total_ns += row->total_ns;
        x->fixed += row->fixed;
        x->forbidden += row->forbidden;
    }
    qsort(t, US_RULE_COUNT, sizeof t[0], compare_totals);
    size_t n = 0;
    while (n < US_RULE_COUNT && (t[n].count > 0 || t[n].forbidden > 0))
        n++;
    return n; /* sorted by time: rules only forbidden (time 0) come last */
}

void us_report_walk(const struct us_report *r, const struct us_report_emitter *emitter, void *out)
{
    struct us_report_rule_total totals[US_RULE_COUNT];
    size_t seen = rule_totals(r, totals);
    emitter->begin(out, r);
    emitter->part_begin(out, US_REPORT_PART_RULES, seen);
    for (size_t i = 0; i < seen; i++)
        emitter->rule(out, i, &totals[i]);
    emitter->part_end(out, US_REPORT_PART_RULES, seen);
    emitter->part_begin(out, US_REPORT_PART_FINDINGS, r->row_count);
    for (size_t i = 0; i < r->row_count; i++)
        emitter->row(out, i, &r->rows[i]);
    emitter->part_end(out, US_REPORT_PART_FINDINGS, r->row_count);
    if (emitter->event != NULL) {
        emitter->part_begin(out, US_REPORT_PART_EVENTS, r->event_count);
        for (size_t i = 0; i < r->event_count; i++)
            emitter->event(out, i, &r->events[i]);
        emitter->part_end(out, US_REPORT_PART_EVENTS, r->event_count);
    }
    if (emitter->span != NULL) {
        emitter->part_begin(out, US_REPORT_PART_SPANS, r->span_count);
        for (size_t i = 0; i < r->span_count; i++)
            emitter->span(out, i, &r->spans[i]);
        emitter->part_end(out, US_REPORT_PART_SPANS, r->span_count);
    }
    emitter->end(out, totals, seen);
}
