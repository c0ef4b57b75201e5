/* Rule: a cudaMemcpyAsync from pinned host memory to the device reads its
 * source when it runs on its stream, after the work it waits for, not when it
 * is issued. The stream waits (an event) for a D2H that writes the pinned
 * buffer behind a 200 ms kernel; the H2D issued right after must carry what
 * that D2H wrote. Arguments: registered (cudaHostRegister'ed malloc memory
 * instead of cudaMallocHost), small (52 words, 208 bytes, instead of 1 MiB),
 * per_thread (the reading copy on the per-thread stream after the legacy
 * stream waited for the event: the implicit ordering of a blocking stream
 * behind the legacy stream), blocking (the same on a created blocking stream),
 * own_wait (the event waited for on the reading stream itself, not on the
 * legacy stream), on_legacy (the reading copy on the legacy stream),
 * writer_on_legacy (the D2H behind the kernel on the legacy stream itself, the
 * reading copy on the per-thread or a blocking stream, no event),
 * writer_on_per_thread (the writer on the per-thread or, with blocking, a
 * blocking stream, the reading copy on the legacy stream; with sync_api by
 * cudaMemcpy), bN (N bytes),
 * legacy_copy (with per_thread: a small D2D copy on
 * the legacy stream after its wait, as the GPU stress's chain had). Outcome:
 * late (every word the new one), early
 * (every word the old one: read at issue), or mixed. */
#include "conform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OLD_SEED 7u
#define NEW_SEED 71u

static int report(const uint32_t *dst, size_t words)
{
    size_t fresh = cf_words_right(dst, words, NEW_SEED), stale = cf_words_right(dst, words, OLD_SEED);
    fprintf(stderr, "%zu of %zu words new, %zu old\n", fresh, words, stale);
    cf_result("%s", fresh == words ? "late" : stale == words ? "early" : "mixed");
    return 0;
}

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    size_t words = cf_arg("small") ? 52 : ((size_t)1 << 20) / sizeof(uint32_t);
    static const size_t sizes[] = {4096, 4100, 8192, 16384, 32768, 65536, 65540, 262144};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char name[16];
        snprintf(name, sizeof name, "b%zu", sizes[k]);
        if (cf_arg(name))
            words = sizes[k] / sizeof(uint32_t);
    }
    size_t bytes = words * sizeof(uint32_t);
    uint32_t *h;
    if (cf_arg("registered")) {
        h = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        if (h == NULL)
            cf_ck(cudaErrorMemoryAllocation, "aligned_alloc", __FILE__, __LINE__);
        CF_CK(cudaHostRegister(h, (bytes + 4095) / 4096 * 4096, cudaHostRegisterDefault));
    } else {
        CF_CK(cudaMallocHost((void **)&h, bytes));
    }
    for (size_t i = 0; i < words; i++)
        h[i] = cf_word(i, OLD_SEED);
    uint32_t *src = cf_words(0, words), *dst = cf_words(0, words), *scratch = cf_words(0, 16);
    cudaStream_t w = cf_stream(0, false), r = cf_stream(0, false);
    cudaEvent_t ev;
    CF_CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    if (cf_arg("writer_on_per_thread")) {
        /* the other way round: the writer on the per-thread or a blocking
         * stream, the reading copy on the legacy stream, no event */
        cudaStream_t wr = cf_arg("blocking") ? cf_stream(0, true) : cudaStreamPerThread;
        cf_fill(wr, src, words, NEW_SEED, 200);
        CF_CK(cudaMemcpyAsync(h, src, bytes, cudaMemcpyDeviceToHost, wr));
        if (cf_arg("sync_api")) /* cudaMemcpy: the legacy stream, and it returns when done */
            CF_CK(cudaMemcpy(dst, h, bytes, cudaMemcpyHostToDevice));
        else
            CF_CK(cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice, cudaStreamLegacy));
        return report(dst, words);
    }
    if (cf_arg("writer_on_legacy")) {
        /* the writer's work on the legacy stream itself, the reader on the
         * per-thread or a blocking stream, no event: the implicit ordering alone */
        cf_fill(cudaStreamLegacy, src, words, NEW_SEED, 200);
        CF_CK(cudaMemcpyAsync(h, src, bytes, cudaMemcpyDeviceToHost, cudaStreamLegacy));
        CF_CK(cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice,
                              cf_arg("blocking") ? cf_stream(0, true) : cudaStreamPerThread));
        return report(dst, words);
    }
    cf_fill(w, src, words, NEW_SEED, 200);
    CF_CK(cudaMemcpyAsync(h, src, bytes, cudaMemcpyDeviceToHost, w)); /* lands about 200 ms from now */
    CF_CK(cudaEventRecord(ev, w));
    if (cf_arg("per_thread") || cf_arg("blocking") || cf_arg("on_legacy")) {
        cudaStream_t to = cf_arg("per_thread") ? cudaStreamPerThread
                          : cf_arg("blocking") ? cf_stream(0, true)
                                               : cudaStreamLegacy;
        CF_CK(cudaStreamWaitEvent(cf_arg("own_wait") ? to : cudaStreamLegacy, ev, 0));
        if (cf_arg("legacy_copy"))
            CF_CK(cudaMemcpyAsync(scratch + 8, scratch, 5 * sizeof *scratch, cudaMemcpyDeviceToDevice, cudaStreamLegacy));
        CF_CK(cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice, to));
    } else {
        CF_CK(cudaStreamWaitEvent(r, ev, 0));
        CF_CK(cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice, r));
    }
    return report(dst, words);
}
