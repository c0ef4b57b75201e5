/* chain.c - the chain every intercepted copy goes through (chain.h):
 * classify -> policy -> pipeline or native -> findings. */
#include "chain.h"

#include <stdatomic.h>

#include "classify.h"
#include "config.h"
#include "context.h"
#include "d2d_stage.h"
#include "engine_late.h"
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
    struct us_decision decision;
    us_policy_decide(c, cfg, &facts, &decision);

    /* case D: whether this stream's same-device copies start late is
     * measured (a timed copy now and then); a late one found now is
     * reported with how late it was */
    struct us_engine_call engine = {0};
    if (c->path == US_PATH_D2D_SAME && (wanted || (cfg->fix && cfg->fix_busy_d2d)))
        us_engine_begin(c, cfg, &engine);
    if (engine.late_ns > 0 && decision.rule_count < US_MAX_RULES_PER_CALL)
        decision.rules[decision.rule_count++] = US_RULE_busy_engine_d2d;
    bool stage = engine.stage && cfg->fix && cfg->fix_busy_d2d;

    bool record = decision.rule_count > 0 && wanted;
    if (!record && decision.action == US_ACT_NATIVE && !stage) {
        cudaError_t native = us_engine_native(c, &engine);
        us_engine_end(&engine);
        return native;
    }

    struct us_site site;
    if (record) {
        us_site_capture(&site);
        for (int i = 0; i < decision.rule_count; i++)
            if (us_findings_forbidden(decision.rules[i], &site, us_copy_api_name(c->api))) {
                us_engine_end(&engine);
                return US_ERR_FORBIDDEN;
            }
    }

    us_state_enter();
    uint64_t start = us_now_ns();
    cudaError_t result = cudaSuccess;
    bool fixed = stage ? us_d2d_stage(c, cfg, &engine, &result) : run_pipeline(decision.action, c, &result);
    if (!fixed)
        result = us_engine_native(c, &engine);
    uint64_t end = us_now_ns();
    us_state_leave();
    us_engine_end(&engine);

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
                .context = NULL,
                /* the legacy-stream finding is about the stream, which stays */
                .fixed = fixed && decision.rules[i] != US_RULE_legacy_stream,
            };
            if (decision.rules[i] == US_RULE_busy_engine_d2d) {
                /* about an earlier timed copy of this stream: how late it started */
                f.bytes = engine.late_bytes;
                f.held_ns = engine.late_ns;
                f.context = engine.context;
                f.fixed = false;
            }
            us_findings_record(&f, &site);
        }
    }
    return result;
}
