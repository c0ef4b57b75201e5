/* findings_collect.h - the findings gathered into one report (report.h),
 * and the report at exit written from it. */
#ifndef UNSTALL_FINDINGS_COLLECT_H
#define UNSTALL_FINDINGS_COLLECT_H

#include <stdbool.h>

/* Write the report (text to the log, JSON to option report). Called once,
 * at exit (report/at_exit.c's destructor) or when a termination signal ends
 * the process (endings.c, with the signal: 0 for an exit); later calls do
 * nothing. Calls no CUDA function and frees no pinned memory. Nothing in
 * mode off. */
void us_findings_report(void);
void us_findings_report_ended(int signal);

/* While the process runs: the JSON report as it is now, marked a snapshot,
 * where option report names a path and the final report is not written yet
 * (endings.c, every report_interval_s). true: written. */
bool us_findings_snapshot(void);

/* The findings so far, sorted as the report shows them (report.h); free it
 * with us_report_free. NULL when memory is short. */
struct us_report;
struct us_report *us_findings_collect(void);

/* Tests: allow the report to be written again. */
void us_findings_report_rearm(void);

#endif
