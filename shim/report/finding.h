/* finding.h - one finding, as an entry or the copy chain reports it
 * (findings.h records it). */
#ifndef UNSTALL_FINDING_H
#define UNSTALL_FINDING_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "copy.h"
#include "rules.h"

struct us_finding {
    enum us_rule_id rule;
    const char *api;          /* "cudaMemcpyAsync", ... */
    size_t bytes;             /* 0 where not a copy */
    enum us_copy_path path;   /* US_PATH_UNKNOWN where not a copy */
    int src_device, dst_device; /* -1 where not applicable */
    cudaStream_t stream;
    enum us_stream_kind stream_kind;
    uint64_t start_ns;        /* us_now_ns() when the call began */
    uint64_t held_ns;         /* how long the call held the caller */
    bool fixed;               /* the shim rewrote the call */
    const void *context;      /* the issuing CUDA context where a rule depends on it, else NULL */
};

/* The devices a finding names, a bit each (devices 0 to 63): what a row's
 * `devices` gathers. */
static inline uint64_t us_finding_device_bits(const struct us_finding *f)
{
    uint64_t bits = 0;
    if (f->src_device >= 0 && f->src_device < 64)
        bits |= 1ull << f->src_device;
    if (f->dst_device >= 0 && f->dst_device < 64)
        bits |= 1ull << f->dst_device;
    return bits;
}

#endif
