/* findings.h - recording what the program did that implicitly synchronizes.
 *
 * An entry that detects a rule asks us_findings_wanted() first (false in mode
 * off: nothing is captured or timed), captures the call site, asks
 * us_findings_forbidden() before doing the call (strict mode), times the call
 * and records it. Capturing a site and recording cost a few microseconds and
 * are paid only when a rule fires, never on the pass-through path.
 * Findings aggregate per (rule, call site); the report at exit reads them. */
#ifndef UNSTALL_FINDINGS_H
#define UNSTALL_FINDINGS_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "callsite.h"
#include "copy.h"
#include "rules.h"

struct us_finding {
    enum us_rule_id rule;
    const char *api;          /* "cudaMemcpyAsync", ... */
    size_t bytes;             /* 0 where not a copy */
    enum us_copy_path path;   /* US_PATH_UNKNOWN where not a copy */
    int src_device, dst_device; /* -1 where not applicable */
    cudaStream_t stream;
    enum us_stream_kind stream_kind;
    uint64_t start_ns;        /* us_now_ns() when the call began */
    uint64_t held_ns;         /* how long the call held the caller */
    bool fixed;               /* the shim rewrote the call */
    const void *context;      /* the issuing CUDA context where a rule depends on it, else NULL */
};

/* False in mode off: no finding is captured, timed or recorded. */
bool us_findings_wanted(void);

/* The one-time set-up of call-site capture (the shim's own code range, the
 * Python API, the unwinder), done at the shim's start rather than inside the
 * first finding's CUDA call, which would otherwise pay about 250 us. */
void us_findings_prepare(void);

/* Strict mode: true if this finding must fail the call (severity at or above
 * strict_severity and not on the allow-list). With strict_action=abort this
 * prints the finding and aborts instead of returning. */
bool us_findings_forbidden(enum us_rule_id rule, const struct us_site *site, const char *api);

/* How many calls strict mode has failed in this process (every one, not only
 * the first at a site), and into latest (terminated, cut to size) the latest
 * one as its message names it: "rule (severity) in api at site", "" before
 * the first. A harness in the program reads it through the export
 * unstall_strict_failures (entry/query.c). */
uint64_t us_findings_forbidden_total(char *latest, size_t size);

/* The CUDA error a forbidden call returns. */
#define US_ERR_FORBIDDEN cudaErrorNotPermitted

/* Record one finding (aggregates; in warn mode prints a line for a new site). */
void us_findings_record(const struct us_finding *f, const struct us_site *site);

/* A pipeline span for the timeline (tools/unstall-report --trace). */
void us_findings_span(const char *name, int device, uint64_t start_ns, uint64_t end_ns, size_t bytes);

/* Write the report (text to the log, JSON to option report). Called once at
 * exit (report/at_exit.c's destructor); later calls do nothing. Calls no CUDA
 * function and frees no pinned memory. Nothing in mode off. */
void us_findings_report(void);

/* The findings so far, sorted as the report shows them (report.h); free it
 * with us_report_free. NULL when memory is short. */
struct us_report;
struct us_report *us_findings_collect(void);

/* Tests: forget every finding, site, event and span, and allow the report to
 * be written again. The configuration is read afresh at each call anyway. */
void us_findings_reset(void);

#endif
