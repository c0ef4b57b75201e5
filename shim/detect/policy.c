/* policy.c - see policy.h. */
#include "policy.h"
#include "hot.h"

static void add_rule(struct us_decision *d, enum us_rule_id rule)
{
    if (d->rule_count < US_MAX_RULES_PER_CALL)
        d->rules[d->rule_count++] = rule;
}

/* Whether a pageable H2D of this size and API is rewritten: from
 * h2d_min_bytes, and a synchronous one (cudaMemcpy) only above
 * h2d_idle_native_bytes (0 by default: every one). Rewritten, a synchronous
 * copy waits for the stream's earlier work all the same (its transfer
 * follows that work), so where the driver's staging is the faster it spares
 * nothing (option h2d_idle_native_bytes; an asynchronous one is decided in
 * pipeline_h2d.c, where the stream can be asked whether it is idle). */
US_HOT static bool h2d_rewritten(const struct us_copy *c, const struct us_config *cfg)
{
    return cfg->fix && cfg->fix_h2d && c->bytes >= cfg->h2d_min_bytes &&
           !(us_copy_is_sync(c) && c->bytes <= cfg->h2d_idle_native_bytes);
}

static bool d2h_rewritten(const struct us_copy *c, const struct us_config *cfg)
{
    return cfg->fix && cfg->fix_d2h && c->bytes >= cfg->d2h_min_bytes;
}

static enum us_action rewrite_for(const struct us_copy *c, const struct us_config *cfg)
{
    switch (c->path) {
    case US_PATH_D2D_STAGED:
        return cfg->fix && cfg->fix_peer && c->bytes >= cfg->peer_min_bytes ? US_ACT_PEER : US_ACT_NATIVE;
    case US_PATH_H2D_PAGEABLE: return h2d_rewritten(c, cfg) ? US_ACT_H2D : US_ACT_NATIVE;
    case US_PATH_D2H_PAGEABLE: return d2h_rewritten(c, cfg) ? US_ACT_D2H : US_ACT_NATIVE;
    default: return US_ACT_NATIVE;
    }
}

US_HOT bool us_policy_native_by_kind(const struct us_copy *c, const struct us_config *cfg)
{
    if (us_copy_is_peer(c))
        return false;
    switch (c->kind) {
    case cudaMemcpyHostToDevice: return !h2d_rewritten(c, cfg);
    case cudaMemcpyDeviceToHost: return !d2h_rewritten(c, cfg);
    case cudaMemcpyHostToHost: return true;
    default: return false;
    }
}

US_HOT void us_policy_decide(const struct us_copy *c, const struct us_config *cfg, const struct us_call_facts *facts,
                      struct us_decision *out)
{
    out->action = rewrite_for(c, cfg);
    out->rule_count = 0;
    switch (c->path) {
    case US_PATH_H2D_PAGEABLE: add_rule(out, US_RULE_pageable_h2d); break;
    case US_PATH_D2H_PAGEABLE: add_rule(out, US_RULE_pageable_d2h); break;
    case US_PATH_D2D_STAGED: add_rule(out, US_RULE_staged_peer); break;
    case US_PATH_H2D_PINNED:
    case US_PATH_D2H_PINNED:
    case US_PATH_H2H:
        /* a synchronous copy that touches the host holds the caller */
        if (us_copy_is_sync(c))
            add_rule(out, US_RULE_sync_memcpy);
        break;
    /* US_PATH_D2D_SAME: busy_engine_d2d is measured, not decided here
     * (detect/engine_late.h) */
    default: break;
    }
    if (facts->legacy_with_blocking)
        add_rule(out, US_RULE_legacy_stream);
}
