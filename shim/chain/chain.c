/* chain.c - the chain every intercepted copy goes through (chain.h):
 * classify -> policy -> pipeline or native -> findings. */
#include "chain.h"
#include "hot.h"
#include "hang.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>

#include "classify.h"
#include "config.h"
#include "context.h"
#include "d2d_stage.h"
#include "engine_late.h"
#include "log.h"
#include "findings.h"
#include "hostcopy.h"
#include "lanes.h"
#include "legacy_stream.h"
#include "staging.h"
#include "pipeline.h"
#include "policy.h"
#include "probe.h"
#include "ptrtable.h"
#include "real.h"
#include "real_driver.h"
#include "rules.h"
#include "state.h"
#include "watch.h"

/* The call site of a copy's findings. Taken before the copy only where
 * strict mode may refuse it; else after the copy is issued: after a native
 * call (an asynchronous one's transfer runs meanwhile), or between the D2H
 * pipeline's start and finish, while its first chunk is on the GPU, so that
 * the walk overlaps the GPU's work instead of adding to the caller's time.
 * Always from this file's frames, so that the walk meets the frames a capture
 * before the copy met: the unwinder reads a frame's tables the first time it
 * meets its address. */
struct copy_site {
    struct us_site site;
    bool taken;
};

/* Inlined, as copy_run is into us_copy_run: the unwinder's first walk
 * through a return address it has not met costs 2.5-3 us on an H200 host
 * (libunwind reads the tables with signals blocked, a dozen system calls:
 * unwinder.c), and a process's
 * first copy met five, four of them the shim's own. A frame less on the
 * path is an address less to meet: the first 4 B H2D's walk took 13-14 us
 * on an H200 host (tools/bench/firstcall.sh). */
__attribute__((always_inline)) static inline void take_site(struct copy_site *s)
{
    if (!s->taken) {
        us_site_capture(&s->site);
        US_PROBE_STAMP(site_taken);
    }
    s->taken = true;
}

/* The D2H pipeline, with the call site taken (when `site` is not NULL)
 * while its first chunks are on the GPU. */
static bool run_d2h(const struct us_copy *c, const struct us_ctx *home, struct copy_site *site, cudaError_t *result)
{
    struct us_d2h_run run;
    if (!us_pipeline_d2h_start(c, home, &run))
        return false;
    if (site != NULL)
        take_site(site);
    *result = us_pipeline_d2h_finish(&run);
    return true;
}

/* A rewritten copy on the report's timeline: named after the rule its
 * pipeline fixes (the rules table's id), on the device whose copy engine
 * moved it, from the times around the whole call (the finding's own: one
 * pair of clock reads). */
static void record_span(enum us_action action, const struct us_copy *c, uint64_t start, uint64_t end)
{
    enum us_rule_id rule;
    int device;
    switch (action) {
    case US_ACT_PEER: rule = US_RULE_staged_peer, device = c->dst_mem.device; break;
    case US_ACT_H2D: rule = US_RULE_pageable_h2d, device = c->dst_mem.device; break;
    case US_ACT_D2H: rule = US_RULE_pageable_d2h, device = c->src_mem.device; break;
    default: return;
    }
    us_findings_span(us_rules[rule].id, device, start, end, c->bytes);
}

/* The pipeline the action names; *held: it did the copy but held its
 * caller behind queued work all the same (us_pipeline_h2d_held), so its
 * findings say held, not fixed. */
static bool run_pipeline(enum us_action action, const struct us_copy *c, const struct us_ctx *home,
                         struct copy_site *site, cudaError_t *result, bool *held)
{
    *held = false;
    switch (action) {
    case US_ACT_PEER: return us_pipeline_peer(c, home, result);
    case US_ACT_H2D: return us_pipeline_h2d_held(c, home, result, held);
    case US_ACT_D2H: return run_d2h(c, home, site, result);
    default: return false;
    }
}

static bool may_forbid(const struct us_decision *d)
{
    for (int i = 0; i < d->rule_count; i++)
        if (us_findings_may_forbid(d->rules[i]))
            return true;
    return false;
}

/* What the fix layer made in a context that is gone (context.h). */
static void forget_context(const struct us_ctx *gone)
{
    us_lanes_forget_context(gone);
    us_staging_forget_context(gone);
    us_engine_forget_context(gone);
}

static pthread_once_t forget_once = PTHREAD_ONCE_INIT;

static void register_forget(void)
{
    us_context_on_forget(forget_context);
}

/* The context the copy is issued in: looked up once per copy, for the
 * engine's probe and the pipelines alike (one cuCtxGetCurrent). */
static const struct us_ctx *copy_context(const struct us_ctx **home, bool *looked)
{
    if (!*looked) {
        pthread_once(&forget_once, register_forget);
        *home = us_context_this();
        *looked = true;
    }
    return *home;
}

static inline __attribute__((always_inline)) cudaError_t copy_run(struct us_copy *c);

/* The runtime's first pointer queries of host memory cost microseconds (8-9 us
 * on an H100 host): asked here, of a heap and a stack address, inside the
 * program's first device allocation rather than in its first copies. On an
 * H200 host (15-20 processes each, the order turning, three runs,
 * tools/bench/firstcall.sh) a process's first 4 B pageable H2D took 3-9 us
 * less, its first 4 B D2H 0-6 us less. Runs in a fixed order had shown no
 * difference: the order alone moved first copies by 10-15 us. */
static void warm_pointer_query(void)
{
    const struct us_real_api *real = us_real();
    if (real->cudaPointerGetAttributes == NULL)
        return;
    struct cudaPointerAttributes attr;
    int on_stack = 0;
    void *on_heap = malloc(64);
    if (on_heap != NULL)
        (void)real->cudaPointerGetAttributes(&attr, on_heap);
    (void)real->cudaPointerGetAttributes(&attr, &on_stack);
    free(on_heap);
}

/* Pageable to the runtime: the shim's own zeroed data. */
const unsigned char us_copy_rehearsal_bytes[4];

bool us_copy_warm(const void *device_bytes, size_t size)
{
    static atomic_bool warmed;
    if (atomic_load_explicit(&warmed, memory_order_relaxed) || atomic_exchange(&warmed, true))
        return false;
    const struct us_config *cfg = us_config();
    /* the threads first, so that their start (stacks, first wait) overlaps
     * the pinning rather than the program's first copies. With the threads
     * started here, in either order, the first 4 B D2H was 3-9 us slower on
     * H100 hosts than without them; the cause is not found
     * (tools/bench/firstcall.sh) */
    if (cfg->fix && (cfg->fix_d2h || cfg->fix_h2d)) {
        us_hostcopy_start();
        /* libcuda's functions for the pipelines, looked up now: six
         * look-ups inside a first copy made it 7-9 us slower on an H200
         * host */
        (void)us_real_driver();
    }
    us_staging_warm(device_bytes, size);
    us_engine_prepare(cfg); /* the timed copies' table and a timing pair, made before the first copy */
    /* this thread's first-use costs: its reader slot in the pointer table,
     * and with findings, its first walk (the unwinder's per-thread cache),
     * its id, the runtime's first host-pointer queries */
    us_ptrtable_prepare_thread();
    if (us_findings_wanted()) {
        struct us_site site;
        us_site_capture(&site);
        us_findings_prepare_thread();
        warm_pointer_query();
        return true;
    }
    return false;
}

US_HOT cudaError_t us_copy_run(struct us_copy *c)
{
    c->rehearsal = c->src == us_copy_rehearsal_bytes;
    if (us_passthrough())
        return us_copy_native(c);
    if (!c->rehearsal)
        US_PROBE_ENTER();
    /* legacy_stream (case E): the copy may go to another stream; a
     * synchronous one only to the per-thread stream (its _ptds variant). A
     * rehearsal moves nothing: the stream a copy moves to is made on first use */
    struct us_legacy_move move = {.ordered = false};
    if (!c->rehearsal && !us_copy_is_sync(c))
        c->stream = us_legacy_move_begin(c->stream, us_copy_is_per_thread(c), c->driver_fn != NULL, &move);
    else if (!c->rehearsal && c->api == US_API_MEMCPY && us_legacy_streamless_to_per_thread(false))
        c->api = US_API_MEMCPY_PTDS;
    struct us_hang_mark hang;
    cudaStream_t stream = us_copy_stream(c);
    us_hang_enter(&hang, us_copy_api_name(c->api), stream, stream == cudaStreamLegacy);
    cudaError_t result = copy_run(c);
    us_hang_leave(&hang);
    us_legacy_move_end(&move, result == cudaSuccess);
    US_PROBE_LEAVE(us_copy_api_name(c->api), us_copy_path_name(c->path), c->bytes);
    return result;
}

/* The copy's path, then its rules and action (with the one fact policy asks
 * beyond the classification). may_remember: host pages the runtime called
 * pageable before are not asked about again (hostpages.h); never in strict
 * mode, which may refuse the copy on its classification. */
static void classify_and_decide(struct us_copy *c, const struct us_config *cfg, bool may_remember,
                                struct us_decision *decision)
{
    us_classify_copy(c, may_remember && cfg->mode != US_MODE_STRICT);
    US_PROBE_STAMP(kinds_known);
    struct us_call_facts facts = { .legacy_with_blocking = us_legacy_contended(c->stream_kind) };
    us_policy_decide(c, cfg, &facts, decision);
    US_PROBE_STAMP(classified);
}

/* The findings of one copy, at its call site; `engine`: the busy engine's
 * measurement (busy_engine_d2d), zero for any other copy. */
US_HOT static void record_findings(const struct us_copy *c, const struct us_decision *decision,
                            const struct us_engine_call *engine, const struct us_site *site, uint64_t start,
                            uint64_t end, bool fixed)
{
    _Static_assert(US_MAX_RULES_PER_CALL <= US_FINDINGS_PER_CALL_MAX, "a call's findings recorded at once");
    struct us_finding found[US_MAX_RULES_PER_CALL];
    for (int i = 0; i < decision->rule_count; i++) {
        struct us_finding *f = &found[i];
        *f = (struct us_finding){
            .rule = decision->rules[i],
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
            .fixed = fixed && decision->rules[i] != US_RULE_legacy_stream,
        };
        if (decision->rules[i] == US_RULE_busy_engine_d2d) {
            /* about an earlier timed copy of this stream: how late it started */
            f->bytes = engine->late_bytes;
            f->held_ns = engine->late_ns;
            f->context = engine->context;
            f->fixed = false;
        }
    }
    us_findings_record_call(found, decision->rule_count, site);
    US_PROBE_STAMP(recorded);
}

/* A copy that goes native whatever its memory (us_policy_native_by_kind)
 * and whose host side the shim's table does not know: the native call
 * first, then the classification and the findings. Classifying such memory
 * asks the runtime (0.13 us a call, 8-9 us a process's first: H100 and H200
 * hosts, docs/performance.md), and after the call that, with the call site,
 * overlaps an asynchronous copy's transfer instead of delaying its start.
 * Strict mode classifies first (copy_run): a copy it refuses must be known
 * before the call. */
static cudaError_t native_then_classify(struct us_copy *c, const struct us_config *cfg)
{
    if (!us_findings_wanted())
        return us_copy_native(c);
    us_state_enter();
    uint64_t start = us_now_ns();
    cudaError_t result = us_copy_native(c);
    uint64_t end = us_now_ns();
    US_PROBE_STAMP(native_done);
    us_state_leave();
    struct us_decision decision;
    classify_and_decide(c, cfg, true, &decision);
    if (decision.rule_count > 0) {
        struct copy_site site = {.taken = false};
        struct us_engine_call no_engine = {0};
        if (c->rehearsal) /* the walk's slots learnt now, not at a copy (walkmemo.h) */
            us_callsite_learn_next();
        take_site(&site);
        if (!c->rehearsal)
            record_findings(c, &decision, &no_engine, &site.site, start, end, false);
    }
    return result;
}

static inline __attribute__((always_inline)) cudaError_t copy_run(struct us_copy *c)
{
    if (!c->rehearsal)
        us_state_note_call();
    const struct us_config *cfg = us_config();
    if (cfg->mode != US_MODE_STRICT && us_policy_native_by_kind(c, cfg) && us_classify_host_unknown(c))
        return native_then_classify(c, cfg);
    if (c->rehearsal) /* only the path above is rehearsed: every other one issues work */
        return cudaSuccess;
    bool wanted = us_findings_wanted();
    struct us_decision decision;
    classify_and_decide(c, cfg, true, &decision);

    /* case D: whether this stream's same-device copies start late is
     * measured (a timed copy now and then); a late one found now is
     * reported with how late it was */
    struct us_engine_call engine = {0};
    const struct us_ctx *home = NULL;
    bool looked = false;
    if (c->path == US_PATH_D2D_SAME && (wanted || (cfg->fix && cfg->fix_busy_d2d)))
        us_engine_begin(c, cfg, copy_context(&home, &looked), &engine);
    if (engine.late_ns > 0 && decision.rule_count < US_MAX_RULES_PER_CALL)
        decision.rules[decision.rule_count++] = US_RULE_busy_engine_d2d;
    bool stage = engine.stage && cfg->fix && cfg->fix_busy_d2d;

    bool record = decision.rule_count > 0 && wanted;
    if (!record && decision.action == US_ACT_NATIVE && !stage) {
        cudaError_t native = us_engine_native(c, &engine);
        US_PROBE_STAMP(native_done);
        us_engine_end(&engine);
        return native;
    }

    struct copy_site site = {.taken = false};
    if (record && may_forbid(&decision)) {
        take_site(&site);
        for (int i = 0; i < decision.rule_count; i++)
            if (us_findings_forbidden(decision.rules[i], &site.site, us_copy_api_name(c->api))) {
                us_engine_end(&engine);
                return US_ERR_FORBIDDEN;
            }
    }

    us_state_enter();
    uint64_t start = us_now_ns();
    cudaError_t result = cudaSuccess;
    bool held = false;
    bool fixed = stage ? us_d2d_stage(c, cfg, copy_context(&home, &looked), &engine, &result)
                 : decision.action != US_ACT_NATIVE &&
                       run_pipeline(decision.action, c, copy_context(&home, &looked), record ? &site : NULL,
                                    &result, &held);
    if (!fixed && decision.action != US_ACT_NATIVE && (c->src_mem.remembered || c->dst_mem.remembered)) {
        /* a pipeline that declined a copy classified on a remembered answer
         * may have found it wrong (the memory pinned unseen): the findings
         * are the runtime's answer's */
        classify_and_decide(c, cfg, false, &decision);
        record = decision.rule_count > 0 && wanted;
    }
    if (!fixed) {
        result = us_engine_native(c, &engine);
        US_PROBE_STAMP(native_done);
    }
    uint64_t end = us_now_ns();
    us_state_leave();
    us_engine_end(&engine);
    if (fixed && !stage)
        record_span(decision.action, c, start, end);

    if (record) {
        take_site(&site);
        record_findings(c, &decision, &engine, &site.site, start, end, fixed && !held);
    }
    return result;
}
