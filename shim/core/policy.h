/* policy.h - what to do with a classified copy: which rules it triggers and
 * whether a pipeline rewrites it. Pure: configuration and classification
 * in, decision out (unit tested without a runtime). */
#ifndef UNSTALL_POLICY_H
#define UNSTALL_POLICY_H

#include "config.h"
#include "copy.h"
#include "rules.h"

enum us_action { US_ACT_NATIVE, US_ACT_PEER, US_ACT_H2D, US_ACT_D2H };

#define US_MAX_RULES_PER_CALL 2

struct us_decision {
    enum us_action action;
    int rule_count;
    enum us_rule_id rules[US_MAX_RULES_PER_CALL];
};

/* legacy_with_blocking: the copy is on the legacy default stream of a device
 * that has blocking streams (the caller looks that up only for legacy copies). */
void us_policy_decide(const struct us_copy *c, const struct us_config *cfg, bool legacy_with_blocking,
                      struct us_decision *out);

#endif
