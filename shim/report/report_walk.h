/* report_walk.h - one walk over a report, feeding an emitter.
 *
 * The text report (report_text.c) and the JSON report (report_json.c) are
 * two emitters of the same walk: the walk takes each fact from the report
 * once, in one order (the process, the rules seen with their totals, the
 * findings, the timeline's events and spans), and each emitter says it in its
 * own form, or leaves out what its form does not show (the text shows the
 * top rows and no timeline). A fact added to the report is added to the walk,
 * and each emitter then decides how to say it. */
#ifndef UNSTALL_REPORT_WALK_H
#define UNSTALL_REPORT_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"

/* A rule's totals over the report's rows. */
struct us_report_rule_total {
    enum us_rule_id rule;
    uint64_t count, bytes, total_ns, fixed, forbidden;
};

/* The parts of a report, in the walk's order. */
enum us_report_part {
    US_REPORT_PART_RULES,    /* us_report_rule_total, most time first */
    US_REPORT_PART_FINDINGS, /* us_report_row, most time first */
    US_REPORT_PART_EVENTS,   /* us_report_event, oldest first */
    US_REPORT_PART_SPANS,    /* us_report_span */
};

struct us_report_emitter {
    void (*begin)(void *out, const struct us_report *r);
    void (*part_begin)(void *out, enum us_report_part part, size_t count);
    void (*rule)(void *out, size_t index, const struct us_report_rule_total *total);
    void (*row)(void *out, size_t index, const struct us_report_row *row);
    void (*event)(void *out, size_t index, const struct us_report_event *event);
    void (*span)(void *out, size_t index, const struct us_report_span *span);
    void (*part_end)(void *out, enum us_report_part part, size_t count);
    /* totals: the rules part again, for what follows the findings (the text's fixes) */
    void (*end)(void *out, const struct us_report_rule_total *totals, size_t seen);
};

void us_report_walk(const struct us_report *r, const struct us_report_emitter *emitter, void *out);

#endif
