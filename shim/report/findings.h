/* findings.h - recording what the program did that implicitly synchronizes.
 *
 * An entry that detects a rule asks us_findings_wanted() first (false in mode
 * off: nothing is captured or timed), captures the call site, asks
 * us_findings_forbidden() before doing the call (strict mode,
 * findings_strict.h), times the call and records it. Capturing a site and
 * recording cost a few microseconds and are paid only when a rule fires,
 * never on the pass-through path. Findings aggregate per (rule, call site)
 * (findings_rows.h); the report at exit reads them (findings_collect.h).
 * This header is the finding path's whole interface: it includes the parts
 * an entry uses. */
#ifndef UNSTALL_FINDINGS_H
#define UNSTALL_FINDINGS_H

#include <stdbool.h>

#include "callsite.h"
#include "finding.h"
#include "findings_collect.h"
#include "findings_rings.h"
#include "findings_strict.h"

/* False in mode off: no finding is captured, timed or recorded. */
bool us_findings_wanted(void);

/* The one-time set-up of call-site capture (the shim's own code range, the
 * Python API, the unwinder), done at the shim's start rather than inside the
 * first finding's CUDA call, which would otherwise pay about 250 us. */
void us_findings_prepare(void);

/* The calling thread's share of its first finding, done now: its id (a
 * system call, 2 us on an H200 host). The shim calls it inside
 * the program's first device allocation, on the thread that is likely to
 * make the first copies. */
void us_findings_prepare_thread(void);

/* Record one finding (aggregates; in warn mode prints a line for a new site). */
void us_findings_record(const struct us_finding *f, const struct us_site *site);

#define US_FINDINGS_PER_CALL_MAX 4

/* Record the `count` findings of one call (at most US_FINDINGS_PER_CALL_MAX),
 * all at `site`: as many us_findings_record calls would, with the site's hash
 * computed and the lock taken once. */
void us_findings_record_call(const struct us_finding *f, int count, const struct us_site *site);

/* Record one finding without a call site: counted in its rule's and API's
 * unlocated row (findings_rows.h) and on the timeline; never announced. */
void us_findings_record_unlocated(const struct us_finding *f);

/* Tests: forget every finding, site, event and span, and allow the report to
 * be written again. The configuration is read afresh at each call anyway. */
void us_findings_reset(void);

#endif
