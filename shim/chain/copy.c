/* copy.c - the chain every intercepted copy goes through (copy.h):
 * classify -> policy -> pipeline or native -> findings. */
#include "copy.h"

#include "classify.h"
#include "config.h"
#include "context.h"
#include "findings.h"
#include "pipeline.h"
#include "policy.h"
#include "real.h"
#include "state.h"
#include "watch.h"

static const char *const api_names[US_API_COUNT] = {
    [US_API_MEMCPY] = "cudaMemcpy",
    [US_API_MEMCPY_PTDS] = "cudaMemcpy_ptds",
    [US_API_MEMCPY_ASYNC] = "cudaMemcpyAsync",
    [US_API_MEMCPY_ASYNC_PTSZ] = "cudaMemcpyAsync_ptsz",
    [US_API_MEMCPY_PEER] = "cudaMemcpyPeer",
    [US_API_MEMCPY_PEER_ASYNC] = "cudaMemcpyPeerAsync",
};

const char *us_copy_api_name(enum us_copy_api api)
{
    return (unsigned)api < US_API_COUNT ? api_names[api] : "cudaMemcpy?";
}

const char *us_copy_path_name(enum us_copy_path path)
{
    switch (path) {
    case US_PATH_H2H: return "H2H";
    case US_PATH_H2D_PINNED: return "H2D pinned";
    case US_PATH_H2D_PAGEABLE: return "H2D pageable";
    case US_PATH_D2H_PINNED: return "D2H pinned";
    case US_PATH_D2H_PAGEABLE: return "D2H pageable";
    case US_PATH_D2D_SAME: return "D2D";
    case US_PATH_D2D_PEER: return "D2D peer";
    case US_PATH_D2D_STAGED: return "D2D staged";
    default: return "unknown";
    }
}

/* Calls through a NULL entry are answered US_ERR_NO_REAL, never made. */
#define CALL_REAL(fn, ...) (real->fn != NULL ? real->fn(__VA_ARGS__) : US_ERR_NO_REAL)

cudaError_t us_copy_native(const struct us_copy *c)
{
    const struct us_real_api *real = us_real();
    switch (c->api) {
    case US_API_MEMCPY: return CALL_REAL(cudaMemcpy, c->dst, c->src, c->bytes, c->kind);
    case US_API_MEMCPY_PTDS: return CALL_REAL(cudaMemcpy_ptds, c->dst, c->src, c->bytes, c->kind);
    case US_API_MEMCPY_ASYNC: return CALL_REAL(cudaMemcpyAsync, c->dst, c->src, c->bytes, c->kind, c->stream);
    case US_API_MEMCPY_ASYNC_PTSZ:
        return CALL_REAL(cudaMemcpyAsync_ptsz, c->dst, c->src, c->bytes, c->kind, c->stream);
    case US_API_MEMCPY_PEER:
        return CALL_REAL(cudaMemcpyPeer, c->dst, c->peer_dst_device, c->src, c->peer_src_device, c->bytes);
    case US_API_MEMCPY_PEER_ASYNC:
        return CALL_REAL(cudaMemcpyPeerAsync, c->dst, c->peer_dst_device, c->src, c->peer_src_device, c->bytes,
                         c->stream);
    default: return cudaErrorInvalidValue;
    }
}

static bool run_pipeline(enum us_action action, const struct us_copy *c, cudaError_t *result)
{
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
