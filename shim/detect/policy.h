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

/* What the caller looked up beyond the classification (only when findings
 * are wanted, and only for the copies each fact concerns). */
struct us_call_facts {
    bool legacy_with_blocking; /* on the legacy stream of a device with blocking streams */
};

void us_policy_decide(const struct us_copy *c, const struct us_config *cfg, const struct us_call_facts *facts,
                      struct us_decision *out);

#endif
