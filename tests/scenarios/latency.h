/* latency.h - launch latency of one thread while another copies D2H in a
 * loop (case C and its clean twin). */
#ifndef SCN_LATENCY_H
#define SCN_LATENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct scn_latency {
    /* in */
    const void *dsrc;      /* device memory of device 0, filled with `seed` */
    unsigned char *host;   /* n bytes of host memory the copier copies into */
    size_t n;
    uint64_t seed;
    double gap_ms;         /* the copier's pause between copies */
    double base_ms, dur_ms;/* how long the launcher runs alone, then with the copier */
    /* out */
    size_t base_launches, launches, over_1ms;
    double base_p99_ms, base_max_ms, p50_ms, p99_ms, max_ms;
    long copies;
    double copy_ms;        /* mean time of one copy (call + synchronize) */
    bool ok;               /* every copy landed */
};

/* Thread B launches empty kernels on its own non-blocking stream of device
 * 0 and times each launch call: first alone, then while thread A copies
 * dsrc to host (cudaMemcpyAsync + cudaStreamSynchronize) in a loop.
 * Returns false if threads or memory could not be had. */
bool scn_launch_latency(struct scn_latency *l);

#endif
