/* findings_rings.h - the timeline's rings: the latest findings as events and
 * the latest pipeline spans (tools/unstall-report --trace). Each ring is
 * allocated at its first use and keeps its last US_FINDINGS_EVENTS_MAX or
 * US_FINDINGS_SPANS_MAX entries; what it dropped is counted. */
#ifndef UNSTALL_FINDINGS_RINGS_H
#define UNSTALL_FINDINGS_RINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report.h"

#define US_FINDINGS_EVENTS_MAX 10000 /* the timeline keeps the latest findings */
#define US_FINDINGS_SPANS_MAX 10000  /* and the latest pipeline spans */

/* The calling thread's id (gettid), cached per thread. */
int us_findings_thread_id(void);

/* Allocates the findings' event ring now (the shim's start) rather than in
 * the first finding's call; a push allocates it too when this was not run.
 * Not thread-safe: called before any finding can be recorded. */
void us_findings_rings_prepare(void);

/* Both rings take pushes from any thread without a lock (an atomic count
 * numbers them). The report copies the events with us_findings_lock held, as
 * it copies the rows (findings_rows.h: an event names its row by id, and no
 * row is made meanwhile). */
void us_findings_event_push(const struct us_report_event *event);
/* The events held (at most US_FINDINGS_EVENTS_MAX). */
size_t us_findings_events_held(void);
/* Copies the latest events held, at most cap, into out, oldest first;
 * returns how many, and in *dropped how many pushed events it did not copy
 * (let go, or being written by another thread then). */
size_t us_findings_events_copy(struct us_report_event *out, size_t cap, uint64_t *dropped);

/* A pipeline span for the timeline (tools/unstall-report --trace). Nothing in
 * mode off. `name` must live as long as
 * the process (a string literal): the ring keeps the pointer, since copying
 * the text was about an eighth of a small rewritten copy's own instructions
 * (callgrind on the simulated runtime). */
void us_findings_span(const char *name, int device, uint64_t start_ns, uint64_t end_ns, size_t bytes);

/* Copies the spans held into r->spans (allocated; span_count and
 * spans_dropped set: pushed and not copied, let go or being written then).
 * False when memory is short. */
bool us_findings_spans_copy(struct us_report *r);

/* Tests: forget every event (called with us_findings_lock held, while no
 * other thread records a finding) and span. */
void us_findings_events_reset(void);
void us_findings_spans_reset(void);

#endif
