/* findings_warn.h - warn mode's lines: one line for a new call site of a
 * rule, at most one a rule per warn_interval_ms; the next line that goes
 * says how many new sites went unannounced. */
#ifndef UNSTALL_FINDINGS_WARN_H
#define UNSTALL_FINDINGS_WARN_H

#include <stdbool.h>
#include <stdint.h>

#include "callsite.h"
#include "finding.h"
#include "rules.h"

/* Whether a new site of rule is announced now, interval_ns after the rule's
 * last line; if so, *skipped: the new sites not announced since (and the
 * count starts again). Called with us_findings_lock held (findings_rows.h). */
bool us_findings_warn_due(enum us_rule_id rule, uint64_t interval_ns, uint64_t *skipped);

/* The line for f at site, to the log at level warn. Called without the lock:
 * it symbolizes the site. */
void us_findings_warn_line(const struct us_finding *f, const struct us_site *site, uint64_t skipped);

/* Tests: every rule unannounced again. Called with us_findings_lock held. */
void us_findings_warn_reset(void);

#endif
