/* findings_strict.h - strict mode: a finding at or above strict_severity
 * fails its call (or aborts, strict_action=abort) unless option allow names
 * its rule, or its rule at a call site matching a pattern. */
#ifndef UNSTALL_FINDINGS_STRICT_H
#define UNSTALL_FINDINGS_STRICT_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "callsite.h"
#include "rules.h"

/* Strict mode: true if this finding must fail the call (severity at or above
 * strict_severity and not on the allow-list). With strict_action=abort this
 * prints the finding and aborts instead of returning. */
bool us_findings_forbidden(enum us_rule_id rule, const struct us_site *site, const char *api);

/* Whether strict mode could fail a call for this rule (mode strict, the
 * rule's severity at or above strict_severity), before the site is known. */
bool us_findings_may_forbid(enum us_rule_id rule);

/* How many calls strict mode has failed in this process (every one, not only
 * the first at a site), and into latest (terminated, cut to size) the latest
 * one as its message names it: "rule (severity) in api at site", "" before
 * the first. A harness in the program reads it through the export
 * unstall_strict_failures (entry_runtime/query.c). */
uint64_t us_findings_forbidden_total(char *latest, size_t size);

/* Forgets the count and the latest line (tests; us_findings_reset). */
void us_findings_forbidden_reset(void);

/* The CUDA error a forbidden call returns. */
#define US_ERR_FORBIDDEN cudaErrorNotPermitted

#endif
