/* Rule: a copy on the legacy stream between two devices waits for the
 * earlier work of BOTH devices' blocking streams, whichever device is current
 * (measured on H200s; docs/contract.md §1). No peer access: the copy is
 * staged by the driver. Arguments: memcpy | peer | async0 (cudaMemcpy,
 * cudaMemcpyPeer, cudaMemcpyAsync on stream 0), cur0 | cur1 (current device).
 *
 * A kernel on device 0's blocking stream writes the source d0; a kernel on
 * device 1's blocking stream writes junk into the destination d1; the one on
 * the device that is not current is the long one (300 ms against 20 ms), so
 * that a copy ordered only with the current device is caught every time.
 * Outcome: ordered (d1 is the kernel's source data, every word) or
 * unordered. */
#include "conform.h"

#include <stdio.h>

#define WORDS ((size_t)1 << 20)

int main(int argc, char **argv)
{
    cf_begin(argc, argv);
    cf_need_devices(2);
    int current = cf_arg("cur1") ? 1 : 0;
    size_t bytes = WORDS * sizeof(uint32_t);
    uint32_t *d0 = cf_words(0, WORDS), *d1 = cf_words(1, WORDS);
    cudaStream_t s0 = cf_stream(0, true), s1 = cf_stream(1, true);
    const uint32_t old = 11, fresh = 12, junk = 13;
    CF_CK(cudaSetDevice(0));
    cf_fill(s0, d0, WORDS, old, 0);
    cf_sync_all();

    CF_CK(cudaSetDevice(0));
    cf_fill(s0, d0, WORDS, fresh, current == 0 ? 20 : 300);
    CF_CK(cudaSetDevice(1));
    cf_fill(s1, d1, WORDS, junk, current == 1 ? 20 : 300);
    CF_CK(cudaSetDevice(current));
    if (cf_arg("peer"))
        CF_CK(cudaMemcpyPeer(d1, 1, d0, 0, bytes));
    else if (cf_arg("async0"))
        CF_CK(cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, 0));
    else
        CF_CK(cudaMemcpy(d1, d0, bytes, cudaMemcpyDeviceToDevice));

    size_t right = cf_words_right(d1, WORDS, fresh);
    fprintf(stderr, "%zu of %zu words right\n", right, WORDS);
    cf_result("%s", right == WORDS ? "ordered" : "unordered");
    return 0;
}
