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

/* Whether us_policy_decide's action is native for every path the copy's
 * kind and size allow, whatever its memory turns out to be: an explicit
 * host-to-device copy below h2d_min_bytes (a synchronous one up to
 * h2d_idle_native_bytes; or with its fix off), a device-to-host one below
 * d2h_min_bytes, a host-to-host one. The chain then makes the native call
 * first and classifies after (chain.c). A kind that leaves the direction
 * open (cudaMemcpyDefault), a peer copy or a device-to-device one (the
 * engine's probe needs its path): false. */
bool us_policy_native_by_kind(const struct us_copy *c, const struct us_config *cfg);

#endif
