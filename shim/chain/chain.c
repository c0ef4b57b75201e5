/* chain.c - the chain every intercepted copy goes through (chain.h):
 * classify -> policy -> pipeline or native -> findings. */
#include "chain.h"

#include <stdatomic.h>

#include "classify.h"
#include "config.h"
#include "context.h"
#include "log.h"
#include "findings.h"
#include "pipeline.h"
#include "policy.h"
#include "real.h"
#include "state.h"
#include "watch.h"

static bool run_pipeline(enum us_action action, const struct us_copy *c, cudaError_t *result)
{
    static atomic_bool logged_foreign;
    if (action != US_ACT_NATIVE && us_context_foreign()) {
        us_log_once(&logged_foreign, US_LOG_INFO,
                    "a copy is issued in a context the program created (cuCtxCreate): the shim's streams, events and "
                    "slots belong to primary contexts, so such copies go native (reported, not rewritten)");
        return false;
    }
    switch (action) {
    case US_ACT_PEER: return us_pipeline_peer(c, result);
    case US_ACT_H2D: return us_pipeline_h2d(c, result);
    case US_ACT_D2H: return us_pipeline_d2h(c, result);
    default: return false;
    }
}

cudaError_t us_copy_run(struct us_copy *c)
{
    if (us_passthrough())
        return us_copy_native(c);
    us_state_note_call();
    us_classify_copy(c);
    const struct us_config *cfg = us_config();
    struct us_call_facts facts = { .legacy_with_blocking = us_legacy_contended(c->stream_kind) };
    bool wanted = us_findings_wanted();
    CUcontext context = NULL;
    if (c->path == US_PATH_D2D_SAME && wanted)
        facts.context_competes = us_context_competes(c->src_mem.device, &context);
    struct us_decision decision;
    us_policy_decide(c, cfg, &facts, &decision);

    bool record = decision.rule_count > 0 && wanted;
    if (!record && decision.action == US_ACT_NATIVE)
        return us_copy_native(c);

    struct us_site site;
    if (record) {
        us_site_capture(&site);
        for (int i = 0; i < decision.rule_count; i++)
            if (us_findings_forbidden(decision.rules[i], &site, us_copy_api_name(c->api)))
                return US_ERR_FORBIDDEN;
    }

    us_state_enter();
    uint64_t start = us_now_ns();
    cudaError_t result = cudaSuccess;
    bool fixed = run_pipeline(decision.action, c, &result);
    if (!fixed)
        result = us_copy_native(c);
    uint64_t end = us_now_ns();
    us_state_leave();

    if (record) {
        for (int i = 0; i < decision.rule_count; i++) {
            struct us_finding f = {
                .rule = decision.rules[i],
                .api = us_copy_api_name(c->api),
                .bytes = c->bytes,
                .path = c->path,
                .src_device = c->src_mem.device,
                .dst_device = c->dst_mem.device,
                .stream = c->stream,
                .stream_kind = c->stream_kind,
                .start_ns = start,
                .held_ns = end - start,
                .context = context,
                /* the legacy-stream finding is about the stream, which stays */
                .fixed = fixed && decision.rules[i] != US_RULE_legacy_stream,
            };
            us_findings_record(&f, &site);
        }
    }
    return result;
}
