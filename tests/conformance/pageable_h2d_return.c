/* Rule: where a cudaMemcpyAsync from pageable (malloc) memory to the device
 * returns (measured on an H200: 4 KiB and 1 MiB returned at once,
 * reading the source at call time, before earlier work on the stream; 64 MiB
 * waited for the stream). Arguments: small (1 MiB) | large (64 MiB), and
 * first: the process's first copies, the second straight after the first
 * (no pause for one-time setup: a shim's staging pool still growing).
 *
 * A kernel on the (non-blocking) stream sets a flag after 300 ms; the copy
 * follows it. Outcome: returned=early|after_drain (the flag when the call
 * returned) and source=consumed|read_late (the host overwrites the source at
 * once after the call; the device must hold the original). */
#include "conform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    size_t words = (cf_arg("large") ? (size_t)64 << 20 : (size_t)1 << 20) / sizeof(uint32_t);
    uint32_t *h = malloc(words * sizeof *h);
    if (h == NULL)
        cf_ck(cudaErrorMemoryAllocation, "malloc", __FILE__, __LINE__);
    for (size_t i = 0; i < words; i++)
        h[i] = cf_word(i, 41);
    uint32_t *d = cf_words(0, words);
    cudaStream_t s = cf_stream(0, false);
    int *f = cf_flags(1);
    CF_CK(cudaMemcpyAsync(d, h, words * sizeof *h, cudaMemcpyHostToDevice, s)); /* warm-up */
    CF_CK(cudaStreamSynchronize(s));
    /* one-time setup that outlives the warm-up's call: a shim pins its
     * staging pool on a thread of its own after the process's first large
     * copy (docs/pipelines.md; about 26 ms for 64 MiB on an H100) */
    if (!cf_arg("first"))
        usleep(300000);

    cf_set_flag_after(s, &f[0], 1, 300);
    CF_CK(cudaMemcpyAsync(d, h, words * sizeof *h, cudaMemcpyHostToDevice, s));
    int flag = *(volatile int *)&f[0];
    memset(h, 0, words * sizeof *h);
    size_t right = cf_words_right(d, words, 41);
    fprintf(stderr, "%zu of %zu words right\n", right, words);
    cf_result("returned=%s source=%s", flag ? "after_drain" : "early", right == words ? "consumed" : "read_late");
    free(h);
    return 0;
}
