/* findings_strict.h - strict mode: a finding at or above strict_severity
 * fails its call (or aborts, strict_action=abort) unless option allow names
 * its rule, or its rule at a call site matching a pattern. */
#ifndef UNSTALL_FINDINGS_STRICT_H
#define UNSTALL_FINDINGS_STRICT_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "callsite.h"
#include "rules.h"

/* Strict mode: true if this finding must fail the call (severity at or above
 * strict_severity and not on the allow-list). With strict_action=abort this
 * prints the finding and aborts instead of returning. */
bool us_findings_forbidden(enum us_rule_id rule, const struct us_site *site, const char *api);

/* The CUDA error a forbidden call returns. */
#define US_ERR_FORBIDDEN cudaErrorNotPermitted

#endif
